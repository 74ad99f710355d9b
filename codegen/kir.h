// codegen/kir.h -- the kernel IR: loops over dense buffers, shared by the
// LLVM backend (codegen/llvm.c) and, later, the CUDA printer.
//
// A KProgram is one task: its buffers (task inputs, task outputs, and
// temporaries placed in one arena by the memory plan), a pool of scalar
// expressions, and a list of kernels run in order.  A kernel writes one
// buffer: for every point of its parallel domain (a loop nest, one loop per
// axis, every point independent) it evaluates `body` and stores it at
// `index`; a reduction kernel instead folds `body` over a reduction domain
// (inner loops) into an accumulator and stores `post` (an expression of the
// accumulator KX_ACC).  Nothing else exists: layout ops (reshape,
// broadcast, permute, slice, pad, concat, take, ...) are index expressions
// inside loads, elementwise chains are expression trees, and a matmul is a
// sum-reduction of a product whose kernel is marked `contraction`, so a
// blocked GEMM can replace it later without changing the IR.
//
// Expressions are hash-consed (structurally equal nodes have equal ids), so
// a value read twice at the same index in one kernel is computed once, and
// expression ids are plain integers: a backend keeps side tables indexed by
// KxId.  Every node has a compute dtype (F32, F64, I64 or BOOL); buffers
// have a storage dtype, and loads and stores convert between the two.
// Integer index arithmetic is simplified as it is built: affine sums are
// kept canonical, and (e / s) % d over loop variables of known extent folds
// back to the variable, so a broadcast or a permute of a row-major tensor
// costs no division in the generated loops.
//
// Layout convention: buffers are dense and row-major (C order); a buffer's
// element e is at byte offset e * size(storage dtype).
#ifndef FADC_KIR_H
#define FADC_KIR_H

#include <stdio.h>

#include "ir.h"

typedef uint32_t KxId; // index into KProgram.x; 0 is "no expression"

typedef enum KxOp {
	KX_NONE,
	// Leaves.
	KX_CONST, // f (floats, already rounded to the dtype) or i (I64, BOOL)
	KX_VAR, // loop variable `aux` of the kernel, values [0, i)
	KX_LOAD, // buffer `aux` at index a[0] (I64), converted to the compute dtype
	KX_ACC, // the accumulator of a reduction kernel (only in `post`)
	KX_RUNSEED, // the run's seed (I64 bits of a uint64_t)
	KX_STEP, // the step counter of loop `aux` (KProgram.loop), values [0, i)
	// Integer index arithmetic (I64); built only through kx_i*(), which
	// simplify.  Division and modulo are by a positive constant a[1] and
	// floor the quotient (operands are non-negative in practice).
	KX_IADD,
	KX_IMUL,
	KX_IDIV,
	KX_IMOD,
	KX_IMIN,
	KX_IMAX,
	// Arithmetic, on floats or (ADD SUB MUL NEG ABS MAX MIN) on I64.
	KX_ADD,
	KX_SUB,
	KX_MUL,
	KX_DIV,
	KX_NEG,
	KX_ABS,
	KX_MAX, // NaN-propagating maximum (torch.maximum)
	KX_MIN, // NaN-propagating minimum
	KX_POW,
	KX_FLOOR,
	KX_SQRT,
	// Special functions: a libm call or a support routine (support/support.c).
	KX_EXP,
	KX_LOG,
	KX_LOG1P,
	KX_EXPM1,
	KX_TANH,
	KX_ERF,
	KX_SIN,
	KX_COS,
	KX_LGAMMA,
	KX_POLYGAMMA, // a[0] the order (a float constant), a[1] x; order 0 is digamma
	// Logic.
	KX_CMP, // BOOL: a[0] `aux` a[1], aux a KCmp
	KX_AND,
	KX_OR,
	KX_NOT,
	KX_SELECT, // a[0] (BOOL) ? a[1] : a[2]
	KX_CAST, // a[0] converted to storage dtype `aux`, result in the compute dtype
	// Philox samplers (support/random.c, compiled into the artifact): F64 result
	// of kind `aux` (KRand) for seed i, element index a[0], and for gamma
	// the shape a[1] (F64).
	KX_RAND,
	KX_COUNT
} KxOp;

