/*
 * cc_kpi.c — KPI message decoding (see cc_kpi.h for the wire rules).
 *
 * Two paths, one result:
 *  - the fast path scans the message once, without building a tree: it accepts only
 *    messages in which every element is a valid record (no escapes or non-ASCII bytes in
 *    strings, no duplicate members, no nested value outside `kpis`, every check passed),
 *    which is what producers send, and decodes them ~20x cheaper than jansson;
 *  - anything else (an invalid element, an unusual but valid construct) is handed whole to
 *    the reference path: json_loadb → per record: one pass over its members → checks →
 *    a CcKpiRecord or an error with its reason. The fast path has no side effect before it
 *    gives up, so every message is decoded as the reference path would (the fuzz target
 *    and test_kpi compare the two on every input).
 * Member names are looked up in a small open-addressing table (cell / ts / kpis / mapped
 * field) built once at open; decoding allocates only inside jansson and when the output
 * arrays grow.
 */
#include "cc_kpi.h"
#include "cc_time.h"

#include <errno.h>
#include <jansson.h>
#include <locale.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define TS_MS_MIN 1e11
#define TS_MS_END 253402300800000.0     /* 10000-01-01T00:00:00Z in ms */
#define CELL_INT_MAX 9007199254740992.0 /* 2^53 */

enum SlotKind { SLOT_EMPTY = 0, SLOT_CELL, SLOT_TS, SLOT_KPIS, SLOT_FIELD };

typedef struct Slot {
    enum SlotKind kind;
    char *name;
    size_t len;
    uint32_t hash;
    uint32_t seen; /* fast path: the object scope (CcKpiDecoder.scope) that had it */
    int feature;
    int prio; /* position in the mapping: lower wins among aliases */
    double scale;
} Slot;

struct CcKpiDecoder {
    int F;
    int64_t S;
    enum CcKpiAlign align;
    double max_abs;
    double lo[CC_MAX_FEATURES], hi[CC_MAX_FEATURES];
    size_t max_bytes;
    int max_records;
    const char *cell_name, *ts_name, *kpis_name; /* point into slots */

    Slot *slots;    /* (cap) */
    uint32_t cap;   /* power of two */
    uint32_t scope; /* fast path: object scopes opened so far */
    int jansson_only;
    locale_t c_locale; /* strtod_l for the fast path's long numbers; 0: not available */

    CcKpiRecord *rec;
    int n_rec, cap_rec;
    CcKpiError *errs;
    int n_err, cap_err;

    CcKpiStats st;
};

static const char *const reason_names[CC_KPI_N_REASONS] = {
    [CC_KPI_OK] = "ok",
    [CC_KPI_OVERSIZE] = "oversize",
    [CC_KPI_NOT_JSON] = "not_json",
    [CC_KPI_NOT_OBJECT] = "not_object",
    [CC_KPI_EMPTY] = "empty",
    [CC_KPI_TOO_MANY_RECORDS] = "too_many_records",
    [CC_KPI_MISSING_CELL] = "missing_cell",
    [CC_KPI_BAD_CELL_ID] = "bad_cell_id",
    [CC_KPI_MISSING_TS] = "missing_ts",
    [CC_KPI_BAD_TS] = "bad_ts",
    [CC_KPI_MISALIGNED_TS] = "misaligned_ts",
    [CC_KPI_BAD_VALUE_TYPE] = "bad_value_type",
    [CC_KPI_NON_FINITE] = "non_finite",
    [CC_KPI_ABSURD_VALUE] = "absurd_value",
    [CC_KPI_NO_KPIS] = "no_kpis",
};

const char *cc_kpi_reason_name(enum CcKpiReason r)
{
    if ((int)r < 0 || r >= CC_KPI_N_REASONS)
        return "unknown";
    return reason_names[r];
}

void cc_kpi_default_settings(CcKpiSettings *s)
{
    memset(s, 0, sizeof *s);
    s->n_features = 8;
    s->step_seconds = 3600;
    s->align = CC_KPI_ALIGN_FLOOR;
    s->max_abs = 1e15;
    s->cell_field = "cell";
    s->ts_field = "ts";
    s->kpis_field = "kpis";
    s->max_message_bytes = 1 << 20;
    s->max_records = 100000;
    s->jansson_only = 0;
}

/* ---- name table ---- */

static uint32_t hash_bytes(const char *s, size_t n)
{
    return (uint32_t)cc_fnv1a(CC_FNV1A_SEED, s, n);
}

static uint32_t hash_name(const char *s) { return hash_bytes(s, strlen(s)); }

/* Looks up a name given as (pointer, length), not terminated (fast path). */
static Slot *slot_find_n(const CcKpiDecoder *d, const char *name, size_t n)
{
    uint32_t h = hash_bytes(name, n);
    for (uint32_t i = h & (d->cap - 1);; i = (i + 1) & (d->cap - 1)) {
        Slot *sl = &d->slots[i];
        if (sl->kind == SLOT_EMPTY)
            return NULL;
        if (sl->hash == h && sl->len == n && !memcmp(sl->name, name, n))
            return sl;
    }
}

