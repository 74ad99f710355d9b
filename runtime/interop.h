// runtime/interop.h -- ordering a context's CUDA stream against a caller's
// (runtime/interop.c), for fadc_context_wait_stream / _signal_stream: what
// bindings over DLPack need (python/fadc, docs/PYTHON.md).  Like rtcuda.h it
// needs no CUDA header: streams are opaque pointers (CUstream).
#ifndef FADC_INTEROP_H
#define FADC_INTEROP_H

#include <stddef.h>

#include "rtcuda.h"

// The context's stream.
void *rtcu_stream(const RtCuda *c);
// wait = 1: the context's stream waits for the work queued on `stream`
// before this call; wait = 0: `stream` waits for the context's.  An event
// (the context's own, reused) recorded on one, waited for on the other
// (cuStreamWaitEvent); nothing blocks the host; nothing at all when
// `stream` is the context's.  0 with a message in err.
int rtcu_order_stream(RtCuda *c, void *stream, int wait, char *err, size_t errlen);

#endif
