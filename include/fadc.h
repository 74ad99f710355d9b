// fadc.h -- the fadc runtime: load a compiled model (model.so), bind its
// parameters, run its tasks.
//
// A model compiled by fadc is one shared library holding the code of its
// tasks (forward, vjp, jvp, vhp, hvp, jacobian, ..., see docs/TASKS.md) and
// a descriptor of each task's inputs and outputs.  This API opens it,
// describes it, binds parameters and constants (from memory, from .npy or
// .safetensors files, or from the model's own seeded initializers) and runs
// tasks into tensors that the caller or the runtime owns.
//
// Devices: every tensor knows its device, dtype and shape; a context is a
// device and its queue.  A CUDA context ({FADC_DEVICE_CUDA, i}) runs the
// tasks of artifacts compiled with --target cuda (or cpu,cuda) on GPU i:
// the driver is loaded at run time (dlopen), so where there is none,
// creating such a context fails with FADC_ERR_DEVICE and the message
// fadc_context_error(NULL).  On a device, tensors live in the context's
// memory pool: fadc_tensor_data is NULL, fadc_tensor_read and _write copy;
// fadc_run is asynchronous (it returns once the work is queued on the
// context's stream: fadc_tensor_read and fadc_context_synchronize wait).
// A task runs eagerly once, then as a replayed CUDA graph (docs/CUDA.md);
// FADC_DISABLE_CUDA_GRAPHS=1 in the environment turns graphs off.
//
// Errors: every call that can fail returns an fadc_status; the message of
// the last failure is fadc_context_error(ctx) of the context involved.  A
// context (and everything made from it) is used by one thread at a time.
//
// Trust: opening an artifact checks its checksum, format version, ABI and
// the CPU features its code needs before loading it, but loading a shared
// library runs its code.  Open only artifacts you trust, as you would any
// shared library.
#ifndef FADC_H
#define FADC_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FADC_API_VERSION 1
#define FADC_VERSION "0.1.0" // fadc's release: `fadc --version`, fadc-bench's JSON
#define FADC_MAXDIM 8
#define FADC_MAX_THREADS 4096 // the largest num_threads a context accepts

typedef enum fadc_status {
	FADC_OK = 0,
	FADC_ERR_ARG, // a bad argument: NULL, an index out of range, a wrong count
	FADC_ERR_IO, // a file could not be read
	FADC_ERR_FORMAT, // not an artifact, or a corrupt or truncated one
	FADC_ERR_VERSION, // an artifact format or ABI this runtime cannot read
	FADC_ERR_CPU, // the host lacks CPU features the artifact's code needs
	FADC_ERR_LOAD, // the library did not load, or its code does not match its descriptor
	FADC_ERR_NOT_FOUND, // no task, declaration or tensor of that name
	FADC_ERR_SHAPE, // a tensor of the wrong dtype or shape
	FADC_ERR_DEVICE, // a tensor on the wrong device, or a device that is not available
	FADC_ERR_UNBOUND, // a declaration without initializer was never bound
	FADC_ERR_NOMEM, // out of memory
	FADC_ERR_RUN, // a task failed while running
	FADC_ERR_STATE, // not possible now (running a model opened to describe only, ...)
	// A model-owned output read, written or passed to fadc_run after a later
	// call on the device reused its memory (docs/CUDA.md, "Output
	// lifetimes"); the message names the output, its task and the task
	// that overwrote it.
	FADC_ERR_OUTPUT_OVERWRITTEN,
	// An index in the data out of its range (a class label, a token id):
	// the message names the task, the op, the index tensor, the offending
	// value and the range, "vjp: take_along: index 5000 of 'labels' is out
	// of range [0, 10) (models/resnet18.ir:144:10)".  See fadc_run.
	FADC_ERR_INDEX,
} fadc_status;

typedef enum fadc_dtype { FADC_F32, FADC_F64, FADC_I64, FADC_BOOL } fadc_dtype;

// FADC_DEVICE_CUDA_LIST (appended): a context over the GPUs that
// fadc_context_options.devices lists (data-parallel runs, docs/MULTIGPU.md).
typedef enum fadc_device_kind {
	FADC_DEVICE_CPU,
	FADC_DEVICE_CUDA,
	FADC_DEVICE_CUDA_LIST
} fadc_device_kind;

typedef struct fadc_device {
	fadc_device_kind kind;
	int index; // which device of that kind (0 for the CPU)
} fadc_device;

