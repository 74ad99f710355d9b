// runtime/pool.c -- the CPU thread pool: a context's worker threads and the
// parallel_for that compiled code calls to split a large kernel.
//
// A compiled kernel whose work is above the compiler's threshold (docs/
// CODEGEN.md, "Parallel kernels") is a function chunk(args, lo, hi) over a
// range [0, n) of independent outer iterations; the task function calls
// exec->parallel_for(exec, chunk, args, n, grain) (runtime/abi.h).  Small
// kernels, and so the small tasks of the ppl models, never call it: their
// arithmetic costs less than waking a thread.
//
// Scheduling: the range is cut into chunks of at least `grain` iterations,
// about four per thread, and the chunks into one contiguous block per
// thread (block k: chunks [k C / T, (k+1) C / T) of C, T threads, the
// calling thread 0).  A thread takes the chunks of its own block first,
// then those left in the others' (from block k+1 on), each block's next
// chunk from an atomic counter of its own.  The same kernel over the same
// range at the next step of a scan gives each thread the same block, so a
// thread's share of a loop-invariant operand (the recurrent weight of an
// LSTM step: 16.8 MB for deepspeech, 1 MB a thread at 16) stays in that
// core's cache from step to step, where one shared counter dealt the
// chunks out anew at every step; and a thread the operating system
// preempts delays the job by at most one chunk, since the others take the
// rest of its block.  Which thread computes which iterations never matters
// to the result: every iteration is computed by the same code whatever the
// chunking, so results are bit-identical for any number of threads.
//
// Lifetime: the pool is started lazily, by the first parallel_for of a
// context whose num_threads is above 1 (threads and one allocation, the
// only ones: later jobs allocate nothing); joined by fadc_context_destroy.
// If a thread cannot be started the pool runs with those that were (at
// worst the calling thread alone): parallel_for has no way to fail.
//
// Waking: a scan runs its split kernels once per step, thousands of jobs
// tens of microseconds apart, where waking 15 sleeping threads through a
// condition variable costs about as much as the job.  So a worker that
// finishes a job first spins for FADC_POOL_SPIN_US microseconds (default
// 100; 0: never) watching the job word, and only then sleeps on the
// condition variable; the caller wakes it only when some worker sleeps.
//
// Synchronization: one job at a time (a context is used by one thread at a
// time, fadc.h).  The job word is 2 epoch + open.  The caller writes the
// job's fields, then the word (epoch + 1, open) with release order.  A
// worker that sees a new epoch, open, joins: active++ then reads the word
// again (both sequentially consistent) and takes part only if it is still
// that epoch and open, else leaves (active--).  The caller, once it finds
// no chunk left, closes the job (the word, open clear, sequentially
// consistent) and waits until active is 0: in the total order either the
// worker's active++ comes before the caller's read of active (which then
// waits for it), or after the close, and the worker's second read sees the
// job closed.  So the fields are never rewritten under a worker still in
// the job, the caller never waits for a worker that the operating system
// has not scheduled yet (on a loaded machine, the caller may do the whole
// job alone), and a worker's stores are published to the caller by its
// release decrement of active, which the caller reads with acquire order.
// Sleeping: a worker counts itself in `sleepers` under the mutex, reads the
// word again, and waits; the caller reads `sleepers` after writing the
// word and broadcasts under the mutex when it is not 0, so a worker either
// sees the new word or is waiting when the broadcast comes.
#define _GNU_SOURCE // dladdr
#include <dlfcn.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "abi.h"
#include "pool.h"

// One thread's block of a job's chunks, on a cache line of its own (the
// other threads' counters are written at every chunk).
typedef struct RtBlock {
	_Alignas(64) atomic_int_fast64_t next; // next chunk index of the block
	int64_t end; // one past the block's last chunk index
} RtBlock;

