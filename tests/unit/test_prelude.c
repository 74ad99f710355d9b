// tests/unit/test_prelude.c -- the composites of frontend/prelude.ir.
//
// Each prelude function is called from a small module whose inputs are
// f64 constants with known values (formulas of iota: sin, cos, exp of the
// flat index), initialized by ir_module_init and run by ir_interp.  The
// result is compared, at relative 1e-12, with the function's definition
// computed independently here in double with libm, following PyTorch's
// conventions: log_softmax with the max subtracted, nll/cross_entropy as
// means over the batch (and the extra axes), biased variance and eps 1e-5
// in layer_norm and batch_norm, and the log-densities of
// torch.distributions as models-spec.md section 3 writes them (the
// Bernoulli in BCE-with-logits' stable form).  The input formulas are
// evaluated the same way in both places, so inputs agree to the bit.
#include <stdint.h>
#include <stdlib.h>

#include "frontend.h"
#include "ir.h"
#include "testutil.h"

#define TOL 1e-12

static const double PI = 3.14159265358979323846;

// ---------------------------------------------------------------- running

typedef struct Run {
	Module *m;
	Tensor *val; // declarations' values
	Tensor *out; // forward's outputs
} Run;

// Parses and runs src; on failure prints why and returns 0.
static int
run(const char *what, const char *src, Run *r)
{
	char err[512];
	FeOptions o = {.diag = stderr};
	memset(r, 0, sizeof *r);
	r->m = fe_parse_string(what, src, strlen(src), &o);
	if (!r->m)
		return 0;
	const Module *m = r->m;
	const Graph *g = m->main;
	r->val = calloc(m->ndecl + 1, sizeof *r->val);
	r->out = calloc(g->nout + 1, sizeof *r->out);
	Tensor *in = calloc(g->ninput + 1, sizeof *in);
	int ok = r->val && r->out && in;
	if (ok && !ir_module_init(m, NULL, NULL, r->val, 0, err, sizeof err)) {
		fprintf(stderr, "%s: init: %s\n", what, err);
		ok = 0;
	}
	for (uint32_t i = 0; ok && i < g->ninput; i++) {
		int k = ir_module_find_decl(m, g->input[i].name);
		FADC_ASSERT(k >= 0, "test modules have no arguments");
		in[i] = r->val[k];
	}
	if (ok && !ir_interp(g, in, r->out, 0, err, sizeof err)) {
		fprintf(stderr, "%s: run: %s\n", what, err);
		ok = 0;
	}
	free(in);
	return ok;
}

static void
run_free(Run *r)
{
	if (r->m) {
		for (uint32_t i = 0; r->val && i < r->m->ndecl; i++)
			ir_tensor_free(&r->val[i]);
		for (uint32_t i = 0; r->out && i < r->m->main->nout; i++)
			ir_tensor_free(&r->out[i]);
	}
	free(r->val);
	free(r->out);
	ir_module_free(r->m);
	memset(r, 0, sizeof *r);
}

// Output `name` of the run, checked to have the given shape.
static const Tensor *
out(Run *r, const char *name, int rank, const int64_t *dim)
{
	const Graph *g = r->m->main;
	for (uint32_t i = 0; i < g->nout; i++)
		if (!strcmp(g->out[i].name, name)) {
			const Tensor *t = &r->out[i];
			int ok = t->shape.rank == rank && t->dtype == DT_F64;
			for (int d = 0; ok && d < rank; d++)
				ok = t->shape.dim[d] == dim[d];
			CHECK(ok);
			return ok ? t : NULL;
		}
	fprintf(stderr, "no output named '%s'\n", name);
	CHECK(0);
	return NULL;
}

// Compares output `name` elementwise with want[] (flat, row-major).
static void
check_out(Run *r, const char *name, int rank, const int64_t *dim, const double *want)
{
	const Tensor *t = out(r, name, rank, dim);
	if (!t)
		return;
	int64_t n = ir_numel(&t->shape);
	for (int64_t i = 0; i < n; i++) {
		tu_ncheck++;
		if (!tu_near(t->data[i], want[i], TOL)) {
			tu_nfail++;
			fprintf(stderr, "%s: output %s[%lld] = %.17g, want %.17g\n", r->m->name,
			        name, (long long)i, t->data[i], want[i]);
		}
	}
}

