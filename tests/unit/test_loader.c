/*
 * test_loader.c — safetensors reader/writer and cellcast-tx/2 and tx/3 model files: bit-exact
 * round trip, F16/BF16 files, the spec's tensor names mapped onto CcParams, and one test per class
 * of broken file, each checking the return code AND that the message names the problem
 * (and the tensor). Broken files are built in memory from a valid one.
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
#include <dirent.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cc_kernels.h"
#include "cc_model.h"
#include "cc_safetensors.h"
#include "testlib.h"

#define ERRLEN 512

/* ------------------------------------------------------------------------- helpers */

static void assert_has(const char *msg, const char *needle)
{
    if (!strstr(msg, needle))
        fail_msg("message \"%s\" does not contain \"%s\"", msg, needle);
}

/* The fuzz seeds' shape: F=2, P=4, N=3, M=8, d=8, H=2, L=1, dff=8, horizon=2. */
static void tiny_hparams(CcHparams *hp, int n_layers)
{
    tl_hparams_tiny(hp);
    hp->n_layers = n_layers;
    hp->step_seconds = 900;
    hp->tz_offset_s = -3600;
    memset(hp->features, 0, sizeof hp->features);
    strcpy(hp->features[0], "prb_util");
    strcpy(hp->features[1], "dl_bytes");
}

/* A random model whose every parameter (biases and LN too) is a distinct random value. */
static CcModel *random_model(const CcHparams *hp, uint64_t seed)
{
    CcModel *m = NULL;
    tl_model_open(&m, hp, seed);
    uint64_t s = seed * 2654435761u + 1;
    for (size_t i = 0; i < m->n_params; i++)
        m->block[i] += (float)(tl_rng_uniform(&s) - 0.5) * 0.25f;
    return m;
}

/* The spec's table, written independently of cc_model_io.c: names -> CcParams pointers. */
typedef struct Ent {
    char name[64];
    const float *data;
    int ndim;
    int64_t shape[2];
} Ent;

static void ent(Ent *e, int *n, const char *name, const float *data, int64_t d0, int64_t d1)
{
    Ent *x = &e[(*n)++];
    snprintf(x->name, sizeof x->name, "%s", name);
    x->data = data;
    x->ndim = d1 ? 2 : 1;
    x->shape[0] = d0;
    x->shape[1] = d1;
}

static int spec_table(const CcModel *m, Ent *e)
{
    const CcHparams *hp = &m->hp;
    const CcParams *w = &m->w;
    int64_t D = hp->d_model, FF = hp->d_ff;
    int k = 0;
    char nm[64];
    ent(e, &k, "embed.weight", w->embed_w, D, hp->patch_len + 4);
    ent(e, &k, "embed.bias", w->embed_b, D, 0);
    ent(e, &k, "channel_embed.weight", w->chan, hp->n_features, D);
    for (int l = 0; l < hp->n_layers; l++) {
        const char *qkv[3] = {"q", "k", "v"};
        for (int j = 0; j < 3; j++) {
            snprintf(nm, sizeof nm, "layers.%d.attn.%s_proj.weight", l, qkv[j]);
            ent(e, &k, nm, w->qkv_w + ((size_t)l * 3 + j) * D * D, D, D);
            snprintf(nm, sizeof nm, "layers.%d.attn.%s_proj.bias", l, qkv[j]);
            ent(e, &k, nm, w->qkv_b + ((size_t)l * 3 + j) * D, D, 0);
        }
#define L_ENT(suffix, ptr, d0, d1)                                                                 \
    snprintf(nm, sizeof nm, "layers.%d." suffix, l);                                               \
    ent(e, &k, nm, ptr, d0, d1);
        L_ENT("attn.o_proj.weight", w->o_w + l * D * D, D, D);
        L_ENT("attn.o_proj.bias", w->o_b + l * D, D, 0);
        L_ENT("norm1.weight", w->ln1_g + l * D, D, 0);
        L_ENT("norm1.bias", w->ln1_b + l * D, D, 0);
        L_ENT("ffn.up.weight", w->up_w + l * FF * D, FF, D);
        L_ENT("ffn.up.bias", w->up_b + l * FF, FF, 0);
        L_ENT("ffn.down.weight", w->down_w + l * D * FF, D, FF);
        L_ENT("ffn.down.bias", w->down_b + l * D, D, 0);
        L_ENT("norm2.weight", w->ln2_g + l * D, D, 0);
        L_ENT("norm2.bias", w->ln2_b + l * D, D, 0);
#undef L_ENT
    }
    ent(e, &k, "head.weight", w->head_w, 2 * (int64_t)hp->horizon, D);
    ent(e, &k, "head.bias", w->head_b, 2 * (int64_t)hp->horizon, 0);
    if (hp->linear_window > 0) { /* tx/3 */
        ent(e, &k, "linear.weight", w->lin_w, hp->horizon, hp->linear_window);
        ent(e, &k, "linear.bias", w->lin_b, hp->horizon, 0);
        ent(e, &k, "norm.floor", w->norm_floor, hp->n_features, 0);
        ent(e, &k, "calib.sigma_scale", w->sigma_scale, hp->n_features, hp->horizon);
    }
    return k;
}

/* How to build a (possibly broken) file from a model. Zero = valid F32 file. */
typedef struct Build {
    CcStDtype dtype;
    const char *skip;         // tensor left out
    const char *reshape;      // tensor whose first dimension gets +1 (data grown to match)
    const char *extra_tensor; // name of an additional (D) tensor
    const char *meta_key;     // metadata key overridden (added) with meta_value, or removed
    const char *meta_value;   //   when meta_value is NULL
    int no_metadata;
    const char *bad_tensor; // tensor whose element bad_index (3 when 0) becomes bad_value
    float bad_value;
    int bad_index;
} Build;

