// tests/gpu/mma_err.c -- the accuracy of a strict f32 GEMM on the GPU
// against float64 (issue 20, docs/CUDA.md "Strict f32 GEMMs on tensor
// cores: 3xTF32"):
//
//   mma_err MODEL.so...      (each compiled from tests/gpu/mma_err.ir)
//
// Runs each artifact's forward, C = A B with A and B uniform in [-1, 1)
// (a fixed counter hash), on GPU 0 and prints, against C computed in
// float64 on the host,
//   norm: max |C - C64| / max |C64|         (the largest error, normalized)
//   comp: max |C - C64| / (|A| |B|)_ij       (per element, against the sum
//         of the products' magnitudes: the bound a dot product's rounding
//         obeys, K u for a sequential sum, u = 2^-24)
// FADC_CUDA_MMA in the environment says what runs (0: cuBLAS SGEMM; 128
// or 64: the 3xTF32 kernel of that tile), so one process per setting.
// Exit 0 (the numbers are printed, not judged: gpu_check judges), 1 on a
// failure to run, 77 without a GPU.
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fadc.h"

static float
unif(uint64_t i, uint64_t salt) {
	uint64_t x = i * 0x9E3779B97F4A7C15ull + salt;
	x ^= x >> 33, x *= 0xff51afd7ed558ccdull, x ^= x >> 33, x *= 0xc4ceb9fe1a85ec53ull;
	x ^= x >> 33;
	return (float)((double)(x >> 11) / 9007199254740992.0 * 2 - 1);
}

static int
one(fadc_context *gpu, const char *path) {
	fadc_model *m = NULL;
	int task = -1, rc = 1;
	fadc_tensor *in[2] = {NULL, NULL}, *out = NULL;
	float *a = NULL, *b = NULL, *c = NULL;
	if (fadc_model_open(gpu, path, 0, &m) || fadc_model_find_task(m, "forward", &task)) {
		fprintf(stderr, "mma_err: %s: %s\n", path, fadc_context_error(gpu));
		goto done;
	}
	fadc_tensor_desc da, db;
	fadc_task_input(m, task, 0, &da);
	fadc_task_input(m, task, 1, &db);
	int64_t M = da.dim[0], K = da.dim[1], N = db.dim[1];
	a = malloc((size_t)(M * K) * 4), b = malloc((size_t)(K * N) * 4),
	c = malloc((size_t)(M * N) * 4);
	if (!a || !b || !c)
		goto done;
	for (int64_t i = 0; i < M * K; i++)
		a[i] = unif((uint64_t)i, 1);
	for (int64_t i = 0; i < K * N; i++)
		b[i] = unif((uint64_t)i, 2);
	if (fadc_tensor_create(gpu, FADC_F32, 2, da.dim, &in[0]) ||
	    fadc_tensor_create(gpu, FADC_F32, 2, db.dim, &in[1]) ||
	    fadc_tensor_write(in[0], a, (size_t)(M * K) * 4) ||
	    fadc_tensor_write(in[1], b, (size_t)(K * N) * 4) || fadc_run(m, task, in, 2, &out, 1) ||
	    fadc_tensor_read(out, c, (size_t)(M * N) * 4)) {
		fprintf(stderr, "mma_err: %s: %s\n", path, fadc_context_error(gpu));
		goto done;
	}
	double emax = 0, rmax = 0, comp = 0;
	for (int64_t i = 0; i < M; i++)
		for (int64_t j = 0; j < N; j++) {
			double s = 0, sa = 0;
			for (int64_t k = 0; k < K; k++) {
				double p = (double)a[i * K + k] * (double)b[k * N + j];
				s += p;
				sa += fabs(p);
			}
			double e = fabs((double)c[i * N + j] - s);
			emax = fmax(emax, e);
			rmax = fmax(rmax, fabs(s));
			comp = fmax(comp, e / sa);
		}
	const char *mode = getenv("FADC_CUDA_MMA");
	printf("mma_err: M %lld N %lld K %lld FADC_CUDA_MMA=%s: norm %.3e comp %.3e (K u = %.3e)\n",
	       (long long)M, (long long)N, (long long)K, mode ? mode : "auto", emax / rmax, comp,
	       (double)K * ldexp(1, -24));
	rc = 0;
done:
	fadc_tensor_release(in[0]);
	fadc_tensor_release(in[1]);
	free(a);
	free(b);
	free(c);
	fadc_model_close(m);
	return rc;
}

int
main(int argc, char **argv) {
	if (argc < 2) {
		fprintf(stderr, "usage: mma_err MODEL.so...\n");
		return 2;
	}
	fadc_context_options go = {.device = {FADC_DEVICE_CUDA, 0}, .num_threads = 0, .seed = 0};
	fadc_context *gpu = NULL;
	if (fadc_context_create(&go, &gpu)) {
		fprintf(stderr, "mma_err: no GPU: %s\n", fadc_context_error(NULL));
		return 77;
	}
	int rc = 0;
	for (int i = 1; i < argc; i++)
		rc |= one(gpu, argv[i]);
	fadc_context_destroy(gpu);
	return rc;
}
