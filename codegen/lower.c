// codegen/lower.c -- a task graph as kernel IR.
//
// fill_fusion (fuse.c) says which nodes are materialized.  Each of those
// becomes one kernel, in node order, and every other node is rebuilt as a
// scalar expression wherever a kernel reads it: lower_at(n, e) is "the value of
// node n at flat (row-major) index e", a load when n has a buffer and
// otherwise n's own formula with its operands taken at the indices that
// its index map gives.  For layout ops that map is explicit:
//   reshape    x[e]                          (same flat order)
//   broadcast  x[sum_d c_d(e) xst_d], xst_d = 0 on stretched axes
//   permute    x[sum_k c_k(e) xst_perm[k]]
//   slice      x[sum_d (start_d + c_d step_d) xst_d]
//   pad, concat, resize, slice_update: selects on coordinates, with the
//              index clamped into range so that both arms are safe loads
//   take, take_along: the index loaded from idx (clamped)
// where c_d(e) = (e / st_d) % dim_d is the coordinate along axis d; the
// kernel IR's simplifier folds it back into a loop variable.
//
// Elementwise rows come from ops.def: the scalar DSL is defined below as
// kernel-IR builders, so each row's formula f becomes ew_<name>(); no
// scalar formula is written twice.  Helpers (dsl_relu, dsl_sigmoid, ...)
// spell out the interpreter's edge cases (NaN propagation, stable forms) in
// selects and comparisons.  Every other op has its rule, lower_<op>, in
// the table lower_rule built from the rows (as passes/vjp.c's vjp_rule),
// so a row without one fails the build: an expression rule (the value at
// an index) for the MAP and FREE kinds, a kernel rule for the reductions,
// matmul, the scatters and the host op.
//
// Window ops (conv, the pools, upsampling, argmax, their adjoints and the
// convolutions as GEMMs through im2col / col2im) are lower_window.c's;
// lower_impl.h holds what the two files share (Lower, lower_at, ...).
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "codegen.h"
#include "lower_impl.h"

typedef struct Memo {
	NodeId n;
	KxId idx;
	uint32_t gen;
	KxId val;
} Memo;

// Where a graph's input or output lives: buffer `buf` from element `off`
// on (0: from 0).  A scan's body reads step t of a sequence as the
// sequence's buffer at offset t times the step's size, and writes its
// per-step outputs the same way.
typedef struct Bind {
	uint32_t buf;
	KxId off;
} Bind;

static int lower_graph(KProgram *p, const Graph *g, const char *task, const Bind *in,
                       const Bind *out, int loop, char *err, size_t errlen);
static KxId expand(Lower *L, NodeId n, KxId e);

// ---------------------------------------------------------------- the scalar DSL

static KxId
fconst(KProgram *p, KxId like, double v)
{
	return kx_const(p, v, (DType)p->x[like].dtype);
}

static int
xfloat(const KProgram *p, KxId a)
{
	return p->x[a].dtype == DT_F32 || p->x[a].dtype == DT_F64;
}

// relu(x) = x if x > 0 or x is NaN, else 0 (torch.relu propagates NaN).
static KxId
dsl_relu(KProgram *p, KxId x)
{
	KxId z = fconst(p, x, 0);
	return kx_select(p, kx_cmp(p, xfloat(p, x) ? KC_UGT : KC_GT, x, z), x, z);
}

static KxId
dsl_step(KProgram *p, KxId x)
{
	return kx_select(p, kx_cmp(p, KC_GT, x, fconst(p, x, 0)), fconst(p, x, 1), fconst(p, x, 0));
}

// sign(x) = (x > 0) - (x < 0): 0 at 0 and at NaN.
static KxId
dsl_sign(KProgram *p, KxId x)
{
	KxId z = fconst(p, x, 0);
	KxId neg = kx_select(p, kx_cmp(p, KC_LT, x, z), fconst(p, x, -1), z);
	return kx_select(p, kx_cmp(p, KC_GT, x, z), fconst(p, x, 1), neg);
}

// sigmoid(x): 1 / (1 + e^-x) for x >= 0, e^x / (1 + e^x) below, with
// e = exp(-|x|) in both: exp never overflows.
static KxId
dsl_sigmoid(KProgram *p, KxId x)
{
	KxId one = fconst(p, x, 1), e = kx_un(p, KX_EXP, kx_un(p, KX_NEG, kx_un(p, KX_ABS, x)));
	KxId d = kx_bin(p, KX_ADD, one, e);
	return kx_select(p, kx_cmp(p, KC_GE, x, fconst(p, x, 0)), kx_bin(p, KX_DIV, one, d),
	                 kx_bin(p, KX_DIV, e, d));
}

// softplus(x) = log1p(e^-|x|) + max(x, 0): no overflow, no cancellation.
static KxId
dsl_softplus(KProgram *p, KxId x)
{
	KxId z = fconst(p, x, 0);
	KxId l = kx_un(p, KX_LOG1P, kx_un(p, KX_EXP, kx_un(p, KX_NEG, kx_un(p, KX_ABS, x))));
	return kx_bin(p, KX_ADD, l, kx_select(p, kx_cmp(p, KC_GT, x, z), x, z));
}

// xlogy(x, y) = x log y, 0 where x = 0, NaN where y is NaN (torch.xlogy).
static KxId
dsl_xlogy(KProgram *p, KxId x, KxId y)
{
	KxId z = fconst(p, x, 0);
	KxId v = kx_select(p, kx_cmp(p, KC_EQ, x, z), z, kx_bin(p, KX_MUL, x, kx_un(p, KX_LOG, y)));
	return kx_select(p, kx_cmp(p, KC_UNO, y, y), y, v);
}

// clamp(x, lo, hi) = min(max(x, lo), hi) with NaN x kept, lo > hi giving hi.
static KxId
dsl_clamp(KProgram *p, KxId x, KxId lo, KxId hi)
{
	KxId t = kx_select(p, kx_cmp(p, KC_LT, x, lo), lo, x);
	return kx_select(p, kx_cmp(p, KC_GT, t, hi), hi, t);
}

// The DSL of ir/ops.def as kernel-IR builders: p is the program, dt the
// compute dtype of the operands, x and y the operands' expressions and A[]
// the row's attributes (ints converted to double).
#define X x
#define Y y
#define A(i) kx_const(p, A[i], dt)
#define ONE kx_const(p, 1, dt)
#define ZERO kx_const(p, 0, dt)
#define K(c) kx_const(p, (c), dt)
#define ADD(a, b) kx_bin(p, KX_ADD, a, b)
#define SUB(a, b) kx_bin(p, KX_SUB, a, b)
#define MUL(a, b) kx_bin(p, KX_MUL, a, b)
#define DIV(a, b) kx_bin(p, KX_DIV, a, b)
#define NEG(a) kx_un(p, KX_NEG, a)
#define POW(a, b) kx_bin(p, KX_POW, a, b)
#define EXP(a) kx_un(p, KX_EXP, a)
#define LOG(a) kx_un(p, KX_LOG, a)
#define LOG1P(a) kx_un(p, KX_LOG1P, a)
#define EXPM1(a) kx_un(p, KX_EXPM1, a)
#define SQRT(a) kx_un(p, KX_SQRT, a)
#define RSQRT(a) kx_bin(p, KX_DIV, ONE, SQRT(a))
#define TANH(a) kx_un(p, KX_TANH, a)
#define SIGMOID(a) dsl_sigmoid(p, a)
#define ERF(a) kx_un(p, KX_ERF, a)
#define SOFTPLUS(a) dsl_softplus(p, a)
#define SIN(a) kx_un(p, KX_SIN, a)
#define COS(a) kx_un(p, KX_COS, a)
#define RELU(a) dsl_relu(p, a)
#define STEP(a) dsl_step(p, a)
#define ABS(a) kx_un(p, KX_ABS, a)
#define SIGN(a) dsl_sign(p, a)
#define FLOOR(a) kx_un(p, KX_FLOOR, a)
#define LGAMMA(a) kx_un(p, KX_LGAMMA, a)
#define DIGAMMA(a) kx_polygamma(p, ZERO, a)
#define PG(n, a) kx_polygamma(p, n, a)
#define PGNEXT(a) kx_polygamma(p, kx_const(p, A[0] + 1, dt), a)
#define XLOGY(a, b) dsl_xlogy(p, a, b)
#define MAXIMUM(a, b) kx_bin(p, KX_MAX, a, b)
#define MINIMUM(a, b) kx_bin(p, KX_MIN, a, b)
#define CLAMP(a, lo, hi) dsl_clamp(p, a, lo, hi)
#define EQ(a, b) kx_cmp(p, KC_EQ, a, b)
#define NE(a, b) kx_cmp(p, KC_NE, a, b)
#define LT(a, b) kx_cmp(p, KC_LT, a, b)
#define LE(a, b) kx_cmp(p, KC_LE, a, b)
#define GT(a, b) kx_cmp(p, KC_GT, a, b)
#define GE(a, b) kx_cmp(p, KC_GE, a, b)
#define AND(a, b) kx_bin(p, KX_AND, a, b)
#define OR(a, b) kx_bin(p, KX_OR, a, b)

typedef KxId (*EwFn)(KProgram *p, DType dt, KxId x, KxId y, const double *A);

// clang-format off
#define UNARY(n, fl, cost, f, d0) \
	static KxId ew_##n(KProgram *p, DType dt, KxId x, KxId y, const double *A) { (void)dt; (void)y; (void)A; return f; }
#define UNARYA(n, fl, cost, at, f, d0) \
	static KxId ew_##n(KProgram *p, DType dt, KxId x, KxId y, const double *A) { (void)dt; (void)y; (void)A; return f; }
#define BINARY(n, fl, cost, f, d0, d1) \
	static KxId ew_##n(KProgram *p, DType dt, KxId x, KxId y, const double *A) { (void)dt; (void)A; return f; }
#define CMP(n, fl, cost, f) \
	static KxId ew_##n(KProgram *p, DType dt, KxId x, KxId y, const double *A) { (void)dt; (void)A; return f; }
#include "ops.def" // UNARY UNARYA BINARY CMP: one ew_<name> per row, from its formula f

static const EwFn ew_fn[OP_COUNT] = {
#define UNARY(n, ...) [OP_##n] = ew_##n,
#define UNARYA(n, ...) [OP_##n] = ew_##n,
#define BINARY(n, ...) [OP_##n] = ew_##n,
#define CMP(n, ...) [OP_##n] = ew_##n,
#include "ops.def" // UNARY UNARYA BINARY CMP: the table
};
// clang-format on

#include "ops_dsl_end.h" // the DSL's macros, undefined

// ---------------------------------------------------------------- index maps

