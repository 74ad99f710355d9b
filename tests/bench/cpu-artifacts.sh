# RUN: bash %s
# Artifacts of the cpu backend, in a configuration of its own (a copy of
# ppl_simple_reg): without --compile a missing or stale artifact is an
# error naming the command to run; --compile builds it once; an artifact
# that serves is reused (a touched source is not stale: the descriptor's
# source hash decides); a run needing more tasks rebuilds with the old ones
# kept; an edited source is stale and rebuilt (with the tasks it had);
# other sizes get an artifact of their own; a compiler that cannot run is
# a clear error.
set -eu
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
mkdir -p "$out/cfg/models"
cp "$FADC_SOURCE_DIR/models/ppl_simple_reg.ir" "$out/cfg/models/m.ir"
cat > "$out/cfg/bench.yaml" <<'YAML'
task_lists:
  ALL_TASKS: [vjp, jvp, vhp, hvp]
models:
  m:
    source: models/m.ir
    tasks: [vjp, jvp, vhp, hvp]
YAML
bench() { "$FADC_BENCH" --backend cpu --config "$out/cfg/bench.yaml" --artifacts "$out/art" \
    --num-iters 1 --output "$out/t.md" "$@" > /dev/null; }
rows() { grep -c '^| m |' "$out/t.md" || true; }

# Missing, no --compile: an error naming the command; nothing runs.
if bench --task-filter vjp --json "$out/j1" 2> "$out/e1"; then exit 1; fi
grep -q '{"model": "m", "task": "vjp", "skipped": "no artifact ' "$out/j1"
grep -q "^fadc-bench: m: skipped (1 cell): no artifact $out/art/m-[0-9a-f]*\.cpu\.so; run with --compile, or: .*/fadc[-cg]* $out/cfg/models/m\.ir -o $out/art/m-[0-9a-f]*\.cpu\.so --tasks vjp,jvp$" "$out/e1"
[ "$(rows)" -eq 0 ] && [ ! -d "$out/art" ]

# --compile: built once, with the check's partner (jvp).
bench --compile --task-filter vjp 2> "$out/e2"
grep -q '^fadc-bench: compiling m (vjp,jvp) into ' "$out/e2"
so=$(ls "$out"/art/m-*.cpu.so)
[ "$(rows)" -eq 1 ]
# Reused while it serves, also when the source is only touched.
sleep 1; touch "$out/cfg/models/m.ir"
bench --compile --task-filter vjp,jvp 2> "$out/e3"
if grep -q compiling "$out/e3"; then exit 1; fi
[ "$(rows)" -eq 2 ]

# More tasks: rebuilt, keeping the ones it had (vjp then still needs no build).
bench --compile --task-filter hvp 2> "$out/e4"
grep -q "^fadc-bench: compiling m (hvp,vhp,vjp,jvp) into $so: stale, lacks tasks hvp, vhp$" "$out/e4"
bench --task-filter vjp,hvp 2> "$out/e5"
[ "$(rows)" -eq 2 ]

# An edited source is stale: an error without --compile, rebuilt with it.
echo '# edited' >> "$out/cfg/models/m.ir"
if bench --task-filter vjp 2> "$out/e6"; then exit 1; fi
grep -q "^fadc-bench: m: skipped (1 cell): the artifact $so is stale: the model or the prelude changed (source hash [0-9a-f]*, now [0-9a-f]*); run with --compile, or: " "$out/e6"
bench --compile --task-filter vjp 2> "$out/e7"
grep -q "^fadc-bench: compiling m (vjp,jvp,hvp,vhp) into $so: stale, the model or the prelude changed" "$out/e7"
bench --task-filter vjp 2> /dev/null
[ "$(rows)" -eq 1 ]

# Other sizes: an artifact of their own, the first one kept.
bench --compile --task-filter vjp -D N=3 -D m:K=2 --json "$out/j8" 2> "$out/e8"
grep -q '^fadc-bench: compiling m (vjp,jvp) into ' "$out/e8"
[ "$(ls "$out"/art/m-*.cpu.so | wc -l)" -eq 2 ]
grep -q '"artifact_options": "target=cpu [^"]* defines=N=3,K=2 tasks=forward,vjp,jvp"' "$out/j8"

# A compiler that cannot run.
if bench --compile --fadc "$out/no-such-fadc" -D N=4 --task-filter vjp 2> "$out/e9"; then exit 1; fi
grep -q "skipped (1 cell): cannot run the compiler '$out/no-such-fadc': No such file or directory (give --fadc PATH)" "$out/e9"
