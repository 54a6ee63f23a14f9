/*
 * nab.c — the Numenta Anomaly Benchmark: corpus, scorer, detectors, results files
 * (see nab.h for the rules).
 */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cc_time.h"
#include "nab.h"

const char *const cct_nab_profile_names[CCT_NAB_PROFILES] = {"standard", "reward_low_FP_rate",
                                                             "reward_low_FN_rate"};

/* ------------------------------------------------------------------ scorer */

int cct_nab_probation(int n)
{
    /* NAB: min(floor(0.15 n), 0.15 * 5000) */
    int p = (int)floor(0.15 * n);
    return p < 750 ? p : 750;
}

double cct_nab_scaled_sigmoid(double x)
{
    if (x >= 3.0)
        return -1.0;
    return 2.0 / (1.0 + exp(5.0 * x)) - 1.0;
}

/* One scorable (non-probationary) row: its score, what detecting it is worth, and its
 * window (corpus-wide index) or -1 outside every window. */
typedef struct Point {
    double score, weight;
    int win;
    int order; ///< corpus order, for a stable sort
} Point;

/* Descending score, then corpus order (NAB sorts stably). */
static int point_cmp(const void *pa, const void *pb)
{
    const Point *a = pa, *b = pb;
    if (a->score != b->score)
        return a->score > b->score ? -1 : 1;
    return (a->order > b->order) - (a->order < b->order);
}

/* The scorable rows of the corpus with their weights (NAB's calcSweepScore), windows
 * numbered across the corpus; *n_scored_win gets the number of windows that have scorable
 * rows (a window inside the probation never counts, not even as a miss). Returns the
 * points sorted by descending score, NULL on ENOMEM. */
static Point *sweep_points(const CctNabSeries *s, int n, const CctNabCost *w, long *n_pts,
                           int *n_scored_win)
{
    long total = 0;
    for (int k = 0; k < n; k++)
        total += s[k].n;
    Point *p = malloc((size_t)(total ? total : 1) * sizeof *p);
    if (!p)
        return NULL;
    const double max_tp = cct_nab_scaled_sigmoid(-1.0);
    long m = 0;
    int win_base = 0, scored = 0;
    for (int k = 0; k < n; k++) {
        const CctNabSeries *se = &s[k];
        const int prob = cct_nab_probation(se->n);
        int wi = 0, prev_end = -1, prev_width = 0, last_counted = -1;
        for (int i = 0; i < se->n; i++) {
            while (wi < se->n_win && se->win[2 * wi + 1] < i) {
                prev_end = se->win[2 * wi + 1];
                prev_width = se->win[2 * wi + 1] - se->win[2 * wi] + 1;
                wi++;
            }
            int in = wi < se->n_win && i >= se->win[2 * wi];
            double weight;
            if (in) {
                int l = se->win[2 * wi], r = se->win[2 * wi + 1];
                double width = r - l + 1;
                /* NAB's position: -(r - i + 1) / width, -1 at the first row */
                weight = cct_nab_scaled_sigmoid(-(r - i + 1) / width) * w->tp / max_tp;
            } else if (prev_end < 0) {
                weight = -w->fp; /* before any window: as far as can be */
            } else {
                /* a one-row window would divide by 0: NAB gets inf → -1 (x ≥ 3) */
                double d =
                    prev_width > 1 ? fabs((double)(prev_end - i)) / (prev_width - 1) : INFINITY;
                weight = cct_nab_scaled_sigmoid(d) * w->fp;
            }
            if (i < prob)
                continue;
            int gw = in ? win_base + wi : -1;
            if (in && gw != last_counted) {
                last_counted = gw;
                scored++;
            }
            double sc = isnan(se->score[i]) ? 0.0 : se->score[i];
            p[m] = (Point){sc, weight, gw, (int)m};
            m++;
        }
        win_base += se->n_win;
    }
    qsort(p, (size_t)m, sizeof *p, point_cmp);
    *n_pts = m;
    *n_scored_win = scored;
    return p;
}

static int total_windows(const CctNabSeries *s, int n)
{
    int t = 0;
    for (int k = 0; k < n; k++)
        t += s[k].n_win;
    return t;
}

/* The sweep: thresholds from above, every distinct score. With `at` finite, stops at the
 * first threshold ≤ at instead of keeping the best. */
