// runtime/multi.c -- a context over several GPUs: data-parallel runs through
// NCCL (issue 27, docs/MULTIGPU.md).
//
// The context of devices[0] is the multi context itself (sub-context 0:
// the caller's tensors and results live there); sub-contexts 1 .. S-1 are
// ordinary CUDA contexts of the other GPUs, each with its stream, pool and
// graph tree, driven from the calling thread with its GPU made current
// before each call (rt_multi_current).  A model opened on the context is
// opened on every sub-context (the same artifact).
//
// A run (rt_multi_run) of task T, compiled for the full batch of n rows:
//
//   1. the plan, made at T's first run: shard s gets rows [off_s, off_s +
//      n_s) (rt_multi_shard: sizes n/S or n/S + 1), and the task of T's name
//      whose batched inputs are n_s rows long (a specialisation of the
//      artifact, fadc -D N=n,n_s: docs/ARTIFACT.md); each output of T is
//      either reduced (its shape is the shard task's: the loss, parameter
//      gradients, Hessian-vector products) or per-sample (its batch axis is
//      n_s long in the shard task: gathered in row order);
//   2. the declarations the shard tasks read, handed to every sub-model by
//      copy when their value on sub-model 0 changed (a declaration's
//      generation: bind, bind_file, init, fadc_tensor_write of
//      fadc_model_get's tensor), batched ones as their shard's rows;
//   3. the caller's inputs (tensors of the context, or of a CPU context:
//      host memory): batched ones split into their rows, the others copied
//      to each GPU, through host memory;
//   4. each GPU runs its shard task on its own stream, recorded and
//      replayed in its own graph tree as any task;
//   5. the reduced outputs are combined by one grouped ncclAllReduce, in
//      place, on each GPU's stream after its task (from the plan's second
//      run replayed from CUDA graphs: below): the pre-multiplied
//      sum (ncclRedOpCreatePreMulSum) scales rank s's values by its weight
//      w_s = n_s / n for `loss mean` (rt_multi_weight), so the sum is
//      Σ_s (n_s / n) ∂L_s = ∂L, the guarantee passes/batch.c proves;
//      per-sample outputs are gathered on the host, scaled by w_s, into
//      one tensor on GPU 0.
//
// `loss sum` over several GPUs: L = Σ_s L_s − (S − 1) L_∅, where L_∅ (the
// forward on no rows: a prior beside a likelihood) needs the model at
// batch size 0, which fadc does not compile; such runs are refused with a
// message, and run over one GPU (w = 1).  docs/MULTIGPU.md.
//
// The all-reduce is captured into CUDA graphs of its own, one per GPU
// (every rank's stream capturing while the one group of collectives is
// enqueued, as NCCL requires of one thread driving several GPUs), from a
// plan's second run, keyed by the addresses of the reduced outputs, and
// replayed after the shard task's graph: a run is two graph launches per
// GPU and no NCCL call.  The task's graph is the graph tree's
// (runtime/cugraph.c), which knows nothing of NCCL.  The first run, a
// failed capture and FADC_MULTI_CAPTURE=0 enqueue the group uncaptured,
// one host call per run (docs/MULTIGPU.md).  The executable graphs hold
// NCCL's resources of the communicator, so they are freed before any
// communicator is finalized or aborted.
//
// Failures never hang: communicators are non-blocking (blocking = 0), and
// every wait on them or on the GPUs (init, the enqueue of a group,
// rt_multi_wait before a host read, fadc_context_synchronize, close) polls
// ncclCommGetAsyncError and the streams against a deadline,
// FADC_NCCL_TIMEOUT_S seconds (60 by default); on expiry or an NCCL error
// every communicator is aborted (ncclCommAbort) and the context reports
// FADC_ERR_DEVICE from then on.
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "multi.h"
#include "rtcuda.h"
#include "shard.h"

#define MAXS FADC_MAX_DEVICES

struct RtMulti {
	int S;
	fadc_context *sub[MAXS]; // sub[0]: the context itself
	int gpu[MAXS];
	const RtNccl *nccl;
	ncclComm_t comm[MAXS];
	double timeout; // seconds, FADC_NCCL_TIMEOUT_S
	const char *broken; // why the communicators were aborted, or NULL
	char why[1024];
	int peer; // sharded tasks: 0 not tried, 1 GPU s may write GPU 0's memory, -1 not
	// The captured all-reduces (see the top of the file), any plan's, kept
	// here so that they are freed before the communicators (abort_all, close).
	struct CapGraph {
		const void *plan; // NULL: a free slot
		int n; // addresses in key
		uint64_t key[MAXS * 64]; // the reduced outputs' addresses, rank by rank
		void *exec[MAXS]; // rank s's executable graph
	} cap[8];
	int capnext; // the slot a new capture takes (round robin)
	int capnote; // the line saying why it is not captured was printed
};

#define NCAP 8

// The plan of one task of the full batch (see the top of the file).
typedef struct Plan {
	int ready;
	int64_t n;
	int task[MAXS]; // the shard task on each GPU
	int64_t off[MAXS], rows[MAXS];
	double w[MAXS];
	int nout; // the user's outputs
	int *gaxis; // per output: -1 reduced, else the axis gathered
	fadc_tensor **full; // per gathered output: its full tensor on GPU 0 (NULL: reduced)
	int ncaller;
	int *cin; // caller input c: its index in the task's inputs
	int *caxis; // caller input c: batch axis, or -1
	fadc_tensor **stage; // [s * ncaller + c]: the copy of caller input c on GPU s
	int ndecl; // the shard task's declaration inputs
	int *din; // their indices in the task's inputs
	int *daxis; // batch axis, or -1
	uint64_t *dgen; // [s * ndecl + k]: the source's generation last handed to GPU s
	int ops; // the pre-multiplied sums are made
	int op[MAXS][2]; // rank s's weighted sum, f32 and f64
	uint64_t runs; // data-parallel runs of the plan
	int capture; // 1: capture the all-reduce from the second run; 0: not
} Plan;

struct RtMultiModel {
	fadc_model *sub[MAXS]; // sub[0]: the model itself
	RtBatch batch;
	int has_batch; // 1 declared, 0 none, -1 malformed
	int ntask;
	Plan *plan;
	uint64_t *dgen; // rt_multi_decls: each declaration's generation last handed over
	char *path; // the artifact (runtime/shard.c reads its shard records)
	int plain; // inside a sharded run: fadc_run of sub-model 0 is its own
	struct Sharded *sharded; // per task: its shards (a batched task), or unused
};

// A batched task run as its K = c S shards `T:k/K` (runtime/shard.c), c
// on each GPU, the whole outputs on GPU 0.  Which GPU takes which group of
// c shards is measured (sharded_plan): the candidate assignments take
// turns at the task's first TRIAL * NCAND runs, and the fastest is kept.
#define NCAND 2
#define TRIAL 5
typedef struct Sharded {
	int state; // 0 not planned, 1 planned, -1 not a sharded task
	int K, c; // shards, shards per GPU
	int ncand, cur; // candidate plans (1 once chosen), the one in use
	int runs; // runs so far (the trials: TRIAL of each candidate, taking turns)
	double t[NCAND]; // each candidate's fastest timed trial run, seconds
	int gpu_of[NCAND][ART_MAX_SHARDS]; // shard k's GPU (its place in the device list)
	RtShardPlan *cand[NCAND];
	RtShardPlan *plan; // cand[cur]
	fadc_tensor **owned; // the outputs of a caller that gives none, shared by the candidates
	int nout; // the task's outputs
	int ncaller;
	fadc_tensor **stage; // [s * ncaller + c]: caller input c's copy on GPU s (s >= 1)
} Sharded;

static double
now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void
nap(void)
{
	struct timespec ts = {0, 20000}; // 20 us between polls
	nanosleep(&ts, NULL);
}

// ---------------------------------------------------------------- the sharding arithmetic

void
rt_multi_shard(int64_t n, int S, int s, int64_t *off, int64_t *rows)
{
	int64_t q = n / S, r = n % S;
	*rows = q + (s < r);
	*off = s * q + (s < r ? s : r);
}

double
rt_multi_weight(int loss, int64_t n, int64_t rows, int S, double *w_empty)
{
	if (loss == 2) {
		if (w_empty)
			*w_empty = -(double)(S - 1);
		return 1;
	}
	if (w_empty)
		*w_empty = 0;
	return n ? (double)rows / (double)n : 0;
}

void
rt_multi_rows(void *dst, const void *src, int rank, const int64_t *dim, int axis, int64_t off,
              int64_t rows, size_t esize, int gather, fadc_dtype dtype, double scale)
{
	// Row-major: the tensor is `outer` blocks of dim[axis] * inner elements;
	// the shard takes rows off .. off + rows of each block.
	int64_t outer = 1, inner = 1;
	for (int i = 0; i < axis; i++)
		outer *= dim[i];
	for (int i = axis + 1; i < rank; i++)
		inner *= dim[i];
	size_t full_blk = (size_t)(dim[axis] * inner) * esize, part = (size_t)(rows * inner) * esize;
	size_t at = (size_t)(off * inner) * esize;
	int scaled = scale != 1 && (dtype == FADC_F32 || dtype == FADC_F64);
	for (int64_t o = 0; o < outer; o++) {
		char *d = (char *)dst + (gather ? (size_t)o * full_blk + at : (size_t)o * part);
		const char *s = (const char *)src + (gather ? (size_t)o * part : (size_t)o * full_blk + at);
		if (!scaled)
			memcpy(d, s, part);
		else if (dtype == FADC_F32)
			for (size_t i = 0; i < part / 4; i++)
				((float *)d)[i] = (float)(scale * ((const float *)s)[i]);
		else
			for (size_t i = 0; i < part / 8; i++)
				((double *)d)[i] = scale * ((const double *)s)[i];
	}
}

