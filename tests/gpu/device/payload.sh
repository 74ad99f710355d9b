#!/usr/bin/env bash
# tests/gpu/device/payload.sh DEST -- everything a GPU machine needs to check and
# time fadc, built here: that machine has no LLVM (fadc cannot run there),
# so the artifacts are compiled here and only runtime-side programs travel.
#
#   DEST/bin/        gpu_check, cudagraph_check, fadc-bench (no LLVM: checked
#                    with ldd)
#   DEST/check/      cpu,cuda artifacts for gpu_check: both ppl models (every
#                    task, full size), multiheadattn at reduced and full size,
#                    transformer at reduced size, and floor.so (one kernel)
#   DEST/cg/         the CUDA-graph suite's artifacts (tests/gpu/cudagraph)
#   DEST/fgpu/       a bench tree (bench/bench.yaml, models/) and its
#                    --target cuda artifacts; fadc-bench finds artifacts by
#                    the model's absolute path, so DEST/fgpu must sit at
#                    /tmp/fgpu on both machines (run.sh copies it there)
#   DEST/peer/       the seed's functional_autograd_benchmark.py and the
#                    modules it imports (tests/gpu/device/peer)
#   DEST/run.sh      what the GPU machine runs (tests/gpu/device/run.sh)
#
# Usage: tests/gpu/device/payload.sh /work/main/.gpu [check]   (from the
# repository root, after building into build/); `check` leaves out the
# bench tree and the peer (only what `run.sh check` needs).
set -eu
dest=${1:?usage: payload.sh DEST}
root=$(cd "$(dirname "$0")/../../.." && pwd)
b=$root/build/bin
rm -rf "$dest"
mkdir -p "$dest/bin" "$dest/check" "$dest/peer"
only=${2:-}
cp "$b/gpu_check" "$b/cudagraph_check" "$b/fadc-bench" "$dest/bin/"
if ldd "$dest"/bin/* | grep -qi llvm; then
	echo "payload: a GPU program links LLVM" >&2
	exit 1
fi
fadc() { "$b/fadc" "$@"; }
fadc "$root/models/ppl_simple_reg.ir" -o "$dest/check/ppl_simple_reg.so" --target cpu,cuda --tasks all
fadc "$root/models/ppl_robust_reg.ir" -o "$dest/check/ppl_robust_reg.so" --target cpu,cuda --tasks all
fadc "$root/models/multiheadattn.ir" -o "$dest/check/multiheadattn.so" --target cpu,cuda \
	--tasks forward,vjp,jvp,vhp -D B=4 -D L=3 -D S=5
# Full size: too large to fuse; long reductions as one block per point.
fadc "$root/models/multiheadattn.ir" -o "$dest/check/multiheadattn_full.so" --target cpu,cuda \
	--tasks forward,vjp,jvp,vhp
fadc "$root/models/transformer.ir" -o "$dest/check/transformer.so" --target cpu,cuda \
	--tasks forward,vjp,jvp,vhp -D N=8 -D SEQ=4 -D E=16 -D NH=4 -D FF=16 -D MAXLEN=16
fadc "$root/tests/gpu/floor.ir" -o "$dest/check/floor.so" --target cpu,cuda --tasks forward
FADC=$b/fadc bash "$root/tests/gpu/cudagraph/cudagraph.sh" "$dest/cg"
cp "$root/tests/gpu/device/run.sh" "$dest/run.sh"
if [ "$only" = check ]; then
	du -sh "$dest"
	exit 0
fi
# The bench tree at /tmp/fgpu, its artifacts compiled for CUDA.
rm -rf /tmp/fgpu
mkdir -p /tmp/fgpu/bench
cp -r "$root/models" /tmp/fgpu/
cp "$root/bench/bench.yaml" /tmp/fgpu/bench/
"$b/fadc-bench" --gpu 0 --compile-only --run-slow-tasks --config /tmp/fgpu/bench/bench.yaml \
	--artifacts /tmp/fgpu/artifacts --model-filter ppl_simple_reg,ppl_robust_reg
"$b/fadc-bench" --gpu 0 --compile-only --config /tmp/fgpu/bench/bench.yaml \
	--artifacts /tmp/fgpu/artifacts --model-filter multiheadattn
cp -r /tmp/fgpu "$dest/fgpu"
cp "$root"/tests/gpu/device/peer/*.py "$root/bench/peers/jax_ppl.py" "$dest/peer/"
cp "$root/tests/gpu/device/run.sh" "$dest/run.sh"
du -sh "$dest"
