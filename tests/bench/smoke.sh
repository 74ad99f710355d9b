# RUN: bash %s
# The seed's smoke test (test_functional_autograd_benchmark.py), for each
# fast model present: --num-iters 0 --task-filter vjp --model-filter M
# --output F exits 0 and writes a non-empty, well-formed table: the header,
# the separator, and one vjp row with nan mean and var.  Reduced sizes, on
# the reference interpreter backend (CI has 2 cores).
set -eu
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
ran=0
for m in resnet18 ppl_simple_reg ppl_robust_reg wav2letter transformer multiheadattn; do
  [ -f "$FADC_SOURCE_DIR/models/$m.ir" ] || continue
  "$FADC_BENCH" --backend interp --reduced --num-iters 0 --task-filter vjp \
      --model-filter "$m" --output "$out/$m.md" > "$out/$m.log" 2>&1 || {
    cat "$out/$m.log"; echo "smoke: $m: exit status $?"; exit 1; }
  [ -s "$out/$m.md" ] || { echo "smoke: $m: empty table"; exit 1; }
  printf '| model | task | mean | var |\n| -- | -- | -- | -- |\n| %s | vjp | nan | nan |\n' "$m" > "$out/want"
  diff -u "$out/want" "$out/$m.md"
  ran=$((ran + 1))
done
[ "$ran" -ge 2 ] || { echo "smoke: no model ran"; exit 1; }
echo "smoke: $ran models"
