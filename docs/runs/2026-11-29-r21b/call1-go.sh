#!/usr/bin/env bash
# r21b's device call: the direct-loop convolutions' cuDNN candidates
# checked against the CPU code (each candidate forced), deepspeech vjp
# before (main) and after, the profile after, the peer (TF32 off).
set -u
here=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-/tmp/out}; mkdir -p "$out"
export FADC_REQUIRE_GPU=1 PYTHONUNBUFFERED=1
echo "== $(date -u +%FT%TZ) $(hostname)"; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,utilization.gpu --format=csv,noheader
echo "== gpu_check, each choice forced (0: the launches, 1: cuDNN)"
for how in 0 1; do
	for so in conv conv_direct conv_tf32 ds-zoo ds-mid-direct; do
		echo "-- $so FADC_CUDA_CHOICE=$how"
		FADC_CUDA_CHOICE=$how FADC_CUDA_CHOICE_LOG=1 timeout 60 "$here/bin/gpu_check" --time 5 --choices forced "$here/a/$so.so" >"$out/c-$so-$how.log" 2>&1; echo "rc=$?"
		grep -E "worst|passed|failed" "$out/c-$so-$how.log" | tail -3; grep FAIL "$out/c-$so-$how.log" | head -3
	done
done 2>&1 | tee "$out/check.log"
echo "== gpu_check scan-resident"
timeout 60 "$here/bin/gpu_check" --time 5 "$here/a/scan-resident.so" >"$out/c-scan.log" 2>&1; echo "rc=$?"; grep -E "worst|passed|failed" "$out/c-scan.log" | tail -3
echo "== bench"
for w in main r21b; do
	fb="$here/bin/fadc-bench"; [ $w = main ] && fb="$here/bin/fadc-bench-main"
	rm -rf /tmp/fgpu-$w; cp -r "$here/fgpu-$w" /tmp/fgpu-$w
	echo "-- fadc-bench $w"
	FADC_CUDA_CHOICE_LOG=1 timeout 100 "$fb" --gpu 0 --no-check --num-iters 10 --config /tmp/fgpu-$w/bench/bench.yaml \
		--artifacts /tmp/fgpu-$w/artifacts --model-filter deepspeech --task-filter vjp --output /tmp/b-$w.md >/tmp/b-$w.log 2>&1
	echo "rc=$?"; grep -iE "error|choice|cudnn" /tmp/b-$w.log | head -12; cat /tmp/b-$w.md
done 2>&1 | tee "$out/bench.log"
echo "== profile after"
for a in /tmp/fgpu-r21b/artifacts/deepspeech-*.cuda.so; do
	GPU_CHECK_TASKS=vjp FADC_CUDA_PROFILE=1 timeout 40 "$here/bin/gpu_check" --run-only 3 "$a" 2>&1 | head -n 30
done >"$out/profile.log" 2>&1
head -n 30 "$out/profile.log"
echo "== PyTorch seed deepspeech vjp, TF32 off"
cd "$here/peer"
python3 -c 'import torch; print("torch", torch.__version__, torch.cuda.get_device_name(0))'
timeout 100 python3 seed_tf32.py off --gpu 0 --num-iters 10 --model-filter deepspeech --task-filter vjp --output "$out/torch-ds.md" >"$out/torch-ds.log" 2>&1
echo "rc=$?"; grep -iE "error|Traceback" "$out/torch-ds.log" | tail -n 3; cat "$out/torch-ds.md"
echo "== end $(date -u +%FT%TZ)"
