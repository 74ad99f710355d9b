// codegen/llvm_gemm.c -- the LLVM backend's blocked GEMM (emitted by llvm.c
// for the contraction kernels it fits: llvm_gemm_plan, llvm_emit_gemm).
//
// A contraction kernel C[.., i, j] = sum_k A[.., i, k] B[.., k, j] whose
// body is a product of two loads with affine indices (every loop variable
// with a constant coefficient), whose output is contiguous along j (the
// last parallel variable) and whose B is contiguous along j too, runs as a
// register-blocked GEMM in vector IR, in the loop structure of BLIS
// (Van Zee and van de Geijn; Low et al., "Analytical modeling is enough
// for high-performance BLIS", 2016) with its "row-preferential" kernel:
//
//   for each block of KC reduction steps
//     for each group of MC rows: pack A's MC x KC block   (L2)
//       for each block of TB column tiles of NR = NV VL columns: pack B's
//       KC x NR panels, TB of them                         (L2)
//         for each MR rows of the group                   (A's MR x KC: L1)
//           for each column tile of the block: the micro-kernel, MR x NV
//             vector accumulators over the block's KC steps, one
//             broadcast of A and NV vector loads of B per step, MR NV
//             fused multiply-adds.
//
// The tile is sized to the register file (gemm_blocking): with 16 vector
// registers (AVX2) 6 x 16 f32 (12 accumulators, 2 of B, 1 broadcast); with
// 32 (AVX-512) 12 x 32 (24 accumulators: an FMA has 4 cycles of latency and
// two issue ports, so 8 independent chains are the least that keeps both
// busy, and each step's 2 loads of B and 12 broadcasts stay under the FMAs'
// 12 cycles on two load ports).  KC and MC come from the caches the target's
// ISA level guarantees (below).  Each output still sums its terms in the
// order of k, one fused multiply-add at a time (llvm.fmuladd: an FMA on
// x86-64-v3): only the FMA's single rounding differs from the plain loop
// nest, and the blocks of k pass through C in order, so the result is the
// same whatever the thread count or the chunking (the packing only moves
// values).  Rows past the last whole MR-row block of the last group run
// as one tile of M mod MR rows, columns past the last whole tile as a
// tile whose loads and stores are masked.  A may have any strides (its
// values are broadcast, or packed first); B is packed per block when the
// reduction is one walk (G->one) and there is more than one row block,
// else read in place with the reduction loops nested inside the tile.
// Outer axes along which B does not move are merged into the rows (B read
// once for a batch of samples).  A long reduction with few range
// iterations is cut into fixed parts summed apart and added in order
// (gemm_ksplit).  LLVM 14's C API cannot set
// fast-math flags, which is why the vectors are spelled out: the loop
// vectorizer would not reassociate a reduction.
#include <llvm-c/Comdat.h>
#include <llvm-c/DebugInfo.h>
#include <stdlib.h>

#include "llvm_impl.h"

#define GEMM_NV 2 // vectors of VL lanes per tile row
#define GEMM_NV_MAX 4 // with few rows (gemm_blocking)
#define GEMM_MR_NARROW 6 // tile rows with 16 vector registers (256-bit tiles)
#define GEMM_MR_WIDE 12 // with 32 (512-bit tiles)
#define GEMM_MR_MAX 12
#define GEMM_MIN_WORK 4096 // M N K below which the plain loops are as good
#define GEMM_PF 8 // reduction steps ahead that a strided A is prefetched
#define GEMM_PF_MIN_STRIDE 16 // elements: below, A's steps share cache lines
// A's packed block: at most GEMM_APACK_MAX bytes; B's panels of one
// iteration at most GEMM_BPANEL_MAX (gemm_col_blocks).  Both live in one
// thread-local block (gemm_scratch), not on the kernel's stack.
#define GEMM_APACK_MAX (256 * 1024)
#define GEMM_BPANEL_MAX (128 * 1024)
#define GEMM_TB_MIN_RANGE 48 // range iterations below which an iteration takes fewer tiles
// A's block is packed for a group when the group has at least
// GEMM_PACKA_MIN_TILES column tiles (each packed value is then read by
// every one: for one or two, a copy, a load and a store per value, costs
// about what the tiles' two FMAs per value do) and the range has at least
// GEMM_PACKA_MIN_RANGE iterations.  The chunks are the runtime's (about 4
// per thread), so the second bound is set at compile time for 16 threads:
// a 512 x 512 product (48 iterations) would run in chunks of one tile and
// reads A in place; 1024 x 1024 (160) packs, and at one thread it must:
// its rows of A are 4 KiB apart, the 12 of a tile in one L1 set.
// Choosing per chunk at run time (one tile whose A pointer and strides
// are selects; both forms of every tile doubled transformer's compile
// time) was measured on the GPU host and the development machine: the
// variable strides cost the micro-kernel a chain of address adds, and
// packing at one thread where the range is short lost to reading in
// place (4 x 256 x 196 x 2304: 137 -> 116 GF/s), so it was taken out.
#define GEMM_PACKA_MIN_TILES 3
#define GEMM_PACKA_MIN_RANGE 96
// The K split (gemm_ksplit): partial results of the parts after the first
// take at most GEMM_PART_MAX bytes (the third region of gemm_scratch),
// each part at least GEMM_KSPLIT_MIN_STEPS reduction steps (two blocks of
// KC: the partials' extra write and read, M N values a part, stay under a
// few percent of the part's M N K fused multiply-adds), at most
// GEMM_KS_MAX parts, and only products of GEMM_KSPLIT_MIN_WORK
// multiply-adds or more.  A split GEMM must be split for the pool
// (llvm.c's PAR_GEMM_MIN_WORK, 2^18, is below both bounds, the testing
// knob's included): its sum runs after the range.
#define GEMM_PART_MAX (512 * 1024)
#define GEMM_KSPLIT_MIN_STEPS 512
#define GEMM_KSPLIT_MIN_WORK ((int64_t)1 << 22)
#define GEMM_KSPLIT_KNOB_MIN_WORK ((int64_t)1 << 18)
#define GEMM_KS_MAX 16

// Lanes of the tile vectors: the target's vector width (Emit.vbytes: 32
// bytes, 64 with AVX-512) over the element's size.
#define GEMM_VL_MAX 16 // lanes of a tile vector at most: 64 bytes of f32

unsigned
llvm_gemm_vl(unsigned vbytes, DType vt)
{
	return vbytes / (vt == DT_F32 ? 4u : 8u);
}

// The register tile and the cache blocks, as BLIS's analytical model
// derives them from the caches (Low et al. 2016), for the caches of the
// ISA level the tile width implies (the artifact runs on any CPU of its
// level): 256-bit tiles (x86-64-v3) a 32 KiB L1d and 256 KiB of L2
// (Haswell .. Zen 3); 512-bit tiles (x86-64-v4) 48 KiB and 1 MiB (Ice
// Lake-SP, Sapphire Rapids; Skylake-SP has a 32 KiB L1d).
// - KC: B's packed panel, KC x NR values, takes at most 2/3 of L1d (the
//   rest holds the A values streaming through and C's lines), KC a power
//   of two: 21.3 KiB / 64 B (16 f32 or 8 f64) -> 256 with 256-bit tiles,
//   32 KiB / 128 B -> 256 with 512-bit ones.  (Measured at 1024 and 2048
//   on a Sapphire-Rapids-class core, docs/PERFORMANCE.md: KC = 128, half
//   of a 32 KiB L1d, gave 4-7 points of peak less.)  Since B's panels
//   of an iteration stream from L2 (gemm_col_blocks), L1 holds A's MR x KC
//   values instead (12 KiB f32 with 512-bit tiles, 6 KiB with 256-bit);
//   KC = 384 and 512 were no faster there (within the shared machine's
//   noise), so the rule stayed.
// - MC: A's packed block, MC x KC, takes half of L2 (the rest: an
//   iteration's block of B's panels, a quarter, and C), at most
//   GEMM_APACK_MAX (gemm_scratch), in whole MR-row blocks: 256-bit tiles
//   f32 126 rows, f64 60; 512-bit f32 252, f64 120.
static void
gemm_blocking(unsigned vbytes, DType vt, Gemm *G)
{
	int64_t es = vt == DT_F32 ? 4 : 8;
	int wide = vbytes >= 64;
	int64_t l1 = wide ? 48 * 1024 : 32 * 1024, l2 = wide ? 1024 * 1024 : 256 * 1024;
	G->vl = llvm_gemm_vl(vbytes, vt);
	G->nv = GEMM_NV;
	G->mr = wide ? GEMM_MR_WIDE : GEMM_MR_NARROW;
	if (G->M < G->mr) {
		// Fewer rows than a tile (wav2letter's transposed-layout
		// convolutions: 2 to 4 output positions): one tile of all M rows,
		// as many vectors wide as the accumulators of a whole tile allow
		// (12 or 24, up to 4 vectors), so that M = 2 still has 8 chains
		// of FMAs in flight, not 4 (half the FMA throughput: 4 cycles of
		// latency, 2 ports).
		int maxacc = G->mr * GEMM_NV;
		G->mr = (int)G->M;
		G->nv = maxacc / G->mr < GEMM_NV_MAX ? maxacc / G->mr : GEMM_NV_MAX;
		if (G->nv < GEMM_NV || G->N < G->nv * (int64_t)G->vl)
			G->nv = GEMM_NV;
	}
	// B's panel is reused by every MR-row block of a group: with one
	// block only, packing it would double B's traffic for nothing, and B
	// is read in place over the whole reduction (gemm_tile).
	G->packb = G->M > G->mr;
	int64_t nr = G->nv * (int64_t)G->vl;
	int64_t kc = 64;
	while (2 * kc * nr * es <= l1 * 2 / 3 && kc < 512)
		kc *= 2;
	G->kc = kc;
	int64_t abytes = l2 / 2 < GEMM_APACK_MAX ? l2 / 2 : GEMM_APACK_MAX;
	int64_t mc = abytes / (G->kc * es) / G->mr * G->mr;
	G->mc = mc < G->mr ? G->mr : mc;
}

