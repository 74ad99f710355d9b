// frontend/onnx_ops.c -- each ONNX node to IR statements (docs/ONNX.md, "Op
// set"): import_node dispatches; Conv, ConvTranspose, the pools, the
// normalizations, Split, Slice, Gather, MatMul, Resize, Einsum and the
// single-output ops are here, the folding in onnx_shape.c, the recurrent ops
// in onnx_rnn.c.
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx_imp.h"

// ---------------------------------------------------------------- the ops

// An input of the node: the value, checked to exist; NULL with an error
// (opt: NULL without one when the input is absent or named "").
OVal *
ox_in_val(Imp *im, const Onnx__NodeProto *n, size_t i, int opt)
{
	if (i >= n->n_input || !*n->input[i]) {
		if (!opt)
			ox_err(im, "input %zu is missing", i);
		return NULL;
	}
	OVal *v = ox_find(im, n->input[i]);
	if (!v)
		ox_err(im, "input '%s' is not defined before it", n->input[i]);
	return v;
}

// Slice's bounds on one axis, clamped as ONNX (and Python) do, for a
// positive step: [*b, *e).
void
ox_clamp_bounds(int64_t dim, int64_t *b, int64_t *e, int64_t step)
{
	if (*b < 0)
		*b += dim;
	if (*e < 0)
		*e += dim;
	if (step > 0) {
		*b = *b < 0 ? 0 : *b > dim ? dim : *b;
		*e = *e < 0 ? 0 : *e > dim ? dim : *e;
	} else {
		*b = *b < 0 ? -1 : *b > dim - 1 ? dim - 1 : *b;
		*e = *e < -1 ? -1 : *e > dim - 1 ? dim - 1 : *e;
	}
}

// Window geometry of Conv and the pools on one spatial axis of length L:
// the padding before (*b) and after (*e) and the output length, from
// pads, auto_pad and ceil_mode (onnx.reference's rules: SAME pads the
// total ceil(L/s) needs, UPPER puts the odd one after; ceil_mode keeps a
// last window that starts inside the input or the left padding, by more
// padding after).
static int64_t
window(const char *autopad, int64_t L, int64_t k, int64_t s, int64_t d, int64_t *b, int64_t *e,
       int ceil_mode)
{
	int64_t ext = d * (k - 1) + 1;
	if (!strcmp(autopad, "VALID"))
		*b = *e = 0;
	else if (!strncmp(autopad, "SAME", 4)) {
		int64_t out = (L + s - 1) / s, total = (out - 1) * s + ext - L;
		if (total < 0)
			total = 0;
		*b = !strcmp(autopad, "SAME_UPPER") ? total / 2 : total - total / 2;
		*e = total - *b;
	}
	int64_t span = L + *b + *e - ext;
	if (span < 0)
		return -1;
	int64_t out = span / s + 1;
	if (ceil_mode && span % s) {
		out = span / s + 2;
		if ((out - 1) * s >= L + *b)
			out--;
		int64_t need = (out - 1) * s + ext - (L + *b + *e);
		if (need > 0)
			*e += need;
	}
	return out;
}

// The spatial attributes of Conv, ConvTranspose and the pools, for ns
// spatial axes: kernel k (from the attribute, or w's shape), strides,
// dilations, pads as [begin..., end...].  0 after an error.
typedef struct Win {
	int ns;
	int64_t k[MAXRANK], s[MAXRANK], d[MAXRANK], b[MAXRANK], e[MAXRANK];
	char autopad[32];
} Win;

static int
win_attrs(Imp *im, const Onnx__NodeProto *n, int ns, const int64_t *wk, Win *w)
{
	int64_t p[2 * MAXRANK];
	w->ns = ns;
	char buf[32];
	snprintf(w->autopad, sizeof w->autopad, "%s", ox_attr_s(n, "auto_pad", "NOTSET", buf, sizeof buf));
	if (strcmp(w->autopad, "NOTSET") && strcmp(w->autopad, "VALID") &&
	    strcmp(w->autopad, "SAME_UPPER") && strcmp(w->autopad, "SAME_LOWER")) {
		ox_err(im, "auto_pad '%s' is not one of NOTSET, VALID, SAME_UPPER, SAME_LOWER", w->autopad);
		return 0;
	}
	int kk = ox_attr_ints(n, "kernel_shape", w->k, MAXRANK);
	if (kk < 0 && !wk) {
		ox_err(im, "no kernel_shape");
		return 0;
	}
	if (kk >= 0 && kk != ns) {
		ox_err(im, "kernel_shape has %d values for %d spatial axes", kk, ns);
		return 0;
	}
	for (int i = 0; i < ns; i++) {
		if (kk < 0)
			w->k[i] = wk[i];
		else if (wk && wk[i] != w->k[i]) {
			ox_err(im, "kernel_shape %lld differs from the weight's %lld", (long long)w->k[i],
			    (long long)wk[i]);
			return 0;
		}
		w->s[i] = w->d[i] = 1;
		w->b[i] = w->e[i] = 0;
	}
	int ks = ox_attr_ints(n, "strides", w->s, MAXRANK), kd = ox_attr_ints(n, "dilations", w->d, MAXRANK),
	    kp = ox_attr_ints(n, "pads", p, 2 * MAXRANK);
	if ((ox_attr(n, "strides") && ks != ns) || (ox_attr(n, "dilations") && kd != ns) ||
	    (ox_attr(n, "pads") && kp != 2 * ns)) {
		ox_err(im, "strides, dilations or pads do not have one value per spatial axis (%d)", ns);
		return 0;
	}
	for (int i = 0; i < ns; i++) {
		if (kp > 0) {
			w->b[i] = p[i];
			w->e[i] = p[ns + i];
		}
		if (w->k[i] < 1 || w->s[i] < 1 || w->d[i] < 1 || w->b[i] < 0 || w->e[i] < 0 ||
		    w->k[i] > 1 << 20 || w->s[i] > 1 << 20 || w->d[i] > 1 << 20 || w->b[i] > 1 << 20 ||
		    w->e[i] > 1 << 20) {
			ox_err(im, "kernel, strides and dilations must be positive and pads non-negative");
			return 0;
		}
	}
	return 1;
}

// Writes x padded on its spatial axes by (b, e) with value pv (pad's
// constant), or x itself when no padding is needed.
static void
put_padded(Imp *im, OVal *x, const Win *w, double pv)
{
	int any = 0;
	int64_t before[MAXRANK] = {0}, after[MAXRANK] = {0};
	for (int i = 0; i < w->ns; i++) {
		before[x->rank - w->ns + i] = w->b[i];
		after[x->rank - w->ns + i] = w->e[i];
		any |= w->b[i] || w->e[i];
	}
	if (!any)
		ox_E(im, "$v", x);
	else
		ox_E(im, "pad($v, before=$L, after=$L, value=$g)", x, before, x->rank, after, x->rank, pv);
}

static int
symmetric(const Win *w)
{
	for (int i = 0; i < w->ns; i++)
		if (w->b[i] != w->e[i])
			return 0;
	return 1;
}

// The operands of Conv and ConvTranspose: the weight W and the optional
// bias, 1 or 2 spatial axes, the window attributes and the group, checked
// against the input's channels C.  Conv's W is (M, C/group, k...);
// ConvTranspose's is (C, M/group, k...), C a multiple of the group.  0
// after an error.
static int
conv_operands(Imp *im, const Onnx__NodeProto *n, OVal *x, int transposed, OVal **w, OVal **bias,
              Win *wn, int64_t *g)
{
	*w = ox_in_val(im, n, 1, 0);
	*bias = ox_in_val(im, n, 2, 1);
	if (!*w || im->failed)
		return 0;
	const OVal *W = *w;
	int ns = x->rank - 2;
	if (ns < 1 || ns > 2 || W->rank != x->rank) {
		ox_err(im, "input of rank %d, weight of rank %d: 1 or 2 spatial axes are supported", x->rank,
		       W->rank);
		return 0;
	}
	if (!win_attrs(im, n, ns, W->dim + 2, wn))
		return 0;
	*g = ox_attr_i(n, "group", 1);
	if (*g < 1 || x->dim[1] != (transposed ? W->dim[0] : W->dim[1] * *g) || W->dim[0] % *g) {
		ox_err(im, "%lld input channels, weight (%lld, %lld, ...) and group %lld do not agree",
		       (long long)x->dim[1], (long long)W->dim[0], (long long)W->dim[1], (long long)*g);
		return 0;
	}
	return 1;
}

