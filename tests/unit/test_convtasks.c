// tests/unit/test_convtasks.c -- the tasks of a convolutional network:
// tests/parse/example-resnet-blocks.ir (torchvision's stem with a strided
// padded conv, max-pool with padding, a BasicBlock, a downsampling block,
// adaptive average pooling, the classifier and the loss), through
// pass_task and the reference interpreter.
//
// For f(p) the loss, at the model's own parameter values and random
// directions t, u, v (one tensor per param) and a random scalar cotangent w:
//   vjp vs jvp:  w (J t) = <J^T w, t>              (the two modes are adjoint)
//   hvp vs vhp:  <u, H v> = <u^T H, v>             (H is symmetric)
//   jvp vs f:    J t = (f(p + h t) - f(p - h t)) / 2h   (a finite difference)
// and the graph-size bounds of docs/TASKS.md: vjp, jvp at most 3x and vhp,
// hvp at most 8x the simplified forward graph, in nodes.  Every conv,
// pool and their derivative ops take part (hvp and vhp differentiate the
// derivative ops again).
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frontend.h"
#include "ir.h"
#include "passes.h"
#include "testmodel.h"
#include "testutil.h"

static uint64_t rng = 0x2545f4914f6cdd1dull;

static double
rnd(void) // [-0.5, 0.5)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (double)(rng >> 11) / 9007199254740992.0 - 0.5;
}

typedef struct Model {
	Module *m;
	Tensor *vals; // m->decl order
	uint32_t np; // params
	int *param; // param k -> decl index
} Model;

// A random tensor per param, shaped like it.
static Tensor *
directions(const Model *md)
{
	Tensor *t = calloc(md->np, sizeof *t);
	for (uint32_t k = 0; k < md->np; k++) {
		const Decl *d = &md->m->decl[md->param[k]];
		ir_tensor_alloc(&t[k], d->dtype, &d->shape);
		for (int64_t i = 0; i < ir_numel(&d->shape); i++)
			t[k].data[i] = rnd();
	}
	return t;
}

static void
free_dirs(const Model *md, Tensor *t)
{
	for (uint32_t k = 0; k < md->np; k++)
		ir_tensor_free(&t[k]);
	free(t);
}

// Task `task` built and run as one check (testmodel.h: tm_check_derive,
// tm_check_run): declarations by name from vals (or from pv for the params
// when pv is not NULL), "v.<param>" from dir, any other input (vjp's
// cotangent) from *w.  Checks the node-count bound against the simplified
// forward graph fs when bound > 0.  NULL where the task failed.
static Tensor *
run_task(const Model *md, const char *task, const Tensor *pv, const Tensor *dir, const Tensor *w,
         const Graph *fs, double bound, uint32_t *nout)
{
	Graph *g = tm_check_derive(md->m->main, task);
	if (!g)
		return NULL;
	if (bound > 0) {
		double r = (double)(g->nnode - 1) / (double)(fs->nnode - 1);
		printf("%-4s %5u nodes, %.2fx the forward's %u (bound %gx)\n", task, g->nnode - 1, r,
		       fs->nnode - 1, bound);
		CHECK(r <= bound);
	}
	Tensor *vals = calloc(md->m->ndecl + 1, sizeof *vals);
	memcpy(vals, md->vals, md->m->ndecl * sizeof *vals);
	for (uint32_t k = 0; pv && k < md->np; k++)
		vals[md->param[k]] = pv[k];
	const char **xn = calloc(g->ninput + 1, sizeof *xn);
	Tensor *xv = calloc(g->ninput + 1, sizeof *xv);
	int nx = 0;
	for (uint32_t i = 0; i < g->ninput; i++) {
		const char *name = g->input[i].name;
		if (ir_module_find_decl(md->m, name) >= 0)
			continue;
		for (uint32_t k = 0; dir && k < md->np; k++)
			if (!strncmp(name, "v.", 2) && !strcmp(name + 2, md->m->decl[md->param[k]].name))
				xn[nx] = name, xv[nx++] = dir[k];
		if ((!nx || xn[nx - 1] != name) && w)
			xn[nx] = name, xv[nx++] = *w;
	}
	Tensor *out = tm_check_run(md->m, g, task, vals, xn, xv, nx, 0);
	*nout = g->nout;
	free(vals), free(xn), free(xv);
	ir_graph_free(g);
	return out;
}

