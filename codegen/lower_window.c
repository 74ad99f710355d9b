// codegen/lower_window.c -- the window ops as kernel IR, for cg_lower
// (lower.c, whose table of rules names lower_conv, lower_pool and
// lower_argmax for them):
// conv, the pools, upsample_bilinear, argmax and their adjoints, as plain
// loop nests in the kernel IR (ir/interp.c's rules, term by term): a
// parallel loop over the result and a reduction over the window (conv: the
// group's input channels and the kernel taps).  Positions outside the input
// are selects (the load index clamped, so both arms are safe), never
// branches.  The adjoints are gathers: each result element sums over the
// windows that read it, found by inverting the window map (conv_input_grad,
// max_pool_grad, avg_pool_grad: one term per kernel tap), by testing the
// few candidates of a bounded inverse window (upsample_bilinear_grad:
// bilinear_up) or by testing every output position
// (adaptive_avg_pool_grad, whose windows have no fixed shape).  max_pool's argmax is two kernels, the
// window's maximum m and then the first position holding m (NaN: the first
// NaN), which is the interpreter's running "first maximum" exactly.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lower_impl.h"

// The geometry of a window op, as ir/interp.c's window(): 1-d is 2-d with
// a height of 1.
typedef struct Geo {
	int64_t N, C, H, W, OH, OW;
	int64_t kh, kw, sh, sw, ph, pw, dh, dw;
} Geo;

static Geo
geo(const Shape *x, const Shape *o, const int64_t *k, const int64_t *s, const int64_t *pd,
    const int64_t *d)
{
	int ns = x->rank - 2, two = ns == 2;
	Geo v;
	v.N = x->dim[0];
	v.C = x->dim[1];
	v.H = two ? x->dim[2] : 1;
	v.W = x->dim[x->rank - 1];
	v.OH = two ? o->dim[2] : 1;
	v.OW = o->dim[o->rank - 1];
	v.kh = k && two ? k[0] : 1;
	v.kw = k ? k[ns - 1] : 1;
	v.sh = s && two ? s[0] : 1;
	v.sw = s ? s[ns - 1] : 1;
	v.ph = pd && two ? pd[0] : 0;
	v.pw = pd ? pd[ns - 1] : 0;
	v.dh = two && d ? d[0] : 1;
	v.dw = d ? d[ns - 1] : 1;
	return v;
}

static const int64_t *
attr_ints(const Lower *L, NodeId n, const Attrs *a, const char *name)
{
	int k = ir_attr_index(L->g->node[n].op, name);
	return k >= 0 ? a->a[k].v : NULL;
}

// A parallel (reduction) loop variable of extent ext; 0 when ext is 1.
static KxId
pvar(Lower *L, KKernel *k, int64_t ext)
{
	if (ext == 1)
		return kx_iconst(L->p, 0);
	FADC_ASSERT(k->rrank == 0, "pvar after rvar");
	k->dim[k->rank] = ext;
	return kx_var(L->p, k->rank++, ext);
}

static KxId
rvar(Lower *L, KKernel *k, int64_t ext)
{
	if (ext == 1)
		return kx_iconst(L->p, 0);
	k->rdim[k->rrank] = ext;
	int v = k->rank + k->rrank++;
	return kx_var(L->p, v, ext);
}

// a AND b, where 0 stands for "true".
static KxId
band(KProgram *p, KxId a, KxId b)
{
	if (!a)
		return b;
	if (!b)
		return a;
	return kx_bin(p, KX_AND, a, b);
}

// lo <= i < hi as a BOOL, or 0 (true) when i's range proves it.
static KxId
in_range(KProgram *p, KxId i, int64_t lo, int64_t hi)
{
	int64_t a, b;
	int known = kx_range(p, i, &a, &b);
	KxId t = 0;
	if (!(known && a >= lo))
		t = kx_cmp(p, KC_GE, i, kx_iconst(p, lo));
	if (!(known && b < hi))
		t = band(p, t, kx_cmp(p, KC_LT, i, kx_iconst(p, hi)));
	return t;
}

static KxId
sel(KProgram *p, KxId c, KxId a, KxId b)
{
	return c ? kx_select(p, c, a, b) : a;
}

// (((a * B) + b) * C + c) ...: the flat index of coordinates in a shape.
static KxId
flat4(KProgram *p, KxId a, KxId b, int64_t B, KxId c, int64_t Cd, KxId d, int64_t D)
{
	KxId e = kx_iadd(p, kx_imul(p, a, B), b);
	e = kx_iadd(p, kx_imul(p, e, Cd), c);
	return kx_iadd(p, kx_imul(p, e, D), d);
}

static KxId
ineg(KProgram *p, KxId a)
{
	return kx_imul(p, a, -1);
}

// The output position o (clamped into [0, out)) whose window reads input
// position i at tap t: o s - pad + t dil = i; *ok says that one exists.
static KxId
inv_window(KProgram *p, KxId i, KxId t, int64_t pad, int64_t stride, int64_t dil, int64_t out,
           KxId *ok)
{
	KxId r = kx_iadd(p, kx_iadd(p, i, kx_iconst(p, pad)), ineg(p, kx_imul(p, t, dil)));
	KxId c = 0;
	if (stride > 1)
		c = kx_cmp(p, KC_EQ, kx_imod(p, r, stride), kx_iconst(p, 0));
	KxId o = kx_idiv(p, r, stride);
	*ok = band(p, c, in_range(p, o, 0, out));
	return out > 0 ? kx_iclamp(p, o, 0, out - 1) : kx_iconst(p, 0);
}

// The taps of a window's adjoint along one axis, as a reduction variable of
// k: the output positions o whose window reads input position i, with *ok.
// Where the stride s > 1 and the dilation is 1, only the taps t = r mod s +
// j s (r = i + pad >= 0, j < ceil(K / s)) can hit, at o = floor(r / s) - j:
// ceil(K / s) terms where inv_window's form has K, most failing its parity
// test (max_pool's gradient at resnet18's stem: 4 of 9 terms, integer work
// dominated the kernel).  The hits are the same (t, o) pairs in the same
// order of t, so the sum adds the same terms in the same order.
static KxId
inv_taps(Lower *L, KKernel *k, KxId i, int64_t K, int64_t pad, int64_t stride, int64_t dil,
         int64_t out, KxId *ok)
{
	KProgram *p = L->p;
	if (dil != 1 || stride <= 1 || K <= 1 || pad < 0)
		return inv_window(p, i, rvar(L, k, K), pad, stride, dil, out, ok);
	int64_t J = (K + stride - 1) / stride;
	KxId r = kx_iadd(p, i, kx_iconst(p, pad)), j = rvar(L, k, J);
	KxId o = kx_iadd(p, kx_idiv(p, r, stride), ineg(p, j));
	KxId c = 0;
	if (K % stride) // t = r mod s + j s < K
		c = kx_cmp(p, KC_LT, kx_iadd(p, kx_imod(p, r, stride), kx_imul(p, j, stride)), kx_iconst(p, K));
	*ok = band(p, c, in_range(p, o, 0, out));
	return out > 0 ? kx_iclamp(p, o, 0, out - 1) : kx_iconst(p, 0);
}

static KxId
to_f64(KProgram *p, KxId a)
{
	return kx_cast(p, a, DT_F64);
}

static void
finish(Lower *L, KKernel *k, KRed red, KxId body, KxId post_of_acc_or_0)
{
	KProgram *p = L->p;
	KBuf *b = &p->buf[k->out];
	k->body = body;
	k->red = red;
	if (red) {
		k->post = post_of_acc_or_0 ? post_of_acc_or_0 : kx_acc(p, (DType)p->x[body].dtype);
		k->post = kx_cast(p, k->post, b->dtype);
	} else
		k->body = kx_cast(p, body, b->dtype);
	k->nfused = L->nexpand;
}

// ---- convolutions as GEMMs (im2col)
// A large convolution with one group runs as a matrix product, which the
// LLVM backend turns into its blocked GEMM (codegen/llvm_gemm.c, llvm_emit_gemm) and
// the CUDA backend into a cuBLAS call (kir_gemm_plan): the input's windows
// are first copied into a column buffer (im2col: one element per (input
// channel, tap) q = (c, kh, kw) and output position p = (oh, ow), zero
// where the tap falls in the padding), then
//   conv             out[n, co, p]   = sum_q w[co, q] col[n, q, p]           (P >= 16)
//                    outT[n, p, co]  = sum_q colT[n, p, q] wT[q, co]         (P small,
//                                      wide channels: wav2letter), then transposed
//   conv_weight_grad dw[co, q]      = sum_{n, p} g[n, co, p] colT[n, p, q]
//   conv_input_grad  dcol[n, q, p]  = sum_co w[co, q] g[n, co, p]           (P >= 16)
//                    dcolT[n, p, q] = sum_co g[n, co, p] w[co, q]           (P small), then
//                    dx[n, c, ih, iw] = sum over the taps (kh, kw) whose window
//                    reads (ih, iw) of dcol[n, (c, kh, kw), (oh, ow)] (col2im,
//                    as a gather: the tap inverted as in kernel_conv)
// Each product sums in the order of its reduction, as the direct loops do
// (the weight gradient sums over p within n, then over n), so only the
// rounding of the fused multiply-add differs.
//
// The column buffer of the whole batch costs N Q P elements; when that is
// more than the bound (CONV_COL_MAX bytes, or $FADC_CONV_COL_MAX: a testing
// knob, read at each lowering), the work is cut into chunks that each fit,
// and one column buffer (a chunk's size) is reused by every chunk: its
// kernels run in order (one stream on the GPU, one after the other on the
// CPU), so chunk c + 1's im2col overwrites it only after chunk c's product
// has read it, and the memory plan keeps it live from the first chunk's
// write to the last chunk's read.
// - conv and conv_input_grad cut the batch: chunk b holds samples
//   [b n0, b n0 + nb) (n0 = ceil(N / chunks), the last chunk ragged when n0
//   does not divide N), and writes only its own samples of the result
//   (out, or dx through col2im), so each chunk is the unchunked kernels
//   over fewer samples: im2col + GEMM (+ col2im).  When one sample's
//   columns do not fit (deepspeech's second convolution: 303 MB), each
//   sample is cut into tiles of whole output rows, or when one row does
//   not fit (a long 1-d convolution) each row into tiles of columns
//   (conv_tiles); a tile's positions are consecutive, so its product is a
//   GEMM over them (C's leading dimension P).  The input gradient's col2im
//   then gathers from one tile at a time: an input element read by
//   windows of two tiles gets the second's terms added to the first's
//   (col2im).
// - conv_weight_grad cuts the input channels instead: dw sums over the
//   whole batch, so cutting the batch would need per-chunk partial
//   results (chunks x Co x Q more elements: 302 MB for fcn_resnet's head)
//   and a sum, or a GEMM accumulating into dw, which the kernel IR has
//   no form for.  A chunk of channels [cb, cb + cc) is a block of columns
//   of dw, dw[:, cb kh kw ..) = gT . colT_chunk, written in place (C's
//   leading dimension stays Q): every chunk is a plain GEMM (M = Co,
//   N = cc kh kw, K = N P), each dw element sums the same terms in the same
//   order as without chunks.  When one channel over the batch does not
//   fit (deepspeech's first convolution, C = 1), its reduction over
//   (n, p) is cut into the tiles above instead, each a GEMM of all of Q
//   whose partial (one Co x Q buffer) is added to dw in tile order.
// When even one output position's columns (one channel for the weight
// gradient's cut by channels) do not fit, when more than CONV_MAX_CHUNKS
// chunks would be needed, or for small convolutions (below CONV_GEMM_MIN
// multiply-adds), the direct loops of kernel_conv.
#define CONV_GEMM_MIN (1 << 16)
#define CONV_COL_MAX ((int64_t)256 << 20)

