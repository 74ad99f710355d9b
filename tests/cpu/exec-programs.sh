# The exec programs of tests/exec, compiled and compared with the
# interpreter (tools/fadc/harness.c): broadcasting, comparisons and where,
# floor division and modulo, slices, concat and pad, views and in-place
# writes (write-backs).  Tolerance: normalized error 1e-5 (f32).
#
# RUN: %fadc check %S/../exec/exec-broadcast.ir --tasks forward
# RUN: %fadc check %S/../exec/exec-compare-mixed.ir --tasks forward
# RUN: %fadc check %S/../exec/exec-compare-where.ir --tasks forward
# RUN: %fadc check %S/../exec/exec-floordiv-mod.ir --tasks forward
# RUN: %fadc check %S/../exec/exec-mutate-input.ir --tasks forward
# RUN: %fadc check %S/../exec/exec-slice-concat-pad.ir --tasks forward
# RUN: %fadc check %S/../exec/exec-views.ir --tasks forward
