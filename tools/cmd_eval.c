/* cmd_eval.c — `cellcast eval`: rolling-origin evaluation of a model on held-out steps
 * against baselines (tools/eval.c), printed as a table or JSON. */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "eval.h"

/* The index of value in names (an enumeration's order), or -EINVAL with msg in err. */
static int opt_choice(const char *value, const char *const *names, int n, const char *msg,
                      char *err, size_t errlen)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(value, names[i]))
            return i;
    snprintf(err, errlen, "%s", msg);
    return -EINVAL;
}

/* CLI_DATA_OPTS (cli.h) */
int cli_opt_data_format(const CcOpt *opt, const char *value, char *err, size_t errlen)
{
    static const char *const names[] = {"auto", "long", "wide"}; /* enum CcDataFormat order */
    int v = opt_choice(value, names, 3, "--format must be long, wide or auto", err, errlen);
    if (v >= 0)
        *(enum CcDataFormat *)opt->target = (enum CcDataFormat)v;
    return v < 0 ? v : 0;
}

int cli_opt_time_index(const CcOpt *opt, const char *value, char *err, size_t errlen)
{
    static const char *const names[] = {"auto", "yes", "no"}; /* enum CcTimeIndex order */
    int v = opt_choice(value, names, 3, "--time-index must be auto, yes or no", err, errlen);
    if (v >= 0)
        *(enum CcTimeIndex *)opt->target = (enum CcTimeIndex)v;
    return v < 0 ? v : 0;
}

int cli_opt_delimiter(const CcOpt *opt, const char *value, char *err, size_t errlen)
{
    char d = !strcmp(value, "tab") || !strcmp(value, "\\t") ? '\t' : value[0];
    if (!d || (strlen(value) != 1 && d != '\t') || d == '"' || d == '\r' || d == '\n') {
        snprintf(err, errlen, "--delimiter must be one character (or tab), not a quote");
        return -EINVAL;
    }
    *(char *)opt->target = d;
    return 0;
}

static int opt_protocol(const CcOpt *opt, const char *value, char *err, size_t errlen)
{
    enum CctEvalProtocol *p = opt->target;
    if (!strcmp(value, "ett"))
        *p = CCT_EVAL_ETT;
    else if (!strcmp(value, "barcelona"))
        *p = CCT_EVAL_BARCELONA;
    else {
        snprintf(err, errlen, "--protocol must be ett or barcelona");
        return -EINVAL;
    }
    return 0;
}

typedef struct EvalArgs {
    CctEvalSettings s;
    const char *json_path;
    int json, per_step, per_series;
    int adapt, no_adapt; /* model_adaptive is scored unless --no-adapt (issue 31) */
} EvalArgs;

