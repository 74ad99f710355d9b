// ir/print.c -- the canonical printer.
//
// Its output is the golden-file format and parses back to the same graph:
// every node is one line `%id = op(operands, attr=value, ...)` in id order,
// every attribute is printed by name unless it has its default value,
// inputs print by name, floats in the shortest form that reads back to the
// same double.  Initializers print as one nested expression when they are
// trees, else as a block.  Bodies of scans print as functions before the
// graph that uses them.
#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ir.h"

void
ir_print_float(char *buf, size_t n, double v)
{
	if (isnan(v)) {
		snprintf(buf, n, "nan");
		return;
	}
	if (isinf(v)) {
		snprintf(buf, n, v > 0 ? "inf" : "-inf");
		return;
	}
	// A float with an integral value prints without a point or exponent
	// ("10", "-100000000"), and reads back as an integer, which float
	// attributes accept.
	if (v == 0 && signbit(v)) { // "-0" would read back as the integer 0
		snprintf(buf, n, "-0.0");
		return;
	}
	if (v == floor(v) && fabs(v) < 1e15) {
		snprintf(buf, n, "%.0f", v);
		return;
	}
	for (int prec = 1; prec <= 17; prec++) {
		snprintf(buf, n, "%.*g", prec, v);
		if (strtod(buf, NULL) == v)
			break;
	}
}

// Printed numbers: inputs first (as the parser creates them), then the
// other nodes in id order, so that a graph whose inputs were added after
// some nodes (a task's v) prints as its reparse will.  num[n] is node n's
// number; NULL prints raw ids.
static uint32_t *
print_numbers(const Graph *g)
{
	uint32_t *num = calloc(g->nnode + 1, sizeof *num);
	if (!num)
		return NULL;
	uint32_t k = g->ninput;
	for (NodeId n = 1; n < g->nnode; n++)
		num[n] = g->node[n].op == OP_input ? 0 : ++k;
	return num;
}

// Is name one the lexer reads as a plain name (frontend/lex.c): a letter
// or '_', then name characters, dots only between name characters (and
// only where dots may be: not in an argument's name of forward, which the
// parser refuses dotted), and not a reserved word?  Every other name prints quoted.
static int
is_plain_name(const char *s, int dots)
{
	static const char *const reserved[] = {"let", "param", "const", "def", "return", "as", "true",
	                                       "false", NULL};
	for (int i = 0; reserved[i]; i++)
		if (!strcmp(s, reserved[i]))
			return 0;
	if (!(isalpha((unsigned char)s[0]) || s[0] == '_'))
		return 0;
	for (const char *c = s; *c; c++) {
		if (*c == '.' && dots && c[1] && (isalnum((unsigned char)c[1]) || c[1] == '_'))
			continue;
		if (!(isalnum((unsigned char)*c) || *c == '_'))
			return 0;
	}
	return 1;
}

// A name as the frontend reads it back: plain, or quoted ("0.weight") with
// '"' and '\\' escaped.  The frontend refuses control characters in names,
// so the IR holds none (an importer checks its names the same way).
void
ir_print_quoted(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			fputc('\\', f);
		fputc(*s, f);
	}
	fputc('"', f);
}

static void
print_name(FILE *f, const char *s, int dots)
{
	if (is_plain_name(s, dots))
		fputs(s, f);
	else
		ir_print_quoted(f, s);
}

static void
print_ref(FILE *f, const Graph *g, NodeId n, const uint32_t *num, int qa)
{
	const Node *nd = &g->node[n];
	if (nd->op == OP_input) {
		Attrs a;
		ir_attrs_get(g, n, &a);
		print_name(f, g->input[a.a[0].i].name, !qa || g->input[a.a[0].i].kind != IN_ARG);
	} else
		fprintf(f, "%%%u", num ? num[n] : n);
}

static void
print_type(FILE *f, DType t, const Shape *s)
{
	char buf[256];
	ir_type_str(t, s, buf, sizeof buf);
	fputs(buf, f);
}

static int
attr_is_default(const AttrSpec *s, const AttrVal *v)
{
	if (!s->has_default)
		return 0;
	switch (s->kind) {
	case AK_FLOAT: // -0.0 is not the default 0: its sign must print
		return (isnan(v->f) && isnan(s->def.f)) ||
		       (v->f == s->def.f && signbit(v->f) == signbit(s->def.f));
	case AK_INTS:
		return v->n == s->def.n && !memcmp(v->v, s->def.v, sizeof(int64_t) * (size_t)v->n);
	default:
		return v->i == s->def.i;
	}
}

