// codegen/plan.c -- the static memory plan of a task.
//
// Every intermediate (KB_TMP) buffer lives in one arena per task, at an
// offset fixed at compile time: the run path allocates nothing, and every
// intermediate has a stable address (what CUDA graph capture needs).  A
// buffer is live from the kernel that writes it to the last kernel that
// reads it, both included; two buffers may share bytes only when their
// live ranges are disjoint.  Kernels run in order, so a buffer whose last
// reader is kernel k is free for a buffer first written by kernel k + 1,
// never by kernel k itself (k still reads it while writing).
//
// Loops (a scan's kernels, run once per step) stretch lifetimes: a buffer
// that a loop touches and that is also touched outside it (a carry, a
// sequence, a stacked output, an invariant) must hold its value through
// every step, so its life covers the whole loop; a buffer touched only
// inside (the body's intermediates) is written before it is read in each
// step, and lives within the step as in straight-line code.  Loops are
// stretched innermost first, so a buffer of an inner loop that an outer
// step also touches covers the outer loop too.
//
// Placement is first fit in order of first write: each new buffer takes
// the lowest 64-byte-aligned offset where it overlaps no live buffer.
// Simple, deterministic, and within a small factor of optimal for the
// chain-like lifetimes of derivative graphs; arena_bytes is the peak,
// naive_bytes the sum of all sizes (what no reuse would cost).
//
// The placement is O(n log n) in the number of buffers (a chain of 16,000
// statements has 80,000 in its vhp; comparing each with every one placed
// before it took 20 s there).  In order of first write, the placed buffers
// whose lives overlap the next one's are exactly those still live at its
// first kernel (each was written no later), so they are pairwise live
// together and their byte ranges are disjoint: an ordered set of
// intervals.  A treap keyed by offset holds that set, each subtree
// knowing its lowest start, highest end and widest gap between two of its
// intervals; the first fit descends it once.  Buffers leave the set when
// the kernels pass their last reader (buckets by last kernel).
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "codegen.h"

#define ALIGN 64

static int64_t
align_up(int64_t n)
{
	return (n + ALIGN - 1) / ALIGN * ALIGN;
}

// The set of live placed buffers: a treap over node indices (0: none),
// keyed by lo, heap-ordered by a fixed pseudo-random priority, so that its
// shape, like the placement, depends only on the input.
typedef struct Iv {
	int64_t lo, hi; // bytes [lo, hi) of the buffer, hi > lo
	int64_t minlo, maxhi; // of the subtree
	int64_t maxgap; // widest gap between two consecutive intervals of the subtree
	uint32_t pri, l, r;
} Iv;

static void
iv_pull(Iv *t, uint32_t x)
{
	Iv *n = &t[x];
	int64_t g = 0;
	n->minlo = n->lo;
	n->maxhi = n->hi;
	if (n->l) {
		n->minlo = t[n->l].minlo;
		g = t[n->l].maxgap;
		if (n->lo - t[n->l].maxhi > g)
			g = n->lo - t[n->l].maxhi;
	}
	if (n->r) {
		n->maxhi = t[n->r].maxhi;
		if (t[n->r].maxgap > g)
			g = t[n->r].maxgap;
		if (t[n->r].minlo - n->hi > g)
			g = t[n->r].minlo - n->hi;
	}
	n->maxgap = g;
}

// Splits x into the intervals starting below lo (*a) and the others (*b).
static void
iv_split(Iv *t, uint32_t x, int64_t lo, uint32_t *a, uint32_t *b)
{
	if (!x) {
		*a = *b = 0;
		return;
	}
	if (t[x].lo < lo) {
		iv_split(t, t[x].r, lo, &t[x].r, b);
		*a = x;
	} else {
		iv_split(t, t[x].l, lo, a, &t[x].l);
		*b = x;
	}
	iv_pull(t, x);
}

// Joins a and b, every interval of a below every one of b.
static uint32_t
iv_merge(Iv *t, uint32_t a, uint32_t b)
{
	if (!a || !b)
		return a ? a : b;
	if (t[a].pri > t[b].pri) {
		t[a].r = iv_merge(t, t[a].r, b);
		iv_pull(t, a);
		return a;
	}
	t[b].l = iv_merge(t, a, t[b].l);
	iv_pull(t, b);
	return b;
}

static uint32_t
iv_insert(Iv *t, uint32_t root, uint32_t x)
{
	uint32_t a, b;
	iv_split(t, root, t[x].lo, &a, &b);
	return iv_merge(t, iv_merge(t, a, x), b);
}

static uint32_t
iv_remove(Iv *t, uint32_t root, uint32_t x)
{
	uint32_t a, b, m, c;
	iv_split(t, root, t[x].lo, &a, &b);
	iv_split(t, b, t[x].lo + 1, &m, &c);
	FADC_ASSERT(m == x && !t[m].l && !t[m].r, "cg_plan: a live buffer missing from the set");
	return iv_merge(t, a, c);
}

