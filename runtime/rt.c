// runtime/rt.c -- the fadc.h runtime on the CPU: contexts, tensors, opening
// artifacts, binding declarations, running tasks.
//
// Opening follows the order that keeps a bad file harmless: art_read (plain
// reads: trailer, checksum of the whole file, format version, descriptor),
// then the architecture and the CPU features the code needs, and only then
// dlopen(RTLD_NOW | RTLD_LOCAL) and the one versioned entry symbol, whose
// table must carry the very descriptor bytes that were checked.
//
// Memory: a model owns one buffer per declaration (params and consts),
// allocated at open.  Each task gets, at its first run, its arena (the
// memory plan's size, 64-byte aligned), its pointer arrays and the
// model-owned output tensors it is asked for; later runs allocate nothing.
// Task functions are pure (runtime/abi.h): the runtime hands them pointers
// and they write only their outputs and their arena.
//
// On a CUDA context (runtime/cuda.c) the same holds on the device: the
// declarations live in the context's device pool (a host copy is kept for
// the initializers, which are CPU code in every artifact: computed on the
// host, uploaded once), each task's arena and model-owned outputs are pool
// blocks made at its first run, and a run launches the task's kernels (or
// replays its CUDA graph) on the context's stream with device addresses.
// Runs are asynchronous; fadc_tensor_read and fadc_context_synchronize
// wait for the stream.
//
// Threads: a CPU context of num_threads > 1 owns a pool (runtime/pool.c)
// whose workers start at the first kernel a task splits; task functions
// get it through fadc_call_v1.exec (NULL with one thread: everything on the
// calling thread, as before the pool existed).
#include <dlfcn.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "abi.h"
#include "artifact.h"
#include "fadc.h"
#include "interop.h"
#include "multi.h"
#include "nccl.h"
#include "pool.h"
#include "rtcuda.h"
#include "tensorio.h"

enum { OWN_CALLER_DATA, OWN_RUNTIME, OWN_MODEL };

struct fadc_context {
	fadc_context_options o;
	uint64_t host_features; // rt_cpu_host_features() at creation
	RtCuda *cu; // a CUDA context's device, stream and pool; NULL on the CPU
	int nthreads; // the resolved num_threads (>= 1)
	RtPool *pool; // NULL with one thread
	fadc_exec_v1 exec; // what task functions get: parallel_for on pool
	// On a device: the tasks whose index checks are not read yet (their
	// last run is queued), linked through RtTask.pnext (see "Index checks").
	struct RtTask *pend;
	// What the runtime holds in host memory for this context's tensors,
	// declarations, arenas, outputs and check pairs, and its high-water
	// mark (fadc_context_memory on the CPU; a device context reports its
	// pool instead).  Counted at each allocation and free below
	// (host_hold, host_drop): the sizes are the ones asked for.
	uint64_t host_live, host_peak;
	// A context over several GPUs (runtime/multi.c): this context is GPU
	// devices[0]'s, multi holds the others and the communicators; NULL
	// for every other context.
	RtMulti *multi;
	char err[1024];
};

static void
host_hold(fadc_context *c, uint64_t n)
{
	c->host_live += n;
	if (c->host_live > c->host_peak)
		c->host_peak = c->host_live;
}

static void
host_drop(fadc_context *c, uint64_t n)
{
	c->host_live -= n < c->host_live ? n : c->host_live;
}

static fadc_status pend_settle(fadc_context *ctx, struct RtTask *only);

// The message of the last fadc_context_create that failed on this thread
// (there is no context to hold it): fadc_context_error(NULL).
static _Thread_local char create_err[1024] = "no context";

struct fadc_tensor {
	fadc_context *ctx;
	fadc_device dev;
	fadc_dtype dtype;
	int rank;
	int64_t dim[FADC_MAXDIM];
	int64_t numel;
	size_t bytes;
	void *data; // host memory; on a device: NULL, or a declaration's host copy
	uint64_t dptr; // on a device: the device address (0 for zero bytes)
	int owner; // OWN_*: who frees data and the handle
	uint64_t gen;
	// A model-owned output on a device (see "Output placement" below): its
	// task and name, the generation of the graph tree it was written in,
	// released by the caller, and the task whose call reused its memory.
	const ArtTask *otask;
	const char *oname, *stale_by;
	uint64_t tree_gen;
	int dead;
};

typedef struct RtTask {
	const ArtTask *d;
	// Index checks (d->ncheck, passes/checks.c): on the CPU, the (min, max)
	// pairs the task function writes (runtime-owned, never shown to the
	// caller); on a device, pending marks a run whose pairs are not read
	// yet (the task is on its context's pend list).
	int64_t *chk;
	int pending;
	struct RtTask *pnext;
	fadc_task_fn_v1 fn;
	int ready; // first-run set-up done
	int ncaller;
	void **in, **out;
	void *arena;
	fadc_tensor *outs; // model-owned outputs; data NULL until first asked for
	// On a CUDA context: the loaded kernels and graph, and the device
	// addresses of this run's inputs and outputs (the arena is the
	// model's: m->darena).
	RtCuTask *cu;
	uint64_t *din, *dout;
	uint8_t *dstaged; // din[i] is the caller's own tensor (rtcu_task_run)
} RtTask;

struct fadc_model {
	fadc_context *ctx;
	ArtDesc d;
	uint8_t *desc;
	size_t desc_len;
	char hash[17];
	void *dl; // NULL when opened to describe only
	const fadc_abi_v1 *abi;
	int level; // the CPU level whose code is loaded (rt_cpu_pick; 0 when describing)
	char levels[ART_MAX_LEVELS * 64]; // the levels' names, "x86-64-v3,x86-64-v4"
	RtTask *task;
	fadc_tensor *decl; // declaration values, model-owned
	uint8_t *bound; // bound[i]: declaration i was bound by the caller
	// ref[i]: declaration i is bound by reference (fadc_model_bind_ref):
	// tasks read the caller's tensor, not decl[i]; NULL: decl[i].
	fadc_tensor **ref;
	int initialized;
	// On a CUDA context: one arena shared by every task (they run in order
	// on one stream), darena_bytes the largest plan of the tasks set up so
	// far (grown at a task's set-up: device_arena), and the region of the
	// model-owned outputs (grown by a call that finds no room in it:
	// region_grow; none before the first model-owned output).
	uint64_t darena, darena_bytes, dregion, dregion_bytes;
	RtMultiModel *multi; // opened on a multi context: the other GPUs' models (runtime/multi.c)
};

// A failure with its message in ctx (rt_fail, below: one definition for
// this file and runtime/multi.c).
#define fail rt_fail

static fadc_status
ok(fadc_context *ctx)
{
	if (ctx)
		ctx->err[0] = 0;
	return FADC_OK;
}

const char *
fadc_status_name(fadc_status s)
{
	static const char *const names[] = {
		"FADC_OK",         "FADC_ERR_ARG",    "FADC_ERR_IO",        "FADC_ERR_FORMAT",
		"FADC_ERR_VERSION", "FADC_ERR_CPU",   "FADC_ERR_LOAD",      "FADC_ERR_NOT_FOUND",
		"FADC_ERR_SHAPE",  "FADC_ERR_DEVICE", "FADC_ERR_UNBOUND",   "FADC_ERR_NOMEM",
		"FADC_ERR_RUN",    "FADC_ERR_STATE",  "FADC_ERR_OUTPUT_OVERWRITTEN", "FADC_ERR_INDEX",
	};
	return (unsigned)s < sizeof names / sizeof names[0] ? names[s] : "FADC_ERR_?";
}

const char *
fadc_dtype_name(fadc_dtype t)
{
	static const char *const names[] = {
#define DTYPE(N, name, bytes) #name,
#include "dtypes.def"
	};
	return (unsigned)t < ART_NDTYPE ? names[t] : "?";
}

size_t
fadc_dtype_size(fadc_dtype t)
{
	return (unsigned)t < ART_NDTYPE ? art_dtype_bytes[t] : 0;
}

