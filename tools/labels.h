/*
 * labels.h — an operator's labelled windows for `cellcast anomaly-eval --labels FILE`:
 * real events on the operator's own data, scored like the injected ones (anomaly_eval.h)
 * instead of injecting any.
 *
 * Two formats, told apart by the first non-blank character after an optional UTF-8 BOM
 * ('{' or '[' = JSON; a JSON list is refused with a message saying what is wanted):
 *   - JSON, NAB's combined_windows.json layout: { "KEY": [[start, end], ...], ... }, an entry
 *     may carry a KPI as a third element ([start, end, "kpi"]);
 *   - CSV with a header naming its columns (any case, any order): `start` and `end`
 *     (required), `cell_id` (or `cell`) and `kpi` (optional, may be empty): one window per
 *     row; fields separated by ',' (or ';' or a tab when the header has no comma), may be
 *     quoted, CRLF line ends are fine.
 * start and end are timestamps (inclusive), parsed as the data's time column is
 * (cc_data_parse_time: RFC 3339 / "YYYY-MM-DD HH:MM:SS", unix seconds, or --time-format).
 * KEY (the JSON key, the CSV cell_id) selects the cells: a cell whose id is KEY, or every
 * cell of a --data file whose path is KEY or ends with "/KEY" (so NAB's keys
 * "<dir>/<file>.csv" work as they are); an empty or absent KEY selects every cell. A KPI
 * names a model KPI (an unknown one is an error); without one, any alert of the cell counts.
 * A window within one step (no step boundary between start and end) covers that step.
 * Windows of one cell and KPI that share a row are scored as one event (merged).
 */
#ifndef CCT_LABELS_H
#define CCT_LABELS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "cc_model.h"
#include "inject.h"

typedef struct CctLabelWin {
    char *key;         ///< NULL: every cell
    char *kpi;         ///< NULL: any KPI
    double start, end; ///< unix seconds, inclusive
    int line;          ///< CSV line it was read from; 0 in a JSON file
    int index;         ///< JSON: its place in its key's list, from 1
    int matched;       ///< cells its key selected
    int applied;       ///< cells it landed on (test rows)
    int cut;           ///< cells where it was cut to the test rows
    int merged;        ///< cells where it overlapped an earlier window (one event)
} CctLabelWin;

typedef struct CctLabelSet {
    CctLabelWin *w;
    int n, cap;
} CctLabelSet;

/** Reads a labels file (format above). 0 or a negative errno with a message in err. */
int cct_labels_load(CctLabelSet *ls, const char *path, const char *time_format, char *err,
                    size_t errlen);
void cct_labels_free(CctLabelSet *ls);

/** Where w was read, for messages: "line N" (CSV) or "\"KEY\" window N" (JSON). */
const char *cct_labels_where(const CctLabelWin *w, char *buf, size_t cap);

/** Every window's KPI is one of hp's: 0, or -EINVAL naming the first that is not. */
int cct_labels_check(const CctLabelSet *ls, const CcHparams *hp, char *err, size_t errlen);

/**
 * Appends to ser the windows of ls that select the cell `cell_id` of the file data_path,
 * as labels of type CCT_INJ_LABELLED: rows [ceil(start/S) - p0, floor(end/S) - p0 + 1)
 * (floor(start/S) - p0 alone for a window within one step), cut to the test rows (windows
 * with no test row are skipped); a window sharing a row with a labelled window of the same
 * KPI already in ser is merged into it. *n_added (may be NULL) gets how many events ser
 * gained. 0, -ENOMEM, or -EINVAL for a KPI that is not one of hp's (message in err).
 */
int cct_labels_apply(CctLabelSet *ls, const char *data_path, const char *cell_id, int64_t p0,
                     int64_t step_seconds, const CcHparams *hp, CctInjectSeries *ser, int *n_added,
                     char *err, size_t errlen);

/**
 * After every cct_labels_apply: on out, the windows not scored as written — those whose key
 * names no cell or --data file (counted, a few keys named), those outside every selected
 * cell's test rows, cut to the test rows, or merged with an overlapping window — and a
 * count of the unused ones. Returns how many windows landed on test rows.
 */
int cct_labels_report(const CctLabelSet *ls, FILE *out);

#endif