// Comparison predicates: ordered except NE (C's != is true on NaN) and UGT
// (unordered or greater: "v is NaN or v > acc", the running max's test).
typedef enum KCmp { KC_EQ, KC_NE, KC_LT, KC_LE, KC_GT, KC_GE, KC_UGT, KC_ULT, KC_UNO } KCmp;

typedef enum KRand { KRAND_UNIFORM, KRAND_NORMAL, KRAND_GAMMA } KRand;

typedef struct Kx {
	uint8_t op; // KxOp
	uint8_t dtype; // DType of the value
	uint8_t nin; // operands in a[]
	uint8_t pad;
	uint32_t aux; // per op, see KxOp
	KxId a[3];
	uint32_t pad2;
	int64_t i; // integer payload (constant, extent, seed)
	double f; // float constant
} Kx; // no pointers, no padding holes: hashed and compared as bytes

typedef enum KBufKind {
	KB_IN, // task input `index`: read only, supplied by the runtime
	KB_OUT, // task output `index`: supplied by the runtime (caller or its own)
	KB_TMP, // an intermediate in the task's arena at `offset` (memory plan)
} KBufKind;

typedef struct KBuf {
	KBufKind kind;
	int index; // input or output position (KB_IN, KB_OUT)
	DType dtype; // storage dtype
	Shape shape;
	int64_t bytes; // numel * element size
	int64_t offset; // KB_TMP: byte offset in the arena, set by cg_plan()
	NodeId node; // the graph node whose value it holds (0: none)
	int first, last; // KB_TMP: kernels that write it first and read it last
} KBuf;

typedef enum KRed { KR_NONE, KR_SUM, KR_MAX, KR_MIN } KRed;

// Host kernels: a call into the support library on whole buffers instead
// of a loop nest (ops with no data-parallel form).
typedef enum KHost {
	KH_NONE,
	// linear_sum_assignment: hin is the cost (F64, rows x cols), out the
	// column of each row (I64, -1 if none), hwork a scratch buffer of
	// ir_assignment_work(rows, cols) bytes (support/hungarian.c).
	KH_ASSIGN,
} KHost;

typedef struct KKernel {
	uint32_t out; // the buffer written
	int rank; // parallel loop variables 0 .. rank-1
	int64_t dim[IR_MAXDIM];
	int rrank; // reduction variables rank .. rank+rrank-1
	int64_t rdim[IR_MAXDIM];
	KRed red;
	KxId index; // store index (I64) over the parallel variables
	KxId body; // the value at a point (reduction: the folded term)
	KxId post; // reductions: the stored value, an expression of KX_ACC
	NodeId node; // the graph node it computes (dumps, diagnostics)
	const char *what; // "elementwise", "sum", "matmul", "copy", ...
	int contraction; // a matmul: a blocked GEMM may replace the loops
	int nfused; // graph nodes folded into this kernel (stats)
	KHost host; // a host kernel: no loops, the call below (index, body, post unused)
	uint32_t hin, hwork; // its operand and scratch buffers
	// 1 + the index in p->conv of the convolution this kernel is part of
	// (im2col, the GEMM, col2im, a transposing copy), 0 for none: the CUDA
	// backend offers cuDNN for the kernels of one convolution together.
	uint32_t conv;
} KKernel;

// A convolution lowered to kernels (codegen/lower_window.c, conv_gemm):
// its geometry in NCHW terms (1-d: h = r = 1) and the buffers it writes
// and reads, as a cuDNN call takes them (runtime/artifact.h, ArtConv):
// op 0 forward {y, x, w}, 1 backward data {dx, dy, w}, 2 backward filter
// {dw, x, dy}; every buffer read and written whole, from element 0.
// nhwc: bit i set when argument i ({out, a, b}) is stored channels-last
// (codegen/kir_layout.c, CUDA only; 0 as lowered).
typedef struct KConv {
	int op;
	int64_t n, c, h, w, k, r, s, oh, ow, sh, sw, ph, pw, dh, dw, groups;
	uint32_t out, a, b;
	uint32_t nhwc;
} KConv;

