// runtime/cublas.c -- cuBLAS for a CUDA context: the library loaded at
// run time, the context's handle and workspace, and a GEMM record run as
// one strided batched GEMM.
//
// cuBLAS (GEMM records, artifact format 4) is loaded like the driver: not
// linked, dlopen'ed when the first task with a GEMM record is loaded
// (libcublas.so.13, .so.12, .so), so the runtime runs without it wherever
// no artifact asks for it.  One handle per context, on the context's
// stream and so in its primary context, with a fixed workspace (a block
// of the pool, BLAS_WORKSPACE bytes) set before any capture: cuBLAS then
// allocates nothing while a graph is recorded, and its kernels replay
// with the graph.  The workspace is held while some loaded task has GEMM
// records (the pool is empty once every model is closed); the handle lives
// until the context is destroyed.
//
// The handle, the workspace and the library's entry points are the
// context's Blas (c->blas, NULL until the first load); runtime/cuda.c
// calls rtcu_blas_acquire and rtcu_blas_release as tasks with GEMM records
// are loaded and freed, rtcu_blas_gemm for each GEMM record launched, and
// rtcu_blas_close with the context.
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_impl.h"

// ---------------------------------------------------------------- the cuBLAS API we use
// Types and values as cublas_api.h (CUDA 12 and 13) defines them; the
// symbols are the exported names behind cublas_v2.h's macros.

typedef int cublasStatus_t; // CUBLAS_STATUS_SUCCESS = 0
typedef struct cublasContext *cublasHandle_t;

enum {
	CUBLAS_OP_N = 0,
	CUBLAS_OP_T = 1,
	CUBLAS_DEFAULT_MATH = 0, // fp32 products in fp32
	CUBLAS_TF32_TENSOR_OP_MATH = 3, // fp32 inputs rounded to TF32 on tensor cores
};

#define BLAS_FUNCS(X)                                                                      \
	X(cublasCreate, "cublasCreate_v2", (cublasHandle_t * h))                               \
	X(cublasDestroy, "cublasDestroy_v2", (cublasHandle_t h))                               \
	X(cublasSetStream, "cublasSetStream_v2", (cublasHandle_t h, CUstream s))               \
	X(cublasSetWorkspace, "cublasSetWorkspace_v2", (cublasHandle_t h, void *w, size_t n))  \
	X(cublasSetMathMode, "cublasSetMathMode", (cublasHandle_t h, int mode))                \
	X(cublasSgemmStridedBatched, "cublasSgemmStridedBatched",                              \
	  (cublasHandle_t h, int ta, int tb, int m, int n, int k, const float *alpha,          \
	   const float *A, int lda, long long sa, const float *B, int ldb, long long sb,       \
	   const float *beta, float *C, int ldc, long long sc, int batch))                     \
	X(cublasDgemmStridedBatched, "cublasDgemmStridedBatched",                              \
	  (cublasHandle_t h, int ta, int tb, int m, int n, int k, const double *alpha,         \
	   const double *A, int lda, long long sa, const double *B, int ldb, long long sb,     \
	   const double *beta, double *C, int ldc, long long sc, int batch))

typedef struct Blas {
	void *dl; // NULL: not loaded yet
	const char *lib; // the name that loaded
#define X(name, sym, args) cublasStatus_t(*name) args;
	BLAS_FUNCS(X)
#undef X
	// Optional (cuBLAS 11.4.2 and later): the status's name and text.
	const char *(*status_name)(cublasStatus_t s);
	const char *(*status_string)(cublasStatus_t s);
	cublasHandle_t h; // the context's handle (on its stream), or NULL
	uint64_t ws; // its workspace, a pool block while users > 0
	uint32_t users; // loaded tasks with GEMM records
	int strict; // FADC_CUDA_GEMM_STRICT=1: every f32 GEMM record in fp32 math
	// FADC_CUDA_MMA: 0 cuBLAS alone; -1 (unset, "auto") time cuBLAS and the
	// 3xTF32 kernels; 1 time the kernels alone; 128 or 64 that tile alone.
	int mma;
} Blas;

// cuBLAS's recommended workspace on Hopper (4 MiB before it); one per
// context, a block of its pool.
#define BLAS_WORKSPACE ((size_t)32 << 20)

