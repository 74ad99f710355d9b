// passes/tasks.c -- the tasks of torch.autograd.functional as pipelines of
// passes over the forward graph (docs/TASKS.md says what each returns).
//
//   vjp  = vjp(f)                      (f(x), v^T J)
//   jvp  = jvp(f)                      (f(x), J v)      true forward mode
//   vhp  = vjp(vjp(f, 1))              (f(x), v^T H)    reverse-over-reverse
//   hvp  = jvp(vjp(f, 1))              (f(x), H v)      forward-over-reverse
//   jacobian, jacrev = vjp(f, 1)       J (scalar f: one row, no batching)
// Each derived graph is simplified.  The pipeline is this one file's list of
// calls; after each pass, PassOpts may dump the graph or its node count.
// Tasks over basis vectors (jacfwd, the Hessians, Jacobians of non-scalar
// f) need the batching pass and report that they are not built yet.
#include <string.h>

#include "passes.h"

const char *const fadc_tasks[] = {"forward", "vjp", "jvp", "vhp", "hvp", "jacobian", "hessian",
                                  "hessian_fwdrev", "hessian_revrev", "jacfwd", "jacrev", NULL};

int
task_lookup(const char *name)
{
	for (int i = 0; fadc_tasks[i]; i++)
		if (!strcmp(fadc_tasks[i], name))
			return i;
	return -1;
}

typedef struct Pipe {
	const PassOpts *o;
	int stopped;
} Pipe;

static int
name_in_list(const char *list, const char *name)
{
	size_t n = strlen(name);
	for (const char *p = list; p && *p;) {
		const char *c = strchr(p, ',');
		size_t len = c ? (size_t)(c - p) : strlen(p);
		if (len == n && !strncmp(p, name, n))
			return 1;
		p = c ? c + 1 : NULL;
	}
	return 0;
}

// After a pass: dumps and counts as asked; returns 1 if the pipeline stops.
static int
after(Pipe *p, const char *pass, const Graph *g)
{
	const PassOpts *o = p->o;
	if (!o)
		return 0;
	FILE *f = o->dump ? o->dump : stderr;
	if (o->stats)
		fprintf(f, "# stats: after %-9s %6u nodes\n", pass, g->nnode - 1);
	if (o->print_after_all || name_in_list(o->print_after, pass)) {
		fprintf(f, "# after %s\n", pass);
		ir_print_graph(f, g, g->name);
	}
	if (o->stop_after && !strcmp(o->stop_after, pass))
		p->stopped = 1;
	return p->stopped;
}

static Graph *
step(Pipe *p, const char *pass, Graph *g, Graph *prev)
{
	ir_graph_free(prev);
	if (g)
		after(p, pass, g);
	return g;
}

static Graph *
simplify(Pipe *p, Graph *g)
{
	if (p->stopped)
		return g;
	return step(p, "simplify", pass_simplify(g), g);
}

// The output k of g kept, renamed; the others dropped (DCE removes them).
static void
keep_outputs(Graph *g, const uint32_t *idx, const char *const *names, uint32_t n)
{
	Output *o = arena_alloc_array(g->arena, n + 1, sizeof *o);
	for (uint32_t i = 0; i < n; i++) {
		o[i] = g->out[idx[i]];
		o[i].name = arena_strdup(g->arena, names[i]);
	}
	g->out = o;
	g->nout = g->cout = n;
}

static void
rename_inputs(Graph *g, const char *from, const char *to)
{
	size_t n = strlen(from);
	for (uint32_t i = 0; i < g->ninput; i++)
		if (!strncmp(g->input[i].name, from, n))
			g->input[i].name = arena_printf(g->arena, "%s%s", to, g->input[i].name + n);
}

static int
is_scalar_forward(const Graph *f)
{
	if (f->nout != 1)
		return 0;
	const Node *o = &f->node[f->out[0].node];
	return ir_dtype_is_float((DType)o->dtype) && f->shape[o->shape].rank == 0;
}

static uint32_t
nparams(const Graph *f)
{
	uint32_t n = 0;
	for (uint32_t i = 0; i < f->ninput; i++)
		n += f->input[i].kind == IN_PARAM;
	return n;
}

static const char *
param_name(const Graph *f, uint32_t k)
{
	for (uint32_t i = 0; i < f->ninput; i++)
		if (f->input[i].kind == IN_PARAM && k-- == 0)
			return f->input[i].name;
	return "?";
}

