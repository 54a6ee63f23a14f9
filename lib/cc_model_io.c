/*
 * cc_model_io.c — cellcast-tx/3 and cellcast-tx/2 weight files: safetensors with the spec's
 * tensor names and __metadata__ hyperparameters, mapped onto the CcParams block (q/k/v
 * stacked in qkv_w). A tx/2 file is read as a model with linear_window = 0.
 * What is refused and why: see cc_safetensors.h ("How cc_model_open_file() uses this").
 */
#include "cc_model.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cc_safetensors.h"

/* One tensor of the spec's table and where it lives in the parameter block. */
typedef struct Slot {
    char name[48];
    int ndim;
    int64_t shape[2];
    size_t offset; // in floats from the start of the block
} Slot;

static void slot_set(Slot *s, const char *name, int ndim, size_t d0, size_t d1, size_t offset)
{
    snprintf(s->name, sizeof s->name, "%s", name);
    s->ndim = ndim;
    s->shape[0] = (int64_t)d0;
    s->shape[1] = (int64_t)d1;
    s->offset = offset;
}

/* Fills the spec's table, in file order, for valid hparams; returns the count (slots may be
 * NULL to count). */
static int model_slots(const CcHparams *hp, Slot *slots)
{
    size_t sz[CC_NUM_PARAM_ARRAYS], off[CC_NUM_PARAM_ARRAYS];
    cc_params_sizes(hp, sz);
    off[0] = 0;
    for (int i = 1; i < CC_NUM_PARAM_ARRAYS; i++)
        off[i] = off[i - 1] + sz[i - 1];
    enum {
        EMBED_W,
        EMBED_B,
        CHAN,
        QKV_W,
        QKV_B,
        O_W,
        O_B,
        LN1_G,
        LN1_B,
        UP_W,
        UP_B,
        DOWN_W,
        DOWN_B,
        LN2_G,
        LN2_B,
        HEAD_W,
        HEAD_B,
        LIN_W,
        LIN_B,
        FLOOR,
        SCALE
    };
    size_t D = hp->d_model, FF = hp->d_ff, IN = hp->patch_len + 4, F = hp->n_features;
    size_t HZ2 = 2 * (size_t)hp->horizon, HZ = hp->horizon, R = hp->linear_window;
    int n = 5 + 16 * hp->n_layers + (R > 0 ? 4 : 0);
    if (!slots)
        return n;
    Slot *s = slots;
    slot_set(s++, "embed.weight", 2, D, IN, off[EMBED_W]);
    slot_set(s++, "embed.bias", 1, D, 0, off[EMBED_B]);
    slot_set(s++, "channel_embed.weight", 2, F, D, off[CHAN]);
    for (size_t l = 0; l < (size_t)hp->n_layers; l++) {
        char nm[48];
        static const char *qkv[3] = {"q_proj", "k_proj", "v_proj"};
        for (size_t j = 0; j < 3; j++) {
            snprintf(nm, sizeof nm, "layers.%zu.attn.%s.weight", l, qkv[j]);
            slot_set(s++, nm, 2, D, D, off[QKV_W] + (l * 3 + j) * D * D);
            snprintf(nm, sizeof nm, "layers.%zu.attn.%s.bias", l, qkv[j]);
            slot_set(s++, nm, 1, D, 0, off[QKV_B] + (l * 3 + j) * D);
        }
#define LAYER(fmt, nd, d0, d1, base, stride)                                                       \
    snprintf(nm, sizeof nm, "layers.%zu." fmt, l);                                                 \
    slot_set(s++, nm, nd, d0, d1, off[base] + l * (stride));
        LAYER("attn.o_proj.weight", 2, D, D, O_W, D * D);
        LAYER("attn.o_proj.bias", 1, D, 0, O_B, D);
        LAYER("norm1.weight", 1, D, 0, LN1_G, D);
        LAYER("norm1.bias", 1, D, 0, LN1_B, D);
        LAYER("ffn.up.weight", 2, FF, D, UP_W, FF * D);
        LAYER("ffn.up.bias", 1, FF, 0, UP_B, FF);
        LAYER("ffn.down.weight", 2, D, FF, DOWN_W, D * FF);
        LAYER("ffn.down.bias", 1, D, 0, DOWN_B, D);
        LAYER("norm2.weight", 1, D, 0, LN2_G, D);
        LAYER("norm2.bias", 1, D, 0, LN2_B, D);
#undef LAYER
    }
    slot_set(s++, "head.weight", 2, HZ2, D, off[HEAD_W]);
    slot_set(s++, "head.bias", 1, HZ2, 0, off[HEAD_B]);
    if (R > 0) {
        slot_set(s++, "linear.weight", 2, HZ, R, off[LIN_W]);
        slot_set(s++, "linear.bias", 1, HZ, 0, off[LIN_B]);
        slot_set(s++, "norm.floor", 1, F, 0, off[FLOOR]);
        slot_set(s++, "calib.sigma_scale", 2, F, HZ, off[SCALE]);
    }
    return (int)(s - slots);
}

