/* cmd_learn.c — `cellcast learn`: turns KPI history (the KPI topic's retention on Kafka,
 * tools/learn_kafka.c, or a directory of CSV files) into
 * published models with no model to start from (docs/learning.md). Each round, counted in
 * data time (lib/cc_learn.h): the linear-only tx/3 model and, with enough history, a
 * Transformer trained by `cellcast train`'s own code with the documented recipe; both and
 * the model in service scored by `cellcast eval`'s code on the held-out recent days of
 * every sampled cell; the best published atomically when it beats the champion by the
 * margin, with a JSON record of scores and lineage beside it. */
#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

#include "cc_build_info.h"
#include "cc_learn.h"
#include "cc_time.h"
#include "cc_train.h"
#include "cli.h"
#include "eval.h"
#ifdef CCT_HAVE_KAFKA
#include "learn_kafka.h"
#include "learn_windows.h"
#endif

/* SIGTERM / SIGINT: the round in progress is abandoned (the trainer reads the flag at
 * every step: cmd_train_stoppable), nothing of it is published, the process exits 0. */
static volatile sig_atomic_t g_learn_stop;
static void on_stop(int sig)
{
    (void)sig;
    g_learn_stop = 1;
}

typedef struct LearnArgs {
    const char *data_dir, *out, *state_dir, *on_publish, *tx_loss, *tx_mae_units, *linear_loss,
        *tx_linear_loss;
    int once, shuffle_train, quiet, threads, no_refit, refresh;
    double data_days, poll_s, floor_frac;
    double blend;      /* --blend: the model's weight against the seasonal naive (1: none) */
    double blend_cand; /* --blend-candidates: the blends' weight as further candidates (1: none) */
    CcLearnSettings ls;
    double first_model_h, transformer_days, retrain_h, holdout_h;
    int horizon, patch_len;
    /* the Transformer candidate: cellcast train's options */
    int d_model, n_heads, n_layers, d_ff, tx_steps;
    double seed;
    CcDataSettings data;
    /* Kafka (tools/learn_kafka.h): the KPI topic in, the models topic out */
    const char *brokers, *topic, *models_topic, *model_name, *cell_field, *time_field, *kpis_field;
    const char *fields[32], *props[64];
    int n_fields, n_props;
    /* maintenance windows kept out of the training rows (learn_windows.h) */
    const char *silences[CCT_WINDOWS_MAX_FILES], *topology;
    int n_silences;
    double history_days;
    struct CctLearnKafka *kafka; /* open while running with --brokers */
    struct Rollbacks *rb;        /* what the models topic says members rolled back */
} LearnArgs;

/* The rollback records read from the models topic (cc_learn.h): every hash in it is
 * refused as a candidate and as the champion, whichever member rolled it back. Derived
 * from the topic at each start (compaction keeps one record per hash). */
typedef struct Rollbacks {
    CcLearnRollback *r;
    int n;
    int first_read_done;
    char noted[17]; /* the rolled-back champion last logged as not restorable */
} Rollbacks;

/* One candidate or the champion, scored on the held-out rows. */
typedef struct Scored {
    const char *kind; /* "linear", "transformer", "champion" */
    char path[4096];
    int ok;          /* scored */
    double mase;     /* mean over KPIs of the per-KPI MASE of steps 1..H */
    double coverage; /* P10-P90 coverage, pooled */
    double snaive_mase, linear_mase;
    int64_t origins; /* forecast origins scored (every cell's) */
    json_t *per_kpi; /* {kpi: mase} */
    char why[512];   /* not scored: why */
    char hash[17];
} Scored;

/* The kind the gate chose, refitted on every row of the round (training and held-out) before
 * it is published (docs/learning.md, "The refit"). */
typedef struct Refit {
    char path[4096];
    int ok;
    int64_t rows;       /* the rows it was fitted on (every cell's) */
    double seconds;     /* its fit's wall time */
    double lambda;      /* the linear-only fit's penalty chosen again (NaN: none) */
    int kept_step;      /* the Transformer's checkpoint kept (its train_steps), and the */
    int candidate_step; /* candidate's: -1 unknown */
    char hash[17];
    char why[512]; /* not refitted: why (the scored candidate is published) */
} Refit;

typedef struct LearnState {
    int64_t last_round; /* data time of the last round, 0 = none */
    int rounds, published;
} LearnState;

static void state_path(const LearnArgs *a, const char *name, char *buf, size_t n)
{
    snprintf(buf, n, "%s/%s", a->state_dir, name);
}

static void load_state(const LearnArgs *a, LearnState *st)
{
    char p[4096];
    state_path(a, "state.json", p, sizeof p);
    *st = (LearnState){0};
    json_t *j = json_load_file(p, 0, NULL);
    if (!j)
        return;
    st->last_round = (int64_t)json_integer_value(json_object_get(j, "last_round"));
    st->rounds = (int)json_integer_value(json_object_get(j, "rounds"));
    st->published = (int)json_integer_value(json_object_get(j, "published"));
    json_decref(j);
}

static int save_json_atomic(const char *path, json_t *j, char *err, size_t errlen)
{
    char *s = json_dumps(j, JSON_INDENT(2) | JSON_SORT_KEYS);
    if (!s) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    size_t n = strlen(s);
    char *s2 = realloc(s, n + 2);
    if (s2) {
        s = s2;
        s[n++] = '\n';
        s[n] = 0;
    }
    int rc = cc_learn_write_atomic(path, s, n, err, errlen);
    free(s);
    return rc;
}

static int save_state(const LearnArgs *a, const LearnState *st, char *err, size_t errlen)
{
    char p[4096];
    state_path(a, "state.json", p, sizeof p);
    json_t *j = json_pack("{s:I,s:i,s:i}", "last_round", (json_int_t)st->last_round, "rounds",
                          st->rounds, "published", st->published);
    int rc = j ? save_json_atomic(p, j, err, errlen) : -ENOMEM;
    json_decref(j);
    return rc;
}

/* The heap's free pages back to the system between a round's phases. Each reading of a
 * CSV (the input, then the round's by each candidate and each scoring) and each scoring's
 * cells free their many small blocks when done; glibc keeps them in the process, and the
 * next reading's large arrays, mapped apart, came on top of them (10k cells of 8 days:
 * 0.5 GB held between phases, a peak of 1.6 GB where the reading alone takes 1.3). */
static void release_free_memory(void)
{
#ifdef __GLIBC__
    malloc_trim(0);
#endif
}

/* Every *.csv of the directory, in name order, into the store. 0 or -1. */
static int read_csv_dir(const LearnArgs *a, CcLearn *l)
{
    struct dirent **names = NULL;
    int n = scandir(a->data_dir, &names, NULL, alphasort);
    if (n < 0) {
        fprintf(stderr, "cellcast learn: %s: %s\n", a->data_dir, strerror(errno));
        return -1;
    }
    int rc = 0, files = 0;
    for (int i = 0; i < n; i++) {
        const char *nm = names[i]->d_name;
        size_t len = strlen(nm);
        if (!rc && len > 4 && !strcmp(nm + len - 4, ".csv")) {
            char p[4096], err[1024];
            snprintf(p, sizeof p, "%s/%s", a->data_dir, nm);
            CcDataset *ds = NULL;
            CcDataReport rep;
            if (cc_data_open_file(&ds, p, &a->data, &rep, err, sizeof err) < 0) {
                fprintf(stderr, "cellcast learn: %s\n", err);
                rc = -1;
            } else if (cc_learn_add_dataset(l, ds) < 0) {
                fprintf(stderr, "cellcast learn: %s: out of memory\n", p);
                rc = -1;
            }
            files++;
            cc_data_close(&ds);
            release_free_memory();
        }
        free(names[i]);
    }
    free(names);
    if (!rc && files == 0) {
        fprintf(stderr, "cellcast learn: no *.csv file in %s\n", a->data_dir);
        return -1;
    }
    return rc;
}

/* The mean over KPIs of a method's per-KPI MASE in cellcast eval's JSON (NaN: none): the
 * learner's criterion, every KPI weighing alike whatever its units. */
static double mean_kpi_mase(json_t *method)
{
    const char *k;
    json_t *v;
    double sum = 0;
    int n = 0;
    json_object_foreach(json_object_get(method, "per_kpi"), k, v)
    {
        json_t *m = json_object_get(v, "mase");
        if (json_is_number(m))
            sum += json_number_value(m), n++;
    }
    return n ? sum / n : NAN;
}

/* cellcast eval's scores of the model at path on the rows from `from` (unix seconds).
 * *need_linear: fit eval's `linear` baseline (a ridge fit over every sampled cell's rows:
 * as long as scoring all 4 models at 10k cells) only until a model of the round is scored;
 * it is the same for each. */
static void score(Scored *sc, const char *data, int64_t from, int horizon, int64_t step,
                  int *need_linear)
{
    CctEvalSettings es;
    cct_eval_default_settings(&es);
    char fromb[32];
    snprintf(fromb, sizeof fromb, "%lld", (long long)from);
    es.model_path = sc->path;
    es.data_path = data;
    es.from = fromb;
    es.horizon = horizon;
    es.step = step;
    es.threads = 1;
    if (!*need_linear)
        es.linear_window = 0;
    CctEval *e = NULL;
    sc->ok = 0;
    if (cct_eval_open(&e, &es, sc->why, sizeof sc->why) < 0) {
        release_free_memory();
        return;
    }
    json_t *j = cct_eval_json(e);
    cct_eval_close(&e);
    release_free_memory();
    json_t *methods = json_object_get(j, "methods");
    json_t *model = json_object_get(methods, "model");
    json_t *pk = json_object_get(model, "per_kpi");
    const char *k;
    json_t *v;
    double sum = 0;
    int n = 0;
    sc->per_kpi = json_object();
    json_object_foreach(pk, k, v)
    {
        json_t *m = json_object_get(v, "mase");
        if (json_is_number(m)) {
            sum += json_number_value(m);
            n++;
        }
        json_object_set(sc->per_kpi, k, m ? m : json_null());
    }
    sc->mase = n ? sum / n : NAN;
    json_t *cov = json_object_get(json_object_get(model, "overall"), "coverage80");
    sc->coverage = json_is_number(cov) ? json_number_value(cov) : NAN;
    sc->origins = json_integer_value(json_object_get(j, "origins"));
    sc->snaive_mase = mean_kpi_mase(json_object_get(methods, "snaive_1d"));
    sc->linear_mase = mean_kpi_mase(json_object_get(methods, "linear"));
    json_decref(j);
    if (!isfinite(sc->mase))
        snprintf(sc->why, sizeof sc->why, "no KPI with a MASE on the held-out rows");
    else
        sc->ok = 1, *need_linear = 0;
}

