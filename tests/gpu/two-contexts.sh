# RUN: bash %s
# Two ordinary CUDA contexts, one per GPU (GPUs 0 and 1; 0 and 0 where the
# machine has one), driven from one thread with their calls interleaved
# (tests/gpu/two_ctx.c): every output equal to the artifact's CPU code
# within 1e-4.  Skipped (77) where there is no CUDA device.
source "$(dirname "$0")/../cli/common.bash"
cat > "$tmp/m.ir" <<'IR'
param w: f32[6, 8] = uniform(-0.5, 0.5, seed=1)
param b: f32[8] = uniform(-0.1, 0.1, seed=3)
def forward(x: f32[5, 6]) -> f32[] {
  return mean(tanh(x @ w + b) ** 2)
}
IR
if ! "$FADC" "$tmp/m.ir" -o "$tmp/m.so" --target cpu,cuda --tasks vjp,hessian 2>"$tmp/err"; then
	grep -qF "built without the CUDA toolkit" "$tmp/err" && { echo "no CUDA toolkit: skipped"; exit 77; }
	cat "$tmp/err" >&2
	fail "fadc --target cpu,cuda failed"
fi
check=${FADC_BIN_DIR:?}/two_ctx
"$check" "$tmp/m.so" vjp,hessian 0 1
rc=$?
if [ $rc = 77 ]; then
	"$check" "$tmp/m.so" vjp,hessian 0 0
	rc=$?
fi
[ $rc = 77 ] && { echo "no GPU: skipped"; exit 77; }
[ $rc = 0 ] || fail "two_ctx exited $rc"
