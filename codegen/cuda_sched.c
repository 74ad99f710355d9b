// codegen/cuda_sched.c -- the CUDA backend's scheduler: how a task's
// kernels run on the GPU, decided from the kernel IR and its memory plan
// alone.  The printer (cuda.c) prints what it decides, and the launch
// contracts that codegen/compile.c writes into the artifact (cg_cuda_kernel)
// report the same decisions, so the two cannot disagree.  No CUDA toolkit
// is needed here.
//
// In order below:
// - kernels on their own: a block per point for long reductions into few
//   points (cuda_blockred), tiles for the contractions of persistent loop
//   kernels (cuda_loop_tile), the kernel's name and uses;
// - fused tasks: small tasks as one kernel of one block (cuda_fused), the
//   phases between its barriers (cuda_fused_barriers), each reduction's
//   form (cuda_fused_mode), the warp rotations that spread independent
//   kernels over the block's warps (cuda_fused_rotations);
// - launches: the launch plan (cuda_launch_plan: fused, a kernel each, a
//   persistent kernel per loop, host steps, cuBLAS GEMMs and choices,
//   cuda_gemm_launch) and its contracts (cg_cuda_launches, cg_cuda_kernel);
// - persistent loop kernels' grid barriers (cuda_grid_barriers);
// - a fused task's inputs staged in shared memory (cuda_stage_inputs).
// Each section's note says why.
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_sched.h"

// ---------------------------------------------------------------- kernels

static void
mark(const KProgram *p, KxId id, Uses *u) {
	if (!id || u->seen[id])
		return;
	u->seen[id] = 1;
	const Kx *x = &p->x[id];
	if (x->op == KX_LOAD)
		u->buf[x->aux] = 1;
	else if (x->op == KX_VAR && x->aux < 2 * IR_MAXDIM)
		u->var[x->aux] = 1;
	else if (x->op == KX_RUNSEED || x->op == KX_RAND)
		u->seed = 1;
	else if (x->op == KX_POLYGAMMA)
		u->polygamma = 1;
	else if (x->op == KX_STEP && x->aux < p->nloop)
		u->step[x->aux] = 1;
	for (int i = 0; i < x->nin; i++)
		mark(p, x->a[i], u);
}

// Long reductions into few points get a block per output point: each of
// the block's 256 threads folds a strided share of the reduction domain,
// each warp folds its 32 lanes' results by shuffles (__shfl_down_sync, no
// shared memory), and warp 0 folds the 8 warps' results the same way: one
// barrier per point.  One thread per point would run the whole domain
// serially: a scalar sum of 20,000 terms in one thread costs ~100 us.  The
// summation order differs from the CPU's (strided partial sums, then a
// fixed tree), within f32 rounding, and is the same every run.  Inside a
// fused task (one block) the form is cuda_fused_mode's choice instead.
#define BLOCKRED_MIN_TERMS 128
#define BLOCKRED_MAX_POINTS 32768


int
cuda_blockred(const KProgram *p, const KKernel *k) {
	if (!k->red || cuda_fused(p))
		return 0;
	return kir_kernel_terms(k) >= BLOCKRED_MIN_TERMS && kir_kernel_points(k) <= BLOCKRED_MAX_POINTS;
}

// How a block reduction outside loops reads its terms (cuda_blockred_plan).
// A block per point left the GPU idle where the points are few: batch
// norm's per-channel sums over N, H, W at resnet18's deeper layers (128,
// 256, 512 channels of 25,088, 6,272, 1,568 terms) ran on 128 to 512
// blocks, one or a few of 8 warps per SM, each thread one dependent load
// at a time: 16 us for 13 MB (3 us of bandwidth).  So:
//  - split: G blocks per point (or tile), each folding a contiguous chunk
//    of the flattened terms, until the blocks number about
//    BLOCKRED_TARGET_UNITS (two waves of 8 resident blocks on each of the
//    H200's 132 SMs), with at least BLOCKRED_MIN_CHUNK terms a chunk and
//    at most 32 chunks; each block stores its chunk's result in a module
//    scratch array (fadc_red_part), fences, and takes a ticket on its
//    point's counter (fadc_red_tick); the block that draws the last ticket
//    folds the G results in chunk order (one warp's shuffle tree), applies
//    the post, stores, and resets the counter for the next launch.  Which
//    block finishes last changes nothing: each chunk's sum and the final
//    fold are fixed, so results are the same every run.
//  - four loads in flight: each thread folds its terms into four
//    accumulators in turn (acc0 .. acc3 over terms j, j + S, j + 2S,
//    j + 3S, then the tail into acc0), combined in that order at its end.
//  - columns: when no load moves along the innermost reduction variable
//    with stride 1 but one moves so along a parallel variable lv (batch
//    norm's sums over N, H, W of an NHWC tensor: channels contiguous,
//    terms C apart), a block per point would read one 4-byte word per
//    32-byte sector.  Instead a block takes a tile of 32 consecutive
//    points along lv (its lanes: one 128-byte line per warp load) and its
//    8 warps split the terms (warp w: terms w, w + 8, ... of the chunk);
//    the warps' results meet in shared memory and warp 0 adds them in warp
//    order.  Split and combined as above, per tile.  A column chunk may
//    be as short as BLOCKRED_MIN_CHUNK_COL = 32 terms (four per warp: one
//    step of four loads in flight): the second kernels of the channel
//    splits (kir_layout.c: a few hundred to a few thousand partials per
//    channel over 64 to 512 channels, 2 to 16 tiles) ran one block per
//    tile with chunks of at least 256, each warp a chain of 14 dependent
//    steps: 8-12 us for 0.2 MB (ncu, resnet18's TF32 vjp, H200), ~120
//    launches of them per vjp.  With chunks of 32 to ~200 terms each
//    such kernel has 32 to 1024 blocks and a few steps per warp.
#define BLOCKRED_TARGET_UNITS 1024
#define BLOCKRED_MIN_CHUNK 4096
#define BLOCKRED_MIN_CHUNK_COL 32
#define BLOCKRED_MAX_SPLIT 32
#define BLOCKRED_UNROLL_COST 64

// Loads under e whose index moves with variable v by exactly 1 (*unit),
// and loads of it that depend on v at all (*dep).
static void
loads_unit(const KProgram *p, KxId e, int v, uint8_t *seen, int *unit, int *dep) {
	if (!e || seen[e])
		return;
	seen[e] = 1;
	const Kx *x = &p->x[e];
	if (x->op == KX_LOAD) {
		int64_t co;
		int aff = kx_affine_coef(p, x->a[0], v, &co);
		*unit += aff && co == 1;
		*dep += !aff || co != 0;
	}
	for (int i = 0; i < x->nin; i++)
		loads_unit(p, x->a[i], v, seen, unit, dep);
}

static int
unit_loads(const KProgram *p, const KKernel *k, int v, int *dep) {
	uint8_t *seen = calloc(p->nx + 1, 1);
	FADC_ASSERT(seen, "cuda: out of memory");
	int unit = 0, d = 0;
	loads_unit(p, k->body, v, seen, &unit, &d);
	free(seen);
	if (dep)
		*dep = d;
	return unit;
}

static int cuda_vec4_on(int red);

int
cuda_blockred_plan(const KProgram *p, const KKernel *k, int inloop, BRed *b) {
	memset(b, 0, sizeof *b);
	if (!cuda_blockred(p, k))
		return 0;
	int64_t npt = kir_kernel_points(k), nr = kir_kernel_terms(k);
	b->g = 1;
	b->len = nr;
	b->tiles = npt;
	b->lv = -1;
	if (inloop || p->x[k->body].dtype == DT_BOOL || getenv("FADC_CUDA_BLOCKRED_OLD")) {
		// a persistent kernel's (its blocks stride by fadc_nb()): as before
		b->units = npt;
		return 1;
	}
	b->ilp = 1;
	// Columns: no unit-stride load along the innermost reduction variable,
	// and the parallel variable with the most unit-stride loads has some.
	int inner = k->rank + k->rrank - 1;
	if (k->rrank >= 1 && unit_loads(p, k, inner, NULL) == 0) {
		int best = 0;
		for (int d = 0; d < k->rank; d++) {
			int n = k->dim[d] >= 8 ? unit_loads(p, k, d, NULL) : 0;
			if (n > best) {
				best = n;
				b->lv = d;
			}
		}
	}
	int64_t minchunk = BLOCKRED_MIN_CHUNK;
	if (b->lv >= 0) {
		b->col = 1;
		b->nlvb = (k->dim[b->lv] + 31) / 32;
		b->tiles = npt / k->dim[b->lv] * b->nlvb;
		minchunk = BLOCKRED_MIN_CHUNK_COL;
	}
	// Rows in float4s: 4 consecutive terms (the innermost reduction
	// extent a multiple of 4) per load of every operand that moves with
	// it by 1 (cuda_blockred_vec4), chunks of a multiple of 4 terms.
	// Each form prints the term's expression several times (an unrolled
	// step of four, a float4's four lanes, the tail): only for bodies of
	// small cost, where the load latency is all there is; a costly one
	// (hvp's fused chains: 20 KB a kernel, resnet18's artifact 3.4 times
	// the size and NVRTC 6 times the time) once.
	int small = kx_cost(p, k->body) <= BLOCKRED_UNROLL_COST;
	b->unroll = small;
	b->vec = small && !b->col && k->rrank >= 1 && k->rdim[k->rrank - 1] % 4 == 0 &&
	         p->x[k->body].dtype == DT_F32 && kir_kernel_points(k) < ((int64_t)1 << 30) &&
	         cuda_vec4_on(1) && cuda_blockred_vec4(p, k, NULL) > 0;
	if (b->tiles < BLOCKRED_TARGET_UNITS && !getenv("FADC_CUDA_NO_SPLIT")) {
		int64_t g = (BLOCKRED_TARGET_UNITS + b->tiles - 1) / b->tiles;
		if (g > nr / minchunk)
			g = nr / minchunk;
		if (g > BLOCKRED_MAX_SPLIT)
			g = BLOCKRED_MAX_SPLIT;
		if (g > 1) {
			b->len = (nr + g - 1) / g;
			if (b->vec)
				b->len = (b->len + 3) / 4 * 4;
			b->g = (nr + b->len - 1) / b->len; // no empty chunk
		}
	}
	b->units = b->tiles * b->g;
	return 1;
}

// A contraction inside a persistent loop kernel, as tiles (cuda_loop_tile).
// The two forms above read the deepspeech LSTM's per-step products badly:
// h @ W_hh^T ([10,1024] x [1024,4096], 40,960 points) ran a thread per
// point, 1024 dependent terms each on 160 blocks, every row of h reading
// all of W again; its reverse dz @ W_hh ([10,4096] x [4096,1024], 10,240
// points) a block per point whose 256 threads stride the reduction, where
// W_hh's K index has a stride of 1024 elements: each warp-wide load
// touched 32 sectors (1.3 GB of L2 traffic per step for a 16 MB matrix).
// A tile is 32 consecutive points along the last parallel variable (the
// lanes: a load whose index moves by 0 or 1 with that variable is one
// broadcast or one 128-byte line per warp) times TILE_ROWS_MAX at most
// rows of the other parallel variables (each thread keeps one
// accumulator per row, so a term that does not depend on the row, W's
// element, is loaded once for all of them: nvcc merges the equal loads);
// the block's 8 warps split the reduction (warp w takes terms w, w + 8,
// ...), then sum their partials through shared memory in warp order, and
// warp r applies row r's post and stores it.  So W is read once per row
// group from L2, coalesced, and every block of the grid has tiles.
// Summation order: each warp's strided terms in order, then the 8 warp
// partials in order: fixed, so the same every run, within f32 rounding of
// the CPU's.  Conditions: a sum, a contraction, in a loop of a task that
// is not fused, at least TILE_MIN_TERMS terms, a last parallel extent of
// at least 32, and every load of the terms affine in the last parallel
// variable with a coefficient of 0 or 1.
#define TILE_ROWS_MAX 8
#define TILE_MIN_TERMS 256

