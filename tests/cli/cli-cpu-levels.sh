# RUN: bash %s
# The CPU levels of an artifact on the command line (docs/ARTIFACT.md "CPU
# levels"): by default code for x86-64-v3 and x86-64-v4, which `fadc
# inspect` lists with each one's features and the one this CPU runs (the
# highest it has every feature of; FADC_CPU_FEATURES fakes an older CPU,
# FADC_CPU_LEVEL forces a level); --cpu narrows them (one level: the
# artifact as before, one entry symbol; a list in any order: the same
# bytes); bad lists are usage errors (2), a level the CPU lacks or the
# artifact does not have an error of the run (1).  Each level's outputs
# are checked against the float64 interpreter (fadc run MODEL.ir, the
# project's oracle; compare-npy --rtol 1e-4: f32 GEMM sums of 300 terms);
# the x86-64-v4 run only where this CPU has AVX-512.
source "$(dirname "$0")/common.bash"
cat >"$tmp/g.ir" <<'EOF'
param a: f32[37, 300] = normal(0, 1, seed=1)
param b: f32[300, 53] = normal(0, 1, seed=2)
def forward() {
  return sum(sin(a @ b))
}
EOF
v3=sse2,sse3,ssse3,sse4.1,sse4.2,popcnt,cx16,sahf,avx,avx2,bmi,bmi2,f16c,fma,lzcnt,movbe,xsave
v4=$v3,avx512f,avx512dq,avx512cd,avx512bw,avx512vl
unset FADC_CPU_LEVEL FADC_CPU_FEATURES

run_fadc 0 "$tmp/g.ir" -o "$tmp/g.so" --tasks forward
FADC_CPU_FEATURES=$v3 run_fadc 0 inspect "$tmp/g.so"
out_has "cpu x86-64-v3 x86-64-v4 (this CPU runs x86-64-v3)"
out_has "features x86-64-v3 $v3"
out_has "features x86-64-v4 $v4"
out_has "options target=cpu cpu=x86-64-v3,x86-64-v4 "
FADC_CPU_FEATURES=$v4 run_fadc 0 inspect "$tmp/g.so"
out_has "cpu x86-64-v3 x86-64-v4 (this CPU runs x86-64-v4)"
FADC_CPU_FEATURES=$v4 FADC_CPU_LEVEL=x86-64-v3 run_fadc 0 inspect "$tmp/g.so"
out_has "cpu x86-64-v3 x86-64-v4 (this CPU runs x86-64-v3)"
FADC_CPU_FEATURES=sse2 run_fadc 0 inspect "$tmp/g.so"
out_has "cpu x86-64-v3 x86-64-v4 (this CPU runs none: compiled for --cpu x86-64-v3: this CPU lacks"

# Each level's code against the interpreter.
run_fadc 0 run "$tmp/g.ir" --task forward --out "$tmp/ref"
levels=x86-64-v3
grep -qw avx512f /proc/cpuinfo && grep -qw avx512bw /proc/cpuinfo && grep -qw avx512vl /proc/cpuinfo &&
	grep -qw avx512dq /proc/cpuinfo && levels="$levels x86-64-v4"
for l in $levels; do
	FADC_CPU_LEVEL=$l run_fadc 0 run "$tmp/g.so" --task forward --out "$tmp/$l"
	run_fadc 0 compare-npy "$tmp/ref/out.npy" "$tmp/$l/out.npy" --rtol 1e-4
done
# A level the CPU lacks, one the artifact lacks: errors of the run.
FADC_CPU_FEATURES=$v3 FADC_CPU_LEVEL=x86-64-v4 run_fadc 1 run "$tmp/g.so" --task forward --print
err_has "g.so: error: FADC_CPU_LEVEL=x86-64-v4: this CPU lacks features the artifact's code needs: avx512f"
FADC_CPU_LEVEL=x86-64-v2 run_fadc 1 run "$tmp/g.so" --task forward --print
err_has "FADC_CPU_LEVEL=x86-64-v2: the artifact has no code for that CPU level (it has x86-64-v3 x86-64-v4)"

# Both entry symbols; the v4 code holds 512-bit registers, the v3 code none.
if command -v nm >/dev/null && command -v objdump >/dev/null; then
	nm -D --defined-only "$tmp/g.so" | grep -q ' fadc_artifact_v1$' || fail "no fadc_artifact_v1"
	nm -D --defined-only "$tmp/g.so" | grep -q ' fadc_artifact_v1\.x86-64-v4$' ||
		fail "no fadc_artifact_v1.x86-64-v4"
	objdump -d "$tmp/g.so" | grep -q '%zmm' || fail "the x86-64-v4 code has no zmm register"
fi

# --cpu narrows: one level is the artifact without levels.
run_fadc 0 "$tmp/g.ir" -o "$tmp/v3.so" --tasks forward --cpu x86-64-v3
run_fadc 0 inspect "$tmp/v3.so"
out_has "cpu x86-64-v3 (this CPU runs x86-64-v3)"
grep -q "^features x86-64-v4" "$tmp/out" && fail "--cpu x86-64-v3 has a second level"
if command -v objdump >/dev/null; then
	objdump -d "$tmp/v3.so" | grep -q '%zmm' && fail "the x86-64-v3 artifact uses zmm registers"
	nm -D --defined-only "$tmp/v3.so" | grep -q 'x86-64-v4' && fail "--cpu x86-64-v3 has a v4 entry"
fi
# A list in another order: the same artifact.
run_fadc 0 "$tmp/g.ir" -o "$tmp/l.so" --tasks forward --cpu x86-64-v4,x86-64-v3
cmp "$tmp/g.so" "$tmp/l.so" || fail "--cpu x86-64-v4,x86-64-v3 differs from the default"

# Usage errors: exit 2, before the model is read.
run_fadc 2 "$tmp/g.ir" -o "$tmp/x.so" --cpu x86-64-v9
err_has "unknown --cpu 'x86-64-v9'"
run_fadc 2 "$tmp/g.ir" -o "$tmp/x.so" --cpu x86-64-v3,x86-64-v3
err_has "--cpu x86-64-v3,x86-64-v3: the level x86-64-v3 is listed twice"
run_fadc 2 "$tmp/g.ir" -o "$tmp/x.so" --cpu x86-64-v3,native
err_has "--cpu x86-64-v3,native: 'native' is not an x86-64 level"
run_fadc 2 "$tmp/g.ir" -o "$tmp/x.so" --cpu x86-64-v3,
err_has "is not an x86-64 level"
[ -e "$tmp/x.so" ] && fail "a usage error wrote an artifact"
exit 0
