// codegen/llvm_impl.h -- what the three files of the LLVM backend share:
// llvm.c (the emitter: kernels, loops, tasks, the module), llvm_math.c (the
// vector math library: exp, log, tanh, erf, lgamma, ... as IR) and
// llvm_gemm.c (the blocked GEMM).  Private to them, like llvm-c/* itself:
// no other file includes this header, and CMake gives LLVM's include folder
// to fadc_codegen privately.
//
// The emitter owns the state (Emit) and calls the other two: llvm_math_fn
// for the math of the loops that vectorize, llvm_gemm_plan and
// llvm_emit_gemm for the contractions the GEMM takes (and llvm_gemm_range,
// llvm_gemm_vl to split those for the thread pool).  They call back into
// the emitter for expressions (llvm_emit_x), conversions and loops.  The
// one-line helpers (types, constants, attributes, intrinsic calls) are
// static inline here; everything else is defined once, in the file that
// owns it, with the llvm_ prefix.
#ifndef FADC_LLVM_IMPL_H
#define FADC_LLVM_IMPL_H

#include <string.h>

#include <llvm-c/Core.h>

#include "codegen.h"

// ---------------------------------------------------------------- emitter state

// How a large kernel is split for the thread pool (split_plan): its range
// [0, n) is the flattened first `nax` parallel axes (a GEMM: its own range,
// llvm_emit_gemm), run in chunks of at least `grain` iterations.
typedef struct Split {
	int on;
	int nax; // leading parallel axes flattened into the range (not for a GEMM)
	int64_t n, grain;
} Split;

typedef struct Emit {
	LLVMContextRef C;
	LLVMModuleRef M; // the module being emitted into: one of mods
	// The pieces (docs/CODEGEN.md "Compile time"): npieces modules chosen
	// by a hash of a name, then the entry's own module (mods[npieces]) when
	// there is more than one; one module in all when npieces is 1.
	LLVMModuleRef *mods;
	unsigned npieces, nmods;
	LLVMBuilderRef B;
	LLVMTypeRef i1, i8, i32, i64, f32, f64, voidt, i8p, i8pp, callt, callp, taskfn;
	const KProgram *p;
	// The kernel being emitted.
	LLVMValueRef fn;
	LLVMValueRef *bufptr; // typed pointer of each buffer the kernel touches
	LLVMValueRef runseed;
	LLVMValueRef *step; // step[l]: the step counter of loop l (a kernel parameter)
	LLVMValueRef var[2 * IR_MAXDIM]; // loop counter allocas
	LLVMValueRef acc; // accumulator alloca
	// A split kernel (Split.on): its range bounds (parameters), and the
	// loop over the range that par_begin opened.
	Split sp;
	LLVMValueRef lo, hi, flat;
	// A GEMM split over K (Gemm.ks > 1): the caller's partial results, an
	// i8 pointer parameter (llvm_gemm_part).
	LLVMValueRef part;
	LLVMValueRef *val; // memo: value of expression id in the current region
	uint32_t *stamp, region;
	struct Shared *shared; // kernel functions emitted so far, by key (emit_kernel)
	uint32_t nshared, cshared;
	uint32_t *shash, nshash; // their hash table: index + 1 into shared, 0 empty
	// Thunks of kernel functions called from a call table (emit_table),
	// one per kernel function, by the function's address.
	LLVMValueRef *thkey, *thval;
	uint32_t nthunk, nthhash;
	LLVMTypeRef thunkfn; // i32 (fadc_call_v1 *, const i64 *)
	LLVMValueRef mathfn[9][2]; // exp .. trigamma, f32 and f64 (llvm_math_fn)
	int vecmath; // the expressions being emitted are in a loop that vectorizes
	// Bytes per vector register of the target: 32 (AVX2), 64 with
	// AVX-512F (wide); the GEMM's tile vectors are vbytes wide (llvm_gemm_vl).
	// FADC_GEMM_VBYTES=64 (tests) gives an AVX2 target 512-bit tiles, two
	// registers per vector, so that those tiles run and are checked on
	// any machine.
	unsigned vbytes;
	int wide;
} Emit;

static inline LLVMTypeRef
ty(Emit *e, DType dt)
{
	switch (dt) {
	case DT_F32:
		return e->f32;
	case DT_F64:
		return e->f64;
	case DT_I64:
		return e->i64;
	case DT_BOOL:
		return e->i1;
	default:
		FADC_ASSERT(0, "llvm: no type for this dtype");
		return NULL;
	}
}

// Storage type: bool is a byte in memory.
static inline LLVMTypeRef
sty(Emit *e, DType dt)
{
	return dt == DT_BOOL ? e->i8 : ty(e, dt);
}

