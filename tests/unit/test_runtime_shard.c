// tests/unit/test_runtime_shard.c -- shards of batched tasks (docs/TASKS.md,
// "Shards"): `T:k/K` over basis rows [lo, hi), and runtime/shard.c, which
// runs K of them on K contexts and assembles T's outputs.
//
//   1. Passes, on the float64 interpreter: for ppl_simple_reg, a reduced
//      ppl_robust_reg (N = 3, K = 2: three params, 7 basis vectors) and a
//      model with a non-scalar forward (f32[2, 3] from a [4, 3] and a [3]
//      param), every batched task (the three Hessians, jacobian, jacrev,
//      jacfwd) cut into K = 1, 2, 3 and one shard per basis vector: the
//      slices, placed by task_shard_layout, write every element of T's
//      outputs exactly once and equal T's (normalized error <= 1e-12; the
//      count of bit-identical elements is printed with FADC_SHARD_VERBOSE).
//      Each shard's graph costs its share: no value wider than its cnt rows
//      of the identity (N wide) or of the unbatched graph's widest value
//      (so its basis is its rows, not the whole identity masked), and the
//      K shards' kernels write at most 1.25 times T's plus K times the
//      unbatched graph's values (fill_fusion's roots, counted in
//      elements).
//   2. The runtime, on CPU contexts: the same models in f64 (every f32 of
//      the source made f64, so that 1e-12 means something) compiled with
//      T and its shards for K = 1, 2, 3; rt_shard_run on K contexts (one
//      model each), the destination one of them or another context, slices
//      in place or through the host (RtShardOptions.staged): the assembled
//      outputs equal T's compiled outputs and the interpreter's (<= 1e-12
//      normalized; bit-identical counted), and the bytes moved in place and
//      through the host are what the layout says (jacfwd's columns of a
//      non-scalar forward are always copied).
//   3. The format (12): shard records decoded as written, re-encoded
//      byte for byte, refused in format 11, and a record that disagrees
//      with its task, truncated or flipped, refused with a message.
//   4. Errors: malformed shard names, K above the basis, shards of tasks that
//      are not batched (vjp, the Jacobian of a scalar forward), and the
//      runtime's refusals (shard counts, NULL handles, a task compiled
//      without those shards, a model of another artifact, outputs of the
//      wrong shape or count, a missing artifact).
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "artifact.h"
#include "codegen.h"
#include "codegen_util.h"
#include "fadc.h"
#include "frontend.h"
#include "passes.h"
#include "shard.h"
#include "testmodel.h"
#include "testutil.h"

#define TOL 1e-12

static int verbose;
static char dir[256];

// A model with a non-scalar forward: J = d tanh(x w + b) / d(w, b), 6 x 15.
static const char *const vec_src = "param w: f32[4, 3] = normal(0, 1, seed=3)\n"
                                   "param b: f32[3] = normal(0, 1, seed=4)\n"
                                   "const x: f32[2, 4] = uniform(0, 1, seed=5)\n"
                                   "def forward() -> f32[2, 3] {\n"
                                   "  return tanh(x @ w + b) * 1.5\n"
                                   "}\n";

// The text of models/FILE with every f32 made f64 when f64.
static char *
model_text(const char *file, int f64)
{
	const char *root = getenv("FADC_SOURCE_DIR");
	char path[4096];
	snprintf(path, sizeof path, "%s/models/%s", root ? root : ".", file);
	FILE *f = fopen(path, "rb");
	if (!f) {
		fprintf(stderr, "cannot read %s\n", path);
		exit(1);
	}
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	fseek(f, 0, SEEK_SET);
	char *s = calloc((size_t)n + 1, 1);
	if (fread(s, 1, (size_t)n, f) != (size_t)n)
		exit(1);
	fclose(f);
	for (char *p = s; f64 && (p = strstr(p, "f32")); p += 3)
		p[2] = '4', p[1] = '6';
	return s;
}

static char *
text_f64(const char *src)
{
	char *s = strdup(src);
	for (char *p = s; (p = strstr(p, "f32")); p += 3)
		p[2] = '4', p[1] = '6';
	return s;
}

// ‖a − b‖ / √(‖a‖² + ‖b‖²) (0 for two zeros), and how many are identical.
static double
nerr(const double *a, const double *b, int64_t n, int64_t *same)
{
	double d = 0, s = 0;
	*same = 0;
	for (int64_t i = 0; i < n; i++) {
		d += (a[i] - b[i]) * (a[i] - b[i]);
		s += a[i] * a[i] + b[i] * b[i];
		*same += a[i] == b[i];
	}
	return s > 0 ? sqrt(d / s) : sqrt(d);
}

// Σ numel over the values g's kernels write (fill_fusion's roots: what
// gets a kernel and a buffer; index maps and elementwise ops are inlined
// into their readers): what its code computes, roughly.
static double
graph_cost(const Graph *g)
{
	Arena *a = arena_new();
	uint8_t *root;
	CHECK(fill_fusion(g, a, &root) == 0);
	double c = 0;
	for (NodeId n = 1; n < g->nnode; n++)
		if (root[n] && g->node[n].op != OP_input)
			c += (double)ir_numel(ir_shape(g, n));
	arena_free(a);
	return c;
}

