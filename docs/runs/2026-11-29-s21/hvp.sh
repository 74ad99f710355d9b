#!/usr/bin/env bash
# s21's second device script (not run in its session: its device time was spent):
# scan fission on the GPU. 1) correctness of the new jvp/hvp/vhp loops against
# the artifacts' CPU code (scan-resident, deepspeech reduced); 2) deepspeech's
# vjp, jvp and hvp profile, main's artifact (ds-gpu.so: vjp,hvp) beside
# h-s21's (ds-gpu-s21.so: vjp,jvp,hvp), strict fp32.  About 90 s.
set -u
H=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-/tmp/out}; mkdir -p "$out"
{
echo "== $(date -u +%FT%TZ)"; nvidia-smi --query-gpu=name,driver_version,utilization.gpu --format=csv,noheader
FADC_REQUIRE_GPU=1 timeout 150 "$H/gpu_check" --time 5 "$H/a/scan-resident.so" "$H/a/ds-zoo.so" >"$out/check.log" 2>&1
echo "check rc=$?"; grep -E "worst|passed|failed" "$out/check.log" | tail -n 4; grep FAIL "$out/check.log" | head -5
for a in ds-gpu.so ds-gpu-s21.so; do
	echo "-- $a"
	GPU_CHECK_TASKS=vjp,jvp,hvp FADC_CUDA_PROFILE=1 FADC_CUDA_PERSIST_LOG=1 timeout 150 "$H/gpu_check" --run-only 3 "$H/$a" >"$out/prof-$a.log" 2>&1
	echo "rc=$?"; grep -E "profile of task|launches  loop|us/run" "$out/prof-$a.log"
done
echo "== end $(date -u +%FT%TZ)"
} 2>&1 | tee "$out/hvp.log"
