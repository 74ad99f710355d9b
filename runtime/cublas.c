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
int
rtcu_blas_gemm(RtCuda *c, Kern *kk, char *err, size_t errlen)
{
	const ArtGemm *g = &kk->k->gemm;
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
