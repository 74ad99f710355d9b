# linear_sum_assignment on the CPU: a host kernel calling support/hungarian.c,
# the interpreter's solver (tests/cpu/assignment.ir).  The assignments are
# hand-derived; an invalid cost fails the task with its code (1: NaN or
# -inf in the cost, 2: infeasible), as the interpreter fails.
#
# RUN: %fadc %S/assignment.ir -o %t/a.so
# RUN: %fadc run %t/a.so --task forward --print | FileCheck-14 %s
# CHECK:      out0: i64[3] = [3, 2, 1]
# CHECK-NEXT: out1: i64[2] = [1, 0]
# CHECK-NEXT: out2: i64[3] = [0, 1, -1]
# CHECK-NEXT: out3: i64[3] = [1, 0, 2]
# RUN: %fadc check %S/assignment.ir --tasks forward
#
# RUN: %fadc %S/assignment.ir -D INF_ROW=1 -o %t/inf.so
# RUN: not %fadc run %t/inf.so --task forward --print 2>&1 | FileCheck-14 %s --check-prefix=INF
# INF: task 'forward' failed (code 2)
# RUN: not %fadc run %S/assignment.ir -D INF_ROW=1 --task forward --print 2>&1 | FileCheck-14 %s --check-prefix=INF-INTERP
# INF-INTERP: the cost matrix is infeasible
#
# RUN: %fadc %S/assignment.ir -D NEG_INF=1 -o %t/neg.so
# RUN: not %fadc run %t/neg.so --task forward --print 2>&1 | FileCheck-14 %s --check-prefix=NEG
# NEG: task 'forward' failed (code 1)
# RUN: not %fadc run %S/assignment.ir -D NEG_INF=1 --task forward --print 2>&1 | FileCheck-14 %s --check-prefix=NEG-INTERP
# NEG-INTERP: the cost matrix contains NaN or -inf
