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
// tiles BM x BN over C, BK = 16 of K at a time staged through shared
// memory already split (hi and lo arrays, so each element is split once
// per block, not once per warp that reads it), the next BK slice loaded
// into registers while the tensor cores work on this one.  Each warp owns
// a (BM / WM) x (BN / WN) part of the block tile: MI x NI tiles of 16 x 8,
// three mma each per 8 of K (al bh and ah bl first, the small terms,
// then ah bh).  Every load and store is bounds-checked (M, N and K need
// not be multiples of the tiles; an element past K reads 0), the operand
// forms are the GEMM record's (docs/ARTIFACT.md): A(i, k) at i lda + k or,
// transposed, at k lda + i; B(k, j) at k ldb + j or at j ldb + k; C(i, j)
// at i ldc + j; batch z adds z sa, z sb, z sc (grid.z strides over the
// batch).  Two tiles: 128 x 128 (8 warps, for large products) and 64 x 64
// (4 warps: more blocks for a small M N, the weight gradients' long K);
// the runtime times both against cuBLAS on the GPU and runs the fastest
// (runtime/cublas.c, rtcu_blas_gemm), so a record never runs slower than
// cuBLAS did (up to the timing's noise).
//
// Fragments of mma.m16n8k8 with .tf32 (PTX ISA, "Matrix fragments for
// mma.m16n8k8"), lane = 4 g + t:
//   A (16 x 8, row): a0 (g, t), a1 (g + 8, t), a2 (g, t + 4), a3 (g + 8, t + 4);
//   B (8 x 8, col):  b0 (t, g), b1 (t + 4, g);
//   C (16 x 8):      c0 (g, 2t), c1 (g, 2t + 1), c2 (g + 8, 2t), c3 (g + 8, 2t + 1).
// The shared arrays are [k][i] with rows of BM + 8 words: a warp's
// fragment load reads words (t + const) (BM + 8) + g + const, banks
// 8 t + g (mod 32) for BM + 8 = 8 (mod 32): all 32 distinct.
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
    "__device__ __forceinline__ void fadc_mma_op(float *d, const unsigned *a, const unsigned *b) {\n"
    "\tasm(\"mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 \"\n"
    "\t    \"{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\"\n"
    "\t    : \"+f\"(d[0]), \"+f\"(d[1]), \"+f\"(d[2]), \"+f\"(d[3])\n"
    "\t    : \"r\"(a[0]), \"r\"(a[1]), \"r\"(a[2]), \"r\"(a[3]), \"r\"(b[0]), \"r\"(b[1]));\n"
    "}\n"
    "// R elements a thread of the T of a block of the tile X(i, k), i in\n"
    "// [i0, i0 + BI), k in [k0, k0 + 16), of x stored at i ld + k (KC = 1: k\n"
    "// contiguous, consecutive threads along k) or at k ld + i (KC = 0); 0 past\n"
    "// the matrix.\n"
    "template <int KC, int BI, int T, int R>\n"
    "__device__ __forceinline__ void fadc_mma_ld(float *r, const float *__restrict__ x, int ld,\n"
    "                                            int i0, int ni, int k0, int nk, int tid) {\n"
    "#pragma unroll\n"
    "\tfor (int q = 0; q < R; q++) {\n"
    "\t\tint e = tid + q * T, k = KC ? e % 16 : e / BI, i = KC ? e / 16 : e % BI;\n"
    "\t\tint gi = i0 + i, gk = k0 + k;\n"
    "\t\tr[q] = gi < ni && gk < nk ? x[KC ? (long long)gi * ld + gk : (long long)gk * ld + gi] : 0.f;\n"
    "\t}\n"
    "}\n"
    "template <int KC, int BI, int T, int R, int L>\n"
    "__device__ __forceinline__ void fadc_mma_st(unsigned (*hi)[L], unsigned (*lo)[L], const float *r,\n"
    "                                            int tid) {\n"
    "#pragma unroll\n"
    "\tfor (int q = 0; q < R; q++) {\n"
    "\t\tint e = tid + q * T, k = KC ? e % 16 : e / BI, i = KC ? e / 16 : e % BI;\n"
    "\t\tfadc_mma_split(r[q], &hi[k][i], &lo[k][i]);\n"
    "\t}\n"
    "}\n"
    "// C_z = op(A_z) op(B_z), z < batch; blocks of BM x BN, WM x WN warps.\n"
    "template <int TA, int TB, int BM, int BN, int WM, int WN>\n"
    "__device__ __forceinline__ void fadc_mma3(float *__restrict__ C, const float *__restrict__ A,\n"
    "                                          const float *__restrict__ B, int M, int N, int K,\n"
    "                                          int lda, int ldb, int ldc, long long sa,\n"
    "                                          long long sb, long long sc, int batch) {\n"
    "\tenum { BK = 16, T = 32 * WM * WN, MI = BM / WM / 16, NI = BN / WN / 8, LA = BM + 8,\n"
    "\t       LB = BN + 8, RA = BM * BK / T, RB = BN * BK / T };\n"
    "\t__shared__ unsigned sah[BK][LA], sal[BK][LA], sbh[BK][LB], sbl[BK][LB];\n"
    "\tconst int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, t = lane & 3;\n"
    "\tconst int wm = warp / WN * (BM / WM), wn = warp % WN * (BN / WN);\n"
    "\tconst int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;\n"
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
    "\t\tfloat ra[RA], rb[RB];\n"
    "\t\t// A(i, k): k contiguous unless transposed; B(k, j) as X(j, k): k contiguous when transposed.\n"
    "\t\tfadc_mma_ld<!TA, BM, T, RA>(ra, a, lda, m0, M, 0, K, tid);\n"
    "\t\tfadc_mma_ld<TB, BN, T, RB>(rb, b, ldb, n0, N, 0, K, tid);\n"
    "\t\tfor (int k0 = 0; k0 < K; k0 += BK) {\n"
    "\t\t\t__syncthreads(); // every warp is done with the previous slice\n"
    "\t\t\tfadc_mma_st<!TA, BM, T, RA, LA>(sah, sal, ra, tid);\n"
    "\t\t\tfadc_mma_st<TB, BN, T, RB, LB>(sbh, sbl, rb, tid);\n"
    "\t\t\t__syncthreads();\n"
    "\t\t\tif (k0 + BK < K) { // the next slice, in flight while this one is multiplied\n"
    "\t\t\t\tfadc_mma_ld<!TA, BM, T, RA>(ra, a, lda, m0, M, k0 + BK, K, tid);\n"
    "\t\t\t\tfadc_mma_ld<TB, BN, T, RB>(rb, b, ldb, n0, N, k0 + BK, K, tid);\n"
    "\t\t\t}\n"
    "#pragma unroll\n"
    "\t\t\tfor (int ks = 0; ks < BK; ks += 8) {\n"
    "\t\t\t\tunsigned ah[MI][4], al[MI][4], bh[NI][2], bl[NI][2];\n"
    "#pragma unroll\n"
    "\t\t\t\tfor (int i = 0; i < MI; i++) {\n"
    "\t\t\t\t\tint r = wm + i * 16 + g;\n"
    "\t\t\t\t\tah[i][0] = sah[ks + t][r], ah[i][1] = sah[ks + t][r + 8];\n"
    "\t\t\t\t\tah[i][2] = sah[ks + t + 4][r], ah[i][3] = sah[ks + t + 4][r + 8];\n"
    "\t\t\t\t\tal[i][0] = sal[ks + t][r], al[i][1] = sal[ks + t][r + 8];\n"
    "\t\t\t\t\tal[i][2] = sal[ks + t + 4][r], al[i][3] = sal[ks + t + 4][r + 8];\n"
    "\t\t\t\t}\n"
    "#pragma unroll\n"
    "\t\t\t\tfor (int j = 0; j < NI; j++) {\n"
    "\t\t\t\t\tint col = wn + j * 8 + g;\n"
    "\t\t\t\t\tbh[j][0] = sbh[ks + t][col], bh[j][1] = sbh[ks + t + 4][col];\n"
    "\t\t\t\t\tbl[j][0] = sbl[ks + t][col], bl[j][1] = sbl[ks + t + 4][col];\n"
    "\t\t\t\t}\n"
    "#pragma unroll\n"
    "\t\t\t\tfor (int i = 0; i < MI; i++)\n"
    "#pragma unroll\n"
    "\t\t\t\t\tfor (int j = 0; j < NI; j++) {\n"
    "\t\t\t\t\t\tfadc_mma_op(acc[i][j], al[i], bh[j]);\n"
    "\t\t\t\t\t\tfadc_mma_op(acc[i][j], ah[i], bl[j]);\n"
    "\t\t\t\t\t\tfadc_mma_op(acc[i][j], ah[i], bh[j]);\n"
    "\t\t\t\t\t}\n"
    "\t\t\t}\n"
    "\t\t}\n"
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
    "\t\t__syncthreads(); // the next batch's first slice overwrites the arrays\n"
    "\t}\n"
    "}\n";

