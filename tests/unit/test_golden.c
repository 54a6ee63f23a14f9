/*
 * test_golden.c — the C engine against an independent reference.
 *
 * tests/ref/reference.py implements spec steps 1–6 from the spec alone in NumPy float64;
 * tests/ref/gen_golden.py (fixed seed) wrote tests/data/golden/:
 *   tiny.safetensors      random model F=3 P=4 N=5 M=22 d=16 H=2 L=2 dff=32 Hz=6,
 *                         S=900 s, tz_offset 3600 s, features prb,thr,users
 *   golden.json           the raw series (3 × 200 steps from p0 = 1900002) and, for 10 end
 *                         steps × 3 features, the reference's trace: token end steps,
 *                         token inputs, every layer's input/output z, attention weights,
 *                         mu, sigma, y (see gen_golden.py for the format)
 *   series.csv            the same series in `cellcast forward` input format
 *   series_forward.jsonl  y/mu/sigma of every row with a forecast (`forward --all`)
 *   tx3_r12.*, tx3_r40.*  two cellcast-tx/3 sets in the same formats (.safetensors, .json,
 *                         .csv, _forward.jsonl): the same hparams with linear_window 12
 *                         (inside the tx/2 ring of 25 steps) and 40 (the ring grows to 40),
 *                         per-KPI floors, calib.sigma_scale in [0.5, 2], a prb constant for
 *                         its first 40 steps (sigma is the floor) and linear cold starts
 *                         (fewer than R values); their cases also hold the linear path's
 *                         input r, their forward rows the served mean and sd.
 * Every test below runs on each of the three sets (one cmocka group per set).
 *
 * What is checked, with the largest error of each tensor printed:
 *   - the model loads through cc_model_open_file with the fixture's hyperparameters;
 *   - cc_ref_forward's trace tensor by tensor (tx/3: the linear input r too), and its
 *     -EAGAIN on cold start;
 *   - the engine (cc_engine_step one step at a time) against every row of
 *     series_forward.jsonl (tx/3: also the served mean and sd of cc_forecast_point, mean
 *     in units of sigma) and every fixture step, with F32, F16 and BF16 KV caches, while
 *     another cell with unrelated data joins the batch mid-way;
 *   - cc_cell_attention (keep_attention) against the fixture's current-token row.
 *
 * Tolerances. The reference is float64; C works in float32 (the engine in sgemm float
 * accumulation, cc_ref in double but on float inputs). Values are O(1) after LayerNorm and
 * the inputs are normalised, so float32 rounding (6e-8 relative) accumulated over dot
 * products of length ≤ 32 and 2 layers (LN gains up to ~1.9) gives errors of order 1e-6;
 * mu/sigma are stored as float, which shifts xn by ≤ 3e-8·|mu|/sigma (≈ 4e-7 for the thr
 * channel, mu ≈ 7e7, sigma ≈ 6e6). TOL = 1e-4 leaves ~100× margin yet catches any
 * structural mistake (a wrong mask, index or dropped term moves values by O(0.1) with these
 * random weights of scale 0.3 and random LayerNorm gains/biases). mu and sigma are compared
 * relatively (1e-6: float rounding is 6e-8). 16-bit KV caches round keys and values (|k|,
 * |v| ≲ 4) to 11 (F16) or 8 (BF16) significant bits, i.e. relative 2^-11 ≈ 4.9e-4 and
 * 2^-8 ≈ 3.9e-3 per element; through attention, the output projection and two post-LN
 * layers (gains up to ~1.9) that is ~1e-3 (F16) and ~1e-2 (BF16) on y and the attention
 * weights, so TOL_F16 = 5e-3 and TOL_BF16 = 4e-2 (measured on the tx/2 fixtures: F16 7e-4,
 * BF16 5.5e-3; F32 2e-6; on tx3_r40, whose constant prb makes |xn| larger: F16 2.1e-3, BF16
 * 1.7e-2, F32 6e-6 — the maxima are printed on every run). The served mean is compared in
 * units of sigma and the sd relatively, with y's tolerance (both move with y).
 *
 * cc_cell_attention's weights are packed (L, H, T) with T = n_tokens, like the trace's
 * (L, H, T, T); its last row (query = current token) is what the engine keeps.
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
#include <jansson.h>

#include "cc_engine.h"
#include "cc_model.h"
#include "cc_ref.h"
#include "testlib.h"

#define TOL 1e-4
#define TOL_REL_NORM 1e-6
#define TOL_F16 5e-3
#define TOL_BF16 4e-2

typedef struct Case {
    int64_t t;
    int f, valid, n_tokens;
    int64_t e;
    int64_t *token_end;
    double *tokens_in, *z, *att, *y;
    double *lin_in; ///< (R) tx/3 only
    double mu, sigma;
} Case;

typedef struct Fwd {
    int64_t ts;
    double *y, *mu, *sigma;
    double *mean, *sd; ///< (F, HZ) tx/3 sets only
} Fwd;

/* File names of one fixture set, in TL_GOLDEN_DIR. */
typedef struct FixtureSet {
    const char *model, *json, *csv, *fwd;
} FixtureSet;

