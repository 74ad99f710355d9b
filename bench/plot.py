#!/usr/bin/python3
"""bench/plot.py -- a chart of one benchmark run: fadc and its peers, per cell (issue 19).

    /usr/bin/python3 bench/plot.py RUN.json [MORE.json ...] -o CHART.png [--seed TABLE.md ...]
        [--title TEXT] [--size WxH]

Inputs, told apart by their shape (docs/BENCH.md, "Charts"):
  - `fadc-bench --json` ({"environment": {...}, "cells": [{model, task, samples, ...}]}): one
    bar per cell for fadc.  A cell whose artifact options say `allow_tf32=1`, or whose model
    name ends in `_tf32`, is "fadc TF32", else "fadc strict" (on a GPU) or "fadc CPU" (no GPU in
    the environment) or "fadc interp" (the interpreter backend); a model name's `_tf32`, `_fp32` or
    `_strict` suffix (hand-built artifacts beside each other in one configuration) is dropped, so
    that those bars join the model's cell.
  - `bench/peers/torch_compile_step.py --json` ({"torch", "cells": [{model, mode, tf32,
    status, ms_median, ...}]}): its training step is the work of a vjp with v = 1, so its cells
    are the task `vjp` (a `task` field, where present, wins).  One system per mode and TF32
    setting: "torch eager (TF32 default)", "torch.compile reduce-overhead (TF32 off)", ...
  - `--seed TABLE.md`: the markdown table of the seed (`functional_autograd_benchmark.py
    --output`, `| model | task | mean | var |`); rows "functorch T" are the torch.func leg.
    Markdown tables of fadc-bench have the same shape, which is why these come by flag.

Per cell (model x task), bars of each system's time on a log scale.  Time: the median of the
timed runs where the input has them (fadc-bench's samples, the peer's ms_median), else the
mean (the seed's table).  On every bar that ran: best peer / this bar, where best peer is the
fastest peer bar of the cell over every mode and precision present (so a strict fadc bar is
measured against TF32 peers too, where the inputs hold them); > 1 means faster than every peer.
A cell no peer ran has no ratio.  Cells that did not run (the peer's error, timeout, crash,
skipped; fadc's skipped) are hatched bars labelled with their status, never left out;
fadc's cells that failed their consistency or reference check keep their bar and say so.

The second panel: peak memory per cell and system (MiB, log scale), from `peak_memory_bytes`
(fadc-bench's and the peer's field; the peer's older `peak_bytes` where that is absent); "n/a"
where the input does not have it.

A system's cell given twice (two runs of the same call) keeps the later file's, and the
replacement is said on stderr.  The bars are also printed on stdout as a markdown table.

Size: --size WxH in inches, else W = max(10, 2 + 0.25 x slots) and H = 9, at 100 dpi (a cell
takes max(its bars, 3) + 1 slots): round(100 W) x 900 pixels.  The PNG is written to a
temporary file beside the target and renamed over it.

Exit status: 0 done; 1 bad input (a file missing or unreadable, not JSON, an unknown schema,
a cell missing its fields, nothing to draw) or matplotlib missing; 2 usage.
"""
import argparse
import json
import math
import os
import stat
import statistics
import sys
import tempfile

PROG = "plot.py"
DPI = 100


class InputError(Exception):
    pass


def die(msg, rc=1):
    print(f"{PROG}: {msg}", file=sys.stderr)
    sys.exit(rc)


def read_text(path):
    # Regular files only: a FIFO would block the open, a device never end.
    try:
        st = os.stat(path)
    except OSError as e:
        raise InputError(f"{path}: cannot open: {e.strerror}")
    if stat.S_ISDIR(st.st_mode):
        raise InputError(f"{path}: is a folder, not a file")
    if not stat.S_ISREG(st.st_mode):
        raise InputError(f"{path}: not a regular file")
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError as e:
        raise InputError(f"{path}: cannot open: {e.strerror}")
    except UnicodeDecodeError:
        raise InputError(f"{path}: not JSON (not UTF-8 text)")


