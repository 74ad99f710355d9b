"""torch_compile_step.py -- the compiled training-step peer (issue 19): what a PyTorch user
compiles for a training step, `torch.compile(module)`, forward, loss, and
`torch.autograd.grad(loss, params)` over every parameter: the work of a vjp with v = 1 of the
seed's scalar loss.  Started from shared/reference/torch_compile_step.py (resnet18, wav2letter).

Every large model, through the seed benchmark's getters (tests/gpu/device/peer/vision_models.py,
audio_text_models.py, whose classes are in torch_models.py): torch.manual_seed(SEED) then the
getter, exactly as `functional_autograd_benchmark.py --model-filter M`, so the parameters, data
and loss are the seed's vjp's.  The getter's forward is a function of the parameters that first
re-attaches them to the module (utils.load_weights); here the parameters are attached once, as
nn.Parameters sharing the getter's tensors, the module in the forward's closure is replaced by
`torch.compile(module, mode=...)` and load_weights by a no-op, and the getter's own forward then
computes the loss (the loss itself, detr's Hungarian matcher included, runs eagerly, as in a
user's training loop that compiles the model).  multiheadattn has no module: its forward, a
function of the four weights, is what is compiled.

Cells: MODEL x MODE x TF32.  MODE: eager (no compile), default, reduce-overhead (CUDA graph
trees; torch.compiler.cudagraph_mark_step_begin() before each step), and with
--max-autotune max-autotune-no-cudagraphs.  TF32: off (cudnn.allow_tf32 = matmul.allow_tf32 =
False), default (PyTorch's: convolutions only, cudnn True, matmul False), on (both True).

Each cell runs in its own process (its own CUDA caching allocator, CUDA-graph pool and
compiled code, so one cell's memory and state never reach another's), under a time limit
(--timeout per cell, --model-timeout per model over its cells, --deadline over the run): a cell
that runs out is recorded as status "timeout", one that raises as "error" with one line, the
exception's type and message; the run goes on.  Timing: --warmup steps (compilation included;
their wall time is compile_s), then --iters steps, each between two torch.cuda.synchronize()
on the host clock; median and mean ms.  Memory: torch.cuda.reset_peak_memory_stats() with the
model, its parameters and the data resident, before the first step; peak_bytes =
torch.cuda.max_memory_allocated() over the warm-up and the timed steps (parameters, data,
activations, gradients, and what the compiled code holds: reduce-overhead's graph pool is
allocated while its graphs are recorded, in the warm-up, and replays allocate nothing);
warmup_peak_bytes and steady_peak_bytes the same over the warm-up alone and over the timed steps
alone (reset between); resident_bytes = torch.cuda.memory_allocated() before the first step
(parameters and data); reserved_bytes = torch.cuda.memory_reserved() at the end.  Before
compiling, one eager forward under no_grad (--no-prime: none) builds what a module caches on its
first call (the transformer's src_mask) outside the compiled code.

    python3 torch_compile_step.py [--models resnet18,wav2letter,...] [--modes eager,default,
        reduce-overhead] [--max-autotune] [--tf32 off|default|on[,...]] [--warmup 3] [--iters 20]
        [--timeout 300] [--model-timeout S] [--deadline S] [--json FILE] [--device cuda|cpu]
        [--peer-dir DIR] [--parallel-warmup --sync-dir DIR]

--parallel-warmup: every cell's process starts at once and compiles and warms up beside the
others (Inductor's compilation is CPU work, minutes for detr and fcn_resnet, and one GPU host
has 16 cores); the timed steps are then run one cell at a time.  A cell that finished its
warm-up creates SYNC/ready.K and waits for SYNC/go, which the driver creates once every cell
is ready or gone; it then takes an exclusive flock(2) on SYNC/lock for its timed steps alone.
So no two cells' timed steps overlap, and none overlaps another's warm-up.  Another program
that must not run beside the timed steps (fadc in the same call) waits for SYNC/go and runs
under `flock SYNC/lock ...`.  Each cell's process is still its own (allocator, graph pool,
compiled code); memory figures are per process and unaffected.  --timeout then limits a cell's
warm-up and, separately, its wait for the lock plus its timed steps; --model-timeout is not
used.  Each cell's stdout and stderr go to SYNC/cell-K.out and .err.

--json FILE is rewritten after every cell (a run cut short keeps what it measured): {"torch",
"gpu", "command", "cells": [{model, mode, tf32, status, error, ms_median, ms_mean, iters,
compile_s, peak_bytes, resident_bytes, warmup_peak_bytes, torch, gpu, cudnn_tf32, matmul_tf32}]}.
The table is printed at the end.  --peer-dir: where the getters are (default: this file's
folder if torch_models.py is there, else tests/gpu/device/peer of this checkout).
"""
import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import time

