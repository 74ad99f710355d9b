// tests/unit/test_codegen_math.c -- the vectorizable exp, log, log1p,
// expm1, tanh, erf, lgamma, digamma and trigamma (polygamma of order 1) of
// the LLVM backend
// (codegen/llvm_math.c) against long-double references
// (64-bit significands: an oracle 11 bits more precise than f64), in f32
// and in f64.  libm's expl, logl, log1pl, expm1l, tanhl, erfl and lgammal
// are the references; digamma and trigamma have none in libm, so
// digamma_ref and trigamma_ref (tests/unit/mathref.h, shared with
// test_cuda_special.c) compute them in long double
// (recurrence to x >= 20, the asymptotic series to B_20, reflection with
// sinl/cosl of an exactly reduced argument), and are themselves checked
// against closed forms (psi(1) = -gamma, psi(1/2), psi(5) = H_4 - gamma,
// psi(1/4) = -gamma - pi/2 - 3 log 2, psi(-1/2), psi(x0) = 0; psi1(1) =
// pi^2/6, psi1(2), psi1(1/2) = pi^2/2, psi1(-1/2)) to 1e-18 / 1e-17 and
// against ir_polygamma (the interpreter's double code) to 1e-14.
//
// Inputs: a sweep of bit patterns over the whole format (every 4093rd f32,
// every 2^44 + 1st f64: every binade of both signs, denormals, infinities
// and NaNs), dense grids over the ranges where the functions do their work
// ([-1, 1], [-30, 30], the overflow and underflow ranges of exp, [0, 2]
// around log's 1, (-1, -0.9] near log1p's pole, [-12, 12] for lgamma and
// digamma), and the special values and thresholds one by one (±0, ±inf,
// NaN, the smallest denormal, the largest finite, exp's overflow and
// underflow edges, tanh's switch at 0.625, erf's at 1, the poles and zeros
// of lgamma and digamma, their switches at 2, 8 and 10), each with 64
// neighbours.  The error of each result is measured in units in the last
// place of the exact value in the result's format (denormal spacing below
// the normal range); a NaN must be a NaN, an infinity (or an exact value
// that rounds to one) must be that infinity exactly, ±0 in must be ±0 out
// where the function is odd at 0.  Where the result is the difference of
// larger terms (lgamma, digamma, trigamma for x < 0: reflection) the unit is
// the ulp of the larger term, and around digamma's positive zero (|x - x0|
// < 1/8, where the long-double reference itself is only good to ~1e-18
// absolute) the ulp of 1, and there the absolute error must also be at
// most 2^-53 (f64) or 2^-24 (f32).  Bounds (docs/CODEGEN.md) are in
// `bound` below; measured figures are printed.  The LLVM IR must hold
// vector instructions and no libm or support call for these functions, so
// the test also fails if the kernels stop vectorizing.
#define _GNU_SOURCE 1
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "codegen.h"
#include "fadc.h"
#include "frontend.h"
#include "mathref.h"
#include "testutil.h"

enum { NOPS = 9, LGAMMA = 6, DIGAMMA = 7, TRIGAMMA = 8 };
static const char *const opname[NOPS] = {"exp", "log",    "log1p",   "expm1",   "tanh",
                                         "erf", "lgamma", "digamma", "trigamma"};
// Bounds in ulp, f32 then f64; for lgamma and digamma at x < 0 (reflection)
// boundneg, in ulps of the largest term (scale below).
static const double bound[2][NOPS] = {{2, 2, 2, 3, 2, 2, 4, 4, 4}, {2, 2, 2, 3, 2, 2, 4, 4, 4}};
static const double boundneg[NOPS] = {[LGAMMA] = 4, [DIGAMMA] = 5, [TRIGAMMA] = 5};

static long double
ref(int op, long double x)
{
	int sign;
	switch (op) {
	case 0:
		return expl(x);
	case 1:
		return logl(x);
	case 2:
		return log1pl(x);
	case 3:
		return expm1l(x);
	case 4:
		return tanhl(x);
	case 5:
		return erfl(x);
	case LGAMMA:
		return lgammal_r(x, &sign);
	case DIGAMMA:
		return digamma_ref(x);
	default:
		return trigamma_ref(x);
	}
}

// The magnitude whose ulp is the unit of error at x: 0 for the result's
// own.  Reflection (x < 0) adds terms of either sign: lgamma(x) = log(pi /
// |x sin(pi x)|) - lgamma(-x): the largest term, and at least 1 (the
// logarithm's argument is near 1 where the terms are small: its relative
// error becomes an absolute one); digamma and trigamma: mathref.h.
static long double
scale(int op, long double x)
{
	int sign;
	if (op == LGAMMA && x < 0 && x != floorl(x)) {
		long double t2 = lgammal_r(-x, &sign), t1 = lgammal_r(x, &sign) + t2;
		return fmaxl(1, fmaxl(fabsl(t1), fabsl(t2)));
	}
	if (op == DIGAMMA)
		return digamma_scale(x);
	if (op == TRIGAMMA)
		return trigamma_scale(x);
	return 0;
}

