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
#define _GNU_SOURCE // dladdr
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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
	if (rt_pool_profiling() && !(p->prof = calloc(PROF_SLOTS, sizeof *p->prof))) {
		free(p);
		return NULL;
	}
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
	if (p->prof)
		prof_report(p);
	free(p->prof);
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
