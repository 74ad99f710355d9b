// tests/unit/test_codegen_cuda.c -- every kernel of the models compile-
// checked by NVRTC, on machines without a GPU (issue 6).
//
// For ppl_simple_reg and ppl_robust_reg (every task of bench.yaml's list)
// and multiheadattn and transformer (their tasks, at bench.yaml's reduced
// sizes), forward included: each task goes through the CPU backend's
// pipeline (pass_task -> cg_lower -> cg_plan, as codegen/compile.c does),
// is printed as CUDA C (cg_cuda_print), and compiled by NVRTC to an sm_90
// cubin (every task) and to compute_90 PTX (each model's forward: the same
// source, so the PTX fallback path is checked without doubling the time);
// both must succeed and be non-empty, the
// source must have one __global__ per kernel, and printing twice must give
// the same bytes.  Then a deliberately broken source must fail with the
// NVRTC log and the numbered source on the diagnostics stream.  Without
// the CUDA toolkit (no FADC_HAVE_CUDA) the test exits 77.
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "codegen.h"
#include "frontend.h"
#include "passes.h"
#include "testutil.h"

#ifndef FADC_HAVE_CUDA
int
main(void) {
	printf("test_codegen_cuda: built without the CUDA toolkit, skipped\n");
	return 77;
}
#else

