/*
 * cc_safetensors.c — safetensors reader (every offset and size checked before use) and
 * writer. Format and checks: see cc_safetensors.h.
 */
#include "cc_safetensors.h"

#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "cc_json.h"
#include "cc_kernels.h"

struct CcSafetensors {
    int n_tensors;
    CcStTensor *tensors; // (n_tensors) header order
    int *sorted;         // (n_tensors) indices sorted by name, for cc_st_find
    int n_meta;
    char **meta_keys;   // (n_meta)
    char **meta_values; // (n_meta)
};

/* Names in messages are cut so that a hostile 1 MB name cannot flood the caller's buffer. */
#define NAME_FMT "'%.100s'"

static const struct {
    const char *name;
    int supported;
    CcStDtype dtype;
} dtypes[] = {
    {"F32", 1, CC_ST_F32}, {"F16", 1, CC_ST_F16}, {"BF16", 1, CC_ST_BF16},
    {"F64", 0, 0},         {"I64", 0, 0},         {"I32", 0, 0},
    {"I16", 0, 0},         {"I8", 0, 0},          {"U64", 0, 0},
    {"U32", 0, 0},         {"U16", 0, 0},         {"U8", 0, 0},
    {"BOOL", 0, 0},        {"F8_E4M3", 0, 0},     {"F8_E5M2", 0, 0},
    {"F8_E8M0", 0, 0},     {"F6_E2M3", 0, 0},     {"F6_E3M2", 0, 0},
    {"F4", 0, 0},          {"C64", 0, 0},
};

const char *cc_st_dtype_name(CcStDtype dt)
{
    switch (dt) {
    case CC_ST_F32: return "F32";
    case CC_ST_F16: return "F16";
    case CC_ST_BF16: return "BF16";
    }
    return "?";
}

size_t cc_st_dtype_size(CcStDtype dt) { return dt == CC_ST_F32 ? 4 : 2; }

/* strdup through malloc, so that allocation-failure tests (which wrap malloc) see it. */
static char *dupstr(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    return d ? memcpy(d, s, n) : NULL;
}

static uint64_t read_le64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

/* Formats a shape as "[a, b, c]" into buf. */
static const char *shape_str(char *buf, size_t len, const int64_t *shape, int ndim)
{
    size_t pos = 0;
    buf[0] = 0;
    pos += snprintf(buf, len, "[");
    for (int i = 0; i < ndim && pos < len; i++)
        pos += snprintf(buf + pos, len - pos, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (pos < len)
        snprintf(buf + pos, len - pos, "]");
    return buf;
}

/* ---------------------------------------------------------------------------- reading */

static int parse_dtype(CcStTensor *t, json_t *v, char *err, size_t errlen)
{
    if (!json_is_string(v))
        return cc_errf(err, errlen, -EINVAL,
                       "tensor " NAME_FMT ": \"dtype\" missing or not a string", t->name);
    const char *s = json_string_value(v);
    for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++) {
        if (strcmp(s, dtypes[i].name))
            continue;
        if (!dtypes[i].supported)
            return cc_errf(err, errlen, -EINVAL,
                           "tensor " NAME_FMT ": dtype %s not supported (F32, F16 or BF16 only)",
                           t->name, s);
        t->dtype = dtypes[i].dtype;
        return 0;
    }
    return cc_errf(err, errlen, -EINVAL, "tensor " NAME_FMT ": unknown dtype '%.32s'", t->name, s);
}

