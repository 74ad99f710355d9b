// tests/unit/test_zoo_b.c -- models/deepspeech.ir (models-spec.md §4.2) and
// models/detr.ir (§2.3).
//
// At the benchmark's sizes each model is parsed and its parameter list is
// compared, in order, with the benchmark's (tests/data/params/<model>.tsv:
// names, shapes, numel, totals).  Everything else runs the float64
// reference interpreter at reduced sizes (-D), in float64 arithmetic:
//
// deepspeech
//   - the output lengths follow §4.2's formula, floor((floor(len) + 1) / 2),
//     and differ across the batch;
//   - the forward value equals the whole model written here in C, as
//     PyTorch lays it out (the LSTM part T_max = max(L_out) long), at four
//     run seeds;
//   - LSTM weights all zero give h = 0 exactly, so the scores are all 0 and
//     the CTC loss has a closed form: with every target the blank, the
//     alignments of S blanks in L frames number C(L + 1, 2S) (below);
//   - the model's own lstm_direction (both directions, per-sample lengths)
//     against an LSTM written here in C, and its ctc_loss on random scores
//     with targets that repeat, pad and are all blank against the CTC
//     alpha recursion written here in C, as PyTorch's CPU kernel does it;
//   - vjp: the gradient of each parameter tensor against a central
//     difference of the loss along a random direction in that tensor, and
//     along one random direction in all of them.
// detr
//   - the forward value is finite, the targets are as §2.3's generator
//     makes them (with PyTorch's aliasing in its element "swap");
//   - the model's hungarian_matcher on hand-made predictions gives the
//     known assignment, and its set_criterion on random predictions equals
//     the loss written here in C with the matching found by brute force;
//   - with both head weights zero every query predicts the same, so the
//     loss does not depend on the matching and has a closed form;
//   - jvp and vjp are adjoint (<v, J t> = <J^T v, t>, to 1e-8) and jvp
//     matches a central difference of the loss; vhp equals hvp, and
//     <t, H t> matches a central difference of J t.  The model is in train
//     mode, with dropout at 60 sites: every run here uses run seed 0 and
//     call counter 0, so the masks are fixed and the function is a smooth
//     (piecewise) function of the parameters, which is what the finite
//     differences need (tests/unit/test_dropout.c checks the masks).
// The model's functions are called on hand-made values by renaming the
// model's `forward` and appending a small forward of the test's own.
// Derivative checks that need a rule not yet built ("not implemented yet",
// e.g. conv while its rules are written) are skipped with a note.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "frontend.h"
#include "ir.h"
#include "passes.h"
#include "testmodel.h"
#include "testutil.h"

// ---------------------------------------------------------------- helpers

static double
now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static uint64_t rng = 0x9E3779B97F4A7C15ull;

static double
rnd(void) // [0, 1)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (double)(rng >> 11) / 9007199254740992.0;
}

static double
rnd_normal(void)
{
	double u = rnd(), v = rnd();
	return sqrt(-2 * log(1 - u)) * cos(2 * 3.14159265358979323846 * v);
}

static char *
slurp(const char *path)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	fseek(f, 0, SEEK_SET);
	char *s = malloc((size_t)n + 1);
	if (s && fread(s, 1, (size_t)n, f) != (size_t)n) {
		free(s);
		s = NULL;
	}
	if (s)
		s[n] = 0;
	fclose(f);
	return s;
}

static const char *
source_dir(void)
{
	const char *d = getenv("FADC_SOURCE_DIR");
	return d ? d : ".";
}

// Parses models/<file> with the size overrides defs.  With extra, the
// model's `def forward(` becomes `def model_forward(` and extra (a forward
// of the test's own, calling the model's functions) is appended.
static Module *
parse_model(const char *file, const char *const *defs, int ndefs, const char *extra)
{
	char path[4096];
	snprintf(path, sizeof path, "%s/models/%s", source_dir(), file);
	FeOptions o = {.defines = defs, .ndefines = ndefs, .diag = stderr};
	if (!extra)
		return fe_parse_file(path, &o);
	char *text = slurp(path);
	if (!text) {
		fprintf(stderr, "cannot read %s\n", path);
		return NULL;
	}
	static const char key[] = "def forward(";
	char *at = strstr(text, key);
	if (!at || strstr(at + 1, key)) {
		fprintf(stderr, "%s: expected one `%s`\n", path, key);
		free(text);
		return NULL;
	}
	size_t pre = (size_t)(at - text), n = strlen(text) + strlen(extra) + 16;
	char *src = malloc(n);
	snprintf(src, n, "%.*sdef model_forward(%s\n%s", (int)pre, text, at + strlen(key), extra);
	Module *m = fe_parse_string(file, src, strlen(src), &o);
	free(src);
	free(text);
	return m;
}

// Values of every declaration under run seed `seed`; bound[d] is used
// where isbound[d].
static Tensor *
init_values_seed(const Module *m, const Tensor *bound, const int *isbound, uint64_t seed)
{
	char err[512];
	Tensor *vals = calloc(m->ndecl + 1, sizeof *vals);
	if (!ir_module_init(m, bound, isbound, vals, seed, err, sizeof err)) {
		fprintf(stderr, "ir_module_init: %s\n", err);
		exit(1);
	}
	return vals;
}

static Tensor *
init_values(const Module *m, const Tensor *bound, const int *isbound)
{
	return init_values_seed(m, bound, isbound, 0);
}

static void
free_values(const Module *m, Tensor *vals)
{
	for (uint32_t d = 0; d < m->ndecl; d++)
		ir_tensor_free(&vals[d]);
	free(vals);
}

static const Tensor *
value(const Module *m, const Tensor *vals, const char *name)
{
	int d = ir_module_find_decl(m, name);
	if (d < 0) {
		fprintf(stderr, "no declaration %s\n", name);
		exit(1);
	}
	return &vals[d];
}

// A bound value for declaration `name`, zeroed, shaped as declared.
static double *
bind(const Module *m, Tensor *bound, int *isbound, const char *name)
{
	int d = ir_module_find_decl(m, name);
	if (d < 0) {
		fprintf(stderr, "no declaration %s\n", name);
		exit(1);
	}
	ir_tensor_free(&bound[d]);
	ir_tensor_alloc(&bound[d], m->decl[d].dtype, &m->decl[d].shape);
	isbound[d] = 1;
	return bound[d].data;
}

// The forward value (a scalar) of m at vals.
static double
loss_at(const Module *m, Tensor *vals)
{
	Graph *g;
	Tensor *o = tm_run_task(m, "forward", vals, NULL, NULL, 0, &g);
	double f = o[0].data[0];
	tm_free_out(g, o);
	return f;
}

// The dtype of the forward's (scalar) output: vjp's v has it.
static DType
loss_dtype(const Module *m)
{
	const Graph *g = m->main;
	return (DType)g->node[g->out[0].node].dtype;
}

// ---------------------------------------------------------------- parameter lists

