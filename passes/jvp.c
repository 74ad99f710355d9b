// passes/jvp.c -- forward mode: from f, a graph computing f and the
// Jacobian-vector product J t for given param tangents t.
//
// The output graph is a copy of f; tangents live in a side table indexed by
// f's ids (0 = symbolic zero) and are built walking ids upwards.
// Elementwise rules sum t_i · d_i over the operands, with the same
// derivative columns of ops.def as reverse mode (passes/diff.h); the other
// rules apply the linearized op to the tangents.  Conventions that choose
// a subgradient (ties of max/min) are the same as vjp.c's, so that jvp and
// vjp are adjoint linear maps exactly: <v, J t> = <J^T v, t>.
//
// Only nodes that reach an output are visited, so a non-differentiable op
// in dead code is no error.
#include <string.h>

#include "diff.h"
#include "passes.h"

typedef struct Jvp {
	const Graph *f;
	Graph *g;
	NodeId *map; // f id -> g id of the copied value
	NodeId *tan; // f id -> g id of its tangent, 0 = zero
	uint8_t *dep;
	Loc *errloc;
	char *err;
	size_t errlen;
	int failed;
	NodeId **tup; // f id of a scan -> tangents of its tuple's values (passes/scan.c)
} Jvp;

#define IN(i) ir_in1(v->f, self, i)
#define M(n) (v->map[n])
#define T(i) (v->tan[IN(i)])

static void
fail(Jvp *v, NodeId self, const char *what)
{
	if (v->failed)
		return;
	v->failed = 1;
	*v->errloc = v->f->node[self].loc;
	snprintf(v->err, v->errlen, "cannot differentiate through %s: %s", ir_op(v->f->node[self].op)->name,
	         what);
}

#define ELEM_PRE                                                                                   \
	Graph *g = v->g;                                                                           \
	Loc loc = v->f->node[self].loc;                                                            \
	NodeId r = M(self), x0 = M(IN(0)), x1 = v->f->node[self].nin > 1 ? M(IN(1)) : 0;          \
	Attrs at;                                                                                  \
	ir_attrs_get(v->f, self, &at);                                                             \
	(void)x0, (void)x1, (void)at, (void)r

// clang-format off
#define UNARY(n, fl, cost, f, d0)                                                                  \
	static NodeId jvp_##n(Jvp *v, NodeId self) { ELEM_PRE; return T(0) ? MUL(T(0), d0) : 0; }
#define UNARYA(n, fl, cost, at_, f, d0) UNARY(n, fl, cost, f, d0)
#define BINARY(n, fl, cost, f, d0, d1)                                                             \
	static NodeId jvp_##n(Jvp *v, NodeId self) {                                               \
		ELEM_PRE;                                                                          \
		NodeId t = T(0) ? MUL(T(0), d0) : 0;                                               \
		return T(1) ? ADD(t, MUL(T(1), d1)) : t;                                           \
	}
// A bool result has no tangent.
#define CMP(n, fl, cost, f) static NodeId jvp_##n(Jvp *v, NodeId self) { (void)v, (void)self; return 0; }
#include "ops.def" // UNARY UNARYA BINARY CMP: the elementwise rules
// clang-format on

static NodeId
nondiff(Jvp *v, NodeId self)
{
	if (ir_dtype_is_float((DType)v->f->node[self].dtype))
		for (int i = 0; i < v->f->node[self].nin; i++)
			if (v->dep[IN(i)])
				fail(v, self, "it is not differentiable");
	return 0;
}

static NodeId jvp_input(Jvp *v, NodeId self) { (void)self; return v->tan[self]; }
static NodeId jvp_full(Jvp *v, NodeId self) { (void)v, (void)self; return 0; }
static NodeId jvp_iota(Jvp *v, NodeId self) { (void)v, (void)self; return 0; }
static NodeId jvp_uniform(Jvp *v, NodeId self) { return nondiff(v, self); }
static NodeId jvp_normal(Jvp *v, NodeId self) { return nondiff(v, self); }
static NodeId jvp_gamma(Jvp *v, NodeId self) { return nondiff(v, self); }
static NodeId jvp_exponential(Jvp *v, NodeId self) { return nondiff(v, self); }
static NodeId jvp_bernoulli(Jvp *v, NodeId self) { return nondiff(v, self); }
static NodeId jvp_kaiming_normal(Jvp *v, NodeId self) { return nondiff(v, self); }
static NodeId jvp_kaiming_uniform(Jvp *v, NodeId self) { return nondiff(v, self); }
static NodeId jvp_argmax(Jvp *v, NodeId self) { return nondiff(v, self); }
static NodeId jvp_one_hot(Jvp *v, NodeId self) { return nondiff(v, self); }
static NodeId jvp_not(Jvp *v, NodeId self) { return nondiff(v, self); }
static NodeId jvp_linear_sum_assignment(Jvp *v, NodeId self) { return nondiff(v, self); }