static inline LLVMValueRef
i64c(Emit *e, int64_t v)
{
	return LLVMConstInt(e->i64, (unsigned long long)v, 1);
}

static inline unsigned
attr_kind(const char *name)
{
	return LLVMGetEnumAttributeKindForName(name, strlen(name));
}

static inline void
fn_attr(Emit *e, LLVMValueRef fn, unsigned idx, const char *name)
{
	LLVMAddAttributeAtIndex(fn, idx, LLVMCreateEnumAttribute(e->C, attr_kind(name), 0));
}

// A call of LLVM intrinsic `name` overloaded on the nt types ot.
static inline LLVMValueRef
intrinsic_ov(Emit *e, const char *name, LLVMTypeRef *ot, unsigned nt, LLVMValueRef *args, unsigned n)
{
	unsigned id = LLVMLookupIntrinsicID(name, strlen(name));
	FADC_ASSERT(id != 0, name);
	LLVMValueRef f = LLVMGetIntrinsicDeclaration(e->M, id, ot, nt);
	LLVMTypeRef fty = LLVMIntrinsicGetType(e->C, id, ot, nt);
	return LLVMBuildCall2(e->B, fty, f, args, n, "");
}

// The same for an intrinsic overloaded on one type t.
static inline LLVMValueRef
intrinsic(Emit *e, const char *name, LLVMTypeRef t, LLVMValueRef *args, unsigned n)
{
	return intrinsic_ov(e, name, &t, 1, args, n);
}

static inline LLVMValueRef
intrinsic1(Emit *e, const char *name, LLVMTypeRef t, LLVMValueRef a)
{
	LLVMValueRef args[1] = {a};
	return intrinsic(e, name, t, args, 1);
}

// ---------------------------------------------------------------- llvm.c: expressions, loops

// Function g as seen from the module being emitted (e->M): g itself when
// it is defined there, else a declaration of it (made once per module),
// and g is then exported from its own piece (external, hidden).
LLVMValueRef llvm_ref(Emit *e, LLVMValueRef g);

// Converts v of compute dtype `from` to compute dtype `to`; round32 first
// rounds to float (a cast to f32 storage while computing in f64).
LLVMValueRef llvm_convert(Emit *e, LLVMValueRef v, DType from, DType to, int round32);
// The value of expression id at the current point, emitted once per region.
LLVMValueRef llvm_emit_x(Emit *e, KxId id);

typedef struct Loop {
	LLVMBasicBlockRef head, body, exit;
	LLVMValueRef ctr;
	int64_t ext;
} Loop;

// Loops of counter ctr (an i64 alloca) over [0, ext) (_v: ext an i64
// value) or [lo, hi); llvm_loop_end closes any of them.
void llvm_loop_begin_v(Emit *e, Loop *l, LLVMValueRef ctr, LLVMValueRef ext);
void llvm_loop_begin(Emit *e, Loop *l, LLVMValueRef ctr, int64_t ext);
void llvm_loop_begin_range(Emit *e, Loop *l, LLVMValueRef ctr, LLVMValueRef lo, LLVMValueRef hi);
void llvm_loop_end(Emit *e, Loop *l);
// Stores the coordinates of flat index f over dims[0 .. n) (row-major)
// into vars[0 .. n).
void llvm_store_coords(Emit *e, LLVMValueRef f, const int64_t *dims, int n, LLVMValueRef *vars);
// An alloca in the entry block (promoted by mem2reg).
LLVMValueRef llvm_entry_alloca(Emit *e, LLVMTypeRef t);

// Expressions are memoized per region: a new one starts wherever values
// computed before may no longer hold (a new loop point).
static inline void
new_region(Emit *e)
{
	e->region++;
}

// ---------------------------------------------------------------- llvm_math.c

// Not a kernel-IR op: polygamma of order 1 in llvm_math_fn's table.
#define KX_TRIGAMMA ((KxOp)KX_COUNT)

// The internal function computing op (exp, log, log1p, expm1, tanh, erf,
// lgamma, KX_POLYGAMMA for digamma, KX_TRIGAMMA) in dtype dt, F32 or F64.
LLVMValueRef llvm_math_fn(Emit *e, KxOp op, DType dt);

// ---------------------------------------------------------------- llvm_gemm.c

