/* cc_model.c — hyperparameters, the parameter block and random initialisation. Loading
 * and saving safetensors lives in cc_model_io.c. */
#include "cc_model.h"
#include "cc_rng.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void cc_hparams_default(CcHparams *hp)
{
    memset(hp, 0, sizeof *hp);
    hp->n_features = 8;
    hp->patch_len = 16;
    hp->n_patches = 21;
    hp->norm_window = 336;
    hp->d_model = 64;
    hp->n_heads = 4;
    hp->n_layers = 2;
    hp->d_ff = 128;
    hp->horizon = 24;
    hp->step_seconds = 3600;
    hp->tz_offset_s = 0;
    for (int f = 0; f < hp->n_features; f++)
        snprintf(hp->features[f], CC_FEATURE_NAME_MAX, "kpi%d", f);
}

int cc_hparams_validate(const CcHparams *hp, char *err, size_t errlen)
{
#define CHECK_RANGE(field, lo, hi)                                                                 \
    if (hp->field < (lo) || hp->field > (hi))                                                      \
        return cc_errf(err, errlen, -EINVAL, "%s = %lld out of range [%lld, %lld]", #field,        \
                       (long long)hp->field, (long long)(lo), (long long)(hi));
    CHECK_RANGE(n_features, 1, CC_MAX_FEATURES);
    CHECK_RANGE(patch_len, 1, CC_MAX_PATCH_LEN);
    CHECK_RANGE(n_patches, 1, CC_MAX_N_PATCHES);
    CHECK_RANGE(norm_window, 1, CC_MAX_NORM_WINDOW);
    CHECK_RANGE(d_model, 2, CC_MAX_D_MODEL);
    CHECK_RANGE(n_heads, 1, CC_MAX_D_MODEL);
    CHECK_RANGE(n_layers, 1, CC_MAX_LAYERS);
    CHECK_RANGE(d_ff, 1, CC_MAX_D_FF);
    CHECK_RANGE(horizon, 1, CC_MAX_HORIZON);
    CHECK_RANGE(linear_window, 0, CC_MAX_LINEAR_WINDOW);
    CHECK_RANGE(step_seconds, 1, 366LL * 86400);
    CHECK_RANGE(tz_offset_s, -86400, 86400);
#undef CHECK_RANGE
    if (hp->d_model % hp->n_heads)
        return cc_errf(err, errlen, -EINVAL, "n_heads = %d does not divide d_model = %d",
                       hp->n_heads, hp->d_model);
    if (hp->d_model % 2)
        return cc_errf(err, errlen, -EINVAL, "d_model = %d must be even", hp->d_model);
    for (int f = 0; f < hp->n_features; f++) {
        if (!hp->features[f][0])
            return cc_errf(err, errlen, -EINVAL, "feature %d has an empty name", f);
        for (int g = 0; g < f; g++)
            if (!strcmp(hp->features[f], hp->features[g]))
                return cc_errf(err, errlen, -EINVAL, "feature name '%s' appears twice",
                               hp->features[f]);
    }
    return 0;
}

size_t cc_params_sizes(const CcHparams *hp, size_t s[CC_NUM_PARAM_ARRAYS])
{
    size_t D = hp->d_model, L = hp->n_layers, FF = hp->d_ff, IN = hp->patch_len + 4;
    size_t F = hp->n_features, HZ = hp->horizon, HZ2 = 2 * HZ, R = hp->linear_window;
    size_t tx3 = R > 0; /* the floor and the calibration exist only in tx/3 */
    size_t v[CC_NUM_PARAM_ARRAYS] = {
        D * IN,        D,
        F * D,                       // embed_w, embed_b, chan
        L * 3 * D * D, L * 3 * D,    // qkv
        L * D * D,     L * D,        // o
        L * D,         L * D,        // ln1
        L * FF * D,    L * FF,       // up
        L * D * FF,    L * D,        // down
        L * D,         L * D,        // ln2
        HZ2 * D,       HZ2,          // head
        HZ * R,        HZ * tx3,     // lin_w, lin_b
        F * tx3,       F * HZ * tx3, // norm_floor, sigma_scale
    };
    size_t total = 0;
    for (int i = 0; i < CC_NUM_PARAM_ARRAYS; i++) {
        if (s)
            s[i] = v[i];
        total += v[i];
    }
    return total;
}

void cc_params_point(CcParams *p, const CcHparams *hp, float *block)
{
    size_t s[CC_NUM_PARAM_ARRAYS];
    cc_params_sizes(hp, s);
    float **ptrs[CC_NUM_PARAM_ARRAYS] = {
        &p->embed_w, &p->embed_b,    &p->chan,        &p->qkv_w,  &p->qkv_b,  &p->o_w,
        &p->o_b,     &p->ln1_g,      &p->ln1_b,       &p->up_w,   &p->up_b,   &p->down_w,
        &p->down_b,  &p->ln2_g,      &p->ln2_b,       &p->head_w, &p->head_b, &p->lin_w,
        &p->lin_b,   &p->norm_floor, &p->sigma_scale,
    };
    for (int i = 0; i < CC_NUM_PARAM_ARRAYS; i++) {
        *ptrs[i] = block;
        block += s[i];
    }
}