typedef struct fadc_context fadc_context;
typedef struct fadc_model fadc_model;
typedef struct fadc_tensor fadc_tensor;

const char *fadc_status_name(fadc_status s); // "FADC_ERR_SHAPE", ...
const char *fadc_dtype_name(fadc_dtype t); // "f32", "f64", "i64", "bool"
size_t fadc_dtype_size(fadc_dtype t); // bytes per element (bool: 1)

// ---------------------------------------------------------------- contexts

typedef struct fadc_context_options {
	fadc_device device; // {FADC_DEVICE_CPU, 0}
	// CPU threads for large kernels, the calling thread included: 1 runs
	// everything on the calling thread; 0 is the runtime's choice (the
	// environment's FADC_NUM_THREADS, else the CPUs online).  Out of
	// 0 .. FADC_MAX_THREADS (or a bad FADC_NUM_THREADS): FADC_ERR_ARG.
	// Small tasks never wake the pool (docs/CODEGEN.md).
	int num_threads;
	uint64_t seed; // run seed of initializers and samplers (fadc run --seed)
	// ---- appended to API version 1 (issue 27).  Read only when device is
	// {FADC_DEVICE_CUDA_LIST, 0}, so that options from a caller compiled
	// against an older fadc.h, which end at `seed`, are never read past
	// their end.  The GPUs of one host, each {FADC_DEVICE_CUDA, i}, distinct,
	// 1 .. FADC_MAX_DEVICES of them: one lists a single GPU (the same as
	// device {FADC_DEVICE_CUDA, i}; FADC_MULTI_FORCE=1 in the environment
	// makes it a one-rank context of the kind below, for tests); several
	// need NCCL (libnccl.so.2, or the file FADC_NCCL_LIB names), loaded at
	// run time.  Bad lists: FADC_ERR_ARG; NCCL or a GPU missing:
	// FADC_ERR_DEVICE.  A context over several GPUs is devices[0]'s context
	// (its tensors live there) whose fadc_run of a model declaring a batch
	// is data-parallel: the caller gives the full batch, each GPU runs its
	// rows at that shard's size (the artifact must hold the task at that
	// size: fadc -D N=n,n_s), the results are combined by an NCCL
	// all-reduce and land on devices[0] (docs/MULTIGPU.md).  NCCL waits poll
	// a deadline (FADC_NCCL_TIMEOUT_S, 60 s): a stuck GPU is FADC_ERR_DEVICE.
	const fadc_device *devices;
	int ndevices;
} fadc_context_options;
#define FADC_MAX_DEVICES 64

// o may be NULL (the CPU, seed 0).  On failure, fadc_context_error(NULL)
// says why (on this thread).
fadc_status fadc_context_create(const fadc_context_options *o, fadc_context **out);
void fadc_context_destroy(fadc_context *ctx); // close its models and free its tensors first
// The run seed of the fadc_run calls that follow (their samplers: dropout's
// masks), so that a caller can seed each call: its high 32 bits are the
// counter-based generator's call counter (docs/IR.md, "Random numbers"), so
// (call << 32) | base gives call `call` of run seed `base` its own masks,
// the same for every derivative inside that call (vjp's forward and
// gradient, both halves of hvp).  Initializers that already ran keep their
// values.  On a GPU the seed is part of a CUDA graph's key: a new seed is a
// new state of the task's graph tree (recorded, then replayed when that
// seed comes again).  ctx NULL: FADC_ERR_ARG.
fadc_status fadc_context_set_seed(fadc_context *ctx, uint64_t seed);
// "" after no failure; ctx NULL: why the last fadc_context_create of this
// thread failed.
const char *fadc_context_error(const fadc_context *ctx);
// Waits until the context's queued work is done (a no-op on the CPU); a
// kernel's failure shows here or at the next read, and so does a bad index
// of a run queued on a device (FADC_ERR_INDEX, see fadc_run).
fadc_status fadc_context_synchronize(fadc_context *ctx);
// Device-side timing of the work queued between start and stop, as the
// GPU measures it (CUDA events on the context's stream): no host launch or
// synchronization cost, resolution about 0.5 us.  stop waits for the work
// and sets *seconds.  On a CPU context both are FADC_ERR_ARG (there is no
// device clock: time the calls on the host).
fadc_status fadc_context_timer_start(fadc_context *ctx);
fadc_status fadc_context_timer_stop(fadc_context *ctx, double *seconds);
// "cpu", or the GPU's name ("NVIDIA H200").
const char *fadc_context_device_name(const fadc_context *ctx);