#define DIMS(...) ((const int64_t[]){__VA_ARGS__})

// ---------------------------------------------------------------- inputs
//
// Each generator is written twice, in C here and as an IR expression in
// the modules (over the flat index k), with the same operations in the
// same order.

// A(k) = sin(1.3 k + 0.2) * 2, in [-2, 2]
static double
gen_a(int64_t k)
{
	return sin((double)k * 1.3 + 0.2) * 2;
}
#define IR_A(shape, n) "sin(reshape(iota(shape=[" #n "]), " shape ") * 1.3 + 0.2) * 2"

// B(k) = cos(0.7 k - 0.4), in [-1, 1]
static double
gen_b(int64_t k)
{
	return cos((double)k * 0.7 - 0.4);
}
#define IR_B(shape, n) "cos(reshape(iota(shape=[" #n "]), " shape ") * 0.7 - 0.4)"

// P(k) = exp(sin(0.9 k)), in [1/e, e]: scales, rates, degrees of freedom
static double
gen_p(int64_t k)
{
	return exp(sin((double)k * 0.9));
}
#define IR_P(shape, n) "exp(sin(reshape(iota(shape=[" #n "]), " shape ") * 0.9))"

static void
fill(double *v, int64_t n, double (*gen)(int64_t))
{
	for (int64_t k = 0; k < n; k++)
		v[k] = gen(k);
}

// ---------------------------------------------------------------- softmax family

// Row-wise over the last axis of an (R, C) array: x - logsumexp(x).
static void
ref_log_softmax_rows(const double *x, int64_t rows, int64_t cols, double *y)
{
	for (int64_t r = 0; r < rows; r++) {
		const double *xr = x + r * cols;
		double m = xr[0];
		for (int64_t c = 1; c < cols; c++)
			m = fmax(m, xr[c]);
		double s = 0;
		for (int64_t c = 0; c < cols; c++)
			s += exp(xr[c] - m);
		for (int64_t c = 0; c < cols; c++)
			y[r * cols + c] = xr[c] - (m + log(s));
	}
}

static void
transpose(const double *x, int64_t rows, int64_t cols, double *y)
{
	for (int64_t r = 0; r < rows; r++)
		for (int64_t c = 0; c < cols; c++)
			y[c * rows + r] = x[r * cols + c];
}

static void
test_softmax(void)
{
	Run r;
	// clang-format off
	const char *src =
	    "const x: f64[3, 4] = " IR_A("[3, 4]", 12) "\n"
	    "def forward() -> (f64[3, 4], f64[3, 4], f64[3, 4], f64[3, 4]) {\n"
	    "  return log_softmax(x) as ls, log_softmax(x, 0) as ls0,\n"
	    "         softmax(x) as sm, softmax(x, axis=-2) as sm0\n"
	    "}\n";
	// clang-format on
	if (!run("softmax.ir", src, &r)) {
		CHECK(0);
		run_free(&r);
		return;
	}
	double x[12], xt[12], ls[12], ls0t[12], ls0[12], sm[12], sm0[12];
	fill(x, 12, gen_a);
	ref_log_softmax_rows(x, 3, 4, ls);
	transpose(x, 3, 4, xt);
	ref_log_softmax_rows(xt, 4, 3, ls0t);
	transpose(ls0t, 4, 3, ls0);
	for (int i = 0; i < 12; i++) {
		sm[i] = exp(ls[i]);
		sm0[i] = exp(ls0[i]);
	}
	check_out(&r, "ls", 2, DIMS(3, 4), ls);
	check_out(&r, "ls0", 2, DIMS(3, 4), ls0);
	check_out(&r, "sm", 2, DIMS(3, 4), sm);
	check_out(&r, "sm0", 2, DIMS(3, 4), sm0);
	// Each softmax row sums to 1.
	const Tensor *t = out(&r, "sm", 2, DIMS(3, 4));
	for (int i = 0; t && i < 3; i++) {
		const double *row = t->data + 4 * i;
		CHECK_NEAR(row[0] + row[1] + row[2] + row[3], 1.0, TOL);
	}
	run_free(&r);

	// Stability: logits of 1000 and -1000 (exp would overflow).
	// clang-format off
	src =
	    "const x: f64[2, 3] = (reshape(iota(shape=[6]), [2, 3]) - 2.5) * 400\n"
	    "def forward() -> f64[2, 3] { return log_softmax(x) as ls }\n";
	// clang-format on
	if (!run("softmax_big.ir", src, &r)) {
		CHECK(0);
		run_free(&r);
		return;
	}
	double big[6], want[6];
	for (int k = 0; k < 6; k++)
		big[k] = ((double)k - 2.5) * 400;
	ref_log_softmax_rows(big, 2, 3, want);
	check_out(&r, "ls", 2, DIMS(2, 3), want);
	run_free(&r);
}

