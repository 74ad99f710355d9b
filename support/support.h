// support/support.h -- the leaf library every layer shares: the Philox
// samplers (random.c), polygamma (special.c) and the linear assignment
// solver (hungarian.c), plus the functions generated code calls by name
// (support.c).
//
// One source for the interpreter, the runtime and compiled code: the
// interpreter (ir/interp.c) and the runtime's CUDA host steps call these
// directly, and every model.so links the same files (libfadc_support.a), so
// compiled code and the oracle draw the same numbers and return the same
// assignments, to the bit.  It depends on libm only, and declares nothing
// of the IR (whose Node is not the runtime's), so that any layer can
// include it.  The names keep their historical ir_ prefix: compiled code
// calls them by name.
#ifndef FADC_SUPPORT_H
#define FADC_SUPPORT_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

// ---------------------------------------------------------------- msg.c
// The one formatter of messages into a caller's buffer: a message longer
// than errlen keeps its beginning and its end (where the reason is) with
// " [...] " between them.  In the tools' build only (fadc_support_host).
void sup_vmsg(char *err, size_t errlen, const char *fmt, va_list ap);
#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
void sup_msg(char *err, size_t errlen, const char *fmt, ...);

// ---------------------------------------------------------------- random.c
// Philox4x32-10 (Salmon et al., SC'11): a counter-based generator, so that
// every backend draws identical numbers for the same (key, counter).
void ir_philox(const uint32_t key[2], const uint32_t ctr[4], uint32_t out[4]);
// The samplers, one element at a time; `index` is the element's flat index.
// They are functions of (seed, runseed, index) only.
double ir_rand_uniform(uint64_t seed, uint64_t runseed, uint64_t index); // [0, 1)
double ir_rand_normal(uint64_t seed, uint64_t runseed, uint64_t index); // N(0, 1)
double ir_rand_gamma(uint64_t seed, uint64_t runseed, uint64_t index, double alpha); // rate 1
// The seed of a stream named by an input: FNV-1a(name) ^ FNV-1a(salt).  v of
// the tasks is ir_rand_uniform(ir_rand_name_key(name, "v"), runseed, i).
uint64_t ir_rand_name_key(const char *name, const char *salt);

// ---------------------------------------------------------------- special.c
// psi^(n)(x), the n-th derivative of digamma (n = 0: digamma), n a float
// holding an integer 0..120 (else NaN); PyTorch's conventions at the poles.
double ir_polygamma(double n, double x);

// ---------------------------------------------------------------- hungarian.c
// scipy.optimize.linear_sum_assignment as "the column of each row":
// cost[i * cols + j] is row-major (rows, cols); col[i] gets row i's column,
// or -1 when rows > cols leaves it unassigned.  work is scratch memory of
// ir_assignment_work(rows, cols) bytes, 8-byte aligned (no allocation).
// Returns 1, or 0 when the cost holds NaN or -inf, -1 when it is
// infeasible (+inf is a forbidden pair and no finite assignment exists).
size_t ir_assignment_work(int64_t rows, int64_t cols);
int ir_assignment(const double *cost, int64_t rows, int64_t cols, int64_t *col, void *work);

#endif