static int sweep(const CctNabSeries *s, int n, const CctNabCost *w, double at, CctNabResult *out)
{
    long m = 0;
    int scored_win = 0;
    Point *p = sweep_points(s, n, w, &m, &scored_win);
    int nw = total_windows(s, n);
    double *part = malloc((size_t)(nw ? nw : 1) * sizeof *part);
    if (!p || !part) {
        free(p);
        free(part);
        return -ENOMEM;
    }
    for (int i = 0; i < nw; i++)
        part[i] = NAN; /* NaN: not scorable (all in probation) */
    for (long i = 0; i < m; i++)
        if (p[i].win >= 0)
            part[p[i].win] = -w->fn;
    long in_win = 0;
    for (long i = 0; i < m; i++)
        in_win += p[i].win >= 0;
    /* threshold 1.1: nothing detected, every window missed */
    CctNabResult cur = {.threshold = 1.1,
                        .raw = -w->fn * scored_win,
                        .fn = in_win,
                        .tn = m - in_win,
                        .windows = scored_win};
    CctNabResult best = cur;
    uint8_t *hit = calloc((size_t)(nw ? nw : 1), 1);
    if (!hit) {
        free(p);
        free(part);
        return -ENOMEM;
    }
    for (long i = 0; i < m; i++) {
        const Point *q = &p[i];
        if (!isnan(at) && q->score < at)
            break; /* scoring at a threshold: the rows ≥ it are in */
        cur.threshold = q->score;
        if (q->win < 0) {
            cur.raw += q->weight;
            cur.fp++;
            cur.tn--;
        } else {
            /* only the best (earliest) detected row of a window counts */
            if (!hit[q->win]) {
                hit[q->win] = 1;
                cur.detected++;
            }
            if (q->weight > part[q->win]) {
                cur.raw += q->weight - part[q->win];
                part[q->win] = q->weight;
            }
            cur.tp++;
            cur.fn--;
        }
        /* a threshold's score counts every row at that score */
        if (i + 1 < m && p[i + 1].score == q->score)
            continue;
        if (!isnan(at) || cur.raw > best.raw)
            best = cur;
    }
    free(hit);
    if (!isnan(at))
        best.threshold = at;
    best.null_raw = -w->fn * scored_win;
    best.perfect_raw = w->tp * nw;
    double den = best.perfect_raw - best.null_raw;
    best.score = den > 0 ? 100.0 * (best.raw - best.null_raw) / den : NAN;
    *out = best;
    free(p);
    free(part);
    return 0;
}

int cct_nab_optimize(const CctNabSeries *s, int n, const CctNabCost *w, CctNabResult *best)
{
    return sweep(s, n, w, NAN, best);
}

int cct_nab_score_at(const CctNabSeries *s, int n, const CctNabCost *w, double threshold,
                     CctNabResult *out)
{
    return sweep(s, n, w, threshold, out);
}

/* ------------------------------------------------------------------ corpus */

int cct_nab_parse_time(const char *s, int64_t *out)
{
    int y, mo, d, h, mi, sec, n = 0;
    char sep;
    if (sscanf(s, "%4d-%2d-%2d%c%2d:%2d:%2d%n", &y, &mo, &d, &sep, &h, &mi, &sec, &n) != 7 ||
        (sep != ' ' && sep != 'T') || !cc_civil_valid(y, mo, d) || h > 23 || mi > 59 || sec > 60 ||
        h < 0 || mi < 0 || sec < 0)
        return -EINVAL;
    *out = cc_days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + sec;
    return 0;
}

static void file_free(CctNabFile *f)
{
    if (f->text)
        for (int i = 0; i < f->n; i++)
            free(f->text[i]);
    free(f->text);
    free(f->ts);
    free(f->value);
    free(f->label);
    free(f->win);
    memset(f, 0, sizeof *f);
}

void cct_nab_free(CctNabCorpus *c)
{
    for (int i = 0; i < c->n; i++)
        file_free(&c->f[i]);
    free(c->f);
    memset(c, 0, sizeof *c);
}

