#!/usr/bin/env bash
# fadc's part of go.sh, run alone on the GPU (under go.sh's lock).
set -u
H=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-/tmp/out}
cfg=/tmp/g20m-bench.yaml
{
	echo "task_lists:"
	echo "  FAST_TASKS: &FAST_TASKS [vjp]"
	echo "  ALL_TASKS: &ALL_TASKS [vjp]"
	echo "models:"
	for m in fcn_resnet detr transformer; do
		printf '  %s:\n    source: %s\n    tasks: *FAST_TASKS\n' "$m" "$H/art/$m.so"
	done
	echo "slow: []"
	echo "rtol: 1.0e-4"
} >"$cfg"
fb() { # fb NAME [ENV...]: fadc-bench over the three vjp, its own choice cache
	local v=$1; shift
	echo "-- fadc-bench $v $* load: $(cut -d' ' -f1 /proc/loadavg)"
	env FADC_CACHE_DIR=/tmp/cache-$v "$@" timeout 150 "$H/bin/fadc-bench" --gpu 0 --num-iters 10 \
		--memory --no-check --config "$cfg" --task-filter vjp --output /tmp/fb-$v.md \
		--json "$out/fadc-$v.json" >/tmp/fb-$v.log 2>&1
	echo "rc=$?"; cat /tmp/fb-$v.md; grep -iE "error|fail" /tmp/fb-$v.log | head -5
}
fb tf32
fb gemmstrict FADC_CUDA_GEMM_STRICT=1
prof() { # prof MODEL LOG [ENV...]
	local m=$1 log=$2; shift 2
	echo "-- profile $m $*"
	env FADC_CACHE_DIR=/tmp/cache-prof-$m GPU_CHECK_TASKS=vjp FADC_CUDA_PROFILE=2 "$@" \
		timeout 120 "$H/bin/gpu_check" --run-only 3 "$H/art/$m.so" >"$out/$log" 2>&1
	echo "rc=$?"; grep -m1 -A14 "ms per run\|per run" "$out/$log" | head -n 16
}
prof fcn_resnet prof-fcn.log
prof detr prof-detr.log FADC_CUDA_GEMM_STRICT=1
prof transformer prof-tr.log FADC_CUDA_GEMM_STRICT=1
echo "-- resnet18 N=8 64x64 TF32 vjp against its CPU code (as compiled; then the same artifact in fp32 math)"
FADC_CACHE_DIR=/tmp/cache-r18 timeout 120 "$H/bin/gpu_check" --iters 2 --tol 1e-2 "$H/art/r18s_tf32.so" >/tmp/r18-tf32.log 2>&1
echo "rc=$?"; grep -cE "FAIL" /tmp/r18-tf32.log; grep -E "worst|passed|failed" /tmp/r18-tf32.log | tail -3
FADC_CACHE_DIR=/tmp/cache-r18s FADC_CUDA_GEMM_STRICT=1 FADC_CUDA_CONV_STRICT=1 timeout 120 \
	"$H/bin/gpu_check" --iters 2 --tol 1e-4 "$H/art/r18s_tf32.so" >/tmp/r18-strict.log 2>&1
echo "rc=$?"; grep -cE "FAIL" /tmp/r18-strict.log; grep -E "worst|passed|failed" /tmp/r18-strict.log | tail -3
grep -E "FAIL" /tmp/r18-tf32.log | sort -t' ' -k1 | head -n 8
echo "-- PyTorch resnet18 N=8 64x64: TF32 against fp32 (tf32_drift.py 8 64 3)"
(cd "$H/peer" && timeout 90 python3 -W ignore tf32_drift.py 8 64 3 2>&1 | tail -n 12)
