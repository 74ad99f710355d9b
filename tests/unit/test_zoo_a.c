// tests/unit/test_zoo_a.c -- five of the benchmark's models
// (models-spec.md §2.1, §2.2, §4.1, §4.3, §4.4): resnet18, fcn_resnet,
// wav2letter, transformer, multiheadattn.
//
// For each model:
//  1. at its FULL default sizes (parsing is cheap), the differentiated
//     inputs of forward, in order, against the benchmark's table
//     tests/data/params/<model>.tsv (read at run time): names, shapes,
//     numel, tensor and scalar totals;
//  2. at REDUCED sizes (-D, the same file), ir_module_init + ir_interp of
//     forward gives a finite 0-dim loss named "out", plus a value derived
//     by hand with some parameters bound to chosen values:
//       resnet18     fc = 0: logits 0, cross-entropy = log NCLS
//       fcn_resnet   classifier.4 weight 0, bias b: the head outputs b_c on
//                    every pixel, bilinear upsampling keeps constants, so
//                    MSE = mean over (n, c, y, x) of (b_c - label)^2
//       wav2letter   last conv 0: ReLU(0) = 0, uniform log-softmax, log 28
//       transformer  decoder 0: uniform log-softmax, loss = log NTOK
//       multiheadattn out_proj 0: sum(outputs) = 0, loss = sum of the
//                    attention weights = B*NH*L softmax rows (1920 at full
//                    size); with every key masked too, each row is exactly
//                    one-hot (the bias position), so that sum is exact;
//                    and the whole forward against a plain C computation
//                    of §4.4, at reduced and full size;
//  3. at reduced sizes, the derivatives of passes/tasks.c, at random v, t, u:
//       - the adjoint (dot-product) identity between reverse and forward
//         mode, v (J t) = <J^T v, t> with J = dL/dparams, normalized by
//         sum_i |(J^T v)_i t_i|, within 1e-8 (float64);
//       - J t against a central difference of forward, within 1e-5;
//       - vhp (reverse over reverse): the symmetry of H,
//         <u^T H, t> = <t^T H, u>, within 1e-8, and vhp(t) = hvp(t)
//         (forward over reverse, another graph) within 1e-8 of max |H t|.
//     The reduced sizes make every averaged count a power of two (except
//     fcn_resnet's MSE over 21 classes).  That was once needed: the reverse
//     rule of `mean` multiplied by 1/n as a rounded f32 constant while
//     forward mode divided; passes/vjp.c now divides by n in both modes, so
//     the sizes no longer matter, and they are kept as they were checked.
//     Where pass_task reports a derivative that is "not implemented yet"
//     (conv, pools, upsampling were being added), the check prints a note
//     and is skipped, not failed.
// The whole file takes about 1 s.
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "frontend.h"
#include "ir.h"
#include "passes.h"
#include "testutil.h"

// ---------------------------------------------------------------- loading

static Module *
parse(const char *model, const char *const *defs, int ndefs)
{
	const char *dir = getenv("FADC_SOURCE_DIR");
	char path[1024];
	snprintf(path, sizeof path, "%s/models/%s.ir", dir ? dir : ".", model);
	FeOptions o = {.defines = defs, .ndefines = ndefs, .diag = stderr};
	Module *m = fe_parse_file(path, &o);
	if (!m)
		fprintf(stderr, "%s: cannot parse %s\n", model, path);
	return m;
}

// A parsed model with the values of its declarations.
typedef struct Model {
	const char *name;
	Module *m;
	Tensor *val; // val[m->ndecl]
} Model;

// A parameter binding: declaration `name` filled with `fill`, or (when
// per != NULL) element i of its axis 0 set to per[i] everywhere.
typedef struct Bind {
	const char *name;
	double fill;
	const double *per;
} Bind;

static void
unload(Model *md)
{
	if (!md->m)
		return;
	for (uint32_t i = 0; i < md->m->ndecl; i++)
		ir_tensor_free(&md->val[i]);
	free(md->val);
	ir_module_free(md->m);
	md->m = NULL;
}

