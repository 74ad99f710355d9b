// passes/scan_hoist.c -- what a scan's step does not need the carry for
// runs outside the loop, as one batched computation over all the steps.
//
// A scan's body sees three kinds of operands: carries (c_t), one step of
// each sequence (x_t) and invariants (w).  Classify every body node by
// the most variable thing it reads: INV (invariants and constants only),
// SEQ (sequences, no carry) or CARRY.  Two rewrites follow, both by
// batching part of the body over the steps with pass_vmap (B = T, the
// batch axis being the steps' axis, which is what a scan stacks anyway):
//
// Hoisting (before the loop).  A SEQ node that a CARRY node or an output
// reads, and whose carry-independent cone holds a product (matmul, conv),
// is computed for every step at once before the loop: vmap of its cone
// over the sequences' leading axis, whose result [T, ...] is a new
// sequence operand of the scan, read by the body in its place.  An RNN's
// input projection x_t W_ihᵀ, T products of n x k by k x m, becomes one
// product of (T n) x k by k x m: a matmul whose weight vmap broadcast
// over the steps is flattened back into one GEMM here (flat_matmul).  An
// INV node the loop reads (a product or a transpose of invariants) is
// computed once and becomes a new invariant operand.
//
// Sinking (after the loop).  A per-step output y_t that the carries do not
// need (the body's outputs are (c', y): the backward cone of c' is what
// the recurrence needs) is computed after the loop from the stacked values
// it reads, when its cone holds a product: the values of the loop it reads
// (the frontier: nodes the carries need, or the step's carry itself) become
// per-step outputs of the scan instead, and vmap of y_t's cone over them
// gives ys.  The input gradient of a reverse scan, x̄_t = dz_t W, is one
// GEMM over the stacked dz after the loop; only dz_t W_hh, which the next
// step's carry needs, stays inside.  (The invariants' gradients Σ_t h_tᵀ
// dz_t are already one product after the loop: passes/scan.c.)
//
// Carries that need no loop.  An accumulator, c' = c + f with c and c'
// read by nothing else (a running loss), is not a carry: f is a per-step
// output and c_T = c_0 + Σ_t f_t after the loop (the sum's order is the
// one rounding change of this pass).  A carry passed through unchanged,
// c' = c (such an accumulator's adjoint in the vjp's reverse scan), is an
// invariant: c_T = c_0.
//
// Per-step outputs that no `get` reads are dropped from the body, and
// operands the body no longer reads; the whole rewrite runs twice, DCE
// between, so a value of an earlier scan that a rewritten later one stops
// reading (the vjp's saved carries) is dropped too.
//
// The values are those of the loop (the same ops on the same operands; a
// flattened GEMM computes each dot product in the same order), but for an
// accumulator's sum.  Random ops, host and placement ops and nested
// scans stay where they are (pinned: they count as CARRY).  Batched values
// cost T times a step's size: each scan's hoisted and sunk values (the
// stacked results and every intermediate of their batched cones) stay
// under HOIST_BYTES.  Nested scans are rewritten first (innermost out), so
// a product hoisted out of an inner loop can leave the outer one too.
#include <stdlib.h>
#include <string.h>

#include "passes.h"

enum { CLS_INV, CLS_SEQ, CLS_CARRY };
#define HOIST_BYTES (512.0 * 1024 * 1024)
enum { MAXOPS = 480 }; // scan operands / body outputs after rewriting (scan.c builds <= 512)

// A rewritten scan's tuple: for each value of the old tuple, its index in
// the new one, or (idx < 0) the value computed after the loop.
typedef struct Remap {
	int32_t *idx;
	NodeId *val;
} Remap;

static int
pinned(int op)
{
	return op == OP_scan || op == OP_get || op == OP_input ||
	       (ir_op(op)->flags & (F_HOST | F_PLACE | F_RANDOM));
}

static int
heavy_op(int op)
{
	return op == OP_matmul || op == OP_conv || op == OP_conv_input_grad ||
	       op == OP_conv_weight_grad;
}

static double
bytes_of(const Graph *b, NodeId n, int64_t T)
{
	return (double)T * (double)ir_numel(ir_shape(b, n)) * 8; // f64 at most
}

// cls[n] of every node of body b (nc carries, nx sequences first).
static void
fill_cls(const Graph *b, int nc, int nx, uint8_t *cls)
{
	for (NodeId n = 1; n < b->nnode; n++) {
		const Node *nd = &b->node[n];
		if (nd->op == OP_input) {
			int64_t i = ir_attr_int(b, n, "index");
			cls[n] = i < nc ? CLS_CARRY : i < nc + nx ? CLS_SEQ : CLS_INV;
			continue;
		}
		cls[n] = pinned(nd->op) ? CLS_CARRY : CLS_INV;
		for (int i = 0; i < nd->nin; i++)
			if (cls[ir_in1(b, n, i)] > cls[n])
				cls[n] = cls[ir_in1(b, n, i)];
	}
}

