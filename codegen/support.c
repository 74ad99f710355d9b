// codegen/support.c -- special functions that generated code calls, linked
// into every model.so (with ir/random.c, the Philox samplers) as the static
// library fadc_support.
//
// Generated code calls libm for exp, log, log1p, expm1, tanh, erf, sin, cos
// and pow (through LLVM intrinsics or by name), and these for the rest:
// lgamma through the reentrant lgamma_r (libm's lgamma writes the global
// signgam, a data race once kernels run on a thread pool), and digamma and
// polygamma, which libm lacks.  The f32 versions compute in double and
// round: accurate to the last bit of a float, not fast; vectorizable f32
// implementations in the kernel IR come with the performance work of
// issue 4.  The library is compiled without sanitizers and with hidden
// visibility: nothing here is exported from a model.so.
//
// polygamma(n, x), the n-th derivative of digamma (n = 0: digamma), for
// x > 0: the recurrence psi^(n)(x) = psi^(n)(x + 1) - (-1)^n n! / x^(n+1)
// moves x to at least 10 + n, where the asymptotic series
//   psi(x)     ~ ln x - 1/(2x) - sum_k B_2k / (2k x^2k)
//   psi^(n)(x) ~ (-1)^(n+1) [ (n-1)!/x^n + n!/(2 x^(n+1))
//                             + sum_k B_2k (2k+n-1)! / ((2k)! x^(2k+n)) ]
// converges to double precision within 15 terms.  For x < 0 the reflection
// formula psi^(n)(1 - x) + (-1)^(n+1) psi^(n)(x) = (-1)^n pi d^n/dx^n cot(pi x)
// is used with the n-th derivative of cot as a polynomial in cot (P_0 = c,
// P_{k+1} = -(1 + c^2) P_k'), as in the interpreter (ir/interp.c), whose
// conventions at the poles it follows.
#define _DEFAULT_SOURCE 1
#include <math.h>

double fadc_polygamma(double n, double x);
float fadc_polygammaf(float n, float x);
double fadc_lgamma(double x);
float fadc_lgammaf(float x);

static const double PI = 3.14159265358979323846264338327950288;

static const double bern2k[15] = {
	1.0 / 6, -1.0 / 30, 1.0 / 42, -1.0 / 30, 5.0 / 66, -691.0 / 2730, 7.0 / 6, -3617.0 / 510,
	43867.0 / 798, -174611.0 / 330, 854513.0 / 138, -236364091.0 / 2730, 8553103.0 / 6,
	-23749461029.0 / 870, 8615841276005.0 / 14322,
};

static double
pg_pos(int n, double x)
{
	double s = n % 2 ? 1 : -1, fact = 1;
	for (int k = 2; k <= n; k++)
		fact *= k;
	double acc = 0, xmin = 10 + n;
	for (; x < xmin; x += 1)
		acc += s * fact / pow(x, n + 1);
	double lead = n == 0 ? log(x) : s * (fact / n) / pow(x, n);
	double sum = fact / (2 * pow(x, n + 1));
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

// cot(pi x) with the argument reduced exactly to (-1/2, 1/2].
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

double
fadc_polygamma(double nd, double x)
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
	p[1] = 1;
	for (int k = 0; k < n; k++) {
		for (int j = 0; j <= k + 2; j++)
			q[j] = j <= k ? (j + 1) * p[j + 1] : 0;
		for (int j = 0; j <= k + 2; j++)
			p[j] = -(q[j] + (j >= 2 ? q[j - 2] : 0));
	}
	double c = cotpi(x), pn = 0;
	for (int j = n + 1; j >= 0; j--)
		pn = pn * c + p[j];
	double sgn = n % 2 ? -1 : 1;
	return sgn * pg_pos(n, 1 - x) - pow(PI, n + 1) * pn;
}

float
fadc_polygammaf(float n, float x)
{
	return (float)fadc_polygamma(n, x);
}

double
fadc_lgamma(double x)
{
	int sign;
	return lgamma_r(x, &sign);
}

float
fadc_lgammaf(float x)
{
	int sign;
	return lgammaf_r(x, &sign);
}
