/*
 * silences.c — silences (silences.h), the pure part: matchers on labels, weekly windows,
 * the list, its file (the API's) and the configuration's file.
 */
#include "silences.h"

#include <ctype.h>
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
    char id[CCD_SILENCE_ID_MAX];
    Matcher m[CCD_SILENCE_MAX_MATCHERS];
    int n_m;
    int64_t starts_at, ends_at, updated_at;
    char *created_by, *comment;
    int maintenance;    /* also a maintenance window (learning frozen) */
    int from_config;    /* silences.file: not saved, not expired through the API */
    CcdRecurrence *rec; /* NULL: the whole range */
} Silence;

struct CcdSilences {
    char *path; /* NULL: in memory */
    Silence **v;
    size_t n, cap;
    uint64_t next_id;
    uint32_t tag; /* this list's random part of its ids: unique across members */
};

#define WEEK_S (7 * 86400)

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
    free(s->rec);
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

/* "HH:MM" into minutes of the day (max: the latest allowed, 1439 or 1440). -1: not one. */
static int parse_hhmm(const char *t, int max)
{
    if (!t || strlen(t) != 5 || !isdigit((unsigned char)t[0]) || !isdigit((unsigned char)t[1]) ||
        t[2] != ':' || !isdigit((unsigned char)t[3]) || !isdigit((unsigned char)t[4]))
        return -1;
    int h = (t[0] - '0') * 10 + (t[1] - '0'), m = (t[3] - '0') * 10 + (t[4] - '0');
    if (m > 59 || h * 60 + m > max)
        return -1;
    return h * 60 + m;
}

/* A day name into 0 (Monday) .. 6, or -1. */
static int parse_day(const char *d)
{
    static const char *const full[7] = {"monday", "tuesday",  "wednesday", "thursday",
                                        "friday", "saturday", "sunday"};
    for (int i = 0; d && i < 7; i++)
        if (!strcasecmp(d, full[i]) || (strlen(d) == 3 && !strncasecmp(d, full[i], 3)))
            return i;
    return -1;
}

/* "UTC", "Z" or "±HH:MM" into seconds east of UTC; -1 when not one (never a valid offset:
 * those are whole minutes). */
static int32_t parse_offset(const char *z)
{
    if (!z || !strcmp(z, "UTC") || !strcmp(z, "Z"))
        return 0;
    int m = (z[0] == '+' || z[0] == '-') ? parse_hhmm(z + 1, 14 * 60) : -1;
    return m < 0 ? -1 : (z[0] == '-' ? -m : m) * 60;
}

int ccd_recurrence_parse(CcdRecurrence *r, json_t *j, char *err, size_t errlen)
{
    json_t *w = json_object_get(j, "weekly"), *e;
    size_t i;
    memset(r, 0, sizeof *r);
    if (!json_is_object(j) || !json_is_array(w) || !json_array_size(w) ||
        json_array_size(w) > CCD_SILENCE_MAX_WINDOWS)
        return cc_errf(err, errlen, -EINVAL,
                       "recurrence.weekly must be an array of 1 to %d windows {days, start, end}",
                       CCD_SILENCE_MAX_WINDOWS);
    json_t *tz = json_object_get(j, "timezone");
    if (tz && !json_is_null(tz) &&
        (!json_is_string(tz) || parse_offset(json_string_value(tz)) == -1))
        return cc_errf(err, errlen, -EINVAL,
                       "recurrence.timezone must be UTC or a fixed offset such as +02:00 (named "
                       "zones, whose offset changes with daylight saving, are not supported)");
    r->offset_s = tz && json_is_string(tz) ? parse_offset(json_string_value(tz)) : 0;
    json_array_foreach(w, i, e)
    {
        int start = parse_hhmm(json_string_value(json_object_get(e, "start")), 1439);
        int end = parse_hhmm(json_string_value(json_object_get(e, "end")), 1440);
        json_t *days = json_object_get(e, "days"), *d;
        size_t k;
        if (!json_is_object(e))
            return cc_errf(err, errlen, -EINVAL, "recurrence.weekly[%zu] must be an object", i);
        if (start < 0 || end < 0)
            return cc_errf(err, errlen, -EINVAL,
                           "recurrence.weekly[%zu].%s must be a time of day HH:MM (start "
                           "00:00..23:59, end 00:01..24:00)",
                           i, start < 0 ? "start" : "end");
        if (start == end)
            return cc_errf(err, errlen, -EINVAL,
                           "recurrence.weekly[%zu]: start and end are the same time (a whole "
                           "day is 00:00 to 24:00)",
                           i);
        if (days && (!json_is_array(days) || !json_array_size(days)))
            return cc_errf(err, errlen, -EINVAL,
                           "recurrence.weekly[%zu].days must be a non-empty array of day names "
                           "(absent: every day)",
                           i);
        int on[7] = {0};
        if (!days)
            for (int k7 = 0; k7 < 7; k7++)
                on[k7] = 1;
        json_array_foreach(days, k, d)
        {
            int day = parse_day(json_string_value(d));
            if (day < 0)
                return cc_errf(err, errlen, -EINVAL,
                               "recurrence.weekly[%zu].days[%zu] must be a day: mon..sun or "
                               "monday..sunday",
                               i, k);
            on[day] = 1;
        }
        int len = (end > start ? end - start : end + 1440 - start) * 60; /* across midnight */
        for (int day = 0; day < 7; day++)
            if (on[day]) {
                r->a[r->n] = day * 86400 + start * 60;
                r->b[r->n] = r->a[r->n] + len;
                r->n++;
            }
    }
    return 0;
}

