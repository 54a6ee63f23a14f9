/* cmd_train.c — `cellcast train`: CSV history → a cellcast-tx/2 model (safetensors).
 *
 * Loads the data with lib/cc_data (its missing-data policy: imputed inputs, masked
 * targets), splits every series by time into train / validation / test rows, trains with
 * lib/cc_train (Adam, warmup then decay, dropout, clipping, 2 threads), validates every
 * --eval-every steps, keeps the best checkpoint (lowest validation NLL) in --out, the
 * latest optimiser state in --out.optim (for --resume), and stops early after --patience
 * evaluations without improvement, at --max-minutes, or on Ctrl-C. */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cc_config.h"
#include "cc_data.h"
#include "cc_train.h"
#include "cli.h"

#define ETT_SPLIT "rows:0-8640,8640-11520,11520-14400"

static volatile sig_atomic_t g_stop;
static void on_sigint(int sig)
{
    (void)sig;
    g_stop = 1;
}

static void fmt_dur(char *buf, size_t n, double s)
{
    if (!isfinite(s) || s < 0)
        snprintf(buf, n, "?");
    else if (s < 60)
        snprintf(buf, n, "%.0fs", s);
    else if (s < 3600)
        snprintf(buf, n, "%dm%02ds", (int)s / 60, (int)s % 60);
    else
        snprintf(buf, n, "%dh%02dm", (int)s / 3600, (int)s % 3600 / 60);
}

/* The command line, with the defaults of cc_hparams_default and cc_train_default_settings. */
typedef struct TrainArgs {
    const char *data_path, *out_path, *features, *format, *time_format, *split, *protocol;
    const char *schedule, *resume, *name, *select;
    double val_frac, dropout, lr, wd, clip, max_minutes, step_s, ema, steps_d, seed_d;
    int P, N, M, D, H, L, FF, HZ, tz, warmup, batch, group, epochs, threads;
    int patience, eval_every, val_windows, adamw, quiet;
    int hz_given; ///< --horizon was given (the ETT protocol's default is 96)
} TrainArgs;

