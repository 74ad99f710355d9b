// tools/fadc/harness.h -- cg_check: compiled code against the reference
// interpreter (harness.c, library fadc_harness).
//
// A harness, not part of the compiler: it compiles a module, then loads and
// runs the artifact through the runtime (include/fadc.h), so it sits above
// both codegen and the runtime.  `fadc check` and the code generator's and
// runtime's unit tests use it.
#ifndef FADC_TOOLS_HARNESS_H
#define FADC_TOOLS_HARNESS_H

#include <stdint.h>
#include <stdio.h>

#include "codegen.h"

typedef struct CgCheck {
	double tol; // largest normalized error of a task's output
	double init_tol; // of an initializer against ir_module_init
	uint64_t seed; // run seed (initializers, the caller's inputs)
	int verbose; // report every output, not only failures
} CgCheck;

// Compiles m (to a temporary file), runs every task through the runtime
// and through ir_interp on the same inputs, and reports each output's
// normalized error max|got - want| / max|want| to `report`.  Returns the
// number of outputs above tolerance, or -1 with a message on an error.
int cg_check(const Module *m, const CgOptions *o, const CgCheck *c, FILE *report, char *err,
             size_t errlen);

#endif
