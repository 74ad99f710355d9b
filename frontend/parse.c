// frontend/parse.c -- the parser: tokens to a Module, building graphs as it
// goes (there is no AST).
//
// Main ideas:
//  - Expressions evaluate to Vals: either a graph node or a compile-time
//    value (an integer, a float, a list, a name not yet resolved).  Numbers
//    stay compile-time until they meet a tensor, then become a `full` of the
//    tensor's dtype and shape (NumPy's "weak" scalars), so `2 * x` is f32
//    when x is.  Shapes and attributes are compile-time integer expressions.
//  - Broadcasting and dtype promotion are made explicit here (`broadcast`
//    and `cast` nodes): the ops of the graph take equal shapes and dtypes.
//  - Functions (`def`) are inlined: a call re-parses the function's tokens in
//    a fresh scope with the arguments bound.  A function used as the body
//    of a `scan` is parsed once more into a graph of its own.
//  - In-place forms are functionalized on the fly.  A variable is a name
//    bound to a value; a view (`y = x[0:2]`, or `y = x`) remembers its base,
//    so that writing through either updates both, as PyTorch's aliasing
//    does.  A mutated input of `forward` becomes a write-back output.
//  - Errors: perr() prints the diagnostic, a note per inlined call site and
//    per named operand, then longjmps out (frontend.h).
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fileio.h"
#include "frontend.h"

typedef enum VKind {
	V_NONE,
	V_NODE, // a tensor: a node of the current graph
	V_INT,
	V_FLOAT,
	V_BOOL,
	V_LIST, // [a, b, ...]
	V_TUPLE, // several values returned by a function
	V_IDENT, // a name that did not resolve to a value: a function, a parameter
	         // prefix, an enum or dtype name; an error if used as a value
	V_PARAMS, // a parameter prefix bound to a `params` argument
} VKind;

typedef struct Var Var;

// How a view reads its base: a slice (start, end, step; none when
// slice.a[0].n is 0), then the axes dropped by integer indexing.
typedef struct View {
	Attrs slice;
	int ndrop;
	int8_t drop[IR_MAXDIM];
} View;

typedef struct Val {
	VKind k;
	Loc loc;
	NodeId n;
	int64_t i;
	double f;
	struct Val *item;
	int nitem;
	const char *s; // V_IDENT: the name; V_PARAMS: the prefix
	// Where a value came from, for notes and views: the variable it was
	// read from, and for `x[...]` how to read it from that variable.  The
	// view lives in the arena, so that a Val stays small: the parser keeps
	// arrays of 64 of them in frames of its recursion.
	Var *var;
	const View *view; // non-NULL: this value is `view` of var
} Val;

// A variable of a function scope.  A view reads its value from its base
// (another variable, possibly of a caller's scope) whenever the base has
// changed since; writing through a view updates the base.
struct Var {
	const char *name;
	Loc loc;
	Val v; // current value (for a view: as of base version `basever`)
	int version;
	Var *base; // non-NULL: a view of base
	View view; // how it reads base
	int basever;
	int input; // index into the graph's inputs when it is (an alias of) one, else -1
	int mutated; // written in place: a write-back output if input >= 0
	Loc reshaped; // the last in-place write that changed its shape, or 0
};

typedef struct Scope {
	// The names bound here, by name: open addressing with linear probing,
	// at most half full (NULL: an empty slot).  A linear list made parsing
	// quadratic in the statements: 6 s for a chain of 32,000 (issue 18).
	Var **var;
	uint32_t nvar, cvar; // names bound, slots (a power of 2)
	Loc callsite; // 0 for the outermost scope
	const char *fname; // the function being inlined, or NULL
	uint64_t salt; // mixed into the seed of every random op here; 0 at top level
	uint32_t ncall; // calls made from this scope so far (each call's ordinal)
} Scope;

typedef struct DefArg {
	const char *name;
	Loc loc;
	enum { A_ANY, A_TENSOR, A_INT, A_FLOAT, A_PARAMS } kind;
	uint32_t type_tok; // A_TENSOR: index of the dtype token
	uint32_t def_tok; // index of the default expression, 0 if none
} DefArg;

typedef struct Def {
	const char *name;
	Loc loc;
	Token *tok; // the token array of its file
	uint32_t body; // index of '{'
	uint32_t ret_tok; // index after '->', 0 if no return type
	DefArg arg[32];
	int narg;
	int prelude;
	// The size bound (see "the size after inlining"): where the body
	// ends, the calls of defs in it (token index and callee, in order;
	// made on first use, nsite < 0 until then), the fewest nodes an
	// inlining of it has made (-1: none done yet), and the lower bound
	// computed in generation lbgen.
	uint32_t body_end;
	int32_t nsite;
	uint32_t *site;
	struct Def **sitedef;
	int64_t minsize;
	int64_t lb;
	uint32_t lbgen;
} Def;

// Recursion guard.  The parser recurses on nested expressions and on
// inlined calls; each level takes a few kilobytes of C stack, so deep
// nesting (((((...))))) would overflow it.  Every nested expression and
// every inlined call takes one level, and 200 of them (Lua's
// LUAI_MAXCCALLS) stay within a few megabytes, sanitizers included.
#define FE_MAXDEPTH 200

// The largest element count (and dimension) of a tensor: what ir_build
// accepts for a result, so that shape arithmetic stays within int64.
#define FE_MAXNUMEL ((int64_t)1 << 62)

typedef enum Mode { M_FORWARD, M_INIT, M_BODY } Mode;

// Scratch arrays for one construct's values: a call's arguments, a list's
// items, a return's or an assignment's values.  They are kept out of the C
// stack so that the parser's recursive frames stay small (see enter()).
// The construct being parsed at nesting depth d uses scratch[d]; all it
// parses inside is at a greater depth, so scratch[d] is free again once it
// completes.
typedef struct Scratch {
	Val v[64];
	const char *s[64], *s2[64];
	Loc loc[64];
} Scratch;

typedef struct P {
	Diag d;
	jmp_buf jmp;
	const FeOptions *o;
	Module *m;
	Arena *a;
	Token *tok; // current token array
	uint32_t pos;
	Graph *g; // the graph being built
	Mode mode;
	Scope *sc;
	int curdecl; // M_INIT: the declaration being initialized
	Shape init_shape; // M_INIT: its type, for factories without shape=
	DType init_dtype;
	NodeId *declnode; // M_FORWARD: decl index -> input node
	NodeId *initnode; // M_INIT: decl index -> input node of the init graph,
	uint32_t *initgen; // valid where initgen[k] == curdecl + 1 (one array
	uint32_t cinit; // for all initializers: no O(ndecl^2) memory)
	Def *def;
	uint32_t ndef, cdef;
	int *defused; // per -D option
	Loc calls[64]; // inlined call sites, innermost last
#define LMEMO 1024
	Loc lmemo_from[LMEMO], lmemo_to[LMEMO], lmemo_call; // node_loc's memo
	Def *callee[64]; // the function inlined at each
	char isbody[64]; // ... or parsed as the body of a scan
	uint32_t callresume[64]; // where the caller's parse goes on after each
	int64_t callstart[64]; // nbuilt when each began
	int ncall;
	Def *topdef; // the def whose body is the outermost frame (forward), or NULL
	int64_t nbuilt, maxnodes; // nodes built so far, in all graphs; the limit
	uint32_t lbgen; // bumped when a def's minsize changes
	uint32_t evalgen; // lbgen at the last look-ahead, +1
	int64_t evalnodes, evalcost; // nbuilt then, and what that look-ahead cost
	int depth; // nesting of expressions and calls (enter/leave)
	struct Scratch *scratch[FE_MAXDEPTH + 1]; // per depth, made on first use
	Token **topname; // names of the model's let, param and const (pass 1)
	uint32_t ntopname, ctopname;
	Var **declvar; // M_FORWARD: decl index -> its variable (made on first use)
	Var **inputvar; // variables of forward's inputs, for write-backs
	uint32_t ninputvar, cinputvar;
	const char *retname[64]; // `return v as name`, or the variable's name
	Loc retas[64]; // where `as name` named it; 0: the name is implicit
	const char *retwb[64]; // `return v -> input`
	int nret;
	char err[512];
	Loc tasks_loc; // where `tasks` was declared
} P;

static Val parse_expr(P *p);
static void parse_block(P *p, Val *ret, Loc *retloc);
static Val call(P *p, const char *name, Loc loc, Val *args, const char **kw, int nargs);

// ---------------------------------------------------------------- errors

// One note per inlined call, innermost first; a long chain shows its two
// ends, as a C compiler's instantiation backtrace does.
static void
note_calls(P *p)
{
	for (int i = p->ncall - 1; i >= 0; i--) {
		if (p->ncall > 12 && i == p->ncall - 7) {
			diag_note(&p->d, 0, "(%d more inlined calls)", p->ncall - 12);
			i = 5;
		}
		diag_note(&p->d, p->calls[i], p->isbody[i] ? "in the body of this scan" : "inlined from here");
	}
}

