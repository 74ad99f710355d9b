# RUN: bash %s
# Exit statuses and usage errors (issue 16): 0, 1 or 2 only.  A usage
# error (exit 2) prints its one-line reason and "try 'fadc-bench --help'",
# not the whole help; --help prints the help on stdout (exit 0).
set -u
. "$(dirname "$0")/common.bash"
usage() { # WANT-MESSAGE ARGS...
	local want=$1
	shift
	run_bench 2 "$@"
	err_is "fadc-bench: $want
try 'fadc-bench --help'"
	[ ! -s "$tmp/out" ] || fail "stdout: $(cat "$tmp/out")"
}
usage "unknown option '--nmu-iters'" --nmu-iters 3
usage "--output needs a value" --output
usage "'x' is not an integer" --num-iters x
usage "--num-iters must be 0 .. 1000000, got -1" --num-iters -1
usage "--num-threads must be 1 .. 4096, got 0" --num-threads 0
usage "--seed must be non-negative, got -5" --seed -5
usage "--gpu must be -2 (auto), -1 (the CPU) or a device number, got -3" --gpu -3
usage "unknown backend 'tpu' (this build has: cpu, interp)" --backend tpu
usage "--check-reference: the interp backend is the reference itself" --backend interp --check-reference
usage "--gpu 0: the interp backend runs on the CPU only" --backend interp --gpu 0
usage "--device-time needs a GPU (--gpu N; the CPU has no device clock)" --gpu -1 --device-time
usage "compare needs BEFORE and AFTER tables" compare a.md
usage "unknown option '--json'" compare a.md b.md --json j
usage "compare takes two tables ('c.md' is a third)" compare a.md b.md c.md
# --help: the help, on stdout.
run_bench 0 --help
grep -q '^usage: fadc-bench \[options\]' "$tmp/out" || fail "--help printed no usage"
[ ! -s "$tmp/err" ] || fail "--help wrote to stderr"
run_bench 0 compare --help
grep -q '^usage: fadc-bench \[options\]' "$tmp/out" || fail "compare --help printed no usage"
# Input errors are 1: a table that is not there.
run_bench 1 compare "$tmp/nosuch.md" "$tmp/nosuch.md"
err_is "fadc-bench: $tmp/nosuch.md: cannot open: No such file or directory"
echo "usage: ok"
