// tests/unit/test_codegen_kir.c -- the kernel IR, fusion and memory plans
// (codegen/kir.c, fuse.c, lower.c, plan.c), without LLVM.
//
//   - the index simplifier: coordinates of a row-major flat index fold
//     back to loop variables; what cannot fold keeps its division;
//   - hash-consing: equal expressions have equal ids, commutative
//     operands one order;
//   - fusion: an elementwise chain and its reduction are one kernel; a value
//     with arithmetic read through a broadcast or by a matmul gets its own;
//   - memory plans of every task of both ppl models: buffers whose
//     lifetimes overlap never share bytes, and reuse makes the arena
//     smaller than the sum;
//   - an op the kernel IR does not support is a diagnostic naming the op,
//     the task and the source position.
#include <stdlib.h>
#include <string.h>

#include "codegen.h"
#include "frontend.h"
#include "passes.h"
#include "testmodel.h"
#include "testutil.h"

static Module *
load(const char *file, int small)
{
	const char *defs[] = {"N=3", "K=2"};
	return tm_load(file, defs, small ? 2 : 0);
}

static void
test_simplifier(void)
{
	KProgram *p = kir_program_new("t", DT_F32);
	KxId v0 = kx_var(p, 0, 4), v1 = kx_var(p, 1, 3);
	KxId e = kx_iadd(p, kx_imul(p, v0, 3), v1); // flat index of [4, 3]
	CHECK(kx_imod(p, kx_idiv(p, e, 3), 4) == v0);
	CHECK(kx_imod(p, e, 3) == v1);
	CHECK(kx_idiv(p, e, 12) == kx_iconst(p, 0));
	CHECK(kx_idiv(p, e, 3) == v0);
	// Sums are canonical: the same sum built two ways is one node.
	CHECK(kx_iadd(p, v1, kx_imul(p, v0, 3)) == e);
	CHECK(kx_iadd(p, kx_iadd(p, v1, kx_iconst(p, 2)), kx_imul(p, v0, 3)) ==
	      kx_iadd(p, e, kx_iconst(p, 2)));
	// A size-1 axis has no variable.
	CHECK(kx_var(p, 2, 1) == kx_iconst(p, 0));
	// Reshape [2, 6] -> [4, 3]: the row of element (w0, w1) is
	// (6 w0 + w1) / 3 = 2 w0 + w1 / 3, whose range [0, 3] needs no modulo.
	KxId w0 = kx_var(p, 0, 2), w1 = kx_var(p, 1, 6);
	KxId f = kx_iadd(p, kx_imul(p, w0, 6), w1);
	KxId row = kx_imod(p, kx_idiv(p, f, 3), 4);
	CHECK(kx(p, row)->op == KX_IADD);
	CHECK(row == kx_iadd(p, kx_imul(p, w0, 2), kx_idiv(p, w1, 3)));
	int64_t lo, hi;
	CHECK(kx_range(p, row, &lo, &hi) && lo == 0 && hi == 3);
	// Ranges are remembered per program: a DAG that uses each level twice
	// (min(e, e + 1), 48 deep) was 2^48 walks for its range, and the
	// builders ask for ranges as they go.  The min of a value and that
	// value plus one is the value: [0, 99] throughout.
	KxId deep = kx_var(p, 0, 100);
	for (int i = 0; i < 48; i++)
		deep = kx_imin(p, deep, kx_iadd(p, deep, kx_iconst(p, 1)));
	CHECK(kx_range(p, deep, &lo, &hi) && lo == 0 && hi == 99);
	// Strides of a loop variable in an index (the matmul loop order).
	int64_t c;
	CHECK(kx_affine_coef(p, e, 0, &c) && c == 3);
	CHECK(kx_affine_coef(p, e, 1, &c) && c == 1);
	CHECK(kx_affine_coef(p, e, 2, &c) && c == 0);
	CHECK(!kx_affine_coef(p, row, 1, &c)); // w1 / 3 is not affine in w1
	// Whatever cannot fold keeps a division: (w1 / 4) stays.
	CHECK(kx(p, kx_idiv(p, w1, 4))->op == KX_IDIV);
	// Clamps of a variable already in range vanish.
	CHECK(kx_iclamp(p, v0, 0, 3) == v0);
	CHECK(kx_iclamp(p, v0, 0, 2) != v0);
	// Floor semantics of constants.
	CHECK(kx_idiv(p, kx_iconst(p, -7), 2) == kx_iconst(p, -4));
	CHECK(kx_imod(p, kx_iconst(p, -7), 2) == kx_iconst(p, 1));
	// Hash-consing of values: commutative operands, one id.
	uint32_t b = kir_buf_add(p, KB_IN, 0, DT_F32, &(Shape){2, {4, 3}}, 0);
	KxId x = kx_load(p, b, e), y = kx_load(p, b, kx_iconst(p, 0));
	CHECK(kx_bin(p, KX_ADD, x, y) == kx_bin(p, KX_ADD, y, x));
	CHECK(kx_bin(p, KX_SUB, x, y) != kx_bin(p, KX_SUB, y, x));
	CHECK(kx_un(p, KX_EXP, x) == kx_un(p, KX_EXP, x));
	// f32 constants are rounded to float; -0 and 0 are different constants.
	CHECK(kx(p, kx_const(p, 0.1, DT_F32))->f == (double)0.1f);
	CHECK(kx_const(p, -0.0, DT_F32) != kx_const(p, 0.0, DT_F32));
	kir_program_free(p);
}

