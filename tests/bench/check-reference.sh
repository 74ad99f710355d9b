# RUN: bash %s
# --check-reference: each warm-up of the cpu backend is also compared with
# the float64 reference interpreter (same task, v and seed), output by
# output, within the model's rtol.  At reduced sizes every cell of
# ppl_simple_reg and multiheadattn matches, with a nonzero error (float32
# against float64: the comparison saw real values); a mismatch forced by
# the test hook (FADC_BENCH_FAULT=reference adds 1 to the reference's first
# value, =reference-nan makes it NaN) is reported in the log, the table and
# the JSON while the other checks pass and the run goes on; the interpreter
# cannot be checked against itself.
set -eu
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
bench() { "$FADC_BENCH" --backend cpu --compile --artifacts "$out/art" --reduced --num-iters 1 \
    --model-filter ppl_simple_reg,multiheadattn --check-reference "$@"; }

bench --output "$out/ok.md" --json "$out/ok.json" > /dev/null 2> "$out/ok.err" \
    || { cat "$out/ok.err"; exit 1; }
if grep -q 'MISMATCH\|INCONSISTENT\|could not run' "$out/ok.err"; then cat "$out/ok.err"; exit 1; fi
[ "$(grep -c '^| ppl_simple_reg | ' "$out/ok.md")" -eq 10 ]
[ "$(grep -c '^| multiheadattn | ' "$out/ok.md")" -eq 3 ]
if grep -q 'mismatch' "$out/ok.md"; then exit 1; fi
python3 - "$out/ok.json" <<'PY'
import json, sys
cells = json.load(open(sys.argv[1]))["cells"]
assert len(cells) == 13, len(cells)
for c in cells:
    assert c["reference_match"] and c["consistent"], c
    assert c["reference_error"] is not None and c["reference_error"] <= 1e-4, c
assert any(c["reference_error"] > 0 for c in cells), cells
PY

# A forced mismatch: reported, the consistency checks still pass, every cell runs.
FADC_BENCH_FAULT=reference bench --task-filter vjp,jvp --output "$out/f.md" --json "$out/f.json" \
    > /dev/null 2> "$out/f.err"
grep -q '^fadc-bench: ppl_simple_reg vjp: REFERENCE MISMATCH: normalized error [0-9.e-]* (tolerance 0.0001) in output ' "$out/f.err"
grep -q '^fadc-bench: 4 cells failed the consistency or the reference check$' "$out/f.err"
if grep -q 'INCONSISTENT' "$out/f.err"; then exit 1; fi
printf '%s\n' '| ppl_simple_reg | vjp [reference mismatch] |' '| ppl_simple_reg | jvp [reference mismatch] |' \
    '| multiheadattn | vjp [reference mismatch] |' '| multiheadattn | jvp [reference mismatch] |' > "$out/want"
tail -n +3 "$out/f.md" | cut -d'|' -f1-3 | sed 's/$/|/' | diff -u "$out/want" -
python3 - "$out/f.json" <<'PY'
import json, sys
cells = json.load(open(sys.argv[1]))["cells"]
assert len(cells) == 4, cells
for c in cells:
    assert c["consistent"] and not c["reference_match"], c
    assert c["reference_error"] > 1e-3, c
PY

# NaN is a mismatch too (a NaN error is not within any tolerance).
FADC_BENCH_FAULT=reference-nan bench --task-filter vjp --model-filter ppl_simple_reg \
    --output "$out/n.md" --json "$out/n.json" > /dev/null 2> "$out/n.err"
grep -q '^fadc-bench: ppl_simple_reg vjp: REFERENCE MISMATCH: normalized error nan ' "$out/n.err"
grep -q '"reference_error": null, "reference_match": false' "$out/n.json"
grep -q '^| ppl_simple_reg | vjp \[reference mismatch\] |' "$out/n.md"

# The interpreter is the reference: a usage error.
set +e
"$FADC_BENCH" --backend interp --check-reference --num-iters 0 2> "$out/u.err"; rc=$?
set -e
[ "$rc" -eq 2 ] && grep -q '^fadc-bench: --check-reference: the interp backend is the reference itself' "$out/u.err"
