#!/bin/sh
# fam.sh TAG [train options...]: family model(s) on realAWSCloudwatch, seeds $SEEDS (default 1), scored on val+test
TAG=$1; shift
CC=${CC:-build/tools/cellcast}
G=realAWSCloudwatch_300
mkdir -p ${O:-/tmp/spiky}/m
M=""
for S in ${SEEDS:-1}; do
  nice -n 5 $CC train --data ${W:-/tmp/nabfam}/${G}_hist.csv --out ${O:-/tmp/spiky}/m/${TAG}_s$S.safetensors --split 0.85,0.15 --horizon 12 --steps 1500 --threads 1 --seed $S --quiet "$@" 2>${O:-/tmp/spiky}/m/${TAG}_s$S.err || { echo "train failed"; cat ${O:-/tmp/spiky}/m/${TAG}_s$S.err; exit 1; }
  M="$M ${O:-/tmp/spiky}/m/${TAG}_s$S.safetensors"
done
echo "== $TAG: $*"
CC=$CC python3 "$(dirname "$0")/score.py" realAWSCloudwatch $M
