// codegen/cuda_special.h -- digamma and trigamma (polygamma of orders 0 and
// 1) for the CUDA backend, in f32 and f64: codegen/llvm.c's m_sincospi,
// m_digamma and m_trigamma ("---- erf, lgamma, digamma, trigamma", which
// explains the algorithms) written as C, with the same coefficients, the
// same special cases and the same operations: fmaf/fma where llvm.c has
// mfma (llvm.fmuladd, fused on both targets), a select where it has msel.
// Branch-free (the paths are selected, not branched to), no local arrays.
//
// The one copy of this code serves twice:
// - cg_cuda_print (codegen/cuda.c) prints this whole file, verbatim, into
//   a task's CUDA C when the task has a polygamma of constant order 0 or 1
//   in f32 or f64; CMake embeds it as the string cg_cuda_special_text
//   (cmake/embed.cmake).  Under NVRTC (__CUDACC__) FADC_DEV is
//   `static __device__`; kernels are compiled with --fmad=false, so the
//   only fused operations are the fmaf/fma written here.
// - tests/unit/test_cuda_special.c includes it as host C (FADC_DEV is
//   `static`, built with -ffp-contract=off) and measures it in ulps
//   against long-double references.  The host's logf/log stand in for
//   CUDA's there (both correctly rounded to within 1 ulp).
#ifndef FADC_CUDA_SPECIAL_H
#define FADC_CUDA_SPECIAL_H

#ifdef __CUDACC__
#define FADC_DEV static __device__
#define FADC_INFF __int_as_float(0x7f800000)
#define FADC_NANF __int_as_float(0x7fc00000)
#define FADC_INF __longlong_as_double(0x7ff0000000000000LL)
#define FADC_NAN __longlong_as_double(0x7ff8000000000000LL)
#else
#include <math.h>
#define FADC_DEV static
#define FADC_INFF INFINITY
#define FADC_NANF NAN
#define FADC_INF ((double)INFINITY)
#define FADC_NAN ((double)NAN)
#endif

// ---- f32

// sin(pi r) / pi and cos(pi r) of a >= 0 reduced by halves, n = rint(2a),
// r = a - n/2 (exact), and whether n is odd (then sin(pi a) = ±cos(pi r)).
FADC_DEV void
fadc_sincospif(float a, float *sp, float *cp, int *odd)
{
	float ac = a > 0x1p23f ? 0x1p23f : a; // every float above is an integer
	ac = ac != ac ? 0.0f : ac; // NaN: selected away by the callers
	float n = rintf(ac + ac);
	float r = fmaf(n, -0.5f, ac), z = r * r;
	float u = 0.025781752541661263f;
	u = fmaf(u, z, -0.1907317191362381f);
	u = fmaf(u, z, 0.81174194812774658f);
	u = fmaf(u, z, -1.6449340581893921f);
	u = fmaf(u, z, 1.0f);
	float c = 0.23126046359539032f;
	c = fmaf(c, z, -1.3350358009338379f);
	c = fmaf(c, z, 4.0587067604064941f);
	c = fmaf(c, z, -4.9348020553588867f);
	c = fmaf(c, z, 1.0f);
	*sp = r * u;
	*cp = c;
	*odd = (int)n & 1;
}