static json_t *scored_json(const Scored *sc)
{
    json_t *o = json_object();
    json_object_set_new(o, "kind", json_string(sc->kind));
    if (sc->hash[0])
        json_object_set_new(o, "hash", json_string(sc->hash));
    if (!sc->ok) {
        json_object_set_new(o, "refused", json_string(sc->why[0] ? sc->why : "not scored"));
        return o;
    }
#define NUM(x) (isfinite(x) ? json_real(x) : json_null())
    json_object_set_new(o, "mase", NUM(sc->mase));
    json_object_set_new(o, "coverage80", NUM(sc->coverage));
    json_object_set_new(o, "origins", json_integer(sc->origins));
    json_object_set_new(o, "mase_per_kpi", json_incref(sc->per_kpi));
#undef NUM
    return o;
}

/* The hyperparameters of this round's models: the data's KPIs and step, the horizon
 * (--horizon, or a quarter day of steps at most 24), and N, M, R cut to half the longest
 * series' training rows as `cellcast train` cuts its defaults; R also to the largest with
 * 2·R samples over all series (pooled over KPIs: F times more rows than eval's per-KPI
 * maps have, but one map for all). */
static void round_hparams(const LearnArgs *a, const CcDataset *ds, const CcRange *train,
                          CcHparams *hp)
{
    cc_hparams_default(hp);
    hp->n_features = ds->n_features;
    for (int f = 0; f < ds->n_features; f++)
        snprintf(hp->features[f], CC_FEATURE_NAME_MAX, "%s", ds->features[f]);
    hp->step_seconds = ds->step_seconds;
    int64_t quarter_day = 21600 / ds->step_seconds;
    hp->horizon = a->horizon > 0     ? a->horizon
                  : quarter_day < 24 ? (quarter_day > 0 ? (int)quarter_day : 1)
                                     : 24;
    int T = 0;
    for (int s = 0; s < ds->n_series; s++)
        if (train[s].end - train[s].begin > T)
            T = train[s].end - train[s].begin;
    int half = T / 2;
    /* a patch and the horizon must fit the training rows: a day of hours holds 20 */
    hp->patch_len = a->patch_len + hp->horizon > T && T / 4 < a->patch_len ? (T / 4 > 1 ? T / 4 : 1)
                                                                           : a->patch_len;
    hp->linear_window = 336 < half ? 336 : (half > 1 ? half : 1);
    /* as `cellcast eval`'s linear cuts its window: at least 2·R samples over all series (R
     * inputs and the horizon inside the training rows), or the ridge fits noise */
    for (;;) {
        int64_t n = 0;
        for (int s = 0; s < ds->n_series; s++) {
            int c = train[s].end - train[s].begin - hp->linear_window - hp->horizon + 1;
            n += c > 0 ? c : 0;
        }
        if (n >= 2 * (int64_t)hp->linear_window || hp->linear_window == 1)
            break;
        hp->linear_window--;
    }
    hp->norm_window = 336 < half ? 336 : (half > hp->patch_len ? half : hp->patch_len);
    if (hp->patch_len * hp->n_patches > half)
        hp->n_patches = half / hp->patch_len > 1 ? half / hp->patch_len : 1;
}

/* The round's record of the KPIs below the normalisation's resolution (cc_train_resolution:
 * model.md's absolute term 1e-5·(1 + |mu|) more than a tenth of the KPI's spread), each with
 * the unit scale that resolves it (null: none does), and a warning for each on stderr. The
 * Transformer cannot see such a KPI and its head's offsets cost it hundreds of its spreads,
 * so its candidate loses there (docs/learning.md). NULL: out of memory. */
static json_t *below_resolution(const LearnArgs *a, const CcDataset *ds, const CcRange *tr)
{
    CcKpiResolution *r = calloc((size_t)ds->n_features, sizeof *r);
    json_t *o = json_object();
    if (!r || !o || cc_train_resolution(ds, tr, r) < 0) {
        free(r);
        json_decref(o);
        return NULL;
    }
    for (int f = 0; f < ds->n_features; f++) {
        if (r[f].scale == 1)
            continue;
        const char *k = ds->features[f];
        json_object_set_new(o, k,
                            json_pack("{s:f, s:f, s:f, s:o}", "level", r[f].level, "spread",
                                      r[f].spread, "ratio", r[f].ratio, "scale",
                                      r[f].scale > 0 ? json_real(r[f].scale) : json_null()));
        if (a->quiet)
            continue;
        fprintf(stderr,
                "cellcast learn: KPI %s is below the model's normalisation resolution: values "
                "~%.2g moving by ~%.2g, and model.md's 1e-5·(1+|mu|) in sigma is %.3g times "
                "that (the Transformer cannot use it; docs/learning.md)",
                k, r[f].level, r[f].spread, r[f].ratio);
        if (r[f].scale > 0)
            fprintf(stderr,
                    "; feed it times %g: cellcastd's ingest.fields %s: %s*%g and the learner's "
                    "--field %s=%s*%g (CSV files: their values)\n",
                    r[f].scale, k, k, r[f].scale, k, k, r[f].scale);
        else
            fprintf(stderr, "; no unit scale resolves a level this far above its moves\n");
    }
    free(r);
    return o;
}

/* The linear-only candidates into path (seasonal: the seasonal naive as a tx/3 file,
 * else the ridge fit, its report in *fit, and *below: below_resolution()). 0 or -1 (why in
 * sc->why). */
static int linear_candidate(const LearnArgs *a, const char *train_csv, int64_t step,
                            const char *path, Scored *sc, int *horizon, int *patch_len,
                            int seasonal, CcLinearFitReport *fit, json_t **below)
{
    CcDataSettings d = a->data;
    d.format = CC_DATA_LONG;
    d.step_seconds = step;
    CcDataset *ds = NULL;
    CcDataReport rep;
    if (cc_data_open_file(&ds, train_csv, &d, &rep, sc->why, sizeof sc->why) < 0)
        return -1;
    int rc = -1;
    CcRange *tr = calloc((size_t)ds->n_series, sizeof *tr),
            *va = calloc((size_t)ds->n_series, sizeof *va);
    CcModel *m = NULL;
    for (int s = 0; tr && va && s < ds->n_series; s++) {
        CcRange r3[3];
        cc_data_split("0.85,0.15", ds->series[s].T, r3, sc->why, sizeof sc->why);
        tr[s] = r3[0], va[s] = r3[1];
    }
    if (tr && va) {
        CcHparams hp;
        round_hparams(a, ds, tr, &hp);
        hp.d_model = 4, hp.n_heads = 1, hp.n_layers = 1, hp.d_ff = 4; /* unused: head at 0 */
        snprintf(hp.name, sizeof hp.name, "cellcast-learn-%s", seasonal ? "seasonal" : "linear");
        *horizon = hp.horizon, *patch_len = hp.patch_len;
        if (below)
            *below = below_resolution(a, ds, tr);
        int r = seasonal ? cc_learn_seasonal_model(&m, &hp, ds, tr, va, a->floor_frac, sc->why,
                                                   sizeof sc->why)
                         : cc_learn_fit_linear(&m, &hp, ds, tr, va, a->floor_frac,
                                               strcmp(a->linear_loss, "mae") ? CC_LINEAR_LOSS_MSE
                                                                             : CC_LINEAR_LOSS_MAE,
                                               fit, &g_learn_stop, sc->why, sizeof sc->why);
        if (r == 0 && cc_model_save(m, path, sc->why, sizeof sc->why) == 0)
            rc = 0;
        /* the fit keeps a window only when its every horizon step is observed: cells with
         * gaps leave few (NAB's irregular 5-minute series: 22 of ~6,000), and then it and
         * the Transformer's start are fitted on noise (the round's own candidate only: the
         * refit passes no *below) */
        if (below && !seasonal && rc < 0)
            fprintf(stderr, "cellcast learn: warning: the linear-only candidate: %s\n", sc->why);
        else if (below && !seasonal && fit && fit->partial_targets)
            fprintf(stderr,
                    "cellcast learn: the cells miss steps (gaps): the linear-only candidate was "
                    "fitted on %lld windows with some of their %d horizon steps observed (the "
                    "others' targets imputed), too few having all of them\n",
                    (long long)fit->n_fit, hp.horizon);
        else if (below && !seasonal && fit && fit->n_fit < 2 * (int64_t)hp.linear_window)
            fprintf(stderr,
                    "cellcast learn: warning: the linear-only candidate was fitted on %lld "
                    "windows whose %d horizon steps are all observed, fewer than 2 x its "
                    "look-back of %d (a short history): it and the Transformer's start are "
                    "weak\n",
                    (long long)fit->n_fit, hp.horizon, hp.linear_window);
    } else
        snprintf(sc->why, sizeof sc->why, "out of memory");
    cc_model_close(&m);
    free(tr);
    free(va);
    cc_data_close(&ds);
    release_free_memory();
    return rc;
}

/* The Transformer candidate: `cellcast train` itself (its code, in this process) with the
 * documented recipe for a learner: the ridge start validated as a candidate checkpoint
 * (--linear-init ridge --eval-start), checkpoints chosen by MASE. Stopped at the next
 * step by SIGTERM (g_learn_stop). 0, 1 (stopped: no candidate) or -1. */
static int transformer_candidate(const LearnArgs *a, const char *train_csv, int64_t step,
                                 int horizon, int patch_len, const char *path, Scored *sc)
{
    char b[16][32];
    int nb = 0;
#define NUM_ARG(fmt, v) (snprintf(b[nb], sizeof b[nb], fmt, v), b[nb++])
    const char *argv[64];
    int argc = 0;
    argv[argc++] = "train";
    argv[argc++] = "--data";
    argv[argc++] = train_csv;
    argv[argc++] = "--out";
    argv[argc++] = path;
    argv[argc++] = "--format";
    argv[argc++] = "long";
    argv[argc++] = "--step";
    argv[argc++] = NUM_ARG("%lld", (long long)step);
    argv[argc++] = "--horizon";
    argv[argc++] = NUM_ARG("%d", horizon);
    argv[argc++] = "--patch-len";
    argv[argc++] = NUM_ARG("%d", patch_len);
    argv[argc++] = "--linear-init";
    argv[argc++] = "ridge-kpi";
    argv[argc++] = "--linear-loss";
    argv[argc++] = a->tx_linear_loss;
    argv[argc++] = "--eval-start";
    argv[argc++] = "--select";
    argv[argc++] = "mase";
    argv[argc++] = "--split";
    argv[argc++] = "0.85,0.15";
    argv[argc++] = "--d-model";
    argv[argc++] = NUM_ARG("%d", a->d_model);
    argv[argc++] = "--n-heads";
    argv[argc++] = NUM_ARG("%d", a->n_heads);
    argv[argc++] = "--n-layers";
    argv[argc++] = NUM_ARG("%d", a->n_layers);
    argv[argc++] = "--d-ff";
    argv[argc++] = NUM_ARG("%d", a->d_ff);
    argv[argc++] = "--threads";
    argv[argc++] = NUM_ARG("%d", a->threads);
    argv[argc++] = "--seed";
    argv[argc++] = NUM_ARG("%.0f", a->seed);
    argv[argc++] = "--name";
    argv[argc++] = "cellcast-learn-transformer";
    if (!strcmp(a->tx_loss, "mae")) { /* the mean from an MAE term, the NLL for log-sigma */
        argv[argc++] = "--mae-weight";
        argv[argc++] = "1";
        argv[argc++] = "--nll-mean";
        argv[argc++] = "0";
        argv[argc++] = "--mae-units";
        argv[argc++] = a->tx_mae_units;
    }
    if (a->tx_steps > 0) {
        argv[argc++] = "--steps";
        argv[argc++] = NUM_ARG("%d", a->tx_steps);
    }
    if (a->quiet)
        argv[argc++] = "--quiet";
    argv[argc] = NULL;
#undef NUM_ARG
    if (!a->quiet) /* what a stop waits for: one optimiser step (docs/learning.md) */
        fprintf(stderr, "cellcast learn: training the Transformer candidate (%d steps%s)\n",
                a->tx_steps, a->tx_steps > 0 ? "" : ": cellcast train's default");
    int rc = cmd_train_stoppable(argc, (char **)argv, &g_learn_stop);
    release_free_memory();
    if (rc == -ECANCELED)
        return 1;
    if (rc != 0) {
        snprintf(sc->why, sizeof sc->why, "cellcast train exited with %d", rc);
        return -1;
    }
    return 0;
}

