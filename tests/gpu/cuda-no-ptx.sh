# RUN: bash %s
# One NVRTC compilation per task gives both images (docs/CUDA.md,
# "Compiling"): by default a task holds its cubin and its PTX; --no-ptx
# leaves the PTX out (inspect says so, the options line records
# no_ptx=1) and keeps the cubin, byte for byte; --no-ptx without CUDA
# code warns, without -o is a usage error.  That the PTX loads where the
# cubin does not is checked on the GPU (FADC_CUDA_FORCE_PTX=1,
# tests/gpu/device/run.sh).
source "$(dirname "$0")/../cli/common.bash"
m=$SRC/models/ppl_simple_reg.ir
if ! "$FADC" "$m" -o "$tmp/probe.so" --target cuda --tasks vjp 2>"$tmp/err"; then
	grep -qF "built without the CUDA toolkit" "$tmp/err" && { echo "no CUDA toolkit: skipped"; exit 77; }
	cat "$tmp/err" >&2
	fail "fadc --target cuda failed"
fi

run_fadc 0 "$m" -o "$tmp/ptx.so" --target cpu,cuda --tasks vjp,hvp -D N=3 -D K=2
run_fadc 0 inspect "$tmp/ptx.so"
cp "$tmp/out" "$tmp/ptx.txt"
grep -q "no_ptx" "$tmp/ptx.txt" && fail "a default artifact records no_ptx"
# forward, vjp, hvp: CUDA code each, with both images; init tasks none.
[ "$(grep -c '^  images: cubin [1-9][0-9]* bytes, PTX [1-9][0-9]* bytes$' "$tmp/ptx.txt")" = 3 ] ||
	{ cat "$tmp/ptx.txt" >&2; fail "expected 3 tasks with a cubin and PTX"; }

run_fadc 0 "$m" -o "$tmp/noptx.so" --target cpu,cuda --tasks vjp,hvp -D N=3 -D K=2 --no-ptx
run_fadc 0 inspect "$tmp/noptx.so"
cp "$tmp/out" "$tmp/noptx.txt"
out_has "options target=cpu,cuda cuda_arch=sm_90 no_ptx=1 cpu=x86-64-v3"
[ "$(grep -c '^  images: cubin [1-9][0-9]* bytes, no PTX (--no-ptx)$' "$tmp/noptx.txt")" = 3 ] ||
	{ cat "$tmp/noptx.txt" >&2; fail "expected 3 tasks with a cubin and no PTX"; }
grep -q "PTX [0-9]" "$tmp/noptx.txt" && fail "--no-ptx left PTX in"
# The same cubins (sizes here; the bytes in test_codegen_cuda), a smaller file.
sizes() { sed -n 's/^  images: cubin \([0-9]*\) bytes.*/\1/p' "$1"; }
[ "$(sizes "$tmp/ptx.txt")" = "$(sizes "$tmp/noptx.txt")" ] || fail "--no-ptx changed the cubins"
[ "$(stat -c %s "$tmp/noptx.so")" -lt "$(stat -c %s "$tmp/ptx.so")" ] || fail "--no-ptx is not smaller"
# Byte-identical recompiles with --no-ptx too.
run_fadc 0 "$m" -o "$tmp/noptx2.so" --target cpu,cuda --tasks vjp,hvp -D N=3 -D K=2 --no-ptx
cmp "$tmp/noptx.so" "$tmp/noptx2.so" || fail "two --no-ptx compilations differ"
# Its CPU code still runs.
run_fadc 0 run "$tmp/noptx.so" --task vjp --out "$tmp/r1"
run_fadc 0 run "$tmp/ptx.so" --task vjp --out "$tmp/r2"
run_fadc 0 compare-npy "$tmp/r1" "$tmp/r2" --rtol 0

# Misuse.
run_fadc 0 "$m" -o "$tmp/cpu.so" --tasks vjp -D N=3 -D K=2 --no-ptx
err_has "fadc: warning: --no-ptx has no effect without --target cuda"
run_fadc 2 "$m" --emit ir --no-ptx
err_has "--no-ptx needs -o FILE"
echo ok
