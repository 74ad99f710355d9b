// tests/unit/test_gradcheck.c -- every op's derivative rules against
// central finite differences, in float64, through the reference
// interpreter.
//
// For each case, a small module f(params) is parsed; at random params x,
// random param tangents t and a random output cotangent w:
//   jvp:  J t from pass_jvp       vs  (f(x + h t) - f(x - h t)) / 2h
//   vjp:  <J^T w, t> from pass_vjp vs  <w, J t> of the finite difference
//   hvp:  for smooth cases, H t = jvp(vjp(f)) vs the central difference of
//         the gradient (f scalarized as <w, f>), which checks that every
//         rule builds ops that are themselves differentiable.
// Errors are relative (normalized by the larger magnitude), so scale does
// not matter.  Every op of the table must appear in some case: ops that
// are not differentiable appear in cases that must fail with a diagnostic.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frontend.h"
#include "ir.h"
#include "passes.h"

static int nfail, ncheck;
static uint8_t covered[OP_COUNT];

typedef struct Case {
	const char *name;
	const char *decls; // param/const declarations (params get random values)
	const char *expr; // forward's return value
	int domain; // 0: |x| in [0.3, 1.5] with random sign; 1: x in [0.5, 1.5]
	int smooth; // check second order too
	double tol;
	const char *fail; // expected error text (a non-differentiable case), or NULL
} Case;

static uint64_t rng = 88172645463325252ull;

static double
rnd(void) // [0, 1)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (double)(rng >> 11) / 9007199254740992.0;
}

static double
sample(int domain)
{
	double m = domain ? 0.5 + rnd() : 0.3 + 1.2 * rnd();
	return domain || rnd() < 0.5 ? m : -m;
}

// Runs g with the given inputs (by input index) and returns its outputs.
static Tensor *
run(const Graph *g, Tensor *in)
{
	Tensor *out = calloc(g->nout + 1, sizeof *out);
	char err[512];
	if (!ir_interp(g, in, out, 0, err, sizeof err)) {
		fprintf(stderr, "interp: %s\n", err);
		exit(1);
	}
	return out;
}

static void
free_all(Tensor *t, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		ir_tensor_free(&t[i]);
	free(t);
}

static double
rel_err(double a, double b)
{
	double s = fmax(fabs(a), fabs(b));
	return s < 1e-12 ? fabs(a - b) : fabs(a - b) / s;
}

static void
check(const char *what, const char *name, double got, double want, double tol)
{
	ncheck++;
	if (!(rel_err(got, want) <= tol)) {
		nfail++;
		fprintf(stderr, "FAIL %s %s: got %.12g want %.12g (rel err %.3g > %.3g)\n", name, what,
		        got, want, rel_err(got, want), tol);
	}
}

static double
dot_t(const Tensor *a, const Tensor *b)
{
	double s = 0;
	int64_t n = ir_numel(&a->shape);
	for (int64_t i = 0; i < n; i++)
		s += a->data[i] * b->data[i];
	return s;
}

// A vector-norm relative comparison of two tensors.
static void
check_tensor(const char *what, const char *name, const Tensor *got, const Tensor *want, double tol)
{
	double num = 0, den = 0;
	int64_t n = ir_numel(&got->shape);
	for (int64_t i = 0; i < n; i++) {
		double d = got->data[i] - want->data[i];
		num += d * d;
		den += want->data[i] * want->data[i] + got->data[i] * got->data[i];
	}
	ncheck++;
	double e = den < 1e-24 ? sqrt(num) : sqrt(num / den);
	if (!(e <= tol)) {
		nfail++;
		fprintf(stderr, "FAIL %s %s: normalized error %.3g > %.3g\n", name, what, e, tol);
		for (int64_t i = 0; i < n && i < 8; i++)
			fprintf(stderr, "   [%lld] got %.12g want %.12g\n", (long long)i, got->data[i],
			        want->data[i]);
	}
}

