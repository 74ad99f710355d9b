# RUN: bash %s
# bench/zoo-cpu-vs-torch.sh without PyTorch: a stand-in for the seed script
# (same flags, same console lines, the same ways of failing) and an empty
# `torch` module, beside the real fadc-bench on multiheadattn at reduced size
# and ppl_simple_reg. Every way a PyTorch cell can end is recorded as such
# and the run goes on: a functorch leg the seed catches (vjp), the seed
# aborting on functorch's consistency assert (vhp), both legs run (jvp),
# autograd.functional's error stopping the seed before torch.func (hvp), a
# cell out of time (hessian), the seed's lack of a torch.func jacobian (no
# failure); the deadline leaves cells out; usage errors
# stop before anything runs (exit 2).
set -eu
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
trap 'echo "zoo-vs-torch: check failed at line $LINENO" >&2' ERR
script=$FADC_SOURCE_DIR/bench/zoo-cpu-vs-torch.sh
mkdir -p "$out/py/torch" "$out/peer"
echo '__version__ = "0-stand-in"' >"$out/py/torch/__init__.py"
cat >"$out/peer/functional_autograd_benchmark.py" <<'PY'
import argparse, collections, sys, time
M = collections.namedtuple("M", "name getter tasks unsupported")
MODELS = [M("ppl_simple_reg", None, ["vjp"], []), M("multiheadattn", None, ["vjp", "vhp", "jvp"], [])]
ALL_TASKS = ["vjp", "vhp", "jvp", "hvp", "jacobian", "hessian"]
if __name__ == "__main__":
    p = argparse.ArgumentParser()
    for a in ["--gpu", "--num-threads", "--num-iters", "--seed", "--model-filter", "--task-filter"]:
        p.add_argument(a, required=True)
    p.add_argument("--run-slow-tasks", action="store_true")
    a = p.parse_args()
    assert a.gpu == "-1" and a.num_threads == "1" and a.num_iters == "2" and a.run_slow_tasks
    m, t = a.model_filter, a.task_filter
    if t == "hvp":
        raise RuntimeError("derivative for aten::stand_in is not implemented")
    print(f"Results for model {m} on task {t}: 0.5s (var: 0.01)")
    if t == "vjp":
        print(f"Failed model using Functorch: {m}, task: {t}, Error message: \n\t", "no storage")
    elif t == "vhp":
        raise AssertionError(f"Consistency fail for task '{t}'")
    elif t == "jvp":
        print(f"Results for model {m} on task {t} using Functorch: 0.25s (var: nan)")
    elif t == "jacobian":
        print(f"Failed model using Functorch: {m}, task: {t}, Error message: \n\t",
              "functorch has no equivalent of autograd.functional.jacobian with vectorize=False yet")
    else:
        time.sleep(60)
PY
run() {
	PYTHONPATH=$out/py bash "$script" -p python3 -b "$(dirname "$FADC_BENCH")" -a "$out/art" -C \
		-P "$out/peer" -t 1 -i 2 -D multiheadattn:B=4 -D multiheadattn:L=3 -D multiheadattn:S=5 "$@"
}
rc=0
run -o "$out/r" -T 120 multiheadattn:tasks=vjp,vhp,jvp,hvp ppl_simple_reg:tasks=jacobian,hessian:timeout=8 \
	>"$out/log" 2>&1 || rc=$?
[ "$rc" = 1 ] || { cat "$out/log"; echo "exit $rc, not 1"; exit 1; }
s=$out/r/summary.md
row() { grep "^| $1 | $2 | " "$s" || { cat "$out/log"; echo "no row $1 $2"; exit 1; }; }
num='[0-9.]* \(µs\|ms\|s\)'
# Every fadc cell ran and is consistent (an error, not a status, in its column).
for t in vjp vhp jvp hvp; do
	row multiheadattn $t | grep -q "^| multiheadattn | $t | $num | [0-9.e+-]* | "
