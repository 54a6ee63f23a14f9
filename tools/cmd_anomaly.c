/*
 * cmd_anomaly.c — `cellcast anomaly-eval`: offline evaluation of the alerting of
 * lib/cc_anomaly on held-out data with injected, labelled anomalies (tools/inject.c,
 * tools/anomaly_eval.c), next to a rolling 3-sigma baseline. This file: the options, the
 * detectors evaluated (the settings, each --variant, --budget, --sweep), the table.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "anomaly_eval.h"
#include "cc_time.h"
#include "cli.h"
#include "labels.h"
#include "nab.h"

#define MAX_FILES 32
#define MAX_SWEEP 16

typedef struct AnomalyArgs {
    const char *model;
    CctAeSource src[MAX_FILES];
    int n_data;
    int no_history;
    double test_frac;
    const char *inject_kpis, *alert_kpis;
    int64_t seed;
    int trials, post;
    double baseline_z;
    double sweep[MAX_SWEEP];
    int n_sweep;
    const char *sets[MAX_SWEEP], *variants[MAX_SWEEP];
    int n_sets, n_variants;
    double budget; ///< false alerts per cell-week on the history; < 0 = no calibration
    CctAePrep prep;
    CcAnomalySettings as;
    CcDataSettings csv;    ///< CLI_DATA_OPTS
    const char *nab;       ///< --nab DIR: the NAB corpus instead of --data
    const char *results;   ///< --results DIR: NAB's results files
    const char *model_dir; ///< --model-dir DIR: one model per NAB file
    const char *probation; ///< --probation-csv FILE: NAB's probationary rows for training
    int64_t probation_step;
    int json;
    const char *labels; ///< --labels FILE: the operator's windows instead of injections
    CctLabelSet lset;
} AnomalyArgs;

/* ------------------------------------------------------------------ options */

static int opt_data(const CcOpt *opt, const char *value, char *err, size_t errlen)
{
    AnomalyArgs *a = opt->target;
    if (a->n_data == MAX_FILES) {
        snprintf(err, errlen, "at most %d --data", MAX_FILES);
        return -ENOSPC;
    }
    a->src[a->n_data++].data = value;
    return 0;
}

static int opt_history(const CcOpt *opt, const char *value, char *err, size_t errlen)
{
    AnomalyArgs *a = opt->target;
    if (!a->n_data) {
        snprintf(err, errlen, "--history follows its --data");
        return -EINVAL;
    }
    a->src[a->n_data - 1].history = value;
    return 0;
}

static int opt_sweep(const CcOpt *opt, const char *value, char *err, size_t errlen)
{
    AnomalyArgs *a = opt->target;
    char *dup = strdup(value), *save = NULL;
    int rc = dup ? 0 : -ENOMEM;
    for (char *t = dup ? strtok_r(dup, ",", &save) : NULL; t && a->n_sweep < MAX_SWEEP && !rc;
         t = strtok_r(NULL, ",", &save)) {
        char *e;
        errno = 0;
        double v = strtod(t, &e);
        if (e == t || *e || errno || !(v >= 0.5 && v <= 100)) {
            snprintf(err, errlen, "--sweep: '%s' is not a number in [0.5, 100]", t);
            rc = -EINVAL;
        } else {
            a->sweep[a->n_sweep++] = v;
        }
    }
    free(dup);
    return rc;
}

/* --set and --variant: repeatable "k=v,k=v" (applied once the model is known). */
static int opt_spec(const CcOpt *opt, const char *value, char *err, size_t errlen)
{
    AnomalyArgs *a = opt->target;
    int is_set = !strcmp(opt->name, "set"), *n = is_set ? &a->n_sets : &a->n_variants;
    if (*n == MAX_SWEEP) {
        snprintf(err, errlen, "at most %d --%s", MAX_SWEEP, opt->name);
        return -ENOSPC;
    }
    (is_set ? a->sets : a->variants)[(*n)++] = value;
    return 0;
}

static int opt_protocol(const CcOpt *opt, const char *value, char *err, size_t errlen)
{
    int *p = opt->target;
    if (!strcmp(value, "classic"))
        *p = CCT_INJ_PROTO_CLASSIC;
    else if (!strcmp(value, "noise"))
        *p = CCT_INJ_PROTO_NOISE;
    else {
        snprintf(err, errlen, "--protocol: '%s' is not classic or noise", value);
        return -EINVAL;
    }
    return 0;
}

static const char *about =
    "Injects labelled anomalies (spikes, level shifts, outages, drifts) into held-out data,\n"
    "runs the daemon's scoring and alert lifecycle offline through the engine, and reports\n"
    "precision, recall, F1, detection delay and false alerts per cell-week, next to a\n"
    "rolling 3-sigma baseline. See docs/operations.md (Alerts).\n"
    "With --nab: the Numenta Anomaly Benchmark instead, scored by NAB's rules, next to\n"
    "NAB's windowed Gaussian. See docs/operations.md (NAB).";

