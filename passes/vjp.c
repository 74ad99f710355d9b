// passes/vjp.c -- reverse mode: from f, a graph computing f and the
// vector-Jacobian product v^T J for each param.
//
// The output graph is a copy of f followed by the backward part.  Adjoints
// live in a side table indexed by f's node ids (adj[n] is a node of the new
// graph, 0 = symbolic zero) and are accumulated by walking f's ids
// downwards: ids are a topological order, so every user of n is visited
// before n.  Each op's rule is found from its row of ops.def: elementwise
// rules multiply the incoming adjoint by the row's derivative column
// (written once in the scalar DSL, passes/diff.h); the others are written
// below by hand.  Every rule builds only ops of the table, so the result can
// be differentiated again (hvp = jvp of vjp, vhp = vjp of vjp).
//
// Only nodes that depend on a param and have a nonzero adjoint are visited;
// reaching a non-differentiable op that way is a user error, reported at
// the op's source location, never a silent zero.
#include <string.h>

#include "diff.h"
#include "passes.h"

typedef struct Vjp {
	const Graph *f;
	Graph *g;
	NodeId *map; // f id -> g id of the copied forward value
	NodeId *adj; // f id -> g id of its adjoint, 0 = zero
	uint8_t *dep; // f id -> depends on a param
	Loc *errloc;
	char *err;
	size_t errlen;
	int failed;
	NodeId **tup; // f id of a scan -> adjoints of its tuple's values (passes/scan.c)
} Vjp;

#define IN(i) ir_in1(v->f, self, i)
#define DEP(i) (v->dep[IN(i)])
#define M(n) (v->map[n])
#define G (v->adj[self])

static void
acc(Vjp *v, NodeId fnode, NodeId contrib)
{
	if (!contrib || !v->dep[fnode])
		return;
	Loc loc = v->g->node[contrib].loc;
	v->adj[fnode] = b_add(v->g, v->adj[fnode], contrib, loc);
}

static void
fail(Vjp *v, NodeId self, const char *what)
{
	if (v->failed)
		return;
	v->failed = 1;
	*v->errloc = v->f->node[self].loc;
	snprintf(v->err, v->errlen, "cannot differentiate through %s: %s", ir_op(v->f->node[self].op)->name,
	         what);
}

// Elementwise rules from the table's derivative columns.
#define ELEM_PRE                                                                                   \
	Graph *g = v->g;                                                                           \
	Loc loc = v->f->node[self].loc;                                                            \
	NodeId r = M(self), x0 = M(IN(0)), x1 = v->f->node[self].nin > 1 ? M(IN(1)) : 0;          \
	Attrs at;                                                                                  \
	ir_attrs_get(v->f, self, &at);                                                             \
	(void)x0, (void)x1, (void)at, (void)r

// clang-format off
#define UNARY(n, fl, cost, f, d0)                                                                  \
	static void vjp_##n(Vjp *v, NodeId self) { ELEM_PRE; if (DEP(0)) acc(v, IN(0), MUL(G, d0)); }
#define UNARYA(n, fl, cost, at_, f, d0) UNARY(n, fl, cost, f, d0)
#define BINARY(n, fl, cost, f, d0, d1)                                                             \
	static void vjp_##n(Vjp *v, NodeId self) {                                                 \
		ELEM_PRE;                                                                          \
		if (DEP(0)) acc(v, IN(0), MUL(G, d0));                                             \
		if (DEP(1)) acc(v, IN(1), MUL(G, d1));                                             \
	}
#define CMP(n, fl, cost, f) static void vjp_##n(Vjp *v, NodeId self) { fail(v, self, "its result is bool"); }
#include "ops.def" // UNARY UNARYA BINARY CMP: the elementwise rules
// clang-format on

static void
nondiff(Vjp *v, NodeId self)
{
	for (int i = 0; i < v->f->node[self].nin; i++)
		if (DEP(i))
			fail(v, self, "it is not differentiable");
}