// The lowest offset of a gap of `size` bytes: the least off >= 0 with
// [off, off + size) clear of every interval.  Invariant of the descent: a
// gap that fits lies in the current subtree, before its first interval
// (from `from`, the end of what precedes it) or between two of its own,
// so the gap after its last interval is never needed below the root.
static int64_t
iv_first_fit(const Iv *t, uint32_t root, int64_t size)
{
#define FITS(x, from) ((x) && (t[x].minlo - (from) >= size || t[x].maxgap >= size))
	if (!FITS(root, 0))
		return root ? t[root].maxhi : 0;
	uint32_t x = root;
	int64_t from = 0;
	for (;;) {
		const Iv *n = &t[x];
		if (FITS(n->l, from)) {
			x = n->l;
			continue;
		}
		int64_t prev = n->l ? t[n->l].maxhi : from;
		if (n->lo - prev >= size)
			return prev;
		FADC_ASSERT(FITS(n->r, n->hi), "cg_plan: first fit lost its gap");
		from = n->hi;
		x = n->r;
	}
#undef FITS
}

// The most bytes live at one kernel: the sizes (as placed, aligned) of
// the temporaries whose life [first, last] covers kernel k, summed, at
// the k where that sum is largest.  No placement of these lifetimes can
// be smaller, so arena_bytes / live_bytes is what packing loses.
static int64_t
live_peak(const KProgram *p)
{
	int64_t *d = calloc(p->nk + 1, sizeof *d), cur = 0, peak = 0;
	FADC_ASSERT(d != NULL, "cg_plan: out of memory");
	for (uint32_t b = 0; b < p->nbuf; b++) {
		const KBuf *kb = &p->buf[b];
		if (kb->kind != KB_TMP || kb->first < 0)
			continue;
		int64_t size = align_up(kb->bytes ? kb->bytes : 1);
		d[kb->first] += size;
		d[kb->last + 1] -= size;
	}
	for (uint32_t k = 0; k < p->nk; k++) {
		cur += d[k];
		if (cur > peak)
			peak = cur;
	}
	free(d);
	return peak;
}

// FADC_PLAN_DUMP=1 (compile time, a diagnostic): for each planned task, on
// stderr, the kernel where the most bytes are live and the temporaries
// live there, largest first, with the kernels that write and last read
// them: what to shrink when a task's arena is too large.
static void
plan_dump(const KProgram *p)
{
	const char *e = getenv("FADC_PLAN_DUMP");
	if (!e || !*e || !strcmp(e, "0") || !p->nk)
		return;
	int64_t *d = calloc(p->nk + 1, sizeof *d), cur = 0, peak = -1;
	FADC_ASSERT(d != NULL, "cg_plan: out of memory");
	uint32_t at = 0;
	for (uint32_t b = 0; b < p->nbuf; b++) {
		const KBuf *kb = &p->buf[b];
		if (kb->kind == KB_TMP && kb->first >= 0) {
			d[kb->first] += align_up(kb->bytes ? kb->bytes : 1);
			d[kb->last + 1] -= align_up(kb->bytes ? kb->bytes : 1);
		}
	}
	for (uint32_t k = 0; k < p->nk; k++) {
		cur += d[k];
		if (cur > peak)
			peak = cur, at = k;
	}
	free(d);
	fprintf(stderr, "# plan %s: %u kernels, arena %lld, live peak %lld at kernel %u (%s)\n",
	        p->name, p->nk, (long long)p->arena_bytes, (long long)peak, at, p->k[at].what);
	uint32_t *ids = calloc(p->nbuf + 1, sizeof *ids), n = 0;
	FADC_ASSERT(ids != NULL, "cg_plan: out of memory");
	for (uint32_t b = 0; b < p->nbuf; b++) {
		const KBuf *kb = &p->buf[b];
		if (kb->kind == KB_TMP && kb->first >= 0 && kb->first <= (int)at && kb->last >= (int)at)
			ids[n++] = b;
	}
	for (uint32_t i = 1; i < n; i++) // insertion sort, largest first (a dump)
		for (uint32_t j = i; j > 0 && p->buf[ids[j]].bytes > p->buf[ids[j - 1]].bytes; j--) {
			uint32_t t = ids[j];
			ids[j] = ids[j - 1];
			ids[j - 1] = t;
		}
	for (uint32_t i = 0; i < n; i++) {
		const KBuf *kb = &p->buf[ids[i]];
		char ty[160];
		ir_type_str(kb->dtype, &kb->shape, ty, sizeof ty);
		fprintf(stderr, "#   b%-6u %12lld @%12lld %-28s node %-6u k%u %s -> k%u %s\n", ids[i],
		        (long long)kb->bytes, (long long)kb->offset, ty, kb->node, kb->first,
		        p->k[kb->first].what, kb->last, p->k[kb->last].what);
	}
	free(ids);
}

// seen[id] == k + 1: expression id already visited for kernel k (a stamp
// per kernel, not a cleared array: clearing nx bytes per kernel was
// quadratic, 80% of compiling detr's vhp at -O0).
static void
note_reads(KProgram *p, KxId id, int k, uint32_t *seen)
{
	if (!id || seen[id] == (uint32_t)k + 1)
		return;
	seen[id] = (uint32_t)k + 1;
	const Kx *x = &p->x[id];
	if (x->op == KX_LOAD) {
		KBuf *b = &p->buf[x->aux];
		if (b->last < k)
			b->last = k;
	}
	for (int i = 0; i < x->nin; i++)
		note_reads(p, x->a[i], k, seen);
}

