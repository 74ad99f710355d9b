# RUN: bash %s
# Indices out of range are a run-time error of a compiled task (issue 18):
# exit 1 and a message naming the task, the op, the index tensor and the
# offending value, never a clamped result with exit 0; an index of a
# prelude composite (nll's take_along) names the model's call site too.  The oracle is the
# float64 interpreter, which refuses the same data (and, with valid data,
# gives the same outputs as the compiled task).
source "$(dirname "$0")/common.bash"

# npy_i64 FILE DIMS VALUES...: an i64 .npy file (DIMS "2," or "2, 4").
npy_i64() {
	local f=$1 dims=$2 v
	shift 2
	local h="{'descr': '<i8', 'fortran_order': False, 'shape': ($dims), }"
	while [ $(((10 + ${#h} + 1) % 64)) -ne 0 ]; do h="$h "; done
	{
		printf '\x93NUMPY\x01\x00'
		printf "\\$(printf '%03o' $(((${#h} + 1) & 255)))\\$(printf '%03o' $(((${#h} + 1) >> 8)))"
		printf '%s\n' "$h"
		for v in "$@"; do le64 "$v"; done
	} >"$f"
}

# expect_index MODEL.ir SO TASK MSG [run args...]: the compiled task and
# the interpreter (with the sizes ird: -D ...) both refuse the data; the
# compiled message is MSG.
ird=()
expect_index() {
	local ir=$1 so=$2 task=$3 msg=$4
	shift 4
	run_fadc 1 run "$so" --task "$task" --out "$tmp/o" "$@"
	err_has "$so: error: $task: $msg"
	[ -e "$tmp/o" ] && fail "a refused run wrote outputs"
	run_fadc 1 run "$ir" "${ird[@]}" --task "$task" --out "$tmp/o" "$@"
	err_has "out of range"
}

# resnet18's labels [5000, 3] for 10 classes (the issue's reproduction).
r18=$SRC/models/resnet18.ir
rdefs=(-D N=2 -D H=32 -D C=4 -D NCLS=10)
ird=("${rdefs[@]}")
run_fadc 0 "$r18" "${rdefs[@]}" --tasks vjp -o "$tmp/r18.so"
npy_i64 "$tmp/bad.npy" "2," 5000 3
expect_index "$r18" "$tmp/r18.so" vjp \
	"take_along: index 5000 of 'labels' is out of range [0, 10) (prelude.ir:21:12, called from $r18:144:10)" \
	--params "labels=$tmp/bad.npy"
# Valid labels: the compiled gradient is the interpreter's (f32 against
# f64: batch norm over 2 x 1 x 1 pixels amplifies rounding to ~5e-4 in
# layer4; a clamped label would be off by O(1)).
npy_i64 "$tmp/good.npy" "2," 9 3
run_fadc 0 run "$tmp/r18.so" --task vjp --params "labels=$tmp/good.npy" --out "$tmp/rc"
run_fadc 0 run "$r18" "${rdefs[@]}" --task vjp --params "labels=$tmp/good.npy" --out "$tmp/ri"
run_fadc 0 compare-npy "$tmp/rc" "$tmp/ri" --rtol 2e-3
# The descriptor lists the check apart from the outputs.
run_fadc 0 inspect "$tmp/r18.so"
out_has "  check take_along: index 'labels' in [0, 10) (prelude.ir:21:12, called from $r18:144:10)"

# transformer's token ids 1000 and -7 (50 tokens): the embedding's take.
tr=$SRC/models/transformer.ir
tdefs=(-D N=2 -D SEQ=3 -D E=12 -D NH=2 -D FF=8 -D MAXLEN=4)
ird=("${tdefs[@]}")
run_fadc 0 "$tr" "${tdefs[@]}" --tasks vjp -o "$tmp/tr.so"
npy_i64 "$tmp/t1.npy" "2, 4" 1 2 1000 3 0 1 2 3
expect_index "$tr" "$tmp/tr.so" vjp "take: index 1000 of 'data' is out of range [0, 50) (" \
	--params "data=$tmp/t1.npy"
npy_i64 "$tmp/t2.npy" "2, 4" 1 2 3 3 0 -7 2 3
expect_index "$tr" "$tmp/tr.so" vjp "take: index -7 of 'data' is out of range [0, 50) (" \
	--params "data=$tmp/t2.npy"
# A bad target only (the last column is no token of the input): nll's take_along.
npy_i64 "$tmp/t3.npy" "2, 4" 1 2 3 3 0 1 2 50
expect_index "$tr" "$tmp/tr.so" vjp \
	"take_along: index 50 of 'data' is out of range [0, 50) (prelude.ir:21:12, called from $tr:132:10)" \
	--params "data=$tmp/t3.npy"
npy_i64 "$tmp/t4.npy" "2, 4" 1 2 3 3 0 1 2 49
run_fadc 0 run "$tmp/tr.so" --task vjp --params "data=$tmp/t4.npy" --out "$tmp/tc"
run_fadc 0 run "$tr" "${tdefs[@]}" --task vjp --params "data=$tmp/t4.npy" --out "$tmp/ti"
run_fadc 0 compare-npy "$tmp/tc" "$tmp/ti" --rtol 1e-4

ird=()
# take(p, i) with i drawn in [100, 200) for a p of 3: the value named is
# i's largest, which the interpreter prints (an oracle of its own).
cat >"$tmp/take.ir" <<'IR'
param p: f32[3] = normal(0, 1, seed=1)
const i: i64[4] = cast(100 + floor(100 * uniform(0, 1, seed=3)), dtype=i64)
def forward() -> f32[] {
  return sum(take(p, i, axis=0))
}
IR
cat >"$tmp/show.ir" <<'IR'
const i: i64[4] = cast(100 + floor(100 * uniform(0, 1, seed=3)), dtype=i64)
def forward() {
  return max(i, axes=[0]) as top
}
IR
run_fadc 0 run "$tmp/show.ir" --print
top=$(sed -n 's/^top: i64\[\] = //p' "$tmp/out")
[ -n "$top" ] && [ "$top" -ge 100 ] && [ "$top" -lt 200 ] || fail "no largest index: '$top'"
run_fadc 0 "$tmp/take.ir" --tasks vjp -o "$tmp/take.so"
expect_index "$tmp/take.ir" "$tmp/take.so" vjp \
	"take: index $top of 'i' is out of range [0, 3) ($tmp/take.ir:4:14)"
expect_index "$tmp/take.ir" "$tmp/take.so" forward \
	"take: index $top of 'i' is out of range [0, 3) ($tmp/take.ir:4:14)"

# one_hot with n = 0: every index is out of range.
cat >"$tmp/oh.ir" <<'IR'
param p: f32[2] = normal(0, 1, seed=1)
const i: i64[2] = full(value=1, shape=[2], dtype=i64) - iota(shape=[2], dtype=i64)
def forward() -> f32[] {
  return sum(p) + sum(one_hot(i, n=0))
}
IR
run_fadc 0 "$tmp/oh.ir" --tasks vjp -o "$tmp/oh.so"
expect_index "$tmp/oh.ir" "$tmp/oh.so" vjp \
	"one_hot: index 1 of 'i' is out of range [0, 0) ($tmp/oh.ir:4:23)"

# cross_entropy over 0 classes: nll's take_along over an axis of size 0.
cat >"$tmp/ce.ir" <<'IR'
param p: f32[2, 0] = normal(0, 1, seed=1)
const i: i64[2] = full(value=0, shape=[2], dtype=i64)
def forward() -> f32[] {
  return cross_entropy(p, i)
}
IR
run_fadc 0 "$tmp/ce.ir" --tasks vjp -o "$tmp/ce.so"
expect_index "$tmp/ce.ir" "$tmp/ce.so" vjp \
	"take_along: index 0 of 'i' is out of range [0, 0) (prelude.ir:21:12, called from $tmp/ce.ir:4:10)"

# A ppl model has no data-dependent index: no check, format 3 as before.
run_fadc 0 "$SRC/models/ppl_simple_reg.ir" -o "$tmp/ppl.so"
run_fadc 0 inspect "$tmp/ppl.so"
grep -qF "  check " "$tmp/out" && fail "a ppl model has an index check"
[ "$(od -An -tu4 -j $(($(stat -c %s "$tmp/ppl.so") - 32)) -N4 "$tmp/ppl.so" | tr -d ' ')" = 3 ] ||
	fail "the ppl artifact's format is not 3"
exit 0