// The groups of rows (G->mc), once gemm_blocking has set their largest
// size: as many as that size needs, the MR-row blocks spread over them,
// ceil(blocks / groups) each, so the last group is short only by the
// rounding.  1024 rows in 252-row groups left a last group of 16 rows
// whose B panels were packed for 2 tiles' worth of FMAs; as 5 groups,
// 216 rows (4) and 160 (1).  (More, smaller groups when the range is
// short for 16 threads -- 4 x 512 x 49 x 4608: 24 iterations, as 8 groups
// 64 -- were tried: B's panels, packed per group, cost 10-15% at one
// thread, and the GPU host's 16 threads showed no gain; docs/
// PERFORMANCE.md, "issue 26, helper c26g".)  The groups only choose which
// outputs an iteration computes: each output's sum is the same.
static void
gemm_groups(Gemm *G)
{
	int64_t nblk = (G->M + G->mr - 1) / G->mr;
	int64_t ng = (G->M + G->mc - 1) / G->mc;
	G->mc = G->mr * ((nblk + ng - 1) / ng);
}

// The column tiles of one iteration of the range (G->tb), once the
// groups are set.  With B packed (G->one, G->packb), an iteration packs
// the KC x NR panels of its tiles together, a block of B in L2 (at most
// GEMM_BPANEL_MAX bytes and a quarter of the level's L2: 4 panels of
// 32 KiB f32 with 512-bit tiles, 4 of 16 KiB with 256-bit ones), and then
// runs each MR-row block of its group over all of them: the block's MR x
// KC values of A (12 KiB, f32 512-bit) are read from L1 by every tile
// after the first, while B's panels stream from L2.  With one tile per
// iteration the roles were the other way round: B's panel (32 KiB) held
// in a 48 KiB L1 beside A's stream, its lines evicted before their reuse
// (BLIS keeps the broadcast operand's micro-panel in L1, at most half of
// it: Low et al. 2016).  Measured on the development machine (Sapphire
// Rapids class, one thread, best of 3 interleaved runs): 2048^3 109 ->
// 136 GF/s, 8192 x 720 x 720 110 -> 129 (docs/PERFORMANCE.md, "issue 26,
// helper c26p").  Fewer tiles per iteration where the range would drop
// below GEMM_TB_MIN_RANGE iterations (16 threads' chunks), spread evenly
// over the iterations.  FADC_GEMM_TB=n (a testing knob) sets n, range or
// not, so that small shapes take blocks of several tiles, a ragged last
// block and the masked tile inside one.
static void
gemm_col_blocks(const KKernel *k, Gemm *G, DType vt)
{
	int64_t nr = G->nv * (int64_t)G->vl, es = vt == DT_F32 ? 4 : 8;
	int64_t tiles = G->N / nr + (G->N % nr != 0);
	G->tb = 1;
	if (!G->one || !G->packb)
		return;
	int64_t l2 = G->vl * es >= 64 ? 1024 * 1024 : 256 * 1024;
	int64_t budget = l2 / 4 < GEMM_BPANEL_MAX ? l2 / 4 : GEMM_BPANEL_MAX;
	int64_t maxtb = budget / (G->kc * nr * es), tb = maxtb < tiles ? maxtb : tiles;
	const char *force = getenv("FADC_GEMM_TB");
	if (force && atoi(force) > 0) {
		tb = atoi(force) < maxtb ? atoi(force) : maxtb;
		G->tb = tb < tiles ? tb : tiles;
		return;
	}
	int nouter = G->vi >= 0 ? G->vr : G->vj;
	int64_t np = 1, ngroup = (G->M + G->mc - 1) / G->mc;
	for (int d = 0; d < nouter; d++)
		np *= k->dim[d];
	while (tb > 1 && G->ks * np * ngroup * ((tiles + tb - 1) / tb) < GEMM_TB_MIN_RANGE)
		tb--;
	if (tb < 1)
		tb = 1;
	int64_t nb = (tiles + tb - 1) / tb;
	G->tb = (tiles + nb - 1) / nb;
}

// The K split, once the groups are set: a product whose range has fewer
// than GEMM_TB_MIN_RANGE iterations of one tile (16 threads' chunks; the
// weight gradient of resnet18's first layers, 64 x 576 x 100352: 18
// column tiles of one group, at most 18 of 16 threads busy, a second
// round for 2 of them) but a long reduction is cut along K into ks fixed
// parts of kspan = ceil(K / ks) steps, each part a copy of the range:
// part 0 sums its steps into C, part s > 0 into a partial block of the
// caller's (the same blocked loops, C's address and row stride chosen per
// iteration), and after the range the kernel, called once more with lo =
// -1, adds the partial blocks to C in order of s (gemm_ksum).  The parts
// depend on the shape alone, never on the threads or the chunking, so
// every output is the same sum in the same order, ((C_0 + P_1) + P_2) ...,
// for any number of threads -- not the unsplit order of k, but as exact
// (each part in order of k).  ks is the fewest parts that give the range
// GEMM_TB_MIN_RANGE iterations, within the partials' bound and at least
// GEMM_KSPLIT_MIN_STEPS steps a part.  Only the packed path (one
// reduction walk, B packed) splits: it alone has blocks of K.
// FADC_GEMM_KSPLIT=n (a testing knob) asks for n parts wherever the
// packed path runs a product of GEMM_KSPLIT_KNOB_MIN_WORK or more, down
// to one step a part, within the same bounds.
static void
gemm_ksplit(const KKernel *k, Gemm *G, DType vt)
{
	G->ks = 1;
	G->kspan = G->K;
	if (!G->one || !G->packb)
		return;
	int nouter = G->vi >= 0 ? G->vr : G->vj;
	int64_t nr = G->nv * (int64_t)G->vl, es = vt == DT_F32 ? 4 : 8, np = 1;
	for (int d = 0; d < nouter; d++)
		np *= k->dim[d];
	int64_t range = np * ((G->M + G->mc - 1) / G->mc) * (G->N / nr + (G->N % nr != 0));
	int64_t work = G->M * G->N * G->K, ks = 1;
	const char *force = getenv("FADC_GEMM_KSPLIT");
	if (force && atoi(force) > 0) {
		if (work >= GEMM_KSPLIT_KNOB_MIN_WORK)
			ks = atoi(force);
	} else if (range < GEMM_TB_MIN_RANGE && work >= GEMM_KSPLIT_MIN_WORK) {
		ks = (GEMM_TB_MIN_RANGE + range - 1) / range;
		if (ks > G->K / GEMM_KSPLIT_MIN_STEPS)
			ks = G->K / GEMM_KSPLIT_MIN_STEPS;
	}
	int64_t part = np * G->M * G->N * es;
	if (ks > 1 + GEMM_PART_MAX / part)
		ks = 1 + GEMM_PART_MAX / part;
	if (ks > GEMM_KS_MAX)
		ks = GEMM_KS_MAX;
	if (ks > G->K)
		ks = G->K;
	if (ks < 2)
		return;
	G->kspan = (G->K + ks - 1) / ks;
	G->ks = (G->K + G->kspan - 1) / G->kspan;
}

