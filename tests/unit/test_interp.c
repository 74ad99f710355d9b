// tests/unit/test_interp.c -- the reference interpreter (ir/interp.c).
//
// Small graphs built directly with the builder, run by ir_interp, and
// compared with values derived by hand (the derivation is in the comment
// next to each literal) or with an independent formula written in the test
// (libm, a series, a brute-force search): never with the interpreter
// itself.  Every graph goes through run(), which records the ops it
// contains; main() fails if some op of ops.def was never exercised, so a
// new op needs a test here.
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>

#include "ir.h"
#include "testutil.h"

#define RUNSEED 0x5eed0123456789ull

static char errbuf[512];
static int covered[OP_COUNT];
static const double PI = 3.14159265358979323846;
static const double EULER = 0.57721566490153286061;
static const double ZETA3 = 1.2020569031595942854;

// ---------------------------------------------------------------- helpers

static Shape
sh(int rank, ...)
{
	Shape s = {.rank = rank};
	va_list ap;
	va_start(ap, rank);
	for (int i = 0; i < rank; i++)
		s.dim[i] = va_arg(ap, int);
	va_end(ap);
	return s;
}

static size_t
tnumel(const Tensor *t)
{
	size_t n = 1;
	for (int i = 0; i < t->shape.rank; i++)
		n *= (size_t)t->shape.dim[i];
	return n;
}

// Attributes from "name=value ..." (ints as "1,2,3", possibly empty; dtypes
// and enums by name); the rest keep their defaults.
static Attrs
attrs(int op, const char *spec)
{
	Attrs a;
	ir_attrs_default(op, &a);
	char buf[256];
	snprintf(buf, sizeof buf, "%s", spec ? spec : "");
	for (char *tok = strtok(buf, " "); tok; tok = strtok(NULL, " ")) {
		char *eq = strchr(tok, '=');
		FADC_ASSERT(eq, tok);
		*eq = 0;
		int k = ir_attr_index(op, tok);
		FADC_ASSERT(k >= 0, tok);
		const AttrSpec *s = &ir_op(op)->attr[k];
		char *v = eq + 1;
		switch (s->kind) {
		case AK_FLOAT:
			a.a[k].f = strtod(v, NULL);
			break;
		case AK_INTS:
			a.a[k].n = 0;
			for (char *p = v; *p;) {
				char *end;
				a.a[k].v[a.a[k].n++] = strtoll(p, &end, 10);
				p = *end ? end + 1 : end;
			}
			break;
		case AK_DTYPE:
			a.a[k].i = ir_dtype_lookup(v);
			break;
		case AK_ENUM:
			for (int e = 0; e < s->nenum; e++)
				if (!strcmp(s->enums[e], v))
					a.a[k].i = e;
			break;
		default:
			a.a[k].i = strtoll(v, NULL, 10);
		}
	}
	return a;
}

// A graph under construction with its argument values.
typedef struct Case {
	Graph *g;
	Tensor in[16];
	int nin;
} Case;

static Case
mk(void)
{
	Case c = {0};
	c.g = ir_graph_new("t", NULL);
	return c;
}

static NodeId
cin(Case *c, DType dt, Shape s, const double *v)
{
	char name[16];
	snprintf(name, sizeof name, "x%d", c->nin);
	c->in[c->nin++] = (Tensor){dt, s, (double *)v};
	return ir_add_input(c->g, name, IN_ARG, dt, &s, 0);
}

// op(operands...) with attributes from a spec; a build error here is a bug
// in the test, so it stops the test.
static NodeId
gop(Graph *g, int op, const char *spec, int nin, ...)
{
	NodeId in[16];
	va_list ap;
	va_start(ap, nin);
	for (int i = 0; i < nin; i++)
		in[i] = va_arg(ap, NodeId);
	va_end(ap);
	Attrs a = attrs(op, spec);
	NodeId n = ir_build(g, op, in, nin, &a, 0, errbuf, sizeof errbuf);
	if (!n) {
		fprintf(stderr, "test bug: building %s: %s\n", ir_op(op)->name, errbuf);
		exit(2);
	}
	return n;
}

#define cop(c, op, spec, ...) gop((c)->g, op, spec, __VA_ARGS__)

static void
mark(const Graph *g)
{
	for (NodeId n = 1; n < g->nnode; n++)
		covered[g->node[n].op] = 1;
	for (uint32_t i = 0; i < g->nsub; i++)
		mark(g->sub[i]);
}

// Runs the case with the given nodes as outputs, then frees the graph.
static int
runn(Case *c, int nout, const NodeId *outs, Tensor *res)
{
	for (int i = 0; i < nout; i++)
		ir_add_output(c->g, outs[i], "y", -1);
	mark(c->g);
	errbuf[0] = 0;
	int ok = ir_interp(c->g, c->in, res, RUNSEED, errbuf, sizeof errbuf);
	ir_graph_free(c->g);
	c->g = NULL;
	return ok;
}

static int
run(Case *c, NodeId out, Tensor *res)
{
	return runn(c, 1, &out, res);
}

// t's values against want[0 .. n) (testutil.h's tu_check_vec).
static void
check_tensor(const char *file, int line, const Tensor *t, double tol, const double *want,
             size_t n)
{
	tu_check_vec(file, line, t->data, tnumel(t), want, n, tol);
}

static void
check_type(const char *file, int line, const Tensor *t, DType dt, Shape s)
{
	tu_ncheck++;
	if (t->dtype != dt || !ir_shape_eq(&t->shape, &s)) {
		char a[200], b[200];
		ir_type_str(t->dtype, &t->shape, a, sizeof a);
		ir_type_str(dt, &s, b, sizeof b);
		tu_nfail++;
		fprintf(stderr, "%s:%d: result is %s, want %s\n", file, line, a, b);
	}
}

#define V(...) ((const double[]){__VA_ARGS__})
#define CHECK_T(t, tol, ...) \
	check_tensor(__FILE__, __LINE__, (t), (tol), V(__VA_ARGS__), \
	             sizeof(V(__VA_ARGS__)) / sizeof(double))
#define CHECK_TYPE(t, dt, s) check_type(__FILE__, __LINE__, (t), (dt), (s))
#define CHECK_RUN(ok) \
	do { \
		int tu_ok = (ok); \
		CHECK(tu_ok); \
		if (!tu_ok) \
			fprintf(stderr, "  interp: %s\n", errbuf); \
	} while (0)

// One unary or binary op on f64 vectors: the result, whose tensor the
// caller frees.
static Tensor
ew(int op, const char *spec, DType dt, size_t n, const double *x, const double *y)
{
	Case c = mk();
	Tensor r = {0};
	NodeId a = cin(&c, dt, sh(1, (int)n), x), b = y ? cin(&c, dt, sh(1, (int)n), y) : 0;
	NodeId e = y ? cop(&c, op, spec, 2, a, b) : cop(&c, op, spec, 1, a);
	CHECK_RUN(run(&c, e, &r));
	return r;
}

// ---------------------------------------------------------------- elementwise

static double r_neg(double x) { return -x; }
static double r_rsqrt(double x) { return 1 / sqrt(x); }
static double r_sigmoid(double x) { return 1 / (1 + exp(-x)); }
static double r_softplus(double x) { return log(1 + exp(x)); }
static double r_relu(double x) { return x > 0 ? x : 0; }
static double r_step(double x) { return x > 0 ? 1 : 0; }
static double r_sign(double x) { return x > 0 ? 1 : x < 0 ? -1 : 0; }

static void
test_unary(void)
{
	static const struct {
		int op;
		double (*f)(double);
	} cases[] = {
		{OP_neg, r_neg},         {OP_exp, exp},        {OP_log, log},
		{OP_log1p, log1p},       {OP_expm1, expm1},    {OP_sqrt, sqrt},
		{OP_rsqrt, r_rsqrt},     {OP_tanh, tanh},      {OP_sigmoid, r_sigmoid},
		{OP_softplus, r_softplus}, {OP_erf, erf},      {OP_sin, sin},
		{OP_cos, cos},           {OP_lgamma, lgamma},  {OP_relu, r_relu},
		{OP_abs, fabs},          {OP_step, r_step},    {OP_sign, r_sign},
		{OP_floor, floor},
	};
	// Negative inputs give NaN for log, sqrt, ...: the reference does too.
	double x[] = {-2.5, -0.5, 0, 0.25, 1, 3.75};
	for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
		Tensor r = ew(cases[k].op, NULL, DT_F64, 6, x, NULL);
		double want[6];
		for (int i = 0; i < 6; i++)
			want[i] = cases[k].f(x[i]);
		int before = tu_nfail;
		check_tensor(__FILE__, __LINE__, &r, 1e-15, want, 6);
		if (tu_nfail > before)
			fprintf(stderr, "  (op %s)\n", ir_op(cases[k].op)->name);
		ir_tensor_free(&r);
	}
	// Stability at the extremes, and NaN through relu.
	double big[] = {-1000, 1000, NAN};
	Tensor r = ew(OP_sigmoid, NULL, DT_F64, 3, big, NULL);
	CHECK_T(&r, 0, 0, 1, NAN);
	ir_tensor_free(&r);
	r = ew(OP_softplus, NULL, DT_F64, 3, big, NULL);
	CHECK_T(&r, 0, 0, 1000, NAN);
	ir_tensor_free(&r);
	r = ew(OP_relu, NULL, DT_F64, 3, big, NULL);
	CHECK_T(&r, 0, 0, 1000, NAN);
	ir_tensor_free(&r);
	// softplus(x) = log(1 + e^x) where the naive form is accurate:
	// softplus(-30) = log1p(e^-30) = e^-30 - e^-60/2.
	double s30[] = {-30};
	r = ew(OP_softplus, NULL, DT_F64, 1, s30, NULL);
	CHECK_T(&r, 1e-15, 9.357622968840175e-14);
	ir_tensor_free(&r);
}

static void
test_special(void)
{
	// lgamma(1/2) = log(sqrt(pi)); digamma at known points:
	//   psi(1) = -gamma, psi(1/2) = -gamma - 2 log 2,
	//   psi(x + 1) = psi(x) + 1/x  gives psi(-1/2) = psi(1/2) + 2,
	//   psi(-3/2) = psi(-1/2) + 2/3, psi(-5/2) = psi(-3/2) + 2/5,
	//   psi(5/2) = psi(1/2) + 2 + 2/3;
	//   psi(x) ~ log x - 1/(2x) - 1/(12 x^2) for x = 1e6 (next term 1e-26).
	double half[] = {0.5};
	Tensor r = ew(OP_lgamma, NULL, DT_F64, 1, half, NULL);
	CHECK_T(&r, 1e-15, 0.57236494292470008707);
	ir_tensor_free(&r);
	double psi_half = -EULER - 2 * log(2.0);
	double x[] = {1, 0.5, -0.5, -1.5, -2.5, 2.5, 1e6, 0, -0.0, -1, -7, INFINITY, -INFINITY};
	r = ew(OP_digamma, NULL, DT_F64, 13, x, NULL);
	CHECK_T(&r, 1e-14, -0.5772156649015329, psi_half, psi_half + 2, psi_half + 2 + 2.0 / 3,
	        psi_half + 2 + 2.0 / 3 + 0.4, psi_half + 2 + 2.0 / 3, log(1e6) - 5e-7 - 1 / 12e12,
	        -INFINITY, INFINITY, NAN, NAN, INFINITY, NAN);
	ir_tensor_free(&r);
	// The recurrence psi(x + 1) - psi(x) = 1/x at points on both sides of
	// zero and across the shift threshold.
	double xs[] = {0.013, 0.7, 1.4616321449683622, 3.3, 9.99, 10.01, 55.5, -0.3, -4.7, -123.45};
	double xs1[10];
	for (int i = 0; i < 10; i++)
		xs1[i] = xs[i] + 1;
	Tensor p0 = ew(OP_digamma, NULL, DT_F64, 10, xs, NULL);
	Tensor p1 = ew(OP_digamma, NULL, DT_F64, 10, xs1, NULL);
	for (int i = 0; i < 10; i++)
		CHECK_NEAR(p1.data[i] - p0.data[i], 1 / xs[i], 1e-12);
	ir_tensor_free(&p0);
	ir_tensor_free(&p1);

	// polygamma(n, x) = (-1)^(n+1) n! zeta(n + 1, x):
	//   psi'(1) = pi^2/6, psi''(1) = -2 zeta(3), psi'''(1) = 6 zeta(4) = pi^4/15,
	//   psi'(1/2) = pi^2/2, psi'(-1/2) = psi'(1/2) + 1/(1/2)^2 = pi^2/2 + 4,
	//   psi''(1/2) = -2 (2^3 - 1) zeta(3) = -14 zeta(3).
	double one[] = {1, 0.5, -0.5};
	r = ew(OP_polygamma, "n=1", DT_F64, 3, one, NULL);
	CHECK_T(&r, 1e-14, PI * PI / 6, PI * PI / 2, PI * PI / 2 + 4);
	ir_tensor_free(&r);
	r = ew(OP_polygamma, "n=2", DT_F64, 2, one, NULL);
	CHECK_T(&r, 1e-14, -2.4041138063191885, -14 * ZETA3);
	ir_tensor_free(&r);
	r = ew(OP_polygamma, "n=3", DT_F64, 1, one, NULL);
	CHECK_T(&r, 1e-14, PI * PI * PI * PI / 15);
	ir_tensor_free(&r);
	r = ew(OP_polygamma, "n=0", DT_F64, 1, one, NULL);
	CHECK_T(&r, 1e-14, -EULER);
	ir_tensor_free(&r);
	// Against the defining series, summed directly up to N and closed with
	// the Euler-Maclaurin tail (error ~ 1/N^5):
	//   psi'(x)  =  sum_k 1/(x+k)^2,  tail 1/y + 1/(2y^2) + 1/(6y^3)
	//   psi''(x) = -2 sum_k 1/(x+k)^3, tail 1/(2y^2) + 1/(2y^3) + 1/(4y^4)
	// with y = x + N; valid for negative non-integer x too.
	double pts[] = {0.3, 2.7, 7.1, 15.5, 40.25, -0.3, -3.6, -10.5};
	Tensor t1 = ew(OP_polygamma, "n=1", DT_F64, 8, pts, NULL);
	Tensor t2 = ew(OP_polygamma, "n=2", DT_F64, 8, pts, NULL);
	for (int i = 0; i < 8; i++) {
		double s2 = 0, s3 = 0, y = pts[i] + 2000;
		for (int k = 0; k < 2000; k++) {
			double z = pts[i] + k;
			s2 += 1 / (z * z);
			s3 += 1 / (z * z * z);
		}
		s2 += 1 / y + 1 / (2 * y * y) + 1 / (6 * y * y * y);
		s3 += 1 / (2 * y * y) + 1 / (2 * y * y * y) + 1 / (4 * y * y * y * y);
		CHECK_NEAR(t1.data[i], s2, 1e-13);
		CHECK_NEAR(t2.data[i], -2 * s3, 1e-13);
	}
	ir_tensor_free(&t1);
	ir_tensor_free(&t2);
}

