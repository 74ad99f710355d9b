// tests/unit/test_codegen_gemm.c -- the blocked GEMM of the LLVM backend
// (codegen/llvm_gemm.c: 6 x 16 register tiles of vector
// accumulators, 12 x 32 with FADC_GEMM_VBYTES=64, A and B packed per block
// of 256 reduction steps) against the
// float64 interpreter, on shapes that exercise every edge: rows not a
// multiple of 6, columns not a multiple of the tile (the scalar tail),
// reductions longer than one block and not a multiple of it, a batch, a
// transposed operand (copied to a row-major temporary by the lowering), a
// matrix-vector product (plain loops), and every first-order task (the
// derivatives are matmuls of transposes), and convolutions as GEMMs.  In f64 the compiled code does
// the interpreter's arithmetic term by term in the order of k, except that
// the fused multiply-add rounds once: normalized error <= 1e-12 (measured
// ~2e-14).  In f32, <= 5e-5: a sum of K = 300 products carries up to
// K eps_f32 = 1.8e-5 of the sum of the terms' magnitudes, and the random
// terms cancel (measured 1.2e-5; f32 rounding, not the GEMM: the f64 run
// is the exact check).  The emitted LLVM IR must hold the vector
// fused multiply-adds, so the test fails if the GEMM stops being chosen;
// at -O0 each weight-gradient kernel's own function must hold them.
#include <stdlib.h>
#include <string.h>

#include "codegen_util.h"

static const char model[] =
    "param a: f64[37, 300] = normal(0, 1, seed=1)\n"      // K = 256 + 44
    "param b: f64[300, 53] = normal(0, 1, seed=2)\n"      // N = 3 tiles + 5
    "param c: f64[53, 300] = normal(0, 1, seed=3)\n"      // used transposed
    "param d: f64[3, 13, 300] = normal(0, 1, seed=4)\n"   // a batch of A
    "param v: f64[300, 1] = normal(0, 1, seed=5)\n"       // N = 1
    "param e: f64[800, 300] = normal(0, 1, seed=6)\n"     // M = 2 row groups of 384 + 32
    "def forward() {\n"
    "  x = a @ b\n"
    "  y = a @ transpose(c, 0, 1)\n"
    "  z = d @ b\n"
    "  w = transpose(a, 0, 1) @ x\n"
    "  u = e @ b\n"
    "  return sum(x * x) * 0.01 + sum(sin(y)) + sum(z * z * 0.001) + sum(cos(w) * 0.01) + sum(a @ v)\n"
    "         + sum(u * u) * 0.001\n"
    "}\n";

// Convolutions as GEMMs (codegen/lower_window.c, conv_gemm): a 2-d conv with
// padding (the column layout), a strided one with few output positions
// and wide channels (the transposed layout), a dilated 1-d one; vjp runs
// the weight gradient (g transposed, then a GEMM over two reduction axes
// that merge into one K) and the input gradient (a GEMM, then col2im).
static const char convs[] =
    "param x: f64[2, 8, 12, 12] = normal(0, 1, seed=1)\n"
    "param w: f64[16, 8, 3, 3] = normal(0, 0.3, seed=2)\n"
    "param x2: f64[4, 16, 4, 4] = normal(0, 1, seed=3)\n"
    "param w2: f64[32, 16, 3, 3] = normal(0, 0.3, seed=4)\n"
    "param x3: f64[2, 8, 64] = normal(0, 1, seed=5)\n"
    "param w3: f64[16, 8, 5] = normal(0, 0.3, seed=6)\n"
    "param w4: f64[32, 8, 1, 1] = normal(0, 0.3, seed=7)\n" // pointwise: x is its own columns
    "def forward() {\n"
    "  a = conv2d(x, w, padding=1)\n"
    "  b = conv2d(x2, w2, stride=2, padding=1)\n"
    "  c = conv1d(x3, w3, padding=4, dilation=2)\n"
    "  d = conv2d(x, w4)\n"
    "  return sum(sin(a)) + sum(b * b) * 0.1 + sum(cos(c)) + sum(d * d) * 0.1\n"
    "}\n";

