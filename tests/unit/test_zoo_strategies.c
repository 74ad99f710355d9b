// tests/unit/test_zoo_strategies.c -- every model of the zoo, every task:
// the derivative strategies of passes/tasks.c agree with each other
// (docs/TASKS.md, "What the strategy tests check").
//
// For each model, at the smallest -D sizes it allows, the float64
// reference interpreter runs the task graphs at the model's seeded values,
// with random v, t (U[-1/2, 1/2)), in two parameter sets:
//
//   ALL params (every param of the model, however many):
//     jacobian = jacrev (J, a row: f is a scalar loss)
//     vjp(s) = s J            (v^T J for a scalar cotangent s)
//     jvp(t) = <J, t>          (J t)
//     hvp(t) = vhp(t)          (H t forward-over-reverse = t^T H reverse-over-reverse)
//     sampled Hessian columns: hvp(e_i) = vhp(e_i) for K random basis
//       vectors e_i (columns of hessian_fwdrev and hessian_revrev, through
//       the graphs those tasks batch), and H's symmetry on them:
//       (H e_i)_j = (H e_j)_i
//   a REDUCED set R of at most `limit` scalars (where all params are more):
//     the model's forward with every param outside R turned into a
//     constant (Input.kind), so that the batched tasks run over R's basis
//     through the very same pipeline:
//     jacobian = jacrev = jacfwd = J restricted to R
//     hessian = hessian_fwdrev = hessian_revrev (every block)
//     (H from the blocks) t = hvp_R(t) = hvp_ALL(t padded with zeros)
//       restricted to R
//     vjp, jvp of R against J_R
//   R: the smallest param of rank 3 or more (a convolution's weight, when
//   it has at most limit/2 scalars), the first param and the last, then
//   params spread evenly over the declaration order, each of at most `cap`
//   scalars, until `limit`;
//   FADC_STRATEGIES_VERBOSE=1 prints the sets and the errors.
//
// Errors are normalized, ||a - b|| / max(||a||, ||b||), and must stay
// below 1e-9: both sides are float64 evaluations of the same derivative
// along different strategies (summation orders differ, nothing else), and
// some models are ill-conditioned (ppl_robust_reg's Hessian reaches 1e12).
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "frontend.h"
#include "ir.h"
#include "passes.h"
#include "testmodel.h"
#include "testutil.h"

enum { KCOLS = 3 };
static const double TOL = 1e-9;
static int verbose;

static uint64_t rng = 0x2545F4914F6CDD1Dull;

static double
rnd(void) // [0, 1)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (double)(rng >> 11) / 9007199254740992.0;
}

static double
now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

// ---------------------------------------------------------------- vectors
// A vector over a param set: the params' values flattened and concatenated
// in input order.

typedef struct Vec {
	int64_t n;
	double *x;
} Vec;

static Vec
vec_new(int64_t n)
{
	Vec v = {n, calloc((size_t)n + 1, sizeof(double))};
	return v;
}

static double
norm(const double *x, int64_t n)
{
	double s = 0;
	for (int64_t i = 0; i < n; i++)
		s += x[i] * x[i];
	return sqrt(s);
}

// ||a - b|| / max(||a||, ||b||) within TOL.
static void
same(const char *model, const char *what, const double *a, const double *b, int64_t n)
{
	double d = 0;
	for (int64_t i = 0; i < n; i++)
		d += (a[i] - b[i]) * (a[i] - b[i]);
	d = sqrt(d);
	double s = fmax(norm(a, n), norm(b, n));
	double e = s > 0 ? d / s : d;
	tu_ncheck++;
	if (verbose)
		printf("  %-50s %8.2g (%lld values, norm %.3g)\n", what, e, (long long)n, s);
	if (!(e <= TOL) || !(s == s)) {
		tu_nfail++;
		fprintf(stderr, "%s: %s: normalized error %.3g > %.3g (norm %.3g)\n", model, what, e, TOL, s);
		for (int64_t i = 0; i < n && i < 6; i++)
			fprintf(stderr, "   [%lld] %.15g vs %.15g\n", (long long)i, a[i], b[i]);
	}
}

// ---------------------------------------------------------------- running

typedef struct Model {
	const char *name;
	Module *m;
	Tensor *val; // per decl
	Graph *f; // forward, with the params outside the current set made constants
	int np; // params of f
	int *decl; // decl index of each param of f, in input order
	int64_t *off, total; // offset of each param in the flat vector, and the size
} Model;

