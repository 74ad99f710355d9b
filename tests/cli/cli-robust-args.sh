# RUN: bash %s
# Command lines at the edges (issue 16): a binding or size given twice or
# naming nothing is an error, never a warning or a silent last-wins; usage
# errors are one reason and a pointer to --help, exit 2; options that do
# nothing say so.
source "$(dirname "$0")/common.bash"
model=$SRC/models/ppl_simple_reg.ir

# --- usage errors: the reason, then where the help is; nothing else -------
run_fadc 2 "$model" --frobnicate
[ "$(wc -l <"$tmp/err")" -eq 2 ] || { cat "$tmp/err" >&2; fail "a usage error printed more than two lines"; }
err_first "fadc: error: unknown option '--frobnicate'"
[ "$(sed -n 2p "$tmp/err")" = "try 'fadc --help' for more information" ] || fail "no pointer to --help"
run_fadc 2 run "$model" --frobnicate
[ "$(sed -n 2p "$tmp/err")" = "try 'fadc run --help' for more information" ] || fail "run: no pointer to its --help"
run_fadc 2 compare-npy a
[ "$(sed -n 2p "$tmp/err")" = "try 'fadc compare-npy --help' for more information" ] || fail "compare-npy: no pointer"

# --- a size given twice --------------------------------------------------
for cmd in "" run check; do
	run_fadc 2 $cmd "$model" -D N=3 -D N=4 --emit ir 2>/dev/null
	err_first "fadc: error: -D N=4: size 'N' is already given by -D N=3 (give it once; N=8,32 lists values for specialisations)"
done
run_fadc 2 "$model" -DN=3 -D N=3 --emit ir
err_has "size 'N' is already given by -D N=3"

# --- bindings that name nothing, or one name twice ------------------------
cat >"$tmp/beta.ir" <<'IR'
def forward() {
  return zeros(shape=[11, 1]) as beta_value
}
IR
run_fadc 0 run "$tmp/beta.ir" --out "$tmp/b"
run_fadc 1 run "$model" --params "nosuch=$tmp/b/beta_value.npy" --print
err_first "$tmp/b/beta_value.npy: error: tensor 'nosuch' is not a parameter, constant or argument of the model (its names: X, Y, beta_value; --allow-unused-params ignores such tensors)"
[ -s "$tmp/out" ] && fail "a run with a binding typo printed outputs"
# A .safetensors key with a typo (beta_valeu).
npy_data "$tmp/b/beta_value.npy" >"$tmp/beta.bin"
safetensors "$tmp/typo.safetensors" \
	'{"beta_valeu":{"dtype":"F32","shape":[11,1],"data_offsets":[0,44]}}' "$tmp/beta.bin"
run_fadc 1 run "$model" --params "$tmp/typo.safetensors" --print
err_first "$tmp/typo.safetensors: error: tensor 'beta_valeu' is not a parameter, constant or argument of the model (its names: X, Y, beta_value; --allow-unused-params ignores such tensors)"
run_fadc 0 run "$model" --params "$tmp/typo.safetensors" --allow-unused-params --print
err_first "$tmp/typo.safetensors: warning: tensor 'beta_valeu' is not a parameter, constant or argument of the model; ignored"
# The same name from a .safetensors file and a .npy file.
safetensors "$tmp/good.safetensors" \
	'{"beta_value":{"dtype":"F32","shape":[11,1],"data_offsets":[0,44]}}' "$tmp/beta.bin"
run_fadc 1 run "$model" --params "$tmp/good.safetensors" --params "$tmp/b/beta_value.npy" --print
err_first "$tmp/b/beta_value.npy: error: 'beta_value' is bound twice (also by $tmp/good.safetensors)"
# The same in a compiled model.
run_fadc 0 "$model" -o "$tmp/m.so" --tasks vjp
run_fadc 1 run "$tmp/m.so" --params "nosuch=$tmp/b/beta_value.npy" --print
err_has "tensor 'nosuch' is not a parameter, constant or argument of the model"
run_fadc 1 run "$tmp/m.so" --task vjp --params "$tmp/good.safetensors" --params "beta_value=$tmp/b/beta_value.npy" --print
err_has "'beta_value' is bound twice"

