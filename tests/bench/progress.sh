# RUN: bash %s
# Progress on stderr when it is a terminal (script(1) gives the run one):
# "[k/N] model task: iteration i/n", the cell's and the run's elapsed time
# and estimates of time left, N counting the cells the filters keep; quiet
# when stderr is not a terminal.
set -eu
command -v script > /dev/null || exit 77
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
run="$FADC_BENCH --backend interp --num-iters 3 --model-filter ppl_simple_reg,ppl_robust_reg --task-filter vjp,jvp --output $out/t.md"
script -qfec "$run > /dev/null" /dev/null > "$out/tty" 2>&1
tr '\r' '\n' < "$out/tty" > "$out/lines"
grep -qE '^\[1/4\] ppl_simple_reg vjp: iteration 1/3, [0-9.]+s elapsed, ~[0-9.]+s left \(run: [0-9.]+s elapsed, ~[0-9.]+s left\)  $' "$out/lines"
grep -qE '^\[4/4\] ppl_robust_reg jvp: iteration 3/3, [0-9.]+s elapsed, ~0\.0s left \(run: [0-9.]+s elapsed, ~0\.0s left\)  $' "$out/lines"
[ "$(grep -c ': iteration ' "$out/lines")" -eq 12 ]
# Not a terminal: no progress at all.
$run > /dev/null 2> "$out/err"
if grep -q 'iteration' "$out/err"; then exit 1; fi
