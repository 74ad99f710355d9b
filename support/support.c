// support/support.c -- special functions that generated code calls, linked
// into every model.so (with random.c, the Philox samplers, special.c and
// hungarian.c, the assignment solver that host kernels call) as the static
// library fadc_support.
//
// Generated code calls libm for exp, log, log1p, expm1, tanh, erf, sin, cos
// and pow (through LLVM intrinsics or by name; exp .. erf only in loops
// that do not vectorize), and these for the rest:
// lgamma through the reentrant lgamma_r (libm's lgamma writes the global
// signgam, a data race once kernels run on a thread pool), and digamma and
// polygamma, which libm lacks.  The f32 versions compute in double and
// round: accurate to the last bit of a float, not fast.  These serve scalar
// loops (and polygamma of order >= 2 everywhere): where a loop vectorizes,
// codegen/llvm_math.c emits erf, lgamma, digamma and trigamma as vector IR
// instead.  The library is compiled without sanitizers and with hidden
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
// is used.  The algorithm is special.c's, compiled into this library
// too, so compiled code and the interpreter agree to the bit.
#define _DEFAULT_SOURCE 1
#include <math.h>

#include "support.h"

double fadc_polygamma(double n, double x);
float fadc_polygammaf(float n, float x);
double fadc_lgamma(double x);
float fadc_lgammaf(float x);

double
fadc_polygamma(double n, double x)
{
	return ir_polygamma(n, x);
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
