// passes/simplify.c -- simplification: common subexpressions, constant
// folding, algebraic identities, and dead code.
//
// pass_simplify rebuilds the graph in id order.  Each node is first mapped
// to its new operands, then
//   - folded if it is elementwise and every operand is a `full` constant:
//     the value is computed by the reference interpreter on one element (so
//     no scalar math is written twice) and the node becomes a `full`; i64
//     operands are folded in int64 instead (fold_i64), since a double holds
//     their value only to 2^53;
//   - rebuilt through the builders, which apply x*1 = x, x+0 = x, x*0 = 0,
//     -(-x) = x, reshape(reshape(x)) = reshape(x), permute(permute(x)) =
//     permute(x), and drop layout ops that change nothing;
//   - looked up in a hash table of (op, dtype, operands, attributes): an
//     equal node already built is reused (CSE).
// pass_dce keeps the nodes outputs reach (inputs are always kept: they are
// the graph's interface).
#include <stdlib.h>
#include <string.h>

#include "passes.h"

typedef struct Cse {
	uint32_t *slot; // open addressing: new-graph node ids, 0 = empty
	uint32_t cap;
} Cse;

static uint64_t
node_hash(const Graph *g, const Node *nd, const NodeId *in, const Attrs *a)
{
	uint64_t h = 1469598103934665603ull;
#define MIX(x) (h = (h ^ (uint64_t)(x)) * 1099511628211ull)
	MIX(nd->op);
	MIX(nd->dtype);
	MIX(nd->shape);
	for (int i = 0; i < nd->nin; i++)
		MIX(in[i]);
	const OpInfo *oi = ir_op(nd->op);
	for (int i = 0; i < oi->nattr; i++) {
		MIX(a->a[i].i);
		uint64_t fb;
		memcpy(&fb, &a->a[i].f, sizeof fb);
		MIX(fb);
		MIX(a->a[i].n);
		for (int k = 0; k < a->a[i].n; k++)
			MIX(a->a[i].v[k]);
	}
#undef MIX
	(void)g;
	return h;
}

static int
same_node(const Graph *g, NodeId m, const Node *nd, const NodeId *in, const Attrs *a)
{
	const Node *x = &g->node[m];
	if (x->op != nd->op || x->dtype != nd->dtype || x->shape != nd->shape || x->nin != nd->nin)
		return 0;
	if (memcmp(ir_in(g, m), in, sizeof(NodeId) * nd->nin))
		return 0;
	Attrs b;
	ir_attrs_get(g, m, &b);
	const OpInfo *oi = ir_op(nd->op);
	for (int i = 0; i < oi->nattr; i++) {
		const AttrVal *p = &a->a[i], *q = &b.a[i];
		if (p->i != q->i || memcmp(&p->f, &q->f, sizeof p->f) || p->n != q->n ||
		    memcmp(p->v, q->v, sizeof(int64_t) * (size_t)p->n))
			return 0;
	}
	return 1;
}

// The value of an elementwise op of constants, by the interpreter.
static int
fold_value(const Graph *g, NodeId n, const double *cv, double *out)
{
	const Node *nd = &g->node[n];
	Graph *t = ir_graph_new("fold", NULL);
	NodeId ops[4];
	Shape scalar = {0};
	for (int i = 0; i < nd->nin; i++) {
		Attrs a;
		ir_attrs_default(OP_full, &a);
		a.a[0].f = cv[i];
		a.a[2].i = g->node[ir_in1(g, n, i)].dtype;
		ops[i] = ir_emit(t, OP_full, NULL, 0, &a, 0);
	}
	(void)scalar;
	Attrs a;
	ir_attrs_get(g, n, &a);
	char err[256];
	NodeId r = ir_build(t, nd->op, ops, nd->nin, &a, 0, err, sizeof err);
	int ok = 0;
	if (r) {
		ir_add_output(t, r, "v", -1);
		Tensor o = {0};
		if (ir_interp(t, NULL, &o, 0, err, sizeof err)) {
			*out = o.data[0];
			ok = 1;
			ir_tensor_free(&o);
		}
	}
	ir_graph_free(t);
	return ok;
}

