# RUN: bash %s
# fadc run writes each output of forward as OUT/<name>.npy (created with
# its parents), prints them with --print, and is deterministic.
source "$(dirname "$0")/common.bash"
model=$SRC/models/ppl_simple_reg.ir

run_fadc 0 run "$model" --out "$tmp/a/b" --print
is_npy "$tmp/a/b/out.npy"
out_has "out: f32[] = "
[ "$(ls "$tmp/a/b")" = "out.npy" ] || fail "unexpected files in the output folder: $(ls "$tmp/a/b")"
# A scalar f32: the header says so.
head -c 128 "$tmp/a/b/out.npy" | grep -qF "{'descr': '<f4', 'fortran_order': False, 'shape': (), }" ||
	fail "out.npy header is not that of an f32 scalar"

# The same run again gives the same bytes, into an existing folder.
run_fadc 0 run "$model" --out "$tmp/a/b"
run_fadc 0 run "$model" --out "$tmp/c"
cmp -s "$tmp/a/b/out.npy" "$tmp/c/out.npy" || fail "two runs differ"

# Named and several outputs: one file each.
cat >"$tmp/two.ir" <<'IR'
def forward() {
  a = reshape(iota(shape=[6], dtype=f32), [2, 3])
  return a as first, sum(a) as total
}
IR
run_fadc 0 run "$tmp/two.ir" --out "$tmp/two" --print
is_npy "$tmp/two/first.npy"
is_npy "$tmp/two/total.npy"
out_has "first: f32[2, 3] = [[0, 1, 2], [3, 4, 5]]"
out_has "total: f32[] = 15"

# A model with an error: exit 1, a diagnostic, and no output folder.
printf 'def forward() {\n  return nope\n}\n' >"$tmp/bad.ir"
run_fadc 1 run "$tmp/bad.ir" --out "$tmp/bad"
err_first "$tmp/bad.ir:2:10: error: unknown name 'nope'"
[ -e "$tmp/bad" ] && fail "a failed run created its output folder"

# A model file that does not exist.
run_fadc 1 run "$tmp/none.ir" --out "$tmp/none"
err_first "$tmp/none.ir: error: cannot open: No such file or directory"
# A folder given as the model.
run_fadc 1 run "$tmp" --out "$tmp/dir"
err_first "$tmp: error: is a directory, not a regular file"
exit 0