// Conv: conv (1 or 2 spatial axes), its padding explicit (pad) when
// asymmetric; the bias broadcast over the channels.
static int
op_conv(Imp *im, const Onnx__NodeProto *n, OVal *x, OVal *o)
{
	OVal *w, *bias;
	Win wn;
	int64_t g;
	if (!conv_operands(im, n, x, 0, &w, &bias, &wn, &g))
		return 0;
	int ns = wn.ns;
	o->rank = x->rank;
	o->dim[0] = x->dim[0];
	o->dim[1] = w->dim[0];
	for (int i = 0; i < ns; i++) {
		o->dim[2 + i] = window(wn.autopad, x->dim[2 + i], wn.k[i], wn.s[i], wn.d[i], &wn.b[i],
		                       &wn.e[i], 0);
		if (o->dim[2 + i] < 0) {
			ox_err(im, "the kernel is larger than the padded input");
			return 0;
		}
	}
	int sym = symmetric(&wn);
	int64_t pz[MAXRANK] = {0};
	ox_st_begin(im, o->name);
	if (bias)
		ox_E(im, "add(");
	ox_E(im, "conv(");
	if (sym)
		ox_E(im, "$v", x);
	else
		put_padded(im, x, &wn, 0);
	ox_E(im, ", $v, stride=$L, padding=$L, dilation=$L, groups=$d)", w, wn.s, ns, sym ? wn.b : pz, ns,
	  wn.d, ns, g);
	if (bias) {
		int64_t bs[MAXRANK] = {1, w->dim[0], 1, 1};
		ox_E(im, ", reshape($v, shape=$L))", bias, bs, x->rank);
	}
	ox_st_end(im);
	return 1;
}

// ConvTranspose: conv's adjoint in its input, conv_input_grad, which is
// the transposed convolution.  With the full output length
// F = s (L - 1) + d (k - 1) + 1 and pads (b, e), ONNX's output is
// full[b : b + out], out = F + output_padding - b - e (or output_shape).
// conv_input_grad with padding p and size S gives full[p : p + S] (zeros
// past F), valid when conv of S gives back L: written directly when the
// pads are symmetric and S satisfies that, else from padding 0 and
// S = F, then padded and sliced.
static int
op_convtranspose(Imp *im, const Onnx__NodeProto *n, OVal *x, OVal *o)
{
	OVal *w, *bias;
	Win wn;
	int64_t g;
	if (!conv_operands(im, n, x, 1, &w, &bias, &wn, &g))
		return 0;
	int ns = wn.ns;
	int64_t op[MAXRANK] = {0}, os[MAXRANK];
	int kop = ox_attr_ints(n, "output_padding", op, MAXRANK),
	    kos = ox_attr_ints(n, "output_shape", os, MAXRANK);
	if ((kop >= 0 && kop != ns) || (kos >= 0 && kos != ns && kos != x->rank)) {
		ox_err(im, "output_padding or output_shape do not have one value per spatial axis");
		return 0;
	}
	if (kos == x->rank) // the whole shape: its spatial part
		memmove(os, os + 2, (size_t)ns * sizeof *os);
	o->rank = x->rank;
	o->dim[0] = x->dim[0];
	o->dim[1] = w->dim[1] * g;
	int64_t full[MAXRANK];
	int direct = 1;
	for (int i = 0; i < ns; i++) {
		full[i] = wn.s[i] * (x->dim[2 + i] - 1) + wn.d[i] * (wn.k[i] - 1) + 1;
		if (op[i] < 0 || op[i] > 1 << 20) {
			ox_err(im, "output_padding %lld is out of range", (long long)op[i]);
			return 0;
		}
		if (!strncmp(wn.autopad, "SAME", 4)) {
			int64_t out = kos >= 0 ? os[i] : x->dim[2 + i] * wn.s[i];
			int64_t total = full[i] + op[i] - out;
			if (total < 0)
				total = 0;
			wn.b[i] = !strcmp(wn.autopad, "SAME_UPPER") ? total / 2 : total - total / 2;
			wn.e[i] = total - wn.b[i];
		} else if (!strcmp(wn.autopad, "VALID"))
			wn.b[i] = wn.e[i] = 0;
		o->dim[2 + i] = kos >= 0 ? os[i] : full[i] + op[i] - wn.b[i] - wn.e[i];
		if (o->dim[2 + i] < 1) {
			ox_err(im, "the output would be empty");
			return 0;
		}
		// Direct: symmetric padding p, and conv of the output's length
		// gives back L: floor((S + 2p - d(k-1) - 1) / s) + 1 == L.
		int64_t S = o->dim[2 + i], p = wn.b[i];
		if (wn.b[i] != wn.e[i] || S + 2 * p - wn.d[i] * (wn.k[i] - 1) - 1 < 0 ||
		    (S + 2 * p - wn.d[i] * (wn.k[i] - 1) - 1) / wn.s[i] + 1 != x->dim[2 + i])
			direct = 0;
	}
	int64_t pz[MAXRANK] = {0};
	ox_st_begin(im, o->name);
	if (bias)
		ox_E(im, "add(");
	if (direct) {
		ox_E(im, "conv_input_grad($v, $v, stride=$L, padding=$L, dilation=$L, groups=$d, size=$L)", x,
		  w, wn.s, ns, wn.b, ns, wn.d, ns, g, o->dim + 2, ns);
	} else {
		// full[b : b + out], zeros past F: pad after by what b + out
		// passes F, then slice.
		int64_t after[MAXRANK] = {0}, st[MAXRANK], en[MAXRANK], sp[MAXRANK], anyp = 0;
		for (int i = 0; i < x->rank; i++) {
			st[i] = 0;
			en[i] = o->dim[i];
			sp[i] = 1;
		}
		for (int i = 0; i < ns; i++) {
			int64_t past = wn.b[i] + o->dim[2 + i] - full[i];
			after[2 + i] = past > 0 ? past : 0;
			anyp |= after[2 + i];
			st[2 + i] = wn.b[i];
			en[2 + i] = wn.b[i] + o->dim[2 + i];
		}
		ox_E(im, "slice(");
		if (anyp)
			ox_E(im, "pad(");
		ox_E(im, "conv_input_grad($v, $v, stride=$L, padding=$L, dilation=$L, groups=$d, size=$L)", x,
		  w, wn.s, ns, pz, ns, wn.d, ns, g, full, ns);
		if (anyp)
			ox_E(im, ", before=$L, after=$L)", pz, x->rank, after, x->rank);
		ox_E(im, ", start=$L, end=$L, step=$L)", st, x->rank, en, x->rank, sp, x->rank);
	}
	if (bias) {
		int64_t bs[MAXRANK] = {1, o->dim[1], 1, 1};
		ox_E(im, ", reshape($v, shape=$L))", bias, bs, x->rank);
	}
	ox_st_end(im);
	return 1;
}

// MaxPool and AveragePool: max_pool and avg_pool (1 or 2 spatial axes).
// Padding the op cannot take (asymmetric, more than half the kernel,
// ceil_mode's extra) is explicit: -inf for max; for the average, zeros
// counted when count_include_pad, else the sum of the padded input over
// the count of real elements (a pooled padded indicator).
static int
op_pool(Imp *im, const Onnx__NodeProto *n, OVal *x, OVal *o)
{
	int mx = !strcmp(n->op_type, "MaxPool");
	int ns = x->rank - 2;
	if (ns < 1 || ns > 2) {
		ox_err(im, "input of rank %d: 1 or 2 spatial axes are supported", x->rank);
		return 0;
	}
	if (n->n_output > 1 && *n->output[1]) {
		ox_err(im, "the Indices output is not supported");
		return 0;
	}
	Win wn;
	if (!win_attrs(im, n, ns, NULL, &wn))
		return 0;
	int ceil_mode = (int)ox_attr_i(n, "ceil_mode", 0), cip = (int)ox_attr_i(n, "count_include_pad", 0);
	if (!mx) {
		for (int i = 0; i < ns; i++)
			if (wn.d[i] != 1) {
				ox_err(im, "dilations of AveragePool are not supported");
				return 0;
			}
	}
	if (mx && ox_attr_i(n, "storage_order", 0)) {
		ox_err(im, "storage_order 1 is not supported (it changes only Indices)");
		return 0;
	}
	o->rank = x->rank;
	o->dim[0] = x->dim[0];
	o->dim[1] = x->dim[1];
	int64_t e0[MAXRANK]; // the padding after, without ceil_mode's extra
	for (int i = 0; i < ns; i++) {
		int64_t b = wn.b[i];
		e0[i] = wn.e[i];
		window(wn.autopad, x->dim[2 + i], wn.k[i], wn.s[i], wn.d[i], &b, &e0[i], 0);
		o->dim[2 + i] = window(wn.autopad, x->dim[2 + i], wn.k[i], wn.s[i], wn.d[i], &wn.b[i],
		                       &wn.e[i], ceil_mode);
		if (o->dim[2 + i] < 1) {
			ox_err(im, "the kernel is larger than the padded input");
			return 0;
		}
	}
	int fits = symmetric(&wn);
	for (int i = 0; i < ns; i++)
		fits &= 2 * wn.b[i] <= wn.k[i];
	int64_t pz[MAXRANK] = {0};
	ox_st_begin(im, o->name);
	if (mx) {
		ox_E(im, "max_pool(");
		if (fits)
			ox_E(im, "$v", x);
		else
			put_padded(im, x, &wn, -INFINITY);
		ox_E(im, ", kernel=$L, stride=$L, padding=$L, dilation=$L)", wn.k, ns, wn.s, ns,
		  fits ? wn.b : pz, ns, wn.d, ns);
	} else if (fits) {
		ox_E(im, "avg_pool($v, kernel=$L, stride=$L, padding=$L, count_include_pad=$d)", x, wn.k, ns,
		  wn.s, ns, wn.b, ns, (int64_t)cip);
	} else {
		// The padded input's window sums over the number of elements that
		// count: a padded indicator pooled the same way.  What counts is
		// the input, and its pads when count_include_pad (never
		// ceil_mode's extra: onnx.reference and PyTorch clip the divisor's
		// window to the input and its pads).
		int64_t pb[MAXRANK] = {0}, pa[MAXRANK] = {0}, xa[MAXRANK] = {0};
		int extra = 0;
		for (int i = 0; i < ns; i++) {
			pb[2 + i] = wn.b[i];
			pa[2 + i] = cip ? e0[i] : wn.e[i];
			xa[2 + i] = wn.e[i] - e0[i];
			extra |= cip && xa[2 + i];
		}
		ox_E(im, "div(avg_pool(");
		put_padded(im, x, &wn, 0);
		ox_E(im, ", kernel=$L, stride=$L, padding=$L), avg_pool(", wn.k, ns, wn.s, ns, pz, ns);
		if (extra)
			ox_E(im, "pad(");
		ox_E(im, "pad(full(value=1, shape=$L, dtype=$s), before=$L, after=$L, value=$d)", x->dim,
		  x->rank, ox_dtype_ir(x->dtype), pb, x->rank, pa, x->rank, (int64_t)cip);
		if (extra)
			ox_E(im, ", before=$L, after=$L, value=0)", pz, x->rank, xa, x->rank);
		ox_E(im, ", kernel=$L, stride=$L, padding=$L))", wn.k, ns, wn.s, ns, pz, ns);
	}
	ox_st_end(im);
	return 1;
}

