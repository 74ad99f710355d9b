// tests/unit/test_codegen_math.c -- the vectorizable exp, log, log1p,
// expm1 and tanh of the LLVM backend (codegen/llvm.c, "special
// functions") against libm in long double (64-bit significands: an oracle
// 11 bits more precise than f64), in f32 and in f64.
//
// Inputs: a sweep of bit patterns over the whole format (every 4093rd f32,
// every 2^44 + 1st f64: every binade of both signs, denormals, infinities
// and NaNs), dense grids over the ranges where the functions do their work
// ([-1, 1], [-30, 30], the overflow and underflow ranges of exp, [0, 2]
// around log's 1, (-1, -0.9] near log1p's pole), and the special values
// and thresholds one by one (±0, ±inf, NaN, the smallest denormal, the
// largest finite, exp's overflow and underflow edges, tanh's switch at
// 0.625).  The error of each result is measured in units in the last
// place of the exact value in the result's format (denormal spacing
// below the normal range); a NaN must be a NaN, an infinity (or an exact
// value that rounds to one) must be that infinity exactly, ±0 in must be
// ±0 out where the function is odd at 0.  Bounds (docs/CODEGEN.md): f32
// <= 2 ulp for exp, log, log1p, tanh and <= 3 for expm1; f64 the same
// (measured figures are printed).  The LLVM IR must hold vector
// instructions and no libm call for these functions, so the test also
// fails if the kernels stop vectorizing.
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
#include "testutil.h"

enum { NOPS = 5 };
static const char *const opname[NOPS] = {"exp", "log", "log1p", "expm1", "tanh"};
// Bounds in ulp, f32 then f64.
static const double bound[2][NOPS] = {{2, 2, 2, 3, 2}, {2, 2, 2, 3, 2}};

static long double
ref(int op, long double x)
{
	switch (op) {
	case 0:
		return expl(x);
	case 1:
		return logl(x);
	case 2:
		return log1pl(x);
	case 3:
		return expm1l(x);
	default:
		return tanhl(x);
	}
}

// Error of got against the exact r in ulps of the format (f64: 53 bits,
// else 24); INFINITY when a NaN, an infinity or a sign of zero is wrong.
static double
ulp_err(long double r, double got, int f64)
{
	if (isnan(r))
		return isnan(got) ? 0 : INFINITY;
	double rr = f64 ? (double)r : (double)(float)r; // r rounded to the format
	if (isinf(rr) || isinf(got) || isnan(got))
		return got == rr ? 0 : INFINITY;
	if (r == 0)
		return got == 0 && signbit(got) == signbit((double)r) ? 0 : INFINITY;
	int p = f64 ? 53 : 24, emin = f64 ? -1022 : -126, ex;
	frexpl(fabsl(r), &ex); // |r| in [2^(ex-1), 2^ex)
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

static Inputs
inputs(int f64)
{
	Inputs in = {0};
	if (f64) {
		for (uint64_t i = 0; i < (1u << 20); i++) {
			uint64_t b = i * 0x100000000001ull;
			double x;
			memcpy(&x, &b, 8);
			add(&in, x);
		}
	} else {
		for (uint64_t b = 0; b < (1ull << 32); b += 4093) {
			uint32_t b32 = (uint32_t)b;
			float x;
			memcpy(&x, &b32, 4);
			add(&in, x);
		}
	}
	grid(&in, -1, 1, 400000);
	grid(&in, -30, 30, 400000);
	grid(&in, f64 ? -746 : -105, f64 ? -700 : -85, 100000); // exp's denormal results
	grid(&in, f64 ? 700 : 85, f64 ? 710 : 89, 50000); // exp near overflow
	grid(&in, 0, 2, 200000);
	grid(&in, -1, -0.9, 50000);
	grid(&in, -1e-6, 1e-6, 20000);
	double special[] = {0, -0.0, INFINITY, -INFINITY, NAN, -NAN, 1, -1, 2, 0.5};
	for (size_t i = 0; i < sizeof special / sizeof *special; i++)
		add(&in, special[i]);
	double tiny = f64 ? 4.9406564584124654e-324 : FLT_TRUE_MIN;
	double minn = f64 ? DBL_MIN : FLT_MIN, maxf = f64 ? DBL_MAX : FLT_MAX;
	double edges[] = {tiny, -tiny, minn, -minn, maxf, -maxf,
	                  f64 ? 709.782712893384 : 88.7228391,    // exp overflows above
	                  f64 ? -708.3964185322641 : -87.3365479, // exp's results turn denormal
	                  f64 ? -745.1332191019411 : -103.972084, // and round to 0 below
	                  0.625, -0.625, 1, -1, 0.5, -0.5, 1e-8, -1e-8, f64 ? 0x1p-27 : 0x1p-12};
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
	char src[1024];
	snprintf(src, sizeof src,
	         "param x: %s[%zu] = zeros(shape=[%zu])\n"
	         "def forward() -> (%s[%zu], %s[%zu], %s[%zu], %s[%zu], %s[%zu]) {\n"
	         "  return exp(x), log(x), log1p(x), expm1(x), tanh(x)\n"
	         "}\n",
	         T, in.n, in.n, T, in.n, T, in.n, T, in.n, T, in.n, T, in.n);
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
	                                    "@llvm.exp.", "@llvm.log.", NULL};
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
		double worst = 0, at = 0, got_at = 0;
		size_t nbad = 0;
		for (size_t i = 0; i < in.n; i++) {
			double g = f64 ? ((const double *)data)[i] : ((const float *)data)[i];
			double e = ulp_err(ref(op, in.v[i]), g, f64);
			if (e > bound[f64][op])
				nbad++;
			if (e > worst || (isnan(e) && !isnan(worst))) {
				worst = e;
				at = in.v[i];
				got_at = g;
			}
		}
		printf("%s %-5s: %zu inputs, max error %.3f ulp at x = %a (got %a, want %a)\n", T,
		       opname[op], in.n, worst, at, got_at, (double)ref(op, at));
		CHECK(nbad == 0);
		if (nbad)
			fprintf(stderr, "%s %s: %zu results above %g ulp\n", T, opname[op], nbad,
			        bound[f64][op]);
	}
	fadc_model_close(fm);
	fadc_tensor_release(x);
	fadc_context_destroy(ctx);
	unlink(path);
	free(in.v);
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
	check_dtype(d, 0);
	check_dtype(d, 1);
	rmdir(d);
	return TU_DONE("test_codegen_math");
}
