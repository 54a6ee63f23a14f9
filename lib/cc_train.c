/*
 * cc_train.c — training of cellcast-tx/3 (and tx/2): forward and backward of batches of windows
 * (see cc_train.h for what a window is), Adam(W) with warmup and decay, and the trainer
 * that samples windows from a dataset, runs them on n_threads threads (each owning a
 * contiguous part of the batch and its own gradient block, summed in thread order, so a
 * seed gives the same weights every run), validates and saves its state.
 *
 * Letters as in cc_model.h; R = token rows of the batch, C = current tokens (samples),
 * T = tokens of one window, n = its cached tokens.
 *
 * Dropout (training only, inverted scaling) is applied to the embedding sum, to the
 * attention block's output projection, to the FFN's hidden ReLU and to its output — the
 * places PyTorch's TransformerEncoderLayer puts it, except the attention weights.
 */
#include "cc_train.h"

#include <cblas.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cc_kernels.h"
#include "cc_metrics.h"
#include "cc_lad.h"
#include "cc_ridge.h"
#include "cc_rng.h"

/* ---- small helpers ------------------------------------------------------------------- */

static float rng_f01(uint64_t *s) { return (float)((cc_rng_next(s) >> 40) * (1.0 / 16777216.0)); }

/* Uniform integer in [0, n) (n > 0), unbiased enough for n << 2^64. */
static uint64_t rng_below(uint64_t *s, uint64_t n) { return cc_rng_next(s) % n; }

/* mask (n) = 0 or 1/(1-p) (inverted dropout) and x *= mask. */
static void dropout_apply(float *x, float *mask, size_t n, float p, uint64_t *rng)
{
    float keep = 1.0f / (1.0f - p);
    for (size_t i = 0; i < n; i++) {
        mask[i] = rng_f01(rng) < p ? 0.0f : keep;
        x[i] *= mask[i];
    }
}

/* ---- layer functions ----------------------------------------------------------------- */

void cc_tr_layernorm_forward(float *out, float *xhat, float *rstd, const float *inp, const float *g,
                             const float *b, int R, int D)
{
    for (int r = 0; r < R; r++) {
        const float *x = inp + (size_t)r * D;
        float *xh = xhat + (size_t)r * D, *o = out + (size_t)r * D;
        float mean = 0, var = 0;
        for (int i = 0; i < D; i++)
            mean += x[i];
        mean /= D;
        for (int i = 0; i < D; i++)
            var += (x[i] - mean) * (x[i] - mean);
        var /= D;
        float rs = 1.0f / sqrtf(var + CC_LN_EPS);
        for (int i = 0; i < D; i++)
            xh[i] = (x[i] - mean) * rs;
        for (int i = 0; i < D; i++)
            o[i] = g[i] * xh[i] + b[i];
        rstd[r] = rs;
    }
}

void cc_tr_layernorm_backward(float *dinp, float *dg, float *db, const float *dout,
                              const float *xhat, const float *rstd, const float *g, int R, int D)
{
    for (int r = 0; r < R; r++) {
        const float *dy = dout + (size_t)r * D, *xh = xhat + (size_t)r * D;
        float *dx = dinp + (size_t)r * D;
        float mdx = 0, mdxx = 0;
        for (int i = 0; i < D; i++) {
            float d = dy[i] * g[i];
            mdx += d;
            mdxx += d * xh[i];
            dg[i] += dy[i] * xh[i];
            db[i] += dy[i];
        }
        mdx /= D;
        mdxx /= D;
        for (int i = 0; i < D; i++)
            dx[i] = rstd[r] * (dy[i] * g[i] - mdx - xh[i] * mdxx);
    }
}

void cc_tr_matmul_forward(float *out, const float *inp, const float *W, const float *bias, int R,
                          int O, int NI)
{
    if (R > 0)
        cc_linear(out, O, inp, NI, W, NI, bias, R, O, NI, 0);
}

/* dinp (R,NI) = dout (R,O) · W (O,NI), added to dinp when accumulate. */
static void matmul_backward_inp(float *dinp, const float *dout, const float *W, int R, int O,
                                int NI, int accumulate)
{
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, R, NI, O, 1.0f, dout, O, W, NI,
                accumulate ? 1.0f : 0.0f, dinp, NI);
}

static void matmul_backward_w(float *dW, float *dbias, const float *dout, const float *inp, int R,
                              int O, int NI)
{
    /* dW (O,NI) += dout^T (O,R) · inp (R,NI) */
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, O, NI, R, 1.0f, dout, O, inp, NI, 1.0f, dW,
                NI);
    if (dbias)
        for (int r = 0; r < R; r++)
            for (int o = 0; o < O; o++)
                dbias[o] += dout[(size_t)r * O + o];
}

void cc_tr_matmul_backward(float *dinp, float *dW, float *dbias, const float *dout,
                           const float *inp, const float *W, int R, int O, int NI)
{
    if (R <= 0)
        return;
    if (dinp)
        matmul_backward_inp(dinp, dout, W, R, O, NI, 0);
    matmul_backward_w(dW, dbias, dout, inp, R, O, NI);
}

/* Key slot j of query r (see cc_train.h): cached token j, or the query itself (slot n). */
static inline int key_of(int r, int j, int n) { return j < n ? j : r; }
static inline int keys_of(int r, int n) { return r < n ? r + 1 : n + 1; }

/* Queries r0..T-1 only (r0 = n in the last layer, where only the current tokens matter). */
static void attention_forward(float *out, float *att, const float *qkv, int n, int T, int D, int H,
                              int r0)
{
    int DK = D / H, S = n + 1, D3 = 3 * D;
    float scale = 1.0f / sqrtf((float)DK);
    for (int h = 0; h < H; h++)
        for (int r = r0; r < T; r++) {
            const float *q = qkv + (size_t)r * D3 + h * DK;
            float *a = att + ((size_t)h * T + r) * S;
            int nk = keys_of(r, n);
            float mx = -INFINITY;
            for (int j = 0; j < nk; j++) {
                const float *k = qkv + (size_t)key_of(r, j, n) * D3 + D + h * DK;
                float s = 0;
                for (int i = 0; i < DK; i++)
                    s += q[i] * k[i];
                a[j] = s * scale;
                mx = a[j] > mx ? a[j] : mx;
            }
            float sum = 0;
            for (int j = 0; j < nk; j++) {
                a[j] = expf(a[j] - mx);
                sum += a[j];
            }
            for (int j = 0; j < nk; j++)
                a[j] /= sum;
            for (int j = nk; j < S; j++)
                a[j] = 0;
            float *o = out + (size_t)r * D + h * DK;
            for (int i = 0; i < DK; i++)
                o[i] = 0;
            for (int j = 0; j < nk; j++) {
                const float *v = qkv + (size_t)key_of(r, j, n) * D3 + 2 * D + h * DK;
                for (int i = 0; i < DK; i++)
                    o[i] += a[j] * v[i];
            }
        }
}

static void attention_backward(float *dqkv, const float *dout, const float *att, const float *qkv,
                               int n, int T, int D, int H, int r0)
{
    int DK = D / H, S = n + 1, D3 = 3 * D;
    float scale = 1.0f / sqrtf((float)DK);
    float da[CC_MAX_N_PATCHES + 1];
    memset(dqkv, 0, (size_t)T * D3 * sizeof(float));
    for (int h = 0; h < H; h++)
        for (int r = r0; r < T; r++) {
            const float *a = att + ((size_t)h * T + r) * S;
            const float *dy = dout + (size_t)r * D + h * DK;
            const float *q = qkv + (size_t)r * D3 + h * DK;
            float *dq = dqkv + (size_t)r * D3 + h * DK;
            int nk = keys_of(r, n);
            float dot = 0;
            for (int j = 0; j < nk; j++) {
                int kr = key_of(r, j, n);
                const float *v = qkv + (size_t)kr * D3 + 2 * D + h * DK;
                float *dv = dqkv + (size_t)kr * D3 + 2 * D + h * DK;
                float s = 0;
                for (int i = 0; i < DK; i++) {
                    s += dy[i] * v[i];
                    dv[i] += a[j] * dy[i];
                }
                da[j] = s;
                dot += a[j] * s;
            }
            for (int j = 0; j < nk; j++) {
                float ds = a[j] * (da[j] - dot) * scale;
                int kr = key_of(r, j, n);
                const float *k = qkv + (size_t)kr * D3 + D + h * DK;
                float *dk = dqkv + (size_t)kr * D3 + D + h * DK;
                for (int i = 0; i < DK; i++) {
                    dq[i] += ds * k[i];
                    dk[i] += ds * q[i];
                }
            }
        }
}

void cc_tr_attention_forward(float *out, float *att, const float *qkv, int n, int T, int D, int H)
{
    attention_forward(out, att, qkv, n, T, D, H, 0);
}

void cc_tr_attention_backward(float *dqkv, const float *dout, const float *att, const float *qkv,
                              int n, int T, int D, int H)
{
    attention_backward(dqkv, dout, att, qkv, n, T, D, H, 0);
}

/* cc_tr_nll with the lower clamp of log-sigma at lo and, when hk > 0, the Huber tail
 * beyond hk predicted sds (cc_train_work_set_nll_huber). */
static double nll_clamped(float *dy, const float *y, const float *target, const float *w, int HZ,
                          float scale, int *n_obs, float lo, float hk)
{
    int cnt = 0;
    for (int k = 0; k < HZ; k++)
        cnt += w[k] > 0;
    if (n_obs)
        *n_obs = cnt;
    double loss = 0;
    float inv = cnt ? scale / cnt : 0;
    for (int k = 0; k < HZ; k++) {
        dy[2 * k] = dy[2 * k + 1] = 0;
        if (!(w[k] > 0))
            continue;
        float s = y[2 * k + 1], clamped = 0;
        if (s < lo || s > CC_NLL_LOGSIG_MAX) {
            s = s < lo ? lo : CC_NLL_LOGSIG_MAX;
            clamped = 1;
        }
        float is = expf(-s), r = (target[k] - y[2 * k]) * is;
        if (hk > 0 && fabsf(r) > hk) { /* d|r|/ds = -|r| */
            float ar = fabsf(r);
            loss += hk * (double)ar - 0.5 * (double)hk * hk + s;
            dy[2 * k] = (r > 0 ? -hk : hk) * is * inv;
            dy[2 * k + 1] = clamped ? 0.0f : (1.0f - hk * ar) * inv;
            continue;
        }
        loss += 0.5 * (double)r * r + s;
        dy[2 * k] = -r * is * inv;
        dy[2 * k + 1] = clamped ? 0.0f : (1.0f - r * r) * inv;
    }
    return cnt ? loss / cnt : 0;
}

double cc_tr_nll(float *dy, const float *y, const float *target, const float *w, int HZ,
                 float scale, int *n_obs)
{
    return nll_clamped(dy, y, target, w, HZ, scale, n_obs, CC_NLL_LOGSIG_MIN, 0);
}

/* The loss terms on the mean besides the NLL (see cc_train_work_set_loss): scales the NLL's
 * gradient on y0 in dy by nll_mean, adds mae·mean_k |target - y0| + mse·mean_k (target -
 * y0)² over the observed k (returned, per sample) and their gradient scale·d/dy0 to dy. */
static double mean_terms(float *dy, const float *y, const float *target, const float *w, int HZ,
                         float scale, float mae, float mse, float nll_mean)
{
    int cnt = 0;
    double sum = 0;
    for (int k = 0; k < HZ; k++)
        cnt += w[k] > 0;
    if (!cnt)
        return 0;
    for (int k = 0; k < HZ; k++)
        if (w[k] > 0) {
            float d = y[2 * k] - target[k];
            sum += mae * fabsf(d) + mse * d * d;
            dy[2 * k] = dy[2 * k] * nll_mean + ((d > 0   ? 1.0f
                                                 : d < 0 ? -1.0f
                                                         : 0.0f) *
                                                    mae +
                                                2 * mse * d) *
                                                   scale / cnt;
        }
    return sum / cnt;
}

/* ---- batched training forward/backward ----------------------------------------------- */

struct CcTrainWork {
    CcHparams hp;
    int max_win, max_group, max_rows, att_cap; // att_cap per layer
    /* per window */
    int *row0, *ntok, *ncached, *att0, *cur0; // (max_win)
    int *rowmap;                              // (C) full row of each current token
    uint64_t *rng;                            // (max_win)
    float *wsigma;                            // (max_win) normalisation scale
    double *abs_win;                          // (max_win) last batch: absolute and squared
    double *sq_win;                           //   errors of the means in data units, and
    int *obs_win;                             //   observed targets
    double sq_sum;                            // last batch: squared error of the means
    int64_t sq_count;                         //   in data units, observed targets
    float *scratch_m;                         // (M) normalisation window
    float *pe;                                // (D)
    float logsig_min, mae, mse, nll_mean;     // loss settings (cc_train_work_set_loss)
    float nll_huber;                          // cc_train_work_set_nll_huber
    enum CcDropoutSites sites;                // where dropout goes
    const float *sq_weight;                   // (F) weights of sq_sum per KPI, or NULL
    const double *mae_unit;                   // (series, F) 1 / each channel's scale, or NULL
    double mae_unit_cap;                      // the largest weight sigma · mae_unit
    float xn_bound;                           // training: leave out beyond ±xn_bound (0: no)
    int n_excluded;                           // last batch: current tokens left out
    int R;                                    // tx/3 linear window (0: none)
    float *lin_in;                            // (C, R) r_i = xn_{t-R+1+i} - xn_t
    float *lin_xt;                            // (C) xn_t
    float *lin_y;                             // (C, HZ) linear path output / its gradient
    /* activations */
    float *tok;      // (R, IN)
    float *emb_mask; // (R, D)
    float *zin;      // (L+1, R, D)
    float *qkv;      // (L, R, 3D)
    float *att;      // (L, att_cap)
    float *ctx;      // (L, R, D)
    float *ao_mask;  // (L, R, D)
    float *xhat1;    // (L, R, D)
    float *rstd1;    // (L, R)
    float *z1;       // (L, R, D)
    float *hd;       // (L, R, FF) relu output after dropout
    float *h_mask;   // (L, R, FF)
    float *fo_mask;  // (L, R, D)
    float *xhat2;    // (L, R, D)
    float *rstd2;    // (L, R)
    float *y;        // (C, 2HZ)
    float *dy;       // (C, 2HZ)
    float *tgt, *tw; // (C, HZ)
    /* backward scratch */
    float *dz, *da, *db; // (R, D)
    float *dqkv;         // (R, 3D)
    float *dh;           // (R, FF)
};