// The column bound in bytes: $FADC_CONV_COL_MAX when it is a positive
// integer (tests force chunks at small sizes with it), else CONV_COL_MAX.
static int64_t
conv_col_max(void)
{
	const char *s = getenv("FADC_CONV_COL_MAX");
	if (s && *s) {
		char *end;
		long long v = strtoll(s, &end, 10);
		if (!*end && v > 0)
			return (int64_t)v;
	}
	return CONV_COL_MAX;
}

// At most this many chunks: each is its own kernels (two or three per
// chunk, compiled and launched), so a convolution needing more (a vmapped
// batch of millions, as resnet18's full-size Hessian, whose lowering then
// built millions of kernels before the task-size check could refuse it)
// keeps the direct loops.  fcn_resnet at full size needs 8.
#define CONV_MAX_CHUNKS 64

// a b, saturating at INT64_MAX: the sizes of huge shapes are only compared
// with the bound.
static int64_t
smul(int64_t a, int64_t b)
{
	int64_t r;
	return __builtin_mul_overflow(a, b, &r) ? INT64_MAX : r;
}

// How to cut `total` units of `unit` bytes each into chunks of at most
// `max` bytes: *n0 units per chunk (the last one ragged), returns the
// number of chunks (0: one unit does not fit, or more than
// CONV_MAX_CHUNKS chunks would be needed).
static int64_t
conv_chunks(int64_t total, int64_t unit, int64_t max, int64_t *n0)
{
	int64_t fit = unit > 0 ? max / unit : total;
	if (fit < 1)
		return 0;
	int64_t chunks = (total + fit - 1) / fit;
	if (chunks > CONV_MAX_CHUNKS)
		return 0;
	*n0 = (total + chunks - 1) / chunks;
	return chunks;
}

// A tile of a convolution's output positions: samples [n0, n0 + ns) and,
// of each, output rows [r0, r0 + nr) and columns [w0, w0 + nw), with
// nw = OW or nr = 1, so that its np = nr nw positions are consecutive in
// a sample, from p0 = r0 OW + w0: a GEMM's columns (conv, the input
// gradient) or reduction (the weight gradient) over them is one stride.
typedef struct Tile {
	int64_t n0, ns, r0, nr, w0, nw;
} Tile;

// The tiles of geometry v's output positions whose columns take bp bytes
// a position, each within max bytes: *t their sizes (the last of each
// axis ragged), nb[] how many along samples, rows and columns; returns
// their number (0: none fits, or more than CONV_MAX_CHUNKS).  Whole
// samples when one fits (conv_chunks' cut); else, when `pos`, one sample a
// tile, cut into blocks of whole rows when one row fits, else each row
// into blocks of columns (a 1-d convolution has one row).  Blocks are
// spread evenly: deepspeech's second convolution at full size (41 rows of
// 250 columns, 7,392 x 250 x 4 B = 7.4 MB of columns a row, 303 MB a
// sample) is 2 tiles a sample, of 21 and 20 rows.
static int64_t
conv_tiles(const Geo *v, int64_t bp, int64_t max, int pos, Tile *t, int64_t nb[3])
{
	int64_t row = smul(v->OW, bp), sample = smul(v->OH, row);
	*t = (Tile){0, v->N, 0, v->OH, 0, v->OW};
	nb[0] = nb[1] = nb[2] = 1;
	if (sample <= max)
		return nb[0] = conv_chunks(v->N, sample, max, &t->ns);
	if (!pos || bp > max)
		return 0;
	t->ns = 1;
	nb[0] = v->N;
	if (row <= max) {
		int64_t fit = max / row;
		nb[1] = (v->OH + fit - 1) / fit;
		t->nr = (v->OH + nb[1] - 1) / nb[1];
		nb[1] = (v->OH + t->nr - 1) / t->nr;
	} else {
		int64_t fit = max / bp;
		t->nr = 1;
		nb[1] = v->OH;
		nb[2] = (v->OW + fit - 1) / fit;
		t->nw = (v->OW + nb[2] - 1) / nb[2];
		nb[2] = (v->OW + t->nw - 1) / t->nw;
	}
	int64_t count = smul(smul(nb[0], nb[1]), nb[2]);
	return count <= CONV_MAX_CHUNKS ? count : 0;
}

// Tile i of the tiling (t, nb): samples outermost, then rows, then columns,
// so a sample's tiles are consecutive and its first (r0 = w0 = 0) comes
// first.
static Tile
tile_at(const Geo *v, const Tile *t, const int64_t nb[3], int64_t i)
{
	int64_t wi = i % nb[2], ri = i / nb[2] % nb[1], si = i / (nb[2] * nb[1]);
	Tile c = {si * t->ns, t->ns, ri * t->nr, t->nr, wi * t->nw, t->nw};
	c.ns = c.n0 + c.ns <= v->N ? c.ns : v->N - c.n0;
	c.nr = c.r0 + c.nr <= v->OH ? c.nr : v->OH - c.r0;
	c.nw = c.w0 + c.nw <= v->OW ? c.nw : v->OW - c.w0;
	return c;
}

// i + c, c a constant.
static KxId
iplus(KProgram *p, KxId i, int64_t c)
{
	return kx_iadd(p, i, kx_iconst(p, c));
}

// The column buffer cb of x (N, C, H, W) for geometry v, for tile t's
// samples and positions and input channels [c0, c0 + nc): (ns, Qc, np),
// or transposed (ns, np, Qc), with Qc = nc kh kw (q counted from channel
// c0) and np = nr nw (position (oh, ow) of the tile at (oh - r0) nw +
// ow - w0).
static void
im2col(Lower *L, NodeId n, NodeId x, const Geo *v, int trans, uint32_t cb, const Tile *t,
       int64_t c0, int64_t nc)
{
	KProgram *p = L->p;
	int64_t Qc = nc * v->kh * v->kw, np = t->nr * t->nw;
	KKernel *k = lower_kernel_begin(L, cb, n, trans ? "im2col.t" : "im2col");
	KxId nn = pvar(L, k, t->ns), c, kh, kw, oh, ow;
	if (trans) {
		oh = pvar(L, k, t->nr), ow = pvar(L, k, t->nw);
		c = pvar(L, k, nc), kh = pvar(L, k, v->kh), kw = pvar(L, k, v->kw);
	} else {
		c = pvar(L, k, nc), kh = pvar(L, k, v->kh), kw = pvar(L, k, v->kw);
		oh = pvar(L, k, t->nr), ow = pvar(L, k, t->nw);
	}
	KxId ih = kx_iadd(p, kx_imul(p, iplus(p, oh, t->r0), v->sh),
	                  kx_iadd(p, kx_iconst(p, -v->ph), kx_imul(p, kh, v->dh)));
	KxId iw = kx_iadd(p, kx_imul(p, iplus(p, ow, t->w0), v->sw),
	                  kx_iadd(p, kx_iconst(p, -v->pw), kx_imul(p, kw, v->dw)));
	KxId ok = band(p, in_range(p, ih, 0, v->H), in_range(p, iw, 0, v->W));
	KxId xi = flat4(p, iplus(p, nn, t->n0), iplus(p, c, c0), v->C, kx_iclamp(p, ih, 0, v->H - 1), v->H,
	                kx_iclamp(p, iw, 0, v->W - 1), v->W);
	KxId q = flat4(p, kx_iconst(p, 0), c, nc, kh, v->kh, kw, v->kw);
	KxId pp = kx_iadd(p, kx_imul(p, oh, t->nw), ow);
	k->index = trans ? kx_iadd(p, kx_imul(p, kx_iadd(p, kx_imul(p, nn, np), pp), Qc), q)
	                 : kx_iadd(p, kx_imul(p, kx_iadd(p, kx_imul(p, nn, Qc), q), np), pp);
	finish(L, k, KR_NONE, sel(p, ok, lower_at(L, x, xi), kx_const(p, 0, ctype(L, x))), 0);
}

