# tests/helpers/daemon.sh — the common part of the bash tests (tests/cli, tests/daemon, tests/blackbox)
# and benchmarks (tests/bench/*.sh): skipping when a tool, binary or file is missing, the
# temporary directory and the exit trap, the ok/FAIL lines of the checks, starting cellcastd
# and waiting until it serves, stopping it, and an external mock broker or mock cluster. Expects CELLCASTD
# (the daemon binary) where a daemon is started.

# need_tools TOOL...: exit 77 (meson's "skipped") when a tool is not installed.
need_tools() {
    local tool
    for tool in "$@"; do
        command -v "$tool" >/dev/null || { echo "SKIP: $tool not installed"; exit 77; }
    done
}

# need_bins BIN...: exit 77 when a binary (a path) is missing or not executable.
need_bins() {
    local bin
    for bin in "$@"; do
        [ -x "$bin" ] || { echo "SKIP: binary '$bin' missing"; exit 77; }
    done
}

# need_files FILE...: exit 77 when a file (a model, a data set) is missing.
need_files() {
    local f
    for f in "$@"; do
        [ -f "$f" ] || { echo "SKIP: $f missing"; exit 77; }
    done
}

# test_workdir NAME [SIGNAL]: a temporary directory TMP (/tmp/cellcast-NAME.XXXXXX), DPID
# and PIDS empty, FAILS=0, and the traps: at exit every pid in PIDS (newest first) and DPID
# get SIGNAL (default TERM) and are waited for, then TMP is removed unless a check failed
# (then it says where the logs are; KEEP_TMP=1 keeps them always); SIGTERM/SIGINT exit 143
# through that, so that the cleanup also runs when meson's timeout kills the test. A test
# with more to undo defines a function on_exit before, called first; a mock cluster's control
# fifo (start_mock_cluster) is closed next. Safe under set -e.
test_workdir() {
    TMP=$(mktemp -d "/tmp/cellcast-$1.XXXXXX")
    TEST_SIGNAL=${2:-TERM}
    DPID=
    PIDS=()
    FAILS=0
    trap test_cleanup EXIT
    trap 'exit 143' TERM INT
}

