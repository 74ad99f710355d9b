// tests/unit/test_dropout.c -- dropout(x, p, training, seed) (frontend/parse.c,
// docs/IR.md "Random numbers"), on the float64 reference interpreter.
//
// What is checked, and against what:
//   - statistics: every element of dropout(ones) is 0 or 1 / (1 - p)
//     exactly, and the number kept lies within 5 standard deviations of
//     the binomial mean n (1 - p) (a seeded draw, so the test cannot
//     flake; a generator off by 1% of the keep rate would fail it);
//   - determinism and streams: the same (run seed, call counter) gives the
//     same mask; another call counter (the high word of the 64-bit run
//     seed), another run seed, another `seed=`, another dropout call site,
//     and the same function inlined at two call sites each give masks
//     that agree on a fraction p^2 + (1 - p)^2 of the elements, as
//     independent masks do (within 5 sigma), not 1;
//   - p = 0 and training = 0 give x itself (no random node in the graph),
//     p = 1 gives zeros, and p outside [0, 1] is a diagnostic;
//   - one mask per call: in f(w) = sum(c * dropout(w)) the vjp's gradient
//     is c m / (1 - p) with m the mask, and the same task's forward value
//     equals sum(grad * w) computed from that gradient; the jvp's J t
//     equals <grad, t>; for a nonlinear g(w) = sum(c tanh(dropout(w)))
//     vhp equals hvp and both match a central difference of the gradient
//     taken at the same call counter (the mask held fixed);
//   - a two-layer model with dropout between the layers: jvp against a
//     central difference of the loss, and jvp and vjp adjoint, at a
//     nonzero call counter.
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "frontend.h"
#include "ir.h"
#include "passes.h"
#include "testmodel.h"
#include "testutil.h"

static int
count_op(const Graph *g, int op)
{
	int n = 0;
	for (uint32_t i = 1; i < g->nnode; i++)
		n += g->node[i].op == op;
	return n;
}

// Within k standard deviations of the binomial(n, q) mean.
static int
binomial_ok(int64_t count, int64_t n, double q, double k)
{
	double mean = (double)n * q, sd = sqrt((double)n * q * (1 - q));
	return fabs((double)count - mean) <= k * sd;
}

// ---------------------------------------------------------------- statistics and streams

enum { NS = 100000 };

// Outputs of `stats`: dropout(x, P) at two sites, and one function inlined twice.
static const char stats_src[] =
    "let N = 100000\n"
    "const x: f64[N] = ones()\n"
    "def layer(h) {\n"
    "  return dropout(h, 0.3)\n"
    "}\n"
    "def forward() {\n"
    "  return dropout(x, 0.1), dropout(x, 0.1), dropout(x, 0.1, seed=5), layer(x), layer(x),\n"
    "         dropout(x, p=0.5), dropout(x, 0.0), dropout(x, 0.5, training=0), dropout(x, 1.0)\n"
    "}\n";

// The fraction of elements where a and b are both kept or both dropped.
static double
agreement(const Tensor *a, const Tensor *b)
{
	int64_t same = 0;
	for (int64_t i = 0; i < NS; i++)
		same += (a->data[i] != 0) == (b->data[i] != 0);
	return (double)same / NS;
}

// Agreement of independent masks of rate p: p^2 + (1-p)^2, within 5 sigma.
static void
check_independent(const char *what, const Tensor *a, const Tensor *b, double p)
{
	double q = p * p + (1 - p) * (1 - p);
	int64_t same = (int64_t)llround(agreement(a, b) * NS);
	tu_ncheck++;
	if (!binomial_ok(same, NS, q, 5)) {
		tu_nfail++;
		fprintf(stderr, "%s: masks agree on %lld of %d elements, independent masks on %.0f\n",
		        what, (long long)same, NS, q * NS);
	}
}

