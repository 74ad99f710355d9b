// tests/unit/test_tasks.c -- the tasks of torch.autograd.functional built
// by passes/tasks.c, checked against hand-derived formulas.
//
// ppl_simple_reg (models-spec.md §3.1), f(β) = Σ_i [y_i μ_i − softplus(μ_i)]
// − Σ_k β_k²/2 − (K+1) log√(2π), μ = Xβ, has
//   ∇f = Xᵀ(y − σ(μ)) − β
//   H  = −Xᵀ diag(σ(μ)(1 − σ(μ))) X − I
// so vjp (v ∇f), jvp (∇f · v), hvp (H v), vhp (vᵀH) and jacobian (∇f) are
// compared with these closed forms, computed here in plain C from the same
// constants.  Tolerance: relative 1e-12 (both sides are float64).
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frontend.h"
#include "ir.h"
#include "passes.h"
#include "testmodel.h"
#include "testutil.h"

static double
sigm(double x)
{
	return 1 / (1 + exp(-x));
}

static void
simple_reg(const char *const *defs, int ndefs)
{
	Module *m = tm_load("ppl_simple_reg.ir", defs, ndefs);
	Tensor *vals = calloc(m->ndecl, sizeof *vals);
	char err[512];
	if (!ir_module_init(m, NULL, NULL, vals, 0, err, sizeof err)) {
		fprintf(stderr, "%s\n", err);
		exit(1);
	}
	const Tensor *X = &vals[ir_module_find_decl(m, "X")], *Y = &vals[ir_module_find_decl(m, "Y")],
	             *B = &vals[ir_module_find_decl(m, "beta_value")];
	int N = (int)X->shape.dim[0], K1 = (int)X->shape.dim[1];
	// Closed forms.
	double *grad = calloc((size_t)K1, sizeof *grad), *w = calloc((size_t)N, sizeof *w);
	// The model is f32: its constant log√(2π) is the f32 nearest, as every
	// backend sees it (the interpreter keeps f32 constants as f32 values).
	double f = -(K1) * (double)(float)0.9189385332046727;
	for (int i = 0; i < N; i++) {
		double mu = 0;
		for (int k = 0; k < K1; k++)
			mu += X->data[i * K1 + k] * B->data[k];
		double s = sigm(mu);
		f += Y->data[i] * mu - (fmax(mu, 0) + log1p(exp(-fabs(mu))));
		w[i] = s * (1 - s);
		for (int k = 0; k < K1; k++)
			grad[k] += X->data[i * K1 + k] * (Y->data[i] - s);
	}
	for (int k = 0; k < K1; k++) {
		grad[k] -= B->data[k];
		f -= B->data[k] * B->data[k] / 2;
	}
	// A direction v for jvp/hvp/vhp and a scalar cotangent for vjp.
	Tensor v, vs;
	Shape bs = B->shape, ss = {0};
	ir_tensor_alloc(&v, DT_F32, &bs);
	ir_tensor_alloc(&vs, DT_F32, &ss);
	for (int k = 0; k < K1; k++)
		v.data[k] = 0.25 + 0.5 * sin(k + 1.0);
	vs.data[0] = 0.7;
	double hv[64] = {0}, gv = 0;
	for (int k = 0; k < K1; k++) {
		gv += grad[k] * v.data[k];
		double acc = -v.data[k];
		for (int i = 0; i < N; i++) {
			double xv = 0;
			for (int j = 0; j < K1; j++)
				xv += X->data[i * K1 + j] * v.data[j];
			acc -= X->data[i * K1 + k] * w[i] * xv;
		}
		hv[k] = acc;
	}
	Graph *g;
	const char *vname[] = {"v"}, *pname[] = {"v.beta_value"};
	Tensor *o = tm_run_task(m, "forward", vals, NULL, NULL, 0, &g);
	CHECK_CLOSE(o[0].data[0], f, 1e-12, "forward");
	tm_free_out(g, o);
	o = tm_run_task(m, "vjp", vals, vname, &vs, 1, &g);
	CHECK_CLOSE(o[0].data[0], f, 1e-12, "vjp value");
	for (int k = 0; k < K1; k++)
		CHECK_CLOSE(o[1].data[k], 0.7 * grad[k], 1e-12, "vjp");
	tm_free_out(g, o);
	o = tm_run_task(m, "jvp", vals, pname, &v, 1, &g);
	CHECK_CLOSE(o[1].data[0], gv, 1e-12, "jvp");
	tm_free_out(g, o);
	o = tm_run_task(m, "jacobian", vals, NULL, NULL, 0, &g);
	for (int k = 0; k < K1; k++)
		CHECK_CLOSE(o[0].data[k], grad[k], 1e-12, "jacobian");
	tm_free_out(g, o);
	o = tm_run_task(m, "hvp", vals, pname, &v, 1, &g);
	CHECK_CLOSE(o[0].data[0], f, 1e-12, "hvp value");
	for (int k = 0; k < K1; k++)
		CHECK_CLOSE(o[1].data[k], hv[k], 1e-12, "hvp");
	tm_free_out(g, o);
	o = tm_run_task(m, "vhp", vals, pname, &v, 1, &g);
	for (int k = 0; k < K1; k++)
		CHECK_CLOSE(o[1].data[k], hv[k], 1e-12, "vhp"); // H is symmetric
	tm_free_out(g, o);
	// jacfwd = jacobian = ∇f; every Hessian strategy = the closed form:
	// H_jk = −Σ_i X_ij w_i X_ik − δ_jk.
	o = tm_run_task(m, "jacfwd", vals, NULL, NULL, 0, &g);
	for (int k = 0; k < K1; k++)
		CHECK_CLOSE(o[0].data[k], grad[k], 1e-12, "jacfwd");
	tm_free_out(g, o);
	const char *hs[] = {"hessian", "hessian_fwdrev", "hessian_revrev"};
	for (int t = 0; t < 3; t++) {
		o = tm_run_task(m, hs[t], vals, NULL, NULL, 0, &g);
		tu_ncheck++;
		if (g->nout != 1 || o[0].shape.rank != 4 || o[0].shape.dim[0] != K1 ||
		    o[0].shape.dim[2] != K1 || strcmp(g->out[0].name, "hessian.beta_value.beta_value")) {
			tu_nfail++;
			fprintf(stderr, "%s: wrong outputs\n", hs[t]);
		}
		for (int j = 0; j < K1; j++)
			for (int k = 0; k < K1; k++) {
				double h = j == k ? -1 : 0;
				for (int i = 0; i < N; i++)
					h -= X->data[i * K1 + j] * w[i] * X->data[i * K1 + k];
				CHECK_CLOSE(o[0].data[j * K1 + k], h, 1e-12, hs[t]);
			}
		tm_free_out(g, o);
	}
	ir_tensor_free(&v);
	ir_tensor_free(&vs);
	for (uint32_t i = 0; i < m->ndecl; i++)
		ir_tensor_free(&vals[i]);
	free(vals), free(grad), free(w);
	ir_module_free(m);
}

