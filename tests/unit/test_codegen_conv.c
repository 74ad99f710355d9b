// tests/unit/test_codegen_conv.c -- the window ops compiled vs the
// interpreter: conv (1-d and 2-d; stride, padding, dilation, groups),
// max_pool, avg_pool (count_include_pad 0 and 1), adaptive_avg_pool
// (shrinking and growing), upsample_bilinear (align_corners 0 and 1,
// up and down, up to 8 times: the adjoint's inverse window), argmax, and through the derivative tasks their adjoints
// conv_input_grad, conv_weight_grad, max_pool_grad, max_pool_gather,
// avg_pool_grad, adaptive_avg_pool_grad, upsample_bilinear_grad.  Each
// small module is compiled for forward, vjp, jvp, vhp and hvp and checked
// through cg_check (tools/fadc/harness.c): normalized error <= 1e-5 computing in
// f32, <= 2e-7 computing in f64.  Ties (inputs on a grid of a few values)
// exercise max_pool's and argmax's "first maximum".  (avg_pool with
// count_include_pad is spelled as the op: avg_pool2d(..., count_include_pad=0)
// is rejected by the frontend, which turns every integer after the input
// into a per-axis list.)
#include <stdlib.h>
#include <string.h>

#include "codegen_util.h"

static const char *const tasks[] = {"forward", "vjp", "jvp", "vhp", "hvp"};

static void
check_text(const char *name, const char *text)
{
	Module *m = cgu_parse(name, text);
	if (!m)
		return;
	for (int f64 = 0; f64 < 2; f64++) {
		CgOptions o = {.tasks = tasks, .ntasks = 5, .opt_level = 1, .compute_f64 = f64};
		CgCheck c = {f64 ? 2e-7 : 1e-5, 1e-6, 0, 0};
		char label[256];
		snprintf(label, sizeof label, "%s, computing in %s", name, f64 ? "f64" : "f32");
		cgu_check(m, &o, &c, name, label);
	}
	ir_module_free(m);
}

static const char conv2d_ir[] =
	"param w: f32[6, 2, 3, 2] = normal(0, 0.5, seed=1)\n"
	"param b: f32[6] = normal(0, 0.5, seed=2)\n"
	"param x: f32[2, 4, 9, 7] = uniform(-1, 1, seed=3)\n"
	"param v: f32[4, 4, 1, 1] = normal(0, 0.5, seed=4)\n"
	"def forward() -> f32[] {\n"
	"  y = conv2d(x, w, b, stride=[2, 1], padding=[1, 2], dilation=[2, 1], groups=2)\n"
	"  z = conv2d(x, w, padding=1, groups=2)\n"
	"  u = conv2d(tanh(x), v, stride=2)\n"
	"  return sum(tanh(y)) + sum(z * z) + sum(u * u * u)\n"
	"}\n";

static const char conv1d_ir[] =
	"param w: f32[4, 3, 3] = normal(0, 0.5, seed=1)\n"
	"param d: f32[3, 1, 4] = normal(0, 0.5, seed=2)\n"
	"param x: f32[2, 3, 13] = uniform(-1, 1, seed=3)\n"
	"def forward() -> f32[] {\n"
	"  y = conv1d(x, w, stride=2, padding=1, dilation=2)\n"
	"  z = conv1d(x * x, d, padding=3, groups=3)\n"
	"  return sum(tanh(y)) + sum(sigmoid(z))\n"
	"}\n";

static const char maxpool_ir[] =
	"param x: f32[2, 3, 9, 8] = floor(4 * uniform(0, 1, seed=1))\n"
	"param y: f32[2, 3, 10] = uniform(-1, 1, seed=2)\n"
	"param s: f32[2, 3, 9, 8] = uniform(0.5, 1.5, seed=3)\n"
	"def forward() -> f32[] {\n"
	"  a = max_pool2d(x * s, 3, stride=2, padding=1)\n"
	"  b = max_pool2d(x + s, [2, 3], stride=[1, 2], padding=[1, 1], dilation=[2, 1])\n"
	"  c = max_pool2d(x, 2)\n"
	"  d = max_pool1d(y, 2, stride=2, padding=1)\n"
	"  e = max_pool2d(x * s, [2, 4], stride=[3, 2], padding=[0, 1])\n"
	"  return sum(a * a) + sum(tanh(b)) + sum(c * s[:, :, 0:4, 0:4]) + sum(d * d * d) + sum(e * e)\n"
	"}\n";

