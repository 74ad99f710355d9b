#!/bin/sh
# scripts/identity.sh BUILD OUT [cuda] -- what a refactor must leave unchanged:
# every model of the zoo compiled for the CPU at its reduced sizes (the
# artifacts' bytes: compiling is deterministic, so equal md5s mean equal
# code), the kernel IR of every model's vjp, and (with `cuda`) the CUDA C of
# the small models and tests/gpu/*.ir.  Run it on the tree before and after
# a move and diff OUT/md5 (docs/STATUS.md, issue 17):
#   scripts/identity.sh build /tmp/before && ... && scripts/identity.sh build /tmp/after
#   diff /tmp/before/md5 /tmp/after/md5
set -eu
build=$1
out=$2
root=$(cd "$(dirname "$0")/.." && pwd)
fadc=$build/bin/fadc
mkdir -p "$out/so" "$out/kir" "$out/cuda"
# The reduced sizes of bench/bench.yaml, model by model.
sizes() {
	awk -v m="$1" '
		/^  [a-z_0-9]+:$/ { cur = substr($1, 1, length($1) - 1) }
		cur == m && /reduced:/ { sub(/.*reduced: *\[/, ""); sub(/\].*/, ""); gsub(/, */, " -D "); print "-D " $0 }
	' "$root/bench/bench.yaml"
}
for ir in "$root"/models/*.ir; do
	m=$(basename "$ir" .ir)
	d=$(sizes "$m")
	# shellcheck disable=SC2086
	"$fadc" "$ir" $d -o "$out/so/$m.so" >/dev/null
	# shellcheck disable=SC2086
	"$fadc" "$ir" $d -o "$out/kir/$m.so" --tasks vjp --emit kir >"$out/kir/$m.kir"
	rm -f "$out/kir/$m.so"
done
if [ "${3:-}" = cuda ]; then
	for ir in "$root"/models/ppl_simple_reg.ir "$root"/models/ppl_robust_reg.ir \
	          "$root"/models/multiheadattn.ir "$root"/tests/gpu/*.ir; do
		m=$(basename "$ir" .ir)
		d=""
		case $m in multiheadattn) d=$(sizes "$m") ;; esac
		# shellcheck disable=SC2086
		"$fadc" "$ir" $d -o "$out/cuda/$m.so" --target cpu,cuda --emit cuda >"$out/cuda/$m.cu"
	done
fi
(cd "$out" && find so kir cuda -type f | sort | xargs md5sum) >"$out/md5"
echo "$(wc -l <"$out/md5") files in $out/md5"
