# RUN: bash %s
# Issue 7: every model compiles for the CPU and, through NVRTC, for CUDA
# (no GPU needed): all nine models of models/ at reduced sizes (those of
# tests/unit/test_codegen_zoo.c and tests/gpu/device/payload.sh), each with
# its recommended tasks (the model's `tasks` declaration, fadc's default),
# compiled with --target cpu,cuda.  Every task but the initializers must
# then have both codes and at least one launch (inspect); deepspeech's
# scans become loops of CUDA kernels, detr's Hungarian matching host steps
# and its dropout Philox draws on the device (docs/CUDA.md).  Labelled
# slow (tests.cmake: the name has "zoo"): minutes on a loaded machine.
source "$(dirname "$0")/../cli/common.bash"
if ! "$FADC" "$SRC/models/ppl_simple_reg.ir" -o "$tmp/probe.so" --target cuda --tasks vjp 2>"$tmp/err"; then
	grep -qF "built without the CUDA toolkit" "$tmp/err" && { echo "no CUDA toolkit: skipped"; exit 77; }
	cat "$tmp/err" >&2
	fail "fadc --target cuda failed"
fi
zoo() {
	local name=$1
	shift
	local t0=$SECONDS
	run_fadc 0 "$SRC/models/$name.ir" -o "$tmp/$name.so" --target cpu,cuda "$@"
	run_fadc 0 inspect "$tmp/$name.so"
	local tasks
	tasks=$(grep '^task ' "$tmp/out" | grep -v '^task init\.')
	[ -n "$tasks" ] || fail "$name: no task"
	echo "$tasks" | grep -vqF ", code cpu,cuda" && fail "$name: a task without both codes: $tasks"
	[ "$(grep -c '^  cuda: [0-9]* launch' "$tmp/out")" = "$(echo "$tasks" | wc -l)" ] ||
		fail "$name: a task without CUDA launches"
	echo "$name: $(echo "$tasks" | sed 's/^task \([a-z_]*\):.*/\1/' | tr '\n' ' ')($((SECONDS - t0)) s)"
}
zoo ppl_simple_reg
zoo ppl_robust_reg
zoo multiheadattn -D B=4 -D L=3 -D S=5
zoo transformer -D N=8 -D SEQ=4 -D E=16 -D NH=4 -D FF=16 -D MAXLEN=16
zoo wav2letter -D N=2 -D LIN=1000 -D C=8 -D CW=16
zoo deepspeech -D N=3 -D FREQ=9 -D FRAMES=16 -D LEN_LO=8 -D LEN_SPAN=8 -D C=2 -D HID=4 -D S=2
zoo detr -D IMG_H=64 -D IMG_W=96 -D WIDTH=4 -D D=16 -D NH=2 -D FF=32 -D Q=6 -D NCLS=10 -D T0=3 -D T1=2
zoo resnet18 -D N=2 -D H=32 -D C=4 -D NCLS=10
zoo fcn_resnet -D N=2 -D H=32 -D C=4
echo "cuda-zoo: nine models compiled for cpu,cuda"
