# RUN: bash %s
# Indices out of range inside a scan's body are a run-time error of the
# task (issue 18), as outside one: exit 1 and a message naming the task,
# the op, the index, the offending value, the range and the source, in
# every task (the derived scans: vjp's forward and reverse, jvp's, vmap's
# in jacobian, hvp's), never a clamped result.  The oracle is the float64
# interpreter, which refuses the same data and, with valid data, gives
# the same outputs.  passes/checks.c hoists an index that is a body
# argument to the scan's operand (named after it), and checks any other
# per step (named by where it is computed); nested scans lift twice.
source "$(dirname "$0")/common.bash"

# npy_i64 FILE DIMS VALUES...: an i64 .npy file (DIMS "", "2," or "2, 4").
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

tasks="forward vjp jvp hvp jacobian"

# expect_index MODEL.ir SO TASK MSG [run args...]: the compiled task and
# the interpreter both refuse the data; the compiled message is MSG.
expect_index() {
	local ir=$1 so=$2 task=$3 msg=$4
	shift 4
	run_fadc 1 run "$so" --task "$task" --out "$tmp/o" "$@"
	err_has "$so: error: $task: $msg"
	[ -e "$tmp/o" ] && fail "a refused run wrote outputs"
	run_fadc 1 run "$ir" --task "$task" --out "$tmp/o" "$@"
	err_has "out of range"
}

# same_as_interp MODEL.ir SO [run args...]: every task's outputs are the
# interpreter's (a clamped index would change them by O(1)).
same_as_interp() {
	local ir=$1 so=$2 t
	shift 2
	for t in $tasks; do
		run_fadc 0 run "$so" --task $t --out "$tmp/c_$t" "$@"
		run_fadc 0 run "$ir" --task $t --out "$tmp/i_$t" "$@"
		run_fadc 0 compare-npy "$tmp/c_$t" "$tmp/i_$t" --rtol 1e-5
	done
}

# checks SO N: every task but the initializers lists N checks.
checks() {
	run_fadc 0 inspect "$1"
	awk -v n="$2" '/^task / { if (t != "" && t !~ /^init/ && c != n) bad = bad " " t "=" c;
	                          t = $2; sub(":", "", t); c = 0 }
	               /^  check / { c++ }
	               END { if (t !~ /^init/ && c != n) bad = bad " " t "=" c; if (bad) { print bad; exit 1 } }' \
		"$tmp/out" >"$tmp/bad" || fail "$1: tasks without $2 checks:$(cat "$tmp/bad")"
}

# 1. Per step (tests/gpu/index-scan.ir): the label plus shift, and a
# carry; vjp's reverse scan and jvp's second take merge into the same two.
m=$SRC/tests/gpu/index-scan.ir
run_fadc 0 "$m" --tasks forward,vjp,jvp,hvp,jacobian -o "$tmp/is.so"
checks "$tmp/is.so" 2
npy_i64 "$tmp/l9.npy" "4," 0 9 1 2
npy_i64 "$tmp/lm2.npy" "4," 1 -2 0 0
npy_i64 "$tmp/s4.npy" "" 4
npy_i64 "$tmp/s3.npy" "" 3
for t in $tasks; do
	expect_index "$m" "$tmp/is.so" $t "take: index 9 of the index computed at $m:20:21 is out of range [0, 6) ($m:20:7)" \
		--params "labels=$tmp/l9.npy"
	expect_index "$m" "$tmp/is.so" $t "take: index -2 of the index computed at $m:20:21 is out of range [0, 6) ($m:20:7)" \
		--params "labels=$tmp/lm2.npy"
	# start 4: positions 4 .. 7, the last step's out of [0, 7).
	expect_index "$m" "$tmp/is.so" $t "take: index 7 of the index computed at $m:18:21 is out of range [0, 7) ($m:21:24)" \
		--params "start=$tmp/s4.npy"
done
same_as_interp "$m" "$tmp/is.so"
same_as_interp "$m" "$tmp/is.so" --params "start=$tmp/s3.npy" # positions 3 .. 6: in range

# 2. Hoisted: the step's token itself is the index (an embedding lookup
# per step), and an invariant: checked on the scan's operands, named after
# them, outside the loop; the reverse scan's take_add shares the checks.
cat >"$tmp/emb.ir" <<'IR'
param w: f32[5] = uniform(0.3, 0.8, seed=1)
param emb: f32[6, 5] = normal(0, 1, seed=2)
const labels: i64[4, 1] = cast(floor(6 * uniform(0, 1, seed=4)), dtype=i64)
const first: i64[] = full(value=2, shape=[], dtype=i64)

def cell(h: f32[5], tok: i64[1], w: f32[5], emb: f32[6, 5], f: i64[]) -> (f32[5], f32[5]) {
  n = tanh(h * w + take(emb, reshape(tok, shape=[]), axis=0) * take(emb, f, axis=0))
  return n, n * n
}

