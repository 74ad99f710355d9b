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
// host never waits.  The event may be destroyed right after the wait is
// queued (the driver keeps it until the wait is resolved), so each call
// makes its own: a few microseconds, and no state shared between calls.
//
// cuStreamWaitEvent is not among the driver entry points runtime/cuda.c
// loads (CU_FUNCS in cuda_impl.h); it is looked up here, once per call,
// in the driver that file opened (dlsym on a loaded library is a hash
// lookup).
#include <dlfcn.h>
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
	CUresult (*wait_event)(CUstream, CUevent, unsigned) = NULL;
	void *sp = dlsym(c->d.dl, "cuStreamWaitEvent");
	if (!sp) {
		snprintf(err, errlen, "the CUDA driver has no cuStreamWaitEvent");
		return 0;
	}
	memcpy(&wait_event, &sp, sizeof sp); // as runtime/cuda.c copies its entry points
	CUstream other = (CUstream)stream;
	CUstream from = wait ? other : c->stream, to = wait ? c->stream : other;
	CUevent e;
	CHECK_CU(c, cuCtxSetCurrent(c->ctx));
	CHECK_CU(c, cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
	CUresult r = c->d.cuEventRecord(e, from);
	const char *what = "cuEventRecord(e, from)";
	if (!r) {
		r = wait_event(to, e, 0);
		what = "cuStreamWaitEvent(to, e, 0)";
	}
	c->d.cuEventDestroy(e);
	if (r) {
		rtcu_msg(c, r, what, __func__, __FILE__, __LINE__, err, errlen);
		return 0;
	}
	return 1;
}
