# RUN: bash %s
# bench/gemm-bench.sh end to end on two small shapes (its `smoke` set: a
# batch carried by A, 2 x 40 rows; a transposed A with K = 300 across two
# blocks): it compiles each, builds the harness against libfadc.a, and
# prints one line per shape and thread count with a positive peak and
# fadc figure.  Where a BLAS loads (Debian's libopenblas0), fadc's result
# must match it to 1e-4 of the largest magnitude (f32, K <= 300: a few
# eps_f32 sqrt(K) expected; the BLAS is the independent oracle here).
# Timing itself is not checked (docs/PERFORMANCE.md has the figures).
set -eu
. "$FADC_SOURCE_DIR/tests/bench/common.bash"
export GEMM_BENCH_MIN_S=0.01
# The harness links libfadc.a, which the sanitizer and fuzzing builds do not make
# (CMakeLists.txt): there the normal pass's run stands.
if [ ! -f "$FADC_BIN_DIR/../lib/libfadc.a" ]; then
	echo "skipped: this build has no lib/libfadc.a (sanitizer or fuzzing build)"
	exit 77
fi
bash "$SRC/bench/gemm-bench.sh" --set smoke -t 1,2 --fadc "$FADC_BIN_DIR/fadc" --out "$tmp/g" \
	>"$tmp/out" 2>"$tmp/err" || { cat "$tmp/err" >&2; fail "gemm-bench.sh exited $?"; }
cat "$tmp/out"
[ "$(grep -c '^f32 ' "$tmp/out")" -eq 4 ] || fail "expected 4 lines (2 shapes x 2 thread counts)"
awk '/^f32 /{
	for (i = 1; i <= NF; i++) {
		if ($i == "peak") peak = $(i + 1)
		if ($i == "fadc") gf = $(i + 1)
		if ($i == "diff") diff = $(i + 1)
	}
	if (!(peak > 0) || !(gf > 0)) { print "no figures: " $0; bad = 1 }
	if (diff + 0 > 1e-4) { print "fadc and the BLAS differ: " $0; bad = 1 }
}
END { exit bad }' "$tmp/out" || fail "bad line"
grep -q "blas(" "$tmp/out" || fail "no BLAS column"
echo PASS
