// tests/unit/test_tensorio.c -- the tensor file library (runtime/tensorio.c).
//
// What it pins down:
// - round trips through both formats for every dtype at ranks 0, 1 and 3
//   and for zero-size tensors;
// - the exact bytes numpy.save writes (headers written out by hand below,
//   so this test needs no Python), and the exact bytes of a safetensors
//   file;
// - reading files assembled byte by byte: npy versions 2.0 and 3.0, header
//   variations other writers produce, a safetensors file with metadata,
//   escapes and its data in another order than its header;
// - malformed files, each of which must fail with a message that names the
//   file and says what is wrong;
// - writers that refuse bad tensors and leave neither a partial file nor a
//   temporary one behind.
// All files live in a fresh temporary directory, removed at the end.
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L // mkdtemp, dirent
#endif
#include <dirent.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tensorio.h"
#include "testutil.h"

static char err[512];
static char dir[256];
// Stored into output pointers before a call, to see that the call resets them.
static tio_tensor sentinel;

// The path of a test file in the temporary directory; four live at once.
static const char *
path(const char *name)
{
	static char ring[4][512];
	static int next;
	char *p = ring[next++ % 4];

	snprintf(p, sizeof ring[0], "%s/%s", dir, name);
	return p;
}

static void
write_bytes(const char *name, const void *p, size_t n)
{
	FILE *f = fopen(path(name), "wb");

	if (!f || fwrite(p, 1, n, f) != n || fclose(f) != 0) {
		fprintf(stderr, "test_tensorio: cannot write %s\n", path(name));
		exit(1);
	}
}

// The whole file, malloc'ed; NULL if it does not exist.
static unsigned char *
read_bytes(const char *name, size_t *n)
{
	FILE *f = fopen(path(name), "rb");
	unsigned char *p;
	long len;

	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	len = ftell(f);
	fseek(f, 0, SEEK_SET);
	p = malloc((size_t)len + 1);
	if (!p || fread(p, 1, (size_t)len, f) != (size_t)len) {
		fprintf(stderr, "test_tensorio: cannot read %s\n", path(name));
		exit(1);
	}
	fclose(f);
	*n = (size_t)len;
	return p;
}

// An .npy file with the given version and header dict, padded as numpy
// pads (spaces and '\n' up to a multiple of 64), then ndata bytes.
static void
npy_make(const char *name, int major, const char *dict, const void *data, size_t ndata)
{
	size_t pre = major == 1 ? 10 : 12, n = strlen(dict), hlen, total;
	unsigned char *b;

	hlen = n + 1 + (64 - (pre + n + 1) % 64) % 64;
	total = pre + hlen + ndata;
	b = malloc(total);
	memcpy(b, "\x93NUMPY", 6);
	b[6] = (unsigned char)major;
	b[7] = 0;
	for (size_t i = 0; i < pre - 8; i++)
		b[8 + i] = (unsigned char)(hlen >> (8 * i));
	memcpy(b + pre, dict, n);
	memset(b + pre + n, ' ', hlen - n - 1);
	b[pre + hlen - 1] = '\n';
	if (ndata)
		memcpy(b + pre + hlen, data, ndata);
	write_bytes(name, b, total);
	free(b);
}

// A .safetensors file: 8-byte little-endian length of json, json, data.
static void
st_make(const char *name, const char *json, const void *data, size_t ndata)
{
	size_t n = strlen(json);
	unsigned char *b = malloc(8 + n + ndata + 1);

	for (int i = 0; i < 8; i++)
		b[i] = (unsigned char)((unsigned long long)n >> (8 * i));
	memcpy(b + 8, json, n);
	if (ndata)
		memcpy(b + 8 + n, data, ndata);
	write_bytes(name, b, 8 + n + ndata);
	free(b);
}

// The call must fail, with a message that names the file and contains
// words; and it must leave nothing allocated behind in its outputs.
static void
npy_bad(const char *name, const char *words, int line)
{
	const char *p = path(name);
	tio_tensor t;
	int rc;

	err[0] = 0;
	rc = tio_npy_read(p, &t, err, sizeof err);
	tu_ncheck++;
	if (rc == -1 && strstr(err, words) && strstr(err, p) && !t.data && !t.name && t.rank == 0)
		return;
	tu_nfail++;
	fprintf(stderr, "%s:%d: reading %s: expected an error saying \"%s\", got rc %d: \"%s\"\n",
	        __FILE__, line, name, words, rc, err);
	tio_free(&t);
}

static void
st_bad(const char *name, const char *words, int line)
{
	const char *p = path(name);
	tio_tensor *ts = &sentinel;
	int n = -1, rc;

	err[0] = 0;
	rc = tio_safetensors_read(p, &ts, &n, err, sizeof err);
	tu_ncheck++;
	if (rc == -1 && strstr(err, words) && strstr(err, p) && !ts && n == 0)
		return;
	tu_nfail++;
	fprintf(stderr, "%s:%d: reading %s: expected an error saying \"%s\", got rc %d: \"%s\"\n",
	        __FILE__, line, name, words, rc, err);
	if (rc == 0)
		tio_free_all(ts, n);
}

