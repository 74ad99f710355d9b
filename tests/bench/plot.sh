# RUN: bash %s
# bench/plot.py and `fadc-bench compare --plot` (issue 19, "Charts"): the
# chart of hand-made fixtures (tests/bench/data/plot-*.json, whose ratios
# and medians are derived by hand below), of the stored peer runs
# (docs/runs/2026-11-26-compiled) and of a real fadc-bench --json; each PNG
# checked by its signature, the size in its IHDR header and matplotlib's
# reader; the bad inputs' messages and exit statuses.  Skipped (77) where
# Debian's matplotlib is not installed.
set -u
. "$(dirname "$0")/common.bash"
PY=/usr/bin/python3
PLOT=$SRC/bench/plot.py
D=$SRC/tests/bench/data
R=$SRC/docs/runs/2026-11-26-compiled
if ! [ -x "$PY" ] || ! "$PY" -c 'import matplotlib' 2>/dev/null; then
	echo "SKIP: $PY has no matplotlib (apt-get install python3-matplotlib; scripts/deps.sh)"
	exit 77
fi

# plot WANT ARGS...: plot.py with stdout in $tmp/out, stderr in $tmp/err.
plot() {
	local want=$1 rc
	shift
	"$PY" "$PLOT" "$@" >"$tmp/out" 2>"$tmp/err"
	rc=$?
	[ "$rc" -eq "$want" ] || { cat "$tmp/err" >&2; fail "plot.py $* exited $rc, expected $want"; }
}