struct RtPool {
	int nthreads; // wanted, the calling thread included
	int nworkers; // started
	pthread_t *th;
	pthread_mutex_t mu;
	pthread_cond_t wake;
	atomic_int stop; // written before a closed word of a new epoch
	atomic_uint_fast64_t job; // 2 epoch + open (see Synchronization)
	atomic_int active; // workers in the current job
	atomic_int sleepers; // workers waiting (or about to wait) on `wake`
	double spin_ns; // FADC_POOL_SPIN_US
	// The current job, written before its word.
	fadc_chunk_fn_v1 fn;
	void *args;
	int64_t n, chunk;
	int nblocks; // blocks of this job: the threads at its start
	RtBlock *blk; // nthreads of them (started with the workers)
	RtPoolStats st;
	struct ProfEntry *prof; // FADC_CPU_PROFILE=1: per chunk function (see prof_report)
};

// FADC_CPU_PROFILE=1: the wall time of every parallel_for by chunk function
// (one per split kernel), reported on stderr when the pool is freed (the
// context destroyed): which kernels take the time and, run at 1 and at N
// threads, which ones stop scaling.  The kernels below the split threshold
// are not timed (their total is the task's time less these).  Chunk
// functions are internal symbols of the artifact: the report names each by
// its module and offset, which `nm MODEL.so` maps to <task>.k<N>.<what>.chunk
// (bench/cpu-profile-names.sh).
enum { PROF_SLOTS = 4096 };
typedef struct ProfEntry {
	fadc_chunk_fn_v1 fn; // NULL: a free slot
	uint64_t calls;
	int64_t iters;
	double ns;
	// Where fn is, found at its first call (the module may be closed
	// before the report).
	char mod[64];
	unsigned long off;
} ProfEntry;

static double
now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

int
rt_pool_profiling(void)
{
	const char *e = getenv("FADC_CPU_PROFILE");
	return e && *e && strcmp(e, "0");
}

static void
prof_add(RtPool *p, fadc_chunk_fn_v1 fn, int64_t n, double ns)
{
	size_t h = ((size_t)fn >> 4) % PROF_SLOTS;
	for (size_t i = 0; i < PROF_SLOTS; i++, h = (h + 1) % PROF_SLOTS) {
		ProfEntry *e = &p->prof[h];
		if (e->fn && e->fn != fn)
			continue;
		if (!e->fn) {
			Dl_info d;
			const char *m = "?";
			e->off = (unsigned long)(uintptr_t)fn;
			if (dladdr((void *)(uintptr_t)fn, &d) && d.dli_fname) {
				m = strrchr(d.dli_fname, '/') ? strrchr(d.dli_fname, '/') + 1 : d.dli_fname;
				e->off -= (unsigned long)(uintptr_t)d.dli_fbase;
			}
			snprintf(e->mod, sizeof e->mod, "%s", m);
		}
		e->fn = fn;
		e->calls++;
		e->iters += n;
		e->ns += ns;
		return;
	}
}

static int
prof_cmp(const void *a, const void *b)
{
	double x = ((const ProfEntry *)a)->ns, y = ((const ProfEntry *)b)->ns;
	return x < y ? 1 : x > y ? -1 : 0;
}

static void
prof_report(RtPool *p)
{
	double total = 0;
	uint64_t calls = 0;
	int n = 0;
	for (int i = 0; i < PROF_SLOTS; i++)
		if (p->prof[i].fn) {
			p->prof[n++] = p->prof[i];
			total += p->prof[i].ns;
			calls += p->prof[i].calls;
		}
	if (!calls)
		return; // (another context of the process, its pool unused: no noise)
	qsort(p->prof, (size_t)n, sizeof *p->prof, prof_cmp);
	fprintf(stderr, "fadc: CPU profile, %d threads: %.3f ms in %llu parallel kernel calls "
	                "(%d kernels)\n",
	        p->nthreads, total / 1e6, (unsigned long long)calls, n);
	for (int i = 0; i < n && i < 40; i++) {
		const ProfEntry *e = &p->prof[i];
		fprintf(stderr, "  %5.1f%%  %10.3f ms  %6llu calls  %10lld iterations  %s+0x%lx\n",
		        100 * e->ns / total, e->ns / 1e6, (unsigned long long)e->calls,
		        (long long)e->iters, e->mod, e->off);
	}
}