// Parses at the given sizes and computes every declaration's value, with
// the bindings applied through ir_module_init's `bound` array.
static int
load(Model *md, const char *model, const char *const *defs, int ndefs, const Bind *b, int nb)
{
	char err[512];
	memset(md, 0, sizeof *md);
	md->name = model;
	md->m = parse(model, defs, ndefs);
	CHECK(md->m != NULL);
	if (!md->m)
		return 0;
	uint32_t nd = md->m->ndecl;
	Tensor *bound = calloc(nd, sizeof *bound);
	int *isbound = calloc(nd, sizeof *isbound);
	for (int j = 0; j < nb; j++) {
		int k = ir_module_find_decl(md->m, b[j].name);
		CHECK(k >= 0);
		if (k < 0)
			continue;
		const Decl *d = &md->m->decl[k];
		if (!ir_tensor_alloc(&bound[k], d->dtype, &d->shape))
			continue;
		int64_t n = ir_numel(&d->shape), inner = d->shape.rank ? n / d->shape.dim[0] : 1;
		for (int64_t i = 0; i < n; i++)
			bound[k].data[i] = b[j].per ? b[j].per[i / inner] : b[j].fill;
		isbound[k] = 1;
	}
	int ok = ir_module_init(md->m, bound, isbound, md->val = calloc(nd, sizeof *md->val), 0, err,
	                        sizeof err);
	for (uint32_t i = 0; i < nd; i++)
		ir_tensor_free(&bound[i]);
	free(bound);
	free(isbound);
	if (!ok) {
		fprintf(stderr, "%s: ir_module_init: %s\n", model, err);
		CHECK(!"ir_module_init failed");
		free(md->val);
		ir_module_free(md->m);
		md->m = NULL;
	}
	return ok;
}

static const Tensor *
value(const Model *md, const char *name)
{
	int k = ir_module_find_decl(md->m, name);
	CHECK(k >= 0);
	return k >= 0 ? &md->val[k] : NULL;
}

// ---------------------------------------------------------------- running tasks

// The tensor an input of a task graph takes: a declaration's value, the
// scalar cotangent "v" of vjp, or the tangent "v.<param>" of jvp / vhp
// (tng[k] for the k-th param).  NULL if none.
static const Tensor *
input_for(const Model *md, const char *name, const Tensor *vs, const Tensor *tng)
{
	int k = ir_module_find_decl(md->m, name);
	if (k >= 0)
		return &md->val[k];
	if (vs && !strcmp(name, "v"))
		return vs;
	if (tng && !strncmp(name, "v.", 2)) {
		k = ir_module_find_decl(md->m, name + 2);
		if (k >= 0 && md->m->decl[k].kind == DECL_PARAM)
			return &tng[k];
	}
	return NULL;
}

// Runs graph g on the model's values; outputs in out[g->nout].
static int
run_graph(const Model *md, const Graph *g, const Tensor *vs, const Tensor *tng, Tensor *out)
{
	Tensor *in = calloc(g->ninput + 1, sizeof *in);
	for (uint32_t i = 0; i < g->ninput; i++) {
		const Tensor *t = input_for(md, g->input[i].name, vs, tng);
		if (!t) {
			fprintf(stderr, "%s: no value for input %s\n", md->name, g->input[i].name);
			CHECK(!"input without a value");
			free(in);
			return 0;
		}
		in[i] = *t; // shallow: the interpreter only reads its inputs
	}
	char err[512];
	int ok = ir_interp(g, in, out, 0, err, sizeof err);
	if (!ok) {
		fprintf(stderr, "%s: ir_interp: %s\n", md->name, err);
		CHECK(!"ir_interp failed");
	}
	free(in);
	return ok;
}

// forward's 0-dim loss, NAN on failure.
static double
run_forward(const Model *md)
{
	const Graph *g = md->m->main;
	Tensor out[1];
	CHECK(g->nout == 1);
	if (g->nout != 1 || !run_graph(md, g, NULL, NULL, out))
		return NAN;
	CHECK(out[0].shape.rank == 0 && out[0].dtype == DT_F32);
	CHECK_STR(g->out[0].name, "out");
	double r = out[0].data[0];
	ir_tensor_free(&out[0]);
	return r;
}

static int nskip;

// Builds task `task`; NULL if the passes report a derivative that is not
// implemented yet (a printed note, no failure) or fail otherwise (a
// failure).
static Graph *
build_task(const Model *md, const char *task)
{
	char err[512];
	Loc el;
	Graph *g = pass_task(md->m->main, task, NULL, &el, err, sizeof err);
	if (!g) {
		if (strstr(err, "not implemented yet")) {
			printf("note: %s %s skipped: %s\n", md->name, task, err);
			nskip++;
		} else {
			fprintf(stderr, "%s %s: %s\n", md->name, task, err);
			CHECK(!"pass_task failed");
		}
		return NULL;
	}
	CHECK(ir_verify(g, err, sizeof err));
	return g;
}