// The most elements of one node of g.
static int64_t
graph_widest(const Graph *g)
{
	int64_t w = 0;
	for (NodeId n = 1; n < g->nnode; n++)
		if (ir_numel(ir_shape(g, n)) > w)
			w = ir_numel(ir_shape(g, n));
	return w;
}

// ---------------------------------------------------------------- 1. passes

// The unbatched graph a batched task batches (its cost bounds what a
// shard repeats of it).
static const char *
unbatched_of(const char *task)
{
	return !strncmp(task, "hessian", 7) ? "hvp" : !strcmp(task, "jacfwd") ? "jvp" : "vjp";
}

// Task `task` of m cut into K shards on the interpreter, against the whole.
static void
pass_shards(const char *label, const Module *m, const Tensor *vals, const char *task, int K,
            const char *wsuf)
{
	Graph *gw;
	Tensor *whole = tm_run_task(m, task, vals, NULL, NULL, 0, &gw);
	double cw = graph_cost(gw);
	Graph *gu = tm_derive(m->main, unbatched_of(task), NULL, 0);
	double cu = graph_cost(gu), cs = 0;
	int64_t wu = graph_widest(gu);
	ir_graph_free(gu);
	uint32_t nw = gw->nout;
	double **asm_ = calloc(nw, sizeof *asm_);
	int **hits = calloc(nw, sizeof *hits);
	for (uint32_t i = 0; i < nw; i++) {
		int64_t n = ir_numel(&whole[i].shape);
		asm_[i] = calloc((size_t)n + 1, sizeof **asm_);
		hits[i] = calloc((size_t)n + 1, sizeof **hits);
	}
	int64_t total = task_basis_size(m->main, task_lookup(task)), next = 0;
	for (int k = 0; k < K; k++) {
		char name[128];
		snprintf(name, sizeof name, "%s:%d/%d%s", task, k, K, wsuf);
		Graph *gs;
		Tensor *part = tm_run_task(m, name, vals, NULL, NULL, 0, &gs);
		Arena *a = arena_new();
		TaskShard sh;
		Loc el;
		char err[512];
		if (!CHECK(task_shard_layout(m->main, name, a, &sh, &el, err, sizeof err))) {
			fprintf(stderr, "%s %s: %s\n", label, name, err);
			exit(1);
		}
		CHECK(sh.nout == gs->nout && sh.k == k && sh.n == K && sh.total == total);
		CHECK(sh.lo == next && sh.hi > sh.lo && (k < K - 1 || sh.hi == total)); // they tile
		next = sh.hi;
		// Its basis is its rows, not N masked: no value is wider than its
		// cnt rows of the identity or of the unbatched graph's widest.
		int64_t cnt = sh.hi - sh.lo, widest = cnt * (total > wu ? total : wu);
		if (!CHECK(graph_widest(gs) <= widest))
			fprintf(stderr, "%s %s: a value of %lld elements, more than %lld\n", label, name,
			        (long long)graph_widest(gs), (long long)widest);
		cs += graph_cost(gs);
		for (uint32_t j = 0; j < sh.nout; j++) {
			const TaskShardOut *x = &sh.out[j];
			uint32_t w = 0;
			while (w < nw && strcmp(gw->out[w].name, x->name))
				w++;
			if (!CHECK(w < nw && !strcmp(gs->out[j].name, x->name)))
				continue;
			CHECK(ir_shape_eq(&x->full, &whole[w].shape));
			CHECK(x->outer * x->mid * x->inner == ir_numel(&whole[w].shape));
			CHECK(x->outer * x->cnt * x->inner == ir_numel(&part[j].shape));
			for (int64_t o = 0; o < x->outer; o++)
				for (int64_t r = 0; r < x->cnt * x->inner; r++) {
					int64_t e = (o * x->mid + x->off) * x->inner + r;
					asm_[w][e] = part[j].data[o * x->cnt * x->inner + r];
					hits[w][e]++;
				}
		}
		arena_free(a);
		tm_free_tensors(part, gs->nout);
		ir_graph_free(gs);
	}
	// The shards together cost T (fusion decides a little differently at
	// each batch size: 25% of slack) plus what each repeats unbatched.
	if (!CHECK(cs <= 1.25 * cw + K * cu) || verbose)
		fprintf(stderr, "%s %s K=%d: the shards cost %.0f, T %.0f, the unbatched graph %.0f\n",
		        label, task, K, cs, cw, cu);
	for (uint32_t i = 0; i < nw; i++) {
		int64_t n = ir_numel(&whole[i].shape), once = 0, same;
		for (int64_t e = 0; e < n; e++)
			once += hits[i][e] == 1;
		CHECK(once == n);
		double r = nerr(asm_[i], whole[i].data, n, &same);
		if (!CHECK(r <= TOL) || verbose)
			fprintf(stderr, "%s %s K=%d %s: error %.3g, %lld of %lld identical\n", label, task, K,
			        gw->out[i].name, r, (long long)same, (long long)n);
		free(asm_[i]);
		free(hits[i]);
	}
	free(asm_);
	free(hits);
	tm_free_tensors(whole, nw);
	ir_graph_free(gw);
}