/* Parses the command line into *a: 0, or the exit code (after --help or an error). */
static int train_opts(TrainArgs *a, int argc, char **argv)
{
    CcHparams hp;
    CcTrainSettings ts;
    cc_hparams_default(&hp);
    cc_train_default_settings(&ts);
    *a = (TrainArgs){.format = "auto", .schedule = "invsqrt", .name = "cellcast",
                     .select = "nll", .val_frac = -1, .wd = -1, .epochs = 20, .patience = 6,
                     .P = hp.patch_len, .N = hp.n_patches, .M = hp.norm_window, .D = hp.d_model,
                     .H = hp.n_heads, .L = hp.n_layers, .FF = hp.d_ff, .HZ = hp.horizon,
                     .dropout = ts.dropout, .lr = ts.adam.lr, .clip = ts.adam.clip,
                     .warmup = ts.adam.warmup, .batch = ts.batch, .group = ts.group,
                     .threads = ts.n_threads, .val_windows = ts.max_val_windows,
                     .seed_d = (double)ts.seed};
    enum { SHOW = CC_OPT_SHOW_DEFAULT };
    CcOpt opts[] = {
        CC_OPTS_HEADING("Data:"),
        CC_OPTS_STR("data", &a->data_path, "FILE",
                    "CSV, long (ts,cell_id,<kpis>) or wide (<time>,<kpis>)",
                    .flags = CC_OPT_REQUIRED),
        CC_OPTS_STR("out", &a->out_path, "MODEL", "the model file (.safetensors)",
                    .flags = CC_OPT_REQUIRED),
        CC_OPTS_STR("format", &a->format, "F", "auto|long|wide", .flags = SHOW),
        CC_OPTS_STR("features", &a->features, "a,b,c",
                    "feature columns, in model order (default: all but time/cell)"),
        CC_OPTS_STR("time-format", &a->time_format, "FMT",
                    "strptime format of the time column (default: auto)"),
        CC_OPTS_DBL("step", &a->step_s, 1, 31622400, "S", "seconds per step (default: detected)"),
        CC_OPTS_STR("split", &a->split, "SPEC",
                    "train/val/test split of each series: \"a,b\" fractions or\n"
                    "\"rows:A-B,C-D,E-F\" (default 0.7,0.1: last 20% is test)"),
        CC_OPTS_DBL("val-frac", &a->val_frac, 0.01, 0.7, "F", "shorthand for --split (0.8-F),F"),
        CC_OPTS_STR("protocol", &a->protocol, "ett",
                    "ETTh1 protocol: split " ETT_SPLIT ",\n"
                    "z-score with the train slice, horizon 96 unless given"),
        CC_OPTS_HEADING("Model (ignored with --resume):"),
        CC_OPTS_INT("patch-len", &a->P, 1, CC_MAX_PATCH_LEN, "P", "", .flags = SHOW),
        CC_OPTS_INT("n-patches", &a->N, 1, CC_MAX_N_PATCHES, "N", "", .flags = SHOW),
        CC_OPTS_INT("norm-window", &a->M, 1, CC_MAX_NORM_WINDOW, "M", "", .flags = SHOW),
        CC_OPTS_INT("d-model", &a->D, 2, CC_MAX_D_MODEL, "D", "", .flags = SHOW),
        CC_OPTS_INT("n-heads", &a->H, 1, 256, "H", "", .flags = SHOW),
        CC_OPTS_INT("n-layers", &a->L, 1, CC_MAX_LAYERS, "L", "", .flags = SHOW),
        CC_OPTS_INT("d-ff", &a->FF, 1, CC_MAX_D_FF, "FF", "", .flags = SHOW),
        CC_OPTS_INT("horizon", &a->HZ, 1, CC_MAX_HORIZON, "HZ", "", .flags = SHOW),
        CC_OPTS_INT("tz-offset", &a->tz, -86400, 86400, "SEC",
                    "local time offset of the time features", .flags = SHOW),
        CC_OPTS_STR("name", &a->name, "NAME", "model name in the metadata", .flags = SHOW),
        CC_OPTS_HEADING("Training:"),
        CC_OPTS_DBL("dropout", &a->dropout, 0, 0.9, "X", "", .flags = SHOW),
        CC_OPTS_DBL("lr", &a->lr, 1e-7, 1, "X", "peak learning rate", .flags = SHOW),
        CC_OPTS_INT("warmup", &a->warmup, 0, 1e7, "N", "warmup steps", .flags = SHOW),
        CC_OPTS_STR("schedule", &a->schedule, "S", "invsqrt|cosine|constant after warmup",
                    .flags = SHOW),
        CC_OPTS_FLAG("adamw", &a->adamw, "decoupled weight decay (default decay 0.01 with --adamw)"),
        CC_OPTS_DBL("weight-decay", &a->wd, 0, 1, "X",
                    "AdamW decay of weight matrices (implies --adamw)"),
        CC_OPTS_DBL("clip", &a->clip, 0, 1e6, "X", "gradient global-norm clip, 0 = off",
                    .flags = SHOW),
        CC_OPTS_DBL("ema", &a->ema, 0, 0.99999, "X",
                    "validate and keep an exponential moving average of the\n"
                    "weights with this decay (e.g. 0.999); 0 = off",
                    .flags = SHOW),
        CC_OPTS_INT("batch", &a->batch, 1, 65536, "B", "windows per step", .flags = SHOW),
        CC_OPTS_INT("group", &a->group, 0, CC_TRAIN_MAX_GROUP, "G",
                    "end steps per window sharing its cached patches, 1..P,\n"
                    "0 = P; a step trains on B·G samples",
                    .flags = SHOW),
        CC_OPTS_INT("epochs", &a->epochs, 1, 1e6, "E", "epochs of B·G samples", .flags = SHOW),
        CC_OPTS_DBL("steps", &a->steps_d, 1, 1e12, "N", "optimiser steps (overrides --epochs)"),
        CC_OPTS_DBL("max-minutes", &a->max_minutes, 0, 1e6, "X",
                    "wall-clock budget (default none)"),
        CC_OPTS_INT("eval-every", &a->eval_every, 1, 1e9, "N",
                    "validate every N steps (default: min(epoch, 200))"),
        CC_OPTS_INT("patience", &a->patience, 1, 1e6, "K",
                    "stop after K validations without improvement", .flags = SHOW),
        CC_OPTS_STR("select", &a->select, "nll|mse",
                    "validation criterion of the best checkpoint and early stop:\n"
                    "Gaussian NLL, or MSE of the predicted means in data units",
                    .flags = SHOW),
        CC_OPTS_INT("val-windows", &a->val_windows, 1, 1e7, "N",
                    "validation windows, evenly spaced", .flags = SHOW),
        CC_OPTS_INT("threads", &a->threads, 1, 16, "T", "", .flags = SHOW),
        CC_OPTS_DBL("seed", &a->seed_d, 0, 9007199254740992.0, "X",
                    "same seed, data and options → same weights", .flags = SHOW),
        CC_OPTS_STR("resume", &a->resume, "CKPT", "continue from CKPT and CKPT.optim"),
        CC_OPTS_FLAG("quiet", &a->quiet, "no progress output"),
    };
    const CcOptsSpec spec = {
        .prog = "cellcast train",
        .usage = "cellcast train --data FILE --out MODEL.safetensors [options]",
        .about = "Trains a cellcast-tx/2 model on KPI history (see docs/training.md).",
        .opts = opts,
        .n_opts = sizeof opts / sizeof opts[0],
    };
    int rc = cc_opts_parse(&spec, argc, argv, NULL);
    if (rc)
        return CLI_OPTS_EXIT(rc);
    for (size_t i = 0; i < sizeof opts / sizeof opts[0]; i++)
        a->hz_given |= opts[i].name && !strcmp(opts[i].name, "horizon") && opts[i].given;
    return 0;
}

