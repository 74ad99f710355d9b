// codegen/lower.c -- a task graph as kernel IR.
//
// fill_fusion (fuse.c) says which nodes are materialized.  Each of those
// becomes one kernel, in node order, and every other node is rebuilt as a
// scalar expression wherever a kernel reads it: at(n, e) is "the value of
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
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "codegen.h"

#define NOBUF UINT32_MAX

typedef struct Memo {
	NodeId n;
	KxId idx;
	uint32_t gen;
	KxId val;
} Memo;

typedef struct Lower {
	const Graph *g;
	KProgram *p;
	const char *task;
	uint32_t *buf; // buf[n]: the buffer holding node n, or NOBUF (inlined)
	KxId *off; // off[n]: where n's element 0 is in buf[n] (an I64 expression; 0: at 0)
	uint32_t **tup; // tup[n]: a scan's value, one buffer per element of its tuple
	int loop; // the loop (scan) these kernels run in, -1 for none
	Memo *memo; // (node, index) -> expression, valid for generation `gen`
	uint32_t cmemo, nmemo, gen;
	int nexpand; // nodes expanded into the current kernel
} Lower;

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

static KxId at(Lower *L, NodeId n, KxId e);

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
#define UNARY(n, fl, f, d0) \
	static KxId ew_##n(KProgram *p, DType dt, KxId x, KxId y, const double *A) { (void)dt; (void)y; (void)A; return f; }
#define UNARYA(n, fl, at, f, d0) \
	static KxId ew_##n(KProgram *p, DType dt, KxId x, KxId y, const double *A) { (void)dt; (void)y; (void)A; return f; }
#define BINARY(n, fl, f, d0, d1) \
	static KxId ew_##n(KProgram *p, DType dt, KxId x, KxId y, const double *A) { (void)dt; (void)A; return f; }
#define CMP(n, fl, f) \
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

static DType
ndtype(const Lower *L, NodeId n)
{
	return (DType)L->g->node[n].dtype;
}

static DType
ctype(const Lower *L, NodeId n)
{
	return kir_compute_dtype(L->p, ndtype(L, n));
}

static int
aidx(const Lower *L, NodeId n, const char *name)
{
	int k = ir_attr_index(L->g->node[n].op, name);
	FADC_ASSERT(k >= 0, name);
	return k;
}

// The value of operand i of n converted to F64 (the samplers' arithmetic
// is double, as in the interpreter).
static KxId
at64(Lower *L, NodeId n, int i, KxId e)
{
	return kx_cast(L->p, at(L, ir_in1(L->g, n, i), e), DT_F64);
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
		KxId x = at(L, ir_in1(g, n, 0), e);
		KxId y = nd->nin > 1 ? at(L, ir_in1(g, n, 1), e) : 0;
		return ew_fn[nd->op](p, (DType)p->x[x].dtype, x, y, A);
	}
	switch (nd->op) {
	case OP_full:
		return kx_const(p, cvt(ndtype(L, n), a.a[aidx(L, n, "value")].f), ctype(L, n));
	case OP_iota:
		return kx_cast(p, coord(p, e, s, (int)a.a[aidx(L, n, "axis")].i), ndtype(L, n));
	case OP_cast:
		return kx_cast(p, at(L, ir_in1(g, n, 0), e), ndtype(L, n));
	case OP_not:
		return kx_un(p, KX_NOT, at(L, ir_in1(g, n, 0), e));
	case OP_where:
		return kx_select(p, at(L, ir_in1(g, n, 0), e), at(L, ir_in1(g, n, 1), e),
		                 at(L, ir_in1(g, n, 2), e));
	case OP_reshape:
	case OP_to_host:
	case OP_to_device:
		return at(L, ir_in1(g, n, 0), e);
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
		return at(L, x, ix);
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
		return kx_select(p, inside, at(L, x, flat(p, c, xs)), fill);
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
			KxId xv = at(L, x, flat(p, c, xs));
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
		KxId v = at(L, x, kx_imin(p, e, kx_iconst(p, xn - 1)));
		return kx_select(p, kx_cmp(p, KC_LT, e, kx_iconst(p, xn)), v, z);
	}
	case OP_slice_update: {
		NodeId x = ir_in1(g, n, 0), v = ir_in1(g, n, 1);
		const Shape *vs = ir_shape(g, v);
		const AttrVal *st = &a.a[aidx(L, n, "start")], *sp = &a.a[aidx(L, n, "step")];
		KxId xv = at(L, x, e);
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
		return kx_select(p, in, at(L, v, flat(p, c, vs)), xv);
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
		KxId k = kx_iclamp(p, at(L, ix, j), 0, dim - 1);
		KxId xi = kx_iadd(p, kx_imul(p, kx_iadd(p, kx_imul(p, o, dim), k), inner), i);
		return at(L, x, xi);
	}
	case OP_take_along: {
		NodeId x = ir_in1(g, n, 0), ix = ir_in1(g, n, 1);
		const Shape *xs = ir_shape(g, x);
		int ax = (int)a.a[aidx(L, n, "axis")].i;
		if (ir_numel(s) == 0 || xs->dim[ax] == 0)
			return kx_const(p, 0, ctype(L, n));
		KxId c[IR_MAXDIM];
		for (int d = 0; d < s->rank; d++)
			c[d] = d == ax ? kx_iclamp(p, at(L, ix, e), 0, xs->dim[ax] - 1) : coord(p, e, s, d);
		return at(L, x, flat(p, c, xs));
	}
	case OP_one_hot: {
		int64_t cls = a.a[aidx(L, n, "n")].i;
		if (cls == 0)
			return kx_const(p, 0, ctype(L, n));
		KxId v = at(L, ir_in1(g, n, 0), kx_idiv(p, e, cls));
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

static KxId
at(Lower *L, NodeId n, KxId e)
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

static KKernel *
kernel_begin(Lower *L, uint32_t out, NodeId n, const char *what)
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
static KxId
domain(Lower *L, KKernel *k, const Shape *s)
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
	KKernel *k = kernel_begin(L, out, n, src ? "copy" : "elementwise");
	const Shape *s = ir_shape(L->g, src ? src : n);
	KxId e = domain(L, k, s);
	KxId v = src ? at(L, src, e) : expand(L, n, e);
	k->index = off ? kx_iadd(L->p, e, off) : e;
	k->body = kx_cast(L->p, v, L->p->buf[out].dtype);
	k->nfused = L->nexpand;
}

// Buffer src copied to buffer dst, both of shape s (a scan's carries).
static void
kernel_copy(Lower *L, uint32_t dst, uint32_t src, const Shape *s, NodeId n)
{
	KKernel *k = kernel_begin(L, dst, n, "carry");
	k->index = domain(L, k, s);
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
		KKernel *k = kernel_begin(L, mbuf, n, "logsumexp.max");
		reduce_loops(L, k, n, &xi, &oi);
		k->index = oi;
		k->body = at(L, x, xi);
		k->red = KR_MAX;
		k->post = kx_acc(p, (DType)p->x[k->body].dtype);
		k->nfused = L->nexpand;
	}
	KKernel *k = kernel_begin(L, out, n, ir_op(op)->name);
	int64_t count = reduce_loops(L, k, n, &xi, &oi);
	k->index = oi;
	k->body = at(L, x, xi);
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
	KKernel *k = kernel_begin(L, out, n, ir_op(op)->name);
	NodeId x = ir_in1(g, n, 0), ix = ir_in1(g, n, 1), v = ir_in1(g, n, 2);
	const Shape *xs = ir_shape(g, x), *is = ir_shape(g, ix), *vs = ir_shape(g, v);
	Attrs a;
	ir_attrs_get(g, n, &a);
	int ax = (int)a.a[aidx(L, n, "axis")].i;
	KxId e = domain(L, k, xs);
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
		KxId hit = kx_cmp(p, KC_EQ, at(L, ix, j), cax);
		k->body = nidx ? kx_select(p, hit, at(L, v, vi), z) : z;
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
		KxId hit = kx_bin(p, KX_AND, inside, kx_cmp(p, KC_EQ, at(L, ix, vi), cax));
		if (p->x[inside].op == KX_CONST)
			hit = kx_cmp(p, KC_EQ, at(L, ix, vi), cax);
		k->body = ir_numel(is) ? kx_select(p, hit, at(L, v, vi), z) : z;
	}
	k->red = KR_SUM;
	k->post = kx_cast(p, kx_bin(p, KX_ADD, at(L, x, e), kx_acc(p, (DType)p->x[k->body].dtype)),
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
	KxId v = at(L, bn, flat(p, c, bs));
	int64_t coef;
	return p->x[v].op == KX_LOAD && kx_affine_coef(p, p->x[v].a[0], r - 1, &coef) && coef == 1;
}