static void vjp_input(Vjp *v, NodeId self) { (void)v, (void)self; }
static void vjp_full(Vjp *v, NodeId self) { (void)v, (void)self; }
static void vjp_iota(Vjp *v, NodeId self) { (void)v, (void)self; }
static void vjp_uniform(Vjp *v, NodeId self) { nondiff(v, self); }
static void vjp_normal(Vjp *v, NodeId self) { nondiff(v, self); }
static void vjp_gamma(Vjp *v, NodeId self) { nondiff(v, self); }
static void vjp_exponential(Vjp *v, NodeId self) { nondiff(v, self); }
static void vjp_bernoulli(Vjp *v, NodeId self) { nondiff(v, self); }
static void vjp_kaiming_normal(Vjp *v, NodeId self) { nondiff(v, self); }
static void vjp_kaiming_uniform(Vjp *v, NodeId self) { nondiff(v, self); }
static void vjp_argmax(Vjp *v, NodeId self) { nondiff(v, self); }
static void vjp_one_hot(Vjp *v, NodeId self) { nondiff(v, self); }
static void vjp_not(Vjp *v, NodeId self) { nondiff(v, self); }
static void vjp_linear_sum_assignment(Vjp *v, NodeId self) { nondiff(v, self); }

static void
vjp_cast(Vjp *v, NodeId self)
{
	DType from = (DType)v->f->node[IN(0)].dtype;
	if (!ir_dtype_is_float(from)) {
		fail(v, self, "its operand is not a float (a comparison or an integer value)");
		return;
	}
	acc(v, IN(0), b_cast(v->g, G, from, v->f->node[self].loc));
}

// where(c, a, b): the adjoint goes to a where c holds, to b elsewhere.
static void
vjp_where(Vjp *v, NodeId self)
{
	Loc loc = v->f->node[self].loc;
	NodeId c = M(IN(0));
	if (DEP(1))
		acc(v, IN(1), b_where(v->g, c, G, 0, loc));
	if (DEP(2))
		acc(v, IN(2), b_where(v->g, c, 0, G, loc));
}

// The shape of a reduction's result with keepdim, and the adjoint (or the
// result) brought to it and broadcast back to the operand's shape.
static NodeId
unreduce(Vjp *v, NodeId self, NodeId gnode)
{
	const Graph *f = v->f;
	const Shape *xs = ir_shape(f, IN(0));
	Attrs a;
	ir_attrs_get(f, self, &a);
	Shape keep = *xs;
	for (int i = 0; i < a.a[0].n; i++)
		keep.dim[a.a[0].v[i]] = 1;
	Loc loc = f->node[self].loc;
	return b_broadcast(v->g, b_reshape(v->g, gnode, &keep, loc), xs, loc);
}

static int64_t
reduced_count(const Graph *f, NodeId self)
{
	const Shape *xs = ir_shape(f, ir_in1(f, self, 0));
	Attrs a;
	ir_attrs_get(f, self, &a);
	int64_t n = 1;
	for (int i = 0; i < a.a[0].n; i++)
		n *= xs->dim[a.a[0].v[i]];
	return n;
}

static void
vjp_sum(Vjp *v, NodeId self)
{
	acc(v, IN(0), unreduce(v, self, G));
}

// mean = sum / n
static void
vjp_mean(Vjp *v, NodeId self)
{
	Loc loc = v->f->node[self].loc;
	NodeId gb = unreduce(v, self, G);
	int64_t n = reduced_count(v->f, self);
	// Divide by n rather than multiply by 1/n: n is exact in f32 (below
	// 2^24), 1/n is not, and forward mode's `mean` divides exactly too.
	if (!n)
		return; // an empty mean has no elements to receive an adjoint
	acc(v, IN(0), b_op2(v->g, OP_div, gb, b_full_like(v->g, (double)n, gb, loc), loc));
}

