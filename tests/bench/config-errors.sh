# RUN: bash %s
# Configuration and selection errors (issue 16): each is one clear error
# naming the file and the field (file:line:col where the YAML has a mark),
# exit status 1, and nothing runs.  Exit 0 means every requested cell ran,
# so a run that would time nothing is an error too.
set -u
. "$(dirname "$0")/common.bash"
M=$SRC/models/ppl_simple_reg.ir
cd "$tmp"
# cfg TEXT: writes c.yaml (the head of task lists, then TEXT).
cfg() { printf '%s%s' "$LISTS" "$1" > c.yaml; }
interp=(--backend interp --num-iters 0 --config c.yaml)

# A selected model whose source does not exist: an error at its source:
# key (it was "skipped" with exit 0), even when another model is fine.
cfg "models:
  ok: {source: $M, tasks: [vjp]}
  gone:
    tasks: [vjp]
    source: nosuch.ir
"
run_bench 1 "${interp[@]}"
err_is "c.yaml:7:13: error: model 'gone': source: ./nosuch.ir: cannot open: No such file or directory"
ran_nothing
# ... but not when it is not selected, or skipped on this device.
run_bench 0 "${interp[@]}" --model-filter ok
printf 'skip: {device: {cpu: [gone]}}\n' >> c.yaml
run_bench 0 "${interp[@]}"
err_has "model gone is skipped on the CPU (configuration)"
# A source that is a folder, or empty (which named the folder).
cfg "models:
  m: {source: ., tasks: [vjp]}
"
run_bench 1 "${interp[@]}"
err_is "c.yaml:4:15: error: model 'm': source: ./.: is a directory, not a regular file"
cfg "models:
  m: {source: '', tasks: [vjp]}
"
run_bench 1 "${interp[@]}"
err_is "c.yaml:4:15: error: model 'm': source is empty"

# Duplicate keys: libyaml keeps the last; both places are named.
cfg "models:
  m: {source: $M, tasks: [vjp]}
rtol: 1.0e-4
rtol: 1.0e-9
"
run_bench 1 "${interp[@]}"
err_is "c.yaml:6:1: error: duplicate key 'rtol' (first at line 5, column 1)"
ran_nothing
cfg "models:
  m:
    source: $M
    tasks: [vjp]
    source: other.ir
"
run_bench 1 "${interp[@]}"
err_is "c.yaml:7:5: error: duplicate key 'source' (first at line 5, column 5)"

# Tolerances: positive and finite.
for r in inf .inf nan -1 0; do
	cfg "models:
  m:
    source: $M
    tasks: [vjp]
    rtol: $r
"
	run_bench 1 "${interp[@]}"
	err_is "c.yaml:7:11: error: rtol must be a positive finite number, got '$r'"
done

# A second document was ignored.
cfg "models:
  m: {source: $M, tasks: [vjp]}
---
models:
  n: {source: $M, tasks: [vjp]}
"
run_bench 1 "${interp[@]}"
err_is "c.yaml:5:1: error: a second YAML document; a configuration is one document"
ran_nothing

# The configuration itself: a folder, a FIFO (which must not block), missing.
run_bench 1 --backend interp --config "$tmp"
err_is "$tmp: error: is a directory, not a regular file"
mkfifo fifo.yaml
timeout 20 "$BENCH" --backend interp --config fifo.yaml >out 2>err
rc=$?
[ "$rc" -eq 1 ] || fail "--config FIFO: exit status $rc"
err_is "fifo.yaml: error: is a FIFO, not a regular file"
run_bench 1 --backend interp --config nosuch.yaml
err_is "nosuch.yaml: error: cannot open: No such file or directory"

# Empty selections: what matched nothing, and what there is.
cfg "models:
  alpha: {source: $M, tasks: [vjp, jvp]}
  beta: {source: $M, tasks: [vjp]}
"
run_bench 1 "${interp[@]}" --model-filter nosuch
err_is "fadc-bench: no model of c.yaml occurs in --model-filter 'nosuch' (its models: alpha, beta)"
ran_nothing
run_bench 1 "${interp[@]}" --task-filter hessian
err_is "fadc-bench: no task of the selected models occurs in --task-filter 'hessian' (their tasks: vjp, jvp)"
run_bench 1 "${interp[@]}" --model-filter beta --task-filter jvp
err_is "fadc-bench: no task of the selected models occurs in --task-filter 'jvp' (their tasks: vjp)"
# One model without a matching task is fine while another has one.
run_bench 0 "${interp[@]}" --task-filter jvp

# --artifacts that is not a folder: said so, not blamed on the compiler.
cfg "models:
  m: {source: $M, tasks: [vjp]}
"
touch afile
for a in /etc/passwd "$tmp/afile"; do
	run_bench 1 --config c.yaml --num-iters 0 --compile --artifacts "$a"
	err_is "fadc-bench: --artifacts $a: is not a directory"
done
run_bench 1 --config c.yaml --num-iters 0 --compile --artifacts "$tmp/afile/sub"
err_is "fadc-bench: --artifacts $tmp/afile/sub: Not a directory"

# A source that is not an artifact: its path once in the message.
echo junk > junk.so
cfg "models:
  m: {source: junk.so, tasks: [vjp]}
"
run_bench 1 --config c.yaml --num-iters 0
err_has "fadc-bench: m: skipped (1 cell): $tmp/junk.so: not a fadc artifact"
[ "$(grep -o "$tmp/junk.so" err | wc -l)" -eq 1 ] || fail "the path is printed more than once: $(cat err)"

# Aliases that expand exponentially (found by fuzz_config): refused at once,
# not after 4^15 visits (timeout: a hang fails the test).
cp "$FADC_SOURCE_DIR/tests/fuzz/regress-yaml/alias-blowup.yaml" blow.yaml
timeout 10 "$FADC_BENCH" --config blow.yaml --num-iters 0 >out 2>err
rc=$?
[ "$rc" -eq 1 ] || fail "the alias blow-up exited $rc (124: it hung)"
err_has "its aliases expand to too many lists"
echo "config-errors: ok"
