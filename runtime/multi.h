// runtime/multi.h -- a context over several GPUs (runtime/multi.c), and the
// few hooks of runtime/rt.c it needs.  Private to the runtime.
//
// A context made with device {FADC_DEVICE_CUDA_LIST, 0} and S > 1 devices
// (or one, with FADC_MULTI_FORCE=1: the NCCL path with one rank, the case
// one GPU can test) is the ordinary CUDA context of devices[0], "sub-context
// 0", which carries an RtMulti: sub-contexts 1 .. S-1 (ordinary CUDA
// contexts of the other GPUs, each with its own stream, pool and graph
// tree) and one NCCL communicator per GPU.  Tensors made on it live on
// GPU devices[0]: the caller's device.  A model opened on it is sub-model 0
// (an ordinary model on GPU devices[0]) carrying an RtMultiModel: the same
// artifact opened on every other sub-context.  fadc_run on it is a
// data-parallel run (docs/MULTIGPU.md); every other call (describing,
// binding, fadc_model_get) is sub-model 0's, and the declarations the
// shards need reach the other sub-models at the next run.
//
// Dispatching work on the GPUs (sharded batched tasks, issue 27's second
// half) goes through rt_multi_ndev / rt_multi_sub / rt_multi_submodel: each
// sub-context and sub-model is an ordinary one, used through fadc.h, after
// rt_multi_current(ctx, s) made its GPU current on the calling thread (the
// runtime's CUDA calls act on the current CUDA context; call
// rt_multi_current(ctx, 0) before handing control back to the caller).
#ifndef FADC_RT_MULTI_H
#define FADC_RT_MULTI_H

#include <stddef.h>
#include <stdint.h>

#include "artifact.h"
#include "fadc.h"
#include "nccl.h"

typedef struct RtMulti RtMulti;
typedef struct RtMultiModel RtMultiModel;

// ---------------------------------------------------------------- the internal API

// The GPUs of ctx: S for a context over several (or a forced one), 0 for
// any other context (NULL included).
int rt_multi_ndev(const fadc_context *ctx);
// Sub-context s (0 .. S-1) of a multi context: 0 is ctx itself; NULL out of
// range or for another context.
fadc_context *rt_multi_sub(const fadc_context *ctx, int s);
// Sub-model s of a model opened on a multi context: 0 is m itself, whose
// fadc_run is the data-parallel run: run one task on GPU 0 alone with
// rt_run_plain (below); the others' fadc_run is an ordinary run.
fadc_model *rt_multi_submodel(const fadc_model *m, int s);
// Makes sub-context s's GPU current on the calling thread; 0 with a
// message in ctx's error on failure.
int rt_multi_current(fadc_context *ctx, int s);
// The NCCL of the context and rank s's communicator (NULL when not multi).
const RtNccl *rt_multi_nccl(const fadc_context *ctx);
ncclComm_t rt_multi_comm(const fadc_context *ctx, int s);
// Hands every declaration of sub-model 0 whose value changed since (bind,
// bind_file, init, a write of fadc_model_get's tensor) to the other
// sub-models, whole (initializing sub-model 0 first if it was not): what a
// task dispatched on the sub-models directly needs before it runs.  The
// data-parallel run hands over only what its shard tasks read, batched
// declarations as their rows.
fadc_status rt_multi_decls(fadc_model *m);
// Waits for the work queued on every sub-context, polling NCCL's
// asynchronous errors against the deadline (FADC_NCCL_TIMEOUT_S): on expiry
// or an NCCL error every communicator is aborted and the context can run no
// more collectives (FADC_ERR_DEVICE, the message saying which GPU).
fadc_status rt_multi_wait(fadc_context *ctx);

// ---------------------------------------------------------------- the sharding arithmetic
//
// Pure functions, tested without a GPU (tests/unit/test_runtime_multi.c).

// Shard s of n rows over S GPUs: the first n % S shards get one row more
// (sizes differ by at most one, so an artifact needs at most two shard
// specialisations); rows [*off, *off + *rows).
void rt_multi_shard(int64_t n, int S, int s, int64_t *off, int64_t *rows);
// The weight of shard s's results in the combination: `loss mean`
// (BATCH_LOSS_MEAN of ir.h, 1 here) n_s / n; `loss sum` (2) 1.  For a sum,
// the batch-independent part L_0 (the forward on no rows) would be counted
// S times: *w_empty gets -(S - 1), its weight (docs/MULTIGPU.md).
double rt_multi_weight(int loss, int64_t n, int64_t rows, int S, double *w_empty);
// Copies rows [off, off + rows) of axis `axis` of a row-major tensor of
// rank `rank` and dims `dim` (elements of `esize` bytes) from src into dst
// (dense, that axis `rows` long), or back (gather != 0: dst is the full
// tensor, src the shard), multiplying f32/f64 elements by `scale` when
// dtype says so (dtype FADC_F32 or FADC_F64 and scale != 1).
void rt_multi_rows(void *dst, const void *src, int rank, const int64_t *dim, int axis, int64_t off,
                   int64_t rows, size_t esize, int gather, fadc_dtype dtype, double scale);