static void
test_passes(void)
{
	const char *small[] = {"N=3", "K=2"};
	struct {
		const char *label;
		Module *m;
		const char *tasks[6];
	} cs[] = {
	    {"ppl_simple_reg", tm_load("ppl_simple_reg.ir", NULL, 0),
	     {"hessian", "hessian_fwdrev", "hessian_revrev", "jacfwd", NULL}},
	    {"ppl_robust_reg", tm_load("ppl_robust_reg.ir", small, 2),
	     {"hessian", "hessian_fwdrev", "hessian_revrev", "jacfwd", NULL}},
	    {"vec", tm_parse("vec.ir", vec_src), {"jacobian", "jacrev", "jacfwd", NULL}},
	};
	for (size_t c = 0; c < sizeof cs / sizeof cs[0]; c++) {
		Tensor *vals = tm_init(cs[c].m);
		for (int t = 0; cs[c].tasks[t]; t++) {
			int64_t total = task_basis_size(cs[c].m->main, task_lookup(cs[c].tasks[t]));
			CHECK(total > 3);
			int ks[] = {1, 2, 3, (int)total};
			for (int i = 0; i < 4; i++)
				pass_shards(cs[c].label, cs[c].m, vals, cs[c].tasks[t], ks[i], "");
			// Uneven splits (7 rows: 3 + 1 gives [0, 5), [5, 7); 2 + 3 + 1
			// [0, 2), [2, 5), [5, 7)): every shard gets a row from 4 on.
			pass_shards(cs[c].label, cs[c].m, vals, cs[c].tasks[t], 2, ":3+1");
			pass_shards(cs[c].label, cs[c].m, vals, cs[c].tasks[t], 3, ":2+3+1");
		}
		tm_free_tensors(vals, cs[c].m->ndecl);
	}
	// The share at a size where the batch dominates: robust_reg over 36
	// basis vectors (N = 24, K = 10) in 4 shards.
	const char *mid[] = {"N=24", "K=10"};
	Module *m = tm_load("ppl_robust_reg.ir", mid, 2);
	Tensor *vals = tm_init(m);
	pass_shards("ppl_robust_reg N=24", m, vals, "hessian", 4, "");
	pass_shards("ppl_robust_reg N=24", m, vals, "hessian", 4, ":30+30+21+19");
	// A shard none of whose rows are beta's (rows [12, 24) of nu 1, sigma
	// 24, beta 11) has beta's basis part as zeros (pass_vmap_rows): the
	// product X beta-dot and its uses fold away, so it has fewer products
	// than the shard holding the beta rows and than the whole task.
	int nmm[3] = {0};
	const char *mm[3] = {"hessian", "hessian:1/3", "hessian:2/3"};
	for (int i = 0; i < 3; i++) {
		Graph *g = tm_derive(m->main, mm[i], NULL, 0);
		for (NodeId n = 1; n < g->nnode; n++)
			nmm[i] += g->node[n].op == OP_matmul;
		ir_graph_free(g);
	}
	if (!CHECK(nmm[1] < nmm[2] && nmm[1] < nmm[0]) || verbose)
		fprintf(stderr, "ppl_robust_reg N=24 matmuls: hessian %d, 1/3 (sigma rows) %d, 2/3 (beta "
		        "rows) %d\n", nmm[0], nmm[1], nmm[2]);
	tm_free_tensors(vals, m->ndecl);
	for (size_t c = 0; c < sizeof cs / sizeof cs[0]; c++)
		ir_module_free(cs[c].m);
	ir_module_free(m);
}

// ---------------------------------------------------------------- 3. errors (passes)

static void
expect_task_error(const Module *m, const char *task, const char *want)
{
	Loc el;
	char err[512] = "";
	Graph *g = pass_task(m->main, task, NULL, &el, err, sizeof err);
	if (!CHECK(!g && strstr(err, want)))
		fprintf(stderr, "task %s: got '%s', want '%s'\n", task, g ? "(a graph)" : err, want);
	ir_graph_free(g);
	CHECK(!pass_task_check(m->main, task, &el, err, sizeof err));
}

