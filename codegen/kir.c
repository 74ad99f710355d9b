// codegen/kir.c -- the kernel IR: programs, buffers, hash-consed
// expressions, the integer index simplifier and the printer.
//
// Every expression is made by intern(), which looks the node up in an
// open-addressing table over its bytes (Kx has no padding holes and no
// pointers), so structurally equal expressions share one id.  Ids grow in
// creation order and operands are always created first, so id order is a
// topological order of the expression DAG, as with graph nodes.
//
// Index arithmetic goes through linear forms: an I64 expression is read as
// c + sum coef_k * atom_k, where an atom is anything that is not an
// addition, a multiplication by a constant or a constant (a loop variable,
// a division, a loaded index).  Sums and products by constants are rebuilt
// in one canonical order (atoms by id), so equal sums get equal ids.
// Division and modulo by a constant d use the atoms' ranges (a loop
// variable v of extent n lies in [0, n)):
//   floor((d Q + R) / d) = Q + floor(R / d)   and   floor(R / d) = k when
//   R's range lies in [k d, (k + 1) d);
//   (d Q + R) mod d = R mod d, and R mod d = R when R's range is in [0, d).
// That is what turns the coordinate (e / stride) % dim of a row-major flat
// index e = sum_i v_i stride_i back into the loop variable v, so layout
// ops compose into affine indices with no division left.
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "kir.h"

// ---------------------------------------------------------------- programs

// kx_range's memo: an entry per expression (p->rcache, grown with p->x).
typedef struct KxRange {
	int64_t lo, hi;
	uint8_t state; // 0 not computed yet, 1 unknown, 2 [lo, hi]
} KxRange;

struct KxRangeCache {
	KxRange *r;
	uint32_t cap;
	// Blocks that the growable arrays below (x, xhash, k, buf and r) have
	// outgrown, freed by kir_program_trim (see grow).
	void **old;
	uint32_t nold, cold;
	// kx_shape's memo: the structural hash of every expression below
	// shdone (filled in id order: operands come first).
	uint64_t *sh;
	uint32_t shcap, shdone;
};

// The growable arrays of a program (x, xhash, k, buf, the range memo) are
// malloc'd, not in the arena: growing one in the arena leaves every
// earlier copy there for the program's life (twice the final size in
// all), and the last doubling up to half unused, which made 143 MB of the
// 92,000 kernels of a 16,000-statement chain's vhp.  A block outgrown is
// not freed at once but retired: code may still read through a pointer
// into it taken before the growth (a Kx * across a kx_ call that interns),
// as it could with the arena's copies.  kir_program_trim frees them, at a
// point where nobody holds such a pointer (the end of cg_lower), and
// shrinks each array to its size.
static void
grow_in(struct KxRangeCache *c, void **arr, uint32_t *cap, uint32_t need, size_t size)
{
	if (need <= *cap)
		return;
	uint32_t ncap = *cap ? *cap : 8;
	while (ncap < need) {
		FADC_ASSERT(ncap < (1u << 30), "kir: a program too large for 32-bit ids");
		ncap *= 2;
	}
	void *np = calloc(ncap, size); // zeroed, as the arena's were: the memo's 0 is "not computed"
	FADC_ASSERT(np != NULL, "kir: out of memory");
	if (*cap)
		memcpy(np, *arr, (size_t)*cap * size);
	if (*arr) {
		if (c->nold == c->cold) {
			c->cold = c->cold ? 2 * c->cold : 16;
			c->old = realloc(c->old, c->cold * sizeof *c->old);
			FADC_ASSERT(c->old != NULL, "kir: out of memory");
		}
		c->old[c->nold++] = *arr;
	}
	*arr = np;
	*cap = ncap;
}

static void
grow(KProgram *p, void **arr, uint32_t *cap, uint32_t need, size_t size)
{
	grow_in(p->rcache, arr, cap, need, size);
}

// Array arr of cap elements shrunk to n (at least 1), in place or moved.
static void
shrink(void **arr, uint32_t *cap, uint32_t n, size_t size)
{
	if (!*arr || n >= *cap)
		return;
	if (n == 0)
		n = 1;
	void *np = realloc(*arr, (size_t)n * size);
	if (np) { // a failed shrink keeps the larger block
		*arr = np;
		*cap = n;
	}
}

void
kir_program_trim(KProgram *p)
{
	struct KxRangeCache *c = p->rcache;
	for (uint32_t i = 0; i < c->nold; i++)
		free(c->old[i]);
	free(c->old);
	c->old = NULL;
	c->nold = c->cold = 0;
	shrink((void **)&p->x, &p->cx, p->nx, sizeof *p->x);
	// The structural hashes stay: they are a function of the expressions.
	shrink((void **)&p->k, &p->ck, p->nk, sizeof *p->k);
	shrink((void **)&p->buf, &p->cbuf, p->nbuf, sizeof *p->buf);
	// The range memo is rebuilt as asked (kx_range); most of it was for
	// the lowering's own simplifications.
	free(c->r);
	c->r = NULL;
	c->cap = 0;
}

KProgram *
kir_program_new(const char *name, DType fcompute)
{
	Arena *a = arena_new();
	KProgram *p = arena_zalloc(a, sizeof *p);
	p->arena = a;
	p->name = arena_strdup(a, name);
	p->fcompute = fcompute;
	p->nx = 1; // x[0] is "no expression"
	p->rcache = arena_zalloc(a, sizeof *p->rcache);
	grow(p, (void **)&p->x, &p->cx, 256, sizeof *p->x);
	p->cxhash = 1024;
	p->xhash = calloc(p->cxhash, sizeof *p->xhash);
	FADC_ASSERT(p->xhash != NULL, "kir: out of memory");
	return p;
}

void
kir_program_free(KProgram *p)
{
	if (!p)
		return;
	kir_program_trim(p);
	free(p->rcache->sh);
	free(p->x);
	free(p->xhash);
	free(p->k);
	free(p->buf);
	arena_free(p->arena);
}

// ---------------------------------------------------------------- FADC_TIME

