// passes/vmap.c -- batching: a graph run for B values of some inputs at
// once, as one graph with a leading batch axis (JAX's vmap).
//
// Batched values carry the batch on axis 0.  Each node with a batched
// operand is rebuilt by its op's rule: elementwise ops broadcast their
// unbatched operands to the batch, axis attributes shift by one, layout
// ops gain a leading axis, matmul broadcasts its batch axes, windowed ops
// fold the batch into N (conv and its adjoints with a batched weight: into
// the channels and groups).  Nodes with no batched operand are copied as
// they are.  With `basis`, the batched inputs are not inputs at all but the
// rows of an identity matrix, split over them in input order: row b is the
// b-th basis vector of their concatenated, flattened space.  That turns
// jvp into jacfwd, vjp into jacrev and hvp/vhp into the Hessian, in one
// graph, without a loop of calls.
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

static NodeId
batch_node(Vmap *v, NodeId n)
{
	const Graph *f = v->f;
	Graph *g = v->g;
	const Node *nd = &f->node[n];
	const OpInfo *oi = ir_op(nd->op);
	Loc loc = nd->loc;
	Attrs a;
	ir_attrs_get(f, n, &a);
	NodeId in[256];
	int nin = nd->nin;
	if (nin + 1 > IR_MAXDIM + 248) {
		fail(v, n, "too many operands");
		return 0;
	}
	if (ir_shape(f, n)->rank == IR_MAXDIM) {
		fail(v, n, "its rank is already the largest");
		return 0;
	}
	if (oi->flags & F_ELEMWISE || nd->op == OP_where || nd->op == OP_cast || nd->op == OP_not ||
	    nd->op == OP_to_host || nd->op == OP_to_device || nd->op == OP_one_hot ||
	    ((oi->flags & F_RANDOM) && !(oi->flags & F_FACTORY))) {
		for (int i = 0; i < nin; i++)
			in[i] = operand_b(v, n, i);
		return ir_emit(g, nd->op, in, nin, &a, loc);
	}
	switch (nd->op) {
	case OP_sum:
	case OP_mean:
	case OP_max:
	case OP_min:
	case OP_logsumexp:
		shift_axes(&a.a[0]);
		in[0] = operand_b(v, n, 0);
		return ir_emit(g, nd->op, in, 1, &a, loc);
	case OP_argmax:
	case OP_concat:
	case OP_take_along:
	case OP_take_along_add:
		a.a[0].i++;
		for (int i = 0; i < nin; i++)
			in[i] = operand_b(v, n, i);
		return ir_emit(g, nd->op, in, nin, &a, loc);
	case OP_take:
	case OP_take_add:
		if (v->bat[ir_in1(f, n, 1)]) {
			fail(v, n, "its indices are batched");
			return 0;
		}
		a.a[0].i++;
		for (int i = 0; i < nin; i++)
			in[i] = i == 1 ? v->map[ir_in1(f, n, 1)] : operand_b(v, n, i);
		return ir_emit(g, nd->op, in, nin, &a, loc);
	case OP_reshape:
	case OP_broadcast: {
		// broadcast aligns on the right: put the batch on the left first.
		in[0] = operand_b(v, n, 0);
		if (nd->op == OP_broadcast) {
			const Shape *xs = ir_shape(f, ir_in1(f, n, 0));
			Shape t = {.rank = a.a[0].n + 1};
			t.dim[0] = v->B;
			int pad = a.a[0].n - xs->rank;
			for (int i = 0; i < a.a[0].n; i++)
				t.dim[1 + i] = i < pad ? 1 : xs->dim[i - pad];
			in[0] = b_reshape(g, in[0], &t, loc);
		}
		prepend(&a.a[0], v->B);
		return ir_emit(g, nd->op, in, 1, &a, loc);
	}
	case OP_permute:
		shift_axes(&a.a[0]);
		prepend(&a.a[0], 0);
		in[0] = operand_b(v, n, 0);
		return ir_emit(g, OP_permute, in, 1, &a, loc);
	case OP_slice:
	case OP_slice_update:
		prepend(&a.a[0], 0);
		prepend(&a.a[1], v->B);
		prepend(&a.a[2], 1);
		for (int i = 0; i < nin; i++)
			in[i] = operand_b(v, n, i);
		return ir_emit(g, nd->op, in, nin, &a, loc);
	case OP_pad:
		prepend(&a.a[0], 0);
		prepend(&a.a[1], 0);
		in[0] = operand_b(v, n, 0);
		return ir_emit(g, OP_pad, in, 1, &a, loc);
	case OP_resize: {
		// resize keeps the first elements in flat order, per batch row.
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
	case OP_matmul:
		in[0] = operand_b(v, n, 0);
		in[1] = operand_b(v, n, 1);
		return ir_emit(g, OP_matmul, in, 2, NULL, loc);
	case OP_conv:
	case OP_conv_input_grad:
	case OP_conv_weight_grad:
		// A batched weight (or conv_weight_grad, which sums over N): the
		// batch becomes groups.
		if (nd->op == OP_conv_weight_grad || v->bat[ir_in1(f, n, 1)])
			return batch_groups(v, n, &a);
		/* fallthrough */
	case OP_max_pool:
	case OP_max_pool_grad:
	case OP_max_pool_gather:
	case OP_avg_pool:
	case OP_avg_pool_grad:
	case OP_adaptive_avg_pool:
	case OP_adaptive_avg_pool_grad:
	case OP_upsample_bilinear:
	case OP_upsample_bilinear_grad: {
		// Fold the batch into N: (B, N, C, ...) -> (B·N, C, ...) and back.
		// The NC... operands are folded (the pools' derivative ops have
		// two, x and g); conv's weight, unbatched here, is not.
		int nfold = nd->op == OP_conv || nd->op == OP_conv_input_grad ? 1 : nin;
		for (int i = 0; i < nin; i++) {
			if (i >= nfold) {
				in[i] = v->map[ir_in1(f, n, i)];
				continue;
			}
			Shape t = *ir_shape(f, ir_in1(f, n, i));
			t.dim[0] *= v->B;
			in[i] = b_reshape(g, operand_b(v, n, i), &t, loc);
		}
		NodeId r = ir_emit(g, nd->op, in, nin, &a, loc);
		Shape out = batched_shape(v->B, ir_shape(f, n));
		return b_reshape(g, r, &out, loc);
	}
	case OP_scan: {
		// A batched loop is a loop of batched steps: the body is batched
		// for the carries (all of them: one batched operand can reach any
		// carry), the batched sequences and the batched invariants.
		// Batched sequences arrive (B, T, ...) and are scanned over T, so
		// they are permuted to (T, B, ...); stacked outputs come back
		// (T, B, ...) and get puts the batch first again.
		int64_t nc = a.a[1].i, nx = a.a[2].i;
		const Graph *body = f->sub[a.a[0].i];
		uint8_t bb[256];
		for (int i = 0; i < nin; i++) {
			NodeId x = ir_in1(f, n, i);
			bb[i] = i < nc || v->bat[x];
			if (i < nc)
				in[i] = operand_b(v, n, i);
			else if (v->bat[x] && i < nc + nx)
				in[i] = swap01(g, v->map[x], loc);
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
		a.a[0].i = ir_add_sub(g, vb);
		return ir_emit(g, OP_scan, in, nin, &a, loc);
	}
	case OP_get: {
		NodeId s = ir_in1(f, n, 0);
		NodeId r = ir_emit(g, OP_get, &v->map[s], 1, &a, loc);
		// Stacked outputs are (T, B, ...): the batch goes first.
		return a.a[0].i >= ir_attr_int(f, s, "ncarry") ? swap01(g, r, loc) : r;
	}
	default:
		fail(v, n, "it has no batching rule yet");
		return 0;
	}
}

Graph *
pass_vmap(const Graph *f, const uint8_t *batched, int64_t B, int basis, Loc *errloc, char *err,
          size_t errlen)
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
	NodeId eye = 0;
	int64_t off = 0;
	for (NodeId n = 1; n < f->nnode && !v.failed; n++) {
		const Node *nd = &f->node[n];
		if (nd->op == OP_input) {
			int64_t k = ir_attr_int(f, n, "index");
			const Input *in = &f->input[k];
			Shape s = *ir_shape(f, n);
			if (!batched[k]) {
				v.map[n] = ir_add_input(g, in->name, in->kind, (DType)nd->dtype, &s, nd->loc);
				continue;
			}
			v.bat[n] = 1;
			Shape bs = batched_shape(B, &s);
			if (!basis) {
				v.map[n] = ir_add_input(g, in->name, in->kind, (DType)nd->dtype, &bs, nd->loc);
				continue;
			}
			// Columns off .. off + numel of the identity, reshaped.
			if (!eye) {
				Attrs ia;
				ir_attrs_default(OP_iota, &ia);
				ia.a[0].n = 2;
				ia.a[0].v[0] = B, ia.a[0].v[1] = B;
				ia.a[1].i = 0;
				NodeId r = ir_emit(g, OP_iota, NULL, 0, &ia, nd->loc);
				ia.a[1].i = 1;
				NodeId c = ir_emit(g, OP_iota, NULL, 0, &ia, nd->loc);
				NodeId one = b_full(g, 1, (DType)nd->dtype, &(Shape){2, {B, B}}, nd->loc);
				NodeId zero = b_full(g, 0, (DType)nd->dtype, &(Shape){2, {B, B}}, nd->loc);
				eye = b_where(g, b_op2(g, OP_eq, r, c, nd->loc), one, zero, nd->loc);
			}
			int64_t cnt = ir_numel(&s);
			Attrs sa;
			ir_attrs_default(OP_slice, &sa);
			sa.a[0].n = sa.a[1].n = sa.a[2].n = 2;
			sa.a[0].v[0] = 0, sa.a[0].v[1] = off;
			sa.a[1].v[0] = B, sa.a[1].v[1] = off + cnt;
			sa.a[2].v[0] = 1, sa.a[2].v[1] = 1;
			NodeId cols = ir_emit(g, OP_slice, &eye, 1, &sa, nd->loc);
			v.map[n] = b_reshape(g, b_cast(g, cols, (DType)nd->dtype, nd->loc), &bs, nd->loc);
			off += cnt;
			continue;
		}
		int any = 0;
		for (int i = 0; i < nd->nin; i++)
			any |= v.bat[ir_in1(f, n, i)];
		if (!any) {
			NodeId in[256];
			for (int i = 0; i < nd->nin; i++)
				in[i] = v.map[ir_in1(f, n, i)];
			Attrs a;
			ir_attrs_get(f, n, &a);
			v.map[n] = ir_emit(g, nd->op, in, nd->nin, &a, nd->loc);
			continue;
		}
		v.bat[n] = 1;
		v.map[n] = batch_node(&v, n);
	}
	if (v.failed) {
		ir_graph_free(g);
		return NULL;
	}
	FADC_ASSERT(!basis || off == B, "basis size differs from the batched inputs' size");
	// Outputs: batched, unbatched ones broadcast to the batch.
	for (uint32_t k = 0; k < f->nout; k++) {
		NodeId o = f->out[k].node;
		NodeId m = v.map[o];
		if (!v.bat[o]) {
			Shape t = batched_shape(B, ir_shape(f, o));
			m = b_broadcast(g, m, &t, f->node[o].loc);
		}
		ir_add_output(g, m, f->out[k].name, -1);
	}
	return g;
}
