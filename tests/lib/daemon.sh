# tests/lib/daemon.sh — running cellcastd from the shell tests and benchmarks (sourced by
# tests/test_http.sh, tests/blackbox/*.sh and tests/bench/{http,ingest}_bench.sh): skipping
# when a tool is missing, starting the daemon and waiting until it serves, stopping it, an
# external mock broker, and the ok/FAIL lines of the checks.
# Expects CELLCASTD (the daemon binary) and, for fail, a count FAILS.

# need_tools TOOL...: exit 77 (meson's "skipped") when a tool is not installed.
need_tools() {
    local tool
    for tool in "$@"; do
        command -v "$tool" >/dev/null || { echo "SKIP: $tool not installed"; exit 77; }
    done
}

# daemon_test_init: the common start of a daemon test: skips without curl or $PY (python3),
# makes the temporary directory TMP, removed at exit with the daemon (DPID) killed; FAILS=0.
daemon_test_init() {
    need_tools curl
    [ -x "$PY" ] || { echo "SKIP: $PY is not installed"; exit 77; }
    TMP=$(mktemp -d)
    DPID=
    FAILS=0
    trap '[ -n "$DPID" ] && kill "$DPID" 2>/dev/null; rm -rf "$TMP"' EXIT
}

fail() { echo "FAIL: $*"; FAILS=$((FAILS + 1)); }
ok() { echo "ok: $*"; }

# daemon_port LOG: the loopback HTTP port the daemon's log announces (empty until then).
daemon_port() { grep -o 'listening on http://127.0.0.1:[0-9]*' "$1" | head -1 | sed 's/.*://'; }

# start_daemon LOG UNTIL ARG...: starts "$CELLCASTD" ARG... in the background, its output to
# LOG, and polls every 0.1 s, at most DAEMON_TRIES times (default 100: 10 s), until
#   port      it listens on HTTP;
#   ready     it listens and has logged 'ready' (model loaded, Kafka client and HTTP up);
#   health    it listens and answers GET /healthz;
#   assigned  its Kafka consumer has logged its partition assignment.
# Past the tries it goes on if the port is known. Sets DPID (also appended to PIDS), PORT,
# U (the base URL) and BS (the embedded broker's bootstrap address; empty with an external
# broker). Exits 1, showing the log, when the daemon exits or never announces its port.
start_daemon() {
    local log=$1 until=$2 tries=${DAEMON_TRIES:-100} i
    shift 2
    "$CELLCASTD" "$@" >"$log" 2>&1 &
    DPID=$!
    PIDS+=("$DPID")
    for ((i = 0; i < tries; i++)); do
        PORT=$(daemon_port "$log")
        case $until in
        port) [ -n "$PORT" ] && break ;;
        ready) [ -n "$PORT" ] && grep -q 'ready' "$log" && break ;;
        health) [ -n "$PORT" ] && curl -sf "http://127.0.0.1:$PORT/healthz" >/dev/null && break ;;
        assigned) grep -q 'partition(s) assigned' "$log" && break ;;
        *) echo "start_daemon: unknown condition '$until'"; exit 2 ;;
        esac
        kill -0 "$DPID" 2>/dev/null || { cat "$log"; echo "FAIL: cellcastd exited"; exit 1; }
        sleep 0.1
    done
    PORT=$(daemon_port "$log")
    [ -n "$PORT" ] || { cat "$log"; echo "FAIL: cellcastd did not start"; exit 1; }
    U="http://127.0.0.1:$PORT"
    BS=$(grep -o 'mock cluster) listening on [0-9.:]*' "$log" | head -1 | sed 's/.* on //')
}

# stop_daemon [SIGNAL]: sends SIGNAL (default TERM) to the daemon, waits for it and returns
# its exit status (128 + the signal when killed; the shell's notice of that is silenced).
stop_daemon() {
    local rc=0
    kill -"${1:-TERM}" "$DPID"
    wait "$DPID" 2>/dev/null || rc=$?
    DPID=
    return $rc
}

# wait_http URL TRIES [INTERVAL_S]: polls URL (every 0.1 s by default) until it answers 200;
# returns 1 after TRIES attempts without.
wait_http() {
    local i
    for ((i = 0; i < $2; i++)); do
        [ "$(curl -s -o /dev/null -w '%{http_code}' "$1")" = 200 ] && return 0
        sleep "${3:-0.1}"
    done
    return 1
}

# start_mockbroker DIR TOPIC:PARTITIONS...: starts MOCKBROKER (tests/blackbox/mockbroker.c,
# a broker that outlives daemon restarts) with DIR/broker.addr and DIR/broker.log; sets EXT
# to its bootstrap address (waits up to 5 s) and appends its pid to PIDS. Exits 1 without.
start_mockbroker() {
    local dir=$1
    shift
    "$MOCKBROKER" "$@" >"$dir/broker.addr" 2>"$dir/broker.log" &
    PIDS+=($!)
    for _ in $(seq 50); do EXT=$(head -1 "$dir/broker.addr" 2>/dev/null); [ -n "$EXT" ] && break; sleep 0.1; done
    [ -n "$EXT" ] || { echo "FAIL: cc_mockbroker gave no address"; exit 1; }
}

# test_workdir NAME: a temporary directory TMP (/tmp/cellcast-NAME.XXXXXX), PIDS and FAILS
# empty, and an EXIT trap that kills every pid in PIDS and removes TMP unless a check
# failed (then it says where the logs are).
test_workdir() {
    TMP=$(mktemp -d "/tmp/cellcast-$1.XXXXXX")
    PIDS=()
    FAILS=0
    trap 'for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null; done; wait 2>/dev/null
          [ "$FAILS" = 0 ] && rm -rf "$TMP" || echo "logs kept in $TMP"' EXIT
}
