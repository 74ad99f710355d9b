# tests/cli/common.bash -- helpers sourced by the CLI tests (not a test:
# tests.cmake registers only *.sh).  FADC is the compiler, FADC_SOURCE_DIR
# the repository root; every test works in a temporary folder of its own.
set -u
FADC=${FADC:?FADC must name the fadc binary}
SRC=${FADC_SOURCE_DIR:?FADC_SOURCE_DIR must name the repository root}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/fadc-cli.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

fail() {
	echo "FAIL: $*" >&2
	exit 1
}

# run_fadc WANT ARGS...: runs fadc with stdout in $tmp/out and stderr in
# $tmp/err, and checks the exit status.
run_fadc() {
	local want=$1 rc
	shift
	"$FADC" "$@" >"$tmp/out" 2>"$tmp/err"
	rc=$?
	if [ "$rc" -ne "$want" ]; then
		cat "$tmp/err" >&2
		fail "fadc $* exited $rc, expected $want"
	fi
}

# err_has TEXT: stderr of the last run holds TEXT (a fixed string).
err_has() {
	grep -qF -- "$1" "$tmp/err" || { cat "$tmp/err" >&2; fail "stderr lacks: $1"; }
}

# err_first TEXT: the first line of stderr is exactly TEXT.
err_first() {
	local first
	first=$(head -n 1 "$tmp/err")
	[ "$first" = "$1" ] || fail "first stderr line is '$first', expected '$1'"
}

# out_has TEXT: stdout of the last run holds TEXT.
out_has() {
	grep -qF -- "$1" "$tmp/out" || { cat "$tmp/out" >&2; fail "stdout lacks: $1"; }
}

# is_npy FILE: FILE exists and starts with the .npy magic \x93NUMPY.
is_npy() {
	[ -f "$1" ] || fail "$1 was not written"
	[ "$(head -c 6 "$1" | od -An -tx1 | tr -d ' \n')" = "934e554d5059" ] ||
		fail "$1 does not start with \\x93NUMPY"
}

# npy_data FILE: the raw elements of a .npy file (after its header).
npy_data() {
	local hl
	hl=$(od -An -tu2 -j8 -N2 "$1" | tr -d ' ')
	tail -c +$((10 + hl + 1)) "$1"
}

# le64 N: N as 8 little-endian bytes.
le64() {
	local n=$1 i
	for i in 0 1 2 3 4 5 6 7; do
		printf "\\$(printf '%03o' $(((n >> (8 * i)) & 255)))"
	done
}

# safetensors OUT JSON DATA: writes a .safetensors file by hand: the header
# length, the JSON header, then the data section read from DATA.
safetensors() {
	{ le64 ${#2}; printf '%s' "$2"; cat "$3"; } >"$1"
}
