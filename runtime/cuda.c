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
// Memory: one pool per fadc context.  It takes chunks from cuMemAlloc (at
// least 64 MiB, or the request) and hands out 256-byte-aligned blocks by
// first fit, merging free neighbours when a block is freed; chunks are
// returned to the driver only at rtcu_close.  Task arenas, declarations,
// outputs and runtime-owned tensors are blocks of it, so after the first
// run of a task nothing is allocated on the run path.
//
// Launches: a kernel of the artifact is a grid-stride loop over its output
// points (codegen/cuda.c), so any grid is correct; the grid covers the
// points with 256-thread blocks, capped at 2^20 blocks.
//
// CUDA graphs: a task's first run launches its kernels eagerly (the module
// is loaded and the kernels resolved outside any capture); the second is
// captured (cuStreamBeginCapture in thread-local mode, the same launches,
// cuStreamEndCapture), instantiated and launched; later runs launch the
// executable graph.  A kernel node holds its argument values, so a graph
// is valid for the device addresses and run seed it was recorded with.  A
// task keeps up to GRAPH_CACHE recordings, one per set of addresses seen
// (the caller alternating between a few tensors replays each); a run with
// addresses none of them has records a new one while there is room, and
// otherwise re-records the least recently used one, updating its
// executable graph in place with cuGraphExecUpdate when the driver accepts
// it and instantiating a new one otherwise.  Past RERECORD_LIMIT
// re-records a task runs eagerly, with one warning.
// FADC_DISABLE_CUDA_GRAPHS=1 (read at rtcu_open) runs everything eagerly.
#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir.h" // ir_assignment (ir/hungarian.c, through fadc_support): host steps
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
typedef struct CUgraphNode_st *CUgraphNode;
typedef struct {
	int result; // CUgraphExecUpdateResult
	CUgraphNode errorNode, errorFromNode;
} CUgraphExecUpdateResultInfo;

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
	X(cuGraphExecUpdate, "cuGraphExecUpdate_v2",                                           \
	  (CUgraphExec e, CUgraph g, CUgraphExecUpdateResultInfo * info))                      \
	X(cuGraphLaunch, "cuGraphLaunch", (CUgraphExec e, CUstream s))                         \
	X(cuGraphExecDestroy, "cuGraphExecDestroy", (CUgraphExec e))                           \
	X(cuGraphDestroy, "cuGraphDestroy", (CUgraph g))                                       \
	X(cuMemAllocHost, "cuMemAllocHost_v2", (void **p, size_t n))                           \
	X(cuMemFreeHost, "cuMemFreeHost", (void *p))                                           \
	X(cuLaunchHostFunc, "cuLaunchHostFunc", (CUstream s, void (*fn)(void *), void *data))

typedef struct Driver {
	void *dl;
#define X(name, sym, args) CUresult(*name) args;
	CU_FUNCS(X)
#undef X
} Driver;

// ---------------------------------------------------------------- state

typedef struct Block {
	uint64_t addr, size;
	int free;
	struct Block *prev, *next; // address order within its chunk
} Block;

typedef struct Chunk {
	CUdeviceptr base;
	uint64_t size;
	Block *first;
	struct Chunk *next;
} Chunk;

