#!/usr/bin/env bash
# stop 16, call 4: the split and residual artifacts checked (gpu_check), then
# fadc-bench over the TF32 artifacts and the new fp32 ones, PyTorch's resnet18
# again in the same call (the reference of the TF32 rows), profiles of the new
# fcn_resnet and deepspeech.
set -u
P=$(cd "$(dirname "$0")" && pwd)
R=${OUT:-/tmp/out}
L=/tmp/logs
mkdir -p "$R" "$L"
cd /tmp && for t in "$P"/*.tar.xz; do tar xJf "$t"; done
s0=$(date +%s)
t() { echo "[$(( $(date +%s) - s0 )) s] $*"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
G=/tmp/n2/bin
t "checks"
timeout 200 $G/gpu_check --time 20 /tmp/n2/check/*.so >"$L/check-n2.log" 2>&1
echo "rc=$?"; grep -E "FAIL|worst|passed|failed|us/call|us per" "$L/check-n2.log" | tail -n 30
t "fadc-bench (tf32, new fp32)"
timeout 330 $G/fadc-bench --gpu 0 --num-iters 5 --config "$P/tf32.yaml" --artifacts /tmp/n2art \
	--output "$L/n2.md" --json "$L/n2.json" >"$L/n2.log" 2>&1
echo "rc=$?"; grep -E "error|inconsistent" "$L/n2.log" | head; cat "$L/n2.md"
python3 -c 'import json, sys
for c in json.load(open(sys.argv[1]))["cells"]:
    print("consistency", c["model"], c["task"], c.get("consistency_error"), c.get("consistent"))' "$L/n2.json"
t "PyTorch"
cd /tmp/n2/peer
for mt in resnet18:vjp,vhp,jvp fcn_resnet:vjp,jvp detr:vjp deepspeech:vjp wav2letter:vjp,vhp,jvp; do
	m=${mt%%:*}; tk=${mt#*:}
	left=$(( 300 - ($(date +%s) - s0) ))
	[ $left -gt 25 ] || break
	echo "-- PyTorch $m $tk (left $left s)"
	PYTHONUNBUFFERED=1 timeout $(( left - 15 )) python3 functional_autograd_benchmark.py --gpu 0 --num-iters 5 \
		--model-filter $m --task-filter $tk --output "$L/torch-$m.md" >"$L/torch-$m.log" 2>&1
	echo "rc=$?"; cat "$L/torch-$m.md" 2>/dev/null
done
cd /tmp
t "profiles"
for a in /tmp/n2/fp32/fcn_resnet.so /tmp/n2/fp32/deepspeech.so /tmp/n2/tf32/resnet18.so; do
	echo "-- $a"
	GPU_CHECK_TASKS=vjp FADC_CUDA_PROFILE=1 timeout 60 $G/gpu_check --run-only 3 "$a" 2>&1 | head -n 14
done 2>&1 | tee "$L/prof-n2.log"
t "CPU: profiles at 1 and 16 threads (FADC_CPU_PROFILE=1), deepspeech with residuals"
C=$P/../build-gpu-cpu
rm -rf /tmp/fcpu && cp -r "$C/fcpu" /tmp/fcpu
for m in transformer resnet18; do
	for th in 1 16; do
		echo "-- $m vjp, $th threads"
		FADC_CPU_PROFILE=1 timeout $(( th == 1 ? 60 : 30 )) /tmp/n2/bin/fadc-bench --gpu -1 --num-threads $th --num-iters 2 \
			--config /tmp/fcpu/bench/bench.yaml --artifacts /tmp/fcpu/artifacts \
			--model-filter $m --task-filter vjp --output /tmp/cpu-$m-$th.md 2>&1 \
			| grep -E "fadc: CPU|^ +[0-9.]+% " | head -n 30
		cat /tmp/cpu-$m-$th.md
	done
done 2>&1 | tee "$L/cpu-prof.log" | grep -E "^--|fadc: CPU|vjp \|"
echo "-- deepspeech vjp, 16 threads: main's artifact, then with residuals"
left=$(( 575 - ($(date +%s) - s0) ))
timeout $(( left > 20 ? left : 20 )) /tmp/n2/bin/fadc-bench --gpu -1 --num-threads 16 --num-iters 2 --config "$P/ds.yaml" \
	--artifacts /tmp/n2art --output "$L/cpu-ds.md" >"$L/cpu-ds.log" 2>&1
echo "rc=$?"; grep -E "error|inconsistent" "$L/cpu-ds.log" | head -n 5; cat "$L/cpu-ds.md"
t "end"
tar czf "$R/logs.tgz" -C /tmp logs
