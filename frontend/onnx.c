// frontend/onnx.c -- an ONNX model to a Module, through IR text: decoding,
// names, initializers, the graph's inputs and outputs, the text written.
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
#include <sys/stat.h>

#include "onnx_imp.h"

static int named_const(Imp *im, const char *name);

void
ox_err(Imp *im, const char *fmt, ...)
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

void *
ox_xcalloc(size_t n, size_t size)
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
int
ox_name_ok(const char *s)
{
	if (!s || !*s)
		return 0;
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			return 0;
	return 1;
}

// Always quoted: ONNX names are free text (ir/print.c's printer).
void
ox_put_name(FILE *f, const char *s)
{
	ir_print_quoted(f, s);
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

OVal *
ox_find(Imp *im, const char *name)
{
	for (size_t i = im->nv; i-- > 0;) // the latest of a name (a graph may not repeat one)
		if (!strcmp(im->v[i].name, name))
			return &im->v[i];
	return NULL;
}

OVal *
ox_add_val(Imp *im, const OVal *src)
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
	// Each known value has at most MAXFOLD elements; all of them together
	// at most MAXKNOWN, so a small file cannot make the import hold
	// gigabytes (ConstantOfShape after ConstantOfShape).
	if (v->iv || v->fv) {
		im->nknown += ox_numel(v);
		if (im->nknown > MAXKNOWN)
			ox_err(im, "the values known at import have more than %d elements in all", MAXKNOWN);
	}
	return v;
}

const char *
ox_dtype_ir(int t)
{
	switch (t) {
	case ONNX_FLOAT: return "f32";
	case ONNX_DOUBLE: return "f64";
	case ONNX_INT64: return "i64";
	case ONNX_BOOL: return "bool";
	}
	return NULL;
}

int
ox_is_float(int t)
{
	return t == ONNX_FLOAT || t == ONNX_DOUBLE;
}

static void
put_type(FILE *f, const OVal *v)
{
	fprintf(f, "%s", ox_dtype_ir(v->dtype));
	put_list(f, v->dim, v->rank);
}

const Onnx__AttributeProto *
ox_attr(const Onnx__NodeProto *n, const char *name)
{
	for (size_t i = 0; i < n->n_attribute; i++)
		if (n->attribute[i]->name && !strcmp(n->attribute[i]->name, name))
			return n->attribute[i];
	return NULL;
}

int64_t
ox_attr_i(const Onnx__NodeProto *n, const char *name, int64_t dflt)
{
	const Onnx__AttributeProto *a = ox_attr(n, name);
	return a && a->has_i ? a->i : dflt;
}

double
ox_attr_f(const Onnx__NodeProto *n, const char *name, double dflt)
{
	const Onnx__AttributeProto *a = ox_attr(n, name);
	return a && a->has_f ? a->f : dflt;
}

// A string attribute as a C string in buf (ONNX strings are bytes).
const char *
ox_attr_s(const Onnx__NodeProto *n, const char *name, const char *dflt, char *buf, size_t cap)
{
	const Onnx__AttributeProto *a = ox_attr(n, name);
	if (!a || !a->has_s)
		return dflt;
	size_t k = a->s.len < cap - 1 ? a->s.len : cap - 1;
	memcpy(buf, a->s.data, k);
	buf[k] = 0;
	return buf;
}

