// frontend/onnx_shape.c -- values known at import (docs/ONNX.md, "Values
// known at import"): broadcasting and axes, the elementwise folding, and the
// shape ops (Reshape, Flatten, Squeeze, Unsqueeze, Concat, Expand; Constant,
// Shape, Size, ConstantOfShape, Range), computed here when their inputs are
// known so that every tensor has a static shape.
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx_imp.h"

// ---------------------------------------------------------------- helpers of the ops

// The axes of a node, from its input i (an int64 constant: opset 13's
// ReduceSum, Squeeze and Unsqueeze, and every Reduce from opset 18) or else
// its attribute "axes"; each made non-negative against rank.  The count, 0
// when there are none, -1 after an error.
int
ox_node_axes(Imp *im, const Onnx__NodeProto *n, size_t i, int rank, int64_t *ax)
{
	int k = 0;
	if (i < n->n_input && *n->input[i]) {
		const OVal *a = ox_find(im, n->input[i]);
		if (!a || !a->iv) {
			ox_err(im, "the axes '%s' are not known at import", n->input[i]);
			return -1;
		}
		if (ox_numel(a) > MAXRANK) {
			ox_err(im, "more than %d axes", MAXRANK);
			return -1;
		}
		k = (int)ox_numel(a);
		for (int j = 0; j < k; j++)
			ax[j] = a->iv[j];
	} else {
		k = ox_attr(n, "axes") ? ox_attr_ints(n, "axes", ax, MAXRANK) : 0;
		if (k < 0) {
			ox_err(im, "more than %d axes", MAXRANK);
			return -1;
		}
	}
	for (int j = 0; j < k; j++) {
		if (ax[j] < -rank || ax[j] >= rank) {
			ox_err(im, "axis %lld is out of range for rank %d", (long long)ax[j], rank);
			return -1;
		}
		if (ax[j] < 0)
			ax[j] += rank;
		for (int l = 0; l < j; l++)
			if (ax[l] == ax[j]) {
				ox_err(im, "axis %lld repeated", (long long)ax[j]);
				return -1;
			}
	}
	return k;
}

int
ox_has_axis(const int64_t *ax, int k, int64_t a)
{
	for (int i = 0; i < k; i++)
		if (ax[i] == a)
			return 1;
	return 0;
}

// One attribute axis made non-negative against rank (r: the rank the axis
// counts in); -1 after an error.
int
ox_one_axis(Imp *im, int64_t a, int r)
{
	if (a < -r || a >= r) {
		ox_err(im, "axis %lld is out of range for rank %d", (long long)a, r);
		return -1;
	}
	return (int)(a < 0 ? a + r : a);
}

// NumPy broadcasting of k shapes into o (ONNX's multidirectional
// broadcasting); 0 after an error.
int
ox_bcast(Imp *im, OVal *o, OVal **in, int k)
{
	o->rank = 0;
	for (int j = 0; j < k; j++)
		if (in[j]->rank > o->rank)
			o->rank = in[j]->rank;
	for (int i = 0; i < o->rank; i++) {
		int64_t d = 1;
		for (int j = 0; j < k; j++) {
			int ix = i - (o->rank - in[j]->rank);
			int64_t a = ix >= 0 ? in[j]->dim[ix] : 1;
			if (a == 1)
				continue;
			if (d != 1 && a != d) {
				ox_err(im, "shapes do not broadcast (dimension %lld vs %lld)", (long long)d,
				    (long long)a);
				return 0;
			}
			d = a;
		}
		o->dim[i] = d;
	}
	return 1;
}

// The flat index into v of output position idx (of o's shape), v
// broadcast to o.
static int64_t
bidx(const OVal *v, const OVal *o, int64_t idx)
{
	int64_t off = 0, stride = 1;
	for (int i = o->rank - 1; i >= 0; i--) {
		int64_t c = idx % o->dim[i];
		idx /= o->dim[i];
		int iv = i - (o->rank - v->rank);
		if (iv >= 0) {
			if (v->dim[iv] != 1)
				off += c * stride;
			stride *= v->dim[iv];
		}
	}
	return off;
}