// Every load under e has an index affine in variable v with coefficient 0
// or 1.
static int
loads_along(const KProgram *p, KxId e, int v, uint8_t *seen) {
	if (!e || seen[e])
		return 1;
	seen[e] = 1;
	const Kx *x = &p->x[e];
	if (x->op == KX_LOAD) {
		int64_t co;
		if (!kx_affine_coef(p, x->a[0], v, &co) || (co != 0 && co != 1))
			return 0;
	}
	for (int i = 0; i < x->nin; i++)
		if (!loads_along(p, x->a[i], v, seen))
			return 0;
	return 1;
}

// Few tiles over a long reduction (deepspeech's reverse dz @ W_hh: 64
// tiles of 4096 terms, 64 busy blocks of the ~132 that take part) split
// the terms into kc chunks: work unit u is chunk u / ntiles of tile u %
// ntiles, its row sums go to a module scratch array (fadc_tile_part,
// [kc][points]), then a grid barrier, then a thread per point adds its kc
// partials in chunk order, applies the post and stores.  Taken when at
// most TILE_SPLIT_UNITS / 2 tiles and at least 2 chunks of
// TILE_SPLIT_MIN_TERMS terms.
#define TILE_SPLIT_UNITS 128
#define TILE_SPLIT_MIN_TERMS 512

// Resident weights.  Tiled, deepspeech's step still spent ~50 us per
// direction: every step each block streamed its 32 columns of W_hh (128 KB)
// from L2 with 8 warps, each a chain of dependent loads, so the step was
// bound by L2 latency, not by bandwidth.  W does not change across the
// steps; only the rows (h_{t-1}) do.  So a tiled product's loads that read
// a buffer no kernel of the persistent kernel writes (checked by bytes:
// grid_overlap), at an index of the column and the reduction variables
// only (no row, no step counter, no load), are *resident*: each block owns
// one work unit (a column tile and a chunk of the terms) for the whole
// launch, loads those values into its dynamic shared memory once, before
// the first step ([load][term][lane], the lanes' 32 consecutive columns,
// so each warp read is conflict-free), and every step reads them there;
// only the rows' loads go to L2.  A resident tile takes all rows (at most
// TILE_RES_ROWS accumulators a thread, no row groups: a row group would
// need the slice again) and as few chunks of the terms as keep the slice
// within TILE_RES_SLOT bytes and the units within TILE_RES_UNITS (one
// unit per block: the H100/H200 have 132 SMs, one such block each).  The
// tiled kernels of one persistent kernel take slots in kernel order while
// their sum stays within TILE_RES_SMEM (the sm_90 limit is 227 KB a
// block, less the static tile partials); a kernel that does not fit keeps
// the row-group form.  At run time the kernel uses the slots only when
// the launch gave it the dynamic shared memory and at least as many
// blocks as units (the runtime sets both from the `<kernel>_dsmem` word,
// runtime/cuda.c); otherwise the same tiles read from global memory.  The
// summation order is the same either way.  FADC_CUDA_NO_RESIDENT=1 at
// compile time turns it off (measurements).
#define TILE_RES_ROWS 16
#define TILE_RES_UNITS 128
#define TILE_RES_SLOT (160 * 1024)
#define TILE_RES_SMEM (200 * 1024)

// The outermost loop around kernel ki, or -1.
static int
outer_loop(const KProgram *p, uint32_t ki) {
	for (uint32_t l = 0; l < p->nloop; l++)
		if (p->loop[l].parent < 0 && p->loop[l].begin <= ki && ki < p->loop[l].end)
			return (int)l;
	return -1;
}

static int grid_overlap(const KProgram *p, uint32_t a, uint32_t b);

// Index e reads only constants and the variables `col` (the column) and
// >= rank (the reductions), through integer arithmetic.
static int
res_index(const KProgram *p, KxId e, int col, int rank) {
	const Kx *x = &p->x[e];
	switch ((KxOp)x->op) {
	case KX_CONST:
		return 1;
	case KX_VAR:
		return (int)x->aux == col || (int)x->aux >= rank;
	case KX_IADD:
	case KX_IMUL:
	case KX_IDIV:
	case KX_IMOD:
	case KX_IMIN:
	case KX_IMAX:
		for (int i = 0; i < x->nin; i++)
			if (!res_index(p, x->a[i], col, rank))
				return 0;
		return 1;
	default:
		return 0;
	}
}

static void
res_walk(const KProgram *p, const KKernel *k, int l, KxId e, uint8_t *seen, KxId *res, int *n) {
	if (!e || seen[e])
		return;
	seen[e] = 1;
	const Kx *x = &p->x[e];
	if (x->op == KX_LOAD) {
		int ok = *n < TILE_RES_MAX && res_index(p, x->a[0], k->rank - 1, k->rank);
		for (uint32_t j = p->loop[l].begin; ok && j < p->loop[l].end; j++)
			ok = !grid_overlap(p, p->k[j].out, x->aux);
		if (ok)
			res[(*n)++] = e;
		return;
	}
	for (int i = 0; i < x->nin; i++)
		res_walk(p, k, l, x->a[i], seen, res, n);
}

// Index e reads only constants, step counters and the variables other
// than `col` (rows and reductions), through integer arithmetic.
static int
stage_index(const KProgram *p, KxId e, int col) {
	const Kx *x = &p->x[e];
	switch ((KxOp)x->op) {
	case KX_CONST:
	case KX_STEP:
		return 1;
	case KX_VAR:
		return (int)x->aux != col;
	case KX_IADD:
	case KX_IMUL:
	case KX_IDIV:
	case KX_IMOD:
	case KX_IMIN:
	case KX_IMAX:
		for (int i = 0; i < x->nin; i++)
			if (!stage_index(p, x->a[i], col))
				return 0;
		return 1;
	default:
		return 0;
	}
}

static void
stage_walk(const KProgram *p, const KKernel *k, const KxId *res, int nres, KxId e, uint8_t *seen,
           KxId *st, int *n) {
	if (!e || seen[e])
		return;
	seen[e] = 1;
	const Kx *x = &p->x[e];
	if (x->op == KX_LOAD) {
		int ok = *n < TILE_RES_MAX && stage_index(p, x->a[0], k->rank - 1);
		for (int j = 0; ok && j < nres; j++)
			ok = res[j] != e;
		if (ok)
			st[(*n)++] = e;
		return;
	}
	for (int i = 0; i < x->nin; i++)
		stage_walk(p, k, res, nres, x->a[i], seen, st, n);
}

int
cuda_tile_stage_loads(const KProgram *p, const KKernel *k, KxId *st) {
	KxId res[TILE_RES_MAX];
	int nres = cuda_tile_res_loads(p, k, res);
	if (!nres || getenv("FADC_CUDA_NO_STAGE"))
		return 0;
	uint8_t *seen = calloc(p->nx + 1, 1);
	FADC_ASSERT(seen, "cuda: out of memory");
	int n = 0;
	stage_walk(p, k, res, nres, k->body, seen, st, &n);
	free(seen);
	return n;
}

int
cuda_tile_res_loads(const KProgram *p, const KKernel *k, KxId *res) {
	int l = outer_loop(p, (uint32_t)(k - p->k));
	if (l < 0 || getenv("FADC_CUDA_NO_RESIDENT"))
		return 0;
	uint8_t *seen = calloc(p->nx + 1, 1);
	FADC_ASSERT(seen, "cuda: out of memory");
	int n = 0;
	res_walk(p, k, l, k->body, seen, res, &n);
	free(seen);
	return n;
}

// The tile geometry of kernel k without its slot (res_off): the resident
// form where allowed and it has resident loads and a geometry that fits,
// else rows in groups.
static int
tile_geometry(const KProgram *p, const KKernel *k, int allow_res, Tile *t) {
	memset(t, 0, sizeof *t);
	if (k->red != KR_SUM || !k->contraction || k->host || k->rank < 1 || cuda_fused(p))
		return 0;
	int64_t npt = kir_kernel_points(k), nr = kir_kernel_terms(k);
	int64_t cols = k->dim[k->rank - 1];
	if (nr < TILE_MIN_TERMS || cols < 32 || getenv("FADC_CUDA_NO_TILE"))
		return 0;
	uint8_t *seen = calloc(p->nx + 1, 1);
	FADC_ASSERT(seen, "cuda: out of memory");
	int ok = loads_along(p, k->body, k->rank - 1, seen);
	free(seen);
	if (!ok)
		return 0;
	t->cols = cols;
	t->rows = npt / cols;
	t->ctiles = (cols + 31) / 32;
	KxId res[TILE_RES_MAX];
	int nres = allow_res && t->rows <= TILE_RES_ROWS ? cuda_tile_res_loads(p, k, res) : 0;
	int64_t es = 0; // a term's resident bytes a lane
	for (int j = 0; j < nres; j++)
		es += (int64_t)kir_dtype_size((DType)p->x[res[j]].dtype);
	for (int64_t kc = 1; nres && kc * t->ctiles <= TILE_RES_UNITS; kc++) {
		int64_t kt = (nr + kc - 1) / kc;
		if (32 * kt * es <= TILE_RES_SLOT) {
			t->r = t->rows;
			t->ntiles = t->ctiles;
			t->kc = kc;
			t->kterms = kt;
			t->units = t->ntiles * kc;
			t->nres = nres;
			t->res_bytes = 32 * kt * es;
			// The rows' loads staged beside it, where the whole fits.
			KxId st[TILE_RES_MAX];
			int nst = cuda_tile_stage_loads(p, k, st);
			int64_t sb = 0;
			for (int j = 0; j < nst; j++)
				sb += t->rows * kt * (int64_t)kir_dtype_size((DType)p->x[st[j]].dtype);
			if (nst && t->res_bytes + sb <= TILE_RES_SMEM) {
				t->nstage = nst;
				t->stage_bytes = sb;
			}
			return 1;
		}
	}
	// Row groups of equal size, at most TILE_ROWS_MAX rows each (10 rows:
	// two groups of 5, not 8 and 2).
	int64_t groups = (t->rows + TILE_ROWS_MAX - 1) / TILE_ROWS_MAX;
	t->r = (t->rows + groups - 1) / groups;
	t->ntiles = (t->rows + t->r - 1) / t->r * t->ctiles;
	t->kc = 1;
	if (t->ntiles * 2 <= TILE_SPLIT_UNITS && nr >= 2 * TILE_SPLIT_MIN_TERMS &&
	    !getenv("FADC_CUDA_NO_SPLIT")) {
		t->kc = TILE_SPLIT_UNITS / t->ntiles;
		if (t->kc > nr / TILE_SPLIT_MIN_TERMS)
			t->kc = nr / TILE_SPLIT_MIN_TERMS;
	}
	t->kterms = (nr + t->kc - 1) / t->kc;
	t->units = t->ntiles * t->kc;
	return 1;
}