// ---------------------------------------------------------------- losses

static void
test_nll_cross_entropy(void)
{
	Run r;
	// Targets [2, 0, 3] and, for the (N, C, d) case, [[1, 2], [0, 1]].
	// clang-format off
	const char *src =
	    "const logits: f64[3, 4] = " IR_A("[3, 4]", 12) "\n"
	    "const t: i64[3] = concat(full(2, shape=[1], dtype=i64),\n"
	    "                         full(0, shape=[1], dtype=i64),\n"
	    "                         full(3, shape=[1], dtype=i64), axis=0)\n"
	    "const l3: f64[2, 3, 2] = " IR_B("[2, 3, 2]", 12) "\n"
	    "const t3: i64[2, 2] = iota(axis=1) + 1 - iota(axis=0)\n"
	    "def forward() -> (f64[], f64[], f64[], f64[], f64[]) {\n"
	    "  lp = log_softmax(logits, 1)\n"
	    "  return nll(lp, t) as nll, cross_entropy(logits, t) as ce,\n"
	    "         nll(log_softmax(l3, 1), t3) as nll3, cross_entropy(l3, t3, axis=1) as ce3,\n"
	    "         nll(log_softmax(transpose(logits, 0, 1), 0), t, axis=0) as nll0\n"
	    "}\n";
	// clang-format on
	if (!run("nll.ir", src, &r)) {
		CHECK(0);
		run_free(&r);
		return;
	}
	// 2-d: -mean_n logp[n][t[n]].
	const int t[3] = {2, 0, 3};
	double x[12], lp[12];
	fill(x, 12, gen_a);
	ref_log_softmax_rows(x, 3, 4, lp);
	double nll = -(lp[0 * 4 + t[0]] + lp[1 * 4 + t[1]] + lp[2 * 4 + t[2]]) / 3;
	check_out(&r, "nll", 0, NULL, &nll);
	check_out(&r, "ce", 0, NULL, &nll);
	check_out(&r, "nll0", 0, NULL, &nll);
	// 3-d (N=2, C=3, d=2), classes on axis 1: t3 = [[1, 2], [0, 1]]
	// (j + 1 - n).
	const int t3[2][2] = {{1, 2}, {0, 1}};
	double l3[12];
	fill(l3, 12, gen_b);
	double s = 0;
	for (int n = 0; n < 2; n++)
		for (int d = 0; d < 2; d++) {
			double m = -INFINITY, z = 0;
			for (int c = 0; c < 3; c++)
				m = fmax(m, l3[n * 6 + c * 2 + d]);
			for (int c = 0; c < 3; c++)
				z += exp(l3[n * 6 + c * 2 + d] - m);
			s += l3[n * 6 + t3[n][d] * 2 + d] - (m + log(z));
		}
	double nll3 = -s / 4;
	check_out(&r, "nll3", 0, NULL, &nll3);
	check_out(&r, "ce3", 0, NULL, &nll3);
	run_free(&r);
}

