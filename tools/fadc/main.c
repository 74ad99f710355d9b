// tools/fadc/main.c -- the `fadc` command line: dispatch and --version.
//
//   fadc MODEL.ir --emit ir [--task T] [-D NAME=VALUE]... [pass options]
//   fadc MODEL.ir -o MODEL.so [--target cpu|cuda|cpu,cuda] [--tasks LIST] [-O0..3] [--cpu CPU] ...
//   fadc run MODEL.ir|MODEL.so --task T [--params FILE]... [--v FILE]... [--seed N]
//            --out DIR [--print]
//   fadc inspect MODEL.so
//   fadc check MODEL.ir [--tasks LIST|all] [--tol X]
//   fadc compare-npy A B [--rtol R]
//
// It is its own target, linked on top of every library, and the only place
// that knows about all of them: the frontend parses, passes/tasks.c derives
// a task's graph, the interpreter runs it (`run MODEL.ir`), codegen compiles
// every task into an artifact (`-o`), and the runtime of include/fadc.h
// runs an artifact (`run MODEL.so`).
//
// One file per command: compile.c (the default command: --emit, -o and
// specialisations), run.c (with bind.c, its inputs), inspect.c, check.c
// and compare.c (compare-npy); cli.h and cli.c hold what they share.
//
// Exit status: 0 success, 1 an error in the user's input (a diagnostic was
// printed), 2 a usage error.
#include <stdio.h>
#include <string.h>

#include "artifact.h"
#include "cli.h"
#include "codegen.h"
#include "fileio.h"

// `fadc --version`: the release, the artifact format it writes, and the
// code generators it was built with (fadc-bench records the line).
static int
print_version(void)
{
	printf("fadc %s (artifact format %d; LLVM %s", FADC_VERSION, ART_FORMAT_VERSION,
	       cg_llvm_version());
#ifdef FADC_HAVE_CUDA
	int major, minor;
	if (cg_cuda_nvrtc_version(&major, &minor))
		printf("; NVRTC %d.%d", major, minor);
#endif
	printf(")\n");
	return 0;
}

int
main(int argc, char **argv)
{
	// Temporary files and folders (outputs being written, the compiler's
	// folder) are removed if fadc is interrupted (runtime/fileio.h).
	fio_cleanup_enable();
	if (argc == 2 && !strcmp(argv[1], "--version"))
		return print_version();
	if (argc > 1 && !strcmp(argv[1], "run"))
		return cmd_run(argc - 2, argv + 2);
	if (argc > 1 && !strcmp(argv[1], "inspect"))
		return cmd_inspect(argc - 2, argv + 2);
	if (argc > 1 && !strcmp(argv[1], "check"))
		return cmd_check(argc - 2, argv + 2);
	if (argc > 1 && !strcmp(argv[1], "compare-npy"))
		return cmd_compare(argc - 2, argv + 2);
	return cmd_compile(argc - 1, argv + 1);
}