// The cone of roots[0 .. nr) in b, stopping at the nodes with leaf[n]
// (every input of b must be one): need[] marked, 1 if it holds no pinned
// node (a leaf is never counted), and the number of heavy ops in *heavy.
static int
mark_cone(const Graph *b, const NodeId *roots, uint32_t nr, const uint8_t *leaf, uint8_t *need,
          uint32_t *heavy)
{
	memset(need, 0, b->nnode);
	for (uint32_t k = 0; k < nr; k++)
		need[roots[k]] = 1;
	int ok = 1;
	*heavy = 0;
	for (NodeId n = b->nnode - 1; n > 0; n--) {
		if (!need[n] || leaf[n])
			continue;
		ok &= !pinned(b->node[n].op);
		*heavy += (uint32_t)heavy_op(b->node[n].op);
		for (int i = 0; i < b->node[n].nin; i++)
			need[ir_in1(b, n, i)] = 1;
	}
	return ok;
}

// The graph computing roots[] of b from its leaves: its inputs are the
// leaves the cones read (need[], from mark_cone), in node order, listed
// in leaves[] (their count returned in *nl); its outputs are the roots.
static Graph *
cone_graph(const Graph *b, const NodeId *roots, uint32_t nr, const uint8_t *leaf,
           const uint8_t *need, NodeId *leaves, uint32_t *nl)
{
	Graph *s = ir_graph_new("hoisted", b->src);
	NodeId *map = arena_alloc_array(s->arena, b->nnode, sizeof *map);
	*nl = 0;
	for (NodeId n = 1; n < b->nnode; n++) {
		if (!need[n])
			continue;
		if (leaf[n]) {
			map[n] = ir_add_input(s, arena_printf(s->arena, "l%u", *nl), IN_ARG,
			                      (DType)b->node[n].dtype, ir_shape(b, n), b->node[n].loc);
			leaves[(*nl)++] = n;
		} else {
			map[n] = b_copy_node(s, b, n, map);
		}
	}
	for (uint32_t k = 0; k < nr; k++)
		ir_add_output(s, map[roots[k]], "r", -1);
	return s;
}

// vmap's product of a batched operand with an unbatched weight is a
// batched matmul against the weight broadcast over the batch: x[T, n, k]
// @ broadcast(w[k, m]).  That is one GEMM, (T n) x k by k x m, written
// here as such (the broadcast is left dead).  0 when n is not that form.
static NodeId
flat_matmul(Graph *dst, const Graph *v, NodeId n, const NodeId *map)
{
	NodeId a = ir_in1(v, n, 0), w1 = ir_in1(v, n, 1), w = w1;
	while (v->node[w].op == OP_broadcast)
		w = ir_in1(v, w, 0);
	const Shape *as = ir_shape(v, a), *ws = ir_shape(v, w), *w1s = ir_shape(v, w1);
	if (w == w1 || ws->rank != 2 || as->rank < 3 || ws->dim[0] != w1s->dim[w1s->rank - 2] ||
	    ws->dim[1] != w1s->dim[w1s->rank - 1])
		return 0;
	Shape flat = {.rank = 2, .dim = {1, as->dim[as->rank - 1]}};
	for (int i = 0; i < as->rank - 1; i++)
		flat.dim[0] *= as->dim[i];
	Loc loc = v->node[n].loc;
	NodeId r = b_matmul(dst, b_reshape(dst, map[a], &flat, loc), map[w], loc);
	return b_reshape(dst, r, ir_shape(v, n), loc);
}

// Copies graph v (no scans) into dst, its inputs being inval[] (in input
// order); its outputs' copies in outval[].
static void
inline_graph(Graph *dst, const Graph *v, const NodeId *inval, NodeId *outval)
{
	NodeId *map = calloc(v->nnode + 1, sizeof *map);
	FADC_ASSERT(map, "out of memory");
	for (NodeId n = 1; n < v->nnode; n++) {
		const Node *nd = &v->node[n];
		if (nd->op == OP_input)
			map[n] = inval[ir_attr_int(v, n, "index")];
		else if (!(nd->op == OP_matmul && (map[n] = flat_matmul(dst, v, n, map))))
			map[n] = b_copy_node(dst, v, n, map);
	}
	for (uint32_t k = 0; k < v->nout; k++)
		outval[k] = map[v->out[k].node];
	free(map);
}

