// passes/batch.c -- is the forward separable over its declared batch axis?
//
// A model that declares `batch x: 0, ..., loss mean|sum` (docs/IR.md) may be
// run data-parallel: each device computes the forward on a shard of the
// rows and the losses (and so the gradients) are combined.  That is exact
// only when no op mixes rows of the batch, except the final mean or sum
// that reduces the batch axis into the loss.  Then, with n rows split into
// shards of n_s rows and L_s the forward's output on shard s:
//
//   loss sum:   L = Σ_s L_s − (S − 1) C
//   loss mean:  L = Σ_s (n_s / n) L_s
//
// where C is the part of L that does not depend on the batch (a prior's
// log-density added to a likelihood); C is L on a shard of no rows, since
// a sum over no rows is 0.  For a mean, C is counted once already because
// the weights n_s / n add up to 1.  tests/unit/test_batch.c checks both
// identities on the float64 interpreter.
//
// The proof is one forward walk giving every value a state:
//   NONE     the value does not depend on a batched input;
//   ROW      it does, row by row: element (…, j, …) of axis `axis` belongs
//            to sample i where j = (a·n + i)·m + r (0 ≤ r < m, 0 ≤ a < o),
//            so the batch may be merged with outer (o) and inner (m) axes by
//            a reshape (attention's (L, B·NH, D)) and still be tracked;
//   RED      a sum or mean over the batch: a sum of per-sample values.  Only
//            linear ops may follow it (scaling by a NONE value, adding NONE
//            values or other reductions of the same kind, layout ops), so
//            that the output stays Σ_i f_i (or its mean) plus a NONE part.
// A NONE operand that meets a ROW one elementwise must be constant along
// the batch axis (a broadcast, a constant): else its entries would be
// matched with rows, and a shard's copy would not be the same value.
// Scans are walked through their bodies: sequences keep the batch on an
// axis after time, carries must keep one position from step to step.
// Anything else is refused, at the first op that mixes rows.
#include <stdarg.h>
#include <string.h>

#include "passes.h"

enum { S_NONE, S_ROW, S_RED };

typedef struct St {
	uint8_t kind; // S_*
	uint8_t red; // S_RED: BATCH_LOSS_MEAN or BATCH_LOSS_SUM
	int8_t axis; // S_ROW: the axis that holds the batch
	int64_t o, m; // S_ROW: the axis is (o, n, m) in row-major order
	Loc at; // S_RED: where the reduction over the batch is
	NodeId spread; // S_RED: a broadcast that copied it along an axis of the batch's size
	struct St *tuple; // a scan's values, for get
} St;

typedef struct Ck {
	const SrcMap *src;
	const Batch *b;
	int64_t n; // the batch size
	Arena *a;
	Loc *errloc;
	char *err;
	size_t errlen;
	// A scan's first round: its body's carries that start without rows
	// (lmask[input node] of body lg) may meet rows, to learn where the
	// loop puts them (walk_scan).
	const Graph *lg;
	const uint8_t *lmask;
} Ck;

// The name of the function whose body holds position loc (its file's last
// `def NAME(` line above it), or NULL: a node inlined from batch_norm is
// reported as batch_norm's, which is what the user wrote.
static const char *
enclosing_def(const Ck *c, Loc loc, char *buf, size_t n)
{
	if (!c->src || !loc || loc >= c->src->nloc)
		return NULL;
	const SrcLoc *sl = &c->src->loc[loc];
	const SrcFile *f = &c->src->file[sl->file];
	const char *t = f->text, *line = t;
	for (uint32_t l = 1; l < sl->line && line < t + f->len; line++)
		l += *line == '\n';
	// Walk back over the line starts, the current one first.
	for (const char *s = line; s >= t;) {
		if (!strncmp(s, "def ", 4)) {
			const char *e = s + 4;
			while (*e && *e != '(' && *e != ' ' && *e != '\n')
				e++;
			snprintf(buf, n, "%.*s", (int)(e - s - 4), s + 4);
			return strcmp(buf, "forward") ? buf : NULL;
		}
		if (s == t)
			break;
		for (s -= 1; s > t && s[-1] != '\n'; s--)
			;
	}
	return NULL;
}