MODELS = ["multiheadattn", "wav2letter", "resnet18", "transformer", "deepspeech", "fcn_resnet", "detr"]
GETTERS = {
    "resnet18": ("vision_models", "get_resnet18"),
    "fcn_resnet": ("vision_models", "get_fcn_resnet"),
    "detr": ("vision_models", "get_detr"),
    "wav2letter": ("audio_text_models", "get_wav2letter"),
    "deepspeech": ("audio_text_models", "get_deepspeech"),
    "transformer": ("audio_text_models", "get_transformer"),
    "multiheadattn": ("audio_text_models", "get_multiheadattn"),
}
TF32 = {"off": (False, False), "default": (True, False), "on": (True, True)}  # (cudnn, matmul)
MARK = "@@CELL "


def peer_dir(arg):
    if arg:
        return os.path.abspath(arg)
    here = os.path.dirname(os.path.abspath(__file__))
    if os.path.exists(os.path.join(here, "torch_models.py")):
        return here
    return os.path.normpath(os.path.join(here, "..", "..", "tests", "gpu", "device", "peer"))


def one_line(e):
    msg = str(e).strip().splitlines()
    return f"{type(e).__name__}: {msg[0][:300] if msg else ''}"


# ------------------------------------------------------------------ one cell (child process)
def cell(args):
    import importlib
    import torch

    res = {"model": args.cell_model, "mode": args.cell_mode, "tf32": args.cell_tf32,
           "status": "error", "error": None, "torch": torch.__version__}
    dev = torch.device(args.device)
    cuda = dev.type == "cuda"
    res["gpu"] = torch.cuda.get_device_name(0) if cuda else "cpu"

    def emit():
        print(MARK + json.dumps(res), flush=True)

    try:
        conv, mm = TF32[args.cell_tf32]
        torch.backends.cudnn.allow_tf32 = conv
        torch.backends.cuda.matmul.allow_tf32 = mm
        res["cudnn_tf32"] = bool(torch.backends.cudnn.allow_tf32)
        res["matmul_tf32"] = bool(torch.backends.cuda.matmul.allow_tf32)
        sys.path.insert(0, peer_dir(args.peer_dir))
        mod_name, fn_name = GETTERS[args.cell_model]
        mod = importlib.import_module(mod_name)
        torch.manual_seed(args.seed)  # as the seed: manual_seed, then the model's getter
        forward, params = getattr(mod, fn_name)(dev)
        cells = dict(zip(forward.__code__.co_freevars, forward.__closure__ or ()))
        compile_kw = None if args.cell_mode == "eager" else (
            {} if args.cell_mode == "default" else {"mode": args.cell_mode})
        if "model" in cells:
            # Attach the getter's tensors as nn.Parameters (same storage, same values, the
            # names' order: Module.parameters()'s), make load_weights a no-op, and put the
            # compiled module where the getter's forward finds its model.
            import utils
            model, names = cells["model"].cell_contents, cells["names"].cell_contents
            newp = []
            for name, p in zip(names, params):
                q = torch.nn.Parameter(p.detach(), requires_grad=True)
                utils._set_nested_attr(model, name.split("."), q)
                newp.append(q)
            params = tuple(newp)
            mod.load_weights = lambda *a, **k: None
            # One eager forward before compiling: state the module caches on its first call
            # (the transformer's src_mask) is then built outside the compiled code; otherwise
            # reduce-overhead keeps a CUDA-graph output as module state and fails on the next
            # replay ("accessing tensor output of CUDAGraphs that has been overwritten").
            if not args.no_prime:
                with torch.no_grad():
                    forward(*params)
            if compile_kw is not None:
                cells["model"].cell_contents = torch.compile(model, **compile_kw)
            fwd = forward
        else:  # multiheadattn: a function of its weights
            fwd = forward if compile_kw is None else torch.compile(forward, **compile_kw)
        params = tuple(params)
        mark = getattr(getattr(torch, "compiler", None), "cudagraph_mark_step_begin", None)
        rebind = args.cell_mode == "reduce-overhead" and mark is not None

        def step():
            # reduce-overhead replays CUDA graphs: mark each training step so the previous
            # replay's outputs may be overwritten.
            if rebind:
                mark()
            return torch.autograd.grad(fwd(*params), params)

        sync = torch.cuda.synchronize if cuda else (lambda: None)
        sync()
        if cuda:
            res["resident_bytes"] = torch.cuda.memory_allocated()
            torch.cuda.reset_peak_memory_stats()
        t0 = time.perf_counter()
        for _ in range(args.warmup):
            step()
        sync()
        res["compile_s"] = round(time.perf_counter() - t0, 3)
        if cuda:
            res["warmup_peak_bytes"] = torch.cuda.max_memory_allocated()
            torch.cuda.reset_peak_memory_stats()
            # Not reset: the peak over warm-up and timed steps.  reduce-overhead's graph pool
            # is allocated while the graphs are recorded (in the warm-up); its replays
            # allocate nothing, so a peak over the timed steps alone leaves the pool out.
        if args.sync_dir:
            # --parallel-warmup: ready, wait for every other cell's warm-up, then time alone.
            open(os.path.join(args.sync_dir, f"ready.{args.sync_id}"), "w").close()
            while not os.path.exists(os.path.join(args.sync_dir, "go")):
                time.sleep(0.05)
            import fcntl
            lock = open(os.path.join(args.sync_dir, "lock"), "a")
            t_wait = time.perf_counter()
            fcntl.flock(lock, fcntl.LOCK_EX)  # released when the process exits
            res["lock_wait_s"] = round(time.perf_counter() - t_wait, 3)
            sync()
        ts = []
        for _ in range(args.iters):
            sync()
            s = time.perf_counter()
            step()
            sync()
            ts.append(time.perf_counter() - s)
        res["iters"] = len(ts)
        res["ms_median"] = statistics.median(ts) * 1e3
        res["ms_mean"] = statistics.fmean(ts) * 1e3
        if cuda:
            res["steady_peak_bytes"] = torch.cuda.max_memory_allocated()
            res["peak_bytes"] = max(res["warmup_peak_bytes"], res["steady_peak_bytes"])
            res["reserved_bytes"] = torch.cuda.memory_reserved()
        res["status"] = "ok"
    except Exception as e:  # a failed compile is a result
        res["error"] = one_line(e)
    emit()