/* Parses the command line into *a: CLI_RUN, or the exit code (after --help or an error). */
static int eval_opts(EvalArgs *a, int argc, char **argv)
{
    CctEvalSettings *s = &a->s;
    cct_eval_default_settings(s);
    a->adapt = a->no_adapt = 0;
    CcOpt opts[] = {
        CC_OPTS_STR("model", &s->model_path, "FILE", "model (without: baselines only)"),
        CC_OPTS_STR("data", &s->data_path, "FILE",
                    "CSV history (long ts,cell_id,<kpis> or wide <time>,<kpis>)",
                    .flags = CC_OPT_REQUIRED),
        CC_OPTS_STR("test", &s->test_path, "FILE",
                    "CSV that continues --data in time; its rows are the test range"),
        CC_OPTS_STR("split", &s->split, "SPEC",
                    "train/val/test split of each series: \"a,b\" fractions\n"
                    "(default 0.7,0.1) or rows:A-B,C-D,E-F; test = third range"),
        CC_OPTS_STR("from", &s->from, "TIME",
                    "test range starts at TIME (unix s or ISO-8601), ends at the end"),
        CC_OPTS_INT("horizon", &s->horizon, 1, 100000000, "K",
                    "steps scored per origin (default: model horizon; ett 96;\nbarcelona 1)"),
        CC_OPTS_STR("kpis", &s->kpis, "LIST",
                    "KPIs to score (default all; barcelona the 5 targets)"),
        CC_OPTS_CALL("protocol", opt_protocol, &s->protocol, "P",
                     "ett: ETT standard protocol (ETTh rows 0-8640 train, test\n"
                     "11520-14400; ETTm x4; train-slice z-scoring, MSE/MAE\n"
                     "standardised);\n"
                     "barcelona: --data SITE.csv, --test SITE_test.csv (default),\n"
                     "NRMSE in raw units averaged over rnti_count,rb_down,rb_up,\n"
                     "down,up"),
        CC_OPTS_INT("window", &s->window, 1, 100000000, "W",
                    "window-mean baseline length (default model M, else 336)"),
        CC_OPTS_INT("linear-window", &s->linear_window, 0, 4096, "L",
                    "inputs of the linear baseline (NLinear, closed-form ridge on the\n"
                    "rows before the test range); cut to those rows; 0 = off",
                    .flags = CC_OPT_SHOW_DEFAULT),
        CC_OPTS_DBL("linear-lambda", &s->linear_lambda, 0, 1e6, "X",
                    "its ridge penalty, relative to the inputs' mean square\n"
                    "(default: per KPI the best of 1e-4 ... 1 on the last 15 % of\n"
                    "those rows, then refitted on all)"),
        CC_OPTS_STR("features", &s->features, "LIST",
                    "data columns to load (default: the model's features)"),
        CLI_DATA_OPTS(&s->data),
        CC_OPTS_INT64("step", &s->step, 1, 100000000, "S",
                      "seconds per step (default: the model's, else detected)"),
        CC_OPTS_INT("threads", &s->threads, 1, 100000000, "N", "engine threads over series",
                    .flags = CC_OPT_SHOW_DEFAULT),
        CC_OPTS_FLAG("adapt", &a->adapt,
                     "also score the intervals of online calibration (the daemon's\n"
                     "forecast.interval_adapt): method model_adaptive (the default)"),
        CC_OPTS_FLAG("no-adapt", &a->no_adapt,
                     "leave model_adaptive out (the file's static intervals only)"),
        CC_OPTS_DBL("adapt-rate", &s->adapt_rate, 0, 1, "X",
                    "its rate (implies --adapt; default min(0.05, 4/horizon))"),
        CC_OPTS_FLAG("adapt-per-step", &s->adapt_per_step,
                     "its scales per KPI and horizon step (default: per KPI)"),
        CC_OPTS_FLAG("per-step", &a->per_step, "print every horizon step (default: a selection)"),
        CC_OPTS_STR("series", &s->series, "ID",
                    "score this series (cell id) alone: its own MASE scale and its\n"
                    "own `linear` fit"),
        CC_OPTS_FLAG("per-series", &a->per_series,
                     "after the pooled result, every series alone (as --series):\n"
                     "per series and KPI the MASE of each method, `linear` fitted\n"
                     "on that series (JSON: \"per_series\")"),
        CC_OPTS_FLAG("full-history", &s->full_history, "stream each series from its first row"),
        CC_OPTS_FLAG("json", &a->json, "JSON on stdout instead of the table"),
        CC_OPTS_STR("json-out", &a->json_path, "FILE", "also write the JSON to FILE"),
    };
    const CcOptsSpec spec = {
        .prog = "cellcast eval",
        .usage = "cellcast eval [--model M.safetensors] --data D.csv [options]",
        .about = "Rolling-origin evaluation on held-out steps: the engine's forecasts and the\n"
                 "naive, seasonal-naive (1 day, 1 week), window-mean and linear (NLinear)\n"
                 "baselines, scored on the same windows (MAE, RMSE, MSE, NRMSE, MASE, P10-P90\n"
                 "coverage per KPI and step).",
        CC_OPTS_TABLE(opts),
    };
    a->json = a->per_step = a->per_series = 0;
    a->json_path = NULL;
    int rc = cc_opts_parse(&spec, argc, argv, NULL);
    if (rc)
        return CLI_OPTS_EXIT(rc);
    if (s->protocol != CCT_EVAL_ROLLING && (s->split || s->from)) {
        fprintf(stderr, "cellcast eval: --protocol fixes the split; drop --split/--from\n");
        return 2;
    }
    if (a->no_adapt && (a->adapt || s->adapt_rate > 0 || s->adapt_per_step)) {
        fprintf(stderr, "cellcast eval: --no-adapt with --adapt, --adapt-rate or "
                        "--adapt-per-step\n");
        return 2;
    }
    /* The daemon serves online-calibrated intervals by default (forecast.interval_adapt,
     * shared/spec/model.md): eval scores them beside the static ones unless told not to. */
    s->adapt = !a->no_adapt && s->model_path; /* baselines alone have no intervals */
    if (a->per_series && s->series) {
        fprintf(stderr, "cellcast eval: give --series or --per-series, not both\n");
        return 2;
    }
    if (s->split && s->from) {
        fprintf(stderr, "cellcast eval: give --split or --from, not both\n");
        return 2;
    }
    return CLI_RUN;
}