// col2im of tile t's input-gradient columns db, (ns, Q, np) or, when tp,
// (ns, np, Q), into dx (buffer out, (N, C, H, W)):
//   dx[n, c, ih, iw] = sum over the taps (kh, kw) whose window position
//                      (oh, ow) = ((ih + ph - kh dh) / sh, (iw + pw - kw dw) / sw)
//                      exists and lies in the tile of db[n, (c, kh, kw), (oh, ow)],
// as a gather (the tap inverted as in kernel_conv, the tile's first row
// and column r0, w0 folded into the padding: (oh - r0) sh = ih + (ph - r0 sh) - kh dh).
// A tile of whole samples writes them.  A sample cut into tiles of rows or
// columns has taps reaching an input element from several tiles: the
// sample's first tile (r0 = w0 = 0) writes all of dx[n] (zero where none of
// its taps reaches), each later one adds its taps' sum to the input box its
// windows read, dx = dx + sum, the element read and written by the point
// that owns it (no atomics).  Tiles run in order, so each element is the
// same sum in the same order for any number of threads.
static void
col2im(Lower *L, uint32_t out, NodeId n, uint32_t db, const Geo *v, const Tile *t, int tp)
{
	KProgram *p = L->p;
	DType dt = ctype(L, n);
	int64_t Q = v->C * v->kh * v->kw, np = t->nr * t->nw;
	int first = t->r0 == 0 && t->w0 == 0;
	// The box of inputs the tile's windows read: rows from r0 sh - ph to
	// (r0 + nr - 1) sh - ph + (kh - 1) dh, columns likewise; all of the
	// sample for its first tile.
	int64_t h0 = 0, h1 = v->H, w0 = 0, w1 = v->W;
	if (!first) {
		int64_t a = t->r0 * v->sh - v->ph, b = (t->r0 + t->nr - 1) * v->sh - v->ph + (v->kh - 1) * v->dh + 1;
		h0 = a > 0 ? a : 0, h1 = b < v->H ? b : v->H;
		a = t->w0 * v->sw - v->pw, b = (t->w0 + t->nw - 1) * v->sw - v->pw + (v->kw - 1) * v->dw + 1;
		w0 = a > 0 ? a : 0, w1 = b < v->W ? b : v->W;
		if (h0 >= h1 || w0 >= w1)
			return; // every window of the tile lies in the padding
	}
	KKernel *k = lower_kernel_begin(L, out, n, first ? "col2im" : "col2im.add");
	KxId nn = pvar(L, k, t->ns), c = pvar(L, k, v->C);
	KxId ih = iplus(p, pvar(L, k, h1 - h0), h0), iw = iplus(p, pvar(L, k, w1 - w0), w0);
	KxId kh = rvar(L, k, v->kh), kw = rvar(L, k, v->kw), okh, okw;
	KxId oh = inv_window(p, ih, kh, v->ph - t->r0 * v->sh, v->sh, v->dh, t->nr, &okh);
	KxId ow = inv_window(p, iw, kw, v->pw - t->w0 * v->sw, v->sw, v->dw, t->nw, &okw);
	KxId qq = flat4(p, kx_iconst(p, 0), c, v->C, kh, v->kh, kw, v->kw);
	KxId po = kx_iadd(p, kx_imul(p, oh, t->nw), ow);
	KxId di = tp ? kx_iadd(p, kx_imul(p, kx_iadd(p, kx_imul(p, nn, np), po), Q), qq)
	             : kx_iadd(p, kx_imul(p, kx_iadd(p, kx_imul(p, nn, Q), qq), np), po);
	k->index = flat4(p, iplus(p, nn, t->n0), c, v->C, ih, v->H, iw, v->W);
	KxId post = first ? 0 : kx_bin(p, KX_ADD, kx_acc(p, dt), kx_load(p, out, k->index));
	finish(L, k, KR_SUM, sel(p, band(p, okh, okw), kx_load(p, db, di), kx_const(p, 0, dt)), post);
}

// A column buffer (a, b, c) of x's compute dtype.
static uint32_t
col_buf(Lower *L, NodeId n, NodeId x, int64_t a, int64_t b, int64_t c)
{
	Shape cs = {.rank = 3, .dim = {a, b, c}};
	return kir_buf_add(L->p, KB_TMP, 0, ctype(L, x), &cs, n);
}

// A contraction kernel writing buf out (of n's dtype), body a product.
static void
gemm_finish(Lower *L, KKernel *k, KxId idx, KxId a, KxId b)
{
	k->index = idx;
	k->contraction = 1;
	finish(L, k, KR_SUM, kx_bin(L->p, KX_MUL, a, b), 0);
}

// The geometry of convolution n (conv, conv_input_grad or
// conv_weight_grad) in conv's terms: x the image, o conv's output, the
// kernel's window; *co conv's output channels.  conv(x, w): x, o from
// the operand and n, the window from w; conv_input_grad(g, w): x is n's
// result, o the gradient g; conv_weight_grad(x, g): the window from the
// `kernel` attribute, C_out from g.
static Geo
conv_geo(Lower *L, NodeId n, const Attrs *a, int64_t *co)
{
	const Graph *g = L->g;
	int op = g->node[n].op;
	NodeId i0 = ir_in1(g, n, 0), i1 = ir_in1(g, n, 1);
	const Shape *os = ir_shape(g, n);
	const int64_t *st = attr_ints(L, n, a, "stride"), *pd = attr_ints(L, n, a, "padding"),
	              *dl = attr_ints(L, n, a, "dilation");
	if (op == OP_conv) {
		*co = ir_shape(g, i1)->dim[0];
		return geo(ir_shape(g, i0), os, ir_shape(g, i1)->dim + 2, st, pd, dl);
	}
	if (op == OP_conv_input_grad) {
		*co = ir_shape(g, i0)->dim[1];
		return geo(os, ir_shape(g, i0), ir_shape(g, i1)->dim + 2, st, pd, dl);
	}
	*co = ir_shape(g, i1)->dim[1];
	return geo(ir_shape(g, i0), ir_shape(g, i1), attr_ints(L, n, a, "kernel"), st, pd, dl);
}