# ------------------------------------------------------------------ the driver
def cell_cmd(args, m, mode, tf32):
    cmd = [sys.executable, os.path.abspath(__file__), "--cell-model", m, "--cell-mode", mode,
           "--cell-tf32", tf32, "--device", args.device, "--warmup", str(args.warmup),
           "--iters", str(args.iters), "--seed", str(args.seed)]
    if args.peer_dir:
        cmd += ["--peer-dir", args.peer_dir]
    if args.no_prime:
        cmd += ["--no-prime"]
    return cmd


def run_cell(args, m, mode, tf32, limit):
    cmd = cell_cmd(args, m, mode, tf32)
    base = {"model": m, "mode": mode, "tf32": tf32}
    if limit <= 0:
        return dict(base, status="skipped", error="no time left (--deadline / --model-timeout)")
    t0 = time.perf_counter()
    # Its own process group: Inductor's compile workers go with it on a timeout.
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True)
    try:
        out, err = p.communicate(timeout=limit)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        p.communicate()
        return dict(base, status="timeout", error=f"no result within {limit:.0f} s",
                    wall_s=round(time.perf_counter() - t0, 1))
    wall = round(time.perf_counter() - t0, 1)
    for line in out.splitlines():
        if line.startswith(MARK):
            return dict(json.loads(line[len(MARK):]), wall_s=wall)
    tail = [l for l in err.strip().splitlines() if l.strip()]
    return dict(base, status="crash", wall_s=wall,
                error=f"exit {p.returncode}: {tail[-1][:300] if tail else 'no output'}")


