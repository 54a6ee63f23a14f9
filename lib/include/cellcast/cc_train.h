/*
 * cc_train.h — training of cellcast-tx/3 (and tx/2): the backward pass (llm.c style, plain
 * functions beside the forward ones, outputs first, sizes last), Adam/AdamW with warmup and decay,
 * and a trainer that draws samples from a CcDataset exactly as the spec's steps 1–6.
 *
 * A training *sample* is one channel (series s, feature f) at one end step t: the forecast
 * of the spec at t, with the Gaussian NLL of the normalised targets t+1..t+HZ.
 * A *window* groups the samples of one channel that share the newest complete patch e
 * (t = e .. e+P-1): their n cached tokens are the same, so a window is evaluated as one
 * sequence [cached_0 .. cached_{n-1}, cur_0 .. cur_{G-1}] where cached i attends to cached
 * 0..i and current token j attends to every cached token and itself only. Each current
 * token's output is exactly the spec's forecast at its t (the mask keeps the current
 * tokens from seeing each other); sharing the cached tokens makes a sample cost about
 * (n + G)/G tokens instead of n + 1.
 *
 * Positions: every token position q/P of a window is shifted by pos_offset, an integer
 * number of patches drawn uniformly in [0, CC_TRAIN_POS_RANGE) per window, so that only
 * relative positions can be learned (time features are not shifted).
 *
 * Letters (as cc_model.h): R token rows of a batch (all windows concatenated), B windows,
 * C current tokens of a batch (samples), T = n + G tokens of one window.
 */
#ifndef CC_TRAIN_H
#define CC_TRAIN_H

#include <signal.h>

#include "cc_calib.h"
#include "cc_data.h"
#include "cc_model.h"

#define CC_TRAIN_POS_RANGE 1000000 ///< position offsets are drawn in [0, this) patches
/* A model whose validation MAE is above this times the last value's (cellcast train's
 * val_mae_vs_last*) is reported as losing to it, by the trainer and by cellcastd when it
 * loads the file: within 2 % is a tie at the size of a validation split. */
#define CC_TRAIN_NAIVE_WARN 1.02

/* The default xn_bound: far above any value of a window whose spread is its own (one of M
 * values lies at most sqrt(M - 1) sds from their mean: 18 for M = 336) and above the 100–300
 * that a Barcelona KPI quiet for a night reaches 30 steps ahead (8 of 76,776 samples), so
 * the project's recipes train bit for bit as without it; NAB's probation file reaches 10^7
 * (docs/training.md "Samples left out of the loss"). */
#define CC_TRAIN_XN_BOUND 1000.0f
#define CC_TRAIN_MAE_UNIT_CAP 1e4 /* sigma / scale of a KPI whose sigma is model.md's 1e-5 term */
#define CC_TRAIN_FLOOR_SPREAD 4.0 ///< norm.floor's median sd is at most this x the smallest
#define CC_TRAIN_MAX_GROUP 64     ///< at most this many current tokens per window
#define CC_NLL_LOGSIG_MIN (-7.0f) ///< log-sigma below this is clamped in the loss (no gradient)
#define CC_NLL_LOGSIG_MAX 7.0f    ///< log-sigma above this is clamped in the loss (no gradient)
/* tx/3's lower clamp: with norm.floor a flat window's sigma is already a fraction of the
 * KPI's scale, and a predicted sd 1/50 of that is as sure as the loss need allow; -7 let a
 * run of exactly constant targets teach sd -> 0 and the first jump after it cost 1e6+. */
#define CC_NLL_LOGSIG_MIN_TX3 (-4.0f)
/* The standard normal's 0.9 quantile: P10–P90 = mean ± this·sd; spelt as cc_metrics.h
 * spells it, so that a file may include both. */
#define CC_Z80 1.2815516

/* ---- layer functions (forward and backward), exposed for the gradient tests ---------- */

/** out (R,D) = LayerNorm(inp) with gain g, bias b; saves xhat (R,D) and rstd (R). */
void cc_tr_layernorm_forward(float *out, float *xhat, float *rstd, const float *inp, const float *g,
                             const float *b, int R, int D);
/** dinp (R,D) = overwritten; dg, db (D) accumulated. */
void cc_tr_layernorm_backward(float *dinp, float *dg, float *db, const float *dout,
                              const float *xhat, const float *rstd, const float *g, int R, int D);

/** out (R,O) = inp (R,NI) · W^T (O,NI) + bias (O) (bias may be NULL). OpenBLAS. */
void cc_tr_matmul_forward(float *out, const float *inp, const float *W, const float *bias, int R,
                          int O, int NI);
