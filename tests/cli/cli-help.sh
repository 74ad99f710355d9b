# RUN: bash %s
# --help and -h print the usage on stdout and exit 0, for every command.
source "$(dirname "$0")/common.bash"

run_fadc 0 --help
out_has "usage: fadc MODEL.ir --emit ir"
out_has "fadc MODEL.ir -o MODEL.so"
for opt in --emit --task -D --print-after= --print-after-all --stop-after= --stats \
	-o --target --tasks -O2 --cpu "simplify, vjp, jvp, vmap" "forward,vjp,jvp,vhp,hvp"; do
	out_has "$opt"
done
[ -s "$tmp/err" ] && fail "--help wrote to stderr"

run_fadc 0 -h
out_has "usage: fadc MODEL.ir"
# --help stops there: nothing is compiled.
run_fadc 0 "$SRC/models/ppl_simple_reg.ir" -o "$tmp/x.so" --help
[ -e "$tmp/x.so" ] && fail "--help compiled something"

run_fadc 0 run --help
out_has "usage: fadc run MODEL.ir|MODEL.so --task T [options] --out DIR"
for opt in --task --params --v --seed --out --print --time -D; do
	out_has "$opt"
done
run_fadc 0 run -h
out_has "usage: fadc run"

run_fadc 0 inspect --help
out_has "usage: fadc inspect MODEL.so"
run_fadc 0 check --help
out_has "usage: fadc check MODEL.ir"
run_fadc 0 compare-npy --help
out_has "usage: fadc compare-npy A B [--rtol R]"

# --version: one line on stdout, the release, the artifact format and the
# code generators; fadc-bench records it in its JSON (bench/cpu-consistency.sh).
run_fadc 0 --version
grep -qE '^fadc [0-9]+\.[0-9]+\.[0-9]+ \(artifact format [0-9]+; LLVM 14\.[0-9.]+(; NVRTC [0-9]+\.[0-9]+)?\)$' "$tmp/out" ||
	fail "--version: $(cat "$tmp/out")"
[ "$(wc -l < "$tmp/out")" -eq 1 ] || fail "--version printed more than one line"
exit 0
