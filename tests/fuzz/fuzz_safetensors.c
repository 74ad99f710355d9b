// tests/fuzz/fuzz_safetensors.c -- libFuzzer harness over the .safetensors
// reader.
//
// Any file must give its tensors or a one-line error: never a crash, a
// leak, undefined behaviour or an allocation larger than the file justifies
// (ASan, UBSan, -rss_limit_mb, -malloc_limit_mb).  What reads must be what
// runtime/tensorio.h promises: each tensor named (valid UTF-8, distinct,
// not "__metadata__": what the writer asks of names, so whatever the
// reader accepts the writer can write), rank, dims and data as in the .npy
// harness; and it must survive a round trip through tio_safetensors_write
// (in the file's order, the same tensors).  The JSON header is where the
// reader's work is: strings with escapes and surrogates, integers at the
// edges of int64, nested metadata, offsets that overlap or leave holes.
//
// Seeds (tests/fuzz/corpus-st): the files test_tensorio writes, good and
// malformed, and the hand-written one of tests/cli/cli-params.sh.
#define _GNU_SOURCE // memfd_create
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_file.h"
#include "tensorio.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
bad(const char *what, const char *err)
{
	fprintf(stderr, "fuzz_safetensors: %s%s%s\n", what, err ? ": " : "", err ? err : "");
	abort();
}

static size_t
check(const tio_tensor *t)
{
	if (!t->name || !strcmp(t->name, "__metadata__") || t->rank < 0 || t->rank > TIO_MAXDIM ||
	    !tio_dtype_size(t->dtype))
		bad("a tensor read without a name, with a bad rank or a bad dtype", NULL);
	int64_t n = tio_numel(t);
	if (n < 0)
		bad("a tensor read with bad dims", NULL);
	size_t bytes = (size_t)n * tio_dtype_size(t->dtype);
	if ((n == 0) != (t->data == NULL))
		bad("data must be NULL exactly when numel is 0", NULL);
	const unsigned char *p = t->data;
	for (size_t i = 0; i < bytes; i++)
		if (t->dtype == TIO_BOOL && p[i] > 1)
			bad("a bool element other than 0 or 1", NULL);
	return bytes;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char err[256];
	tio_tensor *ts = (tio_tensor *)&err, *back;
	int n = -7, nback;
	if (tio_safetensors_read(fuzz_file(data, size), &ts, &n, err, sizeof err)) {
		if (!err[0] || !memchr(err, 0, sizeof err) || strchr(err, '\n'))
			bad("a failure without a one-line message", err);
		if (ts || n)
			bad("a failed read left *ts or *n set", err);
		return 0;
	}
	if (n < 0 || (n == 0) != (ts == NULL))
		bad("a read with a bad count", NULL);
	for (int i = 0; i < n; i++) {
		check(&ts[i]);
		if (tio_find(ts, n, ts[i].name) != i)
			bad("two tensors with one name", ts[i].name);
	}
	const char *out = fuzz_tmp("rt.safetensors");
	if (tio_safetensors_write(out, ts, n, err, sizeof err))
		bad("tensors that read do not write", err);
	if (tio_safetensors_read(out, &back, &nback, err, sizeof err))
		bad("written tensors do not read back", err);
	if (nback != n)
		bad("the round trip changed the number of tensors", NULL);
	for (int i = 0; i < n; i++) {
		const tio_tensor *a = &ts[i], *b = &back[i];
		size_t bytes = check(a);
		if (strcmp(a->name, b->name) || a->dtype != b->dtype || a->rank != b->rank ||
		    memcmp(a->dim, b->dim, sizeof(int64_t) * (size_t)a->rank) ||
		    (bytes && memcmp(a->data, b->data, bytes)))
			bad("the round trip changed a tensor", a->name);
	}
	tio_free_all(back, nback);
	tio_free_all(ts, n);
	return 0;
}
