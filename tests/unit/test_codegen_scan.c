// tests/unit/test_codegen_scan.c -- scan compiled for the CPU (a loop over
// its body's kernels, codegen/lower.c kernel_scan) against the float64
// interpreter, every task (forward, vjp, jvp, vhp, hvp, jacobians and the
// three Hessians: forward scans, forward scans saving carries, reverse
// scans of the body's vjp, jvp scans and vmap's batched scans).
//
// The modules are those of tests/unit/test_scandiff.c (whose derivatives
// are checked there against finite differences: one and two carries,
// reverse, masks, invariants, a nested scan, a CTC-like recursion) plus
// one for the lowering's corner cases.  Each runs twice: in f64, where the
// compiled code does the interpreter's arithmetic in the interpreter's
// order, so the normalized error must stay below 1e-12 (measured 0 to
// ~1e-15); and rewritten to f32, computing in f32, below 1e-5 (measured
// <= 5.3e-7).
#include <stdlib.h>
#include <string.h>

#include "codegen.h"
#include "frontend.h"
#include "testutil.h"

static const char rnn[] =
    "param w: f64[3] = uniform(0.2, 0.9, seed=1)\n"
    "param c0: f64[3] = normal(0, 0.5, seed=2)\n"
    "param xs: f64[5, 3] = normal(0, 0.5, seed=3)\n"
    "def cell(c: f64[3], x: f64[3], w: f64[3]) -> (f64[3], f64[3]) {\n"
    "  n = tanh(c * w + x)\n  return n, n * n\n}\n"
    "def forward() {\n  c, ys = scan(cell, c0, xs, w, ncarry=1, nxs=1)\n"
    "  return sum(ys * xs) + sum(c * w)\n}\n";

static const char rnn_reverse[] =
    "param w: f64[3] = uniform(0.2, 0.9, seed=1)\n"
    "param xs: f64[4, 3] = normal(0, 0.5, seed=3)\n"
    "def cell(c: f64[3], x: f64[3], w: f64[3]) -> (f64[3], f64[3]) {\n"
    "  n = sigmoid(c * w - x)\n  return n, n * c\n}\n"
    "def forward() {\n  c, ys = scan(cell, zeros([3], f64), xs, w, ncarry=1, nxs=1, reverse=1)\n"
    "  return sum(ys) + sum(c * c)\n}\n";

static const char lstm[] =
    "param wx: f64[2, 8] = normal(0, 0.4, seed=4)\n"
    "param wh: f64[2, 8] = normal(0, 0.4, seed=5)\n"
    "const xs: f64[4, 3, 2] = normal(0, 1, seed=6)\n"
    "const lens: f64[3, 1] = full(3) - iota(shape=[3, 1], axis=0, dtype=f64)\n"
    "const mask: bool[4, 3, 1] = cast(iota(shape=[4, 3, 1], axis=0, dtype=f64), dtype=f64) < "
    "broadcast(lens, shape=[4, 3, 1])\n"
    "def lstm_step(h: f64[3, 2], c: f64[3, 2], x: f64[3, 2], m: bool[3, 1], wx: f64[2, 8], wh: "
    "f64[2, 8]) -> (f64[3, 2], f64[3, 2], f64[3, 2]) {\n"
    "  z = x @ wx + h @ wh\n"
    "  i = sigmoid(z[:, 0:2])\n  f = sigmoid(z[:, 2:4])\n  g = tanh(z[:, 4:6])\n  o = sigmoid(z[:, 6:8])\n"
    "  c2 = f * c + i * g\n  h2 = o * tanh(c2)\n"
    "  return where(m, h2, h), where(m, c2, c), where(m, h2, 0.0)\n}\n"
    "def forward() {\n"
    "  h, c, ys = scan(lstm_step, zeros([3, 2], f64), zeros([3, 2], f64), xs, mask, wx, wh, ncarry=2, "
    "nxs=2)\n"
    "  return sum(ys * ys) + sum(h) + sum(c * c)\n}\n";

static const char nested[] =
    "param w: f64[2] = uniform(0.3, 0.8, seed=7)\n"
    "param xs: f64[3, 4, 2] = normal(0, 0.5, seed=8)\n"
    "def inner(c: f64[2], x: f64[2], w: f64[2]) -> (f64[2], f64[2]) {\n  n = tanh(c * w + x)\n  "
    "return n, n\n}\n"
    "def outer(c: f64[2], x: f64[4, 2], w: f64[2]) -> (f64[2], f64[2]) {\n"
    "  c2, ys = scan(inner, c, x, w, ncarry=1, nxs=1)\n  return c2 * w, sum(ys, 0)\n}\n"
    "def forward() {\n  c, ys = scan(outer, w, xs, w, ncarry=1, nxs=1)\n  return sum(c) + sum(ys * "
    "ys)\n}\n";