int cc_train_work_open(CcTrainWork **out, const CcHparams *hp, int max_windows, int max_group)
{
    CcTrainWork *w = calloc(1, sizeof *w);
    if (!w)
        return -ENOMEM;
    if (max_group > CC_TRAIN_MAX_GROUP)
        max_group = CC_TRAIN_MAX_GROUP;
    w->hp = *hp;
    w->max_win = max_windows;
    w->max_group = max_group;
    w->logsig_min = CC_NLL_LOGSIG_MIN;
    w->nll_mean = 1;
    w->R = hp->linear_window;
    size_t N = hp->n_patches, D = hp->d_model, L = hp->n_layers, FF = hp->d_ff, H = hp->n_heads;
    size_t IN = hp->patch_len + 4, HZ = hp->horizon, Tm = N + max_group;
    size_t R = (size_t)max_windows * Tm, C = (size_t)max_windows * max_group;
    w->max_rows = (int)R;
    w->att_cap = (int)((size_t)max_windows * H * Tm * (N + 1));
    int ok = 1;
#define ALLOC(p, count) ok &= ((p) = calloc((count), sizeof *(p))) != NULL
    ALLOC(w->row0, max_windows);
    ALLOC(w->ntok, max_windows);
    ALLOC(w->ncached, max_windows);
    ALLOC(w->att0, max_windows);
    ALLOC(w->cur0, max_windows);
    ALLOC(w->rng, max_windows);
    ALLOC(w->rowmap, C);
    ALLOC(w->wsigma, max_windows);
    ALLOC(w->abs_win, max_windows);
    ALLOC(w->sq_win, max_windows);
    ALLOC(w->obs_win, max_windows);
    ALLOC(w->scratch_m, hp->norm_window);
    ALLOC(w->pe, D);
    ALLOC(w->lin_in, C * (size_t)(w->R ? w->R : 1));
    ALLOC(w->lin_xt, C);
    ALLOC(w->lin_y, C * HZ);
    ALLOC(w->tok, R * IN);
    ALLOC(w->emb_mask, R * D);
    ALLOC(w->zin, (L + 1) * R * D);
    ALLOC(w->qkv, L * R * 3 * D);
    ALLOC(w->att, L * (size_t)w->att_cap);
    ALLOC(w->ctx, L * R * D);
    ALLOC(w->ao_mask, L * R * D);
    ALLOC(w->xhat1, L * R * D);
    ALLOC(w->rstd1, L * R);
    ALLOC(w->z1, L * R * D);
    ALLOC(w->hd, L * R * FF);
    ALLOC(w->h_mask, L * R * FF);
    ALLOC(w->fo_mask, L * R * D);
    ALLOC(w->xhat2, L * R * D);
    ALLOC(w->rstd2, L * R);
    ALLOC(w->y, C * 2 * HZ);
    ALLOC(w->dy, C * 2 * HZ);
    ALLOC(w->tgt, C * HZ);
    ALLOC(w->tw, C * HZ);
    ALLOC(w->dz, R * D);
    ALLOC(w->da, R * D);
    ALLOC(w->db, R * D);
    ALLOC(w->dqkv, R * 3 * D);
    ALLOC(w->dh, R * FF);
#undef ALLOC
    if (!ok) {
        cc_train_work_close(&w);
        return -ENOMEM;
    }
    *out = w;
    return 0;
}

void cc_train_work_set_loss(CcTrainWork *w, float logsig_min, float mae_weight, float mse_weight,
                            float nll_mean)
{
    w->logsig_min = logsig_min;
    w->mae = mae_weight;
    w->mse = mse_weight;
    w->nll_mean = nll_mean;
}

void cc_train_work_set_nll_huber(CcTrainWork *w, float k) { w->nll_huber = k; }

void cc_train_work_set_dropout_sites(CcTrainWork *w, enum CcDropoutSites sites)
{
    w->sites = sites;
}

void cc_train_work_set_sq_weight(CcTrainWork *w, const float *weight) { w->sq_weight = weight; }

void cc_train_work_set_mae_unit(CcTrainWork *w, const double *unit, double cap)
{
    w->mae_unit = unit;
    w->mae_unit_cap = cap;
}

void cc_train_work_set_xn_bound(CcTrainWork *w, float bound) { w->xn_bound = bound; }

int cc_train_work_excluded(const CcTrainWork *w) { return w->n_excluded; }

void cc_train_work_targets(const CcTrainWork *w, const float **target, const float **weight)
{
    *target = w->tgt;
    *weight = w->tw;
}

void cc_train_work_sqerr(const CcTrainWork *w, double *sum, int64_t *count)
{
    *sum = w->sq_sum;
    *count = w->sq_count;
}

void cc_train_work_abserr(const CcTrainWork *w, const double **sum, const double **sq_sum,
                          const int **count)
{
    *sum = w->abs_win;
    if (sq_sum)
        *sq_sum = w->sq_win;
    *count = w->obs_win;
}

void cc_train_work_close(CcTrainWork **pw)
{
    CcTrainWork *w = pw ? *pw : NULL;
    if (!w)
        return;
    void *ptrs[] = {w->wsigma, w->abs_win, w->sq_win,   w->obs_win, w->rowmap, w->row0,
                    w->ntok,   w->ncached, w->att0,     w->cur0,    w->rng,    w->scratch_m,
                    w->pe,     w->tok,     w->emb_mask, w->zin,     w->qkv,    w->att,
                    w->ctx,    w->ao_mask, w->xhat1,    w->rstd1,   w->z1,     w->hd,
                    w->h_mask, w->fo_mask, w->xhat2,    w->rstd2,   w->y,      w->dy,
                    w->tgt,    w->tw,      w->dz,       w->da,      w->db,     w->dqkv,
                    w->dh,     w->lin_in,  w->lin_xt,   w->lin_y};
    for (size_t i = 0; i < sizeof ptrs / sizeof ptrs[0]; i++)
        free(ptrs[i]);
    free(w);
    *pw = NULL;
}

/* The largest |x_i| of n values (NaN ignored). */
static float max_abs(const float *x, int n)
{
    float m = 0;
    for (int i = 0; i < n; i++)
        m = fmaxf(m, fabsf(x[i]));
    return m;
}

/* Builds the token inputs of window `wi`, its targets, and the layout bookkeeping.
 * bound > 0: current tokens with a normalised value beyond ±bound get target weights 0
 * (cc_train_work_set_xn_bound), counted in w->n_excluded. */
static int build_window(CcTrainWork *w, const CcModel *m, const CcDataset *ds,
                        const CcTrainWindow *win, int wi, int row, int cur, int att, float *mu_out,
                        float *sigma_out, float bound)
{
    const CcHparams *hp = &m->hp;
    int P = hp->patch_len, N = hp->n_patches, M = hp->norm_window, IN = P + 4, HZ = hp->horizon;
    int D = hp->d_model, F = ds->n_features;
    if (win->series < 0 || win->series >= ds->n_series || win->feature < 0 || win->feature >= F ||
        win->n_cur < 1 || win->n_cur > w->max_group)
        return -EINVAL;
    const CcSeries *se = &ds->series[win->series];
    int64_t ie64 = win->e - se->p0;
    if ((win->e + 1) % P || ie64 < P - 1 || ie64 >= se->T)
        return -EINVAL;
    int ie = (int)ie64, f = win->feature;
    for (int j = 0; j < win->n_cur; j++)
        if (win->cur[j] < 0 || win->cur[j] >= P || ie + win->cur[j] >= se->T)
            return -EINVAL;
    /* step 2: normalisation over the last M values up to e */
    int lo = ie - M + 1 < 0 ? 0 : ie - M + 1, nm = ie - lo + 1;
    for (int i = 0; i < nm; i++)
        w->scratch_m[i] = se->x[(size_t)(lo + i) * F + f];
    float mu, sigma;
    cc_norm_stats(w->scratch_m, nm, &mu, &sigma);
    if (w->R > 0) { /* tx/3: the KPI's floor under the window's spread, as cc_ref */
        double s = 0, ss = 0, fl = m->w.norm_floor[win->feature];
        for (int i = 0; i < nm; i++)
            s += w->scratch_m[i];
        double mean = s / nm;
        for (int i = 0; i < nm; i++)
            ss += (w->scratch_m[i] - mean) * (w->scratch_m[i] - mean);
        sigma = (float)(sqrt(ss / nm + fl * fl) + 1e-5 * (1 + fabs(mean)));
    }
    /* step 4: tokens, cached oldest first then current */
    int n = (ie - P + 1) / P + 1;
    n = n > N ? N : n;
    int T = n + win->n_cur;
    w->row0[wi] = row;
    w->ntok[wi] = T;
    w->ncached[wi] = n;
    w->att0[wi] = att;
    w->cur0[wi] = cur;
    for (int r = 0; r < T; r++) {
        int qr = r < n ? ie - (n - 1 - r) * P : ie + win->cur[r - n];
        float *tk = w->tok + (size_t)(row + r) * IN;
        for (int k = 0; k < P; k++)
            tk[k] = (se->x[(size_t)(qr - P + 1 + k) * F + f] - mu) / sigma;
        cc_time_features(tk + P, se->p0 + qr, ds->step_seconds, hp->tz_offset_s);
    }
    (void)D;
    /* the cached tokens are every current token's context */
    int cached_over = bound > 0 && max_abs(w->tok + (size_t)row * IN, n * IN) > bound;
    /* targets of the current tokens, normalised with the same mu, sigma; tx/3: the linear
     * path's input, steps before the series' first standing in as its first value */
    for (int j = 0; j < win->n_cur; j++) {
        int tr = ie + win->cur[j], R = w->R;
        if (R > 0) {
            float xt = (se->x[(size_t)tr * F + f] - mu) / sigma,
                  *r = w->lin_in + (size_t)(cur + j) * R;
            for (int i = 0; i < R; i++) {
                int pi = tr - R + 1 + i;
                r[i] = (se->x[(size_t)(pi < 0 ? 0 : pi) * F + f] - mu) / sigma - xt;
            }
            w->lin_xt[cur + j] = xt;
        }
        float *tg = w->tgt + (size_t)(cur + j) * HZ, *tw = w->tw + (size_t)(cur + j) * HZ;
        for (int k = 0; k < HZ; k++) {
            int rr = tr + 1 + k;
            int ok = rr < se->T && (!se->mask || se->mask[(size_t)rr * F + f]);
            tg[k] = ok ? (se->x[(size_t)rr * F + f] - mu) / sigma : 0.0f;
            tw[k] = ok ? 1.0f : 0.0f;
        }
        if (bound > 0) { /* the time features are within ±1 */
            float big = max_abs(w->tok + (size_t)(row + n + j) * IN, IN);
            for (int k = 0; k < HZ; k++)
                if (tw[k] > 0 && fabsf(tg[k]) > big)
                    big = fabsf(tg[k]);
            if (R > 0) {
                big = fmaxf(big, max_abs(w->lin_in + (size_t)(cur + j) * R, R));
                big = fmaxf(big, fabsf(w->lin_xt[cur + j]));
            }
            if (cached_over || !(big <= bound)) {
                for (int k = 0; k < HZ; k++)
                    tw[k] = 0.0f;
                w->n_excluded++;
            }
        }
    }
    w->wsigma[wi] = sigma;
    if (mu_out)
        mu_out[wi] = mu;
    if (sigma_out)
        sigma_out[wi] = sigma;
    return 0;
}

/* ---- one batch, forward and backward ------------------------------------------------- */

/*
 * cc_train_batch runs in phases, one function each, in this order:
 *   batch_layout -> embed_forward -> layer_forward(0..L-1) -> head_forward -> batch_loss
 *   -> head_backward -> layer_backward(L-1..0) -> embed_backward.
 * Letters: R token rows of the batch (its windows' rows concatenated), C current rows (the
 * samples), D, FF, H, HZ, L as in cc_model.h, IN = P + 4 inputs of a token.
 *
 * Rows: layers 0..L-2 run on all R token rows. In the last layer only the current tokens
 * feed the head, so the cached rows there need only their keys and values: after attention
 * (queries of the current rows only) the layer runs on the C current rows, compacted in
 * order (rowmap[c] = their row in the full layout).
 */

/* What the phases of one batch share, so that each takes one pointer rather than a dozen
 * locals: the model, the windows, their layout's row counts and whether dropout is on. */
typedef struct {
    CcTrainWork *w;
    const CcModel *m;
    const CcParams *p;
    const CcDataset *ds;
    const CcTrainWindow *win;
    int n_win;
    int R, C;       /* token rows and current rows, set by batch_layout */
    size_t RD, RFF; /* one layer's stride in the (L, max_rows, D) and (L, max_rows, FF) buffers */
    float dropout;
    int train;     /* dropout on the attention block's and the FFN's outputs */
    int train_all; /* also on the embedding sum and the FFN's hidden units (CC_DROPOUT_ALL) */
} TrainBatch;

/* Dropout of the rows of every window in layer-row space (see the row note above). */
static void dropout_rows(CcTrainWork *w, float *x, float *mask, int n_win, const CcTrainWindow *win,
                         int compact, int width, float p)
{
    for (int b = 0; b < n_win; b++) {
        size_t r0 = compact ? (size_t)w->cur0[b] : (size_t)w->row0[b];
        size_t cnt = compact ? (size_t)win[b].n_cur : (size_t)w->ntok[b];
        dropout_apply(x + r0 * width, mask + r0 * width, cnt * width, p, &w->rng[b]);
    }
}

/* Lays the windows out one after another: tokens tok (R, IN), targets tgt, tw (C, HZ), each
 * window's rows (row0, ntok, ncached, cur0, att0), rowmap (C) and dropout stream; sets R, C.
 * Why: every later phase addresses the batch through this layout. */
static int batch_layout(TrainBatch *tb, float *mu_out, float *sigma_out, float bound)
{
    CcTrainWork *w = tb->w;
    const CcTrainWindow *win = tb->win;
    int H = tb->m->hp.n_heads;
    int R = 0, C = 0, A = 0;
    w->n_excluded = 0;
    for (int b = 0; b < tb->n_win; b++) {
        int ret = build_window(w, tb->m, tb->ds, &win[b], b, R, C, A, mu_out, sigma_out, bound);
        if (ret < 0)
            return ret;
        int T = w->ntok[b];
        for (int j = 0; j < win[b].n_cur; j++)
            w->rowmap[C + j] = R + w->ncached[b] + j;
        R += T;
        C += win[b].n_cur;
        A += H * T * (w->ncached[b] + 1);
        w->rng[b] = win[b].seed;
    }
    tb->R = R;
    tb->C = C;
    return 0;
}

/* z0 (R, D) = tok (R, IN) · We^T + be + chan[f] + PE(q/P + offset), then dropout.
 * Why: one vector per token that says its values, which KPI it is and when it is. */
static void embed_forward(TrainBatch *tb)
{
    CcTrainWork *w = tb->w;
    const CcParams *p = tb->p;
    const CcTrainWindow *win = tb->win;
    int P = tb->m->hp.patch_len, D = tb->m->hp.d_model, IN = P + 4;
    float *z0 = w->zin;
    cc_tr_matmul_forward(z0, w->tok, p->embed_w, p->embed_b, tb->R, D, IN);
    for (int b = 0; b < tb->n_win; b++) {
        const CcSeries *se = &tb->ds->series[win[b].series];
        int n = w->ncached[b], ie = (int)(win[b].e - se->p0);
        for (int r = 0; r < w->ntok[b]; r++) {
            int qr = r < n ? ie - (n - 1 - r) * P : ie + win[b].cur[r - n];
            double pos = (double)(se->p0 + qr) / P + (double)win[b].pos_offset;
            cc_pos_encoding(w->pe, pos, D);
            float *z = z0 + (size_t)(w->row0[b] + r) * D;
            const float *ch = p->chan + (size_t)win[b].feature * D;
            for (int i = 0; i < D; i++)
                z[i] += ch[i] + w->pe[i];
        }
    }
    if (tb->train_all)
        dropout_rows(w, z0, w->emb_mask, tb->n_win, win, 0, D, tb->dropout);
}

