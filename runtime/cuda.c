// runtime/cuda.c -- the runtime on an NVIDIA GPU: the CUDA driver API
// loaded at run time, contexts, copies, and tasks: their modules and
// launches (kernels, host steps, choices).
//
// The driver is never linked: rtcu_open dlopens libcuda.so.1 and looks up
// the few entry points of runtime/cuda_impl.h (CU_FUNCS) by their exported
// (versioned) names, with the types written out there, so the runtime
// builds without a CUDA toolkit and runs CPU-only where there is no
// driver.  Every call goes through CHECK_CU (cuda_impl.h), which writes the statement, the function, file:line and the
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
// CUDA graphs and graph trees (docs/CUDA.md): runtime/cugraph.c, whose
// note says how a task's runs are recorded and replayed; rtcu_task_run is
// there and calls rtcu_launch_all here, eagerly or under capture.
//
// cuBLAS (GEMM records): runtime/cublas.c; launch_one calls rtcu_blas_gemm
// for a GEMM record.
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

#include "cuda_impl.h"
#include "support.h" // the assignment solver (support/hungarian.c)

static int host_failed(RtCuda *c, char *err, size_t errlen);
static void pool_drop(void *ctx, uint64_t base, uint64_t size);
static void prof_report(RtCuTask *k);

// Every entry point below that reaches the driver makes this context
// current first: one thread may drive contexts of several GPUs (two
// ordinary contexts, or a multi context's sub-contexts), and the driver's
// calls act on the calling thread's current context (a kernel of GPU 0's
// module launched with GPU 1's context current is CUDA_ERROR_INVALID_HANDLE).
// cuCtxSetCurrent is a thread-local store: cheap beside any call here.
#define CURRENT(c) CHECK_CU(c, cuCtxSetCurrent((c)->ctx))

// ---------------------------------------------------------------- errors

void
rtcu_msg(const RtCuda *c, CUresult r, const char *what, const char *fn, const char *file,
         int line, char *err, size_t errlen)
{
	const char *name = NULL, *text = NULL;
	if (c && c->d.cuGetErrorName)
		c->d.cuGetErrorName(r, &name);
	if (c && c->d.cuGetErrorString)
		c->d.cuGetErrorString(r, &text);
	snprintf(err, errlen, "CUDA: %s failed in %s (%s:%d): %s: %s", what, fn, file, line,
	         name ? name : "?", text ? text : "unknown error");
}
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
	rtcu_tree_prune(c, &c->root, NULL); // empty unless models were left open
	// cuBLAS stays loaded, as the driver does (below); its handle goes
	// before the memory its workspace is in.
	rtcu_blas_close(c);
	rtcu_dnn_close(c);
	cumem_close(&c->mem, pool_drop, c);
	for (int i = 0; i < 2; i++)
		if (c->ev[i])
			c->d.cuEventDestroy(c->ev[i]);
	if (c->order_ev)
		c->d.cuEventDestroy(c->order_ev);
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
		rtcu_msg(c, r, "cuMemAlloc(&p, size)", __func__, __FILE__, __LINE__, err, errlen);
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

// FADC_CUDA_POOL_LOG=1: every block taken from the pool and given back,
// with the bytes in use after, on stderr (where a peak comes from: the
// arena, the output region, workspaces, staging, tensors).
static int
pool_log(void)
{
	const char *s = getenv("FADC_CUDA_POOL_LOG");
	return s && *s && strcmp(s, "0");
}

int
rtcu_alloc(RtCuda *c, size_t bytes, uint64_t *addr, char *err, size_t errlen)
{
	CURRENT(c);
	int ok = cumem_alloc(&c->mem, bytes, addr, pool_grow, c, err, errlen);
	if (ok && bytes && pool_log())
		fprintf(stderr, "fadc: pool: + %zu bytes at 0x%llx, %llu in use (peak %llu)\n", bytes,
		        (unsigned long long)*addr, (unsigned long long)c->mem.live_bytes,
		        (unsigned long long)c->mem.peak_bytes);
	return ok;
}

