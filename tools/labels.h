/*
 * labels.h — an operator's labelled windows for `cellcast anomaly-eval --labels FILE`:
 * real events on the operator's own data, scored like the injected ones (anomaly_eval.h)
 * instead of injecting any.
 *
 * Two formats, told apart by the first non-blank character ('{' = JSON):
 *   - JSON, NAB's combined_windows.json layout: { "KEY": [[start, end], ...], ... }, an entry
 *     may carry a KPI as a third element ([start, end, "kpi"]);
 *   - CSV with a header naming its columns, in any order: `start` and `end` (required),
 *     `cell_id` (or `cell`) and `kpi` (optional, may be empty): one window per row.
 * start and end are timestamps (inclusive), parsed as the data's time column is
 * (cc_data_parse_time: RFC 3339 / "YYYY-MM-DD HH:MM:SS", unix seconds, or --time-format).
 * KEY (the JSON key, the CSV cell_id) selects the cells: a cell whose id is KEY, or every
 * cell of a --data file whose path is KEY or ends with "/KEY" (so NAB's keys
 * "<dir>/<file>.csv" work as they are); an empty or absent KEY selects every cell. A KPI
 * names a model KPI (an unknown one is an error); without one, any alert of the cell counts.
 */
#ifndef CCT_LABELS_H
#define CCT_LABELS_H

#include <stddef.h>
#include <stdint.h>

#include "cc_model.h"
#include "inject.h"

typedef struct CctLabelWin {
    char *key;         ///< NULL: every cell
    char *kpi;         ///< NULL: any KPI
    double start, end; ///< unix seconds, inclusive
    int line;          ///< where it was read (CSV line, JSON entry number), for messages
    int applied;       ///< cells it landed on
} CctLabelWin;

typedef struct CctLabelSet {
    CctLabelWin *w;
    int n, cap;
} CctLabelSet;

/** Reads a labels file (format above). 0 or a negative errno with a message in err. */
int cct_labels_load(CctLabelSet *ls, const char *path, const char *time_format, char *err,
                    size_t errlen);
void cct_labels_free(CctLabelSet *ls);

/**
 * Appends to ser the windows of ls that select the cell `cell_id` of the file data_path,
 * as labels of type CCT_INJ_LABELLED: rows [ceil(start/S) - p0, floor(end/S) - p0 + 1),
 * cut to the test rows (windows with no test row are skipped). *n_added (may be NULL) gets
 * how many. 0, -ENOMEM, or -EINVAL for a KPI that is not one of hp's (message in err).
 */
int cct_labels_apply(CctLabelSet *ls, const char *data_path, const char *cell_id, int64_t p0,
                     int64_t step_seconds, const CcHparams *hp, CctInjectSeries *ser, int *n_added,
                     char *err, size_t errlen);

#endif
