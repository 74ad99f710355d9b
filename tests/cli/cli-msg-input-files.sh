# RUN: bash %s
# The model file is read only if it is a regular file (or a symlink to
# one): a FIFO would block the read forever, a symlink to /dev/zero would
# read a GB before failing, a folder is no model.  Each is refused at once,
# with exit 1 and "PATH: error: ...".
source "$(dirname "$0")/common.bash"

mkfifo "$tmp/fifo.ir"
# timeout: a regression blocks on the FIFO rather than failing.
timeout 10 "$FADC" "$tmp/fifo.ir" --emit ir >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc -eq 124 ] && fail "fadc blocked reading a FIFO"
[ $rc -eq 1 ] || fail "a FIFO as the model exited $rc, expected 1"
err_first "$tmp/fifo.ir: error: is a FIFO, not a regular file"

ln -s /dev/zero "$tmp/zero.ir"
run_fadc 1 "$tmp/zero.ir" --emit ir
err_first "$tmp/zero.ir: error: is a character device, not a regular file"

mkdir "$tmp/dir.ir"
run_fadc 1 "$tmp/dir.ir" --emit ir
err_first "$tmp/dir.ir: error: is a directory, not a regular file"

run_fadc 1 "$tmp/none.ir" --emit ir
err_first "$tmp/none.ir: error: cannot open: No such file or directory"

# A symlink to a regular model is fine.
ln -s "$SRC/models/ppl_simple_reg.ir" "$tmp/link.ir"
run_fadc 0 "$tmp/link.ir" --emit ir
out_has "def forward"
exit 0
