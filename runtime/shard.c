// runtime/shard.c -- a batched task run as K shards (one per context) and
// its whole outputs assembled on one context.  runtime/shard.h is the
// interface and says how slices travel; docs/TASKS.md ("Shards") what a
// shard computes.
//
// The plan is made once: the artifact's shard records (format 12, read
// again from the file: the runtime's loaded descriptor is private to
// rt.c, and this file uses fadc.h alone) give, for shard k's output j, the
// whole output it is a slice of and where: that output viewed row-major as
// [outer, mid, inner], the slice is [:, off .. off + cnt, :], i.e. outer
// runs of cnt * inner elements, run o at element (o mid + off) inner.  The
// plan checks that the shards' slices of each whole output tile its mid
// axis exactly, in shard order, so that every element is written once.
//
// A run then gives each shard either views of the destination outputs
// (fadc_tensor_wrap_device at the slice's address: one contiguous run, a
// context that can address it) as its outputs, which its task writes in
// place, or nothing (model-owned outputs, copied afterwards run by run
// through the host).
#include <dlfcn.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "artifact.h"
#include "shard.h"

typedef struct Whole {
	char *name;
	fadc_dtype dtype;
	int rank;
	int64_t dim[FADC_MAXDIM];
	int64_t outer, mid, inner;
	int64_t covered; // while planning: rows of mid the shards so far cover
} Whole;

typedef struct Slice {
	uint32_t whole;
	int64_t off, cnt; // rows of the whole output's mid axis
	int rank; // the shard task's output: its own shape
	int64_t dim[FADC_MAXDIM];
	size_t bytes;
} Slice;

// The driver's few calls the copy engine path needs (RtShardOptions.
// peer_copy), found in the libcuda.so.1 that the runtime's CUDA contexts
// already loaded (RTLD_NOLOAD: this file loads nothing).  CUDA handles are
// opaque pointers here, CUdeviceptr a uint64_t.
typedef struct Drv {
	void *dl;
	int (*ctx_get)(void **);
	int (*ctx_set)(void *);
	int (*stream_ctx)(void *, void **);
	int (*stream_create)(void **, unsigned);
	int (*stream_destroy)(void *);
	int (*stream_sync)(void *);
	int (*memcpy_async)(uint64_t, uint64_t, size_t, void *);
} Drv;

typedef struct Shard {
	fadc_context *ctx;
	void *copy_stream; // peer_copy: the stream of ctx's GPU its slices' copies run on (shared
	                   // by the shards of one context; created at the first run)
	fadc_model *model;
	int task; // its index in model
	int cpu; // ctx is a CPU context
	uint32_t nslice;
	Slice *slice;
	fadc_tensor **out; // fadc_run's outputs (views or model-owned)
	uint8_t *view; // out[j] is a view of the destination
	int first; // the first shard of its context (owns copy_stream)
} Shard;

struct RtShardPlan {
	int n;
	Shard *sh;
	fadc_context *dest;
	fadc_device dest_dev;
	int ncaller;
	RtShardOptions o;
	int *order; // the shards in the order they are queued (below)
	Drv drv; // peer_copy's driver calls
	uint32_t nwhole;
	Whole *whole;
	fadc_tensor **owned; // outputs the plan made on dest (NULL until asked for)
	fadc_tensor **dst; // the current run's destination outputs
	uint8_t *host; // staging for copies through the host
	size_t hostlen;
	size_t direct, staged, engine; // the last run's bytes
	char err[1024];
};