// ---------------------------------------------------------------- folding

// Elementwise ops of known values, computed here (in int64 for integer
// and bool results and operands, else in double).
static const char *const ew_ops[] = {"Add", "Sub", "Mul", "Div", "Pow", "Neg", "Abs", "Sqrt",
                                     "Exp", "Log", "Reciprocal", "Floor", "Sign", "Relu",
                                     "Equal", "Less", "Greater", "LessOrEqual",
                                     "GreaterOrEqual", "Not", "And", "Or", "Where", "Max",
                                     "Min", "Cast", "Identity", "Dropout", "Sin", "Cos", "Tanh",
                                     "Sigmoid", "Erf", NULL};

int
ox_is_ew(const char *op)
{
	for (int i = 0; ew_ops[i]; i++)
		if (!strcmp(op, ew_ops[i]))
			return 1;
	return 0;
}

// The number of inputs of an elementwise op: 3 for Where, 2 for the
// binary ones, 0 for Max and Min (any, at least one), else 1.
int
ox_ew_arity(const char *op)
{
	static const char *const two[] = {"Add", "Sub", "Mul", "Div", "Pow", "Equal", "Less",
	                                  "Greater", "LessOrEqual", "GreaterOrEqual", "And", "Or",
	                                  NULL};
	if (!strcmp(op, "Where"))
		return 3;
	if (!strcmp(op, "Max") || !strcmp(op, "Min"))
		return 0;
	for (int i = 0; two[i]; i++)
		if (!strcmp(op, two[i]))
			return 2;
	return 1;
}

int
ox_is_cmp(const char *op)
{
	return !strcmp(op, "Equal") || !strcmp(op, "Less") || !strcmp(op, "Greater") ||
	       !strcmp(op, "LessOrEqual") || !strcmp(op, "GreaterOrEqual") || !strcmp(op, "Not") ||
	       !strcmp(op, "And") || !strcmp(op, "Or");
}

static double
ew_f(const char *op, double a, double b, double c)
{
	switch (op[0]) {
	case 'A': return op[1] == 'd' ? a + b : op[1] == 'b' ? fabs(a) : (a != 0 && b != 0);
	case 'S':
		return op[1] == 'u' ? a - b : op[1] == 'q' ? sqrt(a) : op[1] == 'i' && op[2] == 'n' ? sin(a)
		       : op[1] == 'i' ? 1 / (1 + exp(-a)) : (a > 0) - (a < 0);
	case 'M': return op[1] == 'u' ? a * b : op[1] == 'a' ? (a >= b ? a : b) : (a <= b ? a : b);
	case 'D': return op[1] == 'i' ? a / b : a;
	case 'P': return pow(a, b);
	case 'N': return op[1] == 'e' ? -a : !(a != 0);
	case 'E': return op[1] == 'x' ? exp(a) : op[1] == 'r' ? erf(a) : a == b;
	case 'L': return op[1] == 'o' ? log(a) : op[4] == 'O' ? a <= b : a < b;
	case 'R': return op[1] == 'e' && op[2] == 'c' ? 1 / a : (a > 0 ? a : 0);
	case 'F': return floor(a);
	case 'G': return op[7] == 'O' ? a >= b : a > b;
	case 'O': return a != 0 || b != 0;
	case 'W': return a != 0 ? b : c;
	case 'T': return tanh(a);
	case 'C': return op[1] == 'o' ? cos(a) : a; // Cos; Cast is the conversion below
	case 'I': return a;
	}
	return NAN;
}