test_cleanup() {
    local i pids=("${PIDS[@]}")
    declare -F on_exit >/dev/null && { on_exit || true; }
    [ -z "${MOCK_CLUSTER_CTL:-}" ] || { exec 3>&-; } 2>/dev/null # the mock cluster exits at EOF
    [ -n "$DPID" ] && pids+=("$DPID") # also a daemon started without start_daemon
    for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
        kill -"$TEST_SIGNAL" "${pids[i]}" 2>/dev/null || true
    done
    [ ${#pids[@]} = 0 ] || wait "${pids[@]}" 2>/dev/null || true
    [ "$FAILS" = 0 ] || show_failure
    [ "$FAILS" = 0 ] && [ -z "${KEEP_TMP:-}" ] && rm -rf "$TMP" || echo "logs kept in $TMP"
}

# show_failure: the end of every log in TMP, then the failed checks again, last: a CI that
# keeps only the end of a failing test's output (and a machine that is gone) still shows
# what failed and the daemon's last words.
show_failure() {
    local f
    for f in "$TMP"/*.log; do
        [ -f "$f" ] && { echo "--- $f (end)"; tail -n 15 "$f"; }
    done
    printf '%s\n' "${FAILED[@]}"
}

# kafka_test_init NAME SIGNAL BIN...: the start of a test with Kafka (a mock broker, kcat):
# skips without kcat, curl, python3, a binary BIN or the tiny model of the golden tests,
# TINY ($SRC/tests/data/golden/tiny.safetensors: F=3 prb, thr, users; S=900, HZ=6); then
# test_workdir NAME SIGNAL.
kafka_test_init() {
    local name=$1 sig=$2
    shift 2
    need_tools kcat curl python3
    need_bins "$@"
    TINY="$SRC/tests/data/golden/tiny.safetensors"
    need_files "$TINY"
    test_workdir "$name" "$sig"
}

# daemon_test_init NAME: the start of a test of the daemon's HTTP side: skips without curl
# or $PY (python3), then test_workdir NAME.
daemon_test_init() {
    need_tools curl
    [ -x "$PY" ] || { echo "SKIP: $PY is not installed"; exit 77; }
    test_workdir "${1:-daemon}"
}

# tiny_daemon_test_init NAME: daemon_test_init NAME, then MODEL, the tiny model of the golden
# tests ($ROOT/tests/data/golden/tiny.safetensors: F=3 prb, thr, users; HZ=6; S=900); a skip
# without it. Expects ROOT.
tiny_daemon_test_init() {
    daemon_test_init "$1"
    MODEL="$ROOT/tests/data/golden/tiny.safetensors"
    need_files "$MODEL"
}

# parity_test_init NAME CELLCAST CELLCASTD SOURCE_ROOT: the start of a test that runs an
# offline tool and the daemon on the same rows (test_*_parity.sh): CLI, CELLCASTD, ROOT,
# PY and MODEL (the shipped default model) set, a skip without curl, python3, a binary or
# the model, then test_workdir NAME.
parity_test_init() {
    CLI=${2:?cellcast binary}
    CELLCASTD=${3:?cellcastd binary}
    ROOT=${4:?source root}
    PY=/usr/bin/python3
    MODEL="$ROOT/models/default.safetensors" # F=8, S=900, HZ=24
    need_tools curl "$PY"
    need_bins "$CLI" "$CELLCASTD"
    need_files "$MODEL"
    test_workdir "$1"
}

# wait_observed CELL STEP: polls the daemon at U every 0.05 s, at most 30 s, until CELL's
# forecast is made at STEP (every record up to it stepped); returns 1 without.
wait_observed() {
    local i
    for ((i = 0; i < 600; i++)); do
        curl -s "$U/v1/cells/$1/forecast" | grep -q "\"observed_step\":$2," && return 0
        sleep 0.05
    done
    return 1
}

FAILED=()
fail() { echo "FAIL: $*"; FAILS=$((FAILS + 1)); FAILED+=("FAIL: $*"); }
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
    : >"$log" # exists before the first poll reads it
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

# wait_log FILE PATTERN [TRIES]: polls every 0.1 s, at most TRIES times (default 50), until
# FILE has a line matching PATTERN (grep); returns 1 without.
wait_log() {
    local i
    for ((i = 0; i < ${3:-50}; i++)); do
        grep -q "$2" "$1" 2>/dev/null && return 0
        sleep 0.1
    done
    return 1
}

# wait_last CELL STEP TIMEOUT_S: polls the daemon at U until the cell's last_step is STEP
# with nothing pending (silent while the cell is unknown or has not stepped yet).
wait_last() {
    local end=$((SECONDS + $3)) j
    while [ $SECONDS -lt $end ]; do
        j=$(curl -sf "$U/v1/cells/$1") &&
            python3 -c 'import json,sys; d=json.loads(sys.argv[1]); sys.exit(0 if d.get("last_step") == int(sys.argv[2]) and d.get("pending_steps", 0) == 0 else 1)' "$j" "$2" &&
            return 0
        sleep 0.2
    done
    return 1
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

# start_mock_cluster BROKERS TOPIC:PARTITIONS...: starts CLUSTER (tests/blackbox/
# kafka_mock_cluster.c: BROKERS brokers, taken down and up by "down N" / "up N" on its stdin)
# with its stdin the fifo TMP/ctl, held open on fd 3 (commands: echo "down 1" >&3; it exits
# at EOF: the exit trap of test_workdir closes fd 3), its output TMP/cluster.out and
# TMP/cluster.log; sets EXT to its bootstrap address (waits up to 5 s) and appends its pid to
# PIDS. Exits 1 without.
start_mock_cluster() {
    mkfifo "$TMP/ctl"
    "$CLUSTER" "$@" <"$TMP/ctl" >"$TMP/cluster.out" 2>"$TMP/cluster.log" &
    PIDS+=($!)
    exec 3>"$TMP/ctl"
    MOCK_CLUSTER_CTL=$TMP/ctl
    for _ in $(seq 50); do EXT=$(head -1 "$TMP/cluster.out" 2>/dev/null); [ -n "$EXT" ] && break; sleep 0.1; done
    [ -n "$EXT" ] || { echo "FAIL: the mock cluster gave no address"; exit 1; }
}