/* The records of a round's long CSV (its lines but the header): the rows a model of it was
 * fitted on, every cell's. */
static int64_t csv_records(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    static char buf[1 << 16];
    int64_t n = 0;
    size_t got;
    char last = '\n';
    while ((got = fread(buf, 1, sizeof buf, f)) > 0) {
        for (const char *p = buf; (p = memchr(p, '\n', (size_t)(buf + got - p))); p++)
            n++;
        last = buf[got - 1];
    }
    fclose(f);
    n += last != '\n'; /* a last line without its newline */
    return n > 0 ? n - 1 : 0;
}

/* The optimiser step whose weights a `cellcast train` file holds (its train_steps metadata,
 * the checkpoint --select kept); -1 when it does not say. */
static int kept_step(const char *path)
{
    CcModel *m = NULL;
    char err[256];
    int step = -1;
    if (cc_model_open_file(&m, path, err, sizeof err) == 0) {
        const char *v = cc_hparams_get_extra(&m->hp, "train_steps");
        if (v)
            step = atoi(v);
    }
    cc_model_close(&m);
    return step;
}

static const CcLearnRollback *rolled_back(const LearnArgs *a, const char *hash);

/* The refit (issue 31): the kind the gate chose fitted again with its recipe and seed on
 * every row of the round, the held-out rows included, into STATE_DIR/refit.safetensors.
 * Why: the rows held out are the newest, the ones most like the day the published model
 * serves; a model published at a day's end that never trained on that day loses a change
 * of regime it shows (docs/results.md, "The gate on one held-out day"): the candidate
 * trained one day later scores better on the next day (linear +3.0 %, Transformer +1.4 %).
 * The recipe is the candidate's whole: the linear-only fit chooses its penalty on the last
 * 15 % of the rows again and refits on all of them; the Transformer trains the same
 * --tx-steps from the same ridge start and seed and keeps the checkpoint with the best MASE
 * on the last 15 % of the rows (its --split), as the candidate did on its own rows. Not the
 * candidate's kept step replayed without a validation split: cellcast train needs one to
 * choose, and choosing keeps the ridge start when a run goes wrong (the refit is not scored
 * before it serves: cellcastd's rollback watch judges it live). So the refit is exactly the
 * candidate the next round would train on these rows (tests/cli/test_learn_refit.sh): the
 * candidate's horizon and patch length, the windows cellcast train cuts to half the rows
 * (longer only while the data is short). The seasonal naive is
 * refitted too: the same forecast, its interval calibrated on the newest rows. 0 (rf->ok,
 * or rf->why), 1 (stopped by SIGTERM). */
static int refit_chosen(const LearnArgs *a, const char *all_csv, int64_t step, const char *kind,
                        int horizon, int patch_len, Refit *rf)
{
    state_path(a, "refit.safetensors", rf->path, sizeof rf->path);
    unlink(rf->path);
    rf->lambda = NAN;
    rf->rows = csv_records(all_csv);
    int64_t t0 = cc_now_ns();
    Scored tmp = {.kind = kind};
    int rc;
    rf->kept_step = rf->candidate_step = -1;
    if (!strcmp(kind, "transformer")) {
        rc = transformer_candidate(a, all_csv, step, horizon, patch_len, rf->path, &tmp);
        if (rc == 0) {
            char cand[4096];
            state_path(a, "candidate-transformer.safetensors", cand, sizeof cand);
            rf->kept_step = kept_step(rf->path);
            rf->candidate_step = kept_step(cand);
        }
    } else {
        CcLinearFitReport fit = {.lambda = NAN};
        int h = 0, p = a->patch_len, seasonal = !strcmp(kind, "seasonal");
        rc = linear_candidate(a, all_csv, step, rf->path, &tmp, &h, &p, seasonal,
                              seasonal ? NULL : &fit, NULL);
        rf->lambda = fit.lambda;
        if (rc == 0 && h != horizon) /* cannot be: the horizon is set by the step alone */
            rc = -1,
            snprintf(tmp.why, sizeof tmp.why, "horizon %d, not the candidate's %d", h, horizon);
    }
    rf->seconds = (double)(cc_now_ns() - t0) / 1e9;
    if (rc == 1 || g_learn_stop)
        return 1;
    if (rc == 0 && cc_learn_file_hash(rf->path, rf->hash) == 0) {
        const CcLearnRollback *r = rolled_back(a, rf->hash);
        if (!r)
            return rf->ok = 1, 0;
        snprintf(rf->why, sizeof rf->why, "model %s was rolled back by %s", rf->hash, r->member);
    } else
        snprintf(rf->why, sizeof rf->why, "%s", tmp.why[0] ? tmp.why : "no refitted file");
    unlink(rf->path);
    return 0;
}

/* --blend A < 1 (docs/learning.md, "Blending with the seasonal naive"): the model file src
 * written to dst (src itself: in place) as A x its forecast + (1 - A) x the seasonal naive
 * (cc_learn_blend_seasonal), before it is scored or published. The seasonal candidate is
 * not blended (a blend of it is itself). 0 (blended, or A = 1 and dst is src), -1 (why in
 * why: dst is not written; a step that does not divide a day). */
static int blend_file(double weight, const char *src, const char *dst, char *why, size_t whylen)
{
    if (weight >= 1 && !strcmp(src, dst))
        return 0;
    CcModel *m = NULL, *b = NULL;
    int rc = cc_model_open_file(&m, src, why, whylen);
    if (rc == 0)
        rc = cc_learn_blend_seasonal(&b, m, weight, why, whylen);
    if (rc == 0)
        rc = cc_model_save(b, dst, why, whylen);
    cc_model_close(&b);
    cc_model_close(&m);
    return rc < 0 ? -1 : 0;
}

/* The index in sc[0..n_cand) of the kind of the model in service, from its record (the
 * learner's MODEL.json: `published`); -1 when it has none (a model the learner did not
 * publish). */
static int champion_kind(const LearnArgs *a, const Scored *sc, int n_cand)
{
    char path[4200];
    snprintf(path, sizeof path, "%s.json", a->out);
    json_t *r = json_load_file(path, 0, NULL);
    const char *k = json_string_value(json_object_get(r, "published"));
    int idx = -1;
    for (int i = 0; k && i < n_cand; i++)
        if (!strcmp(sc[i].kind, k))
            idx = i;
    json_decref(r);
    return idx;
}

/* The held-out forecast origins (every cell's) the gate compares on at least: one day of a
 * few hourly cells holds ~20 origins a cell, and the winner of such a day does not predict
 * the next day's (docs/results.md, "The gate's evidence"); the number matches cellcastd's
 * model.rollback_min_forecasts. */
#define GATE_MIN_ORIGINS 200
#define GATE_MAX_ROUNDS 30 /* previous round records read back for it */

#define GATE_RULE                                                                                  \
    "the candidate with the lowest held-out criterion (linear-only ridge fit, the seasonal "       \
    "naive as a linear-only file, the Transformer) is published when no comparable model is "      \
    "in service, or when its criterion is below (1 - margin) x the model in service's; "           \
    "criteria pooled with earlier rounds' held-out days up to 200 origins (gate_pool)"

/* The last GATE_MAX_ROUNDS records of rounds.jsonl into recs[] (newest first); their count. */
static int read_round_history(const LearnArgs *a, json_t **recs)
{
    char path[4096];
    state_path(a, "rounds.jsonl", path, sizeof path);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    json_t *ring[GATE_MAX_ROUNDS] = {0};
    int n = 0;
    char *line = NULL;
    size_t cap = 0;
    while (getline(&line, &cap, f) > 0) {
        json_t *r = json_loads(line, 0, NULL);
        if (!json_is_object(r)) { /* a line a killed learner cut short */
            json_decref(r);
            continue;
        }
        json_decref(ring[n % GATE_MAX_ROUNDS]);
        ring[n++ % GATE_MAX_ROUNDS] = r;
    }
    free(line);
    fclose(f);
    int kept = n < GATE_MAX_ROUNDS ? n : GATE_MAX_ROUNDS;
    for (int i = 0; i < kept; i++)
        recs[i] = ring[(n - 1 - i) % GATE_MAX_ROUNDS];
    return kept;
}

/* A record's time field (iso_time()) in unix seconds; 0 when absent or malformed. */
static int64_t record_time(json_t *rec, const char *key)
{
    const char *v = json_string_value(json_object_get(rec, key));
    int64_t t = 0;
    if (!v || cc_time_parse_rfc3339(v, strlen(v), &t) < 0)
        return 0;
    return t;
}

/* A scored entry's criterion and origins in a record (0: not scored, or a record from before
 * origins were recorded). */
static int entry_score(json_t *e, double *mase, int64_t *origins)
{
    json_t *m = json_object_get(e, "mase"), *o = json_object_get(e, "origins");
    if (!json_is_number(m) || !json_is_integer(o) || json_integer_value(o) <= 0)
        return 0;
    *mase = json_number_value(m), *origins = json_integer_value(o);
    return 1;
}

/* What scored sc (a candidate kind, or the champion: its hash) scored in a previous round's
 * record: a candidate its kind's candidate; the champion itself while in service
 * (champion_before), as a candidate in the round that published it, and before that its
 * kind's candidates (*champ_kind, learnt going back). 0: no comparable score. */