/* Post-LN layer l: z_{l+1} (Rl, D) = LN2(z1 + FFN(z1)), z1 = LN1(z_l + Attn(z_l)), where
 * Rl = R, or C in the last layer (compact rows). Keeps qkv (R, 3D), att, ctx (R, D), the LN
 * statistics, hd (Rl, FF) and the dropout masks for layer_backward. */
static void layer_forward(TrainBatch *tb, int l)
{
    CcTrainWork *w = tb->w;
    const CcParams *p = tb->p;
    const CcHparams *hp = &tb->m->hp;
    const CcTrainWindow *win = tb->win;
    const int *rowmap = w->rowmap;
    int D = hp->d_model, H = hp->n_heads, FF = hp->d_ff, D3 = 3 * D, n_win = tb->n_win;
    int R = tb->R, C = tb->C, last = l == hp->n_layers - 1, Rl = last ? C : R;
    size_t RD = tb->RD, RFF = tb->RFF;
    float *zi = w->zin + l * RD, *zo = w->zin + (l + 1) * RD;
    float *qkv = w->qkv + 3 * l * RD, *att = w->att + (size_t)l * w->att_cap;
    float *ctx = w->ctx + l * RD, *z1 = w->z1 + l * RD, *hd = w->hd + l * RFF;
    float *tmp = w->da; /* (Rl, D) scratch for projections before the residual add */
    cc_tr_matmul_forward(qkv, zi, p->qkv_w + (size_t)l * D3 * D, p->qkv_b + (size_t)l * D3, R, D3,
                         D);
    for (int b = 0; b < n_win; b++)
        attention_forward(ctx + (size_t)w->row0[b] * D, att + w->att0[b],
                          qkv + (size_t)w->row0[b] * D3, w->ncached[b], w->ntok[b], D, H,
                          last ? w->ncached[b] : 0);
    if (last) /* compact the current rows in place (rowmap[c] >= c) */
        for (int c = 0; c < C; c++)
            memmove(ctx + (size_t)c * D, ctx + (size_t)rowmap[c] * D, D * sizeof(float));
    cc_tr_matmul_forward(tmp, ctx, p->o_w + (size_t)l * D * D, p->o_b + (size_t)l * D, Rl, D, D);
    if (tb->train)
        dropout_rows(w, tmp, w->ao_mask + l * RD, n_win, win, last, D, tb->dropout);
    for (int r = 0; r < Rl; r++) {
        const float *res = zi + (size_t)(last ? rowmap[r] : r) * D;
        for (int i = 0; i < D; i++)
            tmp[(size_t)r * D + i] += res[i];
    }
    cc_tr_layernorm_forward(z1, w->xhat1 + l * RD, w->rstd1 + (size_t)l * w->max_rows, tmp,
                            p->ln1_g + (size_t)l * D, p->ln1_b + (size_t)l * D, Rl, D);
    cc_tr_matmul_forward(hd, z1, p->up_w + (size_t)l * FF * D, p->up_b + (size_t)l * FF, Rl, FF, D);
    cc_relu(hd, (size_t)Rl * FF);
    if (tb->train_all)
        dropout_rows(w, hd, w->h_mask + l * RFF, n_win, win, last, FF, tb->dropout);
    cc_tr_matmul_forward(tmp, hd, p->down_w + (size_t)l * D * FF, p->down_b + (size_t)l * D, Rl, D,
                         FF);
    if (tb->train)
        dropout_rows(w, tmp, w->fo_mask + l * RD, n_win, win, last, D, tb->dropout);
    for (size_t i = 0; i < (size_t)Rl * D; i++)
        tmp[i] += z1[i];
    cc_tr_layernorm_forward(zo, w->xhat2 + l * RD, w->rstd2 + (size_t)l * w->max_rows, tmp,
                            p->ln2_g + (size_t)l * D, p->ln2_b + (size_t)l * D, Rl, D);
}

/* y (C, 2*HZ) = zL (C, D) · Wh^T + bh, (mean, log-sigma) per step; tx/3 adds the linear path
 * W_lin · lin_in (C, R_lin) + b_lin + xn_t to the means. The last layer's output is already
 * compact, so the head sees only the current tokens. */
static void head_forward(TrainBatch *tb)
{
    CcTrainWork *w = tb->w;
    const CcParams *p = tb->p;
    int D = tb->m->hp.d_model, HZ = tb->m->hp.horizon, HZ2 = 2 * HZ, C = tb->C;
    const float *hin = w->zin + tb->m->hp.n_layers * tb->RD;
    cc_tr_matmul_forward(w->y, hin, p->head_w, p->head_b, C, HZ2, D);
    if (w->R > 0) { /* tx/3: y[k][0] += W_lin·r + b_lin + xn_t, one product for the batch */
        cc_tr_matmul_forward(w->lin_y, w->lin_in, p->lin_w, p->lin_b, C, HZ, w->R);
        for (int c = 0; c < C; c++)
            for (int k = 0; k < HZ; k++)
                w->y[(size_t)c * HZ2 + 2 * k] += w->lin_y[(size_t)c * HZ + k] + w->lin_xt[c];
    }
}

/* The batch's loss (sum over its samples, unscaled) and dy (C, 2*HZ); also the errors in
 * the KPIs' units that cc_train_work_sqerr / _abserr report. mean_terms: the MAE, MSE and
 * mean-NLL terms of training (validation scores the NLL alone). *n_samples: the current
 * tokens with at least one observed target. */
static double batch_loss(TrainBatch *tb, float loss_scale, int mean_terms_on, int *n_samples)
{
    CcTrainWork *w = tb->w;
    const CcTrainWindow *win = tb->win;
    int HZ = tb->m->hp.horizon, HZ2 = 2 * HZ, n_win = tb->n_win;
    double total = 0;
    int ns = 0;
    w->sq_sum = 0;
    w->sq_count = 0;
    for (int b = 0; b < n_win; b++) {
        w->abs_win[b] = 0;
        w->sq_win[b] = 0;
        w->obs_win[b] = 0;
        for (int j = 0; j < win[b].n_cur; j++) {
            size_t c = (size_t)w->cur0[b] + j;
            double wt = w->sq_weight ? w->sq_weight[win[b].feature] : 1.0;
            for (int k = 0; k < HZ; k++)
                if (w->tw[c * HZ + k] > 0) {
                    double d = ((double)w->y[c * HZ2 + 2 * k] - w->tgt[c * HZ + k]) * w->wsigma[b];
                    w->sq_sum += d * d * wt;
                    w->sq_count++;
                    w->abs_win[b] += fabs(d);
                    w->sq_win[b] += d * d;
                    w->obs_win[b]++;
                }
        }
    }
    for (int b = 0; b < n_win; b++) {
        /* the MAE term in the channel's units over its scale (cc_train_work_set_mae_unit):
         * each sample's MAE weighed by the window's sigma / the channel's scale */
        float mae = w->mae;
        if (w->mae_unit) {
            double u = w->mae_unit[(size_t)win[b].series * tb->ds->n_features + win[b].feature];
            double f = u > 0 && isfinite(u) ? w->wsigma[b] * u : 0;
            mae *= (float)(f < w->mae_unit_cap ? f : w->mae_unit_cap);
        }
        for (int j = 0; j < win[b].n_cur; j++) {
            int nobs, c = w->cur0[b] + j;
            float *dyc = w->dy + (size_t)c * HZ2;
            const float *yc = w->y + (size_t)c * HZ2, *tg = w->tgt + (size_t)c * HZ;
            total += nll_clamped(dyc, yc, tg, w->tw + (size_t)c * HZ, HZ, loss_scale, &nobs,
                                 w->logsig_min, mean_terms_on ? w->nll_huber : 0.0f);
            if (mean_terms_on && (w->mae > 0 || w->mse > 0 || w->nll_mean != 1))
                total += mean_terms(dyc, yc, tg, w->tw + (size_t)c * HZ, HZ, loss_scale, mae,
                                    w->mse, w->nll_mean);
            ns += nobs > 0;
        }
    }
    *n_samples = ns;
    return total;
}

/* From dy (C, 2*HZ): the head's and the linear path's weight gradients and dz (C, D), the
 * gradient of the last layer's output. The linear path's inputs are data, so only its
 * weights get gradient. */
static void head_backward(TrainBatch *tb, const CcParams *g)
{
    CcTrainWork *w = tb->w;
    int D = tb->m->hp.d_model, HZ = tb->m->hp.horizon, HZ2 = 2 * HZ, C = tb->C;
    const float *hin = w->zin + tb->m->hp.n_layers * tb->RD;
    if (w->R > 0) {
        for (int c = 0; c < C; c++)
            for (int k = 0; k < HZ; k++)
                w->lin_y[(size_t)c * HZ + k] = w->dy[(size_t)c * HZ2 + 2 * k];
        matmul_backward_w(g->lin_w, g->lin_b, w->lin_y, w->lin_in, C, HZ, w->R);
    }
    cc_tr_matmul_backward(w->dz, g->head_w, g->head_b, w->dy, hin, tb->p->head_w, C, HZ2, D);
}

/* Layer l backward: dz (Rl, D), the gradient of its output, becomes the gradient of its
 * input (R, D) in place, and its weights' gradients are added to g. In the last layer the
 * compact current rows are scattered back to the full layout for attention's keys and
 * values. Work buffers: da, db (R, D), dqkv (R, 3D), dh (Rl, FF). */
static void layer_backward(TrainBatch *tb, const CcParams *g, int l)
{
    CcTrainWork *w = tb->w;
    const CcParams *p = tb->p;
    const CcHparams *hp = &tb->m->hp;
    const int *rowmap = w->rowmap;
    int D = hp->d_model, H = hp->n_heads, FF = hp->d_ff, D3 = 3 * D, n_win = tb->n_win;
    int R = tb->R, C = tb->C, last = l == hp->n_layers - 1, Rl = last ? C : R;
    int train = tb->train, train_all = tb->train_all;
    size_t RD = tb->RD, RFF = tb->RFF;
    float *dz = w->dz;
    float *zi = w->zin + l * RD, *qkv = w->qkv + 3 * l * RD;
    float *att = w->att + (size_t)l * w->att_cap, *ctx = w->ctx + l * RD;
    float *z1 = w->z1 + l * RD, *hd = w->hd + l * RFF;
    float *dr2 = w->da, *dz1 = w->db, *dh = w->dh;
    /* LN2: dz -> dr2 (= d of z1 + ffn) */
    cc_tr_layernorm_backward(dr2, g->ln2_g + (size_t)l * D, g->ln2_b + (size_t)l * D, dz,
                             w->xhat2 + l * RD, w->rstd2 + (size_t)l * w->max_rows,
                             p->ln2_g + (size_t)l * D, Rl, D);
    /* FFN output (dropout), down projection */
    float *dfo = dz; /* dz is free now */
    const float *fom = w->fo_mask + l * RD;
    for (size_t i = 0; i < (size_t)Rl * D; i++)
        dfo[i] = train ? dr2[i] * fom[i] : dr2[i];
    cc_tr_matmul_backward(dh, g->down_w + (size_t)l * D * FF, g->down_b + (size_t)l * D, dfo, hd,
                          p->down_w + (size_t)l * D * FF, Rl, D, FF);
    const float *hm = w->h_mask + l * RFF;
    for (size_t i = 0; i < (size_t)Rl * FF; i++)
        dh[i] = hd[i] > 0 ? (train_all ? dh[i] * hm[i] : dh[i]) : 0.0f;
    /* up projection: dz1 = dr2 + dh·Wup */
    memcpy(dz1, dr2, (size_t)Rl * D * sizeof(float));
    matmul_backward_inp(dz1, dh, p->up_w + (size_t)l * FF * D, Rl, FF, D, 1);
    matmul_backward_w(g->up_w + (size_t)l * FF * D, g->up_b + (size_t)l * FF, dh, z1, Rl, FF, D);
    /* LN1: dz1 -> dr1 (= d of zin + attention) */
    float *dr1 = w->da;
    cc_tr_layernorm_backward(dr1, g->ln1_g + (size_t)l * D, g->ln1_b + (size_t)l * D, dz1,
                             w->xhat1 + l * RD, w->rstd1 + (size_t)l * w->max_rows,
                             p->ln1_g + (size_t)l * D, Rl, D);
    float *dao = dz1; /* free now */
    const float *aom = w->ao_mask + l * RD;
    for (size_t i = 0; i < (size_t)Rl * D; i++)
        dao[i] = train ? dr1[i] * aom[i] : dr1[i];
    float *dctx = dz;
    cc_tr_matmul_backward(dctx, g->o_w + (size_t)l * D * D, g->o_b + (size_t)l * D, dao, ctx,
                          p->o_w + (size_t)l * D * D, Rl, D, D);
    if (last) { /* back to the full layout: dctx (C rows) scattered into db (R rows) */
        float *full = w->db;
        memset(full, 0, (size_t)R * D * sizeof(float));
        for (int c = 0; c < C; c++)
            memcpy(full + (size_t)rowmap[c] * D, dctx + (size_t)c * D, D * sizeof(float));
        dctx = full;
    }
    for (int b = 0; b < n_win; b++)
        attention_backward(w->dqkv + (size_t)w->row0[b] * D3, dctx + (size_t)w->row0[b] * D,
                           att + w->att0[b], qkv + (size_t)w->row0[b] * D3, w->ncached[b],
                           w->ntok[b], D, H, last ? w->ncached[b] : 0);
    /* dzin = dr1 (residual, current rows only in the last layer) + dqkv·Wqkv */
    if (last) {
        memset(dz, 0, (size_t)R * D * sizeof(float));
        for (int c = 0; c < C; c++)
            memcpy(dz + (size_t)rowmap[c] * D, dr1 + (size_t)c * D, D * sizeof(float));
    } else {
        memcpy(dz, dr1, (size_t)R * D * sizeof(float));
    }
    matmul_backward_inp(dz, w->dqkv, p->qkv_w + (size_t)l * D3 * D, R, D3, D, 1);
    matmul_backward_w(g->qkv_w + (size_t)l * D3 * D, g->qkv_b + (size_t)l * D3, w->dqkv, zi, R, D3,
                      D);
}

/* From dz (R, D), the gradient of z0: through the embedding's dropout, the gradients of We,
 * be (from tok (R, IN)) and of each window's channel vector. The positional encoding has
 * no weights. */
