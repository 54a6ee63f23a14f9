/*
 * topology.h — where cells are: each cell's labels (site, region, sector and any column
 * the operator adds), its neighbours and coordinates, from the file topology.path (CSV,
 * below), read at start and again at each reload (SIGHUP, POST /v1/admin/reload; a file
 * that fails to parse keeps the previous topology and is counted). The labels go into
 * every alert ("labels", proto/alert.schema.json), filter GET /v1/cells (?site=, ?region=,
 * any label) and group alerts into incidents (incidents.h). Loop thread only.
 *
 * The file: CSV, a header line naming the columns, then one line per cell; '#' lines and
 * blank lines are skipped; no quoting (a value holds no comma). Columns: cell (required,
 * the cell id as ingested), site, region, sector, neighbours (cell ids separated by ';' or
 * spaces), lat, lon (degrees); any other column is a label of that name. An empty value
 * is no label. A cell listed twice is an error naming both lines. Names and values are
 * UTF-8 text without control characters (tabs allowed in neighbours): anything else is an
 * error naming line and column (they go into JSON, Alertmanager labels and log lines).
 *
 * Labels may also come from fields of the KPI messages (ingest.labels, msg_labels.h): they
 * are kept across reloads in the topology in effect (an empty one when there is no file)
 * and merged under the file's (the file wins, label by label).
 */
#ifndef CCD_TOPOLOGY_H
#define CCD_TOPOLOGY_H

#include <stddef.h>
#include <stdint.h>

typedef struct CcdTopology CcdTopology;
typedef struct Ccd Ccd;

#define CCD_TOPO_MAX_COLS 16  /* columns of the file */
#define CCD_TOPO_MAX_VALUE 64 /* bytes of a column's name or label value */
/* room the labels of one cell take in JSON at most (escaped as \\u00XX: 6 bytes a byte) */
#define CCD_TOPO_LABELS_JSON_MAX (16 + CCD_TOPO_MAX_COLS * (12 * CCD_TOPO_MAX_VALUE + 8))

/** One cell's entry. labels[i] is the value of column label_names[i] ("" = none). */
typedef struct CcdTopoCell {
    const char *id;
    const char *site, *region, *sector; /* NULL: none */
    const char *neighbours;             /* as written, NULL: none */
    double lat, lon;                    /* NAN: none */
    const char *labels[CCD_TOPO_MAX_COLS];
} CcdTopoCell;

/** Parses the file at path. 0, -ENOENT/-EIO (with the errno's words), -EINVAL (with
 *  "PATH:LINE: what"), -ENOMEM. */
int ccd_topology_load(CcdTopology **out, const char *path, char *err, size_t errlen);
/** Parses the text of a file (name is for messages). Same returns. */
int ccd_topology_parse(CcdTopology **out, const char *text, size_t len, const char *name, char *err,
                       size_t errlen);
void ccd_topology_free(CcdTopology **t);

/** The cell's entry, NULL when the file does not list it (or t is NULL). */
const CcdTopoCell *ccd_topology_cell(const CcdTopology *t, const char *cell);
/** A label of the cell by name (site, region, sector or an operator's column); NULL when
 *  none. */
const char *ccd_topology_label(const CcdTopology *t, const char *cell, const char *name);
/** Whether name is a label column of the file (site, region, sector or another). */
int ccd_topology_has_label(const CcdTopology *t, const char *name);
/** Cells listed with this site (0: none or unknown). */
int ccd_topology_site_cells(const CcdTopology *t, const char *site);
/** Cells listed with this region (0: none or unknown). */
int ccd_topology_region_cells(const CcdTopology *t, const char *region);
/** Cells listed. */
size_t ccd_topology_n_cells(const CcdTopology *t);
/** The labels read from the KPI messages (ingest.labels; msg_labels.h), NULL: none. The
 *  file's value of a label wins over a message's for a cell the file lists with it; the
 *  messages' fill in the rest (ccd_topology_label, the filters, the JSON); a site's (a
 *  region's) cells are the file's count when the file names it, else the messages'. */
struct CcdMsgLabels;
struct CcdMsgLabels *ccd_topology_msg_labels(const CcdTopology *t);
/** Gives t the store m (t owns it from now on; NULL: none; a store it had is closed). */
void ccd_topology_set_msg_labels(CcdTopology *t, struct CcdMsgLabels *m);

/** Writes the cell's labels as a JSON object ({} when none; NUL-terminated): site,
 *  region, sector, then the operator's columns, in the file's order. Its length, or
 *  -ENOSPC (cap under CCD_TOPO_LABELS_JSON_MAX is not always enough). */
int ccd_topology_labels_json(const CcdTopology *t, const char *cell, char *buf, size_t cap);
/** Inserts ,"labels":{...} before the closing brace of the JSON object buf[0..n) (an
 *  alert as cc_alert_event_json wrote it). The new length; n (buf unchanged: the alert
 *  goes without its labels) when cap is short of CCD_TOPO_LABELS_JSON_MAX more. */
int ccd_topology_splice_labels(const CcdTopology *t, const char *cell, char *buf, int n,
                               size_t cap);

/** The label filters of a listing (GET /v1/cells?site=&region=&sector=): NULL = any. */
typedef struct CcdTopoFilter {
    const char *site, *region, *sector;
} CcdTopoFilter;
/** Whether any filter is set. */
int ccd_topology_filter_on(const CcdTopoFilter *f);
/** Whether the cell's labels match every filter set (a cell the file does not list matches
 *  none). */
int ccd_topology_filter_match(const CcdTopology *t, const CcdTopoFilter *f, const char *cell);

/* ---- the daemon's topology (d->topology) -------------------------------------------- */

/** (Re)reads topology.path (empty: none) into d->topology. On failure the previous one
 *  stays, the error is logged and counted. 0 or the error. */
int ccd_topology_reload(Ccd *d);
/** Frees d->topology. */
void ccd_topology_close(Ccd *d);
/** The topology's lines of /metrics. */
struct evbuffer;
void ccd_topology_metrics(Ccd *d, struct evbuffer *b);

#endif