int
rt_multi_batch_parse(const char *options, RtBatch *b)
{
	memset(b, 0, sizeof *b);
	const char *p = options ? strstr(options, " batch=") : NULL;
	if (!p)
		return 0;
	p += 7;
	size_t len = strcspn(p, " ");
	if (len >= sizeof b->buf)
		return -1;
	memcpy(b->buf, p, len);
	b->buf[len] = 0;
	for (char *tok = b->buf, *next; tok && *tok; tok = next) {
		next = strchr(tok, ',');
		if (next)
			*next++ = 0;
		char *colon = strrchr(tok, ':');
		if (!colon || colon == tok || b->n == 32)
			return -1;
		*colon = 0;
		char *end;
		long a = strtol(colon + 1, &end, 10);
		if (*end || a < 0 || a >= FADC_MAXDIM)
			return -1;
		b->name[b->n] = tok;
		b->axis[b->n++] = (int)a;
	}
	const char *l = strstr(p + len, " loss=");
	if (!l)
		return -1;
	l += 6;
	if (!strncmp(l, "mean", 4) && (!l[4] || l[4] == ' '))
		b->loss = 1;
	else if (!strncmp(l, "sum", 3) && (!l[3] || l[3] == ' '))
		b->loss = 2;
	else
		return -1;
	return b->n ? 1 : -1;
}

static int
batch_axis(const RtBatch *b, const char *name)
{
	for (int i = 0; i < b->n; i++)
		if (!strcmp(b->name[i], name))
			return b->axis[i];
	return -1;
}

// ---------------------------------------------------------------- the internal API

int
rt_multi_ndev(const fadc_context *ctx)
{
	RtMulti *mu = rt_ctx_multi(ctx);
	return mu ? mu->S : 0;
}

fadc_context *
rt_multi_sub(const fadc_context *ctx, int s)
{
	RtMulti *mu = rt_ctx_multi(ctx);
	return mu && s >= 0 && s < mu->S ? mu->sub[s] : NULL;
}

fadc_model *
rt_multi_submodel(const fadc_model *m, int s)
{
	RtMultiModel *mm = rt_model_multi(m);
	RtMulti *mu = rt_ctx_multi(rt_model_ctx(m));
	return mm && mu && s >= 0 && s < mu->S ? mm->sub[s] : NULL;
}

const RtNccl *
rt_multi_nccl(const fadc_context *ctx)
{
	RtMulti *mu = rt_ctx_multi(ctx);
	return mu ? mu->nccl : NULL;
}

ncclComm_t
rt_multi_comm(const fadc_context *ctx, int s)
{
	RtMulti *mu = rt_ctx_multi(ctx);
	return mu && s >= 0 && s < mu->S ? mu->comm[s] : NULL;
}

int
rt_multi_current(fadc_context *ctx, int s)
{
	RtMulti *mu = rt_ctx_multi(ctx);
	if (!mu || s < 0 || s >= mu->S)
		return 0;
	char err[512];
	if (!rtcu_make_current(rt_ctx_cuda(mu->sub[s]), err, sizeof err)) {
		rt_fail(ctx, FADC_ERR_DEVICE, "GPU %d: %s", mu->gpu[s], err);
		return 0;
	}
	return 1;
}

// ---------------------------------------------------------------- NCCL and its deadline

static const char *
nccl_msg(RtMulti *mu, int s, ncclResult_t r)
{
	const char *last = mu->nccl->GetLastError ? mu->nccl->GetLastError(mu->comm[s]) : NULL;
	snprintf(mu->why, sizeof mu->why, "NCCL on GPU %d (rank %d of %d): %s%s%s", mu->gpu[s], s,
	         mu->S, mu->nccl->GetErrorString(r), last && *last ? ": " : "", last ? last : "");
	return mu->why;
}

// Frees the captured all-reduces of plan (every plan's: NULL), on each GPU.
static void
cap_free(fadc_context *ctx, RtMulti *mu, const void *plan)
{
	for (int e = 0; e < NCAP; e++) {
		struct CapGraph *g = &mu->cap[e];
		if (!g->plan || (plan && g->plan != plan))
			continue;
		for (int s = 0; s < mu->S; s++)
			rtcu_graph_free(rt_ctx_cuda(mu->sub[s]), g->exec[s]);
		memset(g->exec, 0, sizeof g->exec);
		g->plan = NULL;
	}
	rt_multi_current(ctx, 0);
}

// Aborts every communicator (a peer stuck or failed): the context runs no
// more collectives, and says why.
static fadc_status
abort_all(fadc_context *ctx, RtMulti *mu, const char *why)
{
	char msg[600];
	snprintf(msg, sizeof msg, "%s", why);
	cap_free(ctx, mu, NULL); // they hold the communicators' resources
	for (int s = 0; s < mu->S; s++)
		if (mu->comm[s]) {
			rt_multi_current(ctx, s);
			mu->nccl->CommAbort(mu->comm[s]);
			mu->comm[s] = NULL;
		}
	snprintf(mu->why, sizeof mu->why, "%s; the NCCL communicators were aborted", msg);
	mu->broken = mu->why;
	rt_multi_current(ctx, 0);
	return rt_fail(ctx, FADC_ERR_DEVICE, "%s", mu->why);
}

// Polls every communicator until none is in progress (a non-blocking init,
// a group's enqueue, a finalize): an error or the deadline aborts them.
static fadc_status
comms_settle(fadc_context *ctx, RtMulti *mu, const char *what)
{
	double end = now_s() + mu->timeout;
	for (;;) {
		int busy = 0;
		for (int s = 0; s < mu->S; s++) {
			ncclResult_t r = NCCL_SUCCESS;
			if (mu->comm[s] && mu->nccl->CommGetAsyncError(mu->comm[s], &r) != NCCL_SUCCESS)
				r = 3; // ncclInternalError
			if (r == NCCL_IN_PROGRESS)
				busy = 1;
			else if (r != NCCL_SUCCESS) {
				char why[600];
				snprintf(why, sizeof why, "%s: %s", what, nccl_msg(mu, s, r));
				return abort_all(ctx, mu, why);
			}
		}
		if (!busy)
			return FADC_OK;
		if (now_s() > end) {
			char why[600];
			snprintf(why, sizeof why,
			         "%s: NCCL did not finish within %.0f s (FADC_NCCL_TIMEOUT_S): a GPU stuck "
			         "or gone",
			         what, mu->timeout);
			return abort_all(ctx, mu, why);
		}
		nap();
	}
}

fadc_status
rt_multi_wait(fadc_context *ctx)
{
	RtMulti *mu = rt_ctx_multi(ctx);
	if (!mu)
		return FADC_OK;
	if (mu->broken)
		return rt_fail(ctx, FADC_ERR_DEVICE, "%s", mu->broken);
	double end = now_s() + mu->timeout;
	int done[MAXS] = {0};
	fadc_status st = FADC_OK;
	for (int left = mu->S; left;) {
		for (int s = 0; s < mu->S; s++) {
			if (done[s])
				continue;
			ncclResult_t r = NCCL_SUCCESS;
			if (mu->comm[s] && mu->nccl->CommGetAsyncError(mu->comm[s], &r) == NCCL_SUCCESS &&
			    r != NCCL_SUCCESS && r != NCCL_IN_PROGRESS)
				return abort_all(ctx, mu, nccl_msg(mu, s, r));
			char err[512];
			if (!rt_multi_current(ctx, s))
				return FADC_ERR_DEVICE;
			int d = rtcu_stream_done(rt_ctx_cuda(mu->sub[s]), err, sizeof err);
			if (d < 0) {
				char why[600];
				snprintf(why, sizeof why, "GPU %d failed: %s", mu->gpu[s], err);
				return abort_all(ctx, mu, why);
			}
			if (d) {
				done[s] = 1;
				left--;
			}
		}
		if (left && now_s() > end) {
			char why[600];
			snprintf(why, sizeof why,
			         "the GPUs' work did not finish within %.0f s (FADC_NCCL_TIMEOUT_S): a GPU "
			         "stuck or gone",
			         mu->timeout);
			return abort_all(ctx, mu, why);
		}
		if (left)
			nap();
	}
	rt_multi_current(ctx, 0);
	return st;
}

fadc_status
rt_multi_sync(fadc_context *ctx)
{
	RtMulti *mu = rt_ctx_multi(ctx);
	fadc_status st = rt_multi_wait(ctx);
	for (int s = 1; !st && s < mu->S; s++) {
		rt_multi_current(ctx, s);
		if ((st = fadc_context_synchronize(mu->sub[s])))
			rt_fail(ctx, st, "GPU %d: %s", mu->gpu[s], fadc_context_error(mu->sub[s]));
	}
	rt_multi_current(ctx, 0);
	return st;
}

// ---------------------------------------------------------------- the context

static double
timeout_s(void)
{
	const char *e = getenv("FADC_NCCL_TIMEOUT_S");
	char *end;
	double t = e && *e ? strtod(e, &end) : 60;
	return e && *e && (*end || !(t > 0)) ? 60 : t;
}

// A failed open: what was made is undone here (the caller then destroys
// the context of GPU 0 as an ordinary one).
static fadc_status
open_fail(fadc_context *c, RtMulti *mu, fadc_status st)
{
	for (int s = 0; s < mu->S; s++)
		if (mu->comm[s] && mu->nccl) {
			rt_multi_current(c, s);
			mu->nccl->CommAbort(mu->comm[s]);
		}
	for (int s = 1; s < mu->S; s++)
		fadc_context_destroy(mu->sub[s]);
	rt_ctx_set_multi(c, NULL);
	free(mu);
	char err[256];
	rtcu_make_current(rt_ctx_cuda(c), err, sizeof err);
	return st;
}

