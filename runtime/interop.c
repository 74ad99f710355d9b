// runtime/interop.c -- a context's CUDA stream against a caller's: the
// ordering that DLPack asks of a consumer and a producer (python/fadc hands
// fadc PyTorch or CuPy tensors queued on their own streams, and hands them
// fadc's outputs).
//
// fadc queues all of a context's work on its own non-blocking stream
// (runtime/cuda.c), so neither the legacy default stream nor the caller's
// streams order against it implicitly.  Ordering A before B is one event:
// cuEventRecord(e, A) then cuStreamWaitEvent(B, e), which makes the work
// queued on B afterwards wait on the device for what A had queued; the
// host never waits.
//
// One event per context serves every call (c->order_ev, made at the first
// one): a cuStreamWaitEvent waits for the record that preceded it, and a
// later cuEventRecord of the same event does not change what an earlier,
// already queued wait waits for (the driver's documented semantics), so
// re-recording it at the next call is safe; a context is used by one thread
// at a time (fadc.h), so no two orderings interleave.  That saves the
// create and destroy per call (measured on the H200: docs/PERFORMANCE.md).
// Ordering the context's stream against itself is a no-op: stream order
// already holds.
#include <stdio.h>
#include <string.h>

#include "cuda_impl.h"
#include "interop.h"

void *
rtcu_stream(const RtCuda *c)
{
	return c ? (void *)c->stream : NULL;
}

int
rtcu_order_stream(RtCuda *c, void *stream, int wait, char *err, size_t errlen)
{
	CUstream other = (CUstream)stream;
	if (other == c->stream)
		return 1;
	CUstream from = wait ? other : c->stream, to = wait ? c->stream : other;
	CHECK_CU(c, cuCtxSetCurrent(c->ctx));
	if (!c->order_ev)
		CHECK_CU(c, cuEventCreate(&c->order_ev, CU_EVENT_DISABLE_TIMING));
	CHECK_CU(c, cuEventRecord(c->order_ev, from));
	CHECK_CU(c, cuStreamWaitEvent(to, c->order_ev, 0));
	return 1;
}
