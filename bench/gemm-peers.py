#!/usr/bin/env python3
"""bench/gemm-peers.py -- the GEMMs of bench/gemm-bench.sh through PyTorch
(torch.matmul: MKL on x86-64 wheels) and numpy (its bundled OpenBLAS), for
the peers of a machine where no BLAS can be installed (the GPU host).

    python3 bench/gemm-peers.py [-t 1,16] [--dtype f32] SHAPE...

Each SHAPE is "BATCH M N K TA TB [BOP]" as in bench/gemm-bench.sh.  Times
are the best of repeated calls over at least 0.25 s after a warm-up, on
the wall clock; threads: torch.set_num_threads, and threadpoolctl for
numpy's OpenBLAS.  A batch carried by A (BOP a, B shared) is one product
of BATCH M rows, as a caller of a BLAS would write it.  One line per
shape, thread count and library: GFLOP/s.
"""
import argparse
import time

import numpy as np
import torch
from threadpoolctl import threadpool_limits


def best(fn):
    fn()
    t = []
    start = time.perf_counter()
    while len(t) < 3 or time.perf_counter() - start < 0.25:
        t0 = time.perf_counter()
        fn()
        t.append(time.perf_counter() - t0)
    return min(t)


def operands(lib, dt, B, M, N, K, TA, TB, BOP):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((K, M) if TA else (M, K)).astype(dt)
    b = rng.standard_normal((N, K) if TB else (K, N)).astype(dt)
    if B > 1 and BOP == "a":
        a = rng.standard_normal((B * M, K)).astype(dt)
    elif B > 1:
        b = rng.standard_normal((B,) + b.shape).astype(dt)
    if lib == "torch":
        a, b = torch.from_numpy(a), torch.from_numpy(b)
    at = a.T if TA else a
    bt = (b.transpose(-1, -2) if lib == "torch" else np.swapaxes(b, -1, -2)) if TB else b
    return at, bt


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-t", default="1")
    ap.add_argument("--dtype", default="f32")
    ap.add_argument("shapes", nargs="+")
    o = ap.parse_args()
    dt = np.float32 if o.dtype == "f32" else np.float64
    print(f"# torch {torch.__version__} ({torch.backends.mkl.is_available() and 'mkl' or 'no mkl'}),"
          f" numpy {np.__version__}", flush=True)
    for s in o.shapes:
        f = s.split()
        B, M, N, K, TA, TB = (int(x) for x in f[:6])
        BOP = f[6] if len(f) > 6 else "b"
        flops = 2.0 * B * M * N * K
        for T in (int(x) for x in o.t.split(",")):
            res = {}
            torch.set_num_threads(T)
            a, b = operands("torch", dt, B, M, N, K, TA, TB, BOP)
            res["torch"] = flops / best(lambda: torch.matmul(a, b)) * 1e-9
            a, b = operands("numpy", dt, B, M, N, K, TA, TB, BOP)
            with threadpool_limits(limits=T):
                res["numpy"] = flops / best(lambda: a @ b) * 1e-9
            print(f"{o.dtype} batch {B:5d}{BOP} M {M:5d} N {N:5d} K {K:6d} ta {TA} tb {TB} | T {T:2d} | "
                  f"torch {res['torch']:8.1f} GF/s | numpy {res['numpy']:8.1f} GF/s", flush=True)


if __name__ == "__main__":
    main()