static const FixtureSet set_tx2 = {"tiny.safetensors", "golden.json", "series.csv",
                                   "series_forward.jsonl"};
static const FixtureSet set_r12 = {"tx3_r12.safetensors", "tx3_r12.json", "tx3_r12.csv",
                                   "tx3_r12_forward.jsonl"};
static const FixtureSet set_r40 = {"tx3_r40.safetensors", "tx3_r40.json", "tx3_r40.csv",
                                   "tx3_r40_forward.jsonl"};

static FILE *open_fixture(const char *name)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", TL_GOLDEN_DIR, name);
    return fopen(path, "r");
}

typedef struct Golden {
    const FixtureSet *set;
    CcModel *model;
    int F, P, N, M, D, H, L, FF, HZ, R;
    int64_t S, tz, p0;
    int T;         ///< steps in the series
    float *series; ///< (F, T)
    Case *cases;
    int n_cases;
    Fwd *fwd; ///< expected `forward --all` rows
    int n_fwd;
} Golden;

/* Largest error of one tensor kind over all comparisons, and where it happened. */
typedef struct MaxErr {
    const char *name;
    double err;
    int64_t t;
    int f;
} MaxErr;

static void maxerr_add(MaxErr *m, double err, int64_t t, int f)
{
    if (err > m->err || isnan(err)) {
        m->err = err;
        m->t = t;
        m->f = f;
    }
}

static void maxerr_print(const char *what, const MaxErr *m)
{
    printf("golden %-22s %-10s max |err| = %.3e  (t = %lld, f = %d)\n", what, m->name, m->err,
           (long long)m->t, m->f);
}

/* ------------------------------------------------------------------------------------- */
/* fixture loading                                                                        */

static int json_int(json_t *obj, const char *key)
{
    json_t *v = json_object_get(obj, key);
    assert_non_null(v);
    assert_true(json_is_integer(v));
    return (int)json_integer_value(v);
}

static int64_t json_i64(json_t *obj, const char *key)
{
    json_t *v = json_object_get(obj, key);
    assert_non_null(v);
    assert_true(json_is_integer(v));
    return (int64_t)json_integer_value(v);
}

/* Reads a flat numeric array of exactly n entries into a new double array. */
static double *json_doubles(json_t *arr, size_t n)
{
    assert_non_null(arr);
    assert_true(json_is_array(arr));
    assert_int_equal(json_array_size(arr), n);
    double *out = malloc((n ? n : 1) * sizeof *out);
    assert_non_null(out);
    for (size_t i = 0; i < n; i++) {
        json_t *v = json_array_get(arr, i);
        assert_true(json_is_number(v));
        out[i] = json_number_value(v);
    }
    return out;
}

