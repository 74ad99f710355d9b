#!/usr/bin/env bash
# issue 19, like for like, call 2: fadc-bench (the current runtime, --memory) on vjp of the
# seven large models, strict and --allow-tf32 (artifacts of fadc 8d9922e), the seed's vjp,
# then torch.compile's training step: reduce-overhead and eager at TF32 off and on.
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
timeout 200 "$P/bin/fadc-bench" --gpu 0 --num-iters 10 --memory --config "$P/l4l2.yaml" --artifacts /tmp/l4l/art \
  --output "$R/fadc.md" --json "$R/fadc.json" >"$R/fadc.log" 2>&1
echo "rc=$?"; grep -Ei "error|inconsistent|skipped" "$R/fadc.log" | head; cat "$R/fadc.md"
t "the seed (functional_autograd_benchmark.py --task-filter vjp, PyTorch default TF32)"
for m in multiheadattn wav2letter resnet18 transformer deepspeech fcn_resnet detr; do
  timeout 60 python3 functional_autograd_benchmark.py --gpu 0 --num-iters 10 --model-filter $m \
    --task-filter vjp --output "/tmp/seed-$m.md" >"/tmp/seed-$m.log" 2>&1
  echo "rc=$? $m"; grep "| vjp" "/tmp/seed-$m.md"
done 2>&1 | tee "$R/seed.log"
left=$(( ${DEADLINE:-585} - ($(date +%s) - s0) ))
t "torch_compile_step.py ($left s left)"
python3 torch_compile_step.py --models "${COMPILED_MODELS:-transformer,deepspeech,resnet18,fcn_resnet,detr}" \
  --modes "${COMPILED_MODES:-reduce-overhead,eager}" --tf32 "${COMPILED_TF32:-off,on}" --iters 20 \
  --timeout 150 --deadline "$(( left - 10 ))" --json "$R/compiled.json" 2>&1 | tee "$R/compiled.log" | grep -v "^ *$" | grep -v skipped
t end
