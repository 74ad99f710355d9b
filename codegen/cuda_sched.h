// codegen/cuda_sched.h -- what the CUDA printer (cuda.c) asks of the CUDA
// scheduler (cuda_sched.c); included by those two files only.
//
// The CUDA backend is three files (docs/CUDA.md):
//   cuda_sched.c  how a task runs on the GPU: its launches (one fused
//                 kernel of one block, a kernel each, a persistent kernel
//                 per loop, host steps, cuBLAS GEMMs and choices), each
//                 kernel's form (a thread, a warp or the block per point,
//                 tiles), barriers, warp rotations, the shared-memory
//                 layout of a fused task, and the launch contracts
//                 (cg_cuda_launches, cg_cuda_kernel, cg_cuda_phases);
//   cuda.c        the printer: kernel IR to CUDA C as the scheduler
//                 decided (cg_cuda_print);
//   cuda_nvrtc.c  CUDA C to a cubin or PTX (cg_cuda_compile): the only
//                 file that needs the CUDA toolkit.
// The scheduler decides from the kernel IR and its memory plan alone, and
// both the printed source and the contracts ask it, so the two cannot
// disagree.  Neither the scheduler nor the printer needs the toolkit: they
// build, and their tests run, on every machine.
#ifndef FADC_CUDA_SCHED_H
#define FADC_CUDA_SCHED_H

#include "codegen.h"

// The threads of a fused task's one block, and of every block the printer
// launches (a multiple of the warp size, 32).
#define FUSED_THREADS 256

// What a kernel's expressions touch (cuda_kernel_uses): seen[x] for every
// expression, buf[b] for each buffer it loads, var[v] for each loop
// variable it reads, step[l] for each loop's step counter, and whether it
// uses the run seed or a polygamma.  The caller frees seen, buf and step.
typedef struct Uses {
	uint8_t *seen, *buf, *step, var[2 * IR_MAXDIM];
	int seed, polygamma;
} Uses;

// A tiled contraction's geometry (cuda_loop_tile).
typedef struct Tile {
	int64_t rows, cols; // the points as rows x cols (cols: the last parallel extent)
	int64_t r; // rows per tile (accumulators per thread)
	int64_t ctiles, ntiles; // tiles along cols, tiles in all
	int64_t kc, kterms; // chunks of the terms (1: no split), terms per chunk
	int64_t units; // ntiles * kc: the blocks it can use
	// Resident weights (cuda_sched.c, TILE_RES_*): nres loads of the terms
	// kept in the persistent kernel's dynamic shared memory across steps,
	// unit u's at byte res_off of it, res_bytes long ([load][term][lane]);
	// nres 0: none (every load from global memory each step).
	int nres;
	int64_t res_off, res_bytes;
	// Staged rows (resident tiles only): nstage loads of the rows (indices
	// of the rows, the terms and step counters, not the column) copied
	// into shared memory at each call, after the slot ([load][row][term],
	// stage_bytes), so that the term loop reads no global memory.
	int nstage;
	int64_t stage_bytes;
} Tile;

// The most loads of one tiled kernel kept resident.
#define TILE_RES_MAX 4

// How a kernel of the fused task maps its points to the block's threads.
typedef enum FMode {
	FM_THREAD, // point t on thread t % 256 (a reduction: sequential in it)
	FM_WARP,   // point t on warp t % 8, lane 0 storing (a warp's shuffle)
	FM_BLOCK,  // every point on the whole block, thread 0 storing
} FMode;

// A task's launches, in the order they run on the stream:
//   LA_FUSED   the whole task, one block (small tasks; loops included);
//   LA_KERNEL  kernel ki, outside every loop, its own __global__;
//   LA_LOOP    an outermost loop (a scan) of a task too large to fuse: one
//              persistent kernel running the loop's trips over its body's
//              kernels, a grid-wide barrier after each (see grid_src);
//   LA_HOST    host kernel ki: no CUDA code, the runtime's host step
//              (linear_sum_assignment: copy down, solve, copy up);
//   LA_GEMM    contraction kernel ki, outside every loop, as one cuBLAS
//              strided batched GEMM (kir_gemm_plan; no CUDA code printed);
//   LA_CHOICE  the two launches after it (LA_KERNEL ki, then LA_GEMM ki)
//              are candidates for contraction kernel ki: the runtime times
//              both on the GPU and runs the faster (a GEMM in the band
//              where only a measurement can tell, cuda_gemm_launch);
//   LA_CONVCHOICE  kernels [begin, end) are one convolution (KKernel.conv,
//              cuda_conv_launch): two candidates follow, an LA_SEQ of its
//              launches as they would run alone, then an LA_CONV;
//   LA_SEQ     the launches of kernels [begin, end) that follow it (each
//              LA_KERNEL or LA_GEMM) are one candidate;
//   LA_CONV    convolution `loop` (p->conv) as one cuDNN call;
//   LA_MULTI   kernels [begin, end): sibling sums (alike domains,
//              independent; cuda_multi_end) as one __global__ that folds
//              every kernel's term per point in one pass -- the channel
//              splits' partial sums, or their second kernels (a thread
//              per point or one column block reduction) -- and after the
//              latter the elementwise epilogues that read them at their
//              own points (cuda_multi_sums: the sums, then those).
typedef enum LaKind {
	LA_FUSED,
	LA_KERNEL,
	LA_LOOP,
	LA_HOST,
	LA_GEMM,
	LA_CHOICE,
	LA_CONVCHOICE,
	LA_SEQ,
	LA_CONV,
	LA_MULTI,
} LaKind;
typedef struct La {
	LaKind kind;
	uint32_t begin, end; // its kernels
	int loop; // LA_LOOP: the loop; LA_CONV: the convolution
} La;

