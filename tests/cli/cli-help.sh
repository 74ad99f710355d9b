# RUN: bash %s
# --help and -h print the usage on stdout and exit 0, for both commands.
source "$(dirname "$0")/common.bash"

run_fadc 0 --help
out_has "usage: fadc MODEL.ir --emit ir"
out_has "--emit ir"
[ -s "$tmp/err" ] && fail "--help wrote to stderr"

run_fadc 0 -h
out_has "usage: fadc MODEL.ir"

run_fadc 0 run --help
out_has "usage: fadc run MODEL.ir [options] --out DIR"
for opt in --params --seed --out --print -D; do
	out_has "$opt"
done

run_fadc 0 run -h
out_has "usage: fadc run"
exit 0
