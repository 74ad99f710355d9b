// codegen/kir_layout.c -- channels-last (NHWC) storage for the activations
// around cuDNN convolutions, on the CUDA target only.
//
// Why: the kernel IR's buffers are dense row-major, so a convolution's
// activations are NCHW.  cuDNN's fast Hopper engines (the sm90 implicit-GEMM
// kernels) work on NHWC; given NCHW descriptors cuDNN transposes every
// operand in and the result out (nchwToNhwcKernel / nhwcToNchwKernel): on
// an H200, 1.36 of the 6.98 ms of kernel time of PyTorch's resnet18 training
// step at N=32, and the same in fadc's, whose cuDNN records described every
// tensor as NCHW.  PyTorch's channels_last, and torch.compile's layout
// optimisation, store those tensors NHWC instead.
//
// What: a temporary's layout is an index expression of the kernel IR, so a
// layout change is a rewrite of indices, nothing else.  A chosen buffer B
// (KB_TMP only: task inputs and outputs keep the user's layout) holding
// an NCHW tensor of geometry (N, C, S = H W) is stored with its element
// e = n C S + c S + s at
//     e' = n S C + s C + c,   n = e / (C S),  c = (e / S) % C,  s = e % S
// (H and W stay adjacent and in order, so only (C, S) swap).  Every store
// index of a kernel writing B and every load index of B is replaced by e'
// of it; kir's simplifier folds the divisions back to loop variables when e
// is affine in them (the usual case: e = n CS + c S + h W + w gives
// e' = n SC + (h W + w) C + c with no division), and leaves them where a
// view makes e non-affine (a reshape [C, N S] of batch norm: m / S, m % S).
//
// Which buffers: the activations of every convolution with a cuDNN record
// (KConv: forward x and y, backward data dy and dx, backward filter x and
// dy), at the convolution's geometry; a buffer two convolutions see with
// different geometries, a weight, or a host kernel's operand stays NCHW.
// Then through neighbours: a buffer of the same size that a kernel reads
// at its own store index while writing a chosen buffer (or that a kernel
// writes while reading a chosen buffer at its store index) takes the same
// layout, so such a kernel does not read one layout and write the other
// (one side's accesses would be strided).
//
// Coalescing: the CUDA printer runs a kernel's points in row-major order of
// its parallel variables (grid-stride over the flattened domain, the last
// variable fastest).  A kernel writing a relaid buffer over (n, c, h, w)
// would store with a stride of C; so its parallel variables are permuted
// in the order of their coefficients in the new store index (largest
// first: n, h, w, c), which makes the store contiguous again; a variable
// over N C values (max_pool's [N C, OH, OW]) is split first.  A
// contraction (the forward GEMM writing y) gets the same treatment, and
// then C's last variable is the output channel, which kir_gemm_plan takes
// as a row-major GEMM with both operands transposed.  Sums per channel
// over a relaid tensor are split into channel-inner partial sums ("channel-
// inner sums" below), which needs buffers of their own and so a memory
// plan of the copy's own.
//
// The convolution records learn their operands' layouts (KConv.nhwc, a bit
// per argument {written, a, b}; docs/ARTIFACT.md, format 9) and cuDNN is
// given NHWC strides for them (runtime/cudnn.c).  Filters stay KCRS.
//
// The CPU backend never sees this: the pass builds a new program (the same
// buffers, loops and convolutions, the kernels' expressions rebuilt, the
// memory plan as it was unless a sum was split) and the CUDA printer alone
// reads it.  Only with TF32 allowed
// (layout_off says why); FADC_CUDA_NO_NHWC=1 at compile time turns it off,
// FADC_CUDA_NHWC=1 on for strict fp32 too (measurements).
#include <stdlib.h>
#include <string.h>

#include "codegen.h"
#include "kir.h"

// An NCHW geometry: n images of c channels of s = h w points.  0: none.
typedef struct Geo {
	int64_t n, c, s;
} Geo;

typedef struct Lay {
	const KProgram *p;
	KProgram *q;
	Geo *geo; // per buffer: its layout (c == 0: row-major, unchanged)
	uint8_t *veto; // per buffer: may not be relaid
	KxId *memo; // per expression of p: its translation in q
	uint32_t *stamp, cur; // memo[id] valid when stamp[id] == cur
	KxId varx[2 * IR_MAXDIM]; // this kernel's variable i of p as an expression in q
} Lay;

static int
geo_eq(Geo a, Geo b)
{
	return a.n == b.n && a.c == b.c && a.s == b.s;
}

static int64_t
buf_numel(const KBuf *b)
{
	int64_t n = 1;
	for (int i = 0; i < b->shape.rank; i++)
		n *= b->shape.dim[i];
	return n;
}

// Buffer b as an activation of geometry g: a seed or a veto.  Only
// temporaries of g's size whose layout actually changes (c > 1, s > 1).
static void
seed(Lay *L, uint32_t b, Geo g)
{
	const KBuf *kb = &L->p->buf[b];
	if (kb->kind != KB_TMP || g.c <= 1 || g.s <= 1 || buf_numel(kb) != g.n * g.c * g.s) {
		L->veto[b] = 1;
		return;
	}
	if (L->geo[b].c && !geo_eq(L->geo[b], g))
		L->veto[b] = 1; // two geometries: stays NCHW
	L->geo[b] = g;
}

// ---------------------------------------------------------------- choosing

// The loads of expression id into the kernel's list (bufs and indices),
// each load once; 0 when there are more than max.
typedef struct Loads {
	uint32_t buf[64];
	KxId idx[64];
	int n, over;
} Loads;

static void
loads_of(const KProgram *p, KxId id, Loads *ld, uint32_t *seen, uint32_t st)
{
	if (!id || seen[id] == st)
		return;
	seen[id] = st;
	const Kx *x = &p->x[id];
	if (x->op == KX_LOAD) {
		if (ld->n < 64) {
			ld->buf[ld->n] = x->aux;
			ld->idx[ld->n++] = x->a[0];
		} else
			ld->over = 1;
	}
	for (int i = 0; i < x->nin; i++)
		loads_of(p, x->a[i], ld, seen, st);
}

// The elementwise neighbours (see the top): one pass over the kernels;
// 1 when it chose a buffer.  A reduction counts when it reads a buffer at
// its own store index (max_pool's argmax reads the maxima it looks for).
// Not a contraction: its loads at the store index are a coincidence of
// shapes, and a GEMM's operands keep the layout they have.
static int
spread(Lay *L, uint32_t *seen, uint32_t *st)
{
	const KProgram *p = L->p;
	int changed = 0;
	for (uint32_t ki = 0; ki < p->nk; ki++) {
		const KKernel *k = &p->k[ki];
		if (k->host || k->contraction || !k->index)
			continue;
		Loads ld = {0};
		++*st;
		loads_of(p, k->body, &ld, seen, *st);
		if (ld.over)
			continue;
		uint32_t out = k->out;
		for (int i = 0; i < ld.n; i++) {
			if (ld.idx[i] != k->index || ld.buf[i] == out)
				continue;
			uint32_t a = ld.buf[i];
			const KBuf *ba = &p->buf[a], *bo = &p->buf[out];
			if (buf_numel(ba) != buf_numel(bo))
				continue;
			uint32_t from = L->geo[out].c && !L->veto[out] ? out : a, to = from == out ? a : out;
			if (!L->geo[from].c || L->veto[from] || L->geo[to].c || L->veto[to] ||
			    p->buf[to].kind != KB_TMP)
				continue;
			L->geo[to] = L->geo[from];
			changed = 1;
		}
	}
	return changed;
}