static int
conv_gemm_lower(Lower *L, uint32_t out, NodeId n, const Attrs *a)
{
	const Graph *g = L->g;
	KProgram *p = L->p;
	int op = g->node[n].op;
	if (a->a[aidx(L, n, "groups")].i != 1)
		return 0;
	NodeId i0 = ir_in1(g, n, 0), i1 = ir_in1(g, n, 1);
	int64_t Co;
	Geo v = conv_geo(L, n, a, &Co);
	int64_t Q = v.C * v.kh * v.kw, P = v.OH * v.OW, K2 = v.kh * v.kw;
	int64_t esize = (int64_t)kir_dtype_size(ctype(L, n)), colmax = conv_col_max();
	if (v.N * Co * Q * P < CONV_GEMM_MIN || (Q < 16 && op != OP_conv))
		return 0;
	// A 1 x 1 convolution of stride 1 without padding is a product as it
	// stands: its columns are x itself (col[n, c, p] = x[n, c, p]) and its
	// input gradient's columns are dx (dcol[n, c, p] = dx[n, c, p]), so
	// neither im2col nor col2im runs and no column buffer (nor chunk) is
	// needed: two thirds of a ResNet-50's convolutions (detr, fcn_resnet).
	// conv only when x is stored (a GEMM's operands are loads); the weight
	// gradient still needs x transposed (below).
	int pointwise = v.kh == 1 && v.kw == 1 && v.sh == 1 && v.sw == 1 && v.ph == 0 && v.pw == 0 &&
	                P >= 16;
	int direct = pointwise && (op == OP_conv_input_grad || (op == OP_conv && L->buf[i0] != NOBUF));
	// Chunks: tiles of output positions (conv_tiles: samples, else rows or
	// columns of one sample; Q elements a position), or for the weight
	// gradient of input channels (N P kh kw elements each), else tiles of
	// its reduction over (n, p).
	Tile t = {0, v.N, 0, v.OH, 0, v.OW};
	int64_t u0 = v.N, chunks = 1, nb[3] = {1, 1, 1};
	int wred = 0; // the weight gradient over tiles of its reduction
	if (!direct && op == OP_conv_weight_grad) {
		chunks = conv_chunks(v.C, smul(smul(v.N, P), K2 * esize), colmax, &u0);
		if (!chunks)
			wred = 1, chunks = conv_tiles(&v, smul(Q, esize), colmax, 1, &t, nb);
	} else if (!direct)
		chunks = conv_tiles(&v, smul(Q, esize), colmax, P >= 16, &t, nb);
	if (!chunks)
		return 0;
	DType dt = ctype(L, n);
	if (op == OP_conv && P >= 16) {
		uint32_t cb = direct ? 0 : col_buf(L, n, i0, t.ns, Q, t.nr * t.nw);
		for (int64_t ch = 0; ch < chunks; ch++) {
			Tile c = tile_at(&v, &t, nb, ch);
			int64_t np = c.nr * c.nw, p0 = c.r0 * v.OW + c.w0;
			if (!direct)
				im2col(L, n, i0, &v, 0, cb, &c, 0, v.C);
			KKernel *k = lower_kernel_begin(L, out, n, "conv.gemm");
			KxId nn = pvar(L, k, c.ns), co = pvar(L, k, Co), pp = pvar(L, k, np), q = rvar(L, k, Q);
			KxId wi = kx_iadd(p, kx_imul(p, co, Q), q);
			KxId ci = kx_iadd(p, kx_imul(p, kx_iadd(p, kx_imul(p, nn, Q), q), np), pp);
			KxId oi = iplus(p, kx_iadd(p, kx_imul(p, kx_iadd(p, kx_imul(p, iplus(p, nn, c.n0), Co), co), P), pp), p0);
			gemm_finish(L, k, oi, lower_at(L, i1, wi), direct ? lower_at(L, i0, ci) : kx_load(p, cb, ci));
		}
		return 1;
	}
	if (op == OP_conv) { // P < 16: tiles of whole samples (conv_tiles without pos)
		if (Co < 16)
			return 0;
		uint32_t cb = col_buf(L, n, i0, t.ns, P, Q);
		Shape ws = {.rank = 2, .dim = {Q, Co}};
		uint32_t wt = kir_buf_add(p, KB_TMP, 0, dt, &ws, n);
		// wT in tiles of bc x bq (divisors of Co and Q): a plain
		// transposing loop would read w with a stride of Q elements,
		// a cache and TLB miss per value for wide layers; a tile reads a
		// few rows of w over and over.
		int64_t bc = 1, bq = 1;
		for (int64_t b = 16; b >= 2 && bc == 1; b--)
			bc = Co % b == 0 ? b : 1;
		for (int64_t b = 16; b >= 2 && bq == 1; b--)
			bq = Q % b == 0 ? b : 1;
		KKernel *k = lower_kernel_begin(L, wt, n, "conv.wt");
		KxId cob = pvar(L, k, Co / bc), qb = pvar(L, k, Q / bq), qi = pvar(L, k, bq), coi = pvar(L, k, bc);
		KxId q = kx_iadd(p, kx_imul(p, qb, bq), qi), co = kx_iadd(p, kx_imul(p, cob, bc), coi);
		k->index = kx_iadd(p, kx_imul(p, q, Co), co);
		finish(L, k, KR_NONE, lower_at(L, i1, kx_iadd(p, kx_imul(p, co, Q), q)), 0);
		Shape ts = {.rank = 3, .dim = {v.N, P, Co}};
		uint32_t ot = kir_buf_add(p, KB_TMP, 0, dt, &ts, n);
		for (int64_t ch = 0; ch < chunks; ch++) {
			Tile c = tile_at(&v, &t, nb, ch);
			im2col(L, n, i0, &v, 1, cb, &c, 0, v.C);
			k = lower_kernel_begin(L, ot, n, "conv.gemm.t");
			KxId nn = pvar(L, k, c.ns), pp = pvar(L, k, P);
			co = pvar(L, k, Co);
			q = rvar(L, k, Q);
			KxId ci = kx_iadd(p, kx_imul(p, kx_iadd(p, kx_imul(p, nn, P), pp), Q), q);
			KxId oi = kx_iadd(p, kx_imul(p, kx_iadd(p, kx_imul(p, iplus(p, nn, c.n0), P), pp), Co), co);
			gemm_finish(L, k, oi, kx_load(p, cb, ci), kx_load(p, wt, kx_iadd(p, kx_imul(p, q, Co), co)));
		}
		k = lower_kernel_begin(L, out, n, "conv.out");
		KxId nn = pvar(L, k, v.N);
		co = pvar(L, k, Co);
		KxId pp = pvar(L, k, P);
		k->index = kx_iadd(p, kx_imul(p, kx_iadd(p, kx_imul(p, nn, Co), co), P), pp);
		finish(L, k, KR_NONE,
		       kx_load(p, ot, kx_iadd(p, kx_imul(p, kx_iadd(p, kx_imul(p, nn, P), pp), Co), co)), 0);
		return 1;
	}
	if (op == OP_conv_weight_grad) { // x, g -> (Co, C, kh, kw) = (Co, Q)
		// g[n, co, p] steps by Co P along n but by 1 along p, so (n, p)
		// is no single reduction axis of g; gT[co, n, p] steps by P and
		// 1, as colT[n, p, q] does by P Q and Q: both merge into
		// r = n P + p, and the product is one GEMM
		// dw (Co x Q) = gT (Co x N P) . colT (N P x Q) (kir_gemm_plan).
		// gT is g's size, made when that is at most the column bound
		// (else g is read in place: a sum of N GEMMs, a printed kernel
		// on the GPU).  With N = 1, g is gT already, unless g is an
		// expression fused into its reader (a GEMM's operands must be
		// loads).
		uint32_t gb = 0;
		int64_t gbytes = smul(smul(v.N, Co), smul(P, esize));
		if ((v.N > 1 || L->buf[i1] == NOBUF) && gbytes <= colmax) {
			Shape ts = {.rank = 3, .dim = {Co, v.N, P}};
			gb = kir_buf_add(p, KB_TMP, 0, dt, &ts, n);
			KKernel *k = lower_kernel_begin(L, gb, n, "conv_weight_grad.gt");
			KxId co = pvar(L, k, Co), nn = pvar(L, k, v.N), pp = pvar(L, k, P);
			k->index = kx_iadd(p, kx_imul(p, kx_iadd(p, kx_imul(p, co, v.N), nn), P), pp);
			finish(L, k, KR_NONE, lower_at(L, i1, kx_iadd(p, kx_imul(p, kx_iadd(p, kx_imul(p, nn, Co), co), P), pp)), 0);
		}
		if (wred) {
			// Not one channel of the whole batch fits (deepspeech's
			// first convolution, 1 -> 32 channels k(41, 11): 365 MB
			// of columns at N = 10): the reduction over (n, p) is cut
			// into tiles of positions, each with all of Q.  Tile 0's
			// product writes dw, each later one a partial
			// pw[co, q] = sum over its (n, p) of gT[co, n, p]
			// colT[n, p, q] that a second kernel adds, dw = dw + pw:
			// dw is the sum of the tiles' partials in tile order, for
			// any number of threads (no product splits its
			// reduction across threads).  pw is dw's size, Co Q
			// elements, beside a tile's columns of up to the bound.
			uint32_t cb = col_buf(L, n, i0, t.ns, t.nr * t.nw, Q), pb = 0;
			if (chunks > 1) {
				Shape ps = {.rank = 2, .dim = {Co, Q}};
				pb = kir_buf_add(p, KB_TMP, 0, dt, &ps, n);
			}
			for (int64_t ch = 0; ch < chunks; ch++) {
				Tile c = tile_at(&v, &t, nb, ch);
				int64_t np = c.nr * c.nw, p0 = c.r0 * v.OW + c.w0;
				im2col(L, n, i0, &v, 1, cb, &c, 0, v.C);
				KKernel *k = lower_kernel_begin(L, ch ? pb : out, n, "conv_weight_grad.gemm");
				KxId co = pvar(L, k, Co), q = pvar(L, k, Q), nn = rvar(L, k, c.ns), pp = rvar(L, k, np);
				KxId ci = kx_iadd(p, kx_imul(p, kx_iadd(p, kx_imul(p, nn, np), pp), Q), q);
				KxId ga = gb ? kx_load(p, gb, iplus(p, kx_iadd(p, kx_imul(p, kx_iadd(p, kx_imul(p, co, v.N), iplus(p, nn, c.n0)), P), pp), p0))
				             : lower_at(L, i1, iplus(p, kx_iadd(p, kx_imul(p, kx_iadd(p, kx_imul(p, iplus(p, nn, c.n0), Co), co), P), pp), p0));
				KxId wi = kx_iadd(p, kx_imul(p, co, Q), q);
				gemm_finish(L, k, wi, ga, kx_load(p, cb, ci));
				if (!ch)
					continue;
				k = lower_kernel_begin(L, out, n, "conv_weight_grad.add");
				co = pvar(L, k, Co), q = pvar(L, k, Q);
				k->index = wi = kx_iadd(p, kx_imul(p, co, Q), q);
				finish(L, k, KR_NONE, kx_bin(p, KX_ADD, kx_load(p, out, wi), kx_load(p, pb, wi)), 0);
			}
			return 1;
		}
		uint32_t cb = col_buf(L, n, i0, v.N, P, u0 * K2);
		for (int64_t ch = 0, c0 = 0; ch < chunks; ch++, c0 += u0) {
			int64_t nc = c0 + u0 <= v.C ? u0 : v.C - c0, Qc = nc * K2;
			im2col(L, n, i0, &v, 1, cb, &t, c0, nc);
			KKernel *k = lower_kernel_begin(L, out, n, "conv_weight_grad.gemm");
			KxId co = pvar(L, k, Co), q = pvar(L, k, Qc), nn = rvar(L, k, v.N), pp = rvar(L, k, P);
			KxId ci = kx_iadd(p, kx_imul(p, kx_iadd(p, kx_imul(p, nn, P), pp), Qc), q);
			KxId ga = gb ? kx_load(p, gb, kx_iadd(p, kx_imul(p, kx_iadd(p, kx_imul(p, co, v.N), nn), P), pp))
			             : lower_at(L, i1, kx_iadd(p, kx_imul(p, kx_iadd(p, kx_imul(p, nn, Co), co), P), pp));
			gemm_finish(L, k, kx_iadd(p, kx_imul(p, co, Q), iplus(p, q, c0 * K2)), ga, kx_load(p, cb, ci));
		}
		return 1;
	}
	// conv_input_grad: g, w -> (N, C, H, W).  The product is dcol[n, q, p]
	// = sum_co w[co, q] g[n, co, p] (rows q, columns p: g is read along
	// its rows, w transposed), so that col2im reads dcol along p, which
	// consecutive iw step through (contiguous for stride 1; on the GPU,
	// coalesced).  With fewer than 16 positions (too few columns for the
	// GEMM's tiles) it is dcolT[n, p, q] = sum_co g[n, co, p] w[co, q]
	// instead, rows p and columns q (tiles of whole samples only).  Either
	// way each element sums over co in order: the same values.  A tile of
	// rows or columns of a sample is the product over its positions (g's
	// columns p0 .. p0 + np, C's leading dimension np) and its col2im.
	// A direct (pointwise) one writes dx itself: dcol is dx.
	int tp = P < 16;
	int64_t tnp = t.nr * t.nw;
	Shape ds = {.rank = 3, .dim = {t.ns, tp ? tnp : Q, tp ? Q : tnp}};
	uint32_t db = direct ? out : kir_buf_add(p, KB_TMP, 0, dt, &ds, n);
	for (int64_t ch = 0; ch < chunks; ch++) {
		Tile c = tile_at(&v, &t, nb, ch);
		int64_t np = c.nr * c.nw, p0 = c.r0 * v.OW + c.w0;
		KKernel *k = lower_kernel_begin(L, db, n, "conv_input_grad.gemm");
		KxId nn = pvar(L, k, c.ns), pp, q;
		if (tp)
			pp = pvar(L, k, np), q = pvar(L, k, Q);
		else
			q = pvar(L, k, Q), pp = pvar(L, k, np);
		KxId co = rvar(L, k, Co);
		KxId gi = iplus(p, kx_iadd(p, kx_imul(p, kx_iadd(p, kx_imul(p, iplus(p, nn, c.n0), Co), co), P), pp), p0);
		KxId di = tp ? kx_iadd(p, kx_imul(p, kx_iadd(p, kx_imul(p, nn, np), pp), Q), q)
		             : kx_iadd(p, kx_imul(p, kx_iadd(p, kx_imul(p, nn, Q), q), np), pp);
		gemm_finish(L, k, di, lower_at(L, i0, gi), lower_at(L, i1, kx_iadd(p, kx_imul(p, co, Q), q)));
		if (direct)
			break; // one chunk (n0 = 0): di is dx's own index
		col2im(L, out, n, db, &v, &c, tp);
	}
	return 1;
}

// The buffer holding x's elements densely from element 0, in x's own
// flat order, or NOBUF: x's own buffer, else, through reshapes (which keep
// the flat order: lower_reshape reads x[e] at e), the buffer of the value
// reshaped.  A vjp hands a convolution its incoming gradient as a reshape
// of a stored value (the batch norm's backward, (N, C, H W) back to
// (N, C, H, W)); that value's buffer is the dense NCHW tensor cuDNN reads.
static uint32_t
conv_stored(Lower *L, NodeId x)
{
	const Graph *g = L->g;
	while (L->buf[x] == NOBUF && g->node[x].op == OP_reshape)
		x = ir_in1(g, x, 0);
	return L->buf[x] == NOBUF || L->off[x] ? NOBUF : L->buf[x];
}