static int parse_shape(CcStTensor *t, json_t *v, char *err, size_t errlen)
{
    if (!json_is_array(v))
        return cc_errf(err, errlen, -EINVAL,
                       "tensor " NAME_FMT ": \"shape\" missing or not an array", t->name);
    size_t nd = json_array_size(v);
    if (nd > CC_ST_MAX_DIMS)
        return cc_errf(err, errlen, -EINVAL,
                       "tensor " NAME_FMT ": shape has %zu dimensions (at most %d)", t->name, nd,
                       CC_ST_MAX_DIMS);
    t->ndim = (int)nd;
    uint64_t numel = 1;
    int overflow = 0;
    for (size_t i = 0; i < nd; i++) {
        json_t *d = json_array_get(v, i);
        if (!json_is_integer(d) || json_integer_value(d) < 0)
            return cc_errf(err, errlen, -EINVAL,
                           "tensor " NAME_FMT ": shape dimension %zu is not a non-negative integer",
                           t->name, i);
        t->shape[i] = json_integer_value(d);
        overflow |= __builtin_mul_overflow(numel, (uint64_t)t->shape[i], &numel);
    }
    if (overflow || numel > SIZE_MAX / 4)
        return cc_errf(err, errlen, -EINVAL,
                       "tensor " NAME_FMT ": shape overflows (too many elements)", t->name);
    t->numel = numel;
    return 0;
}

static int parse_offsets(CcStTensor *t, json_t *v, size_t data_len, char *err, size_t errlen)
{
    json_t *b = json_array_get(v, 0), *e = json_array_get(v, 1);
    if (!json_is_array(v) || json_array_size(v) != 2 || !json_is_integer(b) ||
        !json_is_integer(e) || json_integer_value(b) < 0 || json_integer_value(e) < 0)
        return cc_errf(err, errlen, -EINVAL,
                       "tensor " NAME_FMT ": \"data_offsets\" missing or not [begin, end] "
                       "non-negative integers",
                       t->name);
    uint64_t begin = (uint64_t)json_integer_value(b), end = (uint64_t)json_integer_value(e);
    if (end < begin)
        return cc_errf(err, errlen, -EINVAL,
                       "tensor " NAME_FMT ": data_offsets [%llu, %llu) end before begin", t->name,
                       (unsigned long long)begin, (unsigned long long)end);
    if (end > data_len)
        return cc_errf(err, errlen, -EINVAL,
                       "tensor " NAME_FMT ": data_offsets [%llu, %llu) out of range: past the end "
                       "of the data section (%zu bytes); file truncated?",
                       t->name, (unsigned long long)begin, (unsigned long long)end, data_len);
    size_t need = t->numel * cc_st_dtype_size(t->dtype);
    if (end - begin != need) {
        char sh[160];
        return cc_errf(err, errlen, -EINVAL,
                       "tensor " NAME_FMT ": data_offsets span %llu bytes but shape %s of %s needs "
                       "%zu",
                       t->name, (unsigned long long)(end - begin),
                       shape_str(sh, sizeof sh, t->shape, t->ndim), cc_st_dtype_name(t->dtype),
                       need);
    }
    t->begin = begin;
    t->end = end;
    return 0;
}

static int parse_metadata(CcSafetensors *st, json_t *meta, char *err, size_t errlen)
{
    if (!json_is_object(meta))
        return cc_errf(err, errlen, -EINVAL, "\"__metadata__\" is not an object");
    size_t n = json_object_size(meta);
    st->meta_keys = calloc(n ? n : 1, sizeof *st->meta_keys);
    st->meta_values = calloc(n ? n : 1, sizeof *st->meta_values);
    if (!st->meta_keys || !st->meta_values)
        return cc_errf(err, errlen, -ENOMEM, "out of memory reading the metadata");
    const char *key;
    json_t *v;
    json_object_foreach(meta, key, v)
    {
        if (!json_is_string(v))
            return cc_errf(err, errlen, -EINVAL, "metadata " NAME_FMT " is not a string", key);
        int i = st->n_meta;
        st->meta_keys[i] = dupstr(key);
        st->meta_values[i] = dupstr(json_string_value(v));
        st->n_meta++;
        if (!st->meta_keys[i] || !st->meta_values[i])
            return cc_errf(err, errlen, -ENOMEM, "out of memory reading the metadata");
    }
    return 0;
}

