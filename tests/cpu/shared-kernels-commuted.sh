# Kernels that differ only in the order of a product's operands share one
# function (codegen/llvm.c, sig_walk: the operands of + and * walked in the
# order of a buffer-blind hash of their structure).  ppl_simple_reg's jvp
# computes the tangent mu' = X v with the forward's matmul mu = X beta, whose
# kernel IR reads its operands in the other order: before, jvp emitted its
# own `jvp.k4.matmul`; now it calls the forward's, v in beta's place.
# -O0 keeps every function un-inlined (kernel 0 of a task writes its
# constants' table: codegen/kir_consts.c).  That the outputs are right is
# checked against the interpreter by the zoo tests (unit/test_codegen_zoo,
# fadc check); this test fails if the sharing is lost.
#
# RUN: %fadc %S/../../models/ppl_simple_reg.ir -o %t/m.so -D N=3 -D K=2 --tasks vjp,jvp -O0 --emit llvm | FileCheck-14 %s
# CHECK: define internal void @forward.k1.matmul(
# CHECK-NOT: define internal void @jvp.k{{[0-9]+}}.matmul(
# CHECK-LABEL: define internal i32 @task.jvp(
# CHECK: call void @forward.k1.matmul(float* [[MU:%[0-9]+]], float* [[BETA:%[0-9]+]], float* [[X:%[0-9]+]])
# CHECK: call void @forward.k1.matmul(float* {{%[0-9]+}}, float* {{%[0-9]+}}, float* [[X]])
# CHECK-NOT: call void @jvp.k{{[0-9]+}}.matmul(
# CHECK: ret i32
