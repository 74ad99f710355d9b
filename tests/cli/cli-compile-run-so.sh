# RUN: bash %s
# fadc MODEL.ir -o MODEL.so compiles every requested task into one
# artifact; fadc run MODEL.so takes the same flags as a .ir and writes the
# same files, equal to the interpreter's within f32 rounding (normalized
# error 1e-5, docs/CODEGEN.md).  Compiling twice gives the same bytes; a
# damaged artifact is an error naming the file.
source "$(dirname "$0")/common.bash"
m=$SRC/models/ppl_simple_reg.ir

# The default tasks: forward, then those the model declares (`tasks`,
# ALL_TASKS for ppl_simple_reg).
run_fadc 0 "$m" -o "$tmp/m.so" --stats
err_has "# stats: task vjp "
run_fadc 0 inspect "$tmp/m.so"
out_has "options target=cpu cpu=x86-64-v3 opt=2 compute=f32 defines= tasks=forward,vjp,vhp,jvp,hvp,jacobian,hessian,hessian_fwdrev,hessian_revrev,jacfwd,jacrev"
[ "$(grep '^task' "$tmp/out" | grep -vc '^task init\.')" -eq 11 ] || fail "expected 11 tasks: $(grep '^task' "$tmp/out")"

# vjp and hvp (and the rest) through the runtime equal the interpreter's,
# v drawn alike from the seed; another seed too; bound params too.
for t in forward vjp jvp vhp hvp; do
	run_fadc 0 run "$m" --task $t --out "$tmp/ir/$t"
	run_fadc 0 run "$tmp/m.so" --task $t --out "$tmp/so/$t"
	run_fadc 0 compare-npy "$tmp/ir/$t" "$tmp/so/$t" --rtol 1e-5
done
out_has "hvp.beta_value.npy: normalized error"
for seed in 7 18446744073709551615; do
	run_fadc 0 run "$m" --task vjp --seed $seed --out "$tmp/ir7"
	run_fadc 0 run "$tmp/m.so" --task vjp --seed $seed --out "$tmp/so7"
	run_fadc 0 compare-npy "$tmp/ir7" "$tmp/so7" --rtol 1e-5
done
cat >"$tmp/ramp.ir" <<'IR'
def forward() {
  r = reshape(iota(shape=[11], dtype=f32), [11, 1]) * 0.1
  return r as beta_value, ones(shape=[11, 1]) as v.beta_value
}
IR
run_fadc 0 run "$tmp/ramp.ir" --out "$tmp/ramp"
run_fadc 0 run "$m" --task hvp --params "$tmp/ramp/beta_value.npy" --v "$tmp/ramp/v.beta_value.npy" --out "$tmp/irp"
run_fadc 0 run "$tmp/m.so" --task hvp --params "$tmp/ramp/beta_value.npy" --v "$tmp/ramp/v.beta_value.npy" --out "$tmp/sop"
run_fadc 0 compare-npy "$tmp/irp" "$tmp/sop" --rtol 1e-5
cmp -s "$tmp/irp/hvp.beta_value.npy" "$tmp/ir/hvp/hvp.beta_value.npy" && fail "--params/--v changed nothing"

# A bare file name is the file in the current folder (not a library search).
(cd "$tmp" && "$FADC" run m.so --task forward --print >"$tmp/out" 2>"$tmp/err") || fail "run m.so: $(cat "$tmp/err")"
out_has "out: f32[] = "

# --tasks all, and several params (ppl_robust_reg, reduced), every task.
r=$SRC/models/ppl_robust_reg.ir
run_fadc 0 "$r" -D N=3 -D K=2 -o "$tmp/r.so" --tasks all -O1
for t in forward vjp jvp vhp hvp jacobian jacrev jacfwd hessian hessian_fwdrev hessian_revrev; do
	run_fadc 0 run "$r" -D N=3 -D K=2 --task $t --out "$tmp/rir/$t"
	run_fadc 0 run "$tmp/r.so" --task $t --out "$tmp/rso/$t"
	run_fadc 0 compare-npy "$tmp/rir/$t" "$tmp/rso/$t" --rtol 1e-5
done

# Determinism: the same input twice, the same bytes.
run_fadc 0 "$m" -o "$tmp/a.so" --tasks vjp,hvp
run_fadc 0 "$m" -o "$tmp/b.so" --tasks vjp,hvp
cmp "$tmp/a.so" "$tmp/b.so" || fail "two compilations differ"

# A task the artifact lacks; -D on an artifact (the CUDA target: tests/cuda/).
run_fadc 1 run "$tmp/a.so" --task jvp --out "$tmp/no"
err_first "$tmp/a.so: error: the artifact has no task 'jvp' (it has: forward, vjp, hvp); compile it with --tasks jvp"
run_fadc 1 run "$tmp/a.so" --task vjp -D N=3 --out "$tmp/no"
err_first "$tmp/a.so: error: -D does not apply to a compiled model (its sizes were fixed when it was compiled)"
run_fadc 2 "$m" -o "$tmp/c.so" --cpu pentium9
err_first "fadc: error: unknown --cpu 'pentium9' (x86-64, x86-64-v2, x86-64-v3, x86-64-v4, generic, native)"
run_fadc 1 "$m" -o "$tmp/none/c.so"
# (fileio's message names the temporary file it could not create there)
case $(head -n 1 "$tmp/err") in
"$tmp/none/c.so: error: "*"No such file or directory") ;;
*) fail "unexpected message: $(head -n 1 "$tmp/err")" ;;
esac
[ -e "$tmp/c.so" ] && fail "a failed compilation wrote an artifact"
# A vector-valued forward: the default tasks leave out vhp and hvp.
cat >"$tmp/vec.ir" <<'IR'
param w: f32[3] = uniform(0, 1, seed=1)

def forward() -> f32[3] {
  return exp(w)
}
IR
run_fadc 0 "$tmp/vec.ir" -o "$tmp/vec.so"
run_fadc 0 inspect "$tmp/vec.so"
out_has "tasks=forward,vjp,jvp"

# Damaged artifacts: exit 1, a message naming the file, no output.
cp "$tmp/a.so" "$tmp/flip.so"
printf 'XXXX' | dd of="$tmp/flip.so" bs=1 seek=3000 conv=notrunc 2>/dev/null
run_fadc 1 run "$tmp/flip.so" --task vjp --out "$tmp/no"
err_first "$tmp/flip.so: error: corrupt artifact: checksum mismatch (the file was modified or damaged after it was written)"
head -c 3000 "$tmp/a.so" >"$tmp/cut.so"
run_fadc 1 run "$tmp/cut.so" --task vjp --out "$tmp/no"
err_has "$tmp/cut.so: error: not a fadc artifact"
run_fadc 1 run "$tmp/missing.so" --task vjp --out "$tmp/no"
err_has "$tmp/missing.so: error: "
[ -e "$tmp/no" ] && fail "a failed run created its output folder"
exit 0
