"""Per-call time of the Python package against the C API, on one model and task.

    python3 python/bench_call.py MODEL.so [--task vjp] [--calls 20000] [--repeats 7]
                                 [--device cpu|cuda:0]

Prints microseconds per call (median, mean, 10th and 90th percentiles of --repeats x --calls
calls, each timed alone with perf_counter_ns as fadc-bench times each iteration), for:
  c_call    fadc_run called through ctypes with everything prepared (the floor of any ctypes
            binding);
  c_order   (GPU) c_call between fadc_context_wait_stream and _signal_stream against torch's
            current stream, looked up once: the floor of a call ordered against the caller's
            stream (what the package does by default);
  run_out   m.run(task, v, out=preallocated): the documented hot path;
  method    m.vjp(v, out=...) (through the task method);
  run_new   m.run(task, v): caller-owned outputs allocated at each call (NumPy);
  view      m.run(task, v, view=True): model-owned views;
  timer     an empty Python call: the timing's own cost, in every figure above.
On a GPU, two parts of run_out's own cost, timed alone (no synchronize): adapter (the
adapter checks of the task's torch tensors, as the hot path makes them at each call) and
cur_strm (torch's current stream, asked for as the hot path does).
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

    # The bare call: fadc_run on runtime tensors made once.  On the CPU, the task's wraps as
    # run() left them in its slot cache; on a GPU (whose DLPack inputs are wrapped at each
    # call, and released after it), wraps of the same device memory made here.
    m.run(a.task, v, out=out)
    mp, idx = m._m, t.index
    nin, nout, frun = len(t.inputs), len(t.outputs), _lib.lib.fadc_run
    if a.device == "cpu":
        ia, oa = t.in_arr, t.out_arr
    else:
        import ctypes

        def wrap(spec, x):
            h = ctypes.c_void_p()
            dims = (ctypes.c_int64 * max(len(spec.shape), 1))(*spec.shape)
            m._check(_lib.lib.fadc_tensor_wrap_device(m._ctx, spec.code, len(spec.shape), dims,
                                                      x.data_ptr(), ctypes.byref(h)))
            return h.value
        vin = [conv[s.name] for s in t.inputs]
        vout = [out[s.name] for s in t.outputs]
        ia = (ctypes.c_void_p * max(nin, 1))(*[wrap(s, x) for s, x in zip(t.inputs, vin)])
        oa = (ctypes.c_void_p * max(nout, 1))(*[wrap(s, x) for s, x in zip(t.outputs, vout)])

    # Each variant is one call (on a GPU followed by synchronize), timed alone with
    # perf_counter_ns as fadc-bench times each iteration with the host clock; the samples
    # give the median (what a call costs when nothing interferes) and the mean.
    def c_call():
        if frun(mp, idx, ia, nin, oa, nout):
            raise RuntimeError("fadc_run failed")
        sync()

    if a.device != "cpu":
        cs = ctypes.c_void_p(torch.cuda.current_stream(a.device).cuda_stream or None)
        ctx, fw, fs = ctypes.c_void_p(m._ctx), _lib.wait_raw, _lib.signal_raw

    def c_order():
        if fw(ctx, cs) or frun(mp, idx, ia, nin, oa, nout) or fs(ctx, cs):
            raise RuntimeError("fadc_run or an ordering failed")
        sync()

    def run_out():
        m.run(a.task, v, out=out)
        sync()

    meth = getattr(m, a.task)

    def method():
        meth(v, out=out)
        sync()

    def run_new():
        m.run(a.task, v)
        sync()

    def view():
        m.run(a.task, v, view=True)
        sync()

    def empty():
        pass

    if a.device != "cpu":
        from fadc import _model
        ad, cur, dix = _model._torch_key, _model._torch_stream, m._index
        slots = [(x, ad(x)) for x in vin + vout]  # what the slots hold (run_new refills them)

        def adapter():
            for x, k in slots:
                if ad(x) != k:
                    raise RuntimeError("a slot's key changed")

        def cur_strm():
            cur(dix)

    variants = [("c_call", c_call)] + ([("c_order", c_order)] if a.device != "cpu" else []) + [
        ("run_out", run_out), ("method", method), ("run_new", run_new), ("view", view),
        ("timer", empty)] + ([("adapter", adapter), ("cur_strm", cur_strm)]
                             if a.device != "cpu" else [])
    res = {k: [] for k, _ in variants}
    pc = time.perf_counter_ns
    for _, f in variants:  # warm-up
        for _ in range(min(a.calls, 1000)):
            f()
    for _ in range(a.repeats):  # interleaved, so that a load change hits every variant
        for k, f in variants:
            xs = res[k]
            for _ in range(a.calls):
                t0 = pc()
                f()
                xs.append(pc() - t0)
    print(f"# {a.model} {a.task} on {a.device}: us per call over {a.repeats} x {a.calls} "
          "calls, each timed alone (timer: an empty call)")
    print(f"{'variant':8s} {'median':>8s} {'mean':>8s} {'p10':>8s} {'p90':>8s}")
    for k, xs in res.items():
        x = np.array(xs) / 1e3
        print(f"{k:8s} {np.median(x):8.3f} {x.mean():8.3f} {np.percentile(x, 10):8.3f} "
              f"{np.percentile(x, 90):8.3f}")
    m.close()


if __name__ == "__main__":
    main()