static void
test_mse(void)
{
	Run r;
	// clang-format off
	const char *src =
	    "const a: f64[2, 3] = " IR_A("[2, 3]", 6) "\n"
	    "const b: f64[2, 3] = " IR_B("[2, 3]", 6) "\n"
	    "const c: f64[3] = " IR_P("[3]", 3) "\n"
	    "def forward() -> (f64[], f64[], f64[]) {\n"
	    "  return mse(a, b) as m, mse(b, a) as m2, mse(a, c) as mb\n"
	    "}\n";
	// clang-format on
	if (!run("mse.ir", src, &r)) {
		CHECK(0);
		run_free(&r);
		return;
	}
	double a[6], b[6], c[3], m = 0, mb = 0;
	fill(a, 6, gen_a);
	fill(b, 6, gen_b);
	fill(c, 3, gen_p);
	for (int i = 0; i < 6; i++) {
		m += (a[i] - b[i]) * (a[i] - b[i]);
		mb += (a[i] - c[i % 3]) * (a[i] - c[i % 3]); // c broadcast over rows
	}
	m /= 6;
	mb /= 6;
	check_out(&r, "m", 0, NULL, &m);
	check_out(&r, "m2", 0, NULL, &m);
	check_out(&r, "mb", 0, NULL, &mb);
	run_free(&r);
}

// ---------------------------------------------------------------- layers

static void
test_linear(void)
{
	Run r;
	// clang-format off
	const char *src =
	    "const x: f64[2, 3] = " IR_A("[2, 3]", 6) "\n"
	    "const x3: f64[2, 2, 3] = " IR_B("[2, 2, 3]", 12) "\n"
	    "const w: f64[4, 3] = " IR_B("[4, 3]", 12) "\n"
	    "const b: f64[4] = " IR_P("[4]", 4) "\n"
	    "def forward() -> (f64[2, 4], f64[2, 4], f64[2, 2, 4]) {\n"
	    "  return linear(x, w, b) as y, linear_nobias(x, w) as y0, linear(x3, w, b) as y3\n"
	    "}\n";
	// clang-format on
	if (!run("linear.ir", src, &r)) {
		CHECK(0);
		run_free(&r);
		return;
	}
	double x[6], x3[12], w[12], b[4], y[8], y0[8], y3[16];
	fill(x, 6, gen_a);
	fill(x3, 12, gen_b);
	fill(w, 12, gen_b);
	fill(b, 4, gen_p);
	// y = x W^T + b
	for (int n = 0; n < 2; n++)
		for (int o = 0; o < 4; o++) {
			double s = 0;
			for (int k = 0; k < 3; k++)
				s += x[n * 3 + k] * w[o * 3 + k];
			y0[n * 4 + o] = s;
			y[n * 4 + o] = s + b[o];
		}
	for (int n = 0; n < 4; n++) // the two leading axes of x3 as one batch
		for (int o = 0; o < 4; o++) {
			double s = 0;
			for (int k = 0; k < 3; k++)
				s += x3[n * 3 + k] * w[o * 3 + k];
			y3[n * 4 + o] = s + b[o];
		}
	check_out(&r, "y", 2, DIMS(2, 4), y);
	check_out(&r, "y0", 2, DIMS(2, 4), y0);
	check_out(&r, "y3", 3, DIMS(2, 2, 4), y3);
	run_free(&r);
}

// Normalizes each group of `n` values (elements base + i * stride) with
// its biased variance: (x - mean) / sqrt(var + eps).
static void
ref_normalize(const double *x, double *y, int64_t base, int64_t stride, int64_t n, double eps)
{
	double mu = 0, var = 0;
	for (int64_t i = 0; i < n; i++)
		mu += x[base + i * stride];
	mu /= (double)n;
	for (int64_t i = 0; i < n; i++)
		var += (x[base + i * stride] - mu) * (x[base + i * stride] - mu);
	var /= (double)n; // biased, as torch's normalization layers
	for (int64_t i = 0; i < n; i++)
		y[base + i * stride] = (x[base + i * stride] - mu) / sqrt(var + eps);
}

