/*
 * test_learn_fit.c — the learner's linear-only candidate (cc_learn_fit_linear on
 * cc_trainer_fit_linear_scaled) against `cellcast eval`'s linear (tools/linear_baseline.c,
 * one ridge map per KPI in its own units) on held-out rows it was not fitted on:
 *  - two KPIs of very different units, one with a trend (bytes, ~1e8) and one whose values
 *    are ~1e-8 (a variance KPI, its sigma the 1e-5·(1+|mu|) term of model.md step 2): one
 *    shared W and a bias scaled by sigma must still forecast both within a few percent of
 *    the per-KPI maps (a fit on normalised targets puts a bias b·1e-5 on the small KPI,
 *    hundreds of times its scale);
 *  - a random walk: the penalty chosen on validation keeps the model near the last value
 *    (no worse than naive by more than the sampling noise of the held-out rows).
 */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cc_data.h"
#include "cc_learn.h"
#include "cc_metrics.h"
#include "cc_train.h"
#include "linear_baseline.h"
#include "testlib.h"

#define TWO_PI 6.283185307179586
#define N_CELLS 3
#define DAY 24

/* Rows: training [0, TRAIN), validation [TRAIN, VAL), held out [VAL, T). */
enum { T = 24 * 24, TRAIN = 24 * 16, VAL = 24 * 20, HZ = 6, R = 48 };

typedef double (*ValueFn)(int c, int t, int j, uint64_t *rng);

static double gauss(uint64_t *rng)
{
    double u = tl_rng_uniform(rng), v = tl_rng_uniform(rng);
    return sqrt(-2 * log(u + 1e-300)) * cos(TWO_PI * v);
}

/* bytes: a daily cycle on a rising level plus noise, ~1e8; var: a daily cycle ~1e-8 with
 * noise (cells scaled differently) */
static double units_apart(int c, int t, int j, uint64_t *rng)
{
    double day = sin(TWO_PI * t / DAY + c);
    if (j == 0)
        return 1e8 * (2 + 0.8 * day + 0.004 * t * (1 + 0.3 * c)) + 4e6 * gauss(rng);
    return 1e-8 * (1 + 0.3 * c) * (3 + day + 0.3 * gauss(rng));
}

/* units_apart with heavy-tailed noise: one value in eight spikes up by many noise sd */
static double spiky(int c, int t, int j, uint64_t *rng)
{
    double v = units_apart(c, t, j, rng), spike = tl_rng_uniform(rng) < 0.125;
    double g = fabs(gauss(rng));
    return v + (spike ? (j ? 1e-8 : 1e8) * 1.5 * g : 0);
}

/* two random walks of very different steps */
static double random_walks(int c, int t, int j, uint64_t *rng)
{
    static double level[N_CELLS][2];
    if (t == 0)
        level[c][j] = j ? 5e-8 : 1e7;
    level[c][j] += (j ? 1e-9 : 1e5) * gauss(rng);
    return level[c][j];
}

static CcDataset *load_dropping(ValueFn fn, uint64_t seed, int drop_every);

static CcDataset *load(ValueFn fn, uint64_t seed) { return load_dropping(fn, seed, 0); }

/* The cells of fn (the same values for a seed), without the rows t < VAL with t mod
 * drop_every = 1 when drop_every > 0: steps missing before the held-out rows (cc_data
 * imputes them, carried, and masks them). */