// Notes that kernels k0 .. of p are convolution n (KKernel.conv, KConv), so
// that the CUDA backend can offer cuDNN in their place: only an f32 one
// whose operands and result are whole stored buffers (a cuDNN call reads
// dense tensors from element 0; an operand fused into its reader, or a
// view at an offset, is no tensor it can take).
static void
conv_note(Lower *L, uint32_t out, NodeId n, const Attrs *a, uint32_t k0)
{
	const Graph *g = L->g;
	KProgram *p = L->p;
	int op = g->node[n].op;
	uint32_t b0 = conv_stored(L, ir_in1(g, n, 0)), b1 = conv_stored(L, ir_in1(g, n, 1));
	if (b0 == NOBUF || b1 == NOBUF || ctype(L, n) != DT_F32)
		return;
	uint32_t bufs[3] = {out, b0, b1};
	for (int i = 0; i < 3; i++)
		if (p->buf[bufs[i]].dtype != DT_F32)
			return;
	int64_t Co;
	Geo v = conv_geo(L, n, a, &Co);
	arena_grow(p->arena, (void **)&p->conv, &p->cconv, p->nconv + 1, sizeof *p->conv);
	p->conv[p->nconv] = (KConv){
	    .op = op == OP_conv ? 0 : op == OP_conv_input_grad ? 1 : 2,
	    .n = v.N, .c = v.C, .h = v.H, .w = v.W, .k = Co, .r = v.kh, .s = v.kw,
	    .oh = v.OH, .ow = v.OW, .sh = v.sh, .sw = v.sw, .ph = v.ph, .pw = v.pw,
	    .dh = v.dh, .dw = v.dw, .groups = a->a[aidx(L, n, "groups")].i,
	    .out = out, .a = b0, .b = b1};
	p->nconv++;
	for (uint32_t ki = k0; ki < p->nk; ki++)
		p->k[ki].conv = p->nconv;
}

// A convolution as im2col + GEMM (conv_gemm_lower), its kernels noted as
// one convolution (conv_note); 0 when it keeps the direct loops.
static int
conv_gemm(Lower *L, uint32_t out, NodeId n, const Attrs *a)
{
	uint32_t k0 = L->p->nk;
	if (!conv_gemm_lower(L, out, n, a))
		return 0;
	conv_note(L, out, n, a, k0);
	return 1;
}

static void
kernel_conv(Lower *L, uint32_t out, NodeId n, const Attrs *a)
{
	const Graph *g = L->g;
	KProgram *p = L->p;
	int op = g->node[n].op;
	if (conv_gemm(L, out, n, a))
		return;
	NodeId i0 = ir_in1(g, n, 0), i1 = ir_in1(g, n, 1);
	const Shape *os = ir_shape(g, n);
	int64_t groups = a->a[aidx(L, n, "groups")].i;
	const int64_t *st = attr_ints(L, n, a, "stride"), *pd = attr_ints(L, n, a, "padding"),
	              *dl = attr_ints(L, n, a, "dilation");
	uint32_t k0 = p->nk;
	KKernel *k = lower_kernel_begin(L, out, n, ir_op(op)->name);
	DType dt = ctype(L, n);
	KxId z = kx_const(p, 0, dt), body, ok;
	if (op == OP_conv) { // x, w -> (N, Co, OH, OW)
		const Shape *xs = ir_shape(g, i0), *ws = ir_shape(g, i1);
		Geo v = geo(xs, os, ws->dim + 2, st, pd, dl);
		int64_t Co = ws->dim[0], Cg = v.C / groups, Cog = Co / groups;
		KxId nn = pvar(L, k, v.N), co = pvar(L, k, Co), oh = pvar(L, k, v.OH), ow = pvar(L, k, v.OW);
		KxId ci = rvar(L, k, Cg), kh = rvar(L, k, v.kh), kw = rvar(L, k, v.kw);
		KxId ih = kx_iadd(p, kx_imul(p, oh, v.sh), kx_iadd(p, kx_iconst(p, -v.ph), kx_imul(p, kh, v.dh)));
		KxId iw = kx_iadd(p, kx_imul(p, ow, v.sw), kx_iadd(p, kx_iconst(p, -v.pw), kx_imul(p, kw, v.dw)));
		ok = band(p, in_range(p, ih, 0, v.H), in_range(p, iw, 0, v.W));
		KxId c = kx_iadd(p, kx_imul(p, kx_idiv(p, co, Cog), Cg), ci);
		KxId xi = flat4(p, nn, c, v.C, kx_iclamp(p, ih, 0, v.H - 1), v.H, kx_iclamp(p, iw, 0, v.W - 1), v.W);
		KxId wi = flat4(p, co, ci, Cg, kh, v.kh, kw, v.kw);
		k->index = flat4(p, nn, co, Co, oh, v.OH, ow, v.OW);
		body = sel(p, ok, kx_bin(p, KX_MUL, lower_at(L, i0, xi), lower_at(L, i1, wi)), z);
	} else if (op == OP_conv_input_grad) { // g, w -> x-shaped (N, C, H, W)
		const Shape *gs = ir_shape(g, i0), *ws = ir_shape(g, i1);
		Geo v = geo(os, gs, ws->dim + 2, st, pd, dl);
		int64_t Co = gs->dim[1], Cg = v.C / groups, Cog = Co / groups;
		KxId nn = pvar(L, k, v.N), c = pvar(L, k, v.C), ih = pvar(L, k, v.H), iw = pvar(L, k, v.W);
		KxId j = rvar(L, k, Cog), kh = rvar(L, k, v.kh), kw = rvar(L, k, v.kw);
		KxId okh, okw;
		KxId oh = inv_window(p, ih, kh, v.ph, v.sh, v.dh, v.OH, &okh);
		KxId ow = inv_window(p, iw, kw, v.pw, v.sw, v.dw, v.OW, &okw);
		ok = band(p, okh, okw);
		KxId co = kx_iadd(p, kx_imul(p, kx_idiv(p, c, Cg), Cog), j), ci = kx_imod(p, c, Cg);
		KxId gi = flat4(p, nn, co, Co, oh, v.OH, ow, v.OW);
		KxId wi = flat4(p, co, ci, Cg, kh, v.kh, kw, v.kw);
		k->index = flat4(p, nn, c, v.C, ih, v.H, iw, v.W);
		body = sel(p, ok, kx_bin(p, KX_MUL, lower_at(L, i0, gi), lower_at(L, i1, wi)), z);
	} else { // conv_weight_grad: x, g -> (Co, Cg, kh, kw)
		const Shape *xs = ir_shape(g, i0), *gs = ir_shape(g, i1);
		Geo v = geo(xs, gs, attr_ints(L, n, a, "kernel"), st, pd, dl);
		int64_t Co = gs->dim[1], Cg = v.C / groups, Cog = Co / groups;
		KxId co = pvar(L, k, Co), ci = pvar(L, k, Cg), kh = pvar(L, k, v.kh), kw = pvar(L, k, v.kw);
		KxId nn = rvar(L, k, v.N), oh = rvar(L, k, v.OH), ow = rvar(L, k, v.OW);
		KxId ih = kx_iadd(p, kx_imul(p, oh, v.sh), kx_iadd(p, kx_iconst(p, -v.ph), kx_imul(p, kh, v.dh)));
		KxId iw = kx_iadd(p, kx_imul(p, ow, v.sw), kx_iadd(p, kx_iconst(p, -v.pw), kx_imul(p, kw, v.dw)));
		ok = band(p, in_range(p, ih, 0, v.H), in_range(p, iw, 0, v.W));
		KxId c = kx_iadd(p, kx_imul(p, kx_idiv(p, co, Cog), Cg), ci);
		KxId xi = flat4(p, nn, c, v.C, kx_iclamp(p, ih, 0, v.H - 1), v.H, kx_iclamp(p, iw, 0, v.W - 1), v.W);
		KxId gi = flat4(p, nn, co, Co, oh, v.OH, ow, v.OW);
		k->index = flat4(p, co, ci, Cg, kh, v.kh, kw, v.kw);
		body = sel(p, ok, kx_bin(p, KX_MUL, lower_at(L, i1, gi), lower_at(L, i0, xi)), z);
	}
	finish(L, k, KR_SUM, body, 0);
	// The direct loops are a cuDNN candidate too (groups 1 only, as
	// conv_gemm's): a convolution whose columns exceed the bound even
	// for one output position's tile (or $FADC_CONV_COL_MAX=1, as
	// tests force) keeps them, and one direct kernel of a reduction
	// over C kh kw per output point is far from cuDNN's implicit GEMM
	// (deepspeech's second convolution's input gradient as direct
	// loops, before its tiles: 20 ms on an H200).
	if (groups == 1)
		conv_note(L, out, n, a, k0);
}

// A count (I64) as a float of the compute dtype dt.
static KxId
ifloat(KProgram *p, KxId a, DType dt)
{
	return kx_cast(p, a, dt == DT_F64 ? DT_F64 : DT_F32);
}

// avg_pool's divisor for window (oh, ow): kh kw, or the in-bounds count
// min(o s - p + k, L) - max(o s - p, 0) per axis.
static KxId
avg_divisor(KProgram *p, const Geo *v, KxId oh, KxId ow, int incl, DType dt)
{
	if (incl)
		return kx_const(p, (double)(v->kh * v->kw), dt);
	KxId c[2];
	for (int ax = 0; ax < 2; ax++) {
		KxId o = ax ? ow : oh;
		int64_t s = ax ? v->sw : v->sh, pd = ax ? v->pw : v->ph, k = ax ? v->kw : v->kh;
		int64_t len = ax ? v->W : v->H;
		KxId b = kx_iadd(p, kx_imul(p, o, s), kx_iconst(p, -pd));
		KxId e = kx_imin(p, kx_iadd(p, b, kx_iconst(p, k)), kx_iconst(p, len));
		c[ax] = kx_iadd(p, e, ineg(p, kx_imax(p, b, kx_iconst(p, 0))));
	}
	return kx_bin(p, KX_MUL, ifloat(p, c[0], dt), ifloat(p, c[1], dt));
}

// Adaptive pooling's window of output o: [floor(o L / O), ceil((o + 1) L / O)).
static void
adaptive_bounds(KProgram *p, KxId o, int64_t len, int64_t outn, KxId *s, KxId *e)
{
	*s = kx_idiv(p, kx_imul(p, o, len), outn);
	*e = kx_idiv(p, kx_iadd(p, kx_imul(p, o, len), kx_iconst(p, len + outn - 1)), outn);
}

