# RUN: bash %s
# The compile cache (codegen/ccache.c, docs/CUDA.md "The compile cache")
# end to end with NVRTC (no GPU needed, exit 77 without the toolkit): a
# cold compile misses and stores (NVRTC's programs and the CPU module's
# object code), a warm one hits (counted by --stats and
# FADC_TIME=1, and no entry is rewritten), a copy of the model under
# another name hits too; the artifact is byte-identical
# with the cache off, cold, warm, after a corrupted entry (a flipped byte,
# a truncation: recompiled and stored again), and from two compiles at
# once into one empty cache (no temporary files left); a tiny
# FADC_CACHE_MAX_BYTES keeps the folder under the bound and leaves
# cuda-choices alone; an unusable FADC_CACHE_DIR gives one warning and the
# same artifact; --no-cache writes nothing.
source "$(dirname "$0")/common.bash"
model=$SRC/models/ppl_robust_reg.ir
args=("$model" --target cuda --tasks vjp)
export FADC_CACHE_DIR=$tmp/cache
unset FADC_CACHE_MAX_BYTES FADC_TIME

# Off: the reference artifact, and nothing written.
if ! "$FADC" "${args[@]}" --no-cache -o "$tmp/off.so" >"$tmp/out" 2>"$tmp/err"; then
	grep -qF "built without the CUDA toolkit" "$tmp/err" && { echo "no CUDA toolkit: skipped"; exit 77; }
	cat "$tmp/err" >&2
	fail "compiling $model for CUDA failed"
fi
[ -e "$tmp/cache" ] && fail "--no-cache made $tmp/cache"
[ -s "$tmp/err" ] && { cat "$tmp/err" >&2; fail "--no-cache wrote to stderr"; }

entries() { find "$tmp/cache/compile" -maxdepth 1 -type f -name '*.nv' | sort; }
stats_cache() { grep -F "# stats: compile cache (NVRTC):" "$tmp/err" || fail "--stats has no cache line"; }
stats_llvm() { grep -F "# stats: compile cache (LLVM):" "$tmp/err" || fail "--stats has no LLVM cache line"; }

# Cold: two tasks (forward, vjp), two misses, and the CPU module's object
# code, two more: the initializers and stubs, and the entry's (a piece of
# its own with CUDA, so that the rest compiles beside NVRTC): four entries.
run_fadc 0 "${args[@]}" --stats -o "$tmp/cold.so"
[ "$(stats_cache)" = "# stats: compile cache (NVRTC): 0 hits, 2 misses" ] || fail "cold: $(stats_cache)"
[ "$(stats_llvm)" = "# stats: compile cache (LLVM): 0 hits, 2 misses" ] || fail "cold: $(stats_llvm)"
cmp "$tmp/off.so" "$tmp/cold.so" || fail "cold artifact differs from --no-cache's"
[ "$(entries | wc -l)" = 4 ] || fail "cold: $(entries | wc -l) entries, expected 4"
entries | xargs md5sum >"$tmp/sums"

# Warm: two hits, the same artifact, the entries untouched.
run_fadc 0 "${args[@]}" --stats -o "$tmp/warm.so"
[ "$(stats_cache)" = "# stats: compile cache (NVRTC): 2 hits, 0 misses" ] || fail "warm: $(stats_cache)"
[ "$(stats_llvm)" = "# stats: compile cache (LLVM): 2 hits, 0 misses" ] || fail "warm: $(stats_llvm)"
cmp "$tmp/off.so" "$tmp/warm.so" || fail "warm artifact differs"
entries | xargs md5sum | cmp -s - "$tmp/sums" || fail "a warm compile changed an entry"
FADC_TIME=1 run_fadc 0 "${args[@]}" -o "$tmp/warm2.so"
err_has "fadc: time: nvrtc cache: 2 hits, 0 misses"
err_has "fadc: time: llvm cache: 2 hits, 0 misses"
cmp "$tmp/off.so" "$tmp/warm2.so" || fail "warm artifact (FADC_TIME) differs"

# Corrupt entries: a byte flipped in one's payload, the other truncated
# (the two largest: NVRTC's).
e1=$(ls -S $(entries) | head -1)
e2=$(ls -S $(entries) | sed -n 2p)
printf '\x5a' | dd of="$e1" bs=1 seek=2000 conv=notrunc status=none
truncate -s -1 "$e2"
run_fadc 0 "${args[@]}" --stats -o "$tmp/mend.so"
[ "$(stats_cache)" = "# stats: compile cache (NVRTC): 0 hits, 2 misses" ] || fail "corrupt: $(stats_cache)"
cmp "$tmp/off.so" "$tmp/mend.so" || fail "artifact after corrupt entries differs"
entries | xargs md5sum | cmp -s - "$tmp/sums" || fail "the corrupt entries were not rewritten as before"
# A header byte (its key) and the magic.
printf '\x00' | dd of="$e1" bs=1 seek=20 conv=notrunc status=none
printf 'X' | dd of="$e2" bs=1 seek=0 conv=notrunc status=none
run_fadc 0 "${args[@]}" --stats -o "$tmp/mend2.so"
[ "$(stats_cache)" = "# stats: compile cache (NVRTC): 0 hits, 2 misses" ] || fail "bad header: $(stats_cache)"
cmp "$tmp/off.so" "$tmp/mend2.so" || fail "artifact after bad headers differs"