/** dinp (R,NI) overwritten (may be NULL: skipped); dW (O,NI), dbias (O) accumulated
 *  (dbias may be NULL). */
void cc_tr_matmul_backward(float *dinp, float *dW, float *dbias, const float *dout,
                           const float *inp, const float *W, int R, int O, int NI);

/**
 * Masked multi-head attention of one window of T = n + G tokens (n cached, G current).
 * qkv (T,3D): q | k | v per row, heads take columns [h·DK, (h+1)·DK) of each.
 * out (T,D) concatenated heads; att (H,T,n+1): row r holds the weights over its allowed keys
 * (key slot j < n is cached token j; slot n is the token itself for a current token).
 */
void cc_tr_attention_forward(float *out, float *att, const float *qkv, int n, int T, int D, int H);
/** dqkv (T,3D) overwritten. */
void cc_tr_attention_backward(float *dqkv, const float *dout, const float *att, const float *qkv,
                              int n, int T, int D, int H);

/**
 * Gaussian NLL of the spec for one sample: y (2HZ) head output, target (HZ) normalised,
 * w (HZ) 1 = observed, 0 = masked out. Returns mean over observed k of
 * 0.5·((target - y0)/exp(y1))^2 + y1 (0 when none observed) and writes dy (2HZ) =
 * scale · d(that)/dy. *n_obs gets the observed count (may be NULL).
 */
double cc_tr_nll(float *dy, const float *y, const float *target, const float *w, int HZ,
                 float scale, int *n_obs);

/* ---- windows and the batched training forward/backward ------------------------------- */

/** One window of one channel (see top). */
typedef struct CcTrainWindow {
    int series;                  ///< series index in the dataset
    int feature;                 ///< f, column of the dataset = channel embedding row
    int64_t e;                   ///< absolute step of the newest complete patch's last step
    int n_cur;                   ///< G current tokens, 1..CC_TRAIN_MAX_GROUP
    int cur[CC_TRAIN_MAX_GROUP]; ///< their end steps as t - e, each in [0, P)
    int64_t pos_offset;          ///< patches added to every position of the window
    uint64_t seed;               ///< dropout stream of this window
} CcTrainWindow;

typedef struct CcTrainWork CcTrainWork;

/** The loss of cc_train_batch on w from now on: log-sigma clamped below at logsig_min
 *  inside the NLL (CC_NLL_LOGSIG_MIN when the work is opened: tx/2's), and, when training
 *  (grad given), terms on the mean: mae_weight · mean_k |target - y[k][0]| + mse_weight ·
 *  mean_k (target - y[k][0])² added, and the NLL's gradient on y[k][0] times nll_mean (0:
 *  the mean learns from those terms alone, log-sigma from the NLL). Opened: 0, 0, 1. */
void cc_train_work_set_loss(CcTrainWork *w, float logsig_min, float mae_weight, float mse_weight,
                            float nll_mean);

/** When training (grad given), the NLL of a target more than k predicted sds from the mean
 *  (|r| > k, r = (target - y[k][0]) e^-y[k][1]) from now on: k |r| - k²/2 + log-sigma, the
 *  Huber loss's linear tail, so that the mean's gradient stays at k e^-y[k][1] and
 *  log-sigma's at 1 - k |r| (not 1 - r²); validation scores the plain NLL. 0 = off
 *  (opened: 0). */
void cc_train_work_set_nll_huber(CcTrainWork *w, float k);

/** Where cc_train_batch on w puts dropout from now on (opened: CC_DROPOUT_ALL). */
enum CcDropoutSites {
    CC_DROPOUT_ALL = 0,     ///< the embedding sum, the attention output, the FFN's hidden
                            ///< ReLU and its output
    CC_DROPOUT_RESIDUAL = 1 ///< the two residual branches only (attention output, FFN
                            ///< output), as tools/torch/cellcast_tx.py
};
void cc_train_work_set_dropout_sites(CcTrainWork *w, enum CcDropoutSites sites);

/** Per-KPI weights (F; NULL = all 1, as opened) of cc_train_work_sqerr's squared errors;
 *  the array must outlive w's use. */
void cc_train_work_set_sq_weight(CcTrainWork *w, const float *weight);

/** The MAE term on the mean in each channel's units over its scale: unit (n_series · F,
 *  1 / the channel's scale, e.g. its MASE scale; NULL = off, as opened) weighs every
 *  sample's MAE by sigma · unit (at most cap), so that the term is the channel's MAE in
 *  units of its scale (a MASE) rather than of the window's sigma. The array must outlive
 *  w's use. */