// The shared recognition (kir_gemm_match: a product of two affine loads
// summed, no epilogue), then this backend's form: C and B contiguous
// along j, B not moving along the rows, and enough work and columns for
// the vector tiles.
int
llvm_gemm_plan(const KProgram *p, const KKernel *k, unsigned vbytes, Gemm *G)
{
	KGemm m;
	if (!kir_gemm_match(p, k, &m))
		return 0;
	DType vt = (DType)p->x[k->body].dtype;
	int vj = k->rank - 1, vi = k->rank >= 2 ? k->rank - 2 : -1;
	if (m.cc[vj] != 1 || m.ca[vj] != 0 || m.cb[vj] != 1 || (vi >= 0 && m.cb[vi] != 0))
		return 0;
	G->vi = vi;
	G->vj = vj;
	G->M = vi >= 0 ? k->dim[vi] : 1;
	// Outer axes that B does not move along, and along which A and C step
	// by whole blocks of rows, are more rows (a batch of samples times
	// the same weights: wav2letter's transposed-layout convolutions have
	// 2 to 4 output positions per sample, 20 to 40 over the batch): B is
	// then read once for all of them, not once per sample.
	G->vr = vi;
	while (vi >= 0 && G->vr > 0) {
		int d = G->vr - 1;
		if (m.cb[d] != 0 || m.ca[d] != m.ca[vi] * G->M || m.cc[d] != m.cc[vi] * G->M)
			break;
		G->M *= k->dim[d];
		G->vr = d;
	}
	G->N = k->dim[vj];
	G->abuf = m.abuf;
	G->bbuf = m.bbuf;
	G->aidx = m.aidx;
	G->bidx = m.bidx;
	G->ca_i = vi >= 0 ? m.ca[vi] : 0;
	G->cc_i = vi >= 0 ? m.cc[vi] : 0;
	G->cb_j = 1;
	int64_t K = 1;
	for (int r = 0; r < k->rrank; r++) {
		G->ca_k[r] = m.ca[k->rank + r];
		G->cb_k[r] = m.cb[k->rank + r];
		K *= k->rdim[r];
	}
	// Merge the reduction axes when they are one walk through both
	// operands: then the packed path (one axis) serves them, and each
	// output still sums in the same order (r0 outermost).
	int last = k->rrank - 1;
	G->one = k->rrank >= 1;
	G->K = K;
	G->ka = last >= 0 ? G->ca_k[last] : 0;
	G->kb = last >= 0 ? G->cb_k[last] : 0;
	for (int64_t r = last - 1, sa = G->ka, sb = G->kb; r >= 0 && G->one; r--) {
		sa *= k->rdim[r + 1], sb *= k->rdim[r + 1];
		G->one = G->ca_k[r] == sa && G->cb_k[r] == sb;
	}
	if (G->N < GEMM_NV * (int64_t)llvm_gemm_vl(vbytes, vt) || G->M * G->N * K < GEMM_MIN_WORK)
		return 0;
	gemm_blocking(vbytes, vt, G);
	gemm_groups(G);
	gemm_ksplit(k, G, vt);
	gemm_col_blocks(k, G, vt);
	return 1;
}

// base + c * v (v an i64 value), skipping zero coefficients.
static LLVMValueRef
axpy(Emit *e, LLVMValueRef base, int64_t c, LLVMValueRef v)
{
	if (c == 0)
		return base;
	return LLVMBuildNSWAdd(e->B, base, c == 1 ? v : LLVMBuildNSWMul(e->B, v, i64c(e, c), ""), "");
}

// A value of buffer b at element index idx, in the compute dtype vt.
static LLVMValueRef
gemm_load(Emit *e, uint32_t b, LLVMValueRef idx, DType vt)
{
	DType st = e->p->buf[b].dtype;
	LLVMValueRef ptr = LLVMBuildInBoundsGEP2(e->B, sty(e, st), e->bufptr[b], &idx, 1, "");
	LLVMValueRef v = LLVMBuildLoad2(e->B, sty(e, st), ptr, "");
	return llvm_convert(e, v, st, vt, 0);
}

// A vector load through ptr (a pointer to vty), or with a mask (an
// <N x i1> constant, or NULL for all lanes) only the lanes it sets: the
// others are zero and their memory is never touched (llvm.masked.load:
// vmaskmov on AVX), so a tile may hang over the end of a row.
static LLVMValueRef
vload_masked(Emit *e, LLVMTypeRef vty, LLVMValueRef ptr, unsigned align, LLVMValueRef mask)
{
	if (!mask) {
		LLVMValueRef v = LLVMBuildLoad2(e->B, vty, ptr, "");
		LLVMSetAlignment(v, align);
		return v;
	}
	LLVMTypeRef ot[2] = {vty, LLVMTypeOf(ptr)};
	LLVMValueRef args[4] = {ptr, LLVMConstInt(e->i32, align, 0), mask, LLVMConstNull(vty)};
	return intrinsic_ov(e, "llvm.masked.load", ot, 2, args, 4);
}

// The store of vector v through ptr, of the lanes mask sets (NULL: all).
static void
vstore_masked(Emit *e, LLVMValueRef v, LLVMValueRef ptr, unsigned align, LLVMValueRef mask)
{
	if (!mask) {
		LLVMSetAlignment(LLVMBuildStore(e->B, v, ptr), align);
		return;
	}
	LLVMTypeRef ot[2] = {LLVMTypeOf(v), LLVMTypeOf(ptr)};
	LLVMValueRef args[4] = {v, ptr, LLVMConstInt(e->i32, align, 0), mask};
	intrinsic_ov(e, "llvm.masked.store", ot, 2, args, 4);
}

// VL values of buffer b from element idx on (the lanes of mask, NULL for
// all), as a vector of the compute dtype.
static LLVMValueRef
gemm_vload(Emit *e, uint32_t b, LLVMValueRef idx, DType vt, unsigned vl, LLVMValueRef mask)
{
	DType st = e->p->buf[b].dtype;
	LLVMTypeRef svt = LLVMVectorType(sty(e, st), vl);
	LLVMValueRef ptr = LLVMBuildInBoundsGEP2(e->B, sty(e, st), e->bufptr[b], &idx, 1, "");
	ptr = LLVMBuildBitCast(e->B, ptr, LLVMPointerType(svt, 0), "");
	LLVMValueRef v = vload_masked(e, svt, ptr, (unsigned)kir_dtype_size(st), mask);
	if (st != vt)
		v = LLVMBuildFPExt(e->B, v, LLVMVectorType(ty(e, vt), vl), "");
	return v;
}

static LLVMValueRef
splat(Emit *e, LLVMValueRef x, unsigned vl)
{
	LLVMTypeRef vt = LLVMVectorType(LLVMTypeOf(x), vl);
	LLVMValueRef v = LLVMBuildInsertElement(e->B, LLVMGetUndef(vt), x, LLVMConstInt(e->i32, 0, 0), "");
	LLVMValueRef zero = LLVMConstNull(LLVMVectorType(e->i32, vl));
	return LLVMBuildShuffleVector(e->B, v, LLVMGetUndef(vt), zero, "");
}


// ---------------------------------------------------------------- tiles

// Where an iteration writes its sums: row i, column j at index base +
// i ci + j of ptr (elements of the compute dtype).  C itself (ci the
// constant cci, vci NULL), or for part s > 0 of a K split the caller's
// partial block (vci, base and ptr chosen per iteration: gemm_iter).
typedef struct GemmC {
	LLVMValueRef ptr, base, vci;
	int64_t cci;
} GemmC;

// c's index of row `row` (an i64 value), column 0.
static LLVMValueRef
gemm_crow(Emit *e, const GemmC *c, LLVMValueRef row)
{
	if (c->vci)
		return LLVMBuildNSWAdd(e->B, c->base, LLVMBuildNSWMul(e->B, row, c->vci, ""), "");
	return axpy(e, c->base, c->cci, row);
}

// C's vector of tile row i, vector v (columns j0 + v VL ..), as a pointer.
static LLVMValueRef
gemm_cptr(Emit *e, const Gemm *G, const GemmC *c, LLVMValueRef i0, int i, LLVMValueRef j0, int v,
          DType vt)
{
	LLVMTypeRef vty = LLVMVectorType(ty(e, vt), G->vl);
	LLVMValueRef idx = gemm_crow(e, c, LLVMBuildNSWAdd(e->B, i0, i64c(e, i), ""));
	idx = LLVMBuildNSWAdd(e->B, idx, LLVMBuildNSWAdd(e->B, j0, i64c(e, v * (int64_t)G->vl), ""), "");
	LLVMValueRef ptr = LLVMBuildInBoundsGEP2(e->B, sty(e, vt), c->ptr, &idx, 1, "");
	return LLVMBuildBitCast(e->B, ptr, LLVMPointerType(vty, 0), "");
}

static void
fmuladd_into(Emit *e, LLVMTypeRef vty, LLVMValueRef acc, LLVMValueRef a, LLVMValueRef b)
{
	LLVMValueRef args[3] = {a, b, LLVMBuildLoad2(e->B, vty, acc, "")};
	LLVMBuildStore(e->B, intrinsic(e, "llvm.fmuladd", vty, args, 3), acc);
}

