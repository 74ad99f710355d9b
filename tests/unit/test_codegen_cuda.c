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
// NVRTC log and the blamed line in context on the diagnostics stream, and
// the whole source in the file that report names (`test_codegen_cuda
// broken` runs that check alone).  Without the CUDA toolkit (no
// FADC_HAVE_CUDA) everything but NVRTC still runs: the printer and the
// scheduler (codegen/cuda.c, cuda_sched.c) build everywhere, so the sources,
// launches, phases, forms and GEMM plans are checked on every machine; the
// compilations, the broken source's report and the artifacts (compiled
// with --target cuda) are left out.
//
// cuBLAS GEMMs (check_gemm_*): large contraction kernels of small programs
// become GEMM launch records whose M, N, K, transposes, leading dimensions
// and batch strides are compared with values derived by hand from the
// shapes; small tasks stay one fused launch; an artifact records
// --allow-tf32 (options line, each record) and `fadc inspect` shows it and
// the records; artifacts of formats 2 to 7 still load, 1 and 8 are
// refused by version.  Choices (check_gemm_plans' band, and
// check_choice_artifact): a contraction of 2^16 to 2^22 multiply-adds is a
// choice record, its printed kernel (a __global__ of the source, in the
// PTX) and its GEMM, writing the same output; format 6, round-tripped,
// damaged choices refused, shown by `fadc inspect`.
//
// digamma and trigamma (check_special; `test_codegen_cuda special` runs it
// alone): polygamma of order 0 and 1 prints calls of codegen/cuda_special.h's
// functions in the model's dtype, and that file's text, instead of
// fadc_polygamma; ppl_robust_reg's tasks call the float ones.
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <unistd.h>

#include "artifact.h"
#include "codegen_util.h"
#include "fadc.h"

