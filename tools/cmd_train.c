/* cmd_train.c — `cellcast train`: CSV history → a cellcast-tx/3 model (safetensors; tx/2
 * with --linear-window 0).
 *
 * Loads the data with lib/cc_data (its missing-data policy: imputed inputs, masked
 * targets), splits every series by time into train / validation / test rows, trains with
 * lib/cc_train (Adam, warmup then decay, dropout, clipping, 2 threads), validates every
 * --eval-every steps, keeps the best checkpoint (lowest validation MSE or NLL) in --out, the
 * latest optimiser state in --out.optim (for --resume), and stops early after --patience
 * evaluations without improvement, at --max-minutes, or on Ctrl-C (cmd_train_stoppable:
 * abandoned, nothing kept, on the caller's stop flag). tx/3: norm.floor is set
 * from the training rows before training (--floor-frac), calib.sigma_scale fitted on the
 * validation rows after it (docs/training.md). */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cc_build_info.h"
#include "cc_data.h"
#include "cc_learn.h"
#include "cc_rng.h"
#include "cc_time.h"
#include "cc_train.h"
#include "cli.h"

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
    const char *data_path, *out_path, *features, *split, *protocol;
    const char *schedule, *resume, *name, *select, *linear_init;
    double val_frac, dropout, lr, wd, clip, max_minutes, step_s, ema, steps_d, seed_d;
    double floor_frac, xn_bound, mae, mse, nll_mean, logsig_min, nll_huber, head_scale,
        ridge_lambda, linear_freeze;
    double linear_lr_mult, chan_init_sd, min_lr_frac;
    const char *dropout_sites, *init, *val_units, *mae_units, *linear_loss;
    double mae_unit_cap;
    int decay_all, eval_start;
    int P, N, M, D, H, L, FF, HZ, R, tz, warmup, batch, group, epochs, threads;
    int patience, eval_every, val_windows, adamw, quiet;
    int mase_season; ///< --select mase: the seasonal naive's lag (0 = a day's steps)
    int hz_given;    ///< --horizon was given (the ETT protocol's default is 96)
    /* Given on the command line, else derived from the data (data_defaults, train_open). */
    int P_given, N_given, M_given, R_given, warmup_given, steps_given;
    /* --fallback, and the loss and selection left to the defaults: a kept model that loses
     * to the last value on validation is trained again (train_fallback) */
    int fallback, loss_given;
    CcDataSettings data;     ///< CSV parsing (CLI_DATA_OPTS; features and step from the above)
    const char *calib;       ///< calib.sigma_scale fit (lib/cc_calib.h), radius and recent share
    const char *recalibrate; ///< refit the calibration of this model file, no training
    int calib_radius;
    double calib_recent;
} TrainArgs;

/* --calib NAME and its knobs as cc_calib settings. 0, or -1 for an unknown name. */
static int calib_settings(const TrainArgs *a, CcCalibSettings *cs)
{
    static const char *const names[] = {"shrunk", "quantile", "none", "pooled"};
    cc_calib_defaults(cs);
    cs->step_radius = a->calib_radius;
    cs->recent = a->calib_recent;
    for (int i = 0; i < 4; i++)
        if (!strcmp(a->calib, names[i])) {
            cs->fit = i == 3 ? CC_CALIB_SHRUNK : (CcCalibFit)i;
            cs->shrink = i != 3; /* pooled: shrunk without the drift shrinkage */
            return 0;
        }
    return -1;
}

/* --select's criteria, in the order of the validation values (val_abs_values). */
static const char *const select_names[] = {"nll", "mse", "mae", "mase"};
enum { SEL_NLL, SEL_MSE, SEL_MAE, SEL_MASE, SEL_COUNT };

/* The index of --select's value in select_names, or -1. */
static int select_index(const char *name)
{
    for (int i = 0; i < SEL_COUNT; i++)
        if (!strcmp(name, select_names[i]))
            return i;
    return -1;
}

/* Whether option `name` of the table was given on the command line. */
static int opt_given(const CcOpt *opts, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (opts[i].name && !strcmp(opts[i].name, name))
            return opts[i].given > 0;
    return 0;
}

/* --protocol ett: the ETT recipe (docs/results.md, "Why cellcast train did worse than
 * PyTorch") for every option the command line does not give. */
static void ett_recipe(TrainArgs *a, const CcOpt *opts, size_t n)
{
#define ETT_DEFAULT(name, field, value)                                                            \
    if (!opt_given(opts, n, name))                                                                 \
    a->field = (value)
    ETT_DEFAULT("d-model", D, 32);
    ETT_DEFAULT("d-ff", FF, 64);
    ETT_DEFAULT("dropout", dropout, 0.2);
    ETT_DEFAULT("dropout-sites", dropout_sites, "residual");
    ETT_DEFAULT("schedule", schedule, "cosine");
    ETT_DEFAULT("batch", batch, 64);
    if (!opt_given(opts, n, "epochs"))
        ETT_DEFAULT("steps", steps_d, 2000);
    ETT_DEFAULT("eval-every", eval_every, 100);
    ETT_DEFAULT("patience", patience, 20);
    ETT_DEFAULT("ema", ema, 0.99);
    if (a->R > 0) /* tx/2 has no linear path to fit */
        ETT_DEFAULT("linear-init", linear_init, "ridge");
    ETT_DEFAULT("val-units", val_units, "kpi");
    ETT_DEFAULT("eval-start", eval_start, 1);
#undef ETT_DEFAULT
}

/* The option table of cellcast train is built from groups, in the order of its help: one
 * function per group, so that each stays short and a new option finds its place. */
enum { SHOW = CC_OPT_SHOW_DEFAULT };
#define TRAIN_MAX_OPTS 128

/* Copies a group of options to the end of the table (*n used of cap; the groups' sizes are
 * fixed, so an overflow is a programming error). */
static void table_add(CcOpt *table, size_t *n, size_t cap, const CcOpt *group, size_t count)
{
    if (*n + count > cap) {
        fprintf(stderr, "cellcast train: option table too small\n");
        abort();
    }
    memcpy(table + *n, group, count * sizeof *group);
    *n += count;
}

/* The data: input and output files, CSV parsing, step, split, the ETT protocol. */
static void data_options(TrainArgs *a, CcOpt *table, size_t *n, size_t cap)
{
    const CcOpt group[] = {
        CC_OPTS_HEADING("Data:"),
        CC_OPTS_STR("data", &a->data_path, "FILE",
                    "CSV, long (ts,cell_id,<kpis>) or wide (<time>,<kpis>)",
                    .flags = CC_OPT_REQUIRED),
        CC_OPTS_STR("out", &a->out_path, "MODEL", "the model file (.safetensors)",
                    .flags = CC_OPT_REQUIRED),
        CC_OPTS_STR("features", &a->features, "a,b,c",
                    "feature columns, in model order (default: all but time/cell)"),
        CLI_DATA_OPTS(&a->data),
        CC_OPTS_DBL("step", &a->step_s, 1, 31622400, "S", "seconds per step (default: detected)"),
        CC_OPTS_STR("split", &a->split, "SPEC",
                    "train/val/test split of each series: \"a,b\" fractions or\n"
                    "\"rows:A-B,C-D,E-F\" (default 0.7,0.1: last 20% is test)"),
        CC_OPTS_DBL("val-frac", &a->val_frac, 0.01, 0.7, "F", "shorthand for --split (0.8-F),F"),
        CC_OPTS_STR("protocol", &a->protocol, "ett",
                    "ETT protocol: the standard 12/4/4-month split (ETTh\n"
                    "rows 0-8640, 8640-11520, 11520-14400; ETTm x4),\n"
                    "z-score with the train slice, horizon 96 unless given;\n"
                    "the ETT recipe for every option not given (docs/training.md)"),
    };
    table_add(table, n, cap, group, sizeof group / sizeof *group);
}

/* The model's shape and initialisation (ignored with --resume). */
static void model_options(TrainArgs *a, CcOpt *table, size_t *n, size_t cap)
{
    const CcOpt group[] = {
        CC_OPTS_HEADING("Model (ignored with --resume):"),
        CC_OPTS_INT("patch-len", &a->P, 1, CC_MAX_PATCH_LEN, "P", "", .flags = SHOW),
        CC_OPTS_INT("n-patches", &a->N, 1, CC_MAX_N_PATCHES, "N",
                    "(N, M and R: at most half the longest series'\n"
                    "training rows unless given)",
                    .flags = SHOW),
        CC_OPTS_INT("norm-window", &a->M, 1, CC_MAX_NORM_WINDOW, "M", "", .flags = SHOW),
        CC_OPTS_INT("d-model", &a->D, 2, CC_MAX_D_MODEL, "D", "", .flags = SHOW),
        CC_OPTS_INT("n-heads", &a->H, 1, 256, "H", "", .flags = SHOW),
        CC_OPTS_INT("n-layers", &a->L, 1, CC_MAX_LAYERS, "L", "", .flags = SHOW),
        CC_OPTS_INT("d-ff", &a->FF, 1, CC_MAX_D_FF, "FF", "", .flags = SHOW),
        CC_OPTS_INT("horizon", &a->HZ, 1, CC_MAX_HORIZON, "HZ", "", .flags = SHOW),
        CC_OPTS_INT("linear-window", &a->R, 0, CC_MAX_LINEAR_WINDOW, "R",
                    "steps of the tx/3 linear path; 0 = a cellcast-tx/2 model", .flags = SHOW),
        CC_OPTS_DBL("floor-frac", &a->floor_frac, 0, 10, "X",
                    "tx/3 norm.floor = X times the KPI's median sd over the\n"
                    "series' training rows",
                    .flags = SHOW),
        CC_OPTS_DBL("head-scale", &a->head_scale, 0, 10, "X",
                    "tx/3: the head's initial weights times X, so that the\n"
                    "linear path leads at the start",
                    .flags = SHOW),
        CC_OPTS_STR("linear-init", &a->linear_init, "random|ridge|ridge-kpi|naive",
                    "tx/3 linear path at the start: random, the ridge\n"
                    "regression of the training windows (closed form),\n"
                    "ridge-kpi: the same in each KPI's own units over its MASE\n"
                    "scale, the penalty chosen on validation (cellcast learn's), or\n"
                    "naive: the path and the head's means at 0, so the model\n"
                    "starts as the last value (with --eval-start a candidate)",
                    .flags = SHOW),
        CC_OPTS_STR("linear-loss", &a->linear_loss, "mse|mae",
                    "--linear-init ridge-kpi: the loss of that fit: mse (the\n"
                    "ridge), or mae: the ridge map refitted by IRLS on the\n"
                    "absolute error in MASE units (the learner's criterion)",
                    .flags = SHOW),
        CC_OPTS_DBL("ridge-lambda", &a->ridge_lambda, 0, 1e6, "X",
                    "--linear-init ridge: penalty per training sample on the\n"
                    "weights (chosen on ETTh1's validation months)",
                    .flags = SHOW),
        CC_OPTS_DBL("linear-freeze", &a->linear_freeze, 0, 1e12, "N",
                    "tx/3: the first N steps leave the linear path as it\n"
                    "starts (the transformer learns its residual)",
                    .flags = SHOW),
        CC_OPTS_DBL("linear-lr-mult", &a->linear_lr_mult, 0, 100, "X",
                    "tx/3: the linear path's learning rate is X times the\n"
                    "rest's (0: it stays as it starts)",
                    .flags = SHOW),
        CC_OPTS_STR("init", &a->init, "xavier|torch",
                    "random start of the weight matrices: Xavier with zero\n"
                    "biases, or torch.nn.Linear's U(+-1/sqrt(fan_in)) for both",
                    .flags = SHOW),
        CC_OPTS_DBL("chan-init-sd", &a->chan_init_sd, 0, 10, "X",
                    "sd of the channel embedding's random start", .flags = SHOW),
        CC_OPTS_INT("tz-offset", &a->tz, -86400, 86400, "SEC",
                    "local time offset of the time features", .flags = SHOW),
        CC_OPTS_STR("name", &a->name, "NAME", "model name in the metadata", .flags = SHOW),
    };
    table_add(table, n, cap, group, sizeof group / sizeof *group);
}

