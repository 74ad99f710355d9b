// runtime/cumem.h -- the device memory pool's bookkeeping (runtime/cumem.c):
// which bytes of which chunk are handed out, as arithmetic on addresses.
// Nothing here touches CUDA: a chunk's memory comes from the caller's
// grow callback (runtime/cuda.c passes cuMemAlloc) and goes back through
// its drop callback, so the allocator is tested on any machine with
// addresses of its own (tests/unit/test_cumem.c).  (runtime/pool.c is the
// CPU thread pool, something else.)
#ifndef FADC_CUMEM_H
#define FADC_CUMEM_H

#include <stddef.h>
#include <stdint.h>

enum { CUMEM_ALIGN = 256 }; // blocks are multiples of it, at multiples of it
#define CUMEM_CHUNK ((uint64_t)64 << 20) // the least a chunk takes

typedef struct CuChunk CuChunk;

// A pool: all zeros is an empty one.  The counters are what
// fadc_context_stats reports.
typedef struct CuMem {
	CuChunk *chunks; // newest first
	uint64_t live_blocks, live_bytes; // blocks handed out, their bytes (rounded up)
	uint64_t reserved_bytes; // every chunk's bytes
	// The most live_bytes has been since the pool was made or since
	// cumem_reset_peak (fadc_context_memory's peak on a device).
	uint64_t peak_bytes;
} CuMem;

// A new chunk of `size` bytes: its address into *base (a multiple of
// CUMEM_ALIGN, never 0), or 0 with a message in err.
typedef int (*CuMemGrow)(void *ctx, uint64_t size, uint64_t *base, char *err, size_t errlen);
// Gives a chunk back (cumem_close).
typedef void (*CuMemDrop)(void *ctx, uint64_t base, uint64_t size);

// A block of at least `bytes` (rounded up to CUMEM_ALIGN) into *addr: the
// first free block that fits, in the chunks' order (newest first) and
// address order within each, split when larger; where none fits, a new
// chunk of max(bytes, CUMEM_CHUNK) from grow.  bytes 0 gives address 0.
// 0 with a message in err (grow's, or out of host memory).
int cumem_alloc(CuMem *m, size_t bytes, uint64_t *addr, CuMemGrow grow, void *ctx, char *err,
                size_t errlen);
// Frees the block at addr, merging it with free neighbours.  An address
// that is no live block's (0, freed already, inside a block) is ignored.
void cumem_free(CuMem *m, uint64_t addr);
// Starts a new high-water mark from what is live now.
static inline void cumem_reset_peak(CuMem *m) { m->peak_bytes = m->live_bytes; }
// Gives every chunk back through drop (live blocks or not) and empties m.
void cumem_close(CuMem *m, CuMemDrop drop, void *ctx);

// A span of a block's bytes that the steps `first` .. `last` use (an
// arena buffer and the first and last launch records that name it:
// runtime/cuda.c, conv_scratch).
typedef struct CuSpan {
	uint64_t off, bytes;
	uint32_t first, last;
} CuSpan;
// Sorts s by (off, bytes) and merges equal spans into one (the least
// first, the greatest last); returns how many remain.
size_t cumem_spans_merge(CuSpan *s, size_t n);
// The index of the span (off, bytes) in s (merged, sorted), or n.
size_t cumem_span_find(const CuSpan *s, size_t n, uint64_t off, uint64_t bytes);
// The widest stretch of [0, limit), starting at a multiple of align, that
// holds no value while steps c0 .. c1 run, as the work that replaces them:
// a byte is busy when one of the nown spans `own` (the work's own
// tensors) holds it, or when a span used both at or before c1 and at or
// after c0 but not by a step of c0 .. c1 (inside[i] = 0: a value that may
// live across) holds it and no span used inside does.  A span used inside
// that is none of the work's tensors is the replaced steps' temporary,
// which the memory plan keeps apart from every buffer live while they run
// (a convolution's range: codegen/plan.c), whatever other buffers use
// those bytes at other times; one used only before or only after holds
// nothing then.  Its offset into *off, its bytes returned (0: none, or out
// of memory).
uint64_t cumem_free_gap(const CuSpan *s, size_t n, const uint8_t *inside, uint32_t c0,
                        uint32_t c1, const CuSpan *own, size_t nown, uint64_t limit,
                        uint64_t align, uint64_t *off);

#endif