/* Parses the command line into *a: CLI_RUN, or the exit code (after --help or an error). */
static int anomaly_opts(AnomalyArgs *a, int argc, char **argv)
{
    memset(a, 0, sizeof *a);
    a->seed = 1;
    a->trials = 1;
    a->prep.inject = (CctInjectSettings){.spacing = 120, .margin = 20, .mag_scale = 1};
    a->post = 10;
    a->baseline_z = 3;
    a->budget = -1;
    a->probation_step = 300;
    a->prep.outage_hold_steps = CC_ANOMALY_OUTAGE_HOLD_STEPS;
    a->prep.max_gap_steps = CC_GAP_IMPUTE_STEPS; /* cellcastd's ingest.max_gap default */
    cc_anomaly_default_settings(&a->as);
    cc_data_default_settings(&a->csv);
    CcAnomalySettings *as = &a->as;
    CctInjectSettings *inj = &a->prep.inject;
    enum { SHOW = CC_OPT_SHOW_DEFAULT };
    const double BIG = 1e9;
    CcOpt opts[] = {
        CC_OPTS_HEADING("Data:"),
        CC_OPTS_STR("model", &a->model, "M.safetensors",
                    "the model (required, except with --nab: without it only\n"
                    "the baseline runs)"),
        CC_OPTS_CALL("data", opt_data, a, "FILE",
                     "held-out CSV of one cell (repeatable); its history (train file)\n"
                     "is found as X_test.csv → X.csv, test_X.csv → train_X.csv\n"
                     "(required, except with --nab)"),
        CC_OPTS_CALL("history", opt_history, a, "FILE",
                     "history of the preceding --data (overrides the guess)"),
        CC_OPTS_FLAG("no-history", &a->no_history, "score from the first row"),
        CC_OPTS_DBL("test-frac", &a->test_frac, 0, BIG, "X",
                    "no history file: the last X of every series is the test part\n"
                    "(long files `ts,cell_id,<kpis>` give one cell per series)"),
        CLI_DATA_OPTS(&a->csv),
        CC_OPTS_STR("labels", &a->labels, "FILE",
                    "labelled windows of real events in the --data files\n"
                    "(JSON {\"cell or file\": [[start, end(, kpi)], ...]} or CSV\n"
                    "start,end[,cell_id][,kpi]; see docs/operations.md): scored\n"
                    "instead of injected anomalies"),
        CC_OPTS_HEADING("Numenta Anomaly Benchmark (instead of --data; no injection):"),
        CC_OPTS_STR("nab", &a->nab, "DIR",
                    "run both detectors online over every file of the NAB corpus\n"
                    "at DIR (data/, labels/, config/) and score them by NAB's\n"
                    "rules: threshold optimised per profile over the corpus,\n"
                    "normalised 0 (never fires) to 100 (perfect); the model must\n"
                    "have one KPI. See docs/operations.md (NAB)"),
        CC_OPTS_STR("model-dir", &a->model_dir, "DIR",
                    "with --nab: also run cellcast with one model per file,\n"
                    "DIR/<file name without extension>.safetensors (a file\n"
                    "without one never fires)"),
        CC_OPTS_STR("results", &a->results, "DIR",
                    "with --nab: write NAB's results files there\n"
                    "(<detector>/<dir>/<detector>_<file>.csv)"),
        CC_OPTS_FLAG("json", &a->json,
                     "the scores as one JSON object on stdout (with --data: each\n"
                     "row of the table with its episode check, the table itself\n"
                     "then on stderr)"),
        CC_OPTS_STR("probation-csv", &a->probation, "FILE",
                    "with --nab: only write the probationary rows of every file\n"
                    "(the first 15 %, at most 750) as a long CSV for `cellcast\n"
                    "train`, rows as consecutive steps of --probation-step"),
        CC_OPTS_INT64("probation-step", &a->probation_step, 1, 86400, "S",
                      "seconds per row of --probation-csv", .flags = SHOW),
        CC_OPTS_HEADING("Injection:"),
        CC_OPTS_INT64("seed", &a->seed, 0, BIG, "N", "", .flags = SHOW),
        CC_OPTS_INT("trials", &a->trials, 0, BIG, "N", "runs with new draws", .flags = SHOW),
        CC_OPTS_CALL("protocol", opt_protocol, &inj->protocol, "classic|noise",
                     "classic (σ = the KPI's history std; spikes, shifts, outages,\n"
                     "drifts) or noise (10-60 min surges, drops, outages, shifts\n"
                     "sized in the data's spread at their time scale, spikes\n"
                     "apart; see docs/operations.md) (default classic)"),
        CC_OPTS_INT("spacing", &inj->spacing, 0, BIG, "N", "test steps per injected anomaly",
                    .flags = SHOW),
        CC_OPTS_INT("margin", &inj->margin, 0, BIG, "N", "clean test steps before the first",
                    .flags = SHOW),
        CC_OPTS_INT("post", &a->post, 0, BIG, "N",
                    "steps after an anomaly whose alerts are attributed to it", .flags = SHOW),
        CC_OPTS_STR("inject-kpis", &a->inject_kpis, "a,b",
                    "KPIs that get spikes/shifts/drifts (default: all)"),
        CC_OPTS_FLAG("no-inject", &a->prep.no_inject,
                     "no injections: false alerts of the clean data only"),
        CC_OPTS_DBL("mag-scale", &inj->mag_scale, 0, BIG, "X",
                    "multiply every injected magnitude by X", .flags = SHOW),
        CC_OPTS_HEADING("Alerting (the daemon's alerts.* settings):"),
        CC_OPTS_DBL("warn-z", &as->warn_z, 0, BIG, "X", "", .flags = SHOW),
        CC_OPTS_DBL("crit-z", &as->crit_z, 0, BIG, "X", "", .flags = SHOW),
        CC_OPTS_INT("min-kpis", &as->min_kpis, 0, BIG, "N", "", .flags = SHOW),
        CC_OPTS_INT("window-n", &as->window_n, 0, BIG, "N", "", .flags = SHOW),
        CC_OPTS_INT("warn-k", &as->warn_k, 0, BIG, "N", "", .flags = SHOW),
        CC_OPTS_INT("crit-k", &as->crit_k, 0, BIG, "N", "", .flags = SHOW),
        CC_OPTS_INT("resolve-m", &as->resolve_m, 0, BIG, "N", "", .flags = SHOW),
        CC_OPTS_INT("cooldown", &as->cooldown_steps, 0, BIG, "N", "", .flags = SHOW),
        CC_OPTS_DBL("sd-floor-rel", &as->sd_floor_rel, 0, BIG, "X", "", .flags = SHOW),
        CC_OPTS_DBL("sd-floor-scale", &as->sd_floor_scale, 0, BIG, "X", "", .flags = SHOW),
        CC_OPTS_STR("alert-kpis", &a->alert_kpis, "a,b",
                    "KPIs scored for anomalies (alerts.kpis.<name>.enabled;\n"
                    "default: all)"),
        CC_OPTS_INT("lag", &as->lag_steps, -1, BIG, "L",
                    "also score against the forecast made L steps earlier\n"
                    "(L ≤ the model's horizon; -1 = the horizon; 0 = off)",
                    .flags = SHOW),
        CC_OPTS_INT("outage-hold", &a->prep.outage_hold_steps, 0, 1000000, "N",
                    "feed the model the last values for at most N steps of an\n"
                    "outage (all_zero's judgement) instead of its zeros\n"
                    "(cellcastd's ingest.outage_hold_steps; 0 = off)",
                    .flags = SHOW),
        CC_OPTS_INT("max-gap", &a->prep.max_gap_steps, -1, 1000000, "N",
                    "a run of more than N rows without an observed KPI is a\n"
                    "gap the model is not stepped through: the sequence restarts\n"
                    "after it (cellcastd's ingest.max_gap; -1 = every gap\n"
                    "imputed; not with --nab, which imputes up to 1000)",
                    .flags = SHOW),
        CC_OPTS_CALL("set", opt_spec, a, "k=v,k=v",
                     "any alerts.* settings (repeatable), e.g. --set window_n=5"),
        CC_OPTS_CALL("variant", opt_spec, a, "k=v,k=v",
                     "evaluate one more detector: the settings above with these\n"
                     "changed (repeatable; the engine runs once for all)"),
        CC_OPTS_CALL("sweep", opt_sweep, a, "z1,z2,...",
                     "evaluate several --warn-z (crit-z = max(crit-z, 1.5·warn-z))"),
        CC_OPTS_DBL("budget", &a->budget, 0, BIG, "B",
                    "also evaluate thresholds calibrated on the history: warn-z,\n"
                    "crit-z, cusum_k and profile_k scaled by the lowest factor whose\n"
                    "false alerts per cell-week on the history rows are ≤ B\n"
                    "(needs history)"),
        CC_OPTS_FLAG("verbose", &a->prep.verbose,
                     "labels, misses and false alerts on stderr\n"
                     "(--nab: every file's raw score and counts)"),
        CC_OPTS_HEADING("Baseline:"),
        CC_OPTS_INT("baseline-window", &a->prep.baseline_window, 0, BIG, "N",
                    "rolling window in steps (default: one day)"),
        CC_OPTS_DBL("baseline-z", &a->baseline_z, 0, BIG, "X", "its warn threshold", .flags = SHOW),
    };
    const CcOptsSpec spec = {
        .prog = "cellcast anomaly-eval",
        .usage = "cellcast anomaly-eval --model M.safetensors --data TEST.csv [--data ...] "
                 "[options]\n"
                 "       cellcast anomaly-eval --nab DIR [--model M.safetensors] [--json] "
                 "[--results DIR2] [options]",
        .about = about,
        CC_OPTS_TABLE(opts),
    };
    int rc = cc_opts_parse(&spec, argc, argv, NULL);
    if (rc)
        return CLI_OPTS_EXIT(rc);
    if (!a->nab && (!a->model || !a->n_data)) {
        fprintf(stderr,
                "cellcast anomaly-eval: --%s is required (see cellcast anomaly-eval --help)\n",
                a->model ? "data" : "model");
        return 2;
    }
    if (a->nab && a->n_data) {
        fprintf(stderr, "cellcast anomaly-eval: give --nab or --data, not both\n");
        return 2;
    }
    if ((a->results || a->probation || a->model_dir) && !a->nab) {
        fprintf(stderr, "cellcast anomaly-eval: --results, --model-dir and "
                        "--probation-csv go with --nab\n");
        return 2;
    }
    for (int i = 0; i < a->n_data; i++)
        a->src[i].csv = &a->csv;
    if (a->labels && a->nab) {
        fprintf(stderr, "cellcast anomaly-eval: --labels goes with --data (--nab has its own)\n");
        return 2;
    }
    if (a->labels) {
        char err[512];
        if (cct_labels_load(&a->lset, a->labels, a->csv.time_format, err, sizeof err)) {
            fprintf(stderr, "cellcast anomaly-eval: --labels %s\n", err);
            return 1;
        }
        a->prep.no_inject = 1;
        a->trials = 1;
    }
    if (a->test_frac >= 1) {
        fprintf(stderr, "cellcast anomaly-eval: --test-frac must be < 1\n");
        return 2;
    }
    if (inj->spacing < 8 || a->trials < 1) {
        fprintf(stderr, "cellcast anomaly-eval: need --spacing ≥ 8 and --trials ≥ 1\n");
        return 2;
    }
    for (int i = 0; i < a->n_data; i++) {
        a->src[i].no_history = a->no_history;
        a->src[i].test_frac = a->test_frac;
    }
    return CLI_RUN;
}

