#!/usr/bin/env bash
# issue 19, like for like, call 4: what calls 1-3 did not reach.
#  1. fadc-bench (runtime of fadc b542165, the artifacts of calls 2-3): vjp strict and TF32
#     with the consistency check (times, peak), then --no-check (the peak of vjp alone).
#  2. untimed, in parallel: torch.compile's missing cells compiled once (the default mode at
#     TF32 off/on for fcn_resnet, deepspeech, detr; max-autotune-no-cudagraphs for resnet18 at
#     TF32 on), filling inductor's on-disk caches; beside them the TF32 drift of PyTorch
#     (every model, tf32_drift.py --model) and of fadc's deepspeech (gpu_check).
#  3. timed, one at a time: those cells again (warm caches), and detr's eager step at TF32 on.
set -u
P=$(cd "$(dirname "$0")" && pwd)
R=${OUT:-/tmp/out}; mkdir -p "$R"
s0=$(date +%s)
t() { echo "[$(( $(date +%s) - s0 )) s] $*"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
nproc
echo "artifacts: fadc $(cat "$P/COMMIT"); runtime and fadc-bench: $(cat "$P/d4/COMMIT")"
mkdir -p /tmp/l4l && tar xJf "$P/art2.tar.xz" -C /tmp/l4l
cd "$P/peer"
export PYTHONUNBUFFERED=1
B=$P/d4/fadc-bench
t "1a. fadc-bench --gpu 0 --memory (vjp, strict and tf32, consistency checks on)"
timeout 150 "$B" --gpu 0 --num-iters 10 --memory --config "$P/l4l2.yaml" --artifacts /tmp/l4l/art \
  --output "$R/fadc.md" --json "$R/fadc.json" >"$R/fadc.log" 2>&1
echo "rc=$?"; grep -Ei "error|inconsistent|skipped" "$R/fadc.log" | head; cat "$R/fadc.md"
t "1b. fadc-bench --no-check --memory (vjp alone)"
timeout 100 "$B" --gpu 0 --num-iters 3 --no-check --memory --config "$P/l4l2.yaml" --artifacts /tmp/l4l/art \
  --output "$R/fadc-alone.md" --json "$R/fadc-alone.json" >"$R/fadc-alone.log" 2>&1
echo "rc=$?"; grep -Ei "error|skipped" "$R/fadc-alone.log" | head; cat "$R/fadc-alone.md"

t "2. warm the compiled cells (untimed, in parallel) and the drift checks"
w() { # name models modes tf32
  timeout 330 python3 torch_compile_step.py --models "$2" --modes "$3" --tf32 "$4" --warmup 1 --iters 1 \
    --timeout 320 --json "$R/warm-$1.json" >"$R/warm-$1.log" 2>&1 &
}
w fcn fcn_resnet default off,on
w ds deepspeech default off,on
w detr-off detr default off
w detr-on detr default on
w r18-ma resnet18 max-autotune-no-cudagraphs on
{
  GPU_CHECK_TASKS=vjp timeout 200 "$P/d4/gpu_check" --iters 3 --tol 10 "$P/d4/deepspeech.so" 2>&1 | tail -n 4
} >"$R/drift-fadc-deepspeech.log" 2>&1 &
timeout 330 python3 tf32_drift.py --model resnet18,transformer,wav2letter,multiheadattn,deepspeech,fcn_resnet,detr 2 \
  >"$R/drift-torch.log" 2>&1
echo "drift rc=$?"; cat "$R/drift-torch.log"
t "waiting for the warm-ups"
wait
t "warm-ups done"
cat "$R/drift-fadc-deepspeech.log"
grep -h -v "^|" "$R"/warm-*.log | grep -E "median|timeout|error|Error|fail" | head -20

left=$(( ${DEADLINE:-575} - ($(date +%s) - s0) ))
t "3. timed: the default mode, fcn_resnet deepspeech detr ($left s left)"
python3 torch_compile_step.py --models detr,fcn_resnet,deepspeech --modes default --tf32 off,on --iters 20 \
  --timeout 120 --deadline "$(( left - 70 ))" --json "$R/compiled-default.json" 2>&1 | tee "$R/compiled-default.log" | grep -v "^ *$" | grep -v "^|"
left=$(( ${DEADLINE:-575} - ($(date +%s) - s0) ))
t "3b. detr eager TF32 on, resnet18 max-autotune-no-cudagraphs TF32 on ($left s left)"
python3 torch_compile_step.py --models detr --modes eager --tf32 on --iters 20 \
  --timeout 40 --deadline "$(( left - 5 ))" --json "$R/compiled-detr-eager.json" 2>&1 | tee "$R/compiled-detr-eager.log" | grep -v "^ *$" | grep -v "^|"
left=$(( ${DEADLINE:-575} - ($(date +%s) - s0) ))
python3 torch_compile_step.py --models resnet18 --modes max-autotune-no-cudagraphs --tf32 on --iters 20 \
  --timeout 60 --deadline "$(( left - 5 ))" --json "$R/compiled-ma.json" 2>&1 | tee "$R/compiled-ma.log" | grep -v "^ *$" | grep -v "^|"
t end
