// tests/unit/test_codegen_scan_hoist.c -- passes/scan_hoist.c: the work of
// a scan that does not need its carries, out of the loop, against the loop
// as the derivatives built it.
//
// For each module and task (forward, vjp, jvp, vhp, hvp, jacobian: forward
// scans, the vjp's saving and reverse scans, jvp scans, vmap's batched
// scans) the task is derived without the rewrite (PassOpts.no_scan_hoist),
// then rewritten (pass_scan_hoist, then simplify, as passes/tasks.c
// does); the float64 interpreter runs both on the same inputs, and every
// output must agree within a normalized error of 1e-12 (the same ops on
// the same values; a flattened product keeps each dot product's order, so
// measured 0 to ~1e-16).  The counts of products moved are pinned per
// module and task: a rewrite that silently stops happening fails here.
// Then every task is compiled (CPU) and run against the interpreter on the
// un-hoisted graph (cg_check, whose oracle is that graph), within 1e-12.
// deepspeech at its reduced sizes: the interpreter on both graphs for vjp
// and jvp (compiled: test_codegen_zoo, the same oracle).
#include <stdlib.h>
#include <string.h>

#include "codegen_util.h"

// An LSTM whose input projection x_t wx is inside the step: hoisted before
// the loop (forward); in the vjp the forward's projection is hoisted, the
// weights' adjoints x_tᵀ dz, h_tᵀ dz are products over the stacked steps
// after the reverse loop, where dz whᵀ stays (the recurrent product).
// Per-sample lengths through a mask.
static const char lstm[] =
    "param wx: f64[2, 8] = normal(0, 0.4, seed=4)\n"
    "param wh: f64[2, 8] = normal(0, 0.4, seed=5)\n"
    "param xs: f64[4, 3, 2] = normal(0, 1, seed=6)\n"
    "const lens: f64[3, 1] = full(3) - iota(shape=[3, 1], axis=0, dtype=f64)\n"
    "const mask: bool[4, 3, 1] = cast(iota(shape=[4, 3, 1], axis=0, dtype=f64), dtype=f64) < "
    "broadcast(lens, shape=[4, 3, 1])\n"
    "def lstm_step(h: f64[3, 2], c: f64[3, 2], x: f64[3, 2], m: bool[3, 1], wx: f64[2, 8], wh: "
    "f64[2, 8]) -> (f64[3, 2], f64[3, 2], f64[3, 2]) {\n"
    "  z = x @ wx + h @ wh\n"
    "  i = sigmoid(z[:, 0:2])\n  f = sigmoid(z[:, 2:4])\n  g = tanh(z[:, 4:6])\n  o = sigmoid(z[:, 6:8])\n"
    "  c2 = f * c + i * g\n  h2 = o * tanh(c2)\n"
    "  return where(m, h2, h), where(m, c2, c), where(m, h2, 0.0)\n}\n"
    "def forward() {\n"
    "  h, c, ys = scan(lstm_step, zeros([3, 2], f64), zeros([3, 2], f64), xs, mask, wx, wh, ncarry=2, "
    "nxs=2)\n"
    "  return sum(ys * ys) + sum(h) + sum(c * c)\n}\n";

// A hoisted value used both inside the loop and after it: p = x_t wi
// feeds the carry and is a per-step output; a reverse scan, whose output
// projection y_t = n wo (the carry's own value times an invariant) is
// sunk after the loop; wo wi, a product of invariants, computed once.
static const char both[] =
    "param wi: f64[3, 3] = normal(0, 0.5, seed=1)\n"
    "param wh: f64[3, 3] = normal(0, 0.5, seed=2)\n"
    "param wo: f64[3, 2] = normal(0, 0.5, seed=3)\n"
    "param xs: f64[5, 2, 3] = normal(0, 1, seed=4)\n"
    "def cell(c: f64[2, 3], x: f64[2, 3], wi: f64[3, 3], wh: f64[3, 3], wo: f64[3, 2]) -> "
    "(f64[2, 3], f64[2, 3], f64[2, 2], f64[2, 3]) {\n"
    "  p = x @ wi\n  n = tanh(c @ wh + p + x @ (wi @ wh))\n"
    "  return n, p, n @ wo, p * p\n}\n"
    "def forward() {\n"
    "  c, ps, ys, qs = scan(cell, xs[0], xs, wi, wh, wo, ncarry=1, nxs=1, reverse=1)\n"
    "  return sum(ps * ys[:, :, 0:1]) + sum(c * c) + sum(ys) + sum(qs)\n}\n";

