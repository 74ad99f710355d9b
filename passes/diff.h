// passes/diff.h -- the scalar DSL of ops.def as graph builders, shared by
// vjp.c and jvp.c (private to passes/).
//
// An elementwise rule evaluates a row's derivative column d0 or d1 into the
// output graph g: X and Y are the (copied) operands, R the (copied) result,
// A(i) the row's float attribute i as a constant of R's type.  The caller
// defines local variables g, loc, x0, x1, r and at (the node's Attrs).
#ifndef FADC_DIFF_H
#define FADC_DIFF_H

#define X x0
#define Y x1
#define R r
#define ONE b_full_like(g, 1, r, loc)
#define ZERO ((NodeId)0)
#define K(c) b_full_like(g, (c), r, loc)
#define A(i) b_full_like(g, at.a[i].f, r, loc)
#define ADD(u_, w_) b_add(g, u_, w_, loc)
#define SUB(u_, w_) b_sub(g, u_, w_, loc)
#define MUL(u_, w_) b_mul(g, u_, w_, loc)
#define DIV(u_, w_) b_op2(g, OP_div, u_, w_, loc)
#define NEG(u_) b_neg(g, u_, loc)
#define POW(u_, w_) b_op2(g, OP_pow, u_, w_, loc)
#define XLOGY(u_, w_) b_op2(g, OP_xlogy, u_, w_, loc)
#define EXP(u_) b_op1(g, OP_exp, u_, loc)
#define LOG(u_) b_op1(g, OP_log, u_, loc)
#define SQRT(u_) b_op1(g, OP_sqrt, u_, loc)
#define TANH(u_) b_op1(g, OP_tanh, u_, loc)
#define SIGMOID(u_) b_op1(g, OP_sigmoid, u_, loc)
#define SIN(u_) b_op1(g, OP_sin, u_, loc)
#define COS(u_) b_op1(g, OP_cos, u_, loc)
#define STEP(u_) b_op1(g, OP_step, u_, loc)
#define SIGN(u_) b_op1(g, OP_sign, u_, loc)
#define ABS(u_) b_op1(g, OP_abs, u_, loc)
#define DIGAMMA(u_) b_op1(g, OP_digamma, u_, loc)
#define PG(n_, u_) b_polygamma(g, n_, u_, loc)
#define PGNEXT(u_) b_polygamma(g, at.a[0].i + 1, u_, loc)

#endif
