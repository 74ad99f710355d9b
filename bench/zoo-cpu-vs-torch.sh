#!/usr/bin/env bash
# bench/zoo-cpu-vs-torch.sh -- issue 7's CPU table: fadc-bench --gpu -1 beside
# PyTorch's own functional_autograd_benchmark.py --gpu -1 (both its legs,
# autograd.functional and torch.func), model by model and cell by cell, on
# one machine in one run.
#
#   bash bench/zoo-cpu-vs-torch.sh [options] MODEL[:KEY=VALUE...] ...
#
# A model's keys: iters=N (timed iterations on both sides; default -i),
# timeout=S (seconds per cell and side; default -T), tasks=T1,T2 (default:
# the seed's recommended tasks of the model; `all`: its ALL_TASKS less the
# unsupported ones), seed=N (both sides; default 0). Example:
#
#   bash bench/zoo-cpu-vs-torch.sh -p /tmp/zoo-venv/bin/python -t 16 \
#       multiheadattn wav2letter:iters=5 resnet18:iters=2:timeout=120 \
#       fcn_resnet:iters=1:timeout=200:tasks=vjp
#
# Options:
#   -p PYTHON    must import torch (python3)
#   -o DIR       output folder (/tmp/zoo-cpu-vs-torch)
#   -t N         --num-threads of both sides (the number of CPUs)
#   -i N         default iterations (10, the seed's)
#   -T S         default timeout per cell and side (600)
#   -d S         deadline: no cell starts later than S seconds after the
#                run's start, and none is given a timeout reaching past it
#                (a cell left out is reported as such); default none
#   -b DIR       fadc-bench's folder (build/bin beside this script)
#   -c FILE      fadc-bench's --config (its default)
#   -a DIR       fadc-bench's --artifacts (its default)
#   -P DIR       the seed and its peer modules (tests/gpu/device/peer)
#   -C           compile missing or stale artifacts first (fadc-bench
#                --compile-only per model, every cell's tasks at once; needs
#                fadc beside fadc-bench); without it they must exist
#   -D DEF       passed to fadc-bench as -D DEF (repeatable; reduced sizes
#                for a smoke test: PyTorch's sizes are then not fadc's)
#   -s SIDES     fadc,torch (both), or one of them
#
# Each cell runs alone (`--model-filter M --task-filter T --run-slow-tasks`
# on both sides, so any task of the seed's lists can be asked for), under
# `timeout`, so that one cell that fails, aborts (the seed aborts on
# functorch's consistency assert and on autograd errors) or runs out of time
# costs only itself: it is recorded as such and the run goes on. PyTorch's
# numbers are read from the seed's own console lines ("Results for model M
# on task T[ using Functorch]: MEANs (var: V)"), the same floats its table
# would hold, so that a leg that finished is kept when a later one aborts.
# (Python is unbuffered for that.) fadc's come from fadc-bench's table and
# JSON (mean, var, consistency error).
#
# Writes DIR/fadc.md and DIR/torch.md (the seed's table: `| model | task |
# mean | var |`; torch.md has the seed's `functorch T` rows),
# DIR/compare-functional.md and DIR/compare-func.md (`fadc-bench compare`:
# PyTorch's leg before, fadc after), DIR/summary.md (model x task: fadc,
# both legs, ratios, consistency, failures), DIR/cells.tsv (the same, one
# line per cell and side), DIR/wall.tsv (each cell's process time),
# DIR/env.txt, every cell's log, table and JSON under DIR/cells/, and prints
# env.txt and summary.md. Exit status: 0 when
# every requested cell ran on every side, 1 when some did not (the tables
# are still written), 2 on a usage or setup error.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
py=python3 out=/tmp/zoo-cpu-vs-torch threads=$(nproc) iters=10 tmo=600 deadline=''
bin=$root/build/bin config='' artifacts='' peer=$root/tests/gpu/device/peer compile=0 sides=fadc,torch
defs=()
usage() { sed -n '/^#   bash/,/^#   -s/p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
while getopts p:o:t:i:T:d:b:c:a:P:CD:s:h opt; do
	case $opt in
	p) py=$OPTARG ;; o) out=$OPTARG ;; t) threads=$OPTARG ;; i) iters=$OPTARG ;;
	T) tmo=$OPTARG ;; d) deadline=$OPTARG ;; b) bin=$OPTARG ;; c) config=$OPTARG ;;
	a) artifacts=$OPTARG ;; P) peer=$OPTARG ;; C) compile=1 ;; D) defs+=(-D "$OPTARG") ;;
	s) sides=$OPTARG ;; *) usage ;;
	esac