static fadc_status fail(RtShardPlan *p, fadc_status s, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static fadc_status
fail(RtShardPlan *p, fadc_status s, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(p->err, sizeof p->err, fmt, ap);
	va_end(ap);
	return s;
}

// The device of a context, as its tensors report it.
static fadc_status
context_device(fadc_context *ctx, fadc_device *dev)
{
	fadc_tensor *t;
	int64_t one = 1;
	fadc_status s = fadc_tensor_create(ctx, FADC_F32, 1, &one, &t);
	if (s)
		return s;
	*dev = fadc_tensor_device(t);
	fadc_tensor_release(t);
	return FADC_OK;
}

static int64_t
numel(int rank, const int64_t *dim)
{
	int64_t n = 1;
	for (int i = 0; i < rank; i++)
		n *= dim[i];
	return n;
}

// Task `name` of specialisation spec in the descriptor, or -1.
static int
desc_task(const ArtDesc *d, const char *name, int spec)
{
	for (uint32_t i = 0; i < d->ntask; i++)
		if (d->task[i].kind == ART_TASK && d->task[i].spec == spec && !strcmp(d->task[i].name, name))
			return (int)i;
	return -1;
}

// The shard counts the artifact has for task `of` ("2, 4"), for messages.
static void
shard_counts(const ArtDesc *d, const char *of, char *buf, size_t len)
{
	size_t k = 0;
	buf[0] = 0;
	for (uint32_t i = 0; i < d->ntask; i++) {
		const ArtShard *s = d->task[i].shard;
		if (!s || s->k || strcmp(s->of, of) || k >= len)
			continue;
		k += (size_t)snprintf(buf + k, len - k, "%s%u", k ? ", " : "", s->n);
	}
}

// Model m's task of name and specialisation, checked against the
// descriptor's entry t: m was opened from the artifact whose descriptor
// is d.  -1 with a message.
static int
model_task(RtShardPlan *p, int k, const ArtDesc *d, const ArtTask *t, const char *path)
{
	fadc_model *m = p->sh[k].model;
	char hash[17];
	snprintf(hash, sizeof hash, "%016" PRIx64, d->source_hash);
	const char *mh = fadc_model_info(m, "source_hash");
	if (!mh || strcmp(mh, hash) || fadc_model_task_count(m) != (int)d->ntask) {
		fail(p, FADC_ERR_ARG, "model %d was not opened from %s (another source or task list)", k,
		     path);
		return -1;
	}
	for (int i = 0; i < fadc_model_task_count(m); i++) {
		fadc_task_info info;
		if (fadc_task_info_get(m, i, &info) || strcmp(info.name, t->name) ||
		    info.spec_index != t->spec)
			continue;
		int good = info.noutputs == (int)(t->nout - t->ncheck);
		for (int j = 0; good && j < info.noutputs; j++) {
			fadc_tensor_desc o;
			good = !fadc_task_output(m, i, j, &o) && !strcmp(o.name, t->out[j].name) &&
			       (int)o.dtype == t->out[j].dtype && o.rank == t->out[j].rank &&
			       !memcmp(o.dim, t->out[j].dim, sizeof(int64_t) * (size_t)o.rank);
		}
		if (!good)
			break;
		if (k == 0)
			p->ncaller = info.ncaller;
		else if (info.ncaller != p->ncaller)
			break;
		return i;
	}
	fail(p, FADC_ERR_ARG, "model %d was not opened from %s: its task '%s' differs", k, path,
	     t->name);
	return -1;
}

// Shard k's slices from its record; the whole outputs they belong to
// (found by name, or appended in the order met: the whole task's order,
// since shard k's blocks come before shard k + 1's), checked to continue
// where shard k - 1 stopped.
static fadc_status
plan_slices(RtShardPlan *p, int k, const ArtTask *t)
{
	const ArtShard *r = t->shard;
	Shard *s = &p->sh[k];
	s->nslice = r->nout;
	s->slice = calloc(r->nout + 1, sizeof *s->slice);
	s->out = calloc(r->nout + 1, sizeof *s->out);
	s->view = calloc(r->nout + 1, 1);
	if (!s->slice || !s->out || !s->view)
		return fail(p, FADC_ERR_NOMEM, "out of memory");
	for (uint32_t j = 0; j < r->nout; j++) {
		const ArtShardOut *x = &r->out[j];
		const ArtTensor *o = &t->out[j];
		uint32_t w = 0;
		while (w < p->nwhole && strcmp(p->whole[w].name, o->name))
			w++;
		if (w == p->nwhole) {
			Whole *nw = realloc(p->whole, (p->nwhole + 1) * sizeof *nw);
			if (!nw)
				return fail(p, FADC_ERR_NOMEM, "out of memory");
			p->whole = nw;
			Whole *h = &p->whole[p->nwhole++];
			memset(h, 0, sizeof *h);
			if (!(h->name = strdup(o->name)))
				return fail(p, FADC_ERR_NOMEM, "out of memory");
			h->dtype = (fadc_dtype)o->dtype;
			h->rank = x->rank;
			memcpy(h->dim, x->dim, sizeof(int64_t) * x->rank);
			h->outer = x->outer, h->mid = x->mid, h->inner = x->inner;
		}
		Whole *h = &p->whole[w];
		if ((int)h->dtype != o->dtype || h->rank != x->rank ||
		    memcmp(h->dim, x->dim, sizeof(int64_t) * x->rank) || h->outer != x->outer ||
		    h->mid != x->mid || h->inner != x->inner || x->off != h->covered)
			return fail(p, FADC_ERR_FORMAT, "the shards of '%s' do not tile its output '%s' (shard "
			            "%d's slice at row %" PRId64 ", expected %" PRId64 ")",
			            r->of, o->name, k, x->off, h->covered);
		h->covered += x->cnt;
		Slice *sl = &s->slice[j];
		sl->whole = w;
		sl->off = x->off, sl->cnt = x->cnt;
		sl->rank = o->rank;
		memcpy(sl->dim, o->dim, sizeof(int64_t) * o->rank);
		sl->bytes = (size_t)numel(o->rank, o->dim) * fadc_dtype_size((fadc_dtype)o->dtype);
	}
	return FADC_OK;
}

static int direct(const RtShardPlan *p, const Shard *s, const Slice *sl);
static int engine(const RtShardPlan *p, const Shard *s);

// The order shards are queued in: round r queues the r-th shard of each
// context, contexts in the order they first appear.  The host queues a
// run in some tens of microseconds (a graph launch, the views): queuing a
// context's shards one after the other would leave the later GPUs idle
// meanwhile.  Each context's shards keep their relative order.
static fadc_status
plan_order(RtShardPlan *p)
{
	if (!(p->order = calloc((size_t)p->n, sizeof *p->order)))
		return fail(p, FADC_ERR_NOMEM, "out of memory");
	int *rank = calloc((size_t)p->n, sizeof *rank), nrank = 0, m = 0;
	if (!rank)
		return fail(p, FADC_ERR_NOMEM, "out of memory");
	for (int k = 0; k < p->n; k++) { // rank[k]: shard k's place among its context's shards
		p->sh[k].first = 1;
		for (int i = 0; i < k; i++)
			if (p->sh[i].ctx == p->sh[k].ctx) {
				rank[k]++;
				p->sh[k].first = 0;
			}
		nrank = rank[k] + 1 > nrank ? rank[k] + 1 : nrank;
	}
	for (int r = 0; r < nrank; r++)
		for (int k = 0; k < p->n; k++)
			if (rank[k] == r)
				p->order[m++] = k;
	free(rank);
	return FADC_OK;
}

// The driver's calls for peer_copy; 0 when any is missing (no CUDA
// context was ever made: then no shard is on a GPU either).
static int
drv_load(Drv *d)
{
	if (!(d->dl = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD)))
		return 0;
	*(void **)&d->ctx_get = dlsym(d->dl, "cuCtxGetCurrent");
	*(void **)&d->ctx_set = dlsym(d->dl, "cuCtxSetCurrent");
	*(void **)&d->stream_ctx = dlsym(d->dl, "cuStreamGetCtx");
	*(void **)&d->stream_create = dlsym(d->dl, "cuStreamCreate");
	*(void **)&d->stream_destroy = dlsym(d->dl, "cuStreamDestroy_v2");
	*(void **)&d->stream_sync = dlsym(d->dl, "cuStreamSynchronize");
	*(void **)&d->memcpy_async = dlsym(d->dl, "cuMemcpyAsync");
	return d->ctx_get && d->ctx_set && d->stream_ctx && d->stream_create && d->stream_destroy &&
	       d->stream_sync && d->memcpy_async;
}