// A contraction kernel as the blocked GEMM sees it (llvm_gemm_plan).
typedef struct Gemm {
	int vi; // parallel variable of the rows (-1: one row)
	int vj; // of the columns (the last one)
	int vr; // rows run over variables vr .. vi, row-major (outer axes merged into them)
	int64_t M, N;
	uint32_t abuf, bbuf; // the buffers of A and B
	KxId aidx, bidx; // their load indices
	int64_t ca_i, cb_j, cc_i; // coefficients: A along i, B along j (1), C along i
	int64_t ca_k[IR_MAXDIM], cb_k[IR_MAXDIM]; // along each reduction variable
	// The reduction as one axis k = (r0, r1, ...) row-major, when every
	// variable's coefficients in A and B are the next one's times its
	// extent (a weight gradient summing over (n, p) of gT[co, n, p] and
	// colT[n, p, q]): K steps, A and B moving by ka and kb per step.
	int one;
	int64_t K, ka, kb;
	// The register tile and the cache blocks (llvm_gemm_plan, from the
	// tile vectors' width and the compute dtype): MR rows x NV vectors of
	// VL lanes; KC reduction steps per packed block; MC rows per group
	// (A's packed block, MC x KC).
	int mr, nv;
	unsigned vl;
	int64_t kc, mc;
	int packb; // B packed per block (G->one and more than one row block)
	int64_t tb; // column tiles per iteration of the range (gemm_col_blocks)
	// The reduction cut into ks fixed parts of kspan steps (the last
	// shorter), for shapes with few range iterations (gemm_ksplit): part
	// 0 sums into C, part s > 0 into the caller's partial block s - 1,
	// added to C in order of s after the range (the kernel called with
	// lo = -1).  ks = 1: no split.
	int64_t ks, kspan;
} Gemm;

// Lanes of the GEMM's tile vectors for compute dtype vt.
unsigned llvm_gemm_vl(unsigned vbytes, DType vt);
// Whether kernel k runs as the blocked GEMM, and how (*G).
int llvm_gemm_plan(const KProgram *p, const KKernel *k, unsigned vbytes, Gemm *G);
// The GEMM's range (outer points x column tiles x row groups), the unit
// of the thread pool's split.
void llvm_gemm_range(const KKernel *k, const Gemm *G, unsigned vl, int64_t *nouter_pts,
                     int64_t *ncol, int64_t *ngroup);
// The body of kernel k's function as the GEMM of plan G.
void llvm_emit_gemm(Emit *e, const KKernel *k, const Gemm *G, Loop *loops);
// The calling thread's block for a K-split GEMM's partial results (an i8
// pointer), at the builder's position: passed to the kernel function
// (Emit.part), which every chunk writes through and which the sum reads.
LLVMValueRef llvm_gemm_part(Emit *e);

// ---------------------------------------------------------------- llvm_pieces.c

// The modules of the main context compiled to object files PREFIX.0.o,
// ... in module order (only the modules that define something; *nobj
// says how many): each verified, written as bitcode, looked up in
// tg->cache by a key of that bitcode and the target; the misses are
// parsed, optimized with `pipeline` and compiled as jobs of tg->pool (or
// of a pool of tg->jobs threads of its own), each in an LLVM context of
// its own, and stored.  The objects are a function of the bitcode alone,
// so the same whatever the threads, their timing and the cache.
// emit_llvm (one module): its optimized IR is printed there.
//
// In two steps, so that the pieces compile while the caller makes the
// last module (the entry's, which holds the descriptor): start with
// mods[0..nmods) (at most maxmods in all, with the one finish adds);
// finish with the last module (NULL: none), index its module number,
// waits and writes the objects; end frees (after a failure too, waiting
// for the jobs already running).  A module must not change once given.
typedef struct LlvmPieces LlvmPieces;
LlvmPieces *llvm_pieces_start(LLVMModuleRef *mods, unsigned nmods, unsigned maxmods,
                              const CgTarget *tg, const char *triple, FILE *emit_llvm, char *err,
                              size_t errlen);
// A higher CPU level's modules mods[0 .. nmods) (level > 0 of tg->level,
// emitted like level 0's mods0 and in the same pieces): from AVX2 up, a
// module whose IR is level 0's is left out and of the others only the
// functions that differ stay (with their users and the internal functions
// they call); what stays is renamed NAME.CPU with every reference to it,
// verified and queued.  taskname[i] gets the name (malloc'ed) the entry
// calls task function task[i] by: renamed, or level 0's.  Returns how many
// modules were kept, or -1 with err set.
int llvm_pieces_level(LlvmPieces *lp, LLVMModuleRef *mods, LLVMModuleRef *mods0, unsigned nmods,
                      int level, const char *const *task, int ntask, char **taskname, char *err,
                      size_t errlen);
int llvm_pieces_finish(LlvmPieces *lp, LLVMModuleRef last, unsigned index, const char *prefix,
                       int *nobj, char *err, size_t errlen);
void llvm_pieces_end(LlvmPieces *lp);

#endif
