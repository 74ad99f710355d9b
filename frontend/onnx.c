// frontend/onnx.c -- an ONNX model to a Module, through IR text.
//
// The importer writes the model as fadc IR text with quoted names (ONNX's
// names are kept exactly: "0.weight", "/layer/Add_output_0") and hands it
// to the IR parser, so an import is exactly what `--emit ir` prints and
// every check of the parser (dtypes, shapes, broadcasting) applies to it.
// protobuf-c decodes the file with code generated at build time from
// Debian's onnx.proto (CMakeLists.txt); protobuf-c's header appears in this
// file only.
//
// Mapping (docs/ONNX.md):
//   - float initializers are parameters without initializer (bound by
//     --params, as PyTorch's weights are), integer initializers are folded
//     where an op needs a compile-time list (Reshape's shape), and declared
//     constants where they are data;
//   - graph inputs that are no initializer are forward's arguments, with
//     static shapes (a symbolic dimension is "not yet");
//   - each node becomes one assignment; shapes are tracked here because
//     Reshape's 0 and -1 and Flatten need the input's shape.
// Every unsupported node is listed in one error, before anything is built.
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frontend.h"
#include "onnx.pb-c.h"

enum { MAXRANK = 8, OPSET_MIN = 13, OPSET_MAX = 23 };
enum { ONNX_FLOAT = 1, ONNX_INT64 = 7, ONNX_DOUBLE = 11 };

typedef struct OVal {
	const char *name;
	int dtype; // ONNX's elem type
	int rank;
	int64_t dim[MAXRANK];
	const Onnx__TensorProto *ints; // an int64 initializer or Constant: foldable
	int isdecl; // an initializer: declared (param or const) when used as data
	int used;
} OVal;

typedef struct Imp {
	const char *path;
	FILE *diag;
	OVal *v;
	size_t nv, cv;
	FILE *body; // the forward's statements
	int failed;
	const FeOptions *o; // -D binds symbolic dimensions
	const char *size[64]; // the symbolic dimensions met, declared `let NAME = value`
	int64_t sizeval[64];
	int nsize;
} Imp;

static void
err(Imp *im, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void
err(Imp *im, const char *fmt, ...)
{
	if (im->diag && !im->failed) {
		va_list ap;
		va_start(ap, fmt);
		fprintf(im->diag, "%s: error: ", im->path);
		vfprintf(im->diag, fmt, ap);
		fputc('\n', im->diag);
		va_end(ap);
	}
	im->failed = 1;
}

// A name the IR can hold: non-empty, no control character (lex.c refuses
// them inside quotes; UTF-8 validity is the parser's to check).
static int
name_ok(const char *s)
{
	if (!s || !*s)
		return 0;
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			return 0;
	return 1;
}

static void
put_name(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			fputc('\\', f);
		fputc(*s, f);
	}
	fputc('"', f);
}

static OVal *
find(Imp *im, const char *name)
{
	for (size_t i = 0; i < im->nv; i++)
		if (!strcmp(im->v[i].name, name))
			return &im->v[i];
	return NULL;
}

static OVal *
add_val(Imp *im, const char *name)
{
	if (im->nv == im->cv) {
		im->cv = im->cv ? 2 * im->cv : 64;
		im->v = realloc(im->v, im->cv * sizeof *im->v);
		if (!im->v) {
			fprintf(stderr, "fadc: error: out of memory\n");
			exit(1);
		}
	}
	OVal *v = &im->v[im->nv++];
	memset(v, 0, sizeof *v);
	v->name = name;
	return v;
}

static const char *
dtype_ir(int t)
{
	return t == ONNX_FLOAT ? "f32" : t == ONNX_DOUBLE ? "f64" : t == ONNX_INT64 ? "i64" : NULL;
}

static void
put_type(FILE *f, const OVal *v)
{
	fprintf(f, "%s[", dtype_ir(v->dtype));
	for (int i = 0; i < v->rank; i++)
		fprintf(f, "%s%lld", i ? ", " : "", (long long)v->dim[i]);
	fputc(']', f);
}

static const Onnx__AttributeProto *
attr(const Onnx__NodeProto *n, const char *name)
{
	for (size_t i = 0; i < n->n_attribute; i++)
		if (n->attribute[i]->name && !strcmp(n->attribute[i]->name, name))
			return n->attribute[i];
	return NULL;
}

static int64_t
attr_i(const Onnx__NodeProto *n, const char *name, int64_t dflt)
{
	const Onnx__AttributeProto *a = attr(n, name);
	return a && a->has_i ? a->i : dflt;
}

static double
attr_f(const Onnx__NodeProto *n, const char *name, double dflt)
{
	const Onnx__AttributeProto *a = attr(n, name);
	return a && a->has_f ? a->f : dflt;
}