// A loop over kernels: kernels begin .. end-1 run `trip` times in order,
// the step counter (KX_STEP of this loop) going 0, 1, .., trip-1.  Loops
// nest properly (an inner loop's range lies inside its parent's) and an
// inner loop has a larger index than its parent.  A `scan` is one loop:
// its body's kernels, then copies of the new carries into the carry
// buffers (codegen/lower.c, kernel_scan).
typedef struct KLoop {
	uint32_t begin, end;
	int64_t trip;
	int parent; // enclosing loop, -1 for none
} KLoop;

typedef struct KProgram {
	Arena *arena; // owns everything below
	const char *name; // the task
	DType fcompute; // compute dtype of f32 values: DT_F32, or DT_F64 (testing, init)
	KBuf *buf;
	uint32_t nbuf, cbuf;
	Kx *x; // x[0] unused
	uint32_t nx, cx;
	uint32_t *xhash; // open addressing over x, 0 = empty
	uint32_t cxhash;
	KKernel *k;
	uint32_t nk, ck;
	KLoop *loop; // loops over kernel ranges, outer before inner
	uint32_t nloop, cloop;
	KConv *conv; // convolutions (KKernel.conv)
	uint32_t nconv, cconv;
	uint32_t ninput, noutput; // the task's inputs and outputs
	uint32_t *inbuf, *outbuf; // their buffers (outbuf[o]: the KB_OUT buffer)
	int uses_runseed;
	int consts_done; // kir_consts has run (once per program)
	int64_t stats_out_bytes; // codegen/compile.c's --stats: the task's output bytes
	// The memory plan (cg_plan): arena size with liveness-based reuse, and
	// the sum of the temporaries' sizes without reuse.  live_bytes is the
	// lower bound any placement of these lifetimes has: the most bytes
	// (64-byte aligned sizes) live at one kernel.
	int64_t arena_bytes, naive_bytes, live_bytes;
	// cg_remat's memory goal in bytes (plan.c): 0 until the first plan sets
	// it, -1 for none; a copy of the program keeps its original's.
	int64_t remat_goal;
	// kx_range's memo (kir.c): expressions are immutable once added, so a
	// range computed once holds for the program's life.
	struct KxRangeCache *rcache;
} KProgram;

// ---------------------------------------------------------------- kir.c
KProgram *kir_program_new(const char *name, DType fcompute);
void kir_program_free(KProgram *p);
// Frees the blocks that p's arrays outgrew and shrinks them to their size;
// no pointer into p->x, p->k or p->buf taken before may be used after.
void kir_program_trim(KProgram *p);
uint32_t kir_buf_add(KProgram *p, KBufKind kind, int index, DType dt, const Shape *s, NodeId node);
KKernel *kir_kernel_add(KProgram *p); // zeroed, appended
// A loop starting at the next kernel (end set by kir_loop_end); its index.
int kir_loop_begin(KProgram *p, int64_t trip, int parent);
void kir_loop_end(KProgram *p, int loop); // the loop ends after the last kernel added
size_t kir_dtype_size(DType dt); // bytes per element in a buffer (bool: 1)
// The most bytes one buffer may hold: 2^56 (64 PiB, beyond any machine's
// memory, and above any --max-task-bytes a test uses: resnet18's Hessian
// plans buffers of 2^50).  Shapes may hold up to 2^62 elements (the
// frontend's limit), so numel * element size can overflow int64; the
// memory plan sums sizes and offsets, which stay below 2^63 for any 128
// buffers of this size.  cg_lower refuses a larger value with its
// location before any arithmetic.
#define KIR_MAX_BUF_BYTES ((int64_t)1 << 56)
// The bytes of a buffer of dtype dt and shape s, or -1 above KIR_MAX_BUF_BYTES
// (computed without overflow).
int64_t kir_shape_bytes(DType dt, const Shape *s);
DType kir_compute_dtype(const KProgram *p, DType storage); // f32 -> p->fcompute

