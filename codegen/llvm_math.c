// codegen/llvm_math.c -- the LLVM backend's vector math library, which the
// emitter (llvm.c) calls through llvm_math_fn.
//
// exp, log, log1p, expm1, tanh, erf, lgamma, digamma and trigamma in f32
// and f64 are emitted as IR, not called from libm or the support library
// (erf .. trigamma after the first five, below): a call to expf in a loop
// body keeps the loop scalar (LLVM 14's C API has no way to name a vector
// math library), while straight-line arithmetic, selects, bit casts and
// the intrinsics rint, floor, ceil, fmuladd, fabs and copysign vectorize.
// Each is an internal alwaysinline
// function, emitted once per module and dtype (llvm_math_fn), that the inliner
// folds into the kernels before the loop vectorizer runs.  No branches:
// special inputs (NaN, infinities, zero, negative, overflow, underflow) are
// selects on the final value, and denormals are scaled into range first.
// They are used only where the loop vectorizes (Emit.vecmath: elementwise
// kernels, the terms of emit_split_sum); in a scalar loop glibc's scalar
// code has the shorter latency and stays.
//
// exp(x) (Cody-Waite, Cephes): n = rint(x log2 e), r = x - n C1 - n C2
//   with C1 + C2 = ln 2 and n C1 exact, |r| <= ln2/2 (a little more from
//   the rounding of x log2 e); exp(r) by Cephes' degree-7 polynomial (f32)
//   or Pade form 1 + 2 r P(r^2) / (Q(r^2) - r P(r^2)) (f64); times 2^n as
//   2^floor(n/2) 2^(n - floor(n/2)), two normal factors, so results down
//   to the smallest denormal round once.  x above ln(max) is +inf, below
//   ln(smallest denormal / 2) is 0.
// log(x) (fdlibm / musl): x = 2^k m with m in [sqrt(2)/2, sqrt(2)) by
//   integer arithmetic on the bits (denormals scaled by 2^25 / 2^54 first),
//   f = m - 1, s = f / (2 + f), log(1 + f) = f - hfsq + s (hfsq + R(s^2)),
//   hfsq = f^2/2, R fdlibm's minimax polynomial, plus k ln2 in two parts.
// log1p(x) = log(u) - ((u - 1) - x) / u with u = 1 + x: the second term
//   is the rounding error of u (exact for |x| < 1: Sterbenz), divided by
//   u, the first-order correction of the logarithm.
// expm1(x) (Kahan): u = exp(x); x when u == 1, else (u - 1) (x / log(u)):
//   the rounding error of u cancels between u - 1 and log(u).
// tanh(x): |x| < 0.625: x + x z P(z), z = x^2 (Cephes: a polynomial in
//   f32, a rational function in f64); above, sign(x) (1 - 2 / (e^2|x| + 1)).
// Accuracy against libm in long double, over dense sweeps of every binade
// and the special values (tests/unit/test_codegen_math.c): see the table
// in docs/CODEGEN.md.
#include <math.h>
#include <stdio.h>

#include "llvm_impl.h"

typedef struct Mb {
	Emit *e;
	LLVMTypeRef t, it; // the float type and the integer type of its bits
	int d; // 1: f64
} Mb;

static LLVMValueRef
mk(Mb *m, double v)
{
	return LLVMConstReal(m->t, v);
}

static LLVMValueRef
mki(Mb *m, int64_t v)
{
	return LLVMConstInt(m->it, (unsigned long long)v, 1);
}

static LLVMValueRef
madd(Mb *m, LLVMValueRef a, LLVMValueRef b)
{
	return LLVMBuildFAdd(m->e->B, a, b, "");
}

static LLVMValueRef
msub(Mb *m, LLVMValueRef a, LLVMValueRef b)
{
	return LLVMBuildFSub(m->e->B, a, b, "");
}

static LLVMValueRef
mmul(Mb *m, LLVMValueRef a, LLVMValueRef b)
{
	return LLVMBuildFMul(m->e->B, a, b, "");
}

static LLVMValueRef
mdiv(Mb *m, LLVMValueRef a, LLVMValueRef b)
{
	return LLVMBuildFDiv(m->e->B, a, b, "");
}

// a b + c, fused where the target has FMA.
static LLVMValueRef
mfma(Mb *m, LLVMValueRef a, LLVMValueRef b, LLVMValueRef c)
{
	LLVMValueRef args[3] = {a, b, c};
	return intrinsic(m->e, "llvm.fmuladd", m->t, args, 3);
}

// c[0] x^(n-1) + ... + c[n-1], Horner.
static LLVMValueRef
mpoly(Mb *m, LLVMValueRef x, const double *c, int n)
{
	LLVMValueRef r = mk(m, c[0]);
	for (int i = 1; i < n; i++)
		r = mfma(m, r, x, mk(m, c[i]));
	return r;
}

// (a pred b) ? t : f
static LLVMValueRef
msel(Mb *m, LLVMRealPredicate pr, LLVMValueRef a, LLVMValueRef b, LLVMValueRef t, LLVMValueRef f)
{
	return LLVMBuildSelect(m->e->B, LLVMBuildFCmp(m->e->B, pr, a, b, ""), t, f, "");
}

static LLVMValueRef
mbits(Mb *m, LLVMValueRef x)
{
	return LLVMBuildBitCast(m->e->B, x, m->it, "");
}

static LLVMValueRef
mfloat(Mb *m, LLVMValueRef i)
{
	return LLVMBuildBitCast(m->e->B, i, m->t, "");
}

// 2^n for an integer n in the normal range.
static LLVMValueRef
mpow2(Mb *m, LLVMValueRef n)
{
	LLVMValueRef b = LLVMBuildAdd(m->e->B, n, mki(m, m->d ? 1023 : 127), "");
	return mfloat(m, LLVMBuildShl(m->e->B, b, mki(m, m->d ? 52 : 23), ""));
}