static const char *const supported[] = {
    "Gemm", "MatMul", "Add", "Sub", "Mul", "Div", "Pow", "Relu", "Tanh", "Sigmoid", "Neg", "Exp",
    "Log", "Sqrt", "Erf", "Abs", "LeakyRelu", "Softmax", "LogSoftmax", "Reshape", "Transpose",
    "Flatten", "Squeeze", "Unsqueeze", "Concat", "ReduceSum", "ReduceMean", "ReduceMax",
    "Identity", "Constant", NULL};

static int tensor_ints(const Onnx__TensorProto *t, int64_t *out, int max);

// Unary ops that are one IR op of the same meaning.
static const char *
unary_ir(const char *op)
{
	static const char *const map[][2] = {{"Relu", "relu"}, {"Tanh", "tanh"}, {"Sigmoid", "sigmoid"},
	                                     {"Neg", "neg"},   {"Exp", "exp"},   {"Log", "log"},
	                                     {"Sqrt", "sqrt"}, {"Erf", "erf"},   {"Abs", "abs"}};
	for (size_t i = 0; i < sizeof map / sizeof *map; i++)
		if (!strcmp(op, map[i][0]))
			return map[i][1];
	return NULL;
}

// The axes of a node, from its input i (an int64 constant: opset 13's
// ReduceSum, Squeeze and Unsqueeze, and every Reduce from opset 18) or else
// its attribute "axes"; each made non-negative against rank.  The count, 0
// when there are none, -1 after an error.
static int
node_axes(Imp *im, const Onnx__NodeProto *n, size_t i, int rank, int64_t *ax)
{
	int k = 0;
	const char *nname = n->name ? n->name : "";
	if (i < n->n_input && *n->input[i]) {
		const OVal *a = find(im, n->input[i]);
		if (!a || !a->ints) {
			err(im, "node '%s' (%s): the axes '%s' are not a constant (not folded yet)", nname,
			    n->op_type, n->input[i]);
			return -1;
		}
		k = tensor_ints(a->ints, ax, MAXRANK);
	} else {
		const Onnx__AttributeProto *a = attr(n, "axes");
		if (a) {
			k = a->n_ints > MAXRANK ? -1 : (int)a->n_ints;
			for (int j = 0; j < k; j++)
				ax[j] = a->ints[j];
		}
	}
	if (k < 0) {
		err(im, "node '%s' (%s): more than %d axes", nname, n->op_type, MAXRANK);
		return -1;
	}
	for (int j = 0; j < k; j++) {
		if (ax[j] < -rank || ax[j] >= rank) {
			err(im, "node '%s' (%s): axis %lld is out of range for rank %d", nname, n->op_type,
			    (long long)ax[j], rank);
			return -1;
		}
		if (ax[j] < 0)
			ax[j] += rank;
		for (int l = 0; l < j; l++)
			if (ax[l] == ax[j]) {
				err(im, "node '%s' (%s): axis %lld repeated", nname, n->op_type, (long long)ax[j]);
				return -1;
			}
	}
	return k;
}

static int
has_axis(const int64_t *ax, int k, int64_t a)
{
	for (int i = 0; i < k; i++)
		if (ax[i] == a)
			return 1;
	return 0;
}

static int
is_supported(const Onnx__NodeProto *n)
{
	if (n->domain && *n->domain && strcmp(n->domain, "ai.onnx"))
		return 0;
	for (int i = 0; supported[i]; i++)
		if (!strcmp(n->op_type, supported[i]))
			return 1;
	return 0;
}

// The elements of an int64 tensor (int64_data or raw little-endian bytes).
static int
tensor_ints(const Onnx__TensorProto *t, int64_t *out, int max)
{
	size_t n = t->n_int64_data;
	if (t->has_raw_data)
		n = t->raw_data.len / 8;
	if (n > (size_t)max)
		return -1;
	for (size_t i = 0; i < n; i++) {
		if (t->has_raw_data)
			memcpy(&out[i], t->raw_data.data + 8 * i, 8);
		else
			out[i] = t->int64_data[i];
	}
	return (int)n;
}

// An input of node n: the value, checked to exist.
static OVal *
input(Imp *im, const Onnx__NodeProto *n, size_t i)
{
	if (i >= n->n_input || !*n->input[i]) {
		err(im, "node '%s' (%s): input %zu is missing", n->name ? n->name : "", n->op_type, i);
		return NULL;
	}
	OVal *v = find(im, n->input[i]);
	if (!v)
		err(im, "node '%s' (%s): input '%s' is not defined before it", n->name ? n->name : "",
		    n->op_type, n->input[i]);
	return v;
}

// Writes the use of a value as data (an int64 initializer becomes a
// declared constant).
static void
use(Imp *im, OVal *v)
{
	v->used = 1;
	put_name(im->body, v->name);
}