static void
test_unarya(void)
{
	double x[] = {-3, 0.5, 5, NAN};
	Tensor r = ew(OP_clamp, "min=-1 max=2", DT_F64, 4, x, NULL);
	CHECK_T(&r, 0, -1, 0.5, 2, NAN);
	ir_tensor_free(&r);
	r = ew(OP_clamp, NULL, DT_F64, 4, x, NULL); // defaults: (-inf, inf)
	CHECK_T(&r, 0, -3, 0.5, 5, NAN);
	ir_tensor_free(&r);
	r = ew(OP_hardtanh, NULL, DT_F64, 4, x, NULL); // defaults: [-1, 1]
	CHECK_T(&r, 0, -1, 0.5, 1, NAN);
	ir_tensor_free(&r);
}

static void
test_binary(void)
{
	double x[] = {1, -2, 0, 3.5, 0}, y[] = {2, 0.5, 4, -1, -1};
	Tensor r = ew(OP_add, NULL, DT_F64, 5, x, y);
	CHECK_T(&r, 0, 3, -1.5, 4, 2.5, -1);
	ir_tensor_free(&r);
	r = ew(OP_sub, NULL, DT_F64, 5, x, y);
	CHECK_T(&r, 0, -1, -2.5, -4, 4.5, 1);
	ir_tensor_free(&r);
	r = ew(OP_mul, NULL, DT_F64, 5, x, y);
	CHECK_T(&r, 0, 2, -1, 0, -3.5, 0);
	ir_tensor_free(&r);
	r = ew(OP_div, NULL, DT_F64, 5, x, y);
	CHECK_T(&r, 0, 0.5, -4, 0, -3.5, 0);
	ir_tensor_free(&r);
	r = ew(OP_pow, NULL, DT_F64, 5, x, y);
	CHECK_T(&r, 1e-15, 1, NAN, 0, 1 / 3.5, INFINITY);
	ir_tensor_free(&r);
	r = ew(OP_maximum, NULL, DT_F64, 5, x, y);
	CHECK_T(&r, 0, 2, 0.5, 4, 3.5, 0);
	ir_tensor_free(&r);
	r = ew(OP_minimum, NULL, DT_F64, 5, x, y);
	CHECK_T(&r, 0, 1, -2, 0, -1, -1);
	ir_tensor_free(&r);
	// xlogy: 0 where x = 0 (even for y = 0 or y < 0), NaN y propagates.
	double xa[] = {2, 0, 0, 0, 3, -1}, ya[] = {3, 0, -1, NAN, -1, 1};
	r = ew(OP_xlogy, NULL, DT_F64, 6, xa, ya);
	CHECK_T(&r, 1e-15, 2 * log(3.0), 0, 0, NAN, NAN, 0);
	ir_tensor_free(&r);
	// maximum/minimum propagate NaN from either side.
	double xn[] = {NAN, 1}, yn[] = {1, NAN};
	r = ew(OP_maximum, NULL, DT_F64, 2, xn, yn);
	CHECK_T(&r, 0, NAN, NAN);
	ir_tensor_free(&r);
	r = ew(OP_minimum, NULL, DT_F64, 2, xn, yn);
	CHECK_T(&r, 0, NAN, NAN);
	ir_tensor_free(&r);
}

static void
test_int(void)
{
	// i64 stays exact up to 2^53: 2^52 + 1 + 1 = 4503599627370498.
	double x[] = {4503599627370497.0, -3, 0, 7}, y[] = {1, 5, -2, 7};
	Tensor r = ew(OP_add, NULL, DT_I64, 4, x, y);
	CHECK_TYPE(&r, DT_I64, sh(1, 4));
	CHECK_T(&r, 0, 4503599627370498.0, 2, -2, 14);
	ir_tensor_free(&r);
	r = ew(OP_sub, NULL, DT_I64, 4, x, y);
	CHECK_T(&r, 0, 4503599627370496.0, -8, 2, 0);
	ir_tensor_free(&r);
	r = ew(OP_mul, NULL, DT_I64, 4, x, y);
	CHECK_T(&r, 0, 4503599627370497.0, -15, 0, 49);
	ir_tensor_free(&r);
	r = ew(OP_maximum, NULL, DT_I64, 4, x, y);
	CHECK_T(&r, 0, 4503599627370497.0, 5, 0, 7);
	ir_tensor_free(&r);
	r = ew(OP_minimum, NULL, DT_I64, 4, x, y);
	CHECK_T(&r, 0, 1, -3, -2, 7);
	ir_tensor_free(&r);
	r = ew(OP_neg, NULL, DT_I64, 4, x, NULL);
	CHECK_T(&r, 0, -4503599627370497.0, 3, 0, -7);
	ir_tensor_free(&r);
	r = ew(OP_abs, NULL, DT_I64, 4, x, NULL);
	CHECK_T(&r, 0, 4503599627370497.0, 3, 0, 7);
	ir_tensor_free(&r);
	r = ew(OP_relu, NULL, DT_I64, 4, x, NULL);
	CHECK_T(&r, 0, 4503599627370497.0, 0, 0, 7);
	ir_tensor_free(&r);
	r = ew(OP_sign, NULL, DT_I64, 4, x, NULL);
	CHECK_T(&r, 0, 1, -1, 0, 1);
	ir_tensor_free(&r);
	r = ew(OP_step, NULL, DT_I64, 4, x, NULL);
	CHECK_T(&r, 0, 1, 0, 0, 1);
	ir_tensor_free(&r);
}

static void
test_compare(void)
{
	double x[] = {1, 2, 3, NAN}, y[] = {2, 2, 2, NAN};
	static const struct {
		int op;
		double want[4];
	} cases[] = {
		{OP_eq, {0, 1, 0, 0}}, {OP_ne, {1, 0, 1, 1}}, {OP_lt, {1, 0, 0, 0}},
		{OP_le, {1, 1, 0, 0}}, {OP_gt, {0, 0, 1, 0}}, {OP_ge, {0, 1, 1, 0}},
	};
	for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
		Tensor r = ew(cases[k].op, NULL, DT_F64, 4, x, y);
		CHECK_TYPE(&r, DT_BOOL, sh(1, 4));
		check_tensor(__FILE__, __LINE__, &r, 0, cases[k].want, 4);
		ir_tensor_free(&r);
	}
	double p[] = {0, 0, 1, 1}, q[] = {0, 1, 0, 1};
	Tensor r = ew(OP_and, NULL, DT_BOOL, 4, p, q);
	CHECK_T(&r, 0, 0, 0, 0, 1);
	ir_tensor_free(&r);
	r = ew(OP_or, NULL, DT_BOOL, 4, p, q);
	CHECK_T(&r, 0, 0, 1, 1, 1);
	ir_tensor_free(&r);
	r = ew(OP_not, NULL, DT_BOOL, 4, p, NULL);
	CHECK_T(&r, 0, 1, 1, 0, 0);
	ir_tensor_free(&r);
}

// ---------------------------------------------------------------- factories, cast, where

static void
test_factory(void)
{
	Case c = mk();
	Tensor r[4];
	NodeId f[4] = {
		cop(&c, OP_full, "value=2.5 shape=2,2 dtype=f64", 0),
		cop(&c, OP_full, "value=-2.7 shape=3 dtype=i64", 0),
		cop(&c, OP_full, "value=0.1 shape= dtype=f32", 0), // a scalar
		cop(&c, OP_full, "value=3 shape=2 dtype=bool", 0),
	};
	CHECK_RUN(runn(&c, 4, f, r));
	CHECK_TYPE(&r[0], DT_F64, sh(2, 2, 2));
	CHECK_T(&r[0], 0, 2.5, 2.5, 2.5, 2.5);
	CHECK_T(&r[1], 0, -2, -2, -2); // truncation toward zero
	CHECK_TYPE(&r[2], DT_F32, sh(0));
	CHECK_T(&r[2], 0, 0.100000001490116119384765625); // 0.1 rounded to float
	CHECK_T(&r[3], 0, 1, 1);
	for (int i = 0; i < 4; i++)
		ir_tensor_free(&r[i]);

	c = mk();
	NodeId io[3] = {
		cop(&c, OP_iota, "shape=2,3 axis=1", 0),
		cop(&c, OP_iota, "shape=2,3 axis=0 dtype=f64", 0),
		cop(&c, OP_iota, "shape=2,0,3 axis=2", 0),
	};
	CHECK_RUN(runn(&c, 3, io, r));
	CHECK_TYPE(&r[0], DT_I64, sh(2, 2, 3));
	CHECK_T(&r[0], 0, 0, 1, 2, 0, 1, 2);
	CHECK_T(&r[1], 0, 0, 0, 0, 1, 1, 1);
	CHECK(tnumel(&r[2]) == 0 && r[2].data == NULL);
	for (int i = 0; i < 3; i++)
		ir_tensor_free(&r[i]);

	// cast: to i64 truncates toward zero (C, PyTorch), to bool is x != 0
	// (NaN is true), to f32 rounds to nearest float.
	double x[] = {-2.7, -0.5, 0, 2.7, 0.1, NAN};
	c = mk();
	NodeId a = cin(&c, DT_F64, sh(1, 6), x);
	NodeId cs[3] = {
		cop(&c, OP_cast, "dtype=i64", 1, a),
		cop(&c, OP_cast, "dtype=bool", 1, a),
		cop(&c, OP_cast, "dtype=f32", 1, a),
	};
	CHECK_RUN(runn(&c, 3, cs, r));
	CHECK_TYPE(&r[0], DT_I64, sh(1, 6));
	CHECK_T(&r[0], 0, -2, 0, 0, 2, 0, NAN);
	CHECK_T(&r[1], 0, 1, 1, 0, 1, 1, 1);
	CHECK_T(&r[2], 0, -2.7000000476837158203125, -0.5, 0, 2.7000000476837158203125,
	        0.100000001490116119384765625, NAN);
	for (int i = 0; i < 3; i++)
		ir_tensor_free(&r[i]);

	double cond[] = {1, 0, 1}, xv[] = {1, 2, 3}, yv[] = {10, 20, 30};
	c = mk();
	NodeId w = cop(&c, OP_where, NULL, 3, cin(&c, DT_BOOL, sh(1, 3), cond),
	               cin(&c, DT_F64, sh(1, 3), xv), cin(&c, DT_F64, sh(1, 3), yv));
	CHECK_RUN(run(&c, w, r));
	CHECK_T(&r[0], 0, 1, 20, 3);
	ir_tensor_free(&r[0]);
}

// The samplers draw element i from (seed, RUNSEED, i); support/random.c is
// tested on its own (test_random), so here the transformation of the draws
// and the indexing are what is checked.
static void
test_samplers(void)
{
	double lo[] = {0, 0, 1, -1}, hi[] = {1, 2, 3, 1}, p[] = {0, 1, 0.5, 0.5};
	Case c = mk();
	NodeId l = cin(&c, DT_F64, sh(2, 2, 2), lo), h = cin(&c, DT_F64, sh(2, 2, 2), hi);
	NodeId pp = cin(&c, DT_F64, sh(2, 2, 2), p);
	NodeId s[5] = {
		cop(&c, OP_uniform, "seed=7", 2, l, h),
		cop(&c, OP_normal, "seed=9", 2, l, h),
		cop(&c, OP_gamma, "seed=11", 2, h, h),
		cop(&c, OP_exponential, "seed=13", 1, h),
		cop(&c, OP_bernoulli, "seed=15", 1, pp),
	};
	Tensor r[5];
	CHECK_RUN(runn(&c, 5, s, r));
	for (uint64_t i = 0; i < 4; i++) {
		double u = ir_rand_uniform(7, RUNSEED, i);
		CHECK_NEAR(r[0].data[i], lo[i] + (hi[i] - lo[i]) * u, 1e-15);
		CHECK_NEAR(r[1].data[i], lo[i] + hi[i] * ir_rand_normal(9, RUNSEED, i), 1e-15);
		CHECK_NEAR(r[2].data[i], ir_rand_gamma(11, RUNSEED, i, hi[i]) / hi[i], 1e-15);
		CHECK_NEAR(r[3].data[i], -log(1 - ir_rand_uniform(13, RUNSEED, i)) / hi[i], 1e-14);
		CHECK(r[4].data[i] == (ir_rand_uniform(15, RUNSEED, i) < p[i]));
	}
	CHECK(r[4].data[0] == 0 && r[4].data[1] == 1);
	for (int i = 0; i < 5; i++)
		ir_tensor_free(&r[i]);

	// Kaiming for a (4, 3, 2, 2) weight: receptive field 4, fan_in 12,
	// fan_out 16.  normal, fan_in, a = 0: gain sqrt 2, std sqrt(2/12).
	// uniform, fan_out, a = 1: gain sqrt(2/2) = 1, bound sqrt(3/16).
	c = mk();
	NodeId k[3] = {
		cop(&c, OP_kaiming_normal, "shape=4,3,2,2 dtype=f64 seed=5", 0),
		cop(&c, OP_kaiming_uniform, "shape=4,3,2,2 dtype=f64 mode=fan_out a=1 seed=6", 0),
		cop(&c, OP_kaiming_normal, "shape=4,3,2,2 seed=5", 0), // f32
	};
	CHECK_RUN(runn(&c, 3, k, r));
	double std = 0.40824829046386301637, bound = 0.43301270189221932338;
	CHECK_TYPE(&r[2], DT_F32, sh(4, 4, 3, 2, 2));
	int ok = 1, inb = 1;
	for (uint64_t i = 0; i < 48; i++) {
		ok &= tu_near(r[0].data[i], std * ir_rand_normal(5, RUNSEED, i), 1e-15);
		double u = ir_rand_uniform(6, RUNSEED, i);
		ok &= tu_near(r[1].data[i], -bound + 2 * bound * u, 1e-15);
		ok &= r[2].data[i] == (double)(float)r[0].data[i];
		inb &= fabs(r[1].data[i]) <= bound;
	}
	CHECK(ok);
	CHECK(inb);
	for (int i = 0; i < 3; i++)
		ir_tensor_free(&r[i]);
}

// ---------------------------------------------------------------- reductions

