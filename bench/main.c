// bench/main.c -- fadc-bench: PyTorch's functional_autograd_benchmark.py,
// over fadc's tasks.
//
//   fadc-bench [--output FILE] [--num-iters N] [--gpu N] [--run-slow-tasks]
//              [--model-filter S] [--task-filter S] [--num-threads N] [--seed N]
//              [--config FILE] [--json FILE] [--backend B] [--reduced] [-D [MODEL:]NAME=V]
//              [--artifacts DIR] [--compile] [--compile-only] [--fadc PATH]
//              [--check-reference]
//   fadc-bench compare BEFORE AFTER [--output FILE]
//   fadc-bench compare --plot CHART.png RUN.json [MORE.json ...]
//
// Backends (bench/exec.h): `cpu`, the default, times compiled artifacts
// through the runtime, compiling them with --compile by running the fadc
// executable (bench/exec_cpu.c); `interp` runs the float64 reference
// interpreter (bench/exec_interp.c).
//
// Per (model, task) cell, as the seed: prepare (untimed), make v from the
// seed (U[0, 1), shaped as the seed's get_v_for), one warm-up run whose
// result is checked for consistency against another strategy (untimed),
// then --num-iters timed runs; mean and unbiased variance as the seed
// computes them.  A consistency failure is reported in the log, in the
// JSON and in the table (the task label gains " [inconsistent]"), and the
// run goes on.  With --check-reference a compiled backend's warm-up is
// also compared with the float64 reference interpreter (meant for reduced
// sizes: the interpreter is slow), and a mismatch is reported the same way
// (" [reference mismatch]").  Filters keep a name when it is a substring of the filter
// string, as the seed's `name in filter` does.
#define _XOPEN_SOURCE 700 // realpath

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "exec.h"
#include "fadc.h"
#include "fileio.h"
#include "ir.h"
#include "report.h"

#ifndef FADC_SOURCE_DIR
#define FADC_SOURCE_DIR "."
#endif

// Where bench/bench.yaml and bench/plot.py are, and whether this
// fadc-bench is an installed one: FADC_INSTALLED_DATA (CMakeLists.txt:
// "../share/fadc", the install's layout) from the folder of this
// executable when it holds bench/bench.yaml, so that an install is found
// wherever it is (staged under DESTDIR, moved) and never reads the source
// tree; else the source tree it was built from.
static const char *
data_dir(int *installed)
{
	static char dir[4096 + 64];
	static int found = -1;
	if (found < 0) {
		found = 0;
#ifdef FADC_INSTALLED_DATA
		char probe[sizeof dir + 32];
		ssize_t k = readlink("/proc/self/exe", dir, 4096);
		char *slash = k > 0 ? (dir[k] = 0, strrchr(dir, '/')) : NULL;
		if (slash) {
			snprintf(slash + 1, sizeof dir - (size_t)(slash + 1 - dir), "%s",
			         FADC_INSTALLED_DATA);
			snprintf(probe, sizeof probe, "%s/bench/bench.yaml", dir);
			found = !access(probe, R_OK);
		}
#endif
		if (!found)
			snprintf(dir, sizeof dir, "%s", FADC_SOURCE_DIR);
	}
	if (installed)
		*installed = found;
	return dir;
}

static const char *const usage =
    "usage: fadc-bench [options]\n"
    "       fadc-bench compare BEFORE AFTER [--output FILE]\n"
    "       fadc-bench compare --plot CHART.png RUN.json [MORE.json ...]\n"
    "\n"
    "Benchmarks the tasks of the models of bench/bench.yaml, as PyTorch's\n"
    "functional_autograd_benchmark.py does, and writes its markdown table.\n"
    "\n"
    "  --output FILE        write the markdown table to FILE at the end\n"
    "  --num-iters N        timed iterations per cell (10)\n"
    "  --gpu N              -2 auto (GPU 0 if there is one, else the CPU), -1 CPU,\n"
    "                       N CUDA device N (artifacts compiled with --target cuda)\n"
    "  --gpus LIST          GPUs \"0,1\": each cell data-parallel over them (a model\n"
    "                       declaring a batch; its artifact holding the task at\n"
    "                       each shard's batch: -D N=n,n/2, docs/MULTIGPU.md; a\n"
    "                       batched task (hessian, jacfwd) as its --shards 2S), then\n"
    "                       on the first alone: the speed-up over one GPU and the\n"
    "                       parallel efficiency (speed-up / GPUs)\n"
    "  --run-slow-tasks     run every task of ALL_TASKS (unsupported ones excepted)\n"
    "  --model-filter S     run a model only if its name occurs in S\n"
    "  --task-filter S      run a task only if its name occurs in S\n"
    "  --num-threads N      CPU threads (10)\n"
    "  --seed N             run seed of the constants, params and v (0)\n"
    "  --config FILE        the configuration (bench/bench.yaml)\n"
    "  --json FILE          every sample and the environment, as JSON\n"
    "  --backend B          cpu (compiled artifacts, the default) or interp (the\n"
    "                       float64 reference interpreter)\n"
    "  --reduced            the configuration's reduced sizes (tests, CI)\n"
    "  -D [MODEL:]NAME=V    override a size (of one model, or of every model)\n"
    "  --artifacts DIR      where compiled models live (build/artifacts; an\n"
    "                       installed fadc-bench: ~/.cache/fadc/artifacts)\n"
    "  --compile            compile missing or stale artifacts first\n"
    "  --compile-only       compile missing or stale artifacts and stop (for\n"
    "                       another machine: a GPU machine without LLVM)\n"
    "  --fadc PATH          the compiler --compile runs (fadc beside\n"
    "                       fadc-bench)\n"
    "  --check-reference    also compare each warm-up of a compiled backend with\n"
    "                       the float64 reference interpreter (use with --reduced)\n"
    "  --device-time        with --gpu N: time each iteration on the device (CUDA\n"
    "                       events around the call) instead of the host clock\n"
    "                       around call + synchronize (the seed's)\n"
    "  --memory             add each cell's peak memory to the table (MiB; the\n"
    "                       JSON has peak_memory_bytes always)\n"
    "  --no-check           skip the warm-up's consistency check: the partner task\n"
    "                       (vjp's jvp, ...) is never compiled, loaded or run, so\n"
    "                       the peak memory is the cell's task alone\n"
    "  -h, --help           this help\n"
    "\n"
    "compare prints the speedups (before / after) of two markdown tables; with\n"
    "--plot it draws fadc-bench --json files and the peers' (bench/peers/\n"
    "torch_compile_step.py --json) into a PNG with bench/plot.py, run by\n"
    "$FADC_PYTHON or /usr/bin/python3 (Debian's python3-matplotlib).\n";

typedef struct Opts {
	const char *output, *config, *json, *backend, *artifacts, *compiler;
	int num_iters, gpu, slow, num_threads, reduced, compile, compile_only, check_ref, device_time;
	int memory; // --memory: the table's peak-memory column
	int gpus[64], ngpus; // --gpus 0,1 (ngpus 0: not given)
	int no_check; // --no-check: no consistency check, its partner never prepared
	const char *model_filter, *task_filter;
	uint64_t seed;
	const char *defs[64];
	int ndefs;
} Opts;

// A usage error: the reason and where to read more, not the whole help,
// which would push the reason off the screen.  Exit status 2.
static int
usage_error(const char *fmt, const char *arg)
{
	fprintf(stderr, "fadc-bench: ");
	fprintf(stderr, fmt, arg);
	fprintf(stderr, "\ntry 'fadc-bench --help'\n");
	return 2;
}

static int
parse_int(const char *s, long long *v)
{
	char *end;
	errno = 0;
	*v = strtoll(s, &end, 10);
	return *s && !*end && !errno;
}

// v is U[0, 1) from the run seed, keyed by the input's name (and a salt
// for the consistency check's second draw), exactly as `fadc run` draws it:
// every backend and the CLI see the same v (support/random.c).
static void
fill_uniform(BTensor *t, uint64_t seed, const char *salt)
{
	uint64_t key = ir_rand_name_key(t->name, salt);
	for (int64_t i = 0; i < t->n; i++)
		t->data[i] = ir_rand_uniform(key, seed, (uint64_t)i);
}

static double
now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static const BTensor *
out_named(const Backend *b, Prepared *p, const char *prefix, const char *rest)
{
	char name[256];
	snprintf(name, sizeof name, "%s%s", prefix, rest);
	for (int i = 0; i < b->noutputs(p); i++)
		if (!strcmp(b->output(p, i)->name, name))
			return b->output(p, i);
	return NULL;
}

