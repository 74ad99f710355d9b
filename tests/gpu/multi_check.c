// tests/gpu/multi_check.c -- data-parallel runs over several GPUs
// (runtime/multi.c, docs/MULTIGPU.md) against one GPU.
//
//   multi_check ARTIFACT TASK GPUS [ITERS]
//
// ARTIFACT holds TASK at the full batch (its first specialisation) and at
// the shard sizes (fadc -D N=n,n_s ...).  The task runs on one GPU (GPUS's
// first, an ordinary context) on the full batch, and on a context over
// GPUS ("0,1"; a single GPU goes through NCCL with one rank when
// FADC_MULTI_FORCE=1), with the same caller inputs (deterministic: f32
// sin(0.37 i + 1), i64 0; a scalar input, vjp's seed, 1); every output of
// the multi run must equal the one-GPU run within 1e-5 (normalized: max
// |a - b| / max |b|), at the first run (eager, sub-GPUs recording) and at
// a later one (replayed graphs).  Declarations come from the artifact's
// initializers (the same seed on both).
//
// With ITERS > 0 it then times ITERS runs of each (after two warm-up
// runs, host wall clock around the runs, each context synchronized before
// the clock stops): "time: one GPU X ms, S GPUs Y ms, speed-up X/Y,
// parallel efficiency X/(S Y)".
//
// With MULTI_EMULATE=1 in the environment it also runs the shards one
// after another on the one-GPU context (the batched declarations bound to
// their rows, rt_multi_rows; the shard tasks of the artifact) and combines
// them on the host in float64 with rt_multi_weight's weights, then prints
// how far the multi run is from that emulation (the runtime's own error:
// the all-reduce's order and its f32 pre-multiplication) and how far the
// full-batch run is (the error of the shard kernels' other rounding), to
// tell the two apart.  Batched caller inputs are not emulated (the
// declarations' only).
//
// Exit 0: equal; 1: not equal or an error; 77: no GPU (or fewer than
// GPUS lists).
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fadc.h"
#include "multi.h" // rt_multi_shard, _weight, _rows, _batch_parse: the arithmetic under test

#define TOL 1e-5

static double
now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

typedef struct Side {
	fadc_context *ctx;
	fadc_model *m;
	int task;
	fadc_task_info info;
	fadc_tensor *in[16];
} Side;

static int
side_open(Side *sd, const fadc_context_options *o, const char *path, const char *task)
{
	if (fadc_context_create(o, &sd->ctx)) {
		// No GPU, or fewer than listed: a skip (the message says which);
		// NCCL missing or failing: an error.
		fprintf(stderr, "multi_check: context: %s\n", fadc_context_error(NULL));
		return strstr(fadc_context_error(NULL), "NCCL") ? 1 : 77;
	}
	if (fadc_model_open(sd->ctx, path, 0, &sd->m) || fadc_model_find_task(sd->m, task, &sd->task) ||
	    fadc_task_info_get(sd->m, sd->task, &sd->info)) {
		fprintf(stderr, "multi_check: %s: %s\n", path, fadc_context_error(sd->ctx));
		return 1;
	}
	if (sd->info.ncaller > 16)
		return 1;
	int c = 0;
	for (int i = 0; i < sd->info.ninputs; i++) {
		fadc_tensor_desc d;
		fadc_task_input(sd->m, sd->task, i, &d);
		if (d.role != FADC_ROLE_INPUT)
			continue;
		fadc_tensor *t;
		if (fadc_tensor_create(sd->ctx, d.dtype, d.rank, d.dim, &t))
			return 1;
		int64_t n = fadc_tensor_numel(t);
		size_t b = fadc_tensor_bytes(t);
		void *h = calloc(1, b + 8);
		if (d.dtype == FADC_F32)
			for (int64_t k = 0; k < n; k++)
				((float *)h)[k] = n == 1 ? 1.0f : (float)sin(0.37 * (double)k + 1);
		else if (d.dtype == FADC_F64)
			for (int64_t k = 0; k < n; k++)
				((double *)h)[k] = n == 1 ? 1.0 : sin(0.37 * (double)k + 1);
		fadc_tensor_write(t, h, b);
		free(h);
		sd->in[c++] = t;
	}
	return 0;
}

static int
side_run(Side *sd, fadc_tensor **out)
{
	for (int k = 0; k < sd->info.noutputs; k++)
		out[k] = NULL;
	if (fadc_run(sd->m, sd->task, sd->in, sd->info.ncaller, out, sd->info.noutputs)) {
		fprintf(stderr, "multi_check: run: %s\n", fadc_context_error(sd->ctx));
		return 1;
	}
	return 0;
}

