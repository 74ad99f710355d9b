# RUN: bash %s
# Data-parallel runs over several GPUs (runtime/multi.c, docs/MULTIGPU.md):
# a separable model (a mean over its batch of 9 rows, a batched const Y
# beside the caller's batched x, a batch-independent prior) compiled at the
# full batch and at the shard sizes (-D B=9,5,4), and one with a batched
# param (per-sample outputs), each of vjp, jvp, hvp and vhp run by
# tests/gpu/multi_check.c on one GPU and on a context over GPUs:
#   - GPU 0 alone through NCCL with one rank (FADC_MULTI_FORCE=1): the path
#     one GPU can test;
#   - GPUs 0,1 (shards of 5 and 4 rows: the uneven last shard) where the
#     machine has two;
# every output equal to the one-GPU run within 1e-5 (normalized), and the
# multi run's third outputs (the all-reduce replayed from the graphs
# captured at its second run) bit-identical to its first (enqueued
# uncaptured) and to a run with FADC_MULTI_CAPTURE=0; a capture that fell
# back (its note on stderr) fails.  Exit 77
# without a GPU.  Also on this machine: a multi context without NCCL is a
# clear error, never a hang.
source "$(dirname "$0")/../cli/common.bash"
check=$(dirname "$FADC")/multi_check
cat > "$tmp/m.ir" <<'IR'
let B = 9
batch x: 0, Y: 0, loss mean
const Y: f32[B, 4] = uniform(0, 1, seed=2)
param w1: f32[6, 8] = uniform(-0.5, 0.5, seed=1)
param b1: f32[8] = uniform(-0.1, 0.1, seed=3)
param w2: f32[8, 4] = uniform(-0.5, 0.5, seed=4)
def forward(x: f32[B, 6]) -> f32[] {
  h = tanh(x @ w1 + b1)
  return mean(sum((h @ w2 - Y) ** 2, 1)) + 0.01 * sum(w1 * w1)
}
IR
if ! "$FADC" "$tmp/m.ir" -o "$tmp/m.so" --target cuda -D B=9,5,4 --tasks vjp,jvp,hvp,vhp 2>"$tmp/err"; then
	grep -qF "built without the CUDA toolkit" "$tmp/err" && { echo "no CUDA toolkit: skipped"; exit 77; }
	cat "$tmp/err" >&2
	fail "fadc --target cuda failed"
fi
# No NCCL: the context is refused with the reason (before any GPU is looked at).
FADC_NCCL_LIB=/nonexistent/libnccl.so.2 FADC_MULTI_FORCE=1 "$check" "$tmp/m.so" vjp 0 >"$tmp/out" 2>&1
rc=$?
[ $rc = 1 ] || [ $rc = 77 ] || fail "no NCCL: exit $rc"
grep -q "NCCL is needed for a context over several GPUs: cannot load /nonexistent/libnccl.so.2" "$tmp/out" ||
	{ cat "$tmp/out" >&2; fail "no NCCL: the message"; }
# A batched param z (a row per sample): gradients and Hessian products of z
# are per-sample outputs (gathered in row order, weighted), jvp's tangent
# v.z a caller input split by its shape.
cat > "$tmp/z.ir" <<'IR'
let B = 9
batch x: 0, z: 0, loss mean
param w: f32[6, 4] = uniform(-1, 1, seed=1)
param z: f32[B, 4] = uniform(-1, 1, seed=6)
def forward(x: f32[B, 6]) -> f32[] {
  return mean(sum(tanh(x @ w + z) ** 2, 1)) + 0.1 * sum(w * w)
}
IR
ran=0
for so in m z; do
# (compiled once a GPU is known to be there: NVRTC takes seconds)
[ $so = z ] && { "$FADC" "$tmp/z.ir" -o "$tmp/z.so" --target cuda -D B=9,5,4 --tasks vjp,jvp,hvp,vhp ||
	fail "fadc z.ir"; }
for task in vjp jvp hvp vhp; do
	FADC_MULTI_FORCE=1 "$check" "$tmp/$so.so" $task 0 >"$tmp/out" 2>&1
	rc=$?
	cat "$tmp/out"
	[ $rc = 77 ] && { echo "no GPU: skipped"; exit 77; }
	[ $rc = 0 ] || fail "$task over GPU 0 through NCCL (one rank): exit $rc"
	grep -qF "not captured" "$tmp/out" && fail "$task over GPU 0 (one rank): the all-reduce not captured"
	MULTI_DUMP="$tmp/on" "$check" "$tmp/$so.so" $task 0,1 >"$tmp/out" 2>&1
	rc=$?
	cat "$tmp/out"
	if [ $rc = 77 ]; then
		echo "one GPU: the two-GPU case is not run"
		continue
	fi
	[ $rc = 0 ] || fail "$task over GPUs 0,1: exit $rc"
	grep -qF "not captured" "$tmp/out" && fail "$task over GPUs 0,1: the all-reduce not captured"
	FADC_MULTI_CAPTURE=0 MULTI_DUMP="$tmp/off" "$check" "$tmp/$so.so" $task 0,1 >"$tmp/out" 2>&1 ||
		fail "$task over GPUs 0,1, FADC_MULTI_CAPTURE=0: exit $?"
	grep -qF "not captured in CUDA graphs (FADC_MULTI_CAPTURE=0)" "$tmp/out" ||
		fail "$task, FADC_MULTI_CAPTURE=0: no note"
	cmp "$tmp/on" "$tmp/off" || fail "$task over GPUs 0,1: captured and uncaptured all-reduce differ"
	ran=$((ran + 1))
done
done
# Never a hang (tests/gpu/fake_nccl.c: an NCCL that fails on demand, one
# rank, a 1 s deadline): a rank that never joins ends the context's
# creation, a collective stuck or failed ends the run, each an error saying
# so, the communicators aborted.
fake=$(dirname "$FADC")/libfake_nccl.so
for mode in init run error; do
	t0=$(date +%s)
	FAKE_NCCL=$mode FAKE_NCCL_ABORTS="$tmp/aborts.$mode" FADC_NCCL_LIB=$fake FADC_NCCL_TIMEOUT_S=1 \
		FADC_MULTI_FORCE=1 timeout 60 "$check" "$tmp/m.so" vjp 0 >"$tmp/out" 2>&1
	rc=$?
	t1=$(date +%s)
	cat "$tmp/out"
	[ $rc = 1 ] || fail "fake NCCL ($mode): exit $rc, expected 1"
	[ $((t1 - t0)) -lt 30 ] || fail "fake NCCL ($mode): $((t1 - t0)) s"
	case $mode in
	init) want="making the NCCL communicators: NCCL did not finish within 1 s (FADC_NCCL_TIMEOUT_S)" ;;
	run) want="the all-reduce of the gradients: NCCL did not finish within 1 s (FADC_NCCL_TIMEOUT_S)" ;;
	error) want="the all-reduce of the gradients: NCCL on GPU 0 (rank 0 of 1): remote process exited" ;;
	esac
	grep -qF "$want" "$tmp/out" || fail "fake NCCL ($mode): no '$want'"
	grep -qF "the NCCL communicators were aborted" "$tmp/out" || fail "fake NCCL ($mode): not aborted"
	[ "$(wc -l < "$tmp/aborts.$mode")" -ge 1 ] || fail "fake NCCL ($mode): ncclCommAbort not called"
done
echo "multi.sh: passed ($ran tasks over two GPUs)"
