// frontend/onnx_imp.h -- the ONNX importer's own declarations, shared by its
// files (library fadc_onnx; nothing else includes this header, the only one
// besides the generated code that names protobuf-c's types):
//   onnx.c        decoding, names, initializers, graph inputs and outputs,
//                 the IR text written (--emit ir), the entry points;
//   onnx_shape.c  values known at import: folding, the shape ops, broadcasting;
//   onnx_ops.c    each other node to IR (import_node dispatches);
//   onnx_rnn.c    LSTM, GRU and RNN as scans.
// The shared functions carry the prefix ox_; the rest are static.
#ifndef FADC_ONNX_IMP_H
#define FADC_ONNX_IMP_H

#include <stdint.h>
#include <stdio.h>

#include "frontend.h"
#include "onnx.pb-c.h"

enum { MAXRANK = 8, OPSET_MIN = 13, OPSET_MAX = 27 };
enum { ONNX_FLOAT = 1, ONNX_INT64 = 7, ONNX_BOOL = 9, ONNX_DOUBLE = 11 };
// A known value is folded up to MAXFOLD elements; one used as data is
// written as a literal of up to MAXLIT distinct elements, else declared a
// constant bound from the file like an initializer (--params model.onnx).
enum { MAXFOLD = 1 << 20, MAXKNOWN = 1 << 24, MAXLIT = 256, MAXNUMEL_LOG2 = 48 };

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
	int input;   // a graph input: 1 + its index among them; 0: none
	int positive; // a float initializer drawn positive (a BatchNormalization variance)
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
	int64_t nknown; // the elements of the values known at import, all together (MAXKNOWN)
} Imp;

// ---------------------------------------------------------------- onnx.c
void ox_err(Imp *im, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void *ox_xcalloc(size_t n, size_t size);
int ox_name_ok(const char *s);
void ox_put_name(FILE *f, const char *s);
OVal *ox_find(Imp *im, const char *name);
OVal *ox_add_val(Imp *im, const OVal *src);
const char *ox_dtype_ir(int t);
int ox_is_float(int t);
const Onnx__AttributeProto *ox_attr(const Onnx__NodeProto *n, const char *name);
int64_t ox_attr_i(const Onnx__NodeProto *n, const char *name, int64_t dflt);
double ox_attr_f(const Onnx__NodeProto *n, const char *name, double dflt);
const char *ox_attr_s(const Onnx__NodeProto *n, const char *name, const char *dflt, char *buf, size_t cap);
int ox_attr_ints(const Onnx__NodeProto *n, const char *name, int64_t *out, int max);
int64_t ox_numel(const OVal *v);
int ox_dims_ok(Imp *im, const OVal *v, const char *what);
OVal *ox_base(Imp *im, OVal *v);
int ox_known(const OVal *v);
double ox_kf(const OVal *v, int64_t i);
int64_t ox_ki(const OVal *v, int64_t i);
int64_t *ox_tensor_iv(const Onnx__TensorProto *t, int64_t n);
double *ox_tensor_fv(const Onnx__TensorProto *t, int64_t n);
int64_t ox_const_f(const OVal *v, double *out, int64_t max);
int ox_put_literal(FILE *f, const OVal *v);
void ox_E(Imp *im, const char *fmt, ...);
void ox_st_begin(Imp *im, const char *name);
void ox_st_end(Imp *im);

// ---------------------------------------------------------------- onnx_shape.c
int ox_node_axes(Imp *im, const Onnx__NodeProto *n, size_t i, int rank, int64_t *ax);
int ox_has_axis(const int64_t *ax, int k, int64_t a);
int ox_one_axis(Imp *im, int64_t a, int r);
int ox_bcast(Imp *im, OVal *o, OVal **in, int k);
int ox_is_ew(const char *op);
int ox_ew_arity(const char *op);
int ox_is_cmp(const char *op);
int ox_cast_to(Imp *im, const Onnx__NodeProto *n);
int ox_fold_ew(Imp *im, const char *op, OVal **in, int k, OVal *o);
int ox_gather_known(Imp *im, const OVal *x, OVal *o, const int64_t *src);
int ox_op_shape(Imp *im, const Onnx__NodeProto *n, OVal *x, OVal *o);
int ox_op_constant(Imp *im, const Onnx__NodeProto *n, OVal *o);
int ox_op_known(Imp *im, const Onnx__NodeProto *n, OVal *o);

// ---------------------------------------------------------------- onnx_ops.c
OVal *ox_in_val(Imp *im, const Onnx__NodeProto *n, size_t i, int opt);
void ox_clamp_bounds(int64_t dim, int64_t *b, int64_t *e, int64_t step);
int ox_import_node(Imp *im, const Onnx__NodeProto *n);

// ---------------------------------------------------------------- onnx_rnn.c
int ox_op_rnn(Imp *im, const Onnx__NodeProto *n, OVal *x, OVal *outs, int *nout);

#endif