// The worst normalized difference of the outputs of a and b.
static double
compare(Side *a, fadc_tensor **oa, fadc_tensor **ob)
{
	double worst = 0;
	for (int k = 0; k < a->info.noutputs; k++) {
		size_t n = fadc_tensor_bytes(oa[k]);
		if (n != fadc_tensor_bytes(ob[k]))
			return INFINITY;
		void *x = malloc(n + 8), *y = malloc(n + 8);
		if (fadc_tensor_read(oa[k], x, n) || fadc_tensor_read(ob[k], y, n)) {
			free(x);
			free(y);
			return INFINITY;
		}
		int64_t ne = fadc_tensor_numel(oa[k]);
		int f64 = fadc_tensor_dtype(oa[k]) == FADC_F64;
		double mw = 0, md = 0;
		for (int64_t i = 0; i < ne; i++) {
			double u = f64 ? ((double *)x)[i] : ((float *)x)[i];
			double v = f64 ? ((double *)y)[i] : ((float *)y)[i];
			if (!isfinite(u) || !isfinite(v))
				md = INFINITY;
			mw = fmax(mw, fabs(u));
			md = fmax(md, fabs(u - v));
		}
		double e = md / (mw > 0 ? mw : 1);
		fadc_tensor_desc d;
		fadc_task_output(a->m, a->task, k, &d);
		printf("  %-40s %10lld elements  normalized difference %.3e\n", d.name, (long long)ne, e);
		worst = fmax(worst, e);
		free(x);
		free(y);
	}
	return worst;
}

static double
time_runs(Side *sd, int iters)
{
	fadc_tensor *out[64];
	for (int i = 0; i < 2; i++)
		if (side_run(sd, out))
			return -1;
	fadc_context_synchronize(sd->ctx);
	double t0 = now();
	for (int i = 0; i < iters; i++)
		if (side_run(sd, out))
			return -1;
	if (fadc_context_synchronize(sd->ctx))
		return -1;
	return (now() - t0) / iters;
}

// The bytes of every output, concatenated (malloc'ed; *len its size).
static char *
outputs_bytes(Side *sd, fadc_tensor **o, size_t *len)
{
	size_t n = 0;
	for (int k = 0; k < sd->info.noutputs; k++)
		n += fadc_tensor_bytes(o[k]);
	char *b = malloc(n + 1);
	*len = 0;
	for (int k = 0; b && k < sd->info.noutputs; k++) {
		if (fadc_tensor_read(o[k], b + *len, fadc_tensor_bytes(o[k]))) {
			free(b);
			return NULL;
		}
		*len += fadc_tensor_bytes(o[k]);
	}
	return b;
}