static void embed_backward(TrainBatch *tb, const CcParams *g)
{
    CcTrainWork *w = tb->w;
    const CcTrainWindow *win = tb->win;
    int D = tb->m->hp.d_model, IN = tb->m->hp.patch_len + 4, R = tb->R;
    float *dz = w->dz;
    if (tb->train_all)
        for (size_t i = 0; i < (size_t)R * D; i++)
            dz[i] *= w->emb_mask[i];
    matmul_backward_w(g->embed_w, g->embed_b, dz, w->tok, R, D, IN);
    for (int b = 0; b < tb->n_win; b++) {
        float *dc = g->chan + (size_t)win[b].feature * D;
        for (int r = 0; r < w->ntok[b]; r++) {
            const float *d = dz + (size_t)(w->row0[b] + r) * D;
            for (int i = 0; i < D; i++)
                dc[i] += d[i];
        }
    }
}

int cc_train_batch(CcTrainWork *w, const CcModel *m, float *grad, const CcDataset *ds,
                   const CcTrainWindow *win, int n_win, float dropout, float loss_scale,
                   double *loss, int *n_samples, float *y_out, float *mu_out, float *sigma_out)
{
    const CcHparams *hp = &m->hp;
    int L = hp->n_layers;
    if (n_win > w->max_win || ds->n_features != hp->n_features)
        return -EINVAL;
    int train = dropout > 0 && grad;
    TrainBatch tb = {
        .w = w,
        .m = m,
        .p = &m->w,
        .ds = ds,
        .win = win,
        .n_win = n_win,
        .RD = (size_t)w->max_rows * hp->d_model,
        .RFF = (size_t)w->max_rows * hp->d_ff,
        .dropout = dropout,
        .train = train,
        .train_all = train && w->sites == CC_DROPOUT_ALL,
    };
    int ret = batch_layout(&tb, mu_out, sigma_out, grad ? w->xn_bound : 0);
    if (ret < 0)
        return ret;

    embed_forward(&tb);
    for (int l = 0; l < L; l++)
        layer_forward(&tb, l);
    head_forward(&tb);
    if (y_out)
        memcpy(y_out, w->y, (size_t)tb.C * 2 * hp->horizon * sizeof(float));
    int ns;
    double total = batch_loss(&tb, loss_scale, grad != NULL, &ns);
    if (loss)
        *loss = total * loss_scale;
    if (n_samples)
        *n_samples = ns;
    if (!grad)
        return 0;

    CcParams g;
    cc_params_point(&g, hp, grad);
    head_backward(&tb, &g);
    for (int l = L - 1; l >= 0; l--)
        layer_backward(&tb, &g, l);
    embed_backward(&tb, &g);
    return 0;
}

/* ---- optimiser ----------------------------------------------------------------------- */

void cc_adam_default_settings(CcAdamSettings *s)
{
    memset(s, 0, sizeof *s);
    s->lr = 1e-3f;
    s->beta1 = 0.9f;
    s->beta2 = 0.98f;
    s->eps = 1e-9f;
    s->weight_decay = 0;
    s->warmup = 100;
    s->schedule = CC_SCHED_INVSQRT;
    s->total_steps = 0;
    s->min_lr_frac = 0.05f;
    s->clip = 1.0f;
}

float cc_adam_lr(const CcAdamSettings *s, int64_t step)
{
    if (step < 1)
        step = 1;
    if (s->warmup > 0 && step <= s->warmup)
        return s->lr * (float)step / (float)s->warmup;
    switch (s->schedule) {
    case CC_SCHED_INVSQRT:
        return s->warmup > 0 ? s->lr * sqrtf((float)s->warmup / (float)step) : s->lr;
    case CC_SCHED_COSINE: {
        if (s->total_steps <= s->warmup)
            return s->lr;
        double frac = (double)(step - s->warmup) / (double)(s->total_steps - s->warmup);
        frac = frac > 1 ? 1 : frac;
        double lo = s->min_lr_frac * s->lr;
        return (float)(lo + 0.5 * (s->lr - lo) * (1 + cos(M_PI * frac)));
    }
    default: return s->lr;
    }
}

double cc_adam_update(float *params, float *grad, float *m, float *v, const uint8_t *decay,
                      size_t n, int64_t step, const CcAdamSettings *s)
{
    double norm2 = 0;
    for (size_t i = 0; i < n; i++)
        norm2 += (double)grad[i] * grad[i];
    double norm = sqrt(norm2);
    if (s->clip > 0 && norm > s->clip) {
        float k = (float)(s->clip / norm);
        for (size_t i = 0; i < n; i++)
            grad[i] *= k;
    }
    float lr = cc_adam_lr(s, step);
    double bc1 = 1 - pow(s->beta1, (double)step), bc2 = 1 - pow(s->beta2, (double)step);
    for (size_t i = 0; i < n; i++) {
        m[i] = s->beta1 * m[i] + (1 - s->beta1) * grad[i];
        v[i] = s->beta2 * v[i] + (1 - s->beta2) * grad[i] * grad[i];
        double mh = m[i] / bc1, vh = v[i] / bc2;
        double upd = mh / (sqrt(vh) + s->eps);
        if (decay && decay[i] && s->weight_decay > 0)
            upd += s->weight_decay * params[i];
        params[i] -= (float)(lr * upd);
    }
    return norm;
}

/* ---- trainer ------------------------------------------------------------------------- */

void cc_train_default_settings(CcTrainSettings *s)
{
    memset(s, 0, sizeof *s);
    cc_adam_default_settings(&s->adam);
    s->dropout = 0.1f;
    s->batch = 32;
    s->group = 8;
    s->n_threads = 2;
    s->seed = 1;
    s->max_val_windows = 1024;
    s->mae_weight = 0;
    s->mse_weight = 0;
    s->nll_mean = 1;
    s->logsig_min = 0;
    s->linear_lr_mult = 1;
    s->dropout_sites = CC_DROPOUT_ALL;
    s->decay_all = 0;
    s->xn_bound = CC_TRAIN_XN_BOUND;
    s->mae_unit_cap = CC_TRAIN_MAE_UNIT_CAP;
}

/* A (series, e) pair with its valid current offsets [cmin, cmax]. */
typedef struct Pool {
    int series;
    int16_t cmin, cmax;
    int64_t e;
} Pool;

#define MAX_THREADS 16

struct CcTrainer {
    CcModel *m;
    const CcDataset *ds;
    CcTrainSettings s;
    int group, val_group, per_thread;
    Pool *train_pool;
    int64_t n_train_pool, train_samples;
    CcTrainWindow *val_win;
    int n_val_win;
    int lin_partial; /* cc_trainer_fit_linear_scaled's partial_targets while it runs */
    double *val_abs; // (n_val_win) the last validation's absolute and squared errors and
    double *val_sq;  //   observed targets per window (cc_train_work_abserr)
    int *val_obs;
    int64_t val_samples;
    CcTrainWindow *batch; // (batch)
    CcTrainWork *work[MAX_THREADS];
    float *grads[MAX_THREADS]; // (n_params) per thread
    float *am, *av;            // Adam moments
    float *ema_w, *swap;       // EMA weights and scratch (settings.ema > 0)
    float *lin_old;            // the linear path before an update (linear_lr_mult != 1)
    uint8_t *decay;            // (n_params)
    size_t n_trained;          // the first n_trained floats of the block: all but tx/3's
                               // norm.floor and calib.sigma_scale (set, not trained)
    uint64_t rng;
    int64_t step;
    int64_t drawn, excluded; // training current tokens drawn, left out by xn_bound
};

/* Valid current offsets of boundary e in series se for targets inside rows [begin, end). */
static int offsets_for(const CcSeries *se, int64_t e, int P, int HZ, CcRange rg, int *cmin,
                       int *cmax)
{
    int ie = (int)(e - se->p0);
    int lo = rg.begin - 1 - ie, hi = rg.end - 1 - HZ - ie;
    lo = lo < 0 ? 0 : lo;
    hi = hi > P - 1 ? P - 1 : hi;
    hi = hi > se->T - 1 - ie ? se->T - 1 - ie : hi;
    *cmin = lo;
    *cmax = hi;
    return hi >= lo;
}

/* First boundary e of a series: the first step ≡ P-1 (mod P) with a complete patch. */
static int64_t first_boundary(const CcSeries *se, int P)
{
    int64_t e = se->p0 + P - 1;
    int64_t r = ((e + 1) % P + P) % P;
    if (r)
        e += P - r;
    return e;
}

static int build_pools(CcTrainer *t, const CcRange *train, const CcRange *val)
{
    const CcHparams *hp = &t->m->hp;
    const CcDataset *ds = t->ds;
    int P = hp->patch_len, HZ = hp->horizon, F = ds->n_features;
    int64_t cap = 0;
    for (int s = 0; s < ds->n_series; s++)
        cap += ds->series[s].T / P + 2;
    t->train_pool = malloc((size_t)(cap ? cap : 1) * sizeof *t->train_pool);
    Pool *vp = malloc((size_t)(cap ? cap : 1) * sizeof *vp);
    if (!t->train_pool || !vp) {
        free(vp);
        return -ENOMEM;
    }
    int64_t nv = 0;
    for (int s = 0; s < ds->n_series; s++) {
        const CcSeries *se = &ds->series[s];
        for (int64_t e = first_boundary(se, P); e - se->p0 < se->T; e += P) {
            int a, b;
            if (offsets_for(se, e, P, HZ, train[s], &a, &b)) {
                t->train_pool[t->n_train_pool++] = (Pool){s, (int16_t)a, (int16_t)b, e};
                t->train_samples += (int64_t)(b - a + 1) * F;
            }
            if (offsets_for(se, e, P, HZ, val[s], &a, &b)) {
                vp[nv++] = (Pool){s, (int16_t)a, (int16_t)b, e};
                t->val_samples += (int64_t)(b - a + 1) * F;
            }
        }
    }
    /* validation windows: every (pool, feature), chunks of val_group offsets, an evenly
     * spaced subset of at most max_val_windows */
    int64_t total = 0;
    for (int64_t i = 0; i < nv; i++)
        total += (int64_t)F * ((vp[i].cmax - vp[i].cmin + t->val_group) / t->val_group);
    int64_t keep = total < t->s.max_val_windows ? total : t->s.max_val_windows;
    t->val_win = calloc((size_t)(keep ? keep : 1), sizeof *t->val_win);
    t->val_abs = calloc((size_t)(keep ? keep : 1), sizeof *t->val_abs);
    t->val_sq = calloc((size_t)(keep ? keep : 1), sizeof *t->val_sq);
    t->val_obs = calloc((size_t)(keep ? keep : 1), sizeof *t->val_obs);
    if (!t->val_win || !t->val_abs || !t->val_sq || !t->val_obs) {
        free(vp);
        return -ENOMEM;
    }
    int64_t k = 0, next = 0;
    t->val_samples = 0;
    for (int64_t i = 0; i < nv && t->n_val_win < keep; i++)
        for (int f = 0; f < F; f++)
            for (int c0 = vp[i].cmin; c0 <= vp[i].cmax; c0 += t->val_group, k++) {
                /* take window k when it is the next of the evenly spaced subset */
                if (t->n_val_win >= keep || k != (next * total) / keep)
                    continue;
                next++;
                CcTrainWindow *w = &t->val_win[t->n_val_win++];
                w->series = vp[i].series;
                w->feature = f;
                w->e = vp[i].e;
                w->n_cur = 0;
                for (int c = c0; c <= vp[i].cmax && w->n_cur < t->val_group; c++)
                    w->cur[w->n_cur++] = c;
                w->pos_offset = 0;
                w->seed = 0;
                t->val_samples += w->n_cur;
            }
    free(vp);
    return 0;
}

void cc_trainer_close(CcTrainer **pt)
{
    CcTrainer *t = pt ? *pt : NULL;
    if (!t)
        return;
    for (int i = 0; i < MAX_THREADS; i++) {
        cc_train_work_close(&t->work[i]);
        free(t->grads[i]);
    }
    free(t->train_pool);
    free(t->val_win);
    free(t->val_abs);
    free(t->val_sq);
    free(t->val_obs);
    free(t->batch);
    free(t->am);
    free(t->ema_w);
    free(t->swap);
    free(t->lin_old);
    free(t->av);
    free(t->decay);
    free(t);
    *pt = NULL;
}

int cc_trainer_open(CcTrainer **out, CcModel *m, const CcDataset *ds, const CcRange *train,
                    const CcRange *val, const CcTrainSettings *s, char *err, size_t errlen)
{
    const CcHparams *hp = &m->hp;
    int ret = -EINVAL;
    CcTrainer *t = NULL;
    if (ds->n_features != hp->n_features) {
        cc_errf(err, errlen, ret, "the data has %d features, the model %d", ds->n_features,
                hp->n_features);
        goto error;
    }
    if (s->batch < 1 || s->n_threads < 1 || s->dropout < 0 || s->dropout >= 1 || s->group < 0 ||
        !(s->mae_weight >= 0) || !(s->mse_weight >= 0) || !(s->nll_mean >= 0) ||
        !(s->logsig_min <= 0) || s->logsig_min < -20 || !(s->linear_lr_mult >= 0) ||
        !(s->nll_huber >= 0 && s->nll_huber <= 1e6f) ||
        (s->dropout_sites != CC_DROPOUT_ALL && s->dropout_sites != CC_DROPOUT_RESIDUAL)) {
        cc_errf(err, errlen, ret,
                "bad training settings (batch, threads, dropout, group, MAE weight, "
                "log-sigma clamp, Huber tail, linear path's rate or dropout sites)");
        goto error;
    }
    ret = -ENOMEM;
    t = calloc(1, sizeof *t);
    if (!t)
        goto error;
    t->m = m;
    t->ds = ds;
    t->s = *s;
    t->s.n_threads = s->n_threads > MAX_THREADS ? MAX_THREADS : s->n_threads;
    if (t->s.n_threads > s->batch)
        t->s.n_threads = s->batch;
    int P = hp->patch_len;
    t->group = s->group == 0 || s->group > P ? P : s->group;
    t->group = t->group > CC_TRAIN_MAX_GROUP ? CC_TRAIN_MAX_GROUP : t->group;
    t->val_group = P > CC_TRAIN_MAX_GROUP ? CC_TRAIN_MAX_GROUP : P;
    t->rng = s->seed * 0x2545f4914f6cdd1dULL + 0x7472616e696e67ULL;
    ret = build_pools(t, train, val);
    if (ret < 0)
        goto error;
    if (t->n_train_pool == 0) {
        ret = cc_errf(err, errlen, -EINVAL,
                      "no training sample: every series is shorter than one patch (%d) plus "
                      "the horizon (%d) inside its training range",
                      P, hp->horizon);
        goto error;
    }
    ret = -ENOMEM;
    t->per_thread = (s->batch + t->s.n_threads - 1) / t->s.n_threads;
    int maxg = t->group > t->val_group ? t->group : t->val_group;
    for (int i = 0; i < t->s.n_threads; i++) {
        if (cc_train_work_open(&t->work[i], hp, t->per_thread, maxg) < 0)
            goto error;
        if (!(t->grads[i] = calloc(m->n_params, sizeof(float))))
            goto error;
        float lo = s->logsig_min < 0   ? s->logsig_min
                   : hp->linear_window ? CC_NLL_LOGSIG_MIN_TX3
                                       : CC_NLL_LOGSIG_MIN;
        cc_train_work_set_loss(t->work[i], lo, s->mae_weight, s->mse_weight, s->nll_mean);
        cc_train_work_set_nll_huber(t->work[i], s->nll_huber);
        cc_train_work_set_dropout_sites(t->work[i], s->dropout_sites);
        cc_train_work_set_sq_weight(t->work[i], s->val_mse_weight);
        cc_train_work_set_mae_unit(t->work[i], s->mae_unit, s->mae_unit_cap);
        cc_train_work_set_xn_bound(t->work[i], s->xn_bound);
    }
    t->batch = calloc((size_t)s->batch, sizeof *t->batch);
    t->am = calloc(m->n_params, sizeof(float));
    t->av = calloc(m->n_params, sizeof(float));
    t->decay = calloc(m->n_params, 1);
    if (!t->batch || !t->am || !t->av || !t->decay)
        goto error;
    if (s->linear_lr_mult != 1 && hp->linear_window > 0 &&
        !(t->lin_old =
              malloc(((size_t)hp->horizon * hp->linear_window + hp->horizon) * sizeof(float))))
        goto error;
    if (s->ema > 0) {
        t->ema_w = malloc(m->n_params * sizeof(float));
        t->swap = malloc(m->n_params * sizeof(float));
        if (!t->ema_w || !t->swap)
            goto error;
        memcpy(t->ema_w, m->block, m->n_params * sizeof(float));
    }
    size_t sz[CC_NUM_PARAM_ARRAYS], off = 0;
    cc_params_sizes(hp, sz);
    /* norm.floor and calib.sigma_scale, the block's last two arrays, are set by the caller
     * and by cc_trainer_calibrate, never by the optimiser */
    t->n_trained = m->n_params - sz[CC_NUM_PARAM_ARRAYS - 2] - sz[CC_NUM_PARAM_ARRAYS - 1];
    for (int i = 0; i < CC_NUM_PARAM_ARRAYS; i++) {
        /* weight matrices decay: embed_w, qkv_w, o_w, up_w, down_w, head_w */
        int dec = i == 0 || i == 3 || i == 5 || i == 9 || i == 11 || i == 15 ||
                  (s->decay_all && i < CC_NUM_PARAM_ARRAYS - 2);
        memset(t->decay + off, dec, sz[i]);
        off += sz[i];
    }
    *out = t;
    return 0;
error:
    if (ret == -ENOMEM)
        cc_errf(err, errlen, ret, "out of memory setting up the trainer");
    cc_trainer_close(&t);
    return ret;
}

