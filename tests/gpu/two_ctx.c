// tests/gpu/two_ctx.c -- two ordinary CUDA contexts, one per GPU, driven
// from one thread, their calls interleaved: every fadc.h entry point that
// reaches a context makes it current first (runtime/cuda.c, rt.c), so the
// calls on one never act on the other's CUDA context (before that, a run
// on the first GPU's context after the second's was opened failed with
// CUDA_ERROR_INVALID_HANDLE).
//
//   two_ctx MODEL.so TASK[,TASK...] [GPU_A GPU_B]   (default 0 1)
//
// MODEL.so compiled with --target cpu,cuda.  For each iteration (4) and
// each task: fresh caller inputs, different on the two GPUs (a mix-up of
// the contexts shows), created, written, run, read and released in turn
// on A and B; each GPU's outputs equal the same artifact's CPU code on the
// same inputs within 1e-4 normalized (max |gpu - cpu| / max |cpu|: f32
// kernels whose summation order differs from the CPU's).  Also the device
// timer of A read while B was used last, a synchronize of each, and the
// models closed and contexts destroyed in the order that leaves the other
// current.  Exit 0 passed, 1 a failure, 2 usage, 77 no such GPU.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fadc.h"

#define MAXIO 32

static int fails;

static void
die(const char *what, fadc_context *c)
{
	fprintf(stderr, "two_ctx: %s: %s\n", what, fadc_context_error(c));
	exit(1);
}

// The values of caller input i at iteration it on context k: a hash of
// the element's index in U[-1, 1).
static void
fill(float *v, int64_t n, int it, int k, int i)
{
	for (int64_t e = 0; e < n; e++) {
		uint64_t h = (uint64_t)e * 0x9E3779B97F4A7C15ull ^ (uint64_t)(it * 7 + k * 131 + i * 17 + 1) * 0xBF58476D1CE4E5B9ull;
		h ^= h >> 31;
		h *= 0x94D049BB133111EBull;
		h ^= h >> 29;
		v[e] = (float)((double)(h >> 11) / 9007199254740992.0 * 2 - 1);
	}
}

// Runs task t of m (on ctx) on inputs filled for (it, k); the outputs'
// values copied into out[o] (malloc'ed).
static void
run(fadc_context *ctx, fadc_model *m, int t, int it, int k, float **out, int *nout, int64_t *len)
{
	fadc_task_info ti;
	if (fadc_task_info_get(m, t, &ti))
		die("task info", ctx);
	fadc_tensor *in[MAXIO] = {0}, *o[MAXIO] = {0};
	for (int i = 0; i < ti.ncaller; i++) {
		fadc_tensor_desc d;
		if (fadc_task_input(m, t, ti.ninputs - ti.ncaller + i, &d) || d.dtype != FADC_F32)
			die("an f32 caller input", ctx);
		if (fadc_tensor_create(ctx, d.dtype, d.rank, d.dim, &in[i]))
			die("fadc_tensor_create", ctx);
		int64_t n = fadc_tensor_numel(in[i]);
		float *v = malloc((size_t)n * 4 + 4);
		fill(v, n, it, k, i);
		if (fadc_tensor_write(in[i], v, (size_t)n * 4))
			die("fadc_tensor_write", ctx);
		free(v);
	}
	*nout = ti.noutputs;
	if (fadc_run(m, t, in, ti.ncaller, o, ti.noutputs))
		die("fadc_run", ctx);
	for (int j = 0; j < ti.noutputs; j++) {
		len[j] = fadc_tensor_numel(o[j]);
		out[j] = malloc(fadc_tensor_bytes(o[j]) + 4);
		if (fadc_tensor_dtype(o[j]) != FADC_F32 || fadc_tensor_read(o[j], out[j], fadc_tensor_bytes(o[j])))
			die("fadc_tensor_read of an f32 output", ctx);
	}
	for (int i = 0; i < ti.ncaller; i++)
		fadc_tensor_release(in[i]);
}

