// codegen/codegen.h -- from task graphs to a model.so: fusion into the
// kernel IR, memory plans, the LLVM CPU backend and the artifact.
//
//   model.ir --frontend--> Module --pass_task--> task graphs
//     --cg_lower (fuse.c, lower.c, lower_window.c)--> KProgram per task (kir.h)
//     --cg_plan (plan.c)--> arena offsets
//     --cg_llvm_emit (llvm.c, llvm_math.c, llvm_gemm.c)--> object file
//     --cc -shared (compile.c)--> model.so + appended descriptor (docs/ARTIFACT.md)
//
// Only llvm*.c (and their llvm_impl.h) include llvm-c/*.  Errors: every function that can fail
// returns 0 (or NULL) and writes one message to err; user-level errors
// (an op the backend does not support yet, a task too large) name the op,
// the task and the source location.
#ifndef FADC_CODEGEN_H
#define FADC_CODEGEN_H

#include <stdio.h>

#include "ir.h"
#include "kir.h"

// ---------------------------------------------------------------- compile.c
// The default limit on what one task needs (outputs plus intermediates):
// every recommended task of the zoo at full size fits (the largest, detr's
// vhp, needs 58.4e9 bytes; deepspeech's vjp 44.9e9, fcn_resnet's vhp
// 40.3e9), resnet18's full Hessian (5.5e14 bytes of outputs) does not.
#define CG_MAX_TASK_BYTES ((int64_t)64 << 30)

// How far a compile is (CgOptions.progress): stage names the step ("tasks
// (passes, lowering)", "kernels (NVRTC)", "LLVM code generation",
// "linking"), done of total units of it (total 0: no count).  A stage
// "warning: ..." is a warning for the user, not a step; an empty stage
// comes before the compiler writes to stderr itself (an NVRTC report).
// Called from any thread, one call at a time.
typedef void (*CgProgressFn)(void *arg, const char *stage, long done, long total);

typedef struct CgOptions {
	const char *const *tasks; // task names (passes/tasks.c); "all" = every task
	int ntasks; // 0: forward vjp jvp vhp hvp (the model's own list, later)
	const char *const *defines; // the -D NAME=VALUE the module was parsed with (recorded)
	int ndefines;
	int opt_level; // 0..3 (LLVM's -O); -1: 2
	const char *cpu; // NULL: CG_DEFAULT_LEVELS; a list of x86-64 levels, "native" or "generic" (cg_llvm_levels)
	int compute_f64; // compute f32 values in double (testing: isolates f32 rounding)
	const char *cc; // linker driver; NULL: $FADC_CC, else "cc"
	const char *support_lib; // NULL: $FADC_SUPPORT_LIB, else the one built with fadc
	int64_t max_task_bytes; // outputs + arena of one task; 0: CG_MAX_TASK_BYTES
	FILE *stats; // per task: kernels, peak arena bytes, naive bytes (--stats)
	FILE *emit_kir; // the kernel IR of every task (--emit kir)
	FILE *emit_llvm; // the optimized LLVM IR (--emit llvm)
	FILE *emit_cuda; // the CUDA C of every task NVRTC compiles (--emit cuda)
	int targets; // CG_TARGET_* bits (--target cpu,cuda); 0: CG_TARGET_CPU
	const char *cuda_arch; // --cuda-arch; NULL: "sm_90" (a cubin, plus compute_90 PTX)
	int no_ptx; // --no-ptx: the cubin alone, no PTX for newer GPUs (recorded: no_ptx=1)
	int jobs; // compilations at once (NVRTC programs and LLVM pieces, one pool); 0: $FADC_JOBS, else the online cores; at most 64
	FILE *cuda_diag; // NVRTC logs and sources of failed compilations; NULL: stderr
	int allow_tf32; // cuBLAS GEMMs of f32 may use TF32 tensor cores (--allow-tf32; recorded)
	int no_cache; // --no-cache: no compile cache (docs/CUDA.md "The compile cache")
	CgProgressFn progress; // NULL: none (fadc: on a terminal only)
	void *progress_arg;
} CgOptions;