// One tile without packing (the reduction is not one walk): rows i0 ..
// i0+mr-1, columns j0 .. j0+NR-1, over the whole reduction (its loops
// nested inside), in mr x NV vector accumulators.
static void
gemm_tile(Emit *e, const KKernel *k, const Gemm *G, LLVMValueRef *acc, int mr, LLVMValueRef ba,
          LLVMValueRef bb, const GemmC *bc, LLVMValueRef i0, LLVMValueRef j0, DType vt, Loop *loops,
          const LLVMValueRef *mask)
{
	unsigned vl = G->vl;
	int nv = G->nv;
	LLVMTypeRef vty = LLVMVectorType(ty(e, vt), vl);
	for (int a = 0; a < mr * nv; a++)
		LLVMBuildStore(e->B, LLVMConstNull(vty), acc[a]);
	LLVMValueRef pa = axpy(e, ba, G->ca_i, i0), pb = LLVMBuildNSWAdd(e->B, bb, j0, "");
	for (int r = 0; r < k->rrank; r++)
		llvm_loop_begin(e, &loops[k->rank + r], e->var[k->rank + r], k->rdim[r]);
	LLVMValueRef ia = pa, ib = pb;
	for (int r = 0; r < k->rrank; r++) {
		LLVMValueRef kv = LLVMBuildLoad2(e->B, e->i64, e->var[k->rank + r], "");
		ia = axpy(e, ia, G->ca_k[r], kv);
		ib = axpy(e, ib, G->cb_k[r], kv);
	}
	LLVMValueRef bv[GEMM_NV_MAX];
	for (int v = 0; v < nv; v++)
		bv[v] = gemm_vload(e, G->bbuf, LLVMBuildNSWAdd(e->B, ib, i64c(e, v * (int64_t)vl), ""), vt, vl,
		                   mask ? mask[v] : NULL);
	for (int i = 0; i < mr; i++) {
		LLVMValueRef av = splat(e, gemm_load(e, G->abuf, axpy(e, ia, G->ca_i, i64c(e, i)), vt), vl);
		for (int v = 0; v < nv; v++)
			fmuladd_into(e, vty, acc[i * nv + v], av, bv[v]);
	}
	for (int r = k->rrank - 1; r >= 0; r--)
		llvm_loop_end(e, &loops[k->rank + r]);
	for (int i = 0; i < mr; i++)
		for (int v = 0; v < nv; v++)
			vstore_masked(e, LLVMBuildLoad2(e->B, vty, acc[i * nv + v], ""),
			              gemm_cptr(e, G, bc, i0, i, j0, v, vt), (unsigned)kir_dtype_size(vt),
			              mask ? mask[v] : NULL);
}

// The packed path's state for one block of reduction steps: B's panels
// bp (the iteration's, KC NV vectors apart; one tile's from
// gemm_row_tiles), A's packed block ap (NULL: A read in place), the block's steps
// k0 .. k0 + kc - 1, whether it is the first (an i1), and the counter of
// its steps.
typedef struct GemmBlock {
	LLVMValueRef bp, ap, k0, kc, first, ctr;
} GemmBlock;

// Where a tile reads A: its value (i, kk) (tile row i, step kk of the
// block) at index base + i sr + kk sk of ptr, a pointer to elements of
// dtype st: A's buffer in place, or the packed block (compute dtype, sr
// 1, sk the rows of its panel).
typedef struct GemmA {
	LLVMValueRef ptr, base;
	DType st;
	int64_t sr, sk;
	int prefetch; // in place, a new cache line every step: fetch ahead
} GemmA;

// The micro-kernel: the tile of rows i0 .. i0+mr-1 over block b's steps,
// B from its packed panel, A as `A` says.  The accumulators start from
// zero in the first block (b->first) and from C after, and end in C.
static void
gemm_tile_packed(Emit *e, const Gemm *G, LLVMValueRef *acc, int mr, const GemmA *A,
                 const GemmBlock *b, const GemmC *bc, LLVMValueRef i0, LLVMValueRef j0, DType vt,
                 const LLVMValueRef *mask)
{
	unsigned vl = G->vl, align = (unsigned)kir_dtype_size(vt);
	int nv = G->nv;
	LLVMTypeRef vty = LLVMVectorType(ty(e, vt), vl);
	// The accumulators: zero in the first block (C is not read: it may be
	// memory never touched yet), else C's tile.
	LLVMValueRef cptr[GEMM_MR_MAX * GEMM_NV];
	for (int a = 0; a < mr * nv; a++)
		cptr[a] = gemm_cptr(e, G, bc, i0, a / nv, j0, a % nv, vt);
	LLVMBasicBlockRef bz = LLVMAppendBasicBlockInContext(e->C, e->fn, "gemm.zero");
	LLVMBasicBlockRef bl = LLVMAppendBasicBlockInContext(e->C, e->fn, "gemm.loadc");
	LLVMBasicBlockRef bk = LLVMAppendBasicBlockInContext(e->C, e->fn, "gemm.k");
	LLVMBuildCondBr(e->B, b->first, bz, bl);
	LLVMPositionBuilderAtEnd(e->B, bz);
	for (int a = 0; a < mr * nv; a++)
		LLVMBuildStore(e->B, LLVMConstNull(vty), acc[a]);
	LLVMBuildBr(e->B, bk);
	LLVMPositionBuilderAtEnd(e->B, bl);
	for (int a = 0; a < mr * nv; a++)
		LLVMBuildStore(e->B, vload_masked(e, vty, cptr[a], align, mask ? mask[a % nv] : NULL), acc[a]);
	LLVMBuildBr(e->B, bk);
	LLVMPositionBuilderAtEnd(e->B, bk);
	// The next call's tile of C, fetched now so that its loads hit when
	// that tile starts: in a large GEMM C is in no cache when its tile
	// comes round again for the next block of steps.  With several
	// tiles per iteration (G->tb) the next is the column tile to the
	// right, else the next MR rows.  Past the last row or column the
	// address is only computed, a prefetch never faults.
	for (int i = 0; i < mr; i++)
		for (int v = 0; v < nv; v++) {
			int64_t di = G->tb > 1 ? i : mr + i, dj = (G->tb > 1 ? nv * (int64_t)vl : 0) + v * (int64_t)vl;
			LLVMValueRef idx = gemm_crow(e, bc, LLVMBuildNSWAdd(e->B, i0, i64c(e, di), ""));
			idx = LLVMBuildNSWAdd(e->B, idx, LLVMBuildNSWAdd(e->B, j0, i64c(e, dj), ""), "");
			LLVMValueRef ptr = LLVMBuildGEP2(e->B, sty(e, vt), bc->ptr, &idx, 1, "");
			LLVMValueRef args[4] = {LLVMBuildBitCast(e->B, ptr, e->i8p, ""), LLVMConstInt(e->i32, 0, 0),
			                        LLVMConstInt(e->i32, 3, 0), LLVMConstInt(e->i32, 1, 0)};
			intrinsic(e, "llvm.prefetch", e->i8p, args, 4);
		}
	Loop lk;
	llvm_loop_begin_v(e, &lk, b->ctr, b->kc);
	LLVMValueRef kk = LLVMBuildLoad2(e->B, e->i64, b->ctr, "");
	LLVMValueRef ia = axpy(e, A->base, A->sk, kk);
	if (A->prefetch) {
		// A in place stepping by a whole row per step (A transposed, as in
		// a weight gradient x^T g, when too few column tiles made packing
		// it not worth it): each step's MR values are a new cache line,
		// which the hardware prefetcher does not foresee; fetch the line
		// GEMM_PF steps ahead (the first and the last row of the tile: MR
		// values may straddle two lines).  A prefetch never faults.
		int rows[2] = {0, mr - 1};
		for (int r = 0; r < (mr > 1 ? 2 : 1); r++) {
			LLVMValueRef idx = axpy(e, axpy(e, ia, A->sk, i64c(e, GEMM_PF)), A->sr, i64c(e, rows[r]));
			LLVMValueRef ptr = LLVMBuildGEP2(e->B, sty(e, A->st), A->ptr, &idx, 1, "");
			LLVMValueRef args[4] = {LLVMBuildBitCast(e->B, ptr, e->i8p, ""), LLVMConstInt(e->i32, 0, 0),
			                        LLVMConstInt(e->i32, 3, 0), LLVMConstInt(e->i32, 1, 0)};
			intrinsic(e, "llvm.prefetch", e->i8p, args, 4);
		}
	}
	LLVMValueRef bv[GEMM_NV_MAX];
	for (int v = 0; v < nv; v++) {
		LLVMValueRef slot = LLVMBuildNSWAdd(e->B, LLVMBuildNSWMul(e->B, kk, i64c(e, nv), ""), i64c(e, v), "");
		bv[v] = LLVMBuildLoad2(e->B, vty, LLVMBuildInBoundsGEP2(e->B, vty, b->bp, &slot, 1, ""), "");
	}
	for (int i = 0; i < mr; i++) {
		LLVMValueRef idx = axpy(e, ia, A->sr, i64c(e, i));
		LLVMValueRef ptr = LLVMBuildInBoundsGEP2(e->B, sty(e, A->st), A->ptr, &idx, 1, "");
		LLVMValueRef a = llvm_convert(e, LLVMBuildLoad2(e->B, sty(e, A->st), ptr, ""), A->st, vt, 0);
		LLVMValueRef av = splat(e, a, vl);
		for (int v = 0; v < nv; v++)
			fmuladd_into(e, vty, acc[i * nv + v], av, bv[v]);
	}
	llvm_loop_end(e, &lk);
	for (int a = 0; a < mr * nv; a++)
		vstore_masked(e, LLVMBuildLoad2(e->B, vty, acc[a], ""), cptr[a], align, mask ? mask[a % nv] : NULL);
}

