# A damaged artifact is an error message, never a crash: a flipped byte in
# the code, a truncated file, a newer CPU than the host has (faked with
# FADC_CPU_FEATURES), a file that is not an artifact.
#
# RUN: %fadc %S/../../models/ppl_simple_reg.ir -o %t/m.so -D N=3 -D K=2
# RUN: cp %t/m.so %t/flip.so && printf 'XXXX' | dd of=%t/flip.so bs=1 seek=4000 conv=notrunc 2>/dev/null
# RUN: not %fadc run %t/flip.so --task forward --print 2>&1 | FileCheck-14 --check-prefix=FLIP %s
# FLIP: flip.so: error: corrupt artifact: checksum mismatch
#
# RUN: head -c 5000 %t/m.so > %t/cut.so
# RUN: not %fadc inspect %t/cut.so 2>&1 | FileCheck-14 --check-prefix=CUT %s
# CUT: cut.so: error: not a fadc artifact (no descriptor trailer: truncated, or not written by fadc)
#
# RUN: cp %s %t/text.so
# RUN: not %fadc run %t/text.so --task forward --print 2>&1 | FileCheck-14 --check-prefix=NOT %s
# NOT: text.so: error: not a fadc artifact
#
# RUN: FADC_CPU_FEATURES=sse2,sse3 not %fadc run %t/m.so --task forward --print 2>&1 | FileCheck-14 --check-prefix=CPU %s
# CPU: m.so: error: compiled for --cpu x86-64-v3: this CPU lacks features the artifact's code needs: {{.*}}avx2
#
# RUN: %fadc %S/../../models/ppl_simple_reg.ir -o %t/old.so -D N=3 -D K=2 --cpu x86-64
# RUN: FADC_CPU_FEATURES=sse2 %fadc run %t/old.so --task forward --print | FileCheck-14 --check-prefix=OLD %s
# OLD: out: f32[] = -