FADC_DEV float
fadc_digammaf(float x)
{
	float a = fabsf(x), fa = floorf(a);
	int neg = x < 0, tiny = neg && a < 0x1p-30f;
	// x < 0: psi(1 + a) + pi cot(pi a), the positive path run on v = 1 + a
	// (tiny a: psi(1 + a) + 1/a).
	float v = neg ? a + 1.0f : a;
	float t = (v - floorf(v)) - 0.5f;
	float d = (t - (float)-0.038367855031637657) - (float)-1.6445603550442201e-18;
	int small = v < 1.0f, large = v >= 10.0f, sl = small || large;
	// q = 1/v, 1/a or the sum over j = 1 .. floor(v) - 1 of 1/(v - j) as two
	// fractions num/den of four terms each.
	float num0 = sl || tiny ? 1.0f : 0.0f, den0 = sl ? v : tiny ? a : 1.0f;
	float num1 = 0.0f, den1 = 1.0f;
	for (int j = 1; j <= 4; j++) {
		int inc = v >= (float)(j + 1) && !large;
		float fj = inc ? v - (float)j : 1.0f;
		num0 = fmaf(num0, fj, inc ? den0 : 0.0f);
		den0 = den0 * fj;
	}
	for (int j = 5; j <= 8; j++) {
		int inc = v >= (float)(j + 1) && !large;
		float fj = inc ? v - (float)j : 1.0f;
		num1 = fmaf(num1, fj, inc ? den1 : 0.0f);
		den1 = den1 * fj;
	}
	float q = num0 / den0 + num1 / den1, z = q * q;
	float e = 0.01079188846051693f;
	e = fmaf(e, t, -0.016365295276045799f);
	e = fmaf(e, t, 0.017183676362037659f);
	e = fmaf(e, t, -0.025791538879275322f);
	e = fmaf(e, t, 0.040835142135620117f);
	e = fmaf(e, t, -0.062055114656686783f);
	e = fmaf(e, t, 0.094985999166965485f);
	e = fmaf(e, t, -0.14839892089366913f);
	e = fmaf(e, t, 0.24054250121116638f);
	e = fmaf(e, t, -0.42362749576568604f);
	e = fmaf(e, t, 0.95105588436126709f);
	// B_2k / 2k, k = 4 .. 1
	float asy = (float)(-1.0 / 240);
	asy = fmaf(asy, z, (float)(1.0 / 252));
	asy = fmaf(asy, z, (float)(-1.0 / 120));
	asy = fmaf(asy, z, (float)(1.0 / 12));
	float base = d * e;
	asy = fmaf(q, -0.5f, logf(v)) - z * asy;
	float r = large ? asy : base + q;
	r = small ? base - q : r;
	// pi cot(pi a): cp / sp, or -pi^2 sp / cp
	float sp, cp;
	int odd;
	fadc_sincospif(a, &sp, &cp, &odd);
	float cn = odd ? (float)-9.86960440108935861883 * sp : cp, cd = odd ? cp : sp;
	float rn = r + cn / cd;
	r = neg && !tiny ? rn : r;
	// +0: -inf, -0: +inf, negative integers and -inf: NaN
	int pole = x <= 0.0f && a == fa;
	r = pole ? (x == 0.0f ? copysignf(FADC_INFF, -x) : FADC_NANF) : r;
	return x != x ? x : r;
}

FADC_DEV float
fadc_trigammaf(float x)
{
	float a = fabsf(x);
	int neg = x < 0;
	// x > 0: n = ceil(10 - v) steps up to v + n >= 10, then the asymptotic
	// series; x < 0: pi^2 / sin^2(pi a) - psi1(1 + a).
	float v = neg ? a + 1.0f : a;
	float n = ceilf(10.0f - v);
	n = n > 0.0f ? n : 0.0f;
	n = n != n ? 0.0f : n; // NaN: selected away at the end
	float q = 1.0f / v; // squared: v^2 may be denormal where 1/v^2 is finite
	q = v < 10.0f ? q * q : 0.0f;
	float num0 = 0.0f, den0 = 1.0f, num1 = 0.0f, den1 = 1.0f;
	for (int j = 1; j <= 4; j++) {
		int inc = n > (float)j;
		float fj = v + (float)j;
		fj = inc ? fj * fj : 1.0f;
		num0 = fmaf(num0, fj, inc ? den0 : 0.0f);
		den0 = den0 * fj;
	}
	for (int j = 5; j <= 9; j++) {
		int inc = n > (float)j;
		float fj = v + (float)j;
		fj = inc ? fj * fj : 1.0f;
		num1 = fmaf(num1, fj, inc ? den1 : 0.0f);
		den1 = den1 * fj;
	}
	q = q + (num0 / den0 + num1 / den1);
	float w = 1.0f / (v + n), ww = w * w;
	// B_8 .. B_2
	float p = (float)(-1.0 / 30);
	p = fmaf(p, ww, (float)(1.0 / 42));
	p = fmaf(p, ww, (float)(-1.0 / 30));
	p = fmaf(p, ww, (float)(1.0 / 6));
	// w + w^2 (1/2 + w p)
	float pos = q + fmaf(ww, fmaf(w, p, 0.5f), w);
	float sp, cp;
	int odd;
	fadc_sincospif(a, &sp, &cp, &odd);
	// pi^2 / sin^2(pi a): 1 / sp^2 or pi^2 / cp^2
	float s = odd ? cp : sp, pn = odd ? (float)9.86960440108935861883 : 1.0f;
	float r = neg ? pn / (s * s) - pos : pos;
	// 0 and negative integers: +inf; -inf: NaN
	int pole = x <= 0.0f && a == floorf(a);
	r = pole ? (a == FADC_INFF ? FADC_NANF : FADC_INFF) : r;
	return x != x ? x : r;
}