// Nothing to move: every value of the step reads the carry, so the
// forward comes out as it went in.  (Its jvp drops the value scan's dead
// per-step output.)  (Its vjp has work to move:
// the weight's adjoint c_tᵀ dz reads the saved carry, a sequence there.)
static const char none[] =
    "param w: f64[3, 3] = normal(0, 0.5, seed=1)\n"
    "param c0: f64[2, 3] = normal(0, 1, seed=2)\n"
    "const xs: f64[4, 2, 3] = normal(0, 1, seed=3)\n"
    "def cell(c: f64[2, 3], x: f64[2, 3], w: f64[3, 3]) -> (f64[2, 3], f64[2, 3]) {\n"
    "  n = tanh(c @ w + c * x)\n  return n, n * x\n}\n"
    "def forward() {\n  c, ys = scan(cell, c0, xs, w, ncarry=1, nxs=1)\n"
    "  return sum(c) + sum(ys * ys)\n}\n";

// Nested scans: the inner step's x_t w reads only the outer step's slice,
// so rewriting the inner loop first makes it a product of the outer step,
// which then leaves the outer loop too.
static const char nested[] =
    "param w: f64[2, 2] = normal(0, 0.5, seed=7)\n"
    "param xs: f64[3, 4, 1, 2] = normal(0, 0.5, seed=8)\n"
    "def inner(c: f64[1, 2], x: f64[1, 2], w: f64[2, 2]) -> (f64[1, 2], f64[1, 2]) {\n"
    "  n = tanh(c * 0.5 + x @ w)\n  return n, n\n}\n"
    "def outer(c: f64[1, 2], x: f64[4, 1, 2], w: f64[2, 2]) -> (f64[1, 2], f64[1, 2]) {\n"
    "  c2, ys = scan(inner, c, x, w, ncarry=1, nxs=1)\n  return c2 @ w, sum(ys, 0)\n}\n"
    "def forward() {\n  c, ys = scan(outer, xs[0, 0], xs, w, ncarry=1, nxs=1)\n"
    "  return sum(c) + sum(ys * ys)\n}\n";

// Accumulators: the running loss c' = c + Σ n x (of the step's new h)
// leaves the carries, its terms a per-step output summed after the loop,
// c_T = c_0 + Σ_t f_t; its adjoint in the vjp's reverse loop is passed
// through unchanged, an invariant, and the forward scan no longer stacks
// the loss carries nothing reads, so it is an accumulator there too.  With a mask (per-sample lengths) the
// where() keeps the loss a carry.
static const char accum[] =
    "param w: f64[3, 3] = normal(0, 0.5, seed=1)\n"
    "param xs: f64[5, 2, 3] = normal(0, 1, seed=4)\n"
    "const mask: bool[5, 2, 1] = iota(shape=[5, 2, 1], axis=0, dtype=f64) < "
    "broadcast(3 + iota(shape=[2, 1], axis=0, dtype=f64), shape=[5, 2, 1])\n"
    "def cell(h: f64[2, 3], loss: f64[], l2: f64[2, 1], x: f64[2, 3], m: bool[2, 1], w: f64[3, 3]) "
    "-> (f64[2, 3], f64[], f64[2, 1], f64[2, 3]) {\n"
    "  n = tanh(h @ w + x)\n"
    "  return where(m, n, h), loss + sum(n * x), where(m, l2 + sum(n, 1, keepdim=1), l2), n\n}\n"
    "def forward() {\n"
    "  h, l, l2, ys = scan(cell, xs[0], sum(xs[0]) * 0.5, zeros([2, 1], f64), xs, mask, w, ncarry=3, "
    "nxs=2)\n"
    "  return l + sum(h) + sum(l2 * l2) + sum(ys)\n}\n";

