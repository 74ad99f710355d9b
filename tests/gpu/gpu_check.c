// tests/gpu/gpu_check.c -- every task of compiled artifacts on a GPU,
// checked against the same artifact's CPU code, and the CUDA-graph life
// cycle of each task.
//
//   gpu_check [--iters N] [--time N] [--tol X] MODEL.so...
//   gpu_check --run-only N MODEL.so...   (no checks: N GPU runs per task,
//                                          for FADC_CUDA_PROFILE=1)
//
// Each MODEL.so must be compiled with --target cpu,cuda.  For every task
// (initializers excepted) and every iteration i of N (5, the seed's
// N_ITERS):
//   - inputs: the caller's inputs get fresh values each iteration
//     (U[-1, 1) from a counter hash, never zeros); iteration 3 moves them
//     to new device tensors (other addresses: the graph must be re-recorded,
//     not replayed with stale pointers);
//   - outputs: caller-owned device tensors poisoned with NaN before the
//     run (an element the GPU does not write stays NaN and fails), except
//     iteration 4, which asks for model-owned outputs;
//   - the GPU result equals the CPU code's on the same inputs within a
//     normalized error max|gpu - cpu| / max(S, 1e-30) <= tol, S the largest
//     |cpu| of that output over all iterations (below, at `scale`) (1e-4
//     by default: f32 kernels whose special functions and summation order
//     differ from the CPU's by a few ulps; the worst is printed; 1e-2 for
//     an artifact compiled with --allow-tf32, whose cuBLAS GEMMs round
//     their inputs to TF32);
//   - the graph counters move as the runtime promises: iteration 0 eager,
//     1 recorded, 2 replayed, 3 re-recorded (new input addresses; replayed
//     when the task takes no caller input), 4 re-recorded (model-owned
//     outputs: another state of the task in the graph tree) (or, with
//     FADC_DISABLE_CUDA_GRAPHS=1, every later run skipped);
//   - then 6 more runs, each into freshly created output tensors (six
//     address sets: more than a task's recordings, so some re-record), each
//     checked against the CPU again.
// After each model is closed and every tensor released, the device pool
// holds no block.  --time N then times N synchronized replays of each task
// (after the checks) and prints microseconds per call.
//
// --assign-nan MODEL.so (tests/gpu/assign.ir): a linear_sum_assignment host
// step given a cost holding NaN (the declaration `cost` bound to NaN on
// both contexts) must fail as the CPU code does: the CPU run returns
// FADC_ERR_RUN, the GPU run is queued and the next wait
// (fadc_context_synchronize) returns FADC_ERR_RUN naming the op; then,
// with a good cost bound again, the GPU run succeeds and agrees with the
// CPU (the failure left the context usable).
//
// --index MODEL.so (tests/gpu/index.ir): labels out of range (the
// declaration `labels` bound to 9 and to -2 on both contexts): the CPU run
// returns FADC_ERR_INDEX; the GPU run is queued (FADC_OK) and the error
// surfaces, with the CPU's message, at fadc_context_synchronize, at
// fadc_tensor_read, and at the task's next run (which then does not run);
// each time a valid run after it succeeds and agrees with the CPU.  The
// bad runs come after valid ones (eager, recorded, replayed), so the
// failing run is a replay: the graph's own copy carries the flag.  Given
// more than once: tests/gpu/index-scan.ir binds the same labels[4] in
// [0, 6), read inside a scan's body and checked per step (the body's
// per-step (min, max) reduced after the loop on the device).
//
// --choices forced|timed|cached (tests/gpu/choice.ir; docs/CUDA.md,
// "Choices measured on the GPU"): the tasks' choices between a printed
// kernel and a cuBLAS GEMM (fadc_task_info.cuda_choices, summed over the
// tasks run) must have been decided as said, by the context's counters
// after the last model: forced (FADC_CUDA_CHOICE=0 or 1 set: neither timed
// nor cached), timed (every choice timed, none from the cache: a fresh
// FADC_CACHE_DIR) or cached (every choice from the cache, none timed: a
// second process on the same cache).  How the lead runs it, on a GPU:
//   d=$(mktemp -d)
//   FADC_CACHE_DIR=$d FADC_CUDA_CHOICE=0 gpu_check --choices forced --time 200 choice.so
//   FADC_CACHE_DIR=$d FADC_CUDA_CHOICE=1 gpu_check --choices forced --time 200 choice.so
//   FADC_CACHE_DIR=$d FADC_CUDA_CHOICE_LOG=1 gpu_check --choices timed --time 200 choice.so
//   FADC_CACHE_DIR=$d FADC_CUDA_CHOICE_LOG=1 gpu_check --choices cached --time 200 choice.so
//   cat $d/cuda-choices
// (tests/gpu/device/run.sh's check step does exactly this.)
//
// Debugging aids (environment): GPU_CHECK_TASKS=a,b checks only those
// tasks; GPU_CHECK_VERBOSE=1 prints every output's error at every
// iteration; GPU_CHECK_KEEP_OLD=1 keeps the inputs of iterations 0-2 alive
// past the move of iteration 3 (no address is reused); GPU_CHECK_MOVE_ONLY=j
// moves only caller input j at iteration 3.
//
// Exit status: 0 all passed, 1 a failure, 77 no CUDA device (skipped) unless
// FADC_REQUIRE_GPU=1, which makes a missing device a failure.
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fadc.h"

