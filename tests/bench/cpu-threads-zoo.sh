# RUN: bash %s
# fcn_resnet's vjp at reduced size (bench/bench.yaml), the case that made
# the lead revert h-c26g's thread-local GEMM buffers (4824d08; docs/
# STATUS.md stop 23): fadc-bench runs at once, several processes of one
# artifact, each within the model's rtol of the float64 reference
# interpreter (--check-reference; 1e-3 normalized) and consistent with its
# jvp partner, at each CPU level of the default artifact (FADC_CPU_LEVEL;
# x86-64-v4 only with AVX-512).  10 threads on the 2 cores make many fresh
# threads whose first GEMM takes glibc's slow __tls_get_addr path: with the
# GEMM's own thread-local access (zmm16-31 live across that call, clobbered
# there) 4 of 6 such runs were 1.7e-2 off; with the access behind a call
# (codegen/llvm_gemm.c, gemm_scratch) none of 30.  2 threads once each, as
# the zoo's tests run.  tests/cpu/gemm-threads.sh is the fast check (bits
# across threads and processes; the machine-code rule).
# `zoo` in the name labels it slow: about 1.5 minutes on 2 cores.
set -eu
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
bench() {
	"$FADC_BENCH" --backend cpu --artifacts "$out/art" --reduced --num-iters 1 --check-reference \
		--model-filter fcn_resnet --task-filter vjp "$@"
}
# Compiles (vjp and its jvp partner) and computes the reference once.
bench --compile --output "$out/t.md" > "$out/log" 2> "$out/err" || { cat "$out/err"; exit 1; }
if grep -q 'MISMATCH\|INCONSISTENT\|could not run\|skipped' "$out/err"; then cat "$out/err"; exit 1; fi
levels=x86-64-v3
if grep -qw avx512f /proc/cpuinfo && grep -qw avx512bw /proc/cpuinfo && grep -qw avx512dq /proc/cpuinfo &&
	grep -qw avx512vl /proc/cpuinfo; then
	levels="$levels x86-64-v4"
fi
for lv in $levels; do
	for threads in 10 10 2; do
		pids=()
		for j in 0 1 2 3; do
			FADC_CPU_LEVEL=$lv bench --num-threads $threads --output "$out/t$j.md" \
				> /dev/null 2> "$out/err$j" &
			pids+=($!)
		done
		for j in 0 1 2 3; do
			wait "${pids[$j]}" || { cat "$out/err$j"; exit 1; }
			if grep -q 'MISMATCH\|INCONSISTENT\|could not run\|skipped' "$out/err$j"; then
				echo "cpu-threads-zoo: $lv, $threads threads, run $j:"
				cat "$out/err$j"
				exit 1
			fi
			grep -q '^| fcn_resnet | vjp | [0-9.e-]* | nan |$' "$out/t$j.md" || { cat "$out/t$j.md"; exit 1; }
		done
	done
done
echo "cpu-threads-zoo: levels $levels, 12 runs each, every one within the reference's rtol"
