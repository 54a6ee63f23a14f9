/*
 * silences.c — silences (silences.h): matchers on labels, the list and its file (the pure
 * part); held alerts and the HTTP routes (hosted in cellcastd).
 */
#include "silences.h"

#include <errno.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cc_common.h"

typedef struct Matcher {
    int label; /* LABEL_* */
    char *value;
    int is_regex, is_equal;
    regex_t re; /* is_regex: ^(?:value)$ */
} Matcher;

typedef struct Silence {
    char id[40];
    Matcher m[CCD_SILENCE_MAX_MATCHERS];
    int n_m;
    int64_t starts_at, ends_at, updated_at;
    char *created_by, *comment;
} Silence;

struct CcdSilences {
    char *path; /* NULL: in memory */
    Silence **v;
    size_t n, cap;
    uint64_t next_id;
};

enum {
    LABEL_CELL,
    LABEL_SITE,
    LABEL_REGION,
    LABEL_SECTOR,
    LABEL_KIND,
    LABEL_REASON,
    LABEL_KPI,
    N_LABELS
};
static const char *const label_names[N_LABELS] = {"cell", "site",   "region", "sector",
                                                  "kind", "reason", "kpi"};

static void silence_free(Silence *s)
{
    if (!s)
        return;
    for (int i = 0; i < s->n_m; i++) {
        if (s->m[i].is_regex)
            regfree(&s->m[i].re);
        free(s->m[i].value);
    }
    free(s->created_by);
    free(s->comment);
    free(s);
}

void ccd_silences_close(CcdSilences **sp)
{
    CcdSilences *s = *sp;
    if (!s)
        return;
    for (size_t i = 0; i < s->n; i++)
        silence_free(s->v[i]);
    free(s->v);
    free(s->path);
    free(s);
    *sp = NULL;
}

static int parse_time(json_t *j, int64_t *out)
{
    if (json_is_integer(j)) {
        *out = json_integer_value(j);
        return 0;
    }
    const char *s = json_string_value(j);
    struct tm tm;
    memset(&tm, 0, sizeof tm);
    const char *end = s ? strptime(s, "%Y-%m-%dT%H:%M:%S", &tm) : NULL;
    if (!end)
        return -EINVAL;
    if (*end == '.') /* fractions of a second: dropped */
        for (end++; *end >= '0' && *end <= '9'; end++)
            ;
    if (strcmp(end, "Z") && strcmp(end, "+00:00"))
        return -EINVAL;
    *out = (int64_t)timegm(&tm);
    return 0;
}

static json_t *time_json(int64_t t)
{
    char buf[40];
    time_t tt = (time_t)t;
    struct tm tm;
    gmtime_r(&tt, &tm);
    strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return json_string(buf);
}

/* A silence from JSON (the API's body, or an entry of the file with its id and updatedAt).
 * NULL with a message. */
static Silence *silence_from_json(json_t *o, int64_t now, char *err, size_t errlen)
{
    Silence *s = calloc(1, sizeof *s);
    json_t *ms = json_object_get(o, "matchers"), *m;
    size_t i;
    if (!s) {
        cc_errf(err, errlen, -ENOMEM, "out of memory");
        return NULL;
    }
    if (!json_is_object(o) || !json_is_array(ms) || !json_array_size(ms) ||
        json_array_size(ms) > CCD_SILENCE_MAX_MATCHERS) {
        cc_errf(err, errlen, -EINVAL, "matchers must be an array of 1 to %d matchers",
                CCD_SILENCE_MAX_MATCHERS);
        goto fail;
    }
    json_array_foreach(ms, i, m)
    {
        const char *name = json_string_value(json_object_get(m, "name"));
        const char *value = json_string_value(json_object_get(m, "value"));
        json_t *rx = json_object_get(m, "isRegex"), *eq = json_object_get(m, "isEqual");
        Matcher *mt = &s->m[s->n_m];
        mt->label = -1;
        for (int k = 0; name && k < N_LABELS; k++)
            if (!strcmp(name, label_names[k]))
                mt->label = k;
        if (mt->label < 0 || !value || (rx && !json_is_boolean(rx)) ||
            (eq && !json_is_boolean(eq))) {
            cc_errf(err, errlen, -EINVAL,
                    "matchers[%zu]: name must be one of cell, site, region, sector, kind, "
                    "reason, kpi; value a string; isRegex and isEqual booleans",
                    i);
            goto fail;
        }
        mt->is_regex = rx && json_is_true(rx);
        mt->is_equal = !eq || json_is_true(eq);
        if (!(mt->value = strdup(value))) {
            cc_errf(err, errlen, -ENOMEM, "out of memory");
            goto fail;
        }
        if (mt->is_regex) {
            size_t n = strlen(value) + 8;
            char *anchored = malloc(n);
            if (!anchored) {
                cc_errf(err, errlen, -ENOMEM, "out of memory");
                goto fail;
            }
            snprintf(anchored, n, "^(%s)$", value); /* anchored, as Alertmanager's */
            int rc = regcomp(&mt->re, anchored, REG_EXTENDED | REG_NOSUB);
            free(anchored);
            if (rc) {
                char msg[128];
                regerror(rc, &mt->re, msg, sizeof msg);
                mt->is_regex = 0;
                s->n_m++;
                cc_errf(err, errlen, -EINVAL, "matchers[%zu]: bad regex '%s': %s", i, value, msg);
                goto fail;
            }
        }
        s->n_m++;
    }
    json_t *st = json_object_get(o, "startsAt"), *en = json_object_get(o, "endsAt");
    s->starts_at = now;
    if ((st && !json_is_null(st) && parse_time(st, &s->starts_at)) || !en ||
        parse_time(en, &s->ends_at)) {
        cc_errf(err, errlen, -EINVAL,
                "startsAt (optional, default now) and endsAt (required) must be RFC 3339 UTC "
                "times (2026-01-02T10:00:00Z) or unix seconds");
        goto fail;
    }
    if (s->ends_at <= s->starts_at) {
        cc_errf(err, errlen, -EINVAL, "endsAt must be after startsAt");
        goto fail;
    }
    const char *by = json_string_value(json_object_get(o, "createdBy"));
    const char *comment = json_string_value(json_object_get(o, "comment"));
    s->created_by = strdup(by ? by : "");
    s->comment = strdup(comment ? comment : "");
    if (!s->created_by || !s->comment) {
        cc_errf(err, errlen, -ENOMEM, "out of memory");
        goto fail;
    }
    s->updated_at = now;
    return s;
fail:
    silence_free(s);
    return NULL;
}