static void
print_attrs(FILE *f, const Graph *g, NodeId n, int first, DType ctx)
{
	const Node *nd = &g->node[n];
	const OpInfo *oi = ir_op(nd->op);
	Attrs a;
	ir_attrs_get(g, n, &a);
	for (int i = 0; i < oi->nattr; i++) {
		const AttrSpec *s = &oi->attr[i];
		const AttrVal *v = &a.a[i];
		if (s->kind == AK_BODY)
			continue;
		// In an initializer of a float declaration, a factory's dtype
		// defaults to the declaration's (the parser's rule): print it when
		// it differs from that, rather than from the table's default.
		if (s->kind == AK_DTYPE && (oi->flags & F_FACTORY) && ir_dtype_is_float(ctx)) {
			if (v->i == ctx)
				continue;
		} else if (attr_is_default(s, v))
			continue;
		fprintf(f, "%s%s=", first ? "" : ", ", s->name);
		first = 0;
		char buf[64];
		switch (s->kind) {
		case AK_INT:
			fprintf(f, "%lld", (long long)v->i);
			break;
		case AK_FLOAT:
			// An i64 node's number is its exact integer (full(value=
			// 9223372036854775807, dtype=i64)): the double would print
			// 9.223372036854776e+18, which reads back as 2^63.
			if (nd->dtype == DT_I64 && (double)v->i == v->f)
				fprintf(f, "%lld", (long long)v->i);
			else {
				ir_print_float(buf, sizeof buf, v->f);
				fputs(buf, f);
			}
			break;
		case AK_INTS:
			fputc('[', f);
			for (int k = 0; k < v->n; k++)
				fprintf(f, "%s%lld", k ? ", " : "", (long long)v->v[k]);
			fputc(']', f);
			break;
		case AK_DTYPE:
			fputs(ir_dtype_name((DType)v->i), f);
			break;
		case AK_ENUM:
			fputs(v->i >= 0 && v->i < s->nenum ? s->enums[v->i] : "?", f);
			break;
		case AK_BODY:
			break;
		}
	}
}

// op(operands, attrs); operands printed by `ref` (a name, or nested).
static void print_nested(FILE *f, const Graph *g, NodeId n, DType ctx, int qa);

static void
print_call(FILE *f, const Graph *g, NodeId n, int nested, const uint32_t *num, DType ctx, int qa)
{
	const Node *nd = &g->node[n];
	const OpInfo *oi = ir_op(nd->op);
	fprintf(f, "%s(", oi->name);
	int first = 1;
	if (nd->op == OP_scan) {
		Attrs a;
		ir_attrs_get(g, n, &a);
		fputs(g->sub[a.a[0].i]->name, f);
		first = 0;
	}
	for (int i = 0; i < nd->nin; i++) {
		if (!first)
			fputs(", ", f);
		first = 0;
		if (nested)
			print_nested(f, g, ir_in1(g, n, i), ctx, qa);
		else
			print_ref(f, g, ir_in1(g, n, i), num, qa);
	}
	print_attrs(f, g, n, first, ctx);
	fputc(')', f);
}

static void
print_nested(FILE *f, const Graph *g, NodeId n, DType ctx, int qa)
{
	if (g->node[n].op == OP_input)
		print_ref(f, g, n, NULL, qa);
	else
		print_call(f, g, n, 1, NULL, ctx, qa);
}

static void
print_body(FILE *f, const Graph *g, DType ctx, int qa)
{
	uint32_t *num = print_numbers(g);
	for (NodeId n = 1; n < g->nnode; n++) {
		if (g->node[n].op == OP_input)
			continue;
		fprintf(f, "  %%%u = ", num ? num[n] : n);
		print_call(f, g, n, 0, num, ctx, qa);
		fputc('\n', f);
	}
	fputs("  return ", f);
	for (uint32_t i = 0; i < g->nout; i++) {
		const Output *o = &g->out[i];
		if (i)
			fputs(", ", f);
		print_ref(f, g, o->node, num, qa);
		fputs(o->writeback >= 0 ? " -> " : " as ", f);
		if (o->writeback >= 0)
			print_name(f, g->input[o->writeback].name, !qa || g->input[o->writeback].kind != IN_ARG);
		else
			print_name(f, o->name, 1);
	}
	fputc('\n', f);
	free(num);
}

