#!/bin/sh
# The main job on a bundled model: compile models/ppl_simple_reg.ir to a
# shared library, run its tasks through the runtime, check them against the
# float64 reference interpreter, and time them with fadc-bench.
set -e
build=${1:-build}
out=$build/demo
mkdir -p "$out"
fadc="$build/bin/fadc"
echo "== compile: fadc models/ppl_simple_reg.ir -o $out/ppl_simple_reg.so --tasks all"
"$fadc" models/ppl_simple_reg.ir -o "$out/ppl_simple_reg.so" --tasks all
for t in forward vjp hvp; do
	echo "== $t, compiled"
	"$fadc" run "$out/ppl_simple_reg.so" --task "$t" --out "$out/so-$t" --print
	"$fadc" run models/ppl_simple_reg.ir --task "$t" --out "$out/ir-$t" > /dev/null
	"$fadc" compare-npy "$out/ir-$t" "$out/so-$t" --rtol 1e-5
done
echo "== fadc-bench: every task, compiled, 100 iterations each"
"$build/bin/fadc-bench" --compile --artifacts "$out/artifacts" --model-filter ppl_simple_reg \
	--num-iters 100 --output "$out/bench.md"
cat "$out/bench.md"
