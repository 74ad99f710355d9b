// tests/unit/test_runtime_pool_zoo.c -- the thread pool on a convolutional
// network: resnet18 at reduced size (-D N=2 -D H=32 -D C=4 -D NCLS=10, as
// test_codegen_zoo), forward and vjp.  With 1, 2, 3 and 8 threads the
// outputs are the same bytes (memcmp) and the pool did split kernels
// (convolutions as GEMMs, im2col/col2im, batch norm's elementwise
// kernels); computing in f64 at 3 threads they agree with the float64
// interpreter to a normalized error of 2e-7 (the f32 rounding of the
// outputs, as in test_codegen_zoo; measured 5.5e-8).  `slow`: the
// interpreter's vjp of resnet18 takes about a minute of CPU.
#include "pool_util.h"

int
main(void)
{
	static const char *const defs[] = {"N=2", "H=32", "C=4", "NCLS=10"};
	static const char *const tasks[] = {"forward", "vjp"};
	char so[64];
	unsetenv("FADC_NUM_THREADS");
	if (pu_compile("resnet18.ir", "resnet18.ir", 1, defs, 4, tasks, 2, 1, so, sizeof so)) {
		printf("resnet18.ir (reduced):\n");
		pu_check_threads(so, "forward", 1);
		pu_check_threads(so, "vjp", 1);
		unlink(so);
	}
	const char *root = getenv("FADC_SOURCE_DIR");
	char path[4096];
	snprintf(path, sizeof path, "%s/models/resnet18.ir", root ? root : ".");
	FeOptions fo = {.diag = stderr, .defines = defs, .ndefines = 4};
	Module *m = fe_parse_file(path, &fo);
	CHECK(m != NULL);
	if (m) {
		setenv("FADC_NUM_THREADS", "3", 1);
		CgOptions o = {.tasks = tasks, .ntasks = 2, .defines = defs, .ndefines = 4,
		               .opt_level = 1, .compute_f64 = 1};
		CgCheck c = {2e-7, 1e-6, 0, 0};
		char err[4096] = "";
		printf("resnet18.ir (reduced, computing in f64, 3 threads): ");
		fflush(stdout);
		int nf = cg_check(m, &o, &c, stdout, err, sizeof err);
		if (nf < 0)
			fprintf(stderr, "resnet18.ir: %s\n", err);
		CHECK(nf == 0);
		unsetenv("FADC_NUM_THREADS");
		ir_module_free(m);
	}
	return TU_DONE("test_runtime_pool_zoo");
}
