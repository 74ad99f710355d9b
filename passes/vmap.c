// passes/vmap.c -- batching: a graph run for B values of some inputs at
// once, as one graph with a leading batch axis (JAX's vmap).
//
// Batched values carry the batch on axis 0.  Each node with a batched
// operand is rebuilt by its op's rule: elementwise ops broadcast their
// unbatched operands to the batch, axis attributes shift by one, layout
// ops gain a leading axis, matmul broadcasts its batch axes, windowed ops
// fold the batch into N (conv and its adjoints with a batched weight: into
// the channels and groups).  Nodes with no batched operand are copied as
// they are.  The rules are found from the ops' rows of ir/ops.def, as
// vjp's are, so an op without one fails the build.  With `basis`, the
// batched inputs are not inputs at all but the rows of an identity matrix,
// split over them in input order: row b is the b-th basis vector of their
// concatenated, flattened space.  That turns jvp into jacfwd, vjp into
// jacrev and hvp/vhp into the Hessian, in one graph, without a loop of
// calls.  A shard of such a task (passes/tasks.c, `hessian:k/K`) is the
// same graph over rows [lo, lo + B) of the N x N identity
// (pass_vmap_rows): its basis is built as those rows, never the whole
// identity masked, so it costs B/N of the full graph.  pass_vmap_blocks
// builds several such row blocks in one graph, the unbatched nodes once
// (passes/tasks.c's param blocks).
#include <string.h>

#include "passes.h"

typedef struct Vmap {
	const Graph *f;
	Graph *g;
	NodeId *map;
	uint8_t *bat; // f id -> batched
	int64_t B;
	Loc *errloc;
	char *err;
	size_t errlen;
	int failed;
} Vmap;

static void
fail(Vmap *v, NodeId n, const char *what)
{
	if (v->failed)
		return;
	v->failed = 1;
	*v->errloc = v->f->node[n].loc;
	snprintf(v->err, v->errlen, "cannot batch %s: %s", ir_op(v->f->node[n].op)->name, what);
}

static Shape
batched_shape(int64_t B, const Shape *s)
{
	Shape t = {.rank = s->rank + 1};
	t.dim[0] = B;
	memcpy(t.dim + 1, s->dim, sizeof(int64_t) * (size_t)s->rank);
	return t;
}

// Operand i of f's node n in the new graph, batched (broadcast if it was not).
static NodeId
operand_b(Vmap *v, NodeId n, int i)
{
	NodeId x = ir_in1(v->f, n, i);
	NodeId m = v->map[x];
	if (v->bat[x])
		return m;
	Shape t = batched_shape(v->B, ir_shape(v->f, x));
	return b_broadcast(v->g, m, &t, v->f->node[n].loc);
}

static void
shift_axes(AttrVal *x)
{
	for (int i = 0; i < x->n; i++)
		x->v[i]++;
}

// Prepends an axis to per-axis lists (slice, pad): full range / no pad.
static void
prepend(AttrVal *x, int64_t v)
{
	memmove(x->v + 1, x->v, sizeof(int64_t) * (size_t)x->n);
	x->v[0] = v;
	x->n++;
}

// conv and its adjoints with the batch folded into the channels: an NC...
// operand (B, N, C, L...) is viewed as (N, B·C, L...) and a weight
// (B, C_out, C_in/G, k...) as (B·C_out, C_in/G, k...); with B·G groups,
// group b·G + j of the folded op is group j of batch entry b (its input
// channels b·C + j·C_in/G + i, its output channels b·C_out + j·C_out/G + o),
// so one op computes every entry.  Results are unfolded the same way.

// (B, N, C, L...) -> (N, B·C, L...)
static NodeId
fold_channels(Graph *g, NodeId x, Loc loc)
{
	const Shape *s = ir_shape(g, x);
	int64_t perm[IR_MAXDIM];
	for (int i = 0; i < s->rank; i++)
		perm[i] = i;
	perm[0] = 1, perm[1] = 0;
	Shape t = {.rank = s->rank - 1};
	t.dim[0] = s->dim[1];
	t.dim[1] = s->dim[0] * s->dim[2];
	for (int i = 3; i < s->rank; i++)
		t.dim[i - 1] = s->dim[i];
	return b_reshape(g, b_permute(g, x, perm, loc), &t, loc);
}

