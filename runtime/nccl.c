// runtime/nccl.c -- NCCL loaded at run time, once per process.
//
// As the CUDA driver and cuBLAS (runtime/cublas.c), NCCL is not linked:
// the data-parallel runtime (issue 27, docs/MULTIGPU.md) needs it only for
// a context over several GPUs, so the library is dlopen'ed then, and a
// host without it runs everything else.  The file is FADC_NCCL_LIB when
// set (the tests point it at a missing file), else libnccl.so.2 on the
// loader's path; every entry point of NCCL_FUNCS (runtime/nccl.h) must be
// there and the version at least 2.14 (non-blocking communicators,
// ncclCommFinalize), or the load fails with a message naming what is
// missing, never later at a call.
//
// NCCL_NVLS_ENABLE=0 is set before the library is loaded (NCCL reads its
// environment at its first communicator): NVLink SHARP / multicast can take
// the host's GPUs out of service, so fadc never lets NCCL use it, whatever
// the caller's environment says.
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nccl.h"

static pthread_mutex_t nccl_lock = PTHREAD_MUTEX_INITIALIZER;
static RtNccl nccl; // nccl.dl set: loaded

static void
errf(char *err, size_t errlen, const char *fmt, const char *a, const char *b)
{
	if (errlen)
		snprintf(err, errlen, fmt, a, b);
}

const RtNccl *
rt_nccl_load(char *err, size_t errlen)
{
	pthread_mutex_lock(&nccl_lock);
	if (nccl.dl) {
		pthread_mutex_unlock(&nccl_lock);
		return &nccl;
	}
	const char *env = getenv("FADC_NCCL_LIB");
	const char *lib = env && *env ? env : "libnccl.so.2";
	setenv("NCCL_NVLS_ENABLE", "0", 1);
	RtNccl n = {0};
	n.dl = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
	if (!n.dl) {
		const char *why = dlerror();
		errf(err, errlen, "NCCL is needed for a context over several GPUs: cannot load %s (%s)",
		     lib, why ? why : "dlopen failed");
		pthread_mutex_unlock(&nccl_lock);
		return NULL;
	}
	const char *missing = NULL;
#define X(name, args)                                                                      \
	if (!missing && !(*(void **)&n.name = dlsym(n.dl, "nccl" #name)))                     \
		missing = "nccl" #name;
	NCCL_FUNCS(X)
	X(GetErrorString, ())
	X(GetLastError, ())
#undef X
	if (missing) {
		errf(err, errlen, "%s is no NCCL library: it has no %s", lib, missing);
		dlclose(n.dl);
		pthread_mutex_unlock(&nccl_lock);
		return NULL;
	}
	if (n.GetVersion(&n.version) != NCCL_SUCCESS || n.version < 21400) {
		char v[32];
		snprintf(v, sizeof v, "%d", n.version);
		errf(err, errlen, "%s is NCCL version code %s; fadc needs 2.14 (21400) or later", lib, v);
		dlclose(n.dl);
		pthread_mutex_unlock(&nccl_lock);
		return NULL;
	}
	n.lib = strdup(lib);
	nccl = n;
	pthread_mutex_unlock(&nccl_lock);
	return &nccl;
}
