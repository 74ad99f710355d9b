// ir/verify.c -- the graph invariants, checked between passes in debug
// builds and by tests (QBE's ssacheck):
//   1. every operand id is smaller than its user's (ids are a topological
//      order), and id 0 is never an operand;
//   2. every node's shape and dtype equal what its op's rule computes from
//      its operands and attributes (so a pass cannot build a wrong node
//      even by writing Node fields by hand);
//   3. inputs are OP_input nodes listed in Graph.input, outputs are nodes,
//      a write-back output has its input's type;
//   4. bodies of scans verify too.
#include <stdarg.h>
#include <string.h>

#include "ir.h"

// The module's one error helper (ir_errf), under the name the rules use.
#define fail ir_errf

int
ir_verify(const Graph *g, char *err, size_t errlen)
{
	for (uint32_t i = 0; i < g->nsub; i++)
		if (!ir_verify(g->sub[i], err, errlen))
			return 0;
	for (NodeId n = 1; n < g->nnode; n++) {
		const Node *nd = &g->node[n];
		if (nd->op == OP_NONE || nd->op >= OP_COUNT)
			return fail(err, errlen, "%%%u: bad op %u", n, nd->op);
		if (nd->shape == 0 || nd->shape >= g->nshape)
			return fail(err, errlen, "%%%u: bad shape id %u", n, nd->shape);
		const NodeId *in = ir_in(g, n);
		for (int i = 0; i < nd->nin; i++)
			if (in[i] == 0 || in[i] >= n)
				return fail(err, errlen, "%%%u (%s): operand %d is %%%u, not an earlier node", n,
				            ir_op(nd->op)->name, i + 1, in[i]);
		if (nd->op == OP_input) {
			int64_t k = ir_attr_int(g, n, "index");
			if (k < 0 || (uint64_t)k >= g->ninput || g->input[k].node != n)
				return fail(err, errlen, "%%%u: input node not listed as input %lld", n, (long long)k);
			continue;
		}
		Attrs a;
		ir_attrs_get(g, n, &a);
		Shape s = {0};
		DType dt = DT_NONE;
		char msg[256];
		if (!ir_op(nd->op)->shape(g, nd->op, in, nd->nin, &a, &s, &dt, msg, sizeof msg))
			return fail(err, errlen, "%%%u (%s): %s", n, ir_op(nd->op)->name, msg);
		if (!ir_shape_eq(&s, &g->shape[nd->shape]) || dt != nd->dtype) {
			char want[200], got[200];
			ir_type_str(dt, &s, want, sizeof want);
			ir_type_str((DType)nd->dtype, &g->shape[nd->shape], got, sizeof got);
			return fail(err, errlen, "%%%u (%s): type is %s, its rule says %s", n,
			            ir_op(nd->op)->name, got, want);
		}
	}
	for (uint32_t i = 0; i < g->ninput; i++)
		if (!g->input[i].node || g->input[i].node >= g->nnode ||
		    g->node[g->input[i].node].op != OP_input)
			return fail(err, errlen, "input %u (%s) is not an input node", i, g->input[i].name);
	for (uint32_t i = 0; i < g->nout; i++) {
		const Output *o = &g->out[i];
		if (!o->node || o->node >= g->nnode)
			return fail(err, errlen, "output %u (%s) is not a node", i, o->name);
		if (g->node[o->node].dtype == DT_TUPLE)
			return fail(err, errlen, "output %u (%s) is a tuple", i, o->name);
		if (o->writeback >= 0) {
			if ((uint32_t)o->writeback >= g->ninput)
				return fail(err, errlen, "output %u (%s) writes back to no input", i, o->name);
			const Node *in = &g->node[g->input[o->writeback].node];
			if (in->shape != g->node[o->node].shape || in->dtype != g->node[o->node].dtype)
				return fail(err, errlen, "output %u (%s) writes back a value of another type", i,
				            o->name);
		}
	}
	return 1;
}