static void load_cases(Golden *g, json_t *root)
{
    json_t *cases = json_object_get(root, "cases");
    assert_true(json_is_array(cases));
    g->n_cases = (int)json_array_size(cases);
    assert_true(g->n_cases > 0);
    g->cases = calloc(g->n_cases, sizeof *g->cases);
    assert_non_null(g->cases);
    for (int i = 0; i < g->n_cases; i++) {
        json_t *c = json_array_get(cases, i);
        Case *k = &g->cases[i];
        k->t = json_i64(c, "t");
        k->f = json_int(c, "f");
        k->valid = json_is_true(json_object_get(c, "valid"));
        if (!k->valid)
            continue;
        k->e = json_i64(c, "e");
        int n1 = k->n_tokens = json_int(c, "n_tokens");
        assert_true(n1 >= 2 && n1 <= g->N + 1);
        json_t *te = json_object_get(c, "token_end");
        assert_int_equal(json_array_size(te), n1);
        k->token_end = malloc(n1 * sizeof *k->token_end);
        assert_non_null(k->token_end);
        for (int j = 0; j < n1; j++)
            k->token_end[j] = (int64_t)json_integer_value(json_array_get(te, j));
        k->tokens_in = json_doubles(json_object_get(c, "tokens_in"), (size_t)n1 * (g->P + 4));
        k->z = json_doubles(json_object_get(c, "z"), (size_t)(g->L + 1) * n1 * g->D);
        k->att = json_doubles(json_object_get(c, "att"), (size_t)g->L * g->H * n1 * n1);
        k->y = json_doubles(json_object_get(c, "y"), (size_t)g->HZ * 2);
        k->mu = json_number_value(json_object_get(c, "mu"));
        k->sigma = json_number_value(json_object_get(c, "sigma"));
        if (g->R)
            k->lin_in = json_doubles(json_object_get(c, "lin_in"), (size_t)g->R);
    }
}

static void load_forward_rows(Golden *g)
{
    FILE *fp = open_fixture(g->set->fwd);
    assert_non_null(fp);
    char *line = NULL;
    size_t cap = 0;
    int n = 0;
    g->fwd = calloc(g->T, sizeof *g->fwd);
    assert_non_null(g->fwd);
    while (getline(&line, &cap, fp) > 0) {
        json_error_t jerr;
        json_t *o = json_loads(line, 0, &jerr);
        assert_non_null(o);
        assert_true(n < g->T);
        Fwd *r = &g->fwd[n++];
        r->ts = json_i64(o, "ts");
        r->y = json_doubles(json_object_get(o, "y"), (size_t)g->F * g->HZ * 2);
        r->mu = json_doubles(json_object_get(o, "mu"), g->F);
        r->sigma = json_doubles(json_object_get(o, "sigma"), g->F);
        if (g->R) {
            r->mean = json_doubles(json_object_get(o, "mean"), (size_t)g->F * g->HZ);
            r->sd = json_doubles(json_object_get(o, "sd"), (size_t)g->F * g->HZ);
        }
        json_decref(o);
    }
    free(line);
    fclose(fp);
    g->n_fwd = n;
    assert_true(n > 0);
}

/* series.csv must hold exactly golden.json's series (it is what `cellcast forward` reads). */
static void check_csv(const Golden *g)
{
    FILE *fp = open_fixture(g->set->csv);
    assert_non_null(fp);
    char line[1024];
    assert_non_null(fgets(line, sizeof line, fp));
    char header[256] = "ts";
    for (int f = 0; f < g->F; f++) {
        strcat(header, ",");
        strcat(header, g->model->hp.features[f]);
    }
    strcat(header, "\n");
    assert_string_equal(line, header);
    int row = 0;
    while (fgets(line, sizeof line, fp)) {
        assert_true(row < g->T);
        char *s = line, *end;
        long long ts = strtoll(s, &end, 10);
        assert_int_equal(ts, (g->p0 + row) * g->S);
        for (int f = 0; f < g->F; f++) {
            assert_int_equal(*end, ',');
            s = end + 1;
            float v = (float)strtod(s, &end);
            assert_true(end != s);
            assert_true(v == g->series[(size_t)f * g->T + row]);
        }
        row++;
    }
    fclose(fp);
    assert_int_equal(row, g->T);
}