static void
stats(void)
{
	Module *m = tm_parse("stats", stats_src);
	Tensor *v = tm_init(m);
	Tensor *o = tm_run(m, m->main, "forward", v, NULL, NULL, 0, 0);
	static const double ps[6] = {0.1, 0.1, 0.1, 0.3, 0.3, 0.5};
	for (int k = 0; k < 6; k++) {
		int64_t kept = 0, bad = 0;
		double scaled = 1 / (1 - ps[k]);
		for (int64_t i = 0; i < NS; i++) {
			double y = o[k].data[i];
			kept += y != 0;
			bad += y != 0 && y != scaled;
		}
		CHECK(bad == 0);
		tu_ncheck++;
		if (!binomial_ok(kept, NS, 1 - ps[k], 5)) {
			tu_nfail++;
			fprintf(stderr, "output %d: %lld of %d kept at p = %g, expected %.0f +- 5 sd\n", k,
			        (long long)kept, NS, ps[k], NS * (1 - ps[k]));
		}
		printf("dropout p=%g: kept %lld of %d (expected %.0f, sd %.0f)\n", ps[k],
		       (long long)kept, NS, NS * (1 - ps[k]), sqrt(NS * ps[k] * (1 - ps[k])));
	}
	// Distinct sites, an explicit seed, one function inlined twice.
	check_independent("two dropout sites", &o[0], &o[1], 0.1);
	check_independent("seed=5 against seed=0", &o[0], &o[2], 0.1);
	check_independent("one function inlined twice", &o[3], &o[4], 0.3);
	// p = 0 and training = 0: x itself; p = 1: zeros.
	int same6 = 1, same7 = 1, zero8 = 1;
	for (int64_t i = 0; i < NS; i++) {
		same6 &= o[6].data[i] == 1;
		same7 &= o[7].data[i] == 1;
		zero8 &= o[8].data[i] == 0;
	}
	CHECK(same6 && same7 && zero8);
	// Six sampling sites in all, one bernoulli each; the others draw nothing.
	CHECK(count_op(m->main, OP_bernoulli) == 6);

	// The same call counter draws the same mask; another counter, another
	// run seed draw fresh ones.
	Tensor *again = tm_run(m, m->main, "forward", v, NULL, NULL, 0, 0);
	CHECK(memcmp(again[0].data, o[0].data, NS * sizeof(double)) == 0);
	tm_free_tensors(again, m->main->nout);
	Tensor *call1 = tm_run(m, m->main, "forward", v, NULL, NULL, 0, (uint64_t)1 << 32);
	check_independent("call counter 1 against 0", &o[0], &call1[0], 0.1);
	tm_free_tensors(call1, m->main->nout);
	Tensor *seed1 = tm_run(m, m->main, "forward", v, NULL, NULL, 0, 1);
	check_independent("run seed 1 against 0", &o[0], &seed1[0], 0.1);
	tm_free_tensors(seed1, m->main->nout);
	tm_free_tensors(o, m->main->nout);
	tm_free_tensors(v, m->ndecl);
	ir_module_free(m);

	// The canonical form keeps each site's resolved seed: printing and
	// parsing again gives the same text.
	m = tm_parse("stats", stats_src);
	char *t1 = NULL, *t2 = NULL;
	size_t n1 = 0, n2 = 0;
	FILE *f = open_memstream(&t1, &n1);
	ir_print_module(f, m);
	fclose(f);
	Module *m2 = tm_parse("stats", t1);
	f = open_memstream(&t2, &n2);
	ir_print_module(f, m2);
	fclose(f);
	// (Past the header comments: the file name and the sizes.)
	const char *b1 = strstr(t1, "\nconst"), *b2 = strstr(t2, "\nconst");
	CHECK(b1 && b2 && !strcmp(b1, b2));
	free(t1), free(t2);
	ir_module_free(m2);
	ir_module_free(m);
}

// ---------------------------------------------------------------- one mask per call

static const char lin_src[] =
    "let N = 4000\n"
    "const c: f64[N] = uniform(-1, 1, seed=2)\n"
    "param w: f64[N] = uniform(-1, 1, seed=3)\n"
    "def forward() -> f64[] {\n"
    "  return sum(c * dropout(w, 0.3))\n"
    "}\n";