static CcDataset *load_dropping(ValueFn fn, uint64_t seed, int drop_every)
{
    size_t cap = (size_t)N_CELLS * T * 96 + 64, n = 0;
    char *buf = malloc(cap), err[256];
    assert_non_null(buf);
    n += (size_t)snprintf(buf, cap, "ts,cell_id,bytes,var\n");
    uint64_t rng = seed;
    for (int c = 0; c < N_CELLS; c++)
        for (int t = 0; t < T; t++) {
            double a = fn(c, t, 0, &rng), b = fn(c, t, 1, &rng);
            if (drop_every > 0 && t < VAL && t % drop_every == 1)
                continue;
            n += (size_t)snprintf(buf + n, cap - n, "%d,cell%d,%.9g,%.9g\n", 1700006400 + 3600 * t,
                                  c, a, b);
        }
    CcDataSettings s;
    cc_data_default_settings(&s);
    CcDataset *ds = NULL;
    int rc = cc_data_open_buffer(&ds, buf, n, "test", &s, NULL, err, sizeof err);
    if (rc)
        print_message("load: %s\n", err);
    assert_int_equal(rc, 0);
    free(buf);
    assert_int_equal(ds->n_series, N_CELLS);
    return ds;
}

/* Each series' MASE scale over the rows before the held-out ones, season a day: the
 * denominator `cellcast eval` uses. */
static double scale_of(const CcDataset *ds, int s, int f)
{
    return cc_mase_scale(ds->series[s].x, ds->series[s].mask, ds->n_features, f, 0, VAL, DAY);
}

/* The mean over KPIs of each KPI's MASE on the held-out rows (origins VAL-1 .. T-1-HZ) of
 * the model m, its forecasts computed as the trainer validates (the served forecast). */
static double model_mase(CcModel *m, const CcDataset *ds, double *per_kpi)
{
    const int F = ds->n_features;
    CcRange tr[N_CELLS], te[N_CELLS];
    for (int s = 0; s < N_CELLS; s++)
        tr[s] = (CcRange){0, TRAIN}, te[s] = (CcRange){VAL, T};
    CcTrainSettings ts;
    cc_train_default_settings(&ts);
    ts.n_threads = 1;
    ts.max_val_windows = 1 << 20; /* every held-out origin */
    CcTrainer *t = NULL;
    char err[256];
    assert_int_equal(cc_trainer_open(&t, m, ds, tr, te, &ts, err, sizeof err), 0);
    double nll, mse, sum[N_CELLS * 2];
    int64_t count[N_CELLS * 2];
    assert_int_equal(cc_trainer_validate(t, &nll, &mse), 0);
    cc_trainer_val_abserr(t, sum, NULL, count);
    cc_trainer_close(&t);
    double mean = 0;
    for (int f = 0; f < F; f++) {
        double acc = 0;
        int64_t n = 0;
        for (int s = 0; s < N_CELLS; s++) { /* pooled over cells, as eval's per-KPI MASE */
            acc += sum[s * F + f] / scale_of(ds, s, f);
            n += count[s * F + f];
        }
        assert_true(n == (int64_t)N_CELLS * (T - VAL - HZ + 1) * HZ);
        per_kpi[f] = acc / (double)n;
        mean += per_kpi[f] / F;
    }
    return mean;
}

/* The same criterion for eval's linear (fitted on every row before the held-out ones, its
 * penalty chosen per KPI), or for the last value (naive) when naive is set. */
static double baseline_mase(const CcDataset *ds, int naive, double *per_kpi)
{
    const int F = ds->n_features, kidx[2] = {0, 1};
    CctLinearSettings ls;
    cct_linear_default_settings(&ls);
    ls.window = R;
    ls.horizon = HZ;
    CcRange fit[N_CELLS];
    for (int s = 0; s < N_CELLS; s++)
        fit[s] = (CcRange){0, VAL};
    CctLinear *lb = NULL;
    char msg[256];
    assert_int_equal(cct_linear_open(&lb, ds, fit, kidx, 2, &ls, msg, sizeof msg), 0);
    double mean = 0, out[HZ];
    for (int f = 0; f < F; f++) {
        double acc = 0;
        int64_t n = 0;
        for (int s = 0; s < N_CELLS; s++) {
            const CcSeries *se = &ds->series[s];
            double sc = scale_of(ds, s, f);
            for (int t = VAL - 1; t + HZ < T; t++) {
                if (naive)
                    for (int k = 0; k < HZ; k++)
                        out[k] = se->x[(size_t)t * F + f];
                else
                    cct_linear_forecast(lb, se, f, t, out);
                for (int k = 0; k < HZ; k++, n++)
                    acc += fabs(out[k] - se->x[(size_t)(t + 1 + k) * F + f]) / sc;
            }
        }
        per_kpi[f] = acc / (double)n;
        mean += per_kpi[f] / F;
    }
    cct_linear_close(&lb);
    return mean;
}

