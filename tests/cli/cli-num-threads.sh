# RUN: bash %s
# fadc run --num-threads N: the runtime's thread pool (docs/CODEGEN.md,
# "Parallel kernels").  A model with a 200 x 300 x 190 GEMM and a large
# elementwise kernel, vjp: its outputs are the same bytes at 1, 2 and 5
# threads (cmp), and at FADC_NUM_THREADS=3 (the default's fallback); the
# interpreter agrees within f32 rounding (normalized error 5e-5: sums of
# 300 products).  Bad counts are usage errors (exit 2) that name the value,
# and a bad FADC_NUM_THREADS is a runtime error naming the variable.
source "$(dirname "$0")/common.bash"
cat >"$tmp/m.ir" <<'IR'
param a: f32[200, 300] = normal(0, 1, seed=1)
param b: f32[300, 190] = normal(0, 1, seed=2)
def forward() {
  x = a @ b
  return sum(tanh(x * 0.1)) + sum(exp(sin(a)))
}
IR
run_fadc 0 "$tmp/m.ir" -o "$tmp/m.so" --tasks vjp
run_fadc 0 run "$tmp/m.ir" --task vjp --out "$tmp/ir"
for n in 1 2 5; do
	run_fadc 0 run "$tmp/m.so" --task vjp --num-threads $n --out "$tmp/t$n"
done
FADC_NUM_THREADS=3 run_fadc 0 run "$tmp/m.so" --task vjp --out "$tmp/env3"
for f in out.npy grad.a.npy grad.b.npy; do
	for d in t2 t5 env3; do
		cmp "$tmp/t1/$f" "$tmp/$d/$f" || fail "$d/$f differs from 1 thread's"
	done
done
run_fadc 0 compare-npy "$tmp/ir" "$tmp/t5" --rtol 5e-5

for bad in 0 -1 4097 1000000 abc 2x ""; do
	run_fadc 2 run "$tmp/m.so" --task vjp --num-threads "$bad" --print
	err_first "fadc: error: --num-threads: '$bad' is not an integer 1 .. 4096"
done
run_fadc 2 run "$tmp/m.so" --task vjp --num-threads
err_first "fadc: error: --num-threads needs a value"
FADC_NUM_THREADS=0 run_fadc 1 run "$tmp/m.so" --task vjp --print
err_first "fadc: error: cannot create a runtime context: FADC_NUM_THREADS must be an integer 1 .. 4096, got '0'"
exit 0