/* The MASE of method m for KPI k in an eval's JSON (NaN when absent). */
static double mase_of(const json_t *root, const char *m, const char *k)
{
    json_t *v = json_object_get(
        json_object_get(json_object_get(json_object_get(root, "methods"), m), "per_kpi"), k);
    json_t *x = json_object_get(v, "mase");
    return json_is_number(x) ? json_number_value(x) : NAN;
}

static void print_mase(FILE *out, double x)
{
    if (isfinite(x))
        fprintf(out, " %10.4f", x);
    else
        fprintf(out, " %10s", "-");
}

/* --per-series: every series of the pooled run evaluated alone (settings.series), one row per
 * series and KPI (MASE of each method; the model's adaptive P10-P90 coverage), and the
 * series' JSON appended to `all` (may be NULL). 0 or -1 after a message. */
static int per_series(const EvalArgs *a, const CctEval *pooled, json_t *all, FILE *out)
{
    static const char *const shown[] = {"model", "naive", "snaive_1d", "linear"};
    const CcDataset *ds = cct_eval_dataset(pooled);
    if (out)
        fprintf(out,
                "\nper series (each alone: its own MASE scale and `linear` fit), MASE over the "
                "horizon\n%-24s %-16s %10s %10s %10s %10s %10s\n",
                "series", "kpi", "model", "naive", "snaive_1d", "linear", "cover80");
    for (int i = 0; i < ds->n_series; i++) {
        EvalArgs one = *a;
        one.s.series = ds->series[i].cell_id;
        char err[1024];
        CctEval *e = NULL;
        json_t *root = NULL;
        if (cct_eval_open(&e, &one.s, err, sizeof err) || !(root = cct_eval_json(e))) {
            fprintf(stderr, "cellcast eval: series %s: %s\n", one.s.series,
                    e ? "out of memory" : err);
            cct_eval_close(&e);
            return -1;
        }
        json_object_set_new(root, "series_id", json_string(one.s.series));
        json_t *kpis = json_object_get(root, "kpis");
        for (size_t q = 0; out && q < json_array_size(kpis); q++) {
            const char *k = json_string_value(json_array_get(kpis, q));
            fprintf(out, "%-24s %-16s", one.s.series, k);
            for (size_t m = 0; m < sizeof shown / sizeof *shown; m++)
                print_mase(out, mase_of(root, shown[m], k));
            json_t *c = json_object_get(
                json_object_get(json_object_get(json_object_get(json_object_get(root, "methods"),
                                                                "model_adaptive"),
                                                "per_kpi"),
                                k),
                "coverage80");
            print_mase(out, json_is_number(c) ? json_number_value(c) : NAN);
            fputc('\n', out);
        }
        if (all)
            json_array_append(all, root);
        json_decref(root);
        cct_eval_close(&e);
    }
    return 0;
}

int cmd_eval(int argc, char **argv)
{
    EvalArgs a;
    int rc = eval_opts(&a, argc, argv), ret = 1;
    if (rc != CLI_RUN)
        return rc;
    char err[1024];
    CctEval *e = NULL;
    json_t *root = NULL, *series_json = NULL;
    if (cct_eval_open(&e, &a.s, err, sizeof err)) {
        fprintf(stderr, "cellcast eval: %s\n", err);
        goto done;
    }
    if (*cct_eval_warnings(e))
        fprintf(stderr, "cellcast eval: warning: %s\n", cct_eval_warnings(e));
    if (a.json || a.json_path) {
        if (!(root = cct_eval_json(e)) ||
            (a.per_series && (!(series_json = json_array()) ||
                              json_object_set_new(root, "per_series", series_json)))) {
            fprintf(stderr, "cellcast eval: out of memory\n");
            goto done;
        }
    }
    if (!a.json)
        cct_eval_print(e, a.per_step, stdout);
    if (a.per_series && per_series(&a, e, series_json, a.json ? NULL : stdout))
        goto done;
    if (a.json_path && json_dump_file(root, a.json_path, JSON_INDENT(1) | JSON_REAL_PRECISION(8))) {
        fprintf(stderr, "cellcast eval: cannot write %s\n", a.json_path);
        goto done;
    }
    if (a.json) {
        json_dumpf(root, stdout, JSON_INDENT(1) | JSON_REAL_PRECISION(8));
        fputc('\n', stdout);
    }
    ret = 0;
done:
    json_decref(root);
    cct_eval_close(&e);
    return ret;
}
