# RUN: bash %s
# Models of bench/bench.yaml (those named, else every one), every task of
# their lists, on the cpu backend at reduced sizes (--compile --reduced):
# each compiles, every warm-up passes its consistency check and, with
# --check-reference, matches the float64 reference interpreter within the
# model's rtol.  Rows per model: 3 (FAST_TASKS) for resnet18, fcn_resnet,
# detr, wav2letter, transformer and multiheadattn, 10 (ALL_TASKS) for the
# two ppl models, 1 (vjp) for deepspeech.  The RUN line runs every model
# (about a minute of compiling on the 2-core machine since kernels are shared
# and big tasks call them: docs/CODEGEN.md).
# `zoo` in the name labels it slow: the sanitizer run leaves it out.
set -eu
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
declare -A want=([resnet18]=3 [fcn_resnet]=3 [detr]=3 [ppl_simple_reg]=10 [ppl_robust_reg]=10
                 [wav2letter]=3 [deepspeech]=1 [transformer]=3 [multiheadattn]=3)
models=${*:-${!want[*]}}
filter=$(tr ' ' ',' <<< "$models")
total=0
for m in $models; do total=$((total + want[$m])); done
"$FADC_BENCH" --backend cpu --compile --artifacts "$out/art" --reduced --num-iters 1 \
    --check-reference --model-filter "$filter" --output "$out/t.md" --json "$out/j.json" \
    > "$out/log" 2> "$out/err" || { cat "$out/err"; exit 1; }
if grep -q 'skipped\|INCONSISTENT\|MISMATCH\|could not run' "$out/err"; then cat "$out/err"; exit 1; fi
for m in $models; do
  n=$(grep -c "^| $m | [a-z_]* | [0-9.e-]* | nan |$" "$out/t.md" || true)
  [ "$n" -eq "${want[$m]}" ] || { echo "cpu-all-zoo: $m: $n rows, want ${want[$m]}"; cat "$out/t.md"; exit 1; }
done
[ "$(wc -l < "$out/t.md")" -eq $((2 + total)) ]
python3 - "$out/j.json" "$total" <<'PY'
import json, sys
cells = json.load(open(sys.argv[1]))["cells"]
assert len(cells) == int(sys.argv[2]), len(cells)
for c in cells:
    assert c["consistent"] and c["reference_match"], c
    assert c["reference_error"] is not None and c["reference_error"] <= 1e-3, c
    assert c["artifact_options"].startswith("target=cpu"), c
worst = max(cells, key=lambda c: c["reference_error"])
print("cpu-all-zoo: %d cells; worst reference error %.3g (%s %s)" % (len(cells), worst["reference_error"], worst["model"], worst["task"]))
PY