// ppl_robust_reg: no closed form worth writing; the strategies must agree
// with each other: hvp = vhp (symmetry), jvp = <jacobian, v>, and the dot
// product test between vjp and jvp.
static void
robust_reg(void)
{
	Module *m = tm_load("ppl_robust_reg.ir", NULL, 0);
	Tensor *vals = calloc(m->ndecl, sizeof *vals);
	char err[512];
	if (!ir_module_init(m, NULL, NULL, vals, 1, err, sizeof err)) {
		fprintf(stderr, "%s\n", err);
		exit(1);
	}
	const char *names[3] = {"v.nu_value", "v.sigma_unconstrained_value", "v.beta_value"};
	const char *params[3] = {"nu_value", "sigma_unconstrained_value", "beta_value"};
	Tensor v[3];
	for (int p = 0; p < 3; p++) {
		const Decl *d = &m->decl[ir_module_find_decl(m, params[p])];
		ir_tensor_alloc(&v[p], d->dtype, &d->shape);
		for (int64_t i = 0; i < ir_numel(&d->shape); i++)
			v[p].data[i] = 0.3 + 0.4 * cos((double)(i + 7 * p));
	}
	Graph *g1, *g2, *g3, *g4;
	Tensor *h = tm_run_task(m, "hvp", vals, names, v, 3, &g1);
	Tensor *vh = tm_run_task(m, "vhp", vals, names, v, 3, &g2);
	Tensor *jv = tm_run_task(m, "jvp", vals, names, v, 3, &g3);
	Tensor *jac = tm_run_task(m, "jacobian", vals, NULL, NULL, 0, &g4);
	double dot = 0;
	for (int p = 0; p < 3; p++)
		for (int64_t i = 0; i < ir_numel(&v[p].shape); i++) {
			// H entries reach 1e12 for tiny ν: compare relative to the scale.
			double a = h[1 + p].data[i], b = vh[1 + p].data[i];
			tu_ncheck++;
			if (!(fabs(a - b) <= 1e-9 * fmax(1, fmax(fabs(a), fabs(b))))) {
				tu_nfail++;
				fprintf(stderr, "robust hvp/vhp %d[%lld]: %.17g vs %.17g\n", p, (long long)i, a, b);
			}
			dot += jac[p].data[i] * v[p].data[i];
		}
	CHECK_CLOSE(jv[1].data[0], dot, 1e-12, "robust jvp = <jacobian, v>");
	// jacfwd = jacrev; the three Hessians agree block by block, and H v
	// assembled from the blocks equals hvp.
	Graph *g5, *g6, *g7, *g8;
	Tensor *jf = tm_run_task(m, "jacfwd", vals, NULL, NULL, 0, &g5);
	for (int q = 0; q < 3; q++)
		for (int64_t i = 0; i < ir_numel(&v[q].shape); i++)
			CHECK_CLOSE(jf[q].data[i], jac[q].data[i], 1e-12, "robust jacfwd = jacrev");
	Tensor *H0 = tm_run_task(m, "hessian", vals, NULL, NULL, 0, &g6);
	Tensor *H1 = tm_run_task(m, "hessian_fwdrev", vals, NULL, NULL, 0, &g7);
	Tensor *H2 = tm_run_task(m, "hessian_revrev", vals, NULL, NULL, 0, &g8);
	for (int b = 0; b < 9; b++)
		for (int64_t i = 0; i < ir_numel(&H0[b].shape); i++) {
			double x0 = H0[b].data[i], x1 = H1[b].data[i], x2 = H2[b].data[i];
			double sc = fmax(1, fmax(fabs(x0), fmax(fabs(x1), fabs(x2))));
			tu_ncheck++;
			if (!(fabs(x0 - x1) <= 1e-9 * sc && fabs(x0 - x2) <= 1e-9 * sc)) {
				tu_nfail++;
				fprintf(stderr, "robust hessian block %d [%lld]: %.17g %.17g %.17g\n", b,
				        (long long)i, x0, x1, x2);
			}
		}
	for (int q = 0; q < 3; q++) // (H v)_q = Σ_p block(p, q)ᵀ v_p, H symmetric
		for (int64_t j = 0; j < ir_numel(&v[q].shape); j++) {
			double s = 0;
			for (int pp = 0; pp < 3; pp++) {
				int64_t np_ = ir_numel(&v[pp].shape), nq = ir_numel(&v[q].shape);
				for (int64_t i = 0; i < np_; i++)
					s += H0[pp * 3 + q].data[i * nq + j] * v[pp].data[i];
			}
			double a = h[1 + q].data[j];
			tu_ncheck++;
			if (!(fabs(a - s) <= 1e-9 * fmax(1, fmax(fabs(a), fabs(s))))) {
				tu_nfail++;
				fprintf(stderr, "robust H v from blocks %d[%lld]: %.17g vs %.17g\n", q,
				        (long long)j, s, a);
			}
		}
	tm_free_out(g5, jf), tm_free_out(g6, H0), tm_free_out(g7, H1), tm_free_out(g8, H2);
	tm_free_out(g1, h), tm_free_out(g2, vh), tm_free_out(g3, jv), tm_free_out(g4, jac);
	for (int p = 0; p < 3; p++)
		ir_tensor_free(&v[p]);
	for (uint32_t i = 0; i < m->ndecl; i++)
		ir_tensor_free(&vals[i]);
	free(vals);
	ir_module_free(m);
}

