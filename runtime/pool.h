// runtime/pool.h -- the CPU thread pool (pool.c): a context's workers and
// the parallel_for behind fadc_exec_v1 (abi.h).
#ifndef FADC_POOL_H
#define FADC_POOL_H

#include <stdint.h>

#include "abi.h"

typedef struct RtPool RtPool;

// What the pool did, for fadc_context_pool_stats.
typedef struct RtPoolStats {
	uint64_t threads_started; // workers started (0 until the first split kernel)
	uint64_t parallel_calls; // parallel_for calls from compiled code
	uint64_t jobs; // of them, those that woke the workers
	uint64_t inline_calls; // of them, those run whole on the calling thread (one chunk)
} RtPoolStats;

// A pool of nthreads threads, the calling thread included; no thread
// starts before the first rt_pool_parallel_for.  NULL: out of memory.
RtPool *rt_pool_new(int nthreads);
void rt_pool_free(RtPool *p); // joins the workers; NULL is a no-op
void rt_pool_stats(const RtPool *p, RtPoolStats *s); // p NULL: all zero
// Runs fn(args, lo, hi) over [0, n) in chunks of at least grain
// iterations, on the calling thread and the workers; returns when every
// chunk is done.
void rt_pool_parallel_for(RtPool *p, fadc_chunk_fn_v1 fn, void *args, int64_t n, int64_t grain);
// Whether FADC_CPU_PROFILE asks for a profile (pool.c): the context then
// has a pool even with one thread, and each pool reports when freed.
int rt_pool_profiling(void);

#endif