// The kinds of sum that cuda_multi_end runs side by side: 1 a channel
// split's first kernel (channel_partial_sum), 2 a sum or mean of such a
// kernel's partials, 0 neither.
static int
side_kind(const KProgram *p, uint32_t k)
{
	const KKernel *kk = &p->k[k];
	if (kk->red != KR_SUM || kk->host || kk->contraction || kk->conv || !kk->what)
		return 0;
	if (!strcmp(kk->what, "channel_partial_sum"))
		return 1;
	if (strcmp(kk->what, "sum") && strcmp(kk->what, "mean"))
		return 0;
	const Kx *b = &p->x[kk->body];
	if (b->op != KX_LOAD)
		return 0;
	for (uint32_t j = k; j-- > 0;)
		if (p->k[j].out == b->aux)
			return p->k[j].what && !strcmp(p->k[j].what, "channel_partial_sum") ? 2 : 0;
	return 0;
}

// The end of the run of side-by-side sums from kernel k (at most 4, as
// cuda_multi_end takes; k + 1 for none).
static uint32_t
side_run_end(const KProgram *p, uint32_t k)
{
	int kind = side_kind(p, k);
	uint32_t e = k + 1;
	if (!kind)
		return e;
	const KKernel *a = &p->k[k];
	for (; e < p->nk && e - k < 4; e++) {
		const KKernel *s = &p->k[e];
		if (side_kind(p, e) != kind || s->rank != a->rank || s->rrank != a->rrank ||
		    memcmp(s->dim, a->dim, sizeof a->dim) || memcmp(s->rdim, a->rdim, sizeof a->rdim))
			break;
	}
	return e;
}

// Each buffer's life [first, last] in kernels: what cg_plan places and
// what cg_remat measures.
static void
fill_lives(KProgram *p)
{
	uint32_t *seen = calloc(p->nx + 1, sizeof *seen);
	FADC_ASSERT(seen != NULL, "cg_plan: out of memory");
	for (uint32_t b = 0; b < p->nbuf; b++)
		p->buf[b].first = p->buf[b].last = -1;
	for (uint32_t k = 0; k < p->nk; k++) {
		KBuf *out = &p->buf[p->k[k].out];
		if (out->first < 0)
			out->first = (int)k;
		if (out->last < (int)k)
			out->last = (int)k;
		note_reads(p, p->k[k].index, (int)k, seen);
		note_reads(p, p->k[k].body, (int)k, seen);
		note_reads(p, p->k[k].post, (int)k, seen);
		if (p->k[k].host) { // reads its operand, uses its scratch
			KBuf *hb[2] = {&p->buf[p->k[k].hin], &p->buf[p->k[k].hwork]};
			for (int i = 0; i < 2; i++) {
				if (hb[i]->first < 0)
					hb[i]->first = (int)k;
				if (hb[i]->last < (int)k)
					hb[i]->last = (int)k;
			}
		}
	}
	for (uint32_t l = p->nloop; l-- > 0;) {
		const KLoop *lp = &p->loop[l];
		int b0 = (int)lp->begin, b1 = (int)lp->end - 1;
		if (b1 < b0)
			continue;
		for (uint32_t b = 0; b < p->nbuf; b++) {
			KBuf *kb = &p->buf[b];
			if (kb->first < 0 || kb->last < b0 || kb->first > b1)
				continue; // not touched in the loop
			if (kb->first >= b0 && kb->last <= b1)
				continue; // only in the loop: within one step
			if (kb->first > b0)
				kb->first = b0;
			if (kb->last < b1)
				kb->last = b1;
		}
	}
	// A convolution's kernels (KKernel.conv) may run as one cuDNN call
	// instead (codegen/cuda_sched.c, a choice), which reads its operands
	// and writes its result at once: those three must share no byte with
	// each other or with the range's temporaries, so each lives over the
	// whole range (without this, the result could reuse the bytes of an
	// operand that im2col read last).
	for (uint32_t c = 1; c <= p->nconv; c++) {
		int b0 = -1, b1 = -1;
		for (uint32_t k = 0; k < p->nk; k++)
			if (p->k[k].conv == c) {
				if (b0 < 0)
					b0 = (int)k;
				b1 = (int)k;
			}
		const uint32_t cb[3] = {p->conv[c - 1].out, p->conv[c - 1].a, p->conv[c - 1].b};
		for (int i = 0; b0 >= 0 && i < 3; i++) {
			KBuf *kb = &p->buf[cb[i]];
			if (kb->first < 0 || kb->first > b0)
				kb->first = b0;
			if (kb->last < b1)
				kb->last = b1;
		}
	}
	// Sums that the CUDA launch plan may run side by side as one launch
	// (cuda_multi_end: the channel splits' first kernels, or their second
	// kernels, adjacent over equal domains; codegen/kir_layout.c) read
	// everything before any of them writes, so no output of the run may
	// share a byte with a buffer the run reads: each of those lives to the
	// run's end.  Without this the plan put a later sum's output on the
	// bytes of partials only an earlier one read, and the launch plan kept
	// the two apart.  Only the channels-last copy of a program has such
	// kernels (channel_partial_sum and the sums of their partials), so the
	// CPU's plan is unchanged.
	for (uint32_t k = 0; k < p->nk;) {
		uint32_t e = side_run_end(p, k);
		for (uint32_t j = k; e - k >= 2 && j < e; j++) {
			note_reads(p, p->k[j].index, (int)e - 1, seen);
			note_reads(p, p->k[j].body, (int)e - 1, seen);
			note_reads(p, p->k[j].post, (int)e - 1, seen);
		}
		k = e;
	}
	free(seen);
}


