# RUN: bash %s
# Both ppl models, every task of their list (ALL_TASKS), on the cpu
# backend at full size: one artifact per model holds every task and its
# consistency partner, every warm-up passes its check (dot-product tests
# for vjp/jvp and hvp/vhp, strategy against strategy for the Jacobians and
# Hessians), and the JSON names the artifact, its source hash, the hash of
# its bytes (FNV-1a, recomputed here) and its options,
# and the runtime and the compiler.
set -eu
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$FADC_BENCH" --backend cpu --compile --artifacts "$out/art" --num-iters 2 \
    --model-filter ppl_simple_reg,ppl_robust_reg --output "$out/t.md" --json "$out/j.json" \
    > "$out/log" 2> "$out/err" || { cat "$out/err"; exit 1; }
# One compile per model, with every task at once.
[ "$(grep -c '^fadc-bench: compiling ' "$out/err")" -eq 2 ]
[ "$(ls "$out"/art/*.cpu.so | wc -l)" -eq 2 ]
if grep -q 'INCONSISTENT\|could not run' "$out/err"; then exit 1; fi
[ "$(grep -c '^| ppl_' "$out/t.md")" -eq 20 ]
if grep -q 'inconsistent' "$out/t.md"; then exit 1; fi
python3 - "$out/j.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
env = d["environment"]
assert env["backend"] == "cpu" and env["runtime"].startswith("api "), env
assert env["compiler"].split("/")[-1] == "fadc", env
assert env["compiler_version"].startswith("fadc " + env["fadc"] + " (artifact format "), env
cells = d["cells"]
assert len(cells) == 20, len(cells)
for c in cells:
    assert c["consistent"], c
    assert c["consistency_error"] is not None and c["consistency_error"] <= 1e-3, c
    assert len(c["artifact_hash"]) == 16 and c["artifact"].endswith(".cpu.so"), c
    # The artifact's bytes, FNV-1a 64 computed here independently.
    h = 0xcbf29ce484222325
    for b in open(c["artifact"], "rb").read():
        h = ((h ^ b) * 0x100000001b3) & 0xffffffffffffffff
    assert c["artifact_file_hash"] == "%016x" % h, c
    assert "target=cpu" in c["artifact_options"] and "jacrev" in c["artifact_options"], c
    assert len(c["samples"]) == 2 and all(s > 0 for s in c["samples"]), c
PY