# A copy of the model under another name: NVRTC never sees the name (its
# programs are all "fadc.cu"), so every program hits, and the artifact is
# the copy's own without the cache.
cp "$model" "$tmp/copy_of_model.ir"
run_fadc 0 "$tmp/copy_of_model.ir" --target cuda --tasks vjp --stats -o "$tmp/copy.so"
[ "$(stats_cache)" = "# stats: compile cache (NVRTC): 2 hits, 0 misses" ] || fail "copy: $(stats_cache)"
"$FADC" "$tmp/copy_of_model.ir" --target cuda --tasks vjp --no-cache -o "$tmp/copy-off.so" || fail "copy --no-cache"
cmp "$tmp/copy.so" "$tmp/copy-off.so" || fail "the copy's artifact differs with the cache"

# Two compiles at once into one empty cache.
rm -rf "$tmp/cache"
"$FADC" "${args[@]}" -o "$tmp/p1.so" 2>"$tmp/e1" & p1=$!
"$FADC" "${args[@]}" -o "$tmp/p2.so" 2>"$tmp/e2" & p2=$!
wait $p1 || { cat "$tmp/e1" >&2; fail "the first of two concurrent compiles failed"; }
wait $p2 || { cat "$tmp/e2" >&2; fail "the second of two concurrent compiles failed"; }
cmp "$tmp/off.so" "$tmp/p1.so" && cmp "$tmp/off.so" "$tmp/p2.so" || fail "concurrent artifacts differ"
[ "$(find "$tmp/cache/compile" -type f | wc -l)" = 4 ] || {
	ls -la "$tmp/cache/compile" >&2
	fail "concurrent compiles left other files than the four entries"
}
entries | xargs md5sum | cmp -s - "$tmp/sums" || fail "concurrent entries differ"

# The CPU target: its object code, cold then warm, the same artifact as
# without the cache; --emit llvm bypasses it (the optimized module is
# printed, so LLVM runs).
"$FADC" "$model" --tasks vjp --no-cache -o "$tmp/cpu-off.so" || fail "--target cpu --no-cache failed"
run_fadc 0 "$model" --tasks vjp --stats -o "$tmp/cpu-cold.so"
# Four pieces: the three of the model that define something (a piece per 16
# kernels) and the entry's (with several CPU levels asked
# for, the descriptor comes after the levels' code; this model has no GEMM,
# so its x86-64-v4 code would be x86-64-v3's, and that level is left out).
[ "$(stats_llvm)" = "# stats: compile cache (LLVM): 0 hits, 4 misses" ] || fail "cpu cold: $(stats_llvm)"
run_fadc 0 "$model" --tasks vjp --stats -o "$tmp/cpu-warm.so"
[ "$(stats_llvm)" = "# stats: compile cache (LLVM): 4 hits, 0 misses" ] || fail "cpu warm: $(stats_llvm)"
cmp "$tmp/cpu-off.so" "$tmp/cpu-cold.so" && cmp "$tmp/cpu-off.so" "$tmp/cpu-warm.so" ||
	fail "CPU artifacts differ across off, cold, warm"
run_fadc 0 "$model" --tasks vjp --stats --emit llvm -o "$tmp/cpu-emit.so"
grep -qF "compile cache (LLVM)" "$tmp/err" && fail "--emit llvm used the cache"
out_has "define"

# Eviction: a bound below the two entries' size; cuda-choices stays.
echo "a line of the runtime's choices" >"$tmp/cache/cuda-choices"
small=$(stat -c %s $(entries) | sort -n | head -1)
FADC_CACHE_MAX_BYTES=$small run_fadc 0 "${args[@]}" --no-ptx -o "$tmp/evict.so"
total=$(entries | xargs -r stat -c %s | awk '{s += $1} END {print s + 0}')
[ "$total" -le "$small" ] || fail "after eviction the entries hold $total bytes, the bound is $small"
[ "$(cat "$tmp/cache/cuda-choices")" = "a line of the runtime's choices" ] || fail "eviction touched cuda-choices"
"$FADC" "${args[@]}" --no-ptx --no-cache -o "$tmp/evict-off.so" || fail "--no-ptx --no-cache failed"
cmp "$tmp/evict.so" "$tmp/evict-off.so" || fail "artifact with eviction differs"

# An unusable cache folder: one warning, the same artifact.
FADC_CACHE_DIR=/dev/null/x run_fadc 0 "${args[@]}" -o "$tmp/nowhere.so"
[ "$(grep -c "warning: the compile cache" "$tmp/err")" = 1 ] || { cat "$tmp/err" >&2; fail "expected one warning"; }
[ "$(wc -l <"$tmp/err")" = 1 ] || { cat "$tmp/err" >&2; fail "expected stderr to be the warning alone"; }
err_has "fadc: warning: the compile cache /dev/null/x/compile cannot be used"
cmp "$tmp/off.so" "$tmp/nowhere.so" || fail "artifact without a usable cache differs"
if [ "$(id -u)" != 0 ]; then # root writes through chmod 0500
	mkdir "$tmp/ro" && chmod 0500 "$tmp/ro"
	FADC_CACHE_DIR=$tmp/ro run_fadc 0 "${args[@]}" -o "$tmp/ro.so"
	[ "$(grep -c "warning: the compile cache" "$tmp/err")" = 1 ] || fail "read-only: expected one warning"
	cmp "$tmp/off.so" "$tmp/ro.so" || fail "artifact with a read-only cache differs"
	chmod 0700 "$tmp/ro"
fi
echo "cli-cache: ok"
