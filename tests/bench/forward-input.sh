# RUN: bash %s
# A model whose forward takes a caller input x: the consistency check's
# partner run must take its derivatives at the same x as the cell (only the
# tangents are drawn apart), and the dot products must leave x out.  Before
# the fix (bench/main.c, check: every partner input drawn with the salt
# "check") the four cells were 2e-1 and 2e-3 apart and reported
# INCONSISTENT.  Both backends: the CPU artifact in f32 within the default
# 1e-4, the float64 interpreter within 1e-12.  The same model with x a
# constant is the control: it was consistent before and after.
set -eu
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
cat > "$out/m.ir" <<'IR'
let B = 9
const Y: f32[B, 4] = uniform(0, 1, seed=2)
param w1: f32[6, 8] = uniform(-0.5, 0.5, seed=1)
param b1: f32[8] = uniform(-0.1, 0.1, seed=3)
param w2: f32[8, 4] = uniform(-0.5, 0.5, seed=4)
tasks vjp, jvp, hvp, vhp
def forward(x: f32[B, 6]) -> f32[] {
  h = tanh(x @ w1 + b1)
  return mean(sum((h @ w2 - Y) ** 2, 1)) + 0.01 * sum(w1 * w1)
}
IR
sed 's/^def forward(x: f32\[B, 6\])/const x: f32[B, 6] = uniform(-1, 1, seed=9)\ndef forward()/' \
	"$out/m.ir" > "$out/c.ir"
for src in m c; do
	for be in cpu interp; do
		cat > "$out/b.yaml" <<YAML
task_lists:
  T: &T [vjp, jvp, hvp, vhp]
  ALL_TASKS: *T
models:
  $src:
    source: $src.ir
    tasks: *T
rtol: 1.0e-4
YAML
		"$FADC_BENCH" --config "$out/b.yaml" --backend $be --gpu -1 --num-iters 1 --num-threads 1 \
			--artifacts "$out/art" --compile --output "$out/t.md" --json "$out/t.json" > /dev/null 2> "$out/err" ||
			{ cat "$out/err"; echo "FAIL: $src $be: fadc-bench"; exit 1; }
		! grep -q INCONSISTENT "$out/err" || { cat "$out/err"; echo "FAIL: $src $be"; exit 1; }
		python3 - "$out/t.json" "$be" "$src" <<'PY'
import json, sys
cells = json.load(open(sys.argv[1]))["cells"]
tol = 1e-4 if sys.argv[2] == "cpu" else 1e-12
assert len(cells) == 4, cells
for c in cells:
    e = c["consistency_error"]
    assert c["consistent"] and 0 <= e <= tol, (sys.argv[2:], c["task"], e)
print(sys.argv[3], sys.argv[2], " ".join("%s %.1e" % (c["task"], c["consistency_error"]) for c in cells))
PY
	done
done
echo "ok: forward inputs shared by the check's two runs"