static void
strides(const Shape *s, int64_t st[IR_MAXDIM])
{
	int64_t k = 1;
	for (int i = s->rank - 1; i >= 0; i--) {
		st[i] = k;
		k *= s->dim[i];
	}
}

// The coordinate along axis d of flat index e in shape s.
static KxId
coord(KProgram *p, KxId e, const Shape *s, int d)
{
	int64_t st[IR_MAXDIM];
	strides(s, st);
	if (s->dim[d] <= 1)
		return kx_iconst(p, 0);
	return kx_imod(p, kx_idiv(p, e, st[d] ? st[d] : 1), s->dim[d]);
}

// Flat index of coordinates c[] in shape s.
static KxId
flat(KProgram *p, const KxId *c, const Shape *s)
{
	int64_t st[IR_MAXDIM];
	strides(s, st);
	KxId e = kx_iconst(p, 0);
	for (int d = 0; d < s->rank; d++)
		e = kx_iadd(p, e, kx_imul(p, c[d], st[d]));
	return e;
}

// A constant's value in its dtype: the interpreter's rounding, so that
// compiled constants and the oracle agree to the bit (ir_dtype_round).
static double
cvt(DType dt, double v)
{
	return ir_dtype_round(dt, v);
}

// The value of operand i of n converted to F64 (the samplers' arithmetic
// is double, as in the interpreter).
static KxId
at64(Lower *L, NodeId n, int i, KxId e)
{
	return kx_cast(L->p, lower_at(L, ir_in1(L->g, n, i), e), DT_F64);
}

// torch.nn.init.kaiming_*: std = gain / sqrt(fan), gain = sqrt(2 / (1 + a^2)).
static double
kaiming_scale(const Shape *s, int fan_out, double neg)
{
	double rf = 1;
	for (int i = 2; i < s->rank; i++)
		rf *= (double)s->dim[i];
	double fan = (double)(fan_out ? s->dim[0] : s->dim[1]) * rf;
	return sqrt(2 / (1 + neg * neg)) / sqrt(fan);
}

// ---------------------------------------------------------------- the rules of MAP and FREE ops
//
// lower_<op>(L, n, e) is node n's own formula at flat index e (n is not
// loaded from a buffer), its operands read through lower_at.  The table
// lower_rule (below) has one per row of ops.def: elementwise rows share
// lower_elemwise, their formula f; a family shares one function.

static KxId
lower_elemwise(Lower *L, NodeId n, KxId e)
{
	const Graph *g = L->g;
	KProgram *p = L->p;
	const Node *nd = &g->node[n];
	Attrs a;
	ir_attrs_get(g, n, &a);
	const OpInfo *oi = ir_op(nd->op);
	double A[IR_MAXATTR] = {0};
	for (int i = 0; i < oi->nattr; i++)
		A[i] = oi->attr[i].kind == AK_FLOAT ? a.a[i].f : (double)a.a[i].i;
	KxId x = lower_at(L, ir_in1(g, n, 0), e);
	KxId y = nd->nin > 1 ? lower_at(L, ir_in1(g, n, 1), e) : 0;
	return ew_fn[nd->op](p, (DType)p->x[x].dtype, x, y, A);
}

static KxId
lower_full(Lower *L, NodeId n, KxId e)
{
	Attrs a;
	ir_attrs_get(L->g, n, &a);
	(void)e;
	const AttrVal *v = &a.a[aidx(L, n, "value")];
	if (ndtype(L, n) == DT_I64 && ctype(L, n) == DT_I64) // exact beyond 2^53 (ir.h, AttrVal)
		return kx_iconst(L->p, v->i);
	return kx_const(L->p, cvt(ndtype(L, n), v->f), ctype(L, n));
}

static KxId
lower_iota(Lower *L, NodeId n, KxId e)
{
	KProgram *p = L->p;
	const Shape *s = ir_shape(L->g, n);
	Attrs a;
	ir_attrs_get(L->g, n, &a);
	return kx_cast(p, coord(p, e, s, (int)a.a[aidx(L, n, "axis")].i), ndtype(L, n));
}

static KxId
lower_cast(Lower *L, NodeId n, KxId e)
{
	return kx_cast(L->p, lower_at(L, ir_in1(L->g, n, 0), e), ndtype(L, n));
}

static KxId
lower_not(Lower *L, NodeId n, KxId e)
{
	return kx_un(L->p, KX_NOT, lower_at(L, ir_in1(L->g, n, 0), e));
}

static KxId
lower_where(Lower *L, NodeId n, KxId e)
{
	const Graph *g = L->g;
	return kx_select(L->p, lower_at(L, ir_in1(g, n, 0), e), lower_at(L, ir_in1(g, n, 1), e),
	                 lower_at(L, ir_in1(g, n, 2), e));
}

// reshape keeps the flat order; the placements are identities on values.
static KxId
lower_reshape(Lower *L, NodeId n, KxId e)
{
	return lower_at(L, ir_in1(L->g, n, 0), e);
}
#define lower_to_host lower_reshape
#define lower_to_device lower_reshape

static KxId
lower_broadcast(Lower *L, NodeId n, KxId e)
{
	const Graph *g = L->g;
	KProgram *p = L->p;
	const Shape *s = ir_shape(g, n);
	NodeId x = ir_in1(g, n, 0);
	const Shape *xs = ir_shape(g, x);
	int64_t xst[IR_MAXDIM];
	strides(xs, xst);
	KxId ix = kx_iconst(p, 0);
	int lead = s->rank - xs->rank;
	for (int d = lead; d < s->rank; d++)
		if (xs->dim[d - lead] != 1)
			ix = kx_iadd(p, ix, kx_imul(p, coord(p, e, s, d), xst[d - lead]));
	return lower_at(L, x, ix);
}

static KxId
lower_permute(Lower *L, NodeId n, KxId e)
{
	const Graph *g = L->g;
	KProgram *p = L->p;
	const Shape *s = ir_shape(g, n);
	Attrs a;
	ir_attrs_get(g, n, &a);
	NodeId x = ir_in1(g, n, 0);
	const Shape *xs = ir_shape(g, x);
	int64_t xst[IR_MAXDIM];
	strides(xs, xst);
	KxId ix = kx_iconst(p, 0);
	const AttrVal *pm = &a.a[aidx(L, n, "perm")];
	for (int k = 0; k < pm->n; k++)
		ix = kx_iadd(p, ix, kx_imul(p, coord(p, e, s, k), xst[pm->v[k]]));
	return lower_at(L, x, ix);
}

static KxId
lower_slice(Lower *L, NodeId n, KxId e)
{
	const Graph *g = L->g;
	KProgram *p = L->p;
	const Shape *s = ir_shape(g, n);
	Attrs a;
	ir_attrs_get(g, n, &a);
	NodeId x = ir_in1(g, n, 0);
	const Shape *xs = ir_shape(g, x);
	int64_t xst[IR_MAXDIM];
	strides(xs, xst);
	KxId ix = kx_iconst(p, 0);
	const AttrVal *st = &a.a[aidx(L, n, "start")], *sp = &a.a[aidx(L, n, "step")];
	for (int d = 0; d < s->rank; d++) {
		KxId c = kx_iadd(p, kx_iconst(p, st->v[d]), kx_imul(p, coord(p, e, s, d), sp->v[d]));
		ix = kx_iadd(p, ix, kx_imul(p, c, xst[d]));
	}
	return lower_at(L, x, ix);
}

static KxId
lower_pad(Lower *L, NodeId n, KxId e)
{
	const Graph *g = L->g;
	KProgram *p = L->p;
	const Shape *s = ir_shape(g, n);
	Attrs a;
	ir_attrs_get(g, n, &a);
	NodeId x = ir_in1(g, n, 0);
	const Shape *xs = ir_shape(g, x);
	const AttrVal *bf = &a.a[aidx(L, n, "before")];
	KxId c[IR_MAXDIM], inside = kx_bconst(p, 1);
	for (int d = 0; d < s->rank; d++) {
		KxId cd = kx_iadd(p, coord(p, e, s, d), kx_iconst(p, -bf->v[d]));
		KxId ok = kx_bin(p, KX_AND, kx_cmp(p, KC_GE, cd, kx_iconst(p, 0)),
		                 kx_cmp(p, KC_LT, cd, kx_iconst(p, xs->dim[d])));
		int64_t lo, hi;
		if (!(kx_range(p, cd, &lo, &hi) && lo >= 0 && hi < xs->dim[d]))
			inside = p->x[inside].op == KX_CONST ? ok : kx_bin(p, KX_AND, inside, ok);
		c[d] = xs->dim[d] > 0 ? kx_iclamp(p, cd, 0, xs->dim[d] - 1) : kx_iconst(p, 0);
	}
	const AttrVal *fv = &a.a[aidx(L, n, "value")];
	KxId fill = ndtype(L, n) == DT_I64 && ctype(L, n) == DT_I64
	                    ? kx_iconst(p, fv->i) // exact beyond 2^53 (ir.h, AttrVal)
	                    : kx_const(p, cvt(ndtype(L, n), fv->f), ctype(L, n));
	if (ir_numel(xs) == 0)
		return fill;
	return kx_select(p, inside, lower_at(L, x, flat(p, c, xs)), fill);
}

static KxId
lower_concat(Lower *L, NodeId n, KxId e)
{
	const Graph *g = L->g;
	KProgram *p = L->p;
	const Shape *s = ir_shape(g, n);
	Attrs a;
	ir_attrs_get(g, n, &a);
	int ax = (int)a.a[aidx(L, n, "axis")].i;
	KxId cax = coord(p, e, s, ax), v = 0;
	int64_t off = s->dim[ax];
	for (int k = g->node[n].nin - 1; k >= 0; k--) {
		NodeId x = ir_in1(g, n, k);
		const Shape *xs = ir_shape(g, x);
		off -= xs->dim[ax];
		if (xs->dim[ax] == 0)
			continue;
		KxId c[IR_MAXDIM];
		for (int d = 0; d < s->rank; d++)
			c[d] = d == ax ? kx_iclamp(p, kx_iadd(p, cax, kx_iconst(p, -off)), 0, xs->dim[ax] - 1)
			               : coord(p, e, s, d);
		// Pieces are visited last to first, so the test for piece k
		// (cax before its end) wraps the tests of the later ones.
		KxId xv = lower_at(L, x, flat(p, c, xs));
		KxId end = kx_iconst(p, off + xs->dim[ax]);
		v = v ? kx_select(p, kx_cmp(p, KC_LT, cax, end), xv, v) : xv;
	}
	return v ? v : kx_const(p, 0, ctype(L, n));
}