static uint8_t *build_file(const CcModel *m, const Build *b, size_t *len)
{
    Ent e[12 + 16 * CC_MAX_LAYERS];
    CcStWriteTensor ts[12 + 16 * CC_MAX_LAYERS];
    float *copies[8] = {0};
    int nc = 0, n = spec_table(m, e), nt = 0;
    const CcHparams *hp = &m->hp;
    for (int i = 0; i < n; i++) {
        if (b->skip && !strcmp(e[i].name, b->skip))
            continue;
        CcStWriteTensor *t = &ts[nt++];
        memset(t, 0, sizeof *t);
        t->name = e[i].name;
        t->data = e[i].data;
        t->ndim = e[i].ndim;
        t->shape[0] = e[i].shape[0];
        t->shape[1] = e[i].shape[1];
        t->dtype = b->dtype;
        size_t numel = (size_t)e[i].shape[0] * (e[i].ndim == 2 ? (size_t)e[i].shape[1] : 1);
        if (b->reshape && !strcmp(e[i].name, b->reshape)) {
            size_t row = e[i].ndim == 2 ? (size_t)e[i].shape[1] : 1;
            float *c = calloc(numel + row, sizeof *c);
            memcpy(c, e[i].data, numel * sizeof *c);
            t->data = copies[nc++] = c;
            t->shape[0]++;
        }
        if (b->bad_tensor && !strcmp(e[i].name, b->bad_tensor)) {
            float *c = malloc(numel * sizeof *c);
            memcpy(c, e[i].data, numel * sizeof *c);
            c[b->bad_index ? b->bad_index : 3] = b->bad_value;
            t->data = copies[nc++] = c;
        }
    }
    if (b->extra_tensor) {
        CcStWriteTensor *t = &ts[nt++];
        memset(t, 0, sizeof *t);
        t->name = b->extra_tensor;
        t->data = m->w.embed_b;
        t->ndim = 1;
        t->shape[0] = hp->d_model;
        t->dtype = b->dtype;
    }
    /* Metadata as the spec lists it. */
    const char *keys[64], *vals[64];
    char ints[10][32], lw[32], feats[CC_MAX_FEATURES * CC_FEATURE_NAME_MAX] = "";
    int nm = 0;
    keys[nm] = "format", vals[nm++] = hp->linear_window > 0 ? "cellcast-tx/3" : "cellcast-tx/2";
    if (hp->linear_window > 0) {
        snprintf(lw, sizeof lw, "%d", hp->linear_window);
        keys[nm] = "linear_window", vals[nm++] = lw;
    }
    const char *ik[10] = {"d_model",   "n_heads",     "n_layers", "d_ff",         "patch_len",
                          "n_patches", "norm_window", "horizon",  "step_seconds", "tz_offset_s"};
    long long iv[10] = {hp->d_model,      hp->n_heads,    hp->n_layers,    hp->d_ff,
                        hp->patch_len,    hp->n_patches,  hp->norm_window, hp->horizon,
                        hp->step_seconds, hp->tz_offset_s};
    for (int i = 0; i < 10; i++) {
        snprintf(ints[i], sizeof ints[i], "%lld", iv[i]);
        keys[nm] = ik[i], vals[nm++] = ints[i];
    }
    for (int f = 0; f < hp->n_features; f++) {
        if (f)
            strcat(feats, ",");
        strcat(feats, hp->features[f]);
    }
    keys[nm] = "features", vals[nm++] = feats;
    if (b->meta_key) {
        int i = 0;
        while (i < nm && strcmp(keys[i], b->meta_key))
            i++;
        if (!b->meta_value) { // remove
            if (i < nm) {
                memmove(&keys[i], &keys[i + 1], (nm - i - 1) * sizeof *keys);
                memmove(&vals[i], &vals[i + 1], (nm - i - 1) * sizeof *vals);
                nm--;
            }
        } else {
            if (i == nm)
                nm++;
            keys[i] = b->meta_key;
            vals[i] = b->meta_value;
        }
    }
    uint8_t *buf = NULL;
    char err[ERRLEN];
    int ret =
        cc_st_write_buffer(&buf, len, ts, nt, keys, vals, b->no_metadata ? 0 : nm, err, sizeof err);
    if (ret)
        fail_msg("cc_st_write_buffer: %d %s", ret, err);
    for (int i = 0; i < nc; i++)
        free(copies[i]);
    return buf;
}

/* Loads buf; asserts that it is refused with `code` and that the message holds both
 * needles (the second may be NULL). */
static void expect_refused(const uint8_t *buf, size_t len, int code, const char *needle,
                           const char *needle2)
{
    CcModel *m = (CcModel *)(uintptr_t)1; // must come back NULL
    char err[ERRLEN] = "";
    int ret = cc_model_open_buffer(&m, buf, len, err, sizeof err);
    if (ret != code)
        fail_msg("expected %d, got %d (%s)", code, ret, err);
    assert_null(m);
    assert_has(err, needle);
    if (needle2)
        assert_has(err, needle2);
}

static void expect_build_refused(const Build *b, int n_layers, const char *needle,
                                 const char *needle2)
{
    CcHparams hp;
    tiny_hparams(&hp, n_layers);
    CcModel *m = random_model(&hp, 7);
    size_t len;
    uint8_t *buf = build_file(m, b, &len);
    expect_refused(buf, len, -EINVAL, needle, needle2);
    free(buf);
    cc_model_close(&m);
}

/* Builds a tiny model's file (1 layer, random weights of seed) as b says and loads it,
 * which must succeed. */
static CcModel *load_built(const Build *b, uint64_t seed)
{
    CcHparams hp;
    tiny_hparams(&hp, 1);
    CcModel *src = random_model(&hp, seed), *m = NULL;
    size_t len;
    uint8_t *buf = build_file(src, b, &len);
    char err[ERRLEN] = "";
    assert_int_equal(cc_model_open_buffer(&m, buf, len, err, sizeof err), 0);
    cc_model_close(&src);
    free(buf);
    return m;
}

/* A valid tiny file (1 layer) in memory. */
static uint8_t *valid_tiny(size_t *len)
{
    CcHparams hp;
    tiny_hparams(&hp, 1);
    CcModel *m = random_model(&hp, 11);
    Build b = {0};
    uint8_t *buf = build_file(m, &b, len);
    cc_model_close(&m);
    return buf;
}

/* Copy of buf with the first occurrence of `from` in the JSON header replaced by `to`; the
 * header length is fixed up, the data section kept as is. */
static uint8_t *edit_header(const uint8_t *buf, size_t len, const char *from, const char *to,
                            size_t *outlen)
{
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--)
        hlen = hlen << 8 | buf[i];
    char *hdr = calloc(1, hlen + 1);
    memcpy(hdr, buf + 8, hlen);
    char *at = strstr(hdr, from);
    if (!at)
        fail_msg("\"%s\" not in header %s", from, hdr);
    size_t nh = hlen - strlen(from) + strlen(to), data = len - 8 - hlen;
    uint8_t *out = malloc(8 + nh + data);
    for (int i = 0; i < 8; i++)
        out[i] = (uint8_t)(nh >> (8 * i));
    size_t pre = (size_t)(at - hdr);
    memcpy(out + 8, hdr, pre);
    memcpy(out + 8 + pre, to, strlen(to));
    memcpy(out + 8 + pre + strlen(to), at + strlen(from), hlen - pre - strlen(from));
    memcpy(out + 8 + nh, buf + 8 + hlen, data);
    *outlen = 8 + nh + data;
    free(hdr);
    return out;
}

static void expect_edit_refused(const char *from, const char *to, const char *needle,
                                const char *needle2)
{
    size_t len, elen;
    uint8_t *buf = valid_tiny(&len);
    uint8_t *e = edit_header(buf, len, from, to, &elen);
    expect_refused(e, elen, -EINVAL, needle, needle2);
    free(e);
    free(buf);
}

static char tmpdir[64];