// The widest window, in O(1) (a loop over the outputs took minutes for
// size=[10^10] and overflowed o L): with o L = k O + a, 0 <= a < O,
//     ceil((o + 1) L / O) - floor(o L / O) = ceil((a + L) / O),
// and a = o L mod O takes every multiple of g = gcd(L, O) below O, so the
// widest is ceil((L + O - g) / O) = 1 + ceil((L - g) / O), written so that
// nothing overflows.
static int64_t
adaptive_max(int64_t len, int64_t outn)
{
	int64_t g = len, b = outn;
	while (b) {
		int64_t t = g % b;
		g = b;
		b = t;
	}
	int64_t m = 1 + (len - g) / outn + ((len - g) % outn != 0);
	return m > 1 ? m : 1;
}

static KxId
adaptive_count(KProgram *p, KxId h0, KxId h1, KxId w0, KxId w1, DType dt)
{
	return kx_bin(p, KX_MUL, ifloat(p, kx_iadd(p, h1, ineg(p, h0)), dt),
	              ifloat(p, kx_iadd(p, w1, ineg(p, w0)), dt));
}

// ir_bilinear_src (ir/interp.c) in F64: the source coordinate of output dst,
// its neighbours i0, i1 and the weight l of i1.
static int64_t bilinear_i0(int64_t dst, int64_t in, int64_t outn, int align);

// The first neighbour i0 of output dst in integer arithmetic into *i0
// (1), or 0 where it would not equal the interpreter's f64 one.  Exactly, the source is
// ((2 dst + 1) in - outn) / (2 outn), clamped at 0 (align_corners: dst (in -
// 1) / (outn - 1)), so i0 = min(max(floor of that, 0), in - 1); the f64
// source can round across an integer where the exact one sits on it, so
// the formula is used only where it gives the interpreter's i0 for every
// output, checked here (O(outn) host work, up to BILINEAR_INT_MAX).  Why:
// built on an integer i0, the indices have bounds (kx_range), so the CUDA
// printer computes them in int (codegen/cuda.c, narrow), the channels-last
// load indices included; on the f64 source's truncation they were long
// long, and each load's 64-bit divisions by the plane sizes made
// fcn_resnet's 8x upsampling (38.7 M outputs) 838 us on an H200 and its
// adjoint 713 us (docs/PERFORMANCE.md, "fcn_resnet, detr and the
// transformer against torch.compile").  The values are the same, so the
// kernels' results are bit-identical.
#define BILINEAR_INT_MAX ((int64_t)1 << 22)

static int
bilinear_i0_int(KProgram *p, KxId dst, int64_t in, int64_t outn, int align, KxId *i0)
{
	if (in < 1 || outn < 1 || outn > BILINEAR_INT_MAX || in > BILINEAR_INT_MAX)
		return 0;
	for (int64_t o = 0; o < outn; o++) {
		int64_t num = align ? o * (in - 1) : (2 * o + 1) * in - outn;
		int64_t den = align ? (outn > 1 ? outn - 1 : 1) : 2 * outn;
		int64_t i = align && outn == 1 ? 0 : num < 0 ? 0 : num / den;
		if ((i < in - 1 ? i : in - 1) != bilinear_i0(o, in, outn, align))
			return 0;
	}
	KxId i;
	if (align)
		i = outn > 1 ? kx_idiv(p, kx_imul(p, dst, in - 1), outn - 1) : kx_iconst(p, 0);
	else
		i = kx_imax(p, kx_idiv(p, kx_iadd(p, kx_imul(p, dst, 2 * in), kx_iconst(p, in - outn)),
		                       2 * outn),
		            kx_iconst(p, 0));
	*i0 = kx_imin(p, i, kx_iconst(p, in - 1));
	return 1;
}

static void
bilinear_src(KProgram *p, KxId dst, int64_t in, int64_t outn, int align, KxId *i0, KxId *i1, KxId *l)
{
	KxId d = to_f64(p, dst), src;
	if (align)
		src = outn > 1 ? kx_bin(p, KX_DIV, kx_bin(p, KX_MUL, d, kx_const(p, (double)(in - 1), DT_F64)),
		                        kx_const(p, (double)(outn - 1), DT_F64))
		               : kx_const(p, 0, DT_F64);
	else {
		src = kx_bin(p, KX_SUB,
		             kx_bin(p, KX_MUL, kx_bin(p, KX_ADD, d, kx_const(p, 0.5, DT_F64)),
		                    kx_const(p, (double)in / (double)outn, DT_F64)),
		             kx_const(p, 0.5, DT_F64));
		KxId z = kx_const(p, 0, DT_F64);
		src = kx_select(p, kx_cmp(p, KC_LT, src, z), z, src);
	}
	if (!bilinear_i0_int(p, dst, in, outn, align, i0))
		*i0 = kx_imin(p, kx_cast(p, src, DT_I64), kx_iconst(p, in - 1));
	*i1 = kx_imin(p, kx_iadd(p, *i0, kx_iconst(p, 1)), kx_iconst(p, in - 1));
	*l = kx_bin(p, KX_SUB, src, to_f64(p, *i0));
}

// The first neighbour that output dst reads, the interpreter's own.
static int64_t
bilinear_i0(int64_t dst, int64_t in, int64_t outn, int align)
{
	int64_t i0, i1;
	double l;
	ir_bilinear_src(dst, in, outn, align, &i0, &i1, &l);
	return i0;
}

// The inverse window of bilinear upsampling along one axis (in -> outn):
// output o reads inputs i0(o) and i1(o) = min(i0(o) + 1, in - 1), and
// i0 is non-decreasing in o, so the outputs reading input i are those with
// i0(o) in {i - 1, i}: one run of consecutive o.  Its start is bounded
// below by an integer formula, s(i) = clamp(min(floor(max(a i + b, 0) / d)
// - 1, (i - 1) outn), 0, outn - 1), the real threshold less one:
//   align_corners=0: i0(o) >= i - 1 iff (o + 1/2) in / outn - 1/2 >= i - 1
//                    iff o >= ((2i - 1) outn - in) / (2 in): a = 2 outn,
//                    b = -outn - in, d = 2 in; except that the source is
//                    clamped at 0, so every o has i0(o) >= 0 and the runs
//                    of i = 0 and 1 start at 0 (the (i - 1) outn term);
//   align_corners=1: iff o (in - 1) / (outn - 1) >= i - 1: a = outn - 1,
//                    b = -(outn - 1), d = in - 1 (in > 1);
// and the run's length by *kc, the largest end(i) + 2 - s(i) over every i
// (one candidate of slack at each end, against a last-bit difference
// between this host computation and the kernel's), found by computing
// every i0(o) here as the interpreter does.  A kernel then tests kc
// candidates s(i) .. s(i) + kc - 1 instead of all outn.  Where the formula
// does not bound a run (in = 1, or a check below fails), s = 0 and
// kc = outn: every output is a candidate, as before.
// That scan is O(in + outn) host work, done only for in + outn <=
// BILINEAR_SCAN_MAX: a larger axis (a legal 10^10 outputs whose gradient
// is fused, not stored) would loop for minutes while compiling.  Beyond
// it, kc is the closed-form bound of the run with the slack: with t(i)
// the real threshold above (s(i) >= floor(t(i)) - 1, clamped) and t'(i)
// the first o with i0(o) > i,
//   align_corners=0: t'(i) = ((2i + 3) outn - in) / (2 in), so
//                    hi + 1 - s <= t' - t + 4 = 2 outn / in + 4 for i >= 2;
//                    for i = 1 (s = 0) hi + 1 <= (5 outn - in) / (2 in) + 2:
//                    kc = ceil(5 outn / (2 in)) + 6 bounds both;
//   align_corners=1: t'(i) = (i + 1) (outn - 1) / (in - 1), so
//                    kc = ceil(2 (outn - 1) / (in - 1)) + 6;
// (+2 for a last-bit difference of the kernel's floating-point source
// index), at most outn.  The kernel computes a i + b in int64: where
// that could overflow, every output is a candidate.
#define BILINEAR_SCAN_MAX ((int64_t)1 << 22)

static void
bilinear_up(int64_t in, int64_t outn, int align, int64_t *a, int64_t *b, int64_t *d, int64_t *kc)
{
	*a = 0, *b = 0, *d = 1, *kc = outn;
	if (in < 2 || outn < 1)
		return;
	if (align)
		*a = outn - 1, *b = -(outn - 1), *d = in - 1;
	else
		*a = 2 * outn, *b = -outn - in, *d = 2 * in;
	if (in + outn > BILINEAR_SCAN_MAX) {
		int64_t ai;
		if (__builtin_mul_overflow(*a, in, &ai) || ai > ((int64_t)1 << 62)) {
			*a = 0, *b = 0, *d = 1;
			return;
		}
		int64_t k = align ? (2 * (outn - 1) + in - 2) / (in - 1) + 6
		                  : (5 * outn + 2 * in - 1) / (2 * in) + 6;
		*kc = k < outn ? k : outn;
		return;
	}
	int64_t o = 0, k = 1;
	for (int64_t i = 0; i < in; i++) {
		int64_t num = *a * i + *b, s = (num > 0 ? num : 0) / *d - 1;
		s = s < (i - 1) * outn ? s : (i - 1) * outn;
		s = s < 0 ? 0 : s > outn - 1 ? outn - 1 : s;
		// The run of i: from the first o with i0(o) >= i - 1 (o only
		// grows with i) to the last with i0(o) <= i.
		while (o < outn && bilinear_i0(o, in, outn, align) < i - 1)
			o++;
		int64_t lo = o, hi = lo;
		while (hi < outn && bilinear_i0(hi, in, outn, align) <= i)
			hi++;
		// [lo, hi) is the run; s must lie at least one before lo (or at 0).
		if (lo < outn && !(s <= lo - 1 || s == 0)) {
			*a = 0, *b = 0, *d = 1, *kc = outn;
			return;
		}
		int64_t need = hi + 1 - s; // candidates s .. hi (one past the run's end)
		k = need > k ? need : k;
	}
	*kc = k < outn ? k : outn;
}

