// codegen/fuse.c -- fusion: which graph nodes become kernels of their own.
//
// A node's value is either materialized (a kernel writes it to a buffer) or
// inlined (its scalar expression is rebuilt inside each kernel that reads
// it, at the index that kernel reads).  Inlining is what fuses an
// elementwise chain, its layout ops and a trailing reduction or matmul into
// one loop nest.  Materialized ("root") nodes are:
//   - the outputs, the reductions and the contractions (CK_REDUCE,
//     CK_MATMUL): their loops have a shape of their own;
//   - a node with arithmetic that would be computed more than once per
//     element: read by several kernels, or read through a broadcast or a
//     contraction (a matmul reads each element of A once per column of B).
// Free nodes (layout ops and constants, cost 0) are never materialized for
// that reason: an index map recomputed is only an address.
//
// Paths of inlined nodes are cut after MAX_DEPTH nodes, and a kernel takes
// at most MAX_NODES inlined nodes (a root at the node that would exceed
// either): the size of one fused kernel is bounded, whatever the program.
//
// The walk goes down from the last node, so every user is decided before
// its operands (ids are a topological order).  For a node n it knows the
// group (root kernel) of each user, and how many times per element of the
// group's domain each user reads n: `mult`.  Reads at the group's own store
// index through identity maps (elementwise, cast, reshape) count once
// together, because hash-consing in the kernel IR shares them.
#include <string.h>

#include "codegen.h"

// Inlining stops after this many nodes on one path into a kernel: it
// bounds the expressions' depth (every walk over them recurses) and the
// size of one loop body.
#define MAX_DEPTH 200

// A kernel inlines at most this many nodes.  The depth bound alone lets a
// wide tree of elementwise ops (a sum of thousands of terms, each shallow)
// become one loop body, and the work of LLVM's passes on one function
// grows faster than its size (register allocation, the SLP vectorizer).
// Cutting there costs one buffer write and read per element per cut, which
// is nothing against MAX_NODES ops of arithmetic.  The cut is greedy: once
// a kernel is full, each of its remaining operands is a root (a wide tree
// gives many small kernels below a full one, docs/CODEGEN.md).  No kernel
// of the zoo comes near it (the largest inlines 47 nodes, deepspeech at
// its reduced sizes, every task), so their kernels are unchanged by it.
#define MAX_NODES 256

// A value of light elementwise arithmetic (at most RECOMPUTE_OPS adds,
// multiplies, compares or selects) over at most one full-size value is
// recomputed by each kernel that reads it rather than stored (below,
// fill_cheap).
#define RECOMPUTE_OPS 8

#define GROUP_NONE UINT32_MAX
#define GROUP_MULTI (UINT32_MAX - 1)

// Each op's kind and cost, from the kind and cost columns of its row of
// ir/ops.def (elementwise rows are CK_MAP).  The assertions make the
// columns' rules build errors that name the op: a MAP row weighs its
// recomputation by a kernel-IR op, the others have no cost of their own,
// and a window op is a kernel of its own.
typedef struct OpRow {
	CgKind kind;
	KxOp cost;
} OpRow;

