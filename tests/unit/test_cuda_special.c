// tests/unit/test_cuda_special.c -- the CUDA backend's digamma and trigamma
// (codegen/cuda_special.h: fadc_digammaf, fadc_trigammaf in float,
// fadc_digamma, fadc_trigamma in double), compiled here as host C from the
// very file cg_cuda_print prints into CUDA C, measured in ulps against the
// long-double references of tests/unit/mathref.h (digamma_ref,
// trigamma_ref: recurrence, asymptotic series to B_20, reflection; checked
// by test_codegen_math against closed forms and ir_polygamma).
//
// Host arithmetic as on the device: float is evaluated in float
// (FLT_EVAL_METHOD 0, asserted below), and tests/tests.cmake builds this
// file with -ffp-contract=off, so the only fused operations are the
// header's explicit fmaf/fma (NVRTC runs with --fmad=false).  The one
// difference left is the logarithm of digamma's asymptotic path (x >= 10):
// glibc's logf/log here, CUDA's there, both within 1 ulp.
//
// Inputs, as test_codegen_math's for these functions: a sweep of bit
// patterns over the whole format (every 4093rd f32, every 2^44 + 1st f64:
// every binade of both signs, denormals, infinities, NaNs), dense grids on
// [-12, 12], [0, 30], [-30, 30], [-1, 1] and near 0, and the special
// values, poles, zeros and thresholds one by one (±0, ±inf, NaN, the
// smallest denormal, the largest finite, 1 .. 11 (the recurrences'
// switches, 1, 2 and 10 above all), -1 .. -10, digamma's zero x0 and the
// negative zeros, the reflection's tiny-|x| switch, 2^23 / 2^52), each with
// 64 neighbours.  Bounds are test_codegen_math's: 4 ulp of the exact
// value in the format; x < 0 (reflection) 5 ulp of the largest term;
// |x - x0| < 1/8 also at most 2^-24 (2^-53) absolute.  A NaN must be a
// NaN, an infinity that infinity, a zero a zero of the right sign.
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "cuda_special.h"
#include "mathref.h"
#include "testutil.h"

#if !defined(FLT_EVAL_METHOD) || FLT_EVAL_METHOD != 0
#error "test_cuda_special needs float arithmetic in float (FLT_EVAL_METHOD 0)"
#endif

static const double BOUND = 4, BOUNDNEG = 5;

static Inputs
inputs(int f64)
{
	Inputs in = {0};
	sweep(&in, f64);
	grid(&in, -12, 12, 400000);
	grid(&in, 0, 30, 400000);
	grid(&in, -30, 30, 200000);
	grid(&in, -1, 1, 200000);
	grid(&in, -1e-6, 1e-6, 20000);
	grid(&in, 0, 1e-3, 20000);
	double special[] = {0, -0.0, INFINITY, -INFINITY, NAN, -NAN};
	for (size_t i = 0; i < sizeof special / sizeof *special; i++)
		add(&in, special[i]);
	double tiny = f64 ? 4.9406564584124654e-324 : FLT_TRUE_MIN;
	double minn = f64 ? DBL_MIN : FLT_MIN, maxf = f64 ? DBL_MAX : FLT_MAX;
	double edges[] = {tiny, -tiny, minn, -minn, maxf, -maxf, 0.5, -0.5, 1e-8, -1e-8, -20.5,
	                  1.4616321449683623, f64 ? 0x1p-70 : 0x1p-30, f64 ? -0x1p-70 : -0x1p-30,
	                  f64 ? 0x1p52 : 0x1p23, f64 ? -0x1p52 : -0x1p23, -2.4570247382208006,
	                  -2.7476826467274127, -0.5040830082644554, -1.5734984731623904, 1e6, 1e15};
	for (size_t i = 0; i < sizeof edges / sizeof *edges; i++)
		around(&in, edges[i], 64, f64);
	for (int k = 1; k <= 11; k++) { // the recurrences' switches, and the poles
		around(&in, k, 64, f64);
		around(&in, -k, 64, f64);
	}
	if (!f64)
		for (size_t i = 0; i < in.n; i++)
			in.v[i] = (float)in.v[i];
	return in;
}

static double
eval(int tri, int f64, double x)
{
	if (f64)
		return tri ? fadc_trigamma(x) : fadc_digamma(x);
	return tri ? fadc_trigammaf((float)x) : fadc_digammaf((float)x);
}

