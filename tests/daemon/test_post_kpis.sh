#!/bin/bash
# test_post_kpis.sh — who may POST /v1/kpis (http.post_kpis, issue 16: the route was open
# and 60k bogus cell ids took 6.5 GB): by default (token) only a request with the admin
# token (401 without one, 403 with a wrong one, 403 while admin.token is empty); `off`
# refuses even the token; `open` takes anyone. /v1/config shows the mode, and the automatic
# cell memory budget in effect (limits.kv_budget_mb: 0). ~5 s.
#   usage: test_post_kpis.sh CELLCASTD SOURCE_ROOT
set -u
CELLCASTD=${1:?cellcastd binary}
ROOT=${2:?source root}
# shellcheck source=../helpers/daemon.sh
. "$(dirname "$0")/../helpers/daemon.sh"
need_tools curl
test_workdir post-kpis KILL

BODY="{\"cell\":\"c1\",\"ts\":$(($(date +%s) / 900 * 900)),\"kpis\":{\"prb\":0.5,\"thr\":100,\"users\":3}}"
# post WANT_STATUS [CURL ARGS...]: POST one record, check the status
post() {
    local want=$1 got
    shift
    got=$(curl -s -o "$TMP/body" -w '%{http_code}' -H 'Content-Type: application/json' "$@" \
        --data "$BODY" "$U/v1/kpis")
    [ "$got" = "$want" ] && ok "POST /v1/kpis ${*:-(no token)}: $got" ||
        fail "POST /v1/kpis ${*:-(no token)}: $got, want $want ($(cat "$TMP/body"))"
}
# run MODE TOKEN: a daemon (no Kafka) with http.post_kpis MODE ("" = the default)
run() {
    { printf 'model:\n  path: "%s"\nkafka:\n  brokers: none\nhttp:\n  port: 0\n' \
        "$ROOT/tests/data/golden/tiny.safetensors"
      [ -n "$1" ] && printf '  post_kpis: %s\n' "$1"
      [ -n "$2" ] && printf 'admin:\n  token: "%s"\n' "$2"; } >"$TMP/c.yaml"
    start_daemon "$TMP/log" health -c "$TMP/c.yaml"
}

run "" s3cret
mode=$(curl -sf "$U/v1/config" | python3 -c 'import json,sys; print(json.load(sys.stdin)["http"]["post_kpis"])' 2>/dev/null)
[ "$mode" = token ] && ok "default http.post_kpis is token (/v1/config)" || fail "/v1/config http.post_kpis: '$mode'"
eff=$(curl -sf "$U/v1/config" | python3 -c 'import json,sys; l=json.load(sys.stdin)["limits"]; print(l["kv_budget_mb"], l["kv_budget_effective_mb"])' 2>/dev/null)
[ "${eff%% *}" = 0 ] && [ "${eff##* }" -gt 0 ] && grep -q "memory budget ${eff##* } MiB (" "$TMP/log" &&
    ok "cell memory budget: automatic, ${eff##* } MiB in effect (/v1/config and the log)" ||
    fail "limits in /v1/config: '$eff'; log: $(grep 'memory budget' "$TMP/log")"
post 401
grep -q 'WWW-Authenticate' <(curl -si -X POST --data "$BODY" "$U/v1/kpis") && ok "401 carries a challenge" || fail "no WWW-Authenticate"
post 403 -H 'Authorization: Bearer wrong'
post 202 -H 'Authorization: Bearer s3cret'
stop_daemon

run "" ""
post 403 -H 'Authorization: Bearer anything'
grep -q 'admin.token' "$TMP/body" && ok "the 403 says admin.token is not set" || fail "403 without a hint: $(cat "$TMP/body")"
stop_daemon

run off s3cret
post 403 -H 'Authorization: Bearer s3cret'
grep -q 'post_kpis' "$TMP/body" && ok "the 403 names http.post_kpis" || fail "403 without a hint: $(cat "$TMP/body")"
stop_daemon

run open ""
post 202
stop_daemon

[ "$FAILS" = 0 ] && echo "all post_kpis checks passed" || echo "$FAILS check(s) failed"
exit $((FAILS > 0))
