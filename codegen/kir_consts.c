// codegen/kir_consts.c -- float constants out of the kernels' text.
//
// A one-line edit of a model that changes a constant (a batch norm's eps)
// changed the text of the kernels that use it, and so their compiled
// code's cache keys, and it split kernels that were shared because their
// text was equal (the stem's batch norm and layer1's, both of 64 channels,
// are one function until their eps differ).  kir_consts takes a kernel's
// non-trivial float constants out of its expressions: each becomes a load
// at a constant index of a small buffer of the kernel's own (a "view"),
// so two kernels differing only in such constants print (CUDA) and key
// (LLVM's sig_walk) identically, share one function, and keep their cache
// entries when a constant changes.
//
// Where the values come from: one table buffer per float dtype at the end
// of the task's arena, written by a kernel of its own put first in the
// task (its text holds the values: the only code a constant's change
// recompiles); the views are placed inside the table (each at a 64-byte
// boundary), so a kernel reads the values the first kernel wrote.  The
// table lives the whole task, so the memory plan's placement is not
// touched: the pass runs after it, on the program each backend prints
// (codegen/compile.c), and grows the arena by the table.  No runtime or
// artifact change: it is one more kernel and a few more buffers.
//
// Bit-identical: a view holds the constant rounded to its dtype, as
// kx_const rounded it, and a load of it in its own dtype is that value;
// neither LLVM (no fast-math flags) nor NVRTC (IEEE division and square
// root) rewrites arithmetic by a constant into something that rounds
// differently, except by powers of two, which stay literals.
//
// What stays a literal (its value matters to a printer or to folding):
// zero, integers and powers of two (x * 0.5, max(x, 0), the Philox and
// polygamma helpers' arguments), infinities and NaNs, the polygamma order
// and a power's exponent (codegen/cuda.c's pg_special, LLVM's pow), a
// sampler's operands, and anything in index arithmetic (only float
// subexpressions are walked: a load's index, an I64 operand, are not).
// A task whose CUDA temporaries are private to a block (cuda_tmp_private:
// each buffer its own shared array) gets no views: the caller skips it.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kir.h"

// Is constant x worth taking out (see above)?
static int
movable(const Kx *x)
{
	if (x->op != KX_CONST || (x->dtype != DT_F32 && x->dtype != DT_F64))
		return 0;
	double v = x->f;
	if (!isfinite(v) || v == 0 || v == trunc(v))
		return 0;
	int e;
	double m = frexp(fabs(v), &e);
	return m != 0.5; // 2^k
}

typedef struct View {
	uint32_t buf; // its buffer, 0 until the kernel's first constant of the dtype
	uint32_t n; // values
	double *v;
	uint32_t cap;
} View;

typedef struct Walk {
	KProgram *p;
	KxId *memo; // old id -> new id + 1 (this kernel's; cleared after)
	KxId *seen; // the ids memoized, to clear
	uint32_t nseen, cseen;
	View view[2]; // F32, F64
	int nviewbufs;
} Walk;

static int
dslot(DType dt)
{
	return dt == DT_F64;
}

// The load that replaces constant c (of kernel being walked).
static KxId
take(Walk *w, const Kx *c)
{
	KProgram *p = w->p;
	View *vw = &w->view[dslot((DType)c->dtype)];
	uint32_t j = 0;
	while (j < vw->n && memcmp(&vw->v[j], &c->f, sizeof c->f))
		j++;
	if (j == vw->n) {
		if (vw->n == vw->cap) {
			vw->cap = vw->cap ? 2 * vw->cap : 8;
			vw->v = realloc(vw->v, vw->cap * sizeof *vw->v);
			FADC_ASSERT(vw->v != NULL, "kir_consts: out of memory");
		}
		vw->v[vw->n++] = c->f;
	}
	if (!vw->buf) {
		Shape s;
		memset(&s, 0, sizeof s);
		s.rank = 1;
		s.dim[0] = 1; // its length set once the kernel is walked
		vw->buf = kir_buf_add(p, KB_TMP, 0, (DType)c->dtype, &s, 0);
	}
	return kx_load(p, vw->buf, kx_iconst(p, (int64_t)j));
}

