// tests/unit/test_printer.c -- the canonical printer (ir/print.c).
//
// Two properties pin the printer down:
//  1. ir_print_float writes the shortest text that reads back to the same
//     double, bit for bit, both through strtod and through the frontend
//     (the lexer and the parser's unary minus), since that is the path a
//     golden file takes.  Decision on -0.0: it prints "-0.0".  The text
//     "-0" is an integer literal negated, which is the integer 0, so it
//     would read back as +0.0 and lose the sign (1 / -0.0 is -inf).
//  2. A graph built with the C builder API, printed, parsed back with
//     fe_parse_string and printed again, gives the same text: the printer
//     writes what the parser reads, attributes of every kind included.
//     The canonical form numbers nodes after the inputs, in id order, so a
//     builder graph whose inputs were not added first prints renumbered.
#include <float.h>
#include <stdint.h>
#include <stdlib.h>

#include "frontend.h"
#include "ir.h"
#include "testutil.h"

static char errbuf[512];

// ---------------------------------------------------------------- helpers

static uint64_t
bits(double v)
{
	uint64_t u;
	memcpy(&u, &v, sizeof u);
	return u;
}

static double
from_bits(uint64_t u)
{
	double v;
	memcpy(&v, &u, sizeof v);
	return v;
}

// The same double, or two NaNs.
static int
same_double(double a, double b)
{
	return (isnan(a) && isnan(b)) || bits(a) == bits(b);
}

// Prints a graph into a malloc'ed string.
static char *
graph_text(const Graph *g)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	FADC_ASSERT(f, "open_memstream failed");
	ir_print_graph(f, g, "forward");
	fclose(f);
	return buf;
}

static Module *
parse(const char *text)
{
	FeOptions o = {.diag = stderr};
	return fe_parse_string("test_printer.ir", text, strlen(text), &o);
}

// The value a float literal reads back as through the frontend: the text
// is put where the printer puts it, full(value=TEXT, ...).
static int
reparse_float(const char *text, double *v)
{
	char src[256];
	snprintf(src, sizeof src,
	         "def forward() -> f64[] {\n"
	         "  return full(value=%s, shape=[], dtype=f64)\n"
	         "}\n",
	         text);
	Module *m = parse(src);
	if (!m)
		return 0;
	const Graph *g = m->main;
	NodeId n = g->out[0].node;
	int ok = g->node[n].op == OP_full;
	if (ok)
		*v = ir_attr_float(g, n, "value");
	ir_module_free(m);
	return ok;
}

// ---------------------------------------------------------------- floats

typedef struct FloatCase {
	double v;
	const char *text;
} FloatCase;

static void
test_float_table(void)
{
	const FloatCase cases[] = {
	    {0.1, "0.1"},
	    {-1.5, "-1.5"},
	    {0.5, "0.5"},
	    {1.0 / 3.0, "0.3333333333333333"},
	    {0.1 + 0.2, "0.30000000000000004"},
	    {2.5e-7, "2.5e-07"},
	    {1e-300, "1e-300"},
	    {5e-324, "5e-324"}, // the smallest subnormal
	    {DBL_MIN, "2.2250738585072014e-308"},
	    {1.7976931348623157e308, "1.7976931348623157e+308"}, // DBL_MAX
	    {-1.7976931348623157e308, "-1.7976931348623157e+308"},
	    {0.0, "0"},
	    {-0.0, "-0.0"},
	    // Integral values print as integers ("2", "10"), never "1e+01".
	    {2.0, "2"},
	    {10.0, "10"},
	    {100.0, "100"},
	    {1500.0, "1500"},
	    {-100000000.0, "-100000000"},
	    {123456789.0, "123456789"},
	    {1e16, "1e+16"},
	    {INFINITY, "inf"},
	    {-INFINITY, "-inf"},
	    {NAN, "nan"},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		char buf[64];
		ir_print_float(buf, sizeof buf, cases[i].v);
		CHECK_STR(buf, cases[i].text);
	}
}

// Significant digits of a %g text: leading zeros and the exponent aside.
static int
sig_digits(const char *s)
{
	int n = 0, lead = 1;
	for (; *s && *s != 'e'; s++) {
		if (*s < '0' || *s > '9')
			continue;
		if (lead && *s == '0')
			continue;
		lead = 0;
		n++;
	}
	return n;
}