// max/min: the adjoint is shared evenly by the elements equal to the
// result (torch.amax's convention); the mask is a constant of the
// derivative, so the rule is linear in G and differentiable again.
static void
vjp_extremum(Vjp *v, NodeId self)
{
	Graph *g = v->g;
	Loc loc = v->f->node[self].loc;
	NodeId x = M(IN(0));
	NodeId rb = unreduce(v, self, M(self));
	// where, not cast: the mask is a constant of the derivative, and where's
	// condition is not differentiated (a cast of a comparison would be).
	NodeId mask = b_where(g, b_op2(g, OP_eq, x, rb, loc), b_full_like(g, 1, x, loc),
	                      b_full_like(g, 0, x, loc), loc);
	Attrs a;
	ir_attrs_get(v->f, self, &a);
	NodeId cnt = b_sum(g, mask, a.a[0].v, a.a[0].n, 1, loc);
	NodeId share = b_op2(g, OP_div, mask, b_broadcast(g, cnt, ir_shape(g, x), loc), loc);
	acc(v, IN(0), b_mul(g, unreduce(v, self, G), share, loc));
}

static void vjp_max(Vjp *v, NodeId self) { vjp_extremum(v, self); }
static void vjp_min(Vjp *v, NodeId self) { vjp_extremum(v, self); }

// d logsumexp(x) / dx = exp(x - logsumexp(x)) = softmax(x)
static void
vjp_logsumexp(Vjp *v, NodeId self)
{
	Graph *g = v->g;
	Loc loc = v->f->node[self].loc;
	NodeId sm = b_op1(g, OP_exp, b_sub(g, M(IN(0)), unreduce(v, self, M(self)), loc), loc);
	acc(v, IN(0), b_mul(g, unreduce(v, self, G), sm, loc));
}

static void
vjp_reshape(Vjp *v, NodeId self)
{
	acc(v, IN(0), b_reshape(v->g, G, ir_shape(v->f, IN(0)), v->f->node[self].loc));
}

static void
vjp_permute(Vjp *v, NodeId self)
{
	int64_t p[IR_MAXDIM], inv[IR_MAXDIM];
	int n = ir_attr_ints(v->f, self, "perm", p);
	for (int i = 0; i < n; i++)
		inv[p[i]] = i;
	acc(v, IN(0), b_permute(v->g, G, inv, v->f->node[self].loc));
}

static void
vjp_broadcast(Vjp *v, NodeId self)
{
	acc(v, IN(0), b_unbroadcast(v->g, G, ir_shape(v->f, IN(0)), v->f->node[self].loc));
}

static void
vjp_resize(Vjp *v, NodeId self)
{
	// resize keeps the first elements in flat order: its transpose resizes back.
	Attrs a;
	ir_attrs_default(OP_resize, &a);
	const Shape *xs = ir_shape(v->f, IN(0));
	a.a[0].n = xs->rank;
	memcpy(a.a[0].v, xs->dim, sizeof(int64_t) * (size_t)xs->rank);
	NodeId gn = G;
	acc(v, IN(0), b_attr(v->g, OP_resize, &gn, 1, &a, v->f->node[self].loc));
}

// slice: the adjoint lands in the sliced region of zeros.
static void
vjp_slice(Vjp *v, NodeId self)
{
	Attrs a;
	ir_attrs_get(v->f, self, &a);
	Loc loc = v->f->node[self].loc;
	NodeId in[2] = {b_full_like(v->g, 0, M(IN(0)), loc), G};
	acc(v, IN(0), b_attr(v->g, OP_slice_update, in, 2, &a, loc));
}

static void
vjp_slice_update(Vjp *v, NodeId self)
{
	Attrs a;
	ir_attrs_get(v->f, self, &a);
	Loc loc = v->f->node[self].loc;
	if (DEP(0)) {
		NodeId in[2] = {G, b_full_like(v->g, 0, M(IN(1)), loc)};
		acc(v, IN(0), b_attr(v->g, OP_slice_update, in, 2, &a, loc));
	}
	if (DEP(1)) {
		NodeId gn = G;
		acc(v, IN(1), b_attr(v->g, OP_slice, &gn, 1, &a, loc));
	}
}