static LLVMValueRef
m_exp(Mb *m, LLVMValueRef x)
{
	LLVMBuilderRef B = m->e->B;
	// Above hi the result overflows, below lo it rounds to 0.
	double hi = m->d ? 709.782712893383996843 : 88.72283905206835;
	double lo = m->d ? -745.13321910194110842 : -103.972077083991796;
	LLVMValueRef xc = msel(m, LLVMRealOGT, x, mk(m, hi), mk(m, hi), x);
	xc = msel(m, LLVMRealOLT, xc, mk(m, lo), mk(m, lo), xc);
	xc = msel(m, LLVMRealUNO, x, x, mk(m, 0), xc); // NaN: any finite value, selected away
	LLVMValueRef n = intrinsic1(m->e, "llvm.rint", m->t, mmul(m, xc, mk(m, 1.44269504088896340736)));
	LLVMValueRef r;
	if (m->d) {
		r = mfma(m, n, mk(m, -6.93145751953125E-1), xc);
		r = mfma(m, n, mk(m, -1.42860682030941723212E-6), r);
		static const double P[] = {1.26177193074810590878E-4, 3.02994407707441961300E-2,
		                           9.99999999999999999910E-1};
		static const double Q[] = {3.00198505138664455042E-6, 2.52448340349684104192E-3,
		                           2.27265548208155028766E-1, 2.00000000000000000009E0};
		LLVMValueRef rr = mmul(m, r, r);
		LLVMValueRef px = mmul(m, r, mpoly(m, rr, P, 3));
		r = mdiv(m, px, msub(m, mpoly(m, rr, Q, 4), px));
		r = mfma(m, mk(m, 2), r, mk(m, 1));
	} else {
		r = mfma(m, n, mk(m, -0.693359375), xc);
		r = mfma(m, n, mk(m, 2.12194440e-4), r);
		static const double P[] = {1.9875691500E-4, 1.3981999507E-3, 8.3334519073E-3,
		                           4.1665795894E-2, 1.6666665459E-1, 5.0000001201E-1};
		LLVMValueRef rr = mmul(m, r, r);
		r = madd(m, mfma(m, mpoly(m, r, P, 6), rr, r), mk(m, 1));
	}
	LLVMValueRef ni = LLVMBuildFPToSI(B, n, m->it, "");
	LLVMValueRef n1 = LLVMBuildAShr(B, ni, mki(m, 1), ""), n2 = LLVMBuildSub(B, ni, n1, "");
	r = mmul(m, mmul(m, r, mpow2(m, n1)), mpow2(m, n2));
	r = msel(m, LLVMRealOGT, x, mk(m, hi), mk(m, INFINITY), r);
	r = msel(m, LLVMRealOLT, x, mk(m, lo), mk(m, 0), r);
	return msel(m, LLVMRealUNO, x, x, x, r);
}

static LLVMValueRef
m_log(Mb *m, LLVMValueRef x)
{
	LLVMBuilderRef B = m->e->B;
	int d = m->d;
	// Denormals: scaled into the normal range, the exponent corrected.
	double minnorm = d ? 2.2250738585072014e-308 : 1.17549435082228750797e-38;
	int sc = d ? 54 : 25;
	LLVMValueRef small = LLVMBuildFCmp(B, LLVMRealOLT, x, mk(m, minnorm), "");
	LLVMValueRef xs = LLVMBuildSelect(B, small, mmul(m, x, mk(m, ldexp(1, sc))), x, "");
	LLVMValueRef k0 = LLVMBuildSelect(B, small, mki(m, -sc), mki(m, 0), "");
	// m in [sqrt(2)/2, sqrt(2)): add 1 - bits(sqrt(2)/2) to the bits so the
	// exponent field steps up exactly where the mantissa passes sqrt(2).
	int64_t one = d ? 0x3ff0000000000000ll : 0x3f800000, half = d ? 0x3fe6a09e00000000ll : 0x3f3504f3;
	int mant = d ? 52 : 23;
	LLVMValueRef ix = LLVMBuildAdd(B, mbits(m, xs), mki(m, one - half), "");
	LLVMValueRef k = LLVMBuildSub(B, LLVMBuildLShr(B, ix, mki(m, mant), ""), mki(m, d ? 1023 : 127), "");
	k = LLVMBuildAdd(B, k, k0, "");
	ix = LLVMBuildAdd(B, LLVMBuildAnd(B, ix, mki(m, ((int64_t)1 << mant) - 1), ""), mki(m, half), "");
	LLVMValueRef f = msub(m, mfloat(m, ix), mk(m, 1));
	LLVMValueRef s = mdiv(m, f, madd(m, mk(m, 2), f));
	LLVMValueRef z = mmul(m, s, s), w = mmul(m, z, z), t1, t2;
	double ln2hi, ln2lo;
	if (d) {
		// fdlibm's Lg1 .. Lg7: t1 = w (Lg2 + w (Lg4 + w Lg6)),
		// t2 = z (Lg1 + w (Lg3 + w (Lg5 + w Lg7))).
		static const double E[] = {1.531383769920937332e-01, 2.222219843214978396e-01,
		                           3.999999999940941908e-01}; // Lg6 Lg4 Lg2
		static const double O[] = {1.479819860511658591e-01, 1.818357216161805012e-01,
		                           2.857142874366239149e-01, 6.666666666666735130e-01}; // Lg7 Lg5 Lg3 Lg1
		t1 = mmul(m, w, mpoly(m, w, E, 3));
		t2 = mmul(m, z, mpoly(m, w, O, 4));
		ln2hi = 6.93147180369123816490e-01;
		ln2lo = 1.90821492927058770002e-10;
	} else {
		// musl's logf: t1 = w (Lg2 + w Lg4), t2 = z (Lg1 + w Lg3), floats.
		static const double E[] = {0x1.f13c4cp-3, 0x1.999c26p-2}; // Lg4 Lg2
		static const double O[] = {0x1.23d3dcp-2, 0x1.555554p-1}; // Lg3 Lg1
		t1 = mmul(m, w, mpoly(m, w, E, 2));
		t2 = mmul(m, z, mpoly(m, w, O, 2));
		ln2hi = 6.9313812256e-01;
		ln2lo = 9.0580006145e-06;
	}
	LLVMValueRef R = madd(m, t2, t1);
	LLVMValueRef hfsq = mmul(m, mk(m, 0.5), mmul(m, f, f));
	LLVMValueRef dk = LLVMBuildSIToFP(B, k, m->t, "");
	// s (hfsq + R) + k ln2lo - hfsq + f + k ln2hi, in fdlibm's order
	LLVMValueRef r = mfma(m, dk, mk(m, ln2lo), mmul(m, s, madd(m, hfsq, R)));
	r = madd(m, msub(m, r, hfsq), f);
	r = mfma(m, dk, mk(m, ln2hi), r);
	r = msel(m, LLVMRealOEQ, x, mk(m, 0), mk(m, -INFINITY), r);
	r = msel(m, LLVMRealOLT, x, mk(m, 0), mk(m, NAN), r);
	r = msel(m, LLVMRealOEQ, x, mk(m, INFINITY), x, r);
	return msel(m, LLVMRealUNO, x, x, x, r);
}

