// ir/graph.c -- the graph builder, shape interning, attributes, source map.
//
// The builder only appends, and checks every node it appends (arity,
// attribute kinds, the op's shape rule), so a graph built here is valid by
// construction and node ids are a topological order.  Attributes are
// encoded into the graph's int64 pool in the order of the op's spec:
// int, dtype, enum and body take one slot, float one slot (its bits), ints
// a count and then the values.
#include <string.h>

#include "ir.h"

SrcMap *
ir_srcmap_new(void)
{
	Arena *a = arena_new();
	SrcMap *s = arena_zalloc(a, sizeof *s);
	s->arena = a;
	arena_grow(a, (void **)&s->loc, &s->cloc, 1, sizeof *s->loc);
	s->nloc = 1;
	return s;
}

void
ir_srcmap_free(SrcMap *s)
{
	if (s)
		arena_free(s->arena);
}

uint32_t
ir_srcmap_add_file(SrcMap *s, const char *name, const char *text, size_t len)
{
	arena_grow(s->arena, (void **)&s->file, &s->cfile, s->nfile + 1, sizeof *s->file);
	SrcFile *f = &s->file[s->nfile];
	f->name = arena_strdup(s->arena, name);
	f->text = arena_strndup(s->arena, text, len);
	f->len = len;
	return s->nfile++;
}

Loc
ir_srcmap_loc(SrcMap *s, uint32_t file, uint32_t line, uint32_t col)
{
	arena_grow(s->arena, (void **)&s->loc, &s->cloc, s->nloc + 1, sizeof *s->loc);
	s->loc[s->nloc] = (SrcLoc){file, line, col, 0};
	return s->nloc++;
}

Loc
ir_srcmap_loc_call(SrcMap *s, Loc loc, Loc call)
{
	FADC_ASSERT(loc && loc < s->nloc && !s->loc[loc].call, "ir_srcmap_loc_call: a position to copy");
	Loc r = ir_srcmap_loc(s, s->loc[loc].file, s->loc[loc].line, s->loc[loc].col);
	s->loc[r].call = call;
	return r;
}

static void
loc_put(const SrcMap *s, Loc loc, char *buf, size_t n)
{
	const SrcLoc *l = &s->loc[loc];
	snprintf(buf, n, "%s:%u:%u", l->file < s->nfile ? s->file[l->file].name : "?", l->line, l->col);
}

void
ir_loc_str(const SrcMap *s, Loc loc, int withcall, char *buf, size_t n)
{
	if (!n)
		return;
	buf[0] = 0;
	if (!s || !loc || loc >= s->nloc)
		return;
	loc_put(s, loc, buf, n);
	Loc c = s->loc[loc].call;
	size_t k = strlen(buf);
	if (withcall && c && c < s->nloc && k + 14 < n) {
		memcpy(buf + k, ", called from ", 14);
		loc_put(s, c, buf + k + 14, n - k - 14);
	}
}

// FNV-1a 64, the artifact format's hash (art_fnv1a64 of runtime/artifact.c,
// which ir cannot call: the runtime is no layer below ir).
static uint64_t
fnv1a64(uint64_t h, const void *p, size_t n)
{
	const unsigned char *b = p;
	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 0x100000001b3ull;
	return h;
}

uint64_t
ir_srcmap_hash(const SrcMap *s)
{
	uint64_t h = 0xcbf29ce484222325ull;
	for (uint32_t i = 0; s && i < s->nfile; i++) {
		h = fnv1a64(h, s->file[i].name, strlen(s->file[i].name) + 1);
		h = fnv1a64(h, s->file[i].text, s->file[i].len);
	}
	return h;
}