// The emulation (see the top): the shards in turn on sd's context, their
// outputs weighted into acc (float64, one array per output).
static int
emulate(Side *sd, int S, double **acc)
{
	RtBatch b;
	if (rt_multi_batch_parse(fadc_model_info(sd->m, "options"), &b) != 1) {
		fprintf(stderr, "multi_check: the artifact declares no batch\n");
		return 1;
	}
	int64_t n = -1;
	fadc_tensor *full[32] = {0};
	void *fullh[32] = {0};
	for (int i = 0; i < b.n; i++) {
		if (fadc_model_get(sd->m, b.name[i], &full[i])) {
			fprintf(stderr, "multi_check: emulation: '%s' is no declaration (batched caller "
			        "inputs are not emulated)\n", b.name[i]);
			return 1;
		}
		n = fadc_tensor_dims(full[i])[b.axis[i]];
		fullh[i] = malloc(fadc_tensor_bytes(full[i]) + 8);
		fadc_tensor_read(full[i], fullh[i], fadc_tensor_bytes(full[i]));
	}
	int rc = 0;
	for (int s = 0; s < S && !rc; s++) {
		int64_t off, rows;
		rt_multi_shard(n, S, s, &off, &rows);
		double w = rt_multi_weight(b.loss, n, rows, S, NULL);
		for (int i = 0; i < b.n; i++) {
			int64_t dim[FADC_MAXDIM];
			int rank = fadc_tensor_rank(full[i]);
			memcpy(dim, fadc_tensor_dims(full[i]), sizeof(int64_t) * (size_t)rank);
			fadc_dtype dt = fadc_tensor_dtype(full[i]);
			int64_t sdim[FADC_MAXDIM];
			memcpy(sdim, dim, sizeof sdim);
			sdim[b.axis[i]] = rows;
			fadc_tensor *h;
			fadc_tensor_create(sd->ctx, dt, rank, sdim, &h);
			void *part = malloc(fadc_tensor_bytes(h) + 8);
			rt_multi_rows(part, fullh[i], rank, dim, b.axis[i], off, rows, fadc_dtype_size(dt), 0,
			              dt, 1);
			fadc_tensor_write(h, part, fadc_tensor_bytes(h));
			free(part);
			if (fadc_model_bind(sd->m, b.name[i], h)) // only the shard size's declaration
				rc = 1;
			fadc_tensor_release(h);
		}
		// The shard's task: the first of the task's name whose batched
		// declarations are `rows` long (the first fadc_model_find_task_for
		// by its caller inputs, which are the full batch's otherwise).
		fadc_task_info fi;
		fadc_task_info_get(sd->m, sd->task, &fi);
		int task = -1;
		for (int t = 0; t < fadc_model_task_count(sd->m) && task < 0; t++) {
			fadc_task_info ti;
			fadc_task_info_get(sd->m, t, &ti);
			if (strcmp(ti.name, fi.name) || ti.is_init)
				continue;
			int fits = 1;
			for (int k = 0; k < ti.ninputs; k++) {
				fadc_tensor_desc d;
				fadc_task_input(sd->m, t, k, &d);
				for (int i = 0; i < b.n; i++)
					if (!strcmp(d.name, b.name[i]))
						fits &= d.dim[b.axis[i]] == rows;
			}
			if (fits)
				task = t;
		}
		if (task < 0) {
			fprintf(stderr, "multi_check: emulation: no task at %lld rows\n", (long long)rows);
			rc = 1;
			break;
		}
		fadc_tensor *out[64] = {0};
		if (rc || fadc_run(sd->m, task, sd->in, sd->info.ncaller, out, sd->info.noutputs)) {
			fprintf(stderr, "multi_check: emulation: %s\n", fadc_context_error(sd->ctx));
			rc = 1;
			break;
		}
		for (int k = 0; k < sd->info.noutputs; k++) {
			size_t nb = fadc_tensor_bytes(out[k]);
			void *x = malloc(nb + 8);
			fadc_tensor_read(out[k], x, nb);
			int f64 = fadc_tensor_dtype(out[k]) == FADC_F64;
			for (int64_t i = 0; i < fadc_tensor_numel(out[k]); i++)
				acc[k][i] += w * (f64 ? ((double *)x)[i] : ((float *)x)[i]);
			free(x);
		}
	}
	for (int i = 0; i < b.n; i++) {
		// The full batch's declarations back as they were (for the runs after).
		fadc_model_bind(sd->m, b.name[i], full[i]);
		free(fullh[i]);
	}
	return rc;
}

// The worst normalized difference of the outputs o (tensors) from acc.
static double
compare_acc(Side *sd, fadc_tensor **o, double **acc, const char *what)
{
	double worst = 0;
	printf(" %s:\n", what);
	for (int k = 0; k < sd->info.noutputs; k++) {
		size_t nb = fadc_tensor_bytes(o[k]);
		void *x = malloc(nb + 8);
		fadc_tensor_read(o[k], x, nb);
		int f64 = fadc_tensor_dtype(o[k]) == FADC_F64;
		double mw = 0, md = 0;
		for (int64_t i = 0; i < fadc_tensor_numel(o[k]); i++) {
			double u = f64 ? ((double *)x)[i] : ((float *)x)[i];
			mw = fmax(mw, fabs(acc[k][i]));
			md = fmax(md, fabs(u - acc[k][i]));
		}
		free(x);
		fadc_tensor_desc d;
		fadc_task_output(sd->m, sd->task, k, &d);
		double e = md / (mw > 0 ? mw : 1);
		printf("  %-40s normalized difference %.3e\n", d.name, e);
		worst = fmax(worst, e);
	}
	return worst;
}