static const char tanh_src[] =
    "let N = 300\n"
    "const c: f64[N] = uniform(-1, 1, seed=2)\n"
    "param w: f64[N] = uniform(-1, 1, seed=3)\n"
    "def forward() -> f64[] {\n"
    "  return sum(c * tanh(dropout(w * w, 0.3)))\n"
    "}\n";

static void
one_mask_per_call(void)
{
	const uint64_t rs = ((uint64_t)3 << 32) | 11; // call 3 of run seed 11
	Module *m = tm_parse("lin", lin_src);
	Tensor *v = tm_init(m);
	const Tensor *c = &v[ir_module_find_decl(m, "c")], *w = &v[ir_module_find_decl(m, "w")];
	int64_t n = ir_numel(&w->shape);
	Tensor vv;
	Shape s0 = {0};
	ir_tensor_alloc(&vv, DT_F64, &s0);
	vv.data[0] = 0.75;
	const char *vn[] = {"v"};
	Graph *g;
	Tensor *o = tm_run_task_seed(m, "vjp", v, vn, &vv, 1, rs, &g);
	// grad = v c m / (1 - p): read the mask off it.
	double f = 0;
	int64_t kept = 0, bad = 0;
	for (int64_t i = 0; i < n; i++) {
		double mk = o[1].data[i] / (0.75 * c->data[i]) * 0.7;
		int on = fabs(mk - 1) < 1e-12;
		bad += !on && o[1].data[i] != 0;
		kept += on;
		f += o[1].data[i] / 0.75 * w->data[i];
	}
	CHECK(bad == 0);
	CHECK(binomial_ok(kept, n, 0.7, 5));
	// The vjp's own forward value used the mask its gradient used.
	CHECK_NEAR(o[0].data[0], f, 1e-12);
	// So did the forward task at the same call counter, and the jvp.
	Graph *g2;
	Tensor *fo = tm_run(m, m->main, "forward", v, NULL, NULL, 0, rs);
	CHECK_NEAR(fo[0].data[0], f, 1e-12);
	tm_free_tensors(fo, m->main->nout);
	Tensor t;
	ir_tensor_alloc(&t, DT_F64, &w->shape);
	double jt = 0;
	for (int64_t i = 0; i < n; i++) {
		t.data[i] = sin(0.37 * (double)i);
		jt += o[1].data[i] / 0.75 * t.data[i];
	}
	const char *tn[] = {"v.w"};
	Tensor *jo = tm_run_task_seed(m, "jvp", v, tn, &t, 1, rs, &g2);
	CHECK_NEAR(jo[1].data[0], jt, 1e-12);
	printf("dropout: vjp forward %.15g = sum(grad w) %.15g; jvp %.15g = <grad, t> %.15g\n",
	       o[0].data[0], f, jo[1].data[0], jt);
	tm_free_out(g2, jo);
	// Another call counter: another mask, so another value.
	fo = tm_run(m, m->main, "forward", v, NULL, NULL, 0, rs + ((uint64_t)1 << 32));
	CHECK(fabs(fo[0].data[0] - f) > 1e-6);
	tm_free_tensors(fo, m->main->nout);
	tm_free_out(g, o);
	ir_tensor_free(&t);
	tm_free_tensors(v, m->ndecl);
	ir_module_free(m);

	// Second order, the mask held fixed: vhp = hvp, and H t against a
	// central difference of the gradient (vjp at w +- h t, same counter).
	m = tm_parse("tanh", tanh_src);
	v = tm_init(m);
	int wd = ir_module_find_decl(m, "w");
	n = ir_numel(&v[wd].shape);
	ir_tensor_alloc(&t, DT_F64, &v[wd].shape);
	for (int64_t i = 0; i < n; i++)
		t.data[i] = cos(0.91 * (double)i);
	Tensor *hv = tm_run_task_seed(m, "hvp", v, tn, &t, 1, rs, &g);
	Tensor *vh = tm_run_task_seed(m, "vhp", v, tn, &t, 1, rs, &g2);
	double diff = 0, norm = 0;
	for (int64_t i = 0; i < n; i++) {
		diff = fmax(diff, fabs(hv[1].data[i] - vh[1].data[i]));
		norm = fmax(norm, fabs(hv[1].data[i]));
	}
	CHECK(norm > 0 && diff <= 1e-12 * norm);
	const double h = 1e-5;
	Tensor *gp, *gm;
	Graph *gg1, *gg2;
	for (int64_t i = 0; i < n; i++)
		v[wd].data[i] += h * t.data[i];
	gp = tm_run_task_seed(m, "vjp", v, vn, &vv, 1, rs, &gg1);
	for (int64_t i = 0; i < n; i++)
		v[wd].data[i] -= 2 * h * t.data[i];
	gm = tm_run_task_seed(m, "vjp", v, vn, &vv, 1, rs, &gg2);
	for (int64_t i = 0; i < n; i++)
		v[wd].data[i] += h * t.data[i];
	double err = 0;
	for (int64_t i = 0; i < n; i++) {
		double fd = (gp[1].data[i] - gm[1].data[i]) / (2 * h * 0.75);
		err = fmax(err, fabs(fd - hv[1].data[i]));
	}
	// Central difference: error O(h^2 |f'''|) + O(eps |f'| / h), ~1e-10 here.
	CHECK(err <= 1e-7 * fmax(1, norm));
	printf("dropout: hvp = vhp (max |diff| %.2g of %.3g); H t against a central difference of "
	       "the gradient: max |err| %.2g\n",
	       diff, norm, err);
	tm_free_out(gg1, gp);
	tm_free_out(gg2, gm);
	tm_free_out(g, hv);
	tm_free_out(g2, vh);
	ir_tensor_free(&t);
	ir_tensor_free(&vv);
	tm_free_tensors(v, m->ndecl);
	ir_module_free(m);
}