// Random values for every param (U[-1, 1), from Philox so that they do
// not depend on the order of the checks); other slots stay empty.
static Tensor *
random_tangents(const Model *md, uint64_t seed)
{
	Tensor *t = calloc(md->m->ndecl, sizeof *t);
	for (uint32_t k = 0; k < md->m->ndecl; k++) {
		const Decl *d = &md->m->decl[k];
		if (d->kind != DECL_PARAM || !ir_tensor_alloc(&t[k], d->dtype, &d->shape))
			continue;
		for (int64_t i = 0; i < ir_numel(&d->shape); i++)
			t[k].data[i] = 2 * ir_rand_uniform(seed, k, (uint64_t)i) - 1;
	}
	return t;
}

static void
free_tensors(Tensor *t, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		ir_tensor_free(&t[i]);
	free(t);
}

// The params of forward, in order, as declaration indices.
static int
param_decls(const Model *md, int *idx)
{
	int np = 0;
	for (uint32_t k = 0; k < md->m->ndecl; k++)
		if (md->m->decl[k].kind == DECL_PARAM)
			idx[np++] = (int)k;
	return np;
}

// Normalized error of a = b, where scale bounds the sum both come from.
static void
check_rel(const char *model, const char *what, double a, double b, double scale, double tol)
{
	double e = fabs(a - b) / (scale > 0 ? scale : 1);
	tu_ncheck++;
	if (!(e <= tol)) {
		tu_nfail++;
		fprintf(stderr, "%s: %s: %.17g vs %.17g (normalized error %.3g > %g)\n", model, what, a,
		        b, e, tol);
	}
}

// The loss at params x + h t (t by declaration index), by forward.
static double
loss_at(const Model *md, const Tensor *tng, double h)
{
	uint32_t nd = md->m->ndecl;
	Model m2 = *md;
	m2.val = calloc(nd, sizeof *m2.val);
	for (uint32_t k = 0; k < nd; k++) {
		m2.val[k] = md->val[k]; // shallow, except the params
		if (md->m->decl[k].kind != DECL_PARAM)
			continue;
		ir_tensor_alloc(&m2.val[k], md->val[k].dtype, &md->val[k].shape);
		for (int64_t i = 0; i < ir_numel(&md->val[k].shape); i++)
			m2.val[k].data[i] = md->val[k].data[i] + h * tng[k].data[i];
	}
	double r = run_forward(&m2);
	for (uint32_t k = 0; k < nd; k++)
		if (md->m->decl[k].kind == DECL_PARAM)
			ir_tensor_free(&m2.val[k]);
	free(m2.val);
	return r;
}

