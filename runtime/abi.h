// runtime/abi.h -- the binary interface between a compiled model.so and the
// runtime: what codegen/llvm.c emits and runtime/rt.c calls.
//
// A model.so exports one symbol of fadc's, the entry function
// FADC_ENTRY_SYMBOL, whose name carries the ABI version: a runtime that
// does not know an ABI finds no symbol it understands and says so.  An
// artifact with code for several CPU levels (format 11) exports one more
// per higher level, FADC_ENTRY_SYMBOL "." CPU ("fadc_artifact_v1.x86-64-v4"),
// the same function over that level's task functions (art_level_symbol).  The
// entry returns a constant table: the ABI version again, the descriptor
// bytes (the same bytes as the file's trailer, docs/ARTIFACT.md, compared
// by the runtime after dlopen), and one function per task in descriptor
// order.  A task function reads its inputs, writes its outputs and uses its
// arena (64-byte aligned, arena_bytes of the descriptor) and nothing else:
// no allocation, no global state, no I/O; it returns 0.
//
// Threads: call->exec is NULL (run everything on the calling thread) or a
// fadc_exec_v1 whose parallel_for runs chunk(args, lo, hi) over [0, n) in
// pieces on the runtime's threads and returns when all are done.  A task
// function calls it for its large kernels only (docs/CODEGEN.md, "Parallel
// kernels"); every iteration of the range is independent and computed by
// the same code whatever the chunking, so results do not depend on the
// number of threads.  This field was reserved for this in ABI 1 and NULL
// keeps its meaning, so the ABI version did not change: an artifact that
// splits runs serially under a runtime that passes NULL, and an older
// artifact never looks at the field.
//
// Layouts are fixed by this header and mirrored by hand in codegen/llvm.c
// (struct types built with the LLVM C API); test_runtime_artifact.c checks
// the offsets.  Fields are only ever appended, under a new ABI version.
#ifndef FADC_ABI_H
#define FADC_ABI_H

#include <stdint.h>

#define FADC_ABI_VERSION 1
#define FADC_ENTRY_SYMBOL "fadc_artifact_v1"

typedef struct fadc_call_v1 {
	void *const *in; // the task's inputs, in descriptor order
	void *const *out; // its outputs, in descriptor order (never overlapping the inputs)
	void *arena; // the task's arena: arena_bytes, 64-byte aligned
	uint64_t runseed; // the run's seed (samplers)
	const void *exec; // a fadc_exec_v1, or NULL: everything on the calling thread
} fadc_call_v1;

// One chunk of a split kernel: iterations [lo, hi) of its range.
typedef void (*fadc_chunk_fn_v1)(void *args, int64_t lo, int64_t hi);

typedef struct fadc_exec_v1 {
	// Runs fn(args, lo, hi) over [0, n) in chunks of at least grain
	// iterations (any partition: fn must not care), then returns.
	void (*parallel_for)(const struct fadc_exec_v1 *x, fadc_chunk_fn_v1 fn, void *args, int64_t n,
	                     int64_t grain);
	void *pool; // the runtime's
} fadc_exec_v1;

typedef int32_t (*fadc_task_fn_v1)(const fadc_call_v1 *call);

typedef struct fadc_abi_v1 {
	uint32_t abi_version; // FADC_ABI_VERSION
	uint32_t ntask;
	const uint8_t *desc; // the descriptor, desc_len bytes
	uint64_t desc_len;
	const fadc_task_fn_v1 *task; // ntask functions, descriptor order
} fadc_abi_v1;

typedef const fadc_abi_v1 *(*fadc_entry_fn_v1)(void);

#endif