static KxId
lower_resize(Lower *L, NodeId n, KxId e)
{
	const Graph *g = L->g;
	KProgram *p = L->p;
	NodeId x = ir_in1(g, n, 0);
	int64_t xn = ir_numel(ir_shape(g, x));
	KxId z = kx_const(p, 0, ctype(L, n));
	if (xn == 0)
		return z;
	KxId v = lower_at(L, x, kx_imin(p, e, kx_iconst(p, xn - 1)));
	return kx_select(p, kx_cmp(p, KC_LT, e, kx_iconst(p, xn)), v, z);
}

static KxId
lower_slice_update(Lower *L, NodeId n, KxId e)
{
	const Graph *g = L->g;
	KProgram *p = L->p;
	const Shape *s = ir_shape(g, n);
	Attrs a;
	ir_attrs_get(g, n, &a);
	NodeId x = ir_in1(g, n, 0), v = ir_in1(g, n, 1);
	const Shape *vs = ir_shape(g, v);
	const AttrVal *st = &a.a[aidx(L, n, "start")], *sp = &a.a[aidx(L, n, "step")];
	KxId xv = lower_at(L, x, e);
	if (ir_numel(vs) == 0)
		return xv;
	KxId in = kx_bconst(p, 1), c[IR_MAXDIM];
	for (int d = 0; d < s->rank; d++) {
		// j = (c - start) / step must be a whole number in [0, vdim).
		KxId rel = kx_iadd(p, coord(p, e, s, d), kx_iconst(p, -st->v[d]));
		KxId relc = kx_iclamp(p, rel, 0, sp->v[d] * (vs->dim[d] - 1));
		KxId ok = kx_bin(p, KX_AND, kx_cmp(p, KC_EQ, rel, relc),
		                 kx_cmp(p, KC_EQ, kx_imod(p, relc, sp->v[d]), kx_iconst(p, 0)));
		in = p->x[in].op == KX_CONST ? ok : kx_bin(p, KX_AND, in, ok);
		c[d] = kx_idiv(p, relc, sp->v[d]);
	}
	return kx_select(p, in, lower_at(L, v, flat(p, c, vs)), xv);
}

// take: result[o, j, i] = x[o, idx[j], i], x viewed as (outer, dim, inner).
static KxId
lower_take(Lower *L, NodeId n, KxId e)
{
	const Graph *g = L->g;
	KProgram *p = L->p;
	const Shape *s = ir_shape(g, n);
	Attrs a;
	ir_attrs_get(g, n, &a);
	NodeId x = ir_in1(g, n, 0), ix = ir_in1(g, n, 1);
	const Shape *xs = ir_shape(g, x);
	int ax = (int)a.a[aidx(L, n, "axis")].i;
	int64_t inner = 1, nidx = ir_numel(ir_shape(g, ix)), dim = xs->dim[ax];
	for (int d = ax + 1; d < xs->rank; d++)
		inner *= xs->dim[d];
	if (ir_numel(s) == 0 || dim == 0)
		return kx_const(p, 0, ctype(L, n));
	KxId o = kx_idiv(p, e, inner * nidx), j = kx_imod(p, kx_idiv(p, e, inner), nidx);
	KxId i = kx_imod(p, e, inner);
	KxId k = kx_iclamp(p, lower_at(L, ix, j), 0, dim - 1);
	KxId xi = kx_iadd(p, kx_imul(p, kx_iadd(p, kx_imul(p, o, dim), k), inner), i);
	return lower_at(L, x, xi);
}

static KxId
lower_take_along(Lower *L, NodeId n, KxId e)
{
	const Graph *g = L->g;
	KProgram *p = L->p;
	const Shape *s = ir_shape(g, n);
	Attrs a;
	ir_attrs_get(g, n, &a);
	NodeId x = ir_in1(g, n, 0), ix = ir_in1(g, n, 1);
	const Shape *xs = ir_shape(g, x);
	int ax = (int)a.a[aidx(L, n, "axis")].i;
	if (ir_numel(s) == 0 || xs->dim[ax] == 0)
		return kx_const(p, 0, ctype(L, n));
	KxId c[IR_MAXDIM];
	for (int d = 0; d < s->rank; d++)
		c[d] = d == ax ? kx_iclamp(p, lower_at(L, ix, e), 0, xs->dim[ax] - 1) : coord(p, e, s, d);
	return lower_at(L, x, flat(p, c, xs));
}

static KxId
lower_one_hot(Lower *L, NodeId n, KxId e)
{
	KProgram *p = L->p;
	Attrs a;
	ir_attrs_get(L->g, n, &a);
	int64_t cls = a.a[aidx(L, n, "n")].i;
	if (cls == 0)
		return kx_const(p, 0, ctype(L, n));
	KxId v = lower_at(L, ir_in1(L->g, n, 0), kx_idiv(p, e, cls));
	KxId hit = kx_cmp(p, KC_EQ, v, kx_imod(p, e, cls));
	return kx_select(p, hit, kx_const(p, 1, ctype(L, n)), kx_const(p, 0, ctype(L, n)));
}

// The samplers (F_RANDOM): element e draws from Philox at counter e
// (kx_rand), in f64 arithmetic as in the interpreter, which keeps these
// values as computed (the compute dtype) but rounds the kaiming
// initialisers' draws to their dtype (they are factories).
static KxId
lower_uniform(Lower *L, NodeId n, KxId e) // lo + (hi - lo) u
{
	KProgram *p = L->p;
	KxId lo = at64(L, n, 0, e), hi = at64(L, n, 1, e);
	KxId r = kx_rand(p, KRAND_UNIFORM, ir_attr_int(L->g, n, "seed"), e, 0);
	KxId v = kx_bin(p, KX_ADD, lo, kx_bin(p, KX_MUL, kx_bin(p, KX_SUB, hi, lo), r));
	return kx_cast(p, v, ctype(L, n));
}

static KxId
lower_normal(Lower *L, NodeId n, KxId e) // mean + std z
{
	KProgram *p = L->p;
	KxId r = kx_rand(p, KRAND_NORMAL, ir_attr_int(L->g, n, "seed"), e, 0);
	KxId v = kx_bin(p, KX_ADD, at64(L, n, 0, e), kx_bin(p, KX_MUL, at64(L, n, 1, e), r));
	return kx_cast(p, v, ctype(L, n));
}

static KxId
lower_gamma(Lower *L, NodeId n, KxId e) // Gamma(conc, 1) / rate
{
	KProgram *p = L->p;
	KxId r = kx_rand(p, KRAND_GAMMA, ir_attr_int(L->g, n, "seed"), e, at64(L, n, 0, e));
	KxId v = kx_bin(p, KX_DIV, r, at64(L, n, 1, e));
	return kx_cast(p, v, ctype(L, n));
}

static KxId
lower_exponential(Lower *L, NodeId n, KxId e) // -log1p(-u) / rate
{
	KProgram *p = L->p;
	KxId r = kx_rand(p, KRAND_UNIFORM, ir_attr_int(L->g, n, "seed"), e, 0);
	KxId l = kx_un(p, KX_LOG1P, kx_un(p, KX_NEG, r));
	KxId v = kx_bin(p, KX_DIV, kx_un(p, KX_NEG, l), at64(L, n, 0, e));
	return kx_cast(p, v, ctype(L, n));
}

static KxId
lower_bernoulli(Lower *L, NodeId n, KxId e)
{
	KProgram *p = L->p;
	KxId r = kx_rand(p, KRAND_UNIFORM, ir_attr_int(L->g, n, "seed"), e, 0);
	KxId v = kx_select(p, kx_cmp(p, KC_LT, r, at64(L, n, 0, e)), kx_const(p, 1, DT_F64),
	                   kx_const(p, 0, DT_F64));
	return kx_cast(p, v, ctype(L, n));
}

// kaiming_normal: sc z; kaiming_uniform: uniform on [-b, b], b = sqrt(3) sc.
// One body: the two differ only in the draw and its scaling.
static KxId
lower_kaiming(Lower *L, NodeId n, KxId e, int uniform)
{
	KProgram *p = L->p;
	const Shape *s = ir_shape(L->g, n);
	Attrs a;
	ir_attrs_get(L->g, n, &a);
	int64_t seed = a.a[aidx(L, n, "seed")].i;
	int fan_out = (int)a.a[aidx(L, n, "mode")].i != 0;
	double sc = kaiming_scale(s, fan_out, a.a[aidx(L, n, "a")].f);
	KxId r = kx_rand(p, uniform ? KRAND_UNIFORM : KRAND_NORMAL, seed, e, 0), v;
	if (uniform) {
		double b = sqrt(3.0) * sc;
		v = kx_bin(p, KX_ADD, kx_const(p, -b, DT_F64),
		           kx_bin(p, KX_MUL, kx_const(p, 2 * b, DT_F64), r));
	} else
		v = kx_bin(p, KX_MUL, kx_const(p, sc, DT_F64), r);
	return kx_cast(p, v, ndtype(L, n));
}

static KxId
lower_kaiming_normal(Lower *L, NodeId n, KxId e)
{
	return lower_kaiming(L, n, e, 0);
}

static KxId
lower_kaiming_uniform(Lower *L, NodeId n, KxId e)
{
	return lower_kaiming(L, n, e, 1);
}

// ---------------------------------------------------------------- memo

static uint32_t
memo_hash(NodeId n, KxId idx)
{
	return (n * 2654435761u) ^ (idx * 40503u + 1);
}

static Memo *
memo_slot(Lower *L, NodeId n, KxId idx)
{
	if (L->nmemo * 2 >= L->cmemo) {
		// Rebuild with twice the room, keeping the live generation.
		uint32_t oc = L->cmemo, c = oc ? oc * 2 : 256;
		Memo *old = L->memo, *m = arena_alloc_array(L->tmp, c, sizeof *m);
		L->memo = m;
		L->cmemo = c;
		L->nmemo = 0;
		for (uint32_t i = 0; i < oc; i++)
			if (old[i].gen == L->gen && old[i].n) {
				uint32_t h = memo_hash(old[i].n, old[i].idx) & (c - 1);
				while (m[h].gen == L->gen && m[h].n)
					h = (h + 1) & (c - 1);
				m[h] = old[i];
				L->nmemo++;
			}
	}
	uint32_t mask = L->cmemo - 1, h = memo_hash(n, idx) & mask;
	for (;; h = (h + 1) & mask) {
		Memo *m = &L->memo[h];
		if (m->gen != L->gen || !m->n || (m->n == n && m->idx == idx))
			return m;
	}
}

KxId
lower_at(Lower *L, NodeId n, KxId e)
{
	if (L->buf[n] != NOBUF)
		return kx_load(L->p, L->buf[n], L->off[n] ? kx_iadd(L->p, e, L->off[n]) : e);
	Memo *m = memo_slot(L, n, e);
	if (m->gen == L->gen && m->n == n)
		return m->val;
	KxId v = expand(L, n, e);
	m = memo_slot(L, n, e); // expand may have grown the table
	m->gen = L->gen;
	m->n = n;
	m->idx = e;
	m->val = v;
	L->nmemo++;
	return v;
}

