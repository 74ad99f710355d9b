// ir/ops_dsl_end.h -- undefines the macros of ops.def's scalar DSL.
//
// A consumer of the op table's formulas (the interpreter, the kernel IR's
// lowering) defines the DSL's vocabulary (X, Y, A, ADD, EXP, PG, ...; the
// list is at the top of ops.def), includes ops.def to expand every row, then
// includes this file, so that the names are free again for the rest of the
// file.  The vocabulary is listed once, here, beside the table that uses it.
#undef X
#undef Y
#undef A
#undef ONE
#undef ZERO
#undef K
#undef ADD
#undef SUB
#undef MUL
#undef DIV
#undef NEG
#undef POW
#undef EXP
#undef LOG
#undef LOG1P
#undef EXPM1
#undef SQRT
#undef RSQRT
#undef TANH
#undef SIGMOID
#undef ERF
#undef SOFTPLUS
#undef SIN
#undef COS
#undef RELU
#undef STEP
#undef ABS
#undef SIGN
#undef FLOOR
#undef LGAMMA
#undef DIGAMMA
#undef PG
#undef PGNEXT
#undef XLOGY
#undef MAXIMUM
#undef MINIMUM
#undef CLAMP
#undef EQ
#undef NE
#undef LT
#undef LE
#undef GT
#undef GE
#undef AND
#undef OR