// <a, b>, and into *mag the magnitude of its terms, sum |a_i b_i|.
static double
dot(const BTensor *a, const BTensor *b, double *mag)
{
	double s = 0, m = 0;
	for (int64_t i = 0; i < a->n && i < b->n; i++) {
		s += a->data[i] * b->data[i];
		m += fabs(a->data[i] * b->data[i]);
	}
	*mag += m;
	return s;
}

static double
rel(double a, double b)
{
	double s = fmax(fabs(a), fabs(b));
	return s == 0 ? 0 : fabs(a - b) / s;
}

// The error of a dot-product test lhs = rhs, normalized by the magnitude
// of the terms of the two sums: with lhs = sum_i a_i and rhs = sum_j b_j,
//
//   e = |lhs - rhs| / ((sum_i |a_i| + sum_j |b_j|) / 2).
//
// Why not rel(lhs, rhs): each side is a sum of many terms of both signs
// (a_i = v_i (J u)_i, b_j = (J^T v)_j u_j: J^T v has entries of either
// sign).  Whatever the order, a sum computed from terms that each carry a
// relative error of at most d (d ~ c eps: c the growth of rounding through
// the forward and backward passes, eps the unit roundoff of the type the
// artifact computes in) is off by at most d sum |t_k| (plus gamma_n sum
// |t_k| for its own additions, gamma_n ~ n eps in the worst case, ~ sqrt(n)
// eps in practice).  Relative to the sum, that is d times the condition
// number kappa = sum |t_k| / |sum t_k| of the sum, which is large when
// the terms cancel: resnet18 and detr at full size in f32 gave rel 2.2e-4
// and 1.6e-3 while the same code in f64 agreed to 2.0e-8 (docs/STATUS.md,
// issue 5).  Divided by the terms' magnitude instead, a correct result is
// judged by d alone, the precision of its elements, whatever kappa is;
// a wrong derivative, whose error is of the size of its terms (a missing
// or wrong chain-rule factor), still gives e of order one.  What the
// normalization gives up is an error that is itself small against the
// terms and cancels like them (every element scaled by 1 + delta gives
// e ~ 2 delta / kappa): exactly the errors that rounding of size
// kappa eps would hide from rel() anyway.  The mean of the two sides'
// magnitudes: the two sums are the same number, and neither side is the
// reference.  For a scalar loss the vjp/jvp pair's lhs is one term,
// v (J u), so e ~ 2 |lhs - rhs| / sum_j |b_j| there.  NaN anywhere gives
// NaN, which the caller counts as a failure.
static double
adjoint_error(double lhs, double rhs, double lmag, double rmag)
{
	double m = 0.5 * (lmag + rmag);
	if (!isfinite(m))
		return NAN; // an infinite or NaN output
	return m == 0 ? 0 : fabs(lhs - rhs) / m;
}

// Whether a task's caller input is one its pass added (vjp's cotangent v or
// v.<out>, jvp's and the Hessian products' v.<p>) rather than one of the
// forward's own inputs.  By name, as fadc run binds them (docs/TASKS.md: a
// declaration named like a task input is ambiguous there too).
static int
is_tangent(const char *name)
{
	return !strcmp(name, "v") || !strncmp(name, "v.", 2);
}

// The task a cell is checked against, and how: *pair 1, the dot-product
// (adjoint) test; 2, equal outputs.  NULL: no check for this task.
static const char *
partner_of(const char *task, int *pair)
{
	// ir/tasks.def's partner and check columns.
	int t = ir_task_lookup(task), dummy;
	if (!pair)
		pair = &dummy;
	*pair = t < 0 ? IR_CHECK_NONE : (int)ir_task[t].check;
	return *pair == IR_CHECK_NONE ? NULL : ir_task[ir_task[t].partner].name;
}

// The consistency check of a cell: the warm-up's result against another
// strategy.  Returns the normalized error (-1: no check for this task), or
// -2 with err set if the partner could not run.  For the adjoint pairs,
// *sum_rel gets rel(lhs, rhs), the two sums' relative difference (for the
// JSON: how much the terms cancelled); it is left alone otherwise.
static double
check(const Backend *b, Prepared *p, const char *task, const char *source, const char *const *defs,
      int ndefs, uint64_t seed, double *sum_rel, char *err, size_t errlen)
{
	int pair;
	const char *partner = partner_of(task, &pair);
	if (!partner)
		return -1;
	Prepared *q = b->prepare(source, defs, ndefs, partner, seed, err, errlen);
	if (!q)
		return -2;
	// The partner's tangents (u against the cell's v) are drawn apart from
	// the cell's; its other inputs, the forward's own (a caller's x), are
	// the point both derivatives are taken at, so they get the cell's values
	// (its salt "v", run_cell): drawn apart, the two sides of the identity
	// were derivatives at two different points.
	for (int i = 0; i < b->ninputs(q); i++) {
		BTensor *t = b->input(q, i);
		fill_uniform(t, seed, is_tangent(t->name) ? "check" : "v");
	}
	double e = -2;
	if (b->run(q, err, errlen))
		goto out;
	if (pair == 2) {
		// Same outputs, in order.
		double num = 0, den = 0;
		for (int i = 0; i < b->noutputs(p) && i < b->noutputs(q); i++) {
			const BTensor *x = b->output(p, i), *y = b->output(q, i);
			for (int64_t k = 0; k < x->n && k < y->n; k++) {
				num += (x->data[k] - y->data[k]) * (x->data[k] - y->data[k]);
				den += x->data[k] * x->data[k] + y->data[k] * y->data[k];
			}
		}
		e = den == 0 ? 0 : sqrt(num / den);
		goto out;
	}
	// Adjoint pairs.  vjp(v) gives grad.<p> = J^T v; jvp(u) gives
	// jvp.<out> = J u: <v, J u> = <J^T v, u>.  hvp(v) gives H v, vhp(u)
	// gives u^T H: <u, H v> = <u^T H, v>.  lmag and rmag collect the
	// magnitudes of the two sums' terms (adjoint_error).
	Prepared *rv = !strcmp(task, "vjp") || !strcmp(task, "hvp") ? p : q; // the v-side run
	Prepared *ru = rv == p ? q : p; // the u-side run
	const char *vt = rv == p ? task : partner;
	double lhs = 0, rhs = 0, lmag = 0, rmag = 0;
	if (!strcmp(vt, "vjp")) {
		// rv: vjp with v (one per output); ru: jvp with u (one per param).
		for (int i = 0; i < b->ninputs(rv); i++) {
			BTensor *v = b->input(rv, i);
			if (!is_tangent(v->name))
				continue;
			const char *oname = !strcmp(v->name, "v") ? NULL : v->name + 2;
			for (int k = 0; k < b->noutputs(ru); k++) {
				const BTensor *o = b->output(ru, k);
				if (strncmp(o->name, "jvp.", 4))
					continue;
				if (!oname || !strcmp(o->name + 4, oname))
					lhs += dot(v, o, &lmag);
			}
		}
		for (int i = 0; i < b->ninputs(ru); i++) {
			BTensor *u = b->input(ru, i); // v.<param>
			if (!is_tangent(u->name))
				continue;
			const BTensor *g = out_named(b, rv, "grad.", u->name + 2);
			if (g)
				rhs += dot(g, u, &rmag);
		}
	} else {
		// rv: hvp with v.<p>; ru: vhp with u = v.<p> of its own.
		for (int i = 0; i < b->ninputs(ru); i++) {
			BTensor *u = b->input(ru, i);
			if (!is_tangent(u->name))
				continue;
			const BTensor *hv = out_named(b, rv, "hvp.", u->name + 2);
			if (hv)
				lhs += dot(u, hv, &lmag);
		}
		for (int i = 0; i < b->ninputs(rv); i++) {
			BTensor *v = b->input(rv, i);
			if (!is_tangent(v->name))
				continue;
			const BTensor *uh = out_named(b, ru, "vhp.", v->name + 2);
			if (uh)
				rhs += dot(uh, v, &rmag);
		}
	}
	// Test hook: FADC_BENCH_FAULT=scale:D makes the v-side run's derivative
	// (J^T v, or H v) off by the relative amount D in every element, a
	// wrong derivative that the test must see (tests/bench/adjoint-norm.sh).
	const char *fault = getenv("FADC_BENCH_FAULT");
	if (fault && !strncmp(fault, "scale:", 6)) {
		double d = strtod(fault + 6, NULL);
		if (!strcmp(vt, "vjp"))
			rhs *= 1 + d, rmag *= fabs(1 + d);
		else
			lhs *= 1 + d, lmag *= fabs(1 + d);
	}
	e = adjoint_error(lhs, rhs, lmag, rmag);
	if (sum_rel)
		*sum_rel = rel(lhs, rhs);
out:
	b->release(q);
	return e;
}

