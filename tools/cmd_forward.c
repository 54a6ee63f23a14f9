/*
 * cmd_forward.c — `cellcast forward`: runs the engine's incremental path (the daemon's
 * code) over the rows of a CSV of one cell, step by step, and prints the head's output
 * (y, mu, sigma) and the served mean and sd ([F][Hz] flat, KPI units, after calibration).
 * Input: header `ts,<the model's KPI names>`, unix-second timestamps that are consecutive
 * multiples of the model's step, raw values.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cc_engine.h"
#include "cli.h"

int cli_opt_kv(const CcOpt *opt, const char *value, char *err, size_t errlen)
{
    enum CcKvType *kv = opt->target;
    if (!strcmp(value, "f32"))
        *kv = CC_KV_F32;
    else if (!strcmp(value, "f16"))
        *kv = CC_KV_F16;
    else if (!strcmp(value, "bf16"))
        *kv = CC_KV_BF16;
    else {
        snprintf(err, errlen, "--%s must be f32, f16 or bf16", opt->name);
        return -EINVAL;
    }
    return 0;
}

static void print_row(int64_t ts, const CcForecast *fc)
{
    int F = fc->n_features, n = F * fc->horizon * 2;
    printf("{\"ts\": %lld, \"y\": [", (long long)ts);
    for (int i = 0; i < n; i++)
        printf(i ? ", %.9g" : "%.9g", fc->y[i]);
    printf("], \"mu\": [");
    for (int f = 0; f < F; f++)
        printf(f ? ", %.9g" : "%.9g", fc->mu[f]);
    printf("], \"sigma\": [");
    for (int f = 0; f < F; f++)
        printf(f ? ", %.9g" : "%.9g", fc->sigma[f]);
    /* the served numbers, after calibration: what the daemon answers with */
    for (int which = 0; which < 2; which++) {
        printf(which ? "], \"sd\": [" : "], \"mean\": [");
        for (int f = 0; f < F; f++)
            for (int k = 0; k < fc->horizon; k++) {
                double mean, sd;
                cc_forecast_point(fc, f, k, &mean, &sd);
                printf(f || k ? ", %.9g" : "%.9g", which ? sd : mean);
            }
    }
    printf("]}\n");
}

/* Splits a line in place on commas; strips CR/LF and surrounding blanks. */
static int split_fields(char *line, char **fields, int max)
{
    int n = 0;
    line[strcspn(line, "\r\n")] = 0;
    for (char *p = line;; p++) {
        char *end = strchr(p, ',');
        if (n == max)
            return -1;
        while (*p == ' ' || *p == '\t')
            p++;
        fields[n++] = p;
        if (!end)
            break;
        *end = 0;
        p = end;
    }
    for (int i = 0; i < n; i++) {
        size_t l = strlen(fields[i]);
        while (l && (fields[i][l - 1] == ' ' || fields[i][l - 1] == '\t'))
            fields[i][--l] = 0;
    }
    return n;
}

/* The header `ts,<KPI names>`: col_of[f] gets the column of feature f. 0 or -1 (reported). */
static int read_header(const CcHparams *hp, const char *input, char *line, int *col_of)
{
    const int F = hp->n_features;
    char *fields[CC_MAX_FEATURES + 2];
    int nf = split_fields(line, fields, CC_MAX_FEATURES + 2);
    if (nf < 0 || nf != F + 1) {
        fprintf(stderr, "cellcast forward: %s:1: header has %d columns, expected ts + %d KPIs\n",
                input, nf < 0 ? CC_MAX_FEATURES + 2 : nf, F);
        return -1;
    }
    if (strcmp(fields[0], "ts")) {
        fprintf(stderr, "cellcast forward: %s:1: first column must be 'ts', got '%s'\n", input,
                fields[0]);
        return -1;
    }
    for (int f = 0; f < F; f++)
        col_of[f] = -1;
    for (int i = 1; i < nf; i++) {
        int f = cc_hparams_feature_index(hp, fields[i]);
        if (f < 0) {
            fprintf(stderr, "cellcast forward: %s:1: unknown column '%s' (model KPIs:", input,
                    fields[i]);
            for (int g = 0; g < F; g++)
                fprintf(stderr, " %s", hp->features[g]);
            fprintf(stderr, ")\n");
            return -1;
        }
        if (col_of[f] >= 0) {
            fprintf(stderr, "cellcast forward: %s:1: column '%s' appears twice\n", input,
                    fields[i]);
            return -1;
        }
        col_of[f] = i;
    }
    return 0;
}