static size_t slot_numel(const Slot *s)
{
    return s->ndim == 2 ? (size_t)(s->shape[0] * s->shape[1]) : (size_t)s->shape[0];
}

static const char *shape_str(char *buf, size_t len, const int64_t *shape, int ndim)
{
    size_t pos = (size_t)snprintf(buf, len, "[");
    for (int i = 0; i < ndim && pos < len; i++)
        pos += (size_t)snprintf(buf + pos, len - pos, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (pos < len)
        snprintf(buf + pos, len - pos, "]");
    return buf;
}

/* ------------------------------------------------------------------------- metadata */

static const struct {
    const char *key;
    size_t offset;
    int is64;
} int_keys[] = {
    {"d_model", offsetof(CcHparams, d_model), 0},
    {"n_heads", offsetof(CcHparams, n_heads), 0},
    {"n_layers", offsetof(CcHparams, n_layers), 0},
    {"d_ff", offsetof(CcHparams, d_ff), 0},
    {"patch_len", offsetof(CcHparams, patch_len), 0},
    {"n_patches", offsetof(CcHparams, n_patches), 0},
    {"norm_window", offsetof(CcHparams, norm_window), 0},
    {"horizon", offsetof(CcHparams, horizon), 0},
    {"step_seconds", offsetof(CcHparams, step_seconds), 1},
    {"tz_offset_s", offsetof(CcHparams, tz_offset_s), 1},
};
#define N_INT_KEYS (int)(sizeof int_keys / sizeof int_keys[0])

static const struct {
    const char *key;
    size_t offset, size;
} str_keys[] = {
    {"name", offsetof(CcHparams, name), sizeof(((CcHparams *)0)->name)},
    {"version", offsetof(CcHparams, version), sizeof(((CcHparams *)0)->version)},
    {"trained_on", offsetof(CcHparams, trained_on), sizeof(((CcHparams *)0)->trained_on)},
    {"created_at", offsetof(CcHparams, created_at), sizeof(((CcHparams *)0)->created_at)},
};
#define N_STR_KEYS (int)(sizeof str_keys / sizeof str_keys[0])

static int is_reserved_key(const char *key)
{
    if (!strcmp(key, "format") || !strcmp(key, "features") || !strcmp(key, "linear_window"))
        return 1;
    for (int i = 0; i < N_INT_KEYS; i++)
        if (!strcmp(key, int_keys[i].key))
            return 1;
    for (int i = 0; i < N_STR_KEYS; i++)
        if (!strcmp(key, str_keys[i].key))
            return 1;
    return 0;
}

/* Strict decimal integer: -?(0|[1-9][0-9]*). 0, -1 not an integer, -2 beyond int64. */
static int parse_int_strict(const char *s, int64_t *out)
{
    const char *p = s;
    int neg = *p == '-';
    p += neg;
    if (!*p || *p < '0' || *p > '9' || (*p == '0' && p[1]))
        return -1;
    uint64_t v = 0;
    for (; *p; p++) {
        if (*p < '0' || *p > '9')
            return -1;
        if (v > (UINT64_MAX - 9) / 10)
            return -2;
        v = v * 10 + (uint64_t)(*p - '0');
    }
    if (v > (uint64_t)INT64_MAX + neg)
        return -2;
    *out = neg ? (int64_t)(0 - v) : (int64_t)v;
    return neg && v == 0 ? -1 : 0; // "-0" is not canonical
}

/* A feature name must be usable as a CSV column and survive the comma-separated list. */
static int feature_name_problem(const char *s, size_t len, const char **why)
{
    if (!len)
        return *why = "is empty", -1;
    if (len >= CC_FEATURE_NAME_MAX)
        return *why = "is too long (at most 63 bytes)", -1;
    if (s[0] == ' ' || s[0] == '\t' || s[len - 1] == ' ' || s[len - 1] == '\t')
        return *why = "has leading or trailing whitespace", -1;
    for (size_t i = 0; i < len; i++) {
        if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
            return *why = "contains a control character", -1;
        if (s[i] == ',')
            return *why = "contains a comma", -1;
    }
    return 0;
}

static int parse_features(CcHparams *hp, const char *list, char *err, size_t errlen)
{
    int n = 0;
    const char *p = list;
    for (;;) {
        const char *c = strchr(p, ',');
        size_t len = c ? (size_t)(c - p) : strlen(p);
        const char *why;
        if (n == CC_MAX_FEATURES)
            return cc_errf(err, errlen, -EINVAL, "metadata 'features' lists more than %d names",
                           CC_MAX_FEATURES);
        if (feature_name_problem(p, len, &why) < 0)
            return cc_errf(err, errlen, -EINVAL, "metadata 'features': name %d ('%.*s') %s", n,
                           (int)(len < 80 ? len : 80), p, why);
        memcpy(hp->features[n], p, len);
        hp->features[n][len] = 0;
        n++;
        if (!c)
            break;
        p = c + 1;
    }
    hp->n_features = n;
    return 0;
}

static int hparams_from_meta(CcHparams *hp, const CcSafetensors *st, char *err, size_t errlen)
{
    memset(hp, 0, sizeof *hp);
    const char *fmt = cc_st_meta_get(st, "format");
    if (!fmt)
        return cc_errf(err, errlen, -EINVAL,
                       "metadata key 'format' missing: not a %s model (no __metadata__ "
                       "\"format\")",
                       CC_FORMAT_TX3);
    int tx3 = !strcmp(fmt, CC_FORMAT_TX3);
    if (!tx3 && strcmp(fmt, CC_FORMAT_TX2))
        return cc_errf(err, errlen, -EINVAL, "unknown format '%.64s' (expected '%s' or '%s')", fmt,
                       CC_FORMAT_TX3, CC_FORMAT_TX2);
    const char *lw = cc_st_meta_get(st, "linear_window");
    if (!tx3 && lw)
        return cc_errf(err, errlen, -EINVAL,
                       "metadata 'linear_window' in a %s file (the linear path is %s only)",
                       CC_FORMAT_TX2, CC_FORMAT_TX3);
    if (tx3) {
        int64_t r = 0;
        if (!lw)
            return cc_errf(err, errlen, -EINVAL,
                           "metadata key 'linear_window' missing (required by %s)", CC_FORMAT_TX3);
        int pr = parse_int_strict(lw, &r);
        if (pr == -1)
            return cc_errf(err, errlen, -EINVAL,
                           "metadata 'linear_window' = '%.40s' is not an integer", lw);
        if (pr == -2 || r > CC_MAX_LINEAR_WINDOW)
            return cc_errf(err, errlen, -EINVAL,
                           "metadata 'linear_window' = %.40s is absurd (at most %d steps)", lw,
                           CC_MAX_LINEAR_WINDOW);
        if (r < 1)
            return cc_errf(
                err, errlen, -EINVAL,
                "metadata 'linear_window' = %lld: a %s model needs a linear window of at "
                "least 1 step",
                (long long)r, CC_FORMAT_TX3);
        hp->linear_window = (int)r;
    }
    for (int i = 0; i < N_INT_KEYS; i++) {
        const char *v = cc_st_meta_get(st, int_keys[i].key);
        int64_t x;
        if (!v)
            return cc_errf(err, errlen, -EINVAL, "metadata key '%s' missing", int_keys[i].key);
        int r = parse_int_strict(v, &x);
        if (r == -1)
            return cc_errf(err, errlen, -EINVAL, "metadata '%s' = '%.40s' is not an integer",
                           int_keys[i].key, v);
        if (r == -2)
            return cc_errf(err, errlen, -EINVAL,
                           "metadata '%s' = %.40s is absurd (out of "
                           "range)",
                           int_keys[i].key, v);
        if (int_keys[i].is64) {
            *(int64_t *)((char *)hp + int_keys[i].offset) = x;
        } else {
            if (x < INT_MIN || x > INT_MAX)
                return cc_errf(err, errlen, -EINVAL,
                               "metadata '%s' = %s is absurd (out of "
                               "range)",
                               int_keys[i].key, v);
            *(int *)((char *)hp + int_keys[i].offset) = (int)x;
        }
    }
    const char *feat = cc_st_meta_get(st, "features");
    if (!feat)
        return cc_errf(err, errlen, -EINVAL, "metadata key 'features' missing");
    int ret = parse_features(hp, feat, err, errlen);
    if (ret < 0)
        return ret;
    for (int i = 0; i < N_STR_KEYS; i++) {
        const char *v = cc_st_meta_get(st, str_keys[i].key);
        if (!v)
            continue;
        if (strlen(v) >= str_keys[i].size)
            return cc_errf(err, errlen, -EINVAL, "metadata '%s' too long (%zu bytes, at most %zu)",
                           str_keys[i].key, strlen(v), str_keys[i].size - 1);
        memcpy((char *)hp + str_keys[i].offset, v, strlen(v) + 1);
    }
    for (int i = 0; i < cc_st_meta_count(st); i++) {
        const char *k = cc_st_meta_key(st, i), *v = cc_st_meta_value(st, i);
        if (is_reserved_key(k))
            continue;
        ret = cc_hparams_set_extra(hp, k, v);
        if (ret == -ENOSPC)
            return cc_errf(err, errlen, -EINVAL, "too many extra metadata keys (at most %d)",
                           CC_MAX_META);
        if (ret < 0)
            return cc_errf(err, errlen, -EINVAL,
                           "extra metadata '%.64s' too long (key at most "
                           "%zu bytes, value at most %zu)",
                           k, sizeof hp->extra[0].key - 1, sizeof hp->extra[0].value - 1);
    }
    return 0;
}

/* --------------------------------------------------------------------------- loading */

static int cmp_slot(const void *a, const void *b)
{
    return strcmp(((const Slot *)a)->name, ((const Slot *)b)->name);
}

/* Checks that the file holds exactly the table's tensors with the table's shapes. */
static int check_tensors(const CcSafetensors *st, const CcHparams *hp, Slot *slots, int n,
                         char *err, size_t errlen)
{
    char a[160], b[160];
    const CcStTensor *ce = cc_st_find(st, "channel_embed.weight");
    if (ce && ce->ndim == 2 && ce->shape[0] != hp->n_features)
        return cc_errf(err, errlen, -EINVAL,
                       "feature count mismatch: metadata 'features' lists %d names but "
                       "channel_embed.weight has %lld rows",
                       hp->n_features, (long long)ce->shape[0]);
    for (int i = 0; i < n; i++) {
        const Slot *s = &slots[i];
        const CcStTensor *t = cc_st_find(st, s->name);
        if (!t)
            return cc_errf(err, errlen, -EINVAL, "missing tensor '%s' (expected shape %s)", s->name,
                           shape_str(a, sizeof a, s->shape, s->ndim));
        int same = t->ndim == s->ndim;
        for (int d = 0; same && d < s->ndim; d++)
            same = t->shape[d] == s->shape[d];
        if (!same)
            return cc_errf(err, errlen, -EINVAL, "tensor '%s' has shape %s, expected %s", s->name,
                           shape_str(a, sizeof a, t->shape, t->ndim),
                           shape_str(b, sizeof b, s->shape, s->ndim));
    }
    if (cc_st_count(st) == n) // all n present, names unique: nothing else
        return 0;
    /* Sorted copy of the table to find the first tensor that is not in it. */
    Slot *sorted = malloc((size_t)n * sizeof *sorted);
    if (!sorted)
        return cc_errf(err, errlen, -ENOMEM, "out of memory checking tensor names");
    memcpy(sorted, slots, (size_t)n * sizeof *sorted);
    qsort(sorted, (size_t)n, sizeof *sorted, cmp_slot);
    int ret = 0;
    for (int i = 0; i < cc_st_count(st) && !ret; i++) {
        const CcStTensor *t = cc_st_tensor(st, i);
        Slot key;
        if (strlen(t->name) < sizeof key.name) {
            snprintf(key.name, sizeof key.name, "%s", t->name);
            if (bsearch(&key, sorted, (size_t)n, sizeof *sorted, cmp_slot))
                continue;
        }
        ret = cc_errf(err, errlen, -EINVAL,
                      "unexpected tensor '%.100s' (not in the %s table "
                      "for n_layers = %d)",
                      t->name, cc_hparams_format(hp), hp->n_layers);
    }
    free(sorted);
    return ret;
}

/*
 * Largest |weight| a trained model plausibly has. Inputs are normalised per window, so
 * weights are O(1)..O(100); a finite but huge one (3e38 passes isfinite) overflows the
 * activations to Inf and every forecast is served as null. norm.floor is in the KPI's own
 * units (bytes can be 1e9) and is exempt; it is range-checked in check_tx3_ranges.
 */
#define WEIGHT_ABS_MAX 1e8f

/* First element of x[0..n) with |x| > WEIGHT_ABS_MAX (finite ones are checked first), or -1. */
static long long first_absurd(const float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (fabsf(x[i]) > WEIGHT_ABS_MAX)
            return (long long)i;
    return -1;
}

static int absurd_error(char *err, size_t errlen, const char *what, const char *name, long long i,
                        float v)
{
    return cc_errf(err, errlen, -EINVAL,
                   "%stensor '%s' element %lld is %g: finite but absurd for a trained weight "
                   "(|w| > %g; its activations would overflow to Inf and every forecast would "
                   "be null)",
                   what, name, i, (double)v, (double)WEIGHT_ABS_MAX);
}

/* First non-finite element of x[0..n), or -1. */
static long long first_nonfinite(const float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i]))
            return (long long)i;
    return -1;
}