// clang-format off
#define ELEM_ROW(n, cost) \
	_Static_assert(KX_##cost != KX_NONE, "ops.def: elementwise op '" #n "' needs a cost (a kernel-IR op)");
#define UNARY(n, fl, cost, ...)  ELEM_ROW(n, cost)
#define UNARYA(n, fl, cost, ...) ELEM_ROW(n, cost)
#define BINARY(n, fl, cost, ...) ELEM_ROW(n, cost)
#define CMP(n, fl, cost, ...)    ELEM_ROW(n, cost)
#define OTHER(n, ar, sh, fl, kind, cost, at) \
	_Static_assert((CK_##kind == CK_MAP) == (KX_##cost != KX_NONE), \
	               "ops.def: op '" #n "': a MAP row needs a cost (a kernel-IR op), other kinds NONE"); \
	_Static_assert(!((fl) & F_WINDOW) || CK_##kind == CK_REDUCE, \
	               "ops.def: window op '" #n "' must be kind REDUCE (a kernel of its own)");
#include "ops.def" // all row macros: the columns' rules, checked
#undef ELEM_ROW

static const OpRow op_row[OP_COUNT] = {
#define UNARY(n, fl, cost, ...)  [OP_##n] = {CK_MAP, KX_##cost},
#define UNARYA(n, fl, cost, ...) [OP_##n] = {CK_MAP, KX_##cost},
#define BINARY(n, fl, cost, ...) [OP_##n] = {CK_MAP, KX_##cost},
#define CMP(n, fl, cost, ...)    [OP_##n] = {CK_MAP, KX_##cost},
#define OTHER(n, ar, sh, fl, kind, cost, at) [OP_##n] = {CK_##kind, KX_##cost},
#include "ops.def" // all row macros: the kind and cost columns
};
// clang-format on

CgKind
cg_op_kind(int op)
{
	return op_row[op].kind;
}

// What recomputing one element of op's value costs, in kx_op_cost's units
// (codegen/kir.c: quarter steps), or 0 for a free op (layout, constant,
// input), which fill_fusion inlines wherever it is read.  It is a graph
// op's cost, not a kernel-IR expression's (kx_cost): fusion decides before
// the kernel IR exists, and a graph op may lower to several kernel-IR ops
// (sigmoid to an exponential, an add and a division), so an elementwise op
// is weighed by the kernel-IR op that dominates its lowering (its row's
// cost column).  Only elementwise and free ops are asked (the other kinds
// are always kernels of their own), and fill_fusion reads only whether the
// cost is 0.
int
cg_op_cost(int op)
{
	switch (cg_op_kind(op)) {
	case CK_FREE:
	case CK_INPUT:
	case CK_GET:
		return 0;
	case CK_MAP:
		return kx_op_cost(op_row[op].cost);
	default:
		return kx_op_cost(KX_ADD);
	}
}

// Does user u read operand slot s at u's own flat index?
static int
identity_edge(const Graph *g, NodeId u, int s)
{
	int op = g->node[u].op;
	(void)s;
	if (ir_op(op)->flags & F_ELEMWISE)
		return 1;
	switch (op) {
	case OP_cast:
	case OP_not:
	case OP_where:
	case OP_reshape:
	case OP_to_host:
	case OP_to_device:
		return 1;
	case OP_slice_update:
		return s == 0;
	default:
		return 0;
	}
}

// How many times u reads each element of its operand slot s, at most.
static int64_t
expansion(const Graph *g, NodeId u, int s)
{
	const Shape *us = ir_shape(g, u), *xs = ir_shape(g, ir_in1(g, u, s));
	int64_t un = ir_numel(us), xn = ir_numel(xs);
	// Window ops' windows overlap and their kernels read their operands in
	// several passes: arithmetic feeding them is computed once, in a buffer.
	if (ir_op(g->node[u].op)->flags & F_WINDOW)
		return 2;
	switch (g->node[u].op) {
	case OP_broadcast:
	case OP_take:
	case OP_take_along:
	case OP_one_hot:
		return xn > 0 && un > xn ? (un + xn - 1) / xn : 1;
	case OP_take_add:
	case OP_take_along_add: {
		// v and idx are read once per index along the axis; x once.
		int ax = (int)ir_attr_int(g, u, "axis");
		return s == 0 ? 1 : ir_shape(g, ir_in1(g, u, 0))->dim[ax];
	}
	case OP_matmul: {
		// A is read once per column of B, B once per row of A.
		int r = us->rank;
		return s == 0 ? us->dim[r - 1] : us->dim[r - 2];
	}
	default:
		return 1;
	}
}

// Which nodes are cheap to recompute (cheap[n] = 1): light elementwise
// ops and free ops, at most RECOMPUTE_OPS light ops in all down to the
// values read from buffers, of which at most one is full size (an operand
// of at most a quarter of n's elements, a batch norm's per-channel mean,
// is read from the cache, not from memory).  Such a value read by k
// kernels costs k reads of that one operand when recomputed, against one
// read, one write and k reads when stored: a vjp's forward values (batch
// norm's x - mu, its normalized x, its affine output, read by the forward
// and again by the backward) then cost no pass over memory of their own.
// The recomputed values are the same bits (the same ops in the same
// order).  Operands that are not cheap count as buffers: a multi-use
// value that is not cheap is a root (fill_fusion).  Bottom-up: ids are a
// topological order.
static void
fill_cheap(const Graph *g, uint8_t *cheap, uint8_t *rops, uint8_t *rbig)
{
	int light = kx_op_cost(KX_ADD);
	for (NodeId n = 1; n < g->nnode; n++) {
		int op = g->node[n].op;
		CgKind k = cg_op_kind(op);
		if (!(k == CK_FREE || (k == CK_MAP && cg_op_cost(op) <= light)))
			continue;
		int ops = k == CK_MAP, big = 0;
		int64_t nel = ir_numel(ir_shape(g, n));
		for (int s = 0; s < g->node[n].nin; s++) {
			NodeId o = ir_in1(g, n, s);
			int small = ir_numel(ir_shape(g, o)) * 4 <= nel;
			if (cheap[o]) {
				ops += rops[o];
				big += small ? 0 : rbig[o];
			} else
				big += !small;
		}
		if (ops <= RECOMPUTE_OPS && big <= 1) {
			cheap[n] = 1;
			rops[n] = (uint8_t)ops;
			rbig[n] = (uint8_t)big;
		}
	}
}

NodeId
fill_fusion(const Graph *g, Arena *a, uint8_t **rootp)
{
	uint32_t nn = g->nnode;
	uint8_t *root = arena_alloc_array(a, nn + 1, 1);
	uint8_t *isout = arena_alloc_array(a, nn + 1, 1);
	uint8_t *same = arena_alloc_array(a, nn + 1, 1);
	uint32_t *group = arena_alloc_array(a, nn + 1, sizeof *group);
	int64_t *mult = arena_alloc_array(a, nn + 1, sizeof *mult);
	uint32_t *depth = arena_alloc_array(a, nn + 1, sizeof *depth);
	uint32_t *nuse = arena_alloc_array(a, nn + 1, sizeof *nuse);
	uint32_t *gsize = arena_alloc_array(a, nn + 1, sizeof *gsize); // nodes inlined into root n
	*rootp = root;
	for (uint32_t o = 0; o < g->nout; o++)
		isout[g->out[o].node] = 1;
	// Users of every node, as (user, slot) lists in one array.
	for (NodeId u = 1; u < nn; u++)
		for (int s = 0; s < g->node[u].nin; s++)
			nuse[ir_in1(g, u, s)]++;
	// start[n] .. start[n] + nuse[n]: the users of n in uuser/uslot.
	uint32_t *start = arena_alloc_array(a, nn + 1, sizeof *start);
	uint32_t *fillp = arena_alloc_array(a, nn + 1, sizeof *fillp);
	for (NodeId n = 1; n < nn; n++)
		start[n + 1] = start[n] + nuse[n];
	uint32_t nedges = start[nn];
	NodeId *uuser = arena_alloc_array(a, nedges + 1, sizeof *uuser);
	uint8_t *uslot = arena_alloc_array(a, nedges + 1, 1);
	for (NodeId n = 1; n < nn; n++)
		fillp[n] = start[n];
	for (NodeId u = 1; u < nn; u++)
		for (int s = 0; s < g->node[u].nin; s++) {
			NodeId x = ir_in1(g, u, s);
			uuser[fillp[x]] = u;
			uslot[fillp[x]++] = (uint8_t)s;
		}
	// The first op (in source order) that the kernel IR cannot express.
	for (NodeId n = 1; n < nn; n++)
		if ((nuse[n] || isout[n]) && cg_op_kind(g->node[n].op) == CK_NONE)
			return n;
	// A scan's body reads its sequences and invariants from buffers (at the
	// step's offset): those operands are materialized.  Its carries are
	// only read once, by the copies that start the loop, and may be inlined.
	uint8_t *cheap = arena_alloc_array(a, nn + 1, 1), *rops = arena_alloc_array(a, nn + 1, 1),
	        *rbig = arena_alloc_array(a, nn + 1, 1);
	fill_cheap(g, cheap, rops, rbig);
	uint8_t *needbuf = arena_alloc_array(a, nn + 1, 1);
	for (NodeId u = 1; u < nn; u++)
		if (g->node[u].op == OP_scan)
			for (int s = (int)ir_attr_int(g, u, "ncarry"); s < g->node[u].nin; s++)
				needbuf[ir_in1(g, u, s)] = 1;
	for (NodeId n = nn - 1; n >= 1; n--) {
		int op = g->node[n].op;
		CgKind k = cg_op_kind(op);
		group[n] = GROUP_NONE;
		if (!nuse[n] && !isout[n])
			continue; // dead: never computed
		if (k == CK_INPUT || k == CK_GET)
			continue; // a buffer of its own, written by no kernel of its own
		if (isout[n] || needbuf[n] || k == CK_REDUCE || k == CK_MATMUL || k == CK_SCATTER ||
		    k == CK_SCAN || k == CK_HOST) {
			root[n] = 1;
			group[n] = n;
			mult[n] = 1;
			same[n] = 1;
			continue;
		}
		uint32_t grp = GROUP_NONE, dep = 0;
		int multi = 0, allsame = 1, ident = 0;
		int64_t reads = 0, most = 0; // most: the most reads per element of one user
		for (uint32_t e = start[n]; e < start[n] + nuse[n]; e++) {
			NodeId u = uuser[e];
			uint32_t gu = group[u];
			if (gu == GROUP_NONE)
				continue; // a dead user
			if (gu == GROUP_MULTI)
				multi = 1;
			else if (grp == GROUP_NONE)
				grp = gu;
			else if (grp != gu)
				multi = 1;
			CgKind uk = cg_op_kind(g->node[u].op);
			int64_t mu = root[u] ? 1 : mult[u];
			if (!root[u] && depth[u] + 1 > dep)
				dep = depth[u] + 1;
			if (mu * expansion(g, u, uslot[e]) > most)
				most = mu * expansion(g, u, uslot[e]);
			if (identity_edge(g, u, uslot[e]) && same[u] && uk != CK_REDUCE && uk != CK_MATMUL &&
			    uk != CK_SCATTER && uk != CK_SCAN && uk != CK_HOST)
				ident = 1;
			else {
				allsame = 0;
				reads += mu * expansion(g, u, uslot[e]);
			}
		}
		if (grp == GROUP_NONE && !multi)
			continue; // every user is dead
		int cost = cg_op_cost(op);
		mult[n] = allsame ? 1 : reads + ident;
		// A cheap value (fill_cheap) is recomputed by each kernel that
		// reads it, as a free one is, unless a user reads an element of it
		// several times (a broadcast, a window, a matmul's operand): each
		// user reads it once per element of its own, at its own index,
		// which the kernel IR's memo shares among the reads of one kernel
		// (x - mu read twice by (x - mu)^2).
		int many = cheap[n] ? most > 1 : multi || mult[n] > 1;
		if (cheap[n] && !many)
			mult[n] = 1;
		if ((many && cost > 0) || dep > MAX_DEPTH ||
		    (!multi && gsize[grp] >= MAX_NODES)) {
			root[n] = 1;
			group[n] = n;
			mult[n] = 1;
			same[n] = 1;
		} else {
			group[n] = multi ? GROUP_MULTI : grp;
			if (!multi)
				gsize[grp]++;
			same[n] = (uint8_t)allsame;
			depth[n] = dep;
		}
	}
	return 0;
}
