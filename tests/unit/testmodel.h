// tests/unit/testmodel.h -- the steps the unit tests repeat around what
// they check: a module parsed from text or loaded from models/, a task
// derived (pass_task) and verified, its inputs bound by name and the
// interpreter run on them.
//
// These are set-up, not checks: a failure prints why on stderr and exits 1
// (the test cannot go on without the module or the task).  A test that
// counts a failed task as a failed check and goes on (testutil.h) uses
// tm_check_derive and tm_check_run.
#ifndef FADC_TESTMODEL_H
#define FADC_TESTMODEL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frontend.h"
#include "ir.h"
#include "passes.h"
#include "testutil.h"

// Module text `text`, named `name` in its diagnostics (printed on stderr),
// with the sizes defs (NAME=VALUE, ndefs of them).
static inline Module *
tm_parse_defs(const char *name, const char *text, const char *const *defs, int ndefs)
{
	FeOptions o = {.diag = stderr, .defines = defs, .ndefines = ndefs};
	Module *m = fe_parse_string(name, text, strlen(text), &o);
	if (!m) {
		fprintf(stderr, "cannot parse %s\n", name);
		exit(1);
	}
	return m;
}

// Module text `text` at its default sizes (tm_parse_defs).
static inline Module *
tm_parse(const char *name, const char *text)
{
	return tm_parse_defs(name, text, NULL, 0);
}

// models/FILE of the source tree ($FADC_SOURCE_DIR, else .) with the sizes
// defs (NAME=VALUE, ndefs of them).
static inline Module *
tm_load(const char *file, const char *const *defs, int ndefs)
{
	const char *root = getenv("FADC_SOURCE_DIR");
	char path[4096];
	snprintf(path, sizeof path, "%s/models/%s", root ? root : ".", file);
	FeOptions o = {.diag = stderr, .defines = defs, .ndefines = ndefs};
	Module *m = fe_parse_file(path, &o);
	if (!m) {
		fprintf(stderr, "cannot load %s\n", path);
		exit(1);
	}
	return m;
}

// Task `task` of the forward graph f (pass_task).  With why, a task that
// cannot be derived because a rule is "not implemented yet" gives NULL
// and the message in why; any other failure exits.
static inline Graph *
tm_derive(const Graph *f, const char *task, char *why, size_t whylen)
{
	char err[512];
	Loc el;
	Graph *g = pass_task(f, task, NULL, &el, err, sizeof err);
	if (!g) {
		if (why && strstr(err, "not implemented yet")) {
			snprintf(why, whylen, "%s", err);
			return NULL;
		}
		fprintf(stderr, "task %s: %s\n", task, err);
		exit(1);
	}
	return g;
}

// Exits unless g, task `task`'s graph, passes the verifier.
static inline void
tm_verify(const Graph *g, const char *task)
{
	char err[512];
	if (!ir_verify(g, err, sizeof err)) {
		fprintf(stderr, "task %s: does not verify: %s\n", task, err);
		exit(1);
	}
}

// g run by the interpreter on in under run seed rs: its outputs (g->nout,
// malloc'ed; tm_free_out).  `task` names g in the message of a failure.
static inline Tensor *
tm_interp(const Graph *g, const Tensor *in, uint64_t rs, const char *task)
{
	char err[512];
	Tensor *out = calloc(g->nout + 1, sizeof *out);
	if (!ir_interp(g, in, out, rs, err, sizeof err)) {
		fprintf(stderr, "task %s: %s\n", task, err);
		exit(1);
	}
	return out;
}

// Binds the inputs in[0 .. g->ninput) of g, a task graph of module m, by
// name: the declarations of m from vals (indexed like m->decl), then the
// extras xn[k] from xv[k].  NULL, or the name of an input without a value.
static inline const char *
tm_bind(const Module *m, const Graph *g, const Tensor *vals, const char *const *xn,
        const Tensor *xv, int nx, Tensor *in)
{
	for (uint32_t i = 0; i < g->ninput; i++) {
		int d = ir_module_find_decl(m, g->input[i].name), found = 0;
		if (d >= 0)
			in[i] = vals[d], found = 1;
		for (int k = 0; !found && k < nx; k++)
			if (!strcmp(xn[k], g->input[i].name))
				in[i] = xv[k], found = 1;
		if (!found)
			return g->input[i].name;
	}
	return NULL;
}