// The dot-product test: v (J t) = <J^T v, t>, with J^T v from vjp and J t
// from jvp; vjp's and jvp's own copies of the loss equal forward's.  And,
// so that both modes are not merely consistent but right, J t against the
// central difference (L(x + h t) - L(x - h t)) / 2h within 1e-5 (the
// interpreter is float64).  h is the model's: the deep ReLU networks at
// small widths cross ReLU kinks (and BN amplifies small-variance channels)
// unless h is tiny; fcn_resnet's difference only settles near h = 1e-8.
static void
check_adjoint(const Model *md, double loss, double h)
{
	Graph *gv = build_task(md, "vjp"), *gj = gv ? build_task(md, "jvp") : NULL;
	if (!gv || !gj) {
		if (gv)
			ir_graph_free(gv);
		return;
	}
	uint32_t nd = md->m->ndecl;
	int *pidx = calloc(nd, sizeof *pidx), np = param_decls(md, pidx);
	Tensor vs;
	Shape s0 = {0};
	ir_tensor_alloc(&vs, DT_F32, &s0);
	vs.data[0] = 0.5 + ir_rand_uniform(77, 0, 0);
	Tensor *tng = random_tangents(md, 78);
	Tensor *ov = calloc(gv->nout, sizeof *ov), *oj = calloc(gj->nout, sizeof *oj);
	CHECK(gv->nout == (uint32_t)(1 + np) && gj->nout == 2);
	if (gv->nout == (uint32_t)(1 + np) && gj->nout == 2 && run_graph(md, gv, &vs, NULL, ov) &&
	    run_graph(md, gj, NULL, tng, oj)) {
		CHECK_NEAR(ov[0].data[0], loss, 1e-12);
		CHECK_NEAR(oj[0].data[0], loss, 1e-12);
		double dot = 0, scale = 0;
		int finite = 1;
		for (int j = 0; j < np; j++) {
			const Tensor *gr = &ov[1 + j], *t = &tng[pidx[j]];
			CHECK(ir_numel(&gr->shape) == ir_numel(&t->shape));
			char want[300];
			snprintf(want, sizeof want, "grad.%s", md->m->decl[pidx[j]].name);
			CHECK_STR(gv->out[1 + j].name, want);
			for (int64_t i = 0; i < ir_numel(&t->shape); i++) {
				finite &= isfinite(gr->data[i]);
				dot += gr->data[i] * t->data[i];
				scale += fabs(gr->data[i] * t->data[i]);
			}
		}
		double jt = oj[1].data[0];
		CHECK(finite && isfinite(jt));
		check_rel(md->name, "<v, J t> = <J^T v, t>", vs.data[0] * jt, dot, scale, 1e-8);
		printf("%s: <v, J t> = %.15g, <J^T v, t> = %.15g (normalized error %.2g)\n", md->name,
		       vs.data[0] * jt, dot, fabs(vs.data[0] * jt - dot) / scale);
		double fd = (loss_at(md, tng, h) - loss_at(md, tng, -h)) / (2 * h);
		check_rel(md->name, "J t = central difference", jt, fd, scale / vs.data[0], 1e-5);
		printf("%s: J t = %.15g, central difference %.15g\n", md->name, jt, fd);
	}
	for (uint32_t i = 0; i < gv->nout; i++)
		ir_tensor_free(&ov[i]);
	for (uint32_t i = 0; i < gj->nout; i++)
		ir_tensor_free(&oj[i]);
	free(ov), free(oj), free(pidx);
	free_tensors(tng, nd);
	ir_tensor_free(&vs);
	ir_graph_free(gv);
	ir_graph_free(gj);
}

// vhp computes u^T H by reverse over reverse; H is symmetric, so
// <vhp(u), t> = <vhp(t), u>, and vhp(t) = hvp(t), H t by forward over
// reverse (another graph).
static void
check_vhp(const Model *md, double loss)
{
	Graph *g = build_task(md, "vhp"), *gh = g ? build_task(md, "hvp") : NULL;
	if (!g || !gh) {
		if (g)
			ir_graph_free(g);
		return;
	}
	uint32_t nd = md->m->ndecl;
	int *pidx = calloc(nd, sizeof *pidx), np = param_decls(md, pidx);
	Tensor *u = random_tangents(md, 81), *t = random_tangents(md, 82);
	Tensor *hu = calloc(g->nout, sizeof *hu), *ht = calloc(g->nout, sizeof *ht);
	CHECK(g->nout == (uint32_t)(1 + np));
	if (g->nout == (uint32_t)(1 + np) && run_graph(md, g, NULL, u, hu) &&
	    run_graph(md, g, NULL, t, ht)) {
		CHECK_NEAR(hu[0].data[0], loss, 1e-12);
		double a = 0, b = 0, scale = 0;
		for (int j = 0; j < np; j++) {
			const Tensor *tj = &t[pidx[j]], *uj = &u[pidx[j]];
			for (int64_t i = 0; i < ir_numel(&tj->shape); i++) {
				a += hu[1 + j].data[i] * tj->data[i];
				b += ht[1 + j].data[i] * uj->data[i];
				scale += fabs(hu[1 + j].data[i] * tj->data[i]) + fabs(ht[1 + j].data[i] * uj->data[i]);
			}
		}
		CHECK(isfinite(a) && isfinite(b));
		check_rel(md->name, "<u^T H, t> = <t^T H, u>", a, b, scale, 1e-8);
		printf("%s: <u^T H, t> = %.15g, <t^T H, u> = %.15g (normalized error %.2g)\n", md->name, a,
		       b, fabs(a - b) / scale);
		Tensor *hv = calloc(gh->nout, sizeof *hv);
		CHECK(gh->nout == g->nout);
		if (gh->nout == g->nout && run_graph(md, gh, NULL, t, hv)) {
			double big = 0, diff = 0;
			for (int j = 0; j < np; j++)
				for (int64_t i = 0; i < ir_numel(&hv[1 + j].shape); i++) {
					big = fmax(big, fabs(ht[1 + j].data[i]));
					diff = fmax(diff, fabs(ht[1 + j].data[i] - hv[1 + j].data[i]));
				}
			check_rel(md->name, "max |vhp(t) - hvp(t)|", diff, 0, big, 1e-8);
			printf("%s: max |vhp(t) - hvp(t)| = %.2g of max |H t| = %.6g\n", md->name, diff, big);
		}
		for (uint32_t i = 0; i < gh->nout; i++)
			ir_tensor_free(&hv[i]);
		free(hv);
	}
	for (uint32_t i = 0; i < g->nout; i++)
		ir_tensor_free(&hu[i]), ir_tensor_free(&ht[i]);
	free(hu), free(ht), free(pidx);
	free_tensors(u, nd), free_tensors(t, nd);
	ir_graph_free(g);
	ir_graph_free(gh);
}

