#!/usr/bin/env bash
# tests/install/install.sh SRC BUILD -- `make install` of a built tree, used
# as a C user would (docs/INSTALL.md):
#   1. install into a temporary prefix staged under DESTDIR (the Makefile's
#      install-built, what `make install` runs once built); every file is
#      there; libfadc.so needs no LLVM, NVRTC or CUDA library (readelf) and
#      exports exactly the functions of include/fadc.h (nm); libfadc.a
#      calls nothing of LLVM or NVRTC;
#   2. the installed fadc compiles a ppl model and runs it from a folder
#      outside the trees, under an LD_PRELOAD tracer (trace.c) that logs
#      every path the process and its children (the linker) name: none may
#      lead into the source or build tree, and the installed support
#      library must be among them (the tracer works); the build tree's own
#      fadc, traced the same way, is caught (the check can fail).  With
#      NVRTC, a --target cpu,cuda compile is traced too.  Then
#      the whole install is moved to another prefix and used from there;
#   3. examples/embed.c built against the moved install three times: with
#      pkg-config (shared), with CMake's find_package(fadc) (fadc::fadc)
#      and with fadc::fadc_static; none links LLVM or NVRTC;
#   4. each embed prints the gradient norms of the vjp (v = 1), with the
#      model's initializers and with beta_value bound from a .safetensors
#      file; the oracle: the norms of the .npy files `fadc run` writes for
#      the same task and bindings (tensors.py, the test's own .npy reader),
#      through the runtime (relative error 1e-8: the same f32 values,
#      printed to 9 digits) and through the float64 interpreter (1e-5,
#      f32 rounding as in tests/cli/cli-compile-run-so.sh, each norm's
#      error over the whole gradient's norm: nu_value's gradient, 0.6
#      beside 596, is a sum of terms far larger than itself, and its f32
#      error is 2e-5 of its own size); the bound parameters change the norm;
#   5. the installed fadc-bench runs a model from its installed
#      configuration (compiling with the fadc beside it) and draws its
#      chart with the installed plot.py, traced alike;
#   6. `make uninstall` removes every file it installed and fadc's own
#      folders, and keeps a file it did not install.
set -u
src=$(cd "${1:?usage: install.sh SRC BUILD}" && pwd -P)
build=$(cd "${2:?usage: install.sh SRC BUILD}" && pwd -P)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/fadc-install.XXXXXX")
tmp=$(cd "$tmp" && pwd -P)
trap 'rm -rf "$tmp"' EXIT
fail() {
	echo "install: FAIL: $*" >&2
	exit 1
}
step() { echo "== $*"; }
case $tmp/ in "$src"/* | "$build"/*) fail "the temporary folder $tmp is inside the trees" ;; esac
# A make above this test (make test) leaves its flags and jobserver here.
unset MAKEFLAGS MFLAGS MAKELEVEL
# Nothing from the caller's environment may point the tools elsewhere.
unset FADC_SUPPORT_LIB FADC_SOURCE_DIR FADC_CC PKG_CONFIG_PATH
export FADC_CACHE_DIR=$tmp/cache
libdir=$(sed -n 's/^CMAKE_INSTALL_LIBDIR:[A-Z]*=//p' "$build/CMakeCache.txt")
libdir=${libdir:-lib}

step "1. make install-built PREFIX=/opt/fadc-test DESTDIR=$tmp/stage"
prefix=/opt/fadc-test
root=$tmp/stage$prefix
make -C "$src" --no-print-directory install-built BUILD="$build" PREFIX=$prefix \
	DESTDIR="$tmp/stage" >"$tmp/install.log" 2>&1 || { cat "$tmp/install.log"; fail "make install-built"; }
for f in bin/fadc bin/fadc-bench "$libdir/libfadc.so" "$libdir/libfadc.a" include/fadc.h \
	"$libdir/pkgconfig/fadc.pc" "$libdir/cmake/fadc/fadcConfig.cmake" \
	"$libdir/cmake/fadc/fadcConfigVersion.cmake" "$libdir/fadc/libfadc_support.a" \
	share/fadc/bench/bench.yaml share/fadc/models/ppl_robust_reg.ir \
	share/fadc/install-manifest.txt; do
	[ -e "$root/$f" ] || fail "not installed: $f"
done
[ "$(find "$tmp/stage" -mindepth 1 -maxdepth 1)" = "$tmp/stage/opt" ] ||
	fail "installed outside the prefix: $(find "$tmp/stage" -mindepth 1 -maxdepth 1)"
so=$(readlink -f "$root/$libdir/libfadc.so")
readelf -d "$so" >"$tmp/dyn" || fail "readelf -d $so"
grep -q 'SONAME.*libfadc\.so\.' "$tmp/dyn" || fail "libfadc.so has no versioned SONAME"
if grep NEEDED "$tmp/dyn" | grep -Eiq 'llvm|nvrtc|libcuda|cublas|cudnn|yaml|stdc\+\+'; then
	fail "libfadc.so links: $(grep NEEDED "$tmp/dyn")"
fi
ldd "$so" >"$tmp/ldd" 2>&1 || fail "ldd $so: $(cat "$tmp/ldd")"
if grep -Eiq 'llvm|nvrtc' "$tmp/ldd" || grep -q 'not found' "$tmp/ldd"; then
	fail "ldd libfadc.so: $(cat "$tmp/ldd")"
fi
nm -u "$root/$libdir/libfadc.a" 2>/dev/null | grep -E ' U (LLVM|nvrtc)' &&
	fail "libfadc.a calls LLVM or NVRTC"
# The exports: every function include/fadc.h declares, and nothing else.
grep -E '^[A-Za-z].*[ *]fadc_[a-z0-9_]+\(' "$root/include/fadc.h" |
	sed -E 's/^[^(]*[ *](fadc_[a-z0-9_]+)\(.*/\1/' | sort >"$tmp/api"
