// codegen/cuda_mma.c -- strict f32 GEMMs on tensor cores (3xTF32), printed
// as CUDA C beside a task's f32 GEMM records (issue 20; docs/CUDA.md,
// "Strict f32 GEMMs on tensor cores: 3xTF32").
//
// Why.  Strict fp32 (PyTorch's default for matmuls) runs the GEMM records
// through cuBLAS SGEMM: FFMA, about 60 TFLOP/s at best on an H200, 77% of
// the transformer's vjp.  The tensor cores take TF32 (10 mantissa bits)
// at several times that rate, which alone costs accuracy (--allow-tf32:
// ~5e-4 relative a product).  3xTF32 gets fp32-level accuracy back:
//   a = ah + al + ea,  ah = tf32(a), al = tf32(a - ah),
//   |a - ah| <= 2^-11 |a|,  |ea| <= 2^-11 |a - ah| <= 2^-22 |a|
// (cvt.rna rounds to nearest, so each part keeps 11 significant bits), and
//   a b = ah bh + ah bl + al bh + (al bl + ea b + a eb + ...),
// the bracket ~2^-21 |a b| at most: the three tensor-core products,
// accumulated in fp32, give a product about as exact as an FFMA's 2^-24
// rounding, and the sum over K rounds in fp32 as SGEMM's does.  (cuBLAS
// offers no such mode on Hopper: its FP32 emulation, CUBLAS_COMPUTE_32F_
// EMULATED_16BFX9, runs on Blackwell's BF16 tensor cores only.)
//
// The kernel: mma.sync.m16n8k8 .tf32 (sm_80 and later, so sm_90), block
// tiles BM x BN over C, K in slices of BK = 16 copied global -> shared
// with cp.async, S slices in flight (S - 1 ahead of the one multiplied:
// the first version loaded one slice ahead through registers and waited
// on global memory every slice, 1.3-2.4 us a slice on an H200, 3-5 TFLOP/s
// at 512^3).  Each element is split into head and tail as a warp reads its
// fragment from shared memory.  Each warp owns a (BM / WM) x (BN / WN)
// part of the block tile: MI x NI tiles of 16 x 8, three mma each per 8
// of K (al bh and ah bl first, the small terms, then ah bh) into a
// slice's own accumulators, added to the running sums in fp32 after the
// slice: the tensor cores truncate as they accumulate, and summing a
// long K inside them drifted (3.2e-5 of max |C| at K = 4096 against
// SGEMM's 9.5e-7, measured on an H200).  Every load and store is
// bounds-checked (M, N and K need not be multiples of the tiles; an
// element past K reads 0), the operand forms are the GEMM record's
// (docs/ARTIFACT.md): A(i, k) at i lda + k or, transposed, at k lda + i;
// B(k, j) at k ldb + j or at j ldb + k; C(i, j) at i ldc + j; batch z adds
// z sa, z sb, z sc (grid.z strides over the batch).  Two tiles: 128 x 128
// (8 warps, 2 slices in flight: 34 KB of shared memory, 224-240
// registers) and 64 x 64 (4 warps, 3 slices: 27 KB, ~160 registers, 3
// blocks an SM: more blocks for a small M N).  The runtime times both
// against cuBLAS on the GPU and runs the fastest (runtime/cublas.c,
// rtcu_blas_gemm), so a record never runs slower than cuBLAS did (up to
// the timing's noise).
//
// Fragments of mma.m16n8k8 with .tf32 (PTX ISA, "Matrix fragments for
// mma.m16n8k8"), lane = 4 g + t:
//   A (16 x 8, row): a0 (g, t), a1 (g + 8, t), a2 (g, t + 4), a3 (g + 8, t + 4);
//   B (8 x 8, col):  b0 (t, g), b1 (t + 4, g);
//   C (16 x 8):      c0 (g, 2t), c1 (g, 2t + 1), c2 (g + 8, 2t), c3 (g + 8, 2t + 1).
// The shared arrays are [k][i] with rows of BM + 8 words: a warp's
// fragment load reads words (t + const) (BM + 8) + g + const, banks
// 8 t + g (mod 32) for BM + 8 = 8 (mod 32): all 32 distinct.  cp.async
// of 4 bytes (.ca) takes any alignment, so lda, ldb and the offsets need
// none; a copy past the matrix has source size 0 (zero-filled).
#include "cuda_mma.h"

