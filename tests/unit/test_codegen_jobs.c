// tests/unit/test_codegen_jobs.c -- the compile's pool of threads and the
// piece of a name (codegen/jobs.c).  The pool: every job of a batch has
// run when cg_pool_wait returns, on 0 (the waiter works), 1, 3 and 8
// threads, each writing its own output (compared with the values computed
// here in order); a batch waited for while another's jobs are still
// queued; jobs of a cancelled batch not yet taken are skipped, the one
// running finishes; the progress line names one batch with its count and
// two at once each with its own; the CPU counted per batch.  The piece of
// a name: always below P; P to P + 1 moves names only out of piece P - 2^L
// into piece P (linear hashing: one piece splits, every other keeps its
// names); at a power of two every piece gets a fair share; the count.
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "codegen.h"
#include "testutil.h"

typedef struct Work {
	uint64_t in, out;
} Work;

// Some arithmetic, so that jobs overlap on several threads.
static uint64_t
churn(uint64_t x)
{
	for (int i = 0; i < 2000 + (int)(x % 3000); i++)
		x = x * 6364136223846793005ull + 1442695040888963407ull;
	return x;
}

static void
work(void *arg)
{
	Work *w = arg;
	w->out = churn(w->in);
}

typedef struct Gate {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int entered, open;
} Gate;

static Gate gate = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0};

// Blocks its thread until the test opens the gate.
static void
blocker(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&gate.mu);
	gate.entered = 1;
	pthread_cond_broadcast(&gate.cv);
	while (!gate.open)
		pthread_cond_wait(&gate.cv, &gate.mu);
	pthread_mutex_unlock(&gate.mu);
}

static char last_stage[200];
static long last_done, last_total;

static void
note(void *arg, const char *stage, long done, long total)
{
	(void)arg;
	snprintf(last_stage, sizeof last_stage, "%s", stage);
	last_done = done;
	last_total = total;
}

static void
t_pool_runs_every_job(void)
{
	enum { N = 300 };
	static Work w[N];
	uint64_t want[N];
	for (int i = 0; i < N; i++)
		want[i] = churn((uint64_t)i * 977);
	int threads[] = {0, 1, 3, 8};
	for (size_t t = 0; t < sizeof threads / sizeof threads[0]; t++) {
		CgPool *p = cg_pool_new(threads[t], NULL, NULL);
		CHECK(p != NULL);
		CHECK(cg_pool_threads(p) == (threads[t] ? threads[t] : 1));
		CgBatch b;
		cg_pool_batch(p, &b, "work");
		for (int i = 0; i < N; i++) {
			w[i] = (Work){(uint64_t)i * 977, 0};
			cg_pool_add(p, &b, work, &w[i], 2);
		}
		cg_pool_wait(p, &b);
		CHECK(b.pending == 0 && b.done == 2 * N && b.total == 2 * N && b.started == N);
		for (int i = 0; i < N; i++)
			CHECK(w[i].out == want[i]);
		CHECK(b.cpu > 0 && b.last >= b.first);
		cg_pool_unbatch(p, &b);
		cg_pool_free(p);
	}
}

// A batch waited for while another one's jobs are queued behind it.
static void
t_pool_two_batches(void)
{
	enum { N = 64 };
	static Work a[N], c[N];
	CgPool *p = cg_pool_new(2, NULL, NULL);
	CgBatch ba, bc;
	cg_pool_batch(p, &ba, "first");
	cg_pool_batch(p, &bc, "second");
	for (int i = 0; i < N; i++) {
		a[i] = (Work){(uint64_t)i, 0};
		cg_pool_add(p, &ba, work, &a[i], 1);
	}
	for (int i = 0; i < N; i++) {
		c[i] = (Work){(uint64_t)i + 1000, 0};
		cg_pool_add(p, &bc, work, &c[i], 1);
	}
	cg_pool_wait(p, &ba);
	for (int i = 0; i < N; i++)
		CHECK(a[i].out == churn((uint64_t)i));
	cg_pool_wait(p, &bc);
	for (int i = 0; i < N; i++)
		CHECK(c[i].out == churn((uint64_t)i + 1000));
	CHECK(cg_pool_cpu(p, NULL) >= cg_pool_cpu(p, &ba) + cg_pool_cpu(p, &bc) - 1e-9);
	cg_pool_unbatch(p, &ba);
	cg_pool_unbatch(p, &bc);
	cg_pool_free(p);
}

