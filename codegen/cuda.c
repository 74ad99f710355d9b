// codegen/cuda.c -- the CUDA backend, first slice: kernel IR to CUDA C, and
// CUDA C to a cubin (or PTX) through NVRTC.  The only file of fadc that
// includes nvrtc.h; it is built only where CMake found the CUDA toolkit
// (FADC_HAVE_CUDA), and the runtime never links NVRTC.
//
// cg_cuda_print mirrors codegen/llvm.c's walk of the kernel IR: one
// `extern "C" __global__` function per kernel, taking one pointer per buffer
// it touches (the output first, then the buffers it loads in buffer order,
// all __restrict__: the memory plan never lets a kernel's output share bytes
// with what it reads), and the run seed last when it uses one.  The parallel
// domain is a grid-stride loop over the flattened, row-major output points;
// each loop variable is recovered as (t / stride) % dim, only where the
// kernel reads it.  A reduction is a sequential loop nest in the thread that
// owns the output point, or, for long ones into few points, one block (or
// in a fused task one warp) per point folding by warp shuffles.
// Expressions are printed once per region (the block where they are
// evaluated) as `const T xID = ...;`, memoized by KxId as in llvm.c, with
// the same scalar semantics: NaN-propagating max/min, ordered comparisons
// except NE/UGT/ULT/UNO, floor division, the same casts.  Special functions
// are CUDA's (expf, log1pf, lgammaf, ...); digamma and trigamma are
// codegen/cuda_special.h's (llvm.c's algorithms, in the dtype), polygamma
// of other orders a __device__ port of codegen/support.c in double, each
// printed once per program that uses it.  Floats are
// printed as hexadecimal literals (exact); the output depends on the
// program only, so printing twice gives the same bytes.
//
// NVRTC calls go through one checked path, CHECK_NVRTC: the statement,
// function, file, line and nvrtcGetErrorString into err; a failed
// compilation also writes the program log and the blamed source lines in
// context to the diagnostics stream, and the whole source to a file it
// names (nvrtc_report).  Kernels are compiled with --fmad=false: the
// CPU backend never contracts a*b+c, and the interpreter is the reference.
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <nvrtc.h>

#include "codegen.h"
#include "fileio.h"

// ---------------------------------------------------------------- printer state

typedef struct Cu {
	FILE *f;
	const KProgram *p;
	int fused;               // kernels are __device__ functions of one fused kernel
	uint8_t *inloop;         // inloop[ki]: kernel ki runs inside a loop (scan)
	uint32_t *stamp, region; // memo: x<id> is defined in the current region
	int depth;               // indentation (tabs)
	int bad;                 // an op the printer does not support (the first)
	int var32;               // the kernel's variables (t, r, i<d>) are int (index32)
	int ictx;                // printing the operands of an index op: 1 narrow, 2 wide
	uint8_t *rot;            // fused: rot[ki], kernel ki's warp rotation (cuda_fused_rotations)
} Cu;

static const char *
cty(DType dt) {
	switch (dt) {
	case DT_F32:
		return "float";
	case DT_F64:
		return "double";
	case DT_I64:
		return "long long";
	case DT_BOOL:
		return "bool";
	default:
		FADC_ASSERT(0, "cuda: no type for this dtype");
		return NULL;
	}
}

// Storage type: bool is a byte in memory.
static const char *
csty(DType dt) {
	return dt == DT_BOOL ? "unsigned char" : cty(dt);
}

static int
isflt(DType dt) {
	return dt == DT_F32 || dt == DT_F64;
}

static void
indent(Cu *c) {
	for (int i = 0; i < c->depth; i++)
		fputc('\t', c->f);
}

static void
print_float(FILE *f, double v, DType dt) {
	if (isnan(v))
		fputs(dt == DT_F32 ? "__int_as_float(0x7fc00000)"
		                   : "__longlong_as_double(0x7ff8000000000000LL)",
		      f);
	else if (isinf(v))
		fprintf(f, "%s%s", v < 0 ? "-" : "",
		        dt == DT_F32 ? "__int_as_float(0x7f800000)"
		                     : "__longlong_as_double(0x7ff0000000000000LL)");
	else if (dt == DT_F32)
		fprintf(f, "%af", v);
	else
		fprintf(f, "%a", v);
}

static void
print_int(FILE *f, int64_t v) {
	if (v == INT64_MIN)
		fputs("(-9223372036854775807LL - 1)", f);
	else
		fprintf(f, "%lldLL", (long long)v);
}

// ---------------------------------------------------------------- expressions

// digamma and trigamma: the text of codegen/cuda_special.h (embedded by
// CMake: cmake/embed.cmake), printed once per program that calls them.
extern const char cg_cuda_special_text[];

// 0 or 1 where x is a polygamma of constant order 0 (digamma) or 1
// (trigamma) in f32 or f64, which cuda_special.h computes in the dtype
// (codegen/llvm.c makes the same choice); else -1 (fadc_polygamma).
static int
pg_special(const KProgram *p, const Kx *x) {
	const Kx *n = &p->x[x->a[0]];
	if (x->op != KX_POLYGAMMA || !isflt((DType)x->dtype) || n->op != KX_CONST ||
	    !isflt((DType)n->dtype))
		return -1;
	return n->f == 0 ? 0 : n->f == 1 ? 1 : -1;
}

static void ensure(Cu *c, KxId id);

// Index arithmetic in 32 bits.  The kernel IR's indices are i64, and
// printed as long long every division by a constant (t / 22 % 10) is a
// 64-bit multiply-high sequence, several times the instructions of the
// 32-bit one: in the small fused tasks, where every kernel computes a few
// indices per point and does little else, it is much of the time.  An
// index op (+ * / % min max on i64) whose value kx_range bounds within
// int is declared int and computed in int: each op's exact result fits,
// so no step overflows (the operands of an op are themselves bounded
// expressions, or wider values whose exact result is then narrowed).
// An op whose range is not known to fit stays long long, and its int
// operands are widened first, so that its own arithmetic cannot overflow.
// Ranges come from kx_range, which computes each expression's once per
// program (a deep DAG that shares at every level stays linear).
static int
narrow(Cu *c, KxId id) {
	const Kx *x = &c->p->x[id];
	int64_t lo, hi;
	switch ((KxOp)x->op) {
	case KX_VAR:
		return c->var32;
	case KX_IADD:
	case KX_IMUL:
	case KX_IDIV:
	case KX_IMOD:
	case KX_IMIN:
	case KX_IMAX:
		return x->dtype == DT_I64 && kx_range(c->p, id, &lo, &hi) &&
		       lo > -INT32_MAX && hi < INT32_MAX;
	default:
		return 0;
	}
}

// Prints a reference to expression id: a literal for leaves, else x<id>.
static void
ref(Cu *c, KxId id) {
	const Kx *x = &c->p->x[id];
	switch ((KxOp)x->op) {
	case KX_CONST:
		if (isflt((DType)x->dtype))
			print_float(c->f, x->f, (DType)x->dtype);
		else if (x->dtype == DT_BOOL)
			fputs(x->i ? "true" : "false", c->f);
		else if (c->ictx == 1 && x->i > -INT32_MAX && x->i < INT32_MAX)
			fprintf(c->f, "%d", (int)x->i);
		else
			print_int(c->f, x->i);
		return;
	case KX_VAR:
		fprintf(c->f, c->ictx == 2 && c->var32 ? "(long long)i%u" : "i%u", x->aux);
		return;
	case KX_ACC:
		fputs("acc", c->f);
		return;
	case KX_RUNSEED:
		fputs("((long long)runseed)", c->f);
		return;
	case KX_STEP:
		fprintf(c->f, "s%u", x->aux); // the step counter, a parameter
		return;
	default:
		fprintf(c->f, c->ictx == 2 && narrow(c, id) ? "(long long)x%u" : "x%u", id);
	}
}

// v (a reference to id) of compute dtype `from` as compute dtype `to`;
// round32 first rounds to float (a cast to f32 storage while computing in
// f64).  The rules of llvm.c's convert().
static void
convert(Cu *c, KxId id, DType from, DType to, int round32) {
	FILE *f = c->f;
	int ff = isflt(from), tf = isflt(to);
	if (ff && tf) {
		if (round32 && from == DT_F64) {
			fprintf(f, "(%s)(float)", cty(to));
			ref(c, id);
		} else if (from == to)
			ref(c, id);
		else {
			fprintf(f, "(%s)", cty(to));
			ref(c, id);
		}
		return;
	}
	if ((ff || from == DT_I64) && to == DT_BOOL) {
		fputs("(", f);
		ref(c, id);
		fputs(" != 0)", f); // C's != is unordered: NaN is true, as LLVM's UNE
		return;
	}
	if (from == DT_I64 && tf && round32 && to == DT_F64) {
		fputs("(double)(float)", f);
		ref(c, id);
		return;
	}
	if (from != to) {
		fprintf(f, "(%s)", cty(to));
		ref(c, id);
		return;
	}
	ref(c, id);
}

static const char *
fname(DType dt, const char *base) {
	// "expf" for f32, "exp" for f64: the f32 name is the base plus 'f'.
	static char buf[8][32];
	static int k;
	k = (k + 1) % 8;
	snprintf(buf[k], sizeof buf[k], "%s%s", base, dt == DT_F32 ? "f" : "");
	return buf[k];
}

static void
call1(Cu *c, DType dt, const char *base, KxId a) {
	fprintf(c->f, "%s(", fname(dt, base));
	ref(c, a);
	fputs(")", c->f);
}

static void
binop(Cu *c, KxId a, const char *op, KxId b) {
	ref(c, a);
	fprintf(c->f, " %s ", op);
	ref(c, b);
}

// The right-hand side of x<id>.
static void
print_op(Cu *c, KxId id) {
	const KProgram *p = c->p;
	const Kx *x = &p->x[id];
	FILE *f = c->f;
	DType dt = (DType)x->dtype;
	int isf = isflt(dt);
	KxId a = x->a[0], b = x->a[1], d = x->a[2];
	switch ((KxOp)x->op) {
	case KX_LOAD: {
		DType st = p->buf[x->aux].dtype;
		fprintf(f, "(%s)b%u[", cty(dt), x->aux);
		ref(c, a);
		fputs("]", f);
		if (st == DT_BOOL)
			fputs(" != 0", f);
		return;
	}
	case KX_IADD:
		binop(c, a, "+", b);
		return;
	case KX_IMUL:
		binop(c, a, "*", b);
		return;
	case KX_IDIV:
	case KX_IMOD: {
		int64_t lo, hi;
		const char *o = x->op == KX_IDIV ? "/" : "%";
		if (kx_range(p, a, &lo, &hi) && lo >= 0) {
			binop(c, a, o, b);
			return;
		}
		// Floor division and modulo by a positive constant.
		fputs("(", f);
		binop(c, a, "%", b);
		fputs(") < 0 ? ", f);
		if (x->op == KX_IDIV) {
			fputs("(", f);
			binop(c, a, "/", b);
			fputs(") - 1 : ", f);
			binop(c, a, "/", b);
		} else {
			fputs("(", f);
			binop(c, a, "%", b);
			fputs(") + ", f);
			ref(c, b);
			fputs(" : ", f);
			binop(c, a, "%", b);
		}
		return;
	}
	case KX_IMIN:
	case KX_IMAX:
		binop(c, a, x->op == KX_IMIN ? "<" : ">", b);
		fputs(" ? ", f);
		binop(c, a, ":", b);
		return;
	case KX_ADD:
		binop(c, a, "+", b);
		return;
	case KX_SUB:
		binop(c, a, "-", b);
		return;
	case KX_MUL:
		binop(c, a, "*", b);
		return;
	case KX_DIV:
		binop(c, a, "/", b);
		return;
	case KX_NEG:
		fputs("-", f);
		ref(c, a);
		return;
	case KX_ABS:
		if (isf)
			call1(c, dt, "fabs", a);
		else {
			ref(c, a);
			fputs(" < 0 ? -", f);
			binop(c, a, ":", a);
		}
		return;
	case KX_MAX:
	case KX_MIN:
		if (isf) {
			// NaN-propagating (torch.maximum): NaN if either is.
			fputs("(", f);
			binop(c, a, "!=", a);
			fputs(" || ", f);
			binop(c, b, "!=", b);
			fputs(") ? ", f);
			binop(c, a, "+", b);
			fputs(" : ", f);
		}
		fputs("(", f);
		binop(c, a, x->op == KX_MAX ? ">" : "<", b);
		fputs(" ? ", f);
		binop(c, a, ":", b);
		fputs(")", f);
		return;
	case KX_POW:
		fprintf(f, "%s(", fname(dt, "pow"));
		binop(c, a, ",", b);
		fputs(")", f);
		return;
	case KX_FLOOR:
		call1(c, dt, "floor", a);
		return;
	case KX_SQRT:
		call1(c, dt, "sqrt", a);
		return;
	case KX_EXP:
		call1(c, dt, "exp", a);
		return;
	case KX_LOG:
		call1(c, dt, "log", a);
		return;
	case KX_LOG1P:
		call1(c, dt, "log1p", a);
		return;
	case KX_EXPM1:
		call1(c, dt, "expm1", a);
		return;
	case KX_TANH:
		call1(c, dt, "tanh", a);
		return;
	case KX_ERF:
		call1(c, dt, "erf", a);
		return;
	case KX_SIN:
		call1(c, dt, "sin", a);
		return;
	case KX_COS:
		call1(c, dt, "cos", a);
		return;
	case KX_LGAMMA:
		call1(c, dt, "lgamma", a);
		return;
	case KX_POLYGAMMA:
		// Orders 0 and 1: codegen/cuda_special.h, in the dtype (as llvm.c).
		if (pg_special(p, x) >= 0) {
			fprintf(f, "fadc_%sgamma%s(", pg_special(p, x) ? "tri" : "di", dt == DT_F32 ? "f" : "");
			ref(c, b);
			fputs(")", f);
			return;
		}
		// Else in double, rounded: as fadc_polygammaf of codegen/support.c.
		fprintf(f, "(%s)fadc_polygamma((double)", cty(dt));
		ref(c, a);
		fputs(", (double)", f);
		ref(c, b);
		fputs(")", f);
		return;
	case KX_CMP: {
		DType ot = (DType)p->x[a].dtype;
		KCmp k = (KCmp)x->aux;
		static const char *const op[] = {
		    [KC_EQ] = "==", [KC_NE] = "!=", [KC_LT] = "<",  [KC_LE] = "<=",
		    [KC_GT] = ">",  [KC_GE] = ">=", [KC_UGT] = ">", [KC_ULT] = "<",
		};
		if (k == KC_UNO) {
			if (!isflt(ot)) {
				fputs("false", f);
				return;
			}
			binop(c, a, "!=", a);
			fputs(" || ", f);
			binop(c, b, "!=", b);
		} else if (isflt(ot) && (k == KC_UGT || k == KC_ULT)) {
			// Unordered or greater (less): not (a <= b).
			fputs("!(", f);
			binop(c, a, k == KC_UGT ? "<=" : ">=", b);
			fputs(")", f);
		} else
			binop(c, a, op[k], b); // bools compare as unsigned after promotion
		return;
	}
	case KX_AND:
		binop(c, a, "&", b);
		return;
	case KX_OR:
		binop(c, a, "|", b);
		return;
	case KX_NOT:
		fputs("!", f);
		ref(c, a);
		return;
	case KX_SELECT:
		ref(c, a);
		fputs(" ? ", f);
		binop(c, b, ":", d);
		return;
	case KX_CAST:
		convert(c, a, (DType)p->x[a].dtype, dt, x->aux == DT_F32 && dt == DT_F64);
		return;
	case KX_RAND:
		// ir/random.c's samplers (double), the same Philox input layout.
		fprintf(f, "fadc_rand_%s(%lluULL, runseed, (unsigned long long)",
		        x->aux == KRAND_NORMAL ? "normal" : "uniform", (unsigned long long)x->i);
		ref(c, a);
		fputs(")", f);
		return;
	default:
		// A kernel-IR construct added after this printer: refused with its
		// name (cg_cuda_print's message), never printed wrong.
		if (!c->bad)
			c->bad = x->op ? x->op : KX_COUNT;
		fputs("0", f);
	}
}