static void
test_pass_errors(void)
{
	const char *small[] = {"N=3", "K=2"};
	Module *m = tm_load("ppl_robust_reg.ir", small, 2); // 7 basis vectors
	expect_task_error(m, "hessian:0/8", "hessian has 7 basis vectors for this model, fewer than 8");
	expect_task_error(m, "hessian:2/2", "shard k of K needs 0 <= k < K <= 64");
	expect_task_error(m, "hessian:0/65", "shard k of K needs 0 <= k < K <= 64");
	expect_task_error(m, "hessian:0/0", "shard k of K needs");
	expect_task_error(m, "hessian:01/2", "without sign or leading zeros");
	expect_task_error(m, "hessian:-1/2", "without sign or leading zeros");
	expect_task_error(m, "hessian:1", "a shard is TASK:k/K");
	expect_task_error(m, "hessian:1/2x", "a shard is TASK:k/K");
	expect_task_error(m, "hess:0/2", "unknown task 'hess'");
	expect_task_error(m, "vjp:0/2", "vjp is not batched");
	expect_task_error(m, "jacobian:0/1", "forward returns a scalar");
	CHECK(task_lookup("hessian:1/2") == task_lookup("hessian"));
	CHECK(task_lookup("hessian:2/2") == -1 && task_lookup("nope:0/1") == -1);
	int64_t lo, hi, prev = 0;
	for (int k = 0; k < 3; k++) { // 7 = 3 + 2 + 2
		task_shard_range(7, k, 3, &lo, &hi);
		CHECK(lo == prev && hi - lo == (k == 0 ? 3 : 2));
		prev = hi;
	}
	// Uneven: shard k starts at floor(total W_k / W).  By hand: 10012 rows
	// as 56 + 44: floor(10012 * 56 / 100) = 5606; 7 as 3 + 1: 5.
	int64_t w56[] = {56, 44}, w31[] = {3, 1}, big[] = {TASK_MAX_WEIGHT, 1, TASK_MAX_WEIGHT};
	CHECK(task_shard_range_weighted(10012, 0, 2, w56, &lo, &hi) && lo == 0 && hi == 5606);
	CHECK(task_shard_range_weighted(10012, 1, 2, w56, &lo, &hi) && lo == 5606 && hi == 10012);
	CHECK(task_shard_range_weighted(7, 0, 2, w31, &lo, &hi) && hi == 5);
	// No row for the middle shard of 7 (floor(7e6 / 2000001) = 3 both ends),
	// but every row somewhere at 2^61 rows (the product needs 128 bits).
	CHECK(!task_shard_range_weighted(7, 1, 3, big, &lo, &hi) && lo == 3 && hi == 3);
	int64_t huge = (int64_t)1 << 61;
	CHECK(task_shard_range_weighted(huge, 2, 3, big, &lo, &hi) && hi == huge &&
	      lo == (int64_t)((unsigned __int128)huge * (TASK_MAX_WEIGHT + 1) / (2 * TASK_MAX_WEIGHT + 1)));
	// Any weights tile the rows in order (a pseudo-random sweep).
	uint64_t x = 88172645463325252u;
	for (int trial = 0; trial < 200; trial++) {
		int n = 1 + (int)(trial % 9);
		int64_t w[9], total = 0;
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		total = n * 40 + (int64_t)(x % 1000);
		for (int i = 0; i < n; i++) {
			x ^= x << 13, x ^= x >> 7, x ^= x << 17;
			w[i] = 1 + (int64_t)(x % 40);
		}
		prev = 0;
		for (int k = 0; k < n; k++) {
			int ok = task_shard_range_weighted(total, k, n, w, &lo, &hi);
			CHECK(ok && lo == prev && hi > lo);
			prev = hi;
		}
		CHECK(prev == total);
	}
	// Weights in names: their count, form and range; a shard left without rows.
	expect_task_error(m, "hessian:0/2:3", "the weights of K = 2 shards are 2 numbers");
	expect_task_error(m, "hessian:0/2:3+1+1", "the weights of K = 2 shards are 2 numbers");
	expect_task_error(m, "hessian:0/2:3+0", "from 1 to 1000000 joined by '+'");
	expect_task_error(m, "hessian:0/2:03+1", "joined by '+'");
	expect_task_error(m, "hessian:0/2:3,1", "joined by '+'");
	expect_task_error(m, "hessian:0/2:1000001+1", "from 1 to 1000000");
	expect_task_error(m, "hessian:0/2:", "joined by '+'");
	expect_task_error(m, "hessian:0/2x:3+1", "a shard is TASK:k/K");
	expect_task_error(m, "hessian:1/3:100+1+100",
	                  "its weight gives shard 1 none of the 7 basis vectors of hessian");
	CHECK(task_lookup("hessian:1/2:3+1") == task_lookup("hessian"));
	CHECK(task_lookup("hessian:1/2:3") == -1);
	ir_module_free(m);
}

// ---------------------------------------------------------------- 2. the runtime

static fadc_context *
cpu_context(void)
{
	fadc_context_options o = {.device = {FADC_DEVICE_CPU, 0}, .num_threads = 1};
	fadc_context *c;
	if (fadc_context_create(&o, &c)) {
		fprintf(stderr, "context: %s\n", fadc_context_error(NULL));
		exit(1);
	}
	return c;
}