# --- bounds and options without effect -------------------------------------
run_fadc 2 run "$tmp/m.so" --time 1000001 --print
err_first "fadc: error: --time: '1000001' is not an integer 1 .. 1000000"
run_fadc 0 run "$tmp/m.so" --time 3 --print
err_has "us per call (3 calls)"
run_fadc 0 "$model" -o "$tmp/w.so" --tasks vjp --cuda-arch sm_90
err_first "fadc: warning: --cuda-arch sm_90 has no effect without --target cuda (or cpu,cuda)"
run_fadc 2 "$model" -o -
err_first "fadc: error: -o -: an artifact is a shared library, not text for standard output; give a file name"
[ -e ./- ] && fail "-o - created a file named -"
run_fadc 2 "$model" -o ""
err_first "fadc: error: -o: the file name is empty"
run_fadc 2 "$model" -o "$tmp/p.so" --cpu pentium
err_first "fadc: error: unknown --cpu 'pentium' (x86-64, x86-64-v2, x86-64-v3, x86-64-v4, generic, native)"
run_fadc 2 "$model" -o "$tmp/p.so" --target tpu
err_first "fadc: error: --target: unknown target 'tpu' (cpu, cuda, cpu,cuda)"

# --- --tasks all on a model whose forward is not a scalar ------------------
# The tasks that apply are compiled; the rest are named in a note.
cat >"$tmp/vec.ir" <<'IR'
param w: f32[3] = ones(shape=[3])
def forward() {
  return w * w
}
IR
run_fadc 0 "$tmp/vec.ir" -o "$tmp/vec.so" --tasks all
err_first "$tmp/vec.ir: note: --tasks all leaves out vhp, hvp, hessian, hessian_fwdrev, hessian_revrev: they do not apply to this model (vhp, hvp and the Hessians need forward to return one float scalar)"
run_fadc 0 inspect "$tmp/vec.so"
for t in forward vjp jvp jacobian jacrev jacfwd; do
	grep -q "^task $t" "$tmp/out" || grep -q "task $t\b" "$tmp/out" || { cat "$tmp/out" >&2; fail "--tasks all did not compile $t"; }
done
# The Jacobian of w*w is diag(2w) = 2 I at w = 1.
run_fadc 0 run "$tmp/vec.so" --task jacobian --print
out_has "[[2, 0, 0], [0, 2, 0], [0, 0, 2]]"

# --- one name and one measure: check --rtol and compare-npy --rtol ---------
# max|a - b| / max(|a|, |b|) over all elements: [1000, 1] against [1000, 2]
# is 1/1000 (a measure over the differing elements alone would say 1/2).
printf 'def forward() {\n  return concat([full(shape=[1], value=1000.0), full(shape=[1], value=1.0)], axis=0) as x\n}\n' >"$tmp/a.ir"
printf 'def forward() {\n  return concat([full(shape=[1], value=1000.0), full(shape=[1], value=2.0)], axis=0) as x\n}\n' >"$tmp/b.ir"
run_fadc 0 run "$tmp/a.ir" --out "$tmp/na"
run_fadc 0 run "$tmp/b.ir" --out "$tmp/nb"
run_fadc 0 compare-npy "$tmp/na/x.npy" "$tmp/nb/x.npy" --rtol 1e-3
out_has "normalized error 0.001"
run_fadc 1 compare-npy "$tmp/na/x.npy" "$tmp/nb/x.npy" --rtol 9e-4
out_has "ABOVE TOLERANCE"
run_fadc 0 check "$model" --tasks vjp --rtol 1e-5
out_has "tolerance 1e-05): ok"
run_fadc 0 check "$model" --tasks vjp --tol 1e-5
run_fadc 2 check "$model" --rtol inf
err_first "fadc: error: --rtol: 'inf' is not a non-negative number"
exit 0