def is_num(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


# ------------------------------------------------------------------ the inputs
# A bar: {model, task, system, kind ("fadc" | "peer"), order (the legend's place), ms, mem
# (bytes or None), status ("ok" or why it did not run), note, file}.

PEER_MODES = ["eager", "default", "reduce-overhead", "max-autotune-no-cudagraphs"]
PEER_TF32 = ["off", "default", "on"]


def fadc_bars(path, d):
    env = d["environment"]
    if not isinstance(env, dict):
        raise InputError(f"{path}: unknown schema: 'environment' is not an object")
    gpu = env.get("gpu")
    backend = env.get("backend")
    bars = []
    for i, c in enumerate(d["cells"]):
        model, task = cell_keys(path, i, c, ("model", "task"))
        opts = c.get("artifact_options") or ""
        tf32 = "allow_tf32=1" in opts.split() or model.endswith("_tf32")
        for suf in ("_tf32", "_fp32", "_strict"):
            if model.endswith(suf) and len(model) > len(suf):
                model = model[: -len(suf)]
        if backend == "interp":
            system, order = "fadc interp", 3
        elif tf32:
            system, order = "fadc TF32", 1
        elif gpu:
            system, order = "fadc strict", 0
        else:
            system, order = "fadc CPU", 2
        b = dict(model=model, task=task, system=system, kind="fadc", order=(0, order), ms=None,
                 mem=None, status="ok", note="", file=path)
        if "skipped" in c:
            b["status"] = "skipped"
            b["note"] = str(c["skipped"])
        else:
            samples = [s for s in c.get("samples") or [] if is_num(s) and s > 0]
            if samples:
                b["ms"] = statistics.median(samples) * 1e3
            elif is_num(c.get("mean")) and c["mean"] > 0:
                b["ms"] = c["mean"] * 1e3
            else:
                b["status"] = "no samples"
            notes = []
            if c.get("consistent") is False:
                notes.append("inconsistent")
            if c.get("reference_match") is False:
                notes.append("reference mismatch")
            b["note"] = ", ".join(notes)
        m = c.get("peak_memory_bytes")
        b["mem"] = m if is_num(m) else None
        bars.append(b)
    return bars


def peer_bars(path, d):
    bars = []
    for i, c in enumerate(d["cells"]):
        model, mode, tf32, status = cell_keys(path, i, c, ("model", "mode", "tf32", "status"))
        task = c.get("task") if isinstance(c.get("task"), str) else "vjp"
        name = "torch eager" if mode == "eager" else f"torch.compile {mode}"
        mo = PEER_MODES.index(mode) if mode in PEER_MODES else len(PEER_MODES)
        to = PEER_TF32.index(tf32) if tf32 in PEER_TF32 else len(PEER_TF32)
        b = dict(model=model, task=task, system=f"{name} (TF32 {tf32})", kind="peer",
                 order=(2, mo, to, mode, tf32), ms=None, mem=None, status=status,
                 note=str(c.get("error") or ""), file=path)
        if status == "ok":
            ms = c.get("ms_median", c.get("ms_mean"))
            if not is_num(ms) or ms <= 0:
                raise InputError(f"{path}: cells[{i}]: status ok without a time > 0 in "
                                 f"'ms_median'")
            b["ms"] = float(ms)
        m = c.get("peak_memory_bytes", c.get("peak_bytes"))
        b["mem"] = m if is_num(m) and status == "ok" else None
        bars.append(b)
    return bars


def cell_keys(path, i, c, keys):
    if not isinstance(c, dict):
        raise InputError(f"{path}: cells[{i}] is not an object")
    out = []
    for k in keys:
        if not isinstance(c.get(k), str) or not c[k]:
            raise InputError(f"{path}: cells[{i}]: '{k}' missing or not a string")
        out.append(c[k])
    return out


def read_json(path):
    text = read_text(path)
    try:
        d = json.loads(text)
    except json.JSONDecodeError as e:
        raise InputError(f"{path}:{e.lineno}:{e.colno}: not JSON: {e.msg}")
    if not isinstance(d, dict) or not isinstance(d.get("cells"), list):
        raise InputError(f"{path}: unknown schema: neither fadc-bench --json (environment, "
                         f"cells) nor torch_compile_step.py --json (torch, cells)")
    if "environment" in d:
        return fadc_bars(path, d), env_line_fadc(d)
    if "torch" in d:
        return peer_bars(path, d), f"PyTorch {d.get('torch')} on {d.get('gpu') or 'the CPU'}"
    raise InputError(f"{path}: unknown schema: neither fadc-bench --json (environment, "
                     f"cells) nor torch_compile_step.py --json (torch, cells)")


def env_line_fadc(d):
    e = d["environment"]
    where = e.get("gpu") or f"{e.get('cpu', 'a CPU')}, {e.get('threads', '?')} threads"
    return f"fadc {e.get('fadc', '')} on {where}".replace("  ", " ")


def read_seed(path):
    """The seed's markdown table: | model | task | mean | var | rows, mean in seconds."""
    text = read_text(path)
    lines = [l.strip() for l in text.splitlines() if l.strip()]
    head = [x.strip() for x in lines[0].strip("|").split("|")] if lines else []
    if head[:3] != ["model", "task", "mean"]:
        raise InputError(f"{path}:1: not the seed's markdown table "
                         f"('| model | task | mean | var |' expected)")
    bars = []
    for n, l in enumerate(lines[1:], 2):
        cols = [x.strip() for x in l.strip("|").split("|")]
        if set("".join(cols)) <= set("-: "):
            continue
        if len(cols) < 3:
            raise InputError(f"{path}:{n}: a row of fewer than 3 columns")
        model, task, mean = cols[0], cols[1], cols[2]
        leg = "torch.func" if task.startswith("functorch ") else "autograd.functional"
        task = task[len("functorch "):] if leg == "torch.func" else task
        try:
            ms = float(mean) * 1e3
        except ValueError:
            raise InputError(f"{path}:{n}: mean '{mean}' is not a number")
        bars.append(dict(model=model, task=task, system=f"torch eager, the seed ({leg})",
                         kind="peer", order=(1, leg), ms=ms if math.isfinite(ms) else None,
                         mem=None, status="ok" if math.isfinite(ms) else "no samples", note="",
                         file=path))
    return bars


def merge(bars):
    """One bar per (model, task, system): a later file's replaces an earlier one's."""
    out, where = [], {}
    for b in bars:
        k = (b["model"], b["task"], b["system"])
        if k in where:
            old = out[where[k]]
            print(f"{PROG}: note: {b['model']} {b['task']} {b['system']}: {b['file']} "
                  f"({b['status']}) replaces {old['file']} ({old['status']})", file=sys.stderr)
            out[where[k]] = b
        else:
            where[k] = len(out)
            out.append(b)
    return out


def ratios(bars):
    """best peer / bar for every bar that ran, where a peer ran the cell."""
    best = {}
    for b in bars:
        if b["kind"] == "peer" and b["ms"] is not None:
            k = (b["model"], b["task"])
            best[k] = min(best.get(k, math.inf), b["ms"])
    for b in bars:
        k = (b["model"], b["task"])
        b["ratio"] = best[k] / b["ms"] if b["ms"] is not None and k in best else None


# ------------------------------------------------------------------ the chart
def fmt_ms(v):
    return "" if v is None else (f"{v:.3g}" if v < 100 else f"{v:.0f}")


def fmt_mib(v):
    return "n/a" if v is None else f"{v / 2**20:,.1f}"


def print_table(bars, cells, systems):
    print("| model | task | system | ms | best peer / this | peak MiB | status |")
    print("|---|---|---|---:|---:|---:|---|")
    for cell in cells:
        for s in systems:
            for b in bars:
                if (b["model"], b["task"]) == cell and b["system"] == s:
                    r = "" if b["ratio"] is None else f"{b['ratio']:.2f}"
                    st = b["status"] + (f": {b['note']}" if b["note"] else "")
                    print(f"| {cell[0]} | {cell[1]} | {s} | {fmt_ms(b['ms'])} | {r} | "
                          f"{fmt_mib(b['mem'])} | {st.replace('|', '/')} |")


COLORS = {
    "fadc strict": "#1f4e9c", "fadc TF32": "#6fa8ff", "fadc CPU": "#2c7fb8",
    "fadc interp": "#9ecae1",
}
MODE_COLORS = {"eager": "#7f7f7f", "default": "#e6550d", "reduce-overhead": "#31a354",
               "max-autotune-no-cudagraphs": "#c51b8a"}


def color_of(b):
    if b["system"] in COLORS:
        return COLORS[b["system"]]
    if b["order"][0] == 1:  # the seed
        return "#bdbdbd" if b["order"][1] == "torch.func" else "#525252"
    mode, tf32 = b["order"][3], b["order"][4]
    base = MODE_COLORS.get(mode, "#756bb1")
    # Precision by lightness: off darkest, default as is, on lightest.
    import matplotlib.colors as mc
    r, g, bl = mc.to_rgb(base)
    f = {"off": 0.65, "default": 1.0, "on": None}.get(tf32, 1.0)
    if f is None:
        return (r + (1 - r) * 0.5, g + (1 - g) * 0.5, bl + (1 - bl) * 0.5)
    return (r * f, g * f, bl * f)


def draw(bars, cells, systems, out, title, sub, size):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    by = {(b["model"], b["task"], b["system"]): b for b in bars}
    # A cell takes max(its bars, 3) slots, so that the labels of one-bar cells do not meet,
    # and one more between cells.
    per = [sum((c[0], c[1], s) in by for s in systems) for c in cells]
    slots = sum(max(n, 3) + 1 for n in per)
    w, h = size if size else (max(10.0, 2 + 0.25 * slots), 9.0)
    fig, (ax, am) = plt.subplots(2, 1, figsize=(w, h), dpi=DPI, sharex=True,
                                 gridspec_kw={"height_ratios": [3, 2]})
    fig.suptitle(title, fontsize=12, y=0.995)
    fig.text(0.5, 0.955, sub, ha="center", va="top", fontsize=8)
    first = {s: next(b for b in bars if b["system"] == s) for s in systems}
    times = [b["ms"] for b in bars if b["ms"] is not None]
    mems = [b["mem"] / 2**20 for b in bars if b["mem"]]  # a log scale: none of 0 bytes
    tlo, thi = (min(times), max(times)) if times else (0.1, 10.0)
    mlo, mhi = (min(mems), max(mems)) if mems else (1.0, 100.0)
    ax.set_yscale("log")
    am.set_yscale("log")
    ax.set_ylim(tlo / 4, thi * 12)
    am.set_ylim(mlo / 4, mhi * 12)
    xt, xl = [], []
    x = 0.0
    for cell in cells:
        here = [s for s in systems if (cell[0], cell[1], s) in by]
        x += (max(len(here), 3) - len(here)) / 2
        x0 = x
        for s in here:
            b = by[(cell[0], cell[1], s)]
            col = color_of(first[s])
            if b["ms"] is not None:
                ax.bar(x, b["ms"], 0.9, color=col, edgecolor="black", linewidth=0.4)
                lab = "" if b["ratio"] is None else f"{b['ratio']:.2f}"
                if b["note"]:
                    lab += (" " if lab else "") + b["note"]
                if lab:
                    ax.text(x, b["ms"] * 1.1, lab, ha="center", va="bottom", rotation=90,
                            fontsize=7)
            else:
                # Did not run: an empty hatched bar, its status written on it.
                top = thi
                ax.bar(x, top, 0.9, facecolor="none", edgecolor=col, hatch="///", linewidth=0.8)
                st = "failed" if b["status"] in ("error", "crash") else b["status"]
                ax.text(x, math.sqrt(tlo / 4 * top), st, ha="center", va="center", rotation=90,
                        fontsize=8, color="#b00000", fontweight="bold",
                        bbox=dict(facecolor="white", edgecolor="none", pad=1))
            if b["mem"]:
                am.bar(x, b["mem"] / 2**20, 0.9, color=col, edgecolor="black", linewidth=0.4)
            else:
                am.text(x, mlo / 3, "n/a" if b["mem"] is None else "0 B", ha="center",
                        va="bottom", rotation=90, fontsize=7, color="#555555")
            x += 1
        xt.append((x0 + x - 1) / 2)
        xl.append(f"{cell[0]}\n{cell[1]}")
        x += (max(len(here), 3) - len(here)) / 2 + 1
    ax.set_ylabel("ms per call (log)")
    am.set_ylabel("peak memory, MiB (log)")
    if not mems:
        am.text(0.5, 0.5, "no peak memory in the inputs", transform=am.transAxes, ha="center",
                va="center", fontsize=10, color="#555555")
    am.set_xticks(xt)
    am.set_xticklabels(xl, fontsize=8)
    am.set_xlim(-1, max(x - 1, 1))
    for a in (ax, am):
        a.grid(axis="y", which="major", linewidth=0.3)
    handles = [Patch(facecolor=color_of(first[s]), edgecolor="black", label=s) for s in systems]
    if any(b["ms"] is None for b in bars):
        handles.append(Patch(facecolor="none", edgecolor="black", hatch="///",
                             label="did not run (why, on the bar)"))
    # The legend under the chart, 4 to a row, so that no number of systems covers a bar.
    rows = -(-len(handles) // 4)
    fig.legend(handles=handles, fontsize=7, ncol=min(4, len(handles)), loc="lower center",
               frameon=False)
    fig.subplots_adjust(left=0.07, right=0.99, top=0.89, bottom=0.085 + 0.19 * rows / h,
                        hspace=0.08)
    d = os.path.dirname(os.path.abspath(out))
    fd, tmp = tempfile.mkstemp(prefix=".plot-", suffix=".png", dir=d)
    try:
        with os.fdopen(fd, "wb") as f:
            fig.savefig(f, format="png", dpi=DPI)
        os.chmod(tmp, 0o644)
        os.replace(tmp, out)
    except BaseException:
        os.unlink(tmp)
        raise
    plt.close(fig)


def parse_size(s):
    try:
        w, h = (float(v) for v in s.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{s}' is not WxH (inches, e.g. 12x9)")
    if not (1 <= w <= 100 and 1 <= h <= 100):
        raise argparse.ArgumentTypeError(f"'{s}': each side must be 1 .. 100 inches")
    return w, h


def main():
    ap = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    ap.add_argument("inputs", nargs="+", metavar="RUN.json",
                    help="fadc-bench --json and torch_compile_step.py --json files")
    ap.add_argument("-o", "--output", required=True, metavar="CHART.png")
    ap.add_argument("--seed", action="append", default=[], metavar="TABLE.md",
                    help="the seed's markdown table (functional_autograd_benchmark.py --output)")
    ap.add_argument("--title", default=None)
    ap.add_argument("--size", type=parse_size, default=None, metavar="WxH",
                    help="inches (at 100 dpi)")
    a = ap.parse_args()
    out = a.output
    if not out.endswith(".png"):
        ap.error(f"-o {out}: the chart is a PNG (a name ending in .png)")
    od = os.path.dirname(os.path.abspath(out))
    if not os.path.isdir(od):
        die(f"-o {out}: no folder {od}")
    if os.path.isdir(out):
        die(f"-o {out}: is a folder")
    if os.path.exists(out) and not os.path.isfile(out):
        die(f"-o {out}: exists and is not a regular file")
    for p in a.inputs + a.seed:
        if os.path.exists(p) and os.path.exists(out) and os.path.samefile(p, out):
            die(f"-o {out} is the input {p}")
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        die("matplotlib is not installed (Debian: apt-get install python3-matplotlib; run "
            "with /usr/bin/python3)")
    bars, envs = [], []
    try:
        for p in a.inputs:
            b, e = read_json(p)
            bars += b
            if e not in envs:
                envs.append(e)
        for p in a.seed:
            bars += read_seed(p)
    except InputError as e:
        die(str(e))
    if not bars:
        die(f"no cells in {', '.join(a.inputs + a.seed)}: nothing to draw")
    bars = merge(bars)
    ratios(bars)
    cells = []
    for b in bars:
        if (b["model"], b["task"]) not in cells:
            cells.append((b["model"], b["task"]))
    systems = sorted({b["system"] for b in bars},
                     key=lambda s: next(b["order"] for b in bars if b["system"] == s))
    print_table(bars, cells, systems)
    title = a.title or "fadc and its peers, per cell"
    sub = ("On each bar: best peer / this bar, best = the fastest peer bar of the cell over "
           "every mode and precision\n(> 1: faster than every peer; the best peer reads 1.00). "
           "Time: the median of the timed runs" + ("; the seed's table: its mean" if a.seed
                                                    else "") + ".\n" + "; ".join(envs))
    draw(bars, cells, systems, out, title, sub, a.size)


if __name__ == "__main__":
    main()