static _Noreturn void perr(P *p, Loc loc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static _Noreturn void
perr(P *p, Loc loc, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	diag_report(&p->d, loc, "error", fmt, ap);
	va_end(ap);
	p->d.nerror++;
	note_calls(p);
	diag_fail(&p->d);
}

// Functions are inlined, so a call of a function that is being inlined
// would never end.
static void
check_recursion(P *p, const Def *d, Loc loc)
{
	for (int i = 0; i < p->ncall; i++)
		if (p->callee[i] == d)
			perr(p, loc, "recursive call of '%s': functions are inlined, so they cannot recurse",
			     d->name);
	if (p->ncall == 64)
		perr(p, loc, "calls nested too deeply (more than 64 levels)");
}

// A name that resolves to nothing.  If the model declares it further
// down, say so: declarations are visible only after their own line.
static _Noreturn void
unknown_name(P *p, const char *name, Loc loc)
{
	for (uint32_t i = 0; i < p->ntopname; i++) {
		const Token *t = p->topname[i];
		if (t->len == strlen(name) && !memcmp(t->text, name, t->len)) {
			diag_emit(&p->d, loc, "'%s' is used before its declaration", name);
			diag_note(&p->d, t->loc, "'%s' declared here", name);
			note_calls(p);
			diag_fail(&p->d);
		}
	}
	perr(p, loc, "unknown name '%s'", name);
}

// parse_block for a function's body, whose result is values, never a bare
// name: a name that resolved to nothing (V_IDENT) is reported where it
// stands, while the call chain is still known, not where the result is
// used (a caller's line).
static void
parse_body(P *p, Val *ret, Loc *retloc)
{
	parse_block(p, ret, retloc);
	if (ret->k == V_IDENT)
		unknown_name(p, ret->s, ret->loc);
}

static void
type_str(P *p, NodeId n, char *buf, size_t len)
{
	ir_type_str((DType)p->g->node[n].dtype, ir_shape(p->g, n), buf, len);
}

// An op could not be built: the rule's message at the call, then a note
// for every operand that is a named variable or declaration.
static _Noreturn void
op_error(P *p, Loc loc, const Val *ops, int nops)
{
	diag_emit(&p->d, loc, "%s", p->err);
	for (int i = 0; i < nops; i++) {
		const Val *v = &ops[i];
		if (v->k != V_NODE || !v->var || !v->var->loc)
			continue;
		int seen = 0; // x * x: one note
		for (int j = 0; j < i; j++)
			seen |= ops[j].k == V_NODE && ops[j].var == v->var;
		if (seen)
			continue;
		// The variable's own type: the operand may be a slice of it.
		NodeId n = v->view && v->var->v.k == V_NODE ? v->var->v.n : v->n;
		char t[200];
		type_str(p, n, t, sizeof t);
		diag_note(&p->d, v->var->loc, "'%s' declared here as %s", v->var->name, t);
	}
	note_calls(p);
	diag_fail(&p->d);
}

// ---------------------------------------------------------------- tokens

static Token *
peek(P *p)
{
	return &p->tok[p->pos];
}

static Token *
next(P *p)
{
	Token *t = &p->tok[p->pos];
	if (t->kind != T_EOF)
		p->pos++;
	return t;
}

static int
at(P *p, const char *s)
{
	return fe_tok_is(peek(p), s);
}

static int
accept(P *p, const char *s)
{
	if (!at(p, s))
		return 0;
	next(p);
	return 1;
}

static int is_keyword(const Token *t);

static const char *
tok_desc(P *p, const Token *t)
{
	switch (t->kind) {
	case T_EOF:
		return "end of file";
	case T_NEWLINE:
		return "end of line";
	default:
		if (t->quoted)
			return arena_printf(p->a, "name \"%.*s\"", (int)t->len, t->text);
		return arena_printf(p->a, "%s'%.*s'", is_keyword(t) ? "keyword " : "", (int)t->len,
		                    t->text);
	}
}

static Token *
expect(P *p, const char *s)
{
	if (!at(p, s))
		perr(p, peek(p)->loc, "expected '%s', found %s", s, tok_desc(p, peek(p)));
	return next(p);
}

// The closing bracket of one opened at `open`: when it is missing, the
// note says where the unclosed one is, which is often lines away.
static Token *
expect_close(P *p, const char *s, Loc open)
{
	if (!at(p, s)) {
		diag_emit(&p->d, peek(p)->loc, "expected '%s', found %s", s, tok_desc(p, peek(p)));
		diag_note(&p->d, open, "to match this '%s'", s[0] == ')' ? "(" : "[");
		note_calls(p);
		diag_fail(&p->d);
	}
	return next(p);
}

static void
enter(P *p, Loc loc)
{
	if (++p->depth > FE_MAXDEPTH)
		perr(p, loc, "expression nested too deeply (more than %d levels)", FE_MAXDEPTH);
}

static void
leave(P *p)
{
	p->depth--;
}

static Scratch *
scratch(P *p)
{
	FADC_ASSERT(p->depth >= 0 && p->depth <= FE_MAXDEPTH, "depth out of range: enter/leave unpaired");
	if (!p->scratch[p->depth])
		p->scratch[p->depth] = arena_alloc(p->a, sizeof(Scratch));
	return p->scratch[p->depth];
}

static void
skip_newlines(P *p)
{
	while (peek(p)->kind == T_NEWLINE || at(p, ";"))
		next(p);
}

static void
end_statement(P *p)
{
	if (peek(p)->kind == T_NEWLINE || at(p, ";")) {
		next(p);
		return;
	}
	if (at(p, "}") || peek(p)->kind == T_EOF)
		return;
	perr(p, peek(p)->loc, "expected end of line, found %s", tok_desc(p, peek(p)));
}

static const char *const keywords[] = {"let", "param", "const", "def", "return", "as", "true",
                                       "false", NULL};

static int
is_keyword(const Token *t)
{
	for (int i = 0; keywords[i]; i++)
		if (fe_tok_is(t, keywords[i]))
			return 1;
	return 0;
}

static const char *
tok_str(P *p, const Token *t)
{
	return arena_strndup(p->a, t->text, t->len);
}

// A plain (undotted, not keyword) name to bind.
static const char *
expect_name(P *p, const char *what)
{
	Token *t = peek(p);
	if (t->kind != T_IDENT || is_keyword(t))
		perr(p, t->loc, "expected %s, found %s", what, tok_desc(p, t));
	next(p);
	return tok_str(p, t);
}

// ---------------------------------------------------------------- scopes

static uint64_t name_hash(const char *s); // FNV-1a 64, with the call salts below

// The slot of name in sc's table: its variable's, or the empty one where it
// would go.
static uint32_t
scope_slot(const Scope *sc, const char *name)
{
	uint32_t j = (uint32_t)name_hash(name) & (sc->cvar - 1);
	while (sc->var[j] && strcmp(sc->var[j]->name, name))
		j = (j + 1) & (sc->cvar - 1);
	return j;
}

static Var *
scope_find(Scope *sc, const char *name)
{
	if (!sc || !sc->cvar)
		return NULL;
	return sc->var[scope_slot(sc, name)];
}

static Var *
scope_bind(P *p, const char *name, Loc loc)
{
	Scope *sc = p->sc;
	if (2 * (sc->nvar + 1) > sc->cvar) { // rehash into twice the slots
		Var **old = sc->var;
		uint32_t nold = sc->cvar;
		sc->cvar = nold ? 2 * nold : 16;
		sc->var = arena_alloc_array(p->a, sc->cvar, sizeof *sc->var);
		for (uint32_t i = 0; i < nold; i++)
			if (old[i])
				sc->var[scope_slot(sc, old[i]->name)] = old[i];
	}
	// Rebinding a name makes a new variable in the old one's slot: views of
	// the old one keep their base, as a Python rebinding leaves other
	// references alone.
	uint32_t j = scope_slot(sc, name);
	if (!sc->var[j])
		sc->nvar++;
	Var *v = arena_zalloc(p->a, sizeof *v);
	v->name = name;
	v->loc = loc;
	v->input = -1;
	sc->var[j] = v;
	return v;
}

// ---------------------------------------------------------------- values

static int
is_num(const Val *v)
{
	return v->k == V_INT || v->k == V_FLOAT || v->k == V_BOOL;
}

static double
num_f(const Val *v)
{
	return v->k == V_FLOAT ? v->f : (double)v->i;
}

static const char *
val_desc(const Val *v)
{
	switch (v->k) {
	case V_NODE:
		return "a tensor";
	case V_INT:
		return "an integer";
	case V_FLOAT:
		return "a float";
	case V_BOOL:
		return "a bool";
	case V_LIST:
		return "a list";
	case V_TUPLE:
		return "several values";
	case V_IDENT:
		return "a name";
	case V_PARAMS:
		return "a parameter prefix";
	default:
		return "nothing";
	}
}

static Val
node_val(NodeId n, Loc loc)
{
	Val v = {.k = V_NODE, .n = n, .loc = loc};
	return v;
}

static void size_check(P *p, Loc loc, Def *entering);

// The position a node built at loc keeps: inside an inlined call, loc as
// inlined from the outermost call site (ir.h, SrcLoc), so that what later
// passes and the runtime say about a node of a prelude composite also
// names the user's line.  Scan bodies are no calls: their frames are
// skipped.  Memoized (direct-mapped) for the current call site.
static Loc
node_loc(P *p, Loc loc)
{
	int i = 0;
	while (i < p->ncall && p->isbody[i])
		i++;
	SrcMap *src = p->m->src;
	if (i == p->ncall || !loc || loc == p->calls[i] || src->loc[loc].call)
		return loc;
	Loc call = p->calls[i];
	if (p->lmemo_call != call) {
		memset(p->lmemo_from, 0, sizeof p->lmemo_from);
		p->lmemo_call = call;
	}
	uint32_t h = loc & (LMEMO - 1);
	if (p->lmemo_from[h] != loc) {
		p->lmemo_from[h] = loc;
		p->lmemo_to[h] = ir_srcmap_loc_call(src, loc, call);
	}
	return p->lmemo_to[h];
}

static NodeId
build(P *p, int op, const NodeId *in, int nin, const Attrs *a, Loc loc, const Val *ops, int nops)
{
	if (++p->nbuilt > p->maxnodes)
		size_check(p, loc, NULL);
	NodeId n = ir_build(p->g, op, in, nin, a, node_loc(p, loc), p->err, sizeof p->err);
	if (!n)
		op_error(p, loc, ops, nops);
	// An i64 constant is an int64: a float value beyond the range (1e19)
	// has no i64 value, and would saturate.
	if (op == OP_full && p->g->node[n].dtype == DT_I64) {
		const AttrVal *v = &a->a[0];
		if ((double)v->i != v->f && (v->f != v->f || fabs(v->f) >= 9223372036854775808.0)) {
			char b[64];
			ir_print_float(b, sizeof b, v->f);
			perr(p, loc, "full: value %s does not fit in i64 (range -2^63 .. 2^63 - 1)", b);
		}
	}
	return n;
}

// A `full` of value f; i is its exact integer when the value is an integer
// (the i64 constant beyond 2^53 that f only rounds: ir.h, AttrVal), else
// anything (the graph derives it from f).
static NodeId
mk_full(P *p, double value, int64_t i, DType dt, const Shape *s, Loc loc)
{
	Attrs a;
	ir_attrs_default(OP_full, &a);
	a.a[0].f = value;
	a.a[0].i = i;
	a.a[1].n = s->rank;
	memcpy(a.a[1].v, s->dim, sizeof(int64_t) * (size_t)s->rank);
	a.a[2].i = dt;
	return build(p, OP_full, NULL, 0, &a, loc, NULL, 0);
}

static NodeId
mk_cast(P *p, NodeId n, DType dt, Loc loc)
{
	if (p->g->node[n].dtype == dt)
		return n;
	Attrs a;
	ir_attrs_default(OP_cast, &a);
	a.a[0].i = dt;
	return build(p, OP_cast, &n, 1, &a, loc, NULL, 0);
}

static NodeId
mk_shaped(P *p, int op, NodeId n, const Shape *s, Loc loc, const Val *ops, int nops)
{
	Attrs a;
	ir_attrs_default(op, &a);
	a.a[0].n = s->rank;
	memcpy(a.a[0].v, s->dim, sizeof(int64_t) * (size_t)s->rank);
	return build(p, op, &n, 1, &a, loc, ops, nops);
}

static NodeId
mk_broadcast(P *p, NodeId n, const Shape *s, Loc loc, const Val *ops, int nops)
{
	if (ir_shape_eq(ir_shape(p->g, n), s))
		return n;
	return mk_shaped(p, OP_broadcast, n, s, loc, ops, nops);
}

static NodeId
mk_reshape(P *p, NodeId n, const Shape *s, Loc loc)
{
	if (ir_shape_eq(ir_shape(p->g, n), s))
		return n;
	return mk_shaped(p, OP_reshape, n, s, loc, NULL, 0);
}

// Can a value of shape `from` be broadcast to `to` (NumPy's rule, one way)?
static int
broadcasts_to(const Shape *from, const Shape *to)
{
	if (from->rank > to->rank)
		return 0;
	for (int i = 0; i < from->rank; i++) {
		int64_t f = from->dim[i], t = to->dim[to->rank - from->rank + i];
		if (f != t && f != 1)
			return 0;
	}
	return 1;
}

// The dtype a number takes as a tensor on its own.
static DType
num_dtype(const Val *v)
{
	return v->k == V_FLOAT ? DT_F32 : v->k == V_BOOL ? DT_BOOL : DT_I64;
}

// Materializes a value as a tensor.  Numbers become `full` of dtype dt
// (or their own) and shape s (or scalar).
static NodeId
as_node(P *p, const Val *v, DType dt, const Shape *s)
{
	static const Shape scalar = {0};
	if (!p->g && v->k != V_IDENT)
		perr(p, v->loc, "expected a compile-time integer here, found %s", val_desc(v));
	switch (v->k) {
	case V_NODE:
		return v->n;
	case V_INT:
	case V_FLOAT:
	case V_BOOL:
		return mk_full(p, num_f(v), v->i, dt ? dt : num_dtype(v), s ? s : &scalar, v->loc);
	case V_IDENT:
		unknown_name(p, v->s, v->loc);
	default:
		perr(p, v->loc, "expected a tensor, found %s", val_desc(v));
	}
}

static int64_t
as_int(P *p, const Val *v, const char *what)
{
	if (v->k == V_INT || v->k == V_BOOL)
		return v->i;
	if (v->k == V_IDENT)
		unknown_name(p, v->s, v->loc);
	perr(p, v->loc, "%s must be a compile-time integer, found %s", what, val_desc(v));
}

// Dtype promotion: bool < i64 < f32 < f64 (NumPy's kinds, with f32 + f64
// giving f64).  Numbers are weak: they take the tensor's dtype, except
// that a float number with an integer tensor gives f32.
static int
dtype_rank(DType t)
{
	return t == DT_BOOL ? 0 : t == DT_I64 ? 1 : t == DT_F32 ? 2 : 3; // not the enum's order
}

static DType
promote(DType a, DType b)
{
	return dtype_rank(a) >= dtype_rank(b) ? a : b;
}

static DType
result_dtype(P *p, const Val *v, int n)
{
	DType t = DT_NONE;
	int anyfloatnum = 0, anyintnum = 0;
	for (int i = 0; i < n; i++) {
		if (v[i].k == V_NODE)
			t = t ? promote(t, (DType)p->g->node[v[i].n].dtype) : (DType)p->g->node[v[i].n].dtype;
		else if (v[i].k == V_FLOAT)
			anyfloatnum = 1;
		else if (v[i].k == V_INT)
			anyintnum = 1;
	}
	if (!t)
		return anyfloatnum ? DT_F32 : anyintnum ? DT_I64 : DT_BOOL;
	if (anyfloatnum && !ir_dtype_is_float(t))
		return DT_F32;
	if (anyintnum && t == DT_BOOL)
		return DT_I64;
	return t;
}

// Brings operands to one dtype and one broadcast shape; dt NONE: promote.
static void
unify(P *p, const char *opname, Val *v, int n, DType dt, NodeId *out, Loc loc)
{
	if (!dt)
		dt = result_dtype(p, v, n);
	Shape s = {0};
	for (int i = 0; i < n; i++)
		if (v[i].k == V_NODE) {
			Shape t;
			if (!ir_broadcast_shapes(&s, ir_shape(p->g, v[i].n), &t)) {
				char s0[160], s1[160];
				ir_shape_str(&s, s0, sizeof s0);
				ir_shape_str(ir_shape(p->g, v[i].n), s1, sizeof s1);
				snprintf(p->err, sizeof p->err, "%s: cannot broadcast %s with %s", opname, s0, s1);
				op_error(p, loc, v, n);
			}
			s = t;
		}
	for (int i = 0; i < n; i++) {
		if (v[i].k != V_NODE) {
			out[i] = as_node(p, &v[i], dt, &s);
			continue;
		}
		out[i] = mk_broadcast(p, mk_cast(p, v[i].n, dt, loc), &s, loc, v, n);
	}
}

// ---------------------------------------------------------------- views

// The current value of a variable, re-reading a view from its base when
// the base has changed.
static Val
var_value(P *p, Var *v, Loc loc)
{
	if (v->base) {
		Val b = var_value(p, v->base, loc);
		if (v->basever != v->base->version) {
			NodeId n = b.n;
			if (v->view.slice.a[0].n)
				n = build(p, OP_slice, &n, 1, &v->view.slice, loc, NULL, 0);
			if (v->view.ndrop) {
				const Shape *s = ir_shape(p->g, n);
				Shape t = {0};
				for (int i = 0; i < s->rank; i++) {
					int dropped = 0;
					for (int k = 0; k < v->view.ndrop; k++)
						dropped |= v->view.drop[k] == i;
					if (!dropped)
						t.dim[t.rank++] = s->dim[i];
				}
				n = mk_reshape(p, n, &t, loc);
			}
			v->v = node_val(n, loc);
			v->basever = v->base->version;
		}
	}
	Val r = v->v;
	r.loc = loc;
	r.var = v;
	r.view = NULL;
	return r;
}

// Writes a new value into a variable; through a view, into its base too.
static void
var_store(P *p, Var *v, NodeId n, Loc loc)
{
	if (v->base) {
		Var *b = v->base;
		Val bv = var_value(p, b, loc);
		NodeId full = bv.n;
		if (v->view.slice.a[0].n) {
			// Put back the dropped axes, then write the slice.
			Shape ss = {0};
			const Shape *bs = ir_shape(p->g, full);
			for (int i = 0; i < bs->rank; i++)
				ss.dim[ss.rank++] =
				    (v->view.slice.a[1].v[i] - v->view.slice.a[0].v[i] + v->view.slice.a[2].v[i] - 1) /
				    v->view.slice.a[2].v[i];
			NodeId upd = mk_reshape(p, n, &ss, loc);
			NodeId ops[2] = {full, upd};
			full = build(p, OP_slice_update, ops, 2, &v->view.slice, loc, NULL, 0);
		} else {
			full = n;
		}
		var_store(p, b, full, loc);
		v->basever = b->version;
	} else {
		if (v->v.k == V_NODE && p->g->node[v->v.n].shape != p->g->node[n].shape)
			v->reshaped = loc;
		v->version++;
	}
	v->v = node_val(n, loc);
	v->mutated = 1;
}

// ---------------------------------------------------------------- names

static int
find_def(P *p, const char *name)
{
	// User definitions shadow the prelude's.
	for (uint32_t i = 0; i < p->ndef; i++)
		if (!p->def[i].prelude && !strcmp(p->def[i].name, name))
			return (int)i;
	for (uint32_t i = 0; i < p->ndef; i++)
		if (p->def[i].prelude && !strcmp(p->def[i].name, name))
			return (int)i;
	return -1;
}

// ---------------------------------------------------------------- the size after inlining
//
// Every call is inlined, so n levels of functions that each call the
// previous one twice make 2^n copies of the innermost body: 20 levels are
// millions of nodes and gigabytes of parser state.  The frontend bounds the
// nodes it builds, in all graphs together (p->maxnodes, FeOptions.max_nodes,
// `fadc --max-nodes`), and refuses a model before building that much:
//  - every node built is counted (build()), and passing the limit is an
//    error at once;
//  - at a call, it also looks ahead.  Functions have no conditionals, so
//    each call in a body is inlined whenever that body is, and the size of
//    what is still to come is at least
//        lb(f) = minsize(f)                     once f has been inlined,
//        lb(f) = sum of lb(g) over f's calls    before that,
//    where minsize(f) is the fewest nodes an inlining of f has made so
//    far.  The look-ahead adds, for every frame of the call chain, lb of
//    the calls its body has still to make after the current one; when the
//    sum passes the limit, the innermost inlining whose own share passes
//    it is named, with the chain of call sites that leads to it.
// minsize is a measure, not a proof: a function inlined once with tensors
// and later with compile-time numbers makes fewer nodes the second time,
// so a model within reach of the limit may be refused ahead of it;
// --max-nodes raises it.  A look-ahead walks the chain's remaining calls;
// it runs only when some minsize has changed and at least as many nodes
// were built since the last one as that one cost, so all of them together
// cost no more than the nodes built.

// The calls of defs in d's body, by token: a name (undotted: a method call
// is not counted, which keeps lb a lower bound) followed by '('.
static void
def_sites(P *p, Def *d)
{
	if (d->nsite >= 0)
		return;
	uint32_t n = 0, cap = 0;
	for (uint32_t i = d->body; i + 1 < d->body_end; i++) {
		const Token *t = &d->tok[i];
		if (t->kind != T_IDENT || !fe_tok_is(&d->tok[i + 1], "(") || memchr(t->text, '.', t->len))
			continue;
		int k = find_def(p, tok_str(p, t));
		if (k < 0)
			continue;
		if (n == cap) {
			uint32_t c2 = cap;
			arena_grow(p->a, (void **)&d->site, &cap, n + 1, sizeof *d->site);
			arena_grow(p->a, (void **)&d->sitedef, &c2, n + 1, sizeof *d->sitedef);
		}
		d->site[n] = i;
		d->sitedef[n++] = &p->def[k];
	}
	d->nsite = (int32_t)n;
}

static int64_t
sat_add(int64_t a, int64_t b)
{
	return a > INT64_MAX - b ? INT64_MAX : a + b;
}

// lb(d) above; *cost counts the work.  Recursion (an error when inlined)
// and chains deeper than calls can nest count 0: a lower bound still.
static int64_t
def_lb(P *p, Def *d, int depth, int64_t *cost)
{
	if (d->minsize >= 0)
		return d->minsize;
	if (d->lbgen == p->lbgen)
		return d->lb;
	d->lbgen = p->lbgen;
	d->lb = 0; // while it is being computed: a call of itself adds 0
	if (depth > 64)
		return 0;
	def_sites(p, d);
	int64_t s = 0;
	for (int32_t i = 0; i < d->nsite; i++)
		s = sat_add(s, def_lb(p, d->sitedef[i], depth + 1, cost));
	*cost += d->nsite + 1;
	d->lb = s;
	return s;
}

// lb of the calls in d's body at token `from` or later.
static int64_t
rest_lb(P *p, Def *d, uint32_t from, int64_t *cost)
{
	if (!d)
		return 0;
	def_sites(p, d);
	int64_t s = 0;
	for (int32_t i = d->nsite - 1; i >= 0 && d->site[i] >= from; i--) {
		s = sat_add(s, def_lb(p, d->sitedef[i], 1, cost));
		++*cost;
	}
	return s;
}

// The limit is passed, or will be: frame j (1..ncall the inlinings in
// progress, ncall + 1 `entering`, about to be) is blamed when its share,
// share[j], passes the limit; the innermost such is named with the call
// sites that lead to it.  Otherwise the model as a whole is.
static _Noreturn void
size_error(P *p, Loc loc, const Def *entering, const int64_t *share, int64_t total)
{
	int top = entering ? p->ncall + 1 : p->ncall;
	int j = top;
	while (j >= 1 && share[j] <= p->maxnodes)
		j--;
	if (j == 0) {
		diag_emit(&p->d, loc, "the model exceeds %lld nodes after inlining (at least %lld); "
		          "--max-nodes raises the limit", (long long)p->maxnodes, (long long)total);
		j = p->ncall;
	} else {
		const Def *d = j == p->ncall + 1 ? entering : p->callee[j - 1];
		Loc at = j == p->ncall + 1 ? loc : p->calls[j - 1];
		diag_emit(&p->d, at, "inlining '%s' exceeds %lld nodes (at least %lld); --max-nodes raises "
		          "the limit", d->name, (long long)p->maxnodes, (long long)share[j]);
		j--;
	}
	// Every call site of the chain, the innermost first: the chain is the
	// point of this error (note_calls shortens long ones).
	for (int i = j - 1; i >= 0; i--)
		diag_note(&p->d, p->calls[i], p->isbody[i] ? "in the body of this scan" : "inlined from here");
	diag_fail(&p->d);
}

// The check at a node (entering NULL: nbuilt has passed the limit) and
// before inlining `entering` at loc (the look-ahead).
static void
size_check(P *p, Loc loc, Def *entering)
{
	int64_t share[66], cost = 0;
	int top = entering ? p->ncall + 1 : p->ncall;
	if (!entering) {
		for (int j = 1; j <= top; j++)
			share[j] = p->nbuilt - p->callstart[j - 1];
		size_error(p, loc, NULL, share, p->nbuilt);
	}
	if (p->evalgen == p->lbgen || p->nbuilt - p->evalnodes < p->evalcost)
		return;
	// What is still to come, innermost first: `entering` itself, then
	// the rest of each frame's body.  share[j] is frame j's part: what
	// it has built, what is to come inside it.
	int64_t ahead = def_lb(p, entering, 1, &cost);
	share[top] = ahead;
	for (int f = p->ncall; f >= 0; f--) {
		Def *fd = f == 0 ? p->topdef : p->callee[f - 1];
		uint32_t from = f == p->ncall ? p->pos : p->callresume[f];
		ahead = sat_add(ahead, rest_lb(p, fd, from, &cost));
		if (f >= 1)
			share[f] = sat_add(p->nbuilt - p->callstart[f - 1], ahead);
	}
	p->evalgen = p->lbgen;
	p->evalnodes = p->nbuilt;
	p->evalcost = cost;
	int64_t total = sat_add(p->nbuilt, ahead);
	if (total > p->maxnodes)
		size_error(p, loc, entering, share, total);
}

// The graph value of declaration k in the current graph.
static Val
decl_value(P *p, int k, Loc loc)
{
	Decl *d = &p->m->decl[k];
	if (p->mode == M_BODY)
		perr(p, loc, "a scan body cannot refer to '%s' from outside; pass it as a loop-invariant operand",
		     d->name);
	if (p->mode == M_INIT) {
		if (k >= p->curdecl)
			perr(p, loc, "'%s' is used in its own initializer", d->name);
		if (p->initgen[k] != (uint32_t)p->curdecl + 1) {
			p->initgen[k] = (uint32_t)p->curdecl + 1;
			p->initnode[k] = ir_add_input(p->g, d->name, d->kind == DECL_PARAM ? IN_PARAM : IN_CONST,
			                              d->dtype, &d->shape, d->loc);
		}
		return node_val(p->initnode[k], loc);
	}
	return node_val(p->declnode[k], loc);
}

static void
add_inputvar(P *p, Var *v)
{
	arena_grow(p->a, (void **)&p->inputvar, &p->cinputvar, p->ninputvar + 1, sizeof *p->inputvar);
	p->inputvar[p->ninputvar++] = v;
}

// A declaration seen from forward (at any depth of inlining) is one
// variable, outside every scope, that holds the input's current value: an
// in-place write to it becomes a write-back output.
static Var *
decl_var(P *p, int k, Loc loc)
{
	if (!p->declvar[k]) {
		Decl *d = &p->m->decl[k];
		Var *v = arena_zalloc(p->a, sizeof *v);
		v->name = d->name;
		v->loc = d->loc;
		v->v = decl_value(p, k, loc);
		v->input = (int)ir_attr_int(p->g, p->declnode[k], "index");
		p->declvar[k] = v;
		add_inputvar(p, v);
	}
	return p->declvar[k];
}

static Val lookup_global(P *p, const char *name, Loc loc);

// Resolves a name to a value.  Dotted names may start with a `params`
// argument (p.conv1.weight).  A name that resolves to nothing becomes
// V_IDENT: a function, an enum name or a prefix, or an error when used.
static Val
lookup(P *p, const char *name, Loc loc, int quoted)
{
	Var *v = scope_find(p->sc, name);
	if (v)
		return var_value(p, v, loc);
	const char *dot = quoted ? NULL : strchr(name, '.'); // "p.w" is the name p.w, whatever p is
	if (dot) {
		char *head = arena_strndup(p->a, name, (size_t)(dot - name));
		Var *pv = scope_find(p->sc, head);
		// A prefix is already a whole path from the top (the caller resolved
		// it), so the substituted name is looked up among the declarations
		// only: through the scope again, `g(p)` with an unbound p would bind
		// p to the prefix "p" and expand p.W into itself forever.
		if (pv && pv->v.k == V_PARAMS)
			return lookup_global(p, arena_printf(p->a, "%s%s", pv->v.s, dot), loc);
	}
	return lookup_global(p, name, loc);
}

// Resolves a name among the declarations, sizes and named constants.
static Val
lookup_global(P *p, const char *name, Loc loc)
{
	int k = ir_module_find_decl(p->m, name);
	if (k >= 0 && !p->g) // a size, or a dimension of a declaration's type
		perr(p, loc, "'%s' is a tensor, not a compile-time integer", name);
	if (k >= 0 && p->mode == M_FORWARD)
		return var_value(p, decl_var(p, k, loc), loc);
	if (k >= 0 && (p->mode != M_INIT || k < p->curdecl)) {
		Val r = decl_value(p, k, loc);
		r.var = NULL;
		return r;
	}
	if (k >= 0 && p->mode == M_INIT)
		perr(p, loc, "'%s' is used in its own initializer", name);
	for (uint32_t i = 0; i < p->m->nsize; i++)
		if (!strcmp(p->m->size[i].name, name)) {
			Val r = {.k = V_INT, .i = p->m->size[i].value, .loc = loc};
			return r;
		}
	if (!strcmp(name, "inf") || !strcmp(name, "nan") || !strcmp(name, "pi")) {
		Val r = {.k = V_FLOAT, .loc = loc};
		r.f = name[0] == 'i' ? INFINITY : name[0] == 'n' ? NAN : 3.14159265358979323846;
		return r;
	}
	Val r = {.k = V_IDENT, .s = name, .loc = loc};
	return r;
}

// ---------------------------------------------------------------- arithmetic

static Val
fold(P *p, const char *op, Val a, Val b, Loc loc)
{
	int ints = (a.k == V_INT || a.k == V_BOOL) && (b.k == V_INT || b.k == V_BOOL);
	Val r = {.loc = loc};
	if (ints && strcmp(op, "/") && strcmp(op, "**")) {
		int64_t x = a.i, y = b.i, z = 0;
		r.k = V_INT;
		if (!strcmp(op, "+")) {
			if (__builtin_add_overflow(x, y, &z))
				perr(p, loc, "integer overflow in %lld + %lld", (long long)x, (long long)y);
		} else if (!strcmp(op, "-")) {
			if (__builtin_sub_overflow(x, y, &z))
				perr(p, loc, "integer overflow in %lld - %lld", (long long)x, (long long)y);
		} else if (!strcmp(op, "*")) {
			if (__builtin_mul_overflow(x, y, &z))
				perr(p, loc, "integer overflow in %lld * %lld", (long long)x, (long long)y);
		} else if (!strcmp(op, "//") || !strcmp(op, "%")) {
			if (y == 0)
				perr(p, loc, "integer division by zero");
			if (x == INT64_MIN && y == -1)
				perr(p, loc, "integer overflow in division");
			int64_t q = x / y, m = x % y;
			if (m && ((m < 0) != (y < 0))) // Python floors
				q--, m += y;
			z = op[0] == '%' ? m : q;
		}
		r.i = z;
		return r;
	}
	double x = num_f(&a), y = num_f(&b);
	r.k = V_FLOAT;
	if (!strcmp(op, "+"))
		r.f = x + y;
	else if (!strcmp(op, "-"))
		r.f = x - y;
	else if (!strcmp(op, "*"))
		r.f = x * y;
	else if (!strcmp(op, "/"))
		r.f = x / y;
	else if (!strcmp(op, "**"))
		r.f = pow(x, y);
	else if (!strcmp(op, "//"))
		r.f = floor(x / y);
	else
		r.f = x - floor(x / y) * y;
	return r;
}

static Val
binop(P *p, const char *op, Val a, Val b, Loc loc)
{
	if (is_num(&a) && is_num(&b) && strcmp(op, "@") && strcmp(op, "<") && strcmp(op, ">") &&
	    strcmp(op, "<=") && strcmp(op, ">=") && strcmp(op, "==") && strcmp(op, "!="))
		return fold(p, op, a, b, loc);
	static const struct {
		const char *tok, *fn;
	} map[] = {{"+", "add"}, {"-", "sub"}, {"*", "mul"}, {"/", "div"}, {"**", "pow"},
	           {"@", "matmul"}, {"<", "lt"}, {">", "gt"}, {"<=", "le"}, {">=", "ge"},
	           {"==", "eq"}, {"!=", "ne"}};
	for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
		if (!strcmp(op, map[i].tok)) {
			Val args[2] = {a, b};
			return call(p, map[i].fn, loc, args, NULL, 2);
		}
	if (!strcmp(op, "//") || !strcmp(op, "%")) {
		// Floor division and modulo of tensors: floor(a / b), a - b floor(a / b).
		Val args[2] = {a, b};
		Val q = call(p, "div", loc, args, NULL, 2);
		Val fl = call(p, "floor", loc, &q, NULL, 1);
		if (op[0] == '/')
			return fl;
		Val m[2] = {b, fl};
		Val prod = call(p, "mul", loc, m, NULL, 2);
		Val s[2] = {a, prod};
		return call(p, "sub", loc, s, NULL, 2);
	}
	perr(p, loc, "unknown operator '%s'", op);
}

// ---------------------------------------------------------------- types

// dtype '[' intexpr, ... ']'
static void
parse_type(P *p, DType *dt, Shape *s)
{
	Token *t = peek(p);
	if (t->kind != T_IDENT)
		perr(p, t->loc, "expected a type such as f32[N, K], found %s", tok_desc(p, t));
	*dt = ir_dtype_lookup(tok_str(p, t));
	if (!*dt)
		perr(p, t->loc, "unknown dtype '%.*s' (f32, f64, i64 or bool)", (int)t->len, t->text);
	next(p);
	Loc open = expect(p, "[")->loc;
	s->rank = 0;
	if (!at(p, "]"))
		do {
			Loc loc = peek(p)->loc;
			if (s->rank == IR_MAXDIM)
				perr(p, loc, "too many dimensions (at most %d)", IR_MAXDIM);
			Val v = parse_expr(p);
			int64_t d = as_int(p, &v, "a dimension");
			if (d < 0)
				perr(p, loc, "negative dimension %lld", (long long)d);
			if (d > FE_MAXNUMEL)
				perr(p, loc, "dimension %lld is too large (at most 2^62)", (long long)d);
			s->dim[s->rank++] = d;
		} while (accept(p, ","));
	expect_close(p, "]", open);
	if (ir_numel(s) > FE_MAXNUMEL) {
		char b[160];
		ir_shape_str(s, b, sizeof b);
		perr(p, t->loc, "the type %s%s has too many elements (at most 2^62)", ir_dtype_name(*dt), b);
	}
}

// ---------------------------------------------------------------- expressions

static Val
parse_list(P *p)
{
	Loc loc = expect(p, "[")->loc;
	Val r = {.k = V_LIST, .loc = loc};
	Val *tmp = scratch(p)->v;
	while (!at(p, "]")) {
		if (r.nitem == 64)
			perr(p, peek(p)->loc, "list too long (at most 64 items)");
		tmp[r.nitem++] = parse_expr(p);
		if (!accept(p, ","))
			break;
	}
	expect_close(p, "]", loc);
	r.item = arena_alloc_array(p->a, (size_t)r.nitem + 1, sizeof(Val));
	memcpy(r.item, tmp, sizeof(Val) * (size_t)r.nitem);
	return r;
}

// Arguments of a call: positional, then keyword (name=value).
static int
parse_args(P *p, Val *args, const char **kw, int max)
{
	int n = 0;
	Loc open = expect(p, "(")->loc;
	while (!at(p, ")")) {
		if (n == max)
			perr(p, peek(p)->loc, "too many arguments (at most %d)", max);
		kw[n] = NULL;
		if (peek(p)->kind == T_IDENT && !peek(p)->quoted && fe_tok_is(&p->tok[p->pos + 1], "=") &&
		    !memchr(peek(p)->text, '.', peek(p)->len)) {
			kw[n] = tok_str(p, next(p));
			next(p);
		} else {
			for (int i = 0; i < n; i++)
				if (kw[i])
					perr(p, peek(p)->loc, "positional argument after keyword argument '%s'", kw[i]);
		}
		args[n++] = parse_expr(p);
		if (!accept(p, ","))
			break;
	}
	expect_close(p, ")", open);
	return n;
}

static Val method_call(P *p, Val recv, const char *name, Loc loc);
static Val parse_unary(P *p);
static Val index_val(P *p, Val x, Loc loc);

static Val
parse_primary(P *p)
{
	Token *t = peek(p);
	Loc loc = t->loc;
	if (t->kind == T_INT) {
		next(p);
		if (t->ival == INT64_MIN) // 2^63 (lex.c): only -9223372036854775808 is an int64
			perr(p, loc, "integer literal %.*s is too large (the largest i64 is "
			     "9223372036854775807)", (int)t->len, t->text);
		Val v = {.k = V_INT, .i = t->ival, .loc = loc};
		return v;
	}
	if (t->kind == T_FLOAT) {
		next(p);
		Val v = {.k = V_FLOAT, .f = t->fval, .loc = loc};
		return v;
	}
	if (accept(p, "(")) {
		Val v = parse_expr(p);
		expect_close(p, ")", loc);
		return v;
	}
	if (at(p, "["))
		return parse_list(p);
	if (fe_tok_is(t, "true") || fe_tok_is(t, "false")) {
		next(p);
		Val v = {.k = V_BOOL, .i = fe_tok_is(t, "true"), .loc = loc};
		return v;
	}
	if (t->kind == T_IDENT && !is_keyword(t)) {
		next(p);
		const char *name = tok_str(p, t);
		if (at(p, "(")) {
			// f(args), or recv.method(args) when the name is dotted and its
			// last part is not a function of its own.
			const char *dot = t->quoted ? NULL : strrchr(name, '.');
			if (dot) {
				const char *base = arena_strndup(p->a, name, (size_t)(dot - name));
				Val recv = lookup(p, base, loc, 0);
				if (recv.k != V_IDENT && recv.k != V_PARAMS)
					return method_call(p, recv, dot + 1, loc);
				if (recv.k == V_IDENT)
					unknown_name(p, base, loc);
				perr(p, loc, "'%s' is a parameter prefix, not a tensor", base);
			}
			Scratch *sc = scratch(p);
			int n = parse_args(p, sc->v, sc->s, 64);
			return call(p, name, loc, sc->v, sc->s, n);
		}
		return lookup(p, name, loc, t->quoted);
	}
	if (t->kind == T_EOF || t->kind == T_NEWLINE)
		perr(p, loc, "expected an expression, found %s", tok_desc(p, t));
	perr(p, loc, "expected an expression, found %s", tok_desc(p, t));
}

static Val
parse_postfix(P *p)
{
	Val v = parse_primary(p);
	for (;;) {
		Loc loc = peek(p)->loc;
		if (at(p, "[")) {
			v = index_val(p, v, loc);
		} else if (at(p, ".")) {
			next(p);
			Token *t = peek(p);
			if (t->kind != T_IDENT || t->quoted)
				perr(p, t->loc, "expected a method name after '.', found %s", tok_desc(p, t));
			next(p);
			const char *name = tok_str(p, t);
			if (strchr(name, '.'))
				perr(p, t->loc, "expected a method call");
			v = method_call(p, v, name, t->loc);
		} else {
			return v;
		}
	}
}

static Val
parse_power(P *p)
{
	Val a = parse_postfix(p);
	if (at(p, "**")) {
		Loc loc = next(p)->loc;
		// The right operand is a unary expression, as in Python: x ** -1,
		// and 2 ** 3 ** 2 is 2 ** 9 (right associative).
		enter(p, loc);
		Val b = parse_unary(p);
		leave(p);
		return binop(p, "**", a, b, loc);
	}
	return a;
}

static Val
parse_unary(P *p)
{
	if (at(p, "-")) {
		Loc loc = next(p)->loc;
		// -9223372036854775808: the literal 2^63 negated (the one place
		// it is an int64), unless a power binds it first (-2**63 is
		// -(2**63), which overflows).
		Token *t = peek(p);
		if (t->kind == T_INT && t->ival == INT64_MIN && !fe_tok_is(t + 1, "**")) {
			next(p);
			Val v = {.k = V_INT, .i = INT64_MIN, .loc = loc};
			return v;
		}
		enter(p, loc);
		Val v = parse_unary(p);
		leave(p);
		if (v.k == V_INT) {
			if (v.i == INT64_MIN)
				perr(p, loc, "integer overflow in negation");
			v.i = -v.i;
			v.loc = loc;
			return v;
		}
		if (v.k == V_FLOAT) {
			v.f = -v.f;
			v.loc = loc;
			return v;
		}
		return call(p, "neg", loc, &v, NULL, 1);
	}
	return parse_power(p);
}

static Val
parse_mul(P *p)
{
	Val a = parse_unary(p);
	while (at(p, "*") || at(p, "/") || at(p, "//") || at(p, "%") || at(p, "@")) {
		Token *t = next(p);
		const char *op = tok_str(p, t);
		Val b = parse_unary(p);
		a = binop(p, op, a, b, t->loc);
	}
	return a;
}

static Val
parse_add(P *p)
{
	Val a = parse_mul(p);
	while (at(p, "+") || at(p, "-")) {
		Token *t = next(p);
		Val b = parse_mul(p);
		a = binop(p, t->text[0] == '+' ? "+" : "-", a, b, t->loc);
	}
	return a;
}

static Val parse_cmp(P *p);

static Val
parse_expr(P *p)
{
	enter(p, peek(p)->loc);
	Val v = parse_cmp(p);
	leave(p);
	return v;
}

static Val
parse_cmp(P *p)
{
	Val a = parse_add(p);
	if (at(p, "<") || at(p, ">") || at(p, "<=") || at(p, ">=") || at(p, "==") || at(p, "!=")) {
		Token *t = next(p);
		const char *op = tok_str(p, t);
		Val b = parse_add(p);
		if (is_num(&a) && is_num(&b)) {
			double x = num_f(&a), y = num_f(&b);
			int r = !strcmp(op, "<")    ? x < y
			        : !strcmp(op, ">")  ? x > y
			        : !strcmp(op, "<=") ? x <= y
			        : !strcmp(op, ">=") ? x >= y
			        : !strcmp(op, "==") ? x == y
			                            : x != y;
			Val v = {.k = V_BOOL, .i = r, .loc = t->loc};
			return v;
		}
		a = binop(p, op, a, b, t->loc);
		if (at(p, "<") || at(p, ">") || at(p, "<=") || at(p, ">=") || at(p, "==") || at(p, "!="))
			perr(p, peek(p)->loc, "comparisons do not chain; use and(a, b)");
	}
	return a;
}

// ---------------------------------------------------------------- indexing

// x[i, a:b:s, :] -- basic indexing gives a view (slice, then the integer-
// indexed axes dropped); a single i64 tensor index gives take(x, idx, 0).
static Val
index_val(P *p, Val x, Loc loc)
{
	expect(p, "[");
	Loc open = loc;
	if (x.k != V_NODE)
		perr(p, loc, "cannot index %s", val_desc(&x));
	const Shape *s = ir_shape(p->g, x.n);
	Attrs a;
	ir_attrs_default(OP_slice, &a);
	for (int i = 0; i < s->rank; i++) {
		a.a[0].v[i] = 0;
		a.a[1].v[i] = s->dim[i];
		a.a[2].v[i] = 1;
	}
	a.a[0].n = a.a[1].n = a.a[2].n = s->rank;
	int ax = 0, ndrop = 0;
	int8_t drop[IR_MAXDIM];
	while (!at(p, "]")) {
		Loc iloc = peek(p)->loc;
		Val lo = {0}, hi = {0}, st = {0};
		int isslice = 0;
		if (!at(p, ":"))
			lo = parse_expr(p);
		if (lo.k == V_NODE) {
			if (ax != 0 || !at(p, "]"))
				perr(p, iloc, "a tensor index must be the only index");
			if (p->g->node[lo.n].dtype != DT_I64)
				perr(p, iloc, "tensor indices must be i64, got %s",
				     ir_dtype_name((DType)p->g->node[lo.n].dtype));
			expect(p, "]");
			Val args[3] = {x, lo};
			const char *kw[3] = {NULL, NULL, "axis"};
			Val zero = {.k = V_INT, .i = 0, .loc = iloc};
			args[2] = zero;
			return call(p, "take", loc, args, kw, 3);
		}
		if (accept(p, ":")) {
			isslice = 1;
			if (!at(p, ":") && !at(p, ",") && !at(p, "]"))
				hi = parse_expr(p);
			if (accept(p, ":") && !at(p, ",") && !at(p, "]"))
				st = parse_expr(p);
		}
		if (ax >= s->rank)
			perr(p, iloc, "too many indices for a tensor of rank %d", s->rank);
		int64_t n = s->dim[ax];
		if (!isslice) {
			int64_t i = as_int(p, &lo, "an index");
			if (i < -n || i >= n)
				perr(p, iloc, "index %lld out of range for axis %d of size %lld", (long long)i, ax,
				     (long long)n);
			if (i < 0)
				i += n;
			a.a[0].v[ax] = i;
			a.a[1].v[ax] = i + 1;
			drop[ndrop++] = (int8_t)ax;
		} else {
			int64_t step = st.k ? as_int(p, &st, "a step") : 1;
			if (step < 1)
				perr(p, iloc, "slice step must be positive, got %lld", (long long)step);
			if (step > n && n > 0) // the same slice, and no overflow in its size
				step = n;
			// Python's slice bounds: negative counts from the end, clamped.
			int64_t b = lo.k ? as_int(p, &lo, "a slice bound") : 0;
			int64_t e = hi.k ? as_int(p, &hi, "a slice bound") : n;
			if (b < 0)
				b += n;
			if (e < 0)
				e += n;
			b = b < 0 ? 0 : b > n ? n : b;
			e = e < b ? b : e > n ? n : e;
			a.a[0].v[ax] = b;
			a.a[1].v[ax] = e;
			a.a[2].v[ax] = step;
		}
		ax++;
		if (!accept(p, ","))
			break;
	}
	expect_close(p, "]", open);
	int identity = 1;
	for (int i = 0; i < s->rank; i++)
		identity &= a.a[0].v[i] == 0 && a.a[1].v[i] == s->dim[i] && a.a[2].v[i] == 1;
	NodeId n = x.n;
	if (!identity)
		n = build(p, OP_slice, &n, 1, &a, loc, &x, 1);
	if (ndrop) {
		const Shape *ss = ir_shape(p->g, n);
		Shape t = {0};
		for (int i = 0; i < ss->rank; i++) {
			int dropped = 0;
			for (int k = 0; k < ndrop; k++)
				dropped |= drop[k] == i;
			if (!dropped)
				t.dim[t.rank++] = ss->dim[i];
		}
		n = mk_reshape(p, n, &t, loc);
	}
	Val r = node_val(n, loc);
	if (x.var && !x.view) { // a view of a view: only one level is tracked
		View *w = arena_zalloc(p->a, sizeof *w);
		if (!identity)
			w->slice = a;
		w->ndrop = ndrop;
		memcpy(w->drop, drop, sizeof drop);
		r.var = x.var;
		r.view = w;
	}
	return r;
}

// ---------------------------------------------------------------- calls

static void
attr_from_val(P *p, int op, int k, const Val *v, Attrs *a)
{
	const OpInfo *oi = ir_op(op);
	const AttrSpec *s = &oi->attr[k];
	AttrVal *x = &a->a[k];
	const char *what = arena_printf(p->a, "%s: attribute '%s'", oi->name, s->name);
	if (v->k == V_IDENT && s->kind != AK_DTYPE && s->kind != AK_ENUM)
		unknown_name(p, v->s, v->loc);
	switch (s->kind) {
	case AK_INT:
		x->i = as_int(p, v, what);
		break;
	case AK_FLOAT:
		if (!is_num(v))
			perr(p, v->loc, "%s must be a compile-time number, found %s", what, val_desc(v));
		x->f = num_f(v);
		x->i = v->i; // an integer's exact value (V_FLOAT's i is 0: the graph derives it)
		break;
	case AK_INTS:
		if (v->k == V_LIST) {
			if (v->nitem > IR_MAXDIM)
				perr(p, v->loc, "%s has %d values (at most %d)", what, v->nitem, IR_MAXDIM);
			x->n = v->nitem;
			for (int i = 0; i < v->nitem; i++)
				x->v[i] = as_int(p, &v->item[i], what);
		} else {
			x->n = 1;
			x->v[0] = as_int(p, v, what);
		}
		break;
	case AK_DTYPE:
		if (v->k != V_IDENT)
			perr(p, v->loc, "%s must be a dtype (f32, f64, i64 or bool), found %s", what,
			     val_desc(v));
		if (!ir_dtype_lookup(v->s))
			perr(p, v->loc, "%s: unknown dtype '%s' (f32, f64, i64 or bool)", what, v->s);
		x->i = ir_dtype_lookup(v->s);
		break;
	case AK_ENUM: {
		x->i = -1;
		if (v->k == V_IDENT)
			for (int i = 0; i < s->nenum; i++)
				if (!strcmp(s->enums[i], v->s))
					x->i = i;
		if (x->i >= 0)
			break;
		char list[200] = "";
		for (int i = 0; i < s->nenum; i++)
			snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "",
			         s->enums[i]);
		if (v->k == V_IDENT)
			perr(p, v->loc, "%s: unknown value '%s' (one of %s)", what, v->s, list);
		perr(p, v->loc, "%s must be one of %s, found %s", what, list, val_desc(v));
	}
	case AK_BODY:
		perr(p, v->loc, "%s cannot be given here", what);
	}
}

