/*
 * cc_online_calib.h — online calibration of one cell's forecast intervals from the
 * forecasts that have matured: a scale per KPI f and horizon step k that multiplies the
 * model's sd (spec step 7, after calib.sigma_scale), moved after every matured forecast
 * so that the central interval misses the truth at the target rate.
 *
 * Why: calib.sigma_scale is fitted once, on the validation rows, and a test stretch that is
 * calmer or burstier than validation keeps it wrong for as long as the model is served
 * (docs/results.md, "Calibration of the intervals": LesCorts covers 0.70–0.79 on test with
 * a fit that covers 0.82 on validation). A host that sees the truths can correct it as it
 * goes. The update is adaptive conformal inference (Gibbs & Candès, 2021) on the log of
 * the scale, l. When the truths of step p arrive, every forecast made for p (at p-1-k,
 * its step k) is scored against the interval it was served with, the sd times the scale
 * of when it was made:
 *     miss = |y - mean| > CC_Z80 · sd · exp(l at p-1-k)     (outside the P10–P90 interval)
 * By default (per_step 0) the log-scale of (f, k) is a level per KPI plus an offset per
 * step, l[f][k] = L[f] + o[f][k], on top of the per-step profile of calib.sigma_scale. Once
 * per step the level moves by the share of the KPI's matured forecasts that missed, and
 * each scored step's offset by its own miss against that share:
 *     L[f]    += rate · (misses / scored - 0.2)             clamped to ±max_log
 *     o[f][k] += profile · rate · (miss[k] - misses / scored)
 * The offsets of one update sum to 0, so the level alone carries the KPI's overall
 * correction (and the bound below); the offsets only reshape it over the steps, which a
 * calmer or burstier stretch also changes (the near steps need less widening than the far
 * ones). profile 0 leaves one scale per KPI.
 * With per_step 1 each (f, k) has its own l[f][k], moved by each of its forecasts:
 *     l[f][k] += rate · (miss - 0.2).
 * L (or l) moves by rate·Σ(share - 0.2) over T updates, so while it stays inside the clamp the
 * mean miss share of the served intervals over those T updates differs from 0.2 by at most
 * max_log/(rate·T), whatever the data do. The clamp (default: the scale within [1/64, 64])
 * keeps a KPI gone flat or wild from driving the interval to nothing or to everything;
 * there the share is no longer bounded. Why 64 and not less: a bursty KPI's sd is set by
 * its bursts, and between them the P10–P90 interval needs a small fraction of it (Barcelona
 * ElBorn's up and rb_up need 1/8 to 1/64; at [1/8, 8] they covered 0.86–0.88). At rate 0.05
 * a KPI gone flat reaches 1/64 after ~420 steps with no miss, and every miss then moves the
 * scale up by up to e^0.04 a step. The scale is tracked for the P10–P90 interval
 * (the level the project's coverage targets are stated for); hosts apply it to the sd, so
 * other levels move with it.
 *
 * Scoring the served interval (not the one the current scale would give) is what makes
 * the bound hold for what was served, but it closes the loop through a delay: a forecast's
 * step k reports k+1 steps after the scale it was served with. A correction faster than
 * about 1/delay overshoots and oscillates (ETTh1 at HZ 720 and rate 0.05: 0.773). The
 * default rate is therefore min(0.05, 4/HZ): 0.05 up to HZ 80 (2-minute and hourly data),
 * 4/HZ beyond (ETTh1-720: 0.0056), which keeps rate × mean delay × the slope of the miss
 * rate in l (≈ 0.35 at the normal 0.8 quantile) below 1.
 *
 * Why one scale per KPI by default: the speed of the correction is `rate` per step of
 * time whatever the horizon, and a scale per (f, k) gets one noisy 0/1 per step; pooled
 * over the HZ matured forecasts it can move faster for the same noise. A week of hourly
 * data (144 origins at HZ 24) is too short for per-step scales at a rate that is quiet on
 * 2-minute data; the per-step profile is what calib.sigma_scale already fits.
 *
 * This is a host's choice layered on the model, not part of the spec: the spec's mean and
 * sd (cellcast forward) are unchanged, and a host that does not use it serves them as is.
 *
 * Storage: the last HZ forecasts (mean and served sd, F × HZ each), because the forecast
 * made at t matures one step at a time over t+1..t+HZ, laid out by target step so that a
 * step reads one contiguous block: 8·F·HZ² + 13·F·HZ + 8·HZ bytes and a little
 * (cc_online_calib_bytes; F 8, HZ 24: 39 KiB). A step costs a host 1.5 µs a cell at F 8,
 * HZ 24 in cache, 2.8 µs with thousands of cells stepped in turn (`test_online_calib
 * --bench`).
 *
 * No locks: the owner of the cell calls it.
 */
