/*
 * cc_ref.c — direct evaluation of spec steps 1–6 for one channel at one step: naive loops,
 * double accumulation, every token recomputed from the raw series; tx/3's floor and linear
 * path when the model has them (linear_window > 0). The oracle of the
 * engine's incremental path; slow on purpose and written for reading.
 */
#include "cc_ref.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cc_kernels.h"

int cc_ref_trace_open(CcRefTrace *tr, const CcHparams *hp)
{
    size_t T = (size_t)hp->n_patches + 1, D = hp->d_model, L = hp->n_layers;
    memset(tr, 0, sizeof *tr);
    tr->token_end = calloc(T, sizeof *tr->token_end);
    tr->tokens_in = calloc(T * (hp->patch_len + 4), sizeof(float));
    tr->z = calloc((L + 1) * T * D, sizeof(float));
    tr->att = calloc(L * hp->n_heads * T * T, sizeof(float));
    tr->lin_in = hp->linear_window > 0 ? calloc((size_t)hp->linear_window, sizeof(float)) : NULL;
    if (!tr->token_end || !tr->tokens_in || !tr->z || !tr->att ||
        (hp->linear_window > 0 && !tr->lin_in)) {
        cc_ref_trace_close(tr);
        return -ENOMEM;
    }
    return 0;
}

void cc_ref_trace_close(CcRefTrace *tr)
{
    free(tr->token_end);
    free(tr->tokens_in);
    free(tr->z);
    free(tr->att);
    free(tr->lin_in);
    memset(tr, 0, sizeof *tr);
}

/* out (D_out) = W (D_out, D_in) · x + b, double accumulation. */
static void matvec(double *out, const float *W, const float *b, const double *x, int d_out,
                   int d_in)
{
    for (int o = 0; o < d_out; o++) {
        double acc = b ? b[o] : 0.0;
        for (int i = 0; i < d_in; i++)
            acc += (double)W[(size_t)o * d_in + i] * x[i];
        out[o] = acc;
    }
}

static void layernorm(double *x, const float *g, const float *b, int D)
{
    double mean = 0, var = 0;
    for (int i = 0; i < D; i++)
        mean += x[i];
    mean /= D;
    for (int i = 0; i < D; i++)
        var += (x[i] - mean) * (x[i] - mean);
    var /= D;
    for (int i = 0; i < D; i++)
        x[i] = g[i] * (x[i] - mean) / sqrt(var + 1e-5) + b[i];
}

