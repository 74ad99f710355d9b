// tests/unit/mathref.h -- long-double references for digamma and trigamma,
// the unit of error (ulps of the exact value in the format, or of the
// largest term where the result is a difference: reflection) and the
// input sets, shared by the tests of the two implementations of the
// special functions: test_codegen_math.c (codegen/llvm_math.c's, run as
// compiled model code) and test_cuda_special.c (codegen/cuda_special.h's,
// compiled as host C).  test_codegen_math.c checks the references
// themselves against closed forms and against ir_polygamma.
#ifndef FADC_TEST_MATHREF_H
#define FADC_TEST_MATHREF_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const long double PI_L = 3.141592653589793238462643383279502884L;
static const long double X0_L = 1.461632144968362341262659542325721325L; // digamma's zero

// pi cot(pi a) for a > 0 not an integer: a = n/2 + r exactly, |r| <= 1/4.
static long double
picot_ref(long double a)
{
	long double n = rintl(2 * a), r = a - n / 2;
	long double s = sinl(PI_L * r), c = cosl(PI_L * r);
	return PI_L * (fmodl(n, 2) != 0 ? -s / c : c / s);
}

// digamma in long double: psi(x) = psi(x + k) - sum 1/(x + j) up to x + k
// >= 20, then log x - 1/(2x) - sum_{k=1}^{10} B_2k / (2k x^2k) (the next
// term is below 1e-25 of the sum); x < 0 by psi(x) = psi(a) + 1/a + pi
// cot(pi a), a = -x.
static long double
digamma_ref(long double x)
{
	static const long double b[10] = {1.0L / 6, -1.0L / 30, 1.0L / 42, -1.0L / 30, 5.0L / 66,
	                                  -691.0L / 2730, 7.0L / 6, -3617.0L / 510, 43867.0L / 798,
	                                  -174611.0L / 330};
	if (isnan(x))
		return x;
	if (x == 0)
		return copysignl(INFINITY, -x);
	if (x < 0) {
		if (x == floorl(x))
			return NAN;
		long double a = -x;
		return digamma_ref(a) + 1 / a + picot_ref(a);
	}
	if (isinf(x))
		return x;
	long double acc = 0;
	for (; x < 20; x += 1)
		acc -= 1 / x;
	long double z = 1 / (x * x), zk = z, s = 0;
	for (int k = 1; k <= 10; k++, zk *= z)
		s += b[k - 1] / (2 * k) * zk;
	return acc + logl(x) - 1 / (2 * x) - s;
}

// trigamma in long double: psi1(x) = sum 1/(x + j)^2 + psi1(x + k) up to x
// + k >= 20, then 1/x + 1/(2x^2) + sum_{k=1}^{10} B_2k / x^(2k+1); x < 0
// by psi1(x) = pi^2 / sin^2(pi a) - psi1(1 + a), a = -x.
static long double
trigamma_ref(long double x)
{
	static const long double b[10] = {1.0L / 6, -1.0L / 30, 1.0L / 42, -1.0L / 30, 5.0L / 66,
	                                  -691.0L / 2730, 7.0L / 6, -3617.0L / 510, 43867.0L / 798,
	                                  -174611.0L / 330};
	if (isnan(x))
		return x;
	if (x <= 0 && x == floorl(x))
		return isinf(x) ? NAN : INFINITY;
	if (x < 0) {
		long double a = -x, n = rintl(2 * a), r = a - n / 2;
		long double s = fmodl(n, 2) != 0 ? cosl(PI_L * r) : sinl(PI_L * r);
		return PI_L * PI_L / (s * s) - trigamma_ref(1 + a);
	}
	if (isinf(x))
		return 0;
	long double acc = 0;
	for (; x < 20; x += 1)
		acc += 1 / (x * x);
	long double w = 1 / x, w2 = w * w, wk = w2 * w, s = 0;
	for (int k = 1; k <= 10; k++, wk *= w2)
		s += b[k - 1] * wk;
	return acc + w + w2 / 2 + s;
}

// The magnitude whose ulp is the unit of error of digamma at x (0: the
// result's own).  x < 0 (reflection, psi(x) = psi(a) + 1/a + pi cot(pi a),
// a = -x): the largest of the three terms; around the positive zero x0
// (|x - x0| < 1/8), 1.
static long double
digamma_scale(long double x)
{
	if (x < 0 && x != floorl(x)) {
		long double a = -x;
		return fmaxl(fabsl(digamma_ref(a)), fmaxl(1 / a, fabsl(picot_ref(a))));
	}
	if (fabsl(x - X0_L) < 0.125L)
		return 1;
	return 0;
}

// trigamma: x < 0 (psi1(x) = pi^2 / sin^2(pi a) - psi1(1 + a)): the larger
// of the two terms.
static long double
trigamma_scale(long double x)
{
	if (x < 0 && x != floorl(x)) {
		long double t2 = trigamma_ref(1 - x);
		return fmaxl(t2, trigamma_ref(x) + t2);
	}
	return 0;
}

// Error of got against the exact r in ulps of the format (f64: 53 bits,
// else 24); INFINITY when a NaN, an infinity or a sign of zero is wrong.
static double
ulp_err(long double r, double got, int f64, long double sc)
{
	if (isnan(r))
		return isnan(got) ? 0 : INFINITY;
	double rr = f64 ? (double)r : (double)(float)r; // r rounded to the format
	if (isinf(rr) || isinf(got) || isnan(got))
		return got == rr ? 0 : INFINITY;
	if (r == 0)
		return got == 0 && signbit(got) == signbit((double)r) ? 0 : INFINITY;
	int p = f64 ? 53 : 24, emin = f64 ? -1022 : -126, ex;
	frexpl(fmaxl(fabsl(r), sc), &ex); // |r| in [2^(ex-1), 2^ex)
	long double ulp = ldexpl(1, (ex - 1 > emin ? ex - 1 : emin) - p + 1);
	return (double)(fabsl((long double)got - r) / ulp);
}

typedef struct Inputs {
	double *v;
	size_t n, cap;
} Inputs;

static void
add(Inputs *in, double x)
{
	if (in->n == in->cap) {
		in->cap = in->cap ? 2 * in->cap : 1 << 20;
		in->v = realloc(in->v, in->cap * sizeof *in->v);
	}
	in->v[in->n++] = x;
}

static void
grid(Inputs *in, double lo, double hi, int n)
{
	for (int i = 0; i <= n; i++)
		add(in, lo + (hi - lo) * i / n);
}

// x and its neighbours, k ulps each way in the format.
static void
around(Inputs *in, double x, int k, int f64)
{
	double a = x, b = x;
	add(in, x);
	for (int i = 0; i < k; i++) {
		a = f64 ? nextafter(a, -INFINITY) : nextafterf((float)a, -INFINITY);
		b = f64 ? nextafter(b, INFINITY) : nextafterf((float)b, INFINITY);
		add(in, a);
		add(in, b);
	}
}

// Every binade of both signs, denormals, infinities and NaNs: every 2^44 + 1st
// f64 bit pattern, or every 4093rd f32 one.
static void
sweep(Inputs *in, int f64)
{
	if (f64) {
		for (uint64_t i = 0; i < (1u << 20); i++) {
			uint64_t b = i * 0x100000000001ull;
			double x;
			memcpy(&x, &b, 8);
			add(in, x);
		}
	} else {
		for (uint64_t b = 0; b < (1ull << 32); b += 4093) {
			uint32_t b32 = (uint32_t)b;
			float x;
			memcpy(&x, &b32, 4);
			add(in, x);
		}
	}
}

#endif // FADC_TEST_MATHREF_H
