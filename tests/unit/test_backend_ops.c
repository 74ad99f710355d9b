// tests/unit/test_backend_ops.c -- every op of the table, compiled, against
// the float64 interpreter, at random shapes (ggml's test-backend-ops).
//
// Coverage comes from the table itself: `cases[]` is built from
// ir/ops.def with the X-macro, one entry per row, [OP_name] = CASE_name,
// so a new row without a CASE_<name> below fails to compile naming the op;
// a row of a new row kind (a macro not defined here) leaves a hole that
// main reports at run time ("op X has no case").  Each case must also put
// its op in the parsed graph (graph_has), so a generator cannot silently
// test something else.
//
// A case is a generator: from a seeded stream (xorshift, one seed per case
// and trial, so a case draws the same shapes alone or in a batch) it writes
// declarations with random shapes and seeded initializers on the op's
// domain, and one or more output expressions: random ranks (0-4) and
// dims (1-4), broadcast patterns for the elementwise ops of two or three
// operands, random axes (negative too), keepdim, perms, slices, paddings,
// window geometries (stride, padding, dilation, groups), index tensors with
// repeats, scan lengths; the i64 forms of the F_INTOK rows and ties
// (small integers) where an op breaks them.  The generators follow
// test_gradcheck.c's (which checks derivatives in the interpreter) but are
// this file's own: they take the dtype, make zero-size shapes on demand,
// and keep away from nothing (no finite differences here).
//
// Checking is tools/fadc/harness.c's cg_check, unchanged: every case of a
// trial is one output (or a few) of one module's forward, compiled through
// the CPU backend, run through the runtime and through ir_interp on the
// same inputs (initializers from ir_module_init, bound on both sides).  Its
// verbose report gives every output's normalized error (ir_err_value,
// ir.h: max|got - want| / max(|got|, |want|), NaN must meet NaN, an
// infinity itself), parsed back here per case; the initializers are
// checked against ir_module_init too (<= 1e-6; bit-identical in practice).
// Output names are "<op>_o<k>", declarations "<op>_<name>" ('$' in a
// generator's text is that prefix).  One module per trial keeps the time
// down (one LLVM compile for ~90 ops); when a batch fails (an error, a
// crash, an output above tolerance) each case is run alone to name the op.
// Every compile-and-run happens in a forked child (with an alarm), so a
// crash or an abort of the compiler is reported for its op and the run
// goes on.
//
// Runs, per trial (TRIALS, FADC_BACKEND_OPS_TRIALS):
//   - the f32 model computing in f32 (what artifacts do): <= 1e-5
//     (TOL_F32), or the case's own tolerance where stated below;
//   - the f32 model computing in f64 (CgOptions.compute_f64, `--f64`: only
//     inputs and outputs are f32): <= 2e-7 (TOL_F64C): the interpreter does
//     not round intermediates, so the only error left is the outputs'
//     rounding to f32 (2^-24 relative, 6e-8), with a margin;
//   - the same module written in f64 (first trial only): <= 1e-12
//     (TOL_F64): libm's against the backend's f64 math (a few ulp, 1e-15)
//     and sums in another order.
// On the first trial the f32 module is also compiled for CUDA (--target
// cpu,cuda: the printer and NVRTC see every op; compile-checked only, the
// CPU code is what runs) when the build has the toolkit (FADC_HAVE_CUDA)
// and FADC_BACKEND_OPS_CUDA is not 0.
//
// Zero-size mode (FADC_BACKEND_OPS_ZERO=1, ctest unit/test_backend_ops_zero;
// issue 18, robustness II): every case is drawn again until its graph has
// a zero-size tensor (a 0 dim, an empty slice, a scan of length 0, an
// empty contraction, 0 channels, ...; normal mode draws until it has
// none), ZERO_TRIALS trials, f32 and f64 compute, CUDA compile-checked on
// the first.  Every op must then compile and agree with the interpreter
// like any other shape; only what the shape rules refuse on purpose, as
// PyTorch does (max, min, argmax over an empty axis), is kept out.  Parsing
// runs in a child too (probe), in both modes: the frontend may crash on a
// zero size.  A failing op is a failure like in normal mode (exit 1), and
// the summary lists every failing op with why.
//
// Knobs: FADC_BACKEND_OPS_SEED (base seed), FADC_BACKEND_OPS_TRIALS,
// FADC_BACKEND_OPS_CASE (one op's name: that case alone),
// FADC_BACKEND_OPS_VERBOSE=1 (print every module), FADC_BACKEND_OPS_CUDA=0.
// A failure prints the case's standalone module, with the seed that
// replays it (FADC_BACKEND_OPS_CASE=op and the printed trial seed as
// FADC_BACKEND_OPS_REPLAY).
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "codegen.h"
#include "frontend.h"
#include "harness.h"
#include "ir.h"

enum { TRIALS = 3, ZERO_TRIALS = 4, MAXOUT = 8, MAXRET = 64, CHILD_SECONDS = 300 };

#define TOL_F32 1e-5
#define TOL_F64C 2e-7
#define TOL_F64 1e-12
#define TOL_INIT 1e-6

// ---------------------------------------------------------------- random

static uint64_t rng;

static double
rnd(void) // [0, 1), xorshift64
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (double)(rng >> 11) / 9007199254740992.0;
}

static int64_t
ri(int64_t lo, int64_t hi) // uniform in [lo, hi]
{
	return lo + (int64_t)(rnd() * (double)(hi - lo + 1));
}

static uint64_t
mix(uint64_t z) // splitmix64's finalizer
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

// ---------------------------------------------------------------- sources

static int zero_mode; // shapes may have 0 dims
static const char *fdt = "f32"; // the float dtype of the module being generated

typedef struct Shp {
	int rank;
	int64_t d[8];
} Shp;

// A case's text: declarations and output expressions; '$' stands for the
// case's prefix ("exp_").
typedef struct Src {
	char decl[6144];
	char out[MAXOUT][1024];
	int nout;
} Src;

static void
put(char *buf, size_t cap, const char *fmt, ...)
{
	size_t n = strlen(buf);
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf + n, cap - n, fmt, ap);
	va_end(ap);
}

#define DECL(s, ...) put((s)->decl, sizeof(s)->decl, __VA_ARGS__)
#define OUT(s, ...) \
	do { \
		if ((s)->nout < MAXOUT) { \
			(s)->out[(s)->nout][0] = 0; \
			put((s)->out[(s)->nout++], sizeof(s)->out[0], __VA_ARGS__); \
		} \
	} while (0)

// "[2, 3]" in one of eight rotating buffers.
static const char *
ints(const int64_t *v, int n)
{
	static char buf[8][160];
	static int k;
	char *b = buf[k++ & 7];
	b[0] = 0;
	put(b, 160, "[");
	for (int i = 0; i < n; i++)
		put(b, 160, "%s%" PRId64, i ? ", " : "", v[i]);
	put(b, 160, "]");
	return b;
}

// A dim in [lo, hi], or (zero mode, one time in three) 0.
static int64_t
rdim(int64_t lo, int64_t hi)
{
	return zero_mode && ri(0, 2) == 0 ? 0 : ri(lo, hi);
}

// A random shape of rank rlo..rhi, dims 1..dhi (zero mode: some 0).
static Shp
rshape(int rlo, int rhi, int dhi)
{
	Shp s = {.rank = (int)ri(rlo, rhi)};
	for (int i = 0; i < s.rank; i++)
		s.d[i] = rdim(1, dhi);
	return s;
}

// An operand shape broadcasting to `out`: leading axes dropped (half the
// time), size-1 axes (a third of the rest).
static Shp
bcast_of(const Shp *out)
{
	Shp s = {0};
	int drop = ri(0, 1) ? (int)ri(0, out->rank) : 0;
	for (int i = drop; i < out->rank; i++)
		s.d[s.rank++] = ri(0, 2) == 0 ? 1 : out->d[i];
	return s;
}

static void
permutation(int64_t *p, int n)
{
	for (int i = 0; i < n; i++)
		p[i] = i;
	for (int i = n - 1; i > 0; i--) {
		int j = (int)ri(0, i);
		int64_t t = p[i];
		p[i] = p[j], p[j] = t;
	}
}