// (N, B·C, L...) -> (B, N, C, L...)
static NodeId
unfold_channels(Graph *g, NodeId y, int64_t B, Loc loc)
{
	const Shape *s = ir_shape(g, y);
	Shape t = {.rank = s->rank + 1};
	t.dim[0] = s->dim[0];
	t.dim[1] = B;
	t.dim[2] = s->dim[1] / B;
	for (int i = 2; i < s->rank; i++)
		t.dim[i + 1] = s->dim[i];
	int64_t perm[IR_MAXDIM];
	for (int i = 0; i < t.rank; i++)
		perm[i] = i;
	perm[0] = 1, perm[1] = 0;
	return b_permute(g, b_reshape(g, y, &t, loc), perm, loc);
}

// (B, C_out, ...) -> (B·C_out, ...)
static NodeId
merge_lead(Graph *g, NodeId w, Loc loc)
{
	const Shape *s = ir_shape(g, w);
	Shape t = {.rank = s->rank - 1};
	t.dim[0] = s->dim[0] * s->dim[1];
	for (int i = 2; i < s->rank; i++)
		t.dim[i - 1] = s->dim[i];
	return b_reshape(g, w, &t, loc);
}

// With one group and an unbatched input x, conv(x, w) and
// conv_weight_grad(x, g) need no copies of x: the B·C_out folded output
// channels all read the same C_in input channels.
static NodeId
batch_groups(Vmap *v, NodeId n, Attrs *a)
{
	const Graph *f = v->f;
	Graph *g = v->g;
	int op = f->node[n].op;
	Loc loc = f->node[n].loc;
	int kg = ir_attr_index(op, "groups");
	int shared = op != OP_conv_input_grad && a->a[kg].i == 1 && !v->bat[ir_in1(f, n, 0)];
	NodeId x = shared ? v->map[ir_in1(f, n, 0)] : operand_b(v, n, 0), y = operand_b(v, n, 1), in[2];
	if (!shared)
		a->a[kg].i *= v->B;
	if (op == OP_conv_weight_grad) { // (x, g): both NC...; the result a weight
		in[0] = shared ? x : fold_channels(g, x, loc);
		in[1] = fold_channels(g, y, loc);
		NodeId r = ir_emit(g, op, in, 2, a, loc);
		Shape out = batched_shape(v->B, ir_shape(f, n));
		return b_reshape(g, r, &out, loc);
	}
	// conv(x, w) and conv_input_grad(g, w): NC... operand, then weight.
	in[0] = shared ? x : fold_channels(g, x, loc);
	in[1] = merge_lead(g, y, loc);
	return unfold_channels(g, ir_emit(g, op, in, 2, a, loc), v->B, loc);
}

// Swaps the first two axes.
static NodeId
swap01(Graph *g, NodeId x, Loc loc)
{
	int64_t perm[IR_MAXDIM];
	int r = ir_shape(g, x)->rank;
	for (int i = 0; i < r; i++)
		perm[i] = i;
	perm[0] = 1, perm[1] = 0;
	return b_permute(g, x, perm, loc);
}

// The batching rules, one per op, named vmap_<op> and found from the op's
// row of ops.def (vmap_rule[] below), as vjp's rules are: a row without its
// rule fails the build and the error names the op, where a switch would
// fail only when a model first reached it.  A rule gets a node n of f with
// at least one batched operand and n's attributes, which it may change, and
// returns n's batched value in g.  A family shares one function under each
// op's name (#define vmap_logsumexp vmap_reduce).