// Worst errors of one function in one format, printed; returns the number
// of results above the bounds.
static size_t
measure(const Inputs *in, int tri, int f64)
{
	const char *T = f64 ? "f64" : "f32", *name = tri ? "trigamma" : "digamma";
	double worst = 0, at = 0, got_at = 0, worstneg = 0, atneg = 0, absx0 = 0;
	size_t nbad = 0;
	for (size_t i = 0; i < in->n; i++) {
		double x = in->v[i], g = eval(tri, f64, x);
		long double r = tri ? trigamma_ref(x) : digamma_ref(x);
		double e = ulp_err(r, g, f64, tri ? trigamma_scale(x) : digamma_scale(x));
		int refl = x < 0;
		if (!tri && fabsl(x - X0_L) < 0.125L && isfinite(g))
			absx0 = fmax(absx0, (double)fabsl(g - r));
		if (!(e <= (refl ? BOUNDNEG : BOUND))) {
			if (nbad < 5)
				fprintf(stderr, "%s %s(%a) = %a, want %a: %.3g ulp\n", T, name, x, g, (double)r,
				        e);
			nbad++;
		}
		if (refl && (e > worstneg || isnan(e))) {
			worstneg = e;
			atneg = x;
		} else if (!refl && (e > worst || isnan(e))) {
			worst = e;
			at = x;
			got_at = g;
		}
	}
	printf("%s %-8s: x < 0, max error %.3f ulp of the largest term at x = %a\n", T, name,
	       worstneg, atneg);
	if (!tri) {
		printf("%s %-8s: |x - x0| < 1/8, max absolute error %.3g\n", T, name, absx0);
		CHECK(absx0 <= (f64 ? 0x1p-53 : 0x1p-24));
	}
	printf("%s %-8s: %zu inputs, max error %.3f ulp at x = %a (got %a, want %a)\n", T, name,
	       in->n, worst, at, got_at, (double)(tri ? trigamma_ref(at) : digamma_ref(at)));
	return nbad;
}

// The special values one by one, exactly (ulp_err checks them too; these
// name the case that fails).
static void
check_special_values(void)
{
	CHECK(fadc_digammaf(0.0f) == -INFINITY && fadc_digamma(0.0) == -INFINITY);
	CHECK(fadc_digammaf(-0.0f) == INFINITY && fadc_digamma(-0.0) == INFINITY);
	CHECK(fadc_digammaf(INFINITY) == INFINITY && fadc_digamma(INFINITY) == INFINITY);
	CHECK(isnan(fadc_digammaf(-INFINITY)) && isnan(fadc_digamma(-INFINITY)));
	CHECK(isnan(fadc_digammaf(-3.0f)) && isnan(fadc_digamma(-3.0)));
	CHECK(isnan(fadc_digammaf(NAN)) && isnan(fadc_digamma(NAN)));
	CHECK(fadc_trigammaf(0.0f) == INFINITY && fadc_trigamma(-0.0) == INFINITY);
	CHECK(fadc_trigammaf(-3.0f) == INFINITY && fadc_trigamma(-3.0) == INFINITY);
	CHECK(isnan(fadc_trigammaf(-INFINITY)) && isnan(fadc_trigamma(-INFINITY)));
	CHECK(isnan(fadc_trigammaf(NAN)) && isnan(fadc_trigamma(NAN)));
	float t = fadc_trigammaf(INFINITY);
	double td = fadc_trigamma(INFINITY);
	CHECK(t == 0 && !signbit(t) && td == 0 && !signbit(td));
	// psi(1) = -gamma, psi1(1) = pi^2/6, each to the format's rounding.
	CHECK(fabs(fadc_digammaf(1.0f) - (float)-0.5772156649015329) <= 0x1p-24);
	CHECK(fabs(fadc_digamma(1.0) - -0.5772156649015329) <= 0x1p-52);
	CHECK(fabs(fadc_trigammaf(1.0f) - (float)1.6449340668482264) <= 0x1p-22);
	CHECK(fabs(fadc_trigamma(1.0) - 1.6449340668482264) <= 0x1p-51);
}

int
main(void)
{
	check_special_values();
	for (int f64 = 0; f64 < 2; f64++) {
		Inputs in = inputs(f64);
		for (int tri = 0; tri < 2; tri++) {
			size_t nbad = measure(&in, tri, f64);
			CHECK(nbad == 0);
			if (nbad)
				fprintf(stderr, "%s %s: %zu results above the bound\n", f64 ? "f64" : "f32",
				        tri ? "trigamma" : "digamma", nbad);
		}
		free(in.v);
	}
	return TU_DONE("test_cuda_special");
}