void cc_train_work_set_mae_unit(CcTrainWork *w, const double *unit, double cap);

/** Training batches (grad != NULL) on w from now on leave out of the loss every current
 *  token whose window holds a normalised value beyond ±bound: its tokens' inputs, the linear
 *  path's r and xn_t, or an observed target (its targets' weights become 0). Such a value is
 *  a flat normalisation window (sigma = norm.floor, tx/3; the tx/2 floor) followed or
 *  preceded by a move of thousands of those sigmas, whose squared error swamps every other
 *  sample's (NAB's probation file: batch losses of 1e14). 0 = none (as opened). Validation
 *  batches (grad == NULL) are never changed. */
void cc_train_work_set_xn_bound(CcTrainWork *w, float bound);

/** Current tokens the last cc_train_batch on w left out by the bound above. */
int cc_train_work_excluded(const CcTrainWork *w);

/** After a cc_train_batch on w: the normalised targets (C, HZ) and their weights (1 =
 *  observed) of its current tokens, in order. */
void cc_train_work_targets(const CcTrainWork *w, const float **target, const float **weight);

/** Squared error of the predicted means in data units ((y0 - target)·sigma)², times the
 *  KPI's weight (cc_train_work_set_sq_weight), summed over the observed targets of the last
 *  cc_train_batch on w, and their count. */
void cc_train_work_sqerr(const CcTrainWork *w, double *sum, int64_t *count);

/** After a cc_train_batch on w: per window, in order, the absolute errors of the predicted
 *  means in data units (|y0 - target|·sigma) summed over its observed targets, their
 *  squares (sq_sum may be NULL), and their count (valid until the next batch on w). */
void cc_train_work_abserr(const CcTrainWork *w, const double **sum, const double **sq_sum,
                          const int **count);

/** Scratch for up to max_windows windows of up to max_group current tokens. */
int cc_train_work_open(CcTrainWork **out, const CcHparams *hp, int max_windows, int max_group);
void cc_train_work_close(CcTrainWork **w);

/**
 * Forward (and backward when grad != NULL) of a batch of windows on model m.
 * Loss = sum over samples of their mean NLL, times loss_scale (the trainer passes
 * 1/number of samples of the whole step). Gradients of that are ADDED to grad (a block
 * laid out as m->block: cc_params_point works on it). dropout > 0 only when training.
 * *loss gets the (scaled) loss, *n_samples the samples with at least one observed target.
 * y_out (C, 2HZ) (may be NULL) receives the head outputs of the current tokens in order,
 * mu_out/sigma_out (B) (may be NULL) the normalisation of each window.
 * Returns 0 or -EINVAL (a window outside its series or without a complete patch).
 */
int cc_train_batch(CcTrainWork *w, const CcModel *m, float *grad, const CcDataset *ds,
                   const CcTrainWindow *win, int n_win, float dropout, float loss_scale,
                   double *loss, int *n_samples, float *y_out, float *mu_out, float *sigma_out);

/* ---- optimiser ----------------------------------------------------------------------- */

enum CcSchedule { CC_SCHED_INVSQRT = 0, CC_SCHED_COSINE = 1, CC_SCHED_CONSTANT = 2 };

typedef struct CcAdamSettings {
    float lr;                 ///< peak learning rate (default 1e-3)
    float beta1;              ///< (default 0.9)
    float beta2;              ///< (default 0.98)
    float eps;                ///< (default 1e-9)
    float weight_decay;       ///< AdamW decoupled decay of weight matrices (not biases, norms,
                              ///< channel embedding) when > 0 (default 0)
    int warmup;               ///< linear warmup steps (default 100)
    enum CcSchedule schedule; ///< after warmup: lr·sqrt(warmup/step), cosine to min_lr_frac
                              ///< at total_steps, or constant (default CC_SCHED_INVSQRT)
    int64_t total_steps;      ///< for the cosine schedule (default 0 = constant after warmup)
    float min_lr_frac;        ///< cosine floor as a fraction of lr (default 0.05)
    float clip;               ///< clip the gradient's global L2 norm to this; 0 = off (default 1.0)
} CcAdamSettings;

void cc_adam_default_settings(CcAdamSettings *s);

/** Learning rate at optimiser step `step` (1-based). */
float cc_adam_lr(const CcAdamSettings *s, int64_t step);

/**
 * One Adam(W) update of params (n) with grad (n), moments m, v (n), at 1-based `step`:
 * clips grad in place to s->clip, then m = b1 m + (1-b1) g; v = b2 v + (1-b2) g²;
 * p -= lr_t · (m/(1-b1^t)) / (sqrt(v/(1-b2^t)) + eps) [+ lr_t·wd·p where decay[i]].
 * decay (n) may be NULL (no decay). Returns the gradient norm before clipping.
 */