static json_t *silence_json(const Silence *s, int64_t now)
{
    json_t *ms = json_array();
    for (int i = 0; i < s->n_m; i++)
        json_array_append_new(
            ms, json_pack("{s:s, s:s, s:b, s:b}", "name", label_names[s->m[i].label], "value",
                          s->m[i].value, "isRegex", s->m[i].is_regex, "isEqual", s->m[i].is_equal));
    const char *state = now < s->starts_at ? "pending" : now < s->ends_at ? "active" : "expired";
    return json_pack("{s:s, s:o, s:o, s:o, s:o, s:s, s:s, s:{s:s}}", "id", s->id, "matchers", ms,
                     "startsAt", time_json(s->starts_at), "endsAt", time_json(s->ends_at),
                     "updatedAt", time_json(s->updated_at), "createdBy", s->created_by, "comment",
                     s->comment, "status", "state", state);
}

json_t *ccd_silences_json(const CcdSilences *s, int64_t now)
{
    json_t *a = json_array();
    for (size_t i = 0; i < s->n; i++)
        json_array_append_new(a, silence_json(s->v[i], now));
    return json_pack("{s:o}", "silences", a);
}

/* Rewrites the file atomically (a temporary beside it, fsync'ed, renamed). 0 or -EIO. */
static int save(const CcdSilences *s)
{
    if (!s->path)
        return 0;
    char tmp[4096 + 8];
    snprintf(tmp, sizeof tmp, "%s.tmp", s->path);
    json_t *j = ccd_silences_json(s, 0); /* state is recomputed at load */
    json_object_set_new(j, "next_id", json_integer((json_int_t)s->next_id));
    FILE *f = fopen(tmp, "w");
    int rc = f && !json_dumpf(j, f, JSON_COMPACT) && !fflush(f) && !fsync(fileno(f)) ? 0 : -EIO;
    if (f && fclose(f))
        rc = -EIO;
    json_decref(j);
    if (!rc && rename(tmp, s->path))
        rc = -EIO;
    if (rc)
        unlink(tmp);
    return rc;
}

static int push(CcdSilences *s, Silence *x)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 16;
        Silence **p = realloc(s->v, cap * sizeof *p);
        if (!p)
            return -ENOMEM;
        s->v = p;
        s->cap = cap;
    }
    s->v[s->n++] = x;
    return 0;
}