// The params of m->main with inset[k] (k over all params in order) kept.
static void
model_set(Model *mo, const uint8_t *inset)
{
	ir_graph_free(mo->f);
	mo->f = pass_simplify(mo->m->main); // a copy whose input kinds we may change
	mo->np = 0;
	mo->total = 0;
	free(mo->decl), free(mo->off);
	mo->decl = calloc(mo->f->ninput + 1, sizeof *mo->decl);
	mo->off = calloc(mo->f->ninput + 1, sizeof *mo->off);
	for (uint32_t i = 0, k = 0; i < mo->f->ninput; i++) {
		Input *in = &mo->f->input[i];
		if (in->kind != IN_PARAM)
			continue;
		if (inset && !inset[k++]) {
			in->kind = IN_CONST;
			continue;
		}
		int d = ir_module_find_decl(mo->m, in->name);
		mo->decl[mo->np] = d;
		mo->off[mo->np++] = mo->total;
		mo->total += ir_numel(&mo->m->decl[d].shape);
	}
}

// The value of extra input `name` of a task graph: "v" a scalar, "v.<p>"
// the slice of t for param p.
static void
bind_v(const Model *mo, const char *name, const Tensor *like, const Vec *t, double s, Tensor *out)
{
	ir_tensor_alloc(out, like ? like->dtype : DT_F32, like ? &like->shape : &(Shape){0});
	if (!strcmp(name, "v")) {
		out->data[0] = s;
		return;
	}
	for (int p = 0; p < mo->np; p++)
		if (!strcmp(name + 2, mo->m->decl[mo->decl[p]].name)) {
			memcpy(out->data, t->x + mo->off[p], sizeof(double) * (size_t)ir_numel(&out->shape));
			return;
		}
	fprintf(stderr, "%s: no value for input %s\n", mo->name, name);
	exit(1);
}

// Runs `task` of mo->f (testmodel.h: tm_derive, tm_run): its inputs not
// declarations of mo->m are bound by bind_v.  Its outputs, and its graph
// in *gout (tm_free_out frees both).
static Tensor *
run_task(const Model *mo, const char *task, const Vec *t, double s, Graph **gout)
{
	Graph *g = tm_derive(mo->f, task, NULL, 0);
	const char **xn = calloc(g->ninput + 1, sizeof *xn);
	Tensor *xv = calloc(g->ninput + 1, sizeof *xv);
	int nx = 0;
	for (uint32_t i = 0; i < g->ninput; i++) {
		const char *name = g->input[i].name;
		if (ir_module_find_decl(mo->m, name) >= 0)
			continue;
		const Tensor *like = NULL;
		if (strcmp(name, "v"))
			like = &mo->val[ir_module_find_decl(mo->m, name + 2)];
		bind_v(mo, name, like, t, s, &xv[nx]);
		xn[nx++] = name;
	}
	Tensor *out = tm_run(mo->m, g, task, mo->val, xn, xv, nx, 0);
	tm_free_tensors(xv, (uint32_t)nx);
	free(xn);
	*gout = g;
	return out;
}

// Outputs first .. first + np of a task, flattened into one vector.
static Vec
task_vec(const Model *mo, const char *task, const Vec *t, double s, uint32_t first)
{
	Graph *g;
	Tensor *o = run_task(mo, task, t, s, &g);
	Vec r = vec_new(mo->total);
	for (int p = 0; p < mo->np; p++) {
		const Tensor *x = &o[first + (uint32_t)p];
		FADC_ASSERT(ir_numel(&x->shape) == ir_numel(&mo->m->decl[mo->decl[p]].shape),
		            "a task output of the wrong size");
		memcpy(r.x + mo->off[p], x->data, sizeof(double) * (size_t)ir_numel(&x->shape));
	}
	tm_free_out(g, o);
	return r;
}

static double
task_scalar(const Model *mo, const char *task, const Vec *t, double s, uint32_t k)
{
	Graph *g;
	Tensor *o = run_task(mo, task, t, s, &g);
	double r = o[k].data[0];
	tm_free_out(g, o);
	return r;
}