struct RtCuda {
	Driver d;
	CUdevice dev;
	CUcontext ctx;
	CUstream stream;
	char name[256];
	int no_graphs; // FADC_DISABLE_CUDA_GRAPHS=1
	char hostfail[512]; // a host step's failure, reported at the next wait (host_step)
	Chunk *chunks;
	RtCuStats st;
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

enum { GRAPH_CACHE = 4, RERECORD_LIMIT = 64 };

typedef struct Rec {
	CUgraphExec exec;
	uint64_t *key; // the argument values it was recorded with (nkey)
	uint64_t used; // the task's run count when last launched (LRU)
} Rec;

struct RtCuTask {
	const ArtTask *t;
	CUmodule mod;
	Kern *k;
	uint32_t nk;
	uint64_t runs; // 0: the next run is eager (the first)
	Rec rec[GRAPH_CACHE];
	int nrec;
	uint64_t *cur; // this run's argument values, flattened (nkey)
	size_t nkey;
	uint64_t rerecords;
	int eager_only; // past the re-record limit
};

static int host_failed(RtCuda *c, char *err, size_t errlen);

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
	CHECK_CU_GOTO(c, cuDevicePrimaryCtxRetain(&c->ctx, c->dev), fail);
	CHECK_CU_GOTO(c, cuCtxSetCurrent(c->ctx), fail_ctx);
	CHECK_CU_GOTO(c, cuStreamCreate(&c->stream, CU_STREAM_NON_BLOCKING), fail_ctx);
	const char *ng = getenv("FADC_DISABLE_CUDA_GRAPHS");
	c->no_graphs = ng && *ng && strcmp(ng, "0");
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
	for (Chunk *k = c->chunks, *next; k; k = next) {
		next = k->next;
		for (Block *b = k->first, *bn; b; b = bn) {
			bn = b->next;
			free(b);
		}
		c->d.cuMemFree(k->base);
		free(k);
	}
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

enum { POOL_ALIGN = 256 };
#define POOL_CHUNK ((uint64_t)64 << 20)

int
rtcu_alloc(RtCuda *c, size_t bytes, uint64_t *addr, char *err, size_t errlen)
{
	*addr = 0;
	if (!bytes)
		return 1;
	uint64_t need = ((uint64_t)bytes + POOL_ALIGN - 1) / POOL_ALIGN * POOL_ALIGN;
	for (int pass = 0; pass < 2; pass++) {
		for (Chunk *k = c->chunks; k; k = k->next)
			for (Block *b = k->first; b; b = b->next) {
				if (!b->free || b->size < need)
					continue;
				if (b->size > need) { // split: the rest stays free after it
					Block *r = calloc(1, sizeof *r);
					if (!r) {
						snprintf(err, errlen, "out of memory");
						return 0;
					}
					r->addr = b->addr + need;
					r->size = b->size - need;
					r->free = 1;
					r->prev = b;
					r->next = b->next;
					if (b->next)
						b->next->prev = r;
					b->next = r;
					b->size = need;
				}
				b->free = 0;
				c->st.live_blocks++;
				c->st.live_bytes += b->size;
				*addr = b->addr;
				return 1;
			}
		if (pass)
			break;
		// No block fits: a new chunk.
		Chunk *k = calloc(1, sizeof *k);
		Block *b = calloc(1, sizeof *b);
		if (!k || !b) {
			free(k);
			free(b);
			snprintf(err, errlen, "out of memory");
			return 0;
		}
		k->size = need > POOL_CHUNK ? need : POOL_CHUNK;
		CUresult r = c->d.cuMemAlloc(&k->base, (size_t)k->size);
		if (r) {
			cu_msg(c, r, "cuMemAlloc(&k->base, k->size)", __func__, __FILE__, __LINE__, err,
			       errlen);
			size_t l = strlen(err);
			snprintf(err + l, errlen - l, " (%llu bytes asked)", (unsigned long long)k->size);
			free(k);
			free(b);
			return 0;
		}
		b->addr = k->base;
		b->size = k->size;
		b->free = 1;
		k->first = b;
		k->next = c->chunks;
		c->chunks = k;
		c->st.reserved_bytes += k->size;
	}
	snprintf(err, errlen, "device pool: no block of %llu bytes", (unsigned long long)need);
	return 0;
}

void
rtcu_free(RtCuda *c, uint64_t addr)
{
	if (!c || !addr)
		return;
	for (Chunk *k = c->chunks; k; k = k->next) {
		if (addr < k->base || addr >= k->base + k->size)
			continue;
		for (Block *b = k->first; b; b = b->next) {
			if (b->addr != addr || b->free)
				continue;
			b->free = 1;
			c->st.live_blocks--;
			c->st.live_bytes -= b->size;
			// Merge with free neighbours.
			if (b->next && b->next->free) {
				Block *n = b->next;
				b->size += n->size;
				b->next = n->next;
				if (n->next)
					n->next->prev = b;
				free(n);
			}
			if (b->prev && b->prev->free) {
				Block *p = b->prev;
				p->size += b->size;
				p->next = b->next;
				if (b->next)
					b->next->prev = p;
				free(b);
			}
			return;
		}
	}
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

void
rtcu_stats(const RtCuda *c, RtCuStats *s)
{
	*s = c->st;
}

// ---------------------------------------------------------------- tasks

void
rtcu_task_free(RtCuda *c, RtCuTask *k)
{
	if (!k)
		return;
	for (int i = 0; i < GRAPH_CACHE; i++) {
		if (k->rec[i].exec)
			c->d.cuGraphExecDestroy(k->rec[i].exec);
		free(k->rec[i].key);
	}
	if (k->mod)
		c->d.cuModuleUnload(k->mod);
	for (uint32_t i = 0; k->k && i < k->nk; i++) {
		if (k->k[i].host)
			c->d.cuMemFreeHost(k->k[i].host);
		free(k->k[i].val);
		free(k->k[i].param);
	}
	free(k->k);
	free(k->cur);
	free(k);
}

int
rtcu_task_load(RtCuda *c, const ArtTask *t, const uint8_t *images, RtCuTask **out, char *err,
               size_t errlen)
{
	*out = NULL;
	RtCuTask *k = calloc(1, sizeof *k);
	if (!k || !(k->k = calloc(t->ncuda + 1, sizeof *k->k))) {
		free(k);
		snprintf(err, errlen, "out of memory");
		return 0;
	}
	k->t = t;
	k->nk = t->ncuda;
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
	k->cur = calloc(nkey + 1, sizeof *k->cur);
	for (int i = 0; i < GRAPH_CACHE && k->cur; i++)
		if (!(k->rec[i].key = calloc(nkey + 1, sizeof *k->rec[i].key))) {
			free(k->cur);
			k->cur = NULL;
		}
	if (!k->cur) {
		for (int i = 0; i < GRAPH_CACHE; i++) {
			free(k->rec[i].key);
			k->rec[i].key = NULL;
		}
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	k->nkey = nkey;
	*out = k;
	return 1;
fail:
	rtcu_task_free(c, k);
	return 0;
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

static int
launch_all(RtCuda *c, RtCuTask *k, char *err, size_t errlen)
{
	for (uint32_t i = 0; i < k->nk; i++) {
		Kern *kk = &k->k[i];
		if (kk->k->kind != ART_LAUNCH_KERNEL) {
			if (!host_step(c, k, kk, err, errlen))
				return 0;
			continue;
		}
		if (!kk->grid)
			continue; // no points (a zero-size output)
		CHECK_CU(c, cuLaunchKernel(kk->fn, kk->grid, 1, 1, 256, 1, 1, 0, c->stream,
		                           kk->param, NULL));
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
	int ok = launch_all(c, k, e2, sizeof e2);
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

int
rtcu_task_run(RtCuda *c, RtCuTask *k, const uint64_t *in, const uint64_t *out, uint64_t arena,
              uint64_t runseed, char *err, size_t errlen)
{
	CHECK_CU(c, cuCtxSetCurrent(c->ctx));
	// The argument values of this run.
	size_t q = 0;
	for (uint32_t i = 0; i < k->nk; i++) {
		Kern *kk = &k->k[i];
		const ArtKernel *a = kk->k;
		for (uint32_t j = 0; j < a->narg; j++) {
			const ArtKArg *x = &a->arg[j];
			kk->val[j] = x->kind == ART_ARG_INPUT    ? in[x->index]
			             : x->kind == ART_ARG_OUTPUT ? out[x->index]
			                                         : arena + x->offset;
		}
		kk->val[a->narg] = runseed; // read only by kernels that take it
		memcpy(k->cur + q, kk->val, (a->narg + 1) * sizeof *kk->val);
		q += a->narg + 1;
	}
	uint64_t run = ++k->runs;
	if (run == 1 || c->no_graphs || k->eager_only || !k->nk) {
		if (run == 1)
			c->st.eager++;
		else
			c->st.skipped++;
		return launch_all(c, k, err, errlen);
	}
	// A recording of these very arguments: replay it.
	for (int i = 0; i < k->nrec; i++)
		if (k->rec[i].exec && !memcmp(k->rec[i].key, k->cur, k->nkey * sizeof *k->cur)) {
			CHECK_CU(c, cuGraphLaunch(k->rec[i].exec, c->stream));
			k->rec[i].used = run;
			c->st.replayed++;
			return 1;
		}
	// A new recording while there is room, else the least recently used
	// one re-recorded.
	int slot = k->nrec, again = slot == GRAPH_CACHE;
	if (again) {
		if (k->rerecords >= RERECORD_LIMIT) {
			fprintf(stderr,
			        "fadc: warning: task '%s' was re-recorded %d times (its tensors keep "
			        "moving); it runs without CUDA graphs from now on\n",
			        k->t->name, RERECORD_LIMIT);
			k->eager_only = 1;
			c->st.skipped++;
			return launch_all(c, k, err, errlen);
		}
		slot = 0;
		for (int i = 1; i < GRAPH_CACHE; i++)
			if (k->rec[i].used < k->rec[slot].used)
				slot = i;
	}
	Rec *r = &k->rec[slot];
	CUgraph g;
	if (!capture(c, k, &g, err, errlen))
		return 0;
	int ok = 0;
	if (r->exec) {
		CUgraphExecUpdateResultInfo info;
		if (c->d.cuGraphExecUpdate(r->exec, g, &info)) {
			c->d.cuGraphExecDestroy(r->exec);
			r->exec = NULL;
		}
	}
	if (!r->exec)
		CHECK_CU_GOTO(c, cuGraphInstantiate(&r->exec, g, 0), done);
	if (again) {
		c->st.rerecorded++;
		k->rerecords++;
	} else {
		c->st.recorded++;
		k->nrec++;
	}
	memcpy(r->key, k->cur, k->nkey * sizeof *k->cur);
	r->used = run;
	CHECK_CU_GOTO(c, cuGraphLaunch(r->exec, c->stream), done);
	ok = 1;
done:
	c->d.cuGraphDestroy(g);
	return ok;
}
