#!/bin/bash
# test_cli_opts.sh — the options of every `cellcast` command go through host/opts: --help
# exits 0 with the generated help on stdout, and an unknown option, a bad or out-of-range
# value, a missing required option or a stray argument exits 2 with a message on stderr
# that names the option and the problem (what test_metrics checked through cmd_eval before
# the evaluation became the cctools module).
#   usage: test_cli_opts.sh CELLCAST
set -u
CLI=${1:?cellcast binary}
# shellcheck source=../helpers/daemon.sh
. "$(dirname "$0")/../helpers/daemon.sh"
test_workdir cli-opts

# want RC MESSAGE-FRAGMENT ARGS...: exit code RC and the fragment on stderr (or stdout for 0)
want() {
    local rc=$1 msg=$2
    shift 2
    "$CLI" "$@" >"$TMP/out" 2>"$TMP/err"
    local got=$?
    [ "$got" = "$rc" ] || { fail "cellcast $*: exit $got, want $rc ($(head -2 "$TMP/err"))"; return; }
    local where="$TMP/err"
    [ "$rc" = 0 ] && where="$TMP/out"
    grep -qF -- "$msg" "$where" || fail "cellcast $*: no '$msg' in: $(head -3 "$where")"
}

for c in info forward bench synth train eval anomaly-eval; do
    want 0 "usage: cellcast $c" "$c" --help
    want 0 "  -h, --help" "$c" -h
    want 2 "cellcast $c: unknown option '--nosuch'" "$c" --nosuch
done
want 2 "cellcast info: --model is required" info
want 2 "cellcast forward: option '--model' needs a value" forward --model
want 2 "cellcast forward: --kv must be f32, f16 or bf16" forward --model m --input i --kv f8
want 2 "cellcast forward: unexpected argument 'extra'" forward --model m --input i extra
want 2 "cellcast bench: --cells: '0' is not an integer in [1, 10000000]" bench --cells 0
want 2 "cellcast bench: --dense must be packed or blas" bench --dense gpu
want 2 "cellcast synth: --step: 'abc' is not an integer" synth --step abc
want 2 "cellcast synth: --noise: 'x' is not a number" synth --noise x
want 2 "cellcast synth: cannot parse --start 'yesterday'" synth --start yesterday
want 2 "cellcast train: --out is required" train --data x
want 2 "cellcast train: --lr: '5' is not a number in [1e-07, 1]" train --data x --out y --lr 5
want 2 "cellcast train: --batch: '2.5' is not an integer" train --data x --out y --batch 2.5
want 2 "cellcast train: option '--quiet' takes no value" train --data x --out y --quiet=1
want 2 "cellcast train: --select must be nll, mse, mae or mase" train --data x --out y --select foo
want 2 "cellcast train: --calib must be shrunk, pooled, quantile or none" train --data x --out y --calib foo
want 2 "cellcast train: --recalibrate and --resume exclude each other" train --data x --out y --recalibrate m --resume m
want 2 "cellcast eval: --data is required" eval --horizon 2
want 2 "cellcast eval: --protocol must be ett or barcelona" eval --data x --protocol nope
want 2 "cellcast eval: --horizon: '0' is not an integer" eval --data x --horizon 0
want 2 "cellcast eval: give --split or --from, not both" eval --data x --split 0.7,0.1 --from 0
want 2 "cellcast eval: ambiguous option '--f'" eval --data x --f y
want 2 "cellcast anomaly-eval: --history follows its --data" anomaly-eval --history x
want 2 "cellcast anomaly-eval: --sweep: '200' is not a number in [0.5, 100]" \
    anomaly-eval --model x --data y --sweep 3,200
want 2 "cellcast anomaly-eval: --test-frac must be < 1" anomaly-eval --model x --data y --test-frac 1
# values: a unique prefix, --name=value and a value that starts with '-' are taken; the
# command then fails on the missing file, not on the options (exit 1)
want 1 "cellcast eval: " eval --dat "$TMP/none.csv" --horizon=2 --window 4
want 1 "cellcast anomaly-eval: " anomaly-eval --model "$TMP/none" --data y --lag -1

# the CSV options shared by train, eval and anomaly-eval (CLI_DATA_OPTS)
want 2 "cellcast eval: --delimiter must be one character (or tab), not a quote" \
    eval --data x --delimiter ab
want 2 "cellcast train: --time-index must be auto, yes or no" train --data x --out y --time-index 1
want 2 "cellcast train: --format must be long, wide or auto" train --data x --out y --format csv
want 2 "cellcast anomaly-eval: --format must be long, wide or auto" \
    anomaly-eval --model x --data y --format csv
# ... reach the loader: a ';' long file with its own cell and time columns and a row index
{
    echo "v;site;when"
    for i in $(seq 0 59); do echo "$((i % 24)),5;x;$i"; echo "$i;y;$i"; done
} >"$TMP/semi.csv"
want 0 "delimiter ';'" eval --data "$TMP/semi.csv" --cell-column site --time-column when \
    --time-index yes --step 3600 --horizon 2
want 1 "give the seconds per row (--step S)" eval --data "$TMP/semi.csv" --cell-column site \
    --time-column when
want 1 "no cell column 'cell' in the header" eval --data "$TMP/semi.csv" --cell-column cell \
    --time-column when --step 3600
want 1 "is ';' the delimiter? try --delimiter ';'" eval --data "$TMP/semi.csv" --delimiter ,
# a file wider than a model: train names the limit, eval scores every column
{
    printf 'ts'
    for j in $(seq 0 99); do printf ',k%d' "$j"; done
    echo
    for i in $(seq 0 49); do
        printf '%d' $((1700000000 + 3600 * i))
        for j in $(seq 0 99); do printf ',%d' $((i + j)); done
        echo
    done
} >"$TMP/wide.csv"
want 1 "cellcast train: the data has 100 KPIs, a model takes at most 64" \
    train --data "$TMP/wide.csv" --out "$TMP/m.safetensors" --quiet
want 0 "k99 " eval --data "$TMP/wide.csv" --horizon 2

[ "$FAILS" = 0 ] && echo "cli options: all checks passed"
exit $((FAILS > 0))