fadc_status
rt_multi_open(fadc_context *c, const fadc_device *devices, int ndevices, char *err, size_t errlen)
{
	RtMulti *mu = calloc(1, sizeof *mu);
	if (!mu) {
		snprintf(err, errlen, "out of memory");
		return FADC_ERR_NOMEM;
	}
	rt_ctx_set_multi(c, mu);
	mu->S = ndevices;
	mu->sub[0] = c;
	mu->timeout = timeout_s();
	for (int s = 0; s < ndevices; s++)
		mu->gpu[s] = devices[s].index;
	char msg[1024];
	mu->nccl = rt_nccl_load(msg, sizeof msg);
	if (!mu->nccl) {
		snprintf(err, errlen, "%s", msg);
		return open_fail(c, mu, FADC_ERR_DEVICE);
	}
	for (int s = 1; s < ndevices; s++) {
		fadc_context_options so = {.device = {FADC_DEVICE_CUDA, mu->gpu[s]}, .num_threads = 1,
		                           .seed = 0};
		fadc_status st = fadc_context_create(&so, &mu->sub[s]);
		if (st) {
			snprintf(msg, sizeof msg, "%s", fadc_context_error(NULL));
			snprintf(err, errlen, "a context over %d GPUs: devices[%d] (GPU %d) is not available: %s",
			         ndevices, s, mu->gpu[s], msg);
			return open_fail(c, mu, FADC_ERR_DEVICE);
		}
	}
	// One communicator per GPU, made non-blocking (NCCL 2.14's config:
	// calls may return NCCL_IN_PROGRESS, polled below against the
	// deadline), all ranks in one group from this thread, each with its
	// GPU current (NCCL takes the rank's device from it).
	ncclUniqueId id;
	ncclResult_t r = mu->nccl->GetUniqueId(&id);
	if (r != NCCL_SUCCESS) {
		snprintf(err, errlen, "ncclGetUniqueId: %s", mu->nccl->GetErrorString(r));
		return open_fail(c, mu, FADC_ERR_DEVICE);
	}
	ncclConfig_t cfg = {sizeof cfg, 0xcafebeef, 21400, 0, NCCL_CONFIG_UNDEF_INT,
	                    NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NULL};
	mu->nccl->GroupStart();
	for (int s = 0; s < ndevices; s++) {
		if (!rt_multi_current(c, s)) {
			mu->nccl->GroupEnd();
			snprintf(err, errlen, "%s", fadc_context_error(c));
			return open_fail(c, mu, FADC_ERR_DEVICE);
		}
		ncclConfig_t cs = cfg;
		r = mu->nccl->CommInitRankConfig(&mu->comm[s], ndevices, id, s, &cs);
		if (r != NCCL_SUCCESS && r != NCCL_IN_PROGRESS) {
			mu->comm[s] = NULL; // not made: nothing to abort
			break;
		}
	}
	ncclResult_t g = mu->nccl->GroupEnd();
	if (r == NCCL_SUCCESS || r == NCCL_IN_PROGRESS)
		r = g;
	if (r != NCCL_SUCCESS && r != NCCL_IN_PROGRESS) {
		snprintf(msg, sizeof msg, "%s", mu->nccl->GetErrorString(r));
		const char *last = mu->nccl->GetLastError(NULL);
		snprintf(err, errlen, "NCCL: making the communicators of %d GPUs failed: %s%s%s",
		         ndevices, msg, last && *last ? ": " : "", last ? last : "");
		return open_fail(c, mu, FADC_ERR_DEVICE);
	}
	if (comms_settle(c, mu, "making the NCCL communicators")) {
		snprintf(err, errlen, "%s", fadc_context_error(c));
		return open_fail(c, mu, FADC_ERR_DEVICE);
	}
	rt_multi_current(c, 0);
	return FADC_OK;
}

void
rt_multi_close(fadc_context *c)
{
	RtMulti *mu = rt_ctx_multi(c);
	if (!mu)
		return;
	cap_free(c, mu, NULL);
	if (!mu->broken && mu->nccl) {
		int any = 0;
		for (int s = 0; s < mu->S; s++)
			any |= mu->comm[s] != NULL;
		if (any && !rt_multi_wait(c)) {
			for (int s = 0; s < mu->S; s++)
				if (mu->comm[s]) {
					rt_multi_current(c, s);
					mu->nccl->CommFinalize(mu->comm[s]);
				}
			if (!comms_settle(c, mu, "closing the NCCL communicators"))
				for (int s = 0; s < mu->S; s++)
					if (mu->comm[s]) {
						rt_multi_current(c, s);
						mu->nccl->CommDestroy(mu->comm[s]);
						mu->comm[s] = NULL;
					}
		}
		for (int s = 0; s < mu->S; s++)
			if (mu->comm[s]) {
				mu->nccl->CommAbort(mu->comm[s]);
				mu->comm[s] = NULL;
			}
	}
	for (int s = 1; s < mu->S; s++)
		fadc_context_destroy(mu->sub[s]); // rtcu_close makes its GPU current
	rt_ctx_set_multi(c, NULL);
	free(mu);
	char err[256];
	rtcu_make_current(rt_ctx_cuda(c), err, sizeof err);
}

// ---------------------------------------------------------------- models

fadc_status
rt_multi_model_open(fadc_model *m, const char *path, unsigned flags)
{
	fadc_context *ctx = rt_model_ctx(m);
	RtMulti *mu = rt_ctx_multi(ctx);
	if (flags & FADC_OPEN_DESCRIBE)
		return FADC_OK; // nothing runs: sub-model 0 describes it
	RtMultiModel *mm = calloc(1, sizeof *mm);
	const ArtDesc *d = rt_model_desc(m);
	if (!mm || !(mm->plan = calloc(d->ntask + 1, sizeof *mm->plan))) {
		free(mm);
		return rt_fail(ctx, FADC_ERR_NOMEM, "fadc_model_open: out of memory");
	}
	mm->ntask = (int)d->ntask;
	mm->sub[0] = m;
	if (!(mm->sharded = calloc(d->ntask + 1, sizeof *mm->sharded)) || !(mm->path = strdup(path))) {
		free(mm->sharded);
		free(mm->plan);
		free(mm);
		return rt_fail(ctx, FADC_ERR_NOMEM, "fadc_model_open: out of memory");
	}
	mm->has_batch = rt_multi_batch_parse(d->options, &mm->batch);
	rt_model_set_multi(m, mm);
	for (int s = 1; s < mu->S; s++) {
		if (!rt_multi_current(ctx, s))
			return FADC_ERR_DEVICE;
		fadc_status st = fadc_model_open(mu->sub[s], path, flags, &mm->sub[s]);
		if (st) {
			rt_fail(ctx, st, "GPU %d: %s", mu->gpu[s], fadc_context_error(mu->sub[s]));
			rt_multi_current(ctx, 0);
			return st;
		}
	}
	rt_multi_current(ctx, 0);
	return FADC_OK;
}

static void
plan_free(fadc_context *ctx, RtMulti *mu, Plan *p)
{
	if (!p->ready)
		return;
	cap_free(ctx, mu, p); // before the reduction ops they use
	for (int s = 0; s < mu->S; s++) {
		rt_multi_current(ctx, s);
		for (int c = 0; p->stage && c < p->ncaller; c++)
			fadc_tensor_release(p->stage[s * p->ncaller + c]);
		for (int k = 0; p->ops && k < 2; k++)
			if (p->op[s][k] >= 0 && mu->comm[s])
				mu->nccl->RedOpDestroy(p->op[s][k], mu->comm[s]);
	}
	rt_multi_current(ctx, 0);
	for (int k = 0; p->full && k < p->nout; k++)
		fadc_tensor_release(p->full[k]);
	free(p->gaxis);
	free(p->full);
	free(p->cin);
	free(p->caxis);
	free(p->stage);
	free(p->din);
	free(p->daxis);
	free(p->dgen);
	memset(p, 0, sizeof *p);
}

static void
sharded_free(fadc_context *ctx, RtMulti *mu, Sharded *sh)
{
	for (int s = 0; sh->stage && s < mu->S; s++) {
		rt_multi_current(ctx, s);
		for (int c = 0; c < sh->ncaller; c++)
			fadc_tensor_release(sh->stage[s * sh->ncaller + c]);
	}
	rt_multi_current(ctx, 0);
	for (int i = 0; sh->owned && i < sh->nout; i++)
		fadc_tensor_release(sh->owned[i]);
	for (int i = 0; i < NCAND; i++)
		rt_shard_plan_free(sh->cand[i]);
	free(sh->owned);
	free(sh->stage);
	memset(sh, 0, sizeof *sh);
}

void
rt_multi_model_close(fadc_model *m)
{
	fadc_context *ctx = rt_model_ctx(m);
	RtMulti *mu = rt_ctx_multi(ctx);
	RtMultiModel *mm = rt_model_multi(m);
	if (!mm)
		return;
	if (!mu->broken)
		rt_multi_wait(ctx);
	for (int t = 0; t < mm->ntask; t++) {
		plan_free(ctx, mu, &mm->plan[t]);
		sharded_free(ctx, mu, &mm->sharded[t]);
	}
	for (int s = 1; s < mu->S; s++) {
		rt_multi_current(ctx, s);
		fadc_model_close(mm->sub[s]);
	}
	rt_multi_current(ctx, 0);
	free(mm->plan);
	free(mm->sharded);
	free(mm->path);
	free(mm->dgen);
	free(mm);
	rt_model_set_multi(m, NULL);
}

// ---------------------------------------------------------------- the plan

static int
same_dims(const ArtTensor *a, const ArtTensor *b)
{
	if (a->dtype != b->dtype || a->rank != b->rank)
		return 0;
	for (int i = 0; i < a->rank; i++)
		if (a->dim[i] != b->dim[i])
			return 0;
	return 1;
}

// Input u of a shard task for input a of T, a shard of `rows` of T's n
// rows: the same name, dtype and rank, and the same dims but on the batch
// axis.  A batched name's axis is the declared one (`declared`); any other
// input may differ on one axis, from n to rows (the v.<param> of a batched
// param, ...), which makes it batched on that axis.  Returns the input's
// batch axis, -1 for one that is the same (not batched), -2 when u does
// not fit.
static int
input_fit(const ArtTensor *a, const ArtTensor *u, int declared, int64_t n, int64_t rows)
{
	if (strcmp(a->name, u->name) || a->dtype != u->dtype || a->rank != u->rank)
		return -2;
	int diff = -1, ndiff = 0;
	for (int i = 0; i < a->rank; i++)
		if (a->dim[i] != u->dim[i])
			diff = i, ndiff++;
	if (declared >= 0)
		return declared < a->rank && a->dim[declared] == n && u->dim[declared] == rows &&
		               ndiff <= 1 && (ndiff == 0 ? rows == n : diff == declared)
		           ? declared
		           : -2;
	if (!ndiff)
		return -1;
	return ndiff == 1 && a->dim[diff] == n && u->dim[diff] == rows ? diff : -2;
}

