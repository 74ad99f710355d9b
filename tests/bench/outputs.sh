# RUN: bash %s
# fadc-bench's outputs (issue 16): --output and --json are written through
# a temporary file and a rename (runtime/fileio.h), so an interrupted run
# leaves the old file whole and no temporary behind; an existing target
# that is not a regular file is written in place, never replaced; an
# output that is the configuration, a model's source or the other output
# is refused before anything runs; a folder that cannot hold the output
# fails before the run, not after it.
set -u
. "$(dirname "$0")/common.bash"
run=(--backend interp --num-iters 1 --model-filter ppl_simple_reg --task-filter vjp)

# The normal case: both written, nothing else left in the folder.
mkdir "$tmp/o"
run_bench 0 "${run[@]}" --output "$tmp/o/t.md" --json "$tmp/o/j.json"
[ "$(ls "$tmp/o" | tr '\n' ' ')" = "j.json t.md " ] || fail "left: $(ls "$tmp/o")"
grep -q '^| ppl_simple_reg | vjp |' "$tmp/o/t.md" || fail "no row in the table"
tail -c 4 "$tmp/o/j.json" | grep -q ']}' || fail "the JSON is not closed"

# An output onto the configuration: refused by device and inode, through
# another name, a symlink and a hard link too; the file is untouched.
printf '%smodels:\n  ppl_simple_reg: {source: %s/models/ppl_simple_reg.ir, tasks: [vjp]}\n' \
	"$LISTS" "$SRC" > "$tmp/c.yaml"
run_bench 0 "${run[@]}" --config "$tmp/c.yaml" # it runs as it is
sum=$(cksum < "$tmp/c.yaml")
ln -s c.yaml "$tmp/link.yaml"
ln "$tmp/c.yaml" "$tmp/hard.yaml"
for flag in --output --json; do
	for target in "$tmp/c.yaml" "$tmp/./c.yaml" "$tmp/link.yaml" "$tmp/hard.yaml"; do
		run_bench 1 "${run[@]}" --config "$tmp/c.yaml" "$flag" "$target"
		err_is "fadc-bench: $flag $target: is the same file as the input $tmp/c.yaml; refusing to overwrite it"
		ran_nothing
	done
done
[ "$(cksum < "$tmp/c.yaml")" = "$sum" ] || fail "the configuration changed"

# An output onto a selected model's source: refused too.  (The model is
# copied beside a configuration of its own.)
cp "$SRC/models/ppl_simple_reg.ir" "$tmp/m.ir"
printf '%smodels:\n  m: {source: m.ir, tasks: [vjp]}\n' "$LISTS" > "$tmp/m.yaml"
run_bench 1 --backend interp --num-iters 1 --config "$tmp/m.yaml" --json "$tmp/m.ir"
err_is "fadc-bench: --json $tmp/m.ir: is the same file as the input $tmp/m.ir; refusing to overwrite it"
ran_nothing
cmp -s "$tmp/m.ir" "$SRC/models/ppl_simple_reg.ir" || fail "the model changed"

# --output and --json naming one file (existing or not, by any name).
run_bench 1 "${run[@]}" --output "$tmp/same.out" --json "$tmp/./same.out"
err_is "fadc-bench: --output $tmp/same.out and --json $tmp/./same.out are the same file"
[ ! -e "$tmp/same.out" ] || fail "same.out was written"
touch "$tmp/same.out"
ln -s same.out "$tmp/link-same"
run_bench 1 "${run[@]}" --output "$tmp/same.out" --json "$tmp/link-same"
err_has "are the same file"

# A target that is not a regular file is written in place, never replaced:
# a symlink to /dev/null stays a symlink, a private character device (as
# root) stays a device, and both outputs may share a device.
ln -s /dev/null "$tmp/null"
run_bench 0 "${run[@]}" --output "$tmp/null" --json "$tmp/null"
[ -L "$tmp/null" ] && [ -c "$tmp/null" ] || fail "the symlink to /dev/null was replaced"
if [ "$(id -u)" = 0 ] && mknod "$tmp/dev" c 1 3 2>/dev/null; then
	run_bench 0 "${run[@]}" --output "$tmp/dev" --json "$tmp/dev"
	[ -c "$tmp/dev" ] || fail "the device node was replaced by a regular file"
fi
# A FIFO with a reader gets the table in place.
mkfifo "$tmp/fifo"
cat "$tmp/fifo" > "$tmp/from-fifo" &
reader=$!
for _ in $(seq 50); do
	"$BENCH" "${run[@]}" --output "$tmp/fifo" >"$tmp/out" 2>"$tmp/err" && break
	sleep 0.1 # the reader has not opened the FIFO yet (ENXIO)
done
wait "$reader"
[ -p "$tmp/fifo" ] || fail "the FIFO was replaced"
grep -q '^| ppl_simple_reg | vjp |' "$tmp/from-fifo" || fail "nothing came through the FIFO"

# A directory, or a folder that does not exist: an error before the run.
run_bench 1 "${run[@]}" --output "$tmp"
err_is "fadc-bench: cannot write $tmp: is a directory"
ran_nothing
run_bench 1 "${run[@]}" --json "$tmp/nosuch/j.json"
err_has "fadc-bench: cannot write $tmp/nosuch/j.json: cannot create temporary file"
ran_nothing

# Interrupted (TERM) in the middle of a long run: the old JSON and table
# are whole, no temporary is left, and the exit status says the signal.
printf '{"old": true}\n' > "$tmp/o/j.json"
printf 'old table\n' > "$tmp/o/t.md"
"$BENCH" --backend interp --num-iters 1000000 --model-filter ppl_simple_reg --task-filter vjp \
	--output "$tmp/o/t.md" --json "$tmp/o/j.json" >/dev/null 2>&1 &
pid=$!
for _ in $(seq 100); do
	ls "$tmp/o" | grep -q 'j.json.tmp' && break
	sleep 0.1
done
ls "$tmp/o" | grep -q 'j.json.tmp' || fail "no temporary JSON while running"
# fileio makes a temporary, then registers it for removal: let the run get
# past that instant (a signal inside it would leave the file).
sleep 0.5
kill -TERM "$pid"
wait "$pid"
rc=$?
[ "$rc" -eq 143 ] || fail "exit status $rc after TERM, expected 143"
[ "$(cat "$tmp/o/j.json")" = '{"old": true}' ] || fail "the JSON changed"
[ "$(cat "$tmp/o/t.md")" = 'old table' ] || fail "the table changed"
[ "$(ls "$tmp/o" | tr '\n' ' ')" = "j.json t.md " ] || fail "left behind: $(ls "$tmp/o")"

# compare --output: never onto its inputs; written atomically.
run_bench 0 "${run[@]}" --output "$tmp/a.md"
cp "$tmp/a.md" "$tmp/b.md"
run_bench 1 compare "$tmp/a.md" "$tmp/b.md" --output "$tmp/b.md"
err_is "fadc-bench: $tmp/b.md: is the same file as the input $tmp/b.md; refusing to overwrite it"
cmp -s "$tmp/a.md" "$tmp/b.md" || fail "compare overwrote its input"
run_bench 0 compare "$tmp/a.md" "$tmp/b.md" --output "$tmp/cmp.md"
grep -q '^| ppl_simple_reg | vjp |' "$tmp/cmp.md" || fail "no compare table"
run_bench 1 compare "$tmp" "$tmp/b.md"
err_is "fadc-bench: $tmp: is a directory, not a regular file"
echo "outputs: ok"