static int fail(Ck *c, const Graph *g, NodeId n, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

// "WHO mixes rows of the batch axis declared at F:L:C: WHY", at node n.
static int
fail(Ck *c, const Graph *g, NodeId n, const char *fmt, ...)
{
	char fn[64], decl[256], why[512];
	const char *who = enclosing_def(c, g->node[n].loc, fn, sizeof fn);
	if (!who)
		who = ir_op(g->node[n].op)->name;
	ir_loc_str(c->src, c->b->loc, 0, decl, sizeof decl);
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, sizeof why, fmt, ap);
	va_end(ap);
	ir_errf(c->err, c->errlen, "%s mixes rows of the batch axis declared at %s: %s", who, decl, why);
	*c->errloc = g->node[n].loc;
	return 0;
}

static const char *
red_name(const St *s)
{
	return s->red == BATCH_LOSS_MEAN ? "mean" : "sum";
}

static const char *
at_str(const Ck *c, Loc loc, char *buf, size_t n)
{
	ir_loc_str(c->src, loc, 1, buf, n);
	return buf;
}

static int
row_eq(const St *x, const St *y)
{
	return x->axis == y->axis && x->o == y->o && x->m == y->m;
}

static int reshape_row(const Shape *s, const St *in, const Shape *t, int64_t n, St *out);

// Is NONE value v constant along the batch digit at pos (its axis, o, m:
// the sample index i of j = (a·n + i)·m + r)?  Then matching its entries
// with rows is harmless.  Looks through elementwise ops, broadcasts,
// permutes and reshapes (a bias tiled over the batch and then split into
// heads varies with the head, not with the sample).
static int
uniform_along(const Ck *c, const Graph *g, NodeId v, St pos, int depth)
{
	const Node *nd = &g->node[v];
	if (c->lg == g && c->lmask[v])
		return 1;
	const Shape *s = ir_shape(g, v);
	int ax = pos.axis;
	if (ax < 0 || ax >= s->rank || s->dim[ax] <= 1)
		return 1;
	if (depth > 64)
		return 0;
	const OpInfo *oi = ir_op(nd->op);
	NodeId x = nd->nin ? ir_in1(g, v, 0) : 0;
	switch (nd->op) {
	case OP_full:
		return 1;
	case OP_iota:
		return ir_attr_int(g, v, "axis") != ax;
	case OP_broadcast:
		pos.axis = (int8_t)(ax - (s->rank - ir_shape(g, x)->rank));
		return pos.axis < 0 || uniform_along(c, g, x, pos, depth + 1);
	case OP_permute: {
		int64_t perm[IR_MAXDIM];
		ir_attr_ints(g, v, "perm", perm);
		pos.axis = (int8_t)perm[ax];
		return uniform_along(c, g, x, pos, depth + 1);
	}
	case OP_reshape: {
		St src;
		return reshape_row(s, &pos, ir_shape(g, x), c->n, &src) &&
		       uniform_along(c, g, x, src, depth + 1);
	}
	default:
		break;
	}
	if ((oi->flags & F_ELEMWISE) || nd->op == OP_cast || nd->op == OP_where ||
	    nd->op == OP_not || (oi->flags & F_PLACE)) {
		for (int i = 0; i < nd->nin; i++)
			if (!uniform_along(c, g, ir_in1(g, v, i), pos, depth + 1))
				return 0;
		return 1;
	}
	return 0;
}

// Every NONE operand of n constant along the batch axis `ax` of the ROW
// ones (shapes equal, as for elementwise ops).
static int
none_uniform(Ck *c, const Graph *g, NodeId n, const St *st, const St *pos)
{
	int ax = pos->axis;
	for (int i = 0; i < g->node[n].nin; i++) {
		NodeId x = ir_in1(g, n, i);
		if (st[x].kind == S_NONE && ir_shape(g, x)->rank == ir_shape(g, n)->rank &&
		    !uniform_along(c, g, x, *pos, 0)) {
			char ty[128];
			ir_type_str(g->node[x].dtype, ir_shape(g, x), ty, sizeof ty);
			return fail(c, g, n,
			            "%s matches per-sample rows with operand %d (%s), which varies along the "
			            "batch axis %d but is not batched (list it in `batch`)",
			            ir_op(g->node[n].op)->name, i + 1, ty, ax);
		}
	}
	return 1;
}