static void
set_ints(AttrVal *x, int n, int64_t v)
{
	x->n = n;
	for (int i = 0; i < n; i++)
		x->v[i] = v;
}

// Negative axes count from the end, as in NumPy.
static void
norm_axis(P *p, int64_t *ax, int rank, Loc loc, const char *opname)
{
	if (*ax < -rank || *ax >= rank)
		perr(p, loc, "%s: axis %lld out of range for rank %d", opname, (long long)*ax, rank);
	if (*ax < 0)
		*ax += rank;
}

// Where item i of an attribute was written (i < 0: the attribute), for
// carets that point at the offending axis of a list.
static Loc
item_loc(const Val *v, int i, Loc dflt)
{
	if (!v)
		return dflt;
	if (i >= 0 && v->k == V_LIST && i < v->nitem)
		return v->item[i].loc;
	return v->loc;
}

static NodeId body_graph(P *p, const Val *fn, Loc loc, const Val *opv, const NodeId *ops, int nops,
                         int64_t nc, int64_t nx);

// The shape rules of ir/shape.c add and multiply sizes and attributes
// without overflow checks (pad, concat, slice steps, and the window ops:
// conv, the pools and their adjoints); the values for which that would
// overflow int64 are refused here, so that every input still gives a
// diagnostic.  Such sizes are far beyond memory anyway.  Window ops are
// found by their attribute names: padding, dilation, kernel (or the
// weight's spatial sizes), size and groups.
static void
check_shape_arith(P *p, int op, const NodeId *in, int nin, const Attrs *a, Loc loc)
{
	const OpInfo *oi = ir_op(op);
	int64_t t;
	const Shape *x = nin ? ir_shape(p->g, in[0]) : NULL;
	if (op == OP_pad && a->a[0].n == x->rank && a->a[1].n == x->rank) {
		for (int i = 0; i < x->rank; i++)
			if (__builtin_add_overflow(x->dim[i], a->a[0].v[i], &t) ||
			    __builtin_add_overflow(t, a->a[1].v[i], &t) || t > FE_MAXNUMEL)
				perr(p, loc, "pad: the padded size of axis %d is too large", i);
		return;
	}
	if (op == OP_concat && a->a[0].i >= 0 && a->a[0].i < x->rank) {
		int64_t sum = 0;
		for (int k = 0; k < nin; k++) {
			const Shape *y = ir_shape(p->g, in[k]);
			if (y->rank == x->rank &&
			    (__builtin_add_overflow(sum, y->dim[a->a[0].i], &sum) || sum > FE_MAXNUMEL))
				perr(p, loc, "concat: the result is too large on axis %lld", (long long)a->a[0].i);
		}
		return;
	}
	int kp = ir_attr_index(op, "padding"), kd = ir_attr_index(op, "dilation");
	int kk = ir_attr_index(op, "kernel"), ks = ir_attr_index(op, "size");
	int kg = ir_attr_index(op, "groups"), kst = ir_attr_index(op, "step");
	for (int i = 0; kst >= 0 && oi->attr[kst].kind == AK_INTS && i < a->a[kst].n; i++)
		if (a->a[kst].v[i] > FE_MAXNUMEL)
			perr(p, loc, "%s: step %lld is too large", oi->name, (long long)a->a[kst].v[i]);
	const Shape *w = nin == 2 ? ir_shape(p->g, in[1]) : NULL;
	if (kg >= 0 && w && w->rank >= 2 && __builtin_mul_overflow(w->dim[1], a->a[kg].i, &t))
		perr(p, loc, "%s: groups %lld is too large", oi->name, (long long)a->a[kg].i);
	if (kp < 0 || oi->attr[kp].kind != AK_INTS)
		return;
	const AttrVal *pad = &a->a[kp];
	for (int i = 0; i < pad->n; i++) {
		int64_t pp, k = 1, d = kd >= 0 && i < a->a[kd].n ? a->a[kd].v[i] : 1;
		if (kk >= 0 && i < a->a[kk].n)
			k = a->a[kk].v[i];
		else if (w && w->rank >= 3 + i)
			k = w->dim[2 + i];
		if (__builtin_mul_overflow(pad->v[i], 2, &pp) ||
		    (x && x->rank > 2 + i && __builtin_add_overflow(x->dim[2 + i], pp, &t)) ||
		    (ks >= 0 && i < a->a[ks].n && __builtin_add_overflow(a->a[ks].v[i], pp, &t)))
			perr(p, loc, "%s: padding %lld is too large", oi->name, (long long)pad->v[i]);
		if (__builtin_mul_overflow(d, k - 1, &t) || __builtin_add_overflow(t, 1, &t))
			perr(p, loc, "%s: dilation %lld is too large for kernel size %lld", oi->name,
			     (long long)d, (long long)k);
	}
}

