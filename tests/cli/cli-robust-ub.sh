# RUN: bash %s
# Two reports of UBSan on plain IR inputs (issue 18), each a regression:
#  - an i64 constant at the end of the range went through a double into an
#    out-of-range float-to-int conversion in codegen/kir.c (kx_const): the
#    compiled constant must be the integer itself, checked against the
#    hand-derived values.  (The interpreter holds every value as a double,
#    so `fadc run MODEL.ir` is no oracle beyond 2^53: not used here.  The
#    IR holds full's value as a double too: 9223372036854775807 arrives as
#    2^63 and saturates back to itself; other integers beyond 2^53 round.)
#  - a declaration of 2^61 f32 elements overflowed the buffer's byte size
#    (2^61 * 4) in codegen/kir.c: sizes are checked before arithmetic, and
#    a value above a buffer's 2^56 bytes is refused with its location.
source "$(dirname "$0")/common.bash"

cat >"$tmp/c.ir" <<'IR'
def forward() {
  big = full(value=9223372036854775807, shape=[3], dtype=i64)
  low = full(value=-9223372036854775807 - 1, shape=[2], dtype=i64)
  exact = full(value=9007199254740992, shape=[1], dtype=i64)
  return big as big, low as low, exact as exact
}
IR
run_fadc 0 "$tmp/c.ir" -o "$tmp/c.so"
run_fadc 0 run "$tmp/c.so" --print
out_has "big: i64[3] = [9223372036854775807, 9223372036854775807, 9223372036854775807]"
out_has "low: i64[2] = [-9223372036854775808, -9223372036854775808]"
out_has "exact: i64[1] = [9007199254740992]"

cat >"$tmp/z.ir" <<'IR'
const Z: f32[2305843009213693952]
def forward() -> f32[] {
  return sum(Z)
}
IR
run_fadc 1 "$tmp/z.ir" -o "$tmp/z.so"
err_first "$tmp/z.ir:1:7: error: task 'forward': input 'Z', f32[2305843009213693952], is too large for a buffer (at most 2^56 bytes)"
[ -e "$tmp/z.so" ] && fail "a refused model wrote its artifact"
# A value made inside the program, 2^56 f32 elements: the same, at its line.
cat >"$tmp/b.ir" <<'IR'
param x: f32[4] = uniform(0, 1, seed=1)
def forward() -> f32[] {
  y = exp(broadcast(x, [18014398509481984, 4]))
  return sum(y)
}
IR
run_fadc 1 "$tmp/b.ir" -o "$tmp/b.so"
err_has "$tmp/b.ir:3:"
err_has "f32[18014398509481984, 4], is too large for a buffer (at most 2^56 bytes)"
exit 0