// Runs chunk indices of block b until its counter is past its end.
static void
run_block(RtPool *p, RtBlock *b, fadc_chunk_fn_v1 fn, void *args, int64_t n, int64_t chunk)
{
	for (;;) {
		int64_t c = atomic_fetch_add_explicit(&b->next, 1, memory_order_relaxed);
		if (c >= b->end)
			return;
		int64_t lo = c * chunk, hi = n - lo < chunk ? n : lo + chunk;
		fn(args, lo, hi);
	}
	(void)p;
}

// Thread `self`'s part of the current job: its own block, then what is left
// of the others'.
static void
run_chunks(RtPool *p, int self, fadc_chunk_fn_v1 fn, void *args, int64_t n, int64_t chunk, int nblocks)
{
	for (int i = 0; i < nblocks; i++)
		run_block(p, &p->blk[(self + i) % nblocks], fn, args, n, chunk);
}

static void
pause_cpu(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield");
#endif
}

// Waits for a job word of another epoch than `seen`: spins for spin_ns,
// then sleeps on the condition variable.  Returns the word.
static uint64_t
wait_job(RtPool *p, uint64_t seen)
{
	uint64_t w = atomic_load_explicit(&p->job, memory_order_acquire);
	if (w >> 1 != seen)
		return w;
	if (p->spin_ns > 0) {
		double t0 = now_ns();
		for (unsigned i = 1;; i++) {
			pause_cpu();
			w = atomic_load_explicit(&p->job, memory_order_acquire);
			if (w >> 1 != seen)
				return w;
			if (!(i & 63) && now_ns() - t0 > p->spin_ns)
				break;
		}
	}
	pthread_mutex_lock(&p->mu);
	atomic_fetch_add(&p->sleepers, 1);
	while ((w = atomic_load(&p->job)) >> 1 == seen)
		pthread_cond_wait(&p->wake, &p->mu);
	atomic_fetch_sub(&p->sleepers, 1);
	pthread_mutex_unlock(&p->mu);
	return w;
}

typedef struct WorkerArg {
	RtPool *p;
	int self; // 1 .. nthreads - 1
} WorkerArg;

static void *
worker(void *arg)
{
	RtPool *p = ((WorkerArg *)arg)->p;
	int self = ((WorkerArg *)arg)->self;
	free(arg);
	uint64_t seen = 0;
	for (;;) {
		uint64_t w = wait_job(p, seen);
		seen = w >> 1;
		if (!(w & 1) && atomic_load(&p->stop))
			break;
		if (!(w & 1))
			continue; // closed: done without this worker
		atomic_fetch_add(&p->active, 1);
		if (atomic_load(&p->job) != w) {
			atomic_fetch_sub_explicit(&p->active, 1, memory_order_release);
			continue;
		}
		int nb = p->nblocks;
		run_chunks(p, self % nb, p->fn, p->args, p->n, p->chunk, nb);
		atomic_fetch_sub_explicit(&p->active, 1, memory_order_release);
	}
	return NULL;
}

RtPool *
rt_pool_new(int nthreads)
{
	RtPool *p = calloc(1, sizeof *p);
	if (!p)
		return NULL;
	p->nthreads = nthreads;
	if (rt_pool_profiling() && !(p->prof = calloc(PROF_SLOTS, sizeof *p->prof))) {
		free(p);
		return NULL;
	}
	const char *e = getenv("FADC_POOL_SPIN_US");
	p->spin_ns = 100e3;
	if (e && *e) {
		char *end;
		double us = strtod(e, &end);
		if (end != e && !*end && us >= 0 && us <= 1e6)
			p->spin_ns = us * 1e3;
	}
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->wake, NULL);
	atomic_init(&p->job, 0);
	atomic_init(&p->stop, 0);
	atomic_init(&p->active, 0);
	atomic_init(&p->sleepers, 0);
	return p;
}