static NodeId
jvp_cast(Jvp *v, NodeId self)
{
	DType to = (DType)v->f->node[self].dtype;
	if (!ir_dtype_is_float(to))
		return 0;
	if (!ir_dtype_is_float((DType)v->f->node[IN(0)].dtype)) {
		if (v->dep[IN(0)])
			fail(v, self, "its operand is not a float (a comparison or an integer value)");
		return 0;
	}
	return b_cast(v->g, T(0), to, v->f->node[self].loc);
}

static NodeId
jvp_where(Jvp *v, NodeId self)
{
	return b_where(v->g, M(IN(0)), T(1), T(2), v->f->node[self].loc);
}

// Applies node self's op, with its attributes, to new operands.
static NodeId
same_op(Jvp *v, NodeId self, const NodeId *in, int nin)
{
	Attrs a;
	ir_attrs_get(v->f, self, &a);
	return b_attr(v->g, v->f->node[self].op, in, nin, &a, v->f->node[self].loc);
}

// A linear op of one operand: the same op on the tangent.
static NodeId
linear1(Jvp *v, NodeId self)
{
	if (!T(0))
		return 0;
	NodeId t = T(0);
	return same_op(v, self, &t, 1);
}

// An operand's tangent, or zeros of its type where a linear op of several
// operands needs all of them.
static NodeId
tan_or_zero(Jvp *v, NodeId self, int i)
{
	return T(i) ? T(i) : b_full_like(v->g, 0, M(IN(i)), v->f->node[self].loc);
}

static NodeId jvp_sum(Jvp *v, NodeId self) { return linear1(v, self); }
static NodeId jvp_mean(Jvp *v, NodeId self) { return linear1(v, self); }
static NodeId jvp_reshape(Jvp *v, NodeId self) { return linear1(v, self); }
static NodeId jvp_permute(Jvp *v, NodeId self) { return linear1(v, self); }
static NodeId jvp_broadcast(Jvp *v, NodeId self) { return linear1(v, self); }
static NodeId jvp_slice(Jvp *v, NodeId self) { return linear1(v, self); }
static NodeId jvp_pad_zero(Jvp *v, NodeId self);
static NodeId jvp_pad(Jvp *v, NodeId self) { return jvp_pad_zero(v, self); }
static NodeId jvp_resize(Jvp *v, NodeId self) { return linear1(v, self); }
static NodeId jvp_to_host(Jvp *v, NodeId self) { return linear1(v, self); }
static NodeId jvp_to_device(Jvp *v, NodeId self) { return linear1(v, self); }

// pad's constant value does not move: its tangent pads with 0.
static NodeId
jvp_pad_zero(Jvp *v, NodeId self)
{
	if (!T(0))
		return 0;
	Attrs a;
	ir_attrs_get(v->f, self, &a);
	a.a[2].f = 0;
	NodeId t = T(0);
	return b_attr(v->g, OP_pad, &t, 1, &a, v->f->node[self].loc);
}

static NodeId
jvp_concat(Jvp *v, NodeId self)
{
	int n = v->f->node[self].nin, any = 0;
	NodeId in[256];
	for (int i = 0; i < n; i++)
		any |= T(i) != 0;
	if (!any)
		return 0;
	for (int i = 0; i < n; i++)
		in[i] = tan_or_zero(v, self, i);
	return same_op(v, self, in, n);
}

static NodeId
jvp_slice_update(Jvp *v, NodeId self)
{
	if (!T(0) && !T(1))
		return 0;
	NodeId in[2] = {tan_or_zero(v, self, 0), tan_or_zero(v, self, 1)};
	return same_op(v, self, in, 2);
}

static NodeId
jvp_take_like(Jvp *v, NodeId self)
{
	if (!T(0))
		return 0;
	NodeId in[2] = {T(0), M(IN(1))};
	return same_op(v, self, in, 2);
}

static NodeId jvp_take(Jvp *v, NodeId self) { return jvp_take_like(v, self); }
static NodeId jvp_take_along(Jvp *v, NodeId self) { return jvp_take_like(v, self); }

static NodeId
jvp_add_like(Jvp *v, NodeId self)
{
	if (!T(0) && !T(2))
		return 0;
	NodeId in[3] = {tan_or_zero(v, self, 0), M(IN(1)), tan_or_zero(v, self, 2)};
	return same_op(v, self, in, 3);
}

