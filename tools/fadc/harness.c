// tools/fadc/harness.c -- compiled code against the reference interpreter.
//
// cg_check compiles a module, loads the artifact through the public
// runtime (include/fadc.h), and for every task compares the outputs with
// ir_interp on the very same inputs: the declarations' values come from
// ir_module_init (float64, rounded to the declared f32) and are bound into
// the model, so both sides start from identical bits; the caller's inputs
// (v, forward's arguments) are U[0, 1) draws of the Philox generator.  The
// init tasks are checked first, against ir_module_init itself.
//
// It lives beside `fadc check`, not in the compiler library: it runs the
// runtime, which the compiler itself never does (library fadc_harness, also
// linked by the unit tests of codegen and the runtime).
//
// The error of one output is ir_err_value's (ir.h), the measure that
// `fadc compare-npy` uses too: max_i |got_i - want_i| / max_i
// max(|got_i|, |want_i|); NaN must meet NaN and an infinity itself.
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fadc.h"
#include "fileio.h"
#include "harness.h"
#include "passes.h"

static double
nerr(const double *want, const double *got, int64_t n)
{
	IrErr e = {0};
	for (int64_t i = 0; i < n; i++)
		ir_err_add(&e, got[i], want[i]);
	return ir_err_value(&e);
}

static void
to_host(fadc_dtype dt, const double *src, void *dst, int64_t n)
{
	for (int64_t i = 0; i < n; i++)
		switch (dt) {
		case FADC_F32:
			((float *)dst)[i] = (float)src[i];
			break;
		case FADC_F64:
			((double *)dst)[i] = src[i];
			break;
		case FADC_I64:
			((int64_t *)dst)[i] = (int64_t)src[i];
			break;
		case FADC_BOOL:
			((uint8_t *)dst)[i] = src[i] != 0;
			break;
		}
}

static void
from_host(fadc_dtype dt, const void *src, double *dst, int64_t n)
{
	for (int64_t i = 0; i < n; i++)
		switch (dt) {
		case FADC_F32:
			dst[i] = ((const float *)src)[i];
			break;
		case FADC_F64:
			dst[i] = ((const double *)src)[i];
			break;
		case FADC_I64:
			dst[i] = (double)((const int64_t *)src)[i];
			break;
		case FADC_BOOL:
			dst[i] = ((const uint8_t *)src)[i];
			break;
		}
}

static fadc_dtype
fdt(DType t)
{
	// The same code (support/dtypes.def; runtime/rt.c asserts it).
	int c = ir_dtype_code(t);
	return c < 0 ? FADC_F32 : (fadc_dtype)c;
}

// A host tensor of the runtime holding an interpreter tensor's values.
static fadc_tensor *
make_tensor(fadc_context *ctx, const Tensor *t)
{
	fadc_tensor *r;
	if (fadc_tensor_create(ctx, fdt(t->dtype), t->shape.rank, t->shape.dim, &r))
		return NULL;
	to_host(fdt(t->dtype), t->data, fadc_tensor_data(r), ir_numel(&t->shape));
	return r;
}

// Values of a task graph above which `fadc check` warns, on a terminal,
// that the interpreter will be slow: 5e7 f64 values are 400 MB, seconds
// to minutes of one thread (resnet18 at full size: 1e9 and more).
// $FADC_CHECK_LARGE_VALUES replaces it (tests/cli/cli-progress.sh).
#define CHECK_LARGE_VALUES 5e7

