// ir/shape.c -- shape and dtype rules, one per `shape` column of ops.def.
//
// A rule sees the operands (their shapes and dtypes through the graph) and
// the attributes, and either fills in the result's shape and dtype or
// writes a message that names the op and says what is wrong in the user's
// terms ("matmul: inner dimensions differ (64 vs 32)").  The frontend adds
// the location and notes.  Rules never allocate and never abort on user
// input: ir_build() is also the check of every graph a pass builds.
#include <stdarg.h>
#include <string.h>

#include "ir.h"

#define SH(n) ir_shape(g, in[n])
#define DT(n) ((DType)g->node[in[n]].dtype)
#define NAME (ir_op(op)->name)

// The module's one error helper (ir_errf), under the name the rules use.
#define fail ir_errf

void
ir_shape_str(const Shape *s, char *buf, size_t n)
{
	size_t k = (size_t)snprintf(buf, n, "[");
	for (int i = 0; i < s->rank && k < n; i++)
		k += (size_t)snprintf(buf + k, n - k, "%s%lld", i ? ", " : "", (long long)s->dim[i]);
	if (k < n)
		snprintf(buf + k, n - k, "]");
}

void
ir_type_str(DType t, const Shape *s, char *buf, size_t n)
{
	char sb[160];
	ir_shape_str(s, sb, sizeof sb);
	snprintf(buf, n, "%s%s", ir_dtype_name(t), sb);
}

int
ir_broadcast_shapes(const Shape *a, const Shape *b, Shape *out)
{
	int r = a->rank > b->rank ? a->rank : b->rank;
	out->rank = r;
	for (int i = 0; i < r; i++) {
		int ia = a->rank - r + i, ib = b->rank - r + i;
		int64_t da = ia >= 0 ? a->dim[ia] : 1, db = ib >= 0 ? b->dim[ib] : 1;
		if (da != db && da != 1 && db != 1)
			return 0;
		out->dim[i] = da == 1 ? db : da;
	}
	return 1;
}

static int
check_tuple(const Graph *g, int op, const NodeId *in, int nin, char *err, size_t errlen)
{
	for (int i = 0; i < nin; i++)
		if (DT(i) == DT_TUPLE)
			return fail(err, errlen, "%s: operand %d is a tuple (use get to take one of its values)",
			            NAME, i + 1);
	return 1;
}

SHAPE_RULE(elemwise)
{
	(void)a;
	if (!check_tuple(g, op, in, nin, err, errlen))
		return 0;
	char s0[160], s1[160];
	for (int i = 1; i < nin; i++) {
		if (!ir_shape_eq(SH(0), SH(i))) {
			ir_shape_str(SH(0), s0, sizeof s0);
			ir_shape_str(SH(i), s1, sizeof s1);
			return fail(err, errlen, "%s: operand shapes differ (%s vs %s)", NAME, s0, s1);
		}
		if (DT(0) != DT(i))
			return fail(err, errlen, "%s: operand dtypes differ (%s vs %s)", NAME,
			            ir_dtype_name(DT(0)), ir_dtype_name(DT(i)));
	}
	int intok = (ir_op(op)->flags & F_INTOK) != 0;
	if (!ir_dtype_is_float(DT(0)) && !(intok && DT(0) == DT_I64))
		return fail(err, errlen, "%s: needs %s operands, got %s", NAME,
		            intok ? "f32, f64 or i64" : "f32 or f64", ir_dtype_name(DT(0)));
	*out = *SH(0);
	*dt = DT(0);
	return 1;
}

SHAPE_RULE(compare)
{
	(void)a;
	if (!check_tuple(g, op, in, nin, err, errlen))
		return 0;
	char s0[160], s1[160];
	if (!ir_shape_eq(SH(0), SH(1))) {
		ir_shape_str(SH(0), s0, sizeof s0);
		ir_shape_str(SH(1), s1, sizeof s1);
		return fail(err, errlen, "%s: operand shapes differ (%s vs %s)", NAME, s0, s1);
	}
	if (DT(0) != DT(1))
		return fail(err, errlen, "%s: operand dtypes differ (%s vs %s)", NAME,
		            ir_dtype_name(DT(0)), ir_dtype_name(DT(1)));
	int logical = op == OP_and || op == OP_or;
	if (logical && DT(0) != DT_BOOL)
		return fail(err, errlen, "%s: needs bool operands, got %s", NAME, ir_dtype_name(DT(0)));
	*out = *SH(0);
	*dt = DT_BOOL;
	return 1;
}

SHAPE_RULE(logical)
{
	(void)a;
	(void)nin;
	if (DT(0) != DT_BOOL)
		return fail(err, errlen, "%s: needs a bool operand, got %s", NAME, ir_dtype_name(DT(0)));
	*out = *SH(0);
	*dt = DT_BOOL;
	return 1;
}

SHAPE_RULE(input)
{
	(void)g, (void)in, (void)nin, (void)a, (void)out, (void)dt;
	return fail(err, errlen, "%s: inputs are declared, not computed", NAME);
}

static int
check_shape_attr(int op, const AttrVal *s, char *err, size_t errlen)
{
	for (int i = 0; i < s->n; i++)
		if (s->v[i] < 0)
			return fail(err, errlen, "%s: negative dimension %lld in shape", NAME,
			            (long long)s->v[i]);
	return 1;
}

