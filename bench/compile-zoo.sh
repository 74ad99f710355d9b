#!/usr/bin/env bash
# bench/compile-zoo.sh -- issue 22's compile-time table: every model of the zoo
# at full size with its recommended tasks (the model's `tasks` line), one
# compile at a time, cold, warm and after an initializer seed changed.
#
#   bench/compile-zoo.sh [-b BIN] [-t TARGETS] [-r RUNS] [MODEL...]
#
# -b  the folder holding fadc (default build/bin)
# -t  space-separated --target values (default "cpu,cuda cpu")
# -r  runs per cell; the table gives the minimum wall time (default 2)
# MODEL  names under models/ (default: all nine)
#
# Each cell is `/usr/bin/time -f "%e %U %M" fadc MODEL.ir -o a.so --target T`:
# cold  = a fresh FADC_CACHE_DIR for every run;
# warm  = the same model again into a cache that already holds it;
# seed  = the model's last `seed=N` made `seed=1N` (then `seed=2N`, ...) in a
#         copy named MODEL.ir in a scratch folder, compiled into the warm cache:
#         one parameter's initializer changed, everything else cached.
# eps   = a one-line compute change into the warm cache (issue 22's title:
#         under 2 s): resnet18's stem batch norm given eps=1e-3 (then 2e-3,
#         ...), in a copy named MODEL.ir; "-" for the models without such
#         a line (compute_edit below).
# Printed: one Markdown row per model and target, "wall (user, load)" of the
# fastest run, load being /proc/loadavg's 1-minute figure just before it. The
# machine's load matters: on 2 cores another process doubles a compile's wall.
set -eu
bin=build/bin
targets="cpu,cuda cpu"
runs=2
while getopts "b:t:r:" o; do
	case $o in
	b) bin=$OPTARG ;;
	t) targets=$OPTARG ;;
	r) runs=$OPTARG ;;
	*) echo "usage: $0 [-b BIN] [-t TARGETS] [-r RUNS] [MODEL...]" >&2; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
models=${*:-resnet18 fcn_resnet detr deepspeech transformer wav2letter multiheadattn ppl_robust_reg ppl_simple_reg}
root=$(cd "$(dirname "$0")/.." && pwd)
fadc=$(cd "$bin" && pwd)/fadc
[ -x "$fadc" ] || { echo "$0: no fadc in $bin" >&2; exit 2; }
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

# one timed compile; prints "wall user load"
timed() { # CACHE SRC TARGET
	local load
	load=$(cut -d' ' -f1 /proc/loadavg)
	FADC_CACHE_DIR=$1 /usr/bin/time -f "%e %U" -o "$scratch/t" \
		"$fadc" "$2" -o "$scratch/a.so" --target "$3" >/dev/null 2>"$scratch/err" ||
		{ cat "$scratch/err" >&2; echo "$0: $2 --target $3 failed" >&2; exit 1; }
	echo "$(tail -1 "$scratch/t") $load"
}
# the fastest of several "wall user load" lines, as "wall (user, load)"
best() { sort -n | head -1 | awk '{ printf "%.2f (%.2f, %s)", $1, $2, $3 }'; }

# The one-line compute change of model $1, run $2, as a sed script ("" for none).
compute_edit() {
	case $1 in
	resnet18) echo "s/^  x = relu(batch_norm(x, bn1.weight, bn1.bias))\$/  x = relu(batch_norm(x, bn1.weight, bn1.bias, eps=${2}e-3))/" ;;
	*) echo "" ;;
	esac
}

echo "| model | target | cold | warm | seed changed | eps changed |"
echo "|---|---|---:|---:|---:|---:|"
for t in $targets; do
	for m in $models; do
		src=$root/models/$m.ir
		cold=$(for r in $(seq "$runs"); do
			rm -rf "$scratch/c"; timed "$scratch/c" "$src" "$t"; done | best)
		warm=$(for r in $(seq "$runs"); do timed "$scratch/c" "$src" "$t"; done | best)
		seed=$(for r in $(seq "$runs"); do
			mkdir -p "$scratch/s"
			# the last seed=N on the file, made seed=<r>N
			awk -v r="$r" '{ l[NR] = $0 } /seed=[0-9]+/ { last = NR }
				END { for (i = 1; i <= NR; i++) {
					if (i == last) sub(/seed=/, "seed=" r, l[i]); print l[i] } }' \
				"$src" >"$scratch/s/$m.ir"
			timed "$scratch/c" "$scratch/s/$m.ir" "$t"; done | best)
		eps=-
		if [ -n "$(compute_edit "$m" 1)" ]; then
			eps=$(for r in $(seq "$runs"); do
				mkdir -p "$scratch/e"
				sed "$(compute_edit "$m" "$r")" "$src" >"$scratch/e/$m.ir"
				cmp -s "$src" "$scratch/e/$m.ir" && { echo "$0: $m: the edit matched nothing" >&2; exit 1; }
				timed "$scratch/c" "$scratch/e/$m.ir" "$t"; done | best)
		fi
		echo "| $m | \`$t\` | $cold | $warm | $seed | $eps |"
	done
done
