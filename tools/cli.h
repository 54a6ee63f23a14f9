/* cli.h — the subcommands of the `cellcast` CLI; each parses its own arguments
 * (argv[0] is the subcommand name) and returns the process exit code. */
#ifndef CC_CLI_H
#define CC_CLI_H

#include <signal.h>

#include "cc_engine.h"
#include "opts.h"

/** Exit code of a command after cc_opts_parse returned rc ≠ 0: 0 after --help, else 2. */
#define CLI_OPTS_EXIT(rc) ((rc) == CC_OPTS_HELP ? 0 : 2)

/** What a command's option function returns when the command is to run (else: its exit
 * code, after --help or an error). */
#define CLI_RUN (-1)

/** CcOptCall of --kv: "f32" | "f16" | "bf16" → the enum CcKvType at opt->target. */
int cli_opt_kv(const CcOpt *opt, const char *value, char *err, size_t errlen);

/* The CSV options shared by `cellcast train`, `eval` and `anomaly-eval`: host/opts table
 * entries into the CcDataSettings *d (--features and --step stay per command: their
 * defaults differ). */
int cli_opt_data_format(const CcOpt *opt, const char *value, char *err, size_t errlen);
int cli_opt_delimiter(const CcOpt *opt, const char *value, char *err, size_t errlen);
int cli_opt_time_index(const CcOpt *opt, const char *value, char *err, size_t errlen);
#define CLI_DATA_OPTS(d)                                                                           \
    CC_OPTS_CALL("format", cli_opt_data_format, &(d)->format, "F",                                 \
                 "long|wide|auto (default auto: long when the\ncell column is present)"),          \
        CC_OPTS_STR("time-column", &(d)->time_column, "NAME", "time column (default: the first)"), \
        CC_OPTS_STR("cell-column", &(d)->cell_column, "NAME",                                      \
                    "cell id column of a long file (default cell_id)"),                            \
        CC_OPTS_STR("time-format", &(d)->time_format, "STRPTIME",                                  \
                    "time format (default: auto, see docs/training.md)"),                          \
        CC_OPTS_CALL("time-index", cli_opt_time_index, &(d)->time_index, "auto|yes|no",            \
                     "the time column is a row index: time = index x --step\n"                     \
                     "(default auto: small consecutive integers are one)"),                        \
        CC_OPTS_CALL("delimiter", cli_opt_delimiter, &(d)->delimiter, "C",                         \
                     "field separator: , ; tab or one character\n"                                 \
                     "(default: detected from the header line)")

int cmd_info(int argc, char **argv);
int cmd_forward(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_train(int argc, char **argv);
/** cmd_train whose training stops at the next step (or validation chunk) once *stop is
 *  nonzero (the trainer's settings.stop; no SIGINT handler installed): -ECANCELED then,
 *  with nothing kept (a checkpoint --out already holds is the caller's to drop); else
 *  cmd_train's exit code. */
int cmd_train_stoppable(int argc, char **argv, const volatile sig_atomic_t *stop);
int cmd_eval(int argc, char **argv);
int cmd_synth(int argc, char **argv);
int cmd_learn(int argc, char **argv);
int cmd_anomaly(int argc, char **argv);

#endif
