// runtime/cuda_impl.h -- what the CUDA runtime's files share: the driver
// API as loaded by runtime/cuda.c, a context's and a task's state, the
// checked call (CHECK_CU), and the functions one file calls in another.
// Private to runtime/cuda.c (driver, tasks, launches, choices),
// runtime/cugraph.c (the graph tree) and runtime/cublas.c (cuBLAS);
// runtime/rt.c sees only runtime/rtcuda.h.  Like them it needs no CUDA
// header.
#ifndef FADC_CUDA_IMPL_H
#define FADC_CUDA_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "choice.h"
#include "cumem.h"
#include "rtcuda.h"

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
	CU_EVENT_DISABLE_TIMING = 2,
	CU_STREAM_CAPTURE_MODE_THREAD_LOCAL = 1,
	CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16,
	CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8, // a CUfunction_attribute
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
	X(cuStreamQuery, "cuStreamQuery", (CUstream s))                                        \
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
	X(cuModuleGetGlobal, "cuModuleGetGlobal_v2", (CUdeviceptr * p, size_t * n, CUmodule m, \
	                                              const char *name))                       \
	X(cuFuncSetAttribute, "cuFuncSetAttribute", (CUfunction f, int attr, int v))           \
	X(cuOccupancyMaxActiveBlocksPerMultiprocessor,                                         \
	  "cuOccupancyMaxActiveBlocksPerMultiprocessor",                                       \
	  (int *n, CUfunction f, int block, size_t dsmem))                                     \
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
	X(cuEventElapsedTime, "cuEventElapsedTime", (float *ms, CUevent a, CUevent b))       \
	X(cuStreamWaitEvent, "cuStreamWaitEvent", (CUstream s, CUevent e, unsigned flags))

typedef struct Driver {
	void *dl;
#define X(name, sym, args) CUresult(*name) args;
	CU_FUNCS(X)
#undef X
} Driver;

// ---------------------------------------------------------------- state

// One recording of the graph tree (runtime/cugraph.c): a child of the call
// before it.
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
	CUevent order_ev; // rtcu_order_stream's (runtime/interop.c), created at its first use
	// Choices: FADC_CUDA_CHOICE (-1: time or use the cache, else the
	// candidate to run), the GPU's part of the cache key, the cache file
	// ("" without one).
	int choice_forced;
	char gpu_key[RT_CHOICE_GPU_MAX];
	char cache[4096];
	struct Blas *blas; // cuBLAS (runtime/cublas.c), loaded by the first task with GEMMs
	// cuDNN (runtime/cudnn.c), loaded by the first task with convolution
	// records; NULL before, and why it is no candidate when it is not.
	struct Dnn *dnn;
	char dnn_why[600];
	int prof; // FADC_CUDA_PROFILE=1: eager runs, each launch timed (prof_report)
};

typedef struct HostStep HostStep;

typedef struct Kern {
	CUfunction fn; // NULL for a host step
	HostStep *host; // a host step's pinned buffers (host_step), NULL before its first run
	const ArtKernel *k;
	unsigned grid;
	// A persistent kernel's dynamic shared memory (its resident tiles,
	// codegen/cuda.c print_tile; 0: none), its grid then cut to the blocks
	// that fit on the GPU at once with it (persist_smem).
	unsigned dsmem;
	uint64_t *val; // argument values (narg, then the run seed)
	void **param; // param[i] = &val[i], as cuLaunchKernel takes them
	struct DnnPlan *dnn; // a convolution record's cuDNN plan; NULL: no candidate
	// A convolution record's scratch, the bytes cuDNN may use as its
	// workspace: scr_bytes (0: none) at arena offset scr_off, the arena's
	// address this run being argument scr_arg of record scr_kern less its
	// offset.  runtime/cuda.c, conv_scratch.
	uint32_t scr_kern, scr_arg;
	uint64_t scr_off, scr_bytes;
	// A strict f32 GEMM record's run (runtime/cublas.c, rtcu_blas_gemm):
	// 0 not decided yet (its first run, eager, decides), 1 cuBLAS, 2 + s
	// the 3xTF32 kernel of tile s (codegen/cuda_mma.c), mma[s].
	int mma_pick;
	CUfunction mma[2];
} Kern;

enum { RERECORD_LIMIT = 64 };

