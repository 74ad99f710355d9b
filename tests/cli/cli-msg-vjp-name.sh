# RUN: bash %s
# vjp's one cotangent is `v` wherever it shows: the task's graph, the vjp
# pass's own dump (--stop-after, --print-after: it said v.out), fadc
# inspect, and --v binding it by that name.  jvp's tangents are v.<param>
# in the jvp pass's dump too (it said t.<param>).
source "$(dirname "$0")/common.bash"
cat >"$tmp/sq.ir" <<'IR'
param w: f32[3] = iota(shape=[3], dtype=f32)

def forward() -> f32[] {
  return sum(w * w)
}
IR
m=$tmp/sq.ir
run_fadc 0 "$m" --emit ir --task vjp
out_has "def vjp(v: f32[]) -> (f32[], f32[3]) {"
run_fadc 0 "$m" --emit ir --task vjp --stop-after=vjp
out_has "def vjp(v: f32[]) -> (f32[], f32[3]) {"
grep -qF "v.out" "$tmp/out" && fail "--stop-after=vjp names v.out"
run_fadc 0 "$m" --emit ir --task vjp --print-after-all
grep -qF "v.out" "$tmp/err" && fail "--print-after-all names v.out"
run_fadc 0 "$m" --emit ir --task jvp --stop-after=jvp
out_has "def jvp(v.w: f32[3]) -> (f32[], f32[]) {"
for t in hvp vhp; do
	run_fadc 0 "$m" --emit ir --task $t --print-after-all
	grep -qE "t\.w|v\.grad\.w" "$tmp/err" && fail "--task $t --print-after-all names t.w or v.grad.w"
done

# The name binds: v = 2 gives grad.w = 2 * 2 w.
cat >"$tmp/two.ir" <<'IR'
def forward() { return full(value=2, shape=[]) as v }
IR
run_fadc 0 run "$tmp/two.ir" --out "$tmp/two"
run_fadc 0 run "$m" --task vjp --v "v=$tmp/two/v.npy" --print
out_has "grad.w: f32[3] = [0, 4, 8]"
# And a compiled model lists it and binds it alike.
run_fadc 0 "$m" -o "$tmp/sq.so" --tasks vjp
run_fadc 0 inspect "$tmp/sq.so"
grep -qE "^  in  v +input +f32\[\]" "$tmp/out" || { cat "$tmp/out" >&2; fail "inspect does not list vjp's v"; }
run_fadc 0 run "$tmp/sq.so" --task vjp --v "v=$tmp/two/v.npy" --print
out_has "grad.w: f32[3] = [0, 4, 8]"
exit 0