static Inputs
inputs(int f64)
{
	Inputs in = {0};
	sweep(&in, f64);
	grid(&in, -1, 1, 400000);
	grid(&in, -30, 30, 400000);
	grid(&in, f64 ? -746 : -105, f64 ? -700 : -85, 100000); // exp's denormal results
	grid(&in, f64 ? 700 : 85, f64 ? 710 : 89, 50000); // exp near overflow
	grid(&in, 0, 2, 200000);
	grid(&in, -1, -0.9, 50000);
	grid(&in, -1e-6, 1e-6, 20000);
	grid(&in, -12, 12, 400000);
	grid(&in, 0, 1e-3, 20000);
	double special[] = {0, -0.0, INFINITY, -INFINITY, NAN, -NAN, 1, -1, 2, 0.5};
	for (size_t i = 0; i < sizeof special / sizeof *special; i++)
		add(&in, special[i]);
	double tiny = f64 ? 4.9406564584124654e-324 : FLT_TRUE_MIN;
	double minn = f64 ? DBL_MIN : FLT_MIN, maxf = f64 ? DBL_MAX : FLT_MAX;
	double edges[] = {tiny, -tiny, minn, -minn, maxf, -maxf,
	                  f64 ? 709.782712893384 : 88.7228391,    // exp overflows above
	                  f64 ? -708.3964185322641 : -87.3365479, // exp's results turn denormal
	                  f64 ? -745.1332191019411 : -103.972084, // and round to 0 below
	                  0.625, -0.625, 1, -1, 0.5, -0.5, 1e-8, -1e-8, f64 ? 0x1p-27 : 0x1p-12,
	                  2, 3, 8, 10, -2, -3, -8, -10, -20.5, -0.5, 1.4616321449683623, 6, -6,
	                  f64 ? 0x1p-70 : 0x1p-30, f64 ? -0x1p-70 : -0x1p-30, f64 ? 0x1p52 : 0x1p23,
	                  f64 ? -0x1p52 : -0x1p23, -2.4570247382208006, -2.7476826467274127,
	                  -0.5040830082644554, -1.5734984731623904};
	for (size_t i = 0; i < sizeof edges / sizeof *edges; i++)
		around(&in, edges[i], 64, f64);
	// Every value is representable in the format.
	if (!f64)
		for (size_t i = 0; i < in.n; i++)
			in.v[i] = (float)in.v[i];
	return in;
}