// The number of kernels of task `task` of a model in text.
static int
nkernels_of(const char *text, const char *task, const char **what)
{
	Module *m = tm_parse("fuse.ir", text);
	char err[512];
	Loc loc;
	Graph *g = pass_task(m->main, task, NULL, &loc, err, sizeof err);
	KProgram *p = g ? cg_lower(g, task, DT_F32, err, sizeof err) : NULL;
	int n = -1;
	if (p) {
		n = (int)p->nk;
		if (what)
			*what = p->nk ? p->k[0].what : "";
	} else
		fprintf(stderr, "%s\n", err);
	kir_program_free(p);
	ir_graph_free(g);
	ir_module_free(m);
	return n;
}

// The number of kernels of the forward graph of a model in text.
static int
nkernels(const char *text, const char **what)
{
	return nkernels_of(text, "forward", what);
}

static void
test_fusion(void)
{
	const char *what = NULL;
	// exp, mul, add and the sum: one reduction kernel.
	CHECK(nkernels("const x: f32[4, 3] = uniform(0, 1, seed=1)\n"
	               "def forward() -> f32[] { return sum(exp(x) * 2 + 1) }\n",
	               &what) == 1);
	CHECK_STR(what, "sum");
	// A broadcast input costs nothing: one kernel.
	CHECK(nkernels("const a: f32[4, 1] = uniform(0, 1, seed=1)\n"
	               "const b: f32[4, 5] = uniform(0, 1, seed=2)\n"
	               "def forward() -> f32[4, 5] { return a + b * 3 }\n",
	               NULL) == 1);
	// exp(a) read through a broadcast would be computed 5 times per
	// element: it gets a kernel of its own.
	CHECK(nkernels("const a: f32[4, 1] = uniform(0, 1, seed=1)\n"
	               "const b: f32[4, 5] = uniform(0, 1, seed=2)\n"
	               "def forward() -> f32[4, 5] { return exp(a) + b }\n",
	               &what) == 2);
	CHECK_STR(what, "elementwise");
	// A matmul reads each element of its left operand once per column.
	CHECK(nkernels("const x: f32[4, 3] = uniform(0, 1, seed=1)\n"
	               "const w: f32[3, 2] = uniform(0, 1, seed=2)\n"
	               "def forward() -> f32[4, 2] { return (x * 2) @ w }\n",
	               NULL) == 2);
	// ... but with one column it is read once: fused.
	CHECK(nkernels("const x: f32[4, 3] = uniform(0, 1, seed=1)\n"
	               "const w: f32[3, 1] = uniform(0, 1, seed=2)\n"
	               "def forward() -> f32[4, 1] { return (x * 2) @ w }\n",
	               &what) == 1);
	CHECK_STR(what, "matmul");
	// Layout ops are index maps: a transpose, a slice and a pad of an
	// input fuse into the reduction that reads them.
	CHECK(nkernels("const x: f32[4, 3] = uniform(0, 1, seed=1)\n"
	               "def forward() -> f32[] { return sum(exp(transpose(x, 0, 1)[0:2, 1:3])) }\n",
	               &what) == 1);
	CHECK_STR(what, "sum");
	// A cheap value (codegen/fuse.c, fill_cheap: light arithmetic over one
	// full-size value; the per-column mean is small) read by two sums is
	// recomputed by each: the mean, the two sums and their add, no kernel
	// for d.
	CHECK(nkernels("const x: f32[64, 8] = uniform(0, 1, seed=1)\n"
	               "def forward() -> f32[] {\n"
	               "  d = x - mean(x, [0], keepdim=1)\n"
	               "  return sum(d * d) + sum(d * 3 + 1)\n}\n",
	               &what) == 4);
	CHECK_STR(what, "mean");
	// Over two full-size values it would read both per reader: stored.
	CHECK(nkernels("const x: f32[64, 8] = uniform(0, 1, seed=1)\n"
	               "const y: f32[64, 8] = uniform(0, 1, seed=2)\n"
	               "def forward() -> f32[] {\n"
	               "  d = x - y\n"
	               "  return sum(d * d) + sum(d * 3 + 1)\n}\n",
	               &what) == 4);
	CHECK_STR(what, "elementwise");
	// max_pool is one kernel, its maxima written as its result; the vjp's
	// max_pool_grad takes them from the forward's max_pool and adds its
	// argmax: forward max_pool, the sum; vjp max_pool, argmax, grad.
	const char *pool = "param x: f32[2, 3, 9, 9] = uniform(0, 1, seed=1)\n"
	                   "def forward() -> f32[] { return sum(max_pool2d(x, 3, stride=2, padding=1)) }\n";
	CHECK(nkernels(pool, &what) == 2);
	CHECK_STR(what, "max_pool.max");
	CHECK(nkernels_of(pool, "vjp", &what) == 4);
	CHECK_STR(what, "max_pool.max");
	// exp is no light op: stored.
	CHECK(nkernels("const x: f32[64, 8] = uniform(0, 1, seed=1)\n"
	               "def forward() -> f32[] {\n"
	               "  d = exp(x)\n"
	               "  return sum(d * d) + sum(d * 3 + 1)\n}\n",
	               &what) == 4);
	CHECK_STR(what, "elementwise");
}