// ---------------------------------------------------------------- the parameter tables

// forward's params at full size against tests/data/params/<model>.tsv:
// "index<TAB>name<TAB>shape (AxBxC)<TAB>numel" rows, '#' comments, and
// "# total tensors=T scalars=S"; also against the totals of the spec.
static void
check_params(const char *model, int64_t want_tensors, int64_t want_scalars)
{
	Module *m = parse(model, NULL, 0);
	CHECK(m != NULL);
	if (!m)
		return;
	const char *dir = getenv("FADC_SOURCE_DIR");
	char path[1024], line[1024];
	snprintf(path, sizeof path, "%s/tests/data/params/%s.tsv", dir ? dir : ".", model);
	FILE *f = fopen(path, "r");
	CHECK(f != NULL);
	if (!f) {
		fprintf(stderr, "cannot open %s\n", path);
		ir_module_free(m);
		return;
	}
	const Graph *g = m->main;
	uint32_t in = 0;
	int64_t rows = 0, scalars = 0, tot_t = -1, tot_s = -1;
	while (fgets(line, sizeof line, f)) {
		long long tt, ts;
		if (sscanf(line, "# total tensors=%lld scalars=%lld", &tt, &ts) == 2) {
			tot_t = tt, tot_s = ts;
			continue;
		}
		if (line[0] == '#' || line[0] == '\n')
			continue;
		long long idx, numel;
		char name[512], shape[128];
		if (sscanf(line, "%lld\t%511s\t%127s\t%lld", &idx, name, shape, &numel) != 4) {
			fprintf(stderr, "%s: bad row: %s", path, line);
			CHECK(!"bad tsv row");
			continue;
		}
		CHECK(idx == rows);
		rows++;
		// The row-th param of forward; params come first among its inputs.
		if (in >= g->ninput || g->input[in].kind != IN_PARAM) {
			fprintf(stderr, "%s: no param for row %lld (%s)\n", model, idx, name);
			CHECK(!"fewer params than the table");
			continue;
		}
		CHECK_STR(g->input[in].name, name);
		const Shape *s = ir_shape(g, g->input[in].node);
		char got[128] = "";
		for (int d = 0; d < s->rank; d++)
			snprintf(got + strlen(got), sizeof got - strlen(got), "%s%lld", d ? "x" : "",
			         (long long)s->dim[d]);
		CHECK_STR(got, shape);
		CHECK(ir_numel(s) == numel);
		CHECK(g->node[g->input[in].node].dtype == DT_F32);
		scalars += ir_numel(s);
		in++;
	}
	fclose(f);
	CHECK(in == g->ninput || g->input[in].kind != IN_PARAM); // no extra params
	uint32_t np = 0;
	for (uint32_t k = 0; k < m->ndecl; k++)
		np += m->decl[k].kind == DECL_PARAM;
	CHECK(np == in);
	CHECK(rows == tot_t && scalars == tot_s);
	CHECK(rows == want_tensors && scalars == want_scalars);
	printf("%s: %lld params, %lld scalars, as %s.tsv\n", model, (long long)rows,
	       (long long)scalars, model);
	ir_module_free(m);
}