static int history_score(json_t *rec, const Scored *sc, int is_champ, const char **champ_kind,
                         double *mase, int64_t *origins)
{
    json_t *cands = json_object_get(rec, "candidates"), *c;
    size_t i;
    if (is_champ) {
        json_t *cb = json_object_get(rec, "champion_before");
        const char *h = json_string_value(json_object_get(cb, "hash"));
        if (h && !strcmp(h, sc->hash) && entry_score(cb, mase, origins))
            return 1;
        /* a refit (its record's refit.hash) is scored as the candidate it refitted */
        const char *rh = json_string_value(json_object_get(json_object_get(rec, "refit"), "hash"));
        const char *pub = json_string_value(json_object_get(rec, "published"));
        json_array_foreach(cands, i, c)
        {
            const char *k = json_string_value(json_object_get(c, "kind"));
            h = json_string_value(json_object_get(c, "hash"));
            if (((h && !strcmp(h, sc->hash)) ||
                 (rh && pub && k && !strcmp(rh, sc->hash) && !strcmp(k, pub))) &&
                entry_score(c, mase, origins)) {
                *champ_kind = k;
                return 1;
            }
        }
        if (!*champ_kind)
            return 0;
    }
    const char *kind = is_champ ? *champ_kind : sc->kind;
    json_array_foreach(cands, i, c)
    {
        const char *k = json_string_value(json_object_get(c, "kind"));
        if (k && !strcmp(k, kind))
            return entry_score(c, mase, origins);
    }
    return 0;
}

/* The gate's criterion crit[i] of each scored sc[0..n) (NaN: not scored): its MASE on this
 * round's held-out rows (cut on), pooled while they hold fewer than GATE_MIN_ORIGINS origins
 * with the previous rounds' (newest first) whose held-out rows end before the pooled ones
 * begin, as long as every scored one has a score there (history_score), weighted by origins.
 * Rounds of shuffled training rows (a test's control) are passed over. The pool, for the
 * record. */
static json_t *gate_pool(const LearnArgs *a, const Scored *sc, int n, int64_t cut, double *crit)
{
    double sum[8];
    int64_t w[8], pooled = 0;
    const char *champ_kind = NULL;
    for (int i = 0; i < n; i++) {
        crit[i] = sc[i].ok ? sc[i].mase : NAN;
        sum[i] = sc[i].ok ? sc[i].mase * (double)sc[i].origins : 0;
        w[i] = sc[i].ok ? sc[i].origins : 0;
        if (sc[i].ok && (pooled == 0 || sc[i].origins < pooled))
            pooled = sc[i].origins;
    }
    json_t *recs[GATE_MAX_ROUNDS];
    int n_recs = pooled > 0 && pooled < GATE_MIN_ORIGINS ? read_round_history(a, recs) : 0;
    int rounds = pooled > 0, champ = n - 1;
    int64_t earliest = cut;
    for (int r = 0; r < n_recs && pooled < GATE_MIN_ORIGINS; r++) {
        if (json_is_true(json_object_get(recs[r], "shuffled_training")))
            continue;
        int64_t last = record_time(recs[r], "data_last"),
                from = record_time(recs[r], "holdout_from");
        if (!last || !from || last >= earliest)
            continue; /* its held-out rows overlap the pooled ones: a repeated round */
        double m[8];
        int64_t o[8], o_min = 0;
        int all = 1;
        for (int i = 0; i < n && all; i++)
            if (sc[i].ok) {
                all = history_score(recs[r], &sc[i], i == champ, &champ_kind, &m[i], &o[i]);
                if (all && (o_min == 0 || o[i] < o_min))
                    o_min = o[i];
            }
        if (!all)
            break;
        for (int i = 0; i < n; i++)
            if (sc[i].ok)
                sum[i] += m[i] * (double)o[i], w[i] += o[i];
        pooled += o_min, earliest = from, rounds++;
    }
    for (int r = 0; r < n_recs; r++)
        json_decref(recs[r]);
    json_t *c = json_object();
    for (int i = 0; i < n; i++)
        if (sc[i].ok) {
            crit[i] = sum[i] / (double)w[i];
            json_object_set_new(c, sc[i].kind, json_real(crit[i]));
        }
    return json_pack("{s:i, s:I, s:i, s:o}", "rounds", rounds, "origins", (json_int_t)pooled,
                     "min_origins", GATE_MIN_ORIGINS, "criterion", c);
}

/* Champion / challenger over sc[0..n_cand) and the model in service sc[n_cand] by their
 * criteria crit[] (gate_pool()): *best the scored candidate with the lowest criterion (-1:
 * none), *publish whether it replaces the model in service (GATE_RULE). Since the seasonal
 * naive and the linear-only fit are candidates, what is served never scores worse than
 * either on the pooled held-out days by more than the margin. The decision, for the
 * record. */
static const char *gate(const Scored *sc, const double *crit, int n_cand, double margin, int *best,
                        int *publish)
{
    const Scored *champ = &sc[n_cand];
    *best = -1, *publish = 0;
    for (int i = 0; i < n_cand; i++)
        if (sc[i].ok && (*best < 0 || crit[i] < crit[*best]))
            *best = i;
    if (*best < 0)
        return "refused: no candidate could be scored";
    if (!champ->ok)
        return *publish = 1, "published: no comparable model in service";
    if (crit[*best] < (1 - margin) * crit[n_cand])
        return *publish = 1, "published: beats the model in service by the margin";
    return "refused: does not beat the model in service by the margin";
}

static json_t *iso_time(int64_t ts)
{
    char buf[32];
    time_t t = (time_t)ts;
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return json_string(buf);
}

/* A rollback record read from the models topic: kept (one per hash, the newest) and said. */
static void take_rollback(void *cookie, const CcLearnRollback *r)
{
    const LearnArgs *a = cookie;
    Rollbacks *rb = a->rb;
    int i = 0;
    while (i < rb->n && strcmp(rb->r[i].hash, r->hash))
        i++;
    if (i == rb->n) {
        CcLearnRollback *nr = realloc(rb->r, (size_t)(rb->n + 1) * sizeof *nr);
        if (!nr) {
            fprintf(stderr, "cellcast learn: out of memory noting a rollback of %s\n", r->hash);
            return;
        }
        rb->r = nr;
        rb->n++;
    }
    rb->r[i] = *r;
    char live[96] = "";
    if (isfinite(r->live_mase) && isfinite(r->baseline_mase))
        snprintf(live, sizeof live, ", live MASE %.4g against the previous model's %.4g",
                 r->live_mase, r->baseline_mase);
    fprintf(stderr,
            "cellcast learn: model %s was rolled back to %s by member %s%s%s%s: refused from "
            "now on\n",
            r->hash, r->to, r->member, r->at[0] ? " at " : "", r->at, live);
}

static const CcLearnRollback *rolled_back(const LearnArgs *a, const char *hash)
{
    for (int i = 0; a->rb && hash[0] && i < a->rb->n; i++)
        if (!strcmp(a->rb->r[i].hash, hash))
            return &a->rb->r[i];
    return NULL;
}

/* What the models topic holds beyond what was read: the first read waits for the topic's
 * end (5 s at most), later ones take what arrived. */
static void read_rollbacks(const LearnArgs *a)
{
#ifdef CCT_HAVE_KAFKA
    char err[512];
    if (!a->kafka)
        return;
    int n = cct_learn_kafka_read_rollbacks(a->kafka, a->rb->first_read_done ? 200 : 5000,
                                           take_rollback, (void *)a, err, sizeof err);
    if (n < 0)
        fprintf(stderr, "cellcast learn: reading rollbacks: %s\n", err);
    else
        a->rb->first_read_done = 1;
#else
    (void)a;
#endif
}

static int publish_kafka(const LearnArgs *a, json_t *rec, const char *hash, char *err,
                         size_t errlen);

/* The champion (the --out file) when a member rolled it back: the model before it, which
 * the learner kept as STATE_DIR/previous.safetensors when it published the one rolled
 * back, goes back to --out (and, with --brokers, to the models topic: the members that did
 * not roll back, and those that start, then serve the same model as the one that did).
 * 0: the champion is not rolled back, or is the previous model again; 1: rolled back and
 * the model before it is not at hand (why says so: no champion to beat this round). */
static int follow_rollbacks(const LearnArgs *a, char *why, size_t whylen)
{
    char out_hash[17] = "", prev[4096], prevj[4200], outj[4200], h[17] = "", err[1024];
    if (cc_learn_file_hash(a->out, out_hash) < 0)
        return 0;
    const CcLearnRollback *r = rolled_back(a, out_hash);
    if (!r)
        return 0;
    state_path(a, "previous.safetensors", prev, sizeof prev);
    snprintf(prevj, sizeof prevj, "%s.json", prev);
    snprintf(outj, sizeof outj, "%s.json", a->out);
    if (cc_learn_file_hash(prev, h) < 0 || strcmp(h, r->to)) {
        snprintf(why, whylen,
                 "the model in service %s was rolled back to %s by %.96s; the model before it "
                 "is not %.200s (%s): no champion",
                 out_hash, r->to, r->member, prev, h[0] ? h : "absent");
        if (strcmp(a->rb->noted, out_hash)) {
            fprintf(stderr, "cellcast learn: %s\n", why);
            snprintf(a->rb->noted, sizeof a->rb->noted, "%s", out_hash);
        }
        return 1;
    }
    json_t *rec = json_load_file(prevj, 0, NULL);
    if (!json_is_object(rec)) {
        json_decref(rec);
        rec = json_pack("{s:s, s:s}", "format", "cellcast-learn-record/1", "hash", r->to);
    }
    json_object_set_new(rec, "restored_after_rollback_of", json_string(out_hash));
    if (cc_learn_publish_file(prev, a->out, err, sizeof err) < 0 ||
        save_json_atomic(outj, rec, err, sizeof err) < 0) {
        fprintf(stderr, "cellcast learn: restoring the champion: %s\n", err);
        json_decref(rec);
        snprintf(why, whylen, "the model in service %s was rolled back; restoring %s failed",
                 out_hash, r->to);
        return 1;
    }
    fprintf(stderr,
            "cellcast learn: champion %s rolled back by %s: the champion is %s again (%s)\n",
            out_hash, r->member, r->to, prev);
    if (a->kafka && publish_kafka(a, rec, r->to, err, sizeof err) < 0)
        fprintf(stderr, "cellcast learn: republishing %s: %s\n", r->to, err);
    json_decref(rec);
    return 0;
}

/* The published model and its record onto the models topic (tools/learn_kafka.h). */
static int publish_kafka(const LearnArgs *a, json_t *rec, const char *hash, char *err,
                         size_t errlen)
{
#ifdef CCT_HAVE_KAFKA
    char *js = json_dumps(rec, JSON_COMPACT | JSON_SORT_KEYS);
    if (!js) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    int rc = cct_learn_kafka_publish(a->kafka, a->model_name, a->out, hash, js, err, errlen);
    free(js);
    if (rc == 0 && !a->quiet)
        fprintf(stderr, "cellcast learn: published %s to '%s' (key '%s')\n", hash,
                cct_learn_kafka_models_topic(a->kafka), a->model_name);
    return rc;
#else
    (void)a, (void)rec, (void)hash;
    snprintf(err, errlen, "built without librdkafka");
    return -1;
#endif
}

