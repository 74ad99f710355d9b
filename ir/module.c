// ir/module.c -- modules: what one source file declares (sizes, params and
// constants with their initializer graphs, and the entry graph forward).
#include <string.h>

#include "ir.h"

Module *
ir_module_new(const char *name)
{
	Arena *a = arena_new();
	Module *m = arena_zalloc(a, sizeof *m);
	m->arena = a;
	m->name = arena_strdup(a, name);
	m->src = ir_srcmap_new();
	return m;
}

void
ir_module_free(Module *m)
{
	if (!m)
		return;
	for (uint32_t i = 0; i < m->ndecl; i++)
		ir_graph_free(m->decl[i].init);
	ir_graph_free(m->main);
	ir_srcmap_free(m->src);
	arena_free(m->arena);
}

int
ir_module_find_decl(const Module *m, const char *name)
{
	for (uint32_t i = 0; i < m->ndecl; i++)
		if (!strcmp(m->decl[i].name, name))
			return (int)i;
	return -1;
}

// ir/tasks.def, as a table.  A partner that is not a row, or a check that
// is not NONE, ADJOINT or EQUAL, fails to compile here.
const IrTaskInfo ir_task[IR_TASK_COUNT] = {
#define TASK(n, p, c, d, s) [IR_TASK_##n] = {#n, IR_TASK_##p, IR_CHECK_##c, d, s},
#include "tasks.def"
};

int
ir_task_lookup(const char *name)
{
	for (int i = 0; i < IR_TASK_COUNT; i++)
		if (!strcmp(ir_task[i].name, name))
			return i;
	return -1;
}
