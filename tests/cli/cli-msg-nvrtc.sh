# RUN: bash %s
# A failed NVRTC compilation is reported in a few lines: NVRTC's log, the
# blamed line with three lines of context either side, and the path of a
# file holding the whole generated source ($TMPDIR/fadc-nvrtc-NAME), never
# the source itself on stderr (it runs to hundreds of KB).  The failure is
# made by codegen/compile.c's test hook FADC_TEST_NVRTC_ERROR=K, which
# makes line K of every task's source an #error: no GPU needed, only the
# toolkit (NVRTC).
source "$(dirname "$0")/common.bash"
model=$SRC/models/ppl_robust_reg.ir
mkdir "$tmp/td"

# The sources as printed, without the hook.
if ! "$FADC" "$model" --target cuda --tasks vjp --emit cuda -o "$tmp/a.so" >"$tmp/out" 2>"$tmp/err"; then
	grep -qF "built without the CUDA toolkit" "$tmp/err" && { echo "no CUDA toolkit: skipped"; exit 77; }
	cat "$tmp/err" >&2
	fail "compiling $model for CUDA failed"
fi
# forward's source: between its "// ---- NAME" line and vjp's.
sed -n '/^\/\/ ---- ppl_robust_reg.forward.cu$/,/^\/\/ ---- ppl_robust_reg.vjp.cu$/p' "$tmp/out" |
	sed '1d;$d' >"$tmp/forward.cu"
n=$(wc -l <"$tmp/forward.cu")
[ "$n" -gt 200 ] || fail "forward's source has $n lines, expected over 200"

TMPDIR=$tmp/td FADC_TEST_NVRTC_ERROR=100 run_fadc 1 "$model" --target cuda --tasks vjp -o "$tmp/b.so"
[ -e "$tmp/b.so" ] && fail "a failed compilation wrote an artifact"
saved=$tmp/td/fadc-nvrtc-ppl_robust_reg.forward.cu
err_first "NVRTC: compiling ppl_robust_reg.forward.cu for sm_90 failed: NVRTC_ERROR_COMPILATION"
err_has "ppl_robust_reg.forward.cu(100): catastrophic error: #error directive: FADC_TEST_NVRTC_ERROR"
err_has "ppl_robust_reg.forward.cu:100:"
err_has ">  100 | #error FADC_TEST_NVRTC_ERROR"
# Context: lines 97 to 103 of the source with the #error as line 100.
{ sed -n 97,99p "$tmp/forward.cu"; sed -n 100,102p "$tmp/forward.cu"; } >"$tmp/ctx"
i=97
while IFS= read -r line; do
	[ $i -eq 100 ] && i=101
	err_has "$(printf '%6d | %s' $i "$line")"
	i=$((i + 1))
done <"$tmp/ctx"
err_has "the whole generated source ("
err_has "): $saved"
err_has "$SRC/models/ppl_robust_reg.ir: error: task 'forward': NVRTC: "
# Short: the report, not the source (forward's alone is $n lines).
lines=$(wc -l <"$tmp/err") bytes=$(wc -c <"$tmp/err")
[ "$lines" -le 30 ] || fail "the report has $lines lines, expected at most 30"
[ "$bytes" -le 4000 ] || fail "the report has $bytes bytes, expected at most 4000"
grep -qF "$(sed -n 10p "$tmp/forward.cu")" "$tmp/err" && fail "the report prints line 10 of the source"
# The saved file: the whole source as given to NVRTC, the #error included.
[ -f "$saved" ] || fail "$saved was not written"
{ sed -n 1,99p "$tmp/forward.cu"; echo "#error FADC_TEST_NVRTC_ERROR (a test hook of codegen/compile.c)"; sed -n '100,$p' "$tmp/forward.cu"; } >"$tmp/want.cu"
cmp -s "$saved" "$tmp/want.cu" || fail "$saved is not the whole source: $(diff "$tmp/want.cu" "$saved" | head)"
exit 0
