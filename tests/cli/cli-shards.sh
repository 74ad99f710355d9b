# RUN: bash %s
# --shards K: each batched task T of the list also compiled as its K shards
# T:k/K (docs/TASKS.md, "Shards"), which `fadc inspect` lists with their
# basis rows, `fadc run` runs (compiled: equal to the interpreter's run of
# the same shard), `--emit ir --task T:k/K` prints; uneven splits
# (--shard-weights, T:k/K:w0+...); and the diagnostics for bad counts, bad
# shard names and weights, and tasks that have no shards.
source "$(dirname "$0")/common.bash"
model=$SRC/models/ppl_robust_reg.ir # N = 3, K = 2: 7 basis vectors

run_fadc 0 "$model" -D N=3 -D K=2 -o "$tmp/a.so" --tasks hessian,jacfwd,vjp --shards 3
run_fadc 0 inspect "$tmp/a.so"
out_has "tasks=forward,hessian,hessian:0/3,hessian:1/3,hessian:2/3,jacfwd,jacfwd:0/3,jacfwd:1/3,jacfwd:2/3,vjp"
out_has "  shard 0 of 3 of hessian: basis rows [0, 3) of 7"
out_has "  shard 1 of 3 of hessian: basis rows [3, 5) of 7"
out_has "  shard 2 of 3 of jacfwd: basis rows [5, 7) of 7"
grep -q "^task vjp:[0-9]" "$tmp/out" && fail "vjp is not batched, yet it has shards"
# Shard 1 of 3 holds rows 2..3 of sigma (the slice [2, 3, 1] of
# hessian.sigma.beta) and row 0 of beta.
grep -qE '^  out hessian.sigma_unconstrained_value.beta_value +output f32\[2, 3, 1\]$' "$tmp/out" ||
	fail "inspect does not show the slice hessian.sigma.beta of shard 1"

run_fadc 0 run "$tmp/a.so" --task hessian:1/3 --out "$tmp/so"
run_fadc 0 run "$model" -D N=3 -D K=2 --task hessian:1/3 --out "$tmp/ir"
run_fadc 0 compare-npy "$tmp/so" "$tmp/ir" --rtol 1e-5
[ -f "$tmp/so/hessian.beta_value.nu_value.npy" ] || fail "shard 1 of 3 does not write beta's rows"
[ -f "$tmp/so/hessian.nu_value.nu_value.npy" ] && fail "shard 1 of 3 writes nu's rows, which are shard 0's"

run_fadc 0 "$model" -D N=3 -D K=2 --task hessian:2/3
out_has "def hessian:2/3() -> ("

# An uneven split (--shard-weights): 7 rows as 1 + 4 + 2 (by hand: [0, 1), [1, 5), [5, 7)),
# run compiled and equal to the interpreter's run of the same shard.
run_fadc 0 "$model" -D N=3 -D K=2 -o "$tmp/w.so" --tasks hessian --shards 3 --shard-weights 1,4,2
run_fadc 0 inspect "$tmp/w.so"
out_has "tasks=forward,hessian,hessian:0/3:1+4+2,hessian:1/3:1+4+2,hessian:2/3:1+4+2"
out_has "  shard 0 of 3 of hessian: basis rows [0, 1) of 7"
out_has "  shard 1 of 3 of hessian: basis rows [1, 5) of 7"
out_has "  shard 2 of 3 of hessian: basis rows [5, 7) of 7"
run_fadc 0 run "$tmp/w.so" --task hessian:1/3:1+4+2 --out "$tmp/wso"
run_fadc 0 run "$model" -D N=3 -D K=2 --task hessian:1/3:1+4+2 --out "$tmp/wir"
run_fadc 0 compare-npy "$tmp/wso" "$tmp/wir" --rtol 1e-5
[ -f "$tmp/wso/hessian.nu_value.nu_value.npy" ] && fail "shard 1 of 1+4+2 writes nu's row, which is shard 0's"
run_fadc 2 "$model" -o "$tmp/x.so" --shard-weights 1,2
err_first "fadc: error: --shard-weights needs --shards K"
run_fadc 2 "$model" -o "$tmp/x.so" --shards 3 --shard-weights 1,2
err_first "fadc: error: --shard-weights gives 2 weights: --shards 3 needs one per shard"
run_fadc 2 "$model" -o "$tmp/x.so" --shards 2 --shard-weights 1,0
err_first "fadc: error: --shard-weights: '1,0' is not a list of up to 64 weights from 1 to 1000000 such as 3,2"
run_fadc 2 "$model" --task hessian:0/2:1+2+3
err_first "fadc: error: --task: 'hessian:0/2:1+2+3': the weights of K = 2 shards are 2 numbers from 1 to 1000000 joined by '+' (hessian:0/2:3+2)"
run_fadc 1 "$model" -D N=3 -D K=2 -o "$tmp/x.so" --tasks hessian --shards 3 --shard-weights 100,1,100
err_first "$model: error: task 'hessian:1/3:100+1+100': its weight gives shard 1 none of the 7 basis vectors of hessian for this model (rows 3 .. 3)"

# Usage errors (exit 2) and shards that cannot be (exit 1).
run_fadc 2 "$model" -o "$tmp/x.so" --shards 0
err_first "fadc: error: --shards: '0' is not a number of shards from 1 to 64"
run_fadc 2 "$model" -o "$tmp/x.so" --shards 65
err_first "fadc: error: --shards: '65' is not a number of shards from 1 to 64"
run_fadc 2 "$model" -o "$tmp/x.so" --shards two
err_first "fadc: error: --shards: 'two' is not a number of shards from 1 to 64"
run_fadc 2 "$model" --emit ir --shards 2
err_first "fadc: error: --shards needs -o FILE (--task T:k/K prints one shard)"
run_fadc 2 "$model" -o "$tmp/x.so" --tasks hessian:2/2
err_first "fadc: error: --tasks: 'hessian:2/2': shard k of K needs 0 <= k < K <= 64"
run_fadc 2 "$model" --task hessian:01/2
err_first "fadc: error: --task: 'hessian:01/2': a shard is TASK:k/K, k and K decimal numbers without sign or leading zeros"
run_fadc 2 "$model" --task hess:0/2
err_first "fadc: error: --task: unknown task 'hess' in the shard 'hess:0/2' (TASK:k/K)"
run_fadc 1 "$model" -D N=3 -D K=2 -o "$tmp/x.so" --tasks hessian --shards 8
err_first "$model: error: task 'hessian:0/8': hessian has 7 basis vectors for this model, fewer than 8 shards"
run_fadc 1 "$model" -o "$tmp/x.so" --tasks vjp:0/2
err_first "$model: error: task 'vjp:0/2': vjp is not batched, so it has no shards (only jacobian and jacrev of a non-scalar forward, jacfwd and the Hessians are)"
run_fadc 1 "$model" -o "$tmp/x.so" --tasks jacobian:0/2
err_has "error: task 'jacobian:0/2': jacobian is not batched for this model, so it has no shards (forward returns a scalar: its Jacobian is one gradient)"
run_fadc 1 "$model" -o "$tmp/x.so" --tasks all --shards 16
err_first "$model: error: --shards 16: more than 63 tasks beside forward (an artifact's most); compile fewer batched tasks at once"
[ -e "$tmp/x.so" ] && fail "a failed compile wrote $tmp/x.so"
exit 0