SHAPE_RULE(factory)
{
	(void)g, (void)in, (void)nin;
	int ks = ir_attr_index(op, "shape"), kd = ir_attr_index(op, "dtype");
	const AttrVal *s = &a->a[ks];
	if (!check_shape_attr(op, s, err, errlen))
		return 0;
	out->rank = s->n;
	memcpy(out->dim, s->v, sizeof(int64_t) * (size_t)s->n);
	*dt = (DType)a->a[kd].i;
	if (op == OP_iota) {
		int64_t ax = a->a[ir_attr_index(op, "axis")].i;
		if (s->n == 0 || ax < 0 || ax >= s->n)
			return fail(err, errlen, "iota: axis %lld out of range for rank %d", (long long)ax,
			            s->n);
	}
	if ((op == OP_kaiming_normal || op == OP_kaiming_uniform)) {
		if (s->n < 2)
			return fail(err, errlen, "%s: needs a shape of rank >= 2 (fan in and fan out), got rank %d",
			            NAME, s->n);
		if (!ir_dtype_is_float(*dt))
			return fail(err, errlen, "%s: dtype must be f32 or f64", NAME);
	}
	return 1;
}

SHAPE_RULE(sample)
{
	(void)a;
	if (!check_tuple(g, op, in, nin, err, errlen))
		return 0;
	for (int i = 0; i < nin; i++) {
		if (!ir_dtype_is_float(DT(i)))
			return fail(err, errlen, "%s: parameters must be f32 or f64, got %s", NAME,
			            ir_dtype_name(DT(i)));
		if (!ir_shape_eq(SH(0), SH(i)) || DT(i) != DT(0))
			return fail(err, errlen, "%s: parameters must have equal types", NAME);
	}
	*out = *SH(0);
	*dt = DT(0);
	return 1;
}

SHAPE_RULE(cast)
{
	if (!check_tuple(g, op, in, nin, err, errlen))
		return 0;
	*out = *SH(0);
	*dt = (DType)a->a[0].i;
	return 1;
}

SHAPE_RULE(same)
{
	(void)a;
	if (!check_tuple(g, op, in, nin, err, errlen))
		return 0;
	*out = *SH(0);
	*dt = DT(0);
	return 1;
}

SHAPE_RULE(where)
{
	(void)a;
	if (!check_tuple(g, op, in, nin, err, errlen))
		return 0;
	if (DT(0) != DT_BOOL)
		return fail(err, errlen, "where: the condition must be bool, got %s", ir_dtype_name(DT(0)));
	char s0[160], s1[160];
	for (int i = 1; i < 3; i++)
		if (!ir_shape_eq(SH(0), SH(i))) {
			ir_shape_str(SH(0), s0, sizeof s0);
			ir_shape_str(SH(i), s1, sizeof s1);
			return fail(err, errlen, "where: operand shapes differ (%s vs %s)", s0, s1);
		}
	if (DT(1) != DT(2))
		return fail(err, errlen, "where: value dtypes differ (%s vs %s)", ir_dtype_name(DT(1)),
		            ir_dtype_name(DT(2)));
	*out = *SH(1);
	*dt = DT(1);
	return 1;
}

// Checks an axis list: in range, no repeats.
static int
check_axes(int op, const AttrVal *ax, int rank, char *err, size_t errlen)
{
	for (int i = 0; i < ax->n; i++) {
		if (ax->v[i] < 0 || ax->v[i] >= rank)
			return fail(err, errlen, "%s: axis %lld out of range for rank %d", NAME,
			            (long long)ax->v[i], rank);
		for (int j = 0; j < i; j++)
			if (ax->v[j] == ax->v[i])
				return fail(err, errlen, "%s: axis %lld repeated", NAME, (long long)ax->v[i]);
	}
	return 1;
}

SHAPE_RULE(reduce)
{
	if (!check_tuple(g, op, in, nin, err, errlen))
		return 0;
	const Shape *x = SH(0);
	const AttrVal *ax = &a->a[0];
	int keep = a->a[1].i != 0;
	if (!check_axes(op, ax, x->rank, err, errlen))
		return 0;
	int floatonly = op == OP_mean || op == OP_logsumexp;
	if (!ir_dtype_is_float(DT(0)) && (floatonly || DT(0) != DT_I64))
		return fail(err, errlen, "%s: needs %s operand, got %s", NAME,
		            floatonly ? "an f32 or f64" : "an f32, f64 or i64", ir_dtype_name(DT(0)));
	out->rank = 0;
	for (int i = 0; i < x->rank; i++) {
		int r = 0;
		for (int j = 0; j < ax->n; j++)
			r |= ax->v[j] == i;
		if (r && (op == OP_max || op == OP_min) && x->dim[i] == 0)
			return fail(err, errlen, "%s: reduction over an empty axis %d has no identity", NAME, i);
		if (!r)
			out->dim[out->rank++] = x->dim[i];
		else if (keep)
			out->dim[out->rank++] = 1;
	}
	*dt = DT(0);
	return 1;
}

SHAPE_RULE(argreduce)
{
	if (!check_tuple(g, op, in, nin, err, errlen))
		return 0;
	const Shape *x = SH(0);
	int64_t ax = a->a[0].i;
	if (ax < 0 || ax >= x->rank)
		return fail(err, errlen, "%s: axis %lld out of range for rank %d", NAME, (long long)ax,
		            x->rank);
	if (x->dim[ax] == 0)
		return fail(err, errlen, "%s: axis %lld is empty", NAME, (long long)ax);
	out->rank = 0;
	for (int i = 0; i < x->rank; i++)
		if (i != ax)
			out->dim[out->rank++] = x->dim[i];
		else if (a->a[1].i)
			out->dim[out->rank++] = 1;
	*dt = DT_I64;
	return 1;
}

SHAPE_RULE(reshape)
{
	if (!check_tuple(g, op, in, nin, err, errlen))
		return 0;
	const AttrVal *s = &a->a[0];
	if (!check_shape_attr(op, s, err, errlen))
		return 0;
	out->rank = s->n;
	memcpy(out->dim, s->v, sizeof(int64_t) * (size_t)s->n);
	if (ir_numel(out) != ir_numel(SH(0))) {
		char s0[160], s1[160];
		ir_shape_str(SH(0), s0, sizeof s0);
		ir_shape_str(out, s1, sizeof s1);
		return fail(err, errlen, "reshape: %s has %lld elements, %s has %lld", s0,
		            (long long)ir_numel(SH(0)), s1, (long long)ir_numel(out));
	}
	*dt = DT(0);
	return 1;
}