static LLVMValueRef m_call(Mb *m, KxOp op, LLVMValueRef x);

static LLVMValueRef
m_log1p(Mb *m, LLVMValueRef x)
{
	LLVMValueRef u = madd(m, mk(m, 1), x);
	LLVMValueRef c = msub(m, msub(m, u, mk(m, 1)), x);
	LLVMValueRef q = mdiv(m, c, u);
	q = msel(m, LLVMRealOEQ, u, mk(m, 0), mk(m, 0), q); // x = -1: -inf from log(0)
	q = msel(m, LLVMRealOEQ, u, mk(m, INFINITY), mk(m, 0), q); // +inf - inf
	LLVMValueRef r = msub(m, m_call(m, KX_LOG, u), q);
	return msel(m, LLVMRealOEQ, x, mk(m, 0), x, r); // -0 stays -0
}

static LLVMValueRef
m_expm1(Mb *m, LLVMValueRef x)
{
	LLVMValueRef u = m_call(m, KX_EXP, x);
	LLVMValueRef um1 = msub(m, u, mk(m, 1));
	// x / log(u) first: (u - 1) x overflows for u near the largest float.
	LLVMValueRef r = mmul(m, um1, mdiv(m, x, m_call(m, KX_LOG, u)));
	r = msel(m, LLVMRealOEQ, u, mk(m, 1), x, r);
	r = msel(m, LLVMRealOEQ, um1, mk(m, -1), mk(m, -1), r);
	return msel(m, LLVMRealOEQ, u, mk(m, INFINITY), u, r);
}

static LLVMValueRef
m_tanh(Mb *m, LLVMValueRef x)
{
	LLVMValueRef ax = intrinsic1(m->e, "llvm.fabs", m->t, x), z = mmul(m, x, x), small;
	if (m->d) {
		static const double P[] = {-9.64399179425052238628E-1, -9.92877231001918586564E1,
		                           -1.61468768441708447952E3};
		static const double Q[] = {1, 1.12811678491632931402E2, 2.23548839060100448583E3,
		                           4.84406305325125486048E3};
		LLVMValueRef pq = mdiv(m, mpoly(m, z, P, 3), mpoly(m, z, Q, 4));
		small = mfma(m, mmul(m, x, z), pq, x);
	} else {
		static const double P[] = {-5.70498872745E-3, 2.06390887954E-2, -5.37397155531E-2,
		                           1.33314422036E-1, -3.33332819422E-1};
		small = mfma(m, mmul(m, mpoly(m, z, P, 5), z), x, x);
	}
	LLVMValueRef e2 = m_call(m, KX_EXP, madd(m, ax, ax));
	LLVMValueRef big = msub(m, mk(m, 1), mdiv(m, mk(m, 2), madd(m, e2, mk(m, 1))));
	LLVMValueRef args[2] = {big, x};
	big = intrinsic(m->e, "llvm.copysign", m->t, args, 2);
	LLVMValueRef r = msel(m, LLVMRealOLT, ax, mk(m, 0.625), small, big);
	return msel(m, LLVMRealOEQ, x, mk(m, 0), x, r); // -0 stays -0
}

