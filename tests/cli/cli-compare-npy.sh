# RUN: bash %s
# fadc compare-npy A B [--rtol R]: two .npy files, or the .npy files of two
# folders by name; each pair must have the same dtype and shape and a
# normalized error max|a - b| / max(|a|, |b|) of at most R (1e-5).  Exit 0
# when all agree, 1 otherwise, one line per file on stdout.
source "$(dirname "$0")/common.bash"

mk() { # mk DIR EXPR...: DIR/<name>.npy for each `EXPR as name`
	local dir=$1
	shift
	printf 'def forward() {\n  return %s\n}\n' "$*" >"$tmp/mk.ir"
	run_fadc 0 run "$tmp/mk.ir" --out "$dir"
}
mk "$tmp/a" 'full(value=1, shape=[4]) as x, full(value=2, shape=[2, 2]) as y'
mk "$tmp/b" 'full(value=1.000001, shape=[4]) as x, full(value=2, shape=[2, 2]) as y'
mk "$tmp/c" 'full(value=1.001, shape=[4]) as x, full(value=2, shape=[4]) as y'
mk "$tmp/d" 'full(value=1, shape=[4]) as x'
mk "$tmp/n" 'full(value=nan, shape=[4]) as x, full(value=inf, shape=[2, 2]) as y'
mk "$tmp/i" 'full(value=1, shape=[4], dtype=i64) as x'

run_fadc 0 compare-npy "$tmp/a" "$tmp/a" --rtol 0
out_has "x.npy: normalized error 0"
out_has "y.npy: normalized error 0"
run_fadc 0 compare-npy "$tmp/a" "$tmp/b"
run_fadc 1 compare-npy "$tmp/a" "$tmp/b" --rtol 1e-7
out_has "x.npy: normalized error 9.54e-07 ABOVE TOLERANCE"
run_fadc 0 compare-npy "$tmp/a/x.npy" "$tmp/b/x.npy" --rtol=1e-6
out_has "$tmp/b/x.npy: normalized error 9.54e-07"
run_fadc 1 compare-npy "$tmp/a" "$tmp/c" --rtol 1e-2
out_has "y.npy: DIFFERENT: f32[2, 2] against f32[4]"
# Every file is reported, also after a failing one.
run_fadc 1 compare-npy "$tmp/a" "$tmp/c" --rtol 1e-4
out_has "x.npy: normalized error 0.000999 ABOVE TOLERANCE"
out_has "y.npy: DIFFERENT: f32[2, 2] against f32[4]"
run_fadc 1 compare-npy "$tmp/a" "$tmp/d"
out_has "y.npy: only in $tmp/a"
run_fadc 1 compare-npy "$tmp/d/x.npy" "$tmp/i/x.npy"
out_has "DIFFERENT: f32[4] against i64[4]"
# NaN equals NaN at the same place; an infinity equals itself.
run_fadc 0 compare-npy "$tmp/n" "$tmp/n" --rtol 0
run_fadc 1 compare-npy "$tmp/n/x.npy" "$tmp/a/x.npy"
out_has "DIFFERENT: element 0 is nan against 1"

run_fadc 1 compare-npy "$tmp/a" "$tmp/a/x.npy"
err_first "fadc: error: compare-npy: '$tmp/a' is a folder and '$tmp/a/x.npy' a file (give two files or two folders)"
run_fadc 1 compare-npy "$tmp/a/x.npy" "$tmp/missing.npy"
err_first "$tmp/missing.npy: error: cannot open: No such file or directory"
mkdir "$tmp/e1" "$tmp/e2"
run_fadc 1 compare-npy "$tmp/e1" "$tmp/e2"
err_first "fadc: error: compare-npy: no .npy files in '$tmp/e1' or '$tmp/e2'"
exit 0