static const char ctc[] =
    "param logits: f64[5, 2, 3] = normal(0, 1, seed=9)\n"
    "const mask: bool[5, 2, 1] = iota(shape=[5, 2, 1], axis=0, dtype=f64) < broadcast(4 + "
    "iota(shape=[2, 1], axis=0, dtype=f64), shape=[5, 2, 1])\n"
    "def alpha(a: f64[2, 3], lp: f64[2, 3], m: bool[2, 1]) -> (f64[2, 3]) {\n"
    "  prev = pad(a[:, 0:2], before=[0, 1], after=[0, 0], value=-1e30)\n"
    "  both = concat(unsqueeze(a, 2), unsqueeze(prev, 2), axis=2)\n"
    "  n = logsumexp(both, 2) + lp\n"
    "  return where(m, n, a)\n}\n"
    "def forward() {\n"
    "  lp = log_softmax(logits, 2)\n"
    "  a0 = pad(zeros([2, 1], f64), before=[0, 0], after=[0, 2], value=-1e30)\n"
    "  a = scan(alpha, a0, lp, mask, ncarry=1, nxs=2)\n"
    "  return -sum(logsumexp(get(a, index=0), 1))\n}\n";

// The lowering's corner cases: a sequence that is a view (a permute,
// materialized for the body), an invariant that is an expression, a carry
// passed through unchanged, a scalar per-step output, a reduction and a
// matmul in the body (written to a temporary, then copied into the
// stacked output at the step's offset), a bool sequence, and a scan of
// length 0 (the carries come out as they went in, the outputs are empty).
static const char corners[] =
    "param w: f64[3] = uniform(0.2, 0.9, seed=1)\n"
    "param xt: f64[3, 4] = normal(0, 0.5, seed=3)\n"
    "param m2: f64[3, 3] = normal(0, 0.5, seed=4)\n"
    "def cell(a: f64[3], b: f64[3], x: f64[3], m: bool[3], k: f64[3], mm: f64[3, 3]) -> (f64[3], "
    "f64[3], f64[], f64[3]) {\n"
    "  n = where(m, a * k + x, a)\n"
    "  return n, b, sum(n * b), reshape(reshape(n, [1, 3]) @ mm, [3])\n}\n"
    "def empty(c: f64[3], x: f64[3]) -> (f64[3], f64[3]) {\n  return c * x, c + x\n}\n"
    "def forward() {\n"
    "  mask = iota(shape=[4, 3], axis=0) + iota(shape=[4, 3], axis=1) < 5\n"
    "  a, b, s, v = scan(cell, w, w * 2, transpose(xt, 0, 1), mask, exp(w), m2, ncarry=2, nxs=2)\n"
    "  e, es = scan(empty, w, zeros([0, 3], f64), ncarry=1, nxs=1)\n"
    "  return sum(a * b) + sum(s * s) + sum(v) + sum(e * w) + sum(es)\n}\n";

// Replaces every "f64" of src with "f32" (the same models in single precision).
static char *
to_f32(const char *src)
{
	char *s = strdup(src);
	for (char *q = strstr(s, "f64"); q; q = strstr(q + 3, "f64"))
		q[2] = '2', q[1] = '3';
	return s;
}

static void
check(const char *name, const char *src, int f32)
{
	char *text = f32 ? to_f32(src) : strdup(src);
	FeOptions fo = {.diag = stderr};
	Module *m = fe_parse_string(name, text, strlen(text), &fo);
	CHECK(m != NULL);
	if (!m) {
		free(text);
		return;
	}
	static const char *const all[] = {"all"};
	CgOptions o = {.tasks = all, .ntasks = 1, .opt_level = 1};
	CgCheck c = {f32 ? 1e-5 : 1e-12, 1e-6, 0, 0};
	char err[4096] = "";
	printf("%s (%s): ", name, f32 ? "f32" : "f64");
	fflush(stdout);
	int nf = cg_check(m, &o, &c, stdout, err, sizeof err);
	if (nf < 0)
		fprintf(stderr, "%s: %s\n", name, err);
	CHECK(nf == 0);
	ir_module_free(m);
	free(text);
}

int
main(void)
{
	static const struct {
		const char *name, *src;
	} mods[] = {{"rnn", rnn},       {"rnn-reverse", rnn_reverse}, {"lstm-masked", lstm},
	            {"nested", nested}, {"ctc-alpha", ctc},           {"corners", corners}};
	for (size_t i = 0; i < sizeof mods / sizeof mods[0]; i++)
		for (int f32 = 0; f32 < 2; f32++)
			check(mods[i].name, mods[i].src, f32);
	return TU_DONE("test_codegen_scan");
}
