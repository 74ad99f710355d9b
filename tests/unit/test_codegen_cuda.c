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
static int total_kernels, total_tasks, total_blockred, total_warp;

// The form of a reduction in a fused task (docs/CUDA.md): 0 a thread per
// point, 1 a warp per point, 2 the block per point, whichever has the
// fewest steps per thread (a term 1, a shuffle step 4, a barrier 8).
static int
fused_form(const KKernel *k) {
	int64_t n = 1, r = 1;
	for (int d = 0; d < k->rank; d++)
		n *= k->dim[d];
	for (int d = 0; d < k->rrank; d++)
		r *= k->rdim[d];
	if (!k->red || r <= 1 || n == 0)
		return 0;
	int64_t cost[3] = {(n + 255) / 256 * r, (n + 7) / 8 * ((r + 31) / 32 + 20),
	                   n * ((r + 255) / 256 + 48)};
	return cost[0] <= cost[1] && cost[0] <= cost[2] ? 0 : cost[1] <= cost[2] ? 1 : 2;
}

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
	// Its barriers (one tab deep: the fused kernel's body) are its phases
	// less one (no loops in these models), at most one per kernel.
	uint32_t nph = cg_cuda_phases(p);
	CHECK(nl == p->nk || (nl == 1 && p->nloop == 0 && nph >= 1 && nph <= p->nk &&
	                      count(src, "\n\t__syncthreads();\n") == (int)nph - 1 &&
	                      count(src, "static __device__ void") == (int)p->nk));
	CHECK((nl == 1 && p->nk > 1) == (nph > 0));
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
	// A fused task's reductions take the form docs/CUDA.md's rule gives
	// (fused_form); a block's (one barrier per point) stores its warps'
	// results once, a warp's and a block's fold by shuffles.
	int nwarp = 0;
	for (uint32_t ki = 0; nl == 1 && p->nk > 1 && ki < p->nk; ki++) {
		int form = fused_form(&p->k[ki]);
		nblockred += form == 2;
		nwarp += form == 1;
	}
	CHECK(count(src, "red[rb][threadIdx.x >> 5] = acc;") == nblockred);
	CHECK(count(src, "__shfl_down_sync") == 2 * nblockred + nwarp);
	CHECK(count(src, "for (long long t = threadIdx.x >> 5;") == nwarp);
	total_blockred += nblockred;
	total_warp += nwarp;
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
	printf("%-16s %-16s %3u kernels %3u phases %3u launches  source %6zu B  cubin %7zu B (%.0f ms)  ptx "
	       "%7zu B (%.0f ms)\n",
	       model, task, p->nk, nph, nl, n1, ncubin, 1e3 * (t1 - t0), nptx, 1e3 * (t2 - t1));
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

// ---------------------------------------------------------------- phases
//
// Hand-built kernel IR, hand-checked phase counts (docs/CUDA.md, "Fewer
// barriers"): kernels over N = 300 points (more than the 256 threads, so
// the block-stride loops wrap), planned by cg_plan as a compile would.

enum { PN = 300 };

// A kernel out[i] = body over [n] (n = 1: a scalar, rank 0).
static KKernel *
pw_kernel(KProgram *p, uint32_t out, int64_t n, KxId body) {
	KKernel *k = kir_kernel_add(p);
	k->out = out;
	k->rank = n > 1;
	k->dim[0] = n;
	k->index = n > 1 ? kx_var(p, 0, n) : kx_iconst(p, 0);
	k->body = body;
	k->what = "elementwise";
	return k;
}

// out[i] = sum over j < nr of body, for i < n (n = 1: a scalar); body is
// an expression of the point's var 0 (n > 1) and the term's var (its rank:
// 1, or 0 for a scalar).
static KKernel *
sum_kernel(KProgram *p, uint32_t out, int64_t n, int64_t nr, KxId body) {
	KKernel *k = pw_kernel(p, out, n, body);
	k->rrank = 1;
	k->rdim[0] = nr;
	k->red = KR_SUM;
	k->post = kx_acc(p, DT_F32);
	k->what = "sum";
	return k;
}

static uint32_t
vec(KProgram *p, KBufKind kind, int index, int64_t n) {
	Shape s = {n > 1, {n}};
	return kir_buf_add(p, kind, index, DT_F32, &s, 0);
}

