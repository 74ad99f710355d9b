# RUN: bash %s
# bench/peers/torch_compile_step.py --parallel-warmup (its docstring; docs/BENCH.md,
# "Tests"): every cell's process warms up at once, the timed steps run
# one cell at a time under SYNC/lock, and another program taking that lock
# after SYNC/go (go.sh's fadc) never overlaps them.  Run against a stand-in
# for torch (written below: the few calls the script makes, each step
# logged with its process and host-clock interval), so it needs no GPU and
# no torch; checked from the log: no timed step begins before the last
# warm-up step ends, no two cells' timed intervals (and not the outside
# holder's) overlap; a cell whose compile raises is an error, one past
# --timeout in its warm-up a timeout, and neither holds the others back.
set -u
. "$(dirname "$0")/common.bash"
PY=$(command -v python3 || true)
[ -n "$PY" ] || { echo "SKIP: no python3"; exit 77; }
STEP=$SRC/bench/peers/torch_compile_step.py
mkdir -p "$tmp/fake/torch" "$tmp/peer"
cat >"$tmp/fake/torch/__init__.py" <<'PYEOF'
import os, time, types
__version__ = "fake"
class _B: pass
backends = types.SimpleNamespace(cudnn=_B(), cuda=types.SimpleNamespace(matmul=_B()))
class device:
    def __init__(self, s): self.type = s
def manual_seed(s): pass
class _Cuda:
    def get_device_name(self, i): return "fakegpu"
    def synchronize(self): pass
    def memory_allocated(self): return 1 << 20
    def max_memory_allocated(self): return 2 << 20
    def reset_peak_memory_stats(self): pass
    def memory_reserved(self): return 3 << 20
cuda = _Cuda()
def compile(f, **kw):
    if os.environ.get("FAKE_COMPILE_FAIL") == "1":
        raise RuntimeError("fake compile failure")
    time.sleep(float(os.environ.get("FAKE_COMPILE_S", "0.3")))
    return f
class autograd:
    @staticmethod
    def grad(y, p):
        t0 = time.time()
        time.sleep(0.03)
        with open(os.environ["FAKE_LOG"], "a") as f:
            f.write(f"{os.getpid()} {t0:.6f} {time.time():.6f}\n")
        return p
compiler = types.SimpleNamespace(cudagraph_mark_step_begin=lambda: None)
PYEOF
cat >"$tmp/peer/audio_text_models.py" <<'PYEOF'
def get_multiheadattn(dev):
    def forward(*p):
        return 1.0
    return forward, (1, 2)
PYEOF
: >"$tmp/peer/torch_models.py"

# step LOG ARGS...: the script over the stand-in, the table in $tmp/out.
step() {
	local log=$1
	shift
	: >"$log"
	FAKE_LOG=$log PYTHONPATH=$tmp/fake "$PY" "$STEP" --models multiheadattn --peer-dir "$tmp/peer" \
		--parallel-warmup --sync-dir "$tmp/sync" --warmup 2 --iters 4 "$@" >"$tmp/out" 2>"$tmp/err" ||
		{ cat "$tmp/err" >&2; fail "torch_compile_step.py $* exited $?"; }
}

# 1. Six cells and an outside holder of the lock, as go.sh runs fadc.
rm -rf "$tmp/sync"
(
	while [ ! -e "$tmp/sync/go" ]; do sleep 0.05; done
	flock "$tmp/sync/lock" bash -c "t0=\$(date +%s.%N); sleep 0.3; echo \"outside \$t0 \$(date +%s.%N)\" >$tmp/outside"
) &
holder=$!
step "$tmp/a.log" --modes eager,default,reduce-overhead --tf32 default,on
wait $holder
[ "$(grep -c '| ok |' "$tmp/out")" = 6 ] || { cat "$tmp/out"; fail "run 1: not six ok cells"; }
"$PY" - "$tmp/a.log" "$tmp/outside" <<'PYEOF' || fail "run 1: timed steps overlap (above)"
import sys, collections
steps = collections.defaultdict(list)
for line in open(sys.argv[1]):
    pid, a, b = line.split()
    steps[pid].append((float(a), float(b)))
assert len(steps) == 6, f"{len(steps)} processes logged steps, expected 6"
warm_end = max(s[1] for v in steps.values() for s in sorted(v)[:2])
timed = {pid: (sorted(v)[2][0], sorted(v)[-1][1]) for pid, v in steps.items()}
assert all(len(v) == 6 for v in steps.values()), "each cell: 2 warm-up and 4 timed steps"
first = min(t[0] for t in timed.values())
assert warm_end <= first, f"a warm-up step ended at {warm_end}, after a timed step began at {first}"
name, a, b = open(sys.argv[2]).read().split()
iv = sorted(list(timed.values()) + [(float(a), float(b))])
for x, y in zip(iv, iv[1:]):
    assert x[1] <= y[0], f"intervals {x} and {y} overlap"
print("timed intervals disjoint:", len(iv))
PYEOF

# 2. The compiled cells' compile raises: errors; eager still timed.
rm -rf "$tmp/sync"
FAKE_COMPILE_FAIL=1 step "$tmp/b.log" --modes eager,default,reduce-overhead
grep -q '| multiheadattn | eager | default | [0-9.]* |.*| ok |' "$tmp/out" || { cat "$tmp/out"; fail "run 2: eager not ok"; }
[ "$(grep -c '^| multiheadattn .*| error: RuntimeError: fake compile failure' "$tmp/out")" = 2 ] ||
	{ cat "$tmp/out"; fail "run 2: not two errors"; }

# 3. The compiled cells' warm-up outlasts --timeout: timeouts; eager timed.
rm -rf "$tmp/sync"
FAKE_COMPILE_S=6 step "$tmp/c.log" --modes eager,default --timeout 2
grep -q '| multiheadattn | eager | default | [0-9.]* |.*| ok |' "$tmp/out" || { cat "$tmp/out"; fail "run 3: eager not ok"; }
grep -q 'timeout: no result within 2 s of warm-up' "$tmp/out" || { cat "$tmp/out"; fail "run 3: no timeout"; }
echo "PASS"
