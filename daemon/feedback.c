/*
 * feedback.c — the operator's verdicts on alerts: the journal (JSON lines, fsync'ed), the
 * recent verdicts in memory, GET /v1/feedback and the metrics. See feedback.h (the POST that
 * takes a verdict and raises a bar is api_feedback.c's).
 */
#include "feedback.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>

#include "api_util.h"
#include "auth.h"
#include "cellcastd.h"
#include "http.h"
#include "log.h"
#include "strmap.h"

enum { FB_N = 2 }; /* CCD_FB_FALSE_ALARM, CCD_FB_CONFIRMED (feedback.h) */
static const char *const verdict_name[FB_N] = {"false_alarm", "confirmed"};

typedef struct CcdFeedback {
    char *path;          /* "" = in memory */
    json_t *recent;      /* the last CCD_FB_KEEP entries, oldest first */
    CcdStrHash by_alert; /* alert id -> its newest entry (a borrowed json_t in recent) */
    uint64_t count[FB_N], refused, bad_lines, version;
} CcdFeedback;

static int verdict_of(const char *s)
{
    for (int i = 0; s && i < FB_N; i++)
        if (!strcmp(s, verdict_name[i]))
            return i;
    return -1;
}

/* Keeps e (a reference taken) as the newest entry. */
static void remember(CcdFeedback *fb, json_t *e)
{
    json_array_append(fb->recent, e);
    if (json_array_size(fb->recent) > CCD_FB_KEEP) {
        json_t *old = json_array_get(fb->recent, 0);
        const char *id = json_string_value(json_object_get(old, "alert"));
        if (id && ccd_strhash_get(&fb->by_alert, id) == old)
            ccd_strhash_del(&fb->by_alert, id);
        json_array_remove(fb->recent, 0);
    }
    const char *id = json_string_value(json_object_get(e, "alert"));
    if (id)
        ccd_strhash_put(&fb->by_alert, id, e); /* -ENOMEM: not shown on the alert */
    int v = verdict_of(json_string_value(json_object_get(e, "verdict")));
    if (v >= 0)
        fb->count[v]++;
    fb->version++;
}

/* Appends one line to the journal and syncs it. 0 or -EIO. */
static int journal(const CcdFeedback *fb, const json_t *e)
{
    if (!fb->path[0])
        return 0;
    char *s = json_dumps(e, JSON_COMPACT);
    int fd = s ? open(fb->path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640) : -1;
    int ok = fd >= 0;
    if (ok) {
        size_t n = strlen(s);
        s[n] = '\n'; /* json_dumps's NUL becomes the line's end */
        ok = write(fd, s, n + 1) == (ssize_t)(n + 1) && fsync(fd) == 0;
        close(fd);
    }
    free(s);
    return ok ? 0 : -EIO;
}

int ccd_fb_open(Ccd *d, const char *path, char *err, size_t errlen)
{
    CcdFeedback *fb = calloc(1, sizeof *fb);
    if (!fb || !(fb->path = strdup(path ? path : "")) || !(fb->recent = json_array())) {
        if (fb)
            free(fb->path);
        free(fb);
        return cc_errf(err, errlen, -ENOMEM, "out of memory");
    }
    d->feedback = fb;
    if (!fb->path[0])
        return 0;
    FILE *f = fopen(fb->path, "r");
    if (!f) {
        if (errno == ENOENT)
            return 0;
        return cc_errf(err, errlen, -EIO, "feedback journal %s: %s", fb->path, strerror(errno));
    }
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    long lineno = 0;
    while ((n = getline(&line, &cap, f)) > 0) {
        lineno++;
        json_t *e = json_loadb(line, (size_t)n, 0, NULL);
        if (!json_is_object(e) ||
            verdict_of(json_string_value(json_object_get(e, "verdict"))) < 0 ||
            !json_is_string(json_object_get(e, "alert"))) {
            fb->bad_lines++; /* a torn last line after a crash */
            LOG_WARN("feedback", "%s:%ld: not a verdict, skipped", fb->path, lineno);
        } else {
            remember(fb, e);
        }
        json_decref(e);
    }
    free(line);
    fclose(f);
    LOG_INFO("feedback", "%zu verdict(s) read from %s", json_array_size(fb->recent), fb->path);
    return 0;
}