done
shift $((OPTIND - 1))
[ $# -gt 0 ] || usage
case ,$sides, in *,fadc,* | *,torch,*) ;; *) echo "zoo-cpu-vs-torch: -s: fadc, torch or both" >&2; exit 2 ;; esac
has() { case ,$sides, in *,$1,*) return 0 ;; esac; return 1; }
fb=$bin/fadc-bench
[ -x "$fb" ] || { echo "zoo-cpu-vs-torch: no $fb" >&2; exit 2; }
if has torch; then
	"$py" -c 'import torch' || { echo "zoo-cpu-vs-torch: $py cannot import torch" >&2; exit 2; }
fi
[ -f "$peer/functional_autograd_benchmark.py" ] ||
	{ echo "zoo-cpu-vs-torch: no functional_autograd_benchmark.py in $peer" >&2; exit 2; }
peer=$(cd "$peer" && pwd)
mkdir -p "$out"
out=$(cd "$out" && pwd)
# Nothing of an earlier run into this folder survives to be mistaken for this one's.
rm -rf "$out/cells"
rm -f "$out"/{fadc,torch,torch-functional,torch-func,compare-functional,compare-func,summary}.md \
	"$out/compile.txt"
mkdir "$out/cells"
fbargs=(--gpu -1 --run-slow-tasks --num-threads "$threads")
[ -n "$config" ] && fbargs+=(--config "$config")
[ -n "$artifacts" ] && fbargs+=(--artifacts "$artifacts")
fbargs+=(${defs[@]+"${defs[@]}"})
t_start=$(date +%s)

