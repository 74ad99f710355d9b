# RUN: bash %s
# Long chains with the default tasks (issue 18; docs/CODEGEN.md "Call
# tables"; measurements in docs/PERFORMANCE.md, "Compile time of long
# chains").  bench/chain.sh N writes N statements x_i = sin(x_{i-1}) *
# 1.0001 + 0.5 on an f32[1024] parameter and returns sum(x_N); its default
# tasks are forward, vjp, jvp, vhp and hvp, about 11 kernels per statement
# in all (vhp and hvp about 5 each), so every task but the forward is a big
# one whose kernels are called from a call table.
#  1. 1,000 statements: every default task of the artifact agrees with the
#     float64 interpreter (fadc check: normalized error under 1e-5), and
#     the vhp and hvp are called through tables (their globals in the LLVM
#     IR); with the rtol below f32's rounding the check of the hvp must
#     fail.
#  2. 16,000 statements, default tasks, compile (-O0) under an 800 MB
#     limit on virtual memory (they need about 700 MB; the code before call
#     tables and trimmed kernel-IR arrays held 837 MB resident at -O2 and
#     took 55 s); the artifact's vhp agrees with the interpreter's
#     (fadc run on the .ir) to f32 accuracy.  No time is asserted.  The
#     limit is skipped under ASan, which reserves terabytes of shadow.
source "$(dirname "$0")/common.bash"
bash "$SRC/bench/chain.sh" 1000 "$tmp/c1000.ir" || fail "bench/chain.sh 1000"
run_fadc 0 check "$tmp/c1000.ir"
out_has "check $tmp/c1000.ir: "
out_has "(tolerance 1e-05): ok"
# The outputs of the five tasks: 1 + 2 + 2 + 2 + 2 (the forward's value in
# each derived task, beside its derivative).
out_has ": 9 outputs,"
run_fadc 1 check "$tmp/c1000.ir" --tasks hvp --rtol 1e-12

# The tables are there: each is a loop over rows, in the module.
run_fadc 0 "$tmp/c1000.ir" -O0 -o "$tmp/c1000.so" --emit llvm
for t in vjp jvp vhp hvp; do
	out_has "@task.$t.table0.rows = internal constant"
done
out_has ".thunk(%fadc_call_v1*"

bash "$SRC/bench/chain.sh" 16000 "$tmp/c16000.ir" || fail "bench/chain.sh 16000"
if grep -qa __asan_init "$FADC"; then
	echo "ASan build: the memory limit is not checked"
	run_fadc 0 "$tmp/c16000.ir" -O0 -o "$tmp/c16000.so"
else
	(ulimit -v 800000 && "$FADC" "$tmp/c16000.ir" -O0 -o "$tmp/c16000.so" >"$tmp/out" 2>"$tmp/err") ||
		{ cat "$tmp/err" >&2; fail "16,000 statements' default tasks did not compile in 800 MB of virtual memory"; }
fi
[ -s "$tmp/c16000.so" ] || fail "no artifact for 16,000 statements"
for t in vhp; do
	run_fadc 0 run "$tmp/c16000.so" --task $t --out "$tmp/so-$t"
	run_fadc 0 run "$tmp/c16000.ir" --task $t --out "$tmp/ir-$t"
	ls "$tmp/so-$t" >"$tmp/names"
	[ "$(wc -l <"$tmp/names")" = 2 ] || fail "fadc run --task $t wrote $(wc -l <"$tmp/names") outputs, not 2"
	while read -r f; do
		run_fadc 0 compare-npy "$tmp/so-$t/$f" "$tmp/ir-$t/$f" --rtol 1e-5
	done <"$tmp/names"
done
