#!/usr/bin/env bash
# tests/bench/ingest_learn_bench.sh — cellcastd's end-to-end ingest throughput alone and with
# `cellcast learn` reading the same topic (issue 31), back to back in one run on this
# machine: REPS times the pair "alone" then "learner" (A B A B ...), each a fresh daemon.
#
#   ingest_learn_bench.sh CELLCASTD CELLCAST INGEST_BENCH [CELLS] [WARM] [MEAS] [REPS] [THREADS]
#                                       (default 10000 48 96 2 1)
#
# The load is tests/bench/ingest_bench.sh's, from tests/helpers/ingest_load.sh (one message
# per cell-step from the C producer, hourly steps, into the embedded broker; phase 1 WARM
# steps of every cell, phase 2 MEAS more, timed until the last cell-step's forecast is
# published), chunked (the embedded broker keeps only the newest 5 MiB per partition). In the
# "learner" run the
# learner is started as soon as the daemon's broker is up, before phase 1, as the systemd
# unit runs it (systemd/cellcast-learn.service: Nice=15, one training thread,
# OPENBLAS_NUM_THREADS=1; its CPUQuota=100% is one core, no bound on a single-threaded
# process; the unit's IOSchedulingClass=idle is not reproduced): `nice -n 15 cellcast learn
# --brokers BS --topic kpis --threads 1 --poll 1` with the learner's defaults otherwise
# (1000 sampled cells; rounds from 24 h of data time, every 24 h of data time, a
# Transformer from 7 days) plus LEARN_ARGS (environment), e.g. LEARN_ARGS="--transformer-days
# 1" for a Transformer candidate in every round (the heaviest learner).
#
# Per run one JSON line: cell-steps/s of phase 2, the daemon's and the learner's CPU seconds
# over phase 2 (/proc/PID/stat; the daemon's per cell-step too: what the learner costs the
# daemon, its fetches from the embedded broker included, whatever CPU others leave it), the learner's progress (its log lines during phase 2:
# records read, rounds started and their kind, rounds done), /proc/loadavg before and after;
# then a summary line per variant (min, median, max). The figures are end to end on a
# shared machine: compare the variants of one run only.
set -eu
CELLCASTD=$1 CELLCAST=$2 PRODUCER=$3
CELLS=${4:-10000} WARM=${5:-48} MEAS=${6:-96} REPS=${7:-2} THREADS=${8:-1}
# shellcheck source=../helpers/daemon.sh
. "$(dirname "$0")/../helpers/daemon.sh"
# shellcheck source=../helpers/ingest_load.sh
. "$(dirname "$0")/../helpers/ingest_load.sh"
need_tools curl python3
test_workdir ingestlearn
TOP=$TMP
ingest_model "$TOP"

# cpu_s PID: user + system seconds of the process so far (0 when gone)
cpu_s() {
    awk -v hz="$(getconf CLK_TCK)" '{ sub(/.*\) /, ""); print ($12 + $13) / hz }' \
        "/proc/$1/stat" 2>/dev/null || echo 0
}

