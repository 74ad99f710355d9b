# RUN: bash %s ppl_simple_reg ppl_robust_reg multiheadattn
# The seed's smoke test on the cpu backend (compiled artifacts): for each
# fast model named (all of them by default; cpu-smoke-zoo.sh runs the conv
# nets and the transformer, labelled slow: compiling them in the sanitizer
# build takes too long for CI), --compile --reduced --num-iters 0 --task-filter vjp
# --model-filter M --output F exits 0 and writes the header and one vjp row
# with nan mean and var.  A model the CPU backend cannot compile yet (scan
# and host ops: "not supported by the CPU backend yet") is reported and
# skipped: exit status 1, the reason on stderr, a table with no row, no
# crash.  The six models below must run.
set -eu
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
ran=0 skipped=0
models=${*:-resnet18 ppl_simple_reg ppl_robust_reg wav2letter transformer multiheadattn}
for m in $models; do
  [ -f "$FADC_SOURCE_DIR/models/$m.ir" ] || continue
  set +e
  "$FADC_BENCH" --backend cpu --compile --artifacts "$out/art" --reduced --num-iters 0 \
      --task-filter vjp --model-filter "$m" --output "$out/$m.md" > "$out/$m.log" 2>&1
  rc=$?
  set -e
  if [ $rc -eq 1 ] && grep -q "^fadc-bench: $m: skipped (1 cell): cannot compile: .*not supported by the CPU backend yet" "$out/$m.log"; then
    case $m in
      resnet18|ppl_simple_reg|ppl_robust_reg|wav2letter|transformer|multiheadattn)
        cat "$out/$m.log"; echo "smoke-cpu: $m must compile"; exit 1 ;;
    esac
    printf '| model | task | mean | var |\n| -- | -- | -- | -- |\n' | diff -u - "$out/$m.md"
    skipped=$((skipped + 1))
    continue
  fi
  [ $rc -eq 0 ] || { cat "$out/$m.log"; echo "smoke-cpu: $m: exit status $rc"; exit 1; }
  printf '| model | task | mean | var |\n| -- | -- | -- | -- |\n| %s | vjp | nan | nan |\n' "$m" \
      | diff -u - "$out/$m.md"
  ls "$out"/art/"$m"-*.cpu.so > /dev/null
  ran=$((ran + 1))
done
[ "$ran" -ge 1 ] || { echo "smoke-cpu: no model ran"; exit 1; }
echo "smoke-cpu: $ran models ran, $skipped skipped (not supported by the CPU backend yet)"
