#!/usr/bin/env bash
# issue 19, like for like, call 6: call 5's cells again with fadc-bench at main (it takes the
# cpu,cuda TF32 artifacts now), strict and TF32; the seed task by task where call 5's whole-model
# run stopped at its first failure (transformer, detr; resnet18 and fcn_resnet at TF32 on);
# the TF32 drift of fadc (gpu_check, every model's vjp against its fp32 CPU code) and of
# PyTorch (tf32_drift.py --model, every model) in the same call.
set -u
P=$(cd "$(dirname "$0")" && pwd)
R=${OUT:-/tmp/out}; mkdir -p "$R" /tmp/r6
s0=$(date +%s)
t() { echo "[$(( $(date +%s) - s0 )) s] $*"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
echo "artifacts: fadc b542165 (build5.sh); fadc-bench, gpu_check: $(cat "$P/d6/COMMIT")"
mkdir -p /tmp/l4l5 && tar xJf "$P/a5.tar.xz" -C /tmp/l4l5
cd "$P/peer"
export PYTHONUNBUFFERED=1
t "fadc-bench --gpu 0 --no-check --memory --num-iters 10"
timeout 200 "$P/d6/fadc-bench" --gpu 0 --num-iters 10 --no-check --memory --config "$P/l4l5.yaml" \
  --artifacts /tmp/l4l5/art --output /tmp/r6/fadc.md --json /tmp/r6/fadc.json >/tmp/r6/fadc.log 2>&1
echo "rc=$?"; grep -Ei "error|skipped" /tmp/r6/fadc.log | head; cat /tmp/r6/fadc.md
t "drift: gpu_check --tol 10 (vjp of each TF32 artifact against its fp32 CPU code)"
for m in multiheadattn wav2letter transformer resnet18 deepspeech fcn_resnet detr; do
  GPU_CHECK_TASKS=vjp timeout 90 "$P/d6/gpu_check" --iters 2 --tol 10 /tmp/l4l5/a5/t/$m.so 2>&1 | grep -E "worst|error|FAIL" | head -n 3
done 2>&1 | tee /tmp/r6/drift-fadc.log
t "drift: tf32_drift.py --model (PyTorch, 2 draws)"
timeout 120 python3 tf32_drift.py --model multiheadattn,wav2letter,transformer,resnet18,deepspeech,fcn_resnet,detr 2 2>&1 |
  grep -v Warning | grep -v "self.encoder" | tee /tmp/r6/drift-torch.log
run_seed() { # tf32 model task
  left=$(( ${DEADLINE:-570} - ($(date +%s) - s0) ))
  [ $left -lt 15 ] && { echo "seed $1 $2 $3: skipped, $left s left"; return; }
  lim=$(( left < 60 ? left - 5 : 60 ))
  timeout $lim python3 seed_tf32.py $1 --gpu 0 --num-iters 10 --model-filter $2 --task-filter $3 \
    --output "/tmp/r6/seed-$1-$2-$3.md" >"/tmp/r6/seed-$1-$2-$3.log" 2>&1
  echo "[$(( $(date +%s) - s0 )) s] seed tf32=$1 $2 $3 rc=$?"
  grep -iE "^[A-Za-z]*Error|Consistency fail|Failed model" "/tmp/r6/seed-$1-$2-$3.log" | tail -n 2
  grep -E "^\| *$2" "/tmp/r6/seed-$1-$2-$3.md" 2>/dev/null
}
for tf in off on; do for m in transformer detr; do for k in vjp jvp vhp; do run_seed $tf $m $k; done; done; done
for m in resnet18 fcn_resnet; do for k in vjp jvp vhp; do run_seed on $m $k; done; done
t end
tar cJf "$R/call6.tar.xz" -C /tmp r6