static double
seconds(clockid_t c)
{
	struct timespec ts;
	clock_gettime(c, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

KTime
kir_time_start(void)
{
	static int on = -1;
	if (on < 0) {
		const char *v = getenv("FADC_TIME");
		on = v && *v && strcmp(v, "0");
	}
	KTime t = {0, 0, on};
	if (on) {
		t.wall = seconds(CLOCK_MONOTONIC);
		t.cpu = seconds(CLOCK_PROCESS_CPUTIME_ID); // every thread of the process
	}
	return t;
}

void
kir_time_note(KTime t, const char *phase, const char *what)
{
	if (!t.on)
		return;
	// The resident memory now (statm's second field, pages) and the peak
	// so far (ru_maxrss, KiB): which phase holds the memory of a compile.
	long pages = 0, rss = 0;
	FILE *f = fopen("/proc/self/statm", "r");
	if (f) {
		if (fscanf(f, "%ld %ld", &pages, &rss) != 2)
			rss = 0;
		fclose(f);
	}
	struct rusage ru;
	long peak = getrusage(RUSAGE_SELF, &ru) ? 0 : ru.ru_maxrss;
	fprintf(stderr, "fadc: time: %s %s: %.3f s wall, %.3f s cpu, rss %ld MB (peak %ld MB)\n", phase,
	        what ? what : "", seconds(CLOCK_MONOTONIC) - t.wall, seconds(CLOCK_PROCESS_CPUTIME_ID) - t.cpu,
	        rss * 4096 / 1000000, peak * 1024 / 1000000);
}

size_t
kir_dtype_size(DType dt)
{
	switch (dt) {
	case DT_F32:
		return 4;
	case DT_F64:
	case DT_I64:
		return 8;
	case DT_BOOL:
		return 1;
	default:
		return 0;
	}
}

DType
kir_compute_dtype(const KProgram *p, DType storage)
{
	return storage == DT_F32 ? p->fcompute : storage;
}

int64_t
kir_shape_bytes(DType dt, const Shape *s)
{
	// An empty value holds no byte, whatever its other dims.
	for (int i = 0; i < s->rank; i++)
		if (s->dim[i] == 0)
			return 0;
	int64_t b = (int64_t)kir_dtype_size(dt);
	for (int i = 0; i < s->rank; i++)
		if (__builtin_mul_overflow(b, s->dim[i], &b) || b > KIR_MAX_BUF_BYTES)
			return -1;
	return b;
}

uint32_t
kir_buf_add(KProgram *p, KBufKind kind, int index, DType dt, const Shape *s, NodeId node)
{
	int64_t bytes = kir_shape_bytes(dt, s);
	FADC_ASSERT(bytes >= 0, "kir_buf_add: a buffer above KIR_MAX_BUF_BYTES (cg_lower refuses those)");
	grow(p, (void **)&p->buf, &p->cbuf, p->nbuf + 1, sizeof *p->buf);
	KBuf *b = &p->buf[p->nbuf];
	memset(b, 0, sizeof *b);
	b->kind = kind;
	b->index = index;
	b->dtype = dt;
	b->shape = *s;
	b->bytes = bytes;
	b->node = node;
	b->first = b->last = -1;
	return p->nbuf++;
}

KKernel *
kir_kernel_add(KProgram *p)
{
	grow(p, (void **)&p->k, &p->ck, p->nk + 1, sizeof *p->k);
	KKernel *k = &p->k[p->nk++];
	memset(k, 0, sizeof *k);
	return k;
}

int
kir_loop_begin(KProgram *p, int64_t trip, int parent)
{
	arena_grow(p->arena, (void **)&p->loop, &p->cloop, p->nloop + 1, sizeof *p->loop);
	KLoop *l = &p->loop[p->nloop];
	l->begin = l->end = p->nk;
	l->trip = trip;
	l->parent = parent;
	return (int)p->nloop++;
}

void
kir_loop_end(KProgram *p, int loop)
{
	FADC_ASSERT(loop >= 0 && (uint32_t)loop < p->nloop, "kir_loop_end: no such loop");
	p->loop[loop].end = p->nk;
}

// ---------------------------------------------------------------- hash-consing

static uint32_t
kx_hash(const Kx *x)
{
	const unsigned char *b = (const unsigned char *)x;
	uint32_t h = 2166136261u;
	for (size_t i = 0; i < sizeof *x; i++)
		h = (h ^ b[i]) * 16777619u;
	return h ? h : 1;
}

static void
rehash(KProgram *p)
{
	uint32_t c = p->cxhash * 2;
	FADC_ASSERT(c != 0, "kir: a program too large for 32-bit ids");
	uint32_t *t = calloc(c, sizeof *t);
	FADC_ASSERT(t != NULL, "kir: out of memory");
	for (KxId id = 1; id < p->nx; id++) {
		uint32_t h = kx_hash(&p->x[id]) & (c - 1);
		while (t[h])
			h = (h + 1) & (c - 1);
		t[h] = id;
	}
	free(p->xhash); // intern holds no pointer into it across a rehash
	p->xhash = t;
	p->cxhash = c;
}

static KxId
intern(KProgram *p, Kx *x)
{
	uint32_t mask = p->cxhash - 1, h = kx_hash(x) & mask;
	for (; p->xhash[h]; h = (h + 1) & mask)
		if (!memcmp(&p->x[p->xhash[h]], x, sizeof *x))
			return p->xhash[h];
	grow(p, (void **)&p->x, &p->cx, p->nx + 1, sizeof *p->x);
	KxId id = p->nx++;
	p->x[id] = *x;
	p->xhash[h] = id;
	if (p->nx * 2 > p->cxhash)
		rehash(p);
	return id;
}

static KxId
mk(KProgram *p, KxOp op, DType dt, uint32_t aux, int nin, KxId a0, KxId a1, KxId a2)
{
	Kx x;
	memset(&x, 0, sizeof x);
	x.op = (uint8_t)op;
	x.dtype = (uint8_t)dt;
	x.nin = (uint8_t)nin;
	x.aux = aux;
	x.a[0] = a0;
	x.a[1] = a1;
	x.a[2] = a2;
	for (int i = 0; i < nin; i++)
		FADC_ASSERT(x.a[i] > 0 && x.a[i] < p->nx, "kir: operand is not an expression");
	return intern(p, &x);
}

// ---------------------------------------------------------------- leaves

// A double's integer value as an I64, without undefined behaviour
// (ir_float_int: truncation, saturation, NaN 0).  An i64 `full` does not
// come here: lowering passes its exact integer to kx_iconst (ir.h,
// AttrVal); what does is a double made i64 by an op (a clamp bound).
static int64_t
f2i64(double v)
{
	return ir_float_int(v);
}

KxId
kx_const(KProgram *p, double v, DType dt)
{
	Kx x;
	memset(&x, 0, sizeof x);
	x.op = KX_CONST;
	x.dtype = (uint8_t)dt;
	switch (dt) {
	case DT_F32:
		x.f = (double)(float)v;
		break;
	case DT_F64:
		x.f = v;
		break;
	case DT_I64:
		x.i = f2i64(v);
		break;
	case DT_BOOL:
		x.i = v != 0;
		break;
	default:
		FADC_ASSERT(0, "kx_const: not a value dtype");
	}
	return intern(p, &x);
}

KxId
kx_iconst(KProgram *p, int64_t v)
{
	Kx x;
	memset(&x, 0, sizeof x);
	x.op = KX_CONST;
	x.dtype = DT_I64;
	x.i = v;
	return intern(p, &x);
}

KxId
kx_bconst(KProgram *p, int v)
{
	Kx x;
	memset(&x, 0, sizeof x);
	x.op = KX_CONST;
	x.dtype = DT_BOOL;
	x.i = v != 0;
	return intern(p, &x);
}

KxId
kx_var(KProgram *p, int var, int64_t extent)
{
	if (extent == 1)
		return kx_iconst(p, 0);
	Kx x;
	memset(&x, 0, sizeof x);
	x.op = KX_VAR;
	x.dtype = DT_I64;
	x.aux = (uint32_t)var;
	x.i = extent;
	return intern(p, &x);
}

KxId
kx_step(KProgram *p, int loop)
{
	FADC_ASSERT(loop >= 0 && (uint32_t)loop < p->nloop, "kx_step: no such loop");
	if (p->loop[loop].trip <= 1)
		return kx_iconst(p, 0);
	Kx x;
	memset(&x, 0, sizeof x);
	x.op = KX_STEP;
	x.dtype = DT_I64;
	x.aux = (uint32_t)loop;
	x.i = p->loop[loop].trip;
	return intern(p, &x);
}

KxId
kx_load(KProgram *p, uint32_t buf, KxId index)
{
	FADC_ASSERT(buf < p->nbuf, "kx_load: no such buffer");
	FADC_ASSERT(p->x[index].dtype == DT_I64, "kx_load: the index must be I64");
	return mk(p, KX_LOAD, kir_compute_dtype(p, p->buf[buf].dtype), buf, 1, index, 0, 0);
}

KxId
kx_acc(KProgram *p, DType dt)
{
	return mk(p, KX_ACC, dt, 0, 0, 0, 0, 0);
}

KxId
kx_runseed(KProgram *p)
{
	p->uses_runseed = 1;
	return mk(p, KX_RUNSEED, DT_I64, 0, 0, 0, 0, 0);
}

// ---------------------------------------------------------------- values

static int
is_float(DType t)
{
	return t == DT_F32 || t == DT_F64;
}

KxId
kx_un(KProgram *p, KxOp op, KxId a)
{
	DType t = (DType)p->x[a].dtype;
	switch (op) {
	case KX_NEG:
	case KX_ABS:
		FADC_ASSERT(t != DT_BOOL, "kx_un: arithmetic on bool");
		break;
	case KX_NOT:
		FADC_ASSERT(t == DT_BOOL, "kx_un: not of a non-bool");
		break;
	default:
		FADC_ASSERT(is_float(t), "kx_un: a float function of a non-float");
	}
	return mk(p, op, t, 0, 1, a, 0, 0);
}

// kx_shape's and llvm.c shape_hash's node hash (kir.h).
uint64_t
kx_node_fnv(const KProgram *p, const Kx *x, int fvalue)
{
	Kx n = *x;
	n.aux = x->op == KX_LOAD ? (uint32_t)p->buf[x->aux].dtype : x->op == KX_STEP ? 0 : x->aux;
	if (!fvalue && x->op == KX_CONST && is_float((DType)x->dtype))
		n.f = 0;
	for (int k = 0; k < 3; k++)
		n.a[k] = 0;
	uint64_t h = 14695981039346656037ull;
	const uint8_t *b = (const uint8_t *)&n;
	for (size_t k = 0; k < sizeof n; k++)
		h = (h ^ b[k]) * 1099511628211ull;
	return h;
}

uint64_t
kx_fnv_u64(uint64_t h, uint64_t v)
{
	for (int q = 0; q < 8; q++)
		h = (h ^ (uint8_t)(v >> (8 * q))) * 1099511628211ull;
	return h;
}

// The structural hash of expression id: its node with its operands'
// hashes in place of their ids, a load's buffer and a step's loop left out
// (their dtypes kept) and a float constant's value left out.  It orders a
// commutative op's operands (kx_bin) by what they compute rather than by
// id: ids follow creation order, and a one-line edit of a model (a batch
// norm's eps) changes which kernel first creates a constant, so with id
// order an unrelated kernel printed `x0 + eps` before and `eps + x0` after
// and its CUDA program missed the compile cache.  The constant's value is
// left out so that kernels differing only in a constant order alike (they
// print alike once kir_consts takes the constants out); a load's buffer,
// so that kernels differing only in their buffers do (the printers'
// sharing renames buffers).  Filled in id order, without recursion (a
// deep DAG): operands have smaller ids.
uint64_t
kx_shape(const KProgram *p, KxId id)
{
	struct KxRangeCache *c = p->rcache;
	if (id < c->shdone)
		return c->sh[id];
	grow_in(c, (void **)&c->sh, &c->shcap, id + 1, sizeof *c->sh);
	for (KxId i = c->shdone; i <= id; i++) {
		const Kx *x = &p->x[i];
		uint64_t h = kx_node_fnv(p, x, 0);
		for (int k = 0; k < x->nin && i; k++)
			h = kx_fnv_u64(h, c->sh[x->a[k]]);
		c->sh[i] = h;
	}
	c->shdone = id + 1;
	return c->sh[id];
}

KxId
kx_bin(KProgram *p, KxOp op, KxId a, KxId b)
{
	DType t = (DType)p->x[a].dtype;
	FADC_ASSERT(t == p->x[b].dtype, "kx_bin: operands of different dtypes");
	switch (op) {
	case KX_ADD:
	case KX_MUL:
	case KX_MAX:
	case KX_MIN:
	case KX_AND:
	case KX_OR:
		// Commutative: one canonical order, for sharing and for printed
		// text that an unrelated edit does not change (kx_shape); ids
		// break a tie (equal hashes: a collision, or equal but for a
		// constant's value or a buffer).  Exact: IEEE addition and
		// multiplication are commutative, and so are the NaN-propagating
		// max and min (either NaN gives NaN).
		{
			uint64_t ha = kx_shape(p, a), hb = kx_shape(p, b);
			if (ha > hb || (ha == hb && a > b)) {
				KxId c = a;
				a = b;
				b = c;
			}
		}
		break;
	default:
		break;
	}
	if (op == KX_AND || op == KX_OR)
		FADC_ASSERT(t == DT_BOOL, "kx_bin: logic on non-bools");
	else if (op == KX_DIV || op == KX_POW)
		FADC_ASSERT(is_float(t), "kx_bin: float op on non-floats");
	else
		FADC_ASSERT(t != DT_BOOL, "kx_bin: arithmetic on bools");
	return mk(p, op, t, 0, 2, a, b, 0);
}

KxId
kx_cmp(KProgram *p, KCmp c, KxId a, KxId b)
{
	FADC_ASSERT(p->x[a].dtype == p->x[b].dtype, "kx_cmp: operands of different dtypes");
	return mk(p, KX_CMP, DT_BOOL, c, 2, a, b, 0);
}

KxId
kx_select(KProgram *p, KxId c, KxId a, KxId b)
{
	FADC_ASSERT(p->x[c].dtype == DT_BOOL, "kx_select: condition must be bool");
	FADC_ASSERT(p->x[a].dtype == p->x[b].dtype, "kx_select: arms of different dtypes");
	if (a == b)
		return a;
	if (p->x[c].op == KX_CONST)
		return p->x[c].i ? a : b;
	return mk(p, KX_SELECT, (DType)p->x[a].dtype, 0, 3, c, a, b);
}

KxId
kx_cast(KProgram *p, KxId a, DType to)
{
	DType from = (DType)p->x[a].dtype, ct = kir_compute_dtype(p, to);
	// Rounding to f32 while computing in f64 is a cast of its own.
	if (from == ct && !(to == DT_F32 && ct == DT_F64))
		return a;
	return mk(p, KX_CAST, ct, to, 1, a, 0, 0);
}

KxId
kx_polygamma(KProgram *p, KxId n, KxId x)
{
	FADC_ASSERT(p->x[n].dtype == p->x[x].dtype && is_float((DType)p->x[x].dtype),
	            "kx_polygamma: float operands");
	return mk(p, KX_POLYGAMMA, (DType)p->x[x].dtype, 0, 2, n, x, 0);
}

KxId
kx_rand(KProgram *p, KRand kind, int64_t seed, KxId index, KxId alpha)
{
	kx_runseed(p);
	Kx x;
	memset(&x, 0, sizeof x);
	x.op = KX_RAND;
	x.dtype = DT_F64;
	x.aux = kind;
	x.nin = alpha ? 2 : 1;
	x.a[0] = index;
	x.a[1] = alpha;
	x.i = seed;
	FADC_ASSERT(p->x[index].dtype == DT_I64, "kx_rand: the index must be I64");
	FADC_ASSERT(!alpha || p->x[alpha].dtype == DT_F64, "kx_rand: gamma's shape must be F64");
	return intern(p, &x);
}

// ---------------------------------------------------------------- index arithmetic

#define LIN_MAX 32

typedef struct Lin {
	int ok; // 0: too many terms, treat the expression as one atom
	int n;
	int64_t c;
	KxId atom[LIN_MAX];
	int64_t coef[LIN_MAX];
} Lin;

static void
lin_atom(Lin *l, KxId atom, int64_t coef)
{
	for (int i = 0; i < l->n; i++)
		if (l->atom[i] == atom) {
			l->coef[i] += coef;
			return;
		}
	if (l->n == LIN_MAX) {
		l->ok = 0;
		return;
	}
	l->atom[l->n] = atom;
	l->coef[l->n++] = coef;
}

static void
lin_add(const KProgram *p, Lin *l, KxId id, int64_t scale)
{
	const Kx *x = &p->x[id];
	switch (x->op) {
	case KX_CONST:
		l->c += scale * x->i;
		return;
	case KX_IADD:
		lin_add(p, l, x->a[0], scale);
		lin_add(p, l, x->a[1], scale);
		return;
	case KX_IMUL:
		if (p->x[x->a[1]].op == KX_CONST) {
			lin_add(p, l, x->a[0], scale * p->x[x->a[1]].i);
			return;
		}
		break;
	default:
		break;
	}
	lin_atom(l, id, scale);
}

static Lin
lin_of(const KProgram *p, KxId id)
{
	Lin l = {.ok = 1};
	lin_add(p, &l, id, 1);
	return l;
}

// The canonical expression of a linear form: atoms by increasing id, each
// times its coefficient, summed left to right, the constant last.
static KxId
lin_build(KProgram *p, const Lin *l)
{
	KxId atom[LIN_MAX];
	int64_t coef[LIN_MAX];
	int n = 0;
	for (int i = 0; i < l->n; i++) {
		if (!l->coef[i])
			continue;
		int j = n++;
		while (j > 0 && atom[j - 1] > l->atom[i]) {
			atom[j] = atom[j - 1];
			coef[j] = coef[j - 1];
			j--;
		}
		atom[j] = l->atom[i];
		coef[j] = l->coef[i];
	}
	KxId acc = 0;
	for (int i = 0; i < n; i++) {
		KxId t = coef[i] == 1 ? atom[i] : mk(p, KX_IMUL, DT_I64, 0, 2, atom[i], kx_iconst(p, coef[i]), 0);
		acc = acc ? mk(p, KX_IADD, DT_I64, 0, 2, acc, t, 0) : t;
	}
	if (l->c || !acc) {
		KxId c = kx_iconst(p, l->c);
		acc = acc ? mk(p, KX_IADD, DT_I64, 0, 2, acc, c, 0) : c;
	}
	return acc;
}

static int64_t
floordiv(int64_t a, int64_t d)
{
	int64_t q = a / d;
	return (a % d != 0 && (a < 0) != (d < 0)) ? q - 1 : q;
}

static int range_op(const KProgram *p, KxRange *memo, KxId id, int64_t *lo, int64_t *hi);

// kx_range: each operand's range is looked up in memo, or computed and
// stored there.
static int
range_of(const KProgram *p, KxRange *memo, KxId id, int64_t *lo, int64_t *hi)
{
	if (memo[id].state) {
		*lo = memo[id].lo;
		*hi = memo[id].hi;
		return memo[id].state == 2;
	}
	int ok = range_op(p, memo, id, lo, hi);
	memo[id] = (KxRange){ok ? *lo : 0, ok ? *hi : 0, (uint8_t)(ok ? 2 : 1)};
	return ok;
}

int
kx_range(const KProgram *p, KxId id, int64_t *lo, int64_t *hi)
{
	struct KxRangeCache *c = p->rcache;
	if (c->cap < p->nx)
		grow_in(c, (void **)&c->r, &c->cap, p->nx, sizeof *c->r);
	return range_of(p, c->r, id, lo, hi);
}

// The range of expression id from its operands' (range_of).
static int
range_op(const KProgram *p, KxRange *memo, KxId id, int64_t *lo, int64_t *hi)
{
	const Kx *x = &p->x[id];
	int64_t l0, h0, l1, h1;
	switch (x->op) {
	case KX_CONST:
		if (x->dtype != DT_I64 && x->dtype != DT_BOOL)
			return 0;
		*lo = *hi = x->i;
		return 1;
	case KX_VAR:
	case KX_STEP:
		*lo = 0;
		*hi = x->i - 1;
		return 1;
	case KX_IADD:
		if (!range_of(p, memo, x->a[0], &l0, &h0) || !range_of(p, memo, x->a[1], &l1, &h1))
			return 0;
		*lo = l0 + l1;
		*hi = h0 + h1;
		return 1;
	case KX_IMUL: {
		if (!range_of(p, memo, x->a[0], &l0, &h0) || !range_of(p, memo, x->a[1], &l1, &h1))
			return 0;
		int64_t c[4] = {l0 * l1, l0 * h1, h0 * l1, h0 * h1};
		*lo = *hi = c[0];
		for (int i = 1; i < 4; i++) {
			*lo = c[i] < *lo ? c[i] : *lo;
			*hi = c[i] > *hi ? c[i] : *hi;
		}
		return 1;
	}
	case KX_IDIV: {
		int64_t d = p->x[x->a[1]].i;
		if (!range_of(p, memo, x->a[0], &l0, &h0))
			return 0;
		*lo = floordiv(l0, d);
		*hi = floordiv(h0, d);
		return 1;
	}
	case KX_IMOD: {
		int64_t d = p->x[x->a[1]].i;
		if (range_of(p, memo, x->a[0], &l0, &h0) && l0 >= 0 && h0 < d) {
			*lo = l0;
			*hi = h0;
		} else {
			*lo = 0;
			*hi = d - 1;
		}
		return 1;
	}
	case KX_IMIN:
	case KX_IMAX: {
		int r0 = range_of(p, memo, x->a[0], &l0, &h0), r1 = range_of(p, memo, x->a[1], &l1, &h1);
		if (x->op == KX_IMIN) {
			// min(a, b) <= the upper bound of either; its lower bound needs both.
			if (r0 && r1) {
				*lo = l0 < l1 ? l0 : l1;
				*hi = h0 < h1 ? h0 : h1;
				return 1;
			}
			// A clamp, min(max(a, c), d) of an unbounded a (a loaded
			// index): max(a, c) >= min of c's range, d bounds above.
			for (int s = 0; s < 2; s++) {
				const Kx *m = &p->x[x->a[s]];
				int64_t lc, hc;
				if ((s ? r0 : r1) && m->op == KX_IMAX &&
				    (range_of(p, memo, m->a[0], &lc, &hc) || range_of(p, memo, m->a[1], &lc, &hc))) {
					int64_t lb = s ? l0 : l1;
					*lo = lc < lb ? lc : lb;
					*hi = s ? h0 : h1;
					return 1;
				}
			}
			return 0;
		}
		if (r0 && r1) {
			*lo = l0 > l1 ? l0 : l1;
			*hi = h0 > h1 ? h0 : h1;
			return 1;
		}
		return 0;
	}
	case KX_SELECT:
		// Either arm: the hull of theirs (a search's bounds, lower.c's
		// segment take_add, stay int32 indices in the CUDA printer).
		if (x->dtype != DT_I64 || !range_of(p, memo, x->a[1], &l0, &h0) ||
		    !range_of(p, memo, x->a[2], &l1, &h1))
			return 0;
		*lo = l0 < l1 ? l0 : l1;
		*hi = h0 > h1 ? h0 : h1;
		return 1;
	default:
		return 0;
	}
}

static int
lin_range(const KProgram *p, const Lin *l, int64_t *lo, int64_t *hi)
{
	*lo = *hi = l->c;
	for (int i = 0; i < l->n; i++) {
		int64_t a, b;
		if (!kx_range(p, l->atom[i], &a, &b))
			return 0;
		int64_t c = l->coef[i];
		*lo += c >= 0 ? c * a : c * b;
		*hi += c >= 0 ? c * b : c * a;
	}
	return 1;
}

static int
depends_on(const KProgram *p, KxId id, int var)
{
	const Kx *x = &p->x[id];
	if (x->op == KX_VAR)
		return x->aux == (uint32_t)var;
	for (int i = 0; i < x->nin; i++)
		if (depends_on(p, x->a[i], var))
			return 1;
	return 0;
}

int
kx_affine_coef(const KProgram *p, KxId e, int var, int64_t *coef)
{
	Lin l = lin_of(p, e);
	*coef = 0;
	if (!l.ok)
		return 0;
	for (int i = 0; i < l.n; i++) {
		const Kx *a = &p->x[l.atom[i]];
		if (a->op == KX_VAR && a->aux == (uint32_t)var)
			*coef += l.coef[i];
		else if (depends_on(p, l.atom[i], var))
			return 0;
	}
	return 1;
}

KxId
kx_iadd(KProgram *p, KxId a, KxId b)
{
	FADC_ASSERT(p->x[a].dtype == DT_I64 && p->x[b].dtype == DT_I64, "kx_iadd: I64 operands");
	Lin l = lin_of(p, a), r = lin_of(p, b);
	if (!l.ok || !r.ok)
		return mk(p, KX_IADD, DT_I64, 0, 2, a, b, 0);
	l.c += r.c;
	for (int i = 0; i < r.n && l.ok; i++)
		lin_atom(&l, r.atom[i], r.coef[i]);
	return l.ok ? lin_build(p, &l) : mk(p, KX_IADD, DT_I64, 0, 2, a, b, 0);
}

KxId
kx_imul(KProgram *p, KxId a, int64_t c)
{
	FADC_ASSERT(p->x[a].dtype == DT_I64, "kx_imul: an I64 operand");
	Lin l = lin_of(p, a);
	if (!l.ok)
		return mk(p, KX_IMUL, DT_I64, 0, 2, a, kx_iconst(p, c), 0);
	l.c *= c;
	for (int i = 0; i < l.n; i++)
		l.coef[i] *= c;
	return lin_build(p, &l);
}

KxId
kx_idiv(KProgram *p, KxId a, int64_t d)
{
	FADC_ASSERT(d > 0 && p->x[a].dtype == DT_I64, "kx_idiv: I64 by a positive constant");
	if (d == 1)
		return a;
	Lin l = lin_of(p, a);
	if (!l.ok)
		return mk(p, KX_IDIV, DT_I64, 0, 2, a, kx_iconst(p, d), 0);
	Lin q = {.ok = 1}, r = {.ok = 1};
	q.c = floordiv(l.c, d);
	r.c = l.c - q.c * d;
	for (int i = 0; i < l.n; i++) {
		if (l.coef[i] % d == 0)
			lin_atom(&q, l.atom[i], l.coef[i] / d);
		else
			lin_atom(&r, l.atom[i], l.coef[i]);
	}
	int64_t lo, hi;
	if (lin_range(p, &r, &lo, &hi) && floordiv(lo, d) == floordiv(hi, d)) {
		q.c += floordiv(lo, d);
		return lin_build(p, &q);
	}
	KxId rest = mk(p, KX_IDIV, DT_I64, 0, 2, lin_build(p, &r), kx_iconst(p, d), 0);
	return kx_iadd(p, lin_build(p, &q), rest);
}

KxId
kx_imod(KProgram *p, KxId a, int64_t d)
{
	FADC_ASSERT(d > 0 && p->x[a].dtype == DT_I64, "kx_imod: I64 by a positive constant");
	if (d == 1)
		return kx_iconst(p, 0);
	Lin l = lin_of(p, a);
	if (!l.ok)
		return mk(p, KX_IMOD, DT_I64, 0, 2, a, kx_iconst(p, d), 0);
	// Adding multiples of d changes nothing: reduce every coefficient.
	l.c -= floordiv(l.c, d) * d;
	for (int i = 0; i < l.n; i++)
		l.coef[i] -= floordiv(l.coef[i], d) * d;
	int64_t lo, hi;
	KxId r = lin_build(p, &l);
	if (lin_range(p, &l, &lo, &hi) && lo >= 0 && hi < d)
		return r;
	return mk(p, KX_IMOD, DT_I64, 0, 2, r, kx_iconst(p, d), 0);
}

KxId
kx_imin(KProgram *p, KxId a, KxId b)
{
	int64_t l0, h0, l1, h1;
	if (a == b)
		return a;
	if (kx_range(p, a, &l0, &h0) && kx_range(p, b, &l1, &h1)) {
		if (h0 <= l1)
			return a;
		if (h1 <= l0)
			return b;
	}
	if (a > b) {
		KxId c = a;
		a = b;
		b = c;
	}
	return mk(p, KX_IMIN, DT_I64, 0, 2, a, b, 0);
}

KxId
kx_imax(KProgram *p, KxId a, KxId b)
{
	int64_t l0, h0, l1, h1;
	if (a == b)
		return a;
	if (kx_range(p, a, &l0, &h0) && kx_range(p, b, &l1, &h1)) {
		if (l0 >= h1)
			return a;
		if (l1 >= h0)
			return b;
	}
	if (a > b) {
		KxId c = a;
		a = b;
		b = c;
	}
	return mk(p, KX_IMAX, DT_I64, 0, 2, a, b, 0);
}

KxId
kx_iclamp(KProgram *p, KxId a, int64_t lo, int64_t hi)
{
	return kx_imin(p, kx_imax(p, a, kx_iconst(p, lo)), kx_iconst(p, hi));
}

// ---------------------------------------------------------------- remaking

// x made again in q over operands a[0 .. x->nin - 1] (ids of q), through
// its op's constructor, so that index arithmetic folds and commutative
// operands take q's order as when an expression is first built (kir_layout.c
// rebuilds a program's expressions with new variables and load indices this
// way).  A variable keeps its number and extent, a load its buffer, a step
// its loop: a caller that moves those substitutes them itself.
KxId
kx_remake(KProgram *q, const Kx *x, const KxId *a)
{
	KxId r = 0;
	switch ((KxOp)x->op) {
	case KX_CONST:
		r = x->dtype == DT_I64    ? kx_iconst(q, x->i)
		    : x->dtype == DT_BOOL ? kx_bconst(q, (int)x->i)
		                          : kx_const(q, x->f, (DType)x->dtype);
		break;
	case KX_VAR:
		r = kx_var(q, (int)x->aux, x->i);
		break;
	case KX_LOAD:
		r = kx_load(q, x->aux, a[0]);
		break;
	case KX_ACC:
		r = kx_acc(q, (DType)x->dtype);
		break;
	case KX_RUNSEED:
		r = kx_runseed(q);
		break;
	case KX_STEP:
		r = kx_step(q, (int)x->aux);
		break;
	case KX_IADD:
		r = kx_iadd(q, a[0], a[1]);
		break;
	case KX_IMUL: // by a constant, always a[1] (lin_build)
		FADC_ASSERT(q->x[a[1]].op == KX_CONST, "kx_remake: a product of two indices");
		r = kx_imul(q, a[0], q->x[a[1]].i);
		break;
	case KX_IDIV:
		r = kx_idiv(q, a[0], q->x[a[1]].i);
		break;
	case KX_IMOD:
		r = kx_imod(q, a[0], q->x[a[1]].i);
		break;
	case KX_IMIN:
		r = kx_imin(q, a[0], a[1]);
		break;
	case KX_IMAX:
		r = kx_imax(q, a[0], a[1]);
		break;
	case KX_ADD:
	case KX_SUB:
	case KX_MUL:
	case KX_DIV:
	case KX_MAX:
	case KX_MIN:
	case KX_POW:
	case KX_AND:
	case KX_OR:
		r = kx_bin(q, (KxOp)x->op, a[0], a[1]);
		break;
	case KX_NEG:
	case KX_ABS:
	case KX_FLOOR:
	case KX_SQRT:
	case KX_EXP:
	case KX_LOG:
	case KX_LOG1P:
	case KX_EXPM1:
	case KX_TANH:
	case KX_ERF:
	case KX_SIN:
	case KX_COS:
	case KX_LGAMMA:
	case KX_NOT:
		r = kx_un(q, (KxOp)x->op, a[0]);
		break;
	case KX_POLYGAMMA:
		r = kx_polygamma(q, a[0], a[1]);
		break;
	case KX_CMP:
		r = kx_cmp(q, (KCmp)x->aux, a[0], a[1]);
		break;
	case KX_SELECT:
		r = kx_select(q, a[0], a[1], a[2]);
		break;
	case KX_CAST:
		r = kx_cast(q, a[0], (DType)x->aux);
		break;
	case KX_RAND:
		r = kx_rand(q, (KRand)x->aux, x->i, a[0], x->nin > 1 ? a[1] : 0);
		break;
	default:
		FADC_ASSERT(0, "kx_remake: an op it does not know");
	}
	FADC_ASSERT(q->x[r].dtype == x->dtype, "kx_remake: a remade expression changed dtype");
	return r;
}

// ---------------------------------------------------------------- costs
//
// Rough latencies for the backends' heuristics, in quarter steps: an add,
// a compare or a select 1, a load 4, a division, a square root or an
// integer division 8, a libm-class call (exp, log, tanh, erf, pow, sin, a
// Philox draw) 32, lgamma 96, digamma or trigamma 160; leaves (constants,
// variables, the accumulator, seeds, step counters) nothing.  The one
// table of per-op costs: kx_cost weighs kernel-IR expressions with it
// (codegen/cuda_sched.c's reduction forms and warp rotation), and cg_op_cost
// (codegen/fuse.c) weighs graph ops by the kernel-IR op they lower to.

int
kx_op_cost(KxOp op)
{
	switch (op) {
	case KX_CONST:
	case KX_VAR:
	case KX_ACC:
	case KX_RUNSEED:
	case KX_STEP:
		return 0;
	case KX_LOAD:
		return 4;
	case KX_DIV:
	case KX_SQRT:
	case KX_IDIV:
	case KX_IMOD:
		return 8;
	case KX_POW:
	case KX_EXP:
	case KX_LOG:
	case KX_LOG1P:
	case KX_EXPM1:
	case KX_TANH:
	case KX_ERF:
	case KX_SIN:
	case KX_COS:
	case KX_RAND:
		return 32;
	case KX_LGAMMA:
		return 96;
	case KX_POLYGAMMA:
		return 160;
	default:
		return 1;
	}
}

int64_t
kx_cost(const KProgram *p, KxId e)
{
	enum { CAP = 256 };
	KxId todo[CAP], seen[CAP];
	int nt = 0, ns = 0;
	int64_t c = 0;
	if (e)
		todo[nt++] = e;
	while (nt > 0 && ns < CAP) {
		KxId id = todo[--nt];
		int dup = 0;
		for (int i = 0; i < ns && !dup; i++)
			dup = seen[i] == id;
		if (dup)
			continue;
		seen[ns++] = id;
		const Kx *x = &p->x[id];
		c += kx_op_cost((KxOp)x->op);
		for (int i = 0; i < x->nin && nt < CAP; i++)
			if (x->a[i])
				todo[nt++] = x->a[i];
	}
	return ns >= CAP ? c + 4 * CAP : c;
}

// ---------------------------------------------------------------- printer

static const char *const op_names[KX_COUNT] = {
	[KX_NONE] = "none",   [KX_CONST] = "const", [KX_VAR] = "var",       [KX_LOAD] = "load",
	[KX_ACC] = "acc",     [KX_RUNSEED] = "runseed", [KX_STEP] = "step", [KX_IADD] = "iadd", [KX_IMUL] = "imul",
	[KX_IDIV] = "idiv",   [KX_IMOD] = "imod",   [KX_IMIN] = "imin",     [KX_IMAX] = "imax",
	[KX_ADD] = "add",     [KX_SUB] = "sub",     [KX_MUL] = "mul",       [KX_DIV] = "div",
	[KX_NEG] = "neg",     [KX_ABS] = "abs",     [KX_MAX] = "max",       [KX_MIN] = "min",
	[KX_POW] = "pow",     [KX_FLOOR] = "floor", [KX_SQRT] = "sqrt",     [KX_EXP] = "exp",
	[KX_LOG] = "log",     [KX_LOG1P] = "log1p", [KX_EXPM1] = "expm1",   [KX_TANH] = "tanh",
	[KX_ERF] = "erf",     [KX_SIN] = "sin",     [KX_COS] = "cos",       [KX_LGAMMA] = "lgamma",
	[KX_POLYGAMMA] = "polygamma", [KX_CMP] = "cmp", [KX_AND] = "and",   [KX_OR] = "or",
	[KX_NOT] = "not",     [KX_SELECT] = "select", [KX_CAST] = "cast",   [KX_RAND] = "rand",
};

const char *
kx_op_name(KxOp op)
{
	return op < KX_COUNT && op_names[op] ? op_names[op] : "?";
}

static const char *const cmp_names[] = {"eq", "ne", "lt", "le", "gt", "ge", "ugt", "ult", "uno"};
static const char *const rand_names[] = {"uniform", "normal", "gamma"};
static const char *const red_names[] = {"", "sum", "max", "min"};

static void
mark(const KProgram *p, KxId id, uint8_t *seen)
{
	if (!id || seen[id])
		return;
	seen[id] = 1;
	for (int i = 0; i < p->x[id].nin; i++)
		mark(p, p->x[id].a[i], seen);
}

static void
print_x(FILE *f, const KProgram *p, KxId id)
{
	const Kx *x = &p->x[id];
	fprintf(f, "    x%u: %s = ", id, ir_dtype_name((DType)x->dtype));
	switch (x->op) {
	case KX_CONST:
		if (x->dtype == DT_F32 || x->dtype == DT_F64) {
			char b[64];
			ir_print_float(b, sizeof b, x->f);
			fprintf(f, "%s\n", b);
		} else
			fprintf(f, "%lld\n", (long long)x->i);
		return;
	case KX_VAR:
		fprintf(f, "v%u < %lld\n", x->aux, (long long)x->i);
		return;
	case KX_STEP:
		fprintf(f, "step of loop L%u < %lld\n", x->aux, (long long)x->i);
		return;
	case KX_LOAD:
		fprintf(f, "load b%u[x%u]\n", x->aux, x->a[0]);
		return;
	case KX_CMP:
		fprintf(f, "cmp.%s", cmp_names[x->aux]);
		break;
	case KX_CAST:
		fprintf(f, "cast.%s", ir_dtype_name((DType)x->aux));
		break;
	case KX_RAND:
		fprintf(f, "rand.%s seed=%lld", rand_names[x->aux], (long long)x->i);
		break;
	default:
		fprintf(f, "%s", kx_op_name((KxOp)x->op));
	}
	for (int i = 0; i < x->nin; i++)
		fprintf(f, "%s x%u", i ? "," : "", x->a[i]);
	fprintf(f, "\n");
}

void
kir_print(FILE *f, const KProgram *p)
{
	static const char *const kinds[] = {"in", "out", "tmp"};
	fprintf(f, "program %s: %u kernels, %u buffers, arena %lld bytes (without reuse %lld)\n",
	        p->name, p->nk, p->nbuf, (long long)p->arena_bytes, (long long)p->naive_bytes);
	for (uint32_t b = 0; b < p->nbuf; b++) {
		const KBuf *kb = &p->buf[b];
		char t[256];
		ir_type_str(kb->dtype, &kb->shape, t, sizeof t);
		fprintf(f, "  b%u: %s%d %s", b, kinds[kb->kind], kb->kind == KB_TMP ? (int)b : kb->index, t);
		if (kb->kind == KB_TMP)
			fprintf(f, " @%lld", (long long)kb->offset);
		fprintf(f, "\n");
	}
	uint8_t *seen = calloc(p->nx, 1);
	FADC_ASSERT(seen != NULL, "kir_print: out of memory");
	for (uint32_t i = 0; i < p->nk; i++) {
		const KKernel *k = &p->k[i];
		for (uint32_t l = 0; l < p->nloop; l++)
			if (p->loop[l].begin == i && p->loop[l].end > i)
				fprintf(f, "  loop L%u: kernels k%u..k%u, %lld steps\n", l, p->loop[l].begin,
				        p->loop[l].end - 1, (long long)p->loop[l].trip);
		if (k->host) {
			fprintf(f, "  kernel k%u: b%u = %s (node %%%u) host call (b%u, scratch b%u)\n", i, k->out,
			        k->what, k->node, k->hin, k->hwork);
			continue;
		}
		fprintf(f, "  kernel k%u: b%u = %s (node %%%u, %d fused)", i, k->out, k->what, k->node,
		        k->nfused);
		for (int d = 0; d < k->rank; d++)
			fprintf(f, "%s v%d < %lld", d ? "," : " for", d, (long long)k->dim[d]);
		if (k->red)
			fprintf(f, ";%s", red_names[k->red]);
		for (int d = 0; d < k->rrank; d++)
			fprintf(f, "%s v%d < %lld", d ? "," : " over", k->rank + d, (long long)k->rdim[d]);
		fprintf(f, "\n");
		memset(seen, 0, p->nx);
		mark(p, k->index, seen);
		mark(p, k->body, seen);
		mark(p, k->post, seen);
		for (KxId id = 1; id < p->nx; id++)
			if (seen[id])
				print_x(f, p, id);
		if (k->red)
			fprintf(f, "    acc %s= x%u\n", k->red == KR_SUM ? "+" : red_names[k->red], k->body);
		fprintf(f, "    store b%u[x%u] = x%u\n", k->out, k->index, k->red ? k->post : k->body);
	}
	free(seen);
}

// ---------------------------------------------------------------- GEMM plans

// Every variable's coefficient in index e (0 if some variable appears in a
// non-affine position).
static int
affine_all(const KProgram *p, const KKernel *k, KxId e, int64_t *coef)
{
	for (int v = 0; v < k->rank + k->rrank; v++)
		if (!kx_affine_coef(p, e, v, &coef[v]))
			return 0;
	return 1;
}

// The constant term of e when e is a sum of loop variables times constants
// and a constant, nothing else (no step counter, no load).
static int
affine_base(const KProgram *p, KxId e, int64_t *c0)
{
	Lin l = lin_of(p, e);
	if (!l.ok)
		return 0;
	for (int i = 0; i < l.n; i++)
		if (p->x[l.atom[i]].op != KX_VAR)
			return 0;
	*c0 = l.c;
	return 1;
}

int
kir_gemm_match(const KProgram *p, const KKernel *k, KGemm *g)
{
	memset(g, 0, sizeof *g);
	if (!k->contraction || k->host || k->red != KR_SUM || k->rank < 1 || k->rrank < 1 ||
	    p->x[k->post].op != KX_ACC)
		return 0;
	DType vt = (DType)p->x[k->body].dtype;
	if ((vt != DT_F32 && vt != DT_F64) || p->buf[k->out].dtype != vt)
		return 0;
	const Kx *m = &p->x[k->body];
	if (m->op != KX_MUL || p->x[m->a[0]].op != KX_LOAD || p->x[m->a[1]].op != KX_LOAD)
		return 0;
	KxId l0 = m->a[0], l1 = m->a[1];
	if (!affine_all(p, k, k->index, g->cc) || !affine_all(p, k, p->x[l0].a[0], g->ca) ||
	    !affine_all(p, k, p->x[l1].a[0], g->cb))
		return 0;
	// B is the load that moves with j; A must not.
	if (g->ca[k->rank - 1] != 0) {
		KxId t = l0;
		l0 = l1;
		l1 = t;
		int64_t tc[2 * IR_MAXDIM];
		memcpy(tc, g->ca, sizeof tc);
		memcpy(g->ca, g->cb, sizeof tc);
		memcpy(g->cb, tc, sizeof tc);
	}
	g->abuf = p->x[l0].aux;
	g->bbuf = p->x[l1].aux;
	g->aidx = p->x[l0].a[0];
	g->bidx = p->x[l1].a[0];
	g->konst = affine_base(p, g->aidx, &g->a0) && affine_base(p, g->bidx, &g->b0) &&
	           affine_base(p, k->index, &g->c0);
	return 1;
}

// Merges variables v[0..n) (outer to inner; extents d) into one axis of
// the innermost one's stride, for each of the nc coefficient arrays: an
// outer variable must step by the inner ones' whole extent.  *ext gets the
// merged extent, st[c] the stride of array c.
static int
gemm_merge(const KKernel *k, const int *v, int n, const int64_t *const *coef, int nc, int64_t *ext,
           int64_t *st)
{
	*ext = 1;
	for (int c = 0; c < nc; c++)
		st[c] = 0;
	if (!n)
		return 1;
	int last = v[n - 1];
	for (int c = 0; c < nc; c++)
		st[c] = coef[c][last];
	for (int i = n - 1; i >= 0; i--) {
		int64_t d = v[i] < k->rank ? k->dim[v[i]] : k->rdim[v[i] - k->rank];
		for (int c = 0; c < nc; c++)
			if (coef[c][v[i]] != st[c] * *ext)
				return 0;
		if (*ext > INT32_MAX / d)
			return 0;
		*ext *= d;
	}
	return 1;
}

// The last element an operand touches: base + sum (extent - 1) stride.
static int
gemm_inside(const KBuf *b, int64_t base, const int64_t *ext, const int64_t *st, int n)
{
	int64_t hi = base, numel = b->bytes / (int64_t)kir_dtype_size(b->dtype);
	if (base < 0)
		return 0;
	for (int i = 0; i < n; i++) {
		if (st[i] < 0 || (ext[i] > 1 && st[i] > (INT64_MAX - hi) / (ext[i] - 1)))
			return 0;
		hi += (ext[i] - 1) * st[i];
	}
	return hi < numel;
}

int
kir_gemm_plan(const KProgram *p, const KKernel *k, KGemmPlan *g)
{
	KGemm m;
	memset(g, 0, sizeof *g);
	if (!kir_gemm_match(p, k, &m) || !m.konst)
		return 0;
	// The variables that take more than one value, outer to inner.
	int pv[IR_MAXDIM], np = 0, rv[IR_MAXDIM], nr = 0;
	for (int d = 0; d < k->rank; d++) {
		if (k->dim[d] < 1)
			return 0; // empty: nothing to multiply
		if (k->dim[d] > 1)
			pv[np++] = d;
	}
	for (int d = 0; d < k->rrank; d++) {
		if (k->rdim[d] < 1)
			return 0;
		if (k->rdim[d] > 1)
			rv[nr++] = k->rank + d;
	}
	if (!np)
		return 0;
	// The column: the innermost parallel variable (C contiguous along it,
	// B moving with it, A not).  kir_gemm_match chose A and B along the
	// last variable, which is this one unless trailing ones have extent 1.
	int j = pv[np - 1];
	if (m.ca[j] != 0) {
		uint32_t tb = m.abuf;
		m.abuf = m.bbuf;
		m.bbuf = tb;
		int64_t tc[2 * IR_MAXDIM], t0 = m.a0;
		memcpy(tc, m.ca, sizeof tc);
		memcpy(m.ca, m.cb, sizeof tc);
		memcpy(m.cb, tc, sizeof tc);
		m.a0 = m.b0;
		m.b0 = t0;
	}
	if (m.ca[j] != 0 || m.cb[j] <= 0 || m.cc[j] != 1)
		return 0;
	// The rows: variables just outside j along which B does not move and
	// A and C merge; the rest is the batch.
	const int64_t *ac[3] = {m.ca, m.cc, m.cb};
	int nrow = 0;
	int64_t st[3], M = 1, ca_i = 0, cc_i = 0;
	for (int i = np - 2; i >= 0 && m.cb[pv[i]] == 0; i--) {
		int64_t e, s[3];
		if (!gemm_merge(k, &pv[i], np - 1 - i, ac, 2, &e, s))
			break;
		nrow = np - 1 - i;
		M = e;
		ca_i = s[0];
		cc_i = s[1];
	}
	int64_t batch;
	if (!gemm_merge(k, pv, np - 1 - nrow, ac, 3, &batch, st))
		return 0;
	int64_t K, sk[2];
	const int64_t *bc[2] = {m.ca, m.cb};
	if (!gemm_merge(k, rv, nr, bc, 2, &K, sk))
		return 0;
	int64_t N = k->dim[j], ca_k = sk[0], cb_k = sk[1], cb_j = m.cb[j];
	if (N > INT32_MAX)
		return 0;
	g->dt = (DType)p->x[k->body].dtype;
	if (p->buf[m.abuf].dtype != g->dt || p->buf[m.bbuf].dtype != g->dt)
		return 0; // a load that converts (the CPU's GEMM converts, a BLAS cannot)
	g->cbuf = k->out;
	g->abuf = m.abuf;
	g->bbuf = m.bbuf;
	g->M = M;
	g->N = N;
	g->K = K;
	g->batch = batch;
	// op(A): row-major (A(i, k) at i lda + k) or transposed (k lda + i).
	if ((K == 1 || ca_k == 1) && (M == 1 || ca_i >= K)) {
		g->ta = 0;
		g->lda = M == 1 ? K : ca_i;
	} else if ((M == 1 || ca_i == 1) && (K == 1 || ca_k >= M)) {
		g->ta = 1;
		g->lda = K == 1 ? M : ca_k;
	} else
		return 0;
	if ((N == 1 || cb_j == 1) && (K == 1 || cb_k >= N)) {
		g->tb = 0;
		g->ldb = K == 1 ? N : cb_k;
	} else if ((K == 1 || cb_k == 1) && (N == 1 || cb_j >= K)) {
		g->tb = 1;
		g->ldb = N == 1 ? K : cb_j;
	} else
		return 0;
	if (M > 1 && cc_i < N)
		return 0;
	g->ldc = M == 1 ? N : cc_i;
	if (g->lda > INT32_MAX || g->ldb > INT32_MAX || g->ldc > INT32_MAX)
		return 0;
	g->sa = batch > 1 ? st[0] : 0;
	g->sc = batch > 1 ? st[1] : 0;
	g->sb = batch > 1 ? st[2] : 0;
	g->oa = m.a0;
	g->ob = m.b0;
	g->oc = m.c0;
	// Every element touched inside its buffer (the kernel's loads are, so
	// this holds by construction; checked all the same: a wrong plan must
	// not become a wild device access).
	int64_t ea[3] = {batch, M, K}, sa3[3] = {g->sa, ca_i, ca_k};
	int64_t eb[3] = {batch, K, N}, sb3[3] = {g->sb, cb_k, cb_j};
	int64_t ec[3] = {batch, M, N}, sc3[3] = {g->sc, cc_i, 1};
	return gemm_inside(&p->buf[g->abuf], g->oa, ea, sa3, 3) &&
	       gemm_inside(&p->buf[g->bbuf], g->ob, eb, sb3, 3) &&
	       gemm_inside(&p->buf[g->cbuf], g->oc, ec, sc3, 3);
}

// ---------------------------------------------------------------- GEMM operands
//
// Fusion inlines layout ops into a contraction's loads: a head merge (a
// permute then a reshape) becomes an index of divisions and remainders,
// and an elementwise op on an operand becomes arithmetic inside the
// product.  Then no GEMM plan exists, and the contraction runs as a
// printed loop nest (transformer's attention output projection, 8192 x
// 720 x 720: 6.3 ms on an H100 against ~0.1 ms through cuBLAS).  So an
// operand of a large contraction that is not one affine load is
// materialized: a new kernel, just before the contraction, writes it
// densely over the loop variables it depends on (in their order), and the
// contraction loads it back at that dense, affine index.  The operand must
// be a matrix of the product (not depend on every variable), the product
// large (GEMM_OPERAND_MIN_WORK multiply-adds, the cuBLAS threshold: small
// contractions, in particular those of fused one-block tasks, stay as they
// are) and the copy bounded (GEMM_OPERAND_MAX_ELEMS); the rewrite is kept
// only when the contraction then has a GEMM plan.  Its cost, one write and
// one read of the operand, is small next to the product it unlocks.

#define GEMM_OPERAND_MIN_WORK ((int64_t)1 << 18)
#define GEMM_OPERAND_MAX_ELEMS ((int64_t)1 << 26)

// The loop variables e reads (bit v), and whether it may be recomputed in
// another kernel (no accumulator, step counter or reduction state).
static int
operand_vars(const KProgram *p, KxId e, uint8_t *seen, uint32_t *vars)
{
	if (!e || seen[e])
		return 1;
	seen[e] = 1;
	const Kx *x = &p->x[e];
	if (x->op == KX_ACC || x->op == KX_STEP)
		return 0;
	if (x->op == KX_VAR)
		*vars |= 1u << x->aux;
	for (int i = 0; i < x->nin; i++)
		if (!operand_vars(p, x->a[i], seen, vars))
			return 0;
	return 1;
}

// e with loop variable v replaced by map[v] (memo: old id -> new, 0 unset).
static KxId
rebuild(KProgram *p, KxId e, const KxId *map, KxId *memo)
{
	if (memo[e])
		return memo[e];
	Kx x = p->x[e];
	KxId r;
	if (x.op == KX_VAR)
		r = map[x.aux];
	else {
		for (int i = 0; i < x.nin; i++)
			x.a[i] = rebuild(p, x.a[i], map, memo);
		r = intern(p, &x);
	}
	memo[e] = r;
	return r;
}

int64_t
kir_kernel_points(const KKernel *k)
{
	int64_t n = 1;
	for (int d = 0; d < k->rank; d++)
		n *= k->dim[d];
	return n;
}

int64_t
kir_kernel_terms(const KKernel *k)
{
	int64_t n = 1;
	for (int d = 0; k->red && d < k->rrank; d++)
		n *= k->rdim[d];
	return n;
}

// A zeroed kernel inserted before kernel ki (later kernels and loops move).
static KKernel *
kernel_insert(KProgram *p, uint32_t ki)
{
	kir_kernel_add(p);
	memmove(&p->k[ki + 1], &p->k[ki], (p->nk - 1 - ki) * sizeof *p->k);
	for (uint32_t l = 0; l < p->nloop; l++) {
		if (p->loop[l].begin >= ki)
			p->loop[l].begin++;
		if (p->loop[l].end > ki)
			p->loop[l].end++;
	}
	KKernel *m = &p->k[ki];
	memset(m, 0, sizeof *m);
	return m;
}

// Is kernel ki inside a loop?
static int
in_loop(const KProgram *p, uint32_t ki)
{
	for (uint32_t l = 0; l < p->nloop; l++)
		if (p->loop[l].begin <= ki && ki < p->loop[l].end)
			return 1;
	return 0;
}

// Operand `side` (0, 1) of contraction ki materialized as described
// above; 1 when done (the new kernel is then kernel ki, the contraction
// ki + 1).  need_plan: only if the contraction then has a GEMM plan (the
// other operand is already an affine load); else nothing changes but
// unused expressions and an unused buffer.
static int
materialize_operand(KProgram *p, uint32_t ki, int side, int need_plan)
{
	KKernel *k = &p->k[ki];
	int nv = k->rank + k->rrank;
	KxId op = p->x[k->body].a[side], other = p->x[k->body].a[1 - side];
	uint8_t *seen = calloc(p->nx + 1, 1);
	uint32_t vars = 0;
	int ok = seen && operand_vars(p, op, seen, &vars);
	free(seen);
	if (!ok || !vars || vars == (1u << nv) - 1)
		return 0;
	Shape s = {0};
	KxId map[2 * IR_MAXDIM] = {0};
	int64_t n = 1;
	for (int v = 0; v < nv; v++)
		if (vars >> v & 1) {
			if (s.rank == IR_MAXDIM)
				return 0;
			s.dim[s.rank++] = v < k->rank ? k->dim[v] : k->rdim[v - k->rank];
		}
	for (int i = 0; i < s.rank; i++)
		n *= s.dim[i];
	if (n > GEMM_OPERAND_MAX_ELEMS)
		return 0;
	DType dt = (DType)p->x[op].dtype;
	uint32_t buf = kir_buf_add(p, KB_TMP, 0, dt, &s, k->node);
	// The new kernel's variables are 0 .. s.rank-1 in the order of the old
	// ones; the dense index over the old variables, for the contraction.
	KxId dense = kx_iconst(p, 0), idx = kx_iconst(p, 0);
	int64_t stride = 1;
	for (int v = nv - 1, j = s.rank - 1; v >= 0; v--) {
		if (!(vars >> v & 1))
			continue;
		int64_t ext = s.dim[j];
		map[v] = kx_var(p, j, ext);
		dense = kx_iadd(p, dense, kx_imul(p, kx_var(p, v, ext), stride));
		idx = kx_iadd(p, idx, kx_imul(p, kx_var(p, j, ext), stride));
		stride *= ext;
		j--;
	}
	KxId *memo = calloc(p->nx + 1, sizeof *memo);
	FADC_ASSERT(memo, "kir: out of memory");
	KxId body = rebuild(p, op, map, memo);
	free(memo);
	KxId load = kx_load(p, buf, dense);
	KxId prod = side == 0 ? kx_bin(p, KX_MUL, load, other) : kx_bin(p, KX_MUL, other, load);
	KKernel trial = *k;
	trial.body = prod;
	KGemmPlan g;
	if (need_plan && !kir_gemm_plan(p, &trial, &g))
		return 0;
	KKernel *m = kernel_insert(p, ki);
	m->out = buf;
	m->rank = s.rank;
	memcpy(m->dim, s.dim, sizeof m->dim);
	m->index = idx;
	m->body = body;
	m->node = p->k[ki + 1].node;
	m->what = "gemm_operand";
	p->k[ki + 1].body = prod;
	return 1;
}

void
kir_gemm_operands(KProgram *p)
{
	for (uint32_t ki = 0; ki < p->nk; ki++) {
		KKernel *k = &p->k[ki];
		if (!k->contraction || k->host || k->red != KR_SUM || p->x[k->post].op != KX_ACC ||
		    p->x[k->body].op != KX_MUL || in_loop(p, ki))
			continue;
		int64_t work = kir_kernel_points(k) * kir_kernel_terms(k);
		KGemmPlan g;
		if (work < GEMM_OPERAND_MIN_WORK || kir_gemm_plan(p, k, &g))
			continue;
		int64_t coef[2 * IR_MAXDIM];
		if (!affine_all(p, k, k->index, coef))
			continue;
		// Each operand that is not one affine load; where both are not,
		// the first unconditionally (the second then decides).
		int fine[2];
		for (int side = 0; side < 2; side++) {
			KxId o = p->x[k->body].a[side];
			fine[side] = p->x[o].op == KX_LOAD && affine_all(p, k, p->x[o].a[0], coef);
		}
		for (int side = 0; side < 2; side++)
			if (!fine[side] && materialize_operand(p, ki, side, fine[1 - side] || side == 1))
				ki++; // the contraction moved up by one
	}
}

// ---------------------------------------------------------------- split reductions
//
// A sum of many terms into few points (batch norm's statistics: 64
// channels, each a sum over N x H x W = 401,408 terms at resnet18's first
// layer) gave the CUDA backend one block per point, 64 blocks on a
// 132-multiprocessor GPU, each walking 400 k terms: 0.64 ms where the
// bytes take 0.03 ms.  So such a kernel is split along its first
// reduction variable (extent S): a first kernel sums the rest of the terms
// into partial[p, s] (npt S points, each a block's reduction on the GPU),
// a second adds the S partials of each point and applies the original
// post (a mean's scale).  The first keeps the body as it is: its
// reduction variable rank becomes its last parallel variable, the others
// keep their numbers.  Both backends take it (the CPU's pool gets more
// points to share); the summation order changes (partials, then their
// sum), within the usual rounding.  Conditions: a sum (not max/min, not a
// contraction, not a host kernel, not in a loop), at most SPLIT_MAX_POINTS
// points, at least SPLIT_MIN_TERMS terms, S >= 2, and at least 256 terms
// left per partial.
//
// Where the points times the first variable's extent are still few (a
// scalar loss over (N, C, H, W): 1 point, S = N = 8: 8 blocks each walking
// 2.6 M terms, 7.8 ms of fcn_resnet's 204 ms vjp on an H200), the split
// takes the next reduction variables too, while points x S stays under
// SPLIT_TARGET and 256 terms per partial are left: S is then the product
// of the first j extents (fcn_resnet: 8 x 21 = 168 partials), and the first
// kernel's j leading reduction variables become its last parallel ones,
// their numbers unchanged.

#define SPLIT_MAX_POINTS 4096
#define SPLIT_MIN_TERMS ((int64_t)1 << 15)
#define SPLIT_TARGET 1024

// The row-major flat index of variables 0 .. n-1 of extents dim[].
static KxId
vars_flat(KProgram *p, const int64_t *dim, int n)
{
	KxId idx = kx_var(p, n - 1, dim[n - 1]);
	int64_t stride = dim[n - 1];
	for (int d = n - 2; d >= 0; d--) {
		idx = kx_iadd(p, idx, kx_imul(p, kx_var(p, d, dim[d]), stride));
		stride *= dim[d];
	}
	return idx;
}

void
kir_split_reductions(KProgram *p)
{
	for (uint32_t ki = 0; ki < p->nk; ki++) {
		KKernel *k = &p->k[ki];
		if (k->red != KR_SUM || k->contraction || k->host || k->rrank < 2 ||
		    k->rank >= IR_MAXDIM || in_loop(p, ki))
			continue;
		int64_t npt = kir_kernel_points(k), nr = kir_kernel_terms(k), s = k->rdim[0];
		if (npt > SPLIT_MAX_POINTS || nr < SPLIT_MIN_TERMS || s < 2 || nr / s < 256)
			continue;
		int j = 1; // reduction variables made parallel; s, their extents' product
		while (j < k->rrank - 1 && k->rank + j < IR_MAXDIM && npt * s < SPLIT_TARGET &&
		       nr / (s * k->rdim[j]) >= 256)
			s *= k->rdim[j++];
		DType vt = (DType)p->x[k->body].dtype;
		Shape sh = {k->rank + 1, {0}};
		memcpy(sh.dim, k->dim, sizeof k->dim[0] * (size_t)k->rank);
		sh.dim[k->rank] = s;
		uint32_t part = kir_buf_add(p, KB_TMP, 0, vt, &sh, k->node);
		KKernel *a = kernel_insert(p, ki);
		k = &p->k[ki + 1]; // moved
		a->out = part;
		a->rank = k->rank + j;
		memcpy(a->dim, k->dim, sizeof a->dim);
		memcpy(a->dim + k->rank, k->rdim, sizeof a->dim[0] * (size_t)j);
		a->rrank = k->rrank - j;
		memcpy(a->rdim, k->rdim + j, sizeof a->rdim[0] * (size_t)a->rrank);
		a->red = KR_SUM;
		// partial's dense index over (point, s): point-major, and s
		// row-major over the j variables, the first kernel's dims.
		a->index = vars_flat(p, a->dim, a->rank);
		a->body = k->body;
		a->post = kx_acc(p, vt);
		a->node = k->node;
		a->what = "partial_sum";
		// Both halves belong to k's convolution, if any (KKernel.conv): a
		// cuDNN call replaces them together, not the second alone after
		// the first ran for nothing.
		a->conv = k->conv;
		// The original kernel now sums the S partials of its point: the
		// same index over (its point, its one reduction variable), the
		// partial buffer's shape.
		k->rrank = 1;
		memset(k->rdim, 0, sizeof k->rdim);
		k->rdim[0] = s;
		k->body = kx_load(p, part, vars_flat(p, sh.dim, sh.rank));
		ki++;
	}
}