// Starts the workers (first job): nthreads - 1 of them, or as many as the
// system gives.
static void
pool_start(RtPool *p)
{
	if (p->blk || p->nthreads < 2)
		return;
	p->th = calloc((size_t)p->nthreads - 1, sizeof *p->th);
	p->blk = aligned_alloc(64, (size_t)p->nthreads * sizeof *p->blk);
	if (!p->th || !p->blk) {
		free(p->th);
		free(p->blk);
		p->th = NULL;
		p->blk = NULL;
		p->nthreads = 1;
		return;
	}
	for (int i = 0; i < p->nthreads; i++)
		atomic_init(&p->blk[i].next, 0);
	for (int i = 0; i < p->nthreads - 1; i++) {
		WorkerArg *a = malloc(sizeof *a);
		if (!a)
			break;
		a->p = p;
		a->self = i + 1;
		if (pthread_create(&p->th[i], NULL, worker, a)) {
			free(a);
			break;
		}
		p->nworkers++;
	}
	p->st.threads_started = (uint64_t)p->nworkers;
}

void
rt_pool_free(RtPool *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->mu);
	atomic_store(&p->stop, 1);
	uint64_t w = atomic_load(&p->job);
	atomic_store(&p->job, ((w >> 1) + 1) << 1); // a new epoch, closed: leave
	pthread_cond_broadcast(&p->wake);
	pthread_mutex_unlock(&p->mu);
	for (int i = 0; i < p->nworkers; i++)
		pthread_join(p->th[i], NULL);
	pthread_cond_destroy(&p->wake);
	pthread_mutex_destroy(&p->mu);
	if (p->prof)
		prof_report(p);
	free(p->prof);
	free(p->th);
	free(p->blk);
	free(p);
}

void
rt_pool_stats(const RtPool *p, RtPoolStats *s)
{
	static const RtPoolStats zero;
	*s = p ? p->st : zero;
}

// Chunks: at least grain iterations each, about CHUNKS_PER_THREAD per
// thread (a preempted thread's share is taken by the others).
#define CHUNKS_PER_THREAD 4

void
rt_pool_parallel_for(RtPool *p, fadc_chunk_fn_v1 fn, void *args, int64_t n, int64_t grain)
{
	if (n <= 0)
		return;
	if (p->prof) {
		double t0 = now_ns();
		ProfEntry *keep = p->prof;
		p->prof = NULL;
		rt_pool_parallel_for(p, fn, args, n, grain);
		p->prof = keep;
		prof_add(p, fn, n, now_ns() - t0);
		return;
	}
	if (grain < 1)
		grain = 1;
	p->st.parallel_calls++;
	pool_start(p);
	int64_t want = (int64_t)(p->nworkers + 1) * CHUNKS_PER_THREAD;
	int64_t chunk = (n + want - 1) / want;
	if (chunk < grain)
		chunk = grain;
	if (p->nworkers == 0 || chunk >= n) {
		// One chunk: the calling thread alone, no wake-up.
		p->st.inline_calls++;
		fn(args, 0, n);
		return;
	}
	// Blocks of chunk indices, one per thread (fewer when the chunks are).
	int64_t nchunks = (n + chunk - 1) / chunk;
	int nb = p->nworkers + 1;
	if (nchunks < nb)
		nb = (int)nchunks;
	for (int k = 0; k < nb; k++) {
		atomic_store_explicit(&p->blk[k].next, (int64_t)k * nchunks / nb, memory_order_relaxed);
		p->blk[k].end = (int64_t)(k + 1) * nchunks / nb;
	}
	p->fn = fn;
	p->args = args;
	p->n = n;
	p->chunk = chunk;
	p->nblocks = nb;
	p->st.jobs++;
	uint64_t w = ((atomic_load_explicit(&p->job, memory_order_relaxed) >> 1) + 1) << 1 | 1;
	atomic_store(&p->job, w);
	if (atomic_load(&p->sleepers)) {
		pthread_mutex_lock(&p->mu);
		pthread_cond_broadcast(&p->wake);
		pthread_mutex_unlock(&p->mu);
	}
	run_chunks(p, 0, fn, args, n, chunk, nb);
	// Every chunk is taken: close the job, wait for the workers still in it.
	atomic_store(&p->job, w & ~(uint64_t)1);
	for (unsigned i = 1; atomic_load_explicit(&p->active, memory_order_acquire); i++) {
		pause_cpu();
		if (!(i & 1023))
			sched_yield();
	}
}