static void
choose(Lay *L)
{
	const KProgram *p = L->p;
	for (uint32_t i = 0; i < p->nconv; i++) {
		const KConv *v = &p->conv[i];
		Geo x = {v->n, v->c, v->h * v->w}, y = {v->n, v->k, v->oh * v->ow};
		// {written, a, b} per op; the weight is vetoed (filters stay KCRS).
		if (v->op == 0)
			seed(L, v->out, y), seed(L, v->a, x), L->veto[v->b] = 1;
		else if (v->op == 1)
			seed(L, v->out, x), seed(L, v->a, y), L->veto[v->b] = 1;
		else
			L->veto[v->out] = 1, seed(L, v->a, x), seed(L, v->b, y);
	}
	for (uint32_t ki = 0; ki < p->nk; ki++)
		if (p->k[ki].host) // a host step reads and writes whole buffers as they are
			L->veto[p->k[ki].out] = L->veto[p->k[ki].hin] = L->veto[p->k[ki].hwork] = 1;
	uint32_t *seen = calloc(p->nx + 1, sizeof *seen), st = 0;
	FADC_ASSERT(seen != NULL, "kir_layout: out of memory");
	for (int round = 0; round < 16 && spread(L, seen, &st); round++)
		;
	free(seen);
	for (uint32_t b = 0; b < p->nbuf; b++)
		if (L->veto[b])
			L->geo[b] = (Geo){0, 0, 0};
}

// ---------------------------------------------------------------- rewriting

// e' of element index e (see the top).
static KxId
nhwc(KProgram *q, KxId e, Geo g)
{
	KxId n = kx_idiv(q, e, g.c * g.s), c = kx_imod(q, kx_idiv(q, e, g.s), g.c),
	     s = kx_imod(q, e, g.s);
	return kx_iadd(q, kx_imul(q, n, g.s * g.c), kx_iadd(q, kx_imul(q, s, g.c), c));
}

// Expression id of p rebuilt in q: variables as L->varx says, the loads
// of relaid buffers at their new index.
static KxId
tr(Lay *L, KxId id)
{
	if (!id)
		return 0;
	if (L->stamp[id] == L->cur)
		return L->memo[id];
	const KProgram *p = L->p;
	KProgram *q = L->q;
	const Kx x = p->x[id];
	KxId a[3] = {0, 0, 0}, r = 0;
	for (int i = 0; i < x.nin; i++)
		a[i] = tr(L, x.a[i]);
	// Variables and loads are this pass's leaves; every other op is made
	// again by its constructor (kx_remake), so index arithmetic folds.
	if (x.op == KX_VAR)
		r = L->varx[x.aux];
	else if (x.op == KX_LOAD)
		r = kx_load(q, x.aux, L->geo[x.aux].c ? nhwc(q, a[0], L->geo[x.aux]) : a[0]);
	else
		r = kx_remake(q, &x, a);
	FADC_ASSERT(q->x[r].dtype == x.dtype, "kir_layout: a rebuilt expression changed dtype");
	L->stamp[id] = L->cur;
	L->memo[id] = r;
	return r;
}

// A kernel's new variables: its parallel variables, variable `split`
// (>= 0) of extent m C made two, m and C (p's variable = hi C + lo: a
// kernel over [N C, OH, OW], max_pool's, whose channels cannot move inward
// otherwise), then the reduction variables; new parallel variable j is
// numbered pos[j].  The kernel's new dims into dim (parallel) and the
// mapping into L->varx; the new rank.
static int
vars(Lay *L, const KKernel *k, int split, int64_t C, const int *pos, int64_t *dim)
{
	KProgram *q = L->q;
	int nr = k->rank + (split >= 0);
	for (int i = 0, j = 0; i < k->rank; i++, j++) {
		if (i == split) {
			dim[pos[j]] = k->dim[i] / C;
			dim[pos[j + 1]] = C;
			L->varx[i] = kx_iadd(q, kx_imul(q, kx_var(q, pos[j], k->dim[i] / C), C),
			                     kx_var(q, pos[j + 1], C));
			j++;
		} else {
			dim[pos[j]] = k->dim[i];
			L->varx[i] = kx_var(q, pos[j], k->dim[i]);
		}
	}
	for (int i = 0; i < k->rrank; i++)
		L->varx[k->rank + i] = kx_var(q, nr + i, k->rdim[i]);
	return nr;
}

// Kernel k's store index in q under the mapping vars() set (nhwc applied
// when its buffer is relaid; raw without).
static KxId
store_index(Lay *L, const KKernel *k, int raw)
{
	L->cur++;
	KxId e = tr(L, k->index);
	return !raw && L->geo[k->out].c ? nhwc(L->q, e, L->geo[k->out]) : e;
}

// The order of parallel variables 0 .. rank-1 that makes a store of index
// e (in q) row-major: by decreasing coefficient (stable), into pos (old
// position -> new).  -1 when e is not affine in them.
static int
coalesce(Lay *L, int rank, KxId e, int *pos)
{
	int64_t coef[IR_MAXDIM + 1];
	int order[IR_MAXDIM + 1];
	for (int v = 0; v < rank; v++) {
		if (!kx_affine_coef(L->q, e, v, &coef[v]) || coef[v] < 0)
			return -1;
		order[v] = v;
	}
	for (int i = 1; i < rank; i++) // insertion sort, stable
		for (int j = i; j > 0 && coef[order[j - 1]] < coef[order[j]]; j--) {
			int t = order[j];
			order[j] = order[j - 1];
			order[j - 1] = t;
		}
	for (int i = 0; i < rank; i++)
		pos[order[i]] = i;
	return 0;
}

// Kernel k's variables for q (L->varx) and its new rank and dims: the
// identity, unless k writes a relaid buffer; then an order (and maybe a
// split) that makes its store contiguous where one exists.
static void
kernel_vars(Lay *L, KKernel *k)
{
	int pos[IR_MAXDIM + 1], split = -1;
	int64_t dim[IR_MAXDIM + 1], C = 0;
	for (int i = 0; i <= IR_MAXDIM; i++)
		pos[i] = i;
	int nr = vars(L, k, -1, 0, pos, dim);
	if (k->host || !k->index || !L->geo[k->out].c)
		return;
	Geo g = L->geo[k->out];
	if (coalesce(L, k->rank, store_index(L, k, 0), pos) < 0) {
		// A variable moving the NCHW index by S over N C values (or a
		// multiple of C): split it into (image, channel).
		KxId e = store_index(L, k, 1);
		for (int v = 0; v < k->rank && split < 0 && k->rank < IR_MAXDIM; v++) {
			int64_t c;
			if (kx_affine_coef(L->q, e, v, &c) && c == g.s && k->dim[v] > g.c &&
			    k->dim[v] % g.c == 0)
				split = v, C = g.c;
		}
		for (int i = 0; i <= IR_MAXDIM; i++)
			pos[i] = i;
		if (split < 0)
			return;
		nr = vars(L, k, split, C, pos, dim);
		if (coalesce(L, nr, store_index(L, k, 0), pos) < 0) {
			for (int i = 0; i <= IR_MAXDIM; i++)
				pos[i] = i;
			vars(L, k, -1, 0, pos, dim);
			return;
		}
	}
	nr = vars(L, k, split, C, pos, dim);
	k->rank = nr;
	memcpy(k->dim, dim, sizeof dim[0] * (size_t)nr);
}