int cc_ref_forward(const CcModel *m, int f, const float *x, int64_t p0, int64_t t, float *y,
                   float *mu_out, float *sigma_out, CcRefTrace *trace)
{
    const CcHparams *hp = &m->hp;
    const CcParams *w = &m->w;
    const int P = hp->patch_len, N = hp->n_patches, M = hp->norm_window, D = hp->d_model;
    const int H = hp->n_heads, DK = D / H, L = hp->n_layers, FF = hp->d_ff, IN = P + 4;
    const int HZ2 = 2 * hp->horizon;
    int ret = -EINVAL;
    double *z = NULL, *qkv = NULL, *tmp = NULL, *hid = NULL, *att = NULL;

    if (f < 0 || f >= hp->n_features || t < p0 || p0 < 0)
        return -EINVAL;
    /* 1. Boundary: the newest complete patch ends at e. */
    int64_t e = ((t + 1) / P) * P - 1;
    if (e - P + 1 < p0)
        return -EAGAIN;
    /* 2. Normalisation over the last M values up to e that exist. */
    int64_t lo = e - M + 1 > p0 ? e - M + 1 : p0;
    double s = 0, ss = 0;
    for (int64_t p = lo; p <= e; p++)
        s += x[p - p0];
    double mu = s / (double)(e - lo + 1);
    for (int64_t p = lo; p <= e; p++)
        ss += (x[p - p0] - mu) * (x[p - p0] - mu);
    double sd = sqrt(ss / (double)(e - lo + 1)), sigma;
    if (hp->linear_window > 0) { /* tx/3: the KPI's floor under the window's spread */
        double fl = w->norm_floor[f];
        sigma = sqrt(sd * sd + fl * fl) + 1e-5 * (1 + fabs(mu));
    } else {
        sigma = sd + 1e-5 * (1 + fabs(mu));
    }
    /* 4. Tokens: n cached patches ending at e-(n-1-i)P, then the current one ending at t. */
    int64_t avail = (e - P + 1 - p0) / P + 1;
    int n = avail < N ? (int)avail : N, T = n + 1;

    ret = -ENOMEM;
    z = calloc((size_t)T * D, sizeof *z);
    qkv = calloc((size_t)T * 3 * D, sizeof *qkv);
    tmp = calloc((size_t)T * D, sizeof *tmp);
    hid = calloc((size_t)FF > (size_t)IN ? (size_t)FF : (size_t)IN, sizeof *hid);
    att = calloc((size_t)T, sizeof *att);
    if (!z || !qkv || !tmp || !hid || !att)
        goto end;

    for (int i = 0; i < T; i++) {
        int64_t q = i < n ? e - (int64_t)(n - 1 - i) * P : t;
        double in[CC_MAX_PATCH_LEN + 4];
        float tau[4], pe[CC_MAX_D_MODEL];
        for (int j = 0; j < P; j++)
            in[j] = ((double)x[q - P + 1 + j - p0] - mu) / sigma;
        cc_time_features(tau, q, hp->step_seconds, hp->tz_offset_s);
        for (int j = 0; j < 4; j++)
            in[P + j] = tau[j];
        /* token inputs are float in every implementation: round them here too */
        for (int j = 0; j < IN; j++)
            in[j] = (float)in[j];
        cc_pos_encoding(pe, (double)q / P, D);
        matvec(&z[(size_t)i * D], w->embed_w, w->embed_b, in, D, IN);
        for (int d = 0; d < D; d++)
            z[(size_t)i * D + d] += (double)w->chan[(size_t)f * D + d] + pe[d];
        if (trace) {
            trace->token_end[i] = q;
            for (int j = 0; j < IN; j++)
                trace->tokens_in[(size_t)i * IN + j] = (float)in[j];
        }
    }
    if (trace) {
        trace->n_tokens = T;
        /* masked entries are 0 even when the caller reuses a trace */
        memset(trace->att, 0, (size_t)L * H * T * T * sizeof(float));
        for (size_t k = 0; k < (size_t)T * D; k++)
            trace->z[k] = (float)z[k];
    }
    /* 5. Post-LN layers. Cached token i attends to 0..i; the current one to all. */
    for (int l = 0; l < L; l++) {
        const float *Wqkv = w->qkv_w + (size_t)l * 3 * D * D, *bqkv = w->qkv_b + (size_t)l * 3 * D;
        for (int i = 0; i < T; i++)
            matvec(&qkv[(size_t)i * 3 * D], Wqkv, bqkv, &z[(size_t)i * D], 3 * D, D);
        for (int i = 0; i < T; i++) {
            int nkeys = i < n ? i + 1 : T;
            for (int h = 0; h < H; h++) {
                const double *qv = &qkv[(size_t)i * 3 * D + h * DK];
                double mx = -INFINITY, sum = 0;
                for (int j = 0; j < nkeys; j++) {
                    const double *kv = &qkv[(size_t)j * 3 * D + D + h * DK];
                    double dot = 0;
                    for (int c = 0; c < DK; c++)
                        dot += qv[c] * kv[c];
                    att[j] = dot / sqrt((double)DK);
                    mx = att[j] > mx ? att[j] : mx;
                }
                for (int j = 0; j < nkeys; j++)
                    sum += (att[j] = exp(att[j] - mx));
                for (int c = 0; c < DK; c++) {
                    double acc = 0;
                    for (int j = 0; j < nkeys; j++)
                        acc += att[j] / sum * qkv[(size_t)j * 3 * D + 2 * D + h * DK + c];
                    tmp[(size_t)i * D + h * DK + c] = acc;
                }
                if (trace)
                    for (int j = 0; j < nkeys; j++)
                        trace->att[(((size_t)l * H + h) * T + i) * T + j] = (float)(att[j] / sum);
            }
        }
        for (int i = 0; i < T; i++) {
            double a[CC_MAX_D_MODEL], *zi = &z[(size_t)i * D];
            matvec(a, w->o_w + (size_t)l * D * D, w->o_b + (size_t)l * D, &tmp[(size_t)i * D], D,
                   D);
            for (int d = 0; d < D; d++)
                zi[d] += a[d];
            layernorm(zi, w->ln1_g + (size_t)l * D, w->ln1_b + (size_t)l * D, D);
            matvec(hid, w->up_w + (size_t)l * FF * D, w->up_b + (size_t)l * FF, zi, FF, D);
            for (int k = 0; k < FF; k++)
                hid[k] = hid[k] > 0 ? hid[k] : 0;
            matvec(a, w->down_w + (size_t)l * D * FF, w->down_b + (size_t)l * D, hid, D, FF);
            for (int d = 0; d < D; d++)
                zi[d] += a[d];
            layernorm(zi, w->ln2_g + (size_t)l * D, w->ln2_b + (size_t)l * D, D);
        }
        if (trace)
            for (size_t k = 0; k < (size_t)T * D; k++)
                trace->z[(size_t)(l + 1) * T * D + k] = (float)z[k];
    }
    /* 6. Head on the current token. */
    {
        double out[2 * CC_MAX_HORIZON];
        matvec(out, w->head_w, w->head_b, &z[(size_t)n * D], HZ2, D);
        /* tx/3 linear path: the change from xn_t of the last R values, steps before p0
         * standing in as xn_{p0} */
        for (int k = 0; k < hp->horizon && hp->linear_window > 0; k++) {
            const int R = hp->linear_window;
            double xt = (x[t - p0] - mu) / sigma, acc = w->lin_b[k] + xt;
            for (int i = 0; i < R; i++) {
                int64_t p = t - R + 1 + i;
                double xp = ((double)x[(p < p0 ? p0 : p) - p0] - mu) / sigma;
                acc += (double)w->lin_w[(size_t)k * R + i] * (xp - xt);
                if (trace && trace->lin_in && k == 0)
                    trace->lin_in[i] = (float)(xp - xt);
            }
            out[2 * k] += acc;
        }
        for (int k = 0; k < HZ2; k++)
            y[k] = (float)out[k];
    }
    *mu_out = (float)mu;
    *sigma_out = (float)sigma;
    ret = 0;
end:
    free(z);
    free(qkv);
    free(tmp);
    free(hid);
    free(att);
    return ret;
}