// ---- erf, lgamma, digamma, trigamma
// Their polynomials are our own fits: weighted least squares on Chebyshev
// nodes in 50-digit arithmetic (mpmath), coefficients rounded to the
// format, degrees the lowest whose fit error (rounded coefficients
// included) is below about half an ulp; tests/unit/test_codegen_math.c
// measures the result against long-double references.  As above, every
// path is computed for every lane and the result is a select; the
// reductions are exact where it matters.
//
// erf(x): |x| < 1: x + x q(x^2), q(z) = erf(sqrt z)/sqrt z - 1.  Above:
//   1 - exp(k(a) - a^2), a = min(|x|, 6 or 4), k(a) = log(erfc(a)) + a^2
//   fitted in a - 3.5 (a - 2.5) with weight erfc(a), so the error it
//   leaves in erf is a fraction of an ulp; erf rounds to 1 beyond 5.93
//   (3.92 in f32), hence the clamp.  The rounding of fma(-a, a, k) gives
//   a relative error a^2 2^-53 in erfc, at most 0.16 ulp of erf.
// lgamma(x), x > 0, with f = x - floor(x) and t = f - 1/2 in [-1/2, 1/2):
//   x < 2:      f (f - 1) F(t) - (x < 1 ? log x : 0), F(t) = lgamma(3/2 + t)
//               / ((t + 1/2)(t - 1/2)): the zeros at 1 and 2 are factors;
//   2 <= x < 8: f F2(t) + log((x - 1)(x - 2)...(x - n)), n = floor(x) - 2,
//               F2(t) = lgamma(5/2 + t) / (t + 1/2) (the zero at 2 again);
//   x >= 8:     Stirling, (x - 1/2)(log x - 1) + w0 + z W(z^2), z = 1/x;
//   one logarithm serves the three (their arguments are selected).
// lgamma(x), x < 0: log(pi / |x sin(pi x)|) - lgamma(|x|) (reflection);
//   |x| below 2^-70 (2^-30): lgamma(|x|) (x^2 would underflow; the two
//   differ by 2 gamma |x|).  0, negative integers and -inf: +inf.
// digamma(x), x > 0, same f and t: psi(1 + f) = (t - c) E(t), c = x0 - 3/2,
//   x0 = 1.46163... the positive zero (c in two parts, so the zero is
//   exact to the last bit); then x < 1: - 1/x; 2 <= x < 10: + sum over
//   j = 1 .. floor(x) - 1 of 1/(x - j), summed as two fractions num/den
//   (two divisions, not eight); x >= 10: log x - 1/(2x) - sum B_2k /
//   (2k x^2k).
// digamma(x), x < 0: psi(1 + |x|) + pi cot(pi |x|) (reflection and one
//   step of the recurrence), the positive path run on 1 + |x|; |x| below
//   2^-70 (2^-30): psi(1 + |x|) + 1/|x|.  +0: -inf, -0: +inf, negative
//   integers and -inf: NaN (PyTorch, and ir/special.c).
// sin(pi a) and cos(pi a) for the reflections: n = rint(2a), r = a - n/2
//   (exact, |r| <= 1/4), sin(pi r) = pi r U(r^2), cos(pi r) = C(r^2), and
//   the quadrant from the parity of n (only |sin| and cot are needed).

// sin(pi r) / pi and cos(pi r) of a >= 0 reduced by halves, and whether
// rint(2a) is odd (then sin(pi a) = ±cos(pi r), cos(pi a) = ∓sin(pi r)).
// sin(pi r) / pi = r U(r^2) with U(0) = 1 exactly: the callers divide pi
// by sin(pi r), and pi's rounding cancels.
static void
m_sincospi(Mb *m, LLVMValueRef a, LLVMValueRef *sp, LLVMValueRef *cp, LLVMValueRef *odd)
{
	LLVMBuilderRef B = m->e->B;
	double big = m->d ? 0x1p52 : 0x1p23; // every float above is an integer
	LLVMValueRef ac = msel(m, LLVMRealOGT, a, mk(m, big), mk(m, big), a);
	ac = msel(m, LLVMRealUNO, ac, ac, mk(m, 0), ac); // NaN: selected away later
	LLVMValueRef n = intrinsic1(m->e, "llvm.rint", m->t, madd(m, ac, ac));
	LLVMValueRef r = mfma(m, n, mk(m, -0.5), ac), z = mmul(m, r, r);
	if (m->d) {
		static const double U[] = {2.5106928461534935e-07, -6.9756326574080843e-06,
		                           0.00014842877775336568, -0.0023460810348909108,
		                           0.026147847817642522, -0.19075182412208405,
		                           0.81174242528335361, -1.6449340668482264, 1};
		static const double C[] = {4.2638295948444962e-06, -0.0001046334632329678,
		                           0.0019295740126589096, -0.025806891378934115,
		                           0.2353306303586496, -1.3352627688545864, 4.0587121264167685,
		                           -4.934802200544679, 1};
		*sp = mmul(m, r, mpoly(m, z, U, 9));
		*cp = mpoly(m, z, C, 9);
	} else {
		static const double U[] = {0.025781752541661263, -0.1907317191362381,
		                           0.81174194812774658, -1.6449340581893921, 1};
		static const double C[] = {0.23126046359539032, -1.3350358009338379, 4.0587067604064941,
		                           -4.9348020553588867, 1};
		*sp = mmul(m, r, mpoly(m, z, U, 5));
		*cp = mpoly(m, z, C, 5);
	}
	LLVMValueRef ni = LLVMBuildFPToSI(B, n, m->it, "");
	*odd = LLVMBuildICmp(B, LLVMIntNE, LLVMBuildAnd(B, ni, mki(m, 1), ""), mki(m, 0), "");
}