SHAPE_RULE(permute)
{
	if (!check_tuple(g, op, in, nin, err, errlen))
		return 0;
	const Shape *x = SH(0);
	const AttrVal *p = &a->a[0];
	if (p->n != x->rank)
		return fail(err, errlen, "permute: perm has %d axes, operand has rank %d", p->n, x->rank);
	if (!check_axes(op, p, x->rank, err, errlen))
		return 0;
	out->rank = x->rank;
	for (int i = 0; i < x->rank; i++)
		out->dim[i] = x->dim[p->v[i]];
	*dt = DT(0);
	return 1;
}

SHAPE_RULE(broadcast)
{
	if (!check_tuple(g, op, in, nin, err, errlen))
		return 0;
	const Shape *x = SH(0);
	const AttrVal *s = &a->a[0];
	if (!check_shape_attr(op, s, err, errlen))
		return 0;
	char s0[160], s1[160];
	out->rank = s->n;
	memcpy(out->dim, s->v, sizeof(int64_t) * (size_t)s->n);
	ir_shape_str(x, s0, sizeof s0);
	ir_shape_str(out, s1, sizeof s1);
	if (s->n < x->rank)
		return fail(err, errlen, "broadcast: cannot broadcast %s to lower rank %s", s0, s1);
	for (int i = 0; i < x->rank; i++) {
		int64_t d = x->dim[i], t = s->v[s->n - x->rank + i];
		if (d != t && d != 1)
			return fail(err, errlen, "broadcast: cannot broadcast %s to %s", s0, s1);
	}
	*dt = DT(0);
	return 1;
}

static int
slice_shape(int op, const Shape *x, const Attrs *a, Shape *out, char *err, size_t errlen)
{
	const AttrVal *st = &a->a[0], *en = &a->a[1], *sp = &a->a[2];
	if (st->n != x->rank || en->n != x->rank || sp->n != x->rank)
		return fail(err, errlen, "%s: start, end and step need one value per axis (rank %d)", NAME,
		            x->rank);
	out->rank = x->rank;
	for (int i = 0; i < x->rank; i++) {
		if (sp->v[i] < 1)
			return fail(err, errlen, "%s: step %lld on axis %d must be positive", NAME,
			            (long long)sp->v[i], i);
		if (st->v[i] < 0 || st->v[i] > en->v[i] || en->v[i] > x->dim[i])
			return fail(err, errlen, "%s: range %lld:%lld out of bounds for axis %d of size %lld",
			            NAME, (long long)st->v[i], (long long)en->v[i], i, (long long)x->dim[i]);
		// ceil((end - start) / step), written so that no step overflows it
		out->dim[i] = en->v[i] == st->v[i] ? 0 : (en->v[i] - st->v[i] - 1) / sp->v[i] + 1;
	}
	return 1;
}

SHAPE_RULE(slice)
{
	if (!check_tuple(g, op, in, nin, err, errlen))
		return 0;
	*dt = DT(0);
	return slice_shape(op, SH(0), a, out, err, errlen);
}

SHAPE_RULE(slice_update)
{
	if (!check_tuple(g, op, in, nin, err, errlen))
		return 0;
	Shape s;
	if (!slice_shape(op, SH(0), a, &s, err, errlen))
		return 0;
	if (!ir_shape_eq(&s, SH(1))) {
		char s0[160], s1[160];
		ir_shape_str(&s, s0, sizeof s0);
		ir_shape_str(SH(1), s1, sizeof s1);
		return fail(err, errlen, "slice_update: the slice is %s, the value %s", s0, s1);
	}
	if (DT(0) != DT(1))
		return fail(err, errlen, "slice_update: dtypes differ (%s vs %s)", ir_dtype_name(DT(0)),
		            ir_dtype_name(DT(1)));
	*out = *SH(0);
	*dt = DT(0);
	return 1;
}

SHAPE_RULE(pad)
{
	if (!check_tuple(g, op, in, nin, err, errlen))
		return 0;
	const Shape *x = SH(0);
	const AttrVal *b = &a->a[0], *e = &a->a[1];
	if (b->n != x->rank || e->n != x->rank)
		return fail(err, errlen, "pad: before and after need one value per axis (rank %d)", x->rank);
	out->rank = x->rank;
	for (int i = 0; i < x->rank; i++) {
		if (b->v[i] < 0 || e->v[i] < 0)
			return fail(err, errlen, "pad: negative padding on axis %d", i);
		if (__builtin_add_overflow(x->dim[i], b->v[i], &out->dim[i]) ||
		    __builtin_add_overflow(out->dim[i], e->v[i], &out->dim[i]))
			return fail(err, errlen, "pad: the padded size of axis %d is too large", i);
	}
	*dt = DT(0);
	return 1;
}

SHAPE_RULE(concat)
{
	if (!check_tuple(g, op, in, nin, err, errlen))
		return 0;
	const Shape *x = SH(0);
	int64_t ax = a->a[0].i;
	if (ax < 0 || ax >= x->rank)
		return fail(err, errlen, "concat: axis %lld out of range for rank %d", (long long)ax, x->rank);
	*out = *x;
	for (int k = 1; k < nin; k++) {
		const Shape *y = SH(k);
		if (DT(k) != DT(0))
			return fail(err, errlen, "concat: operand %d is %s, operand 1 is %s", k + 1,
			            ir_dtype_name(DT(k)), ir_dtype_name(DT(0)));
		if (y->rank != x->rank)
			return fail(err, errlen, "concat: operand %d has rank %d, operand 1 rank %d", k + 1,
			            y->rank, x->rank);
		for (int i = 0; i < x->rank; i++)
			if (i != ax && y->dim[i] != x->dim[i])
				return fail(err, errlen,
				            "concat: operand %d has size %lld on axis %d, operand 1 has %lld", k + 1,
				            (long long)y->dim[i], i, (long long)x->dim[i]);
		if (__builtin_add_overflow(out->dim[ax], y->dim[ax], &out->dim[ax]))
			return fail(err, errlen, "concat: the result is too large on axis %lld", (long long)ax);
	}
	*dt = DT(0);
	return 1;
}