// What an artifact's tasks are compiled for.  Initializer tasks (init.*)
// are CPU code in every artifact: the runtime computes declarations on the
// host once and uploads them.  A CUDA-only artifact still holds a CPU stub
// per task (no kernels), so that the library's table keeps one function per
// task; its descriptor says the task has no CPU code.
enum { CG_TARGET_CPU = 1, CG_TARGET_CUDA = 2 };
// Parses "cpu", "cuda", "cpu,cuda" (either order) into CG_TARGET_* bits;
// 0 with a message on anything else, or on cuda in a build without the
// CUDA toolkit.
int cg_parse_targets(const char *s, int *targets, char *err, size_t errlen);

// Compiles the tasks of m, and one init task per declaration with an
// initializer, into the shared library out_so (written atomically: a
// failure leaves no file).  Compiling the same input twice gives the same
// bytes.
// The version of LLVM the backend was built with ("14.0.6").
const char *cg_llvm_version(void);
int cg_compile_module(const Module *m, const CgOptions *o, const char *out_so, char *err,
                      size_t errlen);
// The same for several specialisations of one source (fadc -D N=8,32):
// ms[s] is the module parsed with specialisation s's sizes, specdefs[s]
// its name ("N=8", recorded in the artifact); 1 <= nspec <= ART_MAX_SPECS
// (16).  nspec 1 is cg_compile_module (specdefs may be NULL).
int cg_compile_specs(const Module *const *ms, const char *const *specdefs, int nspec,
                     const CgOptions *o, const char *out_so, char *err, size_t errlen);
// "file:line:col" of loc, or "" when there is none.
void cg_loc_str(const SrcMap *src, Loc loc, char *buf, size_t n);

// ---------------------------------------------------------------- fuse.c
// How an op is lowered.
typedef enum CgKind {
	CK_NONE, // not supported by the kernel IR yet
	CK_INPUT, // a task input: a buffer of its own
	CK_FREE, // layout or constant: an index map, no arithmetic (inlined anywhere)
	CK_MAP, // elementwise arithmetic (inlined into its consumer's kernel)
	CK_REDUCE, // sum, mean, max, min: a reduction kernel
	CK_MATMUL, // a contraction kernel
	CK_SCATTER, // take_add, take_along_add: a gather-sum kernel
	CK_SCAN, // scan: a loop over its body's kernels; its value is a tuple of buffers
	CK_GET, // get: one buffer of a scan's tuple (no kernel)
	CK_HOST, // linear_sum_assignment: a host kernel (a support-library call)
} CgKind;

CgKind cg_op_kind(int op);
int cg_op_cost(int op); // cost of recomputing one element, kx_op_cost's units (0: free)

// Which nodes get a kernel and a buffer of their own (root[n] = 1): the
// outputs, reductions, contractions, scans and host ops, the sequences and
// loop-invariant operands of a scan (its body reads them from buffers), and
// values that would otherwise be recomputed (read through a broadcast, or
// by several kernels) unless they are free.  Everything else is inlined
// into the kernel of its consumers.
// Returns 0 on success, or the first node whose op is not supported.
NodeId fill_fusion(const Graph *g, Arena *a, uint8_t **root);

// ---------------------------------------------------------------- lower.c
// A task graph as kernels.  fcompute is DT_F32 (f32 arithmetic) or DT_F64.
// NULL with a message naming the op, the task and the location when the
// graph uses an op the kernel IR does not support.
KProgram *cg_lower(const Graph *g, const char *task, DType fcompute, char *err, size_t errlen);

// ---------------------------------------------------------------- plan.c
// The static memory plan: every KB_TMP buffer gets an arena offset; two
// buffers share bytes only if their lifetimes (first writer .. last
// reader, in kernel order) are disjoint.  Offsets are 64-byte aligned.
// cg_plan first calls cg_remat: values saved across the peak and cheap to
// make again are recomputed where they are read later (plan.c's notes),
// the cheapest first, while the live peak is over the memory goal
// (FADC_MEMORY_GOAL: by default 0.65 of the peak before recomputation; 0:
// no goal); FADC_NO_REMAT=1 at compile time turns it off.  cg_remat returns
// the kernels added.
void cg_plan(KProgram *p);
int cg_remat(KProgram *p);

