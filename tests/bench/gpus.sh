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
if [ -e /dev/nvidia0 ]; then
	echo "a GPU here: the GPU run is docs/PERFORMANCE.md's"
	exit 0
fi
# No GPU: the device cannot be opened, exit 1, said so.
run_bench 1 --gpus 0,1 --model-filter ppl_simple_reg --output "$tmp/t.md"
err_has "fadc-bench: --gpu 0:"
ran_nothing
