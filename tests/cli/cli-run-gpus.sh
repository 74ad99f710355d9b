# RUN: bash %s
# fadc run --gpus (docs/MULTIGPU.md): its usage errors, and on a host
# without a GPU the runtime's error, never a crash or a hang.  The runs
# themselves are checked on GPUs by tests/gpu/multi.sh.
source "$(dirname "$0")/common.bash"
cat > "$tmp/m.ir" <<'IR'
let B = 4
batch x: 0, loss mean
param w: f32[3, 2] = uniform(-1, 1, seed=1)
def forward(x: f32[B, 3]) -> f32[] {
  return mean(tanh(x @ w))
}
IR
run_fadc 2 run "$tmp/m.ir" --task vjp --gpus 0 --print
err_has "--gpus needs a compiled model (MODEL.so)"
run_fadc 2 run "$tmp/m.ir" --task vjp --gpus 0,x --print
err_has "--gpus: '0,x' is not a list of GPU numbers such as 0,1"
run_fadc 2 run "$tmp/m.ir" --task vjp --gpus= --print
run_fadc 2 run "$tmp/m.ir" --task vjp --gpus 0,,1 --print
run_fadc 0 "$tmp/m.ir" -o "$tmp/m.so" --tasks vjp -D B=4,2
# The batch declaration travels in the artifact's options line.
run_fadc 0 inspect "$tmp/m.so"
out_has "batch=x:0 loss=mean"
if [ -e /dev/nvidia0 ]; then
	echo "a GPU: the device run is tests/gpu/multi.sh's"
	exit 0
fi
# No GPU here: a clear error (NCCL's absence or the driver's), exit 1.
run_fadc 1 run "$tmp/m.so" --task vjp --gpus 0,1 --print
err_has "cannot create a runtime context"
run_fadc 1 run "$tmp/m.so" --task vjp --gpus 0,0 --print
err_has "GPU 0 is listed twice"
