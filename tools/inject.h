/*
 * inject.h — labelled anomalies injected into the test rows of one cell's series, for the
 * offline alerting evaluation (anomaly_eval.h, `cellcast anomaly-eval`).
 *
 * One injection per slot of `spacing` test steps (after `margin` clean ones), start drawn
 * in the slot's first quarter, type rotating spike → level shift → outage → drift, one
 * random KPI of the given list unless outage; σ = the KPI's std over the history rows (all
 * rows when there is no history):
 *   spike        1–3 steps,   x += ±U(3,6)·σ   (up with p = 0.7)
 *   level shift  20–60 steps, x += ±U(1.5,3)·σ
 *   outage       10–40 steps, every KPI = 0
 *   drift        30–60 steps, x += ±U(2,4)·σ·(j+1)/len (linear ramp)
 * Values are clamped at 0 for KPIs whose history has no negative value. Every draw comes
 * from one splitmix64 stream (cc_rng.h), so a run is reproducible.
 */
#ifndef CCT_INJECT_H
#define CCT_INJECT_H

#include <stdint.h>

enum { CCT_INJ_SPIKE, CCT_INJ_SHIFT, CCT_INJ_OUTAGE, CCT_INJ_DRIFT, CCT_INJ_TYPES };

/** "spike", "level_shift", "outage", "drift". */
extern const char *const cct_inject_type_name[CCT_INJ_TYPES];

typedef struct CctLabel {
    int type;       ///< CCT_INJ_*
    int kpi;        ///< feature index, -1 for outages (every KPI)
    int start, end; ///< rows [start, end) of the series
    double mag;     ///< in σ of the KPI (0 for outages)
} CctLabel;

typedef struct CctInjectSettings {
    int spacing;      ///< test steps per injection (default 120)
    int margin;       ///< clean test steps before the first (default 20)
    double mag_scale; ///< multiplies every magnitude (default 1)
    const int *kpis;  ///< KPIs that get spikes, shifts and drifts
    int n_kpis;
} CctInjectSettings;

/** The labelled series of one cell: rows (T, F) of values and masks, row test0 the first
 * test row; labels grow as anomalies are injected. */
typedef struct CctInjectSeries {
    float *x;
    uint8_t *mask;
    int T, F, test0;
    CctLabel *lab;
    int n_lab, cap_lab;
} CctInjectSeries;

/**
 * Injects anomalies into the test rows of *c and appends their labels. `rotation` shifts
 * the type rotation (the CLI passes cell index + trial). 0 or -ENOMEM.
 */
int cct_inject(const CctInjectSettings *s, CctInjectSeries *c, uint64_t *rng, int rotation);

#endif
