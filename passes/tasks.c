// passes/tasks.c -- the tasks of torch.autograd.functional as pipelines of
// passes over the forward graph (docs/TASKS.md says what each returns).
//
//   vjp  = vjp(f)                      (f(x), v^T J)
//   jvp  = jvp(f)                      (f(x), J v)      true forward mode
//   vhp  = vjp(vjp(f, 1))              (f(x), v^T H)    reverse-over-reverse
//   hvp  = jvp(vjp(f, 1))              (f(x), H v)      forward-over-reverse
//   jacobian, jacrev = vjp(f, 1)       J (scalar f: one row, no batching)
// Each derived graph is simplified.  The pipeline is this one file's list of
// calls; after each pass, PassOpts may dump the graph or its node count.
//   jacfwd          = vmap(jvp(f)) over the basis of the params
//   jacobian of non-scalar f = vmap(vjp(f)) over the basis of the output
//   hessian, hessian_revrev  = vmap(vjp(vjp(f, 1))) over the params' basis
//   hessian_fwdrev  = vmap(jvp(vjp(f, 1))) over the params' basis
// Batched tasks are one graph over all basis vectors, never a loop; over
// the params' basis, one graph of one row block per param where that saves
// work (batch_basis: a block's other params' tangents are zero, and fold).
// A shard `T:k/K` of a batched task is the same pipeline whose vmap runs
// over the rows [lo, hi) of the basis only (pass_vmap_rows), and whose
// outputs are the slices of T's that those rows write (task_shard_layout
// says which: the compiler records it in the artifact, runtime/shard.c
// reassembles T's outputs from it).
#include <stdlib.h>
#include <string.h>

#include "passes.h"

// The names of ir/tasks.def, in its order (fadc_tasks[i] is ir_task[i].name).
const char *const fadc_tasks[] = {
#define TASK(name, ...) #name,
#include "tasks.def"
	NULL};

int
task_lookup(const char *name)
{
	int t, k, n;
	char err[8];
	int r = task_shard_parse(name, &t, &k, &n, err, sizeof err);
	return r > 0 ? t : r < 0 ? -1 : ir_task_lookup(name);
}

typedef struct Pipe {
	const PassOpts *o;
	int stopped;
	const char *task; // derived graphs are named after it (dumps print `def vjp(...)`)
	const TaskShard *sh; // a shard's layout, or NULL: the whole task
} Pipe;

static int
name_in_list(const char *list, const char *name)
{
	size_t n = strlen(name);
	for (const char *p = list; p && *p;) {
		const char *c = strchr(p, ',');
		size_t len = c ? (size_t)(c - p) : strlen(p);
		if (len == n && !strncmp(p, name, n))
			return 1;
		p = c ? c + 1 : NULL;
	}
	return 0;
}

// After a pass: dumps and counts as asked; returns 1 if the pipeline stops.
static int
after(Pipe *p, const char *pass, const Graph *g)
{
	const PassOpts *o = p->o;
	if (!o)
		return 0;
	FILE *f = o->dump ? o->dump : stderr;
	if (o->stats)
		fprintf(f, "# stats: after %-9s %6u nodes\n", pass, g->nnode - 1);
	if (o->print_after_all || name_in_list(o->print_after, pass)) {
		fprintf(f, "# after %s\n", pass);
		ir_print_graph(f, g, g->name);
	}
	if (o->stop_after && !strcmp(o->stop_after, pass))
		p->stopped = 1;
	return p->stopped;
}

static Graph *
step(Pipe *p, const char *pass, Graph *g, Graph *prev)
{
	ir_graph_free(prev);
#ifndef NDEBUG
	// Debug builds check every pass's output (QBE's ssacheck): a pass that
	// built a node its rule would not is caught at the pass, not later.
	char err[512];
	if (g && !ir_verify(g, err, sizeof err)) {
		fprintf(stderr, "fadc: internal error: after pass %s: %s\n", pass, err);
		FADC_ASSERT(0, "a pass built an invalid graph");
	}
#endif
	if (g) {
		if (p->task)
			g->name = arena_strdup(g->arena, p->task);
		after(p, pass, g);
	}
	return g;
}

static Graph *
simplify(Pipe *p, Graph *g)
{
	if (p->stopped)
		return g;
	return step(p, "simplify", pass_simplify(g), g);
}

// The output k of g kept, renamed; the others dropped (DCE removes them).
static void
keep_outputs(Graph *g, const uint32_t *idx, const char *const *names, uint32_t n)
{
	Output *o = arena_alloc_array(g->arena, n + 1, sizeof *o);
	for (uint32_t i = 0; i < n; i++) {
		o[i] = g->out[idx[i]];
		o[i].name = arena_strdup(g->arena, names[i]);
	}
	g->out = o;
	g->nout = g->cout = n;
}

// The inputs a pass added are told by position, never by name: every
// graph of a pipeline keeps the forward's n0 inputs first, in order
// (simplify and DCE keep inputs in order, vjp and jvp copy their operand
// and append theirs), so the added ones are those from n0 on.  A param or
// constant may well be named `t.w` or `v.c` (dotted names are PyTorch's),
// which a test of the "t." prefix would take for a tangent.
static uint8_t *
added_inputs(Graph *g, uint32_t n0)
{
	uint8_t *m = arena_alloc_array(g->arena, g->ninput + 1, 1);
	for (uint32_t i = n0; i < g->ninput; i++)
		m[i] = 1;
	return m;
}