// (..., M, K) @ (..., K, N): a sum over k of a[..., i, k] b[..., k, j].
// When the product is large enough for the blocked GEMM of the LLVM
// backend (codegen/llvm.c, emit_gemm) and b is a view that is not
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
	KKernel *k = kernel_begin(L, out, n, "matmul");
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
	k->body = kx_bin(p, KX_MUL, at(L, an, flat(p, ca, as)), at(L, bn, flat(p, cb, bs)));
	k->red = KR_SUM;
	k->post = kx_cast(p, kx_acc(p, (DType)p->x[k->body].dtype), p->buf[out].dtype);
	k->contraction = 1;
	k->nfused = L->nexpand;
}

// ---------------------------------------------------------------- window ops
// conv, the pools, upsample_bilinear, argmax and their adjoints, as plain
// loop nests in the kernel IR (ir/interp.c's rules, term by term): a
// parallel loop over the result and a reduction over the window (conv: the
// group's input channels and the kernel taps).  Positions outside the input
// are selects (the load index clamped, so both arms are safe), never
// branches.  The adjoints are gathers: each result element sums over the
// windows that read it, found by inverting the window map (conv_input_grad,
// max_pool_grad, avg_pool_grad: one term per kernel tap), by testing the
// few candidates of a bounded inverse window (upsample_bilinear_grad:
// bilinear_up) or by testing every output position
// (adaptive_avg_pool_grad, whose windows have no fixed shape).  max_pool's argmax is two kernels, the
// window's maximum m and then the first position holding m (NaN: the first
// NaN), which is the interpreter's running "first maximum" exactly.

// The geometry of a window op, as ir/interp.c's window(): 1-d is 2-d with
// a height of 1.
typedef struct Geo {
	int64_t N, C, H, W, OH, OW;
	int64_t kh, kw, sh, sw, ph, pw, dh, dw;
} Geo;

static Geo
geo(const Shape *x, const Shape *o, const int64_t *k, const int64_t *s, const int64_t *pd,
    const int64_t *d)
{
	int ns = x->rank - 2, two = ns == 2;
	Geo v;
	v.N = x->dim[0];
	v.C = x->dim[1];
	v.H = two ? x->dim[2] : 1;
	v.W = x->dim[x->rank - 1];
	v.OH = two ? o->dim[2] : 1;
	v.OW = o->dim[o->rank - 1];
	v.kh = k && two ? k[0] : 1;
	v.kw = k ? k[ns - 1] : 1;
	v.sh = s && two ? s[0] : 1;
	v.sw = s ? s[ns - 1] : 1;
	v.ph = pd && two ? pd[0] : 0;
	v.pw = pd ? pd[ns - 1] : 0;
	v.dh = two && d ? d[0] : 1;
	v.dw = d ? d[ns - 1] : 1;
	return v;
}

static const int64_t *
attr_ints(const Lower *L, NodeId n, const Attrs *a, const char *name)
{
	int k = ir_attr_index(L->g->node[n].op, name);
	return k >= 0 ? a->a[k].v : NULL;
}

// A parallel (reduction) loop variable of extent ext; 0 when ext is 1.
static KxId
pvar(Lower *L, KKernel *k, int64_t ext)
{
	if (ext == 1)
		return kx_iconst(L->p, 0);
	FADC_ASSERT(k->rrank == 0, "pvar after rvar");
	k->dim[k->rank] = ext;
	return kx_var(L->p, k->rank++, ext);
}

static KxId
rvar(Lower *L, KKernel *k, int64_t ext)
{
	if (ext == 1)
		return kx_iconst(L->p, 0);
	k->rdim[k->rrank] = ext;
	int v = k->rank + k->rrank++;
	return kx_var(L->p, v, ext);
}

// a AND b, where 0 stands for "true".
static KxId
band(KProgram *p, KxId a, KxId b)
{
	if (!a)
		return b;
	if (!b)
		return a;
	return kx_bin(p, KX_AND, a, b);
}

// lo <= i < hi as a BOOL, or 0 (true) when i's range proves it.
static KxId
in_range(KProgram *p, KxId i, int64_t lo, int64_t hi)
{
	int64_t a, b;
	int known = kx_range(p, i, &a, &b);
	KxId t = 0;
	if (!(known && a >= lo))
		t = kx_cmp(p, KC_GE, i, kx_iconst(p, lo));
	if (!(known && b < hi))
		t = band(p, t, kx_cmp(p, KC_LT, i, kx_iconst(p, hi)));
	return t;
}

static KxId
sel(KProgram *p, KxId c, KxId a, KxId b)
{
	return c ? kx_select(p, c, a, b) : a;
}

// (((a * B) + b) * C + c) ...: the flat index of coordinates in a shape.
static KxId
flat4(KProgram *p, KxId a, KxId b, int64_t B, KxId c, int64_t Cd, KxId d, int64_t D)
{
	KxId e = kx_iadd(p, kx_imul(p, a, B), b);
	e = kx_iadd(p, kx_imul(p, e, Cd), c);
	return kx_iadd(p, kx_imul(p, e, D), d);
}

static KxId
ineg(KProgram *p, KxId a)
{
	return kx_imul(p, a, -1);
}

// The output position o (clamped into [0, out)) whose window reads input
// position i at tap t: o s - pad + t dil = i; *ok says that one exists.
static KxId
inv_window(KProgram *p, KxId i, KxId t, int64_t pad, int64_t stride, int64_t dil, int64_t out,
           KxId *ok)
{
	KxId r = kx_iadd(p, kx_iadd(p, i, kx_iconst(p, pad)), ineg(p, kx_imul(p, t, dil)));
	KxId c = 0;
	if (stride > 1)
		c = kx_cmp(p, KC_EQ, kx_imod(p, r, stride), kx_iconst(p, 0));
	KxId o = kx_idiv(p, r, stride);
	*ok = band(p, c, in_range(p, o, 0, out));
	return out > 0 ? kx_iclamp(p, o, 0, out - 1) : kx_iconst(p, 0);
}

static KxId
to_f64(KProgram *p, KxId a)
{
	return kx_cast(p, a, DT_F64);
}

static void
finish(Lower *L, KKernel *k, KRed red, KxId body, KxId post_of_acc_or_0)
{
	KProgram *p = L->p;
	KBuf *b = &p->buf[k->out];
	k->body = body;
	k->red = red;
	if (red) {
		k->post = post_of_acc_or_0 ? post_of_acc_or_0 : kx_acc(p, (DType)p->x[body].dtype);
		k->post = kx_cast(p, k->post, b->dtype);
	} else
		k->body = kx_cast(p, body, b->dtype);
	k->nfused = L->nexpand;
}

// ---- convolutions as GEMMs (im2col)
// A large convolution with one group runs as a matrix product, which the
// LLVM backend turns into its blocked GEMM (codegen/llvm.c, emit_gemm) and
// the CUDA backend into a cuBLAS call (kir_gemm_plan): the input's windows
// are first copied into a column buffer (im2col: one element per (input
// channel, tap) q = (c, kh, kw) and output position p = (oh, ow), zero
// where the tap falls in the padding), then
//   conv             out[n, co, p]   = sum_q w[co, q] col[n, q, p]           (P >= 16)
//                    outT[n, p, co]  = sum_q colT[n, p, q] wT[q, co]         (P small,
//                                      wide channels: wav2letter), then transposed
//   conv_weight_grad dw[co, q]      = sum_{n, p} g[n, co, p] colT[n, p, q]
//   conv_input_grad  dcol[n, q, p]  = sum_co w[co, q] g[n, co, p]           (P >= 16)
//                    dcolT[n, p, q] = sum_co g[n, co, p] w[co, q]           (P small), then
//                    dx[n, c, ih, iw] = sum over the taps (kh, kw) whose window
//                    reads (ih, iw) of dcol[n, (c, kh, kw), (oh, ow)] (col2im,
//                    as a gather: the tap inverted as in kernel_conv)
// Each product sums in the order of its reduction, as the direct loops do
// (the weight gradient sums over p within n, then over n), so only the
// rounding of the fused multiply-add differs.
//
// The column buffer of the whole batch costs N Q P elements; when that is
// more than the bound (CONV_COL_MAX bytes, or $FADC_CONV_COL_MAX: a testing
// knob, read at each lowering), the work is cut into chunks that each fit,
// and one column buffer (a chunk's size) is reused by every chunk: its
// kernels run in order (one stream on the GPU, one after the other on the
// CPU), so chunk c + 1's im2col overwrites it only after chunk c's product
// has read it, and the memory plan keeps it live from the first chunk's
// write to the last chunk's read.
// - conv and conv_input_grad cut the batch: chunk b holds samples
//   [b n0, b n0 + nb) (n0 = ceil(N / chunks), the last chunk ragged when n0
//   does not divide N), and writes only its own samples of the result
//   (out, or dx through col2im), so each chunk is the unchunked kernels
//   over fewer samples: im2col + GEMM (+ col2im).
// - conv_weight_grad cuts the input channels instead: dw sums over the
//   whole batch, so cutting the batch would need per-chunk partial
//   results (chunks x Co x Q more elements: 302 MB for fcn_resnet's head)
//   and a sum, or a GEMM accumulating into dw, which the kernel IR has
//   no form for.  A chunk of channels [cb, cb + cc) is a block of columns
//   of dw, dw[:, cb kh kw ..) = gT . colT_chunk, written in place (C's
//   leading dimension stays Q): every chunk is a plain GEMM (M = Co,
//   N = cc kh kw, K = N P), each dw element sums the same terms in the same
//   order as without chunks.
// When even one sample (one channel for the weight gradient) does not fit,
// or for small convolutions (below CONV_GEMM_MIN multiply-adds), the
// direct loops of kernel_conv.
#define CONV_GEMM_MIN (1 << 16)
#define CONV_COL_MAX ((int64_t)256 << 20)