static double
now(void) {
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int
count(const char *s, const char *pat);

// The kernels a multi launch (LA_MULTI: sums side by side, their
// epilogues) takes beyond its first, summed over src's launch comments
// ("// kernels A .. B: ...").
static int
multi_extra(const char *s) {
	int n = 0;
	for (const char *q = strstr(s, "\n// kernels "); q; q = strstr(q + 1, "\n// kernels ")) {
		unsigned a, b;
		if (sscanf(q, "\n// kernels %u .. %u:", &a, &b) == 2 && b > a)
			n += (int)(b - a);
	}
	return n;
}

// The sums a multi launch takes beyond its first, summed likewise ("S sums
// in one pass").
static int
multi_extra_sums(const char *s) {
	int n = 0;
	for (const char *q = strstr(s, "\n// kernels "); q; q = strstr(q + 1, "\n// kernels ")) {
		const char *e = strchr(q + 1, '\n'), *w = strstr(q, " sums in one pass");
		unsigned k;
		if (w && (!e || w < e)) {
			while (w > q && w[-1] != ' ')
				w--;
			if (sscanf(w, "%u", &k) == 1 && k > 1)
				n += (int)k - 1;
		}
	}
	return n;
}

// The kernel index of a launch's function name fadc_<task>_k<i>_<what>.
static uint32_t
name_kernel(const char *name) {
	const char *q = name ? strstr(name, "_k") : NULL;
	while (q && !(q[2] >= '0' && q[2] <= '9'))
		q = strstr(q + 1, "_k");
	return q ? (uint32_t)strtoul(q + 2, NULL, 10) : 0;
}

static int
count(const char *s, const char *pat) {
	int n = 0;
	for (const char *q = strstr(s, pat); q; q = strstr(q + 1, pat))
		n++;
	return n;
}

static double total_s;
static int total_kernels, total_tasks, total_blockred, total_warp, total_choices;

// The form of a reduction in a fused task (docs/CUDA.md): 0 a thread per
// point, 1 a warp per point, 2 the block per point, whichever has the
// fewest steps per thread (a term c, a shuffle step 4, a barrier 8), for
// a term of cost c (1: a load and an add; codegen's term_cost otherwise).
static int
fused_form_c(const KKernel *k, int64_t c) {
	int64_t n = 1, r = 1;
	for (int d = 0; d < k->rank; d++)
		n *= k->dim[d];
	for (int d = 0; d < k->rrank; d++)
		r *= k->rdim[d];
	if (!k->red || r <= 1 || n == 0)
		return 0;
	int64_t cost[3] = {(n + 255) / 256 * r * c, (n + 7) / 8 * ((r + 31) / 32 * c + 20),
	                   n * ((r + 255) / 256 * c + 48)};
	return cost[0] <= cost[1] && cost[0] <= cost[2] ? 0 : cost[1] <= cost[2] ? 1 : 2;
}

static int
fused_form(const KKernel *k) {
	return fused_form_c(k, 1);
}

static void
check_task(const Module *m, const char *model, const char *task, int with_ptx) {
	char err[4096] = "";
	int derived;
	KProgram *p = cgu_lower_task(m, task, DT_F32, &derived, err, sizeof err);
	CHECK(derived);
	if (derived)
		CHECK(p != NULL);
	if (!p) {
		fprintf(stderr, "%s %s: %s\n", model, task, err);
		return;
	}
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
	// cuBLAS GEMMs (large contractions) have no __global__ of their own.
	// A choice (a GEMM in the band) is three launch records: the choice,
	// the printed kernel (a __global__), the GEMM.
	uint32_t nl = cg_cuda_launches(p);
	int ngemm = 0, nchoice = 0;
	for (uint32_t li = 0; li < nl; li++) {
		CgCudaKernel k;
		CHECK(cg_cuda_kernel(p, li, &k));
		ngemm += k.gemm;
		nchoice += k.choice != 0;
		free(k.name);
		free(k.buf);
	}
	CHECK(count(src, "a cuBLAS GEMM") == ngemm);
	CHECK(count(src, "__global__") == (int)nl - ngemm - nchoice);
	total_choices += nchoice;
	// A fused task's barriers (one tab deep: the fused kernel's body) are
	// its phases less one (no loops in these models), at most one per kernel.
	// (A multi launch runs several kernels: cuda_multi_end.)
	uint32_t nph = cg_cuda_phases(p), extra = (uint32_t)multi_extra(src);
	CHECK(nl + extra == p->nk + 2 * (uint32_t)nchoice ||
	      (nl == 1 && p->nloop == 0 && nph >= 1 && nph <= p->nk &&
	                      count(src, "\n\t__syncthreads();\n") == (int)nph - 1 &&
	                      count(src, "static __device__ void") == (int)p->nk));
	CHECK((nl == 1 && p->nk > 1) == (nph > 0));
	// The ppl models are small: every task is one launch, its inputs
	// staged into shared memory before the first kernel (docs/CUDA.md).
	if (!strncmp(model, "ppl_", 4)) {
		CHECK(nl == 1);
		CHECK(p->nk < 2 || count(src, "\t__syncthreads(); // the inputs staged\n") == 1);
	}
	int nblockred = 0;
	for (uint32_t li = 0; li < nl; li++) {
		CgCudaKernel k;
		CHECK(cg_cuda_kernel(p, li, &k) && (k.gemm || strstr(src, k.name) != NULL));
		CHECK(nl > 1 || p->nk == 1 || k.grid == 1);
		// Not fused: a long reduction into few points (docs/CUDA.md: at least
		// 128 terms, at most 32768 points) is one block per point.
		if (nl + extra == p->nk && !k.gemm) {
			// A multi launch's form is its first kernel's (a sum).
			const KKernel *kk = &p->k[name_kernel(k.name)];
			int64_t nr = 1;
			for (int d = 0; d < kk->rrank; d++)
				nr *= kk->rdim[d];
			int want = kk->red && nr >= 128 && k.points <= 32768;
			// (An elementwise kernel in float4s, cuda_vec4, and a short
			// window reduction, cuda_vec4_red, have a grid of 4 points a
			// thread.)
			CHECK(want == (k.grid != 0) ||
			      ((!kk->red || nr <= 16) && k.points % 4 == 0 &&
			       k.grid == (k.points / 4 + 255) / 256));
			// Its grid (cuda_blockred_plan): a block per point, per tile of
			// 32 points (columns), or per chunk of either (split): the
			// printed kernel strides over as many work units.
			char units[64];
			snprintf(units, sizeof units, "w < %u; w += gridDim.x", k.grid);
			CHECK(!want || (k.grid <= 65535 && k.grid * 32 >= (k.points < 65535 ? k.points : 65535) &&
			                strstr(src, units) != NULL));
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
		int form = cg_cuda_fused_form(p, ki);
		CHECK(form >= 0 && form <= 2);
		nblockred += form == 2;
		nwarp += form == 1;
	}
	// Columns store every lane's result (no shuffle); a split row
	// reduction's last block folds the chunks' results with one more.
	int ncol = count(src, "red[rb][threadIdx.x >> 5][threadIdx.x & 31] = acc;") +
	           count(src, "red[rb][threadIdx.x >> 5][0 + (threadIdx.x & 31)] = acc;");
	int nsplit = count(src, "u ? __ldcg(&((const ");
	CHECK(count(src, "red[rb][threadIdx.x >> 5] = acc;") == nblockred - ncol);
	CHECK(count(src, "__shfl_down_sync") == 2 * (nblockred - ncol) + nsplit + nwarp);
	// tests/gpu/blockred.ir's forward holds every form of
	// cuda_blockred_plan: columns (c, d, g: 7 kernels), split rows (a, b's
	// partials, e, f) and split columns (c: 2 kernels, d: 4; chunks of at
	// least 32 terms), each split one taking a ticket; g's 1024 tiles are
	// not split.  Independent column sums of one plan run side by side,
	// one launch and one ticket (cuda_multi_end; c's two sums at least):
	// each takes one column launch and one ticket from those counts.
	if (strstr(model, "blockred") && !strcmp(task, "forward")) {
		int nticket = count(src, "atomicAdd(&fadc_red_tick[tile], 1u)");
		int xs = multi_extra_sums(src);
		CHECK(count(src, "// kernels 9 .. 10: sum, 40 points, 2 sums in one pass") == 1);
		CHECK(xs >= 1 && ncol + xs == 7);
		CHECK(nsplit >= 4);
		CHECK(nticket + xs == nsplit + 6);
		CHECK(strstr(src, "static __device__ unsigned int fadc_red_tick[") != NULL);
		// Rows in float4s (e and f: last extents 100 and 270000; the sum
		// of g's products, 32,768 terms), each with its aligned check and
		// its one-term fallback (opt-in).
		CHECK(count(src, "if ((0ULL | (unsigned long long)b") == (getenv("FADC_CUDA_VEC4") ? 4 : 0));
	}
	// Its vjp's broadcasts of the sums over e and d (last extents 100 and
	// 72) run 4 points a thread in float4s (cuda_vec4, on by default); a's
	// (70) do not.
	if (strstr(model, "blockred") && !strcmp(task, "vjp")) {
		CHECK(count(src, "float4 o;") >= 2);
		CHECK(count(src, "float4 o;") == count(src, "\tif (((unsigned long long)b"));
		CHECK(count(src, "*(float4 *)&b") == count(src, "float4 o;"));
	}
	// tests/gpu/window4.ir: its pools' short window reductions of at least
	// 2^18 points run 4 points a thread (cuda_vec4_red): the vjp's two
	// max_pool gradients over x, avg_pool's and c's maxima (f32: each with
	// its aligned check, one float4 store and the one-point loop), c's
	// argmax (i64: four stores); never xo's (last extent 590).
	if (strstr(model, "window4") && !strcmp(task, "vjp")) {
		int nlane = count(src, "const float acc = acc0;");
		CHECK(nlane >= 4);
		CHECK(count(src, "const long long acc = acc0;") >= 1);
		CHECK(count(src, "const float acc = acc3;") == nlane);
		CHECK(count(src, "\tif ((unsigned long long)b") == nlane);
		CHECK(strstr(src, "q < 66375;") == NULL); // xo's gradient (265,500 points): one point a thread
	}
	CHECK(count(src, "for (int t = threadIdx.x >> 5;") +
	          count(src, "for (int t = ((threadIdx.x >> 5) + ") ==
	      nwarp);
	total_blockred += nblockred;
	total_warp += nwarp;
	// ppl_robust_reg: digamma in its gradients, trigamma in its Hessians,
	// as codegen/cuda_special.h's float functions, never fadc_polygamma.
	if (!strcmp(model, "ppl_robust_reg")) {
		CHECK(strstr(src, "fadc_polygamma") == NULL);
		if (!strcmp(task, "vjp"))
			CHECK(strstr(src, " = fadc_digammaf(") != NULL);
		if (!strcmp(task, "hessian"))
			CHECK(strstr(src, " = fadc_trigammaf(") != NULL);
	}
	uint8_t *cubin = NULL, *ptx = NULL;
	size_t ncubin = 0, nptx = 0;
	double t0 = now(), t1 = t0, t2 = t0;
#ifdef FADC_HAVE_CUDA
	char name[256];
	snprintf(name, sizeof name, "%s_%s.cu", model, task);
	int ok = cg_cuda_compile(src, name, "sm_90", &cubin, &ncubin, stderr, err, sizeof err);
	t1 = now();
	CHECK(ok && cubin != NULL && ncubin > 0);
	if (!ok)
		fprintf(stderr, "%s %s: %s\n", model, task, err);
	// A cubin is an ELF file.
	CHECK(ok && ncubin > 4 && !memcmp(cubin, "\177ELF", 4));
	t2 = t1;
	if (with_ptx) {
		ok = cg_cuda_compile(src, name, "compute_90", &ptx, &nptx, stderr, err, sizeof err);
		t2 = now();
		CHECK(ok && ptx != NULL && nptx > 0);
		if (!ok)
			fprintf(stderr, "%s %s: %s\n", model, task, err);
		CHECK(ok && strstr((const char *)ptx, ".target sm_90") != NULL);
		CHECK(ok && count((const char *)ptx, ".entry") == (int)nl - ngemm);
		// One compilation for sm_90 (cg_cuda_compile_both, what an
		// artifact uses): the same cubin and the same PTX, byte for byte,
		// as the two compilations above.
		uint8_t *c2 = NULL, *p2 = NULL;
		size_t nc2 = 0, np2 = 0;
		CHECK(cg_cuda_compile_both(src, name, "sm_90", &c2, &nc2, &p2, &np2, stderr, err,
		                           sizeof err));
		CHECK(ok && nc2 == ncubin && c2 && !memcmp(c2, cubin, ncubin));
		CHECK(ok && np2 == nptx && p2 && !memcmp(p2, ptx, nptx));
		free(c2);
		free(p2);
	}
#else
	(void)with_ptx;
#endif
	printf("%-16s %-16s %3u kernels %3u phases %3u launches (%2d GEMMs)  source %6zu B  cubin "
	       "%7zu B (%.0f ms)  ptx %7zu B (%.0f ms)\n",
	       model, task, p->nk, nph, nl, ngemm, n1, ncubin, 1e3 * (t1 - t0), nptx,
	       1e3 * (t2 - t1));
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

#ifdef FADC_HAVE_CUDA
// A compilation error: the log and the blamed line in context on diag,
// the whole source in $TMPDIR/fadc-nvrtc-NAME (named there), not on diag.
static void
check_broken(void) {
	// Filler to line 40, the error on line 44: lines 41 to 46 (the last)
	// are its context.
	char bad[4096] = "extern \"C\" __global__ void\n";
	for (int i = 2; i <= 40; i++)
		snprintf(bad + strlen(bad), sizeof bad - strlen(bad), "// filler line %d\n", i);
	strcat(bad, "fadc_broken(float *b0)\n"
	            "{\n"
	            "\tint unused = 0;\n"
	            "\tb0[0] = no_such_value;\n"
	            "\t(void)unused;\n"
	            "}\n");
	char dir[] = "/tmp/fadc-test-nvrtc.XXXXXX";
	CHECK(mkdtemp(dir) != NULL);
	const char *old = getenv("TMPDIR");
	char *saved_tmp = old ? strdup(old) : NULL;
	setenv("TMPDIR", dir, 1);
	FILE *diag = tmpfile();
	CHECK(diag != NULL);
	if (!diag)
		return;
	uint8_t *out = (uint8_t *)1;
	size_t n = 1;
	char err[4096] = "";
	int ok = cg_cuda_compile(bad, "broken/x.cu", "sm_90", &out, &n, diag, err, sizeof err);
	CHECK(!ok && out == NULL && n == 0);
	CHECK(strstr(err, "nvrtcCompileProgram") != NULL);
	CHECK(strstr(err, "NVRTC_ERROR_COMPILATION") != NULL);
	char text[8192];
	rewind(diag);
	size_t k = fread(text, 1, sizeof text - 1, diag);
	text[k] = 0;
	fclose(diag);
	CHECK(strstr(text, "no_such_value") != NULL);                    // NVRTC's log names it
	CHECK(strstr(text, "broken/x.cu(44)") != NULL);                  // at line 44
	CHECK(strstr(text, "broken/x.cu:44:\n") != NULL);                // the context's heading
	CHECK(strstr(text, ">   44 | \tb0[0] = no_such_value;") != NULL); // the line, marked
	CHECK(strstr(text, "    41 | fadc_broken(float *b0)") != NULL);  // 3 lines before
	CHECK(strstr(text, "    46 | }") != NULL);                       // to the end
	CHECK(strstr(text, "filler line 40") == NULL);                   // and no more
	CHECK(strstr(text, "extern \"C\"") == NULL);
	// The whole source, in a file named by the report ('/' made '_').
	char path[256];
	snprintf(path, sizeof path, "%s/fadc-nvrtc-broken_x.cu", dir);
	char named[300];
	snprintf(named, sizeof named, "the whole generated source (%zu bytes): %s\n", strlen(bad), path);
	CHECK(strstr(text, named) != NULL);
	FILE *f = fopen(path, "rb");
	CHECK(f != NULL);
	if (f) {
		char got[4096];
		size_t m = fread(got, 1, sizeof got, f);
		fclose(f);
		CHECK(m == strlen(bad) && !memcmp(got, bad, m));
		unlink(path);
	}
	rmdir(dir);
	if (saved_tmp)
		setenv("TMPDIR", saved_tmp, 1);
	else
		unsetenv("TMPDIR");
	free(saved_tmp);
	// An unknown architecture is refused before NVRTC runs.
	ok = cg_cuda_compile(bad, "broken.cu", "volta", &out, &n, stderr, err, sizeof err);
	CHECK(!ok && strstr(err, "volta") != NULL);
}
#endif

// ---------------------------------------------------------------- cuBLAS GEMMs

static Module *
parse(const char *text) {
	return cgu_parse("gemmtest.ir", text);
}

// Task `task` of text, lowered and planned as codegen/compile.c does.
static KProgram *
lower(const char *text, const char *task) {
	Module *m = parse(text);
	if (!m)
		return NULL;
	char msg[1024] = "";
	int derived;
	KProgram *p = cgu_lower_task(m, task, DT_F32, &derived, msg, sizeof msg);
	CHECK(derived);
	CHECK(p != NULL);
	if (!p)
		fprintf(stderr, "gemm test %s: %s\n", task, msg);
	ir_module_free(m);
	return p;
}

// The choices of the last gemm_launches: choice records, each followed by
// its printed kernel and its GEMM.
static int last_choices;

// The GEMM launches of p (at most max) into g, their contracts' buffers
// into buf[3 * i ..]; *nl the launches; also checks each GEMM's contract
// (name, points), that the printed source has a __global__ for each kernel
// launch and none for a GEMM, and each choice record: no buffers, two
// candidates, the printed kernel (its __global__ in the source) then the
// GEMM, both writing the same buffer.
static int
gemm_launches(const KProgram *p, KGemmPlan *g, uint32_t *buf, int max, uint32_t *nl) {
	int n = 0, nkern = 0;
	char err[512];
	char *src = cg_cuda_print(p, NULL, err, sizeof err);
	CHECK(src != NULL);
	*nl = cg_cuda_launches(p);
	last_choices = 0;
	for (uint32_t li = 0; li < *nl; li++) {
		CgCudaKernel k;
		CHECK(cg_cuda_kernel(p, li, &k));
		nkern += !k.gemm && !k.choice && !k.host && !k.seq && !k.conv;
		CgCudaKernel sq = {0};
		if (k.choice && li + 1 < *nl && cg_cuda_kernel(p, li + 1, &sq) && sq.seq) {
			// A convolution's choice (docs/CUDA.md, "cuDNN convolutions"): its
			// launches as a sequence, then the cuDNN record, writing the same
			// buffer; the members are counted as launches of their own below.
			CgCudaKernel last = {0}, cv = {0};
			uint32_t e = li + 1 + (uint32_t)sq.seq;
			CHECK(e + 1 < *nl && cg_cuda_kernel(p, e, &last) && cg_cuda_kernel(p, e + 1, &cv));
			CHECK(cv.conv && cv.narg == 3 && last.narg >= 1 && cv.buf[0] == last.buf[0]);
			free(last.name);
			free(last.buf);
			free(cv.name);
			free(cv.buf);
		} else if (k.choice) {
			CgCudaKernel a, b;
			CHECK(k.choice == 2 && k.narg == 0 && k.points == 2 && !k.gemm && li + 2 < *nl);
			CHECK_STR(k.name, "choice");
			CHECK(li + 2 < *nl && cg_cuda_kernel(p, li + 1, &a) && cg_cuda_kernel(p, li + 2, &b));
			if (li + 2 < *nl) {
				CHECK(!a.gemm && !a.choice && !a.host && b.gemm && a.narg >= 1 &&
				      a.buf[0] == b.buf[0] && b.g.cbuf == b.buf[0]);
				char decl[512];
				snprintf(decl, sizeof decl, "__global__ void\n%s(", a.name);
				CHECK(src && strstr(src, decl) != NULL);
				free(a.name);
				free(a.buf);
				free(b.name);
				free(b.buf);
			}
			last_choices++;
		}
		if (k.gemm && n < max) {
			g[n] = k.g;
			CHECK(k.narg == 3 && k.grid == 0 && !k.runseed && !k.host);
			CHECK(k.points == k.g.batch * k.g.M * k.g.N);
			CHECK_STR(k.name, k.g.dt == DT_F64 ? "cublasDgemmStridedBatched"
			                                   : "cublasSgemmStridedBatched");
			memcpy(buf + 3 * n, k.buf, 3 * sizeof *buf);
			n++;
		}
		free(k.name);
		free(k.buf);
		free(sq.name);
		free(sq.buf);
	}
	CHECK(src && count(src, "__global__") == nkern);
	free(src);
	return n;
}

// Every field of a plan against the expected values, in one line on failure.
static void
expect_plan(const KGemmPlan *g, int64_t batch, int64_t M, int64_t N, int64_t K, int ta, int tb,
            int64_t lda, int64_t ldb, int64_t ldc, int64_t sa, int64_t sb, int64_t sc) {
	int ok = g->batch == batch && g->M == M && g->N == N && g->K == K && g->ta == ta &&
	         g->tb == tb && g->lda == lda && g->ldb == ldb && g->ldc == ldc && g->sa == sa &&
	         g->sb == sb && g->sc == sc && !g->oa && !g->ob && !g->oc;
	CHECK(ok);
	if (!ok)
		fprintf(stderr,
		        "  got batch %lld M %lld N %lld K %lld ta %d tb %d lda %lld ldb %lld ldc %lld "
		        "sa %lld sb %lld sc %lld oa %lld ob %lld oc %lld\n",
		        (long long)g->batch, (long long)g->M, (long long)g->N, (long long)g->K, g->ta,
		        g->tb, (long long)g->lda, (long long)g->ldb, (long long)g->ldc,
		        (long long)g->sa, (long long)g->sb, (long long)g->sc, (long long)g->oa,
		        (long long)g->ob, (long long)g->oc);
}

static int
same_shape(const KBuf *b, int rank, const int64_t *dim) {
	return b->shape.rank == rank && !memcmp(b->shape.dim, dim, sizeof(int64_t) * rank);
}

static void
check_gemm_plans(void) {
	KGemmPlan g[8];
	uint32_t buf[24], nl;
	// x[4, 32, 256] @ w[256, 128]: the batch and row axes of x merge into
	// M = 4 * 32 rows (w does not move along them): one plain GEMM, every
	// operand row-major: lda = K = 256, ldb = ldc = N = 128.
	KProgram *p = lower("param x: f32[4, 32, 256] = normal(0, 1, seed=1)\n"
	                    "param w: f32[256, 128] = normal(0, 1, seed=2)\n"
	                    "def forward() -> f32[] {\n  y = x @ w\n  return sum(y * y)\n}\n",
	                    "forward");
	if (p) {
		CHECK(gemm_launches(p, g, buf, 8, &nl) == 1);
		expect_plan(&g[0], 1, 128, 128, 256, 0, 0, 256, 128, 128, 0, 0, 0);
		CHECK(g[0].dt == DT_F32 && g[0].cbuf == buf[0] && g[0].abuf == buf[1] &&
		      g[0].bbuf == buf[2]);
		CHECK(same_shape(&p->buf[buf[1]], 3, (int64_t[]){4, 32, 256}));
		CHECK(same_shape(&p->buf[buf[2]], 2, (int64_t[]){256, 128}));
		kir_program_free(p);
	}
	// q[8, 128, 64] @ k[8, 64, 128]: batched, 8 products 128 x 128 x 64;
	// batch strides 128 * 64 (q), 64 * 128 (k) and 128 * 128 (C).
	p = lower("param q: f32[8, 128, 64] = normal(0, 1, seed=1)\n"
	          "param k: f32[8, 64, 128] = normal(0, 1, seed=2)\n"
	          "def forward() -> f32[] {\n  return sum(q @ k)\n}\n",
	          "forward");
	if (p) {
		CHECK(gemm_launches(p, g, buf, 8, &nl) == 1);
		expect_plan(&g[0], 8, 128, 128, 64, 0, 0, 64, 128, 128, 8192, 8192, 16384);
		kir_program_free(p);
	}
	// transpose(a) @ b, a[512, 64]: A(i, k) = a[k, i] at k 64 + i, a
	// transposed operand (ta = 1) of leading dimension 64 = M.
	p = lower("param a: f32[512, 64] = normal(0, 1, seed=1)\n"
	          "param b: f32[512, 256] = normal(0, 1, seed=2)\n"
	          "def forward() -> f32[] {\n  return sum(transpose(a, 0, 1) @ b)\n}\n",
	          "forward");
	if (p) {
		CHECK(gemm_launches(p, g, buf, 8, &nl) == 1);
		expect_plan(&g[0], 1, 64, 256, 512, 1, 0, 64, 256, 256, 0, 0, 0);
		kir_program_free(p);
	}
	// f64: cublasDgemmStridedBatched (checked in gemm_launches).
	p = lower("param a: f64[64, 128] = normal(0, 1, seed=1)\n"
	          "param b: f64[128, 64] = normal(0, 1, seed=2)\n"
	          "def forward() -> f64[] {\n  return sum(a @ b)\n}\n",
	          "forward");
	if (p) {
		CHECK(gemm_launches(p, g, buf, 8, &nl) == 1 && g[0].dt == DT_F64);
		expect_plan(&g[0], 1, 64, 64, 128, 0, 0, 128, 64, 64, 0, 0, 0);
		kir_program_free(p);
	}
	// The band (docs/CUDA.md, "Choices measured on the GPU"): a[rows, 64]
	// @ b[64, cols].  64 x 64 x 16 = 2^16 multiply-adds is a choice (a
	// choice record, the printed kernel, the GEMM: two launches more than
	// kernels), 63 x 64 x 16 a printed kernel alone; 63 x 64 x 1024 is a
	// choice, 64 x 64 x 1024 = 2^22 a GEMM alone; z keeps the tasks from
	// fusing.
	static const char thr[] = "param a: f32[%d, 64] = normal(0, 1, seed=1)\n"
	                          "param b: f32[64, %d] = normal(0, 1, seed=2)\n"
	                          "param z: f32[300000] = normal(0, 1, seed=3)\n"
	                          "def forward() -> f32[] {\n  return sum(a @ b) + sum(z * z)\n}\n";
	static const struct {
		int rows, cols, gemms, choices;
	} band[] = {{63, 16, 0, 0}, {64, 16, 1, 1}, {63, 1024, 1, 1}, {64, 1024, 1, 0}};
	for (size_t i = 0; i < sizeof band / sizeof band[0]; i++) {
		char text[512];
		snprintf(text, sizeof text, thr, band[i].rows, band[i].cols);
		p = lower(text, "forward");
		if (p) {
			CHECK(gemm_launches(p, g, buf, 8, &nl) == band[i].gemms);
			CHECK(last_choices == band[i].choices);
			CHECK(nl == p->nk + 2 * (uint32_t)band[i].choices);
			if (band[i].gemms)
				expect_plan(&g[0], 1, band[i].rows, band[i].cols, 64, 0, 0, 64, band[i].cols,
				            band[i].cols, 0, 0, 0);
			if (last_choices != band[i].choices)
				fprintf(stderr, "  a[%d, 64] @ b[64, %d]: %d choices\n", band[i].rows,
				        band[i].cols, last_choices);
			kir_program_free(p);
		}
	}
	// A small task stays one fused launch, its matmul included.
	p = lower("param a: f32[16, 16] = normal(0, 1, seed=1)\n"
	          "param b: f32[16, 16] = normal(0, 1, seed=2)\n"
	          "def forward() -> f32[] {\n  return sum(a @ b)\n}\n",
	          "forward");
	if (p) {
		CHECK(gemm_launches(p, g, buf, 8, &nl) == 0 && nl == 1);
		kir_program_free(p);
	}
	// A convolution as im2col + GEMM: out[n, co, p] = sum_q w[co, q]
	// col[n, q, p] with Q = 32 * 3 * 3 = 288 and P = 16 * 16 = 256: 4
	// batches of 64 x 256 x 288, w shared (sa = 0), col and the output
	// strided by Q P = 73728 and Co P = 16384.  Its vjp: the input's
	// gradient dcol[n, q, p] = sum_co w[co, q] g[n, co, p] reads w
	// transposed (w(q, co) at co Q + q: ta = 1, lda = Q = 288) and g in
	// place (ldb = P = 256), 4 batches of 288 x 256 x 64, batch strides
	// 0, Co P, Q P.  The weight's gradient dw[co, q] = sum_{n, p} g[n, co, p]
	// colT[n, p, q] reads g transposed to gT[co, n, p] (g's n stride is
	// Co P, gT's is P), so n and p merge into K = N P = 1024 for both
	// operands (gT's stride 1, colT's Q): one GEMM of M = Co = 64 rows and
	// N = Q = 288 columns, A = gT row-major (lda = N P = 1024), B = colT
	// row-major (ldb = Q = 288), ldc = Q, no batch.
	static const char conv[] = "param img: f32[4, 32, 16, 16] = normal(0, 1, seed=1)\n"
	                           "param cw: f32[64, 32, 3, 3] = normal(0, 0.06, seed=2)\n"
	                           "def forward() -> f32[] {\n"
	                           "  c = conv2d(img, cw, padding=1)\n"
	                           "  return sum(c * c)\n}\n";
	p = lower(conv, "forward");
	if (p) {
		CHECK(gemm_launches(p, g, buf, 8, &nl) == 1);
		expect_plan(&g[0], 4, 64, 256, 288, 0, 0, 288, 256, 256, 0, 73728, 16384);
		CHECK(p->buf[g[0].bbuf].kind == KB_TMP); // the im2col columns
		kir_program_free(p);
	}
	p = lower(conv, "vjp");
	if (p) {
		int n = gemm_launches(p, g, buf, 8, &nl), input_grad = 0, wgrad = 0, wgrad_kernel = 0;
		for (int i = 0; i < n; i++)
			if (g[i].ta == 1) {
				expect_plan(&g[i], 4, 288, 256, 64, 1, 0, 288, 256, 256, 0, 16384, 73728);
				input_grad++;
			} else if (g[i].batch == 1) {
				expect_plan(&g[i], 1, 64, 288, 1024, 0, 0, 1024, 288, 288, 0, 0, 0);
				CHECK(same_shape(&p->buf[g[i].cbuf], 4, (int64_t[]){64, 32, 3, 3}));
				CHECK(p->buf[g[i].abuf].kind == KB_TMP &&
				      same_shape(&p->buf[g[i].abuf], 3, (int64_t[]){64, 4, 256}));
				CHECK(p->buf[g[i].bbuf].kind == KB_TMP &&
				      same_shape(&p->buf[g[i].bbuf], 3, (int64_t[]){4, 256, 288}));
				wgrad++;
			}
		for (uint32_t li = 0; li < nl; li++) {
			CgCudaKernel k;
			CHECK(cg_cuda_kernel(p, li, &k));
			wgrad_kernel += !k.gemm && strstr(k.name, "conv_weight_grad_gemm") != NULL;
			free(k.name);
			free(k.buf);
		}
		CHECK(input_grad == 1 && wgrad == 1 && wgrad_kernel == 0);
		kir_program_free(p);
	}
}

// This test's directory (the build's bin/, where fadc is too).
static void
bin_dir(char *dir, size_t n) {
	ssize_t k = readlink("/proc/self/exe", dir, n - 1);
	dir[k > 0 ? k : 0] = 0;
	char *slash = strrchr(dir, '/');
	if (slash)
		*slash = 0;
	else
		snprintf(dir, n, ".");
}

// path's artifact again with its descriptor re-encoded in format `dver`
// and a trailer saying format `tver`, written to out; 0 if the descriptor
// cannot be written in that format.
static int
rewrite_format(const char *path, const char *out, uint32_t dver, uint32_t tver) {
	size_t n = 0, dlen = 0;
	uint8_t *b = tu_slurp(path, &n), *db = NULL, *enc = NULL;
	ArtDesc d;
	char err[512];
	int ok = 0;
	if (!b || art_read(path, &d, &db, &dlen, err, sizeof err) != ART_READ_OK)
		goto done;
	size_t body = n - ART_TRAILER_SIZE - dlen, elen = 0; // library and images
	d.version = dver;
	if (art_desc_encode(&d, &enc, &elen)) {
		uint8_t *f = malloc(body + elen + ART_TRAILER_SIZE);
		memcpy(f, b, body);
		memcpy(f + body, enc, elen);
		uint8_t *t = f + body + elen;
		art_trailer_make(t, tver, body + elen, elen, art_crc32(0, f, body + elen));
		t[8] = (uint8_t)tver;
		uint32_t tc = art_crc32(0, t, 36);
		for (int i = 0; i < 4; i++)
			t[36 + i] = (uint8_t)(tc >> (8 * i));
		FILE *o = fopen(out, "wb");
		ok = o && fwrite(f, 1, body + elen + ART_TRAILER_SIZE, o) == body + elen + ART_TRAILER_SIZE;
		if (o)
			fclose(o);
		free(f);
	}
	art_desc_free(&d);
done:
	free(b);
	free(db);
	free(enc);
	return ok;
}

static int
describe_opens(const char *path) {
	fadc_context *ctx;
	fadc_model *m = NULL;
	if (fadc_context_create(NULL, &ctx))
		return 0;
	int ok = fadc_model_open(ctx, path, FADC_OPEN_DESCRIBE, &m) == FADC_OK;
	if (m)
		fadc_model_close(m);
	fadc_context_destroy(ctx);
	return ok;
}

static void
check_gemm_artifact(void) {
	static const char text[] = "param q: f32[8, 128, 64] = normal(0, 1, seed=1)\n"
	                           "param k: f32[8, 64, 128] = normal(0, 1, seed=2)\n"
	                           "def forward() -> f32[] {\n  return sum(q @ k)\n}\n";
	Module *m = parse(text);
	if (!m)
		return;
	const char *tmp = getenv("TMPDIR");
	char dir[4096], so[4200], so32[4200], cpu[4200], old[4200], cmd[8600], err[4096];
	snprintf(dir, sizeof dir, "%s/fadc_gemm_XXXXXX", tmp && *tmp ? tmp : "/tmp");
	CHECK(mkdtemp(dir) != NULL);
	snprintf(so, sizeof so, "%s/g.so", dir);
	snprintf(so32, sizeof so32, "%s/g32.so", dir);
	snprintf(cpu, sizeof cpu, "%s/cpu.so", dir);
	snprintf(old, sizeof old, "%s/old.so", dir);
	static const char *const fwd[] = {"forward"};
	// One CPU level: the oldest formats (the GEMM's x86-64-v4 code would
	// make them 11, docs/ARTIFACT.md "CPU levels").
	CgOptions o = {.tasks = fwd,
	               .ntasks = 1,
	               .opt_level = 1,
	               .cpu = "x86-64-v3",
	               .targets = CG_TARGET_CPU | CG_TARGET_CUDA,
	               .allow_tf32 = 1};
	CHECK(cg_compile_module(m, &o, so, err, sizeof err));
	o.allow_tf32 = 0;
	CHECK(cg_compile_module(m, &o, so32, err, sizeof err));
	o.targets = CG_TARGET_CPU;
	o.allow_tf32 = 1;
	CHECK(!cg_compile_module(m, &o, cpu, err, sizeof err) && strstr(err, "--allow-tf32"));
	CHECK(access(cpu, F_OK) != 0);
	o.allow_tf32 = 0;
	CHECK(cg_compile_module(m, &o, cpu, err, sizeof err));
	ir_module_free(m);
	// The records, the options line.
	for (int tf = 0; tf < 2; tf++) {
		ArtDesc d;
		uint8_t *db = NULL;
		size_t dl = 0;
		CHECK(art_read(tf ? so : so32, &d, &db, &dl, err, sizeof err) == ART_READ_OK);
		free(db);
		CHECK(d.version == 4); // the oldest format that holds a GEMM record
		CHECK((strstr(d.options, " allow_tf32=1") != NULL) == tf);
		int ng = 0;
		for (uint32_t t = 0; t < d.ntask; t++)
			for (uint32_t i = 0; i < d.task[t].ncuda; i++) {
				const ArtKernel *kk = &d.task[t].kern[i];
				if (kk->kind != ART_LAUNCH_GEMM)
					continue;
				const ArtGemm *g = &kk->gemm;
				ng++;
				CHECK(g->dtype == ART_F32 && g->tf32 == tf && g->batch == 8 && g->m == 128 &&
				      g->n == 128 && g->k == 64 && !g->ta && !g->tb && g->lda == 64 &&
				      g->ldb == 128 && g->ldc == 128 && g->sa == 8192 && g->sb == 8192 &&
				      g->sc == 16384);
				CHECK(kk->narg == 3 && kk->arg[0].kind != ART_ARG_INPUT &&
				      kk->arg[1].kind == ART_ARG_INPUT && kk->arg[1].bytes == 4 * 8 * 128 * 64);
			}
		CHECK(ng == 1);
		art_desc_free(&d);
	}
	// fadc inspect: the options line, the launch count with the GEMMs apart,
	// the record.
	char bin[4096];
	bin_dir(bin, sizeof bin);
	snprintf(cmd, sizeof cmd, "'%s/fadc' inspect '%s'", bin, so);
	FILE *f = popen(cmd, "r");
	char out[16384] = "";
	size_t got = f ? fread(out, 1, sizeof out - 1, f) : 0;
	out[got] = 0;
	CHECK(f && pclose(f) == 0);
	CHECK(strstr(out, "options target=cpu,cuda cuda_arch=sm_90 allow_tf32=1 cpu=") != NULL);
	// (3: the GEMM, then the sum of its 131072 terms as partial sums and
	// their sum, kir_split_reductions)
	CHECK(strstr(out, "  cuda: 3 launches (2 kernels or host steps, 1 cuBLAS GEMM, TF32 allowed)\n"));
	CHECK(strstr(out, "  gemm 0: f32 batch=8 M=128 N=128 K=64 ta=0 tb=0 lda=64 ldb=128 ldc=128 "
	                  "sa=8192 sb=8192 sc=16384 oa=0 ob=0 oc=0 tf32\n") != NULL);
	if (!strstr(out, "cuBLAS GEMM"))
		fprintf(stderr, "fadc inspect said:\n%s", out);
	// Old formats: the CPU artifact's descriptor in formats 2 to
	// ART_FORMAT_VERSION reads and opens; format 1 and the next are refused
	// by version; a trailer that
	// disagrees with its descriptor is corrupt; a GEMM record cannot be
	// written in format 3.
	ArtDesc d;
	uint8_t *db = NULL;
	size_t dl = 0;
	for (uint32_t v = 2; v <= ART_FORMAT_VERSION; v++) {
		CHECK(rewrite_format(cpu, old, v, v));
		CHECK(art_read(old, &d, &db, &dl, err, sizeof err) == ART_READ_OK && d.version == v);
		if (d.version == v)
			art_desc_free(&d);
		free(db);
		db = NULL;
		CHECK(describe_opens(old));
	}
	CHECK(rewrite_format(cpu, old, 3, 4));
	CHECK(art_read(old, &d, &db, &dl, err, sizeof err) == ART_READ_FORMAT &&
	      strstr(err, "the trailer says format 4, the descriptor 3"));
	const uint32_t next = ART_FORMAT_VERSION + 1;
	char refused[128];
	snprintf(refused, sizeof refused, "artifact format version %u; this runtime reads versions 2 to %d",
	         next, ART_FORMAT_VERSION);
	CHECK(!rewrite_format(cpu, old, 1, 1) && !rewrite_format(cpu, old, next, next));
	CHECK(rewrite_format(cpu, old, 4, next));
	CHECK(art_read(old, &d, &db, &dl, err, sizeof err) == ART_READ_VERSION &&
	      strstr(err, refused));
	CHECK(!rewrite_format(so, old, 3, 3)); // GEMM records need format 4
	CHECK(rewrite_format(so, old, 4, 4) &&
	      art_read(old, &d, &db, &dl, err, sizeof err) == ART_READ_OK);
	art_desc_free(&d);
	free(db);
	unlink(so);
	unlink(so32);
	unlink(cpu);
	unlink(old);
	rmdir(dir);
}

// A borderline GEMM (docs/CUDA.md, "Choices measured on the GPU"): x[64,
// 256] @ w[256, 64] is 2^20 multiply-adds, inside the band, so forward has
// a choice record, its printed kernel (in the PTX) and its GEMM; the
// artifact is format 6 (5 and older cannot hold it), round-trips through
// the encoder, a damaged choice is refused, fadc_task_info counts one
// launch for the three records, and `fadc inspect` shows the choice.
static void
check_choice_artifact(void) {
	static const char text[] = "const x: f32[64, 256] = normal(0, 1, seed=1)\n"
	                           "param w: f32[256, 64] = normal(0, 0.06, seed=2)\n"
	                           "param z: f32[300000] = normal(0, 1, seed=3)\n"
	                           "def forward() -> f32[] {\n"
	                           "  return sum(tanh(x @ w)) + sum(z * z)\n}\n";
	Module *m = parse(text);
	if (!m)
		return;
	const char *tmp = getenv("TMPDIR");
	char dir[4096], so[4200], old[4200], cmd[8600], err[4096];
	snprintf(dir, sizeof dir, "%s/fadc_choice_XXXXXX", tmp && *tmp ? tmp : "/tmp");
	CHECK(mkdtemp(dir) != NULL);
	snprintf(so, sizeof so, "%s/c.so", dir);
	snprintf(old, sizeof old, "%s/old.so", dir);
	static const char *const fwd[] = {"forward"};
	CgOptions o = {.tasks = fwd, .ntasks = 1, .opt_level = 1, .cpu = "x86-64-v3", // format 6
	               .targets = CG_TARGET_CPU | CG_TARGET_CUDA};
	CHECK(cg_compile_module(m, &o, so, err, sizeof err));
	ir_module_free(m);
	ArtDesc d;
	uint8_t *db = NULL;
	size_t dl = 0;
	if (art_read(so, &d, &db, &dl, err, sizeof err) != ART_READ_OK) {
		CHECK(!"the choice artifact reads");
		fprintf(stderr, "%s\n", err);
		return;
	}
	CHECK(d.version == 6);
	const ArtTask *t = &d.task[0];
	uint32_t ncuda = t->ncuda;
	CHECK_STR(t->name, "forward");
	uint32_t at = 0, nchoice = 0;
	for (uint32_t k = 0; k < t->ncuda; k++)
		if (t->kern[k].kind == ART_LAUNCH_CHOICE) {
			at = k;
			nchoice++;
		}
	CHECK(nchoice == 1 && at + 2 < t->ncuda);
	if (nchoice == 1 && at + 2 < t->ncuda) {
		const ArtKernel *c = &t->kern[at], *a = &t->kern[at + 1], *b = &t->kern[at + 2];
		CHECK_STR(c->name, "choice");
		CHECK(c->points == 2 && c->narg == 0 && !c->grid && !c->runseed);
		CHECK(a->kind == ART_LAUNCH_KERNEL && b->kind == ART_LAUNCH_GEMM);
		CHECK(a->narg >= 2 && b->narg == 3 && a->arg[0].kind == b->arg[0].kind &&
		      a->arg[0].index == b->arg[0].index && a->arg[0].offset == b->arg[0].offset &&
		      a->arg[0].bytes == b->arg[0].bytes && a->arg[0].bytes == 4 * 64 * 64);
		const ArtGemm *g = &b->gemm;
		CHECK(g->dtype == ART_F32 && g->batch == 1 && g->m == 64 && g->n == 64 && g->k == 256 &&
		      !g->ta && !g->tb && g->lda == 256 && g->ldb == 64 && g->ldc == 64 && !g->tf32);
		// The candidate kernel's code is in the module (its PTX names it).
		CHECK(strstr((const char *)d.images + t->module[a->module].ptx_off, a->name) != NULL);
	}
	// The encoder writes the same bytes; every truncation is refused.
	uint8_t *enc = NULL;
	size_t elen = 0;
	d.version = 0;
	CHECK(art_desc_encode(&d, &enc, &elen) && elen == dl && !memcmp(enc, db, dl));
	free(enc);
	for (size_t cut = 0; cut < dl; cut += 7) {
		ArtDesc e;
		uint8_t *c = malloc(cut ? cut : 1);
		memcpy(c, db, cut);
		int ok = art_desc_decode(c, cut, &e, err, sizeof err);
		CHECK(!ok);
		if (ok)
			art_desc_free(&e);
		free(c);
	}
	// Damaged choices: a third candidate that is not there, candidates
	// writing different outputs, format 5.
	if (nchoice == 1 && at + 2 < t->ncuda) {
		ArtKernel *c = &d.task[0].kern[at], *a = &d.task[0].kern[at + 1];
		for (int damage = 0; damage < 2; damage++) {
			ArtDesc e;
			if (damage == 0)
				c->points = t->ncuda - at;
			else
				a->arg[0].bytes -= 4;
			CHECK(art_desc_encode(&d, &enc, &elen));
			CHECK(!art_desc_decode(enc, elen, &e, err, sizeof err) &&
			      strstr(err, "choice record"));
			free(enc);
			if (damage == 0)
				c->points = 2;
			else
				a->arg[0].bytes += 4;
		}
		d.version = 5;
		CHECK(!art_desc_encode(&d, &enc, &elen));
	}
	art_desc_free(&d);
	free(db);
	CHECK(!rewrite_format(so, old, 5, 5) && rewrite_format(so, old, 6, 6));
	// The runtime's view: the three records are one launch and one choice.
	fadc_context *ctx;
	fadc_model *fm = NULL;
	CHECK(fadc_context_create(NULL, &ctx) == FADC_OK);
	CHECK(fadc_model_open(ctx, so, 0, &fm) == FADC_OK);
	if (fm) {
		fadc_task_info info;
		CHECK(fadc_task_info_get(fm, 0, &info) == FADC_OK);
		CHECK(info.cuda_choices == 1 && info.cuda_launches == (int)ncuda - 2);
		fadc_tensor *out[1] = {NULL};
		CHECK(fadc_run(fm, 0, NULL, 0, out, 1) == FADC_OK); // the CPU code
		fadc_model_close(fm);
	}
	fadc_context_destroy(ctx);
	char bin[4096];
	bin_dir(bin, sizeof bin);
	snprintf(cmd, sizeof cmd, "'%s/fadc' inspect '%s'", bin, so);
	FILE *f = popen(cmd, "r");
	char out[16384] = "";
	size_t got = f ? fread(out, 1, sizeof out - 1, f) : 0;
	out[got] = 0;
	CHECK(f && pclose(f) == 0);
	char want[512];
	snprintf(want, sizeof want,
	         "  choice 0: record %u, 2 candidates, the faster on the GPU runs: %u kernel "
	         "fadc_forward_k",
	         at, at + 1);
	CHECK(strstr(out, want) != NULL);
	snprintf(want, sizeof want, " %u gemm cublasSgemmStridedBatched\n", at + 2);
	CHECK(strstr(out, want) != NULL);
	CHECK(strstr(out, ", 0 cuBLAS GEMMs, 1 choice timed on the GPU)\n") != NULL);
	if (!strstr(out, "choice 0"))
		fprintf(stderr, "fadc inspect said:\n%s", out);
	unlink(so);
	unlink(old);
	rmdir(dir);
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

// Plans, prints and (with the toolkit) NVRTC-compiles p; checks the fused kernel's barriers
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
#ifdef FADC_HAVE_CUDA
	uint8_t *cubin = NULL;
	size_t ncubin = 0;
	CHECK(cg_cuda_compile(src, p->name, "sm_90", &cubin, &ncubin, stderr, err, sizeof err));
	free(cubin);
#endif
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
	// At PN points the three temporaries fit in shared memory side by
	// side, so the fused kernel gives each its own bytes (cuda_tmp_private): no
	// WAR, two phases.  At 5000 points (20 KB each) they do not (60 KB
	// against 48), and the plan's reuse (40 KB) stands.
	for (int big = 0; big < 2; big++) {
		int64_t n = big ? 5000 : PN;
		p = kir_program_new("reuse", DT_F32);
		x = vec(p, KB_IN, 0, n);
		uint32_t a = vec(p, KB_TMP, 0, n), r = vec(p, KB_TMP, 0, n), b = vec(p, KB_TMP, 0, n);
		o = vec(p, KB_OUT, 0, n);
		i = kx_var(p, 0, n);
		KxId rev = kx_iadd(p, kx_iconst(p, n - 1), kx_imul(p, i, -1));
		pw_kernel(p, a, n, kx_un(p, KX_EXP, kx_load(p, x, i)));
		pw_kernel(p, r, n, kx_load(p, a, rev));
		pw_kernel(p, b, n, kx_bin(p, KX_MUL, kx_load(p, r, i), kx_const(p, 2, DT_F32)));
		pw_kernel(p, o, n, kx_bin(p, KX_ADD, kx_load(p, b, i), kx_load(p, r, i)));
		CHECK(phases_of(p) == (big ? 3u : 2u));
		CHECK(p->buf[b].offset == p->buf[a].offset); // the plan reused a's bytes
		if (big) {
			CHECK(p->arena_bytes <= 48 * 1024 && p->naive_bytes > 48 * 1024);
			p->buf[b].offset = p->arena_bytes;
			p->arena_bytes += p->buf[b].bytes;
			CHECK(cg_cuda_phases(p) == 2);
		}
		kir_program_free(p);
	}

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

	// A term's cost moves the form: a scalar sum of 10 plain terms stays
	// in one thread (10 steps against 1 + 20 for a warp), a sum of 10
	// logarithms (each about 8 plain terms, docs/CUDA.md) is a warp's
	// (1 * 9 + 20 against 90).
	p = kir_program_new("cost", DT_F32);
	x = vec(p, KB_IN, 0, 10);
	o = vec(p, KB_OUT, 0, 1);
	o1 = vec(p, KB_OUT, 1, 1);
	r0 = kx_var(p, 0, 10);
	sum_kernel(p, o, 1, 10, kx_load(p, x, r0));
	sum_kernel(p, o1, 1, 10, kx_un(p, KX_LOG, kx_load(p, x, r0)));
	CHECK(fused_form(&p->k[0]) == 0 && fused_form(&p->k[1]) == 0); // at cost 1
	CHECK(fused_form_c(&p->k[1], 9) == 1);
	CHECK(phases_of(p) == 1);
	CHECK(cg_cuda_fused_form(p, 0) == 0 && cg_cuda_fused_form(p, 1) == 1);
	kir_program_free(p);

	// Warp rotation: four independent scalar chains in one phase, each a
	// kernel writing s_j = exp(x_j) and one reading it back (RAW on one
	// thread: the pair must rotate together).  The heaviest chain stays on
	// warp 0, the others take warps 1, 2, 3 (thread 32 r runs point 0:
	// the loop starts at (threadIdx.x + 256 - 32 r) & 255).
	p = kir_program_new("rotate", DT_F32);
	z = kx_iconst(p, 0);
	for (int j = 0; j < 4; j++) {
		uint32_t xj = vec(p, KB_IN, j, 1), sj = vec(p, KB_TMP, 0, 1), oj = vec(p, KB_OUT, j, 1);
		KxId v = kx_load(p, xj, z);
		for (int e = 0; e < 4 - j; e++) // chain j costs 4 - j exponentials
			v = kx_un(p, KX_EXP, v);
		pw_kernel(p, sj, 1, v);
		pw_kernel(p, oj, 1, kx_bin(p, KX_MUL, kx_load(p, sj, z), kx_const(p, 2, DT_F32)));
	}
	CHECK(phases_of(p) == 1);
	{
		char err[256];
		char *src = cg_cuda_print(p, NULL, err, sizeof err);
		CHECK(src != NULL);
		CHECK(src && count(src, "for (int t = (threadIdx.x + 224U) & 255U;") == 2);
		CHECK(src && count(src, "for (int t = (threadIdx.x + 192U) & 255U;") == 2);
		CHECK(src && count(src, "for (int t = (threadIdx.x + 160U) & 255U;") == 2);
		// Chain 0 (the costliest) and its reader stay unrotated; chain 3
		// (the cheapest) and its reader share one rotation.
		for (int kk = 0; kk < 8; kk++) {
			char def[64];
			snprintf(def, sizeof def, "void\nfadc_rotate_k%d_elementwise(", kk);
			const char *d = src ? strstr(src, def) : NULL;
			const char *loop = d ? strstr(d, "for (int t = ") : NULL;
			CHECK(loop != NULL);
			if (!loop)
				continue;
			loop += strlen("for (int t = ");
			if (kk < 2)
				CHECK(!strncmp(loop, "(int)blockIdx.x", 15));
			else
				CHECK(!strncmp(loop, "(threadIdx.x + ", 15));
			if (kk == 7) {
				snprintf(def, sizeof def, "void\nfadc_rotate_k6_elementwise(");
				const char *d6 = strstr(src, def), *l6 = d6 ? strstr(d6, "for (int t = ") : NULL;
				CHECK(l6 && !strncmp(l6 + strlen("for (int t = "), loop, 24));
			}
		}
		free(src);
	}
	kir_program_free(p);
}

// ---------------------------------------------------------------- digamma, trigamma

// Polygamma of constant order 0 or 1 (digamma, trigamma) in f32 or f64
// prints a call of codegen/cuda_special.h's function of that dtype (the
// f32 one takes and returns float: no round trip through double), and the
// program holds that file's text verbatim, once; no fadc_polygamma.  Order
// 2 still calls fadc_polygamma in double, and then cuda_special.h is not
// printed.  NVRTC compiles each program.
static void
check_special(void) {
	const char *root = getenv("FADC_SOURCE_DIR");
	char path[4096];
	snprintf(path, sizeof path, "%s/codegen/cuda_special.h", root ? root : ".");
	FILE *hf = fopen(path, "rb");
	CHECK(hf != NULL);
	if (!hf)
		return;
	static char text[65536];
	size_t nt = fread(text, 1, sizeof text - 1, hf);
	fclose(hf);
	text[nt] = 0;
	CHECK(nt > 1000 && nt < sizeof text - 1);
	static const struct {
		const char *src, *want[3], *not;
		int special;
	} cases[] = {
	    {"param x: f32[64] = uniform(-3, 12, seed=1)\n"
	     "def forward() -> (f32[64], f32[64]) { return digamma(x), polygamma(x, n=1) }\n",
	     {"const float x", " = fadc_digammaf(", " = fadc_trigammaf("},
	     "fadc_polygamma",
	     1},
	    {"param x: f64[64] = uniform(-3, 12, seed=1)\n"
	     "def forward() -> (f64[64], f64[64]) { return digamma(x), polygamma(x, n=1) }\n",
	     {"const double x", " = fadc_digamma(", " = fadc_trigamma("},
	     "fadc_polygamma",
	     1},
	    {"param x: f32[64] = uniform(0.5, 12, seed=1)\n"
	     "def forward() -> f32[64] { return polygamma(x, n=2) }\n",
	     {"(float)fadc_polygamma((double)", "fadc_polygamma(double nd, double x)", NULL},
	     "fadc_digammaf",
	     0},
	};
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		KProgram *p = lower(cases[i].src, "forward");
		if (!p)
			continue;
		char err[4096] = "";
		char *src = cg_cuda_print(p, NULL, err, sizeof err);
		CHECK(src != NULL);
		if (!src) {
			fprintf(stderr, "special %zu: %s\n", i, err);
			kir_program_free(p);
			continue;
		}
		for (int k = 0; k < 3 && cases[i].want[k]; k++) {
			int found = strstr(src, cases[i].want[k]) != NULL;
			CHECK(found);
			if (!found)
				fprintf(stderr, "special %zu: no '%s' in the printed source\n", i,
				        cases[i].want[k]);
		}
		CHECK(strstr(src, cases[i].not) == NULL);
		CHECK(count(src, text) == cases[i].special);
#ifdef FADC_HAVE_CUDA
		uint8_t *cubin = NULL;
		size_t ncubin = 0;
		int ok = cg_cuda_compile(src, "special.cu", "sm_90", &cubin, &ncubin, stderr, err, sizeof err);
		CHECK(ok && ncubin > 0);
		if (!ok)
			fprintf(stderr, "special %zu: %s\n", i, err);
		free(cubin);
#endif
		free(src);
		kir_program_free(p);
	}
}

// ---------------------------------------------------------------- index32
//
// Index arithmetic is int where kx_range bounds it within int (docs/CUDA.md,
// "Index arithmetic in 32 bits"), long long elsewhere, with int operands
// widened before a product or sum that may leave int.  Kernel 0: 100
// points, out[i] = x[(i / 10) * 10 + i % 10]: every index int.  Kernel 1:
// 3 * 2^30 points (past 2^30: its variable is long long), reading x at
// i % 100.  Kernel 2: 100 points reading y at i * 2^26 (a product up to
// 99 * 2^26 > 2^31: long long, its int variable widened first).
static void
check_index32(void) {
	KProgram *p = kir_program_new("idx", DT_F32);
	uint32_t x = vec(p, KB_IN, 0, 100), y = vec(p, KB_IN, 1, (int64_t)100 << 26);
	uint32_t o0 = vec(p, KB_OUT, 0, 100), o1 = vec(p, KB_OUT, 1, (int64_t)3 << 30),
	         o2 = vec(p, KB_OUT, 2, 100);
	KxId i = kx_var(p, 0, 100);
	pw_kernel(p, o0, 100,
	          kx_load(p, x, kx_iadd(p, kx_imul(p, kx_idiv(p, i, 10), 10), kx_imod(p, i, 10))));
	KxId j = kx_var(p, 0, (int64_t)3 << 30);
	pw_kernel(p, o1, (int64_t)3 << 30, kx_load(p, x, kx_imod(p, j, 100)));
	pw_kernel(p, o2, 100, kx_load(p, y, kx_imul(p, i, (int64_t)1 << 26)));
	cg_plan(p);
	char err[4096] = "";
	char *src = cg_cuda_print(p, NULL, err, sizeof err);
	CHECK(src != NULL);
	if (!src) {
		fprintf(stderr, "index32: %s\n", err);
		kir_program_free(p);
		return;
	}
	const char *k0 = strstr(src, "fadc_idx_k0_elementwise("), *k1 = strstr(src, "fadc_idx_k1_elementwise("),
	           *k2 = strstr(src, "fadc_idx_k2_elementwise(");
	CHECK(k0 && k1 && k2 && k0 < k1 && k1 < k2);
	if (k0 && k1 && k2) {
		char *s0 = strndup(k0, (size_t)(k1 - k0)), *s1 = strndup(k1, (size_t)(k2 - k1)),
		     *s2 = strdup(k2);
		CHECK(strstr(s0, "for (int t = ") && !strstr(s0, "long long") && !strstr(s0, "LL"));
		CHECK(count(s0, "const int x") >= 2); // the division's and the sum's values
		// The modulo of a long long variable fits: int, its operands as they are.
		CHECK(strstr(s1, "for (long long t = ") && strstr(s1, "const int x") &&
		      strstr(s1, "i0 % 100;"));
		if (!strstr(s1, "i0 % 100;"))
			fprintf(stderr, "%s\n%s\n", s1, s2);
		CHECK(strstr(s2, "for (int t = ") && strstr(s2, "const long long x") &&
		      strstr(s2, "(long long)i0 * 67108864LL"));
		free(s0);
		free(s1);
		free(s2);
	}
#ifdef FADC_HAVE_CUDA
	uint8_t *cubin = NULL;
	size_t ncubin = 0;
	CHECK(cg_cuda_compile(src, p->name, "sm_90", &cubin, &ncubin, stderr, err, sizeof err));
	free(cubin);
#endif
	free(src);
	kir_program_free(p);
}

int
main(int argc, char **argv) {
#ifdef FADC_HAVE_CUDA
	int major = 0, minor = 0;
	CHECK(cg_cuda_nvrtc_version(&major, &minor));
#endif
	// FADC_CUDA_GEMM_ONLY=1: only the cuBLAS GEMM checks (quick).
	if (getenv("FADC_CUDA_GEMM_ONLY")) {
		check_gemm_plans();
#ifdef FADC_HAVE_CUDA
		check_gemm_artifact();
		check_choice_artifact();
#endif
		return TU_DONE("test_codegen_cuda");
	}
#ifdef FADC_HAVE_CUDA
	printf("NVRTC %d.%d\n", major, minor);
#else
	printf("built without the CUDA toolkit: the printer's checks only, no NVRTC\n");
#endif
	if (argc > 1 && !strcmp(argv[1], "phases")) { // the hand-built programs only
		check_phases();
		return TU_DONE("test_codegen_cuda");
	}
	if (argc > 1 && !strcmp(argv[1], "broken")) { // a failed compilation's report only
#ifdef FADC_HAVE_CUDA
		check_broken();
		return TU_DONE("test_codegen_cuda");
#else
		printf("test_codegen_cuda broken: built without the CUDA toolkit, skipped\n");
		return 77;
#endif
	}
	if (argc > 1 && !strcmp(argv[1], "special")) { // digamma and trigamma only
		check_special();
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
	// The block reductions' forms (rows, columns, split or not).
	check_model("../tests/gpu/blockred", NULL, 0, fast, 1);
	// Short window reductions 4 points a thread (cuda_vec4_red).
	check_model("../tests/gpu/window4", NULL, 0, fast, 1);
	// The same with the rows' float4 form too (opt-in, FADC_CUDA_VEC4=1):
	// printed, counted (check_task) and compiled.
	setenv("FADC_CUDA_VEC4", "1", 1);
	check_model("../tests/gpu/blockred", NULL, 0, fast, 1);
	unsetenv("FADC_CUDA_VEC4");
	CHECK(total_blockred > 0);
	printf("%d block reductions, %d warp reductions (fused), %d choices\n", total_blockred,
	       total_warp, total_choices);
	printf("%d tasks, %d kernels: NVRTC %.2f s in all (cubins, and PTX of the forwards)\n",
	       total_tasks, total_kernels, total_s);
#ifdef FADC_HAVE_CUDA
	check_broken();
#endif
	check_special();
	check_gemm_plans();
#ifdef FADC_HAVE_CUDA
	check_gemm_artifact();
	check_choice_artifact();
#endif
	check_phases();
	check_index32();
	return TU_DONE("test_codegen_cuda");
}