/* The optimiser, its schedule, the loss, the batch and the length of the run. */
static void optimiser_options(TrainArgs *a, CcOpt *table, size_t *n, size_t cap)
{
    const CcOpt group[] = {
        CC_OPTS_HEADING("Training:"),
        CC_OPTS_DBL("dropout", &a->dropout, 0, 0.9, "X", "", .flags = SHOW),
        CC_OPTS_DBL("lr", &a->lr, 1e-7, 1, "X", "peak learning rate", .flags = SHOW),
        CC_OPTS_INT("warmup", &a->warmup, 0, 1e7, "N",
                    "warmup steps (unless given, at most a tenth of the run)", .flags = SHOW),
        CC_OPTS_STR("schedule", &a->schedule, "S", "invsqrt|cosine|constant after warmup",
                    .flags = SHOW),
        CC_OPTS_DBL("min-lr-frac", &a->min_lr_frac, 0, 1, "X",
                    "the cosine schedule's floor, a fraction of --lr", .flags = SHOW),
        CC_OPTS_FLAG("adamw", &a->adamw,
                     "decoupled weight decay (default decay 0.01 with --adamw)"),
        CC_OPTS_DBL("weight-decay", &a->wd, 0, 1, "X",
                    "AdamW decay of weight matrices (implies --adamw)"),
        CC_OPTS_FLAG("decay-all", &a->decay_all,
                     "the decay on every trained tensor (biases, norms, channel\n"
                     "embedding, linear path), as torch's AdamW"),
        CC_OPTS_STR("dropout-sites", &a->dropout_sites, "all|residual",
                    "dropout on the embedding, attention output, FFN hidden\n"
                    "and FFN output (all), or on the residual branches only",
                    .flags = SHOW),
        CC_OPTS_DBL("xn-bound", &a->xn_bound, 0, 1e30, "X",
                    "leave out of the loss the training samples with a\n"
                    "normalised value beyond +-X (a flat window, then a move\n"
                    "of thousands of its sigmas); 0 = none",
                    .flags = SHOW),
        CC_OPTS_DBL("mae-weight", &a->mae, 0, 100, "X",
                    "add X times the MAE of the normalised means to the NLL", .flags = SHOW),
        CC_OPTS_STR("mae-units", &a->mae_units, "sigma|mase",
                    "the MAE term's units: the window's sigma (the targets as\n"
                    "normalised), or mase: each channel's MASE scale over its\n"
                    "training rows (every sample weighed by sigma / scale)",
                    .flags = SHOW),
        CC_OPTS_DBL("mae-unit-cap", &a->mae_unit_cap, 0, 1e12, "X",
                    "--mae-units mase: the largest weight sigma / scale", .flags = SHOW),
        CC_OPTS_DBL("mse-weight", &a->mse, 0, 100, "X",
                    "add X times the MSE of the normalised means to the NLL", .flags = SHOW),
        CC_OPTS_DBL("nll-mean", &a->nll_mean, 0, 1, "X",
                    "the NLL's gradient on the means times X (0: the means\n"
                    "learn from the MAE/MSE terms alone, log-sigma from the NLL)",
                    .flags = SHOW),
        CC_OPTS_DBL("logsig-min", &a->logsig_min, -20, 0, "X",
                    "lower clamp of log-sigma in the loss; 0 = -4 for tx/3,\n"
                    "-7 for tx/2",
                    .flags = SHOW),
        CC_OPTS_DBL("nll-huber", &a->nll_huber, 0, 1e6, "K",
                    "the NLL of a target beyond K predicted sds grows as\n"
                    "K|r| (Huber), not r^2/2: a spike in the data pulls on\n"
                    "the weights as a target K sds off does; 0 = off",
                    .flags = SHOW),
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
        CC_OPTS_INT("epochs", &a->epochs, 1, 1e6, "E",
                    "epochs of B·G samples (without --epochs and --steps:\n"
                    "at least 1000 steps)",
                    .flags = SHOW),
        CC_OPTS_DBL("steps", &a->steps_d, 1, 1e12, "N", "optimiser steps (overrides --epochs)"),
        CC_OPTS_DBL("max-minutes", &a->max_minutes, 0, 1e6, "X",
                    "wall-clock budget (default none)"),
    };
    table_add(table, n, cap, group, sizeof group / sizeof *group);
}

/* Validation, the kept checkpoint's selection, early stop and the calibration. */
static void selection_options(TrainArgs *a, CcOpt *table, size_t *n, size_t cap)
{
    const CcOpt group[] = {
        CC_OPTS_INT("eval-every", &a->eval_every, 1, 1e9, "N",
                    "validate every N steps (default: min(200, max(epoch,\n"
                    "steps/50)))"),
        CC_OPTS_FLAG("eval-start", &a->eval_start,
                     "validate before the first step too: the start (e.g. the\n"
                     "ridge path) can be the kept checkpoint"),
        CC_OPTS_INT("patience", &a->patience, 1, 1e6, "K",
                    "stop after K validations without improvement", .flags = SHOW),
        CC_OPTS_STR("select", &a->select, "nll|mse|mae|mase",
                    "validation criterion of the best checkpoint and early stop:\n"
                    "Gaussian NLL, MSE or MAE of the predicted means in data\n"
                    "units, or mase: each channel's MAE over its training rows'\n"
                    "seasonal naive MAE, averaged over the channels\n"
                    "(default nll; mse with --protocol ett)"),
        CC_OPTS_INT("mase-season", &a->mase_season, 0, 1e7, "S",
                    "--select mase: the seasonal naive's lag in steps\n"
                    "(0 = a day's steps, 1 when the step does not divide a day)",
                    .flags = SHOW),
        CC_OPTS_STR("val-units", &a->val_units, "z|kpi",
                    "--protocol ett: the validation MSE of the z-scored values,\n"
                    "or in each KPI's own units (weighted by its variance)",
                    .flags = SHOW),
        CC_OPTS_STR("calib", &a->calib, "FIT",
                    "fit of calib.sigma_scale on the validation rows: shrunk\n"
                    "(default; docs/training.md), pooled (shrunk without the drift\n"
                    "shrinkage), quantile (per KPI and step), none (all 1)"),
        CC_OPTS_STR("recalibrate", &a->recalibrate, "MODEL",
                    "no training: refit MODEL's calib.sigma_scale on the\n"
                    "validation rows (give the data options of its training)\n"
                    "and write it to --out"),
        CC_OPTS_INT("calib-radius", &a->calib_radius, -1, 64, "R",
                    "at most R horizon steps pooled each side (k/4 at step k;\n"
                    "-1: horizon/16, at most 8)",
                    .flags = SHOW),
        CC_OPTS_DBL("calib-recent", &a->calib_recent, 0.05, 1, "X",
                    "fit on the latest X of each series' validation rows", .flags = SHOW),
        CC_OPTS_INT("val-windows", &a->val_windows, 1, 1e7, "N",
                    "validation windows, evenly spaced", .flags = SHOW),
    };
    table_add(table, n, cap, group, sizeof group / sizeof *group);
}

/* How the run goes: threads, seed, resume, fallback, output. */
static void run_options(TrainArgs *a, CcOpt *table, size_t *n, size_t cap)
{
    const CcOpt group[] = {
        CC_OPTS_INT("threads", &a->threads, 1, 16, "T", "", .flags = SHOW),
        CC_OPTS_DBL("seed", &a->seed_d, 0, 9007199254740992.0, "X",
                    "same seed, data and options → same weights", .flags = SHOW),
        CC_OPTS_STR("resume", &a->resume, "CKPT", "continue from CKPT and CKPT.optim"),
        CC_OPTS_FLAG("fallback", &a->fallback,
                     "when the loss, --select and --linear-init are the\n"
                     "defaults and the kept model's validation MAE is above\n"
                     "the last value's (val_mae_vs_last > 1.02), train again\n"
                     "with --mae-weight 1 --nll-mean 0 --select mase\n"
                     "--linear-init naive --eval-start and keep the model with\n"
                     "the lower val_mae_vs_last (docs/training.md)"),
        CC_OPTS_FLAG("quiet", &a->quiet, "no progress output"),
    };
    table_add(table, n, cap, group, sizeof group / sizeof *group);
}

/* The defaults of every option: the library's (cc_hparams_default, cc_train_default_settings,
 * cc_data_default_settings) and the command's own. */
static void train_defaults(TrainArgs *a)
{
    CcHparams hp;
    CcTrainSettings ts;
    cc_hparams_default(&hp);
    cc_train_default_settings(&ts);
    *a = (TrainArgs){.schedule = "invsqrt",
                     .name = "cellcast",
                     .select = NULL,
                     .calib = "shrunk",
                     .calib_radius = -1,
                     .calib_recent = 1,
                     .floor_frac = 0.1,
                     .xn_bound = CC_TRAIN_XN_BOUND,
                     .nll_mean = 1,
                     .head_scale = 0.1,
                     .linear_init = "random",
                     .ridge_lambda = 0.02,
                     .linear_loss = "mse",
                     .linear_lr_mult = 1,
                     .chan_init_sd = 0.02,
                     .min_lr_frac = ts.adam.min_lr_frac,
                     .dropout_sites = "all",
                     .init = "xavier",
                     .val_units = "z",
                     .mae_units = "sigma",
                     .mae_unit_cap = CC_TRAIN_MAE_UNIT_CAP,
                     .val_frac = -1,
                     .wd = -1,
                     .epochs = 20,
                     .patience = 6,
                     .P = hp.patch_len,
                     .N = hp.n_patches,
                     .M = hp.norm_window,
                     .D = hp.d_model,
                     .H = hp.n_heads,
                     .L = hp.n_layers,
                     .FF = hp.d_ff,
                     .HZ = hp.horizon,
                     .R = 336,
                     .dropout = ts.dropout,
                     .lr = ts.adam.lr,
                     .clip = ts.adam.clip,
                     .warmup = ts.adam.warmup,
                     .batch = ts.batch,
                     .group = ts.group,
                     .threads = ts.n_threads,
                     .val_windows = ts.max_val_windows,
                     .seed_d = (double)ts.seed};
    cc_data_default_settings(&a->data);
}