/* Reads data/<name>: header then `timestamp,value` rows. */
static int read_data(CctNabFile *f, const char *path, char *err, size_t errlen)
{
    FILE *fp = fopen(path, "r");
    if (!fp) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return -errno;
    }
    char line[512];
    int cap = 0, rc = 0, lineno = 1;
    if (!fgets(line, sizeof line, fp)) {
        snprintf(err, errlen, "%s: empty", path);
        rc = -EINVAL;
    }
    while (!rc && fgets(line, sizeof line, fp)) {
        lineno++;
        line[strcspn(line, "\r\n")] = 0;
        if (!*line)
            continue;
        if (f->n == cap) {
            cap = cap ? 2 * cap : 4096;
            int64_t *ts = realloc(f->ts, (size_t)cap * sizeof *ts);
            if (ts)
                f->ts = ts;
            double *v = realloc(f->value, (size_t)cap * sizeof *v);
            if (v)
                f->value = v;
            char **t = realloc(f->text, (size_t)cap * sizeof *t);
            if (t)
                f->text = t;
            if (!ts || !v || !t) {
                rc = -ENOMEM;
                break;
            }
        }
        char *comma = strchr(line, ',');
        char *end = NULL;
        double v = comma ? strtod(comma + 1, &end) : NAN;
        if (!comma || end == comma + 1 || *end || !isfinite(v) ||
            cct_nab_parse_time(line, &f->ts[f->n])) {
            snprintf(err, errlen, "%s:%d: not `timestamp,value`", path, lineno);
            rc = -EINVAL;
            break;
        }
        f->value[f->n] = v;
        if (!(f->text[f->n] = strdup(line))) {
            rc = -ENOMEM;
            break;
        }
        f->n++;
    }
    fclose(fp);
    if (!rc && !f->n) {
        snprintf(err, errlen, "%s: no rows", path);
        rc = -EINVAL;
    }
    if (rc == -ENOMEM)
        snprintf(err, errlen, "%s: out of memory", path);
    return rc;
}

/* The row whose timestamp is t (NAB matches window limits to rows exactly), or -1. */
static int row_of(const CctNabFile *f, int64_t t)
{
    int lo = 0, hi = f->n - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (f->ts[mid] == t)
            return mid;
        if (f->ts[mid] < t)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    for (int i = 0; i < f->n; i++) /* not sorted after all: NAB's list.index */
        if (f->ts[i] == t)
            return i;
    return -1;
}

static int cmp_i64(const void *pa, const void *pb)
{
    int64_t a = *(const int64_t *)pa, b = *(const int64_t *)pb;
    return (a > b) - (a < b);
}

/* The median positive difference of consecutive timestamps (300 without any). */
static int file_step(CctNabFile *f)
{
    int64_t *d = malloc((size_t)(f->n > 1 ? f->n : 1) * sizeof *d);
    if (!d)
        return -ENOMEM;
    int k = 0;
    for (int i = 1; i < f->n; i++)
        if (f->ts[i] > f->ts[i - 1])
            d[k++] = f->ts[i] - f->ts[i - 1];
    qsort(d, (size_t)k, sizeof *d, cmp_i64);
    f->step = k ? d[k / 2] : 300;
    free(d);
    return 0;
}

static int load_windows(CctNabFile *f, json_t *list, char *err, size_t errlen)
{
    size_t nw = json_array_size(list);
    f->win = malloc((nw ? nw : 1) * 2 * sizeof *f->win);
    if (!f->win)
        return -ENOMEM;
    for (size_t k = 0; k < nw; k++) {
        json_t *pair = json_array_get(list, k);
        for (int e = 0; e < 2; e++) {
            const char *s = json_string_value(json_array_get(pair, (size_t)e));
            int64_t t;
            int r = s && !cct_nab_parse_time(s, &t) ? row_of(f, t) : -1;
            if (r < 0) {
                snprintf(err, errlen, "%s: window %zu: %s is not a row of the file", f->name, k,
                         s ? s : "(not a time)");
                return -EINVAL;
            }
            f->win[2 * k + e] = r;
        }
        if (f->win[2 * k + 1] < f->win[2 * k] || (k && f->win[2 * k] <= f->win[2 * k - 1])) {
            snprintf(err, errlen, "%s: window %zu is empty or not after the previous one", f->name,
                     k);
            return -EINVAL;
        }
    }
    f->n_win = (int)nw;
    return 0;
}