static int cmp_name(const void *a, const void *b, void *arg)
{
    const CcStTensor *t = arg;
    return strcmp(t[*(const int *)a].name, t[*(const int *)b].name);
}

static int cmp_begin(const void *a, const void *b, void *arg)
{
    const CcStTensor *t = arg, *x = &t[*(const int *)a], *y = &t[*(const int *)b];
    return x->begin < y->begin ? -1 : x->begin > y->begin ? 1 : 0;
}

/* Sorts by begin and checks that no two non-empty byte ranges overlap. */
static int check_overlaps(CcSafetensors *st, char *err, size_t errlen)
{
    int n = st->n_tensors, ret = 0;
    int *idx = malloc((n ? n : 1) * sizeof *idx);
    if (!idx)
        return cc_errf(err, errlen, -ENOMEM, "out of memory checking offsets");
    for (int i = 0; i < n; i++)
        idx[i] = i;
    qsort_r(idx, n, sizeof *idx, cmp_begin, st->tensors);
    const CcStTensor *far = NULL; // the tensor reaching furthest so far
    for (int i = 0; i < n; i++) {
        const CcStTensor *t = &st->tensors[idx[i]];
        if (t->begin == t->end)
            continue;
        if (far && t->begin < far->end) {
            ret = cc_errf(err, errlen, -EINVAL,
                          "tensors " NAME_FMT " [%zu, %zu) and " NAME_FMT " [%zu, %zu) overlap",
                          far->name, far->begin, far->end, t->name, t->begin, t->end);
            break;
        }
        if (!far || t->end > far->end)
            far = t;
    }
    free(idx);
    return ret;
}

int cc_st_parse(CcSafetensors **out, const uint8_t *buf, size_t len, char *err, size_t errlen)
{
    CcSafetensors *st = NULL;
    json_t *root = NULL;
    int ret;
    *out = NULL;
    if (!buf || len < 8) {
        ret = cc_errf(err, errlen, -EINVAL,
                      "file too short (%zu bytes): a safetensors file starts with an 8-byte "
                      "header length",
                      buf ? len : 0);
        goto error;
    }
    uint64_t hlen = read_le64(buf);
    if (hlen > CC_ST_MAX_HEADER) {
        ret = cc_errf(err, errlen, -EINVAL,
                      "header length %llu is absurd (more than %u bytes): not a safetensors file?",
                      (unsigned long long)hlen, CC_ST_MAX_HEADER);
        goto error;
    }
    if (hlen > len - 8) {
        ret = cc_errf(err, errlen, -EINVAL,
                      "header length %llu past the end of the file (%zu bytes follow it): file "
                      "truncated?",
                      (unsigned long long)hlen, len - 8);
        goto error;
    }
    const uint8_t *data = buf + 8 + hlen;
    size_t data_len = len - 8 - hlen;

    json_error_t jerr;
    root = json_loadb((const char *)buf + 8, hlen, JSON_REJECT_DUPLICATES, &jerr);
    /* jansson reports a failed allocation either by its code or, when it fails before
     * reading anything, by leaving the message empty. */
    if (!root && (json_error_code(&jerr) == json_error_out_of_memory || !jerr.text[0])) {
        ret = cc_errf(err, errlen, -ENOMEM, "out of memory parsing the header");
        goto error;
    }
    if (!root) {
        ret = cc_errf(err, errlen, -EINVAL, "bad JSON in header: %s (line %d, column %d)",
                      jerr.text, jerr.line, jerr.column);
        goto error;
    }
    if (!json_is_object(root)) {
        ret = cc_errf(err, errlen, -EINVAL, "bad header: JSON is not an object");
        goto error;
    }

    ret = -ENOMEM;
    st = calloc(1, sizeof *st);
    size_t n = json_object_size(root);
    if (!st || !(st->tensors = calloc(n ? n : 1, sizeof *st->tensors)) ||
        !(st->sorted = calloc(n ? n : 1, sizeof *st->sorted))) {
        cc_errf(err, errlen, ret, "out of memory reading the header");
        goto error;
    }
    const char *key;
    json_t *v;
    json_object_foreach(root, key, v)
    {
        if (!strcmp(key, "__metadata__")) {
            if ((ret = parse_metadata(st, v, err, errlen)) < 0)
                goto error;
            continue;
        }
        CcStTensor *t = &st->tensors[st->n_tensors];
        if (!(t->name = dupstr(key))) {
            ret = cc_errf(err, errlen, -ENOMEM, "out of memory reading the header");
            goto error;
        }
        st->n_tensors++;
        if (!json_is_object(v)) {
            ret = cc_errf(err, errlen, -EINVAL, "tensor " NAME_FMT ": entry is not an object", key);
            goto error;
        }
        if ((ret = parse_dtype(t, json_object_get(v, "dtype"), err, errlen)) < 0 ||
            (ret = parse_shape(t, json_object_get(v, "shape"), err, errlen)) < 0 ||
            (ret = parse_offsets(t, json_object_get(v, "data_offsets"), data_len, err, errlen)) < 0)
            goto error;
        t->data = data + t->begin;
    }
    if ((ret = check_overlaps(st, err, errlen)) < 0)
        goto error;
    for (int i = 0; i < st->n_tensors; i++)
        st->sorted[i] = i;
    qsort_r(st->sorted, st->n_tensors, sizeof *st->sorted, cmp_name, st->tensors);
    json_decref(root);
    *out = st;
    return 0;
error:
    json_decref(root);
    cc_st_close(&st);
    return ret;
}