static Slot *slot_find(const CcKpiDecoder *d, const char *name)
{
    uint32_t h = hash_name(name);
    for (uint32_t i = h & (d->cap - 1);; i = (i + 1) & (d->cap - 1)) {
        Slot *sl = &d->slots[i];
        if (sl->kind == SLOT_EMPTY)
            return NULL;
        if (sl->hash == h && !strcmp(sl->name, name))
            return sl;
    }
}

/* Adds a name; -EEXIST if present (then *out points at it), -ENOMEM. */
static int slot_add(CcKpiDecoder *d, const char *name, enum SlotKind kind, Slot **out)
{
    uint32_t h = hash_name(name);
    uint32_t i = h & (d->cap - 1);
    for (;; i = (i + 1) & (d->cap - 1)) {
        Slot *sl = &d->slots[i];
        if (sl->kind == SLOT_EMPTY)
            break;
        if (sl->hash == h && !strcmp(sl->name, name)) {
            *out = sl;
            return -EEXIST;
        }
    }
    Slot *sl = &d->slots[i];
    size_t n = strlen(name) + 1;
    sl->name = malloc(n); /* not strdup: the OOM test wraps malloc */
    if (!sl->name)
        return -ENOMEM;
    memcpy(sl->name, name, n);
    sl->len = n - 1;
    sl->kind = kind;
    sl->hash = h;
    *out = sl;
    return 0;
}

static int feature_by_name(const CcKpiSettings *s, const char *name)
{
    if (!s->feature_names)
        return -1;
    for (int f = 0; f < s->n_features; f++)
        if (s->feature_names[f] && !strcmp(s->feature_names[f], name))
            return f;
    return -1;
}

void cc_kpi_close(CcKpiDecoder **pd)
{
    CcKpiDecoder *d = pd ? *pd : NULL;
    if (!d)
        return;
    if (d->slots)
        for (uint32_t i = 0; i < d->cap; i++)
            free(d->slots[i].name);
    free(d->slots);
    free(d->rec);
    free(d->errs);
    if (d->c_locale)
        freelocale(d->c_locale);
    free(d);
    *pd = NULL;
}

static int name_ok(const char *s) { return s && *s; }