/* ------------------------------------------------------------------ settings */

/* "k=v,k=v": alerts.* settings by name (cc_anomaly_settings_set_list). 0 or -1 (reported). */
static int apply_sets(CcAnomalySettings *s, const CcHparams *hp, const char *spec)
{
    char err[256];
    if (cc_anomaly_settings_set_list(s, hp, spec, err, sizeof err) == 0)
        return 0;
    fprintf(stderr, "cellcast anomaly-eval: %s\n", err);
    return -1;
}

/* The model KPIs of a comma-separated list, each passed to fn; -1 (reported) on a name
 * that is not one. */
static int each_kpi(const CcHparams *hp, const char *list, const char *opt, void (*fn)(void *, int),
                    void *cookie)
{
    char *dup = strdup(list), *save = NULL;
    int rc = dup ? 0 : -1;
    for (char *t = dup ? strtok_r(dup, ",", &save) : NULL; t && !rc;
         t = strtok_r(NULL, ",", &save)) {
        int f = cc_hparams_feature_index(hp, t);
        if (f < 0) {
            fprintf(stderr, "cellcast anomaly-eval: --%s: '%s' is not a model KPI\n", opt, t);
            rc = -1;
        } else {
            fn(cookie, f);
        }
    }
    free(dup);
    return rc;
}