/* A round stopped by SIGTERM: nothing of it is published (the next start runs it again).
 * Removes its files (each with cellcast train's optimiser state beside it, where one is)
 * and frees the scores; 2, learn_round's "stopped". */
static int abandon_round(const char *const *files, int n_files, json_t **owned, int n_owned,
                         int round, const char *while_, int64_t t0)
{
    for (int i = 0; i < n_files; i++) {
        char optim[4200];
        snprintf(optim, sizeof optim, "%s.optim", files[i]);
        unlink(files[i]);
        unlink(optim);
    }
    for (int i = 0; i < n_owned; i++)
        json_decref(owned[i]);
    fprintf(stderr,
            "cellcast learn: stopped: round %d abandoned%s after %.1fs, nothing published\n", round,
            while_, (double)(cc_now_ns() - t0) / 1e9);
    return 2;
}

/* One learning round on what the store holds. 0 (a round ran or none was due), 1 (no
 * round: not enough data), 2 (stopped by SIGTERM: abandoned, nothing published), -1 on an
 * error. */
static int learn_round(const LearnArgs *a, CcLearn *l, LearnState *st)
{
    CcLearnStats ls;
    cc_learn_stats(l, &ls);
    if (a->data.step_seconds > 0) /* --step: the operator's, not the detected one */
        ls.step_s = a->data.step_seconds;
    char err[1024];
    if (ls.step_s <= 0 || ls.n_kpis == 0) {
        if (!a->quiet)
            fprintf(stderr, "cellcast learn: waiting for data (%d cells, %lld records)\n", ls.cells,
                    (long long)ls.records);
        return 1;
    }
    enum CcLearnRound due =
        cc_learn_due(&a->ls, ls.first_ts, ls.last_ts + ls.step_s, a->once ? 0 : st->last_round);
    if (due == CC_LEARN_WAIT) {
        if (!a->quiet)
            fprintf(stderr,
                    "cellcast learn: learning: %.1f hours of data (%d cells, %d KPIs, step "
                    "%llds), next round at %.1f hours\n",
                    (double)(ls.last_ts + ls.step_s - ls.first_ts) / 3600, ls.cells, ls.n_kpis,
                    (long long)ls.step_s,
                    (double)(st->last_round ? st->last_round + a->ls.retrain_every_s - ls.first_ts
                                            : a->ls.first_model_s) /
                        3600);
        return 1;
    }
    int64_t t0 = cc_now_ns();
    int64_t span = ls.last_ts + ls.step_s - ls.first_ts;
    int64_t hold = cc_learn_holdout(&a->ls, ls.first_ts, ls.last_ts + ls.step_s, ls.step_s);
    int64_t cut = ls.last_ts + ls.step_s - hold; /* rows from cut on are held out */
    char all_csv[4096], train_csv[4096], lin_path[4096], tx_path[4096], sn_path[4096],
        linb_path[4096], txb_path[4096];
    state_path(a, "all.csv", all_csv, sizeof all_csv);
    state_path(a, "train.csv", train_csv, sizeof train_csv);
    state_path(a, "candidate-linear.safetensors", lin_path, sizeof lin_path);
    state_path(a, "candidate-transformer.safetensors", tx_path, sizeof tx_path);
    state_path(a, "candidate-seasonal.safetensors", sn_path, sizeof sn_path);
    state_path(a, "candidate-linear-blend.safetensors", linb_path, sizeof linb_path);
    state_path(a, "candidate-transformer-blend.safetensors", txb_path, sizeof txb_path);
    /* a Kafka store's doubling slack given back: the round runs beside the store (only
     * when a round runs: a trim at each poll would make each cell's next record regrow it) */
    cc_learn_trim(l);
    if (cc_learn_write_csv(l, all_csv, 0, err, sizeof err) < 0) {
        fprintf(stderr, "cellcast learn: %s\n", err);
        return -1;
    }
    if (a->shuffle_train) { /* a test's control: the training rows' time order destroyed */
        cc_learn_shuffle(l, cut, (uint64_t)a->seed);
    }
    if (cc_learn_write_csv(l, train_csv, cut, err, sizeof err) < 0) {
        fprintf(stderr, "cellcast learn: %s\n", err);
        return -1;
    }
    /* --data-dir: the next poll reads the directory again, and from here on the round reads
     * the CSVs (the store's KPI names stay for the record): the records' memory goes back
     * before the candidates and the scoring load their copies. A Kafka store is kept. */
    if (!a->kafka) {
        cc_learn_clear(l);
        release_free_memory();
    }
    if (!a->quiet)
        fprintf(stderr,
                "cellcast learn: round %d at data time %lld: %.2f days of data, %d cells, %d "
                "KPIs, step %llds; held out the last %.1f hours; %s\n",
                st->rounds + 1, (long long)ls.last_ts, (double)span / 86400, ls.cells, ls.n_kpis,
                (long long)ls.step_s, (double)hold / 3600,
                due == CC_LEARN_TRANSFORMER ? "linear and Transformer candidates"
                                            : "linear candidate (the Transformer from "
                                              "enough history)");
    /* the candidates, then the model in service (CHAMP); LINB and TXB, the linear-only and
     * Transformer candidates blended with the seasonal naive, only with --blend-candidates */
    enum { LIN, SEASONAL, TX, LINB, TXB, CHAMP, N_SCORED };
    Scored sc[N_SCORED] = {
        {.kind = "linear"},       {.kind = "seasonal"},          {.kind = "transformer"},
        {.kind = "linear-blend"}, {.kind = "transformer-blend"}, {.kind = "champion"}};
    const int n_kinds = a->blend_cand < 1 ? CHAMP : LINB; /* the candidates in play */
    int horizon = 0, patch_len = a->patch_len;
    snprintf(sc[LIN].path, sizeof sc[LIN].path, "%s", lin_path);
    snprintf(sc[SEASONAL].path, sizeof sc[SEASONAL].path, "%s", sn_path);
    snprintf(sc[TX].path, sizeof sc[TX].path, "%s", tx_path);
    snprintf(sc[LINB].path, sizeof sc[LINB].path, "%s", linb_path);
    snprintf(sc[TXB].path, sizeof sc[TXB].path, "%s", txb_path);
    for (int i = n_kinds; i < CHAMP; i++)
        snprintf(sc[i].why, sizeof sc[i].why, "no --blend-candidates");
    snprintf(sc[CHAMP].path, sizeof sc[CHAMP].path, "%s", a->out);
    unlink(lin_path);
    unlink(tx_path);
    unlink(sn_path);
    unlink(linb_path);
    unlink(txb_path);
    CcLinearFitReport fit = {.lambda = NAN, .mae_end = NAN};
    int need_linear = 1;
    json_t *below = NULL;
    char blend_why[512] = "";
    if (linear_candidate(a, train_csv, ls.step_s, lin_path, &sc[LIN], &horizon, &patch_len, 0, &fit,
                         &below) == 0) {
        blend_file(a->blend, lin_path, lin_path, blend_why, sizeof blend_why);
        score(&sc[LIN], all_csv, cut, horizon, ls.step_s, &need_linear);
        if (n_kinds > LINB &&
            blend_file(a->blend_cand, lin_path, linb_path, sc[LINB].why, sizeof sc[LINB].why) == 0)
            score(&sc[LINB], all_csv, cut, horizon, ls.step_s, &need_linear);
    }
    if (!horizon) {
        fprintf(stderr, "cellcast learn: linear candidate: %s\n", sc[LIN].why);
        json_decref(below);
        return -1;
    }
    /* the seasonal naive once a day of rows precedes the held-out ones (as eval's) */
    if (cut - ls.first_ts >= 86400) {
        if (linear_candidate(a, train_csv, ls.step_s, sn_path, &sc[SEASONAL], &horizon, &patch_len,
                             1, NULL, NULL) == 0)
            score(&sc[SEASONAL], all_csv, cut, horizon, ls.step_s, &need_linear);
    } else
        snprintf(sc[SEASONAL].why, sizeof sc[SEASONAL].why,
                 "no day of data before the held-out rows");
    if (due == CC_LEARN_TRANSFORMER && !g_learn_stop) {
        if (transformer_candidate(a, train_csv, ls.step_s, horizon, patch_len, tx_path, &sc[TX]) ==
            0) {
            blend_file(a->blend, tx_path, tx_path, blend_why, sizeof blend_why);
            score(&sc[TX], all_csv, cut, horizon, ls.step_s, &need_linear);
            if (n_kinds > TXB &&
                blend_file(a->blend_cand, tx_path, txb_path, sc[TXB].why, sizeof sc[TXB].why) == 0)
                score(&sc[TXB], all_csv, cut, horizon, ls.step_s, &need_linear);
        }
    } else
        snprintf(sc[TX].why, sizeof sc[TX].why, "%.1f days of data, the Transformer from %.1f",
                 (double)span / 86400, (double)a->ls.transformer_s / 86400);
    if (g_learn_stop) {
        const char *files[] = {lin_path, tx_path, sn_path, linb_path, txb_path};
        json_t *owned[] = {sc[LIN].per_kpi, sc[SEASONAL].per_kpi, sc[TX].per_kpi, sc[LINB].per_kpi,
                           sc[TXB].per_kpi, sc[CHAMP].per_kpi,    below};
        return abandon_round(files, 5, owned, 7, st->rounds + 1, "", t0);
    }
    read_rollbacks(a);
    char champ_why[768];
    int champ_refused = follow_rollbacks(a, champ_why, sizeof champ_why);
    struct stat sb;
    if (champ_refused) {
        snprintf(sc[CHAMP].why, sizeof sc[CHAMP].why, "%.500s", champ_why);
        cc_learn_file_hash(a->out, sc[CHAMP].hash);
    } else if (stat(a->out, &sb) == 0) {
        score(&sc[CHAMP], all_csv, cut, horizon, ls.step_s, &need_linear);
        cc_learn_file_hash(a->out, sc[CHAMP].hash);
        if (!sc[CHAMP].ok && !a->quiet)
            fprintf(stderr,
                    "cellcast learn: the model in service cannot be scored on this "
                    "data (%s): any candidate replaces it\n",
                    sc[CHAMP].why);
    } else
        snprintf(sc[CHAMP].why, sizeof sc[CHAMP].why, "no model in service");
    for (int i = 0; i < CHAMP; i++)
        if (sc[i].ok) {
            cc_learn_file_hash(sc[i].path, sc[i].hash);
            const CcLearnRollback *r = rolled_back(a, sc[i].hash);
            if (r) { /* the same bytes as a model a member rolled back: never again */
                sc[i].ok = 0;
                snprintf(sc[i].why, sizeof sc[i].why, "model %s was rolled back by %s", sc[i].hash,
                         r->member);
            }
        }
    double snaive = NAN, linear_base = NAN;
    for (int i = 0; i < N_SCORED; i++)
        if (sc[i].ok) {
            snaive = sc[i].snaive_mase;
            break;
        }
    for (int i = 0; i < N_SCORED; i++) /* fitted by the first model scored (score()) */
        if (sc[i].per_kpi && isfinite(sc[i].linear_mase)) {
            linear_base = sc[i].linear_mase;
            break;
        }
    int best = -1, publish = 0;
    double crit[N_SCORED];
    json_t *pool = gate_pool(a, sc, N_SCORED, cut, crit);
    const char *decision = gate(sc, crit, CHAMP, a->ls.margin, &best, &publish);
    int pub = best; /* the candidate published: the best, or the kind in service refreshed */
    if (!publish && a->refresh && best >= 0 && sc[CHAMP].ok && !champ_refused) {
        int k = champion_kind(a, sc, CHAMP);
        if (k >= 0 && sc[k].ok && crit[k] <= crit[CHAMP] / (1 - a->ls.margin)) {
            pub = k, publish = 1;
            decision = "published: the kind in service refreshed on the newest rows (--refresh)";
        }
    }
    Refit rf = {.ok = 0};
    if (publish && !a->no_refit) {
        /* a blend candidate: its model's kind refitted, then blended with the blend's weight */
        const char *base = pub == LINB ? sc[LIN].kind : pub == TXB ? sc[TX].kind : sc[pub].kind;
        double weight = pub == LINB || pub == TXB ? a->blend_cand : a->blend;
        if (!a->quiet)
            fprintf(stderr, "cellcast learn: refitting the %s candidate on every row\n",
                    sc[pub].kind);
        if (refit_chosen(a, all_csv, ls.step_s, base, horizon, patch_len, &rf) == 1) {
            const char *files[] = {rf.path, lin_path, tx_path, sn_path, linb_path, txb_path};
            json_t *owned[] = {
                sc[LIN].per_kpi, sc[SEASONAL].per_kpi, sc[TX].per_kpi, sc[LINB].per_kpi,
                sc[TXB].per_kpi, sc[CHAMP].per_kpi,    below,          pool};
            return abandon_round(files, 6, owned, 8, st->rounds + 1, " while refitting", t0);
        }
        /* blended as its candidate was (not when the candidate could not be) */
        if (rf.ok && pub != SEASONAL && weight < 1 && (weight != a->blend || !blend_why[0])) {
            const CcLearnRollback *r = NULL;
            if (blend_file(weight, rf.path, rf.path, rf.why, sizeof rf.why) < 0 ||
                cc_learn_file_hash(rf.path, rf.hash) < 0 || (r = rolled_back(a, rf.hash))) {
                if (r)
                    snprintf(rf.why, sizeof rf.why, "model %s was rolled back by %s", rf.hash,
                             r->member);
                rf.ok = 0;
                unlink(rf.path);
            }
        }
        if (!rf.ok)
            fprintf(stderr,
                    "cellcast learn: refit of the %s candidate: %s; publishing the candidate "
                    "scored\n",
                    sc[pub].kind, rf.why);
    }
    json_t *rec = json_object();
    json_object_set_new(rec, "format", json_string("cellcast-learn-record/1"));
    json_object_set_new(rec, "round", json_integer(st->rounds + 1));
    json_object_set_new(rec, "decision", json_string(decision));
    json_object_set_new(rec, "margin", json_real(a->ls.margin));
    json_object_set_new(rec, "data_first", iso_time(ls.first_ts));
    json_object_set_new(rec, "data_last", iso_time(ls.last_ts));
    json_object_set_new(rec, "data_days", json_real((double)span / 86400));
    json_object_set_new(rec, "holdout_from", iso_time(cut));
    json_object_set_new(rec, "holdout_hours", json_real((double)hold / 3600));
    json_object_set_new(rec, "cells", json_integer(ls.cells));
    json_object_set_new(rec, "step_seconds", json_integer(ls.step_s));
    json_object_set_new(rec, "horizon", json_integer(horizon));
    json_t *kp = json_array();
    for (int f = 0; f < ls.n_kpis; f++)
        json_array_append_new(kp, json_string(cc_learn_kpi(l, f)));
    json_object_set_new(rec, "kpis", kp);
    json_object_set_new(rec, "baselines",
                        json_pack("{s:o,s:o}", "snaive_1d_mase",
                                  isfinite(snaive) ? json_real(snaive) : json_null(), "linear_mase",
                                  isfinite(linear_base) ? json_real(linear_base) : json_null()));
    json_t *cands = json_array();
    for (int i = 0; i < n_kinds; i++)
        json_array_append_new(cands, scored_json(&sc[i]));
    json_object_set_new(rec, "candidates", cands);
    json_object_set_new(rec, "rule", json_string(GATE_RULE));
    json_object_set_new(rec, "gate_pool", pool);
    if (a->blend < 1 || a->blend_cand < 1) { /* --blend, --blend-candidates: the weights */
        json_t *b = json_object();
        if (a->blend < 1)
            json_object_set_new(b, "weight", json_real(a->blend));
        if (a->blend_cand < 1)
            json_object_set_new(b, "candidates_weight", json_real(a->blend_cand));
        if (blend_why[0])
            json_object_set_new(b, "error", json_string(blend_why));
        json_object_set_new(rec, "blend", b);
    }
    if (isfinite(fit.lambda)) { /* the linear-only fit: the penalty chosen on validation */
        json_t *lf = json_object(), *crit = json_object();
        for (int q = 0; q < CC_LEARN_N_LAMBDAS; q++) {
            char key[32];
            snprintf(key, sizeof key, "%g", cc_learn_lambdas[q]);
            json_object_set_new(
                crit, key, isfinite(fit.val_crit[q]) ? json_real(fit.val_crit[q]) : json_null());
        }
        json_object_set_new(lf, "lambda", json_real(fit.lambda));
        json_object_set_new(lf, "val_mase_by_lambda", crit);
        json_object_set_new(lf, "samples", json_integer(fit.n_fit));
        json_object_set_new(lf, "refit_samples", json_integer(fit.n_refit));
        json_object_set_new(lf, "partial_targets", json_integer(fit.partial_targets));
        if (isfinite(fit.mae_end)) { /* --linear-loss mae: the training rows' MAE / scale */
            json_object_set_new(lf, "mae_ridge", json_real(fit.mae_start));
            json_object_set_new(lf, "mae_fitted", json_real(fit.mae_end));
            json_object_set_new(lf, "irls_passes", json_integer(fit.mae_passes));
            json_object_set_new(lf, "irls_coarse_passes", json_integer(fit.mae_coarse_passes));
            json_object_set_new(lf, "mae_val_mase",
                                isfinite(fit.mae_val_crit) ? json_real(fit.mae_val_crit)
                                                           : json_null());
            json_object_set_new(lf, "mae_kept", json_boolean(fit.mae_kept));
        }
        json_object_set_new(rec, "linear_fit", lf);
    }
    json_object_set_new(rec, "below_resolution", below ? below : json_object());
    json_object_set_new(rec, "champion_before", scored_json(&sc[CHAMP]));
    if (a->rb->n) { /* the hashes refused because a member rolled them back */
        json_t *rbs = json_array();
        for (int i = 0; i < a->rb->n; i++)
            json_array_append_new(rbs, json_pack("{s:s, s:s, s:s}", "hash", a->rb->r[i].hash, "to",
                                                 a->rb->r[i].to, "member", a->rb->r[i].member));
        json_object_set_new(rec, "rolled_back", rbs);
    }
    if (best >= 0)
        json_object_set_new(rec, "best", json_string(sc[best].kind));
    json_object_set_new(rec, "shuffled_training", json_boolean(a->shuffle_train));
    json_object_set_new(rec, "wall_s", json_real((double)(cc_now_ns() - t0) / 1e9));
    int rc = 0;
    if (publish) {
        /* the model first, then its record: a reader of the record finds its model */
        char rec_path[4200];
        snprintf(rec_path, sizeof rec_path, "%s.json", a->out);
        json_object_set_new(rec, "published", json_string(sc[pub].kind));
        json_object_set_new(rec, "hash", json_string(rf.ok ? rf.hash : sc[pub].hash));
        if (!a->no_refit) {
            json_t *r = json_object();
            json_object_set_new(r, "of", json_string(sc[pub].hash));
            if (rf.ok) {
                json_object_set_new(r, "hash", json_string(rf.hash));
                json_object_set_new(r, "rows", json_integer(rf.rows));
                if (pub == TX ||
                    pub == TXB) { /* the checkpoint kept, of the same budget as the candidate's */
                    json_object_set_new(r, "steps", json_integer(rf.kept_step));
                    json_object_set_new(r, "candidate_steps", json_integer(rf.candidate_step));
                    json_object_set_new(r, "step_budget", json_integer(a->tx_steps));
                } else
                    json_object_set_new(r, "steps", json_integer(0)); /* closed form */
                json_object_set_new(r, "train_seconds", json_real(rf.seconds));
                if (isfinite(rf.lambda))
                    json_object_set_new(r, "lambda", json_real(rf.lambda));
            } else
                json_object_set_new(r, "error", json_string(rf.why));
            json_object_set_new(rec, "refit", r);
        }
        json_object_set_new(rec, "parent",
                            sc[CHAMP].hash[0] ? json_string(sc[CHAMP].hash) : json_null());
        /* the model replaced is kept: a member's rollback of the new one swaps back to it */
        char prev[4096], prevj[4200];
        state_path(a, "previous.safetensors", prev, sizeof prev);
        snprintf(prevj, sizeof prevj, "%s.json", prev);
        if (sc[CHAMP].hash[0] && !champ_refused &&
            (cc_learn_publish_file(a->out, prev, err, sizeof err) < 0 ||
             (stat(rec_path, &sb) == 0 &&
              cc_learn_publish_file(rec_path, prevj, err, sizeof err) < 0)))
            fprintf(stderr, "cellcast learn: keeping the model replaced as %s: %s\n", prev, err);
        if (cc_learn_publish_file(rf.ok ? rf.path : sc[pub].path, a->out, err, sizeof err) < 0 ||
            save_json_atomic(rec_path, rec, err, sizeof err) < 0) {
            fprintf(stderr, "cellcast learn: publish: %s\n", err);
            rc = -1;
        } else if (a->kafka &&
                   publish_kafka(a, rec, rf.ok ? rf.hash : sc[pub].hash, err, sizeof err) < 0) {
            fprintf(stderr, "cellcast learn: publish to Kafka: %s\n", err);
            rc = -1;
        } else {
            st->published++;
            if (a->on_publish) {
                int s = system(a->on_publish);
                if (s != 0)
                    fprintf(stderr, "cellcast learn: --on-publish exited with status %d\n", s);
            }
        }
    }
    char log_path[4096];
    state_path(a, "rounds.jsonl", log_path, sizeof log_path);
    FILE *lf = fopen(log_path, "a");
    if (lf) {
        json_dumpf(rec, lf, JSON_COMPACT | JSON_SORT_KEYS);
        fputc('\n', lf);
        fclose(lf);
    }
    if (!a->quiet) {
        fprintf(stderr, "cellcast learn: round %d: held-out MASE", st->rounds + 1);
        for (int i = 0; i < N_SCORED; i++)
            if (i >= n_kinds && i < CHAMP)
                continue;
            else if (sc[i].ok)
                fprintf(stderr, " %s %.4f (P10-P90 %.3f)", sc[i].kind, sc[i].mase, sc[i].coverage);
            else
                fprintf(stderr, " %s -", sc[i].kind);
        char sn_txt[32] = "-", lb_txt[64] = "- (skipped: too few windows)";
        if (isfinite(snaive))
            snprintf(sn_txt, sizeof sn_txt, "%.4f", snaive);
        if (isfinite(linear_base))
            snprintf(lb_txt, sizeof lb_txt, "%.4f", linear_base);
        fprintf(stderr, "; seasonal naive %s, eval's linear %s", sn_txt, lb_txt);
        json_t *pool = json_object_get(rec, "gate_pool");
        if (json_integer_value(json_object_get(pool, "rounds")) > 1) {
            fprintf(stderr, "; pooled over %lld rounds (%lld origins):",
                    (long long)json_integer_value(json_object_get(pool, "rounds")),
                    (long long)json_integer_value(json_object_get(pool, "origins")));
            for (int i = 0; i < N_SCORED; i++)
                if (sc[i].ok)
                    fprintf(stderr, " %s %.4f", sc[i].kind, crit[i]);
        }
        fprintf(stderr, "; %s\n", decision);
    }
    json_decref(rec);
    for (int i = 0; i < N_SCORED; i++)
        json_decref(sc[i].per_kpi);
    if (rc == 0) {
        st->rounds++;
        st->last_round = ls.last_ts + ls.step_s;
        if (save_state(a, st, err, sizeof err) < 0) {
            fprintf(stderr, "cellcast learn: %s\n", err);
            rc = -1;
        }
    }
    return rc;
}