// Every operand batched, the op and its attributes as they are: the rule of
// every op that treats leading axes alike, whatever their number.  That is
// every elementwise row (the table gives them this rule by row kind) and
// the ops defined below as it.
static NodeId
vmap_map(Vmap *v, NodeId n, Attrs *a)
{
	const Node *nd = &v->f->node[n];
	NodeId in[256];
	for (int i = 0; i < nd->nin; i++)
		in[i] = operand_b(v, n, i);
	return ir_emit(v->g, nd->op, in, nd->nin, a, nd->loc);
}
// Elementwise, though not rows of the elementwise kinds.
#define vmap_where vmap_map
#define vmap_cast vmap_map
#define vmap_not vmap_map
// Placements: identities on values.
#define vmap_to_host vmap_map
#define vmap_to_device vmap_map
// Its new axis is the last.
#define vmap_one_hot vmap_map
// The samplers are elementwise in their (broadcast) parameters: each batch
// entry draws at other counters, so the entries' draws are independent.
#define vmap_uniform vmap_map
#define vmap_normal vmap_map
#define vmap_gamma vmap_map
#define vmap_exponential vmap_map
#define vmap_bernoulli vmap_map

// Ops without operands never have a batched one: pass_vmap copies them.
static NodeId
vmap_nullary(Vmap *v, NodeId n, Attrs *a)
{
	(void)v, (void)n, (void)a;
	FADC_ASSERT(0, "an op without operands reached batching");
	return 0;
}
#define vmap_input vmap_nullary
#define vmap_full vmap_nullary
#define vmap_iota vmap_nullary
#define vmap_kaiming_normal vmap_nullary
#define vmap_kaiming_uniform vmap_nullary

// Reductions over a list of axes (slot 0): the axes shift past the batch.
static NodeId
vmap_reduce(Vmap *v, NodeId n, Attrs *a)
{
	shift_axes(&a->a[0]);
	NodeId x = operand_b(v, n, 0);
	return ir_emit(v->g, v->f->node[n].op, &x, 1, a, v->f->node[n].loc);
}
#define vmap_sum vmap_reduce
#define vmap_mean vmap_reduce
#define vmap_max vmap_reduce
#define vmap_min vmap_reduce
#define vmap_logsumexp vmap_reduce

// Ops along one axis (slot 0), every operand batched: the axis shifts past
// the batch.  take_along's indices are a tensor like its values, so they
// are batched with them.
static NodeId
vmap_axis(Vmap *v, NodeId n, Attrs *a)
{
	a->a[0].i++;
	return vmap_map(v, n, a);
}
#define vmap_argmax vmap_axis
#define vmap_concat vmap_axis
#define vmap_take_along vmap_axis
#define vmap_take_along_add vmap_axis

// take(x, idx) and take_add(x, idx, y) along axis (slot 0): the values
// batch as vmap_axis's, but idx indexes the axis once for every entry, so a
// batched idx (a different index list per entry) has no rule.
static NodeId
vmap_take(Vmap *v, NodeId n, Attrs *a)
{
	const Graph *f = v->f;
	if (v->bat[ir_in1(f, n, 1)]) {
		fail(v, n, "its indices are batched");
		return 0;
	}
	a->a[0].i++;
	NodeId in[3];
	for (int i = 0; i < f->node[n].nin; i++)
		in[i] = i == 1 ? v->map[ir_in1(f, n, 1)] : operand_b(v, n, i);
	return ir_emit(v->g, f->node[n].op, in, f->node[n].nin, a, f->node[n].loc);
}
#define vmap_take_add vmap_take

static NodeId
vmap_reshape(Vmap *v, NodeId n, Attrs *a)
{
	NodeId x = operand_b(v, n, 0);
	prepend(&a->a[0], v->B);
	return ir_emit(v->g, OP_reshape, &x, 1, a, v->f->node[n].loc);
}

// broadcast aligns on the right: put the batch on the left first.
static NodeId
vmap_broadcast(Vmap *v, NodeId n, Attrs *a)
{
	const Graph *f = v->f;
	Loc loc = f->node[n].loc;
	NodeId x = operand_b(v, n, 0);
	const Shape *xs = ir_shape(f, ir_in1(f, n, 0));
	Shape t = {.rank = a->a[0].n + 1};
	t.dim[0] = v->B;
	int pad = a->a[0].n - xs->rank;
	for (int i = 0; i < a->a[0].n; i++)
		t.dim[1 + i] = i < pad ? 1 : xs->dim[i - pad];
	x = b_reshape(v->g, x, &t, loc);
	prepend(&a->a[0], v->B);
	return ir_emit(v->g, OP_broadcast, &x, 1, a, loc);
}