// The ROW operands of n all at one position: the first, in *r.
static int
rows_agree(Ck *c, const Graph *g, NodeId n, const St *st, St *r)
{
	int have = 0;
	for (int i = 0; i < g->node[n].nin; i++) {
		const St *s = &st[ir_in1(g, n, i)];
		if (s->kind != S_ROW)
			continue;
		if (have && !row_eq(s, r))
			return fail(c, g, n,
			            "%s combines operands whose batch rows lie on different axes (%d and %d)",
			            ir_op(g->node[n].op)->name, r->axis, s->axis);
		*r = *s;
		have = 1;
	}
	return 1;
}

// The batch digit of shape s (axis k holding (o, n, m)) after a reshape to
// t: the axis of t that holds the whole digit, or 0 when a reshape splits
// it.  Row-major: the digit's stride in elements is T = m · Π_{j>k} s_j
// and it spans T · n; t's axis j holds it when its stride P_j divides T and
// its span P_j · t_j is a multiple of T · n.
static int
reshape_row(const Shape *s, const St *in, const Shape *t, int64_t n, St *out)
{
	int64_t T = in->m;
	for (int j = in->axis + 1; j < s->rank; j++)
		T *= s->dim[j];
	int64_t P = 1;
	for (int j = t->rank - 1; j >= 0; j--) {
		if (T && P && T % P == 0 && t->dim[j] && (P * t->dim[j]) % (T * n) == 0) {
			*out = *in;
			out->axis = (int8_t)j;
			out->m = T / P;
			out->o = P * t->dim[j] / (T * n);
			return 1;
		}
		P *= t->dim[j];
	}
	return 0;
}

static int walk(Ck *c, const Graph *g, St *st);

// A scan: the body walked with its carries', sequences' and invariants'
// states; a carry that comes out of a step with rows where it went in
// without them goes round again with rows, so that the loop's states are a
// fixed point (ncarry + 1 rounds at most: each changes one carry).
static int
walk_scan(Ck *c, const Graph *g, NodeId n, St *st)
{
	int ncarry = (int)ir_attr_int(g, n, "ncarry"), nxs = (int)ir_attr_int(g, n, "nxs");
	const Graph *body = g->sub[ir_attr_int(g, n, "body")];
	const NodeId *in = ir_in(g, n);
	int nin = g->node[n].nin;
	St *bs = arena_alloc_array(c->a, body->nnode, sizeof *bs);
	St *carry = arena_alloc_array(c->a, (size_t)ncarry + 1, sizeof *carry);
	for (int i = 0; i < nin; i++) {
		const St *s = &st[in[i]];
		if (s->kind == S_RED)
			return fail(c, g, n, "a scan takes a %s over the batch as an operand", red_name(s));
		if (i >= ncarry && i < ncarry + nxs && s->kind == S_ROW && s->axis == 0)
			return fail(c, g, n, "the scan steps along the batch axis");
		if (i < ncarry)
			carry[i] = *s;
	}
	// Round 0 lets the carries without rows meet rows, so that a carry
	// such as an RNN's h (zeros, then rows from the first step on) learns
	// its place; every later round is strict.
	uint8_t *lmask = arena_alloc_array(c->a, body->nnode, 1);
	for (int i = 0; i < ncarry; i++)
		lmask[body->input[i].node] = carry[i].kind == S_NONE;
	for (NodeId k = 1; k < body->nnode; k++) // and what they reach
		for (int i = 0; i < body->node[k].nin; i++)
			lmask[k] |= lmask[ir_in1(body, k, i)];
	const Graph *saved_lg = c->lg;
	const uint8_t *saved_lmask = c->lmask;
	for (int round = 0; round <= ncarry + 2; round++) {
		c->lg = round == 0 ? body : saved_lg;
		c->lmask = round == 0 ? lmask : saved_lmask;
		memset(bs, 0, body->nnode * sizeof *bs);
		for (int i = 0; i < nin; i++) {
			St s = i < ncarry ? carry[i] : st[in[i]];
			if (i >= ncarry && i < ncarry + nxs && s.kind == S_ROW)
				s.axis--; // one step of a sequence: time was axis 0
			bs[body->input[i].node] = s;
		}
		int ok = walk(c, body, bs);
		c->lg = saved_lg;
		c->lmask = saved_lmask;
		if (!ok)
			return 0;
		int changed = 0;
		for (int i = 0; i < ncarry; i++) {
			const St *o = &bs[body->out[i].node];
			if (o->kind == S_RED)
				return fail(c, g, n, "the scan's carry %d becomes a %s over the batch", i + 1,
				            red_name(o));
			if (o->kind == carry[i].kind && (o->kind == S_NONE || row_eq(o, &carry[i])))
				continue;
			if (carry[i].kind == S_NONE && o->kind == S_ROW) {
				// Its initial value meets rows from the first step on.
				if (!uniform_along(c, g, in[i], *o, 0))
					return fail(c, g, n,
					            "the scan's carry %d gains the batch on axis %d, but its initial "
					            "value varies along that axis and is not batched",
					            i + 1, o->axis);
				carry[i] = *o;
				changed = 1;
				continue;
			}
			return fail(c, g, n, "the scan's carry %d moves the batch from one step to the next",
			            i + 1);
		}
		if (changed || round == 0)
			continue;
		St *tu = arena_alloc_array(c->a, body->nout, sizeof *tu);
		for (uint32_t k = 0; k < body->nout; k++) {
			tu[k] = k < (uint32_t)ncarry ? carry[k] : bs[body->out[k].node];
			if (k >= (uint32_t)ncarry && tu[k].kind == S_RED)
				return fail(c, g, n, "the scan's output %u is a %s over the batch at every step",
				            k + 1, red_name(&tu[k]));
			if (k >= (uint32_t)ncarry && tu[k].kind == S_ROW)
				tu[k].axis++; // stacked on a new leading axis
		}
		st[n].tuple = tu;
		return 1;
	}
	return fail(c, g, n, "the scan's carries do not settle on batch positions");
}