// Roots of b computed outside the loop into dst: batched over the T steps
// (bat: vmap, the leaves with batleaf[] set being [T, ...]) or not (INV
// roots); leafval[leaf] their values in dst.  0 if vmap cannot batch them.
static int
compute_outside(Graph *dst, const Graph *b, const NodeId *roots, uint32_t nr, const uint8_t *leaf,
                const uint8_t *need, const uint8_t *batleaf, const NodeId *leafval, int64_t T,
                NodeId *out)
{
	NodeId *leaves = calloc(b->nnode + 1, sizeof *leaves), *inval = calloc(b->nnode + 1, sizeof *inval);
	uint8_t *bat = calloc(b->nnode + 1, 1);
	FADC_ASSERT(leaves && inval && bat, "out of memory");
	uint32_t nl;
	Graph *s = cone_graph(b, roots, nr, leaf, need, leaves, &nl);
	for (uint32_t k = 0; k < nl; k++) {
		bat[k] = batleaf ? batleaf[leaves[k]] : 0;
		inval[k] = leafval[leaves[k]];
	}
	// Batched roots get the steps' axis even when their cone reads no
	// batched leaf (an output of invariants only, sunk): vmap broadcasts.
	Graph *v = s;
	if (batleaf) {
		char err[256];
		Loc el;
		v = pass_vmap(s, bat, T, 0, &el, err, sizeof err);
	}
	if (v)
		inline_graph(dst, v, inval, out);
	if (v != s)
		ir_graph_free(v);
	ir_graph_free(s);
	free(leaves);
	free(inval);
	free(bat);
	return v != NULL;
}

// The scan's body b with its inputs in a new order and some nodes read as
// inputs: the result's input k is b's node innodes[k] (an input of b, or a
// node of b that the copy reads instead of computing); its outputs are
// b's outputs outorder[], then b's nodes extra[] (per-step outputs).
static Graph *
rebuild_body(const Graph *b, const NodeId *innodes, uint32_t nin, const uint32_t *outorder,
             uint32_t nout, const NodeId *extra, uint32_t nextra)
{
	Graph *g = ir_graph_new(b->name, b->src);
	for (uint32_t k = 0; k < b->nsub; k++)
		ir_add_sub(g, pass_dce(b->sub[k]));
	NodeId *map = arena_alloc_array(g->arena, b->nnode, sizeof *map);
	for (uint32_t k = 0; k < nin; k++) {
		NodeId n = innodes[k];
		const char *name = b->node[n].op == OP_input
		                       ? b->input[ir_attr_int(b, n, "index")].name
		                       : arena_printf(g->arena, "hoisted%u", k);
		map[n] = ir_add_input(g, name, IN_ARG, (DType)b->node[n].dtype, ir_shape(b, n),
		                      b->node[n].loc);
	}
	// An input left out is one that only dead nodes read: those are
	// skipped (their operands are not all there), the rest copied.
	for (NodeId n = 1; n < b->nnode; n++) {
		if (map[n] || b->node[n].op == OP_input)
			continue;
		int ok = 1;
		for (int i = 0; i < b->node[n].nin; i++)
			ok &= map[ir_in1(b, n, i)] != 0;
		if (ok)
			map[n] = b_copy_node(g, b, n, map);
	}
	for (uint32_t k = 0; k < nout; k++)
		FADC_ASSERT(map[b->out[outorder[k]].node], "rebuild_body: an output reads a dropped input");
	for (uint32_t k = 0; k < nextra; k++)
		FADC_ASSERT(map[extra[k]], "rebuild_body: a per-step value reads a dropped input");
	for (uint32_t k = 0; k < nout; k++)
		ir_add_output(g, map[b->out[outorder[k]].node], b->out[outorder[k]].name, -1);
	for (uint32_t k = 0; k < nextra; k++)
		ir_add_output(g, map[extra[k]], "stacked", -1);
	Graph *r = pass_dce(g);
	ir_graph_free(g);
	return r;
}