Graph *
ir_graph_new(const char *name, SrcMap *src)
{
	Arena *a = arena_new();
	Graph *g = arena_zalloc(a, sizeof *g);
	g->arena = a;
	g->name = arena_strdup(a, name ? name : "graph");
	g->src = src;
	arena_grow(a, (void **)&g->node, &g->cnode, 64, sizeof *g->node);
	g->nnode = 1; // node 0 is the null node
	// Never NULL, so that ir_in() of a node without operands is a valid
	// (empty) range.
	arena_grow(a, (void **)&g->edge, &g->cedge, 16, sizeof *g->edge);
	arena_grow(a, (void **)&g->attr, &g->cattr, 64, sizeof *g->attr);
	g->nattr = 1;
	arena_grow(a, (void **)&g->shape, &g->cshape, 16, sizeof *g->shape);
	g->nshape = 1;
	return g;
}

void
ir_graph_free(Graph *g)
{
	if (!g)
		return;
	for (uint32_t i = 0; i < g->nsub; i++)
		ir_graph_free(g->sub[i]);
	arena_free(g->arena);
}

// The element count, saturating at INT64_MAX instead of overflowing; shape
// rules refuse results that large (ir_build checks every result).
int64_t
ir_numel(const Shape *s)
{
	int64_t n = 1;
	for (int i = 0; i < s->rank; i++)
		if (__builtin_mul_overflow(n, s->dim[i], &n))
			return INT64_MAX;
	return n;
}

int
ir_shape_eq(const Shape *a, const Shape *b)
{
	if (a->rank != b->rank)
		return 0;
	for (int i = 0; i < a->rank; i++)
		if (a->dim[i] != b->dim[i])
			return 0;
	return 1;
}

static uint32_t
shape_hash(const Shape *s)
{
	uint64_t h = 1469598103934665603ull ^ (uint64_t)s->rank;
	for (int i = 0; i < s->rank; i++)
		h = (h ^ (uint64_t)s->dim[i]) * 1099511628211ull;
	return (uint32_t)(h ^ (h >> 32));
}

ShapeId
ir_shape_intern(Graph *g, const Shape *s)
{
	FADC_ASSERT(s->rank >= 0 && s->rank <= IR_MAXDIM, "rank out of range");
	if (g->nshape * 2 >= g->cshash) {
		uint32_t cap = g->cshash ? g->cshash * 2 : 64;
		g->shash = arena_alloc_array(g->arena, cap, sizeof *g->shash);
		g->cshash = cap;
		for (uint32_t id = 1; id < g->nshape; id++) {
			uint32_t h = shape_hash(&g->shape[id]) & (cap - 1);
			while (g->shash[h])
				h = (h + 1) & (cap - 1);
			g->shash[h] = id;
		}
	}
	Shape c = {.rank = s->rank};
	memcpy(c.dim, s->dim, sizeof(int64_t) * (size_t)s->rank);
	uint32_t h = shape_hash(&c) & (g->cshash - 1);
	for (; g->shash[h]; h = (h + 1) & (g->cshash - 1))
		if (ir_shape_eq(&g->shape[g->shash[h]], &c))
			return g->shash[h];
	arena_grow(g->arena, (void **)&g->shape, &g->cshape, g->nshape + 1, sizeof *g->shape);
	g->shape[g->nshape] = c;
	g->shash[h] = g->nshape;
	return g->nshape++;
}

static uint32_t
attrs_encode(Graph *g, int op, const Attrs *a)
{
	const OpInfo *oi = ir_op(op);
	if (!oi->nattr)
		return 0;
	uint32_t need = 0;
	for (int i = 0; i < oi->nattr; i++)
		need += oi->attr[i].kind == AK_INTS ? 1 + (uint32_t)a->a[i].n
		        : oi->attr[i].kind == AK_FLOAT ? 2 : 1;
	arena_grow(g->arena, (void **)&g->attr, &g->cattr, g->nattr + need, sizeof *g->attr);
	uint32_t off = g->nattr;
	int64_t *p = g->attr + off;
	for (int i = 0; i < oi->nattr; i++) {
		const AttrVal *v = &a->a[i];
		switch (oi->attr[i].kind) {
		case AK_FLOAT: // the double, then its exact integer (ir.h, AttrVal)
			memcpy(p++, &v->f, sizeof(double));
			*p++ = (double)v->i == v->f ? v->i : ir_float_int(v->f);
			break;
		case AK_INTS:
			*p++ = v->n;
			for (int k = 0; k < v->n; k++)
				*p++ = v->v[k];
			break;
		default:
			*p++ = v->i;
		}
	}
	g->nattr += need;
	return off;
}