static fadc_model *
open_model(fadc_context *c, const char *path)
{
	fadc_model *m;
	if (fadc_model_open(c, path, 0, &m)) {
		fprintf(stderr, "open %s: %s\n", path, fadc_context_error(c));
		exit(1);
	}
	return m;
}

// Compiles m's tasks into dir/name (f64 models: compute in f64 anyway).
static const char *
compile(const Module *m, const char *const *tasks, int ntasks, const char *name)
{
	static char path[8][512];
	static int k;
	char *p = path[k++ % 8];
	snprintf(p, 512, "%s/%s", dir, name);
	CgOptions o = {.opt_level = -1, .tasks = tasks, .ntasks = ntasks};
	cgu_compile_or_exit(&m, NULL, 1, &o, p, name);
	return p;
}

// The whole task run on model wm (compiled) and on the interpreter: the
// oracles of what the shards assemble.
typedef struct Oracle {
	int n;
	double *comp[16], *interp[16];
	int64_t numel[16];
} Oracle;

static void
oracle_free(Oracle *o)
{
	for (int i = 0; i < o->n; i++)
		free(o->comp[i]), free(o->interp[i]);
}

static void
oracle(const Module *m, fadc_model *wm, const char *task, Oracle *o)
{
	memset(o, 0, sizeof *o);
	int t;
	if (!CHECK(fadc_model_find_task(wm, task, &t) == FADC_OK))
		exit(1);
	fadc_task_info info;
	fadc_task_info_get(wm, t, &info);
	fadc_tensor *out[16] = {0};
	if (!CHECK(info.noutputs <= 16 && fadc_run(wm, t, NULL, 0, out, info.noutputs) == FADC_OK))
		exit(1);
	Tensor *vals = tm_init(m);
	Graph *g;
	Tensor *ref = tm_run_task(m, task, vals, NULL, NULL, 0, &g);
	CHECK((int)g->nout == info.noutputs);
	o->n = info.noutputs;
	for (int i = 0; i < o->n; i++) {
		o->numel[i] = fadc_tensor_numel(out[i]);
		o->comp[i] = malloc(fadc_tensor_bytes(out[i]) + 8);
		fadc_tensor_read(out[i], o->comp[i], fadc_tensor_bytes(out[i]));
		o->interp[i] = malloc(sizeof(double) * (size_t)(o->numel[i] + 1));
		CHECK(ir_numel(&ref[i].shape) == o->numel[i]);
		memcpy(o->interp[i], ref[i].data, sizeof(double) * (size_t)o->numel[i]);
	}
	tm_free_tensors(ref, g->nout);
	ir_graph_free(g);
	tm_free_tensors(vals, m->ndecl);
}

// Task `task` of the artifact at path run as K shards on K fresh CPU
// contexts and assembled on context `destk` of them (-1: another one),
// against the oracle; `direct`: the bytes the layout lets the shards
// write in place (checked against what the run reports).  With nctx in
// 1 .. K - 1, on nctx contexts instead (shard k on context k % nctx:
// several shards per context, queued round by round, with peer_copy
// asked, which CPU contexts ignore).
static void
run_shards(const Module *m, const char *path, const char *task, int K, int destk, int staged,
           int nctx, const Oracle *o, const char *wsuf)
{
	size_t in_place = 0; // the bytes of the slices that are one run of their output (f64)
	for (int k = 0; k < K; k++) {
		char name[128], err[512];
		snprintf(name, sizeof name, "%s:%d/%d%s", task, k, K, wsuf);
		Arena *a = arena_new();
		TaskShard sh;
		Loc el;
		CHECK(task_shard_layout(m->main, name, a, &sh, &el, err, sizeof err));
		for (uint32_t j = 0; j < sh.nout; j++)
			if (sh.out[j].outer == 1 || sh.out[j].cnt == sh.out[j].mid)
				in_place += 8 * (size_t)(sh.out[j].outer * sh.out[j].cnt * sh.out[j].inner);
		arena_free(a);
	}
	fadc_context *ctx[8], *other = destk < 0 ? cpu_context() : NULL;
	fadc_model *mod[8];
	int share = nctx > 0 && nctx < K;
	for (int k = 0; k < K; k++) {
		if (share && k >= nctx) {
			ctx[k] = ctx[k % nctx];
			mod[k] = mod[k % nctx];
			continue;
		}
		ctx[k] = cpu_context();
		mod[k] = open_model(ctx[k], path);
	}
	fadc_context *dest = other ? other : ctx[destk];
	RtShardOptions so = {.staged = staged, .peer_copy = share};
	RtShardPlan *p;
	char err[1024];
	fadc_status s = rt_shard_plan_create(path, task, ctx, mod, K, dest, &so, &p, err, sizeof err);
	if (!CHECK(s == FADC_OK)) {
		fprintf(stderr, "%s K=%d: %s\n", task, K, err);
		exit(1);
	}
	CHECK(rt_shard_plan_noutputs(p) == o->n && rt_shard_plan_ncaller(p) == 0);
	fadc_tensor *out[16] = {0};
	// Twice: the plan's own outputs, then the caller's (made on dest).
	for (int round = 0; round < 2; round++) {
		fadc_tensor *mine[16] = {0};
		for (int i = 0; round == 1 && i < o->n; i++) {
			fadc_tensor_desc d;
			CHECK(rt_shard_plan_output(p, i, &d) == FADC_OK);
			CHECK(fadc_tensor_create(dest, d.dtype, d.rank, d.dim, &mine[i]) == FADC_OK);
			out[i] = mine[i];
		}
		if (!CHECK((s = rt_shard_run(p, NULL, out, o->n)) == FADC_OK)) {
			fprintf(stderr, "%s K=%d: %s\n", task, K, rt_shard_error(p));
			break;
		}
		size_t direct, copied, bytes = 0;
		rt_shard_plan_traffic(p, &direct, &copied);
		for (int i = 0; i < o->n; i++) {
			CHECK(!round || out[i] == mine[i]);
			int64_t n = fadc_tensor_numel(out[i]), same, same_i;
			bytes += fadc_tensor_bytes(out[i]);
			double *v = malloc(sizeof(double) * (size_t)(n + 1));
			CHECK(fadc_tensor_read(out[i], v, fadc_tensor_bytes(out[i])) == FADC_OK);
			double rc = nerr(v, o->comp[i], n, &same), ri = nerr(v, o->interp[i], n, &same_i);
			fadc_tensor_desc d;
			rt_shard_plan_output(p, i, &d);
			if (!CHECK(rc <= TOL && ri <= TOL) || verbose)
				fprintf(stderr, "%s K=%d dest %d%s %s: %.3g from the whole task (%lld of %lld "
				        "identical), %.3g from the interpreter\n", task, K, destk,
				        staged ? " staged" : "", d.name, rc, (long long)same, (long long)n, ri);
			free(v);
		}
		CHECK(direct + copied == bytes && rt_shard_plan_engine_bytes(p) == 0);
		// In place: every slice that is one run of its output (all but
		// jacfwd's columns of a non-scalar forward).
		CHECK(direct == (staged ? 0 : in_place));
		for (int i = 0; i < o->n; i++)
			fadc_tensor_release(mine[i]);
	}
	rt_shard_plan_free(p);
	for (int k = 0; k < K; k++) {
		if (share && k >= nctx)
			continue;
		fadc_model_close(mod[k]);
		fadc_context_destroy(ctx[k]);
	}
	if (other)
		fadc_context_destroy(other);
}

