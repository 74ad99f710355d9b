// tests/unit/test_codegen_gemm_edges.c -- the CPU's blocked GEMM
// (codegen/llvm_gemm.c) at edge shapes, against the float64 interpreter:
// each of M, N and K takes the sizes 1, 7, 17, 33 and 97 in some product
// (the others sized so that the product is large enough for the GEMM),
// with K = 300 across two packed blocks of 256 steps, M = 299 and 300
// across several groups of rows (126 or 60 with 256-bit tiles, 252 or 120 with
// 512-bit ones), a transposed A (packed from its columns), a transposed B
// (the lowering's row-major copy), a batch carried by A (merged into the
// rows: B read once) and one carried by B (A shared).  Against the GEMM's
// tiles (6 x 16 f32 and 6 x 8 f64 with 256-bit vectors, 12 x 32 and 12 x
// 16 with 512-bit ones) these sizes leave every kind of edge: rows past
// the last MR-row block (one tile of M mod MR rows), fewer rows than a
// tile (one tile of M rows, up to 4 vectors wide), columns past the last
// tile (masked), K shorter than a block.  Each runs twice: with the
// target's own tiles and with FADC_GEMM_VBYTES=64 (the 512-bit tiles of
// AVX-512 targets, emulated on any x86-64-v3 machine); where the host has
// AVX-512F, a third time compiled for x86-64-v4 (the real zmm code).
// Then once more with FADC_GEMM_TB=3 (three column tiles per iteration of
// the range, B's panels packed together: shapes this small take one
// otherwise), so that a ragged last block of tiles, the masked tile inside
// a block and the remainder rows over several tiles are checked too.
// Then with FADC_GEMM_KSPLIT=3 (the reduction cut into three fixed parts,
// summed into C and two partial blocks and added in order after the
// range: gemm_ksplit; only products of 2^18 multiply-adds or more split,
// here 299 x 97 x 300 in parts of 100 steps and 24 x 130 x 97 x 300 with
// a batch in B, A packed), f32 at 1, 2, 3 and 8 threads the same bytes
// too: the parts are fixed by the shape, not by the threads.
//
// Tolerance (normalized error): f64 <= 1e-12, the interpreter's
// arithmetic term by term in the order of k except the fused multiply-
// add's single rounding (measured ~1e-15); f32 <= 5e-5, K eps_f32 = 1.8e-5
// of the terms' magnitudes at K = 300 (measured ~1e-6).  The emitted IR
// must hold the tile vectors' fused multiply-adds (the GEMM was chosen),
// and the f32 artifact's outputs must be the same bytes at 1, 2, 3 and 8
// threads, with the pool used (the products of 299 x 97 x 300 and 24 x
// 130 x 97 x 300 split).
#include <stdlib.h>
#include <string.h>

#include "codegen_util.h"
#include "pool_util.h"

// clang-format off
static const char model[] =
    "param a1: f64[1, 97] = normal(0, 1, seed=1)\n"
    "param b1: f64[97, 97] = normal(0, 1, seed=2)\n"
    "param a2: f64[7, 33] = normal(0, 1, seed=3)\n"
    "param b2: f64[33, 97] = normal(0, 1, seed=4)\n"
    "param a3: f64[17, 300] = normal(0, 1, seed=5)\n"
    "param b3: f64[300, 33] = normal(0, 1, seed=6)\n"
    "param a4: f64[33, 17] = normal(0, 1, seed=7)\n"
    "param b4: f64[17, 97] = normal(0, 1, seed=8)\n"
    "param a5: f64[97, 7] = normal(0, 1, seed=9)\n"
    "param b5: f64[7, 33] = normal(0, 1, seed=10)\n"
    "param a6: f64[97, 33] = normal(0, 1, seed=11)\n"
    "param b6: f64[33, 1] = normal(0, 1, seed=12)\n"
    "param a7: f64[33, 97] = normal(0, 1, seed=13)\n"
    "param b7: f64[97, 7] = normal(0, 1, seed=14)\n"
    "param b8: f64[33, 17] = normal(0, 1, seed=15)\n"
    "param a9: f64[300, 1] = normal(0, 1, seed=16)\n"
    "param b9: f64[1, 97] = normal(0, 1, seed=17)\n"
    "param a10: f64[300, 299] = normal(0, 1, seed=18)\n" // used transposed: M = 299, K = 300
    "param b10: f64[300, 97] = normal(0, 1, seed=19)\n"
    "param a11: f64[97, 17] = normal(0, 1, seed=24)\n"
    "param b11: f64[33, 17] = normal(0, 1, seed=20)\n"   // used transposed: K = 17, N = 33
    "param a12: f64[3, 7, 33] = normal(0, 1, seed=21)\n" // a batch in A: 21 rows
    "param a13: f64[17, 33] = normal(0, 1, seed=22)\n"
    "param b13: f64[3, 33, 97] = normal(0, 1, seed=23)\n" // a batch in B
    "param a14: f64[300, 130] = normal(0, 1, seed=25)\n"  // used transposed, shared
    "param b14: f64[24, 300, 97] = normal(0, 1, seed=26)\n"
    "param a15: f64[32, 4096] = normal(0, 1, seed=27)\n"  // few column tiles, long K: split
    "param b15: f64[4096, 64] = normal(0, 1, seed=28)\n"
    "def forward() {\n"
    "  return a1 @ b1, a2 @ b2, a3 @ b3, a4 @ b4, a5 @ b5, a6 @ b6, a7 @ b7, a6 @ b8,\n"
    "         a9 @ b9, transpose(a10, 0, 1) @ b10, a11 @ transpose(b11, 0, 1),\n"
    "         a12 @ b2, a13 @ b13, transpose(a14, 0, 1) @ b14, a15 @ b15\n"
    "}\n";