// fadc.h's and tensorio.h's enums are written out (the public header is
// self-contained, tensorio.c depends on nothing new), so they are checked
// here against support/dtypes.def, the list every other one expands: a
// row they lack fails to compile (FADC_x undeclared), a code that differs
// fails the assert.
#define DTYPE(N, ...)                                                                              \
	_Static_assert((int)FADC_##N == (int)ART_##N && (int)TIO_##N == (int)ART_##N,              \
	               "fadc_dtype and tio_dtype must have support/dtypes.def's codes: " #N);
#include "dtypes.def"
// The same for the largest rank: tensors move between the three structs
// dim by dim (codegen/compile.c checks the IR's against the artifact's).
_Static_assert(FADC_MAXDIM == ART_MAXDIM && TIO_MAXDIM == ART_MAXDIM, "one largest rank");

static void
type_str(char *buf, size_t n, fadc_dtype dt, int rank, const int64_t *dim)
{
	size_t k = (size_t)snprintf(buf, n, "%s[", fadc_dtype_name(dt));
	for (int i = 0; i < rank && k < n; i++)
		k += (size_t)snprintf(buf + k, n - k, "%s%" PRId64, i ? ", " : "", dim[i]);
	if (k < n)
		snprintf(buf + k, n - k, "]");
}

// ---------------------------------------------------------------- contexts

// fadc_exec_v1.parallel_for: the pool of the context whose exec x is.
static void
exec_parallel_for(const fadc_exec_v1 *x, fadc_chunk_fn_v1 fn, void *args, int64_t n,
                  int64_t grain)
{
	rt_pool_parallel_for(x->pool, fn, args, n, grain);
}

// The number of threads a context runs with: o->num_threads, or for 0 the
// environment's FADC_NUM_THREADS, or the CPUs online.  0 and a message in
// create_err when out of range (the same range for both ways of saying it).
static int
resolve_threads(int asked)
{
	if (asked < 0 || asked > FADC_MAX_THREADS) {
		snprintf(create_err, sizeof create_err,
		         "num_threads must be 1 .. %d (or 0: the runtime's choice), got %d",
		         FADC_MAX_THREADS, asked);
		return 0;
	}
	if (asked)
		return asked;
	const char *env = getenv("FADC_NUM_THREADS");
	if (env && *env) {
		char *end;
		long v = strtol(env, &end, 10);
		if (*end || v < 1 || v > FADC_MAX_THREADS) {
			snprintf(create_err, sizeof create_err,
			         "FADC_NUM_THREADS must be an integer 1 .. %d, got '%.100s'", FADC_MAX_THREADS,
			         env);
			return 0;
		}
		return (int)v;
	}
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	return ncpu < 1 ? 1 : ncpu > FADC_MAX_THREADS ? FADC_MAX_THREADS : (int)ncpu;
}

// A context over the GPUs o->devices lists (issue 27): checks the list;
// o->device becomes the first GPU, whose context the list's context is.
// One GPU is just that (unless FADC_MULTI_FORCE); several, a multi context
// (runtime/multi.c), made after NCCL loads (runtime/nccl.c).
static fadc_status
device_list(fadc_context_options *o)
{
	if (!o->devices || o->ndevices < 1 || o->ndevices > FADC_MAX_DEVICES || o->device.index) {
		snprintf(create_err, sizeof create_err,
		         "FADC_DEVICE_CUDA_LIST needs devices and 1 .. %d of them (ndevices %d%s)",
		         FADC_MAX_DEVICES, o->ndevices, o->devices ? "" : ", devices NULL");
		return FADC_ERR_ARG;
	}
	for (int i = 0; i < o->ndevices; i++) {
		if (o->devices[i].kind != FADC_DEVICE_CUDA || o->devices[i].index < 0) {
			snprintf(create_err, sizeof create_err,
			         "devices[%d] is no CUDA device: a context over several devices runs on GPUs", i);
			return FADC_ERR_ARG;
		}
		for (int k = 0; k < i; k++)
			if (o->devices[k].index == o->devices[i].index) {
				snprintf(create_err, sizeof create_err, "GPU %d is listed twice (devices[%d], devices[%d])",
				         o->devices[i].index, k, i);
				return FADC_ERR_ARG;
			}
	}
	o->device = o->devices[0];
	return FADC_OK;
}

// A list of several GPUs, or of one with FADC_MULTI_FORCE=1 (the NCCL path
// with one rank: docs/MULTIGPU.md), is a multi context (runtime/multi.c).
static int
multi_wanted(const fadc_context_options *o)
{
	const char *f = getenv("FADC_MULTI_FORCE");
	return o->ndevices > 1 || (o->ndevices == 1 && f && *f && strcmp(f, "0"));
}

fadc_status
fadc_context_create(const fadc_context_options *o, fadc_context **out)
{
	if (!out)
		return FADC_ERR_ARG;
	*out = NULL;
	// Options of a caller compiled against an older fadc.h end at `seed`:
	// the appended fields are read only behind FADC_DEVICE_CUDA_LIST.
	fadc_context_options oo = {{FADC_DEVICE_CPU, 0}, 0, 0, NULL, 0};
	if (o) {
		memcpy(&oo, o, offsetof(fadc_context_options, devices));
		if (o->device.kind == FADC_DEVICE_CUDA_LIST) {
			oo.devices = o->devices;
			oo.ndevices = o->ndevices;
		}
	}
	o = &oo;
	int multi = 0;
	if (o->device.kind == FADC_DEVICE_CUDA_LIST) {
		fadc_status st = device_list(&oo);
		if (st != FADC_OK)
			return st;
		multi = multi_wanted(&oo);
		if (multi) {
			// NCCL first: its absence is the cheapest failure to report.
			char err[sizeof create_err];
			if (!rt_nccl_load(err, sizeof err)) {
				snprintf(create_err, sizeof create_err, "%s", err);
				return FADC_ERR_DEVICE;
			}
		}
	}
	if (o->device.kind == FADC_DEVICE_CPU && o->device.index != 0) {
		snprintf(create_err, sizeof create_err, "there is one CPU device (index 0), not %d",
		         o->device.index);
		return FADC_ERR_DEVICE;
	}
	if (o->device.kind != FADC_DEVICE_CPU && o->device.kind != FADC_DEVICE_CUDA) {
		snprintf(create_err, sizeof create_err, "unknown device kind %d", (int)o->device.kind);
		return FADC_ERR_DEVICE;
	}
	int nthreads = resolve_threads(o->num_threads);
	if (!nthreads)
		return FADC_ERR_ARG;
	fadc_context *c = calloc(1, sizeof *c);
	if (!c || ((nthreads > 1 || rt_pool_profiling()) && !(c->pool = rt_pool_new(nthreads)))) {
		free(c);
		snprintf(create_err, sizeof create_err, "out of memory");
		return FADC_ERR_NOMEM;
	}
	c->o = *o;
	c->nthreads = nthreads;
	c->exec.parallel_for = exec_parallel_for;
	c->exec.pool = c->pool;
	c->host_features = rt_cpu_host_features();
	if (o->device.kind == FADC_DEVICE_CUDA &&
	    !rtcu_open(o->device.index, &c->cu, create_err, sizeof create_err)) {
		rt_pool_free(c->pool);
		free(c);
		return FADC_ERR_DEVICE;
	}
	if (multi) {
		fadc_status st = rt_multi_open(c, oo.devices, oo.ndevices, create_err, sizeof create_err);
		if (st) {
			fadc_context_destroy(c);
			return st;
		}
	}
	*out = c;
	return FADC_OK;
}

void
fadc_context_destroy(fadc_context *ctx)
{
	if (!ctx)
		return;
	rt_multi_close(ctx);
	rtcu_close(ctx->cu);
	rt_pool_free(ctx->pool);
	free(ctx);
}

int
fadc_context_num_threads(const fadc_context *ctx)
{
	return ctx ? ctx->nthreads : 0;
}

fadc_status
fadc_context_pool_stats(const fadc_context *ctx, fadc_pool_stats *s)
{
	if (!ctx || !s)
		return FADC_ERR_ARG;
	RtPoolStats st;
	rt_pool_stats(ctx->pool, &st);
	s->threads = (uint64_t)ctx->nthreads;
	s->threads_started = st.threads_started;
	s->parallel_calls = st.parallel_calls;
	s->jobs = st.jobs;
	s->inline_calls = st.inline_calls;
	return FADC_OK;
}

fadc_status
fadc_context_set_seed(fadc_context *ctx, uint64_t seed)
{
	if (!ctx)
		return FADC_ERR_ARG;
	ctx->o.seed = seed;
	return FADC_OK;
}

const char *
fadc_context_error(const fadc_context *ctx)
{
	return ctx ? ctx->err : create_err;
}

fadc_status
fadc_context_synchronize(fadc_context *ctx)
{
	if (!ctx)
		return FADC_ERR_ARG;
	if (ctx->multi) {
		fadc_status ms = rt_multi_sync(ctx);
		if (ms)
			return ms;
	}
	if (ctx->cu && !rtcu_sync(ctx->cu, ctx->err, sizeof ctx->err))
		return FADC_ERR_RUN;
	fadc_status s = pend_settle(ctx, NULL);
	return s ? s : ok(ctx);
}

static fadc_status
context_timer(fadc_context *ctx, int stop, double *seconds)
{
	if (!ctx || (stop && !seconds))
		return fail(ctx, FADC_ERR_ARG, "fadc_context_timer: NULL argument");
	if (!ctx->cu)
		return fail(ctx, FADC_ERR_ARG,
		            "fadc_context_timer: device timing needs a GPU context (this one is the CPU)");
	if (!rtcu_timer(ctx->cu, stop, seconds, ctx->err, sizeof ctx->err))
		return FADC_ERR_RUN;
	return ok(ctx);
}

fadc_status
fadc_context_timer_start(fadc_context *ctx)
{
	return context_timer(ctx, 0, NULL);
}

fadc_status
fadc_context_timer_stop(fadc_context *ctx, double *seconds)
{
	return context_timer(ctx, 1, seconds);
}

fadc_status
fadc_context_stats(const fadc_context *ctx, fadc_device_stats *s)
{
	if (!ctx || !s)
		return FADC_ERR_ARG;
	memset(s, 0, sizeof *s);
	if (!ctx->cu)
		return FADC_OK;
	RtCuStats st;
	rtcu_stats(ctx->cu, &st);
	s->graphs_recorded = st.recorded;
	s->graphs_replayed = st.replayed;
	s->graphs_rerecorded = st.rerecorded;
	s->graphs_skipped = st.skipped;
	s->eager_runs = st.eager;
	s->pool_live_blocks = st.live_blocks;
	s->pool_live_bytes = st.live_bytes;
	s->pool_reserved_bytes = st.reserved_bytes;
	s->choices_timed = st.choices_timed;
	s->choices_cached = st.choices_cached;
	return FADC_OK;
}

fadc_status
fadc_context_memory(const fadc_context *ctx, fadc_memory_stats *s)
{
	if (!ctx || !s)
		return FADC_ERR_ARG;
	memset(s, 0, sizeof *s);
	if (ctx->cu) {
		RtCuStats st;
		rtcu_stats(ctx->cu, &st);
		s->live_bytes = st.live_bytes;
		s->peak_bytes = st.peak_bytes;
	} else {
		s->live_bytes = ctx->host_live;
		s->peak_bytes = ctx->host_peak;
	}
	return FADC_OK;
}

fadc_status
fadc_context_reset_peak_memory(fadc_context *ctx)
{
	if (!ctx)
		return FADC_ERR_ARG;
	if (ctx->cu)
		rtcu_reset_peak(ctx->cu);
	ctx->host_peak = ctx->host_live;
	return FADC_OK;
}

fadc_status
fadc_context_graph_tree(const fadc_context *ctx, char *buf, size_t len, size_t *need)
{
	if (!ctx || (len && !buf))
		return FADC_ERR_ARG;
	size_t n = 0;
	if (ctx->cu)
		n = rtcu_graph_tree(ctx->cu, buf, len);
	else if (len)
		buf[0] = 0;
	if (need)
		*need = n;
	return FADC_OK;
}

const char *
fadc_context_device_name(const fadc_context *ctx)
{
	return !ctx ? NULL : ctx->cu ? rtcu_device_name(ctx->cu) : "cpu";
}

// ---------------------------------------------------------------- tensors

// numel and bytes of a shape, or 0 on a bad rank, dimension or overflow.
static int
shape_size(fadc_dtype dt, int rank, const int64_t *dim, int64_t *numel, size_t *bytes)
{
	if (rank < 0 || rank > FADC_MAXDIM || (rank && !dim) || !fadc_dtype_size(dt))
		return 0;
	int64_t n = 1;
	for (int i = 0; i < rank; i++) {
		if (dim[i] < 0)
			return 0;
		if (dim[i] && n > INT64_MAX / 16 / dim[i])
			return 0;
		n *= dim[i];
	}
	*numel = n;
	*bytes = (size_t)n * fadc_dtype_size(dt);
	return 1;
}

static fadc_status
tensor_new(fadc_context *ctx, fadc_dtype dt, int rank, const int64_t *dim, void *data, int owner,
           fadc_tensor **out)
{
	if (!ctx || !out)
		return fail(ctx, FADC_ERR_ARG, "fadc_tensor: NULL argument");
	*out = NULL;
	int64_t numel;
	size_t bytes;
	if (!shape_size(dt, rank, dim, &numel, &bytes))
		return fail(ctx, FADC_ERR_ARG, "fadc_tensor: invalid dtype, rank or dimensions");
	fadc_tensor *t = calloc(1, sizeof *t);
	if (!t)
		return fail(ctx, FADC_ERR_NOMEM, "fadc_tensor: out of memory");
	t->ctx = ctx;
	t->dev = ctx->o.device;
	t->dtype = dt;
	t->rank = rank;
	for (int i = 0; i < rank; i++)
		t->dim[i] = dim[i];
	t->numel = numel;
	t->bytes = bytes;
	t->owner = owner;
	if (owner == OWN_CALLER_DATA)
		t->data = data;
	else if (ctx->cu) {
		if (!rtcu_alloc(ctx->cu, bytes, &t->dptr, ctx->err, sizeof ctx->err) ||
		    !rtcu_zero(ctx->cu, t->dptr, bytes, ctx->err, sizeof ctx->err) ||
		    !rtcu_sync(ctx->cu, ctx->err, sizeof ctx->err)) {
			rtcu_free(ctx->cu, t->dptr);
			free(t);
			return FADC_ERR_DEVICE;
		}
	} else if (bytes) {
		t->data = calloc(1, bytes);
		if (!t->data) {
			free(t);
			return fail(ctx, FADC_ERR_NOMEM, "fadc_tensor: out of memory (%zu bytes)", bytes);
		}
		host_hold(ctx, bytes);
	}
	*out = t;
	return ok(ctx);
}

fadc_status
fadc_tensor_create(fadc_context *ctx, fadc_dtype dt, int rank, const int64_t *dim, fadc_tensor **out)
{
	return tensor_new(ctx, dt, rank, dim, NULL, OWN_RUNTIME, out);
}

fadc_status
fadc_tensor_wrap(fadc_context *ctx, fadc_dtype dt, int rank, const int64_t *dim, void *data,
                 fadc_tensor **out)
{
	if (ctx && ctx->o.device.kind != FADC_DEVICE_CPU)
		return fail(ctx, FADC_ERR_DEVICE, "fadc_tensor_wrap: host memory on a device context");
	int64_t numel;
	size_t bytes;
	if (ctx && shape_size(dt, rank, dim, &numel, &bytes) && bytes && !data)
		return fail(ctx, FADC_ERR_ARG, "fadc_tensor_wrap: NULL data for %zu bytes", bytes);
	return tensor_new(ctx, dt, rank, dim, data, OWN_CALLER_DATA, out);
}

void
fadc_tensor_release(fadc_tensor *t)
{
	if (t && t->otask)
		t->dead = 1; // a model-owned output: its memory may be reused
	if (!t || t->owner == OWN_MODEL)
		return;
	if (t->owner == OWN_RUNTIME) {
		if (t->data)
			host_drop(t->ctx, t->bytes);
		free(t->data);
		if (t->ctx->cu)
			rtcu_free(t->ctx->cu, t->dptr);
	}
	free(t);
}

fadc_dtype fadc_tensor_dtype(const fadc_tensor *t) { return t->dtype; }
int fadc_tensor_rank(const fadc_tensor *t) { return t->rank; }
const int64_t *fadc_tensor_dims(const fadc_tensor *t) { return t->dim; }
int64_t fadc_tensor_numel(const fadc_tensor *t) { return t->numel; }
size_t fadc_tensor_bytes(const fadc_tensor *t) { return t->bytes; }
fadc_device fadc_tensor_device(const fadc_tensor *t) { return t->dev; }
uint64_t fadc_tensor_generation(const fadc_tensor *t) { return t->gen; }

// A model-owned output whose memory a later call reused.
static fadc_status
overwritten(const fadc_tensor *t, const char *what)
{
	return fail(t->ctx, FADC_ERR_OUTPUT_OVERWRITTEN,
	            "%s: output '%s' of task '%s' was overwritten by a later call of task '%s', "
	            "which reused its memory on the device (copy it out before that call, or pass "
	            "an output tensor of your own)",
	            what, t->oname, t->otask->name, t->stale_by);
}

void *
fadc_tensor_data(fadc_tensor *t)
{
	return t && t->dev.kind == FADC_DEVICE_CPU ? t->data : NULL;
}

// fadc_tensor_read without reading pending index checks: the runtime's own
// copies (binding a device tensor, initializers reading a declaration bound
// by reference) must not fail, nor consume, a queued run's error.
static fadc_status
tensor_read(const fadc_tensor *t, void *dst, size_t bytes)
{
	if (!t)
		return FADC_ERR_ARG;
	if (bytes != t->bytes || (bytes && !dst))
		return fail(t->ctx, FADC_ERR_ARG, "fadc_tensor_read: %zu bytes asked, the tensor has %zu",
		            bytes, t->bytes);
	if (t->stale_by)
		return overwritten(t, "fadc_tensor_read");
	if (t->dev.kind == FADC_DEVICE_CUDA)
		return rtcu_dtoh(t->ctx->cu, dst, t->dptr, bytes, t->ctx->err, sizeof t->ctx->err)
		           ? ok(t->ctx)
		           : FADC_ERR_DEVICE;
	if (bytes)
		memcpy(dst, t->data, bytes);
	return ok(t->ctx);
}

fadc_status
fadc_tensor_read(const fadc_tensor *t, void *dst, size_t bytes)
{
	fadc_status s = tensor_read(t, dst, bytes);
	if (s || t->dev.kind != FADC_DEVICE_CUDA)
		return s;
	// The copy waited for the stream: every queued run's index checks can
	// be read (the data was copied all the same).
	s = pend_settle(t->ctx, NULL);
	return s ? s : ok(t->ctx);
}

fadc_status
fadc_tensor_write(fadc_tensor *t, const void *src, size_t bytes)
{
	if (!t)
		return FADC_ERR_ARG;
	if (bytes != t->bytes || (bytes && !src))
		return fail(t->ctx, FADC_ERR_ARG, "fadc_tensor_write: %zu bytes given, the tensor has %zu",
		            bytes, t->bytes);
	if (t->stale_by)
		return overwritten(t, "fadc_tensor_write");
	if (t->dev.kind == FADC_DEVICE_CUDA) {
		if (!rtcu_htod(t->ctx->cu, t->dptr, src, bytes, t->ctx->err, sizeof t->ctx->err))
			return FADC_ERR_DEVICE;
	} else if (bytes)
		memcpy(t->data, src, bytes);
	t->gen++;
	return ok(t->ctx);
}

// ---------------------------------------------------------------- index checks
//
// A task whose indices are data (passes/checks.c) has hidden outputs after
// the user's, each the (min, max) of one index tensor, with its valid
// range [lo, end) in the descriptor.  They are the runtime's: never
// counted in fadc_task_info, never passed by the caller.  On the CPU they
// are compared as the task function returns; on a device the task's
// launches end with a copy of them into pinned host memory, and they are
// compared at the next synchronizing call: fadc_context_synchronize,
// fadc_tensor_read, or the next run of the same task (which waits for its
// previous run's event: only tasks with checks ever wait there).

// The outputs of d the caller sees: all but the index checks.
static uint32_t
nuser(const ArtTask *d)
{
	return d->nout - d->ncheck;
}

// d's index checks against v, its ncheck (min, max) pairs: FADC_OK, or
// FADC_ERR_INDEX with the first failing check's message, naming the
// offending value (the smallest if below the range, else the largest).
static fadc_status
check_indices(fadc_context *ctx, const ArtTask *d, const int64_t *v)
{
	for (uint32_t j = 0; j < d->ncheck; j++) {
		const ArtTensor *x = &d->out[nuser(d) + j];
		int64_t lo = v[2 * j], hi = v[2 * j + 1];
		if (lo >= x->lo && hi < x->end)
			continue;
		const char *sp = d->spec_name ? d->spec_name : "";
		return fail(ctx, FADC_ERR_INDEX,
		            "%s%s%s%s: %s: index %lld of %s is out of range [%lld, %lld)%s%s%s", d->name,
		            sp[0] ? " [" : "", sp, sp[0] ? "]" : "", x->op,
		            (long long)(lo < x->lo ? lo : hi), x->of, (long long)x->lo,
		            (long long)x->end, x->at[0] ? " (" : "", x->at, x->at[0] ? ")" : "");
	}
	return FADC_OK;
}

static void
pend_unlink(fadc_context *ctx, RtTask *t)
{
	for (RtTask **p = &ctx->pend; *p; p = &(*p)->pnext)
		if (*p == t) {
			*p = t->pnext;
			break;
		}
	t->pnext = NULL;
	t->pending = 0;
}

// Reads the pending checks of task `only` (waiting for its last run), or
// of every pending task (NULL: after the stream was synchronized), and
// takes them off the list: FADC_OK, or the first failure's status.
static fadc_status
pend_settle(fadc_context *ctx, RtTask *only)
{
	fadc_status s = FADC_OK;
	while (ctx->pend) {
		RtTask *t = only ? only : ctx->pend;
		pend_unlink(ctx, t);
		const int64_t *v = rtcu_task_check_wait(ctx->cu, t->cu, ctx->err, sizeof ctx->err);
		fadc_status r = !v ? FADC_ERR_RUN : check_indices(ctx, t->d, v);
		if (!s)
			s = r; // the first failure's message stays in ctx->err
		if (only)
			break;
	}
	return s;
}

// ---------------------------------------------------------------- models

static void
model_free(fadc_model *m)
{
	if (!m)
		return;
	if (m->task)
		for (uint32_t i = 0; i < m->d.ntask; i++) {
			RtTask *t = &m->task[i];
			if (t->pending)
				pend_unlink(m->ctx, t);
			if (t->chk)
				host_drop(m->ctx, 16 * (uint64_t)t->d->ncheck);
			free(t->chk);
			free(t->in);
			free(t->out);
			if (t->arena)
				host_drop(m->ctx, (t->d->arena_bytes + 63) / 64 * 64);
			free(t->arena);
			if (t->outs)
				for (uint32_t k = 0; k < nuser(t->d); k++) {
					if (t->outs[k].data)
						host_drop(m->ctx, t->outs[k].bytes);
					free(t->outs[k].data); // on a device: in m->dregion
				}
			free(t->outs);
			if (m->ctx->cu)
				rtcu_task_free(m->ctx->cu, t->cu);
			free(t->din);
			free(t->dout);
			free(t->dstaged);
		}
	free(m->task);
	if (m->ctx->cu) {
		rtcu_free(m->ctx->cu, m->darena);
		rtcu_free(m->ctx->cu, m->dregion);
	}
	if (m->decl)
		for (uint32_t i = 0; i < m->d.ndecl; i++) {
			if (m->decl[i].data)
				host_drop(m->ctx, m->decl[i].bytes);
			free(m->decl[i].data);
			rtcu_free(m->ctx->cu, m->decl[i].dptr);
		}
	free(m->decl);
	free(m->bound);
	free(m->ref);
	if (m->dl)
		dlclose(m->dl);
	free(m->desc);
	art_desc_free(&m->d);
	free(m);
}

void
fadc_model_close(fadc_model *m)
{
	if (m && m->multi)
		rt_multi_model_close(m);
	model_free(m);
}

static fadc_status
model_fail(fadc_model *m, fadc_status s)
{
	model_free(m);
	return s;
}

fadc_status
fadc_model_open(fadc_context *ctx, const char *path, unsigned flags, fadc_model **out)
{
	if (!ctx || !path || !out)
		return fail(ctx, FADC_ERR_ARG, "fadc_model_open: NULL argument");
	*out = NULL;
	fadc_model *m = calloc(1, sizeof *m);
	if (!m)
		return fail(ctx, FADC_ERR_NOMEM, "fadc_model_open: out of memory");
	m->ctx = ctx;
	char msg[900];
	ArtRead r = art_read(path, &m->d, &m->desc, &m->desc_len, msg, sizeof msg);
	if (r != ART_READ_OK) {
		free(m);
		fadc_status s = r == ART_READ_IO        ? FADC_ERR_IO
		                : r == ART_READ_VERSION ? FADC_ERR_VERSION
		                : r == ART_READ_NOMEM   ? FADC_ERR_NOMEM
		                                        : FADC_ERR_FORMAT;
		return fail(ctx, s, "%s", msg);
	}
	snprintf(m->hash, sizeof m->hash, "%016" PRIx64, m->d.source_hash);
	for (uint32_t i = 0, n = 0; i < m->d.nlevel && n < sizeof m->levels; i++)
		n += (uint32_t)snprintf(m->levels + n, sizeof m->levels - n, "%s%s", i ? "," : "",
		                        m->d.level[i].cpu);
	m->task = calloc(m->d.ntask + 1, sizeof *m->task);
	m->decl = calloc(m->d.ndecl + 1, sizeof *m->decl);
	m->bound = calloc(m->d.ndecl + 1, 1);
	m->ref = calloc(m->d.ndecl + 1, sizeof *m->ref);
	if (!m->task || !m->decl || !m->bound || !m->ref)
		return model_fail(m, fail(ctx, FADC_ERR_NOMEM, "%s: out of memory", path));
	for (uint32_t i = 0; i < m->d.ntask; i++) {
		RtTask *t = &m->task[i];
		t->d = &m->d.task[i];
		for (uint32_t k = 0; k < t->d->nin; k++)
			t->ncaller += t->d->in[k].role == ART_ROLE_ARG;
	}
	for (uint32_t i = 0; i < m->d.ndecl; i++) {
		const ArtDecl *x = &m->d.decl[i];
		fadc_tensor *t = &m->decl[i];
		t->ctx = ctx;
		t->dev = ctx->o.device;
		t->dtype = (fadc_dtype)x->dtype;
		t->rank = x->rank;
		memcpy(t->dim, x->dim, sizeof(int64_t) * x->rank);
		t->owner = OWN_MODEL;
		if (!shape_size(t->dtype, t->rank, t->dim, &t->numel, &t->bytes))
			return model_fail(m, fail(ctx, FADC_ERR_FORMAT, "%s: declaration '%s' is too large",
			                          path, x->name));
		if (t->bytes && !(t->data = calloc(1, t->bytes)))
			return model_fail(m, fail(ctx, FADC_ERR_NOMEM, "%s: out of memory", path));
		if (t->data)
			host_hold(ctx, t->bytes);
		// On a device, the value lives in the pool; data stays the host copy
		// the initializers read.
		if (ctx->cu && !(flags & FADC_OPEN_DESCRIBE) &&
		    (!rtcu_alloc(ctx->cu, t->bytes, &t->dptr, ctx->err, sizeof ctx->err) ||
		     !rtcu_zero(ctx->cu, t->dptr, t->bytes, ctx->err, sizeof ctx->err)))
			return model_fail(m, FADC_ERR_DEVICE);
	}
	if (flags & FADC_OPEN_DESCRIBE) {
		*out = m;
		return ok(ctx);
	}
	// The code's architecture and CPU features, before any of it is loaded.
	const char *arch = rt_cpu_arch();
	size_t al = strlen(arch);
	if (strncmp(m->d.triple, arch, al) || (m->d.triple[al] && m->d.triple[al] != '-'))
		return model_fail(m, fail(ctx, FADC_ERR_CPU, "%s: compiled for %s, this machine is %s",
		                          path, m->d.triple, arch));
	// The CPU level: the best the host runs, or FADC_CPU_LEVEL's.
	if ((m->level = rt_cpu_pick(&m->d, ctx->host_features, getenv("FADC_CPU_LEVEL"), msg,
	                            sizeof msg)) < 0)
		return model_fail(m, fail(ctx, FADC_ERR_CPU, "%s: %s", path, msg));
	char entry[128];
	if (!art_level_symbol(&m->d, (uint32_t)m->level, entry, sizeof entry))
		return model_fail(m, fail(ctx, FADC_ERR_FORMAT, "%s: a CPU level's name is too long", path));
	// dlopen searches the library path for a name without '/': a bare
	// "m.so" means the file here, as everywhere else in the API.
	char here[4096];
	const char *dlpath = path;
	if (!strchr(path, '/') && strlen(path) + 3 <= sizeof here) {
		snprintf(here, sizeof here, "./%s", path);
		dlpath = here;
	}
	m->dl = dlopen(dlpath, RTLD_NOW | RTLD_LOCAL);
	if (!m->dl) {
		const char *e = dlerror();
		return model_fail(m, fail(ctx, FADC_ERR_LOAD, "%s: dlopen: %s", path, e ? e : "failed"));
	}
	union {
		void *p;
		fadc_entry_fn_v1 f;
	} sym;
	sym.p = dlsym(m->dl, entry);
	if (!sym.p)
		return model_fail(m, fail(ctx, FADC_ERR_VERSION,
		                          "%s: no entry symbol %s (an ABI this runtime does not know)",
		                          path, entry));
	m->abi = sym.f();
	if (!m->abi || m->abi->abi_version != FADC_ABI_VERSION)
		return model_fail(m, fail(ctx, FADC_ERR_VERSION, "%s: ABI version %u, this runtime has %d",
		                          path, m->abi ? m->abi->abi_version : 0, FADC_ABI_VERSION));
	if (m->abi->ntask != m->d.ntask || m->abi->desc_len != m->desc_len ||
	    memcmp(m->abi->desc, m->desc, m->desc_len))
		return model_fail(m, fail(ctx, FADC_ERR_LOAD,
		                          "%s: the loaded code does not carry the descriptor that was "
		                          "checked (a stale library of the same path still loaded?)",
		                          path));
	for (uint32_t i = 0; i < m->d.ntask; i++)
		if (!(m->task[i].fn = m->abi->task[i]))
			return model_fail(m, fail(ctx, FADC_ERR_LOAD, "%s: task %u has no code", path, i));
	if (ctx->multi) {
		fadc_status ms = rt_multi_model_open(m, path, flags);
		if (ms) {
			fadc_model_close(m);
			return ms;
		}
	}
	*out = m;
	return ok(ctx);
}

const char *
fadc_model_name(const fadc_model *m)
{
	return m ? m->d.model : NULL;
}

const char *
fadc_model_info(const fadc_model *m, const char *key)
{
	if (!m || !key)
		return NULL;
	if (!strcmp(key, "options"))
		return m->d.options;
	if (!strcmp(key, "triple"))
		return m->d.triple;
	// The CPU level whose code is loaded (the lowest when describing), its
	// features, and every level of the artifact.
	if (!strcmp(key, "cpu"))
		return m->d.level[m->level].cpu;
	if (!strcmp(key, "features"))
		return m->d.level[m->level].features;
	if (!strcmp(key, "cpu_levels"))
		return m->levels;
	if (!strcmp(key, "source_hash"))
		return m->hash;
	if (!strcmp(key, "cuda_arch"))
		return m->d.cuda_arch;
	return NULL;
}

int
fadc_model_task_count(const fadc_model *m)
{
	return m ? (int)m->d.ntask : 0;
}

fadc_status
fadc_model_find_task(fadc_model *m, const char *name, int *task)
{
	if (!m || !name || !task)
		return fail(m ? m->ctx : NULL, FADC_ERR_ARG, "fadc_model_find_task: NULL argument");
	for (uint32_t i = 0; i < m->d.ntask; i++)
		if (!strcmp(m->d.task[i].name, name)) {
			*task = (int)i;
			return ok(m->ctx);
		}
	char list[600];
	size_t n = 0;
	list[0] = 0;
	for (uint32_t i = 0; i < m->d.ntask && n < sizeof list; i++)
		if (m->d.task[i].kind == ART_TASK)
			n += (size_t)snprintf(list + n, sizeof list - n, "%s%s", n ? " " : "",
			                      m->d.task[i].name);
	return fail(m->ctx, FADC_ERR_NOT_FOUND, "model '%s' has no task '%s' (it has: %s)", m->d.model,
	            name, list);
}

int
fadc_model_spec_count(const fadc_model *m)
{
	return m ? (int)m->d.nspec : 0;
}

const char *
fadc_model_spec(const fadc_model *m, int i)
{
	return m && i >= 0 && (uint32_t)i < m->d.nspec ? m->d.spec[i] : NULL;
}

static int same_type(const fadc_tensor *t, fadc_dtype dt, int rank, const int64_t *dim);

// Do the caller inputs of task t have the types of inputs[0 .. n)?
static int
inputs_fit(const fadc_model *m, uint32_t t, fadc_tensor *const *inputs, int n)
{
	const ArtTask *x = &m->d.task[t];
	if (n != m->task[t].ncaller)
		return 0;
	for (uint32_t k = 0, j = 0; k < x->nin; k++) {
		const ArtTensor *y = &x->in[k];
		if (y->role != ART_ROLE_ARG)
			continue;
		const fadc_tensor *v = inputs[j++];
		if (!v || !same_type(v, (fadc_dtype)y->dtype, y->rank, y->dim))
			return 0;
	}
	return 1;
}

fadc_status
fadc_model_find_task_for(fadc_model *m, const char *name, fadc_tensor *const *inputs, int ninputs,
                         int *task)
{
	if (!inputs)
		return fadc_model_find_task(m, name, task);
	fadc_status s = fadc_model_find_task(m, name, task);
	if (s)
		return s;
	if (ninputs < 0)
		return fail(m->ctx, FADC_ERR_ARG, "fadc_model_find_task_for: %d inputs", ninputs);
	for (uint32_t i = 0; i < m->d.ntask; i++)
		if (m->d.task[i].kind == ART_TASK && !strcmp(m->d.task[i].name, name) &&
		    inputs_fit(m, i, inputs, ninputs)) {
			*task = (int)i;
			return ok(m->ctx);
		}
	// The message: what was given, then each specialisation's inputs.
	char msg[1000], ty[200];
	size_t n = (size_t)snprintf(msg, sizeof msg, "model '%s' has no specialisation of task '%s' "
	                            "for inputs (", m->d.model, name);
	for (int j = 0; j < ninputs && n < sizeof msg; j++) {
		const fadc_tensor *v = inputs[j];
		if (v)
			type_str(ty, sizeof ty, v->dtype, v->rank, v->dim);
		n += (size_t)snprintf(msg + n, sizeof msg - n, "%s%s", j ? ", " : "", v ? ty : "NULL");
	}
	n += n < sizeof msg ? (size_t)snprintf(msg + n, sizeof msg - n, "); it has:") : 0;
	for (uint32_t i = 0; i < m->d.ntask && n < sizeof msg; i++) {
		const ArtTask *x = &m->d.task[i];
		if (x->kind != ART_TASK || strcmp(x->name, name))
			continue;
		const char *sp = m->d.spec[x->spec];
		n += (size_t)snprintf(msg + n, sizeof msg - n, " %s%s(", sp, sp[0] ? " " : "");
		for (uint32_t k = 0, j = 0; k < x->nin && n < sizeof msg; k++)
			if (x->in[k].role == ART_ROLE_ARG) {
				type_str(ty, sizeof ty, (fadc_dtype)x->in[k].dtype, x->in[k].rank, x->in[k].dim);
				n += (size_t)snprintf(msg + n, sizeof msg - n, "%s%s", j++ ? ", " : "", ty);
			}
		n += n < sizeof msg ? (size_t)snprintf(msg + n, sizeof msg - n, ")") : 0;
	}
	*task = -1;
	return fail(m->ctx, FADC_ERR_SHAPE, "%s", msg);
}

static fadc_status
check_task(const fadc_model *m, int task)
{
	if (!m)
		return FADC_ERR_ARG;
	if (task < 0 || (uint32_t)task >= m->d.ntask)
		return fail(m->ctx, FADC_ERR_ARG, "task index %d out of range (model has %u tasks)", task,
		            m->d.ntask);
	return FADC_OK;
}

fadc_status
fadc_task_info_get(const fadc_model *m, int task, fadc_task_info *info)
{
	fadc_status s = check_task(m, task);
	if (s || !info)
		return s ? s : fail(m->ctx, FADC_ERR_ARG, "fadc_task_info_get: NULL info");
	const ArtTask *t = &m->d.task[task];
	info->name = t->name;
	info->is_init = t->kind == ART_INIT;
	info->ninputs = (int)t->nin;
	info->ncaller = m->task[task].ncaller;
	info->noutputs = (int)nuser(t); // index checks are the runtime's
	info->arena_bytes = t->arena_bytes;
	info->naive_bytes = t->naive_bytes;
	info->nkernels = (int)t->nkernel;
	info->targets = t->targets;
	// A choice record and its candidates' records are one launch (one
	// candidate runs; span: the records after it that belong to it).
	info->cuda_launches = (int)t->ncuda;
	info->cuda_choices = 0;
	for (uint32_t k = 0; (t->targets & ART_TARGET_CUDA) && k < t->ncuda; k++)
		if (t->kern[k].kind == ART_LAUNCH_CHOICE) {
			info->cuda_launches -= (int)t->kern[k].span;
			info->cuda_choices++;
			k += t->kern[k].span;
		}
	info->spec_index = t->spec;
	info->spec = t->spec >= 0 ? m->d.spec[t->spec] : "";
	return ok(m->ctx);
}

static void
desc_of(const fadc_model *m, const ArtTensor *x, int output, fadc_tensor_desc *d)
{
	d->name = x->name;
	d->role = output ? FADC_ROLE_OUTPUT
	          : x->role == ART_ROLE_ARG ? FADC_ROLE_INPUT
	          : m->d.decl[x->decl].kind == ART_PARAM ? FADC_ROLE_PARAM
	                                                 : FADC_ROLE_CONST;
	d->dtype = (fadc_dtype)x->dtype;
	d->rank = x->rank;
	memset(d->dim, 0, sizeof d->dim);
	memcpy(d->dim, x->dim, sizeof(int64_t) * x->rank);
}

fadc_status
fadc_task_input(const fadc_model *m, int task, int i, fadc_tensor_desc *d)
{
	fadc_status s = check_task(m, task);
	if (s)
		return s;
	if (!d || i < 0 || (uint32_t)i >= m->d.task[task].nin)
		return fail(m->ctx, FADC_ERR_ARG, "task '%s': no input %d", m->d.task[task].name, i);
	desc_of(m, &m->d.task[task].in[i], 0, d);
	return ok(m->ctx);
}

fadc_status
fadc_task_output(const fadc_model *m, int task, int i, fadc_tensor_desc *d)
{
	fadc_status s = check_task(m, task);
	if (s)
		return s;
	if (!d || i < 0 || (uint32_t)i >= nuser(&m->d.task[task]))
		return fail(m->ctx, FADC_ERR_ARG, "task '%s': no output %d", m->d.task[task].name, i);
	desc_of(m, &m->d.task[task].out[i], 1, d);
	return ok(m->ctx);
}

// ---------------------------------------------------------------- declarations

int
fadc_model_decl_count(const fadc_model *m)
{
	return m ? (int)m->d.ndecl : 0;
}

fadc_status
fadc_model_decl(const fadc_model *m, int i, fadc_tensor_desc *d, int *has_init)
{
	if (!m || !d || i < 0 || (uint32_t)i >= m->d.ndecl)
		return fail(m ? m->ctx : NULL, FADC_ERR_ARG, "fadc_model_decl: no declaration %d", i);
	const ArtDecl *x = &m->d.decl[i];
	d->name = x->name;
	d->role = x->kind == ART_PARAM ? FADC_ROLE_PARAM : FADC_ROLE_CONST;
	d->dtype = (fadc_dtype)x->dtype;
	d->rank = x->rank;
	memset(d->dim, 0, sizeof d->dim);
	memcpy(d->dim, x->dim, sizeof(int64_t) * x->rank);
	if (has_init)
		*has_init = x->init >= 0;
	return ok(m->ctx);
}

int
fadc_model_decl_spec(const fadc_model *m, int i)
{
	return m && i >= 0 && (uint32_t)i < m->d.ndecl ? m->d.decl[i].spec : -1;
}

static int
find_decl(const fadc_model *m, const char *name)
{
	for (uint32_t i = 0; i < m->d.ndecl; i++)
		if (!strcmp(m->d.decl[i].name, name))
			return (int)i;
	return -1;
}

static int
same_type(const fadc_tensor *t, fadc_dtype dt, int rank, const int64_t *dim)
{
	if (!t)
		return 0;
	if (t->dtype != dt || t->rank != rank)
		return 0;
	for (int i = 0; i < rank; i++)
		if (t->dim[i] != dim[i])
			return 0;
	return 1;
}

static fadc_status
bind_data(fadc_model *m, int d, fadc_dtype dt, int rank, const int64_t *dim, const void *data,
          const char *from)
{
	fadc_tensor *v = &m->decl[d];
	if (!same_type(v, dt, rank, dim)) {
		char want[200], got[200];
		type_str(want, sizeof want, v->dtype, v->rank, v->dim);
		type_str(got, sizeof got, dt, rank, dim);
		return fail(m->ctx, FADC_ERR_SHAPE, "%s%s'%s' is declared %s, the bound tensor is %s",
		            from ? from : "", from ? ": " : "", m->d.decl[d].name, want, got);
	}
	m->ref[d] = NULL; // a copy ends a binding by reference
	if (v->bytes)
		memcpy(v->data, data, v->bytes);
	if (m->ctx->cu && m->dl &&
	    !rtcu_htod(m->ctx->cu, v->dptr, v->data, v->bytes, m->ctx->err, sizeof m->ctx->err))
		return FADC_ERR_DEVICE;
	v->gen++;
	m->bound[d] = 1;
	return ok(m->ctx);
}

// The declaration named `name` of type (dt, rank, dim) after `after`
// (-1: the first): with specialisations one name may have several types.
// None after the first: -1; none at all: -2 (no such name), or -3 with a
// FADC_ERR_SHAPE message (from, when not NULL, starts it) listing the
// types it has.
static int
match_decl(fadc_model *m, const char *name, int after, fadc_dtype dt, int rank,
           const int64_t *dim, const char *from)
{
	int named = 0;
	for (uint32_t i = 0; i < m->d.ndecl; i++) {
		if (strcmp(m->d.decl[i].name, name))
			continue;
		named++;
		if ((int)i > after && same_type(&m->decl[i], dt, rank, dim))
			return (int)i;
	}
	if (after >= 0)
		return -1;
	if (!named)
		return -2;
	char list[600], ty[200], got[200];
	size_t n = 0;
	list[0] = 0;
	for (uint32_t i = 0; i < m->d.ndecl && n < sizeof list; i++)
		if (!strcmp(m->d.decl[i].name, name)) {
			const fadc_tensor *v = &m->decl[i];
			type_str(ty, sizeof ty, v->dtype, v->rank, v->dim);
			n += (size_t)snprintf(list + n, sizeof list - n, "%s%s", n ? " or " : "", ty);
		}
	type_str(got, sizeof got, dt, rank, dim);
	fail(m->ctx, FADC_ERR_SHAPE, "%s%s'%s' is declared %s, the bound tensor is %s",
	     from ? from : "", from ? ": " : "", name, list, got);
	return -3;
}

fadc_status
fadc_model_bind(fadc_model *m, const char *name, const fadc_tensor *value)
{
	if (!m || !name || !value)
		return fail(m ? m->ctx : NULL, FADC_ERR_ARG, "fadc_model_bind: NULL argument");
	int d = match_decl(m, name, -1, value->dtype, value->rank, value->dim, NULL);
	if (d == -2)
		return fail(m->ctx, FADC_ERR_NOT_FOUND, "model '%s' declares no param or const '%s'",
		            m->d.model, name);
	if (d < 0)
		return FADC_ERR_SHAPE;
	if (value->dev.kind == FADC_DEVICE_CPU) {
		fadc_status s = FADC_OK;
		for (; d >= 0 && !s; d = match_decl(m, name, d, value->dtype, value->rank, value->dim,
		                                     NULL))
			s = bind_data(m, d, value->dtype, value->rank, value->dim, value->data, NULL);
		return s;
	}
	if (value->ctx != m->ctx)
		return fail(m->ctx, FADC_ERR_DEVICE, "fadc_model_bind: '%s' is on another context", name);
	// A device tensor of this context: through a host copy (binding is not
	// on the run path).
	void *tmp = malloc(value->bytes ? value->bytes : 1);
	if (!tmp)
		return fail(m->ctx, FADC_ERR_NOMEM, "fadc_model_bind: out of memory");
	fadc_status s = tensor_read(value, tmp, value->bytes);
	for (; d >= 0 && !s; d = match_decl(m, name, d, value->dtype, value->rank, value->dim, NULL))
		s = bind_data(m, d, value->dtype, value->rank, value->dim, tmp, NULL);
	free(tmp);
	return s;
}

fadc_status
fadc_model_bind_ref(fadc_model *m, const char *name, fadc_tensor *value)
{
	if (!m || !name || !value)
		return fail(m ? m->ctx : NULL, FADC_ERR_ARG, "fadc_model_bind_ref: NULL argument");
	if (m->multi)
		return fail(m->ctx, FADC_ERR_STATE,
		            "fadc_model_bind_ref: a model on several GPUs takes declarations by copy "
		            "(fadc_model_bind), which the next run hands to every GPU");
	if (value->ctx != m->ctx || value->dev.kind != m->ctx->o.device.kind ||
	    value->dev.index != m->ctx->o.device.index)
		return fail(m->ctx, FADC_ERR_DEVICE,
		            "fadc_model_bind_ref: '%s' must be a tensor of the model's context", name);
	if (value->owner == OWN_MODEL)
		return fail(m->ctx, FADC_ERR_ARG,
		            "fadc_model_bind_ref: '%s': the tensor is the model's (an output or a "
		            "declaration), not one the caller owns", name);
	if (value->bytes && !value->data && !value->dptr)
		return fail(m->ctx, FADC_ERR_ARG, "fadc_model_bind_ref: '%s' has no memory", name);
	int d = match_decl(m, name, -1, value->dtype, value->rank, value->dim, NULL);
	if (d == -2)
		return fail(m->ctx, FADC_ERR_NOT_FOUND, "model '%s' declares no param or const '%s'",
		            m->d.model, name);
	if (d < 0)
		return FADC_ERR_SHAPE;
	for (; d >= 0; d = match_decl(m, name, d, value->dtype, value->rank, value->dim, NULL)) {
		m->ref[d] = value;
		m->bound[d] = 1;
		m->decl[d].gen++;
	}
	return ok(m->ctx);
}

fadc_status
fadc_model_bind_file(fadc_model *m, const char *path, int *nbound)
{
	if (!m || !path)
		return fail(m ? m->ctx : NULL, FADC_ERR_ARG, "fadc_model_bind_file: NULL argument");
	if (nbound)
		*nbound = 0;
	char err[600];
	size_t n = strlen(path);
	tio_tensor *ts = NULL;
	int nt = 0;
	if (n > 4 && !strcmp(path + n - 4, ".npy")) {
		ts = calloc(1, sizeof *ts);
		if (!ts)
			return fail(m->ctx, FADC_ERR_NOMEM, "%s: out of memory", path);
		if (tio_npy_read(path, ts, err, sizeof err)) {
			free(ts);
			return fail(m->ctx, FADC_ERR_IO, "%s", err);
		}
		const char *base = strrchr(path, '/');
		base = base ? base + 1 : path;
		ts->name = malloc(strlen(base) + 1);
		if (!ts->name) {
			tio_free_all(ts, 1);
			return fail(m->ctx, FADC_ERR_NOMEM, "%s: out of memory", path);
		}
		strcpy(ts->name, base);
		ts->name[strlen(base) - 4] = 0;
		nt = 1;
		if (find_decl(m, ts->name) < 0) {
			fadc_status s = fail(m->ctx, FADC_ERR_NOT_FOUND,
			                     "%s: model '%s' declares no param or const '%s'", path,
			                     m->d.model, ts->name);
			tio_free_all(ts, nt);
			return s;
		}
	} else if (tio_safetensors_read(path, &ts, &nt, err, sizeof err))
		return fail(m->ctx, FADC_ERR_IO, "%s", err);
	int count = 0;
	for (int i = 0; i < nt; i++) {
		fadc_dtype dt = (fadc_dtype)ts[i].dtype;
		int d = match_decl(m, ts[i].name, -1, dt, ts[i].rank, ts[i].dim, path);
		if (d == -2)
			continue;
		fadc_status s = d < 0 ? FADC_ERR_SHAPE : FADC_OK;
		for (; d >= 0 && !s; d = match_decl(m, ts[i].name, d, dt, ts[i].rank, ts[i].dim, path)) {
			s = bind_data(m, d, dt, ts[i].rank, ts[i].dim, ts[i].data, path);
			count++;
		}
		if (s) {
			tio_free_all(ts, nt);
			return s;
		}
	}
	tio_free_all(ts, nt);
	if (nbound)
		*nbound = count;
	return ok(m->ctx);
}

fadc_status
fadc_model_get(fadc_model *m, const char *name, fadc_tensor **value)
{
	if (!m || !name || !value)
		return fail(m ? m->ctx : NULL, FADC_ERR_ARG, "fadc_model_get: NULL argument");
	int d = find_decl(m, name);
	if (d < 0)
		return fail(m->ctx, FADC_ERR_NOT_FOUND, "model '%s' declares no param or const '%s'",
		            m->d.model, name);
	*value = m->ref[d] ? m->ref[d] : &m->decl[d];
	return ok(m->ctx);
}

// ---------------------------------------------------------------- running

// Does task t run on the context's device (a CUDA context, not an
// initializer)?
static int
on_device(const fadc_model *m, const RtTask *t)
{
	return m->ctx->cu && t->d->kind != ART_INIT;
}

// ---------------------------------------------------------------- output placement
//
// On a device, the model-owned outputs of every task live in one region of
// the pool (m->dregion), placed per call: each output goes to the lowest
// offset where it overlaps no model-owned output that must survive the
// call (written in this generation of the graph tree by another task and
// not released, or an input of the call).  So the addresses a call's graph
// records depend on which earlier outputs are alive (another state records
// another branch of the tree), a repeated sequence of calls replays at the
// same addresses, and a new generation (a task called again,
// rtcu_task_begin) reuses the memory of the last one.  Every other
// model-owned output that a placement overlaps is marked overwritten,
// naming the task: reading it is then an error, never stale data.

enum { REGION_ALIGN = 256 };

static uint64_t
region_size(const ArtTensor *x)
{
	int64_t ne;
	size_t b = 0;
	if (!shape_size((fadc_dtype)x->dtype, x->rank, x->dim, &ne, &b))
		return 0;
	return ((uint64_t)b + REGION_ALIGN - 1) / REGION_ALIGN * REGION_ALIGN;
}

// Is o (a model-owned output) one of this call's caller inputs?
static int
is_input(const fadc_tensor *o, fadc_tensor *const *inputs, int ninputs)
{
	for (int j = 0; j < ninputs; j++)
		if (inputs[j] == o)
			return 1;
	return 0;
}

// Must model-owned output k of task u survive a call of task t in tree
// generation gen?  Live (written in this generation by another task, not
// released) or an input of the call.
static int
survives(const RtTask *u, uint32_t k, const RtTask *t, fadc_tensor *const *inputs, int ninputs,
         uint64_t gen)
{
	const fadc_tensor *o = &u->outs[k];
	if (!o->dptr || o->stale_by)
		return 0;
	return (u != t && !o->dead && o->tree_gen == gen) || is_input(o, inputs, ninputs);
}

// Is [a, a + na) overlapping [b, b + nb)?
static int
span_overlap(uint64_t a, uint64_t na, uint64_t b, uint64_t nb)
{
	return na && nb && a < b + nb && b < a + na;
}

// Places task t's model-owned outputs (outputs[k] == &t->outs[k]) for a
// call in tree generation gen, each at the lowest offset of the region that
// overlaps no survivor nor t's outputs placed before it, and marks every
// other model-owned output they overlap as overwritten by t.  The new
// addresses go to t->dout first (the old ones are survivors' places until
// all are chosen).  0 when the region has no room (nothing changed then:
// fadc_run grows the region and places again).
static int
place_outputs(fadc_model *m, RtTask *t, fadc_tensor *const *inputs, int ninputs,
              fadc_tensor *const *outputs, uint64_t gen)
{
	for (uint32_t k = 0; k < nuser(t->d); k++) {
		if (outputs[k] != &t->outs[k])
			continue;
		uint64_t sz = region_size(&t->d->out[k]), at = 0;
		t->dout[k] = 0;
		if (!outputs[k]->bytes)
			continue;
		for (int moved = 1; moved;) {
			moved = 0;
			for (uint32_t i = 0; i < m->d.ntask && !moved; i++) {
				RtTask *u = &m->task[i];
				if (!u->ready || !u->outs || u->d->kind == ART_INIT)
					continue;
				for (uint32_t j = 0; j < nuser(u->d) && !moved; j++) {
					uint64_t addr = 0;
					if (u == t && j < k && outputs[j] == &t->outs[j])
						addr = t->dout[j]; // placed by this call
					else if (survives(u, j, t, inputs, ninputs, gen))
						addr = u->outs[j].dptr;
					uint64_t usz = region_size(&u->d->out[j]);
					if (addr && span_overlap(at, sz, addr - m->dregion, usz)) {
						at = addr - m->dregion + usz;
						moved = 1;
					}
				}
			}
		}
		if (at + sz > m->dregion_bytes)
			return 0;
		t->dout[k] = m->dregion + at;
	}
	for (uint32_t i = 0; i < m->d.ntask; i++) {
		RtTask *u = &m->task[i];
		if (!u->ready || !u->outs || u->d->kind == ART_INIT)
			continue;
		for (uint32_t j = 0; j < nuser(u->d); j++) {
			fadc_tensor *o = &u->outs[j];
			if (!o->dptr || o->stale_by || (u == t && outputs[j] == o))
				continue;
			for (uint32_t k = 0; k < nuser(t->d); k++)
				if (outputs[k] == &t->outs[k] && t->dout[k] &&
				    span_overlap(o->dptr, region_size(&u->d->out[j]), t->dout[k],
				                 region_size(&t->d->out[k]))) {
					o->stale_by = t->d->name;
					o->gen++;
					break;
				}
		}
	}
	for (uint32_t k = 0; k < nuser(t->d); k++)
		if (outputs[k] == &t->outs[k])
			t->outs[k].dptr = t->dout[k];
	return 1;
}

// The output region is grown, never sized ahead: it holds the model-owned
// outputs that calls placed, each task's outputs once unless a call must
// keep its inputs beside its outputs (fadc_run).  Grows it to `need`
// bytes: a new block, the readable outputs' bytes copied to the same
// offsets in it, every model-owned output's address moved with them
// (callers hold handles, never device addresses), the old block given
// back once the stream has drained (a copy that does not wait for the
// stream may be handed it).  Recordings made with the old addresses are
// not replayed for the new ones (the outputs' addresses are in their
// keys): the tasks record again.
static fadc_status
region_grow(fadc_model *m, uint64_t need)
{
	if (need <= m->dregion_bytes)
		return FADC_OK;
	uint64_t old = m->dregion, oldb = m->dregion_bytes, nb = 0, keep = 0;
	for (uint32_t i = 0; i < m->d.ntask; i++) {
		const RtTask *u = &m->task[i];
		for (uint32_t k = 0; u->outs && k < nuser(u->d); k++) {
			const fadc_tensor *o = &u->outs[k];
			if (o->dptr >= old && o->dptr < old + oldb && !o->stale_by && !o->dead &&
			    o->dptr - old + region_size(&u->d->out[k]) > keep)
				keep = o->dptr - old + region_size(&u->d->out[k]);
		}
	}
	if (!rtcu_alloc(m->ctx->cu, (size_t)need, &nb, m->ctx->err, sizeof m->ctx->err))
		return FADC_ERR_DEVICE;
	if (keep && !rtcu_dtod(m->ctx->cu, nb, old, (size_t)keep, m->ctx->err, sizeof m->ctx->err)) {
		rtcu_free(m->ctx->cu, nb);
		return FADC_ERR_RUN;
	}
	for (uint32_t i = 0; i < m->d.ntask; i++) {
		RtTask *u = &m->task[i];
		for (uint32_t k = 0; u->outs && k < nuser(u->d); k++)
			if (u->outs[k].dptr >= old && u->outs[k].dptr < old + oldb)
				u->outs[k].dptr = nb + (u->outs[k].dptr - old);
	}
	if (old) {
		if (!rtcu_sync(m->ctx->cu, m->ctx->err, sizeof m->ctx->err))
			return FADC_ERR_RUN;
		rtcu_free(m->ctx->cu, old);
	}
	m->dregion = nb;
	m->dregion_bytes = need;
	return FADC_OK;
}

// First run of a task: pointer arrays and arena (on a device: its kernels
// loaded, its arena a pool block).
// The model's device arena, at least task d's plan.  It holds the
// largest plan of the tasks set up so far, not of every task of the
// artifact: a process that runs only the vjp of an artifact that also
// holds the vhp holds the vjp's arena (docs/CUDA.md, "Pool sharing").
// Growing it frees the old block and takes a larger one; the in-use peak
// is the larger.  Recordings of tasks that ran on the old block stay in
// the graph tree but are never replayed on the new one: every launch that
// touches the arena has base + offset in its key (cugraph.c, task_args),
// so the key matches only while the arena is at the base it was recorded
// with (then the recorded addresses lie inside the arena, at the offsets
// of the task's own plan, and the replay is correct).  Those tasks record
// again at their next call (a re-record).  The stream is drained before
// the old block goes back to the pool, which may hand it to a copy that
// does not wait for the stream.  Every device run calls it too: after a
// growth whose allocation failed (the old block already freed) the next
// run takes an arena again instead of launching on none.
static fadc_status
device_arena(fadc_model *m, const ArtTask *d)
{
	if (d->arena_bytes <= m->darena_bytes)
		return FADC_OK;
	if (m->darena) {
		if (!rtcu_sync(m->ctx->cu, m->ctx->err, sizeof m->ctx->err))
			return FADC_ERR_RUN;
		rtcu_free(m->ctx->cu, m->darena);
		m->darena = 0;
		m->darena_bytes = 0;
	}
	if (!rtcu_alloc(m->ctx->cu, (size_t)d->arena_bytes, &m->darena, m->ctx->err,
	                sizeof m->ctx->err))
		return FADC_ERR_DEVICE;
	m->darena_bytes = d->arena_bytes;
	return FADC_OK;
}

static fadc_status
task_setup(fadc_model *m, RtTask *t)
{
	const ArtTask *d = t->d;
	t->in = calloc(d->nin + 1, sizeof *t->in);
	t->out = calloc(d->nout + 1, sizeof *t->out);
	t->outs = calloc(d->nout + 1, sizeof *t->outs);
	t->din = calloc(d->nin + 1, sizeof *t->din);
	t->dout = calloc(d->nout + 1, sizeof *t->dout);
	t->dstaged = calloc(d->nin + 1, sizeof *t->dstaged);
	if (!t->in || !t->out || !t->outs || !t->din || !t->dout || !t->dstaged)
		return fail(m->ctx, FADC_ERR_NOMEM, "task '%s': out of memory", d->name);
	if (on_device(m, t)) {
		fadc_status s = device_arena(m, d);
		if (s)
			return s;
		uint64_t artifact = art_fnv1a64(ART_FNV_BASIS, m->desc, m->desc_len);
		if (!rtcu_task_load(m->ctx->cu, d, (uint32_t)(d - m->d.task), artifact, m->d.images,
		                    &t->cu, m->ctx->err, sizeof m->ctx->err))
			return FADC_ERR_DEVICE;
	} else if (d->arena_bytes) {
		size_t a = (size_t)((d->arena_bytes + 63) / 64 * 64);
		t->arena = aligned_alloc(64, a);
		if (!t->arena)
			return fail(m->ctx, FADC_ERR_NOMEM, "task '%s': out of memory for its %zu-byte arena",
			            d->name, a);
		host_hold(m->ctx, a);
	}
	if (d->ncheck && !on_device(m, t) && !(t->chk = calloc(2 * (size_t)d->ncheck, 8)))
		return fail(m->ctx, FADC_ERR_NOMEM, "task '%s': out of memory", d->name);
	if (t->chk)
		host_hold(m->ctx, 16 * (uint64_t)d->ncheck);
	for (uint32_t k = 0; k < nuser(d); k++) {
		fadc_tensor *o = &t->outs[k];
		const ArtTensor *x = &d->out[k];
		o->ctx = m->ctx;
		o->dev = m->ctx->o.device;
		o->dtype = (fadc_dtype)x->dtype;
		o->rank = x->rank;
		memcpy(o->dim, x->dim, sizeof(int64_t) * x->rank);
		o->owner = OWN_MODEL;
		o->otask = d;
		o->oname = x->name;
		if (!shape_size(o->dtype, o->rank, o->dim, &o->numel, &o->bytes))
			return fail(m->ctx, FADC_ERR_FORMAT, "task '%s': output '%s' is too large", d->name,
			            x->name);
	}
	t->ready = 1;
	return FADC_OK;
}

static int
overlap(const void *a, size_t na, const void *b, size_t nb)
{
	uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
	return na && nb && x < y + nb && y < x + na;
}

// Runs task t with t->in already set for its declaration inputs.
static fadc_status
task_call(fadc_model *m, RtTask *t, uint64_t seed)
{
	fadc_call_v1 call = {t->in, t->out, t->arena, seed, m->ctx->pool ? &m->ctx->exec : NULL};
	int32_t rc = t->fn(&call);
	if (rc)
		return fail(m->ctx, FADC_ERR_RUN, "task '%s' failed (code %d)", t->d->name, rc);
	return FADC_OK;
}

fadc_status
fadc_model_init(fadc_model *m, uint64_t seed)
{
	if (!m)
		return FADC_ERR_ARG;
	if (!m->dl)
		return fail(m->ctx, FADC_ERR_STATE, "model '%s' was opened to describe only",
		            m->d.model);
	// Declarations bound by reference, as initializers read them: their
	// host memory, or on a device a host copy taken now.
	for (uint32_t i = 0; i < m->d.ndecl; i++) {
		fadc_tensor *r = m->ref[i];
		if (r && r->dev.kind != FADC_DEVICE_CPU) {
			fadc_status s = tensor_read(r, m->decl[i].data, m->decl[i].bytes);
			if (s)
				return s;
		}
	}
	for (uint32_t i = 0; i < m->d.ndecl; i++) {
		const ArtDecl *x = &m->d.decl[i];
		if (m->bound[i])
			continue;
		if (x->init < 0)
			return fail(m->ctx, FADC_ERR_UNBOUND,
			            "%s '%s' has no initializer and was not bound (fadc_model_bind, "
			            "fadc_model_bind_file)",
			            x->kind == ART_PARAM ? "parameter" : "constant", x->name);
		RtTask *t = &m->task[x->init];
		fadc_status s = t->ready ? FADC_OK : task_setup(m, t);
		if (s)
			return s;
		for (uint32_t k = 0; k < t->d->nin; k++) {
			int32_t dl = t->d->in[k].decl;
			if (t->d->in[k].role != ART_ROLE_DECL || dl < 0 || (uint32_t)dl >= i)
				return fail(m->ctx, FADC_ERR_FORMAT,
				            "initializer of '%s' reads something other than an earlier "
				            "declaration", x->name);
			fadc_tensor *r = m->ref[dl];
			t->in[k] = r && r->dev.kind == FADC_DEVICE_CPU ? r->data : m->decl[dl].data;
		}
		if (t->d->nout != 1 || !same_type(&m->decl[i], (fadc_dtype)t->d->out[0].dtype,
		                                  t->d->out[0].rank, t->d->out[0].dim))
			return fail(m->ctx, FADC_ERR_FORMAT, "initializer of '%s' does not compute its type",
			            x->name);
		t->out[0] = m->decl[i].data;
		if ((s = task_call(m, t, seed)))
			return s;
		// Computed on the host, uploaded once (init tasks are CPU code).
		if (m->ctx->cu && !rtcu_htod(m->ctx->cu, m->decl[i].dptr, m->decl[i].data,
		                             m->decl[i].bytes, m->ctx->err, sizeof m->ctx->err))
			return FADC_ERR_DEVICE;
		m->decl[i].gen++;
	}
	m->initialized = 1;
	return ok(m->ctx);
}

// The address of a tensor's bytes where its device sees them.
static uintptr_t
taddr(const fadc_tensor *t)
{
	return t->dev.kind == FADC_DEVICE_CUDA ? (uintptr_t)t->dptr : (uintptr_t)t->data;
}

fadc_status
fadc_run(fadc_model *m, int task, fadc_tensor *const *inputs, int ninputs, fadc_tensor **outputs,
         int noutputs)
{
	if (m && m->multi)
		return rt_multi_run(m, task, inputs, ninputs, outputs, noutputs);
	return rt_run_plain(m, task, inputs, ninputs, outputs, noutputs);
}

fadc_status
rt_run_plain(fadc_model *m, int task, fadc_tensor *const *inputs, int ninputs,
             fadc_tensor **outputs, int noutputs)
{
	fadc_status s = check_task(m, task);
	if (s)
		return s;
	RtTask *t = &m->task[task];
	const ArtTask *d = t->d;
	if (!m->dl)
		return fail(m->ctx, FADC_ERR_STATE, "model '%s' was opened to describe only", m->d.model);
	// The graphs and launches of runtime/cugraph.c act on the current CUDA
	// context: this model's, whatever context of another GPU the calling
	// thread used last (runtime/cuda.c's entry points do the same).
	if (m->ctx->cu && !rtcu_make_current(m->ctx->cu, m->ctx->err, sizeof m->ctx->err))
		return FADC_ERR_DEVICE;
	int dev = on_device(m, t);
	if (dev && !(d->targets & ART_TARGET_CUDA))
		return fail(m->ctx, FADC_ERR_DEVICE,
		            "task '%s' has no CUDA code (compiled with --target %s; use --target cuda "
		            "or cpu,cuda)",
		            d->name, d->targets & ART_TARGET_CPU ? "cpu" : "?");
	if (!dev && !(d->targets & ART_TARGET_CPU))
		return fail(m->ctx, FADC_ERR_DEVICE,
		            "task '%s' has no CPU code (compiled with --target cuda; use --target cpu "
		            "or cpu,cuda, or a CUDA context)",
		            d->name);
	if (ninputs != t->ncaller || (ninputs && !inputs))
		return fail(m->ctx, FADC_ERR_ARG, "task '%s' takes %d inputs from the caller, %d given",
		            d->name, t->ncaller, ninputs);
	uint32_t nu = nuser(d);
	if (noutputs != (int)nu || (noutputs && !outputs))
		return fail(m->ctx, FADC_ERR_ARG, "task '%s' has %u outputs, %d given", d->name, nu,
		            noutputs);
	if (!m->initialized && (s = fadc_model_init(m, m->ctx->o.seed)))
		return s;
	if (!t->ready && (s = task_setup(m, t)))
		return s;
	// The index checks of this task's previous run on the device, before
	// this run overwrites them: wait for that run (only tasks with checks
	// wait), and fail without starting this one if an index was bad.
	if (t->pending && (s = pend_settle(m->ctx, t)))
		return s;
	// Inputs: declarations from the model, the rest from the caller.  The
	// addresses go to t->in (host) and t->din (device).
	for (uint32_t k = 0, j = 0; k < d->nin; k++) {
		const ArtTensor *x = &d->in[k];
		if (x->role == ART_ROLE_DECL) {
			// Bound by reference: the caller's tensor, wherever it is now
			// (on a device, a graph recorded for another address is not
			// replayed for this one: the address is part of its key).
			const fadc_tensor *v = m->ref[x->decl] ? m->ref[x->decl] : &m->decl[x->decl];
			t->in[k] = v->data;
			t->din[k] = v->dptr;
			t->dstaged[k] = 0; // static: used in place
			continue;
		}
		const fadc_tensor *v = inputs[j++];
		char want[200], got[200];
		if (!v)
			return fail(m->ctx, FADC_ERR_ARG, "task '%s': input '%s' is NULL", d->name, x->name);
		if (v->dev.kind != m->ctx->o.device.kind || v->dev.index != m->ctx->o.device.index ||
		    (dev && v->ctx != m->ctx))
			return fail(m->ctx, FADC_ERR_DEVICE, "task '%s': input '%s' is on another device%s",
			            d->name, x->name, dev ? " or context" : "");
		if (!same_type(v, (fadc_dtype)x->dtype, x->rank, x->dim)) {
			type_str(want, sizeof want, (fadc_dtype)x->dtype, x->rank, x->dim);
			type_str(got, sizeof got, v->dtype, v->rank, v->dim);
			return fail(m->ctx, FADC_ERR_SHAPE, "task '%s': input '%s' must be %s, got %s",
			            d->name, x->name, want, got);
		}
		if (v->stale_by)
			return overwritten(v, "fadc_run");
		t->in[k] = v->data;
		t->din[k] = v->dptr;
		// The caller's own tensors are copied into a graph's staging
		// buffers; model-owned ones (outputs of earlier calls,
		// declarations) are used in place.
		t->dstaged[k] = v->owner != OWN_MODEL;
	}
	for (uint32_t k = 0; k < nu; k++) {
		const ArtTensor *x = &d->out[k];
		fadc_tensor *o = outputs[k];
		if (!o) {
			o = &t->outs[k]; // on a device: placed below (place_outputs)
			if (!dev && o->bytes && !o->data) {
				if (!(o->data = calloc(1, o->bytes)))
					return fail(m->ctx, FADC_ERR_NOMEM,
					            "task '%s': out of memory for output '%s'", d->name, x->name);
				host_hold(m->ctx, o->bytes);
			}
		} else {
			char want[200], got[200];
			if (o->stale_by)
				return overwritten(o, "fadc_run");
			if (o->dev.kind != m->ctx->o.device.kind || o->dev.index != m->ctx->o.device.index ||
			    (dev && o->ctx != m->ctx))
				return fail(m->ctx, FADC_ERR_DEVICE,
				            "task '%s': output '%s' is on another device%s", d->name, x->name,
				            dev ? " or context" : "");
			if (!same_type(o, (fadc_dtype)x->dtype, x->rank, x->dim)) {
				type_str(want, sizeof want, (fadc_dtype)x->dtype, x->rank, x->dim);
				type_str(got, sizeof got, o->dtype, o->rank, o->dim);
				return fail(m->ctx, FADC_ERR_SHAPE, "task '%s': output '%s' must be %s, got %s",
				            d->name, x->name, want, got);
			}
			for (uint32_t i = 0; i < d->nin; i++) {
				size_t ib = 0;
				const ArtTensor *y = &d->in[i];
				int64_t ne;
				uintptr_t ia = dev ? (uintptr_t)t->din[i] : (uintptr_t)t->in[i];
				if (shape_size((fadc_dtype)y->dtype, y->rank, y->dim, &ne, &ib) &&
				    overlap((const void *)taddr(o), o->bytes, (const void *)ia, ib))
					return fail(m->ctx, FADC_ERR_ARG,
					            "task '%s': output '%s' overlaps input '%s'", d->name, x->name,
					            y->name);
			}
			for (uint32_t i = 0; i < k; i++)
				if (overlap((const void *)taddr(o), o->bytes, (const void *)taddr(outputs[i]),
				            outputs[i]->bytes))
					return fail(m->ctx, FADC_ERR_ARG, "task '%s': outputs '%s' and '%s' overlap",
					            d->name, d->out[i].name, x->name);
		}
		t->out[k] = o->data;
		t->dout[k] = o->dptr;
		outputs[k] = o;
	}
	// The index checks' (min, max) pairs, in the runtime's memory.
	for (uint32_t j = 0; j < d->ncheck; j++) {
		t->out[nu + j] = t->chk ? t->chk + 2 * j : NULL;
		t->dout[nu + j] = dev ? rtcu_task_check_dev(t->cu) + 16 * j : 0;
	}
	if (dev) {
		// Set up, but the arena may be gone: a growth whose allocation
		// failed freed the old block (device_arena); take it again.
		if ((s = device_arena(m, d)))
			return s;
		uint64_t gen = rtcu_task_begin(m->ctx->cu, t->cu);
		if (!place_outputs(m, t, inputs, ninputs, outputs, gen)) {
			// No room beside the outputs that must survive (or no region
			// yet): it grows by this call's outputs (placed after
			// everything, they fit), which moves every output in it, this
			// call's inputs and given outputs among them.  So the region
			// holds model-owned outputs only: a caller passing its own
			// tensors (fadc-bench) has none; resnet18's vjp,jvp,vhp,hvp
			// held 280 MB there, twice every task's outputs, from the
			// first set-up.
			uint64_t more = 0;
			for (uint32_t k = 0; k < nu; k++)
				if (outputs[k] == &t->outs[k])
					more += region_size(&d->out[k]);
			if ((s = region_grow(m, m->dregion_bytes + more)))
				return s;
			for (uint32_t k = 0, j = 0; k < d->nin; k++) {
				const ArtTensor *x = &d->in[k];
				const fadc_tensor *v = x->role != ART_ROLE_DECL ? inputs[j++]
				                       : m->ref[x->decl]       ? m->ref[x->decl]
				                                               : &m->decl[x->decl];
				t->din[k] = v->dptr;
			}
			for (uint32_t k = 0; k < nu; k++)
				t->dout[k] = outputs[k]->dptr;
			if (!place_outputs(m, t, inputs, ninputs, outputs, gen))
				return fail(m->ctx, FADC_ERR_NOMEM,
				            "task '%s': no room for its outputs in the model's output region",
				            d->name);
		}
		for (uint32_t k = 0; k < nu; k++) {
			fadc_tensor *o = outputs[k];
			t->dout[k] = o->dptr;
			if (o == &t->outs[k]) {
				o->tree_gen = gen;
				o->dead = 0;
				o->stale_by = NULL;
			}
		}
		if (!rtcu_task_run(m->ctx->cu, t->cu, t->din, t->dstaged, t->dout, m->darena,
		                   m->ctx->o.seed, m->ctx->err, sizeof m->ctx->err))
			return FADC_ERR_RUN;
		if (d->ncheck) { // read at the next synchronizing call
			t->pending = 1;
			t->pnext = m->ctx->pend;
			m->ctx->pend = t;
		}
	} else if ((s = task_call(m, t, m->ctx->o.seed)) ||
	           (s = check_indices(m->ctx, d, t->chk)))
		return s;
	for (uint32_t k = 0; k < nu; k++) {
		outputs[k]->gen++;
		int32_t wb = d->out[k].writeback;
		if (wb < 0 || !outputs[k]->bytes)
			continue;
		if (dev) {
			if (!rtcu_dtod(m->ctx->cu, t->din[wb], t->dout[k], outputs[k]->bytes, m->ctx->err,
			               sizeof m->ctx->err))
				return FADC_ERR_RUN;
		} else if (t->in[wb] != t->out[k])
			memcpy(t->in[wb], t->out[k], outputs[k]->bytes);
	}
	return ok(m->ctx);
}

// ---------------------------------------------------------------- interoperation
//
// The caller's device memory as a tensor, a tensor's address, and the
// context's stream against the caller's (fadc.h, "interoperation";
// runtime/interop.c): what bindings over DLPack need (python/fadc).  A
// wrapped device tensor is OWN_CALLER_DATA with its address in dptr, so
// fadc_run stages it as an input and writes it in place as an output, and
// fadc_tensor_release frees only the handle, as for fadc_tensor_wrap.

fadc_status
fadc_tensor_wrap_device(fadc_context *ctx, fadc_dtype dt, int rank, const int64_t *dim,
                        uint64_t addr, fadc_tensor **out)
{
	if (ctx && !ctx->cu)
		return fadc_tensor_wrap(ctx, dt, rank, dim, (void *)(uintptr_t)addr, out);
	int64_t numel;
	size_t bytes;
	if (ctx && shape_size(dt, rank, dim, &numel, &bytes) && bytes && !addr)
		return fail(ctx, FADC_ERR_ARG, "fadc_tensor_wrap_device: address 0 for %zu bytes", bytes);
	fadc_status s = tensor_new(ctx, dt, rank, dim, NULL, OWN_CALLER_DATA, out);
	if (!s)
		(*out)->dptr = addr;
	return s;
}

fadc_status
fadc_tensor_address(const fadc_tensor *t, uint64_t *addr)
{
	if (!t || !addr)
		return FADC_ERR_ARG;
	if (t->stale_by)
		return overwritten(t, "fadc_tensor_address");
	*addr = (uint64_t)taddr(t);
	return ok(t->ctx);
}

fadc_status
fadc_context_stream(const fadc_context *ctx, void **stream)
{
	if (!ctx || !stream)
		return FADC_ERR_ARG;
	*stream = rtcu_stream(ctx->cu);
	return FADC_OK;
}

static fadc_status
order_stream(fadc_context *ctx, void *stream, int wait)
{
	if (!ctx)
		return FADC_ERR_ARG;
	if (ctx->cu && !rtcu_order_stream(ctx->cu, stream, wait, ctx->err, sizeof ctx->err))
		return FADC_ERR_DEVICE;
	return ok(ctx);
}

fadc_status
fadc_context_wait_stream(fadc_context *ctx, void *stream)
{
	return order_stream(ctx, stream, 1);
}

fadc_status
fadc_context_signal_stream(fadc_context *ctx, void *stream)
{
	return order_stream(ctx, stream, 0);
}

// ---------------------------------------------------------------- what runtime/multi.c needs

RtMulti *rt_ctx_multi(const fadc_context *ctx) { return ctx ? ctx->multi : NULL; }
void rt_ctx_set_multi(fadc_context *ctx, RtMulti *mu) { ctx->multi = mu; }
RtMultiModel *rt_model_multi(const fadc_model *m) { return m ? m->multi : NULL; }
void rt_model_set_multi(fadc_model *m, RtMultiModel *mm) { m->multi = mm; }
RtCuda *rt_ctx_cuda(const fadc_context *ctx) { return ctx ? ctx->cu : NULL; }
fadc_context *rt_model_ctx(const fadc_model *m) { return m ? m->ctx : NULL; }
const ArtDesc *rt_model_desc(const fadc_model *m) { return &m->d; }
int rt_model_initialized(const fadc_model *m) { return m->initialized; }
uint64_t rt_ctx_seed(const fadc_context *ctx) { return ctx->o.seed; }

fadc_tensor *
rt_model_decl_value(fadc_model *m, int i)
{
	return m->ref[i] ? m->ref[i] : &m->decl[i];
}

fadc_status
rt_model_bind_index(fadc_model *m, int i, const void *data)
{
	if (i < 0 || (uint32_t)i >= m->d.ndecl)
		return fail(m->ctx, FADC_ERR_ARG, "declaration %d out of range", i);
	const fadc_tensor *v = &m->decl[i];
	return bind_data(m, i, v->dtype, v->rank, v->dim, data, NULL);
}

int
rt_model_has_ref(const fadc_model *m)
{
	for (uint32_t i = 0; i < m->d.ndecl; i++)
		if (m->ref[i])
			return 1;
	return 0;
}

fadc_status
rt_fail(fadc_context *ctx, fadc_status s, const char *fmt, ...)
{
	if (ctx) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(ctx->err, sizeof ctx->err, fmt, ap);
		va_end(ap);
	}
	return s;
}