// The exact value of an i64 `full` (ir.h, AttrVal).
static int64_t
const_i64(const Graph *g, NodeId n)
{
	Attrs a;
	ir_attrs_get(g, n, &a);
	return a.a[0].i;
}

// An integer `full` of exact value v (ir.h, AttrVal): i64, or bool 0/1.
static NodeId
full_int(Graph *g, int64_t v, DType dt, const Shape *s, Loc loc)
{
	Attrs a;
	ir_attrs_default(OP_full, &a);
	a.a[0].i = v;
	a.a[0].f = (double)v;
	a.a[1].n = s->rank;
	memcpy(a.a[1].v, s->dim, sizeof(int64_t) * (size_t)s->rank);
	a.a[2].i = dt;
	return ir_emit(g, OP_full, NULL, 0, &a, loc);
}

// An elementwise op of i64 constants x[] in int64: the interpreter's
// doubles hold integers only to 2^53.  Overflow wraps (two's complement,
// through uint64_t), as PyTorch's int64 tensors and the compiled code
// (plain LLVM add/sub/mul, C's on the GPU) do.  0 for an op not here (the
// interpreter folds it, or refuses beyond 2^53 and the node is kept).
static int
fold_i64(int op, const int64_t *x, int64_t *r)
{
	uint64_t a = (uint64_t)x[0], b = (uint64_t)x[1];
	switch (op) {
	case OP_neg:
		*r = (int64_t)(0 - a);
		return 1;
	case OP_abs:
		*r = x[0] < 0 ? (int64_t)(0 - a) : x[0]; // |INT64_MIN| wraps to INT64_MIN
		return 1;
	case OP_relu:
		*r = x[0] > 0 ? x[0] : 0;
		return 1;
	case OP_sign:
		*r = (x[0] > 0) - (x[0] < 0);
		return 1;
	case OP_step:
		*r = x[0] > 0;
		return 1;
	case OP_add:
		*r = (int64_t)(a + b);
		return 1;
	case OP_sub:
		*r = (int64_t)(a - b);
		return 1;
	case OP_mul:
		*r = (int64_t)(a * b);
		return 1;
	case OP_maximum:
		*r = x[0] > x[1] ? x[0] : x[1];
		return 1;
	case OP_minimum:
		*r = x[0] < x[1] ? x[0] : x[1];
		return 1;
	case OP_eq:
		*r = x[0] == x[1];
		return 1;
	case OP_ne:
		*r = x[0] != x[1];
		return 1;
	case OP_lt:
		*r = x[0] < x[1];
		return 1;
	case OP_le:
		*r = x[0] <= x[1];
		return 1;
	case OP_gt:
		*r = x[0] > x[1];
		return 1;
	case OP_ge:
		*r = x[0] >= x[1];
		return 1;
	default:
		return 0;
	}
}

// The node equal to dst's node m already in the table; if there is none,
// m itself after entering it (enter), or 0 without entering it (a failed
// probe of sum_linear must not fill the table, sized for src's nodes).
static NodeId
cse_probe(Graph *dst, NodeId m, Cse *cse, int enter)
{
	const Node *nd = &dst->node[m];
	Attrs a;
	ir_attrs_get(dst, m, &a);
	const NodeId *in = ir_in(dst, m);
	uint64_t h = node_hash(dst, nd, in, &a);
	uint32_t i = (uint32_t)h & (cse->cap - 1);
	for (; cse->slot[i]; i = (i + 1) & (cse->cap - 1))
		if (cse->slot[i] != m && same_node(dst, cse->slot[i], nd, in, &a))
			return cse->slot[i];
	if (!enter)
		return 0;
	cse->slot[i] = m;
	return m;
}