static void add_inject_kpi(void *cookie, int f)
{
    CctInjectSettings *s = cookie;
    ((int *)s->kpis)[s->n_kpis++] = f;
}

static void enable_alert_kpi(void *cookie, int f)
{
    ((CcAnomalySettings *)cookie)->kpi[f].enabled = 1;
}

/* The lag the model's horizon allows for -1. */
static int horizon_lag(const CcHparams *hp)
{
    return hp->horizon < CC_ANOMALY_MAX_LAG ? hp->horizon : CC_ANOMALY_MAX_LAG;
}

/* Completes the alert settings and the KPI lists with the model's: 0 or -1 (reported). */
static int model_settings(AnomalyArgs *a, const CcHparams *hp, int *kpis)
{
    const int F = hp->n_features;
    char err[512];
    for (int i = 0; i < a->n_sets; i++)
        if (apply_sets(&a->as, hp, a->sets[i]))
            return -1;
    a->as.n_features = F;
    a->as.step_seconds = hp->step_seconds;
    if (a->as.min_kpis > F)
        a->as.min_kpis = F;
    if (a->as.lag_steps < 0) /* -1: the model's horizon, as cc_anomaly_set_forecast does */
        a->as.lag_steps = horizon_lag(hp);
    if (a->as.lag_steps > hp->horizon) {
        fprintf(stderr, "cellcast anomaly-eval: --lag %d exceeds the model's horizon %d\n",
                a->as.lag_steps, hp->horizon);
        return -1;
    }
    if (cc_anomaly_validate(&a->as, err, sizeof err)) {
        fprintf(stderr, "cellcast anomaly-eval: %s\n", err);
        return -1;
    }
    CctInjectSettings *inj = &a->prep.inject;
    inj->step_seconds = hp->step_seconds;
    inj->kpis = kpis;
    inj->n_kpis = 0;
    if (a->inject_kpis) {
        if (each_kpi(hp, a->inject_kpis, "inject-kpis", add_inject_kpi, inj))
            return -1;
    } else {
        for (int f = 0; f < F; f++)
            kpis[inj->n_kpis++] = f;
    }
    if (a->alert_kpis) {
        for (int f = 0; f < F; f++)
            a->as.kpi[f].enabled = 0;
        if (each_kpi(hp, a->alert_kpis, "alert-kpis", enable_alert_kpi, &a->as))
            return -1;
    }
    a->prep.warmup_steps = a->as.warmup_steps;
    a->prep.alerts = &a->as;
    int W = a->prep.baseline_window ? a->prep.baseline_window : (int)(86400 / hp->step_seconds);
    a->prep.baseline_window = W < 20 ? 20 : W;
    return 0;
}

/* --labels: the windows of the new cells [first, cells->n) of --data file i. 0 or -1. */
static int apply_labels(AnomalyArgs *a, const CcModel *m, CctAeCells *cells, int first, int i)
{
    char err[512];
    for (int ci = first; ci < cells->n; ci++) {
        CctAeCell *c = &cells->c[ci];
        int n = 0;
        if (cct_labels_apply(&a->lset, a->src[i].data, c->id, c->p0, m->hp.step_seconds, &m->hp,
                             &c->ser, &n, err, sizeof err)) {
            fprintf(stderr, "cellcast anomaly-eval: --labels: %s\n", err);
            return -1;
        }
        char t0[CC_RFC3339_LEN], t1[CC_RFC3339_LEN];
        cc_time_format_rfc3339((c->p0 + c->ser.test0) * m->hp.step_seconds, t0, sizeof t0);
        cc_time_format_rfc3339((c->p0 + c->ser.T - 1) * m->hp.step_seconds, t1, sizeof t1);
        fprintf(stderr, "  %s: %d labelled window(s) in its test rows (%s to %s)\n", c->id, n, t0,
                t1);
    }
    return 0;
}

/* Every --data file, every trial: loaded, injected (or labelled), through the engine. */
static int load_cells(AnomalyArgs *a, const CcModel *m, CcEngine *e, CctAeCells *cells)
{
    uint64_t rng = (uint64_t)a->seed;
    for (int tr = 0; tr < a->trials; tr++) {
        int trial_base = cells->n; /* injection types rotate by slot, cell and trial */
        for (int i = 0; i < a->n_data; i++) {
            int first_new = cells->n;
            if (cct_ae_load(cells, &a->src[i], m) ||
                (a->labels && apply_labels(a, m, cells, first_new, i)))
                return -1;
            for (int ci = first_new; ci < cells->n; ci++)
                if (cct_ae_prepare(&cells->c[ci], &a->prep, m, e, &rng, ci - trial_base + tr))
                    return -1;
        }
    }
    return 0;
}

/* The detectors: the settings, each --variant on top of them, and with --budget the
 * settings calibrated on the history (*budget_det its index, else -1). Returns how many, or
 * -1 (reported). */
