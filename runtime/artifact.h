// runtime/artifact.h -- the artifact's descriptor: its binary format, the
// checksummed trailer appended to model.so, and reading both with plain
// file reads before anything is loaded.  docs/ARTIFACT.md is the spec.
//
// The one implementation of the format: codegen encodes with it (compile
// side), the runtime decodes with it; neither links LLVM.  Decoding trusts
// nothing: every count and length is checked against the bytes that are
// left before anything is allocated, so a corrupt or truncated file is an
// error message, never a crash or a huge allocation.
#ifndef FADC_ARTIFACT_H
#define FADC_ARTIFACT_H

#include <stddef.h>
#include <stdint.h>

// The format versions of the trailer and the descriptor.  The writer
// writes the oldest version that can hold the artifact: 3 for one
// specialisation without cuBLAS records (the bytes of every artifact before
// them), 4 when a launch record is a cuBLAS GEMM, 5 for several
// specialisations (-D N=8,32): version 5 adds the list of specialisations
// and, per declaration and task, the one it belongs to; 6
// when a task has a choice record (ART_LAUNCH_CHOICE: candidates the
// runtime picks between on the GPU); 7
// when a task has index checks (outputs of role ART_OUT_CHECK); 8
// when a task has a cuDNN convolution record or a sequence
// (ART_LAUNCH_CONV, ART_LAUNCH_SEQ); 9 when a convolution record has an
// operand stored channels-last (ArtConv.nhwc: one more byte in the record);
// 10 when a task's CUDA code is several modules (ArtTask.module: a large
// task compiled as several NVRTC programs); 11 when the CPU code is there
// for several CPU levels (ArtDesc.level: x86-64-v3 and x86-64-v4, the
// runtime taking the best the host runs); 12 (ART_FORMAT_VERSION, the
// newest) when a task is a shard of a batched task (ArtTask.shard: `fadc
// --shards K`, runtime/shard.c).
// A runtime reads ART_FORMAT_OLDEST .. ART_FORMAT_VERSION: 2 (launch records
// without a kind: every one a kernel), 3 (host steps), 4 (GEMM records), 5,
// 6, 7, 8, 9, 10, 11 and 12; 1 (before the CUDA part) and newer versions are
// refused with a message (art_version_readable is the one place that says so).
#define ART_FORMAT_VERSION 12
#define ART_FORMAT_VERSION_CHECKS 7 // the first with index checks
#define ART_FORMAT_VERSION_CONV 8 // the first with convolution and sequence records
#define ART_FORMAT_VERSION_NHWC 9 // the first with a convolution's layouts
#define ART_FORMAT_VERSION_MODULES 10 // the first with several CUDA modules per task
#define ART_FORMAT_VERSION_LEVELS 11 // the first with several CPU levels
#define ART_FORMAT_VERSION_SHARDS 12 // the first with shards of batched tasks
#define ART_MAX_SHARDS 64 // shards of one batched task (passes' TASK_MAX_SHARDS)
#define ART_MAX_MODULES 64 // CUDA modules of one task
#define ART_MAX_LEVELS 4 // CPU levels of one artifact
#define ART_FORMAT_OLDEST 2
#define ART_FORMAT_VERSION_ONE_SPEC 3 // one specialisation, no cuBLAS records
#define ART_FORMAT_VERSION_SPECS 5 // several specialisations, no choice records
#define ART_MAX_SPECS 16 // specialisations of one artifact (fadc -D N=8,32)
#define ART_MAX_CHOICE 16 // candidates of one choice record
int art_version_readable(uint32_t version);
#define ART_TRAILER_SIZE 40
#define ART_TRAILER_MAGIC "FADCTRLR" // 8 bytes
#define ART_DESC_MAGIC "FADCDESC" // 8 bytes
#define ART_MAXDIM 8