// What a device context did (all zero on the CPU).  A task's first run is
// eager (the warm-up); later runs replay a CUDA graph, recorded the first
// time its task is called in that place of the graph tree (after the same
// sequence of earlier calls in this generation, with the same addresses:
// docs/CUDA.md).  A recording made where the tree already holds one for
// that task after the same calls (another state: the caller's outputs
// moved, earlier outputs released) is a re-record.  Runs without a graph
// (graphs disabled, a task past the re-record limit) are skipped.  The pool
// counts blocks in use: after every model is closed and every tensor
// released it is empty.
typedef struct fadc_device_stats {
	uint64_t graphs_recorded, graphs_replayed, graphs_rerecorded, graphs_skipped;
	uint64_t eager_runs; // first runs
	uint64_t pool_live_blocks, pool_live_bytes, pool_reserved_bytes;
	// Choices between candidates (fadc_task_info.cuda_choices) decided at a
	// task's first run: by timing each candidate on the GPU, or from the
	// cache of earlier processes' timings on this GPU for this artifact
	// (FADC_CACHE_DIR, docs/CUDA.md); forced by FADC_CUDA_CHOICE=0|1 counts
	// in neither.
	uint64_t choices_timed, choices_cached;
} fadc_device_stats;
fadc_status fadc_context_stats(const fadc_context *ctx, fadc_device_stats *s);
// The memory the context holds for its work, and its high-water mark since
// the context was made or since fadc_context_reset_peak_memory (which
// starts it again from what is held then, like PyTorch's
// torch.cuda.reset_peak_memory_stats).  On a device: the bytes of the
// pool's blocks in use (tensors, declarations, arenas, model-owned outputs,
// cuBLAS's workspace, staging, index checks; rounded up to 256 each), not
// the chunks the pool reserved from the driver (pool_reserved_bytes).  On
// the CPU: the host memory the runtime allocated for tensors of
// fadc_tensor_create, declarations, task arenas, model-owned outputs and
// index checks (not the memory of fadc_tensor_wrap, which is the caller's,
// nor descriptors and code).  Parameters, inputs and outputs count when the
// context holds them.
typedef struct fadc_memory_stats {
	uint64_t live_bytes, peak_bytes;
} fadc_memory_stats;
fadc_status fadc_context_memory(const fadc_context *ctx, fadc_memory_stats *s);
fadc_status fadc_context_reset_peak_memory(fadc_context *ctx);
// The context's graph tree as text into buf (len bytes, NUL-terminated;
// "" on the CPU or before any recording): one line per recording,
// "<task>: <n> replays", indented two spaces per level under the call it
// follows; siblings in recording order.  *need (may be NULL) gets the
// length of the whole text.  For tests and diagnostics.
fadc_status fadc_context_graph_tree(const fadc_context *ctx, char *buf, size_t len, size_t *need);

// The context's CPU thread pool.  Workers start at the first kernel a task
// splits (so a context whose tasks are all small never starts any); a
// split kernel calls the pool once (parallel_calls), which either wakes
// the workers (jobs) or, when the kernel's range makes one chunk, runs it
// on the calling thread (inline_calls).
typedef struct fadc_pool_stats {
	uint64_t threads; // the resolved num_threads
	uint64_t threads_started; // workers started (threads - 1 once any kernel split)
	uint64_t parallel_calls, jobs, inline_calls;
} fadc_pool_stats;
fadc_status fadc_context_pool_stats(const fadc_context *ctx, fadc_pool_stats *s);
int fadc_context_num_threads(const fadc_context *ctx); // the resolved num_threads; 0 for NULL

// ---------------------------------------------------------------- models

enum {
	FADC_OPEN_DESCRIBE = 1, // read and check the descriptor only: no code is loaded
};

// Reads and checks the artifact at path (trailer, checksum, versions, CPU
// features), then loads it (dlopen RTLD_NOW | RTLD_LOCAL) and checks that
// its code carries the same descriptor.  An artifact with code for several
// CPU levels (x86-64-v3 and x86-64-v4) runs the highest the CPU has every
// feature of; the environment variable FADC_CPU_LEVEL=x86-64-v3 forces one
// (FADC_ERR_CPU when the artifact lacks it or the CPU cannot run it).
fadc_status fadc_model_open(fadc_context *ctx, const char *path, unsigned flags, fadc_model **out);
void fadc_model_close(fadc_model *m); // NULL is a no-op; frees the model's tensors
const char *fadc_model_name(const fadc_model *m);
// Descriptor fields by key: "options", "triple", "cpu" (the CPU level whose
// code is loaded; the lowest when opened to describe), "features" (what
// that level's code needs), "cpu_levels" (every level, lowest first:
// "x86-64-v3,x86-64-v4"), "source_hash" (16 hex digits), "cuda_arch"
// ("sm_90", or "" without CUDA code); NULL for another key.
const char *fadc_model_info(const fadc_model *m, const char *key);

