// ir/interp.c -- the reference interpreter: the oracle of every test.
//
// It runs any valid graph, one node at a time in id order (a topological
// order), on dense row-major float64 arrays whatever the dtype: i64 values
// are exact integers below 2^53 in magnitude (a constant or a result
// beyond is refused with its position: check_i64, num_attr; an int64
// storage path would double every rule for values no model computes), bool
// values are 0 and 1, f32 values are
// computed in double; they are rounded to float only where a value is made
// with a dtype (`cast`, the factories full, iota and kaiming_*) and in the
// f32 declarations of ir_module_init.  It is written for obvious
// correctness, not speed: every non-elementwise op is a plain loop over
// the output (or the input) that computes flat indices from multi-indices.
//
// Dispatch, both halves built from ops.def so that a missing rule fails
// the build:
//   - UNARY, UNARYA, BINARY, CMP rows: the scalar DSL is defined as C
//     double arithmetic and each row's formula f becomes ew_<name>(); the
//     derivative columns are ignored here.
//   - OTHER rows: interp_<name>() written by hand, found through the
//     designated-initializer table interp_fn[] at the end of the file.
//
// A node's value is allocated (zeroed) with the node's dtype and shape
// before its rule runs, so rules only fill data; a scan's value is a tuple
// (Val.tup) that `get` projects.  Shapes were checked by the shape rules
// when the graph was built, so rules trust them; run-time values (indices,
// the inputs' shapes) are checked, and an error returns 0 with a message.
// A value is freed right after its last user, so memory stays near the
// graph's live set; everything is freed on every path.
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ir.h"

// ---------------------------------------------------------------- tensors

void
ir_tensor_free(Tensor *t)
{
	if (!t)
		return;
	free(t->data);
	t->data = NULL;
}

// numel as a size_t, or 0 in *ok when a dimension is negative or the byte
// size of a double array would overflow.
static size_t
checked_numel(const Shape *s, int *ok)
{
	size_t n = 1;
	*ok = 0;
	if (s->rank < 0 || s->rank > IR_MAXDIM)
		return 0;
	for (int i = 0; i < s->rank; i++) {
		if (s->dim[i] < 0)
			return 0;
		if (s->dim[i] == 0)
			n = 0;
	}
	if (n == 0) {
		*ok = 1;
		return 0;
	}
	for (int i = 0; i < s->rank; i++) {
		uint64_t d = (uint64_t)s->dim[i];
		if (d > (SIZE_MAX / sizeof(double)) / n)
			return 0;
		n *= (size_t)d;
	}
	*ok = 1;
	return n;
}

// The most elements a tensor may have: its doubles must fit in the
// machine's physical memory.  A larger calloc may succeed under memory
// overcommit and the rule would then write to it for minutes before the
// system kills the process; refused here, it is a message at once.
static size_t
max_elems(void)
{
	long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
	if (pages <= 0 || size <= 0)
		return SIZE_MAX;
	return (size_t)pages / sizeof(double) * (size_t)size;
}

int
ir_tensor_alloc(Tensor *t, DType dt, const Shape *s)
{
	int ok;
	memset(t, 0, sizeof *t);
	t->dtype = dt;
	size_t n = checked_numel(s, &ok);
	if (!ok || n > max_elems())
		return 0;
	t->shape = *s;
	if (n == 0)
		return 1;
	t->data = calloc(n, sizeof(double));
	return t->data != NULL;
}

// The numel of a tensor already allocated (so it cannot overflow).
static size_t
numel(const Tensor *t)
{
	size_t n = 1;
	for (int i = 0; i < t->shape.rank; i++)
		n *= (size_t)t->shape.dim[i];
	return n;
}

// Row-major strides, in elements (0 past the rank).
static void
strides(const Shape *s, size_t st[IR_MAXDIM])
{
	size_t k = 1;
	memset(st, 0, sizeof(size_t) * IR_MAXDIM);
	for (int i = s->rank - 1; i >= 0; i--) {
		st[i] = k;
		k *= (size_t)s->dim[i];
	}
}

// The flat index i of shape s (strides sst) mapped to sum(coord[d] * dst[d]):
// the one tool behind permute, broadcast, slice, pad, concat and the
// reductions, which differ only in the strides they pass as dst.
static size_t
remap(size_t i, const Shape *s, const size_t *sst, const size_t *dst)
{
	size_t r = 0;
	for (int d = 0; d < s->rank; d++)
		r += (i / sst[d]) % (size_t)s->dim[d] * dst[d];
	return r;
}

// p + off, where an empty tensor's NULL data stays NULL (C leaves even
// NULL + 0 undefined, and such a pointer is never dereferenced).
static double *
at(double *p, size_t off)
{
	return p ? p + off : p;
}

static void
copy_data(Tensor *dst, const Tensor *src)
{
	size_t n = numel(src);
	if (n)
		memcpy(dst->data, src->data, n * sizeof(double));
}

// ---------------------------------------------------------------- values

typedef struct Val {
	Tensor t; // the value, unless the node is a tuple
	Tensor *tup; // a tuple's components (scan results), malloc'ed
	int ntup;
} Val;

static void
val_free(Val *v)
{
	ir_tensor_free(&v->t);
	for (int i = 0; i < v->ntup; i++)
		ir_tensor_free(&v->tup[i]);
	free(v->tup);
	v->tup = NULL;
	v->ntup = 0;
}

typedef struct Interp {
	const Graph *g;
	Val *val; // val[g->nnode]
	const Tensor *inputs;
	uint64_t runseed;
	char *err;
	size_t errlen;
	NodeId cur; // the node being run (its position ends a bad index's message)
} Interp;