#define NPY_BAD(name, words) npy_bad(name, words, __LINE__)
#define ST_BAD(name, words) st_bad(name, words, __LINE__)
#define CHECK_ERR(call, words)                                                                 \
	do {                                                                                   \
		err[0] = 0;                                                                    \
		int rc_ = (call);                                                              \
		if (!tu_check(rc_ == -1 && strstr(err, words) != NULL, #call " fails: " words, \
		              __FILE__, __LINE__))                                             \
			fprintf(stderr, "    rc %d, err \"%s\"\n", rc_, err);                      \
	} while (0)
#define CHECK_OK(call)                                                                         \
	do {                                                                                   \
		err[0] = 0;                                                                    \
		int rc_ = (call);                                                              \
		if (!tu_check(rc_ == 0, #call, __FILE__, __LINE__))                            \
			fprintf(stderr, "    rc %d, err \"%s\"\n", rc_, err);                      \
	} while (0)

// Deterministic contents that exercise every byte: fractions, negative
// values, extremes of i64, and both bool values.
static void
fill(tio_tensor *t, int seed)
{
	int64_t n = tio_numel(t);

	t->data = n ? malloc((size_t)n * tio_dtype_size(t->dtype)) : NULL;
	for (int64_t i = 0; i < n; i++) {
		switch (t->dtype) {
		case TIO_F32: ((float *)t->data)[i] = (float)(i + seed) / 3.0f - 2.5f; break;
		case TIO_F64: ((double *)t->data)[i] = (double)(i * seed) / 7.0 - 1e300 * (i % 2); break;
		case TIO_I64:
			((int64_t *)t->data)[i] = i == 0 ? INT64_MIN : i == 1 ? INT64_MAX : i * 1000003 - seed;
			break;
		case TIO_BOOL: ((unsigned char *)t->data)[i] = (unsigned char)((i + seed) % 3 == 0); break;
		}
	}
}

static int
same(const tio_tensor *a, const tio_tensor *b)
{
	int64_t n = tio_numel(a);

	if (a->dtype != b->dtype || a->rank != b->rank || n != tio_numel(b))
		return 0;
	for (int i = 0; i < a->rank; i++)
		if (a->dim[i] != b->dim[i])
			return 0;
	if (n == 0)
		return !a->data && !b->data;
	return memcmp(a->data, b->data, (size_t)n * tio_dtype_size(a->dtype)) == 0;
}

// ---------------------------------------------------------------- round trips

static const struct {
	int rank;
	int64_t dim[3];
} shapes[] = {{0, {0}}, {1, {5}}, {3, {2, 3, 4}}, {1, {0}}, {3, {2, 0, 3}}};
#define NSHAPES 5
#define NDT 4

// tensorio.h writes its dtypes out (runtime/tensorio.c depends on nothing
// new); runtime/rt.c asserts their codes, this their names and sizes:
// support/dtypes.def's, row by row.
static void
test_dtypes_def(void)
{
#define DTYPE(N, name, bytes)                                                                      \
	CHECK(strcmp(tio_dtype_name(TIO_##N), #name) == 0);                                         \
	CHECK(tio_dtype_size(TIO_##N) == bytes);
#include "dtypes.def"
}

static void
test_round_trips(void)
{
	static tio_tensor ts[NDT * NSHAPES];
	static char names[NDT * NSHAPES][64];
	tio_tensor *back;
	int n = 0, nback;

	for (int d = 0; d < NDT; d++) {
		for (int s = 0; s < NSHAPES; s++) {
			tio_tensor *t = &ts[n], r;
			char file[64];

			t->dtype = (enum tio_dtype)d;
			t->rank = shapes[s].rank;
			memcpy(t->dim, shapes[s].dim, sizeof shapes[s].dim);
			fill(t, n);
			snprintf(file, sizeof file, "rt_%s_%d.npy", tio_dtype_name(t->dtype), s);
			CHECK_OK(tio_npy_write(path(file), t, err, sizeof err));
			CHECK_OK(tio_npy_read(path(file), &r, err, sizeof err));
			CHECK(same(t, &r));
			CHECK(r.name == NULL);
			tio_free(&r);
			// Dots in names, as PyTorch's state_dict writes them.
			snprintf(names[n], sizeof names[n], "layer%d.%d.%s.weight", s, d,
			         tio_dtype_name(t->dtype));
			t->name = names[n];
			n++;
		}
	}
	CHECK_OK(tio_safetensors_write(path("rt.safetensors"), ts, n, err, sizeof err));
	CHECK_OK(tio_safetensors_read(path("rt.safetensors"), &back, &nback, err, sizeof err));
	if (CHECK(nback == n)) {
		for (int i = 0; i < n; i++) {
			CHECK(strcmp(back[i].name, ts[i].name) == 0);
			CHECK(same(&back[i], &ts[i]));
			CHECK(tio_find(back, nback, ts[i].name) == i);
		}
	}
	CHECK(tio_find(back, nback, "layer9.weight") == -1);
	CHECK(tio_find(back, nback, "layer1.0") == -1);
	tio_free_all(back, nback);

	// An empty file: no tensors at all.
	CHECK_OK(tio_safetensors_write(path("empty.safetensors"), NULL, 0, err, sizeof err));
	back = &sentinel;
	CHECK_OK(tio_safetensors_read(path("empty.safetensors"), &back, &nback, err, sizeof err));
	CHECK(back == NULL && nback == 0);

	for (int i = 0; i < n; i++)
		free(ts[i].data);
}

// ---------------------------------------------------------------- exact bytes

#define S10 "          "

static void
expect_file(const char *name, const char *want, size_t nwant, int line)
{
	size_t n = 0;
	unsigned char *got = read_bytes(name, &n);

	tu_ncheck++;
	if (got && n == nwant && memcmp(got, want, n) == 0) {
		free(got);
		return;
	}
	tu_nfail++;
	fprintf(stderr, "%s:%d: %s: %zu bytes, expected %zu", __FILE__, line, name, n, nwant);
	for (size_t i = 0; got && i < n && i < nwant; i++)
		if (got[i] != (unsigned char)want[i]) {
			fprintf(stderr, "; first difference at byte %zu: %02x, expected %02x", i, got[i],
			        (unsigned char)want[i]);
			break;
		}
	fprintf(stderr, "\n");
	free(got);
}
#define EXPECT_FILE(name, lit) expect_file(name, lit, sizeof lit - 1, __LINE__)

static void
test_npy_exact(void)
{
	// np.save("a.npy", np.arange(6, dtype='<f4').reshape(2, 3)): the dict,
	// 21 - len("2") = 20 spare spaces for the first axis to grow, then 38
	// spaces and '\n' so that 10 + 118 = 128 bytes precede the data.
	static const char want_f4[] = "\x93NUMPY\x01\x00"
	                              "\x76\x00"
	                              "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }"
	                              S10 S10 S10 S10 S10 "        "
	                              "\n"
	                              "\x00\x00\x00\x00"
	                              "\x00\x00\x80\x3f"
	                              "\x00\x00\x00\x40"
	                              "\x00\x00\x40\x40"
	                              "\x00\x00\x80\x40"
	                              "\x00\x00\xa0\x40";
	// np.save("b.npy", np.array(1.5)): rank 0 has no axis to grow, so just
	// 62 spaces of padding.
	static const char want_f8[] = "\x93NUMPY\x01\x00"
	                              "\x76\x00"
	                              "{'descr': '<f8', 'fortran_order': False, 'shape': (), }"
	                              S10 S10 S10 S10 S10 S10 "  "
	                              "\n"
	                              "\x00\x00\x00\x00\x00\x00\xf8\x3f";
	// np.save("c.npy", np.zeros((0,) + (100000,) * 7, dtype='<i8')): the 20
	// spare spaces push the header past 128 bytes, so it pads to 192
	// (header length 182 = 0xb6: 112 + 20 + 49 + 1); no data at all.
	static const char want_i8[] = "\x93NUMPY\x01\x00"
	                              "\xb6\x00"
	                              "{'descr': '<i8', 'fortran_order': False, 'shape': (0, 100000, "
	                              "100000, 100000, 100000, 100000, 100000, 100000), }"
	                              S10 S10 S10 S10 S10 S10 "         "
	                              "\n";
	// np.save("d.npy", np.array([True, False, True])): 20 spare + 40.
	static const char want_b1[] = "\x93NUMPY\x01\x00"
	                              "\x76\x00"
	                              "{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }"
	                              S10 S10 S10 S10 S10 S10
	                              "\n"
	                              "\x01\x00\x01";
	float f4[6] = {0, 1, 2, 3, 4, 5};
	double f8 = 1.5;
	unsigned char b1[3] = {1, 0, 1};
	tio_tensor t;

	CHECK(sizeof want_f4 - 1 == 128 + 24 && sizeof want_f8 - 1 == 128 + 8);
	CHECK(sizeof want_i8 - 1 == 192 && sizeof want_b1 - 1 == 128 + 3);

	t = (tio_tensor){.dtype = TIO_F32, .rank = 2, .dim = {2, 3}, .data = f4};
	CHECK_OK(tio_npy_write(path("exact_f4.npy"), &t, err, sizeof err));
	EXPECT_FILE("exact_f4.npy", want_f4);

	t = (tio_tensor){.dtype = TIO_F64, .rank = 0, .data = &f8};
	CHECK_OK(tio_npy_write(path("exact_f8.npy"), &t, err, sizeof err));
	EXPECT_FILE("exact_f8.npy", want_f8);

	t = (tio_tensor){.dtype = TIO_I64, .rank = 8,
	                 .dim = {0, 100000, 100000, 100000, 100000, 100000, 100000, 100000}};
	CHECK_OK(tio_npy_write(path("exact_i8.npy"), &t, err, sizeof err));
	EXPECT_FILE("exact_i8.npy", want_i8);

	t = (tio_tensor){.dtype = TIO_BOOL, .rank = 1, .dim = {3}, .data = b1};
	CHECK_OK(tio_npy_write(path("exact_b1.npy"), &t, err, sizeof err));
	EXPECT_FILE("exact_b1.npy", want_b1);

	// Reading numpy's bytes back gives the array numpy saved.
	write_bytes("numpy_f4.npy", want_f4, sizeof want_f4 - 1);
	CHECK_OK(tio_npy_read(path("numpy_f4.npy"), &t, err, sizeof err));
	CHECK(t.dtype == TIO_F32 && t.rank == 2 && t.dim[0] == 2 && t.dim[1] == 3);
	CHECK(t.data && memcmp(t.data, f4, sizeof f4) == 0);
	tio_free(&t);
	CHECK(t.data == NULL && t.rank == 0);
	write_bytes("numpy_i8.npy", want_i8, sizeof want_i8 - 1);
	CHECK_OK(tio_npy_read(path("numpy_i8.npy"), &t, err, sizeof err));
	CHECK(t.dtype == TIO_I64 && t.rank == 8 && t.dim[7] == 100000 && tio_numel(&t) == 0);
	CHECK(t.data == NULL);
	tio_free(&t);
}

static void
test_st_exact(void)
{
	// The safetensors library's layout: compact JSON (54 bytes) padded
	// with spaces to 56, so the data starts at byte 64.
	static const char want[] = "\x38\x00\x00\x00\x00\x00\x00\x00"
	                           "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}"
	                           "  "
	                           "\x00\x00\x80\x3f"
	                           "\x00\x00\x00\xc0";
	float a[2] = {1, -2};
	tio_tensor t = {.name = "a", .dtype = TIO_F32, .rank = 1, .dim = {2}, .data = a};

	CHECK_OK(tio_safetensors_write(path("exact.safetensors"), &t, 1, err, sizeof err));
	EXPECT_FILE("exact.safetensors", want);
}

// ---------------------------------------------------------------- hand-made files

static void
test_npy_variants(void)
{
	double d3[3] = {1, 2, 3};
	int64_t one = -42;
	tio_tensor t;

	// Version 2.0 and 3.0: a 4-byte header length.
	npy_make("v2.npy", 2, "{'descr': '<f8', 'fortran_order': False, 'shape': (3,), }", d3,
	         sizeof d3);
	CHECK_OK(tio_npy_read(path("v2.npy"), &t, err, sizeof err));
	CHECK(t.dtype == TIO_F64 && t.rank == 1 && t.dim[0] == 3 && t.data &&
	      ((double *)t.data)[2] == 3);
	tio_free(&t);
	npy_make("v3.npy", 3, "{'descr': '<i8', 'fortran_order': False, 'shape': (), }", &one,
	         sizeof one);
	CHECK_OK(tio_npy_read(path("v3.npy"), &t, err, sizeof err));
	CHECK(t.dtype == TIO_I64 && t.rank == 0 && t.data && *(int64_t *)t.data == -42);
	tio_free(&t);
	// Other writers: double quotes, other key order, no trailing comma,
	// extra spaces, a trailing comma inside the tuple.
	npy_make("variant.npy", 1, "{ \"shape\" : ( 3 , ) , \"fortran_order\":False,\"descr\":\"<f8\"}",
	         d3, sizeof d3);
	CHECK_OK(tio_npy_read(path("variant.npy"), &t, err, sizeof err));
	CHECK(t.dtype == TIO_F64 && t.rank == 1 && t.dim[0] == 3);
	tio_free(&t);
	npy_make("variant2.npy", 1, "{'descr': '<f8', 'fortran_order': False, 'shape': (1, 3,)}",
	         d3, sizeof d3);
	CHECK_OK(tio_npy_read(path("variant2.npy"), &t, err, sizeof err));
	CHECK(t.rank == 2 && t.dim[0] == 1 && t.dim[1] == 3);
	tio_free(&t);
}

static void
test_st_handmade(void)
{
	// Header order and data order differ; metadata is skipped; a name with
	// a dot-path, one with escapes (\u00e9 is é, \ud83d\ude00 an emoji
	// written as a surrogate pair, \" a quote); a zero-size tensor whose
	// offsets sit between two others; trailing spaces after the JSON.
	static const char json[] =
		"{\"__metadata__\":{\"format\":\"pt\",\"note\":\"a\\\\b\"},"
		"\"layer1.0.conv1.weight\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[8,24]},"
		" \"b\\u00e9\\\"q\\ud83d\\ude00\" : {\"shape\":[],\"data_offsets\":[0,8],\"dtype\":\"I64\"},\n"
		"\"empty\":{\"dtype\":\"BOOL\",\"shape\":[0,3],\"data_offsets\":[24,24]},"
		"\"mask\":{\"dtype\":\"BOOL\",\"shape\":[3],\"data_offsets\":[24,27]}}   ";
	unsigned char data[27];
	float w[4] = {1, 2, 3, -4};
	int64_t s = -2;
	tio_tensor *ts;
	int n;

	memcpy(data, &s, 8);
	memcpy(data + 8, w, 16);
	memcpy(data + 24, "\x01\x00\x01", 3);
	st_make("hand.safetensors", json, data, sizeof data);
	CHECK_OK(tio_safetensors_read(path("hand.safetensors"), &ts, &n, err, sizeof err));
	if (!CHECK(n == 4))
		return;
	CHECK(strcmp(ts[0].name, "layer1.0.conv1.weight") == 0);
	CHECK(ts[0].dtype == TIO_F32 && ts[0].rank == 2 && ts[0].dim[0] == 2 && ts[0].dim[1] == 2);
	CHECK(memcmp(ts[0].data, w, sizeof w) == 0);
	CHECK(strcmp(ts[1].name, "b\xc3\xa9\"q\xf0\x9f\x98\x80") == 0);
	CHECK(ts[1].dtype == TIO_I64 && ts[1].rank == 0 && *(int64_t *)ts[1].data == -2);
	CHECK(ts[2].dtype == TIO_BOOL && ts[2].rank == 2 && ts[2].dim[0] == 0 && !ts[2].data);
	CHECK(ts[3].dtype == TIO_BOOL && memcmp(ts[3].data, "\x01\x00\x01", 3) == 0);
	CHECK(tio_find(ts, n, "mask") == 3 && tio_find(ts, n, "__metadata__") == -1);
	tio_free_all(ts, n);
}

// ---------------------------------------------------------------- malformed files

static void
test_npy_malformed(void)
{
	static const char ok_dict[] = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
	float f[6] = {0};
	unsigned char b[64];

	write_bytes("empty.npy", "", 0);
	NPY_BAD("empty.npy", "bad magic");
	memcpy(b, "\x93NUMPX\x01\x00\x10\x00", 10);
	memset(b + 10, ' ', 16);
	write_bytes("magic.npy", b, 26);
	NPY_BAD("magic.npy", "bad magic");
	npy_make("version.npy", 4, ok_dict, f, sizeof f);
	NPY_BAD("version.npy", "unsupported version 4.0");
	memcpy(b, "\x93NUMPY\x01\x01\x00\x00", 10);
	write_bytes("minor.npy", b, 10);
	NPY_BAD("minor.npy", "unsupported version 1.1");
	// The header claims 1000 bytes; the file has 40.
	memcpy(b, "\x93NUMPY\x01\x00\xe8\x03", 10);
	memset(b + 10, ' ', 30);
	write_bytes("hlen.npy", b, 40);
	NPY_BAD("hlen.npy", "header length 1000 runs past the end of the file (40 bytes)");
	// Version 2.0, a header length of 4 GiB - 1.
	memcpy(b, "\x93NUMPY\x02\x00\xff\xff\xff\xff", 12);
	write_bytes("hlen2.npy", b, 12);
	NPY_BAD("hlen2.npy", "header length 4294967295 runs past");
	memcpy(b, "\x93NUMPY\x02\x00\x01", 9);
	write_bytes("hlen3.npy", b, 9);
	NPY_BAD("hlen3.npy", "inside the header length");

	npy_make("list.npy", 1, "['descr', '<f4']", f, sizeof f);
	NPY_BAD("list.npy", "header is not a dict");
	npy_make("nodescr.npy", 1, "{'fortran_order': False, 'shape': (2, 3), }", f, sizeof f);
	NPY_BAD("nodescr.npy", "missing key 'descr'");
	npy_make("noorder.npy", 1, "{'descr': '<f4', 'shape': (2, 3), }", f, sizeof f);
	NPY_BAD("noorder.npy", "missing key 'fortran_order'");
	npy_make("noshape.npy", 1, "{'descr': '<f4', 'fortran_order': False, }", f, sizeof f);
	NPY_BAD("noshape.npy", "missing key 'shape'");
	npy_make("i4.npy", 1, "{'descr': '<i4', 'fortran_order': False, 'shape': (2, 3), }", f,
	         sizeof f);
	NPY_BAD("i4.npy", "unsupported descr '<i4'");
	npy_make("u1.npy", 1, "{'descr': '|u1', 'fortran_order': False, 'shape': (24,), }", f,
	         sizeof f);
	NPY_BAD("u1.npy", "unsupported descr '|u1'");
	npy_make("be.npy", 1, "{'descr': '>f4', 'fortran_order': False, 'shape': (2, 3), }", f,
	         sizeof f);
	NPY_BAD("be.npy", "'>f4', big-endian");
	npy_make("struct.npy", 1, "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (6,), }",
	         f, sizeof f);
	NPY_BAD("struct.npy", "structured dtypes are not supported");
	npy_make("fortran.npy", 1, "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }", f,
	         sizeof f);
	NPY_BAD("fortran.npy", "fortran_order is True");
	npy_make("order.npy", 1, "{'descr': '<f4', 'fortran_order': 0, 'shape': (2, 3), }", f,
	         sizeof f);
	NPY_BAD("order.npy", "'fortran_order' is not True or False");
	npy_make("entry.npy", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 'x'), }", f,
	         sizeof f);
	NPY_BAD("entry.npy", "bad shape entry 1");
	npy_make("float.npy", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (6.0,), }", f,
	         sizeof f);
	NPY_BAD("float.npy", "bad shape entry 0");
	npy_make("neg.npy", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, -3), }", f,
	         sizeof f);
	NPY_BAD("neg.npy", "negative dimension -3");
	npy_make("rank9.npy", 1,
	         "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1, 1, 1, 1, 1, 1, 1, 6), }",
	         f, sizeof f);
	NPY_BAD("rank9.npy", "too many dimensions");
	npy_make("prod.npy", 1,
	         "{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296), }", f,
	         sizeof f);
	NPY_BAD("prod.npy", "shape (4294967296, 4294967296) overflows");
	// The element count fits in 64 bits; times 4 bytes it does not.
	npy_make("bytes.npy", 1,
	         "{'descr': '<f4', 'fortran_order': False, 'shape': (4611686018427387904,), }", f,
	         sizeof f);
	NPY_BAD("bytes.npy", "overflows");
	npy_make("huge.npy", 1,
	         "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }", f,
	         sizeof f);
	NPY_BAD("huge.npy", "does not fit in 64 bits");
	npy_make("int.npy", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (6), }", f,
	         sizeof f);
	NPY_BAD("int.npy", "'shape' is not a tuple");
	npy_make("trunc.npy", 1, ok_dict, f, 12);
	NPY_BAD("trunc.npy", "data truncated: expected 24 bytes, found 12");
	npy_make("trail.npy", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (5,), }", f,
	         sizeof f);
	NPY_BAD("trail.npy", "4 trailing bytes after the data");
	npy_make("key.npy", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (6,), 'extra': 1}",
	         f, sizeof f);
	NPY_BAD("key.npy", "unexpected key 'extra'");
	npy_make("dup.npy", 1, "{'descr': '<f4', 'shape': (6,), 'fortran_order': False, 'shape': (6,)}",
	         f, sizeof f);
	NPY_BAD("dup.npy", "duplicate key 'shape'");
	npy_make("after.npy", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (6,)} x", f,
	         sizeof f);
	NPY_BAD("after.npy", "after the header dict");
	npy_make("comma.npy", 1, "{'descr': '<f4' 'fortran_order': False, 'shape': (6,)}", f,
	         sizeof f);
	NPY_BAD("comma.npy", "expected ',' or '}' after the value of 'descr'");
	npy_make("bool.npy", 1, "{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }",
	         "\x01\x02\x00", 3);
	NPY_BAD("bool.npy", "bool element 1 is 2, not 0 or 1");
	NPY_BAD("missing.npy", "cannot open");
	NPY_BAD("", "not a regular file"); // the temporary directory itself
}

