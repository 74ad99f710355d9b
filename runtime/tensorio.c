// runtime/tensorio.c -- .npy and .safetensors readers and writers.
//
// Both readers follow one rule: a size read from a file is a claim, checked
// against the file's real size (fstat) with overflow-checked arithmetic
// before anything is allocated from it.  A hostile or truncated file costs
// an error message, never a huge malloc or a read past a buffer.
//
// The two header parsers are small and strict.  The npy header is a Python
// dict literal; we parse the subset any writer produces for a plain array
// (string keys, a string descr, True/False, a tuple of integers) and
// tolerate what does not change the meaning: key order, quote style,
// spacing, a trailing comma.  The safetensors header is JSON; its parser
// handles exactly what the format uses (objects, strings with every
// escape, integers, arrays of integers), checks UTF-8, and has no
// recursion, because the format has fixed depth: header -> tensor entry ->
// integer array.
//
// The writers build the header in memory, then hand it with the tensors'
// data to write_atomic(), which goes through a temporary file and rename().
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fileio.h"
#include "tensorio.h"

#if defined(__GNUC__)
#define TIO_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define TIO_PRINTF(f, a)
#endif

// Indexed by enum tio_dtype: one row per dtype, every name it goes by.
static const struct {
	const char *name; // tio_dtype_name
	const char *descr; // npy descr
	const char *st; // safetensors dtype
	size_t size; // bytes per element
} dtypes[] = {
	[TIO_F32] = {"f32", "<f4", "F32", 4},
	[TIO_F64] = {"f64", "<f8", "F64", 8},
	[TIO_I64] = {"i64", "<i8", "I64", 8},
	[TIO_BOOL] = {"bool", "|b1", "BOOL", 1},
};
#define NDTYPES ((int)(sizeof dtypes / sizeof dtypes[0]))

// numpy/lib/format.py: data starts at a multiple of ARRAY_ALIGN, and the
// header keeps room for the first axis to grow to GROWTH_AXIS_MAX_DIGITS.
enum { NPY_ALIGN = 64, NPY_GROWTH_DIGITS = 21 };
// Header size limits, far beyond any real header: numpy refuses npy
// headers over 10000 bytes, the safetensors library headers over 100 MB.
// They bound what a claim in a file can make us allocate even when the
// file really is that large.
enum { NPY_MAX_HEADER = 1 << 20 };
#define ST_MAX_HEADER 100000000

static int fail(char *err, size_t errlen, const char *fmt, ...) TIO_PRINTF(3, 4);

// Messages through fio_vmsg: a long path keeps the reason at the end.
static int
fail(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fio_vmsg(err, errlen, fmt, ap);
	va_end(ap);
	// One line, whatever a file's names and strings hold: a control
	// character (a name's "\n" or ESC) shows as '?'.
	for (char *c = err; err && errlen > 0 && *c; c++)
		if ((unsigned char)*c < 0x20 || *c == 0x7f)
			*c = '?';
	return -1;
}

static int
dtype_ok(enum tio_dtype dt)
{
	return (int)dt >= 0 && (int)dt < NDTYPES;
}

size_t
tio_dtype_size(enum tio_dtype dt)
{
	return dtype_ok(dt) ? dtypes[dt].size : 0;
}

const char *
tio_dtype_name(enum tio_dtype dt)
{
	return dtype_ok(dt) ? dtypes[dt].name : "?";
}

// *r = a * b for a, b >= 0; 0 if the product does not fit in int64_t.
static int
mul_ok(int64_t a, int64_t b, int64_t *r)
{
	if (a != 0 && b > INT64_MAX / a)
		return 0;
	*r = a * b;
	return 1;
}

// Element count and byte size of a shape whose dims are already known to
// be >= 0; 0 when either overflows int64_t or size_t.
static int
shape_bytes(enum tio_dtype dt, int rank, const int64_t *dim, int64_t *numel, int64_t *nbytes)
{
	int64_t n = 1;

	for (int i = 0; i < rank; i++)
		if (!mul_ok(n, dim[i], &n))
			return 0;
	*numel = n;
	if (!mul_ok(n, (int64_t)dtypes[dt].size, nbytes))
		return 0;
	return (uint64_t)*nbytes <= SIZE_MAX;
}

int64_t
tio_numel(const tio_tensor *t)
{
	int64_t n = 1;

	if (!t || t->rank < 0 || t->rank > TIO_MAXDIM)
		return -1;
	for (int i = 0; i < t->rank; i++)
		if (t->dim[i] < 0 || !mul_ok(n, t->dim[i], &n))
			return -1;
	return n;
}

void
tio_free(tio_tensor *t)
{
	if (!t)
		return;
	free(t->name);
	free(t->data);
	memset(t, 0, sizeof *t);
}

void
tio_free_all(tio_tensor *ts, int n)
{
	if (!ts)
		return;
	for (int i = 0; i < n; i++)
		tio_free(&ts[i]);
	free(ts);
}

int
tio_find(const tio_tensor *ts, int n, const char *name)
{
	if (!ts || !name)
		return -1;
	for (int i = 0; i < n; i++)
		if (ts[i].name && strcmp(ts[i].name, name) == 0)
			return i;
	return -1;
}

// "(2, 3)", "(5,)", "()" for npy; "[2, 3]" for safetensors.  At most
// 8 * 21 + 2 characters, so 192 bytes always hold it.
static const char *
fmt_shape(char buf[192], int rank, const int64_t *dim, int python)
{
	size_t n = 0;

	buf[n++] = python ? '(' : '[';
	for (int i = 0; i < rank; i++)
		n += (size_t)snprintf(buf + n, 192 - n, "%s%lld", i ? ", " : "", (long long)dim[i]);
	if (python && rank == 1)
		buf[n++] = ',';
	buf[n++] = python ? ')' : ']';
	buf[n] = 0;
	return buf;
}

// Up to 12 characters at s, unprintable ones as '?', for messages that
// show what the parser found.
static const char *
snippet(char buf[16], const char *s, const char *end)
{
	int n = 0;

	if (s >= end)
		return "end of header";
	buf[n++] = '\'';
	for (; s < end && n < 13; s++)
		buf[n++] = (*s >= 0x20 && *s < 0x7f) ? *s : '?';
	buf[n++] = '\'';
	buf[n] = 0;
	return buf;
}

static int
host_is_little_endian(void)
{
	const uint16_t one = 1;
	return *(const unsigned char *)&one == 1;
}