static void
compare(const char *task, int gpu, int it, float **a, float **cpu, int n, const int64_t *len)
{
	for (int j = 0; j < n; j++) {
		double d = 0, s = 0;
		for (int64_t e = 0; e < len[j]; e++) {
			d = fmax(d, fabs((double)a[j][e] - cpu[j][e]));
			s = fmax(s, fabs((double)cpu[j][e]));
		}
		double r = d / fmax(s, 1e-30);
		if (!(r <= 1e-4)) {
			fprintf(stderr, "two_ctx: %s output %d on GPU %d, iteration %d: error %.3g\n", task, j, gpu,
			        it, r);
			fails++;
		}
	}
}

int
main(int argc, char **argv)
{
	if (argc != 3 && argc != 5) {
		fprintf(stderr, "usage: two_ctx MODEL.so TASK[,TASK...] [GPU_A GPU_B]\n");
		return 2;
	}
	int g[2] = {argc == 5 ? atoi(argv[3]) : 0, argc == 5 ? atoi(argv[4]) : 1};
	fadc_context *cc, *c[2];
	fadc_model *cm, *m[2];
	fadc_context_options co = {.device = {FADC_DEVICE_CPU, 0}};
	if (fadc_context_create(&co, &cc) || fadc_model_open(cc, argv[1], 0, &cm))
		die("the CPU context", cc);
	for (int k = 0; k < 2; k++) {
		fadc_context_options o = {.device = {FADC_DEVICE_CUDA, g[k]}};
		if (fadc_context_create(&o, &c[k])) {
			fprintf(stderr, "two_ctx: GPU %d: %s (skipped)\n", g[k], fadc_context_error(NULL));
			// Closed before skipping: the ASan pass counts a leak as a failure.
			for (int j = 0; j < k; j++)
				fadc_context_destroy(c[j]);
			fadc_model_close(cm);
			fadc_context_destroy(cc);
			return 77;
		}
	}
	// Opened after both contexts exist: B's is the thread's current one.
	for (int k = 0; k < 2; k++)
		if (fadc_model_open(c[k], argv[1], 0, &m[k]))
			die("fadc_model_open", c[k]);
	if (fadc_context_timer_start(c[0]))
		die("timer start", c[0]);
	int ran = 0;
	for (int it = 0; it < 4; it++) {
		char tasks[512];
		snprintf(tasks, sizeof tasks, "%s", argv[2]);
		for (char *name = strtok(tasks, ","); name; name = strtok(NULL, ",")) {
			int t[2], tc, n[2], ncpu;
			float *out[2][MAXIO], *cpu[MAXIO];
			int64_t len[2][MAXIO], lcpu[MAXIO];
			if (fadc_model_find_task(cm, name, &tc) || fadc_model_find_task(m[0], name, &t[0]) ||
			    fadc_model_find_task(m[1], name, &t[1]))
				die(name, cc);
			// A then B, inputs differing between them; each against the CPU.
			for (int k = 0; k < 2; k++)
				run(c[k], m[k], t[k], it, k, out[k], &n[k], len[k]);
			for (int k = 0; k < 2; k++) {
				run(cc, cm, tc, it, k, cpu, &ncpu, lcpu);
				compare(name, g[k], it, out[k], cpu, ncpu, lcpu);
				for (int j = 0; j < ncpu; j++)
					free(cpu[j]);
			}
			for (int k = 0; k < 2; k++)
				for (int j = 0; j < n[k]; j++)
					free(out[k][j]);
			ran++;
		}
		// B used last: A's synchronize, and the other way round.
		if (fadc_context_synchronize(c[0]) || fadc_context_synchronize(c[1]))
			die("fadc_context_synchronize", NULL);
	}
	double sec = -1;
	if (fadc_context_timer_stop(c[0], &sec) || !(sec >= 0))
		die("timer stop", c[0]);
	fadc_model_close(m[0]);
	fadc_model_close(m[1]);
	fadc_context_destroy(c[0]);
	fadc_context_destroy(c[1]);
	fadc_model_close(cm);
	fadc_context_destroy(cc);
	printf("two_ctx: %d task runs on GPUs %d and %d interleaved from one thread: %s\n", ran, g[0],
	       g[1], fails ? "FAILED" : "every output equal to the CPU's (<= 1e-4)");
	return fails ? 1 : 0;
}
