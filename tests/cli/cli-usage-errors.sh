# RUN: bash %s
# Usage errors exit 2, and the first line of stderr names the culprit.
source "$(dirname "$0")/common.bash"
model=$SRC/models/ppl_simple_reg.ir

run_fadc 2 "$model" --emit ir --frobnicate
err_first "fadc: unknown option '--frobnicate'"
run_fadc 2 run "$model" --out "$tmp/o" --frobnicate
err_first "fadc: unknown option '--frobnicate'"

# Options that need a value, given none.
for opt in --emit -D; do
	run_fadc 2 "$model" $opt
	err_first "fadc: $opt needs a value"
done
for opt in --out --params --seed --task -D; do
	run_fadc 2 run "$model" $opt
	err_first "fadc: $opt needs a value"
done

run_fadc 2 "$model"
err_first "fadc: nothing to do: give --emit ir (code generation comes later)"
run_fadc 2 "$model" --emit llvm
err_first "fadc: --emit: unknown kind 'llvm' (ir)"
run_fadc 2 --emit ir
err_first "fadc: no model given"
run_fadc 2 "$model" "$model" --emit ir
err_first "fadc: more than one model given ('$model')"

run_fadc 2 run "$model"
err_first "fadc: --out DIR is required"
run_fadc 2 run --out "$tmp/o"
err_first "fadc: no model given"
run_fadc 2 run "$model" --out "$tmp/o" --seed -3
err_first "fadc: --seed: '-3' is not a non-negative integer"
run_fadc 2 run "$model" --out "$tmp/o" --seed 12abc
err_first "fadc: --seed: '12abc' is not a non-negative integer"
run_fadc 2 run "$model" --out "$tmp/o" --seed 99999999999999999999999
err_first "fadc: --seed: '99999999999999999999999' is not a non-negative integer"
run_fadc 2 run "$model" --out "$tmp/o" --task backward
err_first "fadc: unknown task 'backward'"
run_fadc 2 run "$model" --out "$tmp/o" --params weights.txt
err_first "fadc: --params weights.txt: expected a .npy or .safetensors file, or NAME=FILE.npy"
run_fadc 2 run "$model" --out "$tmp/o" --params =w.npy
err_first "fadc: --params =w.npy: expected a .npy or .safetensors file, or NAME=FILE.npy"

# No usage error leaves an output behind.
[ -e "$tmp/o" ] && fail "a usage error created the output folder"
exit 0
