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
// selects and comparisons.  Ops with no lowering are reported by name.
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

static double
cvt(DType dt, double v)
{
	switch (dt) {
	case DT_F32:
		return (double)(float)v;
	case DT_I64:
		return trunc(v);
	case DT_BOOL:
		return v != 0;
	default:
		return v;
	}
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

// Node n's own formula at flat index e (n is not loaded from a buffer).
static KxId
expand(Lower *L, NodeId n, KxId e)
{
	const Graph *g = L->g;
	KProgram *p = L->p;
	const Node *nd = &g->node[n];
	const Shape *s = ir_shape(g, n);
	Attrs a;
	ir_attrs_get(g, n, &a);
	L->nexpand++;
	if (ir_op(nd->op)->flags & F_ELEMWISE) {
		const OpInfo *oi = ir_op(nd->op);
		double A[IR_MAXATTR] = {0};
		for (int i = 0; i < oi->nattr; i++)
			A[i] = oi->attr[i].kind == AK_FLOAT ? a.a[i].f : (double)a.a[i].i;
		KxId x = lower_at(L, ir_in1(g, n, 0), e);
		KxId y = nd->nin > 1 ? lower_at(L, ir_in1(g, n, 1), e) : 0;
		return ew_fn[nd->op](p, (DType)p->x[x].dtype, x, y, A);
	}
	switch (nd->op) {
	case OP_full:
		return kx_const(p, cvt(ndtype(L, n), a.a[aidx(L, n, "value")].f), ctype(L, n));
	case OP_iota:
		return kx_cast(p, coord(p, e, s, (int)a.a[aidx(L, n, "axis")].i), ndtype(L, n));
	case OP_cast:
		return kx_cast(p, lower_at(L, ir_in1(g, n, 0), e), ndtype(L, n));
	case OP_not:
		return kx_un(p, KX_NOT, lower_at(L, ir_in1(g, n, 0), e));
	case OP_where:
		return kx_select(p, lower_at(L, ir_in1(g, n, 0), e), lower_at(L, ir_in1(g, n, 1), e),
		                 lower_at(L, ir_in1(g, n, 2), e));
	case OP_reshape:
	case OP_to_host:
	case OP_to_device:
		return lower_at(L, ir_in1(g, n, 0), e);
	case OP_broadcast:
	case OP_permute:
	case OP_slice: {
		NodeId x = ir_in1(g, n, 0);
		const Shape *xs = ir_shape(g, x);
		int64_t xst[IR_MAXDIM];
		strides(xs, xst);
		KxId ix = kx_iconst(p, 0);
		if (nd->op == OP_broadcast) {
			int lead = s->rank - xs->rank;
			for (int d = lead; d < s->rank; d++)
				if (xs->dim[d - lead] != 1)
					ix = kx_iadd(p, ix, kx_imul(p, coord(p, e, s, d), xst[d - lead]));
		} else if (nd->op == OP_permute) {
			const AttrVal *pm = &a.a[aidx(L, n, "perm")];
			for (int k = 0; k < pm->n; k++)
				ix = kx_iadd(p, ix, kx_imul(p, coord(p, e, s, k), xst[pm->v[k]]));
		} else {
			const AttrVal *st = &a.a[aidx(L, n, "start")], *sp = &a.a[aidx(L, n, "step")];
			for (int d = 0; d < s->rank; d++) {
				KxId c = kx_iadd(p, kx_iconst(p, st->v[d]), kx_imul(p, coord(p, e, s, d), sp->v[d]));
				ix = kx_iadd(p, ix, kx_imul(p, c, xst[d]));
			}
		}
		return lower_at(L, x, ix);
	}
	case OP_pad: {
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
		KxId fill = kx_const(p, cvt(ndtype(L, n), a.a[aidx(L, n, "value")].f), ctype(L, n));
		if (ir_numel(xs) == 0)
			return fill;
		return kx_select(p, inside, lower_at(L, x, flat(p, c, xs)), fill);
	}
	case OP_concat: {
		int ax = (int)a.a[aidx(L, n, "axis")].i;
		KxId cax = coord(p, e, s, ax), v = 0;
		int64_t off = s->dim[ax];
		for (int k = nd->nin - 1; k >= 0; k--) {
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
	case OP_resize: {
		NodeId x = ir_in1(g, n, 0);
		int64_t xn = ir_numel(ir_shape(g, x));
		KxId z = kx_const(p, 0, ctype(L, n));
		if (xn == 0)
			return z;
		KxId v = lower_at(L, x, kx_imin(p, e, kx_iconst(p, xn - 1)));
		return kx_select(p, kx_cmp(p, KC_LT, e, kx_iconst(p, xn)), v, z);
	}
	case OP_slice_update: {
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
	case OP_take: {
		// result[o, j, i] = x[o, idx[j], i], x viewed as (outer, dim, inner).
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
	case OP_take_along: {
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
	case OP_one_hot: {
		int64_t cls = a.a[aidx(L, n, "n")].i;
		if (cls == 0)
			return kx_const(p, 0, ctype(L, n));
		KxId v = lower_at(L, ir_in1(g, n, 0), kx_idiv(p, e, cls));
		KxId hit = kx_cmp(p, KC_EQ, v, kx_imod(p, e, cls));
		return kx_select(p, hit, kx_const(p, 1, ctype(L, n)), kx_const(p, 0, ctype(L, n)));
	}
	case OP_uniform:
	case OP_normal:
	case OP_gamma:
	case OP_exponential:
	case OP_bernoulli:
	case OP_kaiming_normal:
	case OP_kaiming_uniform: {
		int64_t seed = a.a[aidx(L, n, "seed")].i;
		KxId r, v;
		switch (nd->op) {
		case OP_uniform: { // lo + (hi - lo) u
			KxId lo = at64(L, n, 0, e), hi = at64(L, n, 1, e);
			r = kx_rand(p, KRAND_UNIFORM, seed, e, 0);
			v = kx_bin(p, KX_ADD, lo, kx_bin(p, KX_MUL, kx_bin(p, KX_SUB, hi, lo), r));
			break;
		}
		case OP_normal: // mean + std z
			r = kx_rand(p, KRAND_NORMAL, seed, e, 0);
			v = kx_bin(p, KX_ADD, at64(L, n, 0, e), kx_bin(p, KX_MUL, at64(L, n, 1, e), r));
			break;
		case OP_gamma: // Gamma(conc, 1) / rate
			r = kx_rand(p, KRAND_GAMMA, seed, e, at64(L, n, 0, e));
			v = kx_bin(p, KX_DIV, r, at64(L, n, 1, e));
			break;
		case OP_exponential: { // -log1p(-u) / rate
			r = kx_rand(p, KRAND_UNIFORM, seed, e, 0);
			KxId l = kx_un(p, KX_LOG1P, kx_un(p, KX_NEG, r));
			v = kx_bin(p, KX_DIV, kx_un(p, KX_NEG, l), at64(L, n, 0, e));
			break;
		}
		case OP_bernoulli:
			r = kx_rand(p, KRAND_UNIFORM, seed, e, 0);
			v = kx_select(p, kx_cmp(p, KC_LT, r, at64(L, n, 0, e)), kx_const(p, 1, DT_F64),
			              kx_const(p, 0, DT_F64));
			break;
		default: {
			int fan_out = (int)a.a[aidx(L, n, "mode")].i != 0;
			double sc = kaiming_scale(s, fan_out, a.a[aidx(L, n, "a")].f);
			if (nd->op == OP_kaiming_normal) {
				r = kx_rand(p, KRAND_NORMAL, seed, e, 0);
				v = kx_bin(p, KX_MUL, kx_const(p, sc, DT_F64), r);
			} else {
				double b = sqrt(3.0) * sc;
				r = kx_rand(p, KRAND_UNIFORM, seed, e, 0);
				v = kx_bin(p, KX_ADD, kx_const(p, -b, DT_F64),
				           kx_bin(p, KX_MUL, kx_const(p, 2 * b, DT_F64), r));
			}
		}
		}
		// The interpreter rounds kaiming draws to the dtype (a factory) but
		// keeps the other samplers' values as computed (in f64).
		int factory = nd->op == OP_kaiming_normal || nd->op == OP_kaiming_uniform;
		return kx_cast(p, v, factory ? ndtype(L, n) : ctype(L, n));
	}
	default:
		FADC_ASSERT(0, "lower: an op that fill_fusion accepted has no lowering");
		return 0;
	}
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
		Memo *old = L->memo, *m = arena_alloc_array(L->p->arena, c, sizeof *m);
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

// sum, mean, max, min: one kernel.  logsumexp: two, the maximum m first,
// then m + log(sum exp(x - m)) (no term overflows; m = +-inf gives m, as
// the interpreter).
static void
kernel_reduce(Lower *L, uint32_t out, NodeId n)
{
	const Graph *g = L->g;
	KProgram *p = L->p;
	int op = g->node[n].op;
	NodeId x = ir_in1(g, n, 0);
	KxId xi, oi;
	uint32_t mbuf = 0;
	if (op == OP_logsumexp) {
		DType dt = kir_compute_dtype(p, ndtype(L, n));
		mbuf = kir_buf_add(p, KB_TMP, 0, dt, ir_shape(g, n), n);
		KKernel *k = lower_kernel_begin(L, mbuf, n, "logsumexp.max");
		reduce_loops(L, k, n, &xi, &oi);
		k->index = oi;
		k->body = lower_at(L, x, xi);
		k->red = KR_MAX;
		k->post = kx_acc(p, (DType)p->x[k->body].dtype);
		k->nfused = L->nexpand;
	}
	KKernel *k = lower_kernel_begin(L, out, n, ir_op(op)->name);
	int64_t count = reduce_loops(L, k, n, &xi, &oi);
	k->index = oi;
	k->body = lower_at(L, x, xi);
	DType dt = (DType)p->x[k->body].dtype;
	KxId acc = kx_acc(p, dt);
	k->red = op == OP_max ? KR_MAX : op == OP_min ? KR_MIN : KR_SUM;
	k->post = acc;
	if (op == OP_mean)
		k->post = kx_bin(p, KX_DIV, acc, kx_const(p, (double)count, dt));
	if (op == OP_logsumexp) {
		KxId mx = kx_load(p, mbuf, oi);
		k->body = kx_un(p, KX_EXP, kx_bin(p, KX_SUB, k->body, mx));
		KxId inf = kx_cmp(p, KC_EQ, kx_un(p, KX_ABS, mx), kx_const(p, HUGE_VAL, dt));
		k->post = kx_select(p, inf, mx, kx_bin(p, KX_ADD, mx, kx_un(p, KX_LOG, acc)));
	}
	k->post = kx_cast(p, k->post, p->buf[out].dtype);
	k->nfused = L->nexpand;
}

// take_add(x, idx, v) and take_along_add(x, idx, v), the transposes of
// the gathers, as gathers: element c of the result is x[c] plus the sum,
// over the positions j of idx along the axis, of v at j where idx[j] names
// c's coordinate.  A reduction kernel like any other, so it runs in
// parallel with no atomic stores; its cost is dim times that of a scatter,
// which a dedicated scatter kernel will remove for large embeddings.
static void
kernel_scatter(Lower *L, uint32_t out, NodeId n)
{
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

// Graph g as kernels appended to p: its inputs are read from in[], its
// outputs written to out[] (a task's own buffers, or a scan's carries and
// step outputs), inside loop `loop` (-1: none).
static int
lower_graph(KProgram *p, const Graph *g, const char *task, const Bind *in, const Bind *out,
            int loop, char *err, size_t errlen)
{
	uint8_t *root;
	NodeId bad = fill_fusion(g, p->arena, &root);
	if (bad) {
		char where[512];
		cg_loc_str(g->src, g->node[bad].loc, where, sizeof where);
		snprintf(err, errlen, "%s%serror: task '%s': op '%s' is not supported by the CPU backend yet",
		         where, where[0] ? ": " : "", task, ir_op(g->node[bad].op)->name);
		return 0;
	}
	for (NodeId n = 1; n < g->nnode; n++)
		if (g->node[n].dtype == DT_TUPLE && g->node[n].op != OP_scan) {
			snprintf(err, errlen, "error: task '%s': tuple values other than a scan's are not supported",
			         task);
			return 0;
		}
	Lower L = {.g = g, .p = p, .task = task, .loop = loop};
	L.buf = arena_alloc_array(p->arena, g->nnode + 1, sizeof *L.buf);
	L.off = arena_alloc_array(p->arena, g->nnode + 1, sizeof *L.off);
	L.tup = arena_alloc_array(p->arena, g->nnode + 1, sizeof *L.tup);
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
	uint32_t *first_out = arena_alloc_array(p->arena, g->nnode + 1, sizeof *first_out);
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
		if (ir_op(g->node[n].op)->flags & F_WINDOW)
			lower_kernel_window(&L, b, n);
		else
			switch (cg_op_kind(g->node[n].op)) {
			case CK_REDUCE:
				kernel_reduce(&L, b, n);
				break;
			case CK_MATMUL:
				kernel_matmul(&L, b, n);
				break;
			case CK_SCATTER:
				kernel_scatter(&L, b, n);
				break;
			case CK_HOST:
				kernel_host(&L, b, n);
				break;
			default:
				kernel_map(&L, b, off, n, 0);
			}
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

KProgram *
cg_lower(const Graph *g, const char *task, DType fcompute, char *err, size_t errlen)
{
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
	return p;
}
