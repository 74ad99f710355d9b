// tests/unit/test_scandiff.c -- derivatives through `scan` (passes/scan.c)
// against finite differences of the reference interpreter, in float64.
//
// For each module (scalar forward): the gradient (task jacobian) against a
// central difference of forward in every param element; H v (task hvp)
// against a central difference of the gradient along v; vᵀH (task vhp)
// against H v (H is symmetric); jvp against <gradient, v>.  Bodies cover
// one and two carries, reverse scans, masks (bool sequences), invariants,
// a scan nested in a body, and a CTC-like log-space recursion.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frontend.h"
#include "ir.h"
#include "passes.h"
#include "scan_modules.h"

static int nfail, ncheck;

static void
close_enough(const char *name, const char *what, double got, double want, double tol)
{
	ncheck++;
	double s = fmax(1e-6, fmax(fabs(got), fabs(want)));
	if (!(fabs(got - want) <= tol * s)) {
		nfail++;
		fprintf(stderr, "FAIL %s %s: got %.12g want %.12g\n", name, what, got, want);
	}
}

typedef struct Run {
	Module *m;
	Tensor *vals; // per decl
} Run;

// Runs task `task` with the decl values and named extra inputs.
static Tensor *
task(Run *r, const char *name, const char *t, Tensor *vals, Tensor *v, Graph **gout)
{
	char err[512];
	Loc el;
	Graph *g = pass_task(r->m->main, t, NULL, &el, err, sizeof err);
	if (!g) {
		fprintf(stderr, "FAIL %s %s: %s\n", name, t, err);
		exit(1);
	}
	if (!ir_verify(g, err, sizeof err)) {
		fprintf(stderr, "FAIL %s %s: does not verify: %s\n", name, t, err);
		exit(1);
	}
	Tensor *in = calloc(g->ninput + 1, sizeof *in);
	for (uint32_t i = 0; i < g->ninput; i++) {
		int d = ir_module_find_decl(r->m, g->input[i].name);
		if (d >= 0)
			in[i] = vals[d];
		else if (!strncmp(g->input[i].name, "v.", 2))
			in[i] = v[ir_module_find_decl(r->m, g->input[i].name + 2)];
		else {
			fprintf(stderr, "no value for %s\n", g->input[i].name);
			exit(1);
		}
	}
	Tensor *out = calloc(g->nout + 1, sizeof *out);
	if (!ir_interp(g, in, out, 0, err, sizeof err)) {
		fprintf(stderr, "FAIL %s %s: %s\n", name, t, err);
		exit(1);
	}
	free(in);
	*gout = g;
	return out;
}

static void
release(Graph *g, Tensor *t)
{
	for (uint32_t i = 0; i < g->nout; i++)
		ir_tensor_free(&t[i]);
	free(t);
	ir_graph_free(g);
}

