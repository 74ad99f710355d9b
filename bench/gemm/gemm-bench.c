// bench/gemm/gemm-bench.c -- times one GEMM compiled by fadc against the
// FMA-throughput peak of the same cores and against a BLAS, in one run
// (issue 26).  Built and driven by bench/gemm-bench.sh, which writes the
// model (one product of two parameters, `a @ b` with a transposed or
// batched operand as asked) and compiles it; this program only times.
//
//   gemm-bench ART.so DTYPE BATCH M N K TA TB BOP THREADS[,THREADS...] [BLAS.so]
//
// BOP says which operand carries the batch (a or b; the other is shared).
//
// For each thread count T, one line:
//   shape, T, peak GFLOP/s (T cores), fadc GFLOP/s and % of peak, BLAS
//   GFLOP/s and fadc / BLAS, and the largest difference between the two
//   results (over the largest magnitude: a sanity check, not a test).
//
// Peak: a loop of independent vector FMAs on registers (16 chains, more
// than latency x throughput of any current x86 core: 4 cycles x 2 ports),
// 512-bit when the artifact's code is AVX-512 (its "features" carry
// avx512f), else 256-bit, run on T threads at once; flops = 2 per lane per
// FMA.  Times are the best of repeated runs (the machine may be shared:
// the minimum is the least disturbed run), each configuration for at least
// 0.25 s (GEMM_BENCH_MIN_S); with one thread the times are the thread's CPU time (on a
// shared machine the time others held the core is left out;
// GEMM_BENCH_WALL=1: wall time), with more the wall clock.  The BLAS is dlopen'ed (cblas_sgemm/cblas_dgemm, and
// openblas_set_num_threads when it has one); a batch of B runs as BATCH
// calls of it, a batch of A (contiguous, B shared) as one call of BATCH M
// rows, which is what a caller of a BLAS would do.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <immintrin.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fadc.h"

// The clock: wall time, or with one thread (use_cputime) the calling
// thread's CPU time, which leaves out the time other processes of a
// shared machine held the core (GEMM and peak alike).
static int use_cputime;

