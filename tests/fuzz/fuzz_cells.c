/*
 * fuzz_cells.c — the cells of the snapshot and state-record fuzz targets without the
 * engine: laid out for the fixture model's shape, as an engine would lay them out. See
 * fuzz_cells.h.
 */
#include "fuzz_cells.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static CcModel model;     /* only its hp is read */
static CcCellShape shape; /* what an engine on the model keeps for its cells */

const CcHparams *fuzz_cells_hparams(void)
{
    static CcHparams hp;
    if (!hp.n_features) {
        hp.n_features = FUZZ_CELLS_F;
        hp.patch_len = 4;
        hp.n_patches = 5;
        hp.norm_window = 24;
        hp.d_model = 16;
        hp.n_heads = 2;
        hp.n_layers = 1;
        hp.d_ff = 32;
        hp.horizon = 4;
        hp.step_seconds = 900;
        snprintf(hp.features[0], CC_FEATURE_NAME_MAX, "bytes");
        snprintf(hp.features[1], CC_FEATURE_NAME_MAX, "prb");
        snprintf(hp.features[2], CC_FEATURE_NAME_MAX, "users");
    }
    return &hp;
}

void fuzz_cells_anomaly_settings(CcAnomalySettings *as)
{
    cc_anomaly_default_settings(as);
    as->n_features = FUZZ_CELLS_F;
    as->step_seconds = 900;
}

void fuzz_cells_open(FuzzCells *fx, const CcAnomalySettings *as)
{
    model.hp = *fuzz_cells_hparams();
    cc_cell_shape_init(&shape, &model, CC_KV_F32, 0);
    if (cc_anomaly_open(&fx->a, as, NULL, 0) || cc_cell_open_shape(&fx->cell, &shape) ||
        cc_anomaly_cell_open(&fx->ac, fx->a, "fuzz"))
        abort();
}

void fuzz_cells_check_restored(const FuzzCells *fx, const CcSnapshotCell *c)
{
    if (c->count <= 0)
        return;
    int64_t first, last;
    cc_cell_span(fx->cell, &first, &last);
    float v[FUZZ_CELLS_F];
    if (last != c->first + c->count - 1 || cc_cell_history(fx->cell, last, 1, v) ||
        memcmp(v, c->values + (size_t)(c->count - 1) * FUZZ_CELLS_F, sizeof v))
        abort();
}