// The GEMM's range: one iteration per (outer point, group of MC rows,
// column tile), the columns past the last tile counting as one more
// tile, in that order (column tiles fastest: consecutive iterations share
// their group's rows of A, packed once for them).  Each iteration
// computes its outputs whole, by the same code whatever the chunking:
// the unit of the thread pool's split (split_plan), and the loop of an
// unsplit GEMM too.
void
llvm_gemm_range(const KKernel *k, const Gemm *G, unsigned vl, int64_t *nouter_pts, int64_t *ncol,
                int64_t *ngroup)
{
	(void)vl; // G->vl: llvm_gemm_plan set it from the same width
	int nouter = G->vi >= 0 ? G->vr : G->vj;
	int64_t nr = G->nv * (int64_t)G->vl, np = 1;
	for (int d = 0; d < nouter; d++)
		np *= k->dim[d];
	*nouter_pts = np;
	*ncol = (G->N / nr + (G->N % nr != 0) + G->tb - 1) / G->tb;
	*ngroup = (G->M + G->mc - 1) / G->mc;
}

static LLVMValueRef
smin(Emit *e, LLVMValueRef a, LLVMValueRef b)
{
	return LLVMBuildSelect(e->B, LLVMBuildICmp(e->B, LLVMIntSLT, a, b, ""), a, b, "");
}

// One iteration f of the range, decoded: its column tile, q (its part of
// a K split, outer point and group: f / ncol), s (the part), its rows r0
// .. r0 + nrows - 1 (mb blocks of MR from r0, rem more from rbase), the
// bases of A and B (every index at i = j = k = 0 for its outer point)
// and where it writes (c: C, or part s's partial block).
typedef struct GemmIter {
	LLVMValueRef tile, q, s, r0, nrows, mb, rem, rbase, ba, bb;
	GemmC c;
} GemmIter;

// Where outer point o of part s (i64 values) of a K split keeps its
// partial sums, row 0, in the caller's block (Emit.part): M x N values
// per outer point of each part after the first, dense.
static LLVMValueRef
gemm_part_base(Emit *e, const Gemm *G, int64_t np, LLVMValueRef s, LLVMValueRef o)
{
	LLVMValueRef s1 = LLVMBuildNSWSub(e->B, s, i64c(e, 1), "");
	LLVMValueRef po = LLVMBuildNSWAdd(e->B, LLVMBuildNSWMul(e->B, s1, i64c(e, np), ""), o, "");
	return LLVMBuildNSWMul(e->B, po, i64c(e, G->M * G->N), "");
}

static GemmIter
gemm_iter(Emit *e, const KKernel *k, const Gemm *G, LLVMValueRef f, int64_t np, int64_t ncol,
          int64_t ngroup)
{
	GemmIter it;
	int nouter = G->vi >= 0 ? G->vr : G->vj;
	it.tile = LLVMBuildSRem(e->B, f, i64c(e, ncol), "");
	it.q = LLVMBuildSDiv(e->B, f, i64c(e, ncol), "");
	LLVMValueRef g = LLVMBuildSRem(e->B, it.q, i64c(e, ngroup), "");
	LLVMValueRef so = LLVMBuildSDiv(e->B, it.q, i64c(e, ngroup), ""), o = so;
	it.s = i64c(e, 0);
	if (G->ks > 1) {
		it.s = LLVMBuildSDiv(e->B, so, i64c(e, np), "");
		o = LLVMBuildSRem(e->B, so, i64c(e, np), "");
	}
	llvm_store_coords(e, o, k->dim, nouter, e->var);
	for (int v = nouter; v < k->rank + k->rrank; v++)
		LLVMBuildStore(e->B, i64c(e, 0), e->var[v]);
	new_region(e);
	it.ba = llvm_emit_x(e, G->aidx);
	it.bb = llvm_emit_x(e, G->bidx);
	DType vt = (DType)e->p->x[k->body].dtype;
	it.c = (GemmC){e->bufptr[k->out], llvm_emit_x(e, k->index), NULL, G->cc_i};
	if (G->ks > 1) {
		// Part 0 sums into C, part s > 0 into its partial block (rows N
		// apart).
		LLVMValueRef c0 = LLVMBuildICmp(e->B, LLVMIntEQ, it.s, i64c(e, 0), "");
		LLVMValueRef pp = LLVMBuildBitCast(e->B, e->part, LLVMPointerType(sty(e, vt), 0), "");
		it.c.ptr = LLVMBuildSelect(e->B, c0, it.c.ptr, pp, "");
		it.c.base = LLVMBuildSelect(e->B, c0, it.c.base, gemm_part_base(e, G, np, it.s, o), "");
		it.c.vci = LLVMBuildSelect(e->B, c0, i64c(e, G->cc_i), i64c(e, G->N), "");
	}
	it.r0 = LLVMBuildNSWMul(e->B, g, i64c(e, G->mc), "");
	it.nrows = smin(e, i64c(e, G->mc), LLVMBuildNSWSub(e->B, i64c(e, G->M), it.r0, ""));
	it.mb = LLVMBuildSDiv(e->B, it.nrows, i64c(e, G->mr), "");
	it.rem = LLVMBuildNSWSub(e->B, it.nrows, LLVMBuildNSWMul(e->B, it.mb, i64c(e, G->mr), ""), "");
	it.rbase = LLVMBuildNSWAdd(e->B, it.r0, LLVMBuildNSWMul(e->B, it.mb, i64c(e, G->mr), ""), "");
	return it;
}

// Opens a block run only when c (an i1) holds; gemm_end_if closes it.
static LLVMBasicBlockRef
gemm_if(Emit *e, LLVMValueRef c)
{
	LLVMBasicBlockRef bt = LLVMAppendBasicBlockInContext(e->C, e->fn, "gemm.then");
	LLVMBasicBlockRef bn = LLVMAppendBasicBlockInContext(e->C, e->fn, "gemm.endif");
	LLVMBuildCondBr(e->B, c, bt, bn);
	LLVMPositionBuilderAtEnd(e->B, bt);
	return bn;
}

static void
gemm_end_if(Emit *e, LLVMBasicBlockRef bn)
{
	LLVMBuildBr(e->B, bn);
	LLVMPositionBuilderAtEnd(e->B, bn);
}

// llvm_loop_end for a loop the vectorizers must leave alone: its latch
// branch carries !llvm.loop metadata with llvm.loop.vectorize.enable =
// false (a self-referential node, made through a temporary one).  For A's
// packing: LLVM otherwise turns the loop of MR interleaved stores into
// shuffles, unrolled twice, which cost a quarter more compile time on
// resnet18 for a copy the tiles' FMAs outweigh.
static void
loop_end_novec(Emit *e, Loop *l)
{
	LLVMBasicBlockRef latch = LLVMGetInsertBlock(e->B);
	llvm_loop_end(e, l);
	LLVMValueRef br = LLVMGetBasicBlockTerminator(latch);
	LLVMMetadataRef tmp = LLVMTemporaryMDNode(e->C, NULL, 0);
	const char *key = "llvm.loop.vectorize.enable", *nu = "llvm.loop.unroll.disable";
	LLVMMetadataRef opt[2] = {LLVMMDStringInContext2(e->C, key, strlen(key)),
	                          LLVMValueAsMetadata(LLVMConstInt(e->i1, 0, 0))};
	LLVMMetadataRef un = LLVMMDStringInContext2(e->C, nu, strlen(nu));
	LLVMMetadataRef ops[3] = {tmp, LLVMMDNodeInContext2(e->C, opt, 2),
	                          LLVMMDNodeInContext2(e->C, &un, 1)};
	LLVMMetadataRef node = LLVMMDNodeInContext2(e->C, ops, 3);
	LLVMMetadataReplaceAllUsesWith(tmp, node);
	LLVMSetMetadata(br, LLVMGetMDKindIDInContext(e->C, "llvm.loop", 9), LLVMMetadataAsValue(e->C, node));
}