/* After parsing: what was given (the defaults derived from the data and the fallback need
 * to know), the ETT recipe, and the checks of the values and of options that exclude each
 * other. CLI_RUN, or 2 after a message. */
static int train_check(TrainArgs *a, const CcOpt *opts, size_t nopts)
{
    a->hz_given = opt_given(opts, nopts, "horizon");
    a->P_given = opt_given(opts, nopts, "patch-len");
    a->N_given = opt_given(opts, nopts, "n-patches");
    a->M_given = opt_given(opts, nopts, "norm-window");
    a->R_given = opt_given(opts, nopts, "linear-window");
    a->warmup_given = opt_given(opts, nopts, "warmup");
    a->steps_given = opt_given(opts, nopts, "steps") || opt_given(opts, nopts, "epochs");
    static const char *const loss_opts[] = {"select", "mae-weight", "mse-weight", "nll-mean",
                                            "linear-init"};
    for (size_t i = 0; i < sizeof loss_opts / sizeof loss_opts[0]; i++)
        a->loss_given |= opt_given(opts, nopts, loss_opts[i]);
    if (a->fallback && (a->loss_given || a->protocol || a->resume || a->recalibrate ||
                        (a->R_given && a->R == 0))) {
        fprintf(stderr, "cellcast train: --fallback applies to a new tx/3 model with the default "
                        "loss and selection: it excludes --select, --mae-weight, --mse-weight, "
                        "--nll-mean, --linear-init, --protocol, --resume, --recalibrate and "
                        "--linear-window 0\n");
        return 2;
    }
    if (a->protocol)
        ett_recipe(a, opts, nopts);
    if (!a->select) /* the benchmark's own metric under --protocol ett */
        a->select = a->protocol ? "mse" : "nll";
    if (select_index(a->select) < 0) {
        fprintf(stderr, "cellcast train: --select must be nll, mse, mae or mase\n");
        return 2;
    }
    CcCalibSettings cs;
    if (calib_settings(a, &cs)) {
        fprintf(stderr, "cellcast train: --calib must be shrunk, pooled, quantile or none\n");
        return 2;
    }
    if (a->recalibrate) { /* the model is opened as --resume's, its weights kept */
        if (a->resume) {
            fprintf(stderr, "cellcast train: --recalibrate and --resume exclude each other\n");
            return 2;
        }
        a->resume = a->recalibrate;
    }
    if (strcmp(a->linear_init, "random") && strcmp(a->linear_init, "ridge") &&
        strcmp(a->linear_init, "ridge-kpi") && strcmp(a->linear_init, "naive")) {
        fprintf(stderr,
                "cellcast train: --linear-init must be random, ridge, ridge-kpi or naive\n");
        return 2;
    }
    if (strcmp(a->linear_loss, "mse") && strcmp(a->linear_loss, "mae")) {
        fprintf(stderr, "cellcast train: --linear-loss must be mse or mae\n");
        return 2;
    }
    if (!strcmp(a->linear_loss, "mae") && strcmp(a->linear_init, "ridge-kpi")) {
        fprintf(stderr, "cellcast train: --linear-loss mae needs --linear-init ridge-kpi\n");
        return 2;
    }
    if (!strcmp(a->linear_init, "naive") && a->R < 1) {
        fprintf(stderr, "cellcast train: --linear-init naive needs a linear path "
                        "(--linear-window > 0)\n");
        return 2;
    }
    if (strcmp(a->val_units, "z") && strcmp(a->val_units, "kpi")) {
        fprintf(stderr, "cellcast train: --val-units must be z or kpi\n");
        return 2;
    }
    if (strcmp(a->init, "xavier") && strcmp(a->init, "torch")) {
        fprintf(stderr, "cellcast train: --init must be xavier or torch\n");
        return 2;
    }
    if (strcmp(a->dropout_sites, "all") && strcmp(a->dropout_sites, "residual")) {
        fprintf(stderr, "cellcast train: --dropout-sites must be all or residual\n");
        return 2;
    }
    if (a->protocol && strcmp(a->protocol, "ett")) {
        fprintf(stderr, "cellcast train: unknown --protocol '%s' (ett)\n", a->protocol);
        return 2;
    }
    return CLI_RUN;
}

/* Parses the command line into *a: CLI_RUN, or the exit code (after --help or an error). */
static int train_opts(TrainArgs *a, int argc, char **argv)
{
    train_defaults(a);
    CcOpt opts[TRAIN_MAX_OPTS];
    size_t nopts = 0;
    data_options(a, opts, &nopts, TRAIN_MAX_OPTS);
    model_options(a, opts, &nopts, TRAIN_MAX_OPTS);
    optimiser_options(a, opts, &nopts, TRAIN_MAX_OPTS);
    selection_options(a, opts, &nopts, TRAIN_MAX_OPTS);
    run_options(a, opts, &nopts, TRAIN_MAX_OPTS);
    const CcOptsSpec spec = {
        .prog = "cellcast train",
        .usage = "cellcast train --data FILE --out MODEL.safetensors [options]",
        .about = "Trains a cellcast-tx/3 model on KPI history (see docs/training.md).",
        .opts = opts,
        .n_opts = (int)nopts,
    };
    int rc = cc_opts_parse(&spec, argc, argv, NULL);
    if (rc)
        return CLI_OPTS_EXIT(rc);
    return train_check(a, opts, nopts);
}

/* Fewest optimiser steps of a run whose length the command line leaves to --epochs' default. */
#define TRAIN_MIN_STEPS 1000
/* A KPI whose series' sds lie further apart than this gets warn_scale_spread's warning. */
#define TRAIN_SD_SPREAD_WARN 1e4
/* The options of a fallback run (train_fallback): the recipe for spiky series of
 * docs/training.md without its --norm-window, which is in steps and so not for every step. */
#define FALLBACK_OPTIONS                                                                           \
    "--mae-weight 1 --nll-mean 0 --select mase --linear-init naive --eval-start"

/* One training run: the data, the model, the trainer and the loop's state. */
/* A batch loss above TRAIN_SPIKE_RATIO times the median of the TRAIN_SPIKE_WINDOW batch
 * losses before it is a spike (counted from the 20th step on). A batch of 256 samples
 * whose median loss is m only reaches 10 m when a few samples cost hundreds of times their
 * share: targets tens of sigmas from their window (a spike in the data, or a flat window
 * followed by a move of many floors). Such outlier batches come alone and leave that median
 * where it was; the loss diverged when the median itself rises by more than
 * TRAIN_RISE_RATIO times its lowest so far (by its size, at least 1), or when
 * TRAIN_SPIKE_RUN spikes come in a row. Measured (docs/training.md "When the loss
 * diverges"): NAB realTraffic's travel-time spikes give spikes in 8-17 % of the batches,
 * at most 3 in a row, the median at most 0.27 above its lowest; ETTh1 and the hourly cells
 * 0.05; --lr 1 --clip 0 lifts it 1.3-6x. */
#define TRAIN_SPIKE_WINDOW 100
#define TRAIN_SPIKE_RATIO 10.0
#define TRAIN_RISE_RATIO 1.0
#define TRAIN_SPIKE_RUN 10

typedef struct Train {
    TrainArgs a;
    int is_ett, tty, G, sel;    /* sel: select_index of --select */
    double *abs_sum, *abs_best; /* per channel (series, KPI): the last validation's and the */
    double *sq_sum, *sq_best;   /*   kept weights' absolute and squared errors, observed */
    int64_t *abs_n;             /*   targets */
    int have_abs_best;
    double *mase_scale; /* --select mae|mase: per channel */
    double *mae_unit;   /* --mae-units mase: per channel, 1 / its MASE scale */
    const char *split;
    char split_buf[64];
    CcDataset *ds;
    CcRange *rtrain, *rval;
    double zmean[CC_MAX_FEATURES], zstd[CC_MAX_FEATURES]; /* ett: the train slice's */
    float zvar[CC_MAX_FEATURES];                          /* --val-units kpi: zstd² */
    CcModel *m;
    CcTrainSettings ts;
    CcTrainer *tr;
    int64_t total_steps;
    double max_loss; /* the largest batch loss of the run */
    int64_t max_loss_step;
    /* Divergence: the last TRAIN_SPIKE_WINDOW batch losses (a ring), the batches above
     * TRAIN_SPIKE_RATIO times the median of those before them, the first such one */
    double recent_loss[TRAIN_SPIKE_WINDOW];
    int64_t n_recent, n_spikes, first_spike_step;
    double first_spike_loss, first_spike_median;
    int spike_run, longest_spike_run;  /* spikes in a row: now, the most */
    double lowest_median, top_rise;    /* the running median's lowest; its largest rise */
    int64_t lowest_median_step;        /*   over the lowest before, by the lowest's size */
    int64_t diverged_step;             /* 0, or the step the loss was seen to diverge at, */
    int diverged_by_run;               /*   by TRAIN_SPIKE_RUN spikes in a row (else by */
    double diverged_from, diverged_to; /*   the median's rise: its lowest, then) */
    int64_t best_step;                 /* the step of the kept weights (0 = the start) */
    double first_val, last_val;        /* the first and the last validation's criterion */
    int64_t first_val_step, last_val_step;
    float *best_block; /* the weights of the best validation so far */
    double best, bad;  /* best validation value, validations since */
    int saved_any;
    double vs_last;     /* the kept weights' val_mae_vs_last (train_naive_check), or NaN */
    double vs_last_mse; /*   and val_mse_vs_last */
    const struct Train *first_run;     /* a fallback run (train_fallback): the run it retrains */
    const volatile sig_atomic_t *stop; /* cmd_train_stoppable's flag (the trainer's
                                        * settings.stop), or NULL */
    int canceled;                      /* the trainer answered -ECANCELED */
    char state_path[4096];
    char err[1024];
} Train;

