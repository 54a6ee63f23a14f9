#!/bin/sh
# nab_halves.sh — NAB cut into two half corpora for a split-half check of settings chosen on
# NAB (the measurement log (`git show 0c50596:docs/operations.md` §7) "Shape novelty"): the data files in directory order, odd ones to
# OUT/A, even ones to OUT/B (29 each), as symbolic links, each half with NAB's config and its
# own labels (combined_*.json keeping its files). `cellcast anomaly-eval --nab OUT/A` then
# scores a half with NAB's rules, normalised over that half's windows.
#
#   sh research/nab_halves.sh NAB_DIR OUT
set -eu
NAB=$(cd "$1" && pwd) OUT=$2
for h in A B; do
    rm -rf "$OUT/$h"
    mkdir -p "$OUT/$h/data" "$OUT/$h/labels"
    ln -s "$NAB/config" "$OUT/$h/config"
done
i=0
for d in "$NAB"/data/*/; do
    fam=$(basename "$d")
    for f in "$d"*.csv; do
        i=$((i + 1))
        h=$([ $((i % 2)) = 1 ] && echo A || echo B)
        mkdir -p "$OUT/$h/data/$fam"
        ln -s "$f" "$OUT/$h/data/$fam/"
    done
done
python3 - "$NAB" "$OUT" <<'PY'
import json, os, sys
nab, out = sys.argv[1], sys.argv[2]
for h in "AB":
    for name in ("combined_labels.json", "combined_windows.json", "combined_windows_tiny.json"):
        labels = json.load(open(os.path.join(nab, "labels", name)))
        kept = {k: v for k, v in labels.items() if os.path.exists(os.path.join(out, h, "data", k))}
        json.dump(kept, open(os.path.join(out, h, "labels", name), "w"), indent=1)
        if name == "combined_windows.json":
            print(h, len(kept), "files,", sum(len(v) for v in kept.values()), "windows")
PY
