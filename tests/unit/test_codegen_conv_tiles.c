// tests/unit/test_codegen_conv_tiles.c -- convolutions whose columns do not
// fit for one sample, cut into tiles of output rows or of output positions
// (codegen/lower_window.c, conv_tiles, col2im; docs/CODEGEN.md, "Chunked
// columns"), forced at small sizes with $FADC_CONV_COL_MAX:
//   - against the float64 interpreter (cg_check): forward, vjp and jvp, so
//     that conv, conv_input_grad and conv_weight_grad all run tiled; the
//     model in f64 (normalized error <= 1e-12: the tiles change only the
//     order of the sums) and in f32 (<= 1e-5);
//   - the tiling pinned at two bounds by kernel counts of the vjp (below,
//     derived by hand): no convolution is left as its direct loops, every
//     tile's product has a GEMM plan (kir_gemm_plan: what cuBLAS and the
//     CPU's blocked GEMM take), and no column buffer is above the bound;
//   - with FADC_CONV_COL_MAX=1 (nothing fits) the direct loops come back;
//   - the weight gradient's partial sums and col2im's additions at 1, 2, 3
//     and 8 threads are the same bytes, with kernels split by the pool.
#include "codegen_util.h"
#include "pool_util.h"

// a: 2-d, stride (2, 1), padding (2, 1), dilation (1, 2):
//    OH = (27 + 4 - 5) / 2 + 1 = 14, OW = (11 + 2 - 4 - 1) + 1 = 9,
//    Q = 3 * 5 * 3 = 45: in f64 360 bytes a position, 3,240 a row,
//    45,360 a sample; one input channel over the batch (the weight
//    gradient's cut by channels) 2 * 126 * 15 * 8 = 30,240.
// b: 1-d, stride 2, padding 3, dilation 2: OW = (150 + 6 - 8 - 1) / 2 + 1
//    = 74, Q = 8 * 5 = 40: 320 bytes a position, 23,680 a sample (and a
//    row); one channel over the batch 2 * 74 * 5 * 8 = 5,920.
// The f32 twin has half the bytes, so half the bound gives it the same
// tiles.
static const char model[] = "param x: f64[2, 3, 27, 11] = uniform(-1, 1, seed=1)\n"
                            "param w: f64[8, 3, 5, 3] = normal(0, 0.3, seed=2)\n"
                            "param y: f64[2, 8, 150] = uniform(-1, 1, seed=3)\n"
                            "param v: f64[16, 8, 5] = normal(0, 0.3, seed=4)\n"
                            "def forward() -> f64[] {\n"
                            "  a = conv2d(x, w, stride=[2, 1], padding=[2, 1], dilation=[1, 2])\n"
                            "  b = conv1d(y * y, v, stride=2, padding=3, dilation=2)\n"
                            "  return sum(tanh(a)) + sum(b * b * b) * 0.1\n"
                            "}\n";

static const char *const tasks[] = {"forward", "vjp", "jvp"};

// Kernels of one name ("= NAME (" in the kernel-IR dump's terms: k->what).
static int
count(const KProgram *p, const char *what)
{
	int n = 0;
	for (uint32_t ki = 0; ki < p->nk; ki++)
		n += p->k[ki].what && !strcmp(p->k[ki].what, what);
	return n;
}

typedef struct Want {
	int gemm, ig_gemm, col2im, col2im_add, wg_gemm, wg_add;
	int noplan; // conv GEMM kernels without a GEMM plan
} Want;

