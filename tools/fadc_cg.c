// tools/fadc_cg.c -- fadc-cg, the driver of the CPU backend until the fadc
// tool takes these commands over:
//
//   fadc-cg MODEL.ir -o MODEL.so [-D NAME=VALUE]... [--tasks LIST|all]
//           [-O0|-O1|-O2|-O3] [--cpu CPU] [--f64] [--stats] [--emit kir|llvm]
//   fadc-cg inspect MODEL.so           the descriptor, read without loading code
//   fadc-cg run MODEL.so --task T [--seed N] [--params FILE]... [--out DIR] [--print]
//           [--time N]                 N more runs, timed: mean microseconds per call
//   fadc-cg check MODEL.ir [-D ...] [--tasks LIST|all] [--f64] [--tol X] [-v]
//
// `run` takes the caller's inputs (v, forward's arguments) as U[0, 1) draws
// of Philox with seed 1000 + k for the k-th input, and writes each output
// as DIR/<name>.npy.  `check` compares every task with the interpreter
// (codegen/check.c).  Exit status: 0 success, 1 an error, 2 a usage error.
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "codegen.h"
#include "fadc.h"
#include "frontend.h"
#include "tensorio.h"

static int
usage(void)
{
	fprintf(stderr,
	        "usage: fadc-cg MODEL.ir -o MODEL.so [-D NAME=VALUE]... [--tasks LIST|all] [-O0..3]\n"
	        "               [--cpu x86-64-v3|native|generic|x86-64-v2|x86-64-v4] [--f64]\n"
	        "               [--stats] [--emit kir|llvm]\n"
	        "       fadc-cg inspect MODEL.so\n"
	        "       fadc-cg run MODEL.so --task T [--seed N] [--params FILE]... [--out DIR] [--print]\n"
	        "               [--time N]\n"
	        "       fadc-cg check MODEL.ir [-D NAME=VALUE]... [--tasks LIST|all] [--f64] [--tol X] [-v]\n");
	return 2;
}

// Splits a comma list into a static array of names.
static int
split(char *list, const char **out, int max)
{
	int n = 0;
	for (char *s = strtok(list, ","); s && n < max; s = strtok(NULL, ","))
		out[n++] = s;
	return n;
}

typedef struct Args {
	const char *in, *out, *task, *outdir, *emit;
	const char *defines[64];
	int ndefines;
	const char *tasks[32];
	int ntasks;
	const char *params[16];
	int nparams;
	CgOptions o;
	double tol;
	uint64_t seed;
	int print, verbose;
	long time;
} Args;

static int
parse_args(int argc, char **argv, int first, Args *a)
{
	a->o.opt_level = -1;
	for (int i = first; i < argc; i++) {
		const char *s = argv[i];
		const char *next = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(s, "-o") && next)
			a->out = argv[++i];
		else if (!strcmp(s, "-D") && next && a->ndefines < 64)
			a->defines[a->ndefines++] = argv[++i];
		else if (!strncmp(s, "-D", 2) && s[2] && a->ndefines < 64)
			a->defines[a->ndefines++] = s + 2;
		else if (!strcmp(s, "--tasks") && next)
			a->ntasks = split(argv[++i], a->tasks, 32);
		else if (!strcmp(s, "--task") && next)
			a->task = argv[++i];
		else if (s[0] == '-' && s[1] == 'O' && s[2] >= '0' && s[2] <= '3' && !s[3])
			a->o.opt_level = s[2] - '0';
		else if (!strcmp(s, "--cpu") && next)
			a->o.cpu = argv[++i];
		else if (!strcmp(s, "--f64"))
			a->o.compute_f64 = 1;
		else if (!strcmp(s, "--stats"))
			a->o.stats = stderr;
		else if (!strcmp(s, "--emit") && next)
			a->emit = argv[++i];
		else if (!strcmp(s, "--tol") && next)
			a->tol = strtod(argv[++i], NULL);
		else if (!strcmp(s, "--seed") && next)
			a->seed = strtoull(argv[++i], NULL, 10);
		else if (!strcmp(s, "--params") && next && a->nparams < 16)
			a->params[a->nparams++] = argv[++i];
		else if (!strcmp(s, "--out") && next)
			a->outdir = argv[++i];
		else if (!strcmp(s, "--time") && next)
			a->time = strtol(argv[++i], NULL, 10);
		else if (!strcmp(s, "--print"))
			a->print = 1;
		else if (!strcmp(s, "-v"))
			a->verbose = 1;
		else if (s[0] != '-' && !a->in)
			a->in = s;
		else {
			fprintf(stderr, "fadc-cg: unknown or incomplete option '%s'\n", s);
			return 0;
		}
	}
	a->o.defines = a->defines;
	a->o.ndefines = a->ndefines;
	a->o.tasks = a->tasks;
	a->o.ntasks = a->ntasks;
	if (a->emit) {
		if (!strcmp(a->emit, "kir"))
			a->o.emit_kir = stdout;
		else if (!strcmp(a->emit, "llvm"))
			a->o.emit_llvm = stdout;
		else {
			fprintf(stderr, "fadc-cg: --emit kir or --emit llvm\n");
			return 0;
		}
	}
	return 1;
}

