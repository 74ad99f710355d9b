#!/usr/bin/env bash
# h-s21b's device call (issue 21, the CPU cell): deepspeech vjp on the H200
# host's 16 threads, fadc before (main's artifact: the second convolution's
# forward and input gradient as direct loops) and after (h-s21b: tiles of
# output rows), 2 timed runs each after a warm-up, a CPU profile of the
# after artifact's warm-up, PyTorch CPU (1 iteration) in the same call;
# then tiles.ir (tiled convolutions, strict and TF32) on the GPU through
# gpu_check, each candidate of each convolution's choice forced.
set -u
H=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-/tmp/out}; mkdir -p "$out"
export PYTHONUNBUFFERED=1
# fadc-bench links libprotobuf-c (the ONNX importer), which the device lacks.
export LD_LIBRARY_PATH=$H/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
T=16
{
echo "== $(date -u +%FT%TZ) $(nproc) cpus; load: $(cat /proc/loadavg)"
lscpu | grep -E "Model name|L2|L3" | cut -c1-120
fb() { # fb VARIANT ITERS [ENV...]
	local v=$1 it=$2; shift 2
	rm -rf /tmp/fcpu && cp -r "$H/fcpu-$v" /tmp/fcpu
	echo "-- $v iters=$it $* load: $(cut -d' ' -f1 /proc/loadavg)"
	env "$@" timeout 100 "$H/bin/fadc-bench-$v" --gpu -1 --num-threads $T --num-iters $it --no-check \
		--config /tmp/fcpu/bench/bench.yaml --artifacts /tmp/fcpu/artifacts \
		--model-filter deepspeech --task-filter vjp --output /tmp/fb.md 2>/tmp/fb.err
	echo "rc=$?"; grep -v "^|--" /tmp/fb.md | tail -n 2; grep -E "error" /tmp/fb.err | head -3
}
fb s21b 2
fb main 1
echo "-- PyTorch CPU, $T threads, load: $(cut -d' ' -f1 /proc/loadavg)"
python3 -c 'import torch; print("torch", torch.__version__)'
(cd "$H/peer" && timeout 60 python3 -W ignore functional_autograd_benchmark.py --gpu -1 --num-threads $T \
	--num-iters 1 --model-filter deepspeech --task-filter vjp) >"$out/torch-cpu.log" 2>&1; echo "rc=$?"
grep -E "Results|Error|deepspeech" "$out/torch-cpu.log" | head
[ "${GPU:-1}" = 0 ] || {
echo "== GPU: tiled convolutions (tiles.ir, FADC_CONV_COL_MAX=5000), each candidate forced (0: the tiles' launches, 1: cuDNN), against the artifact's CPU code"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for so in tiles tiles_tf32; do for c in 0 1; do
	echo "-- $so FADC_CUDA_CHOICE=$c"
	FADC_CUDA_CHOICE=$c timeout 60 "$H/bin/gpu_check" --choices forced "$H/conv/$so.so" 2>&1 | tail -n 12
	echo "rc=${PIPESTATUS[0]}"
done; done
}
fb s21b 0 FADC_CPU_PROFILE=1; cp /tmp/fb.err "$out/prof-s21b.log"; head -n 24 "$out/prof-s21b.log"
echo "== end $(date -u +%FT%TZ) load: $(cat /proc/loadavg)"
} 2>&1 | tee "$out/go.log"