// The params of models/<file> at its default sizes, in declaration order,
// against the benchmark's list: "index name AxBxC numel" rows, then
// "# total tensors=T scalars=S".
static void
check_params(const char *file, const char *tsv)
{
	char path[4096];
	snprintf(path, sizeof path, "%s/tests/data/params/%s", source_dir(), tsv);
	char *text = slurp(path);
	Module *m = parse_model(file, NULL, 0, NULL);
	CHECK(text != NULL && m != NULL);
	if (!text || !m) {
		free(text);
		if (m)
			ir_module_free(m);
		return;
	}
	uint32_t d = 0;
	long rows = 0, want_tensors = -1;
	int64_t total = 0, want_total = -1;
	for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
		if (line[0] == '#') {
			long t;
			long long s;
			if (sscanf(line, "# total tensors=%ld scalars=%lld", &t, &s) == 2)
				want_tensors = t, want_total = s;
			continue;
		}
		char name[512], shape[128];
		long idx;
		long long numel;
		if (sscanf(line, "%ld\t%511s\t%127s\t%lld", &idx, name, shape, &numel) != 4) {
			CHECK(!"bad row in the params table");
			continue;
		}
		while (d < m->ndecl && m->decl[d].kind != DECL_PARAM)
			d++;
		CHECK(idx == rows);
		rows++;
		if (d == m->ndecl) {
			CHECK(!"the model has fewer params than the table");
			continue;
		}
		const Decl *p = &m->decl[d++];
		char got[128] = "";
		for (int k = 0; k < p->shape.rank; k++)
			snprintf(got + strlen(got), sizeof got - strlen(got), "%s%lld",
			         k ? "x" : "", (long long)p->shape.dim[k]);
		CHECK_STR(p->name, name);
		CHECK_STR(got, shape);
		CHECK(ir_numel(&p->shape) == numel);
		total += ir_numel(&p->shape);
	}
	while (d < m->ndecl && m->decl[d].kind != DECL_PARAM)
		d++;
	CHECK(d == m->ndecl); // no params beyond the table
	CHECK(rows == want_tensors);
	CHECK(total == want_total);
	printf("%s: %ld params, %lld scalars, as %s\n", file, rows, (long long)total, tsv);
	free(text);
	ir_module_free(m);
}

// ---------------------------------------------------------------- derivative checks

// x += step dir for every param (dir is by declaration), or for decl
// `only` alone if only >= 0.
static void
shift(const Module *m, Tensor *vals, const Tensor *dir, int only, double step)
{
	for (uint32_t d = 0; d < m->ndecl; d++)
		if (m->decl[d].kind == DECL_PARAM && (only < 0 || (uint32_t)only == d))
			for (int64_t i = 0; i < ir_numel(&vals[d].shape); i++)
				vals[d].data[i] += step * dir[d].data[i];
}

// (f(x + h dir) - f(x - h dir)) / 2h, x restored after.
static double
central_difference(const Module *m, Tensor *vals, const Tensor *dir, int only, double h)
{
	shift(m, vals, dir, only, h);
	double fp = loss_at(m, vals);
	shift(m, vals, dir, only, -2 * h);
	double fm = loss_at(m, vals);
	shift(m, vals, dir, only, h);
	return (fp - fm) / (2 * h);
}

// vjp against central differences: for each param tensor, a random
// direction d in it alone, <grad, d> against (f(x + h d) - f(x - h d)) / 2h;
// then one direction in all params at once.  Returns 0 if vjp cannot be
// built yet (the reason is printed).
static int
check_vjp_fd(const char *name, const Module *m, Tensor *vals, double h, double tol)
{
	char why[512];
	Graph *g;
	Tensor v;
	Shape s0 = {0};
	ir_tensor_alloc(&v, loss_dtype(m), &s0);
	v.data[0] = 0.75;
	const char *vn[] = {"v"};
	Tensor *o = tm_run_task_why(m, "vjp", vals, vn, &v, 1, 0, why, sizeof why, &g);
	if (!o) {
		printf("%s: note: vjp checks skipped: %s\n", name, why);
		ir_tensor_free(&v);
		return 0;
	}
	double f0 = o[0].data[0];
	CHECK(isfinite(f0));
	Tensor *dir = calloc(m->ndecl + 1, sizeof *dir);
	uint32_t p = 0;
	int ntensor = 0;
	double worst = 0, dot_all = 0;
	const char *worst_name = "";
	for (uint32_t d = 0; d < m->ndecl; d++) {
		if (m->decl[d].kind != DECL_PARAM)
			continue;
		Tensor *x = &vals[d], *gr = &o[1 + p++];
		int64_t n = ir_numel(&x->shape);
		ir_tensor_alloc(&dir[d], DT_F64, &x->shape);
		double dot = 0, scale = 0;
		for (int64_t i = 0; i < n; i++) {
			dir[d].data[i] = rnd_normal() * fmax(0.05, fabs(x->data[i]));
			dot += gr->data[i] * dir[d].data[i] / 0.75;
			scale += fabs(gr->data[i] * dir[d].data[i]) / 0.75;
		}
		dot_all += dot;
		double fd = central_difference(m, vals, dir, (int)d, h);
		// Normalized by the sum of |terms| (cancellation in <grad, d>
		// would otherwise make a tiny directional derivative look wrong).
		double err = fabs(fd - dot) / fmax(1e-12, fmax(fabs(fd), scale));
		if (err > worst)
			worst = err, worst_name = m->decl[d].name;
		tu_ncheck++;
		if (!(err <= tol)) {
			tu_nfail++;
			fprintf(stderr,
			        "%s: vjp of %s: <grad, d> = %.12g, difference %.12g (err %.2g)\n",
			        name, m->decl[d].name, dot, fd, err);
		}
		ntensor++;
	}
	// All params at once.
	double fd_all = central_difference(m, vals, dir, -1, h);
	CHECK_REL(dot_all, fd_all, tol);
	printf("%s: vjp against central differences: %d tensors, worst error %.2g (%s); all at "
	       "once %.12g vs %.12g\n",
	       name, ntensor, worst, worst_name, dot_all, fd_all);
	for (uint32_t d = 0; d < m->ndecl; d++)
		ir_tensor_free(&dir[d]);
	free(dir);
	tm_free_out(g, o);
	ir_tensor_free(&v);
	return 1;
}

// ---------------------------------------------------------------- deepspeech

static const char *const ds_defs[] = {"N=3",        "FREQ=9", "FRAMES=16", "LEN_LO=8",
                                      "LEN_SPAN=8", "C=2",    "HID=4",     "S=2"};
#define DS_NDEFS ((int)(sizeof ds_defs / sizeof ds_defs[0]))

// log C(n, k)
static double
log_choose(double n, double k)
{
	return lgamma(n + 1) - lgamma(k + 1) - lgamma(n - k + 1);
}

// log(e^a + e^b + e^c), with -inf for log 0.
static double
logsumexp3(double a, double b, double c)
{
	double mx = fmax(a, fmax(b, c));
	return mx == -INFINITY ? -INFINITY : mx + log(exp(a - mx) + exp(b - mx) + exp(c - mx));
}