typedef enum fadc_role {
	FADC_ROLE_PARAM, // a differentiated parameter (bound or initialized once)
	FADC_ROLE_CONST, // a captured constant (bound or initialized once)
	FADC_ROLE_INPUT, // supplied by the caller at every run (forward's arguments, v, ...)
	FADC_ROLE_OUTPUT,
} fadc_role;

typedef struct fadc_tensor_desc {
	const char *name; // valid while the model is open
	fadc_role role;
	fadc_dtype dtype;
	int rank;
	int64_t dim[FADC_MAXDIM];
} fadc_tensor_desc;

typedef struct fadc_task_info {
	const char *name; // "vjp"; initializers are "init.<declaration>"
	int is_init;
	int ninputs; // every input, in order: params and consts, then the caller's
	int ncaller; // how many of them are FADC_ROLE_INPUT: what fadc_run takes
	int noutputs;
	uint64_t arena_bytes; // the task's memory plan (intermediates)
	uint64_t naive_bytes; // what the intermediates would take without reuse
	int nkernels;
	unsigned targets; // FADC_TARGET_* bits: the code the task has
	int cuda_launches; // kernel launches of its CUDA code (a small task's: 1, fused)
	// The specialisation the task was compiled for (fadc -D N=8,32, one
	// artifact holding the model at several sizes: docs/ARTIFACT.md): its
	// index (0 .. fadc_model_spec_count - 1; -1 for the initializer of a
	// declaration every specialisation shares) and its sizes, "N=8" or
	// "N=8,K=4" ("" in an artifact of one specialisation).
	int spec_index;
	const char *spec;
	// Choices between candidates for one result (a printed kernel or a
	// cuBLAS GEMM) that the runtime times on the GPU at the task's first
	// run, running the faster from then on (docs/CUDA.md, "Choices
	// measured on the GPU"); each counts as one of cuda_launches.
	int cuda_choices;
} fadc_task_info;

enum { FADC_TARGET_CPU = 1, FADC_TARGET_CUDA = 2 };

int fadc_model_task_count(const fadc_model *m);
// The first task named `name`: in an artifact of several specialisations,
// the first specialisation's (each specialisation has its own entry, the
// same name at another index).
fadc_status fadc_model_find_task(fadc_model *m, const char *name, int *task);
// The task named `name` whose caller inputs (FADC_ROLE_INPUT, in order)
// have the dtypes and shapes of inputs[0 .. ninputs): the specialisation
// for these tensors, the first in order where several fit (inputs that do
// not tell them apart: pick by fadc_task_info.spec instead).  inputs NULL:
// fadc_model_find_task.  None fits: FADC_ERR_SHAPE, the message listing
// each specialisation's input types.
fadc_status fadc_model_find_task_for(fadc_model *m, const char *name, fadc_tensor *const *inputs,
                                     int ninputs, int *task);
// The specialisations: 1 for an artifact compiled without -D lists (its
// name ""), else each one's sizes ("N=8,K=4"), in the order compiled.
int fadc_model_spec_count(const fadc_model *m);
const char *fadc_model_spec(const fadc_model *m, int i); // NULL out of range
fadc_status fadc_task_info_get(const fadc_model *m, int task, fadc_task_info *info);
fadc_status fadc_task_input(const fadc_model *m, int task, int i, fadc_tensor_desc *d);
fadc_status fadc_task_output(const fadc_model *m, int task, int i, fadc_tensor_desc *d);

// ---------------------------------------------------------------- parameters and constants