static double
dot(const Tensor *a, const Tensor *b)
{
	double s = 0;
	for (int64_t i = 0; i < ir_numel(&a->shape); i++)
		s += a->data[i] * b->data[i];
	return s;
}

// Relative agreement; prints both sides.
static void
check_rel(const char *what, double a, double b, double tol)
{
	double e = fabs(a - b) / fmax(fmax(fabs(a), fabs(b)), 1e-30);
	printf("%-28s %.15g vs %.15g (rel %.2g)\n", what, a, b, e);
	tu_ncheck++;
	if (!(e <= tol)) {
		tu_nfail++;
		fprintf(stderr, "%s: %.17g vs %.17g, relative error %.3g > %.3g\n", what, a, b, e, tol);
	}
}

static void
model_tasks(const char *rel)
{
	const char *root = getenv("FADC_SOURCE_DIR");
	char path[4096], err[512];
	snprintf(path, sizeof path, "%s/%s", root ? root : ".", rel);
	FeOptions o = {.diag = stderr};
	Model md = {0};
	md.m = fe_parse_file(path, &o);
	if (!md.m) {
		CHECK(!"the model parses");
		return;
	}
	md.vals = calloc(md.m->ndecl + 1, sizeof *md.vals);
	md.param = calloc(md.m->ndecl + 1, sizeof *md.param);
	if (!ir_module_init(md.m, NULL, NULL, md.vals, 0, err, sizeof err)) {
		fprintf(stderr, "%s: %s\n", rel, err);
		CHECK(!"the model initializes");
		return;
	}
	for (uint32_t i = 0; i < md.m->ndecl; i++)
		if (md.m->decl[i].kind == DECL_PARAM)
			md.param[md.np++] = (int)i;
	Graph *fs = pass_simplify(md.m->main);
	Tensor *t = directions(&md), *u = directions(&md), *v = directions(&md);
	Tensor w;
	Shape scalar = {0};
	ir_tensor_alloc(&w, DT_F32, &scalar);
	w.data[0] = 0.7;
	uint32_t n1, n2, n3, n4, n5, n6;

	// <w, J t> = <J^T w, t>
	Tensor *jv = run_task(&md, "jvp", NULL, t, NULL, fs, 3, &n1);
	Tensor *vj = run_task(&md, "vjp", NULL, NULL, &w, fs, 3, &n2);
	if (jv && vj) {
		double rhs = 0;
		for (uint32_t k = 0; k < md.np; k++)
			rhs += dot(&vj[1 + k], &t[k]);
		check_rel("w (J t) vs <J^T w, t>", w.data[0] * jv[1].data[0], rhs, 1e-10);
		CHECK(fabs(rhs) > 1e-6); // not trivially zero
		// J t against a central difference of f along t.
		double h = 1e-6, fpm[2];
		for (int s = 0; s < 2; s++) {
			Tensor *pv = calloc(md.np, sizeof *pv);
			for (uint32_t k = 0; k < md.np; k++) {
				const Tensor *x = &md.vals[md.param[k]];
				ir_tensor_alloc(&pv[k], x->dtype, &x->shape);
				for (int64_t i = 0; i < ir_numel(&x->shape); i++)
					pv[k].data[i] = x->data[i] + (s ? -h : h) * t[k].data[i];
			}
			Tensor *fo = run_task(&md, "forward", pv, NULL, NULL, fs, 0, &n3);
			fpm[s] = fo ? fo[0].data[0] : NAN;
			tm_free_tensors(fo, n3);
			free_dirs(&md, pv);
		}
		check_rel("J t vs finite difference", jv[1].data[0], (fpm[0] - fpm[1]) / (2 * h), 1e-5);
	}
	// <u, H v> = <u^T H, v>
	Tensor *hv = run_task(&md, "hvp", NULL, v, NULL, fs, 8, &n4);
	Tensor *vh = run_task(&md, "vhp", NULL, u, NULL, fs, 8, &n5);
	if (hv && vh) {
		double a = 0, b = 0;
		for (uint32_t k = 0; k < md.np; k++) {
			a += dot(&u[k], &hv[1 + k]);
			b += dot(&vh[1 + k], &v[k]);
		}
		check_rel("<u, H v> vs <u^T H, v>", a, b, 1e-9);
		CHECK(fabs(a) > 1e-6);
		check_rel("hvp value vs vjp value", hv[0].data[0], vj ? vj[0].data[0] : NAN, 0);
	}
	// vhp at u = v gives the same vector as hvp (H symmetric), block by block.
	Tensor *vh2 = run_task(&md, "vhp", NULL, v, NULL, fs, 0, &n6);
	if (hv && vh2)
		for (uint32_t k = 0; k < md.np; k++) {
			double num = 0, den = 0;
			for (int64_t i = 0; i < ir_numel(&v[k].shape); i++) {
				double d = hv[1 + k].data[i] - vh2[1 + k].data[i];
				num += d * d;
				den += hv[1 + k].data[i] * hv[1 + k].data[i];
			}
			tu_ncheck++;
			if (!(sqrt(num) <= 1e-9 * fmax(sqrt(den), 1e-12))) {
				tu_nfail++;
				fprintf(stderr, "H v vs v^T H, block %s: relative error %.3g\n",
				        md.m->decl[md.param[k]].name, sqrt(num / fmax(den, 1e-300)));
			}
		}
	tm_free_tensors(jv, n1), tm_free_tensors(vj, n2), tm_free_tensors(hv, n4), tm_free_tensors(vh, n5), tm_free_tensors(vh2, n6);
	free_dirs(&md, t), free_dirs(&md, u), free_dirs(&md, v);
	ir_tensor_free(&w);
	ir_graph_free(fs);
	for (uint32_t i = 0; i < md.m->ndecl; i++)
		ir_tensor_free(&md.vals[i]);
	free(md.vals), free(md.param);
	ir_module_free(md.m);
}

