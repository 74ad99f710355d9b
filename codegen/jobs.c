// codegen/jobs.c -- the compile's threads, and which piece a name goes in
// (docs/CODEGEN.md "Compile time").
//
// One pool of FADC_JOBS threads (CgOptions.jobs; the online cores by
// default) runs every compilation of a compile: the NVRTC programs of the
// CUDA code (compile.c) and the LLVM pieces of the CPU code
// (llvm_pieces.c).  They used to run as two phases, each on threads of its
// own; in one pool the LLVM pieces are emitted and queued while NVRTC
// compiles, and both kinds keep the threads busy together.  Jobs are
// taken first in, first out; a batch groups the jobs one caller waits
// for (the NVRTC programs, whose images the descriptor records; the LLVM
// pieces).  A job owns its inputs and writes only its own outputs, and
// callers read the outputs in their own fixed order after waiting, so the
// order jobs run in, and the number of threads, change no byte of an
// artifact.
//
// The piece of a name (cg_piece_of) is linear hashing: a piece count P
// that grows one at a time splits one piece in two and leaves every other
// piece as it was, so that a change that moves P (a few kernels added)
// recompiles two pieces rather than all of them.
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "codegen.h"

typedef struct Job {
	void (*fn)(void *);
	void *arg;
	CgBatch *b;
	long weight;
} Job;

enum { POOL_MAX_BATCHES = 8, POOL_MAX_THREADS = 64 };

struct CgPool {
	pthread_mutex_t mu;
	pthread_cond_t work; // a job was queued, or stop
	pthread_cond_t done; // a job ended
	Job *q; // the queue: q[head .. n)
	size_t head, n, cap;
	pthread_t th[POOL_MAX_THREADS];
	int nth; // threads started (0: cg_pool_wait runs the jobs itself)
	int stop;
	CgProgressFn progress;
	void *progress_arg;
	CgBatch *batch[POOL_MAX_BATCHES]; // the batches progress reports on
	int nbatch;
	double cpu; // of every job ended
};