// Hoisting (see the top): rewrites body *pb and the operands ops[0 ..
// *pnin) of a scan of T steps with nc carries and *pnx sequences.
static void
hoist_in(Graph *dst, Graph **pb, NodeId *ops, int *pnin, int nc, int *pnx, int64_t T,
         ScanHoistStats *st)
{
	Graph *b = *pb;
	int nin = *pnin, nx = *pnx;
	uint8_t *cls = calloc(b->nnode + 1, 1), *heavy = calloc(b->nnode + 1, 1);
	uint8_t *read = calloc(b->nnode + 1, 1), *leaf = calloc(b->nnode + 1, 1);
	uint8_t *need = calloc(b->nnode + 1, 1), *batleaf = calloc(b->nnode + 1, 1);
	uint8_t *counted = calloc(b->nnode + 1, 1);
	NodeId *cand = calloc(b->nnode + 1, sizeof *cand), *leafval = calloc(b->nnode + 1, sizeof *leafval);
	FADC_ASSERT(cls && heavy && read && leaf && need && batleaf && counted && cand && leafval,
	            "out of memory");
	fill_cls(b, nc, nx, cls);
	for (NodeId n = 1; n < b->nnode; n++) {
		const Node *nd = &b->node[n];
		if (nd->op == OP_input) {
			int64_t i = ir_attr_int(b, n, "index");
			leaf[n] = 1;
			batleaf[n] = cls[n] == CLS_SEQ;
			leafval[n] = ops[i];
			continue;
		}
		heavy[n] = cls[n] != CLS_CARRY && heavy_op(nd->op);
		for (int i = 0; i < nd->nin; i++) {
			NodeId x = ir_in1(b, n, i);
			heavy[n] |= cls[n] != CLS_CARRY && heavy[x];
			read[x] |= cls[n] == CLS_CARRY;
		}
	}
	for (uint32_t k = 0; k < b->nout; k++)
		read[b->out[k].node] = 1;
	// Candidates: the frontier of the carry-independent part, SEQ first.
	uint32_t nseq = 0, ninv = 0;
	double bytes = 0;
	for (int pass = 0; pass < 2; pass++)
		for (NodeId n = 1; n < b->nnode; n++) {
			const Node *nd = &b->node[n];
			if (nd->op == OP_input || !read[n] || cls[n] == CLS_CARRY || nd->nin == 0)
				continue;
			if (pass == 0 && cls[n] == CLS_SEQ && heavy[n] && nseq + 1 + nin < MAXOPS) {
				// Batched, every value of its cone is T times a step's
				// (its stacked result and the intermediates alike).
				uint32_t h;
				double cb = 0;
				mark_cone(b, &n, 1, leaf, need, &h);
				for (NodeId q = 1; q <= n; q++)
					cb += need[q] && !leaf[q] && !counted[q] ? bytes_of(b, q, T) : 0;
				if (bytes + cb <= HOIST_BYTES) {
					bytes += cb;
					for (NodeId q = 1; q <= n; q++)
						counted[q] |= need[q] && !leaf[q];
					cand[nseq++] = n;
				}
			}
			if (pass == 1 && cls[n] == CLS_INV && (heavy[n] || nd->op == OP_permute) &&
			    nseq + ninv + 1 + nin < MAXOPS)
				cand[nseq + ninv++] = n;
		}
	NodeId hval[MAXOPS];
	uint32_t nheavy = 0, h;
	if (nseq) {
		mark_cone(b, cand, nseq, leaf, need, &h);
		if (compute_outside(dst, b, cand, nseq, leaf, need, batleaf, leafval, T, hval)) {
			nheavy += h;
		} else { // not batchable: the invariant candidates move down
			memmove(cand, cand + nseq, ninv * sizeof *cand);
			nseq = 0;
		}
	}
	if (ninv) {
		mark_cone(b, cand + nseq, ninv, leaf, need, &h);
		compute_outside(dst, b, cand + nseq, ninv, leaf, need, NULL, leafval, T, hval + nseq);
		st->invariant += h;
	}
	if (nseq + ninv) {
		// Operands: carries, sequences, hoisted sequences, invariants,
		// hoisted invariants.
		NodeId innodes[MAXOPS], nops[MAXOPS];
		uint32_t *outorder = calloc(b->nout + 1, sizeof *outorder);
		FADC_ASSERT(outorder, "out of memory");
		uint32_t k = 0;
		for (int i = 0; i < nin; i++) {
			if (i == nc + nx)
				for (uint32_t c = 0; c < nseq; c++) {
					innodes[k] = cand[c];
					nops[k++] = hval[c];
				}
			innodes[k] = b->input[i].node;
			nops[k++] = ops[i];
		}
		if (nc + nx == nin)
			for (uint32_t c = 0; c < nseq; c++) {
				innodes[k] = cand[c];
				nops[k++] = hval[c];
			}
		for (uint32_t c = nseq; c < nseq + ninv; c++) {
			innodes[k] = cand[c];
			nops[k++] = hval[c];
		}
		for (uint32_t o = 0; o < b->nout; o++)
			outorder[o] = o;
		Graph *nb = rebuild_body(b, innodes, k, outorder, b->nout, NULL, 0);
		free(outorder);
		ir_graph_free(b);
		*pb = nb;
		memcpy(ops, nops, k * sizeof *ops);
		*pnin = (int)k;
		*pnx = nx + (int)nseq;
		st->hoisted += nheavy;
	}
	free(cls);
	free(heavy);
	free(read);
	free(leaf);
	free(need);
	free(batleaf);
	free(counted);
	free(cand);
	free(leafval);
}

