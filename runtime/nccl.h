// runtime/nccl.h -- NCCL, loaded at run time (runtime/nccl.c).
//
// The collectives of data-parallel runs over the GPUs of one host (issue
// 27, docs/MULTIGPU.md).  NCCL is never linked: libnccl.so.2 (or the file
// FADC_NCCL_LIB names) is dlopen'ed the first time a context over several
// GPUs is made, so the runtime runs without it everywhere else.  The types
// are nccl.h's (2.14 and later), declared here so that no NCCL header is
// needed to build.
#ifndef FADC_RT_NCCL_H
#define FADC_RT_NCCL_H

#include <stddef.h>

typedef int ncclResult_t; // ncclSuccess 0, ncclInProgress 7
typedef struct ncclComm *ncclComm_t;
typedef struct {
	char internal[128]; // NCCL_UNIQUE_ID_BYTES
} ncclUniqueId;
// ncclConfig_t as NCCL 2.14 laid it out (NCCL reads a config by its
// version field, so a newer library takes it; NCCL_CONFIG_INITIALIZER of
// that version: size, magic, version, then every field undefined).
typedef struct ncclConfig {
	size_t size;
	unsigned int magic; // 0xcafebeef
	unsigned int version; // 21400
	int blocking; // 0: non-blocking (calls may return NCCL_IN_PROGRESS)
	int cgaClusterSize, minCTAs, maxCTAs;
	const char *netName;
} ncclConfig_t;
#define NCCL_CONFIG_UNDEF_INT (-2147483647 - 1)
typedef void *ncclStream_t; // a CUstream

enum {
	NCCL_SUCCESS = 0,
	NCCL_IN_PROGRESS = 7,
	NCCL_SUM = 0, // ncclRedOp_t
	NCCL_FLOAT32 = 7, // ncclDataType_t
	NCCL_FLOAT64 = 8,
	NCCL_SCALAR_HOST_IMMEDIATE = 1, // ncclScalarResidence_t: the scalar read at the call
};

// The entry points the data-parallel runtime uses (and ncclGetErrorString,
// ncclGetLastError for messages; the pre-multiplied sum, 2.11 and later, that
// weights each rank's gradients by its shard's share): communicators made
// non-blocking (ncclCommInitRankConfig with blocking = 0) so that a stuck
// peer is found by polling ncclCommGetAsyncError against a deadline and
// ended by ncclCommAbort, never a hang; all-reduce of gradients,
// all-gather of sharded Jacobian rows, broadcast of parameters.
// clang-format off
#define NCCL_FUNCS(X)                                                                        \
	X(GetVersion,         (int *version))                                                  \
	X(GetUniqueId,        (ncclUniqueId *id))                                              \
	X(CommInitRankConfig, (ncclComm_t *comm, int nranks, ncclUniqueId id, int rank,        \
	                       ncclConfig_t *config))                                          \
	X(CommInitAll,        (ncclComm_t *comms, int ndev, const int *devlist))               \
	X(CommFinalize,       (ncclComm_t comm))                                               \
	X(CommDestroy,        (ncclComm_t comm))                                               \
	X(CommAbort,          (ncclComm_t comm))                                               \
	X(CommGetAsyncError,  (ncclComm_t comm, ncclResult_t *err))                            \
	X(AllReduce,          (const void *send, void *recv, size_t count, int dtype, int op,  \
	                       ncclComm_t comm, ncclStream_t stream))                          \
	X(AllGather,          (const void *send, void *recv, size_t count, int dtype,          \
	                       ncclComm_t comm, ncclStream_t stream))                          \
	X(Broadcast,          (const void *send, void *recv, size_t count, int dtype, int root, \
	                       ncclComm_t comm, ncclStream_t stream))                          \
	X(GroupStart,         (void))                                                          \
	X(GroupEnd,           (void))                                                          \
	X(RedOpCreatePreMulSum, (int *op, void *scalar, int dtype, int residence,              \
	                       ncclComm_t comm))                                               \
	X(RedOpDestroy,       (int op, ncclComm_t comm))
// clang-format on

typedef struct RtNccl {
	void *dl;
	const char *lib; // the file that loaded
	int version; // NCCL_VERSION_CODE: 22800 for 2.28.0
#define X(name, args) ncclResult_t(*name) args;
	NCCL_FUNCS(X)
#undef X
	const char *(*GetErrorString)(ncclResult_t r);
	const char *(*GetLastError)(ncclComm_t comm);
} RtNccl;

// The process's NCCL, loaded on the first call (thread-safe): NULL with
// the reason in err when the library is missing, lacks an entry point or
// is older than 2.14.  Sets NCCL_NVLS_ENABLE=0 before loading it: NVLink
// multicast (NVLS) can take the host's GPUs out of service, and fadc never
// uses it (docs/MULTIGPU.md).  A failure is not remembered, so a later
// call tries again (FADC_NCCL_LIB may have changed).
const RtNccl *rt_nccl_load(char *err, size_t errlen);

#endif