// ---------------------------------------------------------------- kir_layout.c
// The CUDA target's copy of p with the activations around its cuDNN
// convolutions stored channels-last (NHWC), the kernels reading and
// writing them rewritten (docs/CUDA.md, "Channels-last activations"); NULL
// when nothing changes (no convolution record; strict fp32, tf32 0, unless
// FADC_CUDA_NHWC=1; FADC_CUDA_NO_NHWC=1).  p is not modified (the CPU code
// is printed from it); *nrelaid (may be NULL) gets the number of buffers
// relaid.  The caller frees the copy.
KProgram *kir_layout_nhwc(const KProgram *p, int tf32, int *nrelaid);

// ---------------------------------------------------------------- jobs.c
// One pool of threads for every compilation of a compile, NVRTC's programs
// and LLVM's pieces together (docs/CODEGEN.md "Compile time").  Jobs run
// first in, first out; each writes only its own outputs, which the caller
// reads after cg_pool_wait on the job's batch, so no output depends on the
// threads.  The progress callback (may be NULL) is called after each job
// with the batches at work: one alone as (name, done, total), several as
// one stage naming each count.
typedef struct CgPool CgPool;
typedef struct CgBatch {
	const char *name; // its progress stage: "kernels (NVRTC)", "LLVM pieces"
	long done, total; // the weights of its jobs ended, and added
	int pending; // jobs queued or running
	int started; // jobs taken
	int cancel; // jobs not yet taken are skipped (cg_pool_cancel)
	double cpu; // CPU seconds of its jobs (each on its thread's clock)
	double first, last; // CLOCK_MONOTONIC: its first job's start, its last one's end
} CgBatch;
// nthreads threads (at most 64; those that fail to start are not missed:
// with none, cg_pool_wait runs the jobs).  NULL when out of memory.
CgPool *cg_pool_new(int nthreads, CgProgressFn progress, void *progress_arg);
int cg_pool_threads(const CgPool *p); // the threads jobs run on (1 at least)
// The CPU seconds of the jobs of b ended so far (b NULL: of every batch).
double cg_pool_cpu(CgPool *p, const CgBatch *b);
// A batch (b zeroed and named) known to the progress line, until
// cg_pool_unbatch (before b's memory goes).
void cg_pool_batch(CgPool *p, CgBatch *b, const char *name);
void cg_pool_unbatch(CgPool *p, CgBatch *b);
// Queues fn(arg) in batch b; weight counts toward b's progress.
void cg_pool_add(CgPool *p, CgBatch *b, void (*fn)(void *), void *arg, long weight);
// Returns once every job of b has ended (or was skipped).
void cg_pool_wait(CgPool *p, CgBatch *b);
// b's jobs not yet taken are skipped (an error elsewhere makes them moot).
void cg_pool_cancel(CgPool *p, CgBatch *b);
// Runs or skips what is queued, then ends the threads.
void cg_pool_free(CgPool *p);
// The pieces of n units, about per a piece: n / per, 1 to max.
unsigned cg_piece_count(uint64_t n, unsigned per, unsigned max);
// The piece (0 .. P-1) of the name hashed to h, by linear hashing: the
// pieces of P and P + 1 differ in one piece of P split in two.
unsigned cg_piece_of(uint64_t h, unsigned P);

// ---------------------------------------------------------------- llvm.c
typedef struct CgTask {
	const char *name; // "vjp", "init.beta_value"
	KProgram *prog;
} CgTask;

