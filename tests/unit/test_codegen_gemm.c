// tests/unit/test_codegen_gemm.c -- the blocked GEMM of the LLVM backend
// (codegen/llvm.c, emit_gemm: 6 x 16 register tiles of vector
// accumulators, B packed per block of 256 reduction steps) against the
// float64 interpreter, on shapes that exercise every edge: rows not a
// multiple of 6, columns not a multiple of the tile (the scalar tail),
// reductions longer than one block and not a multiple of it, a batch, a
// transposed operand (copied to a row-major temporary by the lowering), a
// matrix-vector product (plain loops), and every first-order task (the
// derivatives are matmuls of transposes).  In f64 the compiled code does
// the interpreter's arithmetic term by term in the order of k, except that
// the fused multiply-add rounds once: normalized error <= 1e-12 (measured
// ~2e-14).  In f32, <= 5e-5: a sum of K = 300 products carries up to
// K eps_f32 = 1.8e-5 of the sum of the terms' magnitudes, and the random
// terms cancel (measured 1.2e-5; f32 rounding, not the GEMM: the f64 run
// is the exact check).  The emitted LLVM IR must hold the vector
// fused multiply-adds, so the test fails if the GEMM stops being chosen.
#include <stdlib.h>
#include <string.h>

#include "codegen.h"
#include "frontend.h"
#include "testutil.h"

static const char model[] =
    "param a: f64[37, 300] = normal(0, 1, seed=1)\n"      // K = 256 + 44
    "param b: f64[300, 53] = normal(0, 1, seed=2)\n"      // N = 3 tiles + 5
    "param c: f64[53, 300] = normal(0, 1, seed=3)\n"      // used transposed
    "param d: f64[3, 13, 300] = normal(0, 1, seed=4)\n"   // a batch of A
    "param v: f64[300, 1] = normal(0, 1, seed=5)\n"       // N = 1
    "def forward() {\n"
    "  x = a @ b\n"
    "  y = a @ transpose(c, 0, 1)\n"
    "  z = d @ b\n"
    "  w = transpose(a, 0, 1) @ x\n"
    "  return sum(x * x) * 0.01 + sum(sin(y)) + sum(z * z * 0.001) + sum(cos(w) * 0.01) + sum(a @ v)\n"
    "}\n";

static char *
to_f32(const char *src)
{
	char *s = strdup(src);
	for (char *q = strstr(s, "f64"); q; q = strstr(q + 3, "f64"))
		q[1] = '3', q[2] = '2';
	return s;
}

static void
check(int f32)
{
	char *text = f32 ? to_f32(model) : strdup(model);
	FeOptions fo = {.diag = stderr};
	Module *m = fe_parse_string("gemm.ir", text, strlen(text), &fo);
	CHECK(m != NULL);
	if (!m) {
		free(text);
		return;
	}
	static const char *const tasks[] = {"forward", "vjp", "jvp"};
	char *ir = NULL;
	size_t nir = 0;
	FILE *llvm = open_memstream(&ir, &nir);
	CgOptions o = {.tasks = tasks, .ntasks = 3, .opt_level = 2, .emit_llvm = llvm};
	CgCheck c = {f32 ? 5e-5 : 1e-12, 1e-6, 0, 0};
	char err[4096] = "";
	printf("gemm (%s): ", f32 ? "f32" : "f64");
	fflush(stdout);
	int nf = cg_check(m, &o, &c, stdout, err, sizeof err);
	if (nf < 0)
		fprintf(stderr, "gemm: %s\n", err);
	CHECK(nf == 0);
	fclose(llvm);
	CHECK(ir && strstr(ir, f32 ? "@llvm.fmuladd.v8f32" : "@llvm.fmuladd.v4f64") != NULL);
	free(ir);
	ir_module_free(m);
	free(text);
}

int
main(void)
{
	check(0);
	check(1);
	return TU_DONE("test_codegen_gemm");
}
