# RUN: bash %s
# -D NAME=VALUE (and -DNAME=VALUE) overrides a `let` size, for --emit ir
# and for run; a size the model lacks is an error.
source "$(dirname "$0")/common.bash"
model=$SRC/models/ppl_simple_reg.ir

run_fadc 0 "$model" --emit ir -D N=3
out_has "# sizes: N = 3, K = 10"
out_has "const X: f32[3, 11]"
run_fadc 0 "$model" --emit ir -DK=4 -D N=7
out_has "# sizes: N = 7, K = 4"
out_has "param beta_value: f32[5, 1]"

run_fadc 0 run "$model" --out "$tmp/n10" --print
run_fadc 0 run "$model" --out "$tmp/n3" --print -D N=3
cmp -s "$tmp/n10/out.npy" "$tmp/n3/out.npy" && fail "-D N=3 did not change the result"

run_fadc 1 "$model" --emit ir -D M=3
err_first "$model: error: -D M=3: the model has no size named 'M'"
run_fadc 1 run "$model" --out "$tmp/bad" -D N=ten
err_first "$model: error: -D N=ten: the value must be an integer"
run_fadc 1 run "$model" --out "$tmp/bad" -D N
err_first "$model: error: -D N: expected NAME=VALUE"
[ -e "$tmp/bad" ] && fail "a failed run created its output folder"
exit 0