typedef struct CgCache CgCache;
// The CPU levels of one artifact (docs/ARTIFACT.md, "CPU levels"): code for
// each, the runtime taking the best the host runs.  The default list.
enum { CG_MAX_LEVELS = 4 };
#define CG_DEFAULT_LEVELS "x86-64-v3,x86-64-v4"
typedef struct CgLevel {
	const char *cpu; // LLVM CPU name ("x86-64-v3")
	const char *features; // LLVM feature string, "" for the CPU's own
	const char *cpu_features; // cg_llvm_cpu's list ("avx2,fma,..."): avx512f widens the GEMM
} CgLevel;
typedef struct CgTarget {
	const char *triple; // NULL: the host's
	// The levels, lowest first (at least one).  Level 0's code is all there
	// is of it; a higher one's, the pieces whose IR differs from level 0's
	// (or every piece, below AVX2): cg_llvm_emit.
	CgLevel level[CG_MAX_LEVELS];
	int nlevel;
	int opt_level;
	struct CgCache *cache; // the compile cache of the object code (ccache.c); NULL: none
	int jobs; // pieces compiled at once without a pool; 0: the online cores
	CgProgressFn progress; // each piece compiled ("LLVM pieces"), without a pool; NULL: none
	void *progress_arg;
	CgPool *pool; // the threads the pieces compile on; NULL: a pool of its own (jobs, progress)
	// The descriptor, when cg_llvm_emit is given none (desc NULL): asked for
	// once the task pieces are queued, so that they compile while the
	// caller finishes it (NVRTC's images); the bytes stay the caller's.
	// levels: bit i set when level i has code (level 0 always; a higher
	// level none when every piece of it is level 0's).  0 with err set
	// fails the emit.  With several levels desc must be NULL.
	int (*descriptor)(void *arg, unsigned levels, const uint8_t **desc, size_t *desclen, char *err,
	                  size_t errlen);
	void *descriptor_arg;
} CgTarget;

// The most pieces of one level, and object files cg_llvm_emit writes: the
// pieces of every level and the entry's.
enum { CG_LLVM_MAX_PIECES = 128, CG_LLVM_MAX_OBJECTS = CG_MAX_LEVELS * CG_LLVM_MAX_PIECES + 1 };
// Emits every task and the entry symbol fadc_artifact_v1 (runtime/abi.h),
// with the descriptor bytes desc[0..desclen) as a constant, as pieces
// (docs/CODEGEN.md "Compile time"), each verified, optimized with LLVM's
// new pass manager (default<O2>) and compiled on threads into an ELF object
// file, OBJ_PREFIX.0.o to OBJ_PREFIX.(*nobj - 1).o, linked in that order.
// The files are the same whatever the threads and the cache.
int cg_llvm_emit(const CgTask *tasks, int ntasks, const uint8_t *desc, size_t desclen,
                 const CgTarget *t, FILE *emit_llvm, const char *obj_prefix, int *nobj,
                 char *err, size_t errlen);
// LLVM's default target triple (the host's), malloc'ed.
char *cg_llvm_default_triple(void);
// The CPU name and the runtime-checkable features ("avx2,fma,...") that
// code for `cpu` (as in CgOptions) needs; 0 if LLVM does not know the CPU.
int cg_llvm_cpu(const char *cpu, char *name, size_t nname, char *features, size_t nfeat,
                char *llvm_features, size_t nllvm, char *err, size_t errlen);
// The CPU levels of `cpu` (CgOptions.cpu): one CPU cg_llvm_cpu knows, or a
// comma list of x86-64 levels (x86-64, x86-64-v2, x86-64-v3, x86-64-v4),
// each once, returned lowest first; NULL: CG_DEFAULT_LEVELS.  Writes
// their names to lv[0 ..] (at most CG_MAX_LEVELS) and returns how many;
// 0 with a message naming the bad one.
int cg_llvm_levels(const char *cpu, char lv[][32], char *err, size_t errlen);

// ---------------------------------------------------------------- cuda.c, cuda_sched.c
// The CUDA backend (docs/CUDA.md): the printer (cuda.c) and the scheduler
// (cuda_sched.c) build everywhere; the NVRTC driver (cuda_nvrtc.c, the only
// file that includes nvrtc.h) only with the CUDA toolkit (FADC_HAVE_CUDA).
// The runtime never links NVRTC.
//
// Task program p as CUDA C: one extern "C" __global__ kernel per kernel of
// p, named fadc_<task>_k<i>_<what>, each preceded by a comment giving its
// points and arguments.  Returns the malloc'ed, NUL-terminated source (and
// its length in *len), the same bytes for the same program; NULL with a
// message when p uses an op the printer does not support yet (samplers).
char *cg_cuda_print(const KProgram *p, size_t *len, char *err, size_t errlen);
// The same with equal kernels shared (docs/CUDA.md, "Shared kernels"):
// a __global__ whose text equals an earlier one's up to the names of its
// parameters and locals is printed once, and *shared lists (malloc'ed,
// *nshared entries; cg_cuda_shared_free) each launch name that is no
// function of the source and the function it launches instead.  What
// compile.c prints, compiles and records.
typedef struct CgCudaShared {
	char *name; // a kernel's name as cg_cuda_kernel gives it
	char *as; // the function of the source that its launches call
} CgCudaShared;
char *cg_cuda_print_shared(const KProgram *p, size_t *len, CgCudaShared **shared,
                           uint32_t *nshared, char *err, size_t errlen);