// ---- f64: the same, with llvm.c's f64 polynomials and thresholds

FADC_DEV void
fadc_sincospi(double a, double *sp, double *cp, int *odd)
{
	double ac = a > 0x1p52 ? 0x1p52 : a;
	ac = ac != ac ? 0.0 : ac;
	double n = rint(ac + ac);
	double r = fma(n, -0.5, ac), z = r * r;
	double u = 2.5106928461534935e-07;
	u = fma(u, z, -6.9756326574080843e-06);
	u = fma(u, z, 0.00014842877775336568);
	u = fma(u, z, -0.0023460810348909108);
	u = fma(u, z, 0.026147847817642522);
	u = fma(u, z, -0.19075182412208405);
	u = fma(u, z, 0.81174242528335361);
	u = fma(u, z, -1.6449340668482264);
	u = fma(u, z, 1.0);
	double c = 4.2638295948444962e-06;
	c = fma(c, z, -0.0001046334632329678);
	c = fma(c, z, 0.0019295740126589096);
	c = fma(c, z, -0.025806891378934115);
	c = fma(c, z, 0.2353306303586496);
	c = fma(c, z, -1.3352627688545864);
	c = fma(c, z, 4.0587121264167685);
	c = fma(c, z, -4.934802200544679);
	c = fma(c, z, 1.0);
	*sp = r * u;
	*cp = c;
	*odd = (int)((long long)n & 1);
}