// A finite value that is not an integer (integers print as such: "10" is
// shorter than "1e+01" whatever its digit count) has no %g form with one
// significant digit fewer that reads back.
static void
check_shortest(double v, const char *buf)
{
	int digits = sig_digits(buf);
	if (v == floor(v) || digits < 2)
		return;
	char shorter[512];
	snprintf(shorter, sizeof shorter, "%.*g", digits - 1, v);
	tu_ncheck++;
	if (strtod(shorter, NULL) == v) {
		tu_nfail++;
		fprintf(stderr, "%s:%d: %a prints \"%s\", but \"%s\" reads back too\n", __FILE__,
		        __LINE__, v, buf, shorter);
	}
}

// The printed text reads back to the same bits, through strtod and through
// the frontend, and is the shortest that does.
static void
check_float_roundtrip(double v)
{
	char buf[64];
	ir_print_float(buf, sizeof buf, v);
	if (!isnan(v) && !isinf(v)) {
		double back = strtod(buf, NULL);
		tu_ncheck++;
		if (!same_double(back, v)) {
			tu_nfail++;
			fprintf(stderr, "%s:%d: %a prints \"%s\", which strtod reads as %a\n",
			        __FILE__, __LINE__, v, buf, back);
		}
		check_shortest(v, buf);
	}
	double fe = 0;
	int ok = reparse_float(buf, &fe);
	tu_ncheck++;
	if (!ok || !same_double(fe, v)) {
		tu_nfail++;
		fprintf(stderr, "%s:%d: %a prints \"%s\", which the frontend reads as %a%s\n",
		        __FILE__, __LINE__, v, buf, fe, ok ? "" : " (parse failed)");
	}
}

static void
test_float_roundtrip(void)
{
	// clang-format off
	const double special[] = {
	    0.1, -0.1, 0.0, -0.0, 1e-300, -1e-300, 5e-324, -5e-324, DBL_MIN, DBL_MAX, -DBL_MAX,
	    1e15, 1e15 - 1, 1e16, 1e17, 9007199254740993.0, 0.5, 1e-5, NAN, INFINITY, -INFINITY,
	    3.141592653589793, 2.718281828459045, 1e22, 1e23, 4.35, 0.1 + 0.2,
	};
	// clang-format on
	for (size_t i = 0; i < sizeof special / sizeof special[0]; i++)
		check_float_roundtrip(special[i]);
	// Random bit patterns (a fixed xorshift stream): every exponent.
	uint64_t s = 0x9e3779b97f4a7c15ull;
	for (int i = 0; i < 2000; i++) {
		s ^= s << 13;
		s ^= s >> 7;
		s ^= s << 17;
		double v = from_bits(s);
		if (isnan(v))
			continue;
		check_float_roundtrip(v);
	}
	// Random values of ordinary magnitudes, as attributes are.
	for (int i = 0; i < 2000; i++) {
		s ^= s << 13;
		s ^= s >> 7;
		s ^= s << 17;
		double v = (double)(s >> 11) / 9007199254740992.0 * 200.0 - 100.0;
		check_float_roundtrip(v);
		check_float_roundtrip(floor(v));
	}
}

// ---------------------------------------------------------------- graphs

// op(operands...) with attributes filled by the caller; a build error is a
// bug in the test.
static NodeId
op(Graph *g, int o, const Attrs *a, int nin, const NodeId *in)
{
	Attrs d;
	if (!a) {
		ir_attrs_default(o, &d);
		a = &d;
	}
	NodeId n = ir_build(g, o, in, nin, a, 0, errbuf, sizeof errbuf);
	if (!n) {
		fprintf(stderr, "test bug: building %s: %s\n", ir_op(o)->name, errbuf);
		exit(2);
	}
	return n;
}

static NodeId
op1(Graph *g, int o, const Attrs *a, NodeId x)
{
	return op(g, o, a, 1, &x);
}

static NodeId
op2(Graph *g, int o, const Attrs *a, NodeId x, NodeId y)
{
	NodeId in[2] = {x, y};
	return op(g, o, a, 2, in);
}

