# FADC_CPU_PROFILE=1 (runtime/pool.c): a report of the split kernels' time
# when the context is destroyed, at 2 threads and at 1 (a pool of one
# thread then exists, so that both runs time the same kernels), none
# without the variable; bench/cpu-profile-names.sh names each kernel from
# the artifact's local symbols.  tests/gpu/gemm.ir's forward has GEMMs
# large enough to be split.
#
# RUN: %fadc %S/../gpu/gemm.ir -o %t/gemm.so --tasks forward
# RUN: env FADC_CPU_PROFILE=1 %fadc run %t/gemm.so --task forward --num-threads 2 --out %t/o 2>&1 | %S/../../bench/cpu-profile-names.sh %t | FileCheck %s --check-prefix=TWO
# TWO: fadc: CPU profile, 2 threads: {{[0-9.]+}} ms in {{[1-9][0-9]*}} parallel kernel calls ({{[1-9][0-9]*}} kernels)
# TWO: {{ +[0-9.]+% +[0-9.]+ ms +[0-9]+ calls +[0-9]+ iterations  gemm.so\+0x[0-9a-f]+  forward\.k[0-9]+\..*chunk$}}
# RUN: env FADC_CPU_PROFILE=1 %fadc run %t/gemm.so --task forward --num-threads 1 --out %t/o 2>&1 | FileCheck %s --check-prefix=ONE
# ONE: fadc: CPU profile, 1 threads: {{[0-9.]+}} ms in {{[1-9][0-9]*}} parallel kernel calls
# RUN: env FADC_CPU_PROFILE=0 %fadc run %t/gemm.so --task forward --num-threads 2 --out %t/o 2>&1 | FileCheck %s --check-prefix=NONE --allow-empty
# NONE-NOT: CPU profile