# png_ok FILE W H: a PNG (signature), W x H in its IHDR (read with od, not
# matplotlib), decoded by matplotlib.image.imread to H x W pixels, and not
# blank (bars and text: many colours, dark pixels).
png_ok() {
	local f=$1 w=$2 h=$3
	[ -s "$f" ] || fail "$f: no PNG or an empty one"
	[ "$(head -c 8 "$f" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] ||
		fail "$f: not a PNG signature"
	local dims
	dims=$(od -An -tu1 -j16 -N8 "$f" | tr -s ' \n' ' ' |
		awk '{print $1*16777216+$2*65536+$3*256+$4 "x" $5*16777216+$6*65536+$7*256+$8}')
	[ "$dims" = "${w}x$h" ] || fail "$f: IHDR says $dims, expected ${w}x$h"
	"$PY" -c '
import sys, numpy as np, matplotlib.image as im
a = im.imread(sys.argv[1])
h, w = a.shape[:2]
assert (w, h) == (int(sys.argv[2]), int(sys.argv[3])), (w, h)
rgb = (a[..., :3] * 255).round().astype(int)
colours = len(np.unique(rgb.reshape(-1, 3), axis=0))
dark = (rgb.sum(axis=2) < 200).mean()
assert colours > 20 and dark > 0.001, (colours, dark)
' "$f" "$w" "$h" || fail "$f: matplotlib does not read it as a ${w}x$h chart"
}

# 1. The fixtures.  resnet18 vjp: fadc strict median(4, 6, 5) ms = 5, TF32
# (allow_tf32=1; resnet18_tf32 joins resnet18) 2.5, the peers eager 10 and
# compile default 8, so the best peer is 8: 8/5 = 1.60, 8/2.5 = 3.20,
# 8/10 = 0.80, 8/8 = 1.00; reduce-overhead's error stays, without a ratio.
# multiheadattn vjp: fadc median(1, 0.9, 1.1) = 1 ms, peer eager 2: 2.00
# (and its failed consistency check said), the timeout kept.  jvp: fadc
# skipped, no peer.  Memory: peak_memory_bytes (fadc's 100 MiB, the peer's
# 300 MiB over its peak_bytes 1), the peer's peak_bytes (200 MiB), else n/a.
plot 0 "$D/plot-fadc.json" "$D/plot-peer.json" -o "$tmp/fix.png"
cat >"$tmp/want" <<'EOF'
| model | task | system | ms | best peer / this | peak MiB | status |
|---|---|---|---:|---:|---:|---|
| resnet18 | vjp | fadc strict | 5 | 1.60 | 100.0 | ok |
| resnet18 | vjp | fadc TF32 | 2.5 | 3.20 | n/a | ok |
| resnet18 | vjp | torch eager (TF32 default) | 10 | 0.80 | 200.0 | ok |
| resnet18 | vjp | torch.compile default (TF32 default) | 8 | 1.00 | 300.0 | ok |
| resnet18 | vjp | torch.compile reduce-overhead (TF32 default) |  |  | n/a | error: RuntimeError: boom |
| multiheadattn | vjp | fadc strict | 1 | 2.00 | n/a | ok: inconsistent |
| multiheadattn | vjp | torch eager (TF32 default) | 2 | 1.00 | n/a | ok |
| multiheadattn | vjp | torch.compile reduce-overhead (TF32 default) |  |  | n/a | timeout: no result within 61 s |
| multiheadattn | jvp | fadc strict |  |  | n/a | skipped: cannot compile: models/multiheadattn.ir:1:1: error: test |
EOF
diff "$tmp/want" "$tmp/out" >&2 || fail "the fixtures' bars differ (above)"
[ ! -s "$tmp/err" ] || fail "stderr: $(cat "$tmp/err")"
# 3 cells: 5 + 1, 3 + 1 and 3 + 1 slots (a cell takes at least 3), so
# max(10, 2 + 0.25 x 14) = 10 inches wide, 9 high, at 100 dpi.
png_ok "$tmp/fix.png" 1000 900
plot 0 "$D/plot-fadc.json" "$D/plot-peer.json" -o "$tmp/small.png" --size 6x4.5
png_ok "$tmp/small.png" 600 450
ls -A "$tmp" | grep -q '^\.plot-' && fail "a temporary PNG was left"
# Every mode and precision (plot-modes.json, ms = 10 + 0.3 len(mode) + 0, 1, 2 for TF32 off,
# default, on): the best peer is eager with TF32 off, 11.5 ms, so resnet18's fadc strict reads
# 11.5 / 5 = 2.30 and max-autotune-no-cudagraphs with TF32 on (10 + 7.8 + 2 = 19.8 ms) 0.58;
# detr's three max-autotune cells failed and are kept.  Slots: resnet18 14 + 1, multiheadattn
# vjp and jvp 3 + 1 each (one bar), detr and transformer 12 + 1: 49, so 2 + 0.25 x 49 = 14.25
# inches: 1425 x 900.
plot 0 "$D/plot-fadc.json" "$D/plot-modes.json" -o "$tmp/modes.png"
grep -qF '| resnet18 | vjp | fadc strict | 5 | 2.30 | 100.0 | ok |' "$tmp/out" &&
	grep -qF '| resnet18 | vjp | torch.compile max-autotune-no-cudagraphs (TF32 on) | 19.8 | 0.58 | 1,024.0 | ok |' "$tmp/out" &&
	[ "$(grep -c '^| detr | vjp | torch.compile max-autotune-no-cudagraphs (TF32 [a-z]*) |  |  | n/a | error: InductorError: autotune failed |$' "$tmp/out")" = 3 ] ||
	fail "every mode and precision: $(cat "$tmp/out")"
[ "$(grep -cE '^\| [a-z0-9_]+ \| [a-z]+ \| (fadc|torch)' "$tmp/out")" = 40 ] || fail "not 40 bars: $(cat "$tmp/out")"
png_ok "$tmp/modes.png" 1425 900

# 2. The stored peer runs, as PERFORMANCE.md's table reads them: a later
# file's cell replaces an earlier one's, said on stderr (the transformer's
# failed reduce-overhead of call 1 by call 2's 15.06 ms).  7 cells of 3 bars,
# 28 slots: 2 + 0.25 x 28 = 9 < 10 inches.
plot 0 "$R/compiled-1.json" "$R/compiled-2.json" "$R/compiled-3a.json" "$R/compiled-3b.json" \
	-o "$tmp/runs.png"
grep -qF 'transformer vjp torch.compile reduce-overhead (TF32 default): '"$R"'/compiled-2.json (ok) replaces '"$R"'/compiled-1.json (error)' "$tmp/err" ||
	fail "no note of the replaced cell: $(cat "$tmp/err")"
grep -qF '| detr | vjp | torch.compile reduce-overhead (TF32 default) | 34.6 | 1.00 | 3,677.1 | ok |' "$tmp/out" ||
	fail "detr's reduce-overhead row: $(grep detr "$tmp/out")"
[ "$(grep -c '^| [a-z0-9_]* | vjp |' "$tmp/out")" = 21 ] || fail "not 21 bars: $(cat "$tmp/out")"
png_ok "$tmp/runs.png" 1000 900
# Call 1 alone: its failure is a bar, not left out.
plot 0 "$R/compiled-1.json" -o "$tmp/one.png"
grep -qF '| transformer | vjp | torch.compile reduce-overhead (TF32 default) |  |  | n/a | error: RuntimeError: Error: accessing tensor output of CUDAGraphs' "$tmp/out" ||
	fail "call 1's failed cell: $(grep transformer "$tmp/out")"

# 3. Bad inputs: the file named, exit 1, no chart written; usage: exit 2.
bad() { # WANT-STDERR ARGS...
	local want=$1
	shift
	rm -f "$tmp/bad.png"
	plot 1 "$@" -o "$tmp/bad.png"
	err_is "$want"
	[ ! -e "$tmp/bad.png" ] || fail "a chart was written for: $*"
}
bad "plot.py: $tmp/nosuch.json: cannot open: No such file or directory" "$tmp/nosuch.json"
echo 'not json' >"$tmp/text.json"
bad "plot.py: $tmp/text.json:1:1: not JSON: Expecting value" "$tmp/text.json"
echo '{"cells": [], "other": 1}' >"$tmp/schema.json"
bad "plot.py: $tmp/schema.json: unknown schema: neither fadc-bench --json (environment, cells) nor torch_compile_step.py --json (torch, cells)" "$tmp/schema.json"
echo '[1, 2]' >"$tmp/list.json"
bad "plot.py: $tmp/list.json: unknown schema: neither fadc-bench --json (environment, cells) nor torch_compile_step.py --json (torch, cells)" "$tmp/list.json"
echo '{"environment": {}, "cells": [{"task": "vjp"}]}' >"$tmp/nomodel.json"
bad "plot.py: $tmp/nomodel.json: cells[0]: 'model' missing or not a string" "$tmp/nomodel.json"
echo '{"torch": "2", "cells": [{"model": "m", "mode": "eager", "tf32": "off", "status": "ok"}]}' >"$tmp/noms.json"
bad "plot.py: $tmp/noms.json: cells[0]: status ok without a time > 0 in 'ms_median'" "$tmp/noms.json"
echo '{"environment": {}, "cells": []}' >"$tmp/empty.json"
bad "plot.py: no cells in $tmp/empty.json: nothing to draw" "$tmp/empty.json"
bad "plot.py: $tmp: is a folder, not a file" "$tmp"
mkfifo "$tmp/fifo.json"
"$PY" "$PLOT" "$tmp/fifo.json" -o "$tmp/bad.png" >"$tmp/out" 2>"$tmp/err" &
pid=$!
for _ in $(seq 100); do kill -0 $pid 2>/dev/null || break; sleep 0.1; done
kill -0 $pid 2>/dev/null && { kill $pid; fail "plot.py blocked on a FIFO"; }
wait $pid && fail "a FIFO was read as an input"
err_is "plot.py: $tmp/fifo.json: not a regular file"
mkfifo "$tmp/fifo.png"
plot 1 "$D/plot-peer.json" -o "$tmp/fifo.png"
err_is "plot.py: -o $tmp/fifo.png: exists and is not a regular file"
[ -p "$tmp/fifo.png" ] || fail "the FIFO -o named was replaced"
plot 1 "$D/plot-peer.json" -o "$tmp/no/such/folder/c.png"
err_is "plot.py: -o $tmp/no/such/folder/c.png: no folder $tmp/no/such/folder"
plot 1 "$D/plot-peer.json" -o "$tmp/c.png" --seed "$D/plot-peer.json"
err_has "plot.py: $D/plot-peer.json:1: not the seed's markdown table"
[ ! -e "$tmp/c.png" ] || fail "a chart was written for a bad --seed"
plot 2 "$D/plot-peer.json"
err_has "the following arguments are required: -o/--output"
plot 2 "$D/plot-peer.json" -o "$tmp/c.jpg"
err_has "-o $tmp/c.jpg: the chart is a PNG"
plot 2 "$D/plot-peer.json" -o "$tmp/c.png" --size 0x3
err_has "each side must be 1 .. 100 inches"
# Without matplotlib (python3 -S: no site packages), a clear error.
printf '#!/bin/sh\nexec %s -S "$@"\n' "$PY" >"$tmp/nompl"
chmod +x "$tmp/nompl"
"$tmp/nompl" "$PLOT" "$D/plot-peer.json" -o "$tmp/c.png" >"$tmp/out" 2>"$tmp/err" && fail "ran without matplotlib"
err_is "plot.py: matplotlib is not installed (Debian: apt-get install python3-matplotlib; run with /usr/bin/python3)"

# 4. The seed's markdown table (--seed): autograd.functional and torch.func
# legs, mean in seconds: multiheadattn vjp 0.004 s and 0.0025 s, so the
# best peer is 2 ms (eager of the fixture): fadc 2/1 = 2.00 still.
printf '| model | task | mean | var |\n| -- | -- | -- | -- |\n| multiheadattn | vjp | 0.004 | 1e-08 |\n| multiheadattn | functorch vjp | 0.0025 | 1e-08 |\n' >"$tmp/seed.md"
plot 0 "$D/plot-fadc.json" "$D/plot-peer.json" --seed "$tmp/seed.md" -o "$tmp/seed.png"
grep -qF '| multiheadattn | vjp | torch eager, the seed (autograd.functional) | 4 | 0.50 | n/a | ok |' "$tmp/out" &&
	grep -qF '| multiheadattn | vjp | torch eager, the seed (torch.func) | 2.5 | 0.80 | n/a | ok |' "$tmp/out" &&
	grep -qF '| multiheadattn | vjp | fadc strict | 1 | 2.00 | n/a | ok: inconsistent |' "$tmp/out" ||
	fail "the seed's rows: $(cat "$tmp/out")"

# 5. fadc-bench compare --plot on a real fadc-bench --json (the interpreter,
# reduced sizes) beside the peer fixture.  The bar is the median of the
# JSON's samples.
run_bench 0 --backend interp --reduced --num-iters 3 --model-filter ppl_simple_reg \
	--task-filter vjp --json "$tmp/run.json" --output "$tmp/run.md"
run_bench 0 compare --plot "$tmp/run.png" "$tmp/run.json" "$D/plot-peer.json"
med=$("$PY" -c 'import json, sys
s = sorted(json.load(open(sys.argv[1]))["cells"][0]["samples"])
print(f"{s[1] * 1e3:.3g}")' "$tmp/run.json")
grep -qF "| ppl_simple_reg | vjp | fadc interp | $med |  | n/a | ok |" "$tmp/out" ||
	fail "compare --plot's table: $(cat "$tmp/out")"
png_ok "$tmp/run.png" 1000 900
# Its errors: the script's (exit 1), no python, no matplotlib, usage.
run_bench 1 compare --plot "$tmp/c.png" "$tmp/nosuch.json"
err_is "plot.py: $tmp/nosuch.json: cannot open: No such file or directory"
FADC_PYTHON=$tmp/nosuch-python run_bench 1 compare --plot "$tmp/c.png" "$tmp/run.json"
err_is "fadc-bench: --plot runs $tmp/nosuch-python, which cannot be run: No such file or directory (install Debian's python3-matplotlib: apt-get install python3-matplotlib)"
FADC_PYTHON=$tmp/nompl run_bench 1 compare --plot "$tmp/c.png" "$tmp/run.json"
err_has "plot.py: matplotlib is not installed"
[ ! -e "$tmp/c.png" ] || fail "a chart was written on error"
run_bench 2 compare --plot "$tmp/c.png"
err_is "fadc-bench: compare --plot needs RUN.json files
try 'fadc-bench --help'"
run_bench 2 compare --plot "$tmp/c.png" "$tmp/run.json" --output "$tmp/x.md"
err_has "compare: --output is for tables, --plot for a chart; give one"
run_bench 2 compare --plot
err_has "--plot needs a value"
echo "plot: ok"
