# tests/onnx/node-tests.bash LEG -- ONNX's backend node tests (LEG interp or
# compiled; tests/onnx/node_tests.py says what is run and compared).  The
# tests ship in the onnx==1.22.0 wheel only (1.23 and Debian's python3-onnx
# do not have them): the wheel is fetched once into the build folder with
# pip download (no install), pinned to one file by platform and checked
# against its sha256; the runner reads the tests from it as a zip.  Skipped
# (exit 77) with a message where PyPI cannot be reached.
set -u
FADC=${FADC:?FADC must name the fadc binary}
SRC=${FADC_SOURCE_DIR:?FADC_SOURCE_DIR must name the repository root}
BIN=${FADC_BIN_DIR:?FADC_BIN_DIR must name the bin folder of the build}
leg=$1
PY=/usr/bin/python3
"$PY" -c "import onnx, numpy" 2>/dev/null ||
	{ echo "SKIP: Debian's python3-onnx and python3-numpy decode the test data; not installed"; exit 77; }
dir=$BIN/../onnx-wheel
whl=$dir/onnx-1.22.0-cp311-cp311-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl
sha=1d0a2bdb15eb2b3cb65c438f3423d9620d14fdce32f92380e6bb1b2e09568ef5
mkdir -p "$dir"
# One fetch for both legs, which ctest may run at once.
(
	flock 9
	if [ ! -f "$whl" ]; then
		timeout 300 "$PY" -m pip download --no-deps --only-binary=:all: --platform manylinux_2_28_x86_64 \
			--python-version 3.11 --implementation cp --abi cp311 onnx==1.22.0 -d "$dir.tmp" \
			>"$dir/pip.log" 2>&1 && mv "$dir.tmp/$(basename "$whl")" "$whl"
		rm -rf "$dir.tmp"
	fi
) 9>"$dir/lock"
if [ ! -f "$whl" ]; then
	echo "SKIP: could not fetch onnx==1.22.0 from PyPI (pip download: $(tail -n 1 "$dir/pip.log"))"
	exit 77
fi
got=$(sha256sum "$whl" | cut -d' ' -f1)
if [ "$got" != "$sha" ]; then
	echo "FAIL: $whl has sha256 $got, expected $sha"
	rm -f "$whl"
	exit 1
fi
exec "$PY" "$SRC/tests/onnx/node_tests.py" "$FADC" "$whl" "$leg"
