// tests/unit/test_models.c -- the PPL models against an independent
// float64 computation.
//
// Each model file is parsed (at its default sizes and at reduced ones, via
// FeOptions.defines), its constants and parameters come from
// ir_module_init (seeded), and the forward graph run by ir_interp is
// compared with the model's formula written out here in C with doubles:
// loops over i and k, lgamma from libm, xlogy and softplus by hand.  The
// tolerance is 1e-12 relative.  Also checked: the parameter list against
// the benchmark's table (shared/reference/params/ppl_*.tsv), the constants'
// range, run-seed behaviour, and closed forms at bound parameter values.
//
// One subtlety.  The models are f32, and a number in an f32 expression
// becomes an f32 `full` (the frontend's weak scalars, as PyTorch's Python
// scalars), so the prelude's literal log sqrt(2 pi) = 0.9189385332046727
// is used as float(0.9189385332046727), 1.6e-8 smaller (and log(pi)/2 as
// a float, 1.7e-8 smaller); the interpreter otherwise computes in double.
// The hand computation therefore uses the f32-rounded literals, and one
// check per model shows that the result differs from the exact-constant
// formula by that rounding alone.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "frontend.h"
#include "ir.h"
#include "passes.h"
#include "testutil.h"

static const double PI = 3.14159265358979323846;

// The prelude's constants as the f32 model sees them (see above).
#define LOG_SQRT_2PI_F32 ((double)(float)0.9189385332046727) // log sqrt(2 pi)
#define HALF_LOG_PI_F32 ((double)(float)0.5723649429247001) // log(pi) / 2
#define FLT_TINY 0x1p-126 // torch.finfo(torch.float32).tiny

// ---------------------------------------------------------------- helpers

// A parsed model with the values of its declarations.
typedef struct Model {
	Module *m;
	Tensor *val; // val[m->ndecl], from ir_module_init
	int64_t n, k; // the sizes N and K
} Model;

static Module *
parse(const char *file, int64_t n, int64_t k)
{
	const char *dir = getenv("FADC_SOURCE_DIR");
	char path[1024], dn[32], dk[32];
	snprintf(path, sizeof path, "%s/models/%s", dir ? dir : ".", file);
	snprintf(dn, sizeof dn, "N=%lld", (long long)n);
	snprintf(dk, sizeof dk, "K=%lld", (long long)k);
	const char *defs[2] = {dn, dk};
	FeOptions o = {.defines = defs, .ndefines = 2, .diag = stderr};
	return fe_parse_file(path, &o);
}

// Parses and initialises; bound[] (by declaration index) may be NULL.
static int
load(Model *md, const char *file, int64_t n, int64_t k, const Tensor *bound, const int *isbound,
     uint64_t runseed)
{
	char err[512];
	memset(md, 0, sizeof *md);
	md->n = n;
	md->k = k;
	md->m = parse(file, n, k);
	CHECK(md->m != NULL);
	if (!md->m)
		return 0;
	md->val = calloc(md->m->ndecl, sizeof *md->val);
	if (!ir_module_init(md->m, bound, isbound, md->val, runseed, err, sizeof err)) {
		fprintf(stderr, "%s: ir_module_init: %s\n", file, err);
		CHECK(!"ir_module_init failed");
		free(md->val);
		ir_module_free(md->m);
		md->m = NULL;
		return 0;
	}
	return 1;
}

// As load(), with the first nb of names[] bound to tensors (rows[j], 1)
// filled with fillv[j].
static int
load_bound(Model *md, const char *file, int64_t n, int64_t k, const char *const *names,
           const double *fillv, const int64_t *rows, int nb)
{
	Module *m = parse(file, n, k);
	CHECK(m != NULL);
	if (!m)
		return 0;
	int nd = (int)m->ndecl;
	Tensor *bound = calloc((size_t)nd, sizeof *bound);
	int *isbound = calloc((size_t)nd, sizeof *isbound);
	for (int j = 0; j < nb; j++) {
		int kd = ir_module_find_decl(m, names[j]);
		Shape s = {.rank = 2, .dim = {rows[j], 1}};
		CHECK(kd >= 0);
		if (kd < 0 || !ir_tensor_alloc(&bound[kd], DT_F32, &s))
			continue;
		for (int64_t i = 0; i < rows[j]; i++)
			bound[kd].data[i] = fillv[j];
		isbound[kd] = 1;
	}
	ir_module_free(m);
	int ok = load(md, file, n, k, bound, isbound, 0);
	for (int i = 0; i < nd; i++)
		ir_tensor_free(&bound[i]);
	free(bound);
	free(isbound);
	return ok;
}

