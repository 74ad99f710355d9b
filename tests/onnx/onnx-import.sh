# RUN: bash %s
# The ONNX frontend's op set (docs/ONNX.md): two models made with onnx's
# helper API (make_models.py) import, prints as canonical IR that parses
# back to the same text, and runs: fadc run's values of every output
# against NumPy's float64 by hand, normalized error <= 1e-5 (compare-npy's
# default; the interpreter is float64, the outputs f32).  Then the errors:
# unsupported ops (all listed, with their domains), an opset out of range,
# a dtype fadc lacks, a symbolic dimension (and -D binding it), a truncated protobuf, a shape
# error of the parser (which names the node); and 200
# corrupted copies of the MLP (mutate.py) end in a clean exit 0 or 1.
source "$FADC_SOURCE_DIR/tests/cli/common.bash"
PY=/usr/bin/python3
"$PY" -c "import onnx" 2>/dev/null || { echo "SKIP: Debian's python3-onnx is not installed"; exit 77; }
"$PY" "$SRC/tests/onnx/make_models.py" "$tmp" || fail "make_models.py failed"

run_fadc 0 "$tmp/mlp.onnx" --emit ir
cp "$tmp/out" "$tmp/mlp.ir"
# Parameters and inputs are drawn from seeded initializers (U(-s, s),
# s = 1/sqrt(fan_in), and U[0, 1)), so that the model runs unbound.
grep -qxF 'param "0.weight": f32[6, 4] = uniform(full(value=-0.5, shape=[6, 4]), full(value=0.5, shape=[6, 4]), seed=1)' "$tmp/mlp.ir" ||
	fail "no param \"0.weight\": $(cat "$tmp/mlp.ir")"
grep -q '^param "onnx::MatMul_9": f32\[3, 6\] = uniform(' "$tmp/mlp.ir" || fail "no param onnx::MatMul_9"
grep -q '^const input.1: f32\[5, 4\] = uniform(full(value=0, shape=\[5, 4\]), full(value=1, shape=\[5, 4\]), seed=[0-9]*)$' "$tmp/mlp.ir" ||
	fail "the graph input is not a seeded constant"
grep -qF 'def forward() -> (f32[3, 5], f32[5, 3]) {' "$tmp/mlp.ir" || fail "forward's signature"
grep -qF 'as out, %' "$tmp/mlp.ir" && grep -qF 'as "/layer/Add_output_0"' "$tmp/mlp.ir" || fail "output names"
run_fadc 0 "$tmp/mlp.ir" --emit ir
diff <(grep -v '^#' "$tmp/mlp.ir") <(grep -v '^#' "$tmp/out") || fail "the import does not print back the same"

p=()
for n in input.1 0.weight 0.bias onnx::MatMul_9 0.bias_c; do p+=(--params "$tmp/$n.npy"); done
run_fadc 0 run "$tmp/mlp.onnx" "${p[@]}" --out "$tmp/got"
run_fadc 0 compare-npy "$tmp/want" "$tmp/got"
# The same through the compiled CPU backend (f32: normalized 1e-5 too).
run_fadc 0 "$tmp/mlp.onnx" -o "$tmp/mlp.so"
run_fadc 0 run "$tmp/mlp.so" "${p[@]}" --out "$tmp/got-so"
run_fadc 0 compare-npy "$tmp/want" "$tmp/got-so"
# --params mlp.onnx binds the weights stored in the file (raw_data and
# float_data), through both legs: the same values.
run_fadc 0 run "$tmp/mlp.onnx" --params "$tmp/mlp.onnx" --params "$tmp/input.1.npy" --out "$tmp/got-w"
run_fadc 0 compare-npy "$tmp/want" "$tmp/got-w"
run_fadc 0 run "$tmp/mlp.so" --params "$tmp/mlp.onnx" --params "$tmp/input.1.npy" --out "$tmp/got-w-so"
run_fadc 0 compare-npy "$tmp/want" "$tmp/got-w-so"

