# RUN: bash %s
# Every shipped model at the edges (issue 18): each of its sizes (the `let`
# names, which -D overrides) set to 0 and to 1, the others at their
# defaults, through `--emit ir --task vjp` (every shape rule, the parser's
# folds and the vjp); the small ppl models also compiled (-o) and run.
# Each run must give a result (exit 0 and the IR) or a diagnostic (exit 1,
# `file:line:col: error:` first), never a signal (exit >= 128, e.g. 136 for
# the SIGFPE of multiheadattn -D E=0) and never an internal assertion.
source "$(dirname "$0")/common.bash"

nrun=0
# check WHAT RC: the last run ($tmp/out, $tmp/err) ended as one of the two.
check() {
	local what=$1 rc=$2
	nrun=$((nrun + 1))
	if grep -qiE "assertion|internal error|Sanitizer" "$tmp/err"; then
		cat "$tmp/err" >&2
		fail "$what: an internal error"
	fi
	case $rc in
	0) [ -s "$tmp/out" ] || [ "${3:-}" = "-o" ] || fail "$what: exit 0 without output" ;;
	1) grep -qE "^[^ ]+:[0-9]+:[0-9]+: error: " "$tmp/err" || [ "${3:-}" = "-o" ] ||
		{ cat "$tmp/err" >&2; fail "$what: exit 1 without a located diagnostic"; }
	   grep -q "error: " "$tmp/err" || { cat "$tmp/err" >&2; fail "$what: exit 1 without a diagnostic"; } ;;
	*) cat "$tmp/err" >&2; fail "$what: exit $rc (a signal or a crash)" ;;
	esac
}

for m in "$SRC"/models/*.ir; do
	name=$(basename "$m" .ir)
	sizes=$(sed -nE 's/^let ([A-Za-z_][A-Za-z0-9_]*) *=.*/\1/p' "$m")
	[ -n "$sizes" ] || fail "$name declares no size"
	for s in $sizes; do
		for v in 0 1; do
			"$FADC" "$m" -D "$s=$v" --emit ir --task vjp >"$tmp/out" 2>"$tmp/err"
			check "$name -D $s=$v --emit ir --task vjp" $?
			case $name in ppl_*) ;; *) continue ;; esac
			rm -f "$tmp/m.so"
			"$FADC" "$m" -D "$s=$v" -o "$tmp/m.so" >"$tmp/out" 2>"$tmp/err"
			rc=$?
			check "$name -D $s=$v -o" $rc -o
			[ $rc -eq 0 ] || continue
			"$FADC" run "$tmp/m.so" --task vjp --out "$tmp/o" >"$tmp/out" 2>"$tmp/err"
			rc=$?
			check "$name -D $s=$v: run --task vjp" $rc -o
			[ $rc -eq 0 ] || fail "$name -D $s=$v: compiled, but its vjp does not run"
		done
	done
done
# Nine models, 60 sizes: the loops above did run.
[ $nrun -ge 100 ] || fail "only $nrun runs"
echo "$nrun runs"
exit 0
