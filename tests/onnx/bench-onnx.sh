# RUN: bash %s
# fadc-bench takes .onnx sources as .ir ones (docs/ONNX.md, docs/BENCH.md):
# a configuration naming two committed torch exports (tests/data/onnx: the
# MLP and the resnet-style network with batch norm), relative to its folder,
# runs unbound (the import draws the parameters and inputs from seeded
# initializers) on the cpu backend (compiled once per model by fadc) and on
# the float64 interpreter, every warm-up passing its consistency check
# (vjp/jvp and vhp/hvp dot-product tests, rtol 1e-4) and --check-reference
# comparing the compiled outputs with the interpreter's (rtol 1e-4).
set -u
. "$FADC_SOURCE_DIR/tests/bench/common.bash"
mkdir -p "$tmp/cfg"
cp "$SRC/tests/data/onnx/mlp.onnx" "$SRC/tests/data/onnx/resnet.onnx" "$tmp/cfg/"
cat > "$tmp/cfg/c.yaml" <<'YAML'
task_lists:
  ALL_TASKS: [vjp, jvp, vhp, hvp]
models:
  mlp: {source: mlp.onnx, tasks: [vjp, jvp, vhp, hvp]}
  resnet: {source: resnet.onnx, tasks: [vjp, jvp]}
YAML
run_bench 0 --config "$tmp/cfg/c.yaml" --backend cpu --compile --artifacts "$tmp/art" --num-iters 1 \
	--check-reference --output "$tmp/t.md"
if grep -q 'INCONSISTENT\|could not run\|inconsistent' "$tmp/err" "$tmp/t.md"; then
	cat "$tmp/err" "$tmp/t.md"
	fail "a cell is inconsistent"
fi
[ "$(grep -c '^| mlp |' "$tmp/t.md")" -eq 4 ] && [ "$(grep -c '^| resnet |' "$tmp/t.md")" -eq 2 ] ||
	{ cat "$tmp/t.md"; fail "not every cell ran"; }
[ "$(ls "$tmp"/art/*.cpu.so | wc -l)" -eq 2 ] || fail "not one artifact per model: $(ls "$tmp/art")"
run_bench 0 --config "$tmp/cfg/c.yaml" --backend interp --num-iters 0 --output "$tmp/i.md"
[ "$(grep -c '^| mlp |' "$tmp/i.md")" -eq 4 ] || { cat "$tmp/i.md"; fail "the interpreter's cells"; }
# A malformed model is the model's error, not a crash.
head -c 300 "$SRC/tests/data/onnx/mlp.onnx" > "$tmp/cfg/mlp.onnx"
run_bench 1 --config "$tmp/cfg/c.yaml" --backend interp --num-iters 0 --model-filter mlp --output "$tmp/x.md"
err_has "mlp.onnx: error: not an ONNX model: a malformed or truncated protobuf"
exit 0
