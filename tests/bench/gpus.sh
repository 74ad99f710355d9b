# RUN: bash %s
# fadc-bench --gpus (data-parallel cells, docs/MULTIGPU.md): its usage
# errors (exit 2, nothing run), and on a host without GPUs the runtime's
# error for the model, never a hang.  The speed-up and efficiency lines
# are measured on GPUs (docs/PERFORMANCE.md).
source "$(dirname "$0")/common.bash"
"$BENCH" --help | grep -q -- '--gpus LIST' || fail "--help lacks --gpus"
run_bench 2 --gpus x --output "$tmp/t.md"
err_has "--gpus: 'x' is not a list of GPU numbers such as 0,1"
run_bench 2 --gpus 0,1, --output "$tmp/t.md"
err_has "is not a list of GPU numbers"
run_bench 2 --gpus 0,1 --gpu 1 --output "$tmp/t.md"
err_has "--gpu 1 and --gpus: the first GPU of --gpus is the run's device"
run_bench 2 --gpus 0,1 --device-time --output "$tmp/t.md"
err_has "--device-time times one GPU's events: not with --gpus"
run_bench 2 --gpus 0 --backend interp --output "$tmp/t.md"
err_has "the interp backend runs on the CPU only"
[ ! -e "$tmp/t.md" ] || fail "a usage error wrote the table"
# --compile builds the artifact with the shard sizes too: the batch's `let`
# (B = 7 over two GPUs: 7, 4 and 3), under a key of its own.
cat > "$tmp/m.ir" <<'IR'
let B = 7
batch x: 0, loss mean
param w: f32[3, 2] = uniform(-1, 1, seed=1)
def forward(x: f32[B, 3]) -> f32[] {
  return mean(tanh(x @ w))
}
IR
printf 'task_lists:\n  ALL_TASKS: [vjp, jvp]\nmodels:\n  m:\n    source: m.ir\n    tasks: [vjp]\n' > "$tmp/c.yaml"
"$BENCH" --config "$tmp/c.yaml" --artifacts "$tmp/art" --gpus 0,1 --compile-only >"$tmp/out" 2>"$tmp/err"
rc=$?
if grep -q "built without the CUDA toolkit" "$tmp/err"; then
	echo "no CUDA toolkit: the shard sizes' compile is not checked"
elif [ $rc = 0 ]; then
	so=$(ls "$tmp"/art/m-*.cuda.so)
	"$(dirname "$BENCH")/fadc" inspect "$so" > "$tmp/inspect" || fail "inspect"
	grep -q "defines=B=7,4,3 .*batch=x:0 loss=mean" "$tmp/inspect" ||
		{ cat "$tmp/inspect" >&2; fail "the --gpus artifact lacks the shard sizes"; }
	"$BENCH" --config "$tmp/c.yaml" --artifacts "$tmp/art" --gpus 0,1 --compile-only >"$tmp/out" 2>"$tmp/err" ||
		fail "second --compile-only"
	! grep -q "compiling" "$tmp/err" || fail "the --gpus artifact was rebuilt"
else
	cat "$tmp/err" >&2
	fail "--gpus --compile-only: exit $rc"
fi
if [ -e /dev/nvidia0 ]; then
	echo "a GPU here: the GPU run is docs/PERFORMANCE.md's"
	exit 0
fi
# No GPU: the device cannot be opened, exit 1, said so.
run_bench 1 --gpus 0,1 --model-filter ppl_simple_reg --output "$tmp/t.md"
err_has "fadc-bench: --gpu 0:"
ran_nothing