// BatchNormalization.  Inference: scale (x - mean) / sqrt(var + eps) + B,
// the statistics broadcast over axis 1 (onnx.reference's order).
// Training (training_mode = 1, or more than one output before opset 14):
// the batch's mean and biased variance over every axis but 1 instead, and
// the running statistics as further outputs:
// running = input * momentum + batch * (1 - momentum).
static int
op_batchnorm(Imp *im, const Onnx__NodeProto *n, OVal *x, OVal *outs, int *nout)
{
	OVal *sc = ox_in_val(im, n, 1, 0), *bb = ox_in_val(im, n, 2, 0), *mean = ox_in_val(im, n, 3, 0),
	     *var = ox_in_val(im, n, 4, 0);
	if (im->failed)
		return 0;
	if (x->rank < 2) {
		ox_err(im, "input of rank %d (at least 2)", x->rank);
		return 0;
	}
	int64_t C = x->dim[1];
	OVal *p[4] = {sc, bb, mean, var};
	for (int i = 0; i < 4; i++)
		if (p[i]->rank != 1 || p[i]->dim[0] != C) {
			ox_err(im, "'%s' is not of shape [%lld]", p[i]->name, (long long)C);
			return 0;
		}
	ox_base(im, var)->positive = 1; // its seeded draw (onnx.c) must be
	int train = ox_attr_i(n, "training_mode", 0) || (im->opset < 14 && n->n_output > 1);
	double eps = ox_attr_f(n, "epsilon", 1e-5), mom = ox_attr_f(n, "momentum", 0.9);
	int64_t cs[MAXRANK], ax[MAXRANK];
	int nax = 0;
	for (int i = 0; i < x->rank; i++) {
		cs[i] = i == 1 ? C : 1;
		if (i != 1)
			ax[nax++] = i;
	}
	OVal *o = &outs[0];
	o->rank = x->rank;
	memcpy(o->dim, x->dim, sizeof o->dim);
	char mname[4096], vname[4096];
	if (!train) {
		ox_st_begin(im, o->name);
		ox_E(im, "add(mul(reshape($v, shape=$L), div(sub($v, reshape($v, shape=$L)), sqrt(add(reshape($v, "
		      "shape=$L), $g)))), reshape($v, shape=$L))",
		  sc, cs, x->rank, x, mean, cs, x->rank, var, cs, x->rank, eps, bb, cs, x->rank);
		ox_st_end(im);
		*nout = 1;
		return 1;
	}
	// The batch statistics under names of their own, derived from Y's.
	snprintf(mname, sizeof mname, "%s:batch_mean", o->name);
	snprintf(vname, sizeof vname, "%s:batch_var", o->name);
	fputs("  ", im->cur);
	ox_put_name(im->cur, mname);
	ox_E(im, " = mean($v, axes=$L, keepdim=1)", x, ax, nax);
	ox_st_end(im);
	fputs("  ", im->cur);
	ox_put_name(im->cur, vname);
	ox_E(im, " = mean(pow(sub($v, ", x);
	ox_put_name(im->cur, mname);
	ox_E(im, "), 2), axes=$L, keepdim=1)", ax, nax);
	ox_st_end(im);
	ox_st_begin(im, o->name);
	ox_E(im, "add(mul(reshape($v, shape=$L), div(sub($v, ", sc, cs, x->rank, x);
	ox_put_name(im->cur, mname);
	ox_E(im, "), sqrt(add(");
	ox_put_name(im->cur, vname);
	ox_E(im, ", $g)))), reshape($v, shape=$L))", eps, bb, cs, x->rank);
	ox_st_end(im);
	*nout = 1;
	for (int k = 1; k < 3 && k < (int)n->n_output; k++) {
		if (!*n->output[k])
			continue;
		OVal *r = &outs[k];
		r->rank = 1;
		r->dim[0] = C;
		ox_st_begin(im, r->name);
		ox_E(im, "add(mul($v, $g), mul(reshape(", k == 1 ? mean : var, mom);
		ox_put_name(im->cur, k == 1 ? mname : vname);
		ox_E(im, ", shape=[$d]), $g))", C, 1 - mom);
		ox_st_end(im);
		*nout = k + 1;
	}
	if (n->n_output > 3) {
		ox_err(im, "the saved mean and variance outputs (opset < 14) are not supported");
		return 0;
	}
	return 1;
}

// LayerNormalization over the axes from `axis` on: d = x - mean,
// y = d / sqrt(mean(d^2) + eps) * Scale + B (Scale and B broadcast);
// optional outputs Mean and InvStdDev, of x's shape with 1 on the
// normalized axes.
static int
op_layernorm(Imp *im, const Onnx__NodeProto *n, OVal *x, OVal *outs, int *nout)
{
	OVal *sc = ox_in_val(im, n, 1, 0), *bb = ox_in_val(im, n, 2, 1);
	if (im->failed)
		return 0;
	int a = ox_one_axis(im, ox_attr_i(n, "axis", -1), x->rank);
	if (a < 0)
		return 0;
	double eps = ox_attr_f(n, "epsilon", 1e-5);
	int64_t ax[MAXRANK];
	int nax = 0;
	for (int i = a; i < x->rank; i++)
		ax[nax++] = i;
	OVal *o = &outs[0];
	OVal *chk[3] = {x, sc, bb};
	if (!ox_bcast(im, o, chk, bb ? 3 : 2))
		return 0;
	if (o->rank != x->rank || memcmp(o->dim, x->dim, sizeof o->dim)) {
		ox_err(im, "Scale or B do not broadcast to the input's shape");
		return 0;
	}
	char mname[4096], iname[4096];
	snprintf(mname, sizeof mname, "%s", n->n_output > 1 && *n->output[1] ? n->output[1] : "");
	snprintf(iname, sizeof iname, "%s", n->n_output > 2 && *n->output[2] ? n->output[2] : "");
	if (!*mname)
		snprintf(mname, sizeof mname, "%s:mean", o->name);
	if (!*iname)
		snprintf(iname, sizeof iname, "%s:inv_std_dev", o->name);
	fputs("  ", im->cur);
	ox_put_name(im->cur, mname);
	ox_E(im, " = mean($v, axes=$L, keepdim=1)", x, ax, nax);
	ox_st_end(im);
	fputs("  ", im->cur);
	ox_put_name(im->cur, iname);
	ox_E(im, " = rsqrt(add(mean(pow(sub($v, ", x);
	ox_put_name(im->cur, mname);
	ox_E(im, "), 2), axes=$L, keepdim=1), $g))", ax, nax, eps);
	ox_st_end(im);
	ox_st_begin(im, o->name);
	if (bb)
		ox_E(im, "add(");
	ox_E(im, "mul(mul(sub($v, ", x);
	ox_put_name(im->cur, mname);
	ox_E(im, "), ");
	ox_put_name(im->cur, iname);
	ox_E(im, "), $v)", sc);
	if (bb)
		ox_E(im, ", $v)", bb);
	ox_st_end(im);
	*nout = 1;
	for (int k = 1; k < 3 && k < (int)n->n_output; k++)
		if (*n->output[k]) {
			outs[k].rank = x->rank;
			for (int i = 0; i < x->rank; i++)
				outs[k].dim[i] = i < a ? x->dim[i] : 1;
			*nout = k + 1;
		}
	return 1;
}