static int
spread_fail(Ck *c, const Graph *g, const St *r)
{
	char buf[256];
	return fail(c, g, r->spread,
	            "broadcast copies a %s over the batch (%s) along an axis of the batch's size "
	            "(%lld): summed, it counts the reduction once per row",
	            red_name(r), at_str(c, r->at, buf, sizeof buf), (long long)c->n);
}

// A node with a RED operand: only ops linear in it pass, and the result is
// RED of the same kind.  *ok 0 after a failure.
static int
walk_red(Ck *c, const Graph *g, NodeId n, St *st)
{
	const Node *nd = &g->node[n];
	const char *op = ir_op(nd->op)->name;
	char buf[256];
	St r = {0};
	int nred = 0;
	for (int i = 0; i < nd->nin; i++) {
		const St *s = &st[ir_in1(g, n, i)];
		if (s->kind == S_ROW) {
			for (int k = 0; k < nd->nin; k++)
				if (st[ir_in1(g, n, k)].kind == S_RED)
					r = st[ir_in1(g, n, k)];
			return fail(c, g, n, "%s combines per-sample values with a %s over the batch (%s)", op,
			            red_name(&r), at_str(c, r.at, buf, sizeof buf));
		}
		if (s->kind != S_RED)
			continue;
		if (nred && s->red != r.red)
			return fail(c, g, n, "%s combines a mean over the batch (%s) with a sum over it", op,
			            at_str(c, r.red == BATCH_LOSS_MEAN ? r.at : s->at, buf, sizeof buf));
		if (!nred || (s->spread && !r.spread))
			r = *s;
		nred++;
	}
	int linear = 0;
	switch (nd->op) {
	case OP_neg: case OP_add: case OP_sub: case OP_reshape: case OP_broadcast: case OP_permute:
	case OP_slice: case OP_concat: case OP_sum: case OP_mean: case OP_to_host: case OP_to_device:
		linear = 1;
		break;
	case OP_cast:
		linear = ir_dtype_is_float(nd->dtype);
		break;
	case OP_pad:
		linear = ir_attr_float(g, n, "value") == 0;
		break;
	case OP_mul: case OP_matmul: // a reduction times a NONE value
		linear = nred == 1;
		break;
	case OP_div: // a reduction over a NONE value
		linear = st[ir_in1(g, n, 0)].kind == S_RED && st[ir_in1(g, n, 1)].kind == S_NONE;
		break;
	case OP_where: // where(c, a, b) is linear in (a, b) for a fixed c
		linear = st[ir_in1(g, n, 0)].kind == S_NONE;
		break;
	default:
		break;
	}
	if (!linear)
		return fail(c, g, n,
		            "%s is applied to a %s over the batch (%s); only linear ops may follow that "
		            "reduction into the loss",
		            op, red_name(&r), at_str(c, r.at, buf, sizeof buf));
	// Copies of a reduction along an axis as long as the batch, then summed,
	// count it once per row: n Σ_i f_i is no sum over rows (a shard would
	// count its own n_s).  The axis's size is all the graph says, so such a
	// copy is marked, and refused when it is reduced or returned (if it
	// meets per-sample rows first, that is the error).
	if (r.spread && (nd->op == OP_sum || nd->op == OP_mean || nd->op == OP_matmul))
		return spread_fail(c, g, &r);
	st[n] = r;
	st[n].tuple = NULL;
	if (nd->op == OP_broadcast) {
		const Shape *to = ir_shape(g, n), *from = ir_shape(g, ir_in1(g, n, 0));
		for (int j = 0; j < to->rank; j++) {
			int a = j - (to->rank - from->rank);
			if ((a < 0 || from->dim[a] == 1) && to->dim[j] == c->n && !st[n].spread)
				st[n].spread = n;
		}
	}
	return 1;
}