static int nfail, ncheck;
static uint64_t total_choices; // fadc_task_info.cuda_choices of the tasks run on the GPU

static int
env_flag(const char *name)
{
	const char *v = getenv(name);
	return v && *v && strcmp(v, "0");
}

// Whether task `name` is in GPU_CHECK_TASKS (a comma-separated list), or
// the variable is unset.
static int
task_wanted(const char *name)
{
	const char *l = getenv("GPU_CHECK_TASKS");
	if (!l || !*l)
		return 1;
	size_t n = strlen(name);
	for (const char *p = l; *p;) {
		size_t k = strcspn(p, ",");
		if (k == n && !strncmp(p, name, n))
			return 1;
		p += k + (p[k] == ',');
	}
	return 0;
}

#define FAIL(...)                                                                          \
	do {                                                                                   \
		nfail++;                                                                           \
		fprintf(stderr, "FAIL: " __VA_ARGS__);                                             \
		fputc('\n', stderr);                                                               \
	} while (0)

static double
now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

// U[-1, 1) from (seed, i): splitmix64.
static double
draw(uint64_t seed, uint64_t i)
{
	uint64_t z = seed * 0x9e3779b97f4a7c15ull + i + 1;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	z ^= z >> 31;
	return (double)(z >> 11) / 9007199254740992.0 * 2 - 1;
}

// Host bytes of a tensor of desc d filled from (seed).
static void *
fill(const fadc_tensor_desc *d, size_t *bytes, uint64_t seed)
{
	int64_t n = 1;
	for (int i = 0; i < d->rank; i++)
		n *= d->dim[i];
	*bytes = (size_t)n * fadc_dtype_size(d->dtype);
	void *b = malloc(*bytes ? *bytes : 1);
	for (int64_t i = 0; i < n; i++) {
		double v = draw(seed, (uint64_t)i);
		switch (d->dtype) {
		case FADC_F32:
			((float *)b)[i] = (float)v;
			break;
		case FADC_F64:
			((double *)b)[i] = v;
			break;
		case FADC_I64:
			((int64_t *)b)[i] = (int64_t)(v * 4);
			break;
		default:
			((uint8_t *)b)[i] = v > 0;
		}
	}
	return b;
}

static double
elem(const void *b, fadc_dtype t, int64_t i)
{
	switch (t) {
	case FADC_F32:
		return ((const float *)b)[i];
	case FADC_F64:
		return ((const double *)b)[i];
	case FADC_I64:
		return (double)((const int64_t *)b)[i];
	default:
		return ((const uint8_t *)b)[i];
	}
}

// Normalized error of got against want (n elements): max|got - want| over
// max(max|want|, scale); NaN where got is NaN and want is not (an unwritten
// or poisoned element).
static double
nerr(const void *got, const void *want, fadc_dtype t, int64_t n, double scale)
{
	double num = 0, den = scale > 1e-30 ? scale : 1e-30;
	for (int64_t i = 0; i < n; i++) {
		double g = elem(got, t, i), w = elem(want, t, i);
		if (isnan(w) && isnan(g))
			continue;
		if (isinf(w) && g == w)
			continue;
		if (isnan(g) || isnan(w) || isinf(g) || isinf(w))
			return NAN;
		num = fmax(num, fabs(g - w));
		den = fmax(den, fabs(w));
	}
	return num / den;
}

// max |x| over the finite elements of b.
static double
maxabs(const void *b, fadc_dtype t, int64_t n)
{
	double m = 0;
	for (int64_t i = 0; i < n; i++) {
		double x = fabs(elem(b, t, i));
		if (isfinite(x) && x > m)
			m = x;
	}
	return m;
}

typedef struct Out {
	fadc_tensor_desc d;
	int64_t n;
	size_t bytes;
} Out;

#define TF32_TOL 1e-2