// Split into the outputs along axis: sizes from the input `split` (opset
// 13), the attribute (before), or num_outputs / the output count in equal
// parts (the last smaller, opset 18).
static int
op_split(Imp *im, const Onnx__NodeProto *n, OVal *x, OVal *outs, int *nout)
{
	int a = ox_one_axis(im, ox_attr_i(n, "axis", 0), x->rank);
	if (a < 0)
		return 0;
	int k = (int)n->n_output;
	if (k > 256) {
		ox_err(im, "more than 256 outputs");
		return 0;
	}
	int64_t sz[256];
	OVal *sp = ox_in_val(im, n, 1, 1);
	if (im->failed)
		return 0;
	if (sp) {
		if (!sp->iv || ox_numel(sp) != k) {
			ox_err(im, "the split '%s' is not known at import or not one size per output", sp->name);
			return 0;
		}
		for (int i = 0; i < k; i++)
			sz[i] = sp->iv[i];
	} else if (ox_attr(n, "split")) {
		if (ox_attr_ints(n, "split", sz, 256) != k) {
			ox_err(im, "the attribute split does not have one size per output");
			return 0;
		}
	} else {
		int64_t parts = ox_attr_i(n, "num_outputs", k), d = x->dim[a];
		if (parts != k || k < 1) {
			ox_err(im, "num_outputs %lld differs from the %d outputs", (long long)parts, k);
			return 0;
		}
		int64_t each = (d + k - 1) / k;
		for (int i = 0; i < k; i++) {
			int64_t rest = d - each * i;
			sz[i] = rest < 0 ? 0 : rest < each ? rest : each;
		}
	}
	int64_t total = 0;
	for (int i = 0; i < k; i++) {
		if (sz[i] < 0) {
			ox_err(im, "a negative split size");
			return 0;
		}
		total += sz[i];
	}
	if (total != x->dim[a]) {
		ox_err(im, "the sizes sum to %lld, not the axis' %lld", (long long)total, (long long)x->dim[a]);
		return 0;
	}
	int64_t st[MAXRANK], en[MAXRANK], step[MAXRANK], at = 0;
	for (int i = 0; i < k; i++) {
		OVal *o = &outs[i];
		o->rank = x->rank;
		memcpy(o->dim, x->dim, sizeof o->dim);
		o->dim[a] = sz[i];
		for (int j = 0; j < x->rank; j++) {
			st[j] = j == a ? at : 0;
			en[j] = j == a ? at + sz[i] : x->dim[j];
			step[j] = 1;
		}
		at += sz[i];
		if (!*n->output[i])
			continue;
		if (ox_known(x)) {
			int64_t nn = ox_numel(o), *src = ox_xcalloc((size_t)(nn ? nn : 1), sizeof *src);
			for (int64_t e = 0; e < nn; e++) {
				int64_t r = e, off = 0, stride = 1;
				for (int j = x->rank - 1; j >= 0; j--) {
					off += (r % o->dim[j] + st[j]) * stride;
					r /= o->dim[j];
					stride *= x->dim[j];
				}
				src[e] = off;
			}
			int ok = ox_gather_known(im, x, o, src);
			free(src);
			if (!ok)
				return 0;
			continue;
		}
		ox_st_begin(im, o->name);
		ox_E(im, "slice($v, start=$L, end=$L, step=$L)", x, st, x->rank, en, x->rank, step, x->rank);
		ox_st_end(im);
	}
	*nout = k;
	return 1;
}

// Slice with known starts, ends, axes and steps.  Positive steps are the
// slice op; a negative step is folded when x is known, else not yet (the
// op takes positive steps only).
static int
op_slice(Imp *im, const Onnx__NodeProto *n, OVal *x, OVal *o)
{
	OVal *sv = ox_in_val(im, n, 1, 0), *ev = ox_in_val(im, n, 2, 0), *av = ox_in_val(im, n, 3, 1),
	     *pv = ox_in_val(im, n, 4, 1);
	if (im->failed)
		return 0;
	OVal *need[4] = {sv, ev, av, pv};
	for (int i = 0; i < 4; i++)
		if (need[i] && !need[i]->iv) {
			ox_err(im, "'%s' is not known at import (a slice's bounds must be)", need[i]->name);
			return 0;
		}
	int k = (int)ox_numel(sv);
	if (ox_numel(ev) != k || (av && ox_numel(av) != k) || (pv && ox_numel(pv) != k) || k > MAXRANK) {
		ox_err(im, "starts, ends, axes and steps differ in length");
		return 0;
	}
	int64_t st[MAXRANK], en[MAXRANK], step[MAXRANK];
	for (int j = 0; j < x->rank; j++) {
		st[j] = 0;
		en[j] = x->dim[j];
		step[j] = 1;
	}
	int seen[MAXRANK] = {0};
	for (int i = 0; i < k; i++) {
		int a = ox_one_axis(im, av ? av->iv[i] : i, x->rank);
		if (a < 0)
			return 0;
		if (seen[a]++) {
			ox_err(im, "axis %d repeated", a);
			return 0;
		}
		step[a] = pv ? pv->iv[i] : 1;
		if (!step[a]) {
			ox_err(im, "a step of 0");
			return 0;
		}
		st[a] = sv->iv[i];
		en[a] = ev->iv[i];
		ox_clamp_bounds(x->dim[a], &st[a], &en[a], step[a]);
	}
	o->rank = x->rank;
	for (int j = 0; j < x->rank; j++) {
		int64_t len = step[j] > 0 ? (en[j] - st[j] + step[j] - 1) / step[j]
		                          : (st[j] - en[j] - step[j] - 1) / -step[j];
		o->dim[j] = len > 0 ? len : 0;
		if (o->dim[j] == 0) { // an empty slice: any bounds in range
			st[j] = en[j] = 0;
			step[j] = step[j] > 0 ? step[j] : 1;
		}
	}
	if (ox_known(x)) {
		int64_t nn = ox_numel(o), *src = ox_xcalloc((size_t)(nn ? nn : 1), sizeof *src);
		for (int64_t e = 0; e < nn; e++) {
			int64_t r = e, off = 0, stride = 1;
			for (int j = x->rank - 1; j >= 0; j--) {
				off += (st[j] + (r % o->dim[j]) * step[j]) * stride;
				r /= o->dim[j];
				stride *= x->dim[j];
			}
			src[e] = off;
		}
		int ok = ox_gather_known(im, x, o, src);
		free(src);
		return ok;
	}
	// A negative step is a take of the indices st, st + step, ... (the
	// slice op takes positive steps); the other axes are one slice.
	int64_t pst[MAXRANK], pen[MAXRANK], pstep[MAXRANK];
	for (int j = 0; j < x->rank; j++) {
		int r = step[j] < 0 && o->dim[j] > 0;
		pst[j] = r ? 0 : st[j];
		pstep[j] = r ? 1 : step[j];
		pen[j] = r ? x->dim[j] : o->dim[j] > 0 ? st[j] + (o->dim[j] - 1) * step[j] + 1 : en[j];
		if (r && o->dim[j] > MAXLIT) {
			ox_err(im, "a negative step over more than %d elements is not supported yet", MAXLIT);
			return 0;
		}
	}
	ox_st_begin(im, o->name);
	for (int j = 0; j < x->rank; j++)
		if (step[j] < 0 && o->dim[j] > 0)
			ox_E(im, "take(");
	ox_E(im, "slice($v, start=$L, end=$L, step=$L)", x, pst, x->rank, pen, x->rank, pstep, x->rank);
	for (int j = 0; j < x->rank; j++)
		if (step[j] < 0 && o->dim[j] > 0) {
			OVal t = {.dtype = ONNX_INT64, .rank = 1, .dim = {o->dim[j]}};
			t.iv = ox_xcalloc((size_t)o->dim[j], sizeof *t.iv);
			for (int64_t i = 0; i < o->dim[j]; i++)
				t.iv[i] = st[j] + i * step[j];
			ox_E(im, ", ");
			ox_put_literal(im->cur, &t);
			free(t.iv);
			ox_E(im, ", axis=$d)", (int64_t)j);
		}
	ox_st_end(im);
	return 1;
}

// Gather: take along axis; negative indices count from the end (made
// non-negative here when known, by a where otherwise).  Folded when both
// are known.
static int
op_gather(Imp *im, const Onnx__NodeProto *n, OVal *x, OVal *o)
{
	OVal *idx = ox_in_val(im, n, 1, 0);
	if (!idx)
		return 0;
	int a = ox_one_axis(im, ox_attr_i(n, "axis", 0), x->rank);
	if (a < 0)
		return 0;
	if (idx->dtype != ONNX_INT64) {
		ox_err(im, "indices of ONNX dtype %d: int64 (7) is supported", idx->dtype);
		return 0;
	}
	if (x->rank - 1 + idx->rank > MAXRANK) {
		ox_err(im, "the result's rank is more than %d", MAXRANK);
		return 0;
	}
	o->rank = 0;
	for (int i = 0; i < a; i++)
		o->dim[o->rank++] = x->dim[i];
	for (int i = 0; i < idx->rank; i++)
		o->dim[o->rank++] = idx->dim[i];
	for (int i = a + 1; i < x->rank; i++)
		o->dim[o->rank++] = x->dim[i];
	int64_t d = x->dim[a];
	if (ox_known(idx))
		for (int64_t i = 0, ni = ox_numel(idx); i < ni; i++)
			if (idx->iv[i] < -d || idx->iv[i] >= d) {
				ox_err(im, "index %lld is out of range for dimension %lld", (long long)idx->iv[i],
				    (long long)d);
				return 0;
			}
	if (ox_known(x) && ox_known(idx)) {
		int64_t nn = ox_numel(o), *src = ox_xcalloc((size_t)(nn ? nn : 1), sizeof *src);
		int64_t inner = 1, ni = ox_numel(idx);
		for (int i = a + 1; i < x->rank; i++)
			inner *= x->dim[i];
		for (int64_t e = 0; e < nn; e++) {
			int64_t in_ = e % inner, r = e / inner, j = ni ? r % ni : 0, outer = ni ? r / ni : 0;
			int64_t t = idx->iv[j] < 0 ? idx->iv[j] + d : idx->iv[j];
			src[e] = (outer * d + t) * inner + in_;
		}
		int ok = ox_gather_known(im, x, o, src);
		free(src);
		return ok;
	}
	ox_st_begin(im, o->name);
	ox_E(im, "take($v, ", x);
	if (ox_known(idx)) {
		int negs = 0;
		for (int64_t i = 0, ni = ox_numel(idx); i < ni; i++)
			negs |= idx->iv[i] < 0;
		if (negs) {
			OVal t = *idx;
			t.iv = ox_xcalloc((size_t)ox_numel(idx), sizeof *t.iv);
			for (int64_t i = 0, ni = ox_numel(idx); i < ni; i++)
				t.iv[i] = idx->iv[i] < 0 ? idx->iv[i] + d : idx->iv[i];
			int ok = ox_put_literal(im->cur, &t);
			free(t.iv);
			if (!ok) {
				ox_err(im, "more than %d distinct negative indices known at import", MAXLIT);
				return 0;
			}
		} else
			ox_E(im, "$v", idx);
	} else
		ox_E(im, "where(lt($v, 0), add($v, $d), $v)", idx, idx, d, idx);
	ox_E(im, ", axis=$d)", (int64_t)a);
	ox_st_end(im);
	return 1;
}