static NodeId
vmap_permute(Vmap *v, NodeId n, Attrs *a)
{
	shift_axes(&a->a[0]);
	prepend(&a->a[0], 0);
	NodeId x = operand_b(v, n, 0);
	return ir_emit(v->g, OP_permute, &x, 1, a, v->f->node[n].loc);
}

// The batch axis is sliced whole: start 0, end B, step 1.
static NodeId
vmap_slice(Vmap *v, NodeId n, Attrs *a)
{
	prepend(&a->a[0], 0);
	prepend(&a->a[1], v->B);
	prepend(&a->a[2], 1);
	return vmap_map(v, n, a);
}
#define vmap_slice_update vmap_slice

static NodeId
vmap_pad(Vmap *v, NodeId n, Attrs *a)
{
	prepend(&a->a[0], 0);
	prepend(&a->a[1], 0);
	NodeId x = operand_b(v, n, 0);
	return ir_emit(v->g, OP_pad, &x, 1, a, v->f->node[n].loc);
}

// resize keeps the first elements in flat order, per batch row.
static NodeId
vmap_resize(Vmap *v, NodeId n, Attrs *a)
{
	(void)a;
	const Graph *f = v->f;
	Graph *g = v->g;
	Loc loc = f->node[n].loc;
	NodeId x = operand_b(v, n, 0);
	int64_t no = ir_numel(ir_shape(f, ir_in1(f, n, 0))), nn = ir_numel(ir_shape(f, n));
	Shape t = {.rank = 2, .dim = {v->B, no}};
	x = b_reshape(g, x, &t, loc);
	Attrs r;
	ir_attrs_default(OP_resize, &r);
	r.a[0].n = 2;
	r.a[0].v[0] = v->B;
	r.a[0].v[1] = nn;
	// resize of [B, no] to [B, nn] is not per row: slice or pad instead.
	if (nn <= no) {
		Attrs s;
		ir_attrs_default(OP_slice, &s);
		s.a[0].n = s.a[1].n = s.a[2].n = 2;
		s.a[0].v[0] = 0, s.a[0].v[1] = 0;
		s.a[1].v[0] = v->B, s.a[1].v[1] = nn;
		s.a[2].v[0] = 1, s.a[2].v[1] = 1;
		x = ir_emit(g, OP_slice, &x, 1, &s, loc);
	} else {
		Attrs p;
		ir_attrs_default(OP_pad, &p);
		p.a[0].n = p.a[1].n = 2;
		p.a[0].v[0] = p.a[0].v[1] = 0;
		p.a[1].v[0] = 0, p.a[1].v[1] = nn - no;
		x = ir_emit(g, OP_pad, &x, 1, &p, loc);
	}
	Shape out = batched_shape(v->B, ir_shape(f, n));
	return b_reshape(g, x, &out, loc);
}

// matmul broadcasts its batch axes: the batch is one more.
static NodeId
vmap_matmul(Vmap *v, NodeId n, Attrs *a)
{
	(void)a;
	NodeId in[2] = {operand_b(v, n, 0), operand_b(v, n, 1)};
	return ir_emit(v->g, OP_matmul, in, 2, NULL, v->f->node[n].loc);
}

// The window ops: fold the batch into N, (B, N, C, ...) -> (B·N, C, ...),
// and back.  The NC... operands are folded (the pools' derivative ops have
// two, x and g); conv's weight, unbatched here (vmap_conv), is not.
static NodeId
vmap_window(Vmap *v, NodeId n, Attrs *a)
{
	const Graph *f = v->f;
	Graph *g = v->g;
	const Node *nd = &f->node[n];
	NodeId in[3];
	int nfold = nd->op == OP_conv || nd->op == OP_conv_input_grad ? 1 : nd->nin;
	for (int i = 0; i < nd->nin; i++) {
		if (i >= nfold) {
			in[i] = v->map[ir_in1(f, n, i)];
			continue;
		}
		Shape t = *ir_shape(f, ir_in1(f, n, i));
		t.dim[0] *= v->B;
		in[i] = b_reshape(g, operand_b(v, n, i), &t, nd->loc);
	}
	NodeId r = ir_emit(g, nd->op, in, nd->nin, a, nd->loc);
	Shape out = batched_shape(v->B, ir_shape(f, n));
	return b_reshape(g, r, &out, nd->loc);
}
#define vmap_max_pool vmap_window
#define vmap_max_pool_grad vmap_window
#define vmap_max_pool_gather vmap_window
#define vmap_avg_pool vmap_window
#define vmap_avg_pool_grad vmap_window
#define vmap_adaptive_avg_pool vmap_window
#define vmap_adaptive_avg_pool_grad vmap_window
#define vmap_upsample_bilinear vmap_window
#define vmap_upsample_bilinear_grad vmap_window