// The node equal to dst's node m already in the table, or m (entered).
static NodeId
cse_node(Graph *dst, NodeId m, Cse *cse)
{
	return cse_probe(dst, m, cse, 1);
}

// ---- A sum of a linear combination (sum_linear)
//
// Reverse mode makes sums of sums' terms.  batch_norm's backward (the
// prelude's composite: d = x - mean(x), y = d r w + b, r = rsqrt(var +
// eps)) sums, per channel over the axes A of the statistics,
//     dmu = -sum_A(dd),   dd = g w r + 2 d dvar / M   (twice dvar d / M),
// a fourth pass over the layer's activations after sum_A(g) (the bias's
// gradient), sum_A(g x^) and sum_A(g w d).  But sum is linear, r, w and
// dvar / M are constant along A (broadcasts of per-channel values), and
// sum_A(d) = sum_A(x - mean_A(x)) = 0 exactly in real arithmetic, so
//     sum_A(dd) = w r sum_A(g) + 0,
// per-channel products of a sum already computed.  sum_linear rewrites
// sum_A(e) so: through add, sub and neg, taking out of each product or
// quotient the factors constant along A (sq_const: the factor at the
// sum's shape), a centered term x - broadcast(mean_A(x, keepdim)) being
// zero; every other term (a "core") must be a sum_A that dst already
// holds (found through the CSE table), else nothing is rewritten: the
// rewrite never adds a pass over the summed tensor, it only removes one.
// The result differs from the sum it replaces by rounding only (and is
// closer to the exact value: the computed sum of a centered term is
// rounding noise around 0); a centered term's factor that is inf or NaN
// no longer makes the sum NaN.

typedef struct Lin {
	const int64_t *axes; // A, as the sum's attribute
	int naxes, keepdim;
	const Shape *rs;   // the sum's shape
	NodeId base;       // dst's nodes before the attempt: a core must be older
	Cse *cse;
	Loc loc;
	int fail;
} Lin;

static int
in_axes(const Lin *L, int d)
{
	for (int k = 0; k < L->naxes; k++)
		if (L->axes[k] == d)
			return 1;
	return 0;
}

// Is dst's node v (of the summed shape) constant along A?
static int
const_along(const Graph *g, NodeId v, const Lin *L, int depth)
{
	const Node *nd = &g->node[v];
	if (depth > 6)
		return 0;
	if (nd->op == OP_full)
		return 1;
	if (nd->op == OP_broadcast) {
		const Shape *s = ir_shape(g, ir_in1(g, v, 0)), *t = ir_shape(g, v);
		if (s->rank != t->rank)
			return 0;
		for (int k = 0; k < L->naxes; k++)
			if (s->dim[L->axes[k]] != 1)
				return 0;
		return 1;
	}
	if (nd->op == OP_add || nd->op == OP_sub || nd->op == OP_mul || nd->op == OP_div)
		return const_along(g, ir_in1(g, v, 0), L, depth + 1) &&
		       const_along(g, ir_in1(g, v, 1), L, depth + 1);
	if (nd->op == OP_neg)
		return const_along(g, ir_in1(g, v, 0), L, depth + 1);
	return 0;
}