static int setup_set(void **state, const FixtureSet *set)
{
    Golden *g = calloc(1, sizeof *g);
    if (!g)
        return -1;
    *state = g;
    g->set = set;
    char err[256] = "", path[512];
    snprintf(path, sizeof path, "%s/%s", TL_GOLDEN_DIR, set->model);
    int ret = cc_model_open_file(&g->model, path, err, sizeof err);
    if (ret < 0) {
        fprintf(stderr, "cc_model_open_file(%s): %s (%d)\n", set->model, err, ret);
        return -1;
    }
    json_error_t jerr;
    snprintf(path, sizeof path, "%s/%s", TL_GOLDEN_DIR, set->json);
    json_t *root = json_load_file(path, 0, &jerr);
    if (!root) {
        fprintf(stderr, "%s: %s (line %d)\n", set->json, jerr.text, jerr.line);
        return -1;
    }
    json_t *hp = json_object_get(root, "hparams");
    g->F = json_int(hp, "F");
    g->P = json_int(hp, "P");
    g->N = json_int(hp, "N");
    g->M = json_int(hp, "M");
    g->D = json_int(hp, "d");
    g->H = json_int(hp, "H");
    g->L = json_int(hp, "L");
    g->FF = json_int(hp, "dff");
    g->HZ = json_int(hp, "horizon");
    g->S = json_i64(hp, "step_seconds");
    g->tz = json_i64(hp, "tz_offset_s");
    g->R = json_object_get(hp, "R") ? json_int(hp, "R") : 0; /* tx/2 sets have none */
    g->p0 = json_i64(root, "p0");
    g->T = json_int(root, "n_steps");
    json_t *series = json_object_get(root, "series");
    assert_int_equal(json_array_size(series), g->F);
    g->series = malloc((size_t)g->F * g->T * sizeof *g->series);
    assert_non_null(g->series);
    for (int f = 0; f < g->F; f++) {
        double *row = json_doubles(json_array_get(series, f), g->T);
        for (int i = 0; i < g->T; i++)
            g->series[(size_t)f * g->T + i] = (float)row[i];
        free(row);
    }
    load_cases(g, root);
    json_decref(root);
    load_forward_rows(g);
    return 0;
}

static int setup_tx2(void **state) { return setup_set(state, &set_tx2); }
static int setup_r12(void **state) { return setup_set(state, &set_r12); }
static int setup_r40(void **state) { return setup_set(state, &set_r40); }

static int teardown(void **state)
{
    Golden *g = *state;
    if (!g)
        return 0;
    for (int i = 0; i < g->n_cases; i++) {
        Case *k = &g->cases[i];
        free(k->token_end);
        free(k->tokens_in);
        free(k->z);
        free(k->att);
        free(k->y);
        free(k->lin_in);
    }
    for (int i = 0; i < g->n_fwd; i++) {
        free(g->fwd[i].y);
        free(g->fwd[i].mu);
        free(g->fwd[i].sigma);
        free(g->fwd[i].mean);
        free(g->fwd[i].sd);
    }
    free(g->cases);
    free(g->fwd);
    free(g->series);
    cc_model_close(&g->model);
    free(g);
    return 0;
}

/* ------------------------------------------------------------------------------------- */
/* tests                                                                                  */

static void test_model_hparams(void **state)
{
    Golden *g = *state;
    const CcHparams *hp = &g->model->hp;
    assert_int_equal(hp->n_features, g->F);
    assert_int_equal(hp->patch_len, g->P);
    assert_int_equal(hp->n_patches, g->N);
    assert_int_equal(hp->norm_window, g->M);
    assert_int_equal(hp->d_model, g->D);
    assert_int_equal(hp->n_heads, g->H);
    assert_int_equal(hp->n_layers, g->L);
    assert_int_equal(hp->d_ff, g->FF);
    assert_int_equal(hp->horizon, g->HZ);
    assert_int_equal(hp->step_seconds, g->S);
    assert_int_equal(hp->tz_offset_s, g->tz);
    assert_int_equal(hp->linear_window, g->R);
    assert_string_equal(cc_hparams_format(hp), g->R ? CC_FORMAT_TX3 : CC_FORMAT_TX2);
    assert_string_equal(hp->features[0], "prb");
    assert_string_equal(hp->features[1], "thr");
    assert_string_equal(hp->features[2], "users");
    assert_memory_equal(hp->name, "golden-tiny", 11);
    check_csv(g);
}