// MatMul with NumPy's rules: a 1-D operand gains an axis of 1 (removed
// from the result), batch axes broadcast.
static int
op_matmul(Imp *im, OVal *x, OVal *y, OVal *o)
{
	if (x->rank < 1 || y->rank < 1) {
		ox_err(im, "scalar operands");
		return 0;
	}
	OVal a = *x, b = *y;
	if (a.rank == 1) {
		a.rank = 2;
		a.dim[1] = a.dim[0];
		a.dim[0] = 1;
	}
	if (b.rank == 1) {
		b.rank = 2;
		b.dim[1] = 1;
	}
	if (a.dim[a.rank - 1] != b.dim[b.rank - 2]) {
		ox_err(im, "inner dimensions differ (%lld vs %lld)", (long long)a.dim[a.rank - 1],
		    (long long)b.dim[b.rank - 2]);
		return 0;
	}
	OVal ba = a, bb = b, bo = {0};
	ba.rank -= 2;
	bb.rank -= 2;
	OVal *bp[2] = {&ba, &bb};
	if (!ox_bcast(im, &bo, bp, 2))
		return 0;
	o->rank = bo.rank;
	memcpy(o->dim, bo.dim, sizeof o->dim);
	if (x->rank > 1)
		o->dim[o->rank++] = a.dim[a.rank - 2];
	if (y->rank > 1)
		o->dim[o->rank++] = b.dim[b.rank - 1];
	int64_t as[MAXRANK], bs[MAXRANK];
	memcpy(as, a.dim, sizeof as);
	memcpy(bs, b.dim, sizeof bs);
	ox_st_begin(im, o->name);
	if (x->rank == 1 || y->rank == 1)
		ox_E(im, "reshape(");
	ox_E(im, "matmul(");
	ox_E(im, x->rank == 1 ? "reshape($v, shape=$L), " : "$v, ", x, as, a.rank);
	ox_E(im, y->rank == 1 ? "reshape($v, shape=$L))" : "$v)", y, bs, b.rank);
	if (x->rank == 1 || y->rank == 1)
		ox_E(im, ", shape=$L)", o->dim, o->rank);
	ox_st_end(im);
	return 1;
}

// Resize.  The output sizes: `sizes`, or floor(in * scale) from
// `scales` (the scale then the given one, else out / in).
//   - mode linear on (N, C, H, W): upsample_bilinear, torch's bilinear
//     interpolation, which is ONNX's when the source coordinate rules
//     agree: align_corners, or half_pixel (pytorch_half_pixel) with the
//     scale out / in (torch computes it from the sizes; ONNX uses the
//     given scale, the same when in * scale is the output size exactly).
//     Both clamp a source coordinate to the input (ONNX pads by the edge).
//   - mode nearest, any rank: a take along each resized axis of the
//     indices ONNX's coordinate rule and nearest_mode pick, computed here.
static int
op_resize(Imp *im, const Onnx__NodeProto *n, OVal *x, OVal *o)
{
	char mb[32], cb[32], nb[32], pb[32];
	const char *mode = ox_attr_s(n, "mode", "nearest", mb, sizeof mb),
	           *ct = ox_attr_s(n, "coordinate_transformation_mode", "half_pixel", cb, sizeof cb),
	           *nm = ox_attr_s(n, "nearest_mode", "round_prefer_floor", nb, sizeof nb);
	OVal *sc = ox_in_val(im, n, 2, 1), *sz = ox_in_val(im, n, 3, 1);
	if (im->failed)
		return 0;
	int R = x->rank, nearest = !strcmp(mode, "nearest");
	if (!nearest && strcmp(mode, "linear")) {
		ox_err(im, "mode '%s': only 'linear' and 'nearest' are supported", mode);
		return 0;
	}
	int64_t axes[MAXRANK];
	int na = ox_attr_ints(n, "axes", axes, MAXRANK);
	if (na < 0)
		for (na = 0; na < R; na++)
			axes[na] = na;
	double scale[MAXRANK], v[MAXRANK];
	int64_t out[MAXRANK];
	for (int a = 0; a < R; a++) {
		scale[a] = 1;
		out[a] = x->dim[a];
	}
	int from_scales = sz == NULL;
	OVal *src = sz ? sz : sc;
	if (!src || ox_numel(src) != na || ox_const_f(src, v, MAXRANK) != na) {
		ox_err(im, "neither scales nor sizes known at import, one value per axis");
		return 0;
	}
	if (sz && strcmp(ox_attr_s(n, "keep_aspect_ratio_policy", "stretch", pb, sizeof pb), "stretch")) {
		ox_err(im, "keep_aspect_ratio_policy '%s' is not supported", pb);
		return 0;
	}
	for (int i = 0; i < na; i++) {
		int a = ox_one_axis(im, axes[i], R);
		if (a < 0)
			return 0;
		if (!(v[i] > 0 && v[i] < (double)(1 << 24))) {
			ox_err(im, "scale or size %g", v[i]);
			return 0;
		}
		if (from_scales) {
			scale[a] = v[i];
			out[a] = (int64_t)floor((double)x->dim[a] * v[i]);
		} else {
			out[a] = (int64_t)v[i];
			scale[a] = x->dim[a] ? v[i] / (double)x->dim[a] : 1;
		}
		if (out[a] < 1 || out[a] > ((int64_t)1 << 24) || !x->dim[a]) {
			ox_err(im, "output size %lld from input size %lld", (long long)out[a],
			    (long long)x->dim[a]);
			return 0;
		}
	}
	o->rank = R;
	memcpy(o->dim, out, sizeof out);
	if (!ox_dims_ok(im, o, "output"))
		return 0;
	if (nearest) {
		int hp = !strcmp(ct, "half_pixel"), php = !strcmp(ct, "pytorch_half_pixel"),
		    ac = !strcmp(ct, "align_corners"), as = !strcmp(ct, "asymmetric"),
		    hps = !strcmp(ct, "half_pixel_symmetric");
		if (!hp && !php && !ac && !as && !hps) {
			ox_err(im, "coordinate_transformation_mode '%s' is not supported", ct);
			return 0;
		}
		if (strcmp(nm, "round_prefer_floor") && strcmp(nm, "round_prefer_ceil") &&
		    strcmp(nm, "floor") && strcmp(nm, "ceil")) {
			ox_err(im, "nearest_mode '%s'", nm);
			return 0;
		}
		ox_st_begin(im, o->name);
		int nt = 0;
		for (int a = 0; a < R; a++)
			nt += out[a] != x->dim[a] || scale[a] != 1;
		for (int i = 0; i < nt; i++)
			ox_E(im, "take(");
		ox_E(im, "$v", x);
		for (int a = 0; a < R; a++) {
			if (out[a] == x->dim[a] && scale[a] == 1)
				continue;
			if (out[a] > MAXLIT) {
				// Too many indices for a literal: the same arithmetic in
				// the model, in f64 on iota, operation for operation as
				// below, so the indices are the same.
				double in = (double)x->dim[a], s = scale[a],
				       len = from_scales ? in * s : (double)out[a];
				int64_t sh[1] = {out[a]};
				ox_E(im, ", cast(clamp(");
				const char *pre = !strcmp(nm, "floor") ? "floor(" : !strcmp(nm, "ceil") ? "neg(floor(neg("
				                : nm[13] == 'c' ? "floor(add(" : "neg(floor(sub(0.5, ";
				ox_E(im, "$s", pre);
				if (as)
					ox_E(im, "div(iota(shape=$L, dtype=f64), $g)", sh, 1, s);
				else if (ac)
					ox_E(im, "div(mul(iota(shape=$L, dtype=f64), $g), $g)", sh, 1, in - 1, len - 1);
				else if (hps)
					ox_E(im, "sub(add($g, div(add(iota(shape=$L, dtype=f64), 0.5), $g)), 0.5)",
					  in / 2 * (1 - (double)out[a] / len), sh, 1, s);
				else
					ox_E(im, "sub(div(add(iota(shape=$L, dtype=f64), 0.5), $g), 0.5)", sh, 1, s);
				ox_E(im, "$s", !strcmp(nm, "floor") ? ")" : !strcmp(nm, "ceil") ? ")))"
				           : nm[13] == 'c' ? ", 0.5))" : ")))");
				ox_E(im, ", min=0, max=$d), dtype=i64), axis=$d)", x->dim[a] - 1, (int64_t)a);
				continue;
			}
			OVal t = {.dtype = ONNX_INT64, .rank = 1, .dim = {out[a]}};
			t.iv = ox_xcalloc((size_t)out[a], sizeof *t.iv);
			double in = (double)x->dim[a], s = scale[a], len = from_scales ? in * s : (double)out[a];
			for (int64_t i = 0; i < out[a]; i++) {
				double c;
				// ONNX's x_original of output index i.
				if (as)
					c = (double)i / s;
				else if (ac)
					c = len > 1 ? (double)i * (in - 1) / (len - 1) : 0;
				else if (php && out[a] == 1)
					c = 0;
				else if (hps) {
					double adj = (double)out[a] / len, off = in / 2 * (1 - adj);
					c = off + ((double)i + 0.5) / s - 0.5;
				} else
					c = ((double)i + 0.5) / s - 0.5;
				double fl = floor(c), fr = c - fl;
				int64_t k = !strcmp(nm, "floor") ? (int64_t)fl
				          : !strcmp(nm, "ceil") ? (int64_t)ceil(c)
				          : fr == 0.5 ? (int64_t)(nm[6] == 'p' && nm[13] == 'c' ? fl + 1 : fl)
				                      : (int64_t)floor(c + 0.5);
				t.iv[i] = k < 0 ? 0 : k >= x->dim[a] ? x->dim[a] - 1 : k;
			}
			ox_E(im, ", ");
			int ok = ox_put_literal(im->cur, &t);
			free(t.iv);
			if (!ok) {
				ox_err(im, "more than %d distinct indices on axis %d", MAXLIT, a);
				return 0;
			}
			ox_E(im, ", axis=$d)", (int64_t)a);
		}
		if (!nt)
			ox_E(im, " + 0");
		ox_st_end(im);
		return 1;
	}
	if (R != 4) {
		ox_err(im, "input of rank %d: linear resizing of (N, C, H, W) is supported", R);
		return 0;
	}
	int ac = !strcmp(ct, "align_corners");
	if (!ac && strcmp(ct, "half_pixel") && strcmp(ct, "pytorch_half_pixel")) {
		ox_err(im, "coordinate_transformation_mode '%s' is not supported in linear mode "
		        "(align_corners, half_pixel, pytorch_half_pixel are)", ct);
		return 0;
	}
	if (out[0] != x->dim[0] || out[1] != x->dim[1]) {
		ox_err(im, "resizing N or C is not supported");
		return 0;
	}
	for (int a = 2; a < 4; a++) {
		// (align_corners too: ONNX's length_resized is in * scale,
		// unrounded, where scales are given.)
		if ((!ac || from_scales) && (double)x->dim[a] * scale[a] != (double)out[a]) {
			ox_err(im, "scale %g on axis %d is not output / input (%lld / %lld): torch's coordinates "
			        "would differ", scale[a], a, (long long)out[a], (long long)x->dim[a]);
			return 0;
		}
		if (ox_attr_i(n, "antialias", 0) && out[a] < x->dim[a]) {
			ox_err(im, "antialiased downsampling is not supported");
			return 0;
		}
		if (!strcmp(ct, "pytorch_half_pixel") && out[a] == 1 && x->dim[a] != 1) {
			ox_err(im, "pytorch_half_pixel to one pixel is not supported");
			return 0;
		}
	}
	ox_st_begin(im, o->name);
	ox_E(im, "upsample_bilinear($v, size=$L, align_corners=$d)", x, out + 2, 2, (int64_t)ac);
	ox_st_end(im);
	return 1;
}

