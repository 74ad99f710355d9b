# RUN: bash %s
# Outputs are written to a temporary file and renamed into place: a write
# that fails leaves neither a half-written output nor a temporary file,
# and an old output stays as it was.
source "$(dirname "$0")/common.bash"
model=$SRC/models/ppl_simple_reg.ir

# out.npy cannot be replaced when it is a folder: the write fails.
mkdir -p "$tmp/o/out.npy"
run_fadc 1 run "$model" --out "$tmp/o"
err_has "$tmp/o/out.npy: error: is a folder"
[ "$(ls -A "$tmp/o")" = "out.npy" ] || fail "the failed write left files behind: $(ls -A "$tmp/o")"
[ -d "$tmp/o/out.npy" ] || fail "the failed write replaced out.npy"

# An old output survives a run that fails before writing.
run_fadc 0 run "$model" --out "$tmp/p"
cp "$tmp/p/out.npy" "$tmp/old.npy"
printf 'def forward() {\n  return ones(shape=[2]) @ 3\n}\n' >"$tmp/bad.ir"
run_fadc 1 run "$tmp/bad.ir" --out "$tmp/p"
cmp -s "$tmp/p/out.npy" "$tmp/old.npy" || fail "a failed run changed the old output"
[ "$(ls -A "$tmp/p")" = "out.npy" ] || fail "a failed run left files behind: $(ls -A "$tmp/p")"

# The output folder is a file: an error naming it.
printf 'x' >"$tmp/file"
run_fadc 1 run "$model" --out "$tmp/file"
err_first "fadc: error: the output folder '$tmp/file' exists and is not a folder"
exit 0