// Renames the added inputs (from n0 on) from prefix `from` to `to`.
static void
rename_inputs(Graph *g, uint32_t n0, const char *from, const char *to)
{
	size_t n = strlen(from);
	for (uint32_t i = n0; i < g->ninput; i++)
		if (!strncmp(g->input[i].name, from, n))
			g->input[i].name = arena_printf(g->arena, "%s%s", to, g->input[i].name + n);
}

// The task's own inputs take their bound names as soon as the pass that
// adds them returns, before its --print-after/--stop-after dump: `v` for
// vjp's one cotangent, `v.<param>` for the tangents of jvp, hvp and vhp,
// the names --v binds, fadc inspect lists and fadc-bench draws.  g may be
// NULL (the pass failed).
static Graph *
bound_names(Graph *g, uint32_t n0, const char *from, const char *to)
{
	if (g)
		rename_inputs(g, n0, from, to);
	return g;
}

static int
is_scalar_forward(const Graph *f)
{
	if (f->nout != 1)
		return 0;
	const Node *o = &f->node[f->out[0].node];
	return ir_dtype_is_float((DType)o->dtype) && f->shape[o->shape].rank == 0;
}

static uint32_t
nparams(const Graph *f)
{
	uint32_t n = 0;
	for (uint32_t i = 0; i < f->ninput; i++)
		n += f->input[i].kind == IN_PARAM;
	return n;
}

static const char *
param_name(const Graph *f, uint32_t k)
{
	for (uint32_t i = 0; i < f->ninput; i++)
		if (f->input[i].kind == IN_PARAM && k-- == 0)
			return f->input[i].name;
	return "?";
}

// f's output, then the n outputs from `first` on, named prefix.<param>.
static Graph *
select_derivs(Graph *g, const Graph *f, uint32_t first, const char *prefix, int with_value)
{
	uint32_t n = nparams(f);
	uint32_t *idx = arena_alloc_array(g->arena, n + 2, sizeof *idx);
	const char **names = arena_alloc_array(g->arena, n + 2, sizeof *names);
	uint32_t k = 0;
	if (with_value) {
		idx[k] = 0;
		names[k++] = f->out[0].name;
	}
	for (uint32_t i = 0; i < n; i++) {
		idx[k] = first + i;
		names[k++] = arena_printf(g->arena, "%s.%s", prefix, param_name(f, i));
	}
	keep_outputs(g, idx, names, k);
	return g;
}

// Rows [off, off + cnt) of x (batch axis first), reshaped to shape s.
static NodeId
rows(Graph *g, NodeId x, int64_t off, int64_t cnt, const Shape *s, Loc loc)
{
	const Shape *xs = ir_shape(g, x);
	Attrs a;
	ir_attrs_default(OP_slice, &a);
	a.a[0].n = a.a[1].n = a.a[2].n = xs->rank;
	for (int i = 0; i < xs->rank; i++) {
		a.a[0].v[i] = i ? 0 : off;
		a.a[1].v[i] = i ? xs->dim[i] : off + cnt;
		a.a[2].v[i] = 1;
	}
	NodeId r = off == 0 && cnt == xs->dim[0] ? x : ir_emit(g, OP_slice, &x, 1, &a, loc);
	return b_reshape(g, r, s, loc);
}

static Shape
concat_shapes(const Shape *a, const Shape *b)
{
	Shape s = *a;
	for (int i = 0; i < b->rank && s.rank < IR_MAXDIM; i++)
		s.dim[s.rank++] = b->dim[i];
	return s;
}

static int64_t
param_numel(const Graph *f)
{
	int64_t n = 0;
	for (uint32_t i = 0; i < f->ninput; i++)
		if (f->input[i].kind == IN_PARAM)
			n += ir_numel(ir_shape(f, f->input[i].node));
	return n;
}

static int
rank_fits(const Graph *f, const Shape *extra, char *err, size_t errlen, const char *task)
{
	for (uint32_t i = 0; i < f->ninput; i++)
		if (f->input[i].kind == IN_PARAM &&
		    ir_shape(f, f->input[i].node)->rank + extra->rank > IR_MAXDIM) {
			snprintf(err, errlen, "task '%s': a block of rank above %d", task, IR_MAXDIM);
			return 0;
		}
	return 1;
}

// A rough measure of a graph's work, to choose between two graphs of the
// same task: the elements each node writes or reads, whichever is more
// (a reduction reads more than it writes), and M·N·K for a matmul.  Inputs,
// constants and reshapes (views) are free.  Only the ratio is used.
static double
graph_work(const Graph *g)
{
	double w = 0;
	for (NodeId n = 1; n < g->nnode; n++) {
		const Node *nd = &g->node[n];
		if (nd->op == OP_input || nd->op == OP_full || nd->op == OP_reshape)
			continue;
		double e = (double)ir_numel(ir_shape(g, n));
		if (nd->op == OP_matmul) {
			const Shape *a = ir_shape(g, ir_in1(g, n, 0));
			w += e * (double)a->dim[a->rank - 1];
			continue;
		}
		for (int i = 0; i < nd->nin; i++) {
			double x = (double)ir_numel(ir_shape(g, ir_in1(g, n, i)));
			e = x > e ? x : e;
		}
		w += e;
	}
	return w;
}

