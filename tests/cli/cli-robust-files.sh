# RUN: bash %s
# Files at the edges (issue 16): an input must be a regular file (a FIFO
# would block forever, /dev/zero would be read for a gigabyte), an output
# never replaces an input or a device node, and `fadc run --out` is all or
# nothing.  Every command runs under `timeout`, so a hang fails the test
# instead of stalling it.
source "$(dirname "$0")/common.bash"
model=$SRC/models/ppl_simple_reg.ir
to="timeout 20"

run_to() { # run_to WANT ARGS...: run_fadc under a timeout (124: it hung)
	local want=$1 rc
	shift
	$to "$FADC" "$@" >"$tmp/out" 2>"$tmp/err"
	rc=$?
	[ "$rc" -eq 124 ] && fail "fadc $* hung"
	if [ "$rc" -ne "$want" ]; then
		cat "$tmp/err" >&2
		fail "fadc $* exited $rc, expected $want"
	fi
}

# --- inputs that are not regular files --------------------------------
mkfifo "$tmp/fifo.ir" "$tmp/fifo.npy" "$tmp/fifo.so" "$tmp/fifo.safetensors"
run_to 1 "$tmp/fifo.ir" --emit ir
err_has "$tmp/fifo.ir: error: "
err_has "is a FIFO, not a regular file"
run_to 1 run "$tmp/fifo.ir" --print
err_has "is a FIFO, not a regular file"
run_to 1 run "$tmp/fifo.so" --print
err_has "$tmp/fifo.so: error: "
err_has "is a FIFO, not a regular file"
run_to 1 run "$model" --params "beta_value=$tmp/fifo.npy" --print
err_first "$tmp/fifo.npy: error: is a FIFO, not a regular file"
run_to 1 run "$model" --params "$tmp/fifo.safetensors" --print
err_first "$tmp/fifo.safetensors: error: is a FIFO, not a regular file"
run_to 1 compare-npy "$tmp/fifo.npy" "$tmp/fifo.npy"
err_has "is a FIFO, not a regular file"

# A symlink to /dev/zero: refused at once, not read.
ln -s /dev/zero "$tmp/zero.ir"
run_to 1 "$tmp/zero.ir" --emit ir
err_has "is a character device, not a regular file"
ln -s /dev/zero "$tmp/zero.npy"
run_to 1 run "$model" --params "beta_value=$tmp/zero.npy" --print
err_first "$tmp/zero.npy: error: is a character device, not a regular file"
# A directory.
mkdir "$tmp/dir.npy"
run_to 1 run "$model" --params "beta_value=$tmp/dir.npy" --print
err_first "$tmp/dir.npy: error: is a directory, not a regular file"
# A symlink to a regular file is fine.
cp "$model" "$tmp/real.ir"
ln -s "$tmp/real.ir" "$tmp/link.ir"
run_to 0 "$tmp/link.ir" --emit ir

# --- outputs onto inputs --------------------------------------------------
cp "$model" "$tmp/m.ir"
cp "$tmp/m.ir" "$tmp/m.ir.orig"
run_to 1 "$tmp/m.ir" -o "$tmp/m.ir"
err_first "$tmp/m.ir: error: is the same file as the input $tmp/m.ir; refusing to overwrite it"
cmp -s "$tmp/m.ir" "$tmp/m.ir.orig" || fail "-o onto the input changed the model"
# Through another name (a hard link, a symlink): the same file.
ln "$tmp/m.ir" "$tmp/hard.ir"
run_to 1 "$tmp/m.ir" -o "$tmp/hard.ir"
err_has "is the same file as the input"
ln -s "$tmp/m.ir" "$tmp/soft.so"
run_to 1 "$tmp/m.ir" -o "$tmp/soft.so"
err_has "is the same file as the input"
cmp -s "$tmp/m.ir" "$tmp/m.ir.orig" || fail "-o onto a link of the input changed the model"
# run --out whose output would overwrite a bound input file.
run_to 0 run "$model" --out "$tmp/o"
cp "$tmp/o/out.npy" "$tmp/o.orig"
printf 'def forward() {\n  return zeros(shape=[11, 1]) as beta_value\n}\n' >"$tmp/b.ir"
run_to 0 run "$tmp/b.ir" --out "$tmp/b"
cp "$tmp/b/beta_value.npy" "$tmp/o/out.npy"
run_to 1 run "$model" --params "beta_value=$tmp/o/out.npy" --out "$tmp/o"
err_first "$tmp/o/out.npy: error: is the same file as the input $tmp/o/out.npy; refusing to overwrite it"
cmp -s "$tmp/o/out.npy" "$tmp/b/beta_value.npy" || fail "run --out overwrote its input"