/* Files a killed run left half-written beside the output and in the state directory. */
static void remove_leftovers(const LearnArgs *a)
{
    char dir[4096], base[1024];
    const char *slash = strrchr(a->out, '/');
    if (slash) {
        snprintf(dir, sizeof dir, "%.*s", (int)(slash - a->out), a->out);
        snprintf(base, sizeof base, "%s", slash + 1);
    } else {
        snprintf(dir, sizeof dir, ".");
        snprintf(base, sizeof base, "%s", a->out);
    }
    const char *dirs[2] = {dir, a->state_dir};
    for (int d = 0; d < 2; d++) {
        DIR *dp = opendir(dirs[d]);
        if (!dp)
            continue;
        struct dirent *de;
        while ((de = readdir(dp))) {
            if (!strstr(de->d_name, ".tmp."))
                continue;
            if (d == 0 && strncmp(de->d_name, base, strlen(base)))
                continue;
            char p[8192];
            snprintf(p, sizeof p, "%s/%s", dirs[d], de->d_name);
            unlink(p);
        }
        closedir(dp);
    }
}

static int take_field(const CcOpt *opt, const char *value, char *err, size_t errlen)
{
    LearnArgs *a = opt->target;
    if (a->n_fields == (int)(sizeof a->fields / sizeof a->fields[0]))
        return snprintf(err, errlen, "at most 32 --field"), -EINVAL;
    a->fields[a->n_fields++] = value;
    return 0;
}