nm -D --defined-only "$so" | awk '$2 == "T" || $2 == "D" || $2 == "B" || $2 == "R" {print $3}' |
	sed 's/@.*//' | sort >"$tmp/exports"
[ "$(wc -l <"$tmp/api")" -gt 40 ] || fail "found only $(wc -l <"$tmp/api") functions in fadc.h"
diff "$tmp/api" "$tmp/exports" >"$tmp/api.diff" ||
	fail "libfadc.so's exports are not fadc.h's functions (< fadc.h, > libfadc.so): $(cat "$tmp/api.diff")"

step "2. the installed fadc from outside the trees, traced"
cc -shared -fPIC -O1 -U_FORTIFY_SOURCE -o "$tmp/trace.so" "$src/tests/install/trace.c" -ldl ||
	fail "cannot build the tracer"
# traced LOG CMD...: CMD with every path it names logged to LOG.
traced() {
	local log=$1
	shift
	LD_PRELOAD=$tmp/trace.so FADC_TRACE_LOG=$log "$@"
}
# untouched LOG WHAT: no path in LOG leads into the source or build tree.
untouched() {
	if grep -F -e " $src/" -e " $build/" "$1" >"$tmp/hits" ||
		awk -v s="$src" -v b="$build" '$2 == s || $2 == b' "$1" | grep -q .; then
		fail "$2 named paths in the source or build tree: $(sort -u "$tmp/hits" | head -20)"
	fi
}
mkdir -p "$tmp/work"
cd "$tmp/work" || fail "cd $tmp/work"
model=$root/share/fadc/models/ppl_robust_reg.ir
traced "$tmp/trace1" "$root/bin/fadc" --version >"$tmp/version" || fail "fadc --version"
traced "$tmp/trace1" "$root/bin/fadc" "$model" -o m.so --tasks vjp || fail "installed fadc -o m.so"
python3 "$src/tests/install/tensors.py" ones ones.npy
traced "$tmp/trace1" "$root/bin/fadc" run m.so --task vjp --v v=ones.npy --out so >/dev/null ||
	fail "installed fadc run m.so"
traced "$tmp/trace1" "$root/bin/fadc" check "$model" --tasks vjp >"$tmp/check" ||
	fail "installed fadc check: $(cat "$tmp/check")"
# With the CUDA toolkit, fadc also compiles CUDA C with NVRTC (the CUDA
# special functions are compiled into fadc, NVRTC reads no header).
if grep -q NVRTC "$tmp/version"; then
	traced "$tmp/trace1" "$root/bin/fadc" "$model" -o mc.so --tasks vjp --target cpu,cuda ||
		fail "installed fadc --target cpu,cuda"
else
	echo "this fadc has no NVRTC: --target cuda not traced"
fi
untouched "$tmp/trace1" "the installed fadc"
grep -q "^arg $root/bin/\.\./$libdir/fadc/libfadc_support\.a\$" "$tmp/trace1" ||
	fail "the installed fadc did not link $root/$libdir/fadc/libfadc_support.a (or the tracer saw nothing)"