fadc_status
rt_shard_plan_create(const char *path, const char *task, fadc_context *const *ctxs,
                     fadc_model *const *models, int n, fadc_context *dest, const RtShardOptions *o,
                     RtShardPlan **out, char *err, size_t errlen)
{
	if (out)
		*out = NULL;
	if (errlen)
		err[0] = 0;
	RtShardPlan *p = calloc(1, sizeof *p);
	if (!p) {
		snprintf(err, errlen, "out of memory");
		return FADC_ERR_NOMEM;
	}
	fadc_status s = FADC_OK;
	ArtDesc d = {0};
	int have_desc = 0;
	if (!path || !task || !ctxs || !models || !dest || !out) {
		s = fail(p, FADC_ERR_ARG, "rt_shard_plan_create: a NULL argument");
		goto done;
	}
	if (n < 1 || n > ART_MAX_SHARDS) {
		s = fail(p, FADC_ERR_ARG, "%d shards: from 1 to %d", n, ART_MAX_SHARDS);
		goto done;
	}
	p->n = n;
	p->dest = dest;
	if (o)
		p->o = *o;
	if (!(p->sh = calloc((size_t)n, sizeof *p->sh))) {
		s = fail(p, FADC_ERR_NOMEM, "out of memory");
		goto done;
	}
	for (int k = 0; k < n; k++) {
		if (!ctxs[k] || !models[k]) {
			s = fail(p, FADC_ERR_ARG, "shard %d: a NULL %s", k, ctxs[k] ? "model" : "context");
			goto done;
		}
		p->sh[k].ctx = ctxs[k];
		p->sh[k].model = models[k];
		fadc_device dv;
		if ((s = context_device(ctxs[k], &dv))) {
			fail(p, s, "shard %d: %s", k, fadc_context_error(ctxs[k]));
			goto done;
		}
		p->sh[k].cpu = dv.kind == FADC_DEVICE_CPU;
	}
	if ((s = context_device(dest, &p->dest_dev))) {
		fail(p, s, "the destination: %s", fadc_context_error(dest));
		goto done;
	}
	uint8_t *db = NULL;
	size_t dl = 0;
	ArtRead rr = art_read(path, &d, &db, &dl, p->err, sizeof p->err);
	free(db);
	if (rr != ART_READ_OK) {
		s = rr == ART_READ_IO        ? FADC_ERR_IO
		    : rr == ART_READ_VERSION ? FADC_ERR_VERSION
		    : rr == ART_READ_NOMEM   ? FADC_ERR_NOMEM
		                             : FADC_ERR_FORMAT;
		goto done;
	}
	have_desc = 1;
	if (p->o.spec < 0 || p->o.spec >= (int)d.nspec) {
		s = fail(p, FADC_ERR_ARG, "specialisation %d: %s has %u", p->o.spec, path, d.nspec);
		goto done;
	}
	// The shards' names: `T:k/K`, or `T:k/K:w0+...` (an uneven split, its
	// rows in the records like any): the suffix of the artifact's first
	// shard 0 of K, which every shard of the set shares.
	const char *suffix = "";
	for (uint32_t i = 0; i < d.ntask; i++) {
		const ArtShard *r = d.task[i].shard;
		if (r && !r->k && r->n == (uint32_t)n && d.task[i].spec == p->o.spec && !strcmp(r->of, task)) {
			const char *c = strchr(d.task[i].name, ':');
			c = c ? strchr(c + 1, ':') : NULL;
			suffix = c ? c : "";
			break;
		}
	}
	for (int k = 0; k < n; k++) {
		char name[1024]; // T:k/K and up to 64 weights of 7 digits
		snprintf(name, sizeof name, "%s:%d/%d%s", task, k, n, suffix);
		int ti = desc_task(&d, name, p->o.spec);
		if (ti < 0 || !d.task[ti].shard) {
			char counts[200];
			shard_counts(&d, task, counts, sizeof counts);
			s = fail(p, FADC_ERR_NOT_FOUND, "%s has no task '%s'%s%s%s", path, name,
			         counts[0] ? " (it has the shards of '" : " (compile it with --shards ",
			         counts[0] ? task : "", counts[0] ? "' for " : "");
			if (counts[0])
				snprintf(p->err + strlen(p->err), sizeof p->err - strlen(p->err), "%s shards)",
				         counts);
			else
				snprintf(p->err + strlen(p->err), sizeof p->err - strlen(p->err), "%d)", n);
			goto done;
		}
		if ((p->sh[k].task = model_task(p, k, &d, &d.task[ti], path)) < 0) {
			s = FADC_ERR_ARG;
			goto done;
		}
		if ((s = plan_slices(p, k, &d.task[ti])))
			goto done;
	}
	for (uint32_t w = 0; w < p->nwhole; w++)
		if (p->whole[w].covered != p->whole[w].mid) {
			s = fail(p, FADC_ERR_FORMAT, "the shards of '%s' cover %" PRId64 " of the %" PRId64
			         " rows of its output '%s'", task, p->whole[w].covered, p->whole[w].mid,
			         p->whole[w].name);
			goto done;
		}
	if ((s = plan_order(p)))
		goto done;
	// peer_copy without the driver (a plan of CPU contexts only, where it
	// has nothing to do) is dropped: the other paths then apply.
	if (p->o.peer_copy && !drv_load(&p->drv)) {
		if (p->drv.dl)
			dlclose(p->drv.dl);
		memset(&p->drv, 0, sizeof p->drv);
		p->o.peer_copy = 0;
	}
	// Host staging for the slices that travel through the host only (none
	// where every slice is written in place or copied by the GPUs).
	for (int k = 0; k < n; k++)
		for (uint32_t j = 0; j < p->sh[k].nslice; j++)
			if (!direct(p, &p->sh[k], &p->sh[k].slice[j]) && !engine(p, &p->sh[k]) &&
			    p->sh[k].slice[j].bytes > p->hostlen)
				p->hostlen = p->sh[k].slice[j].bytes;
	p->owned = calloc(p->nwhole + 1, sizeof *p->owned);
	p->dst = calloc(p->nwhole + 1, sizeof *p->dst);
	p->host = malloc(p->hostlen ? p->hostlen : 1);
	if (!p->owned || !p->dst || !p->host)
		s = fail(p, FADC_ERR_NOMEM, "out of memory");
done:
	if (have_desc)
		art_desc_free(&d);
	if (s) {
		snprintf(err, errlen, "%s", p->err);
		rt_shard_plan_free(p);
		return s;
	}
	*out = p;
	return FADC_OK;
}

