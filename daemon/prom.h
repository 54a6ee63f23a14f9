/* prom.h — the Prometheus text exposition format (version 0.0.4) as /metrics writes it:
 * a metric's HELP and TYPE lines, and label values escaped. A label value can come from
 * outside (a KPI or model name in a model file read from the models topic, which anyone may
 * write): an unescaped quote or newline would end the line early and break every scraper's
 * parse of the whole page. */
#ifndef CCD_PROM_H
#define CCD_PROM_H

#include <event2/buffer.h>

/** "# HELP name help" and "# TYPE name type". */
void ccd_prom_metric(struct evbuffer *b, const char *name, const char *type, const char *help);

/** s as a label value, without the quotes: backslash, double quote and newline escaped as
 *  the format says (\\, \", \n). */
void ccd_prom_label(struct evbuffer *b, const char *s);

#endif