// ---------------------------------------------------------------- channel-inner sums
//
// A sum over the images and points of a channels-last tensor, per channel
// (batch norm's statistics and its backward's sums, the bias gradients),
// is a long reduction into few points: the CUDA printer gives each point a
// block whose threads stride through its terms, which NCHW made
// contiguous and NHWC makes C elements apart, one 32-byte sector per
// 4-byte load (measured on an H200: resnet18's vjp partial sums 0.76 ->
// 3.2 ms).  So such a kernel becomes two: a first sums short runs of terms
// into partial[.., j, c] with the channel its innermost parallel variable,
// one thread per point, so a warp's loads are 32 adjacent channels of one
// row (coalesced); a second adds each point's partials (a few hundred
// terms of a small buffer) and applies the original post.  The reduction
// variables are taken in order: the leading ones whose remaining terms
// are still many (>= 128) become parallel in the first kernel, the next is
// split into j (parallel) and l (reduced), l the largest divisor of its
// extent leaving at most CSUM_TERMS terms per partial.  The summation
// order changes (runs, then their sum), within the usual rounding.

#define CSUM_MAX_POINTS 32768 // the printer's block-per-point regime (docs/CUDA.md)
#define CSUM_MIN_TERMS 512
#define CSUM_TERMS 64

static KxId
flat(KProgram *q, const KxId *v, const int64_t *dim, int n)
{
	KxId e = kx_iconst(q, 0);
	for (int d = 0; d < n; d++)
		e = kx_iadd(q, kx_imul(q, e, dim[d]), v[d]);
	return e;
}

// The loads of relaid buffers in q's expression id (seen: per q id).
static void
relaid_loads(Lay *L, KxId id, uint8_t *seen, KxId *out, int *n)
{
	if (!id || seen[id])
		return;
	seen[id] = 1;
	const Kx *x = &L->q->x[id];
	if (x->op == KX_LOAD && x->aux < L->p->nbuf && L->geo[x->aux].c && *n < 16)
		out[(*n)++] = x->a[0];
	for (int i = 0; i < x->nin; i++)
		relaid_loads(L, x->a[i], seen, out, n);
}

// The channel variable of sum kernel k of p, or -1: a parallel variable
// with coefficient 1 in the index of a relaid load of its body, where no
// reduction variable has coefficient 1 (the terms are then strided).
static int
csum_channel(Lay *L, const KKernel *k)
{
	if (k->red != KR_SUM || k->contraction || k->host || k->conv || !k->rrank ||
	    k->rank + 2 > IR_MAXDIM || kir_kernel_points(k) > CSUM_MAX_POINTS ||
	    kir_kernel_terms(k) < CSUM_MIN_TERMS)
		return -1;
	for (uint32_t l = 0; l < L->p->nloop; l++)
		if (L->p->loop[l].begin <= (uint32_t)(k - L->p->k) && (uint32_t)(k - L->p->k) < L->p->loop[l].end)
			return -1;
	int64_t dim[IR_MAXDIM + 1];
	int pos[IR_MAXDIM + 1];
	for (int i = 0; i <= IR_MAXDIM; i++)
		pos[i] = i;
	vars(L, k, -1, 0, pos, dim);
	L->cur++;
	KxId body = tr(L, k->body), idx[16];
	int n = 0, vc = -1;
	uint8_t *seen = calloc(L->q->nx + 1, 1);
	FADC_ASSERT(seen != NULL, "kir_layout: out of memory");
	relaid_loads(L, body, seen, idx, &n);
	free(seen);
	for (int i = 0; i < n && vc < 0; i++) {
		int cand = -1, ok = 1;
		for (int v = 0; v < k->rank + k->rrank && ok; v++) {
			int64_t c;
			if (!kx_affine_coef(L->q, idx[i], v, &c))
				ok = 0;
			else if (c == 1 && v < k->rank)
				cand = v;
			else if (c == 1)
				ok = 0;
		}
		if (ok && cand >= 0)
			vc = cand;
	}
	return vc;
}

// Whether expression id of p loads buffer buf (seen: per p id).
static int
loads_buf(const KProgram *p, KxId id, uint32_t buf, uint8_t *seen)
{
	if (!id || seen[id])
		return 0;
	seen[id] = 1;
	const Kx *x = &p->x[id];
	if (x->op == KX_LOAD && x->aux == buf)
		return 1;
	for (int i = 0; i < x->nin; i++)
		if (loads_buf(p, x->a[i], buf, seen))
			return 1;
	return 0;
}

// Whether p's kernel ki + 1 can take the split of kernel ki (channel
// variable vc) as its own second kernel.  kir_split_reductions leaves
// batch norm's statistics at the 64-channel layers as two kernels, a
// partial_sum over (c, n) of H W terms and a mean (or sum) over n of it;
// split again by channel (above), that was three launches: the channel
// partials, their sum per (c, n), and the mean.  The last two are one sum
// of the partials over (n, j) per channel.  So: kernel ki + 1 a plain sum,
// outside loops, with one parallel variable (ki's channel, its first) and
// ki's other parallel variables as its reduction variables in order, whose
// body is the load of ki's output at ki's store index (the same
// expression: the variables are numbered alike), that output a temporary
// read by no other kernel.
static int
csum_merges(Lay *L, uint32_t ki, int vc)
{
	const KProgram *p = L->p;
	if (vc != 0 || ki + 1 >= p->nk)
		return 0;
	const KKernel *k = &p->k[ki], *k2 = &p->k[ki + 1];
	if (k2->red != KR_SUM || k2->contraction || k2->host || k2->conv || k2->rank != 1 ||
	    k2->rrank != k->rank - 1 || k2->dim[0] != k->dim[0] ||
	    p->buf[k->out].kind != KB_TMP || L->geo[k->out].c)
		return 0;
	for (int t = 0; t < k2->rrank; t++)
		if (k2->rdim[t] != k->dim[t + 1])
			return 0;
	const Kx *b = &p->x[k2->body];
	if (b->op != KX_LOAD || b->aux != k->out || b->a[0] != k->index)
		return 0;
	for (uint32_t l = 0; l < p->nloop; l++)
		if (p->loop[l].begin <= ki + 1 && ki + 1 < p->loop[l].end)
			return 0;
	uint8_t *seen = calloc(p->nx + 1, 1);
	FADC_ASSERT(seen != NULL, "kir_layout: out of memory");
	int other = loads_buf(p, k2->index, k->out, seen) || loads_buf(p, k2->post, k->out, seen);
	for (uint32_t j = 0; j < p->nk && !other; j++) {
		const KKernel *kj = &p->k[j];
		if (j == ki + 1)
			continue;
		other = kj->host ? kj->hin == k->out || kj->hwork == k->out
		                 : loads_buf(p, kj->body, k->out, seen) ||
		                       loads_buf(p, kj->index, k->out, seen) ||
		                       loads_buf(p, kj->post, k->out, seen);
	}
	free(seen);
	return !other;
}

// A split's first kernel, as csum_second needs it.
typedef struct CsumSplit {
	int i, ra; // r_i is split into (j, l); the first kernel's parallel rank
	int64_t J; // j's extent
	int64_t dim[IR_MAXDIM]; // the first kernel's parallel extents
	uint32_t out; // its buffer (the partials)
} CsumSplit;