// Expression builders.  Results are hash-consed; float arithmetic is never
// folded here (LLVM folds constants with the target's semantics), integer
// index arithmetic always is.
KxId kx_const(KProgram *p, double v, DType dt); // v rounded to dt (F32: to float)
KxId kx_iconst(KProgram *p, int64_t v);
KxId kx_bconst(KProgram *p, int v);
KxId kx_var(KProgram *p, int var, int64_t extent); // extent 1: the constant 0
KxId kx_load(KProgram *p, uint32_t buf, KxId index);
KxId kx_acc(KProgram *p, DType dt);
KxId kx_runseed(KProgram *p);
KxId kx_step(KProgram *p, int loop); // loop's step counter; the constant 0 if trip <= 1
KxId kx_un(KProgram *p, KxOp op, KxId a);
KxId kx_bin(KProgram *p, KxOp op, KxId a, KxId b);
KxId kx_cmp(KProgram *p, KCmp c, KxId a, KxId b);
KxId kx_select(KProgram *p, KxId c, KxId a, KxId b);
KxId kx_cast(KProgram *p, KxId a, DType to); // to a storage dtype; result in compute dtype
KxId kx_polygamma(KProgram *p, KxId n, KxId x);
KxId kx_rand(KProgram *p, KRand kind, int64_t seed, KxId index, KxId alpha);
KxId kx_iadd(KProgram *p, KxId a, KxId b);
KxId kx_imul(KProgram *p, KxId a, int64_t c);
KxId kx_idiv(KProgram *p, KxId a, int64_t d); // floor(a / d), d > 0
KxId kx_imod(KProgram *p, KxId a, int64_t d); // a - d floor(a / d), d > 0
KxId kx_imin(KProgram *p, KxId a, KxId b);
KxId kx_imax(KProgram *p, KxId a, KxId b);
KxId kx_iclamp(KProgram *p, KxId a, int64_t lo, int64_t hi); // lo <= hi
// x (an expression of any program) made again in q over operands a (ids of
// q) through its op's constructor: index arithmetic folds (kir.c, remaking).
KxId kx_remake(KProgram *q, const Kx *x, const KxId *a);
// Is index e affine in loop variable `var` with a constant coefficient?
// (1 and *coef, or 0 when var appears inside a division or a load.)
int kx_affine_coef(const KProgram *p, KxId e, int var, int64_t *coef);
// The range [*lo, *hi] an I64 expression can take (0 if unknown).  Each
// expression's range is computed once per program (p->rcache): the
// builders ask for ranges as they simplify, and without the memo a shared
// subexpression was walked once per path to it (exponential in a deep
// index DAG).
int kx_range(const KProgram *p, KxId a, int64_t *lo, int64_t *hi);
static inline const Kx *kx(const KProgram *p, KxId id) { return &p->x[id]; }
// The structural hash of expression id, equal for expressions that differ
// only in float constants' values, loads' buffers or steps' loops (kir.c);
// kx_bin orders commutative operands by it.
uint64_t kx_shape(const KProgram *p, KxId id);
// FNV-1a over node x with its operands, a load's buffer and a step's loop
// left out (their dtypes kept), and a float constant's value too unless
// fvalue: the start of kx_shape's and llvm.c's shape_hash; kx_fnv_u64
// folds an operand's hash into it.
uint64_t kx_node_fnv(const KProgram *p, const Kx *x, int fvalue);
uint64_t kx_fnv_u64(uint64_t h, uint64_t v);

// Costs (kir.c, "costs"): the rough latency of one kernel-IR op in quarter
// steps (an add 1, a load 4, a division 8, exp or log 32, lgamma 96,
// digamma 160; leaves 0), and of one evaluation of expression e, each node
// of its DAG once (at most 256 looked at: beyond, e is costly anyway).
// codegen/fuse.c's cg_op_cost weighs graph ops in the same units.
int kx_op_cost(KxOp op);
int64_t kx_cost(const KProgram *p, KxId e);

