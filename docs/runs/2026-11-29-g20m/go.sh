#!/usr/bin/env bash
# h-g20m's device call (issue 20, targets 4 and 6): PyTorch's training step of fcn_resnet, detr
# and the transformer (eager, torch.compile default, reduce-overhead; TF32 as PyTorch's
# default: cuDNN TF32, matmuls fp32) through torch_compile_step.py --parallel-warmup (the cells
# compile at once, their timed steps run one at a time), and, once every cell is warm, under
# the same lock, fadc.sh: fadc's vjp of the same models, profiles, resnet18's TF32 drift.
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
	--models "${PT_MODELS:-transformer,fcn_resnet,detr}" --modes "${PT_MODES:-eager,default,reduce-overhead}" \
	--tf32 default --iters 20 --timeout 200 --deadline "${PT_DEADLINE:-330}" \
	--parallel-warmup --sync-dir "$S" --json "$out/compiled.json" >/tmp/compiled.log 2>&1) &
pt=$!
while [ ! -e "$S/go" ] && kill -0 $pt 2>/dev/null; do sleep 0.5; done
echo "== $(date -u +%FT%TZ) PyTorch cells warm; fadc under the lock; load: $(cut -d' ' -f1 /proc/loadavg)"
mkdir -p "$S"
flock "$S/lock" bash "$H/fadc.sh"
wait $pt
echo "== $(date -u +%FT%TZ) PyTorch's cells"
grep -v "^$" /tmp/compiled.log | tail -n 14
echo "== end $(date -u +%FT%TZ) load: $(cat /proc/loadavg)"
} 2>&1 | tee "$out/go.log"
