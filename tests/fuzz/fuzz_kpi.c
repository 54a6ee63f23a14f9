/*
 * fuzz_kpi.c — libFuzzer target for the KPI message decoder (lib/cc_kpi.c).
 * Built with `-Dfuzz=true` and clang (CC=clang). Beyond "no crash, no leak, no UB" it
 * checks the decoder's invariants on every input:
 *  - each element of the message yields exactly one record or one error;
 *  - every record has a valid cell id, a step consistent with its ts under the step rule,
 *    present bits only below F and finite values inside the configured bounds;
 *  - every error carries a known reason name and a non-empty message;
 *  - the fast scanner and the reference path (jansson_only) give the same batch: records,
 *    errors with their messages, element/unmapped/null counts.
 * The first input byte picks the step rule, so all three are exercised.
 * Then the label pass of cellcastd (daemon/msg_labels.c, ingest.labels) reads the same input
 * with the batch: every label a cell gets is 1..64 bytes without a control character, the
 * counts of refused values only grow, and a store reopened per input leaks nothing.
 *
 * Run: ./fuzz_kpi -max_total_time=60 corpus/   (seeds: any JSON, e.g. proto examples)
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cc_kpi.h"
#include "msg_labels.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const NAMES[4] = {"a", "b", "users", "thr"};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static CcKpiDecoder *dec[3], *ref[3];
    static const double lo[4] = {0, 0, 0, -1e9}, hi[4] = {100, 100, 1e6, 1e9};
    if (!dec[0]) {
        for (int a = 0; a < 3; a++) {
            CcKpiSettings s;
            CcKpiMapEntry map[] = {{.field = "pm", .feature_name = "a", .scale = 100},
                                   {.field = "t2", .feature = 3, .scale = 1e-3}};
            cc_kpi_default_settings(&s);
            s.n_features = 4;
            s.step_seconds = 900;
            s.align = (enum CcKpiAlign)a;
            s.feature_names = NAMES;
            s.map = map;
            s.n_map = 2;
            s.min = lo;
            s.max = hi;
            s.max_message_bytes = 1 << 16;
            s.max_records = 64;
            if (cc_kpi_open(&dec[a], &s, NULL, 0))
                abort();
            s.jansson_only = 1;
            if (cc_kpi_open(&ref[a], &s, NULL, 0))
                abort();
        }
    }
    if (size < 1)
        return 0;
    CcKpiDecoder *d = dec[data[0] % 3];
    int align = data[0] % 3;
    CcKpiBatch b;
    if (cc_kpi_decode(d, data + 1, size - 1, &b))
        return 0; /* -ENOMEM */
    CcKpiBatch rb;
    if (cc_kpi_decode(ref[data[0] % 3], data + 1, size - 1, &rb))
        return 0;
    if (rb.n_records != b.n_records || rb.n_errors != b.n_errors || rb.n_elements != b.n_elements ||
        rb.unmapped_fields != b.unmapped_fields || rb.null_values != b.null_values)
        abort();
    for (int i = 0; i < b.n_records; i++) {
        const CcKpiRecord *x = &b.records[i], *y = &rb.records[i];
        if (strcmp(x->cell_id, y->cell_id) || x->element != y->element || x->ts != y->ts ||
            x->step != y->step || x->present != y->present ||
            memcmp(x->values, y->values, sizeof x->values))
            abort();
    }
    for (int i = 0; i < b.n_errors; i++)
        if (b.errors[i].reason != rb.errors[i].reason ||
            b.errors[i].element != rb.errors[i].element ||
            strcmp(b.errors[i].message, rb.errors[i].message))
            abort();

    int whole = 0;
    for (int i = 0; i < b.n_errors; i++) {
        const CcKpiError *e = &b.errors[i];
        if (e->reason <= CC_KPI_OK || e->reason >= CC_KPI_N_REASONS || !e->message[0])
            abort();
        if (!strcmp(cc_kpi_reason_name(e->reason), "unknown"))
            abort();
        whole += e->element < 0;
    }
    if (whole > 1 || (whole && (b.n_records || b.n_errors != 1)))
        abort();
    if (!whole && b.n_records + b.n_errors != b.n_elements)
        abort();
    for (int i = 0; i < b.n_records; i++) {
        const CcKpiRecord *r = &b.records[i];
        if (!cc_kpi_valid_cell_id(r->cell_id, strlen(r->cell_id)) || r->ts < 0)
            abort();
        int64_t want = align == CC_KPI_ALIGN_NEAREST ? (r->ts + 450) / 900 : r->ts / 900;
        if (r->step != want || (align == CC_KPI_ALIGN_EXACT && r->ts % 900))
            abort();
        if (!r->present || (r->present >> 4))
            abort();
        for (int f = 0; f < 4; f++)
            if ((r->present >> f & 1) &&
                (!isfinite(r->values[f]) || r->values[f] < lo[f] - 1e-3 * fabs(lo[f]) ||
                 r->values[f] > hi[f] * (1 + 1e-6)))
                abort();
    }
    /* the label pass: site <- "site", region <- "r", vendor <- "a" (also a KPI's field) */
    static const char *const lnames[3] = {"site", "region", "vendor"},
                             lfields[3][8] = {"site", "r", "a"};
    const char *lf[3] = {lfields[0], lfields[1], lfields[2]};
    CcdMsgLabels *ml;
    if (ccd_msg_labels_open(&ml, lnames, lf, 3))
        return 0; /* -ENOMEM */
    int changes = ccd_msg_labels_read(ml, (const char *)data + 1, size - 1, &b);
    CcdMsgLabelStats st;
    ccd_msg_labels_stats(ml, &st);
    if (changes < 0 || st.changes != (uint64_t)changes || st.values > st.changes ||
        st.cells > (size_t)b.n_records)
        abort();
    for (int i = 0; i < b.n_records; i++)
        for (int k = 0; k < 3; k++) {
            const char *v = ccd_msg_labels_value(ml, b.records[i].cell_id, k);
            size_t n = v ? strlen(v) : 1;
            if (!n || n > CCD_MSG_LABEL_VALUE_MAX)
                abort();
            for (size_t j = 0; v && j < n; j++)
                if ((unsigned char)v[j] < 0x20 || v[j] == 0x7f)
                    abort();
        }
    ccd_msg_labels_close(&ml);
    return 0;
}
