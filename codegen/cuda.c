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
// kernel reads it.  A reduction is, in this slice, a sequential loop nest in
// the thread that owns the output point (warp-level reductions are next).
// Expressions are printed once per region (the block where they are
// evaluated) as `const T xID = ...;`, memoized by KxId as in llvm.c, with
// the same scalar semantics: NaN-propagating max/min, ordered comparisons
// except NE/UGT/ULT/UNO, floor division, the same casts.  Special functions
// are CUDA's (expf, log1pf, lgammaf, ...); polygamma is a __device__ port of
// codegen/support.c, printed once per program that uses it.  Floats are
// printed as hexadecimal literals (exact); the output depends on the
// program only, so printing twice gives the same bytes.
//
// NVRTC calls go through one checked path, CHECK_NVRTC: the statement,
// function, file, line and nvrtcGetErrorString into err; a failed
// compilation also writes the program log and the source with line numbers
// to the diagnostics stream.  Kernels are compiled with --fmad=false: the
// CPU backend never contracts a*b+c, and the interpreter is the reference.
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <nvrtc.h>

#include "codegen.h"

// ---------------------------------------------------------------- printer state

typedef struct Cu {
	FILE *f;
	const KProgram *p;
	int fused;               // kernels are __device__ functions of one fused kernel
	uint32_t *stamp, region; // memo: x<id> is defined in the current region
	int depth;               // indentation (tabs)
	int bad;                 // an op the printer does not support (the first)
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

static void ensure(Cu *c, KxId id);

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
		else
			print_int(c->f, x->i);
		return;
	case KX_VAR:
		fprintf(c->f, "i%u", x->aux);
		return;
	case KX_ACC:
		fputs("acc", c->f);
		return;
	case KX_RUNSEED:
		fputs("((long long)runseed)", c->f);
		return;
	default:
		fprintf(c->f, "x%u", id);
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
		// In double, rounded: as fadc_polygammaf of codegen/support.c.
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
		return;
	case KX_RAND:
		if (!c->bad)
			c->bad = KX_RAND;
		return;
	default:
		break;
	}
	if (c->stamp[id] == c->region)
		return;
	c->stamp[id] = c->region;
	for (int i = 0; i < x->nin; i++)
		ensure(c, x->a[i]);
	indent(c);
	fprintf(c->f, "const %s x%u = ", cty((DType)x->dtype), id);
	print_op(c, id);
	fputs(";\n", c->f);
}

// ---------------------------------------------------------------- kernels