// ---------------------------------------------------------------- recomputation
//
// A derivative task keeps many forward values alive into the backward
// pass, so its live peak is where the forward ends.  Some of those values
// are cheap to make again from what is alive there anyway: a dropout mask
// (a function of the element index alone), a ReLU of a batch norm (from the
// convolution's output and the statistics, both kept for the norm's own
// gradient), a product of two kept values.  cg_remat then recomputes them:
// at the peak kernel K, a temporary B live over K that
//   - one kernel w writes, elementwise (no reduction, contraction, host
//     call or convolution, not in a loop), at least REMAT_MIN_BYTES,
//   - is not read at K, and is read later first at kernel r (outside
//     loops; r moves back to the start of a convolution range),
//   - whose kernel w reads only task inputs, or buffers written once
//     before w that are alive at r anyway (their last read at r or later)
// gets a copy of kernel w inserted before r, writing a new buffer B', and
// every read of B from r on (loads, host operands, convolution records)
// reads B' instead.  B's life ends at its last read before K (when there
// is none, kernel w itself moves to r instead, writing B), B' lives
// from r, inside B's old life, and w's operands were alive at r anyway: no
// life grows, so no placement gets larger; the price is one elementwise
// kernel per value.  The same values are computed from the same operands
// by the same expression, so results are bit-identical.  Repeated, one
// value at a time, while the peak is over the memory goal and has a
// candidate, at most REMAT_MAX times.
//
// The memory goal.  Each recomputation costs a kernel that reads its
// operands and writes its value again (detr's vjp: +121 kernels, +8.6% of
// its time, to go from 4.86 to 2.47 GB), so recomputing stops once the
// live peak is at or under a goal, G = REMAT_GOAL x the live peak before
// any recomputation (the default; FADC_MEMORY_GOAL overrides it), and at
// each peak the cheapest candidate goes first: the most bytes saved (B's
// size) per byte of work, work = the copy's traffic (its output plus each
// operand's bytes it loads, a broadcast operand once) + REMAT_LAUNCH, the
// fixed cost of one more kernel in bytes.  A kernel moved instead of copied
// (B not read before the peak) costs nothing and goes first.  With no goal
// (FADC_MEMORY_GOAL=0: recompute while the peak has a candidate) the order
// is the latest written first instead, so that a product of two recomputed
// values is copied before its operands are (after them, its operands'
// lives have ended and it is no longer a candidate): the deepest cut.
// The goal's bytes are kept in the program (remat_goal), so that a second
// plan of the same program (the CUDA code's channels-last copy) aims at
// the same bytes, not a fraction of its already lowered peak.
#define REMAT_MIN_BYTES ((int64_t)1 << 20)
#define REMAT_MAX 2048
#define REMAT_GOAL 0.65
#define REMAT_LAUNCH ((int64_t)4 << 20)

static int
kernel_in_loop(const KProgram *p, uint32_t k)
{
	for (uint32_t l = 0; l < p->nloop; l++)
		if (p->loop[l].begin <= k && k < p->loop[l].end)
			return 1;
	return 0;
}

// Marks in rd[] (a stamp of kernel k + 1) the buffers kernel k's
// expressions load, each also appended to list (when not NULL).
static void
mark_loads(const KProgram *p, KxId id, uint32_t k, uint32_t *seen, uint32_t *rd, uint32_t *list,
           uint32_t *n)
{
	if (!id || seen[id] == k + 1)
		return;
	seen[id] = k + 1;
	const Kx *x = &p->x[id];
	if (x->op == KX_LOAD && rd[x->aux] != k + 1) {
		rd[x->aux] = k + 1;
		if (list)
			list[(*n)++] = x->aux;
	}
	for (int i = 0; i < x->nin; i++)
		mark_loads(p, x->a[i], k, seen, rd, list, n);
}

// Loads of buffer `from` rebuilt as loads of `to` (memo: per expression).
static KxId
redirect(KProgram *p, KxId id, uint32_t from, uint32_t to, KxId *memo)
{
	if (!id)
		return 0;
	if (memo[id])
		return memo[id];
	Kx x = p->x[id]; // by value: building may move p->x
	KxId a[3] = {0, 0, 0};
	int changed = x.op == KX_LOAD && x.aux == from;
	for (int i = 0; i < x.nin; i++) {
		a[i] = redirect(p, x.a[i], from, to, memo);
		changed |= a[i] != x.a[i];
	}
	if (x.op == KX_LOAD && x.aux == from)
		x.aux = to;
	KxId r = changed ? kx_remake(p, &x, a) : id;
	memo[id] = r;
	return r;
}