void cc_trainer_counts(const CcTrainer *t, int64_t *train_samples, int64_t *val_samples)
{
    if (train_samples)
        *train_samples = t->train_samples;
    if (val_samples)
        *val_samples = t->val_samples;
}

int64_t cc_trainer_steps_done(const CcTrainer *t) { return t->step; }

void cc_trainer_excluded(const CcTrainer *t, int64_t *excluded, int64_t *drawn)
{
    *excluded = t->excluded;
    *drawn = t->drawn;
}

typedef struct Job {
    CcTrainer *t;
    int thread;
    const CcTrainWindow *win;
    int n_win;
    float dropout;
    float *grad;
    double loss;
    int n_samples, n_excluded;
    double sq_sum;
    int64_t sq_count;
    double *abs_out; // (n_win) per-window absolute and squared errors and observed targets,
    double *sq_out;  //   or NULL
    int *obs_out;
    int ret;
} Job;

/* The caller's stop request (settings.stop): read, never written, by every thread. */
static int stop_requested(const CcTrainer *t) { return t->s.stop && *t->s.stop; }

static void *job_run(void *arg)
{
    Job *j = arg;
    j->loss = 0;
    j->n_samples = 0;
    j->n_excluded = 0;
    j->sq_sum = 0;
    j->sq_count = 0;
    j->ret = 0;
    for (int i = 0; i < j->n_win && j->ret == 0; i += j->t->per_thread) {
        if (stop_requested(j->t)) {
            j->ret = -ECANCELED;
            break;
        }
        int cnt = j->n_win - i < j->t->per_thread ? j->n_win - i : j->t->per_thread;
        double l;
        int ns;
        j->ret = cc_train_batch(j->t->work[j->thread], j->t->m, j->grad, j->t->ds, j->win + i, cnt,
                                j->dropout, 1.0f, &l, &ns, NULL, NULL, NULL);
        j->loss += l;
        j->n_samples += ns;
        j->n_excluded += cc_train_work_excluded(j->t->work[j->thread]);
        double sq;
        int64_t sc;
        cc_train_work_sqerr(j->t->work[j->thread], &sq, &sc);
        j->sq_sum += sq;
        j->sq_count += sc;
        if (j->abs_out) {
            const double *as, *sqs;
            const int *ao;
            cc_train_work_abserr(j->t->work[j->thread], &as, &sqs, &ao);
            memcpy(j->abs_out + i, as, (size_t)cnt * sizeof *as);
            memcpy(j->sq_out + i, sqs, (size_t)cnt * sizeof *sqs);
            memcpy(j->obs_out + i, ao, (size_t)cnt * sizeof *ao);
        }
    }
    return NULL;
}

/* Runs windows over the threads: thread i gets a contiguous share. Sums losses in order.
 * The validation windows leave their absolute errors per window in t->val_abs/val_obs. */
static int run_threads(CcTrainer *t, const CcTrainWindow *win, int n, float dropout, int grads,
                       double *loss, int *n_samples, double *mse)
{
    Job jobs[MAX_THREADS];
    pthread_t th[MAX_THREADS];
    int nt = t->s.n_threads, started[MAX_THREADS] = {0};
    int share = (n + nt - 1) / nt, per_win = win == t->val_win;
    for (int i = 0; i < nt; i++) {
        int a = i * share, b = a + share > n ? n : a + share;
        a = a < n ? a : n;
        jobs[i] = (Job){.t = t,
                        .thread = i,
                        .win = win + a,
                        .n_win = b > a ? b - a : 0,
                        .dropout = dropout,
                        .grad = grads ? t->grads[i] : NULL,
                        .abs_out = per_win ? t->val_abs + a : NULL,
                        .sq_out = per_win ? t->val_sq + a : NULL,
                        .obs_out = per_win ? t->val_obs + a : NULL};
        if (grads)
            memset(t->grads[i], 0, t->m->n_params * sizeof(float));
    }
    for (int i = 1; i < nt; i++)
        started[i] = pthread_create(&th[i], NULL, job_run, &jobs[i]) == 0;
    job_run(&jobs[0]);
    for (int i = 1; i < nt; i++) {
        if (started[i])
            pthread_join(th[i], NULL);
        else
            job_run(&jobs[i]);
    }
    *loss = 0;
    *n_samples = 0;
    int ret = 0;
    double sq = 0;
    int64_t sc = 0;
    for (int i = 0; i < nt; i++) {
        *loss += jobs[i].loss;
        *n_samples += jobs[i].n_samples;
        if (grads)
            t->excluded += jobs[i].n_excluded;
        sq += jobs[i].sq_sum;
        sc += jobs[i].sq_count;
        if (jobs[i].ret < 0)
            ret = jobs[i].ret;
    }
    if (mse)
        *mse = sc ? sq / (double)sc : NAN;
    return ret;
}

static void draw_window(CcTrainer *t, CcTrainWindow *w)
{
    const CcHparams *hp = &t->m->hp;
    int P = hp->patch_len, F = t->ds->n_features;
    const Pool *pl;
    int f;
    for (;;) { /* rejection keeps end steps uniform when a pool entry has < P offsets */
        uint64_t k = rng_below(&t->rng, (uint64_t)t->n_train_pool * F);
        pl = &t->train_pool[k / F];
        f = (int)(k % F);
        int nvalid = pl->cmax - pl->cmin + 1;
        if (nvalid >= P || rng_below(&t->rng, P) < (uint64_t)nvalid)
            break;
    }
    int offs[CC_MAX_PATCH_LEN], nvalid = pl->cmax - pl->cmin + 1;
    for (int i = 0; i < nvalid; i++)
        offs[i] = pl->cmin + i;
    int G = t->group < nvalid ? t->group : nvalid;
    for (int i = 0; i < G; i++) { /* partial Fisher–Yates */
        int j = i + (int)rng_below(&t->rng, (uint64_t)(nvalid - i));
        int tmp = offs[i];
        offs[i] = offs[j];
        offs[j] = tmp;
    }
    w->series = pl->series;
    w->feature = f;
    w->e = pl->e;
    w->n_cur = G;
    memcpy(w->cur, offs, (size_t)G * sizeof(int));
    w->pos_offset = (int64_t)rng_below(&t->rng, CC_TRAIN_POS_RANGE);
    w->seed = cc_rng_next(&t->rng);
}

int cc_trainer_step(CcTrainer *t, double *loss, float *lr, double *gnorm)
{
    if (stop_requested(t)) /* before the draw: a stopped step leaves no trace */
        return -ECANCELED;
    for (int b = 0; b < t->s.batch; b++) {
        draw_window(t, &t->batch[b]);
        t->drawn += t->batch[b].n_cur;
    }
    double l;
    int ns;
    int ret = run_threads(t, t->batch, t->s.batch, t->s.dropout, 1, &l, &ns, NULL);
    if (ret < 0)
        return ret;
    size_t n = t->n_trained;
    float *g = t->grads[0];
    for (int i = 1; i < t->s.n_threads; i++) /* fixed order: deterministic */
        for (size_t k = 0; k < n; k++)
            g[k] += t->grads[i][k];
    if (ns == 0)
        ns = 1;
    for (size_t k = 0; k < n; k++)
        g[k] /= (float)ns;
    l /= ns;
    if (loss)
        *loss = l;
    if (!isfinite(l))
        return -ERANGE;
    if (t->step < t->s.linear_freeze && t->m->hp.linear_window > 0) {
        /* zero gradient and zero moments: Adam leaves the linear path where it is, and it
         * takes no share of the clipping norm */
        const CcHparams *hp = &t->m->hp;
        memset(g + (t->m->w.lin_w - t->m->block), 0,
               (size_t)hp->horizon * hp->linear_window * sizeof(float));
        memset(g + (t->m->w.lin_b - t->m->block), 0, (size_t)hp->horizon * sizeof(float));
    }
    t->step++;
    if (lr)
        *lr = cc_adam_lr(&t->s.adam, t->step);
    /* lin_w and lin_b are adjacent in the block: one range */
    float *lin = t->m->w.lin_w;
    size_t n_lin = t->lin_old ? (size_t)(t->m->w.norm_floor - lin) : 0;
    if (n_lin)
        memcpy(t->lin_old, lin, n_lin * sizeof(float));
    double norm = cc_adam_update(t->m->block, g, t->am, t->av, t->decay, n, t->step, &t->s.adam);
    /* a rate of its own for the linear path: its update scaled after the fact (the moments
     * are the same either way) */
    for (size_t k = 0; k < n_lin; k++)
        lin[k] = t->lin_old[k] + t->s.linear_lr_mult * (lin[k] - t->lin_old[k]);
    if (gnorm)
        *gnorm = norm;
    if (t->ema_w) { /* the usual warm start: a shorter average over the first steps */
        float d = t->s.ema, d0 = (1.0f + (float)t->step) / (10.0f + (float)t->step);
        d = d < d0 ? d : d0;
        for (size_t k = 0; k < n; k++)
            t->ema_w[k] = d * t->ema_w[k] + (1 - d) * t->m->block[k];
    }
    return 0;
}

/* The ridge solution x ((R + 1) x HZ, the bias last) as the linear path's weights, in the
 * running average too (a fit is the start, not a step to average in). */
static void set_linear(CcTrainer *t, const double *x, int R, int HZ)
{
    for (int k = 0; k < HZ; k++) {
        for (int i = 0; i < R; i++)
            t->m->w.lin_w[(size_t)k * R + i] = (float)x[(size_t)i * HZ + k];
        t->m->w.lin_b[k] = (float)x[(size_t)R * HZ + k];
    }
    if (t->ema_w) {
        size_t off = (size_t)(t->m->w.lin_w - t->m->block), nb = (size_t)HZ * R;
        memcpy(t->ema_w + off, t->m->w.lin_w, nb * sizeof(float));
        off = (size_t)(t->m->w.lin_b - t->m->block);
        memcpy(t->ema_w + off, t->m->w.lin_b, (size_t)HZ * sizeof(float));
    }
}

/* The normal equations of [r 1] -> y over every usable training window into rg: a window
 * counts when its every horizon step is observed, or with partial when one is (the others'
 * targets the imputed values). */
static int linear_rows(CcTrainer *t, CcRidge *rg, int partial)
{
    const CcHparams *hp = &t->m->hp;
    const int R = hp->linear_window, HZ = hp->horizon, F = t->ds->n_features;
    CcTrainWork *w = t->work[0];
    for (int64_t p = 0; p < t->n_train_pool; p++) {
        const Pool *pl = &t->train_pool[p];
        for (int f = 0; f < F; f++)
            for (int c0 = pl->cmin; c0 <= pl->cmax; c0 += t->val_group) {
                CcTrainWindow win = {.series = pl->series, .feature = f, .e = pl->e};
                for (int c = c0; c <= pl->cmax && win.n_cur < t->val_group; c++)
                    win.cur[win.n_cur++] = c;
                int ret = build_window(w, t->m, t->ds, &win, 0, 0, 0, 0, NULL, NULL, w->xn_bound);
                if (ret < 0)
                    return ret;
                int64_t ie = pl->e - t->ds->series[pl->series].p0;
                for (int j = 0; j < win.n_cur; j++) {
                    const float *tw = w->tw + (size_t)j * HZ, *tg = w->tgt + (size_t)j * HZ;
                    int seen = 0;
                    for (int k = 0; k < HZ; k++)
                        seen += tw[k] > 0;
                    if (ie + win.cur[j] - R + 1 < 0 || seen == 0 || (seen < HZ && !partial))
                        continue; /* no cold-start padding */
                    double *yr, *ar = cc_ridge_row(rg, &yr);
                    for (int i = 0; i < R; i++)
                        ar[i] = w->lin_in[(size_t)j * R + i];
                    ar[R] = 1.0;
                    for (int k = 0; k < HZ; k++)
                        yr[k] = (double)tg[k] - w->lin_xt[j];
                    cc_ridge_push(rg);
                }
            }
    }
    return 0;
}