// Einsum as a broadcast product summed: every operand's axes permuted
// into one order of all the equation's letters (the output's first, then
// the summed ones), reshaped with 1 for the letters it lacks, multiplied
// (the parser broadcasts) and summed over the letters the output lacks,
// which leaves the output's letters in its order.  Repeated letters in one
// operand (a diagonal) and ellipses are not yet.
static int
op_einsum(Imp *im, const Onnx__NodeProto *n, OVal *o)
{
	char eq[256];
	const char *e = ox_attr_s(n, "equation", "", eq, sizeof eq);
	char terms[16][MAXRANK + 1], out[MAXRANK + 1] = "";
	int nt = 0, len = 0, has_arrow = 0;
	terms[0][0] = 0;
	for (const char *c = e; *c; c++) {
		if (*c == ' ')
			continue;
		if (*c == ',' || (c[0] == '-' && c[1] == '>')) {
			if (has_arrow || nt >= 15) {
				ox_err(im, "the equation '%s' is not understood", e);
				return 0;
			}
			if (*c == '-') {
				has_arrow = 1;
				c++;
			}
			terms[nt][len] = 0;
			nt++;
			len = 0;
			terms[nt][0] = 0;
			continue;
		}
		if (*c == '.') {
			ox_err(im, "an ellipsis in the equation is not supported yet");
			return 0;
		}
		if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z')) || len >= MAXRANK) {
			ox_err(im, "the equation '%s' is not understood (letters, at most %d per term)", e,
			    MAXRANK);
			return 0;
		}
		terms[nt][len++] = *c;
		terms[nt][len] = 0;
	}
	int nin = nt + 1;
	if (has_arrow) {
		nin = nt;
		memcpy(out, terms[nt], sizeof out);
	}
	if (nin < 1 || nin != (int)n->n_input) {
		ox_err(im, "the equation has %d operands, the node %zu inputs", nin, n->n_input);
		return 0;
	}
	// Every letter's size, and how often it appears.
	int64_t size[128];
	int count[128] = {0};
	OVal *in[16];
	for (int i = 0; i < nin; i++) {
		if (!(in[i] = ox_in_val(im, n, (size_t)i, 0)))
			return 0;
		if ((int)strlen(terms[i]) != in[i]->rank) {
			ox_err(im, "term '%s' for an input of rank %d", terms[i], in[i]->rank);
			return 0;
		}
		for (int k = 0; terms[i][k]; k++) {
			int l = terms[i][k];
			if (strchr(terms[i] + k + 1, l)) {
				ox_err(im, "a letter repeated in one term (a diagonal) is not supported yet");
				return 0;
			}
			if (count[l] && size[l] != in[i]->dim[k]) {
				ox_err(im, "letter '%c' has sizes %lld and %lld", l, (long long)size[l],
				    (long long)in[i]->dim[k]);
				return 0;
			}
			size[l] = in[i]->dim[k];
			count[l]++;
		}
	}
	if (!has_arrow) { // implicit: the letters seen once, in alphabetical order
		int k = 0;
		for (int l = 'A'; l <= 'z'; l++)
			if (count[l] == 1 && k < MAXRANK)
				out[k++] = (char)l;
		out[k] = 0;
	}
	char order[17 * MAXRANK];
	int R = 0;
	for (int k = 0; out[k]; k++) {
		if (!count[(int)out[k]] || strchr(out + k + 1, out[k])) {
			ox_err(im, "output letter '%c' is in no input, or repeated", out[k]);
			return 0;
		}
		order[R++] = out[k];
	}
	int nout = R;
	for (int i = 0; i < nin; i++)
		for (int k = 0; terms[i][k]; k++)
			if (!memchr(order, terms[i][k], (size_t)R))
				order[R++] = terms[i][k];
	if (R > MAXRANK) {
		ox_err(im, "%d distinct letters (at most %d)", R, MAXRANK);
		return 0;
	}
	o->dtype = in[0]->dtype;
	o->rank = nout;
	for (int k = 0; k < nout; k++)
		o->dim[k] = size[(int)order[k]];
	ox_st_begin(im, o->name);
	if (R > nout)
		ox_E(im, "sum(");
	for (int i = 1; i < nin; i++)
		ox_E(im, "mul(");
	for (int i = 0; i < nin; i++) {
		int64_t perm[MAXRANK], shape[MAXRANK];
		int k = 0, ident = 1;
		for (int a = 0; a < R; a++) {
			const char *pos = strchr(terms[i], order[a]);
			shape[a] = pos ? size[(int)order[a]] : 1;
			if (pos) {
				perm[k] = pos - terms[i];
				ident &= perm[k] == k;
				k++;
			}
		}
		int full = k == R;
		if (!full)
			ox_E(im, "reshape(");
		if (!ident)
			ox_E(im, "permute(");
		ox_E(im, "$v", in[i]);
		if (!ident)
			ox_E(im, ", perm=$L)", perm, k);
		if (!full)
			ox_E(im, ", shape=$L)", shape, R);
		ox_E(im, i ? ")" : "");
		if (i + 1 < nin)
			ox_E(im, ", ");
	}
	if (R > nout) {
		int64_t ax[MAXRANK];
		for (int a = nout; a < R; a++)
			ax[a - nout] = a;
		ox_E(im, ", axes=$L)", ax, R - nout);
	}
	ox_st_end(im);
	return 1;
}