// Element types: support/dtypes.def's rows (ART_F32 ...), whose codes
// are fadc.h's enum fadc_dtype (runtime/rt.c checks).  ART_NDTYPE: how
// many.
enum {
#define DTYPE(N, ...) ART_##N,
#include "dtypes.def"
	ART_NDTYPE
};
// The bytes of one element of each, by code.
extern const uint8_t art_dtype_bytes[ART_NDTYPE];
// Who supplies a task input: a declaration of the model (param or const,
// bound or initialized once), or the caller at every run.
enum { ART_ROLE_DECL, ART_ROLE_ARG };
// What an output is (format 7): a value of the user's, or a run-time check
// of an index (passes/checks.c): the i64[2] (min, max) of an index tensor,
// which passes iff lo <= min and max < end.  Check outputs come after the
// user's (a suffix of the task's outputs); the runtime owns them and never
// shows them to the caller.
enum { ART_OUT_VALUE, ART_OUT_CHECK };
enum { ART_TASK, ART_INIT }; // a task of the user's, or a declaration's initializer
enum { ART_PARAM, ART_CONST };
// Which code a task has (ArtTask.targets, bits): CPU code in the library,
// CUDA kernels in the image section.
enum { ART_TARGET_CPU = 1, ART_TARGET_CUDA = 2 };
// What a CUDA kernel argument points at: the task's input `index`, its
// output `index`, or `bytes` bytes at `offset` of the task's device arena.
enum { ART_ARG_INPUT, ART_ARG_OUTPUT, ART_ARG_ARENA };

typedef struct ArtKArg {
	uint8_t kind; // ART_ARG_*
	uint32_t index; // ART_ARG_INPUT / ART_ARG_OUTPUT: which one
	uint64_t offset; // ART_ARG_ARENA: byte offset in the arena (else 0)
	uint64_t bytes; // the bytes the kernel may touch through it
} ArtKArg;

// What a launch record is: a kernel of the task's module, or a host step
// of the runtime between kernels (format 3).  ART_LAUNCH_ASSIGN:
// linear_sum_assignment of a (points, grid) f64 cost matrix, argument 1,
// into the i64 column of each row, argument 0 (support/hungarian.c on the host:
// copy down, solve, copy up; name is "linear_sum_assignment").
// ART_LAUNCH_GEMM (format 4): a strided batched GEMM through cuBLAS,
// arguments {C, A, B} and the ArtGemm below; name is the cuBLAS routine
// ("cublasSgemmStridedBatched"), points the elements of C, grid 0.
// ART_LAUNCH_CHOICE (format 6): no work of its own; the `points` records
// after it (2 .. ART_MAX_CHOICE, each a kernel or a GEMM, argument 0 the
// same output for all) are candidates that compute the same result, and
// exactly one of them runs: the runtime times them on the GPU at the
// task's first run and keeps the faster (docs/CUDA.md, "Choices measured
// on the GPU").  name "choice", grid 0, runseed 0, no arguments.
// ART_LAUNCH_SEQ (format 8): a candidate of a choice that is several
// records: the `points` records after it (1 .. ART_MAX_SEQ, each a kernel
// or a GEMM) run in order; the last one's argument 0 is the choice's
// output.  name "sequence", grid 0, runseed 0, no arguments.  Only as a
// candidate.
// ART_LAUNCH_CONV (format 8): a convolution through cuDNN (runtime/cudnn.c),
// the ArtConv below, arguments {written, a, b}: forward {y, x, w},
// backward data {dx, dy, w}, backward filter {dw, x, dy}; name
// "cudnnConvolutionForward" (BackwardData, BackwardFilter), points the
// elements written, grid 0.  Only as a candidate (cuDNN is optional).
enum {
	ART_LAUNCH_KERNEL,
	ART_LAUNCH_ASSIGN,
	ART_LAUNCH_GEMM,
	ART_LAUNCH_CHOICE,
	ART_LAUNCH_SEQ,
	ART_LAUNCH_CONV,
};
#define ART_MAX_SEQ 4096 // records of one sequence candidate

// A GEMM record, in row-major terms (codegen/kir.h, KGemmPlan): for each
// b < batch, C_b = op(A_b) op(B_b) with C_b (m x n), op(A_b) (m x k),
// op(B_b) (k x n), element (i, j) of C_b at oc + b sc + i ldc + j of
// argument 0; A_b(i, k) at oa + b sa + i lda + k of argument 1 (ta 0) or
// oa + b sa + k lda + i (ta 1); B_b(k, j) at ob + b sb + k ldb + j of
// argument 2 (tb 0) or ob + b sb + j ldb + k (tb 1).  Offsets, leading
// dimensions and strides count elements of dtype.  runtime/cuda.c maps
// this onto cuBLAS's column-major call.
typedef struct ArtGemm {
	uint8_t dtype; // ART_F32 or ART_F64
	uint8_t ta, tb; // 0 or 1, as above
	uint8_t tf32; // 1: f32 products may use TF32 tensor cores (--allow-tf32)
	uint32_t m, n, k, batch; // each 1 .. INT32_MAX
	uint64_t lda, ldb, ldc; // each at most INT32_MAX
	uint64_t sa, sb, sc; // batch strides
	uint64_t oa, ob, oc; // element offsets into arguments 1, 2, 0
} ArtGemm;