static int fail(Interp *it, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int
fail(Interp *it, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	ir_verrf(it->err, it->errlen, fmt, ap);
	va_end(ap);
	return 0;
}

// Operand i of node self, and an attribute by name (its slot comes from
// the op's spec in ops.def, so rules do not hard-code slot numbers).
static const Tensor *
arg(const Interp *it, NodeId self, int i)
{
	return &it->val[ir_in1(it->g, self, i)].t;
}

static const AttrVal *
attr_named(const Interp *it, NodeId self, const Attrs *a, const char *name)
{
	int k = ir_attr_index(it->g->node[self].op, name);
	FADC_ASSERT(k >= 0, name);
	return &a->a[k];
}

// i64 values are exact in a double while |v| < 2^53: a result that
// reaches 2^53 may be a rounded one (2^53 - 1 + 2 rounds to 2^53), so it
// is refused (check_i64), as a constant beyond it is (num_attr).
#define I64_EXACT 9007199254740992LL // 2^53

// fail() with the position of node self last, as the compiled index
// checks say it ("(model.ir:3:7)", and the model's call site of a node
// inlined from the prelude), when it has one.
static int fail_at(Interp *it, NodeId self, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int
fail_at(Interp *it, NodeId self, const char *fmt, ...)
{
	char where[600], msg[400];
	ir_loc_str(it->g->src, it->g->node[self].loc, 1, where, sizeof where);
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	if (where[0])
		return fail(it, "%s (%s)", msg, where);
	return fail(it, "%s", msg);
}

static void fmt_index(char *buf, size_t n, double v);

// An i64 result that a double may have rounded: refused, never written.
static int
check_i64(Interp *it, NodeId self, const Tensor *t)
{
	size_t n = numel(t);
	for (size_t i = 0; i < n; i++)
		// NaN and infinities are let through: they are what the
		// interpreter makes of an undefined conversion (cast of NaN to
		// i64), no rounded integer.
		if (fabs(t->data[i]) >= (double)I64_EXACT && isfinite(t->data[i])) {
			char v[64];
			fmt_index(v, sizeof v, t->data[i]);
			return fail_at(it, self, "%s: an i64 result (%s) reaches 2^53, beyond which the "
			               "float64 interpreter does not hold integers exactly",
			               ir_op(it->g->node[self].op)->name, v);
		}
	return 1;
}

#define IN(i) arg(it, self, (i))
#define AT(name) attr_named(it, self, a, (name))

// Formats an index for a message: integers as integers, anything else
// (NaN, a fraction that an i64 tensor cannot hold) as %g.
static void
fmt_index(char *buf, size_t n, double v)
{
	if (v == trunc(v) && fabs(v) < 9e18)
		snprintf(buf, n, "%lld", (long long)v);
	else
		snprintf(buf, n, "%g", v);
}

// Checks a run-time index into an axis of `size` elements.
static int
check_index(Interp *it, const char *op, double v, int axis, int64_t size, size_t *k)
{
	if (v >= 0 && v < (double)size && v == trunc(v)) {
		*k = (size_t)v;
		return 1;
	}
	char b[64];
	fmt_index(b, sizeof b, v);
	return fail_at(it, it->cur, "%s: index %s out of range for axis %d of size %lld", op, b, axis,
	               (long long)size);
}

// ---------------------------------------------------------------- special functions

static double
sigmoid(double x)
{
	// Stable on both sides: exp is only ever taken of a non-positive number.
	if (x >= 0)
		return 1 / (1 + exp(-x));
	double e = exp(x);
	return e / (1 + e);
}

static double
softplus(double x)
{
	// log(1 + e^x) = max(x, 0) + log1p(e^-|x|): no overflow, no cancellation.
	// Exact everywhere (PyTorch's F.softplus returns x itself above its
	// threshold 20, a relative difference below 1e-10).
	return log1p(exp(-fabs(x))) + (x > 0 ? x : 0);
}

static double
relu(double x)
{
	return isnan(x) ? x : x > 0 ? x : 0; // NaN propagates, as torch.relu
}

static double
sign(double x)
{
	return (x > 0) - (x < 0); // sign(0) = 0 (and NaN gives 0)
}

static double
xlogy(double x, double y)
{
	// torch.xlogy: 0 where x == 0 unless y is NaN.
	if (isnan(y))
		return NAN;
	return x == 0 ? 0 : x * log(y);
}

static double
maximum(double x, double y)
{
	if (isnan(x) || isnan(y))
		return NAN; // torch.maximum propagates NaN
	return x > y ? x : y;
}

static double
minimum(double x, double y)
{
	if (isnan(x) || isnan(y))
		return NAN;
	return x < y ? x : y;
}

static double
clamp(double x, double lo, double hi)
{
	// min(max(x, lo), hi): a NaN x stays NaN; lo > hi gives hi (PyTorch).
	double t = x < lo ? lo : x;
	return t > hi ? hi : t;
}

// ---------------------------------------------------------------- elementwise rows

// The scalar DSL of ops.def as C double arithmetic.  x and y are the
// operands, A[] the row's attributes as doubles (ints converted).
#define X x
#define Y y
#define A(i) A[i]
#define ONE 1.0
#define ZERO 0.0
#define K(c) (c)
#define ADD(a, b) ((a) + (b))
#define SUB(a, b) ((a) - (b))
#define MUL(a, b) ((a) * (b))
#define DIV(a, b) ((a) / (b))
#define NEG(a) (-(a))
#define POW(a, b) pow(a, b)
#define EXP(a) exp(a)
#define LOG(a) log(a)
#define LOG1P(a) log1p(a)
#define EXPM1(a) expm1(a)
#define SQRT(a) sqrt(a)
#define RSQRT(a) (1 / sqrt(a))
#define TANH(a) tanh(a)
#define SIGMOID(a) sigmoid(a)
#define ERF(a) erf(a)
#define SOFTPLUS(a) softplus(a)
#define SIN(a) sin(a)
#define COS(a) cos(a)
#define RELU(a) relu(a)
#define STEP(a) ((a) > 0 ? 1.0 : 0.0)
#define ABS(a) fabs(a)
#define SIGN(a) sign(a)
#define FLOOR(a) floor(a)
#define LGAMMA(a) lgamma(a)
#define DIGAMMA(a) ir_polygamma(0, a)
#define PG(n, a) ir_polygamma(n, a)
#define PGNEXT(a) ir_polygamma(A[0] + 1, a)
#define XLOGY(a, b) xlogy(a, b)
#define MAXIMUM(a, b) maximum(a, b)
#define MINIMUM(a, b) minimum(a, b)
#define CLAMP(a, lo, hi) clamp(a, lo, hi)
#define EQ(a, b) ((a) == (b) ? 1.0 : 0.0)
#define NE(a, b) ((a) != (b) ? 1.0 : 0.0)
#define LT(a, b) ((a) < (b) ? 1.0 : 0.0)
#define LE(a, b) ((a) <= (b) ? 1.0 : 0.0)
#define GT(a, b) ((a) > (b) ? 1.0 : 0.0)
#define GE(a, b) ((a) >= (b) ? 1.0 : 0.0)
#define AND(a, b) ((a) != 0 && (b) != 0 ? 1.0 : 0.0)
#define OR(a, b) ((a) != 0 || (b) != 0 ? 1.0 : 0.0)

typedef double (*EwFn)(double x, double y, const double *A);

// clang-format off
#define UNARY(n, fl, cost, f, d0) \
	static double ew_##n(double x, double y, const double *A) { (void)y; (void)A; return f; }
#define UNARYA(n, fl, cost, at, f, d0) \
	static double ew_##n(double x, double y, const double *A) { (void)y; (void)A; return f; }
#define BINARY(n, fl, cost, f, d0, d1) \
	static double ew_##n(double x, double y, const double *A) { (void)A; return f; }
#define CMP(n, fl, cost, f) \
	static double ew_##n(double x, double y, const double *A) { (void)A; return f; }
#include "ops.def" // UNARY UNARYA BINARY CMP: one ew_<name> per row

static const EwFn ew_fn[OP_COUNT] = {
#define UNARY(n, ...) [OP_##n] = ew_##n,
#define UNARYA(n, ...) [OP_##n] = ew_##n,
#define BINARY(n, ...) [OP_##n] = ew_##n,
#define CMP(n, ...) [OP_##n] = ew_##n,
#include "ops.def" // UNARY UNARYA BINARY CMP: the table
};
// clang-format on

#include "ops_dsl_end.h" // the DSL's macros, undefined

static int
run_elemwise(Interp *it, NodeId self, const Attrs *a, Val *out)
{
	int op = it->g->node[self].op;
	const OpInfo *oi = ir_op(op);
	double A[IR_MAXATTR] = {0};
	for (int i = 0; i < oi->nattr; i++)
		A[i] = oi->attr[i].kind == AK_FLOAT ? a->a[i].f : (double)a->a[i].i;
	const Tensor *x = IN(0), *y = it->g->node[self].nin > 1 ? IN(1) : NULL;
	EwFn f = ew_fn[op];
	size_t n = numel(&out->t);
	for (size_t i = 0; i < n; i++)
		out->t.data[i] = f(x->data[i], y ? y->data[i] : 0, A);
	return 1;
}

// ---------------------------------------------------------------- OTHER rows
// interp_<name>(it, self, a, out): out->t is allocated and zeroed with the
// node's dtype and shape (except for tuples); the rule fills it.

#define RULE(name) static int interp_##name(Interp *it, NodeId self, const Attrs *a, Val *out)

RULE(input)
{
	const Tensor *src = &it->inputs[AT("index")->i];
	copy_data(&out->t, src);
	return 1;
}

// The value of a number attribute in the result's dtype: an i64 one is
// its exact integer (ir.h, AttrVal), which must be one a double holds.
static int
num_attr(Interp *it, NodeId self, const AttrVal *x, DType dt, double *v)
{
	if (dt != DT_I64) {
		*v = ir_dtype_round(dt, x->f);
		return 1;
	}
	if (x->i <= -I64_EXACT || x->i >= I64_EXACT)
		return fail_at(it, self, "%s: the i64 constant %lld is beyond 2^53, which the float64 "
		               "interpreter does not hold exactly", ir_op(it->g->node[self].op)->name,
		               (long long)x->i);
	*v = (double)x->i;
	return 1;
}

RULE(full)
{
	double v;
	if (!num_attr(it, self, AT("value"), out->t.dtype, &v))
		return 0;
	size_t n = numel(&out->t);
	for (size_t i = 0; i < n; i++)
		out->t.data[i] = v;
	return 1;
}

RULE(iota)
{
	int ax = (int)AT("axis")->i;
	size_t st[IR_MAXDIM], n = numel(&out->t);
	strides(&out->t.shape, st);
	size_t len = (size_t)out->t.shape.dim[ax];
	for (size_t i = 0; i < n; i++)
		out->t.data[i] = ir_dtype_round(out->t.dtype, (double)(i / st[ax] % len));
	return 1;
}

RULE(cast)
{
	(void)a;
	const Tensor *x = IN(0);
	size_t n = numel(x);
	for (size_t i = 0; i < n; i++)
		out->t.data[i] = ir_dtype_round(out->t.dtype, x->data[i]);
	return 1;
}

RULE(not)
{
	(void)a;
	const Tensor *x = IN(0);
	size_t n = numel(x);
	for (size_t i = 0; i < n; i++)
		out->t.data[i] = x->data[i] == 0;
	return 1;
}

RULE(where)
{
	(void)a;
	const Tensor *c = IN(0), *x = IN(1), *y = IN(2);
	size_t n = numel(c);
	for (size_t i = 0; i < n; i++)
		out->t.data[i] = c->data[i] != 0 ? x->data[i] : y->data[i];
	return 1;
}

// Samplers: element i of the result draws with (seed, runseed, i); the
// parameters are elementwise (equal shapes, checked by the shape rule).
static uint64_t
seed_of(const Interp *it, NodeId self, const Attrs *a)
{
	return (uint64_t)AT("seed")->i;
}

RULE(uniform)
{
	const Tensor *lo = IN(0), *hi = IN(1);
	uint64_t seed = seed_of(it, self, a);
	size_t n = numel(&out->t);
	for (size_t i = 0; i < n; i++) {
		double u = ir_rand_uniform(seed, it->runseed, i);
		out->t.data[i] = lo->data[i] + (hi->data[i] - lo->data[i]) * u;
	}
	return 1;
}

RULE(normal)
{
	const Tensor *mean = IN(0), *std = IN(1);
	uint64_t seed = seed_of(it, self, a);
	size_t n = numel(&out->t);
	for (size_t i = 0; i < n; i++) {
		double z = ir_rand_normal(seed, it->runseed, i);
		out->t.data[i] = mean->data[i] + std->data[i] * z;
	}
	return 1;
}

RULE(gamma)
{
	const Tensor *conc = IN(0), *rate = IN(1);
	uint64_t seed = seed_of(it, self, a);
	size_t n = numel(&out->t);
	for (size_t i = 0; i < n; i++)
		out->t.data[i] = ir_rand_gamma(seed, it->runseed, i, conc->data[i]) / rate->data[i];
	return 1;
}

RULE(exponential)
{
	// Inversion: -log(1 - U) / rate, with U in [0, 1) so the log is finite.
	const Tensor *rate = IN(0);
	uint64_t seed = seed_of(it, self, a);
	size_t n = numel(&out->t);
	for (size_t i = 0; i < n; i++)
		out->t.data[i] = -log1p(-ir_rand_uniform(seed, it->runseed, i)) / rate->data[i];
	return 1;
}

RULE(bernoulli)
{
	const Tensor *p = IN(0);
	uint64_t seed = seed_of(it, self, a);
	size_t n = numel(&out->t);
	for (size_t i = 0; i < n; i++)
		out->t.data[i] = ir_rand_uniform(seed, it->runseed, i) < p->data[i];
	return 1;
}

// torch.nn.init.kaiming_*: for a weight of shape (out, in, k...), the
// receptive field is prod(k...), fan_in = in * rf and fan_out = out * rf;
// gain = sqrt(2 / (1 + a^2)) (leaky_relu), std = gain / sqrt(fan) and the
// uniform bound is sqrt(3) std.  (A zero fan implies an empty tensor.)
static double
kaiming_scale(const Interp *it, NodeId self, const Attrs *a)
{
	const Shape *s = &it->val[self].t.shape;
	double rf = 1;
	for (int i = 2; i < s->rank; i++)
		rf *= (double)s->dim[i];
	double fan = (double)(AT("mode")->i == 0 ? s->dim[1] : s->dim[0]) * rf;
	double neg = AT("a")->f;
	return sqrt(2 / (1 + neg * neg)) / sqrt(fan);
}

RULE(kaiming_normal)
{
	double std = kaiming_scale(it, self, a);
	uint64_t seed = seed_of(it, self, a);
	size_t n = numel(&out->t);
	for (size_t i = 0; i < n; i++)
		out->t.data[i] =
		    ir_dtype_round(out->t.dtype, std * ir_rand_normal(seed, it->runseed, i));
	return 1;
}

RULE(kaiming_uniform)
{
	double bound = sqrt(3.0) * kaiming_scale(it, self, a);
	uint64_t seed = seed_of(it, self, a);
	size_t n = numel(&out->t);
	for (size_t i = 0; i < n; i++)
		out->t.data[i] = ir_dtype_round(
		    out->t.dtype, -bound + 2 * bound * ir_rand_uniform(seed, it->runseed, i));
	return 1;
}

// Reductions.  The output, keepdim or not, has x's shape with the reduced
// axes collapsed, in the same flat order; so element i of x lands on
// remap(i) with the output's strides, the reduced axes given stride 0.
enum { R_SUM, R_MEAN, R_MAX, R_MIN, R_LSE };

static int
reduce(Interp *it, NodeId self, const Attrs *a, Val *out, int kind)
{
	const Tensor *x = IN(0);
	const AttrVal *ax = AT("axes");
	Shape kept = x->shape;
	size_t count = 1;
	for (int k = 0; k < ax->n; k++) {
		count *= (size_t)x->shape.dim[ax->v[k]];
		kept.dim[ax->v[k]] = 1;
	}
	size_t xst[IR_MAXDIM], ost[IR_MAXDIM];
	strides(&x->shape, xst);
	strides(&kept, ost);
	for (int k = 0; k < ax->n; k++)
		ost[ax->v[k]] = 0;
	size_t n = numel(x), m = numel(&out->t);
	double *o = out->t.data;
	if (kind == R_MAX || kind == R_MIN || kind == R_LSE) {
		// Running extremum; NaN wins and stays (torch.max/min propagate NaN).
		// Max and min never reduce an empty axis (the shape rule refuses);
		// logsumexp starts from -inf, its empty-sum value.
		for (size_t j = 0; j < m; j++)
			o[j] = kind == R_MIN ? INFINITY : -INFINITY;
		for (size_t i = 0; i < n; i++) {
			size_t j = remap(i, &x->shape, xst, ost);
			double v = x->data[i];
			if (!isnan(o[j]) && (isnan(v) || (kind == R_MIN ? v < o[j] : v > o[j])))
				o[j] = v;
		}
		if (kind != R_LSE)
			return 1;
		// logsumexp = m + log(sum exp(x - m)) with m the maximum, so no term
		// overflows and the largest is exactly 1.  m = -inf (all -inf, or
		// empty) gives -inf, m = +inf gives +inf, NaN gives NaN.
		double *s = calloc(m ? m : 1, sizeof *s);
		if (!s)
			return fail(it, "logsumexp: out of memory");
		for (size_t i = 0; i < n; i++) {
			size_t j = remap(i, &x->shape, xst, ost);
			if (!isinf(o[j]))
				s[j] += exp(x->data[i] - o[j]);
		}
		for (size_t j = 0; j < m; j++)
			if (!isinf(o[j]))
				o[j] += log(s[j]);
		free(s);
		return 1;
	}
	for (size_t i = 0; i < n; i++)
		o[remap(i, &x->shape, xst, ost)] += x->data[i];
	if (kind == R_MEAN)
		for (size_t j = 0; j < m; j++)
			o[j] = count ? o[j] / (double)count : NAN; // empty mean: 0/0
	return 1;
}

RULE(sum) { return reduce(it, self, a, out, R_SUM); }
RULE(mean) { return reduce(it, self, a, out, R_MEAN); }
RULE(max) { return reduce(it, self, a, out, R_MAX); }
RULE(min) { return reduce(it, self, a, out, R_MIN); }
RULE(logsumexp) { return reduce(it, self, a, out, R_LSE); }

// The dims before and after an axis, as counts: x viewed as
// (outer, dim, inner).
static void
split_axis(const Shape *s, int ax, size_t *outer, size_t *inner)
{
	*outer = *inner = 1;
	for (int d = 0; d < ax; d++)
		*outer *= (size_t)s->dim[d];
	for (int d = ax + 1; d < s->rank; d++)
		*inner *= (size_t)s->dim[d];
}

RULE(argmax)
{
	// The first maximum; NaN counts as the maximum (torch.argmax).
	const Tensor *x = IN(0);
	int ax = (int)AT("axis")->i;
	size_t outer, inner, dim = (size_t)x->shape.dim[ax];
	split_axis(&x->shape, ax, &outer, &inner);
	for (size_t o = 0; o < outer; o++)
		for (size_t i = 0; i < inner; i++) {
			const double *p = x->data + o * dim * inner + i;
			size_t best = 0;
			for (size_t k = 1; k < dim; k++) {
				double b = p[best * inner], e = p[k * inner];
				if (!isnan(b) && (isnan(e) || e > b))
					best = k;
			}
			out->t.data[o * inner + i] = (double)best;
		}
	return 1;
}

RULE(reshape)
{
	(void)a;
	copy_data(&out->t, IN(0));
	return 1;
}

RULE(resize)
{
	(void)a;
	// The first min(old, new) elements in flat order; the rest stay 0.
	const Tensor *x = IN(0);
	size_t n = numel(x), m = numel(&out->t);
	if (m < n)
		n = m;
	if (n)
		memcpy(out->t.data, x->data, n * sizeof(double));
	return 1;
}

RULE(permute)
{
	// Output axis k is input axis perm[k]: output coordinate k steps by
	// the input's stride of axis perm[k].
	const Tensor *x = IN(0);
	const AttrVal *p = AT("perm");
	size_t xst[IR_MAXDIM], ost[IR_MAXDIM], dst[IR_MAXDIM];
	strides(&x->shape, xst);
	strides(&out->t.shape, ost);
	for (int k = 0; k < p->n; k++)
		dst[k] = xst[p->v[k]];
	size_t n = numel(&out->t);
	for (size_t j = 0; j < n; j++)
		out->t.data[j] = x->data[remap(j, &out->t.shape, ost, dst)];
	return 1;
}

RULE(broadcast)
{
	(void)a;
	// NumPy rules, right-aligned: a size-1 (or missing) input axis has
	// stride 0, so every output coordinate along it reads the same element.
	const Tensor *x = IN(0);
	const Shape *os = &out->t.shape;
	int lead = os->rank - x->shape.rank;
	size_t xst[IR_MAXDIM], ost[IR_MAXDIM], dst[IR_MAXDIM];
	strides(&x->shape, xst);
	strides(os, ost);
	for (int k = 0; k < os->rank; k++)
		dst[k] = k >= lead && x->shape.dim[k - lead] != 1 ? xst[k - lead] : 0;
	size_t n = numel(&out->t);
	for (size_t j = 0; j < n; j++)
		out->t.data[j] = x->data[remap(j, os, ost, dst)];
	return 1;
}

// A slice start:end:step per axis: the element at slice coordinate j is
// x's element start + j * step, i.e. base + remap(j) with strides step * xst.
static size_t
slice_map(const Interp *it, NodeId self, const Attrs *a, const Shape *x, size_t dst[IR_MAXDIM])
{
	const AttrVal *st = AT("start"), *sp = AT("step");
	size_t xst[IR_MAXDIM], base = 0;
	strides(x, xst);
	for (int d = 0; d < x->rank; d++) {
		base += (size_t)st->v[d] * xst[d];
		dst[d] = (size_t)sp->v[d] * xst[d];
	}
	return base;
}

RULE(slice)
{
	const Tensor *x = IN(0);
	size_t dst[IR_MAXDIM], ost[IR_MAXDIM], base = slice_map(it, self, a, &x->shape, dst);
	strides(&out->t.shape, ost);
	size_t n = numel(&out->t);
	for (size_t j = 0; j < n; j++)
		out->t.data[j] = x->data[base + remap(j, &out->t.shape, ost, dst)];
	return 1;
}

RULE(slice_update)
{
	const Tensor *x = IN(0), *y = IN(1);
	copy_data(&out->t, x);
	size_t dst[IR_MAXDIM], yst[IR_MAXDIM], base = slice_map(it, self, a, &x->shape, dst);
	strides(&y->shape, yst);
	size_t n = numel(y);
	for (size_t j = 0; j < n; j++)
		out->t.data[base + remap(j, &y->shape, yst, dst)] = y->data[j];
	return 1;
}

RULE(pad)
{
	const Tensor *x = IN(0);
	const AttrVal *before = AT("before");
	double v;
	if (!num_attr(it, self, AT("value"), out->t.dtype, &v))
		return 0;
	size_t m = numel(&out->t), n = numel(x), xst[IR_MAXDIM], ost[IR_MAXDIM], base = 0;
	for (size_t j = 0; j < m; j++)
		out->t.data[j] = v;
	strides(&x->shape, xst);
	strides(&out->t.shape, ost);
	for (int d = 0; d < x->shape.rank; d++)
		base += (size_t)before->v[d] * ost[d];
	for (size_t i = 0; i < n; i++)
		out->t.data[base + remap(i, &x->shape, xst, ost)] = x->data[i];
	return 1;
}

RULE(concat)
{
	int ax = (int)AT("axis")->i, nin = it->g->node[self].nin;
	size_t ost[IR_MAXDIM], off = 0;
	strides(&out->t.shape, ost);
	for (int k = 0; k < nin; k++) {
		const Tensor *x = IN(k);
		size_t xst[IR_MAXDIM], n = numel(x);
		strides(&x->shape, xst);
		for (size_t i = 0; i < n; i++)
			out->t.data[off * ost[ax] + remap(i, &x->shape, xst, ost)] = x->data[i];
		off += (size_t)x->shape.dim[ax];
	}
	return 1;
}

// take(x, idx, axis) = numpy.take: x viewed as (outer, dim, inner), the
// result as (outer, nidx, inner), result[o, j, i] = x[o, idx[j], i].
// take_add is its transpose: x with src scatter-added (numpy.add.at, so
// repeated indices accumulate).
static int
take_common(Interp *it, NodeId self, const Attrs *a, Val *out, int add)
{
	const Tensor *x = IN(0), *idx = IN(1), *src = add ? IN(2) : NULL;
	int ax = (int)AT("axis")->i;
	size_t outer, inner, dim = (size_t)x->shape.dim[ax], nidx = numel(idx);
	split_axis(&x->shape, ax, &outer, &inner);
	const char *name = add ? "take_add" : "take";
	for (size_t j = 0; j < nidx; j++) {
		size_t k;
		if (!check_index(it, name, idx->data[j], ax, (int64_t)dim, &k))
			return 0;
	}
	if (add)
		copy_data(&out->t, x);
	for (size_t o = 0; o < outer; o++)
		for (size_t j = 0; j < nidx; j++) {
			size_t k = (size_t)idx->data[j];
			for (size_t i = 0; i < inner; i++) {
				size_t xi = (o * dim + k) * inner + i;
				size_t ri = (o * nidx + j) * inner + i;
				if (add)
					out->t.data[xi] += src->data[ri];
				else
					out->t.data[ri] = x->data[xi];
			}
		}
	return 1;
}

RULE(take) { return take_common(it, self, a, out, 0); }
RULE(take_add) { return take_common(it, self, a, out, 1); }

// take_along = torch.gather: result[j] = x[j with coordinate axis replaced
// by idx[j]] (idx may be smaller than x on the other axes, so it is
// addressed with x's strides).  take_along_add is the scatter-add.
static int
take_along_common(Interp *it, NodeId self, const Attrs *a, Val *out, int add)
{
	const Tensor *x = IN(0), *idx = IN(1), *src = add ? IN(2) : NULL;
	int ax = (int)AT("axis")->i;
	size_t xst[IR_MAXDIM], ist[IR_MAXDIM], dst[IR_MAXDIM], n = numel(idx);
	strides(&x->shape, xst);
	strides(&idx->shape, ist);
	memcpy(dst, xst, sizeof dst);
	dst[ax] = 0;
	const char *name = add ? "take_along_add" : "take_along";
	if (add)
		copy_data(&out->t, x);
	for (size_t j = 0; j < n; j++) {
		size_t k;
		if (!check_index(it, name, idx->data[j], ax, x->shape.dim[ax], &k))
			return 0;
		size_t xi = remap(j, &idx->shape, ist, dst) + k * xst[ax];
		if (add)
			out->t.data[xi] += src->data[j];
		else
			out->t.data[j] = x->data[xi];
	}
	return 1;
}

RULE(take_along) { return take_along_common(it, self, a, out, 0); }
RULE(take_along_add) { return take_along_common(it, self, a, out, 1); }

RULE(one_hot)
{
	const Tensor *idx = IN(0);
	int64_t classes = AT("n")->i;
	size_t n = numel(idx);
	for (size_t j = 0; j < n; j++) {
		double v = idx->data[j];
		if (!(v >= 0 && v < (double)classes && v == trunc(v))) {
			char b[64];
			fmt_index(b, sizeof b, v);
			return fail(it, "one_hot: index %s out of range for %lld classes", b,
			            (long long)classes);
		}
		out->t.data[j * (size_t)classes + (size_t)v] = 1;
	}
	return 1;
}

RULE(matmul)
{
	(void)a;
	// Batched over the leading axes: (B, M, K) x (B, K, N) -> (B, M, N).
	const Tensor *x = IN(0), *y = IN(1);
	int r = x->shape.rank;
	size_t M = (size_t)x->shape.dim[r - 2], K = (size_t)x->shape.dim[r - 1];
	size_t N = (size_t)y->shape.dim[r - 1], B = 1;
	for (int d = 0; d < r - 2; d++)
		B *= (size_t)x->shape.dim[d];
	for (size_t b = 0; b < B; b++)
		for (size_t i = 0; i < M; i++)
			for (size_t j = 0; j < N; j++) {
				const double *xr = at(x->data, (b * M + i) * K);
				const double *yc = at(y->data, b * K * N + j);
				double s = 0;
				for (size_t k = 0; k < K; k++)
					s += xr[k] * yc[k * N];
				out->t.data[(b * M + i) * N + j] = s;
			}
	return 1;
}

// Window ops see 1-d as 2-d with a height of 1: this is the geometry of
// one (height, width) plane pair, with defaults for a missing height.  All
// index arithmetic is int64_t over sizes of tensors already allocated, so
// it cannot overflow.
typedef struct Win {
	int64_t H, W, OH, OW; // input and output spatial sizes
	int64_t kh, kw, sh, sw, ph, pw, dh, dw; // kernel, stride, padding, dilation
} Win;

// k, s, p, d are the attribute values per spatial axis (d may be NULL: 1).
static Win
window(const Shape *x, const Shape *o, const int64_t *k, const int64_t *s, const int64_t *p,
       const int64_t *d)
{
	int ns = x->rank - 2, two = ns == 2;
	Win w;
	w.H = two ? x->dim[2] : 1;
	w.W = x->dim[x->rank - 1];
	w.OH = two ? o->dim[2] : 1;
	w.OW = o->dim[o->rank - 1];
	w.kh = two ? k[0] : 1;
	w.kw = k[ns - 1];
	w.sh = two ? s[0] : 1;
	w.sw = s[ns - 1];
	w.ph = two ? p[0] : 0;
	w.pw = p[ns - 1];
	w.dh = two && d ? d[0] : 1;
	w.dw = d ? d[ns - 1] : 1;
	return w;
}

// The number of (n, c) planes of an NC... tensor.
static int64_t
planes(const Tensor *x)
{
	return x->shape.dim[0] * x->shape.dim[1];
}

// One output element of a convolution: the window of output (oh, ow) over
// the Cg input planes x (each H x W) against the kernels w (Cg of kh x kw),
// zero outside x.
static double
conv_window(const double *x, const double *w, const Win *v, int64_t Cg, int64_t oh, int64_t ow)
{
	double s = 0;
	for (int64_t ci = 0; ci < Cg; ci++)
		for (int64_t kh = 0; kh < v->kh; kh++) {
			int64_t ih = oh * v->sh - v->ph + kh * v->dh;
			if (ih < 0 || ih >= v->H)
				continue;
			for (int64_t kw = 0; kw < v->kw; kw++) {
				int64_t iw = ow * v->sw - v->pw + kw * v->dw;
				if (iw >= 0 && iw < v->W)
					s += x[(ci * v->H + ih) * v->W + iw] *
					     w[(ci * v->kh + kh) * v->kw + kw];
			}
		}
	return s;
}

RULE(conv)
{
	// PyTorch's conv1d/conv2d (a cross-correlation):
	//   out[n, co, oh, ow] = sum over ci, kh, kw of
	//     x[n, g Cg + ci, oh sh - ph + kh dh, ow sw - pw + kw dw] w[co, ci, kh, kw]
	// with g = co / (Cout / groups) the output channel's group, Cg the input
	// channels per group, and zero outside x (zero padding).
	const Tensor *x = IN(0), *w = IN(1);
	Win v = window(&x->shape, &out->t.shape, w->shape.dim + 2, AT("stride")->v,
	               AT("padding")->v, AT("dilation")->v);
	int64_t N = x->shape.dim[0], C = x->shape.dim[1], Co = w->shape.dim[0];
	int64_t groups = AT("groups")->i, Cg = C / groups, Cog = Co / groups;
	for (int64_t n = 0; n < N; n++)
		for (int64_t co = 0; co < Co; co++) {
			int64_t c0 = co / Cog * Cg; // the group's first input channel
			const double *xg = at(x->data, (size_t)((n * C + c0) * v.H * v.W));
			const double *wc = at(w->data, (size_t)(co * Cg * v.kh * v.kw));
			double *o = at(out->t.data, (size_t)((n * Co + co) * v.OH * v.OW));
			for (int64_t oh = 0; oh < v.OH; oh++)
				for (int64_t ow = 0; ow < v.OW; ow++)
					o[oh * v.OW + ow] = conv_window(xg, wc, &v, Cg, oh, ow);
		}
	return 1;
}

// Max over the window of output (oh, ow) in one H x W plane.  Padding is
// -inf (never chosen); the first maximum wins, and NaN wins over
// everything and stays (PyTorch's max_pool).
static double
max_window(const double *p, const Win *v, int64_t oh, int64_t ow)
{
	double m = -INFINITY;
	for (int64_t kh = 0; kh < v->kh; kh++) {
		int64_t ih = oh * v->sh - v->ph + kh * v->dh;
		if (ih < 0 || ih >= v->H)
			continue;
		for (int64_t kw = 0; kw < v->kw; kw++) {
			int64_t iw = ow * v->sw - v->pw + kw * v->dw;
			if (iw < 0 || iw >= v->W)
				continue;
			double e = p[ih * v->W + iw];
			if (!isnan(m) && (isnan(e) || e > m))
				m = e;
		}
	}
	return m;
}

// The mean over the window of output (oh, ow): the sum of the in-bounds
// elements over a divisor, with count_include_pad the whole window kh kw
// (PyTorch counts the padded positions, and with ceil_mode off a window
// never reaches past the padding), otherwise the in-bounds count.
static double
avg_window(const double *p, const Win *v, int64_t oh, int64_t ow, int incl)
{
	double s = 0;
	int64_t cnt = 0;
	for (int64_t kh = 0; kh < v->kh; kh++) {
		int64_t ih = oh * v->sh - v->ph + kh;
		if (ih < 0 || ih >= v->H)
			continue;
		for (int64_t kw = 0; kw < v->kw; kw++) {
			int64_t iw = ow * v->sw - v->pw + kw;
			if (iw < 0 || iw >= v->W)
				continue;
			s += p[ih * v->W + iw];
			cnt++;
		}
	}
	return s / (double)(incl ? v->kh * v->kw : cnt);
}

RULE(max_pool)
{
	const Tensor *x = IN(0);
	Win v = window(&x->shape, &out->t.shape, AT("kernel")->v, AT("stride")->v,
	               AT("padding")->v, AT("dilation")->v);
	for (int64_t pl = 0; pl < planes(x); pl++) {
		const double *p = at(x->data, (size_t)(pl * v.H * v.W));
		double *o = at(out->t.data, (size_t)(pl * v.OH * v.OW));
		for (int64_t oh = 0; oh < v.OH; oh++)
			for (int64_t ow = 0; ow < v.OW; ow++)
				o[oh * v.OW + ow] = max_window(p, &v, oh, ow);
	}
	return 1;
}

RULE(avg_pool)
{
	const Tensor *x = IN(0);
	Win v = window(&x->shape, &out->t.shape, AT("kernel")->v, AT("stride")->v,
	               AT("padding")->v, NULL);
	int incl = AT("count_include_pad")->i != 0;
	for (int64_t pl = 0; pl < planes(x); pl++) {
		const double *p = at(x->data, (size_t)(pl * v.H * v.W));
		double *o = at(out->t.data, (size_t)(pl * v.OH * v.OW));
		for (int64_t oh = 0; oh < v.OH; oh++)
			for (int64_t ow = 0; ow < v.OW; ow++)
				o[oh * v.OW + ow] = avg_window(p, &v, oh, ow, incl);
	}
	return 1;
}

RULE(adaptive_avg_pool)
{
	// PyTorch: output i averages input [floor(i L / O), ceil((i + 1) L / O)).
	(void)a;
	const Tensor *x = IN(0);
	int two = x->shape.rank == 4;
	int64_t H = two ? x->shape.dim[2] : 1, W = x->shape.dim[x->shape.rank - 1];
	int64_t OH = two ? out->t.shape.dim[2] : 1, OW = out->t.shape.dim[out->t.shape.rank - 1];
	for (int64_t pl = 0; pl < planes(x); pl++) {
		const double *p = at(x->data, (size_t)(pl * H * W));
		double *o = at(out->t.data, (size_t)(pl * OH * OW));
		for (int64_t oh = 0; oh < OH; oh++) {
			int64_t h0 = oh * H / OH, h1 = ((oh + 1) * H + OH - 1) / OH;
			for (int64_t ow = 0; ow < OW; ow++) {
				int64_t w0 = ow * W / OW, w1 = ((ow + 1) * W + OW - 1) / OW;
				double s = 0;
				for (int64_t ih = h0; ih < h1; ih++)
					for (int64_t iw = w0; iw < w1; iw++)
						s += p[ih * W + iw];
				o[oh * OW + ow] = s / (double)((h1 - h0) * (w1 - w0));
			}
		}
	}
	return 1;
}

// PyTorch's upsample_bilinear2d source coordinate along one axis (output
// size given, no scale factor): align_corners maps the corner pixels onto
// each other, src = dst (in - 1) / (out - 1) (0 when out = 1); otherwise
// pixel centres, src = (dst + 0.5) in / out - 0.5, clamped at 0.  The
// neighbours are i0 = floor(src) and i0 + 1 (i0 itself at the last pixel),
// weighted 1 - l and l with l = src - i0.
void
ir_bilinear_src(int64_t dst, int64_t in, int64_t outn, int align, int64_t *i0, int64_t *i1,
                double *l)
{
	double src;
	if (align)
		src = outn > 1 ? (double)dst * (double)(in - 1) / (double)(outn - 1) : 0;
	else {
		src = ((double)dst + 0.5) * ((double)in / (double)outn) - 0.5;
		if (src < 0)
			src = 0;
	}
	*i0 = (int64_t)src;
	if (*i0 > in - 1)
		*i0 = in - 1;
	*i1 = *i0 < in - 1 ? *i0 + 1 : *i0;
	*l = src - (double)*i0;
}

RULE(upsample_bilinear)
{
	const Tensor *x = IN(0);
	int align = AT("align_corners")->i != 0;
	int64_t H = x->shape.dim[2], W = x->shape.dim[3];
	int64_t OH = out->t.shape.dim[2], OW = out->t.shape.dim[3];
	for (int64_t pl = 0; pl < planes(x); pl++) {
		const double *p = at(x->data, (size_t)(pl * H * W));
		double *o = at(out->t.data, (size_t)(pl * OH * OW));
		for (int64_t oh = 0; oh < OH; oh++) {
			int64_t h0, h1, w0, w1;
			double lh, lw;
			ir_bilinear_src(oh, H, OH, align, &h0, &h1, &lh);
			for (int64_t ow = 0; ow < OW; ow++) {
				ir_bilinear_src(ow, W, OW, align, &w0, &w1, &lw);
				double top = (1 - lw) * p[h0 * W + w0] + lw * p[h0 * W + w1];
				double bot = (1 - lw) * p[h1 * W + w0] + lw * p[h1 * W + w1];
				o[oh * OW + ow] = (1 - lh) * top + lh * bot;
			}
		}
	}
	return 1;
}

// ---------------------------------------------------------------- window adjoints
// The derivative ops of the window ops.  Each loops over the forward op's
// windows exactly as the forward rule does and sends every term back to
// where it came from, so that <op(x), g> = <x, op_grad(g)> holds term by
// term.

RULE(conv_input_grad)
{
	// conv's adjoint in x (the transposed convolution): each term
	//   x[n, c0 + ci, ih, iw] w[co, ci, kh, kw],  ih = oh sh - ph + kh dh, iw = ow sw - pw + kw dw,
	// of conv's output (n, co, oh, ow) sends g[n, co, oh, ow] w[co, ci, kh, kw]
	// back to x[n, c0 + ci, ih, iw]; positions in the padding receive nothing.
	const Tensor *gy = IN(0), *w = IN(1);
	Win v = window(&out->t.shape, &gy->shape, w->shape.dim + 2, AT("stride")->v,
	               AT("padding")->v, AT("dilation")->v);
	int64_t N = gy->shape.dim[0], Co = gy->shape.dim[1], C = out->t.shape.dim[1];
	int64_t groups = AT("groups")->i, Cg = C / groups, Cog = Co / groups;
	for (int64_t n = 0; n < N; n++)
		for (int64_t co = 0; co < Co; co++) {
			int64_t c0 = co / Cog * Cg; // the group's first input channel
			double *xg = at(out->t.data, (size_t)((n * C + c0) * v.H * v.W));
			const double *wc = at(w->data, (size_t)(co * Cg * v.kh * v.kw));
			const double *gp = at(gy->data, (size_t)((n * Co + co) * v.OH * v.OW));
			for (int64_t oh = 0; oh < v.OH; oh++)
				for (int64_t ow = 0; ow < v.OW; ow++)
					for (int64_t ci = 0; ci < Cg; ci++)
						for (int64_t kh = 0; kh < v.kh; kh++) {
							int64_t ih = oh * v.sh - v.ph + kh * v.dh;
							if (ih < 0 || ih >= v.H)
								continue;
							for (int64_t kw = 0; kw < v.kw; kw++) {
								int64_t iw = ow * v.sw - v.pw + kw * v.dw;
								if (iw >= 0 && iw < v.W)
									xg[(ci * v.H + ih) * v.W + iw] +=
									    gp[oh * v.OW + ow] *
									    wc[(ci * v.kh + kh) * v.kw + kw];
							}
						}
		}
	return 1;
}

RULE(conv_weight_grad)
{
	// conv's adjoint in w: the same terms, each sending
	// g[n, co, oh, ow] x[n, c0 + ci, ih, iw] to w[co, ci, kh, kw].
	const Tensor *x = IN(0), *gy = IN(1);
	Win v = window(&x->shape, &gy->shape, AT("kernel")->v, AT("stride")->v, AT("padding")->v,
	               AT("dilation")->v);
	int64_t N = x->shape.dim[0], C = x->shape.dim[1], Co = gy->shape.dim[1];
	int64_t groups = AT("groups")->i, Cg = C / groups, Cog = Co / groups;
	for (int64_t n = 0; n < N; n++)
		for (int64_t co = 0; co < Co; co++) {
			int64_t c0 = co / Cog * Cg;
			const double *xg = at(x->data, (size_t)((n * C + c0) * v.H * v.W));
			double *wc = at(out->t.data, (size_t)(co * Cg * v.kh * v.kw));
			const double *gp = at(gy->data, (size_t)((n * Co + co) * v.OH * v.OW));
			for (int64_t oh = 0; oh < v.OH; oh++)
				for (int64_t ow = 0; ow < v.OW; ow++)
					for (int64_t ci = 0; ci < Cg; ci++)
						for (int64_t kh = 0; kh < v.kh; kh++) {
							int64_t ih = oh * v.sh - v.ph + kh * v.dh;
							if (ih < 0 || ih >= v.H)
								continue;
							for (int64_t kw = 0; kw < v.kw; kw++) {
								int64_t iw = ow * v.sw - v.pw + kw * v.dw;
								if (iw >= 0 && iw < v.W)
									wc[(ci * v.kh + kh) * v.kw + kw] +=
									    gp[oh * v.OW + ow] *
									    xg[(ci * v.H + ih) * v.W + iw];
							}
						}
		}
	return 1;
}

// The position ih W + iw of window (oh, ow)'s maximum in one H x W plane,
// as max_window chooses it: the first maximum in row-major window order,
// the first NaN once there is one; -1 when the window lies wholly in the
// padding (padding never wins).
static int64_t
max_arg(const double *p, const Win *v, int64_t oh, int64_t ow)
{
	int64_t best = -1;
	double m = -INFINITY;
	for (int64_t kh = 0; kh < v->kh; kh++) {
		int64_t ih = oh * v->sh - v->ph + kh * v->dh;
		if (ih < 0 || ih >= v->H)
			continue;
		for (int64_t kw = 0; kw < v->kw; kw++) {
			int64_t iw = ow * v->sw - v->pw + kw * v->dw;
			if (iw < 0 || iw >= v->W)
				continue;
			double e = p[ih * v->W + iw];
			if (best < 0 || (!isnan(m) && (isnan(e) || e > m))) {
				best = ih * v->W + iw;
				m = e;
			}
		}
	}
	return best;
}

RULE(max_pool_grad)
{
	// g[o] is added at window o's argmax in x (max_pool's adjoint at x).
	const Tensor *x = IN(0), *gy = IN(1);
	Win v = window(&x->shape, &gy->shape, AT("kernel")->v, AT("stride")->v, AT("padding")->v,
	               AT("dilation")->v);
	for (int64_t pl = 0; pl < planes(x); pl++) {
		const double *p = at(x->data, (size_t)(pl * v.H * v.W));
		const double *gp = at(gy->data, (size_t)(pl * v.OH * v.OW));
		double *o = at(out->t.data, (size_t)(pl * v.H * v.W));
		for (int64_t oh = 0; oh < v.OH; oh++)
			for (int64_t ow = 0; ow < v.OW; ow++) {
				int64_t k = max_arg(p, &v, oh, ow);
				if (k >= 0)
					o[k] += gp[oh * v.OW + ow];
			}
	}
	return 1;
}

RULE(max_pool_gather)
{
	// Window o reads h at its argmax in x (0 for a window of padding only).
	const Tensor *x = IN(0), *h = IN(1);
	Win v = window(&x->shape, &out->t.shape, AT("kernel")->v, AT("stride")->v,
	               AT("padding")->v, AT("dilation")->v);
	for (int64_t pl = 0; pl < planes(x); pl++) {
		const double *p = at(x->data, (size_t)(pl * v.H * v.W));
		const double *hp = at(h->data, (size_t)(pl * v.H * v.W));
		double *o = at(out->t.data, (size_t)(pl * v.OH * v.OW));
		for (int64_t oh = 0; oh < v.OH; oh++)
			for (int64_t ow = 0; ow < v.OW; ow++) {
				int64_t k = max_arg(p, &v, oh, ow);
				o[oh * v.OW + ow] = k >= 0 ? hp[k] : 0;
			}
	}
	return 1;
}

RULE(avg_pool_grad)
{
	// avg_window's adjoint: g[o] / divisor added to each in-bounds element
	// of window o (the divisor as avg_window's: kh kw, or the count).
	const Tensor *gy = IN(0);
	Win v = window(&out->t.shape, &gy->shape, AT("kernel")->v, AT("stride")->v,
	               AT("padding")->v, NULL);
	int incl = AT("count_include_pad")->i != 0;
	for (int64_t pl = 0; pl < planes(gy); pl++) {
		const double *gp = at(gy->data, (size_t)(pl * v.OH * v.OW));
		double *o = at(out->t.data, (size_t)(pl * v.H * v.W));
		for (int64_t oh = 0; oh < v.OH; oh++)
			for (int64_t ow = 0; ow < v.OW; ow++) {
				int64_t cnt = 0;
				for (int pass = 0; pass < 2; pass++)
					for (int64_t kh = 0; kh < v.kh; kh++) {
						int64_t ih = oh * v.sh - v.ph + kh;
						if (ih < 0 || ih >= v.H)
							continue;
						for (int64_t kw = 0; kw < v.kw; kw++) {
							int64_t iw = ow * v.sw - v.pw + kw;
							if (iw < 0 || iw >= v.W)
								continue;
							if (pass == 0) // count the window first
								cnt++;
							else
								o[ih * v.W + iw] += gp[oh * v.OW + ow] /
								                    (double)(incl ? v.kh * v.kw : cnt);
						}
					}
			}
	}
	return 1;
}

RULE(adaptive_avg_pool_grad)
{
	// adaptive_avg_pool's adjoint: g[o] / |window o| added to each element
	// of window o = [floor(o L / O), ceil((o + 1) L / O)) per axis.
	(void)a;
	const Tensor *gy = IN(0);
	int two = gy->shape.rank == 4, r = gy->shape.rank;
	int64_t H = two ? out->t.shape.dim[2] : 1, W = out->t.shape.dim[r - 1];
	int64_t OH = two ? gy->shape.dim[2] : 1, OW = gy->shape.dim[r - 1];
	for (int64_t pl = 0; pl < planes(gy); pl++) {
		const double *gp = at(gy->data, (size_t)(pl * OH * OW));
		double *o = at(out->t.data, (size_t)(pl * H * W));
		for (int64_t oh = 0; oh < OH; oh++) {
			int64_t h0 = oh * H / OH, h1 = ((oh + 1) * H + OH - 1) / OH;
			for (int64_t ow = 0; ow < OW; ow++) {
				int64_t w0 = ow * W / OW, w1 = ((ow + 1) * W + OW - 1) / OW;
				double share = gp[oh * OW + ow] / (double)((h1 - h0) * (w1 - w0));
				for (int64_t ih = h0; ih < h1; ih++)
					for (int64_t iw = w0; iw < w1; iw++)
						o[ih * W + iw] += share;
			}
		}
	}
	return 1;
}

RULE(upsample_bilinear_grad)
{
	// upsample_bilinear's adjoint: output (oh, ow) read its four neighbours
	// with weights (1 - lh)(1 - lw), (1 - lh) lw, lh (1 - lw), lh lw; g
	// goes back to them with the same weights (twice to one pixel at the
	// border, where the forward read it twice).
	const Tensor *gy = IN(0);
	int align = AT("align_corners")->i != 0;
	int64_t H = out->t.shape.dim[2], W = out->t.shape.dim[3];
	int64_t OH = gy->shape.dim[2], OW = gy->shape.dim[3];
	for (int64_t pl = 0; pl < planes(gy); pl++) {
		const double *gp = at(gy->data, (size_t)(pl * OH * OW));
		double *o = at(out->t.data, (size_t)(pl * H * W));
		for (int64_t oh = 0; oh < OH; oh++) {
			int64_t h0, h1, w0, w1;
			double lh, lw;
			ir_bilinear_src(oh, H, OH, align, &h0, &h1, &lh);
			for (int64_t ow = 0; ow < OW; ow++) {
				ir_bilinear_src(ow, W, OW, align, &w0, &w1, &lw);
				double gv = gp[oh * OW + ow];
				o[h0 * W + w0] += (1 - lh) * (1 - lw) * gv;
				o[h0 * W + w1] += (1 - lh) * lw * gv;
				o[h1 * W + w0] += lh * (1 - lw) * gv;
				o[h1 * W + w1] += lh * lw * gv;
			}
		}
	}
	return 1;
}

// scan: operands are ncarry carries, nxs sequences (common leading length
// T) and loop-invariant operands.  Step t (t = 0..T-1, or T-1..0 when
// reverse) runs the body on (carries, xs[t]..., invariants...) through a
// recursive ir_interp; the first ncarry outputs replace the carries, the
// others are stored at position t of the stacked ys (so with reverse,
// ys[t] is still the output of step t).  The value is the tuple (final
// carries..., ys...).  The body sees the same runseed at every step, so a
// sampler inside a body draws the same numbers at every step.
RULE(scan)
{
	const Graph *g = it->g, *body = g->sub[AT("body")->i];
	int nin = g->node[self].nin, nc = (int)AT("ncarry")->i, nx = (int)AT("nxs")->i;
	int rev = AT("reverse")->i != 0, nout = (int)body->nout, ok = 0;
	int64_t T = IN(nc)->shape.dim[0];
	Tensor *args = calloc((size_t)nin, sizeof *args);
	Tensor *res = calloc((size_t)(nout ? nout : 1), sizeof *res);
	Tensor *step = calloc((size_t)(nout ? nout : 1), sizeof *step);
	char *msg = malloc(it->errlen ? it->errlen : 1);
	if (!args || !res || !step || !msg) {
		fail(it, "scan: out of memory");
		goto done;
	}
	for (int i = 0; i < nc; i++) {
		if (!ir_tensor_alloc(&res[i], IN(i)->dtype, &IN(i)->shape)) {
			fail(it, "scan: out of memory");
			goto done;
		}
		copy_data(&res[i], IN(i));
	}
	for (int k = nc; k < nout; k++) {
		const Node *o = &body->node[body->out[k].node];
		const Shape *os = &body->shape[o->shape];
		Shape s = {.rank = os->rank + 1};
		s.dim[0] = T;
		memcpy(s.dim + 1, os->dim, sizeof(int64_t) * (size_t)os->rank);
		if (!ir_tensor_alloc(&res[k], (DType)o->dtype, &s)) {
			fail(it, "scan: stacked output %d is too large", k + 1);
			goto done;
		}
	}
	for (int64_t tt = 0; tt < T; tt++) {
		int64_t t = rev ? T - 1 - tt : tt;
		for (int i = 0; i < nin; i++) {
			if (i < nc)
				args[i] = res[i]; // borrowed: ir_interp copies its inputs
			else if (i < nc + nx) {
				// A view of xs[t]: the same data, the leading axis dropped.
				const Tensor *xs = IN(i);
				Tensor v = {.dtype = xs->dtype};
				v.shape.rank = xs->shape.rank - 1;
				for (int d = 1; d < xs->shape.rank; d++)
					v.shape.dim[d - 1] = xs->shape.dim[d];
				size_t inner = numel(&v);
				v.data = inner ? xs->data + (size_t)t * inner : NULL;
				args[i] = v;
			} else
				args[i] = *IN(i);
		}
		if (!ir_interp(body, args, step, it->runseed, msg, it->errlen)) {
			fail(it, "scan: body '%s', step %lld: %s", body->name, (long long)t, msg);
			goto done;
		}
		for (int k = 0; k < nout; k++) {
			if (k < nc) {
				ir_tensor_free(&res[k]);
				res[k] = step[k];
				memset(&step[k], 0, sizeof step[k]);
				continue;
			}
			size_t n = numel(&step[k]), off = (size_t)t * n;
			if (n)
				memcpy(res[k].data + off, step[k].data, sizeof(double) * n);
			ir_tensor_free(&step[k]);
		}
	}
	out->tup = res;
	out->ntup = nout;
	res = NULL;
	ok = 1;
done:
	if (res)
		for (int k = 0; k < nout; k++)
			ir_tensor_free(&res[k]);
	free(res);
	free(step);
	free(args);
	free(msg);
	return ok;
}

RULE(get)
{
	const Val *t = &it->val[ir_in1(it->g, self, 0)];
	copy_data(&out->t, &t->tup[AT("index")->i]);
	return 1;
}

RULE(to_host)
{
	(void)a;
	copy_data(&out->t, IN(0));
	return 1;
}

RULE(to_device)
{
	(void)a;
	copy_data(&out->t, IN(0));
	return 1;
}

RULE(linear_sum_assignment)
{
	(void)a;
	// scipy.optimize.linear_sum_assignment, as "column of each row"
	// (support/hungarian.c, shared with compiled code).
	const Tensor *x = IN(0);
	int64_t R = x->shape.dim[0], C = x->shape.dim[1];
	int64_t *col = malloc(sizeof *col * (size_t)(R ? R : 1));
	void *work = malloc(ir_assignment_work(R, C));
	int r = col && work ? ir_assignment(x->data, R, C, col, work) : -2;
	for (int64_t i = 0; r == 1 && i < R; i++)
		out->t.data[i] = (double)col[i];
	free(col);
	free(work);
	if (r == -2)
		return fail(it, "linear_sum_assignment: out of memory");
	if (r == 0)
		return fail(it, "linear_sum_assignment: the cost matrix contains NaN or -inf");
	if (r < 0)
		return fail(it, "linear_sum_assignment: the cost matrix is infeasible");
	return 1;
}

#undef RULE

typedef int (*InterpFn)(Interp *it, NodeId self, const Attrs *a, Val *out);

// clang-format off
static const InterpFn interp_fn[OP_COUNT] = {
#define OTHER(n, ...) [OP_##n] = interp_##n,
#include "ops.def" // OTHER: a missing interp_<name> is a build error
};
// clang-format on

// ---------------------------------------------------------------- driver

static int
check_inputs(const Graph *g, const Tensor *inputs, char *err, size_t errlen)
{
	for (uint32_t i = 0; i < g->ninput; i++) {
		const Node *nd = &g->node[g->input[i].node];
		const Shape *want = &g->shape[nd->shape];
		const Tensor *t = &inputs[i];
		int ok;
		if (t->dtype != nd->dtype || !ir_shape_eq(&t->shape, want)) {
			char s0[200], s1[200];
			ir_type_str((DType)nd->dtype, want, s0, sizeof s0);
			ir_type_str(t->dtype, &t->shape, s1, sizeof s1);
			const char *name = g->input[i].name;
			snprintf(err, errlen, "input '%s': expected %s, got %s", name, s0, s1);
			return 0;
		}
		if (checked_numel(&t->shape, &ok) && !t->data) {
			snprintf(err, errlen, "input '%s': no data", g->input[i].name);
			return 0;
		}
	}
	return 1;
}

int
ir_interp(const Graph *g, const Tensor *inputs, Tensor *outputs, uint64_t runseed, char *err,
          size_t errlen)
{
	for (uint32_t o = 0; o < g->nout; o++)
		memset(&outputs[o], 0, sizeof outputs[o]);
	if (errlen)
		err[0] = 0;
	if (!check_inputs(g, inputs, err, errlen))
		return 0;
	Interp it = {g, NULL, inputs, runseed, err, errlen, 0};
	// last[n]: the id of n's last user (UINT32_MAX for outputs), after
	// which its value is dead.
	uint32_t *last = calloc(g->nnode, sizeof *last);
	it.val = calloc(g->nnode, sizeof *it.val);
	uint32_t o = 0;
	int ok = 0;
	if (!last || !it.val) {
		fail(&it, "out of memory");
		goto done;
	}
	for (NodeId n = 1; n < g->nnode; n++)
		for (int i = 0; i < g->node[n].nin; i++)
			last[ir_in1(g, n, i)] = n;
	for (o = 0; o < g->nout; o++)
		last[g->out[o].node] = UINT32_MAX;
	for (NodeId n = 1; n < g->nnode; n++) {
		const Node *nd = &g->node[n];
		Val *v = &it.val[n];
		it.cur = n;
		Attrs a;
		ir_attrs_get(g, n, &a);
		if (nd->op == OP_input && (a.a[0].i < 0 || a.a[0].i >= g->ninput)) {
			fail(&it, "input node %u: index %lld out of range", n, (long long)a.a[0].i);
			goto done;
		}
		const Shape *shp = &g->shape[nd->shape];
		if (nd->dtype != DT_TUPLE && !ir_tensor_alloc(&v->t, (DType)nd->dtype, shp)) {
			char s[200];
			ir_type_str((DType)nd->dtype, shp, s, sizeof s);
			fail(&it, "%s: result %s is too large (its float64 copy would not fit in memory)",
			     ir_op(nd->op)->name, s);
			goto done;
		}
		int r = ir_op(nd->op)->flags & F_ELEMWISE ? run_elemwise(&it, n, &a, v)
		                                          : interp_fn[nd->op](&it, n, &a, v);
		if (r && nd->dtype == DT_I64)
			r = check_i64(&it, n, &v->t);
		if (!r)
			goto done;
		for (int i = 0; i < nd->nin; i++) {
			NodeId p = ir_in1(g, n, i);
			if (last[p] == n)
				val_free(&it.val[p]);
		}
		if (last[n] == 0)
			val_free(v); // dead code: computed (it may fail), never read
	}
	for (o = 0; o < g->nout; o++) {
		const Val *v = &it.val[g->out[o].node];
		if (v->tup) {
			fail(&it, "output '%s' is a tuple", g->out[o].name);
			goto done;
		}
		if (!ir_tensor_alloc(&outputs[o], v->t.dtype, &v->t.shape)) {
			fail(&it, "out of memory");
			goto done;
		}
		copy_data(&outputs[o], &v->t);
	}
	ok = 1;
done:
	if (!ok)
		for (uint32_t k = 0; k < g->nout; k++)
			ir_tensor_free(&outputs[k]);
	if (it.val)
		for (NodeId n = 1; n < g->nnode; n++)
			val_free(&it.val[n]);
	free(it.val);
	free(last);
	return ok;
}

// ---------------------------------------------------------------- modules

static void
round_f32(Tensor *t)
{
	size_t n = numel(t);
	for (size_t i = 0; i < n; i++)
		t->data[i] = (double)(float)t->data[i];
}

static const char *
decl_kind(const Decl *d)
{
	return d->kind == DECL_PARAM ? "parameter" : "constant";
}

// Declaration d's value from its binding b: the same type, copied.
static int
init_bound(const Decl *d, const Tensor *b, Tensor *v, char *err, size_t errlen)
{
	char s0[200], s1[200];
	int ok;
	if (b->dtype != d->dtype || !ir_shape_eq(&b->shape, &d->shape)) {
		ir_type_str(d->dtype, &d->shape, s0, sizeof s0);
		ir_type_str(b->dtype, &b->shape, s1, sizeof s1);
		snprintf(err, errlen, "%s '%s': the bound tensor is %s, declared %s", decl_kind(d),
		         d->name, s1, s0);
		return 0;
	}
	if (checked_numel(&b->shape, &ok) && !b->data) {
		snprintf(err, errlen, "%s '%s': the bound tensor has no data", decl_kind(d),
		         d->name);
		return 0;
	}
	if (!ir_tensor_alloc(v, d->dtype, &d->shape)) {
		snprintf(err, errlen, "%s '%s': out of memory", decl_kind(d), d->name);
		return 0;
	}
	copy_data(v, b);
	return 1;
}

// Declaration i's value from its initializer, whose inputs are earlier
// declarations by name (values[0..i) are computed).
static int
init_run(const Module *m, uint32_t i, Tensor *values, uint64_t runseed, char *err, size_t errlen)
{
	const Decl *d = &m->decl[i];
	const Graph *g = d->init;
	if (!g) {
		snprintf(err, errlen, "%s '%s' has no initializer and was not bound from a file",
		         decl_kind(d), d->name);
		return 0;
	}
	if (g->nout != 1) {
		snprintf(err, errlen, "initializer of '%s' has %u outputs, not 1", d->name,
		         g->nout);
		return 0;
	}
	Tensor *ins = calloc(g->ninput ? g->ninput : 1, sizeof *ins);
	char *msg = malloc(errlen ? errlen : 1);
	int ok = 0;
	if (!ins || !msg) {
		snprintf(err, errlen, "initializer of '%s': out of memory", d->name);
		goto done;
	}
	for (uint32_t k = 0; k < g->ninput; k++) {
		uint32_t j = 0;
		while (j < i && strcmp(m->decl[j].name, g->input[k].name))
			j++;
		if (j == i) {
			snprintf(err, errlen,
			         "initializer of '%s' reads '%s', which is not declared before it",
			         d->name, g->input[k].name);
			goto done;
		}
		ins[k] = values[j]; // borrowed: ir_interp copies its inputs
	}
	Tensor out;
	if (!ir_interp(g, ins, &out, runseed, msg, errlen)) {
		snprintf(err, errlen, "initializer of '%s': %s", d->name, msg);
		goto done;
	}
	if (out.dtype != d->dtype || !ir_shape_eq(&out.shape, &d->shape)) {
		char s0[200], s1[200];
		ir_type_str(d->dtype, &d->shape, s0, sizeof s0);
		ir_type_str(out.dtype, &out.shape, s1, sizeof s1);
		snprintf(err, errlen, "initializer of '%s' computes %s, declared %s", d->name, s1,
		         s0);
		ir_tensor_free(&out);
		goto done;
	}
	if (d->dtype == DT_F32)
		round_f32(&out);
	values[i] = out;
	ok = 1;
done:
	free(ins);
	free(msg);
	return ok;
}

int
ir_module_init(const Module *m, const Tensor *bound, const int *isbound, Tensor *values,
               uint64_t runseed, char *err, size_t errlen)
{
	for (uint32_t i = 0; i < m->ndecl; i++)
		memset(&values[i], 0, sizeof values[i]);
	for (uint32_t i = 0; i < m->ndecl; i++) {
		int ok = bound && isbound && isbound[i]
		             ? init_bound(&m->decl[i], &bound[i], &values[i], err, errlen)
		             : init_run(m, i, values, runseed, err, errlen);
		if (!ok) {
			for (uint32_t k = 0; k < i; k++)
				ir_tensor_free(&values[k]);
			return 0;
		}
	}
	return 1;
}
