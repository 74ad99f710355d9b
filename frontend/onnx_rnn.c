// frontend/onnx_rnn.c -- LSTM, GRU and RNN as scans of a step function
// written before forward (docs/ONNX.md, "Op set").
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx_imp.h"

// LSTM, GRU and RNN as scans (docs/IR.md, "Recurrence: scan"): per
// direction, the input projections X W' + Wb of every step are one product
// before the loop (a sequence of the scan), and a step function, written
// before forward, computes the gates from it and H R' (R' an invariant),
// with ONNX's gate orders (LSTM i o f c, GRU z r h) and default
// activations.  A reverse direction is scan's reverse, whose per-step
// outputs keep the time order, as ONNX's Y does.  Outputs: Y (T, D, B, H),
// Y_h and Y_c (D, B, H); layout 1 puts the batch first.
int
ox_op_rnn(Imp *im, const Onnx__NodeProto *n, OVal *x, OVal *outs, int *nout)
{
	const char *op = n->op_type;
	int lstm = !strcmp(op, "LSTM"), gru = !strcmp(op, "GRU"), G = lstm ? 4 : gru ? 3 : 1;
	OVal *w = ox_in_val(im, n, 1, 0), *r = ox_in_val(im, n, 2, 0), *b = ox_in_val(im, n, 3, 1),
	     *sl = ox_in_val(im, n, 4, 1), *h0 = ox_in_val(im, n, 5, 1), *c0 = lstm ? ox_in_val(im, n, 6, 1) : NULL;
	if (im->failed)
		return 0;
	if (lstm && n->n_input > 7 && *n->input[7]) {
		ox_err(im, "peepholes (P) are not supported yet");
		return 0;
	}
	char db[32];
	const char *dir = ox_attr_s(n, "direction", "forward", db, sizeof db);
	int D = !strcmp(dir, "bidirectional") ? 2 : 1, rev = !strcmp(dir, "reverse");
	if (D == 1 && !rev && strcmp(dir, "forward")) {
		ox_err(im, "direction '%s'", dir);
		return 0;
	}
	if (ox_attr(n, "activations") || ox_attr(n, "clip") || ox_attr_i(n, "input_forget", 0)) {
		ox_err(im, "activations, clip and input_forget other than the defaults are not supported yet");
		return 0;
	}
	int layout = (int)ox_attr_i(n, "layout", 0);
	if (x->rank != 3 || w->rank != 3 || r->rank != 3) {
		ox_err(im, "X, W and R must have rank 3");
		return 0;
	}
	int64_t T = layout ? x->dim[1] : x->dim[0], B = layout ? x->dim[0] : x->dim[1], I = x->dim[2];
	int64_t H = ox_attr_i(n, "hidden_size", r->dim[2]);
	if (w->dim[0] != D || w->dim[1] != G * H || w->dim[2] != I || r->dim[0] != D ||
	    r->dim[1] != G * H || r->dim[2] != H || (b && (b->rank != 2 || b->dim[0] != D ||
	                                                   b->dim[1] != 2 * G * H))) {
		ox_err(im, "W, R or B do not have the shapes of %lld directions, %d gates, hidden size %lld "
		        "and input size %lld", (long long)D, G, (long long)H, (long long)I);
		return 0;
	}
	if (sl) {
		int all = sl->iv && ox_numel(sl) == B;
		for (int64_t i = 0; all && i < B; i++)
			all = sl->iv[i] == T;
		if (!all) {
			ox_err(im, "sequence_lens other than the full length for every sample are not supported "
			        "yet");
			return 0;
		}
	}
	OVal *st[2] = {h0, c0};
	for (int k = 0; k < 2; k++)
		if (st[k] && (st[k]->rank != 3 || st[k]->dim[layout] != D || st[k]->dim[1 - layout] != B ||
		              st[k]->dim[2] != H)) {
			ox_err(im, "initial_h or initial_c do not have shape (%lld, %lld, %lld)%s", (long long)D,
			    (long long)B, (long long)H, layout ? " with the first two axes swapped (layout 1)" : "");
			return 0;
		}
	if (T < 1) {
		ox_err(im, "a sequence of length 0");
		return 0;
	}
	const char *dt = ox_dtype_ir(x->dtype);
	// The step function, one per node.
	int fnum = im->ndefs++;
	FILE *f = im->defs;
	fprintf(f, "def __onnx_%s_%d(", op, fnum);
	if (lstm)
		fprintf(f, "h: %s[%lld, %lld], c: %s[%lld, %lld], xw: %s[%lld, %lld], rt: %s[%lld, %lld]) {\n",
		        dt, (long long)B, (long long)H, dt, (long long)B, (long long)H, dt, (long long)B,
		        (long long)(4 * H), dt, (long long)H, (long long)(4 * H));
	else
		fprintf(f, "h: %s[%lld, %lld], xw: %s[%lld, %lld], rt: %s[%lld, %lld], rb: %s[%lld]) {\n",
		        dt, (long long)B, (long long)H, dt, (long long)B, (long long)(G * H), dt,
		        (long long)H, (long long)(G * H), dt, (long long)(G * H));
#define GATE(v, k) "slice(" v ", start=[0, %lld], end=[%lld, %lld], step=[1, 1])", (long long)((k) * H), (long long)B, (long long)(((k) + 1) * H)
	if (lstm) {
		fputs("  z = xw + h @ rt\n", f);
		fprintf(f, "  i = sigmoid(" GATE("z", 0));
		fprintf(f, ")\n  o = sigmoid(" GATE("z", 1));
		fprintf(f, ")\n  fg = sigmoid(" GATE("z", 2));
		fprintf(f, ")\n  g = tanh(" GATE("z", 3));
		fputs(")\n  c2 = fg * c + i * g\n  h2 = o * tanh(c2)\n  return h2, c2, h2\n}\n\n", f);
	} else if (gru) {
		int lbr = (int)ox_attr_i(n, "linear_before_reset", 0);
		fputs("  hr = h @ rt + rb\n", f);
		fprintf(f, "  z = sigmoid(" GATE("xw", 0));
		fprintf(f, " + " GATE("hr", 0));
		fprintf(f, ")\n  r = sigmoid(" GATE("xw", 1));
		fprintf(f, " + " GATE("hr", 1));
		fprintf(f, ")\n  hc = tanh(" GATE("xw", 2));
		if (lbr)
			fprintf(f, " + r * " GATE("hr", 2));
		else {
			// (r h) Rh' + Rbh: the third gate's columns of rt and rb.
			fprintf(f, " + (r * h) @ slice(rt, start=[0, %lld], end=[%lld, %lld], step=[1, 1])",
			        (long long)(2 * H), (long long)H, (long long)(3 * H));
			fprintf(f, " + slice(rb, start=[%lld], end=[%lld], step=[1])", (long long)(2 * H),
			        (long long)(3 * H));
		}
		fputs(")\n  h2 = (1 - z) * hc + z * h\n  return h2, h2\n}\n\n", f);
	} else
		fputs("  h2 = tanh(xw + h @ rt + rb)\n  return h2, h2\n}\n\n", f);
#undef GATE
	// Per direction: the projections, the scan, its values.
	const char *on = n->output[0] && *n->output[0] ? n->output[0] : "rnn";
	char nm[8][4200];
	for (int d = 0; d < D; d++) {
		char *xw = nm[4 * d], *rt = nm[4 * d + 1], *sc = nm[4 * d + 2];
		snprintf(xw, 4200, "%s:xw%d", on, d);
		snprintf(rt, 4200, "%s:rt%d", on, d);
		snprintf(sc, 4200, "%s:scan%d", on, d);
		int64_t ws[3] = {d, 0, 0}, we[3] = {d + 1, G * H, I}, one3[3] = {1, 1, 1};
		int64_t rs[3] = {d, 0, 0}, re[3] = {d + 1, G * H, H};
		fputs("  ", im->cur);
		ox_put_name(im->cur, xw);
		ox_E(im, " = ");
		if (b)
			ox_E(im, "add(");
		int64_t xs[2] = {T * B, I}, ps[3] = {T, B, G * H}, wsh[2] = {G * H, I};
		ox_E(im, "reshape(matmul(reshape(");
		ox_E(im, layout ? "permute($v, perm=[1, 0, 2])" : "$v", x);
		ox_E(im, ", shape=$L), permute(reshape(slice($v, start=$L, end=$L, step=$L), shape=$L), perm=[1, "
		      "0])), shape=$L)",
		  xs, 2, w, ws, 3, we, 3, one3, 3, wsh, 2, ps, 3);
		if (b) {
			// LSTM: both biases into the projections; GRU and RNN: Wb
			// here, Rb inside the step (GRU's reset multiplies it).
			int64_t bs[2] = {d, 0}, be[2] = {d + 1, G * H}, rbs[2] = {d, G * H},
			        rbe[2] = {d + 1, 2 * G * H}, one2[2] = {1, 1}, gh[1] = {G * H};
			if (lstm)
				ox_E(im, ", reshape(add(slice($v, start=$L, end=$L, step=$L), slice($v, start=$L, end=$L, "
				      "step=$L)), shape=$L))",
				  b, bs, 2, be, 2, one2, 2, b, rbs, 2, rbe, 2, one2, 2, gh, 1);
			else
				ox_E(im, ", reshape(slice($v, start=$L, end=$L, step=$L), shape=$L))", b, bs, 2, be, 2,
				  one2, 2, gh, 1);
		}
		ox_st_end(im);
		int64_t rsh[2] = {G * H, H};
		fputs("  ", im->cur);
		ox_put_name(im->cur, rt);
		ox_E(im, " = permute(reshape(slice($v, start=$L, end=$L, step=$L), shape=$L), perm=[1, 0])", r,
		  rs, 3, re, 3, one3, 3, rsh, 2);
		ox_st_end(im);
		fputs("  ", im->cur);
		ox_put_name(im->cur, sc);
		ox_E(im, " = scan(__onnx_$s_$d, ", op, (int64_t)fnum);
		for (int k = 0; k < (lstm ? 2 : 1); k++) {
			// (D, B, H), or (B, D, H) in layout 1.
			int64_t s0[3] = {layout ? 0 : d, layout ? d : 0, 0},
			        e0[3] = {layout ? B : d + 1, layout ? d + 1 : B, H}, bh[2] = {B, H};
			if (st[k])
				ox_E(im, "reshape(slice($v, start=$L, end=$L, step=$L), shape=$L), ", st[k], s0, 3, e0,
				  3, one3, 3, bh, 2);
			else
				ox_E(im, "full(value=0, shape=$L, dtype=$s), ", bh, 2, dt);
		}
		ox_put_name(im->cur, xw);
		ox_E(im, ", ");
		ox_put_name(im->cur, rt);
		if (!lstm) {
			int64_t bs[2] = {d, G * H}, be[2] = {d + 1, 2 * G * H}, one2[2] = {1, 1}, gh[1] = {G * H};
			if (b)
				ox_E(im, ", reshape(slice($v, start=$L, end=$L, step=$L), shape=$L)", b, bs, 2, be, 2,
				  one2, 2, gh, 1);
			else
				ox_E(im, ", full(value=0, shape=$L, dtype=$s)", gh, 1, dt);
		}
		ox_E(im, ", ncarry=$d, nxs=1, reverse=$d)", (int64_t)(lstm ? 2 : 1), (int64_t)(rev || d == 1));
		ox_st_end(im);
	}
	// Y: the per-step outputs, (T, 1, B, H) per direction, joined.
	int64_t y4[4] = {T, 1, B, H}, s3[3] = {1, B, H};
	for (int k = 0; k < 3 && k < (int)n->n_output; k++) {
		if (!*n->output[k] || (k == 2 && !lstm))
			continue;
		OVal *o = &outs[k];
		int idx = k == 0 ? (lstm ? 2 : 1) : k - 1; // the scan's value
		ox_st_begin(im, o->name);
		if (layout)
			ox_E(im, "permute(");
		if (D == 2)
			ox_E(im, "concat(");
		for (int d = 0; d < D; d++) {
			ox_E(im, d ? ", reshape(get(" : "reshape(get(");
			ox_put_name(im->cur, nm[4 * d + 2]);
			if (k == 0)
				ox_E(im, ", index=$d), shape=$L)", (int64_t)idx, y4, 4);
			else
				ox_E(im, ", index=$d), shape=$L)", (int64_t)idx, s3, 3);
		}
		if (D == 2)
			ox_E(im, ", axis=$d)", (int64_t)(k == 0 ? 1 : 0));
		if (layout)
			ox_E(im, k == 0 ? ", perm=[2, 0, 1, 3])" : ", perm=[1, 0, 2])");
		ox_st_end(im);
		o->dtype = x->dtype;
		if (k == 0) {
			o->rank = 4;
			int64_t dd[4] = {T, D, B, H}, dl[4] = {B, T, D, H};
			memcpy(o->dim, layout ? dl : dd, sizeof dd);
		} else {
			o->rank = 3;
			int64_t dd[3] = {D, B, H}, dl[3] = {B, D, H};
			memcpy(o->dim, layout ? dl : dd, sizeof dd);
		}
		*nout = k + 1;
	}
	if ((int)n->n_output > (lstm ? 3 : 2)) {
		ox_err(im, "%zu outputs", n->n_output);
		return 0;
	}
	return 1;
}