// The same three ops with the column buffer cut into chunks
// (codegen/lower_window.c, conv_gemm): $FADC_CONV_COL_MAX = 40,000 bytes forces
// them at these sizes.  In f64: conv's column layout (Q = 63, P = 36,
// 18,144 bytes a sample) runs in 2 chunks of samples, 2 and 1 (ragged),
// its weight gradient in 2 chunks of input channels (7,776 bytes a
// channel: 4 and 3); the transposed layout (P = 4, Q = 576) in 2 chunks of
// samples (2 and 1), its weight gradient in 2 of 32 channels; the dilated
// 1-d conv (20,480 bytes a sample) in 3 chunks of one sample, its weight
// gradient in 2 of 4 channels.  conv_input_grad cuts the batch as conv
// does.
static const char convs_chunked[] =
    "param x: f64[3, 7, 6, 6] = normal(0, 1, seed=1)\n"
    "param w: f64[16, 7, 3, 3] = normal(0, 0.3, seed=2)\n"
    "param x2: f64[3, 64, 4, 4] = normal(0, 1, seed=3)\n"
    "param w2: f64[32, 64, 3, 3] = normal(0, 0.1, seed=4)\n"
    "param x3: f64[3, 8, 64] = normal(0, 1, seed=5)\n"
    "param w3: f64[16, 8, 5] = normal(0, 0.3, seed=6)\n"
    "def forward() {\n"
    "  a = conv2d(x, w, padding=2, dilation=2)\n"
    "  b = conv2d(x2, w2, stride=2, padding=1)\n"
    "  c = conv1d(x3, w3, padding=4, dilation=2)\n"
    "  return sum(sin(a)) + sum(b * b) * 0.1 + sum(cos(c))\n"
    "}\n";

// A head merge (attention's heads back to rows: a transpose, then a
// reshape) read by a large product: fusion inlines the two layout ops into
// the product's load, an index of divisions and remainders with no GEMM
// plan, so the operand is materialized by a kernel of its own
// (kir_gemm_operands: "= gemm_operand") and the product becomes a GEMM;
// in vjp the weight gradient reads the same merged operand.  64 x 64 x 64
// is the threshold's work (2^18 multiply-adds).
static const char heads[] =
    "param x: f64[4, 64, 16] = normal(0, 1, seed=1)\n" // heads, rows, width
    "param w: f64[64, 64] = normal(0, 0.2, seed=2)\n"
    "def forward() {\n"
    "  h = reshape(transpose(x, 0, 1), [64, 64])\n"
    "  return sum(sin(h @ w))\n"
    "}\n";

// Batch norm's statistics over 8 x 64 x 64 terms into 16 channels (and
// their gradients in vjp): sums of many terms into few points, split in
// two kernels (kir_split_reductions: "= partial_sum"); a small product
// keeps the GEMM's vector FMAs in the module, which check() asks for.
static const char bnorm[] =
    "param x: f64[8, 16, 64, 64] = normal(0, 1, seed=1)\n"
    "param w: f64[16] = normal(1, 0.1, seed=2)\n"
    "param b: f64[16] = normal(0, 0.1, seed=3)\n"
    "param m: f64[40, 40] = normal(0, 1, seed=4)\n"
    "def forward() {\n"
    "  y = batch_norm(x, w, b)\n"
    "  return sum(tanh(y) * y) * 0.001 + sum(m @ m)\n"
    "}\n";

// The GEMM's vector type as LLVM prints it: 256-bit tiles, or 512-bit ones
// when FADC_GEMM_VBYTES=64 (codegen/llvm.c: ctest runs this test both
// ways, so the 512-bit tiles of AVX-512 targets are checked on any machine).
static int
lanes(int f32)
{
	const char *vb = getenv("FADC_GEMM_VBYTES");
	return (vb && !strcmp(vb, "64") ? 64 : 32) / (f32 ? 4 : 8);
}