static void
test_plans(void)
{
	const char *models[] = {"ppl_simple_reg.ir", "ppl_robust_reg.ir"};
	int64_t peak = 0, naive = 0;
	for (int mi = 0; mi < 2; mi++)
		for (int small = 0; small < 2; small++) {
			Module *m = load(models[mi], small);
			for (int t = 0; fadc_tasks[t]; t++) {
				char err[512];
				Loc loc;
				Graph *g = pass_task(m->main, fadc_tasks[t], NULL, &loc, err, sizeof err);
				CHECK(g != NULL);
				if (!g)
					continue;
				KProgram *p = cg_lower(g, fadc_tasks[t], DT_F32, err, sizeof err);
				CHECK(p != NULL);
				if (!p) {
					fprintf(stderr, "%s %s: %s\n", models[mi], fadc_tasks[t], err);
					ir_graph_free(g);
					continue;
				}
				cg_plan(p);
				CHECK(p->arena_bytes <= p->naive_bytes);
				for (uint32_t a = 0; a < p->nbuf; a++)
					for (uint32_t b = a + 1; b < p->nbuf; b++) {
						const KBuf *x = &p->buf[a], *y = &p->buf[b];
						if (x->kind != KB_TMP || y->kind != KB_TMP)
							continue;
						CHECK(x->first >= 0 && y->first >= 0);
						CHECK(x->offset % 64 == 0 && x->offset + x->bytes <= p->arena_bytes);
						int live = !(x->last < y->first || y->last < x->first);
						int share = x->offset < y->offset + (y->bytes ? y->bytes : 1) &&
						            y->offset < x->offset + (x->bytes ? x->bytes : 1);
						if (live && share)
							fprintf(stderr, "%s %s: b%u and b%u overlap\n", models[mi],
							        fadc_tasks[t], a, b);
						CHECK(!(live && share));
					}
				// Every kernel writes a buffer that is written by it only.
				for (uint32_t k = 0; k < p->nk; k++)
					CHECK(p->buf[p->k[k].out].kind != KB_IN);
				peak += p->arena_bytes;
				naive += p->naive_bytes;
				kir_program_free(p);
				ir_graph_free(g);
			}
			ir_module_free(m);
		}
	printf("memory plans of both ppl models, every task, both sizes: %lld bytes at peak, %lld "
	       "without reuse\n",
	       (long long)peak, (long long)naive);
	CHECK(peak < naive);
}