static int
seed(void)
{
	return (int)ri(1, 99999);
}

// Declarations: a float param U[lo, hi) (disc: its floor, small integers
// with ties), an i64 const of integers in [lo, hi), a bool const.
static void
fparam(Src *s, const char *name, const Shp *sh, double lo, double hi, int disc)
{
	if (disc)
		DECL(s, "param $%s: %s%s = floor(uniform(%.17g, %.17g, seed=%d))\n", name, fdt,
		     ints(sh->d, sh->rank), lo, hi - 1e-3, seed());
	else
		DECL(s, "param $%s: %s%s = uniform(%.17g, %.17g, seed=%d)\n", name, fdt,
		     ints(sh->d, sh->rank), lo, hi, seed());
}

static void
iconst(Src *s, const char *name, const Shp *sh, int64_t lo, int64_t hi)
{
	DECL(s, "const $%s: i64%s = cast(floor(uniform(%" PRId64 ", %.17g, seed=%d)), dtype=i64)\n",
	     name, ints(sh->d, sh->rank), lo, (double)hi - 1e-3, seed());
}

static void
bconst(Src *s, const char *name, const Shp *sh)
{
	DECL(s, "const $%s: bool%s = uniform(0, 1, seed=%d) > 0.5\n", name, ints(sh->d, sh->rank),
	     seed());
}

// ---------------------------------------------------------------- cases

typedef struct OpCase OpCase;
typedef void (*GenFn)(const OpCase *c, const char *op, Src *s);

struct OpCase {
	GenFn gen;
	double lo, hi; // the domain of the (first) float operand
	double lo2, hi2; // of the second
	int disc; // small integers (ties) instead of U[lo, hi)
	double tol; // computing in f32; 0: TOL_F32
	// The CUDA backend refuses the op with this message (docs/CUDA.md):
	// its case is compiled for the CPU alone, and once for CUDA, where
	// the refusal must be that clean message (not a crash, not code).
	const char *cuda_refused;
};

static int
intok(const char *op)
{
	return (ir_op(ir_op_lookup(op))->flags & F_INTOK) != 0;
}

// One operand of a random shape; the op applied; its i64 form for F_INTOK.
static void
g_unary(const OpCase *c, const char *op, Src *s)
{
	Shp a = rshape(0, 4, 4);
	fparam(s, "a", &a, c->lo, c->hi, c->disc);
	OUT(s, "%s($a)", op);
	if (intok(op)) {
		Shp b = rshape(0, 3, 4);
		iconst(s, "i", &b, -5, 5);
		OUT(s, "%s($i)", op);
	}
}

static void
g_polygamma(const OpCase *c, const char *op, Src *s)
{
	(void)op;
	Shp a = rshape(0, 3, 4);
	fparam(s, "a", &a, c->lo, c->hi, 0);
	OUT(s, "polygamma($a, %d)", (int)ri(0, 1));
	OUT(s, "polygamma($a, %d)", (int)ri(2, 3));
}

// clamp / hardtanh: random bounds, and the defaults.
static void
g_clamp(const OpCase *c, const char *op, Src *s)
{
	Shp a = rshape(0, 4, 4);
	fparam(s, "a", &a, c->lo, c->hi, 0);
	double lo = -1.5 + rnd(), hi = lo + 2 * rnd();
	OUT(s, "%s($a, %.3f, %.3f)", op, lo, hi);
	OUT(s, "%s($a, min=%.3f)", op, lo);
	OUT(s, "%s($a)", op);
}

// Two operands broadcasting to a random shape (rank 0-4); one operand a
// number; the i64 form for F_INTOK.
static void
g_binary(const OpCase *c, const char *op, Src *s)
{
	Shp o = rshape(0, 4, 3), a = bcast_of(&o), b = bcast_of(&o);
	fparam(s, "a", &a, c->lo, c->hi, c->disc);
	fparam(s, "b", &b, c->lo2, c->hi2, c->disc);
	OUT(s, "%s($a, $b)", op);
	OUT(s, "%s($a, %.3f)", op, c->lo2 + (c->hi2 - c->lo2) * rnd());
	if (intok(op)) {
		Shp ia = bcast_of(&o), ib = bcast_of(&o);
		iconst(s, "ia", &ia, -4, 5);
		iconst(s, "ib", &ib, -4, 5);
		OUT(s, "%s($ia, $ib)", op);
	}
}

// Comparisons: small integers (equal ones too), float and i64, broadcast.
static void
g_cmp(const OpCase *c, const char *op, Src *s)
{
	(void)c;
	Shp o = rshape(0, 4, 3), a = bcast_of(&o), b = bcast_of(&o);
	fparam(s, "a", &a, 0, 3, 1);
	fparam(s, "b", &b, 0, 3, 1);
	iconst(s, "ia", &b, 0, 3);
	iconst(s, "ib", &a, 0, 3);
	OUT(s, "%s($a, $b)", op);
	OUT(s, "%s($ia, $ib)", op);
}

static void
g_logical(const OpCase *c, const char *op, Src *s)
{
	(void)c;
	Shp o = rshape(0, 4, 3), a = bcast_of(&o), b = bcast_of(&o);
	bconst(s, "a", &a);
	bconst(s, "b", &b);
	OUT(s, "%s($a, $b)", op);
}

static void
g_not(const OpCase *c, const char *op, Src *s)
{
	(void)c, (void)op;
	Shp a = rshape(0, 4, 4);
	bconst(s, "a", &a);
	OUT(s, "not($a)");
}

// Inputs returned as they are: a param, an i64 and a bool const.
static void
g_input(const OpCase *c, const char *op, Src *s)
{
	(void)op;
	Shp a = rshape(0, 4, 4), b = rshape(0, 3, 4);
	fparam(s, "a", &a, c->lo, c->hi, 0);
	iconst(s, "i", &b, -9, 9);
	bconst(s, "m", &a);
	OUT(s, "$a");
	OUT(s, "$i");
	OUT(s, "$m");
}

static void
g_full(const OpCase *c, const char *op, Src *s)
{
	(void)c, (void)op;
	Shp a = rshape(0, 4, 4), b = rshape(0, 3, 4);
	OUT(s, "full(value=%.3f, shape=%s, dtype=%s)", 4 * rnd() - 2, ints(a.d, a.rank), fdt);
	OUT(s, "full(value=%d, shape=%s, dtype=i64)", (int)ri(-9, 9), ints(b.d, b.rank));
	OUT(s, "full(value=1, shape=%s, dtype=bool)", ints(a.d, a.rank));
}

static void
g_iota(const OpCase *c, const char *op, Src *s)
{
	(void)c, (void)op;
	Shp a = rshape(1, 4, 4);
	OUT(s, "iota(shape=%s, axis=%d)", ints(a.d, a.rank), (int)ri(0, a.rank - 1));
	OUT(s, "iota(shape=%s, axis=%d, dtype=%s)", ints(a.d, a.rank), (int)ri(0, a.rank - 1), fdt);
}

// Samplers inside forward: broadcast parameters, and a shape= form.
static void
g_sampler(const OpCase *c, const char *op, Src *s)
{
	Shp o = rshape(0, 4, 4), a = bcast_of(&o), b = bcast_of(&o);
	fparam(s, "a", &a, c->lo, c->hi, 0);
	if (!strcmp(op, "exponential") || !strcmp(op, "bernoulli")) {
		OUT(s, "%s($a, seed=%d)", op, seed());
		OUT(s, "%s(%.3f, shape=%s, dtype=%s, seed=%d)", op, c->lo + (c->hi - c->lo) * rnd(),
		    ints(o.d, o.rank), fdt, seed());
		return;
	}
	fparam(s, "b", &b, c->lo2, c->hi2, 0);
	if (!strcmp(op, "uniform")) {
		OUT(s, "uniform($a, $a + $b, seed=%d)", seed());
		OUT(s, "uniform(-1, 2, shape=%s, dtype=%s, seed=%d)", ints(o.d, o.rank), fdt, seed());
	} else {
		OUT(s, "%s($a, $b, seed=%d)", op, seed());
		OUT(s, "%s(%.3f, 1.5, shape=%s, dtype=%s, seed=%d)", op, c->lo + (c->hi - c->lo) * rnd(),
		    ints(o.d, o.rank), fdt, seed());
	}
}