/* The data, its train/validation ranges (and the ETT protocol's z-scoring). 0 or -1. */
static int train_data(Train *t)
{
    const TrainArgs *a = &t->a;
    CcDataSettings dsets = a->data;
    dsets.features = a->features;
    dsets.step_seconds = (int64_t)a->step_s;
    CcDataReport rep;
    if (cc_data_open_file(&t->ds, a->data_path, &dsets, &rep, t->err, sizeof t->err) < 0) {
        fprintf(stderr, "cellcast train: %s\n", t->err);
        return -1;
    }
    char summary[2048];
    cc_data_report_format(&rep, t->ds, summary, sizeof summary);
    if (!a->quiet && !t->first_run)
        fprintf(stderr, "cellcast train: %s\n", summary);
    if (t->ds->n_features > CC_MAX_FEATURES) {
        fprintf(stderr,
                "cellcast train: the data has %d KPIs, a model takes at most %d: choose them "
                "with --features\n",
                t->ds->n_features, CC_MAX_FEATURES);
        return -1;
    }
    t->split = a->split;
    if (t->is_ett) {
        CcRange b[3];
        if (cc_data_ett_split(t->ds->step_seconds, b)) {
            fprintf(stderr,
                    "cellcast train: --protocol ett wants hourly (ETTh) or 15-minute (ETTm) "
                    "steps, the data has %lld s\n",
                    (long long)t->ds->step_seconds);
            return -1;
        }
        snprintf(t->split_buf, sizeof t->split_buf, "rows:%d-%d,%d-%d,%d-%d", b[0].begin, b[0].end,
                 b[1].begin, b[1].end, b[2].begin, b[2].end);
        t->split = t->split_buf;
    } else if (!t->split && a->val_frac > 0) {
        snprintf(t->split_buf, sizeof t->split_buf, "%.6g,%.6g", 0.8 - a->val_frac, a->val_frac);
        t->split = t->split_buf;
    } else if (!t->split)
        t->split = "0.7,0.1";
    const CcDataset *ds = t->ds;
    t->rtrain = calloc((size_t)ds->n_series, sizeof *t->rtrain);
    t->rval = calloc((size_t)ds->n_series, sizeof *t->rval);
    if (!t->rtrain || !t->rval) {
        fprintf(stderr, "cellcast train: out of memory\n");
        return -1;
    }
    for (int s = 0; s < ds->n_series; s++) {
        CcRange r3[3];
        if (cc_data_split(t->split, ds->series[s].T, r3, t->err, sizeof t->err) < 0) {
            fprintf(stderr, "cellcast train: --split (series %s): %s\n", ds->series[s].cell_id,
                    t->err);
            return -1;
        }
        t->rtrain[s] = r3[0];
        t->rval[s] = r3[1];
    }
    if (t->is_ett) {
        if (ds->n_series != 1) {
            fprintf(stderr, "cellcast train: --protocol ett wants one series (a wide file)\n");
            return -1;
        }
        cc_data_stats(t->ds, 0, t->rtrain[0], t->zmean, t->zstd);
        cc_data_standardize(t->ds, t->zmean, t->zstd);
    }
    return 0;
}

/* --init torch: torch.nn.Linear's default start, U(±1/sqrt(fan_in)) for the weights (the
 * Xavier draws of cc_model_init_random rescaled: both uniform) and the biases alike. */
static void init_torch(CcModel *m, uint64_t seed)
{
    const CcHparams *hp = &m->hp;
    const double D = hp->d_model, FF = hp->d_ff, IN = hp->patch_len + 4, HZ2 = 2.0 * hp->horizon;
    const size_t L = (size_t)hp->n_layers;
    struct {
        float *w, *b;
        double in, out;
        size_t nw, nb;
    } lin[] = {
        {m->w.embed_w, m->w.embed_b, IN, D, (size_t)(D * IN), (size_t)D},
        {m->w.qkv_w, m->w.qkv_b, D, D, L * 3 * (size_t)(D * D), L * 3 * (size_t)D},
        {m->w.o_w, m->w.o_b, D, D, L * (size_t)(D * D), L * (size_t)D},
        {m->w.up_w, m->w.up_b, D, FF, L * (size_t)(FF * D), L * (size_t)FF},
        {m->w.down_w, m->w.down_b, FF, D, L * (size_t)(D * FF), L * (size_t)D},
        {m->w.head_w, NULL, D, HZ2, (size_t)(HZ2 * D), 0}, /* its bias stays 0 */
    };
    uint64_t s = seed ^ 0x746f726368ULL; /* "torch" */
    for (size_t i = 0; i < sizeof lin / sizeof lin[0]; i++) {
        double bound = 1 / sqrt(lin[i].in), k = bound / sqrt(6 / (lin[i].in + lin[i].out));
        for (size_t j = 0; j < lin[i].nw; j++)
            lin[i].w[j] *= (float)k;
        for (size_t j = 0; j < lin[i].nb; j++)
            lin[i].b[j] = (float)((2 * cc_rng_uniform(&s) - 1) * bound);
    }
}

/* A look-back (P·N), normalisation window and linear window that the command line leaves to
 * the defaults (336 steps each: two weeks of hours) are shortened to half the training rows
 * of the longest series when they are longer: 365 days, or a few hundred rows of anything,
 * would otherwise train every sample as a cold start and fit the linear path on steps before
 * the series (their first value repeated). Half leaves the other half as end steps with a full
 * look-back. The patch length stays (the spec's token). -1 when no series has a patch and a
 * horizon of training rows. */
static int data_defaults(Train *t)
{
    TrainArgs *a = &t->a;
    int T = 0;
    for (int s = 0; s < t->ds->n_series; s++)
        if (t->rtrain[s].end - t->rtrain[s].begin > T)
            T = t->rtrain[s].end - t->rtrain[s].begin;
    int HZ = t->is_ett && !a->hz_given ? 96 : a->HZ;
    if (T < a->P + HZ) { /* the trainer's first sample: one patch, then the horizon */
        fprintf(stderr,
                "cellcast train: no training window: the longest series has %d training rows "
                "(split %s), a sample needs one patch (%d) and the horizon (%d); give more "
                "rows, a shorter --horizon or --patch-len, or a larger training share "
                "(--split)\n",
                T, t->split, a->P, HZ);
        return -1;
    }
    int half = T / 2, P = a->P, N = a->N, M = a->M, R = a->R;
    if (!a->N_given && P * N > half)
        a->N = half / P > 1 ? half / P : 1;
    if (!a->M_given && a->M > half)
        a->M = half > P ? half : P;
    if (!a->R_given && a->R > half)
        a->R = half;
    if (t->first_run) /* the first run said what follows */
        return 0;
    if (N != a->N || M != a->M || R != a->R)
        fprintf(stderr,
                "cellcast train: the longest series has %d training rows: look-back %d steps "
                "(--n-patches %d of --patch-len %d), --norm-window %d, --linear-window %d "
                "(defaults %d, %d, %d shortened to at most half the training rows; give them "
                "to override)\n",
                T, a->P * a->N, a->N, a->P, a->M, a->R, P * N, M, R);
    if (a->P * a->N > half)
        fprintf(stderr,
                "cellcast train: warning: the look-back (%d steps) is longer than half the "
                "longest series' %d training rows: most samples are cold starts\n",
                a->P * a->N, T);
    return 0;
}

/* Series of one KPI column whose scales lie orders of magnitude apart (NAB's 57 files as
 * cells: sds from 0.017 to 7e7) cannot share the one norm.floor per KPI of the spec: it
 * flattens the small ones or lets the large ones' flat stretches blow the loss up (to 1e14
 * there, before --xn-bound left such samples out). Said once per KPI, with what to do. */
static void warn_scale_spread(const CcDataset *ds, const CcRange *train)
{
    double lo[CC_DATA_MAX_FEATURES], hi[CC_DATA_MAX_FEATURES];
    cc_train_sd_spread(ds, train, lo, hi);
    for (int f = 0; f < ds->n_features; f++)
        if (lo[f] > 0 && hi[f] > TRAIN_SD_SPREAD_WARN * lo[f])
            fprintf(stderr,
                    "cellcast train: warning: KPI '%s': the series' sds range from %.3g to "
                    "%.3g; one norm.floor per KPI cannot suit both ends (windows after flat "
                    "stretches of the large ones are left out of the loss, --xn-bound): train "
                    "series of like scale together, or as other KPIs\n",
                    ds->features[f], lo[f], hi[f]);
}

/* --resume's model (its features must be the data's), or a new one. 0 or -1. */
static int train_model(Train *t)
{
    const TrainArgs *a = &t->a;
    const CcDataset *ds = t->ds;
    if (!a->resume && data_defaults(t) < 0)
        return -1;
    if (a->resume) {
        if (cc_model_open_file(&t->m, a->resume, t->err, sizeof t->err) < 0) {
            fprintf(stderr, "cellcast train: --resume %s: %s\n", a->resume, t->err);
            return -1;
        }
        if (t->m->hp.n_features != ds->n_features) {
            fprintf(stderr, "cellcast train: %s has %d features, the data %d\n", a->resume,
                    t->m->hp.n_features, ds->n_features);
            return -1;
        }
        for (int f = 0; f < ds->n_features; f++)
            if (strcmp(t->m->hp.features[f], ds->features[f])) {
                fprintf(stderr,
                        "cellcast train: feature %d is '%s' in %s, '%s' in the data "
                        "(use --features)\n",
                        f, t->m->hp.features[f], a->resume, ds->features[f]);
                return -1;
            }
    } else {
        CcHparams hp;
        cc_hparams_default(&hp);
        hp.n_features = ds->n_features;
        for (int f = 0; f < ds->n_features; f++)
            snprintf(hp.features[f], CC_FEATURE_NAME_MAX, "%s", ds->features[f]);
        hp.patch_len = a->P, hp.n_patches = a->N, hp.norm_window = a->M, hp.d_model = a->D;
        hp.n_heads = a->H, hp.n_layers = a->L, hp.d_ff = a->FF;
        hp.horizon = t->is_ett && !a->hz_given ? 96 : a->HZ;
        hp.linear_window = a->R;
        hp.step_seconds = ds->step_seconds;
        hp.tz_offset_s = a->tz;
        if (cc_model_open(&t->m, &hp, t->err, sizeof t->err) < 0) {
            fprintf(stderr, "cellcast train: %s\n", t->err);
            return -1;
        }
        cc_model_init_random(t->m, (uint64_t)a->seed_d);
        if (!strcmp(a->init, "torch"))
            init_torch(t->m, (uint64_t)a->seed_d);
        /* cc_model_init_random draws the channel embedding with sd 0.02 */
        for (size_t i = 0; i < (size_t)hp.n_features * hp.d_model; i++)
            t->m->w.chan[i] *= (float)(a->chan_init_sd / 0.02);
        if (a->R > 0) {
            /* the trial's start: the linear path (NLinear) leads, the head's share grows */
            size_t nh = (size_t)2 * hp.horizon * hp.d_model;
            for (size_t i = 0; i < nh; i++)
                t->m->w.head_w[i] *= (float)a->head_scale;
            if (!strcmp(a->linear_init, "naive"))
                cc_train_naive_start(t->m);
            if (cc_train_norm_floor(ds, t->rtrain, a->floor_frac, t->m->w.norm_floor) < 0) {
                fprintf(stderr, "cellcast train: out of memory\n");
                return -1;
            }
            if (!t->first_run)
                warn_scale_spread(ds, t->rtrain);
        }
    }
    if (t->m->hp.step_seconds != ds->step_seconds) {
        fprintf(stderr, "cellcast train: the data's step is %llds, the model's %llds\n",
                (long long)ds->step_seconds, (long long)t->m->hp.step_seconds);
        return -1;
    }
    return 0;
}

/* Each channel's MASE scale over the training rows: a day's mean absolute change (one
 * step's when that is not > 0), into scale (n_series · F). 0 or -ENOMEM. */
static int channel_scales(const CcDataset *ds, const CcRange *train, double *scale)
{
    const size_t nc = (size_t)ds->n_series * ds->n_features;
    const int64_t S = ds->step_seconds;
    double *one = malloc((nc + 1) * sizeof *one);
    if (!one)
        return -ENOMEM;
    cc_train_mase_scales(ds, train, S > 0 && 86400 % S == 0 ? (int)(86400 / S) : 1, scale);
    cc_train_mase_scales(ds, train, 1, one);
    for (size_t c = 0; c < nc; c++)
        scale[c] = scale[c] > 0 ? scale[c] : one[c];
    free(one);
    return 0;
}