#include <stdlib.h>
#include <string.h>

#include "cuda_sched.h"

static const char mma_src[] =
    "\n// 3xTF32 GEMMs for the f32 GEMM records (codegen/cuda_mma.c): the runtime\n"
    "// times them against cuBLAS and runs the faster.  a = ah + al, ah = tf32(a),\n"
    "// al = tf32(a - ah); a b ~ al bh + ah bl + ah bh, accumulated in fp32.\n"
    "__device__ __forceinline__ unsigned fadc_mma_tf32(float x) {\n"
    "\tunsigned r;\n"
    "\tasm(\"cvt.rna.tf32.f32 %0, %1;\" : \"=r\"(r) : \"f\"(x));\n"
    "\treturn r;\n"
    "}\n"
    "// A non-finite a (or one that rounds to inf) keeps its head alone: the\n"
    "// tail would be NaN (inf - inf) where cuBLAS's product is +-inf.\n"
    "__device__ __forceinline__ void fadc_mma_split(float x, unsigned *hi, unsigned *lo) {\n"
    "\tunsigned h = fadc_mma_tf32(x);\n"
    "\tfloat d = x - __uint_as_float(h);\n"
    "\t*hi = h;\n"
    "\t*lo = fabsf(d) <= 3.4e38f ? fadc_mma_tf32(d) : 0u;\n"
    "}\n"
    "__device__ __forceinline__ void fadc_mma_op(float *d, const unsigned *a, const unsigned *b) "
    "{\n"
    "\tasm(\"mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 \"\n"
    "\t    \"{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\"\n"
    "\t    : \"+f\"(d[0]), \"+f\"(d[1]), \"+f\"(d[2]), \"+f\"(d[3])\n"
    "\t    : \"r\"(a[0]), \"r\"(a[1]), \"r\"(a[2]), \"r\"(a[3]), \"r\"(b[0]), \"r\"(b[1]));\n"
    "}\n"
    "__device__ __forceinline__ unsigned fadc_mma_smem(const void *p) {\n"
    "\tunsigned a;\n"
    "\tasm(\"{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }\" : \"=r\"(a) : "
    "\"l\"(p));\n"
    "\treturn a;\n"
    "}\n"
    "// Slice k0 .. k0 + 16 of X(i, k), i in [i0, i0 + BI), of x stored at i ld + k\n"
    "// (KC = 1: k contiguous, consecutive threads along k) or at k ld + i (KC = 0),\n"
    "// copied asynchronously (cp.async, 4 bytes: any alignment) into s[k][i]; an\n"
    "// element past the matrix is zero-filled (source size 0, x itself as the\n"
    "// address).\n"
    "template <int KC, int BI, int T, int L>\n"
    "__device__ __forceinline__ void fadc_mma_ld(float (*s)[L], const float *x, int ld, int i0, "
    "int ni,\n"
    "                                            int k0, int nk, int tid) {\n"
    "#pragma unroll\n"
    "\tfor (int q = 0; q < BI * 16 / T; q++) {\n"
    "\t\tint e = tid + q * T, k = KC ? e % 16 : e / BI, i = KC ? e / 16 : e % BI;\n"
    "\t\tint gi = i0 + i, gk = k0 + k, in = gi < ni && gk < nk;\n"
    "\t\tconst float *src = in ? x + (KC ? (long long)gi * ld + gk : (long long)gk * ld + gi) : "
    "x;\n"
    "\t\tasm volatile(\"cp.async.ca.shared.global [%0], [%1], 4, %2;\" "
    "::\"r\"(fadc_mma_smem(&s[k][i])),\n"
    "\t\t             \"l\"(src), \"r\"(in ? 4 : 0));\n"
    "\t}\n"
    "}\n"
    "// C_z = op(A_z) op(B_z), z < batch; blocks of BM x BN, WM x WN warps; S\n"
    "// slices of 16 of K in flight (cp.async groups).  Each slice's products\n"
    "// go into accumulators of their own, added to the running sums after\n"
    "// the slice: the tensor cores' accumulation truncates, so a long K would\n"
    "// otherwise drift (about K / 8 truncations of the running sum); this way\n"
    "// only a slice's 16 terms are summed inside them, the slices in fp32 with\n"
    "// rounding to nearest, as SGEMM sums.\n"
    "template <int TA, int TB, int BM, int BN, int WM, int WN, int S>\n"
    "__device__ __forceinline__ void fadc_mma3(float *__restrict__ C, const float *__restrict__ "
    "A,\n"
    "                                          const float *__restrict__ B, int M, int N, int K,\n"
    "                                          int lda, int ldb, int ldc, long long sa,\n"
    "                                          long long sb, long long sc, int batch) {\n"
    "\tenum { BK = 16, T = 32 * WM * WN, MI = BM / WM / 16, NI = BN / WN / 8, LA = BM + 8,\n"
    "\t       LB = BN + 8 };\n"
    "\t__shared__ __align__(16) float sA[S][BK][LA], sB[S][BK][LB];\n"
    "\tconst int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, t = lane & "
    "3;\n"
    "\tconst int wm = warp / WN * (BM / WM), wn = warp % WN * (BN / WN);\n"
    "\tconst int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN, ns = (K + BK - 1) / BK;\n"
    "\tfor (int z = blockIdx.z; z < batch; z += gridDim.z) {\n"
    "\t\tconst float *a = A + z * sa, *b = B + z * sb;\n"
    "\t\tfloat *c = C + z * sc;\n"
    "\t\tfloat acc[MI][NI][4];\n"
    "#pragma unroll\n"
    "\t\tfor (int i = 0; i < MI; i++)\n"
    "#pragma unroll\n"
    "\t\t\tfor (int j = 0; j < NI; j++)\n"
    "#pragma unroll\n"
    "\t\t\t\tfor (int r = 0; r < 4; r++)\n"
    "\t\t\t\t\tacc[i][j][r] = 0.f;\n"
    "\t\t// A(i, k): k contiguous unless transposed; B(k, j) as X(j, k): k contiguous\n"
    "\t\t// when transposed.  The first S - 1 slices in flight, a group each.\n"
    "#pragma unroll\n"
    "\t\tfor (int q = 0; q < S - 1; q++) {\n"
    "\t\t\tif (q < ns) {\n"
    "\t\t\t\tfadc_mma_ld<!TA, BM, T, LA>(sA[q], a, lda, m0, M, q * BK, K, tid);\n"
    "\t\t\t\tfadc_mma_ld<TB, BN, T, LB>(sB[q], b, ldb, n0, N, q * BK, K, tid);\n"
    "\t\t\t}\n"
    "\t\t\tasm volatile(\"cp.async.commit_group;\");\n"
    "\t\t}\n"
    "\t\tfor (int it = 0; it < ns; it++) {\n"
    "\t\t\t// This thread's copies of slice it are done; the barrier makes\n"
    "\t\t\t// everyone's visible and frees the buffer of slice it - 1.\n"
    "\t\t\tasm volatile(\"cp.async.wait_group %0;\" ::\"n\"(S - 2));\n"
    "\t\t\t__syncthreads();\n"
    "\t\t\tint nx = it + S - 1;\n"
    "\t\t\tif (nx < ns) {\n"
    "\t\t\t\tfadc_mma_ld<!TA, BM, T, LA>(sA[nx % S], a, lda, m0, M, nx * BK, K, tid);\n"
    "\t\t\t\tfadc_mma_ld<TB, BN, T, LB>(sB[nx % S], b, ldb, n0, N, nx * BK, K, tid);\n"
    "\t\t\t}\n"
    "\t\t\tasm volatile(\"cp.async.commit_group;\");\n"
    "\t\t\tconst int st = it % S;\n"
    "\t\t\tfloat part[MI][NI][4];\n"
    "#pragma unroll\n"
    "\t\t\tfor (int i = 0; i < MI; i++)\n"
    "#pragma unroll\n"
    "\t\t\t\tfor (int j = 0; j < NI; j++)\n"
    "#pragma unroll\n"
    "\t\t\t\t\tfor (int r = 0; r < 4; r++)\n"
    "\t\t\t\t\t\tpart[i][j][r] = 0.f;\n"
    "#pragma unroll\n"
    "\t\t\tfor (int ks = 0; ks < BK; ks += 8) {\n"
    "\t\t\t\tunsigned ah[MI][4], al[MI][4], bh[NI][2], bl[NI][2];\n"
    "#pragma unroll\n"
    "\t\t\t\tfor (int i = 0; i < MI; i++) {\n"
    "\t\t\t\t\tint r = wm + i * 16 + g;\n"
    "\t\t\t\t\tfadc_mma_split(sA[st][ks + t][r], &ah[i][0], &al[i][0]);\n"
    "\t\t\t\t\tfadc_mma_split(sA[st][ks + t][r + 8], &ah[i][1], &al[i][1]);\n"
    "\t\t\t\t\tfadc_mma_split(sA[st][ks + t + 4][r], &ah[i][2], &al[i][2]);\n"
    "\t\t\t\t\tfadc_mma_split(sA[st][ks + t + 4][r + 8], &ah[i][3], &al[i][3]);\n"
    "\t\t\t\t}\n"
    "#pragma unroll\n"
    "\t\t\t\tfor (int j = 0; j < NI; j++) {\n"
    "\t\t\t\t\tint col = wn + j * 8 + g;\n"
    "\t\t\t\t\tfadc_mma_split(sB[st][ks + t][col], &bh[j][0], &bl[j][0]);\n"
    "\t\t\t\t\tfadc_mma_split(sB[st][ks + t + 4][col], &bh[j][1], &bl[j][1]);\n"
    "\t\t\t\t}\n"
    "\t\t\t\t// Term by term over the warp's MI NI tiles: the mma that follow one\n"
    "\t\t\t\t// another write different accumulators (an mma waits for the one\n"
    "\t\t\t\t// before it on the same accumulator: ~30 cycles).\n"
    "#pragma unroll\n"
    "\t\t\t\tfor (int i = 0; i < MI; i++)\n"
    "#pragma unroll\n"
    "\t\t\t\t\tfor (int j = 0; j < NI; j++)\n"
    "\t\t\t\t\t\tfadc_mma_op(part[i][j], al[i], bh[j]);\n"
    "#pragma unroll\n"
    "\t\t\t\tfor (int i = 0; i < MI; i++)\n"
    "#pragma unroll\n"
    "\t\t\t\t\tfor (int j = 0; j < NI; j++)\n"
    "\t\t\t\t\t\tfadc_mma_op(part[i][j], ah[i], bl[j]);\n"
    "#pragma unroll\n"
    "\t\t\t\tfor (int i = 0; i < MI; i++)\n"
    "#pragma unroll\n"
    "\t\t\t\t\tfor (int j = 0; j < NI; j++)\n"
    "\t\t\t\t\t\tfadc_mma_op(part[i][j], ah[i], bh[j]);\n"
    "\t\t\t}\n"
    "#pragma unroll\n"
    "\t\t\tfor (int i = 0; i < MI; i++)\n"
    "#pragma unroll\n"
    "\t\t\t\tfor (int j = 0; j < NI; j++)\n"
    "#pragma unroll\n"
    "\t\t\t\t\tfor (int r = 0; r < 4; r++)\n"
    "\t\t\t\t\t\tacc[i][j][r] += part[i][j][r];\n"
    "\t\t}\n"
    "\t\tasm volatile(\"cp.async.wait_group 0;\");\n"
    "#pragma unroll\n"
    "\t\tfor (int i = 0; i < MI; i++)\n"
    "#pragma unroll\n"
    "\t\t\tfor (int j = 0; j < NI; j++) {\n"
    "\t\t\t\tint r = m0 + wm + i * 16 + g, col = n0 + wn + j * 8 + 2 * t;\n"
    "\t\t\t\tfloat *p = c + (long long)r * ldc + col;\n"
    "\t\t\t\tif (r < M && col < N)\n"
    "\t\t\t\t\tp[0] = acc[i][j][0];\n"
    "\t\t\t\tif (r < M && col + 1 < N)\n"
    "\t\t\t\t\tp[1] = acc[i][j][1];\n"
    "\t\t\t\tif (r + 8 < M && col < N)\n"
    "\t\t\t\t\tp[8LL * ldc] = acc[i][j][2];\n"
    "\t\t\t\tif (r + 8 < M && col + 1 < N)\n"
    "\t\t\t\t\tp[8LL * ldc + 1] = acc[i][j][3];\n"
    "\t\t\t}\n"
    "\t\t__syncthreads(); // the next batch's first slices overwrite the buffers\n"
    "\t}\n"
    "}\n";