static LLVMValueRef
m_erf(Mb *m, LLVMValueRef x)
{
	LLVMValueRef ax = intrinsic1(m->e, "llvm.fabs", m->t, x);
	LLVMValueRef small, big, a, k;
	if (m->d) {
		static const double Q[] = {-7.7985438505499473e-10, 1.3721520406351094e-08,
		                           -1.6208829856810202e-07, 1.6447471190594618e-06,
		                           -1.4924740785377576e-05, 0.00012055295112667001,
		                           -0.00085483259825432252, 0.0052239776072699456,
		                           -0.026866170643256995, 0.1128379167094513,
		                           -0.37612638903183543, 0.12837916709551256};
		static const double K[] = {1.0305267765735484e-12, 1.7764822476230468e-11,
		                           1.3557178657877511e-10, 6.1240710200973897e-10,
		                           1.7068957706713885e-09, 2.9395826709143576e-09,
		                           2.0473095679517234e-09, -3.3756413276912352e-09,
		                           1.0417239157977249e-09, -8.9924976607806979e-08,
		                           5.8265589942854854e-07, -3.8857259598036028e-06,
		                           2.4391295988434745e-05, -0.00014729575261712246,
		                           0.00087368721023180012, -0.0052256585926552645,
		                           0.033246945153041531, -0.2660995883701725, -1.8624374021472263};
		small = mfma(m, x, mpoly(m, mmul(m, x, x), Q, 12), x);
		a = msel(m, LLVMRealOGT, ax, mk(m, 6), mk(m, 6), ax);
		k = mpoly(m, msub(m, a, mk(m, 3.5)), K, 19);
	} else {
		static const double Q[] = {7.8824974480085075e-05, -0.00080188550055027008,
		                           0.0051893121562898159, -0.026854328811168671,
		                           0.11283597350120544, -0.37612625956535339, 0.12837916612625122};
		static const double K[] = {0.00018655171152204275, -0.00015067031199578196,
		                           0.0024691054131835699, -0.010706097818911076,
		                           0.056120444089174271, -0.35269284248352051, -1.5568177700042725};
		small = mfma(m, x, mpoly(m, mmul(m, x, x), Q, 7), x);
		a = msel(m, LLVMRealOGT, ax, mk(m, 4), mk(m, 4), ax);
		k = mpoly(m, msub(m, a, mk(m, 2.5)), K, 7);
	}
	LLVMValueRef na = LLVMBuildFNeg(m->e->B, a, "");
	big = msub(m, mk(m, 1), m_call(m, KX_EXP, mfma(m, na, a, k)));
	LLVMValueRef args[2] = {big, x};
	big = intrinsic(m->e, "llvm.copysign", m->t, args, 2);
	LLVMValueRef r = msel(m, LLVMRealOLT, ax, mk(m, 1), small, big);
	return msel(m, LLVMRealUNO, x, x, x, r);
}

// lgamma(a) for a >= 0 (+inf at 0).
static LLVMValueRef
m_lgamma_pos(Mb *m, LLVMValueRef a)
{
	LLVMValueRef fl = intrinsic1(m->e, "llvm.floor", m->t, a);
	LLVMValueRef f = msub(m, a, fl), t = msub(m, f, mk(m, 0.5)), b1, b2, w;
	LLVMValueRef z = mdiv(m, mk(m, 1), a), zz = mmul(m, z, z);
	if (m->d) {
		static const double F[] = {-1.8072503739261512e-05, 2.8343542991307434e-05,
		                           -2.2027728890160218e-05, 3.498560355905269e-05,
		                           -6.7667677624454298e-05, 0.0001077170246760829,
		                           -0.0001686454162655914, 0.00027089463395212478,
		                           -0.00043802321840177106, 0.0007115650830900709,
		                           -0.0011644125478591238, 0.0019229132380020617,
		                           -0.0032120741532262079, 0.0054464579570919821,
		                           -0.0094256224469295869, 0.016797098628976912,
		                           -0.031308487501023538, 0.062911401074581735,
		                           -0.14595989591430605, 0.48312895054098087};
		static const double F2[] = {-1.506504765953895e-08, 3.8721302162248787e-08,
		                            -8.7244296788860933e-08, 2.353718399781654e-07,
		                            -6.4233655322000824e-07, 1.7456415074527694e-06,
		                            -4.7863387578516994e-06, 1.3275711081262358e-05,
		                            -3.7353374234197186e-05, 0.00010710021010783776,
		                            -0.00031505925004463931, 0.00096109792855172743,
		                            -0.0030951822936270313, 0.010877001514197609,
		                            -0.044805842697384482, 0.26758179939880972,
		                            0.56936574094583836};
		static const double W[] = {0.0050675642373291972, -0.0018904609209094707,
		                           0.0008414714586724686, -0.00059523659566980316,
		                           0.00079365078979346513, -0.0027777777777740435,
		                           0.083333333333333329};
		b1 = mpoly(m, t, F, 20);
		b2 = mpoly(m, t, F2, 17);
		w = mpoly(m, zz, W, 7);
	} else {
		static const double F[] = {-0.0014884424163028598, 0.0024468754418194294,
		                           -0.0031372054945677519, 0.0053259269334375858,
		                           -0.009432508610188961, 0.016808107495307922,
		                           -0.031308267265558243, 0.062911055982112885,
		                           -0.14595989882946014, 0.48312896490097046};
		static const double F2[] = {0.00011748295946745202, -0.00033460126724094152,
		                            0.00095849495846778154, -0.0030920847784727812,
		                            0.010877244174480438, -0.044805999845266342,
		                            0.26758179068565369, 0.5693657398223877};
		static const double W[] = {0.0007800459279678762, -0.0027776986826211214,
		                           0.083333335816860199};
		b1 = mpoly(m, t, F, 10);
		b2 = mpoly(m, t, F2, 8);
		w = mpoly(m, zz, W, 3);
	}
	// + 0: lgamma(1) and lgamma(2) are +0, f (f - 1) F is -0 there.
	b1 = madd(m, mmul(m, mmul(m, f, msub(m, f, mk(m, 1))), b1), mk(m, 0));
	b2 = mmul(m, f, b2);
	// (x - 1)(x - 2)...(x - n) for 2 <= x < 8, n = floor(x) - 2 <= 5.
	LLVMValueRef prod = mk(m, 1);
	for (int j = 1; j <= 5; j++)
		prod = mmul(m, prod, msel(m, LLVMRealOGE, a, mk(m, j + 2), msub(m, a, mk(m, j)), mk(m, 1)));
	LLVMValueRef mid = LLVMBuildAnd(m->e->B, LLVMBuildFCmp(m->e->B, LLVMRealOGE, a, mk(m, 2), ""),
	                                LLVMBuildFCmp(m->e->B, LLVMRealOLT, a, mk(m, 8), ""), "");
	LLVMValueRef L = m_call(m, KX_LOG, LLVMBuildSelect(m->e->B, mid, prod, a, ""));
	// Stirling: (a - 1/2)(log a - 1) + w0 + z W(z^2), w0 = log(2 pi)/2 - 1/2.
	LLVMValueRef st = mfma(m, msub(m, a, mk(m, 0.5)), msub(m, L, mk(m, 1)),
	                       mfma(m, z, w, mk(m, 0.41893853320467274178)));
	LLVMValueRef r = msel(m, LLVMRealOLT, a, mk(m, 8), madd(m, b2, L), st);
	r = msel(m, LLVMRealOLT, a, mk(m, 2), b1, r);
	return msel(m, LLVMRealOLT, a, mk(m, 1), msub(m, b1, L), r);
}

