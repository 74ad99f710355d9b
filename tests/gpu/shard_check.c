// tests/gpu/shard_check.c -- a batched task on one GPU and as K shards on
// K contexts (runtime/shard.h), compared and timed.  On the runtime alone
// (no LLVM): GPU machines run it on artifacts compiled elsewhere with
// --target cuda --shards K.
//
//   shard_check MODEL.so TASK --gpus 0,1 [--peer] [--staged] [--copy] [--share] [--local]
//               [--dest G] [--reps N]
//
// --gpus lists one GPU per shard (0,0 runs two shards on two contexts of
// GPU 0, which share its memory: --peer then needs nothing enabled; `cpu`
// is a CPU context, for the tool's own test on a CPU artifact).  The
// whole task TASK runs on a context of the first GPU, the shards on their
// own, assembled on the first shard's context.  --peer enables peer access
// from each shard's GPU to the first's (the driver's primary contexts,
// which the runtime's contexts use) and passes RtShardOptions.peer_direct;
// --staged sends every slice through the host; --copy passes
// RtShardOptions.peer_copy (the other GPUs' slices copied by their copy
// engines, overlapped with their next shard).  --share: the shards of one
// GPU share one context and model (`--gpus 0,0,1,1 --share`: 4 shards on
// 2 GPUs, each GPU running its two in turn, as the multi context does);
// without it each shard has a context of its own.  --local: also time the
// shards without assembling anything (each into its model-owned outputs),
// each GPU's alone and all at once: the floor that the transfers add to;
// then each shard alone (the timeline's parts).  Shards may be an uneven
// split (`T:k/K:w0+...`, found by their `T:k/K` prefix).
// --dest G: the whole task and the assembled outputs on GPU G's (first)
// context rather than the first shard's.  Each output must equal the
// whole task's within 1e-5 normalized (the shards run the same kernels on
// fewer rows: bit-identical is expected, and the count is printed).  Then
// N timed calls of each (host wall clock, after a synchronize of every
// context): one line
//   shard_check: TASK K=2 whole 12.3 ms shards 6.4 ms speedup 1.92 efficiency 0.96 ...
// Exit status: 0 passed, 1 a failure, 2 usage, 77 no CUDA device or fewer
// GPUs than listed.
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fadc.h"
#include "shard.h"

#define MAXK 64

// Shard k of K of task in m: `task:k/K`, or `task:k/K:<weights>` (an
// uneven split); its outputs' count in *nout.  -1 with a message.
static int
shard_task(fadc_model *m, const char *task, int k, int K, int *nout)
{
	char name[300];
	size_t n = (size_t)snprintf(name, sizeof name, "%s:%d/%d", task, k, K);
	for (int i = 0; i < fadc_model_task_count(m); i++) {
		fadc_task_info ti;
		if (fadc_task_info_get(m, i, &ti) || strncmp(ti.name, name, n) ||
		    (ti.name[n] && ti.name[n] != ':') || ti.noutputs > 64)
			continue;
		*nout = ti.noutputs;
		return i;
	}
	fprintf(stderr, "shard_check: no task %s\n", name);
	return -1;
}

static double
now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

// Peer access from GPU `from`'s primary context to GPU `to`'s, through the
// driver (the runtime's contexts use the primary contexts).  0 with a
// message on failure.
static int
enable_peer(int from, int to)
{
	typedef int (*get_t)(int *, int);
	typedef int (*retain_t)(void **, int);
	typedef int (*set_t)(void *);
	typedef int (*peer_t)(void *, unsigned);
	void *dl = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!dl) {
		fprintf(stderr, "shard_check: --peer: no driver (%s)\n", dlerror());
		return 0;
	}
	get_t get = (get_t)dlsym(dl, "cuDeviceGet");
	retain_t retain = (retain_t)dlsym(dl, "cuDevicePrimaryCtxRetain");
	set_t set = (set_t)dlsym(dl, "cuCtxSetCurrent");
	peer_t peer = (peer_t)dlsym(dl, "cuCtxEnablePeerAccess");
	int df, dt, r;
	void *cf, *ct;
	if (!get || !retain || !set || !peer || (r = get(&df, from)) || (r = get(&dt, to)) ||
	    (r = retain(&cf, df)) || (r = retain(&ct, dt)) || (r = set(cf))) {
		fprintf(stderr, "shard_check: --peer: the driver's contexts of GPUs %d and %d\n", from, to);
		return 0;
	}
	r = peer(ct, 0);
	if (r && r != 704) { // CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED
		fprintf(stderr, "shard_check: --peer: cuCtxEnablePeerAccess from GPU %d to %d: error %d\n",
		        from, to, r);
		return 0;
	}
	return 1; // (the primary contexts stay retained until exit)
}