static void
check_dtype(const char *dir, int f64)
{
	Inputs in = inputs(f64);
	const char *T = f64 ? "f64" : "f32";
	char src[1024], outs[512] = "";
	for (int op = 0; op < NOPS; op++)
		snprintf(outs + strlen(outs), sizeof outs - strlen(outs), "%s%s[%zu]", op ? ", " : "", T, in.n);
	snprintf(src, sizeof src,
	         "param x: %s[%zu] = zeros(shape=[%zu])\n"
	         "def forward() -> (%s) {\n"
	         "  return exp(x), log(x), log1p(x), expm1(x), tanh(x), erf(x), lgamma(x), digamma(x),\n"
	         "         polygamma(x, n=1)\n"
	         "}\n",
	         T, in.n, in.n, outs);
	FeOptions fo = {.diag = stderr};
	Module *m = fe_parse_string("math.ir", src, strlen(src), &fo);
	CHECK(m != NULL);
	if (!m)
		return;
	char path[512], err[4096] = "";
	snprintf(path, sizeof path, "%s/math_%s.so", dir, T);
	char *ir = NULL;
	size_t nir = 0;
	FILE *llvm = open_memstream(&ir, &nir);
	static const char *const tasks[] = {"forward"};
	CgOptions o = {.tasks = tasks, .ntasks = 1, .opt_level = -1, .emit_llvm = llvm};
	int ok = cg_compile_module(m, &o, path, err, sizeof err);
	fclose(llvm);
	if (!ok)
		fprintf(stderr, "compile: %s\n", err);
	CHECK(ok);
	ir_module_free(m);
	if (!ok)
		return;
	// Vector code, and none of the libm calls it replaced.
	CHECK(strstr(ir, f64 ? "<4 x double>" : "<8 x float>") != NULL);
	static const char *const calls[] = {"@expf(",  "@exp(",   "@logf(",   "@log(",      "@log1pf(",
	                                    "@log1p(", "@expm1f(", "@expm1(", "@tanhf(",    "@tanh(",
	                                    "@llvm.exp.", "@llvm.log.", "@erff(", "@erf(",
	                                    "@fadc_lgamma", "@fadc_polygamma", NULL};
	for (int i = 0; calls[i]; i++) {
		const char *c = strstr(ir, calls[i]);
		CHECK(c == NULL);
		if (c)
			fprintf(stderr, "%s: the LLVM IR calls %.20s\n", T, c);
	}
	free(ir);

	fadc_context *ctx;
	fadc_model *fm;
	CHECK(fadc_context_create(NULL, &ctx) == FADC_OK);
	CHECK(fadc_model_open(ctx, path, 0, &fm) == FADC_OK);
	int64_t n = (int64_t)in.n;
	fadc_tensor *x;
	CHECK(fadc_tensor_create(ctx, f64 ? FADC_F64 : FADC_F32, 1, &n, &x) == FADC_OK);
	if (f64)
		fadc_tensor_write(x, in.v, in.n * sizeof(double));
	else {
		float *xf = malloc(in.n * sizeof *xf);
		for (size_t i = 0; i < in.n; i++)
			xf[i] = (float)in.v[i];
		fadc_tensor_write(x, xf, in.n * sizeof *xf);
		free(xf);
	}
	CHECK(fadc_model_bind(fm, "x", x) == FADC_OK);
	int task;
	CHECK(fadc_model_find_task(fm, "forward", &task) == FADC_OK);
	fadc_tensor *out[NOPS] = {0};
	fadc_status s = fadc_run(fm, task, NULL, 0, out, NOPS);
	CHECK(s == FADC_OK);
	if (s != FADC_OK)
		fprintf(stderr, "run: %s\n", fadc_context_error(ctx));
	for (int op = 0; op < NOPS && s == FADC_OK; op++) {
		const void *data = fadc_tensor_data(out[op]);
		double worst = 0, at = 0, got_at = 0, worstneg = 0, atneg = 0, absx0 = 0;
		size_t nbad = 0;
		for (size_t i = 0; i < in.n; i++) {
			double g = f64 ? ((const double *)data)[i] : ((const float *)data)[i];
			double e = ulp_err(ref(op, in.v[i]), g, f64, scale(op, in.v[i]));
			int refl = boundneg[op] > 0 && in.v[i] < 0;
			if (op == DIGAMMA && fabsl(in.v[i] - X0_L) < 0.125L && isfinite(g))
				absx0 = fmax(absx0, (double)fabsl(g - ref(op, in.v[i])));
			if (e > (refl ? boundneg[op] : bound[f64][op]))
				nbad++;
			if (refl) {
				if (e > worstneg || isnan(e)) {
					worstneg = e;
					atneg = in.v[i];
				}
				continue;
			}
			if (e > worst || (isnan(e) && !isnan(worst))) {
				worst = e;
				at = in.v[i];
				got_at = g;
			}
		}
		if (boundneg[op] > 0)
			printf("%s %-5s: x < 0, max error %.3f ulp of the largest term at x = %a\n", T, opname[op],
			       worstneg, atneg);
		if (op == DIGAMMA) {
			printf("%s %-5s: |x - x0| < 1/8, max absolute error %.3g\n", T, opname[op], absx0);
			CHECK(absx0 <= (f64 ? 0x1p-53 : 0x1p-24));
		}
		printf("%s %-5s: %zu inputs, max error %.3f ulp at x = %a (got %a, want %a)\n", T,
		       opname[op], in.n, worst, at, got_at, (double)ref(op, at));
		CHECK(nbad == 0);
		if (nbad)
			fprintf(stderr, "%s %s: %zu results above the bound\n", T, opname[op], nbad);
	}
	fadc_model_close(fm);
	fadc_tensor_release(x);
	fadc_context_destroy(ctx);
	unlink(path);
	free(in.v);
}