static uint64_t
get_le(const unsigned char *p, int n)
{
	uint64_t v = 0;

	for (int i = n - 1; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

// ---------------------------------------------------------------- files

// Opens path and finds its size.  Regular files only: the size is what
// every check below compares against.
static FILE *
open_input(const char *path, int64_t *size, char *err, size_t errlen)
{
	struct stat st;
	FILE *f;

	if (!host_is_little_endian()) {
		fail(err, errlen, "%s: big-endian hosts are not supported", path);
		return NULL;
	}
	// fio_fopen_read refuses anything but a regular file before reading
	// (a FIFO would block, /dev/zero would never end).
	if (!(f = fio_fopen_read(path, err, errlen)))
		return NULL;
	if (fstat(fileno(f), &st) != 0) {
		fail(err, errlen, "%s: cannot stat: %s", path, strerror(errno));
		fclose(f);
		return NULL;
	}
	if (!S_ISREG(st.st_mode)) {
		fail(err, errlen, "%s: not a regular file", path);
		fclose(f);
		return NULL;
	}
	*size = (int64_t)st.st_size;
	return f;
}

// Reads exactly n bytes.  The size checks make a short read impossible
// unless the file changes under us or the disk fails; say which.
static int
read_exact(FILE *f, void *buf, size_t n, const char *path, const char *what, char *err,
           size_t errlen)
{
	if (n == 0 || fread(buf, 1, n, f) == n)
		return 0;
	if (ferror(f))
		return fail(err, errlen, "%s: read error in %s: %s", path, what, strerror(errno));
	return fail(err, errlen, "%s: %s ends early: the file shrank while being read", path,
	            what);
}

// Bool elements are bytes that must be 0 or 1: anything else is undefined
// behaviour once code reads them as C bool.
static int
check_bools(const tio_tensor *t, int64_t numel, const char *path, const char *what, char *err,
            size_t errlen)
{
	const unsigned char *p = t->data;

	if (t->dtype != TIO_BOOL)
		return 0;
	for (int64_t i = 0; i < numel; i++)
		if (p[i] > 1)
			return fail(err, errlen, "%s: %sbool element %lld is %d, not 0 or 1", path,
			            what, (long long)i, p[i]);
	return 0;
}

// A writer's tensor must describe itself consistently before any byte is
// written.  `who` names it in messages ("tensor", "tensor 'w'").
static int
check_tensor(const tio_tensor *t, const char *path, const char *who, int64_t *nbytes, char *err,
             size_t errlen)
{
	int64_t numel;

	if (!dtype_ok(t->dtype))
		return fail(err, errlen, "%s: %s has invalid dtype %d", path, who, (int)t->dtype);
	if (t->rank < 0 || t->rank > TIO_MAXDIM)
		return fail(err, errlen, "%s: %s has rank %d, outside 0..%d", path, who, t->rank,
		            TIO_MAXDIM);
	for (int i = 0; i < t->rank; i++)
		if (t->dim[i] < 0)
			return fail(err, errlen, "%s: %s has negative dimension %lld (dim %d)", path,
			            who, (long long)t->dim[i], i);
	if (!shape_bytes(t->dtype, t->rank, t->dim, &numel, nbytes))
		return fail(err, errlen, "%s: %s: shape size overflows", path, who);
	if (*nbytes > 0 && !t->data)
		return fail(err, errlen, "%s: %s has %lld elements but no data", path, who,
		            (long long)numel);
	return 0;
}

// Writes head, then each tensor's data, through fio_out (fileio.h): a
// temporary file beside path renamed over it once all of it is on disk, so
// a reader sees the old file or the new one, never a mix; a device such as
// /dev/null is written in place.
static int
write_atomic(const char *path, const void *head, size_t nhead, const tio_tensor *ts, int n,
             const int64_t *nbytes, char *err, size_t errlen)
{
	FioOut o;
	if (fio_out_open(&o, path, 0666, err, errlen))
		return -1;
	int e = 0;
	errno = 0;
	if (fio_out_write(&o, head, nhead))
		e = errno ? errno : EIO;
	for (int i = 0; i < n && !e; i++)
		if (nbytes[i] > 0 && fio_out_write(&o, ts[i].data, (size_t)nbytes[i]))
			e = errno ? errno : EIO;
	if (e) {
		fio_out_abort(&o);
		return fail(err, errlen, "%s: write failed: %s", path, strerror(e));
	}
	return fio_out_commit(&o, err, errlen);
}

// ---------------------------------------------------------------- npy

// A cursor over the npy header text, the repr() of a Python dict.
typedef struct Py {
	const char *p, *end;
	const char *path;
	char *err;
	size_t errlen;
} Py;

static int py_fail(Py *y, const char *fmt, ...) TIO_PRINTF(2, 3);

static int
py_fail(Py *y, const char *fmt, ...)
{
	char msg[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	return fail(y->err, y->errlen, "%s: header: %s", y->path, msg);
}

static void
py_ws(Py *y)
{
	while (y->p < y->end && (*y->p == ' ' || *y->p == '\t' || *y->p == '\n' || *y->p == '\r'))
		y->p++;
}

static int
py_peek(Py *y)
{
	return y->p < y->end ? (unsigned char)*y->p : -1;
}

// A quoted string into buf.  Escapes never occur in the strings numpy
// writes for our dtypes, so a backslash is an error, not a feature.
static int
py_str(Py *y, char *buf, size_t cap, const char *what)
{
	char sn[16];
	int q = py_peek(y);
	const char *s;

	if (q != '\'' && q != '"')
		return py_fail(y, "%s is not a string: found %s", what, snippet(sn, y->p, y->end));
	s = ++y->p;
	while (y->p < y->end && *y->p != q && *y->p != '\\' && *y->p != '\n')
		y->p++;
	if (py_peek(y) != q)
		return py_fail(y, "%s: unterminated or escaped string", what);
	if ((size_t)(y->p - s) >= cap)
		return py_fail(y, "%s '%.*s...' is too long", what, (int)(cap - 1), s);
	memcpy(buf, s, (size_t)(y->p - s));
	buf[y->p - s] = 0;
	y->p++;
	return 0;
}

// A shape entry: an optionally negative decimal integer.  Returns 0, or
// -1 (not an integer) or -2 (out of int64_t range) without a message,
// because the caller knows which entry it was.
static int
py_int(Py *y, int64_t *v)
{
	int neg = 0;
	uint64_t u = 0;
	const char *s;

	if (py_peek(y) == '-') {
		neg = 1;
		y->p++;
	}
	s = y->p;
	for (; y->p < y->end && *y->p >= '0' && *y->p <= '9'; y->p++) {
		if (u > ((uint64_t)INT64_MAX - (uint64_t)(*y->p - '0')) / 10)
			return -2;
		u = u * 10 + (uint64_t)(*y->p - '0');
	}
	if (y->p == s)
		return -1;
	// "3.0", "3L", "0x1", "1_0", "3e2": not the plain int numpy writes
	if (y->p < y->end && (*y->p == '.' || *y->p == '_' || (*y->p >= 'a' && *y->p <= 'z') ||
	                      (*y->p >= 'A' && *y->p <= 'Z')))
		return -1;
	*v = neg ? -(int64_t)u : (int64_t)u;
	return 0;
}

static int
py_shape(Py *y, int *rank, int64_t *dim)
{
	char sn[16];
	int n = 0, comma = 0;

	if (py_peek(y) != '(')
		return py_fail(y, "'shape' is not a tuple: found %s", snippet(sn, y->p, y->end));
	y->p++;
	py_ws(y);
	while (py_peek(y) != ')') {
		const char *at = y->p;
		int64_t v;
		int r;

		if (n == TIO_MAXDIM)
			return py_fail(y, "'shape' has too many dimensions (more than %d)", TIO_MAXDIM);
		r = py_int(y, &v);
		if (r == -2) // the header is not NUL-terminated: print no further than its end
			return py_fail(y, "bad shape entry %d: %.*s... does not fit in 64 bits", n,
			               (int)(y->end - at < 24 ? y->end - at : 24), at);
		if (r < 0)
			return py_fail(y, "bad shape entry %d: found %s", n, snippet(sn, at, y->end));
		if (v < 0)
			return py_fail(y, "negative dimension %lld in 'shape' (entry %d)", (long long)v, n);
		dim[n++] = v;
		py_ws(y);
		comma = py_peek(y) == ',';
		if (comma) {
			y->p++;
			py_ws(y);
		} else if (py_peek(y) != ')') {
			return py_fail(y, "bad shape entry %d: expected ',' or ')' but found %s", n - 1,
			               snippet(sn, y->p, y->end));
		}
	}
	if (n == 1 && !comma)
		return py_fail(y, "'shape' is not a tuple: (%lld) is an integer, (%lld,) a tuple",
		               (long long)dim[0], (long long)dim[0]);
	y->p++;
	*rank = n;
	return 0;
}

static int
npy_parse_header(Py *y, tio_tensor *t)
{
	char key[32], val[32], sn[16];
	int have_descr = 0, have_order = 0, have_shape = 0;

	py_ws(y);
	if (py_peek(y) != '{')
		return py_fail(y, "header is not a dict: it starts with %s", snippet(sn, y->p, y->end));
	y->p++;
	py_ws(y);
	while (py_peek(y) != '}') {
		if (py_str(y, key, sizeof key, "a header key") < 0)
			return -1;
		py_ws(y);
		if (py_peek(y) != ':')
			return py_fail(y, "expected ':' after key '%s'", key);
		y->p++;
		py_ws(y);
		if (strcmp(key, "descr") == 0) {
			int d;
			if (have_descr++)
				return py_fail(y, "duplicate key 'descr'");
			if (py_peek(y) != '\'' && py_peek(y) != '"')
				return py_fail(y, "'descr' is not a string (structured dtypes are not "
				                  "supported): found %s",
				               snippet(sn, y->p, y->end));
			if (py_str(y, val, sizeof val, "'descr'") < 0)
				return -1;
			for (d = 0; d < NDTYPES && strcmp(val, dtypes[d].descr) != 0; d++)
				;
			if (d == NDTYPES)
				return py_fail(y, "unsupported descr '%s'%s (supported: '<f4', '<f8', "
				                  "'<i8', '|b1')",
				               val, val[0] == '>' ? ", big-endian" : "");
			t->dtype = (enum tio_dtype)d;
		} else if (strcmp(key, "fortran_order") == 0) {
			const char *s = y->p;
			if (have_order++)
				return py_fail(y, "duplicate key 'fortran_order'");
			while (y->p < y->end && ((*y->p >= 'A' && *y->p <= 'Z') ||
			                         (*y->p >= 'a' && *y->p <= 'z')))
				y->p++;
			if (y->p - s == 4 && memcmp(s, "True", 4) == 0)
				return py_fail(y, "fortran_order is True: only C-order arrays are "
				                  "supported");
			if (!(y->p - s == 5 && memcmp(s, "False", 5) == 0))
				return py_fail(y, "'fortran_order' is not True or False: found %s",
				               snippet(sn, s, y->end));
		} else if (strcmp(key, "shape") == 0) {
			if (have_shape++)
				return py_fail(y, "duplicate key 'shape'");
			if (py_shape(y, &t->rank, t->dim) < 0)
				return -1;
		} else {
			return py_fail(y, "unexpected key '%s' (a .npy header has only 'descr', "
			                  "'fortran_order' and 'shape')",
			               key);
		}
		py_ws(y);
		if (py_peek(y) == ',') {
			y->p++;
			py_ws(y);
		} else if (py_peek(y) != '}') {
			return py_fail(y, "expected ',' or '}' after the value of '%s' but found %s", key,
			               snippet(sn, y->p, y->end));
		}
	}
	y->p++;
	py_ws(y);
	if (y->p != y->end)
		return py_fail(y, "unexpected %s after the header dict", snippet(sn, y->p, y->end));
	if (!have_descr)
		return py_fail(y, "missing key 'descr'");
	if (!have_order)
		return py_fail(y, "missing key 'fortran_order'");
	if (!have_shape)
		return py_fail(y, "missing key 'shape'");
	return 0;
}

int
tio_npy_read(const char *path, tio_tensor *t, char *err, size_t errlen)
{
	unsigned char pre[12];
	char *hdr = NULL, shp[192];
	int64_t size, numel, nbytes, left;
	uint64_t hlen;
	size_t npre;
	FILE *f;
	Py y;

	if (!t)
		return fail(err, errlen, "%s: no tensor to read into", path ? path : "(null)");
	memset(t, 0, sizeof *t);
	if (!path)
		return fail(err, errlen, "(null): no path");
	f = open_input(path, &size, err, errlen);
	if (!f)
		return -1;
	if (size < 8) {
		fail(err, errlen, "%s: bad magic: only %lld bytes, not a .npy file", path,
		     (long long)size);
		goto bad;
	}
	if (read_exact(f, pre, 8, path, "magic", err, errlen) < 0)
		goto bad;
	if (memcmp(pre, "\x93NUMPY", 6) != 0) {
		fail(err, errlen, "%s: bad magic: not a .npy file (expected \\x93NUMPY)", path);
		goto bad;
	}
	if (pre[7] != 0 || pre[6] < 1 || pre[6] > 3) {
		fail(err, errlen, "%s: unsupported version %d.%d (1.0, 2.0 and 3.0 are)", path, pre[6],
		     pre[7]);
		goto bad;
	}
	npre = pre[6] == 1 ? 10 : 12;
	if (size < (int64_t)npre) {
		fail(err, errlen, "%s: file ends inside the header length field", path);
		goto bad;
	}
	if (read_exact(f, pre + 8, npre - 8, path, "header length", err, errlen) < 0)
		goto bad;
	hlen = get_le(pre + 8, (int)npre - 8);
	if (hlen > (uint64_t)(size - (int64_t)npre)) {
		fail(err, errlen, "%s: header length %llu runs past the end of the file (%lld bytes)",
		     path, (unsigned long long)hlen, (long long)size);
		goto bad;
	}
	if (hlen > NPY_MAX_HEADER) {
		fail(err, errlen, "%s: header length %llu is over the %d-byte limit", path,
		     (unsigned long long)hlen, NPY_MAX_HEADER);
		goto bad;
	}
	hdr = malloc(hlen + 1);
	if (!hdr) {
		fail(err, errlen, "%s: out of memory", path);
		goto bad;
	}
	if (read_exact(f, hdr, hlen, path, "header", err, errlen) < 0)
		goto bad;
	y = (Py){hdr, hdr + hlen, path, err, errlen};
	if (npy_parse_header(&y, t) < 0)
		goto bad;
	if (!shape_bytes(t->dtype, t->rank, t->dim, &numel, &nbytes)) {
		fail(err, errlen, "%s: shape %s overflows: the array would not fit in 64 bits", path,
		     fmt_shape(shp, t->rank, t->dim, 1));
		goto bad;
	}
	left = size - (int64_t)npre - (int64_t)hlen;
	if (left < nbytes) {
		fail(err, errlen, "%s: data truncated: expected %lld bytes, found %lld", path,
		     (long long)nbytes, (long long)left);
		goto bad;
	}
	if (left > nbytes) {
		fail(err, errlen, "%s: %lld trailing bytes after the data (expected %lld bytes, found "
		     "%lld)",
		     path, (long long)(left - nbytes), (long long)nbytes, (long long)left);
		goto bad;
	}
	if (nbytes > 0) {
		t->data = malloc((size_t)nbytes);
		if (!t->data) {
			fail(err, errlen, "%s: out of memory for %lld bytes of data", path,
			     (long long)nbytes);
			goto bad;
		}
		if (read_exact(f, t->data, (size_t)nbytes, path, "data", err, errlen) < 0)
			goto bad;
		if (check_bools(t, numel, path, "", err, errlen) < 0)
			goto bad;
	}
	free(hdr);
	fclose(f);
	return 0;
bad:
	free(hdr);
	fclose(f);
	tio_free(t);
	return -1;
}

// The header numpy.save writes for t: the dict with sorted keys, spare
// spaces for the first axis to grow in place, then spaces and '\n' so the
// data starts at a multiple of 64.  The dict is at most 58 + 8 * 21
// characters, so with 20 spare, 64 padding and 12 of prefix, 512 bytes
// hold any header.  Returns its length.
static size_t
npy_header(char buf[512], const tio_tensor *t)
{
	char dict[320], shp[192];
	size_t n, pre = 10, hlen, pad;

	n = (size_t)snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': %s, }",
	                     dtypes[t->dtype].descr, fmt_shape(shp, t->rank, t->dim, 1));
	if (t->rank > 0) {
		char first[24];
		int digits = snprintf(first, sizeof first, "%lld", (long long)t->dim[0]);
		memset(dict + n, ' ', (size_t)(NPY_GROWTH_DIGITS - digits));
		n += (size_t)(NPY_GROWTH_DIGITS - digits);
	}
	hlen = n + 1;
	pad = NPY_ALIGN - (pre + hlen) % NPY_ALIGN;
	// Version 1.0 stores the header length in 16 bits; numpy moves to 2.0
	// (32 bits) when it does not fit.  Unreachable with rank <= 8, kept so
	// the rule stays numpy's if TIO_MAXDIM grows.
	if (hlen + pad > 0xffff) {
		pre = 12;
		pad = NPY_ALIGN - (pre + hlen) % NPY_ALIGN;
	}
	memcpy(buf, "\x93NUMPY", 6);
	buf[6] = pre == 10 ? 1 : 2;
	buf[7] = 0;
	for (size_t i = 0; i < pre - 8; i++)
		buf[8 + i] = (char)((hlen + pad) >> (8 * i) & 0xff);
	memcpy(buf + pre, dict, n);
	memset(buf + pre + n, ' ', pad);
	buf[pre + n + pad] = '\n';
	return pre + hlen + pad;
}

int
tio_npy_write(const char *path, const tio_tensor *t, char *err, size_t errlen)
{
	char head[512];
	int64_t nbytes;

	if (!path)
		return fail(err, errlen, "(null): no path");
	if (!t)
		return fail(err, errlen, "%s: no tensor to write", path);
	if (!host_is_little_endian())
		return fail(err, errlen, "%s: big-endian hosts are not supported", path);
	if (check_tensor(t, path, "tensor", &nbytes, err, errlen) < 0)
		return -1;
	return write_atomic(path, head, npy_header(head, t), t, 1, &nbytes, err, errlen);
}

// ---------------------------------------------------------------- safetensors JSON

// A cursor over the safetensors header.  Messages give the byte offset in
// the header, which is what a hex dump of the file shows at offset + 8.
typedef struct Json {
	const char *s;
	size_t len, pos;
	const char *path;
	char *err;
	size_t errlen;
} Json;

static int json_fail(Json *j, const char *fmt, ...) TIO_PRINTF(2, 3);

static int
json_fail(Json *j, const char *fmt, ...)
{
	char msg[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	return fail(j->err, j->errlen, "%s: bad JSON in header at byte %zu: %s", j->path, j->pos,
	            msg);
}

static void
json_ws(Json *j)
{
	while (j->pos < j->len && (j->s[j->pos] == ' ' || j->s[j->pos] == '\t' ||
	                           j->s[j->pos] == '\n' || j->s[j->pos] == '\r'))
		j->pos++;
}

static int
json_peek(Json *j)
{
	return j->pos < j->len ? (unsigned char)j->s[j->pos] : -1;
}

// Skips white space, then expects c.
static int
json_expect(Json *j, int c)
{
	char sn[16];

	json_ws(j);
	if (json_peek(j) != c)
		return json_fail(j, "expected '%c' but found %s", c,
		                 snippet(sn, j->s + j->pos, j->s + j->len));
	j->pos++;
	return 0;
}

// Length of the well-formed UTF-8 sequence at s (n bytes available), or 0:
// no overlong forms, no surrogates, nothing past U+10FFFF.
static int
utf8_seq(const unsigned char *s, size_t n)
{
	uint32_t cp, min;
	int len;

	if (s[0] < 0x80)
		return 1;
	if (s[0] >= 0xc2 && s[0] <= 0xdf)
		len = 2, cp = s[0] & 0x1f, min = 0x80;
	else if (s[0] >= 0xe0 && s[0] <= 0xef)
		len = 3, cp = s[0] & 0x0f, min = 0x800;
	else if (s[0] >= 0xf0 && s[0] <= 0xf4)
		len = 4, cp = s[0] & 0x07, min = 0x10000;
	else
		return 0;
	if ((size_t)len > n)
		return 0;
	for (int i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return len;
}

static int
utf8_valid(const char *s)
{
	size_t n = strlen(s);

	for (size_t i = 0; i < n;) {
		int k = utf8_seq((const unsigned char *)s + i, n - i);
		if (!k)
			return 0;
		i += (size_t)k;
	}
	return 1;
}

static size_t
utf8_put(char *out, uint32_t cp)
{
	if (cp < 0x80) {
		out[0] = (char)cp;
		return 1;
	}
	if (cp < 0x800) {
		out[0] = (char)(0xc0 | cp >> 6);
		out[1] = (char)(0x80 | (cp & 0x3f));
		return 2;
	}
	if (cp < 0x10000) {
		out[0] = (char)(0xe0 | cp >> 12);
		out[1] = (char)(0x80 | (cp >> 6 & 0x3f));
		out[2] = (char)(0x80 | (cp & 0x3f));
		return 3;
	}
	out[0] = (char)(0xf0 | cp >> 18);
	out[1] = (char)(0x80 | (cp >> 12 & 0x3f));
	out[2] = (char)(0x80 | (cp >> 6 & 0x3f));
	out[3] = (char)(0x80 | (cp & 0x3f));
	return 4;
}

// Four hex digits at j->pos; -1 if they are not.
static long
json_hex4(Json *j)
{
	long v = 0;

	if (j->len - j->pos < 4)
		return -1;
	for (int i = 0; i < 4; i++) {
		int c = j->s[j->pos + (size_t)i];
		v <<= 4;
		if (c >= '0' && c <= '9')
			v |= c - '0';
		else if (c >= 'a' && c <= 'f')
			v |= c - 'a' + 10;
		else if (c >= 'A' && c <= 'F')
			v |= c - 'A' + 10;
		else
			return -1;
	}
	j->pos += 4;
	return v;
}

// A string, decoded into a malloc'ed, NUL-terminated *out of *outlen bytes
// (which may hold a NUL of its own, from \u0000: callers check).  A first
// pass finds the closing quote, so the allocation is bounded by the
// string's own length in the header, which decoding only shrinks.
static int
json_string(Json *j, char **out, size_t *outlen)
{
	size_t end, k = 0;
	char *o;

	*out = NULL;
	json_ws(j);
	if (json_peek(j) != '"')
		return json_expect(j, '"');
	for (end = j->pos + 1; end < j->len && j->s[end] != '"'; end++)
		if (j->s[end] == '\\')
			end++;
	if (end >= j->len)
		return json_fail(j, "unterminated string");
	o = malloc(end - j->pos);
	if (!o)
		return json_fail(j, "out of memory");
	j->pos++;
	while (j->pos < end) {
		unsigned char c = (unsigned char)j->s[j->pos];
		long cp, lo;
		int n;

		if (c < 0x20) {
			free(o);
			return json_fail(j, "control character 0x%02x in string", c);
		}
		if (c >= 0x80) {
			n = utf8_seq((const unsigned char *)j->s + j->pos, end - j->pos);
			if (!n) {
				free(o);
				return json_fail(j, "invalid UTF-8 in string");
			}
			memcpy(o + k, j->s + j->pos, (size_t)n);
			k += (size_t)n;
			j->pos += (size_t)n;
			continue;
		}
		j->pos++;
		if (c != '\\') {
			o[k++] = (char)c;
			continue;
		}
		c = (unsigned char)j->s[j->pos++];
		switch (c) {
		case '"': o[k++] = '"'; break;
		case '\\': o[k++] = '\\'; break;
		case '/': o[k++] = '/'; break;
		case 'b': o[k++] = '\b'; break;
		case 'f': o[k++] = '\f'; break;
		case 'n': o[k++] = '\n'; break;
		case 'r': o[k++] = '\r'; break;
		case 't': o[k++] = '\t'; break;
		case 'u':
			cp = json_hex4(j);
			if (cp < 0) {
				free(o);
				return json_fail(j, "bad \\u escape: expected four hex digits");
			}
			// Outside the BMP, JSON writes a UTF-16 surrogate pair.
			if (cp >= 0xdc00 && cp <= 0xdfff) {
				free(o);
				return json_fail(j, "bad \\u escape: lone low surrogate \\u%04lx", cp);
			}
			if (cp >= 0xd800 && cp <= 0xdbff) {
				if (end - j->pos < 6 || j->s[j->pos] != '\\' || j->s[j->pos + 1] != 'u') {
					free(o);
					return json_fail(j, "bad \\u escape: high surrogate \\u%04lx without "
					                    "its low half",
					                 cp);
				}
				j->pos += 2;
				lo = json_hex4(j);
				if (lo < 0xdc00 || lo > 0xdfff) {
					free(o);
					return json_fail(j, "bad \\u escape: high surrogate \\u%04lx without "
					                    "its low half",
					                 cp);
				}
				cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
			}
			k += utf8_put(o + k, (uint32_t)cp);
			break;
		default:
			j->pos--;
			free(o);
			return json_fail(j, "bad escape '\\%c' in string", c >= 0x20 && c < 0x7f ? c : '?');
		}
	}
	j->pos = end + 1;
	o[k] = 0;
	*out = o;
	*outlen = k;
	return 0;
}

// An integer in JSON's syntax (no leading zeros, no '+'), and only an
// integer: fractions and exponents are errors, not rounded.
static int
json_int(Json *j, int64_t *v)
{
	char sn[16];
	int neg = 0;
	uint64_t u = 0;
	size_t start;

	json_ws(j);
	start = j->pos;
	if (json_peek(j) == '-') {
		neg = 1;
		j->pos++;
	}
	if (json_peek(j) < '0' || json_peek(j) > '9') {
		j->pos = start;
		return json_fail(j, "expected an integer but found %s",
		                 snippet(sn, j->s + j->pos, j->s + j->len));
	}
	if (json_peek(j) == '0' && j->pos + 1 < j->len && j->s[j->pos + 1] >= '0' &&
	    j->s[j->pos + 1] <= '9')
		return json_fail(j, "integer with a leading zero");
	for (; json_peek(j) >= '0' && json_peek(j) <= '9'; j->pos++) {
		unsigned d = (unsigned)(j->s[j->pos] - '0');
		if (u > ((uint64_t)INT64_MAX - d) / 10) {
			j->pos = start;
			return json_fail(j, "integer does not fit in 64 bits");
		}
		u = u * 10 + d;
	}
	if (json_peek(j) == '.' || json_peek(j) == 'e' || json_peek(j) == 'E')
		return json_fail(j, "only integers are allowed here");
	*v = neg ? -(int64_t)u : (int64_t)u;
	return 0;
}

// An array of at most cap integers into v[0..*n).  Returns 1, without a
// message, if it has more: the caller knows what the array was.
static int
json_ints(Json *j, int64_t *v, int cap, int *n)
{
	*n = 0;
	if (json_expect(j, '[') < 0)
		return -1;
	json_ws(j);
	if (json_peek(j) == ']') {
		j->pos++;
		return 0;
	}
	for (;;) {
		int64_t x = 0;
		if (json_int(j, &x) < 0)
			return -1;
		if (*n == cap)
			return 1;
		v[(*n)++] = x;
		json_ws(j);
		if (json_peek(j) == ']') {
			j->pos++;
			return 0;
		}
		if (json_expect(j, ',') < 0)
			return -1;
	}
}

// After a member's value: ',' then more members, or the closing '}'.
// Returns 1 at the end of the object, 0 if another member follows.
static int
json_next(Json *j)
{
	char sn[16];

	json_ws(j);
	if (json_peek(j) == '}') {
		j->pos++;
		return 1;
	}
	if (json_peek(j) != ',')
		return json_fail(j, "expected ',' or '}' but found %s",
		                 snippet(sn, j->s + j->pos, j->s + j->len));
	j->pos++;
	return 0;
}

// After an object's '{': 1 if it is empty (and consumes the '}').
static int
json_empty(Json *j)
{
	json_ws(j);
	if (json_peek(j) == '}') {
		j->pos++;
		return 1;
	}
	return 0;
}

static int
key_is(const char *key, size_t klen, const char *lit)
{
	return klen == strlen(lit) && memcmp(key, lit, klen) == 0;
}

// ---------------------------------------------------------------- safetensors

// One header entry: the tensor as the caller will get it, plus where its
// bytes are in the data section.
typedef struct StEntry {
	tio_tensor t;
	int64_t begin, end; // data_offsets
	int64_t numel, nbytes;
} StEntry;

// "__metadata__": an object of strings, ignored.
static int
st_metadata(Json *j)
{
	char *s;
	size_t n;
	int r;

	if (json_expect(j, '{') < 0)
		return -1;
	if (json_empty(j))
		return 0;
	do {
		if (json_string(j, &s, &n) < 0)
			return -1;
		free(s);
		if (json_expect(j, ':') < 0)
			return -1;
		json_ws(j);
		if (json_peek(j) != '"')
			return json_fail(j, "__metadata__ values must be strings");
		if (json_string(j, &s, &n) < 0)
			return -1;
		free(s);
	} while ((r = json_next(j)) == 0);
	return r < 0 ? -1 : 0;
}

// {"dtype": ..., "shape": [...], "data_offsets": [b, e]}, in any order.
static int
st_entry(Json *j, StEntry *e)
{
	const char *name = e->t.name;
	int have_dtype = 0, have_shape = 0, have_off = 0, r;
	char *key = NULL, *val = NULL;
	size_t klen, vlen;

	if (json_expect(j, '{') < 0)
		return -1;
	if (!json_empty(j)) {
		do {
			if (json_string(j, &key, &klen) < 0 || json_expect(j, ':') < 0)
				goto bad;
			if (key_is(key, klen, "dtype")) {
				int d;
				if (have_dtype++)
					goto dup;
				if (json_string(j, &val, &vlen) < 0)
					goto bad;
				for (d = 0; d < NDTYPES && !key_is(val, vlen, dtypes[d].st); d++)
					;
				if (d == NDTYPES) {
					fail(j->err, j->errlen, "%s: tensor '%s': unsupported dtype '%s' "
					     "(supported: F32, F64, I64, BOOL)",
					     j->path, name, val);
					goto bad;
				}
				e->t.dtype = (enum tio_dtype)d;
				free(val);
				val = NULL;
			} else if (key_is(key, klen, "shape")) {
				if (have_shape++)
					goto dup;
				r = json_ints(j, e->t.dim, TIO_MAXDIM, &e->t.rank);
				if (r < 0)
					goto bad;
				if (r > 0) {
					fail(j->err, j->errlen, "%s: tensor '%s': shape has more than %d "
					     "dimensions",
					     j->path, name, TIO_MAXDIM);
					goto bad;
				}
				for (int i = 0; i < e->t.rank; i++)
					if (e->t.dim[i] < 0) {
						fail(j->err, j->errlen, "%s: tensor '%s': negative dimension %lld "
						     "in shape",
						     j->path, name, (long long)e->t.dim[i]);
						goto bad;
					}
			} else if (key_is(key, klen, "data_offsets")) {
				int64_t off[2];
				int n;
				if (have_off++)
					goto dup;
				r = json_ints(j, off, 2, &n);
				if (r < 0)
					goto bad;
				if (r > 0 || n != 2) {
					fail(j->err, j->errlen, "%s: tensor '%s': data_offsets must be "
					     "[begin, end]",
					     j->path, name);
					goto bad;
				}
				e->begin = off[0];
				e->end = off[1];
			} else {
				fail(j->err, j->errlen, "%s: tensor '%s': unexpected key '%s' (expected "
				     "dtype, shape, data_offsets)",
				     j->path, name, key);
				goto bad;
			}
			free(key);
			key = NULL;
		} while ((r = json_next(j)) == 0);
		if (r < 0)
			return -1;
	}
	if (!have_dtype || !have_shape || !have_off)
		return fail(j->err, j->errlen, "%s: tensor '%s' has no '%s'", j->path, name,
		            !have_dtype ? "dtype" : !have_shape ? "shape" : "data_offsets");
	return 0;
dup:
	fail(j->err, j->errlen, "%s: tensor '%s': duplicate key '%s'", j->path, name, key);
bad:
	free(key);
	free(val);
	return -1;
}

// The whole header into a malloc'ed array *es of *n entries, names and
// shapes checked; offsets are checked against the data by the caller.
static int
st_header(Json *j, StEntry **es, int *n)
{
	StEntry *e = NULL;
	int cap = 0, meta = 0, r;
	char *key;
	size_t klen;

	*es = NULL;
	*n = 0;
	json_ws(j);
	if (json_peek(j) != '{')
		return json_fail(j, "the header is not a JSON object");
	j->pos++;
	if (json_empty(j))
		goto done;
	do {
		if (json_string(j, &key, &klen) < 0)
			return -1;
		if (json_expect(j, ':') < 0) {
			free(key);
			return -1;
		}
		if (key_is(key, klen, "__metadata__")) {
			free(key);
			if (meta++)
				return json_fail(j, "duplicate '__metadata__'");
			if (st_metadata(j) < 0)
				return -1;
			continue;
		}
		if (strlen(key) != klen) {
			fail(j->err, j->errlen, "%s: tensor name '%s...' contains a NUL character",
			     j->path, key);
			free(key);
			return -1;
		}
		if (*n == cap) {
			// Each entry takes more than 40 header bytes and the header is
			// at most ST_MAX_HEADER, so *n stays far below INT_MAX.
			StEntry *ne = realloc(*es, (size_t)(cap ? 2 * cap : 16) * sizeof *ne);
			if (!ne) {
				free(key);
				return json_fail(j, "out of memory");
			}
			*es = ne;
			cap = cap ? 2 * cap : 16;
		}
		e = &(*es)[(*n)++];
		memset(e, 0, sizeof *e);
		e->t.name = key;
		if (st_entry(j, e) < 0)
			return -1;
	} while ((r = json_next(j)) == 0);
	if (r < 0)
		return -1;
done:
	json_ws(j);
	if (j->pos != j->len)
		return json_fail(j, "unexpected text after the header object");
	return 0;
}

static int
cmp_name(const void *a, const void *b)
{
	return strcmp((*(const StEntry *const *)a)->t.name, (*(const StEntry *const *)b)->t.name);
}

static int
cmp_offset(const void *a, const void *b)
{
	const StEntry *x = *(const StEntry *const *)a, *y = *(const StEntry *const *)b;

	if (x->begin != y->begin)
		return x->begin < y->begin ? -1 : 1;
	if (x->end != y->end)
		return x->end < y->end ? -1 : 1;
	return 0;
}

// Sizes, offsets and names of the parsed entries, against a data section
// of ndata bytes.  Fills ord with the entries in data order.
static int
st_check(StEntry *es, int n, StEntry **ord, int64_t ndata, const char *path, char *err,
         size_t errlen)
{
	char shp[192];
	int64_t pos = 0;

	for (int i = 0; i < n; i++) {
		StEntry *e = &es[i];
		if (!shape_bytes(e->t.dtype, e->t.rank, e->t.dim, &e->numel, &e->nbytes))
			return fail(err, errlen, "%s: tensor '%s': shape %s overflows", path, e->t.name,
			            fmt_shape(shp, e->t.rank, e->t.dim, 0));
		if (e->begin < 0 || e->end < e->begin || e->end > ndata)
			return fail(err, errlen, "%s: tensor '%s': data_offsets [%lld, %lld] out of "
			            "range for a data section of %lld bytes",
			            path, e->t.name, (long long)e->begin, (long long)e->end,
			            (long long)ndata);
		if (e->end - e->begin != e->nbytes)
			return fail(err, errlen, "%s: tensor '%s': data_offsets [%lld, %lld] span %lld "
			            "bytes, but %s %s needs %lld",
			            path, e->t.name, (long long)e->begin, (long long)e->end,
			            (long long)(e->end - e->begin), dtypes[e->t.dtype].st,
			            fmt_shape(shp, e->t.rank, e->t.dim, 0), (long long)e->nbytes);
		ord[i] = e;
	}
	if (n == 0) // then ord is NULL, which qsort must not be given
		return ndata > 0 ? fail(err, errlen, "%s: %lld trailing bytes after the header "
		                        "of a file with no tensors",
		                        path, (long long)ndata)
		                 : 0;
	qsort(ord, (size_t)n, sizeof *ord, cmp_name);
	for (int i = 1; i < n; i++)
		if (strcmp(ord[i - 1]->t.name, ord[i]->t.name) == 0)
			return fail(err, errlen, "%s: duplicate tensor name '%s'", path, ord[i]->t.name);
	// The format forbids holes and overlaps, so that no byte of a file is
	// unaccounted for (a polyglot file could hide another format there).
	qsort(ord, (size_t)n, sizeof *ord, cmp_offset);
	for (int i = 0; i < n; i++) {
		if (ord[i]->begin > pos)
			return fail(err, errlen, "%s: data bytes [%lld, %lld) belong to no tensor", path,
			            (long long)pos, (long long)ord[i]->begin);
		if (ord[i]->begin < pos)
			return fail(err, errlen, "%s: tensor '%s' overlaps tensor '%s' in the data", path,
			            ord[i]->t.name, ord[i - 1]->t.name);
		pos = ord[i]->end;
	}
	if (pos < ndata)
		return fail(err, errlen, "%s: %lld trailing bytes after the last tensor's data",
		            path, (long long)(ndata - pos));
	return 0;
}

int
tio_safetensors_read(const char *path, tio_tensor **ts, int *n, char *err, size_t errlen)
{
	unsigned char pre[8];
	char *hdr = NULL;
	StEntry *es = NULL, **ord = NULL;
	int nes = 0, i;
	int64_t size;
	uint64_t hlen;
	FILE *f;
	Json j;

	if (!ts || !n)
		return fail(err, errlen, "%s: no place for the tensors", path ? path : "(null)");
	*ts = NULL;
	*n = 0;
	if (!path)
		return fail(err, errlen, "(null): no path");
	f = open_input(path, &size, err, errlen);
	if (!f)
		return -1;
	if (size < 8) {
		fail(err, errlen, "%s: truncated header: %lld bytes, too short for the 8-byte header "
		     "length",
		     path, (long long)size);
		goto bad;
	}
	if (read_exact(f, pre, 8, path, "header length", err, errlen) < 0)
		goto bad;
	hlen = get_le(pre, 8);
	if (hlen > (uint64_t)(size - 8)) {
		fail(err, errlen, "%s: truncated header: header length %llu, but only %lld bytes "
		     "follow",
		     path, (unsigned long long)hlen, (long long)(size - 8));
		goto bad;
	}
	if (hlen > ST_MAX_HEADER) {
		fail(err, errlen, "%s: header length %llu is over the %d-byte limit", path,
		     (unsigned long long)hlen, ST_MAX_HEADER);
		goto bad;
	}
	hdr = malloc(hlen + 1);
	if (!hdr) {
		fail(err, errlen, "%s: out of memory", path);
		goto bad;
	}
	if (read_exact(f, hdr, hlen, path, "header", err, errlen) < 0)
		goto bad;
	j = (Json){hdr, hlen, 0, path, err, errlen};
	if (st_header(&j, &es, &nes) < 0)
		goto bad;
	free(hdr);
	hdr = NULL;
	if (nes > 0) {
		ord = malloc((size_t)nes * sizeof *ord);
		if (!ord) {
			fail(err, errlen, "%s: out of memory", path);
			goto bad;
		}
	}
	if (st_check(es, nes, ord, size - 8 - (int64_t)hlen, path, err, errlen) < 0)
		goto bad;
	// Contiguous and in data order: one sequential pass reads everything.
	for (i = 0; i < nes; i++) {
		StEntry *e = ord[i];
		char what[64];
		if (e->nbytes == 0)
			continue;
		e->t.data = malloc((size_t)e->nbytes);
		if (!e->t.data) {
			fail(err, errlen, "%s: tensor '%s': out of memory for %lld bytes", path,
			     e->t.name, (long long)e->nbytes);
			goto bad;
		}
		if (read_exact(f, e->t.data, (size_t)e->nbytes, path, "data", err, errlen) < 0)
			goto bad;
		snprintf(what, sizeof what, "tensor '%.40s': ", e->t.name);
		if (check_bools(&e->t, e->numel, path, what, err, errlen) < 0)
			goto bad;
	}
	if (nes > 0) {
		*ts = malloc((size_t)nes * sizeof **ts);
		if (!*ts) {
			fail(err, errlen, "%s: out of memory", path);
			goto bad;
		}
		for (i = 0; i < nes; i++)
			(*ts)[i] = es[i].t;
	}
	*n = nes;
	free(ord);
	free(es);
	fclose(f);
	return 0;
bad:
	for (i = 0; i < nes; i++)
		tio_free(&es[i].t);
	free(es);
	free(ord);
	free(hdr);
	fclose(f);
	return -1;
}

// A growing byte buffer for the header being written; a failed allocation
// sticks, and is reported once at the end.
typedef struct Buf {
	char *p;
	size_t len, cap;
	int oom;
} Buf;

static void
buf_add(Buf *b, const char *s, size_t n)
{
	if (b->oom)
		return;
	if (b->len + n > b->cap) {
		size_t cap = b->cap ? b->cap : 256;
		char *p;
		while (cap < b->len + n)
			cap *= 2;
		p = realloc(b->p, cap);
		if (!p) {
			b->oom = 1;
			return;
		}
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->len, s, n);
	b->len += n;
}

static void
buf_str(Buf *b, const char *s)
{
	buf_add(b, s, strlen(s));
}

static void
buf_int(Buf *b, int64_t v)
{
	char num[24];
	buf_add(b, num, (size_t)snprintf(num, sizeof num, "%lld", (long long)v));
}

// A name as a JSON string: quote, backslash and control characters
// escaped; everything else (valid UTF-8, checked) as is.
static void
buf_json_str(Buf *b, const char *s)
{
	buf_add(b, "\"", 1);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		char esc[8];
		if (c == '"' || c == '\\') {
			esc[0] = '\\';
			esc[1] = (char)c;
			buf_add(b, esc, 2);
		} else if (c < 0x20) {
			buf_add(b, esc, (size_t)snprintf(esc, sizeof esc, "\\u%04x", c));
		} else {
			buf_add(b, s, 1);
		}
	}
	buf_add(b, "\"", 1);
}

static int
cmp_tensor_name(const void *a, const void *b)
{
	return strcmp((*(const tio_tensor *const *)a)->name, (*(const tio_tensor *const *)b)->name);
}

int
tio_safetensors_write(const char *path, const tio_tensor *ts, int n, char *err, size_t errlen)
{
	int64_t *nbytes = NULL, off = 0;
	const tio_tensor **ord = NULL;
	Buf b = {0};
	int r = -1;

	if (!path)
		return fail(err, errlen, "(null): no path");
	if (n < 0 || (n > 0 && !ts))
		return fail(err, errlen, "%s: bad tensor list (n = %d)", path, n);
	if (!host_is_little_endian())
		return fail(err, errlen, "%s: big-endian hosts are not supported", path);
	nbytes = malloc((size_t)(n ? n : 1) * sizeof *nbytes);
	ord = malloc((size_t)(n ? n : 1) * sizeof *ord);
	if (!nbytes || !ord) {
		fail(err, errlen, "%s: out of memory", path);
		goto out;
	}
	for (int i = 0; i < n; i++) {
		char who[80];
		if (!ts[i].name) {
			fail(err, errlen, "%s: tensor %d has no name", path, i);
			goto out;
		}
		snprintf(who, sizeof who, "tensor '%.60s'", ts[i].name);
		if (!utf8_valid(ts[i].name)) {
			fail(err, errlen, "%s: %s: name is not valid UTF-8", path, who);
			goto out;
		}
		if (strcmp(ts[i].name, "__metadata__") == 0) {
			fail(err, errlen, "%s: '__metadata__' is reserved, not a tensor name", path);
			goto out;
		}
		if (check_tensor(&ts[i], path, who, &nbytes[i], err, errlen) < 0)
			goto out;
		ord[i] = &ts[i];
	}
	qsort(ord, (size_t)n, sizeof *ord, cmp_tensor_name);
	for (int i = 1; i < n; i++)
		if (strcmp(ord[i - 1]->name, ord[i]->name) == 0) {
			fail(err, errlen, "%s: duplicate tensor name '%s'", path, ord[i]->name);
			goto out;
		}
	buf_add(&b, "\0\0\0\0\0\0\0\0{", 9); // the length is patched in below
	for (int i = 0; i < n; i++) {
		if (i)
			buf_add(&b, ",", 1);
		buf_json_str(&b, ts[i].name);
		buf_str(&b, ":{\"dtype\":\"");
		buf_str(&b, dtypes[ts[i].dtype].st);
		buf_str(&b, "\",\"shape\":[");
		for (int d = 0; d < ts[i].rank; d++) {
			if (d)
				buf_add(&b, ",", 1);
			buf_int(&b, ts[i].dim[d]);
		}
		buf_str(&b, "],\"data_offsets\":[");
		buf_int(&b, off);
		buf_add(&b, ",", 1);
		if (nbytes[i] > INT64_MAX - off) {
			fail(err, errlen, "%s: total data size overflows", path);
			goto out;
		}
		off += nbytes[i];
		buf_int(&b, off);
		buf_str(&b, "]}");
	}
	buf_add(&b, "}", 1);
	// Pad with spaces so the data section starts 8-byte aligned, as the
	// safetensors library does.
	while (!b.oom && b.len % 8 != 0)
		buf_add(&b, " ", 1);
	if (b.oom) {
		fail(err, errlen, "%s: out of memory", path);
		goto out;
	}
	for (int i = 0; i < 8; i++)
		b.p[i] = (char)((uint64_t)(b.len - 8) >> (8 * i) & 0xff);
	r = write_atomic(path, b.p, b.len, ts, n, nbytes, err, errlen);
out:
	free(b.p);
	free(nbytes);
	free(ord);
	return r;
}