/* The trainer settings from the options. 0 or -1. */
static int train_settings(Train *t)
{
    const TrainArgs *a = &t->a;
    CcTrainSettings *ts = &t->ts;
    cc_train_default_settings(ts);
    ts->dropout = (float)a->dropout;
    ts->batch = a->batch;
    ts->group = a->group;
    ts->n_threads = a->threads;
    ts->seed = (uint64_t)a->seed_d;
    ts->max_val_windows = a->val_windows;
    ts->ema = (float)a->ema;
    ts->mae_weight = (float)a->mae;
    ts->mse_weight = (float)a->mse;
    ts->nll_mean = (float)a->nll_mean;
    ts->logsig_min = (float)a->logsig_min;
    ts->nll_huber = (float)a->nll_huber;
    ts->linear_freeze = (int64_t)a->linear_freeze;
    ts->linear_lr_mult = (float)a->linear_lr_mult;
    ts->dropout_sites = strcmp(a->dropout_sites, "all") ? CC_DROPOUT_RESIDUAL : CC_DROPOUT_ALL;
    ts->decay_all = a->decay_all;
    ts->xn_bound = (float)a->xn_bound;
    ts->stop = t->stop;
    if (!strcmp(a->mae_units, "mase")) {
        const size_t nc = (size_t)t->ds->n_series * t->ds->n_features;
        if (!(t->mae_unit = malloc((nc + 1) * sizeof *t->mae_unit)) ||
            channel_scales(t->ds, t->rtrain, t->mae_unit) < 0) {
            fprintf(stderr, "cellcast train: out of memory\n");
            return -1;
        }
        for (size_t c = 0; c < nc; c++)
            t->mae_unit[c] = t->mae_unit[c] > 0 ? 1 / t->mae_unit[c] : 0;
        ts->mae_unit = t->mae_unit;
        ts->mae_unit_cap = a->mae_unit_cap;
    } else if (strcmp(a->mae_units, "sigma")) {
        fprintf(stderr, "cellcast train: --mae-units must be sigma or mase\n");
        return -1;
    }
    if (t->is_ett && !strcmp(a->val_units, "kpi")) {
        for (int f = 0; f < t->ds->n_features; f++)
            t->zvar[f] = (float)(t->zstd[f] * t->zstd[f]);
        ts->val_mse_weight = t->zvar;
    }
    ts->adam.lr = (float)a->lr;
    ts->adam.warmup = a->warmup;
    ts->adam.clip = (float)a->clip;
    ts->adam.min_lr_frac = (float)a->min_lr_frac;
    if (a->wd >= 0 || a->adamw)
        ts->adam.weight_decay = a->wd >= 0 ? (float)a->wd : 0.01f;
    if (!strcmp(a->schedule, "invsqrt"))
        ts->adam.schedule = CC_SCHED_INVSQRT;
    else if (!strcmp(a->schedule, "cosine"))
        ts->adam.schedule = CC_SCHED_COSINE;
    else if (!strcmp(a->schedule, "constant"))
        ts->adam.schedule = CC_SCHED_CONSTANT;
    else {
        fprintf(stderr, "cellcast train: --schedule must be invsqrt, cosine or constant\n");
        return -1;
    }
    return 0;
}

/* The trainer. The step count is needed by the cosine schedule before the trainer exists,
 * and the trainer knows the sample count: it is opened twice. 0 or -1. */
static int train_open(Train *t)
{
    TrainArgs *a = &t->a;
    const int batch = a->batch;
    t->G = a->group == 0 || a->group > t->m->hp.patch_len ? t->m->hp.patch_len : a->group;
    if (cc_trainer_open(&t->tr, t->m, t->ds, t->rtrain, t->rval, &t->ts, t->err, sizeof t->err) <
        0) {
        fprintf(stderr, "cellcast train: %s\n", t->err);
        return -1;
    }
    int64_t ntr, nva;
    cc_trainer_counts(t->tr, &ntr, &nva);
    int64_t spe = (ntr + (int64_t)batch * t->G - 1) / ((int64_t)batch * t->G);
    t->total_steps = a->steps_d > 0 ? (int64_t)a->steps_d : spe * a->epochs;
    /* Short data: 20 epochs of a few hundred samples are 20-200 steps, inside the 100 steps
     * of warmup, and a validation every epoch ends it after 6 of them. At least
     * TRAIN_MIN_STEPS steps, validated 50 times, warmup at most a tenth of the run (the
     * early stop on validation bounds the overfitting; without a validation sample there is
     * none, and the run stays short). Data of 50+ steps an epoch, and recipes that give
     * --steps, --eval-every and --warmup, are unchanged. */
    if (!a->steps_given && !t->is_ett && nva > 0 && t->total_steps < TRAIN_MIN_STEPS)
        t->total_steps = TRAIN_MIN_STEPS;
    if (!a->eval_every) {
        int64_t ev = spe > t->total_steps / 50 ? spe : t->total_steps / 50;
        a->eval_every = ev < 200 ? (int)(ev > 0 ? ev : 1) : 200;
    }
    if (!a->warmup_given && t->ts.adam.warmup > t->total_steps / 10)
        t->ts.adam.warmup = (int)(t->total_steps / 10);
    cc_trainer_close(&t->tr);
    t->ts.adam.total_steps = t->total_steps;
    if (cc_trainer_open(&t->tr, t->m, t->ds, t->rtrain, t->rval, &t->ts, t->err, sizeof t->err) <
        0) {
        fprintf(stderr, "cellcast train: %s\n", t->err);
        return -1;
    }
    if (nva == 0)
        fprintf(stderr,
                "cellcast train: warning: no validation sample (every validation "
                "range is shorter than the horizon %d): training loss stands in "
                "for it (checkpoint and early stop on the training loss; no calibration): "
                "give a larger validation share (--split) or a shorter --horizon\n",
                t->m->hp.horizon);
    if (!a->quiet)
        fprintf(stderr,
                "cellcast train: %d series, F=%d, %lld training samples, %lld validation "
                "samples (split %s); %lld steps of %d windows x %d end steps (%lld per "
                "epoch), %lld parameters\n",
                t->ds->n_series, t->ds->n_features, (long long)ntr, (long long)nva, t->split,
                (long long)t->total_steps, batch, t->G, (long long)spe, (long long)t->m->n_params);
    return 0;
}

/* "a,b,c" of n values with %.9g. */
static void join_values(char *buf, size_t cap, const double *v, int n)
{
    size_t len = 0;
    buf[0] = 0;
    for (int i = 0; i < n && len < cap; i++)
        len += (size_t)snprintf(buf + len, cap - len, "%s%.9g", i ? "," : "", v[i]);
}

/* The model's metadata: name, version, data, creation time, command line, seed, split. */
static void train_metadata(Train *t, int argc, char **argv)
{
    const TrainArgs *a = &t->a;
    CcHparams *h = &t->m->hp;
    char buf[512], cmdline[512] = "cellcast";
    size_t len = strlen(cmdline);
    for (int i = 0; i < argc && len + 2 < sizeof cmdline; i++)
        len += (size_t)snprintf(cmdline + len, sizeof cmdline - len, " %s", argv[i]);
    snprintf(h->name, sizeof h->name, "%s", a->name);
    snprintf(h->version, sizeof h->version, "%s", CC_VERSION);
    snprintf(h->trained_on, sizeof h->trained_on, "%s", a->data_path);
    if (cc_time_format_rfc3339(time(NULL), h->created_at, sizeof h->created_at))
        h->created_at[0] = 0;
    cc_hparams_set_extra(h, "command", cmdline);
    snprintf(buf, sizeof buf, "%llu", (unsigned long long)t->ts.seed);
    cc_hparams_set_extra(h, "seed", buf);
    cc_hparams_set_extra(h, "split", t->split);
    cc_hparams_set_extra(h, "select", a->select);
    if (t->first_run) {
        snprintf(buf, sizeof buf,
                 FALLBACK_OPTIONS " (the first run's val_mae_vs_last %.4f, val_mse_vs_last %.4f)",
                 t->first_run->vs_last, t->first_run->vs_last_mse);
        cc_hparams_set_extra(h, "fallback", buf);
    }
    if (a->ema > 0) {
        snprintf(buf, sizeof buf, "%g", a->ema);
        cc_hparams_set_extra(h, "ema", buf);
    }
    if (t->is_ett) {
        cc_hparams_set_extra(h, "protocol", "ett");
        join_values(buf, sizeof buf, t->zmean, t->ds->n_features);
        cc_hparams_set_extra(h, "zscore_mean", buf);
        join_values(buf, sizeof buf, t->zstd, t->ds->n_features);
        cc_hparams_set_extra(h, "zscore_std", buf);
    }
}

/* The per-channel absolute errors (every run: the end compares them with the last value's)
 * and, --select mae|mase, the MASE scales of the training rows. The MASE scale follows
 * `cellcast eval`'s: a day's seasonal naive, one step when the step does not divide a day.
 * 0 or -1. */
static int train_select_open(Train *t)
{
    const TrainArgs *a = &t->a;
    size_t nc = (size_t)t->ds->n_series * t->ds->n_features;
    t->abs_sum = calloc(nc, sizeof *t->abs_sum);
    t->abs_best = calloc(nc, sizeof *t->abs_best);
    t->sq_sum = calloc(nc, sizeof *t->sq_sum);
    t->sq_best = calloc(nc, sizeof *t->sq_best);
    t->abs_n = calloc(nc, sizeof *t->abs_n);
    if (!t->abs_sum || !t->abs_best || !t->sq_sum || !t->sq_best || !t->abs_n) {
        fprintf(stderr, "cellcast train: out of memory\n");
        return -1;
    }
    if (t->sel != SEL_MAE && t->sel != SEL_MASE)
        return 0;
    if (!(t->mase_scale = calloc(nc, sizeof *t->mase_scale))) {
        fprintf(stderr, "cellcast train: out of memory\n");
        return -1;
    }
    int64_t S = t->ds->step_seconds;
    int season = a->mase_season ? a->mase_season : S > 0 && 86400 % S == 0 ? (int)(86400 / S) : 1;
    cc_train_mase_scales(t->ds, t->rtrain, season, t->mase_scale);
    if (t->sel == SEL_MASE && !a->quiet)
        fprintf(stderr, "cellcast train: --select mase: seasonal naive of %d steps\n", season);
    return 0;
}

/* The validation values of the last cc_trainer_validate: v[0] NLL, v[1] MSE (given), v[2]
 * MAE and v[3] the MASE criterion (NaN unless --select mae|mase). */
static void val_abs_values(Train *t, double *v)
{
    size_t nc = (size_t)t->ds->n_series * t->ds->n_features;
    cc_trainer_val_abserr(t->tr, t->abs_sum, t->sq_sum, t->abs_n);
    double sum = 0;
    int64_t n = 0;
    for (size_t c = 0; c < nc; c++)
        sum += t->abs_sum[c], n += t->abs_n[c];
    v[2] = n ? sum / (double)n : NAN;
    v[3] = t->mase_scale ? cc_train_mase(t->abs_sum, t->abs_n, t->mase_scale, nc) : NAN;
}

/* The absolute errors of the last validation are the kept weights'. */
static void keep_abs(Train *t)
{
    size_t bytes = (size_t)t->ds->n_series * t->ds->n_features * sizeof(double);
    memcpy(t->abs_best, t->abs_sum, bytes);
    memcpy(t->sq_best, t->sq_sum, bytes);
    t->have_abs_best = 1;
}