SHAPE_RULE(resize)
{
	if (!check_tuple(g, op, in, nin, err, errlen))
		return 0;
	const AttrVal *s = &a->a[0];
	if (!check_shape_attr(op, s, err, errlen))
		return 0;
	out->rank = s->n;
	memcpy(out->dim, s->v, sizeof(int64_t) * (size_t)s->n);
	*dt = DT(0);
	return 1;
}

static int
check_index(int op, DType t, char *err, size_t errlen)
{
	if (t != DT_I64)
		return fail(err, errlen, "%s: indices must be i64, got %s", NAME, ir_dtype_name(t));
	return 1;
}

static int
take_shape(int op, const Shape *x, const Shape *idx, int64_t ax, Shape *out, char *err,
           size_t errlen)
{
	if (ax < 0 || ax >= x->rank)
		return fail(err, errlen, "%s: axis %lld out of range for rank %d", NAME, (long long)ax,
		            x->rank);
	if (x->rank - 1 + idx->rank > IR_MAXDIM)
		return fail(err, errlen, "%s: result rank %d exceeds %d", NAME, x->rank - 1 + idx->rank,
		            IR_MAXDIM);
	out->rank = 0;
	for (int i = 0; i < ax; i++)
		out->dim[out->rank++] = x->dim[i];
	for (int i = 0; i < idx->rank; i++)
		out->dim[out->rank++] = idx->dim[i];
	for (int i = (int)ax + 1; i < x->rank; i++)
		out->dim[out->rank++] = x->dim[i];
	return 1;
}

SHAPE_RULE(take)
{
	if (!check_tuple(g, op, in, nin, err, errlen) || !check_index(op, DT(1), err, errlen))
		return 0;
	*dt = DT(0);
	return take_shape(op, SH(0), SH(1), a->a[0].i, out, err, errlen);
}

SHAPE_RULE(take_add)
{
	if (!check_tuple(g, op, in, nin, err, errlen) || !check_index(op, DT(1), err, errlen))
		return 0;
	Shape s;
	if (!take_shape(op, SH(0), SH(1), a->a[0].i, &s, err, errlen))
		return 0;
	if (!ir_shape_eq(&s, SH(2)) || DT(2) != DT(0)) {
		char s0[160], s1[160];
		ir_type_str(DT(0), &s, s0, sizeof s0);
		ir_type_str(DT(2), SH(2), s1, sizeof s1);
		return fail(err, errlen, "take_add: the update must be %s, got %s", s0, s1);
	}
	*out = *SH(0);
	*dt = DT(0);
	return 1;
}

static int
along_check(int op, const Shape *x, const Shape *idx, int64_t ax, char *err, size_t errlen)
{
	if (ax < 0 || ax >= x->rank)
		return fail(err, errlen, "%s: axis %lld out of range for rank %d", NAME, (long long)ax,
		            x->rank);
	if (idx->rank != x->rank)
		return fail(err, errlen, "%s: indices have rank %d, operand rank %d", NAME, idx->rank,
		            x->rank);
	for (int i = 0; i < x->rank; i++)
		if (i != ax && idx->dim[i] > x->dim[i])
			return fail(err, errlen, "%s: indices have size %lld on axis %d, operand only %lld",
			            NAME, (long long)idx->dim[i], i, (long long)x->dim[i]);
	return 1;
}

SHAPE_RULE(take_along)
{
	if (!check_tuple(g, op, in, nin, err, errlen) || !check_index(op, DT(1), err, errlen))
		return 0;
	if (!along_check(op, SH(0), SH(1), a->a[0].i, err, errlen))
		return 0;
	*out = *SH(1);
	*dt = DT(0);
	return 1;
}

SHAPE_RULE(take_along_add)
{
	if (!check_tuple(g, op, in, nin, err, errlen) || !check_index(op, DT(1), err, errlen))
		return 0;
	if (!along_check(op, SH(0), SH(1), a->a[0].i, err, errlen))
		return 0;
	if (!ir_shape_eq(SH(1), SH(2)) || DT(2) != DT(0))
		return fail(err, errlen, "take_along_add: the update must have the indices' shape and the operand's dtype");
	*out = *SH(0);
	*dt = DT(0);
	return 1;
}

SHAPE_RULE(one_hot)
{
	if (!check_tuple(g, op, in, nin, err, errlen) || !check_index(op, DT(0), err, errlen))
		return 0;
	if (a->a[0].i < 0)
		return fail(err, errlen, "one_hot: n must be non-negative");
	if (SH(0)->rank == IR_MAXDIM)
		return fail(err, errlen, "one_hot: result rank exceeds %d", IR_MAXDIM);
	*out = *SH(0);
	out->dim[out->rank++] = a->a[0].i;
	*dt = (DType)a->a[1].i;
	return 1;
}