static int nonfinite_error(char *err, size_t errlen, const char *what, const char *name,
                           long long i, float v)
{
    return cc_errf(err, errlen, -EINVAL,
                   "%stensor '%s' has a non-finite weight: element %lld "
                   "is %s",
                   what, name, i,
                   isnan(v) ? "NaN"
                   : v > 0  ? "+Inf"
                            : "-Inf");
}

/* The tx/3 parts whose range the spec fixes: a floor >= 0, a calibration > 0 (finiteness is
 * checked with every weight). `what` prefixes the message ("refusing to save: "). */
static int check_tx3_ranges(const CcModel *m, const char *what, char *err, size_t errlen)
{
    const CcHparams *hp = &m->hp;
    if (hp->linear_window <= 0)
        return 0;
    for (int f = 0; f < hp->n_features; f++) {
        float v = m->w.norm_floor[f];
        if (isfinite(v) && v < 0)
            return cc_errf(err, errlen, -EINVAL,
                           "%stensor 'norm.floor' element %d (KPI '%s') is %g: the floor must be "
                           ">= 0",
                           what, f, hp->features[f], (double)v);
        for (int k = 0; k < hp->horizon; k++) {
            v = m->w.sigma_scale[(size_t)f * hp->horizon + k];
            if (isfinite(v) && v <= 0)
                return cc_errf(err, errlen, -EINVAL,
                               "%stensor 'calib.sigma_scale' element [%d, %d] (KPI '%s', horizon "
                               "step %d) is %g: a scale must be > 0",
                               what, f, k, hp->features[f], k + 1, (double)v);
        }
    }
    return 0;
}

