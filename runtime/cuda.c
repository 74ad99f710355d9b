// runtime/cuda.c -- the runtime on an NVIDIA GPU: the CUDA driver API
// loaded at run time, a device memory pool, kernel launches and CUDA graphs.
//
// The driver is never linked: rtcu_open dlopens libcuda.so.1 and looks up
// the few entry points below by their exported (versioned) names, with the
// types written out here, so the runtime builds without a CUDA toolkit and
// runs CPU-only where there is no driver.  Every call goes through
// CHECK_CU, which writes the statement, the function, file:line and the
// driver's own name and text for the error into err (STYLE.md §4.7).
//
// The primary context of the device is used (the context other libraries
// of the process share), with one non-blocking stream per fadc context.
//
// Memory: one pool per fadc context (runtime/cumem.c keeps its books;
// pool_grow gives it chunks from cuMemAlloc).  Task arenas, declarations,
// outputs and runtime-owned tensors are blocks of it, so after the first
// run of a task nothing is allocated on the run path.
//
// Launches: a kernel of the artifact is a grid-stride loop over its output
// points (codegen/cuda.c), so any grid is correct; the grid covers the
// points with 256-thread blocks, capped at 2^20 blocks.
//
// CUDA graphs and graph trees (docs/CUDA.md): a task's first run launches
// its kernels eagerly (the module is loaded and the kernels resolved
// outside any capture, the warm-up); later runs are recorded into CUDA
// graphs (cuStreamBeginCapture in thread-local mode, the same launches,
// cuStreamEndCapture, instantiate) and replayed (cuGraphLaunch).
//
// The recordings of a context form one tree, as PyTorch's graph trees do:
// a node is one recording of one task in one state: its parent (the call
// before it in this generation), and the argument values its kernel nodes
// hold (every device address and the run seed: the key).  A call looks for
// a child of the current node with its task and its key: found, the graph
// is replayed; not found, one is recorded and becomes that child.  The key
// carries the whole state that matters to a graph: where the caller's
// outputs and the model-owned outputs were placed (runtime/rt.c places the
// latter clear of the outputs of earlier calls that are still alive, so
// liveness shows as other addresses), the declarations (static inputs,
// used in place), inputs that are outputs of earlier calls (in place), and
// the caller's other inputs.  Those are read in place while the caller
// keeps passing the same tensors (a copy would cost ~5 us per input per
// call, as much as the replay of a small task); where two recordings of a
// place in the tree differ from a call only in these inputs' addresses,
// the inputs move, and the call records a graph that reads the task's own
// staging buffers instead, copied there (cuMemcpyDtoDAsync) before each of
// its replays: one graph for every address from then on.  A task called
// again in the same generation starts a new one: the path goes back to the
// root (rtcu_task_begin).
//
// Declarations are keyed by address too: one bound by reference
// (fadc_model_bind_ref) to another tensor of the caller's misses every
// recording made for the old address (the memcmp of the key is the
// address check: a few pointer compares per replay) and is recorded
// again, beside them; binding the old tensor back replays its graph.  Each
// specialisation of an artifact (-D N=8,32) is a task of its own, so it
// has recordings of its own.
//
// A recording made where the tree already has one for the same task under
// the same parent (another state: moved outputs, released outputs, a
// parameter bound by reference to another tensor) is a re-record; past the context's re-record limit (64, or
// FADC_CUDA_GRAPH_RERECORD_LIMIT) a task runs eagerly with one warning.
// The graphs of every recording are kept until the task is freed (a model
// closed), which prunes its nodes and their subtrees.
// FADC_DISABLE_CUDA_GRAPHS=1 (read at rtcu_open) runs everything eagerly.
//
// A task's launches are a sequence: recording captures whatever
// launch_all issues on the stream, so new kinds of launch records need no
// change here beyond their argument values joining the key (task_args).
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
// Choices (choice records, artifact format 6; docs/CUDA.md, "Choices
// measured on the GPU"): where the compiler could not tell whether a
// product runs faster as its printed kernel or as a cuBLAS GEMM, the
// artifact has both behind a choice record.  At the task's first run
// (eager, never captured) each choice is decided in stream order, where
// its inputs are ready: forced by FADC_CUDA_CHOICE, else found in the
// cache file of earlier processes (runtime/choice.c; key: the artifact's
// descriptor hash, the GPU's name and UUID, the task, the choice), else
// timed: a warm-up launch of each candidate, then CHOICE_SAMPLES samples
// of CHOICE_BATCH back-to-back launches between two events, candidates
// interleaved; the lower median wins (ties: the first) and is written to
// the cache.  The chosen candidate runs last, so the output is its own.
// Every later run, eager or captured, launches that candidate alone.
#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "choice.h"
#include "cumem.h"
#include "rtcuda.h"
#include "../ir/hungarian.h" // the solver, linked from fadc_support

// ---------------------------------------------------------------- the driver API we use

typedef int CUresult; // CUDA_SUCCESS = 0
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUstream_st *CUstream;
typedef struct CUgraph_st *CUgraph;
typedef struct CUgraphExec_st *CUgraphExec;
typedef struct CUevent_st *CUevent;

typedef struct CUuuid_st {
	unsigned char bytes[16];
} CUuuid;

enum {
	CU_STREAM_NON_BLOCKING = 1,
	CU_STREAM_CAPTURE_MODE_THREAD_LOCAL = 1,
	CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16,
	CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
	CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76,
};

// One row per entry point: its member name, the symbol libcuda exports, the
// return type and parameters.
#define CU_FUNCS(X)                                                                        \
	X(cuInit, "cuInit", (unsigned flags))                                                  \
	X(cuDriverGetVersion, "cuDriverGetVersion", (int *v))                                  \
	X(cuGetErrorName, "cuGetErrorName", (CUresult r, const char **s))                      \
	X(cuGetErrorString, "cuGetErrorString", (CUresult r, const char **s))                  \
	X(cuDeviceGetCount, "cuDeviceGetCount", (int *n))                                      \
	X(cuDeviceGet, "cuDeviceGet", (CUdevice * d, int i))                                   \
	X(cuDeviceGetName, "cuDeviceGetName", (char *name, int len, CUdevice d))               \
	X(cuDeviceGetAttribute, "cuDeviceGetAttribute", (int *v, int attr, CUdevice d))        \
	X(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", (CUcontext * c, CUdevice d))   \
	X(cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2", (CUdevice d))             \
	X(cuCtxSetCurrent, "cuCtxSetCurrent", (CUcontext c))                                   \
	X(cuStreamCreate, "cuStreamCreate", (CUstream * s, unsigned flags))                    \
	X(cuStreamDestroy, "cuStreamDestroy_v2", (CUstream s))                                 \
	X(cuStreamSynchronize, "cuStreamSynchronize", (CUstream s))                            \
	X(cuMemAlloc, "cuMemAlloc_v2", (CUdeviceptr * p, size_t n))                            \
	X(cuMemFree, "cuMemFree_v2", (CUdeviceptr p))                                          \
	X(cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2",                                           \
	  (CUdeviceptr dst, const void *src, size_t n, CUstream s))                            \
	X(cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2",                                           \
	  (void *dst, CUdeviceptr src, size_t n, CUstream s))                                  \
	X(cuMemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2",                                           \
	  (CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s))                            \
	X(cuMemsetD8Async, "cuMemsetD8Async", (CUdeviceptr p, unsigned char v, size_t n,       \
	                                       CUstream s))                                    \
	X(cuModuleLoadData, "cuModuleLoadData", (CUmodule * m, const void *image))             \
	X(cuModuleUnload, "cuModuleUnload", (CUmodule m))                                      \
	X(cuModuleGetFunction, "cuModuleGetFunction", (CUfunction * f, CUmodule m,             \
	                                               const char *name))                      \
	X(cuLaunchKernel, "cuLaunchKernel",                                                    \
	  (CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,      \
	   unsigned bz, unsigned shmem, CUstream s, void **params, void **extra))              \
	X(cuStreamBeginCapture, "cuStreamBeginCapture_v2", (CUstream s, int mode))             \
	X(cuStreamEndCapture, "cuStreamEndCapture", (CUstream s, CUgraph * g))                 \
	X(cuGraphInstantiate, "cuGraphInstantiateWithFlags",                                   \
	  (CUgraphExec * e, CUgraph g, unsigned long long flags))                              \
	X(cuGraphLaunch, "cuGraphLaunch", (CUgraphExec e, CUstream s))                         \
	X(cuGraphExecDestroy, "cuGraphExecDestroy", (CUgraphExec e))                           \
	X(cuGraphDestroy, "cuGraphDestroy", (CUgraph g))                                       \
	X(cuMemAllocHost, "cuMemAllocHost_v2", (void **p, size_t n))                           \
	X(cuMemFreeHost, "cuMemFreeHost", (void *p))                                           \
	X(cuLaunchHostFunc, "cuLaunchHostFunc", (CUstream s, void (*fn)(void *), void *data)) \
	X(cuEventCreate, "cuEventCreate", (CUevent * e, unsigned flags))                       \
	X(cuEventDestroy, "cuEventDestroy_v2", (CUevent e))                                    \
	X(cuEventRecord, "cuEventRecord", (CUevent e, CUstream s))                             \
	X(cuEventSynchronize, "cuEventSynchronize", (CUevent e))                               \
	X(cuEventElapsedTime, "cuEventElapsedTime", (float *ms, CUevent a, CUevent b))

typedef struct Driver {
	void *dl;
#define X(name, sym, args) CUresult(*name) args;
	CU_FUNCS(X)
#undef X
} Driver;

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
} Blas;