struct RtCuTask {
	const ArtTask *t;
	CUmodule *mod; // t->nmodule, each NULL until loaded
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
	uint64_t dnn_ws; // cuDNN's workspace for its convolution records (a pool block), or 0
	// FADC_CUDA_PROFILE: an event before each launch and after the last,
	// and each launch's milliseconds summed over pruns runs (porder: the
	// records launched, in order).
	CUevent *pev;
	double *pms;
	uint32_t *porder;
	uint64_t pruns;
	// Its choices: the choice record's index (its candidates follow it),
	// their number, the one that runs (-1 until the first run decides),
	// the records after it that belong to it, and each candidate's records
	// (first, count: a sequence's members, else the one record).
	struct Choice {
		uint32_t at, n;
		int pick;
		uint32_t span;
		uint32_t first[ART_MAX_CHOICE], count[ART_MAX_CHOICE];
	} *choice;
	uint32_t nchoice;
	uint64_t artifact; // the artifact's descriptor hash: the cache's key
	uint32_t index; // the task's index in the descriptor
	// Index checks (t->ncheck > 0, passes/checks.c): the check outputs'
	// device block (16 bytes each: min, max), the pinned host copy the
	// task's launches end with (captured into its graphs), and the event
	// recorded after each run, which the runtime waits for before it reads
	// the copy.
	uint64_t chk_dev;
	int64_t *chk_host;
	CUevent chk_ev;
};

// ---------------------------------------------------------------- errors

// The driver's name and text for r, with the call's text and where it
// failed, into err (runtime/cuda.c).
void rtcu_msg(const RtCuda *c, CUresult r, const char *what, const char *fn, const char *file,
              int line, char *err, size_t errlen);

// The one checked path for driver calls: on failure, the message and
// `return 0` (or `goto` a label with CHECK_CU_GOTO).
#define CHECK_CU(c, x)                                                                     \
	do {                                                                                   \
		CUresult cu_r_ = (c)->d.x;                                                         \
		if (cu_r_) {                                                                       \
			rtcu_msg((c), cu_r_, #x, __func__, __FILE__, __LINE__, err, errlen);             \
			return 0;                                                                      \
		}                                                                                  \
	} while (0)
#define CHECK_CU_GOTO(c, x, label)                                                         \
	do {                                                                                   \
		CUresult cu_r_ = (c)->d.x;                                                         \
		if (cu_r_) {                                                                       \
			rtcu_msg((c), cu_r_, #x, __func__, __FILE__, __LINE__, err, errlen);             \
			goto label;                                                                    \
		}                                                                                  \
	} while (0)

// ---------------------------------------------------------------- across files

// runtime/cuda.c: the task's launches, in order (choices decided when
// decide; see there).
int rtcu_launch_all(RtCuda *c, RtCuTask *k, int decide, char *err, size_t errlen);
// runtime/cugraph.c: removes from n's subtree every node of task k, with
// its subtree (k NULL: every node); the path goes back to the root.
void rtcu_tree_prune(RtCuda *c, Node *n, const RtCuTask *k);
// runtime/cublas.c: a task with GEMM records is loaded (cuBLAS, the
// handle, the workspace) or freed; one GEMM record of task k launched
// (cuBLAS or, strict f32, the faster on the GPU of cuBLAS and the 3xTF32
// kernels); the context's handle destroyed with it.
int rtcu_blas_acquire(RtCuda *c, char *err, size_t errlen);
void rtcu_blas_release(RtCuda *c);
int rtcu_blas_gemm(RtCuda *c, RtCuTask *k, Kern *kk, char *err, size_t errlen);
void rtcu_blas_close(RtCuda *c);
// runtime/cudnn.c: a task with convolution records is loaded (cuDNN, the
// handle, a plan per record, the task's workspace: a record without a
// plan is no candidate, never an error; 0 only when out of memory) or
// freed; whether a record can run on this run's addresses; one run; the
// context's handle destroyed with it.
int rtcu_dnn_prepare(RtCuda *c, RtCuTask *k, char *err, size_t errlen);
void rtcu_dnn_task_free(RtCuda *c, RtCuTask *k);
int rtcu_dnn_ready(const Kern *kk);
// runtime/cuda.c: the address of record kk's scratch on this run when
// `ws` bytes of workspace fit in it, else 0.
uint64_t rtcu_conv_scratch(const RtCuTask *k, const Kern *kk, uint64_t ws);
int rtcu_dnn_conv(RtCuda *c, RtCuTask *k, Kern *kk, char *err, size_t errlen);
void rtcu_dnn_close(RtCuda *c);

#endif