// A zeroed kernel before kernel k (later kernels and loops move up).
static KKernel *
insert_kernel(KProgram *p, uint32_t k)
{
	kir_kernel_add(p);
	memmove(&p->k[k + 1], &p->k[k], (p->nk - 1 - k) * sizeof *p->k);
	for (uint32_t l = 0; l < p->nloop; l++) {
		if (p->loop[l].begin >= k)
			p->loop[l].begin++;
		if (p->loop[l].end > k)
			p->loop[l].end++;
	}
	memset(&p->k[k], 0, sizeof p->k[k]);
	return &p->k[k];
}

static void
remove_kernel(KProgram *p, uint32_t k)
{
	memmove(&p->k[k], &p->k[k + 1], (p->nk - 1 - k) * sizeof *p->k);
	p->nk--;
	for (uint32_t l = 0; l < p->nloop; l++) {
		if (p->loop[l].begin > k)
			p->loop[l].begin--;
		if (p->loop[l].end > k)
			p->loop[l].end--;
	}
}

// FADC_REMAT_MIN=BYTES (a test hook): the size below which nothing is
// recomputed or written in place, so that the tests' reduced sizes do both.
static int64_t
remat_min(void)
{
	const char *mv = getenv("FADC_REMAT_MIN");
	return mv && *mv ? strtoll(mv, NULL, 10) : REMAT_MIN_BYTES;
}

// The work of copying kernel w (list: the nl buffers it loads), in bytes:
// its output, each operand's bytes it loads (a broadcast operand once),
// and REMAT_LAUNCH.
static int64_t
remat_work(const KProgram *p, const KKernel *w, const uint32_t *list, uint32_t nl)
{
	int64_t pts = kir_kernel_points(w), work = REMAT_LAUNCH + p->buf[w->out].bytes;
	for (uint32_t j = 0; j < nl; j++) {
		const KBuf *ib = &p->buf[list[j]];
		int64_t rb = pts * (int64_t)kir_dtype_size(ib->dtype);
		work += ib->bytes < rb ? ib->bytes : rb;
	}
	return work;
}

// FADC_MEMORY_GOAL (compile time): "0" no goal; a number with a '.' a
// fraction of the live peak before recomputation (0.7); else bytes, with an
// optional K, M, G or T (powers of 1024).  *frac gets the fraction, *bytes
// the bytes (one of them is used; -1 for the other).  Anything else is
// reported once on stderr and the default used.
static void
remat_goal_env(double *frac, int64_t *bytes)
{
	*frac = REMAT_GOAL;
	*bytes = -1;
	const char *e = getenv("FADC_MEMORY_GOAL");
	if (!e || !*e)
		return;
	char *end;
	if (strchr(e, '.')) {
		double f = strtod(e, &end);
		if (!*end && f >= 0 && f <= 1) {
			*frac = f;
			return;
		}
	} else {
		long long v = strtoll(e, &end, 10);
		int sh = 0;
		if (*end && !end[1])
			sh = *end == 'K' ? 10 : *end == 'M' ? 20 : *end == 'G' ? 30 : *end == 'T' ? 40 : -1;
		if (end != e && v >= 0 && sh >= 0 && (sh == 0 ? !*end : 1) && v <= (INT64_MAX >> sh)) {
			*frac = -1;
			*bytes = (int64_t)v << sh;
			return;
		}
	}
	// Once per process, whichever thread plans.
	static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
	static int told;
	pthread_mutex_lock(&mu);
	if (!told++)
		fprintf(stderr,
		        "fadc: FADC_MEMORY_GOAL=%s is neither a fraction in [0, 1] with a '.' (0.7) nor "
		        "bytes (3221225472, 3G); using %.2f of the peak\n",
		        e, REMAT_GOAL);
	pthread_mutex_unlock(&mu);
}