// v (const_along) at the sum's shape: its value at any point of A.
static NodeId
sq_const(Graph *g, NodeId v, Lin *L)
{
	const Node nd = g->node[v];
	if (nd.op == OP_full) {
		double c;
		FADC_ASSERT(b_const_value(g, v, &c), "simplify: a full without a value");
		return b_full(g, c, (DType)nd.dtype, L->rs, L->loc);
	}
	if (nd.op == OP_broadcast) {
		NodeId s = ir_in1(g, v, 0);
		const Shape *ss = ir_shape(g, s);
		Shape q = {0};
		for (int d = 0; d < ss->rank; d++)
			if (L->keepdim || !in_axes(L, d))
				q.dim[q.rank++] = ss->dim[d];
		return b_broadcast(g, b_reshape(g, s, &q, L->loc), L->rs, L->loc);
	}
	NodeId a = sq_const(g, ir_in1(g, v, 0), L);
	if (nd.op == OP_neg)
		return b_neg(g, a, L->loc);
	NodeId b = sq_const(g, ir_in1(g, v, 1), L);
	switch (nd.op) {
	case OP_add:
		return b_add(g, a, b, L->loc);
	case OP_sub:
		return b_sub(g, a, b, L->loc);
	case OP_mul:
		return b_mul(g, a, b, L->loc);
	default: // OP_div
		return b_op2(g, OP_div, a ? a : b_full(g, 0, (DType)nd.dtype, L->rs, L->loc), b,
		             L->loc);
	}
}

// Is e = x - broadcast(mean(x, A, keepdim=1)) (then sum_A(e) = 0)?
static int
centered(const Graph *g, NodeId e, const Lin *L)
{
	if (g->node[e].op != OP_sub)
		return 0;
	NodeId x = ir_in1(g, e, 0), bc = ir_in1(g, e, 1);
	if (g->node[bc].op != OP_broadcast || g->node[ir_in1(g, bc, 0)].op != OP_mean)
		return 0;
	NodeId mn = ir_in1(g, bc, 0);
	if (ir_in1(g, mn, 0) != x)
		return 0;
	Attrs a;
	ir_attrs_get(g, mn, &a);
	if (!a.a[1].i || a.a[0].n != L->naxes)
		return 0;
	for (int k = 0; k < a.a[0].n; k++)
		if (!in_axes(L, (int)a.a[0].v[k]))
			return 0;
	return 1;
}

// sum_A(e) as a combination of older sums (0: zero; L->fail set where it
// is not one).
static NodeId
lin_sum(Graph *g, NodeId e, Lin *L, int depth)
{
	if (L->fail)
		return 0;
	if (depth > 8) {
		L->fail = 1;
		return 0;
	}
	const Node nd = g->node[e];
	if (centered(g, e, L))
		return 0;
	switch (nd.op) {
	case OP_add:
	case OP_sub: {
		NodeId a = lin_sum(g, ir_in1(g, e, 0), L, depth + 1);
		NodeId b = lin_sum(g, ir_in1(g, e, 1), L, depth + 1);
		if (L->fail)
			return 0;
		return nd.op == OP_add ? b_add(g, a, b, L->loc) : b_sub(g, a, b, L->loc);
	}
	case OP_neg: {
		NodeId a = lin_sum(g, ir_in1(g, e, 0), L, depth + 1);
		return L->fail ? 0 : b_neg(g, a, L->loc);
	}
	case OP_mul:
	case OP_div: {
		NodeId x = ir_in1(g, e, 0), y = ir_in1(g, e, 1);
		int cy = const_along(g, y, L, 0);
		if (nd.op == OP_mul && !cy && const_along(g, x, L, 0)) {
			NodeId t = x;
			x = y;
			y = t;
			cy = 1;
		}
		if (cy && !const_along(g, x, L, 0)) {
			NodeId a = lin_sum(g, x, L, depth + 1);
			if (L->fail || !a)
				return 0;
			NodeId f = sq_const(g, y, L);
			return nd.op == OP_mul ? b_mul(g, a, f, L->loc) : b_op2(g, OP_div, a, f, L->loc);
		}
		break;
	}
	default:
		break;
	}
	// A core: an older sum_A(e), as it is or with the other keepdim.
	for (int kd = 0; kd < 2; kd++) {
		int keep = kd ? !L->keepdim : L->keepdim;
		NodeId m = b_sum(g, e, L->axes, L->naxes, keep, L->loc);
		NodeId r = m < L->base ? m : cse_probe(g, m, L->cse, 0);
		if (r && r < L->base)
			return b_reshape(g, r, L->rs, L->loc);
	}
	L->fail = 1;
	return 0;
}

