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
// Takes inside a scan's body are checked too: its index is a value of the
// body, one per step, and the check must cover every step.  The body is
// analysed as a graph of its own (its inputs' ranges: the hull of its
// scans' operands, carries unknown), and each of its checks is lifted to
// the graph that runs the scan, one of two ways:
//   - hoisted: an index that is a sequence or invariant argument of the
//     body, through reshape / permute / broadcast (which keep the set of
//     elements: an embedding lookup per step, take(emb, tok_t)), takes
//     over the steps exactly the elements of the scan's operand, when the
//     scan has steps; the check is then the operand's, outside the loop,
//     at no cost per step (and shared with the reverse scan's take_add,
//     which reads the same operand);
//   - per step: any other index (computed in the body, or a carry) gets
//     an extra per-step output of the body, its step's (min, max), so the
//     scan stacks an i64[T, 2]; the check is (min of column 0, max of
//     column 1) of that, after the loop.
// Nested scans lift twice.  A scan of 0 steps runs no body: no check.
// Derived scans (vjp's forward and reverse, jvp's, vmap's) are scans of
// the task graph like any other, so they are checked as written.
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

// The (min, max) over the steps of a scan's stacked per-step pairs x,
// i64[T, 2] (T > 0): (min_t x[t, 0], max_t x[t, 1]), as an i64[2].
static NodeId
min_max_steps(Graph *g, NodeId x, Loc loc)
{
	int64_t T = ir_shape(g, x)->dim[0];
	Shape one = {1, {1}};
	NodeId mm[2];
	for (int k = 0; k < 2; k++) {
		Attrs a;
		ir_attrs_default(OP_slice, &a);
		a.a[0].n = a.a[1].n = a.a[2].n = 2;
		a.a[0].v[0] = 0, a.a[1].v[0] = T, a.a[2].v[0] = 1;
		a.a[0].v[1] = k, a.a[1].v[1] = k + 1, a.a[2].v[1] = 1;
		NodeId col = ir_emit(g, OP_slice, &x, 1, &a, loc);
		ir_attrs_default(k ? OP_max : OP_min, &a);
		a.a[0].n = 2;
		a.a[0].v[0] = 0, a.a[0].v[1] = 1;
		mm[k] = b_reshape(g, ir_emit(g, k ? OP_max : OP_min, &col, 1, &a, loc), &one, loc);
	}
	Attrs a;
	ir_attrs_default(OP_concat, &a);
	a.a[0].i = 0;
	return ir_emit(g, OP_concat, mm, 2, &a, loc);
}

// The i64[2] that check k of g compares.
static NodeId
check_value(Graph *g, const IndexCheck *k)
{
	return k->steps ? min_max_steps(g, k->index, k->loc) : min_max(g, k->index, k->loc);
}

// The checks of one graph, in its arena.
typedef struct Found {
	IndexCheck *c;
	uint32_t n, cap;
} Found;

// Adds check k to f, unless f checks the same (index, range) already.
static void
found_add(Graph *g, Found *f, IndexCheck k)
{
	for (uint32_t i = 0; i < f->n; i++)
		if (f->c[i].index == k.index && f->c[i].lo == k.lo && f->c[i].end == k.end)
			return;
	arena_grow(g->arena, (void **)&f->c, &f->cap, f->n + 1, sizeof *f->c);
	f->c[f->n++] = k;
}

// The argument of body b that index n is, through ops that keep the set
// of its elements (reshape, permute, broadcast, placement), or -1.
static int
body_argument(const Graph *b, NodeId n)
{
	for (;;) {
		switch (b->node[n].op) {
		case OP_input:
			return (int)ir_attr_int(b, n, "index");
		case OP_reshape:
		case OP_permute:
		case OP_broadcast:
		case OP_to_host:
		case OP_to_device:
			n = ir_in1(b, n, 0);
			continue;
		default:
			return -1;
		}
	}
}

static int
is_proven(const Range *r, int64_t lo, int64_t end)
{
	return r->known && r->lo >= lo && r->hi < end;
}