/* The learner's linear-only model of the two KPIs: hparams as the learner sets them
 * (patch 4, M = R = 48, horizon 6), fitted on [0, TRAIN), calibrated on [TRAIN, VAL). */
static int fit_learner_stop(const CcDataset *ds, CcLinearLoss loss, CcLinearFitReport *rep,
                            const volatile sig_atomic_t *stop, CcModel **m, char *err,
                            size_t errlen)
{
    CcHparams hp;
    cc_hparams_default(&hp);
    hp.n_features = ds->n_features;
    for (int f = 0; f < ds->n_features; f++)
        snprintf(hp.features[f], CC_FEATURE_NAME_MAX, "%s", ds->features[f]);
    hp.step_seconds = ds->step_seconds;
    hp.horizon = HZ, hp.patch_len = 4, hp.n_patches = 8, hp.norm_window = R;
    hp.linear_window = R;
    hp.d_model = 4, hp.n_heads = 1, hp.n_layers = 1, hp.d_ff = 4;
    CcRange tr[N_CELLS], va[N_CELLS];
    for (int s = 0; s < N_CELLS; s++)
        tr[s] = (CcRange){0, TRAIN}, va[s] = (CcRange){TRAIN, VAL};
    *m = NULL;
    return cc_learn_fit_linear(m, &hp, ds, tr, va, 0.1, loss, rep, stop, err, errlen);
}

static CcModel *fit_learner_loss(const CcDataset *ds, CcLinearLoss loss, CcLinearFitReport *rep)
{
    CcModel *m = NULL;
    char err[256];
    int rc = fit_learner_stop(ds, loss, rep, NULL, &m, err, sizeof err);
    if (rc)
        print_message("fit: %s\n", err);
    assert_int_equal(rc, 0);
    return m;
}

static CcModel *fit_learner(const CcDataset *ds, CcLinearFitReport *rep)
{
    return fit_learner_loss(ds, CC_LINEAR_LOSS_MSE, rep);
}

/* Heavy-tailed noise (spikes in one value of eight): the linear path refitted by the MAE in
 * MASE units (IRLS from the ridge map) lowers that MAE on its training rows, beats the ridge
 * on the validation rows (so it is kept) and on the held-out rows (data seeds 1, 2, 3, 5:
 * held out 0.4-3.3 % below the ridge's). */
static void test_mae_fit_on_spikes(void **state)
{
    (void)state;
    CcDataset *ds = load(spiky, 5);
    CcLinearFitReport rm, ra;
    CcModel *m_mse = fit_learner(ds, &rm), *m_mae = fit_learner_loss(ds, CC_LINEAR_LOSS_MAE, &ra);
    double pm[2], pa[2];
    double mm = model_mase(m_mse, ds, pm), ma = model_mase(m_mae, ds, pa), ridge_val = INFINITY;
    for (int q = 0; q < CC_LEARN_N_LAMBDAS; q++) /* the chosen penalty's: the lowest */
        ridge_val = fmin(ridge_val, ra.val_crit[q]);
    print_message("spikes: ridge %.4f (bytes %.4f, var %.4f), MAE fit %.4f (%.4f, %.4f); "
                  "training MAE %.4f -> %.4f in %d passes; validation %.4f -> %.4f; lambda %g\n",
                  mm, pm[0], pm[1], ma, pa[0], pa[1], ra.mae_start, ra.mae_end, ra.mae_passes,
                  ridge_val, ra.mae_val_crit, ra.lambda);
    assert_true(isnan(rm.mae_start) && !rm.mae_kept); /* the ridge alone */
    assert_true(ra.mae_passes >= 1);
    assert_true(ra.mae_end < ra.mae_start);
    assert_true(ra.mae_kept);
    assert_true(ma < mm);
    cc_model_close(&m_mse);
    cc_model_close(&m_mae);
    cc_data_close(&ds);
}