// ---------------------------------------------------------------- the models

#define NDEFS(a) ((int)(sizeof a / sizeof a[0]))

// Every element of declaration `name` is an integer in [0, hi).
static void
check_labels(const Model *md, const char *name, double hi)
{
	const Tensor *t = value(md, name);
	if (!t)
		return;
	int64_t bad = 0;
	for (int64_t i = 0; i < ir_numel(&t->shape); i++)
		bad += !(t->data[i] >= 0 && t->data[i] < hi && t->data[i] == floor(t->data[i]));
	CHECK(t->dtype == DT_I64 && bad == 0);
}

// The forward value at reduced size, with the derivative checks (h: the
// finite difference's step).
static double
check_reduced(const char *model, const char *const *defs, int ndefs, double h)
{
	Model md;
	if (!load(&md, model, defs, ndefs, NULL, 0))
		return NAN;
	double loss = run_forward(&md);
	CHECK(isfinite(loss));
	printf("%s: loss %.15g at reduced size\n", model, loss);
	check_adjoint(&md, loss, h);
	check_vhp(&md, loss);
	unload(&md);
	return loss;
}

// §2.1.  N = 2 images of 64 x 64 (layer4 is 2 x 2, so every BN has at
// least 8 values per channel), widths 4 .. 32, 10 classes.
static void
test_resnet18(void)
{
	check_params("resnet18", 62, 11689512);
	static const char *const defs[] = {"N=2", "H=64", "C=4", "NCLS=10"};
	check_reduced("resnet18", defs, NDEFS(defs), 1e-6);
	// fc = 0: every logit is 0, log_softmax = -log 10 everywhere.
	static const Bind zero[] = {{"fc.weight", 0, NULL}, {"fc.bias", 0, NULL}};
	Model md;
	if (load(&md, "resnet18", defs, NDEFS(defs), zero, 2)) {
		CHECK_NEAR(run_forward(&md), log(10.0), 1e-12);
		check_labels(&md, "labels", 10);
		unload(&md);
	}
}

// §2.2.  N = 2 images of 32 x 32 (the head works on 4 x 4), widths 4 ..
// 128, 21 classes.
static void
test_fcn_resnet(void)
{
	check_params("fcn_resnet", 164, 32957013);
	static const char *const defs[] = {"N=2", "H=32", "C=4"};
	check_reduced("fcn_resnet", defs, NDEFS(defs), 1e-8);
	// classifier.4 = (0, b): the head is b_c on every pixel of class c,
	// and bilinear weights sum to 1, so the upsampled output is b_c too.
	enum { NCLS = 21, N = 2, H = 32 };
	double b[NCLS];
	for (int c = 0; c < NCLS; c++)
		b[c] = 0.05 * c - 0.25;
	const Bind head[] = {{"classifier.4.weight", 0, NULL}, {"classifier.4.bias", 0, b}};
	Model md;
	if (load(&md, "fcn_resnet", defs, NDEFS(defs), head, 2)) {
		const Tensor *y = value(&md, "labels");
		if (y && y->shape.rank == 4 && y->shape.dim[1] == NCLS &&
		    ir_numel(&y->shape) == (int64_t)N * NCLS * H * H) {
			double s = 0;
			for (int64_t i = 0; i < ir_numel(&y->shape); i++) {
				double d = b[(i / (H * H)) % NCLS] - y->data[i];
				s += d * d;
			}
			CHECK_NEAR(run_forward(&md), s / (double)ir_numel(&y->shape), 1e-12);
		} else
			CHECK(!"labels of the wrong shape");
		unload(&md);
	}
}

// §4.1.  N = 2, widths 8 and 16, 1000 input frames: lengths 6, 3, 4, so
// that the NLL averages N T = 8 terms (see POWERS OF TWO above).
static void
test_wav2letter(void)
{
	check_params("wav2letter", 24, 26187278);
	static const char *const defs[] = {"N=2", "LIN=1000", "C=8", "CW=16"};
	check_reduced("wav2letter", defs, NDEFS(defs), 1e-6);
	static const Bind zero[] = {{"acoustic_model.1.20.weight", 0, NULL},
	                            {"acoustic_model.1.20.bias", 0, NULL}};
	Model md;
	if (load(&md, "wav2letter", defs, NDEFS(defs), zero, 2)) {
		CHECK_NEAR(run_forward(&md), log(28.0), 1e-12);
		const Tensor *y = value(&md, "labels");
		CHECK(y && y->shape.rank == 2 && y->shape.dim[0] == 2 && y->shape.dim[1] == 4);
		check_labels(&md, "labels", 28);
		unload(&md);
	}
}