int ccd_silences_open(CcdSilences **out, const char *path, char *err, size_t errlen)
{
    CcdSilences *s = calloc(1, sizeof *s);
    *out = NULL;
    if (!s || (path && path[0] && !(s->path = strdup(path)))) {
        free(s);
        return cc_errf(err, errlen, -ENOMEM, "out of memory");
    }
    s->next_id = 1;
    FILE *f = s->path ? fopen(s->path, "r") : NULL;
    if (!f) {
        if (s->path && errno != ENOENT) {
            int rc = cc_errf(err, errlen, -EIO, "%s: %s", s->path, strerror(errno));
            ccd_silences_close(&s);
            return rc;
        }
        *out = s;
        return 0;
    }
    json_error_t je;
    json_t *j = json_loadf(f, 0, &je);
    fclose(f);
    json_t *a = json_object_get(j, "silences"), *o;
    size_t i;
    int rc = 0;
    if (!json_is_array(a))
        rc = cc_errf(err, errlen, -EINVAL, "%s: not a silences file (%s)", s->path,
                     j ? "no silences array" : je.text);
    json_array_foreach(a, i, o)
    {
        char e2[256];
        const char *id = json_string_value(json_object_get(o, "id"));
        Silence *x = rc ? NULL : silence_from_json(o, 0, e2, sizeof e2);
        if (rc)
            break;
        if (!x || !id) {
            silence_free(x);
            rc = cc_errf(err, errlen, -EINVAL, "%s: silence %zu: %s", s->path, i, x ? "no id" : e2);
            break;
        }
        snprintf(x->id, sizeof x->id, "%s", id);
        parse_time(json_object_get(o, "updatedAt"), &x->updated_at);
        if (push(s, x)) {
            silence_free(x);
            rc = cc_errf(err, errlen, -ENOMEM, "out of memory");
        }
    }
    json_int_t next = json_integer_value(json_object_get(j, "next_id"));
    if (next > 0)
        s->next_id = (uint64_t)next;
    json_decref(j);
    if (rc) {
        ccd_silences_close(&s);
        return rc;
    }
    *out = s;
    return 0;
}

/* Drops the silences expired for longer than CCD_SILENCE_KEEP_EXPIRED_S. */
static void prune(CcdSilences *s, int64_t now)
{
    size_t k = 0;
    for (size_t i = 0; i < s->n; i++) {
        if (s->v[i]->ends_at + CCD_SILENCE_KEEP_EXPIRED_S < now)
            silence_free(s->v[i]);
        else
            s->v[k++] = s->v[i];
    }
    s->n = k;
}

size_t ccd_silences_active(const CcdSilences *s, int64_t now)
{
    size_t n = 0;
    for (size_t i = 0; i < s->n; i++)
        n += s->v[i]->starts_at <= now && now < s->v[i]->ends_at;
    return n;
}

int ccd_silences_add(CcdSilences *s, json_t *body, int64_t now, char *id, char *err, size_t errlen)
{
    size_t live = 0;
    for (size_t i = 0; i < s->n; i++)
        live += now < s->v[i]->ends_at;
    if (live >= CCD_SILENCES_MAX)
        return cc_errf(err, errlen, -ENOSPC, "%d silences active or pending: expire some first",
                       CCD_SILENCES_MAX);
    Silence *x = silence_from_json(body, now, err, errlen);
    if (!x)
        return strstr(err, "out of memory") ? -ENOMEM : -EINVAL;
    snprintf(x->id, sizeof x->id, "s%llu-%llx", (unsigned long long)s->next_id,
             (unsigned long long)now);
    prune(s, now);
    if (push(s, x)) {
        silence_free(x);
        return cc_errf(err, errlen, -ENOMEM, "out of memory");
    }
    s->next_id++;
    if (save(s)) {
        s->n--;
        s->next_id--;
        silence_free(x);
        return cc_errf(err, errlen, -EIO, "%s: cannot write the silences file", s->path);
    }
    snprintf(id, 40, "%s", x->id);
    return 0;
}

int ccd_silences_expire(CcdSilences *s, const char *id, int64_t now)
{
    for (size_t i = 0; i < s->n; i++) {
        Silence *x = s->v[i];
        if (strcmp(x->id, id))
            continue;
        int64_t old_end = x->ends_at, old_start = x->starts_at, old_up = x->updated_at;
        if (now < x->ends_at) {
            x->ends_at = now;
            if (x->starts_at >= now) /* a pending one: expired without being active */
                x->starts_at = now - 1;
        }
        x->updated_at = now;
        if (save(s)) {
            x->ends_at = old_end;
            x->starts_at = old_start;
            x->updated_at = old_up;
            return -EIO;
        }
        return 0;
    }
    return -ENOENT;
}

static int matcher_ok(const Matcher *m, const char *v)
{
    int eq = m->is_regex ? !regexec(&m->re, v ? v : "", 0, NULL, 0) : !strcmp(m->value, v ? v : "");
    return m->is_equal ? eq : !eq;
}

const char *ccd_silences_match(const CcdSilences *s, const CcdSilenceLabels *l, int64_t now)
{
    const char *v[N_LABELS] = {l->cell, l->site, l->region, l->sector, l->kind, l->reason, l->kpi};
    for (size_t i = 0; i < s->n; i++) {
        const Silence *x = s->v[i];
        if (now < x->starts_at || now >= x->ends_at)
            continue;
        int all = 1;
        for (int k = 0; k < x->n_m && all; k++)
            all = matcher_ok(&x->m[k], v[x->m[k].label]);
        if (all)
            return x->id;
    }
    return NULL;
}