static int take_silences(const CcOpt *opt, const char *value, char *err, size_t errlen)
{
    LearnArgs *a = opt->target;
    if (a->n_silences == CCT_WINDOWS_MAX_FILES)
        return snprintf(err, errlen, "at most %d --silences", CCT_WINDOWS_MAX_FILES), -EINVAL;
    a->silences[a->n_silences++] = value;
    return 0;
}

static int take_prop(const CcOpt *opt, const char *value, char *err, size_t errlen)
{
    LearnArgs *a = opt->target;
    if (a->n_props == (int)(sizeof a->props / sizeof a->props[0]))
        return snprintf(err, errlen, "at most 64 --kafka-property"), -EINVAL;
    a->props[a->n_props++] = value;
    return 0;
}

static int learn_opts(LearnArgs *a, int argc, char **argv)
{
    cc_learn_default_settings(&a->ls);
    cc_data_default_settings(&a->data);
    a->first_model_h = (double)a->ls.first_model_s / 3600;
    a->transformer_days = (double)a->ls.transformer_s / 86400;
    a->retrain_h = (double)a->ls.retrain_every_s / 3600;
    a->holdout_h = (double)a->ls.holdout_s / 3600;
    a->patch_len = 16, a->d_model = 32, a->n_heads = 4, a->n_layers = 2, a->d_ff = 64;
    a->threads = 1, a->seed = 1, a->poll_s = 60, a->floor_frac = 0.1, a->tx_loss = "mae";
    a->tx_mae_units = "mase", a->linear_loss = "mae", a->tx_linear_loss = "mse";
    a->history_days = 28, a->model_name = "learned", a->blend = 1, a->blend_cand = 1;
    enum { SHOW = CC_OPT_SHOW_DEFAULT };
    CcOpt opts[] = {
        CC_OPTS_HEADING("Input and output:"),
        CC_OPTS_STR("data-dir", &a->data_dir, "DIR",
                    "every *.csv of DIR (long ts,cell_id,<kpis> or wide\n"
                    "<time>,<kpis>: the file name is the cell), re-read each poll\n"
                    "(or --brokers and --topic)"),
        CLI_DATA_OPTS(&a->data),
        CC_OPTS_INT64("step", &a->data.step_seconds, 1, 31622400, "S",
                      "seconds per step (default: detected, the median over\n"
                      "the cells of each cell's step; give it for cells\n"
                      "sampled irregularly)"),
        CC_OPTS_CALL("silences", take_silences, a, "FILE",
                     "cellcastd's silences (silences.file, silences.path or a\n"
                     "saved GET /v1/silences; repeatable): the records in a\n"
                     "maintenance silence's windows are kept out of the\n"
                     "training rows (as missing values)"),
        CC_OPTS_STR("topology", &a->topology, "FILE",
                    "cellcastd's topology.path CSV: the site, region and\n"
                    "sector --silences match on"),
        CC_OPTS_STR("brokers", &a->brokers, "HOSTS",
                    "Kafka bootstrap servers (cellcastd's kafka.brokers; the\n"
                    "embedded broker's kafka.embedded_port address): the KPI\n"
                    "topic's retention is the store, models are published to\n"
                    "the compacted <topic>.models"),
        CC_OPTS_STR("topic", &a->topic, "T", "the KPI topic (kafka.topics' first)"),
        CC_OPTS_STR("models-topic", &a->models_topic, "T",
                    "where models are published (kafka.models_topic;\n"
                    "default <topic>.models)"),
        CC_OPTS_STR("model-name", &a->model_name, "NAME",
                    "the key of the published model (default \"learned\")"),
        CC_OPTS_DBL("history-days", &a->history_days, 0.001, 36500, "D",
                    "how far back the topic is read at start (Kafka's\n"
                    "message times)",
                    .flags = SHOW),
        CC_OPTS_CALL("field", take_field, a, "FIELD=KPI[*SCALE]",
                     "ingest.fields: a message field read as a KPI (repeatable;\n"
                     "none: every numeric field is a KPI named as it arrives)"),
        CC_OPTS_STR("cell-field", &a->cell_field, "NAME", "ingest.cell_field (default cell)"),
        CC_OPTS_STR("time-field", &a->time_field, "NAME", "ingest.time_field (default ts)"),
        CC_OPTS_STR("kpis-field", &a->kpis_field, "NAME", "ingest.kpis_field (default kpis)"),
        CC_OPTS_CALL("kafka-property", take_prop, a, "NAME=VALUE",
                     "a librdkafka property of both clients (kafka.properties;\n"
                     "repeatable)"),
        CC_OPTS_STR("out", &a->out, "MODEL",
                    "the published model (cellcastd's model.path); its\n"
                    "scores and lineage in MODEL.json",
                    .flags = CC_OPT_REQUIRED),
        CC_OPTS_STR("state-dir", &a->state_dir, "DIR",
                    "the learner's own files: training CSV, candidates,\n"
                    "state.json, rounds.jsonl (default: MODEL's directory)"),
        CC_OPTS_STR("on-publish", &a->on_publish, "CMD",
                    "run CMD (sh -c) after each publication, e.g. to reload\n"
                    "cellcastd: \"kill -HUP $(pidof cellcastd)\" or a POST to\n"
                    "/v1/admin/reload; its exit status is logged"),
        CC_OPTS_FLAG("once", &a->once, "one round on what exists, then exit"),
        CC_OPTS_DBL("poll", &a->poll_s, 0.1, 86400, "SEC", "seconds between reads of the input",
                    .flags = SHOW),
        CC_OPTS_DBL("data-days", &a->data_days, 0, 36500, "D",
                    "learn from the first D days of the data only (a replay's\n"
                    "data time; 0 = all)"),
        CC_OPTS_HEADING("Sample and schedule (data time):"),
        CC_OPTS_INT("max-cells", &a->ls.max_cells, 1, 10000000, "N", "cells sampled",
                    .flags = SHOW),
        CC_OPTS_INT("max-points", &a->ls.max_points, 16, 100000000, "N",
                    "newest records kept per cell", .flags = SHOW),
        CC_OPTS_DBL("first-model-hours", &a->first_model_h, 0, 1e6, "H",
                    "data before the first (linear) model", .flags = SHOW),
        CC_OPTS_DBL("transformer-days", &a->transformer_days, 0, 1e5, "D",
                    "data before the first Transformer candidate", .flags = SHOW),
        CC_OPTS_DBL("retrain-hours", &a->retrain_h, 0, 1e6, "H", "data time between rounds",
                    .flags = SHOW),
        CC_OPTS_DBL("holdout-hours", &a->holdout_h, 0, 1e6, "H",
                    "recent data held out for scoring (at most a quarter\n"
                    "of the data)",
                    .flags = SHOW),
        CC_OPTS_DBL("margin", &a->ls.margin, 0, 0.99, "X",
                    "a candidate replaces the model in service when its\n"
                    "MASE is below (1 - X) x the model's",
                    .flags = SHOW),
        CC_OPTS_HEADING("Models:"),
        CC_OPTS_INT("horizon", &a->horizon, 0, CC_MAX_HORIZON, "HZ",
                    "steps forecast (0: a quarter day of steps, at most 24)", .flags = SHOW),
        CC_OPTS_INT("patch-len", &a->patch_len, 1, CC_MAX_PATCH_LEN, "P", "", .flags = SHOW),
        CC_OPTS_DBL("floor-frac", &a->floor_frac, 0, 10, "X",
                    "the linear model's norm.floor: X times the KPI's median sd\n"
                    "(as cellcast train --floor-frac)",
                    .flags = SHOW),
        CC_OPTS_INT("d-model", &a->d_model, 2, CC_MAX_D_MODEL, "D", "Transformer", .flags = SHOW),
        CC_OPTS_INT("n-heads", &a->n_heads, 1, 256, "H", "", .flags = SHOW),
        CC_OPTS_INT("n-layers", &a->n_layers, 1, CC_MAX_LAYERS, "L", "", .flags = SHOW),
        CC_OPTS_INT("d-ff", &a->d_ff, 1, CC_MAX_D_FF, "FF", "", .flags = SHOW),
        CC_OPTS_INT("tx-steps", &a->tx_steps, 0, 100000000, "N",
                    "optimiser steps of the Transformer (0: cellcast train's\n"
                    "default, at least 1000)",
                    .flags = SHOW),
        CC_OPTS_STR("tx-loss", &a->tx_loss, "nll|mae",
                    "the Transformer's loss on the mean: the Gaussian NLL, or\n"
                    "mae (cellcast train --mae-weight 1 --nll-mean 0)",
                    .flags = SHOW),
        CC_OPTS_STR("tx-mae-units", &a->tx_mae_units, "sigma|mase",
                    "--tx-loss mae: the MAE in sigma units or in each channel's\n"
                    "MASE scale (cellcast train --mae-units)",
                    .flags = SHOW),
        CC_OPTS_STR("linear-loss", &a->linear_loss, "mse|mae",
                    "the linear-only candidate's fit: the ridge (mse), or the\n"
                    "ridge refitted by the MAE in MASE units (IRLS)",
                    .flags = SHOW),
        CC_OPTS_STR("tx-linear-loss", &a->tx_linear_loss, "mse|mae",
                    "the Transformer's start: the ridge map (mse) or the\n"
                    "MAE refit (cellcast train --linear-loss)",
                    .flags = SHOW),
        CC_OPTS_INT("threads", &a->threads, 1, 16, "T", "training threads", .flags = SHOW),
        CC_OPTS_DBL("seed", &a->seed, 0, 9007199254740992.0, "X", "", .flags = SHOW),
        CC_OPTS_DBL("blend", &a->blend, 0, 1, "A",
                    "the linear-only and Transformer candidates (and what is\n"
                    "published of them) blended with the seasonal naive: A x\n"
                    "the model + (1 - A) x the value a day before (1: none)",
                    .flags = SHOW),
        CC_OPTS_DBL("blend-candidates", &a->blend_cand, 0, 1, "A",
                    "the linear-only and Transformer candidates blended with\n"
                    "weight A as two more candidates (linear-blend,\n"
                    "transformer-blend), the gate choosing (1: none)",
                    .flags = SHOW),
        CC_OPTS_FLAG("no-refit", &a->no_refit,
                     "publish the candidate scored as it is, not refitted\n"
                     "on every row (held-out ones included) first"),
        CC_OPTS_FLAG("refresh", &a->refresh,
                     "when the gate keeps the model in service, publish its\n"
                     "kind's candidate of the round (refitted) unless it scores\n"
                     "worse than that model by the margin (docs/learning.md)"),
        CC_OPTS_FLAG("shuffle-train", &a->shuffle_train,
                     "(tests, with --once) shuffle the training rows' values\n"
                     "in time: the candidates must then be refused"),
        CC_OPTS_FLAG("quiet", &a->quiet, "no progress output"),
    };
    const CcOptsSpec spec = {
        .prog = "cellcast learn",
        .usage = "cellcast learn (--data-dir DIR | --brokers HOSTS --topic T)\n"
                 "                      --out MODEL.safetensors [--once] [options]",
        .about = "Learns models from KPI history with no model to start from, in data time,\n"
                 "and publishes one only when it beats the model in service (docs/learning.md).",
        CC_OPTS_TABLE(opts),
    };
    int rc = cc_opts_parse(&spec, argc, argv, NULL);
    if (rc)
        return CLI_OPTS_EXIT(rc);
    if (!!a->data_dir == !!(a->brokers || a->topic) ||
        (!a->data_dir && !(a->brokers && a->topic))) {
        fprintf(stderr, "cellcast learn: give --data-dir DIR, or --brokers and --topic\n");
        return 2;
    }
    if (a->blend < 1 && a->blend_cand < 1) {
        fprintf(stderr, "cellcast learn: --blend and --blend-candidates: one or the other\n");
        return 2;
    }
#ifndef CCT_HAVE_KAFKA
    if (a->brokers) {
        fprintf(stderr, "cellcast learn: built without librdkafka: --data-dir only\n");
        return 2;
    }
#endif
    if (!a->model_name[0] || strpbrk(a->model_name, "#/")) { /* chunk keys; other records */
        fprintf(stderr, "cellcast learn: --model-name must be non-empty, without '#' or '/'\n");
        return 2;
    }
    if (strcmp(a->tx_loss, "nll") && strcmp(a->tx_loss, "mae")) {
        fprintf(stderr, "cellcast learn: --tx-loss must be nll or mae\n");
        return 2;
    }
    if ((strcmp(a->linear_loss, "mse") && strcmp(a->linear_loss, "mae")) ||
        (strcmp(a->tx_linear_loss, "mse") && strcmp(a->tx_linear_loss, "mae"))) {
        fprintf(stderr, "cellcast learn: --linear-loss and --tx-linear-loss must be mse or mae\n");
        return 2;
    }
    if (a->shuffle_train && !a->once) {
        fprintf(stderr, "cellcast learn: --shuffle-train needs --once\n");
        return 2;
    }
    a->ls.first_model_s = (int64_t)(a->first_model_h * 3600);
    a->ls.transformer_s = (int64_t)(a->transformer_days * 86400);
    a->ls.retrain_every_s = (int64_t)(a->retrain_h * 3600);
    a->ls.holdout_s = (int64_t)(a->holdout_h * 3600);
    return CLI_RUN;
}