static int detectors(const AnomalyArgs *a, const CcHparams *hp, CctAeCells *cells,
                     CcAnomalySettings *det, int *budget_det)
{
    char err[512];
    int n_det = 0;
    det[n_det++] = a->as;
    for (int i = 0; i < a->n_variants; i++) {
        det[n_det] = a->as;
        if (apply_sets(&det[n_det], hp, a->variants[i]))
            return -1;
        if (det[n_det].lag_steps < 0)
            det[n_det].lag_steps = horizon_lag(hp);
        if (det[n_det].lag_steps > hp->horizon ||
            cc_anomaly_validate(&det[n_det], err, sizeof err)) {
            fprintf(stderr, "cellcast anomaly-eval: --variant %s: %s\n", a->variants[i],
                    det[n_det].lag_steps > hp->horizon ? "lag exceeds the horizon" : err);
            return -1;
        }
        n_det++;
    }
    *budget_det = -1;
    if (a->budget < 0)
        return n_det;
    if (n_det > MAX_SWEEP) {
        fprintf(stderr, "cellcast anomaly-eval: too many detectors for --budget\n");
        return -1;
    }
    CcAnomalySettings t = a->as;
    double rate = NAN, weeks = 0;
    /* the history is the same in every trial: calibrate on the first trial's cells */
    int rc = cct_ae_calibrate(&t, cells, cells->n / a->trials, a->budget, &rate, &weeks);
    if (rc < 0) {
        fprintf(stderr, "cellcast anomaly-eval: --budget needs history rows with forecasts "
                        "(a history file or --test-frac)\n");
        return -1;
    }
    if (rc > 0) {
        fprintf(stderr,
                "cellcast anomaly-eval: --budget %g: the history has %.2f false "
                "alerts per cell-week even at warn_z 1000\n",
                a->budget, rate);
        return -1;
    }
    fprintf(a->json ? stderr : stdout,
            "budget %g false alerts per cell-week on %.1f cell-weeks of history: warn_z %.3g, "
            "crit_z %.3g, cusum_k %.3g, profile_k %.3g, novelty_tol %.3g (history rate %.2f)\n",
            a->budget, weeks, t.warn_z, t.crit_z, t.cusum_k, t.profile_k, t.novelty_tol, rate);
    *budget_det = n_det;
    det[n_det++] = t;
    return n_det;
}

/* ------------------------------------------------------------------ table */

/* The settings of detector det at sweep point z (a sweep leaves the budget's alone). */
static CcAnomalySettings sweep_point(const AnomalyArgs *a, const CcAnomalySettings *det,
                                     int is_budget, double z)
{
    CcAnomalySettings s = *det;
    if (a->n_sweep && !is_budget) {
        s.warn_z = z;
        s.crit_z = fmax(det->crit_z, 1.5 * z);
    }
    if (s.crit_z < s.warn_z)
        s.crit_z = s.warn_z;
    return s;
}

/* The rolling baseline's settings: a plain 3-sigma rule with
 * a lifecycle of its own, fixed whatever the model's detector is set to, so that it stays the
 * same reference across settings and revisions: 2 of 3 steps at |z| ≥ baseline_z, or one at
 * 2.25 × baseline_z (6.75 at 3), resolved after 3 clear steps, then 6 quiet ones (the cells'
 * lifecycle until 2026-11-25, when its crit_z was the model's 6.75). */
static CcAnomalySettings baseline_settings(const AnomalyArgs *a)
{
    CcAnomalySettings b = a->as;
    b.warn_z = a->baseline_z;
    b.crit_z = 2.25 * a->baseline_z;
    b.window_n = 3;
    b.warn_k = 2;
    b.crit_k = 1;
    b.resolve_m = 3;
    b.cooldown_steps = 6;
    b.cooldown_crit = 0; /* its cooldown holds back every episode, as it did */
    b.sd_floor_scale = 0;
    b.lag_steps = 0;
    b.cusum_h = 0;
    b.profile_h = 0;
    b.novelty_tol = 0; /* on by default for the model's detector, not part of the baseline */
    b.shape_w = 0;     /* an option of the model's detector (--set), likewise */
    for (int f = 0; f < CC_MAX_FEATURES; f++)
        b.kpi[f].novelty_tol = 0;
    return b;
}

/* A row of --json: which detector, its thresholds and its scores (NULL on -ENOMEM). */
static json_t *row_json(const char *detector, const char *variant, const CcAnomalySettings *s,
                        const CctAeScore *sc, const CcHparams *hp)
{
    return json_pack("{s:s, s:s?, s:f, s:f, s:i, s:o*}", "detector", detector, "variant", variant,
                     "warn_z", s->warn_z, "crit_z", s->crit_z, "resolve_m", s->resolve_m, "scores",
                     cct_ae_score_json(sc, hp));
}

/* One detector at one sweep point (the first detector with the baseline next to it); with
 * --json its rows also go to rows. */
static int print_detector(const AnomalyArgs *a, const CcModel *m, CctAeCells *cells,
                          const CcAnomalySettings *det, int di, int budget_det, int zi, double z,
                          int nz, json_t *rows)
{
    FILE *out = a->json ? stderr : stdout;
    CcAnomalySettings s = sweep_point(a, &det[di], di == budget_det, z);
    CcAnomalySettings sbs = baseline_settings(a);
    CctAeScore sm = {0}, sb = {0};
    for (int c = 0; c < cells->n; c++)
        if (cct_ae_score(&s, &cells->c[c], 0, a->post, &sm, a->prep.verbose ? &m->hp : NULL) ||
            (di == 0 && cct_ae_score(&sbs, &cells->c[c], 1, a->post, &sb, NULL)))
            return -1;
    char name[64];
    const char *variant = di == budget_det ? "budget" : di ? a->variants[di - 1] : NULL;
    if (di == budget_det)
        fprintf(out, "budget %g:\n", a->budget);
    else if (di)
        fprintf(out, "variant %s:\n", a->variants[di - 1]);
    snprintf(name, sizeof name, "model z>=%g/%g", s.warn_z, s.crit_z);
    cct_ae_print_score(name, &sm, nz == 1, &m->hp, out);
    if (rows)
        json_array_append_new(rows, row_json("model", variant, &s, &sm, &m->hp));
    if (di == 0 && (zi == 0 || a->n_sweep == 0)) {
        snprintf(name, sizeof name, "3sigma-roll z>=%g/%g", sbs.warn_z, sbs.crit_z);
        cct_ae_print_score(name, &sb, nz == 1, &m->hp, out);
        if (rows)
            json_array_append_new(rows, row_json("3sigma-roll", NULL, &sbs, &sb, &m->hp));
    }
    return 0;
}