// The IR op of an elementwise ONNX op.
static const char *
ew_ir(const char *op)
{
	static const char *const map[][2] = {
	    {"Add", "add"},         {"Sub", "sub"},      {"Mul", "mul"},
	    {"Div", "div"},         {"Pow", "pow"},      {"Relu", "relu"},
	    {"Tanh", "tanh"},       {"Sigmoid", "sigmoid"}, {"Neg", "neg"},
	    {"Exp", "exp"},         {"Log", "log"},      {"Sqrt", "sqrt"},
	    {"Erf", "erf"},         {"Abs", "abs"},      {"Floor", "floor"},
	    {"Sin", "sin"},         {"Cos", "cos"},      {"Softplus", "softplus"},
	    {"Sign", "sign"},       {"Equal", "eq"},     {"Less", "lt"},
	    {"Greater", "gt"},      {"LessOrEqual", "le"}, {"GreaterOrEqual", "ge"},
	    {"Not", "not"},         {"And", "and"},      {"Or", "or"},
	    {"Max", "maximum"},     {"Min", "minimum"},  {"Where", "where"}};
	for (size_t i = 0; i < sizeof map / sizeof *map; i++)
		if (!strcmp(op, map[i][0]))
			return map[i][1];
	return NULL;
}

// The ops that are computed here when their inputs are known: the
// elementwise ones and the shape ops (the rest handle it themselves).
static int
foldable(const char *op)
{
	return ox_is_ew(op) || !strcmp(op, "Reshape") || !strcmp(op, "Flatten") ||
	       !strcmp(op, "Squeeze") || !strcmp(op, "Unsqueeze") || !strcmp(op, "Concat") ||
	       !strcmp(op, "Expand");
}

// A reduction's IR form around x (o's shape is set by the caller).
static void
put_reduce(Imp *im, const char *op, OVal *x, const int64_t *ax, int k, int keep)
{
	const char *pre = "", *red = "sum", *arg = "$v", *post = "";
	if (!strcmp(op, "ReduceMean"))
		red = "mean";
	else if (!strcmp(op, "ReduceMax"))
		red = "max";
	else if (!strcmp(op, "ReduceMin"))
		red = "min";
	else if (!strcmp(op, "ReduceLogSumExp"))
		red = "logsumexp";
	else if (!strcmp(op, "ReduceSumSquare"))
		arg = "mul($v, $v)";
	else if (!strcmp(op, "ReduceL1"))
		arg = "abs($v)";
	else if (!strcmp(op, "ReduceL2")) {
		pre = "sqrt(";
		arg = "mul($v, $v)";
		post = ")";
	} else if (!strcmp(op, "ReduceLogSum")) {
		pre = "log(";
		post = ")";
	}
	ox_E(im, "$s$s(", pre, red);
	ox_E(im, arg, x, x);
	ox_E(im, ", axes=$L, keepdim=$d)$s", ax, k, (int64_t)(keep != 0), post);
}

// The single-output ops; o's name is set, the rest here.  0 after an
// error.
static int
op_one(Imp *im, const Onnx__NodeProto *n, OVal *x, OVal *o)
{
	const char *op = n->op_type;
	int64_t ax[MAXRANK];
	o->dtype = x->dtype;
	if (!strcmp(op, "Where") || (ew_ir(op) && strcmp(op, "Relu") && n->n_input > 1) ||
	    !strcmp(op, "Max") || !strcmp(op, "Min")) {
		// Elementwise with broadcasting; Max and Min take any count.
		OVal *in[64];
		int k = (int)n->n_input;
		if (k > 64 || k < 1) {
			ox_err(im, "%d inputs (1 to 64)", k);
			return 0;
		}
		for (int i = 0; i < k; i++)
			if (!(in[i] = ox_in_val(im, n, (size_t)i, 0)))
				return 0;
		if (!ox_bcast(im, o, in, k))
			return 0;
		o->dtype = ox_is_cmp(op) ? ONNX_BOOL : in[!strcmp(op, "Where")]->dtype;
		ox_st_begin(im, o->name);
		if (k == 1)
			ox_E(im, "($v + 0)", in[0]);
		else if (!strcmp(op, "Where"))
			ox_E(im, "where($v, $v, $v)", in[0], in[1], in[2]);
		else {
			for (int i = 1; i < k; i++)
				ox_E(im, "$s(", ew_ir(op));
			ox_E(im, "$v", in[0]);
			for (int i = 1; i < k; i++)
				ox_E(im, ", $v)", in[i]);
		}
		ox_st_end(im);
		return 1;
	}
	o->rank = x->rank;
	memcpy(o->dim, x->dim, sizeof o->dim);
	ox_st_begin(im, o->name);
	if (ew_ir(op))
		ox_E(im, "$s($v)", ew_ir(op), x);
	else if (!strcmp(op, "Reciprocal"))
		ox_E(im, "div(1, $v)", x);
	else if (!strcmp(op, "LeakyRelu"))
		// relu(x) - alpha relu(-x): x for x > 0, alpha x below, for any alpha.
		ox_E(im, "sub(relu($v), mul($g, relu(neg($v))))", x, ox_attr_f(n, "alpha", 0.01), x);
	else if (!strcmp(op, "Gelu")) {
		char buf[16];
		const char *ap = ox_attr_s(n, "approximate", "none", buf, sizeof buf);
		if (!strcmp(ap, "tanh"))
			// x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
			ox_E(im, "mul(mul(0.5, $v), add(1, tanh(mul(0.79788456080286541, add($v, mul(0.044715, "
			      "pow($v, 3)))))))",
			  x, x, x);
		else if (!strcmp(ap, "none"))
			// x/2 (1 + erf(x / sqrt 2))
			ox_E(im, "mul(mul(0.5, $v), add(1, erf(mul($v, 0.70710678118654757))))", x, x);
		else {
			ox_err(im, "approximate '%s' is neither 'none' nor 'tanh'", ap);
			return 0;
		}
	} else if (!strcmp(op, "Softmax") || !strcmp(op, "LogSoftmax")) {
		int a = ox_one_axis(im, ox_attr_i(n, "axis", -1), x->rank);
		if (a < 0)
			return 0;
		ox_E(im, "$s($v, axis=$d)", !strcmp(op, "Softmax") ? "softmax" : "log_softmax", x, (int64_t)a);
	} else if (!strcmp(op, "Clip")) {
		// clamp with known bounds (inputs from opset 11, attributes before).
		double lo = -INFINITY, hi = INFINITY;
		OVal *mn = ox_in_val(im, n, 1, 1), *mx = ox_in_val(im, n, 2, 1);
		if (im->failed)
			return 0;
		if ((mn && (ox_numel(mn) != 1 || ox_const_f(mn, &lo, 1) != 1)) ||
		    (mx && (ox_numel(mx) != 1 || ox_const_f(mx, &hi, 1) != 1))) {
			ox_err(im, "the bounds are not scalars known at import");
			return 0;
		}
		if (x->dtype == ONNX_FLOAT) // the comparison is in f32
			lo = (float)lo, hi = (float)hi;
		ox_E(im, "clamp($v, min=$g, max=$g)", x, lo, hi);
	} else if (!strcmp(op, "Cast")) {
		if (!(o->dtype = ox_cast_to(im, n)))
			return 0;
		if (!ox_dtype_ir(x->dtype)) {
			ox_err(im, "a cast from ONNX dtype %d", x->dtype);
			return 0;
		}
		ox_E(im, "cast($v, dtype=$s)", x, ox_dtype_ir(o->dtype));
	} else if (!strcmp(op, "Gemm")) {
		OVal *y = ox_in_val(im, n, 1, 0), *c = ox_in_val(im, n, 2, 1);
		if (!y || im->failed)
			return 0;
		int ta = (int)ox_attr_i(n, "transA", 0), tb = (int)ox_attr_i(n, "transB", 0);
		if (x->rank != 2 || y->rank != 2) {
			ox_err(im, "operands of rank %d and %d (2 and 2)", x->rank, y->rank);
			return 0;
		}
		o->dim[0] = ta ? x->dim[1] : x->dim[0];
		o->dim[1] = tb ? y->dim[0] : y->dim[1];
		if ((ta ? x->dim[0] : x->dim[1]) != (tb ? y->dim[1] : y->dim[0])) {
			ox_err(im, "inner dimensions differ");
			return 0;
		}
		// alpha A' B' + beta C, with C broadcast to (M, N).
		double alpha = ox_attr_f(n, "alpha", 1), beta = ox_attr_f(n, "beta", 1);
		if (c)
			ox_E(im, "add(");
		if (alpha != 1)
			ox_E(im, "mul($g, ", alpha);
		ox_E(im, ta ? "matmul(permute($v, perm=[1, 0]), " : "matmul($v, ", x);
		ox_E(im, tb ? "permute($v, perm=[1, 0]))" : "$v)", y);
		if (alpha != 1)
			ox_E(im, ")");
		if (c)
			ox_E(im, beta != 1 ? ", mul($g, $v))" : ", $v)", beta, c);
	} else if (!strncmp(op, "Reduce", 6)) {
		int k = ox_node_axes(im, n, 1, x->rank, ax);
		if (k < 0)
			return 0;
		int keep = (int)ox_attr_i(n, "keepdims", 1);
		if (!k && ox_attr_i(n, "noop_with_empty_axes", 0)) {
			ox_E(im, "($v + 0)", x); // no axes: the identity
		} else {
			if (!k) // no axes: every axis
				for (; k < x->rank; k++)
					ax[k] = k;
			o->rank = 0;
			for (int i = 0; i < x->rank; i++)
				if (!ox_has_axis(ax, k, i))
					o->dim[o->rank++] = x->dim[i];
				else if (keep)
					o->dim[o->rank++] = 1;
			put_reduce(im, op, x, ax, k, keep);
		}
	} else if (!strcmp(op, "GlobalAveragePool") || !strcmp(op, "GlobalMaxPool")) {
		if (x->rank < 3) {
			ox_err(im, "input of rank %d (at least 3)", x->rank);
			return 0;
		}
		int k = 0;
		for (int i = 2; i < x->rank; i++) {
			ax[k++] = i;
			o->dim[i] = 1;
		}
		ox_E(im, "$s($v, axes=$L, keepdim=1)", op[6] == 'A' ? "mean" : "max", x, ax, k);
	} else if (!strcmp(op, "Transpose")) {
		int64_t p[MAXRANK];
		int k = ox_attr_ints(n, "perm", p, MAXRANK);
		if (!ox_attr(n, "perm"))
			for (k = 0; k < x->rank; k++)
				p[k] = x->rank - 1 - k;
		int seen[MAXRANK] = {0};
		for (int i = 0; i < k; i++)
			if (p[i] < 0 || p[i] >= x->rank || seen[p[i]]++)
				k = -1;
		if (k != x->rank) {
			ox_err(im, "'perm' is not a permutation of %d axes", x->rank);
			return 0;
		}
		for (int i = 0; i < k; i++)
			o->dim[i] = x->dim[p[i]];
		ox_E(im, "permute($v, perm=$L)", x, p, k);
	} else {
		ox_err(im, "internal: no rule"); // is_supported and the dispatch disagree
		return 0;
	}
	ox_st_end(im);
	return 1;
}