static void
mark_covered(const Graph *g)
{
	for (NodeId n = 1; n < g->nnode; n++)
		covered[g->node[n].op] = 1;
	for (uint32_t i = 0; i < g->nsub; i++)
		mark_covered(g->sub[i]);
}

static void
run_case(const Case *c)
{
	char src[4096];
	snprintf(src, sizeof src, "%s\ndef forward() {\n  return %s\n}\n", c->decls, c->expr);
	FeOptions opts = {.diag = stderr};
	Module *m = fe_parse_string(c->name, src, strlen(src), &opts);
	if (!m) {
		nfail++;
		fprintf(stderr, "FAIL %s: does not parse\n%s", c->name, src);
		return;
	}
	Graph *f = m->main;
	mark_covered(f);
	for (uint32_t i = 0; i < m->ndecl; i++)
		if (m->decl[i].init)
			mark_covered(m->decl[i].init);
	char err[512];
	Loc el;
	Graph *gv = pass_vjp(f, &el, err, sizeof err);
	Graph *gj = pass_jvp(f, &el, err, sizeof err);
	if (c->fail) {
		ncheck++;
		if (gv || !strstr(err, c->fail)) {
			nfail++;
			fprintf(stderr, "FAIL %s: expected the error '%s', got %s\n", c->name, c->fail,
			        gv ? "a graph" : err);
		}
		ir_graph_free(gv);
		ir_graph_free(gj);
		ir_module_free(m);
		return;
	}
	if (!gv || !gj) {
		nfail++;
		fprintf(stderr, "FAIL %s: %s\n", c->name, err);
		ir_graph_free(gv);
		ir_graph_free(gj);
		ir_module_free(m);
		return;
	}
	if (!ir_verify(gv, err, sizeof err) || !ir_verify(gj, err, sizeof err)) {
		nfail++;
		fprintf(stderr, "FAIL %s: derived graph does not verify: %s\n", c->name, err);
	}
	// Values: constants from their initializers, params random.
	Tensor *vals = calloc(m->ndecl + 1, sizeof *vals);
	int *bound = calloc(m->ndecl + 1, sizeof *bound);
	Tensor *pre = calloc(m->ndecl + 1, sizeof *pre);
	for (uint32_t i = 0; i < m->ndecl; i++)
		if (m->decl[i].kind == DECL_PARAM) {
			ir_tensor_alloc(&pre[i], m->decl[i].dtype, &m->decl[i].shape);
			for (int64_t k = 0; k < ir_numel(&m->decl[i].shape); k++)
				pre[i].data[k] = sample(c->domain);
			bound[i] = 1;
		}
	if (!ir_module_init(m, pre, bound, vals, 0, err, sizeof err)) {
		fprintf(stderr, "init: %s\n", err);
		exit(1);
	}
	// Inputs of f in order; tangents and cotangents random.
	uint32_t ni = f->ninput;
	Tensor *x = calloc(ni + 1, sizeof *x), *t = calloc(ni + 1, sizeof *t);
	for (uint32_t i = 0; i < ni; i++) {
		x[i] = vals[ir_module_find_decl(m, f->input[i].name)];
		if (f->input[i].kind == IN_PARAM) {
			ir_tensor_alloc(&t[i], x[i].dtype, &x[i].shape);
			for (int64_t k = 0; k < ir_numel(&x[i].shape); k++)
				t[i].data[k] = rnd() - 0.5;
		}
	}
	Tensor *f0 = run(f, x);
	Tensor *w = calloc(f->nout + 1, sizeof *w);
	for (uint32_t k = 0; k < f->nout; k++) {
		ir_tensor_alloc(&w[k], f0[k].dtype, &f0[k].shape);
		for (int64_t i = 0; i < ir_numel(&w[k].shape); i++)
			w[k].data[i] = rnd() - 0.5;
	}
	// Finite difference of f along t.
	double h = 1e-6;
	Tensor *xp = calloc(ni + 1, sizeof *xp), *xm = calloc(ni + 1, sizeof *xm);
	for (uint32_t i = 0; i < ni; i++) {
		xp[i] = x[i], xm[i] = x[i];
		if (f->input[i].kind != IN_PARAM)
			continue;
		ir_tensor_alloc(&xp[i], x[i].dtype, &x[i].shape);
		ir_tensor_alloc(&xm[i], x[i].dtype, &x[i].shape);
		for (int64_t k = 0; k < ir_numel(&x[i].shape); k++) {
			xp[i].data[k] = x[i].data[k] + h * t[i].data[k];
			xm[i].data[k] = x[i].data[k] - h * t[i].data[k];
		}
	}
	Tensor *fp = run(f, xp), *fm = run(f, xm);
	// jvp: inputs are f's inputs then one tangent per param.
	Tensor *jin = calloc(gj->ninput + 1, sizeof *jin);
	uint32_t k = 0;
	for (uint32_t i = 0; i < ni; i++)
		jin[k++] = x[i];
	for (uint32_t i = 0; i < ni; i++)
		if (f->input[i].kind == IN_PARAM)
			jin[k++] = t[i];
	Tensor *jout = run(gj, jin);
	double wjt_fd = 0;
	uint32_t jo = f->nout;
	for (uint32_t o = 0; o < f->nout; o++) {
		if (!ir_dtype_is_float(f0[o].dtype))
			continue;
		Tensor fd;
		ir_tensor_alloc(&fd, f0[o].dtype, &f0[o].shape);
		for (int64_t i = 0; i < ir_numel(&fd.shape); i++)
			fd.data[i] = (fp[o].data[i] - fm[o].data[i]) / (2 * h);
		check_tensor("jvp", c->name, &jout[jo++], &fd, c->tol);
		wjt_fd += dot_t(&w[o], &fd);
		ir_tensor_free(&fd);
	}
	// vjp: inputs are f's inputs then one cotangent per float output.
	Tensor *vin = calloc(gv->ninput + 1, sizeof *vin);
	k = 0;
	for (uint32_t i = 0; i < ni; i++)
		vin[k++] = x[i];
	for (uint32_t o = 0; o < f->nout; o++)
		if (ir_dtype_is_float(f0[o].dtype))
			vin[k++] = w[o];
	Tensor *vout = run(gv, vin);
	double jtw_t = 0;
	k = f->nout;
	for (uint32_t i = 0; i < ni; i++)
		if (f->input[i].kind == IN_PARAM)
			jtw_t += dot_t(&vout[k++], &t[i]);
	check("vjp <J^T w, t> vs <w, J t>", c->name, jtw_t, wjt_fd, c->tol);
	// Second order: H t of <w, f> by jvp over vjp, vs the central
	// difference of the gradient.
	if (c->smooth) {
		Graph *gh = pass_jvp(gv, &el, err, sizeof err);
		if (!gh) {
			nfail++;
			fprintf(stderr, "FAIL %s: hvp: %s\n", c->name, err);
		} else {
			// gh inputs: gv's inputs, then tangents of gv's params (f's).
			Tensor *hin = calloc(gh->ninput + 1, sizeof *hin);
			k = 0;
			for (uint32_t i = 0; i < gv->ninput; i++)
				hin[k++] = vin[i];
			for (uint32_t i = 0; i < ni; i++)
				if (f->input[i].kind == IN_PARAM)
					hin[k++] = t[i];
			Tensor *hout = run(gh, hin);
			Tensor *vinp = calloc(gv->ninput + 1, sizeof *vinp);
			Tensor *vinm = calloc(gv->ninput + 1, sizeof *vinm);
			for (uint32_t i = 0; i < gv->ninput; i++) {
				vinp[i] = i < ni ? xp[i] : vin[i];
				vinm[i] = i < ni ? xm[i] : vin[i];
			}
			Tensor *gp = run(gv, vinp), *gm = run(gv, vinm);
			// gh outputs: gv's outputs, then their tangents (float ones).
			uint32_t ho = gv->nout;
			for (uint32_t o = 0; o < gv->nout; o++) {
				if (!ir_dtype_is_float(gp[o].dtype))
					continue;
				if (o >= f->nout) { // a gradient output: compare its tangent
					Tensor fd;
					ir_tensor_alloc(&fd, gp[o].dtype, &gp[o].shape);
					for (int64_t i = 0; i < ir_numel(&fd.shape); i++)
						fd.data[i] = (gp[o].data[i] - gm[o].data[i]) / (2 * h);
					check_tensor("hvp", c->name, &hout[ho], &fd, c->tol * 10);
					ir_tensor_free(&fd);
				}
				ho++;
			}
			free_all(gp, gv->nout);
			free_all(gm, gv->nout);
			free_all(hout, gh->nout);
			free(hin), free(vinp), free(vinm);
			ir_graph_free(gh);
		}
	}
	free_all(jout, gj->nout);
	free_all(vout, gv->nout);
	free_all(f0, f->nout);
	free_all(fp, f->nout);
	free_all(fm, f->nout);
	free_all(w, f->nout);
	for (uint32_t i = 0; i < ni; i++)
		if (f->input[i].kind == IN_PARAM) {
			ir_tensor_free(&xp[i]);
			ir_tensor_free(&xm[i]);
			ir_tensor_free(&t[i]);
		}
	free(xp), free(xm), free(t), free(x), free(jin), free(vin);
	for (uint32_t i = 0; i < m->ndecl; i++) {
		ir_tensor_free(&vals[i]);
		ir_tensor_free(&pre[i]);
	}
	free(vals), free(pre), free(bound);
	ir_graph_free(gv);
	ir_graph_free(gj);
	ir_module_free(m);
}

