// runtime/cumem.c -- the device memory pool of a CUDA context, as
// bookkeeping: chunks, the blocks that tile each chunk, first fit.
//
// One pool per fadc context (runtime/cuda.c).  It takes chunks from the
// driver (cuMemAlloc, through the grow callback: at least CUMEM_CHUNK =
// 64 MiB, or the request) and hands out CUMEM_ALIGN-aligned blocks by
// first fit, merging free neighbours when a block is freed; chunks are
// returned to the driver only when the context is destroyed
// (cumem_close).  Task arenas, declarations, outputs and runtime-owned
// tensors are blocks of it, so after the first run of a task nothing is
// allocated on the run path.
//
// Invariants: a chunk's blocks are a list in address order that tiles the
// chunk exactly (each block starts where the one before it ends), every
// size a multiple of CUMEM_ALIGN; no two free blocks are neighbours (a
// freed block merges with free ones on both sides, a split leaves its
// free rest beside a block that was not free), so a free block is a whole
// gap between live blocks.  Nothing here reads device memory: addresses
// are numbers, which is what lets tests/unit/test_cumem.c check the pool
// against a model of its own without a GPU.
#include <stdio.h>
#include <stdlib.h>

#include "cumem.h"

typedef struct Block {
	uint64_t addr, size;
	int free;
	struct Block *prev, *next; // address order within its chunk
} Block;

struct CuChunk {
	uint64_t base;
	uint64_t size;
	Block *first;
	struct CuChunk *next;
};

int
cumem_alloc(CuMem *m, size_t bytes, uint64_t *addr, CuMemGrow grow, void *ctx, char *err,
            size_t errlen)
{
	*addr = 0;
	if (!bytes)
		return 1;
	uint64_t need = ((uint64_t)bytes + CUMEM_ALIGN - 1) / CUMEM_ALIGN * CUMEM_ALIGN;
	for (int pass = 0; pass < 2; pass++) {
		for (CuChunk *k = m->chunks; k; k = k->next)
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
				m->live_blocks++;
				m->live_bytes += b->size;
				if (m->live_bytes > m->peak_bytes)
					m->peak_bytes = m->live_bytes;
				*addr = b->addr;
				return 1;
			}
		if (pass)
			break;
		// No block fits: a new chunk.
		CuChunk *k = calloc(1, sizeof *k);
		Block *b = calloc(1, sizeof *b);
		if (!k || !b) {
			free(k);
			free(b);
			snprintf(err, errlen, "out of memory");
			return 0;
		}
		k->size = need > CUMEM_CHUNK ? need : CUMEM_CHUNK;
		if (!grow(ctx, k->size, &k->base, err, errlen)) {
			free(k);
			free(b);
			return 0;
		}
		b->addr = k->base;
		b->size = k->size;
		b->free = 1;
		k->first = b;
		k->next = m->chunks;
		m->chunks = k;
		m->reserved_bytes += k->size;
	}
	snprintf(err, errlen, "device pool: no block of %llu bytes", (unsigned long long)need);
	return 0;
}

void
cumem_free(CuMem *m, uint64_t addr)
{
	if (!addr)
		return;
	for (CuChunk *k = m->chunks; k; k = k->next) {
		if (addr < k->base || addr >= k->base + k->size)
			continue;
		for (Block *b = k->first; b; b = b->next) {
			if (b->addr != addr || b->free)
				continue;
			b->free = 1;
			m->live_blocks--;
			m->live_bytes -= b->size;
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

void
cumem_close(CuMem *m, CuMemDrop drop, void *ctx)
{
	for (CuChunk *k = m->chunks, *next; k; k = next) {
		next = k->next;
		for (Block *b = k->first, *bn; b; b = bn) {
			bn = b->next;
			free(b);
		}
		drop(ctx, k->base, k->size);
		free(k);
	}
	*m = (CuMem){0};
}

// ---------------------------------------------------------------- free spans of a block

static int
span_cmp(const void *x, const void *y)
{
	const CuSpan *a = x, *b = y;
	if (a->off != b->off)
		return a->off < b->off ? -1 : 1;
	return a->bytes < b->bytes ? -1 : a->bytes > b->bytes;
}

size_t
cumem_spans_merge(CuSpan *s, size_t n)
{
	if (!n)
		return 0;
	qsort(s, n, sizeof *s, span_cmp);
	size_t m = 0;
	for (size_t i = 0; i < n; i++) {
		if (m && !span_cmp(&s[m - 1], &s[i])) {
			if (s[i].first < s[m - 1].first)
				s[m - 1].first = s[i].first;
			if (s[i].last > s[m - 1].last)
				s[m - 1].last = s[i].last;
		} else
			s[m++] = s[i];
	}
	return m;
}

static int
meets(uint64_t a, uint64_t na, uint64_t b, uint64_t nb)
{
	return na && nb && a < b + nb && b < a + na;
}

size_t
cumem_span_find(const CuSpan *s, size_t n, uint64_t off, uint64_t bytes)
{
	size_t lo = 0, hi = n;
	CuSpan k = {off, bytes, 0, 0};
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = span_cmp(&s[mid], &k);
		if (!c)
			return mid;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return n;
}

// A boundary of a span for cumem_free_gap: at `at`, `d` (+1 or -1) spans
// of class `c` begin or end (0: busy, 1: its own temporary, 2: the work's
// own tensor).
typedef struct Edge {
	uint64_t at;
	int c, d;
} Edge;

static int
edge_cmp(const void *x, const void *y)
{
	const Edge *a = x, *b = y;
	return a->at < b->at ? -1 : a->at > b->at;
}

uint64_t
cumem_free_gap(const CuSpan *s, size_t n, const uint8_t *inside, uint32_t c0, uint32_t c1,
               const CuSpan *own, size_t nown, uint64_t limit, uint64_t align, uint64_t *off)
{
	*off = 0;
	Edge *e = malloc((2 * (n + nown) + 1) * sizeof *e);
	if (!e)
		return 0; // no gap: the caller's own block
	size_t ne = 0;
	for (size_t i = 0; i < n + nown; i++) {
		const CuSpan *x = i < n ? &s[i] : &own[i - n];
		int c = i >= n ? 2 : inside[i] ? 1 : x->first <= c1 && x->last >= c0 ? 0 : -1;
		if (c < 0 || !x->bytes)
			continue; // used only before or only after: no bound
		e[ne++] = (Edge){x->off, c, 1};
		e[ne++] = (Edge){x->off + x->bytes, c, -1};
	}
	qsort(e, ne, sizeof *e, edge_cmp);
	// Sweep: a byte is free when no own tensor holds it and either no
	// busy span does or one of the steps' own temporaries does.
	// [prev, at) is the stretch before edge i; from: where the free run
	// that reaches it began (was: the stretch before it was free).
	uint64_t best = 0, from = 0, prev = 0;
	int cnt[3] = {0, 0, 0}, was = 1;
	for (size_t i = 0; i <= ne; i++) {
		uint64_t at = i < ne && e[i].at < limit ? e[i].at : limit;
		if (at > prev) {
			int free_now = !cnt[2] && (cnt[1] || !cnt[0]);
			if (free_now && !was)
				from = prev;
			uint64_t a = (from + align - 1) / align * align;
			if (free_now && at > a && at - a > best) {
				best = at - a;
				*off = a;
			}
			was = free_now;
			prev = at;
		}
		if (i == ne || e[i].at >= limit)
			break;
		cnt[e[i].c] += e[i].d;
	}
	free(e);
	return best;
}