static void
test_reduce(void)
{
	double x[] = {1, 2, 3, 4, 5, 6}; // [[1, 2, 3], [4, 5, 6]]
	Case c = mk();
	NodeId a = cin(&c, DT_F64, sh(2, 2, 3), x);
	NodeId n[9] = {
		cop(&c, OP_sum, "axes=0", 1, a),
		cop(&c, OP_sum, "axes=1 keepdim=1", 1, a),
		cop(&c, OP_sum, "axes=1,0", 1, a),
		cop(&c, OP_sum, "axes=", 1, a),
		cop(&c, OP_mean, "axes=1", 1, a),
		cop(&c, OP_max, "axes=0", 1, a),
		cop(&c, OP_min, "axes=1 keepdim=1", 1, a),
		cop(&c, OP_argmax, "axis=0", 1, a),
		cop(&c, OP_mean, "axes=0,1 keepdim=1", 1, a),
	};
	Tensor r[9];
	CHECK_RUN(runn(&c, 9, n, r));
	CHECK_T(&r[0], 0, 5, 7, 9);
	CHECK_TYPE(&r[1], DT_F64, sh(2, 2, 1));
	CHECK_T(&r[1], 0, 6, 15);
	CHECK_TYPE(&r[2], DT_F64, sh(0));
	CHECK_T(&r[2], 0, 21);
	CHECK_T(&r[3], 0, 1, 2, 3, 4, 5, 6);
	CHECK_T(&r[4], 0, 2, 5);
	CHECK_T(&r[5], 0, 4, 5, 6);
	CHECK_TYPE(&r[6], DT_F64, sh(2, 2, 1));
	CHECK_T(&r[6], 0, 1, 4);
	CHECK_TYPE(&r[7], DT_I64, sh(1, 3));
	CHECK_T(&r[7], 0, 1, 1, 1);
	CHECK_TYPE(&r[8], DT_F64, sh(2, 1, 1));
	CHECK_T(&r[8], 0, 3.5);
	for (int i = 0; i < 9; i++)
		ir_tensor_free(&r[i]);

	// logsumexp: max-shifted, so 1000 does not overflow; all -inf is -inf.
	double y[] = {0, 0, 1000, 1000, -INFINITY, -INFINITY, INFINITY, 1, NAN, 1};
	c = mk();
	a = cin(&c, DT_F64, sh(2, 5, 2), y);
	NodeId lse = cop(&c, OP_logsumexp, "axes=1", 1, a);
	CHECK_RUN(run(&c, lse, r));
	CHECK_T(&r[0], 1e-15, log(2.0), 1000 + log(2.0), -INFINITY, INFINITY, NAN);
	ir_tensor_free(&r[0]);

	// NaN propagates through max and min; argmax takes the first maximum,
	// and NaN counts as the maximum.
	double z[] = {1, NAN, 3, 5, 2, 5, 0, 7, 7};
	c = mk();
	a = cin(&c, DT_F64, sh(2, 3, 3), z);
	NodeId m[4] = {
		cop(&c, OP_max, "axes=1", 1, a),
		cop(&c, OP_min, "axes=1", 1, a),
		cop(&c, OP_argmax, "axis=1", 1, a),
		cop(&c, OP_argmax, "axis=1 keepdim=1", 1, a),
	};
	CHECK_RUN(runn(&c, 4, m, r));
	CHECK_T(&r[0], 0, NAN, 5, 7);
	CHECK_T(&r[1], 0, NAN, 2, 0);
	CHECK_T(&r[2], 0, 1, 0, 1);
	CHECK_TYPE(&r[3], DT_I64, sh(2, 3, 1));
	for (int i = 0; i < 4; i++)
		ir_tensor_free(&r[i]);

	// Empty reductions: sum 0, mean NaN (0/0), logsumexp -inf.
	c = mk();
	a = cin(&c, DT_F64, sh(2, 2, 0), NULL);
	NodeId e[3] = {
		cop(&c, OP_sum, "axes=1", 1, a),
		cop(&c, OP_mean, "axes=1", 1, a),
		cop(&c, OP_logsumexp, "axes=1", 1, a),
	};
	CHECK_RUN(runn(&c, 3, e, r));
	CHECK_T(&r[0], 0, 0, 0);
	CHECK_T(&r[1], 0, NAN, NAN);
	CHECK_T(&r[2], 0, -INFINITY, -INFINITY);
	for (int i = 0; i < 3; i++)
		ir_tensor_free(&r[i]);

	// i64 sums stay exact: 2^53 - 2 + 1.
	double iv[] = {9007199254740990.0, 1};
	c = mk();
	a = cin(&c, DT_I64, sh(1, 2), iv);
	NodeId is = cop(&c, OP_sum, "axes=0", 1, a);
	CHECK_RUN(run(&c, is, r));
	CHECK_TYPE(&r[0], DT_I64, sh(0));
	CHECK_T(&r[0], 0, 9007199254740991.0);
	ir_tensor_free(&r[0]);
}

// ---------------------------------------------------------------- layout

static void
test_layout(void)
{
	double x6[] = {1, 2, 3, 4, 5, 6};
	Case c = mk();
	NodeId a = cin(&c, DT_F64, sh(2, 2, 3), x6);
	NodeId n[4] = {
		cop(&c, OP_reshape, "shape=3,2", 1, a),
		cop(&c, OP_resize, "shape=8", 1, a),
		cop(&c, OP_resize, "shape=2,2", 1, a),
		cop(&c, OP_permute, "perm=1,0", 1, a),
	};
	Tensor r[4];
	CHECK_RUN(runn(&c, 4, n, r));
	CHECK_TYPE(&r[0], DT_F64, sh(2, 3, 2));
	CHECK_T(&r[0], 0, 1, 2, 3, 4, 5, 6);
	CHECK_T(&r[1], 0, 1, 2, 3, 4, 5, 6, 0, 0);
	CHECK_T(&r[2], 0, 1, 2, 3, 4);
	CHECK_T(&r[3], 0, 1, 4, 2, 5, 3, 6); // the transpose
	for (int i = 0; i < 4; i++)
		ir_tensor_free(&r[i]);

	// permute of a (2, 3, 4) tensor with x[i][j][k] = 100 i + 10 j + k by
	// perm (2, 0, 1): out[k][i][j] = x[i][j][k].
	double x3[24], want[24];
	for (int i = 0; i < 2; i++)
		for (int j = 0; j < 3; j++)
			for (int k = 0; k < 4; k++) {
				x3[(i * 3 + j) * 4 + k] = 100 * i + 10 * j + k;
				want[(k * 2 + i) * 3 + j] = 100 * i + 10 * j + k;
			}
	c = mk();
	a = cin(&c, DT_F64, sh(3, 2, 3, 4), x3);
	NodeId pm = cop(&c, OP_permute, "perm=2,0,1", 1, a);
	CHECK_RUN(run(&c, pm, r));
	CHECK_TYPE(&r[0], DT_F64, sh(3, 4, 2, 3));
	check_tensor(__FILE__, __LINE__, &r[0], 0, want, 24);
	ir_tensor_free(&r[0]);

	// broadcast: right-aligned; size-1 axes repeat.
	double v3[] = {1, 2, 3}, v2[] = {1, 2}, s1[] = {7};
	c = mk();
	NodeId b[3] = {
		cop(&c, OP_broadcast, "shape=2,3", 1, cin(&c, DT_F64, sh(1, 3), v3)),
		cop(&c, OP_broadcast, "shape=2,3", 1, cin(&c, DT_F64, sh(2, 2, 1), v2)),
		cop(&c, OP_broadcast, "shape=2", 1, cin(&c, DT_F64, sh(0), s1)),
	};
	CHECK_RUN(runn(&c, 3, b, r));
	CHECK_T(&r[0], 0, 1, 2, 3, 1, 2, 3);
	CHECK_T(&r[1], 0, 1, 1, 1, 2, 2, 2);
	CHECK_T(&r[2], 0, 7, 7);
	for (int i = 0; i < 3; i++)
		ir_tensor_free(&r[i]);

	// slice of x[r][c] = 10 r + c (4 x 5), rows 1:4:2, columns 0:5:2 ->
	// rows 1, 3 and columns 0, 2, 4.
	double g[20];
	for (int i = 0; i < 20; i++)
		g[i] = 10 * (i / 5) + i % 5;
	double upd[] = {-1, -2, -3, -4};
	c = mk();
	a = cin(&c, DT_F64, sh(2, 4, 5), g);
	NodeId sl[2] = {
		cop(&c, OP_slice, "start=1,0 end=4,5 step=2,2", 1, a),
		// rows 0:3:2 (0 and 2), columns 3:5 (3 and 4) replaced.
		cop(&c, OP_slice_update, "start=0,3 end=3,5 step=2,1", 2, a,
		    cin(&c, DT_F64, sh(2, 2, 2), upd)),
	};
	CHECK_RUN(runn(&c, 2, sl, r));
	CHECK_TYPE(&r[0], DT_F64, sh(2, 2, 3));
	CHECK_T(&r[0], 0, 10, 12, 14, 30, 32, 34);
	CHECK_T(&r[1], 0, 0, 1, 2, -1, -2, 10, 11, 12, 13, 14, 20, 21, 22, -3, -4, 30, 31, 32, 33,
	        34);
	for (int i = 0; i < 2; i++)
		ir_tensor_free(&r[i]);

	// pad [[1, 2], [3, 4]] by one row before and two columns after, with 9.
	double p4[] = {1, 2, 3, 4};
	c = mk();
	a = cin(&c, DT_F64, sh(2, 2, 2), p4);
	NodeId pd = cop(&c, OP_pad, "before=1,0 after=0,2 value=9", 1, a);
	CHECK_RUN(run(&c, pd, r));
	CHECK_TYPE(&r[0], DT_F64, sh(2, 3, 4));
	CHECK_T(&r[0], 0, 9, 9, 9, 9, 1, 2, 9, 9, 3, 4, 9, 9);
	ir_tensor_free(&r[0]);

	// concat along axis 1 of (2, 1), (2, 2) and an empty (2, 0); along 0.
	double c1[] = {1, 2}, c2[] = {3, 4, 5, 6};
	c = mk();
	NodeId ca = cin(&c, DT_F64, sh(2, 2, 1), c1), cb = cin(&c, DT_F64, sh(2, 2, 2), c2);
	NodeId cc = cin(&c, DT_F64, sh(2, 2, 0), NULL);
	NodeId ct[2] = {
		cop(&c, OP_concat, "axis=1", 3, ca, cc, cb),
		cop(&c, OP_concat, "axis=0", 2, cb, cb),
	};
	CHECK_RUN(runn(&c, 2, ct, r));
	CHECK_TYPE(&r[0], DT_F64, sh(2, 2, 3));
	CHECK_T(&r[0], 0, 1, 3, 4, 2, 5, 6);
	CHECK_T(&r[1], 0, 3, 4, 5, 6, 3, 4, 5, 6);
	for (int i = 0; i < 2; i++)
		ir_tensor_free(&r[i]);

	// Placement ops are identities.
	c = mk();
	a = cin(&c, DT_F64, sh(1, 3), v3);
	NodeId hd[2] = {cop(&c, OP_to_host, NULL, 1, a), cop(&c, OP_to_device, NULL, 1, a)};
	CHECK_RUN(runn(&c, 2, hd, r));
	CHECK_T(&r[0], 0, 1, 2, 3);
	CHECK_T(&r[1], 0, 1, 2, 3);
	for (int i = 0; i < 2; i++)
		ir_tensor_free(&r[i]);
}

// ---------------------------------------------------------------- indexing

static void
test_index(void)
{
	double x[] = {1, 2, 3, 4, 5, 6}; // (3, 2): [[1, 2], [3, 4], [5, 6]]
	double i0[] = {2, 0, 1, 1}, i1[] = {1, 0, 1};
	Case c = mk();
	NodeId a = cin(&c, DT_F64, sh(2, 3, 2), x);
	NodeId t[2] = {
		cop(&c, OP_take, "axis=0", 2, a, cin(&c, DT_I64, sh(2, 2, 2), i0)),
		cop(&c, OP_take, "axis=1", 2, a, cin(&c, DT_I64, sh(1, 3), i1)),
	};
	Tensor r[4];
	CHECK_RUN(runn(&c, 2, t, r));
	CHECK_TYPE(&r[0], DT_F64, sh(3, 2, 2, 2)); // rows 2, 0, 1, 1
	CHECK_T(&r[0], 0, 5, 6, 1, 2, 3, 4, 3, 4);
	CHECK_TYPE(&r[1], DT_F64, sh(2, 3, 3)); // columns 1, 0, 1
	CHECK_T(&r[1], 0, 2, 1, 2, 4, 3, 4, 6, 5, 6);
	for (int i = 0; i < 2; i++)
		ir_tensor_free(&r[i]);

	// take_add = numpy.add.at: repeated indices accumulate.
	// [1, 1, 1] + at 0: 1 + 3 + 4, at 2: 2  ->  [9, 1, 3].
	// (2, 3) zeros, axis 1, indices [2, 2]: column 2 gets src[:, 0] + src[:, 1].
	double ones[] = {1, 1, 1}, idx[] = {0, 2, 0, 0}, src[] = {1, 2, 3, 4};
	double zeros6[6] = {0}, idx2[] = {2, 2};
	c = mk();
	NodeId ta[2] = {
		cop(&c, OP_take_add, "axis=0", 3, cin(&c, DT_F64, sh(1, 3), ones),
		    cin(&c, DT_I64, sh(1, 4), idx), cin(&c, DT_F64, sh(1, 4), src)),
		cop(&c, OP_take_add, "axis=1", 3, cin(&c, DT_F64, sh(2, 2, 3), zeros6),
		    cin(&c, DT_I64, sh(1, 2), idx2), cin(&c, DT_F64, sh(2, 2, 2), src)),
	};
	CHECK_RUN(runn(&c, 2, ta, r));
	CHECK_T(&r[0], 0, 9, 1, 3);
	CHECK_T(&r[1], 0, 0, 0, 3, 0, 0, 7);
	for (int i = 0; i < 2; i++)
		ir_tensor_free(&r[i]);

	// take_along = torch.gather on [[1, 2, 3], [4, 5, 6]]:
	//   axis 1, [[2, 0], [1, 1]] -> [[3, 1], [5, 5]];
	//   axis 0, [[1, 0, 1]]      -> [[4, 2, 6]];
	//   axis 1 with fewer rows than x: [[2]] -> [[3]].
	// take_along_add into zeros (2, 3), axis 1, [[2, 2], [0, 1]] with
	// [[1, 2], [3, 4]] -> [[0, 0, 3], [3, 4, 0]].
	double ga[] = {2, 0, 1, 1}, gb[] = {1, 0, 1}, gc[] = {2}, gd[] = {2, 2, 0, 1};
	c = mk();
	a = cin(&c, DT_F64, sh(2, 2, 3), x);
	NodeId tl[4] = {
		cop(&c, OP_take_along, "axis=1", 2, a, cin(&c, DT_I64, sh(2, 2, 2), ga)),
		cop(&c, OP_take_along, "axis=0", 2, a, cin(&c, DT_I64, sh(2, 1, 3), gb)),
		cop(&c, OP_take_along, "axis=1", 2, a, cin(&c, DT_I64, sh(2, 1, 1), gc)),
		cop(&c, OP_take_along_add, "axis=1", 3, cin(&c, DT_F64, sh(2, 2, 3), zeros6),
		    cin(&c, DT_I64, sh(2, 2, 2), gd), cin(&c, DT_F64, sh(2, 2, 2), src)),
	};
	CHECK_RUN(runn(&c, 4, tl, r));
	CHECK_T(&r[0], 0, 3, 1, 5, 5);
	CHECK_T(&r[1], 0, 4, 2, 6);
	CHECK_T(&r[2], 0, 3);
	CHECK_T(&r[3], 0, 0, 0, 3, 3, 4, 0);
	for (int i = 0; i < 4; i++)
		ir_tensor_free(&r[i]);

	double oh[] = {2, 0, 1};
	c = mk();
	NodeId o = cop(&c, OP_one_hot, "n=3 dtype=i64", 1, cin(&c, DT_I64, sh(1, 3), oh));
	CHECK_RUN(run(&c, o, r));
	CHECK_TYPE(&r[0], DT_I64, sh(2, 3, 3));
	CHECK_T(&r[0], 0, 0, 0, 1, 1, 0, 0, 0, 1, 0);
	ir_tensor_free(&r[0]);
}