// conv and its adjoints: a batched weight (or conv_weight_grad, which sums
// over N) makes the batch groups (batch_groups); otherwise the batch folds
// into N as for the other window ops.
static NodeId
vmap_conv(Vmap *v, NodeId n, Attrs *a)
{
	if (v->f->node[n].op == OP_conv_weight_grad || v->bat[ir_in1(v->f, n, 1)])
		return batch_groups(v, n, a);
	return vmap_window(v, n, a);
}
#define vmap_conv_input_grad vmap_conv
#define vmap_conv_weight_grad vmap_conv

// A batched loop is a loop of batched steps: the body is batched for the
// carries (all of them: one batched operand can reach any carry), the
// batched sequences and the batched invariants.  Batched sequences arrive
// (B, T, ...) and are scanned over T, so they are permuted to (T, B, ...);
// stacked outputs come back (T, B, ...) and vmap_get puts the batch first
// again.
static NodeId
vmap_scan(Vmap *v, NodeId n, Attrs *a)
{
	const Graph *f = v->f;
	Graph *g = v->g;
	const Node *nd = &f->node[n];
	int64_t nc = a->a[1].i, nx = a->a[2].i;
	const Graph *body = f->sub[a->a[0].i];
	NodeId in[256];
	uint8_t bb[256];
	for (int i = 0; i < nd->nin; i++) {
		NodeId x = ir_in1(f, n, i);
		bb[i] = i < nc || v->bat[x];
		if (i < nc)
			in[i] = operand_b(v, n, i);
		else if (v->bat[x] && i < nc + nx)
			in[i] = swap01(g, v->map[x], nd->loc);
		else
			in[i] = v->map[x];
	}
	char err[512];
	Loc el;
	Graph *vb = pass_vmap(body, bb, v->B, 0, &el, err, sizeof err);
	if (!vb) {
		fail(v, n, err);
		return 0;
	}
	a->a[0].i = ir_add_sub(g, vb);
	return ir_emit(g, OP_scan, in, nd->nin, a, nd->loc);
}

static NodeId
vmap_get(Vmap *v, NodeId n, Attrs *a)
{
	const Graph *f = v->f;
	NodeId s = ir_in1(f, n, 0);
	NodeId r = ir_emit(v->g, OP_get, &v->map[s], 1, a, f->node[n].loc);
	// Stacked outputs are (T, B, ...): the batch goes first.
	return a->a[0].i >= ir_attr_int(f, s, "ncarry") ? swap01(v->g, r, f->node[n].loc) : r;
}

// The host solver takes one cost matrix: a batch of them would need a loop
// of solves, which no task has needed (the matcher's costs are never
// batched: it is not differentiable).
static NodeId
vmap_linear_sum_assignment(Vmap *v, NodeId n, Attrs *a)
{
	(void)a;
	fail(v, n, "it has no batching rule yet");
	return 0;
}

// clang-format off
static NodeId (*const vmap_rule[OP_COUNT])(Vmap *, NodeId, Attrs *) = {
#define UNARY(n, ...)  [OP_##n] = vmap_map,
#define UNARYA(n, ...) [OP_##n] = vmap_map,
#define BINARY(n, ...) [OP_##n] = vmap_map,
#define CMP(n, ...)    [OP_##n] = vmap_map,
#define OTHER(n, ...)  [OP_##n] = vmap_##n,
#include "ops.def" // all rows: an OTHER row without its vmap_<op> fails the build
};
// clang-format on

