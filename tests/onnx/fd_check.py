# tests/onnx/fd_check.py FADC MODEL.onnx BASEDIR TMP -- onnx-fd.sh's check of
# one float64 model of tests/data/onnx/make_fd.py: a scalar loss L of the
# parameters p_1..p_n (BASEDIR/<name>.npy, the base point; the C<k> of
# BASEDIR/consts.txt imported as constants).  The float64 interpreter's
# vjp (v = 1: the gradient g) and jvp against central finite differences of
# its own forward, per parameter p along a random direction d_p:
#     fd_p = (L(p + t d_p) - L(p - t d_p)) / 2t,   t = 1e-6 max(1, max|p|)
#     err_vjp = |<g_p, d_p> - fd_p| / S_p,   S_p = sum_i |g_p,i d_p,i|
# (S_p the size of the terms of <g_p, d_p>), and the jvp along all the d_p
# at once: err_jvp = |jvp(d) - sum_p fd_p| / sum_p S_p; each <= 1e-6.  The
# truncation error of the central difference is O(t^2) ~ 1e-12, the rounding
# error eps |L| / t ~ 1e-10 |L|; a parameter whose S_p is 0 (no derivative
# at all) fails too, so every op is exercised.
import glob
import os
import subprocess
import sys

import numpy as np

fadc, model, base, tmp = sys.argv[1:5]
TOL = 1e-6
rng = np.random.default_rng(7)
consts = []
for c in open(os.path.join(base, "consts.txt")).read().split():
    consts += ["--const", c]
params = {os.path.basename(f)[:-4]: np.load(f)
          for f in sorted(glob.glob(os.path.join(base, "*.npy")))}
os.makedirs(tmp, exist_ok=True)


def run(task, changed=None, extra=(), tag="o"):
    # fadc run of MODEL.onnx at the base point with at most one parameter
    # changed (its value written here), one task.
    args = [fadc, "run", model, "--task", task] + consts
    for n in params:
        f = os.path.join(base, n + ".npy")
        if changed and n == changed[0]:
            f = os.path.join(tmp, "p.%s.npy" % tag)
            np.save(f, changed[1])
        args += ["--params", "%s=%s" % (n, f)]
    d = os.path.join(tmp, "out." + tag)
    r = subprocess.run(args + list(extra) + ["--out", d], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit("fadc run --task %s failed (%d): %s" % (task, r.returncode, r.stderr))
    return d


def loss(changed, tag):
    v = np.load(os.path.join(run("forward", changed, tag=tag), "loss.npy"))
    assert v.dtype == np.float64 and v.shape == (), (v.dtype, v.shape)
    return float(v)


one = os.path.join(tmp, "v.npy")
np.save(one, np.float64(1.0))
gdir = run("vjp", None, ["--v", one], tag="vjp")
worst, bad = 0.0, 0


def report(what, err):
    global worst, bad
    worst = max(worst, err)
    bad += not err <= TOL
    print("%-12s %-14s err %.2e%s" % (os.path.basename(model)[:-5], what, err,
                                       "" if err <= TOL else "  FAIL"))


# The vjp, parameter by parameter; the jvp along all the directions at once
# (fd_all the sum of the per-parameter differences, S_all that of the S).
dirs, fd_all, s_all = {}, 0.0, 0.0
for n, p in params.items():
    g = np.load(os.path.join(gdir, "grad.%s.npy" % n))
    d = dirs[n] = rng.standard_normal(p.shape)
    t = 1e-6 * max(1.0, float(np.abs(p).max()))
    fd = (loss((n, p + t * d), "plus") - loss((n, p - t * d), "minus")) / (2 * t)
    s = float(np.abs(g * d).sum())
    report("vjp " + n, abs(float((g * d).sum()) - fd) / s if s else np.inf)
    fd_all, s_all = fd_all + fd, s_all + s
vs = []
for n, d in dirs.items():
    vs += ["--v", os.path.join(tmp, "v.%s.npy" % n)]
    np.save(vs[-1], d)
jvp = float(np.load(os.path.join(run("jvp", None, vs, tag="jvp"), "jvp.loss.npy")))
report("jvp (all)", abs(jvp - fd_all) / s_all)
print("%s: worst normalized error %.2e (tolerance %g), %d failing" %
      (os.path.basename(model), worst, TOL, bad))
sys.exit(1 if bad else 0)
