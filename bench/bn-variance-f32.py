#!/usr/bin/env python3
# bench/bn-variance-f32.py -- batch norm's variance in f32, host emulation (h-g20s, issue 20):
# the two-pass mean((x - mu)^2) against the shifted one pass mean((x - s)^2) - mean(x - s)^2
# (codegen/kir_layout.c, bn_stats_one_pass), each against the float64 variance.
# Every operation rounded to f32 through struct; summed as the kernels sum (runs of 64 terms,
# then the partials in 32 chunks).  Pure Python, ~30 s.  docs/PERFORMANCE.md, "Batch norm's
# statistics in one pass".
import random, struct, math
def f(x): return struct.unpack('f', struct.pack('f', x))[0]
def fsum(vals):
    parts=[]
    for i in range(0,len(vals),64):
        a=0.0
        for v in vals[i:i+64]: a=f(a+v)
        parts.append(a)
    ch=max(1,len(parts)//32); cs=[]
    for i in range(0,len(parts),ch):
        a=0.0
        for v in parts[i:i+ch]: a=f(a+v)
        cs.append(a)
    a=0.0
    for v in cs: a=f(a+v)
    return a
random.seed(1)
n=64*1024
for mu in (0.0, 1.0, 8.0, 40.0, 300.0):
    errs2=[];errs1=[]
    for trial in range(3):
        x=[f(random.gauss(mu,1.0)) for _ in range(n)]
        m=math.fsum(x)/n; truth=math.fsum((v-m)**2 for v in x)/n
        nf=f(float(n))
        # two-pass
        m32=f(fsum(x)/nf)
        v2=f(fsum([f(f(v-m32)*f(v-m32)) for v in x])/nf)
        # shifted one-pass, s = x[0]
        s=x[0]
        d=[f(v-s) for v in x]
        m1=f(fsum(d)/nf); m2=f(fsum([f(t*t) for t in d])/nf)
        v1=max(f(m2-f(m1*m1)),0.0)
        errs2.append(abs(v2-truth)/truth); errs1.append(abs(v1-truth)/truth)
    print("mu/sigma %6.1f: two-pass rel err %.2e, shifted one-pass %.2e" % (mu, max(errs2), max(errs1)))