double cc_adam_update(float *params, float *grad, float *m, float *v, const uint8_t *decay,
                      size_t n, int64_t step, const CcAdamSettings *s);

/* ---- trainer ------------------------------------------------------------------------- */

typedef struct CcTrainSettings {
    CcAdamSettings adam;   ///< (see cc_adam_default_settings)
    float dropout;         ///< (default 0.1)
    int batch;             ///< windows per optimiser step (default 32)
    int group;             ///< current tokens per window; 0 = P (every alignment) (default 8)
    int n_threads;         ///< threads, each owning part of the batch (default 2)
    uint64_t seed;         ///< sampling, dropout, offsets (default 1)
    int max_val_windows;   ///< validation windows (evenly spaced subset) (default 1024)
    float ema;             ///< decay of an exponential moving average of the weights, which
                           ///< then is what cc_trainer_validate scores and
                           ///< cc_trainer_eval_weights returns; 0 = off (default 0)
    float mae_weight;      ///< weight of an MAE term on the mean added to the NLL (default 0)
    float mse_weight;      ///< weight of an MSE term on the mean added to the NLL (default 0)
    float nll_mean;        ///< the NLL's gradient on the mean times this; 0 = the mean learns
                           ///< from the MAE/MSE terms only (default 1)
    float logsig_min;      ///< lower clamp of log-sigma in the loss; 0 = CC_NLL_LOGSIG_MIN for
                           ///< tx/2, CC_NLL_LOGSIG_MIN_TX3 for tx/3 (default 0)
    float nll_huber;       ///< the NLL's linear tail beyond this many predicted sds
                           ///< (cc_train_work_set_nll_huber); 0 = off (default 0)
    int64_t linear_freeze; ///< tx/3: the first this many optimiser steps leave the linear path
                           ///< as it is (its gradient zeroed; e.g. after
                           ///< cc_trainer_fit_linear, the transformer first learns the
                           ///< residual) (default 0)
    float linear_lr_mult;  ///< tx/3: the linear path's updates (Adam step and decay) times
                           ///< this, a learning rate of its own; 0 = it never moves (default 1)
    enum CcDropoutSites dropout_sites; ///< (default CC_DROPOUT_ALL)
    const double *mae_unit;      ///< (n_series · F) cc_train_work_set_mae_unit's, must outlive the
                                 ///< trainer (default NULL: the MAE term in sigma units)
    double mae_unit_cap;         ///< its largest weight (default CC_TRAIN_MAE_UNIT_CAP)
    const float *val_mse_weight; ///< (F) per-KPI weights of the validation MSE, e.g. each
                                 ///< KPI's variance to score data z-scored beforehand in
                                 ///< its own units; must outlive the trainer (default NULL:
                                 ///< all 1)
    int decay_all;               ///< AdamW decay on every trained array (biases, norms, channel
                                 ///< embedding, the linear path), as torch.optim.AdamW on all
                                 ///< parameters; 0 = weight matrices only (default 0)
    float xn_bound; ///< training samples with a normalised value beyond ±xn_bound are left
                    ///< out of the loss (cc_train_work_set_xn_bound); 0 = none (default
                    ///< CC_TRAIN_XN_BOUND)
    /** A stop request, e.g. the flag a SIGTERM handler sets (the library holds no global
     *  state: the caller owns it, and it must outlive the trainer). Read before each
     *  optimiser step and by each thread before each of its chunks of windows (at most
     *  batch / n_threads windows apart, in a step and in a validation); once nonzero,
     *  cc_trainer_step, cc_trainer_validate and cc_trainer_calibrate_fit return
     *  -ECANCELED, leaving the weights as the last whole step left them. NULL: never
     *  stopped (default NULL). */
    const volatile sig_atomic_t *stop;
} CcTrainSettings;

void cc_train_default_settings(CcTrainSettings *s);

typedef struct CcTrainer CcTrainer;

/**
 * A trainer over dataset ds (must outlive it; its F must equal the model's) with per-series
 * row ranges train[s] and val[s]: training samples have all HZ targets inside train[s],
 * validation samples inside val[s] (inputs may reach before the range). The model m is
 * updated in place by cc_trainer_step (it must outlive the trainer).
 * 0, -EINVAL (no training sample: message), -ENOMEM.
 */
