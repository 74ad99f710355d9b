"""Per-call time of the Python package against the C API, on one model and task.

    python3 python/bench_call.py MODEL.so [--task vjp] [--calls 20000] [--repeats 7]
                                 [--device cpu|cuda:0]

Prints microseconds per call (the median of --repeats batches of --calls calls, each batch's
mean), for:
  c_loop    fadc_run called from a Python loop through ctypes with everything prepared (the
            floor of any ctypes binding: the ctypes call and the loop);
  run_out   m.run(task, v, out=preallocated): the documented hot path;
  method    m.vjp(v, out=...) (through the task method);
  run_new   m.run(task, v): caller-owned outputs allocated at each call (NumPy);
  view      m.run(task, v, view=True): model-owned views.
On a GPU each call is followed by m.synchronize() in every variant (the C loop too), so that
the figure is a call's latency, as fadc-bench times it on the host.  Compare with
`fadc-bench --model-filter M --task-filter T --num-iters N --num-threads 1` and
`fadc run MODEL.so --task T --time N` on the same machine (docs/PERFORMANCE.md).
"""

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fadc  # noqa: E402
from fadc import _lib  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--task", default="vjp")
    ap.add_argument("--calls", type=int, default=20000)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--device", default="cpu")
    a = ap.parse_args()
    m = fadc.load(a.model, device=a.device, num_threads=1)
    t = m.task(a.task)
    rng = np.random.default_rng(0)
    vals = {s.name: rng.random(s.shape).astype(s.dtype) for s in t.inputs}
    v = vals[t.inputs[0].name] if len(vals) == 1 else vals
    if a.device != "cpu":  # inputs on the device: through DLPack (torch or cupy needed)
        import torch  # type: ignore
        conv = {k: torch.from_numpy(np.asarray(x)).to(a.device) for k, x in vals.items()}
        v = conv[t.inputs[0].name] if len(conv) == 1 else conv
    out = m.run(a.task, v)
    sync = m.synchronize if a.device != "cpu" else (lambda: None)

    # The C loop: the task's wraps as run() left them in its slot cache.
    m.run(a.task, v, out=out)
    mp, idx, ia, oa = m._m, t.index, t.in_arr, t.out_arr
    nin, nout, frun = len(t.inputs), len(t.outputs), _lib.lib.fadc_run

    def c_loop(n):
        for _ in range(n):
            if frun(mp, idx, ia, nin, oa, nout):
                raise RuntimeError("fadc_run failed")
            sync()

    def run_out(n):
        for _ in range(n):
            m.run(a.task, v, out=out)
            sync()

    meth = getattr(m, a.task)

    def method(n):
        for _ in range(n):
            meth(v, out=out)
            sync()

    def run_new(n):
        for _ in range(n):
            m.run(a.task, v)
            sync()

    def view(n):
        for _ in range(n):
            m.run(a.task, v, view=True)
            sync()

    variants = [("c_loop", c_loop), ("run_out", run_out), ("method", method),
                ("run_new", run_new), ("view", view)]
    res = {k: [] for k, _ in variants}
    for f in variants:
        f[1](min(a.calls, 1000))  # warm-up
    for _ in range(a.repeats):  # interleaved, so that a load change hits every variant
        for k, f in variants:
            t0 = time.perf_counter_ns()
            f(a.calls)
            res[k].append((time.perf_counter_ns() - t0) / a.calls / 1e3)
    print(f"# {a.model} {a.task} on {a.device}: us per call, median of {a.repeats} x "
          f"{a.calls} calls (min .. max)")
    for k, xs in res.items():
        xs.sort()
        print(f"{k:8s} {xs[len(xs) // 2]:8.3f}   ({xs[0]:.3f} .. {xs[-1]:.3f})")
    m.close()


if __name__ == "__main__":
    main()
