// support/special.c -- polygamma (digamma included), the one special
// function libm lacks.  One source for every consumer: the reference
// interpreter calls it, and every model.so links this same file (through
// support.c's fadc_polygamma), as it does random.c, so compiled code and
// the oracle agree to the bit.
// (The CUDA printer carries a __device__ port of this algorithm.)
#include <math.h>

#include "support.h"

static const double PI = 3.14159265358979323846264338327950288;

// cot(pi x) for non-integer x, as cos(pi r) / sin(pi r) with r = x - floor(x)
// moved to (-1/2, 1/2] (both steps exact), so no error comes from a large
// |x|.  For |r| > 1/4 the sine and cosine are taken of 1/2 - |r| (exact
// too): then cot is exactly 0 at the half-integers, where the even orders
// of the reflection formula below cancel to nothing.
static double
cotpi(double x)
{
	double r = x - floor(x);
	if (r > 0.5)
		r -= 1;
	double ar = fabs(r), s, c;
	if (ar <= 0.25) {
		s = sin(PI * ar);
		c = cos(PI * ar);
	} else {
		s = cos(PI * (0.5 - ar));
		c = sin(PI * (0.5 - ar));
	}
	return r < 0 ? -c / s : c / s;
}

// Bernoulli numbers B_2, B_4, ..., B_30, for the asymptotic series.
static const double bern2k[15] = {
	1.0 / 6, -1.0 / 30, 1.0 / 42, -1.0 / 30, 5.0 / 66, -691.0 / 2730, 7.0 / 6, -3617.0 / 510,
	43867.0 / 798, -174611.0 / 330, 854513.0 / 138, -236364091.0 / 2730, 8553103.0 / 6,
	-23749461029.0 / 870, 8615841276005.0 / 14322,
};

// psi^(n)(x) for x > 0, n >= 0 (psi^(0) is digamma).  With s = (-1)^(n+1):
//   recurrence  psi^(n)(x) = s n! / x^(n+1) + psi^(n)(x + 1)
// moves x up to x >= 10 + n, where the asymptotic series
//   psi(x)      ~ ln x - 1/(2x) - sum_k B_2k / (2k x^2k)
//   psi^(n)(x)  ~ s [ (n-1)!/x^n + n!/(2 x^(n+1))
//                     + sum_k B_2k (2k+n-1)! / ((2k)! x^(2k+n)) ]      (n >= 1)
// converges fast enough: term k shrinks like (2k+n)^2 / (2 pi x)^2, so by
// k = 15 it is below 1e-20 of the sum.  The n = 0 series is the general one
// with (n-1)!/x^n replaced by ln x.
static double
pg_pos(int n, double x)
{
	double s = n % 2 ? 1 : -1, fact = 1; // s = (-1)^(n+1), fact = n!
	for (int k = 2; k <= n; k++)
		fact *= k;
	double acc = 0, xmin = 10 + n;
	for (; x < xmin; x += 1)
		acc += s * fact / pow(x, n + 1);
	double lead = n == 0 ? log(x) : s * (fact / n) / pow(x, n);
	double sum = fact / (2 * pow(x, n + 1));
	// F_k = (2k+n-1)! / (2k)!; F_1 = (n+1)! / 2.
	double f = fact * (n + 1) / 2, x2 = x * x, xp = pow(x, n + 2);
	for (int k = 1; k <= 15; k++) {
		double term = bern2k[k - 1] * f / xp;
		sum += term;
		if (fabs(term) <= 1e-17 * fabs(sum))
			break;
		f *= (double)(2 * k + n + 1) * (2 * k + n) / ((2.0 * k + 2) * (2 * k + 1));
		xp *= x2;
	}
	return acc + lead + s * sum;
}

// Polygamma of order nd (a float carrying an integer; 0 is digamma).
// Negative non-integer x uses the reflection formula, differentiated n
// times from psi(1 - x) - psi(x) = pi cot(pi x):
//   psi^(n)(x) = (-1)^n psi^(n)(1 - x) - pi^(n+1) P_n(cot(pi x)),
// where d^n/dx^n cot(pi x) = pi^n P_n(c), P_0(c) = c and
// P_{k+1}(c) = -(1 + c^2) P_k'(c) (since dc/dx = -pi (1 + c^2)).
// Poles (x = 0, -1, -2, ...): digamma gives -inf at +0 and +inf at -0 and
// NaN at the negative integers (PyTorch); odd orders give +inf (the
// function tends to +inf from both sides), even orders NaN.  Orders above
// 120 give NaN (n! is near overflow there anyway).
double
ir_polygamma(double nd, double x)
{
	if (isnan(nd) || isnan(x) || nd < 0 || nd > 120 || nd != floor(nd))
		return NAN;
	int n = (int)nd;
	if (x <= 0 && x == floor(x)) {
		if (isinf(x))
			return NAN;
		if (n == 0)
			return x == 0 ? copysign(INFINITY, -x) : NAN;
		return n % 2 ? INFINITY : NAN;
	}
	if (x > 0)
		return pg_pos(n, x);
	double p[124] = {0}, q[124];
	p[1] = 1; // P_0(c) = c; p[j] is the coefficient of c^j, degree <= k + 1
	for (int k = 0; k < n; k++) {
		for (int j = 0; j <= k + 2; j++)
			q[j] = j <= k ? (j + 1) * p[j + 1] : 0; // P_k'
		for (int j = 0; j <= k + 2; j++)
			p[j] = -(q[j] + (j >= 2 ? q[j - 2] : 0)); // -(1 + c^2) P_k'
	}
	double c = cotpi(x), pn = 0;
	for (int j = n + 1; j >= 0; j--)
		pn = pn * c + p[j];
	double sgn = n % 2 ? -1 : 1;
	return sgn * pg_pos(n, 1 - x) - pow(PI, n + 1) * pn;
}