int cc_model_open_buffer(CcModel **out, const uint8_t *buf, size_t len, char *err, size_t errlen)
{
    CcSafetensors *st = NULL;
    CcModel *m = NULL;
    Slot *slots = NULL;
    CcHparams *hp = malloc(sizeof *hp);
    char tmp[256];
    int ret = -ENOMEM;
    *out = NULL;
    if (!hp) {
        cc_errf(err, errlen, ret, "out of memory");
        goto error;
    }
    if ((ret = cc_st_parse(&st, buf, len, err, errlen)) < 0)
        goto error;
    if ((ret = hparams_from_meta(hp, st, err, errlen)) < 0)
        goto error;
    if ((ret = cc_hparams_validate(hp, tmp, sizeof tmp)) < 0) {
        cc_errf(err, errlen, ret, "bad hyperparameters in metadata: %s", tmp);
        goto error;
    }
    int n = model_slots(hp, NULL);
    if (!(slots = malloc((size_t)n * sizeof *slots))) {
        ret = cc_errf(err, errlen, -ENOMEM, "out of memory");
        goto error;
    }
    model_slots(hp, slots);
    /* After this every parameter is backed by bytes of the buffer: the allocation below is
     * bounded by the file size. */
    if ((ret = check_tensors(st, hp, slots, n, err, errlen)) < 0)
        goto error;
    if ((ret = cc_model_open(&m, hp, err, errlen)) < 0)
        goto error;
    for (int i = 0; i < n; i++) {
        const CcStTensor *t = cc_st_find(st, slots[i].name);
        float *dst = m->block + slots[i].offset;
        cc_st_to_f32(t, dst);
        long long bad = first_nonfinite(dst, t->numel);
        if (bad >= 0) {
            ret = nonfinite_error(err, errlen, "", t->name, bad, dst[bad]);
            goto error;
        }
        if (strcmp(t->name, "norm.floor") && (bad = first_absurd(dst, t->numel)) >= 0) {
            ret = absurd_error(err, errlen, "", t->name, bad, dst[bad]);
            goto error;
        }
    }
    if ((ret = check_tx3_ranges(m, "", err, errlen)) < 0)
        goto error;
    *out = m;
    m = NULL;
    ret = 0;
error:
    cc_model_close(&m);
    free(slots);
    cc_st_close(&st);
    free(hp);
    return ret;
}