static void
test_st_malformed(void)
{
	static const char f8[8] = {0};
	unsigned char b[16] = {0};

	write_bytes("short.safetensors", "\x02\x00\x00", 3);
	ST_BAD("short.safetensors", "truncated header: 3 bytes");
	// The header length says 100; 8 bytes follow.
	b[0] = 100;
	memset(b + 8, '{', 8);
	write_bytes("trunc.safetensors", b, 16);
	ST_BAD("trunc.safetensors", "truncated header: header length 100, but only 8 bytes follow");
	memset(b, 0xff, 8);
	write_bytes("huge.safetensors", b, 16);
	ST_BAD("huge.safetensors", "header length 18446744073709551615");

	st_make("colon.safetensors", "{\"a\" {\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}",
	        f8, 8);
	ST_BAD("colon.safetensors", "bad JSON in header at byte 5: expected ':'");
	st_make("comma.safetensors",
	        "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},}", f8, 8);
	ST_BAD("comma.safetensors", "bad JSON in header at byte 54: expected '\"'");
	st_make("array.safetensors", "[1, 2]", NULL, 0);
	ST_BAD("array.safetensors", "not a JSON object");
	st_make("escape.safetensors",
	        "{\"a\\x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", f8, 8);
	ST_BAD("escape.safetensors", "bad escape '\\x'");
	st_make("utf8.safetensors",
	        "{\"a\xc3\x28\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", f8, 8);
	ST_BAD("utf8.safetensors", "invalid UTF-8");
	st_make("overlong.safetensors",
	        "{\"\xc0\xaf\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", f8, 8);
	ST_BAD("overlong.safetensors", "invalid UTF-8");
	st_make("surrogate.safetensors",
	        "{\"\\udc00\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", f8, 8);
	ST_BAD("surrogate.safetensors", "lone low surrogate");
	st_make("ctrl.safetensors",
	        "{\"a\tb\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", f8, 8);
	ST_BAD("ctrl.safetensors", "control character 0x09");
	st_make("nul.safetensors",
	        "{\"a\\u0000b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", f8, 8);
	ST_BAD("nul.safetensors", "contains a NUL character");
	st_make("f16.safetensors", "{\"h\":{\"dtype\":\"F16\",\"shape\":[4],\"data_offsets\":[0,8]}}",
	        f8, 8);
	ST_BAD("f16.safetensors", "tensor 'h': unsupported dtype 'F16'");
	st_make("dup.safetensors",
	        "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
	        "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
	        f8, 8);
	ST_BAD("dup.safetensors", "duplicate tensor name 'a'");
	st_make("range.safetensors",
	        "{\"a\":{\"dtype\":\"F32\",\"shape\":[25],\"data_offsets\":[0,100]}}", f8, 8);
	ST_BAD("range.safetensors", "tensor 'a': data_offsets [0, 100] out of range");
	st_make("backwards.safetensors",
	        "{\"a\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[8,0]}}", f8, 8);
	ST_BAD("backwards.safetensors", "out of range");
	st_make("span.safetensors", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,4]}}",
	        f8, 4);
	ST_BAD("span.safetensors", "span 4 bytes, but F32 [2] needs 8");
	st_make("hole.safetensors", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
	        f8, 8);
	ST_BAD("hole.safetensors", "data bytes [0, 4) belong to no tensor");
	st_make("overlap.safetensors",
	        "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
	        "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
	        f8, 8);
	ST_BAD("overlap.safetensors", "tensor 'b' overlaps tensor 'a'");
	st_make("trail.safetensors", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
	        f8, 8);
	ST_BAD("trail.safetensors", "4 trailing bytes");
	st_make("nooff.safetensors", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1]}}", f8, 4);
	ST_BAD("nooff.safetensors", "tensor 'a' has no 'data_offsets'");
	st_make("neg.safetensors", "{\"a\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}",
	        f8, 8);
	ST_BAD("neg.safetensors", "tensor 'a': negative dimension -2");
	st_make("frac.safetensors", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2.0],\"data_offsets\":[0,8]}}",
	        f8, 8);
	ST_BAD("frac.safetensors", "only integers");
	st_make("zero.safetensors", "{\"a\":{\"dtype\":\"F32\",\"shape\":[02],\"data_offsets\":[0,8]}}",
	        f8, 8);
	ST_BAD("zero.safetensors", "leading zero");
	st_make("rank9.safetensors",
	        "{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,2],\"data_offsets\":[0,8]}}", f8,
	        8);
	ST_BAD("rank9.safetensors", "more than 8 dimensions");
	st_make("prod.safetensors",
	        "{\"a\":{\"dtype\":\"F64\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,8]}}",
	        f8, 8);
	ST_BAD("prod.safetensors", "shape [4294967296, 4294967296] overflows");
	st_make("bigint.safetensors",
	        "{\"a\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0,9223372036854775808]}}",
	        f8, 8);
	ST_BAD("bigint.safetensors", "does not fit in 64 bits");
	st_make("key.safetensors",
	        "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8],\"foo\":1}}", f8, 8);
	ST_BAD("key.safetensors", "tensor 'a': unexpected key 'foo'");
	st_make("dupkey.safetensors",
	        "{\"a\":{\"dtype\":\"F32\",\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", f8,
	        8);
	ST_BAD("dupkey.safetensors", "tensor 'a': duplicate key 'dtype'");
	st_make("meta.safetensors", "{\"__metadata__\":{\"n\":1}}", NULL, 0);
	ST_BAD("meta.safetensors", "__metadata__ values must be strings");
	st_make("nothing.safetensors", "{}", f8, 4);
	ST_BAD("nothing.safetensors", "4 trailing bytes after the header of a file with no tensors");
	st_make("after.safetensors", "{} {}", NULL, 0);
	ST_BAD("after.safetensors", "unexpected text after the header object");
	st_make("offsets3.safetensors",
	        "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,4,8]}}", f8, 8);
	ST_BAD("offsets3.safetensors", "data_offsets must be [begin, end]");
	st_make("bool.safetensors", "{\"m\":{\"dtype\":\"BOOL\",\"shape\":[2],\"data_offsets\":[0,2]}}",
	        "\x00\xff", 2);
	ST_BAD("bool.safetensors", "tensor 'm': bool element 1 is 255");
	st_make("unterminated.safetensors", "{\"a", NULL, 0);
	ST_BAD("unterminated.safetensors", "unterminated string");
	ST_BAD("missing.safetensors", "cannot open");
}