// ---------------------------------------------------------------- a small network

static const char mlp_src[] =
    "let N = 8\n"
    "let D = 6\n"
    "let H = 16\n"
    "const x: f64[N, D] = normal(0, 1, seed=1)\n"
    "const y: i64[N] = cast(floor(3 * uniform(0, 1, seed=2)), dtype=i64)\n"
    "param fc1.weight: f64[H, D] = kaiming_uniform(a=5 ** 0.5, seed=3)\n"
    "param fc1.bias: f64[H] = uniform(-0.3, 0.3, seed=4)\n"
    "param fc2.weight: f64[3, H] = kaiming_uniform(a=5 ** 0.5, seed=5)\n"
    "def forward() -> f64[] {\n"
    "  h = dropout(tanh(linear(x, fc1.weight, fc1.bias)), 0.25)\n"
    "  return cross_entropy(linear_nobias(h, fc2.weight), y)\n"
    "}\n";

static void
mlp(void)
{
	const uint64_t rs = ((uint64_t)7 << 32) | 2;
	Module *m = tm_parse("mlp", mlp_src);
	Tensor *v = tm_init(m);
	const char *pn[3] = {"fc1.weight", "fc1.bias", "fc2.weight"};
	const char *tn[3] = {"v.fc1.weight", "v.fc1.bias", "v.fc2.weight"};
	Tensor t[3];
	int pd[3];
	for (int k = 0; k < 3; k++) {
		pd[k] = ir_module_find_decl(m, pn[k]);
		ir_tensor_alloc(&t[k], DT_F64, &v[pd[k]].shape);
		for (int64_t i = 0; i < ir_numel(&t[k].shape); i++)
			t[k].data[i] = sin(1.3 * (double)i + k);
	}
	Graph *g, *g2;
	Tensor *jo = tm_run_task_seed(m, "jvp", v, tn, t, 3, rs, &g);
	Tensor vv;
	Shape s0 = {0};
	ir_tensor_alloc(&vv, DT_F64, &s0);
	vv.data[0] = 1;
	const char *vn[] = {"v"};
	Tensor *vo = tm_run_task_seed(m, "vjp", v, vn, &vv, 1, rs, &g2);
	double dot = 0, scale = 0;
	for (int k = 0; k < 3; k++)
		for (int64_t i = 0; i < ir_numel(&t[k].shape); i++) {
			dot += vo[1 + k].data[i] * t[k].data[i];
			scale += fabs(vo[1 + k].data[i] * t[k].data[i]);
		}
	CHECK(fabs(dot - jo[1].data[0]) <= 1e-12 * scale);
	// Central difference of the loss along t at the same call counter.
	const double h = 1e-6;
	double f[2];
	for (int side = 0; side < 2; side++) {
		for (int k = 0; k < 3; k++)
			for (int64_t i = 0; i < ir_numel(&t[k].shape); i++)
				v[pd[k]].data[i] += (side ? -2 : 1) * h * t[k].data[i];
		Tensor *fo = tm_run(m, m->main, "forward", v, NULL, NULL, 0, rs);
		f[side] = fo[0].data[0];
		tm_free_tensors(fo, m->main->nout);
	}
	for (int k = 0; k < 3; k++)
		for (int64_t i = 0; i < ir_numel(&t[k].shape); i++)
			v[pd[k]].data[i] += h * t[k].data[i];
	double fd = (f[0] - f[1]) / (2 * h);
	CHECK_NEAR(fd, jo[1].data[0], 1e-7);
	printf("dropout mlp: J t = %.15g, central difference %.15g, <grad, t> = %.15g\n",
	       jo[1].data[0], fd, dot);
	// A different call counter gives a different loss (another mask).
	Tensor *fo = tm_run(m, m->main, "forward", v, NULL, NULL, 0, rs + ((uint64_t)1 << 32));
	CHECK(fabs(fo[0].data[0] - jo[0].data[0]) > 1e-9);
	tm_free_tensors(fo, m->main->nout);
	tm_free_out(g, jo);
	tm_free_out(g2, vo);
	for (int k = 0; k < 3; k++)
		ir_tensor_free(&t[k]);
	ir_tensor_free(&vv);
	tm_free_tensors(v, m->ndecl);
	ir_module_free(m);
}