int cc_model_open(CcModel **out, const CcHparams *hp, char *err, size_t errlen)
{
    int ret = cc_hparams_validate(hp, err, errlen);
    CcModel *m = NULL;
    if (ret < 0)
        goto error;
    ret = -ENOMEM;
    m = calloc(1, sizeof *m);
    if (!m)
        goto error;
    m->hp = *hp;
    m->n_params = cc_params_sizes(hp, NULL);
    m->block = calloc(m->n_params, sizeof(float));
    if (!m->block)
        goto error;
    cc_params_point(&m->w, &m->hp, m->block);
    for (size_t i = 0; i < (size_t)hp->n_features * hp->horizon && hp->linear_window > 0; i++)
        m->w.sigma_scale[i] = 1.0f;
    *out = m;
    return 0;
error:
    if (ret == -ENOMEM)
        cc_errf(err, errlen, ret, "out of memory allocating the model");
    cc_model_close(&m);
    return ret;
}

void cc_model_close(CcModel **pm)
{
    if (!pm || !*pm)
        return;
    free((*pm)->block);
    free(*pm);
    *pm = NULL;
}

static void fill_uniform(float *w, size_t n, double bound, uint64_t *s)
{
    for (size_t i = 0; i < n; i++)
        w[i] = (float)((2 * cc_rng_uniform(s) - 1) * bound);
}

static void fill_xavier(float *w, size_t rows, size_t cols, size_t count, uint64_t *s)
{
    fill_uniform(w, rows * cols * count, sqrt(6.0 / (double)(rows + cols)), s);
}

static void fill_const(float *w, size_t n, float v)
{
    for (size_t i = 0; i < n; i++)
        w[i] = v;
}

void cc_model_init_random(CcModel *m, uint64_t seed)
{
    const CcHparams *hp = &m->hp;
    size_t D = hp->d_model, L = hp->n_layers, FF = hp->d_ff, IN = hp->patch_len + 4;
    uint64_t s = seed ^ 0x63656c6c63617374ULL; /* "cellcast" */
    memset(m->block, 0, m->n_params * sizeof(float));
    fill_xavier(m->w.embed_w, D, IN, 1, &s);
    for (size_t i = 0; i < (size_t)hp->n_features * D; i++) { /* Box–Muller, sd 0.02 */
        double u1 = cc_rng_uniform(&s) + 1e-12, u2 = cc_rng_uniform(&s);
        m->w.chan[i] = (float)(0.02 * sqrt(-2 * log(u1)) * cos(2 * M_PI * u2));
    }
    fill_xavier(m->w.qkv_w, D, D, 3 * L, &s);
    fill_xavier(m->w.o_w, D, D, L, &s);
    fill_const(m->w.ln1_g, L * D, 1.0f);
    fill_xavier(m->w.up_w, FF, D, L, &s);
    fill_xavier(m->w.down_w, D, FF, L, &s);
    fill_const(m->w.ln2_g, L * D, 1.0f);
    fill_xavier(m->w.head_w, 2 * (size_t)hp->horizon, D, 1, &s);
    if (hp->linear_window > 0) {
        fill_uniform(m->w.lin_w, (size_t)hp->horizon * hp->linear_window,
                     1.0 / sqrt((double)hp->linear_window), &s);
        fill_const(m->w.sigma_scale, (size_t)hp->n_features * hp->horizon, 1.0f);
    }
}

const float *cc_model_sd_scale(const CcModel *m)
{
    return m->hp.linear_window > 0 ? m->w.sigma_scale : NULL;
}

const char *cc_hparams_format(const CcHparams *hp)
{
    return hp->linear_window > 0 ? CC_FORMAT_TX3 : CC_FORMAT_TX2;
}

int cc_hparams_set_extra(CcHparams *hp, const char *key, const char *value)
{
    if (strlen(key) >= sizeof hp->extra[0].key || strlen(value) >= sizeof hp->extra[0].value)
        return -EINVAL;
    int i = 0;
    while (i < hp->n_extra && strcmp(hp->extra[i].key, key))
        i++;
    if (i == hp->n_extra) {
        if (hp->n_extra == CC_MAX_META)
            return -ENOSPC;
        hp->n_extra++;
    }
    snprintf(hp->extra[i].key, sizeof hp->extra[i].key, "%s", key);
    snprintf(hp->extra[i].value, sizeof hp->extra[i].value, "%s", value);
    return 0;
}

const char *cc_hparams_get_extra(const CcHparams *hp, const char *key)
{
    for (int i = 0; i < hp->n_extra; i++)
        if (!strcmp(hp->extra[i].key, key))
            return hp->extra[i].value;
    return NULL;
}

int cc_hparams_feature_index(const CcHparams *hp, const char *name)
{
    for (int f = 0; f < hp->n_features; f++)
        if (!strcmp(hp->features[f], name))
            return f;
    return -1;
}
