# RUN: bash %s
# --seed is mixed into every initializer: another seed, other values; the
# same seed, the same bytes; no --seed is seed 0.
source "$(dirname "$0")/common.bash"
model=$SRC/models/ppl_simple_reg.ir

run_fadc 0 run "$model" --out "$tmp/s0"
run_fadc 0 run "$model" --out "$tmp/z0" --seed 0
run_fadc 0 run "$model" --out "$tmp/s1" --seed 1
run_fadc 0 run "$model" --out "$tmp/s1b" --seed 1
run_fadc 0 run "$model" --out "$tmp/s2" --seed 18446744073709551615
cmp -s "$tmp/s0/out.npy" "$tmp/z0/out.npy" || fail "no --seed differs from --seed 0"
cmp -s "$tmp/s1/out.npy" "$tmp/s1b/out.npy" || fail "--seed 1 twice differs"
cmp -s "$tmp/s0/out.npy" "$tmp/s1/out.npy" && fail "--seed 1 gives the values of seed 0"
cmp -s "$tmp/s1/out.npy" "$tmp/s2/out.npy" && fail "--seed 2^64-1 gives the values of seed 1"
exit 0