// ---------------------------------------------------------------- random ops in functions
//
// A random op's numbers are a function of its `seed` attribute, the run
// seed and the call counter (docs/IR.md, "Random numbers").  A function is
// inlined once per call, so a sampler written inside it (dropout's mask in
// a transformer layer called six times) would draw the same numbers at
// every call site.  So each inlined call gets a salt, made from the salt
// of the scope it is called from, the function's name and the call's
// ordinal among that scope's calls, and a random op inside it takes
// seed_mix(seed, salt) as its seed.  At the top level (forward, the
// initializers) the salt is 0 and a seed is used as written, so the
// canonical form, which prints every node at the top level with its
// resolved seed, parses back to the same graph.  A scan body inherits the
// salt of the scope that calls scan (it is parsed once, not per step).

// splitmix64's finalizer (Steele, Lea and Flood, OOPSLA'14): a bijection
// of 64-bit words whose every output bit depends on every input bit.
static uint64_t
mix64(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

static uint64_t
name_hash(const char *s) // FNV-1a 64
{
	uint64_t h = 1469598103934665603ull;
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	return h;
}

// The salt of the next call from scope sc to function `name` (and counts
// the call).  Never 0, which means "top level".
static uint64_t
call_salt(Scope *sc, const char *name)
{
	uint64_t outer = sc ? sc->salt : 0;
	uint32_t k = sc ? sc->ncall++ : 0;
	uint64_t s = mix64(mix64(outer ^ name_hash(name)) + 0x9E3779B97F4A7C15ull * (k + 1));
	return s ? s : 1;
}

// A seed under a salt: below 2^62, so that it prints and parses back as a
// plain integer.
static int64_t
seed_mix(int64_t seed, uint64_t salt)
{
	if (!salt)
		return seed;
	return (int64_t)(mix64((uint64_t)seed * 0x9E3779B97F4A7C15ull ^ salt) >> 2);
}

// A call of an op of the table as its arguments bind: the operands, the
// attributes (each given one as written, for the carets of diagnostics),
// and the samplers' frontend-only shape= and dtype=.
typedef struct OpCall {
	int op;
	const OpInfo *oi;
	Val ops[64];
	int nops;
	Attrs a;
	int given[IR_MAXATTR];
	const Val *aval[IR_MAXATTR]; // each given attribute as written
	Val shape_kw, dtype_kw;      // samplers: frontend-only shape= and dtype=
} OpCall;

// Binds the arguments of a call: positional arguments beyond the operands
// bind attributes in spec order, keywords bind them by name; then the
// operand count is checked.
static void
bind_args(P *p, OpCall *oc, Loc loc, Val *args, const char **kw, int nargs)
{
	int op = oc->op;
	const OpInfo *oi = oc->oi;
	Val *ops = oc->ops;
	int *given = oc->given, nextattr = 0;
	int variadic = oi->arity < 0;
	for (int i = 0; i < nargs; i++) {
		if (kw && kw[i]) {
			int k = ir_attr_index(op, kw[i]);
			if (k < 0 && (oi->flags & F_RANDOM) && !(oi->flags & F_FACTORY) && !strcmp(kw[i], "shape")) {
				oc->shape_kw = args[i];
				continue;
			}
			if (k < 0 && (oi->flags & F_RANDOM) && !(oi->flags & F_FACTORY) && !strcmp(kw[i], "dtype")) {
				oc->dtype_kw = args[i];
				continue;
			}
			if (k < 0) {
				char list[200] = "";
				for (int j = 0; j < oi->nattr; j++)
					snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", j ? ", " : "",
					         oi->attr[j].name);
				perr(p, args[i].loc, "%s has no attribute '%s' (%s%s)", oi->name, kw[i],
				     oi->nattr ? "its attributes: " : "it has none", list);
			}
			if (given[k])
				perr(p, args[i].loc, "%s: attribute '%s' given twice", oi->name, kw[i]);
			attr_from_val(p, op, k, &args[i], &oc->a);
			given[k] = 1;
			oc->aval[k] = &args[i];
			continue;
		}
		if (variadic || oc->nops < oi->arity) {
			if (variadic && args[i].k == V_LIST) { // concat([a, b], axis=0)
				for (int j = 0; j < args[i].nitem; j++) {
					if (oc->nops == 64)
						perr(p, args[i].item[j].loc, "too many operands (at most 64)");
					ops[oc->nops++] = args[i].item[j];
				}
				continue;
			}
			if (oc->nops == 64)
				perr(p, args[i].loc, "too many operands (at most 64)");
			ops[oc->nops++] = args[i];
			continue;
		}
		while (nextattr < oi->nattr && given[nextattr])
			nextattr++;
		if (nextattr >= oi->nattr)
			perr(p, args[i].loc, "too many arguments for %s (it takes %d operand%s%s)", oi->name, oi->arity,
			     oi->arity == 1 ? "" : "s",
			     oi->nattr ? arena_printf(p->a, " and %d attribute%s", oi->nattr, oi->nattr == 1 ? "" : "s")
			               : "");
		attr_from_val(p, op, nextattr, &args[i], &oc->a);
		oc->aval[nextattr] = &args[i];
		given[nextattr++] = 1;
	}
	if (!variadic && oc->nops < oi->arity)
		perr(p, loc, "%s takes %d operand%s, got %d", oi->name, oi->arity, oi->arity == 1 ? "" : "s",
		     oc->nops);
	if (variadic && oc->nops == 0)
		perr(p, loc, "%s needs at least one operand", oi->name);
	if (op == OP_input)
		perr(p, loc, "inputs are declared with param, const or as arguments of forward");
	if (op == OP_scan)
		perr(p, loc, "scan takes its body first: scan(body, operands..., ncarry=N, nxs=M)");
}

// matmul broadcasts its batch axes (NumPy): (T, N, K) @ (K, M).  Returns 1
// with the result in *folded when the call became one folded GEMM; else
// the operands are broadcast to common batch axes where they can be.
static int
matmul_batch(P *p, OpCall *oc, Loc loc, Val *folded)
{
	Val *ops = oc->ops;
	if (!(oc->nops == 2 && ops[0].k == V_NODE && ops[1].k == V_NODE))
		return 0;
	const Shape *sa = ir_shape(p->g, ops[0].n), *sb = ir_shape(p->g, ops[1].n);
	// Against one rank-2 matrix (linear's weight) the batch axes are rows:
	// (T, N, K) @ (K, M) is reshape((T·N, K) @ (K, M), (T, N, M)), one GEMM.
	// Broadcasting the matrix instead makes T GEMMs and, in reverse mode,
	// T partial weight gradients and their sum, where the folded form's
	// gradient is the single GEMM (T·N, K)ᵀ @ (T·N, M).  Only when the
	// shapes and dtypes agree: otherwise the general path reports them.
	if (sa->rank >= 3 && sb->rank == 2 && sa->dim[sa->rank - 1] == sb->dim[0] &&
	    p->g->node[ops[0].n].dtype == p->g->node[ops[1].n].dtype) {
		// The rows are the product of the leading axes, not numel / K:
		// K may be 0 (an empty contraction, whose result is zeros).
		Shape rows = {.rank = 2, .dim = {1}}, out = *sa;
		for (int i = 0; i + 1 < sa->rank; i++)
			rows.dim[0] *= sa->dim[i];
		rows.dim[1] = sa->dim[sa->rank - 1];
		out.dim[out.rank - 1] = sb->dim[1];
		Attrs none;
		ir_attrs_default(OP_matmul, &none);
		NodeId mm[2] = {mk_reshape(p, ops[0].n, &rows, loc), ops[1].n};
		NodeId n = build(p, OP_matmul, mm, 2, &none, loc, ops, oc->nops);
		*folded = node_val(mk_reshape(p, n, &out, loc), loc);
		return 1;
	}
	if (sa->rank >= 2 && sb->rank >= 2) {
		Shape ba = *sa, bb = *sb, bc;
		ba.rank -= 2;
		bb.rank -= 2;
		if (ir_broadcast_shapes(&ba, &bb, &bc) && bc.rank + 2 <= IR_MAXDIM) {
			for (int i = 0; i < 2; i++) {
				const Shape *s = i ? sb : sa;
				Shape t = bc;
				t.dim[t.rank++] = s->dim[s->rank - 2];
				t.dim[t.rank++] = s->dim[s->rank - 1];
				ops[i].n = mk_broadcast(p, ops[i].n, &t, loc, ops, 2);
			}
		}
	}
	return 0;
}

// The shape of the first operand, or NULL when it is not a tensor.
static const Shape *
first_shape(P *p, const OpCall *oc)
{
	return oc->nops && oc->ops[0].k == V_NODE ? ir_shape(p->g, oc->ops[0].n) : NULL;
}

// Defaults that depend on the operands, and NumPy's negative axes.
static void
operand_defaults(P *p, OpCall *oc, Loc loc)
{
	int op = oc->op;
	const OpInfo *oi = oc->oi;
	const Shape *x0 = first_shape(p, oc);
	int rank0 = x0 ? x0->rank : 0;
	int *given = oc->given;
	for (int k = 0; k < oi->nattr; k++) {
		const AttrSpec *s = &oi->attr[k];
		AttrVal *x = &oc->a.a[k];
		if (!strcmp(s->name, "axes") && !given[k]) {
			x->n = rank0;
			for (int i = 0; i < rank0; i++)
				x->v[i] = i;
			given[k] = 1;
		}
		if (!strcmp(s->name, "axes") || !strcmp(s->name, "perm"))
			for (int i = 0; i < x->n; i++)
				norm_axis(p, &x->v[i], rank0, item_loc(oc->aval[k], i, loc), oi->name);
		if (!strcmp(s->name, "axis") && given[k] && op != OP_iota && op != OP_concat)
			norm_axis(p, &x->i, rank0, item_loc(oc->aval[k], -1, loc), oi->name);
		if (!strcmp(s->name, "shape") && !given[k] && p->mode == M_INIT) {
			x->n = p->init_shape.rank;
			memcpy(x->v, p->init_shape.dim, sizeof(int64_t) * (size_t)x->n);
			given[k] = 1;
		}
		if (!strcmp(s->name, "dtype") && !given[k] && p->mode == M_INIT &&
		    ir_dtype_is_float(p->init_dtype) && (oi->flags & F_FACTORY))
			x->i = p->init_dtype;
	}
	if (op == OP_concat && given[0]) {
		if (oc->nops && oc->ops[0].k == V_NODE)
			norm_axis(p, &oc->a.a[0].i, rank0, item_loc(oc->aval[0], -1, loc), oi->name);
	}
}

// Window ops: one value per spatial axis; a single value is repeated;
// strides default to 1 (pools: to the kernel), padding 0, dilation 1.
static void
window_defaults(P *p, OpCall *oc)
{
	int op = oc->op;
	const OpInfo *oi = oc->oi;
	const Shape *x0 = first_shape(p, oc);
	int rank0 = x0 ? x0->rank : 0;
	Attrs *a = &oc->a;
	int *given = oc->given;
	int ns = op == OP_conv ? (rank0 >= 3 ? rank0 - 2 : 1) : a->a[0].n;
	if (op != OP_conv && given[0] && a->a[0].n == 1 && rank0 == 4)
		ns = 2, set_ints(&a->a[0], 2, a->a[0].v[0]);
	for (int k = 0; k < oi->nattr; k++) {
		const char *nm = oi->attr[k].name;
		AttrVal *x = &a->a[k];
		if (oi->attr[k].kind != AK_INTS)
			continue;
		if (!given[k]) {
			if (op != OP_conv && k == 0)
				continue; // a pool's kernel has no default
			if (!strcmp(nm, "stride") && op != OP_conv)
				*x = a->a[0];
			else
				set_ints(x, ns, !strcmp(nm, "padding") ? 0 : 1);
			given[k] = 1;
		} else if (x->n == 1 && ns > 1)
			set_ints(x, ns, x->v[0]);
	}
}

// reshape: one -1 is inferred from the element count.
static void
reshape_infer(P *p, OpCall *oc, Loc loc)
{
	const Shape *x0 = first_shape(p, oc);
	AttrVal *sh = &oc->a.a[0];
	int64_t known = 1;
	int neg = -1;
	for (int i = 0; i < sh->n; i++) {
		if (sh->v[i] == -1) {
			if (neg >= 0)
				perr(p, loc, "reshape: only one dimension can be -1");
			neg = i;
		} else if (sh->v[i] > 0) {
			if (__builtin_mul_overflow(known, sh->v[i], &known) || known > FE_MAXNUMEL)
				perr(p, item_loc(oc->aval[0], -1, loc), "reshape: the shape has too many elements");
		} else if (sh->v[i] == 0)
			known = 0;
	}
	if (neg >= 0 && x0) {
		int64_t total = ir_numel(x0);
		if (!known || total % known)
			perr(p, loc, "reshape: cannot infer -1: %lld elements do not divide by %lld",
			     (long long)total, (long long)known);
		sh->v[neg] = total / known;
	}
}

// A sampler's operands (F_RANDOM, not a factory): its dtype (dtype=, the
// declared type in an initializer, else the operands' float type) and, with
// a shape (shape=, or the declared one in an initializer), its operands
// broadcast to the sample's shape.
static void
sampler_operands(P *p, OpCall *oc, NodeId *in, Loc loc)
{
	Val *ops = oc->ops;
	int nops = oc->nops;
	DType dt = DT_NONE;
	if (oc->dtype_kw.k) {
		if (oc->dtype_kw.k != V_IDENT || !ir_dtype_lookup(oc->dtype_kw.s))
			perr(p, oc->dtype_kw.loc, "dtype must be f32 or f64");
		dt = ir_dtype_lookup(oc->dtype_kw.s);
	} else if (p->mode == M_INIT && ir_dtype_is_float(p->init_dtype))
		dt = p->init_dtype;
	else {
		dt = result_dtype(p, ops, nops);
		if (!ir_dtype_is_float(dt))
			dt = DT_F32;
	}
	Shape s = {0};
	int haveshape = 0;
	if (oc->shape_kw.k) {
		AttrVal sv;
		Attrs tmp;
		ir_attrs_default(OP_reshape, &tmp);
		attr_from_val(p, OP_reshape, 0, &oc->shape_kw, &tmp);
		sv = tmp.a[0];
		s.rank = sv.n;
		memcpy(s.dim, sv.v, sizeof(int64_t) * (size_t)sv.n);
		haveshape = 1;
	} else if (p->mode == M_INIT) {
		s = p->init_shape;
		haveshape = 1;
	}
	if (haveshape) {
		// Numbers become full tensors of the sample's shape at once.
		for (int i = 0; i < nops; i++)
			if (ops[i].k != V_NODE)
				ops[i] = node_val(as_node(p, &ops[i], dt, &s), ops[i].loc);
	}
	unify(p, oc->oi->name, ops, nops, dt, in, loc);
	if (haveshape)
		for (int i = 0; i < nops; i++) {
			Val o = node_val(in[i], ops[i].loc);
			in[i] = mk_broadcast(p, in[i], &s, loc, &o, 1);
		}
}

// where's operands: a bool condition, two values of one dtype, all three
// broadcast together.
static void
where_operands(P *p, OpCall *oc, NodeId *in, Loc loc)
{
	Val *ops = oc->ops;
	Val cv = ops[0];
	NodeId c = as_node(p, &cv, DT_BOOL, NULL);
	if (p->g->node[c].dtype != DT_BOOL)
		perr(p, cv.loc, "where: the condition must be bool, got %s",
		     ir_dtype_name((DType)p->g->node[c].dtype));
	Val all[3] = {node_val(c, cv.loc), ops[1], ops[2]};
	DType dt = result_dtype(p, all + 1, 2);
	NodeId tmp[3];
	unify(p, oc->oi->name, all + 1, 2, dt, tmp + 1, loc);
	// Broadcast all three together.
	Shape s;
	if (!ir_broadcast_shapes(ir_shape(p->g, c), ir_shape(p->g, tmp[1]), &s)) {
		snprintf(p->err, sizeof p->err, "where: cannot broadcast the condition with the values");
		op_error(p, loc, all, 3);
	}
	in[0] = mk_broadcast(p, c, &s, loc, all, 3);
	in[1] = mk_broadcast(p, tmp[1], &s, loc, all, 3);
	in[2] = mk_broadcast(p, tmp[2], &s, loc, all, 3);
}