static NodeId jvp_take_add(Jvp *v, NodeId self) { return jvp_add_like(v, self); }
static NodeId jvp_take_along_add(Jvp *v, NodeId self) { return jvp_add_like(v, self); }

// d(AB) = dA B + A dB
static NodeId
jvp_matmul(Jvp *v, NodeId self)
{
	Loc loc = v->f->node[self].loc;
	NodeId t = b_matmul(v->g, T(0), M(IN(1)), loc);
	return b_add(v->g, t, b_matmul(v->g, M(IN(0)), T(1), loc), loc);
}

// The reduced result brought back to the operand's shape (keepdim, then
// broadcast).
static NodeId
unreduce(Jvp *v, NodeId self, NodeId n)
{
	const Shape *xs = ir_shape(v->f, IN(0));
	Attrs a;
	ir_attrs_get(v->f, self, &a);
	Shape keep = *xs;
	for (int i = 0; i < a.a[0].n; i++)
		keep.dim[a.a[0].v[i]] = 1;
	Loc loc = v->f->node[self].loc;
	return b_broadcast(v->g, b_reshape(v->g, n, &keep, loc), xs, loc);
}

// max/min: the tangents of the maximal elements, averaged (vjp.c's
// convention).
static NodeId
jvp_extremum(Jvp *v, NodeId self)
{
	if (!T(0))
		return 0;
	Graph *g = v->g;
	Loc loc = v->f->node[self].loc;
	NodeId x = M(IN(0));
	NodeId mask = b_where(g, b_op2(g, OP_eq, x, unreduce(v, self, M(self)), loc),
	                      b_full_like(g, 1, x, loc), b_full_like(g, 0, x, loc), loc);
	Attrs a;
	ir_attrs_get(v->f, self, &a);
	NodeId cnt = b_sum(g, mask, a.a[0].v, a.a[0].n, a.a[1].i, loc);
	NodeId s = b_sum(g, b_mul(g, T(0), mask, loc), a.a[0].v, a.a[0].n, a.a[1].i, loc);
	return b_op2(g, OP_div, s, cnt, loc);
}

static NodeId jvp_max(Jvp *v, NodeId self) { return jvp_extremum(v, self); }
static NodeId jvp_min(Jvp *v, NodeId self) { return jvp_extremum(v, self); }

// d logsumexp(x) = Σ softmax(x) dx
static NodeId
jvp_logsumexp(Jvp *v, NodeId self)
{
	if (!T(0))
		return 0;
	Graph *g = v->g;
	Loc loc = v->f->node[self].loc;
	NodeId sm = b_op1(g, OP_exp, b_sub(g, M(IN(0)), unreduce(v, self, M(self)), loc), loc);
	Attrs a;
	ir_attrs_get(v->f, self, &a);
	return b_sum(g, b_mul(g, T(0), sm, loc), a.a[0].v, a.a[0].n, a.a[1].i, loc);
}

// Window ops (the identities are written out in vjp.c).  conv and its two
// adjoints are bilinear: d B(a, b) = B(da, b) + B(a, db).
static NodeId
bilinear(Jvp *v, NodeId self)
{
	NodeId t = 0;
	if (T(0)) {
		NodeId in[2] = {T(0), M(IN(1))};
		t = same_op(v, self, in, 2);
	}
	if (T(1)) {
		NodeId in[2] = {M(IN(0)), T(1)};
		t = b_add(v->g, t, same_op(v, self, in, 2), v->f->node[self].loc);
	}
	return t;
}

static NodeId jvp_conv(Jvp *v, NodeId self) { return bilinear(v, self); }
static NodeId jvp_conv_input_grad(Jvp *v, NodeId self) { return bilinear(v, self); }
static NodeId jvp_conv_weight_grad(Jvp *v, NodeId self) { return bilinear(v, self); }

// max_pool(x) = x at the argmaxes a_o(x), locally constant in x:
//   d max_pool(x) = max_pool_gather(x, dx).
static NodeId
jvp_max_pool(Jvp *v, NodeId self)
{
	if (!T(0))
		return 0;
	Attrs a;
	ir_attrs_get(v->f, self, &a);
	NodeId in[2] = {M(IN(0)), T(0)};
	return b_attr(v->g, OP_max_pool_gather, in, 2, &a, v->f->node[self].loc);
}

// max_pool_grad(x, g) and max_pool_gather(x, h): linear in the second
// operand, derivative 0 in x:  d op(x, g) = op(x, dg).
static NodeId
jvp_argmax_linear(Jvp *v, NodeId self)
{
	if (!T(1))
		return 0;
	NodeId in[2] = {M(IN(0)), T(1)};
	return same_op(v, self, in, 2);
}