// ---------------------------------------------------------------- GEMM plans
// A contraction kernel whose value is exactly a product summed over its
// reduction variables, C[...] = sum A[...] B[...], with every index affine
// in the loop variables (one constant coefficient per variable), recognised
// once for both backends.  A and B are the two loads of the product: B is
// the one that moves with the last parallel variable (the column j), A the
// other (when the first load moves with j and the second does not, they
// are swapped).  Coefficients are per variable, parallel ones first
// (0 .. rank-1), then the reduction ones (rank .. rank+rrank-1).  The
// kernel's post must be the accumulator itself (no epilogue), and A, B and
// C are stored in the compute dtype (F32 or F64; no conversion).
typedef struct KGemm {
	uint32_t abuf, bbuf; // the buffers of A and B
	KxId aidx, bidx; // their load indices
	int64_t ca[2 * IR_MAXDIM], cb[2 * IR_MAXDIM], cc[2 * IR_MAXDIM];
	// The element index at every variable 0, for A, B and C, when all three
	// indices are affine in the loop variables and nothing else (konst);
	// else an index also holds a term of a step counter or a load, and the
	// bases are unknown here (the CPU backend evaluates them).
	int konst;
	int64_t a0, b0, c0;
} KGemm;
int kir_gemm_match(const KProgram *p, const KKernel *k, KGemm *g);
// Materializes the operands of large contractions that fusion made
// non-affine (kir.c, "GEMM operands"), so that they get GEMM plans.
void kir_gemm_operands(KProgram *p);
// Splits sums of many terms into few points in two kernels (kir.c, "split
// reductions"): partial sums along the first reduction variable, then
// their sum.
void kir_split_reductions(KProgram *p);
// A kernel's output points (the product of its parallel extents), and its
// terms per point (of its reduction extents; 1 without a reduction).
int64_t kir_kernel_points(const KKernel *k);
int64_t kir_kernel_terms(const KKernel *k);

// The same kernel as one strided batched GEMM in row-major terms, what a
// BLAS call needs (codegen/cuda_sched.c makes it a cuBLAS launch record):
//   for b < batch:  C_b (M x N) = op(A_b) (M x K) . op(B_b) (K x N), where
//   C_b(i, j) = C[oc + b sc + i ldc + j]
//   A_b(i, k) = A[oa + b sa + i lda + k]   (ta = 0)   or  A[oa + b sa + k lda + i]   (ta = 1)
//   B_b(k, j) = B[ob + b sb + k ldb + j]   (tb = 0)   or  B[ob + b sb + j ldb + k]   (tb = 1)
// (element indices into the buffers).  Parallel variables of extent 1 are
// ignored; the rows are the parallel variables just outside j along which
// B does not move and A and C merge into one stride (x[B, L, E] @ w[E, F]
// is one GEMM of B L rows); the other parallel variables must merge into
// one batch axis with constant strides (B's or A's may be 0: a shared
// operand), the reduction variables into one K.  Every stride is >= 0,
// lda >= K (ta = 0) or M (ta = 1), ldb >= N (tb = 0) or K (tb = 1),
// ldc >= N, every extent and leading dimension fits in an int (cuBLAS's
// type) and every element touched lies inside its buffer.  0 when the
// kernel has no such form (a sum of GEMMs over a reduction axis, e.g.
// conv_weight_grad's over the batch; an output not contiguous along j).
typedef struct KGemmPlan {
	DType dt; // F32 or F64
	uint32_t cbuf, abuf, bbuf;
	int ta, tb;
	int64_t M, N, K, batch;
	int64_t lda, ldb, ldc;
	int64_t sa, sb, sc; // batch strides (0 when batch is 1)
	int64_t oa, ob, oc; // the first element of A_0, B_0, C_0
} KGemmPlan;
int kir_gemm_plan(const KProgram *p, const KKernel *k, KGemmPlan *g);

// Compile-time report: with FADC_TIME=1 in the environment, each phase of a
// compile prints one line on stderr, `fadc: time: PHASE WHAT: W s wall,
// C s cpu` (docs/CODEGEN.md, "Compile time").  kir_time_start() returns a
// mark (0 when the report is off); kir_time_note() prints since the mark.
typedef struct KTime {
	double wall, cpu;
	int on;
} KTime;
KTime kir_time_start(void);
void kir_time_note(KTime t, const char *phase, const char *what);

// ---------------------------------------------------------------- kir_consts.c
// Takes the kernels' non-trivial float constants (eps, 1/N: not zero,
// integers, powers of two, nor an operand whose value a printer reads) out
// of their expressions into per-kernel views of a table at the arena's
// end, written by a kernel put first, so that kernels differing only in
// such constants print and key alike (kir_consts.c).  Runs after the
// memory plan, once per program (p->consts_done); grows arena_bytes.
// Returns the views made; FADC_KIR_CONSTS=0 turns it off.
int kir_consts(KProgram *p);

// Canonical text of the program (for dumps and golden tests).
void kir_print(FILE *f, const KProgram *p);
const char *kx_op_name(KxOp op);

#endif
