// tests/unit/scan_modules.h -- scan modules shared by test_scandiff (their
// derivatives against finite differences) and test_codegen_scan (compiled,
// against the interpreter): one text, so both tests check the same program.
#ifndef SCAN_MODULES_H
#define SCAN_MODULES_H

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

// Matrix invariants whose per-step adjoint is a product larger than its
// factors (passes/scan.c hoists Σ_t A_t B_t out of the reverse scan as one
// product over the steps): h @ wa (A_t = h_tᵀ, a permute) and
// wb @ reshape(h) (A_t = the step's adjoint, no permute), a reverse scan,
// a mask, and wa also read outside the scan.
static const char matrnn[] =
    "param wa: f64[5, 5] = normal(0, 0.4, seed=10)\n"
    "param wb: f64[5, 5] = normal(0, 0.4, seed=11)\n"
    "param xs: f64[4, 2, 5] = normal(0, 0.5, seed=12)\n"
    "const mask: bool[4, 2, 1] = iota(shape=[4, 2, 1], axis=0, dtype=f64) < broadcast(3 + iota(shape=[2, 1], axis=0, dtype=f64), shape=[4, 2, 1])\n"
    "def cell(h: f64[2, 5], x: f64[2, 5], m: bool[2, 1], wa: f64[5, 5], wb: f64[5, 5]) -> (f64[2, 5], f64[2, 5]) {\n"
    "  n = tanh(h @ wa + reshape(wb @ reshape(h, [5, 2]), [2, 5]) + x)\n"
    "  return where(m, n, h), n * x\n}\n"
    "def forward() {\n"
    "  h, ys = scan(cell, xs[0], xs, mask, wa, wb, ncarry=1, nxs=2, reverse=1)\n"
    "  return sum(ys) + sum(h * h) + sum(wa * wa)\n}\n";

#endif
