# RUN: bash %s
# External data (docs/ONNX.md, "External data"): a model saved by onnx's
# external-data helpers (make_external.py: every initializer and a
# Constant's tensor in data/weights.bin beside it) imports, and runs with
# its weights read from that file, through the float64 interpreter and the
# compiled CPU code, against NumPy's float64 by hand: normalized error
# <= 1e-5 (compare-npy's default).  A location that is absolute or leaves
# the model's folder, a missing or truncated data file and a length that
# disagrees with the shape are errors naming the tensor and the file, exit 1.
source "$FADC_SOURCE_DIR/tests/cli/common.bash"
PY=/usr/bin/python3
"$PY" -c "import onnx" 2>/dev/null || { echo "SKIP: Debian's python3-onnx is not installed"; exit 77; }
"$PY" "$SRC/tests/onnx/make_external.py" "$tmp" || fail "make_external.py failed"
m=$tmp/ext/model.onnx
[ "$(stat -c %s "$m")" -lt 1000 ] || fail "the weights are inside model.onnx"

run_fadc 0 "$m" --emit ir
grep -q '^param w1: f32\[6, 4\] = uniform(' "$tmp/out" || fail "no param w1: $(cat "$tmp/out")"
grep -qF 'reshape(' "$tmp/out" || fail "the Constant's shape was not read: $(cat "$tmp/out")"
run_fadc 0 run "$m" --params "$m" --params "$tmp/x.npy" --out "$tmp/got"
run_fadc 0 compare-npy "$tmp/want" "$tmp/got"
run_fadc 0 "$m" -o "$tmp/m.so"
run_fadc 0 run "$tmp/m.so" --params "$m" --params "$tmp/x.npy" --out "$tmp/got-so"
run_fadc 0 compare-npy "$tmp/want" "$tmp/got-so"
# From another working folder: the data file is found beside the model.
(cd / && "$FADC" "$m" --emit ir >/dev/null) || fail "the data file is looked for in the working folder"

run_fadc 1 "$tmp/absolute/model.onnx" --emit ir
err_first "$tmp/absolute/model.onnx: error: initializer 'w2': external data file '$tmp/ext/data/weights.bin' is an absolute path (it must be relative to the model's folder)"
run_fadc 1 "$tmp/dotdot/model.onnx" --emit ir
err_first "$tmp/dotdot/model.onnx: error: initializer 'w2': external data file 'data/../../ext/data/weights.bin' leaves the model's folder ('..')"
run_fadc 1 "$tmp/missing/model.onnx" --emit ir
err_first "$tmp/missing/model.onnx: error: initializer 'w2': cannot open external data file '$tmp/missing/data/nothing.bin': No such file or directory"
run_fadc 1 "$tmp/length/model.onnx" --emit ir
err_first "$tmp/length/model.onnx: error: initializer 'w2': external data of 20 bytes (length) where its 6 elements need 24"
run_fadc 1 "$tmp/truncated/model.onnx" --emit ir
err_has "$tmp/truncated/model.onnx: error: initializer 'w2': external data file '$tmp/truncated/data/weights.bin' has "
err_has "(truncated?)"
# The same errors through --params model.onnx, and through run.
run_fadc 1 run "$tmp/m.so" --params "$tmp/truncated/model.onnx" --params "$tmp/x.npy" --out "$tmp/x"
err_has "initializer 'w2': external data file '$tmp/truncated/data/weights.bin' has "
exit 0
