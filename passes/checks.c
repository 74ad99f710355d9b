// passes/checks.c -- run-time checks of data-dependent indices.
//
// take, take_along, their scatters take_add and take_along_add, and
// one_hot read an index tensor that is often user data: class labels,
// token ids, detr's matches.  Compiled code clamps a loaded index into
// its axis (memory safety: a bad index never reads or writes outside a
// buffer), but a clamped index is a wrong answer: the forward reads
// another element and the vjp's scatter drops the update, so the
// gradient says the input does not matter.  The interpreter refuses such
// data; compiled code must say so too.
//
// The check costs two reductions and no branch in any loop: for every
// index operand i of such an op, with valid range [lo, end) (0 and the
// size of the indexed axis, or one_hot's n), the task gets one hidden
// output, the i64[2] (min_j i_j, max_j i_j).  Every element is in range
// iff lo <= min and max < end.  The runtime compares after the task (on a
// GPU, after the task's graph copied the pair to pinned host memory) and
// fails the run with FADC_ERR_INDEX; the outputs go through fusion, the
// memory plan and both backends as any small reduction does, so no
// backend has machinery of its own for them.
//
// Only what is not provably in range is checked, so tasks without
// data-dependent indices (the ppl models') carry nothing.  A small range
// analysis over the i64 nodes proves: iota (its axis' positions), full
// (its value), argmax over an axis of n ([0, n)), linear_sum_assignment
// of a rows x cols cost ([0, cols), or [-1, cols) with more rows than
// columns: rows left over get -1), and what layout ops, gathers and where
// make of proven values (they only move or select elements: the hull of
// their operands).  Params, consts, arguments and arithmetic are checked.
// Zero-element index tensors need no check (and min over nothing has no
// identity).  One check per distinct (index node, range): the vjp's
// take_along_add reads the very index of the forward's take_along (the
// passes CSE them), so it adds nothing.
//
// Takes inside a scan's body are not checked here (their index is a value
// of the body, one per step); the clamp keeps them memory-safe.
#include <string.h>

#include "passes.h"

typedef struct Range {
	uint8_t known;
	int64_t lo, hi; // every element in [lo, hi] (inclusive)
} Range;

static Range
hull(Range a, Range b)
{
	if (!a.known || !b.known)
		return (Range){0, 0, 0};
	return (Range){1, a.lo < b.lo ? a.lo : b.lo, a.hi > b.hi ? a.hi : b.hi};
}

// The range of i64 node n from its operands' (r[] filled below n).
static Range
node_range(const Graph *g, NodeId n, const Range *r)
{
	const Node *x = &g->node[n];
	Range none = {0, 0, 0};
	if (x->dtype != DT_I64)
		return none;
	switch (x->op) {
	case OP_full: {
		double v = ir_attr_float(g, n, "value");
		// The stored value (truncation toward zero, as every store).
		if (!(v > -9.0e18 && v < 9.0e18))
			return none;
		int64_t k = (int64_t)ir_dtype_round(DT_I64, v);
		return (Range){1, k, k};
	}
	case OP_iota: {
		int64_t ax = ir_attr_int(g, n, "axis");
		const Shape *s = ir_shape(g, n);
		if (ax < 0 || ax >= s->rank || s->dim[ax] < 1)
			return none;
		return (Range){1, 0, s->dim[ax] - 1};
	}
	case OP_argmax: {
		const Shape *s = ir_shape(g, ir_in1(g, n, 0));
		int64_t ax = ir_attr_int(g, n, "axis");
		if (ax < 0)
			ax += s->rank;
		if (ax < 0 || ax >= s->rank || s->dim[ax] < 1)
			return none;
		return (Range){1, 0, s->dim[ax] - 1};
	}
	case OP_linear_sum_assignment: {
		const Shape *s = ir_shape(g, ir_in1(g, n, 0));
		return (Range){1, s->dim[0] > s->dim[1] ? -1 : 0, s->dim[1] - 1};
	}
	case OP_reshape:
	case OP_permute:
	case OP_broadcast:
	case OP_slice:
	case OP_max:
	case OP_min:
	case OP_to_host:
	case OP_to_device:
	case OP_take: // gathers select elements of operand 0
	case OP_take_along:
		return r[ir_in1(g, n, 0)];
	case OP_concat: {
		Range h = r[ir_in1(g, n, 0)];
		for (int i = 1; i < x->nin; i++)
			h = hull(h, r[ir_in1(g, n, i)]);
		return h;
	}
	case OP_where:
		return hull(r[ir_in1(g, n, 1)], r[ir_in1(g, n, 2)]);
	default:
		return none;
	}
}