void
rt_shard_plan_free(RtShardPlan *p)
{
	if (!p)
		return;
	for (int k = 0; p->sh && k < p->n; k++) {
		if (p->sh[k].copy_stream) { // idle: every run waited for its copies
			void *old = NULL, *c = NULL;
			p->drv.ctx_get(&old);
			if (!p->drv.stream_ctx(p->sh[k].copy_stream, &c))
				p->drv.ctx_set(c);
			p->drv.stream_destroy(p->sh[k].copy_stream);
			p->drv.ctx_set(old);
		}
		free(p->sh[k].slice);
		free(p->sh[k].out);
		free(p->sh[k].view);
	}
	free(p->sh);
	free(p->order);
	if (p->drv.dl)
		dlclose(p->drv.dl);
	for (uint32_t w = 0; w < p->nwhole; w++) {
		free(p->whole[w].name);
		if (p->owned)
			fadc_tensor_release(p->owned[w]);
	}
	free(p->whole);
	free(p->owned);
	free(p->dst);
	free(p->host);
	free(p);
}

int
rt_shard_plan_noutputs(const RtShardPlan *p)
{
	return p ? (int)p->nwhole : 0;
}

int
rt_shard_plan_ncaller(const RtShardPlan *p)
{
	return p ? p->ncaller : 0;
}

