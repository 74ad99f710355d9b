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

void
cg_plan(KProgram *p)
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
	free(seen);
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
		int64_t off = iv_first_fit(t, root, size);
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
}
