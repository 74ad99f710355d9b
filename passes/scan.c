// passes/scan.c -- derivatives of `scan`, by differentiating its body.
//
// Forward mode: the tangent of a loop is a loop of tangents.  The body's
// jvp, B'(c, tc, x, tx, w, tw) = (c', tc', y, ty), runs as a scan whose
// carries are (c, tc), sequences (x, tx) and invariants (w, tw).
//
// Fission.  The primal carries c never read the tangents, and the primal
// scan computes them anyway (the primal of the jvp'd graph).  When the
// body has a recurrent product (a matmul or conv reading a carry: an RNN's
// h W), carrying c again in the tangent scan would run that product twice
// per step (h W, and the tangent's ḣ W beside it, plus h Ẇ when W has a
// tangent), each a loop-carried dependence.  So the tangent scan carries
// tc alone and reads c_t, the carry each step started from, as a sequence:
// from the primal scan's own per-step outputs: its body already outputs
// its carries (vjp's forward scan saves them), or gets them appended.  The
// primal's per-step outputs y_t are read from its stacked ys the same way.  Every product of c_t with an
// invariant is then carry-independent, and scan_hoist computes it for all
// steps at once before the loop; only ḣ W stays recurrent.  The values are
// the same (the same ops on the same c_t).
//
// Reverse mode needs every step's carry.  A first scan runs the body and
// also outputs the carry it started each step from (stacked: cs[t] = c_t).
// A second scan runs the other way over the body's vjp: its carry is the
// adjoint of the carry, c̄; at step t it gets x_t, c_t, ȳ_t (the adjoint of
// that step's output) and w, and returns (c̄_{t}, x̄_t, w̄_t) with
//   (c̄_t, x̄_t, w̄_t) = vjp of B at (c_t, x_t, w) with cotangents (c̄_{t+1}, ȳ_t).
// After it, c̄ is the adjoint of the initial carry, the x̄_t stack into the
// adjoint of xs, and the invariants' adjoint is Σ_t w̄_t.  Products the
// body's vjp would recompute from c_t, x_t and w are saved by the first
// scan instead (residuals, at pick_residuals).
//
// An invariant's w̄_t that is a product, w̄_t = A_t B_t (A_t: a x n, B_t:
// n x b; an RNN's weight: h_tᵀ dz_t), is not summed step by step: a b
// numbers written per step (deepspeech: 4M per step, 225 steps, 3.7 GB
// stacked, then summed) when the factors are (a + b) n.  Σ_t A_t B_t is one
// product over the steps' concatenation,
//   Σ_t Σ_k A_t[i,k] B_t[k,j] = Σ_(t,k) Acat[i,(t,k)] Bcat[(t,k),j],
//   Acat = [A_0 A_1 ... A_{T-1}] (a x T n),  Bcat = [B_0; B_1; ...] (T n x b),
// so the backward scan outputs the factors per step (or they already are
// sequences or outputs of it), and after it w̄ = matmul(Acat, Bcat): for
// A_t = U_tᵀ (U_t: n x a, the usual case) Acat = reshape(Us, [T n, a])ᵀ,
// else reshape(permute(As, [1, 0, 2]), [a, T n]); Bcat = reshape(Bs, [T n,
// b]).  The sum's order changes (one GEMM instead of T partial products
// added in step order), within rounding.  Taken when a b > (a + b) n.
//
// Both bodies are ordinary graphs built by pass_jvp / pass_vjp_ex on a
// copy of the body whose differentiated arguments are marked as params, so
// scans inside scans and every order of derivative compose.
#include <stdlib.h>
#include <string.h>

#include "passes.h"

typedef struct ScanInfo {
	const Graph *b; // the body
	int nin, nc, nx, ni; // operands: carries, sequences, invariants
	int rev;
	uint32_t ny; // per-step outputs
} ScanInfo;

static ScanInfo
scan_info(const Graph *f, NodeId self)
{
	ScanInfo s;
	Attrs a;
	ir_attrs_get(f, self, &a);
	s.b = f->sub[a.a[0].i];
	s.nin = f->node[self].nin;
	s.nc = (int)a.a[1].i;
	s.nx = (int)a.a[2].i;
	s.ni = s.nin - s.nc - s.nx;
	s.rev = (int)a.a[3].i;
	s.ny = s.b->nout - (uint32_t)s.nc;
	return s;
}

