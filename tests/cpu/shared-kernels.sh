# Structurally equal kernels are emitted once per module (codegen/llvm.c,
# "shared kernels"): ppl_simple_reg's vjp recomputes the forward's four
# kernels, so task.vjp calls the functions of task.forward and defines only
# its own three (the adjoint of the likelihood, the matmul Xᵀ g, the sum
# with the prior's gradient).  -O0 keeps every function un-inlined.
#
# (kernel 0 of each task writes its constants' table: codegen/kir_consts.c.)
#
# RUN: %fadc %S/../../models/ppl_simple_reg.ir -o %t/m.so -D N=3 -D K=2 --tasks vjp -O0 --emit llvm | FileCheck-14 %s
# CHECK: define internal void @forward.k1.matmul(
# CHECK: define internal void @forward.k4.elementwise(
# CHECK-LABEL: define internal i32 @task.forward(
# CHECK-NOT: define
# CHECK: define internal void @vjp.k5.elementwise(
# CHECK: define internal void @vjp.k7.elementwise(
# CHECK-NEXT: entry:
# CHECK-LABEL: define internal i32 @task.vjp(
# CHECK: call void @forward.k0.kir_consts(
# CHECK-NEXT: call void @forward.k1.matmul(
# CHECK-NEXT: call void @forward.k2.sum(
# CHECK-NEXT: call void @forward.k3.sum(
# CHECK-NEXT: call void @forward.k4.elementwise(
# CHECK-NEXT: call void @vjp.k5.elementwise(
# CHECK-NEXT: call void @vjp.k6.matmul(
# CHECK-NEXT: call void @vjp.k7.elementwise(
