# Study scripts of docs/results.md "What helps on spiky series"; W = the labels study's
# directory (research/labels_nab.sh WORK_DIR, default /tmp/nabfam), CC = the cellcast binary,
# O = a scratch directory (default /tmp/spiky).
# mr.py MODEL FILE: mean reversion and post-spike diagnostics of MODEL's forecasts on FILE's validation rows
# (the last 15 % of the history file), from `cellcast forward --all` (tensors mu, sigma, mean per origin).
import csv, json, subprocess, sys, datetime as dt, numpy as np
import os
W = os.environ.get('W', '/tmp/nabfam')
O = os.environ.get('O', '/tmp/spiky')
B=os.environ.get('CC', 'build/tools/cellcast'); model, f = sys.argv[1], sys.argv[2]
rows=list(csv.reader(open(W + '/hist/'+f)))[1:]
ts=[int(dt.datetime.strptime(r[0],'%Y-%m-%d %H:%M:%S').replace(tzinfo=dt.timezone.utc).timestamp()) for r in rows]
v=[float(r[1]) for r in rows]
# regular 300 s grid (forward wants consecutive steps): last value carried over gaps, dups: later kept
g={}
for t,x in zip(ts,v): g[(t//300)*300]=x
t0,t1=min(g),max(g); grid=list(range(t0,t1+300,300)); x=[]; last=None
for t in grid:
    last=g.get(t,last); x.append(last)
x=np.array(x); n=len(x)
open(O + '/fw.csv','w').write('ts,value\n'+''.join(f'{t},{val!r}\n' for t,val in zip(grid,x)))
out=subprocess.run([B,'forward','--model',model,'--input',O + '/fw.csv','--all'],capture_output=True,text=True).stdout.split('\n')
H=12; v0=int(n*0.85)
idx={t:i for i,t in enumerate(grid)}
D=[];A=[];Z=[];E=[];N=[];R=[]
for line in out:
    if not line: continue
    j=json.loads(line); i=idx[j['ts']]
    if i<v0-1 or i+H>=n: continue
    mu=j['mu'][0]; sg=j['sigma'][0]; m=np.array(j['mean'][:H])
    a=x[i+1:i+1+H]-x[i]; d=m-x[i]
    D.append(d);A.append(a);Z.append((x[i]-mu)/sg);E.append(np.abs(m-x[i+1:i+1+H]).mean());N.append(np.abs(a).mean());R.append(mu-x[i])
D=np.array(D);A=np.array(A);Z=np.array(Z);E=np.array(E);N=np.array(N);R=np.array(R)
# slope of the actual change on the predicted change (1: the predicted moves are real; 0: noise)
dd=D.ravel();aa=A.ravel()
slope=(dd*aa).sum()/max((dd*dd).sum(),1e-30)
# how much of the predicted change points back to the window mean
c=np.corrcoef(D[:,0],R)[0,1] if D[:,0].std()>0 else float('nan')
ca=np.corrcoef(A[:,0],R)[0,1]
print(f"{f.split('/')[-1]}: origins {len(Z)} model/naive MAE {E.mean()/N.mean():.3f}; slope actual~predicted change {slope:.3f}; corr(pred change k=1, mu-x_t) {c:.3f} vs corr(actual, mu-x_t) {ca:.3f}")
for lo,hi in ((0,1),(1,2),(2,4),(4,1e9)):
    s=(np.abs(Z)>=lo)&(np.abs(Z)<hi)
    if s.sum(): print(f"   |x_t-mu|/sigma in [{lo},{hi}): {s.sum():4d} origins, model/naive MAE {E[s].mean()/max(N[s].mean(),1e-30):.3f}, mean |pred change|/|actual change| {np.abs(D[s]).mean()/max(np.abs(A[s]).mean(),1e-30):.3f}")
s=np.abs(Z)<1; sg=np.sign(R[s])
print(f"   calm origins (|z|<1): median z {np.median(Z[s]):+.2f}; toward the window mean, mean predicted move {np.mean(D[s].mean(1)*sg):.4g}, mean actual move {np.mean(A[s].mean(1)*sg):.4g} (KPI units; mean |actual move| {np.abs(A[s]).mean():.4g})")