// The CTC loss as PyTorch's CPU kernel computes it (log space, -inf for
// log 0): lp (T, N, C) as given (T >= every input length), targets
// (N, smax), mean over the batch of nll / target length.
static double
ctc_reference(const double *lp, int N, int C, const int64_t *tg, int smax, const int *in_len,
              const int *tl)
{
	double total = 0;
	for (int n = 0; n < N; n++) {
		int ns = 2 * tl[n] + 1;
		double *a = malloc(sizeof *a * (size_t)ns), *b = malloc(sizeof *b * (size_t)ns);
		int64_t *ext = malloc(sizeof *ext * (size_t)ns);
		for (int s = 0; s < ns; s++)
			ext[s] = s % 2 ? tg[n * smax + s / 2] : 0;
		const double *e = &lp[n * C]; // e[t * N * C + c]: lp[t, n, c]
		for (int s = 0; s < ns; s++)
			a[s] = s == 0 ? e[0] : s == 1 ? e[ext[1]] : -INFINITY;
		for (int t = 1; t < in_len[n]; t++) {
			for (int s = 0; s < ns; s++) {
				int skip = s > 1 && ext[s] != 0 && ext[s] != ext[s - 2];
				b[s] = logsumexp3(a[s], s > 0 ? a[s - 1] : -INFINITY,
				                  skip ? a[s - 2] : -INFINITY) +
				       e[t * N * C + ext[s]];
			}
			memcpy(a, b, sizeof *a * (size_t)ns);
		}
		total += -logsumexp3(a[ns - 1], a[ns - 2], -INFINITY) / tl[n];
		free(a), free(b), free(ext);
	}
	return total / N;
}

static double
sigm(double x)
{
	return 1 / (1 + exp(-x));
}

// One direction of an LSTM (gate order i, f, g, o) over x (T, N, F), each
// sample over its first len[n] steps (from the end if reverse), zeros
// elsewhere: y (T, N, H).
static void
lstm_reference(const double *x, int T, int N, int F, int H, const double *wih, const double *whh,
               const double *bih, const double *bhh, const int *len, int reverse, double *y)
{
	double *h = calloc((size_t)H, sizeof *h), *c = calloc((size_t)H, sizeof *c);
	double *z = calloc((size_t)(4 * H), sizeof *z), *h2 = calloc((size_t)H, sizeof *h2);
	memset(y, 0, sizeof *y * (size_t)(T * N * H));
	for (int n = 0; n < N; n++) {
		memset(h, 0, sizeof *h * (size_t)H);
		memset(c, 0, sizeof *c * (size_t)H);
		for (int k = 0; k < len[n]; k++) {
			int t = reverse ? len[n] - 1 - k : k;
			for (int r = 0; r < 4 * H; r++) {
				double acc = bih[r] + bhh[r];
				for (int j = 0; j < F; j++)
					acc += wih[r * F + j] * x[(t * N + n) * F + j];
				for (int j = 0; j < H; j++)
					acc += whh[r * H + j] * h[j];
				z[r] = acc;
			}
			for (int j = 0; j < H; j++) {
				double ig = sigm(z[j]), fg = sigm(z[H + j]),
				       gg = tanh(z[2 * H + j]), og = sigm(z[3 * H + j]);
				c[j] = fg * c[j] + ig * gg;
				h2[j] = og * tanh(c[j]);
			}
			memcpy(h, h2, sizeof *h * (size_t)H);
			memcpy(&y[(t * N + n) * H], h, sizeof *h * (size_t)H);
		}
	}
	free(h), free(c), free(z), free(h2);
}

// ---- the whole deepspeech forward in C (reduced sizes), for ds_reference

#define BN_EPS ((double)(float)1e-5) // the prelude's eps, an f32 constant here

// A conv2d's geometry: x (N, CI, H, W), kernel (KH, KW), stride, padding,
// y (N, CO, HO, WO).
typedef struct Conv {
	int N, CI, H, W, CO, KH, KW, SH, SW, PH, PW, HO, WO;
} Conv;

// One output element of the convolution, without bias.
static double
conv_at(const Conv *c, const double *x, const double *w, int n, int co, int i, int j)
{
	double acc = 0;
	for (int ci = 0; ci < c->CI; ci++)
		for (int a = 0; a < c->KH; a++)
			for (int k = 0; k < c->KW; k++) {
				int h = i * c->SH - c->PH + a, v = j * c->SW - c->PW + k;
				if (h < 0 || h >= c->H || v < 0 || v >= c->W)
					continue;
				acc += w[((co * c->CI + ci) * c->KH + a) * c->KW + k] *
				       x[((n * c->CI + ci) * c->H + h) * c->W + v];
			}
	return acc;
}

static void
conv2d_ref(const Conv *c, const double *x, const double *w, const double *b, double *y)
{
	for (int n = 0; n < c->N; n++)
		for (int co = 0; co < c->CO; co++)
			for (int i = 0; i < c->HO; i++)
				for (int j = 0; j < c->WO; j++)
					y[((n * c->CO + co) * c->HO + i) * c->WO + j] =
					    b[co] + conv_at(c, x, w, n, co, i, j);
}

// x (N, C, F, T): batch norm per channel over (N, F, T), then the time mask.
static void
bn2d_mask_ref(double *x, int N, int C, int F, int T, const double *g, const double *b,
              const int *len)
{
	for (int c = 0; c < C; c++) {
		double mu = 0, var = 0, cnt = (double)N * F * T;
		for (int n = 0; n < N; n++)
			for (int i = 0; i < F * T; i++)
				mu += x[(n * C + c) * F * T + i];
		mu /= cnt;
		for (int n = 0; n < N; n++)
			for (int i = 0; i < F * T; i++) {
				double d = x[(n * C + c) * F * T + i] - mu;
				var += d * d;
			}
		var /= cnt;
		for (int n = 0; n < N; n++)
			for (int i = 0; i < F * T; i++) {
				double *v = &x[(n * C + c) * F * T + i];
				*v = i % T < len[n] ? (*v - mu) / sqrt(var + BN_EPS) * g[c] + b[c]
				                    : 0;
			}
	}
}

static void
mask_ref(double *x, int N, int C, int F, int T, const int *len, int hardtanh)
{
	for (int n = 0; n < N; n++)
		for (int i = 0; i < C * F * T; i++) {
			double *v = &x[n * C * F * T + i];
			*v = i % T >= len[n] ? 0 : hardtanh ? fmin(fmax(*v, 0), 20) : *v;
		}
}

// BatchNorm1d on the (tmax N, F) rows of x (T, N, F): statistics over the
// first tmax time steps only (PyTorch's padded tensor is tmax long).
static void
bn1d_ref(double *x, int T, int N, int F, int tmax, const double *g, const double *b)
{
	for (int f = 0; f < F; f++) {
		double mu = 0, var = 0, cnt = (double)tmax * N;
		for (int r = 0; r < tmax * N; r++)
			mu += x[r * F + f];
		mu /= cnt;
		for (int r = 0; r < tmax * N; r++)
			var += (x[r * F + f] - mu) * (x[r * F + f] - mu);
		var /= cnt;
		for (int r = 0; r < T * N; r++)
			x[r * F + f] = (x[r * F + f] - mu) / sqrt(var + BN_EPS) * g[f] + b[f];
	}
}