// Expression id rebuilt with its movable constants as loads of the views,
// walking operands in their order (kx_bin's canonical one: a function of
// the expression, not of ids), so that a constant's slot is a function of
// the kernel's structure.  parent/pos: the user (0: a root).
static KxId
walk(Walk *w, KxId id, uint8_t parent, int pos)
{
	if (!id)
		return 0;
	KProgram *p = w->p;
	Kx x = p->x[id]; // a copy: interning below may move p->x
	if (x.op == KX_CONST) {
		int keep = (parent == KX_POLYGAMMA && pos == 0) || (parent == KX_POW && pos == 1) ||
		           parent == KX_RAND;
		// A view's load has its storage dtype's compute dtype: only a
		// constant of that dtype (an f32 one in an f64 program is not).
		keep |= kir_compute_dtype(p, (DType)x.dtype) != (DType)x.dtype;
		return !keep && movable(&x) ? take(w, &x) : id;
	}
	if (w->memo[id])
		return w->memo[id] - 1;
	KxId a[3] = {0, 0, 0};
	int changed = 0;
	for (int i = 0; i < x.nin; i++) {
		a[i] = x.a[i];
		DType dt = (DType)p->x[x.a[i]].dtype;
		if (x.op == KX_LOAD || x.op == KX_RAND || !(dt == DT_F32 || dt == DT_F64 || dt == DT_BOOL))
			continue; // index arithmetic, a sampler: as it is
		a[i] = walk(w, x.a[i], x.op, i);
		changed |= a[i] != x.a[i];
	}
	KxId r = changed ? kx_remake(p, &x, a) : id;
	if (w->nseen == w->cseen) {
		w->cseen = w->cseen ? 2 * w->cseen : 256;
		w->seen = realloc(w->seen, w->cseen * sizeof *w->seen);
		FADC_ASSERT(w->seen != NULL, "kir_consts: out of memory");
	}
	w->seen[w->nseen++] = id;
	w->memo[id] = r + 1;
	return r;
}

// A balanced tree of selects over variable v in [lo, hi): val[v].
static KxId
fill_tree(KProgram *p, KxId v, const double *val, int64_t lo, int64_t hi, DType dt)
{
	if (hi - lo == 1)
		return kx_const(p, val[lo], dt);
	int64_t mid = lo + (hi - lo) / 2;
	KxId l = fill_tree(p, v, val, lo, mid, dt), r = fill_tree(p, v, val, mid, hi, dt);
	return kx_select(p, kx_cmp(p, KC_LT, v, kx_iconst(p, mid)), l, r);
}

static int64_t
align64(int64_t b)
{
	return (b + 63) & ~(int64_t)63;
}

