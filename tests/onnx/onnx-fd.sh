# RUN: bash %s
# Finite differences for the ops that no PyTorch export of torch-parity.sh
# differentiates (docs/ONNX.md, "Derivatives"): the float64 models of
# tests/data/onnx/make_fd.py (tests/data/onnx/fd/, committed: no onnx
# needed here), each a scalar loss of its parameters.  fd_check.py compares
# the float64 interpreter's vjp (per parameter) and jvp (all directions at
# once) with central differences of its forward, step 1e-6 relative,
# normalized error <= 1e-6.
source "$FADC_SOURCE_DIR/tests/cli/common.bash"
PY=/usr/bin/python3
"$PY" -c "import numpy" 2>/dev/null || { echo "SKIP: python3-numpy is not installed"; exit 77; }
D=$SRC/tests/data/onnx/fd
status=0
for m in elementwise gelu reduce shape conv rnn; do
	"$PY" "$SRC/tests/onnx/fd_check.py" "$FADC" "$D/$m.onnx" "$D/$m" "$tmp/$m" || status=1
done
[ $status = 0 ] || fail "a derivative differs from finite differences"
exit 0
