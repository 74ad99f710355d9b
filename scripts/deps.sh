#!/bin/sh
# Installs the Debian packages fadc needs, if any is missing.  As root it
# runs apt-get; otherwise it says what to install and fails.
#   llvm-14-dev     the LLVM C API (CPU backend)
#   llvm-14-tools   FileCheck and not, for golden tests
#   clang-14, libclang-rt-14-dev   the ASan/UBSan build and libFuzzer
#   libyaml-dev     the benchmark configuration
#   cmake, make, gcc, python3      the build
#   pkg-config      tests/install builds the example against fadc.pc
#   python3-matplotlib  bench/plot.py, the charts (tests/bench/plot.sh)
#   python3-numpy, python3-pytest, python3-pip  the Python package's tests (tests/python)
#   libprotobuf-c-dev, protobuf-c-compiler, libonnx-dev  the ONNX frontend: protoc-c
#                   generates its decoder from libonnx-dev's onnx.proto at build time
#   python3-onnx    tests/onnx makes its models with onnx's helper API (no torch: Debian's
#                   python3-torch pulls in libtorch, hundreds of MB, for no test yet)
# The CUDA toolkit cannot come from apt; CMake finds it if installed.
set -e
pkgs="cmake make gcc llvm-14-dev llvm-14-tools clang-14 libclang-rt-14-dev libyaml-dev python3
      python3-matplotlib pkg-config python3-numpy python3-pytest python3-pip
      libprotobuf-c-dev protobuf-c-compiler libonnx-dev python3-onnx"
missing=""
for p in $pkgs; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
	echo "fadc: missing Debian packages:$missing" >&2
	echo "fadc: run as root, or: sudo apt-get install -y$missing" >&2
	exit 1
fi
echo "fadc: installing:$missing"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq || true
apt-get install -y -qq $missing >/dev/null
