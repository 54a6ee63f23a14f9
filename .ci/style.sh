#!/bin/sh
# .ci/style.sh — the house style check: every C source and header under lib/ host/ daemon/
# tools/ tests/ is as clang-format (.clang-format at the root) would write it.
# `sh .ci/style.sh --fix` rewrites them in place instead. Exits non-zero on a difference.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
command -v clang-format >/dev/null || { echo "style.sh: clang-format is required" >&2; exit 1; }
files=$(git ls-files 'lib/*.[ch]' 'host/*.[ch]' 'daemon/*.[ch]' 'tools/*.[ch]' 'tests/*.[ch]' \
    'tests/*/*.[ch]')
if [ "${1:-}" = "--fix" ]; then
    clang-format -i $files
    exit 0
fi
bad=0
for f in $files; do
    if ! clang-format --dry-run --Werror "$f" >/dev/null 2>&1; then
        echo "style: $f differs from clang-format (sh .ci/style.sh --fix)"
        bad=$((bad + 1))
    fi
done
echo "style: $(echo $files | wc -w) files, $bad not formatted"
[ "$bad" -eq 0 ]
