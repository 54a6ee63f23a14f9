#!/usr/bin/env python3
"""same_weights.py A B — every float32 tensor of safetensors file A equals B's within float32
rounding: |a - b| <= 2 ulp of b plus 1 ulp of the tensor's largest |b| (a map solved in
double and rounded to float32 once, then written by two routes). Prints the names of the
tensors that differ (or are in one file only) and exits 1 if any; 0 and an empty line if
none. Used by tests/cli/test_learn_refit.sh and test_learn_blend.sh."""
import json
import struct
import sys


def load(path):
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    header, data = json.loads(b[8:8 + n]), b[8 + n:]
    return {k: struct.unpack("<%df" % ((v["data_offsets"][1] - v["data_offsets"][0]) // 4),
                             data[v["data_offsets"][0]:v["data_offsets"][1]])
            for k, v in header.items() if k != "__metadata__" and v["dtype"] == "F32"}


a, b = load(sys.argv[1]), load(sys.argv[2])
eps = 2.0 ** -23
bad = sorted(set(a) ^ set(b))
for k in set(a) & set(b):
    top = max((abs(y) for y in b[k]), default=0.0)
    if len(a[k]) != len(b[k]) or any(abs(x - y) > 2 * eps * abs(y) + eps * top
                                     for x, y in zip(a[k], b[k])):
        bad.append(k)
print(" ".join(bad))
sys.exit(1 if bad else 0)