int fadc_model_decl_count(const fadc_model *m);
// Declaration i (params and consts, in declaration order); *has_init says
// whether the model can compute it from its seeded initializer.
fadc_status fadc_model_decl(const fadc_model *m, int i, fadc_tensor_desc *d, int *has_init);
// The specialisation declaration i belongs to, or -1: one declaration that
// every specialisation shares (the same type and initializer in each).  A
// declaration whose shape depends on a listed size is one declaration per
// specialisation, all of the same name.
int fadc_model_decl_spec(const fadc_model *m, int i);
// Copies value into declaration `name`: into every declaration of that
// name whose dtype and shape are value's (with specialisations, one name
// may have several shapes; FADC_ERR_SHAPE, listing them, when none fits).
// A bound value takes precedence over the initializer; initializers that
// read `name` see the bound value if fadc_model_init runs after the bind.
// Ends a binding by reference of those declarations.
fadc_status fadc_model_bind(fadc_model *m, const char *name, const fadc_tensor *value);
// Binds declaration `name` (every one of that name whose type fits, as
// fadc_model_bind) to the caller's tensor itself, not a copy: tasks read
// it in place, and in-place forms write it, so a new value written into it
// (fadc_tensor_write, or through fadc_tensor_data) is what the next run
// sees.  value: created by fadc_tensor_create or _wrap on the model's
// context (not a model-owned output).  Ownership: the caller keeps value
// alive, and does not release it, until it binds `name` again (by copy or
// reference) or closes the model.  On a device, a recorded CUDA graph
// holds the tensor's address: binding another tensor makes the next call
// record again (a re-record, docs/CUDA.md, "Parameters bound by
// reference"); binding the first one back replays its graph.  An
// initializer that reads `name` sees its value at fadc_model_init.
fadc_status fadc_model_bind_ref(fadc_model *m, const char *name, fadc_tensor *value);
// Binds every tensor of a .safetensors file whose name is a declaration's
// (others are ignored), or one .npy file to the declaration named like the
// file (weights/beta_value.npy binds beta_value).  *nbound (may be NULL)
// counts the bound declarations.
fadc_status fadc_model_bind_file(fadc_model *m, const char *path, int *nbound);
// Computes every declaration that is not bound from its initializer, in
// declaration order, with `seed` as run seed.  The first fadc_run does
// this with the context's seed if it was not done.
fadc_status fadc_model_init(fadc_model *m, uint64_t seed);
// A model-owned tensor holding declaration `name`'s current value (on a
// device context, the device copy); with specialisations, the first
// declaration of that name; bound by reference, the caller's tensor.
fadc_status fadc_model_get(fadc_model *m, const char *name, fadc_tensor **value);

// ---------------------------------------------------------------- tensors

// A zeroed tensor on the context's device, owned by the caller.
fadc_status fadc_tensor_create(fadc_context *ctx, fadc_dtype dt, int rank, const int64_t *dim,
                               fadc_tensor **out);
// A tensor over host memory that the caller keeps owning (CPU contexts).
fadc_status fadc_tensor_wrap(fadc_context *ctx, fadc_dtype dt, int rank, const int64_t *dim,
                             void *data, fadc_tensor **out);
// Frees a tensor made by create or wrap (not wrapped memory); NULL and
// declarations are ignored.  A model-owned output (from fadc_run) is not
// freed: it is marked dead, so that on a device a later call may place its
// outputs in its memory (reading it after that is
// FADC_ERR_OUTPUT_OVERWRITTEN); its task's next run makes it live again.
void fadc_tensor_release(fadc_tensor *t);
fadc_dtype fadc_tensor_dtype(const fadc_tensor *t);
int fadc_tensor_rank(const fadc_tensor *t);
const int64_t *fadc_tensor_dims(const fadc_tensor *t);
int64_t fadc_tensor_numel(const fadc_tensor *t);
size_t fadc_tensor_bytes(const fadc_tensor *t);
fadc_device fadc_tensor_device(const fadc_tensor *t);
// Incremented each time the runtime writes the tensor (a run's output), and
// when a later call on the device overwrites a model-owned output's memory.
uint64_t fadc_tensor_generation(const fadc_tensor *t);
void *fadc_tensor_data(fadc_tensor *t); // host memory; NULL on a device
// Copies between the tensor and host memory of exactly fadc_tensor_bytes.
// On a device, read waits for the context's queued work, and reports a bad
// index of a queued run (FADC_ERR_INDEX, see fadc_run; the bytes are copied
// all the same).
fadc_status fadc_tensor_read(const fadc_tensor *t, void *dst, size_t bytes);
fadc_status fadc_tensor_write(fadc_tensor *t, const void *src, size_t bytes);

// ---------------------------------------------------------------- running