// The column bound in bytes: $FADC_CONV_COL_MAX when it is a positive
// integer (tests force chunks at small sizes with it), else CONV_COL_MAX.
static int64_t
conv_col_max(void)
{
	const char *s = getenv("FADC_CONV_COL_MAX");
	if (s && *s) {
		char *end;
		long long v = strtoll(s, &end, 10);
		if (!*end && v > 0)
			return (int64_t)v;
	}
	return CONV_COL_MAX;
}

// At most this many chunks: each is its own kernels (two or three per
// chunk, compiled and launched), so a convolution needing more (a vmapped
// batch of millions, as resnet18's full-size Hessian, whose lowering then
// built millions of kernels before the task-size check could refuse it)
// keeps the direct loops.  fcn_resnet at full size needs 8.
#define CONV_MAX_CHUNKS 64

// How to cut `total` units of `unit` bytes each into chunks of at most
// `max` bytes: *n0 units per chunk (the last one ragged), returns the
// number of chunks (0: one unit does not fit, or more than
// CONV_MAX_CHUNKS chunks would be needed).
static int64_t
conv_chunks(int64_t total, int64_t unit, int64_t max, int64_t *n0)
{
	int64_t fit = unit > 0 ? max / unit : total;
	if (fit < 1)
		return 0;
	int64_t chunks = (total + fit - 1) / fit;
	if (chunks > CONV_MAX_CHUNKS)
		return 0;
	*n0 = (total + chunks - 1) / chunks;
	return chunks;
}

// The column buffer cb of x (N, C, H, W) for geometry v, for samples
// [n0, n0 + ns) and input channels [c0, c0 + nc): (ns, Qc, P), or
// transposed (ns, P, Qc), with Qc = nc kh kw (q counted from channel c0).
static void
im2col(Lower *L, NodeId n, NodeId x, const Geo *v, int trans, uint32_t cb, int64_t n0, int64_t ns,
       int64_t c0, int64_t nc)
{
	KProgram *p = L->p;
	int64_t Qc = nc * v->kh * v->kw, P = v->OH * v->OW;
	KKernel *k = kernel_begin(L, cb, n, trans ? "im2col.t" : "im2col");
	KxId nn = pvar(L, k, ns), c, kh, kw, oh, ow;
	if (trans) {
		oh = pvar(L, k, v->OH), ow = pvar(L, k, v->OW);
		c = pvar(L, k, nc), kh = pvar(L, k, v->kh), kw = pvar(L, k, v->kw);
	} else {
		c = pvar(L, k, nc), kh = pvar(L, k, v->kh), kw = pvar(L, k, v->kw);
		oh = pvar(L, k, v->OH), ow = pvar(L, k, v->OW);
	}
	KxId ih = kx_iadd(p, kx_imul(p, oh, v->sh), kx_iadd(p, kx_iconst(p, -v->ph), kx_imul(p, kh, v->dh)));
	KxId iw = kx_iadd(p, kx_imul(p, ow, v->sw), kx_iadd(p, kx_iconst(p, -v->pw), kx_imul(p, kw, v->dw)));
	KxId ok = band(p, in_range(p, ih, 0, v->H), in_range(p, iw, 0, v->W));
	KxId xi = flat4(p, kx_iadd(p, nn, kx_iconst(p, n0)), kx_iadd(p, c, kx_iconst(p, c0)), v->C,
	                kx_iclamp(p, ih, 0, v->H - 1), v->H, kx_iclamp(p, iw, 0, v->W - 1), v->W);
	KxId q = flat4(p, kx_iconst(p, 0), c, nc, kh, v->kh, kw, v->kw);
	KxId pp = kx_iadd(p, kx_imul(p, oh, v->OW), ow);
	k->index = trans ? kx_iadd(p, kx_imul(p, kx_iadd(p, kx_imul(p, nn, P), pp), Qc), q)
	                 : kx_iadd(p, kx_imul(p, kx_iadd(p, kx_imul(p, nn, Qc), q), P), pp);
	finish(L, k, KR_NONE, sel(p, ok, at(L, x, xi), kx_const(p, 0, ctype(L, x))), 0);
}

// A column buffer (a, b, c) of x's compute dtype.
static uint32_t
col_buf(Lower *L, NodeId n, NodeId x, int64_t a, int64_t b, int64_t c)
{
	Shape cs = {.rank = 3, .dim = {a, b, c}};
	return kir_buf_add(L->p, KB_TMP, 0, ctype(L, x), &cs, n);
}

// A contraction kernel writing buf out (of n's dtype), body a product.
static void
gemm_finish(Lower *L, KKernel *k, KxId idx, KxId a, KxId b)
{
	k->index = idx;
	k->contraction = 1;
	finish(L, k, KR_SUM, kx_bin(L->p, KX_MUL, a, b), 0);
}

// i + c, c a constant.
static KxId
iplus(KProgram *p, KxId i, int64_t c)
{
	return kx_iadd(p, i, kx_iconst(p, c));
}

