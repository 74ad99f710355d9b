#!/usr/bin/env bash
# h-g20m's payload (issue 20, targets 4 and 6): fcn_resnet's, detr's and the transformer's vjp
# at full size (--target cuda --allow-tf32: its GEMM records run strict with
# FADC_CUDA_GEMM_STRICT=1), resnet18's TF32 vjp at N=8, 64x64 with CPU code (gpu_check's
# drift question), the programs, the peer modules with bench/peers/torch_compile_step.py;
# go.sh runs it.  From the worktree's root, after building into build/:
#   bash docs/runs/2026-11-29-g20m/build.sh /work/main/.gpu-g20m
set -eu
dest=${1:?usage: build.sh DEST}
root=$(pwd)
b=$root/build/bin
rm -rf "$dest"
mkdir -p "$dest/bin/lib" "$dest/art" "$dest/peer"
cp "$b/fadc-bench" "$b/gpu_check" "$dest/bin/"
for l in $(ldd "$b/fadc-bench" | awk '/libprotobuf-c/ { print $3 }'); do cp -L "$l" "$dest/bin/lib/"; done
cp "$root"/tests/gpu/device/peer/*.py "$root/bench/peers/torch_compile_step.py" "$dest/peer/"
cp "$root/docs/runs/2026-11-29-g20m/go.sh" "$root/docs/runs/2026-11-29-g20m/fadc.sh" "$dest/"
git -C "$root" log -1 --format='%H %s' >"$dest/COMMIT"
git -C "$root" status --short --untracked-files=no >>"$dest/COMMIT"
f() { "$b/fadc" "$@" --no-ptx; }
if [ -n "${ART:-}" ]; then # ART=DIR: these artifacts, compiled by this build already
	cp "$ART"/{fcn_resnet,detr,transformer,r18s_tf32}.so "$dest/art/"
	du -sh "$dest"
	exit 0
fi
for m in fcn_resnet detr transformer; do
	f "$root/models/$m.ir" -o "$dest/art/$m.so" --target cuda --tasks vjp --allow-tf32
done
f "$root/models/resnet18.ir" -D N=8 -D H=64 -o "$dest/art/r18s_tf32.so" --target cpu,cuda \
	--tasks vjp --allow-tf32 --cpu x86-64-v3
du -sh "$dest"