// ---------------------------------------------------------------- kernels

KKernel *
lower_kernel_begin(Lower *L, uint32_t out, NodeId n, const char *what)
{
	L->gen++;
	L->nmemo = 0;
	L->nexpand = 0;
	KKernel *k = kir_kernel_add(L->p);
	k->out = out;
	k->node = n;
	k->what = what;
	return k;
}

// A parallel loop per axis of s longer than 1; returns the flat index.
KxId
lower_domain(Lower *L, KKernel *k, const Shape *s)
{
	KxId c[IR_MAXDIM];
	for (int d = 0; d < s->rank; d++) {
		if (s->dim[d] == 1) {
			c[d] = kx_iconst(L->p, 0);
			continue;
		}
		k->dim[k->rank] = s->dim[d];
		c[d] = kx_var(L->p, k->rank, s->dim[d]);
		k->rank++;
	}
	return flat(L->p, c, s);
}

// An elementwise kernel writing node n (or the copy of src) to buffer out
// from element off on (0: from 0).
static void
kernel_map(Lower *L, uint32_t out, KxId off, NodeId n, NodeId src)
{
	KKernel *k = lower_kernel_begin(L, out, n, src ? "copy" : "elementwise");
	const Shape *s = ir_shape(L->g, src ? src : n);
	KxId e = lower_domain(L, k, s);
	KxId v = src ? lower_at(L, src, e) : expand(L, n, e);
	k->index = off ? kx_iadd(L->p, e, off) : e;
	k->body = kx_cast(L->p, v, L->p->buf[out].dtype);
	k->nfused = L->nexpand;
}

// Buffer src copied to buffer dst, both of shape s (a scan's carries).
static void
kernel_copy(Lower *L, uint32_t dst, uint32_t src, const Shape *s, NodeId n)
{
	KKernel *k = lower_kernel_begin(L, dst, n, "carry");
	k->index = lower_domain(L, k, s);
	k->body = kx_cast(L->p, kx_load(L->p, src, k->index), L->p->buf[dst].dtype);
}

// The loops of a reduction of node n over its axes: parallel variables
// over the kept axes, reduction variables over the reduced ones; *xi is
// the operand's flat index, *oi the result's.  Returns the element count
// of one reduction.
static int64_t
reduce_loops(Lower *L, KKernel *k, NodeId n, KxId *xi, KxId *oi)
{
	const Graph *g = L->g;
	KProgram *p = L->p;
	NodeId x = ir_in1(g, n, 0);
	const Shape *xs = ir_shape(g, x);
	Attrs a;
	ir_attrs_get(g, n, &a);
	const AttrVal *ax = &a.a[aidx(L, n, "axes")];
	int red[IR_MAXDIM] = {0};
	int64_t count = 1;
	for (int i = 0; i < ax->n; i++) {
		red[ax->v[i]] = 1;
		count *= xs->dim[ax->v[i]];
	}
	// Output strides over the kept axes, in x's axis order (keepdim or not,
	// the flat order is the same).
	int64_t ost[IR_MAXDIM], m = 1, xst[IR_MAXDIM];
	for (int d = xs->rank - 1; d >= 0; d--) {
		ost[d] = red[d] ? 0 : m;
		m *= red[d] ? 1 : xs->dim[d];
	}
	strides(xs, xst);
	KxId c[IR_MAXDIM];
	for (int d = 0; d < xs->rank; d++)
		if (!red[d] && xs->dim[d] != 1) {
			k->dim[k->rank] = xs->dim[d];
			c[d] = kx_var(p, k->rank++, xs->dim[d]);
		}
	for (int d = 0; d < xs->rank; d++) {
		if (red[d] && xs->dim[d] != 1) {
			k->rdim[k->rrank] = xs->dim[d];
			c[d] = kx_var(p, k->rank + k->rrank++, xs->dim[d]);
		} else if (xs->dim[d] == 1)
			c[d] = kx_iconst(p, 0);
	}
	*xi = kx_iconst(p, 0);
	*oi = kx_iconst(p, 0);
	for (int d = 0; d < xs->rank; d++) {
		*xi = kx_iadd(p, *xi, kx_imul(p, c[d], xst[d]));
		if (!red[d])
			*oi = kx_iadd(p, *oi, kx_imul(p, c[d], ost[d]));
	}
	return count;
}

// The reductions, one rule each (a new reduction row needs its own):
// reduce_begin opens the kernel folding x over the reduced axes with red,
// whose post is the accumulator; the rule rewrites body and post, and
// reduce_end stores post in the result's dtype.
static KKernel *
reduce_begin(Lower *L, uint32_t out, NodeId n, const char *what, KRed red, KxId *oi,
             int64_t *count)
{
	KProgram *p = L->p;
	KxId xi;
	KKernel *k = lower_kernel_begin(L, out, n, what);
	int64_t c = reduce_loops(L, k, n, &xi, oi);
	if (count)
		*count = c;
	k->index = *oi;
	k->body = lower_at(L, ir_in1(L->g, n, 0), xi);
	k->red = red;
	k->post = kx_acc(p, (DType)p->x[k->body].dtype);
	return k;
}

static void
reduce_end(Lower *L, KKernel *k, uint32_t out)
{
	k->post = kx_cast(L->p, k->post, L->p->buf[out].dtype);
	k->nfused = L->nexpand;
}

static void
lower_sum(Lower *L, uint32_t out, NodeId n)
{
	KxId oi;
	reduce_end(L, reduce_begin(L, out, n, "sum", KR_SUM, &oi, NULL), out);
}

static void
lower_mean(Lower *L, uint32_t out, NodeId n)
{
	KxId oi;
	int64_t count;
	KKernel *k = reduce_begin(L, out, n, "mean", KR_SUM, &oi, &count);
	KxId acc = k->post;
	k->post = kx_bin(L->p, KX_DIV, acc, kx_const(L->p, (double)count, (DType)L->p->x[acc].dtype));
	reduce_end(L, k, out);
}

static void
lower_max(Lower *L, uint32_t out, NodeId n)
{
	KxId oi;
	reduce_end(L, reduce_begin(L, out, n, "max", KR_MAX, &oi, NULL), out);
}

static void
lower_min(Lower *L, uint32_t out, NodeId n)
{
	KxId oi;
	reduce_end(L, reduce_begin(L, out, n, "min", KR_MIN, &oi, NULL), out);
}

// logsumexp: two kernels, the maximum m first, then m + log(sum exp(x -
// m)) (no term overflows; m = +-inf gives m, as the interpreter).
static void
lower_logsumexp(Lower *L, uint32_t out, NodeId n)
{
	KProgram *p = L->p;
	KxId oi;
	DType mdt = kir_compute_dtype(p, ndtype(L, n));
	uint32_t mbuf = kir_buf_add(p, KB_TMP, 0, mdt, ir_shape(L->g, n), n);
	KKernel *k = reduce_begin(L, mbuf, n, "logsumexp.max", KR_MAX, &oi, NULL);
	k->nfused = L->nexpand;
	k = reduce_begin(L, out, n, "logsumexp", KR_SUM, &oi, NULL);
	KxId acc = k->post;
	DType dt = (DType)p->x[acc].dtype;
	KxId mx = kx_load(p, mbuf, oi);
	k->body = kx_un(p, KX_EXP, kx_bin(p, KX_SUB, k->body, mx));
	KxId inf = kx_cmp(p, KC_EQ, kx_un(p, KX_ABS, mx), kx_const(p, HUGE_VAL, dt));
	k->post = kx_select(p, inf, mx, kx_bin(p, KX_ADD, mx, kx_un(p, KX_LOG, acc)));
	reduce_end(L, k, out);
}

static void kernel_take_add_segment(Lower *L, uint32_t out, NodeId n);
static int take_add_segment_wanted(const Lower *L, NodeId n);

// take_add(x, idx, v) and take_along_add(x, idx, v), the transposes of
// the gathers, as gathers: element c of the result is x[c] plus the sum,
// over the positions j of idx along the axis, of v at j where idx[j] names
// c's coordinate.  A reduction kernel like any other, so it runs in
// parallel with no atomic stores; its cost is dim times that of a scatter.
// A take_add with many indices into a large table (an embedding's
// gradient) is the segment form below instead (take_add_segment_wanted).
static void
kernel_scatter(Lower *L, uint32_t out, NodeId n)
{
	if (take_add_segment_wanted(L, n)) {
		kernel_take_add_segment(L, out, n);
		return;
	}

	const Graph *g = L->g;
	KProgram *p = L->p;
	int op = g->node[n].op;
	KKernel *k = lower_kernel_begin(L, out, n, ir_op(op)->name);
	NodeId x = ir_in1(g, n, 0), ix = ir_in1(g, n, 1), v = ir_in1(g, n, 2);
	const Shape *xs = ir_shape(g, x), *is = ir_shape(g, ix), *vs = ir_shape(g, v);
	Attrs a;
	ir_attrs_get(g, n, &a);
	int ax = (int)a.a[aidx(L, n, "axis")].i;
	KxId e = lower_domain(L, k, xs);
	k->index = e;
	KxId cax = coord(p, e, xs, ax);
	KxId z = kx_const(p, 0, ctype(L, n));
	int64_t dim = xs->dim[ax];
	if (op == OP_take_add) {
		// x as (outer, dim, inner), v as (outer, nidx, inner).
		int64_t inner = 1, nidx = ir_numel(is);
		for (int d = ax + 1; d < xs->rank; d++)
			inner *= xs->dim[d];
		KxId j = kx_iconst(p, 0);
		if (nidx != 1) {
			k->rdim[k->rrank++] = nidx;
			j = kx_var(p, k->rank, nidx);
		}
		KxId o = kx_idiv(p, e, inner * (dim ? dim : 1)), i = kx_imod(p, e, inner ? inner : 1);
		KxId vi = kx_iadd(p, kx_imul(p, kx_iadd(p, kx_imul(p, o, nidx), j), inner), i);
		KxId hit = kx_cmp(p, KC_EQ, lower_at(L, ix, j), cax);
		k->body = nidx ? kx_select(p, hit, lower_at(L, v, vi), z) : z;
	} else {
		// idx and v share a shape that may be smaller than x off the axis.
		int64_t len = is->dim[ax];
		KxId j = kx_iconst(p, 0);
		if (len != 1) {
			k->rdim[k->rrank++] = len;
			j = kx_var(p, k->rank, len);
		}
		KxId c[IR_MAXDIM], inside = kx_bconst(p, 1);
		for (int d = 0; d < xs->rank; d++) {
			if (d == ax) {
				c[d] = j;
				continue;
			}
			KxId cd = coord(p, e, xs, d);
			int64_t lo, hi;
			if (!(kx_range(p, cd, &lo, &hi) && hi < is->dim[d])) {
				KxId ok = kx_cmp(p, KC_LT, cd, kx_iconst(p, is->dim[d]));
				inside = p->x[inside].op == KX_CONST ? ok : kx_bin(p, KX_AND, inside, ok);
			}
			c[d] = is->dim[d] ? kx_iclamp(p, cd, 0, is->dim[d] - 1) : kx_iconst(p, 0);
		}
		KxId vi = flat(p, c, vs);
		KxId hit = kx_bin(p, KX_AND, inside, kx_cmp(p, KC_EQ, lower_at(L, ix, vi), cax));
		if (p->x[inside].op == KX_CONST)
			hit = kx_cmp(p, KC_EQ, lower_at(L, ix, vi), cax);
		k->body = ir_numel(is) ? kx_select(p, hit, lower_at(L, v, vi), z) : z;
	}
	k->red = KR_SUM;
	k->post = kx_cast(p, kx_bin(p, KX_ADD, lower_at(L, x, e), kx_acc(p, (DType)p->x[k->body].dtype)),
	                  p->buf[out].dtype);
	k->nfused = L->nexpand;
}