// clang-format on
// (M, N, K): (1, 97, 97) (7, 97, 33) (17, 33, 300) (33, 97, 17) (97, 33, 7)
// (97, 1, 33) (33, 7, 97) (97, 17, 33) (300, 97, 1) (299, 97, 300)^T-A
// (97, 33, 17)^T-B, (3 x 7, 97, 33), 3 x (17, 97, 33), 24 x (130, 97,
// 300)^T-A.  The last has 24 x 7 x 2 (256-bit tiles) or 24 x 4 x 1 range
// iterations, enough for A's packing (GEMM_PACKA_MIN_RANGE = 96): each
// outer point packs the shared A again, a chunk starting inside a group
// packs it too; the others read A in place.  The last, (32, 64, 4096),
// has 1 to 8 column tiles of one row group and 2^23 multiply-adds: the
// K split's own rule cuts it into 8 parts of 512 steps (6 in f64 with
// 256-bit tiles), so every pass checks a split product (the emitted IR
// holds its sum, gemm.ksum), and the thread checks its bytes.

// The target CPU of the compiles: NULL (x86-64-v3), or "x86-64-v4" for
// the real 512-bit code of AVX-512 machines (zmm registers, LLVM told to
// keep 512-bit vectors), checked where the host has AVX-512F.
static const char *cpu;

static int
lanes(int f32)
{
	const char *vb = getenv("FADC_GEMM_VBYTES");
	int wide = (vb && !strcmp(vb, "64")) || cpu;
	return (wide ? 64 : 32) / (f32 ? 4 : 8);
}

static void
check(int f32)
{
	char *text = f32 ? cgu_to_f32(model) : strdup(model);
	Module *m = cgu_parse("gemm_edges.ir", text);
	if (!m) {
		free(text);
		return;
	}
	static const char *const tasks[] = {"forward"};
	char *ir = NULL;
	size_t nir = 0;
	FILE *llvm = open_memstream(&ir, &nir);
	CgOptions o = {.tasks = tasks, .ntasks = 1, .opt_level = 2, .emit_llvm = llvm, .cpu = cpu};
	CgCheck c = {f32 ? 5e-5 : 1e-12, 1e-6, 0, 0};
	char label[256], fma[64];
	snprintf(label, sizeof label, "gemm_edges.ir (%s, %d-bit tiles%s)", f32 ? "f32" : "f64",
	         lanes(f32) * (f32 ? 32 : 64), cpu ? ", x86-64-v4" : "");
	cgu_check(m, &o, &c, "gemm_edges.ir", label);
	fclose(llvm);
	snprintf(fma, sizeof fma, "@llvm.fmuladd.v%d%s", lanes(f32), f32 ? "f32" : "f64");
	CHECK(ir && strstr(ir, fma) != NULL);
	CHECK(ir && strstr(ir, "gemm.ksum") != NULL);
	free(ir);
	ir_module_free(m);
	free(text);
}

// The f32 forward at 1, 2, 3 and 8 threads: the same bytes.
static void
check_threads(void)
{
	char *text = cgu_to_f32(model);
	static const char *const fwd[] = {"forward"};
	char so[256];
	if (pu_compile("gemm_edges.ir", text, 0, NULL, 0, fwd, 1, 2, so, sizeof so)) {
		pu_check_threads(so, "forward", 1);
		unlink(so);
	}
	free(text);
}

int
main(void)
{
	for (int wide = 0; wide < 2; wide++) {
		if (wide)
			setenv("FADC_GEMM_VBYTES", "64", 1);
		check(0);
		check(1);
		check_threads();
	}
	unsetenv("FADC_GEMM_VBYTES");
	setenv("FADC_GEMM_TB", "3", 1);
	check(0);
	check(1);
	check_threads();
	unsetenv("FADC_GEMM_TB");
	setenv("FADC_GEMM_KSPLIT", "3", 1);
	check(0);
	check(1);
	check_threads();
	unsetenv("FADC_GEMM_KSPLIT");
#if defined(__x86_64__)
	__builtin_cpu_init();
	if (__builtin_cpu_supports("avx512f")) {
		cpu = "x86-64-v4";
		check(0);
		check(1);
	} else
		printf("no AVX-512F here: the x86-64-v4 code is checked through FADC_GEMM_VBYTES=64 only\n");
#endif
	return TU_DONE("test_codegen_gemm_edges");
}