fadc_status
rt_shard_plan_output(const RtShardPlan *p, int i, fadc_tensor_desc *d)
{
	if (!p || !d || i < 0 || i >= (int)p->nwhole)
		return FADC_ERR_ARG;
	const Whole *h = &p->whole[i];
	memset(d, 0, sizeof *d);
	d->name = h->name;
	d->role = FADC_ROLE_OUTPUT;
	d->dtype = h->dtype;
	d->rank = h->rank;
	memcpy(d->dim, h->dim, sizeof(int64_t) * (size_t)h->rank);
	return FADC_OK;
}

void
rt_shard_plan_traffic(const RtShardPlan *p, size_t *direct, size_t *staged)
{
	if (direct)
		*direct = p ? p->direct : 0;
	if (staged)
		*staged = p ? p->staged : 0;
}

size_t
rt_shard_plan_engine_bytes(const RtShardPlan *p)
{
	return p ? p->engine : 0;
}

const char *
rt_shard_error(const RtShardPlan *p)
{
	return p ? p->err : "";
}

// The destination outputs: the caller's, checked, or the plan's own.
static fadc_status
take_outputs(RtShardPlan *p, fadc_tensor **outputs)
{
	for (uint32_t w = 0; w < p->nwhole; w++) {
		const Whole *h = &p->whole[w];
		fadc_tensor *t = outputs[w];
		if (!t) {
			if (!p->owned[w]) {
				fadc_status s = fadc_tensor_create(p->dest, h->dtype, h->rank, h->dim, &p->owned[w]);
				if (s)
					return fail(p, s, "output '%s': %s", h->name, fadc_context_error(p->dest));
			}
			outputs[w] = t = p->owned[w];
		}
		fadc_device dv = fadc_tensor_device(t);
		if (dv.kind != p->dest_dev.kind || dv.index != p->dest_dev.index)
			return fail(p, FADC_ERR_DEVICE, "output '%s' is not on the destination's device",
			            h->name);
		int good = fadc_tensor_dtype(t) == h->dtype && fadc_tensor_rank(t) == h->rank &&
		           !memcmp(fadc_tensor_dims(t), h->dim, sizeof(int64_t) * (size_t)h->rank);
		if (!good)
			return fail(p, FADC_ERR_SHAPE, "output '%s' must be %s with %d axes of the whole "
			            "task's shape", h->name, fadc_dtype_name(h->dtype), h->rank);
		p->dst[w] = t;
	}
	return FADC_OK;
}