// One recomputation at the current peak; 0 when the peak is at or under
// goal (bytes; 0: no goal) or has no candidate.
static int
remat_one(KProgram *p, int64_t minb, int64_t goal)
{
	fill_lives(p);
	uint32_t nb = p->nbuf, nk = p->nk;
	int64_t *d = calloc(nk + 1, sizeof *d), cur = 0, peak = -1;
	int *nw = calloc(nb, sizeof *nw), *wk = calloc(nb, sizeof *wk), *lastw = calloc(nb, sizeof *lastw);
	int *prev = calloc(nb, sizeof *prev), *next = calloc(nb, sizeof *next);
	uint32_t *seen = calloc(p->nx + 1, sizeof *seen), *rd = calloc(nb, sizeof *rd);
	uint32_t *list = calloc(nb + 1, sizeof *list), nl;
	FADC_ASSERT(d && nw && wk && lastw && prev && next && seen && rd && list,
	            "cg_remat: out of memory");
	uint32_t at = 0;
	for (uint32_t b = 0; b < nb; b++)
		if (p->buf[b].kind == KB_TMP && p->buf[b].first >= 0) {
			d[p->buf[b].first] += align_up(p->buf[b].bytes ? p->buf[b].bytes : 1);
			d[p->buf[b].last + 1] -= align_up(p->buf[b].bytes ? p->buf[b].bytes : 1);
		}
	for (uint32_t k = 0; k < nk; k++) {
		cur += d[k];
		if (cur > peak)
			peak = cur, at = k;
	}
	if (goal > 0 && peak <= goal) {
		free(d), free(nw), free(wk), free(lastw), free(prev), free(next);
		free(seen), free(rd), free(list);
		return 0;
	}
	for (uint32_t b = 0; b < nb; b++)
		lastw[b] = prev[b] = next[b] = -1;
	// Writers; the last read before the peak and the first after it.
	for (uint32_t k = 0; k < nk; k++) {
		const KKernel *kk = &p->k[k];
		uint32_t w[2] = {kk->out, kk->host ? kk->hwork : kk->out};
		for (int i = 0; i < (kk->host ? 2 : 1); i++) {
			nw[w[i]]++;
			wk[w[i]] = (int)k;
			lastw[w[i]] = (int)k;
		}
		nl = 0;
		mark_loads(p, kk->index, k, seen, rd, list, &nl);
		mark_loads(p, kk->body, k, seen, rd, list, &nl);
		mark_loads(p, kk->post, k, seen, rd, list, &nl);
		if (kk->host && rd[kk->hin] != k + 1) {
			rd[kk->hin] = k + 1;
			list[nl++] = kk->hin;
		}
		for (uint32_t j = 0; j < nl; j++) {
			uint32_t b = list[j];
			if (k < at)
				prev[b] = (int)k;
			else if (k == at)
				prev[b] = INT32_MAX; // read at the peak: not a candidate
			else if (next[b] < 0)
				next[b] = (int)k;
		}
	}
	int best = -1;
	uint32_t bestr = 0;
	double bestv = -1; // with a goal: bytes saved per byte of work
	for (uint32_t b = 0; b < nb; b++) {
		const KBuf *kb = &p->buf[b];
		if (kb->kind != KB_TMP || nw[b] != 1 || kb->bytes < minb ||
		    kb->first < 0 || kb->first > (int)at || kb->last < (int)at || prev[b] == INT32_MAX ||
		    next[b] < 0 || wk[b] >= (int)at)
			continue;
		// A convolution range around the peak that names B keeps it alive
		// through the range (the call reads it at once): no gain.
		const KConv *pc = p->k[at].conv ? &p->conv[p->k[at].conv - 1] : NULL;
		if (pc && (pc->out == b || pc->a == b || pc->b == b))
			continue;
		const KKernel *w = &p->k[wk[b]];
		if (w->host || w->conv || w->contraction || w->red != KR_NONE ||
		    kernel_in_loop(p, (uint32_t)wk[b]) || kernel_in_loop(p, (uint32_t)next[b]))
			continue;
		uint32_t r = (uint32_t)next[b];
		if (p->k[r].conv)
			while (r > 0 && p->k[r - 1].conv == p->k[next[b]].conv)
				r--;
		if (r <= at || (goal <= 0 && best >= 0 && wk[b] <= wk[best]))
			continue;
		// The writer's operands: alive at r, and not written after w.
		// (Stamps of nk + 1 + b: distinct from the scan's above.)
		uint32_t stamp = nk + 1 + b;
		nl = 0;
		mark_loads(p, w->index, stamp, seen, rd, list, &nl);
		mark_loads(p, w->body, stamp, seen, rd, list, &nl);
		mark_loads(p, w->post, stamp, seen, rd, list, &nl);
		int ok = 1;
		for (uint32_t j = 0; ok && j < nl; j++) {
			uint32_t i = list[j];
			ok = i != b;
			const KBuf *ib = &p->buf[i];
			if (!ok || ib->kind == KB_IN)
				continue;
			if (ib->kind == KB_IN)
				continue;
			ok = lastw[i] < wk[b] && (ib->kind == KB_OUT || ib->last >= (int)r);
		}
		if (ok && goal > 0) { // the cheapest first; ties: the latest written
			double v = INFINITY; // moved, not copied: free
			if (prev[b] >= 0)
				v = (double)align_up(kb->bytes) / (double)remat_work(p, w, list, nl);
			ok = best < 0 || v > bestv || (v == bestv && wk[b] > wk[best]);
			if (ok)
				bestv = v;
		}
		if (ok) {
			best = (int)b;
			bestr = r;
		}
	}
	// After a convolution record names B, its range must follow r or end
	// before the peak: both hold (r is a range's start or outside one).
	const char *dump = getenv("FADC_PLAN_DUMP");
	if (best >= 0 && dump && *dump && strcmp(dump, "0")) { // what each step costs and saves
		const KKernel *w = &p->k[wk[best]];
		uint32_t stamp = nk + 1 + nb;
		nl = 0;
		mark_loads(p, w->index, stamp, seen, rd, list, &nl);
		mark_loads(p, w->body, stamp, seen, rd, list, &nl);
		mark_loads(p, w->post, stamp, seen, rd, list, &nl);
		fprintf(stderr, "# remat %s: peak %lld at k%u: b%d %lld bytes, %s, work %lld\n", p->name,
		        (long long)peak, at, best, (long long)p->buf[best].bytes,
		        prev[best] >= 0 ? "copied" : "moved",
		        prev[best] >= 0 ? (long long)remat_work(p, w, list, nl) : 0LL);
	}
	free(d);
	free(lastw);
	free(nw);
	free(seen);
	free(rd);
	free(list);
	if (best < 0) {
		free(wk);
		free(prev);
		free(next);
		return 0;
	}
	uint32_t b = (uint32_t)best, r = bestr, w = (uint32_t)wk[b];
	int early = prev[b] >= 0; // B read before the peak: w stays
	free(wk);
	free(prev);
	free(next);
	if (!early) { // B is read only after the peak: its kernel moves there
		KKernel kw = p->k[w];
		remove_kernel(p, w);
		*insert_kernel(p, r - 1) = kw;
		return 1;
	}
	KBuf old = p->buf[b];
	uint32_t nb2 = kir_buf_add(p, KB_TMP, 0, old.dtype, &old.shape, old.node);
	KKernel copy = p->k[w];
	KKernel *m = insert_kernel(p, r);
	*m = copy;
	m->out = nb2;
	KxId *memo = calloc(p->nx + 1, sizeof *memo);
	FADC_ASSERT(memo != NULL, "cg_remat: out of memory");
	for (uint32_t k = r + 1; k < p->nk; k++) {
		KKernel *kk = &p->k[k];
		if (kk->host) {
			if (kk->hin == b)
				kk->hin = nb2;
			continue;
		}
		kk->index = redirect(p, kk->index, b, nb2, memo);
		kk->body = redirect(p, kk->body, b, nb2, memo);
		kk->post = redirect(p, kk->post, b, nb2, memo);
	}
	free(memo);
	for (uint32_t c = 0; c < p->nconv; c++) {
		uint32_t k0 = 0;
		while (k0 < p->nk && p->k[k0].conv != c + 1)
			k0++;
		if (k0 <= r)
			continue; // a range before r (the peak's side): B itself
		KConv *cv = &p->conv[c];
		if (cv->out == b)
			cv->out = nb2;
		if (cv->a == b)
			cv->a = nb2;
		if (cv->b == b)
			cv->b = nb2;
	}
	return 1;
}

