# The kernel IR of ppl_simple_reg's forward (--emit kir): the matmul is a
# contraction kernel; softplus and the likelihood fuse into one reduction,
# the prior into another; the memory plan reuses the arena.
#
# RUN: %fadc %S/../../models/ppl_simple_reg.ir -o %t/m.so -D N=3 -D K=2 --tasks forward --emit kir | FileCheck-14 %s
# CHECK-LABEL: program forward: 4 kernels
# CHECK: kernel k0: b{{[0-9]+}} = matmul
# CHECK-SAME: for v0 < 3;sum over v1 < 3
# CHECK: kernel k1: b{{[0-9]+}} = sum
# CHECK: log1p
# CHECK: acc += x
# CHECK: kernel k2: b{{[0-9]+}} = sum
# CHECK: kernel k3: b{{[0-9]+}} = elementwise
# CHECK: store b{{[0-9]+}}[x{{[0-9]+}}] = x{{[0-9]+}}
# CHECK-LABEL: program init.X
# CHECK: rand.uniform seed=1