void
rtcu_free(RtCuda *c, uint64_t addr)
{
	if (!c)
		return;
	c->d.cuCtxSetCurrent(c->ctx); // (no error to report: freeing)
	uint64_t before = c->mem.live_bytes;
	cumem_free(&c->mem, addr);
	if (addr && before != c->mem.live_bytes && pool_log())
		fprintf(stderr, "fadc: pool: - %llu bytes at 0x%llx, %llu in use\n",
		        (unsigned long long)(before - c->mem.live_bytes), (unsigned long long)addr,
		        (unsigned long long)c->mem.live_bytes);
}

// ---------------------------------------------------------------- copies

int
rtcu_htod(RtCuda *c, uint64_t dst, const void *src, size_t n, char *err, size_t errlen)
{
	if (!n)
		return 1;
	CURRENT(c);
	CHECK_CU(c, cuMemcpyHtoDAsync(dst, src, n, c->stream));
	CHECK_CU(c, cuStreamSynchronize(c->stream));
	return 1;
}

int
rtcu_dtoh(RtCuda *c, void *dst, uint64_t src, size_t n, char *err, size_t errlen)
{
	if (!n)
		return 1;
	CURRENT(c);
	CHECK_CU(c, cuMemcpyDtoHAsync(dst, src, n, c->stream));
	CHECK_CU(c, cuStreamSynchronize(c->stream));
	return !host_failed(c, err, errlen);
}

int
rtcu_dtod(RtCuda *c, uint64_t dst, uint64_t src, size_t n, char *err, size_t errlen)
{
	if (!n || dst == src)
		return 1;
	CURRENT(c);
	CHECK_CU(c, cuMemcpyDtoDAsync(dst, src, n, c->stream));
	return 1;
}

int
rtcu_zero(RtCuda *c, uint64_t dst, size_t n, char *err, size_t errlen)
{
	if (!n)
		return 1;
	CURRENT(c);
	CHECK_CU(c, cuMemsetD8Async(dst, 0, n, c->stream));
	return 1;
}

int
rtcu_sync(RtCuda *c, char *err, size_t errlen)
{
	CURRENT(c);
	CHECK_CU(c, cuStreamSynchronize(c->stream));
	return !host_failed(c, err, errlen);
}

// A context over several GPUs (runtime/multi.c) drives them from one
// thread: each GPU's calls are made with its context current.
int
rtcu_make_current(RtCuda *c, char *err, size_t errlen)
{
	CHECK_CU(c, cuCtxSetCurrent(c->ctx));
	return 1;
}

// 1 when the stream's work is done, 0 while it runs (CUDA_ERROR_NOT_READY,
// 600), -1 with a message on an error: the multi context polls it against
// NCCL's deadline instead of blocking in cuStreamSynchronize.
int
rtcu_stream_done(RtCuda *c, char *err, size_t errlen)
{
	CURRENT(c);
	CUresult r = c->d.cuStreamQuery(c->stream);
	if (r == 600)
		return 0;
	if (r) {
		rtcu_msg(c, r, "cuStreamQuery(c->stream)", __func__, __FILE__, __LINE__, err, errlen);
		return -1;
	}
	return !host_failed(c, err, errlen) ? 1 : -1;
}

// Device-side timing: an event recorded on the stream at start, another
// at stop, and the time between them as the GPU measured it (the work
// queued in between, without the host's launch and synchronization costs;
// cuEventElapsedTime's resolution is about 0.5 us).  stop waits for its
// event.
int
rtcu_timer(RtCuda *c, int stop, double *seconds, char *err, size_t errlen)
{
	CURRENT(c);
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
	s->peak_bytes = c->mem.peak_bytes;
}

void
rtcu_reset_peak(RtCuda *c)
{
	cumem_reset_peak(&c->mem);
}

// ---------------------------------------------------------------- tasks