// Sinking (see the top): which per-step outputs of body b leave the loop.
// Emits the scan into dst and fills rm (b's outputs are the original
// tuple's); returns the scan node.
static NodeId
sink_and_emit(Graph *dst, Graph *b, const NodeId *ops, int nin, int nc, int nx, const Attrs *sa,
              int64_t T, Loc loc, Remap *rm, ScanHoistStats *st)
{
	uint32_t nout = b->nout, ny = nout - (uint32_t)nc;
	uint8_t *cls = calloc(b->nnode + 1, 1), *keep = calloc(b->nnode + 1, 1);
	uint8_t *leaf = calloc(b->nnode + 1, 1), *need = calloc(b->nnode + 1, 1);
	uint8_t *sunk = calloc(nout + 1, 1), *batleaf = calloc(b->nnode + 1, 1);
	NodeId *leafval = calloc(b->nnode + 1, sizeof *leafval), *roots = calloc(nout + 1, sizeof *roots);
	FADC_ASSERT(cls && keep && leaf && need && sunk && batleaf && leafval && roots, "out of memory");
	fill_cls(b, nc, nx, cls);
	// A per-step output that is a step of a sequence operand is that
	// operand (a residual the vjp saved that hoisting made a sequence).
	uint8_t *pass = calloc(nout + 1, 1);
	FADC_ASSERT(pass, "out of memory");
	uint32_t npass = 0;
	for (uint32_t y = 0; T > 0 && y < ny; y++) {
		NodeId o = b->out[nc + y].node;
		pass[nc + y] = b->node[o].op == OP_input && cls[o] == CLS_SEQ;
		npass += pass[nc + y];
		sunk[nc + y] = b->node[o].op != OP_input;
	}
	// keep: what the loop still computes (the carries' cones and the kept
	// outputs'); a sunk output whose cone is pinned or holds no product
	// is kept instead, until nothing changes.
	uint32_t nsunk, heavy = 0;
	for (int changed = 1; changed;) {
		changed = 0;
		memset(keep, 0, b->nnode);
		for (uint32_t o = 0; o < nout; o++)
			keep[b->out[o].node] |= !sunk[o];
		for (NodeId n = b->nnode - 1; n > 0; n--)
			for (int i = 0; keep[n] && i < b->node[n].nin; i++)
				keep[ir_in1(b, n, i)] = 1;
		for (NodeId n = 1; n < b->nnode; n++)
			leaf[n] = b->node[n].op == OP_input || (keep[n] && cls[n] != CLS_INV);
		nsunk = 0;
		double bytes = 0;
		for (uint32_t o = nc; o < nout; o++) {
			if (!sunk[o])
				continue;
			uint32_t h;
			NodeId r = b->out[o].node;
			int ok = !keep[r] && mark_cone(b, &r, 1, leaf, need, &h) && h > 0;
			// The frontier's stacked values and the batched cone's.
			for (NodeId n = 1; ok && n < b->nnode; n++)
				if (need[n] && !(b->node[n].op == OP_input && cls[n] != CLS_CARRY))
					bytes += bytes_of(b, n, T);
			if (!ok || bytes > HOIST_BYTES) {
				sunk[o] = 0;
				changed = 1;
				break;
			}
			roots[nsunk++] = r;
		}
	}
	if (nsunk)
		mark_cone(b, roots, nsunk, leaf, need, &heavy);
	// The frontier: per-step values of the loop that the sunk cones read
	// (a node the loop keeps, or a carry input), as new per-step outputs.
	NodeId *front = calloc(b->nnode + 1, sizeof *front);
	FADC_ASSERT(front, "out of memory");
	uint32_t nfront = 0;
	for (NodeId n = 1; nsunk && n < b->nnode; n++)
		if (need[n] && leaf[n] && !(b->node[n].op == OP_input && cls[n] != CLS_CARRY))
			front[nfront++] = n;
	if (nout - nsunk + nfront > MAXOPS) {
		nsunk = 0;
		nfront = 0;
	}
	Graph *body = b;
	uint32_t *outorder = calloc(nout + 1, sizeof *outorder), no = 0;
	FADC_ASSERT(outorder, "out of memory");
	for (uint32_t o = 0; o < nout; o++) {
		rm->idx[o] = -1;
		if (pass[o])
			rm->val[o] = ops[ir_attr_int(b, b->out[o].node, "index")];
		else if (!nsunk || !sunk[o]) {
			rm->idx[o] = (int32_t)no;
			outorder[no++] = o;
		}
	}
	// The operands the new body reads: those of b but the ones nothing
	// reads any more (hoisting's inputs, a sunk output's), except the
	// carries and one sequence (it gives the scan its length).
	uint8_t *used = calloc(b->nnode + 1, 1);
	FADC_ASSERT(used, "out of memory");
	for (uint32_t o = 0; o < no; o++)
		used[b->out[outorder[o]].node] = 1;
	for (uint32_t q = 0; q < nfront; q++)
		used[front[q]] = 1;
	for (NodeId n = b->nnode - 1; n > 0; n--)
		if (used[n])
			for (int i = 0; i < b->node[n].nin; i++)
				used[ir_in1(b, n, i)] = 1;
	NodeId innodes[MAXOPS + 32], nops[MAXOPS + 32];
	int k = 0, kx = 0;
	for (int i = 0; i < nin; i++) {
		int isseq = i >= nc && i < nc + nx;
		if (i < nc || used[b->input[i].node] || (isseq && i == nc + nx - 1 && kx == 0)) {
			innodes[k] = b->input[i].node;
			nops[k++] = ops[i];
			kx += isseq;
		}
	}
	if (nsunk || npass || k < nin)
		body = rebuild_body(b, innodes, (uint32_t)k, outorder, no, front, nfront);
	Attrs a = *sa;
	a.a[0].i = ir_add_sub(dst, body);
	a.a[1].i = nc;
	a.a[2].i = kx;
	NodeId sc = ir_emit(dst, OP_scan, nops, k, &a, loc);
	if (nsunk) {
		for (NodeId n = 1; n < b->nnode; n++)
			if (b->node[n].op == OP_input) {
				int64_t i = ir_attr_int(b, n, "index");
				leafval[n] = ops[i];
				batleaf[n] = i >= nc && i < nc + nx;
			}
		for (uint32_t q = 0; q < nfront; q++) {
			leafval[front[q]] = scan_get(dst, sc, (int64_t)(no + q), loc);
			batleaf[front[q]] = 1;
		}
		NodeId *val = calloc(nsunk + 1, sizeof *val);
		FADC_ASSERT(val, "out of memory");
		int ok = compute_outside(dst, b, roots, nsunk, leaf, need, batleaf, leafval, T, val);
		FADC_ASSERT(ok, "scan_hoist: vmap failed after the body was rebuilt");
		uint32_t q = 0;
		for (uint32_t o = nc; o < nout; o++)
			if (sunk[o])
				rm->val[o] = val[q++];
		free(val);
		st->sunk += heavy;
	}
	if (body != b)
		ir_graph_free(b);
	free(outorder);
	free(pass);
	free(used);
	free(front);
	free(cls);
	free(keep);
	free(leaf);
	free(need);
	free(sunk);
	free(batleaf);
	free(leafval);
	free(roots);
	return sc;
}