/* Cells missing one step in three before the held-out rows: no window has its 6 horizon
 * steps all observed, so the fit of whole windows found none and the learner had no
 * linear-only candidate (NAB's irregular 5-minute series on their first days). It falls
 * back to the windows with some step observed, their other targets the imputed values: the
 * map, scored on the same cells whole, beats the last value by far (seed 7: 1.31 against
 * 2.75; the map fitted on the whole cells 0.52: a third of its inputs and targets were
 * carried values). */
static void test_gappy_cells_fit(void **state)
{
    (void)state;
    CcDataset *whole = load(units_apart, 7), *gappy = load_dropping(units_apart, 7, 3);
    CcLinearFitReport rg, rw;
    CcModel *mg = fit_learner(gappy, &rg), *mw = fit_learner(whole, &rw);
    double pg[2], pw[2], pn[2];
    double g = model_mase(mg, whole, pg), w = model_mase(mw, whole, pw),
           n = baseline_mase(whole, 1, pn);
    print_message("gappy cells: %lld partly observed windows, MASE %.4f (%.4f, %.4f); whole "
                  "cells %lld windows %.4f; naive %.4f\n",
                  (long long)rg.n_fit, g, pg[0], pg[1], (long long)rw.n_fit, w, n);
    assert_int_equal(rg.partial_targets, 1);
    assert_int_equal(rw.partial_targets, 0);
    assert_true(rg.n_fit > 0);
    assert_true(g < 0.75 * n);
    assert_true(w < g); /* the whole cells still teach more */
    cc_model_close(&mg);
    cc_model_close(&mw);
    cc_data_close(&gappy);
    cc_data_close(&whole);
}

static void test_units_apart_match_per_kpi_maps(void **state)
{
    (void)state;
    CcDataset *ds = load(units_apart, 7);
    CcLinearFitReport rep;
    CcModel *m = fit_learner(ds, &rep);
    double pm[2], pl[2], pn[2];
    double mm = model_mase(m, ds, pm), ml = baseline_mase(ds, 0, pl), mn = baseline_mase(ds, 1, pn);
    print_message("units apart: learner %.4f (bytes %.4f, var %.4f; lambda %g), eval's linear "
                  "%.4f (%.4f, %.4f), naive %.4f\n",
                  mm, pm[0], pm[1], rep.lambda, ml, pl[0], pl[1], mn);
    /* One map shared by both KPIs, its bias in sigma units (so ~0: the var KPI's sigma is
     * 1e4 of its scales), against a map and a bias of each KPI's own, on the same rows:
     * within 10 % on the criterion, 15 % on each KPI (seeds 1-4 and 7 of this data: the
     * criterion 1.9-7.4 % above, a KPI at most 8.6 %). The fit on normalised targets scored
     * var 24.7 against 0.74 (seed 7). */
    assert_true(mm <= 1.10 * ml);
    assert_true(pm[0] <= 1.15 * pl[0]);
    assert_true(pm[1] <= 1.15 * pl[1]);
    assert_true(mm < mn); /* and the structure is there to learn */
    cc_model_close(&m);
    cc_data_close(&ds);
}

static void test_random_walk_stays_near_naive(void **state)
{
    (void)state;
    CcDataset *ds = load(random_walks, 11);
    CcLinearFitReport rep;
    CcModel *m = fit_learner(ds, &rep);
    double pm[2], pn[2];
    double mm = model_mase(m, ds, pm), mn = baseline_mase(ds, 1, pn);
    print_message("random walks: learner %.4f (lambda %g), naive %.4f\n", mm, rep.lambda, mn);
    /* 3 cells x 91 origins: a map of noise scores well above the last value (the fit on
     * normalised targets: 10.9 against 0.39); seeds 1-4 and 7 within 0.99-1.012 of it */
    assert_true(mm <= 1.05 * mn);
    cc_model_close(&m);
    cc_data_close(&ds);
}