/* One data row: its step (which must follow prev, unless prev < 0) and values in model
 * order. 0 or -1 (reported). */
static int parse_row(const CcHparams *hp, const char *input, long long lineno, char *line,
                     const int *col_of, int64_t prev, int64_t *step, float *values)
{
    const int F = hp->n_features;
    char *fields[CC_MAX_FEATURES + 2], *endp;
    int n = split_fields(line, fields, CC_MAX_FEATURES + 2);
    if (n != F + 1) {
        fprintf(stderr, "cellcast forward: %s:%lld: %d fields, expected %d\n", input, lineno,
                n < 0 ? CC_MAX_FEATURES + 2 : n, F + 1);
        return -1;
    }
    errno = 0;
    long long ts = strtoll(fields[0], &endp, 10);
    if (errno || endp == fields[0] || *endp || ts < 0) {
        fprintf(stderr, "cellcast forward: %s:%lld: bad timestamp '%s' (unix seconds)\n", input,
                lineno, fields[0]);
        return -1;
    }
    if (ts % hp->step_seconds) {
        fprintf(stderr,
                "cellcast forward: %s:%lld: timestamp %lld is not a multiple of the "
                "model's step (%lld s)\n",
                input, lineno, ts, (long long)hp->step_seconds);
        return -1;
    }
    *step = ts / hp->step_seconds;
    if (prev >= 0 && *step != prev + 1) {
        fprintf(stderr,
                "cellcast forward: %s:%lld: timestamp %lld does not follow %lld by one step "
                "(%lld s)\n",
                input, lineno, ts, (long long)(prev * hp->step_seconds),
                (long long)hp->step_seconds);
        return -1;
    }
    for (int f = 0; f < F; f++) {
        const char *v = fields[col_of[f]];
        double d = strtod(v, &endp);
        if (endp == v || *endp || !isfinite(d) || fabs(d) > 3.4e38) {
            fprintf(stderr,
                    "cellcast forward: %s:%lld: column '%s': '%s' is not a finite "
                    "number\n",
                    input, lineno, hp->features[f], v);
            return -1;
        }
        values[f] = (float)d;
    }
    return 0;
}

/* Steps the cell through every row of in (after the header); prints with all. The step of
 * the last row goes to *last (-1: no row). 0 or -1 (reported). */
static int run_rows(CcEngine *e, CcCell *cell, const CcHparams *hp, const char *input, FILE *in,
                    const int *col_of, int all, int64_t *last)
{
    char *line = NULL;
    size_t cap = 0;
    float values[CC_MAX_FEATURES];
    int64_t prev = -1, lineno = 1, step;
    int rc = -1;
    CcForecast fc;
    while (getline(&line, &cap, in) >= 0) {
        lineno++;
        if (line[strspn(line, " \t\r\n")] == 0)
            continue; /* blank line */
        if (parse_row(hp, input, (long long)lineno, line, col_of, prev, &step, values))
            goto end;
        CcStepInput si = {cell, step, values};
        int st = 0;
        if (cc_engine_step(e, &si, 1, &st) < 0 || st < 0) {
            fprintf(stderr, "cellcast forward: %s:%lld: engine refused the step (%s)\n", input,
                    (long long)lineno, strerror(-st));
            goto end;
        }
        prev = step;
        cc_cell_forecast(cell, &fc);
        if (all && fc.valid)
            print_row(step * hp->step_seconds, &fc);
    }
    rc = 0;
end:
    *last = prev;
    free(line);
    return rc;
}