int cmd_train(int argc, char **argv)
{
    TrainArgs a;
    int rc = train_opts(&a, argc, argv);
    if (rc)
        return rc;
    const char *data_path = a.data_path, *out_path = a.out_path, *features = a.features;
    const char *format = a.format, *time_format = a.time_format, *split = a.split;
    const char *protocol = a.protocol, *schedule = a.schedule, *resume = a.resume;
    const char *name = a.name, *select = a.select;
    double val_frac = a.val_frac, dropout = a.dropout, lr = a.lr, wd = a.wd, clip = a.clip;
    double max_minutes = a.max_minutes, step_s = a.step_s, ema = a.ema, steps_d = a.steps_d;
    double seed_d = a.seed_d;
    int P = a.P, N = a.N, M = a.M, D = a.D, H = a.H, L = a.L, FF = a.FF, HZ = a.HZ, tz = a.tz;
    int warmup = a.warmup, batch = a.batch, group = a.group, epochs = a.epochs;
    int threads = a.threads, patience = a.patience, eval_every = a.eval_every;
    int val_windows = a.val_windows, adamw = a.adamw, quiet = a.quiet;
    CcHparams hp;
    CcTrainSettings ts;
    cc_hparams_default(&hp);
    cc_train_default_settings(&ts);
    int by_mse = !strcmp(select, "mse");
    if (!by_mse && strcmp(select, "nll")) {
        fprintf(stderr, "cellcast train: --select must be nll or mse\n");
        return 2;
    }
    int is_ett = 0;
    if (protocol) {
        if (strcmp(protocol, "ett")) {
            fprintf(stderr, "cellcast train: unknown --protocol '%s' (ett)\n", protocol);
            return 2;
        }
        is_ett = 1;
    }

    int ret = 1;
    char err[1024], split_buf[64];
    CcDataset *ds = NULL;
    CcModel *m = NULL;
    CcTrainer *tr = NULL;
    CcRange *rtrain = NULL, *rval = NULL;
    int tty = isatty(fileno(stderr));

    /* ---- data ---- */
    CcDataSettings dsets;
    cc_data_default_settings(&dsets);
    if (!strcmp(format, "long"))
        dsets.format = CC_DATA_LONG;
    else if (!strcmp(format, "wide"))
        dsets.format = CC_DATA_WIDE;
    else if (strcmp(format, "auto")) {
        fprintf(stderr, "cellcast train: --format must be auto, long or wide\n");
        return 2;
    }
    dsets.time_format = time_format;
    dsets.features = features;
    dsets.step_seconds = (int64_t)step_s;
    CcDataReport rep;
    if (cc_data_open_file(&ds, data_path, &dsets, &rep, err, sizeof err) < 0) {
        fprintf(stderr, "cellcast train: %s\n", err);
        goto done;
    }
    {
        char summary[2048];
        cc_data_report_format(&rep, ds, summary, sizeof summary);
        if (!quiet)
            fprintf(stderr, "cellcast train: %s\n", summary);
    }
    if (is_ett)
        split = ETT_SPLIT;
    else if (!split && val_frac > 0) {
        snprintf(split_buf, sizeof split_buf, "%.6g,%.6g", 0.8 - val_frac, val_frac);
        split = split_buf;
    } else if (!split)
        split = "0.7,0.1";
    rtrain = calloc((size_t)ds->n_series, sizeof *rtrain);
    rval = calloc((size_t)ds->n_series, sizeof *rval);
    if (!rtrain || !rval) {
        fprintf(stderr, "cellcast train: out of memory\n");
        goto done;
    }
    for (int s = 0; s < ds->n_series; s++) {
        CcRange r3[3];
        if (cc_data_split(split, ds->series[s].T, r3, err, sizeof err) < 0) {
            fprintf(stderr, "cellcast train: --split (series %s): %s\n",
                    ds->series[s].cell_id, err);
            goto done;
        }
        rtrain[s] = r3[0];
        rval[s] = r3[1];
    }
    double zmean[CC_MAX_FEATURES], zstd[CC_MAX_FEATURES];
    if (is_ett) {
        if (ds->n_series != 1) {
            fprintf(stderr, "cellcast train: --protocol ett wants one series (a wide file)\n");
            goto done;
        }
        cc_data_stats(ds, 0, rtrain[0], zmean, zstd);
        cc_data_standardize(ds, zmean, zstd);
        if (!a.hz_given)
            HZ = 96;
    }

    /* ---- model ---- */
    if (resume) {
        if (cc_model_open_file(&m, resume, err, sizeof err) < 0) {
            fprintf(stderr, "cellcast train: --resume %s: %s\n", resume, err);
            goto done;
        }
        if (m->hp.n_features != ds->n_features) {
            fprintf(stderr, "cellcast train: %s has %d features, the data %d\n", resume,
                    m->hp.n_features, ds->n_features);
            goto done;
        }
        for (int f = 0; f < ds->n_features; f++)
            if (strcmp(m->hp.features[f], ds->features[f])) {
                fprintf(stderr, "cellcast train: feature %d is '%s' in %s, '%s' in the data "
                                "(use --features)\n",
                        f, m->hp.features[f], resume, ds->features[f]);
                goto done;
            }
    } else {
        hp.n_features = ds->n_features;
        for (int f = 0; f < ds->n_features; f++)
            snprintf(hp.features[f], CC_FEATURE_NAME_MAX, "%s", ds->features[f]);
        hp.patch_len = P, hp.n_patches = N, hp.norm_window = M, hp.d_model = D;
        hp.n_heads = H, hp.n_layers = L, hp.d_ff = FF, hp.horizon = HZ;
        hp.step_seconds = ds->step_seconds;
        hp.tz_offset_s = tz;
        if (cc_model_open(&m, &hp, err, sizeof err) < 0) {
            fprintf(stderr, "cellcast train: %s\n", err);
            goto done;
        }
        cc_model_init_random(m, (uint64_t)seed_d);
    }
    if (m->hp.step_seconds != ds->step_seconds) {
        fprintf(stderr, "cellcast train: the data's step is %llds, the model's %llds\n",
                (long long)ds->step_seconds, (long long)m->hp.step_seconds);
        goto done;
    }

    /* ---- trainer ---- */
    ts.dropout = (float)dropout;
    ts.batch = batch;
    ts.group = group;
    ts.n_threads = threads;
    ts.seed = (uint64_t)seed_d;
    ts.max_val_windows = val_windows;
    ts.ema = (float)ema;
    ts.adam.lr = (float)lr;
    ts.adam.warmup = warmup;
    ts.adam.clip = (float)clip;
    if (wd >= 0 || adamw)
        ts.adam.weight_decay = wd >= 0 ? (float)wd : 0.01f;
    if (!strcmp(schedule, "invsqrt"))
        ts.adam.schedule = CC_SCHED_INVSQRT;
    else if (!strcmp(schedule, "cosine"))
        ts.adam.schedule = CC_SCHED_COSINE;
    else if (!strcmp(schedule, "constant"))
        ts.adam.schedule = CC_SCHED_CONSTANT;
    else {
        fprintf(stderr, "cellcast train: --schedule must be invsqrt, cosine or constant\n");
        goto done;
    }
    int G = group == 0 || group > m->hp.patch_len ? m->hp.patch_len : group;
    /* the step count is needed by the cosine schedule before the trainer exists */
    int64_t total_steps;
    {
        if (cc_trainer_open(&tr, m, ds, rtrain, rval, &ts, err, sizeof err) < 0) {
            fprintf(stderr, "cellcast train: %s\n", err);
            goto done;
        }
        int64_t ntr, nva;
        cc_trainer_counts(tr, &ntr, &nva);
        int64_t spe = (ntr + (int64_t)batch * G - 1) / ((int64_t)batch * G);
        total_steps = steps_d > 0 ? (int64_t)steps_d : spe * epochs;
        if (!eval_every)
            eval_every = spe < 200 ? (int)(spe > 0 ? spe : 1) : 200;
        cc_trainer_close(&tr);
        ts.adam.total_steps = total_steps;
        if (cc_trainer_open(&tr, m, ds, rtrain, rval, &ts, err, sizeof err) < 0) {
            fprintf(stderr, "cellcast train: %s\n", err);
            goto done;
        }
        if (nva == 0)
            fprintf(stderr, "cellcast train: warning: no validation sample (every validation "
                            "range is shorter than the horizon %d): training loss stands in "
                            "for it (checkpoint and early stop on the training loss)\n",
                    m->hp.horizon);
        if (!quiet)
            fprintf(stderr,
                    "cellcast train: %d series, F=%d, %lld training samples, %lld validation "
                    "samples (split %s); %lld steps of %d windows x %d end steps (%lld per "
                    "epoch), %lld parameters\n",
                    ds->n_series, ds->n_features, (long long)ntr, (long long)nva, split,
                    (long long)total_steps, batch, G, (long long)spe, (long long)m->n_params);
    }

    /* metadata */
    {
        CcHparams *h = &m->hp;
        char buf[512], cmdline[512] = "cellcast";
        size_t len = strlen(cmdline);
        for (int i = 0; i < argc && len + 2 < sizeof cmdline; i++)
            len += (size_t)snprintf(cmdline + len, sizeof cmdline - len, " %s", argv[i]);
        snprintf(h->name, sizeof h->name, "%s", name);
        snprintf(h->version, sizeof h->version, "%s", CC_VERSION);
        snprintf(h->trained_on, sizeof h->trained_on, "%s", data_path);
        time_t now = time(NULL);
        struct tm tmv;
        gmtime_r(&now, &tmv);
        strftime(h->created_at, sizeof h->created_at, "%Y-%m-%dT%H:%M:%SZ", &tmv);
        cc_hparams_set_extra(h, "command", cmdline);
        snprintf(buf, sizeof buf, "%llu", (unsigned long long)ts.seed);
        cc_hparams_set_extra(h, "seed", buf);
        cc_hparams_set_extra(h, "split", split);
        cc_hparams_set_extra(h, "select", select);
        if (ema > 0) {
            snprintf(buf, sizeof buf, "%g", ema);
            cc_hparams_set_extra(h, "ema", buf);
        }
        if (is_ett) {
            cc_hparams_set_extra(h, "protocol", "ett");
            size_t a = 0, b = 0;
            char zm[512], zs[512];
            for (int f = 0; f < ds->n_features; f++) {
                a += (size_t)snprintf(zm + a, sizeof zm - a, "%s%.9g", f ? "," : "", zmean[f]);
                b += (size_t)snprintf(zs + b, sizeof zs - b, "%s%.9g", f ? "," : "", zstd[f]);
            }
            cc_hparams_set_extra(h, "zscore_mean", zm);
            cc_hparams_set_extra(h, "zscore_std", zs);
        }
    }

    /* ---- loop ---- */
    char state_path[4096];
    snprintf(state_path, sizeof state_path, "%s.optim", out_path);
    double best = INFINITY, bad = 0;
    if (resume) {
        char rs[4096];
        double ex[2] = {INFINITY, 0};
        snprintf(rs, sizeof rs, "%s.optim", resume);
        if (cc_trainer_load_state(tr, rs, ex, 2, err, sizeof err) < 0) {
            fprintf(stderr, "cellcast train: %s\n", err);
            goto done;
        }
        best = ex[0], bad = ex[1];
        if (!quiet)
            fprintf(stderr, "cellcast train: resumed at step %lld (best val NLL %.4f)\n",
                    (long long)cc_trainer_steps_done(tr), best);
    }
    float *best_block = malloc(m->n_params * sizeof(float));
    if (!best_block) {
        fprintf(stderr, "cellcast train: out of memory\n");
        goto done;
    }
    memcpy(best_block, m->block, m->n_params * sizeof(float));
    signal(SIGINT, on_sigint);
    int64_t t0 = cc_now_ns(), last_print = 0, start_step = cc_trainer_steps_done(tr);
    double loss_ema = NAN, val = NAN, vmse = NAN, vnll = NAN;
    const char *why = "step budget reached";
    int saved_any = 0;
    int64_t tokens_per_step = (int64_t)batch * (m->hp.n_patches + G);
    for (;;) {
        int64_t step = cc_trainer_steps_done(tr);
        double el = (cc_now_ns() - t0) / 1e9;
        if (step >= total_steps)
            break;
        if (max_minutes > 0 && el >= max_minutes * 60) {
            why = "--max-minutes reached";
            break;
        }
        if (g_stop) {
            why = "interrupted";
            break;
        }
        double loss;
        float lr_now;
        int r = cc_trainer_step(tr, &loss, &lr_now, NULL);
        if (r == -ERANGE) {
            fprintf(stderr, "\ncellcast train: non-finite loss at step %lld, update skipped\n",
                    (long long)step + 1);
            continue;
        }
        if (r < 0) {
            fprintf(stderr, "\ncellcast train: training step failed (%s)\n", strerror(-r));
            goto done_best;
        }
        step++;
        loss_ema = isnan(loss_ema) ? loss : 0.98 * loss_ema + 0.02 * loss;
        int evaluated = 0;
        if (step % eval_every == 0 || step == total_steps) {
            r = cc_trainer_validate(tr, &vnll, &vmse);
            evaluated = 1;
            if (r == -EAGAIN)
                vnll = vmse = loss_ema; /* no validation data: keep the last weights */
            val = by_mse ? vmse : vnll;
            if (val < best) {
                best = val;
                bad = 0;
                memcpy(best_block, cc_trainer_eval_weights(tr), m->n_params * sizeof(float));
                char vb[64], sb[64];
                snprintf(sb, sizeof sb, "%lld", (long long)step);
                snprintf(vb, sizeof vb, "%.6f", vnll);
                cc_hparams_set_extra(&m->hp, "val_nll", vb);
                snprintf(vb, sizeof vb, "%.6g", vmse);
                cc_hparams_set_extra(&m->hp, "val_mse", vb);
                cc_hparams_set_extra(&m->hp, "train_steps", sb);
                CcModel view = *m; /* the validated weights (the EMA with --ema) */
                view.block = best_block;
                cc_params_point(&view.w, &view.hp, best_block);
                if (cc_model_save(&view, out_path, err, sizeof err) < 0) {
                    fprintf(stderr, "\ncellcast train: %s\n", err);
                    goto done_best;
                }
                saved_any = 1;
            } else {
                bad++;
            }
            double ex[2] = {best, bad};
            if (cc_trainer_save_state(tr, state_path, ex, 2, err, sizeof err) < 0)
                fprintf(stderr, "\ncellcast train: %s\n", err);
        }
        el = (cc_now_ns() - t0) / 1e9;
        double rate = (step - start_step) / (el > 1e-9 ? el : 1e-9);
        double eta = (total_steps - step) / (rate > 0 ? rate : 1e-9);
        if (max_minutes > 0 && eta > max_minutes * 60 - el)
            eta = max_minutes * 60 - el;
        if (!quiet && tty && (cc_now_ns() - last_print > 200000000LL || evaluated)) {
            char etab[32], elb[32];
            fmt_dur(etab, sizeof etab, eta);
            fmt_dur(elb, sizeof elb, el);
            int64_t ntr;
            cc_trainer_counts(tr, &ntr, NULL);
            double epoch = (double)step * batch * G / (double)(ntr ? ntr : 1);
            fprintf(stderr,
                    "\r\033[Kepoch %.2f  step %lld/%lld  loss %.4f  val %.4f mse %.4g (best %s %.4g)  "
                    "lr %.2e  %.0f tok/s  %s  ETA %s",
                    epoch, (long long)step, (long long)total_steps, loss_ema, vnll, vmse, select, best,
                    lr_now, rate * tokens_per_step, elb, etab);
            last_print = cc_now_ns();
        } else if (!quiet && !tty && evaluated) {
            int64_t ntr;
            cc_trainer_counts(tr, &ntr, NULL);
            double epoch = (double)step * batch * G / (double)(ntr ? ntr : 1);
            fprintf(stderr,
                    "step %lld/%lld epoch %.2f loss %.4f val %.4f val_mse %.4g best_%s %.4g "
                    "lr %.2e tok/s %.0f elapsed %.0fs\n",
                    (long long)step, (long long)total_steps, epoch, loss_ema, vnll, vmse, select,
                    best, lr_now,
                    rate * tokens_per_step, el);
        }
        if (evaluated && bad >= patience) {
            why = "early stop (patience)";
            break;
        }
    }
    if (!saved_any) { /* stopped before the first validation: save what there is */
        double v, vm;
        if (cc_trainer_validate(tr, &v, &vm) == 0) {
            char vb[64];
            snprintf(vb, sizeof vb, "%.6f", v);
            cc_hparams_set_extra(&m->hp, "val_nll", vb);
            snprintf(vb, sizeof vb, "%.6g", vm);
            cc_hparams_set_extra(&m->hp, "val_mse", vb);
            best = by_mse ? vm : v;
        }
        memcpy(best_block, cc_trainer_eval_weights(tr), m->n_params * sizeof(float));
    }
    {
        char sb[64];
        double ex[2] = {best, bad};
        cc_trainer_save_state(tr, state_path, ex, 2, err, sizeof err);
        memcpy(m->block, best_block, m->n_params * sizeof(float));
        if (!saved_any) {
            snprintf(sb, sizeof sb, "%lld", (long long)cc_trainer_steps_done(tr));
            cc_hparams_set_extra(&m->hp, "train_steps", sb);
        }
        if (cc_model_save(m, out_path, err, sizeof err) < 0) {
            fprintf(stderr, "\ncellcast train: %s\n", err);
            goto done_best;
        }
    }
    if (!quiet)
        fprintf(stderr, "%scellcast train: %s after %lld steps in %.1fs; best val %s %.4g → %s\n",
                tty ? "\n" : "", why, (long long)cc_trainer_steps_done(tr),
                (cc_now_ns() - t0) / 1e9, select, best, out_path);
    ret = 0;
done_best:
    free(best_block);
done:
    cc_trainer_close(&tr);
    cc_model_close(&m);
    cc_data_close(&ds);
    free(rtrain);
    free(rval);
    return ret;
}