// Integer elementwise: 0 after an error (division by zero).
static int
ew_i(Imp *im, const char *op, int64_t a, int64_t b, int64_t c, int64_t *r)
{
	// Wrapping arithmetic, as the compiled code's int64.
	uint64_t ua = (uint64_t)a, ub = (uint64_t)b;
	if (!strcmp(op, "Add"))
		*r = (int64_t)(ua + ub);
	else if (!strcmp(op, "Sub"))
		*r = (int64_t)(ua - ub);
	else if (!strcmp(op, "Mul"))
		*r = (int64_t)(ua * ub);
	else if (!strcmp(op, "Div")) {
		if (!b || (a == INT64_MIN && b == -1)) {
			ox_err(im, "integer division by zero (or overflow) in a value known at import");
			return 0;
		}
		*r = a / b; // C truncates, as ONNX's integer Div
	} else if (!strcmp(op, "Neg"))
		*r = (int64_t)(0 - ua);
	else if (!strcmp(op, "Abs"))
		*r = a < 0 ? (int64_t)(0 - ua) : a;
	else if (!strcmp(op, "Sign"))
		*r = (a > 0) - (a < 0);
	else if (!strcmp(op, "Relu"))
		*r = a > 0 ? a : 0;
	else if (!strcmp(op, "Max"))
		*r = a >= b ? a : b;
	else if (!strcmp(op, "Min"))
		*r = a <= b ? a : b;
	else if (!strcmp(op, "Equal"))
		*r = a == b;
	else if (!strcmp(op, "Less"))
		*r = a < b;
	else if (!strcmp(op, "Greater"))
		*r = a > b;
	else if (!strcmp(op, "LessOrEqual"))
		*r = a <= b;
	else if (!strcmp(op, "GreaterOrEqual"))
		*r = a >= b;
	else if (!strcmp(op, "Not"))
		*r = !a;
	else if (!strcmp(op, "And"))
		*r = a && b;
	else if (!strcmp(op, "Or"))
		*r = a || b;
	else if (!strcmp(op, "Where"))
		*r = a ? b : c;
	else if (!strcmp(op, "Identity") || !strcmp(op, "Dropout") || !strcmp(op, "Cast") ||
	         !strcmp(op, "Floor"))
		*r = a;
	else {
		ox_err(im, "%s of integers is not supported", op);
		return 0;
	}
	return 1;
}

// The ONNX dtype of Cast's `to`, checked; 0 after an error.
int
ox_cast_to(Imp *im, const Onnx__NodeProto *n)
{
	int64_t to = ox_attr_i(n, "to", 0);
	if (!ox_dtype_ir((int)to)) {
		ox_err(im, "cast to ONNX dtype %lld: only float (1), double (11), int64 (7) and bool (9) "
		        "are supported", (long long)to);
		return 0;
	}
	return (int)to;
}