// Candidate t of the inverse window of input i: o = s(i) + t clamped
// into [0, outn), *ok that it is in range (not past the end).
static KxId
bilinear_cand(KProgram *p, KxId i, KxId t, int64_t outn, int64_t a, int64_t b, int64_t d, int64_t kc,
              KxId *ok)
{
	if (kc == outn && a == 0) {
		*ok = 0;
		return t;
	}
	KxId num = kx_imax(p, kx_iadd(p, kx_imul(p, i, a), kx_iconst(p, b)), kx_iconst(p, 0));
	KxId s = kx_iadd(p, kx_idiv(p, num, d), kx_iconst(p, -1));
	s = kx_iclamp(p, kx_imin(p, s, kx_imul(p, kx_iadd(p, i, kx_iconst(p, -1)), outn)), 0, outn - 1);
	KxId o = kx_iadd(p, s, t);
	*ok = in_range(p, o, 0, outn);
	return kx_iclamp(p, o, 0, outn - 1);
}

// The loops of one window over output (pl, oh, ow): fills *xi (the load
// index, clamped), *ok (in bounds, 0 for always) and *pos (ih W + iw).
static void
pool_window(Lower *L, KKernel *k, const Geo *v, KxId pl, KxId oh, KxId ow, int dil, KxId *xi,
            KxId *ok, KxId *pos)
{
	KProgram *p = L->p;
	KxId kh = rvar(L, k, v->kh), kw = rvar(L, k, v->kw);
	KxId ih = kx_iadd(p, kx_imul(p, oh, v->sh), kx_iadd(p, kx_iconst(p, -v->ph), kx_imul(p, kh, dil ? v->dh : 1)));
	KxId iw = kx_iadd(p, kx_imul(p, ow, v->sw), kx_iadd(p, kx_iconst(p, -v->pw), kx_imul(p, kw, dil ? v->dw : 1)));
	*ok = band(p, in_range(p, ih, 0, v->H), in_range(p, iw, 0, v->W));
	KxId ihc = kx_iclamp(p, ih, 0, v->H - 1), iwc = kx_iclamp(p, iw, 0, v->W - 1);
	*pos = kx_iadd(p, kx_imul(p, ihc, v->W), iwc);
	*xi = kx_iadd(p, kx_imul(p, pl, v->H * v->W), *pos);
}

// max_pool's per-window maximum (*mbuf) and argmax (*abuf: ih W + iw, or
// H W for a window of padding only).  *mbuf NOBUF: a buffer of its own;
// else the maxima go there (max_pool's result: abuf NULL, no argmax), or,
// with have, are there already (a forward max_pool's: pool_max_of) and
// only the argmax is computed.
static void
max_pool_arg(Lower *L, NodeId n, NodeId x, const Geo *v, uint32_t *mbuf, int have,
             uint32_t *abuf)
{
	KProgram *p = L->p;
	Shape ps = {.rank = 3};
	ps.dim[0] = v->N * v->C;
	ps.dim[1] = v->OH;
	ps.dim[2] = v->OW;
	DType dt = kir_compute_dtype(p, ndtype(L, x));
	if (*mbuf == NOBUF)
		*mbuf = kir_buf_add(p, KB_TMP, 0, dt, &ps, n);
	if (abuf)
		*abuf = kir_buf_add(p, KB_TMP, 0, DT_I64, &ps, n);
	for (int pass = have; pass <= (abuf != NULL); pass++) {
		KKernel *k = lower_kernel_begin(L, pass ? *abuf : *mbuf, n, pass ? "max_pool.argmax" : "max_pool.max");
		KxId pl = pvar(L, k, ps.dim[0]), oh = pvar(L, k, v->OH), ow = pvar(L, k, v->OW), xi, ok, pos;
		k->index = flat4(p, kx_iconst(p, 0), pl, 1, oh, v->OH, ow, v->OW);
		pool_window(L, k, v, pl, oh, ow, 1, &xi, &ok, &pos);
		KxId xv = lower_at(L, x, xi);
		if (!pass) {
			finish(L, k, KR_MAX, sel(p, ok, xv, kx_const(p, -HUGE_VAL, dt)), 0);
			continue;
		}
		KxId m = kx_load(p, *mbuf, k->index);
		KxId hit = kx_bin(p, KX_OR, kx_cmp(p, KC_EQ, xv, m),
		                  kx_bin(p, KX_AND, kx_cmp(p, KC_UNO, m, m), kx_cmp(p, KC_UNO, xv, xv)));
		hit = band(p, ok, hit);
		finish(L, k, KR_MIN, kx_select(p, hit, pos, kx_iconst(p, v->H * v->W)), 0);
	}
}

// The buffer of a max_pool already lowered over the same x and window as
// max_pool_grad or max_pool_gather n (the vjp's forward pass holds one
// for each of its adjoints), or NOBUF: its result is the maxima that n's
// argmax compares with, computed by the same kernel, so the same values.
static uint32_t
pool_max_of(Lower *L, NodeId n, DType dt)
{
	const Graph *g = L->g;
	static const char *const names[] = {"kernel", "stride", "padding", "dilation"};
	NodeId x = ir_in1(g, n, 0);
	Attrs an, am;
	ir_attrs_get(g, n, &an);
	for (NodeId m = 1; m < n; m++) {
		if (g->node[m].op != OP_max_pool || ir_in1(g, m, 0) != x || L->buf[m] == NOBUF ||
		    L->off[m] || L->p->buf[L->buf[m]].dtype != dt)
			continue;
		ir_attrs_get(g, m, &am);
		int same = 1;
		for (int i = 0; i < 4 && same; i++) {
			const AttrVal *u = &an.a[aidx(L, n, names[i])], *w = &am.a[aidx(L, m, names[i])];
			same = u->n == w->n && !memcmp(u->v, w->v, sizeof u->v[0] * (size_t)u->n);
		}
		if (same)
			return L->buf[m];
	}
	return NOBUF;
}