// A's rows of iteration `it`'s group at block b's steps, packed into
// b->ap: the value (i, kk) of MR-row block m at m MR kc + kk MR + i, of
// the rows left (M mod MR of them, in the last group only) at mb MR kc +
// kk rem + i.  Each tile then reads its A as one contiguous stream (no
// TLB misses or cache-set conflicts from A's row stride, whatever A's
// layout: a transposed A packs the same way).
static void
gemm_pack_a(Emit *e, const Gemm *G, const GemmIter *it, const GemmBlock *b, LLVMValueRef ctr_m,
            DType vt)
{
	LLVMTypeRef t = ty(e, vt);
	int64_t remM = G->M % G->mr;
	LLVMValueRef pa = axpy(e, it->ba, G->ka, b->k0);
	Loop lm, lk;
	llvm_loop_begin_v(e, &lm, ctr_m, it->mb);
	LLVMValueRef m = LLVMBuildLoad2(e->B, e->i64, ctr_m, "");
	LLVMValueRef i0 = LLVMBuildNSWAdd(e->B, it->r0, LLVMBuildNSWMul(e->B, m, i64c(e, G->mr), ""), "");
	LLVMValueRef off = LLVMBuildNSWMul(e->B, LLVMBuildNSWMul(e->B, m, i64c(e, G->mr), ""), b->kc, "");
	llvm_loop_begin_v(e, &lk, b->ctr, b->kc);
	LLVMValueRef kk = LLVMBuildLoad2(e->B, e->i64, b->ctr, "");
	LLVMValueRef src = axpy(e, axpy(e, pa, G->ca_i, i0), G->ka, kk);
	LLVMValueRef dst = axpy(e, off, G->mr, kk);
	for (int i = 0; i < G->mr; i++) {
		LLVMValueRef x = gemm_load(e, G->abuf, axpy(e, src, G->ca_i, i64c(e, i)), vt);
		LLVMValueRef d = LLVMBuildNSWAdd(e->B, dst, i64c(e, i), "");
		LLVMBuildStore(e->B, x, LLVMBuildInBoundsGEP2(e->B, t, b->ap, &d, 1, ""));
	}
	loop_end_novec(e, &lk);
	llvm_loop_end(e, &lm);
	if (remM) {
		LLVMBasicBlockRef bn = gemm_if(e, LLVMBuildICmp(e->B, LLVMIntNE, it->rem, i64c(e, 0), ""));
		off = LLVMBuildNSWMul(e->B, LLVMBuildNSWMul(e->B, it->mb, i64c(e, G->mr), ""), b->kc, "");
		llvm_loop_begin_v(e, &lk, b->ctr, b->kc);
		kk = LLVMBuildLoad2(e->B, e->i64, b->ctr, "");
		src = axpy(e, axpy(e, pa, G->ca_i, it->rbase), G->ka, kk);
		dst = axpy(e, off, remM, kk);
		for (int i = 0; i < remM; i++) {
			LLVMValueRef x = gemm_load(e, G->abuf, axpy(e, src, G->ca_i, i64c(e, i)), vt);
			LLVMValueRef d = LLVMBuildNSWAdd(e->B, dst, i64c(e, i), "");
			LLVMBuildStore(e->B, x, LLVMBuildInBoundsGEP2(e->B, t, b->ap, &d, 1, ""));
		}
		loop_end_novec(e, &lk);
		gemm_end_if(e, bn);
	}
}

// The tile of mr rows from i0 at iteration `it`'s column tile j0: packed
// (b), A from its packed block at offset apoff with ask values per step,
// or in place (apoff NULL); else unpacked over the whole reduction.
static void
gemm_tile_at(Emit *e, const KKernel *k, const Gemm *G, const GemmIter *it, const GemmBlock *b,
             LLVMValueRef *acc, int mr, LLVMValueRef i0, LLVMValueRef apoff, int64_t ask,
             LLVMValueRef j0, Loop *loops, DType vt, const LLVMValueRef *mask)
{
	if (!b) {
		gemm_tile(e, k, G, acc, mr, it->ba, it->bb, &it->c, i0, j0, vt, loops, mask);
		return;
	}
	GemmA A;
	if (apoff) {
		A = (GemmA){b->ap, apoff, vt, 1, ask, 0};
	} else {
		LLVMValueRef base = axpy(e, axpy(e, it->ba, G->ca_i, i0), G->ka, b->k0);
		int pf = G->ka > GEMM_PF_MIN_STRIDE || G->ka < -GEMM_PF_MIN_STRIDE;
		A = (GemmA){e->bufptr[G->abuf], base, e->p->buf[G->abuf].dtype, G->ca_i, G->ka, pf};
	}
	gemm_tile_packed(e, G, acc, mr, &A, b, &it->c, i0, j0, vt, mask);
}

// The tiles of MR-row block(s) from i0 (mr rows, A at apoff when packed)
// over iteration `it`'s column tiles: its nt whole tiles from column tile
// t0 on, then, when `last` holds (an i1, NULL: never), the masked tile
// past them.  Tile t of the block reads B's panel t (b: KC NV vectors
// each, from b->bp).
static void
gemm_row_tiles(Emit *e, const KKernel *k, const Gemm *G, const GemmIter *it, const GemmBlock *b,
               LLVMValueRef *acc, int mr, LLVMValueRef i0, LLVMValueRef apoff, LLVMValueRef t0,
               LLVMValueRef nt, LLVMValueRef last, LLVMValueRef ctr_t, Loop *loops, DType vt,
               const LLVMValueRef *mask)
{
	int64_t nr = G->nv * (int64_t)G->vl;
	LLVMTypeRef vty = LLVMVectorType(ty(e, vt), G->vl);
	for (int lm = 0; lm < (last ? 2 : 1); lm++) {
		LLVMBasicBlockRef bn = NULL;
		Loop lt;
		LLVMValueRef tl;
		if (lm == 0) {
			llvm_loop_begin_v(e, &lt, ctr_t, nt);
			tl = LLVMBuildLoad2(e->B, e->i64, ctr_t, "");
		} else {
			bn = gemm_if(e, last);
			tl = nt;
		}
		LLVMValueRef j0 = LLVMBuildNSWMul(e->B, LLVMBuildNSWAdd(e->B, t0, tl, ""), i64c(e, nr), "");
		GemmBlock bt;
		if (b) {
			bt = *b;
			LLVMValueRef off = LLVMBuildNSWMul(e->B, tl, i64c(e, G->kc * G->nv), "");
			bt.bp = LLVMBuildInBoundsGEP2(e->B, vty, b->bp, &off, 1, "");
		}
		gemm_tile_at(e, k, G, it, b ? &bt : NULL, acc, mr, i0, apoff, mr, j0, loops, vt,
		             lm ? mask : NULL);
		if (lm == 0)
			loop_end_novec(e, &lt);
		else
			gemm_end_if(e, bn);
	}
}

// The tiles of iteration `it`: its column tiles (G->tb of them, the
// last iteration's fewer, the masked tile counted) for blocks of MR rows
// of its group, then for the rows left (the last group's M mod MR) as one
// tile.  With b, for that block of steps only: B's values of all the
// iteration's tiles packed first, into one panel per tile (a block of
// G->tb KC x NR panels, in L2), and A's read from b->ap when packa; then
// for each MR-row block, the tiles in turn, the block's MR x KC values
// of A staying in L1 while the panels of B stream from L2 (BLIS's loop
// order: Goto and van de Geijn 2008; Low et al. 2016).  Without b, over
// the whole reduction, B read in place (G->tb is 1).  mask: the lanes of
// the masked last tile when the columns are no multiple of the tile (rc
// columns past ntile whole tiles; NULL: none).
static void
gemm_tiles(Emit *e, const KKernel *k, const Gemm *G, const GemmIter *it, const GemmBlock *b, int packa,
           LLVMValueRef *acc, LLVMValueRef ctr_m, LLVMValueRef ctr_t, Loop *loops, DType vt,
           int64_t ntile, int64_t ncb, const LLVMValueRef *mask)
{
	unsigned vl = G->vl;
	int nv = G->nv;
	int64_t nr = nv * (int64_t)vl;
	LLVMTypeRef vty = LLVMVectorType(ty(e, vt), vl);
	// Whole tiles t0 .. t0 + nt - 1 (none when the last iteration holds
	// only the masked tile), and the masked one in the last iteration.
	LLVMValueRef t0 = LLVMBuildNSWMul(e->B, it->tile, i64c(e, G->tb), "");
	LLVMValueRef nt = smin(e, i64c(e, G->tb), LLVMBuildNSWSub(e->B, i64c(e, ntile), t0, ""));
	LLVMValueRef last = mask ? LLVMBuildICmp(e->B, LLVMIntEQ, it->tile, i64c(e, ncb - 1), "") : NULL;
	if (b) {
		// Row kk of the block's steps: NR nt contiguous values of B (one
		// stream), into panel t at slot (t KC + kk) NV + v.
		for (int lm = 0; lm < (last ? 2 : 1); lm++) {
			LLVMBasicBlockRef bn = lm ? gemm_if(e, last) : NULL;
			Loop lp, lt;
			llvm_loop_begin_v(e, &lp, b->ctr, b->kc);
			LLVMValueRef kk = LLVMBuildLoad2(e->B, e->i64, b->ctr, "");
			LLVMValueRef tl = nt;
			if (lm == 0) {
				llvm_loop_begin_v(e, &lt, ctr_t, nt);
				tl = LLVMBuildLoad2(e->B, e->i64, ctr_t, "");
			}
			LLVMValueRef j0 = LLVMBuildNSWMul(e->B, LLVMBuildNSWAdd(e->B, t0, tl, ""), i64c(e, nr), "");
			LLVMValueRef ib = axpy(e, LLVMBuildNSWAdd(e->B, it->bb, j0, ""), G->kb,
			                       LLVMBuildNSWAdd(e->B, b->k0, kk, ""));
			LLVMValueRef s0 = LLVMBuildNSWMul(e->B, tl, i64c(e, G->kc), "");
			s0 = LLVMBuildNSWMul(e->B, LLVMBuildNSWAdd(e->B, s0, kk, ""), i64c(e, nv), "");
			for (int v = 0; v < nv; v++) {
				LLVMValueRef x = gemm_vload(e, G->bbuf, LLVMBuildNSWAdd(e->B, ib, i64c(e, v * (int64_t)vl), ""),
				                            vt, vl, lm ? mask[v] : NULL);
				LLVMValueRef slot = LLVMBuildNSWAdd(e->B, s0, i64c(e, v), "");
				LLVMBuildStore(e->B, x, LLVMBuildInBoundsGEP2(e->B, vty, b->bp, &slot, 1, ""));
			}
			if (lm == 0)
				loop_end_novec(e, &lt);
			loop_end_novec(e, &lp);
			if (lm)
				gemm_end_if(e, bn);
		}
	}
	Loop lm;
	llvm_loop_begin_v(e, &lm, ctr_m, it->mb);
	LLVMValueRef m = LLVMBuildLoad2(e->B, e->i64, ctr_m, "");
	LLVMValueRef i0 = LLVMBuildNSWAdd(e->B, it->r0, LLVMBuildNSWMul(e->B, m, i64c(e, G->mr), ""), "");
	LLVMValueRef apoff = NULL;
	if (b && packa)
		apoff = LLVMBuildNSWMul(e->B, LLVMBuildNSWMul(e->B, m, i64c(e, G->mr), ""), b->kc, "");
	gemm_row_tiles(e, k, G, it, b, acc, G->mr, i0, apoff, t0, nt, last, ctr_t, loops, vt, mask);
	llvm_loop_end(e, &lm);
	int64_t remM = G->M % G->mr;
	if (!remM)
		return;
	// Only the last group has rows left, M mod MR of them (a constant):
	// one tile of that many rows.
	LLVMBasicBlockRef bn = gemm_if(e, LLVMBuildICmp(e->B, LLVMIntNE, it->rem, i64c(e, 0), ""));
	LLVMValueRef roff = NULL;
	if (b && packa)
		roff = LLVMBuildNSWMul(e->B, LLVMBuildNSWMul(e->B, it->mb, i64c(e, G->mr), ""), b->kc, "");
	gemm_row_tiles(e, k, G, it, b, acc, (int)remM, it->rbase, roff, t0, nt, last, ctr_t, loops, vt,
	               mask);
	gemm_end_if(e, bn);
}

