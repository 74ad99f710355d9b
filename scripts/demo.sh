#!/bin/sh
# The main job on a bundled model: compile models/ppl_simple_reg.ir with the
# reference interpreter and print its results.
set -e
build=${1:-build}
out=$build/demo
"$build/bin/fadc" run models/ppl_simple_reg.ir --task forward --out "$out" --print
