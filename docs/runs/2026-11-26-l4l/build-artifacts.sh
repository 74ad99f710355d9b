F=/work/l4l/bin/fadc
cd /work/main
for m in multiheadattn wav2letter resnet18 transformer deepspeech fcn_resnet detr; do
  s=$(date +%s)
  $F models/$m.ir -o /work/l4l/s2/$m.so --target cuda --tasks vjp,jvp 2>&1 | tail -3
  echo "$m strict rc=$? $(( $(date +%s) - s )) s"
  s=$(date +%s)
  $F models/$m.ir -o /work/l4l/t2/$m.so --target cuda --tasks vjp,jvp --allow-tf32 2>&1 | tail -3
  echo "$m tf32 rc=$? $(( $(date +%s) - s )) s"
done
echo done