static Module *
parse(const Args *a)
{
	FeOptions fo = {.defines = a->defines, .ndefines = a->ndefines, .diag = stderr};
	return fe_parse_file(a->in, &fo);
}

static void
print_desc(const fadc_tensor_desc *d, const char *dir)
{
	static const char *const roles[] = {"param", "const", "input", "output"};
	printf("  %s %-28s %-6s %s[", dir, d->name, roles[d->role], fadc_dtype_name(d->dtype));
	for (int i = 0; i < d->rank; i++)
		printf("%s%" PRId64, i ? ", " : "", d->dim[i]);
	printf("]\n");
}

static int
cmd_inspect(const Args *a)
{
	fadc_context *ctx;
	fadc_model *m;
	if (fadc_context_create(NULL, &ctx))
		return 1;
	if (fadc_model_open(ctx, a->in, FADC_OPEN_DESCRIBE, &m)) {
		fprintf(stderr, "fadc-cg: %s\n", fadc_context_error(ctx));
		fadc_context_destroy(ctx);
		return 1;
	}
	printf("model %s\n", fadc_model_name(m));
	printf("source_hash %s\n", fadc_model_info(m, "source_hash"));
	printf("triple %s\ncpu %s\nfeatures %s\n", fadc_model_info(m, "triple"),
	       fadc_model_info(m, "cpu"), fadc_model_info(m, "features"));
	printf("options %s\n", fadc_model_info(m, "options"));
	for (int i = 0; i < fadc_model_decl_count(m); i++) {
		fadc_tensor_desc d;
		int has_init;
		fadc_model_decl(m, i, &d, &has_init);
		print_desc(&d, has_init ? "decl" : "bind");
	}
	for (int t = 0; t < fadc_model_task_count(m); t++) {
		fadc_task_info info;
		fadc_task_info_get(m, t, &info);
		printf("task %s: %d kernels, arena %" PRIu64 " bytes (naive %" PRIu64 ")\n", info.name,
		       info.nkernels, info.arena_bytes, info.naive_bytes);
		for (int i = 0; i < info.ninputs; i++) {
			fadc_tensor_desc d;
			fadc_task_input(m, t, i, &d);
			print_desc(&d, "in ");
		}
		for (int i = 0; i < info.noutputs; i++) {
			fadc_tensor_desc d;
			fadc_task_output(m, t, i, &d);
			print_desc(&d, "out");
		}
	}
	fadc_model_close(m);
	fadc_context_destroy(ctx);
	return 0;
}

static void
print_tensor(const char *name, fadc_tensor *t)
{
	printf("%s: %s[", name, fadc_dtype_name(fadc_tensor_dtype(t)));
	for (int i = 0; i < fadc_tensor_rank(t); i++)
		printf("%s%" PRId64, i ? ", " : "", fadc_tensor_dims(t)[i]);
	printf("] =");
	int64_t n = fadc_tensor_numel(t);
	const void *p = fadc_tensor_data(t);
	for (int64_t i = 0; i < n && i < 64; i++)
		switch (fadc_tensor_dtype(t)) {
		case FADC_F32:
			printf(" %.6f", ((const float *)p)[i]);
			break;
		case FADC_F64:
			printf(" %.6f", ((const double *)p)[i]);
			break;
		case FADC_I64:
			printf(" %" PRId64, ((const int64_t *)p)[i]);
			break;
		case FADC_BOOL:
			printf(" %d", ((const uint8_t *)p)[i]);
			break;
		}
	printf(n > 64 ? " ...\n" : "\n");
}