// Both batches at work: the stage names both counts.
static void
t_pool_progress_both(void)
{
	CgPool *p = cg_pool_new(1, note, NULL);
	CgBatch b1, b2;
	cg_pool_batch(p, &b1, "kernels (NVRTC)");
	cg_pool_batch(p, &b2, "LLVM pieces");
	gate.entered = gate.open = 0;
	cg_pool_add(p, &b1, blocker, NULL, 5);
	Work w = {7, 0};
	cg_pool_add(p, &b1, work, &w, 3);
	cg_pool_add(p, &b2, work, &w, 1);
	CHECK(!strcmp(last_stage, "kernels (NVRTC) 0/8, LLVM pieces 0/1") && last_total == 0);
	pthread_mutex_lock(&gate.mu);
	gate.open = 1;
	pthread_cond_broadcast(&gate.cv);
	pthread_mutex_unlock(&gate.mu);
	cg_pool_wait(p, &b1);
	cg_pool_wait(p, &b2);
	// With one thread, first in, first out: after NVRTC's last job the LLVM
	// batch alone was at work (the end of the last job reports nothing).
	CHECK(!strcmp(last_stage, "LLVM pieces") && last_done == 0 && last_total == 1);
	cg_pool_unbatch(p, &b1);
	cg_pool_unbatch(p, &b2);
	cg_pool_free(p);
}

// A cancelled batch: the job running ends, the queued ones are skipped,
// and the wait returns.
static void
t_pool_cancel(void)
{
	enum { N = 10 };
	static Work w[N];
	CgPool *p = cg_pool_new(1, NULL, NULL);
	CgBatch b;
	cg_pool_batch(p, &b, "cancelled");
	gate.entered = gate.open = 0;
	cg_pool_add(p, &b, blocker, NULL, 1);
	for (int i = 0; i < N; i++) {
		w[i] = (Work){(uint64_t)i, 0};
		cg_pool_add(p, &b, work, &w[i], 1);
	}
	pthread_mutex_lock(&gate.mu);
	while (!gate.entered) // the one thread holds the blocker
		pthread_cond_wait(&gate.cv, &gate.mu);
	pthread_mutex_unlock(&gate.mu);
	cg_pool_cancel(p, &b);
	pthread_mutex_lock(&gate.mu);
	gate.open = 1;
	pthread_cond_broadcast(&gate.cv);
	pthread_mutex_unlock(&gate.mu);
	cg_pool_wait(p, &b);
	CHECK(b.pending == 0 && b.done == N + 1);
	for (int i = 0; i < N; i++)
		CHECK(w[i].out == 0);
	cg_pool_unbatch(p, &b);
	cg_pool_free(p);
}

static uint64_t
rnd(uint64_t *s)
{
	*s += 0x9e3779b97f4a7c15ull;
	uint64_t z = *s;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static void
t_piece_of(void)
{
	enum { N = 20000 };
	static uint64_t h[N];
	uint64_t s = 1;
	for (int i = 0; i < N; i++) // names' FNV-1a: low bits alike, as the names
		h[i] = rnd(&s) << 12;
	for (unsigned P = 1; P <= 70; P++) {
		unsigned lo = 1;
		while (2 * lo <= P)
			lo *= 2;
		unsigned count[71] = {0};
		int out = 0, moved = 0, astray = 0;
		for (int i = 0; i < N; i++) {
			unsigned a = cg_piece_of(h[i], P), b = cg_piece_of(h[i], P + 1);
			out += a >= P || b >= P + 1;
			count[a < P ? a : 0]++;
			// One piece splits: a name moves only from P - lo to P.
			moved += a != b;
			astray += a != b && (a != P - lo || b != P);
		}
		CHECK(out == 0 && astray == 0 && moved > 0);
		// Each piece of P holds N / 2^L or N / 2^(L+1) names, about.
		for (unsigned k = 0; k < P; k++) {
			double share = (double)count[k] * 2 * lo / N;
			int split = P != lo && (k < P - lo || k >= lo);
			CHECK(share > (split ? 0.8 : 1.6) && share < (split ? 1.2 : 2.4));
		}
	}
	CHECK(cg_piece_of(12345, 0) == 0 && cg_piece_of(12345, 1) == 0);
	CHECK(cg_piece_count(0, 16, 64) == 1 && cg_piece_count(31, 16, 64) == 1);
	CHECK(cg_piece_count(32, 16, 64) == 2 && cg_piece_count(1017, 16, 64) == 63);
	CHECK(cg_piece_count(5000, 16, 64) == 64 && cg_piece_count(99, 0, 8) == 1);
}

int
main(void)
{
	t_pool_runs_every_job();
	t_pool_two_batches();
	t_pool_progress_both();
	t_pool_cancel();
	t_piece_of();
	return TU_DONE("test_codegen_jobs");
}
