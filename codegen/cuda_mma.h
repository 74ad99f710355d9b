// codegen/cuda_mma.h -- the 3xTF32 tensor-core GEMM printed beside a
// task's f32 GEMM records (codegen/cuda_mma.c; docs/CUDA.md, "Strict f32
// GEMMs on tensor cores: 3xTF32").
#ifndef FADC_CUDA_MMA_H
#define FADC_CUDA_MMA_H

#include <stdint.h>
#include <stdio.h>

#include "kir.h"

// The kernels' names: fadc_mma3_<a><b>_<tile>, a and b 'n' (row-major) or
// 't' (transposed) as the GEMM record's ta and tb, tile 128 (128 x 128
// blocks of 256 threads) or 64 (64 x 64 blocks of 128 threads).  The
// runtime (runtime/cublas.c) looks them up by these names.
#define CG_CUDA_MMA_TILES 2

// Prints the kernels that the f32 GEMM records among kernels i with
// gemm[i] != 0 (the printer's GEMM flags, codegen/cuda.c) need: the
// shared device code once, then a pair of __global__s (both tiles) per
// (ta, tb) in use.  Opt-in: only with FADC_CUDA_MMA set (not 0) at compile
// time; nothing when no record is f32.  Returns the number of (ta, tb)
// forms printed.
int cg_cuda_mma_print(FILE *f, const KProgram *p, const uint8_t *gemm);

// The whole text for forms mask (bit 2 ta + tb), as cg_cuda_mma_print
// prints it (tests compile it through NVRTC alone).
void cg_cuda_mma_text(FILE *f, unsigned forms);

#endif