SHAPE_RULE(matmul)
{
	(void)a;
	if (!check_tuple(g, op, in, nin, err, errlen))
		return 0;
	const Shape *x = SH(0), *y = SH(1);
	char s0[160], s1[160];
	ir_shape_str(x, s0, sizeof s0);
	ir_shape_str(y, s1, sizeof s1);
	if (!ir_dtype_is_float(DT(0)) || DT(0) != DT(1))
		return fail(err, errlen, "matmul: needs two f32 or two f64 operands, got %s and %s",
		            ir_dtype_name(DT(0)), ir_dtype_name(DT(1)));
	if (x->rank < 2 || y->rank < 2)
		return fail(err, errlen, "matmul: operands must have rank >= 2 (%s, %s)", s0, s1);
	if (x->rank != y->rank)
		return fail(err, errlen, "matmul: operand ranks differ (%s vs %s)", s0, s1);
	int r = x->rank;
	for (int i = 0; i < r - 2; i++)
		if (x->dim[i] != y->dim[i])
			return fail(err, errlen, "matmul: batch dimensions differ (%s vs %s)", s0, s1);
	if (x->dim[r - 1] != y->dim[r - 2])
		return fail(err, errlen, "matmul: inner dimensions differ (%lld vs %lld)",
		            (long long)x->dim[r - 1], (long long)y->dim[r - 2]);
	*out = *x;
	out->dim[r - 1] = y->dim[r - 1];
	*dt = DT(0);
	return 1;
}

// The window geometry of one spatial axis: the padded length L + 2p and
// the dilated kernel extent d(k-1) + 1.  Attributes are unbounded int64
// values, so both are computed with overflow checks: 0 when a value is too
// large for any real tensor (the caller reports it).
static int
window_span(int64_t len, int64_t k, int64_t p, int64_t d, int64_t *padded, int64_t *extent)
{
	return !__builtin_mul_overflow(p, 2, padded) && !__builtin_add_overflow(len, *padded, padded) &&
	       !__builtin_mul_overflow(d, k - 1, extent) && !__builtin_add_overflow(*extent, 1, extent);
}

// Output length of a window op: floor((L + 2p - d(k-1) - 1) / s) + 1, for
// a padded length and extent from window_span.
static int64_t
window_out(int64_t padded, int64_t extent, int64_t s)
{
	int64_t span = padded - extent;
	return span < 0 ? 0 : span / s + 1;
}

static int
check_window(int op, int ns, const AttrVal *v, const char *what, int64_t lo, char *err, size_t n)
{
	if (v->n != ns)
		return fail(err, n, "%s: %s needs %d value%s (one per spatial axis), got %d", NAME, what, ns,
		            ns == 1 ? "" : "s", v->n);
	for (int i = 0; i < ns; i++)
		if (v->v[i] < lo)
			return fail(err, n, "%s: %s %lld must be at least %lld", NAME, what,
			            (long long)v->v[i], (long long)lo);
	return 1;
}

// The convolution geometry shared by conv and its two adjoints: ns spatial
// axes, attributes stride, padding, dilation (slots 0-2) and groups (slot
// 3), which must divide both channel counts (cin of the input x, cout of
// the output y).
static int
conv_attrs(int op, int ns, const Attrs *a, int64_t cin, int64_t cout, char *err, size_t errlen)
{
	int64_t groups = a->a[3].i;
	if (!check_window(op, ns, &a->a[0], "stride", 1, err, errlen) ||
	    !check_window(op, ns, &a->a[1], "padding", 0, err, errlen) ||
	    !check_window(op, ns, &a->a[2], "dilation", 1, err, errlen))
		return 0;
	if (groups < 1 || cin % groups || cout % groups)
		return fail(err, errlen, "%s: groups %lld must divide the channels (%lld in, %lld out)",
		            NAME, (long long)groups, (long long)cin, (long long)cout);
	return 1;
}

// Spatial axis i of a convolution: input length len, kernel k.  The kernel
// must fit the padded input; the output length is written to *o.  A kernel
// of 0 is refused: every other size may be 0 (an empty tensor, as in
// PyTorch), but a window of no tap has no output length (the extent
// d(k-1) + 1 would be 1 - d) and its adjoints none either.
static int
conv_axis(int op, const Attrs *a, int i, int64_t len, int64_t k, int64_t *o, char *err,
          size_t errlen)
{
	int64_t p = a->a[1].v[i], d = a->a[2].v[i], padded, extent;
	if (k < 1)
		return fail(err, errlen, "%s: kernel %lld on spatial axis %d must be at least 1", NAME,
		            (long long)k, i);
	if (!window_span(len, k, p, d, &padded, &extent))
		return fail(err, errlen, "%s: padding %lld or dilation %lld is too large on spatial axis %d",
		            NAME, (long long)p, (long long)d, i);
	if (padded < extent)
		return fail(err, errlen,
		            "%s: kernel %lld (dilation %lld) larger than padded input %lld on spatial axis %d",
		            NAME, (long long)k, (long long)d, (long long)padded, i);
	*o = window_out(padded, extent, a->a[0].v[i]);
	return 1;
}

// Two float operands of one dtype, NC... tensors of rank 3 or 4 and of equal
// rank; `what` names them for the messages.
static int
conv_operands(const Graph *g, int op, const NodeId *in, const char *what, char *err, size_t errlen)
{
	const Shape *x = SH(0), *y = SH(1);
	char s0[160], s1[160];
	ir_shape_str(x, s0, sizeof s0);
	ir_shape_str(y, s1, sizeof s1);
	if (!ir_dtype_is_float(DT(0)) || DT(0) != DT(1))
		return fail(err, errlen, "%s: needs two f32 or two f64 operands", NAME);
	if (x->rank < 3 || x->rank > 4)
		return fail(err, errlen, "%s: %s must be (N, C, L) or (N, C, H, W), got %s", NAME, what,
		            s0);
	if (y->rank != x->rank)
		return fail(err, errlen, "%s: operand 2 %s must have operand 1's rank %d", NAME, s1,
		            x->rank);
	return 1;
}