static const char *
fma_name(int f32)
{
	static char b[2][64];
	snprintf(b[f32 != 0], sizeof b[0], "@llvm.fmuladd.v%d%s", lanes(f32), f32 ? "f32" : "f64");
	return b[f32 != 0];
}

// B's packed panel and A's block live in the thread-local scratch array
// (codegen/llvm_gemm.c, gemm_scratch), not on the kernel's stack: a
// packed GEMM function calls the function that returns the array's
// address, never names the array itself (a thread-local access in vector
// code lets LLVM keep zmm16-31 live across __tls_get_addr), and has no
// array alloca.
static const char *
panel_name(int f32)
{
	(void)f32;
	return "@fadc_gemm_scratch_get()";
}

// Whether text[0 .. end) names the scratch array itself (not its function).
static int
names_scratch(const char *text, const char *end)
{
	static const char nm[] = "@fadc_gemm_scratch";
	for (const char *q = strstr(text, nm); q && q < end; q = strstr(q + 1, nm))
		if (strncmp(q + sizeof nm - 1, "_get(", 5) != 0)
			return 1;
	return 0;
}

static void
check(const char *name, const char *src, int f32, const char *const *kernels)
{
	char *text = f32 ? cgu_to_f32(src) : strdup(src);
	Module *m = cgu_parse(name, text);
	if (!m) {
		free(text);
		return;
	}
	static const char *const tasks[] = {"forward", "vjp", "jvp"};
	char *ir = NULL, *kir = NULL;
	size_t nir = 0, nkir = 0;
	FILE *llvm = open_memstream(&ir, &nir), *kf = open_memstream(&kir, &nkir);
	CgOptions o = {.tasks = tasks, .ntasks = 3, .opt_level = 2, .emit_llvm = llvm, .emit_kir = kf};
	CgCheck c = {f32 ? 5e-5 : 1e-12, 1e-6, 0, 0};
	char label[256];
	snprintf(label, sizeof label, "%s (%s)", name, f32 ? "f32" : "f64");
	cgu_check(m, &o, &c, name, label);
	fclose(llvm);
	fclose(kf);
	CHECK(ir && strstr(ir, fma_name(f32)) != NULL);
	for (int i = 0; kernels && kernels[i]; i++) {
		CHECK(kir && strstr(kir, kernels[i]) != NULL);
		if (!kir || !strstr(kir, kernels[i]))
			fprintf(stderr, "%s: no kernel '%s'\n", name, kernels[i]);
	}
	free(ir);
	free(kir);
	ir_module_free(m);
	free(text);
}