static void
unload(Model *md)
{
	if (!md->m)
		return;
	for (uint32_t i = 0; i < md->m->ndecl; i++)
		ir_tensor_free(&md->val[i]);
	free(md->val);
	ir_module_free(md->m);
	md->m = NULL;
}

// The value of declaration `name`, checked to have the given shape.
static const double *
get(const Model *md, const char *name, int64_t d0, int64_t d1)
{
	int k = ir_module_find_decl(md->m, name);
	CHECK(k >= 0);
	if (k < 0)
		return NULL;
	const Tensor *t = &md->val[k];
	int ok = t->shape.rank == 2 && t->shape.dim[0] == d0 && t->shape.dim[1] == d1;
	CHECK(ok);
	return ok ? t->data : NULL;
}

// Runs forward on the declaration values; returns its 0-dim output.
static double
run_forward(const Model *md)
{
	const Graph *g = md->m->main;
	Tensor *in = calloc(g->ninput, sizeof *in), out;
	for (uint32_t i = 0; i < g->ninput; i++) {
		int k = ir_module_find_decl(md->m, g->input[i].name);
		CHECK(k >= 0);
		in[i] = md->val[k]; // shallow: forward only reads its inputs
	}
	char err[512];
	double r = NAN;
	CHECK(g->nout == 1);
	if (ir_interp(g, in, &out, 0, err, sizeof err)) {
		CHECK(out.dtype == DT_F32 && out.shape.rank == 0);
		CHECK_STR(g->out[0].name, "out");
		r = out.data[0];
		ir_tensor_free(&out);
	} else {
		fprintf(stderr, "ir_interp: %s\n", err);
		CHECK(!"ir_interp failed");
	}
	free(in);
	return r;
}

static double
xlogy(double x, double y)
{
	return x == 0 ? 0 : x * log(y);
}

static double
softplus(double x)
{
	// log(1 + e^x) = max(x, 0) + log1p(e^-|x|)
	return fmax(x, 0) + log1p(exp(-fabs(x)));
}

// mu = X beta, X (n, k1) row-major, beta (k1, 1).
static void
matvec(const double *x, const double *beta, int64_t n, int64_t k1, double *mu)
{
	for (int64_t i = 0; i < n; i++) {
		mu[i] = 0;
		for (int64_t j = 0; j < k1; j++)
			mu[i] += x[i * k1 + j] * beta[j];
	}
}

// ---------------------------------------------------------------- parameter tables

// The differentiated inputs, in order, from shared/reference/params/*.tsv
// (index, name, shape, numel) at N = K = 10.
typedef struct ParamRow {
	const char *name;
	int64_t d0, d1, numel;
} ParamRow;

static const ParamRow simple_params[] = {
	{"beta_value", 11, 1, 11}, // ppl_simple_reg.tsv: 0 beta_value 11x1 11
};

static const ParamRow robust_params[] = {
	{"nu_value", 1, 1, 1}, // ppl_robust_reg.tsv: 0 nu_value 1x1 1
	{"sigma_unconstrained_value", 10, 1, 10}, // 1 sigma_unconstrained_value 10x1 10
	{"beta_value", 11, 1, 11}, // 2 beta_value 11x1 11 (total 3 tensors, 22 scalars)
};