// Kernel k of p (its channel variable vc): the first kernel of its split
// (the partials) appended to q, *s for the second.  0 when no split fits
// IR_MAXDIM (nothing appended).
static int
csum_first(Lay *L, const KKernel *k, int vc, CsumSplit *s)
{
	KProgram *q = L->q;
	int m = k->rrank, i = 0;
	int64_t Lc = 1;
	for (; i < m; i++) {
		int64_t tail = 1;
		for (int t = i + 1; t < m; t++)
			tail *= k->rdim[t];
		if (tail > CSUM_TERMS && i < m - 1)
			continue; // r_i wholly parallel
		for (int64_t d = 1; d <= k->rdim[i] && d * tail <= CSUM_TERMS; d++)
			if (k->rdim[i] % d == 0)
				Lc = d;
		break;
	}
	int ra = k->rank + i + 1; // the first kernel's parallel rank
	if (ra > IR_MAXDIM)
		return 0;
	int64_t J = k->rdim[i] / Lc;
	// The first kernel: parallel (P without vc, r_0 .. r_i-1, j, vc),
	// reduced (l, r_i+1 ..).
	KKernel a = *k;
	int np = 0;
	for (int v = 0; v < k->rank; v++)
		if (v != vc) {
			a.dim[np] = k->dim[v];
			L->varx[v] = kx_var(q, np++, k->dim[v]);
		}
	for (int t = 0; t < i; t++) {
		a.dim[np] = k->rdim[t];
		L->varx[k->rank + t] = kx_var(q, np++, k->rdim[t]);
	}
	a.dim[np] = J;
	KxId jv = kx_var(q, np++, J);
	a.dim[np] = k->dim[vc];
	L->varx[vc] = kx_var(q, np++, k->dim[vc]);
	a.rank = np;
	for (int t = np; t < IR_MAXDIM; t++)
		a.dim[t] = 0;
	memset(a.rdim, 0, sizeof a.rdim);
	a.rrank = m - i;
	a.rdim[0] = Lc;
	L->varx[k->rank + i] = kx_iadd(q, kx_imul(q, jv, Lc), kx_var(q, ra, Lc));
	for (int t = i + 1; t < m; t++) {
		a.rdim[t - i] = k->rdim[t];
		L->varx[k->rank + t] = kx_var(q, ra + t - i, k->rdim[t]);
	}
	L->cur++;
	a.body = tr(L, k->body);
	DType vt = (DType)q->x[a.body].dtype;
	Shape sh = {ra, {0}};
	memcpy(sh.dim, a.dim, sizeof a.dim[0] * (size_t)ra);
	a.out = kir_buf_add(q, KB_TMP, 0, vt, &sh, k->node);
	KxId av[IR_MAXDIM];
	for (int v = 0; v < ra; v++)
		av[v] = kx_var(q, v, a.dim[v]);
	a.index = flat(q, av, a.dim, ra);
	a.post = kx_acc(q, vt);
	a.what = "channel_partial_sum";
	a.nfused = 0;
	*kir_kernel_add(q) = a;
	s->i = i;
	s->ra = ra;
	s->J = J;
	memcpy(s->dim, a.dim, sizeof s->dim);
	s->out = a.out;
	return 1;
}

// The second kernel of k's split s, appended to q: k's points, its
// partials summed over (r_0 .. r_i-1, j), k's post; with k2 (csum_merges)
// k2's instead: the partials summed over k2's reduction variables and j
// together, k2's post.
static void
csum_second(Lay *L, const KKernel *k, int vc, const KKernel *k2, const CsumSplit *s)
{
	KProgram *q = L->q;
	int i = s->i, ra = s->ra, np;
	int64_t J = s->J;
	KKernel a = {0};
	memcpy(a.dim, s->dim, sizeof a.dim);
	a.out = s->out;
	KxId av[IR_MAXDIM];
	if (k2) {
		// k2's point c, its partials summed over (n.., r_0 .. r_i-1, j):
		// variable 0 is c and the rest keep the numbers of the plain
		// second kernel below, n.. now reduced (vc == 0).
		KKernel b = *k2;
		np = 0;
		memset(b.rdim, 0, sizeof b.rdim);
		for (int v = 1; v < k->rank; v++) {
			b.rdim[np++] = k->dim[v];
			av[v - 1] = kx_var(q, v, k->dim[v]);
		}
		for (int t = 0; t < i; t++) {
			b.rdim[np++] = k->rdim[t];
			av[k->rank - 1 + t] = kx_var(q, k->rank + t, k->rdim[t]);
		}
		b.rdim[np++] = J;
		av[ra - 2] = kx_var(q, k->rank + i, J);
		av[ra - 1] = kx_var(q, 0, k->dim[0]);
		b.rrank = np;
		L->varx[0] = kx_var(q, 0, k2->dim[0]);
		for (int t = 0; t < k2->rrank; t++)
			L->varx[1 + t] = kx_var(q, 1 + t, k2->rdim[t]);
		L->cur++;
		b.body = kx_load(q, a.out, flat(q, av, a.dim, ra));
		KxId e = tr(L, k2->index);
		b.index = L->geo[k2->out].c ? nhwc(q, e, L->geo[k2->out]) : e;
		b.post = tr(L, k2->post);
		*kir_kernel_add(q) = b;
		return;
	}
	// The second: k's points, its partials summed over (r_0 .. r_i-1, j).
	KKernel b = *k;
	int64_t pdim[IR_MAXDIM + 1];
	int pos[IR_MAXDIM + 1];
	for (int t = 0; t <= IR_MAXDIM; t++)
		pos[t] = t;
	vars(L, k, -1, 0, pos, pdim); // identity (parallel numbering kept)
	np = 0;
	for (int v = 0; v < k->rank; v++)
		if (v != vc)
			av[np++] = kx_var(q, v, k->dim[v]);
	for (int t = 0; t < i; t++)
		av[np++] = kx_var(q, k->rank + t, k->rdim[t]);
	av[np++] = kx_var(q, k->rank + i, J);
	av[np++] = kx_var(q, vc, k->dim[vc]);
	b.rrank = i + 1;
	memcpy(b.rdim, k->rdim, sizeof k->rdim);
	b.rdim[i] = J;
	for (int t = i + 1; t < IR_MAXDIM; t++)
		b.rdim[t] = 0;
	L->cur++;
	b.body = kx_load(q, a.out, flat(q, av, a.dim, ra));
	KxId e = tr(L, k->index);
	b.index = L->geo[k->out].c ? nhwc(q, e, L->geo[k->out]) : e;
	b.post = tr(L, k->post);
	*kir_kernel_add(q) = b;
}

// Kernel k of p as its split's two kernels (csum_first, csum_second).
static int
csum_emit(Lay *L, const KKernel *k, int vc, const KKernel *k2)
{
	CsumSplit s;
	if (!csum_first(L, k, vc, &s))
		return 0;
	csum_second(L, k, vc, k2, &s);
	return 1;
}