int cc_trainer_fit_linear(CcTrainer *t, double lambda, int64_t *n_samples)
{
    const CcHparams *hp = &t->m->hp;
    const int R = hp->linear_window, HZ = hp->horizon, K = R + 1;
    if (R < 1 || !(lambda >= 0))
        return -EINVAL;
    CcRidge *rg = NULL;
    double *x = malloc((size_t)K * HZ * sizeof *x);
    int ret = x ? cc_ridge_open(&rg, K, HZ) : -ENOMEM;
    if (ret == 0)
        ret = linear_rows(t, rg, 0);
    /* cells with gaps leave few windows whose every horizon step is observed: then the
     * windows with some step observed count too, as cc_learn_fit_linear's fallback */
    if (ret == 0 && cc_ridge_rows(rg) < 2 * (int64_t)R) {
        cc_ridge_close(&rg);
        ret = cc_ridge_open(&rg, K, HZ);
        if (ret == 0)
            ret = linear_rows(t, rg, 1);
    }
    if (ret < 0)
        goto done;
    const int64_t n = cc_ridge_rows(rg);
    ret = cc_ridge_solve(rg, lambda * (double)n, R, x);
    if (ret < 0)
        goto done;
    set_linear(t, x, R, HZ);
    if (n_samples)
        *n_samples = n;
    ret = 0;
done:
    cc_ridge_close(&rg);
    free(x);
    return ret;
}

/* Where cc_trainer_fit_linear_scaled's IRLS rows go: lad, with held_bias (HZ values, or
 * NULL: the bias is lad's last input); every stride-th sample (counted in seen) only. */
typedef struct LadSink {
    CcLad *lad;
    const double *held_bias;
    int64_t stride, seen;
} LadSink;

static int scaled_window_rows_lad(CcTrainer *t, CcRidge *rg, LadSink *sink, int s, int f, int64_t e,
                                  int cmin, int cmax, double scale, const double *x, int n_x,
                                  double *abs_sum, int64_t *n_abs, int64_t *pushed);

/* The samples of window (s, f, e, current offsets cmin..cmax) in a KPI's own units over its
 * scale (cc_trainer_fit_linear_scaled): pushed into rg when it is not NULL; with x (n_x
 * solutions, K·HZ each) their absolute errors / scale added to abs_sum[i·F + f] and
 * counted in n_abs[f]. *pushed counts the samples. 0 or a build error. */
static int scaled_window_rows(CcTrainer *t, CcRidge *rg, int s, int f, int64_t e, int cmin,
                              int cmax, double scale, const double *x, int n_x, double *abs_sum,
                              int64_t *n_abs, int64_t *pushed)
{
    return scaled_window_rows_lad(t, rg, NULL, s, f, e, cmin, cmax, scale, x, n_x, abs_sum, n_abs,
                                  pushed);
}

/* The same, and the rows into sink->lad when sink is not NULL: with a held bias the bias
 * column is not an input but its part of the forecast, held_bias[k]·sigma/scale, is taken
 * off the targets. */
static int scaled_window_rows_lad(CcTrainer *t, CcRidge *rg, LadSink *sink, int s, int f, int64_t e,
                                  int cmin, int cmax, double scale, const double *x, int n_x,
                                  double *abs_sum, int64_t *n_abs, int64_t *pushed)
{
    const CcHparams *hp = &t->m->hp;
    const int R = hp->linear_window, HZ = hp->horizon, K = R + 1, F = t->ds->n_features;
    CcTrainWork *w = t->work[0];
    const int64_t ie = e - t->ds->series[s].p0;
    for (int c0 = cmin; c0 <= cmax; c0 += t->val_group) {
        CcTrainWindow win = {.series = s, .feature = f, .e = e};
        for (int c = c0; c <= cmax && win.n_cur < t->val_group; c++)
            win.cur[win.n_cur++] = c;
        int ret = build_window(w, t->m, t->ds, &win, 0, 0, 0, 0, NULL, NULL, 0.0f);
        if (ret < 0)
            return ret;
        const double u = w->wsigma[0] / scale; /* normalised units to scale units */
        for (int j = 0; j < win.n_cur; j++) {
            const float *tw = w->tw + (size_t)j * HZ, *tg = w->tgt + (size_t)j * HZ;
            const float *in = w->lin_in + (size_t)j * R;
            int ok = ie + win.cur[j] - R + 1 >= 0, seen = 0; /* no cold-start padding */
            for (int k = 0; k < HZ; k++)
                seen += tw[k] > 0;
            if (!ok || seen == 0 || (seen < HZ && !t->lin_partial))
                continue;
            if (rg) {
                double *yr, *ar = cc_ridge_row(rg, &yr);
                for (int i = 0; i < R; i++)
                    ar[i] = in[i] * u;
                ar[R] = u;
                for (int k = 0; k < HZ; k++)
                    yr[k] = ((double)tg[k] - w->lin_xt[j]) * u;
                cc_ridge_push(rg);
            }
            if (sink && sink->seen++ % sink->stride == 0) {
                const double *held_bias = sink->held_bias;
                double *yr, *ar = cc_lad_row(sink->lad, &yr);
                for (int i = 0; i < R; i++)
                    ar[i] = in[i] * u;
                if (!held_bias)
                    ar[R] = u;
                for (int k = 0; k < HZ; k++)
                    yr[k] = ((double)tg[k] - w->lin_xt[j] - (held_bias ? held_bias[k] : 0)) * u;
                cc_lad_push(sink->lad);
            }
            for (int q = 0; q < n_x; q++) {
                const double *xq = x + (size_t)q * K * HZ;
                for (int k = 0; k < HZ; k++) {
                    if (!(tw[k] > 0)) /* an imputed target: not an error of the map */
                        continue;
                    double pred = xq[(size_t)R * HZ + k];
                    for (int i = 0; i < R; i++)
                        pred += in[i] * xq[(size_t)i * HZ + k];
                    abs_sum[(size_t)q * F + f] += fabs(((double)tg[k] - w->lin_xt[j] - pred) * u);
                }
            }
            if (n_x > 0)
                n_abs[f] += seen;
            (*pushed)++;
        }
    }
    return 0;
}

/* The penalty of lambda relative to the inputs' mean square, as `cellcast eval`'s linear
 * has it. */
static double scaled_penalty(CcRidge *rg, int R, double lambda)
{
    const int64_t n = cc_ridge_rows(rg);
    double ms = n ? cc_ridge_trace(rg, R) / ((double)n * R) : 0;
    return lambda * (double)n * (ms > 0 ? ms : 1.0);
}

/* Solves with that penalty, the bias not penalised. */
static int solve_scaled(CcRidge *rg, int R, double lambda, double *x)
{
    return cc_ridge_solve(rg, scaled_penalty(rg, R, lambda), R, x);
}

static int scale_ok(double v) { return v > 0 && isfinite(v); }

/* One IRLS pass of cc_trainer_fit_linear_scaled: the rows of the training pool and, when
 * refit is not NULL, those of refit's ranges into lad at xl (sums_only: their residual sums
 * alone, cc_lad_begin_sums). 0 or a build error. */
static int lad_pass(CcTrainer *t, const CcLinearFitSettings *s, const CcRange *refit, LadSink *sink,
                    const double *xl, double eps, int sums_only)
{
    const CcDataset *ds = t->ds;
    const int F = ds->n_features, P = t->m->hp.patch_len, HZ = t->m->hp.horizon;
    int64_t unused = 0;
    int ret = sums_only ? cc_lad_begin_sums(sink->lad, xl, eps) : cc_lad_begin(sink->lad, xl, eps);
    sink->seen = 0;
    for (int64_t p = 0; ret == 0 && p < t->n_train_pool; p++) {
        const Pool *pl = &t->train_pool[p];
        for (int f = 0; ret == 0 && f < F; f++) {
            double sc = s->scale[(size_t)pl->series * F + f];
            if (scale_ok(sc))
                ret = scaled_window_rows_lad(t, NULL, sink, pl->series, f, pl->e, pl->cmin,
                                             pl->cmax, sc, NULL, 0, NULL, NULL, &unused);
        }
    }
    for (int si = 0; refit && ret == 0 && si < ds->n_series; si++) {
        const CcSeries *se = &ds->series[si];
        for (int64_t e = first_boundary(se, P); ret == 0 && e - se->p0 < se->T; e += P) {
            int a, b;
            if (!offsets_for(se, e, P, HZ, refit[si], &a, &b))
                continue;
            for (int f = 0; ret == 0 && f < F; f++) {
                double sc = s->scale[(size_t)si * F + f];
                if (scale_ok(sc))
                    ret = scaled_window_rows_lad(t, NULL, sink, si, f, e, a, b, sc, NULL, 0, NULL,
                                                 NULL, &unused);
            }
        }
    }
    return ret;
}

/* The IRLS objective of a pass (cc_lad.h): its Huber sums plus the penalties on x's first R
 * rows. */
static double lad_objective(const double *hub, const double *pen, const double *xl, int R, int HZ)
{
    double obj = 0;
    for (int k = 0; k < HZ; k++) {
        obj += hub[k];
        for (int i = 0; i < R; i++)
            obj += 0.5 * pen[k] * xl[(size_t)i * HZ + k] * xl[(size_t)i * HZ + k];
    }
    return obj;
}

/* pen[k] = ridge_pen / the mean absolute error at step k of a pass's rows (abs_sum over n
 * rows), per sampled row (stride: the ridge's is over every sample). */
static void start_penalties(const double *abs_sum, double n, int HZ, double ridge_pen,
                            int64_t stride, double *pen)
{
    for (int k = 0; k < HZ; k++)
        pen[k] = (abs_sum[k] > 0 ? ridge_pen / (abs_sum[k] / n) : ridge_pen) / (double)stride;
}

/* The last pass's residual sums (cc_lad_residuals: abs_sum, hub per step), *n its rows and
 * *abs_all the absolute residuals summed over the steps. 0, or -EAGAIN when no row. */
static int lad_sums(const LadSink *sink, int HZ, double *abs_sum, double *hub, double *n,
                    double *abs_all)
{
    *n = (double)cc_lad_rows(sink->lad);
    if (*n == 0)
        return -EAGAIN;
    cc_lad_residuals(sink->lad, abs_sum, hub);
    *abs_all = 0;
    for (int k = 0; k < HZ; k++)
        *abs_all += abs_sum[k];
    return 0;
}

/* IRLS passes over sink's rows from xl (updated) with the penalties pen: each pass measures
 * the objective at xl and solves for the next; it stops when a pass does not lower the
 * objective below *best_obj (then xl is not kept), lowers it by less than
 * CC_LINEAR_FIT_MAE_TOL of it, or after max_passes solves. best (and *best_obj, *mae_end: the
 * rows' mean absolute error there) get the lowest point; pen_from_start: the first pass sets
 * pen from its residuals (start_penalties) and *mae_start. *solves counts the solves. */
static int irls_stage(CcTrainer *t, const CcLinearFitSettings *s, const CcRange *refit,
                      LadSink *sink, double *pen, int pen_from_start, double ridge_pen, double *xl,
                      double *best, double *best_obj, int max_passes, double *abs_sum, double *hub,
                      double *mae_start, double *mae_end, int *solves)
{
    const int R = t->m->hp.linear_window, HZ = t->m->hp.horizon;
    const int KL = s->hold_bias ? R : R + 1;
    const double eps = CC_LINEAR_FIT_MAE_EPS;
    for (int pass = 0; pass <= max_passes; pass++) {
        if (stop_requested(t)) /* a pass over 100k rows takes seconds: a stop ends the fit */
            return -ECANCELED;
        double n, abs_all;
        int ret = lad_pass(t, s, refit, sink, xl, eps, 0);
        if (ret < 0 || (ret = lad_sums(sink, HZ, abs_sum, hub, &n, &abs_all)) < 0)
            return ret;
        if (pass == 0 && pen_from_start) {
            *mae_start = abs_all / (n * HZ);
            start_penalties(abs_sum, n, HZ, ridge_pen, sink->stride, pen);
        }
        const double obj = lad_objective(hub, pen, xl, R, HZ);
        if (!(obj < *best_obj))
            break;
        double gain = *best_obj - obj;
        *best_obj = obj;
        memcpy(best, xl, (size_t)KL * HZ * sizeof *best);
        *mae_end = abs_all / (n * HZ);
        if (gain < CC_LINEAR_FIT_MAE_TOL * obj || pass == max_passes)
            break;
        if ((ret = cc_lad_solve(sink->lad, pen, R, xl)) < 0)
            return ret;
        /* over-relaxed: beta·(the solve's point - this pass's, in best), beta in (0, 2), still
         * lowers the quadratic that majorises the objective (to (1 - beta)² of its drop),
         * and moves further along the slow direction plain IRLS creeps down */
        const double relax = s->mae_relax > 0 ? s->mae_relax : CC_LINEAR_FIT_MAE_RELAX;
        for (size_t i = 0; i < (size_t)KL * HZ; i++)
            xl[i] = best[i] + relax * (xl[i] - best[i]);
        (*solves)++;
    }
    return 0;
}

/* The residual sums of x over the training pool's sampled rows (and refit's) without
 * solving: the penalties pen from them (start_penalties) and *mae_start, their mean absolute
 * error; *obj (may be NULL) the objective there. 0, -EAGAIN (no row) or an error. */
static int lad_measure(CcTrainer *t, const CcLinearFitSettings *s, const CcRange *refit,
                       LadSink *sink, const double *xl, double ridge_pen, double *pen,
                       double *abs_sum, double *hub, double *mae_start, double *obj)
{
    const int R = t->m->hp.linear_window, HZ = t->m->hp.horizon;
    double n, abs_all;
    int ret = lad_pass(t, s, refit, sink, xl, CC_LINEAR_FIT_MAE_EPS, 1);
    if (ret < 0 || (ret = lad_sums(sink, HZ, abs_sum, hub, &n, &abs_all)) < 0)
        return ret;
    *mae_start = abs_all / (n * HZ);
    start_penalties(abs_sum, n, HZ, ridge_pen, sink->stride, pen);
    if (obj)
        *obj = lad_objective(hub, pen, xl, R, HZ);
    return 0;
}

/* The row sampling of IRLS over n_samples: every stride-th (at most s->mae_max_rows). */
static int64_t lad_stride(const CcLinearFitSettings *s, int64_t n_samples)
{
    const int64_t cap = s->mae_max_rows > 0 ? s->mae_max_rows : CC_LINEAR_FIT_MAE_ROWS;
    return n_samples > cap ? (n_samples + cap - 1) / cap : 1;
}

/* CC_LINEAR_LOSS_MAE: x (K·HZ, bias row last) refitted by IRLS on the absolute error over
 * the training pool (and refit's rows when not NULL), from x, with the penalties pen (HZ);
 * when pen_from_start, pen[k] is first set to ridge_pen / the mean absolute error of x at
 * step k (cc_trainer_fit_linear_scaled's comment in cc_train.h). With enough rows (at least
 * CC_LINEAR_FIT_MAE_COARSE_MIN per input in every s->mae_coarse-th of them) a coarse stage
 * first runs IRLS on that subsample (its penalties scaled to its rows) from x, and the fit
 * goes on from its result; the fit keeps x unless a point beats x's objective on the rows.
 * *mae_start / *mae_end: the rows' mean absolute error at x and at the map kept; *passes the
 * solves made on the rows, *coarse_passes those on the subsample. */