// The folded o of an elementwise node with known inputs in[0..k); 0
// after an error.
int
ox_fold_ew(Imp *im, const char *op, OVal **in, int k, OVal *o)
{
	if (!ox_bcast(im, o, in, k) || !ox_dims_ok(im, o, "value"))
		return 0;
	int64_t n = ox_numel(o);
	if (n > MAXFOLD) {
		ox_err(im, "a value known at import of %lld elements (at most %d)", (long long)n, MAXFOLD);
		return 0;
	}
	int w = !strcmp(op, "Where");
	OVal *x = in[w]; // the operand whose dtype the result has
	o->dtype = ox_is_cmp(op) ? ONNX_BOOL : x->dtype;
	if (!strcmp(op, "Cast") && !(o->dtype = ox_cast_to(im, im->node)))
		return 0;
	int fl = ox_is_float(o->dtype) || (!ox_is_cmp(op) && ox_is_float(x->dtype));
	for (int j = 0; j < k && ox_is_cmp(op); j++)
		fl |= ox_is_float(in[j]->dtype);
	if (!strcmp(op, "Cast"))
		fl = ox_is_float(x->dtype) || ox_is_float(o->dtype);
	for (int64_t i = 0; i < n; i++) {
		int64_t ix[3] = {0, 0, 0};
		for (int j = 0; j < k && j < 3; j++)
			ix[j] = bidx(in[j], o, i);
		if (fl) {
			double a = ox_kf(in[0], ix[0]), b = k > 1 ? ox_kf(in[1], ix[1]) : 0,
			       c = k > 2 ? ox_kf(in[2], ix[2]) : 0;
			double r = ew_f(op, a, b, c);
			if (!o->iv && !o->fv) {
				if (ox_is_float(o->dtype))
					o->fv = ox_xcalloc((size_t)n, sizeof *o->fv);
				else
					o->iv = ox_xcalloc((size_t)n, sizeof *o->iv);
			}
			if (o->fv)
				o->fv[i] = o->dtype == ONNX_FLOAT ? (double)(float)r : r;
			else if (o->dtype == ONNX_BOOL)
				o->iv[i] = r != 0;
			else if (isnan(r) || r >= 9.2e18 || r <= -9.2e18) {
				ox_err(im, "a value known at import does not fit int64");
				return 0;
			} else
				o->iv[i] = (int64_t)r; // toward zero, as a cast to int64
		} else {
			if (!o->iv)
				o->iv = ox_xcalloc((size_t)n, sizeof *o->iv);
			int64_t a = ox_ki(in[0], ix[0]), b = k > 1 ? ox_ki(in[1], ix[1]) : 0,
			        c = k > 2 ? ox_ki(in[2], ix[2]) : 0;
			if (!ew_i(im, op, a, b, c, &o->iv[i]))
				return 0;
			if (o->dtype == ONNX_BOOL)
				o->iv[i] = o->iv[i] != 0;
		}
	}
	if (!o->iv && !o->fv) { // no elements
		if (ox_is_float(o->dtype))
			o->fv = ox_xcalloc(1, sizeof *o->fv);
		else
			o->iv = ox_xcalloc(1, sizeof *o->iv);
	}
	return 1;
}

// A new known value of o's dtype and shape with room for its elements.
static int
alloc_known(Imp *im, OVal *o)
{
	if (!ox_dims_ok(im, o, "value"))
		return 0;
	int64_t n = ox_numel(o);
	if (n > MAXFOLD) {
		ox_err(im, "a value known at import of %lld elements (at most %d)", (long long)n, MAXFOLD);
		return 0;
	}
	if (ox_is_float(o->dtype))
		o->fv = ox_xcalloc((size_t)n, sizeof *o->fv);
	else
		o->iv = ox_xcalloc((size_t)n, sizeof *o->iv);
	return 1;
}

static void
set_k(OVal *o, int64_t i, const OVal *x, int64_t j)
{
	if (o->fv)
		o->fv[i] = ox_kf(x, j);
	else
		o->iv[i] = ox_ki(x, j);
}

// The elements of x at positions src[i] (flat) into o; o's shape is set.
int
ox_gather_known(Imp *im, const OVal *x, OVal *o, const int64_t *src)
{
	o->dtype = x->dtype;
	if (!alloc_known(im, o))
		return 0;
	for (int64_t i = 0, n = ox_numel(o); i < n; i++)
		set_k(o, i, x, src[i]);
	return 1;
}