// sum_A(x) over dst's node x, rewritten (sum_linear above), or 0.
static NodeId
sum_linear(Graph *dst, NodeId x, const Attrs *a, const Shape *rs, Cse *cse, Loc loc)
{
	int op = dst->node[x].op;
	if (!ir_dtype_is_float((DType)dst->node[x].dtype) ||
	    (op != OP_add && op != OP_sub && op != OP_neg && op != OP_mul && op != OP_div))
		return 0;
	Lin L = {.axes = a->a[0].v, .naxes = a->a[0].n, .keepdim = (int)a->a[1].i, .rs = rs,
	         .base = dst->nnode, .cse = cse, .loc = loc};
	NodeId r = lin_sum(dst, x, &L, 0);
	if (L.fail)
		return 0;
	return r ? r : b_full(dst, 0, (DType)dst->node[x].dtype, rs, loc);
}

// Rebuilds node n of src in dst with operands in[], simplified.
static NodeId
rebuild(Graph *dst, const Graph *src, NodeId n, const NodeId *in, Cse *cse)
{
	const Node *nd = &src->node[n];
	Loc loc = nd->loc;
	const OpInfo *oi = ir_op(nd->op);
	Attrs a;
	ir_attrs_get(src, n, &a);
	// Constant folding of elementwise ops: of i64 operands exactly (above),
	// of others by the interpreter.
	if ((oi->flags & F_ELEMWISE) && !(oi->flags & F_RANDOM) && nd->nin <= 2 &&
	    (nd->dtype == DT_I64 || nd->dtype == DT_BOOL)) {
		int64_t x[2] = {0, 0}, v;
		int all = 1;
		for (int i = 0; i < nd->nin; i++) {
			all &= dst->node[in[i]].op == OP_full && dst->node[in[i]].dtype == DT_I64;
			if (all)
				x[i] = const_i64(dst, in[i]);
		}
		if (all && fold_i64(nd->op, x, &v))
			return full_int(dst, v, (DType)nd->dtype, &src->shape[nd->shape], loc);
	}
	if ((oi->flags & F_ELEMWISE) && !(oi->flags & F_RANDOM) && nd->nin <= 4) {
		double cv[4];
		int all = 1;
		for (int i = 0; i < nd->nin; i++)
			all &= b_const_value(dst, in[i], &cv[i]);
		double v;
		// An f32 `full` is an f32 value (the interpreter rounds it, as
		// every backend stores it), but an f32 op computes in double in the
		// interpreter: folding a result that f32 cannot hold would round
		// it where the unfolded graph does not, and graphs that fold
		// different constants (hvp and vhp, jacfwd and jacobian) would
		// differ at f32 precision.  Such a node is kept.
		if (all && fold_value(src, n, cv, &v) &&
		    (nd->dtype != DT_F32 || (double)(float)v == v))
			return b_full(dst, v, (DType)nd->dtype, &src->shape[nd->shape], loc);
	}
	// A sum of a constant c over the axes is c times their count, a mean is
	// c, a max or min c (a mean over an empty axis is left: it is NaN).
	// Derivatives make such sums: the gradient of a broadcast of ones
	// (ppl_robust_reg's 22 copies of its likelihood) is sum(ones) = 22, a
	// reduction kernel and a barrier on the GPU when left in.  Folded under
	// the same rule as elementwise ops: only where f32 holds the value.
	double c;
	if ((nd->op == OP_sum || nd->op == OP_max || nd->op == OP_min) && nd->dtype == DT_I64 &&
	    dst->node[in[0]].op == OP_full) { // exactly, wrapping as fold_i64
		const Shape *xs = ir_shape(src, ir_in1(src, n, 0));
		uint64_t count = 1;
		for (int k = 0; k < a.a[0].n; k++)
			count *= (uint64_t)xs->dim[a.a[0].v[k]];
		int64_t ci = const_i64(dst, in[0]);
		if (count > 0 || nd->op == OP_sum)
			return full_int(dst, nd->op == OP_sum ? (int64_t)((uint64_t)ci * count) : ci,
			                DT_I64, &src->shape[nd->shape], loc);
	}
	if ((nd->op == OP_sum || nd->op == OP_mean || nd->op == OP_max || nd->op == OP_min) &&
	    nd->dtype != DT_I64 && b_const_value(dst, in[0], &c)) {
		const Shape *xs = ir_shape(src, ir_in1(src, n, 0));
		double count = 1;
		for (int k = 0; k < a.a[0].n; k++)
			count *= (double)xs->dim[a.a[0].v[k]];
		double v = nd->op == OP_sum ? c * count : c;
		if ((count > 0 || nd->op == OP_sum) && (nd->dtype != DT_F32 || (double)(float)v == v))
			return b_full(dst, v, (DType)nd->dtype, &src->shape[nd->shape], loc);
	}
	// Identities, through the builders; a node they build goes through the
	// CSE table like any other (a duplicate they built is left to DCE).
	uint32_t before = dst->nnode;
	NodeId r = 0;
	if (nd->op == OP_sum && !getenv("FADC_NO_SUM_LINEAR")) {
		r = sum_linear(dst, in[0], &a, &src->shape[nd->shape], cse, loc);
		if (r)
			return r < before ? r : cse_node(dst, r, cse);
	}
	switch (nd->op) {
	case OP_add:
		r = b_add(dst, in[0], in[1], loc);
		break;
	case OP_sub:
		r = b_sub(dst, in[0], in[1], loc);
		break;
	case OP_mul:
		if (ir_dtype_is_float((DType)nd->dtype)) { // x*0 = 0 only for floats' symbolic zeros
			r = b_mul(dst, in[0], in[1], loc);
			if (!r)
				r = b_full(dst, 0, (DType)nd->dtype, &src->shape[nd->shape], loc);
		}
		break;
	case OP_matmul: { // a product with symbolic zeros (a shard's basis part: pass_vmap_rows), as x*0
		double z;
		if (ir_dtype_is_float((DType)nd->dtype) &&
		    ((b_const_value(dst, in[0], &z) && z == 0) || (b_const_value(dst, in[1], &z) && z == 0)))
			r = b_full(dst, 0, (DType)nd->dtype, &src->shape[nd->shape], loc);
		break;
	}
	case OP_neg:
		r = b_neg(dst, in[0], loc);
		break;
	case OP_reshape:
		r = b_reshape(dst, in[0], &src->shape[nd->shape], loc);
		break;
	case OP_broadcast:
		r = b_broadcast(dst, in[0], &src->shape[nd->shape], loc);
		break;
	case OP_permute:
		r = b_permute(dst, in[0], a.a[0].v, loc);
		break;
	case OP_cast:
		r = b_cast(dst, in[0], (DType)a.a[0].i, loc);
		break;
	default:
		break;
	}
	if (r)
		return r < before ? r : cse_node(dst, r, cse);
	// CSE.
	Node key = *nd;
	key.shape = ir_shape_intern(dst, &src->shape[nd->shape]);
	uint64_t h = node_hash(dst, &key, in, &a);
	uint32_t i = (uint32_t)h & (cse->cap - 1);
	for (; cse->slot[i]; i = (i + 1) & (cse->cap - 1))
		if (same_node(dst, cse->slot[i], &key, in, &a))
			return cse->slot[i];
	NodeId m = ir_emit(dst, nd->op, in, nd->nin, &a, loc);
	cse->slot[i] = m;
	return m;
}

