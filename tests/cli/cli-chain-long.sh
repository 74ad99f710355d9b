# RUN: bash %s
# Long chains compile in bounded time and memory (issue 18, docs/CODEGEN.md
# "Size bounds"; measurements in docs/PERFORMANCE.md, "Compile time of long
# chains").  bench/chain.sh N writes N statements x_i = sin(x_{i-1}) *
# 1.0001 + 0.5 on an f32[1024] parameter and returns sum(x_N).
#  1. 4,000 statements: the compiled forward and vjp (through part
#     functions of the task, fused kernels cut by the caps) agree with the
#     float64 interpreter (fadc check: normalized error under 1e-5).
#  2. 16,000 statements compile (vjp, -O0) under a 900 MB limit on virtual
#     memory; the code before the fix needed 1.2 GB resident (per-kernel
#     tables of every buffer) and aborted under this limit.  No time is
#     asserted.  Skipped under ASan, which reserves terabytes of shadow.
source "$(dirname "$0")/common.bash"
bash "$SRC/bench/chain.sh" 4000 "$tmp/c4000.ir" || fail "bench/chain.sh 4000"
[ "$(grep -c '= sin(' "$tmp/c4000.ir")" = 4000 ] || fail "bench/chain.sh wrote the wrong number of statements"
run_fadc 0 check "$tmp/c4000.ir" --tasks vjp
out_has "check $tmp/c4000.ir: 3 outputs, largest normalized error"
out_has "(tolerance 1e-05): ok"

# The oracle can fail: a chain whose vjp the interpreter disagrees with
# would exit 1.  Here the tolerance is set below f32's rounding so the same
# check must report a mismatch.
run_fadc 1 check "$tmp/c4000.ir" --tasks vjp --rtol 1e-12

bash "$SRC/bench/chain.sh" 16000 "$tmp/c16000.ir" || fail "bench/chain.sh 16000"
if grep -qa __asan_init "$FADC"; then
	echo "ASan build: the memory limit is not checked"
	run_fadc 0 "$tmp/c16000.ir" --tasks vjp -O0 -o "$tmp/c16000.so"
else
	(ulimit -v 900000 && "$FADC" "$tmp/c16000.ir" --tasks vjp -O0 -o "$tmp/c16000.so" >"$tmp/out" 2>"$tmp/err") ||
		{ cat "$tmp/err" >&2; fail "16,000 statements did not compile in 900 MB of virtual memory"; }
fi
[ -s "$tmp/c16000.so" ] || fail "no artifact for 16,000 statements"
# It runs: the vjp of the artifact against the interpreter's, on the
# same model and inputs (fadc run on the .ir), to f32 accuracy.
run_fadc 0 run "$tmp/c16000.so" --task vjp --out "$tmp/so"
run_fadc 0 run "$tmp/c16000.ir" --task vjp --out "$tmp/ir"
ls "$tmp/so" >"$tmp/names"
[ -s "$tmp/names" ] || fail "fadc run wrote no outputs"
while read -r f; do
	run_fadc 0 compare-npy "$tmp/so/$f" "$tmp/ir/$f" --rtol 1e-5
done <"$tmp/names"