static LLVMValueRef
m_lgamma(Mb *m, LLVMValueRef x)
{
	LLVMBuilderRef B = m->e->B;
	LLVMValueRef a = intrinsic1(m->e, "llvm.fabs", m->t, x);
	LLVMValueRef lp = m_lgamma_pos(m, a), sp, cp, odd;
	m_sincospi(m, a, &sp, &cp, &odd);
	// log(pi / |a sin(pi a)|) = -log |a sp|, or log(pi) - log |a cp|: no
	// division (the difference of two logarithms is exact enough: the
	// unit of error here is the ulp of max(1, |terms|)).
	LLVMValueRef s = intrinsic1(m->e, "llvm.fabs", m->t, LLVMBuildSelect(B, odd, cp, sp, ""));
	LLVMValueRef lpi = LLVMBuildSelect(B, odd, mk(m, 1.14472988584940017414), mk(m, 0), "");
	LLVMValueRef ln = msub(m, msub(m, lpi, m_call(m, KX_LOG, mmul(m, a, s))), lp);
	ln = msel(m, LLVMRealOLT, a, mk(m, m->d ? 0x1p-70 : 0x1p-30), lp, ln);
	LLVMValueRef r = msel(m, LLVMRealOLT, x, mk(m, 0), ln, lp);
	LLVMValueRef fa = intrinsic1(m->e, "llvm.floor", m->t, a);
	LLVMValueRef pole = LLVMBuildAnd(B, LLVMBuildFCmp(B, LLVMRealOLE, x, mk(m, 0), ""),
	                                 LLVMBuildFCmp(B, LLVMRealOEQ, a, fa, ""), "");
	r = LLVMBuildSelect(B, pole, mk(m, INFINITY), r, "");
	return msel(m, LLVMRealUNO, x, x, x, r);
}

static LLVMValueRef
m_digamma(Mb *m, LLVMValueRef x)
{
	LLVMBuilderRef B = m->e->B;
	LLVMValueRef one = mk(m, 1), zero = mk(m, 0);
	LLVMValueRef a = intrinsic1(m->e, "llvm.fabs", m->t, x);
	LLVMValueRef fa = intrinsic1(m->e, "llvm.floor", m->t, a);
	LLVMValueRef neg = LLVMBuildFCmp(B, LLVMRealOLT, x, zero, "");
	LLVMValueRef tiny = LLVMBuildFCmp(B, LLVMRealOLT, a, mk(m, m->d ? 0x1p-70 : 0x1p-30), "");
	tiny = LLVMBuildAnd(B, neg, tiny, "");
	// x < 0: psi(x) = psi(1 + a) + pi cot(pi a), a = -x (1 + a is exact for
	// a >= 1; below, its rounding moves psi(1 + a) by less than an ulp of
	// the result).  So the positive path runs on v = x or 1 + a.  Tiny a:
	// psi(1 + a) + 1/a, off by pi^2 a / 3 (sin(pi a) would lose bits in
	// the denormal range).
	LLVMValueRef v = LLVMBuildSelect(B, neg, madd(m, a, one), a, "");
	LLVMValueRef fl = intrinsic1(m->e, "llvm.floor", m->t, v);
	LLVMValueRef t = msub(m, msub(m, v, fl), mk(m, 0.5)), e, asy;
	// (t - c) with c = x0 - 3/2 in two parts
	LLVMValueRef d = msub(m, msub(m, t, mk(m, -0.038367855031637657)), mk(m, -1.6445603550442201e-18));
	LLVMValueRef small = LLVMBuildFCmp(B, LLVMRealOLT, v, one, "");
	LLVMValueRef large = LLVMBuildFCmp(B, LLVMRealOGE, v, mk(m, 10), "");
	// q = 1/v (v < 1 or v >= 10), 1/a (tiny), or the sum over j = 1 ..
	// floor(v) - 1 of 1/(v - j) (2 <= v < 10), as num/den: adding 1/f to
	// num/den is (num f + den) / (den f).
	// Two fractions of four terms each: one of eight rounded the products
	// enough to cost 1-2 ulp (measured 4.1 ulp at x = 6.04 in f32).
	LLVMValueRef sl = LLVMBuildOr(B, small, large, "");
	LLVMValueRef num[2], den[2];
	num[0] = LLVMBuildSelect(B, LLVMBuildOr(B, sl, tiny, ""), one, zero, "");
	den[0] = LLVMBuildSelect(B, sl, v, LLVMBuildSelect(B, tiny, a, one, ""), "");
	num[1] = zero;
	den[1] = one;
	for (int j = 1; j <= 8; j++) {
		LLVMValueRef inc = LLVMBuildAnd(B, LLVMBuildFCmp(B, LLVMRealOGE, v, mk(m, j + 1), ""),
		                                LLVMBuildNot(B, large, ""), "");
		LLVMValueRef fj = LLVMBuildSelect(B, inc, msub(m, v, mk(m, j)), one, "");
		int h = j > 4;
		num[h] = mfma(m, num[h], fj, LLVMBuildSelect(B, inc, den[h], zero, ""));
		den[h] = mmul(m, den[h], fj);
	}
	LLVMValueRef q = madd(m, mdiv(m, num[0], den[0]), mdiv(m, num[1], den[1])), z = mmul(m, q, q);
	if (m->d) {
		static const double E[] = {0.00011760657164236826, -0.00017812816199980528,
		                           9.8188931848368965e-05, -0.00014492516861014685,
		                           0.00032298185949129071, -0.00048588379018547093,
		                           0.00069125226445515108, -0.0010364793837654342,
		                           0.0015633018770457392, -0.0023454907194339143,
		                           0.0035181155851796578, -0.00527993774357225,
		                           0.0079270210260173873, -0.011908220068846656,
		                           0.01790724835834023, -0.02697579666148241,
		                           0.040760833939573589, -0.061922133275445775,
		                           0.094988724452910595, -0.14840492305388139,
		                           0.24054248424078686, -0.42362742128146058, 0.95105587603183284};
		// B_2k / 2k, k = 8 .. 1
		static const double A[] = {-3617.0 / 8160, 1.0 / 12, -691.0 / 32760, 1.0 / 132,
		                           -1.0 / 240, 1.0 / 252, -1.0 / 120, 1.0 / 12};
		e = mpoly(m, t, E, 23);
		asy = mpoly(m, z, A, 8);
	} else {
		static const double E[] = {0.01079188846051693, -0.016365295276045799,
		                           0.017183676362037659, -0.025791538879275322,
		                           0.040835142135620117, -0.062055114656686783,
		                           0.094985999166965485, -0.14839892089366913,
		                           0.24054250121116638, -0.42362749576568604, 0.95105588436126709};
		static const double A[] = {-1.0 / 240, 1.0 / 252, -1.0 / 120, 1.0 / 12};
		e = mpoly(m, t, E, 11);
		asy = mpoly(m, z, A, 4);
	}
	LLVMValueRef base = mmul(m, d, e);
	asy = msub(m, mfma(m, q, mk(m, -0.5), m_call(m, KX_LOG, v)), mmul(m, z, asy));
	LLVMValueRef r = LLVMBuildSelect(B, large, asy, madd(m, base, q), "");
	r = LLVMBuildSelect(B, small, msub(m, base, q), r, "");
	// pi cot(pi a): cp / sp, or -pi^2 sp / cp (sp = sin(pi r) / pi)
	LLVMValueRef sp, cp, odd;
	m_sincospi(m, a, &sp, &cp, &odd);
	LLVMValueRef cn = LLVMBuildSelect(B, odd, mmul(m, mk(m, -9.86960440108935861883), sp), cp, "");
	LLVMValueRef cd = LLVMBuildSelect(B, odd, cp, sp, "");
	LLVMValueRef rn = madd(m, r, mdiv(m, cn, cd));
	r = LLVMBuildSelect(B, LLVMBuildAnd(B, neg, LLVMBuildNot(B, tiny, ""), ""), rn, r, "");
	LLVMValueRef pole = LLVMBuildAnd(B, LLVMBuildFCmp(B, LLVMRealOLE, x, zero, ""),
	                                 LLVMBuildFCmp(B, LLVMRealOEQ, a, fa, ""), "");
	LLVMValueRef nx = LLVMBuildFNeg(B, x, ""), args[2] = {mk(m, INFINITY), nx};
	LLVMValueRef zr = intrinsic(m->e, "llvm.copysign", m->t, args, 2);
	r = LLVMBuildSelect(B, pole, msel(m, LLVMRealOEQ, x, zero, zr, mk(m, NAN)), r, "");
	return msel(m, LLVMRealUNO, x, x, x, r);
}