Graph *
pass_simplify(const Graph *src)
{
	Graph *dst = ir_graph_new(src->name, src->src);
	NodeId *map = arena_alloc_array(dst->arena, src->nnode, sizeof *map);
	Cse cse = {.cap = 64};
	while (cse.cap < 2 * src->nnode)
		cse.cap *= 2;
	cse.slot = calloc(cse.cap, sizeof *cse.slot);
	FADC_ASSERT(cse.slot, "out of memory");
	// Inputs first, in their order (their ids stay small and stable).
	for (uint32_t k = 0; k < src->nsub; k++)
		ir_add_sub(dst, pass_simplify(src->sub[k]));
	for (uint32_t k = 0; k < src->ninput; k++) {
		NodeId n = src->input[k].node;
		map[n] = ir_add_input(dst, src->input[k].name, src->input[k].kind,
		                      (DType)src->node[n].dtype, ir_shape(src, n), src->node[n].loc);
	}
	for (NodeId n = 1; n < src->nnode; n++) {
		if (src->node[n].op == OP_input)
			continue;
		NodeId in[256];
		for (int i = 0; i < src->node[n].nin; i++)
			in[i] = map[ir_in1(src, n, i)];
		map[n] = rebuild(dst, src, n, in, &cse);
		// A symbolic zero from the builders becomes a real zero here.
		if (!map[n])
			map[n] = b_full(dst, 0, (DType)src->node[n].dtype, ir_shape(src, n), src->node[n].loc);
	}
	free(cse.slot);
	for (uint32_t k = 0; k < src->nout; k++)
		ir_add_output(dst, map[src->out[k].node], src->out[k].name, src->out[k].writeback);
	Graph *r = pass_dce(dst);
	ir_graph_free(dst);
	return r;
}