static double
now(void)
{
	struct timespec ts;
	clock_gettime(use_cputime ? CLOCK_THREAD_CPUTIME_ID : CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

// ---------------------------------------------------------------- peak

#define PEAK_ITERS 20000000L
#define NCHAIN 16

// Returns flops done.  The chains' results are summed into *sink so that
// the compiler keeps every FMA.
__attribute__((target("avx512f,fma"))) static double
peak512(long iters, int f64, double *sink)
{
	__m512 a[NCHAIN], x = _mm512_set1_ps(1.0000001f), y = _mm512_set1_ps(0.9999999f);
	__m512d ad[NCHAIN], xd = _mm512_set1_pd(1.0000001), yd = _mm512_set1_pd(0.9999999);
	for (int c = 0; c < NCHAIN; c++)
		a[c] = _mm512_set1_ps((float)c), ad[c] = _mm512_set1_pd(c);
	if (f64) {
		for (long i = 0; i < iters; i++)
#pragma GCC unroll 16
			for (int c = 0; c < NCHAIN; c++)
				ad[c] = _mm512_fmadd_pd(ad[c], xd, yd);
		__m512d s = ad[0];
		for (int c = 1; c < NCHAIN; c++)
			s = _mm512_add_pd(s, ad[c]);
		*sink += _mm512_reduce_add_pd(s);
		return 2.0 * 8 * NCHAIN * (double)iters;
	}
	for (long i = 0; i < iters; i++)
#pragma GCC unroll 16
		for (int c = 0; c < NCHAIN; c++)
			a[c] = _mm512_fmadd_ps(a[c], x, y);
	__m512 s = a[0];
	for (int c = 1; c < NCHAIN; c++)
		s = _mm512_add_ps(s, a[c]);
	*sink += _mm512_reduce_add_ps(s);
	return 2.0 * 16 * NCHAIN * (double)iters;
}

__attribute__((target("avx2,fma"))) static double
peak256(long iters, int f64, double *sink)
{
	// 16 chains would take every ymm register; 12 leave room for x and y.
	enum { N = 12 };
	__m256 a[N], x = _mm256_set1_ps(1.0000001f), y = _mm256_set1_ps(0.9999999f);
	__m256d ad[N], xd = _mm256_set1_pd(1.0000001), yd = _mm256_set1_pd(0.9999999);
	for (int c = 0; c < N; c++)
		a[c] = _mm256_set1_ps((float)c), ad[c] = _mm256_set1_pd(c);
	float o[8];
	double od[4];
	if (f64) {
		for (long i = 0; i < iters; i++)
#pragma GCC unroll 16
			for (int c = 0; c < N; c++)
				ad[c] = _mm256_fmadd_pd(ad[c], xd, yd);
		__m256d s = ad[0];
		for (int c = 1; c < N; c++)
			s = _mm256_add_pd(s, ad[c]);
		_mm256_storeu_pd(od, s);
		*sink += od[0];
		return 2.0 * 4 * N * (double)iters;
	}
	for (long i = 0; i < iters; i++)
#pragma GCC unroll 16
		for (int c = 0; c < N; c++)
			a[c] = _mm256_fmadd_ps(a[c], x, y);
	__m256 s = a[0];
	for (int c = 1; c < N; c++)
		s = _mm256_add_ps(s, a[c]);
	_mm256_storeu_ps(o, s);
	*sink += o[0];
	return 2.0 * 8 * N * (double)iters;
}

typedef struct PeakArg {
	int wide, f64;
	long iters;
	double flops, sink;
} PeakArg;

static void *
peak_thread(void *p)
{
	PeakArg *a = p;
	a->flops = a->wide ? peak512(a->iters, a->f64, &a->sink) : peak256(a->iters, a->f64, &a->sink);
	return NULL;
}

// GFLOP/s of nthr threads running the peak loop at once: the best of 5
// (one thread: on the calling thread, timed by its CPU time).
static double
peak_gflops(int nthr, int wide, int f64)
{
	double best = 0;
	long iters = PEAK_ITERS / (wide ? 2 : 1) / 4;
	for (int rep = 0; rep < 10; rep++) {
		if (nthr == 1) {
			PeakArg a = {wide, f64, iters, 0, 0};
			double t0 = now();
			peak_thread(&a);
			double g = a.flops / (now() - t0) * 1e-9;
			best = g > best ? g : best;
			continue;
		}
		pthread_t th[64];
		PeakArg a[64];
		double t0 = now();
		for (int i = 0; i < nthr; i++) {
			a[i] = (PeakArg){wide, f64, iters, 0, 0};
			pthread_create(&th[i], NULL, peak_thread, &a[i]);
		}
		double fl = 0;
		for (int i = 0; i < nthr; i++) {
			pthread_join(th[i], NULL);
			fl += a[i].flops;
		}
		double g = fl / (now() - t0) * 1e-9;
		best = g > best ? g : best;
	}
	return best;
}

// ---------------------------------------------------------------- BLAS

enum { RowMajor = 101, NoTrans = 111, Trans = 112 };
typedef void (*sgemm_fn)(int, int, int, int, int, int, float, const float *, int, const float *, int,
                         float, float *, int);
typedef void (*dgemm_fn)(int, int, int, int, int, int, double, const double *, int, const double *,
                         int, double, double *, int);
typedef void (*setthr_fn)(int);

#define CHECK_OK(x)                                                                                \
	do {                                                                                           \
		fadc_status s_ = (x);                                                                      \
		if (s_ != FADC_OK) {                                                                       \
			fprintf(stderr, "gemm-bench: %s: %s (%s)\n", #x, fadc_status_name(s_),                \
			        fadc_context_error(ctx));                                                      \
			exit(1);                                                                               \
		}                                                                                          \
	} while (0)

static int
cmp_dbl(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

// The best time of one call of fn(arg), over at least 3 calls and
// GEMM_BENCH_MIN_S seconds (0.25; more on a busy machine gives the best
// call more chances to run undisturbed).
static double
best_time(void (*fn)(void *), void *arg)
{
	double t[4096];
	int n = 0;
	const char *ms = getenv("GEMM_BENCH_MIN_S");
	double min_s = ms ? atof(ms) : 0.25;
	double start = now();
	fn(arg); // warm-up (first-touch of the outputs, the pool's threads)
	while (n < 4096 && (n < 3 || now() - start < min_s)) {
		double t0 = now();
		fn(arg);
		t[n++] = now() - t0;
	}
	qsort(t, (size_t)n, sizeof t[0], cmp_dbl);
	return t[0];
}

typedef struct Job {
	fadc_model *m;
	int task;
	fadc_tensor *out;
	// BLAS
	sgemm_fn sg;
	dgemm_fn dg;
	int f64, batch, M, N, K, ta, tb, bop_a;
	const void *a, *b;
	void *c;
	int64_t bstride; // elements between B's batch entries
} Job;

static void
run_fadc(void *p)
{
	Job *j = p;
	fadc_context *ctx = NULL;
	fadc_status s = fadc_run(j->m, j->task, NULL, 0, &j->out, 1);
	if (s != FADC_OK) {
		fprintf(stderr, "gemm-bench: fadc_run: %s\n", fadc_status_name(s));
		(void)ctx;
		exit(1);
	}
}

static void
run_blas(void *p)
{
	Job *j = p;
	int lda = j->ta ? j->M : j->K, ldb = j->tb ? j->K : j->N;
	if (j->bop_a) {
		// A's batch and rows are one M x K matrix: one call.
		int M = j->M * j->batch;
		if (j->f64)
			j->dg(RowMajor, NoTrans, j->tb ? Trans : NoTrans, M, j->N, j->K, 1.0, (const double *)j->a,
			      j->K, (const double *)j->b, ldb, 0.0, (double *)j->c, j->N);
		else
			j->sg(RowMajor, NoTrans, j->tb ? Trans : NoTrans, M, j->N, j->K, 1.0f, (const float *)j->a,
			      j->K, (const float *)j->b, ldb, 0.0f, (float *)j->c, j->N);
		return;
	}
	for (int bi = 0; bi < j->batch; bi++) {
		if (j->f64)
			j->dg(RowMajor, j->ta ? Trans : NoTrans, j->tb ? Trans : NoTrans, j->M, j->N, j->K, 1.0,
			      (const double *)j->a, lda, (const double *)j->b + bi * j->bstride, ldb, 0.0,
			      (double *)j->c + (int64_t)bi * j->M * j->N, j->N);
		else
			j->sg(RowMajor, j->ta ? Trans : NoTrans, j->tb ? Trans : NoTrans, j->M, j->N, j->K, 1.0f,
			      (const float *)j->a, lda, (const float *)j->b + bi * j->bstride, ldb, 0.0f,
			      (float *)j->c + (int64_t)bi * j->M * j->N, j->N);
	}
}

int
main(int argc, char **argv)
{
	if (argc < 11) {
		fprintf(stderr, "usage: gemm-bench ART.so f32|f64 BATCH M N K TA TB a|b THREADS[,...] [BLAS.so]\n");
		return 2;
	}
	const char *art = argv[1];
	int f64 = !strcmp(argv[2], "f64");
	int batch = atoi(argv[3]), M = atoi(argv[4]), N = atoi(argv[5]), K = atoi(argv[6]);
	int ta = atoi(argv[7]), tb = atoi(argv[8]);
	int bop_a = !strcmp(argv[9], "a");
	if (bop_a && ta) {
		fprintf(stderr, "gemm-bench: a batched A is not transposed here\n");
		return 2;
	}
	const char *blaspath = argc > 11 ? argv[11] : "libopenblas.so.0";
	void *blas = dlopen(blaspath, RTLD_NOW | RTLD_LOCAL);
	sgemm_fn sg = blas ? (sgemm_fn)dlsym(blas, "cblas_sgemm") : NULL;
	dgemm_fn dg = blas ? (dgemm_fn)dlsym(blas, "cblas_dgemm") : NULL;
	setthr_fn setthr = blas ? (setthr_fn)dlsym(blas, "openblas_set_num_threads") : NULL;
	if (!blas)
		fprintf(stderr, "gemm-bench: no BLAS (%s): %s\n", blaspath, dlerror());
	// OpenBLAS's kernel set (DYNAMIC_ARCH): 0.3.21 takes a CPU it does not
	// know (Sapphire and Emerald Rapids) for "Prescott", SSE3 only, unless
	// OPENBLAS_CORETYPE says otherwise (bench/gemm-bench.sh sets it).
	typedef char *(*corename_fn)(void);
	corename_fn corename = blas ? (corename_fn)dlsym(blas, "openblas_get_corename") : NULL;
	const char *core = corename ? corename() : "?";
	double flops = 2.0 * batch * (double)M * N * K;
	char thr[256];
	snprintf(thr, sizeof thr, "%s", argv[10]);
	for (char *tok = strtok(thr, ","); tok; tok = strtok(NULL, ",")) {
		int T = atoi(tok);
		use_cputime = T == 1 && !getenv("GEMM_BENCH_WALL");
		fadc_context *ctx = NULL;
		fadc_context_options o = {.device = {FADC_DEVICE_CPU, 0}, .num_threads = T, .seed = 0};
		CHECK_OK(fadc_context_create(&o, &ctx));
		fadc_model *m = NULL;
		CHECK_OK(fadc_model_open(ctx, art, 0, &m));
		const char *feat = fadc_model_info(m, "features");
		int wide = feat && strstr(feat, "avx512f") != NULL;
		CHECK_OK(fadc_model_init(m, 0));
		Job j = {0};
		j.m = m;
		CHECK_OK(fadc_model_find_task(m, "forward", &j.task));
		double tf = best_time(run_fadc, &j);
		double peak = peak_gflops(T, wide, f64);
		double gf = flops / tf * 1e-9, gb = 0, maxd = 0, maxv = 0;
		if (sg && dg) {
			fadc_tensor *ta_t = NULL, *tb_t = NULL;
			CHECK_OK(fadc_model_get(m, "a", &ta_t));
			CHECK_OK(fadc_model_get(m, "b", &tb_t));
			j.sg = sg, j.dg = dg, j.f64 = f64, j.batch = batch, j.M = M, j.N = N, j.K = K;
			j.ta = ta, j.tb = tb, j.bop_a = bop_a;
			j.a = fadc_tensor_data(ta_t);
			j.b = fadc_tensor_data(tb_t);
			j.bstride = batch > 1 && !bop_a ? (int64_t)K * N : 0;
			size_t es = f64 ? 8 : 4, nc = (size_t)batch * M * N;
			j.c = malloc(nc * es);
			if (setthr)
				setthr(T);
			double tb_ = best_time(run_blas, &j);
			gb = flops / tb_ * 1e-9;
			const void *fc = fadc_tensor_data(j.out);
			for (size_t i = 0; i < nc; i++) {
				double x = f64 ? ((const double *)fc)[i] : ((const float *)fc)[i];
				double y = f64 ? ((const double *)j.c)[i] : ((const float *)j.c)[i];
				maxd = fmax(maxd, fabs(x - y));
				maxv = fmax(maxv, fabs(y));
			}
			free(j.c);
		}
		printf("%-4s batch %5d%s M %5d N %5d K %6d ta %d tb %d | T %2d %s | peak %8.1f | fadc %8.1f GF/s "
		       "%5.1f%% | blas(%s) %8.1f GF/s | fadc/blas %5.2f | diff %.1e\n",
		       f64 ? "f64" : "f32", batch, bop_a ? "a" : "b", M, N, K, ta, tb, T, use_cputime ? "cpu" : "wall", peak, gf, 100 * gf / peak, core, gb,
		       gb > 0 ? gf / gb : 0, maxv > 0 ? maxd / maxv : maxd);
		fflush(stdout);
		fadc_model_close(m);
		fadc_context_destroy(ctx);
	}
	return 0;
}