SHAPE_RULE(conv)
{
	if (!check_tuple(g, op, in, nin, err, errlen))
		return 0;
	const Shape *x = SH(0), *w = SH(1);
	char s0[160], s1[160];
	ir_shape_str(x, s0, sizeof s0);
	ir_shape_str(w, s1, sizeof s1);
	if (!ir_dtype_is_float(DT(0)) || DT(0) != DT(1))
		return fail(err, errlen, "conv: needs two f32 or two f64 operands");
	if (x->rank < 3 || x->rank > 4)
		return fail(err, errlen, "conv: input must be (N, C, L) or (N, C, H, W), got %s", s0);
	if (w->rank != x->rank)
		return fail(err, errlen, "conv: weight %s must have the input's rank %d", s1, x->rank);
	int ns = x->rank - 2;
	int64_t groups = a->a[3].i;
	if (!conv_attrs(op, ns, a, x->dim[1], w->dim[0], err, errlen))
		return 0;
	int64_t cin;
	if (__builtin_mul_overflow(w->dim[1], groups, &cin))
		return fail(err, errlen, "conv: groups %lld is too large", (long long)groups);
	if (cin != x->dim[1])
		return fail(err, errlen,
		            "conv: weight %s expects %lld input channels, input %s has %lld", s1,
		            (long long)cin, s0, (long long)x->dim[1]);
	out->rank = x->rank;
	out->dim[0] = x->dim[0];
	out->dim[1] = w->dim[0];
	for (int i = 0; i < ns; i++)
		if (!conv_axis(op, a, i, x->dim[2 + i], w->dim[2 + i], &out->dim[2 + i], err, errlen))
			return 0;
	*dt = DT(0);
	return 1;
}

// conv_input_grad(g, w): g (N, C_out, O...) is conv's output gradient, w
// (C_out, C_in/groups, k...) its weight; the result is conv's input
// (N, C_in, size...), and conv of that input must give g's O.
SHAPE_RULE(conv_input_grad)
{
	if (!check_tuple(g, op, in, nin, err, errlen) ||
	    !conv_operands(g, op, in, "the gradient", err, errlen))
		return 0;
	const Shape *y = SH(0), *w = SH(1);
	int ns = y->rank - 2;
	int64_t groups = a->a[3].i;
	if (w->dim[0] != y->dim[1])
		return fail(err, errlen,
		            "conv_input_grad: weight has %lld output channels, the gradient %lld",
		            (long long)w->dim[0], (long long)y->dim[1]);
	int64_t cin;
	if (__builtin_mul_overflow(w->dim[1], groups, &cin))
		return fail(err, errlen, "conv_input_grad: groups %lld is too large", (long long)groups);
	if (!conv_attrs(op, ns, a, cin, w->dim[0], err, errlen) ||
	    !check_window(op, ns, &a->a[4], "size", 0, err, errlen))
		return 0;
	out->rank = y->rank;
	out->dim[0] = y->dim[0];
	out->dim[1] = cin;
	for (int i = 0; i < ns; i++) {
		int64_t o;
		out->dim[2 + i] = a->a[4].v[i];
		if (!conv_axis(op, a, i, out->dim[2 + i], w->dim[2 + i], &o, err, errlen))
			return 0;
		if (o != y->dim[2 + i])
			return fail(err, errlen,
			            "conv_input_grad: an input of size %lld gives %lld outputs on spatial axis %d, the gradient has %lld",
			            (long long)out->dim[2 + i], (long long)o, i, (long long)y->dim[2 + i]);
	}
	*dt = DT(0);
	return 1;
}

// conv_weight_grad(x, g): x (N, C_in, L...) is conv's input, g
// (N, C_out, O...) its output gradient; the result is conv's weight
// (C_out, C_in/groups, kernel...), and conv of x with it must give g's O.
SHAPE_RULE(conv_weight_grad)
{
	if (!check_tuple(g, op, in, nin, err, errlen) ||
	    !conv_operands(g, op, in, "the input", err, errlen))
		return 0;
	const Shape *x = SH(0), *y = SH(1);
	int ns = x->rank - 2;
	if (x->dim[0] != y->dim[0])
		return fail(err, errlen, "conv_weight_grad: batch sizes differ (%lld vs %lld)",
		            (long long)x->dim[0], (long long)y->dim[0]);
	if (!conv_attrs(op, ns, a, x->dim[1], y->dim[1], err, errlen) ||
	    !check_window(op, ns, &a->a[4], "kernel", 1, err, errlen))
		return 0;
	out->rank = x->rank;
	out->dim[0] = y->dim[1];
	out->dim[1] = x->dim[1] / a->a[3].i;
	for (int i = 0; i < ns; i++) {
		int64_t o;
		out->dim[2 + i] = a->a[4].v[i];
		if (!conv_axis(op, a, i, x->dim[2 + i], out->dim[2 + i], &o, err, errlen))
			return 0;
		if (o != y->dim[2 + i])
			return fail(err, errlen,
			            "conv_weight_grad: kernel %lld gives %lld outputs on spatial axis %d, the gradient has %lld",
			            (long long)out->dim[2 + i], (long long)o, i, (long long)y->dim[2 + i]);
	}
	*dt = DT(0);
	return 1;
}

// The result of a pool over an input of shape x: max_pool, avg_pool and
// the ops of their derivatives, whose attributes start with kernel,
// stride, padding and (where the op has one) dilation.  The caller checks
// the dtype.
static int
pool_shape(int op, const Shape *x, const Attrs *a, Shape *out, char *err, size_t errlen)
{
	int ns = a->a[0].n;
	if (ns < 1 || ns > 2 || x->rank != ns + 2) {
		char s0[160];
		ir_shape_str(x, s0, sizeof s0);
		return fail(err, errlen, "%s: %d-d kernel needs an (N, C, spatial...) input of rank %d, got %s",
		            NAME, ns, ns + 2, s0);
	}
	if (!check_window(op, ns, &a->a[0], "kernel", 1, err, errlen) ||
	    !check_window(op, ns, &a->a[1], "stride", 1, err, errlen) ||
	    !check_window(op, ns, &a->a[2], "padding", 0, err, errlen))
		return 0;
	int dil = ir_attr_index(op, "dilation") == 3;
	if (dil && !check_window(op, ns, &a->a[3], "dilation", 1, err, errlen))
		return 0;
	*out = *x;
	for (int i = 0; i < ns; i++) {
		int64_t k = a->a[0].v[i], s = a->a[1].v[i], p = a->a[2].v[i];
		int64_t d = dil ? a->a[3].v[i] : 1, padded, extent;
		if (p > k / 2)
			return fail(err, errlen, "%s: padding %lld must be at most half the kernel %lld", NAME,
			            (long long)p, (long long)k);
		if (!window_span(x->dim[2 + i], k, p, d, &padded, &extent))
			return fail(err, errlen, "%s: padding %lld or dilation %lld is too large on spatial axis %d",
			            NAME, (long long)p, (long long)d, i);
		if (padded < extent)
			return fail(err, errlen, "%s: kernel larger than padded input on spatial axis %d", NAME, i);
		out->dim[2 + i] = window_out(padded, extent, s);
	}
	return 1;
}

