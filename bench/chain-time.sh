#!/bin/sh
# bench/chain-time.sh FADC "TASKS" N... -- compile time and peak memory of
# bench/chain.sh's chains (docs/PERFORMANCE.md, "Compile time of long
# chains"): one line per N with the wall and user seconds and the maximum
# resident set of `FADC chain.ir -o chain.so [--tasks TASKS]` (TASKS empty:
# the default tasks), from /usr/bin/time.
set -eu
fadc=${1:?usage: bench/chain-time.sh FADC "TASKS" N...}
tasks=$2
shift 2
dir=$(mktemp -d "${TMPDIR:-/tmp}/fadc-chain.XXXXXX")
trap 'rm -rf "$dir"' EXIT
here=$(cd "$(dirname "$0")" && pwd)
printf '%8s %-10s %9s %9s %10s\n' N tasks wall_s user_s maxrss_MB
for n in "$@"; do
	sh "$here/chain.sh" "$n" "$dir/c.ir"
	# shellcheck disable=SC2086
	/usr/bin/time -f '%e %U %M' -o "$dir/t" "$fadc" "$dir/c.ir" -o "$dir/c.so" ${tasks:+--tasks $tasks} >/dev/null
	read -r wall user rss <"$dir/t"
	printf '%8s %-10s %9s %9s %10d\n' "$n" "${tasks:-default}" "$wall" "$user" $((rss / 1024))
done