// Defines x<id> (and first its operands) in the current region.
static void
ensure(Cu *c, KxId id) {
	const Kx *x = &c->p->x[id];
	switch ((KxOp)x->op) {
	case KX_CONST:
	case KX_VAR:
	case KX_ACC:
	case KX_RUNSEED:
	case KX_STEP:
		return;
	case KX_RAND:
		if (x->aux == KRAND_GAMMA && !c->bad)
			c->bad = KX_RAND; // gamma: only initializers use it, and they are CPU code
		break;
	default:
		break;
	}
	if (c->stamp[id] == c->region)
		return;
	c->stamp[id] = c->region;
	for (int i = 0; i < x->nin; i++)
		ensure(c, x->a[i]);
	indent(c);
	int idx = x->dtype == DT_I64 && (x->op == KX_IADD || x->op == KX_IMUL || x->op == KX_IDIV ||
	                                 x->op == KX_IMOD || x->op == KX_IMIN || x->op == KX_IMAX);
	int nar = idx && narrow(c, id);
	fprintf(c->f, "const %s x%u = ", nar ? "int" : cty((DType)x->dtype), id);
	c->ictx = idx ? (nar ? 1 : 2) : 0;
	print_op(c, id);
	c->ictx = 0;
	fputs(";\n", c->f);
}

// ---------------------------------------------------------------- kernels

typedef struct Uses {
	uint8_t *seen, *buf, *step, var[2 * IR_MAXDIM];
	int seed, polygamma;
} Uses;

static void
mark(const KProgram *p, KxId id, Uses *u) {
	if (!id || u->seen[id])
		return;
	u->seen[id] = 1;
	const Kx *x = &p->x[id];
	if (x->op == KX_LOAD)
		u->buf[x->aux] = 1;
	else if (x->op == KX_VAR && x->aux < 2 * IR_MAXDIM)
		u->var[x->aux] = 1;
	else if (x->op == KX_RUNSEED || x->op == KX_RAND)
		u->seed = 1;
	else if (x->op == KX_POLYGAMMA)
		u->polygamma = 1;
	else if (x->op == KX_STEP && x->aux < p->nloop)
		u->step[x->aux] = 1;
	for (int i = 0; i < x->nin; i++)
		mark(p, x->a[i], u);
}

static void
red_init(Cu *c, KRed r, DType dt) {
	if (isflt(dt))
		print_float(c->f, r == KR_SUM ? 0.0 : r == KR_MAX ? -HUGE_VAL : HUGE_VAL, dt);
	else
		print_int(c->f, r == KR_SUM ? 0 : r == KR_MAX ? INT64_MIN : INT64_MAX);
}

// acc <- acc (+) v, with the interpreter's NaN rules for max and min: a NaN
// term wins and stays (llvm.c's red_combine).
static void
red_combine(Cu *c, KRed r, DType dt, KxId v) {
	FILE *f = c->f;
	indent(c);
	if (r == KR_SUM) {
		fputs("acc = acc + ", f);
		ref(c, v);
	} else if (!isflt(dt)) {
		fputs("acc = ", f);
		ref(c, v);
		fputs(r == KR_MAX ? " > acc ? " : " < acc ? ", f);
		ref(c, v);
		fputs(" : acc", f);
	} else {
		fputs("if (acc == acc && !(", f);
		ref(c, v);
		fputs(r == KR_MAX ? " <= acc)) acc = " : " >= acc)) acc = ", f);
		ref(c, v);
	}
	fputs(";\n", f);
}

// acc <- acc (+) o for a variable o: the same rules as red_combine (a NaN
// in either stays), for the block reduction's tree.
static void
red_combine_var(Cu *c, KRed r, DType dt, const char *o) {
	FILE *f = c->f;
	indent(c);
	if (r == KR_SUM)
		fprintf(f, "acc = acc + %s;\n", o);
	else if (!isflt(dt))
		fprintf(f, "acc = %s %s acc ? %s : acc;\n", o, r == KR_MAX ? ">" : "<", o);
	else
		fprintf(f, "if (acc == acc && !(%s %s acc)) acc = %s;\n", o, r == KR_MAX ? "<=" : ">=",
		        o);
}

// Long reductions into few points get a block per output point: each of
// the block's 256 threads folds a strided share of the reduction domain,
// each warp folds its 32 lanes' results by shuffles (__shfl_down_sync, no
// shared memory), and warp 0 folds the 8 warps' results the same way: one
// barrier per point.  One thread per point would run the whole domain
// serially: a scalar sum of 20,000 terms in one thread costs ~100 us.  The
// summation order differs from the CPU's (strided partial sums, then a
// fixed tree), within f32 rounding, and is the same every run.  Inside a
// fused task (one block) the form is cuda_fused_mode's choice instead.
#define BLOCKRED_MIN_TERMS 128
#define BLOCKRED_MAX_POINTS 32768

static int cuda_fused(const KProgram *p);
static int cuda_stage_inputs(const KProgram *p, const CgCudaKernel *all, int64_t tmp,
                             int64_t *bytes);

static int
cuda_blockred(const KProgram *p, const KKernel *k) {
	if (!k->red || cuda_fused(p))
		return 0;
	return kir_kernel_terms(k) >= BLOCKRED_MIN_TERMS && kir_kernel_points(k) <= BLOCKRED_MAX_POINTS;
}

// A contraction inside a persistent loop kernel, as tiles (cuda_loop_tile).
// The two forms above read the deepspeech LSTM's per-step products badly:
// h @ W_hh^T ([10,1024] x [1024,4096], 40,960 points) ran a thread per
// point, 1024 dependent terms each on 160 blocks, every row of h reading
// all of W again; its reverse dz @ W_hh ([10,4096] x [4096,1024], 10,240
// points) a block per point whose 256 threads stride the reduction, where
// W_hh's K index has a stride of 1024 elements: each warp-wide load
// touched 32 sectors (1.3 GB of L2 traffic per step for a 16 MB matrix).
// A tile is 32 consecutive points along the last parallel variable (the
// lanes: a load whose index moves by 0 or 1 with that variable is one
// broadcast or one 128-byte line per warp) times TILE_ROWS_MAX at most
// rows of the other parallel variables (each thread keeps one
// accumulator per row, so a term that does not depend on the row, W's
// element, is loaded once for all of them: nvcc merges the equal loads);
// the block's 8 warps split the reduction (warp w takes terms w, w + 8,
// ...), then sum their partials through shared memory in warp order, and
// warp r applies row r's post and stores it.  So W is read once per row
// group from L2, coalesced, and every block of the grid has tiles.
// Summation order: each warp's strided terms in order, then the 8 warp
// partials in order: fixed, so the same every run, within f32 rounding of
// the CPU's.  Conditions: a sum, a contraction, in a loop of a task that
// is not fused, at least TILE_MIN_TERMS terms, a last parallel extent of
// at least 32, and every load of the terms affine in the last parallel
// variable with a coefficient of 0 or 1.
#define TILE_ROWS_MAX 8
#define TILE_MIN_TERMS 256

// Every load under e has an index affine in variable v with coefficient 0
// or 1.
static int
loads_along(const KProgram *p, KxId e, int v, uint8_t *seen) {
	if (!e || seen[e])
		return 1;
	seen[e] = 1;
	const Kx *x = &p->x[e];
	if (x->op == KX_LOAD) {
		int64_t co;
		if (!kx_affine_coef(p, x->a[0], v, &co) || (co != 0 && co != 1))
			return 0;
	}
	for (int i = 0; i < x->nin; i++)
		if (!loads_along(p, x->a[i], v, seen))
			return 0;
	return 1;
}

// Few tiles over a long reduction (deepspeech's reverse dz @ W_hh: 64
// tiles of 4096 terms, 64 busy blocks of the ~132 that take part) split
// the terms into kc chunks: work unit u is chunk u / ntiles of tile u %
// ntiles, its row sums go to a module scratch array (fadc_tile_part,
// [kc][points]), then a grid barrier, then a thread per point adds its kc
// partials in chunk order, applies the post and stores.  Taken when at
// most TILE_SPLIT_UNITS / 2 tiles and at least 2 chunks of
// TILE_SPLIT_MIN_TERMS terms.
#define TILE_SPLIT_UNITS 128
#define TILE_SPLIT_MIN_TERMS 512

typedef struct Tile {
	int64_t rows, cols; // the points as rows x cols (cols: the last parallel extent)
	int64_t r; // rows per tile (accumulators per thread)
	int64_t ctiles, ntiles; // tiles along cols, tiles in all
	int64_t kc, kterms; // chunks of the terms (1: no split), terms per chunk
	int64_t units; // ntiles * kc: the blocks it can use
} Tile;

// Whether kernel k, inside a loop of a persistent kernel (not a fused
// task), runs as tiles; their geometry into *t.
static int
cuda_loop_tile(const KProgram *p, const KKernel *k, Tile *t) {
	if (k->red != KR_SUM || !k->contraction || k->host || k->rank < 1 || cuda_fused(p))
		return 0;
	int64_t npt = kir_kernel_points(k), nr = kir_kernel_terms(k);
	int64_t cols = k->dim[k->rank - 1];
	if (nr < TILE_MIN_TERMS || cols < 32 || getenv("FADC_CUDA_NO_TILE"))
		return 0;
	uint8_t *seen = calloc(p->nx + 1, 1);
	FADC_ASSERT(seen, "cuda: out of memory");
	int ok = loads_along(p, k->body, k->rank - 1, seen);
	free(seen);
	if (!ok)
		return 0;
	t->cols = cols;
	t->rows = npt / cols;
	// Row groups of equal size, at most TILE_ROWS_MAX rows each (10 rows:
	// two groups of 5, not 8 and 2).
	int64_t groups = (t->rows + TILE_ROWS_MAX - 1) / TILE_ROWS_MAX;
	t->r = (t->rows + groups - 1) / groups;
	t->ctiles = (cols + 31) / 32;
	t->ntiles = (t->rows + t->r - 1) / t->r * t->ctiles;
	t->kc = 1;
	if (t->ntiles * 2 <= TILE_SPLIT_UNITS && nr >= 2 * TILE_SPLIT_MIN_TERMS &&
	    !getenv("FADC_CUDA_NO_SPLIT")) {
		t->kc = TILE_SPLIT_UNITS / t->ntiles;
		if (t->kc > nr / TILE_SPLIT_MIN_TERMS)
			t->kc = nr / TILE_SPLIT_MIN_TERMS;
	}
	t->kterms = (nr + t->kc - 1) / t->kc;
	t->units = t->ntiles * t->kc;
	return 1;
}

