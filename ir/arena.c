// ir/arena.c -- a chunked bump allocator.
//
// Compile-time data (graphs, source maps, modules) lives in arenas that are
// dropped wholesale: there is no free of a single object anywhere.  Chunks
// grow geometrically so nobody guesses a size up front; an allocation larger
// than a chunk gets a chunk of its own.  Size arithmetic is checked before
// it can overflow (arena_alloc_array).
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "ir.h"

typedef struct Chunk {
	struct Chunk *next;
	size_t size, used;
	_Alignas(16) unsigned char data[];
} Chunk;

struct Arena {
	Chunk *head;
	size_t next_size;
};

void
fadc_assert_fail(const char *cond, const char *hint, const char *file, int line)
{
	fprintf(stderr, "%s:%d: assertion '%s' failed: %s\n", file, line, cond, hint);
	abort();
}

// FADC_FAIL_ALLOC_AFTER=n: the n-th chunk allocation of this process fails.
static long alloc_count, alloc_fail_at = -1;

static void *
chunk_malloc(size_t size)
{
	if (alloc_fail_at < 0) {
		const char *e = getenv("FADC_FAIL_ALLOC_AFTER");
		alloc_fail_at = e ? atol(e) : 0;
	}
	if (alloc_fail_at > 0 && ++alloc_count >= alloc_fail_at)
		return NULL;
	return malloc(size);
}

Arena *
arena_new(void)
{
	Arena *a = calloc(1, sizeof *a);
	if (!a) {
		fprintf(stderr, "fadc: error: out of memory\n");
		exit(1); // the tools' statuses are 0, 1 (an error was printed) and 2 (usage)
	}
	a->next_size = 16 << 10;
	return a;
}

void
arena_free(Arena *a)
{
	if (!a)
		return;
	for (Chunk *c = a->head, *n; c; c = n) {
		n = c->next;
		free(c);
	}
	free(a);
}

void *
arena_alloc(Arena *a, size_t size)
{
	size = (size + 15) & ~(size_t)15;
	Chunk *c = a->head;
	if (!c || c->size - c->used < size) {
		size_t csize = a->next_size;
		if (csize < size)
			csize = size;
		if (a->next_size < (64u << 20))
			a->next_size *= 2;
		c = chunk_malloc(sizeof *c + csize);
		if (!c) {
			fprintf(stderr, "fadc: error: out of memory (arena chunk of %zu bytes)\n", csize);
			exit(1);
		}
		c->size = csize;
		c->used = 0;
		c->next = a->head;
		a->head = c;
	}
	void *p = c->data + c->used;
	c->used += size;
	return p;
}

void *
arena_zalloc(Arena *a, size_t size)
{
	void *p = arena_alloc(a, size);
	memset(p, 0, size);
	return p;
}

void *
arena_alloc_array(Arena *a, size_t n, size_t size)
{
	if (size && n > (SIZE_MAX / 2) / size) {
		fprintf(stderr, "fadc: error: allocation of %zu x %zu bytes overflows\n", n, size);
		exit(1);
	}
	return arena_zalloc(a, n * size);
}

char *
arena_strndup(Arena *a, const char *s, size_t n)
{
	char *p = arena_alloc(a, n + 1);
	memcpy(p, s, n);
	p[n] = 0;
	return p;
}

char *
arena_strdup(Arena *a, const char *s)
{
	return arena_strndup(a, s, strlen(s));
}

char *
arena_printf(Arena *a, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	char *p = arena_alloc(a, (size_t)n + 1);
	va_start(ap, fmt);
	vsnprintf(p, (size_t)n + 1, fmt, ap);
	va_end(ap);
	return p;
}

int
ir_verrf(char *err, size_t errlen, const char *fmt, va_list ap)
{
	sup_vmsg(err, errlen, fmt, ap); // support/msg.c: the one formatter
	return 0;
}

int
ir_errf(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	ir_verrf(err, errlen, fmt, ap);
	va_end(ap);
	return 0;
}

void
arena_grow(Arena *a, void **p, uint32_t *cap, uint32_t need, size_t size)
{
	if (need <= *cap)
		return;
	uint32_t ncap = *cap ? *cap : 8;
	while (ncap < need) {
		FADC_ASSERT(ncap < (1u << 30), "graph too large for 32-bit ids");
		ncap *= 2;
	}
	void *np = arena_alloc_array(a, ncap, size);
	if (*cap)
		memcpy(np, *p, (size_t)*cap * size);
	*p = np;
	*cap = ncap;
}
