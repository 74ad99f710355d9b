# RUN: bash %s
# A model given as a compiled artifact (`source: m.so` in the
# configuration): the cpu backend runs it as it is, never compiles it, and
# says precisely why it cannot serve (tasks it lacks, other sizes); the
# interpreter, which needs the .ir, skips it with that reason, and so does
# --check-reference's comparison.
set -eu
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$FADC" "$FADC_SOURCE_DIR/models/ppl_simple_reg.ir" -o "$out/m.so" --tasks vjp,jvp > /dev/null
cat > "$out/c.yaml" <<'YAML'
task_lists:
  ALL_TASKS: [vjp, jvp, hvp, vhp]
models:
  m:
    source: m.so
    tasks: [vjp, jvp]
YAML
bench() { "$FADC_BENCH" --config "$out/c.yaml" --artifacts "$out/art" --num-iters 2 --output "$out/t.md" "$@"; }
bench --backend cpu --compile --json "$out/j.json" > "$out/log" 2> "$out/err" || { cat "$out/err"; exit 1; }
if grep -q 'compiling\|INCONSISTENT' "$out/err"; then cat "$out/err"; exit 1; fi
[ ! -e "$out/art" ]
[ "$(grep -c '^| m | \(vjp\|jvp\) | [0-9.e-]* | [0-9.e-]* |$' "$out/t.md")" -eq 2 ]
grep -q "\"artifact\": \"$out/m.so\"" "$out/j.json"

# Tasks it lacks: skipped with the reason, nothing compiled.
if bench --backend cpu --compile --run-slow-tasks 2> "$out/e2"; then exit 1; fi
grep -q "^fadc-bench: m: skipped (4 cells): the artifact $out/m.so lacks tasks hvp, vhp$" "$out/e2"
[ ! -e "$out/art" ]
# Other sizes cannot be had from a compiled model.
if bench --backend cpu -D N=3 2> "$out/e3"; then exit 1; fi
grep -q "^fadc-bench: m: skipped (2 cells): the artifact $out/m.so is built with sizes '', not 'N=3' (a compiled model's sizes cannot change)$" "$out/e3"
# The interpreter needs the .ir.
if bench --backend interp 2> "$out/e4"; then exit 1; fi
grep -q "^fadc-bench: m: skipped (2 cells): $out/m.so is a compiled artifact: the interp backend needs the .ir$" "$out/e4"
# So does the reference check: it cannot run, which is a failed check, and the run goes on.
bench --backend cpu --check-reference --task-filter vjp > /dev/null 2> "$out/e5"
grep -q "^fadc-bench: m vjp: reference check could not run: the model is a compiled artifact: the interpreter needs its .ir$" "$out/e5"
grep -q '^| m | vjp \[reference mismatch\] |' "$out/t.md"

# An absolute source path is used as it is, not under the configuration's folder.
mkdir "$out/elsewhere"
sed "s|source: m.so|source: $out/m.so|" "$out/c.yaml" > "$out/elsewhere/c.yaml"
"$FADC_BENCH" --config "$out/elsewhere/c.yaml" --artifacts "$out/art" --num-iters 2 \
	--output "$out/t2.md" --backend cpu > /dev/null 2> "$out/e6" || { cat "$out/e6"; exit 1; }
[ "$(grep -c '^| m | \(vjp\|jvp\) | [0-9.e-]* | [0-9.e-]* |$' "$out/t2.md")" -eq 2 ]

# The target is a list: a cpu,cuda artifact serves the CPU (and a GPU) run;
# a cuda-only one does not serve the CPU.  Where NVRTC is missing (no CUDA
# toolkit), the compile fails and this part is skipped.
if "$FADC" "$FADC_SOURCE_DIR/models/ppl_simple_reg.ir" -o "$out/both.so" --tasks vjp,jvp \
	--target cpu,cuda > /dev/null 2>&1; then
	"$FADC" "$FADC_SOURCE_DIR/models/ppl_simple_reg.ir" -o "$out/gpu.so" --tasks vjp,jvp \
		--target cuda > /dev/null
	sed "s|source: m.so|source: $out/both.so|" "$out/c.yaml" > "$out/both.yaml"
	"$FADC_BENCH" --config "$out/both.yaml" --artifacts "$out/art" --num-iters 2 --gpu -1 \
		--output "$out/t3.md" --backend cpu > /dev/null 2> "$out/e7" || { cat "$out/e7"; exit 1; }
	[ "$(grep -c '^| m | \(vjp\|jvp\) | [0-9.e-]* | [0-9.e-]* |$' "$out/t3.md")" -eq 2 ]
	sed "s|source: m.so|source: $out/gpu.so|" "$out/c.yaml" > "$out/gpu.yaml"
	if "$FADC_BENCH" --config "$out/gpu.yaml" --artifacts "$out/art" --num-iters 2 --gpu -1 \
		--output "$out/t4.md" --backend cpu > /dev/null 2> "$out/e8"; then exit 1; fi
	grep -q "^fadc-bench: m: skipped (2 cells): the artifact $out/gpu.so is built for target 'cuda', which has no 'cpu'$" "$out/e8"
fi
