// ir/ir.h -- the fadc graph IR: the only header every module includes.
//
// A Graph is an append-only array of Nodes in an arena.  Node ids are
// 32-bit indices; an input always has a smaller id than its user, so id
// order is a topological order: forward passes loop up, reverse passes
// loop down, and side tables are plain arrays indexed by id.  Id 0 is the
// null node.  Shapes are interned per graph (equal shapes, equal ids).
// Attributes live in one int64 pool per graph, laid out by the op's
// attribute spec in ops.def.  Everything a graph owns lives in its arena
// and is released at once by ir_graph_free().
//
// Layout convention: tensors are dense and row-major (C order), like NumPy
// and PyTorch's contiguous tensors.
//
// Sections follow the source files: arena.c, ops.c, graph.c, shape.c,
// module.c, print.c, verify.c, interp.c.
#ifndef FADC_IR_H
#define FADC_IR_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define IR_MAXDIM 8  // tensors have rank 0..IR_MAXDIM
#define IR_MAXATTR 8 // attributes per op

typedef uint32_t NodeId; // index into Graph.node; 0 is "no node"
typedef uint32_t ShapeId; // index into Graph.shape
typedef uint32_t Loc; // index into SrcMap.loc; 0 is "no location"

// Internal invariant check, on in every build: prints where and a hint for
// the caller, then aborts.  For user errors use diagnostics instead.
#define FADC_ASSERT(cond, hint)                                                 \
	((cond) ? (void)0 : fadc_assert_fail(#cond, hint, __FILE__, __LINE__))
_Noreturn void fadc_assert_fail(const char *cond, const char *hint, const char *file, int line);

// ---------------------------------------------------------------- arena.c
// A chunked bump allocator.  Allocation failure is fatal (the compiler has
// no useful way to go on); FADC_FAIL_ALLOC_AFTER=n makes the n-th chunk
// allocation fail, to test that path.
typedef struct Arena Arena;
Arena *arena_new(void);
void arena_free(Arena *a);
void *arena_alloc(Arena *a, size_t size); // 16-byte aligned, uninitialised
void *arena_zalloc(Arena *a, size_t size); // zeroed
void *arena_alloc_array(Arena *a, size_t n, size_t size); // zeroed; checks n*size
char *arena_strdup(Arena *a, const char *s);
char *arena_strndup(Arena *a, const char *s, size_t n);
char *arena_printf(Arena *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
// The IR's one printf-into-buffer error helper: formats into err[errlen]
// (nothing when errlen is 0) and returns 0, the failure of every
// `int f(..., char *err, size_t errlen)` of ir/.  The runtime and the
// tools format through fileio's fio_msg, which keeps a long message's end;
// ir may not depend on fileio (docs/ARCHITECTURE.md), and its messages
// name ops and shapes, not paths, so plain truncation serves.
int ir_errf(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
int ir_verrf(char *err, size_t errlen, const char *fmt, va_list ap);
// Grows *p (of *cap elements of size `size`) to hold at least `need`;
// the old block is abandoned to the arena, as QBE's vgrow.
void arena_grow(Arena *a, void **p, uint32_t *cap, uint32_t need, size_t size);

// ---------------------------------------------------------------- ops.c
// The value dtypes are support/dtypes.def's rows, in its order, so that a
// value dtype's code (fadc_dtype's and the artifact's) is t - DT_F32:
// ir_dtype_code.  DT_NONE (no value) and DT_TUPLE (scan's results) are the
// IR's own.
typedef enum DType {
	DT_NONE,
#define DTYPE(N, ...) DT_##N,
#include "dtypes.def"
	DT_TUPLE,
	DT_COUNT
} DType;

enum Op {
	OP_NONE,
#define UNARY(n, ...) OP_##n,
#define UNARYA(n, ...) OP_##n,
#define BINARY(n, ...) OP_##n,
#define CMP(n, ...) OP_##n,
#define OTHER(n, ...) OP_##n,
#include "ops.def" // all row macros: the enum
	OP_COUNT
};

enum OpFlag {
	F_NONE = 0,
	F_INTOK = 1 << 0, // elementwise op that also takes i64 operands
	F_NONDIFF = 1 << 1, // no derivative: asking for one through it is an error
	F_ZERODERIV = 1 << 2, // derivative is identically zero
	F_RANDOM = 1 << 3, // draws from the counter-based generator
	F_FACTORY = 1 << 4, // no tensor inputs; shape and dtype are attributes
	F_HOST = 1 << 5, // runs on the host only
	F_PLACE = 1 << 6, // placement: identity on values
	F_LINEAR = 1 << 7, // linear in its (float) inputs
	F_ELEMWISE = 1 << 8, // set by ops.c for UNARY, UNARYA, BINARY, CMP rows
	F_WINDOW = 1 << 9, // reduces a window of its operand per output element: a kernel of its own
};

typedef enum AttrKind { AK_INT, AK_FLOAT, AK_INTS, AK_DTYPE, AK_ENUM, AK_BODY } AttrKind;

// One attribute value; which fields mean something depends on the kind.
// AK_INT, AK_DTYPE, AK_ENUM (the index of the name), AK_BODY (index into
// Graph.sub) use i; AK_INTS uses n and v.  AK_FLOAT uses f, and i is its
// exact integer value: a double holds integers exactly only to 2^53, so an
// i64 constant (full(value=9223372036854775807, dtype=i64)) keeps its value
// in i, and f is its rounding.  Whoever sets f may leave i alone: the graph
// stores i only while (double)i == f, else ir_float_int(f) (graph.c), so an
// i never disagrees with its f by more than the rounding.  i64 consumers
// (the interpreter, the folder, lowering, the printer) read i.
typedef struct AttrVal {
	int64_t i;
	double f;
	int n;
	int64_t v[IR_MAXDIM];
} AttrVal;

typedef struct Attrs {
	AttrVal a[IR_MAXATTR];
} Attrs;

typedef struct AttrSpec {
	const char *name;
	AttrKind kind;
	int has_default;
	AttrVal def;
	int nenum; // AK_ENUM: the allowed names
	const char *enums[8];
} AttrSpec;

typedef struct Shape {
	int rank;
	int64_t dim[IR_MAXDIM];
} Shape;

typedef struct Graph Graph;

// A shape rule computes the result's shape and dtype from the operands and
// attributes, or writes a message (without location) to err and returns 0.
typedef int (*ShapeRule)(const Graph *g, int op, const NodeId *in, int nin, const Attrs *a,
                         Shape *out, DType *dt, char *err, size_t errlen);

typedef struct OpInfo {
	const char *name;
	int arity; // number of tensor operands; -1 variadic
	uint32_t flags; // F_*
	int nattr;
	AttrSpec attr[IR_MAXATTR];
	ShapeRule shape;
} OpInfo;

const OpInfo *ir_op(int op); // the table row, attribute specs parsed
int ir_op_lookup(const char *name); // OP_NONE if unknown
int ir_attr_index(int op, const char *name); // -1 if the op has no such attribute
void ir_attrs_default(int op, Attrs *a); // defaults filled, required slots zero
const char *ir_dtype_name(DType t);
DType ir_dtype_lookup(const char *name); // DT_NONE if unknown
int ir_dtype_is_float(DType t);
// A value dtype's code (its row of support/dtypes.def: fadc_dtype's, the
// artifact's and tio_dtype's value), -1 for DT_NONE and DT_TUPLE; and
// back, DT_NONE for a code that is no row.
int ir_dtype_code(DType t);
DType ir_dtype_of_code(int code);
// The value of v in dtype dt: what a store into a tensor of that dtype
// keeps (C/PyTorch conversions: round to nearest for f32, truncation
// toward zero for i64, v != 0 for bool).  The one rounding: the
// interpreter's stores and codegen's constants both call it, so that they
// agree to the bit.
double ir_dtype_round(DType dt, double v);

// ---------------------------------------------------------------- graph.c
typedef struct Node {
	uint16_t op; // enum Op
	uint8_t dtype; // DType
	uint8_t nin; // number of inputs
	uint32_t in; // inputs are g->edge[in .. in+nin)
	ShapeId shape;
	uint32_t attr; // offset into g->attr, 0 if none
	Loc loc; // where the user wrote it, or what it was derived from
} Node; // 20 bytes, no pointers: printable, hashable, memcmp-able

typedef enum InputKind { IN_PARAM, IN_CONST, IN_ARG } InputKind;

typedef struct Input {
	NodeId node; // its OP_input node
	const char *name;
	InputKind kind;
} Input;

// An output is a value; a write-back output also names the input whose
// new value it is (an argument mutated in place by the program).
typedef struct Output {
	NodeId node;
	const char *name;
	int writeback; // index into Graph.input, or -1
} Output;

// The source map: every Loc of a compilation indexes one table, shared by
// all graphs derived from the same source.
typedef struct SrcFile {
	const char *name;
	const char *text; // NUL-terminated copy of the whole file
	size_t len;
} SrcFile;

// A node inlined from a function (a prelude composite, a def) keeps the
// function's position and also the call that inlined it, in the user's
// file: the outermost call site, so that a message about a node of
// cross_entropy names the model's line too (`call`, 0 when none).
typedef struct SrcLoc {
	uint32_t file; // index into SrcMap.file
	uint32_t line, col; // 1-based
	Loc call; // the outermost call site this position was inlined from, or 0
} SrcLoc;

typedef struct SrcMap {
	Arena *arena;
	SrcFile *file;
	uint32_t nfile, cfile;
	SrcLoc *loc; // loc[0] is "no location"
	uint32_t nloc, cloc;
} SrcMap;

SrcMap *ir_srcmap_new(void);
void ir_srcmap_free(SrcMap *s);
uint32_t ir_srcmap_add_file(SrcMap *s, const char *name, const char *text, size_t len);
Loc ir_srcmap_loc(SrcMap *s, uint32_t file, uint32_t line, uint32_t col);
// loc (which must have no call site) as inlined from call: a new Loc.
Loc ir_srcmap_loc_call(SrcMap *s, Loc loc, Loc call);
// "file:line:col" of loc ("" for none); with `withcall` and a call site,
// "file:line:col, called from file:line:col".
void ir_loc_str(const SrcMap *s, Loc loc, int withcall, char *buf, size_t n);
// The source hash an artifact records (runtime/artifact.h, source_hash):
// FNV-1a 64 over the files in order (the prelude, then the model), each its
// name with the terminating NUL, then its text; NULL hashes as no file.
// The one definition: codegen writes it, fadc-bench compares an artifact's
// with the model's before it reuses the artifact.
uint64_t ir_srcmap_hash(const SrcMap *s);

struct Graph {
	Arena *arena; // owns everything below
	const char *name;
	Node *node; // node[0] is the null node
	uint32_t nnode, cnode;
	NodeId *edge;
	uint32_t nedge, cedge;
	int64_t *attr; // attr[0] unused, so offset 0 means "none"
	uint32_t nattr, cattr;
	Shape *shape; // shape[0] unused
	uint32_t nshape, cshape;
	uint32_t *shash; // open-addressing index of shape, 0 = empty
	uint32_t cshash;
	Input *input;
	uint32_t ninput, cinput;
	Output *out;
	uint32_t nout, cout;
	struct Graph **sub; // bodies of scan nodes (AK_BODY attributes)
	uint32_t nsub, csub;
	SrcMap *src; // not owned; may be NULL
};

Graph *ir_graph_new(const char *name, SrcMap *src);
void ir_graph_free(Graph *g); // frees subgraphs too

ShapeId ir_shape_intern(Graph *g, const Shape *s);
static inline const Shape *ir_shape(const Graph *g, NodeId n) { return &g->shape[g->node[n].shape]; }
static inline const NodeId *ir_in(const Graph *g, NodeId n) { return &g->edge[g->node[n].in]; }
static inline NodeId ir_in1(const Graph *g, NodeId n, int i) { return g->edge[g->node[n].in + i]; }
int64_t ir_numel(const Shape *s);
int ir_shape_eq(const Shape *a, const Shape *b);

// Builds a node: checks arity, attributes and the shape rule, then appends.
// Returns 0 and writes a message to err on a user-level error.
NodeId ir_build(Graph *g, int op, const NodeId *in, int nin, const Attrs *a, Loc loc, char *err,
                size_t errlen);
// As ir_build, for passes that construct only valid nodes: a failure is an
// internal error (FADC_ASSERT with the rule's message).
NodeId ir_emit(Graph *g, int op, const NodeId *in, int nin, const Attrs *a, Loc loc);
NodeId ir_add_input(Graph *g, const char *name, InputKind kind, DType dt, const Shape *s, Loc loc);
void ir_add_output(Graph *g, NodeId n, const char *name, int writeback);
uint32_t ir_add_sub(Graph *g, Graph *sub); // g takes ownership

void ir_attrs_get(const Graph *g, NodeId n, Attrs *a); // defaults if the node has none
int64_t ir_attr_int(const Graph *g, NodeId n, const char *name);
double ir_attr_float(const Graph *g, NodeId n, const char *name);
int ir_attr_ints(const Graph *g, NodeId n, const char *name, int64_t v[IR_MAXDIM]);
// A double's value as an int64, as an i64 store keeps it: truncation
// toward zero, saturating at the ends of the range (2^63 is INT64_MAX), NaN
// 0.  The AK_FLOAT attributes' i when the writer gave none (above).
int64_t ir_float_int(double v);

// ---------------------------------------------------------------- shape.c
// The shape rules named by ops.def, and NumPy broadcasting.
int ir_broadcast_shapes(const Shape *a, const Shape *b, Shape *out);
void ir_shape_str(const Shape *s, char *buf, size_t n); // "[10, 11]"
void ir_type_str(DType t, const Shape *s, char *buf, size_t n); // "f32[10, 11]"
#define SHAPE_RULE(rule)                                                                           \
	int shape_##rule(const Graph *g, int op, const NodeId *in, int nin, const Attrs *a,          \
	                 Shape *out, DType *dt, char *err, size_t errlen)
#define OTHER(n, arity, rule, ...) SHAPE_RULE(rule);
#include "ops.def" // OTHER: one prototype per named rule (repeats are harmless)
SHAPE_RULE(elemwise);
SHAPE_RULE(compare);

// ---------------------------------------------------------------- module.c
// A module is what a source file declares: named sizes, parameters and
// constants with their initializers, and the entry graph `forward`.
typedef struct Size {
	const char *name;
	int64_t value;
	Loc loc;
} Size;

typedef enum DeclKind { DECL_PARAM, DECL_CONST } DeclKind;

// A parameter or constant.  `init` computes its value: a graph with no
// arguments whose inputs are earlier declarations (by name) and whose one
// output is the value; NULL means "bind by name from a tensor file".
typedef struct Decl {
	const char *name;
	DeclKind kind;
	DType dtype;
	Shape shape;
	Graph *init;
	Loc loc;
} Decl;

// The data-parallel declaration (`batch x: 0, y: 0, loss mean`, docs/IR.md):
// axis `axis` of each named input of forward is the batch, all of one size,
// and forward's outputs are a mean or a sum over it.  passes/batch.c
// checks that the forward is separable over it.
typedef enum BatchLoss { BATCH_LOSS_MEAN = 1, BATCH_LOSS_SUM } BatchLoss;
typedef struct BatchInput {
	const char *name; // an input of forward: a param, const or argument
	int axis; // 0 <= axis < its rank
	Loc loc; // where the name was written
} BatchInput;
typedef struct Batch {
	BatchInput *in;
	uint32_t nin; // 0: the model declares no batch
	BatchLoss loss;
	int64_t size; // the batch axis's size, the same in every input
	Loc loc; // the `batch` word
} Batch;

typedef struct Module {
	Arena *arena;
	const char *name;
	SrcMap *src; // owned
	Size *size;
	uint32_t nsize, csize;
	Decl *decl;
	uint32_t ndecl, cdecl;
	Graph *main; // `forward`: inputs are params (declaration order), consts, arguments
	const char **tasks; // the model's recommended tasks (`tasks vjp, vhp, jvp`), in order
	uint32_t ntasks; // 0: the model declares none
	Batch batch; // the batch axis and the loss over it (batch.nin 0: none)
} Module;

Module *ir_module_new(const char *name);
void ir_module_free(Module *m);
int ir_module_find_decl(const Module *m, const char *name); // -1 if none

// The tasks (ir/tasks.def, the one list of them): IR_TASK_vjp, ... in the
// list's order, and each one's row.  The passes build them; they are named
// here, below every module that names them.
typedef enum IrTask {
#define TASK(name, ...) IR_TASK_##name,
#include "tasks.def"
	IR_TASK_COUNT
} IrTask;
// How fadc-bench checks a task against its partner; the values are the
// ones it has always printed and tested (1 adjoint, 2 equal outputs).
typedef enum IrTaskCheck { IR_CHECK_NONE, IR_CHECK_ADJOINT, IR_CHECK_EQUAL } IrTaskCheck;
typedef struct IrTaskInfo {
	const char *name; // "hessian_fwdrev"
	IrTask partner; // the other strategy (itself when check is IR_CHECK_NONE)
	IrTaskCheck check;
	uint8_t dflt; // compiled by default
	uint8_t scalar; // needs a scalar float forward
} IrTaskInfo;
extern const IrTaskInfo ir_task[IR_TASK_COUNT];
int ir_task_lookup(const char *name); // an IrTask, or -1

// ---------------------------------------------------------------- print.c
// The canonical printer: deterministic, and its output parses back to the
// same graph.  Node n prints as %n; inputs print by name.
void ir_print_module(FILE *f, const Module *m);
void ir_print_graph(FILE *f, const Graph *g, const char *fname);
// The module's declarations, then g (a task graph of it) as `def name(...)`.
void ir_print_module_task(FILE *f, const Module *m, const Graph *g, const char *name);
void ir_print_float(char *buf, size_t n, double v); // shortest round-trip form
// s as a quoted name the frontend reads back ("0.weight"; '"' and '\\' escaped).
void ir_print_quoted(FILE *f, const char *s);

// ---------------------------------------------------------------- verify.c
// Checks the invariants: inputs precede users, shapes and dtypes equal what
// the rules compute, attributes well-formed, outputs valid.  Returns 0 and
// a message on the first violation.
int ir_verify(const Graph *g, char *err, size_t errlen);

// ---------------------------------------------------------------- support
// The Philox samplers, polygamma and the assignment solver, which the
// interpreter shares with the runtime and compiled code: support/support.h.
#include "support.h"

// ---------------------------------------------------------------- interp.c
// The reference interpreter: every value is a dense float64 array whatever
// its dtype (i64 exact up to 2^53, bool as 0/1), so that it is an oracle
// of the exact math for every backend.  An i64 constant or result beyond
// 2^53 in magnitude is refused (a message with its position), never
// silently rounded.  Written for obvious correctness.
typedef struct Tensor {
	DType dtype;
	Shape shape;
	double *data; // malloc'ed, numel elements (NULL when numel is 0)
} Tensor;

void ir_tensor_free(Tensor *t);
int ir_tensor_alloc(Tensor *t, DType dt, const Shape *s); // zeroed; 0 on overflow/OOM

// Runs g on inputs[g->ninput] and writes outputs[g->nout] (caller frees
// them with ir_tensor_free).  runseed keys the samplers.  Returns 0 and a
// message on a run-time error (a bad index, a shape mismatch of an input).
int ir_interp(const Graph *g, const Tensor *inputs, Tensor *outputs, uint64_t runseed, char *err,
              size_t errlen);
// Bilinear upsampling's source along one axis (in -> outn pixels): output
// dst reads inputs *i0 and *i1 with weights 1 - *l and *l (ir/interp.c).
// The backends derive their windows from it, so all agree exactly.
void ir_bilinear_src(int64_t dst, int64_t in, int64_t outn, int align, int64_t *i0, int64_t *i1,
                     double *l);
// Computes every declaration's value in order: bound[i] is used when bound
// && isbound && isbound[i] (its dtype and shape must equal the
// declaration's), otherwise decl i's initializer runs; values declared f32
// are rounded to float.  values[m->ndecl] are written (caller frees).
int ir_module_init(const Module *m, const Tensor *bound, const int *isbound, Tensor *values,
                   uint64_t runseed, char *err, size_t errlen);

// The normalized error of two tensors, the one measure of `fadc check
// --rtol` and `fadc compare-npy --rtol`: max_i |a_i - b_i| over max_i
// max(|a_i|, |b_i|), both maxima over every element.  Normalizing by the
// largest entry is what lets one tolerance fit a Hessian whose entries span
// 1e-3 to 1e12: f32 rounding errors scale with the large entries.  NaN must
// meet NaN and an infinity the same infinity, else the error is infinite.
// Symmetric, so neither side needs to be the reference.
typedef struct IrErr {
	double num, den; // max |a - b|, max(|a|, |b|)
	int64_t bad; // the first mismatched NaN or infinity + 1 (0: none)
	int64_t n;
} IrErr;

static inline void
ir_err_add(IrErr *e, double a, double b)
{
	int64_t i = e->n++;
	if (a != a || b != b || a - a != 0 || b - b != 0) { // NaN or infinite
		if (!((a != a && b != b) || a == b) && !e->bad)
			e->bad = i + 1;
		return;
	}
	double d = a > b ? a - b : b - a, m = a < 0 ? -a : a, mb = b < 0 ? -b : b;
	if (d > e->num)
		e->num = d;
	if (mb > m)
		m = mb;
	if (m > e->den)
		e->den = m;
}

static inline double
ir_err_value(const IrErr *e)
{
	if (e->bad)
		return 1.0 / 0.0;
	return e->num == 0 ? 0 : e->num / e->den; // num > 0 implies den > 0
}

#endif
