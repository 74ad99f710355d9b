// passes/build.c -- the builders every transform uses, with the peepholes
// that keep derived graphs small.
//
// A symbolic zero is NodeId 0: b_add(g, 0, y) is y, b_mul(g, 0, y) is 0,
// and a rule that receives 0 as its incoming derivative builds nothing, so
// a zero tangent never materializes.  Constants are `full` nodes; x * 1,
// x + 0 and layout ops that change nothing are not built.  (x * 0 folds to
// 0 even where x could be inf or nan: derivatives follow the symbolic
// convention, as JAX's symbolic zeros do.)
#include <string.h>

#include "passes.h"

NodeId
b_full(Graph *g, double v, DType dt, const Shape *s, Loc loc)
{
	Attrs a;
	ir_attrs_default(OP_full, &a);
	a.a[0].f = v;
	a.a[1].n = s->rank;
	memcpy(a.a[1].v, s->dim, sizeof(int64_t) * (size_t)s->rank);
	a.a[2].i = dt;
	return ir_emit(g, OP_full, NULL, 0, &a, loc);
}

NodeId
b_full_like(Graph *g, double v, NodeId like, Loc loc)
{
	return b_full(g, v, (DType)g->node[like].dtype, ir_shape(g, like), loc);
}

// The constant x (a `full`) with shape s, negated when neg: its attributes
// copied, so that an i64 constant keeps its exact integer (ir.h, AttrVal);
// i64 negation wraps as PyTorch's (-INT64_MIN is INT64_MIN).
static NodeId
full_of(Graph *g, NodeId x, int neg, const Shape *s, Loc loc)
{
	Attrs a;
	ir_attrs_get(g, x, &a);
	if (neg) {
		a.a[0].f = -a.a[0].f;
		if (g->node[x].dtype == DT_I64) {
			a.a[0].i = (int64_t)(0 - (uint64_t)a.a[0].i);
			a.a[0].f = (double)a.a[0].i;
		}
	}
	a.a[1].n = s->rank;
	memcpy(a.a[1].v, s->dim, sizeof(int64_t) * (size_t)s->rank);
	return ir_emit(g, OP_full, NULL, 0, &a, loc);
}

int
b_const_value(const Graph *g, NodeId n, double *v)
{
	if (!n || g->node[n].op != OP_full)
		return 0;
	*v = ir_attr_float(g, n, "value");
	return 1;
}

static int
is_const(const Graph *g, NodeId n, double v)
{
	double c;
	return b_const_value(g, n, &c) && c == v;
}

NodeId
b_attr(Graph *g, int op, const NodeId *in, int nin, const Attrs *a, Loc loc)
{
	return ir_emit(g, op, in, nin, a, loc);
}

NodeId
b_op1(Graph *g, int op, NodeId x, Loc loc)
{
	FADC_ASSERT(x, "b_op1 of a symbolic zero");
	return ir_emit(g, op, &x, 1, NULL, loc);
}

NodeId
b_op2(Graph *g, int op, NodeId x, NodeId y, Loc loc)
{
	NodeId in[2] = {x, y};
	FADC_ASSERT(x && y, "b_op2 of a symbolic zero");
	return ir_emit(g, op, in, 2, NULL, loc);
}

NodeId
b_add(Graph *g, NodeId x, NodeId y, Loc loc)
{
	if (!x || is_const(g, x, 0))
		return y;
	if (!y || is_const(g, y, 0))
		return x;
	return b_op2(g, OP_add, x, y, loc);
}

NodeId
b_neg(Graph *g, NodeId x, Loc loc)
{
	if (!x)
		return 0;
	if (g->node[x].op == OP_neg)
		return ir_in1(g, x, 0);
	double c;
	if (b_const_value(g, x, &c))
		return full_of(g, x, 1, ir_shape(g, x), loc);
	return b_op1(g, OP_neg, x, loc);
}