// Param blocks.  Over the params' basis, row r of the identity is a
// tangent of one param only: the others' tangents are zero in it.  Batched
// over all N rows at once (pass_vmap), every param's tangent is dense over
// all N, and so is all it feeds: ppl_robust_reg's Hessian at N = 10^4
// computes X·β̇, [N, 10^4] by K + 1 = 11, and its uses for every sigma row
// too, though β̇ is zero there.  Batched as one row block per param
// (pass_vmap_blocks: block p's rows see their own param's tangent, the
// others' are the symbolic zeros of pass_vmap_rows), those products fold
// away wherever they are zero, and the row-independent part (the forward
// and the gradient at the params) is still built once.  Each block's rows
// are the dense graph's rows computed by the same ops less the terms that
// are exactly zero (x + 0·y is x for finite y), so the values agree within
// rounding.  The blocks cost more nodes (each block its own batched ops),
// so they are taken only when their work (graph_work, after simplify) is at
// most 3/4 of the dense graph's; FADC_NO_PARAM_BLOCKS=1 never takes them,
// FADC_PARAM_BLOCKS=1 always (when there are 2 to PB_MAX_PARAMS params: tests).
static int
env_set(const char *name)
{
	const char *e = getenv(name);
	return e && *e && strcmp(e, "0");
}

// The params' blocks of the basis: one per param, rows [lo, lo + cnt).
static uint32_t
param_blocks(const Graph *f, Arena *a, int64_t **lo, int64_t **cnt)
{
	uint32_t np = nparams(f);
	*lo = arena_alloc_array(a, np + 1, sizeof **lo);
	*cnt = arena_alloc_array(a, np + 1, sizeof **cnt);
	int64_t off = 0;
	for (uint32_t i = 0, k = 0; i < f->ninput; i++)
		if (f->input[i].kind == IN_PARAM) {
			(*lo)[k] = off;
			(*cnt)[k] = ir_numel(ir_shape(f, f->input[i].node));
			off += (*cnt)[k++];
		}
	return np;
}

// vmap of g over the basis of the inputs its last pass added (from f's
// ninput on), all N basis vectors or a shard's rows.  With `blocks` (the
// basis is the params'), it may batch by param blocks instead: then *nblk
// is the number of params and block i's outputs are i * g->nout + k;
// otherwise *nblk is 0 and the outputs are g's, batched over all N rows.
static Graph *
batch_basis(Pipe *p, Graph *g, const Graph *f, int64_t N, int blocks, uint32_t *nblk, Loc *errloc,
            char *err, size_t errlen)
{
	uint8_t *bat = added_inputs(g, f->ninput);
	const TaskShard *sh = p->sh;
	*nblk = 0;
	if (sh) {
		Graph *b = pass_vmap_rows(g, bat, sh->lo, sh->hi - sh->lo, N, errloc, err, errlen);
		return step(p, "vmap", b, g);
	}
	Graph *b = pass_vmap(g, bat, N, 1, errloc, err, errlen);
	uint32_t np = nparams(f);
	// At most PB_MAX_PARAMS blocks: each block is a batched copy of the
	// graph, and resnet18's 62 (its full-size hessian, refused later by
	// --max-task-bytes) took 108 s to build and simplify against 0.1 s
	// dense (tests/cli/cli-task-limit.sh, past its timeout under ASan).
	enum { PB_MAX_PARAMS = 16 };
	if (!b || !blocks || np < 2 || np > PB_MAX_PARAMS || env_set("FADC_NO_PARAM_BLOCKS"))
		return step(p, "vmap", b, g);
	int64_t *lo, *cnt;
	param_blocks(f, g->arena, &lo, &cnt);
	for (uint32_t i = 0; i < np; i++)
		if (cnt[i] == 0) // an empty param has no rows: no block of its own
			return step(p, "vmap", b, g);
	Graph *bb = pass_vmap_blocks(g, bat, (int)np, lo, cnt, N, errloc, err, errlen);
	if (!bb) // the same rules as b's, which was built: cannot fail
		return step(p, "vmap", b, g);
	Graph *sd = pass_simplify(b), *sb = pass_simplify(bb);
	double wd = graph_work(sd), wb = graph_work(sb);
	int take = env_set("FADC_PARAM_BLOCKS") || wb <= 0.75 * wd;
	if (p->o && p->o->stats)
		fprintf(p->o->dump ? p->o->dump : stderr,
		        "# stats: param blocks %u: work %.4g (%u nodes) against %.4g (%u nodes): %s\n", np,
		        wb, sb->nnode - 1, wd, sd->nnode - 1, take ? "taken" : "not taken");
	ir_graph_free(sd);
	ir_graph_free(sb);
	if (take) {
		ir_graph_free(b);
		*nblk = np;
		return step(p, "vmap", bb, g);
	}
	ir_graph_free(bb);
	return step(p, "vmap", b, g);
}