// linear_sum_assignment is a host kernel: the cost converted to an F64
// buffer by a kernel, then one call with a scratch buffer in the arena.
static void
test_host(void)
{
	Module *m = tm_parse("lsa.ir", "const c: f32[3, 4] = uniform(0, 1, seed=1)\n"
	                                 "def forward() -> f32[] {\n"
	                                 "  return sum(one_hot(linear_sum_assignment(c * 2), n=4))\n"
	                                 "}\n");
	char err[512] = "";
	KProgram *p = cg_lower(m->main, "forward", DT_F32, err, sizeof err);
	CHECK(p != NULL);
	if (!p) {
		fprintf(stderr, "lsa: %s\n", err);
		ir_module_free(m);
		return;
	}
	cg_plan(p);
	int nhost = 0;
	for (uint32_t k = 0; k < p->nk; k++) {
		const KKernel *kk = &p->k[k];
		if (!kk->host)
			continue;
		nhost++;
		CHECK(kk->host == KH_ASSIGN);
		CHECK(p->buf[kk->hin].dtype == DT_F64 && p->buf[kk->hin].shape.rank == 2);
		CHECK(p->buf[kk->hin].shape.dim[0] == 3 && p->buf[kk->hin].shape.dim[1] == 4);
		CHECK(p->buf[kk->out].dtype == DT_I64 && ir_numel(&p->buf[kk->out].shape) == 3);
		CHECK(p->buf[kk->hwork].kind == KB_TMP);
		CHECK(p->buf[kk->hwork].bytes >= (int64_t)ir_assignment_work(3, 4));
		// The cost is written by the kernel just before, the scratch by none.
		CHECK(k > 0 && p->k[k - 1].out == kk->hin);
		for (uint32_t j = 0; j < p->nk; j++)
			CHECK(p->k[j].out != kk->hwork);
		// Operand, scratch and result share no bytes.
		const KBuf *a = &p->buf[kk->hin], *b = &p->buf[kk->hwork];
		CHECK(a->offset + a->bytes <= b->offset || b->offset + b->bytes <= a->offset);
	}
	CHECK(nhost == 1);
	// On CUDA the host kernel is a host step between launches: no code of
	// its own, a launch record with the cost's rows and columns and the
	// arguments {out, cost} (docs/ARTIFACT.md, launch kind 1).
	char *src = cg_cuda_print(p, NULL, err, sizeof err);
	CHECK(src != NULL && strstr(src, "linear_sum_assignment") == NULL);
	free(src);
	int nstep = 0;
	for (uint32_t li = 0; li < cg_cuda_launches(p); li++) {
		CgCudaKernel ck;
		CHECK(cg_cuda_kernel(p, li, &ck));
		if (ck.host) {
			nstep++;
			const KKernel *hk = NULL;
			for (uint32_t k = 0; k < p->nk; k++)
				if (p->k[k].host)
					hk = &p->k[k];
			CHECK(ck.host == KH_ASSIGN && !strcmp(ck.name, "linear_sum_assignment") &&
			      ck.points == 3 && ck.grid == 4 && ck.narg == 2 && hk &&
			      ck.buf[0] == hk->out && ck.buf[1] == hk->hin);
		}
		free(ck.name);
		free(ck.buf);
	}
	CHECK(nstep == 1);
	kir_program_free(p);
	ir_module_free(m);
}