// The reference check (--check-reference): the warm-up's outputs against
// the float64 reference interpreter's for the same task, v and seed.  Each
// output's normalized error sqrt(sum (x - y)^2 / sum (x^2 + y^2)) is taken
// on its own, so that a small gradient is not hidden by a large one, and
// the worst is returned with its output's name in worst; -2 with err set
// if the reference could not run or the two disagree on what the task
// computes (names, shapes).  A NaN in either side makes the error NaN,
// which the caller counts as a mismatch.
static double
reference(const Backend *b, Prepared *p, const char *task, const char *source,
          const char *const *defs, int ndefs, uint64_t seed, char *worst, size_t wlen, char *err,
          size_t errlen)
{
	if (bench_is_artifact(source)) {
		snprintf(err, errlen, "the model is a compiled artifact: the interpreter needs its .ir");
		return -2;
	}
	Prepared *q = backend_interp.prepare(source, defs, ndefs, task, seed, err, errlen);
	if (!q)
		return -2;
	double e = -2;
	worst[0] = 0;
	// The same v: the values the compiled run was given, by name.
	if (backend_interp.ninputs(q) != b->ninputs(p)) {
		snprintf(err, errlen, "the reference has %d extra inputs, the artifact %d",
		         backend_interp.ninputs(q), b->ninputs(p));
		goto out;
	}
	for (int i = 0; i < backend_interp.ninputs(q); i++) {
		BTensor *r = backend_interp.input(q, i), *c = NULL;
		for (int k = 0; k < b->ninputs(p) && !c; k++)
			if (!strcmp(b->input(p, k)->name, r->name))
				c = b->input(p, k);
		if (!c || c->n != r->n) {
			snprintf(err, errlen, "input %s: %s", r->name,
			         c ? "the artifact's has another size" : "not an input of the artifact's task");
			goto out;
		}
		memcpy(r->data, c->data, sizeof *r->data * (size_t)r->n);
	}
	if (backend_interp.run(q, err, errlen))
		goto out;
	if (backend_interp.noutputs(q) != b->noutputs(p)) {
		snprintf(err, errlen, "the reference has %d outputs, the artifact %d",
		         backend_interp.noutputs(q), b->noutputs(p));
		goto out;
	}
	// Test hook: FADC_BENCH_FAULT=reference adds 1 to the reference's first
	// value, =reference-nan makes it NaN, so that a real comparison fails
	// (tests/bench/check-reference.sh).
	const char *fault = getenv("FADC_BENCH_FAULT");
	if (fault && backend_interp.noutputs(q) > 0) {
		BTensor *r0 = (BTensor *)backend_interp.output(q, 0);
		if (r0->n > 0 && !strcmp(fault, "reference"))
			r0->data[0] += 1;
		else if (r0->n > 0 && !strcmp(fault, "reference-nan"))
			r0->data[0] = NAN;
	}
	double worst_e = 0;
	for (int i = 0; i < b->noutputs(p); i++) {
		const BTensor *x = b->output(p, i), *y = NULL;
		for (int k = 0; k < backend_interp.noutputs(q) && !y; k++)
			if (!strcmp(backend_interp.output(q, k)->name, x->name))
				y = backend_interp.output(q, k);
		if (!y || y->n != x->n) {
			snprintf(err, errlen, "output %s: %s", x->name,
			         y ? "the reference's has another size" : "not an output of the reference");
			goto out;
		}
		double num = 0, den = 0;
		for (int64_t k = 0; k < x->n; k++) {
			num += (x->data[k] - y->data[k]) * (x->data[k] - y->data[k]);
			den += x->data[k] * x->data[k] + y->data[k] * y->data[k];
		}
		double ei = den == 0 && num == 0 ? 0 : sqrt(num / den);
		if (!(ei <= worst_e) && !(isnan(worst_e))) {
			worst_e = ei;
			snprintf(worst, wlen, "%s", x->name);
		}
	}
	e = worst_e;
out:
	backend_interp.release(q);
	return e;
}

// A model's source path: relative to the config file's folder, or as it is
// when absolute (a prebuilt artifact elsewhere, e.g. compiled with other flags).
static void
model_source(char *out, size_t n, const char *cdir, const char *source)
{
	snprintf(out, n, source[0] == '/' ? "%s%s" : "%s/%s", source[0] == '/' ? "" : cdir, source);
}

static int
keep(const char *filter, const char *name)
{
	return !filter || !*filter || strstr(filter, name) != NULL;
}

static void
json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			fprintf(f, "\\%c", *s);
		else if ((unsigned char)*s < 0x20)
			fprintf(f, "\\u%04x", *s);
		else
			fputc(*s, f);
	}
	fputc('"', f);
}

static void
json_num(FILE *f, double v)
{
	char b[40];
	if (isnan(v) || isinf(v)) {
		fputs("null", f);
		return;
	}
	py_repr(v, b, sizeof b);
	fputs(b, f);
}

static void
cpu_model(char *buf, size_t n)
{
	snprintf(buf, n, "unknown");
	FILE *f = fio_fopen_read("/proc/cpuinfo", NULL, 0);
	if (!f)
		return;
	char line[512];
	while (fgets(line, sizeof line, f))
		if (!strncmp(line, "model name", 10)) {
			char *c = strchr(line, ':');
			if (c) {
				c++;
				while (*c == ' ')
					c++;
				c[strcspn(c, "\n")] = 0;
				snprintf(buf, n, "%s", c);
			}
			break;
		}
	fclose(f);
}

// Outputs (--output, --json) go through fileio (runtime/fileio.h): into a
// temporary file beside the target, renamed over it at the end (also when
// cells failed: the table says which ran), so that an interrupted run
// leaves the old file (or none), never half a table or an unterminated
// JSON; a device such as /dev/null is written in
// place.  out_open and out_commit print their error and return 1 on
// failure; on success o has a stream (fio_out_file).
static int
out_open(FioOut *o, const char *path)
{
	char err[4096 + 256];
	if (fio_out_open(o, path, 0666, err, sizeof err))
		goto fail;
	if (!fio_out_file(o)) {
		snprintf(err, sizeof err, "%s: %s", path, strerror(errno));
		fio_out_abort(o);
		goto fail;
	}
	return 0;
fail:
	fprintf(stderr, "fadc-bench: cannot write %s\n", err);
	return 1;
}

static int
out_commit(FioOut *o)
{
	char err[4096 + 256];
	if (fio_out_commit(o, err, sizeof err)) {
		fprintf(stderr, "fadc-bench: cannot write %s\n", err);
		return 1;
	}
	return 0;
}

// compare --plot: bench/plot.py draws the chart (docs/BENCH.md, "Charts"),
// so that fadc-bench itself links no plotting library.  The script is
// plot.py beside this executable (a payload's bin/), else the install's or
// the source tree's bench/plot.py (data_dir); the interpreter is
// $FADC_PYTHON, else /usr/bin/python3, Debian's, which python3-matplotlib
// installs into (a virtual environment's python3 on PATH may lack it).  The script checks its inputs and says what
// is wrong with them; its failure is ours (exit 1).
static int
run_plot(const char *chart, char **in, int nin)
{
	const char *py = getenv("FADC_PYTHON");
	if (!py || !*py)
		py = "/usr/bin/python3";
	if (access(py, X_OK)) {
		fprintf(stderr,
		        "fadc-bench: --plot runs %s, which cannot be run: %s (install Debian's "
		        "python3-matplotlib: apt-get install python3-matplotlib)\n",
		        py, strerror(errno));
		return 1;
	}
	char script[4096 + 32];
	ssize_t k = readlink("/proc/self/exe", script, 4096);
	char *slash = k > 0 ? (script[k] = 0, strrchr(script, '/')) : NULL;
	if (slash)
		snprintf(slash, sizeof script - (size_t)(slash - script), "/plot.py");
	if (!slash || access(script, R_OK))
		snprintf(script, sizeof script, "%s/bench/plot.py", data_dir(NULL));
	if (access(script, R_OK)) {
		fprintf(stderr, "fadc-bench: --plot: cannot read %s: %s\n", script, strerror(errno));
		return 1;
	}
	// --output=CHART and "--": names that begin with '-' stay names.
	char opt[4096 + 16];
	snprintf(opt, sizeof opt, "--output=%s", chart);
	char **av = calloc((size_t)nin + 5, sizeof *av);
	if (!av) {
		fprintf(stderr, "fadc-bench: out of memory\n");
		return 1;
	}
	av[0] = (char *)py;
	av[1] = script;
	av[2] = opt;
	av[3] = "--";
	memcpy(av + 4, in, (size_t)nin * sizeof *av);
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		execv(py, av);
		fprintf(stderr, "fadc-bench: cannot run %s: %s\n", py, strerror(errno));
		_exit(127);
	}
	free(av);
	int st = 0;
	if (pid < 0 || waitpid(pid, &st, 0) < 0) {
		fprintf(stderr, "fadc-bench: cannot run %s: %s\n", py, strerror(errno));
		return 1;
	}
	if (WIFSIGNALED(st)) {
		fprintf(stderr, "fadc-bench: %s %s killed by signal %d\n", py, script, WTERMSIG(st));
		return 1;
	}
	return WEXITSTATUS(st) ? 1 : 0;
}