void
ir_attrs_get(const Graph *g, NodeId n, Attrs *a)
{
	const Node *nd = &g->node[n];
	const OpInfo *oi = ir_op(nd->op);
	memset(a, 0, sizeof *a);
	if (!nd->attr) {
		ir_attrs_default(nd->op, a);
		return;
	}
	const int64_t *p = g->attr + nd->attr;
	for (int i = 0; i < oi->nattr; i++) {
		AttrVal *v = &a->a[i];
		switch (oi->attr[i].kind) {
		case AK_FLOAT:
			memcpy(&v->f, p++, sizeof(double));
			v->i = *p++;
			break;
		case AK_INTS:
			v->n = (int)*p++;
			for (int k = 0; k < v->n; k++)
				v->v[k] = *p++;
			break;
		default:
			v->i = *p++;
		}
	}
}

int64_t
ir_float_int(double v)
{
	if (v != v)
		return 0;
	if (v >= 9223372036854775808.0) // 2^63
		return INT64_MAX;
	if (v < -9223372036854775808.0)
		return INT64_MIN;
	return (int64_t)v;
}

static int
attr_slot(const Graph *g, NodeId n, const char *name)
{
	int i = ir_attr_index(g->node[n].op, name);
	FADC_ASSERT(i >= 0, name);
	return i;
}

int64_t
ir_attr_int(const Graph *g, NodeId n, const char *name)
{
	Attrs a;
	ir_attrs_get(g, n, &a);
	return a.a[attr_slot(g, n, name)].i;
}

double
ir_attr_float(const Graph *g, NodeId n, const char *name)
{
	Attrs a;
	ir_attrs_get(g, n, &a);
	return a.a[attr_slot(g, n, name)].f;
}

int
ir_attr_ints(const Graph *g, NodeId n, const char *name, int64_t v[IR_MAXDIM])
{
	Attrs a;
	ir_attrs_get(g, n, &a);
	const AttrVal *x = &a.a[attr_slot(g, n, name)];
	memcpy(v, x->v, sizeof(int64_t) * (size_t)x->n);
	return x->n;
}