// A convolution record (NCHW, cross-correlation, as ir/interp.c's conv):
// x (n, c, h, w), w (k, c / groups, r, s), y (n, k, oh, ow) with
// oh = (h + 2 ph - dh (r - 1) - 1) / sh + 1 (ow alike), all dense.  1-d
// convolutions are h = r = 1.  op: ART_CONV_FWD computes y from x and w,
// ART_CONV_BWD_DATA dx (x's shape) from dy (y's) and w, ART_CONV_BWD_FILTER
// dw (w's shape) from x and dy.  The decoder checks the geometry and that
// each tensor fits its argument.  nhwc (format 9): bit i set when argument
// i ({written, a, b}) is stored channels-last, element (n, c, h, w) of a
// tensor of extents (N, C, H, W) at ((n H + h) W + w) C + c; only
// activations (x, y, dx, dy), never the filter, which stays (k, c /
// groups, r, s).
enum { ART_CONV_FWD, ART_CONV_BWD_DATA, ART_CONV_BWD_FILTER };
typedef struct ArtConv {
	uint8_t op; // ART_CONV_*
	uint8_t dtype; // ART_F32 (f64 models keep the printed path)
	uint8_t tf32; // 1: TF32 tensor-core engines allowed (--allow-tf32)
	uint32_t n, c, h, w, k, r, s, oh, ow; // each 1 .. INT32_MAX
	uint32_t sh, sw, ph, pw, dh, dw, groups; // strides, dilations, groups >= 1
	uint8_t nhwc; // bit i: argument i channels-last (format 9; 0 before)
} ArtConv;

// One CUDA kernel's launch contract (codegen/cuda.c prints the kernel with
// exactly these parameters, in this order, then the run seed if runseed).
typedef struct ArtKernel {
	uint8_t kind; // ART_LAUNCH_*
	char *name; // the extern "C" __global__ function in the task's module
	uint64_t points; // output points: the grid covers them (grid-stride loop)
	uint32_t grid; // blocks of 256 threads; 0: enough to cover points
	uint8_t runseed; // takes `unsigned long long runseed` after the buffers
	uint32_t module; // ART_LAUNCH_KERNEL: the task's module holding the function (0 before format 9)
	uint32_t narg;
	ArtKArg *arg;
	ArtGemm gemm; // ART_LAUNCH_GEMM only
	ArtConv conv; // ART_LAUNCH_CONV only
	// Filled by the decoder: the records after this one that belong to it
	// (ART_LAUNCH_CHOICE: every candidate's records, sequences with their
	// members; ART_LAUNCH_SEQ: points); 0 for other records.
	uint32_t span;
} ArtKernel;

typedef struct ArtTensor {
	char *name;
	uint8_t role; // inputs: ART_ROLE_*; outputs: ART_OUT_*
	uint8_t dtype; // ART_F32 ...
	uint8_t rank;
	int64_t dim[ART_MAXDIM];
	int32_t decl; // ART_ROLE_DECL: the declaration; else -1
	int32_t writeback; // outputs: the input whose new value it is, or -1
	// ART_OUT_CHECK only: the valid range [lo, end) of the index, and what
	// the message names: the op ("take_along"), the index ("'labels'", or
	// "the index computed at m.ir:3:9") and the op's place ("m.ir:20:5", or
	// ""): "vjp: take_along: index 5000 of 'labels' is out of range [0, 10)
	// (m.ir:20:5)".
	int64_t lo, end;
	char *op, *of, *at;
} ArtTensor;

// Where a shard's output goes in the whole task's (format 12): that output
// (the same name, the slice's dtype) has shape rank/dim, viewed row-major
// as [outer, mid, inner] with mid its basis axis; the slice is
// [:, off .. off + cnt, :], its outer * cnt * inner elements in that
// order.  So it is outer runs of cnt * inner contiguous elements, run o at
// element (o * mid + off) * inner of the whole output.
typedef struct ArtShardOut {
	uint8_t rank;
	int64_t dim[ART_MAXDIM];
	int64_t outer, mid, inner, off, cnt;
} ArtShardOut;

// A task that is shard k of n of a batched task (fadc --shards, passes'
// task_shard_layout): the same derivative over the basis rows [lo, hi) of
// total, named "<of>:<k>/<n>"; out[i] places its output i (every output
// of the user's, nout - ncheck of them).
typedef struct ArtShard {
	char *of; // the whole task's name ("hessian")
	uint32_t k, n;
	int64_t lo, hi, total;
	uint32_t nout;
	ArtShardOut *out;
} ArtShard;