static int
body_float(const Graph *b, int i)
{
	return ir_dtype_is_float((DType)b->node[b->input[i].node].dtype);
}

// A copy of body b whose inputs with isparam[i] are params (the rest
// arguments), and the carries' inputs appended as outputs if save.
static Graph *
marked_copy(const Graph *b, const uint8_t *isparam, int save_carries, int nc)
{
	Graph *c = ir_graph_new(b->name, b->src);
	NodeId *map = arena_alloc_array(c->arena, b->nnode, sizeof *map);
	b_copy_into(c, b, map);
	for (uint32_t i = 0; i < c->ninput; i++)
		c->input[i].kind = isparam[i] ? IN_PARAM : IN_ARG;
	for (uint32_t k = 0; k < b->nout; k++)
		ir_add_output(c, map[b->out[k].node], b->out[k].name, -1);
	for (int k = 0; save_carries && k < nc; k++)
		ir_add_output(c, map[b->input[k].node], "carry", -1);
	return c;
}

// A copy of src whose inputs are the nodes innodes[0 .. nin), in that
// order, and whose outputs are src's outorder[]; inputs are renamed a0,
// a1, ... (derived bodies print as functions, whose arguments are plain
// names).  An innodes entry is one of src's inputs or any other node of
// src, which the copy then reads as an input instead of computing it: a
// value computed once outside the loop (an invariant's transpose) or one
// the forward scan saved per step (a residual).  Every input of src must
// be among them.
static Graph *
reorder(const Graph *src, const NodeId *innodes, uint32_t nin, const uint32_t *outorder,
        uint32_t nout, const char *name)
{
	Graph *g = ir_graph_new(name, src->src);
	NodeId *map = arena_alloc_array(g->arena, src->nnode, sizeof *map);
	for (uint32_t k = 0; k < src->nsub; k++)
		ir_add_sub(g, pass_dce(src->sub[k]));
	uint32_t ninput = 0;
	for (uint32_t k = 0; k < nin; k++) {
		NodeId n = innodes[k];
		ninput += src->node[n].op == OP_input;
		map[n] = ir_add_input(g, arena_printf(g->arena, "a%u", k), IN_ARG,
		                      (DType)src->node[n].dtype, ir_shape(src, n), src->node[n].loc);
	}
	FADC_ASSERT(ninput == src->ninput, "reorder needs every input");
	for (NodeId n = 1; n < src->nnode; n++)
		if (src->node[n].op != OP_input && !map[n])
			map[n] = b_copy_node(g, src, n, map);
	for (uint32_t k = 0; k < nout; k++)
		ir_add_output(g, map[src->out[outorder[k]].node], arena_printf(g->arena, "y%u", k), -1);
	return g;
}

NodeId
scan_get(Graph *g, NodeId scan, int64_t k, Loc loc)
{
	Attrs a;
	ir_attrs_default(OP_get, &a);
	a.a[0].i = k;
	return ir_emit(g, OP_get, &scan, 1, &a, loc);
}

static NodeId
emit_scan(Graph *g, Graph *body, const NodeId *ops, int nops, int nc, int nx, int rev, Loc loc)
{
	Attrs a;
	ir_attrs_default(OP_scan, &a);
	a.a[0].i = ir_add_sub(g, body);
	a.a[1].i = nc;
	a.a[2].i = nx;
	a.a[3].i = rev;
	return ir_emit(g, OP_scan, ops, nops, &a, loc);
}

static const char *
derived_name(Graph *g, const Graph *b, const char *what)
{
	return arena_printf(g->arena, "%s_%s%u", b->name, what, g->nsub);
}

// Whether body b (nc carries) has a product that reads a carry, directly
// or through other nodes of the step: a recurrent product (see Fission).
static int
recurrent_product(const Graph *b, int nc)
{
	uint8_t *dep = calloc(b->nnode, 1);
	int found = 0;
	FADC_ASSERT(dep, "out of memory");
	for (int k = 0; k < nc; k++)
		dep[b->input[k].node] = 1;
	for (NodeId n = 1; n < b->nnode && !found; n++) {
		const NodeId *in = ir_in(b, n);
		for (uint32_t j = 0; j < b->node[n].nin; j++)
			dep[n] |= dep[in[j]];
		int op = b->node[n].op;
		found = dep[n] && (op == OP_matmul || op == OP_conv || op == OP_conv_input_grad ||
		                   op == OP_conv_weight_grad);
	}
	free(dep);
	return found;
}