// f's output, then the n outputs from `first` on, named prefix.<param>.
static Graph *
select_derivs(Graph *g, const Graph *f, uint32_t first, const char *prefix, int with_value)
{
	uint32_t n = nparams(f);
	uint32_t *idx = arena_alloc_array(g->arena, n + 2, sizeof *idx);
	const char **names = arena_alloc_array(g->arena, n + 2, sizeof *names);
	uint32_t k = 0;
	if (with_value) {
		idx[k] = 0;
		names[k++] = f->out[0].name;
	}
	for (uint32_t i = 0; i < n; i++) {
		idx[k] = first + i;
		names[k++] = arena_printf(g->arena, "%s.%s", prefix, param_name(f, i));
	}
	keep_outputs(g, idx, names, k);
	return g;
}

Graph *
pass_task(const Graph *f, const char *task, const PassOpts *o, Loc *errloc, char *err, size_t errlen)
{
	Pipe p = {.o = o};
	*errloc = 0;
	int t = task_lookup(task);
	if (t < 0) {
		snprintf(err, errlen, "unknown task '%s'", task);
		return NULL;
	}
	int needs_scalar = !strcmp(task, "vhp") || !strcmp(task, "hvp") || !strncmp(task, "hessian", 7);
	if (needs_scalar && !is_scalar_forward(f)) {
		snprintf(err, errlen, "task '%s' needs forward to return one float scalar (such as f32[])",
		         task);
		return NULL;
	}
	if (!strcmp(task, "hessian") || !strcmp(task, "hessian_fwdrev") ||
	    !strcmp(task, "hessian_revrev") || !strcmp(task, "jacfwd") ||
	    ((!strcmp(task, "jacobian") || !strcmp(task, "jacrev")) && !is_scalar_forward(f))) {
		snprintf(err, errlen,
		         "task '%s' needs the batching (vmap) pass over basis vectors, which is not built yet",
		         task);
		return NULL;
	}
	// Work on a simplified copy of f, so that derivatives see no dead code.
	Graph *g = pass_simplify(f);
	if (after(&p, "simplify", g) || !strcmp(task, "forward"))
		return g;
	if (!strcmp(task, "vjp")) {
		g = step(&p, "vjp", pass_vjp(g, errloc, err, errlen), g);
		if (!g || p.stopped)
			return g;
		if (f->nout == 1)
			for (uint32_t i = 0; i < g->ninput; i++)
				if (!strncmp(g->input[i].name, "v.", 2))
					g->input[i].name = "v";
		return simplify(&p, g);
	}
	if (!strcmp(task, "jvp")) {
		g = step(&p, "jvp", pass_jvp(g, errloc, err, errlen), g);
		if (!g || p.stopped)
			return g;
		rename_inputs(g, "t.", "v.");
		return simplify(&p, g);
	}
	// The rest start from the gradient graph: outputs (f, grad.<p>...).
	uint32_t np = nparams(f);
	Graph *gr = step(&p, "vjp", pass_vjp_ex(g, NULL, 1, errloc, err, errlen), g);
	if (!gr || p.stopped)
		return gr;
	if (!strcmp(task, "jacobian") || !strcmp(task, "jacrev")) {
		select_derivs(gr, f, 1, "jacobian", 0);
		return simplify(&p, gr);
	}
	gr = simplify(&p, gr);
	if (p.stopped)
		return gr;
	if (!strcmp(task, "hvp")) {
		Graph *h = step(&p, "jvp", pass_jvp(gr, errloc, err, errlen), gr);
		if (!h || p.stopped)
			return h;
		rename_inputs(h, "t.", "v.");
		// outputs: f, grad.<p>..., jvp.f, jvp.grad.<p>...
		select_derivs(h, f, 2 + np, "hvp", 1);
		return simplify(&p, h);
	}
	// vhp: reverse over the gradients, with cotangents v for them only.
	uint8_t *outs = arena_alloc_array(gr->arena, gr->nout + 1, 1);
	for (uint32_t k = 1; k < gr->nout; k++)
		outs[k] = 1;
	Graph *h = step(&p, "vjp", pass_vjp_ex(gr, outs, 0, errloc, err, errlen), gr);
	if (!h || p.stopped)
		return h;
	rename_inputs(h, "v.grad.", "v.");
	// outputs: f, grad.<p>..., grad.<p>... (the second-order ones last)
	select_derivs(h, f, 1 + np, "vhp", 1);
	return simplify(&p, h);
}