static NodeId
batch_node(Vmap *v, NodeId n)
{
	const Graph *f = v->f;
	Attrs a;
	ir_attrs_get(f, n, &a);
	// vmap_map and vmap_scan gather operands in arrays of 256.
	if (f->node[n].nin + 1 > IR_MAXDIM + 248) {
		fail(v, n, "too many operands");
		return 0;
	}
	if (ir_shape(f, n)->rank == IR_MAXDIM) {
		fail(v, n, "its rank is already the largest");
		return 0;
	}
	return vmap_rule[f->node[n].op](v, n, &a);
}

// With basis: the batched inputs are columns of rows [lo, lo + B) of the
// N x N identity, element (r, c) = [r + lo == c].  Builds into g, whose
// map already holds the nodes that are not batched when `shared` (an
// earlier block of vmap_blocks built them: they do not depend on the rows).
static int
vmap_into(Vmap *v, const uint8_t *batched, int basis, int64_t lo, int64_t N, int shared)
{
	const Graph *f = v->f;
	Graph *g = v->g;
	int64_t B = v->B;
	NodeId eye = 0;
	int64_t off = 0;
	for (NodeId n = 1; n < f->nnode && !v->failed; n++) {
		const Node *nd = &f->node[n];
		if (nd->op == OP_input) {
			int64_t k = ir_attr_int(f, n, "index");
			const Input *in = &f->input[k];
			Shape s = *ir_shape(f, n);
			if (!batched[k]) {
				if (!shared)
					v->map[n] =
					    ir_add_input(g, in->name, in->kind, (DType)nd->dtype, &s, nd->loc);
				continue;
			}
			v->bat[n] = 1;
			Shape bs = batched_shape(B, &s);
			if (!basis) {
				v->map[n] =
				    ir_add_input(g, in->name, in->kind, (DType)nd->dtype, &bs, nd->loc);
				continue;
			}
			int64_t cnt = ir_numel(&s);
			// A shard whose rows [lo, lo + B) miss this input's columns
			// [off, off + cnt) of the identity: its basis part is zero, and
			// as the symbolic zeros of the builders (b_mul, b_add) every
			// product with it folds away (ppl_robust_reg's shards without
			// beta rows lose the [B, N] product X beta-dot and its uses).
			if (off + cnt <= lo || off >= lo + B) {
				v->map[n] = b_full(g, 0, (DType)nd->dtype, &bs, nd->loc);
				off += cnt;
				continue;
			}
			// Columns off .. off + numel of the identity's rows, reshaped.
			if (!eye) {
				Attrs ia;
				ir_attrs_default(OP_iota, &ia);
				ia.a[0].n = 2;
				ia.a[0].v[0] = B, ia.a[0].v[1] = N;
				ia.a[1].i = 0;
				NodeId r = ir_emit(g, OP_iota, NULL, 0, &ia, nd->loc);
				if (lo) // row r of the shard is row r + lo of the identity
					r = b_op2(g, OP_add, r, b_full(g, (double)lo, DT_I64, &(Shape){2, {B, N}}, nd->loc),
					          nd->loc);
				ia.a[1].i = 1;
				NodeId c = ir_emit(g, OP_iota, NULL, 0, &ia, nd->loc);
				NodeId one = b_full(g, 1, (DType)nd->dtype, &(Shape){2, {B, N}}, nd->loc);
				NodeId zero = b_full(g, 0, (DType)nd->dtype, &(Shape){2, {B, N}}, nd->loc);
				eye = b_where(g, b_op2(g, OP_eq, r, c, nd->loc), one, zero, nd->loc);
			}
			Attrs sa;
			ir_attrs_default(OP_slice, &sa);
			sa.a[0].n = sa.a[1].n = sa.a[2].n = 2;
			sa.a[0].v[0] = 0, sa.a[0].v[1] = off;
			sa.a[1].v[0] = B, sa.a[1].v[1] = off + cnt;
			sa.a[2].v[0] = 1, sa.a[2].v[1] = 1;
			NodeId cols = ir_emit(g, OP_slice, &eye, 1, &sa, nd->loc);
			v->map[n] = b_reshape(g, b_cast(g, cols, (DType)nd->dtype, nd->loc), &bs, nd->loc);
			off += cnt;
			continue;
		}
		int any = 0;
		for (int i = 0; i < nd->nin; i++)
			any |= v->bat[ir_in1(f, n, i)];
		if (!any) {
			if (shared)
				continue;
			NodeId in[256];
			for (int i = 0; i < nd->nin; i++)
				in[i] = v->map[ir_in1(f, n, i)];
			Attrs a;
			ir_attrs_get(f, n, &a);
			v->map[n] = ir_emit(g, nd->op, in, nd->nin, &a, nd->loc);
			continue;
		}
		v->bat[n] = 1;
		v->map[n] = batch_node(v, n);
	}
	if (v->failed)
		return 0;
	FADC_ASSERT(!basis || off == N, "basis size differs from the batched inputs' size");
	// Outputs: batched, unbatched ones broadcast to the batch.
	for (uint32_t k = 0; k < f->nout; k++) {
		NodeId o = f->out[k].node;
		NodeId m = v->map[o];
		if (!v->bat[o]) {
			Shape t = batched_shape(B, ir_shape(f, o));
			m = b_broadcast(g, m, &t, f->node[o].loc);
		}
		ir_add_output(g, m, f->out[k].name, -1);
	}
	return 1;
}