/* The MAE fit's options on the trainer itself: a row cap (IRLS on every third sample) still
 * lowers the MAE it fits; with hold_bias, linear.bias stays the ridge's to the bit while
 * linear.weight moves. */
/* A stop request (the learner's SIGTERM flag) ends the MAE fit before its first IRLS pass
 * (no solve made: a fit of minutes ends within one pass of a SIGTERM): -ECANCELED, no model,
 * "stopped" in the message. The ridge alone ends at the calibration after it, which reads
 * the same flag. */
static void test_fit_stopped(void **state)
{
    (void)state;
    CcDataset *ds = load(spiky, 5);
    volatile sig_atomic_t stop = 1;
    CcLinearFitReport rep;
    CcModel *m = NULL;
    char err[256] = "";
    assert_int_equal(fit_learner_stop(ds, CC_LINEAR_LOSS_MAE, &rep, &stop, &m, err, sizeof err),
                     -ECANCELED);
    assert_null(m);
    assert_non_null(strstr(err, "stopped"));
    assert_int_equal(rep.mae_passes, 0);
    assert_int_equal(fit_learner_stop(ds, CC_LINEAR_LOSS_MSE, &rep, &stop, &m, err, sizeof err),
                     -ECANCELED);
    assert_null(m);
    stop = 0; /* the same fit unstopped: IRLS makes its passes */
    assert_int_equal(fit_learner_stop(ds, CC_LINEAR_LOSS_MAE, &rep, &stop, &m, err, sizeof err), 0);
    assert_true(rep.mae_passes >= 1);
    cc_model_close(&m);
    cc_data_close(&ds);
}