int
kir_consts(KProgram *p)
{
	if (p->consts_done)
		return 0;
	p->consts_done = 1;
	const char *env = getenv("FADC_KIR_CONSTS"); // 0: off (a measurement switch)
	if (env && !strcmp(env, "0"))
		return 0;
	// Not for tasks of more than KC_MAX_KERNELS kernels: the table's fill
	// kernel is a select tree over every value, and a 16,000-statement
	// chain's tasks (16,372 kernels in its vjp) made it tens of thousands
	// of values that LLVM could not compile in 900 MB (tests/cli/
	// cli-chain-long.sh).  detr's largest task has 2,458.
	enum { KC_MAX_KERNELS = 4096 };
	if (p->nk > KC_MAX_KERNELS)
		return 0;
	uint32_t nk = p->nk, nx0 = p->nx;
	Walk w;
	memset(&w, 0, sizeof w);
	w.p = p;
	w.memo = calloc(nx0 + 1, sizeof *w.memo);
	// Per dtype: the table's values (each view at a 64-byte boundary) and
	// each view's buffer and first element.
	double *tab[2] = {NULL, NULL};
	int64_t ntab[2] = {0, 0}, ctab[2] = {0, 0};
	uint32_t *vbuf = NULL, nv = 0, cv = 0;
	int64_t *vstart = NULL;
	int *vdt = NULL;
	int32_t *vlast = NULL;
	FADC_ASSERT(w.memo != NULL, "kir_consts: out of memory");
	for (uint32_t ki = 0; ki < nk; ki++) {
		KKernel *k = &p->k[ki];
		if (k->host)
			continue;
		for (int d = 0; d < 2; d++)
			w.view[d].buf = w.view[d].n = 0;
		KxId body = walk(&w, k->body, 0, 0);
		KxId post = walk(&w, k->post, 0, 0);
		k = &p->k[ki];
		k->body = body;
		k->post = post;
		for (uint32_t i = 0; i < w.nseen; i++)
			w.memo[w.seen[i]] = 0;
		w.nseen = 0;
		for (int d = 0; d < 2; d++) {
			View *vw = &w.view[d];
			if (!vw->buf)
				continue;
			size_t es = d ? 8 : 4;
			int64_t per = 64 / (int64_t)es, start = (ntab[d] + per - 1) / per * per;
			if (start + vw->n > ctab[d]) {
				ctab[d] = 2 * (start + vw->n) + 64;
				tab[d] = realloc(tab[d], (size_t)ctab[d] * sizeof *tab[d]);
				FADC_ASSERT(tab[d] != NULL, "kir_consts: out of memory");
			}
			for (int64_t e = ntab[d]; e < start; e++)
				tab[d][e] = 0;
			memcpy(tab[d] + start, vw->v, vw->n * sizeof *vw->v);
			ntab[d] = start + vw->n;
			KBuf *b = &p->buf[vw->buf];
			b->shape.dim[0] = vw->n;
			b->bytes = (int64_t)(vw->n * es);
			if (nv == cv) {
				cv = cv ? 2 * cv : 64;
				vbuf = realloc(vbuf, cv * sizeof *vbuf);
				vstart = realloc(vstart, cv * sizeof *vstart);
				vdt = realloc(vdt, cv * sizeof *vdt);
				vlast = realloc(vlast, cv * sizeof *vlast);
				FADC_ASSERT(vbuf && vstart && vdt && vlast, "kir_consts: out of memory");
			}
			vbuf[nv] = vw->buf;
			vstart[nv] = start;
			vdt[nv] = d;
			vlast[nv] = (int32_t)ki;
			nv++;
		}
	}
	free(w.memo);
	free(w.seen);
	free(w.view[0].v);
	free(w.view[1].v);
	int nfill = (ntab[0] > 0) + (ntab[1] > 0);
	if (!nfill) {
		free(vbuf);
		free(vstart);
		free(vdt);
		free(vlast);
		return 0;
	}
	// The tables at the arena's end, the views inside them.
	int64_t off = align64(p->arena_bytes), toff[2] = {0, 0};
	uint32_t tbuf[2] = {0, 0};
	for (int d = 0; d < 2; d++) {
		if (!ntab[d])
			continue;
		Shape s;
		memset(&s, 0, sizeof s);
		s.rank = 1;
		s.dim[0] = ntab[d];
		tbuf[d] = kir_buf_add(p, KB_TMP, 0, d ? DT_F64 : DT_F32, &s, 0);
		p->buf[tbuf[d]].offset = toff[d] = off;
		off = align64(off + p->buf[tbuf[d]].bytes);
	}
	p->arena_bytes = off;
	// The fill kernels first: every index of a kernel, loop and life moves.
	FADC_ASSERT(p->nk == nk, "kir_consts: kernels added by the walk");
	for (int f = 0; f < nfill; f++)
		kir_kernel_add(p);
	memmove(p->k + nfill, p->k, nk * sizeof *p->k);
	for (uint32_t l = 0; l < p->nloop; l++) {
		p->loop[l].begin += (uint32_t)nfill;
		p->loop[l].end += (uint32_t)nfill;
	}
	for (uint32_t b = 0; b < p->nbuf; b++) {
		if (p->buf[b].first >= 0)
			p->buf[b].first += nfill;
		if (p->buf[b].last >= 0)
			p->buf[b].last += nfill;
	}
	int f = 0;
	int32_t tlast[2] = {0, 0};
	for (uint32_t i = 0; i < nv; i++) {
		KBuf *b = &p->buf[vbuf[i]];
		b->offset = toff[vdt[i]] + vstart[i] * (int64_t)kir_dtype_size(b->dtype);
		b->first = 0;
		b->last = vlast[i] + nfill;
		if (b->last > tlast[vdt[i]])
			tlast[vdt[i]] = b->last;
	}
	for (int d = 0; d < 2; d++) {
		if (!ntab[d])
			continue;
		KKernel *k = &p->k[f];
		memset(k, 0, sizeof *k);
		k->out = tbuf[d];
		k->rank = 1;
		k->dim[0] = ntab[d];
		k->red = KR_NONE;
		KxId v = kx_var(p, 0, ntab[d]);
		k = &p->k[f];
		k->index = v;
		KxId body = fill_tree(p, v, tab[d], 0, ntab[d], d ? DT_F64 : DT_F32);
		k = &p->k[f];
		k->body = body;
		k->what = "kir_consts"; // compile.c puts its CUDA function in a piece of its own
		p->buf[tbuf[d]].first = f;
		p->buf[tbuf[d]].last = tlast[d];
		f++;
	}
	free(tab[0]);
	free(tab[1]);
	free(vbuf);
	free(vstart);
	free(vdt);
	free(vlast);
	return (int)nv;
}
