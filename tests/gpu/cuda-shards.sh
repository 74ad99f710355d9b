# RUN: bash %s
# Shards of a batched task on the GPU (runtime/shard.h): compiled here with
# --target cuda --shards 2 (each shard its own CUDA task, the descriptor's
# shard records in format 12), then tests/gpu/shard_check runs the Hessian
# whole and as two shards on two contexts of GPU 0 (sharing its memory),
# assembled on the first: slices written in place by the kernels of both
# (peer_direct), only by the first's (the second's through the host), and
# all through the host; each output equal to the whole task's within 1e-5
# normalized.  Skipped (77) where there is no CUDA device.
source "$(dirname "$0")/../cli/common.bash"
m=$SRC/models/ppl_robust_reg.ir
if ! "$FADC" "$m" -o "$tmp/probe.so" --target cuda --tasks vjp -D N=3 -D K=2 2>"$tmp/err"; then
	grep -qF "built without the CUDA toolkit" "$tmp/err" && { echo "no CUDA toolkit: skipped"; exit 77; }
	cat "$tmp/err" >&2
	fail "fadc --target cuda failed"
fi
run_fadc 0 "$m" -o "$tmp/s.so" --target cuda --tasks hessian,jacfwd --shards 2 -D N=40 -D K=10
run_fadc 0 inspect "$tmp/s.so"
out_has "  shard 1 of 2 of hessian: basis rows [26, 52) of 52"
grep '^task hessian:1/2:' "$tmp/out" | grep -qF ", code cuda" || fail "hessian:1/2 has no CUDA code"
v=$(tail -c 40 "$tmp/s.so" | od -An -tu4 -j8 -N4 | tr -d ' ')
[ "$v" = 12 ] || fail "format $v, expected 12"

check=${FADC_BIN_DIR:?}/shard_check
for t in hessian jacfwd; do
	for mode in --peer "" --staged --copy; do
		"$check" "$tmp/s.so" "$t" --gpus 0,0 --reps 3 $mode >"$tmp/out" 2>"$tmp/err"
		rc=$?
		[ "$rc" = 77 ] && { cat "$tmp/err"; exit 77; }
		[ "$rc" = 0 ] || { cat "$tmp/err" >&2; fail "shard_check $t $mode exited $rc"; }
		cat "$tmp/out"
	done
done
# The context over several GPUs runs fadc_run of a batched task as its
# shards (runtime/multi.c, docs/MULTIGPU.md): over GPUs 0,1 (one shard
# each: GPU 1's kernels write into GPU 0's outputs), equal to one GPU's whole task within 1e-5
# (tests/gpu/multi_check); over one GPU (one rank) the task whole; an
# artifact without the shards is an error naming --shards 2.
multi=${FADC_BIN_DIR:?}/multi_check
for t in hessian jacfwd; do
	FADC_MULTI_FORCE=1 "$multi" "$tmp/s.so" "$t" 0 >"$tmp/out" 2>&1 ||
		{ cat "$tmp/out" >&2; fail "multi_check $t over GPU 0 (one rank)"; }
	cat "$tmp/out"
	"$multi" "$tmp/s.so" "$t" 0,1 >"$tmp/out" 2>&1
	rc=$?
	cat "$tmp/out"
	[ $rc = 77 ] && { echo "one GPU: the two-GPU case is not run"; continue; }
	[ $rc = 0 ] || fail "multi_check $t over GPUs 0,1 exited $rc"
done
# Two shards per GPU (--shards 4 over GPUs 0,1): each GPU runs its two in
# turn, GPU 1's slices copied by its copy engine (peer_copy) behind its
# next shard; the context tries both assignments of the shard pairs
# (multi_check's timed runs), FADC_SHARD_MAP fixes one (checked both ways
# and interleaved), FADC_SHARD_PEER=direct has GPU 1's kernels write
# across NVLink.  Each equal to one GPU's whole task within 1e-5.
run_fadc 0 "$m" -o "$tmp/s4.so" --target cuda --tasks hessian,jacfwd --shards 4 -D N=40 -D K=10
for t in hessian jacfwd; do
	"$check" "$tmp/s4.so" "$t" --gpus 0,0,1,1 --share --copy --reps 3 >"$tmp/out" 2>"$tmp/err"
	rc=$?
	[ "$rc" = 77 ] && { echo "one GPU: the two-GPU shards are not run"; break; }
	[ "$rc" = 0 ] || { cat "$tmp/err" >&2; fail "shard_check $t --gpus 0,0,1,1 --share --copy exited $rc"; }
	cat "$tmp/out"
	grep -qF " 0 through the host" "$tmp/out" || fail "shard_check $t --copy: slices through the host"
	for env in "" FADC_SHARD_MAP=1,1,0,0 FADC_SHARD_MAP=0,1,1,0 FADC_SHARD_PEER=direct; do
		env $env "$multi" "$tmp/s4.so" "$t" 0,1 8 >"$tmp/out" 2>&1 ||
			{ cat "$tmp/out" >&2; fail "multi_check $t over GPUs 0,1 with 4 shards ($env)"; }
		cat "$tmp/out"
	done
done
if [ $rc != 77 ]; then
	FADC_SHARD_MAP=1,2 "$multi" "$tmp/s.so" hessian 0,1 >"$tmp/out" 2>&1 && fail "FADC_SHARD_MAP=1,2 accepted"
	grep -qF "FADC_SHARD_MAP='1,2': 2 GPU places (0 .. 1), one for each of the 2 shards" "$tmp/out" ||
		{ cat "$tmp/out" >&2; fail "FADC_SHARD_MAP: the message"; }
	FADC_SHARD_PEER=both "$multi" "$tmp/s.so" hessian 0,1 >"$tmp/out" 2>&1 && fail "FADC_SHARD_PEER=both accepted"
	grep -qF "FADC_SHARD_PEER='both': 'copy' or 'direct'" "$tmp/out" ||
		{ cat "$tmp/out" >&2; fail "FADC_SHARD_PEER: the message"; }
fi
run_fadc 0 "$m" -o "$tmp/ns.so" --target cuda --tasks hessian -D N=40 -D K=10
"$multi" "$tmp/ns.so" hessian 0,1 >"$tmp/out" 2>&1
rc=$?
if [ $rc != 77 ]; then
	[ $rc = 1 ] || fail "no shards over GPUs 0,1: exit $rc"
	grep -qF "has no task 'hessian:0/2' (compile it with --shards 2)" "$tmp/out" ||
		{ cat "$tmp/out" >&2; fail "no shards: the message"; }
fi
exit 0