# run_one VARIANT: one daemon under the load, with the learner beside it for "learner";
# prints the run's JSON line
run_one() {
    local variant=$1 R
    R=$(mktemp -d "$TOP/$variant.XXXX")
    ingest_daemon "$R" "$TOP/model.safetensors" "$THREADS"
    local LPID=
    if [ "$variant" = learner ]; then
        mkdir -p "$R/learn"
        # shellcheck disable=SC2086 # LEARN_ARGS: words
        OPENBLAS_NUM_THREADS=1 nice -n 15 "$CELLCAST" learn --brokers "$BS" --topic kpis \
            --out "$R/learn/m.safetensors" --threads 1 --poll 1 ${LEARN_ARGS:-} \
            2>"$R/learn.log" &
        LPID=$!
        PIDS+=("$LPID")
    fi
    ingest_warm
    local load0 dcpu0 lcpu0=0 llines0=0 t0 t1
    load0=$(cut -d' ' -f1-3 /proc/loadavg)
    dcpu0=$(cpu_s "$DPID")
    if [ -n "$LPID" ]; then
        lcpu0=$(cpu_s "$LPID")
        llines0=$(wc -l <"$R/learn.log")
    fi
    t0=$(date +%s.%N)
    ingest_feed &
    local PP=$!
    ingest_wait_steps $((CELLS * (WARM + MEAS)))
    t1=$(date +%s.%N)
    wait $PP
    local dcpu1 lcpu1=0 load1 lalive=null
    dcpu1=$(cpu_s "$DPID")
    load1=$(cut -d' ' -f1-3 /proc/loadavg)
    if [ -n "$LPID" ]; then
        lcpu1=$(cpu_s "$LPID")
        kill -0 "$LPID" 2>/dev/null && lalive=true || lalive=false
        tail -n +$((llines0 + 1)) "$R/learn.log" >"$R/learn.during"
        kill -TERM "$LPID" 2>/dev/null || true
        wait "$LPID" 2>/dev/null || true
    else
        : >"$R/learn.during"
        : >"$R/learn.log"
    fi
    local records
    records=$(curl -sf "http://127.0.0.1:$PORT/metrics" | awk '$1 == "cellcast_ingest_records_total" { print $2 }')
    stop_daemon || true
    python3 - "$variant" "$t0" "$t1" "$CELLS" "$MEAS" "$WARM" "$dcpu0" "$dcpu1" "$lcpu0" \
        "$lcpu1" "$load0" "$load1" "$R/learn.during" "$R/learn.log" "${records:-0}" \
        "$lalive" <<'EOF'
import json, re, sys
(variant, t0, t1, cells, meas, warm, d0, d1, l0, l1, load0, load1, during, full, records,
 alive) = sys.argv[1:]
wall = float(t1) - float(t0)
steps = int(cells) * int(meas)
lines = open(during).read().splitlines()
new = sum(int(m.group(1)) for l in lines for m in [re.search(r": (\d+) new records", l)] if m)
started = [("transformer" if "Transformer candidates" in l else "linear")
           for l in lines if re.search(r"round \d+ at data time", l)]
done = [l for l in lines if re.search(r"round \d+: held-out", l)]
alllines = open(full).read().splitlines()
out = {"variant": variant, "cells": int(cells), "measured_steps_per_cell": int(meas),
       "wall_s": round(wall, 2), "cell_steps_per_s": round(steps / wall),
       "daemon_cpu_s": round(float(d1) - float(d0), 1),
       "daemon_cpu_us_per_cell_step": round((float(d1) - float(d0)) / steps * 1e6, 1),
       "learner_cpu_s": round(float(l1) - float(l0), 1),
       "loadavg_before": load0, "loadavg_after": load1,
       "records_applied": int(float(records)), "records_wanted": int(cells) * (int(meas) + int(warm))}
if variant == "learner":
    out["learner"] = {"alive_at_end": alive == "true", "records_read_during": new,
                      "rounds_started_during": started, "rounds_done_during": len(done),
                      "rounds_done_total": sum(1 for l in alllines if re.search(r"round \d+: held-out", l)),
                      "last_line": (lines or alllines or [""])[-1][:200]}
print(json.dumps(out), flush=True)
EOF
}

: >"$TOP/runs.jsonl"
for ((i = 0; i < REPS; i++)); do
    for v in alone learner; do
        echo "run $((i + 1))/$REPS: $v" >&2
        run_one $v | tee -a "$TOP/runs.jsonl"
    done
done
python3 - "$TOP/runs.jsonl" <<'EOF'
import json, statistics as st, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
for v in ("alone", "learner"):
    x = sorted(r["cell_steps_per_s"] for r in rows if r["variant"] == v)
    lc = [r["learner_cpu_s"] for r in rows if r["variant"] == v]
    us = [r["daemon_cpu_us_per_cell_step"] for r in rows if r["variant"] == v]
    print(json.dumps({"summary": v, "runs": len(x), "cell_steps_per_s_min": x[0],
                      "median": st.median(x), "max": x[-1],
                      "daemon_cpu_us_per_cell_step": us, "learner_cpu_s": lc}))
EOF