int
cg_remat(KProgram *p)
{
	const char *e = getenv("FADC_NO_REMAT");
	if (e && *e && strcmp(e, "0"))
		return 0;
	int64_t minb = remat_min();
	if (!p->remat_goal) { // the first plan of p: the goal from its peak as lowered
		double frac;
		int64_t bytes;
		remat_goal_env(&frac, &bytes);
		fill_lives(p);
		p->remat_goal = frac >= 0 ? (int64_t)(frac * (double)live_peak(p)) : bytes;
		if (p->remat_goal <= 0)
			p->remat_goal = -1; // no goal
	}
	int n = 0;
	while (n < REMAT_MAX && remat_one(p, minb, p->remat_goal))
		n++;
	return n;
}

// ---------------------------------------------------------------- in place
//
// An elementwise kernel k whose output O is first written at k may write
// it over an operand X that k reads for the last time, when every load of
// X in k is at k's own store index (element e of X read for point e only,
// by the point that then writes element e of O) and the two have the same
// bytes and element size: O then takes X's offset, and X's life, for the
// placement, ends at k - 1.  Each point reads its X[e] before it writes
// O[e] (the store depends on the load), so no point can see another's
// write.  The CUDA code of a program with convolutions is relaid
// channels-last after this plan (kir_layout.c), which may change one
// buffer's indices and not the other's: such programs write nothing in
// place; nor does an output below REMAT_MIN_BYTES (nothing to win).
// FADC_NO_INPLACE=1 at compile time turns it off.
static int
loads_at(const KProgram *p, KxId id, uint32_t x, KxId index, uint32_t *seen, uint32_t stamp)
{
	if (!id || seen[id] == stamp)
		return 1;
	seen[id] = stamp;
	const Kx *e = &p->x[id];
	if (e->op == KX_LOAD && e->aux == x && e->a[0] != index)
		return 0;
	for (int i = 0; i < e->nin; i++)
		if (!loads_at(p, e->a[i], x, index, seen, stamp))
			return 0;
	return 1;
}

// partner[o] = x + 1 where o is written over x.
static void
fill_inplace(const KProgram *p, uint32_t *partner)
{
	const char *e = getenv("FADC_NO_INPLACE");
	if (p->nconv || (e && *e && strcmp(e, "0")))
		return;
	int64_t minb = remat_min();
	uint32_t *nw = calloc(p->nbuf + 1, sizeof *nw), *seen = calloc(p->nx + 1, sizeof *seen);
	uint32_t *rd = calloc(p->nbuf + 1, sizeof *rd), *list = calloc(p->nbuf + 1, sizeof *list);
	uint8_t *taken = calloc(p->nbuf + 1, 1);
	FADC_ASSERT(nw && seen && rd && list && taken, "cg_plan: out of memory");
	for (uint32_t k = 0; k < p->nk; k++) {
		nw[p->k[k].out]++;
		if (p->k[k].host)
			nw[p->k[k].hwork]++;
	}
	uint32_t stamp = 0, st = p->nk + 1; // mark_loads' stamps, then loads_at's (above them)
	for (uint32_t k = 0; k < p->nk; k++) {
		const KKernel *kk = &p->k[k];
		const KBuf *o = &p->buf[kk->out];
		if (kk->host || kk->conv || kk->contraction || kk->red != KR_NONE || o->kind != KB_TMP ||
		    nw[kk->out] != 1 || o->first != (int)k || kernel_in_loop(p, k) || o->bytes < minb ||
		    kir_kernel_points(kk) * (int64_t)kir_dtype_size(o->dtype) != o->bytes)
			continue;
		uint32_t nl = 0;
		stamp++;
		mark_loads(p, kk->index, stamp - 1, seen, rd, list, &nl);
		mark_loads(p, kk->body, stamp - 1, seen, rd, list, &nl);
		mark_loads(p, kk->post, stamp - 1, seen, rd, list, &nl);
		for (uint32_t j = 0; j < nl; j++) {
			uint32_t x = list[j];
			const KBuf *xb = &p->buf[x];
			if (x == kk->out || xb->kind != KB_TMP || xb->last != (int)k || xb->first >= (int)k ||
			    taken[x] || align_up(xb->bytes) != align_up(o->bytes) ||
			    kir_dtype_size(xb->dtype) != kir_dtype_size(o->dtype))
				continue;
			st++;
			if (!loads_at(p, kk->index, x, kk->index, seen, st) ||
			    !loads_at(p, kk->body, x, kk->index, seen, st) ||
			    !loads_at(p, kk->post, x, kk->index, seen, st))
				continue;
			partner[kk->out] = x + 1;
			taken[x] = 1;
			break;
		}
	}
	free(nw);
	free(seen);
	free(rd);
	free(list);
	free(taken);
}