int cc_trainer_open(CcTrainer **out, CcModel *m, const CcDataset *ds, const CcRange *train,
                    const CcRange *val, const CcTrainSettings *s, char *err, size_t errlen);
void cc_trainer_close(CcTrainer **t);

/** Training samples (end steps) and validation samples available. */
void cc_trainer_counts(const CcTrainer *t, int64_t *train_samples, int64_t *val_samples);

/** Training samples (current tokens) drawn by the optimiser steps so far, and how many of
 *  them the settings' xn_bound left out of the loss. */
void cc_trainer_excluded(const CcTrainer *t, int64_t *excluded, int64_t *drawn);

/** One optimiser step; *loss = mean NLL of the batch, *lr the rate used, *gnorm the
 *  gradient norm before clipping (each may be NULL). 0, -ENOMEM, -EINVAL, -ERANGE
 *  (non-finite loss: the update is skipped), -ECANCELED (settings.stop is set: no update,
 *  the step not counted). */
int cc_trainer_step(CcTrainer *t, double *loss, float *lr, double *gnorm);

/**
 * tx/3: sets linear.weight (HZ, R) and linear.bias (HZ) to the ridge regression of the
 * targets' change from the last value, xn_{t+1+k} - xn_t, on the linear path's input
 * r = xn_{t-R+1..t} - xn_t, over every training sample (every series, KPI and end step t
 * of the trainer's training pool, normalised exactly as served) whose R inputs lie inside
 * the series and whose HZ targets are all observed (fewer than 2·R such samples, cells with
 * gaps: those with at least one target observed, the others the imputed values). The
 * penalty lambda · n_samples · |W|²
 * (lambda per sample, so it does not depend on the data's length; the bias is not
 * penalised). The rest of the model is left as it is: the transformer then learns the
 * residual of a linear forecaster already at its closed-form optimum. With settings.ema the
 * EMA copy gets the same weights. *n_samples (may be NULL) gets the samples used.
 * 0, -EINVAL (a tx/2 model, lambda < 0), -EAGAIN (no such sample), -EDOM (the normal
 * equations are singular: lambda = 0 on collinear inputs), -ENOMEM.
 */
int cc_trainer_fit_linear(CcTrainer *t, double lambda, int64_t *n_samples);

/** The loss cc_trainer_fit_linear_scaled minimises. */
typedef enum CcLinearLoss {
    CC_LINEAR_LOSS_MSE = 0, ///< the squared error in each KPI's MASE units: the ridge
    CC_LINEAR_LOSS_MAE,     ///< the absolute error in those units (the learner's criterion):
                            ///< IRLS (lib/cc_lad.h) from the ridge solution
} CcLinearLoss;

/** What cc_trainer_fit_linear_scaled fits with (see there). */
typedef struct CcLinearFitSettings {
    const double *scale;   ///< (n_series · F) each channel's error scale in KPI units, e.g. its
                           ///< MASE scale (cc_train_mase_scales); a channel whose scale is not
                           ///< > 0 and finite (a constant KPI) is left out. Required.
    const double *lambdas; ///< penalties relative to the inputs' mean square (as `cellcast
                           ///< eval`'s linear); more than one: chosen on the validation windows
                           ///< (none: the first)
    int n_lambdas;         ///< ≥ 1, at most CC_LINEAR_FIT_MAX_LAMBDAS
    const CcRange *refit;  ///< NULL, or per series the rows whose samples are added after the
                           ///< choice (e.g. the validation rows: the map then knows the most
                           ///< recent data, as a model refitted on all rows would)
    CcLinearLoss loss;     ///< default CC_LINEAR_LOSS_MSE (0)
    int hold_bias;         ///< CC_LINEAR_LOSS_MAE: 1 = linear.bias stays the ridge's, only
                           ///< linear.weight is refitted; 0 (default) = both
    int mae_passes;        ///< CC_LINEAR_LOSS_MAE: the most IRLS passes over the rows
                           ///< (0: CC_LINEAR_FIT_MAE_PASSES)
    int64_t mae_max_rows;  ///< CC_LINEAR_LOSS_MAE: IRLS on at most this many samples, every
                           ///< ceil(n / this)-th in the pool's order (a pass costs HZ·K² a
                           ///< sample, HZ times the ridge's; 0: CC_LINEAR_FIT_MAE_ROWS)
    int mae_coarse;        ///< CC_LINEAR_LOSS_MAE: the coarse stage's subsample, every
                           ///< mae_coarse-th of IRLS's rows (0: CC_LINEAR_FIT_MAE_COARSE;
                           ///< 1: no coarse stage)
    double mae_relax;      ///< CC_LINEAR_LOSS_MAE: each pass moves relax times the way to the
                           ///< solve's point, in (0, 2) (0: CC_LINEAR_FIT_MAE_RELAX; 1: plain IRLS)
} CcLinearFitSettings;