// ---------------------------------------------------------------- writers

static void
test_writers(void)
{
	float f[4] = {1, 2, 3, 4};
	tio_tensor t = {.dtype = TIO_F32, .rank = 1, .dim = {4}, .data = f}, r;
	tio_tensor two[2] = {t, t};
	size_t n0, n1;
	unsigned char *before, *after;

	CHECK_OK(tio_npy_write(path("keep.npy"), &t, err, sizeof err));
	before = read_bytes("keep.npy", &n0);
	// A bad tensor is refused before anything is written: the old file
	// stays as it was, and no new file appears.
	t.dim[0] = -4;
	CHECK_ERR(tio_npy_write(path("keep.npy"), &t, err, sizeof err), "negative dimension -4");
	CHECK_ERR(tio_npy_write(path("never.npy"), &t, err, sizeof err), "negative dimension");
	t.dim[0] = 4;
	t.data = NULL;
	CHECK_ERR(tio_npy_write(path("never.npy"), &t, err, sizeof err), "has 4 elements but no data");
	t.data = f;
	t.rank = 9;
	CHECK_ERR(tio_npy_write(path("never.npy"), &t, err, sizeof err), "rank 9, outside 0..8");
	t.rank = 1;
	t.dtype = (enum tio_dtype)7;
	CHECK_ERR(tio_npy_write(path("never.npy"), &t, err, sizeof err), "invalid dtype 7");
	t.dtype = TIO_F32;
	t.rank = 2;
	t.dim[0] = t.dim[1] = 4294967296;
	CHECK_ERR(tio_npy_write(path("never.npy"), &t, err, sizeof err), "overflows");
	t.rank = 1;
	t.dim[0] = 4;
	CHECK_ERR(tio_npy_write(path("no/such/dir/x.npy"), &t, err, sizeof err),
	          "cannot create temporary file");
	after = read_bytes("keep.npy", &n1);
	CHECK(before && after && n0 == n1 && memcmp(before, after, n0) == 0);
	CHECK(read_bytes("never.npy", &n1) == NULL);
	free(before);
	free(after);
	// Overwriting with a good tensor replaces the file.
	f[0] = 9;
	CHECK_OK(tio_npy_write(path("keep.npy"), &t, err, sizeof err));
	CHECK_OK(tio_npy_read(path("keep.npy"), &r, err, sizeof err));
	CHECK(r.data && ((float *)r.data)[0] == 9);
	tio_free(&r);

	two[0].name = "w";
	two[1].name = NULL;
	CHECK_ERR(tio_safetensors_write(path("never.safetensors"), two, 2, err, sizeof err),
	          "tensor 1 has no name");
	two[1].name = "w";
	CHECK_ERR(tio_safetensors_write(path("never.safetensors"), two, 2, err, sizeof err),
	          "duplicate tensor name 'w'");
	two[1].name = "bad\xff";
	CHECK_ERR(tio_safetensors_write(path("never.safetensors"), two, 2, err, sizeof err),
	          "not valid UTF-8");
	two[1].name = "__metadata__";
	CHECK_ERR(tio_safetensors_write(path("never.safetensors"), two, 2, err, sizeof err),
	          "reserved");
	two[1].name = "v";
	two[1].dim[0] = -1;
	CHECK_ERR(tio_safetensors_write(path("never.safetensors"), two, 2, err, sizeof err),
	          "tensor 'v' has negative dimension -1");
	CHECK(read_bytes("never.safetensors", &n1) == NULL);
	// Names that need escaping in JSON come back unchanged.
	two[1].dim[0] = 4;
	two[1].name = "q\"uo\\te\n\x01.\xc3\xa9";
	CHECK_OK(tio_safetensors_write(path("esc.safetensors"), two, 2, err, sizeof err));
	{
		tio_tensor *ts;
		int n;
		CHECK_OK(tio_safetensors_read(path("esc.safetensors"), &ts, &n, err, sizeof err));
		CHECK(n == 2 && tio_find(ts, n, two[1].name) == 1 && same(&ts[1], &two[1]));
		tio_free_all(ts, n);
	}
}