void
rtcu_task_free(RtCuda *c, RtCuTask *k)
{
	if (!k)
		return;
	c->d.cuCtxSetCurrent(c->ctx); // (no error to report: freeing)
	rtcu_tree_prune(c, &c->root, k);
	if (k->blas)
		rtcu_blas_release(c);
	rtcu_dnn_task_free(c, k);
	for (uint32_t m = 0; k->mod && m < k->t->nmodule; m++)
		if (k->mod[m])
			c->d.cuModuleUnload(k->mod[m]);
	free(k->mod);
	for (uint32_t i = 0; k->k && i < k->nk; i++) {
		if (k->k[i].host)
			c->d.cuMemFreeHost(k->k[i].host);
		free(k->k[i].val);
		free(k->k[i].param);
	}
	if (k->chk_ev) {
		// A run in flight still copies into chk_host.
		c->d.cuEventSynchronize(k->chk_ev);
		c->d.cuEventDestroy(k->chk_ev);
	}
	if (k->chk_host)
		c->d.cuMemFreeHost(k->chk_host);
	rtcu_free(c, k->chk_dev);
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
// What ran a GEMM record: cuBLAS, or the printed 3xTF32 tile kernel that
// runtime/cublas.c's mma_decide chose (mma_pick 2 + its tile index).
static const char *
gemm_label(const Kern *kk)
{
	return kk->mma_pick >= 2 ? "3xtf32 gemm" : "cublas gemm";
}

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
		const char *w = a->kind == ART_LAUNCH_GEMM    ? gemm_label(&k->k[i])
		                : a->kind == ART_LAUNCH_CONV ? "cudnn conv"
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
			fprintf(stderr, "  %5.1f%%  %10.1f us  launch %4u  %s batch %llu M %llu N %llu K %llu\n",
			        100 * k->pms[b] / total, 1e3 * k->pms[b] / runs, b, gemm_label(&k->k[b]),
			        (unsigned long long)a->gemm.batch, (unsigned long long)a->gemm.m,
			        (unsigned long long)a->gemm.n, (unsigned long long)a->gemm.k);
		else
			fprintf(stderr, "  %5.1f%%  %10.1f us  launch %4u  %s (%llu points, %u blocks)\n",
			        100 * k->pms[b] / total, 1e3 * k->pms[b] / runs, b,
			        a->name ? a->name : "host step", (unsigned long long)a->points,
			        k->k[b].grid);
	}
	free(shown);
	// FADC_CUDA_PROFILE=2: every launch in order (a kernel's share of a
	// layer, which the top 30 above does not show).
	const char *pf = getenv("FADC_CUDA_PROFILE");
	if (pf && !strcmp(pf, "2"))
		for (uint32_t i = 0; i < k->nk; i++) {
			const ArtKernel *a = &t->kern[i];
			if (a->kind == ART_LAUNCH_CHOICE || !(k->pms[i] > 0))
				continue;
			fprintf(stderr, "  launch %4u  %9.1f us  %s (%llu points, %u blocks)\n", i,
			        1e3 * k->pms[i] / runs,
			        a->kind == ART_LAUNCH_GEMM   ? gemm_label(&k->k[i])
			        : a->kind == ART_LAUNCH_CONV ? "cudnn conv"
			        : a->name                    ? a->name
			                                     : "host step",
			        (unsigned long long)a->points, k->k[i].grid);
		}
}

static uint64_t
art_bytes(const ArtTensor *x)
{
	uint64_t n = x->dtype < ART_NDTYPE ? art_dtype_bytes[x->dtype] : 8;
	for (int i = 0; i < x->rank; i++)
		n *= (uint64_t)x->dim[i];
	return n;
}


static int cand_can_run(const RtCuTask *k, const struct Choice *ch, uint32_t j);