// §4.3.  8 attended rows, 4 columns, d_model 16 in 4 heads, FFN 16, the
// full vocabulary of 50 (layer norms average 16 values, the NLL 32).
static void
test_transformer(void)
{
	check_params("transformer", 27, 10134546);
	static const char *const defs[] = {"N=8", "SEQ=4", "E=16", "NH=4", "FF=16", "MAXLEN=16"};
	check_reduced("transformer", defs, NDEFS(defs), 1e-6);
	static const Bind zero[] = {{"decoder.weight", 0, NULL}, {"decoder.bias", 0, NULL}};
	Model md;
	if (load(&md, "transformer", defs, NDEFS(defs), zero, 2)) {
		CHECK_NEAR(run_forward(&md), log(50.0), 1e-12);
		check_labels(&md, "data", 50);
		// Layer 1 starts as a copy of layer 0 (nn.TransformerEncoder deep-copies).
		const Tensor *w0 = value(&md, "transformer_encoder.layers.0.linear1.weight");
		const Tensor *w1 = value(&md, "transformer_encoder.layers.1.linear1.weight");
		CHECK(w0 && w1 && ir_numel(&w0->shape) == 16 * 16 &&
		      !memcmp(w0->data, w1->data, sizeof(double) * 16 * 16));
		unload(&md);
	}
}

// §4.4 computed in plain C from the model's values: q, k, v projections,
// heads (head index fastest), bias_k = bias_v appended, mask padded with
// False, -1e8 masking, softmax, out-projection; returns sum(out) + sum(w)
// and the sum of the weights alone in *wsum.
static double
mha_by_hand(const Model *md, int L, int S, int B, int E, int NH, double *wsum)
{
	const Tensor *qv = value(md, "query"), *kv = value(md, "key"), *mk = value(md, "attn_mask");
	const Tensor *bk = value(md, "bias_k"), *wq = value(md, "in_proj_container.query_proj.weight");
	const Tensor *wk = value(md, "in_proj_container.key_proj.weight");
	const Tensor *wv = value(md, "in_proj_container.value_proj.weight");
	const Tensor *wo = value(md, "out_proj.weight");
	if (!qv || !kv || !mk || !bk || !wq || !wk || !wv || !wo)
		return NAN;
	int D = E / NH, BH = B * NH, S1 = S + 1;
	// Projections, y = x W^T, (len, B, E); as (len, B*NH, D) the flat
	// index is unchanged.
	double *q = calloc((size_t)L * B * E, sizeof *q), *k = calloc((size_t)S1 * B * E, sizeof *k);
	double *v = calloc((size_t)S1 * B * E, sizeof *v), *o = calloc((size_t)L * B * E, sizeof *o);
	for (int r = 0; r < L * B; r++)
		for (int i = 0; i < E; i++)
			for (int j = 0; j < E; j++)
				q[r * E + i] += qv->data[r * E + j] * wq->data[i * E + j];
	for (int r = 0; r < S * B; r++)
		for (int i = 0; i < E; i++)
			for (int j = 0; j < E; j++) {
				k[r * E + i] += kv->data[r * E + j] * wk->data[i * E + j];
				v[r * E + i] += kv->data[r * E + j] * wv->data[i * E + j];
			}
	// Position S: bias_k tiled over the batch, the same vector for k and v.
	for (int n = 0; n < B; n++)
		for (int i = 0; i < E; i++)
			k[(S * B + n) * E + i] = v[(S * B + n) * E + i] = bk->data[i];
	// q * D^-1/2: the number is weak, so it is an f32 constant in the f32
	// model (as PyTorch's Python scalar multiplying an f32 tensor).
	double scale = (double)(float)(1 / sqrt((double)D));
	double total = 0, ws = 0, *w = calloc((size_t)S1, sizeof *w);
	for (int bh = 0; bh < BH; bh++)
		for (int t = 0; t < L; t++) {
			double mx = -INFINITY, z = 0;
			for (int s = 0; s < S1; s++) {
				double dot = 0;
				for (int d = 0; d < D; d++)
					dot += q[(t * BH + bh) * D + d] * scale * k[(s * BH + bh) * D + d];
				w[s] = s < S && mk->data[t * S + s] != 0 ? -1e8 : dot;
				mx = fmax(mx, w[s]);
			}
			for (int s = 0; s < S1; s++)
				z += exp(w[s] - mx);
			for (int s = 0; s < S1; s++) {
				w[s] = exp(w[s] - mx) / z;
				ws += w[s];
				for (int d = 0; d < D; d++) // (L, B*NH, D) = (L, B, E) flat
					o[(t * BH + bh) * D + d] += w[s] * v[(s * BH + bh) * D + d];
			}
		}
	for (int r = 0; r < L * B; r++)
		for (int i = 0; i < E; i++)
			for (int j = 0; j < E; j++)
				total += o[r * E + j] * wo->data[i * E + j];
	free(q), free(k), free(v), free(o), free(w);
	*wsum = ws;
	return total + ws;
}