// The stacked carries c_t of primal scan `ps` (in g) of f's scan self, for
// the tangent scan's sequences (Fission): cs[k] for carry k.  The primal
// body's output o (o >= nc) that is carry k's input itself is already c_t
// (vjp's forward scan).  Otherwise the primal body gets those outputs
// appended: a scan's tuple is (carries, ys) in its body's output order, so
// values appended after its ys leave every `get` of it as it was (its
// shape is its body's), and the primal loop is not run twice.  The body is
// g's own copy (b_copy_into copies them); other scans sharing it get the
// same outputs, which scan_hoist drops where no `get` reads them.
static void
stacked_carries(Graph *g, const ScanInfo *s, NodeId ps, NodeId *cs, Loc loc)
{
	Attrs a;
	ir_attrs_get(g, ps, &a);
	Graph *b = g->sub[a.a[0].i];
	int all = 1;
	for (int k = 0; k < s->nc; k++) {
		cs[k] = 0;
		for (uint32_t o = (uint32_t)s->nc; o < b->nout && !cs[k]; o++)
			if (b->out[o].node == b->input[k].node)
				cs[k] = scan_get(g, ps, o, loc);
		all &= cs[k] != 0;
	}
	if (all)
		return;
	uint8_t *none = arena_alloc_array(g->arena, (size_t)b->ninput + 1, 1);
	memset(none, 0, (size_t)b->ninput + 1);
	Graph *bs = marked_copy(b, none, 1, s->nc);
	for (uint32_t i = 0; i < b->ninput; i++)
		bs->input[i].kind = b->input[i].kind; // (marked_copy marks them args)
	uint32_t n0 = b->nout;
	g->sub[a.a[0].i] = bs;
	ir_graph_free(b);
	for (int k = 0; k < s->nc; k++)
		cs[k] = scan_get(g, ps, n0 + (uint32_t)k, loc);
}