// The pack buffers, B's panels then A's block: GEMM_BPANEL_MAX +
// GEMM_APACK_MAX bytes (384 KiB), then a K split's partial results
// (GEMM_PART_MAX, 512 KiB: the calling thread's, which the chunks on
// every thread write; llvm_gemm_part), per thread, in a thread-local
// array (not the stack: a pool's or a caller's threads may have small
// stacks, and the
// frame was 145 KiB with 256-bit tiles, 290 KiB with 512-bit ones).  One
// array for the whole artifact: every piece defines it with the same
// name, size and (weak_odr, hidden) linkage in a COMDAT group of that
// name, so the link keeps one (without the group it kept every piece's
// copy: 39 x 288 KiB of TLS per thread in fcn_resnet's artifact), and a
// thread runs one kernel at a time.  It is the shared object's dynamic
// TLS (the general-dynamic model of a PIC module): glibc allocates it on
// a thread's first GEMM, zeroed, and frees it with the thread.  Nothing
// is carried from one call to the next: every value read was packed in
// the same call.
//
// The GEMM never touches the array itself: it calls GEMM_SCRATCH_FN, a
// function of the piece (internal, noinline) whose only work is the
// thread-local access.  LLVM 14 lowers that access to a call of
// __tls_get_addr that it assumes preserves every vector register but
// xmm0-15 (X86's TLS_addr64 clobbers), so in x86-64-v4 code zmm16-31
// stayed live across it -- B's panel loop held a loaded vector there.
// glibc's __tls_get_addr (2.36, Debian 12) is an ordinary function:
// on a thread's first access it allocates the block and clears it with
// memset, whose EVEX form works in ymm16, and it may resize the thread's
// DTV with memcpy; the held vector came back changed, and the panel got
// it (fcn_resnet's gradients off by 1e-2 in a few runs of 20 on two
// threads, never seen on one; reverted in 4824d08).  Later glibc releases save the
// vector registers in _dl_tlsdesc_dynamic (sourceware bug 31372) and in
// __tls_get_addr; the call here does not depend on that: an ordinary call
// clobbers every vector register by the ABI, so the GEMM holds none
// across it, and the function itself has no vector values to lose.
// tests/cpu/gemm-threads.sh checks that no function with vector code
// calls __tls_get_addr.
#define GEMM_SCRATCH_NAME "fadc_gemm_scratch"
#define GEMM_SCRATCH_FN "fadc_gemm_scratch_get"

// The scratch array's address for the calling thread, an i8 pointer: a
// call of the piece's GEMM_SCRATCH_FN (defined, with the array, on first
// use), at the builder's position.
static LLVMValueRef
gemm_scratch(Emit *e)
{
	LLVMTypeRef fty = LLVMFunctionType(e->i8p, NULL, 0, 0);
	LLVMValueRef f = LLVMGetNamedFunction(e->M, GEMM_SCRATCH_FN);
	if (!f) {
		LLVMValueRef g = LLVMGetNamedGlobal(e->M, GEMM_SCRATCH_NAME);
		FADC_ASSERT(!g, "llvm_gemm: the scratch array without its function");
		LLVMTypeRef at = LLVMArrayType(e->i8, GEMM_BPANEL_MAX + GEMM_APACK_MAX + GEMM_PART_MAX);
		g = LLVMAddGlobal(e->M, at, GEMM_SCRATCH_NAME);
		LLVMSetInitializer(g, LLVMConstNull(at));
		LLVMSetLinkage(g, LLVMWeakODRLinkage);
		LLVMSetVisibility(g, LLVMHiddenVisibility);
		LLVMSetThreadLocal(g, 1);
		LLVMSetAlignment(g, 64);
		LLVMSetComdat(g, LLVMGetOrInsertComdat(e->M, GEMM_SCRATCH_NAME));
		f = LLVMAddFunction(e->M, GEMM_SCRATCH_FN, fty);
		LLVMSetLinkage(f, LLVMInternalLinkage);
		fn_attr(e, f, LLVMAttributeFunctionIndex, "noinline");
		fn_attr(e, f, LLVMAttributeFunctionIndex, "nounwind");
		// The address goes out through an empty asm (its operand is its
		// result): else IPSCCP sees that the function returns a constant,
		// the thread-local array, puts that in place of each call and
		// drops the calls, and the access is back in the GEMM.
		LLVMTypeRef aty = LLVMFunctionType(e->i8p, &e->i8p, 1, 0);
		LLVMValueRef id = LLVMGetInlineAsm(aty, "", 0, "=r,0", 4, 0, 0, LLVMInlineAsmDialectATT, 0);
		LLVMBuilderRef b = LLVMCreateBuilderInContext(e->C);
		LLVMPositionBuilderAtEnd(b, LLVMAppendBasicBlockInContext(e->C, f, "entry"));
		LLVMValueRef p = LLVMBuildBitCast(b, g, e->i8p, "");
		LLVMBuildRet(b, LLVMBuildCall2(b, aty, id, &p, 1, ""));
		LLVMDisposeBuilder(b);
	}
	return LLVMBuildCall2(e->B, fty, f, NULL, 0, "");
}

// An i8 pointer `off` bytes into the scratch array at p (gemm_scratch).
static LLVMValueRef
gemm_scratch_at(Emit *e, LLVMValueRef p, int64_t off)
{
	LLVMValueRef idx = i64c(e, off);
	return LLVMBuildInBoundsGEP2(e->B, e->i8, p, &idx, 1, "");
}

LLVMValueRef
llvm_gemm_part(Emit *e)
{
	return gemm_scratch_at(e, gemm_scratch(e), GEMM_BPANEL_MAX + GEMM_APACK_MAX);
}

// The K split's sum (the kernel called with lo = -1, after the range):
// C[o, i, j] = ((C[o, i, j] + P_1[o, i, j]) + P_2[o, i, j]) ... for every
// outer point o, row i and column j, the partial blocks P_s in order of s
// (Emit.part, gemm_part_base).  M N (ks - 1) additions, on the calling
// thread: against the product's M N K multiply-adds nothing.
static void
gemm_ksum(Emit *e, const KKernel *k, const Gemm *G, int64_t np, DType vt)
{
	int nouter = G->vi >= 0 ? G->vr : G->vj;
	LLVMTypeRef t = sty(e, vt);
	LLVMValueRef pp = LLVMBuildBitCast(e->B, e->part, LLVMPointerType(t, 0), "");
	LLVMValueRef ctr[3];
	for (int c = 0; c < 3; c++)
		ctr[c] = llvm_entry_alloca(e, e->i64);
	Loop lo, li, lj;
	llvm_loop_begin(e, &lo, ctr[0], np);
	LLVMValueRef o = LLVMBuildLoad2(e->B, e->i64, ctr[0], "");
	llvm_store_coords(e, o, k->dim, nouter, e->var);
	for (int v = nouter; v < k->rank + k->rrank; v++)
		LLVMBuildStore(e->B, i64c(e, 0), e->var[v]);
	new_region(e);
	LLVMValueRef bc = llvm_emit_x(e, k->index);
	llvm_loop_begin(e, &li, ctr[1], G->M);
	LLVMValueRef i = LLVMBuildLoad2(e->B, e->i64, ctr[1], "");
	LLVMValueRef crow = axpy(e, bc, G->cc_i, i), prow[GEMM_KS_MAX];
	for (int64_t s = 1; s < G->ks; s++)
		prow[s] = axpy(e, gemm_part_base(e, G, np, i64c(e, s), o), G->N, i);
	llvm_loop_begin(e, &lj, ctr[2], G->N);
	LLVMValueRef j = LLVMBuildLoad2(e->B, e->i64, ctr[2], "");
	LLVMValueRef ci = LLVMBuildNSWAdd(e->B, crow, j, "");
	LLVMValueRef cp = LLVMBuildInBoundsGEP2(e->B, t, e->bufptr[k->out], &ci, 1, "");
	LLVMValueRef c = LLVMBuildLoad2(e->B, t, cp, "");
	for (int64_t s = 1; s < G->ks; s++) {
		LLVMValueRef pi = LLVMBuildNSWAdd(e->B, prow[s], j, "");
		LLVMValueRef pv = LLVMBuildLoad2(e->B, t, LLVMBuildInBoundsGEP2(e->B, t, pp, &pi, 1, ""), "");
		c = LLVMBuildFAdd(e->B, c, pv, "");
	}
	LLVMBuildStore(e->B, c, cp);
	llvm_loop_end(e, &lj);
	llvm_loop_end(e, &li);
	llvm_loop_end(e, &lo);
}

