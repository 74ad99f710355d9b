"""torch_compile_ppl.py -- the ppl models' tasks as torch.func transforms under
torch.compile(mode="reduce-overhead", fullgraph=True) (CUDA graph trees),
timed as ../shared/reference/peer-results.md describes: median of ITERS calls,
wall clock around call + torch.cuda.synchronize(), after warm-up.

    python3 torch_compile_ppl.py PEERDIR [--iters 300] [--budget 150] [CELLS...]

PEERDIR holds the seed's functional_autograd_benchmark.py and its
ppl_models.py (tests/gpu/device/peer); the transforms are the seed's own
functorch tasks (get_task_functorch), the inputs its getters' and
get_v_for's, ppl_robust_reg with seed 1 (with seed 0 the seed's run
aborts, models-spec.md §1.5). CELLS are model:task (default: every task
of both models); cells stop being started once BUDGET seconds have
passed (compilation takes seconds per cell), and the ones not run are
listed. A cell that fails prints its exception's first line, as the
peer results record torch.compile's failures.
"""
import argparse
import statistics
import sys
import time

import torch

TASKS = ["vjp", "vhp", "jvp", "hvp", "hessian", "hessian_fwdrev", "hessian_revrev",
         "jacfwd", "jacrev"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("peer")
    ap.add_argument("--iters", type=int, default=300)
    ap.add_argument("--budget", type=float, default=150)
    ap.add_argument("cells", nargs="*")
    a = ap.parse_intermixed_args()
    sys.path.insert(0, a.peer)
    import functional_autograd_benchmark as fab
    import ppl_models

    getters = {"ppl_simple_reg": ppl_models.get_simple_regression,
               "ppl_robust_reg": ppl_models.get_robust_regression}
    cells = a.cells or [f"{m}:{t}" for m in getters for t in TASKS]
    dev = torch.device("cuda")
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name(0)}")
    print("| model | task | torch.compile reduce-overhead (us, median) |")
    print("|---|---|---:|")
    t_start = time.time()
    skipped = []
    for cell in cells:
        m, task = cell.split(":")
        if time.time() - t_start > a.budget:
            skipped.append(cell)
            continue
        torch.manual_seed(1 if m == "ppl_robust_reg" else 0)
        model, inp = getters[m](dev)
        v = fab.get_v_for(model, inp, task)
        fn = fab.get_task_functorch(task)
        try:
            c = torch.compile(lambda *x: fn(model, x, v), mode="reduce-overhead", fullgraph=True)
            for _ in range(5):  # warm-up: compile, then the graph trees record
                c(*inp)
            torch.cuda.synchronize()
            ts = []
            for _ in range(a.iters):
                t0 = time.perf_counter()
                c(*inp)
                torch.cuda.synchronize()
                ts.append(time.perf_counter() - t0)
            print(f"| {m} | {task} | {statistics.median(ts) * 1e6:.1f} |", flush=True)
        except Exception as e:  # noqa: BLE001 -- a failing cell is a result
            msg = str(e).strip().splitlines()[0][:120] if str(e).strip() else type(e).__name__
            print(f"| {m} | {task} | fails: {type(e).__name__}: {msg} |", flush=True)
        torch._dynamo.reset()
    if skipped:
        print(f"not run (budget {a.budget:.0f} s spent): {' '.join(skipped)}")


if __name__ == "__main__":
    main()