// Dimensions are checked where they enter (dims_ok), so products stay
// far from overflowing int64.
static int64_t
numel(const OVal *v)
{
	int64_t n = 1;
	for (int i = 0; i < v->rank; i++)
		n *= v->dim[i];
	return n;
}

enum { MAXNUMEL_LOG2 = 48 };

// A shape from the file: every dimension >= 0 and the element count below
// 2^48 (no tensor fadc runs is near that; the bound keeps arithmetic exact).
static int
dims_ok(Imp *im, const OVal *v, const char *what)
{
	int64_t n = 1;
	for (int i = 0; i < v->rank; i++) {
		if (v->dim[i] < 0 || v->dim[i] > ((int64_t)1 << MAXNUMEL_LOG2) ||
		    (v->dim[i] && n > ((int64_t)1 << MAXNUMEL_LOG2) / v->dim[i])) {
			err(im, "%s '%s': dimension %d (%lld) is negative or the tensor is too large", what,
			    v->name, i, (long long)v->dim[i]);
			return 0;
		}
		n *= v->dim[i];
	}
	return 1;
}

// One node: its statement, and its output's shape.  0 after an error.
static int
import_node(Imp *im, const Onnx__NodeProto *n)
{
	const char *op = n->op_type, *nname = n->name ? n->name : "";
	if (n->n_output != 1 || !name_ok(n->output[0])) {
		err(im, "node '%s' (%s): one named output expected, not yet more", nname, op);
		return 0;
	}
	OVal o = {.name = n->output[0]};
	FILE *f = im->body;
	if (!strcmp(op, "Constant")) {
		const Onnx__AttributeProto *a = attr(n, "value");
		if (!a || !a->t || a->t->data_type != ONNX_INT64) {
			err(im, "node '%s' (Constant): only an int64 'value' is supported yet (the IR has no "
			        "tensor literal)", nname);
			return 0;
		}
		if (a->t->n_dims > MAXRANK) {
			err(im, "node '%s' (Constant): rank %zu (at most %d)", nname, a->t->n_dims, MAXRANK);
			return 0;
		}
		o.dtype = ONNX_INT64;
		o.rank = (int)a->t->n_dims;
		for (int i = 0; i < o.rank; i++)
			o.dim[i] = a->t->dims[i];
		o.ints = a->t;
		if (!dims_ok(im, &o, "Constant"))
			return 0;
		*add_val(im, o.name) = o;
		return 1; // folded where used; data use is refused below
	}
	OVal *x = input(im, n, 0);
	if (!x)
		return 0;
	if (x->ints && !x->isdecl) {
		err(im, "node '%s' (%s): an integer Constant as data is not supported yet", nname, op);
		return 0;
	}
	o.dtype = x->dtype;
	fputs("  ", f);
	put_name(f, o.name);
	fputs(" = ", f);
	if (!strcmp(op, "Add") || !strcmp(op, "Sub") || !strcmp(op, "Mul") || !strcmp(op, "Div") ||
	    !strcmp(op, "Pow")) {
		OVal *y = input(im, n, 1);
		if (!y)
			return 0;
		if (y->ints && !y->isdecl) {
			err(im, "node '%s' (%s): an integer Constant as data is not supported yet", nname, op);
			return 0;
		}
		// NumPy broadcasting, as ONNX's multidirectional broadcasting.
		o.rank = x->rank > y->rank ? x->rank : y->rank;
		for (int i = 0; i < o.rank; i++) {
			int ix = i - (o.rank - x->rank), iy = i - (o.rank - y->rank);
			int64_t a = ix >= 0 ? x->dim[ix] : 1, b = iy >= 0 ? y->dim[iy] : 1;
			o.dim[i] = a == 1 ? b : a;
		}
		fputs(!strcmp(op, "Add") ? "add(" : !strcmp(op, "Sub") ? "sub(" : !strcmp(op, "Mul") ? "mul(" : !strcmp(op, "Div") ? "div(" : "pow(", f);
		use(im, x);
		fputs(", ", f);
		use(im, y);
		fputc(')', f);
	} else if (unary_ir(op) || !strcmp(op, "Identity")) {
		o.rank = x->rank;
		memcpy(o.dim, x->dim, sizeof o.dim);
		fprintf(f, "%s(", unary_ir(op) ? unary_ir(op) : "");
		use(im, x);
		fputs(!strcmp(op, "Identity") ? " + 0)" : ")", f); // + 0: a value, not a view
	} else if (!strcmp(op, "LeakyRelu")) {
		// relu(x) - alpha relu(-x): x for x > 0, alpha x below, for any alpha.
		o.rank = x->rank;
		memcpy(o.dim, x->dim, sizeof o.dim);
		fputs("sub(relu(", f);
		use(im, x);
		fprintf(f, "), mul(%.9g, relu(neg(", attr_f(n, "alpha", 0.01));
		use(im, x);
		fputs("))))", f);
	} else if (!strcmp(op, "Softmax") || !strcmp(op, "LogSoftmax")) {
		o.rank = x->rank;
		memcpy(o.dim, x->dim, sizeof o.dim);
		fputs(!strcmp(op, "Softmax") ? "softmax(" : "log_softmax(", f);
		use(im, x);
		fprintf(f, ", axis=%lld)", (long long)attr_i(n, "axis", -1)); // opset 13: one axis
	} else if (!strcmp(op, "MatMul") || !strcmp(op, "Gemm")) {
		OVal *y = input(im, n, 1);
		if (!y)
			return 0;
		int gemm = !strcmp(op, "Gemm");
		int ta = gemm && attr_i(n, "transA", 0), tb = gemm && attr_i(n, "transB", 0);
		if (x->rank < 2 || y->rank != 2 || (gemm && x->rank != 2)) {
			err(im, "node '%s' (%s): operands of rank %d and %d: only (..., M, K) @ (K, N) is "
			        "supported yet", nname, op, x->rank, y->rank);
			return 0;
		}
		o.rank = x->rank;
		memcpy(o.dim, x->dim, sizeof o.dim);
		if (ta)
			o.dim[0] = x->dim[1];
		o.dim[o.rank - 1] = tb ? y->dim[0] : y->dim[1];
		// Gemm: alpha A' B' + beta C, with C broadcast to (M, N).
		double alpha = attr_f(n, "alpha", 1), beta = attr_f(n, "beta", 1);
		OVal *c = gemm && n->n_input > 2 && *n->input[2] ? input(im, n, 2) : NULL;
		if (gemm && n->n_input > 2 && *n->input[2] && !c)
			return 0;
		if (c)
			fputs("add(", f);
		if (alpha != 1)
			fprintf(f, "mul(%.17g, ", alpha);
		fputs("matmul(", f);
		fputs(ta ? "permute(" : "", f);
		use(im, x);
		fputs(ta ? ", perm=[1, 0]), " : ", ", f);
		fputs(tb ? "permute(" : "", f);
		use(im, y);
		fputs(tb ? ", perm=[1, 0]))" : ")", f);
		if (alpha != 1)
			fputc(')', f);
		if (c) {
			fputs(", ", f);
			if (beta != 1)
				fprintf(f, "mul(%.17g, ", beta);
			use(im, c);
			fputs(beta != 1 ? "))" : ")", f);
		}
	} else if (!strncmp(op, "Reduce", 6)) {
		int64_t ax[MAXRANK];
		int k = node_axes(im, n, 1, x->rank, ax);
		if (k < 0)
			return 0;
		int keep = (int)attr_i(n, "keepdims", 1);
		if (!k && attr_i(n, "noop_with_empty_axes", 0)) {
			o.rank = x->rank; // no axes: the identity
			memcpy(o.dim, x->dim, sizeof o.dim);
			fputs("(", f);
			use(im, x);
			fputs(" + 0)", f);
		} else {
			if (!k) // no axes: every axis
				for (; k < x->rank; k++)
					ax[k] = k;
			for (int i = 0; i < x->rank; i++)
				if (!has_axis(ax, k, i))
					o.dim[o.rank++] = x->dim[i];
				else if (keep)
					o.dim[o.rank++] = 1;
			fprintf(f, "%s(", !strcmp(op, "ReduceSum") ? "sum" : !strcmp(op, "ReduceMean") ? "mean" : "max");
			use(im, x);
			fputs(", axes=[", f);
			for (int i = 0; i < k; i++)
				fprintf(f, "%s%lld", i ? ", " : "", (long long)ax[i]);
			fprintf(f, "], keepdim=%d)", keep != 0);
		}
	} else if (!strcmp(op, "Concat")) {
		int64_t axis = attr_i(n, "axis", 0);
		if (axis < -x->rank || axis >= x->rank) {
			err(im, "node '%s' (Concat): axis %lld is out of range for rank %d", nname, (long long)axis, x->rank);
			return 0;
		}
		if (axis < 0)
			axis += x->rank;
		o.rank = x->rank;
		memcpy(o.dim, x->dim, sizeof o.dim);
		o.dim[axis] = 0;
		fputs("concat(", f);
		for (size_t i = 0; i < n->n_input; i++) {
			OVal *y = input(im, n, i);
			if (!y)
				return 0;
			if ((y->ints && !y->isdecl) || y->rank != x->rank) {
				err(im, "node '%s' (Concat): input '%s' is an integer Constant or of another rank", nname, y->name);
				return 0;
			}
			o.dim[axis] += y->dim[axis];
			use(im, y);
			fputs(", ", f);
		}
		fprintf(f, "axis=%lld)", (long long)axis);
	} else if (!strcmp(op, "Squeeze") || !strcmp(op, "Unsqueeze")) {
		int sq = !strcmp(op, "Squeeze");
		int64_t ax[MAXRANK];
		int outrank = x->rank;
		if (!sq) {
			// Unsqueeze's axes count in the output's rank.
			const Onnx__AttributeProto *a = attr(n, "axes");
			const OVal *ai = n->n_input > 1 && *n->input[1] ? find(im, n->input[1]) : NULL;
			int64_t tmp[MAXRANK];
			int cnt = ai && ai->ints ? tensor_ints(ai->ints, tmp, MAXRANK) : a ? (int)a->n_ints : 0;
			outrank = x->rank + (cnt > 0 ? cnt : 0);
			if (outrank > MAXRANK) {
				err(im, "node '%s' (Unsqueeze): rank %d (at most %d)", nname, outrank, MAXRANK);
				return 0;
			}
		}
		int k = node_axes(im, n, 1, outrank, ax);
		if (k < 0)
			return 0;
		if (sq) {
			for (int i = 0; i < x->rank; i++) {
				if (k ? has_axis(ax, k, i) : x->dim[i] == 1) {
					if (x->dim[i] != 1) {
						err(im, "node '%s' (Squeeze): axis %d has dimension %lld, not 1", nname, i, (long long)x->dim[i]);
						return 0;
					}
				} else
					o.dim[o.rank++] = x->dim[i];
			}
		} else {
			if (!k) {
				err(im, "node '%s' (Unsqueeze): no axes", nname);
				return 0;
			}
			for (int i = 0, j = 0; i < outrank; i++)
				o.dim[o.rank++] = has_axis(ax, k, i) ? 1 : x->dim[j++];
		}
		fputs("reshape(", f);
		use(im, x);
		fputs(", shape=[", f);
		for (int i = 0; i < o.rank; i++)
			fprintf(f, "%s%lld", i ? ", " : "", (long long)o.dim[i]);
		fputs("])", f);
	} else if (!strcmp(op, "Transpose")) {
		const Onnx__AttributeProto *a = attr(n, "perm");
		o.rank = x->rank;
		fputs("permute(", f);
		use(im, x);
		fputs(", perm=[", f);
		for (int i = 0; i < x->rank; i++) {
			int64_t p = a ? (i < (int)a->n_ints ? a->ints[i] : -1) : x->rank - 1 - i;
			if (p < 0 || p >= x->rank || (a && (int)a->n_ints != x->rank)) {
				err(im, "node '%s' (Transpose): 'perm' is not a permutation of %d axes", nname, x->rank);
				return 0;
			}
			o.dim[i] = x->dim[p];
			fprintf(f, "%s%lld", i ? ", " : "", (long long)p);
		}
		fputs("])", f);
	} else if (!strcmp(op, "Reshape") || !strcmp(op, "Flatten")) {
		if (!strcmp(op, "Flatten")) {
			int64_t ax = attr_i(n, "axis", 1);
			if (ax < 0)
				ax += x->rank;
			if (ax < 0 || ax > x->rank) {
				err(im, "node '%s' (Flatten): axis %lld is out of range for rank %d", nname,
				    (long long)attr_i(n, "axis", 1), x->rank);
				return 0;
			}
			o.rank = 2;
			o.dim[0] = o.dim[1] = 1;
			for (int i = 0; i < x->rank; i++)
				o.dim[i >= ax] *= x->dim[i];
		} else {
			OVal *s = input(im, n, 1);
			if (!s)
				return 0;
			if (!s->ints) {
				err(im, "node '%s' (Reshape): the shape '%s' is not a constant (shape "
				        "computations are not folded yet)", nname, s->name);
				return 0;
			}
			int k = tensor_ints(s->ints, o.dim, MAXRANK), infer = -1;
			if (k < 0) {
				err(im, "node '%s' (Reshape): more than %d dimensions", nname, MAXRANK);
				return 0;
			}
			o.rank = k;
			int64_t known = 1;
			for (int i = 0; i < k; i++) {
				if (o.dim[i] < -1 || o.dim[i] > ((int64_t)1 << MAXNUMEL_LOG2)) {
					err(im, "node '%s' (Reshape): invalid dimension %lld", nname, (long long)o.dim[i]);
					return 0;
				}
				if (o.dim[i] == 0 && !attr_i(n, "allowzero", 0) && i < x->rank)
					o.dim[i] = x->dim[i]; // 0 copies the input's dimension
				if (o.dim[i] == -1 && infer < 0)
					infer = i;
				else if (o.dim[i] < 0) {
					err(im, "node '%s' (Reshape): invalid dimension %lld", nname, (long long)o.dim[i]);
					return 0;
				} else
					known *= o.dim[i];
			}
			if (infer >= 0)
				o.dim[infer] = known ? numel(x) / known : 0;
			if (!dims_ok(im, &o, "Reshape"))
				return 0;
		}
		if (numel(&o) != numel(x)) {
			err(im, "node '%s' (%s): %lld elements cannot take the new shape", nname, op,
			    (long long)numel(x));
			return 0;
		}
		fputs("reshape(", f);
		use(im, x);
		fputs(", shape=[", f);
		for (int i = 0; i < o.rank; i++)
			fprintf(f, "%s%lld", i ? ", " : "", (long long)o.dim[i]);
		fputs("])", f);
	}
	// The node, in a comment on its statement's line: a parser error shows
	// the line, so it names the node (control characters as '?', so that a
	// name cannot end the comment).
	fputs("  # node '", f);
	for (const char *c = nname; *c; c++)
		fputc((unsigned char)*c < 0x20 || *c == 0x7f ? '?' : *c, f);
	fprintf(f, "' (%s)\n", op);
	*add_val(im, o.name) = o;
	return 1;
}

