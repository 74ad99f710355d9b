#!/usr/bin/env bash
# tests/python/gpu-payload.sh DEST -- the Python package's GPU check, built here
# (the GPU machine has no LLVM, so artifacts are compiled here; NVRTC needs the
# CUDA toolkit): DEST/python (bench_call.py), DEST/tests (tests/python's files), DEST/models (ppl_simple_reg.so and
# ppl_robust_reg.so, --target cpu,cuda --tasks all), DEST/dist (the wheel of
# `pip wheel ./python`, carrying libfadc.so) and DEST/run.sh, which runs there:
#   run.sh          installs the wheel with `pip install --no-index --target`
#                   (the GPU machine has no network) and imports fadc from that
#                   install only, then pytest tests/test_gpu.py (torch, CuPy in and out, pointer
#                   equality, stream ordering), then python/bench_call.py on
#                   cuda:0 and on the CPU (the per-call figures, beside
#                   bench_call's c_call: fadc_run through ctypes)
# Usage (from the repository root, after building into build/):
#   bash tests/python/gpu-payload.sh /work/main/.gpu-i24
# then `run` with carry [".gpu-i24"] and `bash .gpu-i24/run.sh`.
set -eu
dest=${1:?usage: gpu-payload.sh DEST}
root=$(cd "$(dirname "$0")/../.." && pwd)
b=${FADC_BIN:-$root/build/bin}
lib=${FADC_LIB:-$root/build/lib/libfadc.so}
rm -rf "$dest"
mkdir -p "$dest/python" "$dest/tests" "$dest/models" "$dest/dist"
# The wheel, from a copy of python/ so that the checkout gets no build/ or
# egg-info; FADC_LIB names the library setup.py copies into it.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp -r "$root/python" "$tmp/src"
rm -rf "$tmp/src/build" "$tmp/src"/*.egg-info "$tmp/src/fadc/__pycache__"
FADC_LIB=$lib /usr/bin/python3 -m pip wheel -q --no-build-isolation --no-deps -w "$dest/dist" "$tmp/src"
ls "$dest"/dist/fadc-*-py3-none-linux_*.whl >/dev/null
# bench_call.py only: the package itself comes from the wheel (a copy of
# python/fadc beside bench_call.py would shadow the install).
cp "$root/python/bench_call.py" "$dest/python/"
cp "$root"/tests/python/*.py "$dest/tests/"
if ldd "$lib" | grep -qiE 'llvm|nvrtc|cublas'; then
	echo "gpu-payload: libfadc.so links LLVM, NVRTC or cuBLAS" >&2
	exit 1
fi
for m in ppl_simple_reg ppl_robust_reg; do
	"$b/fadc" "$root/models/$m.ir" -o "$dest/models/$m.so" --target cpu,cuda --tasks all
done
cat >"$dest/run.sh" <<'RUN'
#!/usr/bin/env bash
# Runs on the GPU machine (see tests/python/gpu-payload.sh).
set -u
here=$(cd "$(dirname "$0")" && pwd)
# The package as a user gets it: the carried wheel installed without network,
# imported from that install only (no FADC_LIB: it must find its own library).
site=$(mktemp -d)
python3 -m pip install -q --no-index --no-deps --target "$site" "$here"/dist/*.whl || exit 1
export PYTHONPATH=$site PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
export FADC_PY_GPU_MODELS=$here/models
unset FADC_LIB FADC_BUILD_DIR
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -c 'import sys, numpy, torch; print(sys.version.split()[0], numpy.__version__, torch.__version__)'
python3 -c 'import fadc; print("fadc", fadc.__file__, fadc.library_path)'
case $(python3 -c 'import fadc; print(fadc.library_path)') in
"$site"/fadc/libfadc.so) ;;
*) echo "run.sh: fadc did not load the wheel's libfadc.so" >&2; exit 1 ;;
esac
rc=0
(cd "$here/tests" && python3 -m pytest -q -p no:cacheprovider test_gpu.py) || rc=1
uptime
for dev in cuda:0 cpu; do
	python3 "$here/python/bench_call.py" "$here/models/ppl_simple_reg.so" --device $dev \
		--calls 5000 --repeats 5 || rc=1
done
exit $rc
RUN
chmod +x "$dest/run.sh"
echo "gpu-payload: $dest ($(du -sh "$dest" | cut -f1))"