// ---------------------------------------------------------------- loading, handle, workspace

static void
blas_msg(const RtCuda *c, cublasStatus_t r, const char *what, const char *fn, const char *file,
         int line, char *err, size_t errlen)
{
	const char *name = c->blas->status_name ? c->blas->status_name(r) : NULL;
	const char *text = c->blas->status_string ? c->blas->status_string(r) : NULL;
	snprintf(err, errlen, "cuBLAS (%s): %s failed in %s (%s:%d): %s (status %d)%s%s",
	         c->blas->lib ? c->blas->lib : "?", what, fn, file, line,
	         name ? name : "CUBLAS_STATUS_?", (int)r, text ? ": " : "", text ? text : "");
}

// The one checked path for cuBLAS calls (STYLE.md 4.7, as CHECK_CU):
// the call's text, where, and cuBLAS's own name and text for the status.
#define CHECK_BLAS(c, x)                                                                   \
	do {                                                                                   \
		cublasStatus_t bl_r_ = (c)->blas->x;                                               \
		if (bl_r_) {                                                                       \
			blas_msg((c), bl_r_, #x, __func__, __FILE__, __LINE__, err, errlen);           \
			return 0;                                                                      \
		}                                                                                  \
	} while (0)

// Loads cuBLAS (once per context; dlopen counts references, so every
// context gets the same library).
static int
blas_open(RtCuda *c, char *err, size_t errlen)
{
	static const char *const names[] = {"libcublas.so.13", "libcublas.so.12", "libcublas.so"};
	if (c->blas)
		return 1;
	Blas b = {0};
	char why[600] = "";
	for (size_t i = 0; i < sizeof names / sizeof names[0] && !b.dl; i++) {
		b.dl = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
		b.lib = names[i];
		const char *e = b.dl ? NULL : dlerror();
		if (e && !why[0])
			snprintf(why, sizeof why, "%s", e);
	}
	if (!b.dl) {
		snprintf(err, errlen,
		         "no cuBLAS: dlopen(\"libcublas.so.13\"), (\"libcublas.so.12\") and "
		         "(\"libcublas.so\") failed (%s); this model's large matrix products run "
		         "through cuBLAS (install it, or put it on LD_LIBRARY_PATH)",
		         why[0] ? why : "not found");
		return 0;
	}
	void *sp;
#define X(name, sym, args)                                                                 \
	sp = dlsym(b.dl, sym);                                                                 \
	if (!sp) {                                                                             \
		snprintf(err, errlen, "cuBLAS (%s) has no %s (too old a cuBLAS?)", b.lib, sym);    \
		dlclose(b.dl);                                                                     \
		return 0;                                                                          \
	}                                                                                      \
	memcpy(&b.name, &sp, sizeof sp);
	BLAS_FUNCS(X)
#undef X
	if ((sp = dlsym(b.dl, "cublasGetStatusName")))
		memcpy(&b.status_name, &sp, sizeof sp);
	if ((sp = dlsym(b.dl, "cublasGetStatusString")))
		memcpy(&b.status_string, &sp, sizeof sp);
	if (!(c->blas = malloc(sizeof *c->blas))) {
		dlclose(b.dl);
		snprintf(err, errlen, "out of memory");
		return 0;
	}
	// FADC_CUDA_GEMM_STRICT=1 (read when cuBLAS loads): the GEMM records of an
	// --allow-tf32 artifact run in fp32 math, its cuDNN convolutions stay TF32.
	// That is PyTorch's default (cudnn.allow_tf32 on, matmul.allow_tf32 off),
	// so the GPU peers' "TF32 default" cells are compared like for like
	// (docs/CUDA.md, "TF32"); a measurement switch, off by default.
	const char *st = getenv("FADC_CUDA_GEMM_STRICT");
	b.strict = st && !strcmp(st, "1");
	// FADC_CUDA_MMA (read when cuBLAS loads): strict f32 GEMM records on
	// cuBLAS alone (0), on the 3xTF32 kernels alone (1: the faster tile;
	// 128 or 64: that tile), or (unset, auto) on the fastest of the three.
	const char *mm = getenv("FADC_CUDA_MMA");
	b.mma = !mm || !*mm || !strcmp(mm, "auto") ? -1 : atoi(mm);
	if (b.mma != 0 && b.mma != 1 && b.mma != 128 && b.mma != 64)
		b.mma = -1;
	*c->blas = b;
	return 1;
}

// A task with GEMM records is loaded: cuBLAS, the context's handle on its
// stream, and the workspace (set after the stream: cublasSetStream resets
// the workspace to cuBLAS's own pool, which would allocate during capture).
// Never inside a capture: task loads happen at a task's first run, eager.
int
rtcu_blas_acquire(RtCuda *c, char *err, size_t errlen)
{
	if (!blas_open(c, err, errlen))
		return 0;
	CHECK_CU(c, cuCtxSetCurrent(c->ctx));
	if (!c->blas->h) {
		CHECK_BLAS(c, cublasCreate(&c->blas->h));
		cublasStatus_t r = c->blas->cublasSetStream(c->blas->h, c->stream);
		if (r) {
			blas_msg(c, r, "cublasSetStream(c->blas->h, c->stream)", __func__, __FILE__,
			         __LINE__, err, errlen);
			c->blas->cublasDestroy(c->blas->h);
			c->blas->h = NULL;
			return 0;
		}
	}
	if (!c->blas->users) {
		if (!rtcu_alloc(c, BLAS_WORKSPACE, &c->blas->ws, err, errlen))
			return 0;
		void *ws = (void *)(uintptr_t)c->blas->ws;
		cublasStatus_t r = c->blas->cublasSetWorkspace(c->blas->h, ws, BLAS_WORKSPACE);
		if (r) {
			blas_msg(c, r, "cublasSetWorkspace(c->blas->h, ws, BLAS_WORKSPACE)",
			         __func__, __FILE__, __LINE__, err, errlen);
			rtcu_free(c, c->blas->ws);
			c->blas->ws = 0;
			return 0;
		}
	}
	c->blas->users++;
	return 1;
}

// The last task with GEMM records is freed: its workspace goes back to the
// pool (so that the pool is empty once every model is closed).  The handle
// keeps the stale pointer, but nothing calls it before the next
// rtcu_blas_acquire sets a new workspace; the stream runs in order, so work
// queued before this reuse of the block has finished with it first.
void
rtcu_blas_release(RtCuda *c)
{
	if (c->blas->users && !--c->blas->users) {
		rtcu_free(c, c->blas->ws);
		c->blas->ws = 0;
	}
}

// ---------------------------------------------------------------- GEMMs

// A GEMM record (docs/ARTIFACT.md, ArtGemm): for each batch b,
// C_b = op(A_b) op(B_b) with C_b M x N, all row-major in the record's
// terms.  cuBLAS is column-major: a row-major M x N matrix with row stride
// ldc is, read column-major with leading dimension ldc, its N x M
// transpose.  So the call computes C_b^T = op(B_b)^T op(A_b)^T: m = N,
// n = M, k = K, cuBLAS's first operand is B and its second is A:
//   B, tb = 0: B(k, j) at k ldb + j, read column-major = the N x K matrix
//      B^T = op(B)^T: CUBLAS_OP_N, lda = ldb (cuBLAS asks ldb >= m = N);
//   B, tb = 1: B(k, j) at j ldb + k, read column-major = the K x N matrix
//      B, whose transpose is wanted: CUBLAS_OP_T (asks ldb >= k = K);
//   A, ta = 0: A(i, k) at i lda + k, read column-major = the K x M matrix
//      A^T: CUBLAS_OP_N (asks lda >= k = K);
//   A, ta = 1: A(i, k) at k lda + i, read column-major = the M x K matrix
//      A: CUBLAS_OP_T (asks lda >= n = M);
//   C: ldc >= m = N.
// The decoder checked exactly these bounds, and that every element
// touched lies inside its argument.  beta = 0: C is only written (cuBLAS
// does not read C when beta is 0, so NaN there does not leak in).
// alpha and beta are host scalars (the default pointer mode), read when
// the call is made, so captured into the graph by value.
static int mma_decide(RtCuda *c, RtCuTask *k, Kern *kk, char *err, size_t errlen);
static int mma_launch(RtCuda *c, Kern *kk, int s, char *err, size_t errlen);

int
rtcu_blas_gemm(RtCuda *c, RtCuTask *task, Kern *kk, char *err, size_t errlen)
{
	const ArtGemm *g = &kk->k->gemm;
	// Strict f32: cuBLAS SGEMM or a 3xTF32 kernel, whichever the first
	// (eager) run measured faster (below, "3xTF32").
	if (g->dtype == ART_F32 && (!g->tf32 || c->blas->strict)) {
		if (!kk->mma_pick && !mma_decide(c, task, kk, err, errlen))
			return 0;
		if (kk->mma_pick >= 2)
			return mma_launch(c, kk, kk->mma_pick - 2, err, errlen);
	}
	uint64_t es = g->dtype == ART_F64 ? 8 : 4;
	void *C = (void *)(uintptr_t)(kk->val[0] + g->oc * es);
	const void *A = (const void *)(uintptr_t)(kk->val[1] + g->oa * es);
	const void *B = (const void *)(uintptr_t)(kk->val[2] + g->ob * es);
	int opb = g->tb ? CUBLAS_OP_T : CUBLAS_OP_N, opa = g->ta ? CUBLAS_OP_T : CUBLAS_OP_N;
	int m = (int)g->n, n = (int)g->m, k = (int)g->k, batch = (int)g->batch;
	int ldb = (int)g->ldb, lda = (int)g->lda, ldc = (int)g->ldc;
	long long sb = (long long)g->sb, sa = (long long)g->sa, sc = (long long)g->sc;
	int mode = g->tf32 && !c->blas->strict ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH;
	CHECK_BLAS(c, cublasSetMathMode(c->blas->h, mode));
	if (g->dtype == ART_F64) {
		const double one = 1, zero = 0;
		CHECK_BLAS(c, cublasDgemmStridedBatched(c->blas->h, opb, opa, m, n, k, &one, B, ldb,
		                                        sb, A, lda, sa, &zero, C, ldc, sc, batch));
	} else {
		const float one = 1, zero = 0;
		CHECK_BLAS(c, cublasSgemmStridedBatched(c->blas->h, opb, opa, m, n, k, &one, B, ldb,
		                                        sb, A, lda, sa, &zero, C, ldc, sc, batch));
	}
	return 1;
}


// ---------------------------------------------------------------- 3xTF32

// A strict f32 GEMM record may also run as a 3xTF32 tensor-core kernel
// printed into the task's modules (codegen/cuda_mma.c: fp32-level
// accuracy, fadc_mma3_<ta><tb>_<tile>, two tiles).  Which is faster
// depends on the shape and the GPU, so the record's first run (always
// eager: a task's first run, or the eager run choice_time makes of each
// candidate before it captures) times cuBLAS and each tile as
// runtime/cuda.c times a choice's candidates, in CUDA graphs: 4 launches
// captured per candidate, a warm-up replay, then 7 replays of each,
// interleaved, the lowest median wins (ties to cuBLAS).  The decision is
// cached like a choice's (runtime/choice.c), keyed by the record's index
// with the top bit set (MMA_KEY), candidates 0 cuBLAS, 1 + s tile s.
// Every later run, eager or captured, launches the chosen one.  A
// candidate writes only C, which none reads, so repeating them changes
// nothing.
enum { MMA_SAMPLES = 7, MMA_BATCH = 4, MMA_NCAND = 3 };
#define MMA_KEY 0x80000000u
static const int mma_tile[2] = {128, 64}, mma_threads[2] = {256, 128};

// Tile s of record kk on the stream: blocks of BM = BN = mma_tile[s] over
// C, grid.z strided over the batch.
static int
mma_launch(RtCuda *c, Kern *kk, int s, char *err, size_t errlen)
{
	const ArtGemm *g = &kk->k->gemm;
	uint64_t C = kk->val[0] + g->oc * 4, A = kk->val[1] + g->oa * 4, B = kk->val[2] + g->ob * 4;
	int M = (int)g->m, N = (int)g->n, K = (int)g->k, lda = (int)g->lda, ldb = (int)g->ldb,
	    ldc = (int)g->ldc, batch = (int)g->batch;
	long long sa = (long long)g->sa, sb = (long long)g->sb, sc = (long long)g->sc;
	void *arg[] = {&C, &A, &B, &M, &N, &K, &lda, &ldb, &ldc, &sa, &sb, &sc, &batch};
	unsigned b = (unsigned)mma_tile[s];
	unsigned gx = (unsigned)((g->n + b - 1) / b), gy = (unsigned)((g->m + b - 1) / b);
	unsigned gz = g->batch < 65535 ? (unsigned)g->batch : 65535;
	CHECK_CU(c, cuLaunchKernel(kk->mma[s], gx, gy, gz, (unsigned)mma_threads[s], 1, 1, 0,
	                           c->stream, arg, NULL));
	return 1;
}

// Candidate j (0 cuBLAS, 1 + s tile s) of record kk.
static int
mma_cand(RtCuda *c, Kern *kk, int j, char *err, size_t errlen)
{
	int save = kk->mma_pick;
	kk->mma_pick = 1; // cuBLAS, below
	int ok = j ? mma_launch(c, kk, j - 1, err, errlen) : rtcu_blas_gemm(c, NULL, kk, err, errlen);
	kk->mma_pick = save;
	return ok;
}

static int
cmp_f(const void *a, const void *b)
{
	float x = *(const float *)a, y = *(const float *)b;
	return (x > y) - (x < y);
}

// Times the candidates with can[j] set, as choice_time does (runtime/cuda.c):
// the median per launch of each into us[] (microseconds), the fastest into
// *best.
static int
mma_time(RtCuda *c, Kern *kk, const int *can, int *best, double *us, char *err, size_t errlen)
{
	CUevent ev[2] = {NULL, NULL};
	CUgraphExec ex[MMA_NCAND] = {NULL};
	float t[MMA_NCAND][MMA_SAMPLES];
	int ok = 0;
	for (int j = 0; j < MMA_NCAND; j++) {
		if (!can[j])
			continue;
		CUgraph gr = NULL;
		if (!mma_cand(c, kk, j, err, errlen)) // eager first: cuBLAS picks its kernel
			goto done;
		CHECK_CU_GOTO(c, cuStreamBeginCapture(c->stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL),
		              done);
		int launched = 1;
		char e2[512];
		for (int b = 0; b < MMA_BATCH && launched; b++)
			launched = mma_cand(c, kk, j, e2, sizeof e2);
		CUresult r = c->d.cuStreamEndCapture(c->stream, &gr);
		if (!launched || r) {
			if (gr)
				c->d.cuGraphDestroy(gr);
			if (!launched)
				snprintf(err, errlen, "%s", e2);
			else
				rtcu_msg(c, r, "cuStreamEndCapture(c->stream, &gr)", __func__, __FILE__,
				         __LINE__, err, errlen);
			goto done;
		}
		r = c->d.cuGraphInstantiate(&ex[j], gr, 0);
		c->d.cuGraphDestroy(gr);
		if (r) {
			ex[j] = NULL;
			rtcu_msg(c, r, "cuGraphInstantiate(&ex[j], gr, 0)", __func__, __FILE__, __LINE__,
			         err, errlen);
			goto done;
		}
		CHECK_CU_GOTO(c, cuGraphLaunch(ex[j], c->stream), done); // warm-up
	}
	CHECK_CU_GOTO(c, cuEventCreate(&ev[0], 0), done);
	CHECK_CU_GOTO(c, cuEventCreate(&ev[1], 0), done);
	CHECK_CU_GOTO(c, cuStreamSynchronize(c->stream), done);
	for (int s = 0; s < MMA_SAMPLES; s++)
		for (int j = 0; j < MMA_NCAND; j++) {
			if (!can[j])
				continue;
			CHECK_CU_GOTO(c, cuEventRecord(ev[0], c->stream), done);
			CHECK_CU_GOTO(c, cuGraphLaunch(ex[j], c->stream), done);
			CHECK_CU_GOTO(c, cuEventRecord(ev[1], c->stream), done);
			CHECK_CU_GOTO(c, cuEventSynchronize(ev[1]), done);
			float ms = 0;
			CHECK_CU_GOTO(c, cuEventElapsedTime(&ms, ev[0], ev[1]), done);
			t[j][s] = ms / MMA_BATCH;
		}
	*best = -1;
	for (int j = 0; j < MMA_NCAND; j++) {
		if (!can[j])
			continue;
		qsort(t[j], MMA_SAMPLES, sizeof t[j][0], cmp_f);
		us[j] = 1e3 * t[j][MMA_SAMPLES / 2];
		if (*best < 0 || us[j] < us[*best])
			*best = j;
	}
	ok = 1;
done:
	for (int i = 0; i < 2; i++)
		if (ev[i])
			c->d.cuEventDestroy(ev[i]);
	for (int j = 0; j < MMA_NCAND; j++)
		if (ex[j])
			c->d.cuGraphExecDestroy(ex[j]);
	return ok;
}

// Decides how record kk of task k runs (kk->mma_pick): FADC_CUDA_MMA, the
// kernels the task's modules hold (a grid's y extent must fit), the cache,
// else timed.
static int
mma_decide(RtCuda *c, RtCuTask *k, Kern *kk, char *err, size_t errlen)
{
	const ArtGemm *g = &kk->k->gemm;
	int can[MMA_NCAND] = {c->blas->mma != 1 && c->blas->mma < 64, 0, 0};
	kk->mma_pick = 1;
	if (!c->blas->mma || !k)
		return 1;
	for (int s = 0; s < 2; s++) {
		char name[64];
		snprintf(name, sizeof name, "fadc_mma3_%c%c_%d", g->ta ? 't' : 'n', g->tb ? 't' : 'n',
		         mma_tile[s]);
		kk->mma[s] = NULL;
		for (uint32_t m = 0; m < k->t->nmodule && !kk->mma[s]; m++)
			if (k->mod[m] && c->d.cuModuleGetFunction(&kk->mma[s], k->mod[m], name))
				kk->mma[s] = NULL;
		can[1 + s] = kk->mma[s] && (g->m + mma_tile[s] - 1) / mma_tile[s] <= 65535 &&
		             (c->blas->mma < 64 || c->blas->mma == mma_tile[s]);
	}
	int n = can[0] + can[1] + can[2];
	if (!can[1] && !can[2]) // no kernel (FADC_CUDA_MMA=0 at compile time): cuBLAS
		return 1;
	uint32_t rec = (uint32_t)(kk - k->k);
	RtChoiceKey key = {k->artifact, c->gpu_key, k->index, MMA_KEY | rec};
	int cached = n > 1 && c->cache[0] ? rt_choice_lookup(c->cache, &key) : -1;
	double us[MMA_NCAND] = {0};
	const char *how = "only";
	int best = can[0] ? 0 : can[1] ? 1 : 2;
	if (cached >= 0 && cached < MMA_NCAND && can[cached]) {
		best = cached;
		how = "cached";
	} else if (n > 1) {
		if (!mma_time(c, kk, can, &best, us, err, errlen))
			return 0;
		how = "timed";
		if (c->cache[0])
			rt_choice_store(c->cache, &key, best); // no cache is no error
	}
	kk->mma_pick = 1 + best;
	const char *log = getenv("FADC_CUDA_CHOICE_LOG");
	if (log && *log && strcmp(log, "0")) {
		fprintf(stderr, "fadc: task '%s' gemm record %u (%s): batch %llu M %llu N %llu K %llu",
		        k->t->name, rec, how, (unsigned long long)g->batch, (unsigned long long)g->m,
		        (unsigned long long)g->n, (unsigned long long)g->k);
		for (int j = 0; j < MMA_NCAND; j++)
			if (can[j]) {
				fprintf(stderr, " %s", j == best ? "*" : "");
				if (j)
					fprintf(stderr, "fadc_mma3_%d", mma_tile[j - 1]);
				else
					fprintf(stderr, "cublasSgemmStridedBatched");
				if (us[j] > 0)
					fprintf(stderr, " %.2f us (%.1f TFLOP/s)", us[j],
					        2e-6 * (double)g->batch * (double)g->m * (double)g->n *
					            (double)g->k / us[j]);
			}
		fprintf(stderr, "\n");
	}
	return 1;
}

// The context is destroyed: its handle goes (before the pool's memory,
// which holds the workspace).  The library stays loaded, as the driver
// does.
void
rtcu_blas_close(RtCuda *c)
{
	if (c->blas && c->blas->h)
		c->blas->cublasDestroy(c->blas->h);
	free(c->blas);
	c->blas = NULL;
}