// Every kernel `what` of task vjp must be the CPU's blocked GEMM: compiled
// at -O0 (no inlining, no vectorizer), a function of such a kernel holds
// vector fused multiply-adds only if llvm_emit_gemm wrote it (the plain loops
// and the contraction loops are scalar until the vectorizer runs).  The
// kernels here differ in shape, so each has a function of its own: as
// many functions as kernels, each with a vector FMA.  (The weight
// gradient is a GEMM only when both operands are plain loads, g read
// through its transposed copy gT: codegen/lower_window.c, conv_gemm.)  With
// `packed`, each such function must also pack B's panel into the
// thread-local scratch array, reached through its function's call (and no
// function may keep an array on its stack or name the array itself): the weight gradient's two reduction axes (n, p) walk gT and
// colT as one, so they merge and take the packed path.
static void
check_cpu_gemm(const char *name, const char *src, int f32, const char *what, int packed)
{
	char *text = f32 ? cgu_to_f32(src) : strdup(src);
	Module *m = cgu_parse(name, text);
	if (!m) {
		free(text);
		return;
	}
	static const char *const tasks[] = {"vjp"};
	char *ir = NULL, *kir = NULL;
	size_t nir = 0, nkir = 0;
	FILE *llvm = open_memstream(&ir, &nir), *kf = open_memstream(&kir, &nkir);
	CgOptions o = {.tasks = tasks, .ntasks = 1, .opt_level = 0, .emit_llvm = llvm, .emit_kir = kf};
	CgCheck c = {f32 ? 5e-5 : 1e-12, 1e-6, 0, 0};
	char label[256];
	snprintf(label, sizeof label, "%s (%s, -O0)", name, f32 ? "f32" : "f64");
	cgu_check(m, &o, &c, name, label);
	fclose(llvm);
	fclose(kf);
	char kpat[128], fpat[128];
	snprintf(kpat, sizeof kpat, "= %s (", what);
	snprintf(fpat, sizeof fpat, ".%s(", what);
	int nk = 0, nfn = 0, ngemm = 0;
	for (const char *q = kir ? strstr(kir, kpat) : NULL; q; q = strstr(q + 1, kpat))
		nk++;
	for (const char *q = ir ? strstr(ir, "\ndefine ") : NULL; q; q = strstr(q + 1, "\ndefine ")) {
		const char *eol = strchr(q + 1, '\n'), *f = strstr(q, fpat), *end = strstr(q, "\n}\n");
		if (!eol || !f || f > eol || !end)
			continue;
		nfn++;
		const char *v = strstr(eol, fma_name(f32));
		const char *pk = strstr(eol, panel_name(f32));
		const char *arr = strstr(eol, "alloca [");
		if (arr && arr < end)
			fprintf(stderr, "%s: an array on the stack: %.*s\n", name, (int)(strchr(arr, '\n') - arr), arr);
		int direct = names_scratch(eol, end);
		if (direct)
			fprintf(stderr, "%s: the scratch array named in vector code\n", name);
		if (v && v < end && (!packed || (pk && pk < end)) && !(arr && arr < end) && !direct)
			ngemm++;
		else
			fprintf(stderr, "%s: %.*s is not a blocked GEMM\n", name, (int)(eol - q - 1), q + 1);
	}
	CHECK(nk > 0 && nfn == nk && ngemm == nk);
	if (!(nk > 0 && nfn == nk && ngemm == nk))
		fprintf(stderr, "%s: %d kernels %s, %d functions, %d GEMMs\n", name, nk, what, nfn, ngemm);
	free(ir);
	free(kir);
	ir_module_free(m);
	free(text);
}

// Every contraction of task `task` of at least 2^18 multiply-adds has a
// GEMM plan, and `nop` operands were materialized for it (kernels
// "gemm_operand" whose only reader is the next kernel, a contraction).
static void
check_plans(const char *name, const char *src, const char *task, int nop)
{
	Module *m = cgu_parse(name, src);
	if (!m)
		return;
	char err[512] = "";
	KProgram *p = cgu_lower_task(m, task, DT_F64, NULL, err, sizeof err);
	CHECK(p != NULL);
	int nmat = 0, nplan = 0, nops = 0;
	for (uint32_t ki = 0; p && ki < p->nk; ki++) {
		const KKernel *k = &p->k[ki];
		if (k->what && !strcmp(k->what, "gemm_operand")) {
			nops++;
			CHECK(ki + 1 < p->nk && p->k[ki + 1].contraction);
		}
		int64_t work = kir_kernel_points(k) * kir_kernel_terms(k);
		if (!k->contraction || work < ((int64_t)1 << 18))
			continue;
		KGemmPlan gp;
		nmat++;
		nplan += kir_gemm_plan(p, k, &gp);
	}
	printf("%s %s: %d large contractions, %d with GEMM plans, %d operands materialized\n", name,
	       task, nmat, nplan, nops);
	CHECK(nmat > 0 && nplan == nmat && nops == nop);
	kir_program_free(p);
	ir_module_free(m);
}