// Whether shard s writes slice j in place: one contiguous run of the
// whole output, on a context that can address the destination's memory.
static int
direct(const RtShardPlan *p, const Shard *s, const Slice *sl)
{
	const Whole *h = &p->whole[sl->whole];
	int contiguous = h->outer == 1 || sl->cnt == h->mid;
	if (p->o.staged || engine(p, s))
		return 0;
	int dest_cpu = p->dest_dev.kind == FADC_DEVICE_CPU;
	int reach = s->ctx == p->dest || (s->cpu && dest_cpu) || (!s->cpu && !dest_cpu && p->o.peer_direct);
	return contiguous && reach;
}

// Whether shard s's slices are copied by its GPU (peer_copy): a GPU shard
// on a context other than the destination's, a GPU one.
static int
engine(const RtShardPlan *p, const Shard *s)
{
	return p->o.peer_copy && !p->o.staged && !s->cpu && s->ctx != p->dest &&
	       p->dest_dev.kind != FADC_DEVICE_CPU;
}

// The address of element e of destination output w.
static fadc_status
dest_addr(RtShardPlan *p, uint32_t w, int64_t e, uint64_t *addr)
{
	uint64_t base;
	fadc_status s = fadc_tensor_address(p->dst[w], &base);
	if (s)
		return fail(p, s, "output '%s': %s", p->whole[w].name, fadc_context_error(p->dest));
	*addr = base + (uint64_t)e * fadc_dtype_size(p->whole[w].dtype);
	return FADC_OK;
}