NodeId *
scan_jvp(Graph *g, const Graph *f, NodeId self, const NodeId *map, const NodeId *opt, Loc *errloc,
         char *err, size_t errlen)
{
	ScanInfo s = scan_info(f, self);
	Loc loc = f->node[self].loc;
	const NodeId *in = ir_in(f, self);
	// Differentiate float carries (their tangent is nonzero after one step
	// if anything is) and the operands that have a tangent.
	uint8_t *dif = arena_alloc_array(g->arena, (size_t)s.nin + 1, 1);
	for (int i = 0; i < s.nin; i++)
		dif[i] = body_float(s.b, i) && (i < s.nc || opt[i]);
	Graph *bp = marked_copy(s.b, dif, 0, 0);
	Graph *bj = pass_jvp(bp, errloc, err, errlen);
	ir_graph_free(bp);
	if (!bj)
		return NULL;
	// bj: inputs (c, x, w, t.<dif>...), outputs (c', y, jvp.<float out>...).
	uint32_t tin[256], nt = 0, k = 0;
	for (int i = 0; i < s.nin; i++)
		tin[i] = dif[i] ? (uint32_t)s.nin + nt++ : 0;
	uint32_t tout[256], ntout = 0;
	for (uint32_t o = 0; o < s.b->nout; o++)
		tout[o] = ir_dtype_is_float((DType)s.b->node[s.b->out[o].node].dtype) ? s.b->nout + ntout++ : 0;
	// Fission (see the top) where a carry is differentiated and the body
	// has a recurrent product.
	int ndc = 0;
	for (int c = 0; c < s.nc; c++)
		ndc += dif[c];
	int fiss = ndc > 0 && recurrent_product(s.b, s.nc);
	NodeId *cs = NULL;
	if (fiss) {
		cs = arena_alloc_array(g->arena, (size_t)s.nc + 1, sizeof(NodeId));
		stacked_carries(g, &s, map[self], cs, loc);
	}
	// New order: carries (c, tc), sequences (x, tx), invariants (w, tw);
	// with fission carries (tc), sequences (c, x, tx).
	uint32_t inorder[512], outorder[512];
	NodeId ops[512], xnode[512] = {0}; // xnode[q]: a node of bj read as input q
	int ncar = 0, nseq = 0;
	for (int part = 0; part < 3; part++) {
		int lo = part == 0 ? 0 : part == 1 ? s.nc : s.nc + s.nx;
		int hi = part == 0 ? s.nc : part == 1 ? s.nc + s.nx : s.nin;
		int cnt = 0;
		if (fiss && part == 1) { // the primal carries, per step
			for (int i = 0; i < s.nc; i++) {
				inorder[k] = (uint32_t)i;
				ops[k++] = cs[i];
				cnt++;
			}
			// And the primal's own per-step outputs, read as the primal
			// scan stacked them rather than computed again: what the
			// tangent step needs of them (an LSTM's reverse step: dz_t,
			// whose product with Ẇ then leaves the loop as one GEMM of
			// the stacked dz without batching dz's whole cone).
			for (uint32_t o = (uint32_t)s.nc; o < s.b->nout && k < 480; o++) {
				NodeId yn = bj->out[o].node;
				int seen = bj->node[yn].op == OP_input;
				for (uint32_t q = 0; q < k && !seen; q++)
					seen = xnode[q] == yn;
				if (seen)
					continue;
				xnode[k] = yn;
				inorder[k] = UINT32_MAX;
				ops[k++] = scan_get(g, map[self], o, loc);
				cnt++;
			}
		}
		for (int i = lo; i < hi && !(fiss && part == 0); i++) {
			inorder[k] = (uint32_t)i;
			ops[k++] = map[in[i]];
			cnt++;
		}
		for (int i = lo; i < hi; i++)
			if (dif[i]) {
				inorder[k] = tin[i];
				ops[k++] = opt[i] ? opt[i] : b_full_like(g, 0, map[in[i]], loc);
				cnt++;
			}
		if (part == 0)
			ncar = cnt;
		else if (part == 1)
			nseq = cnt;
	}
	// Outputs: carries (c', tc' of the differentiated carries), then ys
	// (y, then ty of the float ys); with fission only the tangents.
	uint32_t no = 0;
	for (int c = 0; c < s.nc && !fiss; c++)
		outorder[no++] = (uint32_t)c;
	for (int c = 0; c < s.nc; c++)
		if (dif[c])
			outorder[no++] = tout[c];
	for (uint32_t y = 0; y < s.ny && !fiss; y++)
		outorder[no++] = (uint32_t)s.nc + y;
	for (uint32_t y = 0; y < s.ny; y++)
		if (tout[s.nc + y])
			outorder[no++] = tout[s.nc + y];
	NodeId innodes[512];
	for (uint32_t q = 0; q < k; q++)
		innodes[q] = xnode[q] ? xnode[q] : bj->input[inorder[q]].node;
	Graph *body = reorder(bj, innodes, k, outorder, no, derived_name(g, s.b, "jvp"));
	ir_graph_free(bj);
	NodeId sc = emit_scan(g, body, ops, (int)k, ncar, nseq, s.rev, loc);
	// The tangents of the original tuple's values.
	NodeId *tan = arena_alloc_array(g->arena, s.b->nout + 1, sizeof(NodeId));
	int dc = 0, c0 = fiss ? 0 : s.nc;
	for (int c = 0; c < s.nc; c++)
		if (dif[c])
			tan[c] = scan_get(g, sc, c0 + dc++, loc);
	// (Fission: the tangents' ys follow the ndc tangent carries directly.)
	int ty = 0, y0 = fiss ? ndc : ncar + (int)s.ny;
	for (uint32_t y = 0; y < s.ny; y++)
		if (tout[s.nc + y])
			tan[s.nc + y] = scan_get(g, sc, y0 + ty++, loc);
	return tan;
}

// A factor of a hoisted invariant product (see the top): body node x of
// the backward body bv, per step; where its stacked value comes from.
typedef struct Factor {
	NodeId x; // the node of bv
	NodeId seq; // its stacked value outside when x is a sequence input of the backward scan
	uint32_t out; // else the backward scan's output holding it (filled later)
} Factor;

// The stacked value of bv's node x: a sequence operand of the backward
// scan (inorder[k] = x's input index, ncar <= k < ncar + nseq), else 0.
static NodeId
factor_seq(const Graph *bv, NodeId x, const uint32_t *inorder, const NodeId *bops, int ncar,
           int nseq)
{
	if (bv->node[x].op != OP_input)
		return 0;
	for (int k = ncar; k < ncar + nseq; k++)
		if (bv->input[inorder[k]].node == x)
			return bops[k];
	return 0;
}