// S(k) = A(k) / 100: a small spread, so that eps = 1e-5 matters (the
// variance is about 2e-4) and a wrong eps or an unbiased variance shows.
static double
gen_s(int64_t k)
{
	return gen_a(k) / 100;
}
#define IR_S(shape, n) "(" IR_A(shape, n) ") / 100"

static void
test_layer_norm(void)
{
	Run r;
	// clang-format off
	const char *src =
	    "const x: f64[2, 3, 4] = " IR_S("[2, 3, 4]", 24) "\n"
	    "const w: f64[4] = " IR_P("[4]", 4) "\n"
	    "const b: f64[4] = " IR_B("[4]", 4) "\n"
	    "def forward() -> (f64[2, 3, 4], f64[2, 3, 4]) {\n"
	    "  return layer_norm(x, w, b) as y, layer_norm(x, w, b, eps=0.001) as ye\n"
	    "}\n";
	// clang-format on
	if (!run("layer_norm.ir", src, &r)) {
		CHECK(0);
		run_free(&r);
		return;
	}
	double x[24], w[4], b[4], y[24], ye[24];
	fill(x, 24, gen_s);
	fill(w, 4, gen_p);
	fill(b, 4, gen_b);
	for (int g = 0; g < 6; g++) {
		ref_normalize(x, y, g * 4, 1, 4, 1e-5);
		ref_normalize(x, ye, g * 4, 1, 4, 1e-3);
	}
	for (int i = 0; i < 24; i++) {
		y[i] = y[i] * w[i % 4] + b[i % 4];
		ye[i] = ye[i] * w[i % 4] + b[i % 4];
	}
	check_out(&r, "y", 3, DIMS(2, 3, 4), y);
	check_out(&r, "ye", 3, DIMS(2, 3, 4), ye);
	run_free(&r);
}

static void
test_batch_norm(void)
{
	Run r;
	// clang-format off
	const char *src =
	    "const x: f64[2, 3, 4] = " IR_S("[2, 3, 4]", 24) "\n"
	    "const x4: f64[2, 3, 2, 2] = " IR_S("[2, 3, 2, 2]", 24) "\n"
	    "const x2: f64[4, 3] = " IR_S("[4, 3]", 12) "\n"
	    "const w: f64[3] = " IR_P("[3]", 3) "\n"
	    "const b: f64[3] = " IR_B("[3]", 3) "\n"
	    "def forward() -> (f64[2, 3, 4], f64[2, 3, 2, 2], f64[4, 3], f64[2, 3, 4]) {\n"
	    "  return batch_norm(x, w, b) as y, batch_norm(x4, w, b) as y4,\n"
	    "         batch_norm(x2, w, b) as y2, batch_norm(x, w, b, 0.01) as ye\n"
	    "}\n";
	// clang-format on
	if (!run("batch_norm.ir", src, &r)) {
		CHECK(0);
		run_free(&r);
		return;
	}
	double x[24], x2[12], w[3], b[3], y[24], y4[24], y2[12], ye[24];
	fill(x, 24, gen_s);
	fill(x2, 12, gen_s);
	fill(w, 3, gen_p);
	fill(b, 3, gen_b);
	// Channel c of (N=2, C=3, L=4): elements n*12 + c*4 + l, over n and l.
	// Gather each channel into a contiguous group, normalize, scatter back.
	for (int c = 0; c < 3; c++) {
		double gx[8], gy[8], gye[8];
		for (int n = 0; n < 2; n++)
			for (int l = 0; l < 4; l++)
				gx[n * 4 + l] = x[n * 12 + c * 4 + l];
		ref_normalize(gx, gy, 0, 1, 8, 1e-5);
		ref_normalize(gx, gye, 0, 1, 8, 0.01);
		for (int n = 0; n < 2; n++)
			for (int l = 0; l < 4; l++) {
				y[n * 12 + c * 4 + l] = gy[n * 4 + l] * w[c] + b[c];
				ye[n * 12 + c * 4 + l] = gye[n * 4 + l] * w[c] + b[c];
			}
	}
	// (2, 3, 2, 2) has the same flat layout as (2, 3, 4): the same values.
	memcpy(y4, y, sizeof y);
	// (N=4, C=3): channel c is the column, over the 4 rows.
	for (int c = 0; c < 3; c++) {
		ref_normalize(x2, y2, c, 3, 4, 1e-5);
		for (int n = 0; n < 4; n++)
			y2[n * 3 + c] = y2[n * 3 + c] * w[c] + b[c];
	}
	check_out(&r, "y", 3, DIMS(2, 3, 4), y);
	check_out(&r, "y4", 4, DIMS(2, 3, 2, 2), y4);
	check_out(&r, "y2", 2, DIMS(4, 3), y2);
	check_out(&r, "ye", 3, DIMS(2, 3, 4), ye);
	run_free(&r);
}