// The checks of graph g into f: its own index ops', and its scans' bodies'
// lifted to g (the file's head comment).  inr: the ranges of g's inputs,
// or NULL (unknown).  Appends to g the nodes of per-step checks (gets of
// its scans) and to its bodies their per-step outputs.
static void
collect(Graph *g, const Range *inr, Found *f)
{
	uint32_t nn = g->nnode;
	Range *r = arena_alloc_array(g->arena, nn, sizeof *r);
	for (NodeId n = 1; n < nn; n++)
		r[n] = inr && g->node[n].op == OP_input ? inr[ir_attr_int(g, n, "index")]
		                                        : node_range(g, n, r);
	// Each body once, with the hull of what its scans pass it.
	Found *bf = arena_alloc_array(g->arena, (size_t)g->nsub + 1, sizeof *bf);
	int32_t **bout = arena_alloc_array(g->arena, (size_t)g->nsub + 1, sizeof *bout);
	for (uint32_t k = 0; k < g->nsub; k++) {
		Graph *b = g->sub[k];
		Range *bin = NULL;
		for (NodeId n = 1; n < nn; n++) {
			if (g->node[n].op != OP_scan || (uint32_t)ir_attr_int(g, n, "body") != k)
				continue;
			int nc = (int)ir_attr_int(g, n, "ncarry");
			Range none = {0, 0, 0};
			int first = !bin;
			if (first)
				bin = arena_alloc_array(g->arena, b->ninput + 1, sizeof *bin);
			for (int i = 0; i < g->node[n].nin && (uint32_t)i < b->ninput; i++) {
				Range v = i < nc ? none : r[ir_in1(g, n, i)];
				bin[i] = first ? v : hull(bin[i], v);
			}
		}
		if (!bin)
			continue; // no scan runs it
		collect(b, bin, &bf[k]);
		bout[k] = arena_alloc_array(g->arena, bf[k].n + 1, sizeof *bout[k]);
		for (uint32_t j = 0; j < bf[k].n; j++)
			bout[k][j] = -1;
	}
	for (NodeId n = 1; n < nn; n++) {
		if (g->node[n].op == OP_scan) {
			uint32_t k = (uint32_t)ir_attr_int(g, n, "body");
			Graph *b = g->sub[k];
			int nc = (int)ir_attr_int(g, n, "ncarry");
			if (ir_shape(g, ir_in1(g, n, nc))->dim[0] == 0)
				continue; // no step runs the body
			for (uint32_t j = 0; j < bf[k].n; j++) {
				IndexCheck c = bf[k].c[j];
				c.in_scan = 1;
				int arg = c.steps ? -1 : body_argument(b, c.index);
				if (arg >= nc) { // hoisted: the operand's elements
					NodeId x = ir_in1(g, n, arg);
					if (is_proven(&r[x], c.lo, c.end))
						continue;
					c.index = x;
					c.name = index_name(g, x);
					c.index_loc = g->node[x].loc;
					found_add(g, f, c);
					continue;
				}
				if (bout[k][j] < 0) { // the body's per-step (min, max)
					bout[k][j] = (int32_t)b->nout;
					ir_add_output(b, check_value(b, &c), "check", -1);
				}
				c.index = scan_get(g, n, bout[k][j], c.loc);
				c.steps = 1;
				c.name = NULL; // a value of the body, per step
				found_add(g, f, c);
			}
			continue;
		}
		NodeId idx;
		int64_t lo, end;
		if (!index_operand(g, n, &idx, &lo, &end))
			continue;
		if (ir_numel(ir_shape(g, idx)) == 0)
			continue;
		if (is_proven(&r[idx], lo, end))
			continue;
		found_add(g, f,
		          (IndexCheck){.index = idx,
		                       .lo = lo,
		                       .end = end,
		                       .op = ir_op(g->node[n].op)->name,
		                       .name = index_name(g, idx),
		                       .loc = g->node[n].loc,
		                       .index_loc = g->node[idx].loc});
	}
}

// Checks of the same op of the source over the same range, naming the
// same index, read one index of the source evaluated more than once: a
// body's take in jvp's primal and tangent scans, in vjp's forward and
// reverse scans (the reverse's take_add, the adjoint of that take, whose
// index may be the forward's saved carry, computed at another place: so
// inside scans the index's place may differ).  They are one check, whose
// (min, max) is that of their pairs stacked, and whose message is the
// first's.  Two calls of one function (one place after inlining) with
// different index tensors stay apart.
static int
same_check(const IndexCheck *a, const IndexCheck *b)
{
	// A gather and its adjoint scatter (take, take_add) are one op of the source.
	size_t la = strlen(a->op), lb = strlen(b->op);
	la -= la > 4 && !strcmp(a->op + la - 4, "_add") ? 4 : 0;
	lb -= lb > 4 && !strcmp(b->op + lb - 4, "_add") ? 4 : 0;
	if (la != lb || strncmp(a->op, b->op, la) || a->loc != b->loc || a->lo != b->lo ||
	    a->end != b->end)
		return 0;
	if (a->name || b->name)
		return a->name && b->name && !strcmp(a->name, b->name);
	return a->index_loc == b->index_loc || (a->in_scan && b->in_scan);
}

static uint32_t
merge_same(Graph *g, IndexCheck *c, uint32_t n, NodeId *value)
{
	uint32_t m = 0;
	uint8_t *used = arena_alloc_array(g->arena, n + 1, 1);
	NodeId *rows = arena_alloc_array(g->arena, n + 1, sizeof *rows);
	Shape row = {2, {1, 2}};
	for (uint32_t i = 0; i < n; i++) {
		if (used[i])
			continue;
		uint32_t nr = 0;
		NodeId v = check_value(g, &c[i]);
		for (uint32_t j = i + 1; j < n; j++) {
			if (used[j] || !same_check(&c[i], &c[j]))
				continue;
			if (!nr)
				rows[nr++] = b_reshape(g, v, &row, c[i].loc);
			rows[nr++] = b_reshape(g, check_value(g, &c[j]), &row, c[i].loc);
			used[j] = 1;
		}
		if (nr) {
			Attrs a;
			ir_attrs_default(OP_concat, &a);
			a.a[0].i = 0;
			NodeId all = ir_emit(g, OP_concat, rows, (int)nr, &a, c[i].loc);
			v = min_max_steps(g, all, c[i].loc);
		}
		c[m] = c[i];
		value[m++] = v;
	}
	return m;
}

uint32_t
pass_index_checks(Graph *g, IndexCheck **checks)
{
	Found f = {0};
	collect(g, NULL, &f);
	NodeId *value = arena_alloc_array(g->arena, f.n + 1, sizeof *value);
	uint32_t n = merge_same(g, f.c, f.n, value);
	// The outputs after the user's: nodes appended now use only nodes
	// below them, so ids stay in topological order.
	for (uint32_t k = 0; k < n; k++) {
		f.c[k].out = g->nout;
		ir_add_output(g, value[k], arena_printf(g->arena, "check:%u", k), -1);
	}
	*checks = f.c;
	return n;
}