// A temporary's dtype: computing in f64, f32 intermediates are kept in f64
// (only inputs and outputs keep the graph's dtypes).
static DType
tmp_dtype(const KProgram *p, DType dt)
{
	return dt == DT_F32 ? p->fcompute : dt;
}

// ---------------------------------------------------------------- take_add as segments
//
// The gather form of take_add(x, idx, v) (kernel_scatter) sums, for every
// point of the table x, over all n indices: dim times the work of a
// scatter.  The transformer's embedding gradient (a table of 50 x 720,
// 8,192 tokens) was 295 M select-terms, 589 us on an H200.  The segment
// form visits only each row's own tokens, and stays what every kernel of
// the IR is, a gather: no atomics, no data-dependent store, the same bits
// for any thread count and on any run.  With the index's elements j in
// [0, n), x viewed as (outer, dim, inner) and v as (outer, n, inner):
//
//  1. Sort.  Token j's key is row(j) n + j, row(j) = idx[j] (dim where
//     idx[j] is out of range: a row after the table that nothing reads,
//     so such a token is dropped as the gather form drops it; the run
//     fails anyway, passes/checks.c).  Keys are distinct, so sorting them
//     is a stable sort of the tokens by row.  Blocks of SEG_BLOCK
//     positions are sorted by rank (seg_block_sort, reading the keys from
//     idx itself), then merge passes, one kernel each: pass `len` merges
//     sorted runs of len into runs of 2 len, each output position q of a
//     pair of runs A, B finding by binary search (merge path) the count a
//     of A's keys among the first q: the smallest a with A[a] > B[q - 1 -
//     a] (ceil(log2(len + 1)) steps, unrolled into selects), then taking
//     min(A[a], B[q - a]).  2 + log2(n / SEG_BLOCK) kernels of n points.
//  2. Offsets.  off[k] = the first sorted position whose key is >= k n
//     (binary search, dim + 1 points): row k's tokens are the sorted
//     positions [off[k], off[k + 1]), in token order.
//  3. Chunk sums.  The sorted positions are cut into nc chunks of C
//     (C = 2^floor(log2(n) / 2), about sqrt(n)); Q[o, c, i] sums v over
//     the leading run of chunk c: its positions from c C on whose row is
//     that of position c C (C terms each, one pass over v in all).
//  4. The rows.  result[o, k, i] = x[o, k, i] + head + chunks, one sum of
//     C + nc terms: head, row k's positions from off[k] to the end of
//     their chunk (at most C, read from v through the sorted keys), then
//     Q[o, c, i] of each later chunk c that starts inside the row (c C <
//     off[k + 1]): those chunks' leading runs are row k's.
//
// Every point of every kernel sums a fixed list of terms in a fixed order
// (the row's tokens in token order, the head's one by one, then each
// chunk's as its own sum), whatever the threads; a point of step 4 sums
// C + nc ~ 2 sqrt(n) terms however its tokens are spread (all in one row
// included), against n in the gather form.
//
// Cost, in terms (a select over a load, as in the gather form): gather
// dim outer inner n; segment about outer dim inner (C + nc) (twice: a
// term of step 4 evaluates both arms of its select), plus outer inner n
// (step 3) and n log2(n)^2 / 2 for the sort, plus its 5 + log2(n / 128)
// kernels (launches, on a GPU: 11 for 8,192 tokens).  The segment form
// is taken when it costs at most half the gather form's and the gather
// form is at least SEG_MIN_TERMS: below, the gather's one kernel is as
// fast on a GPU as the segments' launches (the gather ran 0.5 G terms a
// ms on an H200, 2^24 terms in ~33 us; eleven kernels' launches and
// dependent steps are some 20-30 us).  On the CPU the segments win from
// far fewer terms (a few ms of gather at one thread are lost below the
// bound).  Tiny tables (dim < SEG_MIN_DIM) and few indices (n <
// SEG_MIN_N) keep the gather form, which is then as cheap as a pass or
// a few over v.
//
// $FADC_SCATTER = gather or segment overrides the choice (tests reach the
// segment form at small shapes with it; any other value is ignored).
#define SEG_MIN_TERMS ((int64_t)1 << 24)
#define SEG_MIN_DIM 4
#define SEG_MIN_N 16
#define SEG_BLOCK 128

// The chunk length C of n sorted positions: 2^floor(log2(n) / 2).
static int64_t
seg_chunk(int64_t n)
{
	int lg = 0;
	while (((int64_t)2 << lg) <= n)
		lg++;
	return (int64_t)1 << (lg / 2);
}

// Binary-search steps that narrow m candidates to one: ceil(log2(m)).
static int
seg_steps(int64_t m)
{
	int s = 0;
	while (s < 62 && ((int64_t)1 << s) < m)
		s++;
	return s;
}

// take_add's geometry: x as (outer, dim, inner), n indices.
static void
seg_geometry(const Graph *g, NodeId n, int64_t *outer, int64_t *dim, int64_t *inner,
             int64_t *nidx)
{
	NodeId x = ir_in1(g, n, 0);
	const Shape *xs = ir_shape(g, x);
	int ax = (int)ir_attr_int(g, n, "axis");
	*outer = *inner = 1;
	for (int d = 0; d < ax; d++)
		*outer *= xs->dim[d];
	for (int d = ax + 1; d < xs->rank; d++)
		*inner *= xs->dim[d];
	*dim = xs->dim[ax];
	*nidx = ir_numel(ir_shape(g, ir_in1(g, n, 1)));
}

// a b, saturating at INT64_MAX (a, b >= 0).
static int64_t
seg_mul(int64_t a, int64_t b)
{
	return a && b > INT64_MAX / a ? INT64_MAX : a * b;
}

static int64_t
seg_add(int64_t a, int64_t b)
{
	return a > INT64_MAX - b ? INT64_MAX : a + b;
}

static int
take_add_segment_wanted(const Lower *L, NodeId n)
{
	const Graph *g = L->g;
	if (g->node[n].op != OP_take_add)
		return 0;
	int64_t outer, dim, inner, nidx;
	seg_geometry(g, n, &outer, &dim, &inner, &nidx);
	// Keys row n + j with row <= dim stay far inside an int64, and both
	// forms need something to sum and somewhere to put it.
	if (nidx < 1 || dim < 1 || outer * inner == 0 || seg_mul(dim + 1, nidx) > ((int64_t)1 << 60))
		return 0;
	const char *force = getenv("FADC_SCATTER");
	if (force && !strcmp(force, "gather"))
		return 0;
	if (force && !strcmp(force, "segment"))
		return 1;
	if (dim < SEG_MIN_DIM || nidx < SEG_MIN_N)
		return 0;
	int64_t pts = seg_mul(seg_mul(outer, dim), inner), ch = seg_chunk(nidx);
	int64_t gather = seg_mul(pts, nidx);
	int lg = seg_steps(nidx);
	int64_t seg = seg_mul(seg_mul(pts, ch + (nidx + ch - 1) / ch), 2);
	seg = seg_add(seg, seg_mul(seg_mul(outer, inner), nidx));
	seg = seg_add(seg, seg_mul(nidx, (int64_t)lg * lg / 2 + 1));
	seg = seg_add(seg, seg_mul(dim + 1, lg));
	return gather >= SEG_MIN_TERMS && seg_mul(seg, 2) <= gather;
}

// The keys a sorting kernel reads: buffer buf (I64[n], the runs of the
// previous kernel), or, for the first (buf == NOBUF), the keys computed
// from idx itself.
typedef struct SegKeys {
	NodeId ix;
	int64_t n, dim;
	uint32_t buf;
} SegKeys;

// A load of I64 buffer b at t whose values lie in [lo, hi], clamped there:
// the clamp changes nothing, but gives the value a range (kx_range), so
// that the arithmetic on it is narrow (int in the CUDA printer, plain
// division and modulo).
static KxId
seg_load(KProgram *p, uint32_t b, KxId t, int64_t lo, int64_t hi)
{
	return kx_iclamp(p, kx_load(p, b, t), lo, hi);
}

// The key at position t (an I64 expression in [0, n)).
static KxId
seg_key(Lower *L, const SegKeys *s, KxId t)
{
	KProgram *p = L->p;
	if (s->buf != NOBUF)
		return seg_load(p, s->buf, t, 0, (s->dim + 1) * s->n - 1);
	KxId r = lower_at(L, s->ix, t);
	KxId ok = kx_bin(p, KX_AND, kx_cmp(p, KC_GE, r, kx_iconst(p, 0)),
	                 kx_cmp(p, KC_LT, r, kx_iconst(p, s->dim)));
	r = kx_select(p, ok, r, kx_iconst(p, s->dim));
	return kx_iadd(p, kx_imul(p, r, s->n), t);
}

// lo' and hi' of one step of a lower-bound search over [lo, hi): mid =
// (lo + hi) / 2 moves hi down to mid where pred(mid) holds, else lo up
// to mid + 1; nothing moves once lo == hi (the extra steps of a short
// range).  pred is given as the condition at mid.
static void
seg_step(KProgram *p, KxId *lo, KxId *hi, KxId mid, KxId pred)
{
	KxId act = kx_cmp(p, KC_LT, *lo, *hi);
	KxId up = kx_bin(p, KX_AND, act, pred);
	KxId down = kx_bin(p, KX_AND, act, kx_un(p, KX_NOT, pred));
	KxId nhi = kx_select(p, up, mid, *hi);
	*lo = kx_select(p, down, kx_iadd(p, mid, kx_iconst(p, 1)), *lo);
	*hi = nhi;
}