static int load_labels(CctNabFile *f, json_t *list, char *err, size_t errlen)
{
    if (!(f->label = calloc((size_t)f->n, 1)))
        return -ENOMEM;
    for (size_t k = 0; k < json_array_size(list); k++) {
        const char *s = json_string_value(json_array_get(list, k));
        int64_t t;
        int r = s && !cct_nab_parse_time(s, &t) ? row_of(f, t) : -1;
        if (r < 0) {
            snprintf(err, errlen, "%s: label %s is not a row of the file", f->name,
                     s ? s : "(not a time)");
            return -EINVAL;
        }
        f->label[r] = 1;
    }
    return 0;
}

static json_t *load_json(const char *dir, const char *rel, char *err, size_t errlen)
{
    char path[4096];
    json_error_t je;
    snprintf(path, sizeof path, "%s/%s", dir, rel);
    json_t *j = json_load_file(path, 0, &je);
    if (!j)
        snprintf(err, errlen, "%s:%d: %s", path, je.line, je.text);
    else if (!json_is_object(j)) {
        snprintf(err, errlen, "%s: not a JSON object", path);
        json_decref(j);
        j = NULL;
    }
    return j;
}

static int load_profiles(CctNabCorpus *c, json_t *prof, char *err, size_t errlen)
{
    for (int p = 0; p < CCT_NAB_PROFILES; p++) {
        json_t *cm = json_object_get(json_object_get(prof, cct_nab_profile_names[p]), "CostMatrix");
        json_t *tp = json_object_get(cm, "tpWeight"), *fp = json_object_get(cm, "fpWeight"),
               *fn = json_object_get(cm, "fnWeight");
        if (!json_is_number(tp) || !json_is_number(fp) || !json_is_number(fn)) {
            snprintf(err, errlen, "config/profiles.json: %s.CostMatrix lacks a weight",
                     cct_nab_profile_names[p]);
            return -EINVAL;
        }
        c->cost[p] =
            (CctNabCost){json_number_value(tp), json_number_value(fp), json_number_value(fn)};
    }
    return 0;
}

int cct_nab_load(CctNabCorpus *c, const char *dir, char *err, size_t errlen)
{
    memset(c, 0, sizeof *c);
    json_t *wins = load_json(dir, "labels/combined_windows.json", err, errlen);
    json_t *labs = wins ? load_json(dir, "labels/combined_labels.json", err, errlen) : NULL;
    json_t *prof = labs ? load_json(dir, "config/profiles.json", err, errlen) : NULL;
    int rc = prof ? load_profiles(c, prof, err, errlen) : -EINVAL;
    if (!rc && !(c->f = calloc(json_object_size(wins) + 1, sizeof *c->f)))
        rc = -ENOMEM;
    const char *key;
    json_t *list;
    json_object_foreach(rc ? NULL : wins, key, list)
    {
        CctNabFile *f = &c->f[c->n++];
        char path[4096];
        snprintf(f->name, sizeof f->name, "%s", key);
        snprintf(path, sizeof path, "%s/data/%s", dir, key);
        if (!json_is_array(list)) {
            snprintf(err, errlen, "combined_windows.json: %s is not a list", key);
            rc = -EINVAL;
        }
        if (rc || (rc = read_data(f, path, err, errlen)) || (rc = file_step(f)) ||
            (rc = load_windows(f, list, err, errlen)) ||
            (rc = load_labels(f, json_object_get(labs, key), err, errlen)))
            break;
        c->windows += f->n_win;
    }
    if (!rc && !c->n) {
        snprintf(err, errlen, "%s/labels/combined_windows.json lists no files", dir);
        rc = -EINVAL;
    }
    if (rc == -ENOMEM)
        snprintf(err, errlen, "out of memory");
    json_decref(wins);
    json_decref(labs);
    json_decref(prof);
    if (rc)
        cct_nab_free(c);
    return rc;
}

/* ------------------------------------------------------------------ detectors */