Graph *
pass_dce(const Graph *src)
{
	uint8_t *live = calloc(src->nnode + 1, 1);
	FADC_ASSERT(live, "out of memory");
	for (uint32_t k = 0; k < src->nout; k++)
		live[src->out[k].node] = 1;
	for (uint32_t k = 0; k < src->ninput; k++)
		live[src->input[k].node] = 1;
	for (NodeId n = src->nnode; n-- > 1;)
		if (live[n])
			for (int i = 0; i < src->node[n].nin; i++)
				live[ir_in1(src, n, i)] = 1;
	Graph *dst = ir_graph_new(src->name, src->src);
	NodeId *map = arena_alloc_array(dst->arena, src->nnode, sizeof *map);
	// Bodies used by live scans only; keep their order.
	uint32_t *submap = arena_alloc_array(dst->arena, src->nsub + 1, sizeof *submap);
	uint8_t *used = arena_alloc_array(dst->arena, src->nsub + 1, 1);
	for (NodeId n = 1; n < src->nnode; n++)
		if (live[n] && src->node[n].op == OP_scan)
			used[ir_attr_int(src, n, "body")] = 1;
	for (uint32_t k = 0; k < src->nsub; k++)
		if (used[k])
			submap[k] = ir_add_sub(dst, pass_dce(src->sub[k]));
	for (NodeId n = 1; n < src->nnode; n++) {
		if (!live[n])
			continue;
		const Node *nd = &src->node[n];
		if (nd->op == OP_input) {
			const Input *in = &src->input[ir_attr_int(src, n, "index")];
			map[n] = ir_add_input(dst, in->name, in->kind, (DType)nd->dtype, ir_shape(src, n), nd->loc);
			continue;
		}
		NodeId in[256];
		for (int i = 0; i < nd->nin; i++)
			in[i] = map[ir_in1(src, n, i)];
		Attrs a;
		ir_attrs_get(src, n, &a);
		if (nd->op == OP_scan)
			a.a[0].i = submap[a.a[0].i];
		map[n] = ir_emit(dst, nd->op, in, nd->nin, &a, nd->loc);
	}
	for (uint32_t k = 0; k < src->nout; k++)
		ir_add_output(dst, map[src->out[k].node], src->out[k].name, src->out[k].writeback);
	free(live);
	return dst;
}