static int setup_tmpdir(void **state)
{
    (void)state;
    snprintf(tmpdir, sizeof tmpdir, "/tmp/cc_test_loader_XXXXXX");
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown_tmpdir(void **state)
{
    (void)state;
    DIR *d = opendir(tmpdir);
    struct dirent *de;
    char p[PATH_MAX];
    while (d && (de = readdir(d)))
        if (de->d_name[0] != '.') {
            snprintf(p, sizeof p, "%s/%s", tmpdir, de->d_name);
            unlink(p);
        }
    if (d)
        closedir(d);
    rmdir(tmpdir);
    return 0;
}

static int count_files(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    int n = 0;
    while (d && (de = readdir(d)))
        n += de->d_name[0] != '.';
    if (d)
        closedir(d);
    return n;
}

/* -------------------------------------------------------------------- valid files */

static void test_roundtrip_save_load(void **state)
{
    (void)state;
    CcHparams hp;
    tiny_hparams(&hp, 2);
    hp.d_model = 16;
    hp.n_heads = 4;
    hp.d_ff = 24;
    hp.horizon = 5;
    snprintf(hp.name, sizeof hp.name, "tiny test model");
    snprintf(hp.version, sizeof hp.version, "1.2.3");
    snprintf(hp.trained_on, sizeof hp.trained_on, "synthetic, seed 42");
    snprintf(hp.created_at, sizeof hp.created_at, "2026-11-21T19:00:00Z");
    assert_int_equal(cc_hparams_set_extra(&hp, "trainer_cmd", "cellcast train --epochs 3"), 0);
    assert_int_equal(cc_hparams_set_extra(&hp, "val_nll", "0.4321"), 0);
    CcModel *m = random_model(&hp, 1234), *r = NULL;
    char path[PATH_MAX], err[ERRLEN] = "";
    snprintf(path, sizeof path, "%s/model.safetensors", tmpdir);
    for (int pass = 0; pass < 2; pass++) { // the second save replaces the first
        int ret = cc_model_save(m, path, err, sizeof err);
        if (ret)
            fail_msg("save: %d %s", ret, err);
        assert_int_equal(count_files(tmpdir), 1); // no temporary file left behind
        ret = cc_model_open_file(&r, path, err, sizeof err);
        if (ret)
            fail_msg("load: %d %s", ret, err);
        assert_int_equal(r->n_params, m->n_params);
        assert_memory_equal(r->block, m->block, m->n_params * sizeof(float));
        assert_memory_equal(&r->hp, &m->hp, sizeof hp);
        assert_string_equal(r->hp.extra[0].key, "trainer_cmd");
        assert_string_equal(r->hp.features[1], "dl_bytes");
        assert_int_equal(r->hp.tz_offset_s, -3600);
        cc_model_close(&r);
        assert_null(r);
        m->block[0] += 1.0f;
    }
    /* The file is standard safetensors: F32 tensors, header padded to 8 bytes. */
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    uint8_t len8[8];
    assert_int_equal(fread(len8, 1, 8, f), 8);
    fclose(f);
    assert_int_equal(len8[0] % 8, 0);
    struct stat sb;
    assert_int_equal(stat(path, &sb), 0);
    assert_int_equal(sb.st_mode & 0777, 0644);
    cc_model_close(&m);
}

/* The loader maps the spec's names onto CcParams (q/k/v stacked) — checked against a file
 * written from an independent table. */
static void test_spec_names_mapped(void **state)
{
    (void)state;
    CcHparams hp;
    tiny_hparams(&hp, 3);
    CcModel *m = random_model(&hp, 99), *r = NULL;
    Build b = {0};
    size_t len;
    uint8_t *buf = build_file(m, &b, &len);
    char err[ERRLEN] = "";
    int ret = cc_model_open_buffer(&r, buf, len, err, sizeof err);
    if (ret)
        fail_msg("load: %d %s", ret, err);
    memset(buf, 0xff, len); // the model must not point into the buffer
    free(buf);
    assert_memory_equal(r->block, m->block, m->n_params * sizeof(float));
    /* layer 2's k_proj row 0 must land at qkv_w + 2*3*D*D + D*D */
    size_t D = hp.d_model;
    assert_true(r->w.qkv_w[2 * 3 * D * D + D * D] == m->w.qkv_w[2 * 3 * D * D + D * D]);
    assert_true(r->w.qkv_b[2 * 3 * D + 2 * D + 1] == m->w.qkv_b[2 * 3 * D + 2 * D + 1]);
    cc_model_close(&r);
    cc_model_close(&m);
}

static void check_16bit(CcStDtype dt)
{
    CcHparams hp;
    tiny_hparams(&hp, 2);
    CcModel *m = random_model(&hp, 5), *r = NULL;
    m->block[7] = 1e-6f;   // F16 subnormal
    m->block[8] = -3.0e4f; // near the F16 limit
    Build b = {.dtype = dt};
    size_t len;
    uint8_t *buf = build_file(m, &b, &len);
    char err[ERRLEN] = "";
    int ret = cc_model_open_buffer(&r, buf, len, err, sizeof err);
    if (ret)
        fail_msg("load %s: %d %s", cc_st_dtype_name(dt), ret, err);
    /* Relative precision of the format (half an ulp) plus F16's subnormal step. */
    double rel = dt == CC_ST_F16 ? 0x1p-11 : 0x1p-8, abs_tol = dt == CC_ST_F16 ? 0x1p-25 : 0;
    double worst = 0;
    for (size_t i = 0; i < m->n_params; i++) {
        float x = m->block[i], y = r->block[i];
        float expect =
            dt == CC_ST_F16 ? cc_f16_to_f32(cc_f32_to_f16(x)) : cc_bf16_to_f32(cc_f32_to_bf16(x));
        assert_true(y == expect); // exactly the rounded value, nothing else
        double e = fabs((double)x - y);
        if (e > fabs(x) * rel + abs_tol)
            fail_msg("%s element %zu: %.9g -> %.9g", cc_st_dtype_name(dt), i, x, y);
        if (fabs(x) > 1e-3 && e / fabs(x) > worst)
            worst = e / fabs(x);
    }
    print_message("%s: largest relative error %.3g (bound %.3g) over %zu weights\n",
                  cc_st_dtype_name(dt), worst, rel, m->n_params);
    free(buf);
    cc_model_close(&r);
    cc_model_close(&m);
}

static void test_f16_file(void **state)
{
    (void)state;
    check_16bit(CC_ST_F16);
}
static void test_bf16_file(void **state)
{
    (void)state;
    check_16bit(CC_ST_BF16);
}

/* A file shaped like safetensors.torch.save_file output, written by hand: metadata first,
 * spaces after the JSON, a scalar, an empty tensor, an unaligned F32 tensor. */
static void test_st_handwritten(void **state)
{
    (void)state;
    const char *json = "{\"__metadata__\":{\"k\":\"v\",\"e\":\"\"},"
                       "\"s\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4]},"
                       "\"z\":{\"dtype\":\"BF16\",\"shape\":[3,0],\"data_offsets\":[4,4]},"
                       "\"h\":{\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[4,8]},"
                       "\"u\":{\"dtype\":\"F32\",\"shape\":[1,2],\"data_offsets\":[9,17]}}   ";
    size_t hl = strlen(json), len = 8 + hl + 17;
    uint8_t *buf = calloc(1, len);
    buf[0] = (uint8_t)hl;
    memcpy(buf + 8, json, hl);
    uint8_t *d = buf + 8 + hl;
    float one = 1.0f, u[2] = {-2.5f, 3.25f};
    memcpy(d, &one, 4);
    d[4] = 0x00, d[5] = 0x3c; // F16 1.0
    d[6] = 0x00, d[7] = 0xc0; // F16 -2.0
    memcpy(d + 9, u, 8);
    CcSafetensors *st = NULL;
    char err[ERRLEN] = "";
    int ret = cc_st_parse(&st, buf, len, err, sizeof err);
    if (ret)
        fail_msg("%d %s", ret, err);
    assert_int_equal(cc_st_count(st), 4);
    assert_int_equal(cc_st_meta_count(st), 2);
    assert_string_equal(cc_st_meta_get(st, "k"), "v");
    assert_string_equal(cc_st_meta_get(st, "e"), "");
    assert_null(cc_st_meta_get(st, "missing"));
    const CcStTensor *s = cc_st_find(st, "s"), *z = cc_st_find(st, "z"), *h = cc_st_find(st, "h"),
                     *t = cc_st_find(st, "u");
    assert_non_null(s);
    assert_non_null(z);
    assert_non_null(h);
    assert_non_null(t);
    assert_null(cc_st_find(st, "nope"));
    assert_int_equal(s->ndim, 0);
    assert_int_equal(s->numel, 1);
    assert_int_equal(z->numel, 0);
    float out[2];
    cc_st_to_f32(s, out);
    assert_true(out[0] == 1.0f);
    cc_st_to_f32(h, out);
    assert_true(out[0] == 1.0f && out[1] == -2.0f);
    cc_st_to_f32(t, out);
    assert_true(out[0] == -2.5f && out[1] == 3.25f);
    cc_st_close(&st);
    assert_null(st);
    free(buf);
}

static void test_st_writer(void **state)
{
    (void)state;
    float a[6] = {1, 2, 3, 4, 5, 6}, b[1] = {7};
    CcStWriteTensor ts[2] = {
        {.name = "a", .data = a, .ndim = 2, .shape = {2, 3}},
        {.name = "b", .data = b, .ndim = 1, .shape = {1}, .dtype = CC_ST_BF16},
    };
    const char *k[1] = {"x"}, *v[1] = {"y"};
    uint8_t *buf = NULL;
    size_t len = 0;
    char err[ERRLEN] = "";
    assert_int_equal(cc_st_write_buffer(&buf, &len, ts, 2, k, v, 1, err, sizeof err), 0);
    uint64_t hl = buf[0] | (uint64_t)buf[1] << 8;
    assert_int_equal(hl % 8, 0);
    assert_int_equal(len, 8 + hl + 24 + 2);
    CcSafetensors *st = NULL;
    assert_int_equal(cc_st_parse(&st, buf, len, err, sizeof err), 0);
    const CcStTensor *ta = cc_st_find(st, "a");
    assert_int_equal(ta->shape[1], 3);
    assert_int_equal(((uintptr_t)ta->data - (uintptr_t)buf) % 8, 0); // aligned data section
    float out[6];
    cc_st_to_f32(ta, out);
    assert_memory_equal(out, a, sizeof a);
    cc_st_to_f32(cc_st_find(st, "b"), out);
    assert_true(out[0] == 7.0f);
    assert_string_equal(cc_st_meta_get(st, "x"), "y");
    cc_st_close(&st);
    free(buf);
    /* refused descriptions */
    ts[1].name = "a";
    assert_int_equal(cc_st_write_buffer(&buf, &len, ts, 2, k, v, 1, err, sizeof err), -EINVAL);
    assert_has(err, "repeated");
    ts[1].name = "__metadata__";
    assert_int_equal(cc_st_write_buffer(&buf, &len, ts, 2, k, v, 1, err, sizeof err), -EINVAL);
    ts[1].name = "b\xc3\x28"; // invalid UTF-8
    assert_int_equal(cc_st_write_buffer(&buf, &len, ts, 2, k, v, 1, err, sizeof err), -EINVAL);
    assert_has(err, "UTF-8");
    ts[1].name = "b\xed\xa0\x80"; // a surrogate
    assert_int_equal(cc_st_write_buffer(&buf, &len, ts, 2, k, v, 1, err, sizeof err), -EINVAL);
    ts[1].name = "b\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80"; // é € 😀 are fine
    assert_int_equal(cc_st_write_buffer(&buf, &len, ts, 2, k, v, 1, err, sizeof err), 0);
    free(buf);
    v[0] = "\xc0\xaf"; // overlong
    assert_int_equal(cc_st_write_buffer(&buf, &len, ts, 2, k, v, 1, err, sizeof err), -EINVAL);
    assert_has(err, "UTF-8");
    v[0] = "y";
    /* JSON escaping: quotes, backslashes and control characters survive the round trip */
    const char *k2[2] = {"q\"k", "x"},
               *v2[2] = {"a \"quoted\" \\ back\nslash\t\x01 \xe2\x82\xac", "y"};
    assert_int_equal(cc_st_write_buffer(&buf, &len, ts, 2, k2, v2, 2, err, sizeof err), 0);
    assert_int_equal(cc_st_parse(&st, buf, len, err, sizeof err), 0);
    assert_string_equal(cc_st_meta_get(st, "q\"k"), v2[0]);
    cc_st_close(&st);
    free(buf);
    k2[0] = "x";
    assert_int_equal(cc_st_write_buffer(&buf, &len, ts, 2, k2, v2, 2, err, sizeof err), -EINVAL);
    assert_has(err, "'x' appears twice");
    ts[1].name = "b";
    ts[1].shape[0] = -1;
    assert_int_equal(cc_st_write_buffer(&buf, &len, ts, 2, k, v, 1, err, sizeof err), -EINVAL);
    assert_has(err, "bad shape");
}

/* The committed fuzz seeds: the tiny model loads with the seeds' shape, the truncated one
 * is refused. Keeps the seeds honest. */
static void test_fuzz_seeds(void **state)
{
    (void)state;
    CcModel *m = NULL;
    char err[ERRLEN] = "";
    int ret = cc_model_open_file(&m, CC_TEST_DATA "/fuzz_corpus/tiny.safetensors", err, sizeof err);
    if (ret)
        fail_msg("tiny seed: %d %s", ret, err);
    assert_int_equal(m->hp.n_features, 2);
    assert_int_equal(m->hp.patch_len, 4);
    assert_int_equal(m->hp.n_patches, 3);
    assert_int_equal(m->hp.norm_window, 8);
    assert_int_equal(m->hp.d_model, 8);
    assert_int_equal(m->hp.n_heads, 2);
    assert_int_equal(m->hp.n_layers, 1);
    assert_int_equal(m->hp.d_ff, 8);
    assert_int_equal(m->hp.horizon, 2);
    cc_model_close(&m);
    ret = cc_model_open_file(&m, CC_TEST_DATA "/fuzz_corpus/tiny_f16.safetensors", err, sizeof err);
    if (ret)
        fail_msg("f16 seed: %d %s", ret, err);
    cc_model_close(&m);
    ret =
        cc_model_open_file(&m, CC_TEST_DATA "/fuzz_corpus/truncated.safetensors", err, sizeof err);
    assert_int_equal(ret, -EINVAL);
    assert_has(err, "truncated");
    assert_has(err, "truncated.safetensors"); // the path is named
}

/* A file written by another implementation (tests/ref/reference.py, tensors in name
 * order): every tensor lands where CcParams says, e.g. layer 1's k_proj after its q_proj. */
static void test_python_written_file(void **state)
{
    (void)state;
    const char *path = TL_TINY_MODEL;
    FILE *f = fopen(path, "rb");
    if (!f) {
        print_message("skipped: %s absent (written by tests/ref/gen_golden.py)\n", path);
        skip();
    }
    fseek(f, 0, SEEK_END);
    size_t len = (size_t)ftell(f);
    rewind(f);
    uint8_t *buf = malloc(len);
    assert_int_equal(fread(buf, 1, len, f), len);
    fclose(f);
    CcModel *m = NULL;
    CcSafetensors *st = NULL;
    char err[ERRLEN] = "";
    int ret = cc_model_open_buffer(&m, buf, len, err, sizeof err);
    if (ret)
        fail_msg("%s: %d %s", path, ret, err);
    assert_int_equal(cc_st_parse(&st, buf, len, err, sizeof err), 0);
    Ent e[8 + 16 * CC_MAX_LAYERS];
    int n = spec_table(m, e);
    assert_int_equal(n, cc_st_count(st));
    for (int i = 0; i < n; i++) {
        const CcStTensor *t = cc_st_find(st, e[i].name);
        assert_non_null(t);
        float *x = malloc(t->numel * sizeof *x);
        cc_st_to_f32(t, x);
        if (memcmp(x, e[i].data, t->numel * sizeof *x))
            fail_msg("tensor '%s' not where CcParams expects it", e[i].name);
        free(x);
    }
    cc_st_close(&st);
    cc_model_close(&m);
    free(buf);
}

/* ------------------------------------------------------------------- broken files */

static void test_truncated(void **state)
{
    (void)state;
    size_t len;
    uint8_t *buf = valid_tiny(&len);
    expect_refused(buf, len - 1, -EINVAL, "truncated", "head.bias");
    expect_refused(buf, 5, -EINVAL, "too short", NULL);
    expect_refused(buf, 0, -EINVAL, "too short", NULL);
    expect_refused(buf, 8 + 10, -EINVAL, "past the end", NULL);
    /* Every prefix is refused, none crashes (ASan checks the reads). */
    for (size_t n = 0; n < len; n++) {
        uint8_t *p = malloc(n ? n : 1); // exact size, so ASan sees any over-read
        memcpy(p, buf, n);
        CcModel *m = NULL;
        char err[ERRLEN];
        assert_int_equal(cc_model_open_buffer(&m, p, n, err, sizeof err), -EINVAL);
        assert_null(m);
        free(p);
    }
    free(buf);
}

static void test_header_length(void **state)
{
    (void)state;
    size_t len;
    uint8_t *buf = valid_tiny(&len);
    uint64_t orig = 0;
    for (int i = 7; i >= 0; i--)
        orig = orig << 8 | buf[i];
    uint64_t bad[3] = {len - 7, (uint64_t)1 << 40, UINT64_MAX};
    const char *msg[3] = {"past the end", "absurd", "absurd"};
    for (int k = 0; k < 3; k++) {
        for (int i = 0; i < 8; i++)
            buf[i] = (uint8_t)(bad[k] >> (8 * i));
        expect_refused(buf, len, -EINVAL, "header length", msg[k]);
    }
    /* a header length that cuts the JSON short */
    for (int i = 0; i < 8; i++)
        buf[i] = (uint8_t)((orig - 20) >> (8 * i));
    expect_refused(buf, len, -EINVAL, "bad JSON", NULL);
    free(buf);
}

static void test_bad_json(void **state)
{
    (void)state;
    expect_edit_refused("\"dtype\":\"F32\"", "\"dtype\":F32\"", "bad JSON", "line 1");
    expect_edit_refused("{", "[", "bad JSON", NULL);
    expect_edit_refused("{\"__metadata__\"", "[{\"__metadata__\"", "bad JSON", NULL);
    /* duplicate tensor names */
    expect_edit_refused("\"embed.bias\"", "\"embed.weight\"", "bad JSON", "duplicate");
    /* valid JSON but not the format's shape */
    size_t len;
    uint8_t *buf = valid_tiny(&len);
    uint8_t arr[8 + 8] = {8, 0, 0, 0, 0, 0, 0, 0, '[', '1', ',', '2', ']', ' ', ' ', ' '};
    expect_refused(arr, sizeof arr, -EINVAL, "not an object", NULL);
    free(buf);
    expect_edit_refused("{\"dtype\":\"F32\",\"shape\":[8,8],\"data_offsets\":[0,256]}", "7",
                        "embed.weight", "not an object");
    expect_edit_refused("\"__metadata__\":{", "\"__metadata__\":{\"n\":1,", "metadata 'n'",
                        "not a string");
    expect_edit_refused("\"__metadata__\":{", "\"__metadata__\":[],\"x\":{", "__metadata__",
                        "not an object");
    expect_edit_refused("\"shape\":[8,8]", "\"shape\":[8,\"8\"]", "embed.weight",
                        "not a non-negative integer");
    expect_edit_refused("\"shape\":[8,8]", "\"shape\":[8,-8]", "embed.weight",
                        "not a non-negative integer");
    expect_edit_refused("\"shape\":[8,8]", "\"shape\":[8,8.0]", "embed.weight",
                        "not a non-negative integer");
    expect_edit_refused("\"shape\":[8,8]", "\"shap\":[8,8]", "embed.weight", "\"shape\" missing");
    expect_edit_refused("\"dtype\":\"F32\"", "\"dtyp\":\"F32\"", "embed.weight",
                        "\"dtype\" missing");
    expect_edit_refused("\"data_offsets\":[0,256]", "\"data_offsets\":[0]", "embed.weight",
                        "\"data_offsets\" missing or not");
    expect_edit_refused("\"data_offsets\":[0,256]", "\"data_offsets\":[0,256,512]", "embed.weight",
                        "\"data_offsets\" missing or not");
    expect_edit_refused("\"data_offsets\":[0,256]", "\"data_offsets\":[-4,252]", "embed.weight",
                        "non-negative");
    expect_edit_refused("\"data_offsets\":[0,256]", "\"data_offsets\":[0,99999999999999999999]",
                        "bad JSON", NULL);
}

/* Offsets of the valid tiny file: embed.weight [0,256), embed.bias [256,288), ... */
static void test_overlapping_offsets(void **state)
{
    (void)state;
    expect_edit_refused("\"data_offsets\":[256,288]", "\"data_offsets\":[224,256]", "overlap",
                        "embed.weight");
    expect_edit_refused("\"data_offsets\":[256,288]", "\"data_offsets\":[0,32]", "overlap",
                        "embed.bias");
}

static void test_out_of_range_offsets(void **state)
{
    (void)state;
    size_t len;
    uint8_t *buf = valid_tiny(&len);
    /* head.bias is last: 4 floats ending at the end of the data section */
    CcSafetensors *st = NULL;
    char err[ERRLEN], from[64], to[64];
    assert_int_equal(cc_st_parse(&st, buf, len, err, sizeof err), 0);
    const CcStTensor *hb = cc_st_find(st, "head.bias");
    size_t begin = hb->begin, end = hb->end;
    cc_st_close(&st);
    assert_int_equal(end, len - 8 - (buf[0] | (size_t)buf[1] << 8)); // last in the file
    snprintf(from, sizeof from, "\"data_offsets\":[%zu,%zu]", begin, end);
    snprintf(to, sizeof to, "\"data_offsets\":[%zu,%zu]", begin + 8, end + 8);
    expect_edit_refused(from, to, "head.bias", "out of range");
    snprintf(to, sizeof to, "\"data_offsets\":[%zu,%zu]", end, begin);
    expect_edit_refused(from, to, "head.bias", "end before begin");
    expect_edit_refused("\"data_offsets\":[0,256]", "\"data_offsets\":[0,252]", "embed.weight",
                        "needs 256");
    free(buf);
}

static void test_wrong_dtype(void **state)
{
    (void)state;
    /* the first tensor of the header is embed.weight */
    expect_edit_refused("\"dtype\":\"F32\"", "\"dtype\":\"I32\"", "embed.weight",
                        "dtype I32 not supported");
    expect_edit_refused("\"dtype\":\"F32\"", "\"dtype\":\"F64\"", "embed.weight",
                        "dtype F64 not supported");
    expect_edit_refused("\"dtype\":\"F32\"", "\"dtype\":\"Q4_K\"", "embed.weight",
                        "unknown dtype 'Q4_K'");
    expect_edit_refused("\"dtype\":\"F32\"", "\"dtype\":7", "embed.weight", "not a string");
    /* F16 declared over F32 bytes: the byte count no longer matches */
    expect_edit_refused("\"dtype\":\"F32\"", "\"dtype\":\"F16\"", "embed.weight", "needs 128");
}

static void test_wrong_shape(void **state)
{
    (void)state;
    Build b = {.reshape = "layers.0.ffn.up.weight"};
    expect_build_refused(&b, 1, "tensor 'layers.0.ffn.up.weight' has shape [9, 8]",
                         "expected [8, 8]");
    b.reshape = "head.bias";
    expect_build_refused(&b, 1, "tensor 'head.bias' has shape [5]", "expected [4]");
    /* a 1-D tensor declared 2-D with the same bytes */
    expect_edit_refused("\"shape\":[8],\"data_offsets\":[256,288]",
                        "\"shape\":[8,1],\"data_offsets\":[256,288]",
                        "tensor 'embed.bias' has shape [8, 1]", "expected [8]");
    expect_edit_refused("\"shape\":[8,8],\"data_offsets\":[0,256]",
                        "\"shape\":[1,8,8],\"data_offsets\":[0,256]",
                        "tensor 'embed.weight' has shape [1, 8, 8]", "expected [8, 8]");
    expect_edit_refused("\"shape\":[8,8]", "\"shape\":[1,1,1,1,1,1,1,1,8,8]", "embed.weight",
                        "dimensions");
}

static void test_missing_tensor(void **state)
{
    (void)state;
    Build b = {.skip = "layers.0.attn.v_proj.bias"};
    expect_build_refused(&b, 1, "missing tensor 'layers.0.attn.v_proj.bias'", "[8]");
    b.skip = "layers.1.norm2.weight";
    expect_build_refused(&b, 2, "missing tensor 'layers.1.norm2.weight'", NULL);
    b.skip = "channel_embed.weight";
    expect_build_refused(&b, 1, "missing tensor 'channel_embed.weight'", "[2, 8]");
}

static void test_unexpected_tensor(void **state)
{
    (void)state;
    Build b = {.extra_tensor = "layers.1.attn.q_proj.bias"};
    expect_build_refused(&b, 1, "unexpected tensor 'layers.1.attn.q_proj.bias'", "n_layers = 1");
    b.extra_tensor = "lm_head.some_very_long_name_that_is_longer_than_any_slot_name.bias";
    expect_build_refused(&b, 1, "unexpected tensor", "lm_head");
}

static void test_nonfinite_weight(void **state)
{
    (void)state;
    Build b = {.bad_tensor = "layers.0.norm2.weight", .bad_value = NAN};
    expect_build_refused(&b, 1, "tensor 'layers.0.norm2.weight'", "element 3 is NaN");
    b.bad_tensor = "head.weight";
    b.bad_value = INFINITY;
    expect_build_refused(&b, 1, "tensor 'head.weight'", "+Inf");
    b.bad_value = -INFINITY;
    b.dtype = CC_ST_BF16;
    expect_build_refused(&b, 1, "tensor 'head.weight'", "-Inf");
    b.dtype = CC_ST_F16;
    b.bad_tensor = "embed.bias";
    b.bad_value = 1e6f; // overflows F16 to +Inf on the way to the file
    expect_build_refused(&b, 1, "tensor 'embed.bias'", "non-finite");
    /* finite but absurd: 3e38 overflowed every forecast to null; refused, saying why */
    b = (Build){.bad_tensor = "head.weight", .bad_value = 3e38f};
    expect_build_refused(&b, 1, "tensor 'head.weight' element 3 is 3e+38", "absurd");
    b.bad_value = -2e9f;
    expect_build_refused(&b, 1, "tensor 'head.weight'", "overflow");
    b.bad_value = 1e5f; /* large, not absurd: loads */
    CcModel *big = load_built(&b, 7);
    cc_model_close(&big);
    /* and cc_model_save refuses to write one */
    CcHparams hp;
    tiny_hparams(&hp, 1);
    CcModel *m = random_model(&hp, 3);
    m->w.down_b[2] = NAN;
    char path[PATH_MAX], err[ERRLEN] = "";
    snprintf(path, sizeof path, "%s/nan.safetensors", tmpdir);
    assert_int_equal(cc_model_save(m, path, err, sizeof err), -EINVAL);
    assert_has(err, "layers.0.ffn.down.bias");
    assert_has(err, "NaN");
    assert_int_equal(access(path, F_OK), -1);
    cc_model_close(&m);
}

static void test_absurd_sizes(void **state)
{
    (void)state;
    Build b = {.meta_key = "d_model", .meta_value = "1000000000"};
    expect_build_refused(&b, 1, "d_model = 1000000000 out of range", NULL);
    b.meta_key = "n_layers", b.meta_value = "99999999999";
    expect_build_refused(&b, 1, "n_layers", "absurd");
    b.meta_key = "horizon", b.meta_value = "99999999999999999999999";
    expect_build_refused(&b, 1, "horizon", "absurd");
    b.meta_key = "n_heads", b.meta_value = "3";
    expect_build_refused(&b, 1, "n_heads = 3 does not divide d_model = 8", NULL);
    /* Within the bounds but far bigger than the file: refused (missing tensors) before any
     * allocation of the 2.5e9 parameters this would need. */
    b.meta_key = "n_layers", b.meta_value = "64";
    CcHparams hp;
    tiny_hparams(&hp, 1);
    CcModel *m = random_model(&hp, 1);
    size_t len, l2;
    uint8_t *buf = build_file(m, &b, &len);
    uint8_t *e1 = edit_header(buf, len, "\"d_model\":\"8\"", "\"d_model\":\"4096\"", &l2);
    uint8_t *e2 = edit_header(e1, l2, "\"d_ff\":\"8\"", "\"d_ff\":\"16384\"", &l2);
    free(e1);
    e1 = edit_header(e2, l2, "\"n_heads\":\"2\"", "\"n_heads\":\"64\"", &l2);
    expect_refused(e1, l2, -EINVAL, "tensor 'embed.weight' has shape [8, 8]", "expected [4096, 8]");
    free(e1);
    free(e2);
    free(buf);
    cc_model_close(&m);
    /* Huge shapes in the header */
    expect_edit_refused("\"shape\":[8,8]", "\"shape\":[4294967296,4294967296,16]", "embed.weight",
                        "overflows");
    expect_edit_refused("\"shape\":[8,8]", "\"shape\":[1099511627776]", "embed.weight",
                        "needs 4398046511104");
}

static void test_unknown_format(void **state)
{
    (void)state;
    Build b = {.meta_key = "format", .meta_value = "cellcast-tx/1"};
    expect_build_refused(&b, 1, "unknown format 'cellcast-tx/1'", "cellcast-tx/2");
    b.meta_value = "cellcast-tx/2 ";
    expect_build_refused(&b, 1, "unknown format", NULL);
    b.meta_value = NULL; // removed
    expect_build_refused(&b, 1, "'format' missing", NULL);
    b.meta_key = NULL;
    b.no_metadata = 1;
    expect_build_refused(&b, 1, "'format' missing", NULL);
}

static void test_missing_metadata_key(void **state)
{
    (void)state;
    const char *keys[] = {"d_model",      "n_heads",     "n_layers",    "d_ff",
                          "patch_len",    "n_patches",   "norm_window", "horizon",
                          "step_seconds", "tz_offset_s", "features"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        Build b = {.meta_key = keys[i]};
        char want[64];
        snprintf(want, sizeof want, "metadata key '%s' missing", keys[i]);
        expect_build_refused(&b, 1, want, NULL);
    }
}

static void test_metadata_integers_strict(void **state)
{
    (void)state;
    const char *bad[] = {"", "8 ", " 8", "+8", "0x8", "8.0", "8e0", "08", "-0", "8a", "--8"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        Build b = {.meta_key = "d_model", .meta_value = bad[i]};
        expect_build_refused(&b, 1, "metadata 'd_model'", "is not an integer");
    }
    Build b = {.meta_key = "tz_offset_s", .meta_value = "-90000"};
    expect_build_refused(&b, 1, "tz_offset_s = -90000 out of range", NULL);
    b.meta_key = "step_seconds", b.meta_value = "0";
    expect_build_refused(&b, 1, "step_seconds = 0 out of range", NULL);
}

static void test_features(void **state)
{
    (void)state;
    Build b = {.meta_key = "features", .meta_value = "prb_util,dl_bytes,ul_bytes"};
    expect_build_refused(&b, 1, "feature count mismatch",
                         "lists 3 names but "
                         "channel_embed.weight has 2 rows");
    b.meta_value = "prb_util";
    expect_build_refused(&b, 1, "lists 1 names but channel_embed.weight has 2 rows", NULL);
    b.meta_value = "prb_util,";
    expect_build_refused(&b, 1, "features", "is empty");
    b.meta_value = "prb_util, dl_bytes";
    expect_build_refused(&b, 1, "features", "whitespace");
    b.meta_value = "prb_util,prb_util";
    expect_build_refused(&b, 1, "'prb_util' appears twice", NULL);
    b.meta_value = "a\tb,c";
    expect_build_refused(&b, 1, "features", "control character");
    char many[CC_MAX_FEATURES * 4 + 8] = "";
    for (int i = 0; i <= CC_MAX_FEATURES; i++)
        sprintf(many + strlen(many), "%sf%d", i ? "," : "", i);
    b.meta_value = many;
    expect_build_refused(&b, 1, "more than 64 names", NULL);
}

static void test_extra_metadata(void **state)
{
    (void)state;
    Build b = {.meta_key = "trainer_cmd", .meta_value = "x"};
    CcHparams hp;
    tiny_hparams(&hp, 1);
    CcModel *m = random_model(&hp, 2), *r = NULL;
    size_t len;
    uint8_t *buf = build_file(m, &b, &len);
    char err[ERRLEN] = "";
    assert_int_equal(cc_model_open_buffer(&r, buf, len, err, sizeof err), 0);
    assert_int_equal(r->hp.n_extra, 1);
    assert_string_equal(r->hp.extra[0].key, "trainer_cmd");
    assert_string_equal(r->hp.extra[0].value, "x");
    cc_model_close(&r);
    free(buf);
    char longv[600];
    memset(longv, 'v', sizeof longv - 1);
    longv[sizeof longv - 1] = 0;
    b.meta_value = longv;
    expect_build_refused(&b, 1, "extra metadata 'trainer_cmd' too long", NULL);
    b.meta_key = "name";
    expect_build_refused(&b, 1, "metadata 'name' too long", NULL);
    /* a reserved key among the extras cannot be saved */
    assert_int_equal(cc_hparams_set_extra(&m->hp, "d_model", "9"), 0);
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/reserved.safetensors", tmpdir);
    assert_int_equal(cc_model_save(m, path, err, sizeof err), -EINVAL);
    assert_has(err, "'d_model' is reserved");
    /* CC_MAX_META extras (the trainer writes up to 20) round-trip; one more is refused */
    m->hp.n_extra = 0;
    char key[32];
    for (int i = 0; i < CC_MAX_META; i++) {
        snprintf(key, sizeof key, "k%d", i);
        assert_int_equal(cc_hparams_set_extra(&m->hp, key, "v"), 0);
    }
    assert_int_equal(cc_hparams_set_extra(&m->hp, "one_more", "v"), -ENOSPC);
    snprintf(path, sizeof path, "%s/extras.safetensors", tmpdir);
    assert_int_equal(cc_model_save(m, path, err, sizeof err), 0);
    assert_int_equal(cc_model_open_file(&r, path, err, sizeof err), 0);
    assert_int_equal(r->hp.n_extra, CC_MAX_META);
    assert_string_equal(r->hp.extra[CC_MAX_META - 1].key, "k31");
    cc_model_close(&r);
    cc_model_close(&m);
}

/* ---- cellcast-tx/3 -------------------------------------------------------------------- */

/* The tiny shape as tx/3 with R = 6: every parameter random, floors >= 0, scales near 1. */
static CcModel *tx3_model(uint64_t seed)
{
    CcHparams hp;
    tiny_hparams(&hp, 1);
    hp.linear_window = 6;
    CcModel *m = random_model(&hp, seed);
    for (int f = 0; f < hp.n_features; f++)
        m->w.norm_floor[f] = fabsf(m->w.norm_floor[f]) + 0.01f;
    return m;
}

static void expect_tx3_refused(const Build *b, const char *needle, const char *needle2)
{
    CcModel *m = tx3_model(5);
    size_t len;
    uint8_t *buf = build_file(m, b, &len);
    expect_refused(buf, len, -EINVAL, needle, needle2);
    free(buf);
    cc_model_close(&m);
}

/* A tx/3 model saves as cellcast-tx/3 and loads back bit for bit; a tx/2 one as tx/2; a
 * file from the independent table loads onto the same parameters; cc_model_open gives a
 * tx/3 model floor 0 and unit calibration. */
static void test_tx3_roundtrip(void **state)
{
    (void)state;
    CcModel *m = tx3_model(21), *r = NULL;
    char path[PATH_MAX], err[ERRLEN] = "";
    snprintf(path, sizeof path, "%s/tx3.safetensors", tmpdir);
    int ret = cc_model_save(m, path, err, sizeof err);
    if (ret)
        fail_msg("save: %d %s", ret, err);
    ret = cc_model_open_file(&r, path, err, sizeof err);
    if (ret)
        fail_msg("load: %d %s", ret, err);
    assert_int_equal(r->hp.linear_window, 6);
    assert_string_equal(cc_hparams_format(&r->hp), "cellcast-tx/3");
    assert_int_equal(r->n_params, m->n_params);
    assert_memory_equal(r->block, m->block, m->n_params * sizeof(float));
    cc_model_close(&r);
    /* the file says so itself */
    FILE *f = fopen(path, "rb");
    char head[4096] = "";
    assert_non_null(f);
    assert_true(fread(head, 1, sizeof head - 1, f) > 8);
    fclose(f);
    assert_non_null(memmem(head, sizeof head, "\"format\":\"cellcast-tx/3\"", 24));
    assert_non_null(memmem(head, sizeof head, "\"linear_window\":\"6\"", 19));
    /* the independent table's file maps onto the same parameters */
    Build b = {0};
    size_t len;
    uint8_t *buf = build_file(m, &b, &len);
    ret = cc_model_open_buffer(&r, buf, len, err, sizeof err);
    if (ret)
        fail_msg("load: %d %s", ret, err);
    assert_memory_equal(r->block, m->block, m->n_params * sizeof(float));
    assert_float_equal(r->w.sigma_scale[3], m->w.sigma_scale[3], 0);
    cc_model_close(&r);
    free(buf);
    /* a tx/2 model has no tx/3 parameters and saves as tx/2 */
    CcHparams hp = m->hp;
    hp.linear_window = 0;
    CcModel *m2 = random_model(&hp, 3);
    assert_int_equal(m2->n_params, m->n_params - (2 * 6 + 2 + 2 + 2 * 2));
    assert_int_equal(cc_model_save(m2, path, err, sizeof err), 0);
    assert_int_equal(cc_model_open_file(&r, path, err, sizeof err), 0);
    assert_int_equal(r->hp.linear_window, 0);
    assert_string_equal(cc_hparams_format(&r->hp), "cellcast-tx/2");
    cc_model_close(&r);
    cc_model_close(&m2);
    /* cc_model_open: floor 0, sigma_scale 1, linear path 0 */
    hp.linear_window = 9;
    assert_int_equal(cc_model_open(&r, &hp, err, sizeof err), 0);
    for (int i = 0; i < hp.n_features * hp.horizon; i++)
        assert_true(r->w.sigma_scale[i] == 1.0f);
    for (int i = 0; i < hp.n_features; i++)
        assert_true(r->w.norm_floor[i] == 0.0f);
    cc_model_close(&r);
    cc_model_close(&m);
}

static void test_tx3_refusals(void **state)
{
    (void)state;
    Build b = {.skip = "linear.weight"};
    expect_tx3_refused(&b, "missing tensor 'linear.weight'", "[2, 6]");
    b = (Build){.skip = "linear.bias"};
    expect_tx3_refused(&b, "missing tensor 'linear.bias'", "[2]");
    b = (Build){.skip = "norm.floor"};
    expect_tx3_refused(&b, "missing tensor 'norm.floor'", "[2]");
    b = (Build){.skip = "calib.sigma_scale"};
    expect_tx3_refused(&b, "missing tensor 'calib.sigma_scale'", "[2, 2]");
    b = (Build){.reshape = "linear.weight"};
    expect_tx3_refused(&b, "tensor 'linear.weight' has shape [3, 6]", "expected [2, 6]");
    b = (Build){.reshape = "calib.sigma_scale"};
    expect_tx3_refused(&b, "tensor 'calib.sigma_scale' has shape [3, 2]", "expected [2, 2]");
    /* linear_window absent, 0, negative, absurd, not a number */
    b = (Build){.meta_key = "linear_window"};
    expect_tx3_refused(&b, "'linear_window' missing", "cellcast-tx/3");
    b.meta_value = "0";
    expect_tx3_refused(&b, "'linear_window' = 0", "at least 1");
    b.meta_value = "-6";
    expect_tx3_refused(&b, "'linear_window' = -6", "at least 1");
    b.meta_value = "100001";
    expect_tx3_refused(&b, "'linear_window' = 100001 is absurd", "100000");
    b.meta_value = "99999999999999999999999";
    expect_tx3_refused(&b, "'linear_window'", "absurd");
    b.meta_value = "6.0";
    expect_tx3_refused(&b, "'linear_window' = '6.0' is not an integer", NULL);
    b.meta_value = "7"; /* the tensors then have the wrong shape */
    expect_tx3_refused(&b, "tensor 'linear.weight' has shape [2, 6]", "expected [2, 7]");
    /* the floor: negative or non-finite */
    b = (Build){.bad_tensor = "norm.floor", .bad_index = 1, .bad_value = -0.5f};
    expect_tx3_refused(&b, "'norm.floor' element 1 (KPI 'dl_bytes') is -0.5", ">= 0");
    b.bad_value = NAN;
    expect_tx3_refused(&b, "tensor 'norm.floor'", "NaN");
    b.bad_value = INFINITY;
    expect_tx3_refused(&b, "tensor 'norm.floor'", "+Inf");
    /* the calibration: not positive or non-finite */
    b = (Build){.bad_tensor = "calib.sigma_scale", .bad_value = 0.0f};
    expect_tx3_refused(&b, "'calib.sigma_scale' element [1, 1]", "must be > 0");
    b.bad_value = -2.0f;
    expect_tx3_refused(&b, "'calib.sigma_scale'", "is -2");
    b.bad_value = NAN;
    expect_tx3_refused(&b, "tensor 'calib.sigma_scale'", "NaN");
    b.bad_value = -INFINITY;
    expect_tx3_refused(&b, "tensor 'calib.sigma_scale'", "-Inf");
    /* tx/3 tensors or metadata in a tx/2 file */
    b = (Build){.meta_key = "format", .meta_value = "cellcast-tx/2"};
    expect_tx3_refused(&b, "'linear_window' in a cellcast-tx/2 file", NULL);
    Build b2 = {.extra_tensor = "linear.bias"};
    expect_build_refused(&b2, 1, "unexpected tensor 'linear.bias'", "cellcast-tx/2");
    /* and cc_model_save refuses to write a negative floor or a zero scale */
    CcModel *m = tx3_model(8);
    char path[PATH_MAX], err[ERRLEN] = "";
    snprintf(path, sizeof path, "%s/bad_tx3.safetensors", tmpdir);
    m->w.norm_floor[0] = -1;
    assert_int_equal(cc_model_save(m, path, err, sizeof err), -EINVAL);
    assert_has(err, "refusing to save");
    assert_has(err, "norm.floor");
    m->w.norm_floor[0] = 0;
    m->w.sigma_scale[2] = 0;
    assert_int_equal(cc_model_save(m, path, err, sizeof err), -EINVAL);
    assert_has(err, "calib.sigma_scale");
    assert_int_equal(access(path, F_OK), -1);
    cc_model_close(&m);
}

static void test_file_errors(void **state)
{
    (void)state;
    CcModel *m = NULL;
    char err[ERRLEN] = "", path[PATH_MAX];
    snprintf(path, sizeof path, "%s/does-not-exist.safetensors", tmpdir);
    assert_int_equal(cc_model_open_file(&m, path, err, sizeof err), -EIO);
    assert_has(err, path);
    assert_has(err, strerror(ENOENT));
    assert_int_equal(cc_model_open_file(&m, tmpdir, err, sizeof err), -EIO);
    assert_has(err, "not a regular file");
    /* an empty file */
    snprintf(path, sizeof path, "%s/empty.safetensors", tmpdir);
    FILE *f = fopen(path, "wb");
    fclose(f);
    assert_int_equal(cc_model_open_file(&m, path, err, sizeof err), -EINVAL);
    assert_has(err, path);
    assert_has(err, "too short");
    unlink(path);
    /* saving into a directory that does not exist */
    CcHparams hp;
    tiny_hparams(&hp, 1);
    CcModel *good = random_model(&hp, 4);
    snprintf(path, sizeof path, "%s/no/such/dir/m.safetensors", tmpdir);
    assert_int_equal(cc_model_save(good, path, err, sizeof err), -EIO);
    assert_has(err, path);
    assert_has(err, strerror(ENOENT));
    cc_model_close(&good);
}

/* Random corruption of a valid file: never a crash, only 0 or -EINVAL, and a model that
 * loads is valid. A tiny in-test fuzzer; tests/fuzz/fuzz_loader.c is the real one. */
static void test_random_corruption(void **state)
{
    (void)state;
    size_t len;
    uint8_t *buf = valid_tiny(&len), *p = malloc(len);
    uint64_t s = 42;
    int accepted = 0;
    for (int it = 0; it < 3000; it++) {
        memcpy(p, buf, len);
        int flips = 1 + it % 4;
        for (int k = 0; k < flips; k++) {
            tl_rng_next(&s);
            size_t at = (size_t)(s >> 33) % (it % 2 ? len : 400); // half in the header
            p[at] = (uint8_t)(s >> 20);
        }
        CcModel *m = NULL;
        char err[ERRLEN];
        int ret = cc_model_open_buffer(&m, p, len, err, sizeof err);
        if (ret != 0 && ret != -EINVAL)
            fail_msg("iteration %d: %d %s", it, ret, err);
        if (ret == 0) {
            accepted++;
            assert_int_equal(cc_hparams_validate(&m->hp, err, sizeof err), 0);
            cc_model_close(&m);
        }
    }
    print_message("random corruption: %d of 3000 still loaded (flips in data bytes)\n", accepted);
    free(p);
    free(buf);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrip_save_load),
        cmocka_unit_test(test_spec_names_mapped),
        cmocka_unit_test(test_f16_file),
        cmocka_unit_test(test_bf16_file),
        cmocka_unit_test(test_st_handwritten),
        cmocka_unit_test(test_st_writer),
        cmocka_unit_test(test_fuzz_seeds),
        cmocka_unit_test(test_python_written_file),
        cmocka_unit_test(test_truncated),
        cmocka_unit_test(test_header_length),
        cmocka_unit_test(test_bad_json),
        cmocka_unit_test(test_overlapping_offsets),
        cmocka_unit_test(test_out_of_range_offsets),
        cmocka_unit_test(test_wrong_dtype),
        cmocka_unit_test(test_wrong_shape),
        cmocka_unit_test(test_missing_tensor),
        cmocka_unit_test(test_unexpected_tensor),
        cmocka_unit_test(test_nonfinite_weight),
        cmocka_unit_test(test_absurd_sizes),
        cmocka_unit_test(test_unknown_format),
        cmocka_unit_test(test_missing_metadata_key),
        cmocka_unit_test(test_metadata_integers_strict),
        cmocka_unit_test(test_features),
        cmocka_unit_test(test_extra_metadata),
        cmocka_unit_test(test_tx3_roundtrip),
        cmocka_unit_test(test_tx3_refusals),
        cmocka_unit_test(test_file_errors),
        cmocka_unit_test(test_random_corruption),
    };
    return cmocka_run_group_tests(tests, setup_tmpdir, teardown_tmpdir);
}