static void test_mae_fit_options(void **state)
{
    (void)state;
    CcDataset *ds = load(spiky, 5);
    CcLinearFitReport rep;
    CcModel *m = fit_learner(ds, &rep);
    CcRange tr[N_CELLS], va[N_CELLS];
    double scale[N_CELLS * 2];
    for (int s = 0; s < N_CELLS; s++) {
        tr[s] = (CcRange){0, TRAIN}, va[s] = (CcRange){TRAIN, VAL};
        for (int f = 0; f < 2; f++)
            scale[s * 2 + f] = scale_of(ds, s, f);
    }
    CcTrainSettings ts;
    cc_train_default_settings(&ts);
    ts.n_threads = 1;
    CcTrainer *t = NULL;
    char err[256];
    assert_int_equal(cc_trainer_open(&t, m, ds, tr, va, &ts, err, sizeof err), 0);
    CcLinearFitSettings fs = {
        .scale = scale, .lambdas = cc_learn_lambdas, .n_lambdas = CC_LEARN_N_LAMBDAS, .refit = va};
    assert_int_equal(cc_trainer_fit_linear_scaled(t, &fs, &rep), 0); /* the ridge */
    const size_t nw = (size_t)HZ * R;
    float *ridge_w = malloc(nw * sizeof *ridge_w), ridge_b[HZ];
    assert_non_null(ridge_w);
    memcpy(ridge_w, m->w.lin_w, nw * sizeof *ridge_w);
    memcpy(ridge_b, m->w.lin_b, sizeof ridge_b);
    fs.loss = CC_LINEAR_LOSS_MAE, fs.mae_max_rows = rep.n_fit / 3;
    assert_int_equal(cc_trainer_fit_linear_scaled(t, &fs, &rep), 0);
    print_message("cap %lld of %lld samples: MAE %.4f -> %.4f in %d passes, kept %d\n",
                  (long long)fs.mae_max_rows, (long long)rep.n_fit, rep.mae_start, rep.mae_end,
                  rep.mae_passes, rep.mae_kept);
    assert_true(rep.mae_passes >= 1 && rep.mae_end < rep.mae_start);
    assert_int_equal(rep.mae_coarse_passes, 0); /* too few rows per input for a coarse stage */
    /* the coarse stage on every second sample (enough rows per input at this size), then
     * the fine passes from there: the same problem as without it (the same penalty, the MAE
     * at the ridge map alike), solved to its stopping rule, near the same end */
    fs.mae_max_rows = 0, fs.mae_coarse = 1;
    CcLinearFitReport one, two;
    assert_int_equal(cc_trainer_fit_linear_scaled(t, &fs, &one), 0);
    fs.mae_coarse = 2;
    assert_int_equal(cc_trainer_fit_linear_scaled(t, &fs, &two), 0);
    print_message("one stage: MAE %.6f -> %.6f in %d passes; coarse stage: %.6f -> %.6f in %d "
                  "+ %d coarse passes\n",
                  one.mae_start, one.mae_end, one.mae_passes, two.mae_start, two.mae_end,
                  two.mae_passes, two.mae_coarse_passes);
    assert_int_equal(one.mae_coarse_passes, 0);
    assert_true(two.mae_coarse_passes >= 1);
    assert_true(two.lambda == one.lambda && two.mae_start == one.mae_start);
    assert_true(two.mae_end < two.mae_start);
    /* each stops where a pass gains less than CC_LINEAR_FIT_MAE_TOL of the objective: the
     * MAE at either end within 20 such gains of the other's */
    assert_true(fabs(two.mae_end - one.mae_end) <= 20 * CC_LINEAR_FIT_MAE_TOL * one.mae_end);
    fs.mae_coarse = -1;
    assert_int_equal(cc_trainer_fit_linear_scaled(t, &fs, &rep), -EINVAL);
    /* plain IRLS steps (mae_relax 1) against the default over-relaxed ones: the same problem,
     * the default in no more passes and to no higher an end (within the stopping rule) */
    fs.mae_coarse = 1, fs.mae_relax = 1;
    CcLinearFitReport plain;
    assert_int_equal(cc_trainer_fit_linear_scaled(t, &fs, &plain), 0);
    print_message("plain steps: MAE %.6f -> %.6f in %d passes; over-relaxed (%.2f): %.6f in %d\n",
                  plain.mae_start, plain.mae_end, plain.mae_passes, CC_LINEAR_FIT_MAE_RELAX,
                  one.mae_end, one.mae_passes);
    assert_true(plain.mae_start == one.mae_start && plain.lambda == one.lambda);
    assert_true(one.mae_passes <= plain.mae_passes);
    assert_true(one.mae_end <= plain.mae_end * (1 + 20 * CC_LINEAR_FIT_MAE_TOL));
    fs.mae_relax = 2;
    assert_int_equal(cc_trainer_fit_linear_scaled(t, &fs, &rep), -EINVAL);
    fs.mae_relax = -1;
    assert_int_equal(cc_trainer_fit_linear_scaled(t, &fs, &rep), -EINVAL);
    fs.mae_relax = 0, fs.mae_coarse = 0, fs.hold_bias = 1;
    assert_int_equal(cc_trainer_fit_linear_scaled(t, &fs, &rep), 0);
    assert_true(rep.mae_kept);
    assert_memory_equal(m->w.lin_b, ridge_b, sizeof ridge_b);
    double moved = 0;
    for (size_t i = 0; i < nw; i++)
        moved = fmax(moved, fabs(m->w.lin_w[i] - ridge_w[i]));
    assert_true(moved > 0);
    fs.loss = 7;
    assert_int_equal(cc_trainer_fit_linear_scaled(t, &fs, &rep), -EINVAL);
    free(ridge_w);
    cc_trainer_close(&t);
    cc_model_close(&m);
    cc_data_close(&ds);
}