// pad: the adjoint of the interior.
static void
vjp_pad(Vjp *v, NodeId self)
{
	Attrs pa, a;
	ir_attrs_get(v->f, self, &pa);
	ir_attrs_default(OP_slice, &a);
	const Shape *xs = ir_shape(v->f, IN(0));
	a.a[0].n = a.a[1].n = a.a[2].n = xs->rank;
	for (int i = 0; i < xs->rank; i++) {
		a.a[0].v[i] = pa.a[0].v[i];
		a.a[1].v[i] = pa.a[0].v[i] + xs->dim[i];
		a.a[2].v[i] = 1;
	}
	NodeId gn = G;
	acc(v, IN(0), b_attr(v->g, OP_slice, &gn, 1, &a, v->f->node[self].loc));
}

static void
vjp_concat(Vjp *v, NodeId self)
{
	int64_t ax = ir_attr_int(v->f, self, "axis");
	const Shape *rs = ir_shape(v->f, self);
	int64_t off = 0;
	for (int k = 0; k < v->f->node[self].nin; k++) {
		const Shape *xs = ir_shape(v->f, IN(k));
		if (DEP(k)) {
			Attrs a;
			ir_attrs_default(OP_slice, &a);
			a.a[0].n = a.a[1].n = a.a[2].n = rs->rank;
			for (int i = 0; i < rs->rank; i++) {
				a.a[0].v[i] = i == ax ? off : 0;
				a.a[1].v[i] = i == ax ? off + xs->dim[i] : rs->dim[i];
				a.a[2].v[i] = 1;
			}
			NodeId gn = G;
			acc(v, IN(k), b_attr(v->g, OP_slice, &gn, 1, &a, v->f->node[self].loc));
		}
		off += xs->dim[ax];
	}
}

// take / take_along scatter the adjoint back; their *_add forms pass it
// through to x and gather it for the update.
static void
vjp_take_like(Vjp *v, NodeId self, int addop)
{
	Attrs a;
	ir_attrs_get(v->f, self, &a);
	Loc loc = v->f->node[self].loc;
	// Indices are discrete: whatever they depend on (DETR's matching), they
	// are constants of the derivative.
	NodeId in[3] = {b_full_like(v->g, 0, M(IN(0)), loc), M(IN(1)), G};
	acc(v, IN(0), b_attr(v->g, addop, in, 3, &a, loc));
}

static void vjp_take(Vjp *v, NodeId self) { vjp_take_like(v, self, OP_take_add); }
static void vjp_take_along(Vjp *v, NodeId self) { vjp_take_like(v, self, OP_take_along_add); }

static void
vjp_add_like(Vjp *v, NodeId self, int takeop)
{
	Attrs a;
	ir_attrs_get(v->f, self, &a);
	Loc loc = v->f->node[self].loc;
	acc(v, IN(0), G);
	if (DEP(2)) {
		NodeId in[2] = {G, M(IN(1))};
		acc(v, IN(2), b_attr(v->g, takeop, in, 2, &a, loc));
	}
}

static void vjp_take_add(Vjp *v, NodeId self) { vjp_add_like(v, self, OP_take); }
static void vjp_take_along_add(Vjp *v, NodeId self) { vjp_add_like(v, self, OP_take_along); }

// C = A B:  dA = G B^T,  dB = A^T G
static void
vjp_matmul(Vjp *v, NodeId self)
{
	Graph *g = v->g;
	Loc loc = v->f->node[self].loc;
	if (DEP(0))
		acc(v, IN(0), b_matmul(g, G, b_transpose_last(g, M(IN(1)), loc), loc));
	if (DEP(1))
		acc(v, IN(1), b_matmul(g, b_transpose_last(g, M(IN(0)), loc), G, loc));
}

// Placement: the adjoint travels back the other way.
static void
vjp_to_host(Vjp *v, NodeId self)
{
	acc(v, IN(0), b_op1(v->g, OP_to_device, G, v->f->node[self].loc));
}