NodeId
b_sub(Graph *g, NodeId x, NodeId y, Loc loc)
{
	if (!y || is_const(g, y, 0))
		return x;
	if (!x || is_const(g, x, 0))
		return b_neg(g, y, loc);
	return b_op2(g, OP_sub, x, y, loc);
}

NodeId
b_mul(Graph *g, NodeId x, NodeId y, Loc loc)
{
	if (!x || !y || is_const(g, x, 0) || is_const(g, y, 0))
		return 0;
	if (is_const(g, x, 1))
		return y;
	if (is_const(g, y, 1))
		return x;
	if (is_const(g, x, -1))
		return b_neg(g, y, loc);
	if (is_const(g, y, -1))
		return b_neg(g, x, loc);
	return b_op2(g, OP_mul, x, y, loc);
}

static NodeId
shaped(Graph *g, int op, NodeId x, const Shape *s, Loc loc)
{
	Attrs a;
	ir_attrs_default(op, &a);
	a.a[0].n = s->rank;
	memcpy(a.a[0].v, s->dim, sizeof(int64_t) * (size_t)s->rank);
	return ir_emit(g, op, &x, 1, &a, loc);
}

NodeId
b_reshape(Graph *g, NodeId x, const Shape *s, Loc loc)
{
	if (!x)
		return 0;
	if (ir_shape_eq(ir_shape(g, x), s))
		return x;
	if (g->node[x].op == OP_reshape) // reshape(reshape(y)) = reshape(y)
		x = ir_in1(g, x, 0);
	if (ir_shape_eq(ir_shape(g, x), s))
		return x;
	double c;
	if (b_const_value(g, x, &c))
		return full_of(g, x, 0, s, loc);
	return shaped(g, OP_reshape, x, s, loc);
}

NodeId
b_broadcast(Graph *g, NodeId x, const Shape *s, Loc loc)
{
	if (!x)
		return 0;
	if (ir_shape_eq(ir_shape(g, x), s))
		return x;
	double c;
	if (b_const_value(g, x, &c))
		return full_of(g, x, 0, s, loc);
	return shaped(g, OP_broadcast, x, s, loc);
}

NodeId
b_permute(Graph *g, NodeId x, const int64_t *perm, Loc loc)
{
	if (!x)
		return 0;
	const Shape *s = ir_shape(g, x);
	int identity = 1;
	for (int i = 0; i < s->rank; i++)
		identity &= perm[i] == i;
	if (identity)
		return x;
	Attrs a;
	ir_attrs_default(OP_permute, &a);
	a.a[0].n = s->rank;
	memcpy(a.a[0].v, perm, sizeof(int64_t) * (size_t)s->rank);
	if (g->node[x].op == OP_permute) {
		// permute(permute(y, p), q) = permute(y, p∘q): result axis i is
		// y's axis p[q[i]].
		int64_t p[IR_MAXDIM];
		ir_attr_ints(g, x, "perm", p);
		for (int i = 0; i < s->rank; i++)
			a.a[0].v[i] = p[perm[i]];
		return b_permute(g, ir_in1(g, x, 0), a.a[0].v, loc);
	}
	return ir_emit(g, OP_permute, &x, 1, &a, loc);
}

NodeId
b_sum(Graph *g, NodeId x, const int64_t *axes, int naxes, int keepdim, Loc loc)
{
	if (!x)
		return 0;
	if (!naxes) {
		return x;
	}
	Attrs a;
	ir_attrs_default(OP_sum, &a);
	a.a[0].n = naxes;
	memcpy(a.a[0].v, axes, sizeof(int64_t) * (size_t)naxes);
	a.a[1].i = keepdim;
	return ir_emit(g, OP_sum, &x, 1, &a, loc);
}

NodeId
b_cast(Graph *g, NodeId x, DType dt, Loc loc)
{
	if (!x || g->node[x].dtype == dt)
		return x;
	Attrs a;
	ir_attrs_default(OP_cast, &a);
	a.a[0].i = dt;
	return ir_emit(g, OP_cast, &x, 1, &a, loc);
}