// The deepspeech loss at m's values, computed here: MaskConv, five
// bidirectional LSTM layers (BN1d before 1-4), fc, CTC.
static double
ds_reference(const Module *m, const Tensor *vals)
{
#define V(name) (value(m, vals, name)->data)
	const Tensor *sp = value(m, vals, "spect");
	int N = (int)sp->shape.dim[0], FR = (int)sp->shape.dim[2], FM = (int)sp->shape.dim[3];
	int C = (int)value(m, vals, "conv.seq_module.0.bias")->shape.dim[0];
	int H = (int)value(m, vals, "rnns.0.rnn.weight_hh_l0")->shape.dim[1];
	int NC = (int)value(m, vals, "fc.0.module.1.weight")->shape.dim[0];
	int S = (int)value(m, vals, "targets")->shape.dim[1];
	int F1 = (FR - 1) / 2 + 1, F2 = (F1 - 1) / 2 + 1, T1 = (FM - 1) / 2 + 1, RIN = C * F2;
	int *len = malloc(sizeof *len * (size_t)N), tmax = 0, T;
	for (int n = 0; n < N; n++) {
		len[n] = (int)floor((floor(V("lengths")[n]) + 1) / 2);
		tmax = len[n] > tmax ? len[n] : tmax;
	}
	T = tmax; // PyTorch's unpacked length
	double *a = malloc(sizeof *a * (size_t)(N * C * F1 * T1)),
	       *c2 = malloc(sizeof *c2 * (size_t)(N * C * F2 * T1));
	Conv c0 = {N, 1, FR, FM, C, 41, 11, 2, 2, 20, 5, F1, T1};
	Conv c1 = {N, C, F1, T1, C, 21, 11, 2, 1, 10, 5, F2, T1};
	conv2d_ref(&c0, sp->data, V("conv.seq_module.0.weight"), V("conv.seq_module.0.bias"), a);
	mask_ref(a, N, C, F1, T1, len, 0);
	bn2d_mask_ref(a, N, C, F1, T1, V("conv.seq_module.1.weight"), V("conv.seq_module.1.bias"),
	              len);
	mask_ref(a, N, C, F1, T1, len, 1);
	conv2d_ref(&c1, a, V("conv.seq_module.3.weight"), V("conv.seq_module.3.bias"), c2);
	mask_ref(c2, N, C, F2, T1, len, 0);
	bn2d_mask_ref(c2, N, C, F2, T1, V("conv.seq_module.4.weight"), V("conv.seq_module.4.bias"),
	              len);
	mask_ref(c2, N, C, F2, T1, len, 1);
	// (N, C, F2, T1) -> (N, C F2, T1) -> time-major (T, N, C F2).
	int width = RIN > H ? RIN : H;
	double *x = calloc((size_t)(T * N * width), sizeof *x),
	       *yf = malloc(sizeof *yf * (size_t)(T * N * H)),
	       *yb = malloc(sizeof *yb * (size_t)(T * N * H));
	for (int t = 0; t < T; t++)
		for (int n = 0; n < N; n++)
			for (int k = 0; k < RIN; k++)
				x[(t * N + n) * RIN + k] =
				    c2[((n * C + k / F2) * F2 + k % F2) * T1 + t];
	char name[128];
	for (int l = 0, in = RIN; l < 5; l++, in = H) {
		if (l > 0) {
			snprintf(name, sizeof name, "rnns.%d.batch_norm.module.weight", l);
			const double *g = V(name);
			snprintf(name, sizeof name, "rnns.%d.batch_norm.module.bias", l);
			bn1d_ref(x, T, N, H, tmax, g, V(name));
		}
		const double *w[2][4];
		static const char *const part[4] = {"weight_ih_l0", "weight_hh_l0", "bias_ih_l0",
		                                    "bias_hh_l0"};
		for (int r = 0; r < 2; r++)
			for (int k = 0; k < 4; k++) {
				snprintf(name, sizeof name, "rnns.%d.rnn.%s%s", l, part[k],
				         r ? "_reverse" : "");
				w[r][k] = V(name);
			}
		lstm_reference(x, T, N, in, H, w[0][0], w[0][1], w[0][2], w[0][3], len, 0, yf);
		lstm_reference(x, T, N, in, H, w[1][0], w[1][1], w[1][2], w[1][3], len, 1, yb);
		for (int i = 0; i < T * N * H; i++)
			x[i] = yf[i] + yb[i];
	}
	bn1d_ref(x, T, N, H, tmax, V("fc.0.module.0.weight"), V("fc.0.module.0.bias"));
	double *lp = malloc(sizeof *lp * (size_t)(T * N * NC));
	const double *wfc = V("fc.0.module.1.weight");
	for (int r = 0; r < T * N; r++)
		for (int c = 0; c < NC; c++) {
			double acc = 0;
			for (int k = 0; k < H; k++)
				acc += x[r * H + k] * wfc[c * H + k];
			lp[r * NC + c] = acc;
		}
	int64_t *tg = malloc(sizeof *tg * (size_t)(N * S));
	int *tl = malloc(sizeof *tl * (size_t)N);
	for (int i = 0; i < N * S; i++)
		tg[i] = (int64_t)V("targets")[i]; // truncation, as .long()
	for (int n = 0; n < N; n++)
		tl[n] = (int)V("target_lengths")[n];
	double loss = ctc_reference(lp, N, NC, tg, S, len, tl);
#undef V
	free(len), free(a), free(c2), free(x), free(yf), free(yb), free(lp), free(tg), free(tl);
	return loss;
}

// The model's lstm_direction against lstm_reference.
static void
ds_lstm(void)
{
	enum { T = 5, N = 3, F = 2, H = 2 };
	static const char extra[] =
	    "const lx: f32[5, 3, 2]\nconst lwih: f32[8, 2]\nconst lwhh: f32[8, 2]\n"
	    "const lbih: f32[8]\nconst lbhh: f32[8]\nconst llens: f32[3]\n"
	    "def forward() {\n"
	    "  steps = iota(shape=[5, 3, 1], axis=0, dtype=f32) < reshape(llens, [1, 3, 1])\n"
	    "  fw = lstm_direction(lx, lwih, lwhh, lbih, lbhh, steps, 0)\n"
	    "  bw = lstm_direction(lx, lwih, lwhh, lbih, lbhh, steps, 1)\n"
	    "  return fw, bw\n}\n";
	Module *m = parse_model("deepspeech.ir", ds_defs, DS_NDEFS, extra);
	CHECK(m != NULL);
	if (!m)
		return;
	Tensor *bound = calloc(m->ndecl + 1, sizeof *bound);
	int *isb = calloc(m->ndecl + 1, sizeof *isb);
	static const char *const names[] = {"lx", "lwih", "lwhh", "lbih", "lbhh"};
	for (int k = 0; k < 5; k++) {
		double *p = bind(m, bound, isb, names[k]);
		int d = ir_module_find_decl(m, names[k]);
		for (int64_t i = 0; i < ir_numel(&m->decl[d].shape); i++)
			p[i] = (k ? 0.6 : 1.0) * rnd_normal();
	}
	int len[N] = {5, 2, 4};
	double *l = bind(m, bound, isb, "llens");
	for (int n = 0; n < N; n++)
		l[n] = len[n];
	Tensor *vals = init_values(m, bound, isb);
	Graph *g;
	Tensor *o = tm_run_task(m, "forward", vals, NULL, NULL, 0, &g);
	double y[T * N * H];
	const double *x = value(m, vals, "lx")->data, *wih = value(m, vals, "lwih")->data,
	             *whh = value(m, vals, "lwhh")->data, *bih = value(m, vals, "lbih")->data,
	             *bhh = value(m, vals, "lbhh")->data;
	for (int r = 0; r < 2; r++) {
		lstm_reference(x, T, N, F, H, wih, whh, bih, bhh, len, r, y);
		for (int i = 0; i < T * N * H; i++)
			CHECK_NEAR(o[r].data[i], y[i], 1e-13);
	}
	// The padding is exactly zero (packed-sequence semantics).
	CHECK(o[0].data[(4 * N + 1) * H] == 0 && o[1].data[(2 * N + 1) * H + 1] == 0);
	printf("deepspeech: lstm_direction (forward, reverse, lengths 5 2 4) = C reference\n");
	tm_free_out(g, o);
	free_values(m, vals);
	for (uint32_t d = 0; d < m->ndecl; d++)
		ir_tensor_free(&bound[d]);
	free(bound), free(isb);
	ir_module_free(m);
}