// Run-time errors: return 0, say what and where, leak nothing.
static void
test_errors(void)
{
	double x10[10] = {0}, bad[] = {3, 12}, neg[] = {-1};
	Case c = mk();
	NodeId t = cop(&c, OP_take, "axis=0", 2, cin(&c, DT_F64, sh(1, 10), x10),
	               cin(&c, DT_I64, sh(1, 2), bad));
	Tensor r = {0};
	CHECK(!run(&c, t, &r));
	CHECK_STR(errbuf, "take: index 12 out of range for axis 0 of size 10");
	CHECK(r.data == NULL);

	c = mk();
	t = cop(&c, OP_take, "axis=0", 2, cin(&c, DT_F64, sh(1, 10), x10),
	        cin(&c, DT_I64, sh(1, 1), neg));
	CHECK(!run(&c, t, &r));
	CHECK_STR(errbuf, "take: index -1 out of range for axis 0 of size 10");

	double src[2] = {0};
	c = mk();
	t = cop(&c, OP_take_add, "axis=0", 3, cin(&c, DT_F64, sh(1, 10), x10),
	        cin(&c, DT_I64, sh(1, 2), bad), cin(&c, DT_F64, sh(1, 2), src));
	CHECK(!run(&c, t, &r));
	CHECK_STR(errbuf, "take_add: index 12 out of range for axis 0 of size 10");

	double x23[6] = {0}, ia[] = {0, 3};
	c = mk();
	t = cop(&c, OP_take_along, "axis=1", 2, cin(&c, DT_F64, sh(2, 2, 3), x23),
	        cin(&c, DT_I64, sh(2, 1, 2), ia));
	CHECK(!run(&c, t, &r));
	CHECK_STR(errbuf, "take_along: index 3 out of range for axis 1 of size 3");

	c = mk();
	t = cop(&c, OP_take_along_add, "axis=1", 3, cin(&c, DT_F64, sh(2, 2, 3), x23),
	        cin(&c, DT_I64, sh(2, 1, 2), ia), cin(&c, DT_F64, sh(2, 1, 2), src));
	CHECK(!run(&c, t, &r));
	CHECK_STR(errbuf, "take_along_add: index 3 out of range for axis 1 of size 3");

	double oh[] = {0, 3};
	c = mk();
	t = cop(&c, OP_one_hot, "n=3", 1, cin(&c, DT_I64, sh(1, 2), oh));
	CHECK(!run(&c, t, &r));
	CHECK_STR(errbuf, "one_hot: index 3 out of range for 3 classes");

	// The error happens mid-graph, with other values live and outputs
	// before it: everything is freed (LeakSanitizer checks).
	c = mk();
	NodeId a = cin(&c, DT_F64, sh(1, 10), x10);
	NodeId e = cop(&c, OP_exp, NULL, 1, a);
	NodeId outs[2] = {e, cop(&c, OP_take, "axis=0", 2, e, cin(&c, DT_I64, sh(1, 2), bad))};
	Tensor two[2];
	CHECK(!runn(&c, 2, outs, two));
	CHECK(two[0].data == NULL && two[1].data == NULL);

	// An argument of the wrong type.
	c = mk();
	Shape s2 = sh(1, 2);
	NodeId in = ir_add_input(c.g, "x", IN_ARG, DT_F64, &s2, 0);
	c.in[c.nin++] = (Tensor){DT_F64, sh(1, 3), x10};
	CHECK(!run(&c, cop(&c, OP_exp, NULL, 1, in), &r));
	CHECK_STR(errbuf, "input 'x': expected f64[2], got f64[3]");
	c = mk();
	in = ir_add_input(c.g, "x", IN_ARG, DT_F64, &s2, 0);
	c.in[c.nin++] = (Tensor){DT_F32, sh(1, 2), x10};
	CHECK(!run(&c, cop(&c, OP_exp, NULL, 1, in), &r));
	CHECK_STR(errbuf, "input 'x': expected f64[2], got f32[2]");

	// Sizes: overflow and negative dimensions are refused, empty is fine.
	Tensor big;
	CHECK(!ir_tensor_alloc(&big, DT_F64, &(Shape){2, {1ll << 40, 1ll << 40}}));
	CHECK(big.data == NULL);
	CHECK(ir_tensor_alloc(&big, DT_F64, &(Shape){3, {1ll << 62, 4, 0}}) && big.data == NULL);
	CHECK(!ir_tensor_alloc(&big, DT_F64, &(Shape){2, {3, -1}}));
	CHECK(ir_tensor_alloc(&big, DT_F64, &(Shape){2, {3, 0}}) && big.data == NULL);
	ir_tensor_free(&big);
	CHECK(ir_tensor_alloc(&big, DT_I64, &(Shape){2, {2, 2}}) && big.data[3] == 0);
	ir_tensor_free(&big);
	ir_tensor_free(NULL);
}

// Shape rules do their size arithmetic with overflow checks, so that a
// graph built by any producer (not only the frontend, which has its own
// checks with source locations) gets an error rather than a wrapped size.
static int
build_fails(Graph *g, int op, const char *spec, int nin, const NodeId *in, const char *want)
{
	Attrs a = attrs(op, spec);
	errbuf[0] = 0;
	if (ir_build(g, op, in, nin, &a, 0, errbuf, sizeof errbuf))
		return 0;
	return strstr(errbuf, want) != NULL;
}

static void
test_shape_overflow(void)
{
	const char *max = "9223372036854775807";
	char spec[256];
	Case c = mk();
	Shape s1 = sh(1, 4), s3 = sh(3, 1, 1, 8), w3 = sh(3, 1, 1, 3);
	Shape huge = {1, {1ll << 62}}; // sh() takes int sizes
	NodeId x = ir_add_input(c.g, "x", IN_ARG, DT_F64, &s1, 0);
	NodeId xc = ir_add_input(c.g, "xc", IN_ARG, DT_F64, &s3, 0);
	NodeId w = ir_add_input(c.g, "w", IN_ARG, DT_F64, &w3, 0);
	NodeId h = ir_add_input(c.g, "h", IN_ARG, DT_F64, &huge, 0);

	snprintf(spec, sizeof spec, "before=%s after=1", max);
	CHECK(build_fails(c.g, OP_pad, spec, 1, &x, "pad: the padded size of axis 0 is too large"));
	snprintf(spec, sizeof spec, "before=1 after=%s", max);
	CHECK(build_fails(c.g, OP_pad, spec, 1, &x, "pad: the padded size of axis 0 is too large"));

	NodeId hh[3] = {h, h, h};
	CHECK(build_fails(c.g, OP_concat, "axis=0", 2, hh, "concat: the result is too large"));

	// A step near INT64_MAX once overflowed end - start + step - 1.
	snprintf(spec, sizeof spec, "start=1 end=4 step=%s", max);
	Attrs a = attrs(OP_slice, spec);
	NodeId sl = ir_build(c.g, OP_slice, &x, 1, &a, 0, errbuf, sizeof errbuf);
	CHECK(sl && ir_shape(c.g, sl)->dim[0] == 1);

	NodeId xw[2] = {xc, w};
	snprintf(spec, sizeof spec, "stride=1 padding=%s dilation=1", max);
	CHECK(build_fails(c.g, OP_conv, spec, 2, xw, "conv: padding"));
	snprintf(spec, sizeof spec, "stride=1 padding=0 dilation=%s", max);
	CHECK(build_fails(c.g, OP_conv, spec, 2, xw, "is too large on spatial axis 0"));
	snprintf(spec, sizeof spec, "kernel=3 stride=1 padding=1 dilation=%s", max);
	CHECK(build_fails(c.g, OP_max_pool, spec, 1, &xc, "max_pool: padding 1 or dilation"));
	snprintf(spec, sizeof spec, "kernel=%s stride=1 padding=%s", max, "4611686018427387903");
	CHECK(build_fails(c.g, OP_avg_pool, spec, 1, &xc, "avg_pool: padding"));
	// Sane attributes still build: 8 + 2 - 2*2 - 1 = 5, /1 + 1 = 6 outputs.
	a = attrs(OP_conv, "stride=1 padding=1 dilation=2");
	NodeId y = ir_build(c.g, OP_conv, xw, 2, &a, 0, errbuf, sizeof errbuf);
	CHECK(y && ir_shape(c.g, y)->dim[2] == 6);
	ir_graph_free(c.g);
}

// ---------------------------------------------------------------- contractions and windows

static void
test_matmul(void)
{
	// [[1, 2, 3], [4, 5, 6]] [[7, 8], [9, 10], [11, 12]]
	//   = [[7 + 18 + 33, 8 + 20 + 36], [28 + 45 + 66, 32 + 50 + 72]].
	double x[] = {1, 2, 3, 4, 5, 6}, y[] = {7, 8, 9, 10, 11, 12};
	// Batched: [[1, 2]] [[5], [6]] = 17 and [[3, 4]] [[7], [8]] = 53.
	double bx[] = {1, 2, 3, 4}, by[] = {5, 6, 7, 8};
	Case c = mk();
	NodeId m[2] = {
		cop(&c, OP_matmul, NULL, 2, cin(&c, DT_F64, sh(2, 2, 3), x),
		    cin(&c, DT_F64, sh(2, 3, 2), y)),
		cop(&c, OP_matmul, NULL, 2, cin(&c, DT_F64, sh(3, 2, 1, 2), bx),
		    cin(&c, DT_F64, sh(3, 2, 2, 1), by)),
	};
	Tensor r[2];
	CHECK_RUN(runn(&c, 2, m, r));
	CHECK_T(&r[0], 0, 58, 64, 139, 154);
	CHECK_TYPE(&r[1], DT_F64, sh(3, 2, 1, 1));
	CHECK_T(&r[1], 0, 17, 53);
	for (int i = 0; i < 2; i++)
		ir_tensor_free(&r[i]);
	// An empty inner dimension: (2, 0) x (0, 3) is the zero matrix.
	c = mk();
	NodeId z = cop(&c, OP_matmul, NULL, 2, cin(&c, DT_F64, sh(2, 2, 0), NULL),
	               cin(&c, DT_F64, sh(2, 0, 3), NULL));
	CHECK_RUN(run(&c, z, r));
	CHECK_T(&r[0], 0, 0, 0, 0, 0, 0, 0);
	ir_tensor_free(&r[0]);
}

static void
test_conv(void)
{
	Tensor r[4];
	// conv1d, x = [1, 2, 3, 4, 5], w = [1, 0, -1], stride 2, padding 1:
	// padded [0, 1, 2, 3, 4, 5, 0], windows at 0, 2, 4:
	//   0 - 2 = -2,  2 - 4 = -2,  4 - 0 = 4.
	// conv1d, w = [1, 1], dilation 2: x[i] + x[i + 2] = [4, 6, 8].
	double x[] = {1, 2, 3, 4, 5}, w3[] = {1, 0, -1}, w2[] = {1, 1};
	Case c = mk();
	NodeId a = cin(&c, DT_F64, sh(3, 1, 1, 5), x);
	NodeId k3 = cin(&c, DT_F64, sh(3, 1, 1, 3), w3), k2 = cin(&c, DT_F64, sh(3, 1, 1, 2), w2);
	NodeId c1[2] = {
		cop(&c, OP_conv, "stride=2 padding=1 dilation=1", 2, a, k3),
		cop(&c, OP_conv, "stride=1 padding=0 dilation=2", 2, a, k2),
	};
	CHECK_RUN(runn(&c, 2, c1, r));
	CHECK_T(&r[0], 0, -2, -2, 4);
	CHECK_T(&r[1], 0, 4, 6, 8);
	for (int i = 0; i < 2; i++)
		ir_tensor_free(&r[i]);

	// conv2d, groups 2: x (1, 2, 3, 3), channel 0 = 1..9, channel 1 =
	// 10..90 by 10; w (2, 1, 2, 2): out channel 0 sees channel 0 through
	// [[1, 0], [0, 1]] (x[i][j] + x[i+1][j+1]), out channel 1 sees channel 1
	// through all ones (2x2 window sums):
	//   [[1 + 5, 2 + 6], [4 + 8, 5 + 9]] = [[6, 8], [12, 14]]
	//   [[10+20+40+50, 20+30+50+60], [40+50+70+80, 50+60+80+90]] = [[120, 160], [240, 280]]
	double xg[18], wg[] = {1, 0, 0, 1, 1, 1, 1, 1};
	for (int i = 0; i < 9; i++) {
		xg[i] = i + 1;
		xg[9 + i] = 10 * (i + 1);
	}
	// conv2d, 2 -> 1 channels, 3x3 kernel, padding 1, stride 1, on 2x2
	// planes [[1, 2], [3, 4]] and [[5, 6], [7, 8]]: the channel-0 kernel is all
	// ones (every window covers the whole plane: 10), the channel-1 kernel
	// only its centre: 10 + [[5, 6], [7, 8]].  Stride 2 keeps only (0, 0).
	double xp[] = {1, 2, 3, 4, 5, 6, 7, 8};
	double wp[18] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0};
	// conv2d, dilation 2, stride 2 on x[r][c] = 5 r + c (5x5) with a 2x2
	// kernel of ones: out[i][j] = x[2i][2j] + x[2i][2j+2] + x[2i+2][2j] +
	// x[2i+2][2j+2] = 20 i + 2 j + ... : [[0+2+10+12, 2+4+12+14], [10+12+20+22, 12+14+22+24]].
	double xd[25], wd[] = {1, 1, 1, 1};
	for (int i = 0; i < 25; i++)
		xd[i] = i;
	c = mk();
	NodeId px = cin(&c, DT_F64, sh(4, 1, 2, 2, 2), xp);
	NodeId pw = cin(&c, DT_F64, sh(4, 1, 2, 3, 3), wp);
	NodeId c2[4] = {
		cop(&c, OP_conv, "stride=1,1 padding=0,0 dilation=1,1 groups=2", 2,
		    cin(&c, DT_F64, sh(4, 1, 2, 3, 3), xg), cin(&c, DT_F64, sh(4, 2, 1, 2, 2), wg)),
		cop(&c, OP_conv, "stride=1,1 padding=1,1 dilation=1,1", 2, px, pw),
		cop(&c, OP_conv, "stride=2,2 padding=1,1 dilation=1,1", 2, px, pw),
		cop(&c, OP_conv, "stride=2,2 padding=0,0 dilation=2,2", 2,
		    cin(&c, DT_F64, sh(4, 1, 1, 5, 5), xd), cin(&c, DT_F64, sh(4, 1, 1, 2, 2), wd)),
	};
	CHECK_RUN(runn(&c, 4, c2, r));
	CHECK_TYPE(&r[0], DT_F64, sh(4, 1, 2, 2, 2));
	CHECK_T(&r[0], 0, 6, 8, 12, 14, 120, 160, 240, 280);
	CHECK_TYPE(&r[1], DT_F64, sh(4, 1, 1, 2, 2));
	CHECK_T(&r[1], 0, 15, 16, 17, 18);
	CHECK_T(&r[2], 0, 15);
	CHECK_T(&r[3], 0, 24, 32, 64, 72);
	for (int i = 0; i < 4; i++)
		ir_tensor_free(&r[i]);

	// Batch and several output channels per group: N = 2, groups 2, four
	// output channels, 1x1 kernels: out[n][co] = w[co] x[n][co / 2].
	double xb[] = {1, 2, 3, 4}, wb[] = {1, 10, 100, 1000};
	c = mk();
	NodeId cb = cop(&c, OP_conv, "stride=1 padding=0 dilation=1 groups=2", 2,
	                cin(&c, DT_F64, sh(3, 2, 2, 1), xb), cin(&c, DT_F64, sh(3, 4, 1, 1), wb));
	CHECK_RUN(run(&c, cb, r));
	CHECK_T(&r[0], 0, 1, 10, 200, 2000, 3, 30, 400, 4000);
	ir_tensor_free(&r[0]);

	// Empty operands with a non-empty result: no input channels gives
	// zeros; an empty length padded by 1 gives the kernel over zeros.
	c = mk();
	NodeId ex = cin(&c, DT_F64, sh(3, 1, 0, 2), NULL);
	NodeId ew0 = cin(&c, DT_F64, sh(3, 2, 0, 1), NULL);
	NodeId el = cin(&c, DT_F64, sh(3, 1, 1, 0), NULL);
	NodeId ew1 = cin(&c, DT_F64, sh(3, 1, 1, 1), wb);
	NodeId ce[2] = {
		cop(&c, OP_conv, "stride=1 padding=0 dilation=1", 2, ex, ew0),
		cop(&c, OP_conv, "stride=1 padding=1 dilation=1", 2, el, ew1),
	};
	CHECK_RUN(runn(&c, 2, ce, r));
	CHECK_TYPE(&r[0], DT_F64, sh(3, 1, 2, 2));
	CHECK_T(&r[0], 0, 0, 0, 0, 0);
	CHECK_T(&r[1], 0, 0, 0);
	for (int i = 0; i < 2; i++)
		ir_tensor_free(&r[i]);
}