// Carries that need no loop (see the top): carry k is an accumulator
// when its new value is c' = c + f and nothing else reads c or c' (f
// cannot read c, then): kind[k] = 1, f becomes a per-step output and c_T
// = c_0 + Σ_t f_t after the loop.  A carry passed through unchanged, c'
// = c, is an invariant: kind[k] = 2, c_T = c_0.  Rewrites *pb and ops,
// *pnin, *pnc; the new body's outputs are the kept carries', the per-step
// outputs, then the accumulators' f.  At least one carry stays (a scan
// has one).  Returns the number of carries taken out.
static int
unloop_carries(Graph **pb, NodeId *ops, int *pnin, int *pnc, uint8_t *kind)
{
	Graph *b = *pb;
	int nin = *pnin, nc = *pnc, nkeep = 0;
	uint32_t *uses = calloc(b->nnode + 1, sizeof *uses);
	NodeId *f = calloc((size_t)nc + 1, sizeof *f);
	FADC_ASSERT(uses && f, "out of memory");
	for (NodeId n = 1; n < b->nnode; n++)
		for (int i = 0; i < b->node[n].nin; i++)
			uses[ir_in1(b, n, i)]++;
	for (uint32_t o = 0; o < b->nout; o++)
		uses[b->out[o].node]++;
	for (int k = 0; k < nc; k++) {
		NodeId in = b->input[k].node, o = b->out[k].node;
		DType dt = (DType)b->node[in].dtype;
		kind[k] = 0;
		if (o == in) {
			kind[k] = 2;
		} else if (b->node[o].op == OP_add && uses[in] == 1 && uses[o] == 1 &&
		           (ir_dtype_is_float(dt) || dt == DT_I64)) {
			NodeId a0 = ir_in1(b, o, 0), a1 = ir_in1(b, o, 1);
			f[k] = a0 == in ? a1 : a1 == in ? a0 : 0;
			kind[k] = f[k] && f[k] != in &&
			          ir_shape_eq(ir_shape(b, f[k]), ir_shape(b, in)) ? 1 : 0;
		}
		nkeep += kind[k] == 0;
	}
	for (int k = 0; k < nc && nkeep == 0; k++)
		if (kind[k]) { // keep the first: a scan has a carry
			kind[k] = 0;
			nkeep = 1;
		}
	int out = nc - nkeep;
	if (out) {
		NodeId innodes[MAXOPS + 32], nops[MAXOPS + 32], extra[MAXOPS];
		uint32_t *outorder = calloc(b->nout + 1, sizeof *outorder), no = 0, ne = 0, q = 0;
		FADC_ASSERT(outorder, "out of memory");
		for (int k = 0; k < nc; k++)
			if (kind[k] == 0) {
				innodes[q] = b->input[k].node;
				nops[q++] = ops[k];
				outorder[no++] = (uint32_t)k;
			} else if (kind[k] == 1) {
				extra[ne++] = f[k];
			}
		for (int i = nc; i < nin; i++) {
			innodes[q] = b->input[i].node;
			nops[q++] = ops[i];
		}
		for (int k = 0; k < nc; k++)
			if (kind[k] == 2) {
				innodes[q] = b->input[k].node;
				nops[q++] = ops[k];
			}
		for (uint32_t o = (uint32_t)nc; o < b->nout; o++)
			outorder[no++] = o;
		Graph *nb = rebuild_body(b, innodes, q, outorder, no, extra, ne);
		free(outorder);
		ir_graph_free(b);
		*pb = nb;
		memcpy(ops, nops, q * sizeof *ops);
		*pnin = (int)q;
		*pnc = nkeep;
	}
	free(uses);
	free(f);
	return out;
}

