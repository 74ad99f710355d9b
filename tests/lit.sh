#!/usr/bin/env bash
# tests/lit.sh FILE -- run the "# RUN:" lines of one golden test.
#
# Substitutions: %s the file (relative to its folder, where the lines run,
# so that diagnostics print the same path everywhere), %S its folder,
# %t a fresh temporary path (a folder that exists; %t.x names beside it),
# %fadc the compiler.  A line fails the test if its pipeline fails (bash
# -o pipefail).  `not CMD` inverts an exit status, `FileCheck` is LLVM 14's.
# Exit 77 from a line skips the test.
set -u
file=$1
dir=$(cd "$(dirname "$file")" && pwd)
base=$(basename "$file")
tmp=$(mktemp -d "${TMPDIR:-/tmp}/fadc-lit.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fadc=${FADC:-fadc}
# Every test compiles with a compile cache of its own, empty at its start
# (docs/CUDA.md, "The compile cache"): no test sees another's entries or
# the user's, and nothing is written under ~/.cache.  A test that sets
# FADC_CACHE_DIR itself overrides this.  (Unit tests and the CUDA-graph
# suite share build/test-cache: tests/tests.cmake.)
export FADC_CACHE_DIR="$tmp/cache"
export PATH="$(llvm-config-14 --bindir 2>/dev/null || echo /usr/lib/llvm-14/bin):$PATH"
not() { if "$@"; then return 1; else local rc=$?; [ $rc -lt 128 ] && [ $rc -ne 77 ] || return $rc; return 0; fi; }
export -f not
lines=$(grep -E '^[#/]+ RUN: ' "$file" | sed -E 's/^[#/]+ RUN: //')
if [ -z "$lines" ]; then
  echo "$file: no RUN lines" >&2
  exit 1
fi
cd "$dir" || exit 1
n=0
while IFS= read -r line; do
  n=$((n + 1))
  cmd=${line//%fadc/$fadc}
  cmd=${cmd//%s/$base}
  cmd=${cmd//%S/$dir}
  cmd=${cmd//%t/$tmp/t}
  mkdir -p "$tmp/t"
  bash -o pipefail -c "$cmd"
  rc=$?
  if [ $rc -eq 77 ]; then echo "skipped: RUN line $n: $line"; exit 77; fi
  if [ $rc -ne 0 ]; then
    echo "FAILED (exit $rc): RUN line $n: $cmd" >&2
    exit 1
  fi
done <<< "$lines"
exit 0