# Unbound, a run of the .onnx itself takes the model's own weights (its
# graph input drawn); the .so draws every parameter unless bound, and with
# --params mlp.onnx gives the same values.
run_fadc 0 run "$tmp/mlp.onnx" --out "$tmp/drawn"
run_fadc 0 run "$tmp/mlp.so" --params "$tmp/mlp.onnx" --out "$tmp/drawn-so"
run_fadc 0 compare-npy "$tmp/drawn" "$tmp/drawn-so"
# --const NAME: a float initializer imported as a constant (no gradient).
run_fadc 0 "$tmp/mlp.onnx" --const 0.bias --emit ir
grep -q '^const "0.bias": f32\[6\] = uniform(' "$tmp/out" || fail "--const 0.bias: $(cat "$tmp/out")"
run_fadc 0 run "$tmp/mlp.onnx" --const 0.bias --task vjp "${p[@]}" --out "$tmp/vjp-const"
[ -f "$tmp/vjp-const/grad.0.weight.npy" ] && [ ! -e "$tmp/vjp-const/grad.0.bias.npy" ] ||
	fail "--const 0.bias: the gradients are $(ls "$tmp/vjp-const")"
run_fadc 1 "$tmp/mlp.onnx" --const nothing --emit ir
err_first "$tmp/mlp.onnx: error: --const 'nothing' names no float initializer of the model"
run_fadc 1 "$tmp/mlp.onnx" --const /shape --emit ir
err_first "$tmp/mlp.onnx: error: --const '/shape' names no float initializer of the model"
run_fadc 2 "$tmp/mlp.onnx" --const

# The other ops (make_models.py, ops.onnx), both legs likewise.
q=(--params "$tmp/x.npy" --params "$tmp/one.npy" --params "$tmp/1.5.npy")
run_fadc 0 run "$tmp/ops.onnx" "${q[@]}" --out "$tmp/got-ops"
run_fadc 0 compare-npy "$tmp/want-ops" "$tmp/got-ops"
run_fadc 0 "$tmp/ops.onnx" -o "$tmp/ops.so"
run_fadc 0 run "$tmp/ops.so" "${q[@]}" --out "$tmp/got-ops-so"
run_fadc 0 compare-npy "$tmp/want-ops" "$tmp/got-ops-so"

# Einsum, both legs, against NumPy's einsum.
e=(--params "$tmp/ea.npy" --params "$tmp/eb.npy" --params "$tmp/ec.npy" --params "$tmp/ev.npy")
run_fadc 0 run "$tmp/einsum.onnx" "${e[@]}" --out "$tmp/got-einsum"
run_fadc 0 compare-npy "$tmp/want-einsum" "$tmp/got-einsum"
run_fadc 0 "$tmp/einsum.onnx" -o "$tmp/einsum.so"
run_fadc 0 run "$tmp/einsum.so" "${e[@]}" --out "$tmp/got-einsum-so"
run_fadc 0 compare-npy "$tmp/want-einsum" "$tmp/got-einsum-so"
# A bidirectional LSTM in layout 1 with initial states, both legs, against
# NumPy by hand.
l=()
for n in lx lW lR lB lh lc; do l+=(--params "$tmp/$n.npy"); done
run_fadc 0 run "$tmp/lstm.onnx" "${l[@]}" --out "$tmp/got-lstm"
run_fadc 0 compare-npy "$tmp/want-lstm" "$tmp/got-lstm"
run_fadc 0 "$tmp/lstm.onnx" -o "$tmp/lstm.so"
run_fadc 0 run "$tmp/lstm.so" "${l[@]}" --out "$tmp/got-lstm-so"
run_fadc 0 compare-npy "$tmp/want-lstm" "$tmp/got-lstm-so"
# Resize nearest in three modes, indices as a literal and from iota, both
# legs, against NumPy by hand.
run_fadc 0 run "$tmp/resize.onnx" --params "$tmp/rx.npy" --out "$tmp/got-resize"
run_fadc 0 compare-npy "$tmp/want-resize" "$tmp/got-resize"
run_fadc 0 "$tmp/resize.onnx" -o "$tmp/resize.so"
run_fadc 0 run "$tmp/resize.so" --params "$tmp/rx.npy" --out "$tmp/got-resize-so"
run_fadc 0 compare-npy "$tmp/want-resize" "$tmp/got-resize-so"
# An exporter's graph (tests/data/onnx, torch's transformer layer: shape
# subgraphs folded, literals) prints back as the same text.
run_fadc 0 "$SRC/tests/data/onnx/transformer.onnx" --emit ir
grep -v '^#' "$tmp/out" >"$tmp/tr.ir"
run_fadc 0 "$tmp/tr.ir" --emit ir
diff "$tmp/tr.ir" <(grep -v '^#' "$tmp/out") || fail "the transformer's import does not print back the same"