// ---------------------------------------------------------------- log-densities

static void
test_normal_logpdf(void)
{
	Run r;
	// x (2, 3), mean (3) and std (2, 1) broadcast; and numbers.
	// clang-format off
	const char *src =
	    "const x: f64[2, 3] = " IR_A("[2, 3]", 6) "\n"
	    "const m: f64[3] = " IR_B("[3]", 3) "\n"
	    "const s: f64[2, 1] = " IR_P("[2, 1]", 2) "\n"
	    "def forward() -> (f64[2, 3], f64[2, 3]) {\n"
	    "  return normal_logpdf(x, m, s) as lp, normal_logpdf(x, 0, 1) as std\n"
	    "}\n";
	// clang-format on
	if (!run("normal.ir", src, &r)) {
		CHECK(0);
		run_free(&r);
		return;
	}
	double x[6], m[3], s[2], lp[6], st[6];
	fill(x, 6, gen_a);
	fill(m, 3, gen_b);
	fill(s, 2, gen_p);
	// torch.distributions.Normal.log_prob:
	//   -((x - loc)^2) / (2 var) - log(scale) - log(sqrt(2 pi))
	for (int i = 0; i < 6; i++) {
		double loc = m[i % 3], sc = s[i / 3];
		double d = x[i] - loc;
		lp[i] = -(d * d) / (2 * sc * sc) - log(sc) - log(sqrt(2 * PI));
		st[i] = -(x[i] * x[i]) / 2 - log(sqrt(2 * PI));
	}
	check_out(&r, "lp", 2, DIMS(2, 3), lp);
	check_out(&r, "std", 2, DIMS(2, 3), st);
	run_free(&r);
}

static void
test_bernoulli_logpdf(void)
{
	Run r;
	// Relaxed labels y in [0, 1] against logits from -800 to 800 (where
	// exp overflows) and moderate ones.
	// clang-format off
	const char *src =
	    "const y: f64[2, 5] = (sin(reshape(iota(shape=[10]), [2, 5]) * 2.1) + 1) / 2\n"
	    "const l: f64[2, 5] = {\n"
	    "  k = reshape(iota(shape=[10]), [2, 5])\n"
	    "  return where(k < 5, (k - 2) * 400, " IR_A("[2, 5]", 10) ")\n"
	    "}\n"
	    "def forward() -> f64[2, 5] {\n"
	    "  return bernoulli_logits_logpdf(y, l) as lp\n"
	    "}\n";
	// clang-format on
	if (!run("bernoulli.ir", src, &r)) {
		CHECK(0);
		run_free(&r);
		return;
	}
	double lp[10];
	for (int k = 0; k < 10; k++) {
		double y = (sin((double)k * 2.1) + 1) / 2;
		double l = k < 5 ? ((double)k - 2) * 400 : gen_a(k);
		// -BCEWithLogits(l, y), PyTorch's stable form:
		//   loss = (1 - y) l + m + log(exp(-m) + exp(-l - m)),  m = max(-l, 0)
		double mx = fmax(-l, 0);
		lp[k] = -((1 - y) * l + mx + log(exp(-mx) + exp(-l - mx)));
	}
	check_out(&r, "lp", 2, DIMS(2, 5), lp);
	run_free(&r);
}