SHAPE_RULE(pool)
{
	if (!check_tuple(g, op, in, nin, err, errlen))
		return 0;
	if (!ir_dtype_is_float(DT(0)))
		return fail(err, errlen, "%s: needs an f32 or f64 operand", NAME);
	*dt = DT(0);
	return pool_shape(op, SH(0), a, out, err, errlen);
}

// max_pool_grad(x, g): g has the shape of max_pool(x); the result x's.
// avg_pool_grad(g): the input's spatial size is the attribute `size`
// (slot 4); g has the shape of avg_pool of that input.
SHAPE_RULE(pool_grad)
{
	if (!check_tuple(g, op, in, nin, err, errlen))
		return 0;
	for (int i = 0; i < nin; i++)
		if (!ir_dtype_is_float(DT(i)) || DT(i) != DT(0))
			return fail(err, errlen, "%s: needs f32 or f64 operands of one dtype", NAME);
	const Shape *gs = SH(nin - 1);
	Shape x, y;
	if (nin == 2)
		x = *SH(0);
	else {
		int ns = a->a[0].n;
		if (ns < 1 || ns > 2 || gs->rank != ns + 2) {
			char s0[160];
			ir_shape_str(gs, s0, sizeof s0);
			return fail(err, errlen, "%s: %d-d kernel needs an (N, C, spatial...) gradient of rank %d, got %s",
			            NAME, ns, ns + 2, s0);
		}
		if (!check_window(op, ns, &a->a[4], "size", 0, err, errlen))
			return 0;
		x.rank = gs->rank;
		x.dim[0] = gs->dim[0];
		x.dim[1] = gs->dim[1];
		for (int i = 0; i < ns; i++)
			x.dim[2 + i] = a->a[4].v[i];
	}
	if (!pool_shape(op, &x, a, &y, err, errlen))
		return 0;
	if (!ir_shape_eq(&y, gs)) {
		char s0[160], s1[160], s2[160];
		ir_shape_str(gs, s0, sizeof s0);
		ir_shape_str(&x, s1, sizeof s1);
		ir_shape_str(&y, s2, sizeof s2);
		return fail(err, errlen, "%s: the gradient is %s, but pooling an input %s gives %s", NAME,
		            s0, s1, s2);
	}
	*out = x;
	*dt = DT(0);
	return 1;
}

// max_pool_gather(x, h): h has x's type; the result max_pool(x)'s shape.
SHAPE_RULE(pool_gather)
{
	if (!check_tuple(g, op, in, nin, err, errlen))
		return 0;
	if (!ir_dtype_is_float(DT(0)) || DT(1) != DT(0))
		return fail(err, errlen, "%s: needs two f32 or two f64 operands", NAME);
	if (!ir_shape_eq(SH(0), SH(1))) {
		char s0[160], s1[160];
		ir_shape_str(SH(0), s0, sizeof s0);
		ir_shape_str(SH(1), s1, sizeof s1);
		return fail(err, errlen, "%s: operand shapes differ (%s vs %s)", NAME, s0, s1);
	}
	*dt = DT(0);
	return pool_shape(op, SH(0), a, out, err, errlen);
}

SHAPE_RULE(adaptive_pool)
{
	if (!check_tuple(g, op, in, nin, err, errlen))
		return 0;
	const Shape *x = SH(0);
	int ns = a->a[0].n;
	if (ns < 1 || ns > 2 || x->rank != ns + 2)
		return fail(err, errlen, "%s: %d output sizes need an input of rank %d, got rank %d", NAME,
		            ns, ns + 2, x->rank);
	if (!ir_dtype_is_float(DT(0)))
		return fail(err, errlen, "%s: needs an f32 or f64 operand", NAME);
	*out = *x;
	for (int i = 0; i < ns; i++) {
		if (a->a[0].v[i] < 1 || x->dim[2 + i] < 1)
			return fail(err, errlen, "%s: sizes must be positive", NAME);
		out->dim[2 + i] = a->a[0].v[i];
	}
	*dt = DT(0);
	return 1;
}

// adaptive_avg_pool_grad(g, size): g (N, C, O...) is the pooled gradient,
// the result (N, C, size...) the input's shape.
SHAPE_RULE(adaptive_pool_grad)
{
	if (!check_tuple(g, op, in, nin, err, errlen))
		return 0;
	const Shape *y = SH(0);
	int ns = a->a[0].n;
	if (ns < 1 || ns > 2 || y->rank != ns + 2)
		return fail(err, errlen, "%s: %d input sizes need a gradient of rank %d, got rank %d", NAME,
		            ns, ns + 2, y->rank);
	if (!ir_dtype_is_float(DT(0)))
		return fail(err, errlen, "%s: needs an f32 or f64 operand", NAME);
	*out = *y;
	for (int i = 0; i < ns; i++) {
		if (a->a[0].v[i] < 1 || y->dim[2 + i] < 1)
			return fail(err, errlen, "%s: sizes must be positive", NAME);
		out->dim[2 + i] = a->a[0].v[i];
	}
	*dt = DT(0);
	return 1;
}

