# RUN: bash %s
# Choices measured on the GPU (docs/CUDA.md), checked without a GPU:
# tests/gpu/choice.ir's products lie in the band (2^16 to 2^22
# multiply-adds), so each task's descriptor has choice records (artifact
# format 6), each followed by its printed kernel and its cuBLAS GEMM, and
# `fadc inspect` lists them; a product below the band has none, one above
# it is a GEMM alone; the CPU code of the cpu,cuda artifact is the CPU
# artifact's, bit for bit; gpu_check --choices skips (77) where there is no
# device and refuses a --choices that contradicts FADC_CUDA_CHOICE.  On a
# GPU, tests/gpu/device/run.sh runs choice.so forced, timed and cached.
source "$(dirname "$0")/../cli/common.bash"
m=$SRC/tests/gpu/choice.ir
if ! "$FADC" "$m" -o "$tmp/probe.so" --target cuda 2>"$tmp/err"; then
	grep -qF "built without the CUDA toolkit" "$tmp/err" && { echo "no CUDA toolkit: skipped"; exit 77; }
	cat "$tmp/err" >&2
	fail "fadc --target cuda failed"
fi

run_fadc 0 "$m" -o "$tmp/c.so" --target cpu,cuda --tasks forward,vjp,jvp --cpu x86-64-v3
run_fadc 0 inspect "$tmp/c.so"
out_has "  cuda: 6 launches (4 kernels or host steps, 0 cuBLAS GEMMs, 2 choices timed on the GPU)"
out_has "  choice 0: record 0, 2 candidates, the faster on the GPU runs: 1 kernel fadc_forward_k0_matmul 2 gemm cublasSgemmStridedBatched"
out_has "  choice 1: record 4, 2 candidates, the faster on the GPU runs: 5 kernel fadc_forward_k2_matmul 6 gemm cublasSgemmStridedBatched"
# x @ w: 64 x 64 x 256; h @ v: 64 x 16 x 64 (the GEMM records of the choices).
out_has "  gemm 2: f32 batch=1 M=64 N=64 K=256 ta=0 tb=0 lda=256 ldb=64 ldc=64"
out_has "  gemm 6: f32 batch=1 M=64 N=16 K=64 ta=0 tb=0 lda=64 ldb=16 ldc=16"
[ "$(grep -c '^  choice ' "$tmp/out")" -eq 12 ] || fail "expected 2 + 5 + 5 choices: $(grep '^  choice' "$tmp/out")"
# The format: 6 in the trailer (bytes 8..11 of the last 40).
v=$(tail -c 40 "$tmp/c.so" | od -An -tu4 -j8 -N4 | tr -d ' ')
[ "$v" = 6 ] || fail "format $v, expected 6"

# Outside the band: below it a printed kernel alone (format 3), above it a
# GEMM alone (format 4); z keeps the tasks from being fused.
cat >"$tmp/small.ir" <<'IR'
param a: f32[32, 32] = normal(0, 1, seed=1)
param b: f32[32, 32] = normal(0, 1, seed=2)
param z: f32[300000] = normal(0, 1, seed=3)
def forward() -> f32[] {
  return sum(a @ b) + sum(z * z)
}
IR
sed 's/32, 32/256, 256/g' "$tmp/small.ir" >"$tmp/large.ir"
run_fadc 0 "$tmp/small.ir" -o "$tmp/small.so" --target cpu,cuda --cpu x86-64-v3
run_fadc 0 inspect "$tmp/small.so"
grep -qE '^  (choice|gemm) ' "$tmp/out" && fail "32 x 32 x 32 has a GEMM or a choice: $(cat "$tmp/out")"
[ "$(tail -c 40 "$tmp/small.so" | od -An -tu4 -j8 -N4 | tr -d ' ')" = 3 ] || fail "small: not format 3"
# (One CPU level: the CPU GEMM's x86-64-v4 code would make it format 11,
# docs/ARTIFACT.md "CPU levels".)
run_fadc 0 "$tmp/large.ir" -o "$tmp/large.so" --target cpu,cuda --cpu x86-64-v3
run_fadc 0 inspect "$tmp/large.so"
# (5: the sum of a @ b's 65536 terms is two kernels, kir_split_reductions)
out_has "  cuda: 5 launches (4 kernels or host steps, 1 cuBLAS GEMM)"
grep -q '^  choice ' "$tmp/out" && fail "256 x 256 x 256 has a choice"
[ "$(tail -c 40 "$tmp/large.so" | od -An -tu4 -j8 -N4 | tr -d ' ')" = 4 ] || fail "large: not format 4"

# The CPU code is the CPU artifact's.
run_fadc 0 "$m" -o "$tmp/cpu.so" --tasks forward,vjp,jvp --cpu x86-64-v3
for t in forward vjp jvp; do
	run_fadc 0 run "$tmp/c.so" --task $t --out "$tmp/g/$t"
	run_fadc 0 run "$tmp/cpu.so" --task $t --out "$tmp/c/$t"
	run_fadc 0 compare-npy "$tmp/g/$t" "$tmp/c/$t" --rtol 0
done

# gpu_check: a --choices that contradicts FADC_CUDA_CHOICE is a usage error;
# without a device, a skip.
BIN=${FADC_BIN_DIR:?}
FADC_CUDA_CHOICE=1 "$BIN/gpu_check" --choices timed "$tmp/c.so" >"$tmp/out" 2>"$tmp/err"
[ $? -eq 2 ] || fail "gpu_check --choices timed with FADC_CUDA_CHOICE=1 was not refused"
err_has "--choices timed is not for FADC_CUDA_CHOICE=0 or 1"
"$BIN/gpu_check" --choices forced "$tmp/c.so" >"$tmp/out" 2>"$tmp/err"
[ $? -eq 2 ] || fail "gpu_check --choices forced without FADC_CUDA_CHOICE was not refused"
d=$(mktemp -d "$tmp/cache.XXXXXX")
FADC_CACHE_DIR=$d "$BIN/gpu_check" --choices timed "$tmp/c.so" >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ $rc -eq 77 ]; then
	err_has "FADC_ERR_DEVICE"
	echo "no CUDA device here: $(cat "$tmp/err")"
else
	[ $rc -eq 0 ] || { cat "$tmp/out" "$tmp/err" >&2; fail "gpu_check --choices timed failed"; }
	FADC_CACHE_DIR=$d "$BIN/gpu_check" --choices cached "$tmp/c.so" ||
		fail "gpu_check --choices cached failed"
fi
echo "cuda-choice: ok"
