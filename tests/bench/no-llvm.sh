# RUN: bash %s
# fadc-bench never links LLVM: it runs the compiler as another process.
# Neither a shared library nor a symbol of LLVM's is in the executable.
set -eu
command -v ldd > /dev/null && command -v nm > /dev/null || exit 77
[ -x "$FADC_BENCH" ]
if ldd "$FADC_BENCH" | grep -i llvm; then echo "no-llvm: fadc-bench loads LLVM"; exit 1; fi
syms=$( { nm "$FADC_BENCH" 2> /dev/null || true; nm -D "$FADC_BENCH"; } )
[ -n "$syms" ]
if grep -E '(^| )[A-Za-z] _?(LLVM|_ZN4llvm)' <<< "$syms"; then
  echo "no-llvm: fadc-bench has LLVM symbols"; exit 1
fi
# The same check finds them where they are (the compiler links LLVM), so
# a silent nm would not pass for a clean fadc-bench.
cc=$FADC
{ nm "$cc" 2> /dev/null || true; nm -D "$cc"; } | grep -qE '(^| )[A-Za-z] _?(LLVM|_ZN4llvm)'
