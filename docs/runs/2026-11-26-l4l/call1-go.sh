#!/usr/bin/env bash
# issue 19, like for like: STEP=1: drift checks, fadc-bench, the seed, torch.compile
# (COMPILED_TF32, COMPILED_MODELS); STEP=2: torch.compile only.
set -u
P=$(cd "$(dirname "$0")" && pwd)
R=${OUT:-/tmp/out}; mkdir -p "$R"
s0=$(date +%s)
t() { echo "[$(( $(date +%s) - s0 )) s] $*"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
echo "fadc commit $(cat "$P/COMMIT")"
if [ ! -d /tmp/l4l ]; then mkdir -p /tmp/l4l && tar xJf "$P/art.tar.xz" -C /tmp/l4l; fi
cd "$P/peer"
export PYTHONUNBUFFERED=1
if [ "${STEP:-1}" = 1 ]; then
  t "gpu_check: fadc --allow-tf32 against its own CPU fp32 code (vjp)"
  for m in multiheadattn wav2letter resnet18 transformer deepspeech fcn_resnet detr; do
    GPU_CHECK_TASKS=vjp timeout 90 /tmp/l4l/bin/gpu_check --time 3 /tmp/l4l/tf32/$m.so 2>&1 | grep -Ei "worst|error|fail|pass|vjp" | head -n 6
  done 2>&1 | tee "$R/drift-fadc.log"
  t "tf32_drift.py (PyTorch, resnet18 8x128)"
  timeout 90 python3 tf32_drift.py 8 128 3 2>&1 | tail -n 12 | tee "$R/drift-torch.log"
  t "fadc-bench --gpu 0 (vjp, strict and tf32)"
  timeout 200 /tmp/l4l/bin/fadc-bench --gpu 0 --num-iters 10 --config "$P/l4l.yaml" --artifacts /tmp/l4l/art \
    --output "$R/fadc.md" --json "$R/fadc.json" >"$R/fadc.log" 2>&1
  echo "rc=$?"; grep -Ei "error|inconsistent" "$R/fadc.log" | head; cat "$R/fadc.md"
  t "the seed (functional_autograd_benchmark.py --task-filter vjp, PyTorch default TF32)"
  for m in multiheadattn wav2letter resnet18 transformer deepspeech fcn_resnet detr; do
    timeout 60 python3 functional_autograd_benchmark.py --gpu 0 --num-iters 10 --model-filter $m \
      --task-filter vjp --output "/tmp/seed-$m.md" >"/tmp/seed-$m.log" 2>&1
    echo "rc=$? $m"; grep -iE "Traceback|Error" "/tmp/seed-$m.log" | tail -n 2; grep vjp "/tmp/seed-$m.md"
  done 2>&1 | tee "$R/seed.log"
fi
left=$(( ${DEADLINE:-585} - ($(date +%s) - s0) ))
t "torch_compile_step.py ($left s left)"
python3 torch_compile_step.py --models "${COMPILED_MODELS:-multiheadattn,wav2letter,resnet18,transformer,deepspeech,fcn_resnet,detr}" \
  --modes "${COMPILED_MODES:-eager,default,reduce-overhead}" --tf32 "${COMPILED_TF32:-off,on}" --iters 20 \
  --timeout 150 --deadline "$(( left - 10 ))" --json "$R/compiled.json" 2>&1 | tee "$R/compiled.log" | grep -v "^ *$"
t end
