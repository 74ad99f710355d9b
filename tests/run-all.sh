#!/usr/bin/env bash
# tests/run-all.sh BUILD -- the whole test suite, as `make test` runs it:
#   1. every test of the normal build (ctest, in parallel);
#   2. an ASan+UBSan build (clang-14) of the libraries, the unit tests, the
#      golden tests and the fuzzer; its tests run again under the sanitizers,
#      except those labelled `slow` (whole models in the interpreter);
#   3. the libFuzzer harnesses (tests/fuzz: the frontend, the ONNX frontend, the .npy and
#      .safetensors readers, the bench YAML, the artifact descriptor),
#      sharing FADC_FUZZ_SECONDS (60) between them.
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
    # The minute is shared: each of the four file readers' harnesses (.npy,
    # .safetensors, the bench YAML, the artifact descriptor) and the ONNX
    # frontend's get a seventh, the IR frontend's (the largest surface:
    # lexer, parser, verifier, printer) the rest, so the shares add up to
    # FADC_FUZZ_SECONDS; at least 1 s each (0 would mean no limit to
    # libFuzzer).  Each runs from the same seed, so the whole split is
    # repeatable.
    share=$((secs / 7)); [ "$share" -ge 1 ] || share=1
    front=$((secs - 5 * share)); [ "$front" -ge 1 ] || front=1
    # fuzz NAME SECS REGRESS MAXLEN "OPTIONS" SEEDS...: one harness for its
    # share; new inputs go to a scratch copy of the seeds, crashes to a
    # folder that is kept (and named) for committing to REGRESS.
    fuzz() {
      local name=$1 s=$2 regress=$3 maxlen=$4 opts=$5 seeds=$6 crashdir corpus
      shift 6
      echo "== fuzzing $name for ${s}s (seed $seed)"
      crashdir=$(mktemp -d)
      corpus=$(mktemp -d)
      cp "$seeds"/* "$corpus"/ 2>/dev/null
      # shellcheck disable=SC2086 # opts: several options
      if (cd "$crashdir" && "$asan/bin/$name" -seed="$seed" -max_total_time="$s" -max_len="$maxlen" \
            -timeout=10 -rss_limit_mb=2048 $opts "$corpus" "$@" >"$log" 2>&1); then
        echo "$name: no crash ($(grep -oE '#[0-9]+' "$log" | tail -1) runs)"
        pass=$((pass + 1))
        rm -rf "$crashdir"
      else
        tail -40 "$log"
        echo "$name: crash inputs kept in $crashdir (commit them to tests/fuzz/$regress)"
        fail=$((fail + 1))
      fi
      rm -rf "$corpus"
    }
    fz=$root/tests/fuzz
    fuzz fuzz_parse "$front" regress 4096 "-dict=$fz/ir.dict" "$fz/corpus" "$root/tests/parse" "$root/models"
    # The readers check every size against the file's before allocating:
    # inputs are at most 16 KB, so a 64 MB allocation is a size taken on
    # trust from a header, and a crash.  Descriptors cut from real
    # artifacts run to 15 KB.
    fuzz fuzz_npy "$share" regress-npy 4096 "-dict=$fz/npy.dict -malloc_limit_mb=64" "$fz/corpus-npy"
    fuzz fuzz_safetensors "$share" regress-st 4096 "-dict=$fz/st.dict -malloc_limit_mb=64" "$fz/corpus-st"
    fuzz fuzz_config "$share" regress-yaml 8192 "-dict=$fz/yaml.dict -malloc_limit_mb=64" "$fz/corpus-yaml"
    fuzz fuzz_desc "$share" regress-desc 16384 "-malloc_limit_mb=64" "$fz/corpus-desc"
    # ONNX models: the seeds run to 22 KB (tests/data/onnx's torch exports);
    # values known at import total at most 2^24 elements (128 MB).
    fuzz fuzz_onnx "$share" regress-onnx 24576 "-malloc_limit_mb=512" "$fz/corpus-onnx" "$root/tests/data/onnx"
  fi
else
  echo "clang-14 missing: sanitizer build not run"; fail=$((fail + 1))
fi
rm -f "$log" "$log.build"
[ "$skip" -gt 0 ] && echo "($skip skipped: no GPU or no CUDA toolkit)"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