// A scalar sum over (8, 21, 64, 64): one point, so the split takes the
// first two reduction variables (kir_split_reductions): 8 x 21 = 168
// partials of 4096 terms (not 8 of 86016: eight blocks on a GPU), then
// their sum.  check() compares the values with the interpreter.
static const char lossum[] = "param x: f64[8, 21, 64, 64] = normal(0, 1, seed=1)\n"
                             "def forward() {\n"
                             "  return sum(tanh(x) * x)\n"
                             "}\n";

static void
check_split(void)
{
	Module *m = cgu_parse("lossum.ir", lossum);
	if (!m)
		return;
	char err[512] = "";
	KProgram *p = cgu_lower_task(m, "forward", DT_F64, NULL, err, sizeof err);
	CHECK(p != NULL);
	int64_t parts = 0, terms = 0, sums = 0;
	for (uint32_t ki = 0; p && ki < p->nk; ki++) {
		const KKernel *k = &p->k[ki];
		if (k->what && !strcmp(k->what, "partial_sum")) {
			parts = kir_kernel_points(k);
			terms = kir_kernel_terms(k);
			CHECK(ki + 1 < p->nk && kir_kernel_points(&p->k[ki + 1]) == 1);
			sums = ki + 1 < p->nk ? kir_kernel_terms(&p->k[ki + 1]) : 0;
		}
	}
	printf("lossum.ir forward: %lld partials of %lld terms, summed by %lld\n", (long long)parts,
	       (long long)terms, (long long)sums);
	CHECK(parts == 168 && terms == 4096 && sums == 168);
	if (p)
		kir_program_free(p);
	ir_module_free(m);
}

// Every conv GEMM kernel (conv.gemm, conv.gemm.t, conv_weight_grad.gemm,
// conv_input_grad.gemm) of `task` has a GEMM plan (so cuBLAS takes each
// chunk's product), and there are `want` of them.
static void
check_conv_plans(const char *name, const char *src, const char *task, int f32, int want)
{
	char *text = f32 ? cgu_to_f32(src) : strdup(src);
	Module *m = cgu_parse(name, text);
	if (!m) {
		free(text);
		return;
	}
	char err[512] = "";
	KProgram *p = cgu_lower_task(m, task, f32 ? DT_F32 : DT_F64, NULL, err, sizeof err);
	CHECK(p != NULL);
	int ngemm = 0, nplan = 0;
	for (uint32_t ki = 0; p && ki < p->nk; ki++) {
		const KKernel *k = &p->k[ki];
		if (!k->contraction || !k->what || strncmp(k->what, "conv", 4) || !strstr(k->what, "gemm"))
			continue;
		KGemmPlan gp;
		ngemm++;
		nplan += kir_gemm_plan(p, k, &gp);
	}
	printf("%s %s (%s): %d conv GEMM kernels, %d with GEMM plans\n", name, task, f32 ? "f32" : "f64",
	       ngemm, nplan);
	CHECK(ngemm == want && nplan == ngemm);
	if (p)
		kir_program_free(p);
	ir_module_free(m);
	free(text);
}

// A 1 x 1 convolution of stride 1 reads x as its columns and writes its
// input gradient straight into dx: no im2col or col2im kernel in forward or
// vjp: one conv GEMM, and in vjp one input-gradient GEMM (the weight
// gradient still copies x transposed: im2col.t).
static const char pointwise[] = "param x: f64[2, 16, 16, 16] = normal(0, 1, seed=1)\n"
                                "param w: f64[32, 16, 1, 1] = normal(0, 0.3, seed=2)\n"
                                "def forward() {\n"
                                "  return sum(sin(conv2d(x, w)))\n"
                                "}\n";