static void
test_pool(void)
{
	Tensor r[6];
	// max_pool1d on [1, 3, 2, 5, 4]: kernel 2, stride 2, padding 1 ->
	// windows {pad, 1}, {3, 2}, {5, 4} -> [1, 3, 5]; kernel 2, dilation 2 ->
	// max(x[i], x[i + 2]) = [2, 5, 4].
	// avg_pool1d on [1, 2, 3, 4], kernel 3, stride 1, padding 1: windows
	// {0, 1, 2}, {1, 2, 3}, {2, 3, 4}, {3, 4, 0}; counting the padding
	// [3/3, 6/3, 9/3, 7/3], not counting it [3/2, 2, 3, 7/2].
	double x[] = {1, 3, 2, 5, 4}, y[] = {1, 2, 3, 4};
	Case c = mk();
	NodeId a = cin(&c, DT_F64, sh(3, 1, 1, 5), x), b = cin(&c, DT_F64, sh(3, 1, 1, 4), y);
	NodeId p[4] = {
		cop(&c, OP_max_pool, "kernel=2 stride=2 padding=1 dilation=1", 1, a),
		cop(&c, OP_max_pool, "kernel=2 stride=1 padding=0 dilation=2", 1, a),
		cop(&c, OP_avg_pool, "kernel=3 stride=1 padding=1", 1, b),
		cop(&c, OP_avg_pool, "kernel=3 stride=1 padding=1 count_include_pad=0", 1, b),
	};
	CHECK_RUN(runn(&c, 4, p, r));
	CHECK_T(&r[0], 0, 1, 3, 5);
	CHECK_T(&r[1], 0, 2, 5, 4);
	CHECK_T(&r[2], 1e-15, 1, 2, 3, 7.0 / 3);
	CHECK_T(&r[3], 1e-15, 1.5, 2, 3, 3.5);
	for (int i = 0; i < 4; i++)
		ir_tensor_free(&r[i]);

	// 2-d on a 4x4 plane x[r][c] = 4 r + c, two channels (the second is
	// -x): max_pool 2x2 stride 2 takes the bottom-right of each block
	// [[5, 7], [13, 15]] and for -x the top-left [[0, -2], [-8, -10]];
	// avg_pool 2x2 stride 2: block means [[2.5, 4.5], [10.5, 12.5]];
	// max_pool 3x3 stride 2 padding 1: windows rows/cols {-1..1}, {1..3}:
	// [[5, 7], [13, 15]]; NaN wins a window.
	double q[32];
	for (int i = 0; i < 16; i++) {
		q[i] = i;
		q[16 + i] = -i;
	}
	double qn[] = {1, NAN, 3, 4};
	c = mk();
	a = cin(&c, DT_F64, sh(4, 1, 2, 4, 4), q);
	NodeId p2[4] = {
		cop(&c, OP_max_pool, "kernel=2,2 stride=2,2 padding=0,0 dilation=1,1", 1, a),
		cop(&c, OP_avg_pool, "kernel=2,2 stride=2,2 padding=0,0", 1, a),
		cop(&c, OP_max_pool, "kernel=3,3 stride=2,2 padding=1,1 dilation=1,1", 1, a),
		cop(&c, OP_max_pool, "kernel=2,2 stride=1,1 padding=0,0 dilation=1,1", 1,
		    cin(&c, DT_F64, sh(4, 1, 1, 2, 2), qn)),
	};
	CHECK_RUN(runn(&c, 4, p2, r));
	CHECK_T(&r[0], 0, 5, 7, 13, 15, 0, -2, -8, -10);
	CHECK_T(&r[1], 0, 2.5, 4.5, 10.5, 12.5, -2.5, -4.5, -10.5, -12.5);
	CHECK_T(&r[2], 0, 5, 7, 13, 15, 0, -1, -4, -5);
	CHECK_T(&r[3], 0, NAN);
	for (int i = 0; i < 4; i++)
		ir_tensor_free(&r[i]);

	// An empty length padded by 1, kernel 2: one window of padding only,
	// -inf for max_pool; 0/2 for avg_pool counting the padding.
	c = mk();
	a = cin(&c, DT_F64, sh(3, 1, 1, 0), NULL);
	NodeId pe[2] = {
		cop(&c, OP_max_pool, "kernel=2 stride=1 padding=1 dilation=1", 1, a),
		cop(&c, OP_avg_pool, "kernel=2 stride=1 padding=1", 1, a),
	};
	CHECK_RUN(runn(&c, 2, pe, r));
	CHECK_T(&r[0], 0, -INFINITY);
	CHECK_T(&r[1], 0, 0);
	for (int i = 0; i < 2; i++)
		ir_tensor_free(&r[i]);

	// adaptive_avg_pool, L = 5 -> 3: [floor(5i/3), ceil(5(i+1)/3)) = [0, 2),
	// [1, 4), [3, 5): [1.5, 3, 4.5].  2-d 3x3 (1..9) -> 2x2: rows and
	// columns [0, 2), [1, 3): means of the 2x2 corners [[3, 4], [6, 7]].
	// 2x2 -> 4x4 (up): each output reads one input: i * 2 / 4.
	double l5[] = {1, 2, 3, 4, 5}, m9[] = {1, 2, 3, 4, 5, 6, 7, 8, 9}, m4[] = {1, 2, 3, 4};
	c = mk();
	NodeId i5 = cin(&c, DT_F64, sh(3, 1, 1, 5), l5);
	NodeId i9 = cin(&c, DT_F64, sh(4, 1, 1, 3, 3), m9);
	NodeId i4 = cin(&c, DT_F64, sh(4, 1, 1, 2, 2), m4);
	NodeId ad[3] = {
		cop(&c, OP_adaptive_avg_pool, "size=3", 1, i5),
		cop(&c, OP_adaptive_avg_pool, "size=2,2", 1, i9),
		cop(&c, OP_adaptive_avg_pool, "size=4,4", 1, i4),
	};
	CHECK_RUN(runn(&c, 3, ad, r));
	CHECK_T(&r[0], 1e-15, 1.5, 3, 4.5);
	CHECK_T(&r[1], 1e-15, 3, 4, 6, 7);
	CHECK_T(&r[2], 0, 1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4);
	for (int i = 0; i < 3; i++)
		ir_tensor_free(&r[i]);
}

static void
test_upsample(void)
{
	// x = [[1, 2], [3, 4]] is bilinear itself: x(r, c) = 1 + 2 r + c on
	// [0, 1]^2, so each output is 1 + 2 rp + cp at its source position.
	// align_corners = 0, 2 -> 4: src = (d + 0.5) / 2 - 0.5 clamped at 0 =
	// 0 (clamped from -0.25), 0.25, 0.75, 1.25 (which reads pixel 1 twice, so 1).
	// align_corners = 1: src = d / 3 = 0, 1/3, 2/3, 1.
	double x[] = {1, 2, 3, 4};
	double pf[] = {0, 0.25, 0.75, 1}, pt[] = {0, 1.0 / 3, 2.0 / 3, 1};
	double wf[16], wt[16];
	for (int i = 0; i < 4; i++)
		for (int j = 0; j < 4; j++) {
			wf[i * 4 + j] = 1 + 2 * pf[i] + pf[j];
			wt[i * 4 + j] = 1 + 2 * pt[i] + pt[j];
		}
	// Down, 1x4 -> 1x2, align_corners = 0: src = 2 d + 0.5, the mean of each
	// pair; rows 1 -> 1 read row 0.  Non-square 2x2 -> 3x5, align_corners
	// = 1: rows 0, 1/2, 1, columns 0, 1/4, ..., 1.
	double d4[] = {1, 3, 5, 9};
	double w35[15];
	for (int i = 0; i < 3; i++)
		for (int j = 0; j < 5; j++)
			w35[i * 5 + j] = 1 + 2 * (i / 2.0) + j / 4.0;
	Case c = mk();
	NodeId a = cin(&c, DT_F64, sh(4, 1, 1, 2, 2), x);
	NodeId u[4] = {
		cop(&c, OP_upsample_bilinear, "size=4,4", 1, a),
		cop(&c, OP_upsample_bilinear, "size=4,4 align_corners=1", 1, a),
		cop(&c, OP_upsample_bilinear, "size=1,2", 1,
		    cin(&c, DT_F64, sh(4, 1, 1, 1, 4), d4)),
		cop(&c, OP_upsample_bilinear, "size=3,5 align_corners=1", 1, a),
	};
	Tensor r[4];
	CHECK_RUN(runn(&c, 4, u, r));
	CHECK_TYPE(&r[0], DT_F64, sh(4, 1, 1, 4, 4));
	// Spelled out, align_corners = 0:
	CHECK_T(&r[0], 1e-15, 1, 1.25, 1.75, 2, 1.5, 1.75, 2.25, 2.5, 2.5, 2.75, 3.25, 3.5, 3, 3.25,
	        3.75, 4);
	check_tensor(__FILE__, __LINE__, &r[0], 1e-15, wf, 16);
	check_tensor(__FILE__, __LINE__, &r[1], 1e-15, wt, 16);
	CHECK_T(&r[2], 1e-15, 2, 7);
	check_tensor(__FILE__, __LINE__, &r[3], 1e-15, w35, 15);
	for (int i = 0; i < 4; i++)
		ir_tensor_free(&r[i]);
}

// ---------------------------------------------------------------- window adjoints