// ---------------------------------------------------------------- diagnostics

static void
diagnostics(void)
{
	static const struct {
		const char *src, *want;
	} cases[] = {
	    {"const x: f32[4] = ones()\ndef forward() {\n  return dropout(x, 1.5)\n}\n",
	     "dropout: p must be in [0, 1], got 1.5"},
	    {"const x: i64[4] = ones()\ndef forward() {\n  return dropout(x, 0.5)\n}\n",
	     "dropout: input must be f32 or f64, got i64"},
	    {"const x: f32[4] = ones()\ndef forward() {\n  return dropout(x, x)\n}\n",
	     "dropout: p must be a compile-time number"},
	    {"const x: f32[4] = ones()\ndef forward() {\n  return dropout(x, rate=0.5)\n}\n",
	     "dropout has no argument 'rate'"},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		char *buf = NULL;
		size_t len = 0;
		FILE *f = open_memstream(&buf, &len);
		FeOptions o = {.diag = f};
		Module *m = fe_parse_string("bad.ir", cases[i].src, strlen(cases[i].src), &o);
		fclose(f);
		CHECK(m == NULL);
		tu_ncheck++;
		if (!buf || !strstr(buf, cases[i].want)) {
			tu_nfail++;
			fprintf(stderr, "case %zu: diagnostic\n%s\ndoes not say '%s'\n", i, buf ? buf : "",
			        cases[i].want);
		}
		free(buf);
		if (m)
			ir_module_free(m);
	}
}

int
main(void)
{
	stats();
	one_mask_per_call();
	mlp();
	diagnostics();
	return TU_DONE("test_dropout");
}