static void
check_module(const char *name, const char *src)
{
	FeOptions o = {.diag = stderr};
	Module *m = fe_parse_string(name, src, strlen(src), &o);
	if (!m) {
		nfail++;
		return;
	}
	Run r = {.m = m};
	Tensor *vals = calloc(m->ndecl + 1, sizeof *vals), *v = calloc(m->ndecl + 1, sizeof *v);
	char err[512];
	if (!ir_module_init(m, NULL, NULL, vals, 0, err, sizeof err)) {
		fprintf(stderr, "%s\n", err);
		exit(1);
	}
	for (uint32_t d = 0; d < m->ndecl; d++) {
		ir_tensor_alloc(&v[d], m->decl[d].dtype, &m->decl[d].shape);
		for (int64_t i = 0; i < ir_numel(&v[d].shape); i++)
			v[d].data[i] = 0.5 * sin(1.3 * (double)i + d);
	}
	Graph *gj, *gh, *gvh, *gjv, *gp, *gm;
	Tensor *jac = task(&r, name, "jacobian", vals, v, &gj);
	Tensor *hv = task(&r, name, "hvp", vals, v, &gh);
	Tensor *vh = task(&r, name, "vhp", vals, v, &gvh);
	Tensor *jv = task(&r, name, "jvp", vals, v, &gjv);
	double h = 1e-6, dot = 0;
	uint32_t p = 0;
	for (uint32_t d = 0; d < m->ndecl; d++) {
		if (m->decl[d].kind != DECL_PARAM)
			continue;
		Tensor *x = &vals[d];
		for (int64_t i = 0; i < ir_numel(&x->shape); i++) {
			double x0 = x->data[i];
			x->data[i] = x0 + h;
			Tensor *fp = task(&r, name, "forward", vals, v, &gp);
			x->data[i] = x0 - h;
			Tensor *fm = task(&r, name, "forward", vals, v, &gm);
			x->data[i] = x0;
			close_enough(name, "gradient", jac[p].data[i], (fp[0].data[0] - fm[0].data[0]) / (2 * h),
			             1e-6);
			release(gp, fp), release(gm, fm);
			dot += jac[p].data[i] * v[d].data[i];
		}
		p++;
	}
	close_enough(name, "jvp = <gradient, v>", jv[1].data[0], dot, 1e-10);
	// H v against the difference of the gradient along v.
	for (uint32_t d = 0; d < m->ndecl; d++)
		if (m->decl[d].kind == DECL_PARAM)
			for (int64_t i = 0; i < ir_numel(&vals[d].shape); i++)
				vals[d].data[i] += h * v[d].data[i];
	Tensor *jp = task(&r, name, "jacobian", vals, v, &gp);
	for (uint32_t d = 0; d < m->ndecl; d++)
		if (m->decl[d].kind == DECL_PARAM)
			for (int64_t i = 0; i < ir_numel(&vals[d].shape); i++)
				vals[d].data[i] -= 2 * h * v[d].data[i];
	Tensor *jm = task(&r, name, "jacobian", vals, v, &gm);
	for (uint32_t d = 0; d < m->ndecl; d++) // back to x
		if (m->decl[d].kind == DECL_PARAM)
			for (int64_t i = 0; i < ir_numel(&vals[d].shape); i++)
				vals[d].data[i] += h * v[d].data[i];
	p = 0;
	for (uint32_t d = 0; d < m->ndecl; d++) {
		if (m->decl[d].kind != DECL_PARAM)
			continue;
		for (int64_t i = 0; i < ir_numel(&vals[d].shape); i++) {
			double fd = (jp[p].data[i] - jm[p].data[i]) / (2 * h);
			close_enough(name, "hvp", hv[1 + p].data[i], fd, 1e-5);
			close_enough(name, "vhp = hvp", vh[1 + p].data[i], hv[1 + p].data[i], 1e-10);
		}
		p++;
	}
	release(gp, jp), release(gm, jm);
	// Batched tasks through the scan (passes/vmap.c's scan rule): jacfwd
	// equals the gradient, and H v assembled from each Hessian strategy's
	// blocks equals hvp.
	Graph *gf, *gH;
	Tensor *jf = task(&r, name, "jacfwd", vals, v, &gf);
	for (uint32_t q = 0; q < (uint32_t)gf->nout; q++)
		for (int64_t i = 0; i < ir_numel(&jf[q].shape); i++)
			close_enough(name, "jacfwd = gradient", jf[q].data[i], jac[q].data[i], 1e-10);
	release(gf, jf);
	static const char *const hs[] = {"hessian", "hessian_fwdrev", "hessian_revrev"};
	uint32_t np = 0;
	int pidx[16];
	for (uint32_t d = 0; d < m->ndecl; d++)
		if (m->decl[d].kind == DECL_PARAM && np < 16)
			pidx[np++] = (int)d;
	for (int t = 0; t < 3; t++) {
		Tensor *H = task(&r, name, hs[t], vals, v, &gH);
		for (uint32_t q = 0; q < np; q++) {
			int64_t nq = ir_numel(&m->decl[pidx[q]].shape);
			for (int64_t j = 0; j < nq; j++) {
				double hvq = 0;
				for (uint32_t pp = 0; pp < np; pp++) {
					int64_t npp = ir_numel(&m->decl[pidx[pp]].shape);
					for (int64_t i = 0; i < npp; i++)
						hvq += H[pp * np + q].data[i * nq + j] * v[pidx[pp]].data[i];
				}
				close_enough(name, hs[t], hvq, hv[1 + q].data[j], 1e-9);
			}
		}
		release(gH, H);
	}
	release(gj, jac), release(gh, hv), release(gvh, vh), release(gjv, jv);
	for (uint32_t d = 0; d < m->ndecl; d++)
		ir_tensor_free(&vals[d]), ir_tensor_free(&v[d]);
	free(vals), free(v);
	ir_module_free(m);
}