/* The store from the input, cut to --data-days. 0 or -1. */
static int read_input(const LearnArgs *a, CcLearn *l)
{
#ifdef CCT_HAVE_KAFKA
    if (a->kafka) { /* the store grows with what arrives: the first read catches up, later
                     * ones wait up to --poll for new records */
        static int first = 1;
        char err[512];
        /* the wait for new records in slices, so that a SIGTERM is seen within one */
        int64_t n = 0, until = cc_now_ns() + (int64_t)(a->poll_s * 1e9);
        do {
            int64_t left_ms = (until - cc_now_ns()) / 1000000;
            n = cct_learn_kafka_read(a->kafka, l,
                                     first           ? 60000
                                     : left_ms > 250 ? 250
                                                     : (int)(left_ms > 0 ? left_ms : 0),
                                     err, sizeof err);
        } while (n == 0 && !first && !g_learn_stop && cc_now_ns() < until);
        if (n < 0) {
            fprintf(stderr, "cellcast learn: %s\n", err);
            return -1;
        }
        if (!a->quiet && (first || n > 0)) {
            CctLearnKafkaStats ks;
            cct_learn_kafka_stats(a->kafka, &ks);
            fprintf(stderr,
                    "cellcast learn: %s: %lld new records (%llu messages, %llu records "
                    "refused by the decoder, %llu beyond the sample)\n",
                    a->topic, (long long)n, (unsigned long long)ks.messages,
                    (unsigned long long)ks.refused_records, (unsigned long long)ks.dropped_records);
        }
        first = 0;
        goto cut;
    }
#endif
    cc_learn_clear(l);
    if (read_csv_dir(a, l) < 0)
        return -1;
#ifdef CCT_HAVE_KAFKA
cut:
#endif
    if (a->data_days > 0) {
        CcLearnStats st;
        cc_learn_stats(l, &st);
        cc_learn_truncate(l, st.first_ts + (int64_t)(a->data_days * 86400));
    }
    if (a->n_silences) { /* read again each round: the windows the files hold now */
        char err[1024];
        int64_t n =
            cct_windows_exclude(l, a->silences, a->n_silences, a->topology, err, sizeof err);
        if (n < 0) {
            fprintf(stderr, "cellcast learn: %s\n", err);
            return -1;
        }
        if (!a->quiet)
            fprintf(stderr,
                    "cellcast learn: %lld record(s) in maintenance windows kept out of the "
                    "training rows\n",
                    (long long)n);
    }
    return 0;
}

int cmd_learn(int argc, char **argv)
{
    Rollbacks rb = {0};
    LearnArgs a = {.rb = &rb};
    int rc = learn_opts(&a, argc, argv);
    if (rc != CLI_RUN)
        return rc;
    char dirbuf[4096];
    if (!a.state_dir) {
        const char *slash = strrchr(a.out, '/');
        snprintf(dirbuf, sizeof dirbuf, "%.*s", slash ? (int)(slash - a.out) : 1,
                 slash ? a.out : ".");
        a.state_dir = dirbuf;
    }
    if (mkdir(a.state_dir, 0755) && errno != EEXIST) {
        fprintf(stderr, "cellcast learn: %s: %s\n", a.state_dir, strerror(errno));
        return 1;
    }
    remove_leftovers(&a);
    signal(SIGTERM, on_stop);
    signal(SIGINT, on_stop);
    CcLearn *l = NULL;
    if (cc_learn_open(&l, &a.ls) < 0) {
        fprintf(stderr, "cellcast learn: bad settings or out of memory\n");
        return 1;
    }
    LearnState st;
    load_state(&a, &st);
#ifdef CCT_HAVE_KAFKA
    if (a.brokers) {
        char err[512];
        CctLearnKafkaSettings ks = {
            .brokers = a.brokers,
            .topic = a.topic,
            .models_topic = a.models_topic,
            .history_s = (int64_t)(a.history_days * 86400),
            .fields = a.fields,
            .n_fields = a.n_fields,
            .cell_field = a.cell_field,
            .ts_field = a.time_field,
            .kpis_field = a.kpis_field,
            .props = a.props,
            .n_props = a.n_props,
            .stop = &g_learn_stop,
        };
        if (cct_learn_kafka_open(&a.kafka, &ks, err, sizeof err) < 0) {
            fprintf(stderr, "cellcast learn: %s\n", err);
            cc_learn_close(&l);
            return 1;
        }
    }
#endif
    int ret = 0;
    do {
        if (read_input(&a, l) < 0) {
            ret = 1;
            break;
        }
        if (g_learn_stop)
            break;
        if (a.kafka) { /* a member's rollback is followed at once, not at the next round */
            char why[768];
            read_rollbacks(&a);
            follow_rollbacks(&a, why, sizeof why);
        }
        int r = learn_round(&a, l, &st);
        if (r == 2)
            break;
        if (r < 0 && (a.once || g_learn_stop)) {
            ret = 1;
            break;
        }
        if (a.once)
            break;
        for (double w = 0; !a.kafka && w < a.poll_s && !g_learn_stop; w += 0.1)
            nanosleep(&(struct timespec){0, 100000000}, NULL);
    } while (!g_learn_stop);
#ifdef CCT_HAVE_KAFKA
    cct_learn_kafka_close(&a.kafka);
#endif
    cc_learn_close(&l);
    free(rb.r);
    return ret;
}
