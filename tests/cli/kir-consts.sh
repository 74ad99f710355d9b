# RUN: bash %s
# Float constants out of the kernels' text (codegen/kir_consts.c) and
# commutative operands in a structural order (codegen/kir.c, kx_shape):
# - two kernels that differ only in their constants (eps-like 0.001 and
#   0.0002, scales 0.3 and 0.7) share one function, on the CPU (LLVM) and
#   in CUDA C; with FADC_KIR_CONSTS=0 (the pass off) they do not, which is
#   what the test would see without the pass;
# - their values: the compiled f32 outputs against the float64 interpreter
#   (normalized error <= 1e-6), and bit for bit those of the pass off;
# - resnet18 (a small copy) with the stem's batch norm at eps=1e-3: every
#   CUDA kernel prints byte-identically but the constants' table kernel
#   (before: the changed kernels, a kernel no longer shared, and unrelated
#   kernels whose commutative operands swapped as node ids moved).
# The CUDA halves need only the toolkit (NVRTC), no GPU; without it they
# are skipped.
source "$(dirname "$0")/common.bash"
cat >"$tmp/m.ir" <<'IR'
const x: f32[256, 256] = uniform(0, 1, seed=1)
const y: f32[256, 256] = uniform(0, 1, seed=2)
const w: f32[256, 8] = uniform(0, 1, seed=3)

def forward() -> (f32[256, 8], f32[256, 8], f32[256, 256]) {
  a = sqrt(x + 0.001) * 0.3
  b = sqrt(y + 0.0002) * 0.7
  return a @ w, b @ w, b
}
IR
export FADC_CACHE_DIR=$tmp/cache

# The CPU: one elementwise function in forward, two with the pass off.
nfun() { grep -cE '^define internal void @forward\.k[0-9]+\.elementwise\(' "$1"; }
run_fadc 0 "$tmp/m.ir" -o "$tmp/m.so" --tasks vjp -O0 --emit llvm
cp "$tmp/out" "$tmp/on.ll"
FADC_KIR_CONSTS=0 run_fadc 0 "$tmp/m.ir" -o "$tmp/m0.so" --tasks vjp -O0 --emit llvm
[ "$(nfun "$tmp/on.ll")" = 1 ] || fail "the CPU code has $(nfun "$tmp/on.ll") elementwise functions, expected 1"
[ "$(nfun "$tmp/out")" = 2 ] || fail "with the pass off, $(nfun "$tmp/out") elementwise functions, expected 2"

# The values: against the interpreter, and bit for bit against the pass off.
run_fadc 0 run "$tmp/m.ir" --task forward --out "$tmp/ref"
run_fadc 0 run "$tmp/m.so" --task forward --out "$tmp/on"
run_fadc 0 run "$tmp/m0.so" --task forward --out "$tmp/off"
run_fadc 0 compare-npy "$tmp/ref" "$tmp/on" --rtol 1e-6
for f in "$tmp/off"/*.npy; do
	cmp -s "$f" "$tmp/on/$(basename "$f")" || fail "$(basename "$f") differs from the pass off's"
done

# CUDA C: one elementwise __global__ in forward, two with the pass off.
if ! "$FADC" "$tmp/m.ir" -o "$tmp/c.so" --target cuda --tasks vjp --emit cuda >"$tmp/on.cu" 2>"$tmp/err"; then
	grep -qF "built without the CUDA toolkit" "$tmp/err" && { echo "no CUDA toolkit: CUDA skipped"; exit 0; }
	cat "$tmp/err" >&2
	fail "compiling for CUDA failed"
fi
FADC_KIR_CONSTS=0 run_fadc 0 "$tmp/m.ir" -o "$tmp/c0.so" --target cuda --tasks vjp --emit cuda
ncu() { grep -cE '^fadc_forward_k[0-9]+_elementwise\(' "$1"; }
[ "$(ncu "$tmp/on.cu")" = 1 ] || fail "the CUDA code has $(ncu "$tmp/on.cu") elementwise functions, expected 1"
[ "$(ncu "$tmp/out")" = 2 ] || fail "with the pass off, $(ncu "$tmp/out") elementwise functions, expected 2"

# resnet18 with one eps changed: only the constants' kernels differ.
small=(-D N=2 -D H=32 -D C=4 -D NCLS=10)
mkdir "$tmp/e" # the same name: the programs' names are the model's
sed '/^  x = relu(batch_norm(x, bn1.weight, bn1.bias))$/s/bn1.bias)/bn1.bias, eps=1e-3)/' \
	"$SRC/models/resnet18.ir" >"$tmp/e/resnet18.ir"
cmp -s "$SRC/models/resnet18.ir" "$tmp/e/resnet18.ir" && fail "resnet18's stem batch norm was not found"
for v in a b; do
	model=$SRC/models/resnet18.ir
	[ $v = b ] && model=$tmp/e/resnet18.ir
	run_fadc 0 "$model" "${small[@]}" -o "$tmp/r$v.so" --target cuda --tasks vjp --emit cuda
	# Each program's text less the constants' table kernels (to the "}" that ends them).
	awk '/_kir_consts\(/ { skip = 1 } !skip { print } skip && /^}$/ { skip = 0 }' "$tmp/out" >"$tmp/r$v.cu"
	grep -q "_kir_consts(" "$tmp/out" || fail "resnet18 ($v) has no constants' kernel"
done
cmp "$tmp/ra.cu" "$tmp/rb.cu" || { diff "$tmp/ra.cu" "$tmp/rb.cu" | head -20 >&2; fail "resnet18's CUDA C differs beyond the constants' kernels"; }
echo "ok"