// Sibling sums: p's kernels ki .. ki + n - 1 (n returned, at least 2, at
// most CSUM_SIBLINGS; 1 for none) are per-channel sums over the same
// domain, each splittable with the same channel variable vc and none
// merged with its consumer, none reading another's output: batch norm's
// backward sums sum(dy), sum(dy x^) and sum(dy (x - mean)) over one
// tensor's points.  Their splits' first kernels are then emitted together
// (then the second kernels), adjacent and alike, so that the CUDA
// launch plan runs them as one kernel that reads the operands they share
// once (cuda_multi_end: one pass over dy and x instead of three).
// With *merged set, the siblings are every other kernel, ki, ki + 2, ...,
// each merged with the kernel after it (csum_merges): the 64-channel
// layers' sums, which kir_split_reductions left as a partial_sum and its
// consumer each; their firsts are emitted together, then each consumer's
// second.  n counts the sums (2n kernels of p).
#define CSUM_SIBLINGS 4
static int
csum_siblings(Lay *L, uint32_t ki, int vc, int nomerge, int *merged)
{
	const KProgram *p = L->p;
	const KKernel *k = &p->k[ki];
	uint32_t n = 1;
	*merged = vc >= 0 && !nomerge && csum_merges(L, ki, vc);
	uint32_t st = *merged ? 2 : 1; // p's kernels per sum
	if (vc < 0)
		return 1;
	uint8_t *seen = calloc(p->nx + 1, 1);
	FADC_ASSERT(seen != NULL, "kir_layout: out of memory");
	while (n < CSUM_SIBLINGS && ki + st * n + st - 1 < p->nk) {
		uint32_t si = ki + st * n;
		const KKernel *s = &p->k[si];
		if (s->rank != k->rank || s->rrank != k->rrank ||
		    memcmp(s->dim, k->dim, sizeof k->dim) || memcmp(s->rdim, k->rdim, sizeof k->rdim) ||
		    csum_channel(L, s) != vc || (!nomerge && csum_merges(L, si, vc)) != *merged)
			break;
		// It reads nothing the earlier ones (and their consumers) write.
		int reads = 0;
		for (uint32_t j = ki; j < si && !reads; j++) {
			memset(seen, 0, p->nx + 1);
			reads = loads_buf(p, s->body, p->k[j].out, seen) ||
			        loads_buf(p, s->post, p->k[j].out, seen) || s->out == p->k[j].out ||
			        (*merged && p->k[si + 1].out == p->k[j].out);
		}
		if (reads)
			break;
		n++;
	}
	free(seen);
	return (int)n;
}

// ---------------------------------------------------------------- batch norm's statistics in one pass
// The prelude's batch norm takes mu = mean(x) and var = mean((x - mu)^2)
// per channel: two splits (above), the second reading x again and
// waiting for mu: forward per layer a channel_partial_sum, a mean, a
// second channel_partial_sum over x, a mean (resnet18's TF32 vjp: 40
// passes over the activations, 0.32 ms of partial sums eagerly).  The
// variance does not need mu first: with a shift s_c, any value near the
// channel's data,
//   var = mean((x - s)^2) - (mean(x - s))^2
// exactly, and rounded its relative error is about eps (1 + (mu - s)^2 /
// var) (the shifted-data algorithm; without the shift, (mu / sigma)^2 eps
// instead: the catastrophic cancellation of the textbook one-pass
// formula).  The shift is x at the channel's first point (image 0, pixel
// 0): a sample of the data, within a few sigma of mu but in a wild
// outlier.  So three sums over x that read nothing of each other: sum(x)
// for mu as before (its kernels unchanged, mu bit for bit what it was),
// sum(x - s) and sum((x - s)^2), whose first kernels run side by side as
// one launch reading x once (cuda_multi_end), and their three second
// kernels too.  The variance's buffer then holds m2 = mean((x - s)^2),
// and each of its loads in later kernels becomes var = max(m2 - m1^2, 0),
// m1 = mean(x - s) at the same index (the max for rounding: never below
// 0, where rsqrt(var + eps) needs var >= -eps); with the correction in
// the variance's own post that sum would read m1, another output of its
// launch, and run alone (FADC_CUDA_BN1PASS_POST=1, or where a convolution
// record or host step holds the buffer).
//
// The pattern, in q after the splits: A (channel_partial_sum of a term
// x: a load, or an expression of loads such as a convolution's output
// plus its bias), B (its second: the sum of A's partials, post P), C
// (channel_partial_sum of (x - M[c])^2, M B's output read at A's channel
// variable), D (C's second, the same index and post P as B).  Then A, A'
// (x - s), C' ((x - s)^2), B, B' (the sum of A''s partials, post P, a
// buffer of its own), D (its post P: m2), and max(m2 - B'^2, 0) for m2 in
// D's readers; s is x with every variable but the channel 0.  Outside
// loops only.
// FADC_CUDA_NO_BN1PASS=1 at compile time: the two passes (measurements).

static int env_on(const char *name);

// q's expression id with variable v replaced by vmap[v] where that is
// not 0 (memo: per id below nmemo, 0 = not done).
static KxId
subst_vars(KProgram *q, KxId id, const KxId *vmap, KxId *memo, uint32_t nmemo)
{
	if (!id)
		return 0;
	if (id < nmemo && memo[id])
		return memo[id];
	const Kx x = q->x[id]; // a copy: q->x grows below
	KxId a[3] = {0, 0, 0}, r;
	for (int i = 0; i < x.nin; i++)
		a[i] = subst_vars(q, x.a[i], vmap, memo, nmemo);
	if (x.op == KX_VAR)
		r = vmap[x.aux] ? vmap[x.aux] : id;
	else
		r = kx_remake(q, &x, a);
	if (id < nmemo)
		memo[id] = r;
	return r;
}

// Var's readers: q's expression id with each load of buffer v at e
// replaced by max(v[e] - m[e]^2, 0) (memo as subst_vars').
static KxId
var_readers(KProgram *q, KxId id, uint32_t v, uint32_t m, KxId *memo, uint32_t nmemo)
{
	if (!id)
		return 0;
	if (id < nmemo && memo[id])
		return memo[id];
	const Kx x = q->x[id];
	KxId a[3] = {0, 0, 0}, r;
	for (int i = 0; i < x.nin; i++)
		a[i] = var_readers(q, x.a[i], v, m, memo, nmemo);
	if (x.op == KX_LOAD && x.aux == v) {
		KxId m1 = kx_load(q, m, a[0]);
		r = kx_bin(q, KX_MAX, kx_bin(q, KX_SUB, kx_load(q, v, a[0]), kx_bin(q, KX_MUL, m1, m1)),
		           kx_const(q, 0, DT_F32));
	} else
		r = kx_remake(q, &x, a);
	if (id < nmemo)
		memo[id] = r;
	return r;
}

// Whether buffer b of q is read only through loads of printed kernels
// (no convolution record, host step or task output holds it).
static int
loads_only(const KProgram *q, uint32_t b)
{
	if (q->buf[b].kind != KB_TMP)
		return 0;
	for (uint32_t i = 0; i < q->nconv; i++)
		if (q->conv[i].out == b || q->conv[i].a == b || q->conv[i].b == b)
			return 0;
	for (uint32_t k = 0; k < q->nk; k++)
		if (q->k[k].host && (q->k[k].hin == b || q->k[k].hwork == b))
			return 0;
	return 1;
}

static int
is_cps(const KKernel *k)
{
	return k->what && !strcmp(k->what, "channel_partial_sum") && k->red == KR_SUM &&
	       !k->host && !k->contraction && !k->conv;
}

