# RUN: bash %s
# The consistency check's normalization of the dot-product tests
# (bench/main.c, adjoint_error; docs/BENCH.md "Per cell"):
#   e = |lhs - rhs| / ((sum |lhs terms| + sum |rhs terms|) / 2).
# 1. Its value, derived by hand for f(x, y) = 3x - 2y (one element each) on
#    the jvp cell: u = (ux, uy) is the jvp's tangent (read back with `fadc
#    run`, which draws it as fadc-bench does), v the vjp's cotangent.  With
#    the test hook FADC_BENCH_FAULT=scale:D the vjp's gradient (3v, -2v) is
#    off by the factor 1 + D, so with s = 3ux - 2uy and S = 3ux + 2uy
#      lhs = v s,  |lhs terms| = |v s|,  rhs = (1 + D) v s,  |rhs terms| = (1 + D) v S
#      e = D |s| / ((|s| + (1 + D) S) / 2),  and the old |lhs - rhs| / max = D / (1 + D)
#    (v cancels).  Without the hook both are 0 up to rounding (float64 here).
# 2. A derivative off by a small relative amount on many terms of both
#    signs (4096 elements, vjp/jvp and hvp/vhp): D = 1e-3, ten times the
#    tolerance, makes every cell inconsistent; the same cells without the
#    hook are consistent to 1e-12.  Scaling every element by 1 + D moves
#    the sums by D times the sum, so e = 2D / (1 + (1 + D) kappa), kappa the
#    terms' magnitude over the sum: the model keeps kappa small enough for
#    e to exceed the tolerance, and the test checks that identity too.
set -eu
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
cat > "$out/tiny.ir" <<'IR'
param x: f32[1] = uniform(0, 1, seed=1)
param y: f32[1] = uniform(0, 1, seed=2)
tasks vjp, jvp
def forward() -> f32[] {
  return sum(3 * x) - sum(2 * y)
}
IR
# The tangents, one at a time: the same names draw the same values.
sed 's/return .*/return sum(x) + 0 * sum(y)/' "$out/tiny.ir" > "$out/ux.ir"
sed 's/return .*/return 0 * sum(x) + sum(y)/' "$out/tiny.ir" > "$out/uy.ir"
ux=$("$FADC" run "$out/ux.ir" --task jvp --print | sed -n 's/^jvp.out: f32\[\] = //p')
uy=$("$FADC" run "$out/uy.ir" --task jvp --print | sed -n 's/^jvp.out: f32\[\] = //p')
cat > "$out/tiny.yaml" <<'YAML'
task_lists:
  T: &T [vjp, jvp]
  ALL_TASKS: *T
models:
  tiny:
    source: tiny.ir
    tasks: *T
rtol: 1.0e-4
YAML
for d in 0 0.01 -0.5; do
  FADC_BENCH_FAULT=scale:$d "$FADC_BENCH" --config "$out/tiny.yaml" --backend interp --num-iters 0 \
      --task-filter jvp --output "$out/t.md" --json "$out/t$d.json" > /dev/null 2> "$out/t$d.err" ||
    { cat "$out/t$d.err"; exit 1; }
  python3 - "$out/t$d.json" "$d" "$ux" "$uy" <<'PY'
import json, sys
c, = json.load(open(sys.argv[1]))["cells"]
d, ux, uy = (float(a) for a in sys.argv[2:])
s, S = 3 * ux - 2 * uy, 3 * ux + 2 * uy
want = abs(d) * abs(s) / ((abs(s) + abs(1 + d) * S) / 2)
old = abs(d) / max(1, abs(1 + d))
e, r = c["consistency_error"], c["consistency_sum_rel"]
assert abs(e - want) <= 1e-6 * want + 1e-15, (e, want)
assert abs(r - old) <= 1e-6 * old + 1e-15, (r, old)
assert c["consistent"] == (want <= 1e-4), c
print("tiny jvp, D = %g: e %.9g (by hand %.9g), sums %.9g (by hand %.9g)" % (d, e, want, r, old))
PY
done
grep -q 'tiny jvp: INCONSISTENT: normalized error' "$out/t0.01.err"
if grep -q 'INCONSISTENT' "$out/t0.err"; then exit 1; fi
# 2. Many terms.
cat > "$out/many.ir" <<'IR'
let N = 4096
param x: f32[N] = normal(0.5, 1, seed=1)
const c: f32[N] = normal(0.5, 1, seed=2)
tasks vjp, vhp, jvp, hvp
def forward() -> f32[] {
  return sum(c * tanh(x))
}
IR
cat > "$out/many.yaml" <<'YAML'
task_lists:
  T: &T [vjp, vhp, jvp, hvp]
  ALL_TASKS: *T
models:
  many:
    source: many.ir
    tasks: *T
rtol: 1.0e-4
YAML
"$FADC_BENCH" --config "$out/many.yaml" --backend interp --num-iters 0 --output "$out/m.md" \
    --json "$out/m.json" > /dev/null 2> "$out/m.err" || { cat "$out/m.err"; exit 1; }
FADC_BENCH_FAULT=scale:1e-3 "$FADC_BENCH" --config "$out/many.yaml" --backend interp \
    --num-iters 0 --output "$out/f.md" --json "$out/f.json" > /dev/null 2> "$out/f.err" ||
  { cat "$out/f.err"; exit 1; }
[ "$(grep -c 'many [a-z]*: INCONSISTENT' "$out/f.err")" -eq 4 ]
[ "$(grep -c '| many | [a-z]* \[inconsistent\] |' "$out/f.md")" -eq 4 ]
python3 - "$out/m.json" "$out/f.json" <<'PY'
import json, sys
good = json.load(open(sys.argv[1]))["cells"]
bad = json.load(open(sys.argv[2]))["cells"]
assert len(good) == len(bad) == 4
for g, b in zip(good, bad):
    assert g["consistent"] and g["consistency_error"] <= 1e-12, g
    assert not b["consistent"] and b["consistency_error"] > 1e-4, b
    # e = 2D / (1 + (1 + D) kappa): kappa from e, positive and finite.
    D, e = 1e-3, b["consistency_error"]
    kappa = (2 * D / e - 1) / (1 + D)
    assert 1 <= kappa < 19, (b, kappa)
    assert abs(b["consistency_sum_rel"] - D / (1 + D)) < 1e-9, b
    print("many %s: e %.3g (no fault %.3g), kappa %.3g" % (b["task"], e, g["consistency_error"],
                                                           kappa))
PY
