#!/usr/bin/env bash
# How r21b's payload was built (run from /work/h-r21b at 302605c; main's
# build at 70471f1 for "before"); peer/ is r21's (docs/runs/2026-11-29-r21/).
set -e
D=/work/main/.gpu-r21b
b=build/bin
mkdir -p $D/bin $D/a
cp /work/main/build/bin/fadc-bench $D/bin/fadc-bench-main
cp $b/fadc-bench $b/gpu_check $D/bin/
f() { $b/fadc "$@" --no-ptx; }
f tests/gpu/conv.ir -o $D/a/conv.so --target cpu,cuda --tasks forward,vjp,jvp,vhp
f tests/gpu/conv.ir -o $D/a/conv_tf32.so --target cpu,cuda --tasks forward,vjp,jvp,vhp --allow-tf32
FADC_CONV_COL_MAX=1 f tests/gpu/conv.ir -o $D/a/conv_direct.so --target cpu,cuda --tasks forward,vjp,jvp,vhp
f tests/gpu/scan-resident.ir -o $D/a/scan-resident.so --target cpu,cuda --tasks forward,vjp,jvp,vhp,hvp
f models/deepspeech.ir -o $D/a/ds-zoo.so --target cpu,cuda -D N=3 -D FREQ=9 -D FRAMES=16 -D LEN_LO=8 -D LEN_SPAN=8 -D C=2 -D HID=4 -D S=2
# deepspeech at N=10, HID=1024, 20 steps, every convolution kept as its
# direct loops (1 MB of columns at most), as the full-size second one is.
FADC_CONV_COL_MAX=1000000 f models/deepspeech.ir -o $D/a/ds-mid-direct.so --target cpu,cuda --tasks vjp -D FRAMES=40 -D LEN_LO=30 -D LEN_SPAN=10
for w in main r21b; do
	fb=$b/fadc-bench; [ $w = main ] && fb=/work/main/build/bin/fadc-bench
	rm -rf /tmp/fgpu-b-$w; mkdir -p /tmp/fgpu-b-$w/bench; cp -r models /tmp/fgpu-b-$w/; cp bench/bench.yaml /tmp/fgpu-b-$w/bench/
	$fb --gpu 0 --compile-only --no-check --config /tmp/fgpu-b-$w/bench/bench.yaml --artifacts /tmp/fgpu-b-$w/artifacts --model-filter deepspeech --task-filter vjp
	rm -rf $D/fgpu-$w; cp -r /tmp/fgpu-b-$w $D/fgpu-$w
done