NodeId
b_where(Graph *g, NodeId c, NodeId x, NodeId y, Loc loc)
{
	if (!x && !y)
		return 0;
	NodeId like = x ? x : y;
	if (!x)
		x = b_full_like(g, 0, like, loc);
	if (!y)
		y = b_full_like(g, 0, like, loc);
	NodeId in[3] = {c, x, y};
	return ir_emit(g, OP_where, in, 3, NULL, loc);
}

NodeId
b_matmul(Graph *g, NodeId x, NodeId y, Loc loc)
{
	if (!x || !y)
		return 0;
	return b_op2(g, OP_matmul, x, y, loc);
}

NodeId
b_transpose_last(Graph *g, NodeId x, Loc loc)
{
	if (!x)
		return 0;
	const Shape *s = ir_shape(g, x);
	int64_t perm[IR_MAXDIM];
	for (int i = 0; i < s->rank; i++)
		perm[i] = i;
	perm[s->rank - 1] = s->rank - 2;
	perm[s->rank - 2] = s->rank - 1;
	return b_permute(g, x, perm, loc);
}

NodeId
b_unbroadcast(Graph *g, NodeId x, const Shape *to, Loc loc)
{
	if (!x)
		return 0;
	const Shape *from = ir_shape(g, x);
	if (ir_shape_eq(from, to))
		return x;
	// Sum the leading axes `to` lacks and the axes where `to` has 1.
	int64_t axes[IR_MAXDIM];
	int n = 0, lead = from->rank - to->rank;
	for (int i = 0; i < from->rank; i++)
		if (i < lead || (to->dim[i - lead] == 1 && from->dim[i] != 1))
			axes[n++] = i;
	NodeId s = b_sum(g, x, axes, n, 0, loc);
	return b_reshape(g, s, to, loc);
}

static Graph *
copy_graph(const Graph *src)
{
	Graph *dst = ir_graph_new(src->name, src->src);
	NodeId *map = arena_alloc_array(dst->arena, src->nnode, sizeof *map);
	b_copy_into(dst, src, map);
	for (uint32_t i = 0; i < src->nout; i++)
		ir_add_output(dst, map[src->out[i].node], src->out[i].name, src->out[i].writeback);
	return dst;
}

void
b_copy_into(Graph *dst, const Graph *src, NodeId *map)
{
	FADC_ASSERT(dst->nnode == 1 && dst->nsub == 0, "b_copy_into needs an empty graph");
	for (uint32_t i = 0; i < src->nsub; i++)
		ir_add_sub(dst, copy_graph(src->sub[i]));
	for (NodeId n = 1; n < src->nnode; n++) {
		const Node *nd = &src->node[n];
		if (nd->op == OP_input) {
			const Input *in = &src->input[ir_attr_int(src, n, "index")];
			map[n] = ir_add_input(dst, in->name, in->kind, (DType)nd->dtype, &src->shape[nd->shape],
			                      nd->loc);
			continue;
		}
		map[n] = b_copy_node(dst, src, n, map);
	}
}

NodeId
b_copy_node(Graph *dst, const Graph *src, NodeId n, const NodeId *map)
{
	const Node *nd = &src->node[n];
	NodeId ops[256];
	for (int i = 0; i < nd->nin; i++)
		ops[i] = map[ir_in1(src, n, i)];
	Attrs a;
	ir_attrs_get(src, n, &a);
	return ir_emit(dst, nd->op, ops, nd->nin, &a, nd->loc);
}

NodeId
b_polygamma(Graph *g, int64_t n, NodeId x, Loc loc)
{
	Attrs a;
	ir_attrs_default(OP_polygamma, &a);
	a.a[0].i = n;
	return ir_emit(g, OP_polygamma, &x, 1, &a, loc);
}

void
b_attrs(const Graph *g, NodeId n, Attrs *a)
{
	ir_attrs_get(g, n, a);
}
