// tests/unit/pool_util.h -- what the thread-pool tests share: compile a
// model to a temporary artifact, run one task under a context of N threads
// and keep every output's bytes, with the pool's statistics.
#ifndef FADC_POOL_UTIL_H
#define FADC_POOL_UTIL_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "codegen.h"
#include "fadc.h"
#include "frontend.h"
#include "harness.h"
#include "testutil.h"

// Parses src (text, or with is_file a path under models/) with the given
// defines and compiles `tasks` into a fresh temporary .so; its path goes to
// so (size n).  0 on failure, reported.
static int
pu_compile(const char *name, const char *src, int is_file, const char *const *defs, int ndefs,
           const char *const *tasks, int ntasks, int opt, char *so, size_t n)
{
	FeOptions fo = {.diag = stderr, .defines = defs, .ndefines = ndefs};
	Module *m;
	if (is_file) {
		const char *root = getenv("FADC_SOURCE_DIR");
		char path[4096];
		snprintf(path, sizeof path, "%s/models/%s", root ? root : ".", src);
		m = fe_parse_file(path, &fo);
	} else
		m = fe_parse_string(name, src, strlen(src), &fo);
	CHECK(m != NULL);
	if (!m)
		return 0;
	snprintf(so, n, "/tmp/fadc-pool-XXXXXX");
	int fd = mkstemp(so);
	CHECK(fd >= 0);
	if (fd < 0) {
		ir_module_free(m);
		return 0;
	}
	close(fd);
	CgOptions o = {.tasks = tasks, .ntasks = ntasks, .defines = defs, .ndefines = ndefs,
	               .opt_level = opt};
	char err[4096] = "";
	int ok = cg_compile_module(m, &o, so, err, sizeof err);
	if (!ok)
		fprintf(stderr, "%s: %s\n", name, err);
	CHECK(ok);
	ir_module_free(m);
	return ok;
}

// The caller's inputs of a run: sin(0.37 i + 1) (i the flat index) in
// float types, 0 in the others: deterministic and the same for every
// thread count.
static void
pu_fill(fadc_tensor *t)
{
	int64_t n = fadc_tensor_numel(t);
	void *d = fadc_tensor_data(t);
	for (int64_t i = 0; i < n; i++) {
		double v = sin(0.37 * (double)i + 1);
		if (fadc_tensor_dtype(t) == FADC_F32)
			((float *)d)[i] = (float)v;
		else if (fadc_tensor_dtype(t) == FADC_F64)
			((double *)d)[i] = v;
	}
}

// Runs `task` of artifact so once (after the seeded initializers, seed 0)
// on a context of nthreads threads.  Returns every output's bytes one after
// the other (malloc'd, *nbytes of them; NULL on failure, reported) and the
// pool's statistics after the run.
static unsigned char *
pu_run(const char *so, const char *task, int nthreads, size_t *nbytes, fadc_pool_stats *st)
{
	fadc_context_options co = {.device = {FADC_DEVICE_CPU, 0}, .num_threads = nthreads, .seed = 0};
	fadc_context *ctx = NULL;
	fadc_model *m = NULL;
	unsigned char *res = NULL;
	fadc_tensor *in[64] = {0}, *out[64] = {0};
	int t;
	fadc_task_info info;
	*nbytes = 0;
	if (fadc_context_create(&co, &ctx)) {
		fprintf(stderr, "context: %s\n", fadc_context_error(NULL));
		CHECK(0);
		return NULL;
	}
	CHECK(fadc_context_num_threads(ctx) == nthreads);
	if (fadc_model_open(ctx, so, 0, &m) || fadc_model_find_task(m, task, &t) ||
	    fadc_task_info_get(m, t, &info) || info.ncaller > 64 || info.noutputs > 64) {
		fprintf(stderr, "%s: %s\n", so, fadc_context_error(ctx));
		CHECK(0);
		goto done;
	}
	for (int i = 0, j = 0; i < info.ninputs; i++) {
		fadc_tensor_desc d;
		CHECK(fadc_task_input(m, t, i, &d) == FADC_OK);
		if (d.role != FADC_ROLE_INPUT)
			continue;
		CHECK(fadc_tensor_create(ctx, d.dtype, d.rank, d.dim, &in[j]) == FADC_OK);
		pu_fill(in[j++]);
	}
	if (fadc_run(m, t, in, info.ncaller, out, info.noutputs)) {
		fprintf(stderr, "%s %s: %s\n", so, task, fadc_context_error(ctx));
		CHECK(0);
		goto done;
	}
	for (int k = 0; k < info.noutputs; k++)
		*nbytes += fadc_tensor_bytes(out[k]);
	res = malloc(*nbytes + 1);
	CHECK(res != NULL);
	if (res)
		for (int k = 0, off = 0; k < info.noutputs; k++) {
			memcpy(res + off, fadc_tensor_data(out[k]), fadc_tensor_bytes(out[k]));
			off += (int)fadc_tensor_bytes(out[k]);
		}
	CHECK(fadc_context_pool_stats(ctx, st) == FADC_OK);
done:
	for (int i = 0; i < 64; i++)
		fadc_tensor_release(in[i]);
	fadc_model_close(m);
	fadc_context_destroy(ctx);
	return res;
}

// Runs `task` with 1, 2, 3 and 8 threads: the outputs must be the same
// bytes, and with more than one thread the pool must have split a kernel
// (expect_split) or never have been called (!expect_split).
static void
pu_check_threads(const char *so, const char *task, int expect_split)
{
	static const int nt[] = {1, 2, 3, 8};
	size_t n1 = 0;
	fadc_pool_stats st;
	unsigned char *r1 = pu_run(so, task, 1, &n1, &st);
	CHECK(r1 != NULL && n1 > 0);
	CHECK(st.parallel_calls == 0 && st.threads_started == 0); // one thread: no pool at all
	for (int i = 1; r1 && i < 4; i++) {
		size_t n = 0;
		unsigned char *r = pu_run(so, task, nt[i], &n, &st);
		CHECK(r != NULL && n == n1);
		int same = r && n == n1 && !memcmp(r, r1, n1);
		CHECK(same);
		printf("  %s, %d threads: %s to 1 thread's %zu bytes; pool: %llu calls, %llu jobs, "
		       "%llu inline, %llu workers\n",
		       task, nt[i], same ? "identical" : "DIFFERENT", n1,
		       (unsigned long long)st.parallel_calls, (unsigned long long)st.jobs,
		       (unsigned long long)st.inline_calls, (unsigned long long)st.threads_started);
		if (expect_split) {
			CHECK(st.parallel_calls > 0 && st.jobs > 0);
			CHECK(st.threads_started == (uint64_t)nt[i] - 1);
		} else
			CHECK(st.parallel_calls == 0 && st.jobs == 0 && st.threads_started == 0);
		free(r);
	}
	free(r1);
}

#endif