static NodeId jvp_max_pool_grad(Jvp *v, NodeId self) { return jvp_argmax_linear(v, self); }
static NodeId jvp_max_pool_gather(Jvp *v, NodeId self) { return jvp_argmax_linear(v, self); }

// The linear window ops and their adjoints: the same op on the tangent.
static NodeId jvp_avg_pool(Jvp *v, NodeId self) { return linear1(v, self); }
static NodeId jvp_avg_pool_grad(Jvp *v, NodeId self) { return linear1(v, self); }
static NodeId jvp_adaptive_avg_pool(Jvp *v, NodeId self) { return linear1(v, self); }
static NodeId jvp_adaptive_avg_pool_grad(Jvp *v, NodeId self) { return linear1(v, self); }
static NodeId jvp_upsample_bilinear(Jvp *v, NodeId self) { return linear1(v, self); }
static NodeId jvp_upsample_bilinear_grad(Jvp *v, NodeId self) { return linear1(v, self); }

// scan: a scan of the body's jvp, carrying tangents beside the values
// (passes/scan.c); the scan's own tangent slot marks it, its gets read
// the tuple's tangents.
static NodeId
jvp_scan(Jvp *v, NodeId self)
{
	NodeId opt[256];
	int any = 0;
	for (int i = 0; i < v->f->node[self].nin; i++)
		any |= (opt[i] = T(i)) != 0;
	if (!any)
		return 0;
	v->tup[self] = scan_jvp(v->g, v->f, self, v->map, opt, v->errloc, v->err, v->errlen);
	if (!v->tup[self])
		v->failed = 1;
	return v->map[self];
}

static NodeId
jvp_get(Jvp *v, NodeId self)
{
	NodeId s = IN(0);
	return v->tup[s] ? v->tup[s][ir_attr_int(v->f, self, "index")] : 0;
}

// clang-format off
static NodeId (*const jvp_rule[OP_COUNT])(Jvp *, NodeId) = {
#define UNARY(n, ...)  [OP_##n] = jvp_##n,
#define UNARYA(n, ...) [OP_##n] = jvp_##n,
#define BINARY(n, ...) [OP_##n] = jvp_##n,
#define CMP(n, ...)    [OP_##n] = jvp_##n,
#define OTHER(n, ...)  [OP_##n] = jvp_##n,
#include "ops.def" // all rows: a missing jvp_<op> fails the build
};
// clang-format on

Graph *
pass_jvp(const Graph *f, Loc *errloc, char *err, size_t errlen)
{
	Graph *g = ir_graph_new(f->name, f->src);
	Jvp v = {.f = f, .g = g, .errloc = errloc, .err = err, .errlen = errlen};
	*errloc = 0;
	v.map = arena_alloc_array(g->arena, f->nnode, sizeof(NodeId));
	v.tan = arena_alloc_array(g->arena, f->nnode, sizeof(NodeId));
	v.dep = fill_param_deps(f, g->arena);
	v.tup = arena_alloc_array(g->arena, f->nnode, sizeof(NodeId *));
	uint8_t *live = arena_alloc_array(g->arena, f->nnode, 1);
	for (uint32_t k = 0; k < f->nout; k++)
		live[f->out[k].node] = 1;
	for (NodeId n = f->nnode; n-- > 1;)
		if (live[n])
			for (int i = 0; i < f->node[n].nin; i++)
				live[ir_in1(f, n, i)] = 1;
	b_copy_into(g, f, v.map);
	for (uint32_t i = 0; i < f->ninput; i++) {
		if (f->input[i].kind != IN_PARAM)
			continue;
		NodeId p = f->input[i].node;
		v.tan[p] = ir_add_input(g, arena_printf(g->arena, "t.%s", f->input[i].name), IN_ARG,
		                        (DType)f->node[p].dtype, ir_shape(f, p), f->node[p].loc);
	}
	for (NodeId n = 1; n < f->nnode; n++) {
		if (!live[n] || !v.dep[n] || f->node[n].op == OP_input)
			continue;
		v.tan[n] = jvp_rule[f->node[n].op](&v, n);
		if (v.failed) {
			ir_graph_free(g);
			return NULL;
		}
	}
	for (uint32_t k = 0; k < f->nout; k++)
		ir_add_output(g, v.map[f->out[k].node], f->out[k].name, f->out[k].writeback);
	for (uint32_t k = 0; k < f->nout; k++) {
		NodeId o = f->out[k].node;
		if (!ir_dtype_is_float((DType)f->node[o].dtype))
			continue;
		NodeId t = v.tan[o] ? v.tan[o] : b_full_like(g, 0, v.map[o], f->node[o].loc);
		ir_add_output(g, t, arena_printf(g->arena, "jvp.%s", f->out[k].name), -1);
	}
	return g;
}
