#!/usr/bin/env bash
# issue 19, like for like, call 5: every large model x recommended task (vjp, jvp, vhp;
# deepspeech vjp), fadc strict and TF32 (fadc-bench --no-check --memory), then the seed's
# script (unedited, through seed_tf32.py) at TF32 off and on for the same cells.
set -u
P=$(cd "$(dirname "$0")" && pwd)
R=${OUT:-/tmp/out}; mkdir -p "$R" /tmp/r5
s0=$(date +%s)
t() { echo "[$(( $(date +%s) - s0 )) s] $*"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
echo "artifacts: fadc b542165 (build5.sh); fadc-bench: $(cat "$P/d4/COMMIT")"
mkdir -p /tmp/l4l5 && tar xJf "$P/a5.tar.xz" -C /tmp/l4l5
cd "$P/peer"
export PYTHONUNBUFFERED=1
t "fadc-bench --gpu 0 --no-check --memory --num-iters 10"
timeout 240 "$P/d4/fadc-bench" --gpu 0 --num-iters 10 --no-check --memory --config "$P/l4l5.yaml" \
  --artifacts /tmp/l4l5/art --output /tmp/r5/fadc.md --json /tmp/r5/fadc.json >/tmp/r5/fadc.log 2>&1
echo "rc=$?"; grep -Ei "error|skipped" /tmp/r5/fadc.log | head; cat /tmp/r5/fadc.md
for tf in off on; do
  for m in multiheadattn wav2letter transformer resnet18 deepspeech fcn_resnet detr; do
    left=$(( ${DEADLINE:-570} - ($(date +%s) - s0) ))
    [ $left -lt 20 ] && { echo "seed $tf $m: skipped, $left s left"; continue; }
    lim=$(( left < 120 ? left - 5 : 120 ))
    tasks=vjp,jvp,vhp; [ $m = deepspeech ] && tasks=vjp
    timeout $lim python3 seed_tf32.py $tf --gpu 0 --num-iters 10 --model-filter $m --task-filter $tasks \
      --output "/tmp/r5/seed-$tf-$m.md" >"/tmp/r5/seed-$tf-$m.log" 2>&1
    echo "[$(( $(date +%s) - s0 )) s] seed tf32=$tf $m rc=$?"; grep -iE "Traceback|Error" "/tmp/r5/seed-$tf-$m.log" | tail -n 2
    grep -E "^\| *$m" "/tmp/r5/seed-$tf-$m.md" 2>/dev/null
  done
done
t end
# At most 8 files come back: one tarball.
tar cJf "$R/call5.tar.xz" -C /tmp r5