int cc_kpi_open(CcKpiDecoder **out, const CcKpiSettings *s, char *err, size_t errlen)
{
    int ret = 0;
    CcKpiDecoder *d = NULL;
    *out = NULL;
    if (!s || s->n_features < 1 || s->n_features > CC_MAX_FEATURES)
        return cc_errf(err, errlen, -EINVAL, "kpi: n_features must be 1..%d", CC_MAX_FEATURES);
    if (s->step_seconds < 1)
        return cc_errf(err, errlen, -EINVAL, "kpi: step_seconds must be ≥ 1");
    if (s->n_map < 0 || (s->n_map > 0 && !s->map))
        return cc_errf(err, errlen, -EINVAL, "kpi: bad mapping array");
    if ((int)s->align < 0 || s->align > CC_KPI_ALIGN_EXACT)
        return cc_errf(err, errlen, -EINVAL, "kpi: bad align rule");
    if (!name_ok(s->cell_field) || !name_ok(s->ts_field) || !name_ok(s->kpis_field))
        return cc_errf(err, errlen, -EINVAL, "kpi: cell, ts and kpis field names must be set");
    if (s->max_message_bytes < 2 || s->max_records < 1)
        return cc_errf(err, errlen, -EINVAL, "kpi: max_message_bytes/max_records too small");
    if (!(s->max_abs > 0) || !isfinite(s->max_abs))
        return cc_errf(err, errlen, -EINVAL, "kpi: max_abs must be finite and > 0");

    d = calloc(1, sizeof *d);
    if (!d)
        return cc_errf(err, errlen, -ENOMEM, "kpi: out of memory");
    d->F = s->n_features;
    d->S = s->step_seconds;
    d->align = s->align;
    d->max_abs = s->max_abs;
    d->max_bytes = s->max_message_bytes;
    d->max_records = s->max_records;
    d->jansson_only = s->jansson_only;
    d->c_locale = newlocale(LC_ALL_MASK, "C", (locale_t)0); /* 0: long numbers go to jansson */
    for (int f = 0; f < d->F; f++) {
        d->lo[f] = s->min ? s->min[f] : -INFINITY;
        d->hi[f] = s->max ? s->max[f] : INFINITY;
        if (isnan(d->lo[f]) || isnan(d->hi[f]) || d->lo[f] > d->hi[f]) {
            ret = cc_errf(err, errlen, -EINVAL, "kpi: feature %d: bounds [%g, %g] invalid", f,
                          d->lo[f], d->hi[f]);
            goto error;
        }
    }

    int n_names = 3 + s->n_map + (s->feature_names ? s->n_features : 0);
    d->cap = 16;
    while (d->cap < (uint32_t)n_names * 4)
        d->cap *= 2;
    d->slots = calloc(d->cap, sizeof *d->slots);
    if (!d->slots) {
        ret = cc_errf(err, errlen, -ENOMEM, "kpi: out of memory");
        goto error;
    }

    Slot *sl;
    const char *fixed[3] = {s->cell_field, s->ts_field, s->kpis_field};
    const enum SlotKind kinds[3] = {SLOT_CELL, SLOT_TS, SLOT_KPIS};
    for (int i = 0; i < 3; i++) {
        ret = slot_add(d, fixed[i], kinds[i], &sl);
        if (ret == -EEXIST) {
            ret = cc_errf(err, errlen, -EINVAL, "kpi: field name \"%s\" used twice", fixed[i]);
            goto error;
        }
        if (ret < 0)
            goto oom;
        if (kinds[i] == SLOT_CELL)
            d->cell_name = sl->name;
        else if (kinds[i] == SLOT_TS)
            d->ts_name = sl->name;
        else
            d->kpis_name = sl->name;
    }
    for (int i = 0; i < s->n_map; i++) {
        const CcKpiMapEntry *m = &s->map[i];
        int f = m->feature;
        if (!name_ok(m->field)) {
            ret = cc_errf(err, errlen, -EINVAL, "kpi: mapping entry %d has no field name", i);
            goto error;
        }
        if (m->feature_name) {
            f = feature_by_name(s, m->feature_name);
            if (f < 0) {
                ret = cc_errf(err, errlen, -EINVAL,
                              "kpi: mapping of field \"%s\": the model has no feature \"%s\"",
                              m->field, m->feature_name);
                goto error;
            }
        }
        if (f < 0 || f >= d->F) {
            ret = cc_errf(err, errlen, -EINVAL,
                          "kpi: mapping of field \"%s\": feature %d outside 0..%d", m->field, f,
                          d->F - 1);
            goto error;
        }
        double scale = m->scale == 0 ? 1.0 : m->scale;
        if (!isfinite(scale)) {
            ret =
                cc_errf(err, errlen, -EINVAL, "kpi: mapping of field \"%s\": bad scale", m->field);
            goto error;
        }
        ret = slot_add(d, m->field, SLOT_FIELD, &sl);
        if (ret == -EEXIST) {
            ret = cc_errf(err, errlen, -EINVAL, "kpi: field \"%s\" mapped twice or reserved",
                          m->field);
            goto error;
        }
        if (ret < 0)
            goto oom;
        sl->feature = f;
        sl->scale = scale;
        sl->prio = i;
    }
    /* Feature names map to themselves unless an explicit entry took the name. */
    for (int f = 0; s->feature_names && f < d->F; f++) {
        const char *name = s->feature_names[f];
        if (!name_ok(name))
            continue;
        ret = slot_add(d, name, SLOT_FIELD, &sl);
        if (ret == -EEXIST) {
            if (sl->kind != SLOT_FIELD) {
                ret =
                    cc_errf(err, errlen, -EINVAL,
                            "kpi: feature name \"%s\" collides with the cell/ts/kpis field", name);
                goto error;
            }
            ret = 0;
            continue;
        }
        if (ret < 0)
            goto oom;
        sl->feature = f;
        sl->scale = 1.0;
        sl->prio = s->n_map + f;
    }
    *out = d;
    return 0;

oom:
    ret = cc_errf(err, errlen, -ENOMEM, "kpi: out of memory");
error:
    cc_kpi_close(&d);
    return ret;
}

void cc_kpi_stats(const CcKpiDecoder *d, CcKpiStats *out) { *out = d->st; }

/* ---- validation helpers ---- */

int cc_kpi_valid_cell_id(const char *s, size_t len)
{
    if (len < 1 || len > CC_KPI_CELL_ID_MAX)
        return 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == ':' || c == '/' || c == '-'))
            return 0;
    }
    return 1;
}

/* ---- decoding ---- */

static int push_error(CcKpiDecoder *d, enum CcKpiReason r, int element, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int push_error(CcKpiDecoder *d, enum CcKpiReason r, int element, const char *fmt, ...)
{
    if (d->n_err == d->cap_err) {
        int cap = d->cap_err ? d->cap_err * 2 : 8;
        CcKpiError *e = realloc(d->errs, (size_t)cap * sizeof *e);
        if (!e)
            return -ENOMEM;
        d->errs = e;
        d->cap_err = cap;
    }
    CcKpiError *e = &d->errs[d->n_err++];
    e->reason = r;
    e->element = element;
    e->ts = -1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->message, sizeof e->message, fmt, ap);
    va_end(ap);
    d->st.invalid[r]++;
    return 0;
}