static void
g_kaiming(const OpCase *c, const char *op, Src *s)
{
	(void)c;
	Shp a = rshape(2, 4, 4);
	OUT(s, "%s(shape=%s, dtype=%s, mode=%s, a=%.2f, seed=%d)", op, ints(a.d, a.rank), fdt,
	    ri(0, 1) ? "fan_in" : "fan_out", rnd(), seed());
}

// Every conversion between the four dtypes that the data allow.
static void
g_cast(const OpCase *c, const char *op, Src *s)
{
	(void)op;
	Shp a = rshape(0, 4, 4), b = rshape(0, 3, 4);
	fparam(s, "a", &a, c->lo, c->hi, 0);
	iconst(s, "i", &b, -3, 4);
	bconst(s, "m", &b);
	OUT(s, "cast($a, dtype=i64)");
	OUT(s, "cast($a, dtype=bool)");
	OUT(s, "cast($a, dtype=%s)", strcmp(fdt, "f32") ? "f32" : "f64");
	OUT(s, "cast($i, dtype=%s)", fdt);
	OUT(s, "cast($i, dtype=bool)");
	OUT(s, "cast($m, dtype=%s)", fdt);
	OUT(s, "cast($m, dtype=i64)");
}

static void
g_where(const OpCase *c, const char *op, Src *s)
{
	(void)op;
	Shp o = rshape(0, 4, 3), m = bcast_of(&o), a = bcast_of(&o), b = bcast_of(&o);
	bconst(s, "m", &m);
	fparam(s, "a", &a, c->lo, c->hi, 0);
	fparam(s, "b", &b, c->lo, c->hi, 0);
	iconst(s, "ia", &b, -5, 5);
	iconst(s, "ib", &a, -5, 5);
	OUT(s, "where($m, $a, $b)");
	OUT(s, "where($m, $ia, $ib)");
}

// Reductions over a random nonempty axis subset (negative axes half the
// time, keepdim random), and over every axis.
static void
g_reduce(const OpCase *c, const char *op, Src *s)
{
	Shp a = rshape(1, 4, 4);
	int64_t p[8];
	permutation(p, a.rank);
	int n = (int)ri(1, a.rank);
	for (int i = 0; i < n; i++)
		if (ri(0, 1))
			p[i] -= a.rank;
	// max and min over an empty axis have no identity: the shape rule
	// refuses them with a diagnostic, as PyTorch does.  Zero sizes go on
	// the kept axes.
	int noid = !strcmp(op, "max") || !strcmp(op, "min");
	for (int i = 0; noid && i < n; i++)
		if (!a.d[(p[i] + a.rank) % a.rank])
			a.d[(p[i] + a.rank) % a.rank] = ri(1, 4);
	fparam(s, "a", &a, c->lo, c->hi, c->disc);
	OUT(s, "%s($a, %s, keepdim=%d)", op, ints(p, n), (int)ri(0, 1));
	if (!zero_mode || !noid)
		OUT(s, "%s($a)", op);
}

// argmax on small integers: ties, where the first maximum must win.
static void
g_argmax(const OpCase *c, const char *op, Src *s)
{
	(void)op;
	Shp a = rshape(1, 4, 4);
	int ax = (int)ri(0, a.rank - 1);
	if (!a.d[ax]) // an empty axis has no first maximum: a diagnostic
		a.d[ax] = ri(1, 4);
	fparam(s, "a", &a, c->lo, c->hi, 1);
	OUT(s, "argmax($a, %d, keepdim=%d)", ri(0, 1) ? ax : ax - a.rank, (int)ri(0, 1));
}

static void
g_reshape(const OpCase *c, const char *op, Src *s)
{
	(void)op;
	Shp a = rshape(0, 4, 3);
	int64_t n = 1;
	for (int i = 0; i < a.rank; i++)
		n *= a.d[i];
	Shp t = {0}; // n factored into a random shape: random divisors peeled
	int64_t rest = n;
	while (t.rank < 4 && rest > 1 && ri(0, 3)) {
		int64_t d = ri(1, rest);
		while (rest % d)
			d--;
		t.d[t.rank++] = d;
		rest /= d;
	}
	t.d[t.rank++] = rest;
	if (zero_mode && n == 0 && ri(0, 1)) // another way to hold no element
		t.d[t.rank++] = ri(1, 3);
	if (n && ri(0, 1)) // the frontend infers one axis
		t.d[ri(0, t.rank - 1)] = -1;
	fparam(s, "a", &a, c->lo, c->hi, 0);
	OUT(s, "reshape($a, %s)", ints(t.d, t.rank));
}

static void
g_permute(const OpCase *c, const char *op, Src *s)
{
	(void)op;
	Shp a = rshape(1, 5, 3);
	int64_t p[8];
	permutation(p, a.rank);
	fparam(s, "a", &a, c->lo, c->hi, 0);
	OUT(s, "permute($a, %s)", ints(p, a.rank));
}

static void
g_broadcast(const OpCase *c, const char *op, Src *s)
{
	(void)op;
	Shp o = rshape(0, 4, 3), a = bcast_of(&o);
	fparam(s, "a", &a, c->lo, c->hi, 0);
	OUT(s, "broadcast($a, shape=%s)", ints(o.d, o.rank));
}

// start/end/step per axis (empty only in zero mode), the op's own form and
// Python's indexing (negative bounds, an integer index dropping an axis).
static void
slice_bounds(const Shp *a, int64_t *st, int64_t *en, int64_t *sp, Shp *v)
{
	*v = *a;
	for (int i = 0; i < a->rank; i++) {
		int64_t d = a->d[i];
		int empty = zero_mode && ri(0, 3) == 0;
		st[i] = d ? ri(0, empty ? d : d - 1) : 0;
		en[i] = empty ? st[i] : ri(st[i] + (d > 0), d);
		sp[i] = ri(1, 3);
		v->d[i] = (en[i] - st[i] + sp[i] - 1) / sp[i];
	}
}

static void
g_slice(const OpCase *c, const char *op, Src *s)
{
	(void)op;
	Shp a = rshape(1, 4, 5), v;
	int64_t st[8], en[8], sp[8];
	slice_bounds(&a, st, en, sp, &v);
	fparam(s, "a", &a, c->lo, c->hi, 0);
	OUT(s, "slice($a, start=%s, end=%s, step=%s)", ints(st, a.rank), ints(en, a.rank),
	    ints(sp, a.rank));
	if (a.d[0] > 1 || zero_mode) {
		char ix[256] = "";
		int64_t d = a.d[0];
		put(ix, sizeof ix, "%" PRId64 ":%" PRId64 ":%d", d ? -d : 0, d ? ri(1, d) : 0,
		    (int)ri(1, 2));
		if (a.rank > 1 && a.d[1] > 0)
			put(ix, sizeof ix, ", %" PRId64, ri(-a.d[1], a.d[1] - 1));
		OUT(s, "$a[%s]", ix);
	}
}

static void
g_slice_update(const OpCase *c, const char *op, Src *s)
{
	(void)op;
	Shp a = rshape(1, 4, 5), v;
	int64_t st[8], en[8], sp[8];
	slice_bounds(&a, st, en, sp, &v);
	fparam(s, "a", &a, c->lo, c->hi, 0);
	fparam(s, "v", &v, c->lo, c->hi, 0);
	OUT(s, "slice_update($a, $v, start=%s, end=%s, step=%s)", ints(st, a.rank), ints(en, a.rank),
	    ints(sp, a.rank));
}