// The batch declaration an artifact records in its options line
// (" batch=tokens:1,targets:1 loss=mean", codegen/compile.c): 1 and the
// names (pointers into names_buf) and axes, or 0 when it has none; -1 for
// a malformed one.
typedef struct RtBatch {
	int n; // inputs named
	const char *name[32];
	int axis[32];
	int loss; // 1 mean, 2 sum
	char buf[1024];
} RtBatch;
int rt_multi_batch_parse(const char *options, RtBatch *b);

// The shape of a data-parallel run of task t of d over S GPUs: the batch
// size n (from the inputs the batch names), each shard's rows, weight and
// task (the artifact's task of t's name at that shard's size: every input
// the same as t's but on its batch axis, n_s long); in_axis[k] (t's nin)
// each input's batch axis (declared, or where a shard task's input is
// shorter: the v.<p> of a batched param), -1 for one given whole to every
// GPU; out_axis[k] (t's user outputs) -1 for a reduced output (the same
// shape in every shard: all-reduced, weighted), else the axis gathered.
// FADC_OK, or a status and a message in err: no batched input, fewer rows
// than GPUs, `loss sum` over several GPUs, no specialisation at a shard's
// size (naming the -D to compile with), an output neither reduced nor
// split.  Pure: tested on descriptors without a GPU.
typedef struct RtShape {
	int64_t n;
	int S;
	int task[FADC_MAX_DEVICES];
	int64_t off[FADC_MAX_DEVICES], rows[FADC_MAX_DEVICES];
	double w[FADC_MAX_DEVICES];
} RtShape;
fadc_status rt_multi_plan(const ArtDesc *d, int t, const RtBatch *b, int S, RtShape *ps,
                          int *in_axis, int *out_axis, char *err, size_t errlen);

// ---------------------------------------------------------------- hooks rt.c calls

// After the context of devices[0] is made (c): opens the others, loads NCCL
// and makes the communicators.  create_err gets the message on failure.
fadc_status rt_multi_open(fadc_context *c, const fadc_device *devices, int ndevices, char *err,
                          size_t errlen);
void rt_multi_close(fadc_context *c);
// After fadc_model_open of m on a multi context: opens path on the others.
fadc_status rt_multi_model_open(fadc_model *m, const char *path, unsigned flags);
void rt_multi_model_close(fadc_model *m);
// fadc_run of a model on a multi context.
fadc_status rt_multi_run(fadc_model *m, int task, fadc_tensor *const *inputs, int ninputs,
                         fadc_tensor **outputs, int noutputs);
fadc_status rt_multi_sync(fadc_context *ctx); // fadc_context_synchronize's part

// ---------------------------------------------------------------- what rt.c gives multi.c

RtMulti *rt_ctx_multi(const fadc_context *ctx);
void rt_ctx_set_multi(fadc_context *ctx, RtMulti *mu);
RtMultiModel *rt_model_multi(const fadc_model *m);
void rt_model_set_multi(fadc_model *m, RtMultiModel *mm);
struct RtCuda *rt_ctx_cuda(const fadc_context *ctx);
fadc_context *rt_model_ctx(const fadc_model *m);
const ArtDesc *rt_model_desc(const fadc_model *m);
// Declaration i's current value (the caller's tensor when bound by
// reference) and whether the model ran its initializers.
fadc_tensor *rt_model_decl_value(fadc_model *m, int i);
int rt_model_initialized(const fadc_model *m);
uint64_t rt_ctx_seed(const fadc_context *ctx); // the run seed (fadc_context_set_seed)
int rt_model_has_ref(const fadc_model *m); // some declaration is bound by reference
// Binds declaration i (that one, not every one of its name) to a copy of
// data (its bytes, of its type), as fadc_model_bind does.
fadc_status rt_model_bind_index(fadc_model *m, int i, const void *data);
// fadc_run without the data-parallel dispatch (sub-model 0's own run).
fadc_status rt_run_plain(fadc_model *m, int task, fadc_tensor *const *inputs, int ninputs,
                         fadc_tensor **outputs, int noutputs);
// Sets ctx's error message (as rt.c's fail) and returns s.
fadc_status rt_fail(fadc_context *ctx, fadc_status s, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

#endif