static const char avgpool_ir[] =
	"param x: f32[2, 3, 9, 8] = uniform(-1, 1, seed=1)\n"
	"param y: f32[2, 2, 11] = uniform(-1, 1, seed=2)\n"
	"def forward() -> f32[] {\n"
	"  a = avg_pool2d(x, 3, stride=2, padding=1)\n"
	"  b = avg_pool(x, kernel=[3, 3], stride=[2, 2], padding=[1, 1], count_include_pad=0)\n"
	"  c = avg_pool2d(x * x, [2, 3], stride=[2, 1], padding=[1, 0])\n"
	"  d = avg_pool(y, kernel=[4], stride=[3], padding=[2], count_include_pad=0)\n"
	"  e = avg_pool2d(x * x, [2, 4], stride=[3, 2], padding=[0, 1])\n"
	"  return sum(a * a) + sum(tanh(b)) + sum(c * c) + sum(d * d * d) + sum(e * e * e)\n"
	"}\n";

static const char adaptive_ir[] =
	"param x: f32[2, 3, 7, 5] = uniform(-1, 1, seed=1)\n"
	"param y: f32[2, 2, 9] = uniform(-1, 1, seed=2)\n"
	"def forward() -> f32[] {\n"
	"  a = adaptive_avg_pool2d(x, [3, 2])\n"
	"  b = adaptive_avg_pool2d(x, 1)\n"
	"  c = adaptive_avg_pool2d(x * x, [10, 6])\n"
	"  d = adaptive_avg_pool1d(y, 4)\n"
	"  return sum(a * a) + sum(tanh(b)) + sum(c * c) + sum(d * d * d)\n"
	"}\n";

static const char upsample_ir[] =
	"param x: f32[2, 3, 3, 4] = uniform(-1, 1, seed=1)\n"
	"param y: f32[1, 2, 5, 7] = uniform(-1, 1, seed=2)\n"
	"def forward() -> f32[] {\n"
	"  a = upsample_bilinear(x, size=[7, 9])\n"
	"  b = upsample_bilinear(x * x, size=[8, 5], align_corners=1)\n"
	"  c = upsample_bilinear(y, size=[2, 3])\n"
	"  d = upsample_bilinear(y, size=[1, 4], align_corners=1)\n"
	"  e = upsample_bilinear(y, size=[3, 1])\n"
	"  f = upsample_bilinear(x, size=[47, 9])\n"
	"  return sum(a * a) + sum(tanh(b)) + sum(c * c * c) + sum(d * d) + sum(e * e) + sum(f * f * f)\n"
	"}\n";

// Upsampling by up to 8 (fcn_resnet's head: 60 -> 480, align_corners=0),
// both modes, ratios that are not integers, a shrink: the adjoint tests
// only the candidates of its inverse window (codegen/lower_window.c,
// bilinear_up), at most 2 x 8 + 5 along an axis growing 8 times, where it
// tested every output position.
static const char upsample_wide_ir[] =
	"param x: f32[1, 2, 6, 5] = uniform(-1, 1, seed=1)\n"
	"param y: f32[1, 1, 7, 3] = uniform(-1, 1, seed=2)\n"
	"param z: f32[1, 1, 30, 2] = uniform(-1, 1, seed=3)\n"
	"def forward() -> f32[] {\n"
	"  a = upsample_bilinear(x, size=[48, 37])\n"
	"  b = upsample_bilinear(x * x, size=[41, 13], align_corners=1)\n"
	"  c = upsample_bilinear(y, size=[56, 17], align_corners=1)\n"
	"  d = upsample_bilinear(y * y, size=[4, 2])\n"
	"  e = upsample_bilinear(z, size=[240, 9])\n"
	"  return sum(a * a) + sum(tanh(b)) + sum(c * c * c) + sum(d * d) + sum(sin(e))\n"
	"}\n";

