# scan on the CPU: tests/exec/exec-scan.ir (cumulative sums and products,
# forward and reverse, vector carries, several sequences, an invariant, a
# scan inside a body) compiled and run; the values are the hand-derived
# ones that the interpreter's golden test pins, and `fadc check` compares
# every output with the interpreter.
#
# RUN: %fadc %S/../exec/exec-scan.ir -o %t/scan.so
# RUN: %fadc run %t/scan.so --task forward --print | FileCheck-14 %s
# CHECK:      cs: f32[5] = [1, 3, 6, 10, 15]
# CHECK-NEXT: rcs: f32[5] = [15, 14, 12, 9, 5]
# CHECK-NEXT: cp: f32[5] = [1, 2, 6, 24, 120]
# CHECK-NEXT: v: f32[2] = [6, 9]
# CHECK-NEXT: vs: f32[3, 2] = {{\[\[}}0, 1], [2, 4], [6, 9]]
# CHECK-NEXT: fibs: f32[6] = [0, 1, 1, 2, 3, 5]
# CHECK-NEXT: hs: f32[5] = [1, 4, 11, 26, 57]
# CHECK-NEXT: t: f32[] = 15
# CHECK-NEXT: sums: f32[3] = [1, 5, 9]
# RUN: %fadc check %S/../exec/exec-scan.ir --tasks forward
