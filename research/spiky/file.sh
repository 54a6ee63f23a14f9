#!/bin/sh
# file.sh TAG [train options...]: one model per AWS file, seeds $SEEDS (default 1)
TAG=$1; shift
CC=${CC:-build/tools/cellcast}
mkdir -p ${O:-/tmp/spiky}/pf/$TAG
M=""
for S in ${SEEDS:-1}; do
  for F in $(cat ${W:-/tmp/nabfam}/realAWSCloudwatch_300.files); do
    st=$(basename $F .csv)
    nice -n 5 $CC train --data ${W:-/tmp/nabfam}/hist/$F --out ${O:-/tmp/spiky}/pf/$TAG/${st}_s$S.safetensors --split 0.85,0.15 --horizon 12 --steps 1500 --threads 1 --seed $S --quiet "$@" 2>${O:-/tmp/spiky}/pf/$TAG/${st}_s$S.err || { echo "train failed $F"; tail -3 ${O:-/tmp/spiky}/pf/$TAG/${st}_s$S.err; }
  done
  M="$M ${O:-/tmp/spiky}/pf/$TAG/{f}_s$S.safetensors"
done
echo "== perfile $TAG: $*"
CC=$CC python3 "$(dirname "$0")/score.py" realAWSCloudwatch $M