static double
now_s(clockid_t id)
{
	struct timespec ts;
	clock_gettime(id, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

// The progress line (with p->mu held): one batch at work shows its own
// count ("[3/17] LLVM pieces"); two at once show both, "kernels (NVRTC)
// 212/640, LLVM pieces 3/17".
static void
report_locked(CgPool *p)
{
	if (!p->progress)
		return;
	CgBatch *on[POOL_MAX_BATCHES];
	int non = 0;
	for (int i = 0; i < p->nbatch; i++)
		if (p->batch[i]->total > 0 && p->batch[i]->done < p->batch[i]->total)
			on[non++] = p->batch[i];
	if (non == 1) {
		p->progress(p->progress_arg, on[0]->name, on[0]->done, on[0]->total);
		return;
	}
	if (!non)
		return;
	char stage[160];
	size_t k = 0;
	for (int i = 0; i < non && k < sizeof stage; i++)
		k += (size_t)snprintf(stage + k, sizeof stage - k, "%s%s %ld/%ld", i ? ", " : "",
		                      on[i]->name, on[i]->done, on[i]->total);
	p->progress(p->progress_arg, stage, 0, 0);
}

// Runs job j (p->mu not held) and counts it.
static void
run_job(CgPool *p, Job j)
{
	double w0 = now_s(CLOCK_MONOTONIC), c0 = now_s(CLOCK_THREAD_CPUTIME_ID);
	int skip;
	pthread_mutex_lock(&p->mu);
	skip = j.b->cancel;
	if (!j.b->started)
		j.b->first = w0;
	j.b->started++;
	pthread_mutex_unlock(&p->mu);
	if (!skip)
		j.fn(j.arg);
	double c1 = now_s(CLOCK_THREAD_CPUTIME_ID), w1 = now_s(CLOCK_MONOTONIC);
	pthread_mutex_lock(&p->mu);
	j.b->cpu += c1 - c0;
	p->cpu += c1 - c0;
	if (w1 > j.b->last)
		j.b->last = w1;
	j.b->done += j.weight;
	j.b->pending--;
	report_locked(p);
	pthread_cond_broadcast(&p->done);
	pthread_mutex_unlock(&p->mu);
}

static void *
worker(void *arg)
{
	CgPool *p = arg;
	pthread_mutex_lock(&p->mu);
	for (;;) {
		while (p->head == p->n && !p->stop)
			pthread_cond_wait(&p->work, &p->mu);
		if (p->head == p->n) // stop, and nothing left
			break;
		Job j = p->q[p->head++];
		pthread_mutex_unlock(&p->mu);
		run_job(p, j);
		pthread_mutex_lock(&p->mu);
	}
	pthread_mutex_unlock(&p->mu);
	return NULL;
}

CgPool *
cg_pool_new(int nthreads, CgProgressFn progress, void *progress_arg)
{
	CgPool *p = calloc(1, sizeof *p);
	if (!p)
		return NULL;
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->work, NULL);
	pthread_cond_init(&p->done, NULL);
	p->progress = progress;
	p->progress_arg = progress_arg;
	if (nthreads > POOL_MAX_THREADS)
		nthreads = POOL_MAX_THREADS;
	// Threads that fail to start are not needed: with none, the waiting
	// caller runs the jobs (the same outputs).
	for (int i = 0; i < nthreads; i++)
		if (!pthread_create(&p->th[p->nth], NULL, worker, p))
			p->nth++;
	return p;
}

int
cg_pool_threads(const CgPool *p)
{
	return p->nth ? p->nth : 1;
}

double
cg_pool_cpu(CgPool *p, const CgBatch *b)
{
	pthread_mutex_lock(&p->mu);
	double c = b ? b->cpu : p->cpu;
	pthread_mutex_unlock(&p->mu);
	return c;
}

void
cg_pool_batch(CgPool *p, CgBatch *b, const char *name)
{
	memset(b, 0, sizeof *b);
	b->name = name;
	pthread_mutex_lock(&p->mu);
	if (p->nbatch < POOL_MAX_BATCHES)
		p->batch[p->nbatch++] = b;
	pthread_mutex_unlock(&p->mu);
}

void
cg_pool_unbatch(CgPool *p, CgBatch *b)
{
	pthread_mutex_lock(&p->mu);
	for (int i = 0; i < p->nbatch; i++)
		if (p->batch[i] == b) {
			memmove(p->batch + i, p->batch + i + 1, (size_t)(p->nbatch - i - 1) * sizeof *p->batch);
			p->nbatch--;
			break;
		}
	pthread_mutex_unlock(&p->mu);
}

void
cg_pool_add(CgPool *p, CgBatch *b, void (*fn)(void *), void *arg, long weight)
{
	Job j = {fn, arg, b, weight};
	pthread_mutex_lock(&p->mu);
	if (p->n == p->cap && p->head > 0) { // reuse the taken front
		memmove(p->q, p->q + p->head, (p->n - p->head) * sizeof *p->q);
		p->n -= p->head;
		p->head = 0;
	}
	if (p->n == p->cap) {
		size_t cap = p->cap ? 2 * p->cap : 64;
		Job *q = realloc(p->q, cap * sizeof *q);
		if (q) {
			p->q = q;
			p->cap = cap;
		}
	}
	b->total += weight;
	b->pending++;
	if (p->n < p->cap) {
		p->q[p->n++] = j;
		report_locked(p);
		pthread_cond_signal(&p->work);
		pthread_mutex_unlock(&p->mu);
		return;
	}
	pthread_mutex_unlock(&p->mu);
	run_job(p, j); // no memory for the queue: the job now, in this thread
}

void
cg_pool_wait(CgPool *p, CgBatch *b)
{
	pthread_mutex_lock(&p->mu);
	while (b->pending > 0) {
		if (!p->nth && p->head < p->n) { // no threads: this one works
			Job j = p->q[p->head++];
			pthread_mutex_unlock(&p->mu);
			run_job(p, j);
			pthread_mutex_lock(&p->mu);
			continue;
		}
		pthread_cond_wait(&p->done, &p->mu);
	}
	pthread_mutex_unlock(&p->mu);
}

void
cg_pool_cancel(CgPool *p, CgBatch *b)
{
	pthread_mutex_lock(&p->mu);
	b->cancel = 1;
	pthread_mutex_unlock(&p->mu);
}

void
cg_pool_free(CgPool *p)
{
	if (!p)
		return;
	// Every queued job runs (or is skipped, cancelled) before the threads
	// end: a job's inputs are its caller's, freed only after this.
	pthread_mutex_lock(&p->mu);
	while (!p->nth && p->head < p->n) {
		Job j = p->q[p->head++];
		pthread_mutex_unlock(&p->mu);
		run_job(p, j);
		pthread_mutex_lock(&p->mu);
	}
	p->stop = 1;
	pthread_cond_broadcast(&p->work);
	pthread_mutex_unlock(&p->mu);
	for (int i = 0; i < p->nth; i++)
		pthread_join(p->th[i], NULL);
	pthread_cond_destroy(&p->work);
	pthread_cond_destroy(&p->done);
	pthread_mutex_destroy(&p->mu);
	free(p->q);
	free(p);
}

// ---------------------------------------------------------------- pieces

unsigned
cg_piece_count(uint64_t n, unsigned per, unsigned max)
{
	uint64_t p = per ? n / per : 1;
	return p < 1 ? 1 : p > max ? max : (unsigned)p;
}

unsigned
cg_piece_of(uint64_t h, unsigned P)
{
	if (P <= 1)
		return 0;
	// The low bits of FNV-1a depend on the low bits of the bytes alone:
	// mixed first (MurmurHash3's finalizer), so that every bit of the
	// name reaches the piece.
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdull;
	h ^= h >> 33;
	h *= 0xc4ceb9fe1a85ec53ull;
	h ^= h >> 33;
	// Linear hashing: with 2^L <= P < 2^(L+1), the piece is h mod 2^(L+1),
	// or h mod 2^L where that is P or more (a piece not split yet).  P + 1
	// splits piece P - 2^L alone (into it and P); at P = 2^(L+1) every
	// piece of level L has split, and the rule is h mod 2^(L+1) again.
	uint64_t lo = 1;
	while (2 * lo <= P)
		lo *= 2;
	uint64_t b = h & (2 * lo - 1);
	return (unsigned)(b < P ? b : b - lo);
}