int
cg_check(const Module *m, const CgOptions *o, const CgCheck *c, FILE *report, char *err,
         size_t errlen)
{
	char so[4200];
	const char *tmp = getenv("TMPDIR");
	snprintf(so, sizeof so, "%s/fadc-check.XXXXXX", tmp && *tmp ? tmp : "/tmp");
	int fd = mkstemp(so);
	if (fd < 0) {
		snprintf(err, errlen, "error: cannot make a temporary file in %s: %s",
		         tmp && *tmp ? tmp : "/tmp", strerror(errno));
		return -1;
	}
	close(fd);
	// Removed on SIGINT/SIGTERM too (fileio.h): a check is a long compile.
	int reg = fio_cleanup_add(so, 0);
	int nfail = -1;
	fadc_context *ctx = NULL;
	fadc_model *fm = NULL;
	Tensor *vals = calloc(m->ndecl + 1, sizeof *vals);
	int have_vals = 0;
	double worst = 0;
	int nout = 0;
	if (!vals) {
		snprintf(err, errlen, "error: out of memory");
		goto done;
	}
	if (o->progress)
		o->progress(o->progress_arg, "compiling", 0, 0);
	if (!cg_compile_module(m, o, so, err, errlen))
		goto done;
	fadc_context_options co = {.device = {FADC_DEVICE_CPU, 0}, .num_threads = 0, .seed = c->seed};
	if (fadc_context_create(&co, &ctx) || fadc_model_open(ctx, so, 0, &fm)) {
		snprintf(err, errlen, "error: %s", ctx ? fadc_context_error(ctx) : "no context");
		goto done;
	}
	if (!ir_module_init(m, NULL, NULL, vals, c->seed, err, errlen))
		goto done;
	have_vals = 1;
	nfail = 0;
	// The initializers, against ir_module_init.
	if (fadc_model_init(fm, c->seed)) {
		snprintf(err, errlen, "error: %s", fadc_context_error(ctx));
		nfail = -1;
		goto done;
	}
	for (uint32_t i = 0; i < m->ndecl; i++) {
		if (!m->decl[i].init)
			continue;
		fadc_tensor *t;
		fadc_model_get(fm, m->decl[i].name, &t);
		int64_t n = ir_numel(&vals[i].shape);
		double *got = calloc((size_t)n + 1, sizeof *got);
		from_host(fdt(vals[i].dtype), fadc_tensor_data(t), got, n);
		double e = nerr(vals[i].data, got, n);
		free(got);
		int bad = !(e <= c->init_tol);
		nfail += bad;
		if (report && (c->verbose || bad))
			fprintf(report, "%-16s %-28s err %.3g%s\n", "init", m->decl[i].name, e,
			        bad ? "  FAIL" : "");
	}
	// Every task on identical inputs: bind the interpreter's values.
	for (uint32_t i = 0; i < m->ndecl; i++) {
		fadc_tensor *t = make_tensor(ctx, &vals[i]);
		if (!t || fadc_model_bind(fm, m->decl[i].name, t)) {
			snprintf(err, errlen, "error: binding %s: %s", m->decl[i].name, fadc_context_error(ctx));
			fadc_tensor_release(t);
			nfail = -1;
			goto done;
		}
		fadc_tensor_release(t);
	}
	int nuser = 0; // the tasks checked (progress): initializers are above
	for (int ti = 0; ti < fadc_model_task_count(fm); ti++) {
		fadc_task_info info;
		fadc_task_info_get(fm, ti, &info);
		nuser += !info.is_init;
	}
	for (int ti = 0; ti < fadc_model_task_count(fm); ti++) {
		fadc_task_info info;
		fadc_task_info_get(fm, ti, &info);
		if (info.is_init)
			continue;
		Loc loc;
		char msg[1024];
		PassOpts po = {.no_scan_hoist = 1}; // the oracle: the loops as derived
		Graph *g = pass_task(m->main, info.name, &po, &loc, msg, sizeof msg);
		if (!g) {
			snprintf(err, errlen, "error: task %s: %s", info.name, msg);
			nfail = -1;
			goto done;
		}
		Tensor *in = calloc(g->ninput + 1, sizeof *in), *want = calloc(g->nout + 1, sizeof *want);
		Tensor *extra = calloc(g->ninput + 1, sizeof *extra);
		fadc_tensor **cin = calloc(g->ninput + 1, sizeof *cin);
		fadc_tensor **cout = calloc(g->nout + 1, sizeof *cout);
		int ncaller = 0, ok = in && want && extra && cin && cout;
		for (uint32_t k = 0; ok && k < g->ninput; k++) {
			int d = ir_module_find_decl(m, g->input[k].name);
			if (d >= 0 && g->input[k].kind != IN_ARG) {
				in[k] = vals[d];
				continue;
			}
			NodeId n = g->input[k].node;
			ok = ir_tensor_alloc(&extra[k], (DType)g->node[n].dtype, ir_shape(g, n));
			int64_t ne = ir_numel(ir_shape(g, n));
			int isf = ir_dtype_is_float((DType)g->node[n].dtype);
			for (int64_t j = 0; ok && j < ne; j++) {
				double u = ir_rand_uniform(c->seed + 1000 + (uint64_t)k, 0, (uint64_t)j);
				extra[k].data[j] = isf ? (g->node[n].dtype == DT_F32 ? (double)(float)u : u) : 0;
			}
			in[k] = extra[k];
			if (ok && !(cin[ncaller++] = make_tensor(ctx, &extra[k])))
				ok = 0;
		}
		char ierr[512] = "";
		if (ok && o->progress) {
			// The interpreter computes every value of the graph in f64, one
			// thread: a model at full size takes minutes (resnet18's vjp),
			// so say so before it starts, with the way out.
			double nvals = 0;
			for (NodeId n = 1; n < g->nnode; n++)
				nvals += (double)ir_numel(ir_shape(g, n));
			const char *lv = getenv("FADC_CHECK_LARGE_VALUES"); // a test hook
			double large = lv && *lv ? strtod(lv, NULL) : CHECK_LARGE_VALUES;
			if (nvals > large) {
				char w[512];
				snprintf(w, sizeof w,
				         "warning: task '%s': the float64 interpreter computes %.3g "
				         "values (%.3g GB), which may take minutes; reduce the sizes "
				         "with -D NAME=VALUE",
				         info.name, nvals, nvals * 8 / 1e9);
				o->progress(o->progress_arg, w, 0, 0);
			}
			char st[160];
			snprintf(st, sizeof st, "task %s: the float64 interpreter", info.name);
			o->progress(o->progress_arg, st, ti + 1, nuser);
		}
		if (ok && !ir_interp(g, in, want, c->seed, ierr, sizeof ierr)) {
			snprintf(err, errlen, "error: task %s: the interpreter: %s", info.name, ierr);
			ok = 0;
		}
		if (ok && o->progress) {
			char st[160];
			snprintf(st, sizeof st, "task %s: compiled code", info.name);
			o->progress(o->progress_arg, st, ti + 1, nuser);
		}
		if (ok && fadc_run(fm, ti, cin, ncaller, cout, (int)g->nout)) {
			snprintf(err, errlen, "error: task %s: %s", info.name, fadc_context_error(ctx));
			ok = 0;
		}
		if (o->progress) // the report goes to the terminal too: the line off
			o->progress(o->progress_arg, "", 0, 0);
		for (uint32_t o2 = 0; ok && o2 < g->nout; o2++) {
			int64_t n = ir_numel(&want[o2].shape);
			double *got = calloc((size_t)n + 1, sizeof *got);
			from_host(fadc_tensor_dtype(cout[o2]), fadc_tensor_data(cout[o2]), got, n);
			double e = nerr(want[o2].data, got, n);
			free(got);
			int bad = !(e <= c->tol);
			nfail += bad;
			nout++;
			if (e > worst || isnan(e))
				worst = isnan(e) ? INFINITY : e;
			if (report && (c->verbose || bad)) {
				char ts[128];
				ir_type_str(want[o2].dtype, &want[o2].shape, ts, sizeof ts);
				fprintf(report, "%-16s %-28s %-16s err %.3g%s\n", info.name, g->out[o2].name, ts, e,
				        bad ? "  FAIL" : "");
			}
		}
		for (uint32_t k = 0; k < g->ninput; k++)
			ir_tensor_free(&extra[k]);
		for (uint32_t k = 0; want && k < g->nout; k++)
			ir_tensor_free(&want[k]);
		for (int k = 0; cin && k < ncaller; k++)
			fadc_tensor_release(cin[k]);
		free(in);
		free(want);
		free(extra);
		free(cin);
		free(cout);
		ir_graph_free(g);
		if (!ok) {
			nfail = -1;
			goto done;
		}
	}
	if (report)
		fprintf(report, "check %s: %d outputs, largest normalized error %.3g (tolerance %g): %s\n",
		        m->name ? m->name : "model", nout, worst, c->tol, nfail ? "FAIL" : "ok");
done:
	if (have_vals)
		for (uint32_t i = 0; i < m->ndecl; i++)
			ir_tensor_free(&vals[i]);
	free(vals);
	fadc_model_close(fm);
	fadc_context_destroy(ctx);
	unlink(so);
	fio_cleanup_drop(reg);
	return nfail;
}
