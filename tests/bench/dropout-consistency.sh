# RUN: bash %s
# A model with dropout (two sites, p = 0.5, so masks matter) through
# fadc-bench, on the interpreter and on the compiled CPU backend: every
# warm-up passes its consistency check (vjp against jvp, hvp against vhp,
# dot-product tests that hold only if both calls draw the same masks: both
# run with the same call counter, docs/IR.md "Random numbers"), and
# the compiled warm-ups match the interpreter's (--check-reference), and
# `fadc check` finds the compiled tasks equal to the interpreter's, masks
# included (a compiled sampler keyed differently would differ by O(1)).
# Then detr in train mode through fadc-bench's own configuration.
set -eu
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
cat > "$out/m.ir" <<'IR'
let N = 6
let D = 5
let H = 7
const x: f32[N, D] = normal(0, 1, seed=1)
const y: i64[N] = cast(floor(3 * uniform(0, 1, seed=2)), dtype=i64)
param fc1.weight: f32[H, D] = kaiming_uniform(a=5 ** 0.5, seed=3)
param fc1.bias: f32[H] = uniform(-0.3, 0.3, seed=4)
param fc2.weight: f32[3, H] = kaiming_uniform(a=5 ** 0.5, seed=5)
def forward() -> f32[] {
  h = dropout(tanh(linear(x, fc1.weight, fc1.bias)), 0.5)
  return cross_entropy(linear_nobias(dropout(h, 0.5), fc2.weight), y)
}
IR
cat > "$out/c.yaml" <<'YAML'
task_lists:
  T: &T [vjp, vhp, jvp, hvp]
  ALL_TASKS: *T
models:
  drop_mlp:
    source: m.ir
    tasks: *T
rtol: 1.0e-4
YAML
for be in interp cpu; do
  extra=""
  [ "$be" = cpu ] && extra="--compile --artifacts $out/art --check-reference"
  "$FADC_BENCH" --config "$out/c.yaml" --backend $be $extra --num-iters 1 --output "$out/$be.md" \
      --json "$out/$be.json" > "$out/$be.log" 2> "$out/$be.err" || { cat "$out/$be.err"; exit 1; }
  if grep -q 'INCONSISTENT\|could not run' "$out/$be.err"; then cat "$out/$be.err"; exit 1; fi
  python3 - "$out/$be.json" <<'PY'
import json, sys
cells = json.load(open(sys.argv[1]))["cells"]
assert len(cells) == 4, cells
for c in cells:
    assert c["consistent"] and c["consistency_error"] is not None, c
    assert c["consistency_error"] <= 1e-4, c
    # cpu: the compiled masks are the interpreter's (--check-reference).
    assert c.get("reference_match", True) and c.get("reference_error", 0) <= 1e-4, c
    assert ("reference_match" in c) == sys.argv[1].endswith("cpu.json"), c
print(sys.argv[1].split("/")[-1], [(c["task"], c["consistency_error"]) for c in cells])
PY
done
"$FADC" check "$out/m.ir"
# detr itself, in train mode (60 dropout sites), at reduced sizes on the
# interpreter with the repository's configuration: vjp, vhp, jvp consistent.
"$FADC_BENCH" --backend interp --reduced --model-filter detr --num-iters 0 \
    --output "$out/detr.md" --json "$out/detr.json" > "$out/detr.log" 2> "$out/detr.err" ||
  { cat "$out/detr.err"; exit 1; }
python3 - "$out/detr.json" <<'PY'
import json, sys
cells = json.load(open(sys.argv[1]))["cells"]
assert [c["task"] for c in cells] == ["vjp", "vhp", "jvp"], cells
for c in cells:
    assert c["consistent"] and c["consistency_error"] is not None, c
    assert c["consistency_error"] <= 1e-8, c
print("detr", [(c["task"], c["consistency_error"]) for c in cells])
PY