# The control: the build tree's fadc does name its tree, and is caught.
traced "$tmp/trace0" "$build/bin/fadc" "$model" -o m0.so --tasks vjp || fail "the build's fadc -o m0.so"
if (untouched "$tmp/trace0" "the build tree's fadc") 2>/dev/null; then
	fail "the tracer did not catch the build tree's fadc using its own tree"
fi
rm -f m0.so
echo "no path into $src or $build ($(wc -l <"$tmp/trace1") paths traced)"

moved=$tmp/moved/fadc
mkdir -p "$tmp/moved"
mv "$root" "$moved" || fail "mv $root $moved"
root=$moved
model=$root/share/fadc/models/ppl_robust_reg.ir
"$root/bin/fadc" "$model" -o m.so --tasks vjp || fail "the moved fadc -o m.so"
"$root/bin/fadc" run m.so --task vjp --v v=ones.npy --out so >/dev/null || fail "fadc run m.so"
"$root/bin/fadc" run "$model" --task vjp --v v=ones.npy --out ir >/dev/null || fail "fadc run model.ir"
python3 "$src/tests/install/tensors.py" safetensors beta.safetensors beta_value 11 1
"$root/bin/fadc" run m.so --task vjp --params beta.safetensors --v v=ones.npy --out so-p >/dev/null ||
	fail "fadc run m.so --params"
"$root/bin/fadc" run "$model" --task vjp --params beta.safetensors --v v=ones.npy --out ir-p \
	>/dev/null || fail "fadc run model.ir --params"

step "3. examples/embed.c against the moved install"
cp "$src/examples/embed.c" "$src/examples/CMakeLists.txt" "$tmp/work/" || fail "cp examples"
export PKG_CONFIG_LIBDIR=$root/$libdir/pkgconfig # this install's .pc, no other
pkg-config --exists fadc || fail "pkg-config does not find fadc in $PKG_CONFIG_LIBDIR"
[ "$(pkg-config --modversion fadc)" = "$(sed -n 's/^#define FADC_VERSION "\(.*\)".*/\1/p' "$src/include/fadc.h")" ] ||
	fail "fadc.pc's version is not fadc.h's"
# shellcheck disable=SC2046 # pkg-config prints several options
cc -Wall -Wextra -Werror -o embed-pc embed.c $(pkg-config --cflags --libs fadc) -lm \
	-Wl,-rpath,"$(pkg-config --variable=libdir fadc)" || fail "cc embed.c with pkg-config"
cmake -S . -B ex -DCMAKE_PREFIX_PATH="$root" >"$tmp/cmake.log" 2>&1 &&
	cmake --build ex >>"$tmp/cmake.log" 2>&1 || { cat "$tmp/cmake.log"; fail "cmake embed (fadc::fadc)"; }
grep -qx "fadc_DIR:PATH=$root/$libdir/cmake/fadc" ex/CMakeCache.txt ||
	fail "find_package(fadc) found $(grep '^fadc_DIR' ex/CMakeCache.txt)"
cmake -S . -B ex-static -DCMAKE_PREFIX_PATH="$root" -DEMBED_STATIC=ON >"$tmp/cmake.log" 2>&1 &&
	cmake --build ex-static >>"$tmp/cmake.log" 2>&1 || { cat "$tmp/cmake.log"; fail "cmake embed (fadc::fadc_static)"; }
for exe in embed-pc ex/embed ex-static/embed; do
	readelf -d "$exe" | grep NEEDED >"$tmp/needed"
	if grep -Eiq 'llvm|nvrtc' "$tmp/needed"; then fail "$exe links $(cat "$tmp/needed")"; fi
done
grep -q 'libfadc\.so\.' <(readelf -d embed-pc) || fail "embed-pc does not link libfadc.so"
grep -q 'libfadc\.so\.' <(readelf -d ex/embed) || fail "ex/embed does not link libfadc.so"
grep -q 'libfadc' <(readelf -d ex-static/embed) && fail "ex-static/embed links libfadc.so"