static int
cmd_compare(int argc, char **argv)
{
	const char *before = NULL, *after = NULL, *output = NULL, *plot = NULL;
	char *files[256];
	int nin = 0;
	for (int i = 0; i < argc; i++) {
		if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			fputs(usage, stdout);
			return 0;
		} else if (!strcmp(argv[i], "--output") || !strcmp(argv[i], "--plot")) {
			if (i + 1 >= argc)
				return usage_error("%s needs a value", argv[i]);
			if (!strcmp(argv[i], "--output"))
				output = argv[++i];
			else
				plot = argv[++i];
		} else if (argv[i][0] == '-')
			return usage_error("unknown option '%s'", argv[i]);
		else if (nin == (int)(sizeof files / sizeof *files))
			return usage_error("compare: too many files ('%s' is the 257th)", argv[i]);
		else
			files[nin++] = argv[i];
	}
	if (plot && output)
		return usage_error("compare: --output is for tables, --plot for a chart; give one%s",
		                   "");
	if (plot && !nin)
		return usage_error("compare --plot needs RUN.json files%s", "");
	if (plot)
		return run_plot(plot, files, nin);
	if (nin > 2)
		return usage_error("compare takes two tables ('%s' is a third)", files[2]);
	if (nin < 2)
		return usage_error("compare needs BEFORE and AFTER tables%s", "");
	before = files[0];
	after = files[1];
	Table b, a;
	char err[4096 + 512];
	const char *in[] = {before, after};
	if (output && fio_check_not_input(output, in, 2, err, sizeof err)) {
		fprintf(stderr, "fadc-bench: %s\n", err);
		return 1;
	}
	if (table_read_markdown(before, &b, err, sizeof err)) {
		fprintf(stderr, "fadc-bench: %s\n", err);
		return 1;
	}
	if (table_read_markdown(after, &a, err, sizeof err)) {
		fprintf(stderr, "fadc-bench: %s\n", err);
		table_free(&b);
		return 1;
	}
	table_write_compare(stdout, &b, &a);
	putchar('\n');
	int rc = 0;
	FioOut fo;
	if (output) {
		if (out_open(&fo, output))
			rc = 1;
		else {
			table_write_compare(fio_out_file(&fo), &b, &a);
			rc = out_commit(&fo);
		}
	}
	table_free(&b);
	table_free(&a);
	return rc;
}

// The cells of model m this run times, in order: its recommended tasks
// (ALL_TASKS with --run-slow-tasks) less the unsupported ones, filtered.
static int
model_cells(const Opts *o, const BenchConfig *cfg, const BenchModel *m, const char **cells)
{
	int ncells = 0, ntasks = o->slow ? cfg->nall : m->ntasks;
	for (int ti = 0; ti < ntasks; ti++) {
		const char *task = o->slow ? cfg->all_tasks[ti] : m->tasks[ti];
		int unsup = 0;
		for (int u = 0; u < m->nunsupported; u++)
			unsup |= !strcmp(m->unsupported[u], task);
		if (!unsup && keep(o->task_filter, task))
			cells[ncells++] = task;
	}
	return ncells;
}

// A -D argument, [MODEL:]NAME=VALUE: the NAME=VALUE part, and in *ml the
// length of MODEL (0: every model).
static const char *
def_split(const char *a, size_t *ml)
{
	const char *colon = strchr(a, ':'), *eq = strchr(a, '=');
	if (colon && (!eq || colon < eq)) {
		*ml = (size_t)(colon - a);
		return colon + 1;
	}
	*ml = 0;
	return a;
}

// Whether two NAME=VALUE strings bind the same name.
static int
same_name(const char *a, const char *b)
{
	size_t n = strcspn(a, "=");
	return n == strcspn(b, "=") && !strncmp(a, b, n);
}

// The sizes of model m, one NAME=VALUE per name: the configuration's
// reduced sizes (--reduced), then -D NAME=V, then -D MODEL:NAME=V, each
// replacing an earlier value of its name in place.  fadc refuses a name
// bound twice, and a user's -D is meant to override --reduced, so the
// merge happens here, not on fadc's command line.  defs holds
// BENCH_MAXDEF + 64 entries.
static int
model_defs(const Opts *o, const BenchModel *m, const char **defs)
{
	int nd = 0;
	for (int i = 0; o->reduced && i < m->nreduced; i++)
		defs[nd++] = m->reduced[i];
	for (int pass = 0; pass < 2; pass++)
		for (int i = 0; i < o->ndefs; i++) {
			size_t ml;
			const char *nv = def_split(o->defs[i], &ml);
			if (pass == 0 ? ml != 0
			              : ml != strlen(m->name) || strncmp(o->defs[i], m->name, ml))
				continue;
			int k = 0;
			while (k < nd && !same_name(defs[k], nv))
				k++;
			defs[k] = nv;
			nd += k == nd;
		}
	return nd;
}

// "a, b, c" of the configuration's models into buf.
static void
model_names(const BenchConfig *cfg, char *buf, size_t n)
{
	size_t k = 0;
	buf[0] = 0;
	for (int i = 0; i < cfg->nmodel && k < n; i++)
		k += (size_t)snprintf(buf + k, n - k, "%s%s", i ? ", " : "", cfg->model[i].name);
}

// Whether a and b name the same output: the same existing file, or the
// same path once the folder is resolved (neither exists yet).
static int
same_output(const char *a, const char *b)
{
	if (fio_same_file(a, b))
		return 1;
	char ra[PATH_MAX + 256], rb[PATH_MAX + 256];
	const char *const p[2] = {a, b};
	char *r[2] = {ra, rb};
	for (int i = 0; i < 2; i++) {
		char dir[PATH_MAX], real[PATH_MAX];
		const char *sl = strrchr(p[i], '/');
		snprintf(dir, sizeof dir, "%.*s", sl ? (int)(sl - p[i]) + 1 : 1, sl ? p[i] : ".");
		if (!realpath(dir, real))
			return !strcmp(a, b);
		snprintf(r[i], PATH_MAX + 256, "%s/%s", real, sl ? sl + 1 : p[i]);
	}
	return !strcmp(ra, rb);
}

// Whether path exists and is not a regular file (a device: written in
// place, so two outputs may share it).
static int
is_special(const char *path)
{
	struct stat st;
	return !stat(path, &st) && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode);
}

// Whether model m is skipped on the run's device by the configuration.
static int
device_skip(const Opts *o, const BenchConfig *cfg, const BenchModel *m)
{
	return o->gpu < 0 ? bench_in_list(cfg->skip_cpu, cfg->nskip_cpu, m->name)
	                  : bench_in_list(cfg->skip_cuda, cfg->nskip_cuda, m->name);
}