static CcKpiRecord *push_record(CcKpiDecoder *d)
{
    if (d->n_rec == d->cap_rec) {
        int cap = d->cap_rec ? d->cap_rec * 2 : 16;
        CcKpiRecord *r = realloc(d->rec, (size_t)cap * sizeof *r);
        if (!r)
            return NULL;
        d->rec = r;
        d->cap_rec = cap;
    }
    return &d->rec[d->n_rec++];
}

static int is_nonfinite_text(const char *s)
{
    if (*s == '+' || *s == '-')
        s++;
    return !strcasecmp(s, "nan") || !strcasecmp(s, "inf") || !strcasecmp(s, "infinity");
}

typedef struct Rec {
    enum CcKpiReason reason;
    char why[CC_KPI_MSG_MAX];
} Rec;

#define FAIL(R, ...)                                                                               \
    do {                                                                                           \
        rc->reason = (R);                                                                          \
        snprintf(rc->why, sizeof rc->why, __VA_ARGS__);                                            \
        return;                                                                                    \
    } while (0)

/* One KPI value into r; sets rc->reason on a refusal. prio[f] holds the winning alias. */
static void take_value(CcKpiDecoder *d, const Slot *sl, const char *key, json_t *v, CcKpiRecord *r,
                       int *prio, uint64_t *nulls, Rec *rc)
{
    int f = sl->feature;
    double x;
    if (json_is_null(v)) {
        (*nulls)++;
        return;
    }
    if (json_is_string(v)) {
        if (is_nonfinite_text(json_string_value(v)))
            FAIL(CC_KPI_NON_FINITE, "field \"%s\": non-finite value \"%.16s\"", key,
                 json_string_value(v));
        FAIL(CC_KPI_BAD_VALUE_TYPE, "field \"%s\": a string, a number was expected", key);
    }
    if (!json_is_number(v))
        FAIL(CC_KPI_BAD_VALUE_TYPE, "field \"%s\": a %s, a number was expected", key,
             json_is_boolean(v) ? "boolean"
             : json_is_array(v) ? "array"
                                : "object");
    x = json_number_value(v) * sl->scale;
    if (isnan(x))
        FAIL(CC_KPI_NON_FINITE, "field \"%s\": not a number after scaling", key);
    if (!isfinite(x) || fabs(x) > d->max_abs || fabs(x) > 3.4e38)
        FAIL(CC_KPI_ABSURD_VALUE, "field \"%s\": %g exceeds |x| ≤ %g", key, x, d->max_abs);
    if (x < d->lo[f] || x > d->hi[f])
        FAIL(CC_KPI_ABSURD_VALUE, "field \"%s\": %g outside [%g, %g]", key, x, d->lo[f], d->hi[f]);
    if (prio[f] <= sl->prio)
        return; /* an alias listed earlier already gave this feature */
    prio[f] = sl->prio;
    r->values[f] = (float)x;
    r->present |= (uint64_t)1 << f;
}

static void decode_ts(CcKpiDecoder *d, json_t *v, CcKpiRecord *r, Rec *rc)
{
    int64_t ts;
    if (json_is_string(v)) {
        const char *s = json_string_value(v);
        if (cc_time_parse_rfc3339(s, json_string_length(v), &ts))
            FAIL(CC_KPI_BAD_TS, "timestamp \"%.40s\" is not RFC 3339", s);
        if (ts < 0)
            FAIL(CC_KPI_BAD_TS, "timestamp \"%.40s\" before 1970", s);
    } else if (json_is_number(v)) {
        double x = json_number_value(v);
        if (!(x >= 0) || !(x < TS_MS_END))
            FAIL(CC_KPI_BAD_TS, "timestamp %.17g outside 0 .. 253402300799999 (ms)", x);
        ts = x < TS_MS_MIN ? (int64_t)floor(x) : (int64_t)floor(x / 1000.0);
    } else {
        FAIL(CC_KPI_BAD_TS, "timestamp must be a string or a number");
    }
    int64_t step;
    switch (d->align) {
    case CC_KPI_ALIGN_NEAREST: step = (ts + d->S / 2) / d->S; break;
    case CC_KPI_ALIGN_EXACT:
        if (ts % d->S)
            FAIL(CC_KPI_MISALIGNED_TS, "timestamp %lld is not a multiple of %lld s", (long long)ts,
                 (long long)d->S);
        /* fallthrough */
    default: step = ts / d->S; break;
    }
    r->ts = ts;
    r->step = step;
}