// Forward's parameter inputs, in order, equal the table; they come first
// among its inputs, and equal the module's parameter declarations.
static void
check_params(const Module *m, const ParamRow *row, int nrow, int64_t total)
{
	const Graph *g = m->main;
	int np = 0;
	int64_t scalars = 0;
	for (uint32_t i = 0; i < g->ninput; i++) {
		if (g->input[i].kind != IN_PARAM)
			continue;
		CHECK((int)i == np); // parameters before constants
		if (np >= nrow) {
			CHECK(!"more parameters than the table");
			break;
		}
		const Shape *s = ir_shape(g, g->input[i].node);
		CHECK_STR(g->input[i].name, row[np].name);
		CHECK(s->rank == 2 && s->dim[0] == row[np].d0 && s->dim[1] == row[np].d1);
		CHECK(ir_numel(s) == row[np].numel);
		CHECK(g->node[g->input[i].node].dtype == DT_F32);
		scalars += ir_numel(s);
		np++;
	}
	CHECK(np == nrow);
	CHECK(scalars == total);
	int ndeclparam = 0;
	for (uint32_t i = 0; i < m->ndecl; i++)
		if (m->decl[i].kind == DECL_PARAM && ndeclparam < nrow)
			CHECK_STR(m->decl[i].name, row[ndeclparam++].name);
	CHECK(ndeclparam == nrow);
}

// Every constant is U[0, 1) (torch.rand) and has an initializer.
static void
check_consts(const Model *md)
{
	for (uint32_t i = 0; i < md->m->ndecl; i++) {
		if (md->m->decl[i].kind != DECL_CONST)
			continue;
		const Tensor *t = &md->val[i];
		int64_t n = ir_numel(&t->shape), bad = 0;
		CHECK(md->m->decl[i].init != NULL);
		for (int64_t j = 0; j < n; j++)
			bad += !(t->data[j] >= 0 && t->data[j] < 1);
		CHECK(n > 0 && bad == 0);
	}
}

// The same run seed gives the same values bit for bit; another run seed
// changes every declaration (each has at least one element that differs).
static void
check_seeds(const char *file, int64_t n, int64_t k)
{
	Model a, b, c;
	if (!load(&a, file, n, k, NULL, NULL, 0))
		return;
	if (load(&b, file, n, k, NULL, NULL, 0)) {
		for (uint32_t i = 0; i < a.m->ndecl; i++) {
			size_t bytes = (size_t)ir_numel(&a.val[i].shape) * sizeof(double);
			CHECK(!memcmp(a.val[i].data, b.val[i].data, bytes));
		}
		unload(&b);
	}
	if (load(&c, file, n, k, NULL, NULL, 12345)) {
		for (uint32_t i = 0; i < a.m->ndecl; i++) {
			size_t bytes = (size_t)ir_numel(&a.val[i].shape) * sizeof(double);
			CHECK(memcmp(a.val[i].data, c.val[i].data, bytes) != 0);
		}
		unload(&c);
	}
	unload(&a);
}

// ---------------------------------------------------------------- ppl_simple_reg

// score = sum_i [y_i mu_i - softplus(mu_i)] + sum_k [-beta_k^2 / 2 - log sqrt(2 pi)],
// mu = X beta (models-spec.md §3.1).  c is the log sqrt(2 pi) used.
static double
simple_formula(const Model *md, double c)
{
	int64_t n = md->n, k1 = md->k + 1;
	const double *x = get(md, "X", n, k1), *y = get(md, "Y", n, 1);
	const double *beta = get(md, "beta_value", k1, 1);
	if (!x || !y || !beta)
		return NAN;
	double *mu = malloc(sizeof(double) * (size_t)n), s = 0;
	matvec(x, beta, n, k1, mu);
	for (int64_t i = 0; i < n; i++)
		s += y[i] * mu[i] - softplus(mu[i]);
	for (int64_t j = 0; j < k1; j++)
		s += -beta[j] * beta[j] / 2 - c;
	free(mu);
	return s;
}

