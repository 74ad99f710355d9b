# Compiling the same model twice gives byte-identical artifacts (the
# descriptor, the code and the link are functions of the input alone);
# another size gives another artifact.
#
# RUN: %fadc %S/../../models/ppl_robust_reg.ir -o %t/a.so --tasks all
# RUN: %fadc %S/../../models/ppl_robust_reg.ir -o %t/b.so --tasks all
# RUN: cmp %t/a.so %t/b.so
# RUN: %fadc %S/../../models/ppl_simple_reg.ir -o %t/c.so -D N=3 -D K=2 -O3
# RUN: %fadc %S/../../models/ppl_simple_reg.ir -o %t/d.so -D N=3 -D K=2 -O3
# RUN: cmp %t/c.so %t/d.so
# RUN: %fadc %S/../../models/ppl_simple_reg.ir -o %t/e.so -D N=4 -D K=2 -O3
# RUN: not cmp -s %t/c.so %t/e.so
