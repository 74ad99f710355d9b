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
//     --params, as PyTorch's weights are); integer initializers are
//     constants: known here (folded), and declared constants where data;
//   - graph inputs that are no initializer are forward's arguments, with
//     static shapes (-D binds a symbolic dimension);
//   - every value's shape is tracked here, and every value that is known
//     at import (Constant, Shape, the shape arithmetic exporters leave:
//     Gather/Concat/Unsqueeze/Cast/Add/... of known values, Range,
//     ConstantOfShape) is folded: its elements are computed here, and only
//     a known value used as data is written, as a literal (`full`, or a
//     concat of them);
//   - each other node becomes assignments of existing ops and prelude
//     composites (Conv is conv, BatchNormalization and LayerNormalization
//     are written out, ConvTranspose is conv's adjoint conv_input_grad);
//     LSTM, GRU and RNN are scans of a step function written before
//     forward.
// Every unsupported node is listed in one error, before anything is built.
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frontend.h"
#include "onnx.pb-c.h"

enum { MAXRANK = 8, OPSET_MIN = 13, OPSET_MAX = 27 };
enum { ONNX_FLOAT = 1, ONNX_INT64 = 7, ONNX_BOOL = 9, ONNX_DOUBLE = 11 };
// A known value is folded up to MAXFOLD elements; one used as data is
// written as a literal of up to MAXLIT distinct elements, else declared a
// constant bound from the file like an initializer (--params model.onnx).
enum { MAXFOLD = 1 << 20, MAXLIT = 256, MAXNUMEL_LOG2 = 48 };

typedef struct OVal {
	const char *name;
	int alias; // 1 + the index of the value this one is (Identity); 0: itself
	int dtype; // ONNX's elem type
	int rank;
	int64_t dim[MAXRANK];
	int64_t *iv; // known at import: the elements of an int64 or bool value
	double *fv;  // known at import: the elements of a float value
	const Onnx__TensorProto *init; // the initializer this value is
	int isdecl;  // declared (param or const) when used as data
	int used;
	int emitted; // a known value written as a statement
} OVal;

typedef struct Imp {
	const char *path;
	FILE *diag;
	OVal *v;
	size_t nv, cv;
	FILE *body; // the forward's statements
	FILE *defs; // the functions before it (the step functions of recurrent ops)
	int ndefs;
	FILE *cur;  // the statements of the node being imported
	int failed;
	int opset;
	const FeOptions *o; // -D binds symbolic dimensions
	const char *size[64]; // the symbolic dimensions met, declared `let NAME = value`
	int64_t sizeval[64];
	int nsize;
	const Onnx__NodeProto *node; // for messages
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
		if (im->node)
			fprintf(im->diag, "node '%s' (%s): ", im->node->name ? im->node->name : "",
			        im->node->op_type);
		vfprintf(im->diag, fmt, ap);
		fputc('\n', im->diag);
		va_end(ap);
	}
	im->failed = 1;
}

static void *
xcalloc(size_t n, size_t size)
{
	void *p = calloc(n ? n : 1, size);
	if (!p) {
		fprintf(stderr, "fadc: error: out of memory\n");
		exit(1);
	}
	return p;
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

// A number as the IR reads it back exactly (inf and nan are names).
static void
put_num(FILE *f, double x)
{
	if (isnan(x))
		fputs("nan", f);
	else if (isinf(x))
		fputs(x > 0 ? "inf" : "-inf", f);
	else
		fprintf(f, "%.17g", x);
}

static void
put_list(FILE *f, const int64_t *a, int k)
{
	fputc('[', f);
	for (int i = 0; i < k; i++)
		fprintf(f, "%s%lld", i ? ", " : "", (long long)a[i]);
	fputc(']', f);
}

static OVal *
find(Imp *im, const char *name)
{
	for (size_t i = im->nv; i-- > 0;) // the latest of a name (a graph may not repeat one)
		if (!strcmp(im->v[i].name, name))
			return &im->v[i];
	return NULL;
}

static OVal *
add_val(Imp *im, const OVal *src)
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
	*v = *src;
	return v;
}

static const char *
dtype_ir(int t)
{
	switch (t) {
	case ONNX_FLOAT: return "f32";
	case ONNX_DOUBLE: return "f64";
	case ONNX_INT64: return "i64";
	case ONNX_BOOL: return "bool";
	}
	return NULL;
}

static int
is_float(int t)
{
	return t == ONNX_FLOAT || t == ONNX_DOUBLE;
}