// Whether q's kernels i .. i + 3 are the pattern above (*vc: A's channel).
static int
bn_stats_at(const KProgram *q, uint32_t i, int *vc)
{
	const KKernel *A = &q->k[i], *B = &q->k[i + 1], *C = &q->k[i + 2], *D = &q->k[i + 3];
	if (!is_cps(A) || !is_cps(C) || is_cps(B) || is_cps(D) || B->red != KR_SUM ||
	    D->red != KR_SUM || B->host || D->host || B->contraction || D->contraction ||
	    B->conv || D->conv || A->rank < 1 || A->rank != C->rank || A->rrank != C->rrank ||
	    memcmp(A->dim, C->dim, sizeof A->dim) || memcmp(A->rdim, C->rdim, sizeof A->rdim) ||
	    B->rank != D->rank || B->rrank != D->rrank || memcmp(B->dim, D->dim, sizeof B->dim) ||
	    memcmp(B->rdim, D->rdim, sizeof B->rdim) || B->post != D->post || B->index != D->index ||
	    q->x[A->body].dtype != DT_F32 || q->buf[B->out].kind != KB_TMP ||
	    q->buf[D->out].kind != KB_TMP)
		return 0;
	const Kx *b = &q->x[B->body], *d = &q->x[D->body];
	if (b->op != KX_LOAD || b->aux != A->out || d->op != KX_LOAD || d->aux != C->out ||
	    d->a[0] != b->a[0])
		return 0;
	const Kx *c = &q->x[C->body];
	if (c->op != KX_MUL || c->a[0] != c->a[1])
		return 0;
	const Kx *t = &q->x[c->a[0]];
	if (t->op != KX_SUB || t->a[0] != A->body)
		return 0;
	const Kx *m = &q->x[t->a[1]];
	int v = A->rank - 1; // the split's channel: its first kernel's last parallel variable
	if (m->op != KX_LOAD || m->aux != B->out || q->x[m->a[0]].op != KX_VAR ||
	    q->x[m->a[0]].aux != (uint32_t)v)
		return 0;
	*vc = v;
	return 1;
}

// The rewrite above over q; the number of batch norms rewritten.
static int
bn_stats_one_pass(KProgram *q)
{
	if (q->nloop || env_on("FADC_CUDA_NO_BN1PASS"))
		return 0;
	// FADC_CUDA_BN1PASS_POST=1: the variance's correction in its own
	// sum's post, that sum a launch of its own (measurements).
	int post = env_on("FADC_CUDA_BN1PASS_POST");
	int n = 0;
	for (uint32_t i = 0; i + 3 < q->nk; i++) {
		int vc;
		if (!bn_stats_at(q, i, &vc))
			continue;
		KKernel A = q->k[i], B = q->k[i + 1], C = q->k[i + 2], D = q->k[i + 3];
		KxId vmap[2 * IR_MAXDIM] = {0};
		for (int v = 0; v < A.rank + A.rrank; v++)
			if (v != vc)
				vmap[v] = kx_iconst(q, 0);
		uint32_t nmemo = q->nx + 1;
		KxId *memo = calloc(nmemo, sizeof *memo);
		FADC_ASSERT(memo != NULL, "kir_layout: out of memory");
		KxId s0 = subst_vars(q, A.body, vmap, memo, nmemo); // s: x at the channel's first point
		free(memo);
		KxId t = kx_bin(q, KX_SUB, A.body, s0); // x - s
		KKernel A2 = A, B2 = B;
		A2.body = t;
		A2.out = kir_buf_add(q, KB_TMP, 0, q->buf[A.out].dtype, &q->buf[A.out].shape, A.node);
		A2.nfused = 0;
		C.body = kx_bin(q, KX_MUL, t, t);
		B2.out = kir_buf_add(q, KB_TMP, 0, q->buf[B.out].dtype, &q->buf[B.out].shape, B.node);
		B2.body = kx_load(q, A2.out, q->x[B.body].a[0]);
		B2.nfused = 0;
		// var = max(mean((x - s)^2) - m1^2, 0), m1 = B''s mean(x - s): in
		// each reader of D's output, so that D's post stays B's and D runs
		// in B's and B''s launch (cuda_multi_end: no kernel of a launch may
		// read another's output); where another holds it, in D's post.
		int readers = !post && loads_only(q, D.out);
		if (!readers) {
			KxId m1 = kx_load(q, B2.out, D.index);
			D.post = kx_bin(q, KX_MAX, kx_bin(q, KX_SUB, D.post, kx_bin(q, KX_MUL, m1, m1)),
			                kx_const(q, 0, DT_F32));
		}
		kir_kernel_add(q);
		kir_kernel_add(q);
		memmove(&q->k[i + 6], &q->k[i + 4], (q->nk - 2 - (i + 4)) * sizeof *q->k);
		q->k[i] = A;
		q->k[i + 1] = A2;
		q->k[i + 2] = C;
		q->k[i + 3] = B;
		q->k[i + 4] = B2;
		q->k[i + 5] = D;
		if (readers) {
			uint32_t nvm = q->nx + 1;
			KxId *vm = calloc(nvm, sizeof *vm);
			FADC_ASSERT(vm != NULL, "kir_layout: out of memory");
			for (uint32_t j = i + 6; j < q->nk; j++) {
				KKernel *r = &q->k[j];
				if (r->host)
					continue;
				r->index = var_readers(q, r->index, D.out, B2.out, vm, nvm);
				r->body = var_readers(q, r->body, D.out, B2.out, vm, nvm);
				r->post = var_readers(q, r->post, D.out, B2.out, vm, nvm);
			}
			free(vm);
		}
		i += 5;
		n++;
	}
	return n;
}

// ---------------------------------------------------------------- the pass

// ---------------------------------------------------------------- cheap producers inlined
// Batch norm's backward reads the masked gradient g = dy * (r > 0) (the
// ReLU's adjoint; r the stored activation) twice: its sibling sums and its
// dx kernel.  As lowered, g is a kernel of its own (fusion, codegen/fuse.c,
// stores a value over two full-size operands): it reads dy and r and
// writes g, then the sums and dx read g again.  With g's arithmetic in its
// readers instead, the sums and dx read dy and r where they read g: one
// pass over memory less of four (resnet18's stem: 103 MB) and one launch
// less, on the CUDA copy only (the CPU code is the lowered program, and the
// sums there are three kernels, each a reader).  So an elementwise kernel
// outside loops whose body is cheap (INLINE_MAX_COST), whose every variable
// is inside a load at its own store index s (at most INLINE_MAX_LOADS
// buffers, none written again before its last reader), and whose output is
// a temporary written by it alone and read only by printed kernels (no
// convolution record, GEMM, host step), at most INLINE_MAX_READERS groups
// of them (a run of sibling per-channel partial sums, one launch, counts
// once), is inlined: each reader's load of it at index t becomes its body
// with those loads at t, computing the same value (the same ops in the same
// order on the same operands: bit-identical).  Only where each reader stays
// at most VEC4_COST (the float4 forms' bound, codegen/cuda_sched.c) and
// reads each element at most once (points times terms at most the output's
// elements: a window op reading it per tap, max_pool's gradient, would
// recompute it per tap; a broadcast per element).  The memory plan is then
// made again (the operands live longer).
// **Opt-in** (FADC_CUDA_INLINE=1 at compile time): on the H200 (2026-11-29,
// docs/PERFORMANCE.md, "Short window reductions in four lanes") resnet18's
// TF32 vjp ran 4.978 ms with it against 4.911 without: the sibling sums
// reading two operands for one cost more (channel_partial_sums 401 -> 512
// us eagerly) than the masks' passes saved, and its first rule (no
// read-once bound) put the stem's mask into max_pool's gradient, per tap
// (91 -> 172 us).  The read-once bound above is the fix of the second;
// that form is not measured.
#define INLINE_MAX_COST 24
#define INLINE_MAX_LOADS 2
#define INLINE_MAX_READERS 2
#define VEC4_COST 64

