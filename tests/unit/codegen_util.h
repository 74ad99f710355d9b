// tests/unit/codegen_util.h -- the steps the codegen tests repeat around
// what they check: a model's text parsed, its f32 twin, cg_check run with
// its report line, and one task built as codegen/compile.c builds it.
// Each failure is a failed check (testutil.h) and says why on stderr, so a
// test reads as the checks of its own.
#ifndef FADC_CODEGEN_UTIL_H
#define FADC_CODEGEN_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen.h"
#include "frontend.h"
#include "harness.h"
#include "passes.h"
#include "testutil.h"

// A copy of src with every "f64" spelled "f32": the same model in single
// precision (free it).
static inline char *
cgu_to_f32(const char *src)
{
	char *s = strdup(src);
	for (char *q = strstr(s, "f64"); q; q = strstr(q + 3, "f64"))
		q[1] = '3', q[2] = '2';
	return s;
}

// Module text `text`, named `name` in diagnostics (printed on stderr), or
// NULL, a failed check.
static inline Module *
cgu_parse(const char *name, const char *text)
{
	FeOptions fo = {.diag = stderr};
	Module *m = fe_parse_string(name, text, strlen(text), &fo);
	CHECK(m != NULL);
	return m;
}

// cg_check of m (tools/fadc/harness.c: every task compiled and run against the
// interpreter): prints "LABEL: " and its report on stdout, an error on
// stderr after `name`, and checks that no output is above tolerance.
static inline void
cgu_check(const Module *m, const CgOptions *o, const CgCheck *c, const char *name,
          const char *label)
{
	char err[4096] = "";
	printf("%s: ", label);
	fflush(stdout);
	int nf = cg_check(m, o, c, stdout, err, sizeof err);
	if (nf < 0)
		fprintf(stderr, "%s: %s\n", name, err);
	CHECK(nf == 0);
}

// Task `task` of m derived (pass_task), lowered (cg_lower, f32 values
// computed in fcompute) and planned (cg_plan), as codegen/compile.c builds
// it; NULL with the reason in err.  *derived (when not NULL) says whether
// the task could be derived: a module may lack one (vhp of a forward that
// is not a scalar).  Checks nothing: callers differ in what may fail.
static inline KProgram *
cgu_lower_task(const Module *m, const char *task, DType fcompute, int *derived, char *err,
               size_t errlen)
{
	Loc loc = 0;
	Graph *g = pass_task(m->main, task, NULL, &loc, err, errlen);
	if (derived)
		*derived = g != NULL;
	if (!g)
		return NULL;
	KProgram *p = cg_lower(g, task, fcompute, err, errlen);
	ir_graph_free(g);
	if (p)
		cg_plan(p);
	return p;
}

// ms[0 .. n) compiled with o into the artifact path: one module by
// cg_compile_module, several (the specialisations names) by
// cg_compile_specs.  Set-up, not a check: a failure says why on stderr,
// after label, and exits.
static inline void
cgu_compile_or_exit(const Module *const *ms, const char *const *names, int n, const CgOptions *o,
                    const char *path, const char *label)
{
	char err[4096];
	int ok = n == 1 ? cg_compile_module(ms[0], o, path, err, sizeof err)
	                : cg_compile_specs(ms, names, n, o, path, err, sizeof err);
	if (!ok) {
		fprintf(stderr, "compile %s: %s\n", label, err);
		exit(1);
	}
}

#endif