// One merge pass: the sorted runs of len in s merged pairwise into runs
// of 2 len, written to a new I64[n] buffer (returned).
static uint32_t
seg_merge(Lower *L, NodeId node, const SegKeys *s, int64_t len)
{
	KProgram *p = L->p;
	int64_t n = s->n;
	Shape sh = {.rank = 1, .dim = {n}};
	uint32_t ob = kir_buf_add(p, KB_TMP, 0, DT_I64, &sh, node);
	KKernel *k = lower_kernel_begin(L, ob, node, "take_add.merge");
	KxId t = lower_domain(L, k, &sh);
	k->index = t;
	// The pair of runs A = [base, base + la), B = [base + len, base + len + lb)
	// and the output's position q in their merge.
	KxId base = kx_imul(p, kx_idiv(p, t, 2 * len), 2 * len);
	KxId q = kx_imod(p, t, 2 * len);
	KxId rest = kx_iadd(p, kx_iconst(p, n), kx_imul(p, base, -1));
	KxId la = kx_imin(p, rest, kx_iconst(p, len));
	KxId lb = kx_iclamp(p, kx_iadd(p, rest, kx_iconst(p, -len)), 0, len);
	KxId b0 = kx_iadd(p, base, kx_iconst(p, len));
	// a in [max(0, q - lb), min(q, la)]: the smallest with A[a] > B[q - 1 - a]
	// (keys are distinct).  While lo < hi, mid < la and 0 <= q - 1 - mid <
	// lb, so both reads are inside the runs; the clamps only keep the
	// reads of finished searches inside the buffer.
	KxId lo = kx_imax(p, kx_iconst(p, 0), kx_iadd(p, q, kx_imul(p, lb, -1)));
	KxId hi = kx_imin(p, q, la);
	for (int st = seg_steps(len + 1); st > 0; st--) {
		KxId mid = kx_idiv(p, kx_iadd(p, lo, hi), 2);
		KxId av = seg_key(L, s, kx_iclamp(p, kx_iadd(p, base, mid), 0, n - 1));
		KxId bi = kx_iadd(p, kx_iadd(p, b0, q), kx_iadd(p, kx_imul(p, mid, -1), kx_iconst(p, -1)));
		KxId bv = seg_key(L, s, kx_iclamp(p, bi, 0, n - 1));
		seg_step(p, &lo, &hi, mid, kx_cmp(p, KC_GT, av, bv));
	}
	KxId b = kx_iadd(p, q, kx_imul(p, lo, -1));
	KxId av = seg_key(L, s, kx_iclamp(p, kx_iadd(p, base, lo), 0, n - 1));
	KxId bv = seg_key(L, s, kx_iclamp(p, kx_iadd(p, b0, b), 0, n - 1));
	KxId froma = kx_bin(p, KX_AND, kx_cmp(p, KC_LT, lo, la),
	                    kx_bin(p, KX_OR, kx_cmp(p, KC_GE, b, lb), kx_cmp(p, KC_LT, av, bv)));
	k->body = kx_select(p, froma, av, bv);
	return ob;
}

// The keys sorted in blocks of blk positions (the last may be shorter),
// written to a new I64[n] buffer (returned): rank[t], the count of keys
// below t's in its block, then sorted[t] = the key of rank t - b in the
// block that starts at b (keys are distinct, so ranks are a permutation).
// Two kernels of blk terms a point instead of log2(blk) merge passes.
static uint32_t
seg_block_sort(Lower *L, NodeId node, const SegKeys *s, int64_t blk)
{
	KProgram *p = L->p;
	int64_t n = s->n;
	Shape sh = {.rank = 1, .dim = {n}};
	uint32_t rb = kir_buf_add(p, KB_TMP, 0, DT_I64, &sh, node);
	KKernel *k = lower_kernel_begin(L, rb, node, "take_add.rank");
	KxId t = lower_domain(L, k, &sh), r = kx_iconst(p, 0);
	k->index = t;
	if (blk > 1) {
		k->rdim[k->rrank++] = blk;
		r = kx_var(p, k->rank, blk);
	}
	KxId b = kx_imul(p, kx_idiv(p, t, blk), blk), u = kx_iadd(p, b, r);
	KxId in = kx_cmp(p, KC_LT, u, kx_iconst(p, n)), uc = kx_iclamp(p, u, 0, n - 1);
	KxId below = kx_bin(p, KX_AND, in, kx_cmp(p, KC_LT, seg_key(L, s, uc), seg_key(L, s, t)));
	k->body = kx_select(p, below, kx_iconst(p, 1), kx_iconst(p, 0));
	k->red = KR_SUM;
	k->post = kx_acc(p, DT_I64);
	uint32_t ob = kir_buf_add(p, KB_TMP, 0, DT_I64, &sh, node);
	k = lower_kernel_begin(L, ob, node, "take_add.block");
	t = lower_domain(L, k, &sh);
	r = kx_iconst(p, 0);
	k->index = t;
	if (blk > 1) {
		k->rdim[k->rrank++] = blk;
		r = kx_var(p, k->rank, blk);
	}
	b = kx_imul(p, kx_idiv(p, t, blk), blk);
	u = kx_iadd(p, b, r);
	in = kx_cmp(p, KC_LT, u, kx_iconst(p, n));
	uc = kx_iclamp(p, u, 0, n - 1);
	KxId rank = seg_load(p, rb, uc, 0, blk - 1);
	KxId hit = kx_bin(p, KX_AND, in, kx_cmp(p, KC_EQ, rank, kx_iadd(p, t, kx_imul(p, b, -1))));
	k->body = kx_select(p, hit, seg_key(L, s, uc), kx_iconst(p, 0));
	k->red = KR_SUM;
	k->post = kx_acc(p, DT_I64);
	return ob;
}

static void
kernel_take_add_segment(Lower *L, uint32_t out, NodeId n)
{
	const Graph *g = L->g;
	KProgram *p = L->p;
	NodeId x = ir_in1(g, n, 0), ix = ir_in1(g, n, 1), v = ir_in1(g, n, 2);
	const Shape *xs = ir_shape(g, x);
	int64_t outer, dim, inner, nidx;
	seg_geometry(g, n, &outer, &dim, &inner, &nidx);
	int64_t ch = seg_chunk(nidx), nc = (nidx + ch - 1) / ch;
	// 1. The sorted keys: blocks by rank, then merges.
	SegKeys s = {.ix = ix, .n = nidx, .dim = dim, .buf = NOBUF};
	int64_t blk = nidx < SEG_BLOCK ? nidx : SEG_BLOCK;
	s.buf = seg_block_sort(L, n, &s, blk);
	for (int64_t len = blk; len < nidx; len *= 2)
		s.buf = seg_merge(L, n, &s, len);
	uint32_t sb = s.buf;
	int64_t kmax = (dim + 1) * nidx - 1; // the largest key
	// 2. Row offsets: off[k] = the first position with key >= k n.
	Shape osh = {.rank = 1, .dim = {dim + 1}};
	uint32_t ob = kir_buf_add(p, KB_TMP, 0, DT_I64, &osh, n);
	KKernel *k = lower_kernel_begin(L, ob, n, "take_add.offsets");
	KxId r = lower_domain(L, k, &osh);
	k->index = r;
	KxId want = kx_imul(p, r, nidx), lo = kx_iconst(p, 0), hi = kx_iconst(p, nidx);
	for (int st = seg_steps(nidx + 1); st > 0; st--) {
		KxId mid = kx_idiv(p, kx_iadd(p, lo, hi), 2);
		KxId key = seg_load(p, sb, kx_iclamp(p, mid, 0, nidx - 1), 0, kmax);
		seg_step(p, &lo, &hi, mid, kx_cmp(p, KC_GE, key, want));
	}
	k->body = lo;
	// 3. Chunk sums Q[o, c, i] of each chunk's leading run.
	DType qdt = tmp_dtype(p, ndtype(L, n));
	Shape qsh = {.rank = 3, .dim = {outer, nc, inner}};
	uint32_t qb = kir_buf_add(p, KB_TMP, 0, qdt, &qsh, n);
	k = lower_kernel_begin(L, qb, n, "take_add.chunks");
	KxId qe = lower_domain(L, k, &qsh);
	k->index = qe;
	KxId o = coord(p, qe, &qsh, 0), c = coord(p, qe, &qsh, 1), i = coord(p, qe, &qsh, 2);
	KxId j = kx_iconst(p, 0);
	if (ch > 1) {
		k->rdim[k->rrank++] = ch;
		j = kx_var(p, k->rank, ch);
	}
	KxId pos = kx_iadd(p, kx_imul(p, c, ch), j);
	KxId key = seg_load(p, sb, kx_iclamp(p, pos, 0, nidx - 1), 0, kmax);
	KxId first = seg_load(p, sb, kx_imul(p, c, ch), 0, kmax);
	KxId same = kx_bin(p, KX_AND, kx_cmp(p, KC_LT, pos, kx_iconst(p, nidx)),
	                   kx_cmp(p, KC_EQ, kx_idiv(p, key, nidx), kx_idiv(p, first, nidx)));
	// Past the run, the chunk's first token again (a row in the cache).
	KxId tok = kx_imod(p, kx_select(p, same, key, first), nidx);
	KxId vi = kx_iadd(p, kx_imul(p, kx_iadd(p, kx_imul(p, o, nidx), tok), inner), i);
	KxId val = lower_at(L, v, vi);
	KxId z = kx_const(p, 0, (DType)p->x[val].dtype);
	k->body = kx_select(p, same, val, z);
	k->red = KR_SUM;
	k->post = kx_cast(p, kx_acc(p, (DType)p->x[val].dtype), qdt);
	k->nfused = L->nexpand;
	// 4. The rows: x plus the head's terms, then the later chunks' sums.
	k = lower_kernel_begin(L, out, n, "take_add");
	KxId e = lower_domain(L, k, xs);
	k->index = e;
	o = kx_idiv(p, e, dim * inner);
	KxId row = kx_imod(p, kx_idiv(p, e, inner), dim);
	i = kx_imod(p, e, inner);
	k->rdim[k->rrank++] = ch + nc;
	j = kx_var(p, k->rank, ch + nc);
	KxId beg = seg_load(p, ob, row, 0, nidx);
	KxId end = seg_load(p, ob, kx_iadd(p, row, kx_iconst(p, 1)), 0, nidx);
	KxId cb = kx_idiv(p, beg, ch); // the chunk of the row's first position
	KxId hend = kx_imul(p, kx_iadd(p, cb, kx_iconst(p, 1)), ch);
	pos = kx_iadd(p, beg, j);
	KxId inhead = kx_bin(p, KX_AND, kx_cmp(p, KC_LT, j, kx_iconst(p, ch)),
	                     kx_bin(p, KX_AND, kx_cmp(p, KC_LT, pos, end), kx_cmp(p, KC_LT, pos, hend)));
	// The arm not taken reads position 0 and chunk 0: the CPU's selects
	// evaluate both arms, and a fixed row stays in the cache where the
	// clamped positions would each read a row of v of their own.
	pos = kx_iclamp(p, kx_select(p, inhead, pos, kx_iconst(p, 0)), 0, nidx - 1);
	key = seg_load(p, sb, pos, 0, kmax);
	tok = kx_imod(p, key, nidx);
	vi = kx_iadd(p, kx_imul(p, kx_iadd(p, kx_imul(p, o, nidx), tok), inner), i);
	val = lower_at(L, v, vi);
	// Chunk cb + 1 + (j - C), a term while it starts before the row ends.
	c = kx_iadd(p, cb, kx_iadd(p, j, kx_iconst(p, 1 - ch)));
	KxId inchunk = kx_bin(p, KX_AND, kx_cmp(p, KC_GE, j, kx_iconst(p, ch)),
	                      kx_cmp(p, KC_LT, kx_imul(p, c, ch), end));
	c = kx_iclamp(p, kx_select(p, inchunk, c, kx_iconst(p, 0)), 0, nc - 1);
	KxId qi = kx_iadd(p, kx_imul(p, kx_iadd(p, kx_imul(p, o, nc), c), inner), i);
	KxId qv = kx_load(p, qb, qi);
	DType dt = (DType)p->x[val].dtype;
	z = kx_const(p, 0, dt);
	k->body = kx_select(p, inhead, val, kx_select(p, inchunk, qv, z));
	k->red = KR_SUM;
	k->post = kx_cast(p, kx_bin(p, KX_ADD, lower_at(L, x, e), kx_acc(p, dt)), p->buf[out].dtype);
	k->nfused = L->nexpand;
}

