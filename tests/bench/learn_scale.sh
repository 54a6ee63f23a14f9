#!/usr/bin/env bash
# tests/bench/learn_scale.sh — the learner's time and memory by sampled cells (issue 31):
# `cellcast learn --once` on a synthetic fleet (`cellcast synth`, 8 KPIs, 15-minute steps)
# written as a CSV directory, for each CELLS count: the linear round (2 days of data: the
# linear-only and seasonal candidates) and the Transformer round (8 days: from
# --transformer-days 7 on, the Transformer candidate too), each with --max-cells CELLS so
# that every cell is sampled, with the learner's defaults otherwise (--tx-steps 0: cellcast
# train's default, at least 1000 optimiser steps; --threads 1). Run under `nice -n 5`.
#
#   learn_scale.sh CELLCAST WORKDIR [CELLS...]          (default 1000 10000)
#
# Per run, one JSON line: wall seconds of the whole process and of the round (rounds.jsonl
# wall_s: without the reading of the CSV directory), CPU seconds, peak RSS (VmHWM, sampled
# every 0.2 s, and the rusage maximum) and what the process was doing at the peak (its last
# progress line; the run's rss.log: its RSS over time, a line at each change of 2 %), the records held and the store's bytes as docs/learning.md counts them
# (8 + 4·K bytes per record with K KPIs), the peak per sampled cell, the linear-only fit's
# IRLS passes and the refit's seconds. WORKDIR keeps the fleets
# (about 55 MB of CSV per 1000 cells and 8 days) and each run's state directory (its log,
# rounds.jsonl and candidates; the round's CSVs removed).
set -eu
CLI=$(realpath "${1:?cellcast binary}")
W=${2:?workdir}
shift 2
CELLS=("${@:-1000}")
[ $# -gt 0 ] || CELLS=(1000 10000)
mkdir -p "$W"
W=$(realpath "$W")
for n in "${CELLS[@]}"; do
    for days in 2 8; do
        d="$W/fleet-$n-${days}d"
        if [ ! -s "$d/fleet.csv" ]; then
            mkdir -p "$d"
            nice -n 5 "$CLI" synth --cells "$n" --days "$days" --seed 1 --out "$d/fleet.csv" \
                >/dev/null 2>&1
        fi
        out="$W/run-$n-${days}d"
        rm -rf "$out"
        mkdir -p "$out"
        python3 - "$CLI" "$d" "$out" "$n" "$days" <<'PY'
import json, os, resource, subprocess, sys, threading, time
cli, data, out, cells, days = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
cmd = ["nice", "-n", "5", cli, "learn", "--data-dir", data, "--out", f"{out}/m.safetensors",
       "--once", "--max-cells", str(cells), "--seed", "1"]
t0 = time.time()
p = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
last = ["start"]
log = open(f"{out}/learn.log", "w")
def read_err():
    for line in p.stderr:
        log.write(f"[{time.time() - t0:7.1f} s] {line}")  # where the time goes
        log.flush()
        if not line.startswith("step "):  # the trainer's progress: keep the phase line
            last[0] = line.strip()[:160]
threading.Thread(target=read_err, daemon=True).start()
peak, at = 0, ""
learner = None
trace, last_rss = open(f"{out}/rss.log", "w"), 0
while p.poll() is None:
    if learner is None:  # nice execs the learner in the same process
        learner = p.pid
    try:
        for line in open(f"/proc/{learner}/status"):
            if line.startswith("VmHWM:"):
                kb = int(line.split()[1])
                if kb > peak:
                    peak, at = kb, last[0]
            if line.startswith("VmRSS:"):
                kb = int(line.split()[1])
                if abs(kb - last_rss) > 0.02 * last_rss:
                    trace.write(f"{time.time() - t0:7.1f} s {kb / 1024:7.0f} MB  {last[0][:80]}\n")
                    trace.flush()
                    last_rss = kb
    except OSError:
        pass
    time.sleep(0.2)
wall = time.time() - t0
ru = resource.getrusage(resource.RUSAGE_CHILDREN)
time.sleep(0.3)
log.close()
rnd = {}
try:
    rnd = json.loads(open(f"{out}/rounds.jsonl").read().splitlines()[-1])
except (OSError, IndexError, ValueError):
    pass
cands = {c["kind"]: c.get("mase") for c in rnd.get("candidates", [])}
lf = rnd.get("linear_fit", {})
records = sum(1 for _ in open(f"{data}/fleet.csv")) - 1
record_bytes = 8 + 4 * len(rnd.get("kpis", []))
peak = max(peak, ru.ru_maxrss)
print(json.dumps({
    "cells": cells, "days": days, "exit": p.returncode,
    "round": "transformer" if cands.get("transformer") is not None or days >= 7 else "linear",
    "sampled": rnd.get("cells"), "records": records,
    "wall_s": round(wall, 1), "round_wall_s": round(rnd.get("wall_s", float("nan")), 1),
    "cpu_s": round(ru.ru_utime + ru.ru_stime, 1),
    "peak_rss_mb": round(peak / 1024, 1), "peak_during": at,
    "peak_kb_per_cell": round(peak / cells, 1),
    "store_mb": round(records * record_bytes / 2**20, 1),
    "store_kb_per_cell": round(records * record_bytes / cells / 1024, 1),
    "mase": cands, "decision": rnd.get("decision"),
    # the linear-only MAE fit's IRLS passes (on all rows, on the coarse subsample) and the
    # refit's seconds: where a round's time goes
    "irls_passes": [lf.get("irls_passes"), lf.get("irls_coarse_passes")],
    "refit_s": round(rnd.get("refit", {}).get("train_seconds", float("nan")), 1)}), flush=True)
PY
        rm -f "$out/all.csv" "$out/train.csv" # the round's CSVs: 1.4 GB at 10k cells
    done
done