static void
test_conv_grad(void)
{
	Tensor r[6];
	// conv_input_grad, 1-d, g = [1, 2], w = [3, 5]:
	// - stride 2, size 4: output o covers x[2o], x[2o + 1], so each g[o]
	//   lays down g[o] w: [3, 5, 6, 10];
	// - size 5 gives the same 2 outputs (the ambiguity `size` resolves):
	//   [3, 5, 6, 10, 0];
	// - stride 2, padding 1, size 3: o covers x[2o - 1], x[2o]: x[-1] is
	//   padding, so [1 * 5, 2 * 3, 2 * 5] = [5, 6, 10];
	// - stride 1, dilation 2, size 4: o covers x[o], x[o + 2]:
	//   [1 * 3, 2 * 3, 1 * 5, 2 * 5] = [3, 6, 5, 10].
	double g2[] = {1, 2}, w2[] = {3, 5};
	Case c = mk();
	NodeId g = cin(&c, DT_F64, sh(3, 1, 1, 2), g2), w = cin(&c, DT_F64, sh(3, 1, 1, 2), w2);
	NodeId t1[4] = {
		cop(&c, OP_conv_input_grad, "stride=2 padding=0 dilation=1 size=4", 2, g, w),
		cop(&c, OP_conv_input_grad, "stride=2 padding=0 dilation=1 size=5", 2, g, w),
		cop(&c, OP_conv_input_grad, "stride=2 padding=1 dilation=1 size=3", 2, g, w),
		cop(&c, OP_conv_input_grad, "stride=1 padding=0 dilation=2 size=4", 2, g, w),
	};
	CHECK_RUN(runn(&c, 4, t1, r));
	CHECK_TYPE(&r[0], DT_F64, sh(3, 1, 1, 4));
	CHECK_T(&r[0], 0, 3, 5, 6, 10);
	CHECK_T(&r[1], 0, 3, 5, 6, 10, 0);
	CHECK_T(&r[2], 0, 5, 6, 10);
	CHECK_T(&r[3], 0, 3, 6, 5, 10);
	for (int i = 0; i < 4; i++)
		ir_tensor_free(&r[i]);

	// Channels, 1x1 kernels, g channels [1, 2] and [10, 20]:
	// - groups 2, w = [[2]], [[3]]: input channel i gets w[i] g[i]:
	//   [2, 4], [30, 60];
	// - groups 1, w[co][ci] = [[1, 2], [3, 4]]: input channel ci gets
	//   sum_co w[co][ci] g[co]: [1 + 30, 2 + 60], [2 + 40, 4 + 80].
	// 2-d, g = [[1, 2], [3, 4]], w = [[1, 0], [0, 1]], stride 2, size 4x4:
	// each g lands on the diagonal of its 2x2 block.
	double gc[] = {1, 2, 10, 20}, wg[] = {2, 3}, wf[] = {1, 2, 3, 4};
	double gq[] = {1, 2, 3, 4}, wd[] = {1, 0, 0, 1};
	c = mk();
	g = cin(&c, DT_F64, sh(3, 1, 2, 2), gc);
	NodeId t2[3] = {
		cop(&c, OP_conv_input_grad, "stride=1 padding=0 dilation=1 groups=2 size=2", 2, g,
		    cin(&c, DT_F64, sh(3, 2, 1, 1), wg)),
		cop(&c, OP_conv_input_grad, "stride=1 padding=0 dilation=1 size=2", 2, g,
		    cin(&c, DT_F64, sh(3, 2, 2, 1), wf)),
		cop(&c, OP_conv_input_grad, "stride=2,2 padding=0,0 dilation=1,1 size=4,4", 2,
		    cin(&c, DT_F64, sh(4, 1, 1, 2, 2), gq), cin(&c, DT_F64, sh(4, 1, 1, 2, 2), wd)),
	};
	CHECK_RUN(runn(&c, 3, t2, r));
	CHECK_T(&r[0], 0, 2, 4, 30, 60);
	CHECK_T(&r[1], 0, 31, 62, 42, 84);
	CHECK_TYPE(&r[2], DT_F64, sh(4, 1, 1, 4, 4));
	CHECK_T(&r[2], 0, 1, 0, 2, 0, 0, 1, 0, 2, 3, 0, 4, 0, 0, 3, 0, 4);
	for (int i = 0; i < 3; i++)
		ir_tensor_free(&r[i]);

	// conv_weight_grad, x = [1, 2, 3, 4, 5]:
	// - kernel 3, stride 2, g = [1, 10]: dw[k] = x[k] + 10 x[2 + k] = [31, 42, 53];
	// - kernel 3, stride 2, padding 1, g = [1, 10, 100]: o covers
	//   x[2o - 1 .. 2o + 1], so dw[0] = 10 x[1] + 100 x[3] = 420,
	//   dw[1] = x[0] + 10 x[2] + 100 x[4] = 531, dw[2] = x[1] + 10 x[3] = 42.
	// Batch, x = [1, 2, 3], [4, 5, 6], g = [1, 1], [1, 0], kernel 2: the
	// sum over n and o: [1 + 2 + 4, 2 + 3 + 5] = [7, 10].  Groups 2, x
	// channels [1, 2], [3, 4], g = [10], [100], kernel 2: [10, 20], [300, 400].
	double x5[] = {1, 2, 3, 4, 5}, ga[] = {1, 10}, gb[] = {1, 10, 100};
	double xn[] = {1, 2, 3, 4, 5, 6}, gn[] = {1, 1, 1, 0}, xg[] = {1, 2, 3, 4}, gg[] = {10, 100};
	c = mk();
	NodeId x = cin(&c, DT_F64, sh(3, 1, 1, 5), x5);
	NodeId t3[4] = {
		cop(&c, OP_conv_weight_grad, "stride=2 padding=0 dilation=1 kernel=3", 2, x,
		    cin(&c, DT_F64, sh(3, 1, 1, 2), ga)),
		cop(&c, OP_conv_weight_grad, "stride=2 padding=1 dilation=1 kernel=3", 2, x,
		    cin(&c, DT_F64, sh(3, 1, 1, 3), gb)),
		cop(&c, OP_conv_weight_grad, "stride=1 padding=0 dilation=1 kernel=2", 2,
		    cin(&c, DT_F64, sh(3, 2, 1, 3), xn), cin(&c, DT_F64, sh(3, 2, 1, 2), gn)),
		cop(&c, OP_conv_weight_grad, "stride=1 padding=0 dilation=1 groups=2 kernel=2", 2,
		    cin(&c, DT_F64, sh(3, 1, 2, 2), xg), cin(&c, DT_F64, sh(3, 1, 2, 1), gg)),
	};
	CHECK_RUN(runn(&c, 4, t3, r));
	CHECK_TYPE(&r[0], DT_F64, sh(3, 1, 1, 3));
	CHECK_T(&r[0], 0, 31, 42, 53);
	CHECK_T(&r[1], 0, 420, 531, 42);
	CHECK_T(&r[2], 0, 7, 10);
	CHECK_TYPE(&r[3], DT_F64, sh(3, 2, 1, 2));
	CHECK_T(&r[3], 0, 10, 20, 300, 400);
	for (int i = 0; i < 4; i++)
		ir_tensor_free(&r[i]);

	// Shape rules: an input size that conv would not map to g's length,
	// and a kernel that does not either.
	c = mk();
	g = cin(&c, DT_F64, sh(3, 1, 1, 2), g2);
	w = cin(&c, DT_F64, sh(3, 1, 1, 2), w2);
	Attrs a = attrs(OP_conv_input_grad, "stride=2 padding=0 dilation=1 size=6");
	NodeId in[2] = {g, w};
	CHECK(!ir_build(c.g, OP_conv_input_grad, in, 2, &a, 0, errbuf, sizeof errbuf));
	CHECK_STR(errbuf, "conv_input_grad: an input of size 6 gives 3 outputs on spatial axis 0, "
	                  "the gradient has 2");
	a = attrs(OP_conv_weight_grad, "stride=1 padding=0 dilation=1 kernel=2");
	in[0] = cin(&c, DT_F64, sh(3, 1, 1, 5), x5);
	in[1] = g;
	CHECK(!ir_build(c.g, OP_conv_weight_grad, in, 2, &a, 0, errbuf, sizeof errbuf));
	CHECK_STR(errbuf, "conv_weight_grad: kernel 2 gives 4 outputs on spatial axis 0, the "
	                  "gradient has 2");
	ir_graph_free(c.g);
}

static void
test_pool_grad(void)
{
	Tensor r[8];
	// max_pool_grad / max_pool_gather on x = [1, 3, 2, 5, 4], kernel 2,
	// stride 2, padding 1: windows {pad, x0}, {x1, x2}, {x3, x4} have their
	// maxima at 0, 1, 3: g = [10, 20, 30] goes to [10, 20, 0, 30, 0], and h
	// is read there: h = [10, 20, 30, 40, 50] gives [10, 20, 40].
	// Ties and overlap, x = [2, 2, 1, 2], kernel 3, stride 1, padding 1:
	// windows {pad, 2, 2}, {2, 2, 1}, {2, 1, 2}, {1, 2, pad} route to the
	// first maximum, 0, 0, 1, 3: g = [1, 10, 100, 1000] gives [11, 100, 0, 1000].
	// Padding never wins, even over negative values: x = [-3, -1],
	// kernel 2, stride 1, padding 1: windows {pad, -3}, {-3, -1}, {-1, pad}
	// route to 0, 1, 1: g = [1, 2, 3] gives [1, 5].
	double x[] = {1, 3, 2, 5, 4}, g3[] = {10, 20, 30}, h5[] = {10, 20, 30, 40, 50};
	double xt[] = {2, 2, 1, 2}, gt[] = {1, 10, 100, 1000}, xm[] = {-3, -1}, gm[] = {1, 2, 3};
	Case c = mk();
	NodeId a = cin(&c, DT_F64, sh(3, 1, 1, 5), x);
	NodeId at = cin(&c, DT_F64, sh(3, 1, 1, 4), xt), am = cin(&c, DT_F64, sh(3, 1, 1, 2), xm);
	NodeId p[4] = {
		cop(&c, OP_max_pool_grad, "kernel=2 stride=2 padding=1 dilation=1", 2, a,
		    cin(&c, DT_F64, sh(3, 1, 1, 3), g3)),
		cop(&c, OP_max_pool_gather, "kernel=2 stride=2 padding=1 dilation=1", 2, a,
		    cin(&c, DT_F64, sh(3, 1, 1, 5), h5)),
		cop(&c, OP_max_pool_grad, "kernel=3 stride=1 padding=1 dilation=1", 2, at,
		    cin(&c, DT_F64, sh(3, 1, 1, 4), gt)),
		cop(&c, OP_max_pool_grad, "kernel=2 stride=1 padding=1 dilation=1", 2, am,
		    cin(&c, DT_F64, sh(3, 1, 1, 3), gm)),
	};
	CHECK_RUN(runn(&c, 4, p, r));
	CHECK_TYPE(&r[0], DT_F64, sh(3, 1, 1, 5));
	CHECK_T(&r[0], 0, 10, 20, 0, 30, 0);
	CHECK_TYPE(&r[1], DT_F64, sh(3, 1, 1, 3));
	CHECK_T(&r[1], 0, 10, 20, 40);
	CHECK_T(&r[2], 0, 11, 100, 0, 1000);
	CHECK_T(&r[3], 0, 1, 5);
	for (int i = 0; i < 4; i++)
		ir_tensor_free(&r[i]);

	// 2-d, kernel 2, stride 1 on [[1, 9, 2], [8, 3, 7], [4, 6, 5]]: the
	// windows' maxima are at (0, 1), (0, 1), (1, 0), (1, 2); g = [[1, 2],
	// [3, 4]] gives [[0, 3, 0], [3, 0, 4], [0, 0, 0]] and h = 1..9 reads
	// [2, 2, 4, 6].  Row-major window order: [[1, 5], [5, 0]] routes to
	// (0, 1), not (1, 0).  A window of padding only (an empty length padded
	// by 1) gathers 0.
	double x9[] = {1, 9, 2, 8, 3, 7, 4, 6, 5}, g4[] = {1, 2, 3, 4}, h9[] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
	double xr[] = {1, 5, 5, 0}, g1[] = {7};
	c = mk();
	a = cin(&c, DT_F64, sh(4, 1, 1, 3, 3), x9);
	NodeId ae = cin(&c, DT_F64, sh(3, 1, 1, 0), NULL);
	NodeId p2[5] = {
		cop(&c, OP_max_pool_grad, "kernel=2,2 stride=1,1 padding=0,0 dilation=1,1", 2, a,
		    cin(&c, DT_F64, sh(4, 1, 1, 2, 2), g4)),
		cop(&c, OP_max_pool_gather, "kernel=2,2 stride=1,1 padding=0,0 dilation=1,1", 2, a,
		    cin(&c, DT_F64, sh(4, 1, 1, 3, 3), h9)),
		cop(&c, OP_max_pool_grad, "kernel=2,2 stride=1,1 padding=0,0 dilation=1,1", 2,
		    cin(&c, DT_F64, sh(4, 1, 1, 2, 2), xr), cin(&c, DT_F64, sh(4, 1, 1, 1, 1), g1)),
		cop(&c, OP_max_pool_gather, "kernel=2 stride=1 padding=1 dilation=1", 2, ae, ae),
		cop(&c, OP_max_pool_grad, "kernel=2 stride=1 padding=1 dilation=1", 2, ae,
		    cin(&c, DT_F64, sh(3, 1, 1, 1), g1)),
	};
	CHECK_RUN(runn(&c, 5, p2, r));
	CHECK_T(&r[0], 0, 0, 3, 0, 3, 0, 4, 0, 0, 0);
	CHECK_T(&r[1], 0, 2, 2, 4, 6);
	CHECK_T(&r[2], 0, 0, 7, 0, 0);
	CHECK_T(&r[3], 0, 0);
	CHECK_TYPE(&r[4], DT_F64, sh(3, 1, 1, 0));
	for (int i = 0; i < 5; i++)
		ir_tensor_free(&r[i]);

	// avg_pool_grad, g = [3, 6, 9, 12], kernel 3, stride 1, padding 1,
	// size 4: windows {-1, 0, 1}, {0, 1, 2}, {1, 2, 3}, {2, 3, 4}.
	// Counting the padding every share is g / 3: [9/3, 18/3, 27/3, 21/3];
	// not counting it the border windows have 2 elements:
	// [3/2 + 6/3, 3/2 + 6/3 + 9/3, 6/3 + 9/3 + 12/2, 9/3 + 12/2] =
	// [3.5, 6.5, 11, 9] (still summing to 30 = sum g).
	// 2-d, g = [[4, 8], [12, 16]], kernel 2, stride 2: g / 4 over each
	// block; size 5x5 (also 2 windows per axis) leaves row and column 4 at 0.
	double gv[] = {3, 6, 9, 12}, gq[] = {4, 8, 12, 16};
	c = mk();
	a = cin(&c, DT_F64, sh(3, 1, 1, 4), gv);
	NodeId q = cin(&c, DT_F64, sh(4, 1, 1, 2, 2), gq);
	NodeId p3[4] = {
		cop(&c, OP_avg_pool_grad, "kernel=3 stride=1 padding=1 size=4", 1, a),
		cop(&c, OP_avg_pool_grad, "kernel=3 stride=1 padding=1 count_include_pad=0 size=4", 1, a),
		cop(&c, OP_avg_pool_grad, "kernel=2,2 stride=2,2 padding=0,0 size=4,4", 1, q),
		cop(&c, OP_avg_pool_grad, "kernel=2,2 stride=2,2 padding=0,0 size=5,5", 1, q),
	};
	CHECK_RUN(runn(&c, 4, p3, r));
	CHECK_T(&r[0], 1e-15, 3, 6, 9, 7);
	CHECK_T(&r[1], 1e-15, 3.5, 6.5, 11, 9);
	CHECK_T(&r[2], 0, 1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4);
	CHECK_TYPE(&r[3], DT_F64, sh(4, 1, 1, 5, 5));
	CHECK_T(&r[3], 0, 1, 1, 2, 2, 0, 1, 1, 2, 2, 0, 3, 3, 4, 4, 0, 3, 3, 4, 4, 0, 0, 0, 0, 0, 0);
	for (int i = 0; i < 4; i++)
		ir_tensor_free(&r[i]);

	// adaptive_avg_pool_grad, 3 -> 5: the windows of 5 -> 3 are [0, 2),
	// [1, 4), [3, 5); g = [2, 3, 4] shares g / |window|:
	// [2/2, 2/2 + 3/3, 3/3, 3/3 + 4/2, 4/2] = [1, 2, 1, 3, 2].
	// 2-d 1x1 -> 2x3: the one window is everything: 6 / 6 each.
	double ga[] = {2, 3, 4}, g6[] = {6};
	c = mk();
	NodeId p4[2] = {
		cop(&c, OP_adaptive_avg_pool_grad, "size=5", 1, cin(&c, DT_F64, sh(3, 1, 1, 3), ga)),
		cop(&c, OP_adaptive_avg_pool_grad, "size=2,3", 1, cin(&c, DT_F64, sh(4, 1, 1, 1, 1), g6)),
	};
	CHECK_RUN(runn(&c, 2, p4, r));
	CHECK_TYPE(&r[0], DT_F64, sh(3, 1, 1, 5));
	CHECK_T(&r[0], 1e-15, 1, 2, 1, 3, 2);
	CHECK_TYPE(&r[1], DT_F64, sh(4, 1, 1, 2, 3));
	CHECK_T(&r[1], 0, 1, 1, 1, 1, 1, 1);
	for (int i = 0; i < 2; i++)
		ir_tensor_free(&r[i]);
}