static int
conv_gemm(Lower *L, uint32_t out, NodeId n, const Attrs *a)
{
	const Graph *g = L->g;
	KProgram *p = L->p;
	int op = g->node[n].op;
	if (a->a[aidx(L, n, "groups")].i != 1)
		return 0;
	NodeId i0 = ir_in1(g, n, 0), i1 = ir_in1(g, n, 1);
	const Shape *os = ir_shape(g, n);
	const int64_t *st = attr_ints(L, n, a, "stride"), *pd = attr_ints(L, n, a, "padding"),
	              *dl = attr_ints(L, n, a, "dilation");
	Geo v;
	int64_t Co;
	if (op == OP_conv) {
		v = geo(ir_shape(g, i0), os, ir_shape(g, i1)->dim + 2, st, pd, dl);
		Co = ir_shape(g, i1)->dim[0];
	} else if (op == OP_conv_input_grad) {
		v = geo(os, ir_shape(g, i0), ir_shape(g, i1)->dim + 2, st, pd, dl);
		Co = ir_shape(g, i0)->dim[1];
	} else {
		v = geo(ir_shape(g, i0), ir_shape(g, i1), attr_ints(L, n, a, "kernel"), st, pd, dl);
		Co = ir_shape(g, i1)->dim[1];
	}
	int64_t Q = v.C * v.kh * v.kw, P = v.OH * v.OW, K2 = v.kh * v.kw;
	int64_t esize = (int64_t)kir_dtype_size(ctype(L, n)), colmax = conv_col_max();
	if (v.N * Co * Q * P < CONV_GEMM_MIN || (Q < 16 && op != OP_conv))
		return 0;
	// A 1 x 1 convolution of stride 1 without padding is a product as it
	// stands: its columns are x itself (col[n, c, p] = x[n, c, p]) and its
	// input gradient's columns are dx (dcol[n, c, p] = dx[n, c, p]), so
	// neither im2col nor col2im runs and no column buffer (nor chunk) is
	// needed: two thirds of a ResNet-50's convolutions (detr, fcn_resnet).
	// conv only when x is stored (a GEMM's operands are loads); the weight
	// gradient still needs x transposed (below).
	int pointwise = v.kh == 1 && v.kw == 1 && v.sh == 1 && v.sw == 1 && v.ph == 0 && v.pw == 0 &&
	                P >= 16;
	int direct = pointwise && (op == OP_conv_input_grad || (op == OP_conv && L->buf[i0] != NOBUF));
	// Chunks: of samples (Q P elements each), or for the weight gradient
	// of channels (N P kh kw elements each).
	int64_t u0 = v.N, chunks = 1;
	if (!direct)
		chunks = op == OP_conv_weight_grad ? conv_chunks(v.C, v.N * P * K2 * esize, colmax, &u0)
		                                   : conv_chunks(v.N, Q * P * esize, colmax, &u0);
	if (!chunks)
		return 0;
	DType dt = ctype(L, n);
	if (op == OP_conv && P >= 16) {
		uint32_t cb = direct ? 0 : col_buf(L, n, i0, u0, Q, P);
		for (int64_t ch = 0, b = 0; ch < chunks; ch++, b += u0) {
			int64_t nb = b + u0 <= v.N ? u0 : v.N - b;
			if (!direct)
				im2col(L, n, i0, &v, 0, cb, b, nb, 0, v.C);
			KKernel *k = kernel_begin(L, out, n, "conv.gemm");
			KxId nn = pvar(L, k, nb), co = pvar(L, k, Co), pp = pvar(L, k, P), q = rvar(L, k, Q);
			KxId wi = kx_iadd(p, kx_imul(p, co, Q), q);
			KxId ci = kx_iadd(p, kx_imul(p, kx_iadd(p, kx_imul(p, nn, Q), q), P), pp);
			KxId oi = kx_iadd(p, kx_imul(p, kx_iadd(p, kx_imul(p, iplus(p, nn, b), Co), co), P), pp);
			gemm_finish(L, k, oi, at(L, i1, wi), direct ? at(L, i0, ci) : kx_load(p, cb, ci));
		}
		return 1;
	}
	if (op == OP_conv) {
		if (Co < 16)
			return 0;
		uint32_t cb = col_buf(L, n, i0, u0, P, Q);
		Shape ws = {.rank = 2, .dim = {Q, Co}};
		uint32_t wt = kir_buf_add(p, KB_TMP, 0, dt, &ws, n);
		// wT in tiles of bc x bq (divisors of Co and Q): a plain
		// transposing loop would read w with a stride of Q elements,
		// a cache and TLB miss per value for wide layers; a tile reads a
		// few rows of w over and over.
		int64_t bc = 1, bq = 1;
		for (int64_t b = 16; b >= 2 && bc == 1; b--)
			bc = Co % b == 0 ? b : 1;
		for (int64_t b = 16; b >= 2 && bq == 1; b--)
			bq = Q % b == 0 ? b : 1;
		KKernel *k = kernel_begin(L, wt, n, "conv.wt");
		KxId cob = pvar(L, k, Co / bc), qb = pvar(L, k, Q / bq), qi = pvar(L, k, bq), coi = pvar(L, k, bc);
		KxId q = kx_iadd(p, kx_imul(p, qb, bq), qi), co = kx_iadd(p, kx_imul(p, cob, bc), coi);
		k->index = kx_iadd(p, kx_imul(p, q, Co), co);
		finish(L, k, KR_NONE, at(L, i1, kx_iadd(p, kx_imul(p, co, Q), q)), 0);
		Shape ts = {.rank = 3, .dim = {v.N, P, Co}};
		uint32_t ot = kir_buf_add(p, KB_TMP, 0, dt, &ts, n);
		for (int64_t ch = 0, b = 0; ch < chunks; ch++, b += u0) {
			int64_t nb = b + u0 <= v.N ? u0 : v.N - b;
			im2col(L, n, i0, &v, 1, cb, b, nb, 0, v.C);
			k = kernel_begin(L, ot, n, "conv.gemm.t");
			KxId nn = pvar(L, k, nb), pp = pvar(L, k, P);
			co = pvar(L, k, Co);
			q = rvar(L, k, Q);
			KxId ci = kx_iadd(p, kx_imul(p, kx_iadd(p, kx_imul(p, nn, P), pp), Q), q);
			KxId oi = kx_iadd(p, kx_imul(p, kx_iadd(p, kx_imul(p, iplus(p, nn, b), P), pp), Co), co);
			gemm_finish(L, k, oi, kx_load(p, cb, ci), kx_load(p, wt, kx_iadd(p, kx_imul(p, q, Co), co)));
		}
		k = kernel_begin(L, out, n, "conv.out");
		KxId nn = pvar(L, k, v.N);
		co = pvar(L, k, Co);
		KxId pp = pvar(L, k, P);
		k->index = kx_iadd(p, kx_imul(p, kx_iadd(p, kx_imul(p, nn, Co), co), P), pp);
		finish(L, k, KR_NONE,
		       kx_load(p, ot, kx_iadd(p, kx_imul(p, kx_iadd(p, kx_imul(p, nn, P), pp), Co), co)), 0);
		return 1;
	}
	if (op == OP_conv_weight_grad) { // x, g -> (Co, C, kh, kw) = (Co, Q)
		// g[n, co, p] steps by Co P along n but by 1 along p, so (n, p)
		// is no single reduction axis of g; gT[co, n, p] steps by P and
		// 1, as colT[n, p, q] does by P Q and Q: both merge into
		// r = n P + p, and the product is one GEMM
		// dw (Co x Q) = gT (Co x N P) . colT (N P x Q) (kir_gemm_plan).
		// gT is g's size, made when that is at most the column bound
		// (else g is read in place: a sum of N GEMMs, a printed kernel
		// on the GPU).  With N = 1, g is gT already, unless g is an
		// expression fused into its reader (a GEMM's operands must be
		// loads).
		uint32_t gb = 0;
		int64_t gbytes = v.N * Co * P * esize;
		if ((v.N > 1 || L->buf[i1] == NOBUF) && gbytes <= colmax) {
			Shape ts = {.rank = 3, .dim = {Co, v.N, P}};
			gb = kir_buf_add(p, KB_TMP, 0, dt, &ts, n);
			KKernel *k = kernel_begin(L, gb, n, "conv_weight_grad.gt");
			KxId co = pvar(L, k, Co), nn = pvar(L, k, v.N), pp = pvar(L, k, P);
			k->index = kx_iadd(p, kx_imul(p, kx_iadd(p, kx_imul(p, co, v.N), nn), P), pp);
			finish(L, k, KR_NONE, at(L, i1, kx_iadd(p, kx_imul(p, kx_iadd(p, kx_imul(p, nn, Co), co), P), pp)), 0);
		}
		uint32_t cb = col_buf(L, n, i0, v.N, P, u0 * K2);
		for (int64_t ch = 0, c0 = 0; ch < chunks; ch++, c0 += u0) {
			int64_t nc = c0 + u0 <= v.C ? u0 : v.C - c0, Qc = nc * K2;
			im2col(L, n, i0, &v, 1, cb, 0, v.N, c0, nc);
			KKernel *k = kernel_begin(L, out, n, "conv_weight_grad.gemm");
			KxId co = pvar(L, k, Co), q = pvar(L, k, Qc), nn = rvar(L, k, v.N), pp = rvar(L, k, P);
			KxId ci = kx_iadd(p, kx_imul(p, kx_iadd(p, kx_imul(p, nn, P), pp), Qc), q);
			KxId ga = gb ? kx_load(p, gb, kx_iadd(p, kx_imul(p, kx_iadd(p, kx_imul(p, co, v.N), nn), P), pp))
			             : at(L, i1, kx_iadd(p, kx_imul(p, kx_iadd(p, kx_imul(p, nn, Co), co), P), pp));
			gemm_finish(L, k, kx_iadd(p, kx_imul(p, co, Q), iplus(p, q, c0 * K2)), ga, kx_load(p, cb, ci));
		}
		return 1;
	}
	// conv_input_grad: g, w -> (N, C, H, W).  The product is dcol[n, q, p]
	// = sum_co w[co, q] g[n, co, p] (rows q, columns p: g is read along
	// its rows, w transposed), so that col2im reads dcol along p, which
	// consecutive iw step through (contiguous for stride 1; on the GPU,
	// coalesced).  With fewer than 16 positions (too few columns for the
	// GEMM's tiles) it is dcolT[n, p, q] = sum_co g[n, co, p] w[co, q]
	// instead, rows p and columns q.  Either way each element sums over co
	// in order: the same values.
	// A direct (pointwise) one writes dx itself: dcol is dx.
	int tp = P < 16;
	Shape ds = {.rank = 3, .dim = {u0, tp ? P : Q, tp ? Q : P}};
	uint32_t db = direct ? out : kir_buf_add(p, KB_TMP, 0, dt, &ds, n);
	for (int64_t ch = 0, b = 0; ch < chunks; ch++, b += u0) {
		int64_t nb = b + u0 <= v.N ? u0 : v.N - b;
		KKernel *k = kernel_begin(L, db, n, "conv_input_grad.gemm");
		KxId nn = pvar(L, k, nb), pp, q;
		if (tp)
			pp = pvar(L, k, P), q = pvar(L, k, Q);
		else
			q = pvar(L, k, Q), pp = pvar(L, k, P);
		KxId co = rvar(L, k, Co);
		KxId gi = kx_iadd(p, kx_imul(p, kx_iadd(p, kx_imul(p, iplus(p, nn, b), Co), co), P), pp);
		KxId di = tp ? kx_iadd(p, kx_imul(p, kx_iadd(p, kx_imul(p, nn, P), pp), Q), q)
		             : kx_iadd(p, kx_imul(p, kx_iadd(p, kx_imul(p, nn, Q), q), P), pp);
		gemm_finish(L, k, di, at(L, i0, gi), at(L, i1, kx_iadd(p, kx_imul(p, co, Q), q)));
		if (direct)
			break; // one chunk (b = 0): di is dx's own index
		k = kernel_begin(L, out, n, "col2im");
		nn = pvar(L, k, nb);
		KxId c = pvar(L, k, v.C), ih = pvar(L, k, v.H), iw = pvar(L, k, v.W);
		KxId kh = rvar(L, k, v.kh), kw = rvar(L, k, v.kw), okh, okw;
		KxId oh = inv_window(p, ih, kh, v.ph, v.sh, v.dh, v.OH, &okh);
		KxId ow = inv_window(p, iw, kw, v.pw, v.sw, v.dw, v.OW, &okw);
		KxId qq = flat4(p, kx_iconst(p, 0), c, v.C, kh, v.kh, kw, v.kw);
		KxId po = kx_iadd(p, kx_imul(p, oh, v.OW), ow);
		di = tp ? kx_iadd(p, kx_imul(p, kx_iadd(p, kx_imul(p, nn, P), po), Q), qq)
		        : kx_iadd(p, kx_imul(p, kx_iadd(p, kx_imul(p, nn, Q), qq), P), po);
		k->index = flat4(p, iplus(p, nn, b), c, v.C, ih, v.H, iw, v.W);
		finish(L, k, KR_SUM, sel(p, band(p, okh, okw), kx_load(p, db, di), kx_const(p, 0, dt)), 0);
	}
	return 1;
}