// A per-step output of invariants only (w w, the same every step: an
// invariant operand computed once, its copies stacked by the loop) and
// one of a sequence only (x_t w: hoisted, the output is that sequence).
static const char invout[] =
    "param w: f64[3, 3] = normal(0, 0.5, seed=1)\n"
    "param xs: f64[4, 2, 3] = normal(0, 1, seed=2)\n"
    "def cell(c: f64[2, 3], x: f64[2, 3], w: f64[3, 3]) -> (f64[2, 3], f64[3, 3], f64[2, 3]) {\n"
    "  return tanh(c @ w), w @ w, x @ w\n}\n"
    "def forward() {\n  c, ws, ps = scan(cell, xs[0], xs, w, ncarry=1, nxs=1)\n"
    "  return sum(c) + sum(ws * ws) + sum(ps * ps)\n}\n";

static const char *const tasks[] = {"forward", "vjp", "jvp", "vhp", "hvp", "jacobian"};
enum { NTASK = 6 };

// The task's graph as derived (no rewrite), or NULL (a task the module
// has not).
static Graph *
derived(const Module *m, const char *task)
{
	PassOpts po = {.no_scan_hoist = 1};
	char err[1024];
	Loc loc;
	return pass_task(m->main, task, &po, &loc, err, sizeof err);
}

// Runs g in the interpreter: declarations from vals, other inputs
// deterministic pseudo-random values (the same for the same graph inputs).
static Tensor *
run(const Module *m, const Graph *g, Tensor *vals)
{
	Tensor *in = calloc(g->ninput + 1, sizeof *in), *extra = calloc(g->ninput + 1, sizeof *extra);
	Tensor *out = calloc(g->nout + 1, sizeof *out);
	for (uint32_t k = 0; k < g->ninput; k++) {
		int d = ir_module_find_decl(m, g->input[k].name);
		if (d >= 0 && g->input[k].kind != IN_ARG) {
			in[k] = vals[d];
			continue;
		}
		NodeId n = g->input[k].node;
		CHECK(ir_tensor_alloc(&extra[k], (DType)g->node[n].dtype, ir_shape(g, n)));
		for (int64_t j = 0; j < ir_numel(ir_shape(g, n)); j++)
			extra[k].data[j] = ir_rand_uniform(77 + k, 0, (uint64_t)j) - 0.5;
		in[k] = extra[k];
	}
	char err[512] = "";
	int ok = ir_interp(g, in, out, 0, err, sizeof err);
	CHECK(ok);
	if (!ok)
		fprintf(stderr, "interp: %s\n", err);
	for (uint32_t k = 0; k < g->ninput; k++)
		ir_tensor_free(&extra[k]);
	free(extra);
	free(in);
	return out;
}

static void
free_out(const Graph *g, Tensor *t)
{
	for (uint32_t k = 0; k < g->nout; k++)
		ir_tensor_free(&t[k]);
	free(t);
}

static char *
printed(const Graph *g)
{
	char *buf = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&buf, &n);
	ir_print_graph(f, g, g->name);
	fclose(f);
	return buf;
}

