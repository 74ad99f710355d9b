#!/usr/bin/env bash
# call 5's artifacts: every large model's recommended tasks (vjp, jvp, vhp; deepspeech vjp, jvp),
# strict (--target cuda) and --allow-tf32 (--target cpu,cuda: gpu_check's drift against its CPU code)
F=/tmp/fadc-b542165
cd /work/main
for m in resnet18 transformer multiheadattn wav2letter detr fcn_resnet deepspeech; do
  tasks=vjp,jvp,vhp; [ $m = deepspeech ] && tasks=vjp,jvp
  s=$(date +%s)
  /usr/bin/time -f "%e s %M KB" $F models/$m.ir -o .l4l/a5/t/$m.so --target cpu,cuda --tasks $tasks --allow-tf32 2>&1 | tail -2
  echo "$m tf32 rc=$? $(( $(date +%s) - s )) s"
  s=$(date +%s)
  /usr/bin/time -f "%e s %M KB" $F models/$m.ir -o .l4l/a5/s/$m.so --target cuda --tasks $tasks 2>&1 | tail -2
  echo "$m strict rc=$? $(( $(date +%s) - s )) s"
done
echo done