static void
test_studentt_logpdf(void)
{
	Run r;
	// clang-format off
	const char *src =
	    "const x: f64[2, 3] = " IR_A("[2, 3]", 6) "\n"
	    "const df: f64[2, 3] = " IR_P("[2, 3]", 6) " * 3\n"
	    "const loc: f64[3] = " IR_B("[3]", 3) "\n"
	    "const scale: f64[2, 1] = " IR_P("[2, 1]", 2) "\n"
	    "const tiny: f64[] = full(3e-6)\n"
	    "def forward() -> (f64[2, 3], f64[2, 3]) {\n"
	    "  return studentt_logpdf(x, df, loc, scale) as lp,\n"
	    "         studentt_logpdf(x, tiny, 0, 1) as lpt\n"
	    "}\n";
	// clang-format on
	if (!run("studentt.ir", src, &r)) {
		CHECK(0);
		run_free(&r);
		return;
	}
	double x[6], df[6], loc[3], sc[2], lp[6], lpt[6];
	fill(x, 6, gen_a);
	fill(df, 6, gen_p);
	for (int i = 0; i < 6; i++)
		df[i] *= 3;
	fill(loc, 3, gen_b);
	fill(sc, 2, gen_p);
	// torch.distributions.StudentT.log_prob:
	//   y = (x - loc) / scale
	//   Z = log(scale) + 0.5 log(df) + 0.5 log(pi) + lgamma(0.5 df) - lgamma(0.5 (df + 1))
	//   -0.5 (df + 1) log1p(y^2 / df) - Z
	for (int i = 0; i < 6; i++) {
		double v = df[i], s = sc[i / 3], y = (x[i] - loc[i % 3]) / s;
		double z =
		    log(s) + 0.5 * log(v) + 0.5 * log(PI) + lgamma(0.5 * v) - lgamma(0.5 * (v + 1));
		lp[i] = -0.5 * (v + 1) * log1p(y * y / v) - z;
		// The degrees of freedom of ppl_robust_reg can be tiny (3e-6).
		v = 3e-6;
		y = x[i];
		z = 0.5 * log(v) + 0.5 * log(PI) + lgamma(0.5 * v) - lgamma(0.5 * (v + 1));
		lpt[i] = -0.5 * (v + 1) * log1p(y * y / v) - z;
	}
	check_out(&r, "lp", 2, DIMS(2, 3), lp);
	check_out(&r, "lpt", 2, DIMS(2, 3), lpt);
	run_free(&r);
}

// xlogy(a, b) = a log b, and 0 where a = 0 (even where b = 0).
static double
xlogy(double a, double b)
{
	return a == 0 && !isnan(b) ? 0 : a * log(b);
}

static void
test_gamma_logpdf(void)
{
	Run r;
	// Generic values, then the edges: concentration 1 at x = 0 (xlogy(0, 0)
	// = 0: the density is the rate there), and concentration 2 at x = 0
	// (log 0 = -inf).
	// clang-format off
	const char *src =
	    "const x: f64[2, 3] = " IR_P("[2, 3]", 6) " * 2\n"
	    "const a: f64[3] = " IR_P("[3]", 3) " + 0.5\n"
	    "const b: f64[2, 1] = " IR_P("[2, 1]", 2) "\n"
	    "const z: f64[2] = zeros()\n"
	    "const ae: f64[2] = iota() + 1\n"
	    "def forward() -> (f64[2, 3], f64[2]) {\n"
	    "  return gamma_logpdf(x, a, b) as lp, gamma_logpdf(z, ae, 1.5) as edge\n"
	    "}\n";
	// clang-format on
	if (!run("gamma.ir", src, &r)) {
		CHECK(0);
		run_free(&r);
		return;
	}
	double x[6], a[3], b[2], lp[6];
	fill(x, 6, gen_p);
	fill(a, 3, gen_p);
	fill(b, 2, gen_p);
	// torch.distributions.Gamma.log_prob:
	//   xlogy(conc, rate) + xlogy(conc - 1, x) - rate x - lgamma(conc)
	for (int i = 0; i < 6; i++) {
		double xi = x[i] * 2, ai = a[i % 3] + 0.5, bi = b[i / 3];
		lp[i] = xlogy(ai, bi) + xlogy(ai - 1, xi) - bi * xi - lgamma(ai);
	}
	double edge[2] = {log(1.5) - lgamma(1.0), -INFINITY};
	check_out(&r, "lp", 2, DIMS(2, 3), lp);
	check_out(&r, "edge", 1, DIMS(2), edge);
	run_free(&r);
}