def run_parallel(args, cells, doc, tv, gpu):
    """--parallel-warmup: every cell at once through its warm-up, then the timed steps one
    cell at a time (the module's docstring)."""
    sd = os.path.abspath(args.sync_dir)
    os.makedirs(sd, exist_ok=True)
    for f in os.listdir(sd):
        if f.startswith(("ready.", "cell-")) or f == "go":
            os.remove(os.path.join(sd, f))
    open(os.path.join(sd, "lock"), "a").close()
    t_run = time.perf_counter()
    runs = []
    for k, (m, mode, tf32) in enumerate(cells):
        cmd = cell_cmd(args, m, mode, tf32) + ["--sync-dir", sd, "--sync-id", str(k)]
        out = open(os.path.join(sd, f"cell-{k}.out"), "w")
        err = open(os.path.join(sd, f"cell-{k}.err"), "w")
        p = subprocess.Popen(cmd, stdout=out, stderr=err, text=True, start_new_session=True)
        runs.append({"k": k, "base": {"model": m, "mode": mode, "tf32": tf32}, "p": p,
                     "t0": time.perf_counter(), "t_go": None, "killed": None, "out": out,
                     "err": err})
    go = False
    while True:
        now = time.perf_counter()
        live = 0
        for r in runs:
            if r["p"].poll() is not None:
                continue
            ready = os.path.exists(os.path.join(sd, f"ready.{r['k']}"))
            # Warming up: --timeout from its start; ready, waiting for the others: no limit
            # (they have theirs); after go: --timeout for the lock and the timed steps.
            if not ready:
                over = now - r["t0"] > args.timeout
            else:
                over = r["t_go"] is not None and now - r["t_go"] > args.timeout
            over = over or (args.deadline is not None and now - t_run > args.deadline)
            if over:
                try:
                    os.killpg(r["p"].pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                r["p"].wait()
                r["killed"] = f"no result within {args.timeout:.0f} s" + (
                    " of the lock and the timed steps" if ready else " of warm-up")
                continue
            live += 1
        if not go and all(r["p"].poll() is not None or
                          os.path.exists(os.path.join(sd, f"ready.{r['k']}")) for r in runs):
            open(os.path.join(sd, "go"), "w").close()
            go = True
            print(f"all cells warm after {time.perf_counter() - t_run:.1f} s: timed steps "
                  "one cell at a time", flush=True)
            for r in runs:
                r["t_go"] = time.perf_counter()
        if not live:
            break
        time.sleep(0.1)
    for r in runs:
        r["out"].close()
        r["err"].close()
        wall = round(time.perf_counter() - r["t0"], 1)
        c = None
        with open(os.path.join(sd, f"cell-{r['k']}.out")) as f:
            for line in f:
                if line.startswith(MARK):
                    c = dict(json.loads(line[len(MARK):]), wall_s=wall)
        if c is None:
            if r["killed"]:
                c = dict(r["base"], status="timeout", error=r["killed"], wall_s=wall)
            else:
                with open(os.path.join(sd, f"cell-{r['k']}.err")) as f:
                    tail = [l for l in f.read().strip().splitlines() if l.strip()]
                c = dict(r["base"], status="crash", wall_s=wall,
                         error=f"exit {r['p'].returncode}: {tail[-1][:300] if tail else 'no output'}")
        c.setdefault("torch", tv)
        c.setdefault("gpu", gpu)
        doc["cells"].append(c)
        report(c)
    if args.json:
        with open(args.json + ".tmp", "w") as f:
            json.dump(doc, f, indent=1)
        os.replace(args.json + ".tmp", args.json)


def report(c):
    ok = c["status"] == "ok"
    print(f"{c['model']} {c['mode']} tf32={c['tf32']}: " + (
        f"median {c['ms_median']:.3f} ms, mean {c['ms_mean']:.3f} ms, peak "
        f"{fmt_bytes(c.get('peak_bytes'))} MiB, warm-up {c.get('compile_s')} s"
        if ok else f"{c['status']}: {c.get('error')}") + f" [{c.get('wall_s')} s]", flush=True)


def fmt_bytes(b):
    return "" if b is None else f"{b / 2**20:,.0f}"


def table(cells):
    rows = ["| model | mode | tf32 | median ms | mean ms | peak MiB | steady peak MiB | "
            "resident MiB | warm-up s | status |", "|---|---|---|---:|---:|---:|---:|---:|---:|---|"]
    for c in cells:
        ok = c["status"] == "ok"
        rows.append("| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |".format(
            c["model"], c["mode"], c["tf32"],
            f"{c['ms_median']:.3f}" if ok else "", f"{c['ms_mean']:.3f}" if ok else "",
            fmt_bytes(c.get("peak_bytes")), fmt_bytes(c.get("steady_peak_bytes")),
            fmt_bytes(c.get("resident_bytes")),
            f"{c['compile_s']:.1f}" if c.get("compile_s") is not None else "",
            "ok" if ok else f"{c['status']}: {(c.get('error') or '').replace('|', '/')}"))
    return "\n".join(rows)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--modes", default="eager,default,reduce-overhead")
    ap.add_argument("--max-autotune", action="store_true",
                    help="also mode max-autotune-no-cudagraphs")
    ap.add_argument("--tf32", default="default", help="off, default, on, or a comma list")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--timeout", type=float, default=300, help="seconds per cell")
    ap.add_argument("--model-timeout", type=float, default=None,
                    help="seconds per model, over its cells")
    ap.add_argument("--deadline", type=float, default=None, help="seconds for the whole run")
    ap.add_argument("--json", default=None)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--peer-dir", default=None)
    ap.add_argument("--no-prime", action="store_true",
                    help="no eager forward before compiling (the transformer's reduce-overhead fails)")
    ap.add_argument("--parallel-warmup", action="store_true",
                    help="every cell warms up at once; the timed steps one cell at a time "
                         "(needs --sync-dir)")
    ap.add_argument("--sync-dir", default=None,
                    help="with --parallel-warmup: the folder of the ready/go files and the lock")
    ap.add_argument("--sync-id", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--cell-model", help=argparse.SUPPRESS)
    ap.add_argument("--cell-mode", help=argparse.SUPPRESS)
    ap.add_argument("--cell-tf32", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.cell_model:
        return cell(args)
    if args.parallel_warmup and not args.sync_dir:
        ap.error("--parallel-warmup needs --sync-dir DIR")

    models = [m for m in args.models.split(",") if m]
    modes = [m for m in args.modes.split(",") if m]
    if args.max_autotune and "max-autotune-no-cudagraphs" not in modes:
        modes.append("max-autotune-no-cudagraphs")
    tf32s = [t for t in args.tf32.split(",") if t]
    for m in models:
        if m not in GETTERS:
            ap.error(f"unknown model {m} (known: {', '.join(MODELS)})")
    for t in tf32s:
        if t not in TF32:
            ap.error(f"--tf32 {t}: off, default or on")
    try:
        import torch
        tv = torch.__version__
        gpu = torch.cuda.get_device_name(0) if args.device == "cuda" else "cpu"
    except Exception as e:
        tv, gpu = None, f"unknown ({one_line(e)})"
    print(f"torch {tv}, {gpu}", flush=True)
    doc = {"torch": tv, "gpu": gpu, "command": " ".join([os.path.basename(sys.argv[0])] + sys.argv[1:]),
           "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "cells": []}
    if args.parallel_warmup:
        run_parallel(args, [(m, mode, t) for m in models for t in tf32s for mode in modes],
                     doc, tv, gpu)
        print(table(doc["cells"]), flush=True)
        return
    t_run = time.perf_counter()
    for m in models:
        t_model = time.perf_counter()
        for tf32 in tf32s:
            for mode in modes:
                limit = args.timeout
                if args.model_timeout is not None:
                    limit = min(limit, args.model_timeout - (time.perf_counter() - t_model))
                if args.deadline is not None:
                    limit = min(limit, args.deadline - (time.perf_counter() - t_run))
                c = run_cell(args, m, mode, tf32, limit)
                c.setdefault("torch", tv)
                c.setdefault("gpu", gpu)
                doc["cells"].append(c)
                report(c)
                if args.json:
                    with open(args.json + ".tmp", "w") as f:
                        json.dump(doc, f, indent=1)
                    os.replace(args.json + ".tmp", args.json)
    print(table(doc["cells"]), flush=True)


if __name__ == "__main__":
    main()
