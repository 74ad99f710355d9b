# RUN: bash %s
# Filters keep a name when it occurs in the filter string (the seed's
# `name in filter`): "hessian_fwdrev" also admits "hessian" (and nothing
# else of ppl_simple_reg's ALL_TASKS); "ppl_simple_reg,resnet" admits
# ppl_simple_reg but not resnet18.  One iteration: the variance is nan.
set -eu
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$FADC_BENCH" --backend interp --num-iters 1 --task-filter hessian_fwdrev \
    --model-filter ppl_simple_reg,resnet --output "$out/t.md" > "$out/log" 2>&1
cut -d'|' -f2,3 "$out/t.md" > "$out/got"
printf ' model | task \n -- | -- \n ppl_simple_reg | hessian \n ppl_simple_reg | hessian_fwdrev \n' > "$out/want"
diff -u "$out/want" "$out/got"
# var of one sample is nan, mean a number
awk -F'|' 'NR > 2 { if ($5 !~ / nan /) exit 1; if ($4 ~ /nan/) exit 1 }' "$out/t.md"
# console lines as the seed prints them
grep -q '^Results for model ppl_simple_reg on task hessian: .*s (var: nan)$' "$out/log"
# --run-slow-tasks runs ALL_TASKS (unsupported ones excepted)
"$FADC_BENCH" --backend interp --num-iters 0 --run-slow-tasks --model-filter ppl_simple_reg \
    --output "$out/all.md" > /dev/null 2>&1
[ "$(wc -l < "$out/all.md")" -eq 12 ]
