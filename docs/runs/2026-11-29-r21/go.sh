#!/usr/bin/env bash
# r21's device call: resident tiles checked against the CPU code (with and
# without the dynamic shared memory), deepspeech vjp before/after, the peer.
set -u
here=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-/tmp/out}; mkdir -p "$out"
export FADC_REQUIRE_GPU=1 PYTHONUNBUFFERED=1
echo "== $(date -u +%FT%TZ) $(hostname)"; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,utilization.gpu --format=csv,noheader
step=${1:-all}
if [ "$step" = all ] || [ "$step" = check ]; then
echo "== gpu_check, resident tiles on (FADC_CUDA_PERSIST_LOG=1)"
FADC_CUDA_PERSIST_LOG=1 timeout 200 "$here/bin/gpu_check" --time 5 "$here"/a/*.so >"$out/check-on.log" 2>&1; echo "rc=$?"
grep -E "worst|passed|failed" "$out/check-on.log"; grep -c FAIL "$out/check-on.log"; grep FAIL "$out/check-on.log" | head -5; grep "dynamic shared" "$out/check-on.log" | sort | uniq -c | head -12
echo "== gpu_check, FADC_CUDA_NO_DSMEM=1 (the global-memory form of the same kernels)"
FADC_CUDA_NO_DSMEM=1 timeout 120 "$here/bin/gpu_check" --time 5 "$here/a/scan-resident.so" "$here/a/scan-resident-nostage.so" "$here/a/scan-tile.so" "$here/a/ds-mid.so" >"$out/check-off.log" 2>&1; echo "rc=$?"
grep -E "worst|passed|failed" "$out/check-off.log"; grep -c FAIL "$out/check-off.log"; grep FAIL "$out/check-off.log" | head -5
grep "us/call" "$out/check-on.log" | grep -E "^(deepspeech|scan-resident|scan-tile) " | head -20; grep "us/call" "$out/check-off.log" | head -20
fi
if [ "$step" = all ] || [ "$step" = bench ]; then
for w in r21m r21 r21ns r21; do
	rm -rf /tmp/fgpu-$w; cp -r "$here/fgpu-$w" /tmp/fgpu-$w
	fb="$here/bin/fadc-bench"; [ $w = r21m ] && fb="$here/bin/fadc-bench-main"
	echo "-- fadc-bench $w (main = r21m)"
	FADC_CUDA_PERSIST_LOG=1 timeout 120 "$fb" --gpu 0 --no-check --num-iters 10 --config /tmp/fgpu-$w/bench/bench.yaml \
		--artifacts /tmp/fgpu-$w/artifacts --model-filter deepspeech --task-filter vjp --output /tmp/b-$w.md >/tmp/b-$w.log 2>&1
	echo "rc=$?"; grep -E "error|dynamic shared" /tmp/b-$w.log | sort | uniq -c | head -4; cat /tmp/b-$w.md
done 2>&1 | tee "$out/bench.log"
echo "== profile after (FADC_CUDA_PROFILE=1, 3 runs of vjp)"
for a in /tmp/fgpu-r21/artifacts/deepspeech-*.cuda.so; do
	GPU_CHECK_TASKS=vjp FADC_CUDA_PROFILE=1 timeout 90 "$here/bin/gpu_check" --run-only 3 "$a" 2>&1 | head -n 45
done >"$out/profile.log" 2>&1
head -n 45 "$out/profile.log"
fi
if [ "$step" = all ] || [ "$step" = peer ]; then
echo "== PyTorch seed deepspeech vjp, TF32 off"
cd "$here/peer"
python3 -c 'import torch; print("torch", torch.__version__, torch.cuda.get_device_name(0))'
timeout 200 python3 seed_tf32.py off --gpu 0 --num-iters 10 --model-filter deepspeech --task-filter vjp --output "$out/torch-ds.md" >"$out/torch-ds.log" 2>&1
echo "rc=$?"; grep -iE "error|Traceback" "$out/torch-ds.log" | tail -n 3; cat "$out/torch-ds.md"
fi
echo "== end $(date -u +%FT%TZ)"