static void
check_pointwise(void)
{
	Module *m = cgu_parse("pointwise.ir", pointwise);
	if (!m)
		return;
	static const char *const tasks[] = {"forward", "vjp"};
	for (int t = 0; t < 2; t++) {
		char err[512] = "";
		KProgram *p = cgu_lower_task(m, tasks[t], DT_F64, NULL, err, sizeof err);
		CHECK(p != NULL);
		int cols = 0, conv = 0, input = 0;
		for (uint32_t ki = 0; p && ki < p->nk; ki++) {
			const char *w = p->k[ki].what ? p->k[ki].what : "";
			cols += !strcmp(w, "im2col") || !strcmp(w, "col2im");
			conv += !strcmp(w, "conv.gemm");
			input += !strcmp(w, "conv_input_grad.gemm");
		}
		printf("pointwise.ir %s: %d im2col/col2im, %d conv.gemm, %d conv_input_grad.gemm\n", tasks[t], cols,
		       conv, input);
		CHECK(cols == 0 && conv == 1 && input == t);
		if (p)
			kir_program_free(p);
	}
	ir_module_free(m);
}

int
main(void)
{
	static const char *const conv_kernels[] = {"= conv.gemm ", "= conv.gemm.t ", "= im2col ",
	                                           "= im2col.t ", "= conv_weight_grad.gemm ",
	                                           "= conv_input_grad.gemm ", "= col2im ", NULL};
	check("gemm.ir", model, 0, NULL);
	check("gemm.ir", model, 1, NULL);
	check_pointwise();
	check("convs.ir", convs, 0, conv_kernels);
	check("convs.ir", convs, 1, conv_kernels);
	static const char *const head_kernels[] = {"= gemm_operand (", NULL};
	check("heads.ir", heads, 0, head_kernels);
	check("heads.ir", heads, 1, head_kernels);
	static const char *const bn_kernels[] = {"= partial_sum (", NULL};
	check("bnorm.ir", bnorm, 0, bn_kernels);
	check("bnorm.ir", bnorm, 1, bn_kernels);
	check("lossum.ir", lossum, 0, bn_kernels);
	check_split();
	check_plans("heads.ir", heads, "forward", 1);
	check_plans("heads.ir", heads, "vjp", 2);
	check_cpu_gemm("convs.ir", convs, 0, "conv_weight_grad.gemm", 1);
	check_cpu_gemm("convs.ir", convs, 1, "conv_weight_grad.gemm", 1);
	// Chunked column buffers: forward has 2 + 2 + 3 conv GEMMs in f64;
	// vjp adds the weight gradients (2 + 2 + 2) and the input gradients
	// (2 + 2 + 3): the counts pin the chunking.  f32 halves the bytes, so
	// half the bound gives it the same chunks.
	setenv("FADC_CONV_COL_MAX", "20000", 1);
	check("convs_chunked.ir", convs_chunked, 1, conv_kernels);
	check_conv_plans("convs_chunked.ir", convs_chunked, "vjp", 1, 7 + 6 + 7);
	setenv("FADC_CONV_COL_MAX", "40000", 1);
	check("convs_chunked.ir", convs_chunked, 0, conv_kernels);
	check_conv_plans("convs_chunked.ir", convs_chunked, "forward", 0, 7);
	check_conv_plans("convs_chunked.ir", convs_chunked, "vjp", 0, 7 + 6 + 7);
	check_cpu_gemm("convs_chunked.ir", convs_chunked, 0, "conv_weight_grad.gemm", 1);
	// The input gradients' chunks of one sample of the transposed layout
	// have P = 4 rows, one row block: B is read in place, not packed
	// (codegen/llvm_gemm.c, gemm_blocking), so no panel is asked for.
	check_cpu_gemm("convs_chunked.ir", convs_chunked, 0, "conv_input_grad.gemm", 0);
	unsetenv("FADC_CONV_COL_MAX");
	check_conv_plans("convs_chunked.ir", convs_chunked, "vjp", 0, 3 + 3 + 3);
	return TU_DONE("test_codegen_gemm");
}