int cc_model_open_file(CcModel **out, const char *path, char *err, size_t errlen)
{
    FILE *f = NULL;
    uint8_t *buf = NULL;
    char msg[512];
    struct stat sb;
    int ret;
    *out = NULL;
    if (!(f = fopen(path, "rb"))) {
        ret = cc_errf(err, errlen, -EIO, "cannot open '%s': %s", path, strerror(errno));
        goto error;
    }
    if (fstat(fileno(f), &sb) < 0) {
        ret = cc_errf(err, errlen, -EIO, "cannot stat '%s': %s", path, strerror(errno));
        goto error;
    }
    if (!S_ISREG(sb.st_mode)) {
        ret = cc_errf(err, errlen, -EIO, "'%s' is not a regular file", path);
        goto error;
    }
    if ((uint64_t)sb.st_size > CC_ST_MAX_FILE) {
        ret = cc_errf(err, errlen, -EINVAL,
                      "'%s' is %lld bytes: absurd for a model (at most "
                      "%llu)",
                      path, (long long)sb.st_size, (unsigned long long)CC_ST_MAX_FILE);
        goto error;
    }
    size_t size = (size_t)sb.st_size;
    if (!(buf = malloc(size ? size : 1))) {
        ret = cc_errf(err, errlen, -ENOMEM, "out of memory reading '%s' (%zu bytes)", path, size);
        goto error;
    }
    size_t got = fread(buf, 1, size, f); // short when the file shrank: parsed as truncated
    if (ferror(f)) {
        ret = cc_errf(err, errlen, -EIO, "error reading '%s': %s", path, strerror(errno));
        goto error;
    }
    fclose(f);
    f = NULL;
    if ((ret = cc_model_open_buffer(out, buf, got, msg, sizeof msg)) < 0)
        cc_errf(err, errlen, ret, "%s: %s", path, msg);
error:
    if (f)
        fclose(f);
    free(buf);
    return ret;
}