// Room for cuda_launch_plan's launches: at most three per kernel (a
// choice), or a convolution's m kernels and three records (m + 3 <= 4 m).
#define LA_MAX(p) (4 * (size_t)(p)->nk + 1)

// cuda_gemm_launch's answers.
enum { GEMM_NONE, GEMM_ONLY, GEMM_CHOICE };

// ---------------------------------------------------------------- cuda_sched.c
// The end of the group of sibling sums (and their epilogues) that starts
// at kernel i (LA_MULTI), or i + 1 when kernel i starts none.
uint32_t cuda_multi_end(const KProgram *p, uint32_t i);
// How many of LA_MULTI launch a's kernels are sums (the rest: epilogues).
uint32_t cuda_multi_sums(const KProgram *p, const La *a);
// Its launch's contract (outputs in kernel order, then the loads).
int cuda_multi_contract(const KProgram *p, const La *a, CgCudaKernel *out);
// Kernels.
void cuda_kernel_uses(const KProgram *p, const KKernel *k, Uses *u);
// fadc_<task>_k<ki>_<what>, non-alphanumerics made '_'.
void cuda_kernel_name(FILE *f, const char *task, uint32_t ki, const char *what);
// A long reduction into few points outside a fused task: a block per point.
int cuda_blockred(const KProgram *p, const KKernel *k);
// A block reduction's plan (cuda_blockred_plan, cuda_sched.c): rows (a
// block per point, its threads over the terms) or columns (a block per
// tile of 32 points along parallel variable lv, its warps over the terms),
// each point's terms split into g chunks of len (the last may be shorter),
// a block per chunk, the results folded by the last block to finish.
typedef struct BRed {
	int col; // 1: columns along parallel variable lv
	int lv; // the lanes' parallel variable (col), else -1
	int ilp; // this form (four accumulators); 0 inside loops and for bools: the old one
	int vec; // rows: 4 consecutive terms a thread in float4 loads (cuda_blockred_vec4)
	int unroll; // four strided terms at a time (a body of small cost: the copies' size)
	int64_t nlvb; // col: tiles along lv, ceil(dim[lv] / 32)
	int64_t tiles; // rows: the points; col: the tiles
	int64_t g, len; // chunks per point or tile (1: no split), terms per chunk
	int64_t units; // tiles * g: the blocks it can use
} BRed;
int cuda_blockred_plan(const KProgram *p, const KKernel *k, int inloop, BRed *b);
// An LA_MULTI launch's block reduction plan (0: a thread per point).
int cuda_multi_plan(const KProgram *p, const La *a, BRed *b);
// Whether elementwise kernel ki (outside loops and fused tasks) runs 4
// points a thread in 16-byte vectors; vload[x] (p->nx + 1 flags, or NULL)
// marks the loads read as float4.
int cuda_vec4(const KProgram *p, uint32_t ki, uint8_t *vload);
// A short reduction of a thread per point run 4 points a thread (print_vec4_red).
int cuda_vec4_red(const KProgram *p, uint32_t ki);
// A row block reduction's loads read as float4 along its innermost
// reduction variable (vload as for cuda_vec4); their number.
int cuda_blockred_vec4(const KProgram *p, const KKernel *k, uint8_t *vload);
// Whether a contraction inside a persistent loop kernel runs as tiles.
int cuda_loop_tile(const KProgram *p, const KKernel *k, Tile *t);
// Its loads that may stay resident (at most TILE_RES_MAX, in the order the
// body reaches them) into res[]; their number.  k is an element of p->k.
int cuda_tile_res_loads(const KProgram *p, const KKernel *k, KxId *res);
// Its rows' loads staged at each call (at most TILE_RES_MAX), likewise.
int cuda_tile_stage_loads(const KProgram *p, const KKernel *k, KxId *st);
// Fused tasks.
int cuda_fused(const KProgram *p);
int cuda_fused_smem(const KProgram *p);
int cuda_tmp_private(const KProgram *p);
int cuda_stage_inputs(const KProgram *p, const CgCudaKernel *all, int64_t tmp, int64_t *bytes);
FMode cuda_fused_mode(const KProgram *p, const KKernel *k);
uint32_t cuda_fused_barriers(const KProgram *p, uint8_t *bar);
void cuda_fused_rotations(const KProgram *p, const uint8_t *bar, uint8_t *rot);
// Launches and their contracts.
uint32_t cuda_launch_plan(const KProgram *p, La *la);
int cuda_gemm_launch(const KProgram *p, uint32_t ki, KGemmPlan *g);
// The convolution that kernel ki begins, when it runs as a choice between
// its launches and cuDNN: its index in p->conv, *end past its kernels; -1
// for none.
int cuda_conv_launch(const KProgram *p, uint32_t ki, uint32_t *end);
int cuda_kernel_contract(const KProgram *p, uint32_t ki, CgCudaKernel *out);
int cuda_group_contract(const KProgram *p, const La *a, CgCudaKernel *out);
// Persistent loop kernels' grid barriers.
void cuda_grid_barriers(const KProgram *p, const La *a, uint8_t *after);

#endif