static void decode_cell(json_t *v, CcKpiRecord *r, Rec *rc)
{
    if (json_is_string(v)) {
        const char *s = json_string_value(v);
        size_t n = json_string_length(v);
        if (!cc_kpi_valid_cell_id(s, n))
            FAIL(CC_KPI_BAD_CELL_ID, "cell id \"%.40s\"%s: want 1..%d of [A-Za-z0-9._:/-]", s,
                 n > 40 ? "…" : "", CC_KPI_CELL_ID_MAX);
        memcpy(r->cell_id, s, n);
        r->cell_id[n] = 0;
    } else if (json_is_number(v)) {
        double x = json_number_value(v);
        if (!(x >= 0) || x > CELL_INT_MAX || x != floor(x))
            FAIL(CC_KPI_BAD_CELL_ID, "numeric cell id %g is not an integer in 0..2^53", x);
        snprintf(r->cell_id, sizeof r->cell_id, "%.0f", x);
    } else {
        FAIL(CC_KPI_BAD_CELL_ID, "cell id must be a string or an integer");
    }
}

/* Decodes one record object into a new output record, or an error. -ENOMEM only. */
static int decode_record(CcKpiDecoder *d, json_t *obj, int element, CcKpiBatch *b)
{
    Rec rc = {CC_KPI_OK, ""};
    CcKpiRecord r;
    json_t *cell = NULL, *ts = NULL, *kpis = NULL;
    int prio[CC_MAX_FEATURES];
    uint64_t unmapped = 0, nulls = 0;
    int ts_ok = 0;

    if (!json_is_object(obj))
        return push_error(d, CC_KPI_NOT_OBJECT, element, "element %d is not an object", element);
    /* First pass: the reserved members. */
    const char *key;
    json_t *v;
    json_object_foreach(obj, key, v)
    {
        const Slot *sl = slot_find(d, key);
        if (!sl)
            continue;
        if (sl->kind == SLOT_CELL)
            cell = v;
        else if (sl->kind == SLOT_TS)
            ts = v;
        else if (sl->kind == SLOT_KPIS)
            kpis = v;
    }
    memset(&r, 0, sizeof r);
    r.element = element;
    if (!cell) {
        rc.reason = CC_KPI_MISSING_CELL;
        snprintf(rc.why, sizeof rc.why, "no \"%s\" member", d->cell_name);
        goto refused;
    }
    decode_cell(cell, &r, &rc);
    if (rc.reason)
        goto refused;
    if (!ts) {
        rc.reason = CC_KPI_MISSING_TS;
        snprintf(rc.why, sizeof rc.why, "cell %s: no \"%s\" member", r.cell_id, d->ts_name);
        goto refused;
    }
    decode_ts(d, ts, &r, &rc);
    if (rc.reason)
        goto refused;
    ts_ok = 1;

    json_t *src = obj;
    if (kpis) {
        if (!json_is_object(kpis)) {
            rc.reason = CC_KPI_BAD_VALUE_TYPE;
            snprintf(rc.why, sizeof rc.why, "\"%s\" must be an object", d->kpis_name);
            goto refused;
        }
        src = kpis;
    }
    for (int f = 0; f < d->F; f++)
        prio[f] = 1 << 30;
    json_object_foreach(src, key, v)
    {
        const Slot *sl = slot_find(d, key);
        if (!sl) {
            unmapped++;
            continue;
        }
        if (sl->kind != SLOT_FIELD) {
            if (src == kpis)
                unmapped++; /* "cell"/"ts" inside kpis: not a KPI */
            continue;
        }
        take_value(d, sl, key, v, &r, prio, &nulls, &rc);
        if (rc.reason)
            goto refused;
    }
    b->unmapped_fields += unmapped;
    b->null_values += nulls;
    if (!r.present) {
        rc.reason = CC_KPI_NO_KPIS;
        snprintf(rc.why, sizeof rc.why,
                 "cell %s: no mapped KPI value (%llu unmapped, "
                 "%llu null)",
                 r.cell_id, (unsigned long long)unmapped, (unsigned long long)nulls);
        goto refused;
    }
    CcKpiRecord *o = push_record(d);
    if (!o)
        return -ENOMEM;
    *o = r;
    return 0;

refused:
    b->unmapped_fields += unmapped;
    b->null_values += nulls;
    int err = element >= 0 && b->n_elements > 1
                  ? push_error(d, rc.reason, element, "element %d: %s", element, rc.why)
                  : push_error(d, rc.reason, element, "%s", rc.why);
    if (!err && ts_ok)
        d->errs[d->n_err - 1].ts = r.ts;
    return err;
}

/* ---- fast path ----
 * Returns 1 when the message was decoded (every element a valid record), 0 when it must
 * go to the reference path (nothing of the decoder's state changed then), -ENOMEM. */

typedef struct Scan {
    const char *p, *end;
} Scan;

static void skip_ws(Scan *s)
{
    while (s->p < s->end && (*s->p == ' ' || *s->p == '\n' || *s->p == '\r' || *s->p == '\t'))
        s->p++;
}

/* A string of printable ASCII without escapes (what jansson returns unchanged). */
static int scan_str(Scan *s, const char **str, size_t *n)
{
    if (s->p >= s->end || *s->p != '"')
        return -1;
    const char *b = ++s->p;
    for (; s->p < s->end; s->p++) {
        unsigned char c = (unsigned char)*s->p;
        if (c == '"') {
            *str = b;
            *n = (size_t)(s->p++ - b);
            return 0;
        }
        if (c < 0x20 || c >= 0x7f || c == '\\')
            return -1;
    }
    return -1;
}