static void
kernel_conv(Lower *L, uint32_t out, NodeId n, const Attrs *a)
{
	const Graph *g = L->g;
	KProgram *p = L->p;
	int op = g->node[n].op;
	if (conv_gemm(L, out, n, a))
		return;
	NodeId i0 = ir_in1(g, n, 0), i1 = ir_in1(g, n, 1);
	const Shape *os = ir_shape(g, n);
	int64_t groups = a->a[aidx(L, n, "groups")].i;
	const int64_t *st = attr_ints(L, n, a, "stride"), *pd = attr_ints(L, n, a, "padding"),
	              *dl = attr_ints(L, n, a, "dilation");
	KKernel *k = kernel_begin(L, out, n, ir_op(op)->name);
	DType dt = ctype(L, n);
	KxId z = kx_const(p, 0, dt), body, ok;
	if (op == OP_conv) { // x, w -> (N, Co, OH, OW)
		const Shape *xs = ir_shape(g, i0), *ws = ir_shape(g, i1);
		Geo v = geo(xs, os, ws->dim + 2, st, pd, dl);
		int64_t Co = ws->dim[0], Cg = v.C / groups, Cog = Co / groups;
		KxId nn = pvar(L, k, v.N), co = pvar(L, k, Co), oh = pvar(L, k, v.OH), ow = pvar(L, k, v.OW);
		KxId ci = rvar(L, k, Cg), kh = rvar(L, k, v.kh), kw = rvar(L, k, v.kw);
		KxId ih = kx_iadd(p, kx_imul(p, oh, v.sh), kx_iadd(p, kx_iconst(p, -v.ph), kx_imul(p, kh, v.dh)));
		KxId iw = kx_iadd(p, kx_imul(p, ow, v.sw), kx_iadd(p, kx_iconst(p, -v.pw), kx_imul(p, kw, v.dw)));
		ok = band(p, in_range(p, ih, 0, v.H), in_range(p, iw, 0, v.W));
		KxId c = kx_iadd(p, kx_imul(p, kx_idiv(p, co, Cog), Cg), ci);
		KxId xi = flat4(p, nn, c, v.C, kx_iclamp(p, ih, 0, v.H - 1), v.H, kx_iclamp(p, iw, 0, v.W - 1), v.W);
		KxId wi = flat4(p, co, ci, Cg, kh, v.kh, kw, v.kw);
		k->index = flat4(p, nn, co, Co, oh, v.OH, ow, v.OW);
		body = sel(p, ok, kx_bin(p, KX_MUL, at(L, i0, xi), at(L, i1, wi)), z);
	} else if (op == OP_conv_input_grad) { // g, w -> x-shaped (N, C, H, W)
		const Shape *gs = ir_shape(g, i0), *ws = ir_shape(g, i1);
		Geo v = geo(os, gs, ws->dim + 2, st, pd, dl);
		int64_t Co = gs->dim[1], Cg = v.C / groups, Cog = Co / groups;
		KxId nn = pvar(L, k, v.N), c = pvar(L, k, v.C), ih = pvar(L, k, v.H), iw = pvar(L, k, v.W);
		KxId j = rvar(L, k, Cog), kh = rvar(L, k, v.kh), kw = rvar(L, k, v.kw);
		KxId okh, okw;
		KxId oh = inv_window(p, ih, kh, v.ph, v.sh, v.dh, v.OH, &okh);
		KxId ow = inv_window(p, iw, kw, v.pw, v.sw, v.dw, v.OW, &okw);
		ok = band(p, okh, okw);
		KxId co = kx_iadd(p, kx_imul(p, kx_idiv(p, c, Cg), Cog), j), ci = kx_imod(p, c, Cg);
		KxId gi = flat4(p, nn, co, Co, oh, v.OH, ow, v.OW);
		KxId wi = flat4(p, co, ci, Cg, kh, v.kh, kw, v.kw);
		k->index = flat4(p, nn, c, v.C, ih, v.H, iw, v.W);
		body = sel(p, ok, kx_bin(p, KX_MUL, at(L, i0, gi), at(L, i1, wi)), z);
	} else { // conv_weight_grad: x, g -> (Co, Cg, kh, kw)
		const Shape *xs = ir_shape(g, i0), *gs = ir_shape(g, i1);
		Geo v = geo(xs, gs, attr_ints(L, n, a, "kernel"), st, pd, dl);
		int64_t Co = gs->dim[1], Cg = v.C / groups, Cog = Co / groups;
		KxId co = pvar(L, k, Co), ci = pvar(L, k, Cg), kh = pvar(L, k, v.kh), kw = pvar(L, k, v.kw);
		KxId nn = rvar(L, k, v.N), oh = rvar(L, k, v.OH), ow = rvar(L, k, v.OW);
		KxId ih = kx_iadd(p, kx_imul(p, oh, v.sh), kx_iadd(p, kx_iconst(p, -v.ph), kx_imul(p, kh, v.dh)));
		KxId iw = kx_iadd(p, kx_imul(p, ow, v.sw), kx_iadd(p, kx_iconst(p, -v.pw), kx_imul(p, kw, v.dw)));
		ok = band(p, in_range(p, ih, 0, v.H), in_range(p, iw, 0, v.W));
		KxId c = kx_iadd(p, kx_imul(p, kx_idiv(p, co, Cog), Cg), ci);
		KxId xi = flat4(p, nn, c, v.C, kx_iclamp(p, ih, 0, v.H - 1), v.H, kx_iclamp(p, iw, 0, v.W - 1), v.W);
		KxId gi = flat4(p, nn, co, Co, oh, v.OH, ow, v.OW);
		k->index = flat4(p, co, ci, Cg, kh, v.kh, kw, v.kw);
		body = sel(p, ok, kx_bin(p, KX_MUL, at(L, i1, gi), at(L, i0, xi)), z);
	}
	finish(L, k, KR_SUM, body, 0);
}

// A count (I64) as a float of the compute dtype dt.
static KxId
ifloat(KProgram *p, KxId a, DType dt)
{
	return kx_cast(p, a, dt == DT_F64 ? DT_F64 : DT_F32);
}

// avg_pool's divisor for window (oh, ow): kh kw, or the in-bounds count
// min(o s - p + k, L) - max(o s - p, 0) per axis.
static KxId
avg_divisor(KProgram *p, const Geo *v, KxId oh, KxId ow, int incl, DType dt)
{
	if (incl)
		return kx_const(p, (double)(v->kh * v->kw), dt);
	KxId c[2];
	for (int ax = 0; ax < 2; ax++) {
		KxId o = ax ? ow : oh;
		int64_t s = ax ? v->sw : v->sh, pd = ax ? v->pw : v->ph, k = ax ? v->kw : v->kh;
		int64_t len = ax ? v->W : v->H;
		KxId b = kx_iadd(p, kx_imul(p, o, s), kx_iconst(p, -pd));
		KxId e = kx_imin(p, kx_iadd(p, b, kx_iconst(p, k)), kx_iconst(p, len));
		c[ax] = kx_iadd(p, e, ineg(p, kx_imax(p, b, kx_iconst(p, 0))));
	}
	return kx_bin(p, KX_MUL, ifloat(p, c[0], dt), ifloat(p, c[1], dt));
}