// An ints attribute into out (at most max); its count, -1 when absent or
// longer than max.
int
ox_attr_ints(const Onnx__NodeProto *n, const char *name, int64_t *out, int max)
{
	const Onnx__AttributeProto *a = ox_attr(n, name);
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

int64_t
ox_numel(const OVal *v)
{
	return numel_of(v->rank, v->dim);
}

// A shape from the file or computed: every dimension >= 0 and the element
// count below 2^48 (no tensor fadc runs is near that; the bound keeps
// arithmetic exact).
int
ox_dims_ok(Imp *im, const OVal *v, const char *what)
{
	int64_t n = 1;
	if (v->rank > MAXRANK) {
		ox_err(im, "%s '%s' has rank %d (at most %d)", what, v->name, v->rank, MAXRANK);
		return 0;
	}
	for (int i = 0; i < v->rank; i++) {
		if (v->dim[i] < 0 || v->dim[i] > ((int64_t)1 << MAXNUMEL_LOG2) ||
		    (v->dim[i] && n > ((int64_t)1 << MAXNUMEL_LOG2) / v->dim[i])) {
			ox_err(im, "%s '%s': dimension %d (%lld) is negative or the tensor is too large", what,
			    v->name, i, (long long)v->dim[i]);
			return 0;
		}
		n *= v->dim[i];
	}
	return 1;
}

// ---------------------------------------------------------------- known values

OVal *
ox_base(Imp *im, OVal *v)
{
	while (v->alias)
		v = &im->v[v->alias - 1];
	return v;
}

// Known at import, as data: a folded value, or an integer initializer
// (a float initializer is a parameter, never folded into data).
int
ox_known(const OVal *v)
{
	return v->iv || v->fv;
}

double
ox_kf(const OVal *v, int64_t i)
{
	return v->fv ? v->fv[i] : (double)v->iv[i];
}

int64_t
ox_ki(const OVal *v, int64_t i)
{
	return v->iv ? v->iv[i] : (int64_t)v->fv[i];
}

// The elements of tensor t (n of them) as int64s or doubles, from raw_data
// or the typed fields, into a calloc'ed array; NULL when the data is not
// one element per position or of a dtype this does not read.
int64_t *
ox_tensor_iv(const Onnx__TensorProto *t, int64_t n)
{
	int64_t *out = NULL;
	if (n > MAXFOLD)
		return NULL;
	if (t->data_type == ONNX_INT64) {
		if (t->has_raw_data ? t->raw_data.len != (size_t)n * 8 : t->n_int64_data != (size_t)n)
			return NULL;
		out = ox_xcalloc((size_t)n, sizeof *out);
		for (int64_t i = 0; i < n; i++)
			if (t->has_raw_data)
				memcpy(&out[i], t->raw_data.data + 8 * i, 8);
			else
				out[i] = t->int64_data[i];
	} else if (t->data_type == ONNX_BOOL) {
		// bool: one byte each in raw_data, or int32_data.
		if (t->has_raw_data ? t->raw_data.len != (size_t)n : t->n_int32_data != (size_t)n)
			return NULL;
		out = ox_xcalloc((size_t)n, sizeof *out);
		for (int64_t i = 0; i < n; i++)
			out[i] = (t->has_raw_data ? t->raw_data.data[i] : t->int32_data[i]) != 0;
	}
	return out;
}

double *
ox_tensor_fv(const Onnx__TensorProto *t, int64_t n)
{
	double *out = NULL;
	if (n > MAXFOLD)
		return NULL;
	if (t->data_type == ONNX_FLOAT) {
		if (t->has_raw_data ? t->raw_data.len != (size_t)n * 4 : t->n_float_data != (size_t)n)
			return NULL;
		out = ox_xcalloc((size_t)n, sizeof *out);
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
		out = ox_xcalloc((size_t)n, sizeof *out);
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
int64_t
ox_const_f(const OVal *v, double *out, int64_t max)
{
	int64_t n = ox_numel(v);
	if (n > max)
		return -1;
	if (ox_known(v)) {
		for (int64_t i = 0; i < n; i++)
			out[i] = ox_kf(v, i);
		return n;
	}
	if (v->init && ox_is_float(v->dtype)) {
		double *d = ox_tensor_fv(v->init, n);
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
	return ox_dtype_ir(t) ? ox_dtype_ir(t) : "?";
}

// A known value as an IR expression: `full` when its elements are equal,
// else a concat of one-element `full`s reshaped.  0 when it has too many
// distinct elements (the caller declares it instead).
int
ox_put_literal(FILE *f, const OVal *v)
{
	int64_t n = ox_numel(v);
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
	v = ox_base(im, v);
	if (ox_known(v) && !v->isdecl && !v->emitted) {
		char *lit = NULL;
		size_t len = 0;
		FILE *f = open_memstream(&lit, &len);
		int ok = ox_put_literal(f, v);
		fclose(f);
		if (ok) {
			v->emitted = 1;
			fputs("  ", im->body);
			ox_put_name(im->body, v->name);
			fprintf(im->body, " = %s  # known at import\n", lit);
		} else
			v->isdecl = 1; // a const, bound like an initializer (fe_onnx_initializers)
		free(lit);
	}
	v->used = 1;
	ox_put_name(im->cur, v->name);
}

// Writes the IR text fmt into the node's statements, with $v a value's
// use (OVal *), $s a string, $d an int64_t, $g a double, $L an int64_t
// list (pointer, int count).
void
ox_E(Imp *im, const char *fmt, ...)
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
void
ox_st_begin(Imp *im, const char *name)
{
	fputs("  ", im->cur);
	ox_put_name(im->cur, name);
	fputs(" = ", im->cur);
}

void
ox_st_end(Imp *im)
{
	const Onnx__NodeProto *n = im->node;
	fputs("  # node '", im->cur);
	for (const char *c = n->name ? n->name : ""; *c; c++)
		fputc((unsigned char)*c < 0x20 || *c == 0x7f ? '?' : *c, im->cur);
	fprintf(im->cur, "' (%s)\n", n->op_type);
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
		ox_err(im, "dimension %zu of graph input '%s' is symbolic ('%s'), which -D cannot bind: "
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
		ox_err(im, "dimension %zu of graph input '%s' is symbolic ('%s'): bind it with -D %s=VALUE",
		    k, in, name, name);
		return -1;
	}
	char *end;
	errno = 0;
	long long x = strtoll(val, &end, 10);
	if (!*val || *end || errno == ERANGE || x < 0 || x > ((int64_t)1 << MAXNUMEL_LOG2)) {
		ox_err(im, "-D %s=%s: the value must be a non-negative integer", name, val);
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
	if (!ox_dtype_ir(dtype)) {
		ox_err(im, "%s '%s' has ONNX dtype %d: only float (1), double (11), int64 (7) and bool (9) "
		        "are supported", what, v->name, dtype);
		return 0;
	}
	if (rank > MAXRANK) {
		ox_err(im, "%s '%s' has rank %zu (at most %d)", what, v->name, rank, MAXRANK);
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
		ox_err(im, "the model has no graph");
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
		ox_err(im, "the model's opset %lld is out of the supported range %d to %d", (long long)opset,
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
		if (!ox_name_ok(t->name)) {
			ox_err(im, "initializer %zu has an empty name or a control character in it", i);
			break;
		}
		if (t->has_data_location && t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL) {
			ox_err(im, "initializer '%s': external data is not supported yet", t->name);
			break;
		}
		OVal nv = {.name = t->name};
		OVal *v = ox_add_val(im, &nv);
		if (!take_dims(im, v, t->data_type, t->n_dims, "initializer"))
			break;
		for (size_t k = 0; k < t->n_dims; k++)
			v->dim[k] = t->dims[k];
		if (!ox_dims_ok(im, v, "initializer"))
			break;
		v->isdecl = 1;
		v->init = t;
		if (!ox_is_float(t->data_type) && !(v->iv = ox_tensor_iv(t, ox_numel(v))) && ox_numel(v) <= MAXFOLD) {
			ox_err(im, "initializer '%s': its data does not have one value per element", t->name);
			break;
		}
	}
	// Graph inputs are declared constants drawn U[0, 1) (the benchmark's
	// data; fadc run and fadc-bench run unbound, --params binds real data):
	// forward takes no argument.
	fputs("def forward() {\n", im->body);
	int ninput = 0;
	for (size_t i = 0; i < g->n_input && !im->failed; i++) {
		const Onnx__ValueInfoProto *in = g->input[i];
		if (!ox_name_ok(in->name)) {
			ox_err(im, "graph input %zu has an empty name or a control character in it", i);
			break;
		}
		if (ox_find(im, in->name))
			continue; // an initializer listed as an input (IR < 4)
		const Onnx__TypeProto *ty = in->type;
		if (!ty || ty->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !ty->tensor_type->shape) {
			ox_err(im, "graph input '%s' is not a tensor of known rank", in->name);
			break;
		}
		const Onnx__TensorShapeProto *sh = ty->tensor_type->shape;
		OVal nv = {.name = in->name};
		OVal *v = ox_add_val(im, &nv);
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
				ox_err(im, "dimension %zu of graph input '%s' has neither a value nor a name", k, in->name);
				break;
			}
		}
		if (!im->failed && !ox_dims_ok(im, v, "graph input"))
			break;
		v->input = ++ninput;
		v->isdecl = v->used = 1;
	}
	for (size_t i = 0; i < g->n_node && !im->failed; i++)
		ox_import_node(im, g->node[i]);
	char *retbuf = NULL;
	size_t retlen = 0;
	im->cur = open_memstream(&retbuf, &retlen);
	for (size_t i = 0; i < g->n_output && !im->failed; i++) {
		OVal *v = g->output[i]->name ? ox_find(im, g->output[i]->name) : NULL;
		if (!v) {
			ox_err(im, "graph output '%s' is not computed by the graph", g->output[i]->name ? g->output[i]->name : "");
			break;
		}
		fputs(i ? ", " : "  return ", im->cur);
		use(im, v);
		fputs(" as ", im->cur);
		ox_put_name(im->cur, v->name);
	}
	fclose(im->cur);
	im->cur = NULL;
	if (retbuf)
		fwrite(retbuf, 1, retlen, im->body);
	free(retbuf);
	if (!g->n_output)
		ox_err(im, "the graph has no output");
	fputs("\n}\n", im->body);
	// The sizes -D binds, then the initializers used as data, in the file's
	// order.
	for (int i = 0; i < im->nsize; i++)
		fprintf(decls, "let %s = %lld\n", im->size[i], (long long)im->sizeval[i]);
	int ndecl = 0;
	for (size_t i = 0; i < im->nv; i++) {
		OVal *v = &im->v[i];
		if (!v->isdecl || !v->used)
			continue;
		fputs(v->init && ox_is_float(v->dtype) && !named_const(im, v->name) ? "param " : "const ",
		      decls);
		ox_put_name(decls, v->name);
		fputs(": ", decls);
		put_type(decls, v);
		// Initializers drawn with their own seeds (their positions among
		// the declarations), so that fadc run and fadc-bench run unbound,
		// as for an .ir model; --params binds the real values (the
		// model's weights: --params model.onnx).  A float input is drawn
		// U[0, 1), as fadc-bench draws data; a parameter U(-s, s) with
		// s = 1/sqrt(fan_in) (PyTorch's default for Linear and Conv;
		// fan_in = the elements per first index, or all of a vector's),
		// except a variance of BatchNormalization, U[0.5, 1.5) (positive);
		// an integer or bool input is zeros (an index valid for any axis).
		ndecl++;
		if (v->input && ox_is_float(v->dtype))
			fprintf(decls, " = uniform(0, 1, seed=%d)", ndecl);
		else if (v->init && ox_is_float(v->dtype) && v->positive)
			fprintf(decls, " = uniform(0.5, 1.5, seed=%d)", ndecl);
		else if (v->init && ox_is_float(v->dtype)) {
			int64_t n = ox_numel(v), fan = v->rank >= 2 && v->dim[0] ? n / v->dim[0] : n;
			double sc = 1 / sqrt((double)(fan > 1 ? fan : 1));
			fputs(" = uniform(", decls);
			put_num(decls, -sc);
			fputs(", ", decls);
			put_num(decls, sc);
			fprintf(decls, ", seed=%d)", ndecl);
		} else if (v->input) {
			fputs(" = full(value=0, shape=", decls);
			put_list(decls, v->dim, v->rank);
			fprintf(decls, ", dtype=%s)", ox_dtype_ir(v->dtype));
		}
		fputc('\n', decls);
	}
	// Every name --const gives is a float initializer's.
	for (int i = 0; im->o && i < im->o->nconsts && !im->failed; i++) {
		OVal *v = ox_find(im, im->o->consts[i]);
		if (!v || !v->init || !ox_is_float(v->dtype))
			ox_err(im, "--const '%s' names no float initializer of the model", im->o->consts[i]);
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

// A float initializer that --const names: a constant, not a parameter.
static int
named_const(Imp *im, const char *name)
{
	for (int i = 0; im->o && i < im->o->nconsts; i++)
		if (!strcmp(im->o->consts[i], name))
			return 1;
	return 0;
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

// ---------------------------------------------------------------- external data

// A decimal offset or length of external data; 0 when it is not one.
static int
ext_num(const char *s, uint64_t *out)
{
	char *end;
	errno = 0;
	if (!s || *s < '0' || *s > '9')
		return 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (*end || errno == ERANGE)
		return 0;
	*out = v;
	return 1;
}

// A tensor whose data is stored outside the model (data_location
// EXTERNAL, onnx's external_data_helper): its raw bytes, little-endian as
// raw_data's, are read from the file `location` from byte `offset` (0),
// `length` bytes (default: what the elements need), and become its
// raw_data, so the rest of the import sees an ordinary tensor.  The file
// is named relative to the model's folder; an absolute path or a `..`
// component is refused (a model must not read files outside its folder).
// what names the tensor in messages.  0 after an error.
static int
load_external(Imp *im, Onnx__TensorProto *t, const char *what)
{
	const char *loc = NULL, *off = NULL, *len = NULL;
	for (size_t i = 0; i < t->n_external_data; i++) {
		const Onnx__StringStringEntryProto *e = t->external_data[i];
		if (!e->key)
			continue;
		if (!strcmp(e->key, "location"))
			loc = e->value;
		else if (!strcmp(e->key, "offset"))
			off = e->value;
		else if (!strcmp(e->key, "length"))
			len = e->value;
		// checksum (optional, SHA-1) and other keys are not checked.
	}
	if (!loc || !*loc) {
		ox_err(im, "%s: external data without a location", what);
		return 0;
	}
	if (loc[0] == '/') {
		ox_err(im, "%s: external data file '%s' is an absolute path (it must be relative to the "
		           "model's folder)", what, loc);
		return 0;
	}
	for (const char *c = loc; *c;) {
		size_t k = strcspn(c, "/");
		if (k == 2 && c[0] == '.' && c[1] == '.') {
			ox_err(im, "%s: external data file '%s' leaves the model's folder ('..')", what, loc);
			return 0;
		}
		c += k + (c[k] == '/');
	}
	int es = t->data_type == ONNX_FLOAT ? 4 : t->data_type == ONNX_BOOL ? 1
	       : t->data_type == ONNX_DOUBLE || t->data_type == ONNX_INT64 ? 8 : 0;
	if (!es) {
		ox_err(im, "%s has ONNX dtype %d: only float (1), double (11), int64 (7) and bool (9) are "
		           "supported", what, t->data_type);
		return 0;
	}
	OVal v = {.name = t->name ? t->name : "", .rank = (int)(t->n_dims < 64 ? t->n_dims : 64)};
	for (int i = 0; i < v.rank && i < MAXRANK; i++)
		v.dim[i] = t->dims[i];
	if (!ox_dims_ok(im, &v, "tensor"))
		return 0;
	uint64_t need = (uint64_t)ox_numel(&v) * (uint64_t)es, o = 0, n = need;
	if ((off && !ext_num(off, &o)) || (len && !ext_num(len, &n))) {
		ox_err(im, "%s: external data offset '%s' or length '%s' is not a number", what,
		       off ? off : "", len ? len : "");
		return 0;
	}
	if (n != need) {
		ox_err(im, "%s: external data of %llu bytes (length) where its %lld elements need %llu",
		       what, (unsigned long long)n, (long long)ox_numel(&v), (unsigned long long)need);
		return 0;
	}
	// The file next to the model: the model's folder, then loc.
	const char *slash = strrchr(im->path, '/');
	int dl = slash ? (int)(slash - im->path + 1) : 0;
	size_t plen = (size_t)dl + strlen(loc) + 1;
	char *path = malloc(plen);
	if (!path) {
		ox_err(im, "out of memory");
		return 0;
	}
	snprintf(path, plen, "%.*s%s", dl, im->path, loc);
	FILE *f = fopen(path, "rb");
	struct stat st;
	if (!f || fstat(fileno(f), &st) || !S_ISREG(st.st_mode)) {
		ox_err(im, "%s: cannot open external data file '%s': %s", what, path,
		       f ? "not a regular file" : strerror(errno));
		if (f)
			fclose(f);
		free(path);
		return 0;
	}
	if (o > (uint64_t)st.st_size || need > (uint64_t)st.st_size - o) {
		ox_err(im, "%s: external data file '%s' has %lld bytes, fewer than offset %llu + length "
		           "%llu (truncated?)", what, path, (long long)st.st_size, (unsigned long long)o,
		       (unsigned long long)need);
		fclose(f);
		free(path);
		return 0;
	}
	uint8_t *buf = malloc(need ? need : 1);
	int ok = buf && fseeko(f, (off_t)o, SEEK_SET) == 0 && fread(buf, 1, need, f) == need;
	fclose(f);
	if (!ok) {
		ox_err(im, "%s: cannot read external data file '%s'%s", what, path,
		       buf ? "" : ": out of memory");
		free(buf);
		free(path);
		return 0;
	}
	free(path);
	if (t->has_raw_data)
		free(t->raw_data.data); // protobuf-c's default allocator is malloc's
	t->raw_data.data = buf;
	t->raw_data.len = need;
	t->has_raw_data = 1;
	t->data_location = ONNX__TENSOR_PROTO__DATA_LOCATION__DEFAULT;
	return 1;
}

static int
is_external(const Onnx__TensorProto *t)
{
	return t->has_data_location && t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
}

// Every tensor of the model stored outside it, read in: the initializers
// and the nodes' tensor attributes (Constant's and ConstantOfShape's
// value).  0 after an error.
static int
load_externals(Imp *im, Onnx__ModelProto *m)
{
	Onnx__GraphProto *g = m->graph;
	char what[512];
	for (size_t i = 0; g && i < g->n_initializer; i++) {
		Onnx__TensorProto *t = g->initializer[i];
		if (!is_external(t))
			continue;
		snprintf(what, sizeof what, "initializer '%s'", t->name ? t->name : "");
		if (!load_external(im, t, what))
			return 0;
	}
	for (size_t i = 0; g && i < g->n_node; i++) {
		Onnx__NodeProto *n = g->node[i];
		for (size_t k = 0; k < n->n_attribute; k++) {
			Onnx__AttributeProto *a = n->attribute[k];
			for (size_t j = 0; j < a->n_tensors + 1; j++) {
				Onnx__TensorProto *t = j < a->n_tensors ? a->tensors[j] : a->t;
				if (!t || !is_external(t))
					continue;
				im->node = n->op_type ? n : NULL; // the message names the node
				snprintf(what, sizeof what, "attribute '%s'", a->name ? a->name : "");
				int ok = load_external(im, t, what);
				im->node = NULL;
				if (!ok)
					return 0;
			}
		}
	}
	return 1;
}

// Reads and decodes path; NULL after a diagnostic.
static Onnx__ModelProto *
load(Imp *im)
{
	FILE *f = fopen(im->path, "rb");
	if (!f) {
		ox_err(im, "cannot open: %s", strerror(errno));
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
				ox_err(im, "out of memory");
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
		ox_err(im, "cannot read");
		return NULL;
	}
	Onnx__ModelProto *m = onnx__model_proto__unpack(NULL, n, buf);
	free(buf);
	if (!m)
		ox_err(im, "not an ONNX model: a malformed or truncated protobuf");
	else if (!load_externals(im, m)) {
		onnx__model_proto__free_unpacked(m, NULL);
		return NULL;
	}
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

Module *
fe_load_model(const char *path, const FeOptions *o)
{
	size_t n = strlen(path);
	return n > 5 && !strcmp(path + n - 5, ".onnx") ? fe_onnx_import(path, o)
	                                               : fe_parse_file(path, o);
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
		ox_err(&im, "out of memory");
	for (size_t i = 0; i < im.nv && !im.failed; i++) {
		const OVal *v = &im.v[i];
		if (!v->isdecl || !v->used || v->input)
			continue; // (a graph input has no value in the file)
		const Onnx__TensorProto *t = v->init;
		const char *why = NULL;
		FeTensor *d = &ts[n];
		d->dtype = v->dtype == ONNX_FLOAT ? DT_F32 : v->dtype == ONNX_DOUBLE ? DT_F64
		         : v->dtype == ONNX_BOOL ? DT_BOOL : DT_I64;
		d->rank = v->rank;
		memcpy(d->dim, v->dim, sizeof d->dim);
		d->name = strdup(v->name);
		if (t && (v->dtype != ONNX_BOOL || !v->iv))
			d->data = tensor_data(t, ox_numel(v), v->dtype == ONNX_FLOAT ? 4 : 8, &why);
		else if (ox_known(v)) {
			// A value known at import (a Constant with too many distinct
			// elements for a literal, a bool initializer): its elements.
			size_t es = v->dtype == ONNX_FLOAT ? 4 : v->dtype == ONNX_BOOL ? 1 : 8;
			int64_t k = ox_numel(v);
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
			ox_err(&im, "initializer '%s': %s", v->name, why ? why : "out of memory");
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