static void
test_runtime(void)
{
	const char *small[] = {"N=3", "K=2"};
	char *t1 = model_text("ppl_simple_reg.ir", 1), *t2 = model_text("ppl_robust_reg.ir", 1),
	     *t3 = text_f64(vec_src);
	Module *ms[3] = {tm_parse("ppl_simple_reg.ir", t1), tm_parse_defs("ppl_robust_reg.ir", t2, small, 2),
	                 tm_parse("vec.ir", t3)};
	const char *names[3] = {"simple64.so", "robust64.so", "vec64.so"};
	const char *task[3][2] = {{"hessian_revrev", NULL}, {"hessian", NULL}, {"jacrev", "jacfwd"}};
	for (int c = 0; c < 3; c++) {
		const char *list[40];
		int n = 0;
		char own[40][48];
		for (int t = 0; t < 2 && task[c][t]; t++) {
			list[n++] = task[c][t];
			for (int K = 1; K <= 3; K++)
				for (int k = 0; k < K; k++) {
					snprintf(own[n], sizeof own[n], "%s:%d/%d", task[c][t], k, K);
					list[n] = own[n];
					n++;
				}
		}
		const char *path = compile(ms[c], list, n, names[c]);
		fadc_context *wc = cpu_context();
		fadc_model *wm = open_model(wc, path);
		for (int t = 0; t < 2 && task[c][t]; t++) {
			Oracle o;
			oracle(ms[c], wm, task[c][t], &o);
			for (int K = 1; K <= 3; K++) {
				run_shards(ms[c], path, task[c][t], K, 0, 0, 0, &o, "");
				run_shards(ms[c], path, task[c][t], K, K - 1, 1, 0, &o, "");
			}
			run_shards(ms[c], path, task[c][t], 2, -1, 0, 0, &o, "");
			// Three shards on two contexts (0 and 2 on the first), each way.
			run_shards(ms[c], path, task[c][t], 3, 1, 0, 2, &o, "");
			run_shards(ms[c], path, task[c][t], 3, 0, 1, 2, &o, "");
			run_shards(ms[c], path, task[c][t], 3, -1, 0, 2, &o, "");
			oracle_free(&o);
		}
		fadc_model_close(wm);
		fadc_context_destroy(wc);
	}
	// An uneven split (robust_reg's 7 rows as 1 + 3 + 2: [0, 1), [1, 4),
	// [4, 7)): the runtime takes the rows from the records and the names'
	// suffix from the artifact, on three contexts and on two.
	const char *ul[] = {"hessian", "hessian:0/3:1+3+2", "hessian:1/3:1+3+2", "hessian:2/3:1+3+2"};
	const char *path = compile(ms[1], ul, 4, "uneven64.so");
	fadc_context *wc = cpu_context();
	fadc_model *wm = open_model(wc, path);
	Oracle o;
	oracle(ms[1], wm, "hessian", &o);
	run_shards(ms[1], path, "hessian", 3, 0, 0, 0, &o, ":1+3+2");
	run_shards(ms[1], path, "hessian", 3, 2, 1, 0, &o, ":1+3+2");
	run_shards(ms[1], path, "hessian", 3, 1, 0, 2, &o, ":1+3+2");
	oracle_free(&o);
	fadc_model_close(wm);
	fadc_context_destroy(wc);
	for (int c = 0; c < 3; c++)
		ir_module_free(ms[c]);
	free(t1), free(t2), free(t3);
}