void ccd_fb_close(Ccd *d)
{
    CcdFeedback *fb = d->feedback;
    if (!fb)
        return;
    ccd_strhash_free(&fb->by_alert);
    json_decref(fb->recent);
    free(fb->path);
    free(fb);
    d->feedback = NULL;
}

void ccd_fb_annotate(Ccd *d, const char *alert_id, json_t *j)
{
    const CcdFeedback *fb = d->feedback;
    json_t *e = fb ? ccd_strhash_get(&fb->by_alert, alert_id) : NULL;
    if (e)
        json_object_set_new(
            j, "feedback",
            json_pack("{s:O, s:O, s:O, s:O}", "verdict", json_object_get(e, "verdict"), "comment",
                      json_object_get(e, "comment"), "user", json_object_get(e, "user"), "time",
                      json_object_get(e, "time")));
}

void ccd_fb_write(Ccd *d, const char *alert_id, CcdSb *b)
{
    json_t *o = json_object();
    if (!o)
        return;
    ccd_fb_annotate(d, alert_id, o);
    json_t *fb = json_object_get(o, "feedback");
    char *s = fb ? json_dumps(fb, JSON_COMPACT) : NULL;
    if (s) {
        ccd_sb_str(b, ",\"feedback\":");
        ccd_sb_str(b, s);
        free(s);
    }
    json_decref(o);
}

uint64_t ccd_fb_version(const Ccd *d) { return d->feedback ? d->feedback->version : 0; }

void ccd_fb_metrics(Ccd *d, struct evbuffer *b)
{
    const CcdFeedback *fb = d->feedback;
    if (!fb)
        return;
    evbuffer_add_printf(
        b,
        "# HELP cellcast_alert_feedback_total Operators' verdicts on alerts (POST "
        "/v1/alerts/{id}/feedback), journaled ones read at start included.\n"
        "# TYPE cellcast_alert_feedback_total counter\n"
        "cellcast_alert_feedback_total{verdict=\"false_alarm\"} %llu\n"
        "cellcast_alert_feedback_total{verdict=\"confirmed\"} %llu\n"
        "# HELP cellcast_alert_feedback_refused_total Verdicts refused (bad body, unknown alert, "
        "journal not written) and journal lines that did not parse.\n"
        "# TYPE cellcast_alert_feedback_refused_total counter\n"
        "cellcast_alert_feedback_refused_total %llu\n",
        (unsigned long long)fb->count[CCD_FB_FALSE_ALARM],
        (unsigned long long)fb->count[CCD_FB_CONFIRMED],
        (unsigned long long)(fb->refused + fb->bad_lines));
}

int ccd_fb_verdict(const char *s) { return verdict_of(s); }

const char *ccd_fb_verdict_name(int v) { return v >= 0 && v < FB_N ? verdict_name[v] : "?"; }

void ccd_fb_refused(Ccd *d)
{
    if (d->feedback)
        d->feedback->refused++;
}

int ccd_fb_record(Ccd *d, json_t *e)
{
    CcdFeedback *fb = d->feedback;
    if (journal(fb, e)) {
        int rc = -errno;
        fb->refused++;
        LOG_ERROR("feedback", "cannot append to %s: %s", fb->path, strerror(errno));
        return rc ? rc : -EIO;
    }
    remember(fb, e);
    return 0;
}

int ccd_h_feedback(CcdReq *r)
{
    Ccd *d = r->d;
    const CcdFeedback *fb = d->feedback;
    long long limit = 100;
    if (ccd_query_int(r, "limit", &limit) == -2 || limit < 1 || limit > CCD_FB_KEEP)
        return ccd_problem(r, 422, "bad-parameter", "limit must be an integer in [1, %d]",
                           CCD_FB_KEEP);
    if (!fb)
        return ccd_problem(r, 404, "not-found", "alerts are off: no feedback");
    json_t *arr = json_array();
    size_t n = json_array_size(fb->recent);
    for (size_t i = n; i-- > 0 && (long long)json_array_size(arr) < limit;)
        json_array_append(arr, json_array_get(fb->recent, i));
    return ccd_json(r, 200, json_pack("{s:o, s:I}", "feedback", arr, "total", (json_int_t)n));
}