static Graph *hoist_graph(const Graph *src, ScanHoistStats *st);

static NodeId
hoist_scan(Graph *dst, const Graph *src, NodeId self, const NodeId *map, const uint8_t *used,
           Remap *rm, ScanHoistStats *st)
{
	Attrs a;
	ir_attrs_get(src, self, &a);
	int nc = (int)a.a[1].i, nx = (int)a.a[2].i, nin = src->node[self].nin;
	Loc loc = src->node[self].loc;
	Graph *b = hoist_graph(src->sub[a.a[0].i], st); // nested scans first
	uint32_t nout0 = b->nout;
	rm->idx = arena_alloc_array(dst->arena, nout0 + 1, sizeof *rm->idx);
	rm->val = arena_alloc_array(dst->arena, nout0 + 1, sizeof *rm->val);
	NodeId ops[MAXOPS + 32], c0[MAXOPS + 32];
	FADC_ASSERT(nin <= MAXOPS + 32, "scan_hoist: too many operands");
	for (int i = 0; i < nin; i++)
		ops[i] = c0[i] = map[ir_in1(src, self, i)];
	// Per-step outputs that nothing reads (no `get` of them) go first: a
	// carry the vjp's forward scan stacks for no one is no output, and
	// may then be an accumulator.
	int32_t *t1 = arena_alloc_array(dst->arena, nout0 + 1, sizeof *t1);
	uint32_t *outorder = calloc(nout0 + 1, sizeof *outorder), no = 0;
	FADC_ASSERT(outorder, "out of memory");
	for (uint32_t o = 0; o < nout0; o++) {
		t1[o] = -1;
		if (o < (uint32_t)nc || (used && used[o])) {
			t1[o] = (int32_t)no;
			outorder[no++] = o;
		}
	}
	if (no < nout0) {
		NodeId innodes[MAXOPS + 32];
		for (int i = 0; i < nin; i++)
			innodes[i] = b->input[i].node;
		Graph *nb = rebuild_body(b, innodes, (uint32_t)nin, outorder, no, NULL, 0);
		ir_graph_free(b);
		b = nb;
	}
	free(outorder);
	int64_t T = nx > 0 ? ir_shape(src, ir_in1(src, self, nc))->dim[0] : 0;
	int nc0 = nc, out = 0;
	uint8_t kind[MAXOPS + 32] = {0};
	if (T > 0 && nin < MAXOPS)
		out = unloop_carries(&b, ops, &nin, &nc, kind);
	st->carries += (uint32_t)out;
	if (T > 0)
		hoist_in(dst, &b, ops, &nin, nc, &nx, T, st);
	// The body's outputs are now the kept carries', the read per-step
	// outputs, the accumulators' f (unloop_carries): the old tuple from
	// the new one.
	Remap r2;
	r2.idx = arena_alloc_array(dst->arena, b->nout + 1, sizeof *r2.idx);
	r2.val = arena_alloc_array(dst->arena, b->nout + 1, sizeof *r2.val);
	NodeId sc = sink_and_emit(dst, b, ops, nin, nc, nx, &a, T, loc, &r2, st);
	uint32_t ny = no - (uint32_t)nc0, kept = 0, acc = 0;
	for (int k = 0; k < nc0; k++) {
		rm->idx[k] = -1;
		if (kind[k] == 0) {
			rm->idx[k] = r2.idx[kept];
			rm->val[k] = r2.val[kept++];
		} else if (kind[k] == 2) {
			rm->val[k] = c0[k];
		} else { // c_T = c_0 + Σ_t f_t
			uint32_t e = (uint32_t)nc + ny + acc++;
			NodeId fs = r2.idx[e] >= 0 ? scan_get(dst, sc, r2.idx[e], loc) : r2.val[e];
			int64_t ax = 0;
			rm->val[k] = b_add(dst, c0[k], b_sum(dst, fs, &ax, 1, 0, loc), loc);
		}
	}
	for (uint32_t o = (uint32_t)nc0; o < nout0; o++) {
		rm->idx[o] = -1; // dropped: nothing reads it
		if (t1[o] >= 0) {
			uint32_t y = (uint32_t)t1[o] - (uint32_t)nc0;
			rm->idx[o] = r2.idx[nc + y];
			rm->val[o] = r2.val[nc + y];
		}
	}
	return sc;
}