// trigamma(x) = psi'(x), polygamma of order 1.  x > 0: n = ceil(10 - x)
// steps up, psi1(x) = sum_{j<n} 1/(x + j)^2 + psi1(v), v = x + n in [10,
// 11) (x >= 10: v = x): every term positive, so nothing cancels; the sum
// as 1/x^2 and two fractions (j = 1..4, 5..9), and at v the asymptotic
// series w + w^2/2 + sum B_2k w^(2k+1), w = 1/v, to B_20 (f32: B_8; the
// next term is below 2^-60 of the sum).  x < 0: reflection, pi^2 /
// sin^2(pi a) - psi1(1 + a), a = -x, the positive path run on 1 + a.
// Poles (0, negative integers): +inf; -inf: NaN (ir/special.c).
static LLVMValueRef
m_trigamma(Mb *m, LLVMValueRef x)
{
	LLVMBuilderRef B = m->e->B;
	LLVMValueRef one = mk(m, 1), zero = mk(m, 0);
	LLVMValueRef a = intrinsic1(m->e, "llvm.fabs", m->t, x);
	LLVMValueRef neg = LLVMBuildFCmp(B, LLVMRealOLT, x, zero, "");
	LLVMValueRef v = LLVMBuildSelect(B, neg, madd(m, a, one), a, "");
	LLVMValueRef n = intrinsic1(m->e, "llvm.ceil", m->t, msub(m, mk(m, 10), v));
	n = msel(m, LLVMRealOGT, n, zero, n, zero);
	n = msel(m, LLVMRealUNO, n, n, zero, n); // NaN: selected away at the end
	LLVMValueRef q = mdiv(m, one, v); // squared: v^2 may be denormal where 1/v^2 is finite
	q = msel(m, LLVMRealOLT, v, mk(m, 10), mmul(m, q, q), zero);
	LLVMValueRef num[2] = {zero, zero}, den[2] = {one, one};
	for (int j = 1; j <= 9; j++) {
		LLVMValueRef inc = LLVMBuildFCmp(B, LLVMRealOGT, n, mk(m, j), "");
		LLVMValueRef fj = madd(m, v, mk(m, j));
		fj = LLVMBuildSelect(B, inc, mmul(m, fj, fj), one, "");
		int h = j > 4;
		num[h] = mfma(m, num[h], fj, LLVMBuildSelect(B, inc, den[h], zero, ""));
		den[h] = mmul(m, den[h], fj);
	}
	q = madd(m, q, madd(m, mdiv(m, num[0], den[0]), mdiv(m, num[1], den[1])));
	LLVMValueRef w = mdiv(m, one, madd(m, v, n)), ww = mmul(m, w, w), p;
	if (m->d) {
		// B_20 .. B_2
		static const double Bn[] = {-174611.0 / 330, 43867.0 / 798, -3617.0 / 510, 7.0 / 6,
		                            -691.0 / 2730,   5.0 / 66,      -1.0 / 30,     1.0 / 42,
		                            -1.0 / 30,       1.0 / 6};
		p = mpoly(m, ww, Bn, 10);
	} else {
		static const double Bn[] = {-1.0 / 30, 1.0 / 42, -1.0 / 30, 1.0 / 6};
		p = mpoly(m, ww, Bn, 4);
	}
	// w + w^2 (1/2 + w p)
	LLVMValueRef asy = mfma(m, ww, mfma(m, w, p, mk(m, 0.5)), w);
	LLVMValueRef pos = madd(m, q, asy);
	LLVMValueRef sp, cp, odd;
	m_sincospi(m, a, &sp, &cp, &odd);
	// pi^2 / sin^2(pi a): 1 / sp^2 or pi^2 / cp^2
	LLVMValueRef s = LLVMBuildSelect(B, odd, cp, sp, "");
	LLVMValueRef pn = LLVMBuildSelect(B, odd, mk(m, 9.86960440108935861883), mk(m, 1), "");
	LLVMValueRef rn = msub(m, mdiv(m, pn, mmul(m, s, s)), pos);
	LLVMValueRef r = LLVMBuildSelect(B, neg, rn, pos, "");
	LLVMValueRef fa = intrinsic1(m->e, "llvm.floor", m->t, a);
	LLVMValueRef pole = LLVMBuildAnd(B, LLVMBuildFCmp(B, LLVMRealOLE, x, zero, ""),
	                                 LLVMBuildFCmp(B, LLVMRealOEQ, a, fa, ""), "");
	LLVMValueRef pv = msel(m, LLVMRealOEQ, a, mk(m, INFINITY), mk(m, NAN), mk(m, INFINITY));
	r = LLVMBuildSelect(B, pole, pv, r, "");
	return msel(m, LLVMRealUNO, x, x, x, r);
}