// The batched tasks (passes/vmap.c) of small window networks: the basis
// of the params batches every weight, so conv and its derivative ops run
// with their batch folded into the groups, the pools' ops with it folded
// into N.  Checked: jacfwd = jacobian; the Hessian's blocks agree across
// hessian (reverse over reverse), hessian_fwdrev and hessian_revrev; and
// H v assembled from the blocks equals hvp.
static const char net2d[] =
    "const x: f64[2, 2, 6, 6] = uniform(-1, 1, seed=1)\n"
    "param w1: f64[4, 2, 3, 3] = normal(0, 0.5, seed=2)\n"
    "param w2: f64[2, 2, 3, 3] = normal(0, 0.5, seed=3)\n"
    "param b: f64[2] = normal(0, 0.5, seed=4)\n"
    "def forward() -> f64[] {\n"
    "  h = tanh(conv2d(x, w1, stride=1, padding=1))\n"
    "  h = max_pool2d(h, 3, stride=2, padding=1)\n"
    "  h = conv2d(h, w2, b, padding=[1, 2], dilation=[1, 2], groups=2)\n"
    "  u = upsample_bilinear(h * h, size=[5, 4], align_corners=1)\n"
    "  a = avg_pool(u, kernel=[2, 2], stride=[2, 2], padding=[1, 1], count_include_pad=0)\n"
    "  return sum(sin(adaptive_avg_pool2d(a, [2, 2])))\n"
    "}\n";
static const char net1d[] =
    "const x: f64[2, 3, 40] = uniform(-1, 1, seed=5)\n"
    "param w: f64[2, 3, 5] = normal(0, 0.5, seed=6)\n"
    "param v: f64[2, 2, 3] = normal(0, 0.5, seed=7)\n"
    "def forward() -> f64[] {\n"
    "  h = tanh(conv1d(x, w, stride=4, padding=2))\n"
    "  h = conv1d(max_pool1d(h, 3, stride=1, padding=1, dilation=2), v)\n"
    "  return sum(sin(avg_pool1d(h, 2) + adaptive_avg_pool1d(h, 3)))\n"
    "}\n";