static Graph *
hoist_graph(const Graph *src, ScanHoistStats *st)
{
	Graph *dst = ir_graph_new(src->name, src->src);
	NodeId *map = arena_alloc_array(dst->arena, src->nnode, sizeof *map);
	Remap *rm = arena_alloc_array(dst->arena, src->nnode, sizeof *rm);
	// used[s][k]: some `get` reads value k of scan s.
	uint8_t **used = arena_alloc_array(dst->arena, src->nnode, sizeof *used);
	for (NodeId n = 1; n < src->nnode; n++) {
		if (src->node[n].op != OP_get)
			continue;
		NodeId s = ir_in1(src, n, 0);
		if (!used[s])
			used[s] = arena_alloc_array(dst->arena,
			                            src->sub[ir_attr_int(src, s, "body")]->nout + 1, 1);
		used[s][ir_attr_int(src, n, "index")] = 1;
	}
	for (NodeId n = 1; n < src->nnode; n++) {
		const Node *nd = &src->node[n];
		if (nd->op == OP_input) {
			const Input *in = &src->input[ir_attr_int(src, n, "index")];
			map[n] = ir_add_input(dst, in->name, in->kind, (DType)nd->dtype, ir_shape(src, n), nd->loc);
		} else if (nd->op == OP_scan) {
			map[n] = hoist_scan(dst, src, n, map, used[n], &rm[n], st);
		} else if (nd->op == OP_get) {
			NodeId s = ir_in1(src, n, 0);
			int64_t k = ir_attr_int(src, n, "index");
			map[n] = rm[s].idx[k] < 0 ? rm[s].val[k] : scan_get(dst, map[s], rm[s].idx[k], nd->loc);
		} else {
			map[n] = b_copy_node(dst, src, n, map);
		}
	}
	for (uint32_t k = 0; k < src->nout; k++)
		ir_add_output(dst, map[src->out[k].node], src->out[k].name, src->out[k].writeback);
	return dst;
}

Graph *
pass_scan_hoist(const Graph *g, ScanHoistStats *st)
{
	ScanHoistStats local = {0};
	if (!st)
		st = &local;
	// Twice: a rewritten scan that no longer reads a value of an earlier
	// one (the vjp's reverse scan, a saved carry) leaves that value dead,
	// which only the second round, after DCE, can drop from its body.
	Graph *r1 = hoist_graph(g, st);
	Graph *d = pass_dce(r1);
	ir_graph_free(r1);
	Graph *r2 = hoist_graph(d, st);
	ir_graph_free(d);
	return r2;
}