void cct_nab_windowed_gaussian(const double *x, int n, double *score)
{
    enum { WINDOW = 6400, STEP = 100 };
    /* the window is x[w0, w1); the statistics are recomputed (as NAB does) whenever it
     * changes: while it grows, then every STEP values once it is full */
    int w0 = 0, w1 = 0, buffered = 0;
    double mean = 0, sd = 1;
    for (int i = 0; i < n; i++) {
        if (w1 > w0) {
            double z = fabs(x[i] - mean) / sd;
            score[i] = 1.0 - 0.5 * erfc(z / sqrt(2.0));
        } else {
            score[i] = 0.0;
        }
        int changed = 0;
        if (w1 - w0 < WINDOW) {
            w1++;
            changed = 1;
        } else if (++buffered == STEP) {
            w0 += STEP;
            w1 += STEP;
            buffered = 0;
            changed = 1;
        }
        if (changed) {
            double s1 = 0, s2 = 0;
            for (int k = w0; k < w1; k++)
                s1 += x[k];
            mean = s1 / (w1 - w0);
            for (int k = w0; k < w1; k++)
                s2 += (x[k] - mean) * (x[k] - mean);
            sd = sqrt(s2 / (w1 - w0));
            if (sd == 0.0)
                sd = 0.000001;
        }
    }
}

typedef struct Fired {
    int64_t step;
    char last_id[CC_ALERT_ID_MAX];
    int fired;
} Fired;

/* A new anomaly episode fires at this step (escalations of an episode are not new). */
static void on_alert(void *cookie, const CcAlertEvent *ev)
{
    Fired *f = cookie;
    if (ev->kind != CC_ALERT_ANOMALY || ev->state != CC_ALERT_FIRING || ev->step != f->step ||
        !strcmp(ev->id, f->last_id))
        return;
    snprintf(f->last_id, sizeof f->last_id, "%s", ev->id);
    f->fired = 1;
}

int cct_nab_row_steps(const CctNabFile *f, int64_t S, int64_t *step)
{
    int moved = 0;
    for (int i = 0; i < f->n; i++) {
        /* floor for negative times too */
        step[i] = f->ts[i] >= 0 ? f->ts[i] / S : -((-f->ts[i] + S - 1) / S);
        if (i && step[i] <= step[i - 1]) {
            step[i] = step[i - 1] + 1;
            moved++;
        }
    }
    return moved;
}

/* One engine step of the cell; 0 or the error (reported). */
static int engine_step(CcEngine *e, CcCell *cell, int64_t p, float *x, const CctNabFile *f, int i)
{
    CcStepInput in = {cell, p, x};
    int st = 0, rc = cc_engine_step(e, &in, 1, &st);
    if (rc || (rc = st))
        fprintf(stderr, "cellcast anomaly-eval: %s row %d: engine step failed (%d)\n", f->name, i,
                rc);
    return rc;
}

int cct_nab_cellcast(CcEngine *e, const CcAnomalySettings *s, const CctNabFile *f, int hold_steps,
                     double *score)
{
    CcCell *cell = NULL;
    CcAnomaly *a = NULL;
    CcAnomalyCell *ac = NULL;
    char err[256];
    CcAnomalySettings fs = *s;
    if (f->step > 0) /* a file made by hand may not say */
        fs.step_seconds = f->step;
    const int64_t S = fs.step_seconds > 0 ? fs.step_seconds : 300;
    int64_t *steps = malloc((size_t)f->n * sizeof *steps);
    int rc = steps ? cc_cell_open(&cell, e) : -ENOMEM;
    if (!rc && (rc = cc_anomaly_open(&a, &fs, err, sizeof err)))
        fprintf(stderr, "cellcast anomaly-eval: %s\n", err);
    if (!rc)
        rc = cc_anomaly_cell_open(&ac, a, "nab");
    if (!rc)
        cct_nab_row_steps(f, S, steps);
    Fired fired = {0};
    CcAlertSink sink = {&fired, on_alert};
    CcForecast fc;
    /* last: the last value read (the daemon's gap imputation); fed: what the model got at
     * the previous step (an outage's rows get it again: cc_anomaly_outage_hold) */
    float last = 0, fed = 0;
    const uint8_t imputed = 0;
    int have_fed = 0;
    for (int i = 0; i < f->n && !rc; i++) {
        float x = (float)f->value[i];
        const int64_t p = steps[i], gap = i ? p - steps[i - 1] - 1 : 0;
        if (gap > CCT_NAB_MAX_GAP) {
            cc_cell_reset(cell);
            have_fed = 0;
        } else {
            /* the daemon's imputation: the last value, through the engine, not scored */
            for (int64_t g = p - gap; g < p && !rc; g++) {
                float v = cc_anomaly_outage_hold(a, ac, &last, &imputed, 0) ? fed : last;
                if (!(rc = engine_step(e, cell, g, &v, f, i))) {
                    fed = v;
                    cc_cell_forecast(cell, &fc);
                    cc_anomaly_set_forecast(a, ac, &fc);
                }
            }
        }
        if (!cc_anomaly_outage_hold(a, ac, &x, NULL, have_fed ? hold_steps : 0))
            fed = x;
        if (rc || (rc = engine_step(e, cell, p, &fed, f, i)))
            break;
        have_fed = 1;
        last = x;
        fired.step = p;
        fired.fired = 0;
        cc_anomaly_observe(a, ac, p, &x, NULL, &sink);
        cc_cell_forecast(cell, &fc);
        cc_anomaly_set_forecast(a, ac, &fc);
        double z = NAN;
        int64_t at = cc_anomaly_cell_scores(ac, NULL, &z);
        double az = at == p && isfinite(z) ? fabs(z) : 0.0;
        double b = az / (az + s->warn_z);
        score[i] = fired.fired ? 0.5 + 0.5 * b : 0.5 * b;
    }
    free(steps);
    cc_anomaly_cell_close(&ac);
    cc_anomaly_close(&a);
    cc_cell_close(&cell);
    return rc;
}

