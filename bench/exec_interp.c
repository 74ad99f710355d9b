// bench/exec_interp.c -- the reference interpreter as a benchmark backend:
// the task graph from pass_task, params and constants from their seeded
// initializers, runs by ir_interp in float64.  Slow by design: for reduced
// sizes (--reduced) and as the oracle of --check.
#include <stdlib.h>
#include <string.h>

#include "exec.h"
#include "frontend.h"
#include "ir.h"
#include "passes.h"

struct Prepared {
	Module *m;
	Graph *g;
	Tensor *vals; // per declaration
	Tensor *in; // per graph input
	int *extra; // graph input index of each extra input
	int nextra;
	BTensor *bin; // extra inputs as the runner fills them
	BTensor *bout;
	Tensor *out;
	uint64_t seed;
};

static void
to_b(BTensor *b, const char *name, const Tensor *t)
{
	snprintf(b->name, sizeof b->name, "%s", name);
	b->rank = t->shape.rank;
	memcpy(b->dim, t->shape.dim, sizeof(int64_t) * (size_t)t->shape.rank);
	b->n = ir_numel(&t->shape);
}

static void
release(Prepared *p)
{
	if (!p)
		return;
	for (uint32_t i = 0; p->m && i < p->m->ndecl; i++)
		ir_tensor_free(&p->vals[i]);
	for (int i = 0; i < p->nextra; i++)
		ir_tensor_free(&p->in[p->extra[i]]);
	for (uint32_t i = 0; p->g && p->out && i < p->g->nout; i++)
		ir_tensor_free(&p->out[i]);
	free(p->vals), free(p->in), free(p->extra), free(p->bin), free(p->bout), free(p->out);
	ir_graph_free(p->g);
	ir_module_free(p->m);
	free(p);
}

static Prepared *
prepare(const char *source, const char *const *defs, int ndefs, const char *task, uint64_t seed,
        char *err, size_t errlen)
{
	Prepared *p = calloc(1, sizeof *p);
	if (!p)
		return NULL;
	p->seed = seed;
	FeOptions o = {.defines = defs, .ndefines = ndefs, .diag = stderr};
	p->m = fe_load_model(source, &o);
	if (!p->m) {
		snprintf(err, errlen, "%s: does not compile (diagnostic above)", source);
		release(p);
		return NULL;
	}
	Loc el;
	p->g = pass_task(p->m->main, task, NULL, &el, err, errlen);
	if (!p->g) {
		release(p);
		return NULL;
	}
	p->vals = calloc(p->m->ndecl + 1, sizeof *p->vals);
	p->in = calloc(p->g->ninput + 1, sizeof *p->in);
	p->extra = calloc(p->g->ninput + 1, sizeof *p->extra);
	p->bin = calloc(p->g->ninput + 1, sizeof *p->bin);
	p->bout = calloc(p->g->nout + 1, sizeof *p->bout);
	p->out = calloc(p->g->nout + 1, sizeof *p->out);
	if (!p->vals || !p->in || !p->extra || !p->bin || !p->bout || !p->out ||
	    !ir_module_init(p->m, NULL, NULL, p->vals, seed, err, errlen)) {
		if (!*err)
			snprintf(err, errlen, "out of memory");
		release(p);
		return NULL;
	}
	for (uint32_t i = 0; i < p->g->ninput; i++) {
		int d = ir_module_find_decl(p->m, p->g->input[i].name);
		if (d >= 0) {
			p->in[i] = p->vals[d];
			continue;
		}
		const Node *nd = &p->g->node[p->g->input[i].node];
		if (p->g->input[i].kind != IN_ARG || !ir_tensor_alloc(&p->in[i], (DType)nd->dtype, ir_shape(p->g, p->g->input[i].node))) {
			snprintf(err, errlen, "input '%s' cannot be provided", p->g->input[i].name);
			release(p);
			return NULL;
		}
		BTensor *b = &p->bin[p->nextra];
		to_b(b, p->g->input[i].name, &p->in[i]);
		b->data = p->in[i].data;
		p->extra[p->nextra++] = (int)i;
	}
	return p;
}

static int
ninputs(Prepared *p)
{
	return p->nextra;
}

static BTensor *
input(Prepared *p, int i)
{
	return &p->bin[i];
}

static int
run(Prepared *p, char *err, size_t errlen)
{
	for (uint32_t i = 0; i < p->g->nout; i++)
		ir_tensor_free(&p->out[i]);
	if (!ir_interp(p->g, p->in, p->out, p->seed, err, errlen))
		return -1;
	for (uint32_t i = 0; i < p->g->nout; i++) {
		to_b(&p->bout[i], p->g->out[i].name, &p->out[i]);
		p->bout[i].data = p->out[i].data;
	}
	return 0;
}

static int
noutputs(Prepared *p)
{
	return (int)p->g->nout;
}

static const BTensor *
output(Prepared *p, int i)
{
	return &p->bout[i];
}

const Backend backend_interp = {"interp", prepare, ninputs, input, run,  noutputs,
                                output,   release, NULL,   NULL,  NULL,  NULL};