# The seed's task lists, from the seed itself (one Python start for all):
# for each argument MODEL:WHICH (WHICH = recommended or all) a line
# "MODEL:WHICH TASK,TASK,..." (recommended or ALL_TASKS, less the
# unsupported ones).
seed_tasks() {
	(cd "$peer" && "$py" -W ignore -c '
import sys, contextlib, io
with contextlib.redirect_stdout(io.StringIO()):
    import functional_autograd_benchmark as f
models = {m.name: m for m in f.MODELS}
for arg in sys.argv[1:]:
    name, which = arg.split(":")
    if name not in models:
        sys.exit("zoo-cpu-vs-torch: the seed has no model " + name)
    m = models[name]
    ts = f.ALL_TASKS if which == "all" else m.tasks
    print(arg, ",".join(t for t in ts if t not in m.unsupported))' "$@")
}

# The timeout a cell gets: its own, cut at the deadline; 0 if none is left.
budget() {
	local t=$1
	if [ -n "$deadline" ]; then
		local left=$((deadline - ($(date +%s) - t_start)))
		[ "$left" -lt "$t" ] && t=$left
		[ "$t" -lt 5 ] && t=0
	fi
	echo "$t"
}

{
	echo "date: $(date -u +%FT%TZ)"
	echo "host: $(hostname)"
	echo "cpu: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) CPUs"
	echo "memory: $(awk '/^MemTotal:/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo)"
	echo "threads: $threads (both sides)"
	has torch && echo "torch: $("$py" -c 'import torch; print(torch.__version__)')"
	echo "fadc-bench: $fb ${fbargs[*]}"
	echo "seed: $peer/functional_autograd_benchmark.py --gpu -1 --run-slow-tasks --num-threads $threads"
	echo "models: $*"
} >"$out/env.txt"

# One line per cell and side in $out/cells.tsv:
#   model  task  side  status  mean  var  extra
# side: fadc, functional (autograd.functional), func (torch.func);
# status: ok, inconsistent, failed, timeout, not-run, none (the seed has no
# such leg: torch.func jacobian); extra: the consistency error (fadc) or the
# reason.
: >"$out/cells.tsv"
rec() { printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$@" >>"$out/cells.tsv"; }
# And one per cell and side in $out/wall.tsv: model task side seconds exit
# (the whole process: start, warm-ups, checks, iterations).
: >"$out/wall.tsv"
wall() {
	awk -v a="$4" -v b="$(date +%s.%N)" -v p="$1	$2	$3" -v rc="$5" \
		'BEGIN { printf "%s\t%.1f\t%s\n", p, b - a, rc }' >>"$out/wall.tsv"
}
missing=0

run_fadc() { # model task iters timeout seed
	local m=$1 t=$2 it=$3 to=$4 sd=$5 f=$out/cells/fadc-$1-$2 rc=0
	to=$(budget "$to")
	if [ "$to" = 0 ]; then rec "$m" "$t" fadc not-run "" "" "deadline"; missing=1; return; fi
	echo "-- fadc-bench $m $t ($it iterations, timeout ${to}s)" >&2
	rm -f "$f.md" "$f.json"
	local t0; t0=$(date +%s.%N)
	timeout "$to" "$fb" "${fbargs[@]}" --model-filter "$m" --task-filter "$t" --num-iters "$it" \
		--seed "$sd" --output "$f.md" --json "$f.json" >"$f.log" 2>&1 || rc=$?
	wall "$m" "$t" fadc "$t0" "$rc"
	# The cell's row: its label is the task, or the task and " [inconsistent]".
	local row='' ce=''
	[ -f "$f.md" ] && row=$(awk -F'|' -v m="$m" -v t="$t" '{r = $0; a = $2; b = $3
		gsub(/^ +| +$/, "", a); gsub(/^ +| +$/, "", b)}
		a == m && (b == t || index(b, t " [") == 1) {print r}' "$f.md")
	[ -f "$f.json" ] && ce=$(grep -o '"consistency_error": [^,]*' "$f.json" | head -n 1 | sed 's/.*: //')
	if [ -n "$row" ]; then
		echo "$row" >>"$out/fadc-rows.md"
		local mean var st=ok
		mean=$(echo "$row" | awk -F'|' '{gsub(/ /, "", $4); print $4}')
		var=$(echo "$row" | awk -F'|' '{gsub(/ /, "", $5); print $5}')
		case $row in *"[inconsistent]"* | *"[reference mismatch]"*) st=inconsistent ;; esac
		rec "$m" "$t" fadc "$st" "$mean" "$var" "$ce"
		[ "$st" = ok ] || missing=1
	else
		local why
		why="exit $rc: $(grep -E 'fadc-bench:|error' "$f.log" | tail -n 1)"
		[ "$rc" = 124 ] && why="timeout after ${to}s"
		rec "$m" "$t" fadc "$([ "$rc" = 124 ] && echo timeout || echo failed)" "" "" "$why"
		missing=1
	fi
}

run_torch() { # model task iters timeout seed
	local m=$1 t=$2 it=$3 to=$4 sd=$5 f=$out/cells/torch-$1-$2 rc=0
	to=$(budget "$to")
	if [ "$to" = 0 ]; then
		rec "$m" "$t" functional not-run "" "" "deadline"
		rec "$m" "$t" func not-run "" "" "deadline"
		missing=1
		return
	fi
	echo "-- PyTorch $m $t ($it iterations, timeout ${to}s)" >&2
	local t0; t0=$(date +%s.%N)
	(cd "$peer" && PYTHONUNBUFFERED=1 timeout "$to" "$py" -W ignore functional_autograd_benchmark.py \
		--gpu -1 --run-slow-tasks --num-threads "$threads" --num-iters "$it" --seed "$sd" \
		--model-filter "$m" --task-filter "$t") >"$f.log" 2>&1 || rc=$?
	wall "$m" "$t" torch "$t0" "$rc"
	# The seed's console lines, one per leg; a leg without one failed, or did
	# not finish (then the last lines of the log say why).
	local leg pat line mean var why was
	for leg in functional func; do
		if [ $leg = functional ]; then pat="Results for model $m on task $t: "
		else pat="Results for model $m on task $t using Functorch: "; fi
		line=$(grep -F "$pat" "$f.log" | tail -n 1 || true)
		if [ -n "$line" ]; then
			mean=$(echo "${line#"$pat"}" | sed 's/s (var: .*//')
			var=$(echo "$line" | sed 's/.*(var: \(.*\))$/\1/')
			if [ $leg = functional ]; then
				printf '| %s | %s | %s | %s |\n' "$m" "$t" "$mean" "$var" >>"$out/torch-rows.md"
			else
				printf '| %s | functorch %s | %s | %s |\n' "$m" "$t" "$mean" "$var" >>"$out/torch-rows.md"
			fi
			rec "$m" "$t" $leg ok "$mean" "$var" ""
			continue
		fi
		was=$missing missing=1
		if [ $leg = func ] && ! grep -qF "Results for model $m on task $t: " "$f.log" && [ "$rc" != 124 ]; then
			# The seed runs autograd.functional first and stops at its error.
			rec "$m" "$t" $leg not-run "" "" "the seed stopped at autograd.functional's error"
		elif [ $leg = func ] && grep -q "functorch has no equivalent of autograd.functional.$t" "$f.log"; then
			# The seed's own gap (jacobian): no such leg, not a failure.
			rec "$m" "$t" $leg none "" "" "the seed has no torch.func $t"
			missing=$was
		elif [ $leg = func ] && grep -q "Failed model using Functorch: $m, task: $t," "$f.log"; then
			why=$(grep -A1 "Failed model using Functorch: $m, task: $t," "$f.log" | tail -n 1 |
				sed 's/^[[:space:]]*//')
			rec "$m" "$t" $leg failed "" "" "$why"
		elif [ "$rc" = 124 ]; then
			rec "$m" "$t" $leg timeout "" "" "timeout after ${to}s"
		else
			why=$(grep -E '^[A-Za-z_.]*(Error|Exception)' "$f.log" | tail -n 1 | cut -c1-200)
			rec "$m" "$t" $leg failed "" "" "exit $rc: ${why:-see cells/$(basename "$f").log}"
		fi
	done
}

: >"$out/fadc-rows.md"
: >"$out/torch-rows.md"
# The specs, all parsed (and their task lists resolved) before anything runs.
specs=()
for spec in "$@"; do
	m=${spec%%:*} it=$iters to=$tmo tasks='' sd=0
	case $m in '' | -*) echo "zoo-cpu-vs-torch: '$spec' is not a model (options go first)" >&2; exit 2 ;; esac
	rest=${spec#"$m"}
	IFS=: read -r -a kv <<<"${rest#:}"
	for p in ${kv[@]+"${kv[@]}"}; do
		case $p in
		iters=*) it=${p#iters=} ;; timeout=*) to=${p#timeout=} ;;
		tasks=*) tasks=${p#tasks=} ;; seed=*) sd=${p#seed=} ;;
		*) echo "zoo-cpu-vs-torch: $spec: unknown key '$p'" >&2; exit 2 ;;
		esac
	done
	case $tasks in '' | all) tasks=$m:${tasks:-recommended} ;; esac
	specs+=("$m $it $to $tasks $sd")