static int64_t floor_div(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

int ccd_recurrence_window(const CcdRecurrence *r, int64_t t, int64_t *ws, int64_t *we)
{
    if (!r->n)
        return -ENOENT;
    int64_t local = t + r->offset_s;
    int64_t day = floor_div(local, 86400);
    int64_t dow = ((day + 3) % 7 + 7) % 7; /* 1970-01-01 was a Thursday; 0 = Monday */
    int64_t week = (day - dow) * 86400;    /* this week's Monday 00:00, local */
    int64_t bs = 0, be = 0;
    int found = 0;
    /* a window of the week before may still run (Sunday's into Monday); one of the next
     * week always ends after t */
    for (int k = -1; k <= 1; k++)
        for (int i = 0; i < r->n; i++) {
            int64_t s = week + k * (int64_t)WEEK_S + r->a[i],
                    e = week + k * (int64_t)WEEK_S + r->b[i];
            if (e > local && (!found || s < bs)) {
                bs = s, be = e;
                found = 1;
            }
        }
    /* merge the windows that overlap or touch it (Monday 22:00-24:00 and Tuesday 00:00-02:00
     * are one); bounded: a recurrence that covers the whole week stops two weeks on */
    for (int grown = 1; grown;) {
        grown = 0;
        for (int k = -1; k <= 2; k++)
            for (int i = 0; i < r->n; i++) {
                int64_t s = week + k * (int64_t)WEEK_S + r->a[i],
                        e = week + k * (int64_t)WEEK_S + r->b[i];
                if (s <= be && e > be && s >= bs) {
                    be = e;
                    grown = 1;
                }
            }
    }
    *ws = bs - r->offset_s;
    *we = be - r->offset_s;
    return 0;
}

/* The window of x in effect at t or next, within its range: [*ws, *we). 0, or -ENOENT (none
 * left: expired, or no window before its end). */
static int silence_window(const Silence *x, int64_t t, int64_t *ws, int64_t *we)
{
    if (t >= x->ends_at)
        return -ENOENT;
    int64_t from = t > x->starts_at ? t : x->starts_at;
    if (!x->rec) {
        *ws = x->starts_at, *we = x->ends_at;
        return 0;
    }
    if (ccd_recurrence_window(x->rec, from, ws, we))
        return -ENOENT;
    if (*ws < x->starts_at)
        *ws = x->starts_at;
    if (*ws >= x->ends_at)
        return -ENOENT;
    if (*we > x->ends_at)
        *we = x->ends_at;
    return 0;
}

static int silence_active(const Silence *x, int64_t t)
{
    int64_t ws, we;
    return t >= x->starts_at && !silence_window(x, t, &ws, &we) && ws <= t;
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
    json_t *rec = json_object_get(o, "recurrence");
    if (rec && !json_is_null(rec)) {
        if (!(s->rec = malloc(sizeof *s->rec))) {
            cc_errf(err, errlen, -ENOMEM, "out of memory");
            goto fail;
        }
        if (ccd_recurrence_parse(s->rec, rec, err, errlen))
            goto fail;
    }
    json_t *mt = json_object_get(o, "maintenance");
    if (mt && !json_is_boolean(mt)) {
        cc_errf(err, errlen, -EINVAL, "maintenance must be a boolean");
        goto fail;
    }
    s->maintenance = mt && json_is_true(mt);
    json_t *st = json_object_get(o, "startsAt"), *en = json_object_get(o, "endsAt");
    s->starts_at = now;
    s->ends_at = CCD_SILENCE_FOREVER;
    if ((st && !json_is_null(st) && parse_time(st, &s->starts_at)) || (!en && !s->rec) ||
        (en && parse_time(en, &s->ends_at))) {
        cc_errf(err, errlen, -EINVAL,
                "startsAt (optional: default now; in silences.file, always) and endsAt (required "
                "without a recurrence; "
                "with one, default never) must be RFC 3339 UTC times (2026-01-02T10:00:00Z) or "
                "unix seconds");
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

/* The recurrence back as JSON: one window per interval (equal ones are not folded back
 * into one with several days: the same windows, spelt out). */
static json_t *recurrence_json(const CcdRecurrence *r)
{
    static const char *const day[7] = {"mon", "tue", "wed", "thu", "fri", "sat", "sun"};
    json_t *w = json_array();
    for (int i = 0; i < r->n; i++) {
        char st[16], en[16];
        int a = r->a[i] % 86400 / 60, b = (r->b[i] - r->a[i]) / 60 + a;
        b = b > 1440 ? b - 1440 : b;
        snprintf(st, sizeof st, "%02d:%02d", a / 60, a % 60);
        snprintf(en, sizeof en, "%02d:%02d", b / 60, b % 60);
        json_array_append_new(w, json_pack("{s:[s], s:s, s:s}", "days", day[r->a[i] / 86400],
                                           "start", st, "end", en));
    }
    int off = r->offset_s < 0 ? -r->offset_s : r->offset_s;
    char tz[16];
    if (r->offset_s)
        snprintf(tz, sizeof tz, "%c%02d:%02d", r->offset_s < 0 ? '-' : '+', off / 3600,
                 off / 60 % 60);
    else
        snprintf(tz, sizeof tz, "UTC");
    return json_pack("{s:o, s:s}", "weekly", w, "timezone", tz);
}

static json_t *silence_json(const Silence *s, int64_t now)
{
    json_t *ms = json_array();
    for (int i = 0; i < s->n_m; i++)
        json_array_append_new(
            ms, json_pack("{s:s, s:s, s:b, s:b}", "name", label_names[s->m[i].label], "value",
                          s->m[i].value, "isRegex", s->m[i].is_regex, "isEqual", s->m[i].is_equal));
    int64_t ws, we;
    int next = !silence_window(s, now, &ws, &we);
    const char *state = !next ? "expired" : silence_active(s, now) ? "active" : "pending";
    json_t *status = json_pack("{s:s}", "state", state);
    if (next)
        json_object_set_new(
            status, "nextWindow",
            json_pack("{s:o, s:o}", "startsAt", time_json(ws), "endsAt", time_json(we)));
    json_t *o = json_pack("{s:s, s:o, s:o, s:o, s:o, s:s, s:s, s:b, s:s, s:o}", "id", s->id,
                          "matchers", ms, "startsAt", time_json(s->starts_at), "endsAt",
                          time_json(s->ends_at), "updatedAt", time_json(s->updated_at), "createdBy",
                          s->created_by, "comment", s->comment, "maintenance", s->maintenance,
                          "source", s->from_config ? "config" : "api", "status", status);
    if (s->rec)
        json_object_set_new(o, "recurrence", recurrence_json(s->rec));
    return o;
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
    json_t *a = json_array();
    for (size_t i = 0; i < s->n; i++)
        if (!s->v[i]->from_config) /* the configuration's are its file's */
            json_array_append_new(a, silence_json(s->v[i], 0)); /* state: recomputed */
    json_t *j = json_pack("{s:o}", "silences", a);
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

static int api_id_ok(const char *id, size_t n);

int ccd_silences_open(CcdSilences **out, const char *path, char *err, size_t errlen)
{
    CcdSilences *s = calloc(1, sizeof *s);
    *out = NULL;
    if (!s || (path && path[0] && !(s->path = strdup(path)))) {
        free(s);
        return cc_errf(err, errlen, -ENOMEM, "out of memory");
    }
    s->next_id = 1;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t h = 1469598103934665603ULL; /* FNV-1a of the time, the pid and the address */
    uint64_t parts[3] = {(uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec,
                         (uint64_t)getpid(), (uint64_t)(uintptr_t)s};
    for (int i = 0; i < 3; i++)
        for (int b = 0; b < 8; b++)
            h = (h ^ ((parts[i] >> (8 * b)) & 0xff)) * 1099511628211ULL;
    s->tag = (uint32_t)(h ^ (h >> 32));
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
        /* an id as the API and the silences topic take them (it was cut to fit, silently,
         * and could be a configuration's, cfg-): a bad entry refuses the file as the others */
        if (!api_id_ok(id, strlen(id))) {
            silence_free(x);
            rc = cc_errf(err, errlen, -EINVAL,
                         "%s: silence %zu: id '%.*s%s' is not a silence id (1 to %d letters, "
                         "digits, '.', '_', '-'; not cfg-)",
                         s->path, i, CCD_SILENCE_ID_MAX, id,
                         strlen(id) > CCD_SILENCE_ID_MAX ? "..." : "", CCD_SILENCE_ID_MAX - 1);
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
        if (!s->v[i]->from_config && s->v[i]->ends_at + CCD_SILENCE_KEEP_EXPIRED_S < now)
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
        n += silence_active(s->v[i], now);
    return n;
}

size_t ccd_silences_maintenance_live(const CcdSilences *s, int64_t now)
{
    size_t n = 0;
    for (size_t i = 0; i < s->n; i++)
        n += s->v[i]->maintenance && now < s->v[i]->ends_at;
    return n;
}

int ccd_silences_add(CcdSilences *s, json_t *body, int64_t now, char *id, char *err, size_t errlen)
{
    size_t live = 0;
    for (size_t i = 0; i < s->n; i++)
        live += !s->v[i]->from_config && now < s->v[i]->ends_at;
    if (live >= CCD_SILENCES_MAX)
        return cc_errf(err, errlen, -ENOSPC, "%d silences active or pending: expire some first",
                       CCD_SILENCES_MAX);
    Silence *x = silence_from_json(body, now, err, errlen);
    if (!x)
        return strstr(err, "out of memory") ? -ENOMEM : -EINVAL;
    /* ids of several members meet on the silences topic: the list's random tag keeps two
     * members' n-th silences of the same second apart */
    snprintf(x->id, sizeof x->id, "s%llu-%llx-%08x", (unsigned long long)s->next_id,
             (unsigned long long)now, (unsigned)s->tag);
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
        if (x->from_config)
            return -EPERM;
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
        if (now < x->starts_at || now >= x->ends_at || !silence_active(x, now))
            continue;
        int all = 1;
        for (int k = 0; k < x->n_m && all; k++)
            all = matcher_ok(&x->m[k], v[x->m[k].label]);
        if (all)
            return x->id;
    }
    return NULL;
}

/* Whether the matchers of x on the cell's labels (v: the cell's, by label) all match. */
static int cell_matchers_ok(const Silence *x, const char *const *v)
{
    for (int k = 0; k < x->n_m; k++)
        if (x->m[k].label <= LABEL_SECTOR && !matcher_ok(&x->m[k], v[x->m[k].label]))
            return 0;
    return 1;
}

int ccd_silences_maintenance_of(const CcdSilences *s, const CcdSilenceLabels *l, size_t *idx,
                                int max)
{
    const char *v[N_LABELS] = {l->cell, l->site, l->region, l->sector, NULL, NULL, NULL};
    int n = 0;
    for (size_t i = 0; i < s->n && n < max; i++)
        if (s->v[i]->maintenance && cell_matchers_ok(s->v[i], v))
            idx[n++] = i;
    return n;
}

int ccd_silences_window_at(const CcdSilences *s, size_t i, int64_t t, int64_t *ws, int64_t *we)
{
    return i < s->n ? silence_window(s->v[i], t, ws, we) : -ENOENT;
}

const char *ccd_silences_maintenance(const CcdSilences *s, const CcdSilenceLabels *l, int64_t t)
{
    const char *v[N_LABELS] = {l->cell, l->site, l->region, l->sector, NULL, NULL, NULL};
    for (size_t i = 0; i < s->n; i++) {
        const Silence *x = s->v[i];
        if (!x->maintenance || t < x->starts_at || t >= x->ends_at || !silence_active(x, t))
            continue;
        if (cell_matchers_ok(x, v)) /* the cell's labels only */
            return x->id;
    }
    return NULL;
}

json_t *ccd_silences_get(const CcdSilences *s, const char *id, int64_t now)
{
    for (size_t i = 0; i < s->n; i++)
        if (!strcmp(s->v[i]->id, id))
            return silence_json(s->v[i], now);
    return NULL;
}

/* An API id as this code makes them, or a member of another version might: 1 to 39 of
 * [A-Za-z0-9._-], not cfg-. */
static int api_id_ok(const char *id, size_t n)
{
    if (n < 1 || n >= CCD_SILENCE_ID_MAX || (n >= 4 && !strncmp(id, "cfg-", 4)))
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)id[i]) && !strchr("._-", id[i]))
            return 0;
    return 1;
}

int ccd_silences_merge(CcdSilences *s, const void *key, size_t key_len, const void *payload,
                       size_t len, int64_t now, char *err, size_t errlen)
{
    char id[CCD_SILENCE_ID_MAX];
    if (!key || !api_id_ok(key, key_len))
        return cc_errf(err, errlen, -EINVAL,
                       "the key is not a silence id (1 to %d letters, digits, '.', '_', '-'; "
                       "not cfg-)",
                       CCD_SILENCE_ID_MAX - 1);
    memcpy(id, key, key_len);
    id[key_len] = 0;
    if (!payload) /* a tombstone: silences expire, they are not deleted */
        return 0;
    if (len > CCD_SILENCE_RECORD_MAX)
        return cc_errf(err, errlen, -EINVAL, "silence %s: %zu bytes, over %d", id, len,
                       CCD_SILENCE_RECORD_MAX);
    json_error_t je;
    json_t *o = json_loadb(payload, len, JSON_REJECT_DUPLICATES, &je);
    const char *rid = json_string_value(json_object_get(o, "id"));
    const char *src = json_string_value(json_object_get(o, "source"));
    int64_t up = 0, start = 0;
    int rc = 0;
    if (!json_is_object(o))
        rc = cc_errf(err, errlen, -EINVAL, "silence %s: not a JSON object (%s)", id,
                     o ? "another value" : je.text);
    else if (!rid || strcmp(rid, id))
        rc = cc_errf(err, errlen, -EINVAL, "silence %s: its id is not its key", id);
    else if (src && strcmp(src, "api"))
        rc = cc_errf(err, errlen, -EINVAL, "silence %s: source '%s' (only the API's are shared)",
                     id, src);
    else if (parse_time(json_object_get(o, "updatedAt"), &up) ||
             parse_time(json_object_get(o, "startsAt"), &start))
        rc = cc_errf(err, errlen, -EINVAL, "silence %s: updatedAt and startsAt are required", id);
    else if (up > now + 3600)
        rc = cc_errf(err, errlen, -EINVAL, "silence %s: updatedAt is more than an hour ahead", id);
    if (rc) {
        json_decref(o);
        return rc;
    }
    char e2[256];
    Silence *x = silence_from_json(o, now, e2, sizeof e2);
    json_decref(o);
    if (!x)
        return cc_errf(err, errlen, strstr(e2, "out of memory") ? -ENOMEM : -EINVAL,
                       "silence %s: %s", id, e2);
    snprintf(x->id, sizeof x->id, "%s", id);
    x->updated_at = up;
    if (x->ends_at + CCD_SILENCE_KEEP_EXPIRED_S < now) { /* long expired: compacted history */
        silence_free(x);
        return 0;
    }
    size_t at = s->n, live = 0;
    for (size_t i = 0; i < s->n; i++) {
        if (!strcmp(s->v[i]->id, id))
            at = i;
        live += !s->v[i]->from_config && now < s->v[i]->ends_at;
    }
    /* newer wins; at the same second the earlier end (an expiry only ever shortens one) */
    if (at < s->n && (s->v[at]->from_config || s->v[at]->updated_at > up ||
                      (s->v[at]->updated_at == up && s->v[at]->ends_at <= x->ends_at))) {
        silence_free(x); /* an echo of ours, or not newer than what we hold */
        return 0;
    }
    if (at == s->n && live >= CCD_SILENCES_MAX && now < x->ends_at) {
        silence_free(x);
        return cc_errf(err, errlen, -ENOSPC, "silence %s: %d silences active or pending", id,
                       CCD_SILENCES_MAX);
    }
    Silence *old = at < s->n ? s->v[at] : NULL;
    if (old)
        s->v[at] = x;
    else if (push(s, x)) {
        silence_free(x);
        return cc_errf(err, errlen, -ENOMEM, "out of memory");
    }
    if (save(s)) {
        if (old)
            s->v[at] = old;
        else
            s->n--;
        silence_free(x);
        return cc_errf(err, errlen, -EIO, "%s: cannot write the silences file", s->path);
    }
    silence_free(old);
    return 1;
}

/* A configuration id: 1 to 32 of [A-Za-z0-9._-]. */
static int config_id_ok(const char *id)
{
    size_t n = id ? strlen(id) : 0;
    if (n < 1 || n > 32)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)id[i]) && !strchr("._-", id[i]))
            return 0;
    return 1;
}