static Attrs
defaults(int o)
{
	Attrs a;
	ir_attrs_default(o, &a);
	return a;
}

static void
set_ints(AttrVal *v, int n, const int64_t *x)
{
	v->n = n;
	memcpy(v->v, x, sizeof(int64_t) * (size_t)n);
}

static Shape
shape2(int64_t a, int64_t b)
{
	Shape s = {.rank = 2, .dim = {a, b}};
	return s;
}

// A scan body: (c: f32[3], x: f32[3]) -> (c + x, c * x), outputs named
// y0, y1 as the parser names them.
static Graph *
body(void)
{
	Graph *b = ir_graph_new("cell", NULL);
	Shape s = {.rank = 1, .dim = {3}};
	NodeId c = ir_add_input(b, "c", IN_ARG, DT_F32, &s, 0);
	NodeId x = ir_add_input(b, "x", IN_ARG, DT_F32, &s, 0);
	ir_add_output(b, op2(b, OP_add, NULL, c, x), "y0", -1);
	ir_add_output(b, op2(b, OP_mul, NULL, c, x), "y1", -1);
	return b;
}

// Prints g, parses the text, prints the parsed graph: the texts must be
// equal, and the parsed graph must verify and have the same nodes.
static void
check_graph_roundtrip(const Graph *g, const char *what)
{
	char *t1 = graph_text(g);
	Module *m = parse(t1);
	tu_ncheck++;
	if (!m) {
		tu_nfail++;
		fprintf(stderr, "%s:%d: %s: the printed graph does not parse:\n%s", __FILE__,
		        __LINE__, what, t1);
		free(t1);
		return;
	}
	char *t2 = graph_text(m->main);
	tu_ncheck++;
	if (strcmp(t1, t2)) {
		tu_nfail++;
		fprintf(stderr,
		        "%s:%d: %s: printed, parsed and printed again differs:\n"
		        "--- first\n%s--- second\n%s",
		        __FILE__, __LINE__, what, t1, t2);
	}
	CHECK(ir_verify(m->main, errbuf, sizeof errbuf));
	CHECK(m->main->nnode == g->nnode);
	CHECK(m->main->nout == g->nout);
	CHECK(m->main->nsub == g->nsub);
	ir_module_free(m);
	free(t1);
	free(t2);
}