static Graph *
vmap(const Graph *f, const uint8_t *batched, int64_t B, int basis, int64_t lo, int64_t N,
     Loc *errloc, char *err, size_t errlen)
{
	Graph *g = ir_graph_new(f->name, f->src);
	Vmap v = {.f = f, .g = g, .B = B, .errloc = errloc, .err = err, .errlen = errlen};
	*errloc = 0;
	v.map = arena_alloc_array(g->arena, f->nnode, sizeof(NodeId));
	v.bat = arena_alloc_array(g->arena, f->nnode, 1);
	for (uint32_t k = 0; k < f->nsub; k++) {
		// Bodies of unbatched scans are copied as they are.
		Graph *s = pass_dce(f->sub[k]);
		ir_add_sub(g, s);
	}
	if (!vmap_into(&v, batched, basis, lo, N, 0)) {
		ir_graph_free(g);
		return NULL;
	}
	return g;
}

Graph *
pass_vmap(const Graph *f, const uint8_t *batched, int64_t B, int basis, Loc *errloc, char *err,
          size_t errlen)
{
	return vmap(f, batched, B, basis, 0, B, errloc, err, errlen);
}

Graph *
pass_vmap_rows(const Graph *f, const uint8_t *batched, int64_t lo, int64_t B, int64_t N,
               Loc *errloc, char *err, size_t errlen)
{
	FADC_ASSERT(lo >= 0 && B >= 1 && lo + B <= N, "basis rows outside the identity");
	return vmap(f, batched, B, 1, lo, N, errloc, err, errlen);
}

// One graph of nblk row blocks: block j is pass_vmap_rows(f, batched,
// lo[j], cnt[j], N), its outputs j * f->nout + k.  The nodes with no
// batched operand are built once (the first block) and read by every block:
// they are the row-independent part (the forward and gradient at the
// params), which a graph per block, or shards, compute once each.  A node's
// batchedness does not depend on the rows (a block's zero part of the basis
// is still batched), so every block batches the same nodes.
Graph *
pass_vmap_blocks(const Graph *f, const uint8_t *batched, int nblk, const int64_t *lo,
                 const int64_t *cnt, int64_t N, Loc *errloc, char *err, size_t errlen)
{
	Graph *g = ir_graph_new(f->name, f->src);
	Vmap v = {.f = f, .g = g, .errloc = errloc, .err = err, .errlen = errlen};
	*errloc = 0;
	v.map = arena_alloc_array(g->arena, f->nnode, sizeof(NodeId));
	v.bat = arena_alloc_array(g->arena, f->nnode, 1);
	for (uint32_t k = 0; k < f->nsub; k++)
		ir_add_sub(g, pass_dce(f->sub[k]));
	for (int j = 0; j < nblk; j++) {
		FADC_ASSERT(lo[j] >= 0 && cnt[j] >= 1 && lo[j] + cnt[j] <= N,
		            "basis rows outside the identity");
		v.B = cnt[j];
		if (!vmap_into(&v, batched, 1, lo[j], N, j > 0)) {
			ir_graph_free(g);
			return NULL;
		}
	}
	return g;
}