// A shard's outputs, from its layout: slice j is rows [row, row + cnt) of
// b's output first + (p or q), reshaped to [cnt] + the rest; jacfwd's (its
// rows are jvp.<out>'s, output first) then put the output's axes first.
static Graph *
shard_outputs(Pipe *p, Graph *b, uint32_t first, int jacfwd)
{
	const TaskShard *sh = p->sh;
	Output *o = arena_alloc_array(b->arena, sh->nout + 1, sizeof *o);
	for (uint32_t k = 0; k < sh->nout; k++) {
		const TaskShardOut *so = &sh->out[k];
		NodeId x = b->out[first + (uint32_t)(jacfwd ? 0 : so->q >= 0 ? so->q : so->p)].node;
		Shape rs = *ir_shape(b, x); // [B] + the rest
		rs.dim[0] = so->cnt;
		NodeId y = rows(b, x, so->row, so->cnt, &rs, b->node[x].loc);
		if (jacfwd) { // [cnt] + out.shape -> out.shape + [cnt]
			int64_t perm[IR_MAXDIM];
			for (int a = 1; a < rs.rank; a++)
				perm[a - 1] = a;
			perm[rs.rank - 1] = 0;
			y = b_permute(b, y, perm, b->node[x].loc);
		}
		o[k].node = y;
		o[k].name = arena_strdup(b->arena, so->name);
		o[k].writeback = -1;
	}
	b->out = o;
	b->nout = b->cout = sh->nout;
	return simplify(p, b);
}

// Batches graph h over the basis of the inputs its last pass added (one
// per param, after f's), and cuts the Hessian's blocks (p, q), shape
// p.shape + q.shape, out of its outputs first .. first + nparams.
static Graph *
hessian_blocks(Pipe *p, Graph *h, const Graph *f, uint32_t first, Loc *errloc, char *err,
               size_t errlen)
{
	uint32_t nh = h->nout, nblk;
	Graph *b = batch_basis(p, h, f, param_numel(f), 1, &nblk, errloc, err, errlen);
	if (!b || p->stopped)
		return b;
	if (p->sh)
		return shard_outputs(p, b, first, 0);
	uint32_t np = nparams(f);
	Output *o = arena_alloc_array(b->arena, (size_t)np * np + 1, sizeof *o);
	uint32_t k = 0;
	int64_t off = 0;
	for (uint32_t i = 0; i < np; i++) {
		const Shape *ps = ir_shape(f, f->input[0].node);
		for (uint32_t j = 0, c = 0; j < f->ninput; j++)
			if (f->input[j].kind == IN_PARAM && c++ == i)
				ps = ir_shape(f, f->input[j].node);
		for (uint32_t j = 0; j < np; j++) {
			// by blocks: block i's output is H's rows of param i, whole
			NodeId row = b->out[nblk ? i * nh + first + j : first + j].node;
			const Shape *rs = ir_shape(b, row);
			Shape qs = {.rank = rs->rank - 1};
			memcpy(qs.dim, rs->dim + 1, sizeof(int64_t) * (size_t)qs.rank);
			Shape bs = concat_shapes(ps, &qs);
			o[k].node = rows(b, row, nblk ? 0 : off, ir_numel(ps), &bs, b->node[row].loc);
			o[k].name = arena_printf(b->arena, "hessian.%s.%s", param_name(f, i), param_name(f, j));
			o[k++].writeback = -1;
		}
		off += ir_numel(ps);
	}
	b->out = o;
	b->nout = b->cout = k;
	return simplify(p, b);
}

// J of a non-scalar f by reverse mode over the basis of its output:
// jacobian.<p> of shape out.shape + p.shape.
static Graph *
jacrev(Pipe *p, Graph *g, const Graph *f, Loc *errloc, char *err, size_t errlen)
{
	const Shape *os = ir_shape(f, f->out[0].node);
	if (!rank_fits(f, os, err, errlen, "jacrev")) {
		ir_graph_free(g);
		return NULL;
	}
	Graph *gv = step(p, "vjp", pass_vjp(g, errloc, err, errlen), g);
	if (!gv || p->stopped)
		return gv;
	// over the basis of the cotangents
	uint32_t nblk; // the output's basis: one block
	Graph *b = batch_basis(p, gv, f, ir_numel(os), 0, &nblk, errloc, err, errlen);
	if (!b || p->stopped)
		return b;
	if (p->sh)
		return shard_outputs(p, b, 1, 0);
	uint32_t np = nparams(f);
	Output *o = arena_alloc_array(b->arena, np + 1, sizeof *o);
	for (uint32_t i = 0; i < np; i++) {
		NodeId gr = b->out[1 + i].node;
		const Shape *gs = ir_shape(b, gr);
		Shape ps = {.rank = gs->rank - 1};
		memcpy(ps.dim, gs->dim + 1, sizeof(int64_t) * (size_t)ps.rank);
		Shape js = concat_shapes(os, &ps);
		o[i].node = b_reshape(b, gr, &js, b->node[gr].loc);
		o[i].name = arena_printf(b->arena, "jacobian.%s", param_name(f, i));
		o[i].writeback = -1;
	}
	b->out = o;
	b->nout = b->cout = np;
	return simplify(p, b);
}

