#!/usr/bin/env bash
# .gpu-c26k/run.sh -- issue 26 (helper c26k): the GEMM before (main's fadc,
# 137cc32) and after (h-c26k: the deterministic K split), x86-64-v4
# artifacts built on the development machine (bench/gemm-bench.sh
# --compile-only), timed here alternately (before, after; two rounds) at 1
# and 16 threads by the same harness (wall clock), the FMA peak in each
# line, the host's OpenBLAS beside "after"; torch and numpy
# (bench/gemm-peers.py) for the split shapes after.
set -u
exec > >(tee "${OUT:-/tmp}/gpu.txt") 2>&1
here=$(cd "$(dirname "$0")" && pwd)
export OPENBLAS_CORETYPE=SkylakeX GEMM_BENCH_WALL=1 GEMM_BENCH_MIN_S=${MIN_S:-0.15}
echo "== $(date -u +%H:%M:%S) $(nproc) cpus, load $(cut -d' ' -f1-3 /proc/loadavg)"
lscpu | grep -E "Model:|Thread|Core\(s\)|L2 cache"
for round in 1 2; do
	while read -r name B M N K TA TB BOP dt; do
		"$here/h-c26k/gemm-bench" "$here/main/$name.so" "$dt" "$B" "$M" "$N" "$K" "$TA" "$TB" "$BOP" 1,16 none 2>/dev/null | sed "s/^/r$round before /"
		"$here/h-c26k/gemm-bench" "$here/h-c26k/$name.so" "$dt" "$B" "$M" "$N" "$K" "$TA" "$TB" "$BOP" 1,16 libopenblas.so.0 | sed "s/^/r$round after  /"
	done <"$here/h-c26k/shapes.txt"
done
echo "== peers $(date -u +%H:%M:%S), load $(cut -d' ' -f1-3 /proc/loadavg)"
PYTHONUNBUFFERED=1 python3 bench/gemm-peers.py -t 1,16 --dtype f32 "10 2 250 1750 0 0 a" "1 64 576 100352 0 0"
echo "== done $(date -u +%H:%M:%S), load $(cut -d' ' -f1-3 /proc/loadavg)"
