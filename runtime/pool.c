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
// about four per thread; the calling thread and the workers take chunks
// from a shared atomic counter until none are left (dynamic, so a thread
// the operating system preempts on a loaded machine delays the job by at
// most one chunk).  Which thread computes which iterations never matters
// to the result: every iteration is computed by the same code whatever the
// chunking, so results are bit-identical for any number of threads.
//
// Lifetime: the pool is started lazily, by the first parallel_for of a
// context whose num_threads is above 1 (threads and one allocation, the
// only ones: later jobs allocate nothing); workers sleep on a condition
// variable between jobs and are joined by fadc_context_destroy.  If a
// thread cannot be started the pool runs with those that were (at worst
// the calling thread alone): parallel_for has no way to fail.
//
// Synchronization: one job at a time (a context is used by one thread at a
// time, fadc.h).  The job's fields are written under the mutex before the
// epoch is bumped and read by a worker under the mutex after it sees the
// new epoch.  A worker joins a job (active++) under the mutex only while
// the job is open, and takes chunks only after joining.  The caller, once
// every chunk is taken, closes the job under the mutex and waits until no
// joined worker is left: so it never waits for a worker that the operating
// system has not scheduled yet (on a loaded machine, the caller may do the
// whole job alone), and a late worker finds the job closed and goes back
// to sleep.  A worker's writes are published to the caller by the mutex it
// takes to leave the job, so the chunk functions' stores are visible when
// parallel_for returns.
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "abi.h"
#include "pool.h"

struct RtPool {
	int nthreads; // wanted, the calling thread included
	int nworkers; // started
	pthread_t *th;
	pthread_mutex_t mu;
	pthread_cond_t wake, done;
	uint64_t epoch; // bumped per job; a worker runs each epoch once
	int stop;
	int open; // the current job still admits workers
	int active; // workers in the current job
	// The current job.
	fadc_chunk_fn_v1 fn;
	void *args;
	int64_t n, chunk;
	atomic_int_fast64_t next; // first iteration not yet taken
	RtPoolStats st;
};

// Takes chunks of the current job until none are left.
static void
run_chunks(RtPool *p, fadc_chunk_fn_v1 fn, void *args, int64_t n, int64_t chunk)
{
	for (;;) {
		int64_t lo = atomic_fetch_add_explicit(&p->next, chunk, memory_order_relaxed);
		if (lo >= n)
			return;
		int64_t hi = n - lo < chunk ? n : lo + chunk;
		fn(args, lo, hi);
	}
}

static void *
worker(void *arg)
{
	RtPool *p = arg;
	uint64_t seen = 0;
	pthread_mutex_lock(&p->mu);
	for (;;) {
		while (!p->stop && p->epoch == seen)
			pthread_cond_wait(&p->wake, &p->mu);
		if (p->stop)
			break;
		seen = p->epoch;
		if (!p->open)
			continue; // done without this worker
		p->active++;
		fadc_chunk_fn_v1 fn = p->fn;
		void *args = p->args;
		int64_t n = p->n, chunk = p->chunk;
		pthread_mutex_unlock(&p->mu);
		run_chunks(p, fn, args, n, chunk);
		pthread_mutex_lock(&p->mu);
		if (--p->active == 0)
			pthread_cond_signal(&p->done);
	}
	pthread_mutex_unlock(&p->mu);
	return NULL;
}

RtPool *
rt_pool_new(int nthreads)
{
	RtPool *p = calloc(1, sizeof *p);
	if (!p)
		return NULL;
	p->nthreads = nthreads;
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->wake, NULL);
	pthread_cond_init(&p->done, NULL);
	atomic_init(&p->next, 0);
	return p;
}

// Starts the workers (first job): nthreads - 1 of them, or as many as the
// system gives.
static void
pool_start(RtPool *p)
{
	if (p->th || p->nthreads < 2)
		return;
	p->th = calloc((size_t)p->nthreads - 1, sizeof *p->th);
	if (!p->th) {
		p->nthreads = 1;
		return;
	}
	for (int i = 0; i < p->nthreads - 1; i++) {
		if (pthread_create(&p->th[i], NULL, worker, p))
			break;
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
	p->stop = 1;
	pthread_cond_broadcast(&p->wake);
	pthread_mutex_unlock(&p->mu);
	for (int i = 0; i < p->nworkers; i++)
		pthread_join(p->th[i], NULL);
	pthread_cond_destroy(&p->wake);
	pthread_cond_destroy(&p->done);
	pthread_mutex_destroy(&p->mu);
	free(p->th);
	free(p);
}

void
rt_pool_stats(const RtPool *p, RtPoolStats *s)
{
	static const RtPoolStats zero;
	*s = p ? p->st : zero;
}

// Chunks: at least grain iterations each, about CHUNKS_PER_THREAD per
// thread (dynamic scheduling balances a preempted thread's share).
#define CHUNKS_PER_THREAD 4

void
rt_pool_parallel_for(RtPool *p, fadc_chunk_fn_v1 fn, void *args, int64_t n, int64_t grain)
{
	if (n <= 0)
		return;
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
	pthread_mutex_lock(&p->mu);
	p->fn = fn;
	p->args = args;
	p->n = n;
	p->chunk = chunk;
	atomic_store_explicit(&p->next, 0, memory_order_relaxed);
	p->open = 1;
	p->epoch++;
	p->st.jobs++;
	pthread_cond_broadcast(&p->wake);
	pthread_mutex_unlock(&p->mu);
	run_chunks(p, fn, args, n, chunk);
	// Every chunk is taken: close the job, wait for the workers still in it.
	pthread_mutex_lock(&p->mu);
	p->open = 0;
	while (p->active)
		pthread_cond_wait(&p->done, &p->mu);
	pthread_mutex_unlock(&p->mu);
}
