#!/usr/bin/env bash
# bench/gemm-bench.sh -- the CPU GEMM alone (codegen/llvm_gemm.c), timed
# against the FMA-throughput peak of the same cores and against a BLAS
# (Debian's OpenBLAS: apt-get install libopenblas-dev) in the same run
# (issue 26).  For each shape it writes a model of one product of two
# parameters, compiles it with fadc, and runs bench/gemm/gemm-bench.c on
# it (which see for what is timed and how).
#
#   bench/gemm-bench.sh [-t 1,2] [--cpu x86-64-v3] [--dtype f32] [--set big|zoo|few|smoke|all]
#                       [--shape "BATCH M N K TA TB [BOP]"]...
#                       [--fadc PATH] [--blas LIB] [--out DIR] [--compile-only]
#   bench/gemm-bench.sh --run DIR [-t 1,16] [--blas LIB] [--peers]
#
# --compile-only leaves the artifacts, the harness and the list of shapes
# in DIR (--out) for a machine without LLVM (the GPU host: build with
# --cpu x86-64-v4 for its AVX-512 cores); --run DIR times them there, and
# --peers also times the same shapes through PyTorch and numpy
# (bench/gemm-peers.py) in the same run.
#
# Shapes (BATCH M N K TA TB [BOP]; TA: A stored K x M and used transposed,
# TB likewise for B; BOP: the operand with the batch, b (default) or a):
#   big: square 512, 1024 and 2048 (the >= 70% of peak target);
#   zoo: the largest GEMMs of the zoo's vjp at full size (the kernel IR of
#        `fadc models/M.ir --tasks vjp --emit kir`): resnet18's conv GEMMs
#        (per sample: M = C_out, N = H W, K = C_in 9; the batch of 32 cut
#        to 4), its weight and input gradients, transformer's linear
#        layers (8192 tokens, 720 wide, 2048 feed-forward) and their weight
#        gradients (A transposed), its attention products (64 x 60 per
#        head, batch of heads cut to 256), wav2letter's transposed-layout
#        conv GEMMs (2 or 3 rows per sample, the batch of 10 in A, the
#        weights shared).
#   few: the zoo's last two (few rows); smoke: two small ones (the test).
# --shape (repeatable) times the shapes given instead of a set.
# Output: one line per shape and thread count (gemm-bench.c), on stdout.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
threads=1,2
cpu=x86-64-v3
dtype=f32
set=all
fadc=$root/build/bin/fadc
blas=libopenblas.so.0
out=
compile_only=
run=
peers=
given=()
while [ $# -gt 0 ]; do
	case $1 in
	-t) threads=$2; shift 2 ;;
	--cpu) cpu=$2; shift 2 ;;
	--dtype) dtype=$2; shift 2 ;;
	--set) set=$2; shift 2 ;;
	--shape) set=given; given+=("$2"); shift 2 ;;
	--fadc) fadc=$2; shift 2 ;;
	--blas) blas=$2; shift 2 ;;
	--out) out=$2; shift 2 ;;
	--compile-only) compile_only=1; shift ;;
	--run) run=$2; shift 2 ;;
	--peers) peers=1; shift ;;
	*) echo "gemm-bench.sh: unknown argument $1" >&2; exit 2 ;;
	esac
done
# Debian's OpenBLAS 0.3.21 takes Sapphire/Emerald Rapids for "Prescott"
# (SSE3 kernels): name its best kernels for the CPU asked, unless the
# caller did (gemm-bench.c prints the kernel set in use).
if [ -z "${OPENBLAS_CORETYPE:-}" ]; then
	case $cpu in
	x86-64-v4|native) export OPENBLAS_CORETYPE=SkylakeX ;;
	*) export OPENBLAS_CORETYPE=Haswell ;;
	esac
fi
build=$(dirname "$(dirname "$fadc")")
if [ -n "$run" ]; then
	# Time what --compile-only left in $run.
	while read -r name B M N K TA TB BOP dt; do
		"$run/gemm-bench" "$run/$name.so" "$dt" "$B" "$M" "$N" "$K" "$TA" "$TB" "$BOP" "$threads" "$blas"
	done <"$run/shapes.txt"
	if [ -n "$peers" ]; then
		args=()
		while read -r name B M N K TA TB BOP dt; do args+=("$B $M $N $K $TA $TB $BOP"); done <"$run/shapes.txt"
		python3 "$root/bench/gemm-peers.py" -t "$threads" --dtype "$(awk 'NR==1{print $9}' "$run/shapes.txt")" \
			"${args[@]}"
	fi
	exit 0
