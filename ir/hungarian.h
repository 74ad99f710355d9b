// ir/hungarian.h -- the one linear_sum_assignment solver (ir/hungarian.c),
// used by the interpreter, the CPU host kernel and the CUDA runtime's host
// step.  Its own header so that the runtime can declare it without ir.h
// (whose Node is not the runtime's).
#ifndef FADC_IR_HUNGARIAN_H
#define FADC_IR_HUNGARIAN_H

#include <stddef.h>
#include <stdint.h>

// scipy.optimize.linear_sum_assignment as "the column of each row":
// cost[i * cols + j] is row-major (rows, cols); col[i] gets row i's column,
// or -1 when rows > cols leaves it unassigned.  work is scratch memory of
// ir_assignment_work(rows, cols) bytes, 8-byte aligned (no allocation).
// Returns 1, or 0 when the cost holds NaN or -inf, -1 when it is
// infeasible (+inf is a forbidden pair and no finite assignment exists).
size_t ir_assignment_work(int64_t rows, int64_t cols);
int ir_assignment(const double *cost, int64_t rows, int64_t cols, int64_t *col, void *work);

#endif
