#!/bin/bash
# .ci/docker.sh — builds the image (docker/Dockerfile) and smoke-tests a container of it:
# GET /healthz 200, a forecast served for a demo cell (the default CMD: embedded broker +
# demo feed), the dashboard at GET /, cellcastd (PID 1) running as a non-root uid, the
# image's HEALTHCHECK reporting healthy, and a clean stop on SIGTERM (exit 0).
#
#   bash .ci/docker.sh          prints one line: "docker: ok (...)" or "docker: FAILED (...)"
#
# Exit 0 passed, 1 failed, 77 skipped: no docker (no client, or `docker info` fails: no
# daemon) is a skip, also under CI=1. Makes the base image with docker/base.sh (debootstrap,
# no registry) when debian:12-slim is missing, and web/node_modules with `npm ci` on the
# host when missing (the image build uses no npm). Variables: DOCKER_IMAGE (default
# cellcast:ci; the build stage is tagged DOCKER_IMAGE-build), DOCKER_TIMEOUT (seconds to
# wait for each check, default 120).
# shellcheck disable=SC2317 # the checks (healthz, forecast, healthy) run through until_ok
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root" || exit 1
image=${DOCKER_IMAGE:-cellcast:ci}
wait_s=${DOCKER_TIMEOUT:-120}
log=/tmp/ci-docker.log
: > "$log"
container=""

finish() { # $1 = exit status, $2 = the one line
    echo "docker: $2"
    if [ "$1" -eq 1 ]; then
        tail -n 40 "$log"
        [ -n "$container" ] && docker logs --tail 40 "$container" 2>&1
    fi
    [ -n "$container" ] && docker rm -f "$container" >/dev/null 2>&1
    exit "$1"
}
fail() { finish 1 "FAILED ($1; log $log)"; }

command -v docker >/dev/null || finish 77 "skipped (no docker client)"
docker info >/dev/null 2>&1 ||
    finish 77 "skipped (no docker daemon: \`docker info\` fails; apt-get install docker.io, start dockerd)"
command -v curl >/dev/null || fail "curl is required"

# The base image, without a registry when it is missing.
sh docker/base.sh >> "$log" 2>&1 || fail "docker/base.sh could not make debian:12-slim"
# The dashboard's uPlot files, installed on the host (as the meson build does).
if [ ! -f web/node_modules/uplot/dist/uPlot.iife.min.js ]; then
    (cd web && npm ci --prefer-offline --no-audit --no-fund) >> "$log" 2>&1 ||
        fail "npm ci in web/ failed"
fi

# The build stage is tagged too ($image-build), so that the previous builds of both can be
# removed by id (the classic builder leaves them as untagged 400+ MB images) while the
# newest keeps its layers as the next build's cache.
image_id() { docker image inspect -f '{{.Id}}' "$1" 2>/dev/null; }
old_build=$(image_id "$image-build")
old_runtime=$(image_id "$image")
t0=$(date +%s)
if ! docker build --force-rm -f docker/Dockerfile --target build -t "$image-build" . >> "$log" 2>&1 ||
    ! docker build --force-rm -f docker/Dockerfile -t "$image" . >> "$log" 2>&1; then
    fail "docker build"
fi
build_s=$(($(date +%s) - t0))
for old in "$old_build" "$old_runtime"; do
    if [ -n "$old" ] && [ "$old" != "$(image_id "$image-build")" ] && [ "$old" != "$(image_id "$image")" ]; then
        docker rmi "$old" >/dev/null 2>&1 || true
    fi
done
size_mib=$(($(docker image inspect -f '{{.Size}}' "$image") / 1048576))

container=$(docker run -d -p 127.0.0.1::8080 "$image" 2>> "$log") || fail "docker run"
port=$(docker port "$container" 8080/tcp | head -n 1 | sed 's/.*://')
[ -n "$port" ] || fail "no published port"
url=http://127.0.0.1:$port

# polls until "$@" succeeds or $wait_s seconds pass
until_ok() {
    local deadline=$(($(date +%s) + wait_s))
    until "$@"; do
        [ "$(docker inspect -f '{{.State.Running}}' "$container")" = true ] || return 1
        [ "$(date +%s)" -lt "$deadline" ] || return 1
        sleep 1
    done
}
healthz() { [ "$(curl -s -o /dev/null -w '%{http_code}' "$url/healthz")" = 200 ]; }
forecast() { # a 200 with a non-empty forecast array for the first demo cell
    curl -fsS "$url/v1/cells/demo-0000/forecast" 2> /dev/null | python3 -c \
        'import json, sys; sys.exit(0 if json.load(sys.stdin).get("forecast") else 1)' 2> /dev/null
}
healthy() { [ "$(docker inspect -f '{{.State.Health.Status}}' "$container")" = healthy ]; }

until_ok healthz || fail "/healthz did not answer 200"
until_ok forecast || fail "no forecast for demo-0000 within ${wait_s} s"
# the page read whole first: `curl | grep -q` fails under pipefail when grep stops reading
page=$(curl -fsS "$url/" 2>> "$log") && grep -q 'uPlot' <<< "$page" ||
    fail "GET / did not serve the dashboard"
# the uid of PID 1 (cellcastd itself, not a new exec's)
uid=$(docker exec "$container" awk '/^Uid:/ {print $2}' /proc/1/status 2>> "$log")
comm=$(docker exec "$container" cat /proc/1/comm 2>> "$log")
[ "$comm" = cellcastd ] || fail "PID 1 is '$comm', not cellcastd"
case "$uid" in '' | 0 | *[!0-9]*) fail "cellcastd runs as uid '${uid}'" ;; esac
until_ok healthy || fail "HEALTHCHECK: $(docker inspect -f '{{.State.Health.Status}}' "$container")"
docker stop -t 60 "$container" >/dev/null
code=$(docker inspect -f '{{.State.ExitCode}}' "$container")
[ "$code" = 0 ] || fail "exit status $code after SIGTERM"

finish 0 "ok (image ${size_mib} MiB, build ${build_s} s; healthz, forecast, dashboard, uid ${uid}, healthy, clean stop)"