static void
vjp_to_device(Vjp *v, NodeId self)
{
	acc(v, IN(0), b_op1(v->g, OP_to_host, G, v->f->node[self].loc));
}

// ---------------------------------------------------------------- window ops
// Every rule below builds only window ops of the table (conv, the pools,
// upsampling and their derivative ops), whose own rules follow here, so
// derivatives of every order stay inside the table.  A derivative op's
// attributes are its forward op's, plus a `size` or `kernel` slot that
// fixes its result's spatial size (ops.def).

// Node self's attributes, and slot `name` of op (when name is not NULL)
// set to the spatial sizes of f's node n.
static Attrs
win_attrs(const Vjp *v, NodeId self, int op, const char *name, NodeId n)
{
	Attrs a;
	ir_attrs_get(v->f, self, &a);
	if (name) {
		int k = ir_attr_index(op, name);
		const Shape *s = ir_shape(v->f, n);
		FADC_ASSERT(k >= 0, name);
		a.a[k].n = s->rank - 2;
		memcpy(a.a[k].v, s->dim + 2, sizeof(int64_t) * (size_t)(s->rank - 2));
	}
	return a;
}

static NodeId
win_op(Vjp *v, NodeId self, int op, NodeId x, NodeId y, const Attrs *a)
{
	NodeId in[2] = {x, y};
	return b_attr(v->g, op, in, y ? 2 : 1, a, v->f->node[self].loc);
}

// With T(x, w, g) = <conv(x, w), g>, conv(x, w) = dT/dg,
// conv_input_grad(g, w) = dT/dx and conv_weight_grad(x, g) = dT/dw; the
// adjoint G of one of them pairs with it as T with G in its slot.
// y = conv(x, w):  <y, G> = T(x, w, G), so
//   dx = conv_input_grad(G, w),   dw = conv_weight_grad(x, G).
static void
vjp_conv(Vjp *v, NodeId self)
{
	if (DEP(0)) {
		Attrs a = win_attrs(v, self, OP_conv_input_grad, "size", IN(0));
		acc(v, IN(0), win_op(v, self, OP_conv_input_grad, G, M(IN(1)), &a));
	}
	if (DEP(1)) {
		Attrs a = win_attrs(v, self, OP_conv_weight_grad, "kernel", IN(1));
		acc(v, IN(1), win_op(v, self, OP_conv_weight_grad, M(IN(0)), G, &a));
	}
}

// z = conv_input_grad(g, w):  <z, G> = T(G, w, g), so
//   dg = conv(G, w),   dw = conv_weight_grad(G, g).
static void
vjp_conv_input_grad(Vjp *v, NodeId self)
{
	if (DEP(0)) {
		Attrs a = win_attrs(v, self, OP_conv, NULL, 0);
		acc(v, IN(0), win_op(v, self, OP_conv, G, M(IN(1)), &a));
	}
	if (DEP(1)) {
		Attrs a = win_attrs(v, self, OP_conv_weight_grad, "kernel", IN(1));
		acc(v, IN(1), win_op(v, self, OP_conv_weight_grad, G, M(IN(0)), &a));
	}
}

// z = conv_weight_grad(x, g):  <z, G> = T(x, G, g), so
//   dx = conv_input_grad(g, G),   dg = conv(x, G).
static void
vjp_conv_weight_grad(Vjp *v, NodeId self)
{
	if (DEP(0)) {
		Attrs a = win_attrs(v, self, OP_conv_input_grad, "size", IN(0));
		acc(v, IN(0), win_op(v, self, OP_conv_input_grad, M(IN(1)), G, &a));
	}
	if (DEP(1)) {
		Attrs a = win_attrs(v, self, OP_conv, NULL, 0);
		acc(v, IN(1), win_op(v, self, OP_conv, M(IN(0)), G, &a));
	}
}

