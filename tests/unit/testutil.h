// tests/unit/testutil.h -- the check macros of the unit tests.
//
// A failed check prints file:line, the expression and the values, and the
// test goes on (so one run shows every failure); TU_DONE(name) prints
// "name: N checks passed" and gives main's exit status.
#ifndef FADC_TESTUTIL_H
#define FADC_TESTUTIL_H

#include <math.h>
#include <stdio.h>
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

#define CHECK(c) \
	do { \
		tu_ncheck++; \
		if (!(c)) { \
			tu_nfail++; \
			fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #c); \
		} \
	} while (0)

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

#endif