// The full Hessian of a Hessian task, row-major (total x total), from its
// blocks hessian.<p>.<q> (outputs in row-major order over (p, q)).
static Vec
task_hessian(const Model *mo, const char *task)
{
	Graph *g;
	Tensor *o = run_task(mo, task, NULL, 0, &g);
	int64_t n = mo->total;
	Vec h = vec_new(n * n);
	FADC_ASSERT((int)g->nout == mo->np * mo->np, "hessian blocks");
	for (int p = 0; p < mo->np; p++)
		for (int q = 0; q < mo->np; q++) {
			const Tensor *b = &o[p * mo->np + q];
			int64_t np_ = ir_numel(&mo->m->decl[mo->decl[p]].shape);
			int64_t nq = ir_numel(&mo->m->decl[mo->decl[q]].shape);
			for (int64_t i = 0; i < np_; i++)
				for (int64_t j = 0; j < nq; j++)
					h.x[(mo->off[p] + i) * n + mo->off[q] + j] = b->data[i * nq + j];
		}
	tm_free_out(g, o);
	return h;
}

static Vec
rand_vec(int64_t n)
{
	Vec v = vec_new(n);
	for (int64_t i = 0; i < n; i++)
		v.x[i] = (float)(rnd() - 0.5); // f32 values: the models' params are f32
	return v;
}

// ---------------------------------------------------------------- checks

// J, vjp, jvp, hvp, vhp and sampled Hessian columns over mo's set.
// Returns J and H t for the caller's cross-checks.
static void
first_and_sampled(const Model *mo, const char *set, const Vec *t, Vec *Jout, Vec *Htout)
{
	char what[128];
	Vec J = task_vec(mo, "jacobian", NULL, 0, 0);
	Vec Jr = task_vec(mo, "jacrev", NULL, 0, 0);
	snprintf(what, sizeof what, "%s: jacrev = jacobian", set);
	same(mo->name, what, Jr.x, J.x, J.n);
	// vjp(s) = s J
	double s = (float)(0.25 + rnd());
	Vec g = task_vec(mo, "vjp", NULL, s, 1);
	Vec sJ = vec_new(J.n);
	for (int64_t i = 0; i < J.n; i++)
		sJ.x[i] = s * J.x[i];
	snprintf(what, sizeof what, "%s: vjp(s) = s J", set);
	same(mo->name, what, g.x, sJ.x, J.n);
	// jvp(t) = <J, t>
	double jt = task_scalar(mo, "jvp", t, 0, 1), dot = 0;
	for (int64_t i = 0; i < J.n; i++)
		dot += J.x[i] * t->x[i];
	snprintf(what, sizeof what, "%s: jvp(t) = <J, t>", set);
	same(mo->name, what, &jt, &dot, 1);
	// hvp(t) = vhp(t)
	Vec ht = task_vec(mo, "hvp", t, 0, 1), th = task_vec(mo, "vhp", t, 0, 1);
	snprintf(what, sizeof what, "%s: hvp(t) = vhp(t)", set);
	same(mo->name, what, ht.x, th.x, ht.n);
	// Sampled columns of H by both graphs, and H's symmetry on them.
	int64_t idx[KCOLS];
	Vec col[KCOLS];
	int k = mo->total < KCOLS ? (int)mo->total : KCOLS;
	for (int c = 0; c < k; c++) {
		idx[c] = (int64_t)(rnd() * (double)mo->total);
		Vec e = vec_new(mo->total);
		e.x[idx[c]] = 1;
		col[c] = task_vec(mo, "hvp", &e, 0, 1);
		Vec rc = task_vec(mo, "vhp", &e, 0, 1);
		snprintf(what, sizeof what, "%s: H e_%lld by hvp = by vhp", set, (long long)idx[c]);
		same(mo->name, what, col[c].x, rc.x, rc.n);
		free(e.x), free(rc.x);
	}
	if (k) {
		double a[KCOLS * KCOLS] = {0}, b[KCOLS * KCOLS] = {0};
		for (int i = 0; i < k; i++)
			for (int j = 0; j < k; j++) {
				a[i * k + j] = col[j].x[idx[i]]; // H[i][j] from column j
				b[i * k + j] = col[i].x[idx[j]]; // H[j][i] from column i
			}
		snprintf(what, sizeof what, "%s: H symmetric on the sampled columns", set);
		same(mo->name, what, a, b, (int64_t)k * k);
	}
	for (int c = 0; c < k; c++)
		free(col[c].x);
	free(Jr.x), free(g.x), free(sJ.x), free(th.x);
	*Jout = J;
	*Htout = ht;
}