static void
test_simple(int64_t n, int64_t k)
{
	Model md;
	if (!load(&md, "ppl_simple_reg.ir", n, k, NULL, NULL, 0))
		return;
	double got = run_forward(&md);
	double want = simple_formula(&md, LOG_SQRT_2PI_F32);
	CHECK_NEAR(got, want, 1e-12);
	// Exact constant: off by the f32 rounding of the literal alone,
	// (K + 1) * 1.6e-8.
	CHECK(fabs(got - simple_formula(&md, 0.5 * log(2 * PI))) < (double)(k + 1) * 2e-8);
	check_consts(&md);
	unload(&md);

	// beta = 0 gives mu = 0, so each Bernoulli term is y*0 - softplus(0) =
	// -log 2 and each prior term is -0/2 - log sqrt(2 pi):
	//   score = -N log 2 - (K + 1) log sqrt(2 pi).
	static const char *const names[1] = {"beta_value"};
	const double zero[1] = {0};
	const int64_t rows[1] = {k + 1};
	Model m0;
	if (load_bound(&m0, "ppl_simple_reg.ir", n, k, names, zero, rows, 1)) {
		double want0 = -(double)n * log(2.0) - (double)(k + 1) * LOG_SQRT_2PI_F32;
		CHECK_NEAR(run_forward(&m0), want0, 1e-12);
		unload(&m0);
	}
}

// ---------------------------------------------------------------- ppl_robust_reg

// models-spec.md §3.2, with sigma = e^s, mu = X beta, z_i = (y_i - mu_i) / sigma_i:
//   LL  = sum_i [ -(nu + 1)/2 log1p(z_i^2 / nu)
//                 - (log sigma_i + log(nu)/2 + log(pi)/2 + lgamma(nu/2) - lgamma((nu + 1)/2)) ]
//   out = (1 + N + (K + 1)) LL + log Gamma(nu | a, b)
//         + sum_i [log Exp(sigma_i | lambda_i) + s_i] + sum_k log Normal(beta_k | m_k, tau_k)
// hlp is the log(pi)/2 used, c the log sqrt(2 pi).
static double
robust_formula(const Model *md, double hlp, double c)
{
	int64_t n = md->n, k1 = md->k + 1;
	const double *x = get(md, "X", n, k1), *y = get(md, "Y", n, 1);
	const double *alpha = get(md, "nu_alpha", 1, 1), *b = get(md, "nu_beta", 1, 1);
	const double *lambda = get(md, "sigma_rate", n, 1);
	const double *m = get(md, "beta_mean", k1, 1), *tau = get(md, "beta_sigma", k1, 1);
	const double *nup = get(md, "nu_value", 1, 1);
	const double *s = get(md, "sigma_unconstrained_value", n, 1);
	const double *beta = get(md, "beta_value", k1, 1);
	if (!x || !y || !alpha || !b || !lambda || !m || !tau || !nup || !s || !beta)
		return NAN;
	double nu = nup[0], *mu = malloc(sizeof(double) * (size_t)n);
	matvec(x, beta, n, k1, mu);
	double ll = 0;
	for (int64_t i = 0; i < n; i++) {
		double sigma = exp(s[i]), z = (y[i] - mu[i]) / sigma;
		ll += -(nu + 1) / 2 * log1p(z * z / nu) -
		      (log(sigma) + log(nu) / 2 + hlp + lgamma(nu / 2) - lgamma((nu + 1) / 2));
	}
	double lgam = xlogy(alpha[0], b[0]) + xlogy(alpha[0] - 1, nu) - b[0] * nu - lgamma(alpha[0]);
	double lexp = 0;
	for (int64_t i = 0; i < n; i++)
		lexp += log(lambda[i]) - lambda[i] * exp(s[i]) + s[i];
	double lnorm = 0;
	for (int64_t j = 0; j < k1; j++) {
		double d = beta[j] - m[j];
		lnorm += -d * d / (2 * tau[j] * tau[j]) - log(tau[j]) - c;
	}
	free(mu);
	return (double)(1 + n + k1) * ll + lgam + lexp + lnorm;
}