static int print_results(const AnomalyArgs *a, const CcModel *m, CctAeCells *cells,
                         const CcAnomalySettings *det, int n_det, int budget_det)
{
    const CcAnomalySettings *as = &a->as;
    FILE *out = a->json ? stderr : stdout;
    double zs[MAX_SWEEP + 1];
    int nz = a->n_sweep;
    if (nz)
        memcpy(zs, a->sweep, (size_t)nz * sizeof *zs);
    else
        zs[nz++] = as->warn_z;
    fprintf(out,
            "anomaly-eval: %d cell-runs, %d trial(s), seed %llu, spacing %d, window k-of-n %d/%d "
            "(crit %d/%d), resolve %d, cooldown %d, min_kpis %d, baseline window %d steps\n",
            cells->n, a->trials, (unsigned long long)a->seed, a->prep.inject.spacing, as->warn_k,
            as->window_n, as->crit_k, as->window_n, as->resolve_m, as->cooldown_steps, as->min_kpis,
            a->prep.baseline_window);
    fprintf(out, "%-22s %6s %6s %6s %7s %8s %11s %6s %5s %10s\n", "detector", "prec", "recall",
            "F1", "delay", "FA/cw", "detected", "alerts", "false", "dq/outside");
    json_t *rows = a->json ? json_array() : NULL;
    int rc = a->json && !rows ? -1 : 0;
    for (int di = 0; di < n_det && !rc; di++)
        for (int zi = 0; zi < nz && !rc; zi++)
            rc = print_detector(a, m, cells, det, di, budget_det, zi, zs[zi], nz, rows);
    fprintf(out, "(prec = true alerts / anomaly alerts; FA/cw = false anomaly alerts per cell-week "
                 "of clean test time; delay in steps; dq = data-quality alerts, outside labels)\n");
    if (rows && !rc) {
        json_t *o =
            json_pack("{s:i, s:i, s:I, s:i, s:O}", "cell_runs", cells->n, "trials", a->trials,
                      "seed", (json_int_t)a->seed, "resolve_m", as->resolve_m, "rows", rows);
        char *txt = o ? json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;
        json_decref(o);
        rc = txt ? 0 : -1;
        if (txt)
            puts(txt);
        free(txt);
    }
    json_decref(rows);
    return rc;
}

/* ------------------------------------------------------------------ NAB */

/* The detectors of --nab: NAB's windowed Gaussian, cellcast with one model for every file
 * (--model) and cellcast with one model per file (--model-dir). */
enum { NAB_GAUSS = 0, NAB_GENERIC = 1, NAB_PERFILE = 2, NAB_DETS = 3 };
static const char *const nab_det_names[NAB_DETS] = {"windowedGaussian", "cellcast",
                                                    "cellcastPerFile"};

/* A row of the table: a detector at its optimised threshold, or (at = 0.5) a cellcast
 * detector at exactly its alerts (see nab.h). */
typedef struct NabRow {
    char name[40];
    int det;
    double at; ///< NaN: optimised
    CctNabResult res[CCT_NAB_PROFILES];
} NabRow;

/* A number, or null when not finite (a corpus without windows has no normalised score). */
static json_t *nab_num(double v) { return isfinite(v) ? json_real(v) : json_null(); }

static json_t *nab_result_json(const CctNabResult *r)
{
    return json_pack("{s:o, s:o, s:o, s:o, s:o, s:I, s:I, s:I, s:I, s:i, s:i}", "score",
                     nab_num(r->score), "threshold", nab_num(r->threshold), "raw", nab_num(r->raw),
                     "null_raw", nab_num(r->null_raw), "perfect_raw", nab_num(r->perfect_raw), "tp",
                     (json_int_t)r->tp, "fp", (json_int_t)r->fp, "fn", (json_int_t)r->fn, "tn",
                     (json_int_t)r->tn, "windows", r->windows, "detected", r->detected);
}

static int nab_print(const AnomalyArgs *a, const CctNabCorpus *c, const NabRow *rows, int n_rows)
{
    if (a->json) {
        json_t *o = json_pack("{s:s, s:s?, s:s?, s:i, s:i}", "corpus", a->nab, "model", a->model,
                              "model_dir", a->model_dir, "files", c->n, "windows", c->windows);
        for (int p = 0; o && p < CCT_NAB_PROFILES; p++) {
            json_t *po = json_object();
            for (int r = 0; po && r < n_rows; r++)
                json_object_set_new(po, rows[r].name, nab_result_json(&rows[r].res[p]));
            json_object_set_new(o, cct_nab_profile_names[p], po);
        }
        char *txt = o ? json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;
        json_decref(o);
        if (!txt)
            return -ENOMEM;
        printf("%s\n", txt);
        free(txt);
        return 0;
    }
    printf("NAB: %d files, %d windows (%s)%s%s%s%s\n", c->n, c->windows, a->nab,
           a->model ? ", model " : "", a->model ? a->model : "",
           a->model_dir ? ", per-file models in " : "", a->model_dir ? a->model_dir : "");
    printf("%-22s %-20s %7s %9s %9s %9s %7s %7s %7s\n", "detector", "profile", "score", "threshold",
           "raw", "windows", "TP", "FP", "FN");
    for (int d = 0; d < n_rows; d++)
        for (int p = 0; p < CCT_NAB_PROFILES; p++) {
            const CctNabResult *r = &rows[d].res[p];
            char win[32];
            snprintf(win, sizeof win, "%d/%d", r->detected, r->windows);
            printf("%-22s %-20s %7.2f %9.6g %9.2f %9s %7ld %7ld %7ld\n", rows[d].name,
                   cct_nab_profile_names[p], r->score, r->threshold, r->raw, win, r->tp, r->fp,
                   r->fn);
        }
    printf("(score: 100·(raw − null)/(perfect − null); threshold optimised per profile over "
           "the corpus, *_alerts: at 0.5 = the alerts; windows: detected/scored; TP, FP, FN: "
           "NAB's row counts)\n");
    return 0;
}