static int
check_model(const char *path, fadc_context *cpu, fadc_context *gpu, int iters, int timed,
            double tol, int graphs_off)
{
	fadc_model *mc = NULL, *mg = NULL;
	if (fadc_model_open(cpu, path, 0, &mc)) {
		FAIL("%s: open on the CPU: %s", path, fadc_context_error(cpu));
		return 0;
	}
	if (fadc_model_open(gpu, path, 0, &mg)) {
		FAIL("%s: open on the GPU: %s", path, fadc_context_error(gpu));
		fadc_model_close(mc);
		return 0;
	}
	char name[128];
	snprintf(name, sizeof name, "%s", fadc_model_name(mc));
	// An artifact compiled with --allow-tf32 rounds the inputs of its
	// cuBLAS GEMMs to TF32 (10-bit mantissa, 2^-11 relative): products
	// are ~5e-4 off, sums of them and derivatives built on them more.
	// TF32_TOL still fails a wrong layout or a missing product (errors of
	// order 1).
	const char *opts = fadc_model_info(mc, "options");
	if (opts && strstr(opts, " allow_tf32=1") && tol < TF32_TOL) {
		printf("%s: compiled with --allow-tf32: tolerance %.0e\n", name, TF32_TOL);
		tol = TF32_TOL;
	}
	double worst_all = 0;
	for (int task = 0; task < fadc_model_task_count(mc); task++) {
		fadc_task_info ti;
		fadc_task_info_get(mc, task, &ti);
		if (ti.is_init || !task_wanted(ti.name))
			continue;
		if (ti.targets != (FADC_TARGET_CPU | FADC_TARGET_CUDA)) {
			FAIL("%s %s: not compiled for cpu,cuda (targets %u)", name, ti.name, ti.targets);
			continue;
		}
		total_choices += (uint64_t)ti.cuda_choices;
		int nin = ti.ncaller, nout = ti.noutputs;
		fadc_tensor_desc *ind = calloc((size_t)nin + 1, sizeof *ind);
		fadc_tensor **gin = calloc((size_t)nin + 1, sizeof *gin);
		fadc_tensor **cin = calloc((size_t)nin + 1, sizeof *cin);
		fadc_tensor **gout = calloc((size_t)nout + 1, sizeof *gout);
		fadc_tensor **cout = calloc((size_t)nout + 1, sizeof *cout);
		fadc_tensor **gown = calloc((size_t)nout + 1, sizeof *gown);
		Out *od = calloc((size_t)nout + 1, sizeof *od);
		for (int i = 0, j = 0; i < ti.ninputs; i++) {
			fadc_tensor_desc d;
			fadc_task_input(mc, task, i, &d);
			if (d.role == FADC_ROLE_INPUT) {
				ind[j] = d;
				fadc_tensor_create(gpu, d.dtype, d.rank, d.dim, &gin[j]);
				j++;
			}
		}
		size_t maxb = 1;
		for (int o = 0; o < nout; o++) {
			fadc_task_output(mc, task, o, &od[o].d);
			od[o].n = 1;
			for (int k = 0; k < od[o].d.rank; k++)
				od[o].n *= od[o].d.dim[k];
			od[o].bytes = (size_t)od[o].n * fadc_dtype_size(od[o].d.dtype);
			if (od[o].bytes > maxb)
				maxb = od[o].bytes;
			fadc_tensor_create(gpu, od[o].d.dtype, od[o].d.rank, od[o].d.dim, &gout[o]);
		}
		void *poison = malloc(maxb), *hg = malloc(maxb);
		memset(poison, 0xff, maxb); // all-ones bytes: NaN in f32 and f64
		fadc_device_stats s0, s1;
		fadc_context_stats(gpu, &s0);
		double worst = 0;
		int keep_old = env_flag("GPU_CHECK_KEEP_OLD"), verbose = env_flag("GPU_CHECK_VERBOSE");
		const char *mo = getenv("GPU_CHECK_MOVE_ONLY");
		int move_only = mo && *mo ? atoi(mo) : -1;
		fadc_tensor **old = calloc((size_t)nin + 1, sizeof *old);
		// Every iteration's GPU and CPU outputs, checked after the last.
		void **gk = calloc((size_t)(iters * nout) + 1, sizeof *gk);
		void **ck = calloc((size_t)(iters * nout) + 1, sizeof *ck);
		double *scale = calloc((size_t)nout + 1, sizeof *scale);
		for (int it = 0; it < iters; it++) {
			uint64_t seed = 1000u * (uint64_t)task + (uint64_t)it + 1;
			if (it == 3) // other addresses: new device tensors, old ones freed after
				for (int j = 0; j < nin; j++) {
					if (move_only >= 0 && j != move_only)
						continue;
					fadc_tensor *t;
					fadc_tensor_create(gpu, ind[j].dtype, ind[j].rank, ind[j].dim, &t);
					if (keep_old)
						old[j] = gin[j];
					else
						fadc_tensor_release(gin[j]);
					gin[j] = t;
				}
			for (int j = 0; j < nin; j++) {
				size_t b;
				void *h = fill(&ind[j], &b, seed * 31 + (uint64_t)j);
				fadc_tensor_release(cin[j]);
				fadc_tensor_create(cpu, ind[j].dtype, ind[j].rank, ind[j].dim, &cin[j]);
				fadc_tensor_write(cin[j], h, b);
				if (fadc_tensor_write(gin[j], h, b))
					FAIL("%s %s: write input: %s", name, ti.name, fadc_context_error(gpu));
				free(h);
			}
			for (int o = 0; o < nout; o++) {
				cout[o] = NULL;
				fadc_tensor_write(gout[o], poison, od[o].bytes);
				gown[o] = it == 4 ? NULL : gout[o];
			}
			if (fadc_run(mc, task, cin, nin, cout, nout)) {
				FAIL("%s %s: CPU run: %s", name, ti.name, fadc_context_error(cpu));
				break;
			}
			if (fadc_run(mg, task, gin, nin, gown, nout)) {
				FAIL("%s %s: GPU run %d: %s", name, ti.name, it, fadc_context_error(gpu));
				break;
			}
			for (int o = 0; o < nout; o++) {
				void **g = &gk[it * nout + o], **w = &ck[it * nout + o];
				if (!(*g = malloc(od[o].bytes + 1)) || !(*w = malloc(od[o].bytes + 1)))
					break;
				memcpy(*w, fadc_tensor_data(cout[o]), od[o].bytes);
				if (fadc_tensor_read(gown[o], *g, od[o].bytes)) {
					ncheck++;
					FAIL("%s %s: read %s: %s", name, ti.name, od[o].d.name,
					     fadc_context_error(gpu));
					free(*g);
					*g = NULL;
				}
			}
		}
		// Each output's error is normalized by the largest magnitude it took
		// over the iterations' inputs, not by this iteration's alone: a
		// scalar that nearly cancels for one draw measures that draw's
		// conditioning, not the GPU (tests/gpu/gemm.ir's jvp at iteration 3
		// is -0.35 where the others are 140..1200, and there the CPU's own
		// f32 and f64 codes differ by 1.2e-3 relative).
		for (int o = 0; o < nout; o++) {
			scale[o] = 0;
			for (int it = 0; it < iters; it++)
				if (ck[it * nout + o])
					scale[o] = fmax(scale[o], maxabs(ck[it * nout + o], od[o].d.dtype, od[o].n));
		}
		for (int it = 0; it < iters; it++)
			for (int o = 0; o < nout; o++) {
				void *g = gk[it * nout + o], *w = ck[it * nout + o];
				if (!g || !w)
					continue;
				ncheck++;
				double e = nerr(g, w, od[o].d.dtype, od[o].n, scale[o]);
				if (verbose)
					printf("  %s %s iteration %d output %s: error %.3g (scale %.3g)\n", name,
					       ti.name, it, od[o].d.name, e, scale[o]);
				if (!(e <= tol))
					FAIL("%s %s iteration %d: output %s differs from the CPU: normalized "
					     "error %.3g (tol %.1g)",
					     name, ti.name, it, od[o].d.name, e, tol);
				else if (e > worst)
					worst = e;
			}
		for (int i = 0; i < iters * nout; i++) {
			free(gk[i]);
			free(ck[i]);
		}
		free(gk);
		free(ck);
		fadc_context_stats(gpu, &s1);
		for (int j = 0; j < nin; j++)
			fadc_tensor_release(old[j]);
		free(old);
		// Six more address sets, each checked (the CPU outputs of the last
		// iteration are the reference: the inputs did not change).
		// The sets stay alive until all six ran: a released tensor's block
		// is reused by the next create, at the same address.
		fadc_device_stats s2;
		fadc_tensor **fresh = calloc(6 * (size_t)nout + 1, sizeof *fresh);
		for (int r = 0; r < 6 && iters >= 5; r++) {
			fadc_tensor **f = fresh + r * nout;
			for (int o = 0; o < nout; o++) {
				fadc_tensor_create(gpu, od[o].d.dtype, od[o].d.rank, od[o].d.dim, &f[o]);
				fadc_tensor_write(f[o], poison, od[o].bytes);
			}
			if (fadc_run(mg, task, gin, nin, f, nout))
				FAIL("%s %s: GPU run into new outputs: %s", name, ti.name,
				     fadc_context_error(gpu));
			for (int o = 0; o < nout; o++) {
				ncheck++;
				fadc_tensor_read(f[o], hg, od[o].bytes);
				double e = nerr(hg, fadc_tensor_data(cout[o]), od[o].d.dtype, od[o].n, scale[o]);
				if (!(e <= tol))
					FAIL("%s %s: output %s into new tensors (run %d) differs from the CPU: "
					     "normalized error %.3g",
					     name, ti.name, od[o].d.name, r, e);
			}
		}
		for (int i = 0; i < 6 * nout; i++)
			fadc_tensor_release(fresh[i]);
		free(fresh);
		fadc_context_stats(gpu, &s2);
		ncheck++;
		if (iters >= 5 && ti.nkernels > 0 && !graphs_off &&
		    s2.graphs_rerecorded == s1.graphs_rerecorded)
			FAIL("%s %s: six new output address sets re-recorded nothing", name, ti.name);
		uint64_t rec = s1.graphs_recorded - s0.graphs_recorded,
		         rep = s1.graphs_replayed - s0.graphs_replayed,
		         rr = s1.graphs_rerecorded - s0.graphs_rerecorded,
		         sk = s1.graphs_skipped - s0.graphs_skipped, eg = s1.eager_runs - s0.eager_runs;
		ncheck++;
		if (iters >= 5 && ti.nkernels > 0 &&
		    (graphs_off ? !(eg == 1 && sk == (uint64_t)iters - 1 && rec + rep + rr == 0)
		                : !(eg == 1 && rec == 1 && rr == (nin ? 2u : 1u) &&
		                    rep == (uint64_t)iters - 2 - rr && sk == 0)))
			FAIL("%s %s: graph counters eager %llu recorded %llu replayed %llu re-recorded "
			     "%llu skipped %llu, not what %d runs give",
			     name, ti.name, (unsigned long long)eg, (unsigned long long)rec,
			     (unsigned long long)rep, (unsigned long long)rr, (unsigned long long)sk,
			     iters);
		double us = 0;
		if (timed > 0) {
			for (int o = 0; o < nout; o++)
				gown[o] = gout[o];
			fadc_run(mg, task, gin, nin, gown, nout); // warm: recorded, or replayed
			fadc_run(mg, task, gin, nin, gown, nout);
			fadc_context_synchronize(gpu);
			double t0 = now_us();
			for (int r = 0; r < timed; r++) {
				fadc_run(mg, task, gin, nin, gown, nout);
				fadc_context_synchronize(gpu);
			}
			us = (now_us() - t0) / timed;
		}
		printf("%-16s %-16s %4d kernels  max error %.2e%s", name, ti.name, ti.nkernels, worst,
		       timed > 0 ? "" : "\n");
		if (timed > 0)
			printf("  %8.1f us/call (synchronized replay)\n", us);
		if (worst > worst_all)
			worst_all = worst;
		for (int j = 0; j < nin; j++) {
			fadc_tensor_release(gin[j]);
			fadc_tensor_release(cin[j]);
		}
		for (int o = 0; o < nout; o++)
			fadc_tensor_release(gout[o]);
		free(poison);
		free(hg);
		free(ind), free(gin), free(cin), free(gout), free(cout), free(gown), free(od);
		free(scale);
	}
	fadc_model_close(mc);
	fadc_model_close(mg);
	fadc_device_stats st;
	fadc_context_stats(gpu, &st);
	ncheck++;
	if (st.pool_live_blocks || st.pool_live_bytes)
		FAIL("%s: after closing the model the pool holds %llu blocks (%llu bytes)", name,
		     (unsigned long long)st.pool_live_blocks, (unsigned long long)st.pool_live_bytes);
	printf("%-16s worst normalized error %.2e\n", name, worst_all);
	return 1;
}