static void
test_misc(void)
{
	tio_tensor t = {.dtype = TIO_F64, .rank = 3, .dim = {2, 3, 4}};
	char small[8];

	CHECK(tio_numel(&t) == 24);
	t.rank = 0;
	CHECK(tio_numel(&t) == 1);
	t.rank = 2;
	t.dim[1] = -1;
	CHECK(tio_numel(&t) == -1);
	t.dim[0] = t.dim[1] = INT64_MAX / 2;
	CHECK(tio_numel(&t) == -1);
	t.rank = 9;
	CHECK(tio_numel(&t) == -1);
	CHECK(tio_numel(NULL) == -1);
	CHECK(tio_dtype_size(TIO_F32) == 4 && tio_dtype_size(TIO_F64) == 8);
	CHECK(tio_dtype_size(TIO_I64) == 8 && tio_dtype_size(TIO_BOOL) == 1);
	CHECK(tio_dtype_size((enum tio_dtype)9) == 0);
	CHECK(strcmp(tio_dtype_name(TIO_F32), "f32") == 0);
	CHECK(strcmp(tio_dtype_name(TIO_F64), "f64") == 0);
	CHECK(strcmp(tio_dtype_name(TIO_I64), "i64") == 0);
	CHECK(strcmp(tio_dtype_name(TIO_BOOL), "bool") == 0);
	CHECK(strcmp(tio_dtype_name((enum tio_dtype)-1), "?") == 0);
	CHECK(tio_find(NULL, 0, "a") == -1);
	tio_free(NULL);
	tio_free_all(NULL, 0);
	// A short error buffer gets a truncated, terminated message; none at
	// all is allowed.
	memset(small, 'x', sizeof small);
	CHECK(tio_npy_read(path("missing.npy"), &t, small, sizeof small) == -1);
	CHECK(small[7] == 0 && strlen(small) == 7);
	CHECK(tio_npy_read(path("missing.npy"), &t, NULL, 0) == -1);
}

// Every file the writers left must be one the test meant to write: no
// temporary file survives, failed or not.  Then the directory goes.
static void
cleanup(void)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int stray = 0;

	if (!CHECK(d != NULL))
		return;
	while ((e = readdir(d))) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		if (strstr(e->d_name, ".tmp")) {
			fprintf(stderr, "test_tensorio: stray temporary file %s\n", e->d_name);
			stray++;
		}
		remove(path(e->d_name));
	}
	closedir(d);
	CHECK(stray == 0);
	CHECK(rmdir(dir) == 0);
}

int
main(void)
{
	const char *tmpdir = getenv("TMPDIR");

	snprintf(dir, sizeof dir, "%s/test_tensorio.XXXXXX", tmpdir && *tmpdir ? tmpdir : "/tmp");
	if (!mkdtemp(dir)) {
		perror("test_tensorio: mkdtemp");
		return 1;
	}
	test_dtypes_def();
	test_round_trips();
	test_npy_exact();
	test_st_exact();
	test_npy_variants();
	test_st_handmade();
	test_npy_malformed();
	test_st_malformed();
	test_writers();
	test_misc();
	cleanup();
	return TU_DONE("test_tensorio");
}