// The value of symbolic dimension name (dimension k of input in): from
// -D name=VALUE, which the parser then checks again against the `let` this
// declares.  -1 after an error.
static int64_t
sym_dim(Imp *im, const char *name, size_t k, const char *in)
{
	for (int i = 0; i < im->nsize; i++)
		if (!strcmp(im->size[i], name))
			return im->sizeval[i];
	int plain = (name[0] >= 'A' && name[0] <= 'Z') || (name[0] >= 'a' && name[0] <= 'z') || name[0] == '_';
	for (const char *c = name; *c && plain; c++)
		plain = (*c >= 'A' && *c <= 'Z') || (*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '_';
	if (!plain || im->nsize == 64) {
		err(im, "dimension %zu of graph input '%s' is symbolic ('%s'), which -D cannot bind: "
		        "not supported yet", k, in, name);
		return -1;
	}
	const char *val = NULL;
	size_t n = strlen(name);
	for (int i = 0; im->o && i < im->o->ndefines; i++) {
		const char *d = im->o->defines[i];
		if (!strncmp(d, name, n) && d[n] == '=')
			val = d + n + 1;
	}
	if (!val) {
		err(im, "dimension %zu of graph input '%s' is symbolic ('%s'): bind it with -D %s=VALUE",
		    k, in, name, name);
		return -1;
	}
	char *end;
	errno = 0;
	long long x = strtoll(val, &end, 10);
	if (!*val || *end || errno == ERANGE || x < 0 || x > ((int64_t)1 << MAXNUMEL_LOG2)) {
		err(im, "-D %s=%s: the value must be a non-negative integer", name, val);
		return -1;
	}
	im->size[im->nsize] = name;
	im->sizeval[im->nsize++] = x;
	return x;
}

// A tensor type of a graph input or initializer into v; 0 after an error.
static int
take_dims(Imp *im, OVal *v, int dtype, size_t rank, const char *what)
{
	if (!dtype_ir(dtype)) {
		err(im, "%s '%s' has ONNX dtype %d: only float (1), double (11) and int64 (7) are "
		        "supported", what, v->name, dtype);
		return 0;
	}
	if (rank > MAXRANK) {
		err(im, "%s '%s' has rank %zu (at most %d)", what, v->name, rank, MAXRANK);
		return 0;
	}
	v->dtype = dtype;
	v->rank = (int)rank;
	return 1;
}

static char *
import(Imp *im, const Onnx__ModelProto *m, size_t *len)
{
	int64_t opset = -1;
	for (size_t i = 0; i < m->n_opset_import; i++) {
		const char *d = m->opset_import[i]->domain;
		if (!d || !*d || !strcmp(d, "ai.onnx"))
			opset = m->opset_import[i]->version;
	}
	if (opset < OPSET_MIN || opset > OPSET_MAX) {
		err(im, "the model's opset %lld is out of the supported range %d to %d", (long long)opset,
		    OPSET_MIN, OPSET_MAX);
		return NULL;
	}
	const Onnx__GraphProto *g = m->graph;
	if (!g) {
		err(im, "the model has no graph");
		return NULL;
	}
	// Every unsupported node, in one message.
	int nbad = 0;
	for (size_t i = 0; i < g->n_node; i++)
		if (!g->node[i]->op_type || !is_supported(g->node[i]))
			nbad++;
	if (nbad) {
		if (im->diag) {
			fprintf(im->diag, "%s: error: %d unsupported node%s:", im->path, nbad, nbad > 1 ? "s" : "");
			for (size_t i = 0; i < g->n_node; i++) {
				const Onnx__NodeProto *n = g->node[i];
				if (!n->op_type || !is_supported(n))
					fprintf(im->diag, " '%s' (%s, domain '%s')%s", n->name ? n->name : "",
					        n->op_type ? n->op_type : "", n->domain ? n->domain : "",
					        --nbad ? "," : "\n");
			}
		}
		im->failed = 1;
		return NULL;
	}
	char *declbuf = NULL, *bodybuf = NULL;
	size_t decllen = 0, bodylen = 0;
	FILE *decls = open_memstream(&declbuf, &decllen);
	im->body = open_memstream(&bodybuf, &bodylen);
	for (size_t i = 0; i < g->n_initializer && !im->failed; i++) {
		const Onnx__TensorProto *t = g->initializer[i];
		if (!name_ok(t->name)) {
			err(im, "initializer %zu has an empty name or a control character in it", i);
			break;
		}
		if (t->has_data_location && t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL) {
			err(im, "initializer '%s': external data is not supported yet", t->name);
			break;
		}
		OVal *v = add_val(im, t->name);
		if (!take_dims(im, v, t->data_type, t->n_dims, "initializer"))
			break;
		for (size_t k = 0; k < t->n_dims; k++)
			v->dim[k] = t->dims[k];
		if (!dims_ok(im, v, "initializer"))
			break;
		v->isdecl = 1;
		if (t->data_type == ONNX_INT64)
			v->ints = t;
	}
	fputs("def forward(", im->body);
	int first = 1;
	for (size_t i = 0; i < g->n_input && !im->failed; i++) {
		const Onnx__ValueInfoProto *in = g->input[i];
		if (!name_ok(in->name)) {
			err(im, "graph input %zu has an empty name or a control character in it", i);
			break;
		}
		if (find(im, in->name))
			continue; // an initializer listed as an input (IR < 4)
		const Onnx__TypeProto *ty = in->type;
		if (!ty || ty->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !ty->tensor_type->shape) {
			err(im, "graph input '%s' is not a tensor of known rank", in->name);
			break;
		}
		const Onnx__TensorShapeProto *sh = ty->tensor_type->shape;
		OVal *v = add_val(im, in->name);
		if (!take_dims(im, v, ty->tensor_type->elem_type, sh->n_dim, "graph input"))
			break;
		for (size_t k = 0; k < sh->n_dim; k++) {
			const Onnx__TensorShapeProto__Dimension *d = sh->dim[k];
			if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM && d->dim_param &&
			    *d->dim_param) {
				if ((v->dim[k] = sym_dim(im, d->dim_param, k, in->name)) < 0)
					break;
			} else if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE) {
				v->dim[k] = d->dim_value;
			} else {
				err(im, "dimension %zu of graph input '%s' has neither a value nor a name", k, in->name);
				break;
			}
		}
		if (!im->failed && !dims_ok(im, v, "graph input"))
			break;
		fputs(first ? "" : ", ", im->body);
		first = 0;
		put_name(im->body, v->name);
		fputs(": ", im->body);
		put_type(im->body, v);
	}
	fputs(") {\n", im->body);
	for (size_t i = 0; i < g->n_node && !im->failed; i++)
		import_node(im, g->node[i]);
	for (size_t i = 0; i < g->n_output && !im->failed; i++) {
		OVal *v = g->output[i]->name ? find(im, g->output[i]->name) : NULL;
		if (!v) {
			err(im, "graph output '%s' is not computed by the graph", g->output[i]->name ? g->output[i]->name : "");
			break;
		}
		if (v->ints && !v->isdecl) {
			err(im, "graph output '%s' is an integer Constant: not supported yet", v->name);
			break;
		}
		fputs(i ? ", " : "  return ", im->body);
		use(im, v);
		fputs(" as ", im->body);
		put_name(im->body, v->name);
	}
	if (!g->n_output)
		err(im, "the graph has no output");
	fputs("\n}\n", im->body);
	// The sizes -D binds, then the initializers used as data, in the file's
	// order.
	for (int i = 0; i < im->nsize; i++)
		fprintf(decls, "let %s = %lld\n", im->size[i], (long long)im->sizeval[i]);
	for (size_t i = 0; i < im->nv; i++) {
		OVal *v = &im->v[i];
		if (!v->isdecl || !v->used)
			continue;
		fputs(v->dtype == ONNX_INT64 ? "const " : "param ", decls);
		put_name(decls, v->name);
		fputs(": ", decls);
		put_type(decls, v);
		fputc('\n', decls);
	}
	fclose(decls);
	fclose(im->body);
	char *text = NULL;
	if (!im->failed && declbuf && bodybuf && (text = malloc(decllen + bodylen + 64))) {
		*len = (size_t)sprintf(text, "# imported from ONNX\n%s\n%s", declbuf, bodybuf);
	}
	free(declbuf);
	free(bodybuf);
	return text;
}

