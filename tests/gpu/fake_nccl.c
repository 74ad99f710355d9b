// tests/gpu/fake_nccl.c -- a stand-in for libnccl.so.2 (FADC_NCCL_LIB) that
// makes NCCL's failures happen on demand, for the deadline and abort paths
// of runtime/multi.c (tests/gpu/multi.sh): a peer that never arrives, a
// GPU that fails mid-run.  FAKE_NCCL says what goes wrong:
//   init   every communicator stays in progress after its init (a rank that
//          never joins): the context's creation must end at the deadline;
//   run    the communicators are made, but a group of collectives stays in
//          progress (a peer stuck in the all-reduce): the run must end at the
//          deadline;
//   error  the group's collectives report an asynchronous error (6,
//          ncclRemoteError: a GPU or peer failed mid-run);
//   unset  everything succeeds at once (collectives do nothing).
// ncclCommAbort is counted in the file FAKE_NCCL_ABORTS names, if set (one
// line per abort).  Never a real NCCL: collectives leave the buffers as
// they are.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int ncclResult_t;
struct ncclComm {
	int rank, busy, failed;
};
typedef struct ncclComm *ncclComm_t;
typedef struct {
	char internal[128];
} ncclUniqueId; // passed by value, as nccl.h has it

static const char *
mode(void)
{
	const char *m = getenv("FAKE_NCCL");
	return m ? m : "";
}

ncclResult_t
ncclGetVersion(int *v)
{
	*v = 22800;
	return 0;
}

ncclResult_t
ncclGetUniqueId(ncclUniqueId *id)
{
	memset(id, 0, sizeof *id);
	return 0;
}

ncclResult_t
ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank, void *config)
{
	(void)nranks, (void)id, (void)config;
	*comm = calloc(1, sizeof **comm);
	(*comm)->rank = rank;
	(*comm)->busy = !strcmp(mode(), "init");
	return (*comm)->busy ? 7 : 0;
}

ncclResult_t
ncclCommInitAll(ncclComm_t *comms, int n, const int *devs)
{
	(void)comms, (void)n, (void)devs;
	return 5; // ncclInvalidUsage: fadc does not use it
}

ncclResult_t
ncclCommFinalize(ncclComm_t c)
{
	(void)c;
	return 0;
}

ncclResult_t
ncclCommDestroy(ncclComm_t c)
{
	free(c);
	return 0;
}

ncclResult_t
ncclCommAbort(ncclComm_t c)
{
	const char *f = getenv("FAKE_NCCL_ABORTS");
	FILE *o = f ? fopen(f, "a") : NULL;
	if (o) {
		fprintf(o, "abort rank %d\n", c ? c->rank : -1);
		fclose(o);
	}
	free(c);
	return 0;
}

ncclResult_t
ncclCommGetAsyncError(ncclComm_t c, ncclResult_t *err)
{
	*err = c->failed ? 6 : c->busy ? 7 : 0;
	return 0;
}

static ncclComm_t last[64];
static int nlast;

ncclResult_t
ncclAllReduce(const void *s, void *r, size_t n, int dt, int op, ncclComm_t c, void *stream)
{
	(void)s, (void)r, (void)n, (void)dt, (void)op, (void)stream;
	if (nlast < 64)
		last[nlast++] = c;
	return 0;
}

ncclResult_t
ncclAllGather(const void *s, void *r, size_t n, int dt, ncclComm_t c, void *stream)
{
	(void)s, (void)r, (void)n, (void)dt, (void)c, (void)stream;
	return 0;
}

ncclResult_t
ncclBroadcast(const void *s, void *r, size_t n, int dt, int root, ncclComm_t c, void *stream)
{
	(void)s, (void)r, (void)n, (void)dt, (void)root, (void)c, (void)stream;
	return 0;
}

ncclResult_t
ncclGroupStart(void)
{
	nlast = 0;
	return 0;
}

ncclResult_t
ncclGroupEnd(void)
{
	// The collectives of the group: stuck or failed as FAKE_NCCL says.
	int run = !strcmp(mode(), "run"), error = !strcmp(mode(), "error");
	for (int i = 0; i < nlast; i++) {
		last[i]->busy |= run;
		last[i]->failed |= error;
	}
	return nlast && run ? 7 : 0;
}

ncclResult_t
ncclRedOpCreatePreMulSum(int *op, void *scalar, int dt, int residence, ncclComm_t c)
{
	(void)scalar, (void)dt, (void)residence, (void)c;
	*op = 5; // ncclNumOps: the first user op
	return 0;
}

ncclResult_t
ncclRedOpDestroy(int op, ncclComm_t c)
{
	(void)op, (void)c;
	return 0;
}

const char *
ncclGetErrorString(ncclResult_t r)
{
	return r == 6 ? "remote process exited or there was a network error (fake)"
	       : r == 7 ? "operation in progress (fake)"
	                : r ? "error (fake)" : "no error";
}

const char *
ncclGetLastError(ncclComm_t c)
{
	(void)c;
	return "fake NCCL (tests/gpu/fake_nccl.c)";
}