// The op's index operand and its valid range [lo, end); 0 if n reads none.
static int
index_operand(const Graph *g, NodeId n, NodeId *idx, int64_t *lo, int64_t *end)
{
	const Node *x = &g->node[n];
	*lo = 0;
	switch (x->op) {
	case OP_take:
	case OP_take_along:
	case OP_take_add:
	case OP_take_along_add: {
		int64_t ax = ir_attr_int(g, n, "axis");
		*idx = ir_in1(g, n, 1);
		*end = ir_shape(g, ir_in1(g, n, 0))->dim[ax];
		return 1;
	}
	case OP_one_hot:
		*idx = ir_in1(g, n, 0);
		*end = ir_attr_int(g, n, "n");
		return 1;
	default:
		return 0;
	}
}

// The input an index is, through layout ops (reshape(labels), the
// unsqueeze of nll, transformer's data[:, 0:SEQ]: its values are the
// input's), or NULL: a computed value.
static const char *
index_name(const Graph *g, NodeId n)
{
	for (;;) {
		switch (g->node[n].op) {
		case OP_input:
			return g->input[ir_attr_int(g, n, "index")].name;
		case OP_reshape:
		case OP_permute:
		case OP_broadcast:
		case OP_slice:
		case OP_to_host:
		case OP_to_device:
			n = ir_in1(g, n, 0);
			continue;
		default:
			return NULL;
		}
	}
}

// min and max of i64 node x over all its elements, as an i64[2].
static NodeId
min_max(Graph *g, NodeId x, Loc loc)
{
	const Shape *s = ir_shape(g, x);
	Shape one = {1, {1}};
	NodeId mm[2];
	for (int k = 0; k < 2; k++) {
		NodeId v = x;
		if (s->rank > 0) {
			Attrs a;
			ir_attrs_default(k ? OP_max : OP_min, &a);
			a.a[0].n = s->rank;
			for (int i = 0; i < s->rank; i++)
				a.a[0].v[i] = i;
			v = ir_emit(g, k ? OP_max : OP_min, &x, 1, &a, loc);
		}
		mm[k] = b_reshape(g, v, &one, loc);
	}
	Attrs a;
	ir_attrs_default(OP_concat, &a);
	a.a[0].i = 0;
	return ir_emit(g, OP_concat, mm, 2, &a, loc);
}

uint32_t
pass_index_checks(Graph *g, IndexCheck **checks)
{
	uint32_t nn = g->nnode, nc = 0;
	*checks = NULL;
	Range *r = arena_alloc_array(g->arena, nn, sizeof *r);
	IndexCheck *c = NULL;
	uint32_t cap = 0;
	for (NodeId n = 1; n < nn; n++) {
		r[n] = node_range(g, n, r);
		NodeId idx;
		int64_t lo, end;
		if (!index_operand(g, n, &idx, &lo, &end))
			continue;
		if (ir_numel(ir_shape(g, idx)) == 0)
			continue;
		if (r[idx].known && r[idx].lo >= lo && r[idx].hi < end)
			continue; // proven
		int seen = 0;
		for (uint32_t k = 0; k < nc && !seen; k++)
			seen = c[k].index == idx && c[k].lo == lo && c[k].end == end;
		if (seen)
			continue;
		arena_grow(g->arena, (void **)&c, &cap, nc + 1, sizeof *c);
		c[nc] = (IndexCheck){.index = idx,
		                     .lo = lo,
		                     .end = end,
		                     .op = ir_op(g->node[n].op)->name,
		                     .name = index_name(g, idx),
		                     .loc = g->node[n].loc,
		                     .index_loc = g->node[idx].loc};
		nc++;
	}
	// The outputs after the user's: nodes appended now use only nodes
	// below them, so ids stay in topological order.
	for (uint32_t k = 0; k < nc; k++) {
		c[k].out = g->nout;
		ir_add_output(g, min_max(g, c[k].index, c[k].loc),
		              arena_printf(g->arena, "check:%u", k), -1);
	}
	*checks = c;
	return nc;
}
