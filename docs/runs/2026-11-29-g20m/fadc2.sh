#!/usr/bin/env bash
# fadc's part of go2.sh, alone on the GPU (under go2.sh's lock).
set -u
H=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-/tmp/out}
cfg=/tmp/g20m-bench2.yaml
{
	echo "task_lists:"
	echo "  FAST_TASKS: &FAST_TASKS [vjp]"
	echo "  ALL_TASKS: &ALL_TASKS [vjp]"
	echo "models:"
	printf '  fcn_before:\n    source: %s\n    tasks: *FAST_TASKS\n' "$H/art/fcn_resnet.so"
	printf '  fcn_after:\n    source: %s\n    tasks: *FAST_TASKS\n' "$H/art2/fcn_new.so"
	printf '  detr:\n    source: %s\n    tasks: *FAST_TASKS\n' "$H/art/detr.so"
	echo "slow: []"
	echo "rtol: 1.0e-4"
} >"$cfg"
fb() { # fb NAME [ENV...]
	local v=$1; shift
	echo "-- fadc-bench $v $* load: $(cut -d' ' -f1 /proc/loadavg)"
	env FADC_CACHE_DIR=/tmp/cache2-$v "$@" timeout 150 "$H/bin/fadc-bench" --gpu 0 --num-iters 10 \
		--memory --no-check --config "$cfg" --task-filter vjp --output /tmp/fb-$v.md \
		--json "$out/fadc2-$v.json" >/tmp/fb-$v.log 2>&1
	echo "rc=$?"; cat /tmp/fb-$v.md; grep -iE "error|fail" /tmp/fb-$v.log | head -5
}
fb default
fb tune12 FADC_CUDA_DNN_TUNE=12
echo "-- profile fcn_after (TF32), choices logged"
FADC_CACHE_DIR=/tmp/cache2-prof GPU_CHECK_TASKS=vjp FADC_CUDA_PROFILE=2 FADC_CUDA_CHOICE_LOG=1 \
	timeout 120 "$H/bin/gpu_check" --run-only 3 "$H/art2/fcn_new.so" >"$out/prof2-fcn.log" 2>&1
echo "rc=$?"; grep -m1 -A16 "ms per run" "$out/prof2-fcn.log"; grep -E "upsample" "$out/prof2-fcn.log" | head -4
echo "-- gpu_check fcn_resnet N=2 H=32 C=4 computing in f64 (tol 1e-6), every task, graphs on"
FADC_CACHE_DIR=/tmp/cache2-chk timeout 150 "$H/bin/gpu_check" --time 5 --tol 1e-6 "$H/art2/fcn_f64.so" >/tmp/chk.log 2>&1
echo "rc=$?"; grep -E "FAIL|worst|passed|failed" /tmp/chk.log | head -8
