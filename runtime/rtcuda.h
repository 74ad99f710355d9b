// runtime/rtcuda.h -- the CUDA side of the runtime (runtime/cuda.c), as
// runtime/rt.c uses it.  Nothing here needs a CUDA header or library: the
// driver is loaded with dlopen("libcuda.so.1") when a CUDA context is
// created, so the runtime links and runs CPU-only where there is no driver.
//
// Device addresses are uint64_t (CUdeviceptr).  Every function that can
// fail returns 0 and writes one message to err: the CUDA call's text, the
// function, file:line and cuGetErrorName/cuGetErrorString (CHECK_CU).
#ifndef FADC_RTCUDA_H
#define FADC_RTCUDA_H

#include <stddef.h>
#include <stdint.h>

#include "artifact.h"

typedef struct RtCuda RtCuda; // one per context: device, primary context, stream, pool
typedef struct RtCuTask RtCuTask; // one per task: module, kernels, its CUDA graph

// Opens device `index`: loads the driver, cuInit, retains the primary
// context, creates the context's stream.  0 with a message where there is
// no driver or no such device.
int rtcu_open(int index, RtCuda **out, char *err, size_t errlen);
// Synchronizes, frees the pool's memory and releases the primary context.
void rtcu_close(RtCuda *c);
const char *rtcu_device_name(const RtCuda *c);

// The pool: every device allocation of the context (task arenas, the
// declarations, outputs, runtime-owned tensors) is a block of it.  bytes
// 0 gives address 0.  Blocks are 256-byte aligned.
int rtcu_alloc(RtCuda *c, size_t bytes, uint64_t *addr, char *err, size_t errlen);
void rtcu_free(RtCuda *c, uint64_t addr);

// Copies and fills on the context's stream.  htod and dtoh wait for the
// stream (the host memory may be reused on return); dtod and zero do not.
int rtcu_htod(RtCuda *c, uint64_t dst, const void *src, size_t n, char *err, size_t errlen);
int rtcu_dtoh(RtCuda *c, void *dst, uint64_t src, size_t n, char *err, size_t errlen);
int rtcu_dtod(RtCuda *c, uint64_t dst, uint64_t src, size_t n, char *err, size_t errlen);
int rtcu_zero(RtCuda *c, uint64_t dst, size_t n, char *err, size_t errlen);
int rtcu_sync(RtCuda *c, char *err, size_t errlen);
// Makes the context's CUDA context current on the calling thread (a
// thread driving several GPUs, runtime/multi.c).
int rtcu_make_current(RtCuda *c, char *err, size_t errlen);
// Whether the stream's work is done: 1, 0 while it runs, -1 on an error
// (a message in err).  Never blocks.
int rtcu_stream_done(RtCuda *c, char *err, size_t errlen);
// Device-side timing (events on the stream): stop = 0 starts, 1 stops and
// sets *seconds to the time between, as the device measured it.
int rtcu_timer(RtCuda *c, int stop, double *seconds, char *err, size_t errlen);
// A capture of the stream's work outside the graph tree (runtime/multi.c:
// the all-reduce of the gradients): begin, then end (keep: the CUgraph
// returned, NULL with a message on failure; else discarded), instantiate
// (the graph consumed; the executable graph, or NULL and a message: only
// once no stream of the thread is capturing), launch on the stream, free
// (runtime/cugraph.c).
int rtcu_capture_begin(RtCuda *c, char *err, size_t errlen);
void *rtcu_capture_end(RtCuda *c, int keep, char *err, size_t errlen);
void *rtcu_graph_instantiate(RtCuda *c, void *graph, char *err, size_t errlen);
int rtcu_graph_launch(RtCuda *c, void *exec, char *err, size_t errlen);
void rtcu_graph_free(RtCuda *c, void *exec);

// Loads task t's module (the cubin, else its PTX) from the artifact's image
// section, finds its kernels and takes its staging buffers (one per caller
// input, a pool block) from the pool.  index (t's place in the descriptor)
// and artifact (the descriptor's FNV-1a 64) key its choices' cache.
int rtcu_task_load(RtCuda *c, const ArtTask *t, uint32_t index, uint64_t artifact,
                   const uint8_t *images, RtCuTask **out, char *err, size_t errlen);
// Frees the task, its staging block and every recording of it in the graph
// tree (with their subtrees).
void rtcu_task_free(RtCuda *c, RtCuTask *k);
// Starts a call of task k in the graph tree and returns its generation: a
// task called again in the current generation starts the next one (the
// path goes back to the root; outputs of the old generation may be
// overwritten, runtime/rt.c places them).  Call once before each run.
uint64_t rtcu_task_begin(RtCuda *c, RtCuTask *k);
// Runs the task on the stream (asynchronously) with these device addresses:
// in[i] for input i, out[i] for output i, the arena.  staged[i] (for
// every input) marks the caller's own tensors: read in place, or, once
// they have moved twice at this place of the tree, from the task's staging
// copy of them (copied before each replay); the rest (declarations,
// outputs of earlier calls) is used in place.  Eager on the task's first
// call; then the child of the tree's current node for this task and these
// addresses is replayed, or recorded (a re-record when another state of
// the task is there already); past the re-record limit, eager with one
// warning.
int rtcu_task_run(RtCuda *c, RtCuTask *k, const uint64_t *in, const uint8_t *staged,
                  const uint64_t *out, uint64_t arena, uint64_t runseed, char *err,
                  size_t errlen);
// Index checks (ArtTask.ncheck > 0): the device block of the task's check
// outputs (check j's (min, max) at 16 j; the runtime passes these as the
// outputs' addresses), and, once the run that wrote them is complete
// (rtcu_task_check_wait waits for the event recorded after the task's last
// run; after rtcu_sync it returns at once), their copy in pinned host
// memory.  The task's launches end with that copy, so a replayed graph
// copies too; nothing else is synchronized.
uint64_t rtcu_task_check_dev(const RtCuTask *k);
const int64_t *rtcu_task_check_wait(RtCuda *c, RtCuTask *k, char *err, size_t errlen);
// The tree as text, one line per recording, indented two spaces per level
// under its parent: "<task>: <n> replays".  Returns the length it needs
// (as snprintf); buf gets what fits, NUL-terminated when len > 0.
size_t rtcu_graph_tree(const RtCuda *c, char *buf, size_t len);

typedef struct RtCuStats {
	uint64_t recorded, replayed, rerecorded, skipped, eager;
	uint64_t live_blocks, live_bytes, reserved_bytes, peak_bytes;
	uint64_t choices_timed, choices_cached;
} RtCuStats;
void rtcu_stats(const RtCuda *c, RtCuStats *s);
void rtcu_reset_peak(RtCuda *c); // the pool's high-water mark starts again from what is live

#endif