static void
cuda_kernel_name(FILE *f, const char *task, uint32_t ki, const char *what) {
	fputs("fadc_", f);
	for (const char *s = task; *s; s++)
		fputc((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
		              (*s >= '0' && *s <= '9')
		          ? *s
		          : '_',
		      f);
	fprintf(f, "_k%u_", ki);
	for (const char *s = what ? what : "kernel"; *s; s++)
		fputc((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
		              (*s >= '0' && *s <= '9')
		          ? *s
		          : '_',
		      f);
}

// The launch contract of kernel ki: what cg_cuda_kernel reports and what
// print_kernel prints as parameters, from one walk (so they cannot differ).
static void
cuda_kernel_uses(const KProgram *p, const KKernel *k, Uses *u) {
	u->seen = calloc(p->nx + 1, 1);
	u->buf = calloc(p->nbuf + 1, 1);
	u->step = calloc(p->nloop + 1, 1);
	FADC_ASSERT(u->seen && u->buf && u->step, "cuda: out of memory");
	mark(p, k->index, u);
	mark(p, k->body, u);
	mark(p, k->post, u);
}

// Small tasks run as one kernel of one thread block (ARCHITECTURE.md, code
// generation): a replay costs ~0.7 us per kernel node, far more than the
// arithmetic of a ppl model.  Each kernel of the program becomes a
// __device__ function whose grid-stride loop, with one block, is a
// block-stride loop; the fused __global__ calls them in order with
// __syncthreads() between, which orders each kernel's global writes before
// the next one's reads within the block.  "Small" is the work: output
// points times reduction terms, summed over the kernels, at most
// FUSE_WORK_LIMIT (about a thousand terms per thread of 256).
#define FUSE_WORK_LIMIT ((int64_t)1 << 18)
#define FUSED_THREADS 256
// A fused task whose arena fits in static shared memory keeps its
// temporaries there (a dependent load costs ~30 cycles instead of an L2
// round trip of ~200): they are not arguments then, but pointers into one
// __shared__ array at the memory plan's offsets (64-byte aligned).
#define FUSED_SMEM_LIMIT (48 * 1024)

static int
cuda_fused_smem(const KProgram *p) {
	return p->arena_bytes <= FUSED_SMEM_LIMIT;
}

// The work of kernel ki: its points times its reduction terms, times the
// trips of the loops around it.
static int64_t
kernel_work(const KProgram *p, uint32_t ki) {
	const KKernel *k = &p->k[ki];
	int64_t w = kir_kernel_points(k) * kir_kernel_terms(k);
	for (uint32_t l = 0; l < p->nloop; l++)
		if (p->loop[l].begin <= ki && ki < p->loop[l].end)
			w *= p->loop[l].trip > 1 ? p->loop[l].trip : 1;
	return w;
}

// A task with a host kernel is never fused: the host step splits it.
static int
cuda_fused(const KProgram *p) {
	if (p->nk < 2)
		return 0;
	int64_t work = 0;
	for (uint32_t i = 0; i < p->nk; i++) {
		if (p->k[i].host)
			return 0;
		work += kernel_work(p, i);
		if (work > FUSE_WORK_LIMIT)
			return 0;
	}
	return 1;
}

// ---------------------------------------------------------------- fused phases
//
// Inside the fused kernel a barrier (__syncthreads) is needed between two
// kernels only where a thread may touch a byte that another thread touched
// in an earlier kernel, at least one of the two touches being a write: a
// read of another thread's result (RAW), a write over bytes another thread
// still reads (WAR: the memory plan reuses arena bytes once a buffer is
// dead) or over bytes another thread wrote (WAW).  Within one thread,
// program order already orders its accesses (the pointers are not
// __restrict__ in a fused task, so the compiler keeps that order too).  So
// the kernels are grouped, in order and greedily, into phases: kernel j
// joins the current phase when, for every kernel i already in it, each
// byte both touch (one of them writing) is touched by one and the same
// thread; a barrier starts the next phase otherwise.  The rule, per pair,
// is conservative:
// - Bytes are those of buffers: two buffers share bytes when they are one
//   buffer, or both temporaries whose arena ranges overlap.  Task inputs
//   and outputs are disjoint from each other and from the arena (the
//   runtime refuses overlapping outputs and inputs), and inputs are never
//   written.
// - The same thread touches them only when (a) the two buffers are one, or
//   temporaries at the same offset with the same element size (element e
//   of one is element e of the other), (b) the writer stores element e at
//   its own point e (its store index is its flattened point index) and
//   every read of the buffer is at the reader's own point index
//   (kx_flat_point below; a reduction reading across its terms is not),
//   and (c) point e of both kernels runs on the same thread: the mapping of
//   each kernel's form (cuda_fused_mode) agrees for every point both have.
// - A loop's start and end are barriers (and the end of its body, every
//   trip): the analysis is of straight-line runs of kernels only.
// Kernels that share no bytes at all (independent kernels) always share a
// phase.  A wrong elision would be a race; tests/gpu/gpu_check.c checks
// every task's values on a GPU, and tests/unit/test_codegen_cuda.c checks
// the phase counts of hand-checked programs.

// How a kernel of the fused task maps its points to the block's threads.
typedef enum FMode {
	FM_THREAD, // point t on thread t % 256 (a reduction: sequential in it)
	FM_WARP,   // point t on warp t % 8, lane 0 storing (a warp's shuffle)
	FM_BLOCK,  // every point on the whole block, thread 0 storing
} FMode;

static FMode cuda_fused_mode(const KProgram *p, const KKernel *k);

// The thread that evaluates a point's stored value (and its post region).
static int64_t
fmode_owner(FMode m, int64_t t) {
	return m == FM_THREAD ? t % FUSED_THREADS : m == FM_WARP ? 32 * (t % (FUSED_THREADS / 32)) : 0;
}

// e as c0 + sum coef[v] var v, for an integer expression of loop
// variables, constants, sums and products by constants (0: not of that
// form: a load, a division, a step counter, ...).
static int
lin_vars(const KProgram *p, KxId e, int64_t m, int64_t *coef, int64_t *c0) {
	const Kx *x = &p->x[e];
	switch ((KxOp)x->op) {
	case KX_CONST:
		*c0 += m * x->i;
		return x->dtype == DT_I64;
	case KX_VAR:
		if (x->aux >= 2 * IR_MAXDIM)
			return 0;
		coef[x->aux] += m;
		return 1;
	case KX_IADD:
		return lin_vars(p, x->a[0], m, coef, c0) && lin_vars(p, x->a[1], m, coef, c0);
	case KX_IMUL:
		return p->x[x->a[1]].op == KX_CONST && lin_vars(p, x->a[0], m * p->x[x->a[1]].i, coef, c0);
	default:
		return 0;
	}
}

// Is index e kernel k's own flattened (row-major) point index?
static int
kx_flat_point(const KProgram *p, const KKernel *k, KxId e) {
	int64_t coef[2 * IR_MAXDIM] = {0}, c0 = 0, stride = 1;
	if (!e || !lin_vars(p, e, 1, coef, &c0) || c0)
		return 0;
	for (int v = 2 * IR_MAXDIM; v-- > 0;) {
		if (v >= k->rank) {
			if (coef[v])
				return 0;
			continue;
		}
		if (k->dim[v] > 1 && coef[v] != stride)
			return 0;
		stride *= k->dim[v];
	}
	return 1;
}

// What a kernel reads, per buffer: RD_OWN when every read is by the
// thread owning the point, at the point's own index; RD_ANY otherwise.
enum { RD_NONE, RD_OWN, RD_ANY };

static void
reads_of(const KProgram *p, const KKernel *k, KxId id, int own, uint8_t *seen, uint8_t *rd) {
	if (!id || seen[id] & (own ? 1 : 2))
		return;
	seen[id] |= own ? 1 : 2;
	const Kx *x = &p->x[id];
	if (x->op == KX_LOAD) {
		int r = own && kx_flat_point(p, k, x->a[0]) ? RD_OWN : RD_ANY;
		if (r > rd[x->aux])
			rd[x->aux] = (uint8_t)r;
	}
	for (int i = 0; i < x->nin; i++)
		reads_of(p, k, x->a[i], own, seen, rd);
}

// rd[b] for kernel k (nbuf entries, zeroed by the caller).  A reduction's
// terms (body) are read by every thread of a warp or of the block in those
// forms; its post region and store index by the owner alone.
static void
kernel_reads(const KProgram *p, const KKernel *k, uint8_t *seen, uint8_t *rd) {
	memset(seen, 0, p->nx + 1);
	FMode m = cuda_fused_mode(p, k);
	reads_of(p, k, k->body, m == FM_THREAD || !k->red, seen, rd);
	reads_of(p, k, k->post, 1, seen, rd);
	reads_of(p, k, k->index, 1, seen, rd);
}

// A fused task whose temporaries all fit in shared memory side by side
// (their sizes summed, naive_bytes, at most FUSED_SMEM_LIMIT) gives each
// its own bytes there (print_group) instead of the memory plan's offsets:
// the plan's reuse saves nothing that matters at that size, and every
// reuse is a write-after-read hazard (a barrier, and kernels that cannot
// rotate apart).  Only fused tasks are analysed here.
static int
cuda_tmp_private(const KProgram *p) {
	return p->naive_bytes <= FUSED_SMEM_LIMIT;
}

static int
buf_overlap(const KProgram *p, uint32_t a, uint32_t b) {
	const KBuf *x = &p->buf[a], *y = &p->buf[b];
	if (a == b)
		return 1;
	if (x->kind != KB_TMP || y->kind != KB_TMP || !x->bytes || !y->bytes || cuda_tmp_private(p))
		return 0;
	return x->offset < y->offset + y->bytes && y->offset < x->offset + x->bytes;
}

// Element e of a is element e of b (one buffer, or the same placement).
static int
buf_same_place(const KProgram *p, uint32_t a, uint32_t b) {
	const KBuf *x = &p->buf[a], *y = &p->buf[b];
	return a == b || (x->kind == KB_TMP && y->kind == KB_TMP && !cuda_tmp_private(p) &&
	                  x->offset == y->offset &&
	                  kir_dtype_size(x->dtype) == kir_dtype_size(y->dtype));
}

// Do kernels i and j run every point both have on the same thread?
static int
owners_agree(const KProgram *p, uint32_t i, uint32_t j) {
	FMode mi = cuda_fused_mode(p, &p->k[i]), mj = cuda_fused_mode(p, &p->k[j]);
	int64_t ni = kir_kernel_points(&p->k[i]), nj = kir_kernel_points(&p->k[j]);
	int64_t n = ni < nj ? ni : nj;
	for (int64_t t = 0; t < n && t < FUSED_THREADS; t++) // both periodic in 256
		if (fmode_owner(mi, t) != fmode_owner(mj, t))
			return 0;
	return 1;
}

// May kernel j run after kernel i (earlier) without a barrier between?
// rdi, rdj: their reads (kernel_reads).
static int
no_hazard(const KProgram *p, uint32_t i, uint32_t j, const uint8_t *rdi, const uint8_t *rdj) {
	const KKernel *ki = &p->k[i], *kj = &p->k[j];
	int own = -1; // owners_agree, computed once when needed
	int wi = kx_flat_point(p, ki, ki->index), wj = kx_flat_point(p, kj, kj->index);
	for (uint32_t b = 0; b < p->nbuf; b++) {
		// RAW: j reads what i wrote; WAR: j writes what i read.
		int raw = rdj[b] && buf_overlap(p, ki->out, b);
		int war = rdi[b] && buf_overlap(p, kj->out, b);
		if (!raw && !war)
			continue;
		if (raw && !(rdj[b] == RD_OWN && wi && buf_same_place(p, ki->out, b)))
			return 0;
		if (war && !(rdi[b] == RD_OWN && wj && buf_same_place(p, kj->out, b)))
			return 0;
		if (own < 0)
			own = owners_agree(p, i, j);
		if (!own)
			return 0;
	}
	// WAW: both write the same bytes.
	if (buf_overlap(p, ki->out, kj->out)) {
		if (!(wi && wj && buf_same_place(p, ki->out, kj->out)))
			return 0;
		if (own < 0)
			own = owners_agree(p, i, j);
		if (!own)
			return 0;
	}
	return 1;
}

// bar[ki] for the kernels of a fused task: 1 when a barrier follows kernel
// ki (never after the task's last kernel unless a loop ends there: the
// next trip).  Returns the phases: the runs of kernels between barriers,
// counted in the program text (a loop's body once).
static uint32_t
cuda_fused_barriers(const KProgram *p, uint8_t *bar) {
	uint8_t *seen = calloc(p->nx + 1, 1);
	uint8_t *rd = calloc((size_t)(p->nk + 1) * (p->nbuf + 1), 1);
	FADC_ASSERT(seen && rd, "cuda: out of memory");
	for (uint32_t ki = 0; ki < p->nk; ki++)
		kernel_reads(p, &p->k[ki], seen, rd + (size_t)ki * (p->nbuf + 1));
	uint32_t phases = p->nk ? 1 : 0, begin = 0;
	for (uint32_t j = 0; j < p->nk; j++) {
		bar[j] = 0;
		// A loop starting or ending between j - 1 and j (non-empty loops).
		int edge = 0;
		for (uint32_t l = 0; l < p->nloop; l++)
			if (p->loop[l].end > p->loop[l].begin &&
			    ((j > 0 && p->loop[l].begin == j) || p->loop[l].end == j))
				edge = 1;
		int need = edge;
		for (uint32_t i = begin; i < j && !need; i++)
			need = !no_hazard(p, i, j, rd + (size_t)i * (p->nbuf + 1),
			                  rd + (size_t)j * (p->nbuf + 1));
		if (j > 0 && need) {
			bar[j - 1] = 1;
			phases++;
			begin = j;
		}
	}
	// The end of a loop's body: a barrier every trip (the next trip's
	// kernels read the carries), also after the task's last kernel.
	for (uint32_t l = 0; l < p->nloop; l++)
		if (p->loop[l].end > p->loop[l].begin)
			bar[p->loop[l].end - 1] = 1;
	free(seen);
	free(rd);
	return phases;
}

uint32_t
cg_cuda_phases(const KProgram *p) {
	if (!cuda_fused(p))
		return 0;
	uint8_t *bar = calloc(p->nk + 1, 1);
	FADC_ASSERT(bar, "cuda: out of memory");
	uint32_t n = cuda_fused_barriers(p, bar);
	free(bar);
	return n;
}

// The form of a kernel of a fused task.  Elementwise kernels, and
// reductions of one term, are FM_THREAD.  A reduction takes the form with
// the fewest dependent steps per thread, counting a term c (its cost,
// term_cost: 1 for a load and an add, more for a logarithm, lgamma,
// digamma), a shuffle step SHFL_COST and a barrier BAR_COST:
//   FM_THREAD  ceil(points / 256) * terms * c
//   FM_WARP    ceil(points / 8) * (ceil(terms / 32) * c + 5 SHFL_COST)
//   FM_BLOCK   points * (ceil(terms / 256) * c + 10 SHFL_COST + BAR_COST)
// FM_THREAD on ties (its points stay on the threads that pointwise
// kernels use, so it shares their phases), then FM_WARP.  So a handful of
// points of more than ~20 plain terms is a warp's shuffle each (no
// barrier), of more than ~1000 terms the whole block's (one barrier per
// point); a sum of 10 logarithms (ppl_robust_reg's likelihood) is a
// warp's: its terms in parallel, then 5 shuffles, rather than 10 dependent
// logarithms in one thread.
#define SHFL_COST 4
#define BAR_COST 8

// A reduction term's cost in the units of cuda_fused_mode: a plain term (a load
// and an add, 5 quarter steps of kx_cost, codegen/kir.c) is 1.
static int64_t
term_cost(const KProgram *p, const KKernel *k) {
	int64_t c = (kx_cost(p, k->body) + 1) / 4;
	return c > 1 ? c : 1;
}

static FMode
cuda_fused_mode(const KProgram *p, const KKernel *k) {
	if (!k->red || k->host)
		return FM_THREAD;
	int64_t npt = kir_kernel_points(k), nr = kir_kernel_terms(k);
	if (nr <= 1 || npt == 0)
		return FM_THREAD;
	int64_t c = term_cost(p, k), nw = FUSED_THREADS / 32;
	int64_t th = (npt + FUSED_THREADS - 1) / FUSED_THREADS * nr * c;
	int64_t wa = (npt + nw - 1) / nw * ((nr + 31) / 32 * c + 5 * SHFL_COST);
	int64_t bl = npt * ((nr + FUSED_THREADS - 1) / FUSED_THREADS * c + 10 * SHFL_COST + BAR_COST);
	if (th <= wa && th <= bl)
		return FM_THREAD;
	return wa <= bl ? FM_WARP : FM_BLOCK;
}

int
cg_cuda_fused_form(const KProgram *p, uint32_t ki) {
	return cuda_fused(p) ? (int)cuda_fused_mode(p, &p->k[ki]) : -1;
}

// ---------------------------------------------------------------- warp rotation
//
// Point t of a kernel runs on thread t % 256 (a warp's reduction: warp
// t % 8), so every scalar kernel of a phase ran on thread 0, one after the
// other, while seven warps waited at the next barrier: ppl_robust_reg's
// phases are mostly independent scalar chains (a sum of logarithms, an
// lgamma, a digamma).  A kernel may instead run rotated by r warps (point
// t on thread (t + 32 r) % 256, or warp (t + r) % 8), as long as every
// kernel whose bytes it shares within its phase (the pairs whose lack of
// a barrier cuda_fused_barriers proved through owners_agree) rotates with it:
// a common rotation maps equal owners to equal owners, so the phases stay
// right.  So within each phase the kernels are grouped (union of the
// pairs that touch a common byte, one writing), and each group takes the
// rotation that least raises the busiest warp's work (work: points times
// their cost, term_cost), the costliest groups first.  A block reduction
// (FM_BLOCK) uses every warp: its group stays at 0.

static int64_t
point_cost(const KProgram *p, const KKernel *k, FMode m) {
	int64_t nr = kir_kernel_terms(k);
	int64_t c = k->red ? term_cost(p, k) : (kx_cost(p, k->body) + 3) / 4;
	c = c > 1 ? c : 1;
	if (m == FM_WARP)
		return (nr + 31) / 32 * c + 5 * SHFL_COST;
	return nr * c;
}

// Does kernel j share a byte with kernel i that one of them writes?
static int
kernels_touch(const KProgram *p, uint32_t i, uint32_t j, const uint8_t *rdi, const uint8_t *rdj) {
	const KKernel *ki = &p->k[i], *kj = &p->k[j];
	if (buf_overlap(p, ki->out, kj->out))
		return 1;
	for (uint32_t b = 0; b < p->nbuf; b++)
		if ((rdj[b] && buf_overlap(p, ki->out, b)) || (rdi[b] && buf_overlap(p, kj->out, b)))
			return 1;
	return 0;
}

static uint32_t
uf_find(uint32_t *up, uint32_t i) {
	while (up[i] != i)
		i = up[i] = up[up[i]];
	return i;
}

// rot[ki] (0..7) for the kernels of a fused task whose barriers are bar
// (cuda_fused_barriers).  FADC_CUDA_NO_ROTATE=1 leaves every kernel at 0
// (measurements of the gain).
static void
cuda_fused_rotations(const KProgram *p, const uint8_t *bar, uint8_t *rot) {
	memset(rot, 0, p->nk);
	const char *off = getenv("FADC_CUDA_NO_ROTATE");
	if (off && *off && strcmp(off, "0"))
		return;
	enum { NW = FUSED_THREADS / 32 };
	uint8_t *seen = calloc(p->nx + 1, 1);
	uint8_t *rd = calloc((size_t)(p->nk + 1) * (p->nbuf + 1), 1);
	uint32_t *up = calloc(p->nk + 1, sizeof *up);
	int64_t *gw = calloc((size_t)(p->nk + 1) * NW, sizeof *gw);
	uint8_t *pinned = calloc(p->nk + 1, 1); // per group root: 1 pinned at 0, 2 placed
	FADC_ASSERT(seen && rd && up && gw && pinned, "cuda: out of memory");
	for (uint32_t ki = 0; ki < p->nk; ki++)
		kernel_reads(p, &p->k[ki], seen, rd + (size_t)ki * (p->nbuf + 1));
	for (uint32_t b = 0; b < p->nk;) {
		uint32_t e = b;
		while (e < p->nk && !(e > b && bar[e - 1]))
			e++;
		// Kernels b .. e-1 form a phase: group them.
		for (uint32_t i = b; i < e; i++)
			up[i] = i;
		for (uint32_t j = b; j < e; j++)
			for (uint32_t i = b; i < j; i++)
				if (kernels_touch(p, i, j, rd + (size_t)i * (p->nbuf + 1),
				                  rd + (size_t)j * (p->nbuf + 1)))
					up[uf_find(up, j)] = uf_find(up, i);
		// Each group's work per warp at rotation 0 (at its root's row);
		// a block reduction pins its group.
		int64_t load[NW] = {0};
		for (uint32_t i = b; i < e; i++)
			pinned[i] = 0;
		for (uint32_t i = b; i < e; i++)
			memset(gw + (size_t)i * NW, 0, NW * sizeof *gw);
		for (uint32_t i = b; i < e; i++) {
			const KKernel *k = &p->k[i];
			uint32_t g = uf_find(up, i);
			FMode m = cuda_fused_mode(p, k);
			int64_t npt = kir_kernel_points(k), pc = point_cost(p, k, m), *w = gw + (size_t)g * NW;
			if (m == FM_BLOCK) {
				pinned[g] = 1;
				for (int x = 0; x < NW; x++)
					w[x] += npt * pc / NW + 1;
				continue;
			}
			for (int x = 0; x < NW; x++) {
				// points t < npt on warp x: FM_THREAD (t % 256) / 32 == x,
				// FM_WARP t % 8 == x.
				int64_t n;
				if (m == FM_WARP)
					n = npt / NW + (npt % NW > x);
				else {
					int64_t full = npt / FUSED_THREADS, rest = npt % FUSED_THREADS;
					int64_t in = rest - 32 * x;
					n = full * 32 + (in <= 0 ? 0 : in > 32 ? 32 : in);
				}
				w[x] += n * pc;
			}
		}
		// Pinned groups first, then the others by their busiest warp,
		// costliest first (ties: the earlier kernel).
		for (;;) {
			int64_t best = -1;
			uint32_t bg = 0;
			for (uint32_t i = b; i < e; i++) {
				if (uf_find(up, i) != i || pinned[i] == 2)
					continue;
				int64_t mx = 0;
				for (int x = 0; x < NW; x++)
					mx = gw[(size_t)i * NW + x] > mx ? gw[(size_t)i * NW + x] : mx;
				mx += pinned[i] ? (int64_t)1 << 60 : 0;
				if (mx > best)
					best = mx, bg = i;
			}
			if (best < 0)
				break;
			const int64_t *w = gw + (size_t)bg * NW;
			// The rotation giving the least busiest warp overall, then the
			// least busy warps of the group's own (spread, not stacked: a
			// lighter group beside the busiest warp's would fit under its
			// work on any warp, but shares the warp's issue slots).
			int br = 0;
			int64_t bmax = -1, bown = -1;
			for (int r = 0; r < (pinned[bg] ? 1 : NW); r++) {
				int64_t mx = 0, own = 0;
				for (int x = 0; x < NW; x++) {
					int64_t l = load[(x + r) % NW] + w[x];
					mx = l > mx ? l : mx;
					if (w[x] && l > own)
						own = l;
				}
				if (bmax < 0 || mx < bmax || (mx == bmax && own < bown))
					bmax = mx, bown = own, br = r;
			}
			for (int x = 0; x < NW; x++)
				load[(x + br) % NW] += w[x];
			for (uint32_t i = b; i < e; i++)
				if (uf_find(up, i) == bg)
					rot[i] = (uint8_t)br;
			pinned[bg] = 2;
		}
		b = e;
	}
	free(seen);
	free(rd);
	free(up);
	free(gw);
	free(pinned);
}

// ---------------------------------------------------------------- launches
//
// A task's launches, in the order they run on the stream:
//   LA_FUSED   the whole task, one block (small tasks; loops included);
//   LA_KERNEL  kernel ki, outside every loop, its own __global__;
//   LA_LOOP    an outermost loop (a scan) of a task too large to fuse: one
//              persistent kernel running the loop's trips over its body's
//              kernels, a grid-wide barrier after each (see grid_src);
//   LA_HOST    host kernel ki: no CUDA code, the runtime's host step
//              (linear_sum_assignment: copy down, solve, copy up);
//   LA_GEMM    contraction kernel ki, outside every loop, as one cuBLAS
//              strided batched GEMM (kir_gemm_plan; no CUDA code printed);
//   LA_CHOICE  the two launches after it (LA_KERNEL ki, then LA_GEMM ki)
//              are candidates for contraction kernel ki: the runtime times
//              both on the GPU and runs the faster (a GEMM in the band
//              where only a measurement can tell, cuda_gemm_launch).
typedef enum LaKind { LA_FUSED, LA_KERNEL, LA_LOOP, LA_HOST, LA_GEMM, LA_CHOICE } LaKind;
typedef struct La {
	LaKind kind;
	uint32_t begin, end; // its kernels
	int loop; // LA_LOOP: the loop
} La;

// The outermost non-empty loop that begins at kernel i, or -1.
static int
outer_loop_at(const KProgram *p, uint32_t i) {
	for (uint32_t l = 0; l < p->nloop; l++)
		if (p->loop[l].parent < 0 && p->loop[l].begin == i && p->loop[l].end > i)
			return (int)l;
	return -1;
}

// Large GEMMs go to cuBLAS.  A printed contraction is one thread per
// output point with a loop over K (or one block per point): far from
// cuBLAS's tiled tensor-core kernels once M N K is large (a 512 x 512 x
// 512 product: ~1 ms against ~20 us).  For small products a cuBLAS call
// (~5 us of launch and setup, one more graph node) gains nothing over the
// printed kernel.  Between the two only the GPU can tell (the shape
// matters as much as the work: a skinny product leaves cuBLAS's tiles
// mostly empty), so a contraction of CG_CUDA_GEMM_MIN_WORK (2^16) to
// CG_CUDA_GEMM_ONLY_WORK (2^22) multiply-adds is both: a printed kernel
// and a GEMM record behind a choice record, timed at the task's first run.
// A kernel inside a loop stays in its persistent kernel.  Returns 0 (no
// GEMM), GEMM_ONLY or GEMM_CHOICE, and the plan into g.
enum { GEMM_NONE, GEMM_ONLY, GEMM_CHOICE };
static int
cuda_gemm_launch(const KProgram *p, uint32_t ki, KGemmPlan *g) {
	// The plan's analysis only for large contractions (the launch plan is
	// asked for once per launch record).
	int64_t work = kernel_work(p, ki);
	if (!p->k[ki].contraction || work < CG_CUDA_GEMM_MIN_WORK)
		return GEMM_NONE;
	for (uint32_t l = 0; l < p->nloop; l++)
		if (p->loop[l].begin <= ki && ki < p->loop[l].end)
			return GEMM_NONE;
	KGemmPlan tmp;
	if (!g)
		g = &tmp;
	if (!kir_gemm_plan(p, &p->k[ki], g) ||
	    g->batch * g->M * g->N < (CG_CUDA_GEMM_MIN_WORK + g->K - 1) / g->K)
		return GEMM_NONE;
	return work < CG_CUDA_GEMM_ONLY_WORK ? GEMM_CHOICE : GEMM_ONLY;
}

// The launches of p into la (NULL: only counted).
static uint32_t
cuda_launch_plan(const KProgram *p, La *la) {
	if (cuda_fused(p)) {
		if (la)
			la[0] = (La){LA_FUSED, 0, p->nk, -1};
		return 1;
	}
	uint32_t n = 0;
	for (uint32_t i = 0; i < p->nk;) {
		int l = outer_loop_at(p, i);
		int gm = l < 0 && !p->k[i].host ? cuda_gemm_launch(p, i, NULL) : 0;
		La a = l >= 0 ? (La){LA_LOOP, i, p->loop[l].end, l}
		              : (La){p->k[i].host         ? LA_HOST
		                     : gm == GEMM_ONLY   ? LA_GEMM
		                     : gm == GEMM_CHOICE ? LA_CHOICE
		                                         : LA_KERNEL,
		                     i, i + 1, -1};
		if (la)
			la[n] = a;
		n++;
		if (a.kind == LA_CHOICE) { // the candidates: the printed kernel, then the GEMM
			if (la) {
				la[n] = (La){LA_KERNEL, i, i + 1, -1};
				la[n + 1] = (La){LA_GEMM, i, i + 1, -1};
			}
			n += 2;
		}
		i = a.end;
	}
	return n;
}

// Room for cuda_launch_plan's launches: at most three per kernel (a choice).
#define LA_MAX(p) (3 * (size_t)(p)->nk + 1)

static La
launch_at(const KProgram *p, uint32_t li) {
	La *la = calloc(LA_MAX(p), sizeof *la);
	FADC_ASSERT(la, "cuda: out of memory");
	uint32_t n = cuda_launch_plan(p, la);
	FADC_ASSERT(li < n, "cuda: a launch index past the task's launches");
	La a = la[li];
	free(la);
	return a;
}

// A persistent kernel's blocks: as many as its widest kernel can use, at
// most PERSIST_MAX_BLOCKS.  Its grid-wide barrier needs every block
// resident at once, so the kernel keeps only the first min(grid, %nsmid)
// blocks (the rest return at once) and is compiled with
// __launch_bounds__(256, 2), which leaves room for two blocks per SM:
// %nsmid (the SM identifiers' bound) is at least the SM count and, on
// every part so far, less than twice it.
#define PERSIST_MAX_BLOCKS 256

static uint32_t
persist_grid(const KProgram *p, uint32_t begin, uint32_t end) {
	int64_t g = 1;
	for (uint32_t ki = begin; ki < end; ki++) {
		const KKernel *k = &p->k[ki];
		int64_t npt = kir_kernel_points(k);
		Tile t;
		int64_t b = cuda_loop_tile(p, k, &t) ? t.units
		            : cuda_blockred(p, k)    ? npt
		                                     : (npt + FUSED_THREADS - 1) / FUSED_THREADS;
		if (b > g)
			g = b;
	}
	return (uint32_t)(g < PERSIST_MAX_BLOCKS ? g : PERSIST_MAX_BLOCKS);
}

uint32_t
cg_cuda_launches(const KProgram *p) {
	return cuda_launch_plan(p, NULL);
}

static int cuda_kernel_contract(const KProgram *p, uint32_t ki, CgCudaKernel *out);

// The contract of a group of kernels [begin, end) run by one __global__
// (LA_FUSED, LA_LOOP): every buffer any of them touches, in buffer order
// (a fused task's temporaries in shared memory are not arguments).
static int
cuda_group_contract(const KProgram *p, const La *a, CgCudaKernel *out) {
	memset(out, 0, sizeof *out);
	uint8_t *use = calloc(p->nbuf + 1, 1);
	out->buf = calloc(p->nbuf + 1, sizeof *out->buf);
	char *name = NULL;
	size_t nlen = 0;
	FILE *f = open_memstream(&name, &nlen);
	if (!use || !out->buf || !f) {
		if (f)
			fclose(f);
		free(name);
		free(use);
		free(out->buf);
		out->buf = NULL;
		return 0;
	}
	// A fused kernel's name carries its phases (cuda_fused_barriers), which
	// `fadc inspect` reads back from the descriptor: fadc_<task>_k0_fused_<N>phases.
	char what[64] = "loop";
	if (a->kind == LA_FUSED)
		snprintf(what, sizeof what, "fused_%uphases", cg_cuda_phases(p));
	cuda_kernel_name(f, p->name ? p->name : "", a->begin, what);
	fclose(f);
	out->name = name;
	out->grid = a->kind == LA_FUSED ? 1 : persist_grid(p, a->begin, a->end);
	out->points = (int64_t)out->grid * FUSED_THREADS;
	for (uint32_t ki = a->begin; ki < a->end; ki++) {
		CgCudaKernel k;
		if (!cuda_kernel_contract(p, ki, &k)) {
			free(use);
			free(out->buf);
			free(out->name);
			return 0;
		}
		for (uint32_t j = 0; j < k.narg; j++)
			use[k.buf[j]] = 1;
		out->runseed |= k.runseed;
		free(k.name);
		free(k.buf);
	}
	int smem = a->kind == LA_FUSED && cuda_fused_smem(p);
	for (uint32_t b = 0; b < p->nbuf; b++)
		if (use[b] && !(smem && p->buf[b].kind == KB_TMP))
			out->buf[out->narg++] = b;
	free(use);
	return 1;
}

// A cuBLAS GEMM: C = A B in the plan's row-major terms (the runtime maps
// them onto cuBLAS's column-major call), its buffers {C, A, B}; points
// are C's elements, the name the cuBLAS routine (for inspect and errors).
static int
gemm_contract(const KProgram *p, uint32_t ki, CgCudaKernel *out) {
	memset(out, 0, sizeof *out);
	FADC_ASSERT(cuda_gemm_launch(p, ki, &out->g) != GEMM_NONE,
	            "cuda: a GEMM launch without a GEMM plan");
	out->gemm = 1;
	out->name = strdup(out->g.dt == DT_F64 ? "cublasDgemmStridedBatched"
	                                       : "cublasSgemmStridedBatched");
	out->buf = calloc(4, sizeof *out->buf);
	if (!out->name || !out->buf) {
		free(out->name);
		free(out->buf);
		out->buf = NULL;
		return 0;
	}
	out->points = out->g.batch * out->g.M * out->g.N;
	out->buf[out->narg++] = out->g.cbuf;
	out->buf[out->narg++] = out->g.abuf;
	out->buf[out->narg++] = out->g.bbuf;
	return 1;
}


// A zeroed contract named `name` with room for nbuf arguments; 0 (nothing
// held) when out of memory.
static int
contract_new(CgCudaKernel *out, const char *name, size_t nbuf) {
	memset(out, 0, sizeof *out);
	out->name = strdup(name);
	out->buf = calloc(nbuf, sizeof *out->buf);
	if (out->name && out->buf)
		return 1;
	free(out->name);
	free(out->buf);
	out->name = NULL;
	out->buf = NULL;
	return 0;
}
int
cg_cuda_kernel(const KProgram *p, uint32_t li, CgCudaKernel *out) {
	La a = launch_at(p, li);
	if (a.kind == LA_FUSED || a.kind == LA_LOOP)
		return cuda_group_contract(p, &a, out);
	if (a.kind == LA_KERNEL)
		return cuda_kernel_contract(p, a.begin, out);
	if (a.kind == LA_GEMM)
		return gemm_contract(p, a.begin, out);
	if (a.kind == LA_CHOICE) { // no work, no buffers: the next two launches are candidates
		if (!contract_new(out, "choice", 1))
			return 0;
		out->choice = 2;
		out->points = 2;
		return 1;
	}
	// A host step: linear_sum_assignment of the (rows, cols) cost hin into
	// out; points and grid carry rows and cols (docs/ARTIFACT.md).
	const KKernel *k = &p->k[a.begin];
	const KBuf *in = &p->buf[k->hin];
	if (!contract_new(out, "linear_sum_assignment", 3))
		return 0;
	FADC_ASSERT(k->host == KH_ASSIGN && in->shape.rank == 2, "cuda: an unknown host kernel");
	out->host = k->host;
	out->points = in->shape.dim[0];
	out->grid = (uint32_t)in->shape.dim[1];
	out->buf[out->narg++] = k->out;
	out->buf[out->narg++] = k->hin;
	return 1;
}

// The kernels of a group in order, inside their loops (`for` over each
// step counter s<l>), each followed by a barrier (`bar`), except the last
// one of the group when no loop repeats it; in a fused task only where
// after[ki] says (cuda_fused_barriers).
static void
print_calls(Cu *c, const La *a, const char *bar, const uint8_t *after) {
	const KProgram *p = c->p;
	FILE *f = c->f;
	int depth = 1;
	for (uint32_t ki = a->begin; ki < a->end; ki++) {
		// Loops starting here, outer first (lower index).
		for (uint32_t l = 0; l < p->nloop; l++)
			if (p->loop[l].begin == ki && p->loop[l].end > ki) {
				for (int d = 0; d < depth; d++)
					fputc('\t', f);
				fprintf(f, "for (long long s%u = 0; s%u < %lldLL; s%u++) {\n", l, l,
				        (long long)p->loop[l].trip, l);
				depth++;
			}
		CgCudaKernel k;
		FADC_ASSERT(cuda_kernel_contract(p, ki, &k), "cuda: out of memory");
		Uses u = {0};
		cuda_kernel_uses(p, &p->k[ki], &u);
		for (int d = 0; d < depth; d++)
			fputc('\t', f);
		fprintf(f, "%s(", k.name);
		for (uint32_t j = 0; j < k.narg; j++)
			fprintf(f, "%sb%u", j ? ", " : "", k.buf[j]);
		fprintf(f, "%s", k.runseed ? ", runseed" : "");
		for (uint32_t l = 0; l < p->nloop; l++)
			if (u.step[l])
				fprintf(f, ", s%u", l);
		fputs(");\n", f);
		if (after ? after[ki] : ki + 1 < a->end || depth > 1) {
			for (int d = 0; d < depth; d++)
				fputc('\t', f);
			fprintf(f, "%s;\n", bar);
		}
		free(u.seen);
		free(u.buf);
		free(u.step);
		free(k.name);
		free(k.buf);
		// Loops ending here, inner first.
		for (uint32_t l = p->nloop; l-- > 0;)
			if (p->loop[l].end == ki + 1 && p->loop[l].begin <= ki) {
				depth--;
				for (int d = 0; d < depth; d++)
					fputc('\t', f);
				fputs("}\n", f);
			}
	}
}

// Grid barriers of a persistent loop kernel (group a): after[ki] = 1 when
// one follows kernel ki.  Each trip's last kernel of every loop is
// followed by one (the next trip reads the carries), and so is a kernel
// before a loop's first; between, kernel j runs in the phase of the
// kernels since the last barrier unless it touches what one of them does:
// it reads or writes bytes one of them writes, or writes bytes one of them
// reads.  Which block runs which point differs between kernels (their
// forms and sizes differ), so no read counts as private, as it may in a
// fused task (cuda_fused_barriers): this is buffers, byte ranges in the arena
// for temporaries.  deepspeech's reverse LSTM step: the four gate
// nonlinearities, each reading the pre-activations and writing its own
// buffer, share one phase.  One exception: two kernels of one thread per
// point (neither tiled nor a block's reduction) give point t to the same
// thread, (blockIdx.x * 256 + threadIdx.x) + k * 256 nb for every such
// kernel whatever its size, so bytes that both touch only at their own
// row-major point index (an elementwise chain over [N, H]: c' from c, h'
// from c', the carries copied back) pass between them in one thread's
// program order, as in a fused task's phases (cuda_fused_barriers).
// FADC_CUDA_GRID_SYNC_ALL=1 at compile time puts a barrier after every
// kernel (measurements).
static int
grid_overlap(const KProgram *p, uint32_t a, uint32_t b) {
	const KBuf *x = &p->buf[a], *y = &p->buf[b];
	if (a == b)
		return 1;
	if (x->kind != KB_TMP || y->kind != KB_TMP || !x->bytes || !y->bytes)
		return 0;
	return x->offset < y->offset + y->bytes && y->offset < x->offset + x->bytes;
}

// Element e of a is element e of b (one buffer, or the same placement).
static int
grid_same_place(const KProgram *p, uint32_t a, uint32_t b) {
	const KBuf *x = &p->buf[a], *y = &p->buf[b];
	return a == b || (x->kind == KB_TMP && y->kind == KB_TMP && x->offset == y->offset &&
	                  kir_dtype_size(x->dtype) == kir_dtype_size(y->dtype));
}

// Is kernel k of a loop one thread per point (see cuda_grid_barriers)?
static int
grid_thread_form(const KProgram *p, const KKernel *k) {
	Tile t;
	return !cuda_blockred(p, k) && !cuda_loop_tile(p, k, &t);
}

// Does kernel k of a loop store point t from the thread of point t?  The
// thread form does, and so does a split tile's last pass (print_tile).
static int
grid_stores_own(const KProgram *p, const KKernel *k) {
	Tile t;
	return grid_thread_form(p, k) || (cuda_loop_tile(p, k, &t) && t.kc > 1);
}

static int
grid_conflict(const KProgram *p, uint32_t i, uint32_t j, const uint8_t *rdi, const uint8_t *rdj) {
	const KKernel *ki = &p->k[i], *kj = &p->k[j];
	int wi = grid_stores_own(p, ki) && kx_flat_point(p, ki, ki->index);
	int wj = grid_stores_own(p, kj) && kx_flat_point(p, kj, kj->index);
	// Split tiles share one scratch array (fadc_tile_part): j's chunk sums
	// must not overwrite i's before every block has read them.
	Tile ti, tj;
	if (cuda_loop_tile(p, ki, &ti) && ti.kc > 1 && cuda_loop_tile(p, kj, &tj) && tj.kc > 1)
		return 1;
	if (grid_overlap(p, ki->out, kj->out) &&
	    !(wi && wj && grid_same_place(p, ki->out, kj->out)))
		return 1;
	for (uint32_t b = 0; b < p->nbuf; b++) {
		// RAW: j reads what i wrote; WAR: j writes what i read.
		if (rdj[b] && grid_overlap(p, ki->out, b) &&
		    !(rdj[b] == RD_OWN && wi && grid_same_place(p, ki->out, b)))
			return 1;
		if (rdi[b] && grid_overlap(p, kj->out, b) &&
		    !(rdi[b] == RD_OWN && wj && grid_same_place(p, kj->out, b)))
			return 1;
	}
	return 0;
}

static void
cuda_grid_barriers(const KProgram *p, const La *a, uint8_t *after) {
	const char *all = getenv("FADC_CUDA_GRID_SYNC_ALL");
	int every = all && *all && strcmp(all, "0");
	uint32_t n = a->end - a->begin;
	uint8_t *seen = calloc(p->nx + 1, 1);
	uint8_t *rd = calloc((size_t)(n + 1) * (p->nbuf + 1), 1);
	FADC_ASSERT(seen && rd, "cuda: out of memory");
	for (uint32_t i = 0; i < n; i++) {
		const KKernel *k = &p->k[a->begin + i];
		uint8_t *r = rd + (size_t)i * (p->nbuf + 1);
		// RD_OWN: read only at the kernel's own point index, by the
		// thread of that point (thread form; a reduction's terms are not).
		int own = grid_thread_form(p, k);
		memset(seen, 0, p->nx + 1);
		reads_of(p, k, k->body, own, seen, r);
		reads_of(p, k, k->post, own, seen, r);
		reads_of(p, k, k->index, own, seen, r);
	}
	uint32_t begin = a->begin;
	for (uint32_t ki = a->begin; ki < a->end; ki++) {
		uint32_t j = ki + 1;
		int need = every || j == a->end;
		for (uint32_t l = 0; l < p->nloop && !need; l++)
			if (p->loop[l].end > p->loop[l].begin &&
			    (p->loop[l].end == j || p->loop[l].begin == j))
				need = 1;
		for (uint32_t i = begin; i < j && !need; i++)
			need = grid_conflict(p, i, j, rd + (size_t)(i - a->begin) * (p->nbuf + 1),
			                     rd + (size_t)(j - a->begin) * (p->nbuf + 1));
		after[ki] = (uint8_t)need;
		if (need)
			begin = j;
	}
	free(seen);
	free(rd);
}

// The __global__ of a group: the fused task (one block) or a persistent
// loop kernel (grid-wide barriers).
static void
print_group(Cu *c, const La *a) {
	const KProgram *p = c->p;
	CgCudaKernel all;
	FADC_ASSERT(cuda_group_contract(p, a, &all), "cuda: out of memory");
	uint8_t *written = calloc(p->nbuf + 1, 1);
	FADC_ASSERT(written, "cuda: out of memory");
	for (uint32_t ki = a->begin; ki < a->end; ki++)
		written[p->k[ki].out] = 1;
	FILE *f = c->f;
	int fusedk = a->kind == LA_FUSED;
	if (fusedk)
		fprintf(f,
		        "\n// the task as one kernel of one block of %d threads, %u kernels in %u "
		        "phase%s; args:",
		        FUSED_THREADS, p->nk, cg_cuda_phases(p), cg_cuda_phases(p) == 1 ? "" : "s");
	else
		fprintf(f,
		        "\n// loop %d (kernels %u..%u, %lld trips) as one persistent kernel of %u "
		        "blocks; args:",
		        a->loop, a->begin, a->end - 1, (long long)p->loop[a->loop].trip, all.grid);
	for (uint32_t j = 0; j < all.narg; j++)
		fprintf(f, " b%u", all.buf[j]);
	// The fused kernel's temporaries: the plan's offsets, or each its own
	// bytes (cuda_tmp_private); and, where they fit beside them, the task's
	// inputs staged into shared memory (cuda_stage_inputs).
	int smem = fusedk && cuda_fused_smem(p), priv = smem && cuda_tmp_private(p);
	int64_t size = priv ? 0 : p->arena_bytes, staged = 0;
	for (uint32_t b = 0; priv && b < p->nbuf; b++)
		if (p->buf[b].kind == KB_TMP && p->buf[b].bytes)
			size += (p->buf[b].bytes + 63) / 64 * 64;
	int stage = smem && cuda_stage_inputs(p, &all, size, &staged);
	fprintf(f, "%s\nextern \"C\" __global__ void __launch_bounds__(%d%s)\n%s(",
	        all.runseed ? " runseed" : "", FUSED_THREADS, fusedk ? "" : ", 2", all.name);
	for (uint32_t j = 0; j < all.narg; j++) {
		uint32_t b = all.buf[j];
		int in = stage && p->buf[b].kind == KB_IN;
		fprintf(f, "%s%s%s *b%u%s", j ? ", " : "", written[b] ? "" : "const ",
		        csty(p->buf[b].dtype), b, in ? "_g" : "");
	}
	fprintf(f, "%s)\n{\n", all.runseed ? ", unsigned long long runseed" : "");
	if (stage) {
		// Every thread copies its share of each input (element i on thread
		// i % 256), then one barrier: the kernels' scattered, dependent
		// reads of parameters then hit shared memory instead of L2.
		// Inputs of at most 256 elements: each thread's element loaded into
		// a register first, all loads before any store, so they are in
		// flight together (one latency, not one per input).
		fprintf(f, "\t__shared__ __align__(16) unsigned char inputs[%lld];\n", (long long)staged);
		for (int pass = 0; pass < 3; pass++) {
			int64_t off = 0;
			for (uint32_t j = 0; j < all.narg; j++) {
				uint32_t b = all.buf[j];
				const KBuf *x = &p->buf[b];
				if (x->kind != KB_IN || !x->bytes)
					continue;
				int64_t n = x->bytes / kir_dtype_size(x->dtype);
				const char *ty = csty(x->dtype);
				if (pass == 0)
					fprintf(f, "\t%s *b%u = (%s *)(inputs + %lld);\n", ty, b, ty, (long long)off);
				else if (pass == 1 && n <= FUSED_THREADS)
					fprintf(f, "\tconst %s v%u = threadIdx.x < %lldU ? b%u_g[threadIdx.x] : (%s)0;\n",
					        ty, b, (long long)n, b, ty);
				else if (pass == 2 && n <= FUSED_THREADS)
					fprintf(f, "\tif (threadIdx.x < %lldU)\n\t\tb%u[threadIdx.x] = v%u;\n",
					        (long long)n, b, b);
				else if (pass == 2)
					fprintf(f, "\tfor (int i = threadIdx.x; i < %lld; i += %d)\n\t\tb%u[i] = b%u_g[i];\n",
					        (long long)n, FUSED_THREADS, b, b);
				off += (x->bytes + 15) / 16 * 16;
			}
		}
		for (uint32_t j = 0; j < all.narg; j++) {
			const KBuf *x = &p->buf[all.buf[j]];
			if (x->kind == KB_IN && !x->bytes)
				fprintf(f, "\tconst %s *b%u = b%u_g;\n", csty(x->dtype), all.buf[j], all.buf[j]);
		}
		fputs("\t__syncthreads(); // the inputs staged\n", f);
	}
	if (smem) {
		if (size > 0)
			fprintf(f, "\t__shared__ __align__(64) unsigned char arena[%lld];\n", (long long)size);
		for (uint32_t b = 0, off = 0; b < p->nbuf; b++) {
			if (p->buf[b].kind != KB_TMP)
				continue;
			if (size > 0 && p->buf[b].bytes)
				fprintf(f, "\t%s *b%u = (%s *)(arena + %lld);\n", csty(p->buf[b].dtype), b,
				        csty(p->buf[b].dtype), priv ? (long long)off : (long long)p->buf[b].offset);
			else // zero-size temporaries: never dereferenced
				fprintf(f, "\t%s *b%u = nullptr;\n", csty(p->buf[b].dtype), b);
			if (priv && p->buf[b].bytes)
				off += (uint32_t)((p->buf[b].bytes + 63) / 64 * 64);
		}
	}
	if (fusedk) {
		uint8_t *after = calloc(p->nk + 1, 1);
		FADC_ASSERT(after, "cuda: out of memory");
		cuda_fused_barriers(p, after);
		// FADC_CUDA_PHASE_CLOCKS=1 (measurements only): thread 0 reads
		// clock64 after every barrier and prints the cycles of each phase
		// (the slowest warp's, since all wait at the barrier) at the end.
		// FADC_CUDA_PHASE_CLOCKS=2 runs the task's kernels twice in the
		// launch (they are idempotent: outputs and temporaries rewritten
		// from the inputs), the second time with the code and data warm.
		const char *clk = getenv("FADC_CUDA_PHASE_CLOCKS");
		if (clk && *clk && strcmp(clk, "0")) {
			fprintf(f, "\t__syncthreads();\n\tfor (int fadc_rep = 0; fadc_rep < %d; fadc_rep++) {\n"
			           "\tlong long fadc_tick[64];\n\tint fadc_nt = 0;\n"
			           "\tif (threadIdx.x == 0) fadc_tick[fadc_nt++] = clock64();\n",
			        atoi(clk) > 1 ? atoi(clk) : 1);
			print_calls(c, a,
			            "__syncthreads(); if (threadIdx.x == 0 && fadc_nt < 63) "
			            "fadc_tick[fadc_nt++] = clock64()",
			            after);
			fprintf(f, "\t__syncthreads();\n\tif (threadIdx.x == 0) {\n"
			           "\t\tfadc_tick[fadc_nt++] = clock64();\n"
			           "\t\tprintf(\"phase clocks %s run %%d: total %%lld:\", fadc_rep, fadc_tick[fadc_nt - 1] - fadc_tick[0]);\n"
			           "\t\tfor (int i = 1; i < fadc_nt; i++)\n"
			           "\t\t\tprintf(\" %%lld\", fadc_tick[i] - fadc_tick[i - 1]);\n"
			           "\t\tprintf(\"\\n\");\n\t}\n\t__syncthreads();\n\t}\n",
			        all.name);
		} else
			print_calls(c, a, "__syncthreads()", after);
		free(after);
	} else if (all.grid == 1)
		print_calls(c, a, "__syncthreads()", NULL);
	else {
		fputs("\tconst unsigned int nb = fadc_nb();\n"
		      "\tif (blockIdx.x >= nb)\n"
		      "\t\treturn; // not resident with the others: no share of the work\n",
		      f);
		uint8_t *after = calloc(p->nk + 1, 1);
		FADC_ASSERT(after, "cuda: out of memory");
		cuda_grid_barriers(p, a, after);
		print_calls(c, a, "fadc_grid_sync(nb)", after);
		free(after);
	}
	fputs("}\n", f);
	free(written);
	free(all.name);
	free(all.buf);
}

// Whether a fused task's inputs are staged into shared memory: all of
// them fit there beside the temporaries (tmp bytes), each 16-byte
// aligned, within FUSED_SMEM_LIMIT, and FADC_CUDA_NO_STAGE is not set
// (measurements).  *bytes: their shared-memory size.
static int
cuda_stage_inputs(const KProgram *p, const CgCudaKernel *all, int64_t tmp, int64_t *bytes) {
	const char *off = getenv("FADC_CUDA_NO_STAGE");
	if (off && *off && strcmp(off, "0"))
		return 0;
	int64_t n = 0;
	for (uint32_t j = 0; j < all->narg; j++) {
		const KBuf *x = &p->buf[all->buf[j]];
		if (x->kind == KB_IN)
			n += (x->bytes + 15) / 16 * 16;
	}
	*bytes = n;
	return n > 0 && tmp + n <= FUSED_SMEM_LIMIT;
}

static int
cuda_kernel_contract(const KProgram *p, uint32_t ki, CgCudaKernel *out) {
	const KKernel *k = &p->k[ki];
	Uses u = {0};
	cuda_kernel_uses(p, k, &u);
	memset(out, 0, sizeof *out);
	char *name = NULL;
	size_t nlen = 0;
	FILE *f = open_memstream(&name, &nlen);
	out->buf = calloc(p->nbuf + 1, sizeof *out->buf);
	if (!f || !out->buf) {
		if (f)
			fclose(f);
		free(name);
		free(out->buf);
		free(u.seen);
		free(u.buf);
		free(u.step);
		out->buf = NULL;
		return 0;
	}
	cuda_kernel_name(f, p->name ? p->name : "", ki, k->what);
	fclose(f);
	out->name = name;
	out->points = kir_kernel_points(k);
	out->buf[out->narg++] = k->out;
	for (uint32_t b = 0; b < p->nbuf; b++)
		if (u.buf[b] && b != k->out)
			out->buf[out->narg++] = b;
	out->runseed = u.seed;
	if (cuda_blockred(p, k))
		out->grid = (uint32_t)(out->points < 65535 ? out->points : 65535);
	free(u.seen);
	free(u.buf);
	free(u.step);
	return 1;
}

// acc <- the fold of the warp's 32 values of acc, into lane 0: for s = 16,
// 8, 4, 2, 1, lane l combines lane l + s's value into its own (a fixed
// tree; every lane of the warp runs it, as __shfl_down_sync requires).
static void
print_warp_fold(Cu *c, KRed r, DType vt) {
	FILE *f = c->f;
	indent(c);
	fputs("for (int s = 16; s > 0; s >>= 1) {\n", f);
	c->depth++;
	indent(c);
	if (vt == DT_BOOL)
		fputs("const bool o = __shfl_down_sync(0xffffffffu, (int)acc, s) != 0;\n", f);
	else
		fprintf(f, "const %s o = __shfl_down_sync(0xffffffffu, acc, s);\n", cty(vt));
	red_combine_var(c, r, vt, "o");
	c->depth--;
	indent(c);
	fputs("}\n", f);
}

// The coordinates i<d> of parallel variables that kernel k uses, from a
// flat point t (row-major), of C type `it` with literal suffix `ll`.
static void
print_point_vars(Cu *c, const KKernel *k, const Uses *u, const char *it, const char *ll) {
	int64_t stride = 1;
	for (int d = k->rank - 1; d >= 0; d--) {
		if (u->var[d] && k->dim[d] > 1) {
			indent(c);
			if (d == 0)
				fprintf(c->f, "const %s i%d = t / %lld%s;\n", it, d, (long long)stride, ll);
			else
				fprintf(c->f, "const %s i%d = t / %lld%s %% %lld%s;\n", it, d, (long long)stride, ll,
				        (long long)k->dim[d], ll);
		}
		stride *= k->dim[d];
	}
}

// The body of a tiled contraction (cuda_loop_tile): tiles grid-stride over the
// blocks that take part; thread (warp w, lane l) of a tile with rows
// row0 .. row0 + R - 1 and columns col0 .. col0 + 31 keeps acc<r> for
// point (row0 + r, col0 + l) over terms w, w + 8, ...; then the warps'
// partials meet in shared memory (red[w][r][l]) and warp r sums row r's
// in warp order, applies the post and stores.
static void
print_tile(Cu *c, const KKernel *k, const Uses *u, const Tile *tl) {
	const KProgram *p = c->p;
	FILE *f = c->f;
	DType vt = (DType)p->x[k->body].dtype, st = p->buf[k->out].dtype;
	int nw = FUSED_THREADS / 32;
	int64_t nr = kir_kernel_terms(k), R = tl->r;
	int rguard = tl->rows % R != 0, cguard = tl->cols % 32 != 0;
	c->var32 = 0; // t, r, i<d>, col, row0 are printed long long here
	// red[] is the module's one fadc_tile_red (cg_cuda_print): the tiled
	// kernels of a block run one after another, and each ends on a
	// barrier after its last read of it.
	fprintf(f, "\t%s (*const red)[%lld][32] = (%s (*)[%lld][32])fadc_tile_red;\n", cty(vt),
	        (long long)R, cty(vt), (long long)R);
	fputs("\tconst unsigned int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;\n", f);
	if (tl->kc > 1) {
		fprintf(f, "\t%s *const part = (%s *)fadc_tile_part;\n", cty(vt), cty(vt));
		fprintf(f, "\tfor (long long u = blockIdx.x; u < %lldLL; u += fadc_nb()) {\n",
		        (long long)tl->units);
		fprintf(f, "\t\tconst long long tile = u %% %lldLL, kc = u / %lldLL;\n",
		        (long long)tl->ntiles, (long long)tl->ntiles);
	} else
		fprintf(f, "\tfor (long long tile = blockIdx.x; tile < %lldLL; tile += fadc_nb()) {\n",
		        (long long)tl->ntiles);
	fprintf(f,
	        "\t\tconst long long col = tile %% %lldLL * 32 + lane, row0 = tile / %lldLL * "
	        "%lldLL;\n",
	        (long long)tl->ctiles, (long long)tl->ctiles, (long long)R);
	c->depth = 2;
	for (int64_t r = 0; r < R; r++) {
		indent(c);
		fprintf(f, "%s acc%lld = ", cty(vt), (long long)r);
		red_init(c, k->red, vt);
		fputs(";\n", f);
	}
	indent(c);
	if (tl->kc > 1) {
		fprintf(f, "const long long rend = kc * %lldLL + %lldLL < %lldLL ? kc * %lldLL + %lldLL : %lldLL;\n",
		        (long long)tl->kterms, (long long)tl->kterms, (long long)nr,
		        (long long)tl->kterms, (long long)tl->kterms, (long long)nr);
		indent(c);
		fprintf(f, "for (long long r = kc * %lldLL + warp; r < rend; r += %d) {\n",
		        (long long)tl->kterms, nw);
	} else
		fprintf(f, "for (long long r = warp; r < %lldLL; r += %d) {\n", (long long)nr, nw);
	c->depth++;
	int64_t rs = 1;
	for (int d = k->rrank - 1; d >= 0; d--) {
		int v = k->rank + d;
		if (v < 2 * IR_MAXDIM && u->var[v]) {
			indent(c);
			fprintf(f, "const long long i%d = r / %lldLL %% %lldLL;\n", v, (long long)rs,
			        (long long)k->rdim[d]);
		}
		rs *= k->rdim[d];
	}
	// One scope per row: the same term printed for each (its loads that do
	// not depend on the row are equal expressions, merged by nvcc).
	for (int64_t r = 0; r < R; r++) {
		indent(c);
		if (rguard && cguard)
			fprintf(f, "if (row0 + %lldLL < %lldLL && col < %lldLL) {\n", (long long)r,
			        (long long)tl->rows, (long long)tl->cols);
		else if (rguard)
			fprintf(f, "if (row0 + %lldLL < %lldLL) {\n", (long long)r, (long long)tl->rows);
		else if (cguard)
			fprintf(f, "if (col < %lldLL) {\n", (long long)tl->cols);
		else
			fputs("{\n", f);
		c->depth++;
		indent(c);
		fprintf(f, "const long long t = (row0 + %lldLL) * %lldLL + col;\n", (long long)r,
		        (long long)tl->cols);
		print_point_vars(c, k, u, "long long", "LL");
		indent(c);
		fprintf(f, "%s acc = acc%lld;\n", cty(vt), (long long)r);
		c->region++;
		ensure(c, k->body);
		red_combine(c, k->red, vt, k->body);
		indent(c);
		fprintf(f, "acc%lld = acc;\n", (long long)r);
		c->depth--;
		indent(c);
		fputs("}\n", f);
	}
	c->depth--;
	indent(c);
	fputs("}\n", f);
	for (int64_t r = 0; r < R; r++) {
		indent(c);
		fprintf(f, "red[warp][%lld][lane] = acc%lld;\n", (long long)r, (long long)r);
	}
	indent(c);
	fputs("__syncthreads();\n", f);
	indent(c);
	fprintf(f, "if (warp < %lldU && row0 + warp < %lldLL", (long long)R, (long long)tl->rows);
	if (cguard)
		fprintf(f, " && col < %lldLL", (long long)tl->cols);
	fputs(") {\n", f);
	c->depth++;
	indent(c);
	fprintf(f, "%s acc = red[0][warp][lane];\n", cty(vt));
	for (int w = 1; w < nw; w++) {
		char o[48];
		snprintf(o, sizeof o, "red[%d][warp][lane]", w);
		red_combine_var(c, k->red, vt, o);
	}
	indent(c);
	fprintf(f, "const long long t = (row0 + warp) * %lldLL + col;\n", (long long)tl->cols);
	if (tl->kc > 1) {
		// This chunk's sum of the point, for the pass after the barrier.
		indent(c);
		fprintf(f, "part[kc * %lldLL + t] = acc;\n", (long long)(tl->rows * tl->cols));
		c->depth--;
		indent(c);
		fputs("}\n", f);
		indent(c);
		fputs("__syncthreads(); // red[] is written again by the next tile\n", f);
		fputs("\t}\n", f);
		// Every chunk written: each point's partials in chunk order.
		fputs("\tfadc_grid_sync(fadc_nb());\n", f);
		fprintf(f,
		        "\tfor (long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x; t < %lldLL;\n"
		        "\t     t += (long long)blockDim.x * fadc_nb()) {\n",
		        (long long)(tl->rows * tl->cols));
		c->depth = 2;
		indent(c);
		fprintf(f, "%s acc = part[t];\n", cty(vt));
		for (int64_t q = 1; q < tl->kc; q++) {
			char o[64];
			snprintf(o, sizeof o, "part[%lldLL + t]", (long long)(q * tl->rows * tl->cols));
			red_combine_var(c, k->red, vt, o);
		}
	}
	print_point_vars(c, k, u, "long long", "LL");
	c->region++;
	ensure(c, k->post);
	ensure(c, k->index);
	indent(c);
	fprintf(f, "b%u[", k->out);
	ref(c, k->index);
	fputs("] = ", f);
	DType ct = (DType)p->x[k->post].dtype;
	if (st == DT_BOOL) {
		fputs("(unsigned char)", f);
		ref(c, k->post);
	} else
		convert(c, k->post, ct, st, 0);
	fputs(";\n", f);
	if (tl->kc > 1) {
		fputs("\t}\n}\n", f);
		return;
	}
	c->depth--;
	indent(c);
	fputs("}\n", f);
	indent(c);
	fputs("__syncthreads(); // red[] is written again by the next tile\n", f);
	fputs("\t}\n}\n", f);
}

static void
print_kernel(Cu *c, uint32_t ki) {
	const KProgram *p = c->p;
	const KKernel *k = &p->k[ki];
	FILE *f = c->f;
	Uses u = {0};
	cuda_kernel_uses(p, k, &u);
	int64_t npt = kir_kernel_points(k);
	DType st = p->buf[k->out].dtype;
	// The launch contract, for the runtime: points, then the arguments.
	fprintf(f, "\n// kernel %u: %s, %lld points, writes b%u; args: b%u", ki,
	        k->what ? k->what : "", (long long)npt, k->out, k->out);
	for (uint32_t b = 0; b < p->nbuf; b++)
		if (u.buf[b] && b != k->out)
			fprintf(f, " b%u", b);
	for (uint32_t l = 0; l < p->nloop; l++)
		if (u.step[l])
			fprintf(f, " s%u", l);
	fprintf(f, "%s\n", u.seed ? " runseed" : "");
	// Inside a loop or a fused task the kernel is a __device__ function of
	// the fused or the persistent kernel, and its pointers are not
	// __restrict__: a restricted const pointer may be read through the
	// non-coherent cache, which a kernel must not do for memory written
	// earlier in the same launch (the loop's earlier steps, other blocks,
	// the fused task's earlier kernels, with or without a barrier between:
	// cuda_fused_barriers relies on plain program order).  A persistent
	// kernel's blocks stride by fadc_nb(), the blocks that take part.
	int dev = c->fused || c->inloop[ki];
	const char *restr = c->inloop[ki] || c->fused ? "" : "__restrict__ ";
	const char *nb = c->inloop[ki] && !c->fused ? "fadc_nb()" : "gridDim.x";
	fputs(dev ? "static __device__ void\n" : "extern \"C\" __global__ void\n", f);
	cuda_kernel_name(f, p->name, ki, k->what);
	fprintf(f, "(%s *%sb%u", csty(st), restr, k->out);
	for (uint32_t b = 0; b < p->nbuf; b++)
		if (u.buf[b] && b != k->out)
			fprintf(f, ", const %s *%sb%u", csty(p->buf[b].dtype), restr, b);
	fprintf(f, "%s", u.seed ? ", unsigned long long runseed" : "");
	for (uint32_t l = 0; l < p->nloop; l++)
		if (u.step[l])
			fprintf(f, ", long long s%u", l);
	fputs(")\n{\n", f);
	if (npt == 0) { // an empty output (a scan of length 0): nothing to do
		fputs("}\n", f);
		free(u.seen);
		free(u.buf);
		free(u.step);
		return;
	}
	Tile tl;
	if (c->inloop[ki] && !c->fused && cuda_loop_tile(p, k, &tl)) {
		print_tile(c, k, &u, &tl);
		free(u.seen);
		free(u.buf);
		free(u.step);
		return;
	}
	// A reduction's form: one block per output point (cuda_blockred, or a
	// fused task's FM_BLOCK), one warp per point (FM_WARP), else one
	// thread per point.
	FMode fm = c->fused ? cuda_fused_mode(p, k) : FM_THREAD;
	int br = cuda_blockred(p, k) || fm == FM_BLOCK, wr = fm == FM_WARP;
	int rot = c->fused && c->rot ? c->rot[ki] : 0;
	// The point and reduction variables in int where their extents leave
	// room for the loops' strides (index32 above).
	int64_t nred = kir_kernel_terms(k);
	c->var32 = npt < ((int64_t)1 << 30) && nred < ((int64_t)1 << 30);
	const char *it = c->var32 ? "int" : "long long", *ll = c->var32 ? "" : "LL";
	if (br) {
		// One block per output point (grid-stride over blocks); red[] holds
		// the warps' partial results, two sets used in turn (rb), so the
		// next point's writes need no barrier after this point's reads.
		fprintf(f, "\t__shared__ %s red[2][32];\n", cty((DType)p->x[k->body].dtype));
		fputs("\tunsigned int rb = 0;\n", f);
		fprintf(f, "\tfor (%s t = blockIdx.x; t < %lld%s; t += %s) {\n", it, (long long)npt, ll,
		        nb);
	} else if (wr && rot) // one warp per output point, rotated (point t on warp t + rot)
		fprintf(f,
		        "\tfor (%s t = ((threadIdx.x >> 5) + %dU) & %dU; t < %lld%s; "
		        "t += blockDim.x >> 5) {\n",
		        it, FUSED_THREADS / 32 - rot, FUSED_THREADS / 32 - 1, (long long)npt, ll);
	else if (wr) // one warp per output point (the fused task's one block)
		fprintf(f, "\tfor (%s t = threadIdx.x >> 5; t < %lld%s; t += blockDim.x >> 5) {\n", it,
		        (long long)npt, ll);
	else if (rot) // the fused task's one block, rotated: point t on thread t + 32 rot
		fprintf(f, "\tfor (%s t = (threadIdx.x + %dU) & %dU; t < %lld%s; t += blockDim.x) {\n", it,
		        FUSED_THREADS - 32 * rot, FUSED_THREADS - 1, (long long)npt, ll);
	else
		fprintf(
		    f,
		    "\tfor (%s t = (%s)blockIdx.x * blockDim.x + threadIdx.x; t < %lld%s;\n"
		    "\t     t += (%s)blockDim.x * %s) {\n",
		    it, it, (long long)npt, ll, it, nb);
	c->depth = 2;
	// Parallel variables: row-major coordinates of point t.
	print_point_vars(c, k, &u, it, ll);
	KxId val = k->red ? k->post : k->body;
	DType vt = (DType)p->x[k->body].dtype;
	if (br || wr) {
		int64_t nr = kir_kernel_terms(k);
		indent(c);
		fprintf(f, "%s acc = ", cty(vt));
		red_init(c, k->red, vt);
		fputs(";\n", f);
		indent(c);
		if (br)
			fprintf(f, "for (%s r = threadIdx.x; r < %lld%s; r += blockDim.x) {\n", it,
			        (long long)nr, ll);
		else
			fprintf(f, "for (%s r = threadIdx.x & 31; r < %lld%s; r += 32) {\n", it,
			        (long long)nr, ll);
		c->depth++;
		int64_t rs = 1;
		for (int d = k->rrank - 1; d >= 0; d--) {
			int v = k->rank + d;
			if (v < 2 * IR_MAXDIM && u.var[v]) {
				indent(c);
				fprintf(f, "const %s i%d = r / %lld%s %% %lld%s;\n", it, v, (long long)rs, ll,
				        (long long)k->rdim[d], ll);
			}
			rs *= k->rdim[d];
		}
		c->region++;
		ensure(c, k->body);
		red_combine(c, k->red, vt, k->body);
		c->depth--;
		indent(c);
		fputs("}\n", f);
		// Each warp folds its 32 lanes' results into lane 0; a block then
		// folds its warps' (at most 32) the same way in warp 0.  Summation
		// order: lane l's strided terms r = l, l + 32 (block: l + 256, ...)
		// in order, then the shuffle tree (print_warp_fold); fixed, so the
		// result is the same every run.
		print_warp_fold(c, k->red, vt);
		if (br) {
			indent(c);
			fputs("if ((threadIdx.x & 31) == 0)\n", f);
			indent(c);
			fputs("\tred[rb][threadIdx.x >> 5] = acc;\n", f);
			indent(c);
			fputs("__syncthreads();\n", f);
			indent(c);
			fputs("if (threadIdx.x < 32) {\n", f);
			c->depth++;
			indent(c);
			fputs("acc = threadIdx.x < (blockDim.x >> 5) ? red[rb][threadIdx.x] : ", f);
			red_init(c, k->red, vt);
			fputs(";\n", f);
			print_warp_fold(c, k->red, vt);
			c->depth--;
			indent(c);
			fputs("}\n", f);
			indent(c);
			fputs("rb ^= 1;\n", f);
		}
		indent(c);
		fputs(br ? "if (threadIdx.x == 0) {\n" : "if ((threadIdx.x & 31) == 0) {\n", f);
		c->depth++;
	} else if (k->red) {
		indent(c);
		fprintf(f, "%s acc = ", cty(vt));
		red_init(c, k->red, vt);
		fputs(";\n", f);
		for (int d = 0; d < k->rrank; d++) {
			int v = k->rank + d;
			indent(c);
			fprintf(f, "for (%s i%d = 0; i%d < %lld%s; i%d++) {\n", it, v, v,
			        (long long)k->rdim[d], ll, v);
			c->depth++;
		}
		if (!k->rrank) { // one term: its own scope all the same (the post region
			indent(c); // defines its values again)
			fputs("{\n", f);
			c->depth++;
		}
		c->region++;
		ensure(c, k->body);
		red_combine(c, k->red, vt, k->body);
		for (int d = 0; d < (k->rrank ? k->rrank : 1); d++) {
			c->depth--;
			indent(c);
			fputs("}\n", f);
		}
	}
	c->region++;
	ensure(c, val);
	ensure(c, k->index);
	indent(c);
	fprintf(f, "b%u[", k->out);
	ref(c, k->index);
	fputs("] = ", f);
	DType ct = (DType)p->x[val].dtype;
	if (st == DT_BOOL) {
		fputs("(unsigned char)", f);
		ref(c, val);
	} else
		convert(c, val, ct, st, 0);
	fputs(";\n", f);
	if (br || wr) { // the lane that stores
		c->depth--;
		indent(c);
		fputs("}\n", f);
	}
	fputs("\t}\n}\n", f);
	free(u.seen);
	free(u.buf);
	free(u.step);
}

// codegen/support.c's polygamma, as a __device__ function in double.
static const char polygamma_src[] =
    "\n// polygamma(n, x) (n = 0: digamma): codegen/support.c's algorithm.\n"
    "static __device__ double\n"
    "fadc_pg_pos(int n, double x)\n"
    "{\n"
    "\tconst double bern2k[15] = {\n"
    "\t\t1.0 / 6, -1.0 / 30, 1.0 / 42, -1.0 / 30, 5.0 / 66, -691.0 / 2730, 7.0 / 6, -3617.0 / "
    "510,\n"
    "\t\t43867.0 / 798, -174611.0 / 330, 854513.0 / 138, -236364091.0 / 2730, 8553103.0 / 6,\n"
    "\t\t-23749461029.0 / 870, 8615841276005.0 / 14322,\n"
    "\t};\n"
    "\tdouble s = n % 2 ? 1 : -1, fact = 1;\n"
    "\tfor (int k = 2; k <= n; k++)\n"
    "\t\tfact *= k;\n"
    "\tdouble acc = 0, xmin = 10 + n;\n"
    "\tfor (; x < xmin; x += 1)\n"
    "\t\tacc += s * fact / pow(x, (double)(n + 1));\n"
    "\tdouble lead = n == 0 ? log(x) : s * (fact / n) / pow(x, (double)n);\n"
    "\tdouble sum = fact / (2 * pow(x, (double)(n + 1)));\n"
    "\tdouble f = fact * (n + 1) / 2, x2 = x * x, xp = pow(x, (double)(n + 2));\n"
    "\tfor (int k = 1; k <= 15; k++) {\n"
    "\t\tdouble term = bern2k[k - 1] * f / xp;\n"
    "\t\tsum += term;\n"
    "\t\tif (fabs(term) <= 1e-17 * fabs(sum))\n"
    "\t\t\tbreak;\n"
    "\t\tf *= (double)(2 * k + n + 1) * (2 * k + n) / ((2.0 * k + 2) * (2 * k + 1));\n"
    "\t\txp *= x2;\n"
    "\t}\n"
    "\treturn acc + lead + s * sum;\n"
    "}\n"
    "\n"
    "static __device__ double\n"
    "fadc_cotpi(double x)\n"
    "{\n"
    "\tconst double PI = 3.14159265358979323846264338327950288;\n"
    "\tdouble r = x - floor(x);\n"
    "\tif (r > 0.5)\n"
    "\t\tr -= 1;\n"
    "\tdouble ar = fabs(r), s, c;\n"
    "\tif (ar <= 0.25) {\n"
    "\t\ts = sin(PI * ar);\n"
    "\t\tc = cos(PI * ar);\n"
    "\t} else {\n"
    "\t\ts = cos(PI * (0.5 - ar));\n"
    "\t\tc = sin(PI * (0.5 - ar));\n"
    "\t}\n"
    "\treturn r < 0 ? -c / s : c / s;\n"
    "}\n"
    "\n"
    "static __device__ double\n"
    "fadc_polygamma(double nd, double x)\n"
    "{\n"
    "\tconst double PI = 3.14159265358979323846264338327950288;\n"
    "\tconst double NaN = __longlong_as_double(0x7ff8000000000000LL);\n"
    "\tconst double Inf = __longlong_as_double(0x7ff0000000000000LL);\n"
    "\tif (nd != nd || x != x || nd < 0 || nd > 120 || nd != floor(nd))\n"
    "\t\treturn NaN;\n"
    "\tint n = (int)nd;\n"
    "\tif (x <= 0 && x == floor(x)) {\n"
    "\t\tif (fabs(x) == Inf)\n"
    "\t\t\treturn NaN;\n"
    "\t\tif (n == 0)\n"
    "\t\t\treturn x == 0 ? copysign(Inf, -x) : NaN;\n"
    "\t\treturn n % 2 ? Inf : NaN;\n"
    "\t}\n"
    "\tif (x > 0)\n"
    "\t\treturn fadc_pg_pos(n, x);\n"
    "\tdouble p[124] = {0}, q[124];\n"
    "\tp[1] = 1;\n"
    "\tfor (int k = 0; k < n; k++) {\n"
    "\t\tfor (int j = 0; j <= k + 2; j++)\n"
    "\t\t\tq[j] = j <= k ? (j + 1) * p[j + 1] : 0;\n"
    "\t\tfor (int j = 0; j <= k + 2; j++)\n"
    "\t\t\tp[j] = -(q[j] + (j >= 2 ? q[j - 2] : 0));\n"
    "\t}\n"
    "\tdouble c = fadc_cotpi(x), pn = 0;\n"
    "\tfor (int j = n + 1; j >= 0; j--)\n"
    "\t\tpn = pn * c + p[j];\n"
    "\tdouble sgn = n % 2 ? -1 : 1;\n"
    "\treturn sgn * fadc_pg_pos(n, 1 - x) - pow(PI, (double)(n + 1)) * pn;\n"
    "}\n";

// The persistent kernels' helpers: the blocks that take part, and a
// grid-wide barrier (cooperative groups' grid.sync() needs a cooperative
// launch; this one needs only that the blocks taking part are resident,
// see PERSIST_MAX_BLOCKS).  Each block's thread 0 arrives on a counter
// after a block barrier and a fence; the last one to arrive resets the
// counter and bumps the generation the others spin on.  The counter is 0
// again after every barrier, so the module's two words need no reset
// between launches (one stream runs a task's launches one at a time; a
// module is loaded per task and context).
static const char grid_src[] =
    "\n// Persistent kernels: the blocks taking part (all resident), and a grid barrier.\n"
    "static __device__ unsigned int fadc_gbar_count;\n"
    "static __device__ unsigned int fadc_gbar_gen;\n"
    "\n"
    "static __device__ __forceinline__ unsigned int\n"
    "fadc_nb(void)\n"
    "{\n"
    "\tunsigned int n;\n"
    "\tasm(\"mov.u32 %0, %%nsmid;\" : \"=r\"(n));\n"
    "\treturn gridDim.x < n ? gridDim.x : n;\n"
    "}\n"
    "\n"
    "static __device__ void\n"
    "fadc_grid_sync(unsigned int nb)\n"
    "{\n"
    "\t__syncthreads();\n"
    "\tif (threadIdx.x == 0) {\n"
    "\t\tvolatile unsigned int *gen = &fadc_gbar_gen;\n"
    "\t\tconst unsigned int g = *gen;\n"
    "\t\t__threadfence();\n"
    "\t\tif (atomicAdd(&fadc_gbar_count, 1u) == nb - 1) {\n"
    "\t\t\tatomicExch(&fadc_gbar_count, 0u);\n"
    "\t\t\t__threadfence();\n"
    "\t\t\tatomicAdd(&fadc_gbar_gen, 1u);\n"
    "\t\t} else {\n"
    "\t\t\twhile (*gen == g)\n"
    "\t\t\t\t__nanosleep(32);\n"
    "\t\t}\n"
    "\t\t__threadfence();\n"
    "\t}\n"
    "\t__syncthreads();\n"
    "}\n";

// ir/random.c's Philox4x32-10 and its uniform and normal samplers as
// __device__ functions (dropout draws in tasks; gamma is drawn only by
// initializers, which are CPU code).  Integer arithmetic, so the uniform
// is bit for bit the CPU's; the normal's log, sqrt and cos are CUDA's
// double functions (within an ulp or two of libm's).
static const char rand_src[] =
    "\n// Philox4x32-10 and the samplers of ir/random.c.\n"
    "static __device__ void\n"
    "fadc_philox_block(unsigned long long seed, unsigned long long runseed,\n"
    "                  unsigned long long index, unsigned int w[4])\n"
    "{\n"
    "\tunsigned int k0 = (unsigned int)seed,\n"
    "\t             k1 = (unsigned int)(seed >> 32) ^ (unsigned int)runseed;\n"
    "\tunsigned int c0 = (unsigned int)index, c1 = (unsigned int)(index >> 32), c2 = 0,\n"
    "\t             c3 = (unsigned int)(runseed >> 32);\n"
    "\tfor (int r = 0; r < 10; r++) {\n"
    "\t\tif (r > 0) {\n"
    "\t\t\tk0 += 0x9E3779B9u;\n"
    "\t\t\tk1 += 0xBB67AE85u;\n"
    "\t\t}\n"
    "\t\tunsigned long long p0 = 0xD2511F53ull * c0, p1 = 0xCD9E8D57ull * c2;\n"
    "\t\tunsigned int r0 = (unsigned int)(p1 >> 32) ^ c1 ^ k0;\n"
    "\t\tunsigned int r2 = (unsigned int)(p0 >> 32) ^ c3 ^ k1;\n"
    "\t\tc1 = (unsigned int)p1;\n"
    "\t\tc3 = (unsigned int)p0;\n"
    "\t\tc0 = r0;\n"
    "\t\tc2 = r2;\n"
    "\t}\n"
    "\tw[0] = c0, w[1] = c1, w[2] = c2, w[3] = c3;\n"
    "}\n"
    "\n"
    "static __device__ double\n"
    "fadc_u53(unsigned int a, unsigned int b)\n"
    "{\n"
    "\treturn ((double)(a >> 5) * 67108864.0 + (double)(b >> 6)) * (1.0 / 9007199254740992.0);\n"
    "}\n"
    "\n"
    "static __device__ double\n"
    "fadc_rand_uniform(unsigned long long seed, unsigned long long runseed, unsigned long long i)\n"
    "{\n"
    "\tunsigned int w[4];\n"
    "\tfadc_philox_block(seed, runseed, i, w);\n"
    "\treturn fadc_u53(w[0], w[1]);\n"
    "}\n"
    "\n"
    "static __device__ double\n"
    "fadc_rand_normal(unsigned long long seed, unsigned long long runseed, unsigned long long i)\n"
    "{\n"
    "\tunsigned int w[4];\n"
    "\tfadc_philox_block(seed, runseed, i, w);\n"
    "\tdouble r = sqrt(-2.0 * log(1.0 - fadc_u53(w[0], w[1])));\n"
    "\treturn r * cos(6.283185307179586476925286766559 * fadc_u53(w[2], w[3]));\n"
    "}\n";

char *
cg_cuda_print(const KProgram *p, size_t *len, char *err, size_t errlen) {
	char *buf = NULL;
	size_t n = 0;
	Cu c = {0};
	c.p = p;
	c.f = open_memstream(&buf, &n);
	c.stamp = calloc(p->nx + 1, sizeof *c.stamp);
	if (!c.f || !c.stamp) {
		if (c.f)
			fclose(c.f);
		free(buf);
		free(c.stamp);
		snprintf(err, errlen, "error: out of memory");
		return NULL;
	}
	// Host kernels run between launches (the runtime's host step), so
	// never inside a loop: a persistent or fused kernel cannot stop for one.
	for (uint32_t l = 0; l < p->nloop; l++)
		for (uint32_t ki = p->loop[l].begin; ki < p->loop[l].end; ki++)
			if (p->k[ki].host) {
				fclose(c.f);
				free(buf);
				free(c.stamp);
						snprintf(err, errlen,
				         "error: task '%s': the CUDA backend does not support host ops "
				         "(linear_sum_assignment) inside a scan yet",
				         p->name ? p->name : "");
				return NULL;
			}
	int polygamma = 0, special = 0, rand = 0;
	for (KxId id = 1; id < p->nx; id++) {
		int pg = p->x[id].op == KX_POLYGAMMA;
		special |= pg && pg_special(p, &p->x[id]) >= 0;
		polygamma |= pg && pg_special(p, &p->x[id]) < 0;
		rand |= p->x[id].op == KX_RAND;
	}
	fprintf(
	    c.f,
	    "// task %s: %u kernels, generated by fadc from the kernel IR (codegen/cuda.c).\n"
	    "// Buffers b<N> are dense and row-major; one thread per output point, grid-stride.\n",
	    p->name ? p->name : "", p->nk);
	if (special) {
		fputs("\n", c.f);
		fputs(cg_cuda_special_text, c.f);
	}
	if (polygamma)
		fputs(polygamma_src, c.f);
	if (rand)
		fputs(rand_src, c.f);
	c.fused = cuda_fused(p);
	if (c.fused) {
		uint8_t *bar = calloc(p->nk + 1, 1);
		c.rot = calloc(p->nk + 1, 1);
		FADC_ASSERT(bar && c.rot, "cuda: out of memory");
		cuda_fused_barriers(p, bar);
		cuda_fused_rotations(p, bar, c.rot);
		free(bar);
	}
	c.inloop = calloc(p->nk + 1, 1);
	La *la = calloc(LA_MAX(p), sizeof *la);
	FADC_ASSERT(c.inloop && la, "cuda: out of memory");
	for (uint32_t l = 0; l < p->nloop; l++)
		for (uint32_t ki = p->loop[l].begin; ki < p->loop[l].end; ki++)
			c.inloop[ki] = 1;
	uint32_t nla = cuda_launch_plan(p, la);
	int persist = 0;
	for (uint32_t i = 0; i < nla; i++)
		persist |= la[i].kind == LA_LOOP;
	if (persist)
		fputs(grid_src, c.f);
	// The tiled contractions' shared partials (print_tile), sized for the
	// largest: one array for the module, not one per kernel, so that a
	// loop of many products stays within the 48 KB of static shared memory.
	int64_t tile_bytes = 0, part_bytes = 0;
	for (uint32_t ki = 0; ki < p->nk; ki++) {
		Tile tl;
		if (c.inloop[ki] && !c.fused && cuda_loop_tile(p, &p->k[ki], &tl)) {
			int64_t es = (int64_t)kir_dtype_size((DType)p->x[p->k[ki].body].dtype);
			int64_t b = FUSED_THREADS / 32 * tl.r * 32 * es;
			if (b > tile_bytes)
				tile_bytes = b;
			if (tl.kc > 1 && tl.kc * tl.rows * tl.cols * es > part_bytes)
				part_bytes = tl.kc * tl.rows * tl.cols * es;
		}
	}
	if (tile_bytes)
		fprintf(c.f,
		        "\n// The tiled contractions' partials (one warp's row of lanes per row).\n"
		        "static __shared__ __align__(16) unsigned char fadc_tile_red[%lld];\n",
		        (long long)tile_bytes);
	if (part_bytes) // one stream runs a task's launches one at a time
		fprintf(c.f,
		        "// The split ones' chunk sums ([chunk][point]).\n"
		        "static __device__ __align__(16) unsigned char fadc_tile_part[%lld];\n",
		        (long long)part_bytes);
	// Host kernels and cuBLAS GEMMs have no CUDA code; a choice's kernel
	// (LA_CHOICE) has both: its GEMM and its own __global__.
	uint8_t *gemm = calloc(p->nk + 1, 1);
	FADC_ASSERT(gemm, "cuda: out of memory");
	for (uint32_t i = 0; i < nla; i++)
		if ((la[i].kind == LA_GEMM && !gemm[la[i].begin]) || la[i].kind == LA_CHOICE)
			gemm[la[i].begin] = (uint8_t)(la[i].kind == LA_GEMM ? GEMM_ONLY : GEMM_CHOICE);
	for (uint32_t i = 0; i < p->nk && !c.bad; i++) {
		KGemmPlan g;
		if (gemm[i] && cuda_gemm_launch(p, i, &g))
			fprintf(c.f,
			        "\n// kernel %u: %s, a cuBLAS GEMM (batch %lld, M %lld, N %lld, K %lld), "
			        "run by the runtime%s\n",
			        i, p->k[i].what ? p->k[i].what : "", (long long)g.batch, (long long)g.M,
			        (long long)g.N, (long long)g.K,
			        gemm[i] == GEMM_CHOICE ? ", or the kernel below: a choice, timed on the GPU"
			                               : ": no code here");
		if (!p->k[i].host && gemm[i] != GEMM_ONLY)
			print_kernel(&c, i);
	}
	free(gemm);
	for (uint32_t i = 0; i < nla && !c.bad; i++)
		if (la[i].kind == LA_FUSED || la[i].kind == LA_LOOP)
			print_group(&c, &la[i]);
	fclose(c.f);
	free(c.stamp);
	free(c.inloop);
	free(c.rot);
	free(la);
	if (c.bad) {
		snprintf(err, errlen, "error: task '%s': the CUDA backend does not support %s yet",
		         p->name ? p->name : "",
		         c.bad < KX_COUNT ? kx_op_name((KxOp)c.bad) : "a kernel-IR op newer than it");
		free(buf);
		return NULL;
	}
	if (len)
		*len = n;
	return buf;
}

// ---------------------------------------------------------------- NVRTC

// A failed compilation's report.  The generated source is fadc's output and
// the usual culprit, but a task's source runs to hundreds of KB: the report
// names NVRTC's error lines with a few lines of context each, and the whole
// source goes to a file the report names, $TMPDIR/fadc-nvrtc-NAME (/tmp
// without TMPDIR).  $TMPDIR rather than the current folder, which may be
// the user's source tree or read-only; a fixed name, so a re-run replaces
// the file rather than piling up copies.  It is written through
// fio_write_file (a temporary renamed over the name): the cubin and PTX
// compilations of one task fail alike and may write it at once.
enum {
	NV_LOG_LINES = 20, // of NVRTC's log, at most
	NV_SITES = 3,      // error lines shown with context, at most
	NV_CONTEXT = 3,    // lines before and after each
};

// Line k (from 1) of src: its start and length; 0 when src is shorter.
static int
src_line(const char *src, long k, const char **start, int *len) {
	const char *s = src;
	for (long i = 1; i < k && s; i++) {
		s = strchr(s, '\n');
		if (s)
			s++;
	}
	if (!s || !*s)
		return 0;
	const char *e = strchr(s, '\n');
	*start = s;
	*len = (int)(e ? e - s : (long)strlen(s));
	return 1;
}

// The lines NVRTC's log blames: "NAME(LINE): error ..." (any line it names
// when none says error), distinct and in log order; how many in line[].
static int
log_sites(const char *log, const char *name, long *line, int max) {
	size_t nl = strlen(name);
	int n = 0;
	for (int pass = 0; pass < 2 && !n; pass++)
		for (const char *s = log; (s = strstr(s, name)) && n < max; s += nl) {
			const char *q = s + nl;
			char *end;
			if (*q != '(' || q[1] < '0' || q[1] > '9')
				continue;
			long k = strtol(q + 1, &end, 10);
			if (*end != ')')
				continue;
			const char *eol = strchr(end, '\n');
			size_t rest = eol ? (size_t)(eol - end) : strlen(end);
			// ": error", ": catastrophic error" (#error); not ": warning"
			const char *err = strstr(end, "error");
			if (pass == 0 && (!err || (size_t)(err - end) > rest))
				continue;
			int seen = 0;
			for (int i = 0; i < n; i++)
				seen |= line[i] == k;
			if (!seen)
				line[n++] = k;
		}
	return n;
}

static void
nvrtc_report(FILE *f, const char *src, const char *name, const char *arch, const char *status,
             const char *log) {
	fprintf(f, "NVRTC: compiling %s for %s failed: %s\n", name, arch, status);
	// The log, at most NV_LOG_LINES of it.
	int nlog = 0;
	const char *s = log;
	while (*s && nlog < NV_LOG_LINES) {
		const char *e = strchr(s, '\n');
		int n = (int)(e ? e - s : (long)strlen(s));
		if (n) {
			fprintf(f, "%.*s\n", n, s);
			nlog++;
		}
		s += n + (e != NULL);
	}
	long more = 0;
	for (; *s; s++)
		more += *s == '\n';
	if (more)
		fprintf(f, "... (%ld more lines of NVRTC's log)\n", more);
	// The blamed lines in context.
	long site[NV_SITES];
	int nsite = log_sites(log, name, site, NV_SITES);
	for (int i = 0; i < nsite; i++) {
		fprintf(f, "%s:%ld:\n", name, site[i]);
		for (long k = site[i] - NV_CONTEXT; k <= site[i] + NV_CONTEXT; k++) {
			const char *ls;
			int len;
			if (k >= 1 && src_line(src, k, &ls, &len))
				fprintf(f, "%c%5ld | %.*s\n", k == site[i] ? '>' : ' ', k, len, ls);
		}
	}
	// The whole source, to a file.
	const char *tmp = getenv("TMPDIR");
	if (!tmp || !*tmp)
		tmp = "/tmp";
	size_t plen = strlen(tmp) + strlen(name) + 16;
	char *path = malloc(plen), ferr[512];
	if (!path) {
		fprintf(f, "(the generated source was not saved: out of memory)\n");
		return;
	}
	int k = snprintf(path, plen, "%s/fadc-nvrtc-", tmp);
	for (const char *c = name; *c; c++) // the name as one file name
		path[k++] = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
		                    (*c >= '0' && *c <= '9') || *c == '.' || *c == '-' || *c == '_'
		                ? *c
		                : '_';
	path[k] = 0;
	size_t srclen = strlen(src);
	if (fio_write_file(path, src, srclen, 0644, ferr, sizeof ferr) == 0)
		fprintf(f, "the whole generated source (%zu bytes): %s\n", srclen, path);
	else
		fprintf(f, "(the generated source was not saved: %s)\n", ferr);
	free(path);
}

// The one checked path for NVRTC calls: the statement, where, and NVRTC's
// message into err, then `goto done`.  CHECK_NVRTC_AS checks a result kept
// in a variable (the compilation's, after its log is read) under the text
// of the call that made it.
#define CHECK_NVRTC_AS(x, text)                                                                    \
	do {                                                                                       \
		nvrtcResult cu_r = (x);                                                            \
		if (cu_r != NVRTC_SUCCESS) {                                                       \
			snprintf(err, errlen, "NVRTC: %s failed in %s (%s:%d): %s", text,          \
			         __func__, __FILE__, __LINE__, nvrtcGetErrorString(cu_r));         \
			goto done;                                                                 \
		}                                                                                  \
	} while (0)
#define CHECK_NVRTC(x) CHECK_NVRTC_AS(x, #x)

int
cg_cuda_compile(const char *src, const char *name, const char *arch, uint8_t **out, size_t *outlen,
                FILE *diag, char *err, size_t errlen) {
	*out = NULL;
	*outlen = 0;
	if (!arch)
		arch = "sm_90";
	int ptx = !strncmp(arch, "compute_", 8);
	if (!ptx && strncmp(arch, "sm_", 3)) {
		snprintf(err, errlen,
		         "error: unknown CUDA architecture '%s' (sm_XX for a cubin, "
		         "compute_XX for PTX)",
		         arch);
		return 0;
	}
	char archopt[64];
	snprintf(archopt, sizeof archopt, "--gpu-architecture=%s", arch);
	const char *opts[] = {archopt, "--fmad=false", "--std=c++17"};
	nvrtcProgram prog = NULL;
	int ok = 0, created = 0;
	char *log = NULL;
	uint8_t *bin = NULL;
	CHECK_NVRTC(nvrtcCreateProgram(&prog, src, name ? name : "fadc.cu", 0, NULL, NULL));
	created = 1;
	nvrtcResult cr = nvrtcCompileProgram(prog, (int)(sizeof opts / sizeof opts[0]), opts);
	size_t loglen = 0;
	CHECK_NVRTC(nvrtcGetProgramLogSize(prog, &loglen));
	log = malloc(loglen + 1);
	if (!log) {
		snprintf(err, errlen, "error: out of memory");
		goto done;
	}
	log[0] = 0;
	if (loglen)
		CHECK_NVRTC(nvrtcGetProgramLog(prog, log));
	if (cr != NVRTC_SUCCESS) {
		FILE *f = diag ? diag : stderr;
		nvrtc_report(f, src, name ? name : "fadc.cu", arch, nvrtcGetErrorString(cr), log);
		fflush(f);
	}
	CHECK_NVRTC_AS(cr, "nvrtcCompileProgram(prog, nopts, opts)");
	size_t n = 0;
	if (ptx)
		CHECK_NVRTC(nvrtcGetPTXSize(prog, &n));
	else
		CHECK_NVRTC(nvrtcGetCUBINSize(prog, &n));
	bin = malloc(n + 1);
	if (!bin) {
		snprintf(err, errlen, "error: out of memory");
		goto done;
	}
	if (ptx)
		CHECK_NVRTC(nvrtcGetPTX(prog, (char *)bin));
	else
		CHECK_NVRTC(nvrtcGetCUBIN(prog, (char *)bin));
	*out = bin;
	*outlen = ptx && n ? n - 1 : n; // PTX: without its terminating NUL
	bin = NULL;
	ok = 1;
done:
	free(bin);
	free(log);
	if (created)
		nvrtcDestroyProgram(&prog);
	return ok;
}

int
cg_cuda_nvrtc_version(int *major, int *minor) {
	return nvrtcVersion(major, minor) == NVRTC_SUCCESS;
}
