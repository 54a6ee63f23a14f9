#!/bin/sh
# fallback_aws.sh — `cellcast train --fallback` on NAB's 17 realAWSCloudwatch files, one model
# per file (docs/training.md "When the model loses to the last value"): each file split into
# history (first 45 % of rows, rows of one step kept together) and test (the rest), a model
# trained on the history with the defaults (the first run alone) and with `--fallback`, each
# scored by `cellcast eval` on the test rows.
#
#   sh research/fallback_aws.sh CELLCAST NAB_DIR WORK_DIR [SEED]
# prints one line per file: file, the first run's val_mae_vs_last and val_mse_vs_last, the
# kept model's val_mae_vs_last, whether it fell back, the test MASE (steps 1-12) of the first
# run, of the kept model, and naive's.
set -eu
CLI=$1 NAB=$2 W=$3 SEED=${4:-1}
mkdir -p "$W"
python3 "$(dirname "$0")/nab_split.py" "$NAB/data/realAWSCloudwatch" "$W"
meta() { "$CLI" info --model "$1" | sed -n "s/.*\"$2\": \"\\([^\"]*\\)\".*/\\1/p"; }
mase() { "$CLI" eval --model "$1" --data "$2" --test "$3" --horizon 12 --json 2>/dev/null |
    python3 -c "import json,sys; m=json.load(sys.stdin)['methods']; print(m['$4']['overall']['mase'])"; }
echo "file first_mae_vs_last first_mse_vs_last kept_mae_vs_last fell_back test_mase_first test_mase_kept test_mase_naive"
for h in "$W"/*.hist.csv; do
    b=$(basename "$h" .hist.csv) t="$W/$b.test.csv"
    for v in off auto; do
        fb=
        [ $v = auto ] && fb=--fallback
        "$CLI" train --data "$h" --out "$W/$b.$v.safetensors" --split 0.85,0.15 --horizon 12 \
            --steps 1500 --threads 1 --seed "$SEED" --quiet $fb 2>"$W/$b.$v.err"
    done
    fb=no
    [ -n "$(meta "$W/$b.auto.safetensors" fallback)" ] && fb=yes
    echo "$b $(meta "$W/$b.off.safetensors" val_mae_vs_last) $(meta "$W/$b.off.safetensors" val_mse_vs_last)" \
        "$(meta "$W/$b.auto.safetensors" val_mae_vs_last)" \
        "$fb $(mase "$W/$b.off.safetensors" "$h" "$t" model) $(mase "$W/$b.auto.safetensors" "$h" "$t" model)" \
        "$(mase "$W/$b.auto.safetensors" "$h" "$t" naive)"
done