// The tiles: name suffix, BM = BN, warps along M and N (the runtime
// launches blocks of 32 WM WN threads over ceil(N / BN) x ceil(M / BM)).
static const struct {
	int b, wm, wn, stages;
} tiles[CG_CUDA_MMA_TILES] = {{128, 2, 4, 2}, {64, 2, 2, 3}};

void
cg_cuda_mma_text(FILE *f, unsigned forms) {
	fputs(mma_src, f);
	for (int form = 0; form < 4; form++)
		for (int s = 0; (forms >> form & 1) && s < CG_CUDA_MMA_TILES; s++) {
			int ta = form >> 1, tb = form & 1, b = tiles[s].b;
			fprintf(f,
			        "extern \"C\" __global__ void __launch_bounds__(%d)\n"
			        "fadc_mma3_%c%c_%d(float *C, const float *A, const float *B, int "
			        "M, int N, "
			        "int K, int lda, int ldb,\n"
			        "                int ldc, long long sa, long long sb, long long "
			        "sc, int "
			        "batch) {\n"
			        "\tfadc_mma3<%d, %d, %d, %d, %d, %d, %d>(C, A, B, M, N, K, lda, "
			        "ldb, ldc, "
			        "sa, sb, sc, batch);\n"
			        "}\n",
			        32 * tiles[s].wm * tiles[s].wn, ta ? 't' : 'n', tb ? 't' : 'n', b,
			        ta, tb, b, b, tiles[s].wm, tiles[s].wn, tiles[s].stages);
		}
}

// Opt-in (FADC_CUDA_MMA set, and not 0, at compile time): on the H200 the
// kernels reach 16-21 TFLOP/s at the transformer's shapes against cuBLAS
// SGEMM's 43-48 (docs/PERFORMANCE.md, "3xTF32"), so the runtime's timing
// picks cuBLAS for every record, and printing them by default would only
// cost every piece's NVRTC time and each record's timing at the first run.
int
cg_cuda_mma_print(FILE *f, const KProgram *p, const uint8_t *gemm) {
	const char *on = getenv("FADC_CUDA_MMA");
	if (!on || !*on || !strcmp(on, "0"))
		return 0;
	unsigned forms = 0;
	for (uint32_t i = 0; i < p->nk; i++) {
		KGemmPlan g;
		if (gemm[i] && cuda_gemm_launch(p, i, &g) && g.dt == DT_F32)
			forms |= 1u << (2 * (g.ta != 0) + (g.tb != 0));
	}
	if (!forms)
		return 0;
	cg_cuda_mma_text(f, forms);
	return __builtin_popcount(forms);
}