/* ---------------------------------------------------------------------------- saving */

int cc_model_save(const CcModel *m, const char *path, char *err, size_t errlen)
{
    const CcHparams *hp = &m->hp;
    enum { MAX_KEYS = 3 + N_INT_KEYS + N_STR_KEYS + CC_MAX_META };
    const char *keys[MAX_KEYS], *values[MAX_KEYS];
    char ints[N_INT_KEYS][24], lw[24], tmp[256];
    char *features = NULL, *tmp_path = NULL;
    Slot *slots = NULL;
    CcStWriteTensor *ts = NULL;
    FILE *f = NULL;
    int ret, nk = 0, fd = -1;

    if ((ret = cc_hparams_validate(hp, tmp, sizeof tmp)) < 0) {
        cc_errf(err, errlen, ret, "refusing to save: %s", tmp);
        goto error;
    }
    ret = -ENOMEM;
    size_t flen = (size_t)hp->n_features * CC_FEATURE_NAME_MAX;
    if (!(features = malloc(flen)))
        goto error;
    features[0] = 0;
    for (int i = 0, pos = 0; i < hp->n_features; i++) {
        const char *why;
        if (feature_name_problem(hp->features[i], strlen(hp->features[i]), &why) < 0) {
            ret = cc_errf(err, errlen, -EINVAL, "refusing to save: feature name %d ('%s') %s", i,
                          hp->features[i], why);
            goto error;
        }
        pos += snprintf(features + pos, flen - pos, "%s%s", i ? "," : "", hp->features[i]);
    }
    if ((ret = check_tx3_ranges(m, "refusing to save: ", err, errlen)) < 0)
        goto error;
    ret = -ENOMEM;
    keys[nk] = "format", values[nk++] = cc_hparams_format(hp);
    for (int i = 0; i < N_INT_KEYS; i++) {
        const char *p = (const char *)hp + int_keys[i].offset;
        long long v = int_keys[i].is64 ? *(const int64_t *)p : *(const int *)p;
        snprintf(ints[i], sizeof ints[i], "%lld", v);
        keys[nk] = int_keys[i].key, values[nk++] = ints[i];
    }
    if (hp->linear_window > 0) {
        snprintf(lw, sizeof lw, "%d", hp->linear_window);
        keys[nk] = "linear_window", values[nk++] = lw;
    }
    keys[nk] = "features", values[nk++] = features;
    for (int i = 0; i < N_STR_KEYS; i++) {
        const char *v = (const char *)hp + str_keys[i].offset;
        if (memchr(v, 0, str_keys[i].size) && v[0])
            keys[nk] = str_keys[i].key, values[nk++] = v;
    }
    for (int i = 0; i < hp->n_extra && i < CC_MAX_META; i++) {
        if (is_reserved_key(hp->extra[i].key)) {
            ret = cc_errf(err, errlen, -EINVAL,
                          "refusing to save: extra metadata key '%s' is "
                          "reserved",
                          hp->extra[i].key);
            goto error;
        }
        keys[nk] = hp->extra[i].key, values[nk++] = hp->extra[i].value;
    }

    int n = model_slots(hp, NULL);
    if (!(slots = malloc((size_t)n * sizeof *slots)) || !(ts = calloc((size_t)n, sizeof *ts)))
        goto error;
    model_slots(hp, slots);
    for (int i = 0; i < n; i++) {
        const float *x = m->block + slots[i].offset;
        long long bad = first_nonfinite(x, slot_numel(&slots[i]));
        if (bad >= 0) {
            ret = nonfinite_error(err, errlen, "refusing to save: ", slots[i].name, bad, x[bad]);
            goto error;
        }
        ts[i].name = slots[i].name;
        ts[i].data = x;
        ts[i].ndim = slots[i].ndim;
        ts[i].shape[0] = slots[i].shape[0];
        ts[i].shape[1] = slots[i].shape[1];
        ts[i].dtype = CC_ST_F32;
    }

    size_t plen = strlen(path) + 16;
    if (!(tmp_path = malloc(plen)))
        goto error;
    snprintf(tmp_path, plen, "%s.tmpXXXXXX", path);
    if ((fd = mkstemp(tmp_path)) < 0) {
        ret = cc_errf(err, errlen, -EIO, "cannot create a temporary file next to '%s': %s", path,
                      strerror(errno));
        free(tmp_path);
        tmp_path = NULL;
        goto error;
    }
    (void)fchmod(fd, 0644);
    if (!(f = fdopen(fd, "wb"))) {
        ret = cc_errf(err, errlen, -EIO, "'%s': %s", tmp_path, strerror(errno));
        goto error;
    }
    fd = -1;
    if ((ret = cc_st_write_file(f, ts, n, keys, values, nk, tmp, sizeof tmp)) < 0) {
        cc_errf(err, errlen, ret, "writing '%s': %s", tmp_path, tmp);
        goto error;
    }
    if (fflush(f) != 0 || fsync(fileno(f)) != 0) {
        ret = cc_errf(err, errlen, -EIO, "writing '%s': %s", tmp_path, strerror(errno));
        goto error;
    }
    int rc = fclose(f);
    f = NULL;
    if (rc != 0) {
        ret = cc_errf(err, errlen, -EIO, "closing '%s': %s", tmp_path, strerror(errno));
        goto error;
    }
    if (rename(tmp_path, path) < 0) {
        ret = cc_errf(err, errlen, -EIO, "renaming '%s' to '%s': %s", tmp_path, path,
                      strerror(errno));
        goto error;
    }
    free(tmp_path);
    tmp_path = NULL;
    (void)cc_fsync_dir_of(path); /* best effort: some file systems refuse */
    ret = 0;
error:
    if (ret == -ENOMEM)
        cc_errf(err, errlen, ret, "out of memory saving '%s'", path);
    if (f)
        fclose(f);
    if (fd >= 0)
        close(fd);
    if (tmp_path) {
        unlink(tmp_path);
        free(tmp_path);
    }
    free(ts);
    free(slots);
    free(features);
    return ret;
}