// --run-only N: each wanted task of the model run N times on the GPU alone,
// no CPU reference and no checks (FADC_CUDA_PROFILE=1 then says where the
// time goes; the CPU code of a full-size model would take minutes).
static void
run_only(const char *path, fadc_context *gpu, int n)
{
	fadc_model *mg = NULL;
	if (fadc_model_open(gpu, path, 0, &mg)) {
		FAIL("%s: open on the GPU: %s", path, fadc_context_error(gpu));
		return;
	}
	for (int task = 0; task < fadc_model_task_count(mg); task++) {
		fadc_task_info ti;
		fadc_task_info_get(mg, task, &ti);
		if (ti.is_init || !task_wanted(ti.name))
			continue;
		fadc_tensor **in = calloc((size_t)ti.ncaller + 1, sizeof *in);
		fadc_tensor **out = calloc((size_t)ti.noutputs + 1, sizeof *out);
		for (int i = 0, j = 0; i < ti.ninputs; i++) {
			fadc_tensor_desc d;
			fadc_task_input(mg, task, i, &d);
			if (d.role != FADC_ROLE_INPUT)
				continue;
			size_t b;
			void *h = fill(&d, &b, 77u + (uint64_t)j);
			fadc_tensor_create(gpu, d.dtype, d.rank, d.dim, &in[j]);
			fadc_tensor_write(in[j], h, b);
			free(h);
			j++;
		}
		double t0 = now_us();
		for (int r = 0; r < n; r++) {
			for (int o = 0; o < ti.noutputs; o++)
				out[o] = NULL;
			if (fadc_run(mg, task, in, ti.ncaller, out, ti.noutputs)) {
				FAIL("%s %s: GPU run: %s", path, ti.name, fadc_context_error(gpu));
				break;
			}
		}
		ncheck++;
		if (fadc_context_synchronize(gpu))
			FAIL("%s %s: GPU wait: %s", path, ti.name, fadc_context_error(gpu));
		printf("%-16s %-16s %d runs  %10.1f us/run (first included)\n", fadc_model_name(mg),
		       ti.name, n, (now_us() - t0) / n);
		for (int j = 0; j < ti.ncaller; j++)
			fadc_tensor_release(in[j]);
		free(in);
		free(out);
	}
	fadc_model_close(mg);
}