// An LSTM-like cell with two carries and a per-step bool mask that freezes
// the carries after each sample's length (packed-sequence semantics).
static const char lstm[] =
    "param wx: f64[2, 8] = normal(0, 0.4, seed=4)\n"
    "param wh: f64[2, 8] = normal(0, 0.4, seed=5)\n"
    "const xs: f64[4, 3, 2] = normal(0, 1, seed=6)\n"
    "const lens: f64[3, 1] = full(3) - iota(shape=[3, 1], axis=0, dtype=f64)\n"
    "const mask: bool[4, 3, 1] = cast(iota(shape=[4, 3, 1], axis=0, dtype=f64), dtype=f64) < broadcast(lens, shape=[4, 3, 1])\n"
    "def lstm_step(h: f64[3, 2], c: f64[3, 2], x: f64[3, 2], m: bool[3, 1], wx: f64[2, 8], wh: f64[2, 8]) -> (f64[3, 2], f64[3, 2], f64[3, 2]) {\n"
    "  z = x @ wx + h @ wh\n"
    "  i = sigmoid(z[:, 0:2])\n  f = sigmoid(z[:, 2:4])\n  g = tanh(z[:, 4:6])\n  o = sigmoid(z[:, 6:8])\n"
    "  c2 = f * c + i * g\n  h2 = o * tanh(c2)\n"
    "  return where(m, h2, h), where(m, c2, c), where(m, h2, 0.0)\n}\n"
    "def forward() {\n"
    "  h, c, ys = scan(lstm_step, zeros([3, 2], f64), zeros([3, 2], f64), xs, mask, wx, wh, ncarry=2, nxs=2)\n"
    "  return sum(ys * ys) + sum(h) + sum(c * c)\n}\n";

// A scan inside a scan's body.
static const char nested[] =
    "param w: f64[2] = uniform(0.3, 0.8, seed=7)\n"
    "param xs: f64[3, 4, 2] = normal(0, 0.5, seed=8)\n"
    "def inner(c: f64[2], x: f64[2], w: f64[2]) -> (f64[2], f64[2]) {\n  n = tanh(c * w + x)\n  return n, n\n}\n"
    "def outer(c: f64[2], x: f64[4, 2], w: f64[2]) -> (f64[2], f64[2]) {\n"
    "  c2, ys = scan(inner, c, x, w, ncarry=1, nxs=1)\n  return c2 * w, sum(ys, 0)\n}\n"
    "def forward() {\n  c, ys = scan(outer, w, xs, w, ncarry=1, nxs=1)\n  return sum(c) + sum(ys * ys)\n}\n";

// CTC's alpha recursion in log space over 3 states: logsumexp of shifted
// alphas, the emission added, a per-step length mask.
static const char ctc[] =
    "param logits: f64[5, 2, 3] = normal(0, 1, seed=9)\n"
    "const mask: bool[5, 2, 1] = iota(shape=[5, 2, 1], axis=0, dtype=f64) < broadcast(4 + iota(shape=[2, 1], axis=0, dtype=f64), shape=[5, 2, 1])\n"
    "def alpha(a: f64[2, 3], lp: f64[2, 3], m: bool[2, 1]) -> (f64[2, 3]) {\n"
    "  prev = pad(a[:, 0:2], before=[0, 1], after=[0, 0], value=-1e30)\n"
    "  both = concat(unsqueeze(a, 2), unsqueeze(prev, 2), axis=2)\n"
    "  n = logsumexp(both, 2) + lp\n"
    "  return where(m, n, a)\n}\n"
    "def forward() {\n"
    "  lp = log_softmax(logits, 2)\n"
    "  a0 = pad(zeros([2, 1], f64), before=[0, 0], after=[0, 2], value=-1e30)\n"
    "  a = scan(alpha, a0, lp, mask, ncarry=1, nxs=2)\n"
    "  return -sum(logsumexp(get(a, index=0), 1))\n}\n";

