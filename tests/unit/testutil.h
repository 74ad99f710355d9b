// tests/unit/testutil.h -- the check macros of the unit tests.
//
// A failed check prints file:line, the expression and the values, and the
// test goes on (so one run shows every failure); TU_DONE(name) prints
// "name: N checks passed" and gives main's exit status.
#ifndef FADC_TESTUTIL_H
#define FADC_TESTUTIL_H

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int tu_nfail, tu_ncheck;

// Equal within a relative tolerance (absolute below magnitude 1); NaN
// matches NaN and an infinity only itself.
static inline int
tu_near(double got, double want, double tol)
{
	if (isnan(want))
		return isnan(got);
	if (isinf(want) || isinf(got))
		return got == want;
	return fabs(got - want) <= tol * fmax(1.0, fabs(want));
}

// A check of ok, the expression `what` at file:line; gives ok.
static inline int
tu_check(int ok, const char *what, const char *file, int line)
{
	tu_ncheck++;
	if (!ok) {
		tu_nfail++;
		fprintf(stderr, "%s:%d: check failed: %s\n", file, line, what);
	}
	return ok;
}

// An expression: c's truth, so that a test may go on only where it held
// (if (CHECK(p != NULL)) ...).
#define CHECK(c) tu_check(!!(c), #c, __FILE__, __LINE__)

#define CHECK_NEAR(got, want, tol) \
	do { \
		double tu_g = (got), tu_w = (want); \
		tu_ncheck++; \
		if (!tu_near(tu_g, tu_w, (tol))) { \
			tu_nfail++; \
			fprintf(stderr, "%s:%d: %s = %.17g, want %s = %.17g (tol %g)\n", __FILE__, \
			        __LINE__, #got, tu_g, #want, tu_w, (double)(tol)); \
		} \
	} while (0)

// |got - want| relative to the larger of |got| and |want|, or to floor
// where both are below it (floor 1: absolute below magnitude 1).  NaN
// gives NaN, which no tolerance passes.
static inline double
tu_relerr(double got, double want, double floor)
{
	return fabs(got - want) / fmax(floor, fmax(fabs(got), fabs(want)));
}

// got and want within a relative tolerance of the larger magnitude of the
// two (relative down to the smallest doubles): for finite differences and
// other values of any scale.
#define CHECK_REL(got, want, tol) \
	do { \
		double tu_g = (got), tu_w = (want); \
		tu_ncheck++; \
		if (!(tu_relerr(tu_g, tu_w, 1e-300) <= (tol))) { \
			tu_nfail++; \
			fprintf(stderr, "%s:%d: %s = %.17g, want %s = %.17g (rel tol %g)\n", __FILE__, \
			        __LINE__, #got, tu_g, #want, tu_w, (double)(tol)); \
		} \
	} while (0)

// got and want within tol relative to the larger magnitude of the two,
// absolute below magnitude 1; `what` (a string) names the check.
#define CHECK_CLOSE(got, want, tol, what) \
	do { \
		double tu_g = (got), tu_w = (want); \
		tu_ncheck++; \
		if (!(tu_relerr(tu_g, tu_w, 1.0) <= (tol))) { \
			tu_nfail++; \
			fprintf(stderr, "%s:%d: %s: got %.17g want %.17g (tol %g)\n", __FILE__, __LINE__, \
			        (what), tu_g, tu_w, (double)(tol)); \
		} \
	} while (0)

// The n values got[0 .. ngot) against want[0 .. n), each tu_near within
// tol: one check, failing at the first element off (or a count that
// differs).  file and line are the caller's (for a test's own macro).
static inline void
tu_check_vec(const char *file, int line, const double *got, size_t ngot, const double *want,
             size_t n, double tol)
{
	tu_ncheck++;
	if (ngot != n) {
		tu_nfail++;
		fprintf(stderr, "%s:%d: tensor has %zu elements, want %zu\n", file, line, ngot, n);
		return;
	}
	for (size_t i = 0; i < n; i++)
		if (!tu_near(got[i], want[i], tol)) {
			tu_nfail++;
			fprintf(stderr, "%s:%d: element %zu = %.17g, want %.17g (tol %g)\n", file, line,
			        i, got[i], want[i], tol);
			return;
		}
}

#define CHECK_STR(got, want) \
	do { \
		const char *tu_g = (got), *tu_w = (want); \
		tu_ncheck++; \
		if (strcmp(tu_g, tu_w)) { \
			tu_nfail++; \
			fprintf(stderr, "%s:%d: %s = \"%s\", want \"%s\"\n", __FILE__, __LINE__, \
			        #got, tu_g, tu_w); \
		} \
	} while (0)

#define TU_DONE(name) \
	(tu_nfail ? (fprintf(stderr, "%s: %d of %d checks failed\n", name, tu_nfail, \
	                     tu_ncheck), \
	             1) \
	          : (printf("%s: %d checks passed\n", name, tu_ncheck), 0))

// The bytes of file path (malloc'ed, one byte more than *n so that a text
// can be terminated), or NULL with *n = 0 when it cannot be opened or read.
static inline unsigned char *
tu_slurp(const char *path, size_t *n)
{
	*n = 0;
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	long len = fseek(f, 0, SEEK_END) ? -1 : ftell(f);
	unsigned char *b = len >= 0 && !fseek(f, 0, SEEK_SET) ? malloc((size_t)len + 1) : NULL;
	if (b && fread(b, 1, (size_t)len, f) != (size_t)len) {
		free(b);
		b = NULL;
	}
	fclose(f);
	if (b)
		*n = (size_t)len;
	return b;
}

#endif
