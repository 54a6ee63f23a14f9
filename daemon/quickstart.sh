#!/bin/sh
# daemon/quickstart.sh — the README's run command: installs missing Debian packages,
# builds with meson and runs cellcastd on the shipped configuration: embedded Kafka broker
# (librdkafka's mock cluster on loopback), the built-in synthetic demo feed and the shipped
# default model. Safe to run twice. Extra arguments go to cellcastd (e.g. --set http.port=9090).
#
# It also shows cellcastd learning the network it serves (docs/learning.md): cellcastd
# follows the learner (--set model.source=kafka) and `cellcast learn` runs in the
# background (nice 15) on the embedded broker's stable address (kafka.embedded_port,
# QUICKSTART_KAFKA_PORT, default 19092), reading the demo's KPI topic. The demo backfills
# demo.backfill_steps (400 steps of 15 minutes: 4.2 days) at start and then runs 600x
# faster than the wall clock (demo.speedup), so the learner's first model (after 24 h of
# data) comes in its first round, seconds after the start, and its first Transformer
# candidate (from 7 days of data) about 7 minutes later; a round every 24 h of data time
# (2.4 minutes). The demo's KPIs are the shipped model's 8, so a learned model is swapped in
# keeping the cells (the reload path), and rolled back if it does worse live
# (model.rollback). The dashboard's model line shows it. State of the run (the learned
# model, the learner's records) in $BUILD_DIR/quickstart, cleared at each start: the
# embedded broker keeps nothing across restarts either.
# QUICKSTART_LEARN=0: no learner, cellcastd pinned to the shipped model (model.source file,
# as conf/cellcast.yaml says).
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
sh "$root/.ci/deps.sh"
[ -f "$build/build.ninja" ] || meson setup "$build" "$root" -Dtests=enabled
ninja -C "$build" -j"$(nproc)"
cd "$root"
echo "cellcastd: the API address is on the 'http: listening on' line (default http://127.0.0.1:8080); try curl -s localhost:8080/v1/cells/demo-0000/forecast" >&2
if [ "${QUICKSTART_LEARN:-1}" = 0 ]; then
    exec "$build/daemon/cellcastd" -c conf/cellcast.yaml "$@"
fi
port=${QUICKSTART_KAFKA_PORT:-19092}
state=$build/quickstart
rm -rf "$state"
mkdir -p "$state/learner"
# The learner learns in data time and publishes to kpis.models. It exits when the broker is
# not there (yet: cellcastd starts it): started again 5 s later, it resumes from its state
# directory. It stops when cellcastd does (the trap).
(
    trap 'kill "$pid" 2>/dev/null; exit 0' TERM
    while :; do
        nice -n 15 "$build/tools/cellcast" learn --brokers "127.0.0.1:$port" --topic kpis \
            --out "$state/learner/model.safetensors" --poll 10 --tx-steps 300 \
            2>>"$state/learner.log" &
        pid=$!
        wait "$pid" || :
        sleep 5
    done
) &
learner=$!
echo "cellcast learn: learning from the demo feed in the background (pid $learner, log $state/learner.log); GET /v1/model's serving.learning, live and history, or the dashboard, show the swaps" >&2
trap 'kill "$learner" 2>/dev/null' EXIT INT TERM
"$build/daemon/cellcastd" -c conf/cellcast.yaml --set model.source=kafka \
    --set "kafka.embedded_port=$port" --set "model.learned_path=$state/learned.safetensors" "$@"