// Plans, prints and NVRTC-compiles p; checks the fused kernel's barriers
// against its phases, and returns the phases.
static uint32_t
phases_of(KProgram *p) {
	cg_plan(p);
	uint32_t nph = cg_cuda_phases(p);
	char err[4096] = "";
	char *src = cg_cuda_print(p, NULL, err, sizeof err);
	CHECK(src != NULL);
	if (!src) {
		fprintf(stderr, "%s: %s\n", p->name, err);
		return nph;
	}
	CHECK(cg_cuda_launches(p) == 1);
	CHECK(count(src, "\n\t__syncthreads();\n") == (int)nph - 1);
	uint8_t *cubin = NULL;
	size_t ncubin = 0;
	CHECK(cg_cuda_compile(src, p->name, "sm_90", &cubin, &ncubin, stderr, err, sizeof err));
	free(cubin);
	free(src);
	return nph;
}

static void
check_phases(void) {
	// A chain of three pointwise kernels: each reads its own point of the
	// last one's output, written by the same thread: one phase.
	KProgram *p = kir_program_new("chain", DT_F32);
	uint32_t x = vec(p, KB_IN, 0, PN), t1 = vec(p, KB_TMP, 0, PN), t2 = vec(p, KB_TMP, 0, PN),
	         o = vec(p, KB_OUT, 0, PN);
	KxId i = kx_var(p, 0, PN), z = kx_iconst(p, 0);
	pw_kernel(p, t1, PN, kx_un(p, KX_EXP, kx_load(p, x, i)));
	pw_kernel(p, t2, PN, kx_bin(p, KX_MUL, kx_load(p, t1, i), kx_const(p, 2, DT_F32)));
	pw_kernel(p, o, PN, kx_bin(p, KX_ADD, kx_load(p, t2, i), kx_const(p, 1, DT_F32)));
	CHECK(phases_of(p) == 1);
	kir_program_free(p);

	// A pointwise kernel after a reduction into its input: it reads the
	// sum at point 0 from every point (thread 0 wrote it): a barrier.  A
	// scalar kernel reading the sum is thread 0 itself: no barrier.
	p = kir_program_new("after_sum", DT_F32);
	x = vec(p, KB_IN, 0, PN);
	uint32_t s = vec(p, KB_TMP, 0, 1), o1 = vec(p, KB_OUT, 0, 1);
	o = vec(p, KB_OUT, 1, PN);
	i = kx_var(p, 0, PN), z = kx_iconst(p, 0);
	sum_kernel(p, s, 1, PN, kx_load(p, x, i));
	pw_kernel(p, o1, 1, kx_bin(p, KX_MUL, kx_load(p, s, z), kx_const(p, 2, DT_F32)));
	pw_kernel(p, o, PN, kx_bin(p, KX_DIV, kx_load(p, x, i), kx_load(p, s, z)));
	CHECK(phases_of(p) == 2);
	kir_program_free(p);

	// A reduction over a pointwise result reads every thread's points: a
	// barrier before it.
	p = kir_program_new("sum_after", DT_F32);
	x = vec(p, KB_IN, 0, PN);
	t1 = vec(p, KB_TMP, 0, PN);
	o = vec(p, KB_OUT, 0, 1);
	i = kx_var(p, 0, PN);
	pw_kernel(p, t1, PN, kx_un(p, KX_EXP, kx_load(p, x, i)));
	sum_kernel(p, o, 1, PN, kx_load(p, t1, i));
	CHECK(phases_of(p) == 2);
	kir_program_free(p);

	// Write after read through the memory plan: k1 reads a reversed (other
	// threads' points) and is a's last reader, so the plan gives b, first
	// written by k2, a's bytes; k2 must wait for k1 (WAR) although it reads
	// nothing k1's threads wrote at other points.  Phases: k0 | k1 | k2 k3.
	// With b moved to bytes of its own the WAR is gone: k0 | k1 k2 k3.
	p = kir_program_new("reuse", DT_F32);
	x = vec(p, KB_IN, 0, PN);
	uint32_t a = vec(p, KB_TMP, 0, PN), r = vec(p, KB_TMP, 0, PN), b = vec(p, KB_TMP, 0, PN);
	o = vec(p, KB_OUT, 0, PN);
	i = kx_var(p, 0, PN);
	KxId rev = kx_iadd(p, kx_iconst(p, PN - 1), kx_imul(p, i, -1));
	pw_kernel(p, a, PN, kx_un(p, KX_EXP, kx_load(p, x, i)));
	pw_kernel(p, r, PN, kx_load(p, a, rev));
	pw_kernel(p, b, PN, kx_bin(p, KX_MUL, kx_load(p, r, i), kx_const(p, 2, DT_F32)));
	pw_kernel(p, o, PN, kx_bin(p, KX_ADD, kx_load(p, b, i), kx_load(p, r, i)));
	CHECK(phases_of(p) == 3);
	CHECK(p->buf[b].offset == p->buf[a].offset); // the plan reused a's bytes
	p->buf[b].offset = p->arena_bytes;
	p->arena_bytes += p->buf[b].bytes;
	CHECK(cg_cuda_phases(p) == 2);
	kir_program_free(p);

	// Independent kernels share a phase: a pointwise kernel and a sum of
	// another input, then each one's consumer on its own points.
	p = kir_program_new("independent", DT_F32);
	x = vec(p, KB_IN, 0, PN);
	uint32_t y = vec(p, KB_IN, 1, PN);
	t1 = vec(p, KB_TMP, 0, PN);
	s = vec(p, KB_TMP, 0, 1);
	o = vec(p, KB_OUT, 0, PN);
	o1 = vec(p, KB_OUT, 1, 1);
	i = kx_var(p, 0, PN), z = kx_iconst(p, 0);
	pw_kernel(p, t1, PN, kx_un(p, KX_EXP, kx_load(p, x, i)));
	sum_kernel(p, s, 1, PN, kx_load(p, y, i));
	pw_kernel(p, o, PN, kx_bin(p, KX_ADD, kx_load(p, t1, i), kx_const(p, 1, DT_F32)));
	pw_kernel(p, o1, 1, kx_bin(p, KX_MUL, kx_load(p, s, z), kx_const(p, 2, DT_F32)));
	CHECK(phases_of(p) == 1);
	kir_program_free(p);

	// A warp per point: 4 sums of 30 terms (a warp's shuffle each; point t
	// stored by lane 0 of warp t), read at their own points by a pointwise
	// kernel (thread t): a barrier.  A scalar sum of 30 terms is stored by
	// thread 0 (warp 0's lane 0), and its scalar reader is thread 0: none.
	p = kir_program_new("warp", DT_F32);
	x = vec(p, KB_IN, 0, 4 * 30);
	s = vec(p, KB_TMP, 0, 4);
	uint32_t s1 = vec(p, KB_TMP, 0, 1);
	o = vec(p, KB_OUT, 0, 4);
	o1 = vec(p, KB_OUT, 1, 1);
	i = kx_var(p, 0, 4);
	KxId r30 = kx_var(p, 1, 30), r0 = kx_var(p, 0, 30);
	sum_kernel(p, s1, 1, 30, kx_load(p, x, r0));
	pw_kernel(p, o1, 1, kx_bin(p, KX_MUL, kx_load(p, s1, kx_iconst(p, 0)), kx_const(p, 2, DT_F32)));
	sum_kernel(p, s, 4, 30, kx_load(p, x, kx_iadd(p, kx_imul(p, i, 30), r30)));
	pw_kernel(p, o, 4, kx_bin(p, KX_MUL, kx_load(p, s, i), kx_const(p, 3, DT_F32)));
	CHECK(fused_form(&p->k[0]) == 1 && fused_form(&p->k[2]) == 1);
	CHECK(phases_of(p) == 2);
	kir_program_free(p);

	// The block per point: a scalar sum of 4000 terms (shuffles, the
	// warps' results in shared memory, a barrier inside its function),
	// stored by thread 0, read by a scalar kernel on thread 0: one phase.
	p = kir_program_new("block", DT_F32);
	x = vec(p, KB_IN, 0, 4000);
	s = vec(p, KB_TMP, 0, 1);
	o1 = vec(p, KB_OUT, 0, 1);
	sum_kernel(p, s, 1, 4000, kx_load(p, x, kx_var(p, 0, 4000)));
	pw_kernel(p, o1, 1, kx_un(p, KX_EXP, kx_load(p, s, kx_iconst(p, 0))));
	CHECK(fused_form(&p->k[0]) == 2);
	CHECK(phases_of(p) == 1);
	kir_program_free(p);
}

int
main(int argc, char **argv) {
	int major = 0, minor = 0;
	CHECK(cg_cuda_nvrtc_version(&major, &minor));
	printf("NVRTC %d.%d\n", major, minor);
	if (argc > 1 && !strcmp(argv[1], "phases")) { // the hand-built programs only
		check_phases();
		return TU_DONE("test_codegen_cuda");
	}
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
	printf("%d block reductions, %d warp reductions (fused)\n", total_blockred, total_warp);
	printf("%d tasks, %d kernels: NVRTC %.2f s in all (cubins, and PTX of the forwards)\n",
	       total_tasks, total_kernels, total_s);
	check_broken();
	check_phases();
	return TU_DONE("test_codegen_cuda");
}
#endif