#define CC_LINEAR_FIT_MAX_LAMBDAS 16
/* IRLS: at most this many passes; it stops earlier when a pass lowers the objective by less
 * than ..._TOL of it; the Huber width (cc_lad.h) is ..._EPS in MASE units (a thousandth of a
 * KPI's scale: the MAE it minimises is within that of the absolute error's). */
#define CC_LINEAR_FIT_MAE_PASSES 20
#define CC_LINEAR_FIT_MAE_TOL 2e-4
#define CC_LINEAR_FIT_MAE_EPS 1e-3
/* at most ..._ROWS samples (Barcelona days 10 / 14, 149 k / 191 k samples: 0.402 / 0.570 held
 * out with 100 000 as with 200 000, the fit's full passes half the cost) */
#define CC_LINEAR_FIT_MAE_ROWS 100000
/* IRLS on more rows first converges on every ..._COARSE-th of them (when that leaves at least
 * ..._COARSE_MIN rows per input), then goes on over all of them from there: most passes at
 * an eighth of the cost (a pass's is linear in the rows). */
#define CC_LINEAR_FIT_MAE_COARSE 8
#define CC_LINEAR_FIT_MAE_COARSE_MIN 20
/* Each IRLS pass moves ..._RELAX times the way to its solve's point (over-relaxed: 1 is plain
 * IRLS; any value in (0, 2) keeps the objective from rising): fewer passes to the stopping
 * rule (hourly cells: 8-14 against 12-22). */
#define CC_LINEAR_FIT_MAE_RELAX 1.8

typedef struct CcLinearFitReport {
    double lambda;                              ///< the penalty kept
    double val_crit[CC_LINEAR_FIT_MAX_LAMBDAS]; ///< per lambda: the mean over KPIs of the
                                                ///< validation MAE / scale (NaN: not scored)
    int64_t n_fit, n_refit;                     ///< samples of the choice, added by refit
    int partial_targets;   ///< 1: fewer than 2·R windows had every horizon step observed (cells
                           ///< with gaps), so those with at least one were fitted, their other
                           ///< targets the imputed values, and validated on observed steps
    int mae_passes;        ///< CC_LINEAR_LOSS_MAE: IRLS passes made
    int mae_coarse_passes; ///< CC_LINEAR_LOSS_MAE: IRLS passes on the coarse stage's subsample
                           ///< (besides mae_passes)
    int mae_kept;          ///< CC_LINEAR_LOSS_MAE: 1 = the MAE map kept, 0 = the ridge's
    double mae_start, mae_end; ///< CC_LINEAR_LOSS_MAE: the mean absolute error in MASE units
                               ///< over the training rows and horizon steps at the ridge
                               ///< solution and at the MAE map (NaN: not fitted)
    double mae_val_crit;       ///< the MAE map's val_crit (the ridge's: val_crit[chosen])
} CcLinearFitReport;

/**
 * tx/3: the linear path as a forecaster in each KPI's own units. The served mean is
 * x_t + W·(x_{t-R+1..t} - x_t) + b·sigma (model.md step 7 with the head's mean at 0): W acts
 * on raw changes whatever the KPI's units, only the bias is scaled by the window's sigma.
 * cc_trainer_fit_linear fits it on normalised targets, which weighs every sample by
 * 1/sigma² (quiet windows dominate, and a KPI whose sigma is the 1e-5·(1+|mu|) term gets an
 * offset b·sigma far above its own scale). This fit weighs each sample of channel (s, f) by
 * 1/scale[s,f]² instead: the rows are (x_i - x_t)/scale, the bias column sigma/scale and
 * the targets (x_{t+1+k} - x_t)/scale, so that the squared error of each KPI counts in
 * units of its MASE scale, as the learner's criterion does. Samples as in
 * cc_trainer_fit_linear (training pool, R inputs inside the series, every target observed)
 * but none left out by xn_bound. With several lambdas each is solved on the training
 * samples and scored on the validation windows (mean over KPIs of each KPI's MAE / scale);
 * the best is kept; then settings.refit's samples are added and the map solved again with
 * it. With CC_LINEAR_LOSS_MAE the ridge map of the chosen lambda on the training samples
 * is the start of IRLS (cc_lad.h) over the same rows on the absolute error in MASE units,
 * the learner's criterion, with the penalty carried over: pen_k = the ridge's penalty / the
 * ridge's mean absolute error at horizon step k (the quadratic the absolute error is
 * replaced by at a typical residual). That map is kept only when its validation criterion
 * (as val_crit) is below the ridge's: then IRLS goes on over the refit samples too from it
 * (the penalties grown with the rows as the ridge's), else the ridge map is the result
 * (rep->mae_kept). With no validation window IRLS runs over every sample from the ridge
 * map. Each run keeps the map of the lowest objective over its passes (the passes never
 * raise it; the check guards rounding). 0, -EINVAL, -EAGAIN (no sample), -EDOM (singular),
 * -ENOMEM, -ECANCELED (settings.stop set: read before each IRLS pass; nothing is kept).
 */
