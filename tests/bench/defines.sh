# RUN: bash %s
# Sizes (issue 16): fadc-bench merges the configuration's --reduced sizes
# with its -D overrides into one -D per name before it calls fadc (which
# refuses a name bound twice): -D NAME=V overrides --reduced, -D
# MODEL:NAME=V overrides both for its model.  A name given twice in one
# scope, a malformed -D (usage errors, exit 2) and a MODEL: that is no
# model of the configuration (exit 1) are errors, not last-wins.
set -u
. "$(dirname "$0")/common.bash"
M=$SRC/models/ppl_simple_reg.ir
cd "$tmp"
printf '%smodels:\n  m: {source: %s, tasks: [vjp], reduced: [N=3, K=2]}\n  n: {source: %s, tasks: [vjp]}\n' \
	"$LISTS" "$M" "$M" > c.yaml
# A stand-in compiler that records its command line and fails.
cat > fakefadc <<'SH'
#!/bin/sh
printf '%s\n' "$@" > "$(dirname "$0")/args"
echo "fakefadc: error: not a compiler" >&2
exit 1
SH
chmod +x fakefadc
compiled_with() { # the -D values the compiler was given, one line each
	awk 'prev == "-D" { print } { prev = $0 }' args | tr '\n' ' '
}
fake=(--config c.yaml --num-iters 0 --compile --fadc "$tmp/fakefadc" --artifacts "$tmp/art"
	--model-filter m)

run_bench 1 "${fake[@]}" --reduced
[ "$(compiled_with)" = "N=3 K=2 " ] || fail "--reduced: -D $(compiled_with)"
run_bench 1 "${fake[@]}" --reduced -D N=5
[ "$(compiled_with)" = "N=5 K=2 " ] || fail "--reduced -D N=5: -D $(compiled_with)"
run_bench 1 "${fake[@]}" --reduced -D m:K=7 -D N=5 -D n:N=9
[ "$(compiled_with)" = "N=5 K=7 " ] || fail "-D m:K=7 -D N=5: -D $(compiled_with)"
run_bench 1 "${fake[@]}" -D m:N=6 -D N=5 -DK=1
[ "$(compiled_with)" = "N=6 K=1 " ] || fail "-D m:N=6 -D N=5: -D $(compiled_with)"
run_bench 1 "${fake[@]}"
[ "$(compiled_with)" = "" ] || fail "no sizes: -D $(compiled_with)"

# The interpreter gets the same merge; the JSON records it.
run_bench 0 --config c.yaml --backend interp --num-iters 0 --model-filter m --reduced -D N=4 \
	--json j.json
grep -q '"sizes": \["N=4", "K=2"\]' j.json || fail "sizes: $(grep -o '"sizes": [^]]*]' j.json)"

# A name twice in one scope, malformed -D: usage errors, nothing runs.
usage() { # WANT-MESSAGE ARGS...
	local want=$1
	shift
	run_bench 2 --config c.yaml --backend interp --num-iters 0 "$@"
	err_is "fadc-bench: $want
try 'fadc-bench --help'"
	ran_nothing
}
usage "-D N=4: 'N' is already given (-D N=3)" -D N=3 -D N=4
usage "-D N=3: 'N' is already given (-D N=3)" -D N=3 -DN=3
usage "-D m:N=4: 'N' is already given (-D m:N=3)" -D m:N=3 -D m:N=4
usage "-D 'N' is not [MODEL:]NAME=VALUE" -D N
usage "-D '=3' is not [MODEL:]NAME=VALUE" -D =3
usage "-D ':N=3' is not [MODEL:]NAME=VALUE" -D :N=3
# A model of another name: a typo, not nothing.
run_bench 1 --config c.yaml --backend interp --num-iters 0 -D mm:N=3
err_is "fadc-bench: -D mm:N=3: c.yaml has no model 'mm' (its models: m, n)"
ran_nothing
echo "defines: ok"