// The batched tasks over mo's (small) set: jacfwd and the three Hessians.
static void
batched(const Model *mo, const char *set, const Vec *J, const Vec *t, const Vec *Ht)
{
	char what[128];
	Vec Jf = task_vec(mo, "jacfwd", NULL, 0, 0);
	snprintf(what, sizeof what, "%s: jacfwd = jacobian", set);
	same(mo->name, what, Jf.x, J->x, J->n);
	Vec H0 = task_hessian(mo, "hessian");
	Vec H1 = task_hessian(mo, "hessian_fwdrev");
	Vec H2 = task_hessian(mo, "hessian_revrev");
	snprintf(what, sizeof what, "%s: hessian_fwdrev = hessian", set);
	same(mo->name, what, H1.x, H0.x, H0.n);
	snprintf(what, sizeof what, "%s: hessian_revrev = hessian", set);
	same(mo->name, what, H2.x, H0.x, H0.n);
	int64_t n = mo->total;
	Vec Hv = vec_new(n);
	for (int64_t i = 0; i < n; i++)
		for (int64_t j = 0; j < n; j++)
			Hv.x[i] += H0.x[i * n + j] * t->x[j];
	snprintf(what, sizeof what, "%s: hessian t = hvp(t)", set);
	same(mo->name, what, Hv.x, Ht->x, n);
	free(Jf.x), free(H0.x), free(H1.x), free(H2.x), free(Hv.x);
}

// ---------------------------------------------------------------- models

typedef struct Zoo {
	const char *model;
	const char *defs[16];
	int64_t limit; // scalars of the reduced set
	int64_t cap; // scalars of one param of it
} Zoo;

static Module *
parse(const char *model, const char *const *defs)
{
	const char *dir = getenv("FADC_SOURCE_DIR");
	char path[1024];
	snprintf(path, sizeof path, "%s/models/%s.ir", dir ? dir : ".", model);
	int n = 0;
	while (defs[n])
		n++;
	FeOptions o = {.defines = defs, .ndefines = n, .diag = stderr};
	Module *m = fe_parse_file(path, &o);
	if (!m) {
		fprintf(stderr, "%s: cannot parse %s\n", model, path);
		exit(1);
	}
	return m;
}

static void
zoo(const Zoo *z)
{
	double t0 = now();
	Model mo = {.name = z->model};
	mo.m = parse(z->model, z->defs);
	mo.val = calloc(mo.m->ndecl + 1, sizeof *mo.val);
	char err[512];
	if (!ir_module_init(mo.m, NULL, NULL, mo.val, 0, err, sizeof err)) {
		fprintf(stderr, "%s: %s\n", z->model, err);
		exit(1);
	}
	model_set(&mo, NULL);
	int npall = mo.np;
	int64_t total = mo.total;
	int64_t *offall = malloc(sizeof *offall * (size_t)(npall + 1));
	memcpy(offall, mo.off, sizeof *offall * (size_t)npall);
	int64_t *sizeall = malloc(sizeof *sizeall * (size_t)(npall + 1));
	for (int p = 0; p < npall; p++)
		sizeall[p] = ir_numel(&mo.m->decl[mo.decl[p]].shape);
	if (verbose)
		printf("%s: %d params, %lld scalars\n", z->model, npall, (long long)total);
	Vec t = rand_vec(total), J, Ht;
	first_and_sampled(&mo, "all", &t, &J, &Ht);
	if (total <= z->limit) {
		batched(&mo, "all", &J, &t, &Ht);
	} else {
		// The reduced set: first and last param, then evenly spread ones.
		uint8_t *in = calloc((size_t)npall + 1, 1);
		int64_t used = 0;
		int order[1024], no = 0;
		order[no++] = 0;
		if (npall > 1)
			order[no++] = npall - 1;
		for (int step = npall / 2; step >= 1 && no < 1000; step /= 2)
			for (int p = step; p < npall && no < 1000; p += step)
				order[no++] = p;
		// The smallest weight of rank 3 or more (a convolution's) first, so
		// that the batched tasks batch conv and its adjoint ops over a
		// weight (passes/vmap.c folds that batch into the groups).
		int conv = -1;
		for (int p = 0; p < npall; p++)
			if (mo.m->decl[mo.decl[p]].shape.rank >= 3 &&
			    (conv < 0 || sizeall[p] < sizeall[conv]))
				conv = p;
		if (conv >= 0 && sizeall[conv] <= z->limit / 2) {
			in[conv] = 1;
			used += sizeall[conv];
		}
		for (int i = 0; i < no; i++) {
			int p = order[i];
			if (!in[p] && sizeall[p] <= z->cap && used + sizeall[p] <= z->limit) {
				in[p] = 1;
				used += sizeall[p];
			}
		}
		model_set(&mo, in);
		char set[64];
		snprintf(set, sizeof set, "reduced (%d params, %lld scalars)", mo.np, (long long)mo.total);
		if (verbose) {
			printf("%s: %s:", z->model, set);
			for (int p = 0; p < mo.np; p++)
				printf(" %s", mo.m->decl[mo.decl[p]].name);
			printf("\n");
		}
		// t restricted to R, and J_R, (H t_R)_R from the whole set.
		Vec tr = vec_new(mo.total), tpad = vec_new(total), Jsub = vec_new(mo.total);
		for (int p = 0, q = 0; p < npall; p++)
			if (in[p]) {
				for (int64_t i = 0; i < sizeall[p]; i++) {
					tr.x[mo.off[q] + i] = t.x[offall[p] + i];
					tpad.x[offall[p] + i] = t.x[offall[p] + i];
					Jsub.x[mo.off[q] + i] = J.x[offall[p] + i];
				}
				q++;
			}
		Vec JR, HtR;
		first_and_sampled(&mo, set, &tr, &JR, &HtR);
		snprintf(set, sizeof set, "reduced");
		same(z->model, "J_R = J restricted to R", JR.x, Jsub.x, JR.n);
		// hvp over all params at t padded with zeros, restricted to R.
		model_set(&mo, NULL);
		Vec Hpad = task_vec(&mo, "hvp", &tpad, 0, 1);
		model_set(&mo, in);
		Vec Hsub = vec_new(mo.total);
		for (int p = 0, q = 0; p < npall; p++)
			if (in[p]) {
				memcpy(Hsub.x + mo.off[q], Hpad.x + offall[p], sizeof(double) * (size_t)sizeall[p]);
				q++;
			}
		same(z->model, "hvp_R(t_R) = hvp_all(t_R padded with 0), on R", HtR.x, Hsub.x, HtR.n);
		batched(&mo, set, &JR, &tr, &HtR);
		free(tr.x), free(tpad.x), free(Jsub.x), free(JR.x), free(HtR.x), free(Hpad.x), free(Hsub.x);
		free(in);
	}
	printf("%s: strategies agree (%d params, %lld scalars): %.2f s\n", z->model, npall,
	       (long long)total, now() - t0);
	free(t.x), free(J.x), free(Ht.x), free(offall), free(sizeall);
	for (uint32_t i = 0; i < mo.m->ndecl; i++)
		ir_tensor_free(&mo.val[i]);
	free(mo.val), free(mo.decl), free(mo.off);
	ir_graph_free(mo.f);
	ir_module_free(mo.m);
}