// A CUDA module's images, offsets into the image section (ArtDesc.images).
typedef struct ArtModule {
	uint64_t cubin_off, cubin_len; // for the artifact's cuda_arch (sm_90)
	uint64_t ptx_off, ptx_len; // compute_XX PTX, the driver's fallback; 0 0 with --no-ptx
} ArtModule;

typedef struct ArtTask {
	char *name; // "vjp", "init.beta_value"
	uint8_t kind; // ART_TASK, ART_INIT
	int32_t decl; // ART_INIT: the declaration it computes; else -1
	uint64_t arena_bytes; // the memory plan's peak
	uint64_t naive_bytes; // the temporaries' sizes summed (no reuse)
	uint32_t nkernel;
	uint32_t nin, nout;
	ArtTensor *in, *out;
	// Filled by the decoder: how many of the outputs are index checks (the
	// last ncheck; nout - ncheck are the user's).
	uint32_t ncheck;
	uint8_t targets; // ART_TARGET_* bits: the code this task has
	// ART_TARGET_CUDA: the module images, as offsets into the image section
	// (ArtDesc.images), and the kernels run in order on one stream.  The
	// device arena is arena_bytes, placed by the same memory plan.
	// One module, or (format 9) several: each its own NVRTC program's
	// images, loaded side by side; a kernel record names its module.
	uint32_t nmodule; // 1 to ART_MAX_MODULES
	ArtModule *module;
	uint32_t ncuda;
	ArtKernel *kern;
	// The specialisation whose sizes the task was compiled with (an index
	// of ArtDesc.spec), or -1: an initializer of a declaration that every
	// specialisation shares.  0 in an artifact of one specialisation.
	int32_t spec;
	// Filled by the decoder: the specialisation's name (ArtDesc.spec[spec],
	// borrowed), "" for one specialisation or a shared initializer.
	const char *spec_name;
	ArtShard *shard; // format 12: a shard of a batched task; NULL otherwise
} ArtTask;

typedef struct ArtDecl {
	char *name;
	uint8_t kind; // ART_PARAM, ART_CONST
	uint8_t dtype;
	uint8_t rank;
	int64_t dim[ART_MAXDIM];
	int32_t init; // the init task, or -1: must be bound by name
	// -1: the declaration has this shape and initializer in every
	// specialisation (shared); else the one specialisation it belongs to
	// (the same name appears once per specialisation, each its own shape).
	int32_t spec;
} ArtDecl;

// A CPU level of the artifact's code (format 11): the CPU LLVM compiled it
// for and the features it needs.  Level 0 is ArtDesc.cpu and .features (the
// only one before format 11); level i > 0 has its own task table, behind
// the entry symbol FADC_ENTRY_SYMBOL "." cpu (art_level_symbol).
typedef struct ArtLevel {
	char *cpu; // "x86-64-v4": letters, digits, '.', '_' and '-', at most 63 bytes
	char *features; // comma list, as ArtDesc.features
} ArtLevel;

typedef struct ArtDesc {
	uint32_t version; // the format read; encoding: 0 writes ART_FORMAT_VERSION
	char *model; // the module's name
	uint64_t source_hash; // FNV-1a 64 of every source file (prelude, model): ir_srcmap_hash
	char *options; // the compile options, one line
	char *triple; // LLVM target triple
	char *cpu; // LLVM CPU name
	char *features; // comma-separated CPU features the code needs (runtime-checked)
	// The CPU levels (format 11), lowest first: level[0] is {cpu, features}
	// (the encoder writes those, and level[1 .. nlevel) after them); the
	// decoder gives nlevel >= 1, level[0] borrowing cpu and features.
	// nlevel 0 or 1 when encoding: one level, no list (the older formats).
	uint32_t nlevel;
	ArtLevel *level;
	char *cuda_arch; // "sm_90" when some task has CUDA code, else ""
	uint64_t images_bytes; // the image section: the bytes just before the descriptor
	uint64_t images_hash; // FNV-1a 64 of those bytes (pins them to the loaded library)
	// The specialisations (format 5): each one's -D values that differ
	// between them, "N=8" or "N=2,K=4".  An artifact of one specialisation
	// (format 3) decodes as nspec 1 with spec[0] "".
	uint32_t nspec;
	char **spec;
	uint32_t ndecl, ntask;
	ArtDecl *decl;
	ArtTask *task;
	// Filled by art_read only: a malloc'ed copy of the image section
	// (images_bytes bytes; NULL when empty), freed by art_desc_free.
	uint8_t *images;
} ArtDesc;