void cg_cuda_shared_free(CgCudaShared *s, uint32_t n);
// The same source and sharing, and the source cut into parts (*parts,
// *nparts; cg_cuda_parts_free), in order, so that a large task can be
// compiled as several programs (docs/CUDA.md, "Pieces"): a program is
// every CG_CUDA_PART_ALL part, the CG_CUDA_PART_LOOPS parts when it holds
// a loop unit's, and whole units (parts of equal unit >= 0: what must be
// compiled together).  Notes (comments alone) belong to no program.
enum { CG_CUDA_PART_ALL = -1, CG_CUDA_PART_LOOPS = -2, CG_CUDA_PART_NOTE = -3 };
typedef struct CgCudaPart {
	size_t off, len; // its bytes of the source
	int32_t unit; // CG_CUDA_PART_* or its unit
	uint8_t loop; // a part of a persistent loop kernel's unit (needs the LOOPS parts)
	char *name; // the __global__ it defines (what launch records name), or NULL
} CgCudaPart;
char *cg_cuda_print_parts(const KProgram *p, size_t *len, CgCudaShared **shared,
                          uint32_t *nshared, CgCudaPart **parts, uint32_t *nparts, char *err,
                          size_t errlen);
void cg_cuda_parts_free(CgCudaPart *q, uint32_t n);
// The launch contract of kernel ki of p, as cg_cuda_print prints it: the
// function's name, its output points (the grid covers them), the buffers it
// takes in argument order (the output first) and whether the run seed
// follows them.  name and buf are malloc'ed (the caller frees both); 0 on
// out of memory.
typedef struct CgCudaKernel {
	char *name;
	int64_t points;
	uint32_t grid; // blocks to launch; 0: enough 256-thread blocks to cover points
	int runseed;
	int host; // a KHost: a host step, no kernel (KH_ASSIGN: points = rows, grid =
	          // cols, buf = {out, cost}); 0 for a kernel
	int gemm; // 1: a cuBLAS GEMM, no kernel: the plan below, buf = {C, A, B}
	KGemmPlan g;
	int choice; // n > 0: a choice record, no work (narg 0): the next n launches
	            // are candidates for one output, the runtime runs the faster
	            // (a sequence with its members counts as one)
	int seq; // n > 0: a sequence record, no work (narg 0): the next n launches
	         // are one candidate of a choice
	const KConv *conv; // a cuDNN convolution, no kernel: buf = {written, a, b}

	uint32_t narg;
	uint32_t *buf; // narg buffer indices of p
} CgCudaKernel;
// A small task (by its work: points times reduction terms) is one launch,
// a fused kernel of one thread block calling every kernel in order with a
// barrier between (loops included); a larger one is one launch per kernel
// outside loops, one persistent kernel per outermost loop (a scan), a
// host step per host kernel, and a cuBLAS GEMM per large contraction
// kernel that kir_gemm_plan takes (CG_CUDA_GEMM_ONLY_WORK multiply-adds or
// more, outside loops).  A contraction of CG_CUDA_GEMM_MIN_WORK to
// CG_CUDA_GEMM_ONLY_WORK is a choice (docs/CUDA.md, "Choices measured on
// the GPU"): a choice record (CgCudaKernel.choice = 2), its printed kernel
// (a __global__ of its own), then its GEMM.  The launches of p, and the
// contract of launch li.
#define CG_CUDA_GEMM_MIN_WORK ((int64_t)1 << 16)
#define CG_CUDA_GEMM_ONLY_WORK ((int64_t)1 << 22)
uint32_t cg_cuda_launches(const KProgram *p);
// A fused task's phases: its runs of kernels between barriers (kernels
// that touch no byte another thread touched share one); 0 when the task
// is not fused (docs/CUDA.md, "Fewer barriers").
uint32_t cg_cuda_phases(const KProgram *p);
// The form of kernel ki of a fused task: 0 a thread per point, 1 a warp
// per point, 2 the block per point; -1 when the task is not fused.
int cg_cuda_fused_form(const KProgram *p, uint32_t ki);
int cg_cuda_kernel(const KProgram *p, uint32_t li, CgCudaKernel *k);
// Every launch's contract, out[0..n) with n = cg_cuda_launches(p): the
// launch plan computed once (cg_cuda_kernel computes it at every call, so
// a loop over the launches is quadratic: 3.5 s of fcn_resnet's compile).
// 0 (nothing held) when out of memory.
int cg_cuda_kernels(const KProgram *p, CgCudaKernel *out, uint32_t n);