static double
now(void) {
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int
count(const char *s, const char *pat) {
	int n = 0;
	for (const char *q = strstr(s, pat); q; q = strstr(q + 1, pat))
		n++;
	return n;
}

static double total_s;
static int total_kernels, total_tasks, total_blockred;

static void
check_task(const Module *m, const char *model, const char *task, int with_ptx) {
	char msg[4096] = "", err[4096] = "";
	Loc loc = 0;
	Graph *g = pass_task(m->main, task, NULL, &loc, msg, sizeof msg);
	CHECK(g != NULL);
	if (!g) {
		fprintf(stderr, "%s %s: %s\n", model, task, msg);
		return;
	}
	KProgram *p = cg_lower(g, task, DT_F32, err, sizeof err);
	ir_graph_free(g);
	CHECK(p != NULL);
	if (!p) {
		fprintf(stderr, "%s %s: %s\n", model, task, err);
		return;
	}
	cg_plan(p);
	size_t n1 = 0, n2 = 0;
	char *src = cg_cuda_print(p, &n1, err, sizeof err);
	char *again = cg_cuda_print(p, &n2, err, sizeof err);
	CHECK(src != NULL && again != NULL);
	if (!src || !again) {
		fprintf(stderr, "%s %s: %s\n", model, task, err);
		free(src);
		free(again);
		kir_program_free(p);
		return;
	}
	CHECK(n1 == strlen(src));
	CHECK(n1 == n2 && memcmp(src, again, n1) == 0);
	// One __global__ per launch: each kernel, or for a small task the
	// fused one (its kernels __device__ functions, a barrier between).
	uint32_t nl = cg_cuda_launches(p);
	CHECK(count(src, "__global__") == (int)nl);
	CHECK(nl == p->nk || (nl == 1 && count(src, "__syncthreads();") == (int)p->nk - 1 &&
	                      count(src, "static __device__ void") == (int)p->nk));
	// The ppl models are small: every task is one launch.
	if (!strncmp(model, "ppl_", 4))
		CHECK(nl == 1);
	int nblockred = 0;
	for (uint32_t li = 0; li < nl; li++) {
		CgCudaKernel k;
		CHECK(cg_cuda_kernel(p, li, &k) && strstr(src, k.name) != NULL);
		CHECK(nl > 1 || p->nk == 1 || k.grid == 1);
		// Not fused: a long reduction into few points (docs/CUDA.md: at least
		// 128 terms, at most 32768 points) is one block per point.
		if (nl == p->nk) {
			const KKernel *kk = &p->k[li];
			int64_t nr = 1;
			for (int d = 0; d < kk->rrank; d++)
				nr *= kk->rdim[d];
			int want = kk->red && nr >= 128 && k.points <= 32768;
			CHECK(want == (k.grid != 0));
			CHECK(!want || k.grid == (uint32_t)(k.points < 65535 ? k.points : 65535));
			nblockred += want;
		}
		free(k.name);
		free(k.buf);
	}
	CHECK(count(src, "red[threadIdx.x] = acc;") == 2 * nblockred);
	total_blockred += nblockred;
	char name[256];
	snprintf(name, sizeof name, "%s_%s.cu", model, task);
	uint8_t *cubin = NULL, *ptx = NULL;
	size_t ncubin = 0, nptx = 0;
	double t0 = now();
	int ok = cg_cuda_compile(src, name, "sm_90", &cubin, &ncubin, stderr, err, sizeof err);
	double t1 = now();
	CHECK(ok && cubin != NULL && ncubin > 0);
	if (!ok)
		fprintf(stderr, "%s %s: %s\n", model, task, err);
	// A cubin is an ELF file.
	CHECK(ok && ncubin > 4 && !memcmp(cubin, "\177ELF", 4));
	double t2 = t1;
	if (with_ptx) {
		ok = cg_cuda_compile(src, name, "compute_90", &ptx, &nptx, stderr, err, sizeof err);
		t2 = now();
		CHECK(ok && ptx != NULL && nptx > 0);
		if (!ok)
			fprintf(stderr, "%s %s: %s\n", model, task, err);
		CHECK(ok && strstr((const char *)ptx, ".target sm_90") != NULL);
		CHECK(ok && count((const char *)ptx, ".entry") == (int)nl);
	}
	printf("%-16s %-16s %3u kernels %3u launches  source %6zu B  cubin %7zu B (%.0f ms)  ptx "
	       "%7zu B (%.0f ms)\n",
	       model, task, p->nk, nl, n1, ncubin, 1e3 * (t1 - t0), nptx, 1e3 * (t2 - t1));
	total_s += t2 - t0;
	total_kernels += (int)p->nk;
	total_tasks++;
	free(cubin);
	free(ptx);
	free(src);
	free(again);
	kir_program_free(p);
}

static void
check_model(const char *file, const char *const *defs, int ndefs, const char *const *tasks,
            int ntasks) {
	const char *root = getenv("FADC_SOURCE_DIR");
	char path[4096];
	snprintf(path, sizeof path, "%s/models/%s.ir", root ? root : ".", file);
	FeOptions fo = {.diag = stderr, .defines = defs, .ndefines = ndefs};
	Module *m = fe_parse_file(path, &fo);
	CHECK(m != NULL);
	if (!m)
		return;
	check_task(m, file, "forward", 1);
	for (int i = 0; i < ntasks; i++)
		check_task(m, file, tasks[i], 0);
	ir_module_free(m);
}

// A compilation error: the log and the numbered source on diag.
static void
check_broken(void) {
	static const char bad[] = "extern \"C\" __global__ void\n"
	                          "fadc_broken(float *b0)\n"
	                          "{\n"
	                          "\tb0[0] = no_such_value;\n"
	                          "}\n";
	FILE *diag = tmpfile();
	CHECK(diag != NULL);
	if (!diag)
		return;
	uint8_t *out = (uint8_t *)1;
	size_t n = 1;
	char err[4096] = "";
	int ok = cg_cuda_compile(bad, "broken.cu", "sm_90", &out, &n, diag, err, sizeof err);
	CHECK(!ok && out == NULL && n == 0);
	CHECK(strstr(err, "nvrtcCompileProgram") != NULL);
	CHECK(strstr(err, "NVRTC_ERROR_COMPILATION") != NULL);
	char text[8192];
	rewind(diag);
	size_t k = fread(text, 1, sizeof text - 1, diag);
	text[k] = 0;
	fclose(diag);
	CHECK(strstr(text, "no_such_value") != NULL);                    // NVRTC's log names it
	CHECK(strstr(text, "broken.cu(4)") != NULL);                     // at line 4
	CHECK(strstr(text, "    4 | \tb0[0] = no_such_value;") != NULL); // the numbered source
	CHECK(strstr(text, "    1 | extern \"C\" __global__ void") != NULL);
	// An unknown architecture is refused before NVRTC runs.
	ok = cg_cuda_compile(bad, "broken.cu", "volta", &out, &n, stderr, err, sizeof err);
	CHECK(!ok && strstr(err, "volta") != NULL);
}

int
main(void) {
	int major = 0, minor = 0;
	CHECK(cg_cuda_nvrtc_version(&major, &minor));
	printf("NVRTC %d.%d\n", major, minor);
	// bench/bench.yaml: the ppl models run every task; the others their
	// fast tasks at the reduced sizes.
	static const char *const all_tasks[] = {"vjp",
	                                        "vhp",
	                                        "jvp",
	                                        "hvp",
	                                        "jacobian",
	                                        "hessian",
	                                        "hessian_fwdrev",
	                                        "hessian_revrev",
	                                        "jacfwd",
	                                        "jacrev"};
	static const char *const fast[] = {"vjp", "vhp", "jvp"};
	static const char *const mha[] = {"B=4", "L=3", "S=5"};
	static const char *const tr[] = {"N=8", "SEQ=4", "E=16", "NH=4", "FF=16", "MAXLEN=16"};
	check_model("ppl_simple_reg", NULL, 0, all_tasks, 10);
	check_model("ppl_robust_reg", NULL, 0, all_tasks, 10);
	check_model("multiheadattn", mha, 3, fast, 3);
	check_model("transformer", tr, 6, fast, 3);
	// Full size: too large to fuse; its loss sums ~21,000 attention weights
	// (a block reduction).
	check_model("multiheadattn", NULL, 0, NULL, 0);
	CHECK(total_blockred > 0);
	printf("%d tasks, %d kernels: NVRTC %.2f s in all (cubins, and PTX of the forwards)\n",
	       total_tasks, total_kernels, total_s);
	check_broken();
	return TU_DONE("test_codegen_cuda");
}
#endif
