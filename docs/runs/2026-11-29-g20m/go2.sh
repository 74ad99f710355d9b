#!/usr/bin/env bash
# h-g20m's second device call: fcn_resnet's vjp before (art/fcn_resnet.so, call 1's) and after
# (art2/fcn_new.so: the upsampling's indices in int) in one fadc-bench process, the after
# artifact with more cuDNN engines timed (FADC_CUDA_DNN_TUNE=12), detr likewise; a profile with
# the choices logged; gpu_check of fcn_resnet at reduced size computing in f64 (1e-6); PyTorch's
# fcn_resnet training step (eager, default, reduce-overhead; TF32 default) in the same call.
set -u
H=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-/tmp/out}; mkdir -p "$out"
export PYTHONUNBUFFERED=1 FADC_REQUIRE_GPU=1
export LD_LIBRARY_PATH=$H/bin/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
S=/tmp/g20m-sync
rm -rf "$S"
{
echo "== $(date -u +%FT%TZ) $(nproc) cpus; load: $(cat /proc/loadavg)"
cat "$H/COMMIT"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,utilization.gpu,memory.used --format=csv,noheader
(cd "$H/peer" && TORCHINDUCTOR_COMPILE_THREADS=4 python3 -W ignore torch_compile_step.py \
	--models fcn_resnet --modes eager,default,reduce-overhead --tf32 default --iters 20 \
	--timeout 150 --deadline 200 --parallel-warmup --sync-dir "$S" --json "$out/compiled2.json" \
	>/tmp/compiled.log 2>&1) &
pt=$!
while [ ! -e "$S/go" ] && kill -0 $pt 2>/dev/null; do sleep 0.5; done
echo "== $(date -u +%FT%TZ) PyTorch cells warm; fadc under the lock; load: $(cut -d' ' -f1 /proc/loadavg)"
mkdir -p "$S"
flock "$S/lock" bash "$H/fadc2.sh"
wait $pt
echo "== $(date -u +%FT%TZ) PyTorch's cells"
grep -v "^$" /tmp/compiled.log | tail -n 6
echo "== end $(date -u +%FT%TZ) load: $(cat /proc/loadavg)"
} 2>&1 | tee "$out/go2.log"