int cct_nab_write_probation(const CctNabCorpus *c, int64_t step_seconds, const char *path,
                            int *n_series)
{
    FILE *fp = fopen(path, "w");
    if (!fp) {
        int rc = -errno;
        fprintf(stderr, "cellcast anomaly-eval: %s: %s\n", path, strerror(errno));
        return rc;
    }
    int written = 0;
    fprintf(fp, "ts,cell_id,value\n");
    for (int k = 0; k < c->n; k++) {
        const CctNabFile *f = &c->f[k];
        const int prob = cct_nab_probation(f->n);
        int varies = 0;
        for (int i = 1; i < prob && !varies; i++)
            varies = f->value[i] != f->value[0];
        if (!varies)
            continue;
        const char *base = strrchr(f->name, '/');
        base = base ? base + 1 : f->name;
        int len = (int)strcspn(base, ".");
        const int64_t p0 = f->ts[0] / step_seconds;
        for (int i = 0; i < prob; i++)
            fprintf(fp, "%lld,%.*s,%.17g\n", (long long)((p0 + i) * step_seconds), len, base,
                    f->value[i]);
        written++;
    }
    int rc = 0;
    if (fclose(fp)) {
        rc = -errno;
        fprintf(stderr, "cellcast anomaly-eval: %s: %s\n", path, strerror(errno));
    }
    if (n_series)
        *n_series = written;
    return rc;
}

/* ------------------------------------------------------------------ results */

/* mkdir -p of the directories of path. */
static int make_dirs(char *path)
{
    for (char *p = strchr(path + 1, '/'); p; p = strchr(p + 1, '/')) {
        *p = 0;
        int rc = mkdir(path, 0777);
        int e = errno;
        *p = '/';
        if (rc && e != EEXIST)
            return -e;
    }
    return 0;
}

int cct_nab_write_results(const char *dir, const char *detector, const CctNabFile *f,
                          const double *score)
{
    char path[4096];
    const char *slash = strrchr(f->name, '/');
    int sub = slash ? (int)(slash - f->name) : 0;
    snprintf(path, sizeof path, "%s/%s/%.*s%s%s_%s", dir, detector, sub, f->name, slash ? "/" : "",
             detector, slash ? slash + 1 : f->name);
    int rc = make_dirs(path);
    FILE *fp = rc ? NULL : fopen(path, "w");
    if (!fp) {
        rc = rc ? rc : -errno;
        fprintf(stderr, "cellcast anomaly-eval: %s: %s\n", path, strerror(-rc));
        return rc;
    }
    fprintf(fp, "timestamp,value,anomaly_score,label\n");
    for (int i = 0; i < f->n; i++)
        fprintf(fp, "%s,%.9g,%d\n", f->text[i], isfinite(score[i]) ? score[i] : 0.0,
                f->label ? f->label[i] : 0);
    if (fclose(fp)) {
        rc = -errno;
        fprintf(stderr, "cellcast anomaly-eval: %s: %s\n", path, strerror(errno));
    }
    return rc;
}
