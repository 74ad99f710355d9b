// tests/unit/test_codegen_first_conv.c -- a first-layer convolution (task
// input by task input: kir_widen_first_conv, codegen/kir.c) is computed in
// f64 and rounded once, so its compiled f32 output is the exact result
// correctly rounded.  Oracle: the float64 interpreter, whose output is the
// same exact result rounded to f32 (its sum in double differs from ours by
// at most K 2^-53 sum|terms|, ~1e-13 here).  Two correctly rounded values
// of (nearly) the same number differ by 0 or, across a rounding boundary,
// one ulp, at most 2^-23 |y| <= 2^-23 max|y|: the tolerance on the
// normalized error max|got - want| / max|want| is 2^-23 = 1.19e-7.
//
// The cases are stems: 7 x 7 stride 2 over 3 channels of U[0, 1) images
// (147 terms of one sign of x, Kaiming weights: outputs near zero have
// cancelled), as resnet18's, fcn_resnet's and detr's first layer, and a
// 3 x 3 one.  Summed in f32 in order of k (the GEMM's), they are 3e-7 and
// more off (hundreds to thousands of ulps on the cancelled outputs), which
// this tolerance rejects.  The f64 build (computing in f64) is checked at
// the same tolerance.  vjp also runs the forward with the widened
// convolution before its backward (the adjoints stay f32: 1e-5).
#include <stdlib.h>

#include "codegen_util.h"

static const char stem7_ir[] =
	"const x: f32[2, 3, 64, 64] = uniform(0, 1, seed=1)\n"
	"param w: f32[16, 3, 7, 7] = kaiming_normal(mode=fan_out, seed=2)\n"
	"def forward() -> f32[2, 16, 32, 32] {\n"
	"  return conv2d(x, w, stride=2, padding=3)\n"
	"}\n";

static const char stem3_ir[] =
	"const x: f32[2, 3, 40, 40] = uniform(0, 1, seed=3)\n"
	"param w: f32[24, 3, 3, 3] = kaiming_normal(mode=fan_out, seed=4)\n"
	"def forward() -> f32[2, 24, 40, 40] {\n"
	"  return conv2d(x, w, padding=1)\n"
	"}\n";

// Through a derivative task: the forward convolution inside vjp is the
// widened one; the rest is the usual f32 at the usual tolerance.
static const char stem_vjp_ir[] =
	"const x: f32[2, 3, 32, 32] = uniform(0, 1, seed=5)\n"
	"param w: f32[8, 3, 7, 7] = kaiming_normal(mode=fan_out, seed=6)\n"
	"def forward() -> f32[] {\n"
	"  y = conv2d(x, w, stride=2, padding=3)\n"
	"  return sum(tanh(y) * y)\n"
	"}\n";

static void
check(const char *name, const char *text, const char *task, double tol32)
{
	Module *m = cgu_parse(name, text);
	if (!m)
		return;
	const char *tasks[] = {task};
	for (int f64 = 0; f64 < 2; f64++) {
		CgOptions o = {.tasks = tasks, .ntasks = 1, .opt_level = 1, .compute_f64 = f64};
		CgCheck c = {f64 ? 0x1p-23 : tol32, 1e-6, 0, 0};
		char label[256];
		snprintf(label, sizeof label, "%s %s, computing in %s", name, task, f64 ? "f64" : "f32");
		cgu_check(m, &o, &c, name, label);
	}
	ir_module_free(m);
}

int
main(void)
{
	check("stem7", stem7_ir, "forward", 0x1p-23);
	check("stem3", stem3_ir, "forward", 0x1p-23);
	check("stem_vjp", stem_vjp_ir, "vjp", 1e-5);
	return TU_DONE("test_codegen_first_conv");
}
