# tests/blackbox/common.sh — helpers shared by the black-box scripts (sourced).
# Expects CELLCASTD, TMP, FAILS and the PIDS array of the sourcing script.

fail() { echo "FAIL: $*"; FAILS=$((FAILS + 1)); }
ok() { echo "ok: $*"; }

# start_daemon NAME CONFIG: starts cellcastd, sets DPID, PORT and (embedded) BS.
start_daemon() {
    local log="$TMP/$1.log"
    "$CELLCASTD" -c "$2" >"$log" 2>&1 &
    DPID=$!
    PIDS+=("$DPID")
    PORT=
    for _ in $(seq 100); do
        PORT=$(grep -o 'listening on http://127.0.0.1:[0-9]*' "$log" | head -1 | sed 's/.*://')
        [ -n "$PORT" ] && grep -q 'ready' "$log" && break
        kill -0 "$DPID" 2>/dev/null || { cat "$log"; echo "FAIL: cellcastd exited"; exit 1; }
        sleep 0.1
    done
    [ -n "$PORT" ] || { cat "$log"; echo "FAIL: cellcastd did not start"; exit 1; }
    BS=$(grep -o 'broker (librdkafka mock cluster) listening on [0-9.:]*' "$log" | head -1 | sed 's/.* on //')
}