int ccd_silences_config_read(CcdSilences **out, const char *path, int64_t now, char *err,
                             size_t errlen)
{
    CcdSilences *s = calloc(1, sizeof *s);
    *out = NULL;
    if (!s)
        return cc_errf(err, errlen, -ENOMEM, "out of memory");
    if (!path || !path[0]) {
        *out = s;
        return 0;
    }
    json_error_t je;
    json_t *j = json_load_file(path, 0, &je);
    if (!j) {
        free(s);
        FILE *f = fopen(path, "r");
        if (!f)
            return cc_errf(err, errlen, -EIO, "silences.file %s: %s", path, strerror(errno));
        fclose(f);
        return cc_errf(err, errlen, -EINVAL, "silences.file %s: line %d: %s", path, je.line,
                       je.text);
    }
    json_t *a = json_is_array(j) ? j : json_object_get(j, "silences"), *o;
    size_t i;
    int rc = 0;
    if (!json_is_array(a))
        rc =
            cc_errf(err, errlen, -EINVAL,
                    "silences.file %s: not a silences file ({\"silences\": [...]} or [...])", path);
    else if (json_array_size(a) > CCD_SILENCES_MAX)
        rc = cc_errf(err, errlen, -EINVAL, "silences.file %s: more than %d silences", path,
                     CCD_SILENCES_MAX);
    json_array_foreach(a, i, o)
    {
        char e2[256];
        if (rc)
            break;
        const char *id = json_string_value(json_object_get(o, "id"));
        /* startsAt default: always (0), not the time of the read, which moves */
        Silence *x = silence_from_json(o, 0, e2, sizeof e2);
        if (!x) {
            rc = cc_errf(err, errlen, strstr(e2, "out of memory") ? -ENOMEM : -EINVAL,
                         "silences.file %s: silences[%zu]: %s", path, i, e2);
            break;
        }
        x->updated_at = now;
        if (!config_id_ok(id)) {
            silence_free(x);
            rc = cc_errf(err, errlen, -EINVAL,
                         "silences.file %s: silences[%zu]: id must be 1 to 32 letters, digits, "
                         "'.', '_' or '-' (it names the silence on every member)",
                         path, i);
            break;
        }
        snprintf(x->id, sizeof x->id, "cfg-%s", id);
        x->from_config = 1;
        if (!json_object_get(o, "createdBy")) {
            free(x->created_by);
            x->created_by = strdup("config");
        }
        for (size_t k = 0; k < s->n && x; k++)
            if (!strcmp(s->v[k]->id, x->id)) {
                rc = cc_errf(err, errlen, -EINVAL,
                             "silences.file %s: silences[%zu]: duplicate id '%s'", path, i, id);
                silence_free(x);
                x = NULL;
            }
        if (x && (!x->created_by || push(s, x))) {
            silence_free(x);
            rc = cc_errf(err, errlen, -ENOMEM, "out of memory");
        }
    }
    json_decref(j);
    if (rc) {
        ccd_silences_close(&s);
        return rc;
    }
    *out = s;
    return 0;
}

int ccd_silences_config_swap(CcdSilences *s, CcdSilences **cfgp)
{
    CcdSilences *cfg = *cfgp;
    int rc = 0;
    size_t k = 0;
    for (size_t i = 0; i < s->n; i++) {
        if (s->v[i]->from_config)
            silence_free(s->v[i]);
        else
            s->v[k++] = s->v[i];
    }
    s->n = k;
    if (cfg && cfg->n) { /* the configuration's first: they match before the API's */
        size_t need = s->n + cfg->n;
        if (need > s->cap) {
            Silence **p = realloc(s->v, need * sizeof *p);
            if (p) {
                s->v = p;
                s->cap = need;
            }
        }
        if (need <= s->cap) {
            memmove(s->v + cfg->n, s->v, s->n * sizeof *s->v);
            memcpy(s->v, cfg->v, cfg->n * sizeof *s->v);
            s->n = need;
            cfg->n = 0;
        } else {
            rc = -ENOMEM;
        }
    }
    ccd_silences_close(cfgp);
    return rc;
}
