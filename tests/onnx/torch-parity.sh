# RUN: bash %s
# Derivatives of PyTorch exports (tests/data/onnx/, made by make_torch.py
# with Debian's torch 1.13; this test needs no torch): an MLP, a resnet-style
# network with batch norm (eval) and a residual, and a transformer encoder
# layer (attention, layer norm, the exporter's shape subgraphs), a
# bidirectional LSTM and a GRU (batch first: scans), each a
# scalar loss of its weights.  fadc's vjp (v = 1), jvp and vhp (fixed
# directions; 0 for batch norm's running statistics, which torch does not
# differentiate) against torch.autograd.functional in float64, per output
# normalized error max|a - b| / max(|a|, |b|): the float64 interpreter on
# MODEL_f64.onnx <= 1e-9, the compiled CPU code of MODEL.onnx (f32)
# <= 1e-4.
source "$FADC_SOURCE_DIR/tests/cli/common.bash"
PY=/usr/bin/python3
"$PY" -c "import numpy" 2>/dev/null || { echo "SKIP: python3-numpy is not installed"; exit 77; }
D=$SRC/tests/data/onnx

# compare WANT GOT RTOL: every file of WANT (f64) against GOT's of the
# same name; the files of GOT that WANT lacks (grad.<buffer>) are not compared.
compare() {
	"$PY" - "$1" "$2" "$3" <<'PYEOF' || fail "$2 differs from torch's"
import glob, os, sys
import numpy as np
want, got, rtol = sys.argv[1], sys.argv[2], float(sys.argv[3])
bad = 0
for w in sorted(glob.glob(os.path.join(want, "*.npy"))):
    g = os.path.join(got, os.path.basename(w))
    if not os.path.exists(g):
        print("missing", g); bad = 1; continue
    a, b = np.load(w).astype(np.float64), np.load(g).astype(np.float64)
    if a.shape != b.shape:
        print(os.path.basename(w), "shape", b.shape, "expected", a.shape); bad = 1; continue
    scale = max(np.abs(a).max(initial=0), np.abs(b).max(initial=0))
    err = np.abs(a - b).max(initial=0) / scale if scale else 0.0
    print("%-40s %.3g" % (os.path.basename(w), err))
    bad |= not err <= rtol
sys.exit(bad)
PYEOF
}

for m in mlp resnet transformer lstm gru; do
	for leg in interp compiled; do
		if [ $leg = interp ]; then
			model=$D/${m}_f64.onnx in=$D/$m/f64 tol=1e-9 target=$model
		else
			model=$D/$m.onnx in=$D/$m/f32 tol=1e-4 target=$tmp/$m.so
			run_fadc 0 "$model" -o "$target" --tasks vjp,jvp,vhp
		fi
		p=(--params "$model" --params "x=$in/x.npy")
		vs=()
		for f in "$in"/v.*.npy; do vs+=(--v "$f"); done
		run_fadc 0 run "$target" --task vjp "${p[@]}" --v "$in/v.npy" --out "$tmp/$m-$leg"
		run_fadc 0 run "$target" --task jvp "${p[@]}" "${vs[@]}" --out "$tmp/$m-$leg"
		cp "$tmp/$m-$leg/loss.npy" "$tmp/loss.npy"
		run_fadc 0 run "$target" --task vhp "${p[@]}" "${vs[@]}" --out "$tmp/$m-$leg-vhp"
		cp "$tmp/$m-$leg-vhp/"vhp.*.npy "$tmp/$m-$leg/"
		echo "== $m ($leg, normalized error <= $tol)"
		compare "$D/$m/want" "$tmp/$m-$leg" $tol
	done
done
exit 0