// Whether kernel k, inside a loop of a persistent kernel (not a fused
// task), runs as tiles; their geometry into *t.  A resident tile's slot
// follows those of the resident tiles before it in its persistent kernel;
// one that would pass TILE_RES_SMEM takes the row-group form instead.
int
cuda_loop_tile(const KProgram *p, const KKernel *k, Tile *t) {
	if (!tile_geometry(p, k, 1, t))
		return 0;
	if (!t->nres)
		return 1;
	uint32_t ki = (uint32_t)(k - p->k);
	int l = outer_loop(p, ki);
	int64_t off = 0;
	for (uint32_t j = p->loop[l].begin; j < ki; j++) {
		Tile tj;
		if (tile_geometry(p, &p->k[j], 1, &tj) && tj.nres &&
		    off + tj.res_bytes + tj.stage_bytes <= TILE_RES_SMEM)
			off += tj.res_bytes + tj.stage_bytes;
	}
	if (off + t->res_bytes + t->stage_bytes <= TILE_RES_SMEM) {
		t->res_off = off;
		return 1;
	}
	return tile_geometry(p, k, 0, t);
}

void
cuda_kernel_name(FILE *f, const char *task, uint32_t ki, const char *what) {
	fputs("fadc_", f);
	for (const char *s = task; *s; s++)
		fputc((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
		              (*s >= '0' && *s <= '9')
		          ? *s
		          : '_',
		      f);
	fprintf(f, "_k%u_", ki);
	for (const char *s = what ? what : "kernel"; *s; s++)
		fputc((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
		              (*s >= '0' && *s <= '9')
		          ? *s
		          : '_',
		      f);
}

// The launch contract of kernel ki: what cg_cuda_kernel reports and what
// print_kernel prints as parameters, from one walk (so they cannot differ).
void
cuda_kernel_uses(const KProgram *p, const KKernel *k, Uses *u) {
	u->seen = calloc(p->nx + 1, 1);
	u->buf = calloc(p->nbuf + 1, 1);
	u->step = calloc(p->nloop + 1, 1);
	FADC_ASSERT(u->seen && u->buf && u->step, "cuda: out of memory");
	mark(p, k->index, u);
	mark(p, k->body, u);
	mark(p, k->post, u);
}

// Elementwise kernels in 16-byte vectors (cuda_vec4).  A thread per point
// issues one 4-byte load per operand and one store, with its point's index
// arithmetic; resnet18's large elementwise kernels (25.7 M points: batch
// norm's apply and ReLU, their adjoints) ran at about half the H200's
// bandwidth.  So a kernel of at least VEC4_MIN_POINTS f32 points whose last
// extent is a multiple of 4 and whose store index is its flat point index
// runs 4 consecutive points per thread: each f32 load whose index is
// e + i_last, e affine in the other variables with coefficients and
// constant multiples of 4 (so e + i_last is a multiple of 4 at the
// thread's first point), is one float4 load, its lanes the 4 points'
// values; the other loads (a channel's mean: the same element for the 4
// points, mostly) are evaluated per point; the 4 results are one float4
// store.  The kernel checks at run time that every pointer it reads or
// writes as float4 is 16-byte aligned (a caller's device buffer need not
// be) and otherwise runs the points one at a time.  Same arithmetic per
// point as before: results are bit-identical.
#define VEC4_MIN_POINTS 4096
// The body is printed four times: only where it is cheap (a costly one is
// not bound by its loads, and its copies cost NVRTC time).
#define VEC4_MAX_COST 64

static int kx_flat_point(const KProgram *p, const KKernel *k, KxId e);

// The float4 forms.  Elementwise kernels take them by default; row
// reductions only with FADC_CUDA_VEC4=1 (or =red) at compile time.  On the
// H200 (2026-11-29, h-g20red) resnet18's f32 vjp at N=8, 64x64 with both
// differed from the CPU code by 0.1-2% in layer1.0's and the stem's
// gradients at every input draw; split by form (h-g20, the same model and
// check, 3 draws): the elementwise float4s alone passed all 197 checks,
// the rows' alone failed 18 (the same outputs, up to 6e-3).  The rows'
// cause is not found (docs/CUDA.md).  FADC_CUDA_VEC4=ew: the elementwise
// form only (the default); FADC_CUDA_NO_VEC4=1: neither (measurements).
static int
cuda_vec4_on(int red) {
	const char *e = getenv("FADC_CUDA_VEC4");
	if (getenv("FADC_CUDA_NO_VEC4") || (e && !strcmp(e, "0")))
		return 0;
	if (!red)
		return !e || strcmp(e, "red") != 0;
	return e && *e && strcmp(e, "ew") != 0;
}

// e is a sum of loop variables times constants and a constant (nothing
// else); its constant into *c0.
static int
pure_affine(const KProgram *p, KxId e, int64_t *c0) {
	const Kx *x = &p->x[e];
	int64_t a, b;
	switch ((KxOp)x->op) {
	case KX_CONST:
		*c0 = x->i;
		return 1;
	case KX_VAR:
		*c0 = 0;
		return 1;
	case KX_IADD:
		if (!pure_affine(p, x->a[0], &a) || !pure_affine(p, x->a[1], &b))
			return 0;
		*c0 = a + b;
		return 1;
	case KX_IMUL:
		if (p->x[x->a[1]].op != KX_CONST || !pure_affine(p, x->a[0], &a))
			return 0;
		*c0 = a * p->x[x->a[1]].i;
		return 1;
	default:
		return 0;
	}
}

// The f32 loads under e whose index is e' + i_v, e' affine in the other
// variables (0 .. nv-1) with coefficients and constant multiples of 4: at
// i_v a multiple of 4, one float4 holds the values at i_v .. i_v + 3.
static void
vec4_loads(const KProgram *p, int v, int nv, KxId e, uint8_t *seen, uint8_t *vload, int *n) {
	if (!e || seen[e])
		return;
	seen[e] = 1;
	const Kx *x = &p->x[e];
	if (x->op == KX_LOAD) {
		int64_t c0, co;
		int ok = p->buf[x->aux].dtype == DT_F32 && x->dtype == DT_F32 &&
		         pure_affine(p, x->a[0], &c0) && c0 % 4 == 0 &&
		         kx_affine_coef(p, x->a[0], v, &co) && co == 1;
		for (int d = 0; ok && d < nv; d++)
			ok = d == v || (kx_affine_coef(p, x->a[0], d, &co) && co % 4 == 0);
		if (ok) {
			if (vload)
				vload[e] = 1;
			++*n;
		}
		return; // a vector load's index is evaluated once, at the first point
	}
	for (int i = 0; i < x->nin; i++)
		vec4_loads(p, v, nv, x->a[i], seen, vload, n);
}

int
cuda_vec4(const KProgram *p, uint32_t ki, uint8_t *vload) {
	const KKernel *k = &p->k[ki];
	if (k->red || k->host || k->rank < 1 || k->dim[k->rank - 1] % 4 || cuda_fused(p) ||
	    kx_cost(p, k->body) > VEC4_MAX_COST ||
	    p->buf[k->out].dtype != DT_F32 || p->x[k->body].dtype != DT_F32 ||
	    kir_kernel_points(k) < VEC4_MIN_POINTS || kir_kernel_points(k) >= ((int64_t)1 << 30) ||
	    !cuda_vec4_on(0))
		return 0;
	for (uint32_t l = 0; l < p->nloop; l++)
		if (p->loop[l].begin <= ki && ki < p->loop[l].end)
			return 0;
	if (!kx_flat_point(p, k, k->index))
		return 0;
	uint8_t *seen = calloc(p->nx + 1, 1);
	FADC_ASSERT(seen, "cuda: out of memory");
	int n = 0;
	vec4_loads(p, k->rank - 1, k->rank, k->body, seen, vload, &n);
	free(seen);
	return 1;
}

static int multi_form(const KProgram *p, const KKernel *k, BRed *b);

// Small window reductions in four lanes (cuda_vec4_red, print_vec4_red).
// max_pool's gradient at resnet18's stem (25.7 M points of an NHWC tensor,
// 4 taps each) ran at a third of the H200's bandwidth, bound by integer
// work: each point decodes its coordinates, each tap its window position,
// parity and bounds, and these are the same for the four consecutive
// channels of a pixel.  So a reduction of a thread per point with at most
// VEC4RED_MAX_TERMS terms, at least VEC4RED_MIN_POINTS points (fewer than
// 2^30) of f32 or i64 (max_pool's argmax), its last extent a multiple of 4
// and its store index its flat point index, runs 4 consecutive points per
// thread: the term loops once, each term's body printed per lane into that
// lane's accumulator (the lanes' common index arithmetic is one computation
// after nvcc's CSE), the posts per lane, f32 in one float4 store when the
// output is 16-byte aligned (the usual one-point loop otherwise), i64 in
// four stores.  Each point folds the same terms in the
// same order as alone: bit-identical results.  Not the sums that launch
// side by side (multi_form) nor block reductions; FADC_CUDA_NO_VEC4_WIN=1
// at compile time turns it off (measurements).
#define VEC4RED_MAX_TERMS 16
#define VEC4RED_MIN_POINTS ((int64_t)1 << 18)
// A window's term is mostly index arithmetic (max_pool's gradient: 76,
// col2im up to 72), which the lanes share: the cap bounds the four copies
// NVRTC reads.
#define VEC4RED_MAX_COST 128

int
cuda_vec4_red(const KProgram *p, uint32_t ki) {
	const KKernel *k = &p->k[ki];
	BRed b;
	if (!k->red || k->host || k->contraction || k->rank < 1 || k->dim[k->rank - 1] % 4 ||
	    cuda_fused(p) || cuda_blockred(p, k) || kir_kernel_terms(k) > VEC4RED_MAX_TERMS ||
	    kx_cost(p, k->body) > VEC4RED_MAX_COST || kx_cost(p, k->post) > VEC4_MAX_COST ||
	    (p->buf[k->out].dtype != DT_F32 && p->buf[k->out].dtype != DT_I64) ||
	    p->x[k->body].dtype == DT_BOOL || kir_kernel_points(k) < VEC4RED_MIN_POINTS || kir_kernel_points(k) >= ((int64_t)1 << 30) ||
	    !cuda_vec4_on(0) || getenv("FADC_CUDA_NO_VEC4_WIN") || multi_form(p, k, &b))
		return 0;
	for (uint32_t l = 0; l < p->nloop; l++)
		if (p->loop[l].begin <= ki && ki < p->loop[l].end)
			return 0;
	return kx_flat_point(p, k, k->index);
}

int
cuda_blockred_vec4(const KProgram *p, const KKernel *k, uint8_t *vload) {
	uint8_t *seen = calloc(p->nx + 1, 1);
	FADC_ASSERT(seen, "cuda: out of memory");
	int n = 0, nv = k->rank + k->rrank;
	vec4_loads(p, nv - 1, nv, k->body, seen, vload, &n);
	free(seen);
	return n;
}

// Small tasks run as one kernel of one thread block (ARCHITECTURE.md, code
// generation): a replay costs ~0.7 us per kernel node, far more than the
// arithmetic of a ppl model.  Each kernel of the program becomes a
// __device__ function whose grid-stride loop, with one block, is a
// block-stride loop; the fused __global__ calls them in order with
// __syncthreads() between, which orders each kernel's global writes before
// the next one's reads within the block.  "Small" is the work: output
// points times reduction terms, summed over the kernels, at most
// FUSE_WORK_LIMIT (about a thousand terms per thread of 256).
#define FUSE_WORK_LIMIT ((int64_t)1 << 18)
// A fused task whose arena fits in static shared memory keeps its
// temporaries there (a dependent load costs ~30 cycles instead of an L2
// round trip of ~200): they are not arguments then, but pointers into one
// __shared__ array at the memory plan's offsets (64-byte aligned).
#define FUSED_SMEM_LIMIT (48 * 1024)

int
cuda_fused_smem(const KProgram *p) {
	return p->arena_bytes <= FUSED_SMEM_LIMIT;
}

// The work of kernel ki: its points times its reduction terms, times the
// trips of the loops around it.
static int64_t
kernel_work(const KProgram *p, uint32_t ki) {
	const KKernel *k = &p->k[ki];
	int64_t w = kir_kernel_points(k) * kir_kernel_terms(k);
	for (uint32_t l = 0; l < p->nloop; l++)
		if (p->loop[l].begin <= ki && ki < p->loop[l].end)
			w *= p->loop[l].trip > 1 ? p->loop[l].trip : 1;
	return w;
}

// A task with a host kernel is never fused: the host step splits it.
int
cuda_fused(const KProgram *p) {
	if (p->nk < 2)
		return 0;
	int64_t work = 0;
	for (uint32_t i = 0; i < p->nk; i++) {
		if (p->k[i].host)
			return 0;
		work += kernel_work(p, i);
		if (work > FUSE_WORK_LIMIT)
			return 0;
	}
	return 1;
}

// ---------------------------------------------------------------- fused phases
//
// Inside the fused kernel a barrier (__syncthreads) is needed between two
// kernels only where a thread may touch a byte that another thread touched
// in an earlier kernel, at least one of the two touches being a write: a
// read of another thread's result (RAW), a write over bytes another thread
// still reads (WAR: the memory plan reuses arena bytes once a buffer is
// dead) or over bytes another thread wrote (WAW).  Within one thread,
// program order already orders its accesses (the pointers are not
// __restrict__ in a fused task, so the compiler keeps that order too).  So
// the kernels are grouped, in order and greedily, into phases: kernel j
// joins the current phase when, for every kernel i already in it, each
// byte both touch (one of them writing) is touched by one and the same
// thread; a barrier starts the next phase otherwise.  The rule, per pair,
// is conservative:
// - Bytes are those of buffers: two buffers share bytes when they are one
//   buffer, or both temporaries whose arena ranges overlap.  Task inputs
//   and outputs are disjoint from each other and from the arena (the
//   runtime refuses overlapping outputs and inputs), and inputs are never
//   written.
// - The same thread touches them only when (a) the two buffers are one, or
//   temporaries at the same offset with the same element size (element e
//   of one is element e of the other), (b) the writer stores element e at
//   its own point e (its store index is its flattened point index) and
//   every read of the buffer is at the reader's own point index
//   (kx_flat_point below; a reduction reading across its terms is not),
//   and (c) point e of both kernels runs on the same thread: the mapping of
//   each kernel's form (cuda_fused_mode) agrees for every point both have.
// - A loop's start and end are barriers (and the end of its body, every
//   trip): the analysis is of straight-line runs of kernels only.
// Kernels that share no bytes at all (independent kernels) always share a
// phase.  A wrong elision would be a race; tests/gpu/gpu_check.c checks
// every task's values on a GPU, and tests/unit/test_codegen_cuda.c checks
// the phase counts of hand-checked programs.

// The thread that evaluates a point's stored value (and its post region).
static int64_t
fmode_owner(FMode m, int64_t t) {
	return m == FM_THREAD ? t % FUSED_THREADS : m == FM_WARP ? 32 * (t % (FUSED_THREADS / 32)) : 0;
}

// e as c0 + sum coef[v] var v, for an integer expression of loop
// variables, constants, sums and products by constants (0: not of that
// form: a load, a division, a step counter, ...).
static int
lin_vars(const KProgram *p, KxId e, int64_t m, int64_t *coef, int64_t *c0) {
	const Kx *x = &p->x[e];
	switch ((KxOp)x->op) {
	case KX_CONST:
		*c0 += m * x->i;
		return x->dtype == DT_I64;
	case KX_VAR:
		if (x->aux >= 2 * IR_MAXDIM)
			return 0;
		coef[x->aux] += m;
		return 1;
	case KX_IADD:
		return lin_vars(p, x->a[0], m, coef, c0) && lin_vars(p, x->a[1], m, coef, c0);
	case KX_IMUL:
		return p->x[x->a[1]].op == KX_CONST && lin_vars(p, x->a[0], m * p->x[x->a[1]].i, coef, c0);
	default:
		return 0;
	}
}

// Is index e kernel k's own flattened (row-major) point index?
static int
kx_flat_point(const KProgram *p, const KKernel *k, KxId e) {
	int64_t coef[2 * IR_MAXDIM] = {0}, c0 = 0, stride = 1;
	if (!e || !lin_vars(p, e, 1, coef, &c0) || c0)
		return 0;
	for (int v = 2 * IR_MAXDIM; v-- > 0;) {
		if (v >= k->rank) {
			if (coef[v])
				return 0;
			continue;
		}
		if (k->dim[v] > 1 && coef[v] != stride)
			return 0;
		stride *= k->dim[v];
	}
	return 1;
}

// What a kernel reads, per buffer: RD_OWN when every read is by the
// thread owning the point, at the point's own index; RD_ANY otherwise.
enum { RD_NONE, RD_OWN, RD_ANY };

static void
reads_of(const KProgram *p, const KKernel *k, KxId id, int own, uint8_t *seen, uint8_t *rd) {
	if (!id || seen[id] & (own ? 1 : 2))
		return;
	seen[id] |= own ? 1 : 2;
	const Kx *x = &p->x[id];
	if (x->op == KX_LOAD) {
		int r = own && kx_flat_point(p, k, x->a[0]) ? RD_OWN : RD_ANY;
		if (r > rd[x->aux])
			rd[x->aux] = (uint8_t)r;
	}
	for (int i = 0; i < x->nin; i++)
		reads_of(p, k, x->a[i], own, seen, rd);
}

// rd[b] for kernel k (nbuf entries, zeroed by the caller).  A reduction's
// terms (body) are read by every thread of a warp or of the block in those
// forms; its post region and store index by the owner alone.
static void
kernel_reads(const KProgram *p, const KKernel *k, uint8_t *seen, uint8_t *rd) {
	memset(seen, 0, p->nx + 1);
	FMode m = cuda_fused_mode(p, k);
	reads_of(p, k, k->body, m == FM_THREAD || !k->red, seen, rd);
	reads_of(p, k, k->post, 1, seen, rd);
	reads_of(p, k, k->index, 1, seen, rd);
}

// A fused task whose temporaries all fit in shared memory side by side
// (their sizes summed, naive_bytes, at most FUSED_SMEM_LIMIT) gives each
// its own bytes there (print_group) instead of the memory plan's offsets:
// the plan's reuse saves nothing that matters at that size, and every
// reuse is a write-after-read hazard (a barrier, and kernels that cannot
// rotate apart).  Only fused tasks are analysed here.
int
cuda_tmp_private(const KProgram *p) {
	return p->naive_bytes <= FUSED_SMEM_LIMIT;
}

static int
buf_overlap(const KProgram *p, uint32_t a, uint32_t b) {
	const KBuf *x = &p->buf[a], *y = &p->buf[b];
	if (a == b)
		return 1;
	if (x->kind != KB_TMP || y->kind != KB_TMP || !x->bytes || !y->bytes || cuda_tmp_private(p))
		return 0;
	return x->offset < y->offset + y->bytes && y->offset < x->offset + x->bytes;
}

// Element e of a is element e of b (one buffer, or the same placement).
static int
buf_same_place(const KProgram *p, uint32_t a, uint32_t b) {
	const KBuf *x = &p->buf[a], *y = &p->buf[b];
	return a == b || (x->kind == KB_TMP && y->kind == KB_TMP && !cuda_tmp_private(p) &&
	                  x->offset == y->offset &&
	                  kir_dtype_size(x->dtype) == kir_dtype_size(y->dtype));
}

// Do kernels i and j run every point both have on the same thread?
static int
owners_agree(const KProgram *p, uint32_t i, uint32_t j) {
	FMode mi = cuda_fused_mode(p, &p->k[i]), mj = cuda_fused_mode(p, &p->k[j]);
	int64_t ni = kir_kernel_points(&p->k[i]), nj = kir_kernel_points(&p->k[j]);
	int64_t n = ni < nj ? ni : nj;
	for (int64_t t = 0; t < n && t < FUSED_THREADS; t++) // both periodic in 256
		if (fmode_owner(mi, t) != fmode_owner(mj, t))
			return 0;
	return 1;
}

// May kernel j run after kernel i (earlier) without a barrier between?
// rdi, rdj: their reads (kernel_reads).
static int
no_hazard(const KProgram *p, uint32_t i, uint32_t j, const uint8_t *rdi, const uint8_t *rdj) {
	const KKernel *ki = &p->k[i], *kj = &p->k[j];
	int own = -1; // owners_agree, computed once when needed
	int wi = kx_flat_point(p, ki, ki->index), wj = kx_flat_point(p, kj, kj->index);
	for (uint32_t b = 0; b < p->nbuf; b++) {
		// RAW: j reads what i wrote; WAR: j writes what i read.
		int raw = rdj[b] && buf_overlap(p, ki->out, b);
		int war = rdi[b] && buf_overlap(p, kj->out, b);
		if (!raw && !war)
			continue;
		if (raw && !(rdj[b] == RD_OWN && wi && buf_same_place(p, ki->out, b)))
			return 0;
		if (war && !(rdi[b] == RD_OWN && wj && buf_same_place(p, kj->out, b)))
			return 0;
		if (own < 0)
			own = owners_agree(p, i, j);
		if (!own)
			return 0;
	}
	// WAW: both write the same bytes.
	if (buf_overlap(p, ki->out, kj->out)) {
		if (!(wi && wj && buf_same_place(p, ki->out, kj->out)))
			return 0;
		if (own < 0)
			own = owners_agree(p, i, j);
		if (!own)
			return 0;
	}
	return 1;
}

// bar[ki] for the kernels of a fused task: 1 when a barrier follows kernel
// ki (never after the task's last kernel unless a loop ends there: the
// next trip).  Returns the phases: the runs of kernels between barriers,
// counted in the program text (a loop's body once).
uint32_t
cuda_fused_barriers(const KProgram *p, uint8_t *bar) {
	uint8_t *seen = calloc(p->nx + 1, 1);
	uint8_t *rd = calloc((size_t)(p->nk + 1) * (p->nbuf + 1), 1);
	FADC_ASSERT(seen && rd, "cuda: out of memory");
	for (uint32_t ki = 0; ki < p->nk; ki++)
		kernel_reads(p, &p->k[ki], seen, rd + (size_t)ki * (p->nbuf + 1));
	uint32_t phases = p->nk ? 1 : 0, begin = 0;
	for (uint32_t j = 0; j < p->nk; j++) {
		bar[j] = 0;
		// A loop starting or ending between j - 1 and j (non-empty loops).
		int edge = 0;
		for (uint32_t l = 0; l < p->nloop; l++)
			if (p->loop[l].end > p->loop[l].begin &&
			    ((j > 0 && p->loop[l].begin == j) || p->loop[l].end == j))
				edge = 1;
		int need = edge;
		for (uint32_t i = begin; i < j && !need; i++)
			need = !no_hazard(p, i, j, rd + (size_t)i * (p->nbuf + 1),
			                  rd + (size_t)j * (p->nbuf + 1));
		if (j > 0 && need) {
			bar[j - 1] = 1;
			phases++;
			begin = j;
		}
	}
	// The end of a loop's body: a barrier every trip (the next trip's
	// kernels read the carries), also after the task's last kernel.
	for (uint32_t l = 0; l < p->nloop; l++)
		if (p->loop[l].end > p->loop[l].begin)
			bar[p->loop[l].end - 1] = 1;
	free(seen);
	free(rd);
	return phases;
}

uint32_t
cg_cuda_phases(const KProgram *p) {
	if (!cuda_fused(p))
		return 0;
	uint8_t *bar = calloc(p->nk + 1, 1);
	FADC_ASSERT(bar, "cuda: out of memory");
	uint32_t n = cuda_fused_barriers(p, bar);
	free(bar);
	return n;
}

// The form of a kernel of a fused task.  Elementwise kernels, and
// reductions of one term, are FM_THREAD.  A reduction takes the form with
// the fewest dependent steps per thread, counting a term c (its cost,
// term_cost: 1 for a load and an add, more for a logarithm, lgamma,
// digamma), a shuffle step SHFL_COST and a barrier BAR_COST:
//   FM_THREAD  ceil(points / 256) * terms * c
//   FM_WARP    ceil(points / 8) * (ceil(terms / 32) * c + 5 SHFL_COST)
//   FM_BLOCK   points * (ceil(terms / 256) * c + 10 SHFL_COST + BAR_COST)
// FM_THREAD on ties (its points stay on the threads that pointwise
// kernels use, so it shares their phases), then FM_WARP.  So a handful of
// points of more than ~20 plain terms is a warp's shuffle each (no
// barrier), of more than ~1000 terms the whole block's (one barrier per
// point); a sum of 10 logarithms (ppl_robust_reg's likelihood) is a
// warp's: its terms in parallel, then 5 shuffles, rather than 10 dependent
// logarithms in one thread.
#define SHFL_COST 4
#define BAR_COST 8

// A reduction term's cost in the units of cuda_fused_mode: a plain term (a load
// and an add, 5 quarter steps of kx_cost, codegen/kir.c) is 1.
static int64_t
term_cost(const KProgram *p, const KKernel *k) {
	int64_t c = (kx_cost(p, k->body) + 1) / 4;
	return c > 1 ? c : 1;
}

FMode
cuda_fused_mode(const KProgram *p, const KKernel *k) {
	if (!k->red || k->host)
		return FM_THREAD;
	int64_t npt = kir_kernel_points(k), nr = kir_kernel_terms(k);
	if (nr <= 1 || npt == 0)
		return FM_THREAD;
	int64_t c = term_cost(p, k), nw = FUSED_THREADS / 32;
	int64_t th = (npt + FUSED_THREADS - 1) / FUSED_THREADS * nr * c;
	int64_t wa = (npt + nw - 1) / nw * ((nr + 31) / 32 * c + 5 * SHFL_COST);
	int64_t bl = npt * ((nr + FUSED_THREADS - 1) / FUSED_THREADS * c + 10 * SHFL_COST + BAR_COST);
	if (th <= wa && th <= bl)
		return FM_THREAD;
	return wa <= bl ? FM_WARP : FM_BLOCK;
}

int
cg_cuda_fused_form(const KProgram *p, uint32_t ki) {
	return cuda_fused(p) ? (int)cuda_fused_mode(p, &p->k[ki]) : -1;
}

// ---------------------------------------------------------------- warp rotation
//
// Point t of a kernel runs on thread t % 256 (a warp's reduction: warp
// t % 8), so every scalar kernel of a phase ran on thread 0, one after the
// other, while seven warps waited at the next barrier: ppl_robust_reg's
// phases are mostly independent scalar chains (a sum of logarithms, an
// lgamma, a digamma).  A kernel may instead run rotated by r warps (point
// t on thread (t + 32 r) % 256, or warp (t + r) % 8), as long as every
// kernel whose bytes it shares within its phase (the pairs whose lack of
// a barrier cuda_fused_barriers proved through owners_agree) rotates with it:
// a common rotation maps equal owners to equal owners, so the phases stay
// right.  So within each phase the kernels are grouped (union of the
// pairs that touch a common byte, one writing), and each group takes the
// rotation that least raises the busiest warp's work (work: points times
// their cost, term_cost), the costliest groups first.  A block reduction
// (FM_BLOCK) uses every warp: its group stays at 0.

static int64_t
point_cost(const KProgram *p, const KKernel *k, FMode m) {
	int64_t nr = kir_kernel_terms(k);
	int64_t c = k->red ? term_cost(p, k) : (kx_cost(p, k->body) + 3) / 4;
	c = c > 1 ? c : 1;
	if (m == FM_WARP)
		return (nr + 31) / 32 * c + 5 * SHFL_COST;
	return nr * c;
}

// Does kernel j share a byte with kernel i that one of them writes?
static int
kernels_touch(const KProgram *p, uint32_t i, uint32_t j, const uint8_t *rdi, const uint8_t *rdj) {
	const KKernel *ki = &p->k[i], *kj = &p->k[j];
	if (buf_overlap(p, ki->out, kj->out))
		return 1;
	for (uint32_t b = 0; b < p->nbuf; b++)
		if ((rdj[b] && buf_overlap(p, ki->out, b)) || (rdi[b] && buf_overlap(p, kj->out, b)))
			return 1;
	return 0;
}

static uint32_t
uf_find(uint32_t *up, uint32_t i) {
	while (up[i] != i)
		i = up[i] = up[up[i]];
	return i;
}

// rot[ki] (0..7) for the kernels of a fused task whose barriers are bar
// (cuda_fused_barriers).  FADC_CUDA_NO_ROTATE=1 leaves every kernel at 0
// (measurements of the gain).
void
cuda_fused_rotations(const KProgram *p, const uint8_t *bar, uint8_t *rot) {
	memset(rot, 0, p->nk);
	const char *off = getenv("FADC_CUDA_NO_ROTATE");
	if (off && *off && strcmp(off, "0"))
		return;
	enum { NW = FUSED_THREADS / 32 };
	uint8_t *seen = calloc(p->nx + 1, 1);
	uint8_t *rd = calloc((size_t)(p->nk + 1) * (p->nbuf + 1), 1);
	uint32_t *up = calloc(p->nk + 1, sizeof *up);
	int64_t *gw = calloc((size_t)(p->nk + 1) * NW, sizeof *gw);
	uint8_t *pinned = calloc(p->nk + 1, 1); // per group root: 1 pinned at 0, 2 placed
	FADC_ASSERT(seen && rd && up && gw && pinned, "cuda: out of memory");
	for (uint32_t ki = 0; ki < p->nk; ki++)
		kernel_reads(p, &p->k[ki], seen, rd + (size_t)ki * (p->nbuf + 1));
	for (uint32_t b = 0; b < p->nk;) {
		uint32_t e = b;
		while (e < p->nk && !(e > b && bar[e - 1]))
			e++;
		// Kernels b .. e-1 form a phase: group them.
		for (uint32_t i = b; i < e; i++)
			up[i] = i;
		for (uint32_t j = b; j < e; j++)
			for (uint32_t i = b; i < j; i++)
				if (kernels_touch(p, i, j, rd + (size_t)i * (p->nbuf + 1),
				                  rd + (size_t)j * (p->nbuf + 1)))
					up[uf_find(up, j)] = uf_find(up, i);
		// Each group's work per warp at rotation 0 (at its root's row);
		// a block reduction pins its group.
		int64_t load[NW] = {0};
		for (uint32_t i = b; i < e; i++)
			pinned[i] = 0;
		for (uint32_t i = b; i < e; i++)
			memset(gw + (size_t)i * NW, 0, NW * sizeof *gw);
		for (uint32_t i = b; i < e; i++) {
			const KKernel *k = &p->k[i];
			uint32_t g = uf_find(up, i);
			FMode m = cuda_fused_mode(p, k);
			int64_t npt = kir_kernel_points(k), pc = point_cost(p, k, m), *w = gw + (size_t)g * NW;
			if (m == FM_BLOCK) {
				pinned[g] = 1;
				for (int x = 0; x < NW; x++)
					w[x] += npt * pc / NW + 1;
				continue;
			}
			for (int x = 0; x < NW; x++) {
				// points t < npt on warp x: FM_THREAD (t % 256) / 32 == x,
				// FM_WARP t % 8 == x.
				int64_t n;
				if (m == FM_WARP)
					n = npt / NW + (npt % NW > x);
				else {
					int64_t full = npt / FUSED_THREADS, rest = npt % FUSED_THREADS;
					int64_t in = rest - 32 * x;
					n = full * 32 + (in <= 0 ? 0 : in > 32 ? 32 : in);
				}
				w[x] += n * pc;
			}
		}
		// Pinned groups first, then the others by their busiest warp,
		// costliest first (ties: the earlier kernel).
		for (;;) {
			int64_t best = -1;
			uint32_t bg = 0;
			for (uint32_t i = b; i < e; i++) {
				if (uf_find(up, i) != i || pinned[i] == 2)
					continue;
				int64_t mx = 0;
				for (int x = 0; x < NW; x++)
					mx = gw[(size_t)i * NW + x] > mx ? gw[(size_t)i * NW + x] : mx;
				mx += pinned[i] ? (int64_t)1 << 60 : 0;
				if (mx > best)
					best = mx, bg = i;
			}
			if (best < 0)
				break;
			const int64_t *w = gw + (size_t)bg * NW;
			// The rotation giving the least busiest warp overall, then the
			// least busy warps of the group's own (spread, not stacked: a
			// lighter group beside the busiest warp's would fit under its
			// work on any warp, but shares the warp's issue slots).
			int br = 0;
			int64_t bmax = -1, bown = -1;
			for (int r = 0; r < (pinned[bg] ? 1 : NW); r++) {
				int64_t mx = 0, own = 0;
				for (int x = 0; x < NW; x++) {
					int64_t l = load[(x + r) % NW] + w[x];
					mx = l > mx ? l : mx;
					if (w[x] && l > own)
						own = l;
				}
				if (bmax < 0 || mx < bmax || (mx == bmax && own < bown))
					bmax = mx, bown = own, br = r;
			}
			for (int x = 0; x < NW; x++)
				load[(x + br) % NW] += w[x];
			for (uint32_t i = b; i < e; i++)
				if (uf_find(up, i) == bg)
					rot[i] = (uint8_t)br;
			pinned[bg] = 2;
		}
		b = e;
	}
	free(seen);
	free(rd);
	free(up);
	free(gw);
	free(pinned);
}

// ---------------------------------------------------------------- launches
//
// A task's launches (La, cuda_sched.h, says what each kind is) and their
// contracts, the CgCudaKernel records codegen/compile.c writes into the
// artifact.

// The outermost non-empty loop that begins at kernel i, or -1.
static int
outer_loop_at(const KProgram *p, uint32_t i) {
	for (uint32_t l = 0; l < p->nloop; l++)
		if (p->loop[l].parent < 0 && p->loop[l].begin == i && p->loop[l].end > i)
			return (int)l;
	return -1;
}

// Large GEMMs go to cuBLAS.  A printed contraction is one thread per
// output point with a loop over K (or one block per point): far from
// cuBLAS's tiled tensor-core kernels once M N K is large (a 512 x 512 x
// 512 product: ~1 ms against ~20 us).  For small products a cuBLAS call
// (~5 us of launch and setup, one more graph node) gains nothing over the
// printed kernel.  Between the two only the GPU can tell (the shape
// matters as much as the work: a skinny product leaves cuBLAS's tiles
// mostly empty), so a contraction of CG_CUDA_GEMM_MIN_WORK (2^16) to
// CG_CUDA_GEMM_ONLY_WORK (2^22) multiply-adds is both: a printed kernel
// and a GEMM record behind a choice record, timed at the task's first run.
// A kernel inside a loop stays in its persistent kernel.  Returns 0 (no
// GEMM), GEMM_ONLY or GEMM_CHOICE, and the plan into g.
int
cuda_gemm_launch(const KProgram *p, uint32_t ki, KGemmPlan *g) {
	// The plan's analysis only for large contractions (the launch plan is
	// asked for once per launch record).
	int64_t work = kernel_work(p, ki);
	if (!p->k[ki].contraction || work < CG_CUDA_GEMM_MIN_WORK)
		return GEMM_NONE;
	for (uint32_t l = 0; l < p->nloop; l++)
		if (p->loop[l].begin <= ki && ki < p->loop[l].end)
			return GEMM_NONE;
	KGemmPlan tmp;
	if (!g)
		g = &tmp;
	if (!kir_gemm_plan(p, &p->k[ki], g) ||
	    g->batch * g->M * g->N < (CG_CUDA_GEMM_MIN_WORK + g->K - 1) / g->K)
		return GEMM_NONE;
	return work < CG_CUDA_GEMM_ONLY_WORK ? GEMM_CHOICE : GEMM_ONLY;
}

// A convolution's kernels (conv_gemm's im2col, GEMMs, col2im, transposing
// copies: KKernel.conv) can all be replaced by one cuDNN call, which reads
// the input and writes the result with no column buffer at all.  Whether
// cuDNN's kernels or the im2col path is faster depends on the shape, the
// GPU and the library, and cuDNN is optional, so it is a choice: the
// launches the kernels have alone (a sequence), or cuDNN, timed on the GPU
// like a GEMM's (docs/CUDA.md, "cuDNN convolutions").  The range is from
// the convolution's first kernel to its last, kernels that later passes
// inserted in between (split reductions, materialized operands: they write
// only the convolution's temporaries) included; none may lie in a loop or
// be a host step, and every extent must fit cuDNN's int.
int
cuda_conv_launch(const KProgram *p, uint32_t ki, uint32_t *end) {
	uint32_t c = p->k[ki].conv;
	if (!c || c > p->nconv || (ki > 0 && p->k[ki - 1].conv == c))
		return -1;
	uint32_t last = ki;
	for (uint32_t j = ki; j < p->nk && (p->k[j].conv == c || !p->k[j].conv); j++)
		if (p->k[j].conv == c)
			last = j;
	for (uint32_t j = ki; j <= last; j++)
		if (p->k[j].host)
			return -1;
	for (uint32_t l = 0; l < p->nloop; l++)
		if (p->loop[l].begin <= last && ki < p->loop[l].end && p->loop[l].end > p->loop[l].begin)
			return -1;
	const KConv *v = &p->conv[c - 1];
	const int64_t ext[] = {v->n,  v->c,  v->h,  v->w,  v->k,  v->r,  v->s,  v->oh, v->ow,
	                       v->sh, v->sw, v->ph, v->pw, v->dh, v->dw, v->groups};
	for (size_t i = 0; i < sizeof ext / sizeof ext[0]; i++)
		if (ext[i] < (i == 11 || i == 12 ? 0 : 1) || ext[i] > INT32_MAX)
			return -1;
	*end = last + 1;
	return (int)c - 1;
}

// Sibling partial sums in one launch (LA_MULTI).  kir_layout.c emits the
// channel splits' first kernels of batch norm's backward sums together
// (csum_siblings): sum(dy), sum(dy x^), sum(dy (x - mean)) over one
// tensor, each a thread per (.., j, c) folding 64 terms of its operands.
// Run one after the other, each reads dy (and x) again: three passes over
// the layer's activations where one does (resnet18's TF32 vjp, H200: the
// stem's three 32 + 55 + 54 us, layer1's 10 + 17 + 18 us).  So a run of
// such kernels, all "channel_partial_sum", thread per point (no block
// form), outside loops, with equal parallel and reduction domains, none
// reading or overlapping in the arena another's output and no output
// overlapping a buffer the run reads, is one __global__: per point, one
// loop over the terms folds each kernel's term into its own accumulator
// (the loads the kernels share, hash-consed, are one load), then each
// stores its post.  Each kernel's sum is the same terms added in the same
// order as alone (only nvcc's FMA contraction, free in either form, could
// differ).
//
// The splits' second kernels follow side by side too (kir_layout.c emits
// them in the first kernels' order): per channel, the sum of the
// partials, one "sum" or "mean" per sibling, each its own launch of a few
// microseconds (resnet18's TF32 vjp: ~60 of them in 20 groups, at the
// launch floor; in a CUDA graph replay each kernel node costs about as
// much again).  They read different buffers over equal domains, so the
// same rule makes a run of them one launch: thread per point (few
// partials a channel) as above, or, where each is a column block
// reduction of one plan (cuda_blockred_plan: the same tiles, chunks and
// unrolling), one block reduction whose every thread folds each kernel's
// terms into accumulators of its own (print_blockred with several
// kernels): the same terms in the same order per kernel as alone.
// FADC_CUDA_NO_MULTI_SUMS=1 at compile time keeps those one launch each.
//
// Epilogues: after such sums (one or more, "sum" or "mean") come
// elementwise kernels over the same points that read them only at their
// own point (batch norm's per-channel coefficients from its sums: 2 per
// batch norm backward, 1 per statistics pass; a few microseconds each at
// the launch floor for 64 to 512 points).  They run in the same launch,
// by the thread that stored the sums' values at that point (a block
// reduction's: the lane of the block that stored the tile's, the last
// chunk's when split), after those stores: program order makes the
// values visible, and no other thread reads them in the launch.  An
// epilogue must store at its own flattened point index, read any output
// of the launch only at its own point and only as that very buffer (not
// another placed on its bytes), and write bytes no kernel of the launch
// reads or writes.  Off by default, for NVRTC's time: resnet18's TF32
// vjp, jvp and vhp compiled with 15.96 s of NVRTC CPU with the sums one
// launch each, 16.81 with the sums side by side, 19.29 with epilogues
// after groups of two or more sums, ~20 with every sum's (a single sum
// with its epilogue is a function of its own where the sum alone was
// shared with every equal sum of the task; 2-core machine under load,
// docs/PERFORMANCE.md, h-g20a), for 0.046 ms of a 4.96 ms vjp on the
// H200.  FADC_CUDA_MULTI_EPI=1 at compile time: after groups of two or
// more sums; FADC_CUDA_MULTI_EPI_ALL=1: after every sum;
// FADC_CUDA_NO_MULTI_EPI=1: never (wins).
#define MULTI_MAX 4
#define MULTI_MAX_EPI 4
#define MULTI_MAX_COST 256 // the bodies together (nvcc's registers, NVRTC's time)
#define MULTI_EPI_COST 64

// The form of a multi launch's kernel k: 1 a thread per point, 2 a column
// block reduction (plan *b), 0 none.
static int
multi_form(const KProgram *p, const KKernel *k, BRed *b) {
	int cps = k->what && !strcmp(k->what, "channel_partial_sum");
	int sums = k->what && (!strcmp(k->what, "sum") || !strcmp(k->what, "mean"));
	if (!(cps || sums) || k->red != KR_SUM || k->host || k->contraction || k->conv ||
	    p->x[k->body].dtype == DT_BOOL)
		return 0;
	if (!cuda_blockred(p, k))
		return 1;
	return sums && cuda_blockred_plan(p, k, 0, b) && b->ilp && b->col && !b->vec ? 2 : 0;
}

// The end of the epilogues (above) of the sums [i, e): e when none.
static uint32_t
multi_epilogue_end(const KProgram *p, uint32_t i, uint32_t e) {
	const KKernel *k = &p->k[i];
	for (uint32_t m = i; m < e; m++)
		if (!kx_flat_point(p, &p->k[m], p->k[m].index))
			return e;
	uint8_t *seen = calloc(p->nx + 1, 1), *rd = calloc(p->nbuf + 1, 1);
	FADC_ASSERT(seen && rd, "cuda: out of memory");
	uint32_t f = e;
	for (; f < p->nk && f - e < MULTI_MAX_EPI; f++) {
		const KKernel *s = &p->k[f];
		if (s->red || s->host || s->contraction || s->conv || !s->body || s->rank != k->rank ||
		    memcmp(s->dim, k->dim, sizeof k->dim) || outer_loop_at(p, f) >= 0 ||
		    !kx_flat_point(p, s, s->index) || kx_cost(p, s->body) > MULTI_EPI_COST)
			break;
		memset(seen, 0, p->nx + 1);
		memset(rd, 0, p->nbuf + 1);
		reads_of(p, s, s->body, 1, seen, rd);
		reads_of(p, s, s->index, 1, seen, rd);
		int bad = 0;
		// Its reads of the launch's outputs: at its own point, of that buffer.
		for (uint32_t j = i; j < f && !bad; j++)
			for (uint32_t b = 0; b < p->nbuf && !bad; b++)
				bad = rd[b] && grid_overlap(p, p->k[j].out, b) &&
				      (rd[b] != RD_OWN || b != p->k[j].out);
		// Its output against every buffer the launch reads and every output.
		for (uint32_t j = i; j <= f && !bad; j++) {
			Uses u = {0};
			cuda_kernel_uses(p, &p->k[j], &u);
			for (uint32_t b = 0; b < p->nbuf && !bad; b++)
				bad = u.buf[b] && grid_overlap(p, s->out, b);
			bad = bad || (j < f && grid_overlap(p, s->out, p->k[j].out));
			free(u.seen);
			free(u.buf);
			free(u.step);
		}
		if (bad)
			break;
	}
	free(seen);
	free(rd);
	return f;
}

uint32_t
cuda_multi_sums(const KProgram *p, const La *a) {
	uint32_t n = 0;
	while (a->begin + n < a->end && p->k[a->begin + n].red)
		n++;
	return n;
}

// A multi launch's block reduction (its sums a column group): its first
// sum's plan, with up to as many times the chunks as it has sums, each
// still at least BLOCKRED_MIN_CHUNK_COL terms.  Each chunk folds every
// sum's terms, so with one sum's chunks a group of three ran three times
// the dependent loads per warp: resnet18's stem group (3 x 64 channels of
// 6,272 partials, 2 tiles x 32 chunks) took 23.9 us where its three sums
// had taken 9.5 each (H200, eagerly).  0 when the launch is no block
// reduction.  FADC_CUDA_MULTI_ONE_PLAN=1 at compile time: the first sum's
// plan as is (measurements).
int
cuda_multi_plan(const KProgram *p, const La *a, BRed *b) {
	const KKernel *k0 = &p->k[a->begin];
	if (!cuda_blockred_plan(p, k0, 0, b))
		return 0;
	int64_t ns = (int64_t)cuda_multi_sums(p, a), nr = kir_kernel_terms(k0);
	if (!b->col || b->g < 2 || ns < 2 || getenv("FADC_CUDA_MULTI_ONE_PLAN"))
		return 1;
	int64_t g = b->g * ns;
	if (g > nr / BLOCKRED_MIN_CHUNK_COL)
		g = nr / BLOCKRED_MIN_CHUNK_COL;
	if (g > b->g) {
		b->len = (nr + g - 1) / g;
		b->g = (nr + b->len - 1) / b->len; // no empty chunk
		b->units = b->tiles * b->g;
	}
	return 1;
}

uint32_t
cuda_multi_end(const KProgram *p, uint32_t i) {
	const KKernel *k = &p->k[i];
	BRed b0, bs;
	int form = cuda_fused(p) || outer_loop_at(p, i) >= 0 || getenv("FADC_CUDA_NO_MULTI")
	               ? 0
	               : multi_form(p, k, &b0);
	int cps = form && !strcmp(k->what, "channel_partial_sum");
	if (!form || (!cps && getenv("FADC_CUDA_NO_MULTI_SUMS")))
		return i + 1;
	uint32_t e = i + 1;
	int64_t cost = kx_cost(p, k->body);
	Uses u = {0};
	for (; e < p->nk && e - i < MULTI_MAX; e++) {
		const KKernel *s = &p->k[e];
		if (multi_form(p, s, &bs) != form ||
		    cps != !strcmp(s->what, "channel_partial_sum") || s->rank != k->rank ||
		    s->rrank != k->rrank || memcmp(s->dim, k->dim, sizeof k->dim) ||
		    memcmp(s->rdim, k->rdim, sizeof k->rdim) ||
		    p->x[s->body].dtype != p->x[k->body].dtype || outer_loop_at(p, e) >= 0 ||
		    (form == 2 && memcmp(&bs, &b0, sizeof bs)) ||
		    (cost += kx_cost(p, s->body)) > MULTI_MAX_COST)
			break;
		// The pairs new with e: e's output against every output and
		// every buffer read of the run (e included), e's reads against
		// the earlier outputs.
		int clash = 0;
		for (uint32_t j = i; j <= e && !clash; j++) {
			cuda_kernel_uses(p, &p->k[j], &u);
			for (uint32_t b = 0; b < p->nbuf && !clash; b++)
				clash = u.buf[b] && grid_overlap(p, s->out, b);
			if (j < e)
				clash = clash || grid_overlap(p, s->out, p->k[j].out);
			for (uint32_t m = i; j == e && m < e && !clash; m++)
				for (uint32_t b = 0; b < p->nbuf && !clash; b++)
					clash = u.buf[b] && grid_overlap(p, p->k[m].out, b);
			free(u.seen);
			free(u.buf);
			free(u.step);
			memset(&u, 0, sizeof u);
		}
		if (clash)
			break;
	}
	if (!cps && !getenv("FADC_CUDA_NO_MULTI_EPI") &&
	    ((e - i >= 2 && getenv("FADC_CUDA_MULTI_EPI")) || getenv("FADC_CUDA_MULTI_EPI_ALL")))
		e = multi_epilogue_end(p, i, e);
	return e - i >= 2 ? e : i + 1;
}

// The launches of p into la (NULL: only counted).
uint32_t
cuda_launch_plan(const KProgram *p, La *la) {
	if (cuda_fused(p)) {
		if (la)
			la[0] = (La){LA_FUSED, 0, p->nk, -1};
		return 1;
	}
	uint32_t n = 0;
	for (uint32_t i = 0; i < p->nk;) {
		uint32_t cend;
		int cv = cuda_conv_launch(p, i, &cend);
		if (cv >= 0) { // choice, sequence, its launches, cuDNN
			if (la) {
				la[n] = (La){LA_CONVCHOICE, i, cend, cv};
				la[n + 1] = (La){LA_SEQ, i, cend, cv};
			}
			n += 2;
			for (uint32_t ki = i; ki < cend; ki++, n++)
				if (la)
					la[n] = (La){cuda_gemm_launch(p, ki, NULL) != GEMM_NONE ? LA_GEMM
					                                                       : LA_KERNEL,
					             ki, ki + 1, -1};
			if (la)
				la[n] = (La){LA_CONV, i, cend, cv};
			n++;
			i = cend;
			continue;
		}
		uint32_t mend = cuda_multi_end(p, i);
		if (mend > i + 1) {
			if (la)
				la[n] = (La){LA_MULTI, i, mend, -1};
			n++;
			i = mend;
			continue;
		}
		int l = outer_loop_at(p, i);
		int gm = l < 0 && !p->k[i].host ? cuda_gemm_launch(p, i, NULL) : 0;
		La a = l >= 0 ? (La){LA_LOOP, i, p->loop[l].end, l}
		              : (La){p->k[i].host         ? LA_HOST
		                     : gm == GEMM_ONLY   ? LA_GEMM
		                     : gm == GEMM_CHOICE ? LA_CHOICE
		                                         : LA_KERNEL,
		                     i, i + 1, -1};
		if (la)
			la[n] = a;
		n++;
		if (a.kind == LA_CHOICE) { // the candidates: the printed kernel, then the GEMM
			if (la) {
				la[n] = (La){LA_KERNEL, i, i + 1, -1};
				la[n + 1] = (La){LA_GEMM, i, i + 1, -1};
			}
			n += 2;
		}
		i = a.end;
	}
	return n;
}

static La
launch_at(const KProgram *p, uint32_t li) {
	La *la = calloc(LA_MAX(p), sizeof *la);
	FADC_ASSERT(la, "cuda: out of memory");
	uint32_t n = cuda_launch_plan(p, la);
	FADC_ASSERT(li < n, "cuda: a launch index past the task's launches");
	La a = la[li];
	free(la);
	return a;
}

// A persistent kernel's blocks: as many as its widest kernel can use, at
// most PERSIST_MAX_BLOCKS.  Its grid-wide barrier needs every block
// resident at once, so the kernel keeps only the first min(grid, %nsmid)
// blocks (the rest return at once) and is compiled with
// __launch_bounds__(256, 2), which leaves room for two blocks per SM:
// %nsmid (the SM identifiers' bound) is at least the SM count and, on
// every part so far, less than twice it.
#define PERSIST_MAX_BLOCKS 256

static uint32_t
persist_grid(const KProgram *p, uint32_t begin, uint32_t end) {
	int64_t g = 1;
	for (uint32_t ki = begin; ki < end; ki++) {
		const KKernel *k = &p->k[ki];
		int64_t npt = kir_kernel_points(k);
		Tile t;
		int64_t b = cuda_loop_tile(p, k, &t) ? t.units
		            : cuda_blockred(p, k)    ? npt
		                                     : (npt + FUSED_THREADS - 1) / FUSED_THREADS;
		if (b > g)
			g = b;
	}
	return (uint32_t)(g < PERSIST_MAX_BLOCKS ? g : PERSIST_MAX_BLOCKS);
}

uint32_t
cg_cuda_launches(const KProgram *p) {
	return cuda_launch_plan(p, NULL);
}

// The start of a contract for a launch of kernels [a->begin, a->end): out
// zeroed and named fadc_<task>_k<begin>_<what>, room for every buffer as an
// argument; returns the buffer-use flags (nbuf + 1 bytes, zeroed) for the
// caller to fill and free, or NULL with nothing held when out of memory.
static uint8_t *
group_contract_new(const KProgram *p, const La *a, const char *what, CgCudaKernel *out) {
	memset(out, 0, sizeof *out);
	uint8_t *use = calloc(p->nbuf + 1, 1);
	out->buf = calloc(p->nbuf + 1, sizeof *out->buf);
	char *name = NULL;
	size_t nlen = 0;
	FILE *f = open_memstream(&name, &nlen);
	if (!use || !out->buf || !f) {
		if (f)
			fclose(f);
		free(name);
		free(use);
		free(out->buf);
		out->buf = NULL;
		return NULL;
	}
	cuda_kernel_name(f, p->name ? p->name : "", a->begin, what);
	fclose(f);
	out->name = name;
	return use;
}

// The contract of a group of kernels [begin, end) run by one __global__
// (LA_FUSED, LA_LOOP): every buffer any of them touches, in buffer order
// (a fused task's temporaries in shared memory are not arguments).
int
cuda_group_contract(const KProgram *p, const La *a, CgCudaKernel *out) {
	// A fused kernel's name carries its phases (cuda_fused_barriers), which
	// `fadc inspect` reads back from the descriptor: fadc_<task>_k0_fused_<N>phases.
	char what[64] = "loop";
	if (a->kind == LA_FUSED)
		snprintf(what, sizeof what, "fused_%uphases", cg_cuda_phases(p));
	uint8_t *use = group_contract_new(p, a, what, out);
	if (!use)
		return 0;
	out->grid = a->kind == LA_FUSED ? 1 : persist_grid(p, a->begin, a->end);
	out->points = (int64_t)out->grid * FUSED_THREADS;
	for (uint32_t ki = a->begin; ki < a->end; ki++) {
		CgCudaKernel k;
		if (!cuda_kernel_contract(p, ki, &k)) {
			free(use);
			free(out->buf);
			free(out->name);
			return 0;
		}
		for (uint32_t j = 0; j < k.narg; j++)
			use[k.buf[j]] = 1;
		out->runseed |= k.runseed;
		free(k.name);
		free(k.buf);
	}
	int smem = a->kind == LA_FUSED && cuda_fused_smem(p);
	for (uint32_t b = 0; b < p->nbuf; b++)
		if (use[b] && !(smem && p->buf[b].kind == KB_TMP))
			out->buf[out->narg++] = b;
	free(use);
	return 1;
}

// A cuBLAS GEMM: C = A B in the plan's row-major terms (the runtime maps
// them onto cuBLAS's column-major call), its buffers {C, A, B}; points
// are C's elements, the name the cuBLAS routine (for inspect and errors).
static int
gemm_contract(const KProgram *p, uint32_t ki, CgCudaKernel *out) {
	memset(out, 0, sizeof *out);
	FADC_ASSERT(cuda_gemm_launch(p, ki, &out->g) != GEMM_NONE,
	            "cuda: a GEMM launch without a GEMM plan");
	out->gemm = 1;
	out->name = strdup(out->g.dt == DT_F64 ? "cublasDgemmStridedBatched"
	                                       : "cublasSgemmStridedBatched");
	out->buf = calloc(4, sizeof *out->buf);
	if (!out->name || !out->buf) {
		free(out->name);
		free(out->buf);
		out->buf = NULL;
		return 0;
	}
	out->points = out->g.batch * out->g.M * out->g.N;
	out->buf[out->narg++] = out->g.cbuf;
	out->buf[out->narg++] = out->g.abuf;
	out->buf[out->narg++] = out->g.bbuf;
	return 1;
}


// A zeroed contract named `name` with room for nbuf arguments; 0 (nothing
// held) when out of memory.
static int
contract_new(CgCudaKernel *out, const char *name, size_t nbuf) {
	memset(out, 0, sizeof *out);
	out->name = strdup(name);
	out->buf = calloc(nbuf, sizeof *out->buf);
	if (out->name && out->buf)
		return 1;
	free(out->name);
	free(out->buf);
	out->name = NULL;
	out->buf = NULL;
	return 0;
}
// An LA_MULTI launch's contract: fadc_<task>_k<begin>_channel_partial_sums
// (the splits' first kernels) or _sums (their second kernels), the
// kernels' points, their outputs in kernel order, then every buffer they
// load in buffer order (print_multi prints the same); a block reduction's
// grid is its work units, as for one such kernel.
int
cuda_multi_contract(const KProgram *p, const La *a, CgCudaKernel *out) {
	const KKernel *k0 = &p->k[a->begin];
	int cps = k0->what && !strcmp(k0->what, "channel_partial_sum");
	uint8_t *use = group_contract_new(p, a, cps ? "channel_partial_sums" : "sums", out);
	if (!use)
		return 0;
	out->points = kir_kernel_points(k0);
	BRed br;
	if (cuda_multi_plan(p, a, &br))
		out->grid = (uint32_t)(br.units < 65535 ? br.units : 65535);
	for (uint32_t ki = a->begin; ki < a->end; ki++) {
		Uses u = {0};
		cuda_kernel_uses(p, &p->k[ki], &u);
		for (uint32_t b = 0; b < p->nbuf; b++)
			use[b] |= u.buf[b];
		out->runseed |= u.seed;
		free(u.seen);
		free(u.buf);
		free(u.step);
		out->buf[out->narg++] = p->k[ki].out;
	}
	for (uint32_t ki = a->begin; ki < a->end; ki++)
		use[p->k[ki].out] = 0;
	for (uint32_t b = 0; b < p->nbuf; b++)
		if (use[b])
			out->buf[out->narg++] = b;
	free(use);
	return 1;
}

// The contract of launch a (cg_cuda_kernel).
static int
contract_of(const KProgram *p, const La *at, CgCudaKernel *out) {
	La a = *at;
	if (a.kind == LA_FUSED || a.kind == LA_LOOP)
		return cuda_group_contract(p, &a, out);
	if (a.kind == LA_MULTI)
		return cuda_multi_contract(p, &a, out);
	if (a.kind == LA_KERNEL)
		return cuda_kernel_contract(p, a.begin, out);
	if (a.kind == LA_GEMM)
		return gemm_contract(p, a.begin, out);
	if (a.kind == LA_CHOICE || a.kind == LA_CONVCHOICE) { // no work, no buffers: two
		if (!contract_new(out, "choice", 1))            // candidates follow
			return 0;
		out->choice = 2;
		out->points = 2;
		return 1;
	}
	if (a.kind == LA_SEQ) { // no work, no buffers: the next end - begin launches
		if (!contract_new(out, "sequence", 1))
			return 0;
		out->seq = (int)(a.end - a.begin);
		out->points = a.end - a.begin;
		return 1;
	}
	if (a.kind == LA_CONV) { // cuDNN: {written, a, b}, its elements the points
		const KConv *v = &p->conv[a.loop];
		static const char *const names[] = {"cudnnConvolutionForward",
		                                    "cudnnConvolutionBackwardData",
		                                    "cudnnConvolutionBackwardFilter"};
		if (!contract_new(out, names[v->op], 3))
			return 0;
		out->conv = v;
		out->points = p->buf[v->out].bytes / (int64_t)kir_dtype_size(p->buf[v->out].dtype);
		out->buf[out->narg++] = v->out;
		out->buf[out->narg++] = v->a;
		out->buf[out->narg++] = v->b;
		return 1;
	}
	// A host step: linear_sum_assignment of the (rows, cols) cost hin into
	// out; points and grid carry rows and cols (docs/ARTIFACT.md).
	const KKernel *k = &p->k[a.begin];
	const KBuf *in = &p->buf[k->hin];
	if (!contract_new(out, "linear_sum_assignment", 3))
		return 0;
	FADC_ASSERT(k->host == KH_ASSIGN && in->shape.rank == 2, "cuda: an unknown host kernel");
	out->host = k->host;
	out->points = in->shape.dim[0];
	out->grid = (uint32_t)in->shape.dim[1];
	out->buf[out->narg++] = k->out;
	out->buf[out->narg++] = k->hin;
	return 1;
}

int
cg_cuda_kernel(const KProgram *p, uint32_t li, CgCudaKernel *out) {
	La a = launch_at(p, li);
	return contract_of(p, &a, out);
}

int
cg_cuda_kernels(const KProgram *p, CgCudaKernel *out, uint32_t n) {
	La *la = calloc(LA_MAX(p), sizeof *la);
	if (!la)
		return 0;
	FADC_ASSERT(cuda_launch_plan(p, la) == n, "cuda: a launch count not the task's");
	uint32_t i = 0;
	while (i < n && contract_of(p, &la[i], &out[i]))
		i++;
	free(la);
	if (i == n)
		return 1;
	while (i-- > 0) {
		free(out[i].name);
		free(out[i].buf);
	}
	return 0;
}

// Grid barriers of a persistent loop kernel (group a): after[ki] = 1 when
// one follows kernel ki.  Each trip's last kernel of every loop is
// followed by one (the next trip reads the carries), and so is a kernel
// before a loop's first; between, kernel j runs in the phase of the
// kernels since the last barrier unless it touches what one of them does:
// it reads or writes bytes one of them writes, or writes bytes one of them
// reads.  Which block runs which point differs between kernels (their
// forms and sizes differ), so no read counts as private, as it may in a
// fused task (cuda_fused_barriers): this is buffers, byte ranges in the arena
// for temporaries.  deepspeech's reverse LSTM step: the four gate
// nonlinearities, each reading the pre-activations and writing its own
// buffer, share one phase.  One exception: two kernels of one thread per
// point (neither tiled nor a block's reduction) give point t to the same
// thread, (blockIdx.x * 256 + threadIdx.x) + k * 256 nb for every such
// kernel whatever its size, so bytes that both touch only at their own
// row-major point index (an elementwise chain over [N, H]: c' from c, h'
// from c', the carries copied back) pass between them in one thread's
// program order, as in a fused task's phases (cuda_fused_barriers).
// FADC_CUDA_GRID_SYNC_ALL=1 at compile time puts a barrier after every
// kernel (measurements).
static int
grid_overlap(const KProgram *p, uint32_t a, uint32_t b) {
	const KBuf *x = &p->buf[a], *y = &p->buf[b];
	if (a == b)
		return 1;
	if (x->kind != KB_TMP || y->kind != KB_TMP || !x->bytes || !y->bytes)
		return 0;
	return x->offset < y->offset + y->bytes && y->offset < x->offset + x->bytes;
}

// Element e of a is element e of b (one buffer, or the same placement).
static int
grid_same_place(const KProgram *p, uint32_t a, uint32_t b) {
	const KBuf *x = &p->buf[a], *y = &p->buf[b];
	return a == b || (x->kind == KB_TMP && y->kind == KB_TMP && x->offset == y->offset &&
	                  kir_dtype_size(x->dtype) == kir_dtype_size(y->dtype));
}

// Is kernel k of a loop one thread per point (see cuda_grid_barriers)?
static int
grid_thread_form(const KProgram *p, const KKernel *k) {
	Tile t;
	return !cuda_blockred(p, k) && !cuda_loop_tile(p, k, &t);
}

// Does kernel k of a loop store point t from the thread of point t?  The
// thread form does, and so does a split tile's last pass (print_tile).
static int
grid_stores_own(const KProgram *p, const KKernel *k) {
	Tile t;
	return grid_thread_form(p, k) || (cuda_loop_tile(p, k, &t) && t.kc > 1);
}

static int
grid_conflict(const KProgram *p, uint32_t i, uint32_t j, const uint8_t *rdi, const uint8_t *rdj) {
	const KKernel *ki = &p->k[i], *kj = &p->k[j];
	int wi = grid_stores_own(p, ki) && kx_flat_point(p, ki, ki->index);
	int wj = grid_stores_own(p, kj) && kx_flat_point(p, kj, kj->index);
	// Split tiles share one scratch array (fadc_tile_part): j's chunk sums
	// must not overwrite i's before every block has read them.
	Tile ti, tj;
	if (cuda_loop_tile(p, ki, &ti) && ti.kc > 1 && cuda_loop_tile(p, kj, &tj) && tj.kc > 1)
		return 1;
	if (grid_overlap(p, ki->out, kj->out) &&
	    !(wi && wj && grid_same_place(p, ki->out, kj->out)))
		return 1;
	for (uint32_t b = 0; b < p->nbuf; b++) {
		// RAW: j reads what i wrote; WAR: j writes what i read.
		if (rdj[b] && grid_overlap(p, ki->out, b) &&
		    !(rdj[b] == RD_OWN && wi && grid_same_place(p, ki->out, b)))
			return 1;
		if (rdi[b] && grid_overlap(p, kj->out, b) &&
		    !(rdi[b] == RD_OWN && wj && grid_same_place(p, kj->out, b)))
			return 1;
	}
	return 0;
}

void
cuda_grid_barriers(const KProgram *p, const La *a, uint8_t *after) {
	const char *all = getenv("FADC_CUDA_GRID_SYNC_ALL");
	int every = all && *all && strcmp(all, "0");
	uint32_t n = a->end - a->begin;
	uint8_t *seen = calloc(p->nx + 1, 1);
	uint8_t *rd = calloc((size_t)(n + 1) * (p->nbuf + 1), 1);
	FADC_ASSERT(seen && rd, "cuda: out of memory");
	for (uint32_t i = 0; i < n; i++) {
		const KKernel *k = &p->k[a->begin + i];
		uint8_t *r = rd + (size_t)i * (p->nbuf + 1);
		// RD_OWN: read only at the kernel's own point index, by the
		// thread of that point (thread form; a reduction's terms are not).
		int own = grid_thread_form(p, k);
		memset(seen, 0, p->nx + 1);
		reads_of(p, k, k->body, own, seen, r);
		reads_of(p, k, k->post, own, seen, r);
		reads_of(p, k, k->index, own, seen, r);
	}
	uint32_t begin = a->begin;
	for (uint32_t ki = a->begin; ki < a->end; ki++) {
		uint32_t j = ki + 1;
		int need = every || j == a->end;
		for (uint32_t l = 0; l < p->nloop && !need; l++)
			if (p->loop[l].end > p->loop[l].begin &&
			    (p->loop[l].end == j || p->loop[l].begin == j))
				need = 1;
		for (uint32_t i = begin; i < j && !need; i++)
			need = grid_conflict(p, i, j, rd + (size_t)(i - a->begin) * (p->nbuf + 1),
			                     rd + (size_t)(j - a->begin) * (p->nbuf + 1));
		after[ki] = (uint8_t)need;
		if (need)
			begin = j;
	}
	free(seen);
	free(rd);
}

// Whether a fused task's inputs are staged into shared memory: all of
// them fit there beside the temporaries (tmp bytes), each 16-byte
// aligned, within FUSED_SMEM_LIMIT, and FADC_CUDA_NO_STAGE is not set
// (measurements).  *bytes: their shared-memory size.
int
cuda_stage_inputs(const KProgram *p, const CgCudaKernel *all, int64_t tmp, int64_t *bytes) {
	const char *off = getenv("FADC_CUDA_NO_STAGE");
	if (off && *off && strcmp(off, "0"))
		return 0;
	int64_t n = 0;
	for (uint32_t j = 0; j < all->narg; j++) {
		const KBuf *x = &p->buf[all->buf[j]];
		if (x->kind == KB_IN)
			n += (x->bytes + 15) / 16 * 16;
	}
	*bytes = n;
	return n > 0 && tmp + n <= FUSED_SMEM_LIMIT;
}

int
cuda_kernel_contract(const KProgram *p, uint32_t ki, CgCudaKernel *out) {
	const KKernel *k = &p->k[ki];
	Uses u = {0};
	cuda_kernel_uses(p, k, &u);
	memset(out, 0, sizeof *out);
	char *name = NULL;
	size_t nlen = 0;
	FILE *f = open_memstream(&name, &nlen);
	out->buf = calloc(p->nbuf + 1, sizeof *out->buf);
	if (!f || !out->buf) {
		if (f)
			fclose(f);
		free(name);
		free(out->buf);
		free(u.seen);
		free(u.buf);
		free(u.step);
		out->buf = NULL;
		return 0;
	}
	cuda_kernel_name(f, p->name ? p->name : "", ki, k->what);
	fclose(f);
	out->name = name;
	out->points = kir_kernel_points(k);
	out->buf[out->narg++] = k->out;
	for (uint32_t b = 0; b < p->nbuf; b++)
		if (u.buf[b] && b != k->out)
			out->buf[out->narg++] = b;
	out->runseed = u.seed;
	BRed br;
	if (cuda_blockred_plan(p, k, 0, &br))
		out->grid = (uint32_t)(br.units < 65535 ? br.units : 65535);
	else if (cuda_vec4(p, ki, NULL) || cuda_vec4_red(p, ki)) // 4 points a thread
		out->grid = (uint32_t)((out->points / 4 + FUSED_THREADS - 1) / FUSED_THREADS);
	free(u.seen);
	free(u.buf);
	free(u.step);
	return 1;
}