// Is b, read at (..., k, j) by a matmul, a load stepping by one element
// along j?  (A buffer is; a transposed or otherwise permuted view is not.)
static int
matmul_b_contiguous(Lower *L, NodeId bn, const Shape *os)
{
	KProgram *p = L->p;
	const Shape *bs = ir_shape(L->g, bn);
	int r = os->rank;
	KxId c[IR_MAXDIM];
	for (int d = 0; d < r; d++)
		c[d] = kx_var(p, d, bs->dim[d] == 1 ? 1 : bs->dim[d]);
	KxId v = lower_at(L, bn, flat(p, c, bs));
	int64_t coef;
	return p->x[v].op == KX_LOAD && kx_affine_coef(p, p->x[v].a[0], r - 1, &coef) && coef == 1;
}

// (..., M, K) @ (..., K, N): a sum over k of a[..., i, k] b[..., k, j].
// When the product is large enough for the blocked GEMM of the LLVM
// backend (codegen/llvm_gemm.c, llvm_emit_gemm) and b is a view that is not
// contiguous along j (x @ transpose(w), the linear layers), b is first
// copied into a row-major temporary: K N copies buy vector loads for the
// M N K terms.
static void
kernel_matmul(Lower *L, uint32_t out, NodeId n)
{
	const Graph *g = L->g;
	KProgram *p = L->p;
	NodeId an = ir_in1(g, n, 0), bn = ir_in1(g, n, 1);
	const Shape *as = ir_shape(g, an), *bs = ir_shape(g, bn), *os = ir_shape(g, n);
	int r = os->rank;
	int64_t K = as->dim[r - 1];
	int64_t M = os->dim[r - 2], N = os->dim[r - 1];
	if (M >= 4 && N >= 16 && M * N * K >= 4096 && L->buf[bn] == NOBUF &&
	    !matmul_b_contiguous(L, bn, os)) {
		uint32_t tb = kir_buf_add(p, KB_TMP, 0, tmp_dtype(p, ndtype(L, bn)), bs, bn);
		kernel_map(L, tb, 0, bn, bn);
		L->buf[bn] = tb;
		L->off[bn] = 0;
	}
	KKernel *k = lower_kernel_begin(L, out, n, "matmul");
	KxId c[IR_MAXDIM];
	for (int d = 0; d < r; d++) {
		if (os->dim[d] == 1) {
			c[d] = kx_iconst(p, 0);
			continue;
		}
		k->dim[k->rank] = os->dim[d];
		c[d] = kx_var(p, k->rank++, os->dim[d]);
	}
	KxId kk = kx_iconst(p, 0);
	if (K != 1) {
		k->rdim[k->rrank++] = K;
		kk = kx_var(p, k->rank, K);
	}
	KxId ca[IR_MAXDIM], cb[IR_MAXDIM];
	for (int d = 0; d < r - 2; d++)
		ca[d] = cb[d] = c[d];
	ca[r - 2] = c[r - 2];
	ca[r - 1] = kk;
	cb[r - 2] = kk;
	cb[r - 1] = c[r - 1];
	k->index = flat(p, c, os);
	k->body = kx_bin(p, KX_MUL, lower_at(L, an, flat(p, ca, as)), lower_at(L, bn, flat(p, cb, bs)));
	k->red = KR_SUM;
	k->post = kx_cast(p, kx_acc(p, (DType)p->x[k->body].dtype), p->buf[out].dtype);
	k->contraction = 1;
	k->nfused = L->nexpand;
}

void
cg_loc_str(const SrcMap *src, Loc loc, char *buf, size_t n)
{
	if (!n)
		return;
	buf[0] = 0;
	if (!src || !loc || loc >= src->nloc)
		return;
	const SrcLoc *l = &src->loc[loc];
	snprintf(buf, n, "%s:%u:%u", l->file < src->nfile ? src->file[l->file].name : "?", l->line,
	         l->col);
}

// ---------------------------------------------------------------- scan and host ops

// scan(body, carries, xs, invariants) as a loop (docs/CODEGEN.md):
//
//   c_i = carry operand i                        (copies, before the loop)
//   loop s = 0 .. T-1, t = s (or T-1-s when reverse):
//     the body's kernels, reading c_i, xs_j at offset t |x_j| and the
//     invariants in place, writing new carries to n_i and per-step
//     output k to ys_k at offset t |y_k|
//     c_i = n_i                                  (copies, inside the loop)
//
// The value of the scan is the tuple (c..., ys...) of buffers; a `get`
// is one of them.  The body is lowered like any graph (fusion and all)
// into the same program: its temporaries join the task's memory plan,
// where cg_plan keeps what a loop reads across steps alive for the whole
// loop.  The new carries go to buffers of their own, since body kernels
// still read the old ones; copying them back costs O(carry) per step.
static int
kernel_scan(Lower *L, NodeId n, char *err, size_t errlen)
{
	const Graph *g = L->g;
	KProgram *p = L->p;
	const Graph *body = g->sub[ir_attr_int(g, n, "body")];
	int nc = (int)ir_attr_int(g, n, "ncarry"), nx = (int)ir_attr_int(g, n, "nxs");
	int rev = ir_attr_int(g, n, "reverse") != 0, nin = g->node[n].nin, nout = (int)body->nout;
	int64_t T = ir_shape(g, ir_in1(g, n, nc))->dim[0];
	uint32_t *tup = arena_alloc_array(p->arena, (size_t)nout + 1, sizeof *tup);
	uint32_t *next = arena_alloc_array(p->arena, (size_t)nc + 1, sizeof *next);
	Bind *in = arena_alloc_array(p->arena, (size_t)nin + 1, sizeof *in);
	Bind *out = arena_alloc_array(p->arena, (size_t)nout + 1, sizeof *out);
	for (int i = 0; i < nc; i++) {
		NodeId x = ir_in1(g, n, i);
		DType dt = tmp_dtype(p, ndtype(L, x));
		tup[i] = kir_buf_add(p, KB_TMP, 0, dt, ir_shape(g, x), n);
		next[i] = kir_buf_add(p, KB_TMP, 0, dt, ir_shape(g, x), n);
		kernel_map(L, tup[i], 0, x, x);
	}
	for (int k = nc; k < nout; k++) {
		NodeId y = body->out[k].node;
		const Shape *ys = ir_shape(body, y);
		Shape s = {.rank = ys->rank + 1};
		s.dim[0] = T;
		memcpy(s.dim + 1, ys->dim, sizeof(int64_t) * (size_t)ys->rank);
		tup[k] = kir_buf_add(p, KB_TMP, 0, tmp_dtype(p, (DType)body->node[y].dtype), &s, n);
	}
	int loop = kir_loop_begin(p, T, L->loop);
	KxId step = kx_step(p, loop);
	KxId t = rev ? kx_iadd(p, kx_imul(p, step, -1), kx_iconst(p, T - 1)) : step;
	for (int i = 0; i < nin; i++) {
		NodeId x = ir_in1(g, n, i);
		if (i < nc) {
			in[i] = (Bind){tup[i], 0};
			continue;
		}
		FADC_ASSERT(L->buf[x] != NOBUF, "lower: a scan operand has no buffer");
		in[i] = (Bind){L->buf[x], L->off[x]};
		if (i < nc + nx) {
			KxId o = kx_imul(p, t, ir_numel(ir_shape(body, body->input[i].node)));
			in[i].off = in[i].off ? kx_iadd(p, in[i].off, o) : o;
		}
	}
	for (int k = 0; k < nout; k++) {
		if (k < nc)
			out[k] = (Bind){next[k], 0};
		else
			out[k] = (Bind){tup[k], kx_imul(p, t, ir_numel(ir_shape(body, body->out[k].node)))};
	}
	if (!lower_graph(p, body, L->task, in, out, loop, err, errlen))
		return 0;
	for (int i = 0; i < nc; i++)
		kernel_copy(L, tup[i], next[i], ir_shape(g, ir_in1(g, n, i)), n);
	kir_loop_end(p, loop);
	L->tup[n] = tup;
	return 1;
}

// linear_sum_assignment(cost): the cost converted to F64 (a kernel, so
// that any expression can feed it), then a host kernel calling
// ir_assignment (ir/hungarian.c, the interpreter's own solver) with a
// scratch buffer in the arena: the run path allocates nothing.
static void
kernel_host(Lower *L, uint32_t out, NodeId n)
{
	KProgram *p = L->p;
	NodeId x = ir_in1(L->g, n, 0);
	const Shape *cs = ir_shape(L->g, x);
	uint32_t cb = kir_buf_add(p, KB_TMP, 0, DT_F64, cs, n);
	KKernel *k = lower_kernel_begin(L, cb, n, "assignment.cost");
	k->index = lower_domain(L, k, cs);
	k->body = kx_cast(p, lower_at(L, x, k->index), DT_F64);
	k->nfused = L->nexpand;
	int64_t words = ((int64_t)ir_assignment_work(cs->dim[0], cs->dim[1]) + 7) / 8;
	Shape ws = {.rank = 1, .dim = {words}};
	uint32_t wb = kir_buf_add(p, KB_TMP, 0, DT_I64, &ws, n);
	k = lower_kernel_begin(L, out, n, "linear_sum_assignment");
	k->host = KH_ASSIGN;
	k->hin = cb;
	k->hwork = wb;
}