// Reads and decodes path; NULL after a diagnostic.
static Onnx__ModelProto *
load(Imp *im)
{
	FILE *f = fopen(im->path, "rb");
	if (!f) {
		err(im, "cannot open: %s", strerror(errno));
		return NULL;
	}
	uint8_t *buf = NULL;
	size_t n = 0, cap = 0;
	for (;;) {
		if (n == cap) {
			uint8_t *nb = realloc(buf, cap = cap ? 2 * cap : 1 << 16);
			if (!nb) {
				free(buf);
				fclose(f);
				err(im, "out of memory");
				return NULL;
			}
			buf = nb;
		}
		size_t k = fread(buf + n, 1, cap - n, f);
		n += k;
		if (k == 0)
			break;
	}
	int rerr = ferror(f);
	fclose(f);
	if (rerr) {
		free(buf);
		err(im, "cannot read");
		return NULL;
	}
	Onnx__ModelProto *m = onnx__model_proto__unpack(NULL, n, buf);
	free(buf);
	if (!m)
		err(im, "not an ONNX model: a malformed or truncated protobuf");
	return m;
}

Module *
fe_onnx_import(const char *path, const FeOptions *o)
{
	Imp im = {.path = path, .diag = o ? o->diag : stderr, .o = o};
	Onnx__ModelProto *m = load(&im);
	if (!m)
		return NULL;
	size_t len = 0;
	char *text = import(&im, m, &len);
	onnx__model_proto__free_unpacked(m, NULL);
	free(im.v);
	if (!text)
		return NULL;
	Module *mod = fe_parse_string(path, text, len, o);
	free(text);
	return mod;
}

