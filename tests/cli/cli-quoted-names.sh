# RUN: bash %s
# Quoted names (docs/IR.md, "Lexical structure"): ONNX's names such as
# "input.1", "%x" and "/layer/Add_output_0" name arguments, locals and
# outputs; `fadc run --out` writes each output as one file in DIR whose name
# is the output's with '/', '\', '%' and a leading '.' written %XX
# (docs/IR.md, "Output files"), and --params NAME.npy decodes it back, so a
# name can neither make nor leave a folder.  Values by hand below.
source "$(dirname "$0")/common.bash"

# The producer's outputs are the consumer's arguments, by name.
cat >"$tmp/producer.ir" <<'IR'
def forward() {
  a = reshape(iota(shape=[6], dtype=f32), [2, 3])
  x = iota(shape=[3], dtype=f32) + 1
  z = sum(zeros(shape=[1], dtype=f32) + 10)
  return a as "input.1", x as "%x", z as "/in/z"
}
IR
run_fadc 0 run "$tmp/producer.ir" --out "$tmp/in"
[ "$(cd "$tmp/in" && ls -A | sort | tr '\n' ' ')" = "%25x.npy %2Fin%2Fz.npy input.1.npy " ] ||
	fail "producer files: $(ls -A "$tmp/in")"

cat >"$tmp/m.ir" <<'IR'
param "0.weight": f32[2, 3] = iota(axis=1)
def forward("input.1": f32[2, 3], "%x": f32[3], "/in/z": f32[]) {
  "/layer/Add_output_0" = "0.weight" * "input.1" + "/in/z"
  h = "/layer/Add_output_0"
  return sum(h, axes=[1]) as "/out/y", h * "%x" as ".hidden", "%x" + 0 as "../escape", "0.weight" * 2 as "onnx::Mul_7"
}
IR
# NAME.npy decodes %XX; NAME=FILE.npy takes the name as it is.
run_fadc 0 run "$tmp/m.ir" --params "$tmp/in/input.1.npy" --params "$tmp/in/%25x.npy" \
	--params "/in/z=$tmp/in/%2Fin%2Fz.npy" --out "$tmp/o/out" --print
# W = [[0, 1, 2], [0, 1, 2]], input.1 = [[0, 1, 2], [3, 4, 5]], z = 10:
# A = W * input.1 + z = [[10, 11, 14], [10, 14, 20]]; row sums 35, 44;
# A * x (x = [1, 2, 3]) = [[10, 22, 42], [10, 28, 60]].
out_has "/out/y: f32[2] = [35, 44]"
out_has ".hidden: f32[2, 3] = [[10, 22, 42], [10, 28, 60]]"
out_has "../escape: f32[3] = [1, 2, 3]"
out_has "onnx::Mul_7: f32[2, 3] = [[0, 2, 4], [0, 2, 4]]"
[ "$(cd "$tmp/o/out" && ls -A | sort | tr '\n' ' ')" = "%2E.%2Fescape.npy %2Ehidden.npy %2Fout%2Fy.npy onnx::Mul_7.npy " ] ||
	fail "output files: $(ls -A "$tmp/o/out")"
[ "$(ls -A "$tmp/o")" = out ] || fail "a name wrote outside the output folder: $(ls -A "$tmp/o")"

# The outputs bind back by their file names: the same values.
run_fadc 0 run "$tmp/m.ir" --params "$tmp/in/input.1.npy" --params "$tmp/in/%25x.npy" \
	--params "$tmp/in/%2Fin%2Fz.npy" --out "$tmp/o/again"
run_fadc 0 compare-npy "$tmp/o/out" "$tmp/o/again"

# A compiled model keeps the names: the same files, the same values
# (f32 against the f64 interpreter's rounding: all values are exact here).
run_fadc 0 "$tmp/m.ir" -o "$tmp/m.so"
run_fadc 0 run "$tmp/m.so" --params "$tmp/in/input.1.npy" --params "$tmp/in/%25x.npy" \
	--params "$tmp/in/%2Fin%2Fz.npy" --out "$tmp/o/so"
run_fadc 0 compare-npy "$tmp/o/out" "$tmp/o/so"

# An unbound quoted argument is named as it is.
run_fadc 1 run "$tmp/m.ir" --params "$tmp/in/input.1.npy" --params "$tmp/in/%25x.npy" --out "$tmp/o/x"
err_has "argument '/in/z' of forward was not bound"
[ -e "$tmp/o/x" ] && fail "a failed run wrote outputs"
exit 0
