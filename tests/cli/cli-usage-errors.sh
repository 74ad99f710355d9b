# RUN: bash %s
# Usage errors exit 2, and the first line of stderr names the culprit;
# none of them writes anything.
source "$(dirname "$0")/common.bash"
model=$SRC/models/ppl_simple_reg.ir

run_fadc 2 "$model" --emit ir --frobnicate
err_first "fadc: error: unknown option '--frobnicate'"
run_fadc 2 run "$model" --out "$tmp/o" --frobnicate
err_first "fadc: error: unknown option '--frobnicate'"
run_fadc 2 inspect "$tmp/m.so" --frobnicate
err_first "fadc: error: unknown option '--frobnicate'"
run_fadc 2 check "$model" --frobnicate
err_first "fadc: error: unknown option '--frobnicate'"
run_fadc 2 compare-npy a.npy b.npy --frobnicate
err_first "fadc: error: unknown option '--frobnicate'"

# Options that need a value, given none.
for opt in --emit -D --task --tasks -o --target --cpu --print-after --stop-after; do
	run_fadc 2 "$model" $opt
	err_first "fadc: error: $opt needs a value"
done
for opt in --out --params --v --seed --task --time -D; do
	run_fadc 2 run "$model" $opt
	err_first "fadc: error: $opt needs a value"
done

run_fadc 2 "$model"
err_first "fadc: error: nothing to do: give --emit ir or -o FILE"
run_fadc 2 "$model" --emit asm
err_first "fadc: error: --emit: unknown kind 'asm' (ir, kir, llvm, cuda)"
run_fadc 2 --emit ir
err_first "fadc: error: no model given"
run_fadc 2 "$model" "$model" --emit ir
err_first "fadc: error: more than one model given ('$model')"

# Tasks and passes: unknown names list what there is.
run_fadc 2 "$model" --emit ir --task backward
err_first "fadc: error: unknown task 'backward'"
run_fadc 2 "$model" --emit ir --task vjp --print-after=simplify,cse
err_first "fadc: error: --print-after: unknown pass 'cse' (the passes: simplify, vjp, jvp, vmap, scan_hoist)"
run_fadc 2 "$model" --emit ir --task vjp --stop-after dce
err_first "fadc: error: --stop-after: unknown pass 'dce' (the passes: simplify, vjp, jvp, vmap, scan_hoist)"
run_fadc 2 "$model" --emit ir --task vjp --stop-after=vjp,jvp
err_first "fadc: error: --stop-after takes one pass ('vjp,jvp')"
run_fadc 2 "$model" --emit ir --stats
err_first "fadc: error: pass options and --stats need --task T (the passes run on a task's graph)"
run_fadc 2 "$model" --emit ir --print-after-all
err_first "fadc: error: pass options and --stats need --task T (the passes run on a task's graph)"

# Compile options belong to -o, and -o to no --emit ir / --task.
run_fadc 2 "$model" -o "$tmp/m.so" --tasks vjp,backward
err_first "fadc: error: --tasks: unknown task 'backward'"
run_fadc 2 "$model" -o "$tmp/m.so" --target gpu
err_first "fadc: error: --target: unknown target 'gpu' (cpu, cuda, cpu,cuda)"
run_fadc 2 "$model" -o "$tmp/m.so" --target cuda --cuda-arch 90
err_first "fadc: error: --cuda-arch: '90' is not sm_XX (sm_90)"
run_fadc 2 "$model" -o "$tmp/m.so" -O4
err_first "fadc: error: unknown option '-O4'"
run_fadc 2 "$model" -o "$tmp/m.so" --emit ir
err_first "fadc: error: --emit ir prints IR and compiles nothing: drop -o or --emit"
run_fadc 2 "$model" -o "$tmp/m.so" --task vjp
err_first "fadc: error: --task is for --emit ir and run; -o compiles --tasks LIST"
run_fadc 2 "$model" -o "$tmp/m.so" --stop-after=vjp
err_first "fadc: error: --print-after, --print-after-all and --stop-after need --emit ir --task T"
run_fadc 2 "$model" --emit kir
err_first "fadc: error: --emit kir needs -o FILE (it prints what compiling makes)"
run_fadc 2 "$model" --emit ir --tasks vjp
err_first "fadc: error: --tasks, --target, --cuda-arch, --cpu, -O, --f64 and --max-task-bytes need -o FILE"
run_fadc 2 "$model" --emit ir -O3
err_first "fadc: error: --tasks, --target, --cuda-arch, --cpu, -O, --f64 and --max-task-bytes need -o FILE"

run_fadc 2 run "$model"
err_first "fadc: error: --out DIR is required (or --print, to print only)"
run_fadc 2 run --out "$tmp/o"
err_first "fadc: error: no model given"
run_fadc 2 run "$model" --out "$tmp/o" --seed -3
err_first "fadc: error: --seed: '-3' is not a non-negative integer"
run_fadc 2 run "$model" --out "$tmp/o" --seed 12abc
err_first "fadc: error: --seed: '12abc' is not a non-negative integer"
run_fadc 2 run "$model" --out "$tmp/o" --seed 99999999999999999999999
err_first "fadc: error: --seed: '99999999999999999999999' is not a non-negative integer"
run_fadc 2 run "$model" --out "$tmp/o" --task backward
err_first "fadc: error: unknown task 'backward'"
run_fadc 2 run "$model" --out "$tmp/o" --params weights.txt
err_first "fadc: error: --params weights.txt: expected a .npy or .safetensors file, or NAME=FILE.npy"
run_fadc 2 run "$model" --out "$tmp/o" --params =w.npy
err_first "fadc: error: --params =w.npy: expected a .npy or .safetensors file, or NAME=FILE.npy"
run_fadc 2 run "$model" --out "$tmp/o" --v v=values.txt
err_first "fadc: error: --v v=values.txt: expected a .npy or .safetensors file, or NAME=FILE.npy"
run_fadc 2 run "$model" --out "$tmp/o" --time 0
err_first "fadc: error: --time: '0' is not an integer 1 .. 1000000"
run_fadc 2 run "$model" --out "$tmp/o" --time 10
err_first "fadc: error: --time needs a compiled model (MODEL.so)"

run_fadc 2 compare-npy a.npy
err_first "fadc: error: give two .npy files or two folders"
run_fadc 2 compare-npy a.npy b.npy --rtol x
err_first "fadc: error: --rtol: 'x' is not a non-negative number"

# No usage error leaves an output behind.
[ -e "$tmp/o" ] && fail "a usage error created the output folder"
[ -e "$tmp/m.so" ] && fail "a usage error wrote an artifact"
exit 0
