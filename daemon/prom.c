/* prom.c — the Prometheus text exposition format; see prom.h. */
#include "prom.h"

#include <string.h>

void ccd_prom_metric(struct evbuffer *b, const char *name, const char *type, const char *help)
{
    evbuffer_add_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

void ccd_prom_label(struct evbuffer *b, const char *s)
{
    for (;;) {
        size_t run = strcspn(s, "\\\"\n");
        evbuffer_add(b, s, run);
        s += run;
        if (!*s)
            return;
        evbuffer_add(b, *s == '\n' ? "\\n" : *s == '"' ? "\\\"" : "\\\\", 2);
        s++;
    }
}