// Adaptive pooling's window of output o: [floor(o L / O), ceil((o + 1) L / O)).
static void
adaptive_bounds(KProgram *p, KxId o, int64_t len, int64_t outn, KxId *s, KxId *e)
{
	*s = kx_idiv(p, kx_imul(p, o, len), outn);
	*e = kx_idiv(p, kx_iadd(p, kx_imul(p, o, len), kx_iconst(p, len + outn - 1)), outn);
}

static int64_t
adaptive_max(int64_t len, int64_t outn)
{
	int64_t m = 1;
	for (int64_t o = 0; o < outn; o++) {
		int64_t w = ((o + 1) * len + outn - 1) / outn - o * len / outn;
		if (w > m)
			m = w;
	}
	return m;
}

static KxId
adaptive_count(KProgram *p, KxId h0, KxId h1, KxId w0, KxId w1, DType dt)
{
	return kx_bin(p, KX_MUL, ifloat(p, kx_iadd(p, h1, ineg(p, h0)), dt),
	              ifloat(p, kx_iadd(p, w1, ineg(p, w0)), dt));
}

// ir_bilinear_src (ir/interp.c) in F64: the source coordinate of output dst,
// its neighbours i0, i1 and the weight l of i1.
static void
bilinear_src(KProgram *p, KxId dst, int64_t in, int64_t outn, int align, KxId *i0, KxId *i1, KxId *l)
{
	KxId d = to_f64(p, dst), src;
	if (align)
		src = outn > 1 ? kx_bin(p, KX_DIV, kx_bin(p, KX_MUL, d, kx_const(p, (double)(in - 1), DT_F64)),
		                        kx_const(p, (double)(outn - 1), DT_F64))
		               : kx_const(p, 0, DT_F64);
	else {
		src = kx_bin(p, KX_SUB,
		             kx_bin(p, KX_MUL, kx_bin(p, KX_ADD, d, kx_const(p, 0.5, DT_F64)),
		                    kx_const(p, (double)in / (double)outn, DT_F64)),
		             kx_const(p, 0.5, DT_F64));
		KxId z = kx_const(p, 0, DT_F64);
		src = kx_select(p, kx_cmp(p, KC_LT, src, z), z, src);
	}
	*i0 = kx_imin(p, kx_cast(p, src, DT_I64), kx_iconst(p, in - 1));
	*i1 = kx_imin(p, kx_iadd(p, *i0, kx_iconst(p, 1)), kx_iconst(p, in - 1));
	*l = kx_bin(p, KX_SUB, src, to_f64(p, *i0));
}

// The first neighbour that output dst reads, the interpreter's own.
static int64_t
bilinear_i0(int64_t dst, int64_t in, int64_t outn, int align)
{
	int64_t i0, i1;
	double l;
	ir_bilinear_src(dst, in, outn, align, &i0, &i1, &l);
	return i0;
}

// The inverse window of bilinear upsampling along one axis (in -> outn):
// output o reads inputs i0(o) and i1(o) = min(i0(o) + 1, in - 1), and
// i0 is non-decreasing in o, so the outputs reading input i are those with
// i0(o) in {i - 1, i}: one run of consecutive o.  Its start is bounded
// below by an integer formula, s(i) = clamp(min(floor(max(a i + b, 0) / d)
// - 1, (i - 1) outn), 0, outn - 1), the real threshold less one:
//   align_corners=0: i0(o) >= i - 1 iff (o + 1/2) in / outn - 1/2 >= i - 1
//                    iff o >= ((2i - 1) outn - in) / (2 in): a = 2 outn,
//                    b = -outn - in, d = 2 in; except that the source is
//                    clamped at 0, so every o has i0(o) >= 0 and the runs
//                    of i = 0 and 1 start at 0 (the (i - 1) outn term);
//   align_corners=1: iff o (in - 1) / (outn - 1) >= i - 1: a = outn - 1,
//                    b = -(outn - 1), d = in - 1 (in > 1);
// and the run's length by *kc, the largest end(i) + 2 - s(i) over every i
// (one candidate of slack at each end, against a last-bit difference
// between this host computation and the kernel's), found by computing
// every i0(o) here as the interpreter does.  A kernel then tests kc
// candidates s(i) .. s(i) + kc - 1 instead of all outn.  Where the formula
// does not bound a run (in = 1, or a check below fails), s = 0 and
// kc = outn: every output is a candidate, as before.
static void
bilinear_up(int64_t in, int64_t outn, int align, int64_t *a, int64_t *b, int64_t *d, int64_t *kc)
{
	*a = 0, *b = 0, *d = 1, *kc = outn;
	if (in < 2 || outn < 1)
		return;
	if (align)
		*a = outn - 1, *b = -(outn - 1), *d = in - 1;
	else
		*a = 2 * outn, *b = -outn - in, *d = 2 * in;
	int64_t o = 0, k = 1;
	for (int64_t i = 0; i < in; i++) {
		int64_t num = *a * i + *b, s = (num > 0 ? num : 0) / *d - 1;
		s = s < (i - 1) * outn ? s : (i - 1) * outn;
		s = s < 0 ? 0 : s > outn - 1 ? outn - 1 : s;
		// The run of i: from the first o with i0(o) >= i - 1 (o only
		// grows with i) to the last with i0(o) <= i.
		while (o < outn && bilinear_i0(o, in, outn, align) < i - 1)
			o++;
		int64_t lo = o, hi = lo;
		while (hi < outn && bilinear_i0(hi, in, outn, align) <= i)
			hi++;
		// [lo, hi) is the run; s must lie at least one before lo (or at 0).
		if (lo < outn && !(s <= lo - 1 || s == 0)) {
			*a = 0, *b = 0, *d = 1, *kc = outn;
			return;
		}
		int64_t need = hi + 1 - s; // candidates s .. hi (one past the run's end)
		k = need > k ? need : k;
	}
	*kc = k < outn ? k : outn;
}

// Candidate t of the inverse window of input i: o = s(i) + t clamped
// into [0, outn), *ok that it is in range (not past the end).
static KxId
bilinear_cand(KProgram *p, KxId i, KxId t, int64_t outn, int64_t a, int64_t b, int64_t d, int64_t kc,
              KxId *ok)
{
	if (kc == outn && a == 0) {
		*ok = 0;
		return t;
	}
	KxId num = kx_imax(p, kx_iadd(p, kx_imul(p, i, a), kx_iconst(p, b)), kx_iconst(p, 0));
	KxId s = kx_iadd(p, kx_idiv(p, num, d), kx_iconst(p, -1));
	s = kx_iclamp(p, kx_imin(p, s, kx_imul(p, kx_iadd(p, i, kx_iconst(p, -1)), outn)), 0, outn - 1);
	KxId o = kx_iadd(p, s, t);
	*ok = in_range(p, o, 0, outn);
	return kx_iclamp(p, o, 0, outn - 1);
}

// The loops of one window over output (pl, oh, ow): fills *xi (the load
// index, clamped), *ok (in bounds, 0 for always) and *pos (ih W + iw).
static void
pool_window(Lower *L, KKernel *k, const Geo *v, KxId pl, KxId oh, KxId ow, int dil, KxId *xi,
            KxId *ok, KxId *pos)
{
	KProgram *p = L->p;
	KxId kh = rvar(L, k, v->kh), kw = rvar(L, k, v->kw);
	KxId ih = kx_iadd(p, kx_imul(p, oh, v->sh), kx_iadd(p, kx_iconst(p, -v->ph), kx_imul(p, kh, dil ? v->dh : 1)));
	KxId iw = kx_iadd(p, kx_imul(p, ow, v->sw), kx_iadd(p, kx_iconst(p, -v->pw), kx_imul(p, kw, dil ? v->dw : 1)));
	*ok = band(p, in_range(p, ih, 0, v->H), in_range(p, iw, 0, v->W));
	KxId ihc = kx_iclamp(p, ih, 0, v->H - 1), iwc = kx_iclamp(p, iw, 0, v->W - 1);
	*pos = kx_iadd(p, kx_imul(p, ihc, v->W), iwc);
	*xi = kx_iadd(p, kx_imul(p, pl, v->H * v->W), *pos);
}