// Derived graphs stay within the constant factors of docs/TASKS.md (node
// counts after simplification, against the simplified forward graph).
static void
bounds(const char *rel)
{
	const char *root = getenv("FADC_SOURCE_DIR");
	char path[4096];
	snprintf(path, sizeof path, "%s/%s", root ? root : ".", rel);
	FeOptions o = {.diag = stderr};
	Module *m = fe_parse_file(path, &o);
	if (!m) {
		tu_nfail++;
		return;
	}
	Graph *f = pass_simplify(m->main);
	static const struct {
		const char *task;
		double factor;
	} lim[] = {{"vjp", 3}, {"jvp", 3}, {"jacobian", 3}, {"vhp", 8}, {"hvp", 8}};
	for (size_t i = 0; i < sizeof lim / sizeof lim[0]; i++) {
		char err[512];
		Loc el;
		Graph *g = pass_task(m->main, lim[i].task, NULL, &el, err, sizeof err);
		tu_ncheck++;
		if (!g) {
			tu_nfail++;
			fprintf(stderr, "%s %s: %s\n", rel, lim[i].task, err);
			continue;
		}
		double r = (double)(g->nnode - 1) / (double)(f->nnode - 1);
		if (getenv("FADC_BOUNDS_VERBOSE"))
			printf("%s %s: %.2fx\n", rel, lim[i].task, r);
		if (r > lim[i].factor) {
			tu_nfail++;
			fprintf(stderr, "%s %s: %u nodes, %.2fx the forward's %u (bound %gx)\n", rel,
			        lim[i].task, g->nnode - 1, r, f->nnode - 1, lim[i].factor);
		}
		// No blow-up as the order grows: one more order (jvp of the
		// second-order graph, simplified) costs what a first-order
		// transform costs, at most 3x the graph it differentiates.
		if (!strcmp(lim[i].task, "hvp") || !strcmp(lim[i].task, "vhp")) {
			Graph *j = pass_jvp(g, &el, err, sizeof err), *t = j ? pass_simplify(j) : NULL;
			tu_ncheck++;
			if (!t) {
				tu_nfail++;
				fprintf(stderr, "%s jvp of %s: %s\n", rel, lim[i].task, err);
			} else {
				double r3 = (double)(t->nnode - 1) / (double)(g->nnode - 1);
				if (getenv("FADC_BOUNDS_VERBOSE"))
					printf("%s third order (jvp of %s): %.2fx the %s graph\n", rel, lim[i].task, r3,
					       lim[i].task);
				if (r3 > 3) {
					tu_nfail++;
					fprintf(stderr, "%s jvp of %s: %u nodes, %.2fx its %u (bound 3x)\n", rel,
					        lim[i].task, t->nnode - 1, r3, g->nnode - 1);
				}
			}
			ir_graph_free(j);
			ir_graph_free(t);
		}
		ir_graph_free(g);
	}
	ir_graph_free(f);
	ir_module_free(m);
}