// scan is a loop over its body's kernels: loops nest (an inner loop's
// kernels lie inside its parent's, the parent has the smaller index), and
// in the memory plan a buffer read or written both inside and outside a
// loop (carries, sequences, stacked outputs) shares no bytes with anything
// live during the loop.
static void
test_loops(void)
{
	Module *m = tm_parse("nested.ir",
	    "param w: f32[2] = uniform(0.3, 0.8, seed=7)\n"
	    "param xs: f32[3, 4, 2] = normal(0, 0.5, seed=8)\n"
	    "def inner(c: f32[2], x: f32[2], w: f32[2]) -> (f32[2], f32[2]) {\n"
	    "  n = tanh(c * w + x)\n  return n, n\n}\n"
	    "def outer(c: f32[2], x: f32[4, 2], w: f32[2]) -> (f32[2], f32[2]) {\n"
	    "  c2, ys = scan(inner, c, x, w, ncarry=1, nxs=1, reverse=1)\n  return c2 * w, sum(ys, 0)\n}\n"
	    "def forward() {\n  c, ys = scan(outer, w, xs, w, ncarry=1, nxs=1)\n"
	    "  return sum(c) + sum(ys * ys)\n}\n");
	for (int t = 0; t < 2; t++) {
		const char *task = t ? "vjp" : "forward";
		char err[512] = "";
		Loc el;
		Graph *g = pass_task(m->main, task, NULL, &el, err, sizeof err);
		CHECK(g != NULL);
		KProgram *p = g ? cg_lower(g, task, DT_F32, err, sizeof err) : NULL;
		CHECK(p != NULL);
		if (!p) {
			fprintf(stderr, "nested %s: %s\n", task, err);
			ir_graph_free(g);
			continue;
		}
		cg_plan(p);
		// forward: the outer and the inner scan; vjp: also the forward
		// scans saving carries and the reverse ones (with forward inner
		// scans inside the reverse outer one).
		CHECK(t ? p->nloop >= 4 : p->nloop == 2);
		for (uint32_t l = 0; l < p->nloop; l++) {
			const KLoop *lp = &p->loop[l];
			CHECK(lp->begin < lp->end && lp->end <= p->nk);
			CHECK(lp->trip == 3 || lp->trip == 4);
			if (lp->parent >= 0) {
				const KLoop *pp = &p->loop[lp->parent];
				CHECK(lp->parent < (int)l && pp->begin <= lp->begin && lp->end <= pp->end);
			}
			for (uint32_t k = 0; k < p->nloop; k++) // siblings are disjoint or nested
				if (k != l) {
					const KLoop *o = &p->loop[k];
					CHECK(o->end <= lp->begin || lp->end <= o->begin ||
					      (o->begin <= lp->begin && lp->end <= o->end) ||
					      (lp->begin <= o->begin && o->end <= lp->end));
				}
		}
		for (uint32_t l = 0; l < p->nloop; l++)
			for (uint32_t b = 0; b < p->nbuf; b++) {
				const KBuf *kb = &p->buf[b];
				if (kb->kind != KB_TMP || kb->first < 0)
					continue;
				int in = kb->first < (int)p->loop[l].end && kb->last >= (int)p->loop[l].begin;
				int only = kb->first >= (int)p->loop[l].begin && kb->last < (int)p->loop[l].end;
				if (!in || only)
					continue;
				// Live through the loop: nothing touched in the loop shares its bytes.
				CHECK(kb->first <= (int)p->loop[l].begin && kb->last >= (int)p->loop[l].end - 1);
				for (uint32_t c = 0; c < p->nbuf; c++) {
					const KBuf *o = &p->buf[c];
					if (c == b || o->kind != KB_TMP || o->first < 0 || o->last < (int)p->loop[l].begin ||
					    o->first >= (int)p->loop[l].end)
						continue;
					CHECK(kb->offset + kb->bytes <= o->offset || o->offset + o->bytes <= kb->offset ||
					      !kb->bytes || !o->bytes);
				}
			}
		// On CUDA each non-empty loop is a `for` over its step counter
		// (test_codegen_scan compiles such sources with NVRTC).
		char *src = cg_cuda_print(p, NULL, err, sizeof err);
		CHECK(src != NULL);
		int nfor = 0, nloops = 0;
		for (const char *q = src ? strstr(src, "for (long long s") : NULL; q;
		     q = strstr(q + 1, "for (long long s"))
			nfor++;
		for (uint32_t l = 0; l < p->nloop; l++)
			nloops += p->loop[l].end > p->loop[l].begin;
		CHECK(nfor == nloops);
		free(src);
		kir_program_free(p);
		ir_graph_free(g);
	}
	ir_module_free(m);
}

static void
test_print(void)
{
	Module *m = tm_parse("print.ir", "const x: f32[4, 3] = uniform(0, 1, seed=1)\n"
	                                   "def forward() -> f32[4] { return sum(exp(x), 1) }\n");
	char err[512];
	KProgram *p = cg_lower(m->main, "forward", DT_F32, err, sizeof err);
	CHECK(p != NULL);
	if (p) {
		cg_plan(p);
		char *buf = NULL;
		size_t len = 0;
		FILE *f = open_memstream(&buf, &len);
		kir_print(f, p);
		fclose(f);
		CHECK(strstr(buf, "kernel k0: b1 = sum") != NULL);
		CHECK(strstr(buf, "for v0 < 4;sum over v1 < 3") != NULL);
		CHECK(strstr(buf, "exp") != NULL);
		CHECK(strstr(buf, "acc += x") != NULL);
		free(buf);
	}
	kir_program_free(p);
	ir_module_free(m);
}

int
main(void)
{
	test_simplifier();
	test_fusion();
	test_plans();
	test_host();
	test_loops();
	test_print();
	return TU_DONE("test_codegen_kir");
}
