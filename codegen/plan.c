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
#include <stdlib.h>
#include <string.h>

#include "codegen.h"

#define ALIGN 64

static int64_t
align_up(int64_t n)
{
	return (n + ALIGN - 1) / ALIGN * ALIGN;
}

// seen[id] == k + 1: expression id already visited for kernel k (a stamp
// per kernel, not a cleared array: clearing nx bytes per kernel was
// quadratic, 80% of compiling detr's vhp at -O0).
typedef struct Span {
	int64_t lo, hi; // bytes [lo, hi) of a placed buffer
} Span;

static int
span_cmp(const void *a, const void *b)
{
	const Span *x = a, *y = b;
	return x->lo < y->lo ? -1 : x->lo > y->lo ? 1 : 0;
}

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
	// The lowest offset clear of every placed buffer whose life overlaps:
	// those buffers' byte ranges sorted by start, swept once (the first gap
	// of `size` bytes).  The answer is unique (the least feasible offset),
	// so this places exactly as restarting a scan after every move did, in
	// O(m log m) instead of O(m) per move.
	Span *sp = calloc(nt + 1, sizeof *sp);
	FADC_ASSERT(sp != NULL, "cg_plan: out of memory");
	p->arena_bytes = p->naive_bytes = 0;
	for (uint32_t i = 0; i < nt; i++) {
		KBuf *b = &p->buf[order[i]];
		int64_t size = align_up(b->bytes ? b->bytes : 1);
		p->naive_bytes += size;
		uint32_t m = 0;
		for (uint32_t j = 0; j < i; j++) {
			const KBuf *o = &p->buf[order[j]];
			if (o->last < b->first || b->last < o->first)
				continue; // disjoint lifetimes
			sp[m++] = (Span){o->offset, o->offset + align_up(o->bytes ? o->bytes : 1)};
		}
		qsort(sp, m, sizeof *sp, span_cmp);
		int64_t off = 0;
		for (uint32_t j = 0; j < m && sp[j].lo < off + size; j++)
			if (sp[j].hi > off)
				off = sp[j].hi;
		b->offset = off;
		if (off + size > p->arena_bytes)
			p->arena_bytes = off + size;
	}
	free(sp);
	free(order);
}
