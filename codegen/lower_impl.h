// codegen/lower_impl.h -- what the lowering's two files share: lower.c
// (cg_lower: graphs, maps, reductions, matmul, scans, host ops) and
// lower_window.c (convolutions, pools, upsampling, argmax and their
// adjoints, im2col / col2im).  Private to them.
//
// lower.c owns the state (Lower) and the expression of a node at an index
// (lower_at: a load, or the node's formula inlined); a window kernel opens
// with lower_kernel_begin, reads its operands through lower_at and fills
// the kernel's loops and body itself.  lower.c's table of rules calls
// lower_conv, lower_pool or lower_argmax for every window node (each one
// a kernel of its own).
#ifndef FADC_LOWER_IMPL_H
#define FADC_LOWER_IMPL_H

#include "codegen.h"

#define NOBUF UINT32_MAX

typedef struct Lower {
	const Graph *g;
	KProgram *p;
	const char *task;
	uint32_t *buf; // buf[n]: the buffer holding node n, or NOBUF (inlined)
	KxId *off; // off[n]: where n's element 0 is in buf[n] (an I64 expression; 0: at 0)
	uint32_t **tup; // tup[n]: a scan's value, one buffer per element of its tuple
	int loop; // the loop (scan) these kernels run in, -1 for none
	Arena *tmp; // the working tables of this graph's lowering (lower_graph)
	struct Memo *memo; // (node, index) -> expression, valid for generation `gen`
	uint32_t cmemo, nmemo, gen;
	int nexpand; // nodes expanded into the current kernel
} Lower;

static inline DType
ndtype(const Lower *L, NodeId n)
{
	return (DType)L->g->node[n].dtype;
}

static inline DType
ctype(const Lower *L, NodeId n)
{
	return kir_compute_dtype(L->p, ndtype(L, n));
}

static inline int
aidx(const Lower *L, NodeId n, const char *name)
{
	int k = ir_attr_index(L->g->node[n].op, name);
	FADC_ASSERT(k >= 0, name);
	return k;
}

// ---------------------------------------------------------------- lower.c

// The value of node n at flat (row-major) index e: a load when n has a
// buffer, else n's own formula (memoized per kernel).
KxId lower_at(Lower *L, NodeId n, KxId e);
// A new kernel writing buffer out for node n (what: its name in the
// kernel-IR dump and in its function's name).
KKernel *lower_kernel_begin(Lower *L, uint32_t out, NodeId n, const char *what);
// A parallel loop per axis of s longer than 1; returns the flat index.
KxId lower_domain(Lower *L, KKernel *k, const Shape *s);

// ---------------------------------------------------------------- lower_window.c

// The kernels of window op n, writing buffer out: the rules of lower.c's
// table for the F_WINDOW rows, one function per family.
void lower_conv(Lower *L, uint32_t out, NodeId n); // conv and its adjoints
#define lower_conv_input_grad lower_conv
#define lower_conv_weight_grad lower_conv
void lower_pool(Lower *L, uint32_t out, NodeId n); // pools, upsampling and their adjoints
#define lower_max_pool lower_pool
#define lower_max_pool_grad lower_pool
#define lower_max_pool_gather lower_pool
#define lower_avg_pool lower_pool
#define lower_avg_pool_grad lower_pool
#define lower_adaptive_avg_pool lower_pool
#define lower_adaptive_avg_pool_grad lower_pool
#define lower_upsample_bilinear lower_pool
#define lower_upsample_bilinear_grad lower_pool
void lower_argmax(Lower *L, uint32_t out, NodeId n);

#endif
