# Study scripts of docs/results.md "What helps on spiky series"; W = the labels study's
# directory (research/labels_nab.sh WORK_DIR, default /tmp/nabfam), CC = the cellcast binary,
# O = a scratch directory (default /tmp/spiky).
# usage: score.py FAM MODELSPEC [MODELSPEC...]; MODELSPEC a path with {f} for per-file models (file stem)
import json, subprocess, sys, statistics as st, os
import os
W = os.environ.get('W', '/tmp/nabfam')
O = os.environ.get('O', '/tmp/spiky')
B = os.environ.get('CC', os.environ.get('CC', 'build/tools/cellcast'))
fam = sys.argv[1]; specs = sys.argv[2:]
files = [l.strip() for l in open(f'{W}/{fam}_300.files' if os.path.exists(f'{W}/{fam}_300.files') else f'{W}/{fam}.files')]
def ev(m, f, which):
    args = [B, 'eval', '--model', m, '--data', f'{W}/hist/{f}', '--horizon', '12', '--json']
    args += ['--test', f'{W}/test/{f}'] if which == 'test' else ['--split', '0.85,0']
    r = subprocess.run(['nice', '-n', '5'] + args, capture_output=True, text=True)
    d = json.loads(r.stdout)
    return {k: (d['methods'].get(k) or {}).get('overall', {}).get('mase') for k in ('model', 'naive', 'linear')}
out = {}
for which in ('val', 'test'):
    per = []  # per seed: list of dicts per file
    for s in specs:
        rows = []
        for f in files:
            stem = os.path.splitext(os.path.basename(f))[0]
            rows.append(ev(s.format(f=stem), f, which))
        per.append(rows)
    if os.environ.get('DUMP'):
        json.dump({'files': files, 'per': per}, open(os.environ['DUMP'] + '_' + which + '.json', 'w'))
    means = [st.mean(r['model'] for r in rows) for rows in per]
    nav = st.mean(r['naive'] for r in per[0]); lin = [r['linear'] for r in per[0] if r['linear'] is not None]
    # file-level: model MASE mean over seeds
    mm = [st.mean(per[k][i]['model'] for k in range(len(per))) for i in range(len(files))]
    bn = sum(mm[i] < per[0][i]['naive'] for i in range(len(files)))
    bl = sum(1 for i in range(len(files)) if per[0][i]['linear'] is not None and mm[i] < per[0][i]['linear'])
    import math
    gn = math.exp(st.mean(math.log(mm[i]/per[0][i]['naive']) for i in range(len(files))))
    gl = math.exp(st.mean(math.log(mm[i]/per[0][i]['linear']) for i in range(len(files)) if per[0][i]['linear'])) if lin else float('nan')
    sd = st.stdev(means) if len(means) > 1 else 0.0
    print(f"{which}: model {st.mean(means):.3f} ± {sd:.3f} (seeds {' '.join('%.3f'%x for x in means)}) naive {nav:.3f} linear {(st.mean(lin) if lin else float('nan')):.3f} ({len(lin)} files) beats naive {bn}/{len(files)} linear {bl}/{len(lin)} geo model/naive {gn:.3f} model/linear {gl:.3f}")
    if os.environ.get('V'):
        for i, f in enumerate(files):
            print(f"  {os.path.basename(f):45s} model {mm[i]:.3f} naive {per[0][i]['naive']:.3f} linear {per[0][i]['linear']}")
