// tests/unit/test_codegen_models.c -- compiled code against the reference
// interpreter, end to end: model.ir -> model.so -> the runtime.
//
// For ppl_simple_reg and ppl_robust_reg, at the default sizes and at
// -D N=3 -D K=2, every task (forward vjp jvp vhp hvp jacobian hessian
// hessian_fwdrev hessian_revrev jacfwd jacrev) is compiled, loaded through
// include/fadc.h and run on the same inputs as ir_interp (tools/fadc/harness.c):
//   - computing in f32 (what artifacts do): largest normalized error
//     max|got - want| / max|want| per output below 1e-5;
//   - computing in f64 (--f64: only the inputs and outputs are f32; at the
//     reduced sizes): below 2e-7, i.e. every output equals the interpreter's to f32 rounding; this
//     isolates the kernel IR, fusion and index maps from f32 arithmetic;
//   - the init tasks (each declaration's seeded initializer) against
//     ir_module_init: below 1e-6 (they are computed in f64 and match bit
//     for bit in practice).
// Then three small models written for coverage, every task: layout ops
// (transpose, slice with steps, pad, concat, reshape) and the reductions;
// the elementwise table with its special functions, layer_norm, softmax,
// take; cross_entropy (take_along and its transpose), one_hot and a
// write through a slice; long reductions and matmuls of every layout.
#include <stdlib.h>
#include <string.h>

#include "codegen.h"
#include "frontend.h"
#include "harness.h"
#include "testutil.h"

static const char *const all[] = {"all"};

static void
check_module(Module *m, const char *what, int f64)
{
	CgOptions o = {.tasks = all, .ntasks = 1, .opt_level = -1, .compute_f64 = f64};
	CgCheck c = {f64 ? 2e-7 : 1e-5, 1e-6, 0, 0};
	char err[4096] = "";
	printf("%s, computing in %s: ", what, f64 ? "f64" : "f32");
	fflush(stdout);
	int nf = cg_check(m, &o, &c, stdout, err, sizeof err);
	if (nf < 0)
		fprintf(stderr, "%s: %s\n", what, err);
	CHECK(nf == 0);
}

static void
check_model(const char *file, int small)
{
	const char *root = getenv("FADC_SOURCE_DIR");
	char path[4096], what[256];
	snprintf(path, sizeof path, "%s/models/%s", root ? root : ".", file);
	const char *defs[] = {"N=3", "K=2"};
	FeOptions fo = {.diag = stderr, .defines = defs, .ndefines = small ? 2 : 0};
	Module *m = fe_parse_file(path, &fo);
	CHECK(m != NULL);
	if (!m)
		return;
	snprintf(what, sizeof what, "%s%s", file, small ? " -D N=3 -D K=2" : "");
	check_module(m, what, 0);
	if (small)
		check_module(m, what, 1);
	ir_module_free(m);
}

static const char layout_ir[] =
	"param w: f32[3, 4] = normal(0, 1, seed=1)\n"
	"param s: f32[4] = uniform(0.5, 1.5, seed=3)\n"
	"const x: f32[4, 3] = uniform(0, 1, seed=2)\n"
	"def forward() -> f32[] {\n"
	"  t = transpose(w, 0, 1)\n"
	"  p = pad(t[1:4, 0:2], [1, 0], [0, 1])\n"
	"  c = concat([p, x], axis=0)\n"
	"  r = reshape(c, [6, 4])\n"
	"  return sum(tanh(c) * c) + sum(max(w, 1)) + sum(min(w, 0)) + sum(mean(w * w, 0) * s)\n"
	"       + sum(r[::2, 1:] ** 2) + sum(logsumexp(w, 1))\n"
	"}\n";

static const char ops_ir[] =
	"param w: f32[4, 5] = normal(0, 1, seed=1)\n"
	"param b: f32[5] = uniform(0.5, 1.5, seed=2)\n"
	"const x: f32[3, 4] = uniform(-1, 1, seed=3)\n"
	"const idx: i64[2] = cast(floor(uniform(0, 3, seed=4, shape=[2])), dtype=i64)\n"
	"def forward() -> f32[] {\n"
	"  h = x @ w + b\n"
	"  a = relu(h) + abs(h) * sigmoid(h) + clamp(h, -0.5, 0.5) + maximum(h, 0.1 * h) + minimum(h, b)\n"
	"  e = erf(h) + tanh(h) + sin(h) * cos(h) + expm1(0.1 * h) + softplus(h) + hardtanh(h)\n"
	"  g = lgamma(b + 1) + digamma(b + 1) + polygamma(b + 1, n=1) + polygamma(b + 2, n=2)\n"
	"      + sqrt(b) + rsqrt(b) + pow(b, 1.5) + log1p(b) + xlogy(b, b)\n"
	"  n = layer_norm(h, b, b)\n"
	"  s = log_softmax(h, 1) + softmax(h, 0)\n"
	"  t = take(h, idx, axis=0)\n"
	"  return sum(a) + sum(e) + sum(g) + sum(n) + sum(s) + sum(t * t)\n"
	"       + mean(where(h > 0, h, -h)) + sum(resize(h, [4, 4]))\n"
	"}\n";

static const char ce_ir[] =
	"param w: f32[4, 3] = normal(0, 1, seed=1)\n"
	"const x: f32[5, 4] = uniform(-1, 1, seed=2)\n"
	"const y: i64[5] = cast(floor(uniform(0, 3, seed=3, shape=[5])), dtype=i64)\n"
	"def forward() -> f32[] {\n"
	"  l = x @ w\n"
	"  z = clone(l)\n"
	"  z[1:3, 0:2] = l[0:2, 1:3] * 2\n"
	"  return cross_entropy(l, y) + sum(one_hot(y, n=3) * l) + sum(z * z)\n"
	"}\n";

// Long reductions and contractions of every layout: the split sums (8
// accumulators over axes of 32 terms or more) and the matmul loop order
// chosen by operand strides (codegen/llvm.c), including in the
// derivatives' transposed matmuls.
static const char contraction_ir[] =
	"param a: f32[5, 40] = normal(0, 1, seed=1)\n"
	"const b: f32[40, 6] = normal(0, 1, seed=2)\n"
	"const c: f32[6, 40] = normal(0, 1, seed=3)\n"
	"def forward() -> f32[] {\n"
	"  return sum((a @ b) ** 2) + sum(a @ transpose(c, 0, 1)) + mean(a * a) + sum(logsumexp(a, 1))\n"
	"}\n";

static void
check_text(const char *name, const char *text)
{
	FeOptions fo = {.diag = stderr};
	Module *m = fe_parse_string(name, text, strlen(text), &fo);
	CHECK(m != NULL);
	if (!m)
		return;
	check_module(m, name, 0);
	check_module(m, name, 1);
	ir_module_free(m);
}

int
main(void)
{
	check_model("ppl_simple_reg.ir", 1);
	check_model("ppl_robust_reg.ir", 1);
	check_model("ppl_simple_reg.ir", 0);
	check_model("ppl_robust_reg.ir", 0);
	check_text("layout.ir", layout_ir);
	check_text("ops.ir", ops_ir);
	check_text("cross_entropy.ir", ce_ir);
	check_text("contraction.ir", contraction_ir);
	return TU_DONE("test_codegen_models");
}