// Runs task with the caller's inputs (the FADC_ROLE_INPUT ones, in order,
// ninputs = fadc_task_info.ncaller).  outputs[i] set: written there (its
// dtype and shape must match, and it must not overlap an input); NULL: set
// to a model-owned tensor that the next run of the same task overwrites
// (its generation increases).  After the first call of a task, a run
// allocates nothing.  Outputs that write back an input (in-place forms)
// are also copied into that input.
//
// On a device, model-owned outputs live in one region per model, placed
// as a stack: a run's outputs go above the model-owned outputs of the
// calls before it in this generation that are still live (not released)
// and above those it takes as inputs.  Calling a task that already ran in
// this generation starts a new one, whose outputs may reuse the memory of
// the old generation's: a model-owned output stays valid until a later
// call reuses its memory, and reading it after that (fadc_tensor_read,
// _write, or as an input of fadc_run) is FADC_ERR_OUTPUT_OVERWRITTEN naming
// the task that overwrote it, never stale data.  Copy it out, or pass
// outputs of your own, to keep a value longer.  (On the CPU, model-owned
// outputs are never overwritten by another task.)
//
// Indices that are data (class labels for take_along, token ids for take,
// one_hot's classes, their scatters in the derivatives) are checked against
// their axis: an index out of range is FADC_ERR_INDEX, naming the op, the
// index tensor and the value, and the run's outputs (and write-backs) are
// unspecified.  The check is two reductions per index tensor, and only
// tasks whose indices are not provably in range have one.  On the CPU,
// fadc_run returns it.  On a device, where fadc_run returns before the
// work is done, it surfaces at the next synchronizing call:
// fadc_context_synchronize, fadc_tensor_read (of any tensor of the
// context), or the next fadc_run of the same task, which then waits for
// the previous run and returns its error without starting.  Each bad run
// is reported once; the calls after that succeed again.
fadc_status fadc_run(fadc_model *m, int task, fadc_tensor *const *inputs, int ninputs,
                     fadc_tensor **outputs, int noutputs);

// ---------------------------------------------------------------- interoperation
//
// (Appended to API version 1: fadc.h is an installed ABI, so these come
// after everything above.)  What a binding for another library needs to
// hand fadc the caller's own device memory without a copy (PyTorch, CuPy
// and JAX tensors through DLPack, python/fadc: docs/PYTHON.md) and to order
// fadc's work against the caller's CUDA streams.

// A tensor over memory that the caller keeps owning, addressed as the
// context's device addresses it: on a CUDA context, a device address
// (CUdeviceptr) of the context's GPU (memory of its primary context, or
// memory it can reach: managed, peer-mapped); on the CPU, a host address,
// as fadc_tensor_wrap.  Dense and row-major, fadc_tensor_bytes long.
// fadc_tensor_release frees only the handle.  As an input of fadc_run, a
// caller's tensor whose address changes from call to call is staged
// (docs/CUDA.md); as an output, it is written in place.  addr 0 with a
// nonzero size: FADC_ERR_ARG.
fadc_status fadc_tensor_wrap_device(fadc_context *ctx, fadc_dtype dt, int rank,
                                    const int64_t *dim, uint64_t addr, fadc_tensor **out);
// Where the tensor's bytes are, as its device addresses them (the device
// address on a GPU, the host address on the CPU; 0 for zero bytes) into
// *addr.  A model-owned output that a later call overwrote:
// FADC_ERR_OUTPUT_OVERWRITTEN (as fadc_tensor_read).
fadc_status fadc_tensor_address(const fadc_tensor *t, uint64_t *addr);
// The context's CUDA stream (a CUstream), on which it queues all its work,
// into *stream; NULL on a CPU context.
fadc_status fadc_context_stream(const fadc_context *ctx, void **stream);
// Work the context queues after this call waits for the work queued on
// `stream` (a CUstream of the context's GPU; NULL, or the driver's
// CU_STREAM_LEGACY (0x1) and CU_STREAM_PER_THREAD (0x2) handles, as DLPack
// numbers them) before it: an event recorded on `stream`, waited for on
// the context's stream, nothing waits on the host.  A no-op on the CPU.
fadc_status fadc_context_wait_stream(fadc_context *ctx, void *stream);
// The other way: work queued on `stream` after this call waits for the
// work the context queued before it (its runs' outputs are complete for
// the caller's kernels on `stream`).  A no-op on the CPU.
fadc_status fadc_context_signal_stream(fadc_context *ctx, void *stream);

#ifdef __cplusplus
}
#endif

#endif