# --- a device as the output: written in place, never replaced -----------
# (As root, a rename over /dev/null would turn it into a regular file.)  The
# test makes its own null device when it may (root), so that a regression
# cannot break the machine's /dev/null; otherwise it uses /dev/null.
run_to 0 run "$model" --out "$tmp/d"
null=/dev/null
mknod -m 666 "$tmp/null" c 1 3 2>/dev/null && null=$tmp/null
[ -c "$null" ] || fail "$null is not a character device before the test"
run_to 0 "$model" -o "$null" --tasks vjp
[ -c "$null" ] || fail "fadc -o $null replaced the device"
ls "$null".tmp* >/dev/null 2>&1 && fail "fadc -o $null left a temporary file beside it"
# Into a FIFO with a reader: the artifact's bytes arrive there.
mkfifo "$tmp/pipe.so"
cat "$tmp/pipe.so" >"$tmp/piped.so" &
reader=$!
run_to 0 "$model" -o "$tmp/pipe.so" --tasks vjp
wait $reader
[ -p "$tmp/pipe.so" ] || fail "the FIFO output was replaced"
run_to 0 "$model" -o "$tmp/file.so" --tasks vjp
cmp -s "$tmp/piped.so" "$tmp/file.so" || fail "the artifact written into a FIFO differs"
# A symlink to an artifact: the file is replaced, the link stays a link.
ln -s "$tmp/file.so" "$tmp/via.so"
run_to 0 "$model" -o "$tmp/via.so" --tasks vjp
[ -L "$tmp/via.so" ] || fail "-o through a symlink replaced the link"

# --- run --out is all or nothing -------------------------------------------
# A parameter whose gradient's file name is too long for the filesystem:
# out.npy could be written, grad.<name>.npy cannot.  The folder must not
# appear (new) or change (existing), and the message keeps its reason even
# though the name is long.
long=$(printf 'w%.0s' $(seq 1 300))
printf 'param %s: f32[2] = ones(shape=[2])\ndef forward() {\n  return sum(%s * %s)\n}\n' \
	"$long" "$long" "$long" >"$tmp/long.ir"
run_to 1 run "$tmp/long.ir" --task vjp --out "$tmp/new"
err_has "File name too long"
[ -e "$tmp/new" ] && fail "a failed run created its output folder"
ls -d "$tmp"/new.tmp* >/dev/null 2>&1 && fail "a failed run left its temporary folder"
mkdir "$tmp/old"
echo keep >"$tmp/old/keep.txt"
run_to 1 run "$tmp/long.ir" --task vjp --out "$tmp/old"
[ "$(ls -A "$tmp/old")" = "keep.txt" ] || fail "a failed run changed its folder: $(ls -A "$tmp/old")"
# A successful run into an existing folder keeps what else is there.
run_to 0 run "$model" --out "$tmp/old"
[ "$(ls -A "$tmp/old" | tr '\n' ' ')" = "keep.txt out.npy " ] ||
	fail "the run's folder holds $(ls -A "$tmp/old" | tr '\n' ' ')"

# A 200,000-character name: the message is not cut before its reason.
huge=$(head -c 200000 /dev/zero | tr '\0' 'p')
printf 'param %s: f32[2] = ones(shape=[2])\ndef forward() {\n  return sum(%s)\n}\n' \
	"$huge" "$huge" >"$tmp/huge.ir"
run_to 1 run "$tmp/huge.ir" --task vjp --out "$tmp/h"
err_has "File name too long"
[ "$(wc -c <"$tmp/err")" -lt 4000 ] || fail "the message is $(wc -c <"$tmp/err") bytes long"
exit 0
