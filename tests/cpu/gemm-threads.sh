# RUN: bash %s
# The GEMM kernels give the same bits on 1 and 2 threads, call after call,
# with several processes running at once, at each CPU level of the default
# artifact (x86-64-v3, and x86-64-v4 where the CPU has AVX-512): issue 26.
# h-c26g's thread-local pack buffers were reverted (4824d08) because the
# x86-64-v4 code gave fcn_resnet's gradients off by 1e-2 in a few runs of
# many: LLVM 14 keeps zmm16-31 live across the __tls_get_addr call of a
# thread-local access (it assumes the call preserves every vector register
# but xmm0-15), and glibc's __tls_get_addr, on a thread's first access,
# allocates and clears the block with memset, whose EVEX form uses ymm16.
# So the GEMM code now reaches its pack buffers through a function of its
# own (codegen/llvm_gemm.c, gemm_scratch), an ordinary call.
#
# The model: a 32 x 304 product whose first 16 columns of B are zeros (its
# B panel packed; those outputs are exactly 0 whatever the others are), a
# 760 x 300 x 808 one (A packed, 4 groups of rows, 2 blocks of the
# reduction, a masked last column tile), an f64 one; vjp adds the
# transposed products.  Oracles: the float64 interpreter within f32
# rounding (normalized error 5e-5, sums of up to 1000 products), the exact
# zeros, and the 1-thread run's bits for every later run.
#
# Then the class of bug itself, read from the machine code (objdump; the
# check skips without it): a function that calls __tls_get_addr uses no
# vector register, so no vector value can be live across that call.
source "$(dirname "$0")/../cli/common.bash"
cat >"$tmp/g.ir" <<'IR'
param a: f32[32, 32] = normal(0, 1, seed=1)
param b: f32[32, 288] = normal(0, 1, seed=2)
param x: f32[760, 300] = normal(0, 1, seed=3)
param w: f32[300, 808] = normal(0, 1, seed=4)
param p: f64[100, 120] = normal(0, 1, seed=5)
param q: f64[120, 70] = normal(0, 1, seed=6)
def forward() {
  y = a @ concat([zeros([32, 16], dtype=f32), b], axis=1)
  return y, x @ w, p @ q
}
IR
run_fadc 0 "$tmp/g.ir" -o "$tmp/g.so" --tasks vjp
run_fadc 0 run "$tmp/g.ir" --task vjp --out "$tmp/ir"

# y's first 16 columns are exactly zero (f32 .npy: the data after the header).
zeros16() {
	python3 - "$1" <<'PY' || fail "$1: y[:, :16] is not exactly zero"
import array, struct, sys
b = open(sys.argv[1], "rb").read()
h = struct.unpack("<H", b[8:10])[0]
y = array.array("f", b[10 + h:])
assert len(y) == 32 * 304, len(y)
bad = [(i, j, y[i * 304 + j]) for i in range(32) for j in range(16) if y[i * 304 + j] != 0]
assert not bad, bad[:4]
PY
}

rounds=3 par=4
levels=x86-64-v3
if FADC_CPU_LEVEL=x86-64-v4 "$FADC" run "$tmp/g.so" --task vjp --num-threads 1 --out "$tmp/probe" >/dev/null 2>&1; then
	levels="$levels x86-64-v4"
else
	echo "gemm-threads: no AVX-512 here: x86-64-v4 not run"
fi
for lv in $levels; do
	export FADC_CPU_LEVEL=$lv
	run_fadc 0 run "$tmp/g.so" --task vjp --num-threads 1 --out "$tmp/$lv.ref"
	run_fadc 0 compare-npy "$tmp/ir" "$tmp/$lv.ref" --rtol 5e-5
	zeros16 "$tmp/$lv.ref/y.npy"
	for ((r = 0; r < rounds; r++)); do
		pids=()
		for ((j = 0; j < par; j++)); do
			# Half of them run the task 4 times in one process (--time 3: the
			# last call's outputs are written), half once.
			more=()
			((j % 2)) && more=(--time 3)
			"$FADC" run "$tmp/g.so" --task vjp --num-threads 2 "${more[@]}" \
				--out "$tmp/$lv.$r.$j" >/dev/null 2>"$tmp/err.$j" &
			pids+=($!)
		done
		for ((j = 0; j < par; j++)); do
			wait "${pids[$j]}" || { cat "$tmp/err.$j" >&2; fail "$lv: run $r.$j failed"; }
			for f in "$tmp/$lv.ref"/*.npy; do
				cmp -s "$f" "$tmp/$lv.$r.$j/${f##*/}" ||
					fail "$lv: run $r.$j (2 threads): ${f##*/} differs from 1 thread's"
			done
		done
	done
	unset FADC_CPU_LEVEL
done

if ! command -v objdump >/dev/null; then
	echo "gemm-threads: no objdump: the machine-code check not run"
	exit 0
fi
objdump -d --no-show-raw-insn "$tmp/g.so" >"$tmp/g.s" || fail "objdump failed"
awk '
	/^[0-9a-f]+ <.*>:$/ { fn = $2; next }
	/call.*<__tls_get_addr/ { tls[fn] = 1 }
	/%[xyz]mm[0-9]/ { vec[fn] = 1 }
	END { for (f in tls) if (f in vec) { print f; bad = 1 } exit bad }
' "$tmp/g.s" >"$tmp/tlsvec" || fail "a function with vector code calls __tls_get_addr: $(tr '\n' ' ' <"$tmp/tlsvec")"
exit 0