void
cg_plan(KProgram *p)
{
	cg_remat(p);
	fill_lives(p);
	uint32_t *partner = calloc(p->nbuf + 1, sizeof *partner);
	FADC_ASSERT(partner != NULL, "cg_plan: out of memory");
	fill_inplace(p, partner);
	for (uint32_t b = 0; b < p->nbuf; b++) // the operand's life ends, for the placement
		if (partner[b])
			p->buf[partner[b] - 1].last--;
	// Buffers in order of first write (kernel order, then id: deterministic).
	// A counting sort by first write: start[k] is where kernel k's begin.
	uint32_t nt = 0;
	uint32_t *order = calloc(p->nbuf + 1, sizeof *order);
	uint32_t *start = calloc(p->nk + 2, sizeof *start);
	FADC_ASSERT(order && start, "cg_plan: out of memory");
	for (uint32_t b = 0; b < p->nbuf; b++)
		if (p->buf[b].kind == KB_TMP && p->buf[b].first >= 0)
			start[p->buf[b].first + 1]++;
	for (uint32_t k = 0; k < p->nk; k++)
		start[k + 1] += start[k];
	for (uint32_t b = 0; b < p->nbuf; b++)
		if (p->buf[b].kind == KB_TMP && p->buf[b].first >= 0) {
			order[start[p->buf[b].first]++] = b;
			nt++;
		}
	free(start);
	// Placement, in order of first write.  byend[k]: the buffers whose last
	// reader is kernel k (a counting sort again), leaving the live set once
	// the buffer being placed is first written after k.
	uint32_t *bstart = calloc(p->nk + 2, sizeof *bstart);
	uint32_t *byend = calloc(nt + 1, sizeof *byend);
	Iv *t = calloc(nt + 1, sizeof *t);
	FADC_ASSERT(bstart && byend && t, "cg_plan: out of memory");
	for (uint32_t i = 0; i < nt; i++) {
		const KBuf *b = &p->buf[order[i]];
		FADC_ASSERT(b->last >= b->first && b->last < (int)p->nk, "cg_plan: a buffer's life is not a range");
		bstart[b->last + 1]++;
	}
	for (uint32_t k = 0; k < p->nk; k++)
		bstart[k + 1] += bstart[k];
	for (uint32_t i = 0; i < nt; i++)
		byend[bstart[p->buf[order[i]].last]++] = i + 1; // tree node i + 1
	// bstart[k] is now where kernel k + 1's bucket begins.
	p->arena_bytes = p->naive_bytes = 0;
	uint32_t root = 0, gone = 0, rng = 2463534242u;
	int done = 0; // kernels [0, done) have left: their buckets are out of the set
	for (uint32_t i = 0; i < nt; i++) {
		KBuf *b = &p->buf[order[i]];
		for (; done < b->first; done++)
			for (; gone < bstart[done]; gone++)
				root = iv_remove(t, root, byend[gone]);
		int64_t size = align_up(b->bytes ? b->bytes : 1);
		p->naive_bytes += size;
		int64_t off = partner[order[i]] ? p->buf[partner[order[i]] - 1].offset
		                                : iv_first_fit(t, root, size);
		b->offset = off;
		if (off + size > p->arena_bytes)
			p->arena_bytes = off + size;
		rng ^= rng << 13; // xorshift32: the treap's priorities
		rng ^= rng >> 17;
		rng ^= rng << 5;
		t[i + 1] = (Iv){.lo = off, .hi = off + size, .pri = rng};
		iv_pull(t, i + 1);
		root = iv_insert(t, root, i + 1);
	}
	free(t);
	free(byend);
	free(bstart);
	free(order);
	p->live_bytes = live_peak(p);
	for (uint32_t b = 0; b < p->nbuf; b++)
		if (partner[b])
			p->buf[partner[b] - 1].last++;
	free(partner);
	plan_dump(p);
}