// A host step's failure on the GPU, against the CPU's (see the top).
static void
check_assign_nan(const char *path, fadc_context *cpu, fadc_context *gpu)
{
	fadc_model *mc = NULL, *mg = NULL;
	if (fadc_model_open(cpu, path, 0, &mc) || fadc_model_open(gpu, path, 0, &mg)) {
		FAIL("%s: open: %s / %s", path, fadc_context_error(cpu), fadc_context_error(gpu));
		fadc_model_close(mc);
		return;
	}
	int64_t dim[2] = {4, 6};
	double bad[24], good[24];
	for (int i = 0; i < 24; i++) {
		bad[i] = i == 13 ? NAN : draw(7, (uint64_t)i);
		good[i] = draw(8, (uint64_t)i);
	}
	fadc_tensor *tb = NULL, *tg = NULL, *ob[2] = {NULL, NULL}, *oc[2] = {NULL, NULL};
	fadc_tensor_create(cpu, FADC_F64, 2, dim, &tb);
	fadc_tensor_create(cpu, FADC_F64, 2, dim, &tg);
	fadc_tensor_write(tb, bad, sizeof bad);
	fadc_tensor_write(tg, good, sizeof good);
	ncheck += 4;
	fadc_status s;
	if (fadc_model_bind(mc, "cost", tb) || fadc_model_bind(mg, "cost", tb))
		FAIL("%s: bind cost: %s / %s", path, fadc_context_error(cpu), fadc_context_error(gpu));
	if ((s = fadc_run(mc, 0, NULL, 0, oc, 2)) != FADC_ERR_RUN)
		FAIL("%s: the CPU run with a NaN cost gave %s, not FADC_ERR_RUN", path,
		     fadc_status_name(s));
	if ((s = fadc_run(mg, 0, NULL, 0, ob, 2)))
		FAIL("%s: the GPU run with a NaN cost was not queued: %s: %s", path,
		     fadc_status_name(s), fadc_context_error(gpu));
	s = fadc_context_synchronize(gpu);
	if (s != FADC_ERR_RUN || !strstr(fadc_context_error(gpu), "linear_sum_assignment"))
		FAIL("%s: the wait after a GPU run with a NaN cost gave %s (%s), not FADC_ERR_RUN "
		     "naming linear_sum_assignment",
		     path, fadc_status_name(s), s ? fadc_context_error(gpu) : "");
	else
		printf("%s: NaN cost: CPU and GPU fail with FADC_ERR_RUN: %s\n", path,
		       fadc_context_error(gpu));
	fadc_model_bind(mc, "cost", tg);
	fadc_model_bind(mg, "cost", tg);
	for (int r = 0; r < 3; r++) { // eager, recorded, replayed
		fadc_tensor *gc[2] = {NULL, NULL}, *cc[2] = {NULL, NULL};
		ncheck++;
		if (fadc_run(mc, 0, NULL, 0, cc, 2) || fadc_run(mg, 0, NULL, 0, gc, 2) ||
		    fadc_context_synchronize(gpu)) {
			FAIL("%s: a good cost after the failure: %s / %s", path, fadc_context_error(cpu),
			     fadc_context_error(gpu));
			break;
		}
		float lg = 0;
		int64_t ig[4];
		fadc_tensor_read(gc[0], &lg, sizeof lg);
		fadc_tensor_read(gc[1], ig, sizeof ig);
		const int64_t *ic = fadc_tensor_data(cc[1]);
		float lc = *(const float *)fadc_tensor_data(cc[0]);
		if (memcmp(ig, ic, sizeof ig) || fabs(lg - lc) > 1e-5 * fmax(1, fabs(lc)))
			FAIL("%s: a good cost after the failure: GPU assignment or loss differs", path);
	}
	fadc_tensor_release(tb);
	fadc_tensor_release(tg);
	fadc_model_close(mc);
	fadc_model_close(mg);
}