// Each convolution record's scratch (Kern.scr_*): the widest span of the
// task's arena that holds no value while the record runs, which cuDNN may
// then use as its workspace.  The memory plan (codegen/plan.c) gives two
// buffers the same bytes only when their lives (first writer to last
// reader) are disjoint, and every record names each buffer it touches as
// an argument (its offset and bytes: a whole buffer, codegen/compile.c),
// so a buffer live while a choice runs and named by none of its records is
// named before it and after it: cumem_free_gap counts such spans busy, and
// the record's own three tensors.  A span named by the choice's records
// that is none of the record's tensors is a temporary of its other
// candidate (the columns, the gradient's transposed copy), which the plan
// keeps apart from every buffer live during the range the record replaces
// (they live only inside it): its bytes are free, whatever other buffer
// uses them before or after.  Different buffers at the same span merge
// into one longer life, which only errs towards busy.  A loop is
// inside one record (a persistent or fused kernel), and choices run in
// record order (the eager first run's timing too).  The context then holds
// a workspace only for records whose plan needs more than their scratch
// (rtcu_dnn_prepare), where it held the largest plan's per loaded task (up
// to 256 MiB each) on top of the arena.  test_codegen_plan checks the same
// analysis on the kernel IR against its oracle.
static void
conv_scratch(RtCuTask *k)
{
	// FADC_CUDA_DNN_SCRATCH=0: no scratch, every workspace in the
	// context's blocks (measuring what the scratch saves).
	const char *e = getenv("FADC_CUDA_DNN_SCRATCH");
	if ((e && !strcmp(e, "0")) || !k->nchoice)
		return;
	size_t n = 0;
	for (uint32_t r = 0; r < k->nk; r++)
		n += k->k[r].k->narg;
	CuSpan *t = calloc(n + 1, sizeof *t);
	if (!t)
		return; // no scratch: every workspace in the task's block
	uint32_t rk = 0, rq = 0;
	n = 0;
	for (uint32_t r = k->nk; r-- > 0;) {
		const ArtKernel *a = k->k[r].k;
		for (uint32_t q = 0; q < a->narg; q++)
			if (a->arg[q].kind == ART_ARG_ARENA && a->arg[q].bytes) {
				rk = r, rq = q; // the first (any would do)
				t[n++] = (CuSpan){a->arg[q].offset, a->arg[q].bytes, r, r};
			}
	}
	n = cumem_spans_merge(t, n);
	uint8_t *inside = calloc(n + 1, 1);
	for (uint32_t ci = 0; n && inside && ci < k->nchoice; ci++) {
		const struct Choice *ch = &k->choice[ci];
		for (uint32_t j = 0; j < ch->n; j++) {
			if (ch->count[j] != 1 || k->k[ch->first[j]].k->kind != ART_LAUNCH_CONV)
				continue;
			Kern *cv = &k->k[ch->first[j]];
			memset(inside, 0, n);
			for (uint32_t r = ch->at; r <= ch->at + ch->span && r < k->nk; r++) {
				const ArtKernel *a = k->k[r].k;
				for (uint32_t q = 0; q < a->narg; q++)
					if (a->arg[q].kind == ART_ARG_ARENA && a->arg[q].bytes) {
						size_t x = cumem_span_find(t, n, a->arg[q].offset, a->arg[q].bytes);
						if (x < n)
							inside[x] = 1;
					}
			}
			CuSpan own[3];
			size_t nown = 0;
			for (uint32_t q = 0; q < cv->k->narg && nown < 3; q++)
				if (cv->k->arg[q].kind == ART_ARG_ARENA)
					own[nown++] = (CuSpan){cv->k->arg[q].offset, cv->k->arg[q].bytes, 0, 0};
			// The pool's blocks start at multiples of CUMEM_ALIGN, the arena too.
			cv->scr_bytes = cumem_free_gap(t, n, inside, ch->at, ch->at + ch->span, own, nown,
			                               k->t->arena_bytes, CUMEM_ALIGN, &cv->scr_off);
			cv->scr_kern = rk;
			cv->scr_arg = rq;
		}
	}
	free(inside);
	free(t);
}

// Where record kk may put `ws` bytes of cuDNN workspace on this run: its
// scratch (conv_scratch) in this run's arena (the reference argument's
// value less its offset), when they fit there, else 0.
uint64_t
rtcu_conv_scratch(const RtCuTask *k, const Kern *kk, uint64_t ws)
{
	if (!kk->scr_bytes || ws > kk->scr_bytes)
		return 0;
	const Kern *r = &k->k[kk->scr_kern];
	return r->val[kk->scr_arg] - r->k->arg[kk->scr_arg].offset + kk->scr_off;
}


