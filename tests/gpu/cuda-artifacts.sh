# RUN: bash %s
# --target cuda and cpu,cuda artifacts, checked without a GPU: the NVRTC
# images and launch contracts are in the descriptor (inspect), compiling
# twice gives the same bytes, a cpu,cuda artifact's CPU code gives exactly
# the CPU artifact's outputs, a CUDA-only task is refused on a CPU context
# with a message naming the task, and a CUDA context where there is no
# driver is a clear FADC_ERR_DEVICE (gpu_check prints it and skips).
source "$(dirname "$0")/../cli/common.bash"
m=$SRC/models/ppl_simple_reg.ir
if ! "$FADC" "$m" -o "$tmp/probe.so" --target cuda --tasks vjp 2>"$tmp/err"; then
	grep -qF "built without the CUDA toolkit" "$tmp/err" && { echo "no CUDA toolkit: skipped"; exit 77; }
	cat "$tmp/err" >&2
	fail "fadc --target cuda failed"
fi

run_fadc 0 "$m" -o "$tmp/c.so" --target cuda --tasks vjp,hessian -D N=3 -D K=2
run_fadc 0 inspect "$tmp/c.so"
out_has "options target=cuda cuda_arch=sm_90 cpu=x86-64-v3 opt=2 compute=f32 defines=N=3,K=2 tasks=forward,vjp,hessian"
grep '^task vjp:' "$tmp/out" | grep -qF ", code cuda" || fail "vjp is not CUDA-only: $(grep '^task' "$tmp/out")"
grep '^task init.beta_value:' "$tmp/out" | grep -qF ", code cpu" || fail "initializers must be CPU code"
# A CUDA-only task on the CPU: refused, naming it.
run_fadc 1 run "$tmp/c.so" --task vjp --out "$tmp/no"
err_has "task 'vjp' has no CPU code (compiled with --target cuda"

# Both targets: the CPU code is the CPU artifact's, bit for bit.
run_fadc 0 "$m" -o "$tmp/both.so" --target cpu,cuda --tasks all -D N=3 -D K=2
run_fadc 0 "$m" -o "$tmp/both2.so" --target cuda,cpu --tasks all -D N=3 -D K=2 --no-cache
cmp "$tmp/both.so" "$tmp/both2.so" || fail "two cpu,cuda compilations differ"
run_fadc 0 "$m" -o "$tmp/cpu.so" --tasks all -D N=3 -D K=2
for t in vjp hvp hessian jacfwd; do
	run_fadc 0 run "$tmp/both.so" --task $t --out "$tmp/b/$t"
	run_fadc 0 run "$tmp/cpu.so" --task $t --out "$tmp/c/$t"
	run_fadc 0 compare-npy "$tmp/b/$t" "$tmp/c/$t" --rtol 0
done

# Another architecture's cubin; a bad one.
run_fadc 0 "$m" -o "$tmp/a80.so" --target cuda --cuda-arch sm_80 --tasks vjp
run_fadc 0 inspect "$tmp/a80.so"
out_has "cuda_arch=sm_80"
run_fadc 1 "$m" -o "$tmp/bad.so" --target cuda --cuda-arch sm_1
err_has "NVRTC_ERROR_INVALID_OPTION"
[ -e "$tmp/bad.so" ] && fail "a failed CUDA compilation wrote an artifact"

# The GPU check program: a device, or a skip with the reason.
BIN=${FADC_BIN_DIR:?}
"$BIN/gpu_check" "$tmp/both.so" >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ $rc -eq 77 ]; then
	err_has "FADC_ERR_DEVICE"
	echo "no CUDA device here: $(cat "$tmp/err")"
else
	[ $rc -eq 0 ] || { cat "$tmp/out" "$tmp/err" >&2; fail "gpu_check failed"; }
fi

# fadc-bench --gpu 0 without a device: one clear error, nothing run; --gpu
# -2 (auto) falls back to the CPU.
if [ $rc -eq 77 ]; then
	"${FADC_BENCH:?}" --gpu 0 --num-iters 0 --model-filter ppl_simple_reg --task-filter vjp \
		>"$tmp/out" 2>"$tmp/err" && fail "fadc-bench --gpu 0 ran without a device"
	err_has "fadc-bench: --gpu 0: no CUDA driver"
fi
