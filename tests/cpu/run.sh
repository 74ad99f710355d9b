# fadc run MODEL.so: the compiled forward value equals the interpreter's pinned
# one (tests/models/ppl_robust_reg.ir: -629.476974) to f32 precision, and
# outputs are written as .npy files.
#
# RUN: %fadc %S/../../models/ppl_robust_reg.ir -o %t/m.so --tasks vjp
# RUN: %fadc run %t/m.so --task forward --print | FileCheck-14 %s
# CHECK: out: f32[] = -629.4769{{[0-9]+}}
# RUN: %fadc run %t/m.so --task vjp --out %t/out
# RUN: test -s %t/out/out.npy && test -s %t/out/grad.nu_value.npy && test -s %t/out/grad.beta_value.npy