// Binds labels[4] on model m of context ctx.
static void
bind_labels(fadc_model *m, fadc_context *ctx, const int64_t *lab)
{
	int64_t dim[1] = {4};
	fadc_tensor *t = NULL;
	if (fadc_tensor_create(ctx, FADC_I64, 1, dim, &t) || fadc_tensor_write(t, lab, 32) ||
	    fadc_model_bind(m, "labels", t))
		FAIL("bind labels: %s", fadc_context_error(ctx));
	fadc_tensor_release(t);
}

// A valid run of vjp (task) on both contexts: the GPU's outputs agree with
// the CPU's.  0 on a failure.
static int
index_good_run(fadc_model *mc, fadc_model *mg, int task, fadc_context *cpu, fadc_context *gpu,
               fadc_tensor *vc, fadc_tensor *vg, const char *when)
{
	fadc_tensor *oc[8] = {NULL}, *og[8] = {NULL};
	fadc_task_info ti;
	fadc_task_info_get(mc, task, &ti);
	int no = ti.noutputs < 8 ? ti.noutputs : 8;
	ncheck++;
	fadc_status s;
	if (fadc_run(mc, task, &vc, 1, oc, no) || (s = fadc_run(mg, task, &vg, 1, og, no)) ||
	    (s = fadc_context_synchronize(gpu))) {
		FAIL("index: a valid run %s: %s / %s", when, fadc_context_error(cpu),
		     fadc_context_error(gpu));
		return 0;
	}
	for (int k = 0; k < no; k++) {
		size_t n = fadc_tensor_bytes(oc[k]);
		float *g = malloc(n);
		if (fadc_tensor_read(og[k], g, n))
			FAIL("index: read after a valid run %s: %s", when, fadc_context_error(gpu));
		double e = nerr(g, fadc_tensor_data(oc[k]), FADC_F32, fadc_tensor_numel(oc[k]),
		                maxabs(fadc_tensor_data(oc[k]), FADC_F32, fadc_tensor_numel(oc[k])));
		if (!(e <= 1e-4))
			FAIL("index: output %d of a valid run %s: GPU and CPU differ by %g", k, when, e);
		free(g);
	}
	return 1;
}

