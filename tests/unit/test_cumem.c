// tests/unit/test_cumem.c -- the device memory pool's bookkeeping
// (runtime/cumem.c) without a GPU: its chunks come from a fake grow
// callback that hands out address ranges (numbers; nothing is read or
// written there), and every answer is checked against a model of its own.
//
// The model is the pool's contract written the plain way: the chunks in
// the order they were granted (newest first), each with its live blocks;
// a request of n bytes takes need = n rounded up to 256, and goes at the
// start of the first gap between live blocks (or before the first, after
// the last) of at least need bytes, chunk by chunk; where there is none,
// a new chunk of max(need, 64 MiB) is asked for and the block is its
// start.  That is first fit over blocks that merge when freed: a free
// block of the pool is always a whole gap, so the two agree address for
// address, and the model needs no free list.
//
// - Directed: bytes 0 (address 0, nothing taken); three blocks in a row
//   at consecutive addresses; a freed block reused by a smaller request;
//   frees in every order (middle first, then left and right; the ends
//   first, then the middle), after which the whole chunk is one block
//   again (a 64 MiB request fits without a new chunk); a request above
//   the chunk size gets a chunk of exactly its size; frees that name no
//   live block (0, twice, inside a block, outside every chunk) change
//   nothing; a failing grow passes its message through and leaves the
//   pool as it was; cumem_close gives every chunk back once, live blocks
//   or not.
// - Random: sequences of allocations (1 byte to 130 MiB) and frees, some
//   of them bad, on chunks that are sometimes contiguous in the address
//   space (the pool must not merge across chunks), several seeds: every
//   address as the model predicts, 256-aligned, inside a granted chunk,
//   overlapping no live block; the counters (live blocks, live bytes,
//   reserved bytes) equal the model's after every step; freeing
//   everything then reuses the chunks (no new chunk for any request that
//   fits one).
//
// Runs under ASan in the sanitizer build: the pool's block lists are
// freed by cumem_close, so a leak there shows too.
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../runtime/cumem.h"
#include "testutil.h"

#define MIB ((uint64_t)1 << 20)

// ---------------------------------------------------------------- the fake driver

enum { MAXCHUNK = 256 };

typedef struct Fake {
	uint64_t next; // where the next chunk goes
	int fail; // the next grow fails
	int contiguous; // chunks are granted back to back (else with a hole between)
	int ngrow;
	uint64_t base[MAXCHUNK], size[MAXCHUNK]; // granted, in order
	int dropped[MAXCHUNK];
	int ndrop, bad_drop;
} Fake;

static int
fake_grow(void *ctx, uint64_t size, uint64_t *base, char *err, size_t errlen)
{
	Fake *f = ctx;
	if (f->fail || f->ngrow == MAXCHUNK) {
		f->fail = 0;
		snprintf(err, errlen, "fake: no device memory for %" PRIu64 " bytes", size);
		return 0;
	}
	*base = f->next;
	f->base[f->ngrow] = f->next;
	f->size[f->ngrow++] = size;
	f->next += size + (f->contiguous ? 0 : 4096);
	return 1;
}

static void
fake_drop(void *ctx, uint64_t base, uint64_t size)
{
	Fake *f = ctx;
	f->ndrop++;
	for (int i = 0; i < f->ngrow; i++)
		if (f->base[i] == base) {
			f->bad_drop += f->dropped[i] || f->size[i] != size;
			f->dropped[i] = 1;
			return;
		}
	f->bad_drop++;
}

static void
fake_init(Fake *f, int contiguous)
{
	memset(f, 0, sizeof *f);
	f->next = (uint64_t)1 << 40;
	f->contiguous = contiguous;
}

// Every chunk granted given back exactly once, nothing else.
static void
check_dropped(const Fake *f)
{
	CHECK(f->ndrop == f->ngrow);
	CHECK(f->bad_drop == 0);
	for (int i = 0; i < f->ngrow; i++)
		CHECK(f->dropped[i]);
}