// cuBLAS's recommended workspace on Hopper (4 MiB before it); one per
// context, a block of its pool.
#define BLAS_WORKSPACE ((size_t)32 << 20)

// ---------------------------------------------------------------- state

// One recording of the graph tree: a child of the call before it.
typedef struct Node {
	struct Node *parent, *child, *next; // next: the parent's next child (recording order)
	RtCuTask *task; // NULL for the root
	CUgraphExec exec;
	uint64_t *key; // the argument values it was recorded with (task->nkey)
	uint64_t replays;
	int staged; // reads the caller's inputs from the task's staging buffers
} Node;

struct RtCuda {
	Driver d;
	CUdevice dev;
	CUcontext ctx;
	CUstream stream;
	char name[256];
	int no_graphs; // FADC_DISABLE_CUDA_GRAPHS=1
	uint64_t rerecord_limit; // per task; FADC_CUDA_GRAPH_RERECORD_LIMIT
	char hostfail[512]; // a host step's failure, reported at the next wait (host_step)
	CuMem mem; // the device memory pool (runtime/cumem.c)
	Node root; // the graph tree: root.child are the first calls of a generation
	Node *cur; // the node of the last call of this generation (&root: none)
	uint64_t gen; // the generation: a task called twice in one starts the next
	RtCuStats st;
	CUevent ev[2]; // rtcu_timer's start and stop, created at its first use
	// Choices: FADC_CUDA_CHOICE (-1: time or use the cache, else the
	// candidate to run), the GPU's part of the cache key, the cache file
	// ("" without one).
	int choice_forced;
	char gpu_key[RT_CHOICE_GPU_MAX];
	char cache[4096];
	Blas blas; // cuBLAS, loaded by the first task with a GEMM record
	cublasHandle_t blas_h; // the context's handle (on its stream), or NULL
	uint64_t blas_ws; // its workspace, a pool block while blas_users > 0
	uint32_t blas_users; // loaded tasks with GEMM records
	int prof; // FADC_CUDA_PROFILE=1: eager runs, each launch timed (prof_report)
};

typedef struct HostStep HostStep;

typedef struct Kern {
	CUfunction fn; // NULL for a host step
	HostStep *host; // a host step's pinned buffers (host_step), NULL before its first run
	const ArtKernel *k;
	unsigned grid;
	uint64_t *val; // argument values (narg, then the run seed)
	void **param; // param[i] = &val[i], as cuLaunchKernel takes them
} Kern;

enum { RERECORD_LIMIT = 64 };

struct RtCuTask {
	const ArtTask *t;
	CUmodule mod;
	Kern *k;
	uint32_t nk;
	uint64_t runs; // 0: the next run is eager (the warm-up)
	uint64_t gen; // the generation of its last call
	uint64_t *cur; // this run's argument values, flattened (nkey)
	uint8_t *smask; // smask[q]: key slot q is a caller's input that can be staged
	size_t nkey;
	// Staging: the task's own buffer for each caller input (ART_ROLE_ARG),
	// one pool block; stage_at[i] is 0 for other inputs and empty ones.
	uint64_t stage, *stage_at, *stage_bytes;
	uint64_t rerecords;
	int eager_only; // past the re-record limit
	int blas; // has GEMM records: holds the context's cuBLAS workspace
	// FADC_CUDA_PROFILE: an event before each launch and after the last,
	// and each launch's milliseconds summed over pruns runs (porder: the
	// records launched, in order).
	CUevent *pev;
	double *pms;
	uint32_t *porder;
	uint64_t pruns;
	// Its choices: the choice record's index (its candidates follow it),
	// their number, the one that runs (-1 until the first run decides).
	struct Choice {
		uint32_t at, n;
		int pick;
	} *choice;
	uint32_t nchoice;
	uint64_t artifact; // the artifact's descriptor hash: the cache's key
	uint32_t index; // the task's index in the descriptor
};

static int host_failed(RtCuda *c, char *err, size_t errlen);
static int blas_acquire(RtCuda *c, char *err, size_t errlen);
static void blas_release(RtCuda *c);
static void pool_drop(void *ctx, uint64_t base, uint64_t size);
static void prof_report(RtCuTask *k);

// ---------------------------------------------------------------- errors

static void
cu_msg(const RtCuda *c, CUresult r, const char *what, const char *fn, const char *file, int line,
       char *err, size_t errlen)
{
	const char *name = NULL, *text = NULL;
	if (c && c->d.cuGetErrorName)
		c->d.cuGetErrorName(r, &name);
	if (c && c->d.cuGetErrorString)
		c->d.cuGetErrorString(r, &text);
	snprintf(err, errlen, "CUDA: %s failed in %s (%s:%d): %s: %s", what, fn, file, line,
	         name ? name : "?", text ? text : "unknown error");
}