static void
put_type(FILE *f, const OVal *v)
{
	fprintf(f, "%s", dtype_ir(v->dtype));
	put_list(f, v->dim, v->rank);
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

// A string attribute as a C string in buf (ONNX strings are bytes).
static const char *
attr_s(const Onnx__NodeProto *n, const char *name, const char *dflt, char *buf, size_t cap)
{
	const Onnx__AttributeProto *a = attr(n, name);
	if (!a || !a->has_s)
		return dflt;
	size_t k = a->s.len < cap - 1 ? a->s.len : cap - 1;
	memcpy(buf, a->s.data, k);
	buf[k] = 0;
	return buf;
}

// An ints attribute into out (at most max); its count, -1 when absent or
// longer than max.
static int
attr_ints(const Onnx__NodeProto *n, const char *name, int64_t *out, int max)
{
	const Onnx__AttributeProto *a = attr(n, name);
	if (!a || a->n_ints > (size_t)max)
		return -1;
	for (size_t i = 0; i < a->n_ints; i++)
		out[i] = a->ints[i];
	return (int)a->n_ints;
}

static const char *const supported[] = {
    "Gemm", "MatMul", "Add", "Sub", "Mul", "Div", "Pow", "Relu", "Tanh", "Sigmoid", "Neg", "Exp",
    "Log", "Sqrt", "Erf", "Abs", "Reciprocal", "Floor", "Sin", "Cos", "Softplus", "Sign",
    "LeakyRelu", "Gelu", "Softmax", "LogSoftmax", "Equal", "Less", "Greater", "LessOrEqual",
    "GreaterOrEqual", "Not", "And", "Or", "Max", "Min", "Where", "Clip", "Cast", "Reshape",
    "Transpose", "Flatten", "Squeeze", "Unsqueeze", "Concat", "Split", "Slice", "Gather",
    "Expand", "ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceSumSquare",
    "ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "Identity", "Dropout",
    "Constant", "Shape", "Size", "ConstantOfShape", "Range", "Conv", "ConvTranspose",
    "BatchNormalization", "LayerNormalization", "MaxPool", "AveragePool", "GlobalAveragePool",
    "GlobalMaxPool", "Resize", "Einsum", "LSTM", "GRU", "RNN", NULL};

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

// Dimensions are checked where they enter (dims_ok), so products stay
// far from overflowing int64.
static int64_t
numel_of(int rank, const int64_t *dim)
{
	int64_t n = 1;
	for (int i = 0; i < rank; i++)
		n *= dim[i];
	return n;
}

static int64_t
numel(const OVal *v)
{
	return numel_of(v->rank, v->dim);
}

// A shape from the file or computed: every dimension >= 0 and the element
// count below 2^48 (no tensor fadc runs is near that; the bound keeps
// arithmetic exact).
static int
dims_ok(Imp *im, const OVal *v, const char *what)
{
	int64_t n = 1;
	if (v->rank > MAXRANK) {
		err(im, "%s '%s' has rank %d (at most %d)", what, v->name, v->rank, MAXRANK);
		return 0;
	}
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

// ---------------------------------------------------------------- known values

static OVal *
base(Imp *im, OVal *v)
{
	while (v->alias)
		v = &im->v[v->alias - 1];
	return v;
}

// Known at import, as data: a folded value, or an integer initializer
// (a float initializer is a parameter, never folded into data).
static int
known(const OVal *v)
{
	return v->iv || v->fv;
}

static double
kf(const OVal *v, int64_t i)
{
	return v->fv ? v->fv[i] : (double)v->iv[i];
}

static int64_t
ki(const OVal *v, int64_t i)
{
	return v->iv ? v->iv[i] : (int64_t)v->fv[i];
}

// The elements of tensor t (n of them) as int64s or doubles, from raw_data
// or the typed fields, into a calloc'ed array; NULL when the data is not
// one element per position or of a dtype this does not read.
static int64_t *
tensor_iv(const Onnx__TensorProto *t, int64_t n)
{
	int64_t *out = NULL;
	if (n > MAXFOLD)
		return NULL;
	if (t->data_type == ONNX_INT64) {
		if (t->has_raw_data ? t->raw_data.len != (size_t)n * 8 : t->n_int64_data != (size_t)n)
			return NULL;
		out = xcalloc((size_t)n, sizeof *out);
		for (int64_t i = 0; i < n; i++)
			if (t->has_raw_data)
				memcpy(&out[i], t->raw_data.data + 8 * i, 8);
			else
				out[i] = t->int64_data[i];
	} else if (t->data_type == ONNX_BOOL) {
		// bool: one byte each in raw_data, or int32_data.
		if (t->has_raw_data ? t->raw_data.len != (size_t)n : t->n_int32_data != (size_t)n)
			return NULL;
		out = xcalloc((size_t)n, sizeof *out);
		for (int64_t i = 0; i < n; i++)
			out[i] = (t->has_raw_data ? t->raw_data.data[i] : t->int32_data[i]) != 0;
	}
	return out;
}

static double *
tensor_fv(const Onnx__TensorProto *t, int64_t n)
{
	double *out = NULL;
	if (n > MAXFOLD)
		return NULL;
	if (t->data_type == ONNX_FLOAT) {
		if (t->has_raw_data ? t->raw_data.len != (size_t)n * 4 : t->n_float_data != (size_t)n)
			return NULL;
		out = xcalloc((size_t)n, sizeof *out);
		for (int64_t i = 0; i < n; i++) {
			float x;
			if (t->has_raw_data)
				memcpy(&x, t->raw_data.data + 4 * i, 4);
			else
				x = t->float_data[i];
			out[i] = x;
		}
	} else if (t->data_type == ONNX_DOUBLE) {
		if (t->has_raw_data ? t->raw_data.len != (size_t)n * 8 : t->n_double_data != (size_t)n)
			return NULL;
		out = xcalloc((size_t)n, sizeof *out);
		for (int64_t i = 0; i < n; i++)
			if (t->has_raw_data)
				memcpy(&out[i], t->raw_data.data + 8 * i, 8);
			else
				out[i] = t->double_data[i];
	}
	return out;
}

// The elements of a known value, or of a float initializer, as doubles
// into out (at most max): their count; -1 when the value is not known.
static int64_t
const_f(const OVal *v, double *out, int64_t max)
{
	int64_t n = numel(v);
	if (n > max)
		return -1;
	if (known(v)) {
		for (int64_t i = 0; i < n; i++)
			out[i] = kf(v, i);
		return n;
	}
	if (v->init && is_float(v->dtype)) {
		double *d = tensor_fv(v->init, n);
		if (!d)
			return -1;
		memcpy(out, d, (size_t)n * sizeof *d);
		free(d);
		return n;
	}
	return -1;
}

static const char *
fmt_dtype(int t)
{
	return dtype_ir(t) ? dtype_ir(t) : "?";
}

// A known value as an IR expression: `full` when its elements are equal,
// else a concat of one-element `full`s reshaped.  0 when it has too many
// distinct elements (the caller declares it instead).
static int
put_literal(FILE *f, const OVal *v)
{
	int64_t n = numel(v);
	int uniform = 1;
	for (int64_t i = 1; i < n && uniform; i++)
		uniform = v->fv ? (v->fv[i] == v->fv[0] || (isnan(v->fv[i]) && isnan(v->fv[0])))
		                : v->iv[i] == v->iv[0];
	if (uniform) {
		fputs("full(value=", f);
		if (!n)
			fputs("0", f);
		else if (v->fv)
			put_num(f, v->fv[0]);
		else
			fprintf(f, "%lld", (long long)v->iv[0]);
		fputs(", shape=", f);
		put_list(f, v->dim, v->rank);
		fprintf(f, ", dtype=%s)", fmt_dtype(v->dtype));
		return 1;
	}
	if (n > MAXLIT)
		return 0;
	if (v->rank != 1)
		fputs("reshape(", f);
	fputs("concat([", f);
	for (int64_t i = 0; i < n; i++) {
		fputs(i ? ", full(value=" : "full(value=", f);
		if (v->fv)
			put_num(f, v->fv[i]);
		else
			fprintf(f, "%lld", (long long)v->iv[i]);
		fprintf(f, ", shape=[1], dtype=%s)", fmt_dtype(v->dtype));
	}
	fputs("], axis=0)", f);
	if (v->rank != 1) {
		fputs(", shape=", f);
		put_list(f, v->dim, v->rank);
		fputs(")", f);
	}
	return 1;
}

// Writes the use of a value as data: its name, after its statement when
// it is a known value not yet written (a literal; a declared constant
// when it has too many distinct elements for one), and marks an
// initializer used (declared).
static void
use(Imp *im, OVal *v)
{
	v = base(im, v);
	if (known(v) && !v->isdecl && !v->emitted) {
		char *lit = NULL;
		size_t len = 0;
		FILE *f = open_memstream(&lit, &len);
		int ok = put_literal(f, v);
		fclose(f);
		if (ok) {
			v->emitted = 1;
			fputs("  ", im->body);
			put_name(im->body, v->name);
			fprintf(im->body, " = %s  # known at import\n", lit);
		} else
			v->isdecl = 1; // a const, bound like an initializer (fe_onnx_initializers)
		free(lit);
	}
	v->used = 1;
	put_name(im->cur, v->name);
}

// Writes the IR text fmt into the node's statements, with $v a value's
// use (OVal *), $s a string, $d an int64_t, $g a double, $L an int64_t
// list (pointer, int count).
static void
E(Imp *im, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	FILE *f = im->cur;
	for (const char *p = fmt; *p; p++) {
		if (*p != '$') {
			fputc(*p, f);
			continue;
		}
		switch (*++p) {
		case 'v': use(im, va_arg(ap, OVal *)); break;
		case 's': fputs(va_arg(ap, const char *), f); break;
		case 'd': fprintf(f, "%lld", (long long)va_arg(ap, int64_t)); break;
		case 'g': put_num(f, va_arg(ap, double)); break;
		case 'L': {
			const int64_t *a = va_arg(ap, const int64_t *);
			put_list(f, a, va_arg(ap, int));
			break;
		}
		default: fputc(*p, f);
		}
	}
	va_end(ap);
}

// The start and end of a statement assigning to output o: the end names
// the node in a comment on the statement's line, so that a parser error,
// which shows the line, names the node (control characters as '?', so
// that a name cannot end the comment).
static void
st_begin(Imp *im, const char *name)
{
	fputs("  ", im->cur);
	put_name(im->cur, name);
	fputs(" = ", im->cur);
}

static void
st_end(Imp *im)
{
	const Onnx__NodeProto *n = im->node;
	fputs("  # node '", im->cur);
	for (const char *c = n->name ? n->name : ""; *c; c++)
		fputc((unsigned char)*c < 0x20 || *c == 0x7f ? '?' : *c, im->cur);
	fprintf(im->cur, "' (%s)\n", n->op_type);
}

// ---------------------------------------------------------------- helpers of the ops

// The axes of a node, from its input i (an int64 constant: opset 13's
// ReduceSum, Squeeze and Unsqueeze, and every Reduce from opset 18) or else
// its attribute "axes"; each made non-negative against rank.  The count, 0
// when there are none, -1 after an error.
static int
node_axes(Imp *im, const Onnx__NodeProto *n, size_t i, int rank, int64_t *ax)
{
	int k = 0;
	if (i < n->n_input && *n->input[i]) {
		const OVal *a = find(im, n->input[i]);
		if (!a || !a->iv) {
			err(im, "the axes '%s' are not known at import", n->input[i]);
			return -1;
		}
		if (numel(a) > MAXRANK) {
			err(im, "more than %d axes", MAXRANK);
			return -1;
		}
		k = (int)numel(a);
		for (int j = 0; j < k; j++)
			ax[j] = a->iv[j];
	} else {
		k = attr(n, "axes") ? attr_ints(n, "axes", ax, MAXRANK) : 0;
		if (k < 0) {
			err(im, "more than %d axes", MAXRANK);
			return -1;
		}
	}
	for (int j = 0; j < k; j++) {
		if (ax[j] < -rank || ax[j] >= rank) {
			err(im, "axis %lld is out of range for rank %d", (long long)ax[j], rank);
			return -1;
		}
		if (ax[j] < 0)
			ax[j] += rank;
		for (int l = 0; l < j; l++)
			if (ax[l] == ax[j]) {
				err(im, "axis %lld repeated", (long long)ax[j]);
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

// One attribute axis made non-negative against rank (r: the rank the axis
// counts in); -1 after an error.
static int
one_axis(Imp *im, int64_t a, int r)
{
	if (a < -r || a >= r) {
		err(im, "axis %lld is out of range for rank %d", (long long)a, r);
		return -1;
	}
	return (int)(a < 0 ? a + r : a);
}

// NumPy broadcasting of k shapes into o (ONNX's multidirectional
// broadcasting); 0 after an error.
static int
bcast(Imp *im, OVal *o, OVal **in, int k)
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
				err(im, "shapes do not broadcast (dimension %lld vs %lld)", (long long)d,
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

static int
is_ew(const char *op)
{
	for (int i = 0; ew_ops[i]; i++)
		if (!strcmp(op, ew_ops[i]))
			return 1;
	return 0;
}

// The number of inputs of an elementwise op: 3 for Where, 2 for the
// binary ones, 0 for Max and Min (any, at least one), else 1.
static int
ew_arity(const char *op)
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

static int
is_cmp(const char *op)
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
			err(im, "integer division by zero (or overflow) in a value known at import");
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
		err(im, "%s of integers is not supported", op);
		return 0;
	}
	return 1;
}

// The ONNX dtype of Cast's `to`, checked; 0 after an error.
static int
cast_to(Imp *im, const Onnx__NodeProto *n)
{
	int64_t to = attr_i(n, "to", 0);
	if (!dtype_ir((int)to)) {
		err(im, "cast to ONNX dtype %lld: only float (1), double (11), int64 (7) and bool (9) "
		        "are supported", (long long)to);
		return 0;
	}
	return (int)to;
}

// The folded o of an elementwise node with known inputs in[0..k); 0
// after an error.
static int
fold_ew(Imp *im, const char *op, OVal **in, int k, OVal *o)
{
	if (!bcast(im, o, in, k) || !dims_ok(im, o, "value"))
		return 0;
	int64_t n = numel(o);
	if (n > MAXFOLD) {
		err(im, "a value known at import of %lld elements (at most %d)", (long long)n, MAXFOLD);
		return 0;
	}
	int w = !strcmp(op, "Where");
	OVal *x = in[w]; // the operand whose dtype the result has
	o->dtype = is_cmp(op) ? ONNX_BOOL : x->dtype;
	if (!strcmp(op, "Cast") && !(o->dtype = cast_to(im, im->node)))
		return 0;
	int fl = is_float(o->dtype) || (!is_cmp(op) && is_float(x->dtype));
	for (int j = 0; j < k && is_cmp(op); j++)
		fl |= is_float(in[j]->dtype);
	if (!strcmp(op, "Cast"))
		fl = is_float(x->dtype) || is_float(o->dtype);
	for (int64_t i = 0; i < n; i++) {
		int64_t ix[3] = {0, 0, 0};
		for (int j = 0; j < k && j < 3; j++)
			ix[j] = bidx(in[j], o, i);
		if (fl) {
			double a = kf(in[0], ix[0]), b = k > 1 ? kf(in[1], ix[1]) : 0,
			       c = k > 2 ? kf(in[2], ix[2]) : 0;
			double r = ew_f(op, a, b, c);
			if (!o->iv && !o->fv) {
				if (is_float(o->dtype))
					o->fv = xcalloc((size_t)n, sizeof *o->fv);
				else
					o->iv = xcalloc((size_t)n, sizeof *o->iv);
			}
			if (o->fv)
				o->fv[i] = o->dtype == ONNX_FLOAT ? (double)(float)r : r;
			else if (o->dtype == ONNX_BOOL)
				o->iv[i] = r != 0;
			else if (isnan(r) || r >= 9.2e18 || r <= -9.2e18) {
				err(im, "a value known at import does not fit int64");
				return 0;
			} else
				o->iv[i] = (int64_t)r; // toward zero, as a cast to int64
		} else {
			if (!o->iv)
				o->iv = xcalloc((size_t)n, sizeof *o->iv);
			int64_t a = ki(in[0], ix[0]), b = k > 1 ? ki(in[1], ix[1]) : 0,
			        c = k > 2 ? ki(in[2], ix[2]) : 0;
			if (!ew_i(im, op, a, b, c, &o->iv[i]))
				return 0;
			if (o->dtype == ONNX_BOOL)
				o->iv[i] = o->iv[i] != 0;
		}
	}
	if (!o->iv && !o->fv) { // no elements
		if (is_float(o->dtype))
			o->fv = xcalloc(1, sizeof *o->fv);
		else
			o->iv = xcalloc(1, sizeof *o->iv);
	}
	return 1;
}

// A new known value of o's dtype and shape with room for its elements.
static int
alloc_known(Imp *im, OVal *o)
{
	if (!dims_ok(im, o, "value"))
		return 0;
	int64_t n = numel(o);
	if (n > MAXFOLD) {
		err(im, "a value known at import of %lld elements (at most %d)", (long long)n, MAXFOLD);
		return 0;
	}
	if (is_float(o->dtype))
		o->fv = xcalloc((size_t)n, sizeof *o->fv);
	else
		o->iv = xcalloc((size_t)n, sizeof *o->iv);
	return 1;
}

static void
set_k(OVal *o, int64_t i, const OVal *x, int64_t j)
{
	if (o->fv)
		o->fv[i] = kf(x, j);
	else
		o->iv[i] = ki(x, j);
}

// The elements of x at positions src[i] (flat) into o; o's shape is set.
static int
gather_known(Imp *im, const OVal *x, OVal *o, const int64_t *src)
{
	o->dtype = x->dtype;
	if (!alloc_known(im, o))
		return 0;
	for (int64_t i = 0, n = numel(o); i < n; i++)
		set_k(o, i, x, src[i]);
	return 1;
}

// ---------------------------------------------------------------- the ops

// An input of the node: the value, checked to exist; NULL with an error
// (opt: NULL without one when the input is absent or named "").
static OVal *
in_val(Imp *im, const Onnx__NodeProto *n, size_t i, int opt)
{
	if (i >= n->n_input || !*n->input[i]) {
		if (!opt)
			err(im, "input %zu is missing", i);
		return NULL;
	}
	OVal *v = find(im, n->input[i]);
	if (!v)
		err(im, "input '%s' is not defined before it", n->input[i]);
	return v;
}

// Slice's bounds on one axis, clamped as ONNX (and Python) do, for a
// positive step: [*b, *e).
static void
clamp_bounds(int64_t dim, int64_t *b, int64_t *e, int64_t step)
{
	if (*b < 0)
		*b += dim;
	if (*e < 0)
		*e += dim;
	if (step > 0) {
		*b = *b < 0 ? 0 : *b > dim ? dim : *b;
		*e = *e < 0 ? 0 : *e > dim ? dim : *e;
	} else {
		*b = *b < 0 ? -1 : *b > dim - 1 ? dim - 1 : *b;
		*e = *e < -1 ? -1 : *e > dim - 1 ? dim - 1 : *e;
	}
}

// Window geometry of Conv and the pools on one spatial axis of length L:
// the padding before (*b) and after (*e) and the output length, from
// pads, auto_pad and ceil_mode (onnx.reference's rules: SAME pads the
// total ceil(L/s) needs, UPPER puts the odd one after; ceil_mode keeps a
// last window that starts inside the input or the left padding, by more
// padding after).
static int64_t
window(const char *autopad, int64_t L, int64_t k, int64_t s, int64_t d, int64_t *b, int64_t *e,
       int ceil_mode)
{
	int64_t ext = d * (k - 1) + 1;
	if (!strcmp(autopad, "VALID"))
		*b = *e = 0;
	else if (!strncmp(autopad, "SAME", 4)) {
		int64_t out = (L + s - 1) / s, total = (out - 1) * s + ext - L;
		if (total < 0)
			total = 0;
		*b = !strcmp(autopad, "SAME_UPPER") ? total / 2 : total - total / 2;
		*e = total - *b;
	}
	int64_t span = L + *b + *e - ext;
	if (span < 0)
		return -1;
	int64_t out = span / s + 1;
	if (ceil_mode && span % s) {
		out = span / s + 2;
		if ((out - 1) * s >= L + *b)
			out--;
		int64_t need = (out - 1) * s + ext - (L + *b + *e);
		if (need > 0)
			*e += need;
	}
	return out;
}

// The spatial attributes of Conv, ConvTranspose and the pools, for ns
// spatial axes: kernel k (from the attribute, or w's shape), strides,
// dilations, pads as [begin..., end...].  0 after an error.
typedef struct Win {
	int ns;
	int64_t k[MAXRANK], s[MAXRANK], d[MAXRANK], b[MAXRANK], e[MAXRANK];
	char autopad[32];
} Win;

static int
win_attrs(Imp *im, const Onnx__NodeProto *n, int ns, const int64_t *wk, Win *w)
{
	int64_t p[2 * MAXRANK];
	w->ns = ns;
	char buf[32];
	snprintf(w->autopad, sizeof w->autopad, "%s", attr_s(n, "auto_pad", "NOTSET", buf, sizeof buf));
	if (strcmp(w->autopad, "NOTSET") && strcmp(w->autopad, "VALID") &&
	    strcmp(w->autopad, "SAME_UPPER") && strcmp(w->autopad, "SAME_LOWER")) {
		err(im, "auto_pad '%s' is not one of NOTSET, VALID, SAME_UPPER, SAME_LOWER", w->autopad);
		return 0;
	}
	int kk = attr_ints(n, "kernel_shape", w->k, MAXRANK);
	if (kk < 0 && !wk) {
		err(im, "no kernel_shape");
		return 0;
	}
	if (kk >= 0 && kk != ns) {
		err(im, "kernel_shape has %d values for %d spatial axes", kk, ns);
		return 0;
	}
	for (int i = 0; i < ns; i++) {
		if (kk < 0)
			w->k[i] = wk[i];
		else if (wk && wk[i] != w->k[i]) {
			err(im, "kernel_shape %lld differs from the weight's %lld", (long long)w->k[i],
			    (long long)wk[i]);
			return 0;
		}
		w->s[i] = w->d[i] = 1;
		w->b[i] = w->e[i] = 0;
	}
	int ks = attr_ints(n, "strides", w->s, MAXRANK), kd = attr_ints(n, "dilations", w->d, MAXRANK),
	    kp = attr_ints(n, "pads", p, 2 * MAXRANK);
	if ((attr(n, "strides") && ks != ns) || (attr(n, "dilations") && kd != ns) ||
	    (attr(n, "pads") && kp != 2 * ns)) {
		err(im, "strides, dilations or pads do not have one value per spatial axis (%d)", ns);
		return 0;
	}
	for (int i = 0; i < ns; i++) {
		if (kp > 0) {
			w->b[i] = p[i];
			w->e[i] = p[ns + i];
		}
		if (w->k[i] < 1 || w->s[i] < 1 || w->d[i] < 1 || w->b[i] < 0 || w->e[i] < 0 ||
		    w->k[i] > 1 << 20 || w->s[i] > 1 << 20 || w->d[i] > 1 << 20 || w->b[i] > 1 << 20 ||
		    w->e[i] > 1 << 20) {
			err(im, "kernel, strides and dilations must be positive and pads non-negative");
			return 0;
		}
	}
	return 1;
}

// Writes x padded on its spatial axes by (b, e) with value pv (pad's
// constant), or x itself when no padding is needed.
static void
put_padded(Imp *im, OVal *x, const Win *w, double pv)
{
	int any = 0;
	int64_t before[MAXRANK] = {0}, after[MAXRANK] = {0};
	for (int i = 0; i < w->ns; i++) {
		before[x->rank - w->ns + i] = w->b[i];
		after[x->rank - w->ns + i] = w->e[i];
		any |= w->b[i] || w->e[i];
	}
	if (!any)
		E(im, "$v", x);
	else
		E(im, "pad($v, before=$L, after=$L, value=$g)", x, before, x->rank, after, x->rank, pv);
}

static int
symmetric(const Win *w)
{
	for (int i = 0; i < w->ns; i++)
		if (w->b[i] != w->e[i])
			return 0;
	return 1;
}

// Conv: conv (1 or 2 spatial axes), its padding explicit (pad) when
// asymmetric; the bias broadcast over the channels.
static int
op_conv(Imp *im, const Onnx__NodeProto *n, OVal *x, OVal *o)
{
	OVal *w = in_val(im, n, 1, 0), *bias = in_val(im, n, 2, 1);
	if (!w || im->failed)
		return 0;
	int ns = x->rank - 2;
	if (ns < 1 || ns > 2 || w->rank != x->rank) {
		err(im, "input of rank %d, weight of rank %d: 1 or 2 spatial axes are supported", x->rank,
		    w->rank);
		return 0;
	}
	Win wn;
	if (!win_attrs(im, n, ns, w->dim + 2, &wn))
		return 0;
	int64_t g = attr_i(n, "group", 1);
	if (g < 1 || x->dim[1] != w->dim[1] * g || w->dim[0] % g) {
		err(im, "%lld input channels, weight (%lld, %lld, ...) and group %lld do not agree",
		    (long long)x->dim[1], (long long)w->dim[0], (long long)w->dim[1], (long long)g);
		return 0;
	}
	o->rank = x->rank;
	o->dim[0] = x->dim[0];
	o->dim[1] = w->dim[0];
	for (int i = 0; i < ns; i++) {
		o->dim[2 + i] = window(wn.autopad, x->dim[2 + i], wn.k[i], wn.s[i], wn.d[i], &wn.b[i],
		                       &wn.e[i], 0);
		if (o->dim[2 + i] < 0) {
			err(im, "the kernel is larger than the padded input");
			return 0;
		}
	}
	int sym = symmetric(&wn);
	int64_t pz[MAXRANK] = {0};
	st_begin(im, o->name);
	if (bias)
		E(im, "add(");
	E(im, "conv(");
	if (sym)
		E(im, "$v", x);
	else
		put_padded(im, x, &wn, 0);
	E(im, ", $v, stride=$L, padding=$L, dilation=$L, groups=$d)", w, wn.s, ns, sym ? wn.b : pz, ns,
	  wn.d, ns, g);
	if (bias) {
		int64_t bs[MAXRANK] = {1, w->dim[0], 1, 1};
		E(im, ", reshape($v, shape=$L))", bias, bs, x->rank);
	}
	st_end(im);
	return 1;
}

// ConvTranspose: conv's adjoint in its input, conv_input_grad, which is
// the transposed convolution.  With the full output length
// F = s (L - 1) + d (k - 1) + 1 and pads (b, e), ONNX's output is
// full[b : b + out], out = F + output_padding - b - e (or output_shape).
// conv_input_grad with padding p and size S gives full[p : p + S] (zeros
// past F), valid when conv of S gives back L: written directly when the
// pads are symmetric and S satisfies that, else from padding 0 and
// S = F, then padded and sliced.
static int
op_convtranspose(Imp *im, const Onnx__NodeProto *n, OVal *x, OVal *o)
{
	OVal *w = in_val(im, n, 1, 0), *bias = in_val(im, n, 2, 1);
	if (!w || im->failed)
		return 0;
	int ns = x->rank - 2;
	if (ns < 1 || ns > 2 || w->rank != x->rank) {
		err(im, "input of rank %d, weight of rank %d: 1 or 2 spatial axes are supported", x->rank,
		    w->rank);
		return 0;
	}
	Win wn;
	if (!win_attrs(im, n, ns, w->dim + 2, &wn))
		return 0;
	int64_t g = attr_i(n, "group", 1);
	if (g < 1 || x->dim[1] != w->dim[0] || w->dim[0] % g) {
		err(im, "%lld input channels, weight (%lld, %lld, ...) and group %lld do not agree",
		    (long long)x->dim[1], (long long)w->dim[0], (long long)w->dim[1], (long long)g);
		return 0;
	}
	int64_t op[MAXRANK] = {0}, os[MAXRANK];
	int kop = attr_ints(n, "output_padding", op, MAXRANK),
	    kos = attr_ints(n, "output_shape", os, MAXRANK);
	if ((kop >= 0 && kop != ns) || (kos >= 0 && kos != ns && kos != x->rank)) {
		err(im, "output_padding or output_shape do not have one value per spatial axis");
		return 0;
	}
	if (kos == x->rank) // the whole shape: its spatial part
		memmove(os, os + 2, (size_t)ns * sizeof *os);
	o->rank = x->rank;
	o->dim[0] = x->dim[0];
	o->dim[1] = w->dim[1] * g;
	int64_t full[MAXRANK];
	int direct = 1;
	for (int i = 0; i < ns; i++) {
		full[i] = wn.s[i] * (x->dim[2 + i] - 1) + wn.d[i] * (wn.k[i] - 1) + 1;
		if (op[i] < 0 || op[i] > 1 << 20) {
			err(im, "output_padding %lld is out of range", (long long)op[i]);
			return 0;
		}
		if (!strncmp(wn.autopad, "SAME", 4)) {
			int64_t out = kos >= 0 ? os[i] : x->dim[2 + i] * wn.s[i];
			int64_t total = full[i] + op[i] - out;
			if (total < 0)
				total = 0;
			wn.b[i] = !strcmp(wn.autopad, "SAME_UPPER") ? total / 2 : total - total / 2;
			wn.e[i] = total - wn.b[i];
		} else if (!strcmp(wn.autopad, "VALID"))
			wn.b[i] = wn.e[i] = 0;
		o->dim[2 + i] = kos >= 0 ? os[i] : full[i] + op[i] - wn.b[i] - wn.e[i];
		if (o->dim[2 + i] < 1) {
			err(im, "the output would be empty");
			return 0;
		}
		// Direct: symmetric padding p, and conv of the output's length
		// gives back L: floor((S + 2p - d(k-1) - 1) / s) + 1 == L.
		int64_t S = o->dim[2 + i], p = wn.b[i];
		if (wn.b[i] != wn.e[i] || S + 2 * p - wn.d[i] * (wn.k[i] - 1) - 1 < 0 ||
		    (S + 2 * p - wn.d[i] * (wn.k[i] - 1) - 1) / wn.s[i] + 1 != x->dim[2 + i])
			direct = 0;
	}
	int64_t pz[MAXRANK] = {0};
	st_begin(im, o->name);
	if (bias)
		E(im, "add(");
	if (direct) {
		E(im, "conv_input_grad($v, $v, stride=$L, padding=$L, dilation=$L, groups=$d, size=$L)", x,
		  w, wn.s, ns, wn.b, ns, wn.d, ns, g, o->dim + 2, ns);
	} else {
		// full[b : b + out], zeros past F: pad after by what b + out
		// passes F, then slice.
		int64_t after[MAXRANK] = {0}, st[MAXRANK], en[MAXRANK], sp[MAXRANK], anyp = 0;
		for (int i = 0; i < x->rank; i++) {
			st[i] = 0;
			en[i] = o->dim[i];
			sp[i] = 1;
		}
		for (int i = 0; i < ns; i++) {
			int64_t past = wn.b[i] + o->dim[2 + i] - full[i];
			after[2 + i] = past > 0 ? past : 0;
			anyp |= after[2 + i];
			st[2 + i] = wn.b[i];
			en[2 + i] = wn.b[i] + o->dim[2 + i];
		}
		E(im, "slice(");
		if (anyp)
			E(im, "pad(");
		E(im, "conv_input_grad($v, $v, stride=$L, padding=$L, dilation=$L, groups=$d, size=$L)", x,
		  w, wn.s, ns, pz, ns, wn.d, ns, g, full, ns);
		if (anyp)
			E(im, ", before=$L, after=$L)", pz, x->rank, after, x->rank);
		E(im, ", start=$L, end=$L, step=$L)", st, x->rank, en, x->rank, sp, x->rank);
	}
	if (bias) {
		int64_t bs[MAXRANK] = {1, o->dim[1], 1, 1};
		E(im, ", reshape($v, shape=$L))", bias, bs, x->rank);
	}
	st_end(im);
	return 1;
}

// MaxPool and AveragePool: max_pool and avg_pool (1 or 2 spatial axes).
// Padding the op cannot take (asymmetric, more than half the kernel,
// ceil_mode's extra) is explicit: -inf for max; for the average, zeros
// counted when count_include_pad, else the sum of the padded input over
// the count of real elements (a pooled padded indicator).
static int
op_pool(Imp *im, const Onnx__NodeProto *n, OVal *x, OVal *o)
{
	int mx = !strcmp(n->op_type, "MaxPool");
	int ns = x->rank - 2;
	if (ns < 1 || ns > 2) {
		err(im, "input of rank %d: 1 or 2 spatial axes are supported", x->rank);
		return 0;
	}
	if (n->n_output > 1 && *n->output[1]) {
		err(im, "the Indices output is not supported");
		return 0;
	}
	Win wn;
	if (!win_attrs(im, n, ns, NULL, &wn))
		return 0;
	int ceil_mode = (int)attr_i(n, "ceil_mode", 0), cip = (int)attr_i(n, "count_include_pad", 0);
	if (!mx) {
		for (int i = 0; i < ns; i++)
			if (wn.d[i] != 1) {
				err(im, "dilations of AveragePool are not supported");
				return 0;
			}
	}
	if (mx && attr_i(n, "storage_order", 0)) {
		err(im, "storage_order 1 is not supported (it changes only Indices)");
		return 0;
	}
	o->rank = x->rank;
	o->dim[0] = x->dim[0];
	o->dim[1] = x->dim[1];
	int64_t e0[MAXRANK]; // the padding after, without ceil_mode's extra
	for (int i = 0; i < ns; i++) {
		int64_t b = wn.b[i];
		e0[i] = wn.e[i];
		window(wn.autopad, x->dim[2 + i], wn.k[i], wn.s[i], wn.d[i], &b, &e0[i], 0);
		o->dim[2 + i] = window(wn.autopad, x->dim[2 + i], wn.k[i], wn.s[i], wn.d[i], &wn.b[i],
		                       &wn.e[i], ceil_mode);
		if (o->dim[2 + i] < 1) {
			err(im, "the kernel is larger than the padded input");
			return 0;
		}
	}
	int fits = symmetric(&wn);
	for (int i = 0; i < ns; i++)
		fits &= 2 * wn.b[i] <= wn.k[i];
	int64_t pz[MAXRANK] = {0};
	st_begin(im, o->name);
	if (mx) {
		E(im, "max_pool(");
		if (fits)
			E(im, "$v", x);
		else
			put_padded(im, x, &wn, -INFINITY);
		E(im, ", kernel=$L, stride=$L, padding=$L, dilation=$L)", wn.k, ns, wn.s, ns,
		  fits ? wn.b : pz, ns, wn.d, ns);
	} else if (fits) {
		E(im, "avg_pool($v, kernel=$L, stride=$L, padding=$L, count_include_pad=$d)", x, wn.k, ns,
		  wn.s, ns, wn.b, ns, (int64_t)cip);
	} else {
		// The padded input's window sums over the number of elements that
		// count: a padded indicator pooled the same way.  What counts is
		// the input, and its pads when count_include_pad (never
		// ceil_mode's extra: onnx.reference and PyTorch clip the divisor's
		// window to the input and its pads).
		int64_t pb[MAXRANK] = {0}, pa[MAXRANK] = {0}, xa[MAXRANK] = {0};
		int extra = 0;
		for (int i = 0; i < ns; i++) {
			pb[2 + i] = wn.b[i];
			pa[2 + i] = cip ? e0[i] : wn.e[i];
			xa[2 + i] = wn.e[i] - e0[i];
			extra |= cip && xa[2 + i];
		}
		E(im, "div(avg_pool(");
		put_padded(im, x, &wn, 0);
		E(im, ", kernel=$L, stride=$L, padding=$L), avg_pool(", wn.k, ns, wn.s, ns, pz, ns);
		if (extra)
			E(im, "pad(");
		E(im, "pad(full(value=1, shape=$L, dtype=$s), before=$L, after=$L, value=$d)", x->dim,
		  x->rank, dtype_ir(x->dtype), pb, x->rank, pa, x->rank, (int64_t)cip);
		if (extra)
			E(im, ", before=$L, after=$L, value=0)", pz, x->rank, xa, x->rank);
		E(im, ", kernel=$L, stride=$L, padding=$L))", wn.k, ns, wn.s, ns, pz, ns);
	}
	st_end(im);
	return 1;
}

// BatchNormalization.  Inference: scale (x - mean) / sqrt(var + eps) + B,
// the statistics broadcast over axis 1 (onnx.reference's order).
// Training (training_mode = 1, or more than one output before opset 14):
// the batch's mean and biased variance over every axis but 1 instead, and
// the running statistics as further outputs:
// running = input * momentum + batch * (1 - momentum).
static int
op_batchnorm(Imp *im, const Onnx__NodeProto *n, OVal *x, OVal *outs, int *nout)
{
	OVal *sc = in_val(im, n, 1, 0), *bb = in_val(im, n, 2, 0), *mean = in_val(im, n, 3, 0),
	     *var = in_val(im, n, 4, 0);
	if (im->failed)
		return 0;
	if (x->rank < 2) {
		err(im, "input of rank %d (at least 2)", x->rank);
		return 0;
	}
	int64_t C = x->dim[1];
	OVal *p[4] = {sc, bb, mean, var};
	for (int i = 0; i < 4; i++)
		if (p[i]->rank != 1 || p[i]->dim[0] != C) {
			err(im, "'%s' is not of shape [%lld]", p[i]->name, (long long)C);
			return 0;
		}
	int train = attr_i(n, "training_mode", 0) || (im->opset < 14 && n->n_output > 1);
	double eps = attr_f(n, "epsilon", 1e-5), mom = attr_f(n, "momentum", 0.9);
	int64_t cs[MAXRANK], ax[MAXRANK];
	int nax = 0;
	for (int i = 0; i < x->rank; i++) {
		cs[i] = i == 1 ? C : 1;
		if (i != 1)
			ax[nax++] = i;
	}
	OVal *o = &outs[0];
	o->rank = x->rank;
	memcpy(o->dim, x->dim, sizeof o->dim);
	char mname[4096], vname[4096];
	if (!train) {
		st_begin(im, o->name);
		E(im, "add(mul(reshape($v, shape=$L), div(sub($v, reshape($v, shape=$L)), sqrt(add(reshape($v, "
		      "shape=$L), $g)))), reshape($v, shape=$L))",
		  sc, cs, x->rank, x, mean, cs, x->rank, var, cs, x->rank, eps, bb, cs, x->rank);
		st_end(im);
		*nout = 1;
		return 1;
	}
	// The batch statistics under names of their own, derived from Y's.
	snprintf(mname, sizeof mname, "%s:batch_mean", o->name);
	snprintf(vname, sizeof vname, "%s:batch_var", o->name);
	fputs("  ", im->cur);
	put_name(im->cur, mname);
	E(im, " = mean($v, axes=$L, keepdim=1)", x, ax, nax);
	st_end(im);
	fputs("  ", im->cur);
	put_name(im->cur, vname);
	E(im, " = mean(pow(sub($v, ", x);
	put_name(im->cur, mname);
	E(im, "), 2), axes=$L, keepdim=1)", ax, nax);
	st_end(im);
	st_begin(im, o->name);
	E(im, "add(mul(reshape($v, shape=$L), div(sub($v, ", sc, cs, x->rank, x);
	put_name(im->cur, mname);
	E(im, "), sqrt(add(");
	put_name(im->cur, vname);
	E(im, ", $g)))), reshape($v, shape=$L))", eps, bb, cs, x->rank);
	st_end(im);
	*nout = 1;
	for (int k = 1; k < 3 && k < (int)n->n_output; k++) {
		if (!*n->output[k])
			continue;
		OVal *r = &outs[k];
		r->rank = 1;
		r->dim[0] = C;
		st_begin(im, r->name);
		E(im, "add(mul($v, $g), mul(reshape(", k == 1 ? mean : var, mom);
		put_name(im->cur, k == 1 ? mname : vname);
		E(im, ", shape=[$d]), $g))", C, 1 - mom);
		st_end(im);
		*nout = k + 1;
	}
	if (n->n_output > 3) {
		err(im, "the saved mean and variance outputs (opset < 14) are not supported");
		return 0;
	}
	return 1;
}

// LayerNormalization over the axes from `axis` on: d = x - mean,
// y = d / sqrt(mean(d^2) + eps) * Scale + B (Scale and B broadcast);
// optional outputs Mean and InvStdDev, of x's shape with 1 on the
// normalized axes.
static int
op_layernorm(Imp *im, const Onnx__NodeProto *n, OVal *x, OVal *outs, int *nout)
{
	OVal *sc = in_val(im, n, 1, 0), *bb = in_val(im, n, 2, 1);
	if (im->failed)
		return 0;
	int a = one_axis(im, attr_i(n, "axis", -1), x->rank);
	if (a < 0)
		return 0;
	double eps = attr_f(n, "epsilon", 1e-5);
	int64_t ax[MAXRANK];
	int nax = 0;
	for (int i = a; i < x->rank; i++)
		ax[nax++] = i;
	OVal *o = &outs[0];
	OVal *chk[3] = {x, sc, bb};
	if (!bcast(im, o, chk, bb ? 3 : 2))
		return 0;
	if (o->rank != x->rank || memcmp(o->dim, x->dim, sizeof o->dim)) {
		err(im, "Scale or B do not broadcast to the input's shape");
		return 0;
	}
	char mname[4096], iname[4096];
	snprintf(mname, sizeof mname, "%s", n->n_output > 1 && *n->output[1] ? n->output[1] : "");
	snprintf(iname, sizeof iname, "%s", n->n_output > 2 && *n->output[2] ? n->output[2] : "");
	if (!*mname)
		snprintf(mname, sizeof mname, "%s:mean", o->name);
	if (!*iname)
		snprintf(iname, sizeof iname, "%s:inv_std_dev", o->name);
	fputs("  ", im->cur);
	put_name(im->cur, mname);
	E(im, " = mean($v, axes=$L, keepdim=1)", x, ax, nax);
	st_end(im);
	fputs("  ", im->cur);
	put_name(im->cur, iname);
	E(im, " = rsqrt(add(mean(pow(sub($v, ", x);
	put_name(im->cur, mname);
	E(im, "), 2), axes=$L, keepdim=1), $g))", ax, nax, eps);
	st_end(im);
	st_begin(im, o->name);
	if (bb)
		E(im, "add(");
	E(im, "mul(mul(sub($v, ", x);
	put_name(im->cur, mname);
	E(im, "), ");
	put_name(im->cur, iname);
	E(im, "), $v)", sc);
	if (bb)
		E(im, ", $v)", bb);
	st_end(im);
	*nout = 1;
	for (int k = 1; k < 3 && k < (int)n->n_output; k++)
		if (*n->output[k]) {
			outs[k].rank = x->rank;
			for (int i = 0; i < x->rank; i++)
				outs[k].dim[i] = i < a ? x->dim[i] : 1;
			*nout = k + 1;
		}
	return 1;
}

// Split into the outputs along axis: sizes from the input `split` (opset
// 13), the attribute (before), or num_outputs / the output count in equal
// parts (the last smaller, opset 18).
static int
op_split(Imp *im, const Onnx__NodeProto *n, OVal *x, OVal *outs, int *nout)
{
	int a = one_axis(im, attr_i(n, "axis", 0), x->rank);
	if (a < 0)
		return 0;
	int k = (int)n->n_output;
	if (k > 256) {
		err(im, "more than 256 outputs");
		return 0;
	}
	int64_t sz[256];
	OVal *sp = in_val(im, n, 1, 1);
	if (im->failed)
		return 0;
	if (sp) {
		if (!sp->iv || numel(sp) != k) {
			err(im, "the split '%s' is not known at import or not one size per output", sp->name);
			return 0;
		}
		for (int i = 0; i < k; i++)
			sz[i] = sp->iv[i];
	} else if (attr(n, "split")) {
		if (attr_ints(n, "split", sz, 256) != k) {
			err(im, "the attribute split does not have one size per output");
			return 0;
		}
	} else {
		int64_t parts = attr_i(n, "num_outputs", k), d = x->dim[a];
		if (parts != k || k < 1) {
			err(im, "num_outputs %lld differs from the %d outputs", (long long)parts, k);
			return 0;
		}
		int64_t each = (d + k - 1) / k;
		for (int i = 0; i < k; i++) {
			int64_t rest = d - each * i;
			sz[i] = rest < 0 ? 0 : rest < each ? rest : each;
		}
	}
	int64_t total = 0;
	for (int i = 0; i < k; i++) {
		if (sz[i] < 0) {
			err(im, "a negative split size");
			return 0;
		}
		total += sz[i];
	}
	if (total != x->dim[a]) {
		err(im, "the sizes sum to %lld, not the axis' %lld", (long long)total, (long long)x->dim[a]);
		return 0;
	}
	int64_t st[MAXRANK], en[MAXRANK], step[MAXRANK], at = 0;
	for (int i = 0; i < k; i++) {
		OVal *o = &outs[i];
		o->rank = x->rank;
		memcpy(o->dim, x->dim, sizeof o->dim);
		o->dim[a] = sz[i];
		for (int j = 0; j < x->rank; j++) {
			st[j] = j == a ? at : 0;
			en[j] = j == a ? at + sz[i] : x->dim[j];
			step[j] = 1;
		}
		at += sz[i];
		if (!*n->output[i])
			continue;
		if (known(x)) {
			int64_t nn = numel(o), *src = xcalloc((size_t)(nn ? nn : 1), sizeof *src);
			for (int64_t e = 0; e < nn; e++) {
				int64_t r = e, off = 0, stride = 1;
				for (int j = x->rank - 1; j >= 0; j--) {
					off += (r % o->dim[j] + st[j]) * stride;
					r /= o->dim[j];
					stride *= x->dim[j];
				}
				src[e] = off;
			}
			int ok = gather_known(im, x, o, src);
			free(src);
			if (!ok)
				return 0;
			continue;
		}
		st_begin(im, o->name);
		E(im, "slice($v, start=$L, end=$L, step=$L)", x, st, x->rank, en, x->rank, step, x->rank);
		st_end(im);
	}
	*nout = k;
	return 1;
}

// Slice with known starts, ends, axes and steps.  Positive steps are the
// slice op; a negative step is folded when x is known, else not yet (the
// op takes positive steps only).
static int
op_slice(Imp *im, const Onnx__NodeProto *n, OVal *x, OVal *o)
{
	OVal *sv = in_val(im, n, 1, 0), *ev = in_val(im, n, 2, 0), *av = in_val(im, n, 3, 1),
	     *pv = in_val(im, n, 4, 1);
	if (im->failed)
		return 0;
	OVal *need[4] = {sv, ev, av, pv};
	for (int i = 0; i < 4; i++)
		if (need[i] && !need[i]->iv) {
			err(im, "'%s' is not known at import (a slice's bounds must be)", need[i]->name);
			return 0;
		}
	int k = (int)numel(sv);
	if (numel(ev) != k || (av && numel(av) != k) || (pv && numel(pv) != k) || k > MAXRANK) {
		err(im, "starts, ends, axes and steps differ in length");
		return 0;
	}
	int64_t st[MAXRANK], en[MAXRANK], step[MAXRANK];
	for (int j = 0; j < x->rank; j++) {
		st[j] = 0;
		en[j] = x->dim[j];
		step[j] = 1;
	}
	int seen[MAXRANK] = {0};
	for (int i = 0; i < k; i++) {
		int a = one_axis(im, av ? av->iv[i] : i, x->rank);
		if (a < 0)
			return 0;
		if (seen[a]++) {
			err(im, "axis %d repeated", a);
			return 0;
		}
		step[a] = pv ? pv->iv[i] : 1;
		if (!step[a]) {
			err(im, "a step of 0");
			return 0;
		}
		st[a] = sv->iv[i];
		en[a] = ev->iv[i];
		clamp_bounds(x->dim[a], &st[a], &en[a], step[a]);
	}
	o->rank = x->rank;
	for (int j = 0; j < x->rank; j++) {
		int64_t len = step[j] > 0 ? (en[j] - st[j] + step[j] - 1) / step[j]
		                          : (st[j] - en[j] - step[j] - 1) / -step[j];
		o->dim[j] = len > 0 ? len : 0;
		if (o->dim[j] == 0) { // an empty slice: any bounds in range
			st[j] = en[j] = 0;
			step[j] = step[j] > 0 ? step[j] : 1;
		}
	}
	if (known(x)) {
		int64_t nn = numel(o), *src = xcalloc((size_t)(nn ? nn : 1), sizeof *src);
		for (int64_t e = 0; e < nn; e++) {
			int64_t r = e, off = 0, stride = 1;
			for (int j = x->rank - 1; j >= 0; j--) {
				off += (st[j] + (r % o->dim[j]) * step[j]) * stride;
				r /= o->dim[j];
				stride *= x->dim[j];
			}
			src[e] = off;
		}
		int ok = gather_known(im, x, o, src);
		free(src);
		return ok;
	}
	// A negative step is a take of the indices st, st + step, ... (the
	// slice op takes positive steps); the other axes are one slice.
	int64_t pst[MAXRANK], pen[MAXRANK], pstep[MAXRANK];
	for (int j = 0; j < x->rank; j++) {
		int r = step[j] < 0 && o->dim[j] > 0;
		pst[j] = r ? 0 : st[j];
		pstep[j] = r ? 1 : step[j];
		pen[j] = r ? x->dim[j] : o->dim[j] > 0 ? st[j] + (o->dim[j] - 1) * step[j] + 1 : en[j];
		if (r && o->dim[j] > MAXLIT) {
			err(im, "a negative step over more than %d elements is not supported yet", MAXLIT);
			return 0;
		}
	}
	st_begin(im, o->name);
	for (int j = 0; j < x->rank; j++)
		if (step[j] < 0 && o->dim[j] > 0)
			E(im, "take(");
	E(im, "slice($v, start=$L, end=$L, step=$L)", x, pst, x->rank, pen, x->rank, pstep, x->rank);
	for (int j = 0; j < x->rank; j++)
		if (step[j] < 0 && o->dim[j] > 0) {
			OVal t = {.dtype = ONNX_INT64, .rank = 1, .dim = {o->dim[j]}};
			t.iv = xcalloc((size_t)o->dim[j], sizeof *t.iv);
			for (int64_t i = 0; i < o->dim[j]; i++)
				t.iv[i] = st[j] + i * step[j];
			E(im, ", ");
			put_literal(im->cur, &t);
			free(t.iv);
			E(im, ", axis=$d)", (int64_t)j);
		}
	st_end(im);
	return 1;
}

// Gather: take along axis; negative indices count from the end (made
// non-negative here when known, by a where otherwise).  Folded when both
// are known.
static int
op_gather(Imp *im, const Onnx__NodeProto *n, OVal *x, OVal *o)
{
	OVal *idx = in_val(im, n, 1, 0);
	if (!idx)
		return 0;
	int a = one_axis(im, attr_i(n, "axis", 0), x->rank);
	if (a < 0)
		return 0;
	if (idx->dtype != ONNX_INT64) {
		err(im, "indices of ONNX dtype %d: int64 (7) is supported", idx->dtype);
		return 0;
	}
	if (x->rank - 1 + idx->rank > MAXRANK) {
		err(im, "the result's rank is more than %d", MAXRANK);
		return 0;
	}
	o->rank = 0;
	for (int i = 0; i < a; i++)
		o->dim[o->rank++] = x->dim[i];
	for (int i = 0; i < idx->rank; i++)
		o->dim[o->rank++] = idx->dim[i];
	for (int i = a + 1; i < x->rank; i++)
		o->dim[o->rank++] = x->dim[i];
	int64_t d = x->dim[a];
	if (known(idx))
		for (int64_t i = 0, ni = numel(idx); i < ni; i++)
			if (idx->iv[i] < -d || idx->iv[i] >= d) {
				err(im, "index %lld is out of range for dimension %lld", (long long)idx->iv[i],
				    (long long)d);
				return 0;
			}
	if (known(x) && known(idx)) {
		int64_t nn = numel(o), *src = xcalloc((size_t)(nn ? nn : 1), sizeof *src);
		int64_t inner = 1, ni = numel(idx);
		for (int i = a + 1; i < x->rank; i++)
			inner *= x->dim[i];
		for (int64_t e = 0; e < nn; e++) {
			int64_t in_ = e % inner, r = e / inner, j = ni ? r % ni : 0, outer = ni ? r / ni : 0;
			int64_t t = idx->iv[j] < 0 ? idx->iv[j] + d : idx->iv[j];
			src[e] = (outer * d + t) * inner + in_;
		}
		int ok = gather_known(im, x, o, src);
		free(src);
		return ok;
	}
	st_begin(im, o->name);
	E(im, "take($v, ", x);
	if (known(idx)) {
		int negs = 0;
		for (int64_t i = 0, ni = numel(idx); i < ni; i++)
			negs |= idx->iv[i] < 0;
		if (negs) {
			OVal t = *idx;
			t.iv = xcalloc((size_t)numel(idx), sizeof *t.iv);
			for (int64_t i = 0, ni = numel(idx); i < ni; i++)
				t.iv[i] = idx->iv[i] < 0 ? idx->iv[i] + d : idx->iv[i];
			int ok = put_literal(im->cur, &t);
			free(t.iv);
			if (!ok) {
				err(im, "more than %d distinct negative indices known at import", MAXLIT);
				return 0;
			}
		} else
			E(im, "$v", idx);
	} else
		E(im, "where(lt($v, 0), add($v, $d), $v)", idx, idx, d, idx);
	E(im, ", axis=$d)", (int64_t)a);
	st_end(im);
	return 1;
}

// MatMul with NumPy's rules: a 1-D operand gains an axis of 1 (removed
// from the result), batch axes broadcast.
static int
op_matmul(Imp *im, OVal *x, OVal *y, OVal *o)
{
	if (x->rank < 1 || y->rank < 1) {
		err(im, "scalar operands");
		return 0;
	}
	OVal a = *x, b = *y;
	if (a.rank == 1) {
		a.rank = 2;
		a.dim[1] = a.dim[0];
		a.dim[0] = 1;
	}
	if (b.rank == 1) {
		b.rank = 2;
		b.dim[1] = 1;
	}
	if (a.dim[a.rank - 1] != b.dim[b.rank - 2]) {
		err(im, "inner dimensions differ (%lld vs %lld)", (long long)a.dim[a.rank - 1],
		    (long long)b.dim[b.rank - 2]);
		return 0;
	}
	OVal ba = a, bb = b, bo = {0};
	ba.rank -= 2;
	bb.rank -= 2;
	OVal *bp[2] = {&ba, &bb};
	if (!bcast(im, &bo, bp, 2))
		return 0;
	o->rank = bo.rank;
	memcpy(o->dim, bo.dim, sizeof o->dim);
	if (x->rank > 1)
		o->dim[o->rank++] = a.dim[a.rank - 2];
	if (y->rank > 1)
		o->dim[o->rank++] = b.dim[b.rank - 1];
	int64_t as[MAXRANK], bs[MAXRANK];
	memcpy(as, a.dim, sizeof as);
	memcpy(bs, b.dim, sizeof bs);
	st_begin(im, o->name);
	if (x->rank == 1 || y->rank == 1)
		E(im, "reshape(");
	E(im, "matmul(");
	E(im, x->rank == 1 ? "reshape($v, shape=$L), " : "$v, ", x, as, a.rank);
	E(im, y->rank == 1 ? "reshape($v, shape=$L))" : "$v)", y, bs, b.rank);
	if (x->rank == 1 || y->rank == 1)
		E(im, ", shape=$L)", o->dim, o->rank);
	st_end(im);
	return 1;
}

// Resize.  The output sizes: `sizes`, or floor(in * scale) from
// `scales` (the scale then the given one, else out / in).
//   - mode linear on (N, C, H, W): upsample_bilinear, torch's bilinear
//     interpolation, which is ONNX's when the source coordinate rules
//     agree: align_corners, or half_pixel (pytorch_half_pixel) with the
//     scale out / in (torch computes it from the sizes; ONNX uses the
//     given scale, the same when in * scale is the output size exactly).
//     Both clamp a source coordinate to the input (ONNX pads by the edge).
//   - mode nearest, any rank: a take along each resized axis of the
//     indices ONNX's coordinate rule and nearest_mode pick, computed here.
static int
op_resize(Imp *im, const Onnx__NodeProto *n, OVal *x, OVal *o)
{
	char mb[32], cb[32], nb[32], pb[32];
	const char *mode = attr_s(n, "mode", "nearest", mb, sizeof mb),
	           *ct = attr_s(n, "coordinate_transformation_mode", "half_pixel", cb, sizeof cb),
	           *nm = attr_s(n, "nearest_mode", "round_prefer_floor", nb, sizeof nb);
	OVal *sc = in_val(im, n, 2, 1), *sz = in_val(im, n, 3, 1);
	if (im->failed)
		return 0;
	int R = x->rank, nearest = !strcmp(mode, "nearest");
	if (!nearest && strcmp(mode, "linear")) {
		err(im, "mode '%s': only 'linear' and 'nearest' are supported", mode);
		return 0;
	}
	int64_t axes[MAXRANK];
	int na = attr_ints(n, "axes", axes, MAXRANK);
	if (na < 0)
		for (na = 0; na < R; na++)
			axes[na] = na;
	double scale[MAXRANK], v[MAXRANK];
	int64_t out[MAXRANK];
	for (int a = 0; a < R; a++) {
		scale[a] = 1;
		out[a] = x->dim[a];
	}
	int from_scales = sz == NULL;
	OVal *src = sz ? sz : sc;
	if (!src || numel(src) != na || const_f(src, v, MAXRANK) != na) {
		err(im, "neither scales nor sizes known at import, one value per axis");
		return 0;
	}
	if (sz && strcmp(attr_s(n, "keep_aspect_ratio_policy", "stretch", pb, sizeof pb), "stretch")) {
		err(im, "keep_aspect_ratio_policy '%s' is not supported", pb);
		return 0;
	}
	for (int i = 0; i < na; i++) {
		int a = one_axis(im, axes[i], R);
		if (a < 0)
			return 0;
		if (!(v[i] > 0 && v[i] < (double)(1 << 24))) {
			err(im, "scale or size %g", v[i]);
			return 0;
		}
		if (from_scales) {
			scale[a] = v[i];
			out[a] = (int64_t)floor((double)x->dim[a] * v[i]);
		} else {
			out[a] = (int64_t)v[i];
			scale[a] = x->dim[a] ? v[i] / (double)x->dim[a] : 1;
		}
		if (out[a] < 1 || out[a] > ((int64_t)1 << 24) || !x->dim[a]) {
			err(im, "output size %lld from input size %lld", (long long)out[a],
			    (long long)x->dim[a]);
			return 0;
		}
	}
	o->rank = R;
	memcpy(o->dim, out, sizeof out);
	if (!dims_ok(im, o, "output"))
		return 0;
	if (nearest) {
		int hp = !strcmp(ct, "half_pixel"), php = !strcmp(ct, "pytorch_half_pixel"),
		    ac = !strcmp(ct, "align_corners"), as = !strcmp(ct, "asymmetric"),
		    hps = !strcmp(ct, "half_pixel_symmetric");
		if (!hp && !php && !ac && !as && !hps) {
			err(im, "coordinate_transformation_mode '%s' is not supported", ct);
			return 0;
		}
		if (strcmp(nm, "round_prefer_floor") && strcmp(nm, "round_prefer_ceil") &&
		    strcmp(nm, "floor") && strcmp(nm, "ceil")) {
			err(im, "nearest_mode '%s'", nm);
			return 0;
		}
		st_begin(im, o->name);
		int nt = 0;
		for (int a = 0; a < R; a++)
			nt += out[a] != x->dim[a] || scale[a] != 1;
		for (int i = 0; i < nt; i++)
			E(im, "take(");
		E(im, "$v", x);
		for (int a = 0; a < R; a++) {
			if (out[a] == x->dim[a] && scale[a] == 1)
				continue;
			if (out[a] > MAXLIT) {
				// Too many indices for a literal: the same arithmetic in
				// the model, in f64 on iota, operation for operation as
				// below, so the indices are the same.
				double in = (double)x->dim[a], s = scale[a],
				       len = from_scales ? in * s : (double)out[a];
				int64_t sh[1] = {out[a]};
				E(im, ", cast(clamp(");
				const char *pre = !strcmp(nm, "floor") ? "floor(" : !strcmp(nm, "ceil") ? "neg(floor(neg("
				                : nm[13] == 'c' ? "floor(add(" : "neg(floor(sub(0.5, ";
				E(im, "$s", pre);
				if (as)
					E(im, "div(iota(shape=$L, dtype=f64), $g)", sh, 1, s);
				else if (ac)
					E(im, "div(mul(iota(shape=$L, dtype=f64), $g), $g)", sh, 1, in - 1, len - 1);
				else if (hps)
					E(im, "sub(add($g, div(add(iota(shape=$L, dtype=f64), 0.5), $g)), 0.5)",
					  in / 2 * (1 - (double)out[a] / len), sh, 1, s);
				else
					E(im, "sub(div(add(iota(shape=$L, dtype=f64), 0.5), $g), 0.5)", sh, 1, s);
				E(im, "$s", !strcmp(nm, "floor") ? ")" : !strcmp(nm, "ceil") ? ")))"
				           : nm[13] == 'c' ? ", 0.5))" : ")))");
				E(im, ", min=0, max=$d), dtype=i64), axis=$d)", x->dim[a] - 1, (int64_t)a);
				continue;
			}
			OVal t = {.dtype = ONNX_INT64, .rank = 1, .dim = {out[a]}};
			t.iv = xcalloc((size_t)out[a], sizeof *t.iv);
			double in = (double)x->dim[a], s = scale[a], len = from_scales ? in * s : (double)out[a];
			for (int64_t i = 0; i < out[a]; i++) {
				double c;
				// ONNX's x_original of output index i.
				if (as)
					c = (double)i / s;
				else if (ac)
					c = len > 1 ? (double)i * (in - 1) / (len - 1) : 0;
				else if (php && out[a] == 1)
					c = 0;
				else if (hps) {
					double adj = (double)out[a] / len, off = in / 2 * (1 - adj);
					c = off + ((double)i + 0.5) / s - 0.5;
				} else
					c = ((double)i + 0.5) / s - 0.5;
				double fl = floor(c), fr = c - fl;
				int64_t k = !strcmp(nm, "floor") ? (int64_t)fl
				          : !strcmp(nm, "ceil") ? (int64_t)ceil(c)
				          : fr == 0.5 ? (int64_t)(nm[6] == 'p' && nm[13] == 'c' ? fl + 1 : fl)
				                      : (int64_t)floor(c + 0.5);
				t.iv[i] = k < 0 ? 0 : k >= x->dim[a] ? x->dim[a] - 1 : k;
			}
			E(im, ", ");
			int ok = put_literal(im->cur, &t);
			free(t.iv);
			if (!ok) {
				err(im, "more than %d distinct indices on axis %d", MAXLIT, a);
				return 0;
			}
			E(im, ", axis=$d)", (int64_t)a);
		}
		if (!nt)
			E(im, " + 0");
		st_end(im);
		return 1;
	}
	if (R != 4) {
		err(im, "input of rank %d: linear resizing of (N, C, H, W) is supported", R);
		return 0;
	}
	int ac = !strcmp(ct, "align_corners");
	if (!ac && strcmp(ct, "half_pixel") && strcmp(ct, "pytorch_half_pixel")) {
		err(im, "coordinate_transformation_mode '%s' is not supported in linear mode "
		        "(align_corners, half_pixel, pytorch_half_pixel are)", ct);
		return 0;
	}
	if (out[0] != x->dim[0] || out[1] != x->dim[1]) {
		err(im, "resizing N or C is not supported");
		return 0;
	}
	for (int a = 2; a < 4; a++) {
		// (align_corners too: ONNX's length_resized is in * scale,
		// unrounded, where scales are given.)
		if ((!ac || from_scales) && (double)x->dim[a] * scale[a] != (double)out[a]) {
			err(im, "scale %g on axis %d is not output / input (%lld / %lld): torch's coordinates "
			        "would differ", scale[a], a, (long long)out[a], (long long)x->dim[a]);
			return 0;
		}
		if (attr_i(n, "antialias", 0) && out[a] < x->dim[a]) {
			err(im, "antialiased downsampling is not supported");
			return 0;
		}
		if (!strcmp(ct, "pytorch_half_pixel") && out[a] == 1 && x->dim[a] != 1) {
			err(im, "pytorch_half_pixel to one pixel is not supported");
			return 0;
		}
	}
	st_begin(im, o->name);
	E(im, "upsample_bilinear($v, size=$L, align_corners=$d)", x, out + 2, 2, (int64_t)ac);
	st_end(im);
	return 1;
}

// Einsum as a broadcast product summed: every operand's axes permuted
// into one order of all the equation's letters (the output's first, then
// the summed ones), reshaped with 1 for the letters it lacks, multiplied
// (the parser broadcasts) and summed over the letters the output lacks,
// which leaves the output's letters in its order.  Repeated letters in one
// operand (a diagonal) and ellipses are not yet.
static int
op_einsum(Imp *im, const Onnx__NodeProto *n, OVal *o)
{
	char eq[256];
	const char *e = attr_s(n, "equation", "", eq, sizeof eq);
	char terms[16][MAXRANK + 1], out[MAXRANK + 1] = "";
	int nt = 0, len = 0, has_arrow = 0;
	terms[0][0] = 0;
	for (const char *c = e; *c; c++) {
		if (*c == ' ')
			continue;
		if (*c == ',' || (c[0] == '-' && c[1] == '>')) {
			if (has_arrow || nt >= 15) {
				err(im, "the equation '%s' is not understood", e);
				return 0;
			}
			if (*c == '-') {
				has_arrow = 1;
				c++;
			}
			terms[nt][len] = 0;
			nt++;
			len = 0;
			terms[nt][0] = 0;
			continue;
		}
		if (*c == '.') {
			err(im, "an ellipsis in the equation is not supported yet");
			return 0;
		}
		if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z')) || len >= MAXRANK) {
			err(im, "the equation '%s' is not understood (letters, at most %d per term)", e,
			    MAXRANK);
			return 0;
		}
		terms[nt][len++] = *c;
		terms[nt][len] = 0;
	}
	int nin = nt + 1;
	if (has_arrow) {
		nin = nt;
		memcpy(out, terms[nt], sizeof out);
	}
	if (nin < 1 || nin != (int)n->n_input) {
		err(im, "the equation has %d operands, the node %zu inputs", nin, n->n_input);
		return 0;
	}
	// Every letter's size, and how often it appears.
	int64_t size[128];
	int count[128] = {0};
	OVal *in[16];
	for (int i = 0; i < nin; i++) {
		if (!(in[i] = in_val(im, n, (size_t)i, 0)))
			return 0;
		if ((int)strlen(terms[i]) != in[i]->rank) {
			err(im, "term '%s' for an input of rank %d", terms[i], in[i]->rank);
			return 0;
		}
		for (int k = 0; terms[i][k]; k++) {
			int l = terms[i][k];
			if (strchr(terms[i] + k + 1, l)) {
				err(im, "a letter repeated in one term (a diagonal) is not supported yet");
				return 0;
			}
			if (count[l] && size[l] != in[i]->dim[k]) {
				err(im, "letter '%c' has sizes %lld and %lld", l, (long long)size[l],
				    (long long)in[i]->dim[k]);
				return 0;
			}
			size[l] = in[i]->dim[k];
			count[l]++;
		}
	}
	if (!has_arrow) { // implicit: the letters seen once, in alphabetical order
		int k = 0;
		for (int l = 'A'; l <= 'z'; l++)
			if (count[l] == 1 && k < MAXRANK)
				out[k++] = (char)l;
		out[k] = 0;
	}
	char order[17 * MAXRANK];
	int R = 0;
	for (int k = 0; out[k]; k++) {
		if (!count[(int)out[k]] || strchr(out + k + 1, out[k])) {
			err(im, "output letter '%c' is in no input, or repeated", out[k]);
			return 0;
		}
		order[R++] = out[k];
	}
	int nout = R;
	for (int i = 0; i < nin; i++)
		for (int k = 0; terms[i][k]; k++)
			if (!memchr(order, terms[i][k], (size_t)R))
				order[R++] = terms[i][k];
	if (R > MAXRANK) {
		err(im, "%d distinct letters (at most %d)", R, MAXRANK);
		return 0;
	}
	o->dtype = in[0]->dtype;
	o->rank = nout;
	for (int k = 0; k < nout; k++)
		o->dim[k] = size[(int)order[k]];
	st_begin(im, o->name);
	if (R > nout)
		E(im, "sum(");
	for (int i = 1; i < nin; i++)
		E(im, "mul(");
	for (int i = 0; i < nin; i++) {
		int64_t perm[MAXRANK], shape[MAXRANK];
		int k = 0, ident = 1;
		for (int a = 0; a < R; a++) {
			const char *pos = strchr(terms[i], order[a]);
			shape[a] = pos ? size[(int)order[a]] : 1;
			if (pos) {
				perm[k] = pos - terms[i];
				ident &= perm[k] == k;
				k++;
			}
		}
		int full = k == R;
		if (!full)
			E(im, "reshape(");
		if (!ident)
			E(im, "permute(");
		E(im, "$v", in[i]);
		if (!ident)
			E(im, ", perm=$L)", perm, k);
		if (!full)
			E(im, ", shape=$L)", shape, R);
		E(im, i ? ")" : "");
		if (i + 1 < nin)
			E(im, ", ");
	}
	if (R > nout) {
		int64_t ax[MAXRANK];
		for (int a = nout; a < R; a++)
			ax[a - nout] = a;
		E(im, ", axes=$L)", ax, R - nout);
	}
	st_end(im);
	return 1;
}

// LSTM, GRU and RNN as scans (docs/IR.md, "Recurrence: scan"): per
// direction, the input projections X W' + Wb of every step are one product
// before the loop (a sequence of the scan), and a step function, written
// before forward, computes the gates from it and H R' (R' an invariant),
// with ONNX's gate orders (LSTM i o f c, GRU z r h) and default
// activations.  A reverse direction is scan's reverse, whose per-step
// outputs keep the time order, as ONNX's Y does.  Outputs: Y (T, D, B, H),
// Y_h and Y_c (D, B, H); layout 1 puts the batch first.
static int
op_rnn(Imp *im, const Onnx__NodeProto *n, OVal *x, OVal *outs, int *nout)
{
	const char *op = n->op_type;
	int lstm = !strcmp(op, "LSTM"), gru = !strcmp(op, "GRU"), G = lstm ? 4 : gru ? 3 : 1;
	OVal *w = in_val(im, n, 1, 0), *r = in_val(im, n, 2, 0), *b = in_val(im, n, 3, 1),
	     *sl = in_val(im, n, 4, 1), *h0 = in_val(im, n, 5, 1), *c0 = lstm ? in_val(im, n, 6, 1) : NULL;
	if (im->failed)
		return 0;
	if (lstm && n->n_input > 7 && *n->input[7]) {
		err(im, "peepholes (P) are not supported yet");
		return 0;
	}
	char db[32];
	const char *dir = attr_s(n, "direction", "forward", db, sizeof db);
	int D = !strcmp(dir, "bidirectional") ? 2 : 1, rev = !strcmp(dir, "reverse");
	if (D == 1 && !rev && strcmp(dir, "forward")) {
		err(im, "direction '%s'", dir);
		return 0;
	}
	if (attr(n, "activations") || attr(n, "clip") || attr_i(n, "input_forget", 0)) {
		err(im, "activations, clip and input_forget other than the defaults are not supported yet");
		return 0;
	}
	int layout = (int)attr_i(n, "layout", 0);
	if (x->rank != 3 || w->rank != 3 || r->rank != 3) {
		err(im, "X, W and R must have rank 3");
		return 0;
	}
	int64_t T = layout ? x->dim[1] : x->dim[0], B = layout ? x->dim[0] : x->dim[1], I = x->dim[2];
	int64_t H = attr_i(n, "hidden_size", r->dim[2]);
	if (w->dim[0] != D || w->dim[1] != G * H || w->dim[2] != I || r->dim[0] != D ||
	    r->dim[1] != G * H || r->dim[2] != H || (b && (b->rank != 2 || b->dim[0] != D ||
	                                                   b->dim[1] != 2 * G * H))) {
		err(im, "W, R or B do not have the shapes of %lld directions, %d gates, hidden size %lld "
		        "and input size %lld", (long long)D, G, (long long)H, (long long)I);
		return 0;
	}
	if (sl) {
		int all = sl->iv && numel(sl) == B;
		for (int64_t i = 0; all && i < B; i++)
			all = sl->iv[i] == T;
		if (!all) {
			err(im, "sequence_lens other than the full length for every sample are not supported "
			        "yet");
			return 0;
		}
	}
	OVal *st[2] = {h0, c0};
	for (int k = 0; k < 2; k++)
		if (st[k] && (st[k]->rank != 3 || st[k]->dim[layout] != D || st[k]->dim[1 - layout] != B ||
		              st[k]->dim[2] != H)) {
			err(im, "initial_h or initial_c do not have shape (%lld, %lld, %lld)%s", (long long)D,
			    (long long)B, (long long)H, layout ? " with the first two axes swapped (layout 1)" : "");
			return 0;
		}
	if (T < 1) {
		err(im, "a sequence of length 0");
		return 0;
	}
	const char *dt = dtype_ir(x->dtype);
	// The step function, one per node.
	int fnum = im->ndefs++;
	FILE *f = im->defs;
	fprintf(f, "def __onnx_%s_%d(", op, fnum);
	if (lstm)
		fprintf(f, "h: %s[%lld, %lld], c: %s[%lld, %lld], xw: %s[%lld, %lld], rt: %s[%lld, %lld]) {\n",
		        dt, (long long)B, (long long)H, dt, (long long)B, (long long)H, dt, (long long)B,
		        (long long)(4 * H), dt, (long long)H, (long long)(4 * H));
	else
		fprintf(f, "h: %s[%lld, %lld], xw: %s[%lld, %lld], rt: %s[%lld, %lld], rb: %s[%lld]) {\n",
		        dt, (long long)B, (long long)H, dt, (long long)B, (long long)(G * H), dt,
		        (long long)H, (long long)(G * H), dt, (long long)(G * H));
#define GATE(v, k) "slice(" v ", start=[0, %lld], end=[%lld, %lld], step=[1, 1])", (long long)((k) * H), (long long)B, (long long)(((k) + 1) * H)
	if (lstm) {
		fputs("  z = xw + h @ rt\n", f);
		fprintf(f, "  i = sigmoid(" GATE("z", 0));
		fprintf(f, ")\n  o = sigmoid(" GATE("z", 1));
		fprintf(f, ")\n  fg = sigmoid(" GATE("z", 2));
		fprintf(f, ")\n  g = tanh(" GATE("z", 3));
		fputs(")\n  c2 = fg * c + i * g\n  h2 = o * tanh(c2)\n  return h2, c2, h2\n}\n\n", f);
	} else if (gru) {
		int lbr = (int)attr_i(n, "linear_before_reset", 0);
		fputs("  hr = h @ rt + rb\n", f);
		fprintf(f, "  z = sigmoid(" GATE("xw", 0));
		fprintf(f, " + " GATE("hr", 0));
		fprintf(f, ")\n  r = sigmoid(" GATE("xw", 1));
		fprintf(f, " + " GATE("hr", 1));
		fprintf(f, ")\n  hc = tanh(" GATE("xw", 2));
		if (lbr)
			fprintf(f, " + r * " GATE("hr", 2));
		else {
			// (r h) Rh' + Rbh: the third gate's columns of rt and rb.
			fprintf(f, " + (r * h) @ slice(rt, start=[0, %lld], end=[%lld, %lld], step=[1, 1])",
			        (long long)(2 * H), (long long)H, (long long)(3 * H));
			fprintf(f, " + slice(rb, start=[%lld], end=[%lld], step=[1])", (long long)(2 * H),
			        (long long)(3 * H));
		}
		fputs(")\n  h2 = (1 - z) * hc + z * h\n  return h2, h2\n}\n\n", f);
	} else
		fputs("  h2 = tanh(xw + h @ rt + rb)\n  return h2, h2\n}\n\n", f);
#undef GATE
	// Per direction: the projections, the scan, its values.
	const char *on = n->output[0] && *n->output[0] ? n->output[0] : "rnn";
	char nm[8][4200];
	for (int d = 0; d < D; d++) {
		char *xw = nm[4 * d], *rt = nm[4 * d + 1], *sc = nm[4 * d + 2];
		snprintf(xw, 4200, "%s:xw%d", on, d);
		snprintf(rt, 4200, "%s:rt%d", on, d);
		snprintf(sc, 4200, "%s:scan%d", on, d);
		int64_t ws[3] = {d, 0, 0}, we[3] = {d + 1, G * H, I}, one3[3] = {1, 1, 1};
		int64_t rs[3] = {d, 0, 0}, re[3] = {d + 1, G * H, H};
		fputs("  ", im->cur);
		put_name(im->cur, xw);
		E(im, " = ");
		if (b)
			E(im, "add(");
		int64_t xs[2] = {T * B, I}, ps[3] = {T, B, G * H}, wsh[2] = {G * H, I};
		E(im, "reshape(matmul(reshape(");
		E(im, layout ? "permute($v, perm=[1, 0, 2])" : "$v", x);
		E(im, ", shape=$L), permute(reshape(slice($v, start=$L, end=$L, step=$L), shape=$L), perm=[1, "
		      "0])), shape=$L)",
		  xs, 2, w, ws, 3, we, 3, one3, 3, wsh, 2, ps, 3);
		if (b) {
			// LSTM: both biases into the projections; GRU and RNN: Wb
			// here, Rb inside the step (GRU's reset multiplies it).
			int64_t bs[2] = {d, 0}, be[2] = {d + 1, G * H}, rbs[2] = {d, G * H},
			        rbe[2] = {d + 1, 2 * G * H}, one2[2] = {1, 1}, gh[1] = {G * H};
			if (lstm)
				E(im, ", reshape(add(slice($v, start=$L, end=$L, step=$L), slice($v, start=$L, end=$L, "
				      "step=$L)), shape=$L))",
				  b, bs, 2, be, 2, one2, 2, b, rbs, 2, rbe, 2, one2, 2, gh, 1);
			else
				E(im, ", reshape(slice($v, start=$L, end=$L, step=$L), shape=$L))", b, bs, 2, be, 2,
				  one2, 2, gh, 1);
		}
		st_end(im);
		int64_t rsh[2] = {G * H, H};
		fputs("  ", im->cur);
		put_name(im->cur, rt);
		E(im, " = permute(reshape(slice($v, start=$L, end=$L, step=$L), shape=$L), perm=[1, 0])", r,
		  rs, 3, re, 3, one3, 3, rsh, 2);
		st_end(im);
		fputs("  ", im->cur);
		put_name(im->cur, sc);
		E(im, " = scan(__onnx_$s_$d, ", op, (int64_t)fnum);
		for (int k = 0; k < (lstm ? 2 : 1); k++) {
			// (D, B, H), or (B, D, H) in layout 1.
			int64_t s0[3] = {layout ? 0 : d, layout ? d : 0, 0},
			        e0[3] = {layout ? B : d + 1, layout ? d + 1 : B, H}, bh[2] = {B, H};
			if (st[k])
				E(im, "reshape(slice($v, start=$L, end=$L, step=$L), shape=$L), ", st[k], s0, 3, e0,
				  3, one3, 3, bh, 2);
			else
				E(im, "full(value=0, shape=$L, dtype=$s), ", bh, 2, dt);
		}
		put_name(im->cur, xw);
		E(im, ", ");
		put_name(im->cur, rt);
		if (!lstm) {
			int64_t bs[2] = {d, G * H}, be[2] = {d + 1, 2 * G * H}, one2[2] = {1, 1}, gh[1] = {G * H};
			if (b)
				E(im, ", reshape(slice($v, start=$L, end=$L, step=$L), shape=$L)", b, bs, 2, be, 2,
				  one2, 2, gh, 1);
			else
				E(im, ", full(value=0, shape=$L, dtype=$s)", gh, 1, dt);
		}
		E(im, ", ncarry=$d, nxs=1, reverse=$d)", (int64_t)(lstm ? 2 : 1), (int64_t)(rev || d == 1));
		st_end(im);
	}
	// Y: the per-step outputs, (T, 1, B, H) per direction, joined.
	int64_t y4[4] = {T, 1, B, H}, s3[3] = {1, B, H};
	for (int k = 0; k < 3 && k < (int)n->n_output; k++) {
		if (!*n->output[k] || (k == 2 && !lstm))
			continue;
		OVal *o = &outs[k];
		int idx = k == 0 ? (lstm ? 2 : 1) : k - 1; // the scan's value
		st_begin(im, o->name);
		if (layout)
			E(im, "permute(");
		if (D == 2)
			E(im, "concat(");
		for (int d = 0; d < D; d++) {
			E(im, d ? ", reshape(get(" : "reshape(get(");
			put_name(im->cur, nm[4 * d + 2]);
			if (k == 0)
				E(im, ", index=$d), shape=$L)", (int64_t)idx, y4, 4);
			else
				E(im, ", index=$d), shape=$L)", (int64_t)idx, s3, 3);
		}
		if (D == 2)
			E(im, ", axis=$d)", (int64_t)(k == 0 ? 1 : 0));
		if (layout)
			E(im, k == 0 ? ", perm=[2, 0, 1, 3])" : ", perm=[1, 0, 2])");
		st_end(im);
		o->dtype = x->dtype;
		if (k == 0) {
			o->rank = 4;
			int64_t dd[4] = {T, D, B, H}, dl[4] = {B, T, D, H};
			memcpy(o->dim, layout ? dl : dd, sizeof dd);
		} else {
			o->rank = 3;
			int64_t dd[3] = {D, B, H}, dl[3] = {B, D, H};
			memcpy(o->dim, layout ? dl : dd, sizeof dd);
		}
		*nout = k + 1;
	}
	if ((int)n->n_output > (lstm ? 3 : 2)) {
		err(im, "%zu outputs", n->n_output);
		return 0;
	}
	return 1;
}

// The IR op of an elementwise ONNX op.
static const char *
ew_ir(const char *op)
{
	static const char *const map[][2] = {
	    {"Add", "add"},         {"Sub", "sub"},      {"Mul", "mul"},
	    {"Div", "div"},         {"Pow", "pow"},      {"Relu", "relu"},
	    {"Tanh", "tanh"},       {"Sigmoid", "sigmoid"}, {"Neg", "neg"},
	    {"Exp", "exp"},         {"Log", "log"},      {"Sqrt", "sqrt"},
	    {"Erf", "erf"},         {"Abs", "abs"},      {"Floor", "floor"},
	    {"Sin", "sin"},         {"Cos", "cos"},      {"Softplus", "softplus"},
	    {"Sign", "sign"},       {"Equal", "eq"},     {"Less", "lt"},
	    {"Greater", "gt"},      {"LessOrEqual", "le"}, {"GreaterOrEqual", "ge"},
	    {"Not", "not"},         {"And", "and"},      {"Or", "or"},
	    {"Max", "maximum"},     {"Min", "minimum"},  {"Where", "where"}};
	for (size_t i = 0; i < sizeof map / sizeof *map; i++)
		if (!strcmp(op, map[i][0]))
			return map[i][1];
	return NULL;
}

// The ops that are computed here when their inputs are known: the
// elementwise ones and the shape ops (the rest handle it themselves).
static int
foldable(const char *op)
{
	return is_ew(op) || !strcmp(op, "Reshape") || !strcmp(op, "Flatten") ||
	       !strcmp(op, "Squeeze") || !strcmp(op, "Unsqueeze") || !strcmp(op, "Concat") ||
	       !strcmp(op, "Expand");
}

// A reduction's IR form around x (o's shape is set by the caller).
static void
put_reduce(Imp *im, const char *op, OVal *x, const int64_t *ax, int k, int keep)
{
	const char *pre = "", *red = "sum", *arg = "$v", *post = "";
	if (!strcmp(op, "ReduceMean"))
		red = "mean";
	else if (!strcmp(op, "ReduceMax"))
		red = "max";
	else if (!strcmp(op, "ReduceMin"))
		red = "min";
	else if (!strcmp(op, "ReduceLogSumExp"))
		red = "logsumexp";
	else if (!strcmp(op, "ReduceSumSquare"))
		arg = "mul($v, $v)";
	else if (!strcmp(op, "ReduceL1"))
		arg = "abs($v)";
	else if (!strcmp(op, "ReduceL2")) {
		pre = "sqrt(";
		arg = "mul($v, $v)";
		post = ")";
	} else if (!strcmp(op, "ReduceLogSum")) {
		pre = "log(";
		post = ")";
	}
	E(im, "$s$s(", pre, red);
	E(im, arg, x, x);
	E(im, ", axes=$L, keepdim=$d)$s", ax, k, (int64_t)(keep != 0), post);
}

// The single-output ops; o's name is set, the rest here.  0 after an
// error.
static int
op_one(Imp *im, const Onnx__NodeProto *n, OVal *x, OVal *o)
{
	const char *op = n->op_type;
	int64_t ax[MAXRANK];
	o->dtype = x->dtype;
	if (!strcmp(op, "Where") || (ew_ir(op) && strcmp(op, "Relu") && n->n_input > 1) ||
	    !strcmp(op, "Max") || !strcmp(op, "Min")) {
		// Elementwise with broadcasting; Max and Min take any count.
		OVal *in[64];
		int k = (int)n->n_input;
		if (k > 64 || k < 1) {
			err(im, "%d inputs (1 to 64)", k);
			return 0;
		}
		for (int i = 0; i < k; i++)
			if (!(in[i] = in_val(im, n, (size_t)i, 0)))
				return 0;
		if (!bcast(im, o, in, k))
			return 0;
		o->dtype = is_cmp(op) ? ONNX_BOOL : in[!strcmp(op, "Where")]->dtype;
		st_begin(im, o->name);
		if (k == 1)
			E(im, "($v + 0)", in[0]);
		else if (!strcmp(op, "Where"))
			E(im, "where($v, $v, $v)", in[0], in[1], in[2]);
		else {
			for (int i = 1; i < k; i++)
				E(im, "$s(", ew_ir(op));
			E(im, "$v", in[0]);
			for (int i = 1; i < k; i++)
				E(im, ", $v)", in[i]);
		}
		st_end(im);
		return 1;
	}
	o->rank = x->rank;
	memcpy(o->dim, x->dim, sizeof o->dim);
	st_begin(im, o->name);
	if (ew_ir(op))
		E(im, "$s($v)", ew_ir(op), x);
	else if (!strcmp(op, "Reciprocal"))
		E(im, "div(1, $v)", x);
	else if (!strcmp(op, "LeakyRelu"))
		// relu(x) - alpha relu(-x): x for x > 0, alpha x below, for any alpha.
		E(im, "sub(relu($v), mul($g, relu(neg($v))))", x, attr_f(n, "alpha", 0.01), x);
	else if (!strcmp(op, "Gelu")) {
		char buf[16];
		const char *ap = attr_s(n, "approximate", "none", buf, sizeof buf);
		if (!strcmp(ap, "tanh"))
			// x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
			E(im, "mul(mul(0.5, $v), add(1, tanh(mul(0.79788456080286541, add($v, mul(0.044715, "
			      "pow($v, 3)))))))",
			  x, x, x);
		else if (!strcmp(ap, "none"))
			// x/2 (1 + erf(x / sqrt 2))
			E(im, "mul(mul(0.5, $v), add(1, erf(mul($v, 0.70710678118654757))))", x, x);
		else {
			err(im, "approximate '%s' is neither 'none' nor 'tanh'", ap);
			return 0;
		}
	} else if (!strcmp(op, "Softmax") || !strcmp(op, "LogSoftmax")) {
		int a = one_axis(im, attr_i(n, "axis", -1), x->rank);
		if (a < 0)
			return 0;
		E(im, "$s($v, axis=$d)", !strcmp(op, "Softmax") ? "softmax" : "log_softmax", x, (int64_t)a);
	} else if (!strcmp(op, "Clip")) {
		// clamp with known bounds (inputs from opset 11, attributes before).
		double lo = -INFINITY, hi = INFINITY;
		OVal *mn = in_val(im, n, 1, 1), *mx = in_val(im, n, 2, 1);
		if (im->failed)
			return 0;
		if ((mn && (numel(mn) != 1 || const_f(mn, &lo, 1) != 1)) ||
		    (mx && (numel(mx) != 1 || const_f(mx, &hi, 1) != 1))) {
			err(im, "the bounds are not scalars known at import");
			return 0;
		}
		if (x->dtype == ONNX_FLOAT) // the comparison is in f32
			lo = (float)lo, hi = (float)hi;
		E(im, "clamp($v, min=$g, max=$g)", x, lo, hi);
	} else if (!strcmp(op, "Cast")) {
		if (!(o->dtype = cast_to(im, n)))
			return 0;
		if (!dtype_ir(x->dtype)) {
			err(im, "a cast from ONNX dtype %d", x->dtype);
			return 0;
		}
		E(im, "cast($v, dtype=$s)", x, dtype_ir(o->dtype));
	} else if (!strcmp(op, "Gemm")) {
		OVal *y = in_val(im, n, 1, 0), *c = in_val(im, n, 2, 1);
		if (!y || im->failed)
			return 0;
		int ta = (int)attr_i(n, "transA", 0), tb = (int)attr_i(n, "transB", 0);
		if (x->rank != 2 || y->rank != 2) {
			err(im, "operands of rank %d and %d (2 and 2)", x->rank, y->rank);
			return 0;
		}
		o->dim[0] = ta ? x->dim[1] : x->dim[0];
		o->dim[1] = tb ? y->dim[0] : y->dim[1];
		if ((ta ? x->dim[0] : x->dim[1]) != (tb ? y->dim[1] : y->dim[0])) {
			err(im, "inner dimensions differ");
			return 0;
		}
		// alpha A' B' + beta C, with C broadcast to (M, N).
		double alpha = attr_f(n, "alpha", 1), beta = attr_f(n, "beta", 1);
		if (c)
			E(im, "add(");
		if (alpha != 1)
			E(im, "mul($g, ", alpha);
		E(im, ta ? "matmul(permute($v, perm=[1, 0]), " : "matmul($v, ", x);
		E(im, tb ? "permute($v, perm=[1, 0]))" : "$v)", y);
		if (alpha != 1)
			E(im, ")");
		if (c)
			E(im, beta != 1 ? ", mul($g, $v))" : ", $v)", beta, c);
	} else if (!strncmp(op, "Reduce", 6)) {
		int k = node_axes(im, n, 1, x->rank, ax);
		if (k < 0)
			return 0;
		int keep = (int)attr_i(n, "keepdims", 1);
		if (!k && attr_i(n, "noop_with_empty_axes", 0)) {
			E(im, "($v + 0)", x); // no axes: the identity
		} else {
			if (!k) // no axes: every axis
				for (; k < x->rank; k++)
					ax[k] = k;
			o->rank = 0;
			for (int i = 0; i < x->rank; i++)
				if (!has_axis(ax, k, i))
					o->dim[o->rank++] = x->dim[i];
				else if (keep)
					o->dim[o->rank++] = 1;
			put_reduce(im, op, x, ax, k, keep);
		}
	} else if (!strcmp(op, "GlobalAveragePool") || !strcmp(op, "GlobalMaxPool")) {
		if (x->rank < 3) {
			err(im, "input of rank %d (at least 3)", x->rank);
			return 0;
		}
		int k = 0;
		for (int i = 2; i < x->rank; i++) {
			ax[k++] = i;
			o->dim[i] = 1;
		}
		E(im, "$s($v, axes=$L, keepdim=1)", op[6] == 'A' ? "mean" : "max", x, ax, k);
	} else if (!strcmp(op, "Transpose")) {
		int64_t p[MAXRANK];
		int k = attr_ints(n, "perm", p, MAXRANK);
		if (!attr(n, "perm"))
			for (k = 0; k < x->rank; k++)
				p[k] = x->rank - 1 - k;
		int seen[MAXRANK] = {0};
		for (int i = 0; i < k; i++)
			if (p[i] < 0 || p[i] >= x->rank || seen[p[i]]++)
				k = -1;
		if (k != x->rank) {
			err(im, "'perm' is not a permutation of %d axes", x->rank);
			return 0;
		}
		for (int i = 0; i < k; i++)
			o->dim[i] = x->dim[p[i]];
		E(im, "permute($v, perm=$L)", x, p, k);
	} else {
		err(im, "internal: no rule"); // is_supported and the dispatch disagree
		return 0;
	}
	st_end(im);
	return 1;
}

// The shape ops, whose result has x's elements in a new shape (Reshape,
// Flatten, Squeeze, Unsqueeze) or broadcast (Expand), and Concat: o's
// shape; the statement unless x is known (then folded).
static int
op_shape(Imp *im, const Onnx__NodeProto *n, OVal *x, OVal *o)
{
	const char *op = n->op_type;
	int64_t ax[MAXRANK];
	o->dtype = x->dtype;
	if (!strcmp(op, "Concat")) {
		if (n->n_input > 1024) {
			err(im, "more than 1024 inputs");
			return 0;
		}
		if (!x->rank) {
			err(im, "inputs of rank 0");
			return 0;
		}
		int a = one_axis(im, attr_i(n, "axis", 0), x->rank);
		if (a < 0)
			return 0;
		OVal *in[1024];
		int allk = 1;
		o->rank = x->rank;
		memcpy(o->dim, x->dim, sizeof o->dim);
		o->dim[a] = 0;
		for (size_t i = 0; i < n->n_input; i++) {
			if (!(in[i] = in_val(im, n, i, 0)))
				return 0;
			for (int j = 0; j < x->rank; j++)
				if (in[i]->rank != x->rank || (j != a && in[i]->dim[j] != x->dim[j])) {
					err(im, "input '%s' differs in shape off the axis", in[i]->name);
					return 0;
				}
			o->dim[a] += in[i]->dim[a];
			allk &= known(in[i]);
		}
		if (allk) {
			if (!dims_ok(im, o, "value"))
				return 0;
			int64_t nn = numel(o), inner = 1;
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
		st_begin(im, o->name);
		E(im, "concat(");
		for (size_t i = 0; i < n->n_input; i++)
			E(im, "$v, ", in[i]);
		E(im, "axis=$d)", (int64_t)a);
		st_end(im);
		return 1;
	}
	if (!strcmp(op, "Expand")) {
		OVal *s = in_val(im, n, 1, 0);
		if (!s)
			return 0;
		if (!s->iv || s->rank != 1 || numel(s) > MAXRANK) {
			err(im, "the shape '%s' is not known at import", s->name);
			return 0;
		}
		OVal t = {.rank = (int)numel(s)};
		for (int i = 0; i < t.rank; i++)
			t.dim[i] = s->iv[i];
		if (!dims_ok(im, &t, "shape"))
			return 0;
		OVal *bp[2] = {x, &t};
		if (!bcast(im, o, bp, 2) || !dims_ok(im, o, "value"))
			return 0;
		if (known(x)) {
			int64_t nn = numel(o), *src = xcalloc((size_t)(nn ? nn : 1), sizeof *src);
			for (int64_t e = 0; e < nn; e++)
				src[e] = bidx(x, o, e);
			int ok = gather_known(im, x, o, src);
			free(src);
			return ok;
		}
		st_begin(im, o->name);
		E(im, "broadcast($v, shape=$L)", x, o->dim, o->rank);
		st_end(im);
		return 1;
	}
	if (!strcmp(op, "Flatten")) {
		int64_t a = attr_i(n, "axis", 1);
		if (a < 0)
			a += x->rank;
		if (a < 0 || a > x->rank) {
			err(im, "axis %lld is out of range for rank %d", (long long)attr_i(n, "axis", 1), x->rank);
			return 0;
		}
		o->rank = 2;
		o->dim[0] = o->dim[1] = 1;
		for (int i = 0; i < x->rank; i++)
			o->dim[i >= a] *= x->dim[i];
	} else if (!strcmp(op, "Reshape")) {
		OVal *s = in_val(im, n, 1, 0);
		if (!s)
			return 0;
		if (!s->iv || s->rank != 1) {
			err(im, "the shape '%s' is not known at import", s->name);
			return 0;
		}
		if (numel(s) > MAXRANK) {
			err(im, "more than %d dimensions", MAXRANK);
			return 0;
		}
		int k = (int)numel(s), infer = -1;
		o->rank = k;
		int64_t known_ = 1;
		for (int i = 0; i < k; i++) {
			o->dim[i] = s->iv[i];
			if (o->dim[i] < -1 || o->dim[i] > ((int64_t)1 << MAXNUMEL_LOG2)) {
				err(im, "invalid dimension %lld", (long long)o->dim[i]);
				return 0;
			}
			if (o->dim[i] == 0 && !attr_i(n, "allowzero", 0)) {
				if (i >= x->rank) {
					err(im, "dimension %d is 0 (copy), beyond the input's rank", i);
					return 0;
				}
				o->dim[i] = x->dim[i]; // 0 copies the input's dimension
			}
			if (o->dim[i] == -1 && infer < 0)
				infer = i;
			else if (o->dim[i] < 0) {
				err(im, "invalid dimension %lld", (long long)o->dim[i]);
				return 0;
			} else
				known_ *= o->dim[i];
			if (known_ > ((int64_t)1 << MAXNUMEL_LOG2)) {
				err(im, "the shape is too large");
				return 0;
			}
		}
		if (infer >= 0)
			o->dim[infer] = known_ ? numel(x) / known_ : 0;
	} else { // Squeeze, Unsqueeze
		int sq = !strcmp(op, "Squeeze"), outrank = x->rank;
		if (!sq) {
			// Unsqueeze's axes count in the output's rank.
			const OVal *ai = n->n_input > 1 && *n->input[1] ? find(im, n->input[1]) : NULL;
			const Onnx__AttributeProto *a = attr(n, "axes");
			int64_t cnt = ai && ai->iv ? numel(ai) : a ? (int64_t)a->n_ints : 0;
			outrank = x->rank + (int)(cnt < MAXRANK + 1 ? cnt : MAXRANK + 1);
			if (outrank > MAXRANK) {
				err(im, "rank %d (at most %d)", outrank, MAXRANK);
				return 0;
			}
		}
		int k = node_axes(im, n, 1, outrank, ax);
		if (k < 0)
			return 0;
		o->rank = 0;
		if (sq) {
			for (int i = 0; i < x->rank; i++) {
				if (k ? has_axis(ax, k, i) : x->dim[i] == 1) {
					if (x->dim[i] != 1) {
						err(im, "axis %d has dimension %lld, not 1", i, (long long)x->dim[i]);
						return 0;
					}
				} else
					o->dim[o->rank++] = x->dim[i];
			}
		} else {
			if (!k) {
				err(im, "no axes");
				return 0;
			}
			for (int i = 0, j = 0; i < outrank; i++)
				o->dim[o->rank++] = has_axis(ax, k, i) ? 1 : x->dim[j++];
		}
	}
	if (!dims_ok(im, o, "value"))
		return 0;
	if (numel(o) != numel(x)) {
		err(im, "%lld elements cannot take the new shape", (long long)numel(x));
		return 0;
	}
	if (known(x)) { // the same elements
		int64_t nn = numel(o);
		if (!alloc_known(im, o))
			return 0;
		for (int64_t e = 0; e < nn; e++)
			set_k(o, e, x, e);
		return 1;
	}
	st_begin(im, o->name);
	E(im, "reshape($v, shape=$L)", x, o->dim, o->rank);
	st_end(im);
	return 1;
}

// The value of a Constant node (a tensor, or value_float(s) /
// value_int(s)), known; 0 after an error.
static int
op_constant(Imp *im, const Onnx__NodeProto *n, OVal *o)
{
	const Onnx__AttributeProto *a;
	if ((a = attr(n, "value")) && a->t) {
		const Onnx__TensorProto *t = a->t;
		if (!dtype_ir(t->data_type)) {
			err(im, "a value of ONNX dtype %d: only float (1), double (11), int64 (7) and bool "
			        "(9) are supported", t->data_type);
			return 0;
		}
		if (t->n_dims > MAXRANK) {
			err(im, "rank %zu (at most %d)", t->n_dims, MAXRANK);
			return 0;
		}
		if (t->has_data_location && t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL) {
			err(im, "external data is not supported yet");
			return 0;
		}
		o->dtype = t->data_type;
		o->rank = (int)t->n_dims;
		for (int i = 0; i < o->rank; i++)
			o->dim[i] = t->dims[i];
		if (!dims_ok(im, o, "Constant"))
			return 0;
		if (numel(o) > MAXFOLD) {
			err(im, "a value of %lld elements (at most %d)", (long long)numel(o), MAXFOLD);
			return 0;
		}
		if (is_float(o->dtype))
			o->fv = tensor_fv(t, numel(o));
		else
			o->iv = tensor_iv(t, numel(o));
		if (!o->fv && !o->iv) {
			err(im, "the value's data does not have one element per position");
			return 0;
		}
		if (!numel(o)) { // known with no elements: a non-NULL array
			free(o->fv);
			free(o->iv);
			o->fv = NULL;
			o->iv = NULL;
			alloc_known(im, o);
		}
		return 1;
	}
	if ((a = attr(n, "value_float")) || (a = attr(n, "value_floats"))) {
		int many = !strcmp(a->name, "value_floats");
		o->dtype = ONNX_FLOAT;
		o->rank = many;
		o->dim[0] = many ? (int64_t)a->n_floats : 1;
		if (!alloc_known(im, o))
			return 0;
		for (int64_t i = 0; i < numel(o); i++)
			o->fv[i] = many ? a->floats[i] : a->f;
		return 1;
	}
	if ((a = attr(n, "value_int")) || (a = attr(n, "value_ints"))) {
		int many = !strcmp(a->name, "value_ints");
		o->dtype = ONNX_INT64;
		o->rank = many;
		o->dim[0] = many ? (int64_t)a->n_ints : 1;
		if (!alloc_known(im, o))
			return 0;
		for (int64_t i = 0; i < numel(o); i++)
			o->iv[i] = many ? a->ints[i] : a->i;
		return 1;
	}
	err(im, "only a tensor, float(s) or int(s) value is supported");
	return 0;
}

// Shape, Size, ConstantOfShape, Range: always known at import (shapes are
// static); ConstantOfShape of a large shape is written as `full`.
static int
op_known(Imp *im, const Onnx__NodeProto *n, OVal *o)
{
	const char *op = n->op_type;
	if (!strcmp(op, "Shape") || !strcmp(op, "Size")) {
		OVal *x = in_val(im, n, 0, 0);
		if (!x)
			return 0;
		o->dtype = ONNX_INT64;
		if (op[1] == 'i') {
			o->rank = 0;
			alloc_known(im, o);
			o->iv[0] = numel(x);
			return 1;
		}
		int64_t s = attr_i(n, "start", 0), e = attr_i(n, "end", x->rank);
		clamp_bounds(x->rank, &s, &e, 1);
		o->rank = 1;
		o->dim[0] = e > s ? e - s : 0;
		alloc_known(im, o);
		for (int64_t i = 0; i < o->dim[0]; i++)
			o->iv[i] = x->dim[s + i];
		return 1;
	}
	if (!strcmp(op, "ConstantOfShape")) {
		OVal *s = in_val(im, n, 0, 0);
		if (!s)
			return 0;
		if (!s->iv || s->rank != 1 || numel(s) > MAXRANK) {
			err(im, "the shape '%s' is not known at import", s->name);
			return 0;
		}
		o->rank = (int)numel(s);
		for (int i = 0; i < o->rank; i++)
			o->dim[i] = s->iv[i];
		if (!dims_ok(im, o, "value"))
			return 0;
		OVal val = {.dtype = ONNX_FLOAT, .rank = 0};
		const Onnx__AttributeProto *a = attr(n, "value");
		double f = 0;
		int64_t iv = 0;
		if (a && a->t) {
			if (!dtype_ir(a->t->data_type)) {
				err(im, "a value of ONNX dtype %d: only float (1), double (11), int64 (7) and "
				        "bool (9) are supported", a->t->data_type);
				return 0;
			}
			val.dtype = a->t->data_type;
			double *fv = is_float(val.dtype) ? tensor_fv(a->t, 1) : NULL;
			int64_t *ivp = is_float(val.dtype) ? NULL : tensor_iv(a->t, 1);
			if (!fv && !ivp) {
				err(im, "the value is not one element");
				return 0;
			}
			f = fv ? *fv : (double)*ivp;
			iv = ivp ? *ivp : 0;
			free(fv);
			free(ivp);
		}
		o->dtype = val.dtype;
		if (numel(o) > MAXLIT) { // data, not shape arithmetic
			st_begin(im, o->name);
			if (is_float(o->dtype))
				E(im, "full(value=$g, shape=$L, dtype=$s)", f, o->dim, o->rank, dtype_ir(o->dtype));
			else
				E(im, "full(value=$d, shape=$L, dtype=$s)", iv, o->dim, o->rank, dtype_ir(o->dtype));
			st_end(im);
			return 1;
		}
		if (!alloc_known(im, o))
			return 0;
		for (int64_t i = 0; i < numel(o); i++)
			if (o->fv)
				o->fv[i] = f;
			else
				o->iv[i] = iv;
		return 1;
	}
	// Range: ceil((limit - start) / delta) elements start + i delta.
	OVal *sv = in_val(im, n, 0, 0), *lv = in_val(im, n, 1, 0), *dv = in_val(im, n, 2, 0);
	if (im->failed)
		return 0;
	OVal *p[3] = {sv, lv, dv};
	double f[3];
	for (int i = 0; i < 3; i++)
		if (numel(p[i]) != 1 || const_f(p[i], &f[i], 1) != 1) {
			err(im, "'%s' is not a scalar known at import", p[i]->name);
			return 0;
		}
	o->dtype = sv->dtype;
	o->rank = 1;
	if (is_float(o->dtype)) {
		// A float initializer (a parameter elsewhere) is read here: the
		// result's length depends on it.
		double s = f[0], l = f[1], d = f[2];
		double cnt = d ? ceil((l - s) / d) : -1;
		if (!d || isnan(cnt) || cnt > MAXFOLD) {
			err(im, "a delta of 0, or more than %d elements", MAXFOLD);
			return 0;
		}
		o->dim[0] = cnt > 0 ? (int64_t)cnt : 0;
		if (!alloc_known(im, o))
			return 0;
		for (int64_t i = 0; i < o->dim[0]; i++)
			o->fv[i] = o->dtype == ONNX_FLOAT ? (double)(float)(s + (double)i * d) : s + (double)i * d;
		return 1;
	}
	int64_t s = ki(sv, 0), l = ki(lv, 0), d = ki(dv, 0);
	if (!d) {
		err(im, "a delta of 0");
		return 0;
	}
	double cnt = ceil(((double)l - (double)s) / (double)d);
	if (cnt > MAXFOLD) {
		err(im, "more than %d elements", MAXFOLD);
		return 0;
	}
	o->dim[0] = cnt > 0 ? (int64_t)cnt : 0;
	if (!alloc_known(im, o))
		return 0;
	for (int64_t i = 0; i < o->dim[0]; i++)
		o->iv[i] = s + i * d;
	return 1;
}

// One node: its statements, and its outputs' shapes.  0 after an error.
static int
import_node(Imp *im, const Onnx__NodeProto *n)
{
	const char *op = n->op_type;
	int rnn = !strcmp(op, "LSTM") || !strcmp(op, "GRU") || !strcmp(op, "RNN");
	im->node = n;
	if (!n->n_output || n->n_output > 256) {
		err(im, "%zu outputs (1 to 256)", n->n_output);
		return 0;
	}
	for (size_t i = 0; i < n->n_output; i++)
		// (A recurrent op's Y is optional too: Y_h may be all it gives.)
		if ((i == 0 && !name_ok(n->output[0]) && !(rnn && !*n->output[0])) ||
		    (*n->output[i] && !name_ok(n->output[i]))) {
			err(im, "output %zu has an empty name or a control character in it", i);
			return 0;
		}
	OVal outs[256];
	memset(outs, 0, sizeof outs[0] * n->n_output);
	for (size_t i = 0; i < n->n_output; i++)
		outs[i].name = n->output[i];
	int nout = 1, ok = 0;
	char *buf = NULL;
	size_t len = 0;
	im->cur = open_memstream(&buf, &len);
	OVal *x = NULL;
	OVal *o = &outs[0];
	if (!strcmp(op, "Constant"))
		ok = op_constant(im, n, o);
	else if (!strcmp(op, "Shape") || !strcmp(op, "Size") || !strcmp(op, "ConstantOfShape") ||
	         !strcmp(op, "Range"))
		ok = op_known(im, n, o);
	else if (!(x = in_val(im, n, 0, 0)))
		ok = 0;
	else if ((!strcmp(op, "Identity") || !strcmp(op, "Dropout")) && !known(x)) {
		// The same value under another name; Dropout is the identity in
		// inference (its mask all true).
		if (!strcmp(op, "Dropout")) {
			OVal *tm = in_val(im, n, 2, 1), *ratio = in_val(im, n, 1, 1);
			double rv = 0.5;
			int zero = ratio && numel(ratio) == 1 && const_f(ratio, &rv, 1) == 1 && rv == 0;
			// In training, a ratio of 0 keeps every element: the identity too.
			if (tm && (!tm->iv || tm->iv[0]) && !zero) {
				err(im, "training_mode is not false at import (dropout in training is not "
				        "supported)");
				goto out;
			}
			if (n->n_output > 1 && *n->output[1]) {
				outs[1].dtype = ONNX_BOOL;
				outs[1].rank = x->rank;
				memcpy(outs[1].dim, x->dim, sizeof outs[1].dim);
				st_begin(im, outs[1].name);
				E(im, "full(value=1, shape=$L, dtype=bool)", x->dim, x->rank);
				st_end(im);
				nout = 2;
			}
		}
		*o = *x;
		o->name = n->output[0];
		o->alias = (int)(base(im, x) - im->v) + 1;
		o->iv = NULL;
		o->fv = NULL;
		o->isdecl = o->used = o->emitted = 0;
		o->init = NULL;
		ok = 1;
	} else if (foldable(op) && strcmp(op, "Dropout")) {
		OVal *in[64];
		int allk = 1, k = (int)n->n_input, ar = is_ew(op) ? ew_arity(op) : -1;
		if (k > 64) {
			err(im, "more than 64 inputs");
			goto out;
		}
		if (ar >= 0 && (ar ? k != ar : k < 1)) {
			err(im, "%d inputs, not %d", k, ar ? ar : 1);
			goto out;
		}
		for (int i = 0; i < k && ar >= 0; i++)
			if (!in_val(im, n, (size_t)i, 0))
				goto out;
		for (int i = 0; i < k; i++) {
			in[i] = in_val(im, n, (size_t)i, 1);
			if (im->failed)
				goto out;
			allk &= !in[i] || known(in[i]);
		}
		if (is_ew(op) && allk)
			ok = fold_ew(im, op, in, k, o);
		else if (is_ew(op) || !strcmp(op, "Where"))
			ok = op_one(im, n, x, o);
		else
			ok = op_shape(im, n, x, o);
	} else if (!strcmp(op, "Dropout"))
		ok = fold_ew(im, op, &x, 1, o); // known: itself
	else if (!strcmp(op, "Conv"))
		ok = op_conv(im, n, x, o);
	else if (!strcmp(op, "ConvTranspose"))
		ok = op_convtranspose(im, n, x, o);
	else if (!strcmp(op, "MaxPool") || !strcmp(op, "AveragePool"))
		ok = op_pool(im, n, x, o);
	else if (!strcmp(op, "BatchNormalization"))
		ok = op_batchnorm(im, n, x, outs, &nout);
	else if (!strcmp(op, "LayerNormalization"))
		ok = op_layernorm(im, n, x, outs, &nout);
	else if (!strcmp(op, "Split"))
		ok = op_split(im, n, x, outs, &nout);
	else if (!strcmp(op, "Slice"))
		ok = op_slice(im, n, x, o);
	else if (!strcmp(op, "Resize"))
		ok = op_resize(im, n, x, o);
	else if (!strcmp(op, "Einsum"))
		ok = op_einsum(im, n, o);
	else if (!strcmp(op, "LSTM") || !strcmp(op, "GRU") || !strcmp(op, "RNN"))
		ok = op_rnn(im, n, x, outs, &nout);
	else if (!strcmp(op, "Gather"))
		ok = op_gather(im, n, x, o);
	else if (!strcmp(op, "MatMul")) {
		OVal *y = in_val(im, n, 1, 0);
		ok = y && op_matmul(im, x, y, o);
	} else
		ok = op_one(im, n, x, o);
	if (ok && !o->dtype)
		o->dtype = x ? x->dtype : ONNX_FLOAT;
	for (int i = 1; ok && i < nout; i++)
		if (!outs[i].dtype)
			outs[i].dtype = o->dtype;
	if (ok && (int)n->n_output > nout)
		for (size_t i = (size_t)nout; i < n->n_output; i++)
			if (*n->output[i]) {
				err(im, "output %zu is not supported", i);
				ok = 0;
			}
out:
	fclose(im->cur);
	im->cur = NULL;
	if (ok && !im->failed) {
		fwrite(buf, 1, len, im->body);
		for (int i = 0; i < nout; i++)
			if (*outs[i].name) {
				if (!dims_ok(im, &outs[i], "output")) {
					ok = 0;
					break;
				}
				add_val(im, &outs[i]);
			}
	} else {
		for (int i = 0; i < nout; i++) {
			free(outs[i].iv);
			free(outs[i].fv);
		}
	}
	free(buf);
	im->node = NULL;
	return ok && !im->failed;
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
		err(im, "%s '%s' has ONNX dtype %d: only float (1), double (11), int64 (7) and bool (9) "
		        "are supported", what, v->name, dtype);
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
	im->opset = (int)opset;
	char *declbuf = NULL, *bodybuf = NULL;
	size_t decllen = 0, bodylen = 0;
	FILE *decls = open_memstream(&declbuf, &decllen);
	im->body = open_memstream(&bodybuf, &bodylen);
	char *defbuf = NULL;
	size_t deflen = 0;
	im->defs = open_memstream(&defbuf, &deflen);
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
		OVal nv = {.name = t->name};
		OVal *v = add_val(im, &nv);
		if (!take_dims(im, v, t->data_type, t->n_dims, "initializer"))
			break;
		for (size_t k = 0; k < t->n_dims; k++)
			v->dim[k] = t->dims[k];
		if (!dims_ok(im, v, "initializer"))
			break;
		v->isdecl = 1;
		v->init = t;
		if (!is_float(t->data_type) && !(v->iv = tensor_iv(t, numel(v))) && numel(v) <= MAXFOLD) {
			err(im, "initializer '%s': its data does not have one value per element", t->name);
			break;
		}
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
		OVal nv = {.name = in->name};
		OVal *v = add_val(im, &nv);
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
	char *retbuf = NULL;
	size_t retlen = 0;
	im->cur = open_memstream(&retbuf, &retlen);
	for (size_t i = 0; i < g->n_output && !im->failed; i++) {
		OVal *v = g->output[i]->name ? find(im, g->output[i]->name) : NULL;
		if (!v) {
			err(im, "graph output '%s' is not computed by the graph", g->output[i]->name ? g->output[i]->name : "");
			break;
		}
		fputs(i ? ", " : "  return ", im->cur);
		use(im, v);
		fputs(" as ", im->cur);
		put_name(im->cur, v->name);
	}
	fclose(im->cur);
	im->cur = NULL;
	if (retbuf)
		fwrite(retbuf, 1, retlen, im->body);
	free(retbuf);
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
		fputs(v->init && is_float(v->dtype) ? "param " : "const ", decls);
		put_name(decls, v->name);
		fputs(": ", decls);
		put_type(decls, v);
		fputc('\n', decls);
	}
	fclose(decls);
	fclose(im->body);
	fclose(im->defs);
	char *text = NULL;
	if (!im->failed && declbuf && bodybuf && defbuf &&
	    (text = malloc(decllen + deflen + bodylen + 64))) {
		*len = (size_t)sprintf(text, "# imported from ONNX\n%s\n%s%s", declbuf, defbuf, bodybuf);
	}
	free(declbuf);
	free(defbuf);
	free(bodybuf);
	return text;
}

static void
free_vals(Imp *im)
{
	for (size_t i = 0; i < im->nv; i++) {
		free(im->v[i].iv);
		free(im->v[i].fv);
	}
	free(im->v);
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
	free_vals(&im);
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
		const Onnx__TensorProto *t = v->init;
		const char *why = NULL;
		FeTensor *d = &ts[n];
		d->dtype = v->dtype == ONNX_FLOAT ? DT_F32 : v->dtype == ONNX_DOUBLE ? DT_F64
		         : v->dtype == ONNX_BOOL ? DT_BOOL : DT_I64;
		d->rank = v->rank;
		memcpy(d->dim, v->dim, sizeof d->dim);
		d->name = strdup(v->name);
		if (t && (v->dtype != ONNX_BOOL || !v->iv))
			d->data = tensor_data(t, numel(v), v->dtype == ONNX_FLOAT ? 4 : 8, &why);
		else if (known(v)) {
			// A value known at import (a Constant with too many distinct
			// elements for a literal, a bool initializer): its elements.
			size_t es = v->dtype == ONNX_FLOAT ? 4 : v->dtype == ONNX_BOOL ? 1 : 8;
			int64_t k = numel(v);
			unsigned char *p = d->data = malloc(k ? (size_t)k * es : 1);
			for (int64_t e = 0; p && e < k; e++) {
				if (v->dtype == ONNX_FLOAT) {
					float x = (float)v->fv[e];
					memcpy(p + 4 * e, &x, 4);
				} else if (v->dtype == ONNX_DOUBLE)
					memcpy(p + 8 * e, &v->fv[e], 8);
				else if (v->dtype == ONNX_BOOL)
					p[e] = v->iv[e] != 0;
				else
					memcpy(p + 8 * e, &v->iv[e], 8);
			}
		} else
			why = "its data is not one element per position";
		if (!d->name || !d->data) {
			free(d->name);
			free(d->data);
			err(&im, "initializer '%s': %s", v->name, why ? why : "out of memory");
			break;
		}
		n++;
	}
	onnx__model_proto__free_unpacked(m, NULL);
	free_vals(&im);
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
