#!/usr/bin/env bash
# issue 19, call 7: the seed's peak memory per cell (seed_tf32.py's wrapped run_model), TF32 off
# and on, every large model's recommended tasks PyTorch runs, one process per model and task.
set -u
P=$(cd "$(dirname "$0")" && pwd)
R=${OUT:-/tmp/out}; mkdir -p "$R" /tmp/r7
s0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
cd "$P/peer"
export PYTHONUNBUFFERED=1
for tf in off on; do
  for mt in multiheadattn:vjp multiheadattn:jvp multiheadattn:vhp wav2letter:vjp wav2letter:jvp wav2letter:vhp \
            resnet18:vjp resnet18:jvp resnet18:vhp fcn_resnet:vjp fcn_resnet:jvp fcn_resnet:vhp \
            transformer:vjp detr:vjp deepspeech:vjp; do
    m=${mt%%:*}; k=${mt##*:}
    left=$(( ${DEADLINE:-400} - ($(date +%s) - s0) ))
    [ $left -lt 15 ] && { echo "seed $tf $m $k: skipped, $left s left"; continue; }
    timeout $(( left < 60 ? left - 5 : 60 )) python3 seed_tf32.py $tf --gpu 0 --num-iters 3 --model-filter $m \
      --task-filter $k --output /tmp/r7/seed-$tf-$m-$k.md >/tmp/r7/seed-$tf-$m-$k.log 2>&1
    echo "[$(( $(date +%s) - s0 )) s] tf32=$tf $m $k rc=$?: $(grep -h '^seed_tf32.py: peak' /tmp/r7/seed-$tf-$m-$k.log | sed 's/seed_tf32.py: peak //' | tr '\n' ';')"
    grep -hE "Consistency fail|^[A-Za-z]*Error" /tmp/r7/seed-$tf-$m-$k.log | tail -n 1
  done
done
tar cJf "$R/call7.tar.xz" -C /tmp r7
