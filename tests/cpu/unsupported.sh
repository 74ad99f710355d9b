# An op the CPU backend does not support yet is a diagnostic naming the
# op, the task and the source position, and no file is written.
#
# RUN: not %fadc %S/../exec/exec-scan.ir -o %t/scan.so 2>&1 | FileCheck-14 %s
# CHECK: exec-scan.ir:{{[0-9]+}}:{{[0-9]+}}: error: task 'forward': op 'scan' is not supported by the CPU backend yet
# RUN: test ! -e %t/scan.so