// upsample_bilinear(x, size) and its adjoint upsample_bilinear_grad(g,
// size): both map (N, C, H, W) to (N, C, size[0], size[1]).
SHAPE_RULE(upsample)
{
	if (!check_tuple(g, op, in, nin, err, errlen))
		return 0;
	const Shape *x = SH(0);
	const char *what = op == OP_upsample_bilinear_grad ? "gradient" : "input";
	if (x->rank != 4 || a->a[0].n != 2)
		return fail(err, errlen, "%s: needs an (N, C, H, W) %s and two output sizes", NAME, what);
	if (!ir_dtype_is_float(DT(0)))
		return fail(err, errlen, "%s: needs an f32 or f64 operand", NAME);
	*out = *x;
	for (int i = 0; i < 2; i++) {
		if (a->a[0].v[i] < 1 || x->dim[2 + i] < 1)
			return fail(err, errlen, "%s: sizes must be positive", NAME);
		out->dim[2 + i] = a->a[0].v[i];
	}
	*dt = DT(0);
	return 1;
}

SHAPE_RULE(upsample_grad) { return shape_upsample(g, op, in, nin, a, out, dt, err, errlen); }

// scan(body, carries..., xs..., invariants...): body(carry..., x_t...,
// invariants...) -> (carry'..., y_t...).  Every xs operand has the same
// leading length T; the result is the tuple (final carries..., ys stacked
// on a new leading axis of length T).
SHAPE_RULE(scan)
{
	if (!check_tuple(g, op, in, nin, err, errlen))
		return 0;
	const Graph *b = g->sub[a->a[0].i];
	int64_t nc = a->a[1].i, nx = a->a[2].i;
	if (nc < 0 || nx < 0 || nc > nin || nx > nin - nc)
		return fail(err, errlen, "scan: ncarry %lld and nxs %lld do not fit %d operands",
		            (long long)nc, (long long)nx, nin);
	if (nx < 1)
		return fail(err, errlen, "scan: needs at least one sequence operand (nxs >= 1)");
	if ((int)b->ninput != nin)
		return fail(err, errlen, "scan: body '%s' takes %u arguments, scan passes %d", b->name,
		            b->ninput, nin);
	if ((int64_t)b->nout < nc)
		return fail(err, errlen, "scan: body '%s' returns %u values, fewer than its %lld carries",
		            b->name, b->nout, (long long)nc);
	int64_t T = -1;
	for (int i = 0; i < nin; i++) {
		const Shape *s = SH(i);
		const Node *bi = &b->node[b->input[i].node];
		Shape want = *s;
		if (i >= nc && i < nc + nx) {
			if (s->rank < 1)
				return fail(err, errlen, "scan: sequence operand %d is a scalar", i + 1);
			if (T >= 0 && s->dim[0] != T)
				return fail(err, errlen, "scan: sequence operands have lengths %lld and %lld",
				            (long long)T, (long long)s->dim[0]);
			T = s->dim[0];
			want.rank--;
			memmove(want.dim, want.dim + 1, sizeof(int64_t) * (size_t)want.rank);
		}
		if (!ir_shape_eq(&want, &b->shape[bi->shape]) || bi->dtype != DT(i)) {
			char s0[160], s1[160];
			ir_type_str(DT(i), &want, s0, sizeof s0);
			ir_type_str((DType)bi->dtype, &b->shape[bi->shape], s1, sizeof s1);
			return fail(err, errlen, "scan: operand %d gives the body %s, its argument is %s", i + 1,
			            s0, s1);
		}
	}
	for (int i = 0; i < nc; i++) {
		const Node *o = &b->node[b->out[i].node], *bi = &b->node[b->input[i].node];
		if (o->shape != bi->shape || o->dtype != bi->dtype)
			return fail(err, errlen, "scan: body '%s' returns carry %d with a type other than its argument's",
			            b->name, i + 1);
	}
	for (uint32_t i = (uint32_t)nc; i < b->nout; i++)
		if (b->shape[b->node[b->out[i].node].shape].rank == IR_MAXDIM)
			return fail(err, errlen, "scan: stacked output rank exceeds %d", IR_MAXDIM);
	out->rank = 0;
	*dt = DT_TUPLE;
	return 1;
}

SHAPE_RULE(get)
{
	(void)nin, (void)op;
	const Node *s = &g->node[in[0]];
	if (s->op != OP_scan)
		return fail(err, errlen, "get: operand is not a tuple");
	Attrs sa;
	ir_attrs_get(g, in[0], &sa);
	const Graph *b = g->sub[sa.a[0].i];
	int64_t k = a->a[0].i, nc = sa.a[1].i;
	if (k < 0 || k >= (int64_t)b->nout)
		return fail(err, errlen, "get: index %lld out of range (the tuple has %u values)",
		            (long long)k, b->nout);
	const Node *o = &b->node[b->out[k].node];
	const Shape *os = &b->shape[o->shape];
	if (k < nc) {
		*out = *os;
	} else {
		const Shape *x0 = ir_shape(g, ir_in1(g, in[0], (int)nc));
		out->rank = os->rank + 1;
		out->dim[0] = x0->dim[0];
		memcpy(out->dim + 1, os->dim, sizeof(int64_t) * (size_t)os->rank);
	}
	*dt = (DType)o->dtype;
	return 1;
}

SHAPE_RULE(assignment)
{
	(void)a;
	if (!check_tuple(g, op, in, nin, err, errlen))
		return 0;
	if (SH(0)->rank != 2 || !ir_dtype_is_float(DT(0)))
		return fail(err, errlen, "%s: needs an f32 or f64 cost matrix of rank 2", NAME);
	out->rank = 1;
	out->dim[0] = SH(0)->dim[0];
	*dt = DT_I64;
	return 1;
}
