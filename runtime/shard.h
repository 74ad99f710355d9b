// runtime/shard.h -- a batched task run as K shards, one per context, and
// its whole outputs assembled on one context (runtime/shard.c).
//
// `fadc MODEL.ir -o MODEL.so --shards K` compiles each batched task T
// (jacobian and jacrev of a non-scalar forward, jacfwd, hessian,
// hessian_fwdrev, hessian_revrev) also as K tasks `T:k/K`, each the same
// derivative over an even, contiguous range of T's basis vectors, whose
// outputs are slices of T's; the artifact records where each slice goes
// (format 12, ArtShard: docs/ARTIFACT.md, docs/TASKS.md "Shards").  This
// module runs shard k on model k (one model per context: per GPU) and
// writes every slice into T's whole outputs on a destination context.
//
// It uses nothing but fadc.h and the artifact's descriptor (read again
// from the file with art_read, plain reads), so that any owner of K
// single-device contexts (the multi-GPU context of docs/MULTIGPU.md, a
// test on K CPU contexts) can call it.
//
// How the slices reach the destination, output by output and shard by
// shard:
// - written in place (no copy): the task writes its slice straight into
//   the destination output through a view (fadc_tensor_wrap /
//   fadc_tensor_wrap_device at the slice's address) when the slice is one
//   contiguous run of the whole output (every Hessian block, jacrev's
//   blocks; jacfwd's of a scalar forward) and the shard's context can
//   address the destination's memory: the shard runs on the destination
//   context itself, or both are CPU contexts (host memory), or, with
//   RtShardOptions.peer_direct, the shard's GPU may write the destination
//   GPU's memory (peer access enabled from the shard's context to the
//   destination's: cuCtxEnablePeerAccess, which the caller does; memory of
//   the pool is cuMemAlloc'ed, which peer access covers), its kernels then
//   writing across NVLink;
// - otherwise through the host: the shard runs into its model-owned
//   outputs, fadc_tensor_read copies them to a host buffer, and each
//   contiguous run is copied into the destination by fadc_tensor_write
//   into a view of it (the same calls on CPU and device contexts).  jacfwd of a non-scalar forward (its slices are columns)
//   always takes this path.
// - copied by the shard's GPU (RtShardOptions.peer_copy; what the multi
//   context uses): a GPU shard on another context than the destination's
//   runs into its model-owned outputs in its own memory, and each slice is
//   copied into the destination by cuMemcpyAsync on a second stream of the
//   shard's GPU, ordered after that shard's run by an event
//   (fadc_context_signal_stream).  The copy engine then moves shard k's
//   slices across NVLink while the GPU's kernels compute the context's
//   next shard: with c shards per GPU only the last one's copy (1/c of
//   the GPU's part) is exposed, where a kernel writing across NVLink
//   itself runs at the link's speed rather than HBM's (peer_direct: the
//   whole part exposed; docs/PERFORMANCE.md "Overlapped peer copies").
//   The driver's calls are found in the libcuda.so.1 the runtime loaded
//   (dlopen RTLD_NOLOAD); with peer access enabled the copies go GPU to
//   GPU, without it the driver stages them.
// Several shards may share one context (K = c S shards over S GPUs): each
// context runs its shards in order on its stream; the shards are queued
// round by round (the first of each context, then the second ...), so
// that every GPU starts at once.
//
// Ordering: rt_shard_run queues every shard's run (round by round, above)
// from the calling thread (fadc_run returns once a GPU's work is queued,
// so the GPUs work at once; CPU contexts run in turn), then makes the
// copies, then waits for every shard context other than the destination
// (fadc_context_synchronize) and for the copy streams, so that on return
// the outputs hold every slice, except what the destination's own context
// queued, which is
// ordered on its stream like any fadc_run.  Contexts are used from the
// calling thread only (fadc.h: one thread at a time per context).
#ifndef FADC_RUNTIME_SHARD_H
#define FADC_RUNTIME_SHARD_H

#include <stddef.h>

#include "fadc.h"

typedef struct RtShardPlan RtShardPlan;