// The one checked path for driver calls: on failure, the message and
// `return 0` (or `goto` a label with CHECK_CU_GOTO).
#define CHECK_CU(c, x)                                                                     \
	do {                                                                                   \
		CUresult cu_r_ = (c)->d.x;                                                         \
		if (cu_r_) {                                                                       \
			cu_msg((c), cu_r_, #x, __func__, __FILE__, __LINE__, err, errlen);             \
			return 0;                                                                      \
		}                                                                                  \
	} while (0)
#define CHECK_CU_GOTO(c, x, label)                                                         \
	do {                                                                                   \
		CUresult cu_r_ = (c)->d.x;                                                         \
		if (cu_r_) {                                                                       \
			cu_msg((c), cu_r_, #x, __func__, __FILE__, __LINE__, err, errlen);             \
			goto label;                                                                    \
		}                                                                                  \
	} while (0)

// ---------------------------------------------------------------- open, close

static void tree_prune(RtCuda *c, Node *n, const RtCuTask *k);

int
rtcu_open(int index, RtCuda **out, char *err, size_t errlen)
{
	*out = NULL;
	RtCuda *c = calloc(1, sizeof *c);
	if (!c) {
		snprintf(err, errlen, "out of memory");
		return 0;
	}
	c->d.dl = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!c->d.dl) {
		const char *e = dlerror();
		snprintf(err, errlen,
		         "no CUDA driver: dlopen(\"libcuda.so.1\") failed (%s); this machine can run "
		         "models on the CPU only",
		         e ? e : "not found");
		free(c);
		return 0;
	}
	void *sp;
	// POSIX: a function pointer has the representation of the void * that
	// dlsym returns; copied as bytes, since C has no cast between the two.
#define X(name, sym, args)                                                                 \
	sp = dlsym(c->d.dl, sym);                                                              \
	if (!sp) {                                                                             \
		snprintf(err, errlen, "the CUDA driver has no %s (too old a driver?)", sym);       \
		goto fail;                                                                         \
	}                                                                                      \
	memcpy(&c->d.name, &sp, sizeof sp);
	CU_FUNCS(X)
#undef X
	CHECK_CU_GOTO(c, cuInit(0), fail);
	int n = 0;
	CHECK_CU_GOTO(c, cuDeviceGetCount(&n), fail);
	if (index < 0 || index >= n) {
		snprintf(err, errlen, "CUDA device %d does not exist (this machine has %d)", index, n);
		goto fail;
	}
	CHECK_CU_GOTO(c, cuDeviceGet(&c->dev, index), fail);
	CHECK_CU_GOTO(c, cuDeviceGetName(c->name, (int)sizeof c->name, c->dev), fail);
	// The GPU's identity for the choice cache: its name and, where the
	// driver has cuDeviceGetUuid (CUDA 9.2 and later), its UUID.
	{
		CUresult (*get_uuid)(CUuuid *, CUdevice) = NULL;
		void *u = dlsym(c->d.dl, "cuDeviceGetUuid_v2");
		if (!u)
			u = dlsym(c->d.dl, "cuDeviceGetUuid");
		if (u)
			memcpy(&get_uuid, &u, sizeof u);
		CUuuid id;
		int have = get_uuid && !get_uuid(&id, c->dev);
		rt_choice_gpu(c->gpu_key, c->name, have ? id.bytes : NULL);
	}
	const char *fc = getenv("FADC_CUDA_CHOICE");
	c->choice_forced = rt_choice_forced(fc);
	if (c->choice_forced == -2) {
		fprintf(stderr, "fadc: warning: FADC_CUDA_CHOICE=%s: expected a candidate (0, 1, ...) "
		                "or auto; the runtime decides\n", fc);
		c->choice_forced = -1;
	}
	if (!rt_choice_path(c->cache, sizeof c->cache))
		c->cache[0] = 0;
	CHECK_CU_GOTO(c, cuDevicePrimaryCtxRetain(&c->ctx, c->dev), fail);
	CHECK_CU_GOTO(c, cuCtxSetCurrent(c->ctx), fail_ctx);
	CHECK_CU_GOTO(c, cuStreamCreate(&c->stream, CU_STREAM_NON_BLOCKING), fail_ctx);
	const char *ng = getenv("FADC_DISABLE_CUDA_GRAPHS");
	c->no_graphs = ng && *ng && strcmp(ng, "0");
	const char *lim = getenv("FADC_CUDA_GRAPH_RERECORD_LIMIT");
	char *end = NULL;
	unsigned long long l = lim && *lim ? strtoull(lim, &end, 10) : RERECORD_LIMIT;
	c->rerecord_limit = end && *end ? RERECORD_LIMIT : l;
	const char *pf = getenv("FADC_CUDA_PROFILE");
	c->prof = pf && *pf && strcmp(pf, "0");
	c->cur = &c->root;
	c->gen = 1;
	*out = c;
	return 1;
fail_ctx:
	c->d.cuDevicePrimaryCtxRelease(c->dev);
fail:
	dlclose(c->d.dl);
	free(c);
	return 0;
}

void
rtcu_close(RtCuda *c)
{
	if (!c)
		return;
	c->d.cuCtxSetCurrent(c->ctx);
	c->d.cuStreamSynchronize(c->stream);
	tree_prune(c, &c->root, NULL); // empty unless models were left open
	// cuBLAS stays loaded, as the driver does (below); its handle goes
	// before the memory its workspace is in.
	if (c->blas_h)
		c->blas.cublasDestroy(c->blas_h);
	cumem_close(&c->mem, pool_drop, c);
	for (int i = 0; i < 2; i++)
		if (c->ev[i])
			c->d.cuEventDestroy(c->ev[i]);
	c->d.cuStreamDestroy(c->stream);
	c->d.cuDevicePrimaryCtxRelease(c->dev);
	// The driver stays loaded: unloading libcuda while the process runs
	// is not supported by NVIDIA and gains nothing.
	free(c);
}

const char *
rtcu_device_name(const RtCuda *c)
{
	return c->name;
}

// ---------------------------------------------------------------- the pool

// A new chunk for the pool (runtime/cumem.c): cuMemAlloc, or its error
// with the bytes asked.
static int
pool_grow(void *ctx, uint64_t size, uint64_t *base, char *err, size_t errlen)
{
	RtCuda *c = ctx;
	CUdeviceptr p = 0;
	CUresult r = c->d.cuMemAlloc(&p, (size_t)size);
	if (r) {
		cu_msg(c, r, "cuMemAlloc(&p, size)", __func__, __FILE__, __LINE__, err, errlen);
		size_t l = strlen(err);
		snprintf(err + l, errlen - l, " (%llu bytes asked)", (unsigned long long)size);
		return 0;
	}
	*base = p;
	return 1;
}

// A chunk back to the driver (rtcu_close).
static void
pool_drop(void *ctx, uint64_t base, uint64_t size)
{
	RtCuda *c = ctx;
	(void)size;
	c->d.cuMemFree(base);
}

int
rtcu_alloc(RtCuda *c, size_t bytes, uint64_t *addr, char *err, size_t errlen)
{
	return cumem_alloc(&c->mem, bytes, addr, pool_grow, c, err, errlen);
}

void
rtcu_free(RtCuda *c, uint64_t addr)
{
	if (!c)
		return;
	cumem_free(&c->mem, addr);
}

// ---------------------------------------------------------------- copies

int
rtcu_htod(RtCuda *c, uint64_t dst, const void *src, size_t n, char *err, size_t errlen)
{
	if (!n)
		return 1;
	CHECK_CU(c, cuMemcpyHtoDAsync(dst, src, n, c->stream));
	CHECK_CU(c, cuStreamSynchronize(c->stream));
	return 1;
}

int
rtcu_dtoh(RtCuda *c, void *dst, uint64_t src, size_t n, char *err, size_t errlen)
{
	if (!n)
		return 1;
	CHECK_CU(c, cuMemcpyDtoHAsync(dst, src, n, c->stream));
	CHECK_CU(c, cuStreamSynchronize(c->stream));
	return !host_failed(c, err, errlen);
}

int
rtcu_dtod(RtCuda *c, uint64_t dst, uint64_t src, size_t n, char *err, size_t errlen)
{
	if (!n || dst == src)
		return 1;
	CHECK_CU(c, cuMemcpyDtoDAsync(dst, src, n, c->stream));
	return 1;
}

int
rtcu_zero(RtCuda *c, uint64_t dst, size_t n, char *err, size_t errlen)
{
	if (!n)
		return 1;
	CHECK_CU(c, cuMemsetD8Async(dst, 0, n, c->stream));
	return 1;
}

int
rtcu_sync(RtCuda *c, char *err, size_t errlen)
{
	CHECK_CU(c, cuStreamSynchronize(c->stream));
	return !host_failed(c, err, errlen);
}

// Device-side timing: an event recorded on the stream at start, another
// at stop, and the time between them as the GPU measured it (the work
// queued in between, without the host's launch and synchronization costs;
// cuEventElapsedTime's resolution is about 0.5 us).  stop waits for its
// event.
int
rtcu_timer(RtCuda *c, int stop, double *seconds, char *err, size_t errlen)
{
	for (int i = 0; i < 2; i++)
		if (!c->ev[i])
			CHECK_CU(c, cuEventCreate(&c->ev[i], 0)); // CU_EVENT_DEFAULT: timing enabled
	if (!stop) {
		CHECK_CU(c, cuEventRecord(c->ev[0], c->stream));
		return 1;
	}
	float ms = 0;
	CHECK_CU(c, cuEventRecord(c->ev[1], c->stream));
	CHECK_CU(c, cuEventSynchronize(c->ev[1]));
	CHECK_CU(c, cuEventElapsedTime(&ms, c->ev[0], c->ev[1]));
	*seconds = ms * 1e-3;
	return !host_failed(c, err, errlen);
}

void
rtcu_stats(const RtCuda *c, RtCuStats *s)
{
	*s = c->st;
	s->live_blocks = c->mem.live_blocks;
	s->live_bytes = c->mem.live_bytes;
	s->reserved_bytes = c->mem.reserved_bytes;
}

// ---------------------------------------------------------------- the graph tree

// Frees n's subtree (n included).
static void
node_free(RtCuda *c, Node *n)
{
	for (Node *ch = n->child, *next; ch; ch = next) {
		next = ch->next;
		node_free(c, ch);
	}
	if (n->exec)
		c->d.cuGraphExecDestroy(n->exec);
	free(n->key);
	free(n);
}

// Removes from n's subtree every node of task k, with its subtree (k NULL:
// every node); the path goes back to the root.
static void
tree_prune(RtCuda *c, Node *n, const RtCuTask *k)
{
	for (Node **p = &n->child; *p;) {
		Node *ch = *p;
		if (!k || ch->task == k) {
			*p = ch->next;
			node_free(c, ch);
		} else {
			tree_prune(c, ch, k);
			p = &ch->next;
		}
	}
	c->cur = &c->root;
}

static size_t
tree_print(const Node *n, int depth, char *buf, size_t len, size_t at)
{
	for (const Node *ch = n->child; ch; ch = ch->next) {
		// A task of an artifact with specialisations says which: "forward
		// [N=8]" (each specialisation is a task of its own, recorded apart).
		const char *sp = ch->task->t->spec_name ? ch->task->t->spec_name : "";
		int w = snprintf(buf + (at < len ? at : len), at < len ? len - at : 0,
		                 "%*s%s%s%s%s: %llu replays\n", 2 * depth, "", ch->task->t->name,
		                 sp[0] ? " [" : "", sp, sp[0] ? "]" : "",
		                 (unsigned long long)ch->replays);
		at += w > 0 ? (size_t)w : 0;
		at = tree_print(ch, depth + 1, buf, len, at);
	}
	return at;
}

size_t
rtcu_graph_tree(const RtCuda *c, char *buf, size_t len)
{
	if (len)
		buf[0] = 0;
	return tree_print(&c->root, 0, buf, len, 0);
}

uint64_t
rtcu_task_begin(RtCuda *c, RtCuTask *k)
{
	if (k->gen == c->gen) {
		c->gen++;
		c->cur = &c->root;
	}
	k->gen = c->gen;
	return c->gen;
}

// ---------------------------------------------------------------- tasks

void
rtcu_task_free(RtCuda *c, RtCuTask *k)
{
	if (!k)
		return;
	tree_prune(c, &c->root, k);
	if (k->blas)
		blas_release(c);
	if (k->mod)
		c->d.cuModuleUnload(k->mod);
	for (uint32_t i = 0; k->k && i < k->nk; i++) {
		if (k->k[i].host)
			c->d.cuMemFreeHost(k->k[i].host);
		free(k->k[i].val);
		free(k->k[i].param);
	}
	rtcu_free(c, k->stage);
	free(k->stage_at);
	free(k->stage_bytes);
	if (k->pruns)
		prof_report(k);
	for (uint32_t i = 0; k->pev && i <= k->nk; i++)
		if (k->pev[i])
			c->d.cuEventDestroy(k->pev[i]);
	free(k->pev);
	free(k->pms);
	free(k->porder);
	free(k->k);
	free(k->cur);
	free(k->smask);
	free(k->choice);
	free(k);
}

// FADC_CUDA_PROFILE=1: at the task's end, where its time went (stderr):
// the launches by their total time, and the kernels' time by what they
// are (the suffix of their names: sum, matmul, elementwise, ...).  The
// times are the GPU's between events around each launch of eager runs
// but the first (which loads modules, cuBLAS's kernels included); CUDA
// graphs are off while profiling, so launch gaps are included.
static void
prof_report(RtCuTask *k)
{
	const ArtTask *t = k->t;
	double total = 0;
	for (uint32_t i = 0; i < k->nk; i++)
		total += k->pms[i];
	if (!(total > 0))
		return;
	double runs = (double)k->pruns;
	fprintf(stderr, "fadc: profile of task '%s': %llu runs, %.3f ms per run, %u launches\n",
	        t->name, (unsigned long long)k->pruns, total / runs, k->nk);
	// By what the kernels are (name suffix after _k<N>_), GEMMs and host steps.
	enum { NCAT = 64 };
	char cat[NCAT][48];
	double cms[NCAT];
	int ncat = 0, cn[NCAT];
	for (uint32_t i = 0; i < k->nk; i++) {
		const ArtKernel *a = &t->kern[i];
		if (a->kind == ART_LAUNCH_CHOICE || !(k->pms[i] > 0))
			continue; // a choice's record, or a candidate not chosen
		const char *w = a->kind == ART_LAUNCH_GEMM ? "cublas gemm"
		                : a->kind != ART_LAUNCH_KERNEL ? "host step"
		                                               : NULL;
		if (!w) {
			const char *q = a->name ? strstr(a->name, "_k") : NULL;
			while (q && !(q[2] >= '0' && q[2] <= '9'))
				q = strstr(q + 1, "_k");
			w = q ? strchr(q + 2, '_') : NULL;
			w = w ? w + 1 : "?";
		}
		int j = 0;
		while (j < ncat && strcmp(cat[j], w))
			j++;
		if (j == ncat) {
			if (ncat == NCAT)
				j = NCAT - 1;
			else {
				snprintf(cat[ncat], sizeof cat[ncat], "%s", w);
				cms[ncat] = 0;
				cn[ncat++] = 0;
			}
		}
		cms[j] += k->pms[i];
		cn[j]++;
	}
	for (int done = 0; done < ncat; done++) {
		int b = -1;
		for (int j = 0; j < ncat; j++)
			if (cn[j] >= 0 && (b < 0 || cms[j] > cms[b]))
				b = j;
		fprintf(stderr, "  %5.1f%%  %10.1f us  %4d launches  %s\n", 100 * cms[b] / total,
		        1e3 * cms[b] / runs, cn[b], cat[b]);
		cn[b] = -1;
	}
	uint8_t *shown = calloc(k->nk + 1, 1);
	for (int n = 0; shown && n < 30 && n < (int)k->nk; n++) {
		uint32_t b = UINT32_MAX;
		for (uint32_t i = 0; i < k->nk; i++)
			if (!shown[i] && (b == UINT32_MAX || k->pms[i] > k->pms[b]))
				b = i;
		shown[b] = 1;
		const ArtKernel *a = &t->kern[b];
		if (a->kind == ART_LAUNCH_GEMM)
			fprintf(stderr, "  %5.1f%%  %10.1f us  launch %4u  cublas gemm batch %llu M %llu N %llu K %llu\n",
			        100 * k->pms[b] / total, 1e3 * k->pms[b] / runs, b,
			        (unsigned long long)a->gemm.batch, (unsigned long long)a->gemm.m,
			        (unsigned long long)a->gemm.n, (unsigned long long)a->gemm.k);
		else
			fprintf(stderr, "  %5.1f%%  %10.1f us  launch %4u  %s (%llu points, %u blocks)\n",
			        100 * k->pms[b] / total, 1e3 * k->pms[b] / runs, b,
			        a->name ? a->name : "host step", (unsigned long long)a->points,
			        k->k[b].grid);
	}
	free(shown);
}

static uint64_t
art_bytes(const ArtTensor *x)
{
	static const uint64_t size[] = {4, 8, 8, 1}; // ART_F32 ... ART_BOOL
	uint64_t n = x->dtype < 4 ? size[x->dtype] : 8;
	for (int i = 0; i < x->rank; i++)
		n *= (uint64_t)x->dim[i];
	return n;
}


int
rtcu_task_load(RtCuda *c, const ArtTask *t, uint32_t index, uint64_t artifact,
               const uint8_t *images, RtCuTask **out, char *err, size_t errlen)
{
	*out = NULL;
	RtCuTask *k = calloc(1, sizeof *k);
	if (!k || !(k->k = calloc(t->ncuda + 1, sizeof *k->k)) ||
	    !(k->stage_at = calloc(t->nin + 1, sizeof *k->stage_at)) ||
	    !(k->stage_bytes = calloc(t->nin + 1, sizeof *k->stage_bytes))) {
		if (k) {
			free(k->k);
			free(k->stage_at);
		}
		free(k);
		snprintf(err, errlen, "out of memory");
		return 0;
	}
	k->t = t;
	k->nk = t->ncuda;
	k->index = index;
	k->artifact = artifact;
	for (uint32_t i = 0; i < t->ncuda; i++)
		k->nchoice += t->kern[i].kind == ART_LAUNCH_CHOICE;
	if (k->nchoice && !(k->choice = calloc(k->nchoice, sizeof *k->choice))) {
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	for (uint32_t i = 0, n = 0; i < t->ncuda; i++)
		if (t->kern[i].kind == ART_LAUNCH_CHOICE)
			k->choice[n++] = (struct Choice){i, (uint32_t)t->kern[i].points, -1};
	// The cubin is for the artifact's architecture; where it does not load
	// (another GPU generation) the driver compiles the PTX.
	CUresult r = c->d.cuModuleLoadData(&k->mod, images + t->cubin_off);
	if (r && t->ptx_len && images[t->ptx_off + t->ptx_len - 1] == 0) {
		CUresult r2 = c->d.cuModuleLoadData(&k->mod, images + t->ptx_off);
		if (!r2)
			r = 0;
	}
	if (r) {
		k->mod = NULL;
		cu_msg(c, r, "cuModuleLoadData(&k->mod, cubin or PTX)", __func__, __FILE__, __LINE__, err,
		       errlen);
		size_t l = strlen(err);
		snprintf(err + l, errlen - l, " (task '%s': neither its cubin nor its PTX loads)",
		         t->name);
		goto fail;
	}
	size_t nkey = 0;
	for (uint32_t i = 0; i < k->nk; i++) {
		const ArtKernel *a = &t->kern[i];
		Kern *kk = &k->k[i];
		kk->k = a;
		if (a->kind == ART_LAUNCH_KERNEL)
			CHECK_CU_GOTO(c, cuModuleGetFunction(&kk->fn, k->mod, a->name), fail);
		uint64_t blocks = a->kind != ART_LAUNCH_KERNEL ? 1 : a->grid ? a->grid : (a->points + 255) / 256;
		kk->grid = (unsigned)(blocks > (1u << 20) ? (1u << 20) : blocks);
		kk->val = calloc(a->narg + 2, sizeof *kk->val);
		kk->param = calloc(a->narg + 2, sizeof *kk->param);
		if (!kk->val || !kk->param) {
			snprintf(err, errlen, "out of memory");
			goto fail;
		}
		for (uint32_t j = 0; j <= a->narg; j++)
			kk->param[j] = &kk->val[j];
		nkey += a->narg + 1;
	}
	if (!(k->cur = calloc(nkey + 1, sizeof *k->cur)) ||
	    !(k->smask = calloc(nkey + 1, sizeof *k->smask))) {
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	// GEMM records: cuBLAS is needed for those outside choices; where only
	// candidates of choices are GEMMs and cuBLAS does not load, each such
	// choice runs its first candidate that is a kernel.
	int gemms = 0, candidates = 0;
	for (uint32_t i = 0, end = 0; i < k->nk; i++) {
		if (t->kern[i].kind == ART_LAUNCH_CHOICE)
			end = i + (uint32_t)t->kern[i].points;
		else if (t->kern[i].kind == ART_LAUNCH_GEMM)
			*(i <= end && end ? &candidates : &gemms) = 1;
	}
	if (gemms || candidates) {
		if (blas_acquire(c, err, errlen))
			k->blas = 1;
		else if (gemms) {
			size_t l = strlen(err);
			snprintf(err + l, errlen - l, " (task '%s' has cuBLAS GEMMs)", t->name);
			goto fail;
		} else
			for (uint32_t ci = 0; ci < k->nchoice; ci++) {
				struct Choice *ch = &k->choice[ci];
				for (uint32_t j = 0; j < ch->n && ch->pick < 0; j++)
					if (t->kern[ch->at + 1 + j].kind != ART_LAUNCH_GEMM)
						ch->pick = (int)j;
			}
	}
	k->nkey = nkey;
	// The staging buffers: one block, each input 256-byte aligned in it.
	uint64_t total = 0;
	for (uint32_t i = 0; i < t->nin; i++)
		if (t->in[i].role == ART_ROLE_ARG) {
			k->stage_bytes[i] = art_bytes(&t->in[i]);
			total += (k->stage_bytes[i] + CUMEM_ALIGN - 1) / CUMEM_ALIGN * CUMEM_ALIGN;
		}
	if (total && !rtcu_alloc(c, (size_t)total, &k->stage, err, errlen))
		goto fail;
	for (uint64_t i = 0, at = 0; i < t->nin; i++)
		if (k->stage_bytes[i]) {
			k->stage_at[i] = k->stage + at;
			at += (k->stage_bytes[i] + CUMEM_ALIGN - 1) / CUMEM_ALIGN * CUMEM_ALIGN;
		}
	*out = k;
	return 1;
fail:
	rtcu_task_free(c, k);
	return 0;
}

// ---------------------------------------------------------------- cuBLAS

static void
blas_msg(const RtCuda *c, cublasStatus_t r, const char *what, const char *fn, const char *file,
         int line, char *err, size_t errlen)
{
	const char *name = c->blas.status_name ? c->blas.status_name(r) : NULL;
	const char *text = c->blas.status_string ? c->blas.status_string(r) : NULL;
	snprintf(err, errlen, "cuBLAS (%s): %s failed in %s (%s:%d): %s (status %d)%s%s",
	         c->blas.lib ? c->blas.lib : "?", what, fn, file, line,
	         name ? name : "CUBLAS_STATUS_?", (int)r, text ? ": " : "", text ? text : "");
}

// The one checked path for cuBLAS calls (STYLE.md 4.7, as CHECK_CU):
// the call's text, where, and cuBLAS's own name and text for the status.
#define CHECK_BLAS(c, x)                                                                   \
	do {                                                                                   \
		cublasStatus_t bl_r_ = (c)->blas.x;                                                \
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
	if (c->blas.dl)
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
	c->blas = b;
	return 1;
}

// A task with GEMM records is loaded: cuBLAS, the context's handle on its
// stream, and the workspace (set after the stream: cublasSetStream resets
// the workspace to cuBLAS's own pool, which would allocate during capture).
// Never inside a capture: task loads happen at a task's first run, eager.
static int
blas_acquire(RtCuda *c, char *err, size_t errlen)
{
	if (!blas_open(c, err, errlen))
		return 0;
	CHECK_CU(c, cuCtxSetCurrent(c->ctx));
	if (!c->blas_h) {
		CHECK_BLAS(c, cublasCreate(&c->blas_h));
		cublasStatus_t r = c->blas.cublasSetStream(c->blas_h, c->stream);
		if (r) {
			blas_msg(c, r, "cublasSetStream(c->blas_h, c->stream)", __func__, __FILE__,
			         __LINE__, err, errlen);
			c->blas.cublasDestroy(c->blas_h);
			c->blas_h = NULL;
			return 0;
		}
	}
	if (!c->blas_users) {
		if (!rtcu_alloc(c, BLAS_WORKSPACE, &c->blas_ws, err, errlen))
			return 0;
		void *ws = (void *)(uintptr_t)c->blas_ws;
		cublasStatus_t r = c->blas.cublasSetWorkspace(c->blas_h, ws, BLAS_WORKSPACE);
		if (r) {
			blas_msg(c, r, "cublasSetWorkspace(c->blas_h, ws, BLAS_WORKSPACE)", __func__,
			         __FILE__, __LINE__, err, errlen);
			rtcu_free(c, c->blas_ws);
			c->blas_ws = 0;
			return 0;
		}
	}
	c->blas_users++;
	return 1;
}

// The last task with GEMM records is freed: its workspace goes back to the
// pool (so that the pool is empty once every model is closed).  The handle
// keeps the stale pointer, but nothing calls it before the next
// blas_acquire sets a new workspace; the stream runs in order, so work
// queued before this reuse of the block has finished with it first.
static void
blas_release(RtCuda *c)
{
	if (c->blas_users && !--c->blas_users) {
		rtcu_free(c, c->blas_ws);
		c->blas_ws = 0;
	}
}

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
static int
gemm_step(RtCuda *c, Kern *kk, char *err, size_t errlen)
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
	int mode = g->tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH;
	CHECK_BLAS(c, cublasSetMathMode(c->blas_h, mode));
	if (g->dtype == ART_F64) {
		const double one = 1, zero = 0;
		CHECK_BLAS(c, cublasDgemmStridedBatched(c->blas_h, opb, opa, m, n, k, &one, B, ldb, sb,
		                                        A, lda, sa, &zero, C, ldc, sc, batch));
	} else {
		const float one = 1, zero = 0;
		CHECK_BLAS(c, cublasSgemmStridedBatched(c->blas_h, opb, opa, m, n, k, &one, B, ldb, sb,
		                                        A, lda, sa, &zero, C, ldc, sc, batch));
	}
	return 1;
}

// ---------------------------------------------------------------- host steps

// A host step of a task (ART_LAUNCH_ASSIGN, linear_sum_assignment): the
// cost matrix is copied into pinned host memory, the shared solver
// (ir/hungarian.c, the CPU code's own) runs as a host function, and the
// column of each row is copied back, all three queued on the context's
// stream.  Stream capture records them as a copy node, a host node and a
// copy node, so a task with host steps replays as one graph
// (ARCHITECTURE.md: host work inside a program becomes host and copy
// nodes).  The host function calls no CUDA (the driver forbids it there):
// it writes a failure (NaN or -inf costs, no finite assignment: the CPU
// code's codes 1 and 2) into the context, which the next wait reports
// (rtcu_sync, rtcu_dtoh), and the output then holds -1 in every row.
// The pinned block (the step, then cost, columns and the solver's
// scratch) is taken at the step's first run, which is never captured (a
// task's first run is eager), and freed with the task.

struct HostStep {
	RtCuda *c;
	const char *task;
	int64_t rows, cols;
	double *cost;
	int64_t *col;
	void *work;
};

static void
host_assign(void *data)
{
	HostStep *h = data;
	int r = ir_assignment(h->cost, h->rows, h->cols, h->col, h->work);
	if (r == 1)
		return;
	for (int64_t i = 0; i < h->rows; i++)
		h->col[i] = -1;
	if (!h->c->hostfail[0])
		snprintf(h->c->hostfail, sizeof h->c->hostfail,
		         "task '%s' failed (code %d): linear_sum_assignment: %s", h->task, 1 - r,
		         r == 0 ? "the cost matrix holds NaN or -inf"
		                : "no finite assignment exists (+inf costs)");
}

static int
host_step(RtCuda *c, RtCuTask *k, Kern *kk, char *err, size_t errlen)
{
	const ArtKernel *a = kk->k;
	int64_t rows = (int64_t)a->points, cols = (int64_t)a->grid;
	if (!kk->host) {
		size_t hs = (sizeof(HostStep) + 63) / 64 * 64, cb = (size_t)(rows * cols) * 8,
		       ob = (size_t)rows * 8, wb = ir_assignment_work(rows, cols);
		void *p = NULL;
		CHECK_CU(c, cuMemAllocHost(&p, hs + cb + ob + wb));
		HostStep *h = p;
		*h = (HostStep){c, k->t->name, rows, cols, (double *)((char *)p + hs),
		                (int64_t *)((char *)p + hs + cb), (char *)p + hs + cb + ob};
		kk->host = h;
	}
	HostStep *h = kk->host;
	CHECK_CU(c, cuMemcpyDtoHAsync(h->cost, kk->val[1], (size_t)(rows * cols) * 8, c->stream));
	CHECK_CU(c, cuLaunchHostFunc(c->stream, host_assign, h));
	CHECK_CU(c, cuMemcpyHtoDAsync(kk->val[0], h->col, (size_t)rows * 8, c->stream));
	return 1;
}

// A failure a host step wrote since the last wait, as this wait's error.
static int
host_failed(RtCuda *c, char *err, size_t errlen)
{
	if (!c->hostfail[0])
		return 0;
	snprintf(err, errlen, "%s", c->hostfail);
	c->hostfail[0] = 0;
	return 1;
}

// Launch record i of k on the stream: a kernel, a GEMM or a host step.
static int
launch_one(RtCuda *c, RtCuTask *k, uint32_t i, char *err, size_t errlen)
{
	Kern *kk = &k->k[i];
	if (kk->k->kind == ART_LAUNCH_GEMM)
		return gemm_step(c, kk, err, errlen);
	if (kk->k->kind == ART_LAUNCH_ASSIGN)
		return host_step(c, k, kk, err, errlen);
	if (kk->k->kind != ART_LAUNCH_KERNEL || !kk->grid)
		return 1; // a choice record, or no points (a zero-size output)
	CHECK_CU(c, cuLaunchKernel(kk->fn, kk->grid, 1, 1, 256, 1, 1, 0, c->stream, kk->param,
	                           NULL));
	return 1;
}

// ---------------------------------------------------------------- choices

enum { CHOICE_SAMPLES = 7, CHOICE_BATCH = 4 };

static int
cmp_float(const void *a, const void *b)
{
	float x = *(const float *)a, y = *(const float *)b;
	return (x > y) - (x < y);
}

// Times the candidates of choice ch (its inputs are ready on the stream)
// as they will run: inside CUDA graphs.  Each candidate's CHOICE_BATCH
// launches are captured into a graph of their own (a cuBLAS call's host
// work, several microseconds, stays out of a replay, as in the task's own
// graphs; timing eager launches back to back measured that host work,
// not the GPU's); then a warm-up replay of each, and CHOICE_SAMPLES
// replays per candidate, interleaved, each between two events; the
// candidate of the lowest median time per launch (the first of equals)
// into *best, the medians in us[] (microseconds).  A candidate writes
// only the choice's output, which none of them reads, so running them
// again and again changes nothing.
static int
choice_time(RtCuda *c, RtCuTask *k, const struct Choice *ch, int *best, double *us, char *err,
            size_t errlen)
{
	CUevent ev[2] = {NULL, NULL};
	CUgraphExec ex[ART_MAX_CHOICE] = {NULL};
	float t[ART_MAX_CHOICE][CHOICE_SAMPLES];
	int ok = 0;
	for (uint32_t j = 0; j < ch->n; j++) {
		CUgraph g = NULL;
		CHECK_CU_GOTO(c, cuStreamBeginCapture(c->stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL),
		              done);
		int launched = 1;
		char e2[512];
		for (int b = 0; b < CHOICE_BATCH && launched; b++)
			launched = launch_one(c, k, ch->at + 1 + j, e2, sizeof e2);
		CUresult r = c->d.cuStreamEndCapture(c->stream, &g);
		if (!launched) {
			if (g)
				c->d.cuGraphDestroy(g);
			snprintf(err, errlen, "%s", e2);
			goto done;
		}
		if (r) {
			cu_msg(c, r, "cuStreamEndCapture(c->stream, &g)", __func__, __FILE__, __LINE__, err,
			       errlen);
			goto done;
		}
		r = c->d.cuGraphInstantiate(&ex[j], g, 0);
		c->d.cuGraphDestroy(g);
		if (r) {
			ex[j] = NULL;
			cu_msg(c, r, "cuGraphInstantiate(&ex[j], g, 0)", __func__, __FILE__, __LINE__, err,
			       errlen);
			goto done;
		}
		CHECK_CU_GOTO(c, cuGraphLaunch(ex[j], c->stream), done); // warm-up
	}
	CHECK_CU_GOTO(c, cuEventCreate(&ev[0], 0), done); // CU_EVENT_DEFAULT: timing enabled
	CHECK_CU_GOTO(c, cuEventCreate(&ev[1], 0), done);
	CHECK_CU_GOTO(c, cuStreamSynchronize(c->stream), done);
	for (int s = 0; s < CHOICE_SAMPLES; s++)
		for (uint32_t j = 0; j < ch->n; j++) {
			CHECK_CU_GOTO(c, cuEventRecord(ev[0], c->stream), done);
			CHECK_CU_GOTO(c, cuGraphLaunch(ex[j], c->stream), done);
			CHECK_CU_GOTO(c, cuEventRecord(ev[1], c->stream), done);
			CHECK_CU_GOTO(c, cuEventSynchronize(ev[1]), done);
			float ms = 0;
			CHECK_CU_GOTO(c, cuEventElapsedTime(&ms, ev[0], ev[1]), done);
			t[j][s] = ms / CHOICE_BATCH;
		}
	*best = 0;
	for (uint32_t j = 0; j < ch->n; j++) {
		qsort(t[j], CHOICE_SAMPLES, sizeof t[j][0], cmp_float);
		us[j] = 1e3 * t[j][CHOICE_SAMPLES / 2];
		if (us[j] < us[*best])
			*best = (int)j;
	}
	ok = 1;
done:
	for (int i = 0; i < 2; i++)
		if (ev[i])
			c->d.cuEventDestroy(ev[i]);
	for (uint32_t j = 0; j < ch->n; j++)
		if (ex[j])
			c->d.cuGraphExecDestroy(ex[j]);
	return ok;
}

// Decides choice ci of k (forced, cached or timed: see the top of this
// file) and runs the chosen candidate.
static int
choice_decide(RtCuda *c, RtCuTask *k, uint32_t ci, char *err, size_t errlen)
{
	struct Choice *ch = &k->choice[ci];
	const char *how = "forced";
	double us[ART_MAX_CHOICE] = {0};
	RtChoiceKey key = {k->artifact, c->gpu_key, k->index, ci};
	int cached = c->choice_forced < 0 && c->cache[0] ? rt_choice_lookup(c->cache, &key) : -1;
	if (c->choice_forced >= 0) // a candidate it does not have: its last
		ch->pick = c->choice_forced < (int)ch->n ? c->choice_forced : (int)ch->n - 1;
	else if (cached >= 0 && cached < (int)ch->n) {
		ch->pick = cached;
		how = "cached";
		c->st.choices_cached++;
	} else {
		int best = 0;
		if (!choice_time(c, k, ch, &best, us, err, errlen))
			return 0;
		ch->pick = best;
		how = "timed";
		c->st.choices_timed++;
		if (c->cache[0])
			rt_choice_store(c->cache, &key, best); // no cache is no error
	}
	const char *log = getenv("FADC_CUDA_CHOICE_LOG");
	if (log && *log && strcmp(log, "0")) {
		fprintf(stderr, "fadc: task '%s' choice %u (%s):", k->t->name, ci, how);
		for (uint32_t j = 0; j < ch->n; j++) {
			fprintf(stderr, " %s%s", (int)j == ch->pick ? "*" : "",
			        k->t->kern[ch->at + 1 + j].name);
			if (us[j] > 0)
				fprintf(stderr, " %.2f us", us[j]);
		}
		fprintf(stderr, "\n");
	}
	return launch_one(c, k, ch->at + 1 + (uint32_t)ch->pick, err, errlen);
}

// The task's launches, in order; of each choice only its chosen candidate.
// decide: a choice not decided yet is decided here (an eager run);
// otherwise (a capture, which cannot time) it runs its first candidate
// from then on (only after a first run that failed before deciding it).
static int
launch_all(RtCuda *c, RtCuTask *k, int decide, char *err, size_t errlen)
{
	// FADC_CUDA_PROFILE: an event before each record launched (never under
	// capture: profiling turns graphs off); the first run, which loads
	// modules and decides the choices, is not counted.
	int prof = c->prof && k->nk && k->runs > 1;
	uint32_t np = 0;
	if (prof && !k->pev) {
		k->pev = calloc(k->nk + 1, sizeof *k->pev);
		k->pms = calloc(k->nk + 1, sizeof *k->pms);
		k->porder = calloc(k->nk + 1, sizeof *k->porder);
		if (!k->pev || !k->pms || !k->porder) {
			snprintf(err, errlen, "out of memory");
			return 0;
		}
		for (uint32_t i = 0; i <= k->nk; i++)
			CHECK_CU(c, cuEventCreate(&k->pev[i], 0));
	}
	for (uint32_t i = 0, ci = 0; i < k->nk; i++) {
		if (prof) {
			CHECK_CU(c, cuEventRecord(k->pev[np], c->stream));
			k->porder[np++] = i;
		}
		if (k->k[i].k->kind != ART_LAUNCH_CHOICE) {
			if (!launch_one(c, k, i, err, errlen))
				return 0;
			continue;
		}
		struct Choice *ch = &k->choice[ci];
		if (ch->pick < 0 && decide) {
			if (!choice_decide(c, k, ci, err, errlen))
				return 0;
		} else {
			if (ch->pick < 0)
				ch->pick = 0;
			if (!launch_one(c, k, ch->at + 1 + (uint32_t)ch->pick, err, errlen))
				return 0;
		}
		if (prof) // the time is the chosen candidate's
			k->porder[np - 1] = ch->at + 1 + (uint32_t)ch->pick;
		i += ch->n;
		ci++;
	}
	if (prof) {
		CHECK_CU(c, cuEventRecord(k->pev[np], c->stream));
		CHECK_CU(c, cuEventSynchronize(k->pev[np]));
		for (uint32_t j = 0; j < np; j++) {
			float ms = 0;
			CHECK_CU(c, cuEventElapsedTime(&ms, k->pev[j], k->pev[j + 1]));
			k->pms[k->porder[j]] += ms;
		}
		k->pruns++;
	}
	return 1;
}

// Captures the task's launches into a graph; *g on success.
static int
capture(RtCuda *c, RtCuTask *k, CUgraph *g, char *err, size_t errlen)
{
	*g = NULL;
	CHECK_CU(c, cuStreamBeginCapture(c->stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
	char e2[512];
	int ok = launch_all(c, k, 0, e2, sizeof e2);
	CUresult r = c->d.cuStreamEndCapture(c->stream, g);
	if (!ok) {
		if (*g)
			c->d.cuGraphDestroy(*g);
		*g = NULL;
		snprintf(err, errlen, "%s", e2);
		return 0;
	}
	if (r) {
		cu_msg(c, r, "cuStreamEndCapture(c->stream, g)", __func__, __FILE__, __LINE__, err, errlen);
		return 0;
	}
	return 1;
}

// The argument values of this run into every kernel's val[] and, flattened,
// k->cur (the key); k->smask marks the slots of the caller's inputs that
// have a staging buffer.  stage: those read the staging buffers.  Returns
// the number of such slots.
static size_t
task_args(RtCuTask *k, const uint64_t *in, const uint8_t *staged, const uint64_t *out,
          uint64_t arena, uint64_t runseed, int stage)
{
	size_t q = 0, nstaged = 0;
	for (uint32_t i = 0; i < k->nk; i++) {
		Kern *kk = &k->k[i];
		const ArtKernel *a = kk->k;
		for (uint32_t j = 0; j < a->narg; j++) {
			const ArtKArg *x = &a->arg[j];
			uint32_t n = x->index;
			int st = x->kind == ART_ARG_INPUT && staged[n] && k->stage_at[n];
			kk->val[j] = st && stage ? k->stage_at[n]
			             : x->kind == ART_ARG_INPUT  ? in[n]
			             : x->kind == ART_ARG_OUTPUT ? out[n]
			                                         : arena + x->offset;
			k->smask[q + j] = (uint8_t)st;
			nstaged += st;
		}
		k->smask[q + a->narg] = 0;
		kk->val[a->narg] = runseed; // read only by kernels that take it
		memcpy(k->cur + q, kk->val, (a->narg + 1) * sizeof *kk->val);
		q += a->narg + 1;
	}
	return nstaged;
}

// The child of the current node for task k whose key is k->cur, or NULL.
static Node *
child_find(RtCuda *c, RtCuTask *k)
{
	for (Node *n = c->cur->child; n; n = n->next)
		if (n->task == k && !memcmp(n->key, k->cur, k->nkey * sizeof *k->cur))
			return n;
	return NULL;
}

// The caller's inputs into the task's own buffers, in stream order before
// the graph.
static int
stage_inputs(RtCuda *c, RtCuTask *k, const uint64_t *in, const uint8_t *staged, char *err,
             size_t errlen)
{
	for (uint32_t i = 0; i < k->t->nin; i++)
		if (staged[i] && k->stage_at[i] && in[i] != k->stage_at[i])
			CHECK_CU(c, cuMemcpyDtoDAsync(k->stage_at[i], in[i], k->stage_bytes[i], c->stream));
	return 1;
}

int
rtcu_task_run(RtCuda *c, RtCuTask *k, const uint64_t *in, const uint8_t *staged,
              const uint64_t *out, uint64_t arena, uint64_t runseed, char *err, size_t errlen)
{
	CHECK_CU(c, cuCtxSetCurrent(c->ctx));
	uint64_t run = ++k->runs;
	int graph = run > 1 && !c->no_graphs && !c->prof && !k->eager_only && k->nk;
	size_t nstaged = task_args(k, in, staged, out, arena, runseed, 0);
	if (!graph) {
		if (run == 1)
			c->st.eager++;
		else
			c->st.skipped++;
		c->cur = &c->root; // the path is broken: the next call starts at the root
		return launch_all(c, k, 1, err, errlen);
	}
	// A child of the current node for this task in this state: replay it,
	// reading the caller's inputs in place, or else from the staging
	// buffers (a graph recorded for inputs that move).
	Node *n = child_find(c, k);
	if (!n && nstaged) {
		task_args(k, in, staged, out, arena, runseed, 1);
		if ((n = child_find(c, k)) && !stage_inputs(c, k, in, staged, err, errlen))
			return 0;
		if (!n)
			task_args(k, in, staged, out, arena, runseed, 0);
	}
	if (n) {
		CHECK_CU(c, cuGraphLaunch(n->exec, c->stream));
		n->replays++;
		c->st.replayed++;
		c->cur = n;
		return 1;
	}
	// Another state where the tree has one for this task: a re-record, up
	// to the limit.  Where two recordings here differ from this call only
	// in the addresses of the caller's inputs, those move: this one copies
	// them into the staging buffers, and serves any address from now on.
	int again = 0, moved = 0;
	for (Node *s = c->cur->child; s; s = s->next) {
		if (s->task != k)
			continue;
		again = 1;
		size_t q = 0;
		while (q < k->nkey && (k->smask[q] || s->key[q] == k->cur[q]))
			q++;
		moved += q == k->nkey && !s->staged;
	}
	if (again && k->rerecords >= c->rerecord_limit) {
		fprintf(stderr,
		        "fadc: warning: task '%s' was re-recorded %llu times (its tensors keep "
		        "moving); it runs without CUDA graphs from now on\n",
		        k->t->name, (unsigned long long)k->rerecords);
		k->eager_only = 1;
		c->st.skipped++;
		c->cur = &c->root;
		return launch_all(c, k, 1, err, errlen);
	}
	int stage = moved >= 2;
	if (stage) {
		task_args(k, in, staged, out, arena, runseed, 1);
		if (!stage_inputs(c, k, in, staged, err, errlen))
			return 0;
	}
	n = calloc(1, sizeof *n);
	if (!n || !(n->key = malloc((k->nkey + 1) * sizeof *n->key))) {
		free(n);
		snprintf(err, errlen, "out of memory");
		return 0;
	}
	memcpy(n->key, k->cur, k->nkey * sizeof *k->cur);
	n->task = k;
	n->staged = stage;
	CUgraph g;
	if (!capture(c, k, &g, err, errlen)) {
		node_free(c, n);
		return 0;
	}
	CUresult r = c->d.cuGraphInstantiate(&n->exec, g, 0);
	c->d.cuGraphDestroy(g);
	if (r) {
		cu_msg(c, r, "cuGraphInstantiate(&n->exec, g, 0)", __func__, __FILE__, __LINE__, err,
		       errlen);
		n->exec = NULL;
		node_free(c, n);
		return 0;
	}
	// Linked last among its siblings: recording order.
	n->parent = c->cur;
	Node **p = &c->cur->child;
	while (*p)
		p = &(*p)->next;
	*p = n;
	if (again) {
		c->st.rerecorded++;
		k->rerecords++;
	} else
		c->st.recorded++;
	c->cur = n;
	CHECK_CU(c, cuGraphLaunch(n->exec, c->stream));
	return 1;
}
