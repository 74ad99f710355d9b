// tests/unit/test_nccl.c -- NCCL's loader (runtime/nccl.c) and the device
// list of fadc_context_options (include/fadc.h), without a GPU.
//
// - FADC_NCCL_LIB naming a missing file: the load fails with a message
//   naming the file, and a context over two GPUs is FADC_ERR_DEVICE with
//   that message, never a crash; a library that is no NCCL (libm) names
//   the first missing entry point.
// - The real libnccl.so.2 where the loader finds it (the CUDA toolkit's, on
//   this machine and the GPU hosts): every entry point, version >= 2.14,
//   and NCCL_NVLS_ENABLE=0 set whatever the environment said.
// - Bad device lists: FADC_ERR_ARG.
// - The ABI promise: options laid out as an older fadc.h had them (ending
//   at `seed`), placed just before an unreadable page, are read without
//   touching that page.
#define _DEFAULT_SOURCE // MAP_ANONYMOUS
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fadc.h"
#include "nccl.h"
#include "testutil.h"

static fadc_status
create_list(const fadc_device *d, int n, fadc_context **c)
{
	fadc_context_options o = {{FADC_DEVICE_CUDA_LIST, 0}, 0, 0, d, n};
	return fadc_context_create(&o, c);
}

int
main(void)
{
	char err[512];
	fadc_context *c = NULL;
	fadc_device two[2] = {{FADC_DEVICE_CUDA, 0}, {FADC_DEVICE_CUDA, 1}};

	// Missing library.
	setenv("NCCL_NVLS_ENABLE", "1", 1);
	setenv("FADC_NCCL_LIB", "/nonexistent/libnccl.so.2", 1);
	CHECK(rt_nccl_load(err, sizeof err) == NULL);
	CHECK(strstr(err, "cannot load /nonexistent/libnccl.so.2") != NULL);
	CHECK(!strcmp(getenv("NCCL_NVLS_ENABLE"), "0"));
	CHECK(create_list(two, 2, &c) == FADC_ERR_DEVICE && c == NULL);
	CHECK(strstr(fadc_context_error(NULL), "NCCL is needed for a context over several GPUs: "
	                                       "cannot load /nonexistent/libnccl.so.2") != NULL);
	printf("missing: %s\n", fadc_context_error(NULL));

	// A library that is no NCCL.
	setenv("FADC_NCCL_LIB", "libm.so.6", 1);
	CHECK(rt_nccl_load(err, sizeof err) == NULL);
	CHECK(strstr(err, "libm.so.6 is no NCCL library: it has no ncclGetVersion") != NULL);

	// Bad lists, before any library is looked at.
	fadc_device cpu[2] = {{FADC_DEVICE_CUDA, 0}, {FADC_DEVICE_CPU, 0}};
	fadc_device dup[2] = {{FADC_DEVICE_CUDA, 1}, {FADC_DEVICE_CUDA, 1}};
	fadc_device neg[1] = {{FADC_DEVICE_CUDA, -1}};
	CHECK(create_list(NULL, 2, &c) == FADC_ERR_ARG);
	CHECK(create_list(two, 0, &c) == FADC_ERR_ARG);
	CHECK(create_list(two, FADC_MAX_DEVICES + 1, &c) == FADC_ERR_ARG);
	CHECK(create_list(cpu, 2, &c) == FADC_ERR_ARG && strstr(fadc_context_error(NULL), "devices[1]"));
	CHECK(create_list(dup, 2, &c) == FADC_ERR_ARG &&
	      strstr(fadc_context_error(NULL), "GPU 1 is listed twice"));
	CHECK(create_list(neg, 1, &c) == FADC_ERR_ARG);

	// One GPU in a list is that GPU's context: on a host without one, the
	// same error as {FADC_DEVICE_CUDA, 0}.
	fadc_context_options one = {{FADC_DEVICE_CUDA, 0}, 0, 0, NULL, 0};
	fadc_status s1 = fadc_context_create(&one, &c);
	char e1[1024];
	snprintf(e1, sizeof e1, "%s", fadc_context_error(NULL));
	if (c)
		fadc_context_destroy(c), c = NULL;
	fadc_status s2 = create_list(two, 1, &c);
	CHECK(s1 == s2 && (s1 != FADC_OK || c) && (s1 == FADC_OK || !strcmp(e1, fadc_context_error(NULL))));
	if (c)
		fadc_context_destroy(c), c = NULL;

	// The real library, where the loader finds it.
	unsetenv("FADC_NCCL_LIB");
	void *probe = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
	if (probe) {
		dlclose(probe);
		const RtNccl *n = rt_nccl_load(err, sizeof err);
		if (CHECK(n != NULL)) {
			CHECK(n->version >= 21400);
			CHECK(n->AllReduce && n->CommInitRankConfig && n->CommGetAsyncError && n->CommAbort &&
			      n->GroupEnd && n->GetErrorString);
			CHECK(!strcmp(n->GetErrorString(NCCL_SUCCESS), "no error"));
			CHECK(rt_nccl_load(err, sizeof err) == n); // once per process
			printf("loaded %s, NCCL version code %d\n", n->lib, n->version);
		} else
			fprintf(stderr, "%s\n", err);
		// NCCL loads; then the GPUs are opened (runtime/multi.c): on a host
		// without them, a device error naming the first, never a hang.
		fadc_status s3 = create_list(two, 2, &c);
		if (s3 == FADC_OK)
			fadc_context_destroy(c), c = NULL;
		else {
			CHECK(s3 == FADC_ERR_DEVICE && !strstr(fadc_context_error(NULL), "not implemented"));
			printf("two GPUs: %s\n", fadc_context_error(NULL));
		}
	} else
		printf("no libnccl.so.2 on the loader's path: the real load is not checked here\n");

	// Options from an older fadc.h: 24 bytes, followed by a page that
	// faults when read.
	struct old_options {
		fadc_device device;
		int num_threads;
		uint64_t seed;
	};
	long pg = sysconf(_SC_PAGESIZE);
	char *m = mmap(NULL, 2 * (size_t)pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (CHECK(m != MAP_FAILED) && CHECK(mprotect(m + pg, (size_t)pg, PROT_NONE) == 0)) {
		struct old_options *old = (struct old_options *)(m + pg - sizeof *old);
		*old = (struct old_options){{FADC_DEVICE_CPU, 0}, 1, 7};
		CHECK(fadc_context_create((const fadc_context_options *)old, &c) == FADC_OK && c);
		if (c)
			fadc_context_destroy(c);
		munmap(m, 2 * (size_t)pg);
	}
	TU_DONE("test_nccl");
}