// The task of T's name whose every input fits T's for a shard of `rows`
// (input_fit): T itself when rows is n; -1 when the artifact has none.
static int
shard_task(const ArtDesc *d, int t, const RtBatch *b, int64_t n, int64_t rows)
{
	const ArtTask *T = &d->task[t];
	for (uint32_t j0 = 0; j0 < d->ntask; j0++) {
		uint32_t j = j0 == 0 ? (uint32_t)t : j0 == (uint32_t)t ? 0 : j0; // T first
		const ArtTask *U = &d->task[j];
		if (U->kind != ART_TASK || strcmp(U->name, T->name) || U->nin != T->nin ||
		    U->nout != T->nout)
			continue;
		int fits = 1;
		for (uint32_t k = 0; fits && k < T->nin; k++)
			fits = input_fit(&T->in[k], &U->in[k], batch_axis(b, T->in[k].name), n, rows) > -2;
		if (fits)
			return (int)j;
	}
	return -1;
}

// "-D SEQ=256,128": the name of T's specialisation whose value is n, or a
// placeholder, for the message of a missing shard size.
static void
define_hint(const ArtTask *T, int64_t n, const int64_t *sizes, int nsizes, char *buf, size_t len)
{
	char name[64] = "<the batch size>";
	const char *sp = T->spec_name ? T->spec_name : "";
	char want[32];
	snprintf(want, sizeof want, "=%lld", (long long)n);
	for (const char *p = sp; *p;) {
		size_t l = strcspn(p, ",");
		const char *eq = memchr(p, '=', l);
		if (eq && (size_t)(p + l - eq) == strlen(want) && !strncmp(eq, want, strlen(want)) &&
		    (size_t)(eq - p) < sizeof name) {
			memcpy(name, p, (size_t)(eq - p));
			name[eq - p] = 0;
		}
		p += l + (p[l] == ',');
	}
	size_t k = (size_t)snprintf(buf, len, "-D %s=%lld", name, (long long)n);
	for (int i = 0; i < nsizes && k < len; i++)
		k += (size_t)snprintf(buf + k, len - k, ",%lld", (long long)sizes[i]);
}

fadc_status
rt_multi_plan(const ArtDesc *d, int t, const RtBatch *b, int S, RtShape *ps, int *in_axis,
              int *out_axis, char *err, size_t errlen)
{
#define PLAN_FAIL(st, ...) return (snprintf(err, errlen, __VA_ARGS__), (st))
	if (t < 0 || (uint32_t)t >= d->ntask || d->task[t].kind != ART_TASK)
		PLAN_FAIL(FADC_ERR_ARG, "task %d is no task of the model's", t);
	if (S < 1 || S > FADC_MAX_DEVICES)
		PLAN_FAIL(FADC_ERR_ARG, "%d GPUs", S);
	const ArtTask *T = &d->task[t];
	if (b->loss == 2 && S > 1)
		PLAN_FAIL(FADC_ERR_STATE,
		          "model '%s' declares `loss sum`: over several GPUs its batch-independent "
		          "part L_0 (the forward on no rows) would be counted once per GPU, and this "
		          "runtime cannot compute it apart (docs/MULTIGPU.md); declare the loss a mean, "
		          "or run on one GPU",
		          d->model);
	int64_t n = -1;
	for (uint32_t k = 0; k < T->nin; k++) {
		int ax = batch_axis(b, T->in[k].name);
		if (ax < 0)
			continue;
		if (ax >= T->in[k].rank)
			PLAN_FAIL(FADC_ERR_FORMAT, "'%s': batch axis %d of a rank-%d input", T->in[k].name,
			          ax, T->in[k].rank);
		if (n >= 0 && T->in[k].dim[ax] != n)
			PLAN_FAIL(FADC_ERR_SHAPE,
			          "task '%s': the batched inputs disagree on the batch size (%lld and %lld)",
			          T->name, (long long)n, (long long)T->in[k].dim[ax]);
		n = T->in[k].dim[ax];
	}
	if (n < 0)
		PLAN_FAIL(FADC_ERR_STATE, "task '%s' reads none of the batched inputs", T->name);
	if (n < S)
		PLAN_FAIL(FADC_ERR_SHAPE, "task '%s': a batch of %lld rows over %d GPUs (fewer rows "
		          "than GPUs)", T->name, (long long)n, S);
	ps->n = n;
	ps->S = S;
	int64_t missing = -1;
	for (int s = 0; s < S; s++) {
		rt_multi_shard(n, S, s, &ps->off[s], &ps->rows[s]);
		ps->w[s] = rt_multi_weight(b->loss, n, ps->rows[s], S, NULL);
		ps->task[s] = shard_task(d, t, b, n, ps->rows[s]);
		if (ps->task[s] < 0 && missing < 0)
			missing = ps->rows[s];
	}
	if (missing >= 0) {
		int64_t all[2] = {ps->rows[0], ps->rows[S - 1]};
		char hint[200];
		define_hint(T, n, all, all[0] == all[1] ? 1 : 2, hint, sizeof hint);
		PLAN_FAIL(FADC_ERR_SHAPE,
		          "model '%s' has no specialisation of task '%s' at a batch of %lld rows (the "
		          "batch of %lld over %d GPUs): compile it with %s",
		          d->model, T->name, (long long)missing, (long long)n, S, hint);
	}
	// Each input's batch axis: declared, or where a shard task's differs.
	for (uint32_t k = 0; k < T->nin; k++) {
		in_axis[k] = batch_axis(b, T->in[k].name);
		for (int s = 0; s < S && in_axis[k] < 0; s++)
			in_axis[k] = input_fit(&T->in[k], &d->task[ps->task[s]].in[k], -1, n, ps->rows[s]);
	}
	// Outputs: reduced where every shard task has T's shape, gathered on
	// the one axis where T has n rows and shard s's task n_s.
	for (uint32_t k = 0; k < T->nout - T->ncheck; k++) {
		const ArtTensor *o = &T->out[k];
		int ax = -1, ok = 1;
		for (int s = 0; ok && s < S; s++) {
			const ArtTensor *u = &d->task[ps->task[s]].out[k];
			if (ps->rows[s] == n)
				continue;
			if (same_dims(o, u))
				ok = ax < 0 ? (ax = -2, 1) : ax == -2;
			else {
				int diff = -1, ndiff = 0;
				for (int i = 0; i < o->rank && o->rank == u->rank; i++)
					if (o->dim[i] != u->dim[i])
						diff = i, ndiff++;
				ok = o->dtype == u->dtype && ndiff == 1 && o->dim[diff] == n &&
				     u->dim[diff] == ps->rows[s] && (ax < 0 || ax == diff);
				ax = diff;
			}
		}
		if (!ok)
			PLAN_FAIL(FADC_ERR_SHAPE, "task '%s': output '%s' is neither the same in every "
			          "shard (a reduction) nor split on its batch axis", T->name, o->name);
		out_axis[k] = ax >= 0 ? ax : -1;
		if (out_axis[k] < 0 && o->dtype != ART_F32 && o->dtype != ART_F64)
			PLAN_FAIL(FADC_ERR_SHAPE, "task '%s': output '%s' is a %s, which an all-reduce "
			          "cannot weight", T->name, o->name, fadc_dtype_name((fadc_dtype)o->dtype));
	}
	return FADC_OK;
#undef PLAN_FAIL
}

// One line, once per context, saying why the all-reduce is enqueued
// uncaptured.
static void
cap_note(RtMulti *mu, const char *why)
{
	if (mu->capnote)
		return;
	mu->capnote = 1;
	fprintf(stderr, "fadc: note: the all-reduce of the gradients is not captured in CUDA graphs "
	                "(%s); it is enqueued at every run\n",
	        why);
}

// Enqueues the weighted all-reduce of the reduced outputs, in place, every
// rank in one group (addr[s * nred + j]: rank s's j-th reduced output):
// NCCL's status (NCCL_IN_PROGRESS while a non-blocking communicator works).
static ncclResult_t
reduce_enqueue(fadc_context *ctx, RtMulti *mu, Plan *p, const uint64_t *addr, const int *f64,
               const size_t *count, int nred)
{
	mu->nccl->GroupStart();
	ncclResult_t r = NCCL_SUCCESS;
	for (int s = 0; s < mu->S && (r == NCCL_SUCCESS || r == NCCL_IN_PROGRESS); s++) {
		rt_multi_current(ctx, s);
		void *stream = NULL;
		fadc_context_stream(mu->sub[s], &stream);
		for (int j = 0; j < nred && (r == NCCL_SUCCESS || r == NCCL_IN_PROGRESS); j++) {
			void *a = (void *)(uintptr_t)addr[s * nred + j];
			r = mu->nccl->AllReduce(a, a, count[j], f64[j] ? NCCL_FLOAT64 : NCCL_FLOAT32,
			                        p->op[s][f64[j]], mu->comm[s], stream);
		}
	}
	ncclResult_t g = mu->nccl->GroupEnd();
	if (r == NCCL_SUCCESS || r == NCCL_IN_PROGRESS)
		r = g;
	return r;
}