static void
check_index(const char *path, fadc_context *cpu, fadc_context *gpu)
{
	fadc_model *mc = NULL, *mg = NULL;
	int task = -1;
	if (fadc_model_open(cpu, path, 0, &mc) || fadc_model_open(gpu, path, 0, &mg) ||
	    fadc_model_find_task(mg, "vjp", &task)) {
		FAIL("%s: open: %s / %s", path, fadc_context_error(cpu), fadc_context_error(gpu));
		fadc_model_close(mc);
		fadc_model_close(mg);
		return;
	}
	const int64_t good[4] = {5, 0, 3, 1}, high[4] = {0, 9, 1, 2}, low[4] = {1, -2, 0, 0};
	fadc_tensor *vc = NULL, *vg = NULL;
	float one = 1;
	fadc_tensor_create(cpu, FADC_F32, 0, NULL, &vc);
	fadc_tensor_create(gpu, FADC_F32, 0, NULL, &vg);
	fadc_tensor_write(vc, &one, 4);
	fadc_tensor_write(vg, &one, 4);
	bind_labels(mc, cpu, good);
	bind_labels(mg, gpu, good);
	for (int r = 0; r < 3; r++) // eager, recorded, replayed
		index_good_run(mc, mg, task, cpu, gpu, vc, vg, "before a bad one");
	// How each bad run surfaces: 0 synchronize, 1 read, 2 the next run.
	for (int how = 0; how < 3; how++) {
		const int64_t *bad = how == 1 ? low : high;
		char want[1024];
		fadc_tensor *oc[8] = {NULL}, *og[8] = {NULL};
		fadc_task_info ti;
		fadc_task_info_get(mc, task, &ti);
		int no = ti.noutputs < 8 ? ti.noutputs : 8;
		bind_labels(mc, cpu, bad);
		bind_labels(mg, gpu, bad);
		ncheck += 3;
		fadc_status s = fadc_run(mc, task, &vc, 1, oc, no);
		snprintf(want, sizeof want, "%s", fadc_context_error(cpu));
		// index.ir's take_along names 'labels'; index-scan.ir's take the
		// index computed from them in the body.
		if (s != FADC_ERR_INDEX ||
		    !(strstr(want, "vjp: take_along: index ") || strstr(want, "vjp: take: index ")) ||
		    !strstr(want, " is out of range [0, 6)") ||
		    !(strstr(want, " of 'labels' ") || strstr(want, " of the index computed at ")) ||
		    !strstr(want, how == 1 ? "index -2 " : "index 9 "))
			FAIL("index: the CPU run with bad labels gave %s: %s", fadc_status_name(s), want);
		if ((s = fadc_run(mg, task, &vg, 1, og, no)))
			FAIL("index: the GPU run with bad labels was not queued: %s: %s",
			     fadc_status_name(s), fadc_context_error(gpu));
		const char *where = how == 0 ? "fadc_context_synchronize" : how == 1 ? "fadc_tensor_read"
		                                                                    : "the next run";
		if (how == 0)
			s = fadc_context_synchronize(gpu);
		else if (how == 1) {
			float loss;
			s = fadc_tensor_read(og[0], &loss, sizeof loss);
		} else {
			bind_labels(mg, gpu, good); // the next run's own data is good
			s = fadc_run(mg, task, &vg, 1, og, no);
		}
		if (s != FADC_ERR_INDEX || strcmp(fadc_context_error(gpu), want))
			FAIL("index: %s after a bad GPU run gave %s (%s), not FADC_ERR_INDEX with the "
			     "CPU's message (%s)",
			     where, fadc_status_name(s), fadc_context_error(gpu), want);
		else
			printf("%s: bad labels: FADC_ERR_INDEX at %s: %s\n", path, where, want);
		// Reported once: the context works again.
		if (fadc_context_synchronize(gpu))
			FAIL("index: a second synchronize after %s: %s", where, fadc_context_error(gpu));
		bind_labels(mc, cpu, good);
		bind_labels(mg, gpu, good);
		index_good_run(mc, mg, task, cpu, gpu, vc, vg, "after a bad one");
	}
	fadc_tensor_release(vc);
	fadc_tensor_release(vg);
	fadc_model_close(mc);
	fadc_model_close(mg);
}