// What the run selects, checked before anything runs; each failure is an
// error (exit 1), since exit 0 says every requested cell ran and a run of
// nothing would say so falsely: a -D MODEL: naming no model, filters that
// leave no model or no cell (with what there is), a selected model whose
// source cannot be read (file:line:col of its source: key), and an output
// that is a selected model's source.
static int
check_selection(const Opts *o, const BenchConfig *cfg, const char *cdir)
{
	char names[4096], ferr[4096 + 256];
	model_names(cfg, names, sizeof names);
	for (int i = 0; i < o->ndefs; i++) {
		size_t ml;
		def_split(o->defs[i], &ml);
		int found = !ml;
		for (int k = 0; k < cfg->nmodel && !found; k++)
			found = strlen(cfg->model[k].name) == ml && !strncmp(cfg->model[k].name, o->defs[i], ml);
		if (!found) {
			fprintf(stderr, "fadc-bench: -D %s: %s has no model '%.*s' (its models: %s)\n",
			        o->defs[i], cfg->path, (int)ml, o->defs[i], names);
			return 1;
		}
	}
	int nsel = 0, ncell = 0, bad = 0, nall = 0;
	const char *all[BENCH_MAXTASK * 2];
	Opts unfiltered = *o;
	unfiltered.task_filter = NULL;
	for (int mi = 0; mi < cfg->nmodel; mi++) {
		const BenchModel *m = &cfg->model[mi];
		const char *cells[BENCH_MAXTASK];
		if (!keep(o->model_filter, m->name))
			continue;
		nsel++;
		ncell += model_cells(o, cfg, m, cells);
		int n = model_cells(&unfiltered, cfg, m, cells);
		for (int i = 0; i < n; i++) {
			int k = 0;
			while (k < nall && strcmp(all[k], cells[i]))
				k++;
			if (k == nall && nall < BENCH_MAXTASK * 2)
				all[nall++] = cells[i];
		}
	}
	if (!nsel && !cfg->nmodel) {
		fprintf(stderr, "fadc-bench: %s has no models\n", cfg->path);
		return 1;
	}
	if (!nsel) {
		fprintf(stderr, "fadc-bench: no model of %s occurs in --model-filter '%s' (its models: %s)\n",
		        cfg->path, o->model_filter, names);
		return 1;
	}
	if (!ncell) {
		char list[1024];
		size_t k = 0;
		list[0] = 0;
		for (int i = 0; i < nall && k < sizeof list; i++)
			k += (size_t)snprintf(list + k, sizeof list - k, "%s%s", i ? ", " : "", all[i]);
		if (o->task_filter && *o->task_filter)
			fprintf(stderr,
			        "fadc-bench: no task of the selected models occurs in --task-filter '%s' "
			        "(their tasks%s: %s)\n",
			        o->task_filter, o->slow ? " with --run-slow-tasks" : "", list);
		else
			fprintf(stderr, "fadc-bench: the selected models have no task to run (%s)\n",
			        cfg->path);
		return 1;
	}
	for (int mi = 0; mi < cfg->nmodel; mi++) {
		const BenchModel *m = &cfg->model[mi];
		const char *cells[BENCH_MAXTASK];
		if (!keep(o->model_filter, m->name) || device_skip(o, cfg, m) ||
		    !model_cells(o, cfg, m, cells))
			continue;
		char source[4096 + 600];
		model_source(source, sizeof source, cdir, m->source);
		int fd = fio_open_read(source, ferr, sizeof ferr);
		if (fd < 0) {
			fprintf(stderr, "%s:%d:%d: error: model '%s': source: %s\n", cfg->path, m->source_line,
			        m->source_col, m->name, ferr);
			bad = 1;
			continue;
		}
		close(fd);
		const char *src = source;
		const char *outs[2] = {o->output, o->json};
		for (int i = 0; i < 2; i++)
			if (outs[i] && fio_check_not_input(outs[i], &src, 1, ferr, sizeof ferr)) {
				fprintf(stderr, "fadc-bench: %s %s\n", i ? "--json" : "--output", ferr);
				bad = 1;
			}
	}
	return bad;
}

// The options of a run into *o.  Returns -1 to go on, else the exit
// status: 0 after --help, 2 on a usage error (reported).
static int
parse_opts(int argc, char **argv, Opts *o)
{
	for (int i = 0; i < argc; i++) {
		const char *a = argv[i];
		long long v;
		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			fputs(usage, stdout);
			return 0;
		} else if (!strcmp(a, "--run-slow-tasks"))
			o->slow = 1;
		else if (!strcmp(a, "--reduced"))
			o->reduced = 1;
		else if (!strcmp(a, "--compile"))
			o->compile = 1;
		else if (!strcmp(a, "--compile-only"))
			o->compile = o->compile_only = 1;
		else if (!strcmp(a, "--check-reference"))
			o->check_ref = 1;
		else if (!strcmp(a, "--device-time"))
			o->device_time = 1;
		else if (!strcmp(a, "--memory"))
			o->memory = 1;
		else if (!strcmp(a, "--no-check"))
			o->no_check = 1;
		else if (!strncmp(a, "-D", 2) && a[2]) {
			if (o->ndefs == 64)
				return usage_error("too many -D options%s", "");
			o->defs[o->ndefs++] = a + 2;
		} else if (!strcmp(a, "--output") || !strcmp(a, "--num-iters") || !strcmp(a, "--gpu") ||
		           !strcmp(a, "--model-filter") || !strcmp(a, "--task-filter") ||
		           !strcmp(a, "--num-threads") || !strcmp(a, "--seed") || !strcmp(a, "--config") ||
		           !strcmp(a, "--json") || !strcmp(a, "--backend") || !strcmp(a, "--artifacts") ||
		           !strcmp(a, "--fadc") || !strcmp(a, "-D") || !strcmp(a, "--gpus")) {
			if (i + 1 >= argc)
				return usage_error("%s needs a value", a);
			const char *val = argv[++i];
			if (!strcmp(a, "--output"))
				o->output = val;
			else if (!strcmp(a, "--model-filter"))
				o->model_filter = val;
			else if (!strcmp(a, "--task-filter"))
				o->task_filter = val;
			else if (!strcmp(a, "--config"))
				o->config = val;
			else if (!strcmp(a, "--json"))
				o->json = val;
			else if (!strcmp(a, "--backend"))
				o->backend = val;
			else if (!strcmp(a, "--artifacts"))
				o->artifacts = val;
			else if (!strcmp(a, "--fadc"))
				o->compiler = val;
			else if (!strcmp(a, "--gpus")) {
				o->ngpus = 0;
				for (const char *q = val;;) {
					char *end;
					long g = strtol(q, &end, 10);
					if (end == q || g < 0 || g > 1024 || o->ngpus == 64 || (*end && *end != ','))
						return usage_error("--gpus: '%s' is not a list of GPU numbers such as 0,1",
						                   val);
					o->gpus[o->ngpus++] = (int)g;
					if (!*end)
						break;
					q = end + 1;
				}
			} else if (!strcmp(a, "-D")) {
				if (o->ndefs == 64)
					return usage_error("too many -D options%s", "");
				o->defs[o->ndefs++] = val;
			} else if (!parse_int(val, &v))
				return usage_error("'%s' is not an integer", val);
			else if (!strcmp(a, "--num-iters")) {
				if (v < 0 || v > 1000000)
					return usage_error("--num-iters must be 0 .. 1000000, got %s", val);
				o->num_iters = (int)v;
			} else if (!strcmp(a, "--gpu")) {
				if (v < -2 || v > 1024)
					return usage_error("--gpu must be -2 (auto), -1 (the CPU) or a device number, "
					                   "got %s", val);
				o->gpu = (int)v;
			}
			else if (!strcmp(a, "--num-threads")) {
				if (v < 1 || v > 4096)
					return usage_error("--num-threads must be 1 .. 4096, got %s", val);
				o->num_threads = (int)v;
			} else {
				if (v < 0)
					return usage_error("--seed must be non-negative, got %s", val);
				o->seed = (uint64_t)v;
			}
		} else
			return usage_error("unknown option '%s'", a);
	}
	return -1;
}

// -D: well-formed, and each name once per scope (every model, or one):
// a second value is a typo, not an override.  0, or 2 (a usage error).
static int
check_defs(const Opts *o)
{
	for (int i = 0; i < o->ndefs; i++) {
		size_t ml;
		const char *nv = def_split(o->defs[i], &ml), *eq = strchr(nv, '=');
		if (!eq || eq == nv || (nv != o->defs[i] && !ml))
			return usage_error("-D '%s' is not [MODEL:]NAME=VALUE", o->defs[i]);
		for (int k = 0; k < i; k++) {
			size_t kl;
			const char *kv = def_split(o->defs[k], &kl);
			if (kl == ml && !strncmp(o->defs[k], o->defs[i], ml) && same_name(kv, nv)) {
				char msg[512];
				snprintf(msg, sizeof msg, "-D %.200s: '%.*s' is already given (-D %.200s)",
				         o->defs[i], (int)(eq - nv), nv, o->defs[k]);
				return usage_error("%s", msg);
			}
		}
	}
	return 0;
}