static int env_on(const char *name);

// Whether e's variables are all inside loads at index s (its loads'
// buffers into bufs), with no sampler, step or accumulator.
static int
own_loads(const KProgram *q, KxId e, KxId s, uint32_t *bufs, int *nb)
{
	const Kx *x = &q->x[e];
	switch ((KxOp)x->op) {
	case KX_LOAD:
		if (x->a[0] != s)
			return 0;
		for (int i = 0; i < *nb; i++)
			if (bufs[i] == x->aux)
				return 1;
		if (*nb == INLINE_MAX_LOADS)
			return 0;
		bufs[(*nb)++] = x->aux;
		return 1;
	case KX_VAR:
	case KX_RAND:
	case KX_RUNSEED:
	case KX_STEP:
	case KX_ACC:
		return 0;
	default:
		for (int i = 0; i < x->nin; i++)
			if (x->a[i] && !own_loads(q, x->a[i], s, bufs, nb))
				return 0;
		return 1;
	}
}

// e with its loads at index s read at index t instead.
static KxId
at_index(KProgram *q, KxId e, KxId s, KxId t)
{
	const Kx x = q->x[e];
	if (x.op == KX_LOAD)
		return kx_load(q, x.aux, t);
	if (!x.nin)
		return e;
	KxId a[3] = {0, 0, 0};
	for (int i = 0; i < x.nin; i++)
		a[i] = x.a[i] ? at_index(q, x.a[i], s, t) : 0;
	return kx_remake(q, &x, a);
}

// e with every load of buffer b at index t replaced by body's value there
// (body's loads at s); memo over the expressions that existed before.
static KxId
subst(KProgram *q, KxId e, uint32_t b, KxId body, KxId s, KxId *memo, uint32_t nx0)
{
	if (!e)
		return 0;
	if (e < nx0 && memo[e])
		return memo[e];
	const Kx x = q->x[e];
	KxId r;
	if (x.op == KX_LOAD && x.aux == b)
		r = at_index(q, body, s, x.a[0]);
	else if (!x.nin)
		r = e;
	else {
		KxId a[3] = {0, 0, 0};
		for (int i = 0; i < x.nin; i++)
			a[i] = subst(q, x.a[i], b, body, s, memo, nx0);
		r = a[0] == x.a[0] && a[1] == x.a[1] && a[2] == x.a[2] ? e : kx_remake(q, &x, a);
	}
	if (e < nx0)
		memo[e] = r;
	return r;
}

static int
reads_buf(const KProgram *q, const KKernel *k, uint32_t b, uint8_t *seen)
{
	memset(seen, 0, q->nx + 1);
	return loads_buf(q, k->body, b, seen) || loads_buf(q, k->post, b, seen) ||
	       loads_buf(q, k->index, b, seen);
}

// Inlines what it can (above); the number of kernels inlined.
static int
inline_cheap(KProgram *q)
{
	if (q->nloop || !env_on("FADC_CUDA_INLINE"))
		return 0;
	int n = 0;
	uint8_t *seen = malloc(q->nx + 1);
	uint32_t *rd = calloc(q->nk + 1, sizeof *rd);
	FADC_ASSERT(seen && rd, "kir_layout: out of memory");
	for (uint32_t pi = 0; pi < q->nk; pi++) {
		const KKernel *P = &q->k[pi];
		uint32_t B = P->out, ops[INLINE_MAX_LOADS];
		int nops = 0;
		if (P->red || P->host || P->contraction || P->conv || q->buf[B].kind != KB_TMP ||
		    !P->body || kx_cost(q, P->body) > INLINE_MAX_COST ||
		    !own_loads(q, P->body, P->index, ops, &nops))
			continue;
		int ok = 1;
		for (uint32_t i = 0; i < q->nconv && ok; i++)
			ok = q->conv[i].out != B && q->conv[i].a != B && q->conv[i].b != B;
		// The readers (after P only: B written by P alone), each printed.
		uint32_t nrd = 0, groups = 0;
		seen = realloc(seen, q->nx + 1);
		FADC_ASSERT(seen, "kir_layout: out of memory");
		for (uint32_t j = 0; j < q->nk && ok; j++) {
			const KKernel *k = &q->k[j];
			if (j != pi && k->out == B)
				ok = 0;
			else if (j != pi && !k->host && reads_buf(q, k, B, seen)) {
				if (j < pi || k->contraction || k->conv ||
				    kir_kernel_points(k) * kir_kernel_terms(k) > kir_kernel_points(P))
					ok = 0;
				else {
					const KKernel *pk = nrd ? &q->k[rd[nrd - 1]] : NULL;
					int sib = pk && rd[nrd - 1] + 1 == j && k->what && pk->what &&
					          !strcmp(k->what, "channel_partial_sum") &&
					          !strcmp(pk->what, "channel_partial_sum") && k->rank == pk->rank &&
					          !memcmp(k->dim, pk->dim, sizeof k->dim);
					groups += !sib;
					rd[nrd++] = j;
				}
			} else if (j != pi && k->host && (k->hin == B || k->hwork == B))
				ok = 0;
		}
		if (!ok || !nrd || groups > INLINE_MAX_READERS)
			continue;
		// The operands unchanged until the last reader.
		for (uint32_t j = pi + 1; j <= rd[nrd - 1] && ok; j++)
			for (int i = 0; i < nops && ok; i++)
				ok = q->k[j].out != ops[i] && !(q->k[j].host && q->k[j].hwork == ops[i]);
		if (!ok)
			continue;
		// Rewrite each reader, keeping it within VEC4_COST where it was.
		KKernel *nk = malloc(nrd * sizeof *nk);
		uint32_t nx0 = q->nx;
		KxId *memo = calloc(nx0 + 1, sizeof *memo);
		FADC_ASSERT(nk && memo, "kir_layout: out of memory");
		KxId body = P->body, s = P->index;
		for (uint32_t r = 0; r < nrd && ok; r++) {
			nk[r] = q->k[rd[r]];
			int64_t c0 = kx_cost(q, nk[r].body);
			nk[r].body = subst(q, nk[r].body, B, body, s, memo, nx0);
			nk[r].post = subst(q, nk[r].post, B, body, s, memo, nx0);
			ok = q->x[nk[r].body].dtype == q->x[q->k[rd[r]].body].dtype &&
			     (c0 > VEC4_COST || kx_cost(q, nk[r].body) <= VEC4_COST);
		}
		free(memo);
		if (ok) {
			for (uint32_t r = 0; r < nrd; r++)
				q->k[rd[r]] = nk[r];
			memmove(&q->k[pi], &q->k[pi + 1], (q->nk - pi - 1) * sizeof *q->k);
			q->nk--;
			pi--;
			n++;
		}
		free(nk);
	}
	free(seen);
	free(rd);
	return n;
}