// The operands as nodes into in: elementwise ops and samplers broadcast
// and promote; others take their operands as they are.
static void
bind_operands(P *p, OpCall *oc, NodeId *in, Loc loc)
{
	int op = oc->op;
	const OpInfo *oi = oc->oi;
	Val *ops = oc->ops;
	int nops = oc->nops;
	if (oi->flags & F_ELEMWISE) {
		DType dt = DT_NONE;
		if (op == OP_and || op == OP_or)
			dt = DT_BOOL;
		int allnum = 1;
		for (int i = 0; i < nops; i++)
			allnum &= ops[i].k != V_NODE;
		// log(2) of numbers alone: a float op makes them f32, as torch does.
		if (allnum && !dt && !(oi->flags & F_INTOK) && oi->shape != shape_compare &&
		    !ir_dtype_is_float(result_dtype(p, ops, nops)))
			dt = DT_F32;
		unify(p, oi->name, ops, nops, dt, in, loc);
	} else if ((oi->flags & F_RANDOM) && !(oi->flags & F_FACTORY))
		sampler_operands(p, oc, in, loc);
	else if (op == OP_where)
		where_operands(p, oc, in, loc);
	else {
		for (int i = 0; i < nops; i++) {
			DType dt = DT_NONE;
			if (ops[i].k != V_NODE && nops > 1) { // a number beside tensors: theirs
				for (int j = 0; j < nops; j++)
					if (ops[j].k == V_NODE && j != i)
						dt = (DType)p->g->node[ops[j].n].dtype;
			}
			in[i] = as_node(p, &ops[i], dt, NULL);
		}
	}
}

// Calls an op of the table: its arguments bound, matmul's batch axes
// broadcast, the attributes' defaults filled in (all axes for
// reductions, unit strides, the declared type in initializers) and
// checked, a random op's seed salted by its call site, the operands
// converted, then the node.
static Val
call_op(P *p, int op, Loc loc, Val *args, const char **kw, int nargs)
{
	OpCall oc = {.op = op, .oi = ir_op(op)};
	const OpInfo *oi = oc.oi;
	ir_attrs_default(op, &oc.a);
	bind_args(p, &oc, loc, args, kw, nargs);
	Val folded;
	if (op == OP_matmul && matmul_batch(p, &oc, loc, &folded))
		return folded;
	operand_defaults(p, &oc, loc);
	if (op == OP_conv || op == OP_max_pool || op == OP_avg_pool)
		window_defaults(p, &oc);
	else if (op == OP_reshape && oc.given[0])
		reshape_infer(p, &oc, loc);
	for (int k = 0; k < oi->nattr; k++)
		if (!oc.given[k] && !oi->attr[k].has_default)
			perr(p, loc, "%s: missing attribute '%s'", oi->name, oi->attr[k].name);
	if ((oi->flags & F_RANDOM) && p->sc && p->sc->salt) {
		int k = ir_attr_index(op, "seed");
		FADC_ASSERT(k >= 0, "a random op of ops.def without a seed attribute");
		oc.a.a[k].i = seed_mix(oc.a.a[k].i, p->sc->salt);
	}
	NodeId in[64];
	bind_operands(p, &oc, in, loc);
	check_shape_arith(p, op, in, oc.nops, &oc.a, loc);
	NodeId n = build(p, op, in, oc.nops, &oc.a, loc, oc.ops, oc.nops);
	return node_val(n, loc);
}

// ---------------------------------------------------------------- functions

// A wrong call of a def: the message, and where the def is.
static _Noreturn void
def_error(P *p, const Def *d, Loc loc, const char *msg)
{
	diag_emit(&p->d, loc, "%s", msg);
	diag_note(&p->d, d->loc, "'%s' defined here", d->name);
	note_calls(p);
	diag_fail(&p->d);
}

// Checks a function's result against its declared type (`-> type` or
// `-> (type, ...)`), forward's included: a compile-time number becomes a
// tensor of the declared type, anything else must match it exactly, and
// the counts must agree both ways.  p->tok is d's token array.
static void
check_result(P *p, const Def *d, Val *ret)
{
	if (!d->ret_tok)
		return;
	uint32_t save = p->pos;
	p->pos = d->ret_tok;
	int paren = accept(p, "(");
	int n = ret->k == V_TUPLE ? ret->nitem : ret->k ? 1 : 0;
	int ntype = 0;
	for (int i = 0;; i++) {
		DType dt;
		Shape s;
		Loc tl = peek(p)->loc;
		parse_type(p, &dt, &s);
		ntype++;
		if (i >= n)
			perr(p, tl, "'%s' returns %d value%s, its type says more", d->name, n,
			     n == 1 ? "" : "s");
		Val *rv = ret->k == V_TUPLE ? &ret->item[i] : ret;
		NodeId rn = as_node(p, rv, dt, &s);
		if (p->g->node[rn].dtype != dt || !ir_shape_eq(ir_shape(p->g, rn), &s)) {
			char want[200], got[200];
			ir_type_str(dt, &s, want, sizeof want);
			type_str(p, rn, got, sizeof got);
			perr(p, rv->loc, "'%s' returns %s where its type says %s", d->name, got, want);
		}
		*rv = node_val(rn, rv->loc);
		if (!paren || !accept(p, ","))
			break;
		if (i + 1 == n && !at(p, ")"))
			perr(p, peek(p)->loc, "'%s' returns %d value%s, its type says more", d->name, n,
			     n == 1 ? "" : "s");
	}
	if (ntype < n) {
		Val *extra = &ret->item[ntype]; // n > 1: a tuple
		perr(p, extra->loc, "'%s' returns %d values, its type says %d", d->name, n, ntype);
	}
	p->pos = save;
}

// Binds a def's arguments in a fresh scope and parses its body; returns
// its value (V_TUPLE for several).
static Val
inline_def(P *p, Def *d, Loc loc, Val *args, const char **kw, int nargs)
{
	check_recursion(p, d, loc);
	Val bound[32];
	int have[32] = {0};
	int npos = 0;
	for (int i = 0; i < nargs; i++) {
		int k = -1;
		if (kw && kw[i]) {
			for (int j = 0; j < d->narg; j++)
				if (!strcmp(d->arg[j].name, kw[i]))
					k = j;
			if (k < 0)
				def_error(p, d, args[i].loc, arena_printf(p->a, "'%s' has no argument '%s'", d->name, kw[i]));
		} else {
			k = npos++;
			if (k >= d->narg)
				def_error(p, d, args[i].loc,
				          arena_printf(p->a, "too many arguments for '%s' (it takes %d)", d->name, d->narg));
		}
		if (have[k])
			def_error(p, d, args[i].loc,
			          arena_printf(p->a, "argument '%s' of '%s' given twice", d->arg[k].name, d->name));
		bound[k] = args[i];
		have[k] = 1;
	}
	Scope sc = {.callsite = loc, .fname = d->name, .salt = call_salt(p->sc, d->name)};
	Scope *outer = p->sc;
	Token *otok = p->tok;
	uint32_t opos = p->pos;
	size_check(p, loc, d);
	enter(p, loc);
	p->callee[p->ncall] = d;
	p->isbody[p->ncall] = 0;
	p->callresume[p->ncall] = opos;
	p->callstart[p->ncall] = p->nbuilt;
	p->calls[p->ncall++] = loc;
	p->sc = &sc;
	p->tok = d->tok;
	for (int k = 0; k < d->narg; k++) {
		DefArg *da = &d->arg[k];
		Val v;
		if (have[k]) {
			v = bound[k];
		} else if (da->def_tok) {
			p->pos = da->def_tok;
			v = parse_expr(p);
		} else {
			p->sc = outer, p->tok = otok;
			p->ncall--;
			def_error(p, d, loc, arena_printf(p->a, "missing argument '%s' of '%s'", da->name, d->name));
		}
		Var *var = scope_bind(p, da->name, da->loc);
		switch (da->kind) {
		case A_INT:
			v.i = as_int(p, &v, arena_printf(p->a, "argument '%s'", da->name));
			v.k = V_INT;
			break;
		case A_FLOAT:
			if (!is_num(&v))
				perr(p, v.loc, "argument '%s' of '%s' must be a compile-time number", da->name,
				     d->name);
			v.f = num_f(&v);
			v.k = V_FLOAT;
			break;
		case A_PARAMS:
			if (v.k == V_PARAMS)
				break;
			if (v.k != V_IDENT)
				perr(p, v.loc, "argument '%s' of '%s' must be a parameter prefix such as layer1.0",
				     da->name, d->name);
			v.k = V_PARAMS;
			break;
		case A_TENSOR: {
			DType dt;
			Shape s;
			uint32_t save = p->pos;
			p->pos = da->type_tok;
			parse_type(p, &dt, &s);
			p->pos = save;
			NodeId n = as_node(p, &v, dt, &s);
			if (p->g->node[n].dtype != dt || !ir_shape_eq(ir_shape(p->g, n), &s)) {
				char want[200], got[200];
				ir_type_str(dt, &s, want, sizeof want);
				type_str(p, n, got, sizeof got);
				diag_emit(&p->d, v.loc, "argument '%s' of '%s' must be %s, got %s", da->name,
				          d->name, want, got);
				diag_note(&p->d, da->loc, "'%s' declared here as %s", da->name, want);
				if (v.k == V_NODE && v.var && v.var->loc && !v.view)
					diag_note(&p->d, v.var->loc, "'%s' declared here as %s", v.var->name, got);
				note_calls(p);
				diag_fail(&p->d);
			}
			v.n = n;
			v.k = V_NODE;
			break;
		}
		case A_ANY:
			if (v.k == V_IDENT)
				unknown_name(p, v.s, v.loc);
			break;
		}
		// An argument read straight from a variable aliases it: in-place
		// writes inside the function reach the caller's variable.
		if (v.k == V_NODE && v.var && !v.view) {
			var->base = v.var;
			var->basever = v.var->version;
			var->input = v.var->input;
		}
		v.var = NULL;
		v.view = NULL;
		var->v = v;
	}
	p->pos = d->body;
	Val ret = {0};
	Loc retloc = 0;
	parse_body(p, &ret, &retloc);
	check_result(p, d, &ret);
	p->sc = outer;
	p->tok = otok;
	p->pos = opos;
	p->ncall--;
	leave(p);
	int64_t made = p->nbuilt - p->callstart[p->ncall];
	if (d->minsize < 0 || made < d->minsize) {
		d->minsize = made;
		p->lbgen++;
	}
	if (ret.k == V_NODE) {
		ret.var = NULL;
		ret.view = NULL;
	}
	ret.loc = loc;
	return ret;
}

static Val scan_call(P *p, Loc loc, Val *args, const char **kw, int nargs);

static int
check_nargs(P *p, const char *f, Loc loc, int nargs, int lo, int hi)
{
	if (nargs < lo || nargs > hi) {
		if (lo == hi)
			perr(p, loc, "%s takes %d argument%s, got %d", f, lo, lo == 1 ? "" : "s", nargs);
		perr(p, loc, "%s takes %d to %d arguments, got %d", f, lo, hi, nargs);
	}
	return nargs;
}

static Val
tensor_arg(P *p, Val *v)
{
	if (v->k != V_NODE) { // a number is a scalar tensor; anything else an error
		NodeId n = as_node(p, v, DT_NONE, NULL);
		*v = node_val(n, v->loc);
	}
	return *v;
}

static Val
int_val(int64_t i, Loc loc)
{
	Val v = {.k = V_INT, .i = i, .loc = loc};
	return v;
}

static Val
list_val(P *p, const int64_t *v, int n, Loc loc)
{
	Val r = {.k = V_LIST, .nitem = n, .loc = loc};
	r.item = arena_alloc_array(p->a, (size_t)n + 1, sizeof(Val));
	for (int i = 0; i < n; i++)
		r.item[i] = int_val(v[i], loc);
	return r;
}

// Keyword argument lookup for the sugar functions below.
static Val *
kwarg(Val *args, const char **kw, int nargs, const char *name, int pos)
{
	int npos = 0;
	for (int i = 0; i < nargs; i++) {
		if (kw && kw[i]) {
			if (!strcmp(kw[i], name))
				return &args[i];
		} else if (npos++ == pos)
			return &args[i];
	}
	return NULL;
}

static void
check_kwargs(P *p, const char *f, Val *args, const char **kw, int nargs, const char *const *names)
{
	for (int i = 0; kw && i < nargs; i++)
		if (kw[i]) {
			int ok = 0;
			for (int j = 0; names[j]; j++)
				ok |= !strcmp(names[j], kw[i]);
			if (!ok)
				perr(p, args[i].loc, "%s has no argument '%s'", f, kw[i]);
		}
}

// dropout(x, p=0.5, training=1, seed=0): torch.nn.functional.dropout.  In
// training, each element is kept with probability 1 - p and scaled by
// 1 / (1 - p), else zeroed: x * bernoulli(1 - p) / (1 - p), the mask drawn
// by a `bernoulli` node.  Like PyTorch, p = 0 or training = 0 give x itself
// (no node) and p = 1 gives zeros.
//
// The mask is a pure function of the node's seed, the run seed and the
// call counter (Philox), so every derivative of one call, which reads
// the same node, sees the same mask, and a finite difference at a fixed
// call counter sees a fixed one.  Each dropout call is a call site of its
// own (call_salt, "dropout"): two dropouts, or one dropout in a function
// inlined twice, draw independent masks; `seed` chooses another stream.
static Val
dropout_call(P *p, Loc loc, Val *args, const char **kw, int nargs)
{
	static const char *const names[] = {"input", "p", "training", "seed", NULL};
	check_kwargs(p, "dropout", args, kw, nargs, names);
	check_nargs(p, "dropout", loc, nargs, 1, 4);
	Val *xv = kwarg(args, kw, nargs, "input", 0);
	if (!xv)
		perr(p, loc, "dropout: missing argument 'input'");
	Val x = tensor_arg(p, xv);
	DType dt = (DType)p->g->node[x.n].dtype;
	if (!ir_dtype_is_float(dt))
		perr(p, x.loc, "dropout: input must be f32 or f64, got %s", ir_dtype_name(dt));
	Val *pv = kwarg(args, kw, nargs, "p", 1), *tv = kwarg(args, kw, nargs, "training", 2),
	    *sv = kwarg(args, kw, nargs, "seed", 3);
	double prob = 0.5;
	if (pv) {
		if (!is_num(pv) || pv->k == V_BOOL)
			perr(p, pv->loc, "dropout: p must be a compile-time number, got %s", val_desc(pv));
		prob = num_f(pv);
		if (!(prob >= 0 && prob <= 1))
			perr(p, pv->loc, "dropout: p must be in [0, 1], got %g", prob);
	}
	int64_t training = tv ? as_int(p, tv, "dropout: training") : 1;
	int64_t seed = sv ? as_int(p, sv, "dropout: seed") : 0;
	// The call's salt is taken in every case, so that switching one site
	// off (p = 0, training = 0) leaves the masks of the others as they were.
	uint64_t salt = call_salt(p->sc, "dropout");
	if (!training || prob == 0)
		return node_val(x.n, loc);
	const Shape *s = ir_shape(p->g, x.n);
	if (prob == 1)
		return node_val(mk_full(p, 0, 0, dt, s, loc), loc);
	Val q = node_val(mk_full(p, 1 - prob, 0, dt, s, loc), loc);
	Val seedv = int_val(seed_mix(seed, salt), loc);
	Val bargs[2] = {q, seedv};
	const char *bkw[2] = {NULL, "seed"};
	Val keep = call_op(p, OP_bernoulli, loc, bargs, bkw, 2);
	// noise = keep / (1 - p) in x's dtype, then x * noise: PyTorch's order.
	Val scale = {.k = V_FLOAT, .f = 1 - prob, .loc = loc};
	Val dv[2] = {keep, scale};
	Val noise = call(p, "div", loc, dv, NULL, 2);
	Val mv[2] = {x, noise};
	return call(p, "mul", loc, mv, NULL, 2);
}