// ---------------------------------------------------------------- the table

// How an op becomes kernel IR, as its kind (ops.def) says: MAP and FREE
// ops have an expression rule (`at`, the value at a flat index, inlined
// into each kernel that reads the node, or kernel_map's kernel when the
// node is a root); REDUCE, MATMUL, SCATTER and HOST ops a kernel rule
// (their own kernels, writing buffer out).  INPUT and GET read buffers
// they are given; a SCAN is kernel_scan's loop; NONE has no lowering
// (fill_fusion reports it).  A row of those kinds without its lower_<op>
// fails the build.
typedef struct LowerRule {
	KxId (*at)(Lower *L, NodeId n, KxId e);
	void (*kernel)(Lower *L, uint32_t out, NodeId n);
} LowerRule;

// Families of kernel rules (the window ops' are lower_impl.h's).
#define lower_matmul kernel_matmul
#define lower_take_add kernel_scatter
#define lower_take_along_add kernel_scatter
#define lower_linear_sum_assignment kernel_host

// clang-format off
#define RULE_INPUT(n)   {0}
#define RULE_GET(n)     {0}
#define RULE_SCAN(n)    {0}
#define RULE_NONE(n)    {0}
#define RULE_FREE(n)    {.at = lower_##n}
#define RULE_MAP(n)     {.at = lower_##n}
#define RULE_REDUCE(n)  {.kernel = lower_##n}
#define RULE_MATMUL(n)  {.kernel = lower_##n}
#define RULE_SCATTER(n) {.kernel = lower_##n}
#define RULE_HOST(n)    {.kernel = lower_##n}
static const LowerRule lower_rule[OP_COUNT] = {
#define UNARY(n, ...)  [OP_##n] = {.at = lower_elemwise},
#define UNARYA(n, ...) [OP_##n] = {.at = lower_elemwise},
#define BINARY(n, ...) [OP_##n] = {.at = lower_elemwise},
#define CMP(n, ...)    [OP_##n] = {.at = lower_elemwise},
#define OTHER(n, ar, sh, fl, kind, ...) [OP_##n] = RULE_##kind(n),
#include "ops.def" // all row macros: a missing lower_<op> fails the build
};
// clang-format on

// Node n's own formula at flat index e (n is not loaded from a buffer).
static KxId
expand(Lower *L, NodeId n, KxId e)
{
	const LowerRule *r = &lower_rule[L->g->node[n].op];
	FADC_ASSERT(r->at != NULL, "lower: an op that fill_fusion accepted has no lowering");
	L->nexpand++;
	return r->at(L, n, e);
}

// Can a root of op `op` be computed straight into an output at an offset?
// (kernel_map's kernels can; the others' loops assume offset 0, so they
// write a temporary that is then copied.)
static int
writes_at_offset(int op)
{
	CgKind k = cg_op_kind(op);
	return (k == CK_MAP || k == CK_FREE) && !(ir_op(op)->flags & F_WINDOW);
}

// ---------------------------------------------------------------- graphs

// Sizes before arithmetic: a value whose bytes do not fit a buffer
// (KIR_MAX_BUF_BYTES; a shape may have 2^62 elements of 8 bytes) is
// refused with its location, before any buffer or offset is computed
// from it.  For the task's graph (cg_lower) and each scan body.
static int
check_sizes(const Graph *g, const char *task, char *err, size_t errlen)
{
	for (NodeId n = 1; n < g->nnode; n++) {
		const Node *nd = &g->node[n];
		if (nd->dtype == DT_TUPLE || kir_shape_bytes((DType)nd->dtype, ir_shape(g, n)) >= 0)
			continue;
		char where[512], ty[200], what[256];
		cg_loc_str(g->src, nd->loc, where, sizeof where);
		ir_type_str((DType)nd->dtype, ir_shape(g, n), ty, sizeof ty);
		snprintf(what, sizeof what, "the value of %s", ir_op(nd->op)->name);
		for (uint32_t i = 0; i < g->ninput; i++)
			if (g->input[i].node == n)
				snprintf(what, sizeof what, "input '%s'", g->input[i].name);
		snprintf(err, errlen, "%s%serror: task '%s': %s, %s, is too large for a buffer "
		         "(at most 2^56 bytes)", where, where[0] ? ": " : "", task, what, ty);
		return 0;
	}
	return 1;
}

// lower_graph with its working tables (fusion's, the node maps, the
// memo) in arena tmp, which the caller frees.
static int
lower_graph_in(KProgram *p, const Graph *g, const char *task, const Bind *in, const Bind *out,
               int loop, Arena *tmp, char *err, size_t errlen)
{
	uint8_t *root;
	NodeId bad = fill_fusion(g, tmp, &root);
	if (bad) {
		char where[512];
		cg_loc_str(g->src, g->node[bad].loc, where, sizeof where);
		snprintf(err, errlen, "%s%serror: task '%s': op '%s' is not supported by the CPU backend yet",
		         where, where[0] ? ": " : "", task, ir_op(g->node[bad].op)->name);
		return 0;
	}
	if (!check_sizes(g, task, err, errlen))
		return 0;
	for (NodeId n = 1; n < g->nnode; n++)
		if (g->node[n].dtype == DT_TUPLE && g->node[n].op != OP_scan) {
			snprintf(err, errlen, "error: task '%s': tuple values other than a scan's are not supported",
			         task);
			return 0;
		}
	Lower L = {.g = g, .p = p, .task = task, .loop = loop, .tmp = tmp};
	L.buf = arena_alloc_array(tmp, g->nnode + 1, sizeof *L.buf);
	L.off = arena_alloc_array(tmp, g->nnode + 1, sizeof *L.off);
	L.tup = arena_alloc_array(tmp, g->nnode + 1, sizeof *L.tup);
	for (NodeId n = 0; n < g->nnode; n++)
		L.buf[n] = NOBUF;
	for (uint32_t i = 0; i < g->ninput; i++) {
		NodeId n = g->input[i].node;
		L.buf[n] = in[i].buf;
		L.off[n] = in[i].off;
	}
	// An output's buffer is given: the first output of a node computes it
	// there; a later output of the same node, an output that is an input or
	// a scan's element, or one at an offset that the node's kernel cannot
	// write at, is a copy.
	uint32_t *first_out = arena_alloc_array(tmp, g->nnode + 1, sizeof *first_out);
	for (uint32_t o = 0; o < g->nout; o++) {
		NodeId n = g->out[o].node;
		int op = g->node[n].op;
		if (!first_out[n] && op != OP_input && op != OP_get && (!out[o].off || writes_at_offset(op)))
			first_out[n] = o + 1;
	}
	for (NodeId n = 1; n < g->nnode; n++) {
		if (g->node[n].op == OP_get) {
			NodeId t = ir_in1(g, n, 0);
			FADC_ASSERT(L.tup[t] != NULL, "lower: get of a tuple that was not lowered");
			L.buf[n] = L.tup[t][ir_attr_int(g, n, "index")];
			continue;
		}
		if (!root[n])
			continue;
		if (g->node[n].op == OP_scan) {
			if (!kernel_scan(&L, n, err, errlen))
				return 0;
			continue;
		}
		uint32_t b;
		KxId off = 0;
		if (first_out[n]) {
			b = out[first_out[n] - 1].buf;
			off = out[first_out[n] - 1].off;
		} else
			b = kir_buf_add(p, KB_TMP, 0, tmp_dtype(p, ndtype(&L, n)), ir_shape(g, n), n);
		// An empty value (a 0 in its shape) has no element to compute: no
		// kernel.  Its rules may divide by its dims (a convolution's
		// output channels per group), and a host step of an empty problem
		// (a 0 x 0 assignment) has nothing to solve.  The buffer stays, for
		// the readers' loops, which run over no element of it.
		const LowerRule *r = &lower_rule[g->node[n].op];
		if (ir_numel(ir_shape(g, n)) == 0)
			;
		else if (r->kernel)
			r->kernel(&L, b, n);
		else
			kernel_map(&L, b, off, n, 0);
		L.buf[n] = b;
		L.off[n] = off;
	}
	for (uint32_t o = 0; o < g->nout; o++) {
		NodeId n = g->out[o].node;
		if (first_out[n] != o + 1)
			kernel_map(&L, out[o].buf, out[o].off, n, n);
	}
	return 1;
}

// Graph g as kernels appended to p: its inputs are read from in[], its
// outputs written to out[] (a task's own buffers, or a scan's carries and
// step outputs), inside loop `loop` (-1: none).  The working tables live
// in an arena of their own, dropped at the end: in p's arena they stayed
// as long as the program (about 15 MB for the 224,000 nodes of a
// 16,000-statement chain's vhp, every task's program kept until the LLVM
// module is built).
static int
lower_graph(KProgram *p, const Graph *g, const char *task, const Bind *in, const Bind *out,
            int loop, char *err, size_t errlen)
{
	Arena *tmp = arena_new();
	int ok = lower_graph_in(p, g, task, in, out, loop, tmp, err, errlen);
	arena_free(tmp);
	return ok;
}

KProgram *
cg_lower(const Graph *g, const char *task, DType fcompute, char *err, size_t errlen)
{
	if (!check_sizes(g, task, err, errlen))
		return NULL;
	KProgram *p = kir_program_new(task, fcompute);
	p->ninput = g->ninput;
	p->noutput = g->nout;
	p->inbuf = arena_alloc_array(p->arena, g->ninput + 1, sizeof *p->inbuf);
	p->outbuf = arena_alloc_array(p->arena, g->nout + 1, sizeof *p->outbuf);
	Bind *in = arena_alloc_array(p->arena, g->ninput + 1, sizeof *in);
	Bind *out = arena_alloc_array(p->arena, g->nout + 1, sizeof *out);
	for (uint32_t i = 0; i < g->ninput; i++) {
		NodeId n = g->input[i].node;
		p->inbuf[i] = kir_buf_add(p, KB_IN, (int)i, (DType)g->node[n].dtype, ir_shape(g, n), n);
		in[i].buf = p->inbuf[i];
	}
	for (uint32_t o = 0; o < g->nout; o++) {
		NodeId n = g->out[o].node;
		p->outbuf[o] = kir_buf_add(p, KB_OUT, (int)o, (DType)g->node[n].dtype, ir_shape(g, n), n);
		out[o].buf = p->outbuf[o];
	}
	if (!lower_graph(p, g, task, in, out, -1, err, errlen)) {
		kir_program_free(p);
		return NULL;
	}
	kir_gemm_operands(p);
	kir_split_reductions(p);
	kir_program_trim(p);
	return p;
}