// ---------------------------------------------------------------- cuda_nvrtc.c
#ifdef FADC_HAVE_CUDA
// Compiles CUDA C with NVRTC: arch "sm_90" (NULL: sm_90) gives a cubin,
// "compute_90" PTX (without a trailing NUL), into *out (malloc'ed).  On
// failure err holds the failed call and NVRTC's message; a compilation
// error also writes the program log and the lines it blames, in context, to
// diag (NULL: stderr), and the whole source to $TMPDIR/fadc-nvrtc-NAME, a
// path the report names.  `name` names the source in NVRTC's messages.
int cg_cuda_compile(const char *src, const char *name, const char *arch, uint8_t **out,
                    size_t *outlen, FILE *diag, char *err, size_t errlen);
// One compilation for arch "sm_XX" (NULL: sm_90) giving both its cubin and,
// when ptx is non-NULL, the compute_XX PTX it was assembled from (without a
// trailing NUL; the same bytes a compute_XX compilation gives), so that an
// artifact's two images cost one compilation.  Errors as cg_cuda_compile.
int cg_cuda_compile_both(const char *src, const char *name, const char *arch, uint8_t **cubin,
                         size_t *cubinlen, uint8_t **ptx, size_t *ptxlen, FILE *diag, char *err,
                         size_t errlen);
// NVRTC's version; 0 if it cannot be asked.
int cg_cuda_nvrtc_version(int *major, int *minor);
// The compile cache's key of cg_cuda_compile_both(src, name, arch, ...,
// with PTX when ptx): a SHA-256 of src, arch, the options nvrtc_run passes
// and NVRTC's version; not of name, which NVRTC never sees (diagnostics
// only).
void cg_cuda_cache_key(const char *src, const char *arch, int ptx, uint8_t key[32]);
#endif

// ---------------------------------------------------------------- ccache.c
// The compile cache (docs/CUDA.md "The compile cache"): entries keyed by a
// SHA-256 under $FADC_CACHE_DIR/compile/, each two byte strings (a cubin
// and its PTX), written atomically, checked on reading, evicted oldest
// first past FADC_CACHE_MAX_BYTES (1 GiB).  Thread-safe.
typedef struct CgSha256 {
	uint32_t h[8];
	uint64_t n;
	uint8_t buf[64];
	size_t fill;
} CgSha256;
void cg_sha256_init(CgSha256 *s);
void cg_sha256_add(CgSha256 *s, const void *data, size_t len);
void cg_sha256_field(CgSha256 *s, const void *data, size_t len); // length, then bytes
void cg_sha256_end(CgSha256 *s, uint8_t out[32]);

// NULL when the folder cannot be made or written (one warning on stderr
// per process): the compile goes on without the cache.
CgCache *cg_cache_open(void);
// 1 on a hit with *a, *b malloc'ed; 0 on a miss, a corrupt or truncated
// entry (never loaded: the caller compiles and stores over it), or c NULL.
int cg_cache_get(CgCache *c, const uint8_t key[32], uint8_t **a, size_t *alen, uint8_t **b,
                 size_t *blen);
void cg_cache_put(CgCache *c, const uint8_t key[32], const uint8_t *a, size_t alen,
                  const uint8_t *b, size_t blen);
// Evicts past the bound if anything was stored; the counts; frees c.
void cg_cache_close(CgCache *c, long *hits, long *misses);
// FADC_CACHE_MAX_BYTES (N, NK, NM, NG); the default 1 GiB when unset or bad.
long long cg_cache_max_bytes(void);

#endif
