# RUN: bash %s
# The stated limit on a task's size (docs/CODEGEN.md, "Memory plan"): a
# task whose outputs plus intermediates exceed --max-task-bytes (64 GiB by
# default) is an error naming both numbers, with exit status 1 and no
# artifact written.  Outputs are checked from the task graph's shapes
# before any kernel is built.  The expected byte counts are derived by
# hand from the parameter counts (4 bytes per f32 entry of the Hessian).
source "$(dirname "$0")/common.bash"
model=$SRC/models/resnet18.ir

# resnet18 at full size has 11,689,512 parameters (the model's header,
# tests/data/params/resnet18.tsv): its Hessian is 4 * 11689512^2 bytes.
run_fadc 1 "$model" --tasks hessian -o "$tmp/full.so"
err_first "$model: error: task 'hessian' of resnet18 needs 546578763192576 bytes of outputs (limit 68719476736); reduce the sizes with -D NAME=VALUE or raise --max-task-bytes"
[ -e "$tmp/full.so" ] && fail "a refused task wrote the artifact"
# With a limit above its outputs, it is the intermediates (the memory plan
# of a vmapped vjp over 11.7 million basis vectors) that do not fit.
run_fadc 1 "$model" --tasks hessian -o "$tmp/full.so" --max-task-bytes 1024T
err_has " bytes (outputs 546578763192576, intermediates "
err_has "; limit 1125899906842624); reduce the sizes"
[ -e "$tmp/full.so" ] && fail "a refused task wrote the artifact"

# With C=1, NCLS=10: stem 147 + 2 (batch norm), layer1 2 * (9+2+9+2) = 44,
# layer2 (18+4+36+4+2+4) + (36+4+36+4) = 148, layer3 (72+8+144+8+8+8) +
# (144+8+144+8) = 552, layer4 (288+16+576+16+32+16) + (576+16+576+16) =
# 2128, fc 8*10+10 = 90: 3111 parameters, a Hessian of 4 * 3111^2 =
# 38713284 bytes, which passes (-O0: the check, not the code, is tested).
small="-D N=2 -D H=32 -D C=1 -D NCLS=10"
run_fadc 0 "$model" $small --tasks hessian -O0 -o "$tmp/small.so" --stats
err_has "task hessian "
grep -F "task hessian " "$tmp/err" | grep -qF "outputs 38713284 bytes" || fail "hessian's outputs are not 38713284 bytes"
[ -s "$tmp/small.so" ] || fail "the reduced hessian was not written"
# One byte less than its outputs is refused before lowering.
run_fadc 1 "$model" $small --tasks hessian -O0 -o "$tmp/small2.so" --max-task-bytes 38713283
err_first "$model: error: task 'hessian' of resnet18 needs 38713284 bytes of outputs (limit 38713283); reduce the sizes with -D NAME=VALUE or raise --max-task-bytes"
[ -e "$tmp/small2.so" ] && fail "a refused task wrote the artifact"
# Outputs fit but the intermediates do not: the second check, after the
# memory plan, names both parts.
run_fadc 1 "$model" $small --tasks hessian -O0 -o "$tmp/small2.so" --max-task-bytes 38713284
err_has "error: task 'hessian' of resnet18 needs "
err_has " bytes (outputs 38713284, intermediates "
err_has "; limit 38713284); reduce the sizes"
[ -e "$tmp/small2.so" ] && fail "a refused task wrote the artifact"
# An existing artifact is left as it was.
cp "$tmp/small.so" "$tmp/keep.so"
run_fadc 1 "$model" --tasks hessian -o "$tmp/keep.so"
cmp -s "$tmp/small.so" "$tmp/keep.so" || fail "a refused compile changed the existing artifact"

# Bad values are usage errors.
for v in 0 -5 12X 1.5G "" 99999999999T; do
	run_fadc 2 "$model" --tasks vjp -o "$tmp/bad.so" --max-task-bytes "$v"
	err_has "--max-task-bytes: '$v' is not a positive size"
done
run_fadc 2 "$model" --emit ir --max-task-bytes 1G
err_has "need -o FILE"
exit 0