/* The --select criterion among the validation values v (val_abs_values). */
static double criterion(const Train *t, const double *v) { return v[t->sel]; }

/* The validation values in the metadata of the model file. */
static void set_val_extras(CcHparams *h, const double *v)
{
    char key[16], vb[64];
    for (int i = 0; i < SEL_COUNT; i++)
        if (isfinite(v[i])) {
            snprintf(key, sizeof key, "val_%s", select_names[i]);
            snprintf(vb, sizeof vb, i ? "%.6g" : "%.6f", v[i]);
            cc_hparams_set_extra(h, key, vb);
        }
}

/* Validates after `step` into v (val_abs_values); a new best is kept and saved to --out.
 * 0 or -1. */
static int train_validate(Train *t, int64_t step, double loss_ema, double *v)
{
    CcModel *m = t->m;
    int r = cc_trainer_validate(t->tr, &v[0], &v[1]);
    if (r == -ECANCELED) {
        t->canceled = 1;
        return -1;
    }
    val_abs_values(t, v);
    if (r == -EAGAIN) /* no validation data: keep the last weights */
        v[0] = v[1] = v[2] = v[3] = loss_ema;
    double val = criterion(t, v);
    if (isnan(t->first_val)) {
        t->first_val = val;
        t->first_val_step = step;
    }
    t->last_val = val;
    t->last_val_step = step;
    if (val < t->best) {
        t->best = val;
        t->best_step = step;
        t->bad = 0;
        memcpy(t->best_block, cc_trainer_eval_weights(t->tr), m->n_params * sizeof(float));
        if (r == 0)
            keep_abs(t);
        char sb[64];
        snprintf(sb, sizeof sb, "%lld", (long long)step);
        set_val_extras(&m->hp, v);
        cc_hparams_set_extra(&m->hp, "train_steps", sb);
        CcModel view = *m; /* the validated weights (the EMA with --ema) */
        view.block = t->best_block;
        cc_params_point(&view.w, &view.hp, t->best_block);
        if (cc_model_save(&view, t->a.out_path, t->err, sizeof t->err) < 0) {
            fprintf(stderr, "\ncellcast train: %s\n", t->err);
            return -1;
        }
        t->saved_any = 1;
    } else {
        t->bad++;
    }
    double ex[2] = {t->best, t->bad};
    if (cc_trainer_save_state(t->tr, t->state_path, ex, 2, t->err, sizeof t->err) < 0)
        fprintf(stderr, "\ncellcast train: %s\n", t->err);
    return 0;
}

/* Progress after a step: a status line on a terminal, a line per validation elsewhere.
 * v: the batch loss's running mean, then the validation values (val_abs_values). */
static void train_progress(const Train *t, int64_t step, int64_t start_step, double el,
                           int evaluated, const double *v, float lr_now, int64_t *last_print)
{
    const TrainArgs *a = &t->a;
    const double loss_ema = v[0], vnll = v[1], vmse = v[2], vsel = criterion(t, v + 1);
    int64_t tokens_per_step = (int64_t)a->batch * (t->m->hp.n_patches + t->G);
    double rate = (step - start_step) / (el > 1e-9 ? el : 1e-9);
    double eta = (t->total_steps - step) / (rate > 0 ? rate : 1e-9);
    if (a->max_minutes > 0 && eta > a->max_minutes * 60 - el)
        eta = a->max_minutes * 60 - el;
    if (a->quiet || !(t->tty ? cc_now_ns() - *last_print > 200000000LL || evaluated : evaluated))
        return;
    int64_t ntr;
    cc_trainer_counts(t->tr, &ntr, NULL);
    double epoch = (double)step * a->batch * t->G / (double)(ntr ? ntr : 1);
    /* the criterion, when it is not one of the two always shown */
    char crit[48] = "";
    if (t->sel != SEL_NLL && t->sel != SEL_MSE)
        snprintf(crit, sizeof crit, " %s%s %.4g", t->tty ? "" : "val_", a->select, vsel);
    if (t->tty) {
        char etab[32], elb[32];
        fmt_dur(etab, sizeof etab, eta);
        fmt_dur(elb, sizeof elb, el);
        fprintf(stderr,
                "\r\033[Kepoch %.2f  step %lld/%lld  loss %.4f  val %.4f mse %.4g%s (best %s "
                "%.4g)  lr %.2e  %.0f tok/s  %s  ETA %s",
                epoch, (long long)step, (long long)t->total_steps, loss_ema, vnll, vmse, crit,
                a->select, t->best, lr_now, rate * tokens_per_step, elb, etab);
        *last_print = cc_now_ns();
    } else {
        fprintf(stderr,
                "step %lld/%lld epoch %.2f loss %.4f val %.4f val_mse %.4g%s best_%s %.4g "
                "lr %.2e tok/s %.0f elapsed %.0fs\n",
                (long long)step, (long long)t->total_steps, epoch, loss_ema, vnll, vmse, crit,
                a->select, t->best, lr_now, rate * tokens_per_step, el);
    }
}

static int cmp_dbl(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Counts a batch loss above TRAIN_SPIKE_RATIO times the running median (the losses of the
 * TRAIN_SPIKE_WINDOW steps before it; from 20 of them on) and the spikes in a row, follows
 * that median's rise over its lowest, notes the first step the loss diverged at (see
 * TRAIN_RISE_RATIO), then adds the loss to the ring. */
static void note_spike(Train *t, int64_t step, double loss)
{
    int n = t->n_recent < TRAIN_SPIKE_WINDOW ? (int)t->n_recent : TRAIN_SPIKE_WINDOW;
    if (n >= 20 && isfinite(loss)) {
        double sorted[TRAIN_SPIKE_WINDOW];
        memcpy(sorted, t->recent_loss, (size_t)n * sizeof *sorted);
        qsort(sorted, (size_t)n, sizeof *sorted, cmp_dbl);
        double med = n % 2 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
        /* a loss can be negative (the NLL's log-sigma term): scale by its size, at least 1 */
        double ref = fmax(fabs(med), 1.0);
        if (!t->lowest_median_step || med < t->lowest_median) {
            t->lowest_median = med;
            t->lowest_median_step = step;
        }
        double rise = (med - t->lowest_median) / fmax(fabs(t->lowest_median), 1.0);
        t->top_rise = fmax(t->top_rise, rise);
        if (loss - med > TRAIN_SPIKE_RATIO * ref - ref) {
            if (!t->n_spikes++) {
                t->first_spike_step = step;
                t->first_spike_loss = loss;
                t->first_spike_median = med;
            }
            t->spike_run++;
            t->longest_spike_run =
                t->spike_run > t->longest_spike_run ? t->spike_run : t->longest_spike_run;
        } else {
            t->spike_run = 0;
        }
        if (!t->diverged_step && (rise > TRAIN_RISE_RATIO || t->spike_run >= TRAIN_SPIKE_RUN)) {
            t->diverged_step = step;
            t->diverged_by_run = rise <= TRAIN_RISE_RATIO;
            t->diverged_from = t->lowest_median;
            t->diverged_to = med;
        }
    }
    t->recent_loss[t->n_recent++ % TRAIN_SPIKE_WINDOW] = loss;
}

/* After the run: the kept step, and warnings when the loss diverged (batch spikes, or the
 * last validation worse than the first by more than 10 % of its size) or when the kept
 * weights are the start or the first validation's (training did not improve on them). */
static void train_report_kept(const Train *t)
{
    const char *sel = t->a.select;
    int64_t done = cc_trainer_steps_done(t->tr);
    int ridge = strncmp(t->a.linear_init, "ridge", 5) == 0 && t->m->hp.linear_window > 0;
    if (t->a.quiet) {
    } else if (t->best_step < 0) {
        fprintf(stderr, "cellcast train: kept the resumed run's best weights (val %s %.4g)\n", sel,
                t->best);
    } else {
        fprintf(stderr, "cellcast train: kept the weights of step %lld of %lld (val %s %.4g%s)\n",
                (long long)t->best_step, (long long)done, sel, t->best,
                t->best_step > 0 ? ""
                : ridge          ? "; the start: the ridge fit of the linear path"
                                 : "; the start");
    }
    if (t->diverged_step && t->diverged_by_run)
        fprintf(stderr,
                "cellcast train: warning: the training loss diverged: %d batch losses in a row "
                "above %gx the median of the %d before (at step %lld; largest %.4g at step "
                "%lld); a lower --lr or --clip? docs/training.md \"When the loss diverges\"\n",
                TRAIN_SPIKE_RUN, TRAIN_SPIKE_RATIO, TRAIN_SPIKE_WINDOW, (long long)t->diverged_step,
                t->max_loss, (long long)t->max_loss_step);
    else if (t->diverged_step)
        fprintf(stderr,
                "cellcast train: warning: the training loss diverged: the median of the last %d "
                "batch losses rose from %.4g to %.4g by step %lld (largest batch loss %.4g at "
                "step %lld); a lower --lr or --clip? docs/training.md \"When the loss "
                "diverges\"\n",
                TRAIN_SPIKE_WINDOW, t->diverged_from, t->diverged_to, (long long)t->diverged_step,
                t->max_loss, (long long)t->max_loss_step);
    else if (t->n_spikes && !t->a.quiet)
        fprintf(stderr,
                "cellcast train: %lld outlier batch(es): batch losses above %gx the median of "
                "the %d before, at most %d in a row, while that median stayed within %.0f %% of "
                "its lowest (the loss did not diverge): a few targets tens of sigmas from their "
                "window, a spike in the data or a KPI that is flat, then moves (first at step "
                "%lld: %.4g, median %.4g; largest %.4g at step %lld); docs/training.md \"When "
                "the loss diverges\"\n",
                (long long)t->n_spikes, TRAIN_SPIKE_RATIO, TRAIN_SPIKE_WINDOW, t->longest_spike_run,
                100 * t->top_rise, (long long)t->first_spike_step, t->first_spike_loss,
                t->first_spike_median, t->max_loss, (long long)t->max_loss_step);
    if (isfinite(t->first_val) && isfinite(t->last_val) && t->last_val_step > t->first_val_step &&
        t->last_val - t->first_val > 0.1 * fmax(fabs(t->first_val), 0.1))
        fprintf(stderr,
                "cellcast train: warning: the validation %s diverged: %.4g at step %lld, %.4g "
                "at the last validation (step %lld)\n",
                sel, t->first_val, (long long)t->first_val_step, t->last_val,
                (long long)t->last_val_step);
    if (done > 0 && t->best_step == 0)
        fprintf(stderr,
                "cellcast train: warning: kept the start (step 0): no step of training "
                "improved the validation %s on it\n",
                sel);
    else if (done > 0 && t->best_step == t->first_val_step && t->best_step * 10 < done)
        fprintf(stderr,
                "cellcast train: warning: kept the first validated weights (step %lld of "
                "%lld): no later step improved the validation %s\n",
                (long long)t->best_step, (long long)done, sel);
}