// Encodes d into a malloc'ed buffer (*out, *len) in format d->version, or
// (0) the oldest that holds it (art_desc_version; older ones for tests of
// old files).  nspec 0 or 1 and a version below 5: spec, ArtDecl.spec and
// ArtTask.spec are not written (they must be NULL or "", -1 and 0).  0 on out
// of memory, or when d holds what its version cannot express (host steps
// before 3, GEMMs before 4, specialisations before 5).
int art_desc_encode(const ArtDesc *d, uint8_t **out, size_t *len);
// Decodes desc[0..len) into *d (free with art_desc_free).  0 with a message
// on any malformation.
int art_desc_decode(const uint8_t *buf, size_t len, ArtDesc *d, char *err, size_t errlen);
void art_desc_free(ArtDesc *d);

// The 40-byte trailer for a file whose first `size` bytes are the shared
// library, the image section and the descriptor (desc_len bytes, ending at
// `size`); crc is art_crc32 of those `size` bytes; version is the
// descriptor's (art_desc_version).
void art_trailer_make(uint8_t t[ART_TRAILER_SIZE], uint32_t version, uint64_t size,
                      uint64_t desc_len, uint32_t crc);
// The format version art_desc_encode writes for d.
uint32_t art_desc_version(const ArtDesc *d);

// Reads and checks an artifact: the trailer, the checksum over the whole
// file, the format version, decodes the descriptor and checks the image
// section against it (place, hash, every task's images inside it); d->images
// gets a copy of the section.  *desc_bytes (a
// malloc'ed copy, *desc_len bytes) is what the .so must also carry.
// Returns ART_READ_OK, or another ArtRead with "<path>: <what>" in err;
// never crashes.
typedef enum ArtRead {
	ART_READ_OK,
	ART_READ_IO, // the file could not be opened or read
	ART_READ_FORMAT, // not an artifact, corrupt, truncated
	ART_READ_VERSION, // a format version this runtime does not read
	ART_READ_NOMEM,
} ArtRead;
ArtRead art_read(const char *path, ArtDesc *d, uint8_t **desc_bytes, size_t *desc_len, char *err,
                 size_t errlen);

uint32_t art_crc32(uint32_t crc, const void *p, size_t n); // start with 0
uint64_t art_fnv1a64(uint64_t h, const void *p, size_t n); // start with ART_FNV_BASIS
#define ART_FNV_BASIS 0xcbf29ce484222325ull

// The entry symbol of level i of d: FADC_ENTRY_SYMBOL for level 0, else
// FADC_ENTRY_SYMBOL "." cpu ("fadc_artifact_v1.x86-64-v4").  0 if it does
// not fit.
int art_level_symbol(const ArtDesc *d, uint32_t i, char *buf, size_t n);

// ---------------------------------------------------------------- cpu.c
// CPU features the runtime can detect (cpuid on x86-64), by LLVM's names:
// sse2 sse3 ssse3 sse4.1 sse4.2 popcnt cx16 sahf avx avx2 bmi bmi2 f16c fma
// lzcnt movbe xsave avx512f avx512dq avx512cd avx512bw avx512vl.
int rt_cpu_feature_index(const char *name); // -1 if unknown
const char *rt_cpu_feature_name(int i); // NULL past the last
// The host's features as a bit set over the table above.  The environment
// variable FADC_CPU_FEATURES (a comma list) replaces the detected set: the
// tests' way to fake an older CPU.
uint64_t rt_cpu_host_features(void);
// 1 if `host` has every feature of the comma list `required`; else 0 with
// the missing (or unknown) ones named in err.
int rt_cpu_check(const char *required, uint64_t host, char *err, size_t errlen);
// The architecture this runtime runs on, as it starts LLVM triples
// ("x86_64", "aarch64", ...).
const char *rt_cpu_arch(void);
// The CPU level of d whose code runs on a host of `host`'s features: the
// highest it has every feature of, or (force not NULL nor "") the level
// named force (FADC_CPU_LEVEL).  -1 with a message in err when there is
// none: the lowest level's missing features, the forced level's, or a
// forced name that is no level of d (listing them).
int rt_cpu_pick(const ArtDesc *d, uint64_t host, const char *force, char *err, size_t errlen);

#endif