int cc_trainer_fit_linear_scaled(CcTrainer *t, const CcLinearFitSettings *s,
                                 CcLinearFitReport *rep);

/** Mean NLL over the validation windows (no dropout, zero position offset), and (mse may
 *  be NULL) the mean squared error of the predicted means in the data's units over every
 *  observed target, each KPI's weighted by settings.val_mse_weight. -EAGAIN when there is
 *  no validation sample, -ECANCELED (settings.stop set: the scores are not whole). */
int cc_trainer_validate(CcTrainer *t, double *nll, double *mse);

/** After cc_trainer_validate: per channel (series s, KPI f) at [s·F + f], the sum of the
 *  absolute errors of the predicted means in the data's units over the channel's observed
 *  validation targets, of their squares (sq_sum may be NULL; unweighted), and their count;
 *  each holds ds->n_series·F. */
void cc_trainer_val_abserr(const CcTrainer *t, double *sum, double *sq_sum, int64_t *count);

/** The same sums for the last value (naive) forecast x̂_{t+k} = x_t on the same validation
 *  targets: what the model's means are compared with when training ends. Independent of the
 *  weights. sum and count hold ds->n_series·F each. */
void cc_trainer_val_naive_abserr(const CcTrainer *t, double *sum, double *sq_sum, int64_t *count);

/** The MASE scale of every channel at [s·F + f]: the in-sample MAE of the seasonal naive
 *  x_t ≈ x_{t−season} over the rows train[s] (cc_mase_scale; NaN when no pair is
 *  observed), what `cellcast eval` divides by when its test range follows those rows.
 *  0 or -EINVAL (season < 1). */
int cc_train_mase_scales(const CcDataset *ds, const CcRange *train, int season, double *scale);

/** The MASE-like validation criterion over n channels: the mean over the channels with a
 *  target (count > 0) and a scale (finite, > 0) of sum/count/scale, i.e. each channel's
 *  MAE in units of its scale (e.g. cc_mase_scale of its training rows), every channel
 *  weighing alike as the per-cell MASE of `cellcast eval` does. NaN when none counts. */
double cc_train_mase(const double *sum, const int64_t *count, const double *scale, size_t n);

/**
 * Fits m->w.sigma_scale (F, HZ) of a tx/3 model on the validation windows with the model's
 * current weights (not the EMA): per KPI and horizon step, cc_calib_scale of the
 * standardised residuals (target - y0)/exp(y1) (the model's sd before calibration). cover
 * (may be NULL) gets the validation P10–P90 coverage over all KPIs and steps before [0],
 * after [1], and [2] what it would be with the NLL-optimal scale RMS(z) instead (for the
 * record). -EINVAL (a tx/2 model), -EAGAIN (no validation sample), -ENOMEM.
 */
int cc_trainer_calibrate(CcTrainer *t, double cover[3]);

/** The same with the fit of cs (lib/cc_calib.h; cc_trainer_calibrate is its
 *  CC_CALIB_QUANTILE): the validation samples ordered by origin, rep (may be NULL) the
 *  fit's coverages and backtest. -EINVAL, -EAGAIN, -ENOMEM, -ECANCELED (settings.stop
 *  set: the scale left as it was). */
int cc_trainer_calibrate_fit(CcTrainer *t, const CcCalibSettings *cs, CcCalibReport *rep);

/**
 * The spread of KPI f in series s over its training rows train[s] that norm.floor is a
 * fraction of: the larger of the population sd of its observed values and the root mean
 * square of the moves that leave a flat stretch (a value different from two equal ones
 * before it). A KPI that sits at one value for weeks and then moves by D (availability at
 * 100 % with a rare dip, a counter stuck at 0, a level that holds) has an sd shrunk by the
 * rarity of its moves, and a floor of a tenth of that sd normalised the first move after a
 * flat window to hundreds; the move itself is the scale its flat windows need. A KPI whose
 * values never repeat exactly keeps its sd. *has = 0 (and 0) for a KPI with no observed
 * value there.
 */
