// runtime/tensorio.h -- tensor files: NumPy .npy and .safetensors.
//
// A small library of its own, used by the runtime (binding parameters and
// constants by name) and by the fadc tool (`fadc run --out` writes .npy).
// It depends on libc and POSIX only: no fadc header, no LLVM, no CUDA.
//
// .npy (numpy/lib/format.py): "\x93NUMPY", a major and a minor version
// byte, the header length (2 bytes little-endian in 1.0, 4 bytes in 2.0
// and 3.0), then the header: the repr() of a Python dict such as
// {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), } padded with
// spaces and a final '\n' so that the data starts at a multiple of 64
// bytes, then the raw elements.  Read: versions 1.0, 2.0 and 3.0, descr
// '<f4' '<f8' '<i8' '|b1', C order only.  Written: byte for byte what
// numpy.save writes for the same array (1.0; 2.0 only if the header could
// not fit 1.0's 16-bit length, which no rank <= 8 array needs).
//
// .safetensors: an 8-byte little-endian header length N, N bytes of JSON
// mapping each tensor name to {"dtype", "shape", "data_offsets": [begin,
// end]} (offsets relative to the data section that follows the header),
// an optional "__metadata__" object of strings, then the data section.
// Dtypes F32, F64, I64 and BOOL.  As the format's specification asks, the
// tensors must cover the data section exactly: no holes, no overlaps, no
// trailing bytes.  Written: compact JSON in the caller's tensor order,
// padded with spaces to a multiple of 8 bytes, data packed in that order.
//
// Guarantees, for every function that returns int:
// - 0 on success; -1 on failure with one line, "<path>: <what>", in
//   err[0..errlen) (always NUL-terminated, truncated if too long; err may
//   be NULL when errlen is 0).  Nothing is printed, nothing aborts, and a
//   failed call frees everything it allocated.
// - Readers trust nothing in a file: every size is checked against the
//   file's real size with overflow-checked arithmetic before anything is
//   allocated from it; extra bytes after the data are an error too; bool
//   elements must be 0 or 1.  A file is fully read and checked before the
//   call returns, so the caller never sees a partial tensor.
// - Writers validate the tensors first, write a temporary file in the
//   target's directory and rename() it over the target, so a failed write
//   never leaves a half-written file behind (the old file, if any, stays).
// - Elements are little-endian in both formats; on a big-endian host every
//   call fails with a message saying so rather than swapping bytes.
#ifndef FADC_TENSORIO_H
#define FADC_TENSORIO_H

#include <stddef.h>
#include <stdint.h>

#define TIO_MAXDIM 8 // tensors have rank 0..TIO_MAXDIM

enum tio_dtype {
	TIO_F32, // float, 4 bytes; npy '<f4', safetensors "F32"
	TIO_F64, // double, 8 bytes; npy '<f8', safetensors "F64"
	TIO_I64, // int64_t, 8 bytes; npy '<i8', safetensors "I64"
	TIO_BOOL, // one byte, 0 or 1; npy '|b1', safetensors "BOOL"
};

typedef struct tio_tensor {
	char *name; // safetensors name (malloc'ed), or NULL (npy)
	enum tio_dtype dtype;
	int rank; // 0..TIO_MAXDIM; 0 is a scalar of one element
	int64_t dim[TIO_MAXDIM]; // dim[0..rank) >= 0; the rest unused
	void *data; // malloc'ed, numel * element size bytes, C order; NULL if numel is 0
} tio_tensor;

// .npy: one tensor per file; t->name is NULL after a read and ignored by a
// write.  On failure *t is zeroed.
int tio_npy_read(const char *path, tio_tensor *t, char *err, size_t errlen);
int tio_npy_write(const char *path, const tio_tensor *t, char *err, size_t errlen);

// .safetensors: every tensor of the file, in the header's order, into a
// malloc'ed array *ts of *n tensors (NULL and 0 for a file with none, and
// after a failure); release it with tio_free_all.  Names may contain any
// character, dots included ("layer1.0.conv1.weight").  A write needs a
// distinct, non-NULL, valid UTF-8 name for each tensor, other than
// "__metadata__".
int tio_safetensors_read(const char *path, tio_tensor **ts, int *n, char *err, size_t errlen);
int tio_safetensors_write(const char *path, const tio_tensor *ts, int n, char *err,
                          size_t errlen);

void tio_free(tio_tensor *t); // frees name and data and zeroes *t; NULL is a no-op
void tio_free_all(tio_tensor *ts, int n); // tio_free on each, then free(ts)
// Product of the dims, 1 for rank 0; -1 if the rank or a dim is invalid or
// the product overflows int64_t.
int64_t tio_numel(const tio_tensor *t);
size_t tio_dtype_size(enum tio_dtype dt); // bytes per element; 0 if dt is not a tio_dtype
const char *tio_dtype_name(enum tio_dtype dt); // "f32", "f64", "i64", "bool"; "?" if invalid
// Index of the first tensor of ts[0..n) named name, or -1 (unnamed ones
// never match): how the runtime binds parameters and constants by name.
int tio_find(const tio_tensor *ts, int n, const char *name);

#endif