// Copies `bytes` of host memory src to element e of destination output w:
// a view of the run, written from the host (on a device, a copy that the
// destination's stream orders after its queued work, and that is done on
// return; on the CPU a memcpy).  The same calls on either, so that the
// CPU tests run the GPU's path.
static fadc_status
put(RtShardPlan *p, uint32_t w, int64_t e, const void *src, size_t bytes)
{
	uint64_t at;
	fadc_status s = dest_addr(p, w, e, &at);
	if (s || !bytes)
		return s;
	fadc_tensor *v;
	int64_t n = (int64_t)(bytes / fadc_dtype_size(p->whole[w].dtype));
	if (!(s = fadc_tensor_wrap_device(p->dest, p->whole[w].dtype, 1, &n, at, &v))) {
		s = fadc_tensor_write(v, src, bytes);
		fadc_tensor_release(v);
	}
	return s ? fail(p, s, "output '%s': %s", p->whole[w].name, fadc_context_error(p->dest)) : s;
}

// Slice j of shard s, run by its task into a model-owned output, into the
// destination: read to the host (fadc_tensor_read waits for the shard's
// stream), then run by run.
static fadc_status
copy_slice(RtShardPlan *p, int k, uint32_t j)
{
	Shard *s = &p->sh[k];
	const Slice *sl = &s->slice[j];
	const Whole *h = &p->whole[sl->whole];
	fadc_status st = fadc_tensor_read(s->out[j], p->host, sl->bytes);
	if (st)
		return fail(p, st, "shard %d, output '%s': %s", k, h->name, fadc_context_error(s->ctx));
	const uint8_t *src = p->host;
	size_t es = fadc_dtype_size(h->dtype), run = (size_t)(sl->cnt * h->inner) * es;
	for (int64_t o = 0; o < h->outer; o++)
		if ((st = put(p, sl->whole, (o * h->mid + sl->off) * h->inner, src + (size_t)o * run, run)))
			return st;
	p->staged += sl->bytes;
	return FADC_OK;
}

// Shard k's slices, which its task wrote into its model-owned outputs on
// its GPU, copied into the destination by that GPU (peer_copy): on the
// copy stream of its context, after the shard's queued work (an event:
// fadc_context_signal_stream), so that the copies cross NVLink on the
// GPU's copy engine while its stream goes on with the context's next
// shard, and only the last shard's copies add to the run.  One
// cuMemcpyAsync per contiguous run of a slice (one for a Hessian block's).
static fadc_status
queue_copies(RtShardPlan *p, int k)
{
	Shard *sh = &p->sh[k], *own = sh;
	for (int i = 0; i < k && own == sh; i++)
		if (p->sh[i].ctx == sh->ctx)
			own = &p->sh[i]; // the first shard of the context holds the stream
	const Drv *d = &p->drv;
	void *old = NULL, *c = NULL, *cs = NULL;
	fadc_status st = fadc_context_stream(sh->ctx, &cs);
	if (st)
		return fail(p, st, "shard %d: %s", k, fadc_context_error(sh->ctx));
	int r = d->ctx_get(&old);
	if (!r)
		r = d->stream_ctx(cs, &c);
	if (!r)
		r = d->ctx_set(c);
	if (!r && !own->copy_stream)
		r = d->stream_create(&own->copy_stream, 1); // CU_STREAM_NON_BLOCKING
	if (r) {
		d->ctx_set(old);
		return fail(p, FADC_ERR_DEVICE, "shard %d: a stream for its copies: CUDA error %d", k, r);
	}
	if ((st = fadc_context_signal_stream(sh->ctx, own->copy_stream))) {
		d->ctx_set(old);
		return fail(p, st, "shard %d: %s", k, fadc_context_error(sh->ctx));
	}
	d->ctx_set(c);
	for (uint32_t j = 0; j < sh->nslice && !st; j++) {
		const Slice *sl = &sh->slice[j];
		const Whole *h = &p->whole[sl->whole];
		uint64_t src, at;
		if ((st = fadc_tensor_address(sh->out[j], &src))) {
			fail(p, st, "shard %d, output '%s': %s", k, h->name, fadc_context_error(sh->ctx));
			break;
		}
		size_t run = (size_t)(sl->cnt * h->inner) * fadc_dtype_size(h->dtype);
		for (int64_t o = 0; o < h->outer && !st; o++) {
			if ((st = dest_addr(p, sl->whole, (o * h->mid + sl->off) * h->inner, &at)))
				break;
			if (run && (r = d->memcpy_async(at, src + (uint64_t)o * run, run, own->copy_stream)))
				st = fail(p, FADC_ERR_DEVICE, "shard %d, output '%s': a copy to the destination: "
				          "CUDA error %d", k, h->name, r);
		}
		p->engine += sl->bytes;
	}
	d->ctx_set(old);
	return st;
}