#ifndef CC_ONLINE_CALIB_H
#define CC_ONLINE_CALIB_H

#include <stddef.h>
#include <stdint.h>

typedef struct CcOnlineCalibSettings {
    double rate;    ///< step of the log-scale per update; default 0: min(0.05, 4/HZ)
    double max_log; ///< |log-scale| bound; default log(64)
    int per_step;   ///< 1: a scale per (f, k); default 0: one per KPI
    double profile; ///< per_step 0: the step profile's rate as a share of rate; default 0.5
                    ///< (0: one scale per KPI for every step)
} CcOnlineCalibSettings;

typedef struct CcOnlineCalib CcOnlineCalib;

void cc_online_calib_default_settings(CcOnlineCalibSettings *s);

/** Scales for F KPIs × HZ steps, all 1. 0, -EINVAL (F or HZ < 1, rate or profile not in
 *  [0, 1], max_log ≤ 0) or -ENOMEM. */
int cc_online_calib_open(CcOnlineCalib **out, const CcOnlineCalibSettings *s, int F, int HZ);
void cc_online_calib_close(CcOnlineCalib **c);

/** The rate used for a horizon of HZ steps when the settings say 0: min(0.05, 4/HZ). */
double cc_online_calib_auto_rate(int HZ);

/** Bytes held by one of that shape. */
size_t cc_online_calib_bytes(int F, int HZ);

/**
 * The truths of step p (F values, NaN = not observed): every held forecast for p (made at
 * p-1-k for step k) is scored and moves the scales. Call it before cc_online_calib_push
 * of the forecast made at p. Returns the forecasts scored.
 */
int cc_online_calib_observe(CcOnlineCalib *c, int64_t p, const float *values);

/**
 * The forecast made at step t for t+1..t+HZ: mean and sd (F, HZ) as the model serves them,
 * before this scale. A step t not after the last pushed one is ignored (-ERANGE); a gap
 * leaves the forecasts of the missing steps unscored.
 */
int cc_online_calib_push(CcOnlineCalib *c, int64_t t, const float *mean, const float *sd);

/** Changes the rate (0: min(0.05, 4/HZ)), keeping the scales. 0 or -EINVAL (not in
 *  [0, 1]: nothing changed). */
int cc_online_calib_set_rate(CcOnlineCalib *c, double rate);

/** The scale of KPI f at horizon step k (1 before any matured forecast). */
double cc_online_calib_scale(const CcOnlineCalib *c, int f, int k);

/** Every scale, (F, HZ) as [f·HZ + k], into out. */
void cc_online_calib_scales(const CcOnlineCalib *c, float *out);

/** Forecasts scored so far, and how many of them missed their interval. */
void cc_online_calib_counts(const CcOnlineCalib *c, int64_t *scored, int64_t *missed);

/** KPI f's share of the last cc_online_calib_observe: its forecasts scored and missed then
 *  (0 and 0 before any, or for f out of range). A host's per-KPI coverage counts. */
void cc_online_calib_last_counts(const CcOnlineCalib *c, int f, int *scored, int *missed);

/*
 * Saving the scales across a restart (a host's snapshot or hand-over of the cell): the
 * log-scales the scales are computed from, 16 + 4·F·(HZ + 1) bytes (F 8, HZ 24: 816), not
 * the pending forecasts (8·F·HZ² bytes): a loaded calibration serves the saved scales at
 * once and scores the forecasts pushed after the load. Host byte order.
 */

/** Bytes cc_online_calib_save writes for F KPIs × HZ steps. */
size_t cc_online_calib_save_size(int F, int HZ);
/** Writes c's scales into buf; returns the bytes written, or 0 when n is too small. */
size_t cc_online_calib_save(const CcOnlineCalib *c, uint8_t *buf, size_t n);
/** The bytes of the saved calibration that buf starts with, from its header, or 0 when it
 *  starts with none (another magic, or shorter than its header says): what follows it in a
 *  host's record starts there. */
size_t cc_online_calib_saved_size(const uint8_t *buf, size_t n);
/**
 * Replaces c's scales by saved ones (n bytes, all of them the saved form) and empties its
 * ring of pending forecasts; the rate and counts stay. Anyone who can write a host's record
 * can hand it these bytes: a shape other than c's (F, HZ, per_step), a log-scale not finite
 * or outside c's clamp (the scale outside [e^-max_log, e^max_log], 0 and negative included)
 * are refused with -EINVAL and a message, c unchanged; -ENOMEM likewise.
 */
int cc_online_calib_load(CcOnlineCalib *c, const uint8_t *buf, size_t n, char *err, size_t errlen);

#endif
