# RUN: bash %s
# Progress of a compile and of `fadc check` (tools/fadc/cli.c): nothing on
# stderr when it is not a terminal; on a pseudo-terminal (script -qc) a
# status line rewritten with \r and cleared at the end, the stages named,
# check's task and stage and its warning before a large interpreter run.
# The artifact is the same either way.  FADC_PROGRESS_AFTER=0 draws at
# the first report (a short compile otherwise stays quiet for 1 s);
# FADC_CHECK_LARGE_VALUES lowers the warning's threshold.
source "$(dirname "$0")/common.bash"
m=$SRC/models/ppl_simple_reg.ir
export FADC_PROGRESS_AFTER=0 FADC_CHECK_LARGE_VALUES=10

# Not a terminal: stderr stays empty.
"$FADC" "$m" -o "$tmp/a.so" --tasks vjp -D N=3 -D K=2 >"$tmp/out" 2>"$tmp/err" || fail "compile failed"
[ -s "$tmp/err" ] && { cat -v "$tmp/err" >&2; fail "a compile wrote to stderr (not a terminal)"; }
"$FADC" check "$m" --tasks vjp -D N=3 -D K=2 >"$tmp/out" 2>"$tmp/err" || fail "check failed"
[ -s "$tmp/err" ] && { cat -v "$tmp/err" >&2; fail "check wrote to stderr (not a terminal)"; }
grep -q "warning" "$tmp/out" && fail "check's warning is for a terminal only"

# A terminal.
command -v script >/dev/null || { echo "no script(1): the terminal half skipped"; exit 77; }
script -qec "'$FADC' '$m' -o '$tmp/b.so' --tasks vjp -D N=3 -D K=2" "$tmp/tty" >/dev/null 2>&1 ||
	{ cat -v "$tmp/tty" >&2; fail "compile on a terminal failed"; }
grep -q $'\r\\[[0-9]*/[0-9]*\\] tasks (passes, lowering), [0-9]* s' "$tmp/tty" ||
	{ cat -v "$tmp/tty" >&2; fail "no task count on the terminal"; }
grep -qF "LLVM code generation, " "$tmp/tty" || { cat -v "$tmp/tty" >&2; fail "no LLVM stage"; }
# The LLVM pieces counted as they are compiled (docs/CODEGEN.md "Compile time").
script -qec "FADC_LLVM_PIECES=4 '$FADC' '$m' -o '$tmp/c.so' --tasks vjp -D N=3 -D K=2 --no-cache" "$tmp/tty" \
	>/dev/null 2>&1 || { cat -v "$tmp/tty" >&2; fail "compile in pieces on a terminal failed"; }
grep -q $'\r\\[[1-5]/[1-5]\\] LLVM pieces, [0-9]* s' "$tmp/tty" ||
	{ cat -v "$tmp/tty" >&2; fail "no LLVM pieces counted on the terminal"; }
# Cleared at the end: the last thing written is \r, spaces, \r.
tr -d '\n' <"$tmp/tty" | grep -q $'\r *\r$' || tr -d '\n' <"$tmp/tty" | grep -q $'\r *\rScript done' ||
	{ cat -v "$tmp/tty" >&2; fail "the line is not cleared at the end"; }
cmp "$tmp/a.so" "$tmp/b.so" || fail "the artifact depends on the terminal"

script -qec "'$FADC' check '$m' --tasks vjp -D N=3 -D K=2" "$tmp/tty" >/dev/null 2>&1 ||
	{ cat -v "$tmp/tty" >&2; fail "check on a terminal failed"; }
grep -qF "task vjp: the float64 interpreter, " "$tmp/tty" || { cat -v "$tmp/tty" >&2; fail "no check stage"; }
grep -qF "task vjp: compiled code, " "$tmp/tty" || { cat -v "$tmp/tty" >&2; fail "no run stage"; }
grep -qF "fadc: warning: task 'vjp': the float64 interpreter computes " "$tmp/tty" ||
	{ cat -v "$tmp/tty" >&2; fail "no warning before a large interpreter run"; }
grep -qF "reduce the sizes with -D NAME=VALUE" "$tmp/tty" || fail "the warning lacks its hint"
grep -qF "largest normalized error" "$tmp/tty" || fail "check's report is missing"
echo ok
