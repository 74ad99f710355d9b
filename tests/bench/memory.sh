# RUN: bash %s
# Peak memory per cell (issue 19): fadc-bench's peak_memory_bytes against an
# independent count, on the CPU.  The oracle is the compiler's own figures:
# the memory plan's arena of each task (fadc --stats; the runtime rounds an
# arena up to 64 bytes) and the tensors' shapes (fadc inspect), summed by
# hand over what a cell holds at its peak:
#   every declaration (bound or initialized: the model's resident data),
#   the cell's task: its inputs (v), its outputs and its arena,
#   the consistency check's partner task: the same three,
# since bench/exec_cpu.c creates each prepared task's inputs and outputs,
# the runtime keeps each task's arena from its first run, and the peak is
# reset at the cell's start.  vjp's partner is jvp and jvp's is vjp, so both
# cells peak at the same sum.  Also: --memory's column, its absence without
# the flag (the seed's format), and null for the interpreter.
set -eu
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$FADC" "$FADC_SOURCE_DIR/models/ppl_simple_reg.ir" -o "$out/m.so" --tasks vjp,jvp --stats \
	>"$out/stats" 2>&1
"$FADC" inspect "$out/m.so" >"$out/inspect"
cat >"$out/c.yaml" <<'YAML'
task_lists:
  ALL_TASKS: [vjp, jvp]
models:
  m:
    source: m.so
    tasks: [vjp, jvp]
YAML

# The sum by hand, over the tasks named in $tasks (a regular expression).
# f32 and i64 sizes: 4 and 8 bytes an element.
by_hand() {
	awk -v tasks="$1" '
	function bytes(ty,   n, d, k, parts, dims) {
		n = ty ~ /^(i64|f64)/ ? 8 : ty ~ /^bool/ ? 1 : 4
		sub(/^[a-z0-9]+\[/, "", ty); sub(/\]$/, "", ty)
		if (ty == "") return n
		k = split(ty, dims, ", *")
		for (d = 1; d <= k; d++) n *= dims[d]
		return n
	}
	FNR == NR {
		if ($0 ~ ("^# stats: task (" tasks ") ")) {
			for (i = 1; i <= NF; i++) if ($i == "arena") a = $(i + 1)
			arena += int((a + 63) / 64) * 64
		}
		next
	}
	function ty(   s) { match($0, /[a-z0-9]+\[[^]]*\]$/); return substr($0, RSTART, RLENGTH) }
	/^  decl / { total += bytes(ty()) }
	/^task / { t = $2; sub(/:$/, "", t) }
	t ~ ("^(" tasks ")$") && /^  (in|out) / && $3 != "param" && $3 != "const" { total += bytes(ty()) }
	END { print total + arena }
' "$2" "$3"
}
want=$(by_hand "vjp|jvp" "$out/stats" "$out/inspect")
[ "$want" -gt 0 ]

"$FADC_BENCH" --backend cpu --gpu -1 --config "$out/c.yaml" --artifacts "$out/art" --num-iters 2 \
	--memory --output "$out/t.md" --json "$out/j.json" >"$out/log" 2>"$out/err" || { cat "$out/err"; exit 1; }
for task in vjp jvp; do
	got=$(grep -o "{\"model\": \"m\", \"task\": \"$task\"[^}]*" "$out/j.json" |
		sed -n 's/.*"peak_memory_bytes": \([0-9]*\).*/\1/p')
	if [ "$got" != "$want" ]; then
		echo "peak_memory_bytes of $task: $got, by hand $want" >&2
		cat "$out/j.json" >&2
		exit 1
	fi
done
# The column: "1012 B" style below a KiB, else "1.1 KiB" (one decimal).
col=$(awk -v b="$want" 'BEGIN { if (b < 1024) printf "%d B", b; else printf "%.1f KiB", b / 1024 }')
[ "$(sed -n 1p "$out/t.md")" = "| model | task | mean | var | peak memory |" ]
[ "$(grep -c "^| m | \(vjp\|jvp\) | [0-9.e-]* | [0-9.e-]* | $col |$" "$out/t.md")" -eq 2 ]

# Without --memory: the seed's four columns, the JSON field still there.
"$FADC_BENCH" --backend cpu --gpu -1 --config "$out/c.yaml" --artifacts "$out/art" --num-iters 2 \
	--output "$out/t2.md" --json "$out/j2.json" >"$out/log" 2>"$out/err" || { cat "$out/err"; exit 1; }
[ "$(sed -n 1p "$out/t2.md")" = "| model | task | mean | var |" ]
[ "$(grep -c "^| m | \(vjp\|jvp\) | [0-9.e-]* | [0-9.e-]* |$" "$out/t2.md")" -eq 2 ]
[ "$(grep -c "\"peak_memory_bytes\": $want" "$out/j2.json")" -eq 2 ]

# The interpreter holds no runtime memory: null, and n/a in the column.
cat >"$out/i.yaml" <<YAML
task_lists:
  ALL_TASKS: [vjp, jvp]
models:
  ppl_simple_reg:
    source: $FADC_SOURCE_DIR/models/ppl_simple_reg.ir
    tasks: [vjp]
YAML
"$FADC_BENCH" --backend interp --config "$out/i.yaml" --num-iters 2 --memory \
	--output "$out/t3.md" --json "$out/j3.json" >"$out/log" 2>"$out/err" || { cat "$out/err"; exit 1; }
grep -q '"peak_memory_bytes": null' "$out/j3.json"
grep -q '^| ppl_simple_reg | vjp | [0-9.e-]* | [0-9.e-]* | n/a |$' "$out/t3.md"
# --no-check: the partner is never compiled or run, so a vjp-only artifact
# serves and the cell's peak is the declarations and vjp's own three.
"$FADC" "$FADC_SOURCE_DIR/models/ppl_simple_reg.ir" -o "$out/m1.so" --tasks vjp --stats \
	>"$out/stats1" 2>&1
"$FADC" inspect "$out/m1.so" >"$out/inspect1"
want1=$(by_hand "vjp" "$out/stats1" "$out/inspect1")
[ "$want1" -gt 0 ] && [ "$want1" -lt "$want" ]
mkdir -p "$out/art1"
cp "$out/m1.so" "$out/art1/"
sed 's/tasks: \[vjp, jvp\]$/tasks: [vjp]/; s/source: m.so/source: m1.so/' "$out/c.yaml" >"$out/c1.yaml"
"$FADC_BENCH" --backend cpu --gpu -1 --config "$out/c1.yaml" --artifacts "$out/art1" --num-iters 2 \
	--no-check --memory --output "$out/t4.md" --json "$out/j4.json" >"$out/log" 2>"$out/err" ||
	{ cat "$out/err"; exit 1; }
grep -q '"consistency_checks": false' "$out/j4.json"
got=$(sed -n 's/.*"task": "vjp".*"peak_memory_bytes": \([0-9]*\).*/\1/p' "$out/j4.json")
if [ "$got" != "$want1" ]; then
	echo "--no-check: peak_memory_bytes of vjp: $got, by hand $want1" >&2
	cat "$out/j4.json" >&2
	exit 1
fi
echo "peak memory: $want bytes per cell, as counted by hand; $want1 for vjp alone (--no-check)"