// One node: its statements, and its outputs' shapes.  0 after an error.
int
ox_import_node(Imp *im, const Onnx__NodeProto *n)
{
	const char *op = n->op_type;
	int rnn = !strcmp(op, "LSTM") || !strcmp(op, "GRU") || !strcmp(op, "RNN");
	im->node = n;
	if (!n->n_output || n->n_output > 256) {
		ox_err(im, "%zu outputs (1 to 256)", n->n_output);
		return 0;
	}
	for (size_t i = 0; i < n->n_output; i++)
		// (A recurrent op's Y is optional too: Y_h may be all it gives.)
		if ((i == 0 && !ox_name_ok(n->output[0]) && !(rnn && !*n->output[0])) ||
		    (*n->output[i] && !ox_name_ok(n->output[i]))) {
			ox_err(im, "output %zu has an empty name or a control character in it", i);
			return 0;
		}
	OVal outs[256];
	memset(outs, 0, sizeof outs[0] * n->n_output);
	for (size_t i = 0; i < n->n_output; i++)
		outs[i].name = n->output[i];
	int nout = 1, ok = 0;
	char *buf = NULL;
	size_t len = 0;
	im->cur = open_memstream(&buf, &len);
	OVal *x = NULL;
	OVal *o = &outs[0];
	if (!strcmp(op, "Constant"))
		ok = ox_op_constant(im, n, o);
	else if (!strcmp(op, "Shape") || !strcmp(op, "Size") || !strcmp(op, "ConstantOfShape") ||
	         !strcmp(op, "Range"))
		ok = ox_op_known(im, n, o);
	else if (!(x = ox_in_val(im, n, 0, 0)))
		ok = 0;
	else if ((!strcmp(op, "Identity") || !strcmp(op, "Dropout")) && !ox_known(x)) {
		// The same value under another name; Dropout is the identity in
		// inference (its mask all true).
		if (!strcmp(op, "Dropout")) {
			OVal *tm = ox_in_val(im, n, 2, 1), *ratio = ox_in_val(im, n, 1, 1);
			double rv = 0.5;
			int zero = ratio && ox_numel(ratio) == 1 && ox_const_f(ratio, &rv, 1) == 1 && rv == 0;
			// In training, a ratio of 0 keeps every element: the identity too.
			if (tm && (!tm->iv || tm->iv[0]) && !zero) {
				ox_err(im, "training_mode is not false at import (dropout in training is not "
				        "supported)");
				goto out;
			}
			if (n->n_output > 1 && *n->output[1]) {
				outs[1].dtype = ONNX_BOOL;
				outs[1].rank = x->rank;
				memcpy(outs[1].dim, x->dim, sizeof outs[1].dim);
				ox_st_begin(im, outs[1].name);
				ox_E(im, "full(value=1, shape=$L, dtype=bool)", x->dim, x->rank);
				ox_st_end(im);
				nout = 2;
			}
		}
		*o = *x;
		o->name = n->output[0];
		o->alias = (int)(ox_base(im, x) - im->v) + 1;
		o->iv = NULL;
		o->fv = NULL;
		o->isdecl = o->used = o->emitted = 0;
		o->init = NULL;
		ok = 1;
	} else if (foldable(op) && strcmp(op, "Dropout")) {
		OVal *in[64];
		int allk = 1, k = (int)n->n_input, ar = ox_is_ew(op) ? ox_ew_arity(op) : -1;
		if (k > 64) {
			ox_err(im, "more than 64 inputs");
			goto out;
		}
		if (ar >= 0 && (ar ? k != ar : k < 1)) {
			ox_err(im, "%d inputs, not %d", k, ar ? ar : 1);
			goto out;
		}
		for (int i = 0; i < k && ar >= 0; i++)
			if (!ox_in_val(im, n, (size_t)i, 0))
				goto out;
		for (int i = 0; i < k; i++) {
			in[i] = ox_in_val(im, n, (size_t)i, 1);
			if (im->failed)
				goto out;
			allk &= !in[i] || ox_known(in[i]);
		}
		if (ox_is_ew(op) && allk)
			ok = ox_fold_ew(im, op, in, k, o);
		else if (ox_is_ew(op) || !strcmp(op, "Where"))
			ok = op_one(im, n, x, o);
		else
			ok = ox_op_shape(im, n, x, o);
	} else if (!strcmp(op, "Dropout"))
		ok = ox_fold_ew(im, op, &x, 1, o); // known: itself
	else if (!strcmp(op, "Conv"))
		ok = op_conv(im, n, x, o);
	else if (!strcmp(op, "ConvTranspose"))
		ok = op_convtranspose(im, n, x, o);
	else if (!strcmp(op, "MaxPool") || !strcmp(op, "AveragePool"))
		ok = op_pool(im, n, x, o);
	else if (!strcmp(op, "BatchNormalization"))
		ok = op_batchnorm(im, n, x, outs, &nout);
	else if (!strcmp(op, "LayerNormalization"))
		ok = op_layernorm(im, n, x, outs, &nout);
	else if (!strcmp(op, "Split"))
		ok = op_split(im, n, x, outs, &nout);
	else if (!strcmp(op, "Slice"))
		ok = op_slice(im, n, x, o);
	else if (!strcmp(op, "Resize"))
		ok = op_resize(im, n, x, o);
	else if (!strcmp(op, "Einsum"))
		ok = op_einsum(im, n, o);
	else if (!strcmp(op, "LSTM") || !strcmp(op, "GRU") || !strcmp(op, "RNN"))
		ok = ox_op_rnn(im, n, x, outs, &nout);
	else if (!strcmp(op, "Gather"))
		ok = op_gather(im, n, x, o);
	else if (!strcmp(op, "MatMul")) {
		OVal *y = ox_in_val(im, n, 1, 0);
		ok = y && op_matmul(im, x, y, o);
	} else
		ok = op_one(im, n, x, o);
	if (ok && !o->dtype)
		o->dtype = x ? x->dtype : ONNX_FLOAT;
	for (int i = 1; ok && i < nout; i++)
		if (!outs[i].dtype)
			outs[i].dtype = o->dtype;
	if (ok && (int)n->n_output > nout)
		for (size_t i = (size_t)nout; i < n->n_output; i++)
			if (*n->output[i]) {
				ox_err(im, "output %zu is not supported", i);
				ok = 0;
			}
out:
	fclose(im->cur);
	im->cur = NULL;
	if (ok && !im->failed) {
		fwrite(buf, 1, len, im->body);
		for (int i = 0; i < nout; i++)
			if (*outs[i].name) {
				if (!ox_dims_ok(im, &outs[i], "output")) {
					ok = 0;
					break;
				}
				ox_add_val(im, &outs[i]);
			}
	} else {
		for (int i = 0; i < nout; i++) {
			free(outs[i].iv);
			free(outs[i].fv);
		}
	}
	free(buf);
	im->node = NULL;
	return ok && !im->failed;
}
