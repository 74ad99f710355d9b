// tests/unit/test_codegen_cuda_mma.c -- the 3xTF32 GEMM kernels (codegen/cuda_mma.c)
// without a GPU: which forms a task's source holds (none by default: they
// are opt-in, FADC_CUDA_MMA=1 at compile time; then its f32 GEMM records'
// (ta, tb), both tiles; none for f64 records, none below the GEMM band,
// none with FADC_CUDA_MMA=0), and that the text of all four
// forms compiles through NVRTC for sm_90 into PTX with the eight entry
// points and the tensor-core instructions (exit 77 without the toolkit).
// Their results are checked on a GPU: tests/gpu/mma.ir in gpu_check
// (tests/gpu/device/payload.sh) against the CPU code, every record forced
// to each tile (FADC_CUDA_MMA=128, 64).  (FADC_CUDA_MMA is this process's
// own environment: the test sets it as it goes.)
#include <stdlib.h>
#include <string.h>

#include "codegen_util.h"
#include "cuda_mma.h"

static KProgram *
lower(const char *text, const char *task, DType dt) {
	Module *m = cgu_parse("mma", text);
	if (!m)
		return NULL;
	char msg[1024] = "";
	int derived;
	KProgram *p = cgu_lower_task(m, task, dt, &derived, msg, sizeof msg);
	CHECK(p != NULL);
	if (!p)
		fprintf(stderr, "test_codegen_cuda_mma %s: %s\n", task, msg);
	ir_module_free(m);
	return p;
}

static int
has(const char *s, const char *pat) {
	return s && strstr(s, pat) != NULL;
}

// x[256, 512] @ w[512, 384] (2^26 multiply-adds: a GEMM record alone),
// its vjp (the input gradient g wᵀ: tb = 1; the weight gradient xᵀ g:
// ta = 1), and a small product below the band (no record, no kernel).
static const char *model =
    "param x: f32[256, 512] = normal(0, 1, seed=1)\n"
    "param w: f32[512, 384] = normal(0, 1, seed=2)\n"
    "param s: f32[8, 8] = normal(0, 1, seed=3)\n"
    "def forward() -> f32[] {\n  y = x @ w\n  return sum(y * y) + sum(s @ s)\n}\n";

static void
check_forms(void) {
	char err[512];
	KProgram *p = lower(model, "forward", DT_F32);
	if (p) { // opt-in: nothing by default
		unsetenv("FADC_CUDA_MMA");
		char *src = cg_cuda_print(p, NULL, err, sizeof err);
		CHECK(src && has(src, "cuBLAS GEMM") && !has(src, "fadc_mma3_"));
		free(src);
		kir_program_free(p);
	}
	setenv("FADC_CUDA_MMA", "1", 1);
	p = lower(model, "forward", DT_F32);
	if (p) {
		char *src = cg_cuda_print(p, NULL, err, sizeof err);
		CHECK(has(src, "fadc_mma3_nn_128(") && has(src, "fadc_mma3_nn_64("));
		CHECK(!has(src, "fadc_mma3_nt_") && !has(src, "fadc_mma3_tn_") &&
		      !has(src, "fadc_mma3_tt_"));
		CHECK(has(src, "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32"));
		free(src);
		setenv("FADC_CUDA_MMA", "0", 1);
		src = cg_cuda_print(p, NULL, err, sizeof err);
		CHECK(src && !has(src, "fadc_mma3_"));
		setenv("FADC_CUDA_MMA", "1", 1);
		free(src);
		kir_program_free(p);
	}
	p = lower(model, "vjp", DT_F32);
	if (p) {
		char *src = cg_cuda_print(p, NULL, err, sizeof err);
		CHECK(has(src, "fadc_mma3_nn_128("));
		CHECK(has(src, "fadc_mma3_nt_128(") || has(src, "fadc_mma3_tn_128("));
		free(src);
		kir_program_free(p);
	}
	// f64 records run DGEMM: no 3xTF32 kernel.
	p = lower("param x: f64[256, 512] = normal(0, 1, seed=1)\n"
	          "param w: f64[512, 384] = normal(0, 1, seed=2)\n"
	          "def forward() -> f64[] {\n  y = x @ w\n  return sum(y * y)\n}\n",
	          "forward", DT_F32);
	if (p) {
		char *src = cg_cuda_print(p, NULL, err, sizeof err);
		CHECK(src && has(src, "cuBLAS GEMM") && !has(src, "fadc_mma3_"));
		free(src);
		kir_program_free(p);
	}
}

static void
check_nvrtc(void) {
#ifdef FADC_HAVE_CUDA
	char *text = NULL, err[2048];
	size_t n = 0;
	FILE *f = open_memstream(&text, &n);
	CHECK(f != NULL);
	if (!f)
		return;
	cg_cuda_mma_text(f, 15);
	fclose(f);
	uint8_t *cubin = NULL, *ptx = NULL;
	size_t nc = 0, np = 0;
	int ok = cg_cuda_compile_both(text, "mma.cu", "sm_90", &cubin, &nc, &ptx, &np, stderr, err,
	                              sizeof err);
	CHECK(ok);
	if (!ok)
		fprintf(stderr, "test_codegen_cuda_mma: %s\n", err);
	char *s = ok ? calloc(np + 1, 1) : NULL;
	if (s) {
		memcpy(s, ptx, np);
		const char *forms[] = {"nn", "nt", "tn", "tt"};
		for (int i = 0; i < 4; i++)
			for (int b = 64; b <= 128; b += 64) {
				char e[64];
				snprintf(e, sizeof e, ".entry fadc_mma3_%s_%d(", forms[i], b);
				CHECK(has(s, e));
			}
		CHECK(has(s, "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32"));
		CHECK(has(s, "cvt.rna.tf32.f32"));
		CHECK(nc > 0);
	}
	free(s);
	free(cubin);
	free(ptx);
	free(text);
#endif
}

int
main(void) {
	check_forms();
	check_nvrtc();
#ifndef FADC_HAVE_CUDA
	if (!tu_nfail) {
		fprintf(stderr, "test_codegen_cuda_mma: no CUDA toolkit: NVRTC part skipped\n");
		return 77;
	}
#endif
	return TU_DONE("test_codegen_cuda_mma");
}
