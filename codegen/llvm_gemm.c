// codegen/llvm_gemm.c -- the LLVM backend's blocked GEMM (emitted by llvm.c
// for the contraction kernels it fits: llvm_gemm_plan, llvm_emit_gemm).
//
// A contraction kernel C[.., i, j] = sum_k A[.., i, k] B[.., k, j] whose
// body is a product of two loads with affine indices (every loop variable
// with a constant coefficient), whose output is contiguous along j (the
// last parallel variable) and whose B is contiguous along j too, runs as a
// register-blocked GEMM in vector IR: tiles of MR rows by NR = NV vectors
// of columns, MR x NV vector accumulators held in registers over the
// whole reduction (the reduction loops innermost, any number of them), a
// broadcast of A[i, k] times a vector load of B[k, j0..] per term, fused
// multiply-add where the target has it (llvm.fmuladd).  Each output still
// sums its terms in the order of k, one at a time: only the rounding of
// the fused multiply-add differs from the plain loop nest.  Rows past the
// last whole MR-row block run as one-row tiles, columns past the last
// whole tile as a tile with masked loads and stores.  A's values are broadcast, so any
// strides of A work; B is packed per block of GEMM_KC reduction steps
// when the reduction is one walk (llvm_emit_gemm), else read in place (its
// rows of NR values are contiguous).  LLVM 14's C API cannot set
// fast-math flags, which is why the vectors are spelled out: the loop
// vectorizer would not reassociate a reduction.
#include "llvm_impl.h"

#define GEMM_MR 6
#define GEMM_NV 2 // vectors of VL lanes per tile row: 8 f32 or 4 f64 each (16 or 8 wide)
#define GEMM_MIN_WORK 4096 // M N K below which the plain loops are as good
#define GEMM_KC 256 // reduction steps per packed block of B (KC x NR values: 16 KiB, 32 wide)
#define GEMM_PF 8 // reduction steps ahead that a strided A is prefetched
#define GEMM_PF_MIN_STRIDE 16 // elements: below, A's steps share cache lines

// Lanes of the tile vectors: the target's vector width (Emit.vbytes: 32
// bytes, 64 with AVX-512) over the element's size.
#define GEMM_VL_MAX 16 // lanes of a tile vector at most: 64 bytes of f32

