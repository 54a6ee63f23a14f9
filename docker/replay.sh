#!/bin/bash
# replay.sh — replays wide KPI CSV files (`<time>,<kpi…>`, e.g. ../shared/data/lte-barcelona)
# as KPI messages (proto/kpi.schema.json) to Kafka with kcat, keyed by cell id.
#
# Each entry of REPLAY_FILES is HISTORY[:LIVE] (one cell; the cell id is the history file's
# name without directory, extension and a train_ prefix). Timestamps are shifted so that the last history
# row falls on the current step (aligned to the file's step S); the history is produced as
# fast as the broker takes it (backfill), then the live file paced at one step every
# S / REPLAY_SPEEDUP seconds, with timestamps continuing from there.
#
# Messages: {"cell":"ElBorn","ts":1700000000,"kpis":{"down":174876888,"up":1856888,...}}
# Empty or NaN values are left out of "kpis" (the daemon imputes per its gap policy).
#
# Environment: BROKERS (default localhost:9092), TOPIC (default kpis), REPLAY_FILES,
# REPLAY_SPEEDUP (default 60), REPLAY_DRY_RUN=1 prints the messages instead of producing.
set -euo pipefail

BROKERS=${BROKERS:-localhost:9092}
TOPIC=${TOPIC:-kpis}
SPEEDUP=${REPLAY_SPEEDUP:-60}
FILES=${REPLAY_FILES:-${*:-}}
[ -n "$FILES" ] || { echo "replay.sh: set REPLAY_FILES='hist.csv[:live.csv] ...'" >&2; exit 2; }

produce() {
    if [ "${REPLAY_DRY_RUN:-0}" = 1 ]; then
        cat
    else
        kcat -P -b "$BROKERS" -t "$TOPIC" -K '|' -z lz4 \
             -X queue.buffering.max.ms=50 -X message.timeout.ms=0
    fi
}

# gawk function: a CSV time to unix seconds (UTC): "YYYY-MM-DD HH:MM[:SS]", ISO-8601
# "YYYY-MM-DDTHH:MM:SSZ", or US "M/D/YYYY H:MM[:SS]" (the lte-hourly files); -1 if neither.
EPOCH_AWK='
function epoch(s,   d, n, us) {
    gsub(/["\r]/, "", s)
    us = (s ~ /^[0-9]+\/[0-9]+\/[0-9]+/)
    gsub(/[-:TZ\/]/, " ", s)
    n = split(s, d, " ")
    if (n < 5) return -1
    if (us) return mktime(sprintf("%d %d %d %d %d %d", d[3], d[1], d[2], d[4], d[5], n >= 6 ? int(d[6]) : 0), 1)
    return mktime(sprintf("%d %d %d %d %d %d", d[1], d[2], d[3], d[4], d[5], n >= 6 ? int(d[6]) : 0), 1)
}'

# to_json CELL SHIFT PACE < csv  (PACE = seconds to sleep per row, 0 = none)
to_json() {
    gawk -v cell="$1" -v shift="$2" -v pace="$3" -F, "$EPOCH_AWK"'
    NR == 1 { for (i = 2; i <= NF; i++) { name[i] = $i; gsub(/[\r"]/, "", name[i]) } next }
    {
        sub(/\r$/, "")
        t = epoch($1)
        if (t < 0) { printf("replay.sh: %s line %d: bad time %s\n", cell, NR, $1) > "/dev/stderr"; next }
        line = sprintf("%s|{\"cell\":\"%s\",\"ts\":%d,\"kpis\":{", cell, cell, t + shift)
        k = 0
        for (i = 2; i <= NF; i++) {
            v = $i
            if (v == "" || tolower(v) == "nan" || v == "NA" || v == "null") continue
            line = line sprintf("%s\"%s\":%s", k++ ? "," : "", name[i], v)
        }
        print line "}}"
        if (pace > 0) { fflush(); system("sleep " pace) }
    }'
}

# first and last unix time and the step of a CSV
span() {
    gawk -F, "$EPOCH_AWK"'
        NF > 1 && NR > 1 { t = epoch($1); if (t < 0) next; if (!n++) first = t; else if (n == 2) step = t - first; last = t }
        END { print first + 0, last + 0, step + 0 }' "$1"
}

pids=()
for entry in $FILES; do
    hist=${entry%%:*}
    live=""
    [ "$entry" != "$hist" ] && live=${entry#*:}
    cell=$(basename "$hist"); cell=${cell%.*}; cell=${cell#train_}; cell=${cell%_train}
    read -r first last step < <(span "$hist")
    [ "$step" -gt 0 ] || { echo "replay.sh: $hist: cannot find the step" >&2; exit 1; }
    now=$(date +%s)
    shift_s=$(( (now / step) * step - last ))
    pace=$(gawk -v s="$step" -v k="$SPEEDUP" 'BEGIN { printf("%.3f", s / k) }')
    echo "replay.sh: $cell: step ${step}s, history $(( (last - first) / step + 1 )) rows" \
         "shifted by ${shift_s}s${live:+, then $live at one step per ${pace}s}" >&2
    (
        to_json "$cell" "$shift_s" 0 < "$hist"
        if [ -n "$live" ]; then to_json "$cell" "$shift_s" "$pace" < "$live"; fi
    ) | produce &
    pids+=($!)
done
rc=0
for p in "${pids[@]}"; do wait "$p" || rc=$?; done
exit $rc