// The most products reading a carry (directly or through the step's other
// nodes) in one loop body of g: the recurrent products a step must run in
// sequence.  Fission (passes/scan.c) leaves jvp's and hvp's tangent loops
// one each, as the primal's.
static int
max_recurrent(const Graph *g)
{
	int most = 0;
	for (NodeId n = 1; n < g->nnode; n++) {
		if (g->node[n].op != OP_scan)
			continue;
		Attrs a;
		ir_attrs_get(g, n, &a);
		const Graph *b = g->sub[a.a[0].i];
		uint8_t *dep = calloc(b->nnode, 1);
		int cnt = 0;
		for (int64_t k = 0; k < a.a[1].i; k++)
			dep[b->input[k].node] = 1;
		for (NodeId m = 1; m < b->nnode; m++) {
			for (int j = 0; j < b->node[m].nin; j++)
				dep[m] |= dep[ir_in1(b, m, j)];
			cnt += dep[m] && b->node[m].op == OP_matmul;
		}
		free(dep);
		most = cnt > most ? cnt : most;
	}
	return most;
}

// want[t] = {hoisted, sunk} for tasks[t] (-1: not checked); with same,
// where nothing moves the graph must come out as it went in.
static void
check_module(const char *name, Module *m, const int want[NTASK][2], int ntask, int same)
{
	Tensor *vals = calloc(m->ndecl + 1, sizeof *vals);
	char err[512];
	CHECK(ir_module_init(m, NULL, NULL, vals, 0, err, sizeof err));
	for (int t = 0; t < ntask; t++) {
		Graph *g0 = derived(m, tasks[t]);
		if (!g0)
			continue;
		ScanHoistStats st = {0};
		Graph *h = pass_scan_hoist(g0, &st);
		Graph *g1 = pass_simplify(h);
		ir_graph_free(h);
		CHECK(ir_verify(g1, err, sizeof err));
		Tensor *a = run(m, g0, vals), *b = run(m, g1, vals);
		CHECK(g0->nout == g1->nout);
		double worst = 0;
		for (uint32_t k = 0; k < g0->nout && k < g1->nout; k++) {
			IrErr e = {0};
			CHECK(ir_numel(&a[k].shape) == ir_numel(&b[k].shape));
			for (int64_t j = 0; j < ir_numel(&a[k].shape); j++)
				ir_err_add(&e, a[k].data[j], b[k].data[j]);
			if (ir_err_value(&e) > worst)
				worst = ir_err_value(&e);
		}
		CHECK(worst <= 1e-12);
		printf("%s %s: %u products hoisted before, %u after, %u invariant, %u carries out; "
		       "error %.3g\n",
		       name, tasks[t], st.hoisted, st.sunk, st.invariant, st.carries, worst);
		int rec = max_recurrent(g1);
		printf("%s %s: at most %d recurrent products in a loop\n", name, tasks[t], rec);
		// (Before fission jvp's and hvp's loops had 3: h W, ḣ W, h Ẇ; the
		// nested module's outer hvp loop 9, its vjp's 4.)
		CHECK(rec <= (strcmp(name, "nested-proj") ? 1 : 4));
		if (!strcmp(name, "accumulate") && t <= 2) // forward, vjp, jvp
			// vjp: and the saved loss; jvp: the primal scan's and the
			// tangent scan's (which carries only the tangents)
			CHECK(st.carries == (uint32_t)(t == 2 ? 2 : t + 1));
		if (want[t][0] >= 0)
			CHECK((int)st.hoisted == want[t][0] && (int)st.sunk == want[t][1]);
		if (same && want[t][0] == 0 && want[t][1] == 0 && st.invariant == 0 && st.carries == 0) {
			// Nothing to move: the graph as it was (rewriting rebuilt it).
			char *p0 = printed(g0), *p1 = printed(g1);
			CHECK(!strcmp(p0, p1));
			if (strcmp(p0, p1))
				fprintf(stderr, "%s %s: the graph changed:\n%s\n---\n%s\n", name, tasks[t], p0, p1);
			free(p0);
			free(p1);
		}
		free_out(g0, a);
		free_out(g1, b);
		ir_graph_free(g0);
		ir_graph_free(g1);
	}
	for (uint32_t i = 0; i < m->ndecl; i++)
		ir_tensor_free(&vals[i]);
	free(vals);
}

