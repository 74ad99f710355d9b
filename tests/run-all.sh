#!/usr/bin/env bash
# tests/run-all.sh BUILD -- the whole test suite, as `make test` runs it:
#   1. every test of the normal build (ctest, in parallel);
#   2. an ASan+UBSan build (clang-14) of the libraries, the unit tests, the
#      golden tests and the fuzzer; its tests run again under the sanitizers,
#      except those labelled `slow` (whole models in the interpreter);
#   3. the libFuzzer harness over the frontend for FADC_FUZZ_SECONDS (60).
# Ends with one line "N passed, M failed" and exits non-zero on a failure.
set -u
build=${1:-build}
root=$(cd "$(dirname "$0")/.." && pwd)
jobs=$(nproc 2>/dev/null || echo 2)
pass=0 fail=0 skip=0
log=$(mktemp)

count() { # reads ctest's summary: "N% tests passed, F tests failed out of T"
  local sum f t s
  sum=$(grep -E 'tests passed, [0-9]+ tests? failed out of [0-9]+' "$1" | tail -1)
  if [ -z "$sum" ]; then fail=$((fail + 1)); return; fi   # ctest did not finish
  f=$(echo "$sum" | sed -E 's/.* ([0-9]+) tests? failed out of ([0-9]+).*/\1/')
  t=$(echo "$sum" | sed -E 's/.* failed out of ([0-9]+).*/\1/')
  s=$(grep -cE '\(Skipped\)' "$1")
  pass=$((pass + t - f - s)); fail=$((fail + f)); skip=$((skip + s))
}

echo "== tests: $build"
(cd "$build" && ctest -j "$jobs" --output-on-failure --timeout 600) 2>&1 | tee "$log"
count "$log"

asan=$root/build-asan
echo "== tests under ASan+UBSan: $asan"
if command -v clang-14 >/dev/null; then
  cmake -S "$root" -B "$asan" -DCMAKE_C_COMPILER=clang-14 -DCMAKE_BUILD_TYPE=Debug \
        -DFADC_SANITIZE=ON -DFADC_FUZZ=ON >/dev/null &&
  cmake --build "$asan" -j "$jobs" >/dev/null 2>"$log.build" || { cat "$log.build"; fail=$((fail + 1)); }
  if [ -x "$asan/bin/fadc" ]; then
    (cd "$asan" && ASAN_OPTIONS=detect_leaks=1 ctest -j "$jobs" -LE slow --output-on-failure --timeout 900) 2>&1 | tee "$log"
    count "$log"
    secs=${FADC_FUZZ_SECONDS:-60}
    # A fixed seed makes the run repeatable: the mutations CI tries in its
    # minute are the first minute of the same run anywhere, so a longer run
    # here with the same seed covers them (FADC_FUZZ_SEED=0 picks one at random).
    seed=${FADC_FUZZ_SEED:-1}
    echo "== fuzzing the frontend for ${secs}s (seed $seed)"
    crashdir=$(mktemp -d)
    corpus=$(mktemp -d)
    cp "$root"/tests/fuzz/corpus/* "$corpus"/ 2>/dev/null
    if (cd "$crashdir" && "$asan/bin/fuzz_parse" -seed="$seed" -max_total_time="$secs" -max_len=4096 \
          -timeout=10 -rss_limit_mb=2048 -dict="$root/tests/fuzz/ir.dict" \
          "$corpus" "$root/tests/parse" "$root/models" >"$log" 2>&1); then
      echo "fuzz: no crash ($(grep -oE '#[0-9]+' "$log" | tail -1) runs)"
      pass=$((pass + 1))
    else
      tail -40 "$log"
      echo "fuzz: crash inputs kept in $crashdir (commit them to tests/fuzz/regress)"
      fail=$((fail + 1))
    fi
    rm -rf "$corpus"
  fi
else
  echo "clang-14 missing: sanitizer build not run"; fail=$((fail + 1))
fi
rm -f "$log" "$log.build"
[ "$skip" -gt 0 ] && echo "($skip skipped: no GPU or no CUDA toolkit)"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