done
# Task lists still to resolve (MODEL:WHICH) from the seed.
want=()
for spec in "${specs[@]}"; do
	read -r m it to tasks sd <<<"$spec"
	case $tasks in *:*) want+=("$tasks") ;; esac
done
if [ ${#want[@]} -gt 0 ]; then
	lists=$(seed_tasks "${want[@]}") || exit 2
	for i in "${!specs[@]}"; do
		read -r m it to tasks sd <<<"${specs[$i]}"
		case $tasks in *:*) specs[$i]="$m $it $to $(echo "$lists" | awk -v k="$tasks" '$1 == k {print $2}') $sd" ;; esac
	done
fi
for spec in "${specs[@]}"; do
	read -r m it to tasks sd <<<"$spec"
	if has fadc && [ "$compile" = 1 ]; then
		echo "-- fadc-bench --compile-only $m ($tasks)" >&2
		t0=$(date +%s.%N)
		"$fb" "${fbargs[@]}" --compile-only --model-filter "$m" --task-filter "$tasks" \
			>"$out/cells/compile-$m.log" 2>&1 ||
			{ echo "zoo-cpu-vs-torch: $m: compile failed (cells/compile-$m.log)" >&2; missing=1; }
		awk -v m="$m" -v t="$tasks" -v a="$t0" -v b="$(date +%s.%N)" \
			'BEGIN { printf "%s: fadc-bench --compile-only (%s): %.2f s\n", m, t, b - a }' >>"$out/compile.txt"
	fi
	IFS=, read -r -a tl <<<"$tasks"
	for t in "${tl[@]}"; do
		if has fadc; then run_fadc "$m" "$t" "$it" "$to" "$sd"; fi
		if has torch; then run_torch "$m" "$t" "$it" "$to" "$sd"; fi
	done
done

hdr='| model | task | mean | var |
| -- | -- | -- | -- |'
{ echo "$hdr"; cat "$out/fadc-rows.md"; } >"$out/fadc.md"
{ echo "$hdr"; cat "$out/torch-rows.md"; } >"$out/torch.md"
{ echo "$hdr"; grep -v '| functorch ' "$out/torch-rows.md" || true; } >"$out/torch-functional.md"
{ echo "$hdr"; grep '| functorch ' "$out/torch-rows.md" | sed 's/| functorch /| /' || true; } \
	>"$out/torch-func.md"
rm -f "$out/fadc-rows.md" "$out/torch-rows.md"
if has fadc && has torch; then
	"$fb" compare "$out/torch-functional.md" "$out/fadc.md" --output "$out/compare-functional.md"
	"$fb" compare "$out/torch-func.md" "$out/fadc.md" --output "$out/compare-func.md"
fi

# The summary: one row per cell, seconds as the seed's mean, ratio =
# PyTorch's mean / fadc's (above 1: fadc faster).
awk -F'\t' '
function fmt(s) {
	if (s == "") return ""
	if (s < 1e-3) return sprintf("%.3g µs", s * 1e6)
	if (s < 1) return sprintf("%.3g ms", s * 1e3)
	return sprintf("%.3g s", s)
}
function cellof(k, side,   st) {
	st = status[k, side]
	if (st == "" || st == "none") return "—"
	if (st == "ok" || st == "inconsistent") return fmt(mean[k, side]) (st == "inconsistent" ? " (inconsistent)" : "")
	return st
}
function ratio(k, side) {
	if (mean[k, side] == "" || mean[k, "fadc"] == "" || mean[k, "fadc"] + 0 == 0) return ""
	r = mean[k, side] / mean[k, "fadc"]
	return sprintf(r >= 100 ? "%.0f×" : r >= 10 ? "%.1f×" : "%.2f×", r)
}
{
	k = $1 SUBSEP $2
	if (!(k in seen)) { seen[k] = 1; order[n++] = k }
	status[k, $3] = $4; mean[k, $3] = $5; extra[k, $3] = $7
}
END {
	print "| model | task | fadc | consistency (fadc) | autograd.functional | torch.func | functional / fadc | func / fadc | notes |"
	print "|---|---|---:|---|---:|---:|---:|---:|---|"
	for (i = 0; i < n; i++) {
		k = order[i]; split(k, mt, SUBSEP)
		ce = status[k, "fadc"] == "ok" || status[k, "fadc"] == "inconsistent" ? extra[k, "fadc"] : ""
		if (ce != "" && ce != "null") ce = sprintf("%.2g", ce)
		note = ""
		for (s = 1; s <= 3; s++) {
			side = s == 1 ? "fadc" : s == 2 ? "functional" : "func"
			if (status[k, side] != "" && status[k, side] != "ok" && status[k, side] != "inconsistent" && extra[k, side] != "")
				note = note (note == "" ? "" : "; ") side ": " extra[k, side]
		}
		gsub(/\|/, "/", note)
		printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", mt[1], mt[2], cellof(k, "fadc"), ce,
			cellof(k, "functional"), cellof(k, "func"), ratio(k, "functional"), ratio(k, "func"), note
	}
}' "$out/cells.tsv" >"$out/summary.md"
echo "== environment"; cat "$out/env.txt"
[ -f "$out/compile.txt" ] && { echo "== compile"; cat "$out/compile.txt"; }
echo "== summary (seconds per call, the seed's mean; ratio = PyTorch / fadc)"; cat "$out/summary.md"
exit "$missing"