static void
print_signature(FILE *f, const Graph *g, const char *fname, int qa)
{
	fprintf(f, "def %s(", fname);
	int first = 1;
	for (uint32_t i = 0; i < g->ninput; i++) {
		if (g->input[i].kind != IN_ARG)
			continue;
		const Node *nd = &g->node[g->input[i].node];
		fputs(first ? "" : ", ", f);
		print_name(f, g->input[i].name, !qa);
		fputs(": ", f);
		first = 0;
		print_type(f, (DType)nd->dtype, &g->shape[nd->shape]);
	}
	fputs(") -> ", f);
	if (g->nout != 1)
		fputc('(', f);
	for (uint32_t i = 0; i < g->nout; i++) {
		const Node *nd = &g->node[g->out[i].node];
		if (i)
			fputs(", ", f);
		print_type(f, (DType)nd->dtype, &g->shape[nd->shape]);
	}
	if (g->nout != 1)
		fputc(')', f);
	fputs(" {\n", f);
}

static void
print_subs(FILE *f, const Graph *g)
{
	for (uint32_t i = 0; i < g->nsub; i++) {
		print_subs(f, g->sub[i]);
		print_signature(f, g->sub[i], g->sub[i]->name, 0);
		print_body(f, g->sub[i], DT_NONE, 0);
		fputs("}\n\n", f);
	}
}

void
ir_print_graph(FILE *f, const Graph *g, const char *fname)
{
	print_subs(f, g);
	// Only forward's printed form parses back, and the parser refuses a
	// dotted argument name unless it is quoted: a task's inputs (v.w) print
	// plain, as they always have.
	fname = fname ? fname : g->name;
	int qa = !strcmp(fname, "forward");
	print_signature(f, g, fname, qa);
	print_body(f, g, DT_NONE, qa);
	fputs("}\n", f);
}

// Is the initializer a tree with one output (so that it prints as one
// nested expression)?
static int
is_tree(const Graph *g)
{
	if (g->nout != 1 || g->nsub)
		return 0;
	uint32_t *uses = calloc(g->nnode, sizeof *uses);
	if (!uses)
		return 0;
	int tree = 1;
	for (NodeId n = 1; n < g->nnode; n++)
		for (int i = 0; i < g->node[n].nin; i++)
			if (g->node[ir_in1(g, n, i)].op != OP_input && ++uses[ir_in1(g, n, i)] > 1)
				tree = 0;
	for (NodeId n = 1; n < g->nnode && tree; n++)
		if (g->node[n].op != OP_input && n != g->out[0].node && !uses[n])
			tree = 0; // a dead node would be lost
	free(uses);
	return tree;
}

// The header comment, the sizes and the declarations of a module.
static void
print_decls(FILE *f, const Module *m)
{
	fprintf(f, "# fadc canonical IR of %s\n", m->name);
	if (m->nsize) {
		fputs("# sizes:", f);
		for (uint32_t i = 0; i < m->nsize; i++)
			fprintf(f, "%s %s = %lld", i ? "," : "", m->size[i].name, (long long)m->size[i].value);
		fputc('\n', f);
	}
	for (uint32_t i = 0; i < m->ntasks; i++)
		fprintf(f, "%s%s%s", i ? ", " : "tasks ", m->tasks[i], i + 1 == m->ntasks ? "\n" : "");
	for (uint32_t i = 0; i < m->batch.nin; i++) {
		fputs(i ? ", " : "batch ", f);
		// A declaration's name may be dotted; an argument's may not.
		print_name(f, m->batch.in[i].name, ir_module_find_decl(m, m->batch.in[i].name) >= 0);
		fprintf(f, ": %d", m->batch.in[i].axis);
		if (i + 1 == m->batch.nin)
			fprintf(f, ", loss %s\n", m->batch.loss == BATCH_LOSS_SUM ? "sum" : "mean");
	}
	for (uint32_t i = 0; i < m->ndecl; i++) {
		const Decl *d = &m->decl[i];
		if (d->init)
			print_subs(f, d->init);
		fputs(d->kind == DECL_PARAM ? "param " : "const ", f);
		print_name(f, d->name, 1);
		fputs(": ", f);
		print_type(f, d->dtype, &d->shape);
		if (d->init) {
			fputs(" = ", f);
			if (is_tree(d->init)) {
				print_nested(f, d->init, d->init->out[0].node, d->dtype, 0);
				fputc('\n', f);
			} else {
				fputs("{\n", f);
				print_body(f, d->init, d->dtype, 0);
				fputs("}\n", f);
			}
		} else
			fputc('\n', f);
	}
}

void
ir_print_module(FILE *f, const Module *m)
{
	print_decls(f, m);
	if (m->main) {
		fputc('\n', f);
		ir_print_graph(f, m->main, "forward");
	}
}

void
ir_print_module_task(FILE *f, const Module *m, const Graph *g, const char *name)
{
	print_decls(f, m);
	fputc('\n', f);
	ir_print_graph(f, g, name);
}