// The all-reduce as captured graphs, one per GPU: replayed when a capture
// for these addresses exists, else captured (every rank's stream capturing
// while the group is enqueued: NCCL 2.9 and later record collectives into
// graphs; all ranks must capture, and every rank's graph is launched) and
// launched.  *done 0 when the capture failed (the caller enqueues the group
// uncaptured, and this plan does from now on, one line saying why); a
// status for an NCCL error or a failed launch (the communicators aborted).
static fadc_status
reduce_captured(fadc_context *ctx, RtMulti *mu, Plan *p, const uint64_t *addr, const int *f64,
                const size_t *count, int nred, int *done)
{
	*done = 0;
	int n = mu->S * nred;
	struct CapGraph *g = NULL;
	for (int e = 0; e < NCAP && !g; e++)
		if (mu->cap[e].plan == p && mu->cap[e].n == n &&
		    !memcmp(mu->cap[e].key, addr, (size_t)n * sizeof *addr))
			g = &mu->cap[e];
	char err[512], why[700];
	if (!g) {
		int began = 0;
		for (; began < mu->S; began++)
			if (!rtcu_capture_begin(rt_ctx_cuda(mu->sub[began]), err, sizeof err))
				break;
		if (began < mu->S) {
			snprintf(why, sizeof why, "GPU %d: %s", mu->gpu[began], err);
			for (int s = 0; s < began; s++)
				rtcu_capture_end(rt_ctx_cuda(mu->sub[s]), 0, err, sizeof err);
			rt_multi_current(ctx, 0);
			p->capture = 0;
			cap_note(mu, why);
			return FADC_OK;
		}
		ncclResult_t r = reduce_enqueue(ctx, mu, p, addr, f64, count, nred);
		fadc_status st = FADC_OK;
		if (r != NCCL_SUCCESS && r != NCCL_IN_PROGRESS)
			snprintf(why, sizeof why, "%s", nccl_msg(mu, 0, r));
		else if (r == NCCL_IN_PROGRESS)
			st = comms_settle(ctx, mu, "the capture of the all-reduce of the gradients");
		// Every capture ends before any graph is instantiated (CUDA refuses
		// to instantiate while a stream of the thread is capturing).
		void *gr[MAXS] = {0}, *ex[MAXS] = {0};
		int ok = st == FADC_OK && (r == NCCL_SUCCESS || r == NCCL_IN_PROGRESS);
		for (int s = 0; s < mu->S; s++) {
			int keep = ok;
			gr[s] = rtcu_capture_end(rt_ctx_cuda(mu->sub[s]), keep, err, sizeof err);
			if (keep && !gr[s]) {
				ok = 0;
				snprintf(why, sizeof why, "GPU %d: %s", mu->gpu[s], err);
			}
		}
		for (int s = 0; s < mu->S; s++) // each graph consumed (freed below if !ok)
			if (gr[s] &&
			    !(ex[s] = rtcu_graph_instantiate(rt_ctx_cuda(mu->sub[s]), gr[s], err, sizeof err)) &&
			    ok) {
				ok = 0;
				snprintf(why, sizeof why, "GPU %d: %s", mu->gpu[s], err);
			}
		rt_multi_current(ctx, 0);
		if (st)
			return st; // comms_settle aborted them
		if (r != NCCL_SUCCESS && r != NCCL_IN_PROGRESS)
			return abort_all(ctx, mu, why);
		if (!ok) {
			for (int s = 0; s < mu->S; s++)
				rtcu_graph_free(rt_ctx_cuda(mu->sub[s]), ex[s]);
			rt_multi_current(ctx, 0);
			p->capture = 0;
			cap_note(mu, why);
			return FADC_OK;
		}
		g = &mu->cap[mu->capnext];
		mu->capnext = (mu->capnext + 1) % NCAP;
		if (g->plan) // the oldest capture makes room (freed when its replays end)
			for (int s = 0; s < mu->S; s++)
				rtcu_graph_free(rt_ctx_cuda(mu->sub[s]), g->exec[s]);
		g->plan = p;
		g->n = n;
		memcpy(g->key, addr, (size_t)n * sizeof *addr);
		memcpy(g->exec, ex, sizeof ex);
	}
	for (int s = 0; s < mu->S; s++)
		if (!rtcu_graph_launch(rt_ctx_cuda(mu->sub[s]), g->exec[s], err, sizeof err)) {
			// The ranks before s wait for a peer that will not come.
			snprintf(why, sizeof why, "GPU %d: the all-reduce's graph: %s", mu->gpu[s], err);
			return abort_all(ctx, mu, why);
		}
	rt_multi_current(ctx, 0);
	*done = 1;
	return FADC_OK;
}

static fadc_status
plan_make(fadc_model *m, RtMultiModel *mm, RtMulti *mu, int t, Plan *p)
{
	fadc_context *ctx = rt_model_ctx(m);
	const ArtDesc *d = rt_model_desc(m);
	const ArtTask *T = &d->task[t];
	const RtBatch *b = &mm->batch;
	if (mm->has_batch <= 0)
		return rt_fail(ctx, FADC_ERR_STATE,
		               mm->has_batch < 0
		                   ? "model '%s': the artifact's batch declaration is malformed"
		                   : "model '%s' declares no batch: a run over several GPUs splits the "
		                     "batch that `batch NAME: AXIS, ..., loss mean|sum` declares "
		                     "(docs/IR.md, \"The batch\")",
		               d->model);
	RtShape ps;
	int in_axis[T->nin + 1], out_axis[T->nout + 1];
	char msg[1024];
	fadc_status st = rt_multi_plan(d, t, b, mu->S, &ps, in_axis, out_axis, msg, sizeof msg);
	if (st)
		return rt_fail(ctx, st, "%s", msg);
	p->n = ps.n;
	for (int s = 0; s < mu->S; s++) {
		p->task[s] = ps.task[s];
		p->off[s] = ps.off[s];
		p->rows[s] = ps.rows[s];
		p->w[s] = ps.w[s];
	}
	uint32_t nout = T->nout - T->ncheck;
	p->nout = (int)nout;
	p->gaxis = calloc(nout + 1, sizeof *p->gaxis);
	p->full = calloc(nout + 1, sizeof *p->full);
	p->ncaller = 0;
	for (uint32_t k = 0; k < T->nin; k++)
		p->ncaller += T->in[k].role == ART_ROLE_ARG;
	p->cin = calloc((size_t)p->ncaller + 1, sizeof *p->cin);
	p->caxis = calloc((size_t)p->ncaller + 1, sizeof *p->caxis);
	p->stage = calloc((size_t)(mu->S * p->ncaller) + 1, sizeof *p->stage);
	p->ndecl = (int)T->nin - p->ncaller;
	p->din = calloc((size_t)p->ndecl + 1, sizeof *p->din);
	p->daxis = calloc((size_t)p->ndecl + 1, sizeof *p->daxis);
	p->dgen = calloc((size_t)(mu->S * p->ndecl) + 1, sizeof *p->dgen);
	p->ready = 1; // from here plan_free frees what there is
	if (!p->gaxis || !p->full || !p->cin || !p->caxis || !p->stage || !p->din || !p->daxis ||
	    !p->dgen)
		return rt_fail(ctx, FADC_ERR_NOMEM, "out of memory");
	for (uint32_t k = 0, c = 0, e = 0; k < T->nin; k++)
		if (T->in[k].role == ART_ROLE_ARG) {
			p->cin[c] = (int)k;
			p->caxis[c++] = in_axis[k];
		} else {
			p->din[e] = (int)k;
			p->daxis[e++] = in_axis[k];
		}
	for (int i = 0; i < mu->S * p->ndecl; i++)
		p->dgen[i] = UINT64_MAX; // never handed over
	// Per-sample outputs: their full tensor on GPU 0.
	for (uint32_t k = 0; k < nout; k++) {
		const ArtTensor *o = &T->out[k];
		p->gaxis[k] = out_axis[k];
		if (p->gaxis[k] >= 0 &&
		    (st = fadc_tensor_create(ctx, (fadc_dtype)o->dtype, o->rank, o->dim, &p->full[k])))
			return st;
	}
	// The copies of the caller's inputs on each GPU: shard-sized for the
	// batched ones.  GPU 0 reads a tensor of the context in place.
	for (int s = 0; s < mu->S; s++) {
		if (!rt_multi_current(ctx, s))
			return FADC_ERR_DEVICE;
		for (int c = 0; c < p->ncaller; c++) {
			const ArtTensor *a = &d->task[p->task[s]].in[p->cin[c]];
			st = fadc_tensor_create(mu->sub[s], (fadc_dtype)a->dtype, a->rank, a->dim,
			                        &p->stage[s * p->ncaller + c]);
			if (st) {
				rt_fail(ctx, st, "GPU %d: %s", mu->gpu[s], fadc_context_error(mu->sub[s]));
				rt_multi_current(ctx, 0);
				return st;
			}
		}
	}
	// The weighted sums: rank s scales its values by w_s before the sum.
	for (int s = 0; s < mu->S; s++)
		p->op[s][0] = p->op[s][1] = -1;
	p->ops = 1;
	// The all-reduce in CUDA graphs of its own (the top of the file), unless
	// FADC_MULTI_CAPTURE=0 or FADC_DISABLE_CUDA_GRAPHS=1.
	const char *ce = getenv("FADC_MULTI_CAPTURE"), *ge = getenv("FADC_DISABLE_CUDA_GRAPHS");
	p->capture = !(ce && !strcmp(ce, "0")) && !(ge && !strcmp(ge, "1"));
	if (!p->capture)
		cap_note(mu, ce && !strcmp(ce, "0") ? "FADC_MULTI_CAPTURE=0" : "FADC_DISABLE_CUDA_GRAPHS=1");
	for (int s = 0; s < mu->S; s++) {
		rt_multi_current(ctx, s);
		float wf = (float)p->w[s];
		double wd = p->w[s];
		ncclResult_t r = mu->nccl->RedOpCreatePreMulSum(&p->op[s][0], &wf, NCCL_FLOAT32,
		                                                NCCL_SCALAR_HOST_IMMEDIATE, mu->comm[s]);
		if (r == NCCL_SUCCESS || r == NCCL_IN_PROGRESS)
			r = mu->nccl->RedOpCreatePreMulSum(&p->op[s][1], &wd, NCCL_FLOAT64,
			                                   NCCL_SCALAR_HOST_IMMEDIATE, mu->comm[s]);
		if (r != NCCL_SUCCESS && r != NCCL_IN_PROGRESS) {
			rt_multi_current(ctx, 0);
			return rt_fail(ctx, FADC_ERR_DEVICE, "ncclRedOpCreatePreMulSum: %s",
			               nccl_msg(mu, s, r));
		}
	}
	rt_multi_current(ctx, 0);
	return comms_settle(ctx, mu, "making the weighted sums");
}

// ---------------------------------------------------------------- the run

// The host staging buffer of a copy through host memory: a whole value
// (bytes) and one shard's part after it, plus one byte so that an empty
// value still gets a buffer.  Grown, never shrunk; 0 when out of memory
// (*buf left as it was).
static int
stage_grow(void **buf, size_t *cap, size_t bytes)
{
	if (*cap >= 2 * bytes + 1)
		return 1;
	void *nb = realloc(*buf, 2 * bytes + 1);
	if (!nb)
		return 0;
	*buf = nb;
	*cap = 2 * bytes + 1;
	return 1;
}