/* Steps until the budget, --max-minutes, Ctrl-C or patience; *why says which. 0 or -1. */
static int train_loop(Train *t, const char **why)
{
    const TrainArgs *a = &t->a;
    int64_t t0 = cc_now_ns(), last_print = 0, start_step = cc_trainer_steps_done(t->tr);
    double loss_ema = NAN, v[1 + SEL_COUNT] = {NAN, NAN, NAN, NAN, NAN}; /* loss_ema, validation */
    *why = "step budget reached";
    for (;;) {
        int64_t step = cc_trainer_steps_done(t->tr);
        double el = (cc_now_ns() - t0) / 1e9;
        if (step >= t->total_steps)
            break;
        if (a->max_minutes > 0 && el >= a->max_minutes * 60) {
            *why = "--max-minutes reached";
            break;
        }
        if (g_stop) {
            *why = "interrupted";
            break;
        }
        double loss;
        float lr_now;
        int r = cc_trainer_step(t->tr, &loss, &lr_now, NULL);
        if (r == 0 && loss > t->max_loss) {
            t->max_loss = loss;
            t->max_loss_step = step + 1;
        }
        if (r == 0)
            note_spike(t, step + 1, loss);
        if (r == -ECANCELED) {
            t->canceled = 1;
            return -1;
        }
        if (r == -ERANGE) {
            fprintf(stderr, "\ncellcast train: non-finite loss at step %lld, update skipped\n",
                    (long long)step + 1);
            continue;
        }
        if (r < 0) {
            fprintf(stderr, "\ncellcast train: training step failed (%s)\n", strerror(-r));
            return -1;
        }
        step++;
        loss_ema = isnan(loss_ema) ? loss : 0.98 * loss_ema + 0.02 * loss;
        int evaluated = step % a->eval_every == 0 || step == t->total_steps;
        if (evaluated && train_validate(t, step, loss_ema, v + 1))
            return -1;
        v[0] = loss_ema;
        train_progress(t, step, start_step, (cc_now_ns() - t0) / 1e9, evaluated, v, lr_now,
                       &last_print);
        if (evaluated && t->bad >= a->patience) {
            *why = "early stop (patience)";
            break;
        }
    }
    return 0;
}

/* tx/3: calib.sigma_scale of the kept weights, fitted on the validation rows. 0 or -1. */
static int train_calibrate(Train *t)
{
    CcCalibSettings cs;
    CcCalibReport rep;
    calib_settings(&t->a, &cs);
    int r = cc_trainer_calibrate_fit(t->tr, &cs, &rep);
    if (r == -ECANCELED) {
        t->canceled = 1;
        return -1;
    }
    if (r == -EAGAIN) {
        fprintf(stderr, "cellcast train: warning: no validation sample: calib.sigma_scale "
                        "left at 1 (intervals not calibrated)\n");
        return 0;
    }
    if (r < 0) {
        fprintf(stderr, "cellcast train: calibration failed (%s)\n", strerror(-r));
        return -1;
    }
    char buf[64];
    snprintf(buf, sizeof buf, "%.4f", rep.cover_raw);
    cc_hparams_set_extra(&t->m->hp, "val_cover80_raw", buf);
    snprintf(buf, sizeof buf, "%.4f", rep.cover);
    cc_hparams_set_extra(&t->m->hp, "val_cover80", buf);
    snprintf(buf, sizeof buf, "%.4f", rep.late_cover);
    cc_hparams_set_extra(&t->m->hp, "val_late_cover80", buf);
    cc_hparams_set_extra(&t->m->hp, "calib", t->a.calib);
    if (!t->a.quiet)
        fprintf(stderr,
                "%scellcast train: calibration (%s) on the validation rows: P10-P90 coverage "
                "%.3f -> %.3f (with the NLL-optimal scale RMS(z): %.3f; drift shrinkage "
                "%.2f-%.2f); backtest, fitted on the earlier 2/3 of validation, on the later "
                "1/3: %.3f (quantile fit %.3f, none %.3f)\n",
                t->tty ? "\n" : "", t->a.calib, rep.cover_raw, rep.cover, rep.cover_rms,
                rep.shrink_min, rep.shrink_max, rep.late_cover, rep.late_cover_quantile,
                rep.late_cover_raw);
    return 0;
}

/* Whether --fallback can retrain run t: a new tx/3 model whose loss, selection and start
 * were the defaults (train_opts refuses --fallback otherwise), not itself a fallback run. */
static int fallback_applies(const struct Train *t)
{
    const TrainArgs *a = &t->a;
    return !a->loss_given && !t->is_ett && !a->resume && !a->recalibrate && !t->first_run && t->m &&
           t->m->hp.linear_window > 0;
}

static int fallback_due(const struct Train *t);

/* The geometric mean over the channels with a last-value error of model error / that error
 * (NaN when none has one): the usual mean of relative errors, so that one channel whose
 * last value is nearly always exact does not outweigh the rest. */
static double geo_ratio(const double *model, const double *last, size_t n, int *n_used)
{
    double acc = 0;
    int k = 0;
    for (size_t c = 0; c < n; c++)
        if (last[c] > 0 && model[c] > 0)
            acc += log(model[c] / last[c]), k++;
    if (n_used)
        *n_used = k;
    return k ? exp(acc / k) : NAN;
}

/* The kept weights' validation errors against the last value's on the same targets: the
 * geometric means over the (series, KPI) channels of the MAE and of the MSE ratio, and the
 * MAE ratio per KPI (its series pooled), printed and kept in the file's metadata
 * (val_mae_vs_last, val_mse_vs_last, val_mae_vs_last_kpi). A KPI worse on MAE (MASE's
 * metric) is named in a warning with both ratios: a model that loses to the last value says
 * so when it is made, not when it is served. Both metrics, because the mean of a skewed KPI
 * can beat the last value on squared error and lose on absolute error (NAB's spiky AWS
 * metrics), so the reader can tell which loss it is. */
static void train_naive_check(Train *t)
{
    const CcDataset *ds = t->ds;
    const int F = ds->n_features;
    const size_t nc = (size_t)ds->n_series * F;
    double *nsum = malloc(nc * sizeof *nsum), *nsq = malloc(nc * sizeof *nsq);
    int64_t *ncount = malloc(nc * sizeof *ncount);
    if (!t->have_abs_best || !nsum || !nsq || !ncount)
        goto done;
    cc_trainer_val_naive_abserr(t->tr, nsum, nsq, ncount);
    int n_ch, n_worse = 0;
    double g_mae = geo_ratio(t->abs_best, nsum, nc, &n_ch);
    double g_mse = geo_ratio(t->sq_best, nsq, nc, NULL);
    if (!n_ch)
        goto done;
    char list[sizeof t->m->hp.extra[0].value] = "", worse[2048] = "", buf[64];
    size_t len = 0, wlen = 0;
    for (int f = 0; f < F; f++) {
        double a = 0, b = 0, a2 = 0, b2 = 0;
        for (int s = 0; s < ds->n_series; s++) {
            size_t c = (size_t)s * F + f;
            a += t->abs_best[c], b += nsum[c], a2 += t->sq_best[c], b2 += nsq[c];
        }
        double r = b > 0 ? a / b : NAN, r2 = b2 > 0 ? a2 / b2 : NAN;
        len += (size_t)snprintf(list + len, sizeof list - len, "%s%.4g", f ? "," : "", r);
        len = len < sizeof list ? len : sizeof list - 1;
        if (r > CC_TRAIN_NAIVE_WARN) {
            n_worse++;
            wlen += (size_t)snprintf(worse + wlen, sizeof worse - wlen, "%s%s %.2f/%.2f",
                                     n_worse > 1 ? ", " : "", ds->features[f], r, r2);
            wlen = wlen < sizeof worse ? wlen : sizeof worse - 1;
        }
    }
    t->vs_last = g_mae;
    t->vs_last_mse = g_mse;
    snprintf(buf, sizeof buf, "%.4f", g_mae);
    cc_hparams_set_extra(&t->m->hp, "val_mae_vs_last", buf);
    snprintf(buf, sizeof buf, "%.4f", g_mse);
    cc_hparams_set_extra(&t->m->hp, "val_mse_vs_last", buf);
    if (len < sizeof list - 1) /* a list cut short would shift the KPIs: none */
        cc_hparams_set_extra(&t->m->hp, "val_mae_vs_last_kpi", list);
    if (!t->a.quiet)
        fprintf(stderr,
                "cellcast train: validation error of the kept weights against the last "
                "value's, geometric mean over %d series x KPI: MAE %.3f, MSE %.3f (below 1 = "
                "better)\n",
                n_ch, g_mae, g_mse);
    /* --fallback is the one-word next step where it applies */
    int suggest = !t->a.fallback && fallback_applies(t) && g_mae > CC_TRAIN_NAIVE_WARN;
    if (n_worse && !fallback_due(t))
        fprintf(stderr,
                "cellcast train: warning: on the validation rows the model's mean is worse "
                "than the last value on %d of %d KPIs (MAE/MSE ratio: %s); %sdocs/training.md "
                "\"When the model loses to the last value\" says what to try\n",
                n_worse, F, worse, suggest ? "train with --fallback, or " : "");
done:
    free(nsum);
    free(nsq);
    free(ncount);
}

/* The best weights into --out (stopped before the first validation: the current ones) and
 * the optimiser state into --out.optim. 0 or -1. */
static int train_save(Train *t)
{
    CcModel *m = t->m;
    int64_t excluded, drawn;
    cc_trainer_excluded(t->tr, &excluded, &drawn);
    if (excluded > 0) { /* a file whose flat stretches the floor does not cover */
        char buf[64];
        snprintf(buf, sizeof buf, "%.3g", (double)excluded / (double)drawn);
        cc_hparams_set_extra(&m->hp, "xn_excluded", buf);
        if (!t->a.quiet)
            fprintf(stderr,
                    "cellcast train: %lld of %lld training samples had a normalised value "
                    "beyond +-%g and were left out of the loss (flat windows of a KPI whose "
                    "norm.floor is small for the series; --xn-bound, docs/training.md)\n",
                    (long long)excluded, (long long)drawn, t->a.xn_bound);
    }
    if (!t->saved_any) {
        t->best_step = cc_trainer_steps_done(t->tr);
        double v[SEL_COUNT];
        if (cc_trainer_validate(t->tr, &v[0], &v[1]) == 0) {
            val_abs_values(t, v);
            keep_abs(t);
            set_val_extras(&m->hp, v);
            t->best = criterion(t, v);
        }
        memcpy(t->best_block, cc_trainer_eval_weights(t->tr), m->n_params * sizeof(float));
    }
    double ex[2] = {t->best, t->bad};
    cc_trainer_save_state(t->tr, t->state_path, ex, 2, t->err, sizeof t->err);
    memcpy(m->block, t->best_block, m->n_params * sizeof(float));
    if (m->hp.linear_window > 0 && train_calibrate(t))
        return -1;
    train_naive_check(t);
    if (!t->saved_any) {
        char sb[64];
        snprintf(sb, sizeof sb, "%lld", (long long)cc_trainer_steps_done(t->tr));
        cc_hparams_set_extra(&m->hp, "train_steps", sb);
    }
    if (cc_model_save(m, t->a.out_path, t->err, sizeof t->err) < 0) {
        fprintf(stderr, "\ncellcast train: %s\n", t->err);
        return -1;
    }
    return 0;
}