run_fadc 1 "$tmp/unsupported.onnx" --emit ir
err_first "$tmp/unsupported.onnx: error: 2 unsupported nodes: 'hm1' (Hardmax, domain ''), 'foo' (Foo, domain 'com.example')"
run_fadc 1 "$tmp/opset11.onnx" --emit ir
err_first "$tmp/opset11.onnx: error: the model's opset 11 is out of the supported range 13 to 27"
run_fadc 1 "$tmp/int32.onnx" --emit ir
err_first "$tmp/int32.onnx: error: graph input 'x' has ONNX dtype 6: only float (1), double (11), int64 (7) and bool (9) are supported"
run_fadc 1 "$tmp/symbolic.onnx" --emit ir
err_first "$tmp/symbolic.onnx: error: dimension 0 of graph input 'x' is symbolic ('N'): bind it with -D N=VALUE"
run_fadc 1 "$tmp/symbolic.onnx" --emit ir -D N=two
err_first "$tmp/symbolic.onnx: error: -D N=two: the value must be a non-negative integer"
run_fadc 0 "$tmp/symbolic.onnx" --emit ir -D N=3
grep -q '^const x: f32\[3, 2\] = uniform(' "$tmp/out" || fail "-D N=3: $(cat "$tmp/out")"
# -D N=2,3: one artifact, two specialisations.
run_fadc 0 "$tmp/symbolic.onnx" -D N=2,3 -o "$tmp/sym.so"
run_fadc 0 inspect "$tmp/sym.so"
out_has "specialisation 0: N=2"
out_has "specialisation 1: N=3"
# A shape computed from a graph input's data cannot be static.
run_fadc 1 "$tmp/reshape-input.onnx" --emit ir
err_first "$tmp/reshape-input.onnx: error: node '/r' (Reshape): the shape 's' is not known at import"
run_fadc 1 "$tmp/truncated.onnx" --emit ir
err_first "$tmp/truncated.onnx: error: not an ONNX model: a malformed or truncated protobuf"
# A shape error the importer finds names the node; one the IR parser finds
# shows the imported statement, whose comment names the ONNX node.
run_fadc 1 "$tmp/matmul-shapes.onnx" --emit ir
err_first "$tmp/matmul-shapes.onnx: error: node '/mm' (MatMul): inner dimensions differ (3 vs 4)"
run_fadc 1 "$tmp/not-float.onnx" --emit ir
[ "$(sed -n 2p "$tmp/err")" = "  \"y\" = not(\"x\")  # node '/not' (Not)" ] ||
	fail "the failing statement does not name its node: $(cat "$tmp/err")"

"$PY" "$SRC/tests/onnx/mutate.py" "$FADC" "$tmp/mlp.onnx" 200 || fail "a corrupted model crashed fadc"
# And of two exports that reach the folding, Conv, BatchNormalization and
# the pools.
"$PY" "$SRC/tests/onnx/op_fuzz.py" "$FADC" "$tmp" 3 23 || fail "a fuzzed node crashed fadc"
for m in resnet transformer; do
	"$PY" "$SRC/tests/onnx/mutate.py" "$FADC" "$SRC/tests/data/onnx/$m.onnx" 50 ||
		fail "a corrupted $m.onnx crashed fadc"
done
exit 0