int
main(int argc, char **argv)
{
	if (argc < 4) {
		fprintf(stderr, "usage: multi_check ARTIFACT TASK GPUS [ITERS]\n");
		return 2;
	}
	const char *path = argv[1], *task = argv[2];
	fadc_device dev[FADC_MAX_DEVICES];
	int nd = 0;
	for (const char *p = argv[3]; *p && nd < FADC_MAX_DEVICES;) {
		char *end;
		long g = strtol(p, &end, 10);
		if (end == p || g < 0)
			return 2;
		dev[nd++] = (fadc_device){FADC_DEVICE_CUDA, (int)g};
		p = *end == ',' ? end + 1 : end;
	}
	int iters = argc > 4 ? atoi(argv[4]) : 0;
	Side one = {0}, many = {0};
	fadc_context_options om = {.device = {FADC_DEVICE_CUDA_LIST, 0}, .num_threads = 0, .seed = 0,
	                           .devices = dev, .ndevices = nd};
	int rc = side_open(&many, &om, path, task);
	if (rc)
		return rc;
	fadc_context_options o1 = {.device = dev[0], .num_threads = 0, .seed = 0};
	if ((rc = side_open(&one, &o1, path, task)))
		return rc;
	printf("%s %s on GPU %d vs GPUs %s (%s)\n", path, task, dev[0].index, argv[3],
	       fadc_context_device_name(many.ctx));
	fadc_tensor *oa[64], *ob[64];
	double worst = 0;
	// The multi run's first outputs (the all-reduce enqueued uncaptured)
	// against its third (replayed from the graphs captured at the second,
	// runtime/multi.c): bit for bit.
	char *first = NULL, *third = NULL;
	size_t nfirst = 0, nthird = 0;
	for (int round = 0; round < 3; round++) {
		if (side_run(&one, oa) || side_run(&many, ob))
			return 1;
		if (round == 0 && fadc_context_synchronize(many.ctx) == FADC_OK)
			first = outputs_bytes(&many, ob, &nfirst);
		if (round == 2 && fadc_context_synchronize(many.ctx) == FADC_OK)
			third = outputs_bytes(&many, ob, &nthird);
		if (round == 1)
			continue;
		printf(" run %d:\n", round + 1);
		double e = compare(&one, oa, ob);
		worst = fmax(worst, e);
	}
	char tree[4096];
	size_t need;
	fadc_context_graph_tree(many.ctx, tree, sizeof tree, &need);
	printf(" GPU %d's graph tree (multi context): %s", dev[0].index, tree);
	printf("worst normalized difference %.3e (tolerance %.0e): %s\n", worst, TOL,
	       worst <= TOL ? "equal" : "NOT EQUAL");
	int same13 = first && third && nfirst == nthird && !memcmp(first, third, nfirst);
	printf("multi run 3 vs run 1 (%zu bytes): %s\n", nthird,
	       same13 ? "bit-identical" : "DIFFERENT");
	// MULTI_DUMP=FILE: run 3's outputs, for cmp against another setting
	// (FADC_MULTI_CAPTURE=0).
	const char *dump = getenv("MULTI_DUMP");
	if (dump && *dump && third) {
		FILE *f = fopen(dump, "wb");
		if (!f || fwrite(third, 1, nthird, f) != nthird)
			fprintf(stderr, "multi_check: cannot write %s\n", dump);
		if (f)
			fclose(f);
	}
	free(first);
	free(third);
	const char *em = getenv("MULTI_EMULATE");
	if (em && *em && strcmp(em, "0")) {
		double *acc[64];
		for (int k = 0; k < one.info.noutputs; k++)
			acc[k] = calloc((size_t)fadc_tensor_numel(oa[k]) + 1, sizeof **acc);
		if (emulate(&one, nd, acc))
			return 1;
		// oa and ob: the last round's one-GPU and multi outputs (the
		// emulation's own runs were of other tasks, whose outputs are
		// model-owned elsewhere: read oa again only if still valid).
		double em_multi = compare_acc(&one, ob, acc, "multi run vs the emulation (the runtime's own error)");
		if (side_run(&one, oa))
			return 1;
		double em_full = compare_acc(&one, oa, acc, "full-batch run vs the emulation (the shard kernels' rounding)");
		printf("emulation: multi %.3e, full batch %.3e\n", em_multi, em_full);
		for (int k = 0; k < one.info.noutputs; k++)
			free(acc[k]);
	}
	if (iters > 0) {
		double t1 = time_runs(&one, iters), tm = time_runs(&many, iters);
		if (t1 < 0 || tm < 0)
			return 1;
		printf("time: one GPU %.3f ms, %d GPUs %.3f ms, speed-up %.3f, parallel efficiency %.3f\n",
		       1e3 * t1, nd, 1e3 * tm, t1 / tm, t1 / (nd * tm));
	}
	for (int c = 0; c < one.info.ncaller; c++)
		fadc_tensor_release(one.in[c]);
	for (int c = 0; c < many.info.ncaller; c++)
		fadc_tensor_release(many.in[c]);
	fadc_model_close(one.m);
	fadc_model_close(many.m);
	fadc_context_destroy(one.ctx);
	fadc_context_destroy(many.ctx);
	return worst <= TOL && same13 ? 0 : 1;
}
