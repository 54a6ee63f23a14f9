#!/bin/sh
# .ci/openapi-lint.sh — lints proto/openapi.yaml with the real linters, at the versions
# pinned in .ci/openapi/package.json (+ package-lock.json): Redocly's recommended rules
# (.ci/openapi/redocly.yaml) and swagger-cli's validation. Installs them into
# .ci/openapi/node_modules with `npm ci` when missing (needs npm and the npm registry
# once, ~40 s; later runs ~6 s). Exits non-zero on any error or warning.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
dir=$root/.ci/openapi
command -v npm >/dev/null || { echo "openapi-lint: npm is required (.ci/deps.sh installs it)" >&2; exit 1; }
cd "$dir"
if [ ! -x node_modules/.bin/redocly ] || [ ! -x node_modules/.bin/swagger-cli ] ||
    [ package-lock.json -nt node_modules/.package-lock.json ]; then
    npm ci --no-audit --no-fund --loglevel=error
fi
# a warning fails too (the document has none)
out=$(node_modules/.bin/redocly lint --config redocly.yaml --format=stylish \
    "$root/proto/openapi.yaml" 2>&1) || { echo "$out"; exit 1; }
echo "$out" | grep -Eq '(error|warning) ' && { echo "$out"; exit 1; }
echo "redocly lint: ok"
node_modules/.bin/swagger-cli validate "$root/proto/openapi.yaml"
