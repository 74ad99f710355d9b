#!/usr/bin/env bash
# s21's device call (issue 21): deepspeech's CPU vjp on 16 threads, fadc before
# (main's pool) and after (h-s21's pool) on one artifact, CPU profiles of both,
# PyTorch CPU beside them; then the GPU hvp profile.
set -u
H=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-/tmp/out}; mkdir -p "$out"
export PYTHONUNBUFFERED=1
T=16
{
echo "== $(date -u +%FT%TZ) $(nproc) cpus; load: $(cat /proc/loadavg)"
lscpu | grep -E "Model name|L2|L3|Flags" | cut -c1-120
rm -rf /tmp/fcpu && cp -r "$H/cpu/fcpu" /tmp/fcpu
fb() { # fb BIN ITERS [ENV...]
	local bin=$1 it=$2; shift 2
	echo "-- $(basename $bin) iters=$it $* load: $(cut -d' ' -f1 /proc/loadavg)"
	env "$@" timeout 120 "$H/cpu/bin/$bin" --gpu -1 --num-threads $T --num-iters $it --no-check \
		--config /tmp/fcpu/bench/bench.yaml --artifacts /tmp/fcpu/artifacts \
		--model-filter deepspeech --task-filter vjp --output /tmp/fb.md 2>/tmp/fb.err
	echo "rc=$?"; grep -v "^|--" /tmp/fb.md | tail -n 2; grep -E "error|profile" /tmp/fb.err | head -3
}
fb fadc-bench-main 1
fb fadc-bench 2
fb fadc-bench 1 FADC_POOL_SPIN_US=0
fb fadc-bench-main 0 FADC_CPU_PROFILE=1; cp /tmp/fb.err "$out/prof-main.log"
fb fadc-bench 0 FADC_CPU_PROFILE=1; cp /tmp/fb.err "$out/prof-s21.log"
head -n 16 "$out/prof-main.log"; head -n 16 "$out/prof-s21.log"
echo "-- PyTorch CPU, $T threads, load: $(cut -d' ' -f1 /proc/loadavg)"
python3 -c 'import torch; print("torch", torch.__version__, torch.__config__.parallel_info().splitlines()[:4])'
(cd "$H/cpu/peer" && timeout 100 python3 -W ignore functional_autograd_benchmark.py --gpu -1 --num-threads $T \
	--num-iters 1 --model-filter deepspeech --task-filter vjp) >"$out/torch-cpu.log" 2>&1; echo "rc=$?"
grep -E "Results|Error" "$out/torch-cpu.log" | head
echo "== GPU: deepspeech hvp and vjp profile (FADC_CUDA_PROFILE=1, FADC_CUDA_PERSIST_LOG=1)"
nvidia-smi --query-gpu=name,driver_version,utilization.gpu --format=csv,noheader
GPU_CHECK_TASKS=hvp,vjp FADC_CUDA_PROFILE=1 FADC_CUDA_PERSIST_LOG=1 timeout 120 "$H/gpu_check" --run-only 3 "$H/ds-gpu.so" >"$out/gpu-prof.log" 2>&1
echo "rc=$?"; head -c 5000 "$out/gpu-prof.log"
echo "== end $(date -u +%FT%TZ) load: $(cat /proc/loadavg)"
} 2>&1 | tee "$out/go.log"
