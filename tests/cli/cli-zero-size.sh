# RUN: bash %s
# Zero-size tensors are legal (docs/IR.md), as in PyTorch: a contraction
# over an empty axis gives zeros, a convolution with 0 output channels an
# empty output, and the derivatives of both are zeros.  Compiled code
# against the hand-derived values and against the interpreter (fadc check).
# Regressions of issue 18: the folded matmul (T, N, 0) @ (0, M) divided by
# K in the parser (SIGFPE), conv with 0 output channels aborted in the
# lowering (kx_idiv), multiheadattn -D E=0 did both.
source "$(dirname "$0")/common.bash"

cat >"$tmp/zs.ir" <<'IR'
param a: f32[2, 3, 0] = uniform(0, 1, seed=1)
param b: f32[0, 4] = uniform(0, 1, seed=2)
param c: f32[2, 0, 4] = uniform(0, 1, seed=3)
param x: f32[1, 2, 5, 5] = uniform(0, 1, seed=4)
param w: f32[0, 2, 3, 3] = uniform(0, 1, seed=5)
def forward() {
  y = conv2d(x, w, padding=1)
  return a @ b + 1 as folded, a @ c as batched, y as conv0, sum(y) + sum(a @ b) as total
}
IR
zeros='[[[0, 0, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0]], [[0, 0, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0]]]'
ones='[[[1, 1, 1, 1], [1, 1, 1, 1], [1, 1, 1, 1]], [[1, 1, 1, 1], [1, 1, 1, 1], [1, 1, 1, 1]]]'
for m in "$tmp/zs.ir" "$tmp/zs.so"; do
	[ "$m" = "$tmp/zs.so" ] && run_fadc 0 "$tmp/zs.ir" -o "$tmp/zs.so"
	run_fadc 0 run "$m" --print
	out_has "folded: f32[2, 3, 4] = $ones"
	out_has "batched: f32[2, 3, 4] = $zeros"
	out_has "conv0: f32[1, 0, 5, 5] = [[]]"
	out_has "total: f32[] = 0"
done

# The derivatives: every task of a scalar loss over the same values,
# compiled against the interpreter (the gradients of x and of the empty
# operands' partners are zeros).
cat >"$tmp/zl.ir" <<'IR'
param a: f32[2, 3, 0] = uniform(0, 1, seed=1)
param b: f32[0, 4] = uniform(0, 1, seed=2)
param x: f32[1, 2, 5, 5] = uniform(0, 1, seed=4)
param w: f32[0, 2, 3, 3] = uniform(0, 1, seed=5)
def forward() -> f32[] {
  return sum(conv2d(x, w, padding=1)) + sum(exp(a @ b)) + sum(x * x)
}
IR
run_fadc 0 check "$tmp/zl.ir" --tasks all --f64
out_has "largest normalized error"
run_fadc 0 run "$tmp/zl.ir" --task vjp --print
# sum(exp(0)) over 24 elements + sum(x^2); grad x = 2 x, grad a, b, w empty.
out_has "grad.w: f32[0, 2, 3, 3] = []"

# A shipped model with its embedding size 0: E = 0 makes every projection
# (0, 0) and every contraction empty; out = sum(w), the softmax weights,
# B NH L = 1920 rows that sum to 1 each (in f64: f32 sums of 21120 weights
# round at 1e-5).
model=$SRC/models/multiheadattn.ir
run_fadc 0 "$model" -D E=0 --emit ir
run_fadc 0 "$model" -D E=0 --emit ir --task vjp
run_fadc 0 "$model" -D E=0 -o "$tmp/mha.so"
run_fadc 0 run "$tmp/mha.so" --task vjp --print
out_has "grad.out_proj.weight: f32[0, 0] = []"
run_fadc 0 check "$model" -D E=0 --f64
run_fadc 0 run "$model" -D E=0 --print
out_has "out: f32[] = 1920"
exit 0