static void
g_pad(const OpCase *c, const char *op, Src *s)
{
	(void)op;
	Shp a = rshape(1, 4, 3);
	int64_t lo[8], hi[8];
	for (int i = 0; i < a.rank; i++)
		lo[i] = ri(0, 2), hi[i] = ri(0, 2);
	fparam(s, "a", &a, c->lo, c->hi, 0);
	OUT(s, "pad($a, before=%s, after=%s, value=%.2f)", ints(lo, a.rank), ints(hi, a.rank),
	    rnd() * 4 - 2);
}

// Two to four operands of random sizes along a random axis.
static void
g_concat(const OpCase *c, const char *op, Src *s)
{
	(void)op;
	Shp a = rshape(1, 4, 3);
	int ax = (int)ri(0, a.rank - 1), n = (int)ri(2, 4);
	char e[512] = "", nm[16];
	for (int k = 0; k < n; k++) {
		Shp b = a;
		b.d[ax] = rdim(1, 3);
		snprintf(nm, sizeof nm, "a%d", k);
		fparam(s, nm, &b, c->lo, c->hi, 0);
		put(e, sizeof e, "%s$a%d", k ? ", " : "", k);
	}
	OUT(s, "concat([%s], axis=%d)", e, ri(0, 1) ? ax : ax - a.rank);
}

static void
g_resize(const OpCase *c, const char *op, Src *s)
{
	(void)op;
	Shp a = rshape(0, 3, 4), t = rshape(0, 3, 5);
	fparam(s, "a", &a, c->lo, c->hi, 0);
	OUT(s, "resize($a, shape=%s)", ints(t.d, t.rank));
}

// take / take_add along a random axis with random indices (repeats: the
// scatter-add accumulates); an empty axis gets an empty index tensor.
static void
g_take(const OpCase *c, const char *op, Src *s)
{
	Shp a = rshape(1, 3, 4), ix = rshape(0, 2, 4);
	int ax = (int)ri(0, a.rank - 1);
	if (a.d[ax] == 0) {
		if (ix.rank == 0)
			ix.rank = 1;
		ix.d[0] = 0;
	}
	fparam(s, "a", &a, c->lo, c->hi, 0);
	iconst(s, "i", &ix, 0, a.d[ax]);
	if (!strcmp(op, "take")) {
		OUT(s, "take($a, $i, axis=%d)", ax);
		return;
	}
	Shp u = {0}; // take's result: a[:ax] + idx + a[ax+1:]
	for (int i = 0; i < ax; i++)
		u.d[u.rank++] = a.d[i];
	for (int i = 0; i < ix.rank; i++)
		u.d[u.rank++] = ix.d[i];
	for (int i = ax + 1; i < a.rank; i++)
		u.d[u.rank++] = a.d[i];
	fparam(s, "u", &u, c->lo, c->hi, 0);
	OUT(s, "take_add($a, $i, $u, axis=%d)", ax);
}

// take_along / take_along_add: indices of a's rank, any size along the axis.
static void
g_take_along(const OpCase *c, const char *op, Src *s)
{
	Shp a = rshape(1, 3, 4), ix = a;
	int ax = (int)ri(0, a.rank - 1);
	ix.d[ax] = a.d[ax] ? rdim(1, 4) : 0;
	fparam(s, "a", &a, c->lo, c->hi, 0);
	iconst(s, "i", &ix, 0, a.d[ax]);
	if (!strcmp(op, "take_along")) {
		OUT(s, "take_along($a, $i, axis=%d)", ax);
		return;
	}
	fparam(s, "u", &ix, c->lo, c->hi, 0);
	OUT(s, "take_along_add($a, $i, $u, axis=%d)", ax);
}

static void
g_one_hot(const OpCase *c, const char *op, Src *s)
{
	(void)c, (void)op;
	Shp ix = rshape(0, 3, 3);
	int64_t n = rdim(1, 5);
	if (n == 0) {
		if (ix.rank == 0)
			ix.rank = 1;
		ix.d[0] = 0;
	}
	iconst(s, "i", &ix, 0, n);
	OUT(s, "one_hot($i, %" PRId64 ", dtype=%s)", n, fdt);
	OUT(s, "one_hot($i, %" PRId64 ", dtype=i64)", n);
}

// (..., M, K) @ (..., K, N) with batch axes broadcast between the operands.
static void
g_matmul(const OpCase *c, const char *op, Src *s)
{
	(void)op;
	int64_t m = rdim(1, 5), k = rdim(1, 6), n = rdim(1, 5);
	Shp bo = rshape(0, 2, 3), ba = bcast_of(&bo), bb = bcast_of(&bo);
	ba.d[ba.rank++] = m, ba.d[ba.rank++] = k;
	bb.d[bb.rank++] = k, bb.d[bb.rank++] = n;
	fparam(s, "a", &ba, c->lo, c->hi, 0);
	fparam(s, "b", &bb, c->lo, c->hi, 0);
	OUT(s, "$a @ $b");
}

// A window geometry on one spatial axis: kernel k, stride, padding (at
// most k/2 for the pools), dilation, an input length that fits.  Pools
// never get a window of padding only (PyTorch's shapes never make one).
typedef struct Win {
	int64_t k, s, p, d, len, out;
} Win;

static Win
rwin(int pool, int dil)
{
	Win w;
again:
	w.k = ri(1, 4);
	w.s = ri(1, 3);
	w.p = ri(0, pool ? w.k / 2 : 2);
	w.d = dil ? ri(1, 2) : 1;
	int64_t span = w.d * (w.k - 1) + 1;
	int64_t lo = span - 2 * w.p > 1 ? span - 2 * w.p : 1;
	w.len = ri(lo, lo + 5);
	w.out = (w.len + 2 * w.p - span) / w.s + 1;
	for (int64_t o = 0; pool && o < w.out; o++) {
		int any = 0;
		for (int64_t j = 0; j < w.k; j++) {
			int64_t at = o * w.s - w.p + j * w.d;
			any |= at >= 0 && at < w.len;
		}
		if (!any)
			goto again;
	}
	return w;
}

#define WL(w, ns, f) ints((int64_t[]){(w)[0].f, (w)[1].f}, ns)

// conv and its adjoints, 1-d or 2-d: random groups, stride, padding,
// dilation; zero mode: no sample, channel or output channel at times.
static void
g_conv(const OpCase *c, const char *op, Src *s)
{
	int ns = (int)ri(1, 2);
	Win w[2] = {rwin(0, 1), rwin(0, 1)};
	int64_t groups = ri(1, 2), n = rdim(1, 2);
	int64_t cin = groups * rdim(1, 2), cout = groups * rdim(1, 2);
	Shp x = {ns + 2, {n, cin}}, wt = {ns + 2, {cout, cin / groups}}, g = {ns + 2, {n, cout}};
	for (int i = 0; i < ns; i++) {
		x.d[2 + i] = w[i].len;
		wt.d[2 + i] = w[i].k;
		g.d[2 + i] = w[i].out;
	}
	char geom[256];
	snprintf(geom, sizeof geom, "stride=%s, padding=%s, dilation=%s, groups=%" PRId64,
	         WL(w, ns, s), WL(w, ns, p), WL(w, ns, d), groups);
	if (!strcmp(op, "conv")) {
		fparam(s, "x", &x, c->lo, c->hi, 0);
		fparam(s, "w", &wt, c->lo, c->hi, 0);
		OUT(s, "conv($x, $w, %s)", geom);
	} else if (!strcmp(op, "conv_input_grad")) {
		fparam(s, "g", &g, c->lo, c->hi, 0);
		fparam(s, "w", &wt, c->lo, c->hi, 0);
		OUT(s, "conv_input_grad($g, $w, %s, size=%s)", geom, WL(w, ns, len));
	} else {
		fparam(s, "x", &x, c->lo, c->hi, 0);
		fparam(s, "g", &g, c->lo, c->hi, 0);
		OUT(s, "conv_weight_grad($x, $g, %s, kernel=%s)", geom, WL(w, ns, k));
	}
}