// A persistent kernel with resident tiles (codegen/cuda.c, print_tile)
// defines the word <kernel>_dsmem: the dynamic shared memory its tiles'
// slots need.  Its grid barrier needs every block that takes part
// resident at once, and blocks with that much shared memory fit once per
// SM, so its grid is cut to what the occupancy calculator says fits at
// once (the kernel's blocks stride by the blocks that take part, so any
// grid is correct).  Where a step fails (no such word: any other kernel;
// a GPU with less shared memory a block; a PTX build the driver limits)
// it launches as before, with none: the kernel then reads its tiles from
// global memory every step (the same sums).  FADC_CUDA_NO_DSMEM=1 gives
// none to every kernel (that form tested on a GPU that has room).
static void
persist_smem(RtCuda *c, Kern *kk, CUmodule mod, const char *name) {
	const char *off = getenv("FADC_CUDA_NO_DSMEM");
	if (off && *off && strcmp(off, "0"))
		return;
	char sym[600];
	CUdeviceptr p = 0;
	size_t n = 0;
	unsigned v = 0;
	int per = 0, sms = 0;
	if (snprintf(sym, sizeof sym, "%s_dsmem", name) >= (int)sizeof sym ||
	    c->d.cuModuleGetGlobal(&p, &n, mod, sym) || n != sizeof v ||
	    c->d.cuMemcpyDtoHAsync(&v, p, sizeof v, c->stream) ||
	    c->d.cuStreamSynchronize(c->stream) || !v || v > (1u << 30) ||
	    c->d.cuFuncSetAttribute(kk->fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
	                            (int)v) ||
	    c->d.cuOccupancyMaxActiveBlocksPerMultiprocessor(&per, kk->fn, 256, v) || per < 1 ||
	    c->d.cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, c->dev) ||
	    sms < 1)
		return;
	kk->dsmem = v;
	uint64_t most = (uint64_t)per * (uint64_t)sms;
	if (kk->grid > most)
		kk->grid = (unsigned)most;
	if (getenv("FADC_CUDA_PERSIST_LOG"))
		fprintf(stderr, "fadc: %s: %u bytes of dynamic shared memory, %d block(s) an SM, grid %u\n",
		        name, v, per, kk->grid);
}