static int
cmd_run(const Args *a)
{
	if (!a->task) {
		fprintf(stderr, "fadc-cg run: --task T is required\n");
		return 2;
	}
	fadc_context_options co = {{FADC_DEVICE_CPU, 0}, 0, a->seed};
	fadc_context *ctx;
	fadc_model *m = NULL;
	int rc = 1, task, ncaller = 0;
	fadc_tensor **in = NULL, **out = NULL;
	fadc_task_info info;
	if (fadc_context_create(&co, &ctx))
		return 1;
	if (fadc_model_open(ctx, a->in, 0, &m) || fadc_model_find_task(m, a->task, &task))
		goto fail;
	for (int i = 0; i < a->nparams; i++)
		if (fadc_model_bind_file(m, a->params[i], NULL))
			goto fail;
	if (fadc_model_init(m, a->seed))
		goto fail;
	fadc_task_info_get(m, task, &info);
	in = calloc((size_t)info.ninputs + 1, sizeof *in);
	out = calloc((size_t)info.noutputs + 1, sizeof *out);
	for (int i = 0; i < info.ninputs; i++) {
		fadc_tensor_desc d;
		fadc_task_input(m, task, i, &d);
		if (d.role != FADC_ROLE_INPUT)
			continue;
		fadc_tensor *t;
		if (fadc_tensor_create(ctx, d.dtype, d.rank, d.dim, &t))
			goto fail;
		in[ncaller++] = t;
		if (d.dtype == FADC_F32 || d.dtype == FADC_F64)
			for (int64_t j = 0; j < fadc_tensor_numel(t); j++) {
				double u = ir_rand_uniform(a->seed + 1000 + (uint64_t)i, 0, (uint64_t)j);
				if (d.dtype == FADC_F32)
					((float *)fadc_tensor_data(t))[j] = (float)u;
				else
					((double *)fadc_tensor_data(t))[j] = u;
			}
	}
	if (fadc_run(m, task, in, ncaller, out, info.noutputs))
		goto fail;
	if (a->time > 0) {
		// Steady state: the first run allocated; these reuse everything.
		struct timespec t0, t1;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		for (long r = 0; r < a->time; r++)
			if (fadc_run(m, task, in, ncaller, out, info.noutputs))
				goto fail;
		clock_gettime(CLOCK_MONOTONIC, &t1);
		double us = ((double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec)) / 1e3;
		printf("%s: %.3f us per call (%ld calls)\n", a->task, us / (double)a->time, a->time);
	}
	if (a->outdir && mkdir(a->outdir, 0777) && errno != EEXIST) {
		fprintf(stderr, "fadc-cg: %s: %s\n", a->outdir, strerror(errno));
		goto done;
	}
	for (int i = 0; i < info.noutputs; i++) {
		fadc_tensor_desc d;
		fadc_task_output(m, task, i, &d);
		if (a->print)
			print_tensor(d.name, out[i]);
		if (a->outdir) {
			char path[4096], err[600];
			snprintf(path, sizeof path, "%s/%s.npy", a->outdir, d.name);
			tio_tensor t = {.dtype = (enum tio_dtype)d.dtype, .rank = d.rank,
			                .data = fadc_tensor_data(out[i])};
			memcpy(t.dim, d.dim, sizeof(int64_t) * (size_t)d.rank);
			if (tio_npy_write(path, &t, err, sizeof err)) {
				fprintf(stderr, "fadc-cg: %s\n", err);
				goto done;
			}
		}
	}
	rc = 0;
	goto done;
fail:
	fprintf(stderr, "fadc-cg: %s\n", fadc_context_error(ctx));
done:
	for (int i = 0; i < ncaller; i++)
		fadc_tensor_release(in[i]);
	free(in);
	free(out);
	fadc_model_close(m);
	fadc_context_destroy(ctx);
	return rc;
}

int
main(int argc, char **argv)
{
	if (argc < 2)
		return usage();
	const char *cmd = argv[1];
	int sub = !strcmp(cmd, "inspect") || !strcmp(cmd, "run") || !strcmp(cmd, "check");
	Args a = {0};
	if (!parse_args(argc, argv, sub ? 2 : 1, &a) || !a.in)
		return usage();
	if (!strcmp(cmd, "inspect"))
		return cmd_inspect(&a);
	if (!strcmp(cmd, "run"))
		return cmd_run(&a);
	char err[4096] = "";
	Module *m = parse(&a);
	if (!m)
		return 1;
	int rc;
	if (!strcmp(cmd, "check")) {
		CgCheck c = {a.tol > 0 ? a.tol : a.o.compute_f64 ? 2e-7 : 1e-5, 1e-6, a.seed, a.verbose};
		int nf = cg_check(m, &a.o, &c, stdout, err, sizeof err);
		if (nf < 0)
			fprintf(stderr, "%s\n", err);
		rc = nf != 0;
	} else if (!a.out) {
		ir_module_free(m);
		return usage();
	} else {
		rc = !cg_compile_module(m, &a.o, a.out, err, sizeof err);
		if (rc)
			fprintf(stderr, "%s\n", err);
	}
	ir_module_free(m);
	return rc;
}