typedef struct RtShardOptions {
	// The shards' GPUs may write the destination GPU's memory (peer
	// access enabled by the caller from each shard's context to the
	// destination's): contiguous slices are written there by the shard's
	// kernels, no copy.  0: through the host (above).
	int peer_direct;
	// The specialisation whose shard tasks run (fadc_task_info.spec_index;
	// 0 in an artifact of one).
	int spec;
	// Every slice through the host, none in place (tests of that path on
	// CPU contexts; measurements).
	int staged;
	// GPU shards on other contexts than the destination's (a GPU) run into
	// their own memory and their GPU copies each slice across (above);
	// takes precedence over peer_direct for them.  Ignored on CPU contexts.
	int peer_copy;
} RtShardOptions;

// Prepares task `task` ("hessian") of the artifact at `path` as its n
// shards "task:0/n" .. "task:n-1/n": models[k] was opened (fadc_model_open,
// not FADC_OPEN_DESCRIBE) from that artifact on context ctxs[k] (one per
// GPU; several may be one context), and runs shard k; the whole outputs go
// to context dest (ctxs[0] for the caller's device, or any other).  The
// models keep their parameters and constants bound as the caller binds
// them (the same values in each: every shard reads all of them).  o may be
// NULL (no peer writes, specialisation 0).  Checks, each a message in err
// and a status: n from 1 to 64 and no NULL handle (FADC_ERR_ARG); the
// artifact read and valid (its art_read status: FADC_ERR_IO,
// FADC_ERR_FORMAT, FADC_ERR_VERSION); every shard task there, compiled with
// --shards n (FADC_ERR_NOT_FOUND, naming it and the shard counts the
// artifact has); each model opened from that artifact (its source hash,
// task count and the shard task's outputs: else FADC_ERR_ARG); the shards
// tiling each whole output exactly (else FADC_ERR_FORMAT).
fadc_status rt_shard_plan_create(const char *path, const char *task, fadc_context *const *ctxs,
                                 fadc_model *const *models, int n, fadc_context *dest,
                                 const RtShardOptions *o, RtShardPlan **out, char *err,
                                 size_t errlen);
// Frees the plan and the outputs it owns (not the models or contexts).
void rt_shard_plan_free(RtShardPlan *p);
// The whole task's outputs, in its order (that of task T compiled whole):
// their count, and output i's name, dtype and shape (role
// FADC_ROLE_OUTPUT).  The name is valid while the plan lives.
int rt_shard_plan_noutputs(const RtShardPlan *p);
fadc_status rt_shard_plan_output(const RtShardPlan *p, int i, fadc_tensor_desc *d);
// The caller inputs every shard task takes (forward's arguments: 0 for a
// model without): fadc_task_info.ncaller of them, the same in each shard.
int rt_shard_plan_ncaller(const RtShardPlan *p);
// How the last run moved the slices: bytes written in place by the shards'
// tasks, bytes copied through the host.
void rt_shard_plan_traffic(const RtShardPlan *p, size_t *direct, size_t *staged);
// Bytes the last run's shards' GPUs copied into the destination (peer_copy).
size_t rt_shard_plan_engine_bytes(const RtShardPlan *p);

// Runs every shard and assembles the whole outputs on dest.  inputs[k]
// (ncaller tensors on ctxs[k], in the task's order; inputs may be NULL when
// ncaller is 0) are shard k's caller inputs.  outputs[i] set: a tensor of
// the caller's on dest with output i's dtype and shape (dense, not
// overlapping another), written in place; NULL: set to a tensor the plan
// owns on dest, overwritten by the next run and freed with the plan.
// noutputs must be rt_shard_plan_noutputs.  Errors: bad arguments
// (FADC_ERR_ARG), an output of the wrong dtype or shape (FADC_ERR_SHAPE)
// or on another device (FADC_ERR_DEVICE); a shard that fails returns its
// status, the message naming the shard and holding its context's
// (fadc_context_error); the outputs are then unspecified.
fadc_status rt_shard_run(RtShardPlan *p, fadc_tensor *const *const *inputs, fadc_tensor **outputs,
                         int noutputs);
// The message of the plan's last failure ("" after none).
const char *rt_shard_error(const RtShardPlan *p);

#endif