/* (Re)opens *e on m at a step of `step` seconds: the model's weights with the time
 * features of the file's own step (see cct_nab_cellcast). 0 or -1 (reported). */
static int nab_engine_at(CcModel *m, CcEngine **e, int64_t step)
{
    char err[512];
    if (*e && m->hp.step_seconds == step)
        return 0;
    cc_engine_close(e);
    m->hp.step_seconds = step;
    CcEngineSettings es;
    cc_engine_default_settings(&es);
    es.n_threads = 1;
    if (cc_engine_open(e, m, &es, err, sizeof err)) {
        fprintf(stderr, "cellcast anomaly-eval: cannot open the engine: %s\n", err);
        return -1;
    }
    return 0;
}

/* Opens a model of one KPI and the alert settings for it: *s = base completed with the
 * model's (model_settings). The engine is opened per file (nab_engine_at). 0 or -1
 * (reported). */
static int nab_open_model(AnomalyArgs *a, const CcAnomalySettings *base, const char *path,
                          int *kpis, CcModel **m, CcAnomalySettings *s)
{
    char err[512];
    if (cc_model_open_file(m, path, err, sizeof err)) {
        fprintf(stderr, "cellcast anomaly-eval: %s\n", err);
        return -1;
    }
    if ((*m)->hp.n_features != 1) {
        fprintf(stderr, "cellcast anomaly-eval: --nab needs models of one KPI (%s has %d)\n", path,
                (*m)->hp.n_features);
        return -1;
    }
    a->as = *base;
    if (model_settings(a, &(*m)->hp, kpis))
        return -1;
    *s = a->as;
    return 0;
}

/* cellcast with the file's own model, <model-dir>/<file name without directory and
 * extension>.safetensors (the cell id of --probation-csv); a file without one never fires
 * (scores 0; *missing counts them). 0 or -1 (reported). */
static int nab_per_file(AnomalyArgs *a, const CcAnomalySettings *base, int *kpis,
                        const CctNabFile *f, double *sc, int *missing)
{
    const char *stem = strrchr(f->name, '/');
    stem = stem ? stem + 1 : f->name;
    char path[4096];
    snprintf(path, sizeof path, "%s/%.*s.safetensors", a->model_dir, (int)strcspn(stem, "."), stem);
    FILE *probe = fopen(path, "rb");
    if (!probe) {
        fprintf(stderr, "anomaly-eval: %s: no model %s: never fires\n", f->name, path);
        for (int i = 0; i < f->n; i++)
            sc[i] = 0;
        ++*missing;
        return 0;
    }
    fclose(probe);
    CcModel *m = NULL;
    CcEngine *e = NULL;
    CcAnomalySettings s;
    int rc = nab_open_model(a, base, path, kpis, &m, &s);
    if (!rc && (nab_engine_at(m, &e, f->step) ||
                cct_nab_cellcast(e, &s, f, a->prep.outage_hold_steps, sc)))
        rc = -1;
    cc_engine_close(&e);
    cc_model_close(&m);
    return rc;
}