static void
test_upsample_grad(void)
{
	// 2 -> 4 along an axis, output d reads its two pixels with weights
	// (pixel 0, pixel 1):
	//   align_corners = 1: src = d / 3: (1, 0), (2/3, 1/3), (1/3, 2/3), (0, 1);
	//   align_corners = 0: src = 0 (clamped), 0.25, 0.75, 1.25 (the last
	//   pixel read twice): (1, 0), (3/4, 1/4), (1/4, 3/4), (0, 1).
	// So g = ones(4, 4) gives 2 x 2 = 4 per pixel; a one at (1, 2) gives
	// A[i][1] A[j][2] = [[2/9, 4/9], [1/9, 2/9]] (align_corners = 1), a one at
	// (3, 1) [[0, 0], [3/4, 1/4]] (align_corners = 0).
	// Down, 1x2 -> 1x4, align_corners = 0: src = (d + 0.5) 2 - 0.5 = 0.5,
	// 2.5: g = [1, 10] gives [0.5, 0.5, 5, 5].
	double ones[16], e12[16] = {0}, e31[16] = {0}, gd[] = {1, 10};
	for (int i = 0; i < 16; i++)
		ones[i] = 1;
	e12[1 * 4 + 2] = 1;
	e31[3 * 4 + 1] = 1;
	Case c = mk();
	NodeId u[4] = {
		cop(&c, OP_upsample_bilinear_grad, "size=2,2 align_corners=1", 1,
		    cin(&c, DT_F64, sh(4, 1, 1, 4, 4), ones)),
		cop(&c, OP_upsample_bilinear_grad, "size=2,2 align_corners=1", 1,
		    cin(&c, DT_F64, sh(4, 1, 1, 4, 4), e12)),
		cop(&c, OP_upsample_bilinear_grad, "size=2,2", 1, cin(&c, DT_F64, sh(4, 1, 1, 4, 4), e31)),
		cop(&c, OP_upsample_bilinear_grad, "size=1,4", 1, cin(&c, DT_F64, sh(4, 1, 1, 1, 2), gd)),
	};
	Tensor r[4];
	CHECK_RUN(runn(&c, 4, u, r));
	CHECK_TYPE(&r[0], DT_F64, sh(4, 1, 1, 2, 2));
	CHECK_T(&r[0], 1e-15, 4, 4, 4, 4);
	CHECK_T(&r[1], 1e-15, 2.0 / 9, 4.0 / 9, 1.0 / 9, 2.0 / 9);
	CHECK_T(&r[2], 1e-15, 0, 0, 0.75, 0.25);
	CHECK_T(&r[3], 1e-15, 0.5, 0.5, 5, 5);
	for (int i = 0; i < 4; i++)
		ir_tensor_free(&r[i]);
}

// The adjoint identities at random values, an independent check of the
// derivative ops against the forward ops:
//   <conv(x, w), g> = <x, conv_input_grad(g, w)> = <w, conv_weight_grad(x, g)>
//   <max_pool_grad(x, g), h> = <g, max_pool_gather(x, h)>, max_pool_gather(x, x) = max_pool(x)
//   <X(x), g> = <x, X_grad(g)> for avg_pool, adaptive_avg_pool, upsample_bilinear.
static uint64_t adj_rng = 0x9e3779b97f4a7c15ull;

static double *
rand_fill(size_t n)
{
	double *v = malloc(n * sizeof *v);
	for (size_t i = 0; i < n; i++) {
		adj_rng ^= adj_rng << 13;
		adj_rng ^= adj_rng >> 7;
		adj_rng ^= adj_rng << 17;
		v[i] = (double)(adj_rng >> 11) / 9007199254740992.0 * 2 - 1;
	}
	return v;
}

static double
dotp(const Tensor *a, const double *b)
{
	double s = 0;
	for (size_t i = 0; i < tnumel(a); i++)
		s += a->data[i] * b[i];
	return s;
}

static size_t
snumel(Shape s)
{
	size_t n = 1;
	for (int i = 0; i < s.rank; i++)
		n *= (size_t)s.dim[i];
	return n;
}

static void
adjoint_conv(Shape xs, Shape ws, Shape gs, const char *conv, const char *in_size,
             const char *kernel)
{
	double *x = rand_fill(snumel(xs)), *w = rand_fill(snumel(ws)), *g = rand_fill(snumel(gs));
	char s1[200], s2[200];
	snprintf(s1, sizeof s1, "%s %s", conv, in_size);
	snprintf(s2, sizeof s2, "%s %s", conv, kernel);
	Case c = mk();
	NodeId xn = cin(&c, DT_F64, xs, x), wn = cin(&c, DT_F64, ws, w), gn = cin(&c, DT_F64, gs, g);
	NodeId o[3] = {
		cop(&c, OP_conv, conv, 2, xn, wn),
		cop(&c, OP_conv_input_grad, s1, 2, gn, wn),
		cop(&c, OP_conv_weight_grad, s2, 2, xn, gn),
	};
	Tensor r[3];
	CHECK_RUN(runn(&c, 3, o, r));
	CHECK_TYPE(&r[0], DT_F64, gs);
	CHECK_TYPE(&r[1], DT_F64, xs);
	CHECK_TYPE(&r[2], DT_F64, ws);
	double t = dotp(&r[0], g);
	CHECK(fabs(t) > 1e-3); // not trivially zero
	CHECK_NEAR(dotp(&r[1], x), t, 1e-12);
	CHECK_NEAR(dotp(&r[2], w), t, 1e-12);
	for (int i = 0; i < 3; i++)
		ir_tensor_free(&r[i]);
	free(x), free(w), free(g);
}

// <op(x), g> = <x, op_grad(g)> for a linear window op and its adjoint.
static void
adjoint_linear(int op, int gop_, Shape xs, Shape gs, const char *spec, const char *gspec)
{
	double *x = rand_fill(snumel(xs)), *g = rand_fill(snumel(gs));
	Case c = mk();
	NodeId xn = cin(&c, DT_F64, xs, x), gn = cin(&c, DT_F64, gs, g);
	NodeId o[2] = {cop(&c, op, spec, 1, xn), cop(&c, gop_, gspec, 1, gn)};
	Tensor r[2];
	CHECK_RUN(runn(&c, 2, o, r));
	CHECK_TYPE(&r[0], DT_F64, gs);
	CHECK_TYPE(&r[1], DT_F64, xs);
	double t = dotp(&r[0], g);
	CHECK(fabs(t) > 1e-3);
	CHECK_NEAR(dotp(&r[1], x), t, 1e-12);
	for (int i = 0; i < 2; i++)
		ir_tensor_free(&r[i]);
	free(x), free(g);
}

static void
test_adjoints(void)
{
	// 2-d: stride (2, 1), padding (1, 2), dilation (1, 2), groups 2:
	// H: (7 + 2 - 2 - 1) / 2 + 1 = 4, W: (6 + 4 - 4 - 1) / 1 + 1 = 6.
	adjoint_conv(sh(4, 2, 4, 7, 6), sh(4, 6, 2, 2, 3), sh(4, 2, 6, 4, 6),
	             "stride=2,1 padding=1,2 dilation=1,2 groups=2", "size=7,6", "kernel=2,3");
	// 1-d, wav2letter's first layer at a small size: kernel 25, stride 16,
	// padding 4 on 200: (200 + 8 - 24 - 1) / 16 + 1 = 12.
	adjoint_conv(sh(3, 2, 3, 200), sh(3, 4, 3, 25), sh(3, 2, 4, 12),
	             "stride=16 padding=4 dilation=1", "size=200", "kernel=25");
	// The pools.
	double *x = rand_fill(2 * 3 * 7 * 6), *g = rand_fill(2 * 3 * 4 * 3), *h = rand_fill(2 * 3 * 7 * 6);
	const char *mp = "kernel=3,2 stride=2,2 padding=1,1 dilation=1,2";
	Case c = mk();
	NodeId xn = cin(&c, DT_F64, sh(4, 2, 3, 7, 6), x), gn = cin(&c, DT_F64, sh(4, 2, 3, 4, 3), g);
	NodeId hn = cin(&c, DT_F64, sh(4, 2, 3, 7, 6), h);
	NodeId o[4] = {
		cop(&c, OP_max_pool_grad, mp, 2, xn, gn),
		cop(&c, OP_max_pool_gather, mp, 2, xn, hn),
		cop(&c, OP_max_pool_gather, mp, 2, xn, xn),
		cop(&c, OP_max_pool, mp, 1, xn),
	};
	Tensor r[4];
	CHECK_RUN(runn(&c, 4, o, r));
	CHECK_TYPE(&r[1], DT_F64, sh(4, 2, 3, 4, 3));
	double t = dotp(&r[0], h);
	CHECK(fabs(t) > 1e-3);
	CHECK_NEAR(dotp(&r[1], g), t, 1e-12);
	check_tensor(__FILE__, __LINE__, &r[2], 0, r[3].data, tnumel(&r[3]));
	for (int i = 0; i < 4; i++)
		ir_tensor_free(&r[i]);
	free(x), free(g), free(h);
	adjoint_linear(OP_avg_pool, OP_avg_pool_grad, sh(4, 2, 3, 7, 6), sh(4, 2, 3, 4, 4),
	               "kernel=3,2 stride=2,2 padding=1,1", "kernel=3,2 stride=2,2 padding=1,1 size=7,6");
	adjoint_linear(OP_avg_pool, OP_avg_pool_grad, sh(3, 2, 3, 9), sh(3, 2, 3, 5),
	               "kernel=3 stride=2 padding=1 count_include_pad=0",
	               "kernel=3 stride=2 padding=1 count_include_pad=0 size=9");
	adjoint_linear(OP_adaptive_avg_pool, OP_adaptive_avg_pool_grad, sh(4, 2, 3, 7, 5),
	               sh(4, 2, 3, 3, 4), "size=3,4", "size=7,5");
	adjoint_linear(OP_adaptive_avg_pool, OP_adaptive_avg_pool_grad, sh(3, 1, 2, 3), sh(3, 1, 2, 7),
	               "size=7", "size=3");
	adjoint_linear(OP_upsample_bilinear, OP_upsample_bilinear_grad, sh(4, 2, 3, 3, 4),
	               sh(4, 2, 3, 7, 9), "size=7,9", "size=3,4");
	adjoint_linear(OP_upsample_bilinear, OP_upsample_bilinear_grad, sh(4, 2, 3, 5, 7),
	               sh(4, 2, 3, 4, 3), "size=4,3 align_corners=1", "size=5,7 align_corners=1");
}

// ---------------------------------------------------------------- scan

// Body (c, x) -> (c + x, c + x): a cumulative sum.
static Graph *
cumsum_body(void)
{
	Graph *b = ir_graph_new("cumsum", NULL);
	Shape s = sh(0);
	NodeId c = ir_add_input(b, "c", IN_ARG, DT_F64, &s, 0);
	NodeId x = ir_add_input(b, "x", IN_ARG, DT_F64, &s, 0);
	NodeId y = gop(b, OP_add, NULL, 2, c, x);
	ir_add_output(b, y, "c", -1);
	ir_add_output(b, y, "y", -1);
	return b;
}

static void
test_scan(void)
{
	Tensor r[4];
	// Forward: carry 0 + 1, + 2, + 3, + 4: ys [1, 3, 6, 10], final 10.
	// Reverse: steps t = 3, 2, 1, 0 give 4, 7, 9, 10 and ys[t] is step t's
	// output: [10, 9, 7, 4], final 10.
	double xs[] = {1, 2, 3, 4}, zero[] = {0};
	for (int rev = 0; rev < 2; rev++) {
		Case c = mk();
		uint32_t bi = ir_add_sub(c.g, cumsum_body());
		char spec[64];
		snprintf(spec, sizeof spec, "body=%u ncarry=1 nxs=1 reverse=%d", bi, rev);
		NodeId s = cop(&c, OP_scan, spec, 2, cin(&c, DT_F64, sh(0), zero),
		               cin(&c, DT_F64, sh(1, 4), xs));
		NodeId o[2] = {cop(&c, OP_get, "index=0", 1, s), cop(&c, OP_get, "index=1", 1, s)};
		CHECK_RUN(runn(&c, 2, o, r));
		CHECK_T(&r[0], 0, 10);
		CHECK_TYPE(&r[1], DT_F64, sh(1, 4));
		if (rev)
			CHECK_T(&r[1], 0, 10, 9, 7, 4);
		else
			CHECK_T(&r[1], 0, 1, 3, 6, 10);
		for (int i = 0; i < 2; i++)
			ir_tensor_free(&r[i]);
	}

	// Two carries and an invariant: (a, b, x, k) -> (b, a + b, k a + x).
	// From (0, 1), x = [1, 1, 1, 1, 1, 1], k = 10: a runs through the
	// Fibonacci numbers 0, 1, 1, 2, 3, 5 (ys = 10 a + 1) and ends at
	// (a, b) = (8, 13).
	{
		Graph *b = ir_graph_new("fib", NULL);
		Shape s = sh(0);
		NodeId ba = ir_add_input(b, "a", IN_ARG, DT_F64, &s, 0);
		NodeId bb = ir_add_input(b, "b", IN_ARG, DT_F64, &s, 0);
		NodeId bx = ir_add_input(b, "x", IN_ARG, DT_F64, &s, 0);
		NodeId bk = ir_add_input(b, "k", IN_ARG, DT_F64, &s, 0);
		ir_add_output(b, bb, "a", -1);
		ir_add_output(b, gop(b, OP_add, NULL, 2, ba, bb), "b", -1);
		NodeId ka = gop(b, OP_mul, NULL, 2, bk, ba);
		ir_add_output(b, gop(b, OP_add, NULL, 2, ka, bx), "y", -1);
		double a0[] = {0}, b0[] = {1}, x6[] = {1, 1, 1, 1, 1, 1}, k[] = {10};
		Case c = mk();
		uint32_t bi = ir_add_sub(c.g, b);
		char spec[64];
		snprintf(spec, sizeof spec, "body=%u ncarry=2 nxs=1", bi);
		NodeId sc = cop(&c, OP_scan, spec, 4, cin(&c, DT_F64, sh(0), a0),
		                cin(&c, DT_F64, sh(0), b0), cin(&c, DT_F64, sh(1, 6), x6),
		                cin(&c, DT_F64, sh(0), k));
		NodeId o[3] = {cop(&c, OP_get, "index=0", 1, sc), cop(&c, OP_get, "index=1", 1, sc),
		               cop(&c, OP_get, "index=2", 1, sc)};
		CHECK_RUN(runn(&c, 3, o, r));
		CHECK_T(&r[0], 0, 8);
		CHECK_T(&r[1], 0, 13);
		CHECK_T(&r[2], 0, 1, 11, 11, 21, 31, 51);
		for (int i = 0; i < 3; i++)
			ir_tensor_free(&r[i]);
	}

	// Nested: the outer scan runs over the rows of [[1, 2, 3], [4, 5, 6]];
	// its body runs an inner cumulative-sum scan over the row (from a carry
	// made by `full`), adds the row total to its own carry and emits the
	// row's prefix sums: ys [[1, 3, 6], [4, 9, 15]], final 6 + 15 = 21.
	{
		Graph *ob = ir_graph_new("rows", NULL);
		Shape s0 = sh(0), s3 = sh(1, 3);
		NodeId oc = ir_add_input(ob, "s", IN_ARG, DT_F64, &s0, 0);
		NodeId orow = ir_add_input(ob, "row", IN_ARG, DT_F64, &s3, 0);
		uint32_t ibi = ir_add_sub(ob, cumsum_body());
		char spec[64];
		snprintf(spec, sizeof spec, "body=%u ncarry=1 nxs=1", ibi);
		NodeId z = gop(ob, OP_full, "value=0 shape= dtype=f64", 0);
		NodeId is = gop(ob, OP_scan, spec, 2, z, orow);
		NodeId tot = gop(ob, OP_get, "index=0", 1, is);
		ir_add_output(ob, gop(ob, OP_add, NULL, 2, oc, tot), "s", -1);
		ir_add_output(ob, gop(ob, OP_get, "index=1", 1, is), "y", -1);
		double m[] = {1, 2, 3, 4, 5, 6};
		Case c = mk();
		uint32_t obi = ir_add_sub(c.g, ob);
		snprintf(spec, sizeof spec, "body=%u ncarry=1 nxs=1", obi);
		NodeId sc = cop(&c, OP_scan, spec, 2, cin(&c, DT_F64, sh(0), zero),
		                cin(&c, DT_F64, sh(2, 2, 3), m));
		NodeId o[2] = {cop(&c, OP_get, "index=0", 1, sc),
		               cop(&c, OP_get, "index=1", 1, sc)};
		CHECK_RUN(runn(&c, 2, o, r));
		CHECK_T(&r[0], 0, 21);
		CHECK_TYPE(&r[1], DT_F64, sh(2, 2, 3));
		CHECK_T(&r[1], 0, 1, 3, 6, 4, 9, 15);
		for (int i = 0; i < 2; i++)
			ir_tensor_free(&r[i]);
	}

	// An empty sequence: the carries come back unchanged, the ys are empty.
	{
		double c0[] = {5};
		Case c = mk();
		uint32_t bi = ir_add_sub(c.g, cumsum_body());
		char spec[64];
		snprintf(spec, sizeof spec, "body=%u ncarry=1 nxs=1", bi);
		NodeId sc = cop(&c, OP_scan, spec, 2, cin(&c, DT_F64, sh(0), c0),
		                cin(&c, DT_F64, sh(1, 0), NULL));
		NodeId o[2] = {cop(&c, OP_get, "index=0", 1, sc),
		               cop(&c, OP_get, "index=1", 1, sc)};
		CHECK_RUN(runn(&c, 2, o, r));
		CHECK_T(&r[0], 0, 5);
		CHECK_TYPE(&r[1], DT_F64, sh(1, 0));
		for (int i = 0; i < 2; i++)
			ir_tensor_free(&r[i]);
	}

	// A run-time error inside a body: reported with the step, nothing leaks.
	{
		Graph *b = ir_graph_new("gather", NULL);
		Shape s0 = sh(0), s3 = sh(1, 3);
		NodeId tbl = ir_add_input(b, "tbl", IN_ARG, DT_F64, &s3, 0);
		NodeId ix = ir_add_input(b, "i", IN_ARG, DT_I64, &s0, 0);
		ir_add_output(b, tbl, "tbl", -1);
		ir_add_output(b, gop(b, OP_take, "axis=0", 2, tbl, ix), "y", -1);
		double t3[] = {1, 2, 3}, idx[] = {0, 2, 5};
		Case c = mk();
		uint32_t bi = ir_add_sub(c.g, b);
		char spec[64];
		snprintf(spec, sizeof spec, "body=%u ncarry=1 nxs=1", bi);
		NodeId sc = cop(&c, OP_scan, spec, 2, cin(&c, DT_F64, sh(1, 3), t3),
		                cin(&c, DT_I64, sh(1, 3), idx));
		CHECK(!run(&c, cop(&c, OP_get, "index=1", 1, sc), r));
		CHECK_STR(errbuf, "scan: body 'gather', step 2: "
		                  "take: index 5 out of range for axis 0 of size 3");
	}
}

