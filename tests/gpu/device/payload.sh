#!/usr/bin/env bash
# tests/gpu/device/payload.sh DEST -- everything a GPU machine needs to check and
# time fadc, built here: that machine has no LLVM (fadc cannot run there),
# so the artifacts are compiled here and only runtime-side programs travel.
#
#   DEST/bin/        gpu_check, cudagraph_check, fadc-bench (no LLVM: checked
#                    with ldd)
#   DEST/check/      cpu,cuda artifacts for gpu_check: both ppl models (every
#                    task, full size), multiheadattn at reduced and full size,
#                    transformer at reduced size (and transformer_seg.so: its
#                    take_add as segments), floor.so (one kernel),
#                    scatter.so (take_add as segments),
#                    split.so (split sums), blockred.so (block reductions)
#                    and window4*.so (short window reductions, 4 points a thread)
#   DEST/mma/        mma.so (tests/gpu/mma.ir, compiled with FADC_CUDA_MMA=1: the
#                    3xTF32 GEMM kernels at awkward shapes, checked forced to each tile)
#   DEST/choice/     choice.so (tests/gpu/choice.ir: products whose candidates,
#                    printed kernel or cuBLAS GEMM, are timed on the GPU)
#   DEST/conv/       conv.so, conv_tf32.so and conv_direct.so (tests/gpu/conv.ir:
#                    convolutions whose candidates, their launches or cuDNN, are
#                    timed; conv_direct's launches are the direct loops),
#                    csum_tf32.so (tests/gpu/csum.ir: merged per-channel sums)
#                    and csum_multi*_tf32.so (tests/gpu/csum-multi.ir: sums
#                    side by side with their epilogues, split and not)
#   DEST/cg/         the CUDA-graph suite's artifacts (tests/gpu/cudagraph)
#   DEST/zoo/        cpu,cuda artifacts of all nine models at reduced sizes
#                    with their recommended tasks (tests/gpu/cuda-zoo.sh's
#                    sizes), the six scan modules of test_codegen_scan (every
#                    task), tests/gpu/scan-persist.ir, scan-tile.ir and scan-resident.ir (persistent loop
#                    kernels), tests/gpu/assign.ir (a host step; run.sh
#                    also gives it a NaN cost with --assign-nan) and
#                    tests/gpu/index.ir, index-scan.ir (run.sh binds them
#                    bad labels with --index)
#   DEST/fgpu/       a bench tree (bench/bench.yaml, models/) and its
#                    --target cuda artifacts; fadc-bench finds artifacts by
#                    the model's absolute path, so DEST/fgpu must sit at
#                    /tmp/fgpu on both machines (run.sh copies it there)
#   DEST/peer/       the seed's functional_autograd_benchmark.py and the
#                    modules it imports (tests/gpu/device/peer), and the
#                    compiled training-step peer (bench/peers/torch_compile_step.py)
#   DEST/run.sh      what the GPU machine runs (tests/gpu/device/run.sh)
#
# Usage: tests/gpu/device/payload.sh /work/main/.gpu [check|full]   (from
# the repository root, after building into build/); `check` leaves out the
# bench tree and the peer (only what `run.sh check` needs); `full` leaves out
# check/, zoo/ and cg/ and adds every model at full size to the bench tree
# (what `run.sh full` needs; NVRTC takes about half an hour on 2 cores).
set -eu
dest=${1:?usage: payload.sh DEST}
root=$(cd "$(dirname "$0")/../../.." && pwd)
b=${FADC_BIN:-$root/build/bin} # FADC_BIN: another build's bin/ (a snapshot)
rm -rf "$dest"
mkdir -p "$dest/bin" "$dest/check" "$dest/peer"
only=${2:-}
cp "$b/gpu_check" "$b/cudagraph_check" "$b/fadc-bench" "$dest/bin/"
cp "$root/bench/plot.py" "$dest/bin/" # fadc-bench compare --plot finds it beside itself
# fadc-bench reads .onnx sources (libprotobuf-c), which the GPU machine lacks:
# carried in bin/lib, which run.sh puts on LD_LIBRARY_PATH.
mkdir -p "$dest/bin/lib"
for l in $(ldd "$b/fadc-bench" | awk '/libprotobuf-c/ { print $3 }'); do cp -L "$l" "$dest/bin/lib/"; done
if ldd "$dest"/bin/* | grep -qi llvm; then
	echo "payload: a GPU program links LLVM" >&2
	exit 1
fi
# cuBLAS is dlopen'ed by the runtime when a task has GEMM records, never linked.
if ldd "$dest"/bin/* | grep -qi cublas; then
	echo "payload: a GPU program links cuBLAS" >&2
	exit 1
fi
# One CPU level (x86-64-v3): gpu_check compares with the artifact's CPU code,
# which one level serves, and two levels make the payload outgrow the device
# tool's 64 MiB carry (docs/STATUS.md, stop 23).
fadc() { "$b/fadc" "$@" --cpu x86-64-v3; }
if [ "$only" != full ]; then
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
# take_add as segments (tests/gpu/scatter.ir), and the reduced transformer's
# embedding gradient in that form too (FADC_SCATTER=segment: at that size
# the gather form is the one chosen).
FADC_SCATTER=segment fadc "$root/tests/gpu/scatter.ir" -o "$dest/check/scatter.so" --target cpu,cuda \
	--tasks forward
FADC_SCATTER=segment fadc "$root/models/transformer.ir" -o "$dest/check/transformer_seg.so" \
	--target cpu,cuda --tasks forward,vjp,jvp,vhp -D N=8 -D SEQ=4 -D E=16 -D NH=4 -D FF=16 -D MAXLEN=16
# Sums split over one and over two reduction variables (kir_split_reductions).
fadc "$root/tests/gpu/split.ir" -o "$dest/check/split.so" --target cpu,cuda --tasks forward,vjp,jvp,vhp
# Block reductions in every form (cuda_blockred_plan: rows, columns, split, float4s).
fadc "$root/tests/gpu/blockred.ir" -o "$dest/check/blockred.so" --target cpu,cuda \
	--tasks forward,vjp,jvp,vhp
# Short window reductions 4 points a thread (tests/gpu/window4.ir, cuda_vec4_red):
# lanes along w, and along channels (window4-nhwc.ir, TF32: a convolution's
# output channels-last; gpu_check's TF32 tolerance).
fadc "$root/tests/gpu/window4.ir" -o "$dest/check/window4.so" --target cpu,cuda --no-ptx
fadc "$root/tests/gpu/window4-nhwc.ir" -o "$dest/check/window4_nhwc_tf32.so" --target cpu,cuda \
	--no-ptx --allow-tf32
# cuBLAS GEMM records (tests/gpu/gemm.ir): fp32 semantics, and --allow-tf32
# (gpu_check gives a TF32 artifact a tolerance of 1e-2).
fadc "$root/tests/gpu/gemm.ir" -o "$dest/check/gemm.so" --target cpu,cuda \
	--tasks forward,vjp,jvp,vhp
fadc "$root/tests/gpu/gemm.ir" -o "$dest/check/gemm_tf32.so" --target cpu,cuda \
	--tasks forward,vjp,jvp,vhp --allow-tf32
# The 3xTF32 kernels of the f32 GEMM records (docs/CUDA.md, "Strict f32 GEMMs on tensor
# cores"): opt-in at compile time; run.sh checks them with every record forced to each tile.
mkdir -p "$dest/mma"
FADC_CUDA_MMA=1 fadc "$root/tests/gpu/mma.ir" -o "$dest/mma/mma.so" --target cpu,cuda
# cuDNN convolutions (tests/gpu/conv.ir: awkward shapes): each a choice of
# its launches or cuDNN; run.sh checks them with each candidate forced,
# strict and --allow-tf32, then timed.
mkdir -p "$dest/conv"
fadc "$root/tests/gpu/conv.ir" -o "$dest/conv/conv.so" --target cpu,cuda --tasks forward,vjp,jvp,vhp
fadc "$root/tests/gpu/conv.ir" -o "$dest/conv/conv_tf32.so" --target cpu,cuda \
	--tasks forward,vjp,jvp,vhp --allow-tf32
# Every convolution but the pointwise one kept as its direct loops
# (FADC_CONV_COL_MAX=1: no column buffer fits), each still a choice of
# them or cuDNN.
FADC_CONV_COL_MAX=1 fadc "$root/tests/gpu/conv.ir" -o "$dest/conv/conv_direct.so" --target cpu,cuda \
	--tasks forward,vjp,jvp,vhp
# Batch norm's statistics split by channel, the split taking the mean's sum
# (tests/gpu/csum.ir; codegen/kir_layout.c, csum_merges): channels-last is TF32 only.
fadc "$root/tests/gpu/csum.ir" -o "$dest/conv/csum_tf32.so" --target cpu,cuda \
	--tasks forward,vjp,jvp,vhp --allow-tf32 --no-ptx
# The splits' second kernels side by side with their elementwise epilogues
# (tests/gpu/csum-multi.ir; cuda_sched.c, cuda_multi_end; epilogues are
# opt-in: FADC_CUDA_MULTI_EPI=1 after groups, =_ALL after every sum), split
# and not.  blockred.so's column groups run the default (no epilogues).
FADC_CUDA_MULTI_EPI=1 fadc "$root/tests/gpu/csum-multi.ir" -o "$dest/conv/csum_multi_tf32.so" \
	--target cpu,cuda --tasks vjp,jvp --allow-tf32 --no-ptx
FADC_CUDA_NO_SPLIT=1 FADC_CUDA_MULTI_EPI_ALL=1 fadc "$root/tests/gpu/csum-multi.ir" \
	-o "$dest/conv/csum_multi_nosplit_tf32.so" --target cpu,cuda --tasks vjp,jvp --allow-tf32 --no-ptx
# Batch norm's statistics in one pass (tests/gpu/bn1pass.ir; kir_layout.c,
# bn_stats_one_pass): TF32, and strict f32 relaid channels-last
# (FADC_CUDA_NHWC=1), checked at 1e-3 (run.sh says why).
fadc "$root/tests/gpu/bn1pass.ir" -o "$dest/conv/bn1pass_tf32.so" --target cpu,cuda \
	--tasks vjp,jvp --allow-tf32 --no-ptx
FADC_CUDA_NHWC=1 fadc "$root/tests/gpu/bn1pass.ir" -o "$dest/conv/bn1pass_nhwc.so" \
	--target cpu,cuda --tasks vjp,jvp --no-ptx
# Choices between a printed kernel and a cuBLAS GEMM, decided on the GPU
# (tests/gpu/choice.ir): run.sh checks it forced to each candidate, timed
# and from the cache (gpu_check --choices).
mkdir -p "$dest/choice"
fadc "$root/tests/gpu/choice.ir" -o "$dest/choice/choice.so" --target cpu,cuda \
	--tasks forward,vjp,jvp
# The zoo at reduced sizes, the scans and the host step.
mkdir -p "$dest/zoo" "$dest/zoo-ir"
# Without the embedded PTX (--no-ptx; the GPU loads the sm_90 cubin; check/ppl_simple_reg.so,
# transformer.so and zoo/scan-persist.so keep theirs for the FADC_CUDA_FORCE_PTX run): with it the check payload passed the
# device's 64 MiB carry (76 MB at stop 21, detr_f64.so alone 22 MB).
z() { local n=$1; shift; fadc "$@" -o "$dest/zoo/$n.so" --target cpu,cuda --no-ptx; }
# The batch-norm nets computing in f64 (zoo64/, run.sh checks them within 1e-6): f32 batch
# norm over two tiny images is too ill-conditioned to compare two f32 codes at 1e-4.
z64() { local n=$1; shift; mkdir -p "$dest/zoo64"; fadc "$@" -o "$dest/zoo64/${n}_f64.so" --target cpu,cuda --f64 --no-ptx; }
z ppl_simple_reg "$root/models/ppl_simple_reg.ir"
z ppl_robust_reg "$root/models/ppl_robust_reg.ir"
z multiheadattn "$root/models/multiheadattn.ir" -D B=4 -D L=3 -D S=5
z transformer "$root/models/transformer.ir" -D N=8 -D SEQ=4 -D E=16 -D NH=4 -D FF=16 -D MAXLEN=16
z wav2letter "$root/models/wav2letter.ir" -D N=2 -D LIN=1000 -D C=8 -D CW=16
z deepspeech "$root/models/deepspeech.ir" -D N=3 -D FREQ=9 -D FRAMES=16 -D LEN_LO=8 \
	-D LEN_SPAN=8 -D C=2 -D HID=4 -D S=2
z64 detr "$root/models/detr.ir" -D IMG_H=64 -D IMG_W=96 -D WIDTH=4 -D D=16 -D NH=2 -D FF=32 \
	-D Q=6 -D NCLS=10 -D T0=3 -D T1=2
z64 resnet18 "$root/models/resnet18.ir" -D N=2 -D H=32 -D C=4 -D NCLS=10
z64 fcn_resnet "$root/models/fcn_resnet.ir" -D N=2 -D H=32 -D C=4
"$b/test_codegen_scan" --write "$dest/zoo-ir"
for f in "$dest"/zoo-ir/scan-*.ir; do
	z "$(basename "$f" .ir)" "$f" --tasks all
done
rm -rf "$dest/zoo-ir"
# With its PTX (not z's --no-ptx): run.sh's FADC_CUDA_FORCE_PTX step loads it.
fadc "$root/tests/gpu/scan-persist.ir" -o "$dest/zoo/scan-persist.so" --target cpu,cuda \
	--tasks forward,vjp,jvp,vhp
z scan-tile "$root/tests/gpu/scan-tile.ir" --tasks forward,vjp,jvp,vhp
z scan-resident "$root/tests/gpu/scan-resident.ir" --tasks forward,vjp,jvp,vhp,hvp
z assign "$root/tests/gpu/assign.ir" --tasks forward,vjp
# Indices that are data (gpu_check --index: FADC_ERR_INDEX on the GPU).
z index "$root/tests/gpu/index.ir" --tasks forward,vjp
z index-scan "$root/tests/gpu/index-scan.ir" --tasks forward,vjp,jvp
FADC=$b/fadc bash "$root/tests/gpu/cudagraph/cudagraph.sh" "$dest/cg"
fi
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
# The full step (run.sh full): every model at full size, its recommended
# tasks (and the partners of their consistency checks).
if [ "$only" = full ]; then
	"$b/fadc-bench" --gpu 0 --compile-only --config /tmp/fgpu/bench/bench.yaml \
		--artifacts /tmp/fgpu/artifacts \
		--model-filter multiheadattn,wav2letter,transformer,resnet18,deepspeech,fcn_resnet,detr
fi
# The CPU step (run.sh cpu): wav2letter at full size, resnet18 at N=4.
"$b/fadc-bench" --gpu -1 --compile-only --config /tmp/fgpu/bench/bench.yaml \
	--artifacts /tmp/fgpu/artifacts --model-filter wav2letter,resnet18 --task-filter vjp \
	-D resnet18:N=4
cp -r /tmp/fgpu "$dest/fgpu"
cp "$root"/tests/gpu/device/peer/*.py "$root/bench/peers/jax_ppl.py" \
	"$root/bench/peers/jax_wav2letter.py" "$root/bench/peers/torch_compile_step.py" "$dest/peer/"
cp "$root/tests/gpu/device/run.sh" "$dest/run.sh"
du -sh "$dest"