// J by forward mode over the basis of the params: jvp's output has one row
// per param element; block p, reshaped and with the output's axes first.
static Graph *
jacfwd(Pipe *p, Graph *g, const Graph *f, Loc *errloc, char *err, size_t errlen)
{
	const Shape *os = ir_shape(f, f->out[0].node);
	if (!rank_fits(f, os, err, errlen, "jacfwd")) {
		ir_graph_free(g);
		return NULL;
	}
	Graph *gj = step(p, "jvp", pass_jvp(g, errloc, err, errlen), g);
	if (!gj || p->stopped)
		return gj;
	// over the basis of the tangents
	uint32_t nj = gj->nout, nblk;
	Graph *b = batch_basis(p, gj, f, param_numel(f), 1, &nblk, errloc, err, errlen);
	if (!b || p->stopped)
		return b;
	if (p->sh)
		return shard_outputs(p, b, 1, 1);
	uint32_t np = nparams(f);
	NodeId t = b->out[1].node; // jvp.<out>: [B] + out.shape (by blocks: block 0's rows)
	Output *o = arena_alloc_array(b->arena, np + 1, sizeof *o);
	int64_t off = 0;
	for (uint32_t i = 0, k = 0; i < f->ninput; i++) {
		if (f->input[i].kind != IN_PARAM)
			continue;
		const Shape *ps = ir_shape(f, f->input[i].node);
		Shape ts = concat_shapes(ps, os); // p.shape + out.shape
		if (nblk) // block k's jvp.<out> is J's rows of param k, whole
			t = b->out[k * nj + 1].node;
		NodeId blk = rows(b, t, nblk ? 0 : off, ir_numel(ps), &ts, b->node[t].loc);
		int64_t perm[IR_MAXDIM];
		for (int a = 0; a < os->rank; a++)
			perm[a] = ps->rank + a;
		for (int a = 0; a < ps->rank; a++)
			perm[os->rank + a] = a;
		o[k].node = b_permute(b, blk, perm, b->node[t].loc);
		o[k].name = arena_printf(b->arena, "jacobian.%s", f->input[i].name);
		o[k++].writeback = -1;
		off += ir_numel(ps);
	}
	b->out = o;
	b->nout = b->cout = np;
	return simplify(p, b);
}

int
pass_task_check(const Graph *f, const char *task, Loc *errloc, char *err, size_t errlen)
{
	*errloc = 0;
	if (strchr(task, ':')) { // a shard: T's preconditions, and that T has such shards
		Arena *a = arena_new();
		TaskShard sh;
		int ok = a && task_shard_layout(f, task, a, &sh, errloc, err, errlen);
		arena_free(a);
		return ok;
	}
	int t = task_lookup(task);
	if (t < 0) {
		snprintf(err, errlen, "unknown task '%s'", task);
		return 0;
	}
	if (ir_task[t].scalar && !is_scalar_forward(f)) {
		snprintf(err, errlen, "task '%s' needs forward to return one float scalar (such as f32[])",
		         task);
		if (f->nout)
			*errloc = f->node[f->out[0].node].loc; // what forward returns
		return 0;
	}
	// A Hessian block hessian.<p>.<q> has the rank of p plus the rank of q:
	// the largest is twice the largest param rank.
	for (uint32_t i = 0; !strncmp(task, "hessian", 7) && i < f->ninput; i++) {
		NodeId pn = f->input[i].node;
		int r = ir_shape(f, pn)->rank;
		if (f->input[i].kind == IN_PARAM && 2 * r > IR_MAXDIM) {
			snprintf(err, errlen,
			         "task '%s': the block hessian.%s.%s would have rank %d, above %d",
			         task, f->input[i].name, f->input[i].name, 2 * r, IR_MAXDIM);
			*errloc = f->node[pn].loc; // the param's declaration
			return 0;
		}
	}
	int jac = !strcmp(task, "jacobian") || !strcmp(task, "jacrev") || !strcmp(task, "jacfwd");
	if (jac && (f->nout != 1 || !ir_dtype_is_float((DType)f->node[f->out[0].node].dtype))) {
		snprintf(err, errlen, "task '%s' needs forward to return one float value", task);
		if (f->nout)
			*errloc = f->node[f->out[0].node].loc;
		return 0;
	}
	return 1;
}