/* A JSON number, as jansson reads it with JSON_DECODE_INT_AS_REAL (strtod: correctly
 * rounded). Up to 19 significant digits and a decimal exponent within ±22 are converted
 * exactly in double arithmetic (both operands exact, one rounding: Clinger's fast path);
 * other numbers through strtod_l in the C locale. -1: not a number, or one jansson refuses
 * (overflow to ±inf). */
static int scan_num(const CcKpiDecoder *d, Scan *s, double *out)
{
    static const double p10[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                 1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
    const char *b = s->p, *p = s->p, *e = s->end;
    uint64_t m = 0;
    int nd = 0, exp10 = 0, inexact = 0, neg = 0;
    if (p < e && *p == '-') {
        neg = 1;
        p++;
    }
    if (p >= e || *p < '0' || *p > '9')
        return -1;
    if (*p == '0') {
        p++;
    } else {
        for (; p < e && *p >= '0' && *p <= '9'; p++) {
            if (nd < 19) {
                m = m * 10 + (uint64_t)(*p - '0');
                nd++;
            } else {
                exp10++;
                inexact |= *p != '0';
            }
        }
    }
    if (p < e && *p == '.') {
        p++;
        if (p >= e || *p < '0' || *p > '9')
            return -1;
        for (; p < e && *p >= '0' && *p <= '9'; p++) {
            if (!m && *p == '0') {
                exp10--;
            } else if (nd < 19) {
                m = m * 10 + (uint64_t)(*p - '0');
                nd++;
                exp10--;
            } else {
                inexact |= *p != '0';
            }
        }
    }
    if (p < e && (*p == 'e' || *p == 'E')) {
        int es = 1, ev = 0;
        p++;
        if (p < e && (*p == '+' || *p == '-'))
            es = *p++ == '-' ? -1 : 1;
        if (p >= e || *p < '0' || *p > '9')
            return -1;
        for (; p < e && *p >= '0' && *p <= '9'; p++)
            if (ev < 100000)
                ev = ev * 10 + (*p - '0');
        exp10 += es * ev;
    }
    s->p = p;
    double v;
    if (!m) {
        v = 0;
    } else if (!inexact && m <= (1ULL << 53) && exp10 >= -22 && exp10 <= 22) {
        v = exp10 >= 0 ? (double)m * p10[exp10] : (double)m / p10[-exp10];
    } else {
        char tmp[64], *endp;
        size_t n = (size_t)(p - b);
        if (!d->c_locale || n >= sizeof tmp)
            return -1;
        memcpy(tmp, b, n);
        tmp[n] = 0;
        v = strtod_l(tmp, &endp, d->c_locale);
        if (endp != tmp + n || isinf(v))
            return -1;
        *out = v;
        return 0;
    }
    *out = neg ? -v : v;
    return 0;
}

/* Skips a scalar value: a plain string, a number, true, false or null. type: 's', 'n',
 * 'b', 'z' (null); -1 for anything else (nested values go to the reference path). */
static int scan_scalar(const CcKpiDecoder *d, Scan *s, int *type, double *num)
{
    const char *str;
    size_t n;
    if (s->p >= s->end)
        return -1;
    switch (*s->p) {
    case '"': *type = 's'; return scan_str(s, &str, &n);
    case 't':
        *type = 'b';
        n = 4;
        str = "true";
        break;
    case 'f':
        *type = 'b';
        n = 5;
        str = "false";
        break;
    case 'n':
        *type = 'z';
        n = 4;
        str = "null";
        break;
    default: *type = 'n'; return scan_num(d, s, num);
    }
    if ((size_t)(s->end - s->p) < n || memcmp(s->p, str, n))
        return -1;
    s->p += n;
    return 0;
}

/* Distinct unmapped member names of one object (jansson's objects hold each name once). */
#define FAST_UNMAPPED_MAX 32
typedef struct Names {
    const char *p[FAST_UNMAPPED_MAX];
    size_t n[FAST_UNMAPPED_MAX];
    int count;
} Names;

/* 0 new, 1 seen, -1 too many to track */
static int names_add(Names *u, const char *p, size_t n)
{
    for (int i = 0; i < u->count; i++)
        if (u->n[i] == n && !memcmp(u->p[i], p, n))
            return 1;
    if (u->count == FAST_UNMAPPED_MAX)
        return -1;
    u->p[u->count] = p;
    u->n[u->count++] = n;
    return 0;
}

/* KPI values of one source (the record's top level or its kpis object). */
typedef struct Vals {
    int prio[CC_MAX_FEATURES];
    float values[CC_MAX_FEATURES];
    uint64_t present, unmapped, nulls;
    int bad; /* a mapped member the reference path refuses */
} Vals;

static void vals_init(Vals *v, int F)
{
    for (int f = 0; f < F; f++)
        v->prio[f] = 1 << 30;
    v->present = v->unmapped = v->nulls = 0;
    v->bad = 0;
}

/* take_value's rules for a number of a mapped member. */
static void vals_take(const CcKpiDecoder *d, Vals *v, const Slot *sl, double num)
{
    int f = sl->feature;
    double x = num * sl->scale;
    if (isnan(x) || !isfinite(x) || fabs(x) > d->max_abs || fabs(x) > 3.4e38 || x < d->lo[f] ||
        x > d->hi[f]) {
        v->bad = 1;
        return;
    }
    if (v->prio[f] <= sl->prio)
        return;
    v->prio[f] = sl->prio;
    v->values[f] = (float)x;
    v->present |= (uint64_t)1 << f;
}

/* Steps to the next member of an object: 1 at its value (name in key/klen), 0 after the
 * closing '}', -1 on anything unexpected. *first is 1 right after the '{'. */
static int obj_next(Scan *s, int *first, const char **key, size_t *klen)
{
    skip_ws(s);
    if (s->p >= s->end)
        return -1;
    if (*s->p == '}') {
        s->p++;
        return 0;
    }
    if (!*first && *s->p++ != ',')
        return -1;
    *first = 0;
    skip_ws(s);
    if (scan_str(s, key, klen))
        return -1;
    skip_ws(s);
    if (s->p >= s->end || *s->p++ != ':')
        return -1;
    skip_ws(s);
    return 1;
}

/* A member where a KPI value may stand (sl: its mapped slot or NULL): mapped numbers and
 * nulls are taken, other names counted once. 0, or -1 for the reference path. */
static int kpi_member(const CcKpiDecoder *d, Scan *s, Slot *sl, uint32_t scope, Vals *v, Names *u,
                      const char *key, size_t klen)
{
    int type;
    double num = 0;
    if (sl) {
        if (sl->seen == scope)
            return -1; /* a duplicate member: jansson keeps the last one */
        sl->seen = scope;
        if (scan_scalar(d, s, &type, &num))
            return -1;
        if (type == 'n')
            vals_take(d, v, sl, num);
        else if (type == 'z')
            v->nulls++;
        else
            v->bad = 1; /* bad_value_type or non_finite */
        return 0;
    }
    if (names_add(u, key, klen))
        return -1;
    v->unmapped++;
    return scan_scalar(d, s, &type, &num);
}

/* One record object (at its '{'): 1 decoded, 0 for the reference path, -ENOMEM. */
static int fast_record(CcKpiDecoder *d, Scan *s, int element, CcKpiBatch *b)
{
    CcKpiRecord r;
    Vals top, kv;
    Names utop, ukv;
    const char *key;
    size_t klen;
    int have_cell = 0, have_ts = 0, have_kpis = 0, first = 1, rc;
    if (s->p >= s->end || *s->p++ != '{')
        return 0;
    memset(&r, 0, sizeof r);
    r.element = element;
    vals_init(&top, d->F);
    vals_init(&kv, d->F);
    utop.count = ukv.count = 0;
    const uint32_t scope = ++d->scope;
    while ((rc = obj_next(s, &first, &key, &klen)) == 1) {
        Slot *sl = slot_find_n(d, key, klen);
        if (!sl || sl->kind == SLOT_FIELD) {
            if (kpi_member(d, s, sl, scope, &top, &utop, key, klen))
                return 0;
            continue;
        }
        if (sl->seen == scope)
            return 0;
        sl->seen = scope;
        if (sl->kind == SLOT_CELL) {
            const char *id;
            size_t n;
            if (scan_str(s, &id, &n) || !cc_kpi_valid_cell_id(id, n))
                return 0;
            memcpy(r.cell_id, id, n);
            r.cell_id[n] = 0;
            have_cell = 1;
        } else if (sl->kind == SLOT_TS) {
            int64_t ts;
            const char *t;
            size_t n;
            double x;
            if (s->p < s->end && *s->p == '"') {
                if (scan_str(s, &t, &n) || cc_time_parse_rfc3339(t, n, &ts) || ts < 0)
                    return 0;
            } else {
                if (scan_num(d, s, &x) || !(x >= 0) || !(x < TS_MS_END))
                    return 0;
                ts = x < TS_MS_MIN ? (int64_t)floor(x) : (int64_t)floor(x / 1000.0);
            }
            if (d->align == CC_KPI_ALIGN_EXACT && ts % d->S)
                return 0;
            r.ts = ts;
            r.step = d->align == CC_KPI_ALIGN_NEAREST ? (ts + d->S / 2) / d->S : ts / d->S;
            have_ts = 1;
        } else { /* the kpis object: its members are the values, each name once */
            const uint32_t inner = ++d->scope;
            int first2 = 1;
            if (s->p >= s->end || *s->p++ != '{')
                return 0;
            while ((rc = obj_next(s, &first2, &key, &klen)) == 1) {
                Slot *s2 = slot_find_n(d, key, klen);
                if (kpi_member(d, s, s2 && s2->kind == SLOT_FIELD ? s2 : NULL, inner, &kv, &ukv,
                               key, klen))
                    return 0;
            }
            if (rc < 0)
                return 0;
            have_kpis = 1;
        }
    }
    if (rc < 0)
        return 0;
    const Vals *v = have_kpis ? &kv : &top;
    if (!have_cell || !have_ts || v->bad || !v->present)
        return 0;
    for (int f = 0; f < d->F; f++)
        if (v->present >> f & 1)
            r.values[f] = v->values[f];
    r.present = v->present;
    CcKpiRecord *o = push_record(d);
    if (!o)
        return -ENOMEM;
    *o = r;
    b->unmapped_fields += v->unmapped;
    b->null_values += v->nulls;
    return 1;
}

static int fast_decode(CcKpiDecoder *d, const char *buf, size_t len, CcKpiBatch *out)
{
    Scan s = {buf, buf + len};
    int rc;
    skip_ws(&s);
    if (s.p >= s.end)
        return 0;
    if (*s.p == '{') {
        out->n_elements = 1;
        if ((rc = fast_record(d, &s, 0, out)) != 1)
            return rc;
    } else if (*s.p == '[') {
        int n = 0;
        s.p++;
        for (;;) {
            skip_ws(&s);
            if (n == d->max_records)
                return 0;
            if ((rc = fast_record(d, &s, n, out)) != 1)
                return rc;
            n++;
            skip_ws(&s);
            if (s.p >= s.end)
                return 0;
            if (*s.p == ',') {
                s.p++;
                continue;
            }
            if (*s.p++ != ']')
                return 0;
            break;
        }
        out->n_elements = n;
    } else {
        return 0;
    }
    skip_ws(&s);
    return s.p == s.end;
}

int cc_kpi_decode(CcKpiDecoder *d, const void *buf, size_t len, CcKpiBatch *out)
{
    int ret = 0;
    json_t *root = NULL;
    json_error_t jerr;

    memset(out, 0, sizeof *out);
    d->n_rec = d->n_err = 0;
    d->st.messages++;
    d->st.bytes += len;

    if (len > d->max_bytes) {
        ret = push_error(d, CC_KPI_OVERSIZE, -1, "message of %zu bytes exceeds %zu", len,
                         d->max_bytes);
        goto done;
    }
    if (!d->jansson_only) {
        ret = fast_decode(d, buf, len, out);
        if (ret == 1) {
            d->st.fast++;
            ret = 0;
            goto done;
        }
        /* reference path: undo what the fast path wrote */
        d->n_rec = 0;
        memset(out, 0, sizeof *out);
        if (ret < 0)
            goto done;
    }
    root = json_loadb(buf, len, JSON_DECODE_INT_AS_REAL | JSON_DECODE_ANY, &jerr);
    if (!root) {
        if (json_error_code(&jerr) == json_error_out_of_memory) {
            ret = -ENOMEM;
            goto done;
        }
        ret = push_error(d, CC_KPI_NOT_JSON, -1, "not JSON: %s at line %d column %d", jerr.text,
                         jerr.line, jerr.column);
        goto done;
    }
    if (json_is_object(root)) {
        out->n_elements = 1;
        ret = decode_record(d, root, 0, out);
    } else if (json_is_array(root)) {
        size_t n = json_array_size(root);
        out->n_elements = (int)(n > (size_t)d->max_records ? (size_t)d->max_records + 1 : n);
        if (n == 0) {
            ret = push_error(d, CC_KPI_EMPTY, -1, "empty array");
        } else if (n > (size_t)d->max_records) {
            ret = push_error(d, CC_KPI_TOO_MANY_RECORDS, -1, "%zu records exceed %d", n,
                             d->max_records);
        } else {
            for (size_t i = 0; i < n && ret == 0; i++)
                ret = decode_record(d, json_array_get(root, i), (int)i, out);
        }
    } else {
        ret = push_error(d, CC_KPI_NOT_OBJECT, -1,
                         "message is a JSON %s, not an object or "
                         "an array of objects",
                         json_is_string(root)   ? "string"
                         : json_is_number(root) ? "number"
                         : json_is_null(root)   ? "null"
                                                : "boolean");
    }

done:
    json_decref(root);
    if (ret < 0) {
        d->n_rec = d->n_err = 0;
        memset(out, 0, sizeof *out);
        return ret;
    }
    d->st.records += (uint64_t)d->n_rec;
    d->st.unmapped_fields += out->unmapped_fields;
    d->st.null_values += out->null_values;
    out->records = d->rec;
    out->n_records = d->n_rec;
    out->errors = d->errs;
    out->n_errors = d->n_err;
    return 0;
}