// The shape ops, whose result has x's elements in a new shape (Reshape,
// Flatten, Squeeze, Unsqueeze) or broadcast (Expand), and Concat: o's
// shape; the statement unless x is known (then folded).
int
ox_op_shape(Imp *im, const Onnx__NodeProto *n, OVal *x, OVal *o)
{
	const char *op = n->op_type;
	int64_t ax[MAXRANK];
	o->dtype = x->dtype;
	if (!strcmp(op, "Concat")) {
		if (n->n_input > 1024) {
			ox_err(im, "more than 1024 inputs");
			return 0;
		}
		if (!x->rank) {
			ox_err(im, "inputs of rank 0");
			return 0;
		}
		int a = ox_one_axis(im, ox_attr_i(n, "axis", 0), x->rank);
		if (a < 0)
			return 0;
		OVal *in[1024];
		int allk = 1;
		o->rank = x->rank;
		memcpy(o->dim, x->dim, sizeof o->dim);
		o->dim[a] = 0;
		for (size_t i = 0; i < n->n_input; i++) {
			if (!(in[i] = ox_in_val(im, n, i, 0)))
				return 0;
			for (int j = 0; j < x->rank; j++)
				if (in[i]->rank != x->rank || (j != a && in[i]->dim[j] != x->dim[j])) {
					ox_err(im, "input '%s' differs in shape off the axis", in[i]->name);
					return 0;
				}
			o->dim[a] += in[i]->dim[a];
			allk &= ox_known(in[i]);
		}
		if (allk) {
			if (!ox_dims_ok(im, o, "value"))
				return 0;
			int64_t nn = ox_numel(o), inner = 1;
			for (int j = a + 1; j < o->rank; j++)
				inner *= o->dim[j];
			if (!alloc_known(im, o))
				return 0;
			for (int64_t e = 0; e < nn; e++) {
				int64_t in_ = e % inner, r = e / inner, c = r % o->dim[a], outer = r / o->dim[a];
				size_t i = 0;
				while (c >= in[i]->dim[a])
					c -= in[i++]->dim[a];
				set_k(o, e, in[i], (outer * in[i]->dim[a] + c) * inner + in_);
			}
			return 1;
		}
		ox_st_begin(im, o->name);
		ox_E(im, "concat(");
		for (size_t i = 0; i < n->n_input; i++)
			ox_E(im, "$v, ", in[i]);
		ox_E(im, "axis=$d)", (int64_t)a);
		ox_st_end(im);
		return 1;
	}
	if (!strcmp(op, "Expand")) {
		OVal *s = ox_in_val(im, n, 1, 0);
		if (!s)
			return 0;
		if (!s->iv || s->rank != 1 || ox_numel(s) > MAXRANK) {
			ox_err(im, "the shape '%s' is not known at import", s->name);
			return 0;
		}
		OVal t = {.rank = (int)ox_numel(s)};
		for (int i = 0; i < t.rank; i++)
			t.dim[i] = s->iv[i];
		if (!ox_dims_ok(im, &t, "shape"))
			return 0;
		OVal *bp[2] = {x, &t};
		if (!ox_bcast(im, o, bp, 2) || !ox_dims_ok(im, o, "value"))
			return 0;
		if (ox_known(x)) {
			int64_t nn = ox_numel(o), *src = ox_xcalloc((size_t)(nn ? nn : 1), sizeof *src);
			for (int64_t e = 0; e < nn; e++)
				src[e] = bidx(x, o, e);
			int ok = ox_gather_known(im, x, o, src);
			free(src);
			return ok;
		}
		ox_st_begin(im, o->name);
		ox_E(im, "broadcast($v, shape=$L)", x, o->dim, o->rank);
		ox_st_end(im);
		return 1;
	}
	if (!strcmp(op, "Flatten")) {
		int64_t a = ox_attr_i(n, "axis", 1);
		if (a < 0)
			a += x->rank;
		if (a < 0 || a > x->rank) {
			ox_err(im, "axis %lld is out of range for rank %d", (long long)ox_attr_i(n, "axis", 1), x->rank);
			return 0;
		}
		o->rank = 2;
		o->dim[0] = o->dim[1] = 1;
		for (int i = 0; i < x->rank; i++)
			o->dim[i >= a] *= x->dim[i];
	} else if (!strcmp(op, "Reshape")) {
		OVal *s = ox_in_val(im, n, 1, 0);
		if (!s)
			return 0;
		if (!s->iv || s->rank != 1) {
			ox_err(im, "the shape '%s' is not known at import", s->name);
			return 0;
		}
		if (ox_numel(s) > MAXRANK) {
			ox_err(im, "more than %d dimensions", MAXRANK);
			return 0;
		}
		int k = (int)ox_numel(s), infer = -1;
		o->rank = k;
		int64_t known_ = 1;
		for (int i = 0; i < k; i++) {
			o->dim[i] = s->iv[i];
			if (o->dim[i] < -1 || o->dim[i] > ((int64_t)1 << MAXNUMEL_LOG2)) {
				ox_err(im, "invalid dimension %lld", (long long)o->dim[i]);
				return 0;
			}
			if (o->dim[i] == 0 && !ox_attr_i(n, "allowzero", 0)) {
				if (i >= x->rank) {
					ox_err(im, "dimension %d is 0 (copy), beyond the input's rank", i);
					return 0;
				}
				o->dim[i] = x->dim[i]; // 0 copies the input's dimension
			}
			if (o->dim[i] == -1 && infer < 0)
				infer = i;
			else if (o->dim[i] < 0) {
				ox_err(im, "invalid dimension %lld", (long long)o->dim[i]);
				return 0;
			} else
				known_ *= o->dim[i];
			if (known_ > ((int64_t)1 << MAXNUMEL_LOG2)) {
				ox_err(im, "the shape is too large");
				return 0;
			}
		}
		if (infer >= 0)
			o->dim[infer] = known_ ? ox_numel(x) / known_ : 0;
	} else { // Squeeze, Unsqueeze
		int sq = !strcmp(op, "Squeeze"), outrank = x->rank;
		if (!sq) {
			// Unsqueeze's axes count in the output's rank.
			const OVal *ai = n->n_input > 1 && *n->input[1] ? ox_find(im, n->input[1]) : NULL;
			const Onnx__AttributeProto *a = ox_attr(n, "axes");
			int64_t cnt = ai && ai->iv ? ox_numel(ai) : a ? (int64_t)a->n_ints : 0;
			outrank = x->rank + (int)(cnt < MAXRANK + 1 ? cnt : MAXRANK + 1);
			if (outrank > MAXRANK) {
				ox_err(im, "rank %d (at most %d)", outrank, MAXRANK);
				return 0;
			}
		}
		int k = ox_node_axes(im, n, 1, outrank, ax);
		if (k < 0)
			return 0;
		o->rank = 0;
		if (sq) {
			for (int i = 0; i < x->rank; i++) {
				if (k ? ox_has_axis(ax, k, i) : x->dim[i] == 1) {
					if (x->dim[i] != 1) {
						ox_err(im, "axis %d has dimension %lld, not 1", i, (long long)x->dim[i]);
						return 0;
					}
				} else
					o->dim[o->rank++] = x->dim[i];
			}
		} else {
			if (!k) {
				ox_err(im, "no axes");
				return 0;
			}
			for (int i = 0, j = 0; i < outrank; i++)
				o->dim[o->rank++] = ox_has_axis(ax, k, i) ? 1 : x->dim[j++];
		}
	}
	if (!ox_dims_ok(im, o, "value"))
		return 0;
	if (ox_numel(o) != ox_numel(x)) {
		ox_err(im, "%lld elements cannot take the new shape", (long long)ox_numel(x));
		return 0;
	}
	if (ox_known(x)) { // the same elements
		int64_t nn = ox_numel(o);
		if (!alloc_known(im, o))
			return 0;
		for (int64_t e = 0; e < nn; e++)
			set_k(o, e, x, e);
		return 1;
	}
	ox_st_begin(im, o->name);
	ox_E(im, "reshape($v, shape=$L)", x, o->dim, o->rank);
	ox_st_end(im);
	return 1;
}