// Outputs are never inputs, nor each other: checked before anything
// runs (the models' sources are checked once the configuration names
// them).  Two outputs may share a device (--output /dev/null --json
// /dev/null), which is written in place.  0, or 1 (reported).
static int
check_outputs(const Opts *o)
{
	char ferr[4096 + 256];
	const char *outs[2] = {o->output, o->json};
	for (int i = 0; i < 2; i++)
		if (outs[i] && fio_check_not_input(outs[i], &o->config, 1, ferr, sizeof ferr)) {
			fprintf(stderr, "fadc-bench: %s %s\n", i ? "--json" : "--output", ferr);
			return 1;
		}
	if (o->output && o->json && !is_special(o->output) && same_output(o->output, o->json)) {
		fprintf(stderr, "fadc-bench: --output %s and --json %s are the same file\n", o->output,
		        o->json);
		return 1;
	}
	return 0;
}

// The backend named --backend into *be, and its model hooks (NULL for the
// interpreter, which compiles nothing) into *hk.  0, or 2 (a usage error).
static int
find_backend(const char *name, const Backend **be, const ModelHooks **hk)
{
	static const struct {
		const Backend *b;
		const ModelHooks *h;
	} backends[] = {{&backend_cpu, &backend_cpu_hooks}, {&backend_interp, NULL}};
	*be = NULL;
	*hk = NULL;
	for (size_t i = 0; i < sizeof backends / sizeof *backends; i++)
		if (!strcmp(name, backends[i].b->name))
			*be = backends[i].b, *hk = backends[i].h;
	if (!*be)
		return usage_error("unknown backend '%s' (this build has: cpu, interp)", name);
	return 0;
}

// The device, settled in o->gpu: auto is GPU 0 where a CUDA context can be
// made (the compiled backend only), else the CPU.  A GPU's name goes into
// gpu_name (for the JSON).  Flags that contradict each other are usage
// errors (2), as --check-reference with the interpreter is; a GPU that
// cannot be opened is 1; 0 goes on.
static int
choose_device(Opts *o, const Backend *be, const ModelHooks *hk, char *gpu_name, size_t n)
{
	gpu_name[0] = 0;
	if (o->ngpus) {
		// --gpus: the run's device is the list's first GPU (its results
		// land there); --gpu, if given too, must name it.
		if (o->gpu != -2 && o->gpu != o->gpus[0]) {
			char g[32];
			snprintf(g, sizeof g, "%d", o->gpu);
			return usage_error("--gpu %s and --gpus: the first GPU of --gpus is the run's device", g);
		}
		if (o->device_time)
			return usage_error("--device-time times one GPU's events: not with --gpus%s", "");
		o->gpu = o->gpus[0];
	}
	if (o->check_ref && !hk)
		return usage_error("--check-reference: the %s backend is the reference itself", be->name);
	if (o->gpu == -2) {
		fadc_context *gc = NULL;
		fadc_context_options go = {.device = {FADC_DEVICE_CUDA, 0}, .num_threads = 0, .seed = 0};
		o->gpu = hk && !o->compile_only && !fadc_context_create(&go, &gc) ? 0 : -1;
		fadc_context_destroy(gc);
	}
	if (o->gpu >= 0 && !hk) {
		char msg[128];
		snprintf(msg, sizeof msg, "--gpu %d: the %s backend runs on the CPU only", o->gpu, be->name);
		return usage_error("%s", msg);
	}
	if (o->device_time && o->gpu < 0 && !o->compile_only)
		return usage_error("--device-time needs a GPU (--gpu N; the CPU has no device clock)%s",
		                   "");
	if (o->gpu >= 0 && !o->compile_only) {
		fadc_context *gc = NULL;
		fadc_context_options go = {.device = {FADC_DEVICE_CUDA, o->gpu}, .num_threads = 0, .seed = 0};
		if (fadc_context_create(&go, &gc)) {
			fprintf(stderr, "fadc-bench: --gpu %d: %s\n", o->gpu, fadc_context_error(NULL));
			return 1;
		}
		snprintf(gpu_name, n, "%s", fadc_context_device_name(gc));
		fadc_context_destroy(gc);
	}
	return 0;
}

// What a run carries from model to model and cell to cell: its setting,
// where results go, and the counts its summary and exit status come from.
typedef struct Run {
	const Opts *o;
	const BenchConfig *cfg;
	const Backend *be;
	const ModelHooks *hk;
	const char *cdir; // the configuration's folder: sources are relative to it
	Table t;
	FILE *js;         // the JSON (--json), or NULL
	int ncell;        // cells written to the JSON, for its commas
	int rc, nfailed, nskipped;
	// Progress (a terminal only): the cells the run expects, counted with
	// the filters and skips of run_model, for "[k/N]" and the run's
	// estimate of time left (the mean time of the cells done so far).
	int tty, ntotal, ndone;
	double run_t0, done_time;
	char err[8192];
} Run;

// The JSON's environment: the machine, the run's setting and, for compiled
// backends, the runtime's versions, the compiler that --compile runs and
// what it says of its version.  Leaves the "cells" array open.
static void
json_environment(FILE *js, const Opts *o, const Backend *be, const ModelHooks *hk,
                 const char *gpu_name)
{
	char cpu[256];
	cpu_model(cpu, sizeof cpu);
	fprintf(js, "{\"environment\": {\"cpu\": ");
	json_str(js, cpu);
	fprintf(js, ", \"cores\": %ld, \"threads\": %d, \"gpu\": ", sysconf(_SC_NPROCESSORS_ONLN),
	        o->num_threads);
	if (gpu_name[0])
		json_str(js, gpu_name);
	else
		fputs("null", js);
	fprintf(js, ", \"backend\": ");
	json_str(js, be->name);
	fprintf(js, ", \"seed\": %llu, \"num_iters\": %d, \"timing\": \"%s\", \"config\": ",
	        (unsigned long long)o->seed, o->num_iters,
	        o->device_time ? "device events" : "host clock, call + synchronize");
	json_str(js, o->config);
	fprintf(js, ", \"consistency_checks\": %s", o->no_check ? "false" : "true");
	fprintf(js, ", \"fadc\": \"%s\"", FADC_VERSION);
	static const char *const keys[] = {"runtime", "compiler", "compiler_version"};
	for (size_t i = 0; hk && i < sizeof keys / sizeof *keys; i++) {
		const char *v = hk->info(keys[i]);
		fprintf(js, ", \"%s\": ", keys[i]);
		if (v)
			json_str(js, v);
		else
			fputs("null", js);
	}
	fprintf(js, "},\n \"cells\": [");
}

// What one timed cell found: its consistency check (e, sum_rel: check's),
// its reference check (re: reference's, -1 without --check-reference), and
// whether each failed.
typedef struct CellResult {
	double e, sum_rel, re;
	int bad, rbad;
} CellResult;

// The warm-up's checks: the consistency check against another strategy
// and, on request, the reference check against the interpreter, each
// reported on stderr as it fails.
static CellResult
check_cell(Run *r, const BenchModel *m, Prepared *p, const char *task, const char *source,
           const char *const *defs, int nd)
{
	const Opts *o = r->o;
	CellResult c = {.sum_rel = -1, .re = -1};
	// --no-check: as for a task without a partner (-1, "consistency_error":
	// null); the JSON's environment says the checks were off.
	c.e = o->no_check ? -1
	                  : check(r->be, p, task, source, defs, nd, o->seed, &c.sum_rel, r->err,
	                          sizeof r->err);
	// Test hook: FADC_BENCH_FAULT=check makes every check fail, so the
	// reporting path is tested (tests/bench/).
	const char *fault = getenv("FADC_BENCH_FAULT");
	if (fault && !strcmp(fault, "check") && c.e != -1)
		c.e = 1;
	// NaN (a NaN output) fails: "not within the tolerance", not "above it".
	c.bad = c.e == -2 || (c.e != -1 && !(c.e <= m->rtol));
	if (c.e == -2)
		fprintf(stderr, "fadc-bench: %s %s: consistency check could not run: %s\n", m->name,
		        task, r->err);
	else if (c.bad)
		fprintf(stderr, "fadc-bench: %s %s: INCONSISTENT: normalized error %g > %g\n",
		        m->name, task, c.e, m->rtol);
	// The reference check, on request: the same warm-up outputs
	// against the interpreter, within the model's rtol.
	if (o->check_ref) {
		char worst[128];
		c.re = reference(r->be, p, task, source, defs, nd, o->seed, worst, sizeof worst, r->err,
		                 sizeof r->err);
		c.rbad = !(c.re >= 0 && c.re <= m->rtol);
		if (c.re == -2)
			fprintf(stderr, "fadc-bench: %s %s: reference check could not run: %s\n",
			        m->name, task, r->err);
		else if (c.rbad)
			fprintf(stderr,
			        "fadc-bench: %s %s: REFERENCE MISMATCH: normalized error %g (tolerance "
			        "%g) in output %s\n",
			        m->name, task, c.re, m->rtol, worst);
	}
	return c;
}