// ---------------------------------------------------------------- assignment

static uint64_t lcg_state = 12345;

static double
lcg(void)
{
	lcg_state = lcg_state * 6364136223846793005ull + 1442695040888963407ull;
	return (double)(lcg_state >> 11) / 9007199254740992.0;
}

// The minimum total cost over all assignments of the smaller side, by
// trying every injective map (at most 5!/0! = 120 of them).
static double
brute(const double *cost, int R, int C, int row, int *usedc, int *best)
{
	if (row == R)
		return 0;
	double m = INFINITY;
	int free_rows = R - row, free_cols = 0;
	for (int j = 0; j < C; j++)
		free_cols += !usedc[j];
	// A row may stay unassigned only when rows outnumber the free columns.
	if (free_rows > free_cols) {
		int b[8];
		double v = brute(cost, R, C, row + 1, usedc, b);
		if (v < m) {
			m = v;
			best[row] = -1;
			memcpy(best + row + 1, b + row + 1, sizeof(int) * (size_t)(R - row - 1));
		}
	}
	for (int j = 0; j < C; j++) {
		if (usedc[j])
			continue;
		usedc[j] = 1;
		int b[8];
		double v = cost[row * C + j] + brute(cost, R, C, row + 1, usedc, b);
		usedc[j] = 0;
		if (v < m) {
			m = v;
			best[row] = j;
			memcpy(best + row + 1, b + row + 1, sizeof(int) * (size_t)(R - row - 1));
		}
	}
	return m;
}

static int
lsa(const double *cost, int R, int C, Tensor *r)
{
	Case c = mk();
	NodeId a = cop(&c, OP_linear_sum_assignment, NULL, 1, cin(&c, DT_F64, sh(2, R, C), cost));
	return run(&c, a, r);
}

static void
test_assignment(void)
{
	// scipy's example: [[4, 1, 3], [2, 0, 5], [3, 2, 2]] -> columns [1, 0, 2],
	// cost 1 + 2 + 2 = 5.
	double ex[] = {4, 1, 3, 2, 0, 5, 3, 2, 2};
	Tensor r;
	CHECK_RUN(lsa(ex, 3, 3, &r));
	CHECK_TYPE(&r, DT_I64, sh(1, 3));
	CHECK_T(&r, 0, 1, 0, 2);
	ir_tensor_free(&r);
	// More rows than columns: the two cheapest distinct rows win, the
	// others get -1.  [[5, 9], [1, 8], [7, 2]] -> rows 1 -> 0, 2 -> 1.
	double tall[] = {5, 9, 1, 8, 7, 2};
	CHECK_RUN(lsa(tall, 3, 2, &r));
	CHECK_T(&r, 0, -1, 0, 1);
	ir_tensor_free(&r);
	// +inf forbids a pair; with no finite assignment, an error.
	double inf1[] = {INFINITY, 1, 1, INFINITY}, inf2[] = {INFINITY, INFINITY, 1, 2};
	CHECK_RUN(lsa(inf1, 2, 2, &r));
	CHECK_T(&r, 0, 1, 0);
	ir_tensor_free(&r);
	CHECK(!lsa(inf2, 2, 2, &r));
	CHECK_STR(errbuf, "linear_sum_assignment: the cost matrix is infeasible");
	double nan1[] = {1, NAN, 2, 3};
	CHECK(!lsa(nan1, 2, 2, &r));
	CHECK_STR(errbuf, "linear_sum_assignment: the cost matrix contains NaN or -inf");
	// Against brute force on random matrices of every shape up to 5x5:
	// real-valued costs have a unique optimum (almost surely), so the
	// assignment itself must match; small integer costs have ties, so only
	// the total and validity are compared.
	int ok = 1;
	for (int trial = 0; trial < 300; trial++) {
		int R = 1 + trial % 5, C = 1 + (trial / 5) % 5, ints = trial % 2;
		double cost[25];
		for (int i = 0; i < R * C; i++)
			cost[i] = ints ? floor(lcg() * 4) : lcg() * 10 - 3;
		int usedc[5] = {0}, best[8];
		double want = brute(cost, R, C, 0, usedc, best);
		if (!lsa(cost, R, C, &r)) {
			ok = 0;
			continue;
		}
		double got = 0;
		int seen[5] = {0}, nassigned = 0, valid = 1;
		for (int i = 0; i < R; i++) {
			int j = (int)r.data[i];
			if (j < 0)
				continue;
			valid &= j < C && !seen[j];
			seen[j < C ? j : 0] = 1;
			nassigned++;
			got += cost[i * C + j];
		}
		valid &= nassigned == (R < C ? R : C);
		if (!valid || fabs(got - want) > 1e-12 * fmax(1, fabs(want))) {
			ok = 0;
			fprintf(stderr, "  lsa %dx%d: cost %g, brute force %g\n", R, C, got, want);
		}
		if (!ints)
			for (int i = 0; i < R; i++)
				if ((int)r.data[i] != best[i])
					ok = 0;
		ir_tensor_free(&r);
	}
	CHECK(ok);
	// An empty matrix.
	CHECK_RUN(lsa(NULL, 0, 3, &r));
	CHECK(tnumel(&r) == 0);
	ir_tensor_free(&r);
	CHECK_RUN(lsa(NULL, 2, 0, &r));
	CHECK_T(&r, 0, -1, -1);
	ir_tensor_free(&r);
}

// ---------------------------------------------------------------- modules

// An initializer graph: its inputs are earlier declarations by name.
static Graph *
init_full(double v, DType dt, int n)
{
	Graph *g = ir_graph_new("init", NULL);
	char spec[96];
	snprintf(spec, sizeof spec, "value=%.17g shape=%d dtype=%s", v, n, ir_dtype_name(dt));
	ir_add_output(g, gop(g, OP_full, spec, 0), "v", -1);
	return g;
}

static void
test_module(void)
{
	// w: f32[2] = 0.1 (rounded to float); b: bound from a "file";
	// c: f64[2] = w * 3 + b, reading both by name; d: bound, no initializer;
	// e: f32[2] = w * 3 in f32, computed in double and rounded to float at
	// the end: (float)((float)0.1 * 3) = 0.300000011920928955078125, where
	// the double product is 0.300000004470348358154296875.
	Decl d[5] = {
		{.name = "w", .kind = DECL_PARAM, .dtype = DT_F32, .shape = sh(1, 2)},
		{.name = "b", .kind = DECL_PARAM, .dtype = DT_F64, .shape = sh(1, 2)},
		{.name = "c", .kind = DECL_CONST, .dtype = DT_F64, .shape = sh(1, 2)},
		{.name = "d", .kind = DECL_PARAM, .dtype = DT_F64, .shape = sh(0)},
		{.name = "e", .kind = DECL_CONST, .dtype = DT_F32, .shape = sh(1, 2)},
	};
	d[0].init = init_full(0.1, DT_F32, 2);
	d[1].init = init_full(7, DT_F64, 2); // overridden by the binding
	{
		Graph *g = ir_graph_new("init_c", NULL);
		Shape s = sh(1, 2);
		// The inputs in another order than the declarations: by name.
		NodeId b = ir_add_input(g, "b", IN_PARAM, DT_F64, &s, 0);
		NodeId w = ir_add_input(g, "w", IN_PARAM, DT_F32, &s, 0);
		NodeId w64 = gop(g, OP_cast, "dtype=f64", 1, w);
		NodeId three = gop(g, OP_full, "value=3 shape=2 dtype=f64", 0);
		NodeId w3 = gop(g, OP_mul, NULL, 2, w64, three);
		ir_add_output(g, gop(g, OP_add, NULL, 2, w3, b), "c", -1);
		d[2].init = g;
		g = ir_graph_new("init_e", NULL);
		w = ir_add_input(g, "w", IN_PARAM, DT_F32, &s, 0);
		three = gop(g, OP_full, "value=3 shape=2 dtype=f32", 0);
		ir_add_output(g, gop(g, OP_mul, NULL, 2, w, three), "e", -1);
		d[4].init = g;
	}
	for (int i = 0; i < 5; i++)
		mark(d[i].init ? d[i].init : d[0].init);
	double bv[] = {1, 2}, dv[] = {42};
	Tensor bound[5] = {{0}, {DT_F64, sh(1, 2), bv}, {0}, {DT_F64, sh(0), dv}, {0}};
	int isbound[5] = {0, 1, 0, 1, 0};
	Module m = {.name = "m", .decl = d, .ndecl = 5};
	Tensor vals[5];
	CHECK_RUN(ir_module_init(&m, bound, isbound, vals, RUNSEED, errbuf, sizeof errbuf));
	double w = (double)(float)0.1; // 0.100000001490116119384765625
	CHECK_TYPE(&vals[0], DT_F32, sh(1, 2));
	CHECK_T(&vals[0], 0, 0.100000001490116119384765625, 0.100000001490116119384765625);
	CHECK_T(&vals[1], 0, 1, 2);
	CHECK_T(&vals[2], 1e-15, 3 * w + 1, 3 * w + 2);
	CHECK_T(&vals[3], 0, 42);
	CHECK_T(&vals[4], 0, 0.300000011920928955078125, 0.300000011920928955078125);
	CHECK((double)(float)0.1 * 3 == 0.300000004470348358154296875);
	for (int i = 0; i < 5; i++)
		ir_tensor_free(&vals[i]);

	// d unbound and without initializer.
	isbound[3] = 0;
	CHECK(!ir_module_init(&m, bound, isbound, vals, RUNSEED, errbuf, sizeof errbuf));
	CHECK_STR(errbuf, "parameter 'd' has no initializer and was not bound from a file");
	CHECK(vals[0].data == NULL && vals[2].data == NULL);
	// A binding of the wrong shape.
	isbound[3] = 1;
	bound[3].shape = sh(1, 1);
	CHECK(!ir_module_init(&m, bound, isbound, vals, RUNSEED, errbuf, sizeof errbuf));
	CHECK_STR(errbuf, "parameter 'd': the bound tensor is f64[1], declared f64[]");
	bound[3].shape = sh(0);
	// An initializer that reads a later declaration.
	isbound[1] = 0;
	Decl tmp = d[1];
	d[1] = d[2];
	d[2] = tmp;
	CHECK(!ir_module_init(&m, bound, isbound, vals, RUNSEED, errbuf, sizeof errbuf));
	CHECK_STR(errbuf, "initializer of 'c' reads 'b', which is not declared before it");
	for (int i = 0; i < 5; i++)
		ir_graph_free(d[i].init);
}

int
main(void)
{
	test_unary();
	test_special();
	test_unarya();
	test_binary();
	test_int();
	test_compare();
	test_factory();
	test_samplers();
	test_reduce();
	test_layout();
	test_index();
	test_errors();
	test_shape_overflow();
	test_matmul();
	test_conv();
	test_pool();
	test_upsample();
	test_conv_grad();
	test_pool_grad();
	test_upsample_grad();
	test_adjoints();
	test_scan();
	test_assignment();
	test_module();
	// Every op of ops.def ran at least once.
	for (int op = 1; op < OP_COUNT; op++) {
		tu_ncheck++;
		if (!covered[op]) {
			tu_nfail++;
			fprintf(stderr, "%s:%d: op '%s' is not covered by any test\n", __FILE__,
			        __LINE__, ir_op(op)->name);
		}
	}
	return TU_DONE("test_interp");
}