// The value of a Constant node (a tensor, or value_float(s) /
// value_int(s)), known; 0 after an error.
int
ox_op_constant(Imp *im, const Onnx__NodeProto *n, OVal *o)
{
	const Onnx__AttributeProto *a;
	if ((a = ox_attr(n, "value")) && a->t) {
		const Onnx__TensorProto *t = a->t;
		if (!ox_dtype_ir(t->data_type)) {
			ox_err(im, "a value of ONNX dtype %d: only float (1), double (11), int64 (7) and bool "
			        "(9) are supported", t->data_type);
			return 0;
		}
		if (t->n_dims > MAXRANK) {
			ox_err(im, "rank %zu (at most %d)", t->n_dims, MAXRANK);
			return 0;
		}
		if (t->has_data_location && t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL) {
			ox_err(im, "external data is not supported yet");
			return 0;
		}
		o->dtype = t->data_type;
		o->rank = (int)t->n_dims;
		for (int i = 0; i < o->rank; i++)
			o->dim[i] = t->dims[i];
		if (!ox_dims_ok(im, o, "Constant"))
			return 0;
		if (ox_numel(o) > MAXFOLD) {
			ox_err(im, "a value of %lld elements (at most %d)", (long long)ox_numel(o), MAXFOLD);
			return 0;
		}
		if (ox_is_float(o->dtype))
			o->fv = ox_tensor_fv(t, ox_numel(o));
		else
			o->iv = ox_tensor_iv(t, ox_numel(o));
		if (!o->fv && !o->iv) {
			ox_err(im, "the value's data does not have one element per position");
			return 0;
		}
		if (!ox_numel(o)) { // known with no elements: a non-NULL array
			free(o->fv);
			free(o->iv);
			o->fv = NULL;
			o->iv = NULL;
			alloc_known(im, o);
		}
		return 1;
	}
	if ((a = ox_attr(n, "value_float")) || (a = ox_attr(n, "value_floats"))) {
		int many = !strcmp(a->name, "value_floats");
		o->dtype = ONNX_FLOAT;
		o->rank = many;
		o->dim[0] = many ? (int64_t)a->n_floats : 1;
		if (!alloc_known(im, o))
			return 0;
		for (int64_t i = 0; i < ox_numel(o); i++)
			o->fv[i] = many ? a->floats[i] : a->f;
		return 1;
	}
	if ((a = ox_attr(n, "value_int")) || (a = ox_attr(n, "value_ints"))) {
		int many = !strcmp(a->name, "value_ints");
		o->dtype = ONNX_INT64;
		o->rank = many;
		o->dim[0] = many ? (int64_t)a->n_ints : 1;
		if (!alloc_known(im, o))
			return 0;
		for (int64_t i = 0; i < ox_numel(o); i++)
			o->iv[i] = many ? a->ints[i] : a->i;
		return 1;
	}
	ox_err(im, "only a tensor, float(s) or int(s) value is supported");
	return 0;
}