// Functions of the surface language that are not ops of the table: each
// lowers to ops (conv2d with a bias, transpose, flatten, ...).  Returns 0
// if `name` is none of them.
static int
sugar(P *p, const char *name, Loc loc, Val *args, const char **kw, int nargs, Val *out)
{
	if (!strcmp(name, "scan")) {
		*out = scan_call(p, loc, args, kw, nargs);
		return 1;
	}
	// These take their arguments by position only.
	static const char *const positional[] = {"transpose", "flatten", "unsqueeze", "squeeze", "clone",
	                                         "contiguous", "detach_copy", "cpu", "cuda", "zeros_like",
	                                         "ones_like", "full_like", "fill", "size", "shape", "rank",
	                                         NULL};
	for (int i = 0; positional[i]; i++)
		if (!strcmp(name, positional[i]))
			for (int j = 0; kw && j < nargs; j++)
				if (kw[j])
					perr(p, args[j].loc, "%s takes no keyword arguments (found '%s=')", name, kw[j]);
	if (!strcmp(name, "conv1d") || !strcmp(name, "conv2d")) {
		static const char *const names[] = {"input", "weight", "bias", "stride", "padding",
		                                    "dilation", "groups", NULL};
		check_kwargs(p, name, args, kw, nargs, names);
		check_nargs(p, name, loc, nargs, 2, 7);
		int ns = name[4] == '1' ? 1 : 2;
		Val cargs[6];
		const char *ckw[6] = {NULL, NULL, "stride", "padding", "dilation", "groups"};
		int nc = 0;
		cargs[nc++] = *kwarg(args, kw, nargs, "input", 0);
		Val *w = kwarg(args, kw, nargs, "weight", 1);
		if (!w)
			perr(p, loc, "%s: missing argument 'weight'", name);
		cargs[nc++] = *w;
		for (int k = 2; k < 6; k++) {
			Val *v = kwarg(args, kw, nargs, ckw[k], k + 1);
			if (v) {
				ckw[nc] = ckw[k];
				cargs[nc++] = *v;
			}
		}
		tensor_arg(p, &cargs[0]);
		if (ir_shape(p->g, cargs[0].n)->rank != ns + 2)
			perr(p, cargs[0].loc, "%s: input must have rank %d, got %d", name, ns + 2,
			     ir_shape(p->g, cargs[0].n)->rank);
		Val r = call_op(p, OP_conv, loc, cargs, ckw, nc);
		Val *b = kwarg(args, kw, nargs, "bias", 2);
		if (b) {
			// y + b[None, :, None, ...]
			NodeId bn = as_node(p, b, (DType)p->g->node[r.n].dtype, NULL);
			const Shape *bs = ir_shape(p->g, bn);
			if (bs->rank != 1)
				perr(p, b->loc, "%s: bias must have rank 1, got %d", name, bs->rank);
			Shape t = {.rank = ns + 1};
			t.dim[0] = bs->dim[0];
			for (int i = 1; i <= ns; i++)
				t.dim[i] = 1;
			Val bv = node_val(mk_reshape(p, bn, &t, b->loc), b->loc);
			bv.var = b->var;
			Val sum[2] = {r, bv};
			r = call(p, "add", loc, sum, NULL, 2);
		}
		*out = r;
		return 1;
	}
	if (!strcmp(name, "max_pool1d") || !strcmp(name, "max_pool2d") || !strcmp(name, "avg_pool1d") ||
	    !strcmp(name, "avg_pool2d") || !strcmp(name, "adaptive_avg_pool1d") ||
	    !strcmp(name, "adaptive_avg_pool2d")) {
		int ns = strstr(name, "1d") ? 1 : 2;
		int op = name[0] == 'm' ? OP_max_pool : name[0] == 'a' && name[1] == 'v' ? OP_avg_pool
		                                                                        : OP_adaptive_avg_pool;
		check_nargs(p, name, loc, nargs, 2, 6);
		Val a2[6];
		const char *k2[6];
		const OpInfo *oi = ir_op(op);
		for (int i = 0; i < nargs; i++) {
			a2[i] = args[i];
			k2[i] = kw ? kw[i] : NULL;
			// A single size means the same on every spatial axis; only
			// for the attributes that are lists (kernel, stride, ...):
			// count_include_pad stays a number.  Positional argument i
			// binds attribute i - 1 (the input is the only operand).
			int k = k2[i] ? ir_attr_index(op, k2[i]) : i - 1;
			int islist = k >= 0 && k < oi->nattr && oi->attr[k].kind == AK_INTS;
			if (i > 0 && a2[i].k == V_INT && islist) {
				int64_t v[2] = {a2[i].i, a2[i].i};
				a2[i] = list_val(p, v, ns, a2[i].loc);
			}
		}
		tensor_arg(p, &a2[0]);
		if (ir_shape(p->g, a2[0].n)->rank != ns + 2)
			perr(p, a2[0].loc, "%s: input must have rank %d, got %d", name, ns + 2,
			     ir_shape(p->g, a2[0].n)->rank);
		*out = call_op(p, op, loc, a2, k2, nargs);
		return 1;
	}
	if (!strcmp(name, "dropout")) {
		*out = dropout_call(p, loc, args, kw, nargs);
		return 1;
	}
	if (!strcmp(name, "transpose")) {
		check_nargs(p, name, loc, nargs, 3, 3);
		Val x = tensor_arg(p, &args[0]);
		int r = ir_shape(p->g, x.n)->rank;
		int64_t d0 = as_int(p, &args[1], "an axis"), d1 = as_int(p, &args[2], "an axis");
		norm_axis(p, &d0, r, args[1].loc, name);
		norm_axis(p, &d1, r, args[2].loc, name);
		int64_t perm[IR_MAXDIM];
		for (int i = 0; i < r; i++)
			perm[i] = i;
		perm[d0] = d1;
		perm[d1] = d0;
		Val a2[2] = {x, list_val(p, perm, r, loc)};
		*out = call_op(p, OP_permute, loc, a2, NULL, 2);
		return 1;
	}
	if (!strcmp(name, "flatten") || !strcmp(name, "unsqueeze") || !strcmp(name, "squeeze")) {
		check_nargs(p, name, loc, nargs, name[0] == 'f' ? 1 : 2, name[0] == 'f' ? 3 : 2);
		Val x = tensor_arg(p, &args[0]);
		const Shape *s = ir_shape(p->g, x.n);
		Shape t = {0};
		if (name[0] == 'f') {
			int64_t b = nargs > 1 ? as_int(p, &args[1], "an axis") : 0;
			int64_t e = nargs > 2 ? as_int(p, &args[2], "an axis") : -1;
			if (s->rank == 0)
				t.rank = 1, t.dim[0] = 1;
			else {
				norm_axis(p, &b, s->rank, loc, name);
				norm_axis(p, &e, s->rank, loc, name);
				if (b > e)
					perr(p, loc, "flatten: start axis %lld after end axis %lld", (long long)b,
					     (long long)e);
				for (int i = 0; i < s->rank; i++) {
					if (i <= b || i > e)
						t.dim[t.rank++] = s->dim[i];
					else
						t.dim[t.rank - 1] *= s->dim[i];
				}
			}
		} else if (name[0] == 'u') {
			int64_t d = as_int(p, &args[1], "an axis");
			if (s->rank == IR_MAXDIM)
				perr(p, loc, "unsqueeze: rank would exceed %d", IR_MAXDIM);
			norm_axis(p, &d, s->rank + 1, loc, name);
			for (int i = 0, j = 0; i <= s->rank; i++)
				t.dim[t.rank++] = i == d ? 1 : s->dim[j++];
		} else {
			int64_t d = as_int(p, &args[1], "an axis");
			norm_axis(p, &d, s->rank, loc, name);
			if (s->dim[d] != 1)
				perr(p, loc, "squeeze: axis %lld has size %lld, not 1", (long long)d,
				     (long long)s->dim[d]);
			for (int i = 0; i < s->rank; i++)
				if (i != d)
					t.dim[t.rank++] = s->dim[i];
		}
		*out = node_val(mk_reshape(p, x.n, &t, loc), loc);
		return 1;
	}
	if (!strcmp(name, "clone") || !strcmp(name, "contiguous") || !strcmp(name, "detach_copy")) {
		check_nargs(p, name, loc, nargs, 1, 1);
		Val x = tensor_arg(p, &args[0]);
		*out = node_val(x.n, loc);
		return 1;
	}
	if (!strcmp(name, "cpu") || !strcmp(name, "cuda")) {
		check_nargs(p, name, loc, nargs, 1, 1);
		*out = call_op(p, name[1] == 'p' ? OP_to_host : OP_to_device, loc, args, NULL, 1);
		return 1;
	}
	if (!strcmp(name, "cat")) {
		*out = call_op(p, OP_concat, loc, args, kw, nargs);
		return 1;
	}
	if (!strcmp(name, "zeros") || !strcmp(name, "ones")) {
		static const char *const names[] = {"shape", "dtype", NULL};
		check_kwargs(p, name, args, kw, nargs, names);
		check_nargs(p, name, loc, nargs, 0, 2);
		Val a2[3];
		const char *k2[3] = {"value", "shape", "dtype"};
		a2[0] = int_val(name[0] == 'o', loc);
		int n = 1;
		for (int i = 0; i < nargs; i++) {
			k2[n] = kw && kw[i] ? kw[i] : i == 0 ? "shape" : "dtype";
			a2[n++] = args[i];
		}
		*out = call_op(p, OP_full, loc, a2, k2, n);
		return 1;
	}
	if (!strcmp(name, "zeros_like") || !strcmp(name, "ones_like") || !strcmp(name, "full_like") ||
	    !strcmp(name, "fill")) {
		int isfull = name[0] == 'f';
		check_nargs(p, name, loc, nargs, isfull ? 2 : 1, isfull ? 2 : 1);
		Val x = tensor_arg(p, &args[0]);
		double v = isfull ? (is_num(&args[1]) ? num_f(&args[1]) : NAN) : name[0] == 'o';
		if (isfull && !is_num(&args[1])) {
			// fill with a tensor value: broadcast it
			NodeId src = as_node(p, &args[1], (DType)p->g->node[x.n].dtype, NULL);
			src = mk_cast(p, src, (DType)p->g->node[x.n].dtype, loc);
			Val sv = node_val(src, args[1].loc);
			*out = node_val(mk_broadcast(p, src, ir_shape(p->g, x.n), loc, &sv, 1), loc);
			return 1;
		}
		int64_t vi = isfull ? args[1].i : name[0] == 'o'; // exact when an integer
		*out = node_val(mk_full(p, v, vi, (DType)p->g->node[x.n].dtype, ir_shape(p->g, x.n), loc), loc);
		return 1;
	}
	if (!strcmp(name, "size") || !strcmp(name, "shape") || !strcmp(name, "rank")) {
		check_nargs(p, name, loc, nargs, name[1] == 'i' ? 2 : 1, name[1] == 'i' ? 2 : 1);
		Val x = tensor_arg(p, &args[0]);
		const Shape *s = ir_shape(p->g, x.n);
		if (name[0] == 'r')
			*out = int_val(s->rank, loc);
		else if (name[1] == 'h')
			*out = list_val(p, s->dim, s->rank, loc);
		else {
			int64_t d = as_int(p, &args[1], "an axis");
			norm_axis(p, &d, s->rank, args[1].loc, name);
			*out = int_val(s->dim[d], loc);
		}
		return 1;
	}
	return 0;
}

// scan(body, operands..., ncarry=N, nxs=M, reverse=0)
static Val
scan_call(P *p, Loc loc, Val *args, const char **kw, int nargs)
{
	if (nargs < 1 || args[0].k != V_IDENT || (kw && kw[0]))
		perr(p, nargs ? args[0].loc : loc, "scan takes the name of its body function first");
	// Scans are rare and nest: their arrays live in the arena, not in
	// the C stack.
	Val *ops = arena_alloc_array(p->a, (size_t)nargs, sizeof(Val));
	NodeId *in = arena_alloc_array(p->a, (size_t)nargs, sizeof(NodeId));
	int nops = 0;
	int64_t nc = -1, nx = -1, rev = 0;
	for (int i = 1; i < nargs; i++) {
		if (kw && kw[i]) {
			if (!strcmp(kw[i], "ncarry"))
				nc = as_int(p, &args[i], "scan: ncarry");
			else if (!strcmp(kw[i], "nxs"))
				nx = as_int(p, &args[i], "scan: nxs");
			else if (!strcmp(kw[i], "reverse"))
				rev = as_int(p, &args[i], "scan: reverse");
			else
				perr(p, args[i].loc, "scan has no attribute '%s' (ncarry, nxs, reverse)", kw[i]);
			continue;
		}
		ops[nops++] = args[i];
	}
	if (nc < 0 || nx < 0)
		perr(p, loc, "scan: give ncarry= and nxs= (how many operands are carries and sequences)");
	if (nc + nx > nops)
		perr(p, loc, "scan: ncarry %lld and nxs %lld do not fit %d operands", (long long)nc,
		     (long long)nx, nops);
	for (int i = 0; i < nops; i++)
		in[i] = as_node(p, &ops[i], DT_NONE, NULL);
	NodeId sub = body_graph(p, &args[0], loc, ops, in, nops, nc, nx);
	Attrs a;
	ir_attrs_default(OP_scan, &a);
	a.a[0].i = sub;
	a.a[1].i = nc;
	a.a[2].i = nx;
	a.a[3].i = rev != 0;
	NodeId n = build(p, OP_scan, in, nops, &a, loc, ops, nops);
	return node_val(n, loc);
}

// The dispatcher: functions (user's, then the prelude's), the surface
// functions, then the ops of the table.
static Val
call(P *p, const char *name, Loc loc, Val *args, const char **kw, int nargs)
{
	if (!p->g) {
		// An operand that resolved to nothing is the likelier mistake
		// than the operator: `let A = Q + 1` names Q, not add.
		for (int i = 0; i < nargs; i++)
			if (args[i].k == V_IDENT && !(kw && kw[i]))
				unknown_name(p, args[i].s, args[i].loc);
		perr(p, loc, "'%s' cannot be computed here: sizes and shapes take integer arithmetic (+ - * // %%)",
		     name);
	}
	int d = find_def(p, name);
	if (d >= 0)
		return inline_def(p, &p->def[d], loc, args, kw, nargs);
	Val r;
	if (sugar(p, name, loc, args, kw, nargs, &r))
		return r;
	int op = ir_op_lookup(name);
	if (op)
		return call_op(p, op, loc, args, kw, nargs);
	perr(p, loc, "unknown function '%s'", name);
}

// recv.name(args): recv.f(a) is f(recv, a); recv.f_(a) is f(recv, a)
// written back into recv (in place), with recv's dtype and shape (resize_
// excepted).
static Val
method_call(P *p, Val recv, const char *name, Loc loc)
{
	Scratch *sc = scratch(p);
	Val *args = sc->v;
	const char **kw = sc->s;
	args[0] = recv;
	kw[0] = NULL;
	int n = parse_args(p, args + 1, kw + 1, 63) + 1;
	size_t len = strlen(name);
	int inplace = len > 1 && name[len - 1] == '_';
	if (!inplace)
		return call(p, name, loc, args, kw, n);
	if (recv.k != V_NODE)
		perr(p, loc, "in-place %s needs a tensor, found %s", name, val_desc(&recv));
	char *base = arena_strndup(p->a, name, len - 1);
	NodeId old = recv.n;
	Val r;
	if (!strcmp(base, "fill")) {
		check_nargs(p, name, loc, n, 2, 2);
		r = call(p, "fill", loc, args, kw, n);
	} else if (!strcmp(base, "zero")) {
		check_nargs(p, name, loc, n, 1, 1);
		r = node_val(mk_full(p, 0, 0, (DType)p->g->node[old].dtype, ir_shape(p->g, old), loc), loc);
	} else if (!strcmp(base, "copy")) {
		check_nargs(p, name, loc, n, 2, 2);
		Val fa[2] = {recv, args[1]};
		const char *fk[2] = {NULL, NULL};
		r = call(p, "full_like", loc, fa, fk, 2);
	} else if (!strcmp(base, "resize")) {
		// x.resize_(20) or x.resize_([4, 5]), of a whole variable: the
		// elements of a slice are laid out in its base.
		int sliced = recv.view || (recv.var && recv.var->base &&
		                           (recv.var->view.slice.a[0].n || recv.var->view.ndrop));
		if (sliced) {
			const Var *v = recv.var;
			diag_emit(&p->d, loc, "resize_ of a slice of '%s'; only whole tensors can be resized",
			          v->base && !recv.view ? v->base->name : v->name);
			if (!recv.view && v->loc)
				diag_note(&p->d, v->loc, "'%s' is a view of '%s' made here", v->name, v->base->name);
			note_calls(p);
			diag_fail(&p->d);
		}
		Val a2[2] = {recv, args[1]};
		if (n == 2 && args[1].k == V_INT)
			a2[1] = list_val(p, &args[1].i, 1, args[1].loc);
		else if (n > 2) {
			int64_t d[IR_MAXDIM];
			if (n - 1 > IR_MAXDIM)
				perr(p, loc, "resize_: too many dimensions");
			for (int i = 1; i < n; i++)
				d[i - 1] = as_int(p, &args[i], "a size");
			a2[1] = list_val(p, d, n - 1, loc);
		}
		r = call_op(p, OP_resize, loc, a2, NULL, 2);
	} else {
		r = call(p, base, loc, args, kw, n);
	}
	if (r.k != V_NODE)
		perr(p, loc, "in-place %s did not produce a tensor", name);
	NodeId nn = r.n;
	if (strcmp(base, "resize")) {
		nn = mk_cast(p, nn, (DType)p->g->node[old].dtype, loc);
		if (!ir_shape_eq(ir_shape(p->g, nn), ir_shape(p->g, old))) {
			char s0[160], s1[160];
			ir_shape_str(ir_shape(p->g, old), s0, sizeof s0);
			ir_shape_str(ir_shape(p->g, nn), s1, sizeof s1);
			diag_emit(&p->d, loc, "in-place %s would change the shape %s to %s", name, s0, s1);
			if (recv.var && recv.var->loc)
				diag_note(&p->d, recv.var->loc, "'%s' declared here as %s%s", recv.var->name,
				          ir_dtype_name((DType)p->g->node[old].dtype), s0);
			note_calls(p);
			diag_fail(&p->d);
		}
	}
	if (recv.var) {
		Var *v = recv.var;
		if (recv.view) {
			// recv is x[...] read just now: write through the slice.
			Var tmp = {.name = v->name, .base = v, .input = -1, .view = *recv.view};
			tmp.basever = v->version;
			var_store(p, &tmp, nn, loc);
		} else {
			var_store(p, v, nn, loc);
		}
	}
	Val out = node_val(nn, loc);
	return out;
}

// ---------------------------------------------------------------- statements

static void
assign(P *p, const char *name, Loc loc, Val v)
{
	if (v.k == V_IDENT)
		unknown_name(p, v.s, v.loc);
	if (v.k == V_TUPLE)
		perr(p, loc, "cannot assign %d values to one name", v.nitem);
	Var *src = v.var;
	const View *view = v.view;
	Var *var = scope_bind(p, name, loc);
	if (v.k == V_NODE && src) {
		// y = x, y = x[0:2]: y is a view of x, as Python references are.
		if (!view) {
			var->base = src;
			var->basever = src->version;
			var->input = src->input;
		} else {
			var->base = src;
			var->view = *view;
			var->basever = src->version;
		}
	}
	v.var = NULL;
	v.view = NULL;
	var->v = v;
}

// The values of a tuple: a function's several results, or the components
// of a scan (get nodes).
static int
unpack(P *p, Val v, Val *out, int max, Loc loc)
{
	if (v.k == V_TUPLE) {
		if (v.nitem > max)
			perr(p, loc, "too many values to unpack");
		memcpy(out, v.item, sizeof(Val) * (size_t)v.nitem);
		return v.nitem;
	}
	if (v.k == V_NODE && p->g->node[v.n].dtype == DT_TUPLE) {
		Attrs sa;
		ir_attrs_get(p->g, v.n, &sa);
		const Graph *b = p->g->sub[sa.a[0].i];
		if ((int)b->nout > max)
			perr(p, loc, "too many values to unpack");
		for (uint32_t i = 0; i < b->nout; i++) {
			Attrs a;
			ir_attrs_default(OP_get, &a);
			a.a[0].i = i;
			out[i] = node_val(build(p, OP_get, &v.n, 1, &a, loc, NULL, 0), loc);
		}
		return (int)b->nout;
	}
	out[0] = v;
	return 1;
}

// return v [as name | -> input], ...: fills ret with one value or a
// V_TUPLE.  The values collect in the scratch arrays of this depth.
static void
parse_return(P *p, Val *ret, Loc *retloc)
{
	*retloc = next(p)->loc;
	Scratch *sc = scratch(p);
	Val *items = sc->v;
	const char **rn = sc->s, **rw = sc->s2;
	Loc *ra = sc->loc;
	int n = 0;
	if (peek(p)->kind != T_NEWLINE && !at(p, "}")) {
		do {
			Loc vloc = peek(p)->loc;
			if (n == 64)
				perr(p, vloc, "too many return values (at most 64)");
			Val v = parse_expr(p);
			// Output names: `as name`, `-> input` (a write-back), or
			// the variable's own name.
			const char *vname = v.k == V_NODE && v.var && !v.view ? v.var->name : NULL;
			const char *wb = NULL;
			Loc asloc = 0;
			if (accept(p, "as")) {
				asloc = peek(p)->loc;
				vname = expect_name(p, "an output name");
			} else if (accept(p, "->"))
				wb = expect_name(p, "the name of an input");
			v.var = NULL;
			v.view = NULL;
			int k = unpack(p, v, items + n, 64 - n, vloc);
			for (int i = 0; i < k; i++) {
				rn[n + i] = k == 1 ? vname : NULL;
				rw[n + i] = k == 1 ? wb : NULL;
				ra[n + i] = k == 1 ? asloc : 0;
			}
			n += k;
		} while (accept(p, ","));
	}
	if (n == 0)
		perr(p, *retloc, "return needs a value");
	// Inlined calls inside the items have returns of their own: the
	// names are taken only now.
	memcpy(p->retname, rn, sizeof(rn[0]) * (size_t)n);
	memcpy(p->retwb, rw, sizeof(rw[0]) * (size_t)n);
	memcpy(p->retas, ra, sizeof(ra[0]) * (size_t)n);
	p->nret = n;
	if (n == 1)
		*ret = items[0];
	else {
		ret->k = V_TUPLE;
		ret->nitem = n;
		ret->item = arena_alloc_array(p->a, (size_t)n, sizeof(Val));
		memcpy(ret->item, items, sizeof(Val) * (size_t)n);
	}
}

// name, name, ... = expr
static void
parse_assign(P *p)
{
	Scratch *sc = scratch(p);
	const char **names = sc->s;
	Loc *locs = sc->loc;
	int n = 0;
	do {
		Token *nt = peek(p);
		if (n == 64)
			perr(p, nt->loc, "too many names to assign (at most 64)");
		locs[n] = nt->loc;
		names[n] = expect_name(p, "a name");
		if (!nt->quoted && strchr(names[n], '.'))
			perr(p, nt->loc, "cannot assign to a dotted name");
		n++;
	} while (accept(p, ","));
	expect(p, "=");
	Val v = parse_expr(p);
	if (n == 1) {
		assign(p, names[0], locs[0], v);
		return;
	}
	Val *parts = sc->v;
	int k = unpack(p, v, parts, 64, v.loc);
	if (k != n)
		perr(p, locs[0], "cannot unpack %d value%s into %d names", k, k == 1 ? "" : "s", n);
	for (int i = 0; i < n; i++)
		assign(p, names[i], locs[i], parts[i]);
}