unsigned
llvm_gemm_vl(unsigned vbytes, DType vt)
{
	return vbytes / (vt == DT_F32 ? 4u : 8u);
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
	int64_t vl = llvm_gemm_vl(vbytes, vt);
	return G->N >= GEMM_NV * vl && G->M * G->N * K >= GEMM_MIN_WORK;
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

// One tile: rows i0 .. i0+mr-1, columns j0 .. j0+NV VL-1, over the whole
// reduction, in mr x NV vector accumulators.
static void
gemm_tile(Emit *e, const KKernel *k, const Gemm *G, LLVMValueRef *acc, int mr, LLVMValueRef ba,
          LLVMValueRef bb, LLVMValueRef bc, LLVMValueRef i0, LLVMValueRef j0, DType vt, unsigned vl,
          Loop *loops, const LLVMValueRef *mask)
{
	LLVMTypeRef vty = LLVMVectorType(ty(e, vt), vl);
	for (int a = 0; a < mr * GEMM_NV; a++)
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
	LLVMValueRef bv[GEMM_NV];
	for (int v = 0; v < GEMM_NV; v++)
		bv[v] = gemm_vload(e, G->bbuf, LLVMBuildNSWAdd(e->B, ib, i64c(e, v * (int64_t)vl), ""), vt, vl,
		                   mask ? mask[v] : NULL);
	for (int i = 0; i < mr; i++) {
		LLVMValueRef av = splat(e, gemm_load(e, G->abuf, axpy(e, ia, G->ca_i, i64c(e, i)), vt), vl);
		for (int v = 0; v < GEMM_NV; v++) {
			LLVMValueRef cur = LLVMBuildLoad2(e->B, vty, acc[i * GEMM_NV + v], "");
			LLVMValueRef args[3] = {av, bv[v], cur};
			LLVMBuildStore(e->B, intrinsic(e, "llvm.fmuladd", vty, args, 3), acc[i * GEMM_NV + v]);
		}
	}
	for (int r = k->rrank - 1; r >= 0; r--)
		llvm_loop_end(e, &loops[k->rank + r]);
	LLVMTypeRef cst = sty(e, vt);
	for (int i = 0; i < mr; i++)
		for (int v = 0; v < GEMM_NV; v++) {
			LLVMValueRef idx = axpy(e, bc, G->cc_i, LLVMBuildNSWAdd(e->B, i0, i64c(e, i), ""));
			idx = LLVMBuildNSWAdd(e->B, idx, LLVMBuildNSWAdd(e->B, j0, i64c(e, v * (int64_t)vl), ""), "");
			LLVMValueRef ptr = LLVMBuildInBoundsGEP2(e->B, cst, e->bufptr[k->out], &idx, 1, "");
			ptr = LLVMBuildBitCast(e->B, ptr, LLVMPointerType(vty, 0), "");
			vstore_masked(e, LLVMBuildLoad2(e->B, vty, acc[i * GEMM_NV + v], ""), ptr,
			              (unsigned)kir_dtype_size(vt), mask ? mask[v] : NULL);
		}
}

// The tile of rows i0 .. i0+mr-1 and the packed columns for reduction
// steps k0 .. k0+kc-1: the accumulators start from zero in the first block
// (first, an i1) and from C after, and end in C.
static void
gemm_tile_packed(Emit *e, const KKernel *k, const Gemm *G, LLVMValueRef *acc, int mr,
                 LLVMValueRef bp, LLVMValueRef ba, LLVMValueRef bc, LLVMValueRef i0, LLVMValueRef j0,
                 LLVMValueRef k0, LLVMValueRef kc, LLVMValueRef first, LLVMValueRef ctr, DType vt,
                 unsigned vl, const LLVMValueRef *mask)
{
	LLVMTypeRef vty = LLVMVectorType(ty(e, vt), vl), cst = sty(e, vt);
	LLVMValueRef cptr[GEMM_MR * GEMM_NV];
	for (int i = 0; i < mr; i++)
		for (int v = 0; v < GEMM_NV; v++) {
			LLVMValueRef idx = axpy(e, bc, G->cc_i, LLVMBuildNSWAdd(e->B, i0, i64c(e, i), ""));
			idx = LLVMBuildNSWAdd(e->B, idx, LLVMBuildNSWAdd(e->B, j0, i64c(e, v * (int64_t)vl), ""), "");
			LLVMValueRef ptr = LLVMBuildInBoundsGEP2(e->B, cst, e->bufptr[k->out], &idx, 1, "");
			cptr[i * GEMM_NV + v] = LLVMBuildBitCast(e->B, ptr, LLVMPointerType(vty, 0), "");
			LLVMValueRef old = vload_masked(e, vty, cptr[i * GEMM_NV + v], (unsigned)kir_dtype_size(vt),
			                                mask ? mask[v] : NULL);
			LLVMBuildStore(e->B, LLVMBuildSelect(e->B, first, LLVMConstNull(vty), old, ""),
			               acc[i * GEMM_NV + v]);
		}
	LLVMValueRef pa = axpy(e, axpy(e, ba, G->ca_i, i0), G->ka, k0);
	Loop lk;
	llvm_loop_begin_v(e, &lk, ctr, kc);
	LLVMValueRef kk = LLVMBuildLoad2(e->B, e->i64, ctr, "");
	LLVMValueRef ia = axpy(e, pa, G->ka, kk);
	if (G->ka > GEMM_PF_MIN_STRIDE || G->ka < -GEMM_PF_MIN_STRIDE) {
		// A steps by a whole row per reduction step (A transposed, as in a
		// weight gradient x^T g): each step's MR values are a new cache
		// line, which the hardware prefetcher does not foresee; fetch the
		// line GEMM_PF steps ahead (the first and the last row of the tile:
		// MR values may straddle two lines).  A prefetch never faults.
		int rows[2] = {0, mr - 1};
		for (int r = 0; r < (mr > 1 ? 2 : 1); r++) {
			LLVMValueRef idx = axpy(e, axpy(e, ia, G->ka, i64c(e, GEMM_PF)), G->ca_i, i64c(e, rows[r]));
			DType at = e->p->buf[G->abuf].dtype;
			LLVMValueRef ptr = LLVMBuildGEP2(e->B, sty(e, at), e->bufptr[G->abuf], &idx, 1, "");
			LLVMValueRef args[4] = {LLVMBuildBitCast(e->B, ptr, e->i8p, ""), LLVMConstInt(e->i32, 0, 0),
			                        LLVMConstInt(e->i32, 3, 0), LLVMConstInt(e->i32, 1, 0)};
			intrinsic(e, "llvm.prefetch", e->i8p, args, 4);
		}
	}
	LLVMValueRef bv[GEMM_NV];
	for (int v = 0; v < GEMM_NV; v++) {
		LLVMValueRef slot = LLVMBuildNSWAdd(e->B, LLVMBuildNSWMul(e->B, kk, i64c(e, GEMM_NV), ""), i64c(e, v), "");
		LLVMValueRef ptr = LLVMBuildInBoundsGEP2(e->B, vty, bp, &slot, 1, "");
		bv[v] = LLVMBuildLoad2(e->B, vty, ptr, "");
	}
	for (int i = 0; i < mr; i++) {
		LLVMValueRef av = splat(e, gemm_load(e, G->abuf, axpy(e, ia, G->ca_i, i64c(e, i)), vt), vl);
		for (int v = 0; v < GEMM_NV; v++) {
			LLVMValueRef cur = LLVMBuildLoad2(e->B, vty, acc[i * GEMM_NV + v], "");
			LLVMValueRef args[3] = {av, bv[v], cur};
			LLVMBuildStore(e->B, intrinsic(e, "llvm.fmuladd", vty, args, 3), acc[i * GEMM_NV + v]);
		}
	}
	llvm_loop_end(e, &lk);
	for (int a = 0; a < mr * GEMM_NV; a++)
		vstore_masked(e, LLVMBuildLoad2(e->B, vty, acc[a], ""), cptr[a], (unsigned)kir_dtype_size(vt),
		              mask ? mask[a % GEMM_NV] : NULL);
}

// The GEMM's range: one iteration per (outer point, group of GEMM_RG
// rows, column tile), the columns past the last tile counting as one more
// tile, in that order (column tiles fastest: consecutive iterations share
// their rows of A, which stay in cache while B's panels change).  Each
// iteration computes its outputs whole, by the same code whatever the
// chunking: the unit of the thread pool's split (split_plan), and the
// loop of an unsplit GEMM too.
#define GEMM_RG (64 * GEMM_MR) // rows per group: B's packed panel is reused this often

void
llvm_gemm_range(const KKernel *k, const Gemm *G, unsigned vl, int64_t *nouter_pts, int64_t *ncol,
           int64_t *ngroup)
{
	int nouter = G->vi >= 0 ? G->vi : G->vj;
	int64_t nr = GEMM_NV * (int64_t)vl, np = 1;
	for (int d = 0; d < nouter; d++)
		np *= k->dim[d];
	*nouter_pts = np;
	*ncol = G->N / nr + (G->N % nr != 0);
	*ngroup = (G->M + GEMM_RG - 1) / GEMM_RG;
}

static LLVMValueRef
smin(Emit *e, LLVMValueRef a, LLVMValueRef b)
{
	return LLVMBuildSelect(e->B, LLVMBuildICmp(e->B, LLVMIntSLT, a, b, ""), a, b, "");
}

// One iteration f of the range, decoded: its column tile, its rows
// r0 .. r0 + nrows - 1 (mb blocks of MR from r0, rem more from rbase) and
// the bases of A, B and C (every index at i = j = k = 0 for its outer
// point).
typedef struct GemmIter {
	LLVMValueRef tile, r0, nrows, mb, rem, rbase, ba, bb, bc;
} GemmIter;

static GemmIter
gemm_iter(Emit *e, const KKernel *k, const Gemm *G, LLVMValueRef f, int64_t ncol, int64_t ngroup)
{
	GemmIter it;
	int nouter = G->vi >= 0 ? G->vi : G->vj;
	it.tile = LLVMBuildSRem(e->B, f, i64c(e, ncol), "");
	LLVMValueRef q = LLVMBuildSDiv(e->B, f, i64c(e, ncol), "");
	LLVMValueRef g = LLVMBuildSRem(e->B, q, i64c(e, ngroup), "");
	llvm_store_coords(e, LLVMBuildSDiv(e->B, q, i64c(e, ngroup), ""), k->dim, nouter, e->var);
	for (int v = nouter; v < k->rank + k->rrank; v++)
		LLVMBuildStore(e->B, i64c(e, 0), e->var[v]);
	new_region(e);
	it.ba = llvm_emit_x(e, G->aidx);
	it.bb = llvm_emit_x(e, G->bidx);
	it.bc = llvm_emit_x(e, k->index);
	it.r0 = LLVMBuildNSWMul(e->B, g, i64c(e, GEMM_RG), "");
	it.nrows = smin(e, i64c(e, GEMM_RG), LLVMBuildNSWSub(e->B, i64c(e, G->M), it.r0, ""));
	it.mb = LLVMBuildSDiv(e->B, it.nrows, i64c(e, GEMM_MR), "");
	it.rem = LLVMBuildNSWSub(e->B, it.nrows, LLVMBuildNSWMul(e->B, it.mb, i64c(e, GEMM_MR), ""), "");
	it.rbase = LLVMBuildNSWAdd(e->B, it.r0, LLVMBuildNSWMul(e->B, it.mb, i64c(e, GEMM_MR), ""), "");
	return it;
}

// The packed path's state for one block of reduction steps: the panel bp,
// the block's steps k0 .. k0 + kc - 1, whether it is the first (an i1),
// and the counter of its steps.
typedef struct GemmBlock {
	LLVMValueRef bp, k0, kc, first, ctr;
} GemmBlock;

// The tiles of iteration `it`: blocks of MR rows, then the rows left, at
// its column tile.  With b, for that block of steps only, B's values
// packed first; else over the whole reduction, B read in place.  mask:
// the lanes of the columns that exist, for the last tile when the
// columns are no multiple of it (NULL: a whole tile).
static void
gemm_tiles(Emit *e, const KKernel *k, const Gemm *G, const GemmIter *it, const GemmBlock *b,
           LLVMValueRef *acc, LLVMValueRef ctr_m, LLVMValueRef ctr_r, Loop *loops, DType vt, unsigned vl,
           const LLVMValueRef *mask)
{
	LLVMTypeRef vty = LLVMVectorType(ty(e, vt), vl);
	LLVMValueRef j0 = LLVMBuildNSWMul(e->B, it->tile, i64c(e, GEMM_NV * (int64_t)vl), "");
	if (b) {
		Loop lp;
		llvm_loop_begin_v(e, &lp, b->ctr, b->kc);
		LLVMValueRef kk = LLVMBuildLoad2(e->B, e->i64, b->ctr, "");
		LLVMValueRef ib = axpy(e, LLVMBuildNSWAdd(e->B, it->bb, j0, ""), G->kb,
		                       LLVMBuildNSWAdd(e->B, b->k0, kk, ""));
		for (int v = 0; v < GEMM_NV; v++) {
			LLVMValueRef x = gemm_vload(e, G->bbuf, LLVMBuildNSWAdd(e->B, ib, i64c(e, v * (int64_t)vl), ""),
			                            vt, vl, mask ? mask[v] : NULL);
			LLVMValueRef slot = LLVMBuildNSWAdd(e->B, LLVMBuildNSWMul(e->B, kk, i64c(e, GEMM_NV), ""), i64c(e, v), "");
			LLVMBuildStore(e->B, x, LLVMBuildInBoundsGEP2(e->B, vty, b->bp, &slot, 1, ""));
		}
		llvm_loop_end(e, &lp);
	}
	Loop lm, lr;
	llvm_loop_begin_v(e, &lm, ctr_m, it->mb);
	LLVMValueRef i0 = LLVMBuildNSWAdd(e->B, it->r0, LLVMBuildNSWMul(e->B, LLVMBuildLoad2(e->B, e->i64, ctr_m, ""), i64c(e, GEMM_MR), ""), "");
	if (b)
		gemm_tile_packed(e, k, G, acc, GEMM_MR, b->bp, it->ba, it->bc, i0, j0, b->k0, b->kc, b->first, b->ctr,
		                 vt, vl, mask);
	else
		gemm_tile(e, k, G, acc, GEMM_MR, it->ba, it->bb, it->bc, i0, j0, vt, vl, loops, mask);
	llvm_loop_end(e, &lm);
	llvm_loop_begin_v(e, &lr, ctr_r, it->rem);
	i0 = LLVMBuildNSWAdd(e->B, LLVMBuildLoad2(e->B, e->i64, ctr_r, ""), it->rbase, "");
	if (b)
		gemm_tile_packed(e, k, G, acc, 1, b->bp, it->ba, it->bc, i0, j0, b->k0, b->kc, b->first, b->ctr, vt,
		                 vl, mask);
	else
		gemm_tile(e, k, G, acc, 1, it->ba, it->bb, it->bc, i0, j0, vt, vl, loops, mask);
	llvm_loop_end(e, &lr);
}

void
llvm_emit_gemm(Emit *e, const KKernel *k, const Gemm *G, Loop *loops)
{
	const KProgram *p = e->p;
	DType vt = (DType)p->x[k->body].dtype;
	unsigned vl = llvm_gemm_vl(e->vbytes, vt);
	int64_t nr = GEMM_NV * (int64_t)vl, ntile = G->N / nr, rc = G->N - ntile * nr;
	int64_t np, ncol, ngroup;
	llvm_gemm_range(k, G, vl, &np, &ncol, &ngroup);
	LLVMTypeRef t = ty(e, vt), vty = LLVMVectorType(t, vl);
	LLVMValueRef acc[GEMM_MR * GEMM_NV];
	for (int a = 0; a < GEMM_MR * GEMM_NV; a++)
		acc[a] = llvm_entry_alloca(e, vty);
	LLVMValueRef ctr_f = llvm_entry_alloca(e, e->i64), ctr_m = llvm_entry_alloca(e, e->i64);
	LLVMValueRef ctr_r = llvm_entry_alloca(e, e->i64);
	// The last tile's lanes when the columns are no multiple of the tile:
	// column j0 + v VL + l exists when v VL + l < rc.  Its lanes past the
	// end compute on zeros (masked loads) and are never stored, so every
	// column is a vector lane, however few the columns (an attention's 60).
	LLVMValueRef mask[GEMM_NV];
	for (int v = 0; v < GEMM_NV; v++) {
		LLVMValueRef lanes[GEMM_VL_MAX];
		for (unsigned l = 0; l < vl; l++)
			lanes[l] = LLVMConstInt(LLVMInt1TypeInContext(e->C), v * (int64_t)vl + l < rc, 0);
		mask[v] = LLVMConstVector(lanes, vl);
	}
	// The range: [lo, hi) of a chunk, or all of it.
	LLVMValueRef lo = e->sp.on ? e->lo : i64c(e, 0), hi = e->sp.on ? e->hi : i64c(e, np * ncol * ngroup);
	GemmBlock blk, *b = NULL;
	Loop lkb, lf;
	if (G->one) {
		// One reduction axis (or axes merged into one): blocks of GEMM_KC
		// steps, outermost, over every tile of the range, so that a block
		// of A's rows (GEMM_RG x GEMM_KC) stays in cache while the range's
		// column tiles go by (the rows of A were re-read from memory for
		// every tile before).  Per block and tile, B's KC x NR values are
		// packed into a stack buffer (contiguous: one cache-resident panel,
		// no TLB misses from B's row stride) that every block of rows of
		// the group then reads.  The accumulators start from zero in the
		// first block and from C after: each output still sums its terms
		// in order of k, whatever the range.
		int64_t nkb = (G->K + GEMM_KC - 1) / GEMM_KC;
		LLVMValueRef bp = llvm_entry_alloca(e, LLVMArrayType(vty, GEMM_KC * GEMM_NV));
		LLVMSetAlignment(bp, 64);
		blk.bp = LLVMBuildBitCast(e->B, bp, LLVMPointerType(vty, 0), "");
		blk.ctr = llvm_entry_alloca(e, e->i64);
		LLVMValueRef ctr_kb = llvm_entry_alloca(e, e->i64);
		llvm_loop_begin(e, &lkb, ctr_kb, nkb);
		LLVMValueRef kb = LLVMBuildLoad2(e->B, e->i64, ctr_kb, "");
		blk.k0 = LLVMBuildNSWMul(e->B, kb, i64c(e, GEMM_KC), "");
		blk.kc = smin(e, LLVMBuildNSWSub(e->B, i64c(e, G->K), blk.k0, ""), i64c(e, GEMM_KC));
		blk.first = LLVMBuildICmp(e->B, LLVMIntEQ, kb, i64c(e, 0), "");
		b = &blk;
	}
	llvm_loop_begin_range(e, &lf, ctr_f, lo, hi);
	GemmIter it = gemm_iter(e, k, G, LLVMBuildLoad2(e->B, e->i64, ctr_f, ""), ncol, ngroup);
	if (rc) {
		// Two copies of the tiles, the mask a constant in each.
		LLVMBasicBlockRef bt = LLVMAppendBasicBlockInContext(e->C, e->fn, "gemm.tile");
		LLVMBasicBlockRef bm = LLVMAppendBasicBlockInContext(e->C, e->fn, "gemm.last");
		LLVMBasicBlockRef bn = LLVMAppendBasicBlockInContext(e->C, e->fn, "gemm.next");
		LLVMBuildCondBr(e->B, LLVMBuildICmp(e->B, LLVMIntSLT, it.tile, i64c(e, ntile), ""), bt, bm);
		LLVMPositionBuilderAtEnd(e->B, bt);
		gemm_tiles(e, k, G, &it, b, acc, ctr_m, ctr_r, loops, vt, vl, NULL);
		LLVMBuildBr(e->B, bn);
		LLVMPositionBuilderAtEnd(e->B, bm);
		gemm_tiles(e, k, G, &it, b, acc, ctr_m, ctr_r, loops, vt, vl, mask);
		LLVMBuildBr(e->B, bn);
		LLVMPositionBuilderAtEnd(e->B, bn);
	} else {
		gemm_tiles(e, k, G, &it, b, acc, ctr_m, ctr_r, loops, vt, vl, NULL);
	}
	llvm_loop_end(e, &lf);
	if (b)
		llvm_loop_end(e, &lkb);
}