static Graph *
derive(Pipe *p, const Graph *f, const char *task, Loc *errloc, char *err, size_t errlen)
{
	if (!pass_task_check(f, task, errloc, err, errlen))
		return NULL;
	int jac = !strcmp(task, "jacobian") || !strcmp(task, "jacrev") || !strcmp(task, "jacfwd");
	// Work on a simplified copy of f, so that derivatives see no dead code.
	Graph *g = step(p, "simplify", pass_simplify(f), NULL);
	if (p->stopped || !strcmp(task, "forward"))
		return g;
	if (!strcmp(task, "vjp")) {
		// One output's cotangent v.<out> is `v` (see bound_names); the
		// cotangents of several keep their v.<out>.
		Graph *gv = pass_vjp(g, errloc, err, errlen);
		for (uint32_t i = f->ninput; gv && f->nout == 1 && i < gv->ninput; i++)
			gv->input[i].name = "v";
		g = step(p, "vjp", gv, g);
		if (!g || p->stopped)
			return g;
		return simplify(p, g);
	}
	if (!strcmp(task, "jvp")) {
		g = step(p, "jvp", bound_names(pass_jvp(g, errloc, err, errlen), f->ninput, "t.", "v."), g);
		if (!g || p->stopped)
			return g;
		return simplify(p, g);
	}
	if (!strcmp(task, "jacfwd"))
		return jacfwd(p, g, f, errloc, err, errlen);
	if (jac && !is_scalar_forward(f))
		return jacrev(p, g, f, errloc, err, errlen);
	// The rest start from the gradient graph: outputs (f, grad.<p>...).
	uint32_t np = nparams(f);
	Graph *gr = step(p, "vjp", pass_vjp_ex(g, NULL, 1, errloc, err, errlen), g);
	if (!gr || p->stopped)
		return gr;
	if (!strcmp(task, "jacobian") || !strcmp(task, "jacrev")) {
		select_derivs(gr, f, 1, "jacobian", 0);
		return simplify(p, gr);
	}
	if (!strcmp(task, "hessian_fwdrev")) {
		gr = simplify(p, gr);
		if (p->stopped)
			return gr;
		Graph *h = step(p, "jvp", pass_jvp(gr, errloc, err, errlen), gr);
		if (!h || p->stopped)
			return h;
		// outputs: f, grad.<p>..., jvp.f, jvp.grad.<q>...: H's rows.
		return hessian_blocks(p, h, f, 2 + np, errloc, err, errlen);
	}
	if (!strcmp(task, "hessian") || !strcmp(task, "hessian_revrev")) {
		gr = simplify(p, gr);
		if (p->stopped)
			return gr;
		uint8_t *sel = arena_alloc_array(gr->arena, gr->nout + 1, 1);
		for (uint32_t k = 1; k < gr->nout; k++)
			sel[k] = 1;
		Graph *h = step(p, "vjp", pass_vjp_ex(gr, sel, 0, errloc, err, errlen), gr);
		if (!h || p->stopped)
			return h;
		// outputs: f, grad.<p>..., grad.<q> (second order)...: H's rows.
		return hessian_blocks(p, h, f, 1 + np, errloc, err, errlen);
	}
	gr = simplify(p, gr);
	if (p->stopped)
		return gr;
	if (!strcmp(task, "hvp")) {
		Graph *h = step(p, "jvp",
		                bound_names(pass_jvp(gr, errloc, err, errlen), f->ninput, "t.", "v."), gr);
		if (!h || p->stopped)
			return h;
		// outputs: f, grad.<p>..., jvp.f, jvp.grad.<p>...
		select_derivs(h, f, 2 + np, "hvp", 1);
		return simplify(p, h);
	}
	// vhp: reverse over the gradients, with cotangents v for them only.
	uint8_t *outs = arena_alloc_array(gr->arena, gr->nout + 1, 1);
	for (uint32_t k = 1; k < gr->nout; k++)
		outs[k] = 1;
	Graph *h = step(p, "vjp",
	                bound_names(pass_vjp_ex(gr, outs, 0, errloc, err, errlen), f->ninput,
	                            "v.grad.", "v."),
	                gr);
	if (!h || p->stopped)
		return h;
	// outputs: f, grad.<p>..., grad.<p>... (the second-order ones last)
	select_derivs(h, f, 1 + np, "vhp", 1);
	return simplify(p, h);
}

// Derived names (grad.<p>, jvp.<out>, v, v.<out>, t.<p>, hessian.<p>.<q>, ...)
// share one namespace with forward's own; a forward output or declaration
// already named so would give the task two outputs or two inputs of one
// name, and `fadc run --out` would write one file over the other.  Returns
// 0 with the clash's place (forward's output or declaration of that name).
static int
unique_names(const Graph *f, const Graph *g, const char *task, Loc *errloc, char *err,
             size_t errlen)
{
	for (uint32_t k = 0; k < g->nout; k++)
		for (uint32_t j = 0; j < k; j++) {
			if (strcmp(g->out[j].name, g->out[k].name))
				continue;
			const char *nm = g->out[k].name;
			snprintf(err, errlen,
			         "task '%s' would have two outputs named '%s': forward's output and the "
			         "derivative fadc names so; rename the output (`return ... as NAME`)",
			         task, nm);
			for (uint32_t i = 0; i < f->nout; i++)
				if (!strcmp(f->out[i].name, nm))
					*errloc = f->node[f->out[i].node].loc;
			return 0;
		}
	// Inputs are bound by kind as well as name (a param through --params, an
	// argument, tangent or cotangent through --v), so a param `v` beside
	// vjp's cotangent `v` is no clash; two arguments of one name are.
	for (uint32_t k = 0; k < g->ninput; k++)
		for (uint32_t j = 0; j < k; j++) {
			if (strcmp(g->input[j].name, g->input[k].name) ||
			    (g->input[j].kind == IN_ARG) != (g->input[k].kind == IN_ARG))
				continue;
			const char *nm = g->input[k].name;
			snprintf(err, errlen,
			         "task '%s' would have two inputs named '%s': forward's argument and the "
			         "tangent or cotangent fadc names so; rename the argument",
			         task, nm);
			for (uint32_t i = 0; i < f->ninput; i++)
				if (!strcmp(f->input[i].name, nm))
					*errloc = f->node[f->input[i].node].loc;
			return 0;
		}
	return 1;
}

// ---------------------------------------------------------------- shards

// A decimal number without sign or leading zero, at most 9 digits, at
// *p; -1 if there is none.
static long
shard_number(const char **p)
{
	const char *s = *p;
	long v = 0;
	int n = 0;
	while (s[n] >= '0' && s[n] <= '9' && n < 10)
		v = v * 10 + (s[n++] - '0');
	if (n == 0 || n > 9 || (n > 1 && s[0] == '0'))
		return -1;
	*p = s + n;
	return v;
}