static double rel_err(double got, double want, double scale) { return fabs(got - want) / scale; }

/* cc_ref_forward's trace, tensor by tensor. One trace is reused over all cases (as a
 * caller would), so stale entries from a larger earlier case would show up. */
static void test_ref_trace(void **state)
{
    Golden *g = *state;
    const int IN = g->P + 4;
    MaxErr e_tok = {"tokens_in", 0, 0, 0}, e_y = {"y", 0, 0, 0};
    MaxErr e_mu = {"mu (rel)", 0, 0, 0}, e_sd = {"sigma(rel)", 0, 0, 0};
    MaxErr e_lin = {"lin_in", 0, 0, 0};
    MaxErr e_z[CC_MAX_LAYERS + 1], e_att[CC_MAX_LAYERS];
    char names[2 * CC_MAX_LAYERS + 1][24];
    for (int l = 0; l <= g->L; l++) {
        snprintf(names[l], sizeof names[l], "z[%d]", l);
        e_z[l] = (MaxErr){names[l], 0, 0, 0};
    }
    for (int l = 0; l < g->L; l++) {
        snprintf(names[g->L + 1 + l], sizeof names[0], "att[%d]", l);
        e_att[l] = (MaxErr){names[g->L + 1 + l], 0, 0, 0};
    }
    CcRefTrace tr;
    assert_int_equal(cc_ref_trace_open(&tr, &g->model->hp), 0);
    float y[2 * 64], mu, sigma;
    int n_valid = 0, n_cold = 0, n_masked_nonzero = 0;
    for (int i = 0; i < g->n_cases; i++) {
        const Case *k = &g->cases[i];
        const float *x = g->series + (size_t)k->f * g->T;
        int ret = cc_ref_forward(g->model, k->f, x, g->p0, k->t, y, &mu, &sigma, &tr);
        if (!k->valid) {
            assert_int_equal(ret, -EAGAIN);
            n_cold++;
            continue;
        }
        assert_int_equal(ret, 0);
        n_valid++;
        const int T = k->n_tokens;
        assert_int_equal(tr.n_tokens, T);
        for (int j = 0; j < T; j++)
            assert_int_equal(tr.token_end[j], k->token_end[j]);
        for (int j = 0; j < T * IN; j++)
            maxerr_add(&e_tok, fabs(tr.tokens_in[j] - k->tokens_in[j]), k->t, k->f);
        for (int l = 0; l <= g->L; l++)
            for (int j = 0; j < T * g->D; j++)
                maxerr_add(&e_z[l],
                           fabs(tr.z[(size_t)l * T * g->D + j] - k->z[(size_t)l * T * g->D + j]),
                           k->t, k->f);
        for (int l = 0; l < g->L; l++)
            for (int j = 0; j < g->H * T * T; j++) {
                double got = tr.att[(size_t)l * g->H * T * T + j];
                double want = k->att[(size_t)l * g->H * T * T + j];
                maxerr_add(&e_att[l], fabs(got - want), k->t, k->f);
                n_masked_nonzero += want == 0.0 && got != 0.0;
            }
        for (int j = 0; j < 2 * g->HZ; j++)
            maxerr_add(&e_y, fabs(y[j] - k->y[j]), k->t, k->f);
        for (int j = 0; j < g->R; j++)
            maxerr_add(&e_lin, fabs(tr.lin_in[j] - k->lin_in[j]), k->t, k->f);
        maxerr_add(&e_mu, rel_err(mu, k->mu, fmax(fabs(k->mu), k->sigma)), k->t, k->f);
        maxerr_add(&e_sd, rel_err(sigma, k->sigma, k->sigma), k->t, k->f);
    }
    cc_ref_trace_close(&tr);
    printf("golden %s cc_ref_forward: %d cases with a forecast, %d cold-start cases, %d masked "
           "attention entries not 0\n",
           g->set->model, n_valid, n_cold, n_masked_nonzero);
    maxerr_print("cc_ref_forward", &e_tok);
    for (int l = 0; l <= g->L; l++)
        maxerr_print("cc_ref_forward", &e_z[l]);
    for (int l = 0; l < g->L; l++)
        maxerr_print("cc_ref_forward", &e_att[l]);
    maxerr_print("cc_ref_forward", &e_mu);
    maxerr_print("cc_ref_forward", &e_sd);
    maxerr_print("cc_ref_forward", &e_y);
    if (g->R)
        maxerr_print("cc_ref_forward", &e_lin);
    assert_true(n_valid > 0 && n_cold > 0);
    assert_true(e_lin.err <= TOL);
    assert_int_equal(n_masked_nonzero, 0);
    assert_true(e_tok.err <= TOL);
    for (int l = 0; l <= g->L; l++)
        assert_true(e_z[l].err <= TOL);
    for (int l = 0; l < g->L; l++)
        assert_true(e_att[l].err <= TOL);
    assert_true(e_mu.err <= TOL_REL_NORM);
    assert_true(e_sd.err <= TOL_REL_NORM);
    assert_true(e_y.err <= TOL);
}