static void
test_exponential_logpdf(void)
{
	Run r;
	// clang-format off
	const char *src =
	    "const x: f64[2, 3] = " IR_P("[2, 3]", 6) "\n"
	    "const rate: f64[3] = " IR_P("[3]", 3) " * 0.5\n"
	    "def forward() -> (f64[2, 3], f64[2, 3]) {\n"
	    "  return exponential_logpdf(x, rate) as lp, exponential_logpdf(x, 2) as two\n"
	    "}\n";
	// clang-format on
	if (!run("exponential.ir", src, &r)) {
		CHECK(0);
		run_free(&r);
		return;
	}
	double x[6], rate[3], lp[6], two[6];
	fill(x, 6, gen_p);
	fill(rate, 3, gen_p);
	// torch.distributions.Exponential.log_prob: log(rate) - rate x
	for (int i = 0; i < 6; i++) {
		double rt = rate[i % 3] * 0.5;
		lp[i] = log(rt) - rt * x[i];
		two[i] = log(2.0) - 2 * x[i];
	}
	check_out(&r, "lp", 2, DIMS(2, 3), lp);
	check_out(&r, "two", 2, DIMS(2, 3), two);
	run_free(&r);
}

// Every function of the prelude is tested above: the list below must be
// the prelude's (a new prelude function needs a test here).
// clang-format off
static const char *const tested[] = {
    "log_softmax", "softmax", "nll", "cross_entropy", "mse", "linear", "linear_nobias",
    "layer_norm", "batch_norm", "normal_logpdf", "bernoulli_logits_logpdf", "studentt_logpdf",
    "gamma_logpdf", "exponential_logpdf",
};
// clang-format on

static int
is_tested(const char *name, size_t len)
{
	for (size_t i = 0; i < sizeof tested / sizeof tested[0]; i++)
		if (strlen(tested[i]) == len && !strncmp(tested[i], name, len))
			return 1;
	return 0;
}

static void
test_prelude_list(void)
{
	size_t found = 0;
	const char *p = fe_prelude_text, *end = fe_prelude_text + fe_prelude_len;
	for (; p < end; p++) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *eol = nl ? nl : end, *name = p + 4;
		const char *paren = eol - p > 4 ? memchr(name, '(', (size_t)(eol - name)) : NULL;
		if (paren && !strncmp(p, "def ", 4)) {
			size_t len = (size_t)(paren - name);
			tu_ncheck++;
			if (!is_tested(name, len)) {
				tu_nfail++;
				fprintf(stderr, "prelude '%.*s' has no test\n", (int)len, name);
			}
			found++;
		}
		p = eol;
	}
	CHECK(found == sizeof tested / sizeof tested[0]);
}

int
main(void)
{
	test_softmax();
	test_nll_cross_entropy();
	test_mse();
	test_linear();
	test_layer_norm();
	test_batch_norm();
	test_normal_logpdf();
	test_bernoulli_logpdf();
	test_studentt_logpdf();
	test_gamma_logpdf();
	test_exponential_logpdf();
	test_prelude_list();
	return TU_DONE("test_prelude");
}
