/* cli.h — the subcommands of the `cellcast` CLI; each parses its own arguments
 * (argv[0] is the subcommand name) and returns the process exit code. */
#ifndef CC_CLI_H
#define CC_CLI_H

#include "cc_engine.h"

/** "f32" | "f16" | "bf16" → KV type; 0 or -EINVAL. */
int cli_parse_kv_type(const char *s, enum CcKvType *out);

int cmd_info(int argc, char **argv);
int cmd_forward(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_train(int argc, char **argv);
int cmd_eval(int argc, char **argv);
int cmd_synth(int argc, char **argv);
int cmd_anomaly(int argc, char **argv);

#endif