// y = max_pool(x) = x read at each window's argmax a_o(x), which is
// locally constant in x (the first maximum; ties and padding never move
// it under a small step):  dx = max_pool_grad(x, G).
static void
vjp_max_pool(Vjp *v, NodeId self)
{
	Attrs a = win_attrs(v, self, OP_max_pool_grad, NULL, 0);
	acc(v, IN(0), win_op(v, self, OP_max_pool_grad, M(IN(0)), G, &a));
}

// z = max_pool_grad(x, g): linear in g, derivative 0 in x (nothing flows
// to x);  <max_pool_grad(x, g), G> = <g, max_pool_gather(x, G)>, so
//   dg = max_pool_gather(x, G).
static void
vjp_max_pool_grad(Vjp *v, NodeId self)
{
	Attrs a = win_attrs(v, self, OP_max_pool_gather, NULL, 0);
	if (DEP(1))
		acc(v, IN(1), win_op(v, self, OP_max_pool_gather, M(IN(0)), G, &a));
}

// z = max_pool_gather(x, h): linear in h, derivative 0 in x;
//   dh = max_pool_grad(x, G).
static void
vjp_max_pool_gather(Vjp *v, NodeId self)
{
	Attrs a = win_attrs(v, self, OP_max_pool_grad, NULL, 0);
	if (DEP(1))
		acc(v, IN(1), win_op(v, self, OP_max_pool_grad, M(IN(0)), G, &a));
}

// The linear window ops and their adjoints, X and X_grad:
// <X(x), G> = <x, X_grad(G)>, so dx = X_grad(G) (its size is x's) and the
// adjoint of X_grad is X (its size, where X has one, is X_grad's operand's).
static void
vjp_avg_pool(Vjp *v, NodeId self)
{
	Attrs a = win_attrs(v, self, OP_avg_pool_grad, "size", IN(0));
	acc(v, IN(0), win_op(v, self, OP_avg_pool_grad, G, 0, &a));
}

static void
vjp_avg_pool_grad(Vjp *v, NodeId self)
{
	Attrs a = win_attrs(v, self, OP_avg_pool, NULL, 0);
	acc(v, IN(0), win_op(v, self, OP_avg_pool, G, 0, &a));
}

static void
vjp_adaptive_avg_pool(Vjp *v, NodeId self)
{
	Attrs a = win_attrs(v, self, OP_adaptive_avg_pool_grad, "size", IN(0));
	acc(v, IN(0), win_op(v, self, OP_adaptive_avg_pool_grad, G, 0, &a));
}

static void
vjp_adaptive_avg_pool_grad(Vjp *v, NodeId self)
{
	Attrs a = win_attrs(v, self, OP_adaptive_avg_pool, "size", IN(0));
	acc(v, IN(0), win_op(v, self, OP_adaptive_avg_pool, G, 0, &a));
}

static void
vjp_upsample_bilinear(Vjp *v, NodeId self)
{
	Attrs a = win_attrs(v, self, OP_upsample_bilinear_grad, "size", IN(0));
	acc(v, IN(0), win_op(v, self, OP_upsample_bilinear_grad, G, 0, &a));
}

static void
vjp_upsample_bilinear_grad(Vjp *v, NodeId self)
{
	Attrs a = win_attrs(v, self, OP_upsample_bilinear, "size", IN(0));
	acc(v, IN(0), win_op(v, self, OP_upsample_bilinear, G, 0, &a));
}

// get: the adjoint of one value of a scan's tuple, kept until the scan is
// reached (its gets have larger ids, so they all come first).
static void
vjp_get(Vjp *v, NodeId self)
{
	NodeId s = IN(0);
	if (!v->tup[s])
		v->tup[s] = arena_alloc_array(v->g->arena, v->f->sub[ir_attr_int(v->f, s, "body")]->nout,
		                              sizeof(NodeId));
	int64_t k = ir_attr_int(v->f, self, "index");
	v->tup[s][k] = b_add(v->g, v->tup[s][k], G, v->f->node[self].loc);
	v->adj[s] = G; // marks the scan as reached
}

