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

# Several modules: forward and vjp each split (format 9); mods modules in
# all, of m programs: vjp's kernels that are forward's are compiled once,
# in forward's programs, which vjp lists too (codegen/compile.c "Sharing
# across tasks"; 4 pieces of its own at most, and those it shares).
run_fadc 0 inspect "$tmp/j1.so"
grep -q "^  images: cubin [1-9][0-9]* bytes, PTX [1-9][0-9]* bytes in [2-8] modules$" "$tmp/out" ||
	fail "no task of several modules: $(grep images "$tmp/out")"
mods=0
for k in $(sed -n 's/^  images: .* in \([0-9]*\) modules$/\1/p' "$tmp/out"); do mods=$((mods + k)); done
mods=$((mods + $(grep -c '^  images: .* bytes$' "$tmp/out")))

# Cold, on 2 threads: every program a miss; warm, on 1: every one a hit.
FADC_JOBS=2 run_fadc 0 "$model" "${args[@]}" --stats -o "$tmp/cold.so"
m=$(stats_nv | sed -n 's/^# stats: compile cache (NVRTC): 0 hits, \([0-9]*\) misses$/\1/p')
[ -n "$m" ] || fail "cold: $(stats_nv)"
[ "$m" -ge 3 ] && [ "$m" -lt "$mods" ] ||
	fail "expected at least 3 programs, fewer than the $mods modules (some shared), got $m"
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

# CPU and GPU code at once: NVRTC's programs and LLVM's pieces on one pool
# of FADC_JOBS threads (codegen/jobs.c).  The artifact is the same on 1
# and 4 threads, with the cache off, cold and warm, and from two compiles
# at once into one empty cache (one entry per program and piece, no
# temporary file left).
both=(--target cpu,cuda --tasks vjp -O0) # -O0: LLVM short, the pieces as many
export FADC_LLVM_PIECES=7
stats_ll() { grep -F "# stats: compile cache (LLVM):" "$tmp/err" || fail "--stats has no LLVM cache line"; }
misses() { sed 's/.* \([0-9]*\) misses$/\1/'; }
hits() { sed 's/.*: \([0-9]*\) hits,.*/\1/'; }
rm -rf "$tmp/cache"
FADC_JOBS=1 run_fadc 0 "$model" "${both[@]}" --no-cache -o "$tmp/b1.so"
FADC_JOBS=4 run_fadc 0 "$model" "${both[@]}" --stats -o "$tmp/bcold.so"
cmp "$tmp/b1.so" "$tmp/bcold.so" || fail "cpu,cuda: 4 threads cold and 1 without the cache differ"
nv=$(stats_nv | misses) ll=$(stats_ll | misses)
[ "$(stats_nv | hits)" = 0 ] && [ "$(stats_ll | hits)" = 0 ] && [ "$ll" -ge 3 ] ||
	fail "cpu,cuda cold: $(stats_nv) $(stats_ll)"
[ "$(entries | wc -l)" = $((nv + ll)) ] || fail "cpu,cuda cold: $(entries | wc -l) entries, $nv + $ll stored"
FADC_JOBS=1 run_fadc 0 "$model" "${both[@]}" --stats -o "$tmp/bwarm.so"
[ "$(stats_nv)" = "# stats: compile cache (NVRTC): $nv hits, 0 misses" ] &&
	[ "$(stats_ll)" = "# stats: compile cache (LLVM): $ll hits, 0 misses" ] ||
	fail "cpu,cuda warm: $(stats_nv) $(stats_ll)"
cmp "$tmp/b1.so" "$tmp/bwarm.so" || fail "cpu,cuda: the warm artifact differs"
rm -rf "$tmp/cache"
FADC_JOBS=2 "$FADC" "$model" "${both[@]}" -o "$tmp/r1.so" 2>"$tmp/e1" & p1=$!
FADC_JOBS=2 "$FADC" "$model" "${both[@]}" -o "$tmp/r2.so" 2>"$tmp/e2" & p2=$!
wait $p1 || { cat "$tmp/e1" >&2; fail "the first of two concurrent compiles failed"; }
wait $p2 || { cat "$tmp/e2" >&2; fail "the second of two concurrent compiles failed"; }
cmp "$tmp/b1.so" "$tmp/r1.so" && cmp "$tmp/b1.so" "$tmp/r2.so" || fail "concurrent cpu,cuda artifacts differ"
[ "$(find "$tmp/cache/compile" -type f | wc -l)" = $((nv + ll)) ] || {
	ls -la "$tmp/cache/compile" >&2
	fail "concurrent compiles left other files than the $((nv + ll)) entries"
}

# A piece count that grows by one splits one piece (linear hashing,
# cg_piece_of): with the cache warm from 7 LLVM pieces (above), 8 (a power
# of two crossed) compiles at most the two halves of the split piece; the
# entry's piece (the descriptor) and the others hit.  The same for the
# NVRTC programs: 4 to 5 pieces, at most two new programs per task split
# (and the entry's LLVM piece: the descriptor records the modules).  Each
# artifact is the --no-cache one.
# (Two halves per CPU level with code: the tiled products' GEMMs give this
# model x86-64-v4 code of its own, docs/ARTIFACT.md "CPU levels".)
FADC_LLVM_PIECES=8 run_fadc 0 "$model" "${both[@]}" --stats -o "$tmp/p8.so"
nlev=$("$FADC" inspect "$tmp/p8.so" | grep -c '^features ')
[ "$(stats_nv | misses)" = 0 ] && [ "$(stats_ll | misses)" -le $((2 * nlev)) ] &&
	[ "$(stats_ll | hits)" -ge 1 ] ||
	fail "7 to 8 LLVM pieces: $(stats_ll) $(stats_nv), expected at most $((2 * nlev)) LLVM misses"
FADC_LLVM_PIECES=8 run_fadc 0 "$model" "${both[@]}" --no-cache -o "$tmp/p8-off.so"
cmp "$tmp/p8.so" "$tmp/p8-off.so" || fail "8 LLVM pieces: the cached artifact differs"
FADC_CUDA_PIECES=5 run_fadc 0 "$model" "${both[@]}" --stats -o "$tmp/c5.so"
nvm=$(stats_nv | misses) nvh=$(stats_nv | hits) llm=$(stats_ll | misses)
run_fadc 0 inspect "$tmp/c5.so"
split=$(grep -c '^  images: .* in [0-9]* modules$' "$tmp/out")
[ "$split" -ge 1 ] && [ "$nvm" -le $((2 * split)) ] && [ "$nvh" -ge 1 ] && [ "$llm" = 1 ] ||
	fail "4 to 5 NVRTC pieces ($split tasks split): $nvh hits, $nvm misses; LLVM $llm misses"
echo "cli-cache-cuda-pieces: ok ($m programs, $miss recompiled after the change; cpu,cuda $nv programs and $ll pieces)"