/* Bad settings are refused, not fitted. */
static void test_bad_settings(void **state)
{
    (void)state;
    CcDataset *ds = load(units_apart, 3);
    CcLinearFitReport rep;
    CcModel *m = fit_learner(ds, &rep);
    CcRange tr[N_CELLS], va[N_CELLS];
    for (int s = 0; s < N_CELLS; s++)
        tr[s] = (CcRange){0, TRAIN}, va[s] = (CcRange){TRAIN, VAL};
    CcTrainSettings ts;
    cc_train_default_settings(&ts);
    ts.n_threads = 1;
    CcTrainer *t = NULL;
    char err[256];
    assert_int_equal(cc_trainer_open(&t, m, ds, tr, va, &ts, err, sizeof err), 0);
    double scale[N_CELLS * 2] = {1, 1, 1, 1, 1, 1}, neg = -1, ok = 1;
    CcLinearFitSettings fs = {.scale = scale, .lambdas = &neg, .n_lambdas = 1};
    assert_int_equal(cc_trainer_fit_linear_scaled(t, &fs, &rep), -EINVAL);
    fs.lambdas = &ok, fs.n_lambdas = 0;
    assert_int_equal(cc_trainer_fit_linear_scaled(t, &fs, &rep), -EINVAL);
    fs.n_lambdas = 1, fs.scale = NULL;
    assert_int_equal(cc_trainer_fit_linear_scaled(t, &fs, &rep), -EINVAL);
    cc_trainer_close(&t);
    cc_model_close(&m);
    cc_data_close(&ds);
}

/* Rollback records (cc_learn_rollback_*): what cellcastd writes is read back whole; each
 * hostile version is refused with a message and fills nothing a caller would trust. */
