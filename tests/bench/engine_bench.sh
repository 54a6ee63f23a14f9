#!/bin/sh
# engine_bench.sh — the engine benchmark matrix: cells ∈ {1, 64, 1024, 8192} (from one
# cell's per-step overhead to KV caches far larger than the CPU's caches), 1 and 2 threads,
# f32 and f16 KV, with and without the cache, plus the same streaming algorithm in PyTorch
# (tests/bench/torch_stream.py, one thread) on the same model file in the same run, and the
# ratios. Prints one JSON object per run and a summary table.
# Usage: engine_bench.sh [path/to/cellcast] (default build/tools/cellcast).
# Run on a quiet machine: the figures are wall-clock rates; each run also reports its CPU
# seconds, so a run that competed with other processes shows cpu_seconds < seconds.
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
cellcast=${1:-$root/build/tools/cellcast}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
model=$out/bench.safetensors
/usr/bin/python3 "$root/tests/bench/torch_stream.py" --write-random-model "$model" >/dev/null

run() { # label, cellcast bench args...
    label=$1; shift
    "$cellcast" bench --model "$model" "$@" > "$out/r.json"
    rate=$(/usr/bin/python3 -c "import json,sys; d=json.load(open('$out/r.json')); print(int(d['channel_steps_per_s']), round(d['cpu_seconds']/d['seconds'],2), d['split'], d['rss_bytes_per_cell'], sep='|')")
    printf '%-34s %s\n' "$label" "$rate"
    echo "$label|$rate" >> "$out/table"
}

echo "run                                channel-steps/s | cpu/wall | split | RSS B/cell"
for cells in 1 64 1024 8192; do
    steps=64; [ "$cells" -ge 8192 ] && steps=32
    for threads in 1 2; do
        for kv in f32 f16; do
            run "cells=$cells threads=$threads kv=$kv" --cells $cells --steps $steps --threads $threads --kv $kv
        done
    done
done
run "cells=1024 threads=1 kv=f32 no-cache" --cells 1024 --steps 32 --threads 1 --no-cache
torch=$(/usr/bin/python3 "$root/tests/bench/torch_stream.py" --model "$model" --cells 1024 --steps 64 | /usr/bin/python3 -c "import json,sys; print(int(json.load(sys.stdin)['channel_steps_per_s']))")
printf '%-34s %s\n' "pytorch cells=1024 threads=1" "$torch"
/usr/bin/python3 - "$out/table" "$torch" <<'PY'
import sys
rows = {l.split('|')[0]: float(l.split('|')[1]) for l in open(sys.argv[1])}
c = rows["cells=1024 threads=1 kv=f32"]
print(f"cache vs no-cache (1024 cells, 1 thread): {c / rows['cells=1024 threads=1 kv=f32 no-cache']:.1f}x")
print(f"C engine vs PyTorch streaming (1024 cells, 1 thread): {c / float(sys.argv[2]):.1f}x")
PY