static int fit_linear_mae(CcTrainer *t, const CcLinearFitSettings *s, const CcRange *refit,
                          int64_t n_samples, double ridge_pen, double *pen, int pen_from_start,
                          double *x, double *mae_start, double *mae_end, int *passes,
                          int *coarse_passes)
{
    const int R = t->m->hp.linear_window, HZ = t->m->hp.horizon;
    const int KL = s->hold_bias ? R : R + 1;
    const int max_passes = s->mae_passes > 0 ? s->mae_passes : CC_LINEAR_FIT_MAE_PASSES;
    const int coarse = s->mae_coarse > 0 ? s->mae_coarse : CC_LINEAR_FIT_MAE_COARSE;
    CcLad *lad = NULL;
    double *xl = malloc((size_t)KL * HZ * sizeof *xl),
           *best = malloc((size_t)KL * HZ * sizeof *best);
    double *held = malloc((size_t)HZ * sizeof *held),
           *abs_sum = malloc((size_t)HZ * sizeof *abs_sum);
    double *hub = malloc((size_t)HZ * sizeof *hub), *cpen = malloc((size_t)HZ * sizeof *cpen);
    int ret = xl && best && held && abs_sum && hub && cpen ? cc_lad_open(&lad, KL, HZ) : -ENOMEM;
    if (ret < 0)
        goto done;
    memcpy(xl, x, (size_t)KL * HZ * sizeof *xl);     /* the bias last, when fitted */
    memcpy(best, x, (size_t)KL * HZ * sizeof *best); /* a non-finite objective: x stays */
    for (int k = 0; k < HZ; k++)
        held[k] = x[(size_t)R * HZ + k];
    LadSink sink = {
        .lad = lad, .held_bias = s->hold_bias ? held : NULL, .stride = lad_stride(s, n_samples)};
    double best_obj = INFINITY;
    *passes = *coarse_passes = 0;
    if (pen_from_start && coarse > 1 &&
        n_samples / sink.stride / coarse >= (int64_t)CC_LINEAR_FIT_MAE_COARSE_MIN * KL) {
        /* x's objective on the rows (and the penalties from its residuals): the bar */
        double start;
        ret = lad_measure(t, s, refit, &sink, xl, ridge_pen, cpen, abs_sum, hub, &start, NULL);
        if (ret < 0)
            goto done;
        if (pen_from_start)
            memcpy(pen, cpen, (size_t)HZ * sizeof *pen), *mae_start = start;
        best_obj = lad_objective(hub, pen, xl, R, HZ);
        *mae_end = start;
        pen_from_start = 0;
        /* the coarse stage: every coarse-th row of the fit's, its penalties per its rows */
        LadSink cs = sink;
        cs.stride = sink.stride * coarse;
        for (int k = 0; k < HZ; k++)
            cpen[k] = pen[k] * (double)sink.stride / (double)cs.stride;
        double cbest_obj = INFINITY, cstart, cend;
        ret = irls_stage(t, s, refit, &cs, cpen, 0, 0, xl, best, &cbest_obj, max_passes, abs_sum,
                         hub, &cstart, &cend, coarse_passes);
        if (ret < 0)
            goto done;
        memcpy(xl, best, (size_t)KL * HZ * sizeof *xl); /* the coarse stage's lowest point */
        memcpy(best, x, (size_t)KL * HZ * sizeof *best);
    }
    ret = irls_stage(t, s, refit, &sink, pen, pen_from_start, ridge_pen, xl, best, &best_obj,
                     max_passes, abs_sum, hub, mae_start, mae_end, passes);
    if (ret < 0)
        goto done;
    memcpy(x, best, (size_t)KL * HZ * sizeof *x); /* with the bias held, x's bias row stays */
    ret = 0;
done:
    cc_lad_close(&lad);
    free(xl);
    free(best);
    free(held);
    free(abs_sum);
    free(hub);
    free(cpen);
    return ret;
}

/* The mean over KPIs of the validation MAE / scale of the n_x maps x (K·HZ each) into
 * crit[q], as cc_trainer_fit_linear_scaled chooses its penalty. 0 or a build error. */
static int scaled_val_crit(CcTrainer *t, const CcLinearFitSettings *s, const double *x, int n_x,
                           double *crit)
{
    const int F = t->ds->n_features;
    double *abs_sum = calloc((size_t)n_x * F, sizeof *abs_sum);
    int64_t *n_abs = calloc((size_t)F, sizeof *n_abs), unused = 0;
    int ret = abs_sum && n_abs ? 0 : -ENOMEM;
    for (int i = 0; ret == 0 && i < t->n_val_win; i++) {
        const CcTrainWindow *vw = &t->val_win[i];
        double sc = s->scale[(size_t)vw->series * F + vw->feature];
        if (scale_ok(sc))
            ret = scaled_window_rows(t, NULL, vw->series, vw->feature, vw->e, vw->cur[0],
                                     vw->cur[vw->n_cur - 1], sc, x, n_x, abs_sum, n_abs, &unused);
    }
    for (int q = 0; ret == 0 && q < n_x; q++) {
        double acc = 0;
        int used = 0;
        for (int f = 0; f < F; f++)
            if (n_abs[f] > 0)
                acc += abs_sum[(size_t)q * F + f] / (double)n_abs[f], used++;
        crit[q] = used ? acc / used : NAN;
    }
    free(abs_sum);
    free(n_abs);
    return ret;
}

int cc_trainer_fit_linear_scaled(CcTrainer *t, const CcLinearFitSettings *s, CcLinearFitReport *rep)
{
    const CcHparams *hp = &t->m->hp;
    const CcDataset *ds = t->ds;
    const int R = hp->linear_window, HZ = hp->horizon, K = R + 1, F = ds->n_features;
    const int P = hp->patch_len, NL = s->n_lambdas;
    CcLinearFitReport rp = {.lambda = NAN, .mae_start = NAN, .mae_end = NAN, .mae_val_crit = NAN};
    if (R < 1 || !s->scale || !s->lambdas || NL < 1 || NL > CC_LINEAR_FIT_MAX_LAMBDAS ||
        (s->loss != CC_LINEAR_LOSS_MSE && s->loss != CC_LINEAR_LOSS_MAE) || s->mae_passes < 0 ||
        s->mae_coarse < 0 || !(s->mae_relax >= 0 && s->mae_relax < 2))
        return -EINVAL;
    for (int q = 0; q < NL; q++)
        if (!(s->lambdas[q] >= 0))
            return -EINVAL;
    const int mae = s->loss == CC_LINEAR_LOSS_MAE;
    CcRidge *rg = NULL;
    double *x = malloc((size_t)(NL > 2 ? NL : 2) * K * HZ * sizeof *x);
    double *xm = mae ? malloc((size_t)K * HZ * sizeof *xm) : NULL;
    double *pen = mae ? malloc((size_t)HZ * sizeof *pen) : NULL;
    int ret = x && (!mae || (xm && pen)) ? cc_ridge_open(&rg, K, HZ) : -ENOMEM;
    /* the windows whose every horizon step is observed; fewer than 2·R of them (cells with
     * gaps: NAB's irregular 5-minute series have none on their first day), those with at
     * least one, their other targets the imputed values (t->lin_partial) */
    for (int partial = 0; ret == 0 && partial < 2; partial++) {
        const int64_t whole = rp.n_fit;
        if (partial) {
            if (whole >= 2 * (int64_t)R)
                break;
            cc_ridge_close(&rg);
            ret = cc_ridge_open(&rg, K, HZ);
            rp.n_fit = 0;
        }
        t->lin_partial = partial;
        for (int64_t p = 0; ret == 0 && p < t->n_train_pool; p++) {
            const Pool *pl = &t->train_pool[p];
            for (int f = 0; ret == 0 && f < F; f++) {
                double sc = s->scale[(size_t)pl->series * F + f];
                if (scale_ok(sc))
                    ret = scaled_window_rows(t, rg, pl->series, f, pl->e, pl->cmin, pl->cmax, sc,
                                             NULL, 0, NULL, NULL, &rp.n_fit);
            }
        }
        rp.partial_targets = partial && rp.n_fit > whole; /* else the same windows */
    }
    if (ret < 0)
        goto done;
    int best = 0;
    if (NL > 1 && t->n_val_win > 0) {
        for (int q = 0; q < NL; q++)
            if ((ret = solve_scaled(rg, R, s->lambdas[q], x + (size_t)q * K * HZ)) < 0)
                goto done;
        if ((ret = scaled_val_crit(t, s, x, NL, rp.val_crit)) < 0)
            goto done;
        for (int q = 1; q < NL; q++) /* NaN never wins; all NaN: the first */
            if (rp.val_crit[q] < rp.val_crit[best] || isnan(rp.val_crit[best]))
                best = isnan(rp.val_crit[q]) ? best : q;
    } else
        for (int q = 0; q < NL; q++)
            rp.val_crit[q] = NAN;
    rp.lambda = s->lambdas[best];
    /* the MAE map on the training rows, kept only when it beats the ridge's on validation */
    int use_mae = mae, warm = 0;
    double pen_train = 0;
    if (mae && t->n_val_win > 0) {
        double crit[2];
        if ((ret = solve_scaled(rg, R, rp.lambda, x)) < 0)
            goto done;
        memcpy(xm, x, (size_t)K * HZ * sizeof *xm);
        pen_train = scaled_penalty(rg, R, rp.lambda);
        ret = fit_linear_mae(t, s, NULL, rp.n_fit, pen_train, pen, 1, xm, &rp.mae_start,
                             &rp.mae_end, &rp.mae_passes, &rp.mae_coarse_passes);
        if (ret < 0)
            goto done;
        memcpy(x + (size_t)K * HZ, xm, (size_t)K * HZ * sizeof *x);
        if ((ret = scaled_val_crit(t, s, x, 2, crit)) < 0)
            goto done;
        rp.mae_val_crit = crit[1];
        use_mae = warm = crit[1] < crit[0];
    }
    if (s->refit) {
        for (int si = 0; ret == 0 && si < ds->n_series; si++) {
            const CcSeries *se = &ds->series[si];
            for (int64_t e = first_boundary(se, P); ret == 0 && e - se->p0 < se->T; e += P) {
                int a, b;
                if (!offsets_for(se, e, P, HZ, s->refit[si], &a, &b))
                    continue;
                for (int f = 0; ret == 0 && f < F; f++) {
                    double sc = s->scale[(size_t)si * F + f];
                    if (scale_ok(sc))
                        ret = scaled_window_rows(t, rg, si, f, e, a, b, sc, NULL, 0, NULL, NULL,
                                                 &rp.n_refit);
                }
            }
        }
        if (ret < 0)
            goto done;
    }
    if ((ret = solve_scaled(rg, R, rp.lambda, x)) < 0)
        goto done;
    if (use_mae && warm && !s->refit) {
        memcpy(x, xm, (size_t)K * HZ * sizeof *x);
    } else if (use_mae && warm) { /* all rows, from the training rows' MAE map */
        const double pen_all = scaled_penalty(rg, R, rp.lambda);
        double start; /* the training rows' MAE map's over all rows: not reported */
        int passes = 0, coarse_passes = 0;
        /* the penalty grows with the rows, as the ridge's (and shrinks with a longer stride) */
        const int64_t cap = s->mae_max_rows > 0 ? s->mae_max_rows : CC_LINEAR_FIT_MAE_ROWS,
                      n_all = rp.n_fit + rp.n_refit;
        const double st0 = rp.n_fit > cap ? (double)((rp.n_fit + cap - 1) / cap) : 1,
                     st1 = n_all > cap ? (double)((n_all + cap - 1) / cap) : 1;
        for (int k = 0; k < HZ; k++)
            pen[k] *= (pen_train > 0 ? pen_all / pen_train : 1) * st0 / st1;
        /* the bias from the all-rows ridge when it is held, else the MAE map's */
        memcpy(x, xm, (size_t)(s->hold_bias ? R : K) * HZ * sizeof *x);
        ret = fit_linear_mae(t, s, s->refit, n_all, pen_all, pen, 0, x, &start, &rp.mae_end,
                             &passes, &coarse_passes);
        if (ret < 0)
            goto done;
        rp.mae_passes += passes;
        rp.mae_coarse_passes += coarse_passes;
    } else if (use_mae) { /* no validation window to judge on: the MAE map of all rows */
        ret = fit_linear_mae(t, s, s->refit, rp.n_fit + rp.n_refit,
                             scaled_penalty(rg, R, rp.lambda), pen, 1, x, &rp.mae_start,
                             &rp.mae_end, &rp.mae_passes, &rp.mae_coarse_passes);
        if (ret < 0)
            goto done;
    }
    rp.mae_kept = use_mae;
    set_linear(t, x, R, HZ);
done:
    t->lin_partial = 0;
    if (rep)
        *rep = rp;
    cc_ridge_close(&rg);
    free(x);
    free(xm);
    free(pen);
    return ret;
}

const float *cc_trainer_eval_weights(const CcTrainer *t)
{
    return t->ema_w ? t->ema_w : t->m->block;
}

int cc_trainer_validate(CcTrainer *t, double *nll, double *mse)
{
    if (t->n_val_win == 0)
        return -EAGAIN;
    double l;
    int ns;
    size_t bytes = t->m->n_params * sizeof(float);
    if (t->ema_w) { /* score the EMA weights */
        memcpy(t->swap, t->m->block, bytes);
        memcpy(t->m->block, t->ema_w, bytes);
    }
    int ret = run_threads(t, t->val_win, t->n_val_win, 0.0f, 0, &l, &ns, mse);
    if (t->ema_w)
        memcpy(t->m->block, t->swap, bytes);
    if (ret < 0)
        return ret;
    *nll = ns ? l / ns : NAN;
    return 0;
}

void cc_trainer_val_abserr(const CcTrainer *t, double *sum, double *sq_sum, int64_t *count)
{
    int F = t->ds->n_features;
    size_t nc = (size_t)t->ds->n_series * F;
    memset(sum, 0, nc * sizeof *sum);
    if (sq_sum)
        memset(sq_sum, 0, nc * sizeof *sq_sum);
    memset(count, 0, nc * sizeof *count);
    for (int i = 0; i < t->n_val_win; i++) {
        size_t ch = (size_t)t->val_win[i].series * F + t->val_win[i].feature;
        sum[ch] += t->val_abs[i];
        if (sq_sum)
            sq_sum[ch] += t->val_sq[i];
        count[ch] += t->val_obs[i];
    }
}

void cc_trainer_val_naive_abserr(const CcTrainer *t, double *sum, double *sq_sum, int64_t *count)
{
    const CcDataset *ds = t->ds;
    const int F = ds->n_features, HZ = t->m->hp.horizon;
    size_t nc = (size_t)ds->n_series * F;
    memset(sum, 0, nc * sizeof *sum);
    memset(sq_sum, 0, nc * sizeof *sq_sum);
    memset(count, 0, nc * sizeof *count);
    for (int i = 0; i < t->n_val_win; i++) {
        const CcTrainWindow *win = &t->val_win[i];
        const CcSeries *se = &ds->series[win->series];
        const int f = win->feature;
        const size_t ch = (size_t)win->series * F + f;
        for (int j = 0; j < win->n_cur; j++) {
            /* the targets build_window scores: rows tr+1..tr+HZ inside the series, observed */
            int64_t tr = win->e - se->p0 + win->cur[j];
            double last = se->x[(size_t)tr * F + f];
            for (int k = 0; k < HZ; k++) {
                int64_t rr = tr + 1 + k;
                if (rr >= se->T || (se->mask && !se->mask[(size_t)rr * F + f]))
                    continue;
                double d = se->x[(size_t)rr * F + f] - last;
                sum[ch] += fabs(d);
                sq_sum[ch] += d * d;
                count[ch]++;
            }
        }
    }
}