// ---------------------------------------------------------------- the model

enum { MAXLIVE = 4096 };

typedef struct Model {
	int nchunk;
	uint64_t cbase[MAXCHUNK], csize[MAXCHUNK]; // in the order granted
	int nlive;
	uint64_t addr[MAXLIVE], size[MAXLIVE]; // live blocks, in no order
	uint64_t peak; // the most live bytes since the start or the last reset
} Model;

static uint64_t
round_up(uint64_t n)
{
	return (n + 255) / 256 * 256;
}

static int
cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return (x > y) - (x < y);
}

// Where a block of need bytes goes: the first gap of chunk c that fits,
// or 0.
static uint64_t
model_gap(const Model *m, int c, uint64_t need)
{
	static uint64_t iv[2 * MAXLIVE];
	int n = 0;
	uint64_t lo = m->cbase[c], hi = lo + m->csize[c];
	for (int i = 0; i < m->nlive; i++)
		if (m->addr[i] >= lo && m->addr[i] < hi) {
			iv[2 * n] = m->addr[i];
			iv[2 * n + 1] = m->size[i];
			n++;
		}
	qsort(iv, (size_t)n, 2 * sizeof iv[0], cmp_u64); // by address (distinct)
	uint64_t at = lo;
	for (int i = 0; i < n; i++) {
		if (iv[2 * i] - at >= need)
			return at;
		at = iv[2 * i] + iv[2 * i + 1];
	}
	return hi - at >= need ? at : 0;
}

// The address the pool should give for `bytes`, and whether it needs a
// new chunk (*grow), which then starts at next.
static uint64_t
model_predict(const Model *m, uint64_t bytes, uint64_t next, int *grow)
{
	uint64_t need = round_up(bytes);
	*grow = 0;
	for (int c = m->nchunk - 1; c >= 0; c--) { // newest first
		uint64_t a = model_gap(m, c, need);
		if (a)
			return a;
	}
	*grow = 1;
	return next;
}

static uint64_t
model_live_bytes(const Model *m)
{
	uint64_t s = 0;
	for (int i = 0; i < m->nlive; i++)
		s += m->size[i];
	return s;
}

static uint64_t
model_reserved(const Model *m)
{
	uint64_t s = 0;
	for (int c = 0; c < m->nchunk; c++)
		s += m->csize[c];
	return s;
}

// The block at addr, or -1.
static int
model_find(const Model *m, uint64_t addr)
{
	for (int i = 0; i < m->nlive; i++)
		if (m->addr[i] == addr)
			return i;
	return -1;
}

static void
check_counters(const CuMem *p, const Model *m)
{
	CHECK(p->live_blocks == (uint64_t)m->nlive);
	CHECK(p->live_bytes == model_live_bytes(m));
	CHECK(p->reserved_bytes == model_reserved(m));
	CHECK(p->peak_bytes == m->peak);
}

