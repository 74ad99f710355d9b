# RUN: bash %s
# A task's CUDA code as pieces, several NVRTC programs each cached on its
# own (codegen/compile.c "pieces", docs/CUDA.md "Pieces"), forced to 4 by
# FADC_CUDA_PIECES on a small model with persistent loop kernels and tiled
# products (tests/gpu/scan-tile.ir), so that this runs in seconds and needs
# no GPU (NVRTC only): the artifact is byte-identical on 1 thread and on 2,
# with the cache off, cold, warm, and after every entry was corrupted
# (each recompiled and rewritten); a task is several modules (inspect,
# format 9); a cold compile misses every program and a warm one hits them
# all; after one constant of the .ir is changed only the pieces holding a
# changed kernel are compiled again, and the artifact is the --no-cache one
# of the changed model.  That each launch's function is in its module is
# checked in unit/test_codegen_cuda_shared (the PTX of each module); the
# pieces run on the GPU in tests/gpu/device/run.sh (the zoo at full size
# is split by default).
source "$(dirname "$0")/common.bash"
model=$SRC/tests/gpu/scan-tile.ir
args=(--target cuda --tasks vjp)
export FADC_CUDA_PIECES=4 FADC_CACHE_DIR=$tmp/cache
unset FADC_CACHE_MAX_BYTES FADC_TIME FADC_JOBS FADC_LLVM_PIECES
if ! "$FADC" "$model" "${args[@]}" --no-cache -o "$tmp/probe.so" 2>"$tmp/err"; then
	grep -qF "built without the CUDA toolkit" "$tmp/err" && { echo "no CUDA toolkit: skipped"; exit 77; }
	cat "$tmp/err" >&2
	fail "fadc --target cuda failed"
fi

stats_nv() { grep -F "# stats: compile cache (NVRTC):" "$tmp/err" || fail "--stats has no NVRTC cache line"; }
entries() { find "$tmp/cache/compile" -maxdepth 1 -type f -name '*.nv' | sort; }

# Threads: 1 and 2, no cache.
FADC_JOBS=1 run_fadc 0 "$model" "${args[@]}" --no-cache -o "$tmp/j1.so"
FADC_JOBS=2 run_fadc 0 "$model" "${args[@]}" --no-cache -o "$tmp/j2.so"
cmp "$tmp/j1.so" "$tmp/j2.so" || fail "1 and 2 threads give different artifacts"
[ -e "$tmp/cache" ] && fail "--no-cache made the cache"

# Several modules: forward and vjp each split (format 9); m programs in all.
run_fadc 0 inspect "$tmp/j1.so"
grep -q "^  images: cubin [1-9][0-9]* bytes, PTX [1-9][0-9]* bytes in [2-4] modules$" "$tmp/out" ||
	fail "no task of several modules: $(grep images "$tmp/out")"
m=0
for k in $(sed -n 's/^  images: .* in \([0-9]*\) modules$/\1/p' "$tmp/out"); do m=$((m + k)); done
m=$((m + $(grep -c '^  images: .* bytes$' "$tmp/out")))
[ "$m" -ge 3 ] || fail "expected at least 3 programs, inspect says $m"

# Cold, on 2 threads: every program a miss; warm, on 1: every one a hit.
FADC_JOBS=2 run_fadc 0 "$model" "${args[@]}" --stats -o "$tmp/cold.so"
[ "$(stats_nv)" = "# stats: compile cache (NVRTC): 0 hits, $m misses" ] || fail "cold: $(stats_nv)"
cmp "$tmp/j1.so" "$tmp/cold.so" || fail "cold artifact differs from --no-cache's"
FADC_JOBS=1 run_fadc 0 "$model" "${args[@]}" --stats -o "$tmp/warm.so"
[ "$(stats_nv)" = "# stats: compile cache (NVRTC): $m hits, 0 misses" ] || fail "warm: $(stats_nv)"
cmp "$tmp/j1.so" "$tmp/warm.so" || fail "warm artifact differs"
entries | xargs md5sum >"$tmp/sums"

# Every entry corrupted (a flipped byte inside): each a miss, recompiled
# and rewritten as it was; the same artifact.
for e in $(entries); do printf '\x5a' | dd of="$e" bs=1 seek=100 conv=notrunc status=none; done
entries | xargs md5sum | cmp -s - "$tmp/sums" && fail "the entries were not corrupted"
FADC_JOBS=2 run_fadc 0 "$model" "${args[@]}" --stats -o "$tmp/mend.so"
[ "$(stats_nv)" = "# stats: compile cache (NVRTC): 0 hits, $m misses" ] || fail "corrupt: $(stats_nv)"
cmp "$tmp/j1.so" "$tmp/mend.so" || fail "artifact after corrupt entries differs"
entries | xargs md5sum | cmp -s - "$tmp/sums" || fail "the corrupt entries were not rewritten as before"

# One constant changed: the pieces holding a kernel that reads it miss,
# the others hit; the artifact is the changed model's, cache or not.
sed 's/h0 \* 0\.5/h0 * 0.25/' "$model" >"$tmp/scan-tile.ir"
cmp -s "$model" "$tmp/scan-tile.ir" && fail "the constant was not changed"
run_fadc 0 "$tmp/scan-tile.ir" "${args[@]}" --stats -o "$tmp/edit.so"
miss=$(stats_nv | sed 's/.* \([0-9]*\) misses$/\1/')
[ "$miss" -ge 1 ] && [ "$miss" -lt "$m" ] || fail "one constant changed: $(stats_nv), expected some of $m to hit"
run_fadc 0 "$tmp/scan-tile.ir" "${args[@]}" --no-cache -o "$tmp/edit-off.so"
cmp "$tmp/edit.so" "$tmp/edit-off.so" || fail "after the change the cached artifact differs"
cmp -s "$tmp/edit.so" "$tmp/j1.so" && fail "the change did not change the artifact"
echo "cli-cache-cuda-pieces: ok ($m programs, $miss recompiled after the change)"