static void
release_views(RtShardPlan *p)
{
	for (int k = 0; k < p->n; k++)
		for (uint32_t j = 0; j < p->sh[k].nslice; j++) {
			if (p->sh[k].view[j])
				fadc_tensor_release(p->sh[k].out[j]);
			p->sh[k].out[j] = NULL;
			p->sh[k].view[j] = 0;
		}
}

fadc_status
rt_shard_run(RtShardPlan *p, fadc_tensor *const *const *inputs, fadc_tensor **outputs,
             int noutputs)
{
	if (!p)
		return FADC_ERR_ARG;
	p->err[0] = 0;
	p->direct = p->staged = p->engine = 0;
	if (!outputs || noutputs != (int)p->nwhole)
		return fail(p, FADC_ERR_ARG, "the task has %u outputs, %d given", p->nwhole, noutputs);
	if (p->ncaller && !inputs)
		return fail(p, FADC_ERR_ARG, "the task takes %d inputs from the caller, none given",
		            p->ncaller);
	fadc_status s = take_outputs(p, outputs);
	if (s)
		return s;
	// Every shard's run queued (in p->order), its in-place slices as views,
	// the slices its GPU copies queued behind it.
	for (int i = 0; i < p->n && !s; i++) {
		int k = p->order[i];
		Shard *sh = &p->sh[k];
		for (uint32_t j = 0; j < sh->nslice && !s; j++) {
			const Slice *sl = &sh->slice[j];
			if (!direct(p, sh, sl))
				continue;
			uint64_t at;
			if ((s = dest_addr(p, sl->whole, sl->off * p->whole[sl->whole].inner, &at)))
				break;
			s = fadc_tensor_wrap_device(sh->ctx, p->whole[sl->whole].dtype, sl->rank, sl->dim, at,
			                            &sh->out[j]);
			if (s) {
				fail(p, s, "shard %d: a view of output '%s': %s", k, p->whole[sl->whole].name,
				     fadc_context_error(sh->ctx));
				break;
			}
			sh->view[j] = 1;
			p->direct += sl->bytes;
		}
		if (s)
			break;
		s = fadc_run(sh->model, sh->task, inputs ? inputs[k] : NULL, p->ncaller, sh->out,
		             (int)sh->nslice);
		if (s)
			fail(p, s, "shard %d of %d failed: %s", k, p->n, fadc_context_error(sh->ctx));
		else if (engine(p, sh))
			s = queue_copies(p, k);
	}
	// The other slices, through the host.
	for (int k = 0; k < p->n && !s; k++)
		for (uint32_t j = 0; j < p->sh[k].nslice && !s && !engine(p, &p->sh[k]); j++)
			if (!p->sh[k].view[j])
				s = copy_slice(p, k, j);
	// The shards' own streams done: the destination's slices complete.
	// After a failure too, so that no shard still writes into outputs the
	// caller may free (its first error is the one reported).
	// The copy streams after them (each waits for its shards' runs).
	for (int k = 0; k < p->n; k++) {
		fadc_status e = p->sh[k].ctx != p->dest && p->sh[k].first
		                    ? fadc_context_synchronize(p->sh[k].ctx)
		                    : FADC_OK;
		if (e && !s)
			s = fail(p, e, "shard %d of %d failed: %s", k, p->n, fadc_context_error(p->sh[k].ctx));
	}
	for (int k = 0; k < p->n; k++) {
		int r = p->sh[k].copy_stream ? p->drv.stream_sync(p->sh[k].copy_stream) : 0;
		if (r && !s)
			s = fail(p, FADC_ERR_DEVICE, "shard %d of %d: its copies: CUDA error %d", k, p->n, r);
	}
	release_views(p);
	return s;
}