// Allocates through the pool and checks the answer against the model
// (which then records it): the predicted address, aligned, inside a
// granted chunk, over no live block; the counters after it.  Returns the
// address.
static uint64_t
alloc_checked(CuMem *p, Model *m, Fake *f, uint64_t bytes)
{
	int grow;
	uint64_t want = model_predict(m, bytes, f->next, &grow), addr = 1;
	int ngrow = f->ngrow;
	char err[256] = "";
	int ok = cumem_alloc(p, (size_t)bytes, &addr, fake_grow, f, err, sizeof err);
	CHECK(ok);
	if (!ok) {
		fprintf(stderr, "  cumem_alloc(%" PRIu64 "): %s\n", bytes, err);
		return 0;
	}
	CHECK(addr == want);
	CHECK(f->ngrow == ngrow + grow);
	if (addr != want)
		fprintf(stderr, "  %" PRIu64 " bytes at %#" PRIx64 ", the model says %#" PRIx64 "\n",
		        bytes, addr, want);
	uint64_t need = round_up(bytes);
	if (grow) {
		CHECK(f->size[f->ngrow - 1] == (need > CUMEM_CHUNK ? need : CUMEM_CHUNK));
		m->cbase[m->nchunk] = f->base[f->ngrow - 1];
		m->csize[m->nchunk++] = f->size[f->ngrow - 1];
	}
	CHECK(addr % CUMEM_ALIGN == 0);
	int inside = 0;
	for (int c = 0; c < m->nchunk; c++)
		inside += addr >= m->cbase[c] && addr + need <= m->cbase[c] + m->csize[c];
	CHECK(inside == 1);
	for (int i = 0; i < m->nlive; i++)
		CHECK(addr + need <= m->addr[i] || m->addr[i] + m->size[i] <= addr);
	m->addr[m->nlive] = addr;
	m->size[m->nlive++] = need;
	if (model_live_bytes(m) > m->peak)
		m->peak = model_live_bytes(m);
	check_counters(p, m);
	// Every so often the high-water mark starts again from what is live
	// (fadc_context_reset_peak_memory), in both.
	if (m->nlive % 7 == 3) {
		cumem_reset_peak(p);
		m->peak = model_live_bytes(m);
		check_counters(p, m);
	}
	return addr;
}

// Frees through the pool; the model forgets the block (an address that
// is no live block's changes nothing in either).
static void
free_checked(CuMem *p, Model *m, uint64_t addr)
{
	cumem_free(p, addr);
	int i = model_find(m, addr);
	if (i >= 0) {
		m->nlive--;
		m->addr[i] = m->addr[m->nlive];
		m->size[i] = m->size[m->nlive];
	}
	check_counters(p, m);
}

static void
close_checked(CuMem *p, Fake *f)
{
	cumem_close(p, fake_drop, f);
	check_dropped(f);
	CHECK(p->chunks == NULL && p->live_blocks == 0 && p->live_bytes == 0 &&
	      p->reserved_bytes == 0);
}

// ---------------------------------------------------------------- directed

static void
test_directed(void)
{
	CuMem p = {0};
	Model m = {0};
	Fake f;
	fake_init(&f, 0);
	char err[256];

	// Nothing asked, nothing taken.
	uint64_t z = 7;
	CHECK(cumem_alloc(&p, 0, &z, fake_grow, &f, err, sizeof err) && z == 0);
	CHECK(f.ngrow == 0 && p.reserved_bytes == 0);

	// Three in a row, then a freed middle reused by a smaller request.
	uint64_t a = alloc_checked(&p, &m, &f, 1);
	uint64_t b = alloc_checked(&p, &m, &f, 1000);
	uint64_t c = alloc_checked(&p, &m, &f, 256);
	CHECK(a == f.base[0] && b == a + 256 && c == b + 1024 && f.ngrow == 1);
	free_checked(&p, &m, b);
	uint64_t b2 = alloc_checked(&p, &m, &f, 300);
	CHECK(b2 == b);
	uint64_t b3 = alloc_checked(&p, &m, &f, 512); // the rest of b's gap
	CHECK(b3 == b + 512);

	// Frees naming no live block change nothing.
	free_checked(&p, &m, 0);
	free_checked(&p, &m, b2 + 256); // inside b2
	free_checked(&p, &m, (uint64_t)1 << 50); // outside every chunk
	free_checked(&p, &m, b3);
	free_checked(&p, &m, b3); // twice

	// Middle first, then its neighbours: the chunk is one block again.
	free_checked(&p, &m, b2);
	free_checked(&p, &m, a);
	free_checked(&p, &m, c);
	CHECK(p.live_blocks == 0 && p.live_bytes == 0);
	uint64_t all = alloc_checked(&p, &m, &f, CUMEM_CHUNK);
	CHECK(all == f.base[0] && f.ngrow == 1);
	free_checked(&p, &m, all);

	// The ends first, then the middle (merging on both sides at once).
	a = alloc_checked(&p, &m, &f, 4096);
	b = alloc_checked(&p, &m, &f, 4096);
	c = alloc_checked(&p, &m, &f, 4096);
	free_checked(&p, &m, a);
	free_checked(&p, &m, c);
	free_checked(&p, &m, b);
	all = alloc_checked(&p, &m, &f, CUMEM_CHUNK);
	CHECK(all == f.base[0] && f.ngrow == 1);

	// A second chunk (the first is full), then one larger than a chunk:
	// a chunk of exactly its (rounded) size.
	uint64_t d = alloc_checked(&p, &m, &f, 10);
	CHECK(f.ngrow == 2 && d == f.base[1] && p.reserved_bytes == 2 * CUMEM_CHUNK);
	uint64_t big = alloc_checked(&p, &m, &f, 100 * MIB + 1);
	CHECK(f.ngrow == 3 && big == f.base[2] && f.size[2] == 100 * MIB + 256);

	// A failing grow: its message, address 0, the pool unchanged.
	f.fail = 1;
	uint64_t e = 7;
	CuMem before = p;
	int ok = cumem_alloc(&p, (size_t)(200 * MIB), &e, fake_grow, &f, err, sizeof err);
	CHECK(!ok && e == 0);
	CHECK(strstr(err, "fake: no device memory for 209715200 bytes") != NULL);
	CHECK(p.chunks == before.chunks && p.live_blocks == before.live_blocks &&
	      p.live_bytes == before.live_bytes && p.reserved_bytes == before.reserved_bytes);
	CHECK(f.ngrow == 3);
	check_counters(&p, &m);
	// ...and a request that fits needs no grow at all, failing or not.
	f.fail = 1;
	alloc_checked(&p, &m, &f, 1000);
	f.fail = 0;

	// Closed with live blocks: every chunk given back once.
	close_checked(&p, &f);
}

