# RUN: bash %s
# A bad tensor file is an error that names the file and what is wrong
# with it; the run exits 1 and writes no output.
source "$(dirname "$0")/common.bash"
model=$SRC/models/ppl_simple_reg.ir

# check_fails FIRST-LINE ARGS...: the run fails with that diagnostic and
# leaves no output folder behind.
check_fails() {
	local want=$1
	shift
	rm -rf "$tmp/out.d"
	run_fadc 1 run "$model" --out "$tmp/out.d" "$@"
	err_first "$want"
	[ -e "$tmp/out.d" ] && fail "a failed run ($*) created its output folder"
	return 0
}

producer() { # producer NAME DTYPE SHAPE: writes $tmp/NAME/beta_value.npy
	printf 'def forward() {\n  return zeros(shape=%s, dtype=%s) as beta_value\n}\n' "$3" "$2" \
		>"$tmp/$1.ir"
	run_fadc 0 run "$tmp/$1.ir" --out "$tmp/$1"
	is_npy "$tmp/$1/beta_value.npy"
}
producer good f32 '[11, 1]'
producer f64 f64 '[11, 1]'
producer i64 i64 '[11, 1]'
producer short f32 '[3]'

f=$tmp/missing/beta_value.npy
check_fails "$f: error: cannot open: No such file or directory" --params "$f"

mkdir -p "$tmp/magic"
printf 'beta = [0.0] * 11\n' >"$tmp/magic/beta_value.npy"
f=$tmp/magic/beta_value.npy
check_fails "$f: error: bad magic: not a .npy file (expected \\x93NUMPY)" --params "$f"

mkdir -p "$tmp/trunc"
f=$tmp/trunc/beta_value.npy
size=$(wc -c <"$tmp/good/beta_value.npy")
head -c $((size - 20)) "$tmp/good/beta_value.npy" >"$f"
check_fails "$f: error: data truncated: expected 44 bytes, found 24" --params "$f"

f=$tmp/f64/beta_value.npy
check_fails "$f: error: tensor 'beta_value' is f64[11, 1], the model declares f32[11, 1]" --params "$f"
f=$tmp/i64/beta_value.npy
check_fails "$f: error: tensor 'beta_value' is i64[11, 1], the model declares f32[11, 1]" --params "$f"
f=$tmp/short/beta_value.npy
check_fails "$f: error: tensor 'beta_value' is f32[3], the model declares f32[11, 1]" --params "$f"
check_fails "$f: error: tensor 'beta_value' is f32[3], the model declares f32[11, 1]" \
	--params "beta_value=$f"

# .safetensors: a header that runs past the end, a wrong shape, data
# offsets beyond the data, and a file that is no safetensors at all.
npy_data "$tmp/good/beta_value.npy" >"$tmp/zeros.bin"
f=$tmp/cut.safetensors
{ le64 400; printf '{"beta_value":'; } >"$f"
check_fails "$f: error: truncated header: header length 400, but only 14 bytes follow" --params "$f"
f=$tmp/shape.safetensors
safetensors "$f" '{"beta_value":{"dtype":"F32","shape":[11],"data_offsets":[0,44]}}' "$tmp/zeros.bin"
check_fails "$f: error: tensor 'beta_value' is f32[11], the model declares f32[11, 1]" --params "$f"
f=$tmp/offsets.safetensors
safetensors "$f" '{"beta_value":{"dtype":"F32","shape":[11,1],"data_offsets":[0,48]}}' "$tmp/zeros.bin"
run_fadc 1 run "$model" --out "$tmp/out.d" --params "$f"
err_has "$f: error: tensor 'beta_value': data_offsets [0, 48]"
[ -e "$tmp/out.d" ] && fail "a failed run created its output folder"
f=$tmp/text.safetensors
printf 'not a tensor file' >"$f"
run_fadc 1 run "$model" --out "$tmp/out.d" --params "$f"
err_has "$f: error: "
[ -e "$tmp/out.d" ] && fail "a failed run created its output folder"

# A good binding next to a bad one still fails as a whole; binding one name
# twice is itself the error.
f=$tmp/short/beta_value.npy
check_fails "$f: error: 'beta_value' is bound twice (also by $tmp/good/beta_value.npy)" \
	--params "$tmp/good/beta_value.npy" --params "$f"
exit 0