double cc_train_kpi_spread(const CcDataset *ds, const CcRange *train, int s, int f, int *has);

/**
 * tx/3 norm.floor from training data: per KPI, frac times the median over the series of the
 * KPI's spread in the training rows train[s] (cc_train_kpi_spread; 0 for a KPI with
 * none). A median over cells so that one large cell does not set every cell's floor, at
 * most CC_TRAIN_FLOOR_SPREAD times the smallest non-zero spread, so that cells of a KPI on
 * different scales (half of them 10^5 times the other half) do not get a floor that
 * flattens the small ones. floor (ds->n_features). 0 or -ENOMEM.
 */
int cc_train_norm_floor(const CcDataset *ds, const CcRange *train, double frac, float *floor);

/* A KPI is below the normalisation's resolution when model.md step 2's absolute term is more
 * than this share of its spread; a suggested unit scale brings it to at most ..._TARGET. */
#define CC_TRAIN_RESOLUTION_MAX 0.1
#define CC_TRAIN_RESOLUTION_TARGET 0.01

/** How model.md step 2 resolves one KPI (cc_train_resolution). */
typedef struct {
    double level;  ///< median over the series of |mean value| in the training rows
    double spread; ///< median over the series of cc_train_kpi_spread (0: constant or no data)
    double ratio;  ///< 1e-5·(1 + level) / spread, the absolute term in spreads (0: spread 0)
    /** 1: resolved (ratio ≤ CC_TRAIN_RESOLUTION_MAX, or nothing to resolve); else the
     * smallest power of ten S ≥ 10 with 1e-5·(1 + level·S) / (spread·S) ≤
     * CC_TRAIN_RESOLUTION_TARGET: the unit scale to feed the KPI in (ingest.fields
     * `KPI*S`); 0 when no scale does (level ≥ 1000·spread: the relative term 1e-5·|mu|
     * alone is at least the target). */
    double scale;
} CcKpiResolution;

/**
 * Per KPI (out: ds->n_features), how much of its normalisation scale sigma (model.md step 2:
 * `sqrt(sd² + floor²) + 1e-5·(1 + |mu|)`, which the spec fixes) the absolute term takes. A
 * KPI whose values are ~1e-8 (Barcelona's rb_down_var, rb_up_var) has a sigma of ~1e-5,
 * 1000 times its spread: its normalised inputs are ~constant to the Transformer, and every
 * offset c its head adds is c·1e-5 in the KPI's units, 1000·c spreads (docs/learning.md
 * "KPIs below the normalisation's resolution"). The linear path is unaffected (scale
 * equivariant). 0 or -ENOMEM.
 */
int cc_train_resolution(const CcDataset *ds, const CcRange *train, CcKpiResolution *out);

/**
 * The naive start of a tx/3 model: the linear path and the head's mean rows (weights and
 * biases) set to 0, so that every horizon step's mean is the last value x_t (the path adds
 * xn_t) and the model starts as the naive forecast; the log-sigma rows are left as they are.
 * Under validation before the first step (cellcast train --eval-start) the naive forecast
 * is then a candidate checkpoint, so the kept model is no worse than naive on the
 * criterion. 0, or -EINVAL for a model without a linear path (tx/2).
 */
int cc_train_naive_start(CcModel *m);

/** Per KPI, the smallest and the largest non-zero population sd over the series in their
 *  training rows train[s] (lo, hi: ds->n_features each; both 0 for a KPI constant or absent
 *  everywhere). hi/lo is how far apart the scales are that one norm.floor must serve. */
void cc_train_sd_spread(const CcDataset *ds, const CcRange *train, double *lo, double *hi);

/** The weights validation scores (the EMA when settings.ema > 0, else the model's block):
 *  n_params floats laid out as CcModel.block, valid until the next step. */
const float *cc_trainer_eval_weights(const CcTrainer *t);

/** Optimiser steps done. */
int64_t cc_trainer_steps_done(const CcTrainer *t);

/**
 * Saves / restores the optimiser state (step, moments, sampler RNG, current weights, the
 * EMA weights if any, and the caller's `extra` doubles, up to 8) to a binary file beside
 * the checkpoint.
 * Load checks the parameter count. 0, -EIO, -EINVAL.
 */
int cc_trainer_save_state(const CcTrainer *t, const char *path, const double *extra, int n_extra,
                          char *err, size_t errlen);
int cc_trainer_load_state(CcTrainer *t, const char *path, double *extra, int n_extra, char *err,
                          size_t errlen);

#endif