// A reduction (sum, mean, max, min, logsumexp) of a ROW value.
static int
walk_reduce(Ck *c, const Graph *g, NodeId n, const St *x, St *out)
{
	int64_t ax[IR_MAXDIM];
	int na = ir_attr_ints(g, n, "axes", ax);
	int keep = (int)ir_attr_int(g, n, "keepdim"), rank = ir_shape(g, ir_in1(g, n, 0))->rank;
	int before = 0, over = 0;
	for (int i = 0; i < na; i++) {
		int64_t a = ax[i] < 0 ? ax[i] + rank : ax[i];
		over |= a == x->axis;
		before += a < x->axis;
	}
	int op = g->node[n].op;
	if (!over) {
		*out = *x;
		out->axis = (int8_t)(x->axis - (keep ? 0 : before));
		return 1;
	}
	if (op != OP_sum && op != OP_mean)
		return fail(c, g, n, "%s reduces over the batch axis %d", ir_op(op)->name, x->axis);
	*out = (St){.kind = S_RED, .red = op == OP_mean ? BATCH_LOSS_MEAN : BATCH_LOSS_SUM,
	            .at = g->node[n].loc};
	return 1;
}

// Node n with at least one ROW operand and no RED one.
static int
walk_row(Ck *c, const Graph *g, NodeId n, St *st)
{
	const Node *nd = &g->node[n];
	const OpInfo *oi = ir_op(nd->op);
	const char *op = oi->name;
	St r = {0};
	const St *s0 = &st[ir_in1(g, n, 0)];
	if (nd->op == OP_matmul) {
		const St *sb = &st[ir_in1(g, n, 1)];
		int rk = ir_shape(g, n)->rank;
		if (s0->kind == S_ROW && sb->kind == S_ROW && s0->axis == rk - 1 && sb->axis == rk - 2 &&
		    s0->o == sb->o && s0->m == sb->m) {
			// Σ_i a_i b_i: the contraction is a sum over the batch.
			st[n] = (St){.kind = S_RED, .red = BATCH_LOSS_SUM, .at = nd->loc};
			return 1;
		}
	}
	if (!rows_agree(c, g, n, st, &r))
		return 0;
	const Shape *sh0 = ir_shape(g, ir_in1(g, n, 0));
	int64_t v[IR_MAXDIM], w[IR_MAXDIM], u[IR_MAXDIM];
	St *out = &st[n];
	if (oi->flags & F_RANDOM)
		return fail(c, g, n,
		            "%s draws per element of the whole batch: a shard would draw other numbers",
		            op);
	if ((oi->flags & F_ELEMWISE) || nd->op == OP_cast || nd->op == OP_where || nd->op == OP_not ||
	    (oi->flags & F_PLACE)) {
		if (!none_uniform(c, g, n, st, &r))
			return 0;
		*out = r;
		return 1;
	}
	switch (nd->op) {
	case OP_sum: case OP_mean: case OP_max: case OP_min: case OP_logsumexp:
		return walk_reduce(c, g, n, s0, out);
	case OP_argmax: {
		int64_t a = ir_attr_int(g, n, "axis");
		if (a < 0)
			a += sh0->rank;
		if (a == r.axis)
			return fail(c, g, n, "argmax picks a row of the batch axis %d", r.axis);
		*out = r;
		if (a < r.axis && !ir_attr_int(g, n, "keepdim"))
			out->axis--;
		return 1;
	}
	case OP_reshape:
		if (!reshape_row(sh0, &r, ir_shape(g, n), c->n, out))
			return fail(c, g, n, "reshape splits the batch axis %d across axes", r.axis);
		return 1;
	case OP_broadcast:
		*out = r;
		out->axis = (int8_t)(r.axis + ir_shape(g, n)->rank - sh0->rank);
		return 1;
	case OP_permute:
		ir_attr_ints(g, n, "perm", v);
		*out = r;
		for (int i = 0; i < sh0->rank; i++)
			if (v[i] == r.axis)
				out->axis = (int8_t)i;
		return 1;
	case OP_slice:
	case OP_slice_update: {
		ir_attr_ints(g, n, "start", v);
		ir_attr_ints(g, n, "end", w);
		ir_attr_ints(g, n, "step", u);
		int64_t len = sh0->dim[r.axis];
		if (v[r.axis] != 0 || w[r.axis] < len || u[r.axis] != 1)
			return fail(c, g, n,
			            "%s takes rows %lld:%lld:%lld of the batch axis %d (of %lld): a shard "
			            "holds other rows",
			            op, (long long)v[r.axis], (long long)w[r.axis], (long long)u[r.axis],
			            r.axis, (long long)len);
		if (nd->op == OP_slice_update && !none_uniform(c, g, n, st, &r))
			return 0;
		*out = r;
		return 1;
	}
	case OP_pad:
		ir_attr_ints(g, n, "before", v);
		ir_attr_ints(g, n, "after", w);
		if (v[r.axis] || w[r.axis])
			return fail(c, g, n, "pad adds rows to the batch axis %d", r.axis);
		*out = r;
		return 1;
	case OP_concat:
		if (ir_attr_int(g, n, "axis") == r.axis)
			return fail(c, g, n, "concat joins values along the batch axis %d", r.axis);
		if (!none_uniform(c, g, n, st, &r))
			return 0;
		*out = r;
		return 1;
	case OP_one_hot:
		*out = r;
		return 1;
	case OP_matmul: {
		const St *sb = &st[ir_in1(g, n, 1)];
		int rk = sh0->rank;
		if (r.axis < rk - 2) { // a batch axis of the product
			if (!none_uniform(c, g, n, st, &r))
				return 0;
			*out = r;
			return 1;
		}
		if (s0->kind == S_ROW && sb->kind == S_NONE && s0->axis == rk - 2) {
			*out = r; // rows of a times b
			return 1;
		}
		if (s0->kind == S_NONE && sb->kind == S_ROW && sb->axis == rk - 1) {
			*out = r; // a times columns of b
			return 1;
		}
		return fail(c, g, n, "matmul contracts or crosses the batch axis with values of other rows");
	}
	case OP_conv: case OP_max_pool: case OP_avg_pool: case OP_adaptive_avg_pool:
	case OP_upsample_bilinear:
		if (s0->kind != S_ROW || s0->axis != 0 || (nd->nin > 1 && st[ir_in1(g, n, 1)].kind != S_NONE))
			return fail(c, g, n, "%s keeps rows apart only on axis 0 of its input (the batch is on "
			            "axis %d%s)", op, r.axis, s0->kind == S_ROW ? "" : " of its weight");
		*out = r;
		return 1;
	case OP_take: {
		int64_t a = ir_attr_int(g, n, "axis");
		const St *si = &st[ir_in1(g, n, 1)];
		int ri = ir_shape(g, ir_in1(g, n, 1))->rank;
		if (s0->kind == S_NONE) { // rows of the index pick rows of a table
			*out = *si;
			out->axis = (int8_t)(a + si->axis);
			return 1;
		}
		if (si->kind == S_NONE && s0->axis != a) {
			*out = *s0;
			if (s0->axis > a)
				out->axis = (int8_t)(s0->axis - 1 + ri);
			return 1;
		}
		return fail(c, g, n, "take picks along the batch axis %d", r.axis);
	}
	case OP_take_along:
		if (ir_attr_int(g, n, "axis") == r.axis)
			return fail(c, g, n, "take_along picks along the batch axis %d", r.axis);
		if (!none_uniform(c, g, n, st, &r))
			return 0;
		*out = r;
		return 1;
	case OP_scan:
		return walk_scan(c, g, n, st);
	case OP_get: {
		const St *tu = s0->tuple;
		FADC_ASSERT(tu, "get of a value that is no scan's tuple");
		*out = tu[ir_attr_int(g, n, "index")];
		return 1;
	}
	default:
		return fail(c, g, n, "%s is not known to keep the rows of the batch apart", op);
	}
}