// Residuals.  The backward body, the body's vjp, recomputes the step's
// forward values from the saved carry c_t, x_t and w: an LSTM's reverse
// step computes h_t W_hhᵀ again before dz W_hh, two products of the same
// size where one would do.  A product (matmul) of the backward body that
// reads only the step's primal values (c_t, x_t, w: no cotangent), one of
// them per step (c_t or x_t), and that the body still needs is instead
// computed by the forward scan, which already computes it (the copy added
// there is merged with the body's own by CSE), and stacked as one more
// per-step output: the backward scan reads it as a sequence.  Cost: its
// stacked size, T times the product's, written once and read once, against
// recomputing m n k per step; taken while the residuals of one scan stay
// under RES_BYTES.
enum { MAXRES = 16 };
#define RES_BYTES (512.0 * 1024 * 1024)

// Picks the residuals of backward body bv (inputs: the body's s->nin
// operands, then cotangents) whose outputs are outorder[0 .. no), of a
// scan of `steps` steps: res[], at most maxres, their count returned;
// live[n] says whether node n is still needed once the residuals are
// inputs.
static uint32_t
pick_residuals(const Graph *bv, const ScanInfo *s, double steps, const uint32_t *outorder,
               uint32_t no, uint8_t *live, NodeId *res, uint32_t maxres)
{
	// prim: reads only the body's operands; var: reads a carry or a
	// sequence (else it is loop-invariant, nothing to save per step).
	uint8_t *prim = calloc(bv->nnode + 1, 1), *var = calloc(bv->nnode + 1, 1);
	FADC_ASSERT(prim && var, "out of memory");
	for (NodeId n = 1; n < bv->nnode; n++) {
		const Node *nd = &bv->node[n];
		if (nd->op == OP_input) {
			int64_t i = ir_attr_int(bv, n, "index");
			prim[n] = i < s->nin;
			var[n] = i < s->nc + s->nx;
			continue;
		}
		prim[n] = nd->op != OP_scan; // a body's copy carries no sub-bodies
		for (int i = 0; i < nd->nin; i++) {
			prim[n] &= prim[ir_in1(bv, n, i)];
			var[n] |= var[ir_in1(bv, n, i)];
		}
	}
	memset(live, 0, bv->nnode);
	for (uint32_t o = 0; o < no; o++)
		live[bv->out[outorder[o]].node] = 1;
	uint32_t nres = 0;
	double bytes = 0;
	for (NodeId n = bv->nnode - 1; n > 0; n--) {
		const Node *nd = &bv->node[n];
		if (!live[n] || nd->op == OP_input)
			continue;
		if (nd->op == OP_matmul && prim[n] && var[n] && nres < maxres) {
			double b = steps * (double)ir_numel(ir_shape(bv, n)) * 8; // f64 at most
			if (bytes + b <= RES_BYTES) {
				bytes += b;
				res[nres++] = n;
				continue; // an input now: its operands are not needed for it
			}
		}
		for (int i = 0; i < nd->nin; i++)
			live[ir_in1(bv, n, i)] = 1;
	}
	free(prim);
	free(var);
	return nres;
}

// Adds to dst the nodes of src that node r reads (map: src node to dst
// node, the operands' inputs already mapped); returns r's copy.  In node
// order, no recursion (a body can be a long chain).
static NodeId
copy_cone(Graph *dst, const Graph *src, NodeId r, NodeId *map)
{
	uint8_t *need = calloc(r + 1, 1);
	FADC_ASSERT(need, "out of memory");
	need[r] = 1;
	for (NodeId n = r; n > 0; n--)
		if (need[n] && !map[n])
			for (int i = 0; i < src->node[n].nin; i++)
				need[ir_in1(src, n, i)] = 1;
	for (NodeId n = 1; n <= r; n++) {
		if (!need[n] || map[n])
			continue;
		FADC_ASSERT(src->node[n].op != OP_input && src->node[n].op != OP_scan,
		            "copy_cone: unmapped input");
		map[n] = b_copy_node(dst, src, n, map);
	}
	free(need);
	return map[r];
}