// Each of erf, lgamma and digamma alone in a kernel: the loop must still be
// vector code (a scalar call left in the body would keep it scalar), with
// no call of libm's or the support library's version.
static void
check_vectorized(const char *dir, const char *fn, int f64)
{
	const char *T = f64 ? "f64" : "f32";
	char src[512], path[512], err[4096] = "";
	int pg = strcmp(fn, "polygamma1") == 0;
	snprintf(src, sizeof src,
	         "param x: %s[4096] = uniform(-8, 8, seed=1)\n"
	         "def forward() -> %s[4096] { return %s(x%s) }\n",
	         T, T, pg ? "polygamma" : fn, pg ? ", n=1" : "");
	FeOptions fo = {.diag = stderr};
	Module *m = fe_parse_string("vec.ir", src, strlen(src), &fo);
	CHECK(m != NULL);
	if (!m)
		return;
	snprintf(path, sizeof path, "%s/vec_%s_%s.so", dir, fn, T);
	char *ir = NULL;
	size_t nir = 0;
	FILE *llvm = open_memstream(&ir, &nir);
	static const char *const tasks[] = {"forward"};
	CgOptions o = {.tasks = tasks, .ntasks = 1, .opt_level = -1, .emit_llvm = llvm};
	int ok = cg_compile_module(m, &o, path, err, sizeof err);
	fclose(llvm);
	ir_module_free(m);
	CHECK(ok);
	if (!ok) {
		fprintf(stderr, "compile: %s\n", err);
		free(ir);
		return;
	}
	int vec = strstr(ir, f64 ? "<4 x double>" : "<8 x float>") != NULL;
	int call = strstr(ir, "@erf") || strstr(ir, "@fadc_lgamma") || strstr(ir, "@fadc_polygamma");
	CHECK(vec && !call);
	if (!vec || call)
		fprintf(stderr, "%s(x: %s): %s\n", fn, T, !vec ? "no vector code" : "a scalar call remains");
	free(ir);
	unlink(path);
}

// digamma_ref against closed forms and against the interpreter's double
// code, so that an error in the reference cannot pass for one in codegen.
static void
check_digamma_ref(void)
{
	const long double g = 0.577215664901532860606512090082402431L;
	const long double ln2 = 0.693147180559945309417232121458176568L;
	const long double cf[][2] = {
		{1, -g},
		{0.5L, -g - 2 * ln2},
		{0.25L, -g - PI_L / 2 - 3 * ln2},
		{-0.5L, -g - 2 * ln2 + 2},
		{5, 1 + 1.0L / 2 + 1.0L / 3 + 1.0L / 4 - g},
		{X0_L, 0},
	};
	for (size_t i = 0; i < sizeof cf / sizeof *cf; i++) {
		long double d = fabsl(digamma_ref(cf[i][0]) - cf[i][1]);
		CHECK(d < 1e-18L);
		if (d >= 1e-18L)
			fprintf(stderr, "digamma_ref(%Lg): off by %Lg\n", cf[i][0], d);
	}
	double worst = 0;
	for (int i = 0; i <= 20000; i++) {
		double x = -20.3 + 50.0 * i / 20000;
		if (x == floor(x))
			continue;
		long double r = digamma_ref(x), sc = fmaxl(1, scale(DIGAMMA, x));
		double d = (double)(fabsl((long double)ir_polygamma(0, x) - r) / fmaxl(fabsl(r), sc));
		worst = d > worst ? d : worst;
	}
	printf("digamma_ref against ir_polygamma on [-20.3, 29.7]: %.3g\n", worst);
	CHECK(worst < 1e-14);
	const long double pi2 = PI_L * PI_L;
	const long double tf[][2] = {
		{1, pi2 / 6}, {2, pi2 / 6 - 1}, {0.5L, pi2 / 2}, {-0.5L, pi2 / 2 + 4}};
	for (size_t i = 0; i < sizeof tf / sizeof *tf; i++) {
		long double d = fabsl(trigamma_ref(tf[i][0]) - tf[i][1]);
		CHECK(d < 1e-17L);
		if (d >= 1e-17L)
			fprintf(stderr, "trigamma_ref(%Lg): off by %Lg\n", tf[i][0], d);
	}
	worst = 0;
	for (int i = 0; i <= 20000; i++) {
		double x = -20.3 + 50.0 * i / 20000;
		if (x == floor(x))
			continue;
		long double r = trigamma_ref(x);
		double d = (double)(fabsl((long double)ir_polygamma(1, x) - r) / fmaxl(r, scale(TRIGAMMA, x)));
		worst = d > worst ? d : worst;
	}
	printf("trigamma_ref against ir_polygamma on [-20.3, 29.7]: %.3g\n", worst);
	CHECK(worst < 1e-14);
}

int
main(void)
{
	char dir[] = "/tmp/fadc-math.XXXXXX";
	const char *tmp = getenv("TMPDIR");
	char buf[4096];
	snprintf(buf, sizeof buf, "%s/fadc-math.XXXXXX", tmp && *tmp ? tmp : "/tmp");
	char *d = mkdtemp(buf);
	if (!d)
		d = mkdtemp(dir);
	CHECK(d != NULL);
	if (!d)
		return 1;
	check_digamma_ref();
	static const char *const vfn[] = {"erf", "lgamma", "digamma", "polygamma1"};
	for (int i = 0; i < 4; i++)
		for (int f64 = 0; f64 < 2; f64++)
			check_vectorized(d, vfn[i], f64);
	check_dtype(d, 0);
	check_dtype(d, 1);
	rmdir(d);
	return TU_DONE("test_codegen_math");
}