def forward() -> f32[] {
  h, ys = scan(cell, full(value=0.1, shape=[5]), labels, w, emb, first, ncarry=1, nxs=1)
  return sum(h) + sum(ys)
}
IR
e=$tmp/emb.ir
run_fadc 0 "$e" --tasks forward,vjp,jvp,hvp,jacobian -o "$tmp/emb.so"
checks "$tmp/emb.so" 2
out_has "  check take: index 'labels' in [0, 6) ($e:7:20)"
out_has "  check take: index 'first' in [0, 6) ($e:7:64)"
npy_i64 "$tmp/e9.npy" "4, 1" 0 1 9 2
npy_i64 "$tmp/f6.npy" "" 6
for t in $tasks; do
	expect_index "$e" "$tmp/emb.so" $t "take: index 9 of 'labels' is out of range [0, 6) ($e:7:20)" \
		--params "labels=$tmp/e9.npy"
	expect_index "$e" "$tmp/emb.so" $t "take: index 6 of 'first' is out of range [0, 6) ($e:7:64)" \
		--params "first=$tmp/f6.npy"
done
same_as_interp "$e" "$tmp/emb.so"

# 3. Nested scans: the inner body's token is hoisted twice (to 'toks'),
# its token plus s is checked per inner step, then per outer step.
cat >"$tmp/nest.ir" <<'IR'
param emb: f32[6, 3] = normal(0, 1, seed=2)
const toks: i64[2, 3] = cast(floor(6 * uniform(0, 1, seed=4)), dtype=i64)
const shift: i64[] = full(value=0, shape=[], dtype=i64)

def inner(c: f32[3], t: i64[], emb: f32[6, 3], s: i64[]) -> (f32[3], f32[3]) {
  n = tanh(c + take(emb, t, axis=0) * take(emb, t + s, axis=0))
  return n, n
}

def outer(c: f32[3], ts: i64[3], emb: f32[6, 3], s: i64[]) -> (f32[3], f32[3]) {
  c2, ys = scan(inner, c, ts, emb, s, ncarry=1, nxs=1)
  return c2, sum(ys, 0)
}

def forward() -> f32[] {
  c, zs = scan(outer, full(value=0.1, shape=[3]), toks, emb, shift, ncarry=1, nxs=1)
  return sum(c) + sum(zs * zs)
}
IR
n=$tmp/nest.ir
run_fadc 0 "$n" --tasks forward,vjp,jvp,hvp,jacobian -o "$tmp/nest.so"
checks "$tmp/nest.so" 2
npy_i64 "$tmp/t7.npy" "2, 3" 0 1 2 3 4 7
npy_i64 "$tmp/s1.npy" "" 1
npy_i64 "$tmp/sm1.npy" "" -1
for t in $tasks; do
	expect_index "$n" "$tmp/nest.so" $t "take: index 7 of 'toks' is out of range [0, 6) ($n:6:16)" \
		--params "toks=$tmp/t7.npy"
done
npy_i64 "$tmp/t5.npy" "2, 3" 0 1 2 3 4 5
npy_i64 "$tmp/t0.npy" "2, 3" 0 1 2 3 4 0
expect_index "$n" "$tmp/nest.so" vjp "take: index 6 of the index computed at $n:6:51 is out of range [0, 6) ($n:6:39)" \
	--params "toks=$tmp/t5.npy" --params "shift=$tmp/s1.npy"
expect_index "$n" "$tmp/nest.so" jvp "take: index -1 of the index computed at $n:6:51 is out of range [0, 6) ($n:6:39)" \
	--params "toks=$tmp/t0.npy" --params "shift=$tmp/sm1.npy"
same_as_interp "$n" "$tmp/nest.so"

# 4. A scan of no steps runs no body: its take is not checked (the
# interpreter agrees: it never reads the index).
cat >"$tmp/zero.ir" <<'IR'
param emb: f32[6, 3] = normal(0, 1, seed=2)
const toks: i64[0] = full(value=9, shape=[0], dtype=i64)
const bad: i64[] = full(value=9, shape=[], dtype=i64)

def cell(c: f32[3], t: i64[], b: i64[], emb: f32[6, 3]) -> (f32[3], f32[3]) {
  n = tanh(c + take(emb, t, axis=0) + take(emb, b, axis=0) + take(emb, t + b, axis=0))
  return n, n
}

def forward() -> f32[] {
  c, ys = scan(cell, full(value=0.1, shape=[3]), toks, bad, emb, ncarry=1, nxs=1)
  return sum(c) + sum(ys)
}
IR
run_fadc 0 "$tmp/zero.ir" --tasks forward,vjp,jvp,hvp,jacobian -o "$tmp/zero.so"
checks "$tmp/zero.so" 0
same_as_interp "$tmp/zero.ir" "$tmp/zero.so"

# 5. The GPU's model compiles for CUDA (gpu_check --index runs it on a
# device, tests/gpu/device/payload.sh).
if "$FADC" "$SRC/models/ppl_simple_reg.ir" -o "$tmp/probe.so" --target cuda --tasks vjp 2>/dev/null; then
	run_fadc 0 "$m" --tasks forward,vjp -o "$tmp/isc.so" --target cpu,cuda
	checks "$tmp/isc.so" 2
	[ "$(grep -c '^task [fv].*code cpu,cuda' "$tmp/out")" = 2 ] || fail "no CUDA code: $(cat "$tmp/out")"
else
	echo "no CUDA toolkit: the CUDA compilation skipped"
fi
exit 0