NodeId *
scan_vjp(Graph *g, const Graph *f, NodeId self, const NodeId *map, const NodeId *compadj,
         const uint8_t *dep, Loc *errloc, char *err, size_t errlen)
{
	ScanInfo s = scan_info(f, self);
	Loc loc = f->node[self].loc;
	const NodeId *in = ir_in(f, self);
	// 1. The forward scan, also stacking the carry of every step.  Where
	// the forward's own scan is in g and alone in running its body, that
	// body becomes the saving one (its outputs first, the carries after:
	// every `get` of the forward keeps its meaning), so the forward runs
	// once; else a second scan runs it again.
	uint8_t *none = arena_alloc_array(g->arena, (size_t)s.nin + 1, 1);
	Graph *bf = marked_copy(s.b, none, 1, s.nc);
	NodeId ops[512];
	for (int i = 0; i < s.nin; i++)
		ops[i] = map[in[i]];
	bf->name = derived_name(g, s.b, "fwd");
	NodeId sf = 0, fw = map[self];
	if (fw && g->node[fw].op == OP_scan) {
		int64_t bi = ir_attr_int(g, fw, "body");
		int alone = g->sub[bi]->nout == s.b->nout;
		for (int i = 0; i < s.nin && alone; i++)
			alone = ir_in1(g, fw, i) == ops[i];
		for (NodeId n = 1; n < g->nnode && alone; n++)
			alone = n == fw || g->node[n].op != OP_scan || ir_attr_int(g, n, "body") != bi;
		if (alone) {
			ir_graph_free(g->sub[bi]);
			g->sub[bi] = bf;
			sf = fw;
		}
	}
	if (!sf)
		sf = emit_scan(g, bf, ops, s.nin, s.nc, s.nx, s.rev, loc);
	// 2. The body's vjp w.r.t. the float carries and the operands that
	// depend on a param.
	uint8_t *dif = arena_alloc_array(g->arena, (size_t)s.nin + 1, 1);
	int any = 0;
	for (int i = 0; i < s.nin; i++) {
		dif[i] = body_float(s.b, i) && (i < s.nc || dep[in[i]]);
		any |= i >= s.nc && dif[i];
		any |= i < s.nc && dif[i] && dep[in[i]];
	}
	NodeId *opadj = arena_alloc_array(g->arena, (size_t)s.nin + 1, sizeof(NodeId));
	if (!any)
		return opadj;
	Graph *bp = marked_copy(s.b, dif, 0, 0);
	Graph *bv = pass_vjp_ex(bp, NULL, 0, errloc, err, errlen);
	ir_graph_free(bp);
	if (!bv)
		return NULL;
	// bv: inputs (c, x, w, v.<float out>...), outputs (c', y, grad.<dif>...).
	uint32_t vin[256], nv = 0;
	for (uint32_t o = 0; o < s.b->nout; o++)
		vin[o] = ir_dtype_is_float((DType)s.b->node[s.b->out[o].node].dtype) ? (uint32_t)s.nin + nv++ : UINT32_MAX;
	uint32_t gout[256], ng = 0;
	for (int i = 0; i < s.nin; i++)
		gout[i] = dif[i] ? s.b->nout + ng++ : UINT32_MAX;
	// Backward scan: carries c̄ (float carries); sequences x, c_t, ȳ;
	// invariants w.  Outputs: c̄ of the float carries, then x̄ and w̄.
	uint32_t inorder[512], outorder[512], k = 0, no = 0;
	NodeId bops[512];
	int ncar = 0, nseq = 0;
	for (int c = 0; c < s.nc; c++)
		if (vin[c] != UINT32_MAX) {
			inorder[k] = vin[c];
			NodeId a = compadj ? compadj[c] : 0;
			bops[k++] = a ? a : b_full_like(g, 0, map[in[c]], loc);
			ncar++;
		}
	for (int i = s.nc; i < s.nc + s.nx; i++) {
		inorder[k] = (uint32_t)i;
		bops[k++] = map[in[i]];
		nseq++;
	}
	for (int c = 0; c < s.nc; c++) {
		inorder[k] = (uint32_t)c;
		bops[k++] = scan_get(g, sf, (int64_t)s.b->nout + c, loc); // c_t, stacked
		nseq++;
	}
	for (uint32_t y = 0; y < s.ny; y++)
		if (vin[s.nc + y] != UINT32_MAX) {
			inorder[k] = vin[s.nc + y];
			NodeId a = compadj ? compadj[s.nc + y] : 0;
			bops[k++] = a ? a : b_full_like(g, 0, scan_get(g, sf, s.nc + (int64_t)y, loc), loc);
			nseq++;
		}
	for (int i = s.nc + s.nx; i < s.nin; i++) {
		inorder[k] = (uint32_t)i;
		bops[k++] = map[in[i]];
	}
	for (int c = 0; c < s.nc; c++)
		if (vin[c] != UINT32_MAX)
			outorder[no++] = gout[c];
	// Invariants whose w̄_t is a product worth hoisting (see the top):
	// hoist[i], its factors fa[i] (U_t when A_t = U_tᵀ, else A_t; transa[i]
	// says which) and fb[i] = B_t.
	uint8_t *hoist = arena_alloc_array(g->arena, (size_t)s.nin + 1, 1);
	uint8_t *transa = arena_alloc_array(g->arena, (size_t)s.nin + 1, 1);
	Factor *fa = arena_alloc_array(g->arena, (size_t)s.nin + 1, sizeof *fa);
	Factor *fb = arena_alloc_array(g->arena, (size_t)s.nin + 1, sizeof *fb);
	for (int i = s.nc + s.nx; i < s.nin && nseq > 0; i++) {
		if (!dif[i] || !dep[in[i]])
			continue;
		NodeId o = bv->out[gout[i]].node;
		if (bv->node[o].op != OP_matmul || ir_shape(bv, o)->rank != 2)
			continue;
		NodeId a = ir_in1(bv, o, 0), b = ir_in1(bv, o, 1);
		int64_t da = ir_shape(bv, o)->dim[0], db = ir_shape(bv, o)->dim[1];
		int64_t n = ir_shape(bv, a)->dim[1];
		if (ir_shape(bv, a)->rank != 2 || ir_shape(bv, b)->rank != 2 || da * db <= (da + db) * n)
			continue;
		int t = 0;
		if (bv->node[a].op == OP_permute) {
			Attrs pa;
			ir_attrs_get(bv, a, &pa);
			if (pa.a[0].v[0] == 1 && pa.a[0].v[1] == 0) {
				a = ir_in1(bv, a, 0);
				t = 1;
			}
		}
		hoist[i] = 1;
		transa[i] = (uint8_t)t;
		fa[i] = (Factor){a, factor_seq(bv, a, inorder, bops, ncar, nseq), 0};
		fb[i] = (Factor){b, factor_seq(bv, b, inorder, bops, ncar, nseq), 0};
	}
	for (int i = s.nc; i < s.nin; i++)
		if (dif[i] && !hoist[i])
			outorder[no++] = gout[i];
	// The factors that are not sequences: per-step outputs of the
	// backward scan (one already there, else a new output of bv).
	for (int i = s.nc + s.nx; i < s.nin; i++)
		for (int side = 0; hoist[i] && side < 2; side++) {
			Factor *fc = side ? &fb[i] : &fa[i];
			if (fc->seq)
				continue;
			uint32_t m = (uint32_t)ncar;
			while (m < no && bv->out[outorder[m]].node != fc->x)
				m++;
			if (m == no) {
				FADC_ASSERT(no < 512, "scan_vjp: too many outputs");
				ir_add_output(bv, fc->x, "factor", -1);
				outorder[no++] = bv->nout - 1;
			}
			fc->out = m;
		}
	// A float carry whose output has a cotangent input also has a grad
	// output (it is differentiated): the two lists line up.
	// Residuals (see above): products the backward body would recompute
	// from the step's primal values, saved by the forward scan instead.
	uint8_t *live = arena_alloc_array(g->arena, bv->nnode + 1, 1);
	NodeId res[MAXRES];
	// (Steps: the first sequence operand's leading axis; every scan has one.)
	uint32_t nres = pick_residuals(bv, &s, (double)ir_shape(f, in[s.nc])->dim[0], outorder, no,
	                               live, res, k + MAXRES <= 512 ? MAXRES : 512 - k);
	// Transposes of invariants (the body's vjp of x @ w reads wᵀ) are
	// computed once before the loop, as invariants of their own: the
	// printed product would otherwise copy wᵀ into a row-major temporary
	// every step (codegen/lower.c, kernel_matmul; 16 MB per step for
	// deepspeech's W_hh), and outside, wᵀ of an invariant that is itself a
	// transpose (w_t = transpose(W_hh)) is W_hh, no copy at all.
	NodeId lifted[64], liftops[64];
	uint32_t nlift = 0;
	for (NodeId n = 1; n < bv->nnode && nlift < 64 && k + nres + nlift < 512; n++) {
		if (bv->node[n].op != OP_permute || !live[n])
			continue;
		NodeId x = ir_in1(bv, n, 0);
		for (uint32_t q = (uint32_t)(ncar + nseq); q < k; q++)
			if (bv->input[inorder[q]].node == x) {
				Attrs pa;
				ir_attrs_get(bv, n, &pa);
				lifted[nlift] = n;
				liftops[nlift++] = b_permute(g, bops[q], pa.a[0].v, loc);
				break;
			}
	}
	// The backward scan's operands: carries, sequences, the residuals
	// (sequences: the forward scan's new per-step outputs, after the
	// carries it stacks), invariants, the lifted transposes.
	NodeId innodes[512], sops[512];
	uint32_t kall = 0;
	NodeId *cmap = arena_alloc_array(g->arena, bv->nnode + 1, sizeof *cmap);
	for (int i = 0; i < s.nin; i++)
		cmap[bv->input[i].node] = bf->input[i].node;
	for (uint32_t q = 0; q <= k; q++) {
		if (q == (uint32_t)(ncar + nseq))
			for (uint32_t r = 0; r < nres; r++) {
				ir_add_output(bf, copy_cone(bf, bv, res[r], cmap), "residual", -1);
				innodes[kall] = res[r];
				sops[kall++] = scan_get(g, sf, (int64_t)bf->nout - 1, loc);
			}
		if (q == k)
			break;
		innodes[kall] = bv->input[inorder[q]].node;
		sops[kall++] = bops[q];
	}
	for (uint32_t l = 0; l < nlift; l++) {
		innodes[kall] = lifted[l];
		sops[kall++] = liftops[l];
	}
	Graph *body = reorder(bv, innodes, kall, outorder, no, derived_name(g, s.b, "vjp"));
	ir_graph_free(bv);
	NodeId sb = emit_scan(g, body, sops, (int)kall, ncar, nseq + (int)nres, !s.rev, loc);
	// 3. The operands' adjoints.
	int cc = 0;
	for (int c = 0; c < s.nc; c++)
		if (vin[c] != UINT32_MAX) {
			if (dep[in[c]])
				opadj[c] = scan_get(g, sb, cc, loc);
			cc++;
		}
	int yy = ncar;
	for (int i = s.nc; i < s.nin; i++) {
		if (hoist[i] && dep[in[i]]) {
			// Σ_t A_t B_t as one product over the steps (see the top).
			Factor *x[2] = {&fa[i], &fb[i]};
			NodeId st[2];
			for (int side = 0; side < 2; side++)
				st[side] = x[side]->seq ? x[side]->seq : scan_get(g, sb, x[side]->out, loc);
			const Shape *as = ir_shape(g, st[0]), *bs = ir_shape(g, st[1]);
			int64_t T = as->dim[0];
			NodeId acat;
			if (transa[i]) { // U_t: n x a
				Shape u = {.rank = 2, .dim = {T * as->dim[1], as->dim[2]}};
				int64_t perm[2] = {1, 0};
				acat = b_permute(g, b_reshape(g, st[0], &u, loc), perm, loc);
			} else { // A_t: a x n
				int64_t perm[3] = {1, 0, 2};
				Shape u = {.rank = 2, .dim = {as->dim[1], T * as->dim[2]}};
				acat = b_reshape(g, b_permute(g, st[0], perm, loc), &u, loc);
			}
			Shape v = {.rank = 2, .dim = {T * bs->dim[1], bs->dim[2]}};
			opadj[i] = b_matmul(g, acat, b_reshape(g, st[1], &v, loc), loc);
			continue;
		}
		if (!dif[i] || hoist[i])
			continue;
		NodeId st = scan_get(g, sb, yy++, loc);
		if (!dep[in[i]])
			continue;
		if (i < s.nc + s.nx) {
			opadj[i] = st;
		} else {
			int64_t ax = 0; // invariants: Σ over the steps
			NodeId sum = b_sum(g, st, &ax, 1, 0, loc);
			opadj[i] = sum;
		}
	}
	return opadj;
}