FADC_DEV double
fadc_digamma(double x)
{
	double a = fabs(x), fa = floor(a);
	int neg = x < 0, tiny = neg && a < 0x1p-70;
	double v = neg ? a + 1.0 : a;
	double t = (v - floor(v)) - 0.5;
	double d = (t - -0.038367855031637657) - -1.6445603550442201e-18;
	int small = v < 1.0, large = v >= 10.0, sl = small || large;
	double num0 = sl || tiny ? 1.0 : 0.0, den0 = sl ? v : tiny ? a : 1.0;
	double num1 = 0.0, den1 = 1.0;
	for (int j = 1; j <= 4; j++) {
		int inc = v >= (double)(j + 1) && !large;
		double fj = inc ? v - (double)j : 1.0;
		num0 = fma(num0, fj, inc ? den0 : 0.0);
		den0 = den0 * fj;
	}
	for (int j = 5; j <= 8; j++) {
		int inc = v >= (double)(j + 1) && !large;
		double fj = inc ? v - (double)j : 1.0;
		num1 = fma(num1, fj, inc ? den1 : 0.0);
		den1 = den1 * fj;
	}
	double q = num0 / den0 + num1 / den1, z = q * q;
	double e = 0.00011760657164236826;
	e = fma(e, t, -0.00017812816199980528);
	e = fma(e, t, 9.8188931848368965e-05);
	e = fma(e, t, -0.00014492516861014685);
	e = fma(e, t, 0.00032298185949129071);
	e = fma(e, t, -0.00048588379018547093);
	e = fma(e, t, 0.00069125226445515108);
	e = fma(e, t, -0.0010364793837654342);
	e = fma(e, t, 0.0015633018770457392);
	e = fma(e, t, -0.0023454907194339143);
	e = fma(e, t, 0.0035181155851796578);
	e = fma(e, t, -0.00527993774357225);
	e = fma(e, t, 0.0079270210260173873);
	e = fma(e, t, -0.011908220068846656);
	e = fma(e, t, 0.01790724835834023);
	e = fma(e, t, -0.02697579666148241);
	e = fma(e, t, 0.040760833939573589);
	e = fma(e, t, -0.061922133275445775);
	e = fma(e, t, 0.094988724452910595);
	e = fma(e, t, -0.14840492305388139);
	e = fma(e, t, 0.24054248424078686);
	e = fma(e, t, -0.42362742128146058);
	e = fma(e, t, 0.95105587603183284);
	// B_2k / 2k, k = 8 .. 1
	double asy = -3617.0 / 8160;
	asy = fma(asy, z, 1.0 / 12);
	asy = fma(asy, z, -691.0 / 32760);
	asy = fma(asy, z, 1.0 / 132);
	asy = fma(asy, z, -1.0 / 240);
	asy = fma(asy, z, 1.0 / 252);
	asy = fma(asy, z, -1.0 / 120);
	asy = fma(asy, z, 1.0 / 12);
	double base = d * e;
	asy = fma(q, -0.5, log(v)) - z * asy;
	double r = large ? asy : base + q;
	r = small ? base - q : r;
	double sp, cp;
	int odd;
	fadc_sincospi(a, &sp, &cp, &odd);
	double cn = odd ? -9.86960440108935861883 * sp : cp, cd = odd ? cp : sp;
	double rn = r + cn / cd;
	r = neg && !tiny ? rn : r;
	int pole = x <= 0.0 && a == fa;
	r = pole ? (x == 0.0 ? copysign(FADC_INF, -x) : FADC_NAN) : r;
	return x != x ? x : r;
}

FADC_DEV double
fadc_trigamma(double x)
{
	double a = fabs(x);
	int neg = x < 0;
	double v = neg ? a + 1.0 : a;
	double n = ceil(10.0 - v);
	n = n > 0.0 ? n : 0.0;
	n = n != n ? 0.0 : n;
	double q = 1.0 / v;
	q = v < 10.0 ? q * q : 0.0;
	double num0 = 0.0, den0 = 1.0, num1 = 0.0, den1 = 1.0;
	for (int j = 1; j <= 4; j++) {
		int inc = n > (double)j;
		double fj = v + (double)j;
		fj = inc ? fj * fj : 1.0;
		num0 = fma(num0, fj, inc ? den0 : 0.0);
		den0 = den0 * fj;
	}
	for (int j = 5; j <= 9; j++) {
		int inc = n > (double)j;
		double fj = v + (double)j;
		fj = inc ? fj * fj : 1.0;
		num1 = fma(num1, fj, inc ? den1 : 0.0);
		den1 = den1 * fj;
	}
	q = q + (num0 / den0 + num1 / den1);
	double w = 1.0 / (v + n), ww = w * w;
	// B_20 .. B_2
	double p = -174611.0 / 330;
	p = fma(p, ww, 43867.0 / 798);
	p = fma(p, ww, -3617.0 / 510);
	p = fma(p, ww, 7.0 / 6);
	p = fma(p, ww, -691.0 / 2730);
	p = fma(p, ww, 5.0 / 66);
	p = fma(p, ww, -1.0 / 30);
	p = fma(p, ww, 1.0 / 42);
	p = fma(p, ww, -1.0 / 30);
	p = fma(p, ww, 1.0 / 6);
	double pos = q + fma(ww, fma(w, p, 0.5), w);
	double sp, cp;
	int odd;
	fadc_sincospi(a, &sp, &cp, &odd);
	double s = odd ? cp : sp, pn = odd ? 9.86960440108935861883 : 1.0;
	double r = neg ? pn / (s * s) - pos : pos;
	int pole = x <= 0.0 && a == floor(a);
	r = pole ? (a == FADC_INF ? FADC_NAN : FADC_INF) : r;
	return x != x ? x : r;
}

#endif // FADC_CUDA_SPECIAL_H