// scan: a reverse scan of the body's vjp (passes/scan.c).
static void
vjp_scan(Vjp *v, NodeId self)
{
	NodeId *opadj = scan_vjp(v->g, v->f, self, v->map, v->tup[self], v->dep, v->errloc, v->err,
	                         v->errlen);
	if (!opadj) {
		v->failed = 1;
		return;
	}
	for (int i = 0; i < v->f->node[self].nin; i++)
		acc(v, IN(i), opadj[i]);
}

// clang-format off
static void (*const vjp_rule[OP_COUNT])(Vjp *, NodeId) = {
#define UNARY(n, ...)  [OP_##n] = vjp_##n,
#define UNARYA(n, ...) [OP_##n] = vjp_##n,
#define BINARY(n, ...) [OP_##n] = vjp_##n,
#define CMP(n, ...)    [OP_##n] = vjp_##n,
#define OTHER(n, ...)  [OP_##n] = vjp_##n,
#include "ops.def" // all rows: a missing vjp_<op> fails the build
};
// clang-format on

// dep[n]: node n depends on a param (through any operand).
uint8_t *
fill_param_deps(const Graph *f, Arena *a)
{
	uint8_t *dep = arena_alloc_array(a, f->nnode, 1);
	for (NodeId n = 1; n < f->nnode; n++) {
		const Node *nd = &f->node[n];
		if (nd->op == OP_input) {
			dep[n] = f->input[ir_attr_int(f, n, "index")].kind == IN_PARAM;
			continue;
		}
		for (int i = 0; i < nd->nin; i++)
			dep[n] |= dep[ir_in1(f, n, i)];
	}
	return dep;
}

Graph *
pass_vjp(const Graph *f, Loc *errloc, char *err, size_t errlen)
{
	return pass_vjp_ex(f, NULL, 0, errloc, err, errlen);
}

Graph *
pass_vjp_ex(const Graph *f, const uint8_t *outs, int ones, Loc *errloc, char *err, size_t errlen)
{
	Graph *g = ir_graph_new(f->name, f->src);
	Vjp v = {.f = f, .g = g, .errloc = errloc, .err = err, .errlen = errlen};
	*errloc = 0;
	v.map = arena_alloc_array(g->arena, f->nnode, sizeof(NodeId));
	v.adj = arena_alloc_array(g->arena, f->nnode, sizeof(NodeId));
	v.dep = fill_param_deps(f, g->arena);
	v.tup = arena_alloc_array(g->arena, f->nnode, sizeof(NodeId *));
	b_copy_into(g, f, v.map);
	// One cotangent per chosen float output: an input, or ones.
	for (uint32_t k = 0; k < f->nout; k++) {
		NodeId o = f->out[k].node;
		if (!ir_dtype_is_float((DType)f->node[o].dtype) || (outs && !outs[k]))
			continue;
		NodeId vin = ones ? b_full_like(g, 1, v.map[o], f->node[o].loc)
		                  : ir_add_input(g, arena_printf(g->arena, "v.%s", f->out[k].name), IN_ARG,
		                                 (DType)f->node[o].dtype, ir_shape(f, o), f->node[o].loc);
		if (v.dep[o])
			v.adj[o] = b_add(g, v.adj[o], vin, f->node[o].loc);
	}
	for (NodeId n = f->nnode; n-- > 1;) {
		if (!v.adj[n] || !v.dep[n])
			continue;
		vjp_rule[f->node[n].op](&v, n);
		if (v.failed) {
			ir_graph_free(g);
			return NULL;
		}
	}
	for (uint32_t k = 0; k < f->nout; k++)
		ir_add_output(g, v.map[f->out[k].node], f->out[k].name, f->out[k].writeback);
	for (uint32_t i = 0; i < f->ninput; i++) {
		if (f->input[i].kind != IN_PARAM)
			continue;
		NodeId p = f->input[i].node;
		NodeId grad = v.adj[p];
		if (!grad)
			grad = b_full_like(g, 0, v.map[p], f->node[p].loc);
		ir_add_output(g, grad, arena_printf(g->arena, "grad.%s", f->input[i].name), -1);
	}
	return g;
}