// Hands the declarations shard task s reads to GPU s where their value on
// sub-model 0 changed since (batched ones: their rows).  Through host
// memory, as fadc_model_bind copies (rt_model_bind_index: that
// declaration, bound, so that the sub-model's initializers leave it):
// binding is off the run path.
static fadc_status
decls_hand(fadc_model *m, RtMultiModel *mm, RtMulti *mu, int t, Plan *p, void **buf,
           size_t *cap)
{
	fadc_context *ctx = rt_model_ctx(m);
	const ArtDesc *d = rt_model_desc(m);
	const ArtTask *T = &d->task[t];
	for (int e = 0; e < p->ndecl; e++) {
		const ArtTensor *a = &T->in[p->din[e]];
		fadc_tensor *src = rt_model_decl_value(m, a->decl);
		uint64_t gen = fadc_tensor_generation(src);
		int fetched = 0;
		for (int s = 0; s < mu->S; s++) {
			const ArtTensor *u = &d->task[p->task[s]].in[p->din[e]];
			if ((s == 0 && u->decl == a->decl) || p->dgen[s * p->ndecl + e] == gen)
				continue;
			size_t bytes = fadc_tensor_bytes(src), esize = fadc_dtype_size((fadc_dtype)a->dtype);
			if (!stage_grow(buf, cap, bytes))
				return rt_fail(ctx, FADC_ERR_NOMEM, "out of memory");
			char *full = *buf, *part = full + bytes;
			fadc_status st;
			if (!fetched && (st = fadc_tensor_read(src, full, bytes)))
				return st;
			fetched = 1;
			const void *val = full;
			if (p->daxis[e] >= 0) {
				rt_multi_rows(part, full, a->rank, a->dim, p->daxis[e], p->off[s], p->rows[s],
				              esize, 0, FADC_F32, 1);
				val = part;
			}
			if (!rt_multi_current(ctx, s))
				return FADC_ERR_DEVICE;
			st = rt_model_bind_index(mm->sub[s], u->decl, val);
			rt_multi_current(ctx, 0);
			if (st)
				return rt_fail(ctx, st, "GPU %d: binding '%s': %s", mu->gpu[s], a->name,
				               fadc_context_error(mu->sub[s]));
		}
		for (int s = 0; s < mu->S; s++)
			p->dgen[s * p->ndecl + e] = gen;
	}
	return FADC_OK;
}

fadc_status
rt_multi_decls(fadc_model *m)
{
	fadc_context *ctx = rt_model_ctx(m);
	RtMulti *mu = rt_ctx_multi(ctx);
	RtMultiModel *mm = rt_model_multi(m);
	if (!mu || !mm)
		return FADC_OK;
	const ArtDesc *d = rt_model_desc(m);
	fadc_status st;
	if (!rt_model_initialized(m) && (st = fadc_model_init(m, rt_ctx_seed(ctx))))
		return st;
	if (!mm->dgen) {
		mm->dgen = malloc(sizeof *mm->dgen * (d->ndecl + 1));
		if (!mm->dgen)
			return rt_fail(ctx, FADC_ERR_NOMEM, "out of memory");
		for (uint32_t i = 0; i < d->ndecl; i++)
			mm->dgen[i] = UINT64_MAX;
	}
	void *buf = NULL;
	size_t cap = 0;
	st = FADC_OK;
	for (uint32_t i = 0; i < d->ndecl && !st; i++) {
		fadc_tensor *v = rt_model_decl_value(m, (int)i);
		uint64_t gen = fadc_tensor_generation(v);
		if (gen == mm->dgen[i] || mu->S < 2)
			continue;
		size_t bytes = fadc_tensor_bytes(v);
		if (cap < bytes + 1) {
			void *nb = realloc(buf, bytes + 1);
			if (!nb) {
				st = rt_fail(ctx, FADC_ERR_NOMEM, "out of memory");
				break;
			}
			buf = nb;
			cap = bytes + 1;
		}
		rt_multi_current(ctx, 0);
		if ((st = fadc_tensor_read(v, buf, bytes)))
			break;
		for (int s = 1; s < mu->S && !st; s++) {
			if (!rt_multi_current(ctx, s)) {
				st = FADC_ERR_DEVICE;
				break;
			}
			if ((st = rt_model_bind_index(mm->sub[s], (int)i, buf)))
				rt_fail(ctx, st, "GPU %d: %s", mu->gpu[s], fadc_context_error(mu->sub[s]));
		}
		mm->dgen[i] = gen;
	}
	free(buf);
	rt_multi_current(ctx, 0);
	return st;
}

// ---------------------------------------------------------------- sharded batched tasks
//
// A batched task T (the Hessians, jacfwd; jacobian and jacrev where the
// artifact has their shards: of a non-scalar forward) has no batch to split:
// its basis vectors are split instead, as the artifact's tasks T:k/S (fadc
// --shards S, docs/TASKS.md "Shards"), shard k on GPU k, through
// runtime/shard.c, the whole outputs on GPU 0.  No collective: the GPUs
// share the parameters only (rt_multi_decls hands them over).

static int
batched_name(const char *n)
{
	return !strcmp(n, "hessian") || !strcmp(n, "hessian_fwdrev") || !strcmp(n, "hessian_revrev") ||
	       !strcmp(n, "jacfwd");
}

// Whether the artifact has shards of T (any count).
static int
has_shards(const ArtDesc *d, const char *name)
{
	for (uint32_t i = 0; i < d->ntask; i++)
		if (d->task[i].shard && !strcmp(d->task[i].shard->of, name))
			return 1;
	return 0;
}

// The shard count T runs as over S GPUs: the largest K = c S whose shards
// of T (specialisation spec) the artifact has, c of them per GPU; S when it
// has none (rt_shard_plan_create then names the --shards to compile).
// More shards per GPU hide more of the copies across NVLink (each GPU
// other than GPU 0 copies shard i's slices while computing shard i + 1:
// runtime/shard.h) at the price of each shard's fixed part (the unbatched
// forward and gradient every shard repeats: ~0.1 ms on ppl_robust_reg's
// Hessian): two per GPU measured best there (docs/PERFORMANCE.md
// "Overlapped peer copies"), and fadc-bench --gpus compiles 2 S.
static int
shard_count(const ArtDesc *d, const char *name, int spec, int S)
{
	int K = S;
	for (uint32_t i = 0; i < d->ntask; i++) {
		const ArtShard *r = d->task[i].shard;
		if (r && !r->k && d->task[i].spec == spec && !strcmp(r->of, name) && r->n % S == 0 &&
		    (int)r->n > K && r->n <= ART_MAX_SHARDS)
			K = (int)r->n;
	}
	return K;
}

// Peer access from each GPU's context to GPU 0's (cuCtxEnablePeerAccess,
// through the driver the runtime already loaded), so that the shards'
// kernels write their slices straight into GPU 0's outputs over NVLink
// (RtShardOptions.peer_direct).  A GPU listed twice shares GPU 0's
// (primary) context: nothing to enable.  1 enabled, -1 unavailable (the
// slices then travel through the host: a one-line note on stderr).
static int
peer_enable(fadc_context *ctx, RtMulti *mu)
{
	typedef int (*cur_t)(void **);
	typedef int (*peer_t)(void *, unsigned);
	void *dl = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
	cur_t get = dl ? (cur_t)dlsym(dl, "cuCtxGetCurrent") : NULL;
	peer_t en = dl ? (peer_t)dlsym(dl, "cuCtxEnablePeerAccess") : NULL;
	void *c0 = NULL;
	int r = -1, ok = 1, bad = -1;
	if (!get || !en || !rt_multi_current(ctx, 0) || get(&c0) || !c0)
		ok = 0;
	for (int s = 1; ok && s < mu->S; s++) {
		if (mu->gpu[s] == mu->gpu[0])
			continue;
		if (!rt_multi_current(ctx, s) || ((r = en(c0, 0)) && r != 704)) { // 704: already enabled
			ok = 0;
			bad = s;
		}
	}
	rt_multi_current(ctx, 0);
	if (dl)
		dlclose(dl);
	if (!ok)
		fprintf(stderr, "fadc: GPU %d cannot write GPU %d's memory (peer access: CUDA error %d): "
		        "the shards' slices go through the host\n", bad >= 0 ? mu->gpu[bad] : -1,
		        mu->gpu[0], r);
	return ok ? 1 : -1;
}

