#!/usr/bin/env bash
# bench/cpu-profile-names.sh DIR [LOG] -- names the kernels of a CPU profile
# (FADC_CPU_PROFILE=1, runtime/pool.c): each "MODEL.so+0xOFFSET" of the log
# (stdin by default) gets the chunk function at that offset in DIR/MODEL.so
# (nm: the artifacts keep their local symbols, <task>.k<N>.<what>.chunk).
# The artifacts must be the very files that ran (copies of them will do).
set -eu
dir=${1:?usage: cpu-profile-names.sh DIR [LOG]}
log=${2:--}
syms=$(mktemp)
trap 'rm -f "$syms"' EXIT
for so in "$dir"/*.so; do
	nm "$so" 2>/dev/null | awk -v m="$(basename "$so")" '$3 ~ /chunk/ {print m "+0x" $1 "\t" $3}'
done | sed -E 's/\+0x0+/+0x/' >"$syms"
awk -F'\t' 'NR == FNR { name[$1] = $2; next }
	{
		line = $0
		if (match(line, /[^ ]+\.so\+0x[0-9a-f]+/)) {
			k = substr(line, RSTART, RLENGTH)
			if (k in name) line = line "  " name[k]
		}
		print line
	}' "$syms" "$log"
