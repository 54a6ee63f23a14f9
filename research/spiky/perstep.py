# Study scripts of docs/results.md "What helps on spiky series"; W = the labels study's
# directory (research/labels_nab.sh WORK_DIR, default /tmp/nabfam), CC = the cellcast binary,
# O = a scratch directory (default /tmp/spiky).
# perstep.py MODEL(with {f}) which: family mean MASE per horizon step, model and naive and linear
import json, subprocess, sys, os, statistics as st
import os
W = os.environ.get('W', '/tmp/nabfam')
O = os.environ.get('O', '/tmp/spiky')
B=os.environ.get('CC', 'build/tools/cellcast'); spec, which = sys.argv[1], sys.argv[2]
files=[l.strip() for l in open(W + '/realAWSCloudwatch_300.files')]
acc={m:[[] for _ in range(12)] for m in ('model','naive','linear')}
for f in files:
    stem=os.path.splitext(os.path.basename(f))[0]
    a=[B,'eval','--model',spec.format(f=stem),'--data',W + '/hist/'+f,'--horizon','12','--json']
    a+=['--test',W + '/test/'+f] if which=='test' else ['--split','0.85,0']
    d=json.loads(subprocess.run(a,capture_output=True,text=True).stdout)
    for m in acc:
        for k,s in enumerate(d['methods'][m]['per_step']): acc[m][k].append(s['mase'])
for m in acc: print(f"{which} {m:7s}", ' '.join('%.3f'%st.mean(x) for x in acc[m]))
# geometric mean ratio model/naive per step
import math
print(f"{which} geo m/n ", ' '.join('%.3f'%math.exp(st.mean(math.log(a/b) for a,b in zip(acc['model'][k],acc['naive'][k]))) for k in range(12)))
