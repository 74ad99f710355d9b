set -e
D=/work/main/.gpu-r21
b=/work/h-r21/build/bin
f() { $b/fadc "$@" --no-ptx; }
for x in $D/ir/scan-*.ir; do f "$x" -o $D/a/$(basename $x .ir).so --target cpu,cuda --tasks all; done
f tests/gpu/scan-persist.ir -o $D/a/scan-persist.so --target cpu,cuda --tasks forward,vjp,jvp,vhp
f tests/gpu/scan-tile.ir -o $D/a/scan-tile.so --target cpu,cuda --tasks forward,vjp,jvp,vhp
f tests/gpu/scan-resident.ir -o $D/a/scan-resident.so --target cpu,cuda --tasks forward,vjp,jvp,vhp,hvp
FADC_CUDA_NO_STAGE=1 f tests/gpu/scan-resident.ir -o $D/a/scan-resident-nostage.so --target cpu,cuda --tasks forward,vjp,jvp,vhp,hvp
f models/deepspeech.ir -o $D/a/ds-zoo.so --target cpu,cuda -D N=3 -D FREQ=9 -D FRAMES=16 -D LEN_LO=8 -D LEN_SPAN=8 -D C=2 -D HID=4 -D S=2
f models/deepspeech.ir -o $D/a/ds-mid.so --target cpu,cuda --tasks vjp -D FRAMES=40 -D LEN_LO=30 -D LEN_SPAN=10
for w in r21 r21ns; do rm -rf /tmp/fgpu-$w; mkdir -p /tmp/fgpu-$w/bench; cp -r models /tmp/fgpu-$w/; cp bench/bench.yaml /tmp/fgpu-$w/bench/; done
$b/fadc-bench --gpu 0 --compile-only --no-check --config /tmp/fgpu-r21/bench/bench.yaml --artifacts /tmp/fgpu-r21/artifacts --model-filter deepspeech --task-filter vjp
FADC_CUDA_NO_STAGE=1 $b/fadc-bench --gpu 0 --compile-only --no-check --config /tmp/fgpu-r21ns/bench/bench.yaml --artifacts /tmp/fgpu-r21ns/artifacts --model-filter deepspeech --task-filter vjp
rm -rf $D/fgpu-r21 $D/fgpu-r21ns; cp -r /tmp/fgpu-r21 $D/; cp -r /tmp/fgpu-r21ns $D/
du -sh $D $D/*
echo BUILD-DONE