// The timed runs of a cell into samples (--num-iters of them), with the
// progress line on a terminal; a failed run is reported and ends them.
// t0 is when the cell began.
static void
time_cell(Run *r, const BenchModel *m, Prepared *p, const char *task, double t0, double *samples)
{
	const Opts *o = r->o;
	for (int it = 0; it < o->num_iters; it++) {
		double s = now();
		if (r->be->run(p, r->err, sizeof r->err)) {
			fprintf(stderr, "fadc-bench: %s %s: %s\n", m->name, task, r->err);
			r->rc = 1;
			break;
		}
		samples[it] = now() - s;
		if (o->device_time && r->be->device_seconds)
			samples[it] = r->be->device_seconds(p);
		if (r->tty) {
			double el = now() - t0, cell_left = el / (it + 1) * (o->num_iters - it - 1);
			double per = r->ndone ? r->done_time / r->ndone : el + cell_left;
			int after = r->ntotal - r->ndone - 1;
			fprintf(stderr,
			        "\r[%d/%d] %s %s: iteration %d/%d, %.1fs elapsed, ~%.1fs left (run: "
			        "%.1fs elapsed, ~%.1fs left)  ",
			        r->ndone + 1, r->ntotal, m->name, task, it + 1, o->num_iters, el, cell_left,
			        now() - r->run_t0, cell_left + (after > 0 ? after : 0) * per);
		}
	}
	if (r->tty && o->num_iters)
		fputc('\n', stderr);
}

// One timed cell's entry of the JSON.
static void
json_cell(Run *r, const BenchModel *m, const char *task, const char *const *defs, int nd,
          const CellResult *c, double mean, double var, const double *samples, int64_t peak,
          double mean1)
{
	FILE *js = r->js;
	fprintf(js, "%s\n  {\"model\": ", r->ncell ? "," : "");
	json_str(js, m->name);
	fprintf(js, ", \"task\": ");
	json_str(js, task);
	fprintf(js, ", \"mean\": ");
	json_num(js, mean);
	fprintf(js, ", \"var\": ");
	json_num(js, var);
	fprintf(js, ", \"consistency_error\": ");
	json_num(js, c->e >= 0 ? c->e : NAN);
	fprintf(js, ", \"consistent\": %s", c->bad ? "false" : "true");
	// The runtime's high-water mark over the cell (bench/exec.h,
	// reset_peak): null for the interpreter, which has none.
	if (peak >= 0)
		fprintf(js, ", \"peak_memory_bytes\": %lld", (long long)peak);
	else
		fprintf(js, ", \"peak_memory_bytes\": null");
	if (c->sum_rel >= 0 || isnan(c->sum_rel)) {
		fprintf(js, ", \"consistency_sum_rel\": ");
		json_num(js, c->sum_rel);
	}
	if (r->o->check_ref) {
		fprintf(js, ", \"reference_error\": ");
		json_num(js, c->re >= 0 ? c->re : NAN);
		fprintf(js, ", \"reference_match\": %s", c->rbad ? "false" : "true");
	}
	fprintf(js, ", \"sizes\": [");
	for (int i = 0; i < nd; i++) {
		fprintf(js, "%s", i ? ", " : "");
		json_str(js, defs[i]);
	}
	fprintf(js, "]");
	static const char *const keys[] = {"artifact", "artifact_hash", "artifact_file_hash",
	                                     "artifact_options"};
	for (size_t i = 0; r->hk && i < sizeof keys / sizeof *keys; i++) {
		const char *v = r->hk->info(keys[i]);
		if (v) {
			fprintf(js, ", \"%s\": ", keys[i]);
			json_str(js, v);
		}
	}
	if (r->o->ngpus) {
		// --gpus: the first GPU alone, and what the GPUs gained over it.
		fprintf(js, ", \"gpus\": %d, \"one_gpu_mean\": ", r->o->ngpus);
		json_num(js, mean1);
		fprintf(js, ", \"speedup\": ");
		json_num(js, mean1 / mean);
		fprintf(js, ", \"parallel_efficiency\": ");
		json_num(js, mean1 / (r->o->ngpus * mean));
	}
	fprintf(js, ", \"samples\": [");
	for (int it = 0; it < r->o->num_iters; it++) {
		fprintf(js, "%s", it ? ", " : "");
		json_num(js, samples[it]);
	}
	fprintf(js, "]}");
}

// One cell, as the seed runs it: prepare (untimed), v from the seed, the
// warm-up and its checks, the timed runs, then the result line, the table
// and the JSON.  A cell that cannot run is reported and leaves the count
// of cells expected.
static void
run_cell(Run *r, const BenchModel *m, const char *task, const char *source,
         const char *const *defs, int nd)
{
	const Opts *o = r->o;
	const Backend *be = r->be;
	double t0 = now();
	// The peak counts from here: what the context holds already (the
	// declarations, which the peers count as their resident parameters)
	// plus this cell's inputs, arenas and outputs, its checks' too.
	if (be->reset_peak)
		be->reset_peak();
	Prepared *p = be->prepare(source, defs, nd, task, o->seed, r->err, sizeof r->err);
	if (!p) {
		fprintf(stderr, "fadc-bench: %s %s: %s\n", m->name, task, r->err);
		r->rc = 1;
		r->ntotal--;
		return;
	}
	for (int i = 0; i < be->ninputs(p); i++)
		fill_uniform(be->input(p, i), o->seed, "v");
	// Warm-up, then the consistency check.
	if (be->run(p, r->err, sizeof r->err)) {
		fprintf(stderr, "fadc-bench: %s %s: %s\n", m->name, task, r->err);
		be->release(p);
		r->rc = 1;
		r->ntotal--;
		return;
	}
	CellResult c = check_cell(r, m, p, task, source, defs, nd);
	double *samples = calloc((size_t)o->num_iters + 1, sizeof *samples);
	if (!samples) {
		fprintf(stderr, "fadc-bench: %s %s: out of memory\n", m->name, task);
		be->release(p);
		r->rc = 1;
		r->ntotal--;
		return;
	}
	time_cell(r, m, p, task, t0, samples);
	int64_t peak = be->peak_memory ? be->peak_memory() : -1;
	double mean, var;
	sample_stats(samples, o->num_iters, &mean, &var);
	char ms[40], vs[40], label[96];
	py_repr(mean, ms, sizeof ms);
	py_repr(var, vs, sizeof vs);
	printf("Results for model %s on task %s: %ss (var: %s)\n", m->name, task, ms, vs);
	// --gpus: the same iterations on the first GPU alone, timed the same
	// way (host clock around run + synchronize): the speed-up over one GPU
	// (t_1 / t_S) and the parallel efficiency (t_1 / (S t_S)).
	double mean1 = NAN;
	if (o->ngpus && be->run_single && o->num_iters) {
		double *s1 = calloc((size_t)o->num_iters + 1, sizeof *s1), v1;
		int ok = s1 != NULL;
		for (int it = 0; ok && it < o->num_iters; it++) {
			double st = now();
			if (be->run_single(p, r->err, sizeof r->err)) {
				fprintf(stderr, "fadc-bench: %s %s: %s\n", m->name, task, r->err);
				r->rc = 1;
				ok = 0;
			} else
				s1[it] = now() - st;
		}
		if (ok) {
			sample_stats(s1, o->num_iters, &mean1, &v1);
			printf("Speed-up of model %s on task %s over one GPU (GPU %d: %.6gs): %.3f on %d GPUs, "
			       "parallel efficiency %.3f\n",
			       m->name, task, o->gpus[0], mean1, mean1 / mean, o->ngpus,
			       mean1 / (o->ngpus * mean));
		}
		free(s1);
	}
	fflush(stdout);
	snprintf(label, sizeof label, "%s%s%s", task, c.bad ? " [inconsistent]" : "",
	         c.rbad ? " [reference mismatch]" : "");
	if (table_add(&r->t, m->name, label, mean, var)) {
		fprintf(stderr, "fadc-bench: %s %s: out of memory\n", m->name, task);
		r->rc = 1;
	} else
		r->t.cell[r->t.n - 1].peak = peak;
	r->nfailed += c.bad || c.rbad;
	if (r->js)
		json_cell(r, m, task, defs, nd, &c, mean, var, samples, peak, mean1);
	r->ncell++;
	r->ndone++;
	r->done_time += now() - t0;
	free(samples);
	be->release(p);
}

