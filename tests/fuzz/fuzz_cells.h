/*
 * fuzz_cells.h — the cells the snapshot and state-record fuzz targets (fuzz_snapshot.c,
 * fuzz_state_record.c) restore into: real cells (lib/cc_cell.c) and anomaly state of
 * test_snapshot's small model, without the engine. The targets do not link it: clang 14
 * cannot link cc_attention.c's target_clones kernels under -fsanitize=fuzzer, and a restore
 * never steps; the cells are laid out for the shape an engine would keep for them
 * (cc_cell_open_shape), made in fuzz_cells.c from the same hyperparameters.
 */
#ifndef CC_FUZZ_CELLS_H
#define CC_FUZZ_CELLS_H

#include "cc_anomaly.h"
#include "cc_cell_internal.h"
#include "cc_snapshot.h"

/* The fixture model's features (bytes, prb, users). */
#define FUZZ_CELLS_F 3

typedef struct FuzzCells {
    CcAnomaly *a;
    CcCell *cell;
    CcAnomalyCell *ac;
} FuzzCells;

/* The fixture model's hyperparameters: test_snapshot's small model (tests/unit/testlib.c
 * tl_hparams_small, 1 layer), F = FUZZ_CELLS_F, 900 s steps, horizon 4. */
const CcHparams *fuzz_cells_hparams(void);

/* The anomaly settings the cells open with: the defaults for the fixture model's F and step;
 * a target changes them before fuzz_cells_open. */
void fuzz_cells_anomaly_settings(CcAnomalySettings *as);

/* Opens fx's anomaly detector with as, its cell and anomaly cell ("fuzz"); aborts when one
 * cannot be opened (the target could test nothing). */
void fuzz_cells_open(FuzzCells *fx, const CcAnomalySettings *as);

/* After c restored into fx's cell: aborts unless the ring ends at c's last step and holds
 * c's last values there (nothing to check when c holds no values). */
void fuzz_cells_check_restored(const FuzzCells *fx, const CcSnapshotCell *c);

#endif
