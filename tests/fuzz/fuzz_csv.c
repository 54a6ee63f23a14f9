/*
 * fuzz_csv.c — libFuzzer target for the CSV loader (lib/cc_data.c), which reads what users
 * export from their own tools: delimiters, decimal commas, quoted fields, a/b/YYYY date
 * orders decided on the whole file, unix s/ms/µs/ns, jitter, duplicates, out-of-order rows.
 * Built with `-Dfuzz=true` and clang (CC=clang). Beyond "no crash, no leak, no UB" it
 * checks, on every input:
 *  - a refusal is a negative errno with a message (out of memory aside);
 *  - a dataset has 1..CC_DATA_MAX_FEATURES features, a step ≥ 1 s, series of ≥ 1 row with
 *    finite values and a 0/1 mask (the loader's promise: missing values are imputed);
 *  - the report is consistent (duplicates with other values ≤ duplicates, sparse series ≤
 *    series, counts ≥ 0) and its summary fits any buffer, NUL-terminated.
 * The first input byte picks the settings (defaults, a given step, a row index, a `;`
 * delimiter, linear imputation with splits at gaps), so each path is exercised.
 *
 * Run: ./fuzz_csv -max_total_time=60 corpus/   (seeds: tests/data/csv_corpus)
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cc_data.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void settings_for(uint8_t pick, CcDataSettings *s)
{
    cc_data_default_settings(s);
    switch (pick % 5) {
    case 1: s->step_seconds = 60; break;
    case 2:
        s->time_index = CC_TIME_INDEX_YES;
        s->step_seconds = 900;
        break;
    case 3: s->delimiter = ';'; break;
    case 4:
        s->impute = CC_IMPUTE_LINEAR;
        s->max_gap_steps = 5;
        break;
    default: break;
    }
}

static void check_dataset(const CcDataset *ds, const CcDataReport *r)
{
    const int F = ds->n_features;
    if (F < 1 || F > CC_DATA_MAX_FEATURES || ds->step_seconds < 1 || ds->n_series < 1)
        abort();
    for (int s = 0; s < ds->n_series; s++) {
        const CcSeries *se = &ds->series[s];
        if (se->T < 1 || memchr(se->cell_id, 0, sizeof se->cell_id) == NULL)
            abort();
        for (size_t i = 0; i < (size_t)se->T * (size_t)F; i++)
            if (!isfinite(se->x[i]) || se->mask[i] > 1)
                abort();
    }
    if (r->duplicates < 0 || r->duplicates_differ > r->duplicates || r->missing_steps < 0 ||
        r->out_of_order < 0 || r->misaligned < 0 || r->sparse_series > ds->n_series ||
        r->step_seconds != ds->step_seconds)
        abort();
    static char big[8192];
    char small[24];
    cc_data_report_format(r, ds, big, sizeof big);
    cc_data_report_format(r, ds, small, sizeof small);
    if (!memchr(big, 0, sizeof big) || !memchr(small, 0, sizeof small) ||
        strncmp(big, small, strlen(small)))
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    CcDataSettings s;
    settings_for(data[0], &s);
    CcDataset *ds = NULL;
    CcDataReport rep;
    char err[512];
    err[0] = 0;
    int rc = cc_data_open_buffer(&ds, (const char *)data + 1, size - 1, "fuzz", &s, &rep, err,
                                 sizeof err);
    if (rc < 0) {
        if (ds || !memchr(err, 0, sizeof err) || (!err[0] && rc != -ENOMEM))
            abort();
        return 0;
    }
    if (rc != 0 || !ds)
        abort();
    check_dataset(ds, &rep);
    cc_data_close(&ds);
    return 0;
}