// Every upsample_bilinear_grad kernel of upsample_wide_ir's vjp sums over
// at most 21 candidate rows (the outputs are 4 to 240 rows high).
static void
check_upsample_window(void)
{
	Module *m = cgu_parse("upsample_wide.ir", upsample_wide_ir);
	if (!m)
		return;
	static const char *const vjp[] = {"vjp"};
	char *kir = NULL;
	size_t nkir = 0;
	FILE *kf = open_memstream(&kir, &nkir);
	CgOptions o = {.tasks = vjp, .ntasks = 1, .opt_level = 0, .emit_kir = kf};
	CgCheck c = {1e-5, 1e-6, 0, 0};
	cgu_check(m, &o, &c, "upsample_wide.ir", "upsample_wide.ir (vjp, -O0)");
	fclose(kf);
	int nk = 0, worst = 0;
	for (const char *q = kir ? strstr(kir, "= upsample_bilinear_grad (") : NULL; q;
	     q = strstr(q + 1, "= upsample_bilinear_grad (")) {
		const char *r = strstr(q, "sum over v"), *lt = r ? strstr(r, " < ") : NULL;
		int e = lt ? atoi(lt + 3) : 1 << 30;
		worst = e > worst ? e : worst;
		nk++;
	}
	printf("upsample_wide.ir: %d upsample_bilinear_grad kernels, at most %d candidate rows\n", nk, worst);
	CHECK(nk == 5 && worst <= 21);
	free(kir);
	ir_module_free(m);
}

// The first neighbour in integer arithmetic (codegen/lower_window.c,
// bilinear_i0_int) where it equals the interpreter's f64 one for every
// output: no f64 -> i64 cast in the kernels of 6 -> 48 and 5 -> 40 (8x,
// fcn_resnet's ratio) nor of 4 -> 9; 3 -> 47 (align_corners=0) has outputs
// whose f64 source rounds across an integer, so its axis keeps the cast.
// The values are those of upsample_ir and upsample_wide_ir's checks.
static void
check_upsample_int(void)
{
	static const char *const ir[2] = {
	    "param x: f32[1, 2, 6, 5] = uniform(-1, 1, seed=1)\n"
	    "def forward() -> f32[] {\n"
	    "  a = upsample_bilinear(x, size=[48, 40])\n"
	    "  return sum(a * a * a)\n"
	    "}\n",
	    "param x: f32[1, 2, 3, 4] = uniform(-1, 1, seed=1)\n"
	    "def forward() -> f32[] {\n"
	    "  a = upsample_bilinear(x, size=[47, 9])\n"
	    "  return sum(a * a * a)\n"
	    "}\n"};
	static const char *const vjp[] = {"forward", "vjp"};
	for (int i = 0; i < 2; i++) {
		Module *m = cgu_parse(i ? "upsample_47.ir" : "upsample_8x.ir", ir[i]);
		if (!m)
			return;
		char *kir = NULL;
		size_t nkir = 0;
		FILE *kf = open_memstream(&kir, &nkir);
		CgOptions o = {.tasks = vjp, .ntasks = 2, .opt_level = 1, .emit_kir = kf};
		CgCheck c = {1e-5, 1e-6, 0, 0};
		cgu_check(m, &o, &c, i ? "upsample_47.ir" : "upsample_8x.ir", "vjp, integer i0");
		fclose(kf);
		int casts = 0;
		for (const char *q = kir ? strstr(kir, "= cast.i64 ") : NULL; q; q = strstr(q + 1, "= cast.i64 "))
			casts++;
		printf("upsample %s: %d f64 -> i64 casts\n", i ? "3 -> 47, 4 -> 9" : "8x", casts);
		CHECK(i ? casts > 0 : casts == 0);
		free(kir);
		ir_module_free(m);
	}
}

static const char argmax_ir[] =
	"const x: f32[4, 6, 5] = floor(3 * uniform(0, 1, seed=1))\n"
	"const t: f32[4, 6, 5] = uniform(-1, 1, seed=3)\n"
	"param s: f32[4, 6, 5] = uniform(-1, 1, seed=2)\n"
	"def forward() -> f32[] {\n"
	"  i = argmax(x, axis=1)\n"
	"  j = argmax(t, axis=2, keepdim=1)\n"
	"  k = argmax(x + t, axis=0)\n"
	"  return sum(one_hot(i, n=6) * transpose(s, 1, 2)) + sum(one_hot(j, n=5) * reshape(s, [4, 6, 1, 5]))\n"
	"       + sum(one_hot(k, n=4) * reshape(s[0:1, :, 0:4], [6, 1, 4])) + sum(s * s)\n"
	"}\n";

int
main(void)
{
	check_text("conv2d.ir", conv2d_ir);
	check_text("conv1d.ir", conv1d_ir);
	check_text("max_pool.ir", maxpool_ir);
	check_text("avg_pool.ir", avgpool_ir);
	check_text("adaptive_avg_pool.ir", adaptive_ir);
	check_text("upsample_bilinear.ir", upsample_ir);
	check_text("upsample_wide.ir", upsample_wide_ir);
	check_upsample_window();
	check_upsample_int();
	check_text("argmax.ir", argmax_ir);
	return TU_DONE("test_codegen_conv");
}