// The model's ctc_loss against ctc_reference, on unnormalised scores.
static void
ds_ctc(void)
{
	enum { T = 7, N = 4, C = 5, SM = 3 };
	static const char extra[] = "const clp: f32[7, 4, 5]\nconst ctg: f32[4, 3]\n"
	                            "const cin: f32[4]\nconst ctl: i64[4]\n"
	                            "def forward() {\n"
	                            "  return ctc_loss(clp, cast(ctg, dtype=i64), cin, ctl)\n}\n";
	Module *m = parse_model("deepspeech.ir", ds_defs, DS_NDEFS, extra);
	CHECK(m != NULL);
	if (!m)
		return;
	Tensor *bound = calloc(m->ndecl + 1, sizeof *bound);
	int *isb = calloc(m->ndecl + 1, sizeof *isb);
	double *lp = bind(m, bound, isb, "clp");
	for (int i = 0; i < T * N * C; i++)
		lp[i] = 1.5 * rnd_normal();
	// All blank (the benchmark's case), a repeat (no skip), a padded
	// target (length 2 of 3), distinct labels with a skip back to 4.
	static const int64_t tg[N * SM] = {0, 0, 0, 1, 1, 2, 2, 3, 4, 4, 1, 4};
	static const int in_len[N] = {7, 6, 5, 7}, tl[N] = {3, 3, 2, 3};
	double *t = bind(m, bound, isb, "ctg"), *il = bind(m, bound, isb, "cin"),
	       *tls = bind(m, bound, isb, "ctl");
	for (int i = 0; i < N * SM; i++)
		t[i] = (double)tg[i] + 0.25; // floats, truncated by the cast
	for (int n = 0; n < N; n++)
		il[n] = in_len[n], tls[n] = tl[n];
	Tensor *vals = init_values(m, bound, isb);
	double got = loss_at(m, vals);
	double want = ctc_reference(value(m, vals, "clp")->data, N, C, tg, SM, in_len, tl);
	CHECK_NEAR(got, want, 1e-12);
	printf("deepspeech: ctc_loss on random scores = %.15g, C reference %.15g\n", got, want);
	free_values(m, vals);
	for (uint32_t d = 0; d < m->ndecl; d++)
		ir_tensor_free(&bound[d]);
	free(bound), free(isb);
	ir_module_free(m);
}

static void
deepspeech(void)
{
	double t0 = now();
	Module *m = parse_model("deepspeech.ir", ds_defs, DS_NDEFS, NULL);
	CHECK(m != NULL);
	if (!m)
		return;
	Tensor *vals = init_values(m, NULL, NULL);
	const Tensor *lens = value(m, vals, "lengths"), *ol = value(m, vals, "out_lengths");
	int N = (int)lens->shape.dim[0], S = (int)value(m, vals, "targets")->shape.dim[1];
	int distinct = 0;
	for (int n = 0; n < N; n++) {
		double want = floor((floor(lens->data[n]) + 1) / 2);
		CHECK(ol->data[n] == want);
		CHECK(lens->data[n] >= 8 && lens->data[n] < 16); // LEN_LO + LEN_SPAN U
		distinct |= ol->data[n] != ol->data[0];
	}
	CHECK(distinct); // the lengths vary across the batch
	printf("deepspeech: out_lengths %g %g %g\n", ol->data[0], ol->data[1], ol->data[2]);
	double f = loss_at(m, vals), fr = ds_reference(m, vals);
	CHECK(isfinite(f));
	CHECK_NEAR(f, fr, 1e-11);
	printf("deepspeech: loss %.15g, C reference %.15g\n", f, fr);
	// Other run seeds: other data, parameters and lengths (T_max below
	// or at TPAD).
	for (uint64_t seed = 1; seed <= 3; seed++) {
		Tensor *sv = init_values_seed(m, NULL, NULL, seed);
		const double *l = value(m, sv, "out_lengths")->data;
		f = loss_at(m, sv), fr = ds_reference(m, sv);
		CHECK_NEAR(f, fr, 1e-11);
		printf("deepspeech: run seed %d: out_lengths %g %g %g: loss %.15g, C reference "
		       "%.15g\n",
		       (int)seed, l[0], l[1], l[2], f, fr);
		free_values(m, sv);
	}

	// Zero LSTM weights: h = 0 (i = f = o = 1/2, g = 0, so c = 0), the fc
	// BatchNorm of zeros gives its bias, 0, so every score is 0 and every
	// alignment has log probability 0, so nll_n = -log(#alignments).  The targets are all
	// blank, so the extended labels are 2S+1 blanks with no skips: a path
	// starts in state 0 or 1, ends in 2S or 2S-1 and moves by 0 or 1 per
	// step; summing over the four (start, end) pairs,
	//   C(L-1, 2S) + 2 C(L-1, 2S-1) + C(L-1, 2S-2) = C(L+1, 2S).
	Tensor *bound = calloc(m->ndecl + 1, sizeof *bound);
	int *isb = calloc(m->ndecl + 1, sizeof *isb);
	for (uint32_t d = 0; d < m->ndecl; d++)
		if (!strncmp(m->decl[d].name, "rnns.", 5) && strstr(m->decl[d].name, ".rnn."))
			bind(m, bound, isb, m->decl[d].name);
	Tensor *zv = init_values(m, bound, isb);
	double want = 0;
	for (int n = 0; n < N; n++)
		want += -log_choose(ol->data[n] + 1, 2 * S) / S;
	want /= N;
	double fz = loss_at(m, zv);
	CHECK_NEAR(fz, want, 1e-12);
	printf("deepspeech: zero LSTM weights: loss %.15g, closed form %.15g\n", fz, want);
	free_values(m, zv);
	for (uint32_t d = 0; d < m->ndecl; d++)
		ir_tensor_free(&bound[d]);
	free(bound), free(isb);

	ds_lstm();
	ds_ctc();
	check_vjp_fd("deepspeech", m, vals, 1e-5, 1e-6);
	free_values(m, vals);
	ir_module_free(m);
	printf("deepspeech: %.2f s\n", now() - t0);
}

// ---------------------------------------------------------------- detr

static const char *const detr_defs[] = {"IMG_H=64", "IMG_W=96", "WIDTH=4", "D=16", "NH=2",
                                        "FF=32",    "Q=6",      "NCLS=10", "T0=3", "T1=2"};