// Every kind of attribute (int, float, ints, dtype, enum, body), defaults
// left out, factories, a tuple and its gets, several outputs.
static void
test_builder_graph(void)
{
	Graph *g = ir_graph_new("forward", NULL);
	Shape s23 = shape2(2, 3), s3 = {.rank = 1, .dim = {3}}, s43 = shape2(4, 3);
	NodeId x = ir_add_input(g, "x", IN_ARG, DT_F32, &s23, 0);
	NodeId idx = ir_add_input(g, "idx", IN_ARG, DT_I64, &(Shape){.rank = 1, .dim = {2}}, 0);
	NodeId cond = ir_add_input(g, "cond", IN_ARG, DT_BOOL, &s23, 0);
	NodeId xs = ir_add_input(g, "xs", IN_ARG, DT_F32, &s43, 0);

	NodeId e = op1(g, OP_exp, NULL, x);
	Attrs a = defaults(OP_clamp);
	a.a[0].f = -0.5; // min; max stays inf, its default
	NodeId cl = op1(g, OP_clamp, &a, e);
	a = defaults(OP_hardtanh);
	a.a[1].f = 0.1; // max only
	NodeId ht = op1(g, OP_hardtanh, &a, cl);
	a = defaults(OP_polygamma);
	a.a[0].i = 2;
	NodeId pg = op1(g, OP_polygamma, &a, ht);
	a = defaults(OP_cast);
	a.a[0].i = DT_F64;
	NodeId c64 = op1(g, OP_cast, &a, pg);
	a = defaults(OP_sum);
	set_ints(&a.a[0], 1, (int64_t[]){1});
	a.a[1].i = 1;
	NodeId su = op1(g, OP_sum, &a, c64);
	a = defaults(OP_full);
	a.a[0].f = 1e-300;
	set_ints(&a.a[1], 2, (int64_t[]){2, 1});
	a.a[2].i = DT_F64;
	NodeId fu = op(g, OP_full, &a, 0, NULL);
	NodeId ad = op2(g, OP_add, NULL, su, fu);
	a = defaults(OP_iota);
	set_ints(&a.a[0], 2, (int64_t[]){2, 3});
	a.a[1].i = 1;
	a.a[2].i = DT_F32;
	NodeId io = op(g, OP_iota, &a, 0, NULL);
	a = defaults(OP_kaiming_normal);
	set_ints(&a.a[0], 2, (int64_t[]){2, 3});
	a.a[2].i = 1; // mode=fan_out
	a.a[3].f = 0.25;
	a.a[4].i = 7;
	NodeId kn = op(g, OP_kaiming_normal, &a, 0, NULL);
	NodeId in3[3] = {cond, io, kn};
	NodeId wh = op(g, OP_where, NULL, 3, in3);
	a = defaults(OP_argmax);
	a.a[0].i = 1;
	NodeId am = op1(g, OP_argmax, &a, wh);
	a = defaults(OP_take);
	a.a[0].i = 0;
	NodeId tk = op2(g, OP_take, &a, x, idx);
	a = defaults(OP_slice);
	set_ints(&a.a[0], 2, (int64_t[]){0, 1});
	set_ints(&a.a[1], 2, (int64_t[]){2, 3});
	set_ints(&a.a[2], 2, (int64_t[]){1, 2});
	NodeId sl = op1(g, OP_slice, &a, tk);
	a = defaults(OP_pad);
	set_ints(&a.a[0], 2, (int64_t[]){1, 0});
	set_ints(&a.a[1], 2, (int64_t[]){0, 2});
	a.a[2].f = -0.0;
	NodeId pd = op1(g, OP_pad, &a, sl);
	NodeId h = op1(g, OP_to_host, NULL, pd);
	NodeId lsa = op1(g, OP_linear_sum_assignment, NULL, h);
	NodeId dv = op1(g, OP_to_device, NULL, lsa);

	a = defaults(OP_full);
	set_ints(&a.a[1], 1, (int64_t[]){3});
	NodeId c0 = op(g, OP_full, &a, 0, NULL);
	a = defaults(OP_scan);
	a.a[0].i = ir_add_sub(g, body());
	a.a[1].i = 1;
	a.a[2].i = 1;
	a.a[3].i = 1;
	NodeId sc = op2(g, OP_scan, &a, c0, xs);
	a = defaults(OP_get);
	NodeId g0 = op1(g, OP_get, &a, sc);
	a.a[0].i = 1;
	NodeId g1 = op1(g, OP_get, &a, sc);
	(void)s3;

	ir_add_output(g, ad, "sum", -1);
	ir_add_output(g, am, "am", -1);
	ir_add_output(g, dv, "cols", -1);
	ir_add_output(g, g0, "carry", -1);
	ir_add_output(g, g1, "ys", -1);
	ir_add_output(g, x, "x_itself", -1);
	CHECK(ir_verify(g, errbuf, sizeof errbuf));

	char *t = graph_text(g);
	// Spot checks of the format: the body first, defaults left out, every
	// attribute kind by name.
	CHECK(strstr(t, "def cell(c: f32[3], x: f32[3]) -> (f32[3], f32[3]) {\n") == t);
	CHECK(strstr(t, " = clamp(%5, min=-0.5)\n") != NULL);
	CHECK(strstr(t, " = hardtanh(%6, max=0.1)\n") != NULL);
	CHECK(strstr(t, " = polygamma(%7, n=2)\n") != NULL);
	CHECK(strstr(t, " = cast(%8, dtype=f64)\n") != NULL);
	CHECK(strstr(t, " = sum(%9, axes=[1], keepdim=1)\n") != NULL);
	CHECK(strstr(t, " = full(value=1e-300, shape=[2, 1], dtype=f64)\n") != NULL);
	CHECK(strstr(t, " = iota(shape=[2, 3], axis=1, dtype=f32)\n") != NULL);
	CHECK(strstr(t, " = kaiming_normal(shape=[2, 3], mode=fan_out, a=0.25, seed=7)\n") != NULL);
	CHECK(strstr(t, " = where(cond, %13, %14)\n") != NULL);
	CHECK(strstr(t, " = argmax(%15, axis=1)\n") != NULL);
	CHECK(strstr(t, " = take(x, idx, axis=0)\n") != NULL);
	CHECK(strstr(t, " = slice(%17, start=[0, 1], end=[2, 3], step=[1, 2])\n") != NULL);
	CHECK(strstr(t, " = pad(%18, before=[1, 0], after=[0, 2], value=-0.0)\n") != NULL);
	CHECK(strstr(t, " = scan(cell, %23, xs, ncarry=1, nxs=1, reverse=1)\n") != NULL);
	CHECK(strstr(t, " = get(%24, index=0)\n") != NULL);
	CHECK(strstr(t, "  return %12 as sum, %16 as am, %22 as cols, %25 as carry, %26 as ys, "
	                "x as x_itself\n") != NULL);
	if (tu_nfail)
		fprintf(stderr, "the printed graph:\n%s", t);
	free(t);

	check_graph_roundtrip(g, "builder graph");
	ir_graph_free(g);
}

