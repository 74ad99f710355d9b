# RUN: bash %s
# fadc run MODEL.ir --task T runs every task with the reference
# interpreter: each output, named as docs/TASKS.md lists them, is written
# as OUT/<name>.npy (dots kept), and every value is finite.
source "$(dirname "$0")/common.bash"

# expect MODEL DIR NAME...: DIR holds exactly NAME.npy..., and the printed
# values (in $tmp/out) hold no NaN or infinity.
expect() {
	local dir=$1 want got
	shift
	want=$(printf '%s.npy\n' "$@" | sort)
	got=$(ls "$dir" | sort)
	[ "$got" = "$want" ] || fail "$dir holds '$(echo $got)', expected '$(echo $want)'"
	for f in "$@"; do is_npy "$dir/$f.npy"; done
	grep -qiE 'nan|inf' "$tmp/out" && fail "$dir: a value is not finite: $(grep -iE 'nan|inf' "$tmp/out")"
	return 0
}

m=$SRC/models/ppl_simple_reg.ir
p=beta_value
run_fadc 0 run "$m" --task forward --out "$tmp/s/forward" --print
expect "$tmp/s/forward" out
run_fadc 0 run "$m" --task vjp --out "$tmp/s/vjp" --print
expect "$tmp/s/vjp" out grad.$p
out_has "grad.beta_value: f32[11, 1] = [["
run_fadc 0 run "$m" --task jvp --out "$tmp/s/jvp" --print
expect "$tmp/s/jvp" out jvp.out
out_has "jvp.out: f32[] = "
run_fadc 0 run "$m" --task vhp --out "$tmp/s/vhp" --print
expect "$tmp/s/vhp" out vhp.$p
run_fadc 0 run "$m" --task hvp --out "$tmp/s/hvp" --print
expect "$tmp/s/hvp" out hvp.$p
for t in jacobian jacrev jacfwd; do
	run_fadc 0 run "$m" --task $t --out "$tmp/s/$t" --print
	expect "$tmp/s/$t" jacobian.$p
	out_has "jacobian.beta_value: f32[11, 1] = "
done
for t in hessian hessian_fwdrev hessian_revrev; do
	run_fadc 0 run "$m" --task $t --out "$tmp/s/$t" --print
	expect "$tmp/s/$t" hessian.$p.$p
	out_has "hessian.beta_value.beta_value: f32[11, 1, 11, 1] = "
done
# The strategies agree (the interpreter computes in float64; the files
# hold f32): jacobian = jacrev = jacfwd, the three Hessians, hvp = vhp.
"$FADC" compare-npy "$tmp/s/jacobian" "$tmp/s/jacfwd" --rtol 1e-6 >"$tmp/cmp" || fail "jacfwd: $(cat "$tmp/cmp")"
"$FADC" compare-npy "$tmp/s/jacobian" "$tmp/s/jacrev" --rtol 0 >"$tmp/cmp" || fail "jacrev: $(cat "$tmp/cmp")"
"$FADC" compare-npy "$tmp/s/hessian" "$tmp/s/hessian_fwdrev" --rtol 1e-6 >"$tmp/cmp" ||
	fail "hessian_fwdrev: $(cat "$tmp/cmp")"
"$FADC" compare-npy "$tmp/s/hessian" "$tmp/s/hessian_revrev" --rtol 0 >"$tmp/cmp" ||
	fail "hessian_revrev: $(cat "$tmp/cmp")"
"$FADC" compare-npy "$tmp/s/hvp/hvp.$p.npy" "$tmp/s/vhp/vhp.$p.npy" --rtol 1e-6 >"$tmp/cmp" ||
	fail "hvp against vhp: $(cat "$tmp/cmp")"

# Several params: one output per param, in declaration order.
m=$SRC/models/ppl_robust_reg.ir
run_fadc 0 run "$m" -D N=3 -D K=2 --task vjp --out "$tmp/r/vjp" --print
expect "$tmp/r/vjp" out grad.nu_value grad.sigma_unconstrained_value grad.beta_value
run_fadc 0 run "$m" -D N=3 -D K=2 --task hvp --out "$tmp/r/hvp" --print
expect "$tmp/r/hvp" out hvp.nu_value hvp.sigma_unconstrained_value hvp.beta_value
run_fadc 0 run "$m" -D N=3 -D K=2 --task hessian --out "$tmp/r/h" --print
expect "$tmp/r/h" $(for a in nu_value sigma_unconstrained_value beta_value; do
	for b in nu_value sigma_unconstrained_value beta_value; do echo hessian.$a.$b; done; done)
exit 0