typedef struct Uses {
	uint8_t *seen, *buf, var[2 * IR_MAXDIM];
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
// then a tree in shared memory folds the 256 partial results (log2 256 = 8
// barrier steps).  One thread per point would run the whole domain
// serially: a scalar sum of 20,000 terms in one thread costs ~100 us.  The
// summation order differs from the CPU's (a tree of strided partial sums),
// within f32 rounding.  Not inside a fused task (one block, whose kernels
// are small by construction).
#define BLOCKRED_MIN_TERMS 128
#define BLOCKRED_MAX_POINTS 32768

static int fused(const KProgram *p);

static int
blockred(const KProgram *p, const KKernel *k) {
	if (!k->red || fused(p))
		return 0;
	int64_t npt = 1, nr = 1;
	for (int d = 0; d < k->rank; d++)
		npt *= k->dim[d];
	for (int d = 0; d < k->rrank; d++)
		nr *= k->rdim[d];
	return nr >= BLOCKRED_MIN_TERMS && npt <= BLOCKRED_MAX_POINTS;
}

static void
kernel_name(FILE *f, const char *task, uint32_t ki, const char *what) {
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
kernel_uses(const KProgram *p, const KKernel *k, Uses *u) {
	u->seen = calloc(p->nx + 1, 1);
	u->buf = calloc(p->nbuf + 1, 1);
	FADC_ASSERT(u->seen && u->buf, "cuda: out of memory");
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
fused_smem(const KProgram *p) {
	return p->arena_bytes <= FUSED_SMEM_LIMIT;
}

static int
fused(const KProgram *p) {
	if (p->nk < 2)
		return 0;
	int64_t work = 0;
	for (uint32_t i = 0; i < p->nk; i++) {
		const KKernel *k = &p->k[i];
		int64_t w = 1;
		for (int d = 0; d < k->rank; d++)
			w *= k->dim[d];
		for (int d = 0; k->red && d < k->rrank; d++)
			w *= k->rdim[d];
		work += w;
		if (work > FUSE_WORK_LIMIT)
			return 0;
	}
	return 1;
}

uint32_t
cg_cuda_launches(const KProgram *p) {
	return fused(p) ? 1 : p->nk;
}

static int kernel_contract(const KProgram *p, uint32_t ki, CgCudaKernel *out);

int
cg_cuda_kernel(const KProgram *p, uint32_t li, CgCudaKernel *out) {
	if (!fused(p))
		return kernel_contract(p, li, out);
	// The fused kernel: every buffer any kernel touches, in buffer order.
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
	kernel_name(f, p->name ? p->name : "", 0, "fused");
	fclose(f);
	out->name = name;
	out->grid = 1;
	out->points = FUSED_THREADS;
	for (uint32_t ki = 0; ki < p->nk; ki++) {
		CgCudaKernel k;
		if (!kernel_contract(p, ki, &k)) {
			free(use);
			free(out->buf);
			free(out->name);
			return 0;
		}
		for (uint32_t a = 0; a < k.narg; a++)
			use[k.buf[a]] = 1;
		out->runseed |= k.runseed;
		free(k.name);
		free(k.buf);
	}
	int smem = fused_smem(p);
	for (uint32_t b = 0; b < p->nbuf; b++)
		if (use[b] && !(smem && p->buf[b].kind == KB_TMP))
			out->buf[out->narg++] = b;
	free(use);
	return 1;
}

// The fused kernel's body: the kernels in order, a barrier between.
static void
print_fused(Cu *c) {
	const KProgram *p = c->p;
	CgCudaKernel all;
	FADC_ASSERT(cg_cuda_kernel(p, 0, &all), "cuda: out of memory");
	uint8_t *written = calloc(p->nbuf + 1, 1);
	FADC_ASSERT(written, "cuda: out of memory");
	for (uint32_t ki = 0; ki < p->nk; ki++)
		written[p->k[ki].out] = 1;
	FILE *f = c->f;
	fprintf(f, "\n// the task as one kernel of one block of %d threads; args:", FUSED_THREADS);
	for (uint32_t a = 0; a < all.narg; a++)
		fprintf(f, " b%u", all.buf[a]);
	fprintf(f, "%s\nextern \"C\" __global__ void __launch_bounds__(%d)\n%s(",
	        all.runseed ? " runseed" : "", FUSED_THREADS, all.name);
	for (uint32_t a = 0; a < all.narg; a++) {
		uint32_t b = all.buf[a];
		fprintf(f, "%s%s%s *b%u", a ? ", " : "", written[b] ? "" : "const ",
		        csty(p->buf[b].dtype), b);
	}
	fprintf(f, "%s)\n{\n", all.runseed ? ", unsigned long long runseed" : "");
	if (fused_smem(p)) {
		if (p->arena_bytes > 0)
			fprintf(f, "\t__shared__ __align__(64) unsigned char arena[%lld];\n",
			        (long long)p->arena_bytes);
		for (uint32_t b = 0; b < p->nbuf; b++) {
			if (p->buf[b].kind != KB_TMP)
				continue;
			if (p->arena_bytes > 0)
				fprintf(f, "\t%s *b%u = (%s *)(arena + %lld);\n", csty(p->buf[b].dtype), b,
				        csty(p->buf[b].dtype), (long long)p->buf[b].offset);
			else // zero-size temporaries: never dereferenced
				fprintf(f, "\t%s *b%u = nullptr;\n", csty(p->buf[b].dtype), b);
		}
	}
	for (uint32_t ki = 0; ki < p->nk; ki++) {
		CgCudaKernel k;
		FADC_ASSERT(kernel_contract(p, ki, &k), "cuda: out of memory");
		fprintf(f, "\t%s(", k.name);
		for (uint32_t a = 0; a < k.narg; a++)
			fprintf(f, "%sb%u", a ? ", " : "", k.buf[a]);
		fprintf(f, "%s);\n", k.runseed ? ", runseed" : "");
		if (ki + 1 < p->nk)
			fputs("\t__syncthreads();\n", f);
		free(k.name);
		free(k.buf);
	}
	fputs("}\n", f);
	free(written);
	free(all.name);
	free(all.buf);
}

static int
kernel_contract(const KProgram *p, uint32_t ki, CgCudaKernel *out) {
	const KKernel *k = &p->k[ki];
	Uses u = {0};
	kernel_uses(p, k, &u);
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
		out->buf = NULL;
		return 0;
	}
	kernel_name(f, p->name ? p->name : "", ki, k->what);
	fclose(f);
	out->name = name;
	out->points = 1;
	for (int d = 0; d < k->rank; d++)
		out->points *= k->dim[d];
	out->buf[out->narg++] = k->out;
	for (uint32_t b = 0; b < p->nbuf; b++)
		if (u.buf[b] && b != k->out)
			out->buf[out->narg++] = b;
	out->runseed = u.seed;
	if (blockred(p, k))
		out->grid = (uint32_t)(out->points < 65535 ? out->points : 65535);
	free(u.seen);
	free(u.buf);
	return 1;
}

static void
print_kernel(Cu *c, uint32_t ki) {
	const KProgram *p = c->p;
	const KKernel *k = &p->k[ki];
	FILE *f = c->f;
	Uses u = {0};
	kernel_uses(p, k, &u);
	int64_t npt = 1;
	for (int d = 0; d < k->rank; d++)
		npt *= k->dim[d];
	DType st = p->buf[k->out].dtype;
	// The launch contract, for the runtime: points, then the arguments.
	fprintf(f, "\n// kernel %u: %s, %lld points, writes b%u; args: b%u", ki,
	        k->what ? k->what : "", (long long)npt, k->out, k->out);
	for (uint32_t b = 0; b < p->nbuf; b++)
		if (u.buf[b] && b != k->out)
			fprintf(f, " b%u", b);
	fprintf(f, "%s\n", u.seed ? " runseed" : "");
	fputs(c->fused ? "static __device__ void\n" : "extern \"C\" __global__ void\n", f);
	kernel_name(f, p->name, ki, k->what);
	fprintf(f, "(%s *__restrict__ b%u", csty(st), k->out);
	for (uint32_t b = 0; b < p->nbuf; b++)
		if (u.buf[b] && b != k->out)
			fprintf(f, ", const %s *__restrict__ b%u", csty(p->buf[b].dtype), b);
	fprintf(f, "%s)\n{\n", u.seed ? ", unsigned long long runseed" : "");
	int br = blockred(p, k);
	if (br) {
		// One block per output point (grid-stride over blocks).
		fprintf(f, "\t__shared__ %s red[256];\n", cty((DType)p->x[k->body].dtype));
		fprintf(f, "\tfor (long long t = blockIdx.x; t < %lldLL; t += gridDim.x) {\n",
		        (long long)npt);
	} else
		fprintf(
		    f,
		    "\tfor (long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x; t < %lldLL;\n"
		    "\t     t += (long long)blockDim.x * gridDim.x) {\n",
		    (long long)npt);
	c->depth = 2;
	// Parallel variables: row-major coordinates of point t.
	int64_t stride = 1;
	for (int d = k->rank - 1; d >= 0; d--) {
		if (u.var[d] && k->dim[d] > 1) {
			indent(c);
			if (d == 0)
				fprintf(f, "const long long i%d = t / %lldLL;\n", d,
				        (long long)stride);
			else
				fprintf(f, "const long long i%d = t / %lldLL %% %lldLL;\n", d,
				        (long long)stride, (long long)k->dim[d]);
		}
		stride *= k->dim[d];
	}
	KxId val = k->red ? k->post : k->body;
	DType vt = (DType)p->x[k->body].dtype;
	if (br) {
		int64_t nr = 1;
		for (int d = 0; d < k->rrank; d++)
			nr *= k->rdim[d];
		indent(c);
		fprintf(f, "%s acc = ", cty(vt));
		red_init(c, k->red, vt);
		fputs(";\n", f);
		indent(c);
		fprintf(f, "for (long long r = threadIdx.x; r < %lldLL; r += blockDim.x) {\n",
		        (long long)nr);
		c->depth++;
		int64_t rs = 1;
		for (int d = k->rrank - 1; d >= 0; d--) {
			int v = k->rank + d;
			if (v < 2 * IR_MAXDIM && u.var[v]) {
				indent(c);
				fprintf(f, "const long long i%d = r / %lldLL %% %lldLL;\n", v, (long long)rs,
				        (long long)k->rdim[d]);
			}
			rs *= k->rdim[d];
		}
		c->region++;
		ensure(c, k->body);
		red_combine(c, k->red, vt, k->body);
		c->depth--;
		indent(c);
		fputs("}\n", f);
		// The tree over the block's partial results.
		indent(c);
		fputs("red[threadIdx.x] = acc;\n", f);
		indent(c);
		fputs("__syncthreads();\n", f);
		indent(c);
		fputs("for (int s = blockDim.x / 2; s > 0; s >>= 1) {\n", f);
		c->depth++;
		indent(c);
		fputs("if (threadIdx.x < s) {\n", f);
		c->depth++;
		indent(c);
		fprintf(f, "const %s o = red[threadIdx.x + s];\n", cty(vt));
		red_combine_var(c, k->red, vt, "o");
		indent(c);
		fputs("red[threadIdx.x] = acc;\n", f);
		c->depth--;
		indent(c);
		fputs("}\n", f);
		indent(c);
		fputs("__syncthreads();\n", f);
		c->depth--;
		indent(c);
		fputs("}\n", f);
		indent(c);
		fputs("if (threadIdx.x == 0) {\n", f);
		c->depth++;
		indent(c);
		fputs("acc = red[0];\n", f);
	} else if (k->red) {
		indent(c);
		fprintf(f, "%s acc = ", cty(vt));
		red_init(c, k->red, vt);
		fputs(";\n", f);
		for (int d = 0; d < k->rrank; d++) {
			int v = k->rank + d;
			indent(c);
			fprintf(f, "for (long long i%d = 0; i%d < %lldLL; i%d++) {\n", v, v,
			        (long long)k->rdim[d], v);
			c->depth++;
		}
		c->region++;
		ensure(c, k->body);
		red_combine(c, k->red, vt, k->body);
		for (int d = 0; d < k->rrank; d++) {
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
	if (br) {
		// red[] is read by thread 0 above and rewritten by the next point.
		c->depth--;
		indent(c);
		fputs("}\n", f);
		indent(c);
		fputs("__syncthreads();\n", f);
	}
	fputs("\t}\n}\n", f);
	free(u.seen);
	free(u.buf);
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
	// Loops (scan) and host kernels (linear_sum_assignment) of the kernel
	// IR have no CUDA form yet (codegen/llvm.c runs them on the CPU).
	int host = 0;
	for (uint32_t i = 0; i < p->nk; i++)
		host |= p->k[i].host != KH_NONE;
	if (p->nloop || host) {
		fclose(c.f);
		free(buf);
		free(c.stamp);
		snprintf(err, errlen, "error: task '%s': the CUDA backend does not support %s yet",
		         p->name ? p->name : "", p->nloop ? "scan (kernel loops)" : "host ops");
		return NULL;
	}
	int polygamma = 0;
	for (KxId id = 1; id < p->nx; id++)
		polygamma |= p->x[id].op == KX_POLYGAMMA;
	fprintf(
	    c.f,
	    "// task %s: %u kernels, generated by fadc from the kernel IR (codegen/cuda.c).\n"
	    "// Buffers b<N> are dense and row-major; one thread per output point, grid-stride.\n",
	    p->name ? p->name : "", p->nk);
	if (polygamma)
		fputs(polygamma_src, c.f);
	c.fused = fused(p);
	for (uint32_t i = 0; i < p->nk && !c.bad; i++)
		print_kernel(&c, i);
	if (c.fused && !c.bad)
		print_fused(&c);
	fclose(c.f);
	free(c.stamp);
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

// The source with line numbers, for diagnostics.
static void
print_numbered(FILE *f, const char *src) {
	int line = 1;
	for (const char *s = src; *s;) {
		const char *e = strchr(s, '\n');
		size_t n = e ? (size_t)(e - s) : strlen(s);
		fprintf(f, "%5d | %.*s\n", line++, (int)n, s);
		s += n + (e != NULL);
	}
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
		fprintf(f, "NVRTC: compiling %s for %s failed: %s\n%s\n--- generated source:\n",
		        name ? name : "fadc.cu", arch, nvrtcGetErrorString(cr), log);
		print_numbered(f, src);
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