// The vjp of model (f32 when f32) lowered under the current bound: its
// kernel counts, GEMM plans and column buffers.
static void
check_tiling(int f32, int64_t bound, const Want *w)
{
	char *text = f32 ? cgu_to_f32(model) : strdup(model);
	Module *m = cgu_parse("tiles.ir", text);
	free(text);
	if (!m)
		return;
	char err[512] = "";
	KProgram *p = cgu_lower_task(m, "vjp", f32 ? DT_F32 : DT_F64, NULL, err, sizeof err);
	CHECK(p != NULL);
	if (!p) {
		fprintf(stderr, "tiles.ir vjp: %s\n", err);
		ir_module_free(m);
		return;
	}
	Want got = {count(p, "conv.gemm"), count(p, "conv_input_grad.gemm"), count(p, "col2im"),
	            count(p, "col2im.add"), count(p, "conv_weight_grad.gemm"),
	            count(p, "conv_weight_grad.add"), 0};
	int direct = count(p, "conv") + count(p, "conv_input_grad") + count(p, "conv_weight_grad");
	int ngemm = 0, nplan = 0, big = 0;
	for (uint32_t ki = 0; ki < p->nk; ki++) {
		const KKernel *k = &p->k[ki];
		if (!k->what)
			continue;
		if (k->contraction && !strncmp(k->what, "conv", 4) && strstr(k->what, "gemm")) {
			KGemmPlan gp;
			ngemm++;
			nplan += kir_gemm_plan(p, k, &gp);
		}
		// The columns: im2col's buffers and the input gradient's dcol.
		if ((!strncmp(k->what, "im2col", 6) || !strcmp(k->what, "conv_input_grad.gemm")) &&
		    p->buf[k->out].bytes > bound)
			big++;
	}
	printf("tiles.ir vjp (%s, bound %lld): conv.gemm %d, conv_input_grad.gemm %d, col2im %d + "
	       "%d adding, conv_weight_grad.gemm %d + %d adds; %d direct; %d/%d GEMM plans; %d "
	       "column buffers above the bound\n",
	       f32 ? "f32" : "f64", (long long)bound, got.gemm, got.ig_gemm, got.col2im,
	       got.col2im_add, got.wg_gemm, got.wg_add, direct, nplan, ngemm, big);
	got.noplan = ngemm - nplan;
	CHECK(!memcmp(&got, w, sizeof got));
	CHECK(direct == 0 && big == 0);
	kir_program_free(p);
	ir_module_free(m);
}

static void
check_values(int f32)
{
	char *text = f32 ? cgu_to_f32(model) : strdup(model);
	Module *m = cgu_parse("tiles.ir", text);
	free(text);
	if (!m)
		return;
	CgOptions o = {.tasks = tasks, .ntasks = 3, .opt_level = 1};
	CgCheck c = {f32 ? 1e-5 : 1e-12, 1e-6, 0, 0};
	char label[256];
	snprintf(label, sizeof label, "tiles.ir in %s, FADC_CONV_COL_MAX=%s", f32 ? "f32" : "f64",
	         getenv("FADC_CONV_COL_MAX"));
	cgu_check(m, &o, &c, "tiles.ir", label);
	ir_module_free(m);
}

// At one bound (f64 bytes; the f32 twin at half of it): values and tiling.
static void
check_bound(int64_t bound, const Want *w)
{
	char s[32];
	for (int f32 = 0; f32 < 2; f32++) {
		snprintf(s, sizeof s, "%lld", (long long)(f32 ? bound / 2 : bound));
		setenv("FADC_CONV_COL_MAX", s, 1);
		check_tiling(f32, f32 ? bound / 2 : bound, w);
		check_values(f32);
	}
	unsetenv("FADC_CONV_COL_MAX");
}

// Large enough for the pool to split the tiles' kernels: 3 x 3, padding 1,
// 8 -> 32 channels on 40 x 40 (Q = 72, 11,520 bytes of f32 columns a row,
// 460,800 a sample, 115,200 a channel over the batch).  At 60,000 bytes:
// tiles of 5 rows (8 a sample), the weight gradient over those 16 tiles
// (GEMMs of 32 x 72 x 200), col2im's first tile of 8 x 40 x 40 points.
static const char big_model[] = "param x: f32[2, 8, 40, 40] = uniform(-1, 1, seed=1)\n"
                                "param w: f32[32, 8, 3, 3] = normal(0, 0.3, seed=2)\n"
                                "def forward() -> f32[] {\n"
                                "  return sum(tanh(conv2d(x, w, padding=1)))\n"
                                "}\n";