// max_pool's per-window maximum (mbuf) and argmax (abuf: ih W + iw, or
// H W for a window of padding only).
static void
max_pool_arg(Lower *L, NodeId n, NodeId x, const Geo *v, uint32_t *mbuf, uint32_t *abuf)
{
	KProgram *p = L->p;
	Shape ps = {.rank = 3};
	ps.dim[0] = v->N * v->C;
	ps.dim[1] = v->OH;
	ps.dim[2] = v->OW;
	DType dt = kir_compute_dtype(p, ndtype(L, x));
	*mbuf = kir_buf_add(p, KB_TMP, 0, dt, &ps, n);
	*abuf = kir_buf_add(p, KB_TMP, 0, DT_I64, &ps, n);
	for (int pass = 0; pass < 2; pass++) {
		KKernel *k = kernel_begin(L, pass ? *abuf : *mbuf, n, pass ? "max_pool.argmax" : "max_pool.max");
		KxId pl = pvar(L, k, ps.dim[0]), oh = pvar(L, k, v->OH), ow = pvar(L, k, v->OW), xi, ok, pos;
		k->index = flat4(p, kx_iconst(p, 0), pl, 1, oh, v->OH, ow, v->OW);
		pool_window(L, k, v, pl, oh, ow, 1, &xi, &ok, &pos);
		KxId xv = at(L, x, xi);
		if (!pass) {
			finish(L, k, KR_MAX, sel(p, ok, xv, kx_const(p, -HUGE_VAL, dt)), 0);
			continue;
		}
		KxId m = kx_load(p, *mbuf, k->index);
		KxId hit = kx_bin(p, KX_OR, kx_cmp(p, KC_EQ, xv, m),
		                  kx_bin(p, KX_AND, kx_cmp(p, KC_UNO, m, m), kx_cmp(p, KC_UNO, xv, xv)));
		hit = band(p, ok, hit);
		finish(L, k, KR_MIN, kx_select(p, hit, pos, kx_iconst(p, v->H * v->W)), 0);
	}
}

static void
kernel_pool(Lower *L, uint32_t out, NodeId n, const Attrs *a)
{
	const Graph *g = L->g;
	KProgram *p = L->p;
	int op = g->node[n].op;
	NodeId i0 = ir_in1(g, n, 0);
	const Shape *os = ir_shape(g, n), *s0 = ir_shape(g, i0);
	const int64_t *kk = attr_ints(L, n, a, "kernel"), *st = attr_ints(L, n, a, "stride"),
	              *pd = attr_ints(L, n, a, "padding"), *dl = attr_ints(L, n, a, "dilation");
	DType dt = ctype(L, n);
	KxId z = kx_const(p, 0, dt);
	int grad = op == OP_max_pool_grad || op == OP_avg_pool_grad || op == OP_adaptive_avg_pool_grad ||
	           op == OP_upsample_bilinear_grad;
	// v: input (x-shaped) geometry against the forward op's output.
	const Shape *xs = grad ? (op == OP_max_pool_grad ? s0 : os) : s0;
	const Shape *ys = grad ? ir_shape(g, op == OP_max_pool_grad ? ir_in1(g, n, 1) : i0) : os;
	if (op == OP_max_pool_gather)
		ys = os;
	Geo v = geo(xs, ys, kk, st, pd, op == OP_avg_pool || op == OP_avg_pool_grad ? NULL : dl);
	int64_t P = v.N * v.C, HW = v.H * v.W;
	if (op == OP_max_pool || op == OP_max_pool_gather || op == OP_max_pool_grad) {
		uint32_t mbuf, abuf;
		max_pool_arg(L, n, i0, &v, &mbuf, &abuf);
		if (op == OP_max_pool) { // the maximum itself
			KKernel *k = kernel_begin(L, out, n, "copy");
			k->index = domain(L, k, os);
			finish(L, k, KR_NONE, kx_load(p, mbuf, k->index), 0);
			return;
		}
		NodeId h = ir_in1(g, n, 1);
		if (op == OP_max_pool_gather) {
			KKernel *k = kernel_begin(L, out, n, "max_pool_gather");
			KxId pl = pvar(L, k, P), oh = pvar(L, k, v.OH), ow = pvar(L, k, v.OW);
			k->index = flat4(p, kx_iconst(p, 0), pl, 1, oh, v.OH, ow, v.OW);
			KxId am = kx_load(p, abuf, k->index);
			KxId hv = at(L, h, kx_iadd(p, kx_imul(p, pl, HW), kx_iclamp(p, am, 0, HW - 1)));
			finish(L, k, KR_NONE, kx_select(p, kx_cmp(p, KC_LT, am, kx_iconst(p, HW)), hv, z), 0);
			return;
		}
		KKernel *k = kernel_begin(L, out, n, "max_pool_grad");
		KxId pl = pvar(L, k, P), ih = pvar(L, k, v.H), iw = pvar(L, k, v.W);
		k->index = flat4(p, kx_iconst(p, 0), pl, 1, ih, v.H, iw, v.W);
		KxId kh = rvar(L, k, v.kh), kw = rvar(L, k, v.kw), okh, okw;
		KxId oh = inv_window(p, ih, kh, v.ph, v.sh, v.dh, v.OH, &okh);
		KxId ow = inv_window(p, iw, kw, v.pw, v.sw, v.dw, v.OW, &okw);
		KxId oi = flat4(p, kx_iconst(p, 0), pl, 1, oh, v.OH, ow, v.OW);
		KxId me = kx_iadd(p, kx_imul(p, ih, v.W), iw);
		KxId hit = band(p, band(p, okh, okw), kx_cmp(p, KC_EQ, kx_load(p, abuf, oi), me));
		finish(L, k, KR_SUM, kx_select(p, hit, at(L, h, oi), z), 0);
		return;
	}
	int incl = op == OP_avg_pool || op == OP_avg_pool_grad ? a->a[aidx(L, n, "count_include_pad")].i != 0 : 0;
	if (op == OP_avg_pool) {
		KKernel *k = kernel_begin(L, out, n, "avg_pool");
		KxId pl = pvar(L, k, P), oh = pvar(L, k, v.OH), ow = pvar(L, k, v.OW), xi, ok, pos;
		k->index = flat4(p, kx_iconst(p, 0), pl, 1, oh, v.OH, ow, v.OW);
		pool_window(L, k, &v, pl, oh, ow, 0, &xi, &ok, &pos);
		KxId body = sel(p, ok, at(L, i0, xi), z);
		KxId div = avg_divisor(p, &v, oh, ow, incl, dt);
		finish(L, k, KR_SUM, body, kx_bin(p, KX_DIV, kx_acc(p, dt), div));
		return;
	}
	if (op == OP_avg_pool_grad) {
		KKernel *k = kernel_begin(L, out, n, "avg_pool_grad");
		KxId pl = pvar(L, k, P), ih = pvar(L, k, v.H), iw = pvar(L, k, v.W);
		k->index = flat4(p, kx_iconst(p, 0), pl, 1, ih, v.H, iw, v.W);
		KxId kh = rvar(L, k, v.kh), kw = rvar(L, k, v.kw), okh, okw;
		KxId oh = inv_window(p, ih, kh, v.ph, v.sh, 1, v.OH, &okh);
		KxId ow = inv_window(p, iw, kw, v.pw, v.sw, 1, v.OW, &okw);
		KxId oi = flat4(p, kx_iconst(p, 0), pl, 1, oh, v.OH, ow, v.OW);
		KxId t = kx_bin(p, KX_DIV, at(L, i0, oi), avg_divisor(p, &v, oh, ow, incl, dt));
		finish(L, k, KR_SUM, sel(p, band(p, okh, okw), t, z), 0);
		return;
	}
	if (op == OP_adaptive_avg_pool || op == OP_adaptive_avg_pool_grad) {
		int fwd = op == OP_adaptive_avg_pool;
		KKernel *k = kernel_begin(L, out, n, ir_op(op)->name);
		KxId pl = pvar(L, k, P), e0 = pvar(L, k, fwd ? v.OH : v.H), e1 = pvar(L, k, fwd ? v.OW : v.W);
		if (fwd) {
			KxId oh = e0, ow = e1, h0, h1, w0, w1;
			k->index = flat4(p, kx_iconst(p, 0), pl, 1, oh, v.OH, ow, v.OW);
			adaptive_bounds(p, oh, v.H, v.OH, &h0, &h1);
			adaptive_bounds(p, ow, v.W, v.OW, &w0, &w1);
			KxId ih = kx_iadd(p, h0, rvar(L, k, adaptive_max(v.H, v.OH)));
			KxId iw = kx_iadd(p, w0, rvar(L, k, adaptive_max(v.W, v.OW)));
			KxId ok = band(p, kx_cmp(p, KC_LT, ih, h1), kx_cmp(p, KC_LT, iw, w1));
			KxId xi = flat4(p, kx_iconst(p, 0), pl, 1, kx_iclamp(p, ih, 0, v.H - 1), v.H,
			                kx_iclamp(p, iw, 0, v.W - 1), v.W);
			KxId body = sel(p, ok, at(L, i0, xi), z);
			finish(L, k, KR_SUM, body, kx_bin(p, KX_DIV, kx_acc(p, dt), adaptive_count(p, h0, h1, w0, w1, dt)));
		} else {
			KxId ih = e0, iw = e1, h0, h1, w0, w1;
			k->index = flat4(p, kx_iconst(p, 0), pl, 1, ih, v.H, iw, v.W);
			KxId oh = rvar(L, k, v.OH), ow = rvar(L, k, v.OW);
			adaptive_bounds(p, oh, v.H, v.OH, &h0, &h1);
			adaptive_bounds(p, ow, v.W, v.OW, &w0, &w1);
			KxId ok = band(p, band(p, kx_cmp(p, KC_LE, h0, ih), kx_cmp(p, KC_LT, ih, h1)),
			               band(p, kx_cmp(p, KC_LE, w0, iw), kx_cmp(p, KC_LT, iw, w1)));
			KxId gi = flat4(p, kx_iconst(p, 0), pl, 1, oh, v.OH, ow, v.OW);
			KxId t = kx_bin(p, KX_DIV, at(L, i0, gi), adaptive_count(p, h0, h1, w0, w1, dt));
			finish(L, k, KR_SUM, kx_select(p, ok, t, z), 0);
		}
		return;
	}
	// upsample_bilinear and its adjoint, in f64 as the interpreter.
	int align = a->a[aidx(L, n, "align_corners")].i != 0;
	KxId one = kx_const(p, 1, DT_F64), z64 = kx_const(p, 0, DT_F64);
	if (op == OP_upsample_bilinear) {
		KKernel *k = kernel_begin(L, out, n, "upsample_bilinear");
		KxId pl = pvar(L, k, P), oh = pvar(L, k, v.OH), ow = pvar(L, k, v.OW), h0, h1, w0, w1, lh, lw;
		k->index = flat4(p, kx_iconst(p, 0), pl, 1, oh, v.OH, ow, v.OW);
		bilinear_src(p, oh, v.H, v.OH, align, &h0, &h1, &lh);
		bilinear_src(p, ow, v.W, v.OW, align, &w0, &w1, &lw);
		KxId base = kx_imul(p, pl, HW);
#define PIX(r, c) to_f64(p, at(L, i0, kx_iadd(p, base, kx_iadd(p, kx_imul(p, r, v.W), c))))
		KxId top = kx_bin(p, KX_ADD, kx_bin(p, KX_MUL, kx_bin(p, KX_SUB, one, lw), PIX(h0, w0)),
		                  kx_bin(p, KX_MUL, lw, PIX(h0, w1)));
		KxId bot = kx_bin(p, KX_ADD, kx_bin(p, KX_MUL, kx_bin(p, KX_SUB, one, lw), PIX(h1, w0)),
		                  kx_bin(p, KX_MUL, lw, PIX(h1, w1)));
#undef PIX
		KxId o = kx_bin(p, KX_ADD, kx_bin(p, KX_MUL, kx_bin(p, KX_SUB, one, lh), top),
		                kx_bin(p, KX_MUL, lh, bot));
		finish(L, k, KR_NONE, o, 0);
		return;
	}
	// The adjoint gathers, for input (ih, iw), the outputs whose
	// neighbours include it: only the candidates oh = s_H(ih) + th,
	// th < KH (and the same along w), the inverse window of bilinear_up
	// (below); the hit tests are the forward's own source indices.
	int64_t sa[2], sb[2], sd[2], kc[2];
	bilinear_up(v.H, v.OH, align, &sa[0], &sb[0], &sd[0], &kc[0]);
	bilinear_up(v.W, v.OW, align, &sa[1], &sb[1], &sd[1], &kc[1]);
	KKernel *k = kernel_begin(L, out, n, "upsample_bilinear_grad");
	KxId pl = pvar(L, k, P), ih = pvar(L, k, v.H), iw = pvar(L, k, v.W), h0, h1, w0, w1, lh, lw;
	k->index = flat4(p, kx_iconst(p, 0), pl, 1, ih, v.H, iw, v.W);
	KxId th = rvar(L, k, kc[0]), tw = rvar(L, k, kc[1]), okh, okw;
	KxId oh = bilinear_cand(p, ih, th, v.OH, sa[0], sb[0], sd[0], kc[0], &okh);
	KxId ow = bilinear_cand(p, iw, tw, v.OW, sa[1], sb[1], sd[1], kc[1], &okw);
	bilinear_src(p, oh, v.H, v.OH, align, &h0, &h1, &lh);
	bilinear_src(p, ow, v.W, v.OW, align, &w0, &w1, &lw);
	KxId gv = to_f64(p, at(L, i0, flat4(p, kx_iconst(p, 0), pl, 1, oh, v.OH, ow, v.OW)));
	KxId ulh = kx_bin(p, KX_SUB, one, lh), ulw = kx_bin(p, KX_SUB, one, lw);
	KxId hr[2] = {h0, h1}, wc[2] = {w0, w1}, wh[2] = {ulh, lh}, ww[2] = {ulw, lw}, body = 0;
	for (int r = 0; r < 2; r++)
		for (int c = 0; c < 2; c++) {
			KxId hit = kx_bin(p, KX_AND, kx_cmp(p, KC_EQ, hr[r], ih), kx_cmp(p, KC_EQ, wc[c], iw));
			KxId t = kx_select(p, hit, kx_bin(p, KX_MUL, kx_bin(p, KX_MUL, wh[r], ww[c]), gv), z64);
			body = body ? kx_bin(p, KX_ADD, body, t) : t;
		}
	finish(L, k, KR_SUM, sel(p, band(p, okh, okw), body, z64), 0);
}