#define DETR_NDEFS ((int)(sizeof detr_defs / sizeof detr_defs[0]))
enum { DQ = 6, DNCLS = 10, DT0 = 3, DT1 = 2, DM = DT0 + DT1 };
// eos_coef 0.1, the "no object" weight, as the f32 model holds it.
#define EOS_COEF ((double)(float)0.1)

static void
xyxy(const double *b, double *o)
{
	o[0] = b[0] - 0.5 * b[2], o[1] = b[1] - 0.5 * b[3];
	o[2] = b[0] + 0.5 * b[2], o[3] = b[1] + 0.5 * b[3];
}

// GIoU of two cxcywh boxes (DETR's generalized_box_iou on xyxy).
static double
giou(const double *p, const double *q)
{
	double a[4], b[4];
	xyxy(p, a), xyxy(q, b);
	double area_a = (a[2] - a[0]) * (a[3] - a[1]), area_b = (b[2] - b[0]) * (b[3] - b[1]);
	double iw = fmax(0, fmin(a[2], b[2]) - fmax(a[0], b[0]));
	double ih = fmax(0, fmin(a[3], b[3]) - fmax(a[1], b[1]));
	double inter = iw * ih, uni = area_a + area_b - inter;
	double cw = fmax(0, fmax(a[2], b[2]) - fmin(a[0], b[0]));
	double ch = fmax(0, fmax(a[3], b[3]) - fmin(a[1], b[1]));
	return inter / uni - (cw * ch - uni) / (cw * ch);
}

// The targets of the module (labels0/1, boxes0/1) as arrays over M.
typedef struct Targets {
	int64_t label[DM];
	double box[DM][4];
} Targets;

static void
targets_of(const Module *m, const Tensor *vals, Targets *t)
{
	const Tensor *l0 = value(m, vals, "labels0"), *l1 = value(m, vals, "labels1");
	const Tensor *b0 = value(m, vals, "boxes0"), *b1 = value(m, vals, "boxes1");
	for (int j = 0; j < DM; j++) {
		t->label[j] = (int64_t)(j < DT0 ? l0->data[j] : l1->data[j - DT0]);
		for (int k = 0; k < 4; k++)
			t->box[j][k] = j < DT0 ? b0->data[j * 4 + k] : b1->data[(j - DT0) * 4 + k];
	}
}

// DETR's loss at predictions logits (2, Q, NCLS+1) and boxes (2, Q, 4),
// the matching found by trying every assignment of targets to queries.
// match[j] (if not NULL) gets target j's query.
static double
detr_reference(const double *logits, const double *boxes, const Targets *t, int *match)
{
	enum { NC = DNCLS + 1 };
	double logp[2 * DQ][NC];
	for (int q = 0; q < 2 * DQ; q++) {
		double mx = -INFINITY, s = 0;
		for (int c = 0; c < NC; c++)
			mx = fmax(mx, logits[q * NC + c]);
		for (int c = 0; c < NC; c++)
			s += exp(logits[q * NC + c] - mx);
		for (int c = 0; c < NC; c++)
			logp[q][c] = logits[q * NC + c] - mx - log(s);
	}
	int best[DM];
	for (int b = 0; b < 2; b++) {
		int lo = b ? DT0 : 0, nt = b ? DT1 : DT0;
		// Every injective map of the image's targets to its queries.
		int cur[DT0 > DT1 ? DT0 : DT1];
		double bestc = INFINITY;
		long total = 1;
		for (int j = 0; j < nt; j++)
			total *= DQ;
		for (long code = 0; code < total; code++) {
			long c = code;
			int ok = 1;
			for (int j = 0; j < nt; j++, c /= DQ) {
				cur[j] = (int)(c % DQ);
				for (int i = 0; i < j; i++)
					ok &= cur[i] != cur[j];
			}
			if (!ok)
				continue;
			double cost = 0;
			for (int j = 0; j < nt; j++) {
				int q = b * DQ + cur[j];
				double l1 = 0;
				for (int k = 0; k < 4; k++)
					l1 += fabs(boxes[q * 4 + k] - t->box[lo + j][k]);
				cost += 5 * l1 - exp(logp[q][t->label[lo + j]]) -
				        2 * giou(&boxes[q * 4], t->box[lo + j]);
			}
			if (cost < bestc) {
				bestc = cost;
				for (int j = 0; j < nt; j++)
					best[lo + j] = b * DQ + cur[j];
			}
		}
	}
	// loss_ce: weighted mean; loss_bbox, loss_giou over matched pairs.
	double num = 0, den = 0, l1 = 0, gi = 0;
	for (int q = 0; q < 2 * DQ; q++) {
		int y = DNCLS;
		for (int j = 0; j < DM; j++)
			if (best[j] == q)
				y = (int)t->label[j];
		double w = y == DNCLS ? EOS_COEF : 1;
		num += -w * logp[q][y];
		den += w;
	}
	for (int j = 0; j < DM; j++) {
		for (int k = 0; k < 4; k++)
			l1 += fabs(boxes[best[j] * 4 + k] - t->box[j][k]);
		gi += 1 - giou(&boxes[best[j] * 4], t->box[j]);
		if (match)
			match[j] = best[j] % DQ;
	}
	return num / den + 5 * l1 / DM + 2 * gi / DM;
}