// ---------------------------------------------------------------- random

static uint64_t rng;

static uint64_t
next_rand(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

// Mostly small blocks, some of a few MiB, now and then one above a chunk.
static uint64_t
rand_size(void)
{
	uint64_t r = next_rand() % 100;
	if (r < 60)
		return 1 + next_rand() % 4096;
	if (r < 97)
		return 1 + next_rand() % (6 * MIB);
	return CUMEM_CHUNK + next_rand() % (66 * MIB);
}

static void
test_random(uint64_t seed, int steps, int contiguous)
{
	CuMem p = {0};
	static Model m;
	memset(&m, 0, sizeof m);
	Fake f;
	fake_init(&f, contiguous);
	rng = seed * 0x9E3779B97F4A7C15ull | 1;
	int fail0 = tu_nfail;
	for (int s = 0; s < steps && tu_nfail == fail0; s++) {
		uint64_t r = next_rand() % 100;
		// Allocations win while few blocks are live, frees past 150.
		int alloc = m.nlive == 0 || (m.nlive < 150 ? r < 60 : r < 30);
		if (alloc && m.nlive < MAXLIVE && f.ngrow < MAXCHUNK - 1)
			alloc_checked(&p, &m, &f, rand_size());
		else if (r % 10 == 0 && m.nlive) { // 256 bytes into a block: inside it, or the next
			uint64_t a = m.addr[next_rand() % (uint64_t)m.nlive];
			free_checked(&p, &m, a + 256);
		} else if (m.nlive) {
			uint64_t a = m.addr[next_rand() % (uint64_t)m.nlive];
			free_checked(&p, &m, a);
			if (r % 7 == 0)
				free_checked(&p, &m, a); // twice
		}
	}
	// Everything freed: every chunk is one block again, so a whole chunk
	// and then small requests take no new one.
	while (m.nlive && tu_nfail == fail0)
		free_checked(&p, &m, m.addr[m.nlive - 1]);
	int ngrow = f.ngrow;
	uint64_t whole = alloc_checked(&p, &m, &f, CUMEM_CHUNK);
	CHECK(whole == f.base[f.ngrow - 1]); // the newest chunk's start
	free_checked(&p, &m, whole);
	for (int i = 0; i < 50 && tu_nfail == fail0; i++)
		alloc_checked(&p, &m, &f, 1 + next_rand() % MIB);
	CHECK(f.ngrow == ngrow);
	if (tu_nfail != fail0)
		fprintf(stderr, "  (seed %" PRIu64 ", %s chunks)\n", seed,
		        contiguous ? "contiguous" : "separate");
	close_checked(&p, &f);
}

// cumem_free_gap on spans derived by hand: steps 3 .. 5 run; A [0, 100)
// is used by steps 0 .. 2 only (before: free), B [100, 200) by 4 (inside:
// the replaced steps' temporary, free though step 9 uses those bytes
// too), C [200, 300) by 1 and 9 (across, not inside: busy), D [300, 400)
// by 6 .. 8 (after: free), E [400, 500) is one of the work's own tensors
// (busy).  Free: [0, 300) but C: [0, 200), [300, 400), [500, 600): the
// widest is 200 bytes at 0.  Aligned to 256: 0 (200 bytes) and 512 (88).
// Without B's inside mark B spans 4 .. 9, across: busy, and [300, 400)
// and [500, 600) tie at 100 (the first wins).
static void
test_free_gap(void)
{
	CuSpan s[] = {
	    {300, 100, 6, 8}, {0, 100, 0, 2}, {200, 100, 1, 1}, {100, 100, 4, 4},
	    {200, 100, 9, 9}, {400, 100, 0, 0}, {100, 100, 9, 9},
	};
	CuSpan own[] = {{400, 100, 0, 0}};
	size_t n = cumem_spans_merge(s, 7);
	uint64_t off = 99;
	CHECK(n == 5 && s[0].off == 0 && s[2].off == 200 && s[2].first == 1 && s[2].last == 9);
	CHECK(cumem_span_find(s, n, 100, 100) == 1 && cumem_span_find(s, n, 100, 99) == n);
	uint8_t in[5] = {0, 1, 0, 0, 0}, none[5] = {0};
	CHECK(cumem_free_gap(s, n, in, 3, 5, own, 1, 600, 1, &off) == 200 && off == 0);
	CHECK(cumem_free_gap(s, n, in, 3, 5, own, 1, 600, 256, &off) == 200 && off == 0);
	CHECK(cumem_free_gap(s, n, in, 3, 5, own, 1, 150, 1, &off) == 150 && off == 0);
	CHECK(cumem_free_gap(s, n, none, 3, 5, own, 1, 600, 1, &off) == 100 && off == 0);
	CHECK(cumem_free_gap(s, n, none, 3, 5, own, 1, 600, 64, &off) == 100 && off == 0);
	CHECK(cumem_free_gap(NULL, 0, NULL, 3, 5, NULL, 0, 300, 1, &off) == 300 && off == 0);
	// A span used across the steps (busy) that shares bytes with one of
	// their own temporaries: those bytes are free (the temporary's, which
	// the memory plan keeps apart from everything live then: the busy
	// life is two buffers at one span, merged); the rest is busy, and an
	// own tensor inside the temporary's bytes stays busy.
	CuSpan u[] = {{0, 300, 1, 9}, {100, 100, 4, 4}};
	uint8_t in2[2] = {0, 1};
	CHECK(cumem_free_gap(u, 2, in2, 3, 5, NULL, 0, 400, 1, &off) == 100 && off == 100);
	CuSpan own2[] = {{150, 10, 0, 0}};
	CHECK(cumem_free_gap(u, 2, in2, 3, 5, own2, 1, 400, 1, &off) == 100 && off == 300);
	CHECK(cumem_free_gap(u, 2, in2, 3, 5, own2, 1, 350, 1, &off) == 50 && off == 100);
}

int
main(void)
{
	test_free_gap();
	test_directed();
	for (uint64_t seed = 1; seed <= 6; seed++)
		test_random(seed, 4000, (int)(seed & 1));
	return TU_DONE("test_cumem");
}