// A non-scalar f: jacrev (vmap of vjp over the output's basis) and jacfwd
// (vmap of jvp over the params' basis) agree, and both equal the
// hand-derived J of f(a, b) = tanh(a[0:2] * Σ_j b[:, j]) (shape [2]):
//   ∂f_i/∂a_k = (1 - f_i²) s_i δ_ik,   ∂f_i/∂b_kj = (1 - f_i²) a_i δ_ik.
static void
nonscalar(void)
{
	static const char src[] = "param a: f64[3] = iota(axis=0, dtype=f64) * 0.3 + 0.1\n"
	                          "param b: f64[2, 2] = iota(axis=1, dtype=f64) * 0.2 - 0.15\n"
	                          "def forward() {\n  return tanh(a[0:2] * sum(b, 1))\n}\n";
	FeOptions o = {.diag = stderr};
	Module *m = fe_parse_string("nonscalar.ir", src, sizeof src - 1, &o);
	if (!m) {
		tu_nfail++;
		return;
	}
	Tensor vals[2];
	char err[512];
	if (!ir_module_init(m, NULL, NULL, vals, 0, err, sizeof err)) {
		fprintf(stderr, "%s\n", err);
		exit(1);
	}
	Graph *g1, *g2;
	Tensor *jr = tm_run_task(m, "jacobian", vals, NULL, NULL, 0, &g1);
	Tensor *jf = tm_run_task(m, "jacfwd", vals, NULL, NULL, 0, &g2);
	const double *A = vals[0].data, *Bm = vals[1].data;
	for (int i = 0; i < 2; i++) {
		double si = Bm[2 * i] + Bm[2 * i + 1], fi = tanh(A[i] * si), d = 1 - fi * fi;
		for (int k = 0; k < 3; k++) {
			double want = i == k ? d * si : 0;
			CHECK_CLOSE(jr[0].data[i * 3 + k], want, 1e-12, "jacrev a");
			CHECK_CLOSE(jf[0].data[i * 3 + k], want, 1e-12, "jacfwd a");
		}
		for (int k = 0; k < 2; k++)
			for (int j = 0; j < 2; j++) {
				double want = i == k ? d * A[i] : 0;
				CHECK_CLOSE(jr[1].data[i * 4 + k * 2 + j], want, 1e-12, "jacrev b");
				CHECK_CLOSE(jf[1].data[i * 4 + k * 2 + j], want, 1e-12, "jacfwd b");
			}
	}
	tm_free_out(g1, jr), tm_free_out(g2, jf);
	ir_tensor_free(&vals[0]), ir_tensor_free(&vals[1]);
	ir_module_free(m);
}

