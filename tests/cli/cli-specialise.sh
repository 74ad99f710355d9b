# RUN: bash %s
# -D NAME=V1,V2,... with -o: one artifact holding the model compiled for
# every combination of the lists (docs/ARTIFACT.md, specialisations):
# byte-identical recompiles, `fadc inspect` listing them, `fadc run -D`
# picking one (its outputs equal the interpreter's at those sizes), and
# precise diagnostics for bad lists and for sizes that pick none or several.
source "$(dirname "$0")/common.bash"
model=$SRC/models/ppl_simple_reg.ir

run_fadc 0 "$model" -o "$tmp/a.so" -D N=2,3 -D K=4,5 --tasks forward,vjp
run_fadc 0 "$model" -o "$tmp/b.so" -D N=2,3 -DK=4,5 --tasks forward,vjp
cmp -s "$tmp/a.so" "$tmp/b.so" || fail "two compiles of the same specialisations differ"

run_fadc 0 inspect "$tmp/a.so"
out_has "options target=cpu cpu=x86-64-v3 opt=2 compute=f32 defines=N=2,3,K=4,5 tasks=forward,vjp"
out_has "specialisation 0: N=2,K=4"
out_has "specialisation 1: N=2,K=5"
out_has "specialisation 2: N=3,K=4"
out_has "specialisation 3: N=3,K=5"
grep -qE '^  decl beta_value +param +f32\[6, 1\] +\[N=3,K=5\]$' "$tmp/out" ||
	fail "inspect does not say which specialisation a declaration belongs to"
out_has "task forward [N=3,K=5]: "
out_has "task vjp [N=2,K=4]: "
[ "$(grep -c '^task forward \[' "$tmp/out")" = 4 ] || fail "inspect lists $(grep -c '^task forward' "$tmp/out") forward tasks, not 4"

# One value per size: the artifact as before, no specialisations listed.
run_fadc 0 "$model" -o "$tmp/one.so" -D N=3 --tasks forward
run_fadc 0 inspect "$tmp/one.so"
grep -q specialisation "$tmp/out" && fail "an artifact of one specialisation lists specialisations"
out_has "task forward: "

# run -D picks a specialisation; without -D, the first.  Each against the
# interpreter at those sizes.
run_fadc 0 run "$tmp/a.so" --task vjp -D N=3 -D K=5 --out "$tmp/so35"
run_fadc 0 run "$model" --task vjp -D N=3 -D K=5 --out "$tmp/ir35"
run_fadc 0 compare-npy "$tmp/so35" "$tmp/ir35" --rtol 1e-5
run_fadc 0 run "$tmp/a.so" --task forward --out "$tmp/so24"
run_fadc 0 run "$model" --task forward -D N=2 -D K=4 --out "$tmp/ir24"
run_fadc 0 compare-npy "$tmp/so24" "$tmp/ir24" --rtol 1e-5
run_fadc 0 run "$model" --task forward -D N=3 -D K=5 --out "$tmp/ir35f"
"$FADC" compare-npy "$tmp/so24" "$tmp/ir35f" --rtol 1e-5 >/dev/null 2>&1 &&
	fail "N=2,K=4 and N=3,K=5 give the same forward: the test cannot tell them apart"
run_fadc 0 run --help
out_has "pick the specialisation of those sizes"

run_fadc 1 run "$tmp/a.so" --task forward -D N=3 --print
err_first "$tmp/a.so: error: -D N=3 fits several specialisations: give more sizes (the specialisations: N=2,K=4, N=2,K=5, N=3,K=4, N=3,K=5)"
run_fadc 1 run "$tmp/a.so" --task forward -D N=7 -D K=4 --print
err_first "$tmp/a.so: error: -D N=7 K=4 is no specialisation of the artifact (the specialisations: N=2,K=4, N=2,K=5, N=3,K=4, N=3,K=5)"
run_fadc 1 run "$tmp/one.so" --task forward -D N=3 --print
err_first "$tmp/one.so: error: -D does not apply to a compiled model (its sizes were fixed when it was compiled)"

# Bad lists.
run_fadc 1 "$model" -o "$tmp/x.so" -D N=2,,3
err_first "$model: error: -D N=2,,3: value 2 of the list is empty"
run_fadc 1 "$model" -o "$tmp/x.so" -D N=2,3,
err_first "$model: error: -D N=2,3,: value 3 of the list is empty"
run_fadc 1 "$model" -o "$tmp/x.so" -D N= -D K=4,5
err_first "$model: error: -D N=: no value (NAME=VALUE, or NAME=V1,V2,... for specialisations)"
run_fadc 1 "$model" -o "$tmp/x.so" -D N=
err_first "$model: error: -D N=: the value must be an integer"
run_fadc 1 "$model" -o "$tmp/x.so" -D N=2,3,2
err_first "$model: error: -D N=2,3,2: the value 2 is listed twice"
run_fadc 2 "$model" -o "$tmp/x.so" -D N=2 -D N=3,4
err_first "fadc: error: -D N=3,4: size 'N' is already given by -D N=2 (give it once; N=8,32 lists values for specialisations)"
run_fadc 1 "$model" -o "$tmp/x.so" -D N=1,2,3,4,5 -D K=1,2,3,4
err_first "$model: error: -D K=1,2,3,4: the lists make more than 16 specialisations (one artifact holds at most 16)"
run_fadc 1 "$model" -o "$tmp/x.so" -D N=2,x
err_first "$model: error: -D N=x: the value must be an integer"
run_fadc 1 "$model" -o "$tmp/x.so" -D M=2,3
err_first "$model: error: -D M=2: the model has no size named 'M'"
[ -e "$tmp/x.so" ] && fail "a failed compile wrote its artifact"
run_fadc 2 "$model" --emit ir -D N=2,3
err_first "fadc: error: -D with a list of values (N=8,32) makes specialisations of an artifact: it needs -o FILE"
run_fadc 2 run "$model" --task forward -D N=2,3 --print
err_first "fadc: error: -D with a list of values is for compiling (fadc -o); run takes one value per size"
# 16 is allowed.
run_fadc 0 "$model" -o "$tmp/16.so" -D N=1,2,3,4 -D K=1,2,3,4 --tasks forward
run_fadc 0 inspect "$tmp/16.so"
out_has "specialisation 15: N=4,K=4"
exit 0