// argmax(x, axis): the window maximum m, then the first k with x = m (the
// first NaN when m is NaN): torch.argmax's first maximum.
static void
kernel_argmax(Lower *L, uint32_t out, NodeId n, const Attrs *a)
{
	const Graph *g = L->g;
	KProgram *p = L->p;
	NodeId x = ir_in1(g, n, 0);
	const Shape *xs = ir_shape(g, x);
	int ax = (int)a->a[aidx(L, n, "axis")].i;
	int64_t outer = 1, inner = 1, dim = xs->dim[ax];
	for (int d = 0; d < ax; d++)
		outer *= xs->dim[d];
	for (int d = ax + 1; d < xs->rank; d++)
		inner *= xs->dim[d];
	Shape ms = {.rank = 2};
	ms.dim[0] = outer;
	ms.dim[1] = inner;
	DType dt = kir_compute_dtype(p, ndtype(L, x));
	uint32_t mbuf = kir_buf_add(p, KB_TMP, 0, dt, &ms, n);
	for (int pass = 0; pass < 2; pass++) {
		KKernel *k = kernel_begin(L, pass ? out : mbuf, n, pass ? "argmax" : "argmax.max");
		KxId o = pvar(L, k, outer), i = pvar(L, k, inner), j = rvar(L, k, dim);
		k->index = kx_iadd(p, kx_imul(p, o, inner), i);
		KxId xv = at(L, x, kx_iadd(p, kx_imul(p, kx_iadd(p, kx_imul(p, o, dim), j), inner), i));
		if (!pass) {
			finish(L, k, KR_MAX, xv, 0);
			continue;
		}
		KxId m = kx_load(p, mbuf, k->index);
		KxId hit = kx_bin(p, KX_OR, kx_cmp(p, KC_EQ, xv, m),
		                  kx_bin(p, KX_AND, kx_cmp(p, KC_UNO, m, m), kx_cmp(p, KC_UNO, xv, xv)));
		finish(L, k, KR_MIN, kx_select(p, hit, j, kx_iconst(p, dim)), 0);
	}
}

static void
kernel_window(Lower *L, uint32_t out, NodeId n)
{
	Attrs a;
	ir_attrs_get(L->g, n, &a);
	int op = L->g->node[n].op;
	if (op == OP_conv || op == OP_conv_input_grad || op == OP_conv_weight_grad)
		kernel_conv(L, out, n, &a);
	else if (op == OP_argmax)
		kernel_argmax(L, out, n, &a);
	else
		kernel_pool(L, out, n, &a);
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
	KKernel *k = kernel_begin(L, cb, n, "assignment.cost");
	k->index = domain(L, k, cs);
	k->body = kx_cast(p, at(L, x, k->index), DT_F64);
	k->nfused = L->nexpand;
	int64_t words = ((int64_t)ir_assignment_work(cs->dim[0], cs->dim[1]) + 7) / 8;
	Shape ws = {.rank = 1, .dim = {words}};
	uint32_t wb = kir_buf_add(p, KB_TMP, 0, DT_I64, &ws, n);
	k = kernel_begin(L, out, n, "linear_sum_assignment");
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
			kernel_window(&L, b, n);
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