void cc_st_close(CcSafetensors **pst)
{
    CcSafetensors *st = pst ? *pst : NULL;
    if (!st)
        return;
    for (int i = 0; i < st->n_tensors; i++)
        free((char *)st->tensors[i].name);
    for (int i = 0; i < st->n_meta; i++) {
        free(st->meta_keys[i]);
        free(st->meta_values[i]);
    }
    free(st->tensors);
    free(st->sorted);
    free(st->meta_keys);
    free(st->meta_values);
    free(st);
    *pst = NULL;
}

int cc_st_count(const CcSafetensors *st) { return st->n_tensors; }

const CcStTensor *cc_st_tensor(const CcSafetensors *st, int i)
{
    return i >= 0 && i < st->n_tensors ? &st->tensors[i] : NULL;
}

const CcStTensor *cc_st_find(const CcSafetensors *st, const char *name)
{
    int lo = 0, hi = st->n_tensors;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        const CcStTensor *t = &st->tensors[st->sorted[mid]];
        int c = strcmp(name, t->name);
        if (!c)
            return t;
        if (c < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    return NULL;
}

int cc_st_meta_count(const CcSafetensors *st) { return st->n_meta; }

const char *cc_st_meta_key(const CcSafetensors *st, int i)
{
    return i >= 0 && i < st->n_meta ? st->meta_keys[i] : NULL;
}

const char *cc_st_meta_value(const CcSafetensors *st, int i)
{
    return i >= 0 && i < st->n_meta ? st->meta_values[i] : NULL;
}

const char *cc_st_meta_get(const CcSafetensors *st, const char *key)
{
    for (int i = 0; i < st->n_meta; i++)
        if (!strcmp(st->meta_keys[i], key))
            return st->meta_values[i];
    return NULL;
}

void cc_st_to_f32(const CcStTensor *t, float *dst)
{
    const uint8_t *p = t->data;
    switch (t->dtype) {
    case CC_ST_F32:
        for (size_t i = 0; i < t->numel; i++) {
            uint32_t u = (uint32_t)p[4 * i] | (uint32_t)p[4 * i + 1] << 8 |
                         (uint32_t)p[4 * i + 2] << 16 | (uint32_t)p[4 * i + 3] << 24;
            memcpy(&dst[i], &u, 4);
        }
        break;
    case CC_ST_F16:
        for (size_t i = 0; i < t->numel; i++)
            dst[i] = cc_f16_to_f32((uint16_t)(p[2 * i] | p[2 * i + 1] << 8));
        break;
    case CC_ST_BF16:
        for (size_t i = 0; i < t->numel; i++)
            dst[i] = cc_bf16_to_f32((uint16_t)(p[2 * i] | p[2 * i + 1] << 8));
        break;
    }
}

/* ---------------------------------------------------------------------------- writing */

/* Where bytes go: a FILE or a buffer sized exactly in advance. */
typedef struct Sink {
    FILE *f;
    uint8_t *buf;
    size_t pos;
} Sink;

static int sink_write(Sink *s, const void *p, size_t n)
{
    if (s->f)
        return fwrite(p, 1, n, s->f) == n ? 0 : -EIO;
    memcpy(s->buf + s->pos, p, n);
    s->pos += n;
    return 0;
}

/* Strict UTF-8 (RFC 3629: no overlongs, surrogates or code points past U+10FFFF): JSON
 * strings must be valid UTF-8, and readers (jansson, Python) refuse anything else. */
static int utf8_valid(const char *str)
{
    const uint8_t *s = (const uint8_t *)str;
    while (*s) {
        uint32_t c = *s;
        int n = c < 0x80                 ? 0
                : c >= 0xc2 && c <= 0xdf ? 1
                : c >= 0xe0 && c <= 0xef ? 2
                : c >= 0xf0 && c <= 0xf4 ? 3
                                         : -1;
        if (n < 0)
            return 0;
        c &= n ? 0x3f >> n : 0x7f;
        for (int i = 1; i <= n; i++) {
            if ((s[i] & 0xc0) != 0x80)
                return 0;
            c = c << 6 | (s[i] & 0x3f);
        }
        if ((n == 2 && (c < 0x800 || (c >= 0xd800 && c <= 0xdfff))) ||
            (n == 3 && (c < 0x10000 || c > 0x10ffff)))
            return 0;
        s += n + 1;
    }
    return 1;
}

/* A growing string; after a failed allocation it stays failed (oom) and ignores writes.
 * The header is written by hand rather than with jansson's json_dumps, whose 2.14 dumper
 * ignores a failed allocation while writing an object key and then carries on, which
 * would put a corrupt header on disk under memory pressure. */
typedef struct Str {
    char *p;
    size_t len, cap;
    int oom;
} Str;

static void str_add(Str *s, const char *p, size_t n)
{
    if (s->oom)
        return;
    if (s->len + n + 1 > s->cap) {
        size_t cap = s->cap ? s->cap : 1024;
        while (cap < s->len + n + 1)
            cap *= 2;
        char *q = realloc(s->p, cap);
        if (!q) {
            s->oom = 1;
            return;
        }
        s->p = q;
        s->cap = cap;
    }
    memcpy(s->p + s->len, p, n);
    s->len += n;
    s->p[s->len] = 0;
}

static void str_addz(Str *s, const char *z) { str_add(s, z, strlen(z)); }

static void str_int(Str *s, unsigned long long v)
{
    char b[24];
    str_add(s, b, (size_t)snprintf(b, sizeof b, "%llu", v));
}

/* A JSON string literal: quotes, backslashes and control characters escaped. */
static void str_json(Str *s, const char *v)
{
    char tmp[CC_JSON_ESCAPED_MAX(64)];
    size_t n = strlen(v);
    str_add(s, "\"", 1);
    for (size_t i = 0; i < n; i += 64)
        str_add(s, tmp, cc_json_escape(tmp, v + i, n - i < 64 ? n - i : 64));
    str_add(s, "\"", 1);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* First string that appears twice among v[0..n), or NULL; -ENOMEM through *ret. */
static const char *find_duplicate(const char *const *v, int n, int *ret)
{
    const char **c = malloc((n ? n : 1) * sizeof *c), *dup = NULL;
    if (!c) {
        *ret = -ENOMEM;
        return NULL;
    }
    memcpy(c, v, n * sizeof *c);
    qsort(c, n, sizeof *c, cmp_str);
    for (int i = 1; i < n && !dup; i++)
        if (!strcmp(c[i - 1], c[i]))
            dup = c[i];
    free(c);
    return dup;
}

/* Builds the padded header; *data_bytes gets the data section's byte count. */
static int build_header(char **out, size_t *padded, size_t *data_bytes, const CcStWriteTensor *ts,
                        int n, const char *const *keys, const char *const *values, int n_meta,
                        char *err, size_t errlen)
{
    Str h = {0};
    const char **names = NULL;
    const char *dup;
    int ret = 0;
    size_t off = 0;
    if (n < 0 || n_meta < 0) {
        ret = cc_errf(err, errlen, -EINVAL, "negative tensor or metadata count");
        goto error;
    }
    for (int i = 0; i < n_meta; i++)
        if (!keys[i] || !values[i] || !utf8_valid(keys[i]) || !utf8_valid(values[i])) {
            ret = cc_errf(err, errlen, -EINVAL, "metadata pair %d: NULL, or not valid UTF-8", i);
            goto error;
        }
    if ((dup = find_duplicate(keys, n_meta, &ret))) {
        ret = cc_errf(err, errlen, -EINVAL, "metadata key " NAME_FMT " appears twice", dup);
        goto error;
    }
    if (ret < 0 || !(names = malloc((n ? n : 1) * sizeof *names))) {
        ret = -ENOMEM;
        goto error;
    }
    for (int i = 0; i < n; i++) {
        const CcStWriteTensor *t = &ts[i];
        if (!t->name || !utf8_valid(t->name) || !strcmp(t->name, "__metadata__") || t->ndim < 0 ||
            t->ndim > CC_ST_MAX_DIMS || (unsigned)t->dtype > CC_ST_BF16) {
            ret = cc_errf(err, errlen, -EINVAL,
                          "tensor %d: NULL, non-UTF-8 or reserved name, "
                          "or bad ndim/dtype",
                          i);
            goto error;
        }
        names[i] = t->name;
    }
    if ((dup = find_duplicate(names, n, &ret))) {
        ret = cc_errf(err, errlen, -EINVAL, "tensor name " NAME_FMT " repeated", dup);
        goto error;
    }
    if (ret < 0)
        goto error;

    str_addz(&h, "{");
    if (n_meta > 0) {
        str_addz(&h, "\"__metadata__\":{");
        for (int i = 0; i < n_meta; i++) {
            str_addz(&h, i ? "," : "");
            str_json(&h, keys[i]);
            str_addz(&h, ":");
            str_json(&h, values[i]);
        }
        str_addz(&h, n ? "}," : "}");
    }
    for (int i = 0; i < n; i++) {
        const CcStWriteTensor *t = &ts[i];
        uint64_t numel = 1;
        int overflow = 0;
        for (int d = 0; d < t->ndim; d++)
            overflow |=
                t->shape[d] < 0 || __builtin_mul_overflow(numel, (uint64_t)t->shape[d], &numel);
        if (overflow || numel > SIZE_MAX / 8 || (numel && !t->data)) {
            ret =
                cc_errf(err, errlen, -EINVAL, "tensor " NAME_FMT ": bad shape or no data", t->name);
            goto error;
        }
        size_t bytes = numel * cc_st_dtype_size(t->dtype);
        if (off + bytes < off || off + bytes > SIZE_MAX / 2) {
            ret = cc_errf(err, errlen, -EINVAL, "tensors too large in total");
            goto error;
        }
        str_addz(&h, i ? "," : "");
        str_json(&h, t->name);
        str_addz(&h, ":{\"dtype\":\"");
        str_addz(&h, cc_st_dtype_name(t->dtype));
        str_addz(&h, "\",\"shape\":[");
        for (int d = 0; d < t->ndim; d++) {
            str_addz(&h, d ? "," : "");
            str_int(&h, (unsigned long long)t->shape[d]);
        }
        str_addz(&h, "],\"data_offsets\":[");
        str_int(&h, off);
        str_addz(&h, ",");
        str_int(&h, off + bytes);
        str_addz(&h, "]}");
        off += bytes;
    }
    str_addz(&h, "}");
    str_add(&h, "       ", (8 - h.len % 8) % 8); // spaces: the data section is 8-aligned
    if (h.oom) {
        ret = -ENOMEM;
        goto error;
    }
    free(names);
    *out = h.p;
    *padded = h.len;
    *data_bytes = off;
    return 0;
error:
    if (ret == -ENOMEM)
        cc_errf(err, errlen, ret, "out of memory building the safetensors header");
    free(names);
    free(h.p);
    return ret;
}

static int write_all(Sink *s, const char *hdr, size_t hlen, const CcStWriteTensor *ts, int n)
{
    uint8_t len8[8], chunk[4096];
    for (int i = 0; i < 8; i++)
        len8[i] = (uint8_t)((uint64_t)hlen >> (8 * i));
    int ret = sink_write(s, len8, 8);
    if (ret == 0)
        ret = sink_write(s, hdr, hlen);
    for (int i = 0; i < n && ret == 0; i++) {
        const CcStWriteTensor *t = &ts[i];
        size_t numel = 1, esz = cc_st_dtype_size(t->dtype);
        for (int d = 0; d < t->ndim; d++)
            numel *= (size_t)t->shape[d];
        for (size_t done = 0; done < numel && ret == 0;) {
            size_t k = numel - done < sizeof chunk / 4 ? numel - done : sizeof chunk / 4;
            for (size_t j = 0; j < k; j++) {
                float x = t->data[done + j];
                uint32_t u;
                if (t->dtype == CC_ST_F32)
                    memcpy(&u, &x, 4);
                else
                    u = t->dtype == CC_ST_F16 ? cc_f32_to_f16(x) : cc_f32_to_bf16(x);
                for (size_t b = 0; b < esz; b++)
                    chunk[j * esz + b] = (uint8_t)(u >> (8 * b));
            }
            ret = sink_write(s, chunk, k * esz);
            done += k;
        }
    }
    return ret;
}

int cc_st_write_file(FILE *f, const CcStWriteTensor *tensors, int n, const char *const *keys,
                     const char *const *values, int n_meta, char *err, size_t errlen)
{
    char *hdr = NULL;
    size_t hlen, data_bytes;
    int ret = build_header(&hdr, &hlen, &data_bytes, tensors, n, keys, values, n_meta, err, errlen);
    if (ret < 0)
        return ret;
    Sink s = {.f = f};
    ret = write_all(&s, hdr, hlen, tensors, n);
    if (ret < 0)
        cc_errf(err, errlen, ret, "write error: %s", strerror(errno));
    free(hdr);
    return ret;
}

int cc_st_write_buffer(uint8_t **out, size_t *outlen, const CcStWriteTensor *tensors, int n,
                       const char *const *keys, const char *const *values, int n_meta, char *err,
                       size_t errlen)
{
    char *hdr = NULL;
    size_t hlen, data_bytes;
    int ret = build_header(&hdr, &hlen, &data_bytes, tensors, n, keys, values, n_meta, err, errlen);
    if (ret < 0)
        return ret;
    Sink s = {.buf = malloc(8 + hlen + data_bytes)};
    if (!s.buf) {
        free(hdr);
        return cc_errf(err, errlen, -ENOMEM, "out of memory for a %zu-byte file",
                       8 + hlen + data_bytes);
    }
    write_all(&s, hdr, hlen, tensors, n);
    free(hdr);
    *out = s.buf;
    *outlen = s.pos;
    return 0;
}