// Regression (passes/simplify.c): simplification must not change what
// the float64 interpreter computes.  f(x) = mean(x * x) over three f32
// values has the gradient 2x/3.  jacobian's graph divides its constant
// cotangent 1 by 3, and simplify folded 1/3 into an f32 constant (rounded:
// 3e-8 off), where jacfwd's graph divides in double: the two strategies
// differed at f32 precision.  An f32 fold whose value f32 cannot hold is
// not made.
static void
fold_f32(void)
{
	static const char src[] = "param x: f32[3] = iota(axis=0, dtype=f32) + 1\n"
	                          "def forward() {\n  return mean(x * x)\n}\n";
	FeOptions o = {.diag = stderr};
	Module *m = fe_parse_string("fold_f32.ir", src, sizeof src - 1, &o);
	if (!m) {
		tu_nfail++;
		return;
	}
	Tensor vals[1];
	char err[512];
	if (!ir_module_init(m, NULL, NULL, vals, 0, err, sizeof err)) {
		fprintf(stderr, "%s\n", err);
		exit(1);
	}
	const char *tasks[] = {"jacobian", "jacfwd"};
	for (int t = 0; t < 2; t++) {
		Graph *g;
		Tensor *j = tm_run_task(m, tasks[t], vals, NULL, NULL, 0, &g);
		for (int k = 0; k < 3; k++)
			CHECK_CLOSE(j[0].data[k], 2.0 * (k + 1) / 3, 1e-12, tasks[t]);
		tm_free_out(g, j);
	}
	ir_tensor_free(&vals[0]);
	ir_module_free(m);
}