// The weights after the second ':' of shard `name` (at q): n positive
// decimal numbers up to TASK_MAX_WEIGHT joined by '+' (not ',', which
// separates the tasks of --tasks), into w[0..n) when w is not NULL.
static int
shard_weights(const char *name, const char *q, int n, int64_t *w, char *err, size_t errlen)
{
	for (int i = 0; i < n; i++) {
		long v = shard_number(&q);
		if (v < 1 || v > TASK_MAX_WEIGHT || (i + 1 < n ? *q != '+' : *q != 0)) {
			snprintf(err, errlen, "'%s': the weights of K = %d shards are %d numbers from 1 to %d "
			         "joined by '+' (hessian:0/2:3+2)", name, n, n, TASK_MAX_WEIGHT);
			return 0;
		}
		if (w)
			w[i] = v;
		q += *q == '+';
	}
	return 1;
}

int
task_shard_parse(const char *name, int *task, int *k, int *n, char *err, size_t errlen)
{
	const char *c = strchr(name, ':');
	if (!c)
		return 0;
	char base[32];
	size_t bl = (size_t)(c - name);
	int t = -1;
	if (bl < sizeof base) {
		memcpy(base, name, bl);
		base[bl] = 0;
		t = ir_task_lookup(base);
	}
	if (t < 0) {
		snprintf(err, errlen, "unknown task '%.*s' in the shard '%s' (TASK:k/K)",
		         (int)(bl < 40 ? bl : 40), name, name);
		return -1;
	}
	const char *q = c + 1;
	long kk = shard_number(&q), nn = -1;
	if (kk >= 0 && *q == '/') {
		q++;
		nn = shard_number(&q);
	}
	if (kk < 0 || nn < 0 || (*q && *q != ':')) {
		snprintf(err, errlen, "'%s': a shard is TASK:k/K, k and K decimal numbers without sign "
		         "or leading zeros", name);
		return -1;
	}
	if (nn < 1 || nn > TASK_MAX_SHARDS || kk >= nn) {
		snprintf(err, errlen, "'%s': shard k of K needs 0 <= k < K <= %d", name, TASK_MAX_SHARDS);
		return -1;
	}
	if (*q && !shard_weights(name, q + 1, (int)nn, NULL, err, errlen))
		return -1;
	*task = t;
	*k = (int)kk;
	*n = (int)nn;
	return 1;
}

// As even as can be: the first total mod n shards have one row more.
void
task_shard_range(int64_t total, int k, int n, int64_t *lo, int64_t *hi)
{
	int64_t q = total / n, r = total % n;
	*lo = k * q + (k < r ? k : r);
	*hi = *lo + q + (k < r);
}

// Shard i starts at row floor(total W_i / W), W_i the weights of the
// shards before it and W all of them: integers only, so the compiler and
// every reader of the name agree on the rows to the last one.  (The
// product fits: total < 2^62 and W <= 64 TASK_MAX_WEIGHT < 2^26, in 128
// bits.)  0 when a shard would get no row.
int
task_shard_range_weighted(int64_t total, int k, int n, const int64_t *w, int64_t *lo, int64_t *hi)
{
	int64_t W = 0, before = 0;
	for (int i = 0; i < n; i++) {
		W += w[i];
		before += i < k ? w[i] : 0;
	}
	*lo = (int64_t)((unsigned __int128)total * (uint64_t)before / (uint64_t)W);
	*hi = (int64_t)((unsigned __int128)total * (uint64_t)(before + w[k]) / (uint64_t)W);
	return *hi > *lo;
}

// Whether task t over f is batched, and over what: the params' basis
// (jacfwd, the Hessians), the output's (jacobian, jacrev of a non-scalar
// forward); 0 for the others.
int64_t
task_basis_size(const Graph *f, int t)
{
	if (t < 0 || t >= IR_TASK_COUNT || !f->nout)
		return 0;
	const char *name = fadc_tasks[t];
	if (!strncmp(name, "hessian", 7) || !strcmp(name, "jacfwd"))
		return param_numel(f);
	if ((!strcmp(name, "jacobian") || !strcmp(name, "jacrev")) && !is_scalar_forward(f))
		return ir_numel(ir_shape(f, f->out[0].node));
	return 0;
}