// The smallest sizes each model allows (the strides of the vision models
// need H a multiple of 32 (resnet18, detr) or 8 (fcn_resnet); detr's and
// resnet18's labels reach class 9; deepspeech's lengths need the spans of
// test_zoo_b.c), and the reduced sets' limits.
static const Zoo zoos[] = {
	{"ppl_simple_reg", {NULL}, 400, 400},
	{"ppl_robust_reg", {NULL}, 400, 400},
	{"multiheadattn", {"B=2", "L=3", "S=4", "E=4", "NH=2", NULL}, 400, 400},
	{"transformer", {"N=4", "SEQ=2", "E=4", "NH=2", "FF=4", "MAXLEN=4", "NTOK=5", NULL}, 64, 24},
	{"wav2letter", {"N=1", "LIN=400", "C=2", "CW=2", "NCLS=3", NULL}, 64, 24},
	{"resnet18", {"N=2", "H=32", "C=2", "NCLS=10", NULL}, 48, 16},
	{"fcn_resnet", {"N=2", "H=8", "C=2", "NCLS=3", NULL}, 48, 16},
	{"detr",
	 {"IMG_H=32", "IMG_W=32", "WIDTH=1", "D=4", "NH=2", "FF=4", "Q=3", "NCLS=10", "T0=2", "T1=1",
	  "NPOS=2", NULL},
	 48,
	 16},
	{"deepspeech",
	 {"N=2", "FREQ=9", "FRAMES=16", "LEN_LO=8", "LEN_SPAN=8", "C=1", "HID=2", "S=2", "NCLS=3", NULL},
	 48,
	 16},
};

int
main(void)
{
	verbose = getenv("FADC_STRATEGIES_VERBOSE") != NULL;
	const char *only = getenv("FADC_STRATEGIES_MODEL");
	for (size_t i = 0; i < sizeof zoos / sizeof zoos[0]; i++)
		if (!only || strstr(zoos[i].model, only))
			zoo(&zoos[i]);
	return TU_DONE("test_zoo_strategies");
}
