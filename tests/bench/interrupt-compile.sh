# RUN: bash %s
# An interrupted --compile (TERM while the compiler runs) leaves no
# half-made artifact: the temporary the compiler writes is registered for
# removal on INT/TERM/HUP (runtime/fileio.h), and the exit status says the
# signal.
set -u
. "$(dirname "$0")/common.bash"
cd "$tmp"
printf '%smodels:\n  m: {source: %s/models/ppl_simple_reg.ir, tasks: [vjp]}\n' "$LISTS" "$SRC" > c.yaml
# A stand-in compiler that writes part of its output (argv: SRC -o OUT ...),
# records its pid and waits to be interrupted (--version, which the JSON
# asks for, it answers at once).
cat > slowfadc <<'SH'
#!/bin/sh
[ "$1" = --version ] && { echo "slowfadc 0"; exit 0; }
echo $$ > "$(dirname "$0")/compiler.pid"
printf 'half an artifact' > "$3"
exec sleep 60
SH
chmod +x slowfadc
"$BENCH" --config c.yaml --num-iters 0 --compile --fadc "$tmp/slowfadc" --artifacts "$tmp/art" \
	--json "$tmp/j.json" >out 2>err &
pid=$!
for _ in $(seq 100); do
	[ -s compiler.pid ] && ls art 2>/dev/null | grep -q 'tmp' && break
	sleep 0.1
done
ls art | grep -q tmp || fail "the compiler wrote no temporary: $(ls art) $(cat err)"
kill -TERM "$pid"
wait "$pid"
rc=$?
kill "$(cat compiler.pid)" 2>/dev/null
[ "$rc" -eq 143 ] || fail "exit status $rc after TERM, expected 143"
left=$(ls art | grep -v '\.log$' || true)
[ -z "$left" ] || fail "left behind in the artifacts folder: $left"
[ ! -e j.json ] || fail "a JSON was written"
ls | grep -q 'j.json.tmp' && fail "the JSON's temporary was left"
echo "interrupt-compile: ok"
