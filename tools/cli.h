/* cli.h — the subcommands of the `cellcast` CLI; each parses its own arguments
 * (argv[0] is the subcommand name) and returns the process exit code. */
#ifndef CC_CLI_H
#define CC_CLI_H

#include "cc_engine.h"
#include "opts.h"

/** Exit code of a command after cc_opts_parse returned rc ≠ 0: 0 after --help, else 2. */
#define CLI_OPTS_EXIT(rc) ((rc) == CC_OPTS_HELP ? 0 : 2)

/** What a command's option function returns when the command is to run (else: its exit
 * code, after --help or an error). */
#define CLI_RUN (-1)

/** CcOptCall of --kv: "f32" | "f16" | "bf16" → the enum CcKvType at opt->target. */
int cli_opt_kv(const CcOpt *opt, const char *value, char *err, size_t errlen);

int cmd_info(int argc, char **argv);
int cmd_forward(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_train(int argc, char **argv);
int cmd_eval(int argc, char **argv);
int cmd_synth(int argc, char **argv);
int cmd_anomaly(int argc, char **argv);

#endif