static void
check_threads(void)
{
	static const char *const vjp[] = {"forward", "vjp"};
	char so[256];
	setenv("FADC_CONV_COL_MAX", "60000", 1);
	int ok = pu_compile("big.ir", big_model, 0, NULL, 0, vjp, 2, 2, so, sizeof so);
	unsetenv("FADC_CONV_COL_MAX");
	if (!ok)
		return;
	printf("big.ir vjp, FADC_CONV_COL_MAX=60000:\n");
	pu_check_threads(so, "vjp", 1);
	unlink(so);
}

int
main(void)
{
	// Bound 10,000: a is cut into tiles of whole rows, 3 fit, 14 rows in
	// ceil(14 / 3) = 5 tiles of 3 (3 3 3 3 2, ragged), 10 over the
	// batch; b's row (23,680) does not fit, so its 74 columns are cut,
	// 31 fit, into 3 tiles of 25 (25 25 24), 6 over the batch.  Per
	// tile one conv.gemm and one conv_input_grad.gemm: 16 each; col2im:
	// the first tile of each sample writes it (2 + 2), the others add
	// (2 x 4 + 2 x 2 = 12).  The weight gradients: a's channel (30,240)
	// does not fit, so its reduction runs over the same 10 tiles (10
	// GEMMs, 9 adds); b's (5,920) does, cut by channels, 1 fits: 8 GEMMs,
	// which read g in place (gT, 2 x 16 x 74 x 8 = 18,944 bytes, is above
	// the bound): a sum of 2 GEMMs over the batch each, no GEMM plan (as
	// before tiles).  Every other product has one.
	Want w10 = {16, 16, 4, 12, 10 + 8, 9, 8};
	check_bound(10000, &w10);
	// Bound 3,000: a's row (3,240) does not fit either: each row's 9
	// columns, 8 fit, in 2 tiles (5 4): 2 x 14 x 2 = 56 tiles; b's 74
	// columns, 9 fit, in 9 tiles of 9 (the last 2): 18.  col2im: each
	// sample's first tile writes it (2 + 2), the others add,
	// (28 - 1) x 2 + (9 - 1) x 2 = 70 (no tile's windows lie wholly in
	// the padding here).  Weight gradients: a's over its 56 tiles, b's
	// channel (5,920) no longer fits: over its 18 tiles (one sample
	// each, g read in place is one GEMM); adds 55 + 17.
	Want w3 = {56 + 18, 56 + 18, 4, 70, 56 + 18, 55 + 17, 0};
	check_bound(3000, &w3);
	// Nothing fits: the direct loops, one kernel per convolution.
	{
		setenv("FADC_CONV_COL_MAX", "1", 1);
		Module *m = cgu_parse("tiles.ir", model);
		char err[512] = "";
		KProgram *p = m ? cgu_lower_task(m, "vjp", DT_F64, NULL, err, sizeof err) : NULL;
		CHECK(p != NULL);
		if (p) {
			int direct = count(p, "conv") + count(p, "conv_input_grad") + count(p, "conv_weight_grad");
			printf("tiles.ir vjp, FADC_CONV_COL_MAX=1: %d direct convolution kernels, %d "
			       "im2col\n",
			       direct, count(p, "im2col") + count(p, "im2col.t"));
			CHECK(direct == 2 + 2 + 2 && count(p, "im2col") + count(p, "im2col.t") == 0);
			kir_program_free(p);
		}
		ir_module_free(m);
		unsetenv("FADC_CONV_COL_MAX");
	}
	check_threads();
	return TU_DONE("test_codegen_conv_tiles");
}
