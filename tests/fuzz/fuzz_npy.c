// tests/fuzz/fuzz_npy.c -- libFuzzer harness over the .npy reader.
//
// Any file must give a tensor or a one-line error: never a crash, a leak,
// undefined behaviour or an allocation larger than the file justifies (the
// harness runs under ASan and UBSan, with -rss_limit_mb and
// -malloc_limit_mb).  A tensor that reads must also be what
// runtime/tensorio.h promises: a rank 0..TIO_MAXDIM, non-negative dims
// whose product fits, data of exactly numel elements (every byte is read,
// so ASan sees a short buffer), bools 0 or 1; and it must survive a round
// trip: written with tio_npy_write and read back, the same tensor.
//
// Seeds (tests/fuzz/corpus-npy): the files test_tensorio writes, the good
// ones and the malformed ones, and what `fadc run --out` writes.
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
	fprintf(stderr, "fuzz_npy: %s%s%s\n", what, err ? ": " : "", err ? err : "");
	abort();
}

// Checks t against the header's promises; returns its data's size.
static size_t
check(const tio_tensor *t)
{
	if (t->name || t->rank < 0 || t->rank > TIO_MAXDIM || !tio_dtype_size(t->dtype))
		bad("a tensor read with a name, a bad rank or a bad dtype", NULL);
	int64_t n = tio_numel(t);
	if (n < 0)
		bad("a tensor read with bad dims", NULL);
	size_t bytes = (size_t)n * tio_dtype_size(t->dtype);
	if ((n == 0) != (t->data == NULL))
		bad("data must be NULL exactly when numel is 0", NULL);
	const unsigned char *p = t->data;
	unsigned sum = 0;
	for (size_t i = 0; i < bytes; i++) {
		sum += p[i];
		if (t->dtype == TIO_BOOL && p[i] > 1)
			bad("a bool element other than 0 or 1", NULL);
	}
	(void)sum;
	return bytes;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char err[256];
	tio_tensor t, back;
	memset(&t, 0x5a, sizeof t); // the reader must reset *t, even on failure
	if (tio_npy_read(fuzz_file(data, size), &t, err, sizeof err)) {
		if (!err[0] || !memchr(err, 0, sizeof err) || strchr(err, '\n'))
			bad("a failure without a one-line message", err);
		tio_tensor zero = {0};
		if (memcmp(&t, &zero, sizeof t))
			bad("a failed read left *t set", err);
		return 0;
	}
	size_t bytes = check(&t);
	const char *out = fuzz_tmp("rt.npy");
	if (tio_npy_write(out, &t, err, sizeof err))
		bad("a tensor that reads does not write", err);
	if (tio_npy_read(out, &back, err, sizeof err))
		bad("a written tensor does not read back", err);
	if (back.dtype != t.dtype || back.rank != t.rank ||
	    memcmp(back.dim, t.dim, sizeof(int64_t) * (size_t)t.rank) ||
	    (bytes && memcmp(back.data, t.data, bytes)))
		bad("the round trip changed the tensor", NULL);
	tio_free(&back);
	tio_free(&t);
	return 0;
}