static void
check_text(const char *name, const char *src, const int want[NTASK][2])
{
	Module *m = cgu_parse(name, src);
	if (!m)
		return;
	check_module(name, m, want, NTASK, 1);
	// Compiled: every task against the interpreter on the loops as derived.
	static const char *const all[] = {"all"};
	CgOptions o = {.tasks = all, .ntasks = 1, .opt_level = 1};
	CgCheck c = {1e-12, 1e-6, 0, 0};
	cgu_check(m, &o, &c, name, name);
	ir_module_free(m);
}

int
main(void)
{
	// {hoisted, sunk} per task: forward, vjp, jvp, vhp, hvp, jacobian.
	// (jvp: the tangent products of the step, tx_t wx and x_t twx, and since
	// the tangent scan reads the primal carries and per-step outputs as
	// sequences (passes/scan.c, "Fission") h_t wh and h_t twh too, and the
	// primal's x_t wx; vjp:
	// x_t wx before, x̄_t = dz wxᵀ, x_tᵀ dz and h_tᵀ dz after.)
	static const int w_lstm[NTASK][2] = {{1, 0}, {1, 3}, {6, 0}, {7, 4}, {8, 6}, {1, 3}};
	static const int w_both[NTASK][2] = {{3, 1}, {5, 8}, {14, 2}, {25, 12}, {30, 16}, {5, 8}};
	static const int w_none[NTASK][2] = {{0, 0}, {-1, -1}, {-1, -1}, {-1, -1}, {-1, -1}, {-1, -1}};
	static const int w_nested[NTASK][2] = {{2, 0}, {4, 2}, {10, 0}, {15, 8}, {24, 6}, {4, 2}};
	check_text("lstm-proj", lstm, w_lstm);
	check_text("both", both, w_both);
	check_text("none", none, w_none);
	check_text("nested-proj", nested, w_nested);
	static const int w_acc[NTASK][2] = {{0, 0}, {-1, -1}, {-1, -1}, {-1, -1}, {-1, -1}, {-1, -1}};
	check_text("accumulate", accum, w_acc);
	static const int w_inv[NTASK][2] = {{1, 0}, {-1, -1}, {-1, -1}, {-1, -1}, {-1, -1}, {-1, -1}};
	check_text("invariant-output", invout, w_inv);
	// deepspeech at its reduced sizes (bench/bench.yaml): its input
	// projections are already outside its LSTM steps and scan_vjp already
	// takes the weights' adjoints out of the reverse loops, so in the vjp
	// no product moves (pinned at 0: a change here is a change of its
	// loops); the rewrite drops the sequences the reverse steps no longer
	// read.  In the jvp each of the 10 tangent scans reads h_t from its
	// primal scan: h_t W_hhᵀ and h_t Ẇ_hhᵀ leave the loop (20); in the hvp
	// the forward tangent scans' h_t Ẇ_hhᵀ (h_t W_hhᵀ is the vjp's saved
	// residual) and the reverse ones' dz_t Ẇ_hh (dz_t the primal reverse
	// scan's per-step output): 20.
	static const char *const ds[] = {"N=3", "FREQ=9", "FRAMES=16", "LEN_LO=8", "LEN_SPAN=8",
	                                 "C=2", "HID=4",  "S=2"};
	const char *root = getenv("FADC_SOURCE_DIR");
	char path[4096];
	snprintf(path, sizeof path, "%s/models/deepspeech.ir", root ? root : ".");
	FeOptions fo = {.diag = stderr, .defines = ds, .ndefines = 8};
	Module *m = fe_parse_file(path, &fo);
	CHECK(m != NULL);
	if (m) {
		static const int w_ds[NTASK][2] = {{0, 0}, {0, 0}, {20, 0}, {0, 0}, {20, 0}};
		check_module("deepspeech", m, w_ds, 5, 0);
		ir_module_free(m);
	}
	return TU_DONE("test_codegen_scan_hoist");
}