static int
env_on(const char *name)
{
	const char *v = getenv(name);
	return v && *v && strcmp(v, "0");
}

// Off for strict fp32 unless FADC_CUDA_NHWC=1: measured on an H200
// (docs/PERFORMANCE.md, "Channels-last activations"), resnet18's strict
// vjp, jvp and vhp were 6-10% slower channels-last and took 0.2 GiB more
// (cuDNN's fp32 engines without tensor cores gain nothing from NHWC),
// where with TF32 they were 13-22% faster.
static int
layout_off(int tf32)
{
	return env_on("FADC_CUDA_NO_NHWC") || (!tf32 && !env_on("FADC_CUDA_NHWC"));
}

KProgram *
kir_layout_nhwc(const KProgram *p, int tf32, int *nrelaid)
{
	if (nrelaid)
		*nrelaid = 0;
	if (!p->nconv || layout_off(tf32))
		return NULL;
	Lay L = {.p = p};
	L.geo = calloc(p->nbuf + 1, sizeof *L.geo);
	L.veto = calloc(p->nbuf + 1, 1);
	FADC_ASSERT(L.geo && L.veto, "kir_layout: out of memory");
	choose(&L);
	int n = 0;
	for (uint32_t b = 0; b < p->nbuf; b++)
		n += L.geo[b].c != 0;
	if (!n) {
		free(L.geo);
		free(L.veto);
		return NULL;
	}
	if (nrelaid)
		*nrelaid = n;
	// The copy: buffers (with the memory plan), loops, convolutions and
	// the task's tables as they are.
	KProgram *q = kir_program_new(p->name, p->fcompute);
	L.q = q;
	for (uint32_t b = 0; b < p->nbuf; b++) {
		const KBuf *kb = &p->buf[b];
		uint32_t nb = kir_buf_add(q, kb->kind, kb->index, kb->dtype, &kb->shape, kb->node);
		q->buf[nb] = *kb;
	}
	if (p->nloop) {
		arena_grow(q->arena, (void **)&q->loop, &q->cloop, p->nloop, sizeof *q->loop);
		memcpy(q->loop, p->loop, p->nloop * sizeof *p->loop);
		q->nloop = p->nloop;
	}
	arena_grow(q->arena, (void **)&q->conv, &q->cconv, p->nconv, sizeof *q->conv);
	memcpy(q->conv, p->conv, p->nconv * sizeof *p->conv);
	q->nconv = p->nconv;
	for (uint32_t i = 0; i < q->nconv; i++) {
		KConv *v = &q->conv[i];
		v->nhwc = (L.geo[v->out].c ? 1u : 0u) | (L.geo[v->a].c ? 2u : 0u) |
		          (L.geo[v->b].c ? 4u : 0u);
	}
	q->ninput = p->ninput;
	q->noutput = p->noutput;
	q->inbuf = arena_alloc_array(q->arena, p->ninput + 1, sizeof *q->inbuf);
	q->outbuf = arena_alloc_array(q->arena, p->noutput + 1, sizeof *q->outbuf);
	memcpy(q->inbuf, p->inbuf, p->ninput * sizeof *p->inbuf);
	memcpy(q->outbuf, p->outbuf, p->noutput * sizeof *p->outbuf);
	q->arena_bytes = p->arena_bytes;
	q->naive_bytes = p->naive_bytes;
	q->live_bytes = p->live_bytes;
	// The kernels, their expressions rebuilt.
	L.memo = calloc(p->nx + 1, sizeof *L.memo);
	L.stamp = calloc(p->nx + 1, sizeof *L.stamp);
	FADC_ASSERT(L.memo && L.stamp, "kir_layout: out of memory");
	uint32_t *at = calloc(p->nk + 1, sizeof *at); // p's kernel -> q's
	int nsplit = 0;
	// FADC_CUDA_NO_CSUM=1 (at compile time): per-channel sums over relaid
	// tensors stay one kernel, for the printer's own column form
	// (cuda_blockred_plan) to take: a measurement switch.
	int nocsum = env_on("FADC_CUDA_NO_CSUM");
	// FADC_CUDA_NO_CSUM_MERGE=1: a split's second kernel never takes its
	// consumer's sum (csum_merges; measurements).
	int nomerge = env_on("FADC_CUDA_NO_CSUM_MERGE");
	// FADC_CUDA_NO_CSUM_SIB=1: sibling splits keep their kernels in order
	// (each partial kernel before its own second; measurements).
	int nosib = env_on("FADC_CUDA_NO_CSUM_SIB");
	FADC_ASSERT(at != NULL, "kir_layout: out of memory");
	for (uint32_t ki = 0; ki < p->nk; ki++) {
		KKernel k = p->k[ki];
		at[ki] = q->nk;
		int vc = nocsum ? -1 : csum_channel(&L, &p->k[ki]);
		int mg = 0, nsib = nosib ? 1 : csum_siblings(&L, ki, vc, nomerge, &mg);
		if (nsib > 1) { // the first kernels together, then the second ones
			// (Their domains are equal, so each split fits as the first's does.)
			CsumSplit sp[CSUM_SIBLINGS];
			uint32_t nk0 = q->nk, st = mg ? 2 : 1;
			if (csum_first(&L, &p->k[ki], vc, &sp[0])) {
				for (int j = 1; j < nsib; j++)
					FADC_ASSERT(csum_first(&L, &p->k[ki + st * (uint32_t)j], vc, &sp[j]),
					            "kir_layout: sibling sums split differently");
				for (int j = 0; j < nsib; j++) {
					uint32_t kj = ki + st * (uint32_t)j;
					at[kj] = nk0 + (uint32_t)j;
					if (mg)
						at[kj + 1] = q->nk;
					csum_second(&L, &p->k[kj], vc, mg ? &p->k[kj + 1] : NULL, &sp[j]);
				}
				nsplit += nsib;
				ki += st * (uint32_t)nsib - 1;
				continue;
			}
		}
		int merge = vc >= 0 && !nomerge && csum_merges(&L, ki, vc);
		if (vc >= 0 && csum_emit(&L, &p->k[ki], vc, merge ? &p->k[ki + 1] : NULL)) {
			nsplit++;
			if (merge) // p's kernel ki + 1 is q's last
				at[++ki] = q->nk - 1;
			continue;
		}
		kernel_vars(&L, &k); // k's rank and dims may change
		L.cur++;
		if (!k.host) {
			KxId e = tr(&L, k.index);
			k.index = e && L.geo[k.out].c ? nhwc(q, e, L.geo[k.out]) : e;
			k.body = tr(&L, k.body);
			k.post = tr(&L, k.post);
		}
		*kir_kernel_add(q) = k;
	}
	at[p->nk] = q->nk;
	for (uint32_t l = 0; l < q->nloop; l++) { // kernels inserted before a loop move it
		q->loop[l].begin = at[q->loop[l].begin];
		q->loop[l].end = at[q->loop[l].end];
	}
	free(at);
	q->uses_runseed = p->uses_runseed;
	q->remat_goal = p->remat_goal; // the goal of p's peak, not of q's lowered one
	nsplit += bn_stats_one_pass(q);
	int ninl = inline_cheap(q);
	if (nsplit || ninl) // new buffers, longer lives: a plan of q's own (the caller sizes the arena for both)
		cg_plan(q);
	free(L.memo);
	free(L.stamp);
	free(L.geo);
	free(L.veto);
	kir_program_trim(q);
	return q;
}
