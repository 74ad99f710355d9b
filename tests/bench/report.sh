# RUN: bash %s
# compare prints compare.py's table; --json has every sample; a failed
# consistency check is reported in the log and the table and the run goes
# on; a bad configuration is an error with file:line:col and runs nothing;
# unknown flags are usage errors (exit 2).
set -eu
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$FADC_BENCH" --backend interp --num-iters 2 --task-filter vjp,jvp --model-filter ppl_simple_reg \
    --output "$out/a.md" --json "$out/a.json" > /dev/null 2>&1
"$FADC_BENCH" --backend interp --num-iters 2 --task-filter vjp --model-filter ppl_simple_reg \
    --output "$out/b.md" > /dev/null 2>&1
"$FADC_BENCH" compare "$out/a.md" "$out/b.md" > "$out/cmp"
head -2 "$out/cmp" | diff - <(printf '| model | task | speedup | mean (before) | var (before) | mean (after) | var (after) |\n| -- | -- | -- | -- | -- | -- | -- |\n')
grep -qE '^\| ppl_simple_reg \| jvp \| None \| [0-9.e-]+ \| [0-9.e-]+ \| None \| None \|$' "$out/cmp"
grep -qE '^\| ppl_simple_reg \| vjp \| [0-9.e+-]+ \|' "$out/cmp"
grep -q '"samples": \[' "$out/a.json" && grep -q '"consistent": true' "$out/a.json"
[ "$(grep -o '"samples": \[[^]]*\]' "$out/a.json" | head -1 | tr ',' '\n' | wc -l)" -eq 2 ]
# A consistency failure (forced by the test hook) is reported, the run goes on.
FADC_BENCH_FAULT=check "$FADC_BENCH" --backend interp --num-iters 1 --task-filter vjp,jvp \
    --model-filter ppl_simple_reg --output "$out/f.md" > /dev/null 2> "$out/f.err"
grep -q 'ppl_simple_reg vjp: INCONSISTENT' "$out/f.err"
grep -q '| ppl_simple_reg | vjp \[inconsistent\] |' "$out/f.md"
grep -q '| ppl_simple_reg | jvp \[inconsistent\] |' "$out/f.md"
# Configuration errors.
printf 'task_lists:\n  ALL_TASKS: [vjp]\nmodels:\n  m: {source: x.ir, tasks: [vjp], tsks: 1}\n' > "$out/bad.yaml"
if "$FADC_BENCH" --config "$out/bad.yaml" --output "$out/x.md" 2> "$out/cfg.err"; then exit 1; fi
grep -q "bad.yaml:4:35: error: unknown key 'tsks' in model 'm'" "$out/cfg.err"
[ ! -e "$out/x.md" ]
# Usage errors.
set +e
"$FADC_BENCH" --nmu-iters 3 2> "$out/u.err"; rc=$?
set -e
[ "$rc" -eq 2 ] && grep -q "unknown option '--nmu-iters'" "$out/u.err"