// g (task `task` of module m) run under run seed rs, its inputs bound by
// name (tm_bind).  An input without a value exits.
static inline Tensor *
tm_run(const Module *m, const Graph *g, const char *task, const Tensor *vals,
       const char *const *xn, const Tensor *xv, int nx, uint64_t rs)
{
	Tensor *in = calloc(g->ninput + 1, sizeof *in);
	const char *missing = tm_bind(m, g, vals, xn, xv, nx, in);
	if (missing) {
		fprintf(stderr, "task %s: no value for input %s\n", task, missing);
		exit(1);
	}
	Tensor *out = tm_interp(g, in, rs, task);
	free(in);
	return out;
}

// Task `task` of m derived, verified and run (tm_run) under run seed rs:
// its outputs, and its graph in *gout (tm_free_out frees both).  With why,
// a task that needs a rule "not implemented yet" gives NULL and the message
// in why (tm_derive); any other failure exits.
static inline Tensor *
tm_run_task_why(const Module *m, const char *task, const Tensor *vals, const char *const *xn,
                const Tensor *xv, int nx, uint64_t rs, char *why, size_t whylen, Graph **gout)
{
	Graph *g = tm_derive(m->main, task, why, whylen);
	*gout = g;
	if (!g)
		return NULL;
	tm_verify(g, task);
	return tm_run(m, g, task, vals, xn, xv, nx, rs);
}

// tm_run_task_why under run seed rs, every failure exiting.
static inline Tensor *
tm_run_task_seed(const Module *m, const char *task, const Tensor *vals, const char *const *xn,
                 const Tensor *xv, int nx, uint64_t rs, Graph **gout)
{
	return tm_run_task_why(m, task, vals, xn, xv, nx, rs, NULL, 0, gout);
}

// tm_run_task_seed under run seed 0.
static inline Tensor *
tm_run_task(const Module *m, const char *task, const Tensor *vals, const char *const *xn,
            const Tensor *xv, int nx, Graph **gout)
{
	return tm_run_task_seed(m, task, vals, xn, xv, nx, 0, gout);
}

// The values of m's declarations (ir_module_init, run seed 0, nothing
// bound), indexed like m->decl; tm_free_tensors(v, m->ndecl) frees them.
static inline Tensor *
tm_init(const Module *m)
{
	char err[512];
	Tensor *v = calloc(m->ndecl + 1, sizeof *v);
	if (!ir_module_init(m, NULL, NULL, v, 0, err, sizeof err)) {
		fprintf(stderr, "init: %s\n", err);
		exit(1);
	}
	return v;
}

// Frees the n tensors of t, and t (NULL: nothing).
static inline void
tm_free_tensors(Tensor *t, uint32_t n)
{
	if (!t)
		return;
	for (uint32_t i = 0; i < n; i++)
		ir_tensor_free(&t[i]);
	free(t);
}

// ---- the same steps as checks (testutil.h), for a test that goes on past
// a task that fails: one check per task, tm_check_derive's, failed by a
// failure at any step (said on stderr).

// Task `task` of the forward graph f derived and verified, a check: NULL
// where it cannot be derived; a graph that does not verify fails the check
// but is given.
static inline Graph *
tm_check_derive(const Graph *f, const char *task)
{
	char err[512];
	Loc el;
	Graph *g = pass_task(f, task, NULL, &el, err, sizeof err);
	tu_ncheck++;
	if (!g) {
		tu_nfail++;
		fprintf(stderr, "task %s: %s\n", task, err);
		return NULL;
	}
	if (!ir_verify(g, err, sizeof err)) {
		tu_nfail++;
		fprintf(stderr, "task %s: does not verify: %s\n", task, err);
	}
	return g;
}

// tm_run where an input without a value or an interpreter error fails the
// task's check (no new one) and gives NULL.
static inline Tensor *
tm_check_run(const Module *m, const Graph *g, const char *task, const Tensor *vals,
             const char *const *xn, const Tensor *xv, int nx, uint64_t rs)
{
	char err[512];
	Tensor *in = calloc(g->ninput + 1, sizeof *in);
	Tensor *out = NULL;
	const char *missing = tm_bind(m, g, vals, xn, xv, nx, in);
	if (missing) {
		tu_nfail++;
		fprintf(stderr, "task %s: no value for input %s\n", task, missing);
	} else {
		out = calloc(g->nout + 1, sizeof *out);
		if (!ir_interp(g, in, out, rs, err, sizeof err)) {
			tu_nfail++;
			fprintf(stderr, "task %s: %s\n", task, err);
			free(out);
			out = NULL;
		}
	}
	free(in);
	return out;
}

// Frees the outputs out of task graph g, and g.
static inline void
tm_free_out(Graph *g, Tensor *out)
{
	tm_free_tensors(out, g->nout);
	ir_graph_free(g);
}

#endif