int
main(int argc, char **argv)
{
	int iters = 5, timed = 0, first = 1, run_n = 0;
	const char *assign_nan = NULL, *choices = NULL, *index[4] = {NULL};
	int nindex = 0;
	double tol = 1e-4;
	for (; first < argc && argv[first][0] == '-'; first++) {
		if (!strcmp(argv[first], "--iters") && first + 1 < argc)
			iters = atoi(argv[++first]);
		else if (!strcmp(argv[first], "--time") && first + 1 < argc)
			timed = atoi(argv[++first]);
		else if (!strcmp(argv[first], "--tol") && first + 1 < argc)
			tol = atof(argv[++first]);
		else if (!strcmp(argv[first], "--assign-nan") && first + 1 < argc)
			assign_nan = argv[++first];
		else if (!strcmp(argv[first], "--index") && first + 1 < argc && nindex < 4)
			index[nindex++] = argv[++first];
		else if (!strcmp(argv[first], "--run-only") && first + 1 < argc)
			run_n = atoi(argv[++first]);
		else if (!strcmp(argv[first], "--choices") && first + 1 < argc &&
		         (!strcmp(argv[first + 1], "forced") || !strcmp(argv[first + 1], "timed") ||
		          !strcmp(argv[first + 1], "cached")))
			choices = argv[++first];
		else {
			fprintf(stderr, "usage: gpu_check [--iters N] [--time N] [--tol X] "
			                "[--assign-nan MODEL.so] [--index MODEL.so]... "
			                "[--choices forced|timed|cached] "
			                "[--run-only N] MODEL.so...\n");
			return 2;
		}
	}
	const char *fc = getenv("FADC_CUDA_CHOICE");
	int forced = fc && *fc && strcmp(fc, "auto");
	if (choices && (strcmp(choices, "forced") == 0) != forced) {
		fprintf(stderr, "gpu_check: --choices %s %s FADC_CUDA_CHOICE=0 or 1\n", choices,
		        forced ? "is not for" : "needs");
		return 2;
	}
	fadc_context *cpu, *gpu;
	fadc_context_options go = {.device = {FADC_DEVICE_CUDA, 0}, .num_threads = 0, .seed = 0};
	fadc_status s = fadc_context_create(&go, &gpu);
	if (s) {
		const char *req = getenv("FADC_REQUIRE_GPU");
		int required = req && !strcmp(req, "1");
		fprintf(stderr, "gpu_check: %s: %s: %s\n", required ? "FAIL" : "skipped",
		        fadc_status_name(s), fadc_context_error(NULL));
		return required ? 1 : 77;
	}
	fadc_context_create(NULL, &cpu);
	const char *ng = getenv("FADC_DISABLE_CUDA_GRAPHS");
	int graphs_off = ng && *ng && strcmp(ng, "0");
	printf("device: %s%s\n", fadc_context_device_name(gpu), graphs_off ? " (graphs off)" : "");
	if (assign_nan)
		check_assign_nan(assign_nan, cpu, gpu);
	for (int i = 0; i < nindex; i++)
		check_index(index[i], cpu, gpu);
	for (int i = first; i < argc; i++)
		if (run_n > 0)
			run_only(argv[i], gpu, run_n);
		else
			check_model(argv[i], cpu, gpu, iters, timed, tol, graphs_off);
	fadc_device_stats st;
	fadc_context_stats(gpu, &st);
	if (total_choices || choices)
		printf("choices: %llu in the tasks run, %llu timed, %llu from the cache%s%s\n",
		       (unsigned long long)total_choices, (unsigned long long)st.choices_timed,
		       (unsigned long long)st.choices_cached, forced ? ", FADC_CUDA_CHOICE=" : "",
		       forced ? fc : "");
	if (choices) {
		ncheck++;
		uint64_t t = st.choices_timed, c = st.choices_cached;
		int good = !strcmp(choices, "forced") ? t == 0 && c == 0
		           : !strcmp(choices, "timed") ? total_choices && t == total_choices && c == 0
		                                       : total_choices && c == total_choices && t == 0;
		if (!good)
			FAIL("--choices %s: %llu choices, %llu timed, %llu from the cache", choices,
			     (unsigned long long)total_choices, (unsigned long long)t,
			     (unsigned long long)c);
	}
	fadc_context_destroy(cpu);
	fadc_context_destroy(gpu);
	if (nfail) {
		fprintf(stderr, "gpu_check: %d of %d checks failed\n", nfail, ncheck);
		return 1;
	}
	printf("gpu_check: %d checks passed\n", ncheck);
	return 0;
}
