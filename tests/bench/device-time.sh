# RUN: bash %s
# --device-time (CUDA events around each timed call) needs a GPU: on the
# CPU it is a usage error naming why, exit 2, nothing run or written.  On a
# machine with a GPU the option is exercised by tests/gpu/device/run.sh.
set -eu
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
set +e
"$FADC_BENCH" --gpu -1 --device-time --model-filter ppl_simple_reg --output "$out/t.md" \
	2> "$out/e"; rc=$?
set -e
[ "$rc" -eq 2 ]
grep -q '^fadc-bench: --device-time needs a GPU (--gpu N; the CPU has no device clock)' "$out/e"
[ ! -e "$out/t.md" ]
"$FADC_BENCH" --help | grep -q -- '--device-time'