// Shape, Size, ConstantOfShape, Range: always known at import (shapes are
// static); ConstantOfShape of a large shape is written as `full`.
int
ox_op_known(Imp *im, const Onnx__NodeProto *n, OVal *o)
{
	const char *op = n->op_type;
	if (!strcmp(op, "Shape") || !strcmp(op, "Size")) {
		OVal *x = ox_in_val(im, n, 0, 0);
		if (!x)
			return 0;
		o->dtype = ONNX_INT64;
		if (op[1] == 'i') {
			o->rank = 0;
			alloc_known(im, o);
			o->iv[0] = ox_numel(x);
			return 1;
		}
		int64_t s = ox_attr_i(n, "start", 0), e = ox_attr_i(n, "end", x->rank);
		ox_clamp_bounds(x->rank, &s, &e, 1);
		o->rank = 1;
		o->dim[0] = e > s ? e - s : 0;
		alloc_known(im, o);
		for (int64_t i = 0; i < o->dim[0]; i++)
			o->iv[i] = x->dim[s + i];
		return 1;
	}
	if (!strcmp(op, "ConstantOfShape")) {
		OVal *s = ox_in_val(im, n, 0, 0);
		if (!s)
			return 0;
		if (!s->iv || s->rank != 1 || ox_numel(s) > MAXRANK) {
			ox_err(im, "the shape '%s' is not known at import", s->name);
			return 0;
		}
		o->rank = (int)ox_numel(s);
		for (int i = 0; i < o->rank; i++)
			o->dim[i] = s->iv[i];
		if (!ox_dims_ok(im, o, "value"))
			return 0;
		OVal val = {.dtype = ONNX_FLOAT, .rank = 0};
		const Onnx__AttributeProto *a = ox_attr(n, "value");
		double f = 0;
		int64_t iv = 0;
		if (a && a->t) {
			if (!ox_dtype_ir(a->t->data_type)) {
				ox_err(im, "a value of ONNX dtype %d: only float (1), double (11), int64 (7) and "
				        "bool (9) are supported", a->t->data_type);
				return 0;
			}
			val.dtype = a->t->data_type;
			double *fv = ox_is_float(val.dtype) ? ox_tensor_fv(a->t, 1) : NULL;
			int64_t *ivp = ox_is_float(val.dtype) ? NULL : ox_tensor_iv(a->t, 1);
			if (!fv && !ivp) {
				ox_err(im, "the value is not one element");
				return 0;
			}
			f = fv ? *fv : (double)*ivp;
			iv = ivp ? *ivp : 0;
			free(fv);
			free(ivp);
		}
		o->dtype = val.dtype;
		if (ox_numel(o) > MAXLIT) { // data, not shape arithmetic
			ox_st_begin(im, o->name);
			if (ox_is_float(o->dtype))
				ox_E(im, "full(value=$g, shape=$L, dtype=$s)", f, o->dim, o->rank, ox_dtype_ir(o->dtype));
			else
				ox_E(im, "full(value=$d, shape=$L, dtype=$s)", iv, o->dim, o->rank, ox_dtype_ir(o->dtype));
			ox_st_end(im);
			return 1;
		}
		if (!alloc_known(im, o))
			return 0;
		for (int64_t i = 0; i < ox_numel(o); i++)
			if (o->fv)
				o->fv[i] = f;
			else
				o->iv[i] = iv;
		return 1;
	}
	// Range: ceil((limit - start) / delta) elements start + i delta.
	OVal *sv = ox_in_val(im, n, 0, 0), *lv = ox_in_val(im, n, 1, 0), *dv = ox_in_val(im, n, 2, 0);
	if (im->failed)
		return 0;
	OVal *p[3] = {sv, lv, dv};
	double f[3];
	for (int i = 0; i < 3; i++)
		if (ox_numel(p[i]) != 1 || ox_const_f(p[i], &f[i], 1) != 1) {
			ox_err(im, "'%s' is not a scalar known at import", p[i]->name);
			return 0;
		}
	o->dtype = sv->dtype;
	o->rank = 1;
	if (ox_is_float(o->dtype)) {
		// A float initializer (a parameter elsewhere) is read here: the
		// result's length depends on it.
		double s = f[0], l = f[1], d = f[2];
		double cnt = d ? ceil((l - s) / d) : -1;
		if (!d || isnan(cnt) || cnt > MAXFOLD) {
			ox_err(im, "a delta of 0, or more than %d elements", MAXFOLD);
			return 0;
		}
		o->dim[0] = cnt > 0 ? (int64_t)cnt : 0;
		if (!alloc_known(im, o))
			return 0;
		for (int64_t i = 0; i < o->dim[0]; i++)
			o->fv[i] = o->dtype == ONNX_FLOAT ? (double)(float)(s + (double)i * d) : s + (double)i * d;
		return 1;
	}
	int64_t s = ox_ki(sv, 0), l = ox_ki(lv, 0), d = ox_ki(dv, 0);
	if (!d) {
		ox_err(im, "a delta of 0");
		return 0;
	}
	double cnt = ceil(((double)l - (double)s) / (double)d);
	if (cnt > MAXFOLD) {
		ox_err(im, "more than %d elements", MAXFOLD);
		return 0;
	}
	o->dim[0] = cnt > 0 ? (int64_t)cnt : 0;
	if (!alloc_known(im, o))
		return 0;
	for (int64_t i = 0; i < o->dim[0]; i++)
		o->iv[i] = s + i * d;
	return 1;
}