// x[...] = rhs: a write through the view v.
static void
store_slice(P *p, Val v, Val rhs, Loc eq)
{
	NodeId cur = v.n;
	NodeId src = as_node(p, &rhs, (DType)p->g->node[cur].dtype, NULL);
	src = mk_cast(p, src, (DType)p->g->node[cur].dtype, eq);
	Val sv = node_val(src, rhs.loc);
	sv.var = rhs.var;
	src = mk_broadcast(p, src, ir_shape(p->g, cur), eq, &sv, 1);
	Var tmp = {.name = v.var->name, .base = v.var, .input = -1, .view = *v.view};
	tmp.basever = v.var->version;
	var_store(p, &tmp, src, eq);
}

// Parses statements up to the closing brace; `return` fills ret.
static void
parse_block(P *p, Val *ret, Loc *retloc)
{
	expect(p, "{");
	skip_newlines(p);
	while (!at(p, "}")) {
		Token *t = peek(p);
		if (t->kind == T_EOF)
			perr(p, t->loc, "expected '}' before end of file");
		if (ret->k)
			perr(p, t->loc, "statement after return");
		if (fe_tok_is(t, "return")) {
			parse_return(p, ret, retloc);
		} else if (t->kind == T_IDENT && !is_keyword(t) &&
		           (fe_tok_is(&p->tok[p->pos + 1], "=") || fe_tok_is(&p->tok[p->pos + 1], ","))) {
			parse_assign(p);
		} else {
			// expr, or x[...] = value: a write through a slice.
			Val v = parse_expr(p);
			if (at(p, "=")) {
				Loc eq = next(p)->loc;
				if (v.k != V_NODE || !v.var || !v.view)
					perr(p, eq, "only a variable or a slice of one can be assigned to");
				Val rhs = parse_expr(p);
				store_slice(p, v, rhs, eq);
			}
		}
		end_statement(p);
		skip_newlines(p);
	}
	expect(p, "}");
}

// ---------------------------------------------------------------- scan bodies

static int
graph_has_body(const Graph *g, const Graph *self, const char *name)
{
	for (uint32_t i = 0; g && i < g->nsub; i++)
		if ((g->sub[i] != self && !strcmp(g->sub[i]->name, name)) ||
		    graph_has_body(g->sub[i], self, name))
			return 1;
	return 0;
}

static int
body_name_taken(const Module *m, const Graph *self, const char *name)
{
	for (uint32_t i = 0; i < m->ndecl; i++)
		if (graph_has_body(m->decl[i].init, self, name))
			return 1;
	return graph_has_body(m->main, self, name);
}

// Parses def `fname` into a graph of its own, with arguments typed by the
// scan's operands (sequences lose their leading axis).
static NodeId
body_graph(P *p, const Val *fn, Loc loc, const Val *opv, const NodeId *ops, int nops, int64_t nc,
           int64_t nx)
{
	const char *fname = fn->s;
	int di = find_def(p, fname);
	if (di < 0)
		perr(p, fn->loc, "scan: no function named '%s'", fname);
	Def *d = &p->def[di];
	if (d->narg != nops) {
		diag_emit(&p->d, fn->loc, "scan: body '%s' takes %d argument%s, scan passes %d", fname,
		          d->narg, d->narg == 1 ? "" : "s", nops);
		diag_note(&p->d, d->loc, "'%s' defined here", fname);
		note_calls(p);
		diag_fail(&p->d);
	}
	check_recursion(p, d, loc);
	Graph *outer = p->g;
	Graph *g = ir_graph_new(d->name, p->m->src);
	// A failure inside the body longjmps out: the body graph must be owned
	// by then, so give it to the outer graph first.
	uint32_t subidx = ir_add_sub(outer, g);
	Mode omode = p->mode;
	Scope *osc = p->sc;
	Token *otok = p->tok;
	uint32_t opos = p->pos;
	Scope sc = {.callsite = loc, .fname = d->name, .salt = osc ? osc->salt : 0};
	for (int i = 0; i < nops; i++) {
		const Shape *s = ir_shape(outer, ops[i]);
		Shape t = *s;
		if (i >= nc && i < nc + nx) {
			if (t.rank < 1)
				perr(p, opv[i].loc, "scan: sequence operand %d is a scalar", i + 1);
			t.rank--;
			memmove(t.dim, t.dim + 1, sizeof(int64_t) * (size_t)t.rank);
		}
		DefArg *da = &d->arg[i];
		DType dt = (DType)outer->node[ops[i]].dtype;
		if (da->kind == A_TENSOR) {
			DType wdt;
			Shape ws;
			p->tok = d->tok;
			p->pos = da->type_tok;
			parse_type(p, &wdt, &ws);
			p->tok = otok;
			if (wdt != dt || !ir_shape_eq(&ws, &t)) {
				char want[200], got[200];
				ir_type_str(wdt, &ws, want, sizeof want);
				ir_type_str(dt, &t, got, sizeof got);
				diag_emit(&p->d, opv[i].loc,
				          "scan: operand %d gives body '%s' %s%s, its argument '%s' is %s", i + 1,
				          fname, got, i >= nc && i < nc + nx ? " per step" : "", da->name, want);
				diag_note(&p->d, da->loc, "'%s' declared here as %s", da->name, want);
				note_calls(p);
				diag_fail(&p->d);
			}
		} else if (da->kind != A_ANY) {
			diag_emit(&p->d, da->loc, "scan body arguments must be tensors");
			diag_note(&p->d, fn->loc, "'%s' is the body of this scan", fname);
			note_calls(p);
			diag_fail(&p->d);
		}
	}
	size_check(p, loc, d);
	enter(p, loc);
	p->callee[p->ncall] = d;
	p->isbody[p->ncall] = 1;
	p->callresume[p->ncall] = opos;
	p->callstart[p->ncall] = p->nbuilt;
	p->calls[p->ncall++] = loc;
	p->g = g;
	p->mode = M_BODY;
	p->sc = &sc;
	p->tok = d->tok;
	for (int i = 0; i < nops; i++) {
		DefArg *da = &d->arg[i];
		const Shape *s = ir_shape(outer, ops[i]);
		Shape t = *s;
		if (i >= nc && i < nc + nx) {
			t.rank--;
			memmove(t.dim, t.dim + 1, sizeof(int64_t) * (size_t)t.rank);
		}
		NodeId n = ir_add_input(g, da->name, IN_ARG, (DType)outer->node[ops[i]].dtype, &t, da->loc);
		Var *v = scope_bind(p, da->name, da->loc);
		v->v = node_val(n, da->loc);
	}
	p->pos = d->body;
	Val ret = {0};
	Loc retloc = 0;
	parse_body(p, &ret, &retloc);
	if (!ret.k)
		perr(p, d->loc, "scan body '%s' returns nothing", fname);
	Val *items = scratch(p)->v; // parse_block is done with them
	int n = unpack(p, ret, items, 64, retloc);
	if (n < nc)
		perr(p, retloc, "scan: body '%s' returns %d value%s, fewer than its %lld carr%s", fname, n,
		     n == 1 ? "" : "s", (long long)nc, nc == 1 ? "y" : "ies");
	for (int i = 0; i < n; i++) {
		NodeId o = as_node(p, &items[i], DT_NONE, NULL);
		if (g->node[o].dtype == DT_TUPLE)
			perr(p, items[i].loc, "a scan body cannot return a tuple");
		// A carry must come back with the type it went in with.
		NodeId a = i < nc ? g->input[i].node : 0;
		if (a && (g->node[o].dtype != g->node[a].dtype || g->node[o].shape != g->node[a].shape)) {
			char want[200], got[200];
			type_str(p, o, got, sizeof got);
			type_str(p, a, want, sizeof want);
			diag_emit(&p->d, items[i].loc,
			          "scan: body '%s' returns carry %d as %s, its argument '%s' is %s", fname,
			          i + 1, got, d->arg[i].name, want);
			diag_note(&p->d, d->arg[i].loc, "'%s' declared here", d->arg[i].name);
			note_calls(p);
			diag_fail(&p->d);
		}
		ir_add_output(g, o, arena_printf(p->a, "y%d", i), -1);
	}
	p->g = outer;
	p->mode = omode;
	p->sc = osc;
	p->tok = otok;
	p->pos = opos;
	p->ncall--;
	leave(p);
	// A name of its own among every body of the module (they all print
	// as top-level functions) and other than forward.
	const char *name = d->name;
	for (int k = 2; !strcmp(name, "forward") || body_name_taken(p->m, g, name); k++)
		name = arena_printf(p->a, "%s_%d", d->name, k);
	g->name = arena_strdup(g->arena, name);
	return subidx;
}

// ---------------------------------------------------------------- module

// def name(arg[: type][= default], ...) [-> type | (type, ...)] { ... }
// Records the function; its body is parsed at each call.
static void
parse_def_header(P *p, int prelude)
{
	Loc loc = expect(p, "def")->loc;
	Token *nt = peek(p);
	const char *name = expect_name(p, "a function name");
	if (strchr(name, '.') || name[0] == '%')
		perr(p, nt->loc, "function names cannot contain '.' or start with '%%'");
	if (ir_op_lookup(name))
		perr(p, nt->loc, "'%s' is a built-in op and cannot be redefined", name);
	for (uint32_t i = 0; i < p->ndef; i++)
		if (p->def[i].prelude == prelude && !strcmp(p->def[i].name, name)) {
			diag_emit(&p->d, nt->loc, "function '%s' defined twice", name);
			diag_note(&p->d, p->def[i].loc, "first defined here");
			diag_fail(&p->d);
		}
	arena_grow(p->a, (void **)&p->def, &p->cdef, p->ndef + 1, sizeof *p->def);
	Def *d = &p->def[p->ndef];
	memset(d, 0, sizeof *d);
	d->name = name;
	d->loc = nt->loc;
	d->tok = p->tok;
	d->prelude = prelude;
	(void)loc;
	Loc open = expect(p, "(")->loc;
	while (!at(p, ")")) {
		if (d->narg == 32)
			perr(p, peek(p)->loc, "too many arguments (at most 32)");
		DefArg *a = &d->arg[d->narg];
		Token *at_ = peek(p);
		a->loc = at_->loc;
		a->name = expect_name(p, "an argument name");
		if (!at_->quoted && strchr(a->name, '.'))
			perr(p, at_->loc, "argument names cannot contain '.'");
		for (int i = 0; i < d->narg; i++)
			if (!strcmp(d->arg[i].name, a->name)) {
				diag_emit(&p->d, at_->loc, "'%s' has two arguments named '%s'", name, a->name);
				diag_note(&p->d, d->arg[i].loc, "the first '%s' is here", a->name);
				diag_fail(&p->d);
			}
		a->kind = A_ANY;
		if (accept(p, ":")) {
			Token *tt = peek(p);
			if (fe_tok_is(tt, "int"))
				a->kind = A_INT, next(p);
			else if (fe_tok_is(tt, "float"))
				a->kind = A_FLOAT, next(p);
			else if (fe_tok_is(tt, "params"))
				a->kind = A_PARAMS, next(p);
			else if (fe_tok_is(tt, "tensor"))
				a->kind = A_ANY, next(p);
			else {
				a->kind = A_TENSOR;
				a->type_tok = p->pos;
				// Skip the type: dtype [ ... ]
				if (tt->kind != T_IDENT || !ir_dtype_lookup(tok_str(p, tt)))
					perr(p, tt->loc, "unknown type '%.*s' (a tensor type such as f32[N], or int, float, params, tensor)",
					     (int)tt->len, tt->text);
				next(p);
				expect(p, "[");
				int depth = 1;
				while (depth && peek(p)->kind != T_EOF) {
					if (at(p, "["))
						depth++;
					if (at(p, "]"))
						depth--;
					next(p);
				}
			}
		}
		if (accept(p, "=")) {
			a->def_tok = p->pos;
			// Skip the default expression up to ',' or ')' at depth 0.
			int depth = 0;
			while (peek(p)->kind != T_EOF) {
				if (!depth && (at(p, ",") || at(p, ")")))
					break;
				if (at(p, "(") || at(p, "["))
					depth++;
				if (at(p, ")") || at(p, "]"))
					depth--;
				next(p);
			}
			if (a->def_tok == p->pos)
				perr(p, peek(p)->loc, "expected a default value");
		}
		d->narg++;
		if (!accept(p, ","))
			break;
	}
	expect_close(p, ")", open);
	if (accept(p, "->")) {
		d->ret_tok = p->pos;
		int depth = 0;
		while (peek(p)->kind != T_EOF && !(depth == 0 && (at(p, "{") || peek(p)->kind == T_NEWLINE))) {
			if (at(p, "(") || at(p, "["))
				depth++;
			if (at(p, ")") || at(p, "]"))
				depth--;
			next(p);
		}
	}
	if (!at(p, "{"))
		perr(p, peek(p)->loc, "expected '{' to start the body of '%s', found %s", name,
		     tok_desc(p, peek(p)));
	d->body = p->pos;
	// Skip the body.
	int depth = 0;
	do {
		if (peek(p)->kind == T_EOF)
			perr(p, d->loc, "the body of '%s' is not closed by '}'", name);
		if (at(p, "{"))
			depth++;
		if (at(p, "}"))
			depth--;
		next(p);
	} while (depth);
	d->body_end = p->pos;
	d->nsite = -1;
	d->minsize = -1;
	p->ndef++;
}

// The task names of ir/tasks.def, the list passes/tasks.c builds
// (fadc_tasks expands the same rows).
const char *const fe_task_names[] = {
#define TASK(name, ...) #name,
#include "tasks.def"
	NULL};

// tasks NAME {, NAME}: the model's recommended tasks, in order (what
// fadc -o compiles when no --tasks is given, as bench.yaml's task lists).
// `tasks` is a word only at the start of a top-level item.
static void
parse_tasks(P *p)
{
	Token *kw = peek(p);
	next(p);
	Module *m = p->m;
	if (m->ntasks) {
		diag_emit(&p->d, kw->loc, "the model's tasks are declared twice");
		diag_note(&p->d, p->tasks_loc, "first declared here");
		diag_fail(&p->d);
	}
	p->tasks_loc = kw->loc;
	const char *names[16];
	uint32_t n = 0;
	do {
		Token *t = peek(p);
		const char *name = expect_name(p, "a task name");
		int known = 0;
		for (int i = 0; fe_task_names[i]; i++)
			known |= !strcmp(fe_task_names[i], name);
		if (!known) {
			char list[256] = "";
			for (int i = 0; fe_task_names[i]; i++)
				snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? " " : "",
				         fe_task_names[i]);
			perr(p, t->loc, "unknown task '%s' (the tasks: %s)", name, list);
		}
		for (uint32_t i = 0; i < n; i++)
			if (!strcmp(names[i], name))
				perr(p, t->loc, "task '%s' listed twice", name);
		names[n++] = name; // at most one of each of the 11 names: fits
	} while (accept(p, ","));
	end_statement(p);
	m->tasks = arena_alloc_array(m->arena, n, sizeof *m->tasks);
	for (uint32_t i = 0; i < n; i++)
		m->tasks[i] = arena_strdup(m->arena, names[i]);
	m->ntasks = n;
}

// batch NAME: AXIS {, NAME: AXIS}, loss (mean | sum): the data-parallel
// declaration (docs/IR.md, "batch").  `batch` is a word only at the start
// of a top-level item, as `tasks`.  The names are checked against
// forward's inputs once forward is parsed (check_batch): an argument of
// forward is declared after this line.
static void
parse_batch(P *p)
{
	Token *kw = peek(p);
	next(p);
	Module *m = p->m;
	if (m->batch.nin) {
		diag_emit(&p->d, kw->loc, "the batch is declared twice");
		diag_note(&p->d, m->batch.loc, "first declared here");
		diag_fail(&p->d);
	}
	BatchInput in[64];
	uint32_t n = 0;
	for (;;) {
		Token *t = peek(p);
		// `loss` is the loss unless a ':' makes it an input's name.
		if (fe_tok_is(t, "loss") && !t->quoted && !fe_tok_is(&p->tok[p->pos + 1], ":"))
			break;
		const char *name = expect_name(p, "an input name or 'loss'");
		for (uint32_t i = 0; i < n; i++)
			if (!strcmp(in[i].name, name)) {
				diag_emit(&p->d, t->loc, "input '%s' is listed twice in the batch", name);
				diag_note(&p->d, in[i].loc, "first listed here");
				diag_fail(&p->d);
			}
		if (n == sizeof in / sizeof *in)
			perr(p, t->loc, "more than %d batched inputs", (int)(sizeof in / sizeof *in));
		expect(p, ":");
		Token *at_ = peek(p);
		if (at_->kind != T_INT)
			perr(p, at_->loc, "expected the batch axis of '%s' (a non-negative integer), found %s",
			     name, tok_desc(p, at_));
		next(p);
		if (at_->ival >= IR_MAXDIM)
			perr(p, at_->loc, "batch axis %lld of '%s' is out of range (ranks are at most %d)",
			     (long long)at_->ival, name, IR_MAXDIM);
		in[n++] = (BatchInput){arena_strdup(m->arena, name), (int)at_->ival, t->loc};
		if (!accept(p, ","))
			perr(p, peek(p)->loc, "expected ',' and then 'loss mean' or 'loss sum', found %s",
			     tok_desc(p, peek(p)));
	}
	if (!n)
		perr(p, peek(p)->loc, "the batch names no input (batch x: 0, loss mean)");
	next(p); // loss
	Token *k = peek(p);
	if (fe_tok_is(k, "mean") && !k->quoted)
		m->batch.loss = BATCH_LOSS_MEAN;
	else if (fe_tok_is(k, "sum") && !k->quoted)
		m->batch.loss = BATCH_LOSS_SUM;
	else
		perr(p, k->loc, "expected 'mean' or 'sum' after 'loss', found %s", tok_desc(p, k));
	next(p);
	end_statement(p);
	m->batch.in = arena_alloc_array(m->arena, n, sizeof *m->batch.in);
	memcpy(m->batch.in, in, n * sizeof *in);
	m->batch.nin = n;
	m->batch.loc = kw->loc;
}

// The batch's names are inputs of forward, each axis within its input's
// rank, and every batched axis of one size.
static void
check_batch(P *p)
{
	Batch *b = &p->m->batch;
	const Graph *g = p->m->main;
	uint32_t first = 0;
	for (uint32_t i = 0; i < b->nin; i++) {
		const BatchInput *bi = &b->in[i];
		uint32_t k = 0;
		while (k < g->ninput && strcmp(g->input[k].name, bi->name))
			k++;
		if (k == g->ninput)
			perr(p, bi->loc, "the batch names '%s', which is no param, const or argument of forward",
			     bi->name);
		const Shape *s = ir_shape(g, g->input[k].node);
		char ty[128];
		ir_type_str(g->node[g->input[k].node].dtype, s, ty, sizeof ty);
		if (bi->axis >= s->rank) {
			diag_emit(&p->d, bi->loc, "batch axis %d of '%s' is out of range (its type is %s)",
			          bi->axis, bi->name, ty);
			diag_note(&p->d, g->node[g->input[k].node].loc, "'%s' declared here", bi->name);
			diag_fail(&p->d);
		}
		int64_t size = s->dim[bi->axis];
		if (i == 0) {
			b->size = size;
			continue;
		}
		if (size != b->size) {
			diag_emit(&p->d, bi->loc,
			          "batch axis %d of '%s' has size %lld, but axis %d of '%s' has %lld: the batch "
			          "axes disagree",
			          bi->axis, bi->name, (long long)size, b->in[first].axis, b->in[first].name,
			          (long long)b->size);
			diag_note(&p->d, b->in[first].loc, "'%s' listed here", b->in[first].name);
			diag_fail(&p->d);
		}
	}
}

