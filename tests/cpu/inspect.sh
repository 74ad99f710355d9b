# The descriptor of an artifact, read with plain file reads (no code is
# loaded): model, source hash, target, options, declarations with their
# initializers, and each task's inputs, outputs and memory plan.
#
# RUN: %fadc %S/../../models/ppl_simple_reg.ir -o %t/m.so -D N=3 -D K=2 --tasks vjp,hessian
# RUN: %fadc inspect %t/m.so | FileCheck-14 %s
# CHECK: model ppl_simple_reg
# CHECK-NEXT: source_hash {{[0-9a-f]+}}
# CHECK-NEXT: triple x86_64-{{.*}}
# (The default levels are x86-64-v3 and x86-64-v4, but this model has no
# GEMM: its code at x86-64-v4 would be x86-64-v3's, so that level is left
# out: tests/cli/cli-cpu-levels.sh has a model with both.)
# CHECK-NEXT: cpu x86-64-v3 (this CPU runs x86-64-v3)
# CHECK-NEXT: features x86-64-v3 {{.*}}avx2,{{.*}}fma
# CHECK-NEXT: options target=cpu cpu=x86-64-v3 opt=2 compute=f32 defines=N=3,K=2 tasks=forward,vjp,hessian
# CHECK-NEXT: decl X                            const  f32[3, 3]
# CHECK-NEXT: decl Y                            const  f32[3, 1]
# CHECK-NEXT: decl beta_value                   param  f32[3, 1]
# CHECK-NEXT: task forward: {{[0-9]+}} kernels, arena {{[0-9]+}} bytes (naive {{[0-9]+}})
# CHECK-NEXT: in  beta_value                   param  f32[3, 1]
# CHECK-NEXT: in  X                            const  f32[3, 3]
# CHECK-NEXT: in  Y                            const  f32[3, 1]
# CHECK-NEXT: out out                          output f32[]
# CHECK-NEXT: task vjp:
# CHECK:      in  v                            input  f32[]
# CHECK-NEXT: out out                          output f32[]
# CHECK-NEXT: out grad.beta_value              output f32[3, 1]
# CHECK-NEXT: task hessian:
# CHECK:      out hessian.beta_value.beta_value output f32[3, 1, 3, 1]
# CHECK-NEXT: task init.X: 1 kernels
# CHECK-NEXT: out X                            output f32[3, 3]
# CHECK-NEXT: task init.Y: 1 kernels
# CHECK:      task init.beta_value: 1 kernels
