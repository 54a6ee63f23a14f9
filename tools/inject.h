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
 * Values are clamped at 0 for KPIs whose history has no negative value.
 *
 * The noise-aware protocol (`--protocol noise`): the events an operator cares about on
 * 2-minute data, 10–60 minutes long, sized in the clean data's own spread at the event's
 * time scale. An event of L steps (L = round(U(10, 60) minutes / S), at least 2: a one-step
 * event is a spike) on KPI f moves the mean of those L steps by m·σ_L(f), m = U(3, 6)·
 * mag_scale, where σ_L(f) is the spread of L-step means on the clean (history) rows:
 * σ_L = sd(m_L(t) - m_L(t - L)) / √2, m_L(t) the mean of the L rows ending at t (the √2
 * because the difference of two independent means has twice the variance). That is the
 * size of the natural fluctuation of an L-step window around the level just before it,
 * bursts included, so an event of m = 3 is as rare in clean data as a 3-σ window mean.
 * Types rotate surge → drop → outage → level shift → spike:
 *   surge        x += peak·sin(π(j + ½)/L), up, peak so that the mean rise is m·σ_L
 *   drop         x -= m·σ_L for L steps (clamped at 0)
 *   outage       every KPI = 0 for L steps
 *   level shift  x ± m·σ_L for L steps
 *   spike        one step, x ± m·σ_1 (up with p = 0.7), σ_1 the same spread at L = 1
 * Spikes are reported as their own row (cct_ae_print_score), apart from the events. Every draw
 * comes from one splitmix64 stream (cc_rng.h), so a run is reproducible.
 */
#ifndef CCT_INJECT_H
#define CCT_INJECT_H

#include <stdint.h>

enum {
    CCT_INJ_SPIKE,
    CCT_INJ_SHIFT,
    CCT_INJ_OUTAGE,
    CCT_INJ_DRIFT,
    CCT_INJ_SURGE,    ///< noise-aware protocol only
    CCT_INJ_DROP,     ///< noise-aware protocol only
    CCT_INJ_LABELLED, ///< an operator's window (labels.h), never injected
    CCT_INJ_TYPES
};
#define CCT_INJ_CLASSIC 4 ///< the classic protocol rotates over the first four

/** The protocols: the classic one above, and the noise-aware one (below). */
enum { CCT_INJ_PROTO_CLASSIC, CCT_INJ_PROTO_NOISE };

/** "spike", "level_shift", "outage", "drift", "surge", "drop", "labelled". */
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
    int protocol;         ///< CCT_INJ_PROTO_* (default classic)
    int64_t step_seconds; ///< the data's step (the noise-aware protocol's minutes)
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

/** Appends a label to c (no injection). 0 or -ENOMEM. */
int cct_inject_add_label(CctInjectSeries *c, CctLabel l);

/**
 * σ_L of the noise-aware protocol for every KPI of c over rows [0, h1) (observed rows
 * only; 1 where fewer than 4 windows, or no spread): sd(m_L(t) - m_L(t - L)) / √2.
 */
void cct_inject_spread(const CctInjectSeries *c, int h1, int L, double *sd);

#endif