// The tiles: name suffix, BM = BN, warps along M and N (the runtime
// launches blocks of 32 WM WN threads over ceil(N / BN) x ceil(M / BM)).
static const struct {
	int b, wm, wn;
} tiles[CG_CUDA_MMA_TILES] = {{128, 2, 4}, {64, 2, 2}};

void
cg_cuda_mma_text(FILE *f, unsigned forms) {
	fputs(mma_src, f);
	for (int form = 0; form < 4; form++)
		for (int s = 0; (forms >> form & 1) && s < CG_CUDA_MMA_TILES; s++) {
			int ta = form >> 1, tb = form & 1, b = tiles[s].b;
			fprintf(f,
			        "extern \"C\" __global__ void __launch_bounds__(%d)\n"
			        "fadc_mma3_%c%c_%d(float *C, const float *A, const float *B, int M, int N, "
			        "int K, int lda, int ldb,\n"
			        "                int ldc, long long sa, long long sb, long long sc, int "
			        "batch) {\n"
			        "\tfadc_mma3<%d, %d, %d, %d, %d, %d>(C, A, B, M, N, K, lda, ldb, ldc, sa, "
			        "sb, sc, batch);\n"
			        "}\n",
			        32 * tiles[s].wm * tiles[s].wn, ta ? 't' : 'n', tb ? 't' : 'n', b, ta, tb, b,
			        b, tiles[s].wm, tiles[s].wn);
		}
}

int
cg_cuda_mma_print(FILE *f, const KProgram *p, const uint8_t *gemm) {
	const char *off = getenv("FADC_CUDA_MMA");
	if (off && !strcmp(off, "0"))
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