int
task_shard_layout(const Graph *f, const char *name, Arena *a, TaskShard *s, Loc *errloc,
                  char *err, size_t errlen)
{
	*errloc = 0;
	memset(s, 0, sizeof *s);
	int r = task_shard_parse(name, &s->task, &s->k, &s->n, err, errlen);
	if (r == 0)
		snprintf(err, errlen, "'%s' is not a shard (TASK:k/K)", name);
	if (r <= 0)
		return 0;
	const char *tn = fadc_tasks[s->task];
	if (!pass_task_check(f, tn, errloc, err, errlen))
		return 0;
	s->total = task_basis_size(f, s->task);
	if (s->total == 0) {
		int jac = !strncmp(tn, "jac", 3);
		snprintf(err, errlen, "task '%s': %s is not batched%s, so it has no shards (%s)", name, tn,
		         jac ? " for this model" : "",
		         jac ? "forward returns a scalar: its Jacobian is one gradient"
		             : "only jacobian and jacrev of a non-scalar forward, jacfwd and the Hessians "
		               "are");
		if (jac && f->nout) // what forward returns
			*errloc = f->node[f->out[0].node].loc;
		return 0;
	}
	if (s->n > s->total) {
		snprintf(err, errlen, "task '%s': %s has %lld basis vectors for this model, fewer than %d "
		         "shards", name, tn, (long long)s->total, s->n);
		return 0;
	}
	const char *wq = strchr(strchr(name, ':') + 1, ':'); // the weights, if any
	if (!wq)
		task_shard_range(s->total, s->k, s->n, &s->lo, &s->hi);
	else {
		int64_t w[TASK_MAX_SHARDS];
		shard_weights(name, wq + 1, s->n, w, err, errlen); // (checked by the parse)
		if (!task_shard_range_weighted(s->total, s->k, s->n, w, &s->lo, &s->hi)) {
			snprintf(err, errlen, "task '%s': its weight gives shard %d none of the %lld basis "
			         "vectors of %s for this model (rows %lld .. %lld)", name, s->k,
			         (long long)s->total, tn, (long long)s->lo, (long long)s->hi);
			return 0;
		}
	}
	uint32_t np = nparams(f);
	const Shape *os = ir_shape(f, f->out[0].node);
	int64_t nout = ir_numel(os);
	const Shape **ps = arena_alloc_array(a, np + 1, sizeof *ps);
	int64_t *base = arena_alloc_array(a, np + 1, sizeof *base); // p's first basis row
	int64_t off = 0;
	for (uint32_t i = 0, k = 0; i < f->ninput; i++)
		if (f->input[i].kind == IN_PARAM) {
			ps[k] = ir_shape(f, f->input[i].node);
			base[k++] = off;
			off += ir_numel(ps[k - 1]);
		}
	s->out = arena_alloc_array(a, (size_t)np * np + 1, sizeof *s->out);
	int hess = !strncmp(tn, "hessian", 7), fwd = !strcmp(tn, "jacfwd");
	for (uint32_t i = 0; i < np; i++) {
		int64_t n = ir_numel(ps[i]);
		// The rows of the shard that are p's basis vectors (jacrev: all).
		int64_t lo = s->lo, hi = s->hi;
		if (hess || fwd) {
			lo = lo > base[i] ? lo : base[i];
			hi = hi < base[i] + n ? hi : base[i] + n;
			if (hi <= lo)
				continue; // no row of p in this shard: no slice
		}
		for (uint32_t j = 0; j < (hess ? np : 1); j++) {
			TaskShardOut *o = &s->out[s->nout++];
			o->p = (int32_t)i;
			o->q = hess ? (int32_t)j : -1;
			o->cnt = hi - lo;
			o->row = lo - s->lo;
			if (hess) {
				o->name = arena_printf(a, "hessian.%s.%s", param_name(f, i), param_name(f, j));
				o->full = concat_shapes(ps[i], ps[j]);
				o->outer = 1, o->mid = n, o->inner = ir_numel(ps[j]), o->off = lo - base[i];
			} else {
				o->name = arena_printf(a, "jacobian.%s", param_name(f, i));
				o->full = concat_shapes(os, ps[i]);
				if (fwd)
					o->outer = nout, o->mid = n, o->inner = 1, o->off = lo - base[i];
				else
					o->outer = 1, o->mid = nout, o->inner = n, o->off = lo;
			}
		}
	}
	return 1;
}

// The task, derived; then every scan's carry-independent work out of its
// loop (passes/scan_hoist.c), for jvp's, vjp's and vmap's scans alike, so
// both backends lower only the truly recurrent part per step.
Graph *
pass_task(const Graph *f, const char *task, const PassOpts *o, Loc *errloc, char *err, size_t errlen)
{
	Pipe p = {.o = o, .task = task};
	*errloc = 0;
	TaskShard sh;
	Arena *sa = NULL; // the shard's layout, for as long as the pipeline runs
	const char *base = task;
	if (strchr(task, ':')) {
		if (!(sa = arena_new()))
			FADC_ASSERT(0, "out of memory");
		if (!task_shard_layout(f, task, sa, &sh, errloc, err, errlen)) {
			arena_free(sa);
			return NULL;
		}
		p.sh = &sh;
		base = fadc_tasks[sh.task];
	}
	Graph *g = derive(&p, f, base, errloc, err, errlen);
	arena_free(sa); // (NULL: nothing) the graphs hold copies of the names
	p.sh = NULL;
	if (g && !p.stopped && !unique_names(f, g, task, errloc, err, errlen)) {
		ir_graph_free(g);
		return NULL;
	}
	int scans = 0; // (nested scans are in their outer scan's body)
	for (NodeId n = 1; g && n < g->nnode; n++)
		scans |= g->node[n].op == OP_scan;
	if (!scans || p.stopped || (o && o->no_scan_hoist))
		return g;
	ScanHoistStats st = {0};
	g = step(&p, "scan_hoist", pass_scan_hoist(g, &st), g);
	if (o && o->stats && (st.hoisted || st.sunk || st.invariant || st.carries))
		fprintf(o->dump ? o->dump : stderr,
		        "# stats: scan_hoist: %u per-step products before their loops, %u after, %u invariant, "
		        "%u carries out of their loops\n",
		        st.hoisted, st.sunk, st.invariant, st.carries);
	return simplify(&p, g);
}