// The JSON entries of a model's cells that were skipped, each with why.
static void
json_skipped(Run *r, const BenchModel *m, const char *const *cells, int ncells)
{
	FILE *js = r->js;
	for (int ci = 0; js && ci < ncells; ci++) {
		fprintf(js, "%s\n  {\"model\": ", r->ncell++ ? "," : "");
		json_str(js, m->name);
		fprintf(js, ", \"task\": ");
		json_str(js, cells[ci]);
		fprintf(js, ", \"skipped\": ");
		json_str(js, r->err);
		fprintf(js, "}");
	}
}

// One model of the configuration: skipped where the filters or the
// configuration say so; else its sizes, its artifact opened (a compiled
// backend builds every task its cells prepare into one) and its cells run.
static void
run_model(Run *r, const BenchModel *m)
{
	const Opts *o = r->o;
	const BenchConfig *cfg = r->cfg;
	if (!keep(o->model_filter, m->name))
		return;
	char source[4096 + 600];
	model_source(source, sizeof source, r->cdir, m->source); // readable: check_selection
	if (o->gpu < 0 && bench_in_list(cfg->skip_cpu, cfg->nskip_cpu, m->name)) {
		fprintf(stderr, "fadc-bench: model %s is skipped on the CPU (configuration)\n", m->name);
		return;
	}
	if (o->gpu >= 0 && bench_in_list(cfg->skip_cuda, cfg->nskip_cuda, m->name)) {
		fprintf(stderr, "fadc-bench: model %s is skipped on CUDA (configuration)\n", m->name);
		return;
	}
	// Sizes: one value per name (model_defs).
	const char *defs[BENCH_MAXDEF + 64];
	int nd = model_defs(o, m, defs);
	// The model's cells, and every task they prepare (their consistency
	// partners too): a compiled backend builds them into one artifact.
	const char *cells[BENCH_MAXTASK], *need[2 * BENCH_MAXTASK];
	int ncells = model_cells(o, cfg, m, cells), nneed = 0;
	for (int i = 0; i < 2 * ncells; i++) {
		const char *nt = i < ncells ? cells[i]
		                 : o->no_check ? NULL
		                               : partner_of(cells[i - ncells], NULL);
		int dup = !nt;
		for (int k = 0; k < nneed && !dup; k++)
			dup = !strcmp(need[k], nt);
		if (!dup)
			need[nneed++] = nt;
	}
	if (!ncells)
		return;
	const ModelHooks *hk = r->hk;
	int opened = hk ? hk->open_model(source, defs, nd, need, nneed, r->err, sizeof r->err) : 0;
	if (!hk && bench_is_artifact(source)) {
		snprintf(r->err, sizeof r->err, "%s is a compiled artifact: the %s backend needs the .ir",
		         source, r->be->name);
		opened = -1;
	}
	if (opened == 1) {
		fprintf(stderr, "fadc-bench: %s: compiled %s\n", m->name, r->err);
		return;
	}
	if (opened) {
		// Reported and skipped (a model the backend cannot compile yet,
		// a missing artifact): the run goes on with the other models.
		fprintf(stderr, "fadc-bench: %s: skipped (%d cell%s): %s\n", m->name, ncells,
		        ncells == 1 ? "" : "s", r->err);
		json_skipped(r, m, cells, ncells);
		r->nskipped += ncells;
		r->ntotal -= ncells;
		r->rc = 1;
		return;
	}
	for (int ci = 0; ci < ncells; ci++)
		run_cell(r, m, cells[ci], source, defs, nd);
	if (hk)
		hk->close_model();
}

// fadc-bench's run: the options and the device settled, the configuration
// loaded and its selection checked, the backend configured and the
// outputs opened (so that a path that cannot be written fails before the
// run rather than after it), then every model, then the outputs
// committed (also when cells failed: the table says which ran) and the
// failures counted.
static int
cmd_run(int argc, char **argv)
{
	Opts o = {.num_iters = 10, .gpu = -2, .num_threads = 10, .backend = "cpu"};
	static char defcfg[4096];
	snprintf(defcfg, sizeof defcfg, "%s/bench/bench.yaml", data_dir(NULL));
	o.config = defcfg;
	int st = parse_opts(argc, argv, &o);
	if (st >= 0)
		return st;
	const Backend *be;
	const ModelHooks *hk;
	char gpu_name[256];
	if ((st = check_defs(&o)) || (st = check_outputs(&o)) ||
	    (st = find_backend(o.backend, &be, &hk)) ||
	    (st = choose_device(&o, be, hk, gpu_name, sizeof gpu_name)))
		return st;
	Run *r = calloc(1, sizeof *r);
	BenchConfig *cfg = calloc(1, sizeof *cfg);
	if (!r || !cfg || bench_config_load(o.config, cfg, r->err, sizeof r->err)) {
		fprintf(stderr, "%s\n", r && cfg ? r->err : "fadc-bench: out of memory");
		free(cfg);
		free(r);
		return 1;
	}
	// The configuration's folder: sources are relative to it.
	char cdir[4096];
	snprintf(cdir, sizeof cdir, "%s", o.config);
	char *slash = strrchr(cdir, '/');
	if (slash)
		*slash = 0;
	else
		snprintf(cdir, sizeof cdir, ".");
	*r = (Run){.o = &o, .cfg = cfg, .be = be, .hk = hk, .cdir = cdir};
	if (check_selection(&o, cfg, cdir)) {
		free(cfg);
		free(r);
		return 1;
	}
	// An installed fadc-bench keeps its artifacts in the cache folder
	// (~/.cache/fadc/artifacts): PREFIX/artifacts, the build tree's
	// default, is no place to write.
	static char cache_art[4096 + 16];
	int installed;
	data_dir(&installed);
	if (hk && !o.artifacts && installed && fio_cache_dir(cache_art, sizeof cache_art - 16)) {
		strcat(cache_art, "/artifacts");
		o.artifacts = cache_art;
	}
	if (hk) {
		BackendOptions bo = {o.artifacts, o.compiler,   o.compile,       o.num_threads,
		                     o.seed,      o.gpu,        o.compile_only,  o.device_time,
		                     o.gpus,      o.ngpus};
		if (hk->configure(&bo, r->err, sizeof r->err)) {
			fprintf(stderr, "fadc-bench: %s\n", r->err);
			free(cfg);
			free(r);
			return 1;
		}
	}
	FioOut jo, to;
	if (o.output && out_open(&to, o.output)) {
		free(cfg);
		free(r);
		return 1;
	}
	if (o.json) {
		if (out_open(&jo, o.json)) {
			if (o.output)
				fio_out_abort(&to);
			free(cfg);
			free(r);
			return 1;
		}
		r->js = fio_out_file(&jo);
		json_environment(r->js, &o, be, hk, gpu_name);
	}
	table_init(&r->t);
	r->tty = isatty(2);
	r->run_t0 = now();
	for (int mi = 0; r->tty && mi < cfg->nmodel; mi++) {
		const BenchModel *m = &cfg->model[mi];
		const char *cells[BENCH_MAXTASK];
		if (keep(o.model_filter, m->name) && !device_skip(&o, cfg, m))
			r->ntotal += model_cells(&o, cfg, m, cells);
	}
	for (int mi = 0; mi < cfg->nmodel; mi++)
		run_model(r, &cfg->model[mi]);
	int rc = r->rc, nskipped = r->nskipped, nfailed = r->nfailed;
	if (r->js) {
		fprintf(r->js, "\n]}\n");
		if (out_commit(&jo))
			rc = 1;
	}
	if (o.output) {
		(r->o->memory ? table_write_markdown_memory : table_write_markdown)(fio_out_file(&to), &r->t);
		if (out_commit(&to))
			rc = 1;
	}
	if (nskipped)
		fprintf(stderr, "fadc-bench: %d cell%s skipped\n", nskipped, nskipped == 1 ? "" : "s");
	if (nfailed)
		fprintf(stderr, "fadc-bench: %d cell%s failed the consistency%s check\n", nfailed,
		        nfailed == 1 ? "" : "s", o.check_ref ? " or the reference" : "");
	table_free(&r->t);
	free(cfg);
	free(r);
	return rc;
}

int
main(int argc, char **argv)
{
	// Temporary outputs (--output, --json, artifacts being compiled) are
	// removed on INT, TERM and HUP.
	fio_cleanup_enable();
	if (argc > 1 && !strcmp(argv[1], "compare"))
		return cmd_compare(argc - 2, argv + 2);
	return cmd_run(argc - 1, argv + 1);
}
