# RUN: bash %s
# The CPU module as pieces (codegen/llvm.c "pieces", llvm_pieces.c;
# docs/CODEGEN.md "Compile time"), forced to 8 by FADC_LLVM_PIECES on a
# small model so that this runs in seconds: the artifact is byte-identical
# on 1 thread and on 4, with the cache off, cold (compiled on 3 threads)
# and warm, and from two compiles at once into one cache; a cold compile
# misses every piece and stores it, a warm one
# hits every piece; after one constant's seed is changed in the .ir only
# the pieces that changed are compiled (its initializer's and the entry's,
# which holds the descriptor), and the artifact is the --no-cache one of
# the changed model; a copy of the model under another name recompiles
# only the entry piece (the descriptor records the model's name).  The
# pieces' code is checked against the float64 interpreter (fadc check,
# the project's oracle, at its default tolerances) and its outputs against
# one module's, bit for bit; resnet18 (reduced,
# -O0) is 45 pieces and the entry's by default (about 32 kernels a
# piece), the same bytes on 1 and 2 threads.
source "$(dirname "$0")/common.bash"
model=$SRC/models/ppl_robust_reg.ir
args=(--tasks vjp,hvp)
export FADC_LLVM_PIECES=8 FADC_CACHE_DIR=$tmp/cache
unset FADC_CACHE_MAX_BYTES FADC_TIME FADC_JOBS

stats_llvm() { grep -F "# stats: compile cache (LLVM):" "$tmp/err" || fail "--stats has no LLVM cache line"; }
entries() { find "$tmp/cache/compile" -maxdepth 1 -type f -name '*.nv' | sort; }

# Threads: 1 and 4, no cache.
FADC_JOBS=1 run_fadc 0 "$model" "${args[@]}" --no-cache -o "$tmp/j1.so"
FADC_JOBS=4 run_fadc 0 "$model" "${args[@]}" --no-cache -o "$tmp/j4.so"
cmp "$tmp/j1.so" "$tmp/j4.so" || fail "1 and 4 threads give different artifacts"
[ -e "$tmp/cache" ] && fail "--no-cache made the cache"

# Cold: every piece a miss, on 3 threads; one entry per piece.
FADC_TIME=1 FADC_JOBS=3 run_fadc 0 "$model" "${args[@]}" --stats -o "$tmp/cold.so"
cmp "$tmp/j1.so" "$tmp/cold.so" || fail "cold artifact differs from --no-cache's"
n=$(entries | wc -l)
[ "$n" -ge 5 ] || fail "cold: $n entries, expected one per piece (at least 5 of 8 and the entry's)"
[ "$(stats_llvm)" = "# stats: compile cache (LLVM): 0 hits, $n misses" ] || fail "cold: $(stats_llvm)"
err_has "pieces on 3 threads"
entries | xargs md5sum >"$tmp/sums"

# Warm: every piece a hit, nothing rewritten.
FADC_JOBS=1 run_fadc 0 "$model" "${args[@]}" --stats -o "$tmp/warm.so"
[ "$(stats_llvm)" = "# stats: compile cache (LLVM): $n hits, 0 misses" ] || fail "warm: $(stats_llvm)"
cmp "$tmp/j1.so" "$tmp/warm.so" || fail "warm artifact differs"
entries | xargs md5sum | cmp -s - "$tmp/sums" || fail "a warm compile changed an entry"

# Two compiles at once into one empty cache, each on 2 threads: the same
# artifact, one entry per piece, no temporary file left.
rm -rf "$tmp/cache"
FADC_JOBS=2 "$FADC" "$model" "${args[@]}" -o "$tmp/c1.so" 2>"$tmp/e1" & p1=$!
FADC_JOBS=2 "$FADC" "$model" "${args[@]}" -o "$tmp/c2.so" 2>"$tmp/e2" & p2=$!
wait $p1 || { cat "$tmp/e1" >&2; fail "the first of two concurrent compiles failed"; }
wait $p2 || { cat "$tmp/e2" >&2; fail "the second of two concurrent compiles failed"; }
cmp "$tmp/j1.so" "$tmp/c1.so" && cmp "$tmp/j1.so" "$tmp/c2.so" || fail "concurrent artifacts differ"
[ "$(find "$tmp/cache/compile" -type f | wc -l)" = "$n" ] || {
	ls -la "$tmp/cache/compile" >&2
	fail "concurrent compiles left other files than the $n entries"
}
entries | xargs md5sum | cmp -s - "$tmp/sums" || fail "concurrent entries differ"

# One seed changed: its initializer's piece and the entry's miss, the
# rest hit; the artifact is the changed model's, cache or not.
sed 's/uniform(0, 1, seed=6)/uniform(0, 1, seed=66)/' "$model" >"$tmp/seed.ir"
cmp -s "$model" "$tmp/seed.ir" && fail "the seed was not changed"
run_fadc 0 "$tmp/seed.ir" "${args[@]}" --stats -o "$tmp/seed.so"
[ "$(stats_llvm)" = "# stats: compile cache (LLVM): $((n - 2)) hits, 2 misses" ] ||
	fail "seed change: $(stats_llvm), expected 2 misses of $n"
run_fadc 0 "$tmp/seed.ir" "${args[@]}" --no-cache -o "$tmp/seed-off.so"
cmp "$tmp/seed.so" "$tmp/seed-off.so" || fail "after a seed change the cached artifact differs"
cmp -s "$tmp/seed.so" "$tmp/j1.so" && fail "the seed change did not change the artifact"

# The same model under another name: the entry's piece alone.
cp "$model" "$tmp/other_name.ir"
run_fadc 0 "$tmp/other_name.ir" "${args[@]}" --stats -o "$tmp/other.so"
[ "$(stats_llvm)" = "# stats: compile cache (LLVM): $((n - 1)) hits, 1 misses" ] || fail "copy: $(stats_llvm)"

# The pieces' code against the interpreter, and against one module: the
# same outputs bit for bit (nothing reassociates floating point, so where a
# function is compiled cannot change a result).
run_fadc 0 check "$model" "${args[@]}"
FADC_LLVM_PIECES=1 run_fadc 0 "$model" "${args[@]}" --no-cache -o "$tmp/one.so"
cmp -s "$tmp/one.so" "$tmp/j1.so" && fail "FADC_LLVM_PIECES=8 made one module"
for t in vjp hvp; do
	run_fadc 0 run "$tmp/one.so" --task $t --out "$tmp/one-$t"
	run_fadc 0 run "$tmp/j1.so" --task $t --out "$tmp/pieces-$t"
	[ "$(ls "$tmp/one-$t" | wc -l)" -ge 1 ] || fail "$t wrote no outputs"
	diff -r "$tmp/one-$t" "$tmp/pieces-$t" || fail "$t: the pieces' outputs differ from one module's"
done

# resnet18's default count: 90 pieces and the entry's (npieces: a
# function of the kernels, not of the sizes), -O0 to keep it short; the
# same artifact on 1 thread and on 2.
unset FADC_LLVM_PIECES
small=(-D N=1 -D H=8 -D C=2 -D NCLS=2 -O0 --no-cache)
FADC_TIME=1 FADC_JOBS=2 run_fadc 0 "$SRC/models/resnet18.ir" "${small[@]}" -o "$tmp/r2.so"
err_has "91 pieces)"
FADC_JOBS=1 run_fadc 0 "$SRC/models/resnet18.ir" "${small[@]}" -o "$tmp/r1.so"
cmp "$tmp/r1.so" "$tmp/r2.so" || fail "resnet18: 1 and 2 threads give different artifacts"
echo "cli-cache-pieces: ok"