static void
test_robust(int64_t n, int64_t k)
{
	Model md;
	if (!load(&md, "ppl_robust_reg.ir", n, k, NULL, NULL, 0))
		return;
	double got = run_forward(&md);
	CHECK(isfinite(got));
	CHECK_NEAR(got, robust_formula(&md, HALF_LOG_PI_F32, LOG_SQRT_2PI_F32), 1e-12);
	// Exact constants: off by the literals' f32 rounding alone, below
	// 1e-7 for each of the (1 + N + K + 1) N + K + 1 terms holding one.
	double exact = robust_formula(&md, 0.5 * log(PI), 0.5 * log(2 * PI));
	CHECK(fabs(got - exact) < 1e-7 * (double)((1 + n + k + 1) * n + k + 1));
	// Initial values: nu >= 2^-126 (Gamma, clamped), sigma = e^s > 0 so s finite.
	const double *nu = get(&md, "nu_value", 1, 1);
	const double *s = get(&md, "sigma_unconstrained_value", n, 1);
	CHECK(nu && nu[0] >= FLT_TINY);
	for (int64_t i = 0; s && i < n; i++)
		CHECK(isfinite(s[i]));
	check_consts(&md);
	unload(&md);

	// nu = 1, s = 0 (sigma = 1), beta = 0 (mu = 0): z = y and StudentT(1)
	// is the Cauchy density, since lgamma(1/2) = log sqrt(pi), lgamma(1) = 0:
	//   -log1p(y^2) - (0 + 0 + log(pi)/2 + log(pi)/2 - 0) = -log1p(y^2) - log pi
	// log Gamma(1 | a, b) = a log b + 0 - b - lgamma(a); log Exp(1 | l) + 0 =
	// log l - l; log Normal(0 | m, t) = -m^2 / (2 t^2) - log t - log sqrt(2 pi).
	const char *names[4] = {"nu_value", "sigma_unconstrained_value", "beta_value", "Y"};
	const double fillv[4] = {1, 0, 0, 0};
	const int64_t rows[4] = {1, n, k + 1, n};
	Model m1;
	if (!load_bound(&m1, "ppl_robust_reg.ir", n, k, names, fillv, rows, 3))
		return;
	const double *y = get(&m1, "Y", n, 1), *a = get(&m1, "nu_alpha", 1, 1);
	const double *b = get(&m1, "nu_beta", 1, 1), *l = get(&m1, "sigma_rate", n, 1);
	const double *mm = get(&m1, "beta_mean", k + 1, 1), *t = get(&m1, "beta_sigma", k + 1, 1);
	double out1 = run_forward(&m1), sum_log1p = 0;
	if (y && a && b && l && mm && t) {
		// log pi enters as the model's f32 literal log(pi)/2 plus lgamma(1/2).
		double ll = 0, want = a[0] * log(b[0]) - b[0] - lgamma(a[0]);
		for (int64_t i = 0; i < n; i++) {
			sum_log1p += log1p(y[i] * y[i]);
			ll += -log1p(y[i] * y[i]) - (HALF_LOG_PI_F32 + 0.5 * log(PI));
			want += log(l[i]) - l[i];
		}
		for (int64_t j = 0; j <= k; j++)
			want += -mm[j] * mm[j] / (2 * t[j] * t[j]) - log(t[j]) - LOG_SQRT_2PI_F32;
		want += (double)(1 + n + k + 1) * ll;
		CHECK_NEAR(out1, want, 1e-12);
	}
	unload(&m1);

	// A concentration of 1e-9 makes the Gamma draw underflow (a Gamma(a)
	// variate is about U^(1/a)): nu is clamped to 2^-126, as torch's
	// Gamma.rsample clamps to finfo.tiny, and the score stays finite.
	static const char *const tiny_names[1] = {"nu_alpha"};
	const double tiny_alpha[1] = {(double)(float)1e-9};
	const int64_t one[1] = {1};
	Model m3;
	if (load_bound(&m3, "ppl_robust_reg.ir", n, k, tiny_names, tiny_alpha, one, 1)) {
		const double *nu3 = get(&m3, "nu_value", 1, 1);
		CHECK(nu3 && nu3[0] == FLT_TINY);
		double got3 = run_forward(&m3);
		CHECK(isfinite(got3));
		CHECK_NEAR(got3, robust_formula(&m3, HALF_LOG_PI_F32, LOG_SQRT_2PI_F32), 1e-12);
		unload(&m3);
	}

	// The factor of LL, measured: Y enters through LL alone, and at the
	// values above Y = 0 changes LL by sum_i log1p(y_i^2), so the output
	// moves by (1 + N + (K + 1)) times that: 22 at N = K = 10.
	Model m2;
	if (!load_bound(&m2, "ppl_robust_reg.ir", n, k, names, fillv, rows, 4))
		return;
	double factor = (run_forward(&m2) - out1) / sum_log1p;
	CHECK_NEAR(factor, (double)(1 + n + k + 1), 1e-9);
	unload(&m2);
}