// The pools and their adjoints, 1-d or 2-d; max pools on small integers
// (ties: the first maximum in row-major window order wins).
static void
g_pool(const OpCase *c, const char *op, Src *s)
{
	int ns = (int)ri(1, 2);
	int mx = !strncmp(op, "max", 3);
	Win w[2] = {rwin(1, mx), rwin(1, mx)};
	int64_t n = rdim(1, 2), ch = rdim(1, 2);
	Shp x = {ns + 2, {n, ch}}, y = {ns + 2, {n, ch}};
	for (int i = 0; i < ns; i++)
		x.d[2 + i] = w[i].len, y.d[2 + i] = w[i].out;
	char geom[256];
	snprintf(geom, sizeof geom, "kernel=%s, stride=%s, padding=%s", WL(w, ns, k), WL(w, ns, s),
	         WL(w, ns, p));
	if (mx)
		put(geom, sizeof geom, ", dilation=%s", WL(w, ns, d));
	else
		put(geom, sizeof geom, ", count_include_pad=%d", (int)ri(0, 1));
	if (!strcmp(op, "max_pool")) {
		fparam(s, "x", &x, 0, 4, 1);
		OUT(s, "max_pool($x, %s)", geom);
	} else if (!strcmp(op, "max_pool_grad")) {
		fparam(s, "x", &x, 0, 4, 1);
		fparam(s, "g", &y, c->lo, c->hi, 0);
		OUT(s, "max_pool_grad($x, $g, %s)", geom);
	} else if (!strcmp(op, "max_pool_gather")) {
		fparam(s, "x", &x, 0, 4, 1);
		fparam(s, "h", &x, c->lo, c->hi, 0);
		OUT(s, "max_pool_gather($x, $h, %s)", geom);
	} else if (!strcmp(op, "avg_pool")) {
		fparam(s, "x", &x, c->lo, c->hi, 0);
		OUT(s, "avg_pool($x, %s)", geom);
	} else {
		fparam(s, "g", &y, c->lo, c->hi, 0);
		OUT(s, "avg_pool_grad($g, %s, size=%s)", geom, WL(w, ns, len));
	}
}

// adaptive_avg_pool (shrinking and growing) and its adjoint, 1-d or 2-d.
static void
g_adaptive(const OpCase *c, const char *op, Src *s)
{
	int ns = (int)ri(1, 2);
	int64_t in[2] = {ri(1, 7), ri(1, 7)}, out[2] = {ri(1, 7), ri(1, 7)};
	Shp x = {ns + 2, {rdim(1, 2), rdim(1, 2)}}, y = x;
	for (int i = 0; i < ns; i++)
		x.d[2 + i] = in[i], y.d[2 + i] = out[i];
	if (!strcmp(op, "adaptive_avg_pool")) {
		fparam(s, "x", &x, c->lo, c->hi, 0);
		OUT(s, "adaptive_avg_pool($x, size=%s)", ints(out, ns));
	} else {
		fparam(s, "g", &y, c->lo, c->hi, 0);
		OUT(s, "adaptive_avg_pool_grad($g, size=%s)", ints(in, ns));
	}
}

// upsample_bilinear (up and down, align_corners random) and its adjoint.
static void
g_upsample(const OpCase *c, const char *op, Src *s)
{
	int64_t in[2] = {ri(1, 5), ri(1, 5)}, out[2] = {ri(1, 7), ri(1, 7)};
	int ac = (int)ri(0, 1);
	Shp x = {4, {rdim(1, 2), rdim(1, 2), in[0], in[1]}};
	Shp y = {4, {x.d[0], x.d[1], out[0], out[1]}};
	if (!strcmp(op, "upsample_bilinear")) {
		fparam(s, "x", &x, c->lo, c->hi, 0);
		OUT(s, "upsample_bilinear($x, size=%s, align_corners=%d)", ints(out, 2), ac);
	} else {
		fparam(s, "g", &y, c->lo, c->hi, 0);
		OUT(s, "upsample_bilinear_grad($g, size=%s, align_corners=%d)", ints(in, 2), ac);
	}
}

// scan (and get): two carries, a sequence, an invariant; forward or
// reverse; the final carries and the stacked outputs.  Zero mode: a scan
// of length 0 or a carry of width 0.
static void
g_scan(const OpCase *c, const char *op, Src *s)
{
	(void)op;
	int64_t t = rdim(1, 4), h = rdim(1, 3);
	Shp v = {1, {h}}, xs = {2, {t, h}};
	fparam(s, "c0", &v, c->lo, c->hi, 0);
	fparam(s, "d0", &v, c->lo, c->hi, 0);
	fparam(s, "xs", &xs, c->lo, c->hi, 0);
	fparam(s, "w", &v, c->lo, c->hi, 0);
	const char *T = fdt;
	DECL(s,
	     "def $cell(c: %s[%" PRId64 "], d: %s[%" PRId64 "], x: %s[%" PRId64 "], w: %s[%" PRId64
	     "]) -> (%s[%" PRId64 "], %s[%" PRId64 "], %s[%" PRId64 "]) {\n"
	     "  n = tanh(c * w + x * d)\n  return n, d + 0.5 * sin(n), n * c\n}\n",
	     T, h, T, h, T, h, T, h, T, h, T, h, T, h);
	int rev = (int)ri(0, 1);
	for (int k = 0; k < 3; k++)
		OUT(s, "get(scan($cell, $c0, $d0, $xs, $w, ncarry=2, nxs=1, reverse=%d), index=%d)", rev,
		    k);
}

static void
g_place(const OpCase *c, const char *op, Src *s)
{
	Shp a = rshape(0, 4, 4);
	fparam(s, "a", &a, c->lo, c->hi, 0);
	OUT(s, "$a.%s()", !strcmp(op, "to_host") ? "cpu" : "cuda");
}

// The optimal assignment of a random cost matrix (M <= N: every row gets
// a column; M > N: some rows get -1).
static void
g_lsa(const OpCase *c, const char *op, Src *s)
{
	(void)op;
	int64_t m = rdim(1, 5), n = rdim(1, 5);
	Shp a = {2, {m, n}};
	fparam(s, "a", &a, c->lo, c->hi, 0);
	OUT(s, "linear_sum_assignment($a)");
}