done
row ppl_simple_reg hessian | grep -q "^| ppl_simple_reg | hessian | $num | [0-9.e+-]* | 500 ms | timeout | [0-9.]*× |  | func: timeout after 8s |$"
# The seed's own gap (no torch.func jacobian) is no failure: the other cells decide the exit.
row ppl_simple_reg jacobian | grep -q "^| ppl_simple_reg | jacobian | $num | [0-9.e+-]* | 500 ms | — | [0-9.]*× |  | func: the seed has no torch.func jacobian |$"
row multiheadattn vjp | grep -q " | 500 ms | failed | [0-9.]*× |  | func: no storage |$"
row multiheadattn vhp | grep -q " | 500 ms | failed | [0-9.]*× |  | func: exit 1: AssertionError: Consistency fail for task 'vhp' |$"
row multiheadattn jvp | grep -q " | 500 ms | 250 ms | [0-9.]*× | [0-9.]*× |  |$"
row multiheadattn hvp | grep -q " | failed | not-run |  |  | functional: exit 1: RuntimeError: derivative for aten::stand_in is not implemented; func: the seed stopped at autograd.functional's error |$"
# The seed's tables: its own numbers, its `functorch` rows.
grep -qx '| multiheadattn | vjp | 0.5 | 0.01 |' "$out/r/torch.md"
grep -qx '| multiheadattn | functorch jvp | 0.25 | nan |' "$out/r/torch.md"
[ "$(grep -c '^| multiheadattn | functorch ' "$out/r/torch.md")" = 1 ]
[ "$(grep -c '^| multiheadattn | \(vjp\|vhp\|jvp\|hvp\) | [0-9.e-]* | ' "$out/r/fadc.md")" = 4 ]
grep -q '^| multiheadattn | jvp | [0-9.e+]* | 0.5 | 0.01 | ' "$out/r/compare-functional.md"
grep -q '^| multiheadattn | jvp | [0-9.e+]* | 0.25 | nan | ' "$out/r/compare-func.md"
grep -q '^multiheadattn: fadc-bench --compile-only (vjp,vhp,jvp,hvp): ' "$out/r/compile.txt"
[ "$(wc -l <"$out/r/wall.tsv")" = 12 ]
grep -q "^ppl_simple_reg	hessian	torch	[0-9.]*	124$" "$out/r/wall.tsv"

# Every cell ran on every side (the seed's missing jacobian leg aside): exit 0.
run -o "$out/ok" multiheadattn:tasks=jvp ppl_simple_reg:tasks=jacobian >"$out/log" 2>&1 ||
	{ cat "$out/log"; exit 1; }

# The deadline: nothing starts once it has passed; both sides say so.
rc=0
run -o "$out/d" -d 1 multiheadattn:tasks=vjp >"$out/log" 2>&1 || rc=$?
[ "$rc" = 1 ]
grep -q '^| multiheadattn | vjp | not-run |  | not-run | not-run |  |  | fadc: deadline; functional: deadline; func: deadline |$' \
	"$out/d/summary.md"
# The seed's recommended tasks when none are given.
run -o "$out/d" -d 1 ppl_simple_reg >"$out/log" 2>&1 || true
[ "$(grep -c '^| ppl_simple_reg | ' "$out/d/summary.md")" = 1 ]

# Usage errors: exit 2, before anything runs.
for args in "multiheadattn -d 5" "multiheadattn:iter=3" "nosuch" "-s gpu multiheadattn"; do
	rc=0
	# shellcheck disable=SC2086
	run -o "$out/u" $args >"$out/log" 2>&1 || rc=$?
	[ "$rc" = 2 ] || { cat "$out/log"; echo "$args: exit $rc, not 2"; exit 1; }
	[ ! -e "$out/u/cells.tsv" ] || [ ! -s "$out/u/cells.tsv" ]
done
grep -q "^zoo-cpu-vs-torch: -s: fadc, torch or both$" "$out/log"
echo "zoo-vs-torch: ok"
