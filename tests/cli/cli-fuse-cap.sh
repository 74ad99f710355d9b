# RUN: bash %s
# The cap on a fused kernel's size (docs/CODEGEN.md, "Size bounds"): a
# wide, shallow tree of elementwise ops, 1,024 terms t_i = sin(x * c_i)
# summed pairwise (depth 12, far under the depth bound of 200), then
# sum(): 1,024 * 3 + 1,023 = 4,095 inlinable nodes, which fusion without
# the cap made one kernel ("4093 fused" in --emit kir).  With it no kernel
# fuses more than 256 nodes (the cap; the kernel IR's count includes the
# root), so there are at least 4,095 / 256 > 16 kernels, and the compiled
# forward and vjp agree with the float64 interpreter (fadc check).
source "$(dirname "$0")/common.bash"
awk 'BEGIN {
	print "param x: f32[64] = normal(0, 1, seed=1)"
	print "def forward() -> f32[] {"
	n = 1024
	for (i = 0; i < n; i++)
		printf "  a%d = sin(x * %.4f)\n", i, 1 + i / 1000
	lvl = 0
	while (n > 1) {
		for (i = 0; i < n / 2; i++) {
			src = lvl == 0 ? "a" : "s" lvl "_"
			printf "  s%d_%d = %s%d + %s%d\n", lvl + 1, i, src, 2 * i, src, 2 * i + 1
		}
		n /= 2
		lvl++
	}
	printf "  return sum(s%d_0)\n", lvl
	print "}"
}' >"$tmp/wide.ir"
run_fadc 0 "$tmp/wide.ir" --tasks forward -O0 -o "$tmp/wide.so" --emit kir
grep -o '[0-9]* fused' "$tmp/out" | awk '{ print $1 }' | sort -n >"$tmp/fused"
k=$(wc -l <"$tmp/fused")
big=$(tail -n 1 "$tmp/fused")
[ "$k" -ge 17 ] || fail "forward has $k kernels: the tree was not cut (want >= 17)"
[ "$big" -le 257 ] || fail "a kernel fuses $big nodes, more than the cap of 256 (+ its root)"
run_fadc 0 check "$tmp/wide.ir" --tasks vjp
out_has "(tolerance 1e-05): ok"