// The table: one CASE_<op> per row of ir/ops.def, {generator, lo, hi, lo2,
// hi2, disc, f32 tolerance}.  Domains keep each op well-conditioned where
// its math allows (the inputs of sum and mean are positive: a sum of terms
// of both signs can cancel to far below its terms, and the error of an f32
// sum is relative to the terms); the poles and negative arguments of
// lgamma and digamma are in, because the error is normalized by the
// output's largest value.
// clang-format off
#define CASE_neg       {g_unary, -2, 2}
#define CASE_exp       {g_unary, -4, 4}
#define CASE_log       {g_unary, 0.01, 5}
#define CASE_log1p     {g_unary, -0.9, 5}
#define CASE_expm1     {g_unary, -3, 3}
#define CASE_sqrt      {g_unary, 0, 5}
#define CASE_rsqrt     {g_unary, 0.05, 5}
#define CASE_tanh      {g_unary, -4, 4}
#define CASE_sigmoid   {g_unary, -8, 8}
#define CASE_softplus  {g_unary, -30, 30}
#define CASE_erf       {g_unary, -3, 3}
#define CASE_sin       {g_unary, -8, 8}
#define CASE_cos       {g_unary, -8, 8}
#define CASE_lgamma    {g_unary, -3.5, 6}
#define CASE_digamma   {g_unary, -3.5, 6}
#define CASE_relu      {g_unary, -2, 2}
#define CASE_abs       {g_unary, -2, 2}
#define CASE_step      {g_unary, -2, 3, .disc = 1}
#define CASE_sign      {g_unary, -2, 3, .disc = 1}
#define CASE_floor     {g_unary, -5, 5}
#define CASE_polygamma {g_polygamma, 0.2, 6}
#define CASE_clamp     {g_clamp, -2, 2}
#define CASE_hardtanh  {g_clamp, -2, 2}
#define CASE_add       {g_binary, -2, 2, -2, 2}
#define CASE_sub       {g_binary, -2, 2, -2, 2}
#define CASE_mul       {g_binary, -2, 2, -2, 2}
#define CASE_div       {g_binary, -2, 2, 0.3, 3}
#define CASE_pow       {g_binary, 0.1, 3, -2.5, 2.5}
#define CASE_xlogy     {g_binary, 0, 3, 0.05, 4, .disc = 0}
#define CASE_maximum   {g_binary, -2, 3, -2, 3, .disc = 1}
#define CASE_minimum   {g_binary, -2, 3, -2, 3, .disc = 1}
#define CASE_eq        {g_cmp}
#define CASE_ne        {g_cmp}
#define CASE_lt        {g_cmp}
#define CASE_le        {g_cmp}
#define CASE_gt        {g_cmp}
#define CASE_ge        {g_cmp}
#define CASE_and       {g_logical}
#define CASE_or        {g_logical}
#define CASE_input     {g_input, -2, 2}
#define CASE_full      {g_full}
#define CASE_iota      {g_iota}
#define CASE_uniform   {g_sampler, -1, 1, 0.5, 2}
#define CASE_normal    {g_sampler, -1, 1, 0.5, 2}
// Both Marsaglia-Tsang branches: concentration below and above 1.
// CUDA: gamma is drawn by initializers only (CPU code) and the printer
// refuses it (docs/CUDA.md, "Samplers").
#define CASE_gamma     {g_sampler, 0.2, 3, 0.5, 2, .cuda_refused = "does not support rand yet"}
#define CASE_exponential {g_sampler, 0.3, 3}
#define CASE_bernoulli {g_sampler, 0, 1}
#define CASE_kaiming_normal  {g_kaiming}
#define CASE_kaiming_uniform {g_kaiming}
#define CASE_cast      {g_cast, -3, 3}
#define CASE_not       {g_not}
#define CASE_where     {g_where, -2, 2}
#define CASE_sum       {g_reduce, 0.5, 1.5}
#define CASE_mean      {g_reduce, 0.5, 1.5}
#define CASE_max       {g_reduce, -2, 2}
#define CASE_min       {g_reduce, -2, 2}
#define CASE_logsumexp {g_reduce, -3, 3}
#define CASE_argmax    {g_argmax, 0, 3}
#define CASE_reshape   {g_reshape, -2, 2}
#define CASE_permute   {g_permute, -2, 2}
#define CASE_broadcast {g_broadcast, -2, 2}
#define CASE_slice     {g_slice, -2, 2}
#define CASE_slice_update {g_slice_update, -2, 2}
#define CASE_pad       {g_pad, -2, 2}
#define CASE_concat    {g_concat, -2, 2}
#define CASE_resize    {g_resize, -2, 2}
#define CASE_take      {g_take, -2, 2}
#define CASE_take_along {g_take_along, -2, 2}
#define CASE_take_add  {g_take, -2, 2}
#define CASE_take_along_add {g_take_along, -2, 2}
#define CASE_one_hot   {g_one_hot}
#define CASE_matmul    {g_matmul, -1, 1}
#define CASE_conv      {g_conv, -1, 1}
#define CASE_conv_input_grad  {g_conv, -1, 1}
#define CASE_conv_weight_grad {g_conv, -1, 1}
#define CASE_max_pool  {g_pool, -1, 1}
#define CASE_max_pool_grad {g_pool, -1, 1}
#define CASE_max_pool_gather {g_pool, -1, 1}
#define CASE_avg_pool  {g_pool, -1, 1}
#define CASE_adaptive_avg_pool {g_adaptive, -1, 1}
#define CASE_upsample_bilinear {g_upsample, -1, 1}
#define CASE_avg_pool_grad {g_pool, -1, 1}
#define CASE_adaptive_avg_pool_grad {g_adaptive, -1, 1}
#define CASE_upsample_bilinear_grad {g_upsample, -1, 1}
#define CASE_scan      {g_scan, -1, 1}
#define CASE_get       {g_scan, -1, 1}
#define CASE_to_host   {g_place, -2, 2}
#define CASE_to_device {g_place, -2, 2}
#define CASE_linear_sum_assignment {g_lsa, 0, 1}
// clang-format on

static const OpCase cases[OP_COUNT] = {
#define UNARY(n, ...) [OP_##n] = CASE_##n,
#define UNARYA(n, ...) [OP_##n] = CASE_##n,
#define BINARY(n, ...) [OP_##n] = CASE_##n,
#define CMP(n, ...) [OP_##n] = CASE_##n,
#define OTHER(n, ...) [OP_##n] = CASE_##n,
#include "ops.def" // UNARY UNARYA BINARY CMP OTHER: every row has a case
};

// ---------------------------------------------------------------- modules

// One generated case: its op, trial seed, text.
typedef struct Gen {
	int op;
	uint64_t seed;
	Src s;
} Gen;

static void
append_subst(char **buf, size_t *len, size_t *cap, const char *text, const char *prefix)
{
	size_t pl = strlen(prefix);
	for (const char *p = text; *p; p++) {
		if (*len + pl + 2 > *cap) {
			*cap = 2 * *cap + pl + 64;
			*buf = realloc(*buf, *cap);
		}
		if (*p == '$') {
			memcpy(*buf + *len, prefix, pl);
			*len += pl;
		} else {
			(*buf)[(*len)++] = *p;
		}
	}
	(*buf)[*len] = 0;
}

// The module of cases gs[0..n): every declaration, then forward returning
// every output as "<op>_o<k>" (malloc'ed).
static char *
module_text(const Gen *gs, int n)
{
	size_t len = 0, cap = 4096;
	char *b = malloc(cap), pre[64];
	b[0] = 0;
	for (int i = 0; i < n; i++) {
		snprintf(pre, sizeof pre, "%s_", ir_op(gs[i].op)->name);
		append_subst(&b, &len, &cap, gs[i].s.decl, pre);
	}
	append_subst(&b, &len, &cap, "def forward() {\n  return ", "");
	for (int i = 0; i < n; i++) {
		snprintf(pre, sizeof pre, "%s_", ir_op(gs[i].op)->name);
		for (int k = 0; k < gs[i].s.nout; k++) {
			char tail[96];
			append_subst(&b, &len, &cap, i || k ? ",\n    " : "", "");
			append_subst(&b, &len, &cap, gs[i].s.out[k], pre);
			snprintf(tail, sizeof tail, " as %s_o%d", ir_op(gs[i].op)->name, k);
			append_subst(&b, &len, &cap, tail, "");
		}
	}
	append_subst(&b, &len, &cap, "\n}\n", "");
	return b;
}

static int
graph_has(const Graph *g, int op)
{
	for (NodeId n = 1; n < g->nnode; n++)
		if (g->node[n].op == op)
			return 1;
	for (uint32_t i = 0; i < g->nsub; i++)
		if (graph_has(g->sub[i], op))
			return 1;
	return 0;
}

// Whether some value of g (or of a body) holds no element.
static int
graph_has_empty(const Graph *g)
{
	for (NodeId n = 1; n < g->nnode; n++)
		if (g->node[n].dtype != DT_TUPLE && ir_numel(ir_shape(g, n)) == 0)
			return 1;
	for (uint32_t i = 0; i < g->nsub; i++)
		if (graph_has_empty(g->sub[i]))
			return 1;
	return 0;
}

// Parses `text` in a child (the frontend may crash on a zero size):
// bit 0 parsed, bit 1 its graph has `op`, bit 2 it has a zero-size value;
// -signal when the child died.
static int
probe(const char *text, int op)
{
	fflush(stdout);
	fflush(stderr);
	pid_t pid = fork();
	if (pid == 0) {
		alarm(CHILD_SECONDS);
		FeOptions fo = {.diag = stderr};
		Module *m = fe_parse_string(ir_op(op)->name, text, strlen(text), &fo);
		int r = 0;
		if (m)
			r = 1 | graph_has(m->main, op) << 1 | graph_has_empty(m->main) << 2;
		ir_module_free(m);
		exit(r);
	}
	int st = 0;
	if (pid < 0 || waitpid(pid, &st, 0) < 0)
		return 0;
	return WIFSIGNALED(st) ? -WTERMSIG(st) : WEXITSTATUS(st);
}