static const char *kv_name(enum CcKvType kv)
{
    return kv == CC_KV_F32 ? "F32" : kv == CC_KV_F16 ? "F16" : "BF16";
}

/* Streams the series through the engine one step at a time. Cell 0 carries the golden
 * series; cell 1 (unrelated data, 1e4× larger, joining 37 steps later, so another patch
 * alignment and a different cold start) shares every batch from then on. */
static void stream_engine(Golden *g, enum CcKvType kv, double tol)
{
    CcEngineSettings s;
    cc_engine_default_settings(&s);
    s.kv_type = kv;
    s.keep_attention = 1;
    CcEngine *eng = NULL;
    CcCell *cell = NULL, *other = NULL;
    assert_int_equal(cc_engine_open(&eng, g->model, &s, NULL, 0), 0);
    assert_int_equal(cc_cell_open(&cell, eng), 0);
    assert_int_equal(cc_cell_open(&other, eng), 0);

    const int F = g->F, HZ = g->HZ, N = g->N, L = g->L, H = g->H;
    MaxErr e_y = {"y", 0, 0, 0}, e_mu = {"mu (rel)", 0, 0, 0}, e_sd = {"sigma(rel)", 0, 0, 0};
    MaxErr e_cy = {"y@cases", 0, 0, 0}, e_att = {"attention", 0, 0, 0};
    MaxErr e_mean = {"mean/sigma", 0, 0, 0}, e_srv = {"sd (rel)", 0, 0, 0};
    float *w = malloc((size_t)L * H * (N + 1) * sizeof *w);
    int64_t *ends = malloc((size_t)(N + 1) * sizeof *ends);
    assert_non_null(w);
    assert_non_null(ends);
    int row = 0, n_case = 0, n_att = 0;
    const int join = 37;
    for (int i = 0; i < g->T; i++) {
        const int64_t t = g->p0 + i;
        float v[CC_MAX_FEATURES], v2[CC_MAX_FEATURES];
        for (int f = 0; f < F; f++) {
            v[f] = g->series[(size_t)f * g->T + i];
            v2[f] = 1e4f * (float)(1.5 + sin(0.37 * i + f)) + (float)(i % 7);
        }
        CcStepInput in[2] = {{cell, t, v}, {other, t, v2}};
        int status[2] = {-1, -1};
        int n_in = i >= join ? 2 : 1;
        assert_int_equal(cc_engine_step(eng, in, n_in, status), 0);
        for (int j = 0; j < n_in; j++)
            assert_int_equal(status[j], 0);

        CcForecast fc;
        cc_cell_forecast(cell, &fc);
        const int has = row < g->n_fwd && g->fwd[row].ts == t * g->S;
        assert_int_equal(fc.valid, has);
        if (has) {
            const Fwd *r = &g->fwd[row++];
            assert_int_equal(fc.step, t);
            assert_int_equal(fc.n_features, F);
            assert_int_equal(fc.horizon, HZ);
            for (int j = 0; j < F * HZ * 2; j++)
                maxerr_add(&e_y, fabs(fc.y[j] - r->y[j]), t, j / (HZ * 2));
            for (int f = 0; f < F; f++) {
                maxerr_add(&e_mu, rel_err(fc.mu[f], r->mu[f], fmax(fabs(r->mu[f]), r->sigma[f])), t,
                           f);
                maxerr_add(&e_sd, rel_err(fc.sigma[f], r->sigma[f], r->sigma[f]), t, f);
                for (int k = 0; k < HZ && r->mean; k++) {
                    double mean, sd, wm = r->mean[f * HZ + k], ws = r->sd[f * HZ + k];
                    cc_forecast_point(&fc, f, k, &mean, &sd);
                    maxerr_add(&e_mean, rel_err(mean, wm, r->sigma[f]), t, f);
                    maxerr_add(&e_srv, rel_err(sd, ws, ws), t, f);
                }
            }
        }
        for (int c = 0; c < g->n_cases; c++) {
            const Case *k = &g->cases[c];
            if (k->t != t)
                continue;
            assert_int_equal(fc.valid, k->valid);
            int nt = 0;
            int ret = cc_cell_attention(cell, k->f, w, ends, &nt);
            if (!k->valid) {
                assert_int_equal(ret, -EAGAIN);
                continue;
            }
            n_case++;
            for (int j = 0; j < 2 * HZ; j++)
                maxerr_add(&e_cy, fabs(fc.y[(size_t)k->f * 2 * HZ + j] - k->y[j]), t, k->f);
            assert_int_equal(ret, 0);
            const int T = k->n_tokens;
            assert_int_equal(nt, T);
            for (int j = 0; j < T; j++)
                assert_int_equal(ends[j], k->token_end[j]);
            /* fixture row T-1 of att (L, H, T, T) is the current token's query */
            for (int l = 0; l < L; l++)
                for (int h = 0; h < H; h++)
                    for (int j = 0; j < T; j++) {
                        double want = k->att[(((size_t)l * H + h) * T + (T - 1)) * T + j];
                        double got = w[((size_t)l * H + h) * T + j]; /* packed (L, H, T) */
                        maxerr_add(&e_att, fabs(got - want), t, k->f);
                    }
            n_att++;
        }
    }
    assert_int_equal(row, g->n_fwd);
    char what[64];
    snprintf(what, sizeof what, "%.20s kv=%s", g->set->model, kv_name(kv));
    printf("golden %s: %d rows, %d fixture cases, %d attention rows compared\n", what, row, n_case,
           n_att);
    maxerr_print(what, &e_y);
    maxerr_print(what, &e_cy);
    maxerr_print(what, &e_mu);
    maxerr_print(what, &e_sd);
    maxerr_print(what, &e_att);
    if (g->R) {
        maxerr_print(what, &e_mean);
        maxerr_print(what, &e_srv);
    }
    assert_true(n_case > 0 && n_att > 0);
    assert_true(e_mean.err <= tol && e_srv.err <= tol);
    assert_true(e_y.err <= tol);
    assert_true(e_cy.err <= tol);
    assert_true(e_mu.err <= TOL_REL_NORM);
    assert_true(e_sd.err <= TOL_REL_NORM);
    assert_true(e_att.err <= tol);
    free(w);
    free(ends);
    cc_cell_close(&cell);
    cc_cell_close(&other);
    cc_engine_close(&eng);
}

static void test_engine_f32(void **state) { stream_engine(*state, CC_KV_F32, TOL); }
static void test_engine_f16(void **state) { stream_engine(*state, CC_KV_F16, TOL_F16); }
static void test_engine_bf16(void **state) { stream_engine(*state, CC_KV_BF16, TOL_BF16); }

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_model_hparams), cmocka_unit_test(test_ref_trace),
        cmocka_unit_test(test_engine_f32),    cmocka_unit_test(test_engine_f16),
        cmocka_unit_test(test_engine_bf16),
    };
    int failed = cmocka_run_group_tests_name("cellcast-tx/2 fixtures", tests, setup_tx2, teardown);
    failed += cmocka_run_group_tests_name("cellcast-tx/3 R = 12", tests, setup_r12, teardown);
    failed += cmocka_run_group_tests_name("cellcast-tx/3 R = 40", tests, setup_r40, teardown);
    return failed;
}
