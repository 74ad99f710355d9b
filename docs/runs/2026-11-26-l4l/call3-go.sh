#!/usr/bin/env bash
# issue 19, like for like, call 3: fadc-bench again (same artifacts and runtime as call 2),
# then torch.compile's training step for the cells calls 1 and 2 did not reach: detr at
# TF32 off and on (reduce-overhead, eager), then the default mode at TF32 off and on.
set -u
P=$(cd "$(dirname "$0")" && pwd)
R=${OUT:-/tmp/out}; mkdir -p "$R"
s0=$(date +%s)
t() { echo "[$(( $(date +%s) - s0 )) s] $*"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
echo "artifacts: fadc $(cat "$P/COMMIT"); runtime: $(cat "$P/RTCOMMIT")"
mkdir -p /tmp/l4l && tar xJf "$P/art2.tar.xz" -C /tmp/l4l
cd "$P/peer"
export PYTHONUNBUFFERED=1
t "fadc-bench --gpu 0 --memory (vjp, strict and tf32)"
timeout 120 "$P/bin/fadc-bench" --gpu 0 --num-iters 10 --memory --config "$P/l4l2.yaml" --artifacts /tmp/l4l/art \
  --output "$R/fadc.md" --json "$R/fadc.json" >"$R/fadc.log" 2>&1
echo "rc=$?"; grep -Ei "error|inconsistent|skipped" "$R/fadc.log" | head; cat "$R/fadc.md"
left=$(( ${DEADLINE:-440} - ($(date +%s) - s0) ))
t "torch_compile_step.py detr ($left s left)"
python3 torch_compile_step.py --models detr --modes reduce-overhead,eager --tf32 off,on --iters 20 \
  --timeout 150 --deadline "$(( left * 6 / 10 ))" --json "$R/compiled-detr.json" 2>&1 | tee "$R/compiled-detr.log" | grep -v "^ *$" | grep -v "^|"
left=$(( ${DEADLINE:-440} - ($(date +%s) - s0) ))
t "torch_compile_step.py default mode ($left s left)"
python3 torch_compile_step.py --models resnet18,transformer,fcn_resnet,deepspeech --modes default --tf32 off,on --iters 20 \
  --timeout 120 --deadline "$(( left - 10 ))" --json "$R/compiled-default.json" 2>&1 | tee "$R/compiled-default.log" | grep -v "^ *$" | grep -v "^|"
t end