static uint64_t base_seed = 20260412;

// Case op of trial tr, drawn (zero mode: again, up to 64 times, until its
// graph has a zero-size value; normal mode: until it has none).  0 with a
// message when no draw parses, holds the op or fits the mode.
static int
generate(int op, int tr, uint64_t replay, Gen *g, char *why, size_t nwhy)
{
	const char *name = ir_op(op)->name;
	for (int attempt = 0; attempt < 64; attempt++) {
		memset(g, 0, sizeof *g);
		g->op = op;
		g->seed = replay ? replay : mix(base_seed ^ mix((uint64_t)op * 1000003 + (uint64_t)tr * 101 + (uint64_t)attempt));
		rng = mix(g->seed) | 1;
		cases[op].gen(&cases[op], name, &g->s);
		char *text = module_text(g, 1);
		int pr = probe(text, op);
		if (pr < 0) {
			snprintf(why, nwhy, "the frontend crashed: signal %d (%s):\n%s", -pr,
			         strsignal(-pr), text);
			free(text);
			return 0;
		}
		if (!(pr & 1)) {
			snprintf(why, nwhy, "the case does not parse:\n%s", text);
			free(text);
			return 0;
		}
		int has = pr & 2, empty = (pr & 4) != 0;
		if (!has) {
			snprintf(why, nwhy, "the case's graph has no '%s' node:\n%s", name, text);
			free(text);
			return 0;
		}
		free(text);
		if (empty == zero_mode || replay)
			return 1;
	}
	snprintf(why, nwhy, "no draw of 64 gives a %s case", zero_mode ? "zero-size" : "nonempty");
	return 0;
}

// ---------------------------------------------------------------- running

typedef struct Run {
	const char *label; // "f32", "f64 compute", "f64 model"
	int compute_f64;
	int cuda;
	double tol; // 0: each case's own f32 tolerance
} Run;

// The outcome of one child: the cg_check report, or why there is none.
typedef struct Outcome {
	int ok; // the child finished and cg_check returned >= 0
	char why[512]; // otherwise: the error, the signal, the exit status
	char *report;
} Outcome;

// Compiles and checks module `text` in a child process (cg_check, every
// output reported); the parent collects the report from a pipe.
static Outcome
run_child(const char *text, const Run *r)
{
	Outcome oc = {0};
	int fd[2];
	fflush(stdout);
	fflush(stderr);
	if (pipe(fd)) {
		snprintf(oc.why, sizeof oc.why, "pipe failed");
		return oc;
	}
	pid_t pid = fork();
	if (pid < 0) {
		snprintf(oc.why, sizeof oc.why, "fork failed");
		close(fd[0]), close(fd[1]);
		return oc;
	}
	if (pid == 0) {
		close(fd[0]);
		alarm(CHILD_SECONDS);
		FILE *rep = fdopen(fd[1], "w");
		FeOptions fo = {.diag = stderr};
		Module *m = fe_parse_string("backend_ops", text, strlen(text), &fo);
		if (!m) {
			fprintf(rep, "ERROR does not parse\n");
			fclose(rep);
			exit(3);
		}
		static const char *const fwd[] = {"forward"};
		CgOptions o = {.tasks = fwd, .ntasks = 1, .opt_level = -1, .compute_f64 = r->compute_f64};
#ifdef FADC_HAVE_CUDA
		if (r->cuda)
			o.targets = CG_TARGET_CPU | CG_TARGET_CUDA, o.jobs = 1;
#endif
		CgCheck c = {INFINITY, INFINITY, 0, 1};
		char err[4096] = "";
		int nf = cg_check(m, &o, &c, rep, err, sizeof err);
		if (nf < 0)
			fprintf(rep, "ERROR %s\n", err);
		fclose(rep);
		ir_module_free(m);
		exit(nf < 0 ? 2 : 0);
	}
	close(fd[1]);
	size_t len = 0, cap = 8192;
	oc.report = malloc(cap);
	for (;;) {
		if (len + 4096 + 1 > cap)
			oc.report = realloc(oc.report, cap *= 2);
		ssize_t k = read(fd[0], oc.report + len, 4096);
		if (k <= 0)
			break;
		len += (size_t)k;
	}
	oc.report[len] = 0;
	close(fd[0]);
	int st;
	waitpid(pid, &st, 0);
	if (WIFSIGNALED(st)) {
		snprintf(oc.why, sizeof oc.why, "crashed: signal %d (%s)", WTERMSIG(st),
		         WTERMSIG(st) == SIGALRM ? "timed out" : strsignal(WTERMSIG(st)));
	} else if (WEXITSTATUS(st)) {
		const char *e = strstr(oc.report, "ERROR ");
		snprintf(oc.why, sizeof oc.why, "%s", e ? e + 6 : "");
		if (!e)
			snprintf(oc.why, sizeof oc.why, "exit status %d", WEXITSTATUS(st));
		char *nl = strchr(oc.why, '\n');
		if (nl && e)
			*nl = 0;
	} else {
		oc.ok = 1;
	}
	return oc;
}

// Per op: the largest error seen per run kind, for the summary.
static double worst[OP_COUNT][3];
static int nfail, ncheck;
static uint8_t failed_op[OP_COUNT];
static char fail_why[OP_COUNT][256];

static double
case_tol(int op, const Run *r)
{
	return r->tol ? r->tol : cases[op].tol ? cases[op].tol : TOL_F32;
}

// The case whose prefix "<op>_" starts `name` (the longest: max_pool_ before max_).
static int
case_of(const char *name, const Gen *gs, int n)
{
	int best = -1;
	size_t bl = 0;
	for (int i = 0; i < n; i++) {
		const char *on = ir_op(gs[i].op)->name;
		size_t l = strlen(on);
		if (l > bl && !strncmp(name, on, l) && name[l] == '_')
			best = i, bl = l;
	}
	return best;
}

static void
fail_case(const Gen *g, const Run *r, int tr, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	nfail++;
	const char *name = ir_op(g->op)->name;
	fprintf(stderr,
	        "FAIL %s (%s, trial %d): %s\n  reproduce: FADC_BACKEND_OPS_CASE=%s "
	        "FADC_BACKEND_OPS_REPLAY=%" PRIu64 "%s\n",
	        name, r->label, tr, msg, name, g->seed, zero_mode ? " FADC_BACKEND_OPS_ZERO=1" : "");
	char *text = module_text(g, 1);
	fprintf(stderr, "%s", text);
	free(text);
	if (!failed_op[g->op])
		snprintf(fail_why[g->op], sizeof fail_why[g->op], "%s: %.200s", r->label, msg);
	failed_op[g->op] = 1;
}

// Judges a report: every output of every case present and within its
// tolerance, every initializer within TOL_INIT.  Returns the cases failed;
// with `blame` 0 it only counts (a batch that will be rerun case by case).
static int
judge(const Outcome *oc, const Gen *gs, int n, const Run *r, int kind, int tr, int blame)
{
	double *err = calloc((size_t)n, sizeof *err), *ierr = calloc((size_t)n, sizeof *ierr);
	int *seen = calloc((size_t)n, sizeof *seen);
	int bad = 0;
	for (char *line = oc->report; line && *line;) {
		char *nl = strchr(line, '\n');
		if (nl)
			*nl = 0;
		char task[64], name[128];
		const char *e = strstr(line, " err ");
		if (e && sscanf(line, "%63s %127s", task, name) == 2) {
			int i = case_of(name, gs, n);
			double v = strtod(e + 5, NULL);
			if (i < 0) {
				fprintf(stderr, "FAIL report line of no case: %s\n", line);
				nfail++;
			} else if (!strcmp(task, "init")) {
				ierr[i] = fmax(ierr[i], v);
			} else {
				err[i] = fmax(err[i], v);
				seen[i]++;
			}
		}
		if (nl)
			*nl = '\n';
		line = nl ? nl + 1 : NULL;
	}
	for (int i = 0; i < n; i++) {
		double tol = case_tol(gs[i].op, r);
		int ok = seen[i] == gs[i].s.nout && err[i] <= tol && ierr[i] <= TOL_INIT;
		ncheck++;
		if (ok && err[i] > worst[gs[i].op][kind])
			worst[gs[i].op][kind] = err[i];
		if (ok)
			continue;
		bad++;
		if (!blame) {
			ncheck--;
			continue;
		}
		if (seen[i] != gs[i].s.nout)
			fail_case(&gs[i], r, tr, "%d of %d outputs reported", seen[i], gs[i].s.nout);
		else if (ierr[i] > TOL_INIT)
			fail_case(&gs[i], r, tr, "an initializer's error %.3g > %g", ierr[i], TOL_INIT);
		else
			fail_case(&gs[i], r, tr, "normalized error %.3g > %g", err[i], tol);
	}
	free(err), free(ierr), free(seen);
	return bad;
}