// The model's hungarian_matcher and set_criterion on hand-made predictions.
static void
detr_criterion(void)
{
	static const char extra[] =
	    "const mlogits: f32[2, Q, NCLS + 1]\nconst mboxes: f32[2, Q, 4]\n"
	    "def forward() {\n"
	    "  i0, i1 = hungarian_matcher(mlogits, mboxes)\n"
	    "  return i0, i1, set_criterion(mlogits, mboxes)\n}\n";
	Module *m = parse_model("detr.ir", detr_defs, DETR_NDEFS, extra);
	CHECK(m != NULL);
	if (!m)
		return;
	// 1. A known assignment: distinct labels, every box the same, and one
	// query per target confident of that target's class; the class term of
	// the cost alone decides.
	Tensor *bound = calloc(m->ndecl + 1, sizeof *bound);
	int *isb = calloc(m->ndecl + 1, sizeof *isb);
	double *l0 = bind(m, bound, isb, "labels0"), *l1 = bind(m, bound, isb, "labels1");
	double *lg = bind(m, bound, isb, "mlogits"), *bx = bind(m, bound, isb, "mboxes");
	static const int lab0[DT0] = {5, 7, 9}, lab1[DT1] = {6, 8};
	static const int q0[DT0] = {4, 1, 2}, q1[DT1] = {5, 0};
	for (int j = 0; j < DT0; j++)
		l0[j] = lab0[j], lg[(0 * DQ + q0[j]) * (DNCLS + 1) + lab0[j]] = 8;
	for (int j = 0; j < DT1; j++)
		l1[j] = lab1[j], lg[(1 * DQ + q1[j]) * (DNCLS + 1) + lab1[j]] = 8;
	for (int q = 0; q < 2 * DQ; q++)
		bx[q * 4 + 0] = bx[q * 4 + 1] = 0.5, bx[q * 4 + 2] = bx[q * 4 + 3] = 0.2;
	Tensor *vals = init_values(m, bound, isb);
	Graph *g;
	Tensor *o = tm_run_task(m, "forward", vals, NULL, NULL, 0, &g);
	CHECK(o[0].dtype == DT_I64 && o[0].shape.dim[0] == DT0 && o[1].shape.dim[0] == DT1);
	for (int j = 0; j < DT0; j++)
		CHECK(o[0].data[j] == q0[j]);
	for (int j = 0; j < DT1; j++)
		CHECK(o[1].data[j] == q1[j]);
	Targets t;
	targets_of(m, vals, &t);
	CHECK_NEAR(o[2].data[0],
	           detr_reference(value(m, vals, "mlogits")->data, value(m, vals, "mboxes")->data,
	                          &t, NULL),
	           1e-12);
	printf("detr: hungarian_matcher on a hand-made cost: queries %g %g %g | %g %g\n",
	       o[0].data[0], o[0].data[1], o[0].data[2], o[1].data[0], o[1].data[1]);
	tm_free_out(g, o);
	free_values(m, vals);

	// 2. Random predictions, the model's own targets: the matching and the
	// loss against brute force.  Boxes near the targets' scale so that
	// the GIoU term is not constant.
	isb[ir_module_find_decl(m, "labels0")] = isb[ir_module_find_decl(m, "labels1")] = 0;
	for (int trial = 0; trial < 3; trial++) {
		for (int i = 0; i < 2 * DQ * (DNCLS + 1); i++)
			lg[i] = 2 * rnd_normal();
		for (int i = 0; i < 2 * DQ * 4; i++)
			bx[i] = trial < 2 ? rnd() : 100 + 700 * rnd();
		vals = init_values(m, bound, isb);
		o = tm_run_task(m, "forward", vals, NULL, NULL, 0, &g);
		targets_of(m, vals, &t);
		int match[DM];
		double want = detr_reference(value(m, vals, "mlogits")->data,
		                             value(m, vals, "mboxes")->data, &t, match);
		for (int j = 0; j < DM; j++)
			CHECK(o[j < DT0 ? 0 : 1].data[j < DT0 ? j : j - DT0] == match[j]);
		CHECK_NEAR(o[2].data[0], want, 1e-12);
		printf("detr: set_criterion on random predictions (%d): %.15g, C reference %.15g\n",
		       trial, o[2].data[0], want);
		tm_free_out(g, o);
		free_values(m, vals);
	}
	for (uint32_t d = 0; d < m->ndecl; d++)
		ir_tensor_free(&bound[d]);
	free(bound), free(isb);
	ir_module_free(m);
}

// J t by the jvp task, tangents tv named tn.
static double
jvp_at(const Module *m, Tensor *vals, const char *const *tn, const Tensor *tv, int np)
{
	Graph *g;
	Tensor *o = tm_run_task(m, "jvp", vals, tn, tv, np, &g);
	double jt = o[1].data[0];
	tm_free_out(g, o);
	return jt;
}

// vhp (reverse over reverse) and hvp (forward over reverse) along t: equal
// (H is symmetric), and <t, H t> against the central difference of
// J t = <grad, t> (jvp at x +- h t); jt is J t at x.  The model is f32, and
// the constants that derivative rules create (the 1/n of mean's rule ...)
// are f32 too, so the two strategies, which create different ones, agree
// to f32 rounding (3e-8 here; 1e-15 with the model edited to f64).
static void
detr_second_order(const Module *m, Tensor *vals, const char *const *tn, const Tensor *tv, int np,
                  const Tensor *dir, double jt)
{
	char why[512];
	Graph *g1, *g2;
	Tensor *vh = tm_run_task_why(m, "vhp", vals, tn, tv, np, 0, why, sizeof why, &g1);
	if (!vh) {
		printf("detr: note: vhp checks skipped: %s\n", why);
		return;
	}
	Tensor *hv = tm_run_task_why(m, "hvp", vals, tn, tv, np, 0, why, sizeof why, &g2);
	if (!hv) {
		printf("detr: note: hvp checks skipped: %s\n", why);
		tm_free_out(g1, vh);
		return;
	}
	double diff = 0, norm = 0, tht = 0;
	for (int p = 0; p < np; p++)
		for (int64_t i = 0; i < ir_numel(&tv[p].shape); i++) {
			diff += fabs(vh[1 + p].data[i] - hv[1 + p].data[i]);
			norm += fabs(hv[1 + p].data[i]);
			tht += tv[p].data[i] * vh[1 + p].data[i];
		}
	tu_ncheck++;
	if (!(diff <= 1e-6 * norm)) {
		tu_nfail++;
		fprintf(stderr, "detr: vhp and hvp differ: sum |vhp - hvp| = %g, sum |hvp| = %g\n",
		        diff, norm);
	}
	// J t at x + h t and x - h t.
	double best = INFINITY, fd_best = 0;
	for (double h = 1e-5; h > 1e-7; h /= 10) {
		shift(m, vals, dir, -1, h);
		double jp = jvp_at(m, vals, tn, tv, np);
		shift(m, vals, dir, -1, -2 * h);
		double jm = jvp_at(m, vals, tn, tv, np);
		shift(m, vals, dir, -1, h);
		double fd = (jp - jm) / (2 * h);
		if (tu_relerr(tht, fd, 1e-300) < best)
			best = tu_relerr(tht, fd, 1e-300), fd_best = fd;
	}
	tu_ncheck++;
	if (!(best <= 1e-5)) {
		tu_nfail++;
		fprintf(stderr,
		        "detr: <t, H t> = %.17g, central difference of J t %.17g (err %.2g)\n", tht,
		        fd_best, best);
	}
	printf("detr: vhp = hvp (sum |difference| %.2g of %.2g); <t, H t> = %.15g, central "
	       "difference of J t %.15g (J t = %.6g)\n",
	       diff, norm, tht, fd_best, jt);
	tm_free_out(g1, vh);
	tm_free_out(g2, hv);
}