// Every model's `tasks` declaration is its task list in bench/bench.yaml
// (models-spec.md §1.2, as the benchmark runs it), and the frontend's
// list of task names is passes/tasks.c's.
static void
test_declared_tasks(void)
{
	int n = 0;
	for (; fe_task_names[n]; n++)
		CHECK(fadc_tasks[n] && !strcmp(fe_task_names[n], fadc_tasks[n]));
	CHECK(fadc_tasks[n] == NULL);
	const char *dir = getenv("FADC_SOURCE_DIR");
	char path[1024], err[512];
	snprintf(path, sizeof path, "%s/bench/bench.yaml", dir ? dir : ".");
	static BenchConfig c;
	CHECK(bench_config_load(path, &c, err, sizeof err) == 0);
	CHECK(c.nmodel == 9);
	for (int i = 0; i < c.nmodel; i++) {
		const BenchModel *bm = &c.model[i];
		snprintf(path, sizeof path, "%s/models/%s.ir", dir ? dir : ".", bm->name);
		FeOptions o = {.diag = stderr};
		Module *m = fe_parse_file(path, &o);
		CHECK(m != NULL);
		if (!m)
			continue;
		int same = (int)m->ntasks == bm->ntasks;
		for (int k = 0; same && k < bm->ntasks; k++)
			same = !strcmp(m->tasks[k], bm->tasks[k]);
		tu_ncheck++;
		if (!same) {
			tu_nfail++;
			fprintf(stderr, "%s: declares %u tasks, bench.yaml lists %d (or they differ)\n",
			        bm->name, m->ntasks, bm->ntasks);
		}
		ir_module_free(m);
	}
}

int
main(void)
{
	test_declared_tasks();
	static const int64_t sizes[][2] = {{10, 10}, {3, 2}, {5, 7}, {1, 0}};
	for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
		test_simple(sizes[i][0], sizes[i][1]);
		test_robust(sizes[i][0], sizes[i][1]);
	}
	Module *m = parse("ppl_simple_reg.ir", 10, 10);
	CHECK(m != NULL);
	if (m) {
		check_params(m, simple_params, 1, 11);
		ir_module_free(m);
	}
	m = parse("ppl_robust_reg.ir", 10, 10);
	CHECK(m != NULL);
	if (m) {
		check_params(m, robust_params, 3, 22);
		// The seven constants of the PyTorch source, by name.
		static const char *const consts[] = {"X", "Y", "nu_alpha", "nu_beta", "sigma_rate",
		                                     "beta_mean", "beta_sigma"};
		for (int i = 0; i < 7; i++) {
			int k = ir_module_find_decl(m, consts[i]);
			CHECK(k >= 0 && m->decl[k].kind == DECL_CONST && m->decl[k].dtype == DT_F32);
		}
		ir_module_free(m);
	}
	// At reduced sizes the shapes follow N and K: (1,1), (N,1), (K+1,1).
	m = parse("ppl_robust_reg.ir", 3, 2);
	CHECK(m != NULL);
	if (m) {
		static const ParamRow small[] = {
			{"nu_value", 1, 1, 1}, {"sigma_unconstrained_value", 3, 1, 3}, {"beta_value", 3, 1, 3}};
		check_params(m, small, 3, 7);
		ir_module_free(m);
	}
	check_seeds("ppl_simple_reg.ir", 10, 10);
	check_seeds("ppl_robust_reg.ir", 10, 10);
	return TU_DONE("test_models");
}