// Plans task t as shards when it is a batched task (sh->state 1), or says
// it is not one (-1).
static fadc_status
sharded_plan(fadc_model *m, RtMultiModel *mm, RtMulti *mu, int t, Sharded *sh)
{
	fadc_context *ctx = rt_model_ctx(m);
	const ArtDesc *d = rt_model_desc(m);
	const ArtTask *T = &d->task[t];
	if (mu->S == 1 && batched_name(T->name)) { // one GPU: the task whole, no shards needed
		sh->state = 2;
		return FADC_OK;
	}
	if (T->kind != ART_TASK || T->shard ||
	    !(batched_name(T->name) || ((!strcmp(T->name, "jacobian") || !strcmp(T->name, "jacrev")) &&
	                                has_shards(d, T->name)))) {
		sh->state = -1;
		return FADC_OK;
	}
	if (!mu->peer)
		mu->peer = peer_enable(ctx, mu);
	sh->K = shard_count(d, T->name, T->spec > 0 ? T->spec : 0, mu->S);
	sh->c = sh->K / mu->S;
	// The other GPUs' slices: with several shards per GPU, computed in
	// their own memory and copied by their copy engines behind their next
	// shard (peer_copy); with one, there is nothing to copy behind, and the
	// shard's kernels write GPU 0's memory across NVLink (peer_direct; the
	// writes then overlap the kernel's own reads).  FADC_SHARD_PEER=copy or
	// direct chooses either (the measurements of docs/PERFORMANCE.md
	// "Overlapped peer copies").  Without peer access the driver stages
	// the copies; peer_direct then goes through the host.
	const char *how = getenv("FADC_SHARD_PEER");
	int direct = how && *how ? !strcmp(how, "direct") : sh->c == 1;
	if (how && *how && strcmp(how, "direct") && strcmp(how, "copy"))
		return rt_fail(ctx, FADC_ERR_ARG, "FADC_SHARD_PEER='%s': 'copy' or 'direct'", how);
	RtShardOptions o = {.peer_direct = mu->peer > 0 && direct, .peer_copy = !direct,
	                    .spec = T->spec > 0 ? T->spec : 0};
	// The candidate assignments of the groups of c shards to GPUs: group
	// s on GPU s, and group s on GPU s + 1 (mod S: GPU 0 takes the last
	// group).  The shards are even in basis rows, not in work (a
	// Hessian's rows of different params cost differently: ppl_robust_reg's
	// beta rows), and GPU 0 copies nothing, so the better one depends on
	// the model: sharded_run times both.  FADC_SHARD_MAP instead lists
	// each shard's GPU (its place in the device list: "1,1,0,0"): one
	// candidate, for measurements.
	const char *map = getenv("FADC_SHARD_MAP");
	sh->ncand = map && *map ? 1 : NCAND;
	for (int i = 0; i < sh->ncand; i++)
		for (int k = 0; k < sh->K; k++)
			sh->gpu_of[i][k] = (k / sh->c + i) % mu->S;
	if (map && *map) {
		const char *q = map;
		for (int k = 0; k < sh->K; k++) {
			char *end;
			long g = strtol(q, &end, 10);
			if (end == q || g < 0 || g >= mu->S || (*end && *end != ',') || (!*end && k + 1 < sh->K) ||
			    (*end && k + 1 == sh->K))
				return rt_fail(ctx, FADC_ERR_ARG, "FADC_SHARD_MAP='%s': %d GPU places (0 .. %d), "
				               "one for each of the %d shards, comma-separated", map, sh->K,
				               mu->S - 1, sh->K);
			sh->gpu_of[0][k] = (int)g;
			q = end + (*end == ',');
		}
	}
	for (int i = 0; i < sh->ncand; i++) {
		fadc_context *ctxs[ART_MAX_SHARDS];
		fadc_model *subs[ART_MAX_SHARDS];
		for (int k = 0; k < sh->K; k++) {
			ctxs[k] = mu->sub[sh->gpu_of[i][k]];
			subs[k] = mm->sub[sh->gpu_of[i][k]];
		}
		char err[1024];
		fadc_status st = rt_shard_plan_create(mm->path, T->name, ctxs, subs, sh->K, ctx, &o,
		                                      &sh->cand[i], err, sizeof err);
		rt_multi_current(ctx, 0);
		if (st)
			return rt_fail(ctx, st, "task '%s' over %d GPUs runs as its %d shards: %s", T->name,
			               mu->S, sh->K, err);
	}
	sh->plan = sh->cand[0];
	sh->nout = rt_shard_plan_noutputs(sh->plan);
	if (!(sh->owned = calloc((size_t)sh->nout + 1, sizeof *sh->owned)))
		return rt_fail(ctx, FADC_ERR_NOMEM, "out of memory");
	sh->ncaller = rt_shard_plan_ncaller(sh->plan);
	fadc_status st;
	if (sh->ncaller && !(sh->stage = calloc((size_t)(mu->S * sh->ncaller), sizeof *sh->stage)))
		return rt_fail(ctx, FADC_ERR_NOMEM, "out of memory");
	fadc_task_info ti;
	if ((st = fadc_task_info_get(m, t, &ti)))
		return st;
	for (int s = 0; s < mu->S; s++)
		for (int c = 0; c < sh->ncaller; c++) {
			fadc_tensor_desc td; // the caller's inputs come last
			if ((st = fadc_task_input(m, t, ti.ninputs - ti.ncaller + c, &td)) ||
			    (st = fadc_tensor_create(mu->sub[s], td.dtype, td.rank, td.dim,
			                             &sh->stage[s * sh->ncaller + c]))) {
				rt_multi_current(ctx, 0);
				return rt_fail(ctx, st, "GPU %d: %s", mu->gpu[s], fadc_context_error(mu->sub[s]));
			}
		}
	rt_multi_current(ctx, 0);
	sh->state = 1;
	return FADC_OK;
}

// One run of a planned sharded task: the caller's inputs (tensors of the
// context or host tensors) copied whole to every GPU through host memory,
// the declarations handed over, the shards queued, the slices assembled.
static fadc_status
sharded_run(fadc_model *m, RtMultiModel *mm, RtMulti *mu, int t, Sharded *sh,
            fadc_tensor *const *inputs, int ninputs, fadc_tensor **outputs, int noutputs)
{
	fadc_context *ctx = rt_model_ctx(m);
	const char *name = rt_model_desc(m)->task[t].name;
	if (ninputs != sh->ncaller || (ninputs && !inputs))
		return rt_fail(ctx, FADC_ERR_ARG, "task '%s' takes %d inputs from the caller, %d given", name,
		               sh->ncaller, ninputs);
	if (noutputs != rt_shard_plan_noutputs(sh->plan) || (noutputs && !outputs))
		return rt_fail(ctx, FADC_ERR_ARG, "task '%s' has %d outputs, %d given", name,
		               rt_shard_plan_noutputs(sh->plan), noutputs);
	fadc_status st = rt_multi_decls(m);
	if (st)
		return st;
	fadc_tensor *in[MAXS][64];
	if (ninputs > 64)
		return rt_fail(ctx, FADC_ERR_ARG, "more than 64 caller inputs over several GPUs");
	void *buf = NULL;
	for (int c = 0; c < ninputs; c++) {
		fadc_tensor *x = inputs[c];
		if (!x) {
			free(buf);
			return rt_fail(ctx, FADC_ERR_ARG, "task '%s': input %d is NULL", name, c);
		}
		// A tensor of the context is GPU 0's own input; a host tensor is
		// copied like the others'.
		fadc_device dv = fadc_tensor_device(x);
		int home = dv.kind == FADC_DEVICE_CUDA && dv.index == mu->gpu[0];
		if (dv.kind != FADC_DEVICE_CPU && !home) {
			free(buf);
			return rt_fail(ctx, FADC_ERR_DEVICE, "task '%s': input %d is on another device (give "
			               "tensors of the context, or host tensors)", name, c);
		}
		in[0][c] = x;
		size_t bytes = fadc_tensor_bytes(x);
		void *nb = realloc(buf, bytes + 1);
		if (!nb) {
			free(buf);
			return rt_fail(ctx, FADC_ERR_NOMEM, "out of memory");
		}
		buf = nb;
		if ((st = fadc_tensor_read(x, buf, bytes))) {
			free(buf);
			return st;
		}
		for (int s = home; s < mu->S; s++) {
			in[s][c] = sh->stage[s * sh->ncaller + c];
			if (fadc_tensor_bytes(in[s][c]) != bytes) {
				free(buf);
				return rt_fail(ctx, FADC_ERR_SHAPE, "task '%s': input %d is not of its shape", name, c);
			}
			if ((st = fadc_tensor_write(in[s][c], buf, bytes))) {
				free(buf);
				rt_multi_current(ctx, 0);
				return rt_fail(ctx, st, "GPU %d: %s", mu->gpu[s], fadc_context_error(mu->sub[s]));
			}
		}
	}
	free(buf);
	// The candidate of this run: during the trials the candidates take
	// turns, TRIAL runs each; the first two of each (eager, then recording
	// its shards' graphs) are not timed, the others are, to the end of GPU
	// 0's stream, and a candidate's time is its fastest (taking turns and
	// the minimum keep one slow run, a caller's work still queued, from
	// deciding); then the fastest candidate.
	int trial = sh->ncand > 1 && sh->runs < TRIAL * sh->ncand;
	int i = trial ? sh->runs % sh->ncand : sh->cur;
	fadc_tensor *const *rows[ART_MAX_SHARDS];
	for (int k = 0; k < sh->K; k++)
		rows[k] = in[sh->gpu_of[i][k]];
	// Outputs the caller leaves to the task: the same tensors whichever
	// candidate runs (a plan's own would be freed with it).
	for (int j = 0; j < noutputs; j++)
		if (!outputs[j]) {
			fadc_tensor_desc od;
			if (!sh->owned[j] &&
			    ((st = rt_shard_plan_output(sh->plan, j, &od)) ||
			     (st = fadc_tensor_create(ctx, od.dtype, od.rank, od.dim, &sh->owned[j]))))
				return st;
			outputs[j] = sh->owned[j];
		}
	double t0 = now_s();
	mm->plain = 1; // shard 0 runs on this very model: its own run, not this one
	st = rt_shard_run(sh->cand[i], ninputs ? rows : NULL, outputs, noutputs);
	mm->plain = 0;
	rt_multi_current(ctx, 0);
	if (st)
		return rt_fail(ctx, st, "task '%s' over %d GPUs: %s", name, mu->S,
		               rt_shard_error(sh->cand[i]));
	if (trial && sh->runs >= 2 * sh->ncand) {
		if ((st = fadc_context_synchronize(ctx)))
			return st;
		double dt = now_s() - t0;
		if (!(sh->t[i] > 0) || dt < sh->t[i])
			sh->t[i] = dt;
	}
	if (trial && ++sh->runs == TRIAL * sh->ncand) { // keep the fastest, free the others
		for (int c = 1; c < sh->ncand; c++)
			if (sh->t[c] < sh->t[sh->cur])
				sh->cur = c;
		for (int c = 0; c < sh->ncand; c++)
			if (c != sh->cur) {
				rt_shard_plan_free(sh->cand[c]);
				sh->cand[c] = NULL;
			}
		if (getenv("FADC_SHARD_VERBOSE"))
			fprintf(stderr, "fadc: task '%s' over %d GPUs: assignment %d of %d (%.3f ms; %.3f ms)\n",
			        name, mu->S, sh->cur, sh->ncand, 1e3 * sh->t[0], 1e3 * sh->t[1]);
		sh->plan = sh->cand[sh->cur];
	}
	return FADC_OK;
}