#define AB "param a: f64[2, 3]\nparam b: f64[2, 3]\nparam c: f64[3]\n"
#define IDX "const idx: i64[4] = cast(floor(uniform(0, 3, seed=1)), dtype=i64)\n" \
            "const idx2: i64[2, 2] = cast(floor(uniform(0, 3, seed=2)), dtype=i64)\n"

static const Case cases[] = {
	// elementwise, one operand (the domain keeps clear of kinks and poles)
	{"neg", AB, "neg(a)", 0, 1, 1e-6, NULL},
	{"exp", AB, "exp(a)", 0, 1, 1e-6, NULL},
	{"log", AB, "log(a)", 1, 1, 1e-6, NULL},
	{"log1p", AB, "log1p(a)", 1, 1, 1e-6, NULL},
	{"expm1", AB, "expm1(a)", 0, 1, 1e-6, NULL},
	{"sqrt", AB, "sqrt(a)", 1, 1, 1e-6, NULL},
	{"rsqrt", AB, "rsqrt(a)", 1, 1, 1e-6, NULL},
	{"tanh", AB, "tanh(a)", 0, 1, 1e-6, NULL},
	{"sigmoid", AB, "sigmoid(a)", 0, 1, 1e-6, NULL},
	{"softplus", AB, "softplus(a)", 0, 1, 1e-6, NULL},
	{"erf", AB, "erf(a)", 0, 1, 1e-6, NULL},
	{"sin", AB, "sin(a)", 0, 1, 1e-6, NULL},
	{"cos", AB, "cos(a)", 0, 1, 1e-6, NULL},
	{"lgamma", AB, "lgamma(a)", 1, 1, 1e-6, NULL},
	{"digamma", AB, "digamma(a)", 1, 1, 1e-5, NULL},
	{"polygamma", AB, "polygamma(a, 1)", 1, 1, 1e-5, NULL},
	{"relu", AB, "relu(a) * b", 0, 1, 1e-6, NULL},
	{"abs", AB, "abs(a) * b", 0, 1, 1e-6, NULL},
	{"step", AB, "step(a) + a", 0, 1, 1e-6, NULL},
	{"sign", AB, "sign(a) * b", 0, 1, 1e-6, NULL},
	{"floor", AB, "floor(a * 0.001 + 10.5) + a", 0, 1, 1e-6, NULL},
	{"clamp", AB, "clamp(a, -0.7, 0.8)", 0, 1, 1e-6, NULL},
	{"hardtanh", AB, "hardtanh(a, -0.7, 0.8)", 0, 1, 1e-6, NULL},
	// two operands, with broadcasting (c: [3] against [2, 3])
	{"add", AB, "a + c", 0, 1, 1e-6, NULL},
	{"sub", AB, "c - a", 0, 1, 1e-6, NULL},
	{"mul", AB, "a * b * c", 0, 1, 1e-6, NULL},
	{"div", AB, "a / b", 1, 1, 1e-6, NULL},
	{"pow", AB, "a ** b", 1, 1, 1e-6, NULL},
	{"pow-scalar", AB, "a ** 3", 0, 1, 1e-6, NULL},
	{"xlogy", AB, "xlogy(a, b)", 1, 1, 1e-6, NULL},
	{"maximum", AB, "maximum(a, b)", 0, 1, 1e-6, NULL},
	{"minimum", AB, "minimum(a, c)", 0, 1, 1e-6, NULL},
	// comparisons only as conditions: fine; through a cast: an error
	{"where", AB, "where(a > b, a * b, c)", 0, 1, 1e-6, NULL},
	{"compare", AB, "where(le(a, 0), a, where(eq(a, b), b, where(ne(a, c), c * a, where(lt(a, c), a, where(ge(b, c), b, c)))))",
	 0, 1, 1e-6, NULL},
	{"cmp-cast", AB, "cast(gt(a, 0), dtype=f64) * a", 0, 1, 1e-6, "not a float"},
	{"logical", AB, "cast(and(a > 0, or(b > 0, not(c > 0))), dtype=f64)", 0, 0, 1e-6, "not a float"},
	// f32 -> f64 only, and first order only: the interpreter rounds casts to
	// f32 (the gradient casts back to f32), which a finite difference sees.
	{"cast", AB "param a32: f32[2, 3]\n", "cast(a32 * a32, dtype=f64) * a", 0, 0, 1e-6, NULL},
	// reductions
	{"sum", AB, "sum(a * b, 1)", 0, 1, 1e-6, NULL},
	{"sum-all", AB, "sum(a * a)", 0, 1, 1e-6, NULL},
	{"mean", AB, "mean(a * b, [0, 1], keepdim=1)", 0, 1, 1e-6, NULL},
	{"max", AB, "max(a * b, 1)", 0, 1, 1e-6, NULL},
	{"min", AB, "min(a * b, 0, keepdim=1)", 0, 1, 1e-6, NULL},
	{"logsumexp", AB, "logsumexp(a * b, 1)", 0, 1, 1e-6, NULL},
	{"argmax", AB, "cast(argmax(a, 1), dtype=f64) * sum(a)", 0, 0, 1e-6, "not a float"},
	// layout
	{"reshape", AB, "reshape(a * b, [3, 2])", 0, 1, 1e-6, NULL},
	{"permute", AB, "permute(a * a, [1, 0])", 0, 1, 1e-6, NULL},
	{"broadcast", AB, "broadcast(c * c, shape=[4, 2, 3])", 0, 1, 1e-6, NULL},
	{"slice", AB, "(a * b)[0:2, 1:3]", 0, 1, 1e-6, NULL},
	{"slice-step", AB, "(a * a)[1, 0:3:2]", 0, 1, 1e-6, NULL},
	{"slice_update", AB, "slice_update(a * a, b[0:1, 0:2] * c[0:2], start=[0, 1], end=[1, 3], step=[1, 1])", 0, 1, 1e-6, NULL},
	{"pad", AB, "pad(a * b, before=[1, 0], after=[0, 2], value=3)", 0, 1, 1e-6, NULL},
	{"concat", AB, "concat(a * a, b, axis=1)", 0, 1, 1e-6, NULL},
	{"resize", AB, "resize(a * b, shape=[4])", 0, 1, 1e-6, NULL},
	{"resize-grow", AB, "resize(a * b, shape=[2, 5])", 0, 1, 1e-6, NULL},
	// indexing
	{"take", AB IDX, "take(a * a, idx, axis=1)", 0, 1, 1e-6, NULL},
	{"take_along", AB IDX, "take_along(a * b, idx2, axis=1)", 0, 1, 1e-6, NULL},
	{"take_add", AB IDX "param d: f64[2, 4]\n", "take_add(a * a, idx, d * d, axis=1)", 0, 1, 1e-6, NULL},
	{"take_along_add", AB IDX "param d: f64[2, 2]\n", "take_along_add(a, idx2, d * d, axis=1)", 0, 1, 1e-6, NULL},
	{"one_hot", AB IDX, "one_hot(idx, 3, dtype=f64) * sum(a)", 0, 1, 1e-6, NULL},
	{"iota", AB, "cast(iota(shape=[2, 3], axis=1), dtype=f64) * a", 0, 1, 1e-6, NULL},
	// contractions
	{"matmul", AB "param d: f64[3, 4]\n", "(a * b) @ d", 0, 1, 1e-6, NULL},
	{"matmul-batched", "param e: f64[2, 3, 4]\nparam d: f64[4, 2]\n", "e @ (d * d)", 0, 1, 1e-6, NULL},
	// placement
	{"to_host", AB, "(a * b).cpu() * 2", 0, 1, 1e-6, NULL},
	{"to_device", AB, "(a * b).cuda()", 0, 1, 1e-6, NULL},
	// constants and samplers: no derivative through their parameters
	{"full", AB, "full_like(a, 2) * a", 0, 1, 1e-6, NULL},
	{"uniform", AB, "uniform(a, a + 1, seed=1)", 1, 0, 1e-6, "not differentiable"},
	{"normal", AB, "normal(a, 1, seed=1)", 1, 0, 1e-6, "not differentiable"},
	{"gamma", AB, "gamma(a, 1, seed=1)", 1, 0, 1e-6, "not differentiable"},
	{"exponential", AB, "exponential(a, seed=1)", 1, 0, 1e-6, "not differentiable"},
	{"bernoulli", AB, "bernoulli(sigmoid(a), seed=1)", 1, 0, 1e-6, "not differentiable"},
	{"kaiming", AB "const k1: f64[2, 3] = kaiming_normal(seed=1)\nconst k2: f64[2, 3] = kaiming_uniform(seed=2)\n",
	 "a * k1 + k2", 0, 1, 1e-6, NULL},
	{"linear_sum_assignment", AB, "take(a, linear_sum_assignment(a * b), axis=1)", 0, 1, 1e-6, NULL},
	// the prelude composites, second order included
	{"softmax", AB, "softmax(a * b, 1)", 0, 1, 1e-6, NULL},
	{"layer_norm", AB, "layer_norm(a, c, c * c)", 0, 1, 1e-5, NULL},
	{"batch_norm", "param x: f64[4, 3, 2]\nparam w: f64[3]\n", "batch_norm(x, w, w * w)", 0, 1, 1e-5, NULL},
	{"studentt", AB, "studentt_logpdf(a, b, 0.5, b + 0.1)", 1, 1, 1e-5, NULL},
	{"gamma_logpdf", AB, "gamma_logpdf(a, b, c * c + 0.5)", 1, 1, 1e-5, NULL},
	// window ops, every one to second order.  conv: 1-d and 2-d with
	// stride, padding, dilation and groups, with and without bias, and
	// wav2letter's geometry at a small size (kernel 25, stride 16, pad 4).
	{"conv1d", "param x: f64[2, 4, 9]\nparam w: f64[6, 2, 3]\nparam b: f64[6]\n",
	 "tanh(conv1d(x, w, b, stride=2, padding=1, dilation=2, groups=2))", 0, 1, 1e-6, NULL},
	{"conv1d-plain", "param x: f64[1, 3, 6]\nparam w: f64[2, 3, 2]\n", "conv1d(x, w) * conv1d(x, w)", 0, 1, 1e-6, NULL},
	{"conv2d", "param x: f64[2, 4, 7, 6]\nparam w: f64[4, 2, 3, 2]\n",
	 "sin(conv2d(x, w, stride=[2, 1], padding=1, dilation=[1, 2], groups=2))", 0, 1, 1e-6, NULL},
	{"conv2d-bias", "param x: f64[1, 3, 5, 5]\nparam w: f64[2, 3, 3, 3]\nparam b: f64[2]\n",
	 "tanh(conv2d(x, w, b, stride=2, padding=1))", 0, 1, 1e-6, NULL},
	{"conv1d-wav2letter", "param x: f64[1, 2, 700]\nparam w: f64[3, 2, 25]\nparam b: f64[3]\n",
	 "tanh(conv1d(x, w, b, stride=16, padding=4))", 0, 1, 1e-6, NULL},
	// max_pool: stride below the kernel (overlapping windows), padding,
	// dilation; random values keep clear of ties.  The product makes the
	// routing depend on two params, the square gives a second order.
	{"max_pool2d", "param x: f64[2, 3, 7, 7]\nparam y: f64[2, 3, 7, 7]\n",
	 "max_pool2d(x * y, 3, stride=2, padding=1) * max_pool2d(x * y, 3, stride=2, padding=1)", 0, 1, 1e-6, NULL},
	{"max_pool1d", "param x: f64[2, 2, 9]\nparam y: f64[2, 2, 9]\n",
	 "sin(max_pool1d(x * y, 3, stride=1, padding=1, dilation=2))", 0, 1, 1e-6, NULL},
	// (avg_pool by name: avg_pool2d's surface form takes count_include_pad
	// for a size and makes it a list.)
	{"avg_pool2d", "param x: f64[2, 2, 5, 6]\nparam y: f64[2, 2, 5, 6]\n",
	 "sin(avg_pool(x * y, kernel=[3, 3], stride=[2, 2], padding=[1, 1], count_include_pad=0))", 0, 1, 1e-6, NULL},
	{"avg_pool2d-pad", "param x: f64[2, 2, 5, 6]\nparam y: f64[2, 2, 5, 6]\n",
	 "sin(avg_pool(x * y, kernel=[3, 2], stride=[2, 1], padding=[1, 1], count_include_pad=1))", 0, 1, 1e-6, NULL},
	{"avg_pool1d", "param x: f64[1, 2, 7]\n", "avg_pool1d(x, 3, stride=2, padding=1) ** 3", 0, 1, 1e-6, NULL},
	{"adaptive_avg_pool2d", "param x: f64[2, 2, 7, 5]\nparam y: f64[2, 2, 7, 5]\n",
	 "sin(adaptive_avg_pool2d(x * y, [3, 4]))", 0, 1, 1e-6, NULL},
	{"adaptive_avg_pool-up", "param x: f64[1, 2, 3, 2]\n", "adaptive_avg_pool2d(x, [5, 3]) ** 3", 0, 1, 1e-6, NULL},
	{"adaptive_avg_pool1d", "param x: f64[2, 3, 7]\n", "sin(adaptive_avg_pool1d(x * x, 3))", 0, 1, 1e-6, NULL},
	{"upsample", "param x: f64[1, 2, 3, 4]\n", "sin(upsample_bilinear(x * x, size=[7, 5]))", 0, 1, 1e-6, NULL},
	{"upsample-corners", "param x: f64[1, 2, 3, 4]\n",
	 "sin(upsample_bilinear(x * x, size=[7, 9], align_corners=1))", 0, 1, 1e-6, NULL},
	{"upsample-down", "param x: f64[2, 1, 5, 7]\n", "sin(upsample_bilinear(x * x, size=[2, 3]))", 0, 1, 1e-6, NULL},
	{"upsample-down-corners", "param x: f64[2, 1, 5, 7]\n",
	 "sin(upsample_bilinear(x * x, size=[4, 5], align_corners=1))", 0, 1, 1e-6, NULL},
	// The derivative ops themselves, called by name: their own first and
	// second derivatives (the rules of a rule, as vhp and hvp need them).
	{"conv_input_grad", "param g: f64[2, 6, 4]\nparam w: f64[6, 2, 3]\n",
	 "tanh(conv_input_grad(g, w, stride=[2], padding=[1], dilation=[2], groups=2, size=[9]))", 0, 1, 1e-6, NULL},
	{"conv_input_grad-2d", "param g: f64[1, 4, 3, 3]\nparam w: f64[4, 3, 3, 2]\n",
	 "sin(conv_input_grad(g, w, stride=[2, 3], padding=[1, 0], dilation=[1, 1], size=[6, 8]))", 0, 1, 1e-6, NULL},
	{"conv_weight_grad", "param x: f64[2, 4, 7, 6]\nparam g: f64[2, 4, 4, 4]\n",
	 "sin(conv_weight_grad(x, g, stride=[2, 1], padding=[1, 0], dilation=[1, 2], groups=2, kernel=[3, 2]))", 0, 1, 1e-6, NULL},
	{"conv_weight_grad-1d", "param x: f64[2, 2, 40]\nparam g: f64[2, 3, 3]\n",
	 "tanh(conv_weight_grad(x, g, stride=[16], padding=[4], dilation=[1], kernel=[13]))", 0, 1, 1e-6, NULL},
	{"max_pool_grad", "param x: f64[1, 2, 5, 5]\nparam y: f64[1, 2, 5, 5]\nparam g: f64[1, 2, 3, 3]\n",
	 "sin(max_pool_grad(x * y, g * g, kernel=[3, 3], stride=[2, 2], padding=[1, 1], dilation=[1, 1]))", 0, 1, 1e-6, NULL},
	{"max_pool_gather", "param x: f64[1, 2, 5, 5]\nparam h: f64[1, 2, 5, 5]\n",
	 "sin(max_pool_gather(x * h, h * h, kernel=[2, 3], stride=[1, 2], padding=[1, 1], dilation=[2, 1]))", 0, 1, 1e-6, NULL},
	{"avg_pool_grad", "param g: f64[1, 2, 3, 3]\n",
	 "sin(avg_pool_grad(g * g, kernel=[3, 3], stride=[2, 2], padding=[1, 1], count_include_pad=0, size=[5, 6]))", 0, 1, 1e-6, NULL},
	{"avg_pool_grad-pad", "param g: f64[2, 1, 4]\n",
	 "sin(avg_pool_grad(g * g, kernel=[3], stride=[2], padding=[1], size=[8]))", 0, 1, 1e-6, NULL},
	{"adaptive_avg_pool_grad", "param g: f64[1, 2, 3, 4]\n", "sin(adaptive_avg_pool_grad(g * g, size=[7, 5]))", 0, 1, 1e-6, NULL},
	{"upsample_bilinear_grad", "param g: f64[1, 2, 7, 5]\n",
	 "sin(upsample_bilinear_grad(g * g, size=[3, 4], align_corners=1))", 0, 1, 1e-6, NULL},
	{"upsample_bilinear_grad-down", "param g: f64[1, 2, 2, 3]\n", "sin(upsample_bilinear_grad(g * g, size=[5, 7]))", 0, 1, 1e-6, NULL},
	// scan and get: the body is declared beside the params (passes/scan.c;
	// tests/unit/test_scandiff.c covers more bodies)
	{"scan", "param a: f64[3]\nparam xs: f64[4, 3]\n"
	         "def cell(c: f64[3], x: f64[3]) -> (f64[3], f64[3]) {\n  n = tanh(c * x + x)\n  return n, n * c\n}\n",
	 "get(scan(cell, a, xs, ncarry=1, nxs=1, reverse=1), index=1)", 0, 1, 1e-6, NULL},
};

int
main(void)
{
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
		run_case(&cases[i]);
	for (int op = 1; op < OP_COUNT; op++)
		if (!covered[op]) {
			nfail++;
			fprintf(stderr, "FAIL coverage: op '%s' appears in no gradcheck case\n", ir_op(op)->name);
		}
	if (nfail) {
		fprintf(stderr, "test_gradcheck: %d of %d checks failed\n", nfail, ncheck);
		return 1;
	}
	printf("test_gradcheck: %d checks passed\n", ncheck);
	return 0;
}