static int run_nab(AnomalyArgs *a)
{
    int ret = 1, kpis[CC_MAX_FEATURES], missing = 0;
    CcModel *m = NULL;
    CcEngine *e = NULL;
    CctNabCorpus c;
    char err[512];
    double *score[NAB_DETS] = {NULL};
    CctNabSeries *ser[NAB_DETS] = {NULL};
    NabRow rows[2 * NAB_DETS];
    const CcAnomalySettings base = a->as;
    CcAnomalySettings generic = base;
    if (cct_nab_load(&c, a->nab, err, sizeof err)) {
        fprintf(stderr, "cellcast anomaly-eval: --nab: %s\n", err);
        return 1;
    }
    if (a->probation) {
        int n = 0;
        if (!cct_nab_write_probation(&c, a->probation_step, a->probation, &n)) {
            fprintf(stderr, "anomaly-eval: %s: the probationary rows of %d of %d files\n",
                    a->probation, n, c.n);
            ret = 0;
        }
        goto done;
    }
    if (a->model && nab_open_model(a, &base, a->model, kpis, &m, &generic))
        goto done;
    const int on[NAB_DETS] = {1, a->model != NULL, a->model_dir != NULL};
    long n_all = 0;
    for (int k = 0; k < c.n; k++)
        n_all += c.f[k].n;
    for (int d = 0; d < NAB_DETS; d++) {
        if (!on[d])
            continue;
        score[d] = malloc((size_t)n_all * sizeof *score[d]);
        ser[d] = calloc((size_t)c.n, sizeof *ser[d]);
        if (!score[d] || !ser[d]) {
            fprintf(stderr, "cellcast anomaly-eval: out of memory\n");
            goto done;
        }
    }
    int64_t t0 = cc_now_ns();
    long off = 0;
    for (int k = 0; k < c.n; k++) {
        const CctNabFile *f = &c.f[k];
        for (int d = 0; d < NAB_DETS; d++) {
            if (!on[d])
                continue;
            double *sc = score[d] + off;
            if (d == NAB_GAUSS)
                cct_nab_windowed_gaussian(f->value, f->n, sc);
            else if (d == NAB_GENERIC
                         ? nab_engine_at(m, &e, f->step) ||
                               cct_nab_cellcast(e, &generic, f, a->prep.outage_hold_steps, sc)
                         : nab_per_file(a, &base, kpis, f, sc, &missing))
                goto done;
            ser[d][k] = (CctNabSeries){f->n, f->n_win, f->win, sc};
            if (a->results && cct_nab_write_results(a->results, nab_det_names[d], f, sc))
                goto done;
        }
        off += f->n;
    }
    fprintf(stderr, "anomaly-eval: NAB, %d files, %ld rows, detectors %.1f s\n", c.n, n_all,
            (double)(cc_now_ns() - t0) * 1e-9);
    if (missing)
        fprintf(stderr, "anomaly-eval: %d file(s) without a model in %s (never fire)\n", missing,
                a->model_dir);
    int n_rows = 0;
    for (int d = 0; d < NAB_DETS; d++)
        for (int alerts = 0; on[d] && alerts < (d == NAB_GAUSS ? 1 : 2); alerts++) {
            NabRow *r = &rows[n_rows++];
            snprintf(r->name, sizeof r->name, "%s%s", nab_det_names[d], alerts ? "_alerts" : "");
            r->det = d;
            r->at = alerts ? 0.5 : NAN;
        }
    for (int r = 0; r < n_rows; r++)
        for (int p = 0; p < CCT_NAB_PROFILES; p++) {
            /* the scorer's perfect count is the windows it is given: all of the corpus */
            int rc = isnan(rows[r].at)
                         ? cct_nab_optimize(ser[rows[r].det], c.n, &c.cost[p], &rows[r].res[p])
                         : cct_nab_score_at(ser[rows[r].det], c.n, &c.cost[p], rows[r].at,
                                            &rows[r].res[p]);
            if (rc) {
                fprintf(stderr, "cellcast anomaly-eval: out of memory\n");
                goto done;
            }
        }
    /* --verbose: every file's raw score and row counts at the corpus threshold (the
     * layout of NAB's <detector>_<profile>_scores.csv, to compare file by file) */
    for (int r = 0; a->prep.verbose && r < n_rows; r++)
        for (int p = 0; p < CCT_NAB_PROFILES; p++)
            for (int k = 0; k < c.n; k++) {
                CctNabResult fr;
                if (cct_nab_score_at(&ser[rows[r].det][k], 1, &c.cost[p], rows[r].res[p].threshold,
                                     &fr))
                    goto done;
                fprintf(stderr, "%s,%s,%s,%.9g,%.9g,%ld,%ld,%ld,%ld,%d\n", rows[r].name,
                        cct_nab_profile_names[p], c.f[k].name, rows[r].res[p].threshold, fr.raw,
                        fr.tp, fr.tn, fr.fp, fr.fn, c.f[k].n);
            }
    if (nab_print(a, &c, rows, n_rows))
        goto done;
    ret = 0;
done:
    for (int d = 0; d < NAB_DETS; d++) {
        free(score[d]);
        free(ser[d]);
    }
    cct_nab_free(&c);
    cc_engine_close(&e);
    cc_model_close(&m);
    return ret;
}

/* ------------------------------------------------------------------ command */

int cmd_anomaly(int argc, char **argv)
{
    AnomalyArgs a;
    int rc = anomaly_opts(&a, argc, argv);
    if (rc != CLI_RUN)
        return rc;
    if (a.nab)
        return run_nab(&a);
    int ret = 1, kpis[CC_MAX_FEATURES], budget_det, n_det;
    CcModel *m = NULL;
    CcEngine *e = NULL;
    CctAeCells cells = {0};
    CcAnomalySettings det[MAX_SWEEP + 1];
    char err[512];
    if (cc_model_open_file(&m, a.model, err, sizeof err)) {
        fprintf(stderr, "cellcast anomaly-eval: %s\n", err);
        goto done;
    }
    if (model_settings(&a, &m->hp, kpis))
        goto done;
    if (a.labels && cct_labels_check(&a.lset, &m->hp, err, sizeof err)) {
        fprintf(stderr, "cellcast anomaly-eval: --labels %s: %s\n", a.labels, err);
        goto done;
    }
    CcEngineSettings es;
    cc_engine_default_settings(&es);
    if (cc_engine_open(&e, m, &es, err, sizeof err)) {
        fprintf(stderr, "cellcast anomaly-eval: cannot open the engine: %s\n", err);
        goto done;
    }
    fprintf(stderr, "anomaly-eval: model %s (F=%d, S=%llds, P=%d, N=%d, M=%d)\n", a.model,
            m->hp.n_features, (long long)m->hp.step_seconds, m->hp.patch_len, m->hp.n_patches,
            m->hp.norm_window);
    int64_t t0 = cc_now_ns();
    if (load_cells(&a, m, e, &cells))
        goto done;
    if (a.labels && !cct_labels_report(&a.lset, stderr)) {
        fprintf(stderr, "cellcast anomaly-eval: --labels: no window lands on a test row of "
                        "--data: nothing to score\n");
        goto done;
    }
    fprintf(stderr, "anomaly-eval: engine pass %.1f s\n", (double)(cc_now_ns() - t0) * 1e-9);
    if ((n_det = detectors(&a, &m->hp, &cells, det, &budget_det)) < 0 ||
        print_results(&a, m, &cells, det, n_det, budget_det))
        goto done;
    ret = 0;
done:
    cct_ae_cells_free(&cells);
    cct_labels_free(&a.lset);
    cc_engine_close(&e);
    cc_model_close(&m);
    return ret;
}