int cc_train_mase_scales(const CcDataset *ds, const CcRange *train, int season, double *scale)
{
    if (season < 1)
        return -EINVAL;
    int F = ds->n_features;
    for (int s = 0; s < ds->n_series; s++)
        for (int f = 0; f < F; f++)
            scale[(size_t)s * F + f] = cc_mase_scale(ds->series[s].x, ds->series[s].mask, F, f,
                                                     train[s].begin, train[s].end, season);
    return 0;
}

double cc_train_mase(const double *sum, const int64_t *count, const double *scale, size_t n)
{
    double acc = 0;
    int used = 0;
    for (size_t c = 0; c < n; c++)
        if (count[c] > 0 && scale[c] > 0 && isfinite(scale[c])) {
            acc += sum[c] / (double)count[c] / scale[c];
            used++;
        }
    return used ? acc / used : NAN;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int cc_trainer_calibrate(CcTrainer *t, double cover[3])
{
    CcCalibSettings cs;
    CcCalibReport rep;
    cc_calib_defaults(&cs);
    cs.fit = CC_CALIB_QUANTILE;
    int ret = cc_trainer_calibrate_fit(t, &cs, &rep);
    if (ret == 0 && cover)
        cover[0] = rep.cover_raw, cover[1] = rep.cover, cover[2] = rep.cover_rms;
    return ret;
}

int cc_trainer_calibrate_fit(CcTrainer *t, const CcCalibSettings *cs, CcCalibReport *rep)
{
    CcModel *m = t->m;
    const CcHparams *hp = &m->hp;
    int HZ = hp->horizon, HZ2 = 2 * HZ;
    if (hp->linear_window <= 0)
        return -EINVAL;
    if (t->n_val_win == 0)
        return -EAGAIN;
    int ret, chunk = t->per_thread;
    CcCalib *c = NULL;
    float *y = malloc((size_t)chunk * t->val_group * HZ2 * sizeof *y);
    ret = y ? cc_calib_open(&c, hp->n_features, HZ, cs) : -ENOMEM;
    if (ret < 0)
        goto done;
    CcTrainWork *w = t->work[0];
    for (int i = 0; i < t->n_val_win; i += chunk) {
        int n = t->n_val_win - i < chunk ? t->n_val_win - i : chunk;
        if (stop_requested(t)) {
            ret = -ECANCELED;
            goto done;
        }
        ret = cc_train_batch(w, m, NULL, t->ds, t->val_win + i, n, 0.0f, 1.0f, NULL, NULL, y, NULL,
                             NULL);
        if (ret < 0)
            goto done;
        const float *tg, *tw;
        cc_train_work_targets(w, &tg, &tw);
        for (int b = 0, row = 0; b < n; b++) {
            const CcTrainWindow *vw = &t->val_win[i + b];
            for (int j = 0; j < vw->n_cur; j++, row++)
                for (int k = 0; k < HZ && ret == 0; k++) {
                    size_t at = (size_t)row * HZ + k;
                    const float *yk = y + (size_t)row * HZ2 + 2 * k;
                    if (tw[at] > 0)
                        ret = cc_calib_add(c, vw->series, vw->e + vw->cur[j], vw->feature, k,
                                           fabsf(tg[at] - yk[0]) / expf(yk[1]));
                }
        }
        if (ret < 0)
            goto done;
    }
    ret = cc_calib_fit(c, m->w.sigma_scale, rep);
done:
    free(y);
    cc_calib_close(&c);
    return ret;
}

/* The population sd of KPI f's observed values in the training rows of series s; 0 when it
 * has none there (then *has is 0). */
static double series_sd(const CcDataset *ds, const CcRange *train, int s, int f, int *has)
{
    const int F = ds->n_features;
    const CcSeries *se = &ds->series[s];
    int a = train[s].begin < 0 ? 0 : train[s].begin;
    int b = train[s].end > se->T ? se->T : train[s].end;
    double sum = 0, ss = 0;
    int64_t n = 0;
    for (int i = a; i < b; i++)
        if (!se->mask || se->mask[(size_t)i * F + f]) {
            sum += se->x[(size_t)i * F + f];
            n++;
        }
    *has = n > 0;
    if (!n)
        return 0;
    double mean = sum / (double)n;
    for (int i = a; i < b; i++)
        if (!se->mask || se->mask[(size_t)i * F + f]) {
            double d = se->x[(size_t)i * F + f] - mean;
            ss += d * d;
        }
    return sqrt(ss / (double)n);
}

int cc_train_naive_start(CcModel *m)
{
    const CcHparams *hp = &m->hp;
    if (hp->linear_window < 1)
        return -EINVAL;
    memset(m->w.lin_w, 0, (size_t)hp->horizon * hp->linear_window * sizeof(float));
    memset(m->w.lin_b, 0, (size_t)hp->horizon * sizeof(float));
    for (int k = 0; k < hp->horizon; k++) {
        memset(m->w.head_w + (size_t)2 * k * hp->d_model, 0, (size_t)hp->d_model * sizeof(float));
        m->w.head_b[2 * k] = 0;
    }
    return 0;
}

/* The root mean square of the moves that leave a flat stretch of KPI f in the training rows
 * of series s: x_i - x_{i-1} != 0 where x_{i-1} == x_{i-2} (three consecutive observed
 * values). 0 when there is none: a KPI whose values never repeat exactly (any continuous
 * measurement) has none, so its spread stays its sd. */
static double series_flat_move(const CcDataset *ds, const CcRange *train, int s, int f)
{
    const int F = ds->n_features;
    const CcSeries *se = &ds->series[s];
    int a = train[s].begin < 0 ? 0 : train[s].begin;
    int b = train[s].end > se->T ? se->T : train[s].end;
    double ss = 0;
    int64_t n = 0;
    for (int i = a + 2; i < b; i++) {
        size_t k = (size_t)i * F + f, k1 = k - (size_t)F, k2 = k1 - (size_t)F;
        if (se->mask && !(se->mask[k] && se->mask[k1] && se->mask[k2]))
            continue;
        float x0 = se->x[k2], x1 = se->x[k1], x2 = se->x[k];
        if (x1 == x0 && x2 != x1) {
            double d = (double)x2 - x1;
            ss += d * d;
            n++;
        }
    }
    return n ? sqrt(ss / (double)n) : 0;
}

double cc_train_kpi_spread(const CcDataset *ds, const CcRange *train, int s, int f, int *has)
{
    double sd = series_sd(ds, train, s, f, has);
    if (!*has)
        return 0;
    double mv = series_flat_move(ds, train, s, f);
    return mv > sd ? mv : sd;
}

int cc_train_norm_floor(const CcDataset *ds, const CcRange *train, double frac, float *floor_out)
{
    int F = ds->n_features, S = ds->n_series;
    double *sd = malloc((size_t)(S ? S : 1) * sizeof *sd);
    if (!sd)
        return -ENOMEM;
    for (int f = 0; f < F; f++) {
        int ns = 0;
        for (int s = 0; s < S; s++) {
            int has;
            double v = cc_train_kpi_spread(ds, train, s, f, &has);
            if (has)
                sd[ns++] = v;
        }
        double med = 0;
        if (ns) {
            qsort(sd, (size_t)ns, sizeof *sd, cmp_double);
            med = ns % 2 ? sd[ns / 2] : 0.5 * (sd[ns / 2 - 1] + sd[ns / 2]);
            /* Cells of one KPI on different scales (bytes of a macro cell beside a small
             * cell's): a floor set by the large half flattens every window of the small one
             * to ~0. Too low a floor only costs the large cells the floor's protection, so
             * the smallest non-constant cell bounds it. Cells within a factor
             * CC_TRAIN_FLOOR_SPREAD of it keep the median. */
            int lo = 0;
            while (lo < ns - 1 && sd[lo] <= 0)
                lo++;
            if (sd[lo] > 0 && med > CC_TRAIN_FLOOR_SPREAD * sd[lo])
                med = CC_TRAIN_FLOOR_SPREAD * sd[lo];
        }
        floor_out[f] = (float)(frac * med);
    }
    free(sd);
    return 0;
}

/* |mean| of KPI f's observed values in the training rows of series s (*has 0: none). */
static double series_level(const CcDataset *ds, const CcRange *train, int s, int f, int *has)
{
    const int F = ds->n_features;
    const CcSeries *se = &ds->series[s];
    int a = train[s].begin < 0 ? 0 : train[s].begin;
    int b = train[s].end > se->T ? se->T : train[s].end;
    double sum = 0;
    int64_t n = 0;
    for (int i = a; i < b; i++)
        if (!se->mask || se->mask[(size_t)i * F + f]) {
            sum += se->x[(size_t)i * F + f];
            n++;
        }
    *has = n > 0;
    return n ? fabs(sum / (double)n) : 0;
}

static double median_sorted(double *v, int n)
{
    if (!n)
        return 0;
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* model.md step 2's absolute term, in spreads, for a KPI fed multiplied by unit_scale */
static double resolution_ratio(double level, double spread, double unit_scale)
{
    return 1e-5 * (1 + level * unit_scale) / (spread * unit_scale);
}

int cc_train_resolution(const CcDataset *ds, const CcRange *train, CcKpiResolution *out)
{
    int F = ds->n_features, S = ds->n_series;
    double *lv = malloc((size_t)(S ? S : 1) * sizeof *lv),
           *sp = malloc((size_t)(S ? S : 1) * sizeof *sp);
    if (!lv || !sp) {
        free(lv);
        free(sp);
        return -ENOMEM;
    }
    for (int f = 0; f < F; f++) {
        int n = 0;
        for (int s = 0; s < S; s++) {
            int has;
            double level = series_level(ds, train, s, f, &has);
            if (has) {
                lv[n] = level;
                sp[n++] = cc_train_kpi_spread(ds, train, s, f, &has);
            }
        }
        CcKpiResolution *r = &out[f];
        r->level = median_sorted(lv, n);
        r->spread = median_sorted(sp, n);
        r->ratio = r->spread > 0 ? resolution_ratio(r->level, r->spread, 1) : 0;
        r->scale = 1;
        if (r->ratio <= CC_TRAIN_RESOLUTION_MAX)
            continue;
        /* the ratio falls with the scale towards 1e-5·level/spread: past the target there,
         * no scale reaches it */
        if (1e-5 * r->level >= CC_TRAIN_RESOLUTION_TARGET * r->spread) {
            r->scale = 0;
            continue;
        }
        double unit_scale = 10;
        while (resolution_ratio(r->level, r->spread, unit_scale) > CC_TRAIN_RESOLUTION_TARGET &&
               unit_scale < 1e300)
            unit_scale *= 10;
        r->scale = unit_scale < 1e300 ? unit_scale : 0;
    }
    free(lv);
    free(sp);
    return 0;
}

void cc_train_sd_spread(const CcDataset *ds, const CcRange *train, double *lo, double *hi)
{
    for (int f = 0; f < ds->n_features; f++) {
        lo[f] = INFINITY;
        hi[f] = 0;
        for (int s = 0; s < ds->n_series; s++) {
            int has;
            double v = series_sd(ds, train, s, f, &has);
            if (has && v > 0) {
                lo[f] = v < lo[f] ? v : lo[f];
                hi[f] = v > hi[f] ? v : hi[f];
            }
        }
        if (!(hi[f] > 0))
            lo[f] = hi[f] = 0;
    }
}

#define STATE_MAGIC "CCTRAIN2"

int cc_trainer_save_state(const CcTrainer *t, const char *path, const double *extra, int n_extra,
                          char *err, size_t errlen)
{
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "wb");
    if (!f)
        return cc_errf(err, errlen, -EIO, "cannot write %s", tmp);
    double ex[8] = {0};
    for (int i = 0; i < n_extra && i < 8; i++)
        ex[i] = extra[i];
    uint64_t np = t->m->n_params, has_ema = t->ema_w != NULL;
    int ok = fwrite(STATE_MAGIC, 8, 1, f) == 1 && fwrite(&np, 8, 1, f) == 1 &&
             fwrite(&t->step, 8, 1, f) == 1 && fwrite(&t->rng, 8, 1, f) == 1 &&
             fwrite(&has_ema, 8, 1, f) == 1 && fwrite(ex, sizeof ex, 1, f) == 1 &&
             fwrite(t->m->block, sizeof(float), np, f) == np &&
             fwrite(t->am, sizeof(float), np, f) == np &&
             fwrite(t->av, sizeof(float), np, f) == np &&
             (!has_ema || fwrite(t->ema_w, sizeof(float), np, f) == np);
    ok &= fclose(f) == 0;
    if (!ok || rename(tmp, path) != 0) {
        remove(tmp);
        return cc_errf(err, errlen, -EIO, "cannot write %s", path);
    }
    return 0;
}

int cc_trainer_load_state(CcTrainer *t, const char *path, double *extra, int n_extra, char *err,
                          size_t errlen)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return cc_errf(err, errlen, -EIO, "cannot open %s", path);
    char magic[8];
    uint64_t np = 0, rng, has_ema = 0;
    int64_t step;
    double ex[8];
    int ret = 0;
    if (fread(magic, 8, 1, f) != 1 || memcmp(magic, STATE_MAGIC, 8) || fread(&np, 8, 1, f) != 1 ||
        fread(&step, 8, 1, f) != 1 || fread(&rng, 8, 1, f) != 1 || fread(&has_ema, 8, 1, f) != 1 ||
        fread(ex, sizeof ex, 1, f) != 1) {
        ret = cc_errf(err, errlen, -EINVAL, "%s: not a cellcast optimiser state", path);
        goto done;
    }
    if (np != t->m->n_params) {
        ret = cc_errf(err, errlen, -EINVAL, "%s: %llu parameters, the model has %zu", path,
                      (unsigned long long)np, t->m->n_params);
        goto done;
    }
    if (has_ema != (t->ema_w != NULL)) {
        ret = cc_errf(err, errlen, -EINVAL,
                      "%s: saved %s weight averaging; resume with the same "
                      "--ema setting",
                      path, has_ema ? "with" : "without");
        goto done;
    }
    if (fread(t->m->block, sizeof(float), np, f) != np ||
        fread(t->am, sizeof(float), np, f) != np || fread(t->av, sizeof(float), np, f) != np ||
        (has_ema && fread(t->ema_w, sizeof(float), np, f) != np)) {
        ret = cc_errf(err, errlen, -EINVAL, "%s: truncated", path);
        goto done;
    }
    t->step = step;
    t->rng = rng;
    for (int i = 0; i < n_extra && i < 8; i++)
        extra[i] = ex[i];
done:
    fclose(f);
    return ret;
}
