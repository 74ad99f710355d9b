# tests/bench/common.bash -- helpers sourced by fadc-bench's tests (not a
# test: tests.cmake registers only *.sh), in the style of
# tests/cli/common.bash.  FADC_BENCH is the runner, FADC_SOURCE_DIR the
# repository root; every test works in a temporary folder of its own.
set -u
BENCH=${FADC_BENCH:?FADC_BENCH must name the fadc-bench binary}
SRC=${FADC_SOURCE_DIR:?FADC_SOURCE_DIR must name the repository root}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/fadc-bench-test.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

fail() {
	echo "FAIL: $*" >&2
	exit 1
}

# run_bench WANT ARGS...: runs fadc-bench with stdout in $tmp/out and
# stderr in $tmp/err, and checks the exit status.
run_bench() {
	local want=$1 rc
	shift
	"$BENCH" "$@" >"$tmp/out" 2>"$tmp/err"
	rc=$?
	if [ "$rc" -ne "$want" ]; then
		cat "$tmp/err" >&2
		fail "fadc-bench $* exited $rc, expected $want"
	fi
}

# err_has TEXT: stderr of the last run holds TEXT (a fixed string).
err_has() {
	grep -qF -- "$1" "$tmp/err" || { cat "$tmp/err" >&2; fail "stderr lacks: $1"; }
}

# err_is TEXT: stderr of the last run is exactly TEXT (lines).
err_is() {
	[ "$(cat "$tmp/err")" = "$1" ] || { cat "$tmp/err" >&2; fail "stderr is not: $1"; }
}

# ran_nothing: the last run timed no cell.
ran_nothing() {
	! grep -q '^Results for model' "$tmp/out" || fail "a cell ran: $(head -1 "$tmp/out")"
}

# LISTS: the head of a small configuration.
LISTS='task_lists:
  ALL_TASKS: [vjp, jvp]
'
