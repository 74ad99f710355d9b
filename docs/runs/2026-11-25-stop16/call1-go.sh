#!/usr/bin/env bash
# One device call (stop 16, call 1): correctness of the reduced zoo (main's
# payload and the residual-saving scans), eager profiles of the big models'
# vjp, deepspeech before/after residuals, then fadc-bench over the full zoo.
set -u
P=$(cd "$(dirname "$0")" && pwd)
R=${OUT:-/tmp/out}
L=/tmp/logs
mkdir -p "$R" "$L"
cd /tmp && for t in "$P"/*.tar.xz; do tar xJf "$t"; done
cd /tmp
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
s0=$(date +%s)
t() { echo "[$(( $(date +%s) - s0 )) s] $*"; }
t "zoo (main)"
OUT=$L bash /tmp/gpuc/run.sh zoo
t "new scan artifacts (residuals)"
timeout 240 /tmp/gpuc/bin/gpu_check --time 5 /tmp/new/zoo/*.so >"$L/check-new.log" 2>&1
echo "rc=$?"; grep -E "FAIL|worst|passed|failed" "$L/check-new.log" | tail -n 30
t "profiles"
cp -r /tmp/gpuf/fgpu /tmp/fgpu
OUT=$L PROF_MODELS="resnet18 deepspeech fcn_resnet transformer detr" bash /tmp/gpuf/run.sh profile >/dev/null 2>&1
grep -E "^-- profile|profile of task|^ +[0-9.]+% .*launches " "$L/profile.log" | head -n 120
t "deepspeech residuals: profile and replays"
for a in /tmp/fgpu/artifacts/deepspeech-*.cuda.so /tmp/new/full/deepspeech_res.so; do
	echo "-- $a"
	GPU_CHECK_TASKS=vjp FADC_CUDA_PROFILE=1 timeout 100 /tmp/gpuc/bin/gpu_check --run-only 3 "$a" 2>&1 | head -n 16
	for n in 2 12; do GPU_CHECK_TASKS=vjp timeout 100 /tmp/gpuc/bin/gpu_check --run-only $n "$a" 2>&1 | grep runs; done
done 2>&1 | tee "$L/ds-res.log"
t "full table (fadc)"
left=$(( 560 - ($(date +%s) - s0) ))
echo "left for the table: $left s"
OUT=$L FULL_ITERS=${FULL_ITERS:-5} FULL_TIMEOUT=110 PEER_MODELS=" " \
	FULL_MODELS="fcn_resnet detr resnet18 deepspeech transformer wav2letter multiheadattn" \
	timeout "$left" bash /tmp/gpuf/run.sh full >/dev/null 2>&1
grep -vE "^fadc-bench: (compil|load)" "$L/full-fadc.log" | head -n 150
t "end"
tar czf "$R/logs.tgz" -C /tmp logs