// The data of initializer t (n elements of size bytes) from raw_data or
// the typed field (floats, doubles or int64s; elsize 4, 8, 8) into a
// malloc'ed block; NULL with *why set when it has the wrong length.
static void *
tensor_data(const Onnx__TensorProto *t, int64_t n, size_t elsize, const char **why)
{
	const void *src;
	size_t have;
	if (t->has_raw_data) {
		src = t->raw_data.data;
		have = t->raw_data.len;
	} else if (t->data_type == ONNX_FLOAT) {
		src = t->float_data;
		have = t->n_float_data * 4;
	} else if (t->data_type == ONNX_DOUBLE) {
		src = t->double_data;
		have = t->n_double_data * 8;
	} else {
		src = t->int64_data;
		have = t->n_int64_data * 8;
	}
	if (have != (size_t)n * elsize) {
		*why = "its data does not have one value per element";
		return NULL;
	}
	void *d = malloc(have ? have : 1);
	if (!d) {
		*why = "out of memory";
		return NULL;
	}
	if (have)
		memcpy(d, src, have); // little-endian, as ONNX stores raw data and as fadc runs
	return d;
}

int
fe_onnx_initializers(const char *path, const FeOptions *o, FeTensor **out, int *nout)
{
	Imp im = {.path = path, .diag = o ? o->diag : stderr, .o = o};
	*out = NULL;
	*nout = 0;
	Onnx__ModelProto *m = load(&im);
	if (!m)
		return 1;
	size_t len = 0;
	char *text = import(&im, m, &len); // which initializers the model declares
	free(text);
	FeTensor *ts = im.failed ? NULL : calloc(im.nv + 1, sizeof *ts);
	int n = 0;
	if (!im.failed && !ts)
		err(&im, "out of memory");
	for (size_t i = 0; i < im.nv && !im.failed; i++) {
		const OVal *v = &im.v[i];
		if (!v->isdecl || !v->used)
			continue;
		const Onnx__TensorProto *t = NULL;
		for (size_t k = 0; k < m->graph->n_initializer && !t; k++)
			if (m->graph->initializer[k]->name && !strcmp(m->graph->initializer[k]->name, v->name))
				t = m->graph->initializer[k];
		const char *why = NULL;
		FeTensor *d = &ts[n];
		d->dtype = v->dtype == ONNX_FLOAT ? DT_F32 : v->dtype == ONNX_DOUBLE ? DT_F64 : DT_I64;
		d->rank = v->rank;
		memcpy(d->dim, v->dim, sizeof d->dim);
		d->name = strdup(v->name);
		d->data = tensor_data(t, numel(v), v->dtype == ONNX_FLOAT ? 4 : 8, &why);
		if (!d->name || !d->data) {
			free(d->name);
			free(d->data);
			err(&im, "initializer '%s': %s", v->name, why ? why : "out of memory");
			break;
		}
		n++;
	}
	onnx__model_proto__free_unpacked(m, NULL);
	free(im.v);
	if (im.failed) {
		fe_onnx_free(ts, n);
		return 1;
	}
	*out = ts;
	*nout = n;
	return 0;
}

void
fe_onnx_free(FeTensor *ts, int n)
{
	for (int i = 0; ts && i < n; i++) {
		free(ts[i].name);
		free(ts[i].data);
	}
	free(ts);
}