// st[] holds the inputs' states; fills every node's.
static int
walk(Ck *c, const Graph *g, St *st)
{
	for (NodeId n = 1; n < g->nnode; n++) {
		const Node *nd = &g->node[n];
		if (nd->op == OP_input)
			continue;
		int row = 0, red = 0;
		for (int i = 0; i < nd->nin; i++) {
			const St *s = &st[ir_in1(g, n, i)];
			row |= s->kind == S_ROW || (s->tuple && nd->op == OP_get);
			red |= s->kind == S_RED;
		}
		if (nd->op == OP_scan) {
			if (!walk_scan(c, g, n, st))
				return 0;
			continue;
		}
		if (red && !walk_red(c, g, n, st))
			return 0;
		if (!red && row && !walk_row(c, g, n, st))
			return 0;
	}
	return 1;
}

int
pass_batch_check(const Graph *f, const Batch *b, Loc *errloc, char *err, size_t errlen)
{
	*errloc = 0;
	// With one row (or none) there is nothing to mix; the tracking of
	// merged axes also needs n >= 2 to tell the batch from a size-1 axis.
	if (!b->nin || b->size < 2)
		return 1;
	Ck c = {f->src, b, b->size, arena_new(), errloc, err, errlen, NULL, NULL};
	St *st = arena_alloc_array(c.a, f->nnode, sizeof *st);
	for (uint32_t i = 0; i < b->nin; i++)
		for (uint32_t k = 0; k < f->ninput; k++)
			if (!strcmp(f->input[k].name, b->in[i].name))
				st[f->input[k].node] = (St){.kind = S_ROW, .axis = (int8_t)b->in[i].axis, .o = 1,
				                            .m = 1};
	int ok = walk(&c, f, st);
	for (uint32_t k = 0; ok && k < f->nout; k++) {
		NodeId o = f->out[k].node;
		const St *s = &st[o];
		char decl[256];
		ir_loc_str(f->src, b->loc, 0, decl, sizeof decl);
		if (s->kind == S_ROW) {
			ir_errf(err, errlen,
			        "output '%s' keeps the batch axis (on its axis %d): the loss declared at %s must "
			        "be a %s over it",
			        f->out[k].name, s->axis, decl, b->loss == BATCH_LOSS_SUM ? "sum" : "mean");
			*errloc = f->node[o].loc;
			ok = 0;
		} else if (s->kind == S_RED && s->spread) {
			ok = spread_fail(&c, f, s);
		} else if (s->kind == S_RED && s->red != b->loss) {
			ir_errf(err, errlen, "output '%s' is a %s over the batch, but the loss declared at %s is "
			        "a %s%s", f->out[k].name, red_name(s), decl, b->loss == BATCH_LOSS_SUM ? "sum" : "mean",
			        s->red == BATCH_LOSS_SUM ? " (a sum divided by the batch size is a sum to the check, "
			        "and each shard would divide by its own size: write mean(...))" : "");
			*errloc = f->node[o].loc;
			ok = 0;
		}
	}
	arena_free(c.a);
	return ok;
}