static void
batched_tasks(const char *name, const char *src)
{
	FeOptions o = {.diag = stderr};
	Model md = {0};
	char err[512];
	md.m = fe_parse_string(name, src, strlen(src), &o);
	if (!md.m) {
		CHECK(!"the network parses");
		return;
	}
	md.vals = calloc(md.m->ndecl + 1, sizeof *md.vals);
	md.param = calloc(md.m->ndecl + 1, sizeof *md.param);
	if (!ir_module_init(md.m, NULL, NULL, md.vals, 0, err, sizeof err)) {
		fprintf(stderr, "%s: %s\n", name, err);
		CHECK(!"the network initializes");
		return;
	}
	for (uint32_t i = 0; i < md.m->ndecl; i++)
		if (md.m->decl[i].kind == DECL_PARAM)
			md.param[md.np++] = (int)i;
	uint32_t np = md.np, n[6];
	Tensor *v = directions(&md);
	Tensor *jr = run_task(&md, "jacobian", NULL, NULL, NULL, NULL, 0, &n[0]);
	Tensor *jf = run_task(&md, "jacfwd", NULL, NULL, NULL, NULL, 0, &n[1]);
	Tensor *h0 = run_task(&md, "hessian", NULL, NULL, NULL, NULL, 0, &n[2]);
	Tensor *h1 = run_task(&md, "hessian_fwdrev", NULL, NULL, NULL, NULL, 0, &n[3]);
	Tensor *h2 = run_task(&md, "hessian_revrev", NULL, NULL, NULL, NULL, 0, &n[4]);
	Tensor *hv = run_task(&md, "hvp", NULL, v, NULL, NULL, 0, &n[5]);
	double ej = 0, eh = 0, ehv = 0, scale = 0;
	if (jr && jf)
		for (uint32_t k = 0; k < np; k++)
			for (int64_t i = 0; i < ir_numel(&jr[k].shape); i++)
				ej = fmax(ej, fabs(jr[k].data[i] - jf[k].data[i]) / fmax(1, fabs(jr[k].data[i])));
	if (h0 && h1 && h2 && hv) {
		for (uint32_t b = 0; b < np * np; b++)
			for (int64_t i = 0; i < ir_numel(&h0[b].shape); i++) {
				double a0 = h0[b].data[i], a1 = h1[b].data[i], a2 = h2[b].data[i];
				scale = fmax(scale, fabs(a0));
				eh = fmax(eh, fmax(fabs(a0 - a1), fabs(a0 - a2)));
			}
		// (H v)_q = sum_p block(p, q)^T v_p (H symmetric).
		for (uint32_t q = 0; q < np; q++) {
			int64_t nq = ir_numel(&v[q].shape);
			for (int64_t j = 0; j < nq; j++) {
				double s = 0;
				for (uint32_t p = 0; p < np; p++)
					for (int64_t i = 0; i < ir_numel(&v[p].shape); i++)
						s += h0[p * np + q].data[i * nq + j] * v[p].data[i];
				ehv = fmax(ehv, fabs(s - hv[1 + q].data[j]));
			}
		}
	}
	printf("%s: jacfwd vs jacobian %.2g, Hessian blocks %.2g and H v %.2g (scale %.3g)\n",
	       name, ej, eh, ehv, scale);
	CHECK(jr && jf && ej <= 1e-12);
	CHECK(h0 && h1 && h2 && hv && scale > 1e-3);
	CHECK(eh <= 1e-12 * fmax(1, scale));
	CHECK(ehv <= 1e-12 * fmax(1, scale));
	tm_free_tensors(jr, n[0]), tm_free_tensors(jf, n[1]), tm_free_tensors(h0, n[2]), tm_free_tensors(h1, n[3]);
	tm_free_tensors(h2, n[4]), tm_free_tensors(hv, n[5]);
	free_dirs(&md, v);
	for (uint32_t i = 0; i < md.m->ndecl; i++)
		ir_tensor_free(&md.vals[i]);
	free(md.vals), free(md.param);
	ir_module_free(md.m);
}

int
main(void)
{
	model_tasks("tests/parse/example-resnet-blocks.ir");
	batched_tasks("net2d.ir", net2d);
	batched_tasks("net1d.ir", net1d);
	return TU_DONE("test_convtasks");
}