// The function computing op in dtype dt (F32 or F64): emitted at its first
// use, with its own builder position (the caller's is restored).
LLVMValueRef
llvm_math_fn(Emit *e, KxOp op, DType dt)
{
	// KX_POLYGAMMA stands for digamma (order 0) here, KX_TRIGAMMA for order 1.
	static const KxOp ops[] = {KX_EXP, KX_LOG,    KX_LOG1P,     KX_EXPM1,   KX_TANH,
	                           KX_ERF, KX_LGAMMA, KX_POLYGAMMA, KX_TRIGAMMA};
	static const char *const names[] = {"exp", "log",    "log1p",   "expm1",   "tanh",
	                                    "erf", "lgamma", "digamma", "trigamma"};
	int i = 0;
	while (ops[i] != op)
		i++;
	int d = dt == DT_F64;
	// One copy per module (piece): an alwaysinline internal function is
	// inlined where it is called, so each piece needs its own.
	if (e->mathfn[i][d] && LLVMGetGlobalParent(e->mathfn[i][d]) == e->M)
		return e->mathfn[i][d];
	Mb m = {e, ty(e, dt), d ? e->i64 : e->i32, d};
	char name[32];
	snprintf(name, sizeof name, "fadc.%s.%s", names[i], d ? "f64" : "f32");
	LLVMValueRef have = LLVMGetNamedFunction(e->M, name);
	if (have)
		return e->mathfn[i][d] = have;
	LLVMTypeRef fty = LLVMFunctionType(m.t, &m.t, 1, 0);
	LLVMValueRef fn = LLVMAddFunction(e->M, name, fty);
	LLVMSetLinkage(fn, LLVMInternalLinkage);
	fn_attr(e, fn, LLVMAttributeFunctionIndex, "nounwind");
	fn_attr(e, fn, LLVMAttributeFunctionIndex, "alwaysinline");
	fn_attr(e, fn, LLVMAttributeFunctionIndex, "readnone");
	e->mathfn[i][d] = fn;
	LLVMBasicBlockRef saved = LLVMGetInsertBlock(e->B);
	LLVMPositionBuilderAtEnd(e->B, LLVMAppendBasicBlockInContext(e->C, fn, "entry"));
	LLVMValueRef x = LLVMGetParam(fn, 0), r;
	switch (op) {
	case KX_EXP:
		r = m_exp(&m, x);
		break;
	case KX_LOG:
		r = m_log(&m, x);
		break;
	case KX_LOG1P:
		r = m_log1p(&m, x);
		break;
	case KX_EXPM1:
		r = m_expm1(&m, x);
		break;
	case KX_ERF:
		r = m_erf(&m, x);
		break;
	case KX_LGAMMA:
		r = m_lgamma(&m, x);
		break;
	case KX_POLYGAMMA:
		r = m_digamma(&m, x);
		break;
	case KX_TRIGAMMA:
		r = m_trigamma(&m, x);
		break;
	default:
		r = m_tanh(&m, x);
		break;
	}
	LLVMBuildRet(e->B, r);
	if (saved)
		LLVMPositionBuilderAtEnd(e->B, saved);
	return fn;
}

// A call of the function computing op, in the dtype of m.
static LLVMValueRef
m_call(Mb *m, KxOp op, LLVMValueRef x)
{
	LLVMValueRef fn = llvm_math_fn(m->e, op, m->d ? DT_F64 : DT_F32);
	return LLVMBuildCall2(m->e->B, LLVMGlobalGetValueType(fn), fn, &x, 1, "");
}