// ---------------------------------------------------------------- 3. errors (runtime)

static void
expect_plan_error(const char *path, const char *task, fadc_context **ctx, fadc_model **mod, int n,
                  fadc_context *dest, fadc_status want, const char *msg)
{
	RtShardPlan *p = (RtShardPlan *)1;
	char err[1024] = "";
	fadc_status s = rt_shard_plan_create(path, task, ctx, mod, n, dest, NULL, &p, err, sizeof err);
	if (!CHECK(s == want && !p && strstr(err, msg)))
		fprintf(stderr, "plan %s x%d: %s (%s), want %s (%s)\n", task, n, fadc_status_name(s), err,
		        fadc_status_name(want), msg);
}

static void
test_runtime_errors(void)
{
	const char *small[] = {"N=3", "K=2"};
	Module *m = tm_load("ppl_robust_reg.ir", small, 2);
	const char *tasks[] = {"hessian", "hessian:0/2", "hessian:1/2", "jacfwd"};
	const char *a = compile(m, tasks, 4, "errors.so"), *b = compile(m, tasks, 1, "other.so");
	fadc_context *ctx[3] = {cpu_context(), cpu_context(), cpu_context()};
	fadc_model *mod[3] = {open_model(ctx[0], a), open_model(ctx[1], a), open_model(ctx[2], b)};
	expect_plan_error(a, "hessian", ctx, mod, 0, ctx[0], FADC_ERR_ARG, "0 shards: from 1 to 64");
	expect_plan_error(a, "hessian", ctx, mod, 65, ctx[0], FADC_ERR_ARG, "65 shards");
	fadc_model *nullm[2] = {mod[0], NULL};
	expect_plan_error(a, "hessian", ctx, nullm, 2, ctx[0], FADC_ERR_ARG, "shard 1: a NULL model");
	expect_plan_error(a, "hessian", ctx, mod, 2, NULL, FADC_ERR_ARG, "a NULL argument");
	expect_plan_error(a, "hessian", ctx, mod, 1, ctx[0], FADC_ERR_NOT_FOUND,
	                  "has no task 'hessian:0/1' (it has the shards of 'hessian' for 2 shards)");
	expect_plan_error(a, "jacfwd", ctx, mod, 2, ctx[0], FADC_ERR_NOT_FOUND,
	                  "has no task 'jacfwd:0/2' (compile it with --shards 2)");
	fadc_model *mixed[2] = {mod[0], mod[2]};
	expect_plan_error(a, "hessian", ctx, mixed, 2, ctx[0], FADC_ERR_ARG,
	                  "model 1 was not opened from");
	char missing[600];
	snprintf(missing, sizeof missing, "%s/none.so", dir);
	expect_plan_error(missing, "hessian", ctx, mod, 2, ctx[0], FADC_ERR_IO, "none.so");
	// Run-time refusals: a wrong count, a wrong shape; then a good run.
	RtShardPlan *p;
	char err[1024];
	if (CHECK(rt_shard_plan_create(a, "hessian", ctx, mod, 2, ctx[0], NULL, &p, err, sizeof err) ==
	          FADC_OK)) {
		fadc_tensor *out[9] = {0};
		CHECK(rt_shard_plan_noutputs(p) == 9);
		CHECK(rt_shard_run(p, NULL, out, 8) == FADC_ERR_ARG &&
		      strstr(rt_shard_error(p), "the task has 9 outputs, 8 given"));
		int64_t dim[2] = {2, 2};
		CHECK(fadc_tensor_create(ctx[0], FADC_F32, 2, dim, &out[3]) == FADC_OK);
		fadc_tensor *bad = out[3];
		CHECK(rt_shard_run(p, NULL, out, 9) == FADC_ERR_SHAPE &&
		      strstr(rt_shard_error(p), "must be f32"));
		fadc_tensor_release(bad);
		memset(out, 0, sizeof out);
		CHECK(rt_shard_run(p, NULL, out, 9) == FADC_OK && !rt_shard_error(p)[0]);
		rt_shard_plan_free(p);
	}
	for (int k = 0; k < 3; k++) {
		fadc_model_close(mod[k]);
		fadc_context_destroy(ctx[k]);
	}
	ir_module_free(m);
}

