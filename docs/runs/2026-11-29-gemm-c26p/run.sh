#!/usr/bin/env bash
# .gpu-c26p/run.sh -- issue 26 (helper c26p): the GEMM before (main's fadc, 7f36db6)
# and after (h-c26p: B panels of several tiles in L2), x86-64-v4 artifacts built on the development machine
# (bench/gemm-bench.sh --set all --compile-only), timed here alternately
# per shape (before, then after) at 1 and 16 threads by the same harness
# (bench/gemm/gemm-bench.c, wall clock), the FMA peak in each line; the
# host's OpenBLAS (SkylakeX kernels) beside "after"; torch and numpy
# (bench/gemm-peers.py) in the same call, after.
set -u
exec > >(tee "${OUT:-/tmp}/gpu.txt") 2>&1
here=$(cd "$(dirname "$0")" && pwd)
export OPENBLAS_CORETYPE=SkylakeX GEMM_BENCH_WALL=1 GEMM_BENCH_MIN_S=${MIN_S:-0.15}
echo "== $(date -u +%H:%M:%S) $(nproc) cpus, load $(cut -d' ' -f1-3 /proc/loadavg)"
lscpu | grep -E "Model:|Thread|Core\(s\)|L2 cache"
args=()
while read -r name B M N K TA TB BOP dt; do
	args+=("$B $M $N $K $TA $TB $BOP")
	"$here/after/gemm-bench" "$here/before/$name.so" "$dt" "$B" "$M" "$N" "$K" "$TA" "$TB" "$BOP" 1,16 none 2>/dev/null | sed 's/^/before /'
	"$here/after/gemm-bench" "$here/after/$name.so" "$dt" "$B" "$M" "$N" "$K" "$TA" "$TB" "$BOP" 1,16 libopenblas.so.0 | sed 's/^/after  /'
done <"$here/after/shapes.txt"
echo "== peers $(date -u +%H:%M:%S), load $(cut -d' ' -f1-3 /proc/loadavg)"
PYTHONUNBUFFERED=1 python3 bench/gemm-peers.py -t 1,16 --dtype f32 "${args[@]}"
echo "== done $(date -u +%H:%M:%S), load $(cut -d' ' -f1-3 /proc/loadavg)"