int cmd_forward(int argc, char **argv)
{
    const char *model_path = NULL, *input = NULL;
    int all = 0, ret = 1;
    char err[512], *line = NULL;
    size_t cap = 0;
    CcModel *m = NULL;
    CcEngine *e = NULL;
    CcCell *cell = NULL;
    FILE *in = NULL;
    CcEngineSettings s;
    cc_engine_default_settings(&s);
    CcOpt opts[] = {
        CC_OPTS_STR("model", &model_path, "FILE", "the model", .short_name = 'm',
                    .flags = CC_OPT_REQUIRED),
        CC_OPTS_STR("input", &input, "X.csv", "the cell's rows (see below)", .short_name = 'i',
                    .flags = CC_OPT_REQUIRED),
        CC_OPTS_FLAG("all", &all, "a line for every row that has a forecast", .short_name = 'a'),
        CC_OPTS_CALL("kv", cli_opt_kv, &s.kv_type, "f32|f16|bf16", "KV cache type (default f32)",
                     .short_name = 'k'),
        CC_OPTS_FLAG("no-cache", &s.no_cache, "recompute every step without the KV caches",
                     .short_name = 'n'),
    };
    const CcOptsSpec spec = {
        .prog = "cellcast forward",
        .usage = "cellcast forward --model FILE --input X.csv [--all] [--kv f32|f16|bf16]\n"
                 "                        [--no-cache]",
        .epilog =
            "X.csv: header `ts,<KPI names in the model's order>`, unix-second timestamps\n"
            "(consecutive multiples of the model's step_seconds), raw KPI values.\n"
            "Prints one JSON line {\"ts\", \"y\", \"mu\", \"sigma\", \"mean\", \"sd\"} for the\n"
            "last row, or with --all for every row that has a forecast; y is the head output\n"
            "in [F][Hz][2] order (normalised mean, log-sigma; tx/3: the mean includes the\n"
            "linear path), mu/sigma the normalisation per KPI, mean/sd the served forecast\n"
            "in [F][Hz] order, KPI units, sd with the model's calibration applied.\n",
        CC_OPTS_TABLE(opts),
    };
    int rc = cc_opts_parse(&spec, argc, argv, NULL);
    if (rc)
        return CLI_OPTS_EXIT(rc);
    if (cc_model_open_file(&m, model_path, err, sizeof err) < 0) {
        fprintf(stderr, "cellcast forward: %s: %s\n", model_path, err);
        goto end;
    }
    const CcHparams *hp = &m->hp;
    if (cc_engine_open(&e, m, &s, NULL, 0) < 0 || cc_cell_open(&cell, e) < 0) {
        fprintf(stderr, "cellcast forward: out of memory\n");
        goto end;
    }
    if (!(in = fopen(input, "r"))) {
        fprintf(stderr, "cellcast forward: %s: %s\n", input, strerror(errno));
        goto end;
    }
    int col_of[CC_MAX_FEATURES]; /* feature f is in column col_of[f] */
    if (getline(&line, &cap, in) < 0) {
        fprintf(stderr, "cellcast forward: %s: empty file, expected a header\n", input);
        goto end;
    }
    int64_t last;
    if (read_header(hp, input, line, col_of) ||
        run_rows(e, cell, hp, input, in, col_of, all, &last))
        goto end;
    if (last < 0) {
        fprintf(stderr, "cellcast forward: %s: no data rows\n", input);
        goto end;
    }
    if (!all) {
        CcForecast fc;
        cc_cell_forecast(cell, &fc);
        if (!fc.valid) {
            fprintf(stderr,
                    "cellcast forward: %s: no forecast yet: the cell needs one complete patch "
                    "(%d steps aligned to the patch grid)\n",
                    input, hp->patch_len);
            goto end;
        }
        print_row(last * hp->step_seconds, &fc);
    }
    ret = 0;
end:
    free(line);
    if (in)
        fclose(in);
    cc_cell_close(&cell);
    cc_engine_close(&e);
    cc_model_close(&m);
    return ret;
}