void
llvm_emit_gemm(Emit *e, const KKernel *k, const Gemm *G, Loop *loops)
{
	DType vt = (DType)e->p->x[k->body].dtype;
	unsigned vl = G->vl;
	int nv = G->nv;
	int64_t nr = nv * (int64_t)vl, ntile = G->N / nr, rc = G->N - ntile * nr;
	int64_t np, ncol, ngroup;
	llvm_gemm_range(k, G, vl, &np, &ncol, &ngroup);
	FADC_ASSERT(G->mr <= GEMM_MR_MAX && nv <= GEMM_NV_MAX && G->mr * nv <= GEMM_MR_MAX * GEMM_NV &&
	                vl <= GEMM_VL_MAX,
	            "llvm_gemm: tile too large");
	LLVMTypeRef t = ty(e, vt), vty = LLVMVectorType(t, vl);
	LLVMValueRef acc[GEMM_MR_MAX * GEMM_NV];
	for (int a = 0; a < G->mr * nv; a++)
		acc[a] = llvm_entry_alloca(e, vty);
	LLVMValueRef ctr_f = llvm_entry_alloca(e, e->i64), ctr_m = llvm_entry_alloca(e, e->i64);
	LLVMValueRef ctr_t = llvm_entry_alloca(e, e->i64);
	// The last tile's lanes when the columns are no multiple of the tile:
	// column j0 + v VL + l exists when v VL + l < rc.  Its lanes past the
	// end compute on zeros (masked loads) and are never stored, so every
	// column is a vector lane, however few the columns (an attention's 60).
	LLVMValueRef mask[GEMM_NV_MAX];
	for (int v = 0; v < nv; v++) {
		LLVMValueRef lanes[GEMM_VL_MAX];
		for (unsigned l = 0; l < vl; l++)
			lanes[l] = LLVMConstInt(LLVMInt1TypeInContext(e->C), v * (int64_t)vl + l < rc, 0);
		mask[v] = LLVMConstVector(lanes, vl);
	}
	// The range: [lo, hi) of a chunk, or all of it.
	LLVMValueRef lo = e->sp.on ? e->lo : i64c(e, 0);
	LLVMValueRef hi = e->sp.on ? e->hi : i64c(e, G->ks * np * ncol * ngroup);
	if (G->ks > 1) {
		// lo = -1: the K split's sum, after the range (gemm_ksplit).
		FADC_ASSERT(e->sp.on && e->part && G->ks <= GEMM_KS_MAX,
		            "llvm_gemm: a K split outside the pool's split");
		LLVMBasicBlockRef bs = LLVMAppendBasicBlockInContext(e->C, e->fn, "gemm.ksum");
		LLVMBasicBlockRef br = LLVMAppendBasicBlockInContext(e->C, e->fn, "gemm.range");
		LLVMBuildCondBr(e->B, LLVMBuildICmp(e->B, LLVMIntSLT, lo, i64c(e, 0), ""), bs, br);
		LLVMPositionBuilderAtEnd(e->B, bs);
		gemm_ksum(e, k, G, np, vt);
		LLVMBuildRetVoid(e->B);
		LLVMPositionBuilderAtEnd(e->B, br);
	}
	GemmBlock blk, *b = NULL;
	Loop lkb, lf;
	int64_t ntiles = ntile + (rc != 0);
	int packa = G->one && G->packb && ntiles >= GEMM_PACKA_MIN_TILES &&
	            G->ks * np * ntiles * ngroup >= GEMM_PACKA_MIN_RANGE;
	LLVMValueRef curq = NULL;
	if (G->one && G->packb) {
		// One reduction axis (or axes merged into one): blocks of KC
		// steps, outermost, over every iteration of the range, so that a
		// group's block of A (MC x KC, packed once per block for all the
		// group's column tiles of the chunk) stays in L2 while the column
		// tiles go by.  Per block and tile, B's KC x NR values are packed
		// into a panel (contiguous, in L1, no TLB misses from B's row
		// stride) that every MR-row block of the group then reads.  The
		// accumulators start from zero in the first block and from C
		// after: each output still sums its terms in order of k, whatever
		// the range.
		int64_t nkb = (G->kspan + G->kc - 1) / G->kc, es = (int64_t)kir_dtype_size(vt);
		FADC_ASSERT(G->tb * G->kc * nv * (int64_t)vl * es <= GEMM_BPANEL_MAX &&
		                G->mc * G->kc * es <= GEMM_APACK_MAX,
		            "llvm_gemm: pack buffers too large");
		LLVMValueRef scr = gemm_scratch(e);
		blk.bp = LLVMBuildBitCast(e->B, gemm_scratch_at(e, scr, 0), LLVMPointerType(vty, 0), "");
		blk.ap = NULL;
		if (packa) {
			blk.ap = LLVMBuildBitCast(e->B, gemm_scratch_at(e, scr, GEMM_BPANEL_MAX), LLVMPointerType(t, 0), "");
			curq = llvm_entry_alloca(e, e->i64);
		}
		blk.ctr = llvm_entry_alloca(e, e->i64);
		LLVMValueRef ctr_kb = llvm_entry_alloca(e, e->i64);
		llvm_loop_begin(e, &lkb, ctr_kb, nkb);
		LLVMValueRef kb = LLVMBuildLoad2(e->B, e->i64, ctr_kb, "");
		blk.k0 = LLVMBuildNSWMul(e->B, kb, i64c(e, G->kc), "");
		blk.kc = smin(e, LLVMBuildNSWSub(e->B, i64c(e, G->K), blk.k0, ""), i64c(e, G->kc));
		blk.first = LLVMBuildICmp(e->B, LLVMIntEQ, kb, i64c(e, 0), "");
		if (packa)
			LLVMBuildStore(e->B, i64c(e, -1), curq);
		b = &blk;
	}
	llvm_loop_begin_range(e, &lf, ctr_f, lo, hi);
	GemmIter it = gemm_iter(e, k, G, LLVMBuildLoad2(e->B, e->i64, ctr_f, ""), np, ncol, ngroup);
	GemmBlock bpart;
	LLVMBasicBlockRef bskip = NULL;
	if (G->ks > 1) {
		// Part s's block kb: steps s kspan + kb KC on, up to the part's
		// end (the last part is shorter: its last blocks may be empty).
		bpart = blk;
		LLVMValueRef s0 = LLVMBuildNSWMul(e->B, it.s, i64c(e, G->kspan), "");
		LLVMValueRef end = LLVMBuildNSWAdd(e->B, s0, i64c(e, G->kspan), "");
		end = smin(e, end, i64c(e, G->K));
		bpart.k0 = LLVMBuildNSWAdd(e->B, s0, blk.k0, "");
		bpart.kc = smin(e, LLVMBuildNSWSub(e->B, end, bpart.k0, ""), i64c(e, G->kc));
		b = &bpart;
		bskip = gemm_if(e, LLVMBuildICmp(e->B, LLVMIntSGT, bpart.kc, i64c(e, 0), ""));
	}
	if (packa) {
		// A new group (or outer point) in this chunk: pack its block of A.
		LLVMValueRef prev = LLVMBuildLoad2(e->B, e->i64, curq, "");
		LLVMBasicBlockRef bn = gemm_if(e, LLVMBuildICmp(e->B, LLVMIntNE, it.q, prev, ""));
		gemm_pack_a(e, G, &it, b, ctr_m, vt);
		LLVMBuildStore(e->B, it.q, curq);
		gemm_end_if(e, bn);
	}
	gemm_tiles(e, k, G, &it, b, packa, acc, ctr_m, ctr_t, loops, vt, ntile, ncol, rc ? mask : NULL);
	if (bskip)
		gemm_end_if(e, bskip);
	llvm_loop_end(e, &lf);
	if (b)
		llvm_loop_end(e, &lkb);
}
