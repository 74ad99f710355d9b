// codegen/cuda.c -- the CUDA backend's printer: kernel IR to CUDA C
// (cg_cuda_print), each task run as the scheduler (cuda_sched.c) decides:
// fused or not, each kernel's form, the barriers.  It needs nothing of the
// CUDA toolkit, so it builds and its tests run on every machine; NVRTC
// compiles what it prints (cuda_nvrtc.c).
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
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_mma.h"
#include "cuda_sched.h"

// ---------------------------------------------------------------- printer state

typedef struct Cu {
	FILE *f;
	const KProgram *p;
	int fused;               // kernels are __device__ functions of one fused kernel
	uint8_t *inloop;         // inloop[ki]: kernel ki runs inside a loop (scan)
	uint32_t *stamp, region; // memo: x<id> is defined in the current region
	uint32_t *lazy;          // lazy[id] == region + 1: load id is read inline by a select (lazy_load)
	int depth;               // indentation (tabs)
	int bad;                 // an op the printer does not support (the first)
	int var32;               // the kernel's variables (t, r, i<d>) are int (index32)
	int ictx;                // printing the operands of an index op: 1 narrow, 2 wide
	uint8_t *rot;            // fused: rot[ki], kernel ki's warp rotation (cuda_fused_rotations)
	uint32_t *alias;         // sharing: alias[ki], the kernel whose function ki calls; else NULL
	uint8_t *galias;         // sharing: galias[i], multi launch i runs an earlier one's function
	struct Cuts *cuts;       // cg_cuda_print_parts: where each part starts; else NULL
	const char *acc;         // red_combine's accumulator (NULL: "acc")
	const uint8_t *vload;    // print_vec4: loads read as float4 (x<nx + id>: a name the sharing key renumbers), else NULL
	int vlane;               // print_vec4: the point (lane x y z w) being printed
	const KxId *res;         // print_tile: loads read from the resident slot (nres), else NULL
	int nres;
	const char *rbase;       // print_tile: the first term of the unit's slot ("0", "kc * 512LL")
	const KxId *stage;       // print_tile: rows' loads read from the staged rows (nstage)
	int nstage;
	int64_t srow, skt;       // print_tile: the row being printed; terms a staged row holds
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

static void print_op(Cu *c, KxId id);

// Prints a reference to expression id: a literal for leaves, else x<id>
// (a lazy load: the load itself, in parentheses).
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
	case KX_LOAD:
	case KX_CMP:
		if (c->lazy[id] == c->region + 1 && c->stamp[id] != c->region) { // lazy_load
			fputc('(', c->f);
			print_op(c, id);
			fputc(')', c->f);
			return;
		}
		fprintf(c->f, "x%u", id);
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
		if (c->lazy[b] == c->region + 1 && c->stamp[b] != c->region)
			binop(c, a, "&&", b); // b's load only where a holds (lazy_cmp)
		else if (c->lazy[a] == c->region + 1 && c->stamp[a] != c->region)
			binop(c, b, "&&", a);
		else
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

// A select's operand that is a load not yet defined in this region is read
// inside the select (`m ? (float)b3[x7] : 0`) instead of before it, so the
// load is predicated on the condition: max_pool's gradient reads the
// argmax and the pooled gradient of all 9 windows around each of the
// stem's 25.7 M points, of which ~2.25 pass the stride test (260 us on the
// H200, 12 bytes a window).  The index is computed before, as a load's
// always is (clamped where it could leave the buffer, so reading it or not
// changes nothing but the traffic).  Not for the loads other forms read
// from elsewhere (float4 lanes, resident or staged slots).
static int
lazy_load(const Cu *c, KxId id) {
	if (c->p->x[id].op != KX_LOAD || c->stamp[id] == c->region || (c->vload && c->vload[id]))
		return 0;
	for (int j = 0; j < c->nstage; j++)
		if (c->stage[j] == id)
			return 0;
	for (int j = 0; j < c->nres; j++)
		if (c->res[j] == id)
			return 0;
	return 1;
}

// A comparison of a lazy load with an expression that is not one, not yet
// defined in this region, whose load reads nothing else's load: printed
// inside a bool AND as `other && (load == e)`, so that the load happens
// only where the other side holds (max_pool's gradient: a window's argmax
// is read only where the window covers the point; lazy_load's reasons).
// Not KC_UNO (its operands are read twice).
static int
lazy_cmp(const Cu *c, KxId id) {
	const Kx *x = &c->p->x[id];
	if (x->op != KX_CMP || x->aux == KC_UNO || c->stamp[id] == c->region)
		return 0;
	int la = lazy_load(c, x->a[0]), lb = lazy_load(c, x->a[1]);
	return la != lb;
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
	for (int j = 0; x->op == KX_LOAD && j < c->nstage; j++)
		if (c->stage[j] == id) { // staged: this row's copy in shared memory (print_tile)
			indent(c);
			fprintf(c->f, "const %s x%u = fadc_h%d[%lldLL + (r - %s)];\n", cty((DType)x->dtype),
			        id, j, (long long)(c->srow * c->skt), c->rbase);
			return;
		}
	for (int j = 0; x->op == KX_LOAD && j < c->nres; j++)
		if (c->res[j] == id) { // resident: its slot in shared memory (print_tile)
			indent(c);
			fprintf(c->f, "const %s x%u = fadc_w%d[(r - %s) * 32 + lane];\n", cty((DType)x->dtype),
			        id, j, c->rbase);
			return;
		}
	if (x->op == KX_LOAD && c->vload && c->vload[id]) { // a lane of its float4 (print_vec4)
		indent(c);
		fprintf(c->f, "const float x%u = x%u.%c;\n", id, c->p->nx + id, "xyzw"[c->vlane & 3]);
		return;
	}
	if (x->op == KX_AND && x->dtype == DT_BOOL && (lazy_cmp(c, x->a[0]) || lazy_cmp(c, x->a[1]))) {
		// One side compares a load (the argmax of a window): it is read
		// only where the other side holds (&&; lazy_cmp).
		int l = lazy_cmp(c, x->a[1]) ? 1 : 0;
		const Kx *cm = &c->p->x[x->a[l]];
		int ld = c->p->x[cm->a[0]].op == KX_LOAD ? 0 : 1;
		ensure(c, x->a[1 - l]);
		ensure(c, cm->a[1 - ld]);
		ensure(c, c->p->x[cm->a[ld]].a[0]); // the load's index
		c->lazy[cm->a[ld]] = c->region + 1;
		c->lazy[x->a[l]] = c->region + 1;
	} else if (x->op == KX_SELECT) {
		ensure(c, x->a[0]);
		for (int i = 1; i < 3; i++)
			if (lazy_load(c, x->a[i])) {
				ensure(c, c->p->x[x->a[i]].a[0]); // its index only
				c->lazy[x->a[i]] = c->region + 1;
			} else
				ensure(c, x->a[i]);
	} else
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
	const char *a = c->acc ? c->acc : "acc";
	indent(c);
	if (r == KR_SUM) {
		fprintf(f, "%s = %s + ", a, a);
		ref(c, v);
	} else if (!isflt(dt)) {
		fprintf(f, "%s = ", a);
		ref(c, v);
		fprintf(f, r == KR_MAX ? " > %s ? " : " < %s ? ", a);
		ref(c, v);
		fprintf(f, " : %s", a);
	} else {
		fprintf(f, "if (%s == %s && !(", a, a);
		ref(c, v);
		fprintf(f, r == KR_MAX ? " <= %s)) %s = " : " >= %s)) %s = ", a, a);
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

// Whether kernel ki is a tile with resident loads (print_tile): its
// function takes fadc_fill.
static int
res_tile(Cu *c, uint32_t ki) {
	Tile tl;
	return c->inloop[ki] && !c->fused && cuda_loop_tile(c->p, &c->p->k[ki], &tl) && tl.nres;
}

// A call of kernel ki's device function (an equal kernel's, for shared
// kernels) inside a group: its buffers, the run seed, then each step
// counter it reads (s<l>, or 0 where `steps` is 0: the fills, whose
// resident loads do not read them), then `tail`.
static void
print_call(Cu *c, uint32_t ki, int steps, const char *tail) {
	const KProgram *p = c->p;
	FILE *f = c->f;
	CgCudaKernel k;
	FADC_ASSERT(cuda_kernel_contract(p, ki, &k), "cuda: out of memory");
	Uses u = {0};
	cuda_kernel_uses(p, &p->k[ki], &u);
	if (c->alias && c->alias[ki] != ki)
		cuda_kernel_name(f, p->name, c->alias[ki], p->k[c->alias[ki]].what);
	else
		fputs(k.name, f);
	fputc('(', f);
	for (uint32_t j = 0; j < k.narg; j++)
		fprintf(f, "%sb%u", j ? ", " : "", k.buf[j]);
	fprintf(f, "%s", k.runseed ? ", runseed" : "");
	for (uint32_t l = 0; l < p->nloop; l++)
		if (u.step[l])
			steps ? fprintf(f, ", s%u", l) : fputs(", 0", f);
	fputs(tail, f);
	free(u.seen);
	free(u.buf);
	free(u.step);
	free(k.name);
	free(k.buf);
}

// The resident tiles' fills (print_tile), before the loops of persistent
// kernel a: each resident tile's function called once with fadc_fill 1
// (its step counters 0: resident loads do not read them), then a block
// barrier, since a block's threads fill what all its threads read.
static void
print_fills(Cu *c, const La *a) {
	FILE *f = c->f;
	int any = 0;
	for (uint32_t ki = a->begin; ki < a->end; ki++) {
		if (!res_tile(c, ki))
			continue;
		fputc('\t', f);
		print_call(c, ki, 0, ", 1);\n");
		any = 1;
	}
	if (any)
		fputs("\t__syncthreads(); // the resident loads in shared memory\n", f);
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
		for (int d = 0; d < depth; d++)
			fputc('\t', f);
		print_call(c, ki, 1, res_tile(c, ki) ? ", 0);\n" : ");\n");
		if (after ? after[ki] : ki + 1 < a->end || depth > 1) {
			for (int d = 0; d < depth; d++)
				fputc('\t', f);
			fprintf(f, "%s;\n", bar);
		}
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

// The __global__ of sibling partial sums (LA_MULTI, cuda_multi_end): a
// thread per point, one loop nest over the terms in which each kernel's
// term folds into its own accumulator acc<m> (the terms in one region, so
// a load they share is printed once), then each kernel's post and store
// in a scope of its own where `acc` is its accumulator.
static void print_point_vars(Cu *c, const KKernel *k, const Uses *u, const char *it,
                             const char *ll);
static void print_blockred(Cu *c, const KKernel *const *ks, uint32_t nk, uint32_t ne,
                           const Uses *u, const BRed *b);
static void print_store_val(Cu *c, const KKernel *k, KxId val);
static void print_epilogues(Cu *c, const KKernel *const *ks, uint32_t nk, uint32_t ne,
                            const char *guard);

static void
print_multi(Cu *c, const La *a) {
	const KProgram *p = c->p;
	FILE *f = c->f;
	const KKernel *k0 = &p->k[a->begin];
	CgCudaKernel ct;
	FADC_ASSERT(cuda_multi_contract(p, a, &ct), "cuda: out of memory");
	uint32_t nall = a->end - a->begin, nk = cuda_multi_sums(p, a), ne = nall - nk;
	int64_t npt = kir_kernel_points(k0), nred = kir_kernel_terms(k0);
	fprintf(f, "\n// kernels %u .. %u: %s, %lld points, %u sums in one pass", a->begin,
	        a->end - 1, k0->what ? k0->what : "", (long long)npt, nk);
	if (ne)
		fprintf(f, " and %u elementwise after them", ne);
	fputs(", writes", f);
	for (uint32_t ki = a->begin; ki < a->end; ki++)
		fprintf(f, " b%u", p->k[ki].out);
	fputs("; args:", f);
	for (uint32_t j = 0; j < ct.narg; j++)
		fprintf(f, " b%u", ct.buf[j]);
	fprintf(f, "%s\nextern \"C\" __global__ void\n%s(", ct.runseed ? " runseed" : "", ct.name);
	for (uint32_t j = 0; j < ct.narg; j++) {
		uint32_t b = ct.buf[j];
		fprintf(f, "%s%s%s *__restrict__ b%u", j ? ", " : "", j < nall ? "" : "const ",
		        csty(p->buf[b].dtype), b);
	}
	fputs(ct.runseed ? ", unsigned long long runseed)\n{\n" : ")\n{\n", f);
	Uses uu = {0}; // the variables any of them reads
	for (uint32_t ki = a->begin; ki < a->end; ki++) {
		Uses u = {0};
		cuda_kernel_uses(p, &p->k[ki], &u);
		for (int v = 0; v < 2 * IR_MAXDIM; v++)
			uu.var[v] |= u.var[v];
		free(u.seen);
		free(u.buf);
		free(u.step);
	}
	BRed bp;
	if (cuda_multi_plan(p, a, &bp)) { // the splits' second kernels: one block reduction
		const KKernel *ks[16];
		FADC_ASSERT(nall <= sizeof ks / sizeof *ks, "cuda: too many kernels in one launch");
		for (uint32_t m = 0; m < nall; m++)
			ks[m] = &p->k[a->begin + m];
		print_blockred(c, ks, nk, ne, &uu, &bp);
		free(ct.name);
		free(ct.buf);
		return;
	}
	c->var32 = npt < ((int64_t)1 << 30) && nred < ((int64_t)1 << 30);
	const char *it = c->var32 ? "int" : "long long", *ll = c->var32 ? "" : "LL";
	fprintf(f,
	        "\tfor (%s t = (%s)blockIdx.x * blockDim.x + threadIdx.x; t < %lld%s;\n"
	        "\t     t += (%s)blockDim.x * gridDim.x) {\n",
	        it, it, (long long)npt, ll, it);
	c->depth = 2;
	print_point_vars(c, k0, &uu, it, ll);
	DType vt = (DType)p->x[k0->body].dtype;
	for (uint32_t m = 0; m < nk; m++) {
		indent(c);
		fprintf(f, "%s acc%u = ", cty(vt), m);
		red_init(c, KR_SUM, vt);
		fputs(";\n", f);
	}
	for (int d = 0; d < k0->rrank; d++) {
		int v = k0->rank + d;
		indent(c);
		fprintf(f, "for (%s i%d = 0; i%d < %lld%s; i%d++) {\n", it, v, v, (long long)k0->rdim[d],
		        ll, v);
		c->depth++;
	}
	if (!k0->rrank) {
		indent(c);
		fputs("{\n", f);
		c->depth++;
	}
	c->region++;
	char an[16];
	for (uint32_t m = 0; m < nk; m++)
		ensure(c, p->k[a->begin + m].body);
	for (uint32_t m = 0; m < nk; m++) {
		snprintf(an, sizeof an, "acc%u", m);
		c->acc = an;
		red_combine(c, KR_SUM, vt, p->k[a->begin + m].body);
		c->acc = NULL;
	}
	for (int d = 0; d < (k0->rrank ? k0->rrank : 1); d++) {
		c->depth--;
		indent(c);
		fputs("}\n", f);
	}
	for (uint32_t m = 0; m < nk; m++) {
		const KKernel *k = &p->k[a->begin + m];
		DType st = p->buf[k->out].dtype;
		indent(c);
		fprintf(f, "{\n");
		c->depth++;
		indent(c);
		fprintf(f, "const %s acc = acc%u;\n", cty(vt), m);
		c->region++;
		ensure(c, k->post);
		ensure(c, k->index);
		indent(c);
		fprintf(f, "b%u[", k->out);
		ref(c, k->index);
		fputs("] = ", f);
		if (st == DT_BOOL) {
			fputs("(unsigned char)", f);
			ref(c, k->post);
		} else
			convert(c, k->post, (DType)p->x[k->post].dtype, st, 0);
		fputs(";\n", f);
		c->depth--;
		indent(c);
		fputs("}\n", f);
	}
	const KKernel *ke[16];
	FADC_ASSERT(nall <= sizeof ke / sizeof *ke, "cuda: too many kernels in one launch");
	for (uint32_t m = 0; m < nall; m++)
		ke[m] = &p->k[a->begin + m];
	print_epilogues(c, ke, nk, ne, NULL);
	fputs("\t}\n}\n", f);
	free(ct.name);
	free(ct.buf);
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
	// A persistent kernel with resident tiles: the dynamic shared memory
	// its slots need, in a word the runtime reads (<kernel>_dsmem,
	// runtime/cuda.c) to launch it with that much and no more blocks than
	// fit at once with it.
	int64_t dsm = 0;
	for (uint32_t ki = a->begin; !fusedk && ki < a->end; ki++) {
		Tile tl;
		if (res_tile(c, ki) && cuda_loop_tile(p, &p->k[ki], &tl) &&
		    tl.res_off + tl.res_bytes + tl.stage_bytes > dsm)
			dsm = tl.res_off + tl.res_bytes + tl.stage_bytes;
	}
	if (dsm)
		fprintf(f, "\n// dynamic shared memory of the resident tiles of %s\n"
		           "extern \"C\" __device__ unsigned int %s_dsmem = %lldU;\n",
		        all.name, all.name, (long long)dsm);
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
	} else if (all.grid == 1) {
		print_fills(c, a);
		print_calls(c, a, "__syncthreads()", NULL);
	} else {
		fputs("\tconst unsigned int nb = fadc_nb();\n"
		      "\tif (blockIdx.x >= nb)\n"
		      "\t\treturn; // not resident with the others: no share of the work\n",
		      f);
		print_fills(c, a);
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

// A block's fold of every thread's acc into lane 0 of warp 0: each warp
// folds its 32 lanes into its lane 0 (print_warp_fold), the warps' results
// meet in shared memory (red[rb][w], at most 32 warps), and warp 0 folds
// them the same way, lanes past the block's warps holding the identity.
// It leaves `if (threadIdx.x < 32) {` open at depth + 1: the caller prints
// what warp 0 does with the result, closes the block and flips rb (red's
// two sets used in turn, so the next point's writes need no barrier after
// this point's reads).
static void
print_block_fold(Cu *c, KRed r, DType vt) {
	FILE *f = c->f;
	print_warp_fold(c, r, vt);
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
	red_init(c, r, vt);
	fputs(";\n", f);
	print_warp_fold(c, r, vt);
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

static void print_term_vars(Cu *c, const KKernel *k, const Uses *u, const char *it,
                            const char *ll);

// The term loop of a tile (print_tile): warp w's terms w, w + 8, ... of
// the unit's chunk, each term printed once per row into acc<r>.
static void
print_tile_terms(Cu *c, const KKernel *k, const Uses *u, const Tile *tl) {
	FILE *f = c->f;
	DType vt = (DType)c->p->x[k->body].dtype;
	int nw = FUSED_THREADS / 32;
	int64_t nr = kir_kernel_terms(k), R = tl->r;
	int rguard = tl->rows % R != 0, cguard = tl->cols % 32 != 0;
	indent(c);
	if (tl->kc > 1) {
		fprintf(f, "const long long rend = kc * %lldLL + %lldLL < %lldLL ? kc * %lldLL + %lldLL : %lldLL;\n",
		        (long long)tl->kterms, (long long)tl->kterms, (long long)nr,
		        (long long)tl->kterms, (long long)tl->kterms, (long long)nr);
		indent(c);
		if (c->nres) // every operand in shared memory: four terms' loads in flight
			fputs("#pragma unroll 4\n", f), indent(c);
		fprintf(f, "for (long long r = kc * %lldLL + warp; r < rend; r += %d) {\n",
		        (long long)tl->kterms, nw);
	} else {
		if (c->nres)
			fputs("#pragma unroll 4\n", f), indent(c);
		fprintf(f, "for (long long r = warp; r < %lldLL; r += %d) {\n", (long long)nr, nw);
	}
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
		c->srow = r; // row0 is 0 where rows are staged (a resident tile has them all)
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
}

// The body of a tiled contraction (cuda_loop_tile): tiles grid-stride over the
// blocks that take part; thread (warp w, lane l) of a tile with rows
// row0 .. row0 + R - 1 and columns col0 .. col0 + 31 keeps acc<r> for
// point (row0 + r, col0 + l) over terms w, w + 8, ...; then the warps'
// partials meet in shared memory (red[w][r][l]) and warp w sums rows w,
// w + 8, ... in warp order, applies the post and stores.  A resident tile
// (tl->nres) also has its fill (fadc_fill: the slot, once a launch) and,
// when the launch gave it the room, a term loop that reads the slot and
// the staged rows instead of global memory.
static void
print_tile(Cu *c, const KKernel *k, const Uses *u, const Tile *tl) {
	const KProgram *p = c->p;
	FILE *f = c->f;
	DType vt = (DType)p->x[k->body].dtype, st = p->buf[k->out].dtype;
	int nw = FUSED_THREADS / 32;
	int64_t nr = kir_kernel_terms(k), R = tl->r;
	int cguard = tl->cols % 32 != 0;
	c->var32 = 0; // t, r, i<d>, col, row0 are printed long long here
	// red[] is the module's one fadc_tile_red (cg_cuda_print): the tiled
	// kernels of a block run one after another, and each ends on a
	// barrier after its last read of it.
	fprintf(f, "\t%s (*const red)[%lld][32] = (%s (*)[%lld][32])fadc_tile_red;\n", cty(vt),
	        (long long)R, cty(vt), (long long)R);
	fputs("\tconst unsigned int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;\n", f);
	KxId res[TILE_RES_MAX], stage[TILE_RES_MAX];
	char rbase[64];
	snprintf(rbase, sizeof rbase, "kc * %lldLL", (long long)tl->kterms);
	if (tl->nres) {
		// Resident loads (cuda_sched.c, TILE_RES_*): load j of unit u at
		// fadc_w<j>[term - the unit's first][lane], in this launch's
		// dynamic shared memory when it has room and a block per unit
		// (then unit u is block u's, every step).  fadc_fill: called once
		// by the persistent kernel before its loops, to fill the slot.
		FADC_ASSERT(cuda_tile_res_loads(p, k, res) == tl->nres, "cuda: resident loads changed");
		fprintf(f, "\tconst bool res = fadc_nb() >= %lldU && fadc_dsm_bytes() >= %lldU;\n",
		        (long long)tl->units,
		        (long long)(tl->res_off + tl->res_bytes + tl->stage_bytes));
		int64_t off = tl->res_off;
		for (int j = 0; j < tl->nres; j++) {
			const char *ty = cty((DType)p->x[res[j]].dtype);
			fprintf(f, "\t%s *const fadc_w%d = (%s *)(fadc_dsm + %lld);\n", ty, j, ty, (long long)off);
			off += 32 * tl->kterms * (int64_t)kir_dtype_size((DType)p->x[res[j]].dtype);
		}
		FADC_ASSERT(!tl->nstage || cuda_tile_stage_loads(p, k, stage) == tl->nstage,
		            "cuda: staged loads changed");
		for (int j = 0; j < tl->nstage; j++) {
			const char *ty = cty((DType)p->x[stage[j]].dtype);
			fprintf(f, "\t%s *const fadc_h%d = (%s *)(fadc_dsm + %lld);\n", ty, j, ty, (long long)off);
			off += tl->rows * tl->kterms * (int64_t)kir_dtype_size((DType)p->x[stage[j]].dtype);
		}
		fputs("\tif (fadc_fill) {\n\t\tif (!res || blockIdx.x >= ", f);
		fprintf(f, "%lldU)\n\t\t\treturn;\n", (long long)tl->units);
		fprintf(f, "\t\tconst long long u = blockIdx.x, tile = u %% %lldLL", (long long)tl->ntiles);
		if (tl->kc > 1)
			fprintf(f, ", kc = u / %lldLL", (long long)tl->ntiles);
		fputs(";\n", f);
		fprintf(f, "\t\tfor (long long e = threadIdx.x; e < %lldLL; e += %d) {\n",
		        (long long)(32 * tl->kterms), FUSED_THREADS);
		fprintf(f, "\t\t\tconst long long r = %s + e / 32, col = tile %% %lldLL * 32 + e %% 32;\n",
		        tl->kc > 1 ? rbase : "0", (long long)tl->ctiles);
		fprintf(f, "\t\t\tif (r >= %lldLL || col >= %lldLL)\n\t\t\t\tcontinue;\n",
		        (long long)nr, (long long)tl->cols);
		c->depth = 3;
		indent(c);
		fputs("const long long t = col; // row 0: these loads do not depend on the row\n", f);
		print_point_vars(c, k, u, "long long", "LL");
		print_term_vars(c, k, u, "long long", "LL");
		c->region++;
		for (int j = 0; j < tl->nres; j++) {
			ensure(c, res[j]);
			indent(c);
			fprintf(f, "fadc_w%d[e] = x%u;\n", j, res[j]);
		}
		fputs("\t\t}\n\t\treturn;\n\t}\n", f);
	}
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
	if (tl->nres) {
		// The slot (the resident form) when this launch gave it room and a
		// block per unit, else the same terms from global memory.
		indent(c);
		fputs("if (res) {\n", f);
		c->depth++;
		c->rbase = tl->kc > 1 ? rbase : "0";
		if (tl->nstage) {
			// This step's rows of the unit's terms, copied in by the whole
			// block (consecutive threads, consecutive terms), then a
			// barrier; the previous call's readers passed the barrier
			// that ended it.
			indent(c);
			fprintf(f, "for (long long e = threadIdx.x; e < %lldLL; e += %d) {\n",
			        (long long)(tl->rows * tl->kterms), FUSED_THREADS);
			c->depth++;
			indent(c);
			fprintf(f, "const long long r = %s + e %% %lldLL, t = e / %lldLL * %lldLL; // column 0\n",
			        c->rbase, (long long)tl->kterms, (long long)tl->kterms, (long long)tl->cols);
			indent(c);
			fprintf(f, "if (r >= %lldLL)\n", (long long)nr);
			c->depth++;
			indent(c);
			fputs("continue;\n", f);
			c->depth--;
			print_point_vars(c, k, u, "long long", "LL");
			print_term_vars(c, k, u, "long long", "LL");
			c->region++;
			for (int j = 0; j < tl->nstage; j++) {
				ensure(c, stage[j]);
				indent(c);
				fprintf(f, "fadc_h%d[e] = x%u;\n", j, stage[j]);
			}
			c->depth--;
			indent(c);
			fputs("}\n", f);
			indent(c);
			fputs("__syncthreads(); // the rows staged\n", f);
		}
		c->res = res;
		c->nres = tl->nres;
		c->stage = stage;
		c->nstage = tl->nstage;
		c->skt = tl->kterms;
		print_tile_terms(c, k, u, tl);
		c->res = NULL;
		c->nres = 0;
		c->stage = NULL;
		c->nstage = 0;
		c->depth--;
		indent(c);
		fputs("} else {\n", f);
		c->depth++;
		print_tile_terms(c, k, u, tl);
		c->depth--;
		indent(c);
		fputs("}\n", f);
	} else
		print_tile_terms(c, k, u, tl);
	for (int64_t r = 0; r < R; r++) {
		indent(c);
		fprintf(f, "red[warp][%lld][lane] = acc%lld;\n", (long long)r, (long long)r);
	}
	indent(c);
	fputs("__syncthreads();\n", f);
	indent(c);
	// Warp w sums rows w, w + 8, ... (a resident tile may have up to 16):
	// inside the loop `warp` names the row.
	if (R > nw) {
		fprintf(f, "for (unsigned int rw = warp; rw < %lldU; rw += %d) {\n", (long long)R, nw);
		c->depth++;
		indent(c);
		fputs("const unsigned int warp = rw; // the row of the tile this warp sums\n", f);
		indent(c);
	}
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
		if (R > nw) {
			c->depth--;
			indent(c);
			fputs("}\n", f);
		}
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
	if (R > nw) {
		c->depth--;
		indent(c);
		fputs("}\n", f);
	}
	indent(c);
	fputs("__syncthreads(); // red[] is written again by the next tile\n", f);
	fputs("\t}\n}\n", f);
}

// The 4-lane forms' head (print_vec4, print_vec4_red): the grid-stride loop
// over q (points 4q .. 4q + 3), t = 4q and the point variables at the first
// point (i<last> a multiple of 4), i<last>b that first point's i<last>.
static void
print_vec4_head(Cu *c, const KKernel *k, const Uses *u) {
	FILE *f = c->f;
	int last = k->rank - 1;
	fprintf(f,
	        "\t\tfor (int q = (int)blockIdx.x * blockDim.x + threadIdx.x; q < %lld;\n"
	        "\t\t     q += (int)blockDim.x * gridDim.x) {\n",
	        (long long)(kir_kernel_points(k) / 4));
	c->depth = 3;
	indent(c);
	fputs("const int t = q * 4;\n", f);
	// The point variables at the first point (i<last> a multiple of 4).
	print_point_vars(c, k, u, "int", "");
	if (!u->var[last] || k->dim[last] <= 1) { // the last variable unread: name it anyway
		indent(c);
		fprintf(f, "const int i%d = 0;\n", last);
	}
	indent(c);
	fprintf(f, "const int i%db = i%d;\n", last, last);
}

// An elementwise kernel's 16-byte form (cuda_vec4 says when and why):
// when every pointer read or written as float4 is 16-byte aligned, thread
// q takes points 4q .. 4q + 3 (grid-stride), loads each marked operand as
// one float4 at the first point's index, evaluates the body once per
// point (lane j: the last variable i<last> + j, the marked loads' lane j),
// and stores the four as one float4; then returns.  Otherwise the
// kernel's usual one-point loop below runs.
static void
print_vec4(Cu *c, const KKernel *k, const Uses *u, const uint8_t *vload) {
	const KProgram *p = c->p;
	FILE *f = c->f;
	int last = k->rank - 1;
	c->var32 = 1; // cuda_vec4: fewer than 2^30 points
	fprintf(f, "\tif (((unsigned long long)b%u", k->out);
	for (KxId id = 1; id < p->nx; id++)
		if (vload[id] && u->seen[id])
			fprintf(f, " | (unsigned long long)b%u", p->x[id].aux);
	fputs(") % 16 == 0) {\n", f);
	print_vec4_head(c, k, u);
	c->region++;
	for (KxId id = 1; id < p->nx; id++)
		if (vload[id] && u->seen[id]) {
			ensure(c, p->x[id].a[0]);
			indent(c);
			fprintf(f, "const float4 x%u = *(const float4 *)&b%u[", p->nx + id, p->x[id].aux);
			ref(c, p->x[id].a[0]);
			fputs("];\n", f);
		}
	indent(c);
	fputs("float4 o;\n", f);
	c->vload = vload;
	for (int j = 0; j < 4; j++) {
		indent(c);
		fputs("{\n", f);
		c->depth++;
		indent(c);
		fprintf(f, "const int i%d = i%db + %d;\n", last, last, j);
		c->vlane = j;
		c->region++;
		ensure(c, k->body);
		indent(c);
		fprintf(f, "o.%c = ", "xyzw"[j]);
		convert(c, k->body, (DType)p->x[k->body].dtype, DT_F32, 0);
		fputs(";\n", f);
		c->depth--;
		indent(c);
		fputs("}\n", f);
	}
	c->vload = NULL;
	indent(c);
	fprintf(f, "*(float4 *)&b%u[t] = o;\n", k->out);
	fputs("\t\t}\n\t\treturn;\n\t}\n", f);
	c->region++;
}

// A short reduction's 4-lane form (cuda_vec4_red says when and why): thread
// q takes points 4q .. 4q + 3 (grid-stride), runs the term loops once with
// lane j's body (the last variable i<last> + j) folded into acc<j>, then
// each lane's post: an f32 output's four in one float4 store when it is
// 16-byte aligned (otherwise the usual one-point loop below runs), another
// type's (max_pool's argmax: i64) in four stores; then returns.
static void
print_vec4_red(Cu *c, const KKernel *k, const Uses *u) {
	const KProgram *p = c->p;
	FILE *f = c->f;
	int last = k->rank - 1;
	DType vt = (DType)p->x[k->body].dtype, st = p->buf[k->out].dtype;
	int f4 = st == DT_F32; // else four stores of their own (max_pool's argmax: i64)
	c->var32 = 1; // cuda_vec4_red: fewer than 2^30 points, at most 16 terms
	if (f4)
		fprintf(f, "\tif ((unsigned long long)b%u %% 16 == 0) {\n", k->out);
	else
		fputs("\t{\n", f);
	print_vec4_head(c, k, u);
	for (int j = 0; j < 4; j++) {
		indent(c);
		fprintf(f, "%s acc%d = ", cty(vt), j);
		red_init(c, k->red, vt);
		fputs(";\n", f);
	}
	for (int d = 0; d < k->rrank; d++) {
		int v = k->rank + d;
		indent(c);
		fprintf(f, "for (int i%d = 0; i%d < %lld; i%d++) {\n", v, v, (long long)k->rdim[d], v);
		c->depth++;
	}
	char an[8];
	for (int j = 0; j < 4; j++) {
		indent(c);
		fputs("{\n", f);
		c->depth++;
		indent(c);
		fprintf(f, "const int i%d = i%db + %d;\n", last, last, j);
		c->region++;
		ensure(c, k->body);
		snprintf(an, sizeof an, "acc%d", j);
		c->acc = an;
		red_combine(c, k->red, vt, k->body);
		c->acc = NULL;
		c->depth--;
		indent(c);
		fputs("}\n", f);
	}
	for (int d = 0; d < k->rrank; d++) {
		c->depth--;
		indent(c);
		fputs("}\n", f);
	}
	if (f4) {
		indent(c);
		fputs("float4 o;\n", f);
	}
	for (int j = 0; j < 4; j++) {
		indent(c);
		fputs("{\n", f);
		c->depth++;
		indent(c);
		fprintf(f, "const int i%d = i%db + %d;\n", last, last, j);
		indent(c);
		fprintf(f, "const %s acc = acc%d;\n", cty(vt), j);
		c->region++;
		ensure(c, k->post);
		indent(c);
		if (f4)
			fprintf(f, "o.%c = ", "xyzw"[j]);
		else
			fprintf(f, "b%u[t + %d] = ", k->out, j);
		convert(c, k->post, (DType)p->x[k->post].dtype, st, 0);
		fputs(";\n", f);
		c->depth--;
		indent(c);
		fputs("}\n", f);
	}
	if (f4) {
		indent(c);
		fprintf(f, "*(float4 *)&b%u[t] = o;\n", k->out);
	}
	fputs("\t\t}\n\t\treturn;\n\t}\n", f);
	c->region++;
}

// The reduction variables i<v> of flat term r (row-major over the
// reduction domain), those the kernel reads.
static void
print_term_vars(Cu *c, const KKernel *k, const Uses *u, const char *it, const char *ll) {
	int64_t rs = 1;
	for (int d = k->rrank - 1; d >= 0; d--) {
		int v = k->rank + d;
		if (v < 2 * IR_MAXDIM && u->var[v]) {
			indent(c);
			fprintf(c->f, "const %s i%d = r / %lld%s %% %lld%s;\n", it, v, (long long)rs, ll,
			        (long long)k->rdim[d], ll);
		}
		rs *= k->rdim[d];
	}
}

// One term r = r0 + off folded into accumulator `a`, in a scope of its own
// (its values are defined again in each).
static void
print_term(Cu *c, const KKernel *k, const Uses *u, const char *it, const char *ll, int64_t off,
           const char *a, const uint8_t *vl) {
	const KProgram *p = c->p;
	FILE *f = c->f;
	indent(c);
	fputs("{\n", f);
	c->depth++;
	indent(c);
	fprintf(f, "const %s r = r0 + %lld%s;\n", it, (long long)off, ll);
	print_term_vars(c, k, u, it, ll);
	c->region++;
	if (!vl) {
		ensure(c, k->body);
		c->acc = a;
		red_combine(c, k->red, (DType)p->x[k->body].dtype, k->body);
		c->acc = NULL;
	} else {
		// Terms r .. r + 3: the innermost reduction variable (a multiple
		// of 4 here) + j in lane j; the marked loads once, as float4s at r.
		int v = k->rank + k->rrank - 1;
		indent(c);
		fprintf(f, "const %s i%db = i%d;\n", it, v, v);
		for (KxId id = 1; id < p->nx; id++)
			if (vl[id]) {
				ensure(c, p->x[id].a[0]);
				indent(c);
				fprintf(f, "const float4 x%u = *(const float4 *)&b%u[", p->nx + id, p->x[id].aux);
				ref(c, p->x[id].a[0]);
				fputs("];\n", f);
			}
		c->vload = vl;
		for (int j = 0; j < 4; j++) {
			indent(c);
			fputs("{\n", f);
			c->depth++;
			indent(c);
			fprintf(f, "const %s i%d = i%db + %d;\n", it, v, v, j);
			c->vlane = j;
			c->region++;
			ensure(c, k->body);
			static const char *const an[] = {"a0", "a1", "a2", "a3"};
			c->acc = an[j]; // lane j's terms into a<j>
			red_combine(c, k->red, (DType)p->x[k->body].dtype, k->body);
			c->acc = NULL;
			c->depth--;
			indent(c);
			fputs("}\n", f);
		}
		c->vload = NULL;
	}
	c->depth--;
	indent(c);
	fputs("}\n", f);
}

// Accumulator j of kernel m of nk folded together (print_blockred): a<j>
// alone, a<j>_<m> for several.
static const char *
acc_name(char *buf, size_t n, int j, uint32_t m, uint32_t nk) {
	if (nk == 1)
		snprintf(buf, n, "a%d", j);
	else
		snprintf(buf, n, "a%d_%u", j, m);
	return buf;
}

// One term r = r0 + off of each of the nk kernels ks (one domain: a multi
// launch's) folded into its accumulator a<j>_<m>, in one scope and region,
// so that a load the terms share is read once.
static void
print_term_multi(Cu *c, const KKernel *const *ks, uint32_t nk, const Uses *u, const char *it,
                 const char *ll, int64_t off, int j) {
	const KProgram *p = c->p;
	FILE *f = c->f;
	indent(c);
	fputs("{\n", f);
	c->depth++;
	indent(c);
	fprintf(f, "const %s r = r0 + %lld%s;\n", it, (long long)off, ll);
	print_term_vars(c, ks[0], u, it, ll);
	c->region++;
	for (uint32_t m = 0; m < nk; m++)
		ensure(c, ks[m]->body);
	char an[32];
	for (uint32_t m = 0; m < nk; m++) {
		c->acc = acc_name(an, sizeof an, j, m, nk);
		red_combine(c, ks[m]->red, (DType)p->x[ks[m]->body].dtype, ks[m]->body);
	}
	c->acc = NULL;
	c->depth--;
	indent(c);
	fputs("}\n", f);
}

// A block reduction's folds of its chunk into a0 .. a3 (print_blockred):
// terms one at a time (vl NULL), or 4 consecutive terms at once, the
// loads marked in vl read as float4 (cuda_blockred_vec4).  With nk > 1
// kernels (a multi launch's; never float4s) each term of each kernel.
static void
print_term_loops(Cu *c, const KKernel *const *ks, uint32_t nk, const Uses *u, const BRed *b,
                 const char *it, const char *ll, const uint8_t *vl) {
	FILE *f = c->f;
	const KKernel *k = ks[0];
	int64_t nr = kir_kernel_terms(k), G = b->g, S = b->col ? FUSED_THREADS / 32 : FUSED_THREADS;
	int64_t W = vl ? 4 : 1; // terms a thread takes at a time
	indent(c);
	if (G > 1)
		fprintf(f, "const %s hi = g * %lld%s + %lld%s < %lld%s ? g * %lld%s + %lld%s : %lld%s;\n", it,
		        (long long)b->len, ll, (long long)b->len, ll, (long long)nr, ll, (long long)b->len,
		        ll, (long long)b->len, ll, (long long)nr, ll);
	else
		fprintf(f, "const %s hi = %lld%s;\n", it, (long long)nr, ll);
	const char *tid = b->col ? "(threadIdx.x >> 5)" : vl ? "4 * threadIdx.x" : "threadIdx.x";
	indent(c);
	if (G > 1) // the chunk's first term
		fprintf(f, "%s r0 = g * %lld%s + %s;\n", it, (long long)b->len, ll, tid);
	else
		fprintf(f, "%s r0 = %s;\n", it, tid);
	// Four terms at a time: a float4's lanes into a0 .. a3, or (unroll)
	// four strided terms, each into its accumulator; else one at a time.
	int four = !vl && b->unroll;
	if (four) {
		indent(c);
		fprintf(f, "for (; r0 + %lld%s < hi; r0 += %lld%s) {\n", (long long)(3 * S), ll,
		        (long long)(4 * S), ll);
		c->depth++;
		static const char *const an[] = {"a0", "a1", "a2", "a3"};
		for (int a = 0; a < 4; a++)
			if (nk == 1)
				print_term(c, k, u, it, ll, a * S, an[a], NULL);
			else
				print_term_multi(c, ks, nk, u, it, ll, a * S, a);
		c->depth--;
		indent(c);
		fputs("}\n", f);
	}
	indent(c);
	fprintf(f, "for (; r0 < hi; r0 += %lld%s)\n", (long long)(S * W), ll);
	c->depth++;
	if (nk == 1)
		print_term(c, k, u, it, ll, 0, "a0", vl);
	else
		print_term_multi(c, ks, nk, u, it, ll, 0, 0);
	c->depth--;
}

// The post and the store of the point of this thread (after the fold).
static void
print_store(Cu *c, const KKernel *k) {
	print_store_val(c, k, k->post);
}

// Value val of kernel k stored at its index (a fresh region).
static void
print_store_val(Cu *c, const KKernel *k, KxId val) {
	const KProgram *p = c->p;
	FILE *f = c->f;
	DType st = p->buf[k->out].dtype;
	c->region++;
	ensure(c, val);
	ensure(c, k->index);
	indent(c);
	fprintf(f, "b%u[", k->out);
	ref(c, k->index);
	fputs("] = ", f);
	if (st == DT_BOOL) {
		fputs("(unsigned char)", f);
		ref(c, val);
	} else
		convert(c, val, (DType)p->x[val].dtype, st, 0);
	fputs(";\n", f);
}

// A block reduction outside loops and fused tasks, as cuda_blockred_plan
// decides (its comment says why): work unit w is chunk w % G of point (or
// tile) w / G; rows: the block's threads fold strided terms of the chunk,
// then warp shuffles and warp 0 over the warps' results; columns: lane l
// is point l of the tile, warp q folds terms q, q + 8, ...; the warps'
// results meet in shared memory and warp 0 adds them in warp order.
// Each thread keeps four accumulators (terms j, j + S, j + 2S, j + 3S
// of each step of 4S, S the stride; the tail into the first), combined
// in order.  With G > 1 chunks, each block's result goes to fadc_red_part
// and the block drawing the last ticket of fadc_red_tick folds them in
// chunk order, stores, and resets the ticket.  With nk > 1 kernels ks (a
// multi launch's: one domain, one column plan) each thread keeps four
// accumulators per kernel, the warps' results meet in red[..][32 m + l],
// a chunk's nk results go to fadc_red_part side by side under one ticket,
// and the last block folds and stores each kernel's in turn.
static void print_blockred_multi_tail(Cu *c, const KKernel *const *ks, uint32_t nk,
                                      uint32_t ne, const BRed *b, const char *ll);

// A chunk's ticket: each of the G chunks of a tile (or point) takes one
// after storing its partial (fenced, so the last taker sees every
// partial), and the chunk that takes ticket G - 1 folds all partials in
// chunk order -- the same order whichever chunk finishes last, so the
// result is deterministic.  Opens that last chunk's block (depth + 1).
static void
print_ticket(Cu *c, int64_t G, const char *what)
{
	FILE *f = c->f;
	indent(c);
	fputs("__syncwarp();\n", f);
	indent(c);
	fputs("unsigned int tk = 0;\n", f);
	indent(c);
	fputs("if (threadIdx.x == 0) {\n", f);
	indent(c);
	fputs("\t__threadfence();\n", f);
	indent(c);
	fputs("\ttk = atomicAdd(&fadc_red_tick[tile], 1u);\n", f);
	indent(c);
	fputs("}\n", f);
	indent(c);
	fputs("tk = __shfl_sync(0xffffffffu, tk, 0);\n", f);
	indent(c);
	fprintf(f, "if (tk == %lluu) { // the last chunk of this %s: fold all in order\n",
	        (unsigned long long)(G - 1), what);
	c->depth++;
	indent(c);
	fputs("__threadfence();\n", f);
}

static void
print_blockred(Cu *c, const KKernel *const *ks, uint32_t nk, uint32_t ne, const Uses *u,
               const BRed *b) {
	const KProgram *p = c->p;
	FILE *f = c->f;
	const KKernel *k = ks[0];
	FADC_ASSERT((nk == 1 && !ne) || (b->col && !b->vec),
	            "cuda: sums side by side outside the column form");
	DType vt = (DType)p->x[k->body].dtype;
	const char *ty = cty(vt);
	int64_t nr = kir_kernel_terms(k), G = b->g;
	c->var32 = b->units * (b->col ? 32 : 1) < ((int64_t)1 << 30) && 2 * nr < ((int64_t)1 << 30) &&
	           kir_kernel_points(k) < ((int64_t)1 << 30);
	const char *it = c->var32 ? "int" : "long long", *ll = c->var32 ? "" : "LL";
	if (b->col)
		fprintf(f, "\t__shared__ %s red[2][%d][%u];\n", ty, FUSED_THREADS / 32, 32 * nk);
	else
		fprintf(f, "\t__shared__ %s red[2][32];\n", ty);
	fputs("\tunsigned int rb = 0;\n", f);
	fprintf(f, "\tfor (%s w = blockIdx.x; w < %lld%s; w += gridDim.x) {\n", it,
	        (long long)b->units, ll);
	c->depth = 2;
	if (G > 1) {
		indent(c);
		fprintf(f, "const %s tile = w / %lld%s, g = w %% %lld%s;\n", it, (long long)G, ll,
		        (long long)G, ll);
	} else {
		indent(c);
		fprintf(f, "const %s tile = w;\n", it);
	}
	int64_t dlv = 0;
	if (b->col) {
		dlv = k->dim[b->lv];
		int64_t inner = 1;
		for (int d = b->lv + 1; d < k->rank; d++)
			inner *= k->dim[d];
		indent(c);
		fprintf(f, "const %s lv = tile %% %lld%s * 32 + (threadIdx.x & 31), rest = tile / %lld%s;\n",
		        it, (long long)b->nlvb, ll, (long long)b->nlvb, ll);
		indent(c);
		fprintf(f, "const %s t = rest / %lld%s * %lld%s + lv * %lld%s + rest %% %lld%s;\n", it,
		        (long long)inner, ll, (long long)(dlv * inner), ll, (long long)inner, ll,
		        (long long)inner, ll);
	} else {
		indent(c);
		fprintf(f, "const %s t = tile;\n", it);
	}
	print_point_vars(c, k, u, it, ll);
	char an[32];
	for (uint32_t m = 0; m < nk; m++)
		for (int a = 0; a < 4; a++) {
			indent(c);
			fprintf(f, "%s %s = ", ty, acc_name(an, sizeof an, a, m, nk));
			red_init(c, k->red, vt);
			fputs(";\n", f);
		}
	uint8_t *vl = NULL;
	if (b->col) {
		indent(c);
		fprintf(f, "if (lv < %lld%s) {\n", (long long)dlv, ll);
		c->depth++;
	} else if (b->vec) { // float4s where every such pointer is 16-byte aligned
		vl = calloc(p->nx + 1, 1);
		FADC_ASSERT(vl, "cuda: out of memory");
		cuda_blockred_vec4(p, k, vl);
		indent(c);
		fputs("if ((0ULL", f);
		for (KxId id = 1; id < p->nx; id++)
			if (vl[id])
				fprintf(f, " | (unsigned long long)b%u", p->x[id].aux);
		fputs(") % 16 == 0) {\n", f);
		c->depth++;
		print_term_loops(c, ks, 1, u, b, it, ll, vl);
		c->depth--;
		indent(c);
		fputs("} else { // unaligned: one term at a time\n", f);
		c->depth++;
	}
	BRed one = *b;
	one.unroll = one.unroll && !vl;
	print_term_loops(c, ks, nk, u, &one, it, ll, NULL);
	if (b->col || vl) {
		c->depth--;
		indent(c);
		fputs("}\n", f);
	}
	free(vl);
	if (nk > 1 || ne) {
		print_blockred_multi_tail(c, ks, nk, ne, b, ll);
		return;
	}
	indent(c);
	fprintf(f, "%s acc = a0;\n", ty);
	red_combine_var(c, k->red, vt, "a1");
	red_combine_var(c, k->red, vt, "a2");
	red_combine_var(c, k->red, vt, "a3");
	if (b->col) {
		indent(c);
		fputs("red[rb][threadIdx.x >> 5][threadIdx.x & 31] = acc;\n", f);
		indent(c);
		fputs("__syncthreads();\n", f);
		indent(c);
		fputs("if (threadIdx.x < 32) {\n", f);
		c->depth++;
		indent(c);
		fputs("acc = red[rb][0][threadIdx.x];\n", f);
		indent(c);
		fprintf(f, "for (int q = 1; q < %d; q++) {\n", FUSED_THREADS / 32);
		c->depth++;
		indent(c);
		fprintf(f, "const %s o = red[rb][q][threadIdx.x];\n", ty);
		red_combine_var(c, k->red, vt, "o");
		c->depth--;
		indent(c);
		fputs("}\n", f);
	} else {
		print_block_fold(c, k->red, vt);
	}
	// Warp 0 holds the result: lane 0 the point's (rows), lane l point l's
	// of the tile (columns).
	const char *mine = b->col ? "lv < " : NULL;
	if (G == 1) {
		indent(c);
		if (b->col)
			fprintf(f, "if (%s%lld%s) {\n", mine, (long long)dlv, ll);
		else
			fputs("if (threadIdx.x == 0) {\n", f);
		c->depth++;
		print_store(c, k);
		c->depth--;
		indent(c);
		fputs("}\n", f);
	} else {
		// The chunk's result, then a ticket: fenced (every lane's store,
		// then lane 0's fence after the warp's barrier covers them) so that
		// the last block, reading through L2 (__ldcg), sees every chunk's.
		const char *part = b->col ? "(tile * %lld%s + g) * 32 + threadIdx.x"
		                          : "tile * %lld%s + g";
		indent(c);
		if (!b->col)
			fputs("if (threadIdx.x == 0)\n\t", f), indent(c);
		fprintf(f, "((%s *)fadc_red_part)[", ty);
		fprintf(f, part, (long long)G, ll);
		fputs("] = acc;\n", f);
		print_ticket(c, G, b->col ? "tile" : "point");
		if (b->col) {
			indent(c);
			fprintf(f, "acc = __ldcg(&((const %s *)fadc_red_part)[tile * %lld%s * 32 + threadIdx.x]);\n",
			        ty, (long long)G, ll);
			indent(c);
			fprintf(f, "for (int q = 1; q < %lld; q++) {\n", (long long)G);
			c->depth++;
			indent(c);
			fprintf(f,
			        "const %s o = __ldcg(&((const %s *)fadc_red_part)[(tile * %lld%s + q) * 32 + "
			        "threadIdx.x]);\n",
			        ty, ty, (long long)G, ll);
			red_combine_var(c, k->red, vt, "o");
			c->depth--;
			indent(c);
			fputs("}\n", f);
		} else {
			indent(c);
			fprintf(f, "acc = threadIdx.x < %lldu ? __ldcg(&((const %s *)fadc_red_part)[tile * %lld%s + threadIdx.x]) : ",
			        (long long)G, ty, (long long)G, ll);
			red_init(c, k->red, vt);
			fputs(";\n", f);
			print_warp_fold(c, k->red, vt);
		}
		indent(c);
		fputs("if (threadIdx.x == 0)\n", f);
		indent(c);
		fputs("\tfadc_red_tick[tile] = 0u; // ready for the next launch\n", f);
		indent(c);
		if (b->col)
			fprintf(f, "if (%s%lld%s) {\n", mine, (long long)dlv, ll);
		else
			fputs("if (threadIdx.x == 0) {\n", f);
		c->depth++;
		print_store(c, k);
		c->depth--;
		indent(c);
		fputs("}\n", f);
		c->depth--;
		indent(c);
		fputs("}\n", f);
	}
	c->depth--;
	indent(c);
	fputs("}\n", f); // if (threadIdx.x < 32)
	indent(c);
	fputs("rb ^= 1;\n", f);
	fputs("\t}\n}\n", f);
}

// The epilogues ks[nk .. nk + ne) of a multi launch at this thread's point
// (cuda_multi_end), after its sums' stores, where `guard` holds (NULL:
// always): each its value at its index, in a scope and region of its own.
static void
print_epilogues(Cu *c, const KKernel *const *ks, uint32_t nk, uint32_t ne, const char *guard) {
	FILE *f = c->f;
	if (!ne)
		return;
	if (guard) {
		indent(c);
		fprintf(f, "if (%s) { // the epilogues at this point\n", guard);
		c->depth++;
	}
	for (uint32_t e = nk; e < nk + ne; e++) {
		indent(c);
		fputs("{\n", f);
		c->depth++;
		print_store_val(c, ks[e], ks[e]->body);
		c->depth--;
		indent(c);
		fputs("}\n", f);
	}
	if (guard) {
		c->depth--;
		indent(c);
		fputs("}\n", f);
	}
}

// The rest of print_blockred for nk > 1 column sums: each kernel's four
// accumulators combined in order into red[rb][warp][32 m + lane]; warp 0
// folds kernel m's warps in order; unsplit, lane l stores each kernel's
// point l; split, the chunk's nk results go to fadc_red_part
// [tile][g][m][lane] under one ticket, and the block drawing the last
// folds each kernel's G chunks in order and stores.  Per kernel the same
// terms meet in the same order as in its own block reduction.
static void
print_blockred_multi_tail(Cu *c, const KKernel *const *ks, uint32_t nk, uint32_t ne,
                          const BRed *b, const char *ll) {
	const KProgram *p = c->p;
	FILE *f = c->f;
	const KKernel *k = ks[0];
	DType vt = (DType)p->x[k->body].dtype;
	const char *ty = cty(vt);
	int64_t G = b->g, dlv = k->dim[b->lv];
	char an[32], guard[64];
	snprintf(guard, sizeof guard, "lv < %lld%s", (long long)dlv, ll);
	for (uint32_t m = 0; m < nk; m++) {
		indent(c);
		fputs("{\n", f);
		c->depth++;
		indent(c);
		fprintf(f, "%s acc = %s;\n", ty, acc_name(an, sizeof an, 0, m, nk));
		for (int a = 1; a < 4; a++)
			red_combine_var(c, k->red, vt, acc_name(an, sizeof an, a, m, nk));
		indent(c);
		fprintf(f, "red[rb][threadIdx.x >> 5][%u + (threadIdx.x & 31)] = acc;\n", 32 * m);
		c->depth--;
		indent(c);
		fputs("}\n", f);
	}
	indent(c);
	fputs("__syncthreads();\n", f);
	indent(c);
	fputs("if (threadIdx.x < 32) {\n", f);
	c->depth++;
	for (uint32_t m = 0; m < nk; m++) { // warp 0: each kernel's warps in order
		indent(c);
		fputs("{\n", f);
		c->depth++;
		indent(c);
		fprintf(f, "%s acc = red[rb][0][%u + threadIdx.x];\n", ty, 32 * m);
		indent(c);
		fprintf(f, "for (int q = 1; q < %d; q++) {\n", FUSED_THREADS / 32);
		c->depth++;
		indent(c);
		fprintf(f, "const %s o = red[rb][q][%u + threadIdx.x];\n", ty, 32 * m);
		red_combine_var(c, k->red, vt, "o");
		c->depth--;
		indent(c);
		fputs("}\n", f);
		indent(c);
		if (G == 1) {
			fprintf(f, "if (lv < %lld%s) {\n", (long long)dlv, ll);
			c->depth++;
			print_store(c, ks[m]);
			c->depth--;
			indent(c);
			fputs("}\n", f);
		} else {
			fprintf(f, "((%s *)fadc_red_part)[((tile * %lld%s + g) * %u + %u) * 32 + threadIdx.x] = acc;\n",
			        ty, (long long)G, ll, nk, m);
		}
		c->depth--;
		indent(c);
		fputs("}\n", f);
	}
	if (G == 1)
		print_epilogues(c, ks, nk, ne, guard);
	if (G > 1) {
		// The chunk's results, then one ticket (fenced as print_blockred's).
		print_ticket(c, G, "tile");
		indent(c);
		fputs("if (threadIdx.x == 0)\n", f);
		indent(c);
		fputs("\tfadc_red_tick[tile] = 0u; // ready for the next launch\n", f);
		for (uint32_t m = 0; m < nk; m++) {
			indent(c);
			fputs("{\n", f);
			c->depth++;
			indent(c);
			fprintf(f,
			        "%s acc = __ldcg(&((const %s *)fadc_red_part)[(tile * %lld%s * %u + %u) * 32 + "
			        "threadIdx.x]);\n",
			        ty, ty, (long long)G, ll, nk, m);
			indent(c);
			fprintf(f, "for (int q = 1; q < %lld; q++) {\n", (long long)G);
			c->depth++;
			indent(c);
			fprintf(f,
			        "const %s o = __ldcg(&((const %s *)fadc_red_part)[((tile * %lld%s + q) * %u + "
			        "%u) * 32 + threadIdx.x]);\n",
			        ty, ty, (long long)G, ll, nk, m);
			red_combine_var(c, k->red, vt, "o");
			c->depth--;
			indent(c);
			fputs("}\n", f);
			indent(c);
			fprintf(f, "if (lv < %lld%s) {\n", (long long)dlv, ll);
			c->depth++;
			print_store(c, ks[m]);
			c->depth--;
			indent(c);
			fputs("}\n", f);
			c->depth--;
			indent(c);
			fputs("}\n", f);
		}
		print_epilogues(c, ks, nk, ne, guard);
		c->depth--;
		indent(c);
		fputs("}\n", f);
	}
	c->depth--;
	indent(c);
	fputs("}\n", f); // if (threadIdx.x < 32)
	indent(c);
	fputs("rb ^= 1;\n", f);
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
	Tile tl;
	int tiled = c->inloop[ki] && !c->fused && cuda_loop_tile(p, k, &tl);
	fputs(tiled && tl.nres ? ", int fadc_fill)\n{\n" : ")\n{\n", f);
	if (npt == 0) { // an empty output (a scan of length 0): nothing to do
		fputs("}\n", f);
		free(u.seen);
		free(u.buf);
		free(u.step);
		return;
	}
	if (tiled) {
		print_tile(c, k, &u, &tl);
		free(u.seen);
		free(u.buf);
		free(u.step);
		return;
	}
	if (!c->fused && !c->inloop[ki] && !k->red) {
		uint8_t *vl = calloc(p->nx + 1, 1);
		FADC_ASSERT(vl, "cuda: out of memory");
		if (cuda_vec4(p, ki, vl))
			print_vec4(c, k, &u, vl);
		free(vl);
	} else if (!c->fused && !c->inloop[ki] && cuda_vec4_red(p, ki))
		print_vec4_red(c, k, &u);
	BRed bp;
	if (!c->fused && !c->inloop[ki] && cuda_blockred_plan(p, k, 0, &bp) && bp.ilp) {
		print_blockred(c, &k, 1, 0, &u, &bp);
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
		if (br) {
			print_block_fold(c, k->red, vt);
			c->depth--;
			indent(c);
			fputs("}\n", f);
			indent(c);
			fputs("rb ^= 1;\n", f);
		} else
			print_warp_fold(c, k->red, vt);
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
    "// Resident tiles' slots (print_tile): the launch's dynamic shared memory, and its size.\n"
    "extern __shared__ __align__(16) unsigned char fadc_dsm[];\n"
    "\n"
    "static __device__ __forceinline__ unsigned int\n"
    "fadc_dsm_bytes(void)\n"
    "{\n"
    "\tunsigned int n;\n"
    "\tasm(\"mov.u32 %0, %%dynamic_smem_size;\" : \"=r\"(n));\n"
    "\treturn n;\n"
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

// ---------------------------------------------------------------- shared kernels
//
// Derivative tasks repeat kernels: a vjp recomputes the forward's, a chain
// of equal statements gives equal adjoints, every block of a network of one
// width the same statistics.  NVRTC's time grows with the kernels it
// compiles, so a __global__ whose text equals an earlier one's up to the
// names of its locals is printed once and its launches name the first
// (cg_cuda_print_shared), as codegen/llvm.c shares equal kernels on the CPU.
//
// The key is the kernel's text with comments dropped, its own name replaced
// by @F and the printer's per-kernel names -- b<N> (buffer parameters,
// numbered in the signature: the output, then the buffers it reads in
// buffer order), x<N> (expressions), s<N> (loop steps) -- renumbered in
// the order they first occur.  Two kernels with equal keys are the same
// function up to a consistent renaming of parameters and locals, so
// kernel j's launch (its arguments in its signature's order) does to
// j's buffers through i's function what j's function would.  Every other
// identifier (CUDA's, the shared helpers', loop indices i<d>, acc<r>)
// is kept as printed, and a literal is a token of its own (0x1.b3p+2 holds
// no identifier), so a renaming never makes two different functions equal:
// it can only miss a sharing.  Keys are compared byte for byte, never by
// hash alone.  A __global__'s launch records name the function it shares;
// a fused task's or a loop's __device__ functions are called from their
// group's kernel, which calls the shared one (print_calls).

typedef struct Shr {
	char **key; // the printed kernels' keys, in print order
	size_t *klen;
	uint32_t *ki; // their kernels
	char **name; // their functions' names
	uint32_t n, cap;
	uint32_t *tab; // open addressing: key index + 1, 0 empty
	uint32_t ntab; // a power of two, at least 2 n
} Shr;

typedef struct Ren {
	char *buf;
	size_t n, cap;
} Ren;

static void
ren_put(Ren *r, const char *s, size_t n) {
	if (r->n + n + 1 > r->cap) {
		size_t c = r->cap ? r->cap : 1024;
		while (c < r->n + n + 1)
			c *= 2;
		r->buf = realloc(r->buf, c);
		FADC_ASSERT(r->buf != NULL, "cuda: out of memory");
		r->cap = c;
	}
	memcpy(r->buf + r->n, s, n);
	r->n += n;
	r->buf[r->n] = 0;
}

static int
idch(char ch) {
	return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
	       ch == '_';
}

// The key of kernel text t[0..n) whose function is named fn (above).
// map[] holds, per prefix b, s, x, the new number + 1 of each old one
// (nmap entries each, cleared again before returning).
static void
shr_key(const char *t, size_t n, const char *fn, Ren *out, uint32_t **map, uint32_t *nmap) {
	static const char pre[3] = {'b', 's', 'x'};
	uint32_t next[3] = {0, 0, 0};
	uint32_t *seen[3] = {NULL, NULL, NULL}; // the old numbers renamed, to clear map
	uint32_t nseen[3] = {0, 0, 0}, cseen[3] = {0, 0, 0};
	size_t fl = strlen(fn);
	out->n = 0;
	for (size_t i = 0; i < n;) {
		char ch = t[i];
		if (ch == '/' && i + 1 < n && t[i + 1] == '/') { // a comment: to the line's end
			while (i < n && t[i] != '\n')
				i++;
			continue;
		}
		if (ch >= '0' && ch <= '9') { // a literal (0x1.8p, 255U, 1e): one token
			size_t j = i;
			while (j < n && (idch(t[j]) || t[j] == '.'))
				j++;
			ren_put(out, t + i, j - i);
			i = j;
			continue;
		}
		if (!idch(ch)) {
			ren_put(out, t + i, 1);
			i++;
			continue;
		}
		size_t j = i;
		while (j < n && idch(t[j]))
			j++;
		size_t len = j - i;
		int k = -1;
		for (int q = 0; q < 3; q++)
			if (t[i] == pre[q])
				k = q;
		int num = k >= 0 && len > 1;
		for (size_t d = i + 1; num && d < j; d++)
			num = t[d] >= '0' && t[d] <= '9';
		if (len == fl && !memcmp(t + i, fn, fl)) {
			ren_put(out, "@F", 2);
		} else if (num) {
			unsigned long v = strtoul(t + i + 1, NULL, 10);
			if (v >= nmap[k]) {
				uint32_t m = nmap[k] ? nmap[k] : 64;
				while (m <= v)
					m *= 2;
				map[k] = realloc(map[k], m * sizeof *map[k]);
				FADC_ASSERT(map[k] != NULL, "cuda: out of memory");
				memset(map[k] + nmap[k], 0, (m - nmap[k]) * sizeof *map[k]);
				nmap[k] = m;
			}
			if (!map[k][v]) {
				map[k][v] = ++next[k];
				if (nseen[k] == cseen[k]) {
					cseen[k] = cseen[k] ? 2 * cseen[k] : 64;
					seen[k] = realloc(seen[k], cseen[k] * sizeof *seen[k]);
					FADC_ASSERT(seen[k] != NULL, "cuda: out of memory");
				}
				seen[k][nseen[k]++] = (uint32_t)v;
			}
			char nb[24];
			int l = snprintf(nb, sizeof nb, "%c#%u", pre[k], map[k][v] - 1);
			ren_put(out, nb, (size_t)l);
		} else {
			ren_put(out, t + i, len);
		}
		i = j;
	}
	for (int q = 0; q < 3; q++) {
		for (uint32_t e = 0; e < nseen[q]; e++)
			map[q][seen[q][e]] = 0;
		free(seen[q]);
	}
}

static uint64_t
shr_hash(const char *s, size_t n) {
	uint64_t h = 14695981039346656037ull; // FNV-1a
	for (size_t i = 0; i < n; i++)
		h = (h ^ (uint8_t)s[i]) * 1099511628211ull;
	return h;
}

// The earlier kernel with key k, or -1; else k (taken) becomes entry ki.
static int64_t
shr_find_add(Shr *sh, char *k, size_t kn, uint32_t ki, char *name) {
	if (2 * (sh->n + 1) > sh->ntab) { // rebuild at twice the size
		uint32_t nt = sh->ntab ? 2 * sh->ntab : 256;
		uint32_t *t = calloc(nt, sizeof *t);
		FADC_ASSERT(t != NULL, "cuda: out of memory");
		for (uint32_t e = 0; e < sh->n; e++) {
			uint32_t j = (uint32_t)shr_hash(sh->key[e], sh->klen[e]) & (nt - 1);
			while (t[j])
				j = (j + 1) & (nt - 1);
			t[j] = e + 1;
		}
		free(sh->tab);
		sh->tab = t;
		sh->ntab = nt;
	}
	uint32_t j = (uint32_t)shr_hash(k, kn) & (sh->ntab - 1);
	for (; sh->tab[j]; j = (j + 1) & (sh->ntab - 1)) {
		uint32_t e = sh->tab[j] - 1;
		if (sh->klen[e] == kn && !memcmp(sh->key[e], k, kn))
			return e;
	}
	if (sh->n == sh->cap) {
		sh->cap = sh->cap ? 2 * sh->cap : 64;
		sh->key = realloc(sh->key, sh->cap * sizeof *sh->key);
		sh->klen = realloc(sh->klen, sh->cap * sizeof *sh->klen);
		sh->ki = realloc(sh->ki, sh->cap * sizeof *sh->ki);
		sh->name = realloc(sh->name, sh->cap * sizeof *sh->name);
		FADC_ASSERT(sh->key && sh->klen && sh->ki && sh->name, "cuda: out of memory");
	}
	sh->key[sh->n] = k;
	sh->klen[sh->n] = kn;
	sh->ki[sh->n] = ki;
	sh->name[sh->n] = name;
	sh->tab[j] = ++sh->n;
	return -1;
}

static void
shr_free(Shr *sh) {
	for (uint32_t e = 0; e < sh->n; e++) {
		free(sh->key[e]);
		free(sh->name[e]);
	}
	free(sh->key);
	free(sh->klen);
	free(sh->ki);
	free(sh->name);
	free(sh->tab);
}

// What sharing carries through one program: the keys, the renaming maps,
// and the launches it redirects (cg_cuda_print_shared's result).
typedef struct Sharing {
	Shr sh;
	uint32_t *map[3], nmap[3];
	CgCudaShared *out;
	uint32_t nout, cap;
} Sharing;

static void print_kernel(Cu *c, uint32_t ki);

// Kernel ki printed into c->f once per key: a kernel equal to an earlier
// one leaves its launch comment and a line naming the function it
// launches (a __global__: recorded for its launch records) or its group's
// kernel calls (a __device__ function of a fused task or a loop:
// c->alias, print_calls).
static void
print_kernel_shared(Cu *c, Sharing *s, uint32_t ki) {
	char *text = NULL, *name = NULL;
	size_t n = 0, nn = 0;
	FILE *main = c->f, *f = open_memstream(&text, &n), *fn = open_memstream(&name, &nn);
	FADC_ASSERT(f && fn, "cuda: out of memory");
	c->f = f;
	print_kernel(c, ki);
	c->f = main;
	cuda_kernel_name(fn, c->p->name, ki, c->p->k[ki].what);
	FADC_ASSERT(!fclose(f) && !fclose(fn), "cuda: out of memory");
	Ren key = {0};
	shr_key(text, n, name, &key, s->map, s->nmap);
	if (!key.buf)
		ren_put(&key, "", 0);
	int64_t e = shr_find_add(&s->sh, key.buf, key.n, ki, name);
	if (e < 0) {
		fwrite(text, 1, n, main);
	} else {
		free(key.buf);
		// The launch comment: its first two lines ("\n// kernel ...\n").
		const char *nl = n > 1 ? memchr(text + 1, '\n', n - 1) : NULL;
		size_t cl = nl ? (size_t)(nl - text) + 1 : 0;
		fwrite(text, 1, cl, main);
		fprintf(main, "// the function of kernel %u: %s\n", s->sh.ki[e], s->sh.name[e]);
		c->alias[ki] = s->sh.ki[e];
		if (c->fused || c->inloop[ki]) { // called, never launched by name
			free(name);
			free(text);
			return;
		}
		if (s->nout == s->cap) {
			s->cap = s->cap ? 2 * s->cap : 64;
			s->out = realloc(s->out, s->cap * sizeof *s->out);
			FADC_ASSERT(s->out != NULL, "cuda: out of memory");
		}
		s->out[s->nout].name = name;
		s->out[s->nout].as = strdup(s->sh.name[e]);
		FADC_ASSERT(s->out[s->nout].as != NULL, "cuda: out of memory");
		s->nout++;
	}
	free(text);
}

// Multi launch a (print_multi) printed into c->f once per key, as
// print_kernel_shared does for one kernel: the batch norms of one width
// have equal sibling groups (resnet18's vjp: 20 groups, a handful of
// functions).  *aliased is set when an earlier group's function runs it.
static void
print_multi_shared(Cu *c, Sharing *s, const La *a, uint8_t *aliased) {
	char *text = NULL;
	size_t n = 0;
	FILE *main = c->f, *f = open_memstream(&text, &n);
	FADC_ASSERT(f, "cuda: out of memory");
	c->f = f;
	print_multi(c, a);
	c->f = main;
	FADC_ASSERT(!fclose(f), "cuda: out of memory");
	CgCudaKernel ct;
	FADC_ASSERT(cuda_multi_contract(c->p, a, &ct), "cuda: out of memory");
	free(ct.buf);
	Ren key = {0};
	shr_key(text, n, ct.name, &key, s->map, s->nmap);
	if (!key.buf)
		ren_put(&key, "", 0);
	int64_t e = shr_find_add(&s->sh, key.buf, key.n, a->begin, ct.name);
	if (e < 0) {
		fwrite(text, 1, n, main);
	} else {
		free(key.buf);
		const char *nl = n > 1 ? memchr(text + 1, '\n', n - 1) : NULL;
		size_t cl = nl ? (size_t)(nl - text) + 1 : 0;
		fwrite(text, 1, cl, main);
		fprintf(main, "// the function of kernel %u: %s\n", s->sh.ki[e], s->sh.name[e]);
		*aliased = 1;
		if (s->nout == s->cap) {
			s->cap = s->cap ? 2 * s->cap : 64;
			s->out = realloc(s->out, s->cap * sizeof *s->out);
			FADC_ASSERT(s->out != NULL, "cuda: out of memory");
		}
		s->out[s->nout].name = ct.name;
		s->out[s->nout].as = strdup(s->sh.name[e]);
		FADC_ASSERT(s->out[s->nout].as != NULL, "cuda: out of memory");
		s->nout++;
	}
	free(text);
}

void
cg_cuda_shared_free(CgCudaShared *s, uint32_t n) {
	for (uint32_t i = 0; s && i < n; i++) {
		free(s[i].name);
		free(s[i].as);
	}
	free(s);
}

// ---------------------------------------------------------------- parts
// The printed program cut into parts (cg_cuda_print_parts), so that
// compile.c can compile a large task as several NVRTC programs (docs/CUDA.md,
// "Pieces").  The printer writes the same bytes as cg_cuda_print_shared;
// cut() notes where each part starts while it prints: the common text (the
// header and the helpers every kernel may call), the loop helpers (the
// grid barrier's and the tiled contractions' module words), each kernel's
// text, each group's __global__.  What must stay together is one unit:
// a __global__ outside loops alone; a persistent loop kernel with the
// __device__ functions it calls, and with every other loop whose function
// one of them shares (print_calls calls the first equal one); the whole
// task when it is fused.

enum { CUT_ALL, CUT_LOOPS, CUT_KERNEL, CUT_GROUP };
typedef struct Cut {
	size_t off; // where the part starts in the source
	uint8_t what; // CUT_*
	uint32_t i; // CUT_KERNEL: the kernel; CUT_GROUP: the launch (la[i])
	uint8_t fn; // CUT_KERNEL: its text is a function (not a GEMM's note alone)
} Cut;
typedef struct Cuts {
	Cut *c;
	uint32_t n, cap;
} Cuts;

static void
cut(Cu *c, int what, uint32_t i) {
	if (!c->cuts)
		return;
	Cuts *k = c->cuts;
	if (k->n == k->cap) {
		k->cap = k->cap ? 2 * k->cap : 256;
		k->c = realloc(k->c, k->cap * sizeof *k->c);
		FADC_ASSERT(k->c != NULL, "cuda: out of memory");
	}
	FADC_ASSERT(!fflush(c->f), "cuda: out of memory");
	long off = ftell(c->f);
	FADC_ASSERT(off >= 0, "cuda: ftell on the source's stream");
	k->c[k->n++] = (Cut){(size_t)off, (uint8_t)what, i, 0};
}

static uint32_t
uf_find(uint32_t *up, uint32_t x) {
	while (up[x] != x)
		x = up[x] = up[up[x]];
	return x;
}

// The parts of a program printed with cuts (source length n) into *out:
// each cut's unit and the __global__ it defines.
static void
parts_make(const Cu *c, const La *la, uint32_t nla, const Cuts *k, size_t n, CgCudaPart **out,
           uint32_t *nout) {
	const KProgram *p = c->p;
	// The loop group of each kernel inside a loop, then the groups whose
	// __device__ functions call one another's joined (union-find).
	uint32_t *group = malloc((p->nk + 1) * sizeof *group), *up = malloc((nla + 1) * sizeof *up);
	CgCudaPart *r = calloc(k->n + 1, sizeof *r);
	FADC_ASSERT(group && up && r, "cuda: out of memory");
	for (uint32_t g = 0; g < nla; g++) {
		up[g] = g;
		if (la[g].kind == LA_LOOP)
			for (uint32_t ki = la[g].begin; ki < la[g].end; ki++)
				group[ki] = g;
	}
	for (uint32_t ki = 0; ki < p->nk && !c->fused; ki++)
		if (c->inloop[ki] && c->alias && c->alias[ki] != ki) {
			FADC_ASSERT(c->inloop[c->alias[ki]], "cuda: a loop's function shares a __global__");
			up[uf_find(up, group[ki])] = uf_find(up, group[c->alias[ki]]);
		}
	for (uint32_t j = 0; j < k->n; j++) {
		const Cut *x = &k->c[j];
		CgCudaPart *q = &r[j];
		q->off = x->off;
		q->len = (j + 1 < k->n ? k->c[j + 1].off : n) - x->off;
		q->unit = CG_CUDA_PART_NOTE;
		if (x->what == CUT_ALL)
			q->unit = CG_CUDA_PART_ALL;
		else if (x->what == CUT_LOOPS)
			q->unit = CG_CUDA_PART_LOOPS;
		else if (x->what == CUT_GROUP && c->galias[x->i]) {
			// a multi launch whose function is an earlier one's: a note
		} else if (x->what == CUT_GROUP) {
			CgCudaKernel all;
			FADC_ASSERT(la[x->i].kind == LA_MULTI ? cuda_multi_contract(p, &la[x->i], &all)
			                                      : cuda_group_contract(p, &la[x->i], &all),
			            "cuda: out of memory");
			free(all.buf);
			q->name = all.name;
			q->loop = la[x->i].kind == LA_LOOP;
			q->unit = c->fused ? 0 : (int32_t)uf_find(up, x->i);
		} else if (c->fused) {
			q->unit = 0;
		} else if (c->inloop[x->i]) {
			q->unit = (int32_t)uf_find(up, group[x->i]);
			q->loop = 1;
		} else if (x->fn && (!c->alias || c->alias[x->i] == x->i)) {
			// A __global__ of its own (a choice's kernel too).
			char *nm = NULL;
			size_t nn = 0;
			FILE *fn = open_memstream(&nm, &nn);
			FADC_ASSERT(fn != NULL, "cuda: out of memory");
			cuda_kernel_name(fn, p->name, x->i, p->k[x->i].what);
			FADC_ASSERT(!fclose(fn), "cuda: out of memory");
			q->name = nm;
			q->unit = (int32_t)(nla + x->i);
		}
		// else a note: a GEMM's, or a launch of an equal kernel's function
	}
	free(group);
	free(up);
	*out = r;
	*nout = k->n;
}

void
cg_cuda_parts_free(CgCudaPart *q, uint32_t n) {
	for (uint32_t i = 0; q && i < n; i++)
		free(q[i].name);
	free(q);
}

static char *print_program(const KProgram *p, size_t *len, Sharing *s, CgCudaPart **parts,
                           uint32_t *nparts, char *err, size_t errlen);

char *
cg_cuda_print(const KProgram *p, size_t *len, char *err, size_t errlen) {
	return print_program(p, len, NULL, NULL, NULL, err, errlen);
}

char *
cg_cuda_print_shared(const KProgram *p, size_t *len, CgCudaShared **shared, uint32_t *nshared,
                     char *err, size_t errlen) {
	return cg_cuda_print_parts(p, len, shared, nshared, NULL, NULL, err, errlen);
}

char *
cg_cuda_print_parts(const KProgram *p, size_t *len, CgCudaShared **shared, uint32_t *nshared,
                    CgCudaPart **parts, uint32_t *nparts, char *err, size_t errlen) {
	Sharing s = {0};
	if (parts) {
		*parts = NULL;
		*nparts = 0;
	}
	char *r = print_program(p, len, &s, parts, nparts, err, errlen);
	shr_free(&s.sh);
	for (int q = 0; q < 3; q++)
		free(s.map[q]);
	if (!r) {
		cg_cuda_shared_free(s.out, s.nout);
		s.out = NULL;
		s.nout = 0;
	}
	*shared = s.out;
	*nshared = s.nout;
	return r;
}

static char *
print_program(const KProgram *p, size_t *len, Sharing *share, CgCudaPart **parts,
              uint32_t *nparts, char *err, size_t errlen) {
	char *buf = NULL;
	size_t n = 0;
	Cu c = {0};
	Cuts cuts = {0};
	c.p = p;
	c.cuts = parts ? &cuts : NULL;
	c.f = open_memstream(&buf, &n);
	c.stamp = calloc(p->nx + 1, sizeof *c.stamp);
	c.lazy = calloc(p->nx + 1, sizeof *c.lazy);
	if (!c.f || !c.stamp || !c.lazy) {
		if (c.f)
			fclose(c.f);
		free(buf);
		free(c.stamp);
		free(c.lazy);
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
				free(c.lazy);
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
	cut(&c, CUT_ALL, 0);
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
	if (share) {
		c.alias = malloc((p->nk + 1) * sizeof *c.alias);
		FADC_ASSERT(c.alias != NULL, "cuda: out of memory");
		for (uint32_t ki = 0; ki < p->nk; ki++)
			c.alias[ki] = ki;
	}
	La *la = calloc(LA_MAX(p), sizeof *la);
	FADC_ASSERT(c.inloop && la, "cuda: out of memory");
	for (uint32_t l = 0; l < p->nloop; l++)
		for (uint32_t ki = p->loop[l].begin; ki < p->loop[l].end; ki++)
			c.inloop[ki] = 1;
	uint32_t nla = cuda_launch_plan(p, la);
	int persist = 0;
	for (uint32_t i = 0; i < nla; i++)
		persist |= la[i].kind == LA_LOOP;
	cut(&c, CUT_LOOPS, 0);
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
	// The split block reductions' chunk results and tickets
	// (print_blockred), sized for the largest: one stream runs a task's
	// launches one at a time, and each launch leaves its tickets at 0.
	int64_t rpart = 0, rtick = 0;
	for (uint32_t ki = 0; ki < p->nk; ki++) {
		BRed b;
		if (!c.fused && !c.inloop[ki] && cuda_blockred_plan(p, &p->k[ki], 0, &b) && b.ilp &&
		    b.g > 1) {
			int64_t es = (int64_t)kir_dtype_size((DType)p->x[p->k[ki].body].dtype);
			if (b.tiles * b.g * (b.col ? 32 : 1) * es > rpart)
				rpart = b.tiles * b.g * (b.col ? 32 : 1) * es;
			if (b.tiles > rtick)
				rtick = b.tiles;
		}
	}
	for (uint32_t i = 0; i < nla; i++) { // a multi launch's sums side by side
		BRed b;
		const KKernel *k = &p->k[la[i].begin];
		if (la[i].kind == LA_MULTI && cuda_multi_plan(p, &la[i], &b) && b.g > 1) {
			int64_t es = (int64_t)kir_dtype_size((DType)p->x[k->body].dtype);
			int64_t need = b.tiles * b.g * 32 * es * (int64_t)cuda_multi_sums(p, &la[i]);
			rpart = need > rpart ? need : rpart;
			rtick = b.tiles > rtick ? b.tiles : rtick;
		}
	}
	// Their declarations go into every piece (cg_cuda_print_parts): a
	// piece of split reductions need not hold a loop.  Each piece is its
	// own module, so each has its own copy, which is safe for the reason above.
	cut(&c, CUT_ALL, 0);
	if (rpart)
		fprintf(c.f,
		        "\n// The split block reductions' chunk results and tickets (print_blockred).\n"
		        "static __device__ __align__(16) unsigned char fadc_red_part[%lld];\n"
		        "static __device__ unsigned int fadc_red_tick[%lld];\n",
		        (long long)rpart, (long long)rtick);
	// Host kernels and cuBLAS GEMMs have no CUDA code; a choice's kernel
	// (LA_CHOICE) has both: its GEMM and its own __global__.
	uint8_t *gemm = calloc(p->nk + 1, 1);
	FADC_ASSERT(gemm, "cuda: out of memory");
	for (uint32_t i = 0; i < nla; i++)
		if ((la[i].kind == LA_GEMM && !gemm[la[i].begin]) || la[i].kind == LA_CHOICE)
			gemm[la[i].begin] = (uint8_t)(la[i].kind == LA_GEMM ? GEMM_ONLY : GEMM_CHOICE);
	// The f32 GEMM records' 3xTF32 kernels (codegen/cuda_mma.c), in the
	// common text: every piece has them, so every module of the task.
	cg_cuda_mma_print(c.f, p, gemm);
	// Kernels of an LA_MULTI launch: printed there (print_multi), a note here.
	uint32_t *multi = calloc(p->nk + 1, sizeof *multi); // 1 + the group's first kernel
	FADC_ASSERT(multi, "cuda: out of memory");
	for (uint32_t i = 0; i < nla; i++)
		for (uint32_t ki = la[i].begin; la[i].kind == LA_MULTI && ki < la[i].end; ki++)
			multi[ki] = la[i].begin + 1;
	for (uint32_t i = 0; i < p->nk && !c.bad; i++) {
		KGemmPlan g;
		cut(&c, CUT_KERNEL, i);
		if (gemm[i] && cuda_gemm_launch(p, i, &g))
			fprintf(c.f,
			        "\n// kernel %u: %s, a cuBLAS GEMM (batch %lld, M %lld, N %lld, K %lld), "
			        "run by the runtime%s\n",
			        i, p->k[i].what ? p->k[i].what : "", (long long)g.batch, (long long)g.M,
			        (long long)g.N, (long long)g.K,
			        gemm[i] == GEMM_CHOICE ? ", or the kernel below: a choice, timed on the GPU"
			                               : ": no code here");
		if (multi[i])
			fprintf(c.f, "\n// kernel %u: %s, %s of kernel %u's launch (below)\n", i,
			        p->k[i].what ? p->k[i].what : "", p->k[i].red ? "one of the sums" : "an epilogue",
			        multi[i] - 1);
		else if (!p->k[i].host && gemm[i] != GEMM_ONLY) {
			if (c.cuts)
				c.cuts->c[c.cuts->n - 1].fn = 1;
			if (share)
				print_kernel_shared(&c, share, i);
			else
				print_kernel(&c, i);
		}
	}
	free(gemm);
	free(multi);
	c.galias = calloc(nla + 1, 1);
	FADC_ASSERT(c.galias, "cuda: out of memory");
	for (uint32_t i = 0; i < nla && !c.bad; i++)
		if (la[i].kind == LA_FUSED || la[i].kind == LA_LOOP || la[i].kind == LA_MULTI) {
			cut(&c, CUT_GROUP, i);
			if (la[i].kind == LA_MULTI && share)
				print_multi_shared(&c, share, &la[i], &c.galias[i]);
			else if (la[i].kind == LA_MULTI)
				print_multi(&c, &la[i]);
			else
				print_group(&c, &la[i]);
		}
	fclose(c.f);
	if (parts && !c.bad)
		parts_make(&c, la, nla, &cuts, n, parts, nparts);
	free(cuts.c);
	free(c.stamp);
	free(c.lazy);
	free(c.inloop);
	free(c.rot);
	free(c.alias);
	free(c.galias);
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