step "4. embed's gradient norms against fadc run's .npy files"
python3 "$src/tests/install/tensors.py" norms so >so.norms || fail "norms of so/"
python3 "$src/tests/install/tensors.py" norms ir >ir.norms || fail "norms of ir/"
python3 "$src/tests/install/tensors.py" norms so-p >so-p.norms || fail "norms of so-p/"
python3 "$src/tests/install/tensors.py" norms ir-p >ir-p.norms || fail "norms of ir-p/"
[ "$(grep -c ': norm ' so.norms)" -eq 3 ] || fail "expected 3 gradients: $(cat so.norms)"
for exe in embed-pc ex/embed ex-static/embed; do
	"./$exe" m.so >out 2>&1 || fail "$exe m.so: $(cat out)"
	"./$exe" m.so beta.safetensors >out-p 2>&1 || fail "$exe m.so beta.safetensors: $(cat out-p)"
	grep -qx "bound 1 declarations from beta.safetensors" out-p || fail "$exe: $(cat out-p)"
	echo "$exe, initializers:"
	python3 "$src/tests/install/tensors.py" compare out so.norms 1e-8 || fail "$exe against fadc run m.so"
	python3 "$src/tests/install/tensors.py" compare out ir.norms 1e-5 normwise || fail "$exe against the interpreter"
	echo "$exe, beta_value from beta.safetensors:"
	python3 "$src/tests/install/tensors.py" compare out-p so-p.norms 1e-8 ||
		fail "$exe --params against fadc run m.so"
	python3 "$src/tests/install/tensors.py" compare out-p ir-p.norms 1e-5 normwise ||
		fail "$exe --params against the interpreter"
done
# The binding took effect: beta_value's gradient norm moved.
python3 "$src/tests/install/tensors.py" compare so-p.norms so.norms 1e-3 >/dev/null &&
	fail "beta_value bound from the file left the norms as the initializer's"
# Bad input: a usage error (2), a file that is no artifact (1, named).
./embed-pc >out 2>&1
[ $? -eq 2 ] || fail "embed without arguments: not exit 2: $(cat out)"
./embed-pc ones.npy >out 2>&1
[ $? -eq 1 ] && grep -q 'ones.npy' out || fail "embed ones.npy: $(cat out)"

step "5. the installed fadc-bench, traced"
mv "$root" "$tmp/stage$prefix" || fail "mv back"
root=$tmp/stage$prefix
traced "$tmp/trace2" "$root/bin/fadc-bench" --model-filter ppl_simple_reg --task-filter vjp \
	--reduced --num-iters 1 --gpu -1 --compile --output bench.md --json bench.json >"$tmp/bench" 2>&1 ||
	fail "installed fadc-bench: $(cat "$tmp/bench")"
grep -q 'ppl_simple_reg' bench.md || fail "fadc-bench's table: $(cat bench.md)"
ls "$FADC_CACHE_DIR"/artifacts/*.so >/dev/null 2>&1 || fail "no artifact in $FADC_CACHE_DIR/artifacts"
traced "$tmp/trace2" "$root/bin/fadc-bench" compare --plot chart.png bench.json >"$tmp/bench" 2>&1 ||
	fail "installed fadc-bench compare --plot: $(cat "$tmp/bench")"
[ -s chart.png ] || fail "fadc-bench compare --plot wrote no chart"
untouched "$tmp/trace2" "the installed fadc-bench"
grep -q "^[a-z0-9_]* $root/bin/\.\./share/fadc/bench/bench\.yaml\$" "$tmp/trace2" ||
	fail "fadc-bench did not read the installed bench.yaml"
grep -q "^[a-z0-9_]* $root/bin/\.\./share/fadc/bench/plot\.py\$" "$tmp/trace2" ||
	fail "fadc-bench compare --plot did not run the installed plot.py"

step "6. make uninstall"
mkdir -p "$root/$libdir" && echo other >"$root/$libdir/other.txt"
make -C "$src" --no-print-directory uninstall PREFIX=$prefix DESTDIR="$tmp/stage" >"$tmp/uninstall.log" 2>&1 ||
	{ cat "$tmp/uninstall.log"; fail "make uninstall"; }
[ -f "$root/$libdir/other.txt" ] || fail "make uninstall removed a file it did not install"
rm "$root/$libdir/other.txt"
left=$(find "$tmp/stage" ! -type d; find "$root" -mindepth 1 -name '*fadc*')
[ -z "$left" ] || fail "left after make uninstall: $left"
make -C "$src" --no-print-directory uninstall PREFIX=$prefix DESTDIR="$tmp/stage" >"$tmp/uninstall.log" 2>&1 &&
	fail "a second make uninstall succeeded"
grep -q "install-manifest.txt: no such file: fadc is not installed under $root" "$tmp/uninstall.log" ||
	fail "a second make uninstall: $(cat "$tmp/uninstall.log")"
echo "install: ok"