NodeId
ir_build(Graph *g, int op, const NodeId *in, int nin, const Attrs *a, Loc loc, char *err,
         size_t errlen)
{
	const OpInfo *oi = ir_op(op);
	Attrs def;
	if (!a) {
		ir_attrs_default(op, &def);
		a = &def;
	}
	if (oi->arity >= 0 && nin != oi->arity) {
		snprintf(err, errlen, "%s takes %d operand%s, got %d", oi->name, oi->arity,
		         oi->arity == 1 ? "" : "s", nin);
		return 0;
	}
	if (oi->arity < 0 && nin < 1) {
		snprintf(err, errlen, "%s needs at least one operand", oi->name);
		return 0;
	}
	if (nin > 255) {
		snprintf(err, errlen, "%s: too many operands (%d, at most 255)", oi->name, nin);
		return 0;
	}
	for (int i = 0; i < nin; i++)
		FADC_ASSERT(in[i] > 0 && in[i] < g->nnode, "operand is not a node of this graph");
	for (int i = 0; i < oi->nattr; i++) {
		const AttrVal *v = &a->a[i];
		if (oi->attr[i].kind == AK_INTS && (v->n < 0 || v->n > IR_MAXDIM)) {
			snprintf(err, errlen, "%s: attribute '%s' has %d values (at most %d)", oi->name,
			         oi->attr[i].name, v->n, IR_MAXDIM);
			return 0;
		}
		if (oi->attr[i].kind == AK_BODY && (v->i < 0 || (uint64_t)v->i >= g->nsub)) {
			snprintf(err, errlen, "%s: no such body", oi->name);
			return 0;
		}
		if (oi->attr[i].kind == AK_DTYPE && (v->i <= DT_NONE || v->i >= DT_TUPLE)) {
			snprintf(err, errlen, "%s: attribute '%s' is not a dtype", oi->name,
			         oi->attr[i].name);
			return 0;
		}
	}
	Shape s = {0};
	DType dt = DT_NONE;
	if (!oi->shape(g, op, in, nin, a, &s, &dt, err, errlen))
		return 0;
	for (int i = 0; i < s.rank; i++)
		if (s.dim[i] < 0) {
			snprintf(err, errlen, "%s: negative dimension in result", oi->name);
			return 0;
		}
	// 2^62 elements: beyond any memory, and products of two counts stay in range.
	if (ir_numel(&s) > ((int64_t)1 << 62)) {
		snprintf(err, errlen, "%s: result has too many elements", oi->name);
		return 0;
	}
	arena_grow(g->arena, (void **)&g->edge, &g->cedge, g->nedge + (uint32_t)nin, sizeof *g->edge);
	arena_grow(g->arena, (void **)&g->node, &g->cnode, g->nnode + 1, sizeof *g->node);
	Node *nd = &g->node[g->nnode];
	nd->op = (uint16_t)op;
	nd->dtype = (uint8_t)dt;
	nd->nin = (uint8_t)nin;
	nd->in = g->nedge;
	if (nin)
		memcpy(g->edge + g->nedge, in, sizeof(NodeId) * (size_t)nin);
	g->nedge += (uint32_t)nin;
	nd->shape = ir_shape_intern(g, &s);
	nd->attr = attrs_encode(g, op, a);
	nd->loc = loc;
	return g->nnode++;
}

NodeId
ir_emit(Graph *g, int op, const NodeId *in, int nin, const Attrs *a, Loc loc)
{
	char err[256];
	NodeId n = ir_build(g, op, in, nin, a, loc, err, sizeof err);
	FADC_ASSERT(n, err);
	return n;
}

NodeId
ir_add_input(Graph *g, const char *name, InputKind kind, DType dt, const Shape *s, Loc loc)
{
	arena_grow(g->arena, (void **)&g->input, &g->cinput, g->ninput + 1, sizeof *g->input);
	Attrs a;
	ir_attrs_default(OP_input, &a);
	a.a[0].i = g->ninput;
	// The input rule reads its type from g->input[index], so record it first.
	Input *in = &g->input[g->ninput];
	in->name = arena_strdup(g->arena, name);
	in->kind = kind;
	in->node = 0;
	g->ninput++;
	// Shape and dtype are stashed in a node-less side table: build the node
	// by hand (input nodes have no operands and their rule only checks).
	arena_grow(g->arena, (void **)&g->node, &g->cnode, g->nnode + 1, sizeof *g->node);
	Node *nd = &g->node[g->nnode];
	memset(nd, 0, sizeof *nd);
	nd->op = OP_input;
	nd->dtype = (uint8_t)dt;
	nd->in = g->nedge;
	nd->shape = ir_shape_intern(g, s);
	nd->attr = attrs_encode(g, OP_input, &a);
	nd->loc = loc;
	in->node = g->nnode;
	return g->nnode++;
}

void
ir_add_output(Graph *g, NodeId n, const char *name, int writeback)
{
	FADC_ASSERT(n > 0 && n < g->nnode, "output is not a node of this graph");
	arena_grow(g->arena, (void **)&g->out, &g->cout, g->nout + 1, sizeof *g->out);
	g->out[g->nout++] = (Output){n, arena_strdup(g->arena, name), writeback};
}

uint32_t
ir_add_sub(Graph *g, Graph *sub)
{
	arena_grow(g->arena, (void **)&g->sub, &g->csub, g->nsub + 1, sizeof *g->sub);
	g->sub[g->nsub] = sub;
	return g->nsub++;
}