// jvp against vjp (adjoint identity) and against a central difference.
static void
detr_derivatives(const Module *m, Tensor *vals)
{
	char why[512];
	uint32_t np = 0;
	for (uint32_t d = 0; d < m->ndecl; d++)
		np += m->decl[d].kind == DECL_PARAM;
	const char **tn = calloc(np + 1, sizeof *tn);
	char **names = calloc(np + 1, sizeof *names);
	Tensor *tv = calloc(np + 1, sizeof *tv);         // by param: the tasks' inputs
	Tensor *dir = calloc(m->ndecl + 1, sizeof *dir); // the same, by declaration
	uint32_t p = 0;
	for (uint32_t d = 0; d < m->ndecl; d++) {
		if (m->decl[d].kind != DECL_PARAM)
			continue;
		size_t n = strlen(m->decl[d].name) + 3;
		names[p] = malloc(n);
		snprintf(names[p], n, "v.%s", m->decl[d].name);
		tn[p] = names[p];
		ir_tensor_alloc(&tv[p], m->decl[d].dtype, &m->decl[d].shape);
		for (int64_t i = 0; i < ir_numel(&m->decl[d].shape); i++)
			tv[p].data[i] = rnd_normal() * fmax(0.05, fabs(vals[d].data[i]));
		dir[d] = tv[p++];
	}
	Graph *gj, *gv;
	Tensor *jo = tm_run_task_why(m, "jvp", vals, tn, tv, (int)np, 0, why, sizeof why, &gj);
	if (!jo)
		printf("detr: note: jvp checks skipped: %s\n", why);
	Tensor v;
	Shape s0 = {0};
	ir_tensor_alloc(&v, loss_dtype(m), &s0);
	v.data[0] = 0.75;
	const char *vn[] = {"v"};
	Tensor *vo = tm_run_task_why(m, "vjp", vals, vn, &v, 1, 0, why, sizeof why, &gv);
	if (!vo)
		printf("detr: note: vjp checks skipped: %s\n", why);
	if (jo && vo) {
		double dot = 0, scale = 0;
		for (p = 0; p < np; p++)
			for (int64_t i = 0; i < ir_numel(&tv[p].shape); i++) {
				dot += vo[1 + p].data[i] * tv[p].data[i];
				scale += fabs(vo[1 + p].data[i] * tv[p].data[i]);
			}
		double jt = jo[1].data[0];
		double err = fabs(0.75 * jt - dot) / fmax(fabs(0.75 * jt), scale);
		tu_ncheck++;
		if (!(err <= 1e-8)) {
			tu_nfail++;
			fprintf(stderr, "detr: <v, J t> = %.17g, <J^T v, t> = %.17g (err %.2g)\n",
			        0.75 * jt, dot, err);
		}
		CHECK_NEAR(jo[0].data[0], vo[0].data[0], 1e-12);
		printf("detr: <v, J t> = %.15g, <J^T v, t> = %.15g, normalized error %.2g\n",
		       0.75 * jt, dot, err);
	}
	if (jo) {
		// The loss is piecewise smooth (ReLU, max-pool and clamp in a tiny
		// backbone, so kinks are dense) and of size 1e4 (pixel-unit
		// boxes): a step can straddle a kink, and a smaller one loses
		// digits (|f| eps / h is 1e-6 of J t at h = 1e-7).  Two steps;
		// the better must agree.
		double best = INFINITY, fd_best = 0;
		for (double h = 1e-6; h > 1e-8; h /= 10) {
			double fd = central_difference(m, vals, dir, -1, h);
			if (tu_relerr(jo[1].data[0], fd, 1e-300) < best)
				best = tu_relerr(jo[1].data[0], fd, 1e-300), fd_best = fd;
		}
		tu_ncheck++;
		if (!(best <= 1e-5)) {
			tu_nfail++;
			fprintf(stderr, "detr: J t = %.17g, central difference %.17g (err %.2g)\n",
			        jo[1].data[0], fd_best, best);
		}
		printf("detr: J t = %.15g, central difference %.15g\n", jo[1].data[0], fd_best);
	}
	if (jo)
		detr_second_order(m, vals, tn, tv, (int)np, dir, jo[1].data[0]);
	if (jo)
		tm_free_out(gj, jo);
	if (vo)
		tm_free_out(gv, vo);
	ir_tensor_free(&v);
	for (p = 0; p < np; p++)
		ir_tensor_free(&tv[p]), free(names[p]);
	free(tv), free(tn), free(names), free(dir);
}

static void
detr(void)
{
	double t0 = now();
	Module *m = parse_model("detr.ir", detr_defs, DETR_NDEFS, NULL);
	CHECK(m != NULL);
	if (!m)
		return;
	Tensor *vals = init_values(m, NULL, NULL);
	// Targets as §2.3 draws them: labels in [5, 10), boxes integers in
	// [100, 800) with col0 <= col2 and col1 <= col3.
	Targets t;
	targets_of(m, vals, &t);
	const Tensor *raw[2] = {value(m, vals, "boxes0_raw"), value(m, vals, "boxes1_raw")};
	for (int j = 0; j < DM; j++) {
		const double *r = &raw[j >= DT0]->data[(j >= DT0 ? j - DT0 : j) * 4];
		CHECK(t.label[j] >= 5 && t.label[j] <= 9);
		for (int k = 0; k < 4; k++)
			CHECK(r[k] == floor(r[k]) && r[k] >= 100 && r[k] < 800);
		// PyTorch's tuple "swap" of tensor elements (see the model).
		CHECK(t.box[j][0] == fmin(r[0], r[2]) && t.box[j][2] == r[2]);
		CHECK(t.box[j][1] == fmin(r[1], r[3]) && t.box[j][3] == r[3]);
	}
	double f = loss_at(m, vals);
	CHECK(isfinite(f));
	printf("detr: loss %.15g\n", f);

	// Both head weights zero: every query predicts logits b_cls and box
	// sigmoid(b_box), so any matching is optimal and the loss is
	//   (sum_j nll(y_j) + 0.1 (2Q - M) nll(no object)) / (M + 0.1 (2Q - M))
	//   + 5/M sum_j |box - tgt_j|_1 + 2/M sum_j (1 - GIoU(box, tgt_j)).
	Tensor *bound = calloc(m->ndecl + 1, sizeof *bound);
	int *isb = calloc(m->ndecl + 1, sizeof *isb);
	bind(m, bound, isb, "linear_class.weight");
	bind(m, bound, isb, "linear_bbox.weight");
	Tensor *zv = init_values(m, bound, isb);
	const double *bc = value(m, zv, "linear_class.bias")->data,
	             *bb = value(m, zv, "linear_bbox.bias")->data;
	double mx = -INFINITY, s = 0, box[4];
	for (int c = 0; c <= DNCLS; c++)
		mx = fmax(mx, bc[c]);
	for (int c = 0; c <= DNCLS; c++)
		s += exp(bc[c] - mx);
	double lse = mx + log(s), num = EOS_COEF * (2 * DQ - DM) * (lse - bc[DNCLS]), l1 = 0,
	       gi = 0;
	for (int k = 0; k < 4; k++)
		box[k] = sigm(bb[k]);
	for (int j = 0; j < DM; j++) {
		num += lse - bc[t.label[j]];
		for (int k = 0; k < 4; k++)
			l1 += fabs(box[k] - t.box[j][k]);
		gi += 1 - giou(box, t.box[j]);
	}
	double want = num / (DM + EOS_COEF * (2 * DQ - DM)) + 5 * l1 / DM + 2 * gi / DM;
	double fz = loss_at(m, zv);
	CHECK_NEAR(fz, want, 1e-12);
	printf("detr: zero head weights: loss %.15g, closed form %.15g\n", fz, want);
	free_values(m, zv);
	for (uint32_t d = 0; d < m->ndecl; d++)
		ir_tensor_free(&bound[d]);
	free(bound), free(isb);

	detr_criterion();
	detr_derivatives(m, vals);
	free_values(m, vals);
	ir_module_free(m);
	printf("detr: %.2f s\n", now() - t0);
}

int
main(void)
{
	double t0 = now();
	check_params("deepspeech.ir", "deepspeech.tsv");
	check_params("detr.ir", "detr.tsv");
	printf("parameter lists: %.2f s\n", now() - t0);
	deepspeech();
	detr();
	printf("test_zoo_b: %.2f s\n", now() - t0);
	return TU_DONE("test_zoo_b");
}