// §4.4.  Reduced: batch 4, target 3, source 5 (E = 10 in 5 heads as in the
// benchmark); the forward is also checked against mha_by_hand, and at
// full size (cheap: 400 params) too.
static void
test_multiheadattn(void)
{
	check_params("multiheadattn", 4, 400);
	static const char *const defs[] = {"B=4", "L=3", "S=5"};
	double loss = check_reduced("multiheadattn", defs, NDEFS(defs), 1e-6);
	static const struct {
		const char *const *defs;
		int ndefs, L, S, B;
	} sz[] = {{defs, NDEFS(defs), 3, 5, 4}, {NULL, 0, 6, 10, 64}};
	for (int i = 0; i < 2; i++) {
		Model md;
		if (!load(&md, "multiheadattn", sz[i].defs, sz[i].ndefs, NULL, 0))
			continue;
		double ws = NAN, want = mha_by_hand(&md, sz[i].L, sz[i].S, sz[i].B, 10, 5, &ws);
		double got = run_forward(&md);
		CHECK_NEAR(got, want, 1e-12);
		if (i == 0)
			CHECK_NEAR(got, loss, 0);
		// The softmax rows: sum of the weights = B*NH*L (up to rounding).
		CHECK_NEAR(ws, (double)(sz[i].B * 5 * sz[i].L), 1e-12);
		unload(&md);
		// out_proj = 0: the loss is the weights' sum alone.
		static const Bind zero[] = {{"out_proj.weight", 0, NULL}, {"attn_mask", 1, NULL}};
		double rows = (double)(sz[i].B * 5 * sz[i].L);
		if (load(&md, "multiheadattn", sz[i].defs, sz[i].ndefs, zero, 1)) {
			CHECK_NEAR(run_forward(&md), rows, 1e-12);
			unload(&md);
		}
		// Every key masked: only the bias position (never masked) is left,
		// at -1e8 below it exp underflows to 0, so every softmax row is
		// exactly one-hot and the weights sum to B*NH*L exactly; and each
		// head reads bias_v, so each token's output is Wo bias:
		//   loss = B*NH*L + L*B*sum_ij Wo[i, j] bias[j].
		if (load(&md, "multiheadattn", sz[i].defs, sz[i].ndefs, zero, 2)) {
			CHECK(run_forward(&md) == rows);
			unload(&md);
		}
		if (load(&md, "multiheadattn", sz[i].defs, sz[i].ndefs, zero + 1, 1)) {
			const Tensor *wo = value(&md, "out_proj.weight"), *bk = value(&md, "bias_k");
			double s = 0;
			for (int r = 0; wo && bk && r < 100; r++)
				s += wo->data[r] * bk->data[r % 10];
			CHECK_NEAR(run_forward(&md), rows + (double)(sz[i].L * sz[i].B) * s, 1e-12);
			unload(&md);
		}
	}
}

int
main(void)
{
	clock_t t0 = clock();
	test_multiheadattn();
	test_transformer();
	test_wav2letter();
	test_resnet18();
	test_fcn_resnet();
	if (nskip)
		printf("test_zoo_a: %d derivative checks skipped (not implemented yet)\n", nskip);
	printf("test_zoo_a: %.1f s of CPU\n", (double)(clock() - t0) / CLOCKS_PER_SEC);
	return TU_DONE("test_zoo_a");
}