// Regression (passes/tasks.c): params and constants may have dotted names
// that start like the inputs the passes add (`t.w` like a tangent, `v.c`
// like a cotangent); the tasks told those inputs by name, so jacfwd and
// hessian_fwdrev batched the param `t.w` itself (an internal assertion),
// and vjp, jvp, hvp renamed it or the constant `v.c` (unbindable inputs).
// Every task of the module must equal that of the same module with plain
// names, at the same v.
static void
dotted_names(void)
{
	static const char *const src[2] = {
	    "param t.w: f64[2] = uniform(0, 1, seed=1)\nparam b: f64[2] = uniform(0, 1, seed=3)\n"
	    "const v.c: f64[2] = uniform(0, 1, seed=2)\n"
	    "def forward() -> f64[] {\n  return sum(sin(t.w) * b * b * v.c)\n}\n",
	    "param tw: f64[2] = uniform(0, 1, seed=1)\nparam b: f64[2] = uniform(0, 1, seed=3)\n"
	    "const vc: f64[2] = uniform(0, 1, seed=2)\n"
	    "def forward() -> f64[] {\n  return sum(sin(tw) * b * b * vc)\n}\n"};
	static const char *const vnames[2][3] = {{"v", "v.t.w", "v.b"}, {"v", "v.tw", "v.b"}};
	Module *m[2];
	Tensor vals[2][3], xv[3];
	char err[512];
	for (int k = 0; k < 2; k++) {
		m[k] = tm_parse(k ? "plain.ir" : "dotted.ir", src[k]);
		if (!ir_module_init(m[k], NULL, NULL, vals[k], 0, err, sizeof err)) {
			fprintf(stderr, "%s\n", err);
			exit(1);
		}
	}
	Shape s0 = {0}, s2 = {1, {2}};
	ir_tensor_alloc(&xv[0], DT_F64, &s0);
	xv[0].data[0] = 0.75;
	for (int k = 1; k < 3; k++) {
		ir_tensor_alloc(&xv[k], DT_F64, &s2);
		xv[k].data[0] = 0.25 * k, xv[k].data[1] = -0.5 * k;
	}
	for (int t = 1; fadc_tasks[t]; t++) {
		Graph *g[2];
		Tensor *o[2];
		for (int k = 0; k < 2; k++)
			o[k] = tm_run_task(m[k], fadc_tasks[t], vals[k], vnames[k], xv, 3, &g[k]);
		tu_ncheck++;
		if (g[0]->nout != g[1]->nout) {
			tu_nfail++;
			fprintf(stderr, "dotted names: %s: %u outputs, %u with plain names\n", fadc_tasks[t],
			        g[0]->nout, g[1]->nout);
		}
		for (uint32_t i = 0; i < g[0]->nout && i < g[1]->nout; i++)
			for (int64_t j = 0; j < ir_numel(&o[1][i].shape); j++)
				CHECK_CLOSE(o[0][i].data[j], o[1][i].data[j], 1e-12, fadc_tasks[t]);
		tm_free_out(g[0], o[0]);
		tm_free_out(g[1], o[1]);
	}
	for (int k = 0; k < 3; k++)
		ir_tensor_free(&xv[k]);
	for (int k = 0; k < 2; k++) {
		for (int i = 0; i < 3; i++)
			ir_tensor_free(&vals[k][i]);
		ir_module_free(m[k]);
	}
}

int
main(void)
{
	dotted_names();
	fold_f32();
	nonscalar();
	bounds("models/ppl_simple_reg.ir");
	bounds("models/ppl_robust_reg.ir");
	bounds("tests/parse/example-multiheadattn.ir");
	bounds("tests/parse/example-transformer-layer.ir");
	// Every model of the zoo, at full size (the graphs are symbolic).
	bounds("models/resnet18.ir");
	bounds("models/fcn_resnet.ir");
	bounds("models/detr.ir");
	bounds("models/wav2letter.ir");
	bounds("models/deepspeech.ir");
	bounds("models/transformer.ir");
	bounds("models/multiheadattn.ir");
	simple_reg(NULL, 0);
	const char *small[] = {"N=3", "K=2"};
	simple_reg(small, 2);
	robust_reg();
	return TU_DONE("test_tasks");
}