static int
usage(void)
{
	fprintf(stderr, "usage: shard_check MODEL.so TASK --gpus 0,1 [--peer] [--staged] [--copy] "
	                "[--share] [--local] [--dest G] [--reps N]\n");
	return 2;
}

int
main(int argc, char **argv)
{
	const char *path = NULL, *task = NULL, *gpus = NULL;
	int peer = 0, staged = 0, copy = 0, share = 0, local = 0, reps = 20, dest = -1;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--gpus") && i + 1 < argc)
			gpus = argv[++i];
		else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
			reps = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--peer"))
			peer = 1;
		else if (!strcmp(argv[i], "--staged"))
			staged = 1;
		else if (!strcmp(argv[i], "--copy"))
			copy = 1;
		else if (!strcmp(argv[i], "--share"))
			share = 1;
		else if (!strcmp(argv[i], "--local"))
			local = 1;
		else if (!strcmp(argv[i], "--dest") && i + 1 < argc)
			dest = atoi(argv[++i]);
		else if (argv[i][0] == '-')
			return usage();
		else if (!path)
			path = argv[i];
		else if (!task)
			task = argv[i];
		else
			return usage();
	}
	if (!path || !task || !gpus || reps < 1)
		return usage();
	int gpu[MAXK], K = 0; // -1: the CPU (`--gpus cpu,cpu`: the tool's own test, on a CPU artifact)
	for (const char *p = gpus; *p && K < MAXK;) {
		char *end;
		long g = strncmp(p, "cpu", 3) ? strtol(p, &end, 10) : -1;
		if (g < 0)
			end = (char *)p + 3;
		if (end == p || g < -1 || (*end && *end != ','))
			return usage();
		gpu[K++] = (int)g;
		p = *end ? end + 1 : end;
	}
	int d0 = 0; // the destination: shard d0's context
	for (int k = K - 1; dest >= 0 && k >= 0; k--)
		if (gpu[k] == dest)
			d0 = k;
	if (K == 0 || (dest >= 0 && gpu[d0] != dest))
		return usage();
	fadc_context *ctx[MAXK], *wc;
	fadc_model *mod[MAXK], *wm;
	int own[MAXK], ngpu = 0; // own[k]: the first shard of k's context (--share: of k's GPU)
	for (int k = 0; k < K; k++) {
		own[k] = k;
		for (int i = 0; share && i < k && own[k] == k; i++)
			if (gpu[i] == gpu[k])
				own[k] = i;
		int first = 1;
		for (int i = 0; i < k; i++)
			first &= gpu[i] != gpu[k];
		ngpu += first;
	}
	for (int k = 0; k <= K; k++) {
		if (k < K && own[k] != k) {
			ctx[k] = ctx[own[k]];
			mod[k] = mod[own[k]];
			continue;
		}
		int g = k < K ? gpu[k] : gpu[d0];
		fadc_context_options o = {.device = {g < 0 ? FADC_DEVICE_CPU : FADC_DEVICE_CUDA, g < 0 ? 0 : g}};
		fadc_context **c = k < K ? &ctx[k] : &wc;
		if (fadc_context_create(&o, c)) {
			fprintf(stderr, "shard_check: GPU %d: %s (skipped)\n", o.device.index,
			        fadc_context_error(NULL));
			return 77;
		}
		if (fadc_model_open(*c, path, 0, k < K ? &mod[k] : &wm)) {
			fprintf(stderr, "shard_check: %s\n", fadc_context_error(*c));
			return 1;
		}
	}
	for (int k = 0; peer && k < K; k++)
		if (gpu[k] != gpu[d0] && gpu[k] >= 0 && gpu[d0] >= 0 && !enable_peer(gpu[k], gpu[d0]))
			return 1;
	RtShardOptions so = {.peer_direct = peer, .staged = staged, .peer_copy = copy};
	RtShardPlan *plan;
	char err[1024];
	if (rt_shard_plan_create(path, task, ctx, mod, K, ctx[d0], &so, &plan, err, sizeof err)) {
		fprintf(stderr, "shard_check: %s\n", err);
		return 1;
	}
	int t, n = rt_shard_plan_noutputs(plan);
	if (fadc_model_find_task(wm, task, &t) || n > 64) {
		fprintf(stderr, "shard_check: %s\n", fadc_context_error(wc));
		return 1;
	}
	fadc_tensor *wout[64] = {0}, *sout[64] = {0};
	int bad = 0;
	double start = 0;
	// Each output against the whole task's (copied out of the model-owned
	// outputs before the next call may reuse them).
	if (fadc_run(wm, t, NULL, 0, wout, n) || rt_shard_run(plan, NULL, sout, n)) {
		fprintf(stderr, "shard_check: %s%s\n", fadc_context_error(wc), rt_shard_error(plan));
		return 1;
	}
	long long same = 0, total = 0;
	double worst = 0;
	for (int i = 0; i < n; i++) {
		size_t bytes = fadc_tensor_bytes(wout[i]);
		int64_t m = fadc_tensor_numel(wout[i]);
		if (fadc_tensor_dtype(wout[i]) != FADC_F32 && fadc_tensor_dtype(wout[i]) != FADC_F64)
			continue;
		void *a = malloc(bytes + 8), *b = malloc(bytes + 8);
		if (bytes != fadc_tensor_bytes(sout[i]) || fadc_tensor_read(wout[i], a, bytes) ||
		    fadc_tensor_read(sout[i], b, bytes)) {
			fprintf(stderr, "shard_check: output %d: sizes or reads differ\n", i);
			return 1;
		}
		double d = 0, s = 0;
		for (int64_t e = 0; e < m; e++) {
			double x = fadc_tensor_dtype(wout[i]) == FADC_F32 ? ((float *)a)[e] : ((double *)a)[e];
			double y = fadc_tensor_dtype(wout[i]) == FADC_F32 ? ((float *)b)[e] : ((double *)b)[e];
			d += (x - y) * (x - y);
			s += x * x + y * y;
			same += x == y;
		}
		total += m;
		double r = s > 0 ? sqrt(d / s) : sqrt(d);
		worst = r > worst ? r : worst;
		if (!(r <= 1e-5)) {
			fadc_tensor_desc dd;
			rt_shard_plan_output(plan, i, &dd);
			fprintf(stderr, "shard_check: %s: error %.3g against the whole task\n", dd.name, r);
			bad = 1;
		}
		free(a);
		free(b);
	}
	// Timing: two warm-up calls of each (the eager run, the recording of
	// the CUDA graph), then reps calls.  Model-owned outputs each call.
	for (int r = 0; r < 2 + reps; r++) {
		if (r == 2) {
			fadc_context_synchronize(wc);
			start = now();
		}
		memset(wout, 0, sizeof wout);
		if (fadc_run(wm, t, NULL, 0, wout, n)) {
			fprintf(stderr, "shard_check: %s\n", fadc_context_error(wc));
			return 1;
		}
	}
	fadc_context_synchronize(wc);
	double tw = (now() - start) / reps, t0;
	for (int r = 0; r < 2; r++) // the views' graphs recorded
		if (rt_shard_run(plan, NULL, sout, n))
			return 1;
	fadc_context_synchronize(ctx[d0]);
	t0 = now();
	for (int r = 0; r < reps; r++)
		if (rt_shard_run(plan, NULL, sout, n)) {
			fprintf(stderr, "shard_check: %s\n", rt_shard_error(plan));
			return 1;
		}
	fadc_context_synchronize(ctx[d0]);
	double ts = (now() - t0) / reps;
	size_t direct, copied;
	rt_shard_plan_traffic(plan, &direct, &copied);
	printf("shard_check: %s K=%d gpus %s%s%s%s%s whole %.3f ms shards %.3f ms speedup %.2f "
	       "efficiency %.2f; %zu bytes in place, %zu copied by the GPUs, %zu through the host; "
	       "error %.3g, %lld of %lld identical\n",
	       task, K, gpus, peer ? " peer" : "", staged ? " staged" : "", copy ? " copy" : "",
	       share ? " share" : "", 1e3 * tw, 1e3 * ts, tw / ts, tw / ts / ngpu, direct,
	       rt_shard_plan_engine_bytes(plan), copied, worst, same, total);
	// The floor: the shards' runs alone, into their model-owned outputs
	// (nothing assembled), the GPUs' one at a time and then all at once.
	for (int g = -1; local && g < K; g++) {
		int dup = 0;
		for (int i = 0; g >= 0 && i < g; i++)
			dup |= gpu[i] == gpu[g];
		if (dup)
			continue;
		int task_of[MAXK], nout[MAXK];
		for (int k = 0; k < K; k++)
			if ((task_of[k] = shard_task(mod[k], task, k, K, &nout[k])) < 0)
				return 1;
		double tl = 0;
		for (int r = 0; r < 2 + reps; r++) {
			if (r == 2) {
				for (int k = 0; k < K; k++)
					fadc_context_synchronize(ctx[k]);
				tl = now();
			}
			for (int k = 0; k < K; k++) {
				fadc_tensor *lo[64] = {0};
				if ((g < 0 || gpu[k] == gpu[g]) && fadc_run(mod[k], task_of[k], NULL, 0, lo, nout[k])) {
					fprintf(stderr, "shard_check: --local: %s\n", fadc_context_error(ctx[k]));
					return 1;
				}
			}
		}
		for (int k = 0; k < K; k++)
			fadc_context_synchronize(ctx[k]);
		tl = (now() - tl) / reps;
		if (g < 0)
			printf("shard_check: local: every shard at once %.3f ms (speedup %.2f)\n", 1e3 * tl,
			       tw / tl);
		else
			printf("shard_check: local: GPU %d's shards alone %.3f ms\n", gpu[g], 1e3 * tl);
	}
	// Each shard alone (its rows from the name's record): the timeline's
	// parts, a shard's fixed cost and its cost per row, fitted from these.
	for (int k = 0; local && k < K; k++) {
		int tk, nk;
		if ((tk = shard_task(mod[k], task, k, K, &nk)) < 0)
			return 1;
		double tl = 0;
		for (int r = 0; r < 2 + reps; r++) {
			if (r == 2) {
				fadc_context_synchronize(ctx[k]);
				tl = now();
			}
			fadc_tensor *lo[64] = {0};
			if (fadc_run(mod[k], tk, NULL, 0, lo, nk)) {
				fprintf(stderr, "shard_check: --local: %s\n", fadc_context_error(ctx[k]));
				return 1;
			}
		}
		fadc_context_synchronize(ctx[k]);
		tl = (now() - tl) / reps;
		fadc_task_info ti;
		fadc_task_info_get(mod[k], tk, &ti);
		printf("shard_check: local: shard %d (%s) alone on GPU %d %.3f ms\n", k, ti.name, gpu[k],
		       1e3 * tl);
	}
	rt_shard_plan_free(plan);
	for (int k = 0; k < K; k++) {
		if (own[k] != k)
			continue;
		fadc_model_close(mod[k]);
		fadc_context_destroy(ctx[k]);
	}
	fadc_model_close(wm);
	fadc_context_destroy(wc);
	return bad;
}