static void test_rollback_record(void **state)
{
    (void)state;
    CcLearnRollback r = {.live_mase = 1.75, .baseline_mase = 0.5, .forecasts = 4608}, got;
    snprintf(r.hash, sizeof r.hash, "00ff00ff00ff00ff");
    snprintf(r.to, sizeof r.to, "0123456789abcdef");
    snprintf(r.member, sizeof r.member, "cellcastd-a-8080");
    snprintf(r.at, sizeof r.at, "2026-11-28T03:00:00Z");
    snprintf(r.why, sizeof r.why, "live MASE 1.75 > (1 + 0.1) x 0.5");
    char key[26], err[256];
    char *js = cc_learn_rollback_json(&r, key);
    assert_non_null(js);
    assert_string_equal(key, "rollback/00ff00ff00ff00ff");
    assert_int_equal(
        cc_learn_rollback_parse(key, strlen(key), js, strlen(js), &got, err, sizeof err), 0);
    assert_string_equal(got.hash, r.hash);
    assert_string_equal(got.to, r.to);
    assert_string_equal(got.member, r.member);
    assert_string_equal(got.at, r.at);
    assert_string_equal(got.why, r.why);
    assert_true(got.live_mase == 1.75 && got.baseline_mase == 0.5 && got.forecasts == 4608);
    free(js);
    assert_true(cc_learn_rollback_key("rollback/x", 10));
    assert_false(cc_learn_rollback_key("learned", 7));
    assert_false(cc_learn_rollback_key("learned#00ff00ff00ff00ff#0", 26));

    const char *K = "rollback/00ff00ff00ff00ff";
    const char *ok_tail = "\"member\":\"m\",\"to\":\"0123456789abcdef\"}";
    struct {
        const char *key, *value, *says;
    } bad[] = {
        {"rollback/00FF00FF00FF00FF", NULL, "key"},
        {"rollback/00ff00ff00ff00f", NULL, "key"},
        {"rollback/00ff00ff00ff00ffx", NULL, "key"},
        {K, "", "no value"},
        {K, "[1,2]", "not a JSON object"},
        {K, "{\"format\":\"cellcast-rollback/1\",\"hash\":\"00ff", "not a JSON object"},
        {K, "{\"format\":\"cellcast-rollback/9\",\"hash\":\"00ff00ff00ff00ff\",", "format"},
        {K, "{\"format\":\"cellcast-rollback/1\",\"hash\":\"1111111111111111\",", "key's"},
        {K, "{\"format\":\"cellcast-rollback/1\",\"hash\":7,", "'hash'"},
        {K, "{\"format\":\"cellcast-rollback/1\",\"hash\":\"00ff00ff00ff00ff\",\"live_mase\":-1,",
         "live_mase"},
        {K, "{\"format\":\"cellcast-rollback/1\",\"hash\":\"00ff00ff00ff00ff\",\"forecasts\":1.5,",
         "forecasts"},
        {K,
         "{\"format\":\"cellcast-rollback/1\",\"hash\":\"00ff00ff00ff00ff\",\"why\":\"a\\u0001b\",",
         "control"},
        {K,
         "{\"format\":\"cellcast-rollback/"
         "1\",\"hash\":\"00ff00ff00ff00ff\",\"at\":\"2026-11-28T03:00:00.000000000000000Z\",",
         "'at'"},
    };
    char buf[8192];
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *v = bad[i].value ? bad[i].value : "{\"format\":\"cellcast-rollback/1\",";
        int n = snprintf(buf, sizeof buf, "%s%s", v, *v && v[strlen(v) - 1] == ',' ? ok_tail : "");
        err[0] = 0;
        assert_int_equal(cc_learn_rollback_parse(bad[i].key, strlen(bad[i].key), buf, (size_t)n,
                                                 &got, err, sizeof err),
                         -EINVAL);
        printf("refused %-28s %-40.40s: %s\n", bad[i].key, buf, err);
        assert_non_null(strstr(err, bad[i].says));
    }
    /* a record whose 'to' is missing, is its own hash, or whose member is empty */
    const char *no_to = "{\"format\":\"cellcast-rollback/1\",\"hash\":\"00ff00ff00ff00ff\","
                        "\"member\":\"m\"}";
    const char *self = "{\"format\":\"cellcast-rollback/1\",\"hash\":\"00ff00ff00ff00ff\","
                       "\"member\":\"m\",\"to\":\"00ff00ff00ff00ff\"}";
    const char *nobody = "{\"format\":\"cellcast-rollback/1\",\"hash\":\"00ff00ff00ff00ff\","
                         "\"member\":\"\",\"to\":\"0123456789abcdef\"}";
    assert_int_equal(
        cc_learn_rollback_parse(K, strlen(K), no_to, strlen(no_to), &got, err, sizeof err),
        -EINVAL);
    assert_int_equal(
        cc_learn_rollback_parse(K, strlen(K), self, strlen(self), &got, err, sizeof err), -EINVAL);
    assert_int_equal(
        cc_learn_rollback_parse(K, strlen(K), nobody, strlen(nobody), &got, err, sizeof err),
        -EINVAL);
    /* huge: over CC_LEARN_ROLLBACK_MAX_BYTES, whatever it holds */
    size_t big = CC_LEARN_ROLLBACK_MAX_BYTES + 1;
    char *huge = malloc(big);
    memset(huge, ' ', big);
    huge[0] = '{', huge[big - 1] = '}';
    assert_int_equal(cc_learn_rollback_parse(K, strlen(K), huge, big, &got, err, sizeof err),
                     -EINVAL);
    assert_non_null(strstr(err, "at most"));
    free(huge);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_units_apart_match_per_kpi_maps),
        cmocka_unit_test(test_gappy_cells_fit),
        cmocka_unit_test(test_random_walk_stays_near_naive),
        cmocka_unit_test(test_mae_fit_on_spikes),
        cmocka_unit_test(test_mae_fit_options),
        cmocka_unit_test(test_fit_stopped),
        cmocka_unit_test(test_bad_settings),
        cmocka_unit_test(test_rollback_record),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