// ---------------------------------------------------------------- the format

// Format 12: the shard records of an artifact decode as written, re-encode
// to the same bytes, cannot be written in format 11, and a record that
// disagrees with its task (or a truncated or flipped one) is refused with
// a message, never a crash.
static void
test_format(void)
{
	const char *small[] = {"N=3", "K=2"};
	Module *m = tm_load("ppl_robust_reg.ir", small, 2);
	const char *tasks[] = {"hessian:0/2", "hessian:1/2", "vjp"};
	const char *path = compile(m, tasks, 3, "format.so");
	ArtDesc d;
	uint8_t *db = NULL, *enc = NULL;
	size_t dl = 0, el = 0;
	char err[512];
	if (!CHECK(art_read(path, &d, &db, &dl, err, sizeof err) == ART_READ_OK)) {
		fprintf(stderr, "%s\n", err);
		exit(1);
	}
	CHECK(d.version == ART_FORMAT_VERSION_SHARDS);
	int t0 = -1, t1 = -1;
	for (uint32_t i = 0; i < d.ntask; i++) {
		if (!strcmp(d.task[i].name, "hessian:0/2"))
			t0 = (int)i;
		if (!strcmp(d.task[i].name, "hessian:1/2"))
			t1 = (int)i;
		CHECK(!d.task[i].shard == !strchr(d.task[i].name, ':'));
	}
	if (!CHECK(t0 >= 0 && t1 >= 0))
		exit(1);
	const ArtShard *a = d.task[t0].shard, *b = d.task[t1].shard;
	// 7 basis vectors: rows [0, 4) (nu and 3 of sigma) and [4, 7) (beta).
	CHECK(!strcmp(a->of, "hessian") && a->k == 0 && a->n == 2 && a->lo == 0 && a->hi == 4 &&
	      a->total == 7 && a->nout == 6);
	CHECK(b->k == 1 && b->lo == 4 && b->hi == 7 && b->nout == 3);
	CHECK(b->out[2].rank == 4 && b->out[2].dim[0] == 3 && b->out[2].outer == 1 &&
	      b->out[2].mid == 3 && b->out[2].inner == 3 && b->out[2].off == 0 && b->out[2].cnt == 3);
	CHECK(art_desc_encode(&d, &enc, &el) && el == dl && !memcmp(enc, db, dl));
	free(enc);
	d.version = ART_FORMAT_VERSION_LEVELS;
	CHECK(!art_desc_encode(&d, &enc, &el));
	d.version = 0;
	// A record that disagrees: each field off by one (hi past total).
	int64_t *fields[] = {&d.task[t1].shard->hi, &d.task[t1].shard->out[1].off,
	                     &d.task[t1].shard->out[1].cnt, &d.task[t1].shard->out[1].inner,
	                     &d.task[t1].shard->out[1].dim[0]};
	for (size_t f = 0; f < sizeof fields / sizeof fields[0]; f++) {
		(*fields[f])++;
		ArtDesc x;
		if (CHECK(art_desc_encode(&d, &enc, &el))) {
			CHECK(!art_desc_decode(enc, el, &x, err, sizeof err) &&
			      strstr(err, "the shard record of task 'hessian:1/2' is malformed"));
			free(enc);
		}
		(*fields[f])--;
	}
	d.task[t1].shard->k = 0; // its name says 1
	ArtDesc x;
	if (CHECK(art_desc_encode(&d, &enc, &el))) {
		CHECK(!art_desc_decode(enc, el, &x, err, sizeof err) && strstr(err, "malformed"));
		free(enc);
	}
	d.task[t1].shard->k = 1;
	// Every prefix of the shard section and every flipped byte of it: a
	// message or a descriptor, never a crash.
	size_t start = dl;
	for (size_t i = 0; i + 11 < dl; i++)
		if (!memcmp(db + i, "hessian", 7) && db[i + 7] != '.' && db[i + 7] != ':')
			start = i < start ? i : start; // the first record's `of`
	CHECK(start < dl);
	for (size_t n = start - 8; n < dl; n++) {
		CHECK(!art_desc_decode(db, n, &x, err, sizeof err) && err[0]);
	}
	for (size_t i = start - 8; i < dl; i++) {
		db[i] ^= 0x41;
		if (art_desc_decode(db, dl, &x, err, sizeof err))
			art_desc_free(&x);
		else
			CHECK(err[0]);
		db[i] ^= 0x41;
	}
	art_desc_free(&d);
	free(db);
	ir_module_free(m);
}

int
main(void)
{
	verbose = getenv("FADC_SHARD_VERBOSE") != NULL;
	snprintf(dir, sizeof dir, "/tmp/fadc_shard_XXXXXX");
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	test_passes();
	test_pass_errors();
	test_runtime();
	test_runtime_errors();
	test_format();
	char cmd[300];
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", dir);
	return TU_DONE("test_runtime_shard");
}
