#!/usr/bin/env bash
# bench/zoo-cpu-payload.sh DEST [MODELS] -- what another machine needs to run
# bench/zoo-cpu-vs-torch.sh there (the GPU machine's 16 cores, which have
# PyTorch but no LLVM), built here:
#
#   DEST/bin/fadc-bench      no LLVM, no libyaml at run time (checked with ldd)
#   DEST/zoo-cpu-vs-torch.sh
#   DEST/fcpu/               a bench tree (bench/bench.yaml, models/) and its
#                            full-size CPU artifacts: every model of MODELS
#                            (comma-separated; default the seven large ones)
#                            with its recommended tasks and their consistency
#                            partners. fadc-bench finds artifacts by the
#                            model's absolute path, so the tree is built at
#                            /tmp/fcpu and DEST/run.sh copies it there.
#   DEST/peer/               the seed and its peer modules (tests/gpu/device/peer)
#   DEST/run.sh              on the other machine, from anywhere:
#                              bash DEST/run.sh [SPEC...]
#                            zoo-cpu-vs-torch.sh with -t (nproc) and the
#                            deadline $DEADLINE (seconds, default 330), over
#                            the SPECs (default: the list in run.sh), logs and
#                            tables into $OUT (at most 8 files: the device
#                            tool's limit).
#
# From the repository root, after building into build/.
set -eu
dest=${1:?usage: zoo-cpu-payload.sh DEST [MODELS]}
models=${2:-multiheadattn,wav2letter,transformer,resnet18,deepspeech,fcn_resnet,detr}
root=$(cd "$(dirname "$0")/.." && pwd)
b=$root/build/bin
rm -rf "$dest"
mkdir -p "$dest/bin" "$dest/peer"
cp "$b/fadc-bench" "$dest/bin/"
if ldd "$dest/bin/fadc-bench" | grep -Eqi 'llvm|yaml'; then
	echo "zoo-cpu-payload: fadc-bench links LLVM or libyaml" >&2
	exit 1
fi
cp "$root/bench/zoo-cpu-vs-torch.sh" "$dest/"
cp "$root"/tests/gpu/device/peer/*.py "$dest/peer/"
rm -rf /tmp/fcpu
mkdir -p /tmp/fcpu/bench
cp -r "$root/models" /tmp/fcpu/
cp "$root/bench/bench.yaml" /tmp/fcpu/bench/
"$b/fadc-bench" --gpu -1 --compile-only --config /tmp/fcpu/bench/bench.yaml \
	--artifacts /tmp/fcpu/artifacts --model-filter "$models"
cp -r /tmp/fcpu "$dest/fcpu"
cat >"$dest/run.sh" <<'EOF'
#!/usr/bin/env bash
# Written by bench/zoo-cpu-payload.sh: bash run.sh [SPEC...] (zoo-cpu-vs-torch.sh's specs).
set -u
P=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-/tmp/out}
mkdir -p "$out"
rm -rf /tmp/fcpu && cp -r "$P/fcpu" /tmp/fcpu
python3 -c 'import torch, scipy; print("torch", torch.__version__, "scipy", scipy.__version__)'
[ $# -gt 0 ] || set -- multiheadattn:iters=10:timeout=60 wav2letter:iters=10:timeout=60 \
	transformer:iters=3:timeout=60 resnet18:iters=2:timeout=60 \
	detr:iters=1:timeout=90 deepspeech:iters=1:timeout=120 fcn_resnet:iters=1:timeout=150
bash "$P/zoo-cpu-vs-torch.sh" -p python3 -t "$(nproc)" -o /tmp/zoo -b "$P/bin" \
	-c /tmp/fcpu/bench/bench.yaml -a /tmp/fcpu/artifacts -P "$P/peer" -d "${DEADLINE:-330}" \
	"$@" >"$out/run.log" 2>&1
echo "rc=$?" >>"$out/run.log"
cat "$out/run.log"
cp /tmp/zoo/summary.md /tmp/zoo/fadc.md /tmp/zoo/torch.md /tmp/zoo/compare-functional.md \
	/tmp/zoo/compare-func.md /tmp/zoo/env.txt "$out/"
tar czf "$out/cells.tgz" -C /tmp/zoo cells cells.tsv wall.tsv
EOF
du -sh "$dest"
