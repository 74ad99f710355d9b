# RUN: bash %s
# --params binds parameters, constants and arguments of forward by name,
# from NAME.npy, NAME=FILE.npy or a .safetensors file.  The tensor files
# are made by fadc itself: a producer model whose outputs are named after
# the parameters of ppl_simple_reg (beta_value: f32[11, 1]).
source "$(dirname "$0")/common.bash"
model=$SRC/models/ppl_simple_reg.ir

cat >"$tmp/zeros.ir" <<'IR'
def forward() {
  return zeros(shape=[11, 1]) as beta_value
}
IR
cat >"$tmp/ramp.ir" <<'IR'
def forward() {
  r = reshape(iota(shape=[11], dtype=f32), [11, 1]) * 0.1
  return r as beta_value
}
IR
run_fadc 0 run "$tmp/zeros.ir" --out "$tmp/zeros"
is_npy "$tmp/zeros/beta_value.npy"
run_fadc 0 run "$tmp/ramp.ir" --out "$tmp/ramp"

# beta = 0: score = N (-log 2) + (K + 1)(-log sqrt(2 pi)) = -17.039796 (to f32
# rounding of the intermediate values)
run_fadc 0 run "$model" --params "$tmp/zeros/beta_value.npy" --out "$tmp/o0" --print
out_has "out: f32[] = -17.03979"

# Bound values differ from the initializer's, and NAME=FILE.npy is the
# same binding as NAME.npy.
run_fadc 0 run "$model" --out "$tmp/init"
run_fadc 0 run "$model" --params "$tmp/ramp/beta_value.npy" --out "$tmp/o1"
run_fadc 0 run "$model" --params "beta_value=$tmp/ramp/beta_value.npy" --out "$tmp/o2"
cmp -s "$tmp/init/out.npy" "$tmp/o1/out.npy" && fail "binding beta_value changed nothing"
cmp -s "$tmp/o1/out.npy" "$tmp/o2/out.npy" || fail "NAME=FILE.npy and NAME.npy differ"

# The same tensor from a .safetensors file (written by hand around the
# .npy's data): the same result, byte for byte.
npy_data "$tmp/ramp/beta_value.npy" >"$tmp/ramp.bin"
[ "$(wc -c <"$tmp/ramp.bin")" -eq 44 ] || fail "beta_value.npy does not hold 11 f32"
safetensors "$tmp/w.safetensors" \
	'{"__metadata__":{"format":"pt"},"beta_value":{"dtype":"F32","shape":[11,1],"data_offsets":[0,44]}}' \
	"$tmp/ramp.bin"
run_fadc 0 run "$model" --params "$tmp/w.safetensors" --out "$tmp/o3"
cmp -s "$tmp/o1/out.npy" "$tmp/o3/out.npy" || fail ".safetensors and .npy bindings differ"

# A tensor that is nothing of the model's: a warning, and the run goes on.
cp "$tmp/ramp/beta_value.npy" "$tmp/gamma.npy"
# A tensor that names nothing is an error (a typo must not run the model on
# its initial values); --allow-unused-params makes it a warning.
run_fadc 1 run "$model" --params "$tmp/gamma.npy" --out "$tmp/o4"
err_first "$tmp/gamma.npy: error: tensor 'gamma' is not a parameter, constant or argument of the model (its names: X, Y, beta_value; --allow-unused-params ignores such tensors)"
[ -e "$tmp/o4" ] && fail "a run with an unused tensor wrote outputs"
run_fadc 0 run "$model" --params "$tmp/gamma.npy" --allow-unused-params --out "$tmp/o4"
err_first "$tmp/gamma.npy: warning: tensor 'gamma' is not a parameter, constant or argument of the model; ignored"
cmp -s "$tmp/init/out.npy" "$tmp/o4/out.npy" || fail "an ignored tensor changed the result"

# Constants bind too (X: f32[N, K + 1]), and arguments of forward.
cat >"$tmp/x.ir" <<'IR'
def forward() {
  return ones(shape=[10, 11]) as X
}
IR
run_fadc 0 run "$tmp/x.ir" --out "$tmp/x"
run_fadc 0 run "$model" --params "$tmp/x/X.npy" --out "$tmp/o5"
cmp -s "$tmp/init/out.npy" "$tmp/o5/out.npy" && fail "binding the constant X changed nothing"
cat >"$tmp/arg.ir" <<'IR'
def forward(v: f32[3]) {
  return v * 2 as doubled
}
IR
cat >"$tmp/v.ir" <<'IR'
def forward() {
  return iota(shape=[3], dtype=f32) as v
}
IR
run_fadc 0 run "$tmp/v.ir" --out "$tmp/v"
run_fadc 0 run "$tmp/arg.ir" --params "$tmp/v/v.npy" --out "$tmp/o6" --print
out_has "doubled: f32[3] = [0, 2, 4]"
run_fadc 1 run "$tmp/arg.ir" --out "$tmp/o7"
err_first "$tmp/arg.ir: error: argument 'v' of forward was not bound (use --params FILE)"
[ -e "$tmp/o7" ] && fail "a failed run created its output folder"
exit 0