int
rtcu_task_load(RtCuda *c, const ArtTask *t, uint32_t index, uint64_t artifact,
               const uint8_t *images, RtCuTask **out, char *err, size_t errlen)
{
	CURRENT(c);
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
	// Each candidate's records: a sequence's members (after its record),
	// else the one record (the decoder checked the layout and the spans).
	for (uint32_t i = 0, n = 0; i < t->ncuda; i++)
		if (t->kern[i].kind == ART_LAUNCH_CHOICE) {
			struct Choice *ch = &k->choice[n++];
			*ch = (struct Choice){i, (uint32_t)t->kern[i].points, -1, t->kern[i].span, {0}, {0}};
			for (uint32_t j = 0, r = i + 1; j < ch->n; j++) {
				int seq = t->kern[r].kind == ART_LAUNCH_SEQ;
				ch->first[j] = r + (uint32_t)seq;
				ch->count[j] = seq ? t->kern[r].span : 1;
				r = ch->first[j] + ch->count[j];
			}
		}
	if (t->ncheck) {
		size_t cb = 16 * (size_t)t->ncheck;
		if (!rtcu_alloc(c, cb, &k->chk_dev, err, errlen))
			goto fail;
		CHECK_CU_GOTO(c, cuMemAllocHost((void **)&k->chk_host, cb), fail);
		memset(k->chk_host, 0, cb);
		CHECK_CU_GOTO(c, cuEventCreate(&k->chk_ev, CU_EVENT_DISABLE_TIMING), fail);
	}
	// The cubin is for the artifact's architecture; where it does not load
	// (another GPU generation) the driver compiles the PTX.
	// FADC_CUDA_FORCE_PTX=1 skips the cubin, as such a GPU would (the
	// fallback tested on the GPU at hand: tests/gpu/device/run.sh).
	const char *fp = getenv("FADC_CUDA_FORCE_PTX");
	int force_ptx = fp && *fp && strcmp(fp, "0");
	if (force_ptx && !t->module[0].ptx_len) {
		snprintf(err, errlen, "FADC_CUDA_FORCE_PTX: task '%s' has no PTX (compiled with "
		                      "--no-ptx)", t->name);
		goto fail;
	}
	// A task compiled as several programs has a module per program
	// (docs/ARTIFACT.md, format 9), each loaded alike.
	if (!(k->mod = calloc(t->nmodule, sizeof *k->mod))) {
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	for (uint32_t m = 0; m < t->nmodule; m++) {
		const ArtModule *x = &t->module[m];
		CUresult r = force_ptx ? 209 // CUDA_ERROR_NO_BINARY_FOR_GPU, as such a GPU says
		                       : c->d.cuModuleLoadData(&k->mod[m], images + x->cubin_off);
		if (r && x->ptx_len && images[x->ptx_off + x->ptx_len - 1] == 0) {
			CUresult r2 = c->d.cuModuleLoadData(&k->mod[m], images + x->ptx_off);
			if (!r2 || force_ptx)
				r = r2;
		}
		if (r) {
			k->mod[m] = NULL;
			rtcu_msg(c, r, "cuModuleLoadData(&k->mod[m], cubin or PTX)", __func__, __FILE__,
			         __LINE__, err, errlen);
			size_t l = strlen(err);
			snprintf(err + l, errlen - l,
			         " (task '%s', module %u: neither its cubin nor its PTX loads)", t->name, m);
			goto fail;
		}
	}
	size_t nkey = 0;
	for (uint32_t i = 0; i < k->nk; i++) {
		const ArtKernel *a = &t->kern[i];
		Kern *kk = &k->k[i];
		kk->k = a;
		if (a->kind == ART_LAUNCH_KERNEL)
			CHECK_CU_GOTO(c, cuModuleGetFunction(&kk->fn, k->mod[a->module], a->name), fail);
		uint64_t blocks = a->kind != ART_LAUNCH_KERNEL ? 1 : a->grid ? a->grid : (a->points + 255) / 256;
		kk->grid = (unsigned)(blocks > (1u << 20) ? (1u << 20) : blocks);
		if (a->kind == ART_LAUNCH_KERNEL)
			persist_smem(c, kk, k->mod[a->module], a->name);
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
	// choice runs its first candidate without one.  Convolution records
	// (only ever candidates) run where cuDNN has a plan for them
	// (rtcu_dnn_prepare); a choice with a candidate that cannot run
	// runs its first one that can, decided here, neither timed nor cached.
	int gemms = 0, candidates = 0, convs = 0;
	for (uint32_t i = 0, end = 0; i < k->nk; i++) {
		if (t->kern[i].kind == ART_LAUNCH_CHOICE)
			end = i + t->kern[i].span;
		else if (t->kern[i].kind == ART_LAUNCH_GEMM)
			*(i <= end && end ? &candidates : &gemms) = 1;
		convs |= t->kern[i].kind == ART_LAUNCH_CONV;
	}
	if (gemms || candidates) {
		if (rtcu_blas_acquire(c, err, errlen))
			k->blas = 1;
		else if (gemms) {
			size_t l = strlen(err);
			snprintf(err + l, errlen - l, " (task '%s' has cuBLAS GEMMs)", t->name);
			goto fail;
		}
	}
	conv_scratch(k);
	if (convs && !rtcu_dnn_prepare(c, k, err, errlen))
		goto fail;
	for (uint32_t ci = 0; ci < k->nchoice; ci++) {
		struct Choice *ch = &k->choice[ci];
		int bad = -1;
		for (uint32_t j = 0; j < ch->n; j++)
			if (!cand_can_run(k, ch, j))
				bad = (int)j;
		for (uint32_t j = 0; bad >= 0 && j < ch->n && ch->pick < 0; j++)
			if (cand_can_run(k, ch, j))
				ch->pick = (int)j;
		if (bad >= 0 && ch->pick < 0) {
			snprintf(err, errlen, "%s (task '%s': choice %u has no candidate that can run)",
			         !k->blas ? "no cuBLAS" : "no cuDNN", t->name, ci);
			goto fail;
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

// Whether candidate j of choice ch can run in this process: each GEMM
// record needs cuBLAS, each convolution record a cuDNN plan.
static int
cand_can_run(const RtCuTask *k, const struct Choice *ch, uint32_t j)
{
	for (uint32_t r = ch->first[j]; r < ch->first[j] + ch->count[j]; r++) {
		const ArtKernel *a = k->k[r].k;
		if ((a->kind == ART_LAUNCH_GEMM && !k->blas) ||
		    (a->kind == ART_LAUNCH_CONV && !k->k[r].dnn))
			return 0;
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
		return rtcu_blas_gemm(c, k, kk, err, errlen);
	if (kk->k->kind == ART_LAUNCH_ASSIGN)
		return host_step(c, k, kk, err, errlen);
	if (kk->k->kind == ART_LAUNCH_CONV)
		return rtcu_dnn_conv(c, k, kk, err, errlen);
	if (kk->k->kind != ART_LAUNCH_KERNEL || !kk->grid)
		return 1; // a choice or sequence record, or no points (a zero-size output)
	CHECK_CU(c, cuLaunchKernel(kk->fn, kk->grid, 1, 1, 256, 1, 1, kk->dsmem, c->stream,
	                           kk->param, NULL));
	return 1;
}

// ---------------------------------------------------------------- choices

// Candidate j of choice ch: its records in order.  A cuDNN candidate
// whose buffers this run are not as aligned as its plan was built for (a
// caller's own device buffer) runs candidate 0 instead (the same result,
// the convolution's own launches: the compiler puts them first).
static int
launch_cand(RtCuda *c, RtCuTask *k, const struct Choice *ch, uint32_t j, char *err,
            size_t errlen)
{
	if (ch->count[j] == 1 && k->k[ch->first[j]].k->kind == ART_LAUNCH_CONV &&
	    !rtcu_dnn_ready(&k->k[ch->first[j]]) && j)
		j = 0;
	for (uint32_t r = ch->first[j]; r < ch->first[j] + ch->count[j]; r++)
		if (!launch_one(c, k, r, err, errlen))
			return 0;
	return 1;
}

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
		// One eager run first: a library's first call may load its kernels
		// or pick them (cuDNN, cuBLAS), work that has no place in a capture.
		if (!launch_cand(c, k, ch, j, err, errlen))
			goto done;
		CHECK_CU_GOTO(c, cuStreamBeginCapture(c->stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL),
		              done);
		int launched = 1;
		char e2[512];
		for (int b = 0; b < CHOICE_BATCH && launched; b++)
			launched = launch_cand(c, k, ch, j, e2, sizeof e2);
		CUresult r = c->d.cuStreamEndCapture(c->stream, &g);
		if (!launched) {
			if (g)
				c->d.cuGraphDestroy(g);
			snprintf(err, errlen, "%s", e2);
			goto done;
		}
		if (r) {
			rtcu_msg(c, r, "cuStreamEndCapture(c->stream, &g)", __func__, __FILE__, __LINE__,
			         err, errlen);
			goto done;
		}
		r = c->d.cuGraphInstantiate(&ex[j], g, 0);
		c->d.cuGraphDestroy(g);
		if (r) {
			ex[j] = NULL;
			rtcu_msg(c, r, "cuGraphInstantiate(&ex[j], g, 0)", __func__, __FILE__, __LINE__,
			         err, errlen);
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
			const ArtKernel *a = &k->t->kern[ch->first[j]];
			if (ch->count[j] > 1) // a sequence: its records and its last one's name
				fprintf(stderr, " %s%u launches to %s", (int)j == ch->pick ? "*" : "",
				        ch->count[j], k->t->kern[ch->first[j] + ch->count[j] - 1].name);
			else
				fprintf(stderr, " %s%s", (int)j == ch->pick ? "*" : "", a->name);
			if (us[j] > 0)
				fprintf(stderr, " %.2f us", us[j]);
		}
		fprintf(stderr, "\n");
	}
	return launch_cand(c, k, ch, (uint32_t)ch->pick, err, errlen);
}

// The task's launches, in order; of each choice only its chosen candidate.
// decide: a choice not decided yet is decided here (an eager run);
// otherwise (a capture, which cannot time) it runs its first candidate
// from then on (only after a first run that failed before deciding it).
int
rtcu_launch_all(RtCuda *c, RtCuTask *k, int decide, char *err, size_t errlen)
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
			if (!launch_cand(c, k, ch, (uint32_t)ch->pick, err, errlen))
				return 0;
		}
		if (prof) // the time is the chosen candidate's (its first record's)
			k->porder[np - 1] = ch->first[ch->pick];
		i += ch->span;
		ci++;
	}
	// The index checks' (min, max) pairs to pinned host memory: the last
	// work of the task, so part of every graph recorded from it.
	if (k->t->ncheck)
		CHECK_CU(c, cuMemcpyDtoHAsync(k->chk_host, k->chk_dev, 16 * (size_t)k->t->ncheck,
		                              c->stream));
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

uint64_t
rtcu_task_check_dev(const RtCuTask *k)
{
	return k ? k->chk_dev : 0;
}

const int64_t *
rtcu_task_check_wait(RtCuda *c, RtCuTask *k, char *err, size_t errlen)
{
	CHECK_CU(c, cuCtxSetCurrent(c->ctx));
	if (k->chk_ev && k->runs)
		CHECK_CU(c, cuEventSynchronize(k->chk_ev));
	return k->chk_host;
}
