#!/usr/bin/env bash
# h-s21b's payload (issue 21, the CPU cell): deepspeech's full-size CPU
# artifact (tasks vjp, jvp as bench/zoo-cpu-payload.sh compiles them,
# --cpu x86-64-v3) built twice at /tmp/fcpu, by main's fadc-bench
# (/work/main/build, main 7f7b53d: the second convolution as direct loops)
# and by h-s21b's (tiles of output rows), into DEST/fcpu-main and
# DEST/fcpu-s21b; the peer modules for PyTorch beside them; go.sh runs it.
# From the worktree's root, after building into build/.
set -eu
dest=${1:?usage: build.sh DEST}
root=$(pwd)
rm -rf "$dest"
mkdir -p "$dest/bin" "$dest/peer"
cp "$root/build/bin/fadc-bench" "$dest/bin/fadc-bench-s21b"
cp /work/main/build/bin/fadc-bench "$dest/bin/fadc-bench-main"
cp "$root"/tests/gpu/device/peer/*.py "$dest/peer/"
cp "$root/docs/runs/2026-11-29-s21b/go.sh" "$dest/"
mkdir -p "$dest/lib"
cp -L /lib/x86_64-linux-gnu/libprotobuf-c.so.1 "$dest/lib/" # the device lacks it
for v in main s21b; do
	rm -rf /tmp/fcpu
	mkdir -p /tmp/fcpu/bench
	cp -r "$root/models" /tmp/fcpu/
	cp "$root/bench/bench.yaml" /tmp/fcpu/bench/
	fadc=$root/build/bin/fadc
	[ $v = main ] && fadc=/work/main/build/bin/fadc
	"$dest/bin/fadc-bench-$v" --fadc "$fadc" --gpu -1 --compile-only --config /tmp/fcpu/bench/bench.yaml \
		--artifacts /tmp/fcpu/artifacts --model-filter deepspeech
	cp -r /tmp/fcpu "$dest/fcpu-$v"
done
# tiles.ir (this folder) with its convolutions tiled, for gpu_check.
mkdir -p "$dest/conv"
cp "$root/build/bin/gpu_check" "$dest/bin/"
for tf in "" --allow-tf32; do
	FADC_CONV_COL_MAX=5000 "$root/build/bin/fadc" "$root/docs/runs/2026-11-29-s21b/tiles.ir" \
		-o "$dest/conv/tiles${tf:+_tf32}.so" --target cpu,cuda --tasks forward,vjp,jvp --no-ptx $tf
done
ls -la "$dest"/fcpu-*/artifacts "$dest/conv"