fadc_status
rt_multi_run(fadc_model *m, int task, fadc_tensor *const *inputs, int ninputs,
             fadc_tensor **outputs, int noutputs)
{
	fadc_context *ctx = rt_model_ctx(m);
	RtMulti *mu = rt_ctx_multi(ctx);
	RtMultiModel *mm = rt_model_multi(m);
	const ArtDesc *d = rt_model_desc(m);
	if (task < 0 || task >= mm->ntask)
		return rt_run_plain(m, task, inputs, ninputs, outputs, noutputs); // its message
	if (mm->plain)
		return rt_run_plain(m, task, inputs, ninputs, outputs, noutputs);
	fadc_status st;
	Sharded *sh = &mm->sharded[task];
	if (!sh->state && (st = sharded_plan(m, mm, mu, task, sh))) {
		sharded_free(ctx, mu, sh);
		return st;
	}
	if (sh->state == 2)
		return rt_run_plain(m, task, inputs, ninputs, outputs, noutputs);
	if (sh->state > 0)
		return sharded_run(m, mm, mu, task, sh, inputs, ninputs, outputs, noutputs);
	if (mu->broken)
		return rt_fail(ctx, FADC_ERR_DEVICE, "%s", mu->broken);
	Plan *p = &mm->plan[task];
	if (!p->ready && (st = plan_make(m, mm, mu, task, p))) {
		plan_free(ctx, mu, p);
		return st;
	}
	const ArtTask *T = &d->task[task];
	if (ninputs != p->ncaller || (ninputs && !inputs))
		return rt_fail(ctx, FADC_ERR_ARG, "task '%s' takes %d inputs from the caller, %d given",
		               T->name, p->ncaller, ninputs);
	if (noutputs != p->nout || (noutputs && !outputs))
		return rt_fail(ctx, FADC_ERR_ARG, "task '%s' has %d outputs, %d given", T->name, p->nout,
		               noutputs);
	fadc_device home = {FADC_DEVICE_CUDA, mu->gpu[0]};
	for (int c = 0; c < ninputs; c++) {
		const ArtTensor *a = &T->in[p->cin[c]];
		fadc_tensor *x = inputs[c];
		if (!x)
			return rt_fail(ctx, FADC_ERR_ARG, "task '%s': input %d is NULL", T->name, c);
		fadc_device dv = fadc_tensor_device(x);
		int same = fadc_tensor_dtype(x) == (fadc_dtype)a->dtype && fadc_tensor_rank(x) == a->rank;
		for (int i = 0; same && i < a->rank; i++)
			same = fadc_tensor_dims(x)[i] == a->dim[i];
		if (!same)
			return rt_fail(ctx, FADC_ERR_SHAPE, "task '%s': input '%s' is not of the full "
			               "batch's type", T->name, a->name);
		if (dv.kind != FADC_DEVICE_CPU && (dv.kind != home.kind || dv.index != home.index))
			return rt_fail(ctx, FADC_ERR_DEVICE, "task '%s': input '%s' is on another device "
			               "(give tensors of the context, or host tensors)", T->name, a->name);
	}
	if (!rt_model_initialized(m) && (st = fadc_model_init(m, rt_ctx_seed(ctx))))
		return st;
	void *buf = NULL;
	size_t cap = 0;
	if ((st = decls_hand(m, mm, mu, task, p, &buf, &cap)))
		goto out;
	// The caller's inputs: the full tensor through host memory, each GPU
	// given its rows (batched) or the whole (the rest).  A tensor of the
	// context is read in place by GPU 0 when it is not batched.
	fadc_tensor *in[MAXS][64];
	if (ninputs > 64) {
		st = rt_fail(ctx, FADC_ERR_ARG, "more than 64 caller inputs over several GPUs");
		goto out;
	}
	for (int c = 0; c < ninputs; c++) {
		const ArtTensor *a = &T->in[p->cin[c]];
		fadc_tensor *x = inputs[c];
		size_t bytes = fadc_tensor_bytes(x), esize = fadc_dtype_size((fadc_dtype)a->dtype);
		int host = fadc_tensor_device(x).kind == FADC_DEVICE_CPU;
		int fetched = 0;
		const char *full = host ? fadc_tensor_data(x) : NULL;
		for (int s = 0; s < mu->S; s++) {
			fadc_tensor *stg = p->stage[s * p->ncaller + c];
			if (s == 0 && !host && p->caxis[c] < 0) {
				in[0][c] = x;
				continue;
			}
			in[s][c] = stg;
			if (!stage_grow(&buf, &cap, bytes)) {
				st = rt_fail(ctx, FADC_ERR_NOMEM, "out of memory");
				goto out;
			}
			if (!host && !fetched) {
				rt_multi_current(ctx, 0);
				if ((st = fadc_tensor_read(x, buf, bytes)))
					goto out;
				full = buf;
				fetched = 1;
			}
			const char *val = full;
			if (p->caxis[c] >= 0) {
				rt_multi_rows((char *)buf + bytes, full, a->rank, a->dim, p->caxis[c], p->off[s],
				              p->rows[s], esize, 0, FADC_F32, 1);
				val = (char *)buf + bytes;
			}
			if (!rt_multi_current(ctx, s)) {
				st = FADC_ERR_DEVICE;
				goto out;
			}
			if ((st = fadc_tensor_write(stg, val, fadc_tensor_bytes(stg)))) {
				st = rt_fail(ctx, st, "GPU %d: %s", mu->gpu[s], fadc_context_error(mu->sub[s]));
				goto out;
			}
		}
	}
	// Each GPU runs its shard (asynchronously, on its stream).  GPU 0
	// writes the reduced outputs the caller gave in place.
	fadc_tensor *out[MAXS][64];
	if (p->nout > 64) {
		st = rt_fail(ctx, FADC_ERR_ARG, "more than 64 outputs over several GPUs");
		goto out;
	}
	for (int s = 0; s < mu->S; s++) {
		for (int k = 0; k < p->nout; k++)
			out[s][k] = s == 0 && p->gaxis[k] < 0 ? outputs[k] : NULL;
		if (!rt_multi_current(ctx, s)) {
			st = FADC_ERR_DEVICE;
			goto out;
		}
		// Every GPU draws with the context's run seed (fadc_context_set_seed):
		// a sampler that is not per sample draws the same on each.
		if (s)
			fadc_context_set_seed(mu->sub[s], rt_ctx_seed(ctx));
		st = s == 0 ? rt_run_plain(m, p->task[0], in[0], ninputs, out[0], p->nout)
		            : fadc_run(mm->sub[s], p->task[s], in[s], ninputs, out[s], p->nout);
		if (st) {
			if (s)
				rt_fail(ctx, st, "GPU %d: %s", mu->gpu[s], fadc_context_error(mu->sub[s]));
			goto out;
		}
	}
	// The weighted all-reduce of the reduced outputs, in place, one group:
	// captured in graphs from the plan's second run (the first sets up
	// NCCL's connections uncaptured), else enqueued.
	p->runs++;
	int nred = 0, f64[64];
	size_t count[64];
	uint64_t addr[MAXS * 64];
	for (int k = 0; k < p->nout; k++) {
		if (p->gaxis[k] >= 0)
			continue;
		f64[nred] = fadc_tensor_dtype(out[0][k]) == FADC_F64;
		count[nred] = (size_t)fadc_tensor_numel(out[0][k]);
		for (int s = 0; s < mu->S; s++)
			if ((st = fadc_tensor_address(out[s][k], &addr[s * p->nout + nred])))
				goto out;
		nred++;
	}
	for (int s = 0; s < mu->S; s++) // rank by rank, nred apart
		memmove(&addr[s * nred], &addr[s * p->nout], (size_t)nred * sizeof *addr);
	if (nred) {
		int done = 0;
		if (p->capture && p->runs > 1 &&
		    (st = reduce_captured(ctx, mu, p, addr, f64, count, nred, &done)))
			goto out;
		if (!done) {
			ncclResult_t r = reduce_enqueue(ctx, mu, p, addr, f64, count, nred);
			if (r != NCCL_SUCCESS && r != NCCL_IN_PROGRESS) {
				st = abort_all(ctx, mu, nccl_msg(mu, 0, r));
				goto out;
			}
			if ((st = comms_settle(ctx, mu, "the all-reduce of the gradients")))
				goto out;
		}
	}
	// Per-sample outputs: each GPU's rows, scaled by its weight, into one
	// tensor on GPU 0 (through host memory, after every GPU is done).
	for (int k = 0; k < p->nout; k++) {
		if (p->gaxis[k] < 0) {
			outputs[k] = out[0][k];
			continue;
		}
		if ((st = rt_multi_wait(ctx)))
			goto out;
		fadc_tensor *dst = outputs[k] ? outputs[k] : p->full[k];
		const ArtTensor *o = &T->out[k];
		int same = fadc_tensor_dtype(dst) == (fadc_dtype)o->dtype && fadc_tensor_rank(dst) == o->rank;
		for (int i = 0; same && i < o->rank; i++)
			same = fadc_tensor_dims(dst)[i] == o->dim[i];
		if (!same) {
			st = rt_fail(ctx, FADC_ERR_SHAPE, "task '%s': output '%s' given of another type",
			             T->name, o->name);
			goto out;
		}
		size_t bytes = fadc_tensor_bytes(p->full[k]), esize = fadc_dtype_size((fadc_dtype)o->dtype);
		if (!stage_grow(&buf, &cap, bytes)) {
			st = rt_fail(ctx, FADC_ERR_NOMEM, "out of memory");
			goto out;
		}
		for (int s = 0; s < mu->S; s++) {
			rt_multi_current(ctx, s);
			if ((st = fadc_tensor_read(out[s][k], (char *)buf + bytes,
			                           fadc_tensor_bytes(out[s][k])))) {
				rt_fail(ctx, st, "GPU %d: %s", mu->gpu[s], fadc_context_error(mu->sub[s]));
				goto out;
			}
			rt_multi_rows(buf, (char *)buf + bytes, o->rank, o->dim, p->gaxis[k], p->off[s],
			              p->rows[s], esize, 1, (fadc_dtype)o->dtype, p->w[s]);
		}
		rt_multi_current(ctx, 0);
		if ((st = fadc_tensor_write(dst, buf, bytes)))
			goto out;
		outputs[k] = dst;
	}
out:
	free(buf);
	rt_multi_current(ctx, 0);
	return st;
}