static void
parse_let(P *p)
{
	expect(p, "let");
	Token *nt = peek(p);
	const char *name = expect_name(p, "a size name");
	if (strchr(name, '.'))
		perr(p, nt->loc, "size names cannot contain '.'");
	for (uint32_t i = 0; i < p->m->nsize; i++)
		if (!strcmp(p->m->size[i].name, name)) {
			diag_emit(&p->d, nt->loc, "size '%s' defined twice", name);
			diag_note(&p->d, p->m->size[i].loc, "first defined here");
			diag_fail(&p->d);
		}
	int prev = ir_module_find_decl(p->m, name);
	if (prev >= 0) {
		diag_emit(&p->d, nt->loc, "size '%s' has the name of a declaration", name);
		diag_note(&p->d, p->m->decl[prev].loc, "'%s' first declared here", name);
		diag_fail(&p->d);
	}
	expect(p, "=");
	Loc vloc = peek(p)->loc;
	Val v = parse_expr(p);
	int64_t value = as_int(p, &v, "a size");
	for (int i = 0; i < p->o->ndefines; i++) {
		const char *def = p->o->defines[i], *eq = strchr(def, '=');
		if (eq && (size_t)(eq - def) == strlen(name) && !strncmp(def, name, strlen(name))) {
			char *end;
			errno = 0;
			long long x = strtoll(eq + 1, &end, 10);
			if (!eq[1] || *end)
				perr(p, 0, "-D %s: the value must be an integer", def);
			if (errno == ERANGE)
				perr(p, 0, "-D %s: the value is too large", def);
			if (x < 0)
				perr(p, 0, "-D %s: size '%s' cannot be negative", def, name);
			value = x;
			p->defused[i] = 1;
		}
	}
	if (value < 0)
		perr(p, vloc, "size '%s' is negative (%lld)", name, (long long)value);
	arena_grow(p->m->arena, (void **)&p->m->size, &p->m->csize, p->m->nsize + 1, sizeof *p->m->size);
	p->m->size[p->m->nsize++] = (Size){arena_strdup(p->m->arena, name), value, nt->loc};
	end_statement(p);
}

// param|const name: type [= initializer | = { statements; return value }]
static void
parse_decl(P *p)
{
	Token *kt = next(p);
	DeclKind kind = fe_tok_is(kt, "param") ? DECL_PARAM : DECL_CONST;
	Token *nt = peek(p);
	const char *name = expect_name(p, "a name");
	int prev = ir_module_find_decl(p->m, name);
	if (prev >= 0) {
		diag_emit(&p->d, nt->loc, "'%s' declared twice", name);
		diag_note(&p->d, p->m->decl[prev].loc, "first declared here");
		diag_fail(&p->d);
	}
	for (uint32_t i = 0; i < p->m->nsize; i++)
		if (!strcmp(p->m->size[i].name, name)) {
			diag_emit(&p->d, nt->loc, "'%s' has the name of a size", name);
			diag_note(&p->d, p->m->size[i].loc, "size '%s' first defined here", name);
			diag_fail(&p->d);
		}
	expect(p, ":");
	DType dt;
	Shape s;
	parse_type(p, &dt, &s);
	arena_grow(p->m->arena, (void **)&p->m->decl, &p->m->cdecl, p->m->ndecl + 1, sizeof *p->m->decl);
	int k = (int)p->m->ndecl++;
	Decl *d = &p->m->decl[k];
	memset(d, 0, sizeof *d);
	d->name = arena_strdup(p->m->arena, name);
	d->kind = kind;
	d->dtype = dt;
	d->shape = s;
	d->loc = nt->loc;
	if (accept(p, "=")) {
		Graph *g = ir_graph_new(d->name, p->m->src);
		d->init = g; // owned by the module from now on, even on error
		Scope sc = {0};
		p->sc = &sc;
		p->g = g;
		p->mode = M_INIT;
		p->curdecl = k;
		p->init_shape = s;
		p->init_dtype = dt;
		uint32_t cap = p->cinit;
		arena_grow(p->a, (void **)&p->initnode, &cap, p->m->ndecl, sizeof *p->initnode);
		arena_grow(p->a, (void **)&p->initgen, &p->cinit, p->m->ndecl, sizeof *p->initgen);
		Val v = {0};
		Loc vloc = peek(p)->loc;
		if (at(p, "{")) {
			Loc retloc = 0;
			parse_block(p, &v, &retloc);
			if (!v.k)
				perr(p, vloc, "the initializer of '%s' returns nothing", name);
		} else {
			v = parse_expr(p);
		}
		if (v.k == V_TUPLE)
			perr(p, vloc, "the initializer of '%s' gives %d values", name, v.nitem);
		// The value is converted and broadcast to the declared type.  A
		// conversion that truncates (a float tensor to i64) or a number of
		// the wrong kind (2.5 for i64, 3 for bool) is an error: say cast()
		// if it is meant.  Sampled floats to bool are fine (bernoulli), and
		// so is a whole-number constant to i64 (ones()).
		if ((dt == DT_BOOL && (v.k == V_INT || v.k == V_FLOAT)) || (dt == DT_I64 && v.k == V_FLOAT)) {
			char want[200];
			ir_type_str(dt, &s, want, sizeof want);
			diag_emit(&p->d, vloc, "the initializer of '%s' is %s, which does not convert to %s "
			          "implicitly", name, val_desc(&v), ir_dtype_name(dt));
			diag_note(&p->d, d->loc, "'%s' declared here as %s", name, want);
			diag_fail(&p->d);
		}
		NodeId n = as_node(p, &v, dt, &s);
		DType vdt = (DType)g->node[n].dtype;
		int lossy = dt == DT_I64 && ir_dtype_is_float(vdt);
		if (lossy && g->node[n].op == OP_full) {
			double c = ir_attr_float(g, n, "value");
			lossy = c != floor(c) || fabs(c) > 9007199254740992.0; // 2^53
		}
		if (lossy || !broadcasts_to(ir_shape(g, n), &s)) {
			char want[200], got[200];
			ir_type_str(dt, &s, want, sizeof want);
			type_str(p, n, got, sizeof got);
			if (lossy)
				diag_emit(&p->d, vloc, "the initializer of '%s' is %s, which does not convert to %s "
				          "implicitly (use cast(..., dtype=%s))", name, got, ir_dtype_name(dt),
				          ir_dtype_name(dt));
			else
				diag_emit(&p->d, vloc, "the initializer of '%s' is %s, which does not broadcast to %s",
				          name, got, want);
			diag_note(&p->d, d->loc, "'%s' declared here as %s", name, want);
			diag_fail(&p->d);
		}
		Val nv = node_val(n, v.loc);
		n = mk_cast(p, n, dt, vloc);
		n = mk_broadcast(p, n, &s, vloc, &nv, 1);
		ir_add_output(g, n, d->name, -1);
		p->g = NULL;
		p->sc = NULL;
	}
	end_statement(p);
}

// Output names are file names (fadc run writes NAME.npy), so they are
// unique.  A name given with `as` is the user's: a second output of that
// name is an error, never a silent rename.  The write-backs are named
// after their inputs, `-> x` ones and the inputs mutated in place alike.
static int
writes_back(P *p, const char *name, const Val *items, int n, Loc *where)
{
	for (int i = 0; i < n; i++)
		if (p->retwb[i] && !strcmp(p->retwb[i], name)) {
			*where = items[i].loc;
			return 1;
		}
	for (uint32_t i = 0; i < p->ninputvar; i++) {
		const Var *v = p->inputvar[i];
		if (v->mutated && v->input >= 0 && !v->base && !strcmp(v->name, name)) {
			*where = v->loc;
			return 2;
		}
	}
	return 0;
}

static void
check_output_names(P *p, const Val *items, int n)
{
	for (int i = 0; i < n; i++) {
		if (!p->retas[i])
			continue;
		const char *name = p->retname[i];
		for (int j = 0; j < i; j++)
			if (p->retas[j] && !strcmp(p->retname[j], name)) {
				diag_emit(&p->d, p->retas[i], "output name '%s' is used twice", name);
				diag_note(&p->d, p->retas[j], "first used here");
				diag_fail(&p->d);
			}
		Loc where;
		int wb = writes_back(p, name, items, n, &where);
		if (wb) {
			diag_emit(&p->d, p->retas[i], "output name '%s' is also the name of a write-back", name);
			diag_note(&p->d, where, wb == 1 ? "written back to input '%s' here"
			                                : "input '%s', mutated in place, is written back",
			          name);
			diag_fail(&p->d);
		}
	}
}

// Is an output of g, an `as` name of the return or a write-back already
// called `name`?  An implicit name (the variable's, out, outK) gives way to
// all of them with a suffix _2, _3, ...
static int
name_taken(P *p, const Graph *g, const char *name, const Val *items, int n)
{
	Loc where;
	for (uint32_t j = 0; j < g->nout; j++)
		if (!strcmp(g->out[j].name, name))
			return 1;
	for (int i = 0; i < n; i++)
		if (p->retas[i] && !strcmp(p->retname[i], name))
			return 1;
	return writes_back(p, name, items, n, &where);
}

static void
parse_forward(P *p, Def *d)
{
	Graph *g = ir_graph_new("forward", p->m->src);
	p->m->main = g;
	p->g = g;
	p->mode = M_FORWARD;
	p->declnode = arena_alloc_array(p->a, p->m->ndecl + 1, sizeof(NodeId));
	p->declvar = arena_alloc_array(p->a, p->m->ndecl + 1, sizeof(Var *));
	// Inputs: params in declaration order, then consts, then arguments.
	for (int pass = 0; pass < 2; pass++)
		for (uint32_t i = 0; i < p->m->ndecl; i++) {
			Decl *dc = &p->m->decl[i];
			if ((pass == 0) != (dc->kind == DECL_PARAM))
				continue;
			p->declnode[i] = ir_add_input(g, dc->name, pass == 0 ? IN_PARAM : IN_CONST, dc->dtype,
			                              &dc->shape, dc->loc);
		}
	Scope sc = {0};
	p->sc = &sc;
	p->tok = d->tok;
	p->topdef = d;
	for (int i = 0; i < d->narg; i++) {
		DefArg *da = &d->arg[i];
		if (da->kind != A_TENSOR)
			perr(p, da->loc, "arguments of forward need a tensor type (such as f32[N])");
		if (da->def_tok)
			perr(p, da->loc, "arguments of forward cannot have defaults");
		if (ir_module_find_decl(p->m, da->name) >= 0)
			perr(p, da->loc, "argument '%s' has the name of a declaration", da->name);
		DType dt;
		Shape s;
		p->pos = da->type_tok;
		parse_type(p, &dt, &s);
		NodeId n = ir_add_input(g, da->name, IN_ARG, dt, &s, da->loc);
		Var *v = scope_bind(p, da->name, da->loc);
		v->v = node_val(n, da->loc);
		v->input = (int)g->ninput - 1;
		add_inputvar(p, v);
	}
	p->pos = d->body;
	Val ret = {0};
	Loc retloc = 0;
	parse_body(p, &ret, &retloc);
	if (!ret.k)
		perr(p, d->loc, "forward returns nothing");
	check_result(p, d, &ret);
	Val items[64];
	int n = ret.k == V_TUPLE ? ret.nitem : 1;
	if (ret.k == V_TUPLE)
		memcpy(items, ret.item, sizeof(Val) * (size_t)n);
	else
		items[0] = ret;
	int *wbdone = arena_alloc_array(p->a, g->ninput + 1, sizeof(int));
	check_output_names(p, items, n);
	for (int i = 0; i < n; i++) {
		NodeId o = as_node(p, &items[i], DT_NONE, NULL);
		if (g->node[o].dtype == DT_TUPLE)
			perr(p, items[i].loc, "forward cannot return a tuple; unpack it first");
		if (p->retwb[i]) {
			int k = -1;
			for (uint32_t j = 0; j < g->ninput; j++)
				if (!strcmp(g->input[j].name, p->retwb[i]))
					k = (int)j;
			if (k < 0)
				perr(p, items[i].loc, "'-> %s': forward has no input named '%s'", p->retwb[i],
				     p->retwb[i]);
			NodeId in = g->input[k].node;
			if (g->node[o].dtype != g->node[in].dtype || g->node[o].shape != g->node[in].shape)
				perr(p, items[i].loc, "'-> %s': the value's type differs from the input's",
				     p->retwb[i]);
			if (wbdone[k])
				perr(p, items[i].loc, "input '%s' written back twice", p->retwb[i]);
			wbdone[k] = 1;
			ir_add_output(g, o, p->retwb[i], k);
			continue;
		}
		const char *name = p->retname[i];
		if (!p->retas[i]) {
			const char *base = name ? name : n == 1 ? "out" : arena_printf(p->a, "out%d", i);
			name = base;
			for (int k = 2; name_taken(p, g, name, items, n); k++)
				name = arena_printf(p->a, "%s_%d", base, k);
		}
		ir_add_output(g, o, name, -1);
	}
	// Inputs mutated in place: their final values are written back.
	for (uint32_t i = 0; i < p->ninputvar; i++) {
		Var *v = p->inputvar[i];
		if (!v->mutated || v->input < 0 || v->base)
			continue;
		if (wbdone[v->input])
			perr(p, retloc, "input '%s' is both mutated in place and written back with '->'",
			     v->name);
		Val cur = var_value(p, v, retloc);
		NodeId o = cur.n;
		NodeId in = g->input[v->input].node;
		if (g->node[o].shape != g->node[in].shape) {
			char s0[160], s1[200];
			ir_shape_str(ir_shape(g, o), s0, sizeof s0);
			type_str(p, in, s1, sizeof s1);
			diag_emit(&p->d, v->reshaped ? v->reshaped : retloc,
			          "input '%s' is resized in place to %s; only locals can change shape", v->name,
			          s0);
			diag_note(&p->d, v->loc, "'%s' declared here as %s", v->name, s1);
			diag_fail(&p->d);
		}
		ir_add_output(g, o, v->name, v->input);
	}
}

static void parse_module(P *p, const char *name, const char *text, size_t len);

Module *
fe_parse_string(const char *name, const char *text, size_t len, const FeOptions *o)
{
	static const FeOptions none = {0};
	P *p = calloc(1, sizeof *p);
	if (!p)
		return NULL;
	Module *m = ir_module_new(name);
	p->m = m;
	p->a = m->arena;
	p->o = o ? o : &none;
	o = p->o;
	p->d.out = o->diag;
	p->d.src = m->src;
	p->d.jmp = &p->jmp;
	p->d.owncalls = 1; // note_calls prints the whole chain
	p->defused = arena_alloc_array(p->a, (size_t)o->ndefines + 1, sizeof(int));
	p->maxnodes = o->max_nodes > 0 ? o->max_nodes : FE_MAX_NODES;
	p->lbgen = 1; // Def.lbgen starts at 0: nothing computed
	if (setjmp(p->jmp)) {
		ir_module_free(p->m);
		free(p);
		return NULL;
	}
	parse_module(p, name, text, len);
	free(p);
	return m;
}

// The whole module: the prelude's functions, then the model's (pass 1),
// then sizes and declarations in order (pass 2), then forward.
static void
parse_module(P *p, const char *name, const char *text, size_t len)
{
	Module *m = p->m;
	const FeOptions *o = p->o;
	// The prelude first (file 0), then the model (file 1).
	uint32_t ntok;
	if (!o->no_prelude) {
		uint32_t pf = ir_srcmap_add_file(m->src, "prelude.ir", fe_prelude_text, fe_prelude_len);
		p->tok = fe_lex(&p->d, m->src, pf, &ntok);
		p->pos = 0;
		skip_newlines(p);
		while (peek(p)->kind != T_EOF) {
			if (!at(p, "def"))
				perr(p, peek(p)->loc, "the prelude holds only functions");
			parse_def_header(p, 1);
			skip_newlines(p);
		}
	}
	uint32_t f = ir_srcmap_add_file(m->src, name, text, len);
	if (memchr(text, 0, len)) {
		const char *z = memchr(text, 0, len);
		uint32_t line = 1, col = 1;
		for (const char *q = text; q < z; q++)
			if (*q == '\n')
				line++, col = 1;
			else
				col++;
		perr(p, ir_srcmap_loc(m->src, f, line, col), "unexpected byte 0x00");
	}
	p->tok = fe_lex(&p->d, m->src, f, &ntok);
	// Pass 1: every function, so that calls may come before definitions.
	p->pos = 0;
	for (;;) {
		skip_newlines(p);
		if (peek(p)->kind == T_EOF)
			break;
		if (at(p, "def")) {
			parse_def_header(p, 0);
			continue;
		}
		if ((at(p, "let") || at(p, "param") || at(p, "const")) && p->tok[p->pos + 1].kind == T_IDENT) {
			arena_grow(p->a, (void **)&p->topname, &p->ctopname, p->ntopname + 1, sizeof *p->topname);
			p->topname[p->ntopname++] = &p->tok[p->pos + 1];
		}
		while (peek(p)->kind != T_NEWLINE && peek(p)->kind != T_EOF && !at(p, ";"))
			next(p);
	}
	// Pass 2: sizes and declarations, in order.  The functions come in
	// the order pass 1 recorded them, after the prelude's.
	p->pos = 0;
	Def *fwd = NULL;
	uint32_t nextdef = 0;
	while (nextdef < p->ndef && p->def[nextdef].prelude)
		nextdef++;
	for (;;) {
		skip_newlines(p);
		Token *t = peek(p);
		if (t->kind == T_EOF)
			break;
		if (fe_tok_is(t, "let"))
			parse_let(p);
		else if (fe_tok_is(t, "tasks") && p->tok[p->pos + 1].kind == T_IDENT)
			parse_tasks(p);
		else if (fe_tok_is(t, "batch") && p->tok[p->pos + 1].kind == T_IDENT)
			parse_batch(p);
		else if (fe_tok_is(t, "param") || fe_tok_is(t, "const"))
			parse_decl(p);
		else if (fe_tok_is(t, "def")) {
			// Skip the function (recorded in pass 1).
			Loc at_ = p->tok[p->pos + 1].loc;
			Def *d = NULL;
			if (nextdef < p->ndef && p->def[nextdef].loc == at_)
				d = &p->def[nextdef++];
			for (uint32_t i = 0; !d && i < p->ndef; i++) // pass 1 skipped it: never, but be safe
				if (!p->def[i].prelude && p->def[i].tok == p->tok && p->def[i].loc == at_)
					d = &p->def[i];
			if (d && !strcmp(d->name, "forward"))
				fwd = d;
			if (d)
				p->pos = d->body;
			int depth = 0;
			do {
				if (at(p, "{"))
					depth++;
				if (at(p, "}"))
					depth--;
				next(p);
			} while (depth && peek(p)->kind != T_EOF);
		} else
			perr(p, t->loc, "expected let, param, const, tasks, batch or def, found %s", tok_desc(p, t));
	}
	for (int i = 0; i < o->ndefines; i++)
		if (!p->defused[i]) {
			const char *eq = strchr(o->defines[i], '=');
			if (!eq)
				perr(p, 0, "-D %s: expected NAME=VALUE", o->defines[i]);
			perr(p, 0, "-D %s: the model has no size named '%.*s'", o->defines[i],
			     (int)(eq - o->defines[i]), o->defines[i]);
		}
	if (!fwd)
		perr(p, 0, "no 'def forward' in %s", name);
	parse_forward(p, fwd);
	if (p->m->batch.nin)
		check_batch(p);
}

Module *
fe_parse_file(const char *path, const FeOptions *o)
{
	// fio_read_all takes regular files only (a FIFO would block, /dev/zero
	// would read until the size limit) and bounds the size at 1 GiB.
	char err[512];
	size_t len;
	char *buf = fio_read_all(path, 0, &len, err, sizeof err);
	if (!buf) {
		// Its messages are "PATH: reason"; ours put "error:" between.
		size_t pl = strlen(path);
		const char *why = !strncmp(err, path, pl) && !strncmp(err + pl, ": ", 2) ? err + pl + 2 : err;
		if (o && o->diag)
			fprintf(o->diag, "%s: error: %s\n", path, why);
		return NULL;
	}
	Module *m = fe_parse_string(path, buf, len, o);
	free(buf);
	return m;
}