/* --linear-init ridge on a new tx/3 model: the linear path's closed-form fit on the
 * training windows before the first step (the transformer then learns its residual), and
 * the validation MSE it alone gives with the head's small initial share. 0 or -1. */
static int train_linear_init(Train *t)
{
    const TrainArgs *a = &t->a;
    if (a->resume || strncmp(a->linear_init, "ridge", 5))
        return 0;
    if (t->m->hp.linear_window < 1) {
        fprintf(stderr, "cellcast train: --linear-init ridge needs a linear path "
                        "(--linear-window > 0)\n");
        return -1;
    }
    int64_t n = 0, t0 = cc_now_ns();
    int r;
    double lambda = a->ridge_lambda;
    if (!strcmp(a->linear_init, "ridge-kpi")) { /* the learner's fit (cc_learn_fit_linear) */
        const size_t nc = (size_t)t->ds->n_series * t->ds->n_features;
        double *scale = malloc((nc + 1) * sizeof *scale);
        r = scale ? channel_scales(t->ds, t->rtrain, scale) : -ENOMEM;
        if (r == 0) {
            CcLinearFitSettings fs = {.scale = scale,
                                      .lambdas = cc_learn_lambdas,
                                      .n_lambdas = CC_LEARN_N_LAMBDAS,
                                      .loss = strcmp(a->linear_loss, "mae") ? CC_LINEAR_LOSS_MSE
                                                                            : CC_LINEAR_LOSS_MAE};
            CcLinearFitReport rep;
            r = cc_trainer_fit_linear_scaled(t->tr, &fs, &rep);
            lambda = rep.lambda, n = rep.n_fit;
            if (r == 0 && fs.loss == CC_LINEAR_LOSS_MAE && !a->quiet)
                fprintf(stderr,
                        "cellcast train: linear path: MAE in MASE units %.4f (ridge) -> %.4f "
                        "after %d IRLS pass(es); %s\n",
                        rep.mae_start, rep.mae_end, rep.mae_passes,
                        rep.mae_kept ? "kept" : "not kept: the ridge map validates better");
        }
        free(scale);
    } else
        r = cc_trainer_fit_linear(t->tr, a->ridge_lambda, &n);
    if (r < 0) {
        fprintf(stderr, "cellcast train: --linear-init ridge: %s\n",
                r == -EAGAIN ? "no training window with a full linear window and horizon"
                : r == -EDOM ? "singular normal equations (use --ridge-lambda > 0)"
                             : strerror(-r));
        return -1;
    }
    double nll = NAN, mse = NAN;
    cc_trainer_validate(t->tr, &nll, &mse);
    if (!a->quiet)
        fprintf(stderr,
                "cellcast train: linear path: %s fit (lambda %g) on %lld training samples "
                "in %.1fs; val MSE %.4g, NLL %.4f before training\n",
                a->linear_init, lambda, (long long)n, (cc_now_ns() - t0) / 1e9, mse, nll);
    return 0;
}

/* --resume: the optimiser state and the best/bad counts of the run resumed. 0 or -1. */
static int train_resume(Train *t)
{
    char rs[4096];
    double ex[2] = {INFINITY, 0};
    snprintf(rs, sizeof rs, "%s.optim", t->a.resume);
    if (cc_trainer_load_state(t->tr, rs, ex, 2, t->err, sizeof t->err) < 0) {
        fprintf(stderr, "cellcast train: %s\n", t->err);
        return -1;
    }
    t->best = ex[0], t->bad = ex[1];
    t->best_step = -1; /* kept by the run resumed, at a step it does not record */
    if (!t->a.quiet)
        fprintf(stderr, "cellcast train: resumed at step %lld (best val NLL %.4f)\n",
                (long long)cc_trainer_steps_done(t->tr), t->best);
    return 0;
}

/* --recalibrate: the calibration of the model file refitted, its weights and training
 * metadata kept. 0 or -1. */
static int train_recalibrate(Train *t)
{
    if (t->m->hp.linear_window <= 0) {
        fprintf(stderr, "cellcast train: %s is a tx/2 model: no calibration to fit\n",
                t->a.recalibrate);
        return -1;
    }
    if (train_calibrate(t))
        return -1;
    if (cc_model_save(t->m, t->a.out_path, t->err, sizeof t->err) < 0) {
        fprintf(stderr, "cellcast train: %s\n", t->err);
        return -1;
    }
    return 0;
}

static int train_run(Train *t, int argc, char **argv)
{
    const char *why;
    if (train_data(t) || train_model(t) || train_settings(t) || train_open(t) ||
        train_select_open(t))
        return -1;
    if (t->a.recalibrate)
        return train_recalibrate(t);
    train_metadata(t, argc, argv);
    snprintf(t->state_path, sizeof t->state_path, "%s.optim", t->a.out_path);
    t->best = INFINITY, t->bad = 0, t->max_loss = -INFINITY, t->vs_last = NAN;
    t->first_val = t->last_val = NAN;
    if ((t->a.resume && train_resume(t)) || train_linear_init(t))
        return -1;
    if (!(t->best_block = malloc(t->m->n_params * sizeof(float)))) {
        fprintf(stderr, "cellcast train: out of memory\n");
        return -1;
    }
    memcpy(t->best_block, t->m->block, t->m->n_params * sizeof(float));
    double v[SEL_COUNT]; /* --eval-start: the start is the first candidate */
    if (t->a.eval_start && !t->a.resume && train_validate(t, 0, NAN, v))
        return -1;
    if (!t->stop) /* a caller with its own flag keeps its own handlers */
        signal(SIGINT, on_sigint);
    int64_t t0 = cc_now_ns();
    if (train_loop(t, &why) || train_save(t))
        return -1;
    if (!t->a.quiet)
        fprintf(stderr,
                "%scellcast train: %s after %lld steps in %.1fs; best val %s %.4g; largest "
                "batch loss %.4g (step %lld) → %s\n",
                t->tty ? "\n" : "", why, (long long)cc_trainer_steps_done(t->tr),
                (cc_now_ns() - t0) / 1e9, t->a.select, t->best, t->max_loss,
                (long long)t->max_loss_step, t->a.out_path);
    train_report_kept(t);
    return 0;
}

static void train_free(Train *t)
{
    if (!t)
        return;
    free(t->best_block);
    cc_trainer_close(&t->tr);
    cc_model_close(&t->m);
    cc_data_close(&t->ds);
    free(t->rtrain);
    free(t->rval);
    free(t->abs_sum);
    free(t->abs_best);
    free(t->sq_sum);
    free(t->sq_best);
    free(t->abs_n);
    free(t->mase_scale);
    free(t->mae_unit);
    free(t);
}

/* Whether finished run t is one --fallback trains again: one it applies to, not
 * interrupted, that loses to the last value on validation. */
static int fallback_due(const Train *t)
{
    return t->a.fallback && fallback_applies(t) && !g_stop && t->vs_last > CC_TRAIN_NAIVE_WARN;
}

/* --fallback after run t (fallback_due): the same command with FALLBACK_OPTIONS into
 * --out.fallback; the model with the lower val_mae_vs_last ends at --out (and its optimiser
 * state at --out.optim), the other is removed. first: the command line's arguments before
 * run t derived anything from the data. 0 or -1 (the first run's model stays at --out). */
static int train_fallback(const Train *t, const TrainArgs *first, int argc, char **argv)
{
    char tmp[4096], tmp_optim[4200], out_optim[4200];
    Train *u = calloc(1, sizeof *u);
    if (!u) {
        fprintf(stderr, "cellcast train: out of memory\n");
        return -1;
    }
    snprintf(tmp, sizeof tmp, "%s.fallback", t->a.out_path);
    snprintf(tmp_optim, sizeof tmp_optim, "%s.optim", tmp);
    snprintf(out_optim, sizeof out_optim, "%s.optim", t->a.out_path);
    u->a = *first;
    u->a.mae = 1;
    u->a.nll_mean = 0;
    u->a.select = "mase"; /* scale-free: KPIs of any units weigh alike */
    u->a.linear_init = "naive";
    u->a.eval_start = 1;
    u->a.out_path = tmp;
    u->sel = SEL_MASE;
    u->tty = t->tty;
    u->first_run = t;
    u->stop = t->stop;
    fprintf(stderr,
            "cellcast train: the kept model loses to the last value on validation (MAE %.3f, "
            "MSE %.3f of the last value's): training again with " FALLBACK_OPTIONS "\n",
            t->vs_last, t->vs_last_mse);
    int ret = train_run(u, argc, argv);
    if (u->canceled) { /* the first run's model stays at --out: the caller drops it */
        unlink(tmp);
        unlink(tmp_optim);
        train_free(u);
        return -ECANCELED;
    }
    if (ret == 0 && u->vs_last < t->vs_last) {
        if (rename(tmp, t->a.out_path) < 0 || rename(tmp_optim, out_optim) < 0) {
            fprintf(stderr, "cellcast train: %s: %s\n", t->a.out_path, strerror(errno));
            ret = -1;
        } else {
            fprintf(stderr,
                    "cellcast train: kept the second model (MAE %.3f, MSE %.3f of the last "
                    "value's, against %.3f, %.3f) → %s\n",
                    u->vs_last, u->vs_last_mse, t->vs_last, t->vs_last_mse, t->a.out_path);
        }
    } else {
        char second[64] = "failed";
        if (!ret)
            snprintf(second, sizeof second, "MAE %.3f, MSE %.3f", u->vs_last, u->vs_last_mse);
        fprintf(stderr,
                "cellcast train: warning: kept the first model (the second: %s), which loses "
                "to the last value on validation (MAE %.3f, MSE %.3f of its); docs/training.md "
                "\"When the model loses to the last value\" says what to try → %s\n",
                second, t->vs_last, t->vs_last_mse, t->a.out_path);
        ret = 0;
    }
    unlink(tmp);
    unlink(tmp_optim);
    train_free(u);
    return ret;
}

int cmd_train_stoppable(int argc, char **argv, const volatile sig_atomic_t *stop)
{
    Train *t = calloc(1, sizeof *t);
    if (!t) {
        fprintf(stderr, "cellcast train: out of memory\n");
        return 1;
    }
    t->stop = stop;
    int ret = train_opts(&t->a, argc, argv);
    if (ret == CLI_RUN) {
        TrainArgs first = t->a;
        t->is_ett = t->a.protocol != NULL;
        t->sel = select_index(t->a.select);
        t->tty = isatty(fileno(stderr));
        ret = train_run(t, argc, argv) ? 1 : 0;
        if (ret == 0 && fallback_due(t)) {
            int r = train_fallback(t, &first, argc, argv);
            ret = r == -ECANCELED ? r : r ? 1 : 0;
        }
        if (t->canceled) {
            if (!t->a.quiet)
                fprintf(stderr, "%scellcast train: stopped at step %lld: nothing kept\n",
                        t->tty ? "\n" : "", (long long)cc_trainer_steps_done(t->tr));
            ret = -ECANCELED;
        }
    }
    train_free(t);
    return ret;
}

int cmd_train(int argc, char **argv) { return cmd_train_stoppable(argc, argv, NULL); }