// The vjp task of module text src (NULL, a failed check, if it does not
// parse or derive); *m is the module, to free after the graph.
// With hoist, after passes/scan_hoist.c; else as scan_vjp built it.
static Graph *
vjp_of(const char *name, const char *src, Module **m, int hoist)
{
	FeOptions o = {.diag = stderr};
	*m = fe_parse_string(name, src, strlen(src), &o);
	char err[512];
	Loc el;
	PassOpts po = {.no_scan_hoist = !hoist};
	Graph *g = *m ? pass_task((*m)->main, "vjp", &po, &el, err, sizeof err) : NULL;
	if (*m && !g)
		fprintf(stderr, "%s vjp: %s\n", name, err);
	return g;
}

// The vjp of matrnn has both invariants' adjoints hoisted: top-level
// products over the 4 steps x 2 rows (K = 8), and no stacked [4, 5, 5].
static void
check_hoisted(void)
{
	Module *m;
	Graph *g = vjp_of("matrnn", matrnn, &m, 1);
	int prod = 0, stacked = 0;
	for (NodeId n = 1; g && n < g->nnode; n++) {
		const Shape *s = ir_shape(g, n);
		if (g->node[n].op == OP_matmul && ir_shape(g, ir_in1(g, n, 0))->dim[1] == 8)
			prod++;
		stacked |= s->rank == 3 && s->dim[0] == 4 && s->dim[1] == 5 && s->dim[2] == 5;
	}
	ncheck++;
	if (!g || prod != 2 || stacked) {
		nfail++;
		fprintf(stderr, "FAIL matrnn vjp: %d products over the steps (want 2), stacked %d\n", prod,
		        stacked);
	}
	if (g)
		ir_graph_free(g);
	ir_module_free(m);
}

// The vjp of lstm saves its two products per step (x_t wx and h_t wh) in
// the forward scan, so the backward body computes only the products with
// the cotangent dz: dz whᵀ (the carry's adjoint) and x_tᵀ dz, h_tᵀ dz (the
// weights' adjoints, too small to hoist here), three, where recomputing
// the step would take five (passes/scan.c, "Residuals").  After
// passes/scan_hoist.c, x_t wx is one product before the forward loop (a
// sequence the backward scan reads, no residual), and x_tᵀ dz, h_tᵀ dz
// are products over the stacked steps after the backward loop: dz whᵀ is
// the one product left in the backward step, 6 forward outputs.
static void
check_residuals(int hoist)
{
	Module *m;
	Graph *g = vjp_of("lstm", lstm, &m, hoist);
	int fwd_out = -1, bwd_prod = -1;
	for (uint32_t k = 0; g && k < g->nsub; k++) {
		const Graph *b = g->sub[k];
		if (strstr(b->name, "_fwd"))
			fwd_out = (int)b->nout;
		if (strstr(b->name, "_vjp")) {
			bwd_prod = 0;
			for (NodeId n = 1; n < b->nnode; n++)
				bwd_prod += b->node[n].op == OP_matmul;
		}
	}
	ncheck++;
	// Forward: h', c', y, the stacked carries h_t, c_t, the two residuals.
	if (fwd_out != (hoist ? 6 : 7) || bwd_prod != (hoist ? 1 : 3)) {
		nfail++;
		fprintf(stderr, "FAIL lstm vjp (hoist %d): forward body has %d outputs (want %d), "
		        "backward body %d products (want %d)\n", hoist, fwd_out, hoist ? 6 : 7, bwd_prod,
		        hoist ? 1 : 3);
	}
	if (g)
		ir_graph_free(g);
	ir_module_free(m);
}

int
main(void)
{
	check_module("rnn", rnn);
	check_module("rnn-reverse", rnn_reverse);
	check_module("lstm-masked", lstm);
	check_module("nested", nested);
	check_module("ctc-alpha", ctc);
	check_module("matrnn", matrnn);
	check_hoisted();
	check_residuals(0);
	check_residuals(1);
	if (nfail) {
		fprintf(stderr, "test_scandiff: %d of %d checks failed\n", nfail, ncheck);
		return 1;
	}
	printf("test_scandiff: %d checks passed\n", ncheck);
	return 0;
}
