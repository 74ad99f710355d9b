// ir/ops.c -- the op table as data: names, arities, flags, attribute specs
// and shape rules, read from ops.def (rows: UNARY UNARYA BINARY CMP OTHER).
//
// Attribute specs are strings in ops.def ("stride:ints padding:ints=0,0");
// they are parsed once, on first use, into AttrSpec arrays.  A malformed
// spec is a bug in ops.def and aborts with the row's name.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ir.h"

typedef struct Row {
	const char *name;
	int arity;
	uint32_t flags;
	const char *attrs;
	ShapeRule shape;
} Row;

// clang-format off
static const Row rows[OP_COUNT] = {
#define UNARY(n, fl, ...)          [OP_##n] = {#n, 1, (fl) | F_ELEMWISE, "", shape_elemwise},
#define UNARYA(n, fl, cost, at, ...) [OP_##n] = {#n, 1, (fl) | F_ELEMWISE, at, shape_elemwise},
#define BINARY(n, fl, ...)         [OP_##n] = {#n, 2, (fl) | F_ELEMWISE, "", shape_elemwise},
#define CMP(n, fl, ...)            [OP_##n] = {#n, 2, (fl) | F_ELEMWISE, "", shape_compare},
#define OTHER(n, ar, rule, fl, kind, cost, at) [OP_##n] = {#n, ar, fl, at, shape_##rule},
#include "ops.def" // all row macros
};
// clang-format on

static OpInfo info[OP_COUNT];
static int info_ready;

static const char *dtype_names[DT_COUNT] = {
	"none",
#define DTYPE(N, name, bytes) #name,
#include "dtypes.def"
	"tuple",
};

const char *
ir_dtype_name(DType t)
{
	return (unsigned)t < DT_COUNT ? dtype_names[t] : "?";
}

DType
ir_dtype_lookup(const char *name)
{
	for (int t = DT_F32; t < DT_TUPLE; t++)
		if (!strcmp(name, dtype_names[t]))
			return (DType)t;
	return DT_NONE;
}

double
ir_dtype_round(DType dt, double v)
{
	switch (dt) {
	case DT_F32:
		return (double)(float)v;
	case DT_I64:
		return trunc(v);
	case DT_BOOL:
		return v != 0;
	default:
		return v;
	}
}

int
ir_dtype_code(DType t)
{
	return t > DT_NONE && t < DT_TUPLE ? (int)t - DT_F32 : -1;
}

DType
ir_dtype_of_code(int code)
{
	return code >= 0 && code < DT_TUPLE - DT_F32 ? (DType)(DT_F32 + code) : DT_NONE;
}

int
ir_dtype_is_float(DType t)
{
	return t == DT_F32 || t == DT_F64;
}

static void
spec_fail(const char *op, const char *what)
{
	fprintf(stderr, "ops.def: op '%s': bad attribute spec: %s\n", op, what);
	abort();
}

static void
parse_default(const char *op, AttrSpec *s, const char *v)
{
	char *end;
	s->has_default = 1;
	switch (s->kind) {
	case AK_INT:
		s->def.i = strtoll(v, &end, 10);
		if (*end)
			spec_fail(op, v);
		break;
	case AK_FLOAT:
		if (!strcmp(v, "inf"))
			s->def.f = INFINITY;
		else if (!strcmp(v, "-inf"))
			s->def.f = -INFINITY;
		else {
			s->def.f = strtod(v, &end);
			if (*end)
				spec_fail(op, v);
		}
		break;
	case AK_INTS:
		s->def.n = 0;
		while (*v) {
			if (s->def.n == IR_MAXDIM)
				spec_fail(op, v);
			s->def.v[s->def.n++] = strtoll(v, &end, 10);
			if (end == v || (*end && *end != ','))
				spec_fail(op, v);
			v = *end ? end + 1 : end;
		}
		break;
	case AK_DTYPE:
		s->def.i = ir_dtype_lookup(v);
		if (!s->def.i)
			spec_fail(op, v);
		break;
	case AK_ENUM:
		s->def.i = -1;
		for (int i = 0; i < s->nenum; i++)
			if (!strcmp(s->enums[i], v))
				s->def.i = i;
		if (s->def.i < 0)
			spec_fail(op, v);
		break;
	case AK_BODY:
		spec_fail(op, "body attributes have no default");
	}
}

// Parses "name:kind[=default] ..." into info->attr.  The strings are
// static and parsed once; the pieces are copied into static storage.
static void
parse_spec(OpInfo *oi, const char *spec)
{
	static char pool[16384];
	static size_t used;
	size_t len = strlen(spec);
	if (used + len + 1 > sizeof pool)
		spec_fail(oi->name, "spec pool exhausted");
	char *buf = pool + used;
	memcpy(buf, spec, len + 1);
	used += len + 1;
	for (char *tok = strtok(buf, " "); tok; tok = strtok(NULL, " ")) {
		if (oi->nattr == IR_MAXATTR)
			spec_fail(oi->name, "too many attributes");
		AttrSpec *s = &oi->attr[oi->nattr++];
		char *colon = strchr(tok, ':');
		if (!colon)
			spec_fail(oi->name, tok);
		*colon = 0;
		s->name = tok;
		char *kind = colon + 1, *eq = strchr(kind, '=');
		if (eq)
			*eq = 0;
		if (!strcmp(kind, "int"))
			s->kind = AK_INT;
		else if (!strcmp(kind, "float"))
			s->kind = AK_FLOAT;
		else if (!strcmp(kind, "ints"))
			s->kind = AK_INTS;
		else if (!strcmp(kind, "dtype"))
			s->kind = AK_DTYPE;
		else if (!strcmp(kind, "body"))
			s->kind = AK_BODY;
		else if (!strncmp(kind, "enum(", 5)) {
			s->kind = AK_ENUM;
			char *p = kind + 5, *close = strchr(p, ')');
			if (!close)
				spec_fail(oi->name, kind);
			*close = 0;
			for (char *e = p;;) {
				char *bar = strchr(e, '|');
				if (bar)
					*bar = 0;
				if (s->nenum == 8)
					spec_fail(oi->name, "too many enum names");
				s->enums[s->nenum++] = e;
				if (!bar)
					break;
				e = bar + 1;
			}
		} else
			spec_fail(oi->name, kind);
		if (eq)
			parse_default(oi->name, s, eq + 1);
	}
}

static void
info_init(void)
{
	for (int op = 1; op < OP_COUNT; op++) {
		OpInfo *oi = &info[op];
		oi->name = rows[op].name;
		oi->arity = rows[op].arity;
		oi->flags = rows[op].flags;
		oi->shape = rows[op].shape;
		parse_spec(oi, rows[op].attrs);
	}
	info_ready = 1;
}

const OpInfo *
ir_op(int op)
{
	FADC_ASSERT(op > 0 && op < OP_COUNT, "op out of range");
	if (!info_ready)
		info_init();
	return &info[op];
}

int
ir_op_lookup(const char *name)
{
	for (int op = 1; op < OP_COUNT; op++)
		if (!strcmp(rows[op].name, name))
			return op;
	return OP_NONE;
}

int
ir_attr_index(int op, const char *name)
{
	const OpInfo *oi = ir_op(op);
	for (int i = 0; i < oi->nattr; i++)
		if (!strcmp(oi->attr[i].name, name))
			return i;
	return -1;
}

void
ir_attrs_default(int op, Attrs *a)
{
	const OpInfo *oi = ir_op(op);
	memset(a, 0, sizeof *a);
	for (int i = 0; i < oi->nattr; i++)
		if (oi->attr[i].has_default)
			a->a[i] = oi->attr[i].def;
}