// A builder graph whose second input is added after a node: the canonical
// text numbers nodes after all inputs, so it is the same text as for the
// graph built inputs first.
static void
test_renumber(void)
{
	Shape s = {.rank = 1, .dim = {2}};
	Graph *late = ir_graph_new("forward", NULL);
	NodeId x = ir_add_input(late, "x", IN_ARG, DT_F32, &s, 0);
	NodeId e = op1(late, OP_exp, NULL, x);
	NodeId y = ir_add_input(late, "y", IN_ARG, DT_F32, &s, 0);
	ir_add_output(late, op2(late, OP_add, NULL, e, y), "out", -1);

	Graph *early = ir_graph_new("forward", NULL);
	x = ir_add_input(early, "x", IN_ARG, DT_F32, &s, 0);
	y = ir_add_input(early, "y", IN_ARG, DT_F32, &s, 0);
	e = op1(early, OP_exp, NULL, x);
	ir_add_output(early, op2(early, OP_add, NULL, e, y), "out", -1);

	char *tl = graph_text(late), *te = graph_text(early);
	CHECK_STR(tl, te);
	free(tl);
	free(te);
	check_graph_roundtrip(late, "inputs added late");
	ir_graph_free(late);
	ir_graph_free(early);
}

// A whole module: the printed module parses back to the same text (the
// sizes comment aside, which the printed module no longer needs).
static void
test_module_roundtrip(void)
{
	static const char src[] =
	    "let N = 3\n"
	    "param w: f32[N, 2] = kaiming_uniform(mode=fan_out, seed=4)\n"
	    "const t: f64[N] = { a = iota(); return a * 0.1 + a }\n"
	    "const u: f32[2]\n"
	    "def forward(x: f32[N]) -> f32[2] {\n"
	    "  x.mul_(-0.0)\n"
	    "  return sum(w * reshape(x, [N, 1]), 0) + u\n"
	    "}\n";
	Module *m = parse(src);
	CHECK(m != NULL);
	if (!m)
		return;
	char *t1 = NULL, *t2 = NULL;
	size_t n1, n2;
	FILE *f = open_memstream(&t1, &n1);
	ir_print_module(f, m);
	fclose(f);
	Module *m2 = parse(t1);
	CHECK(m2 != NULL);
	if (m2) {
		f = open_memstream(&t2, &n2);
		ir_print_module(f, m2);
		fclose(f);
		// Skip the header comment lines (the file name, the sizes).
		const char *b1 = strstr(t1, "\nparam "), *b2 = strstr(t2, "\nparam ");
		CHECK(b1 && b2);
		if (b1 && b2)
			CHECK_STR(b2, b1);
		CHECK(strstr(t1, "# sizes: N = 3\n") != NULL);
		CHECK(strstr(t1, " = mul(x, %") != NULL);
		CHECK(strstr(t1, "full(value=-0.0, shape=[3])") != NULL);
		CHECK(strstr(t1, " -> x\n") != NULL);
		ir_module_free(m2);
	}
	free(t1);
	free(t2);
	ir_module_free(m);
}

int
main(void)
{
	test_float_table();
	test_float_roundtrip();
	test_builder_graph();
	test_renumber();
	test_module_roundtrip();
	return TU_DONE("test_printer");
}