fi
work=${out:-$(mktemp -d)}
mkdir -p "$work"
: >"$work/shapes.txt"
# The harness links the runtime's static library (build/lib/libfadc.a).
cc -O3 -std=gnu11 -I"$root/include" "$root/bench/gemm/gemm-bench.c" "$build/lib/libfadc.a" \
	-ldl -lpthread -lm -o "$work/gemm-bench"

big=(
	"1 512 512 512 0 0"
	"1 1024 1024 1024 0 0"
	"1 2048 2048 2048 0 0"
)
zoo=(
	"4 64 3136 576 0 0"     # resnet18 conv.gemm, layer1 (x 32 samples)
	"4 128 784 1152 0 0"    # resnet18 conv.gemm, layer2
	"4 256 196 2304 0 0"    # resnet18 conv.gemm, layer3
	"4 512 49 4608 0 0"     # resnet18 conv.gemm, layer4: 49 columns
	"1 64 576 100352 0 0"   # resnet18 conv_weight_grad.gemm, layer1 (K = 32 x 3136)
	"1 512 4608 1568 0 0"   # resnet18 conv_weight_grad.gemm, layer4 (K = 32 x 49)
	"4 576 3136 64 1 0"     # resnet18 conv_input_grad.gemm, layer1 (w transposed)
	"1 8192 720 720 0 0"    # transformer linear
	"1 8192 2048 720 0 0"   # transformer feed-forward up
	"1 8192 720 2048 0 0"   # transformer feed-forward down
	"1 720 720 8192 1 0"    # transformer weight gradient (x^T g)
	"1 8192 720 720 0 1"    # transformer input gradient (g w^T: B copied)
	"256 64 60 64 0 0"      # transformer attention, per head (x 1536)
	"10 2 250 1750 0 0 a"   # wav2letter conv.gemm.t: 2 output positions
	"10 3 2000 8000 0 0 a"  # wav2letter conv.gemm.t, the largest
)
smoke=(
	"2 40 70 50 0 0 a"      # tests/bench/gemm-bench.sh: small, every edge kind
	"1 33 97 300 1 0"
)
case $set in
big) shapes=("${big[@]}") ;;
smoke) shapes=("${smoke[@]}") ;;
few) shapes=("${zoo[@]:13}") ;;
zoo) shapes=("${zoo[@]}") ;;
given) shapes=("${given[@]}") ;;
all) shapes=("${big[@]}" "${zoo[@]}") ;;
*) echo "gemm-bench.sh: --set big|zoo|few|smoke|all" >&2; exit 2 ;;
esac

for s in "${shapes[@]}"; do
	read -r B M N K TA TB BOP <<<"$s"
	BOP=${BOP:-b}
	name="$dtype-$B$BOP-$M-$N-$K-$TA$TB"
	ashape="$M, $K"; aexpr=a
	[ "$TA" = 1 ] && ashape="$K, $M" && aexpr="transpose(a, 0, 1)"
	bshape="$K, $N"; bexpr=b
	[ "$TB" = 1 ] && bshape="$N, $K" && bexpr="transpose(b, 0, 1)"
	if [ "$B" -gt 1 ] && [ "$BOP" = a ]; then
		ashape="$B, $ashape"
	elif [ "$B" -gt 1 ]; then
		bshape="$B, $bshape"
		[ "$TB" = 1 ] && bexpr="transpose(b, 1, 2)"
	fi
	cat >"$work/$name.ir" <<EOF
param a: $dtype[$ashape] = normal(0, 1, seed=1)
param b: $dtype[$bshape] = normal(0, 1, seed=2)
def forward() {
  return $aexpr @ $bexpr
}
EOF
	"$fadc" "$work/$name.ir" -o "$work/$name.so" --tasks forward --cpu "$cpu"
	echo "$name $B $M $N $K $TA $TB $BOP $dtype" >>"$work/shapes.txt"
	[ -n "$compile_only" ] && continue
	"$work/gemm-bench" "$work/$name.so" "$dtype" "$B" "$M" "$N" "$K" "$TA" "$TB" "$BOP" "$threads" "$blas"
done