static void
kernel_pool(Lower *L, uint32_t out, NodeId n, const Attrs *a)
{
	const Graph *g = L->g;
	KProgram *p = L->p;
	int op = g->node[n].op;
	NodeId i0 = ir_in1(g, n, 0);
	const Shape *os = ir_shape(g, n), *s0 = ir_shape(g, i0);
	const int64_t *kk = attr_ints(L, n, a, "kernel"), *st = attr_ints(L, n, a, "stride"),
	              *pd = attr_ints(L, n, a, "padding"), *dl = attr_ints(L, n, a, "dilation");
	DType dt = ctype(L, n);
	KxId z = kx_const(p, 0, dt);
	int grad = op == OP_max_pool_grad || op == OP_avg_pool_grad || op == OP_adaptive_avg_pool_grad ||
	           op == OP_upsample_bilinear_grad;
	// v: input (x-shaped) geometry against the forward op's output.
	const Shape *xs = grad ? (op == OP_max_pool_grad ? s0 : os) : s0;
	const Shape *ys = grad ? ir_shape(g, op == OP_max_pool_grad ? ir_in1(g, n, 1) : i0) : os;
	if (op == OP_max_pool_gather)
		ys = os;
	Geo v = geo(xs, ys, kk, st, pd, op == OP_avg_pool || op == OP_avg_pool_grad ? NULL : dl);
	int64_t P = v.N * v.C, HW = v.H * v.W;
	if (op == OP_max_pool) { // the maxima, written as the result (the same flat order)
		uint32_t mbuf = out;
		max_pool_arg(L, n, i0, &v, &mbuf, 0, NULL);
		return;
	}
	if (op == OP_max_pool_gather || op == OP_max_pool_grad) {
		uint32_t mbuf = pool_max_of(L, n, kir_compute_dtype(p, ndtype(L, i0))), abuf;
		max_pool_arg(L, n, i0, &v, &mbuf, mbuf != NOBUF, &abuf);
		NodeId h = ir_in1(g, n, 1);
		if (op == OP_max_pool_gather) {
			KKernel *k = lower_kernel_begin(L, out, n, "max_pool_gather");
			KxId pl = pvar(L, k, P), oh = pvar(L, k, v.OH), ow = pvar(L, k, v.OW);
			k->index = flat4(p, kx_iconst(p, 0), pl, 1, oh, v.OH, ow, v.OW);
			KxId am = kx_load(p, abuf, k->index);
			KxId hv = lower_at(L, h, kx_iadd(p, kx_imul(p, pl, HW), kx_iclamp(p, am, 0, HW - 1)));
			finish(L, k, KR_NONE, kx_select(p, kx_cmp(p, KC_LT, am, kx_iconst(p, HW)), hv, z), 0);
			return;
		}
		KKernel *k = lower_kernel_begin(L, out, n, "max_pool_grad");
		KxId pl = pvar(L, k, P), ih = pvar(L, k, v.H), iw = pvar(L, k, v.W);
		k->index = flat4(p, kx_iconst(p, 0), pl, 1, ih, v.H, iw, v.W);
		KxId okh, okw;
		KxId oh = inv_taps(L, k, ih, v.kh, v.ph, v.sh, v.dh, v.OH, &okh);
		KxId ow = inv_taps(L, k, iw, v.kw, v.pw, v.sw, v.dw, v.OW, &okw);
		KxId oi = flat4(p, kx_iconst(p, 0), pl, 1, oh, v.OH, ow, v.OW);
		KxId me = kx_iadd(p, kx_imul(p, ih, v.W), iw);
		KxId hit = band(p, band(p, okh, okw), kx_cmp(p, KC_EQ, kx_load(p, abuf, oi), me));
		finish(L, k, KR_SUM, kx_select(p, hit, lower_at(L, h, oi), z), 0);
		return;
	}
	int incl = op == OP_avg_pool || op == OP_avg_pool_grad ? a->a[aidx(L, n, "count_include_pad")].i != 0 : 0;
	if (op == OP_avg_pool) {
		KKernel *k = lower_kernel_begin(L, out, n, "avg_pool");
		KxId pl = pvar(L, k, P), oh = pvar(L, k, v.OH), ow = pvar(L, k, v.OW), xi, ok, pos;
		k->index = flat4(p, kx_iconst(p, 0), pl, 1, oh, v.OH, ow, v.OW);
		pool_window(L, k, &v, pl, oh, ow, 0, &xi, &ok, &pos);
		KxId body = sel(p, ok, lower_at(L, i0, xi), z);
		KxId div = avg_divisor(p, &v, oh, ow, incl, dt);
		finish(L, k, KR_SUM, body, kx_bin(p, KX_DIV, kx_acc(p, dt), div));
		return;
	}
	if (op == OP_avg_pool_grad) {
		KKernel *k = lower_kernel_begin(L, out, n, "avg_pool_grad");
		KxId pl = pvar(L, k, P), ih = pvar(L, k, v.H), iw = pvar(L, k, v.W);
		k->index = flat4(p, kx_iconst(p, 0), pl, 1, ih, v.H, iw, v.W);
		KxId okh, okw;
		KxId oh = inv_taps(L, k, ih, v.kh, v.ph, v.sh, 1, v.OH, &okh);
		KxId ow = inv_taps(L, k, iw, v.kw, v.pw, v.sw, 1, v.OW, &okw);
		KxId oi = flat4(p, kx_iconst(p, 0), pl, 1, oh, v.OH, ow, v.OW);
		KxId t = kx_bin(p, KX_DIV, lower_at(L, i0, oi), avg_divisor(p, &v, oh, ow, incl, dt));
		finish(L, k, KR_SUM, sel(p, band(p, okh, okw), t, z), 0);
		return;
	}
	if (op == OP_adaptive_avg_pool || op == OP_adaptive_avg_pool_grad) {
		int fwd = op == OP_adaptive_avg_pool;
		KKernel *k = lower_kernel_begin(L, out, n, ir_op(op)->name);
		KxId pl = pvar(L, k, P), e0 = pvar(L, k, fwd ? v.OH : v.H), e1 = pvar(L, k, fwd ? v.OW : v.W);
		if (fwd) {
			KxId oh = e0, ow = e1, h0, h1, w0, w1;
			k->index = flat4(p, kx_iconst(p, 0), pl, 1, oh, v.OH, ow, v.OW);
			adaptive_bounds(p, oh, v.H, v.OH, &h0, &h1);
			adaptive_bounds(p, ow, v.W, v.OW, &w0, &w1);
			KxId ih = kx_iadd(p, h0, rvar(L, k, adaptive_max(v.H, v.OH)));
			KxId iw = kx_iadd(p, w0, rvar(L, k, adaptive_max(v.W, v.OW)));
			KxId ok = band(p, kx_cmp(p, KC_LT, ih, h1), kx_cmp(p, KC_LT, iw, w1));
			KxId xi = flat4(p, kx_iconst(p, 0), pl, 1, kx_iclamp(p, ih, 0, v.H - 1), v.H,
			                kx_iclamp(p, iw, 0, v.W - 1), v.W);
			KxId body = sel(p, ok, lower_at(L, i0, xi), z);
			finish(L, k, KR_SUM, body, kx_bin(p, KX_DIV, kx_acc(p, dt), adaptive_count(p, h0, h1, w0, w1, dt)));
		} else {
			KxId ih = e0, iw = e1, h0, h1, w0, w1;
			k->index = flat4(p, kx_iconst(p, 0), pl, 1, ih, v.H, iw, v.W);
			KxId oh = rvar(L, k, v.OH), ow = rvar(L, k, v.OW);
			adaptive_bounds(p, oh, v.H, v.OH, &h0, &h1);
			adaptive_bounds(p, ow, v.W, v.OW, &w0, &w1);
			KxId ok = band(p, band(p, kx_cmp(p, KC_LE, h0, ih), kx_cmp(p, KC_LT, ih, h1)),
			               band(p, kx_cmp(p, KC_LE, w0, iw), kx_cmp(p, KC_LT, iw, w1)));
			KxId gi = flat4(p, kx_iconst(p, 0), pl, 1, oh, v.OH, ow, v.OW);
			KxId t = kx_bin(p, KX_DIV, lower_at(L, i0, gi), adaptive_count(p, h0, h1, w0, w1, dt));
			finish(L, k, KR_SUM, kx_select(p, ok, t, z), 0);
		}
		return;
	}
	// upsample_bilinear and its adjoint, in f64 as the interpreter.
	int align = a->a[aidx(L, n, "align_corners")].i != 0;
	KxId one = kx_const(p, 1, DT_F64), z64 = kx_const(p, 0, DT_F64);
	if (op == OP_upsample_bilinear) {
		KKernel *k = lower_kernel_begin(L, out, n, "upsample_bilinear");
		KxId pl = pvar(L, k, P), oh = pvar(L, k, v.OH), ow = pvar(L, k, v.OW), h0, h1, w0, w1, lh, lw;
		k->index = flat4(p, kx_iconst(p, 0), pl, 1, oh, v.OH, ow, v.OW);
		bilinear_src(p, oh, v.H, v.OH, align, &h0, &h1, &lh);
		bilinear_src(p, ow, v.W, v.OW, align, &w0, &w1, &lw);
		KxId base = kx_imul(p, pl, HW);
#define PIX(r, c) to_f64(p, lower_at(L, i0, kx_iadd(p, base, kx_iadd(p, kx_imul(p, r, v.W), c))))
		KxId top = kx_bin(p, KX_ADD, kx_bin(p, KX_MUL, kx_bin(p, KX_SUB, one, lw), PIX(h0, w0)),
		                  kx_bin(p, KX_MUL, lw, PIX(h0, w1)));
		KxId bot = kx_bin(p, KX_ADD, kx_bin(p, KX_MUL, kx_bin(p, KX_SUB, one, lw), PIX(h1, w0)),
		                  kx_bin(p, KX_MUL, lw, PIX(h1, w1)));
#undef PIX
		KxId o = kx_bin(p, KX_ADD, kx_bin(p, KX_MUL, kx_bin(p, KX_SUB, one, lh), top),
		                kx_bin(p, KX_MUL, lh, bot));
		finish(L, k, KR_NONE, o, 0);
		return;
	}
	// The adjoint gathers, for input (ih, iw), the outputs whose
	// neighbours include it: only the candidates oh = s_H(ih) + th,
	// th < KH (and the same along w), the inverse window of bilinear_up
	// (below); the hit tests are the forward's own source indices.
	int64_t sa[2], sb[2], sd[2], kc[2];
	bilinear_up(v.H, v.OH, align, &sa[0], &sb[0], &sd[0], &kc[0]);
	bilinear_up(v.W, v.OW, align, &sa[1], &sb[1], &sd[1], &kc[1]);
	KKernel *k = lower_kernel_begin(L, out, n, "upsample_bilinear_grad");
	KxId pl = pvar(L, k, P), ih = pvar(L, k, v.H), iw = pvar(L, k, v.W), h0, h1, w0, w1, lh, lw;
	k->index = flat4(p, kx_iconst(p, 0), pl, 1, ih, v.H, iw, v.W);
	KxId th = rvar(L, k, kc[0]), tw = rvar(L, k, kc[1]), okh, okw;
	KxId oh = bilinear_cand(p, ih, th, v.OH, sa[0], sb[0], sd[0], kc[0], &okh);
	KxId ow = bilinear_cand(p, iw, tw, v.OW, sa[1], sb[1], sd[1], kc[1], &okw);
	bilinear_src(p, oh, v.H, v.OH, align, &h0, &h1, &lh);
	bilinear_src(p, ow, v.W, v.OW, align, &w0, &w1, &lw);
	KxId gv = to_f64(p, lower_at(L, i0, flat4(p, kx_iconst(p, 0), pl, 1, oh, v.OH, ow, v.OW)));
	KxId ulh = kx_bin(p, KX_SUB, one, lh), ulw = kx_bin(p, KX_SUB, one, lw);
	KxId hr[2] = {h0, h1}, wc[2] = {w0, w1}, wh[2] = {ulh, lh}, ww[2] = {ulw, lw}, body = 0;
	for (int r = 0; r < 2; r++)
		for (int c = 0; c < 2; c++) {
			KxId hit = kx_bin(p, KX_AND, kx_cmp(p, KC_EQ, hr[r], ih), kx_cmp(p, KC_EQ, wc[c], iw));
			KxId t = kx_select(p, hit, kx_bin(p, KX_MUL, kx_bin(p, KX_MUL, wh[r], ww[c]), gv), z64);
			body = body ? kx_bin(p, KX_ADD, body, t) : t;
		}
	finish(L, k, KR_SUM, sel(p, band(p, okh, okw), body, z64), 0);
}

// argmax(x, axis): the window maximum m, then the first k with x = m (the
// first NaN when m is NaN): torch.argmax's first maximum.
static void
kernel_argmax(Lower *L, uint32_t out, NodeId n, const Attrs *a)
{
	const Graph *g = L->g;
	KProgram *p = L->p;
	NodeId x = ir_in1(g, n, 0);
	const Shape *xs = ir_shape(g, x);
	int ax = (int)a->a[aidx(L, n, "axis")].i;
	int64_t outer = 1, inner = 1, dim = xs->dim[ax];
	for (int d = 0; d < ax; d++)
		outer *= xs->dim[d];
	for (int d = ax + 1; d < xs->rank; d++)
		inner *= xs->dim[d];
	Shape ms = {.rank = 2};
	ms.dim[0] = outer;
	ms.dim[1] = inner;
	DType dt = kir_compute_dtype(p, ndtype(L, x));
	uint32_t mbuf = kir_buf_add(p, KB_TMP, 0, dt, &ms, n);
	for (int pass = 0; pass < 2; pass++) {
		KKernel *k = lower_kernel_begin(L, pass ? out : mbuf, n, pass ? "argmax" : "argmax.max");
		KxId o = pvar(L, k, outer), i = pvar(L, k, inner), j = rvar(L, k, dim);
		k->index = kx_iadd(p, kx_imul(p, o, inner), i);
		KxId xv = lower_at(L, x, kx_iadd(p, kx_imul(p, kx_iadd(p, kx_imul(p, o, dim), j), inner), i));
		if (!pass) {
			finish(L, k, KR_MAX, xv, 0);
			continue;
		}
		KxId m = kx_load(p, mbuf, k->index);
		KxId hit = kx_bin(p, KX_OR, kx_cmp(p, KC_EQ, xv, m),
		                  kx_bin(p, KX_AND, kx_cmp(p, KC_UNO, m, m), kx_cmp(p, KC_UNO, xv, xv)));
		finish(L, k, KR_MIN, kx_select(p, hit, j, kx_iconst(p, dim)), 0);
	}
}

// The rules of lower.c's table, one per family (lower_impl.h names the
// members).
void
lower_conv(Lower *L, uint32_t out, NodeId n)
{
	Attrs a;
	ir_attrs_get(L->g, n, &a);
	kernel_conv(L, out, n, &a);
}

void
lower_pool(Lower *L, uint32_t out, NodeId n)
{
	Attrs a;
	ir_attrs_get(L->g, n, &a);
	kernel_pool(L, out, n, &a);
}

void
lower_argmax(Lower *L, uint32_t out, NodeId n)
{
	Attrs a;
	ir_attrs_get(L->g, n, &a);
	kernel_argmax(L, out, n, &a);
}