// Cases gs[0..n) as modules of at most MAXRET outputs (the frontend's
// limit on return values); on any failure each case alone, to name the op.
static void
check_batch(const Gen *gs, int n, const Run *r, int kind, int tr, int verbose)
{
	if (n > 1) {
		int nout = 0, k = 0;
		while (k < n && nout + gs[k].s.nout <= MAXRET)
			nout += gs[k++].s.nout;
		if (k < n) {
			check_batch(gs, k, r, kind, tr, verbose);
			check_batch(gs + k, n - k, r, kind, tr, verbose);
			return;
		}
	}
	if (n > 1) {
		char *text = module_text(gs, n);
		if (verbose)
			printf("# batch, %s, trial %d\n%s", r->label, tr, text);
		Outcome oc = run_child(text, r);
		free(text);
		int bad = oc.ok ? judge(&oc, gs, n, r, kind, tr, 0) : n;
		free(oc.report);
		if (!bad)
			return;
		if (!oc.ok)
			fprintf(stderr, "%s batch of trial %d: %s; each case alone:\n", r->label, tr, oc.why);
	}
	for (int i = 0; i < n; i++) {
		char *text = module_text(&gs[i], 1);
		if (verbose && n == 1)
			printf("# %s, %s, trial %d\n%s", ir_op(gs[i].op)->name, r->label, tr, text);
		Outcome oc = run_child(text, r);
		free(text);
		if (oc.ok) {
			judge(&oc, &gs[i], 1, r, kind, tr, 1);
		} else {
			ncheck++;
			fail_case(&gs[i], r, tr, "%s", oc.why);
		}
		free(oc.report);
	}
}

// The cases whose op the CUDA backend refuses: checked for the CPU alone,
// and compiled for CUDA once, which must fail with the stated message.
// Removes them from gs; returns the cases left.
static int
check_refused(Gen *gs, int n, const Run *r, int kind, int tr, int verbose)
{
	int k = 0;
	for (int i = 0; i < n; i++) {
		const char *want = cases[gs[i].op].cuda_refused;
		if (!want) {
			gs[k++] = gs[i];
			continue;
		}
		char *text = module_text(&gs[i], 1);
		Outcome oc = run_child(text, r);
		free(text);
		free(oc.report);
		ncheck++;
		if (oc.ok || !strstr(oc.why, want))
			fail_case(&gs[i], r, tr, "CUDA: expected the refusal '%s', got %s", want,
			          oc.ok ? "a compiled artifact (support landed? drop cuda_refused)" : oc.why);
		Run cpu = *r;
		cpu.cuda = 0;
		check_batch(&gs[i], 1, &cpu, kind, tr, verbose);
	}
	return k;
}

int
main(void)
{
	const char *e;
	zero_mode = (e = getenv("FADC_BACKEND_OPS_ZERO")) && atoi(e);
	if ((e = getenv("FADC_BACKEND_OPS_SEED")))
		base_seed = strtoull(e, NULL, 0);
	int trials = (e = getenv("FADC_BACKEND_OPS_TRIALS")) ? atoi(e) : zero_mode ? ZERO_TRIALS : TRIALS;
	const char *only = getenv("FADC_BACKEND_OPS_CASE");
	uint64_t replay = (e = getenv("FADC_BACKEND_OPS_REPLAY")) ? strtoull(e, NULL, 0) : 0;
	int verbose = (e = getenv("FADC_BACKEND_OPS_VERBOSE")) && atoi(e);
	int cuda = 0;
#ifdef FADC_HAVE_CUDA
	cuda = !((e = getenv("FADC_BACKEND_OPS_CUDA")) && !atoi(e));
#endif
	if (replay)
		trials = 1;
	printf("test_backend_ops: %s mode, base seed %" PRIu64 ", %d trials%s\n",
	       zero_mode ? "zero-size" : "normal", base_seed, trials,
	       cuda ? ", CUDA compile-checked on trial 0" : ", no CUDA");

	// Coverage: every row of the table has a case (a hole is a row kind
	// this file does not define).
	int ncase = 0;
	for (int op = 1; op < OP_COUNT; op++) {
		ncheck++;
		if (!cases[op].gen) {
			nfail++;
			fprintf(stderr, "FAIL coverage: op '%s' has no case in test_backend_ops.c\n",
			        ir_op(op)->name);
		} else if (!only || !strcmp(only, ir_op(op)->name)) {
			ncase++;
		}
	}
	if (only && !ncase) {
		fprintf(stderr, "FADC_BACKEND_OPS_CASE=%s names no op\n", only);
		return 1;
	}

	// Kinds of run: 0 f32, 1 f64 compute, 2 f64 model.
	const Run runs[3] = {{"f32", 0, 0, 0}, {"f64 compute", 1, 0, TOL_F64C}, {"f64 model", 0, 0, TOL_F64}};
	Gen *gs = calloc(OP_COUNT, sizeof *gs);
	for (int tr = 0; tr < trials; tr++) {
		for (int kind = 0; kind < 3; kind++) {
			// The f64 model on the first trial only (zero mode: never; the
			// f32 model computing in f64 shows what zero sizes break).
			if (kind == 2 && (tr > 0 || zero_mode))
				continue;
			fdt = kind == 2 ? "f64" : "f32";
			int n = 0;
			for (int op = 1; op < OP_COUNT; op++) {
				if (!cases[op].gen || (only && strcmp(only, ir_op(op)->name)))
					continue;
				char why[8192];
				ncheck++;
				if (!generate(op, tr, replay, &gs[n], why, sizeof why)) {
					nfail++;
					failed_op[op] = 1;
					snprintf(fail_why[op], sizeof fail_why[op], "generator: %.120s", why);
					fprintf(stderr, "FAIL %s (trial %d): %s\n", ir_op(op)->name, tr, why);
					continue;
				}
				n++;
			}
			Run r = runs[kind];
			r.cuda = cuda && tr == 0 && kind == 0;
			if (r.cuda) // the cases CUDA refuses first, without CUDA
				n = check_refused(gs, n, &r, kind, tr, verbose);
			check_batch(gs, n, &r, kind, tr, verbose);
		}
	}
	free(gs);

	printf("%-24s %10s %10s %10s\n", "op", "f32", "f64 comp", "f64 model");
	for (int op = 1; op < OP_COUNT; op++)
		if (cases[op].gen && (!only || !strcmp(only, ir_op(op)->name)))
			printf("%-24s %10.3g %10.3g %10.3g%s\n", ir_op(op)->name, worst[op][0], worst[op][1],
			       worst[op][2], failed_op[op] ? "  FAIL" : "");
	if (zero_mode) {
		int nf = 0;
		for (int op = 1; op < OP_COUNT; op++)
			nf += failed_op[op];
		if (nf) {
			fprintf(stderr, "test_backend_ops (zero-size): %d ops fail with zero-size inputs:\n", nf);
			for (int op = 1; op < OP_COUNT; op++)
				if (failed_op[op])
					fprintf(stderr, "  %-24s %s\n", ir_op(op)->name, fail_why[op]);
		}
	}
	if (nfail) {
		fprintf(stderr, "test_backend_ops: %d of %d checks failed\n", nfail, ncheck);
		return 1;
	}
	printf("test_backend_ops: %d checks passed\n", ncheck);
	return 0;
}
