#!/usr/bin/env bash
# r21b's second call: the bench (the first call's failed; its log was not kept), the peer again.
set -u
here=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-/tmp/out}; mkdir -p "$out"
export FADC_REQUIRE_GPU=1 PYTHONUNBUFFERED=1
echo "== $(date -u +%FT%TZ) $(hostname)"; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,utilization.gpu --format=csv,noheader
bench() {
for w in main r21b; do
	fb="$here/bin/fadc-bench"; [ $w = main ] && fb="$here/bin/fadc-bench-main"
	rm -rf /tmp/fgpu-b-$w; cp -r "$here/fgpu-$w" /tmp/fgpu-b-$w
	echo "-- fadc-bench $w"
	timeout 60 "$fb" --gpu 0 --no-check --num-iters 10 --config /tmp/fgpu-b-$w/bench/bench.yaml \
		--artifacts /tmp/fgpu-b-$w/artifacts --model-filter deepspeech --task-filter vjp --output /tmp/b-$w.md >/tmp/b-$w.log 2>&1
	echo "rc=$?"; tail -n 6 /tmp/b-$w.log; cat /tmp/b-$w.md
done
}
bench 2>&1 | tee "$out/bench.log"
echo "== PyTorch seed deepspeech vjp, TF32 off"
cd "$here/peer"
timeout 60 python3 seed_tf32.py off --gpu 0 --num-iters 10 --model-filter deepspeech --task-filter vjp --output "$out/torch-ds.md" >"$out/torch-ds.log" 2>&1
echo "rc=$?"; grep -iE "error|Traceback" "$out/torch-ds.log" | tail -n 3; cat "$out/torch-ds.md"
echo "== repeat"; bench 2>&1 | tee "$out/bench2.log"
echo "== end $(date -u +%FT%TZ)"
