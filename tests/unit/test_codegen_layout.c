// tests/unit/test_codegen_layout.c -- channels-last activations
// (codegen/kir_layout.c) checked by running both programs.
//
// The oracle is a small interpreter of the kernel IR written here, not the
// backends (which print the program the pass produced, so they cannot
// judge it): every kernel's points in order, its expression DAG evaluated
// per point (per term in a reduction), each buffer its own array (no
// memory plan, so a wrong index cannot hide behind reused bytes), the
// temporaries poisoned with NaN before the run.  The original program
// and the relaid one run on the same inputs, and their outputs must be
// equal bit for bit: the pass changes indices and the order of parallel
// points, never an operation or a reduction's order, so any difference is
// a wrong index (a load of an element the relaid kernel never wrote reads
// the NaN poison, or another element's value).  Also checked: the pass
// relaid activations (and marked the convolution records), a kernel whose
// store was contiguous along its last variable still is, and the original
// program is untouched (the CPU backend prints it).
//
// Programs: resnet18 at N=2, H=32, C=8 (every convolution of layers 1 to
// 3 an im2col + GEMM with a cuDNN record) vjp, jvp and vhp, and
// tests/gpu/conv.ir (stride 2 with padding on an odd image, dilation 2,
// 1x1, 1-d, batch 1 and 3, channel counts 3, 12, 13, 19, 21, 37), every
// task, and fcn_resnet at N=2, H=32, C=4 (dilated bottlenecks, a 1x1
// head, an upsampling) vjp.  About 12 s of one core.
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "codegen.h"
#include "frontend.h"
#include "passes.h"
#include "testmodel.h"
#include "testutil.h"

// ---------------------------------------------------------------- the interpreter

typedef struct Run {
	const KProgram *p;
	double **mem; // per buffer: its elements
	int64_t *numel;
	int64_t var[2 * IR_MAXDIM];
	double acc;
	double *val; // per expression: its value at this evaluation
	uint32_t *seen, stamp;
	int bad; // an index outside its buffer
} Run;

// A value stored in a buffer of dtype dt.  f32 buffers hold the double
// unrounded: the relaid program may sum in another order (channel-inner
// partial sums), and a rounding to f32 at a different place would make
// equal programs differ by f32 ulps, amplified by batch norm over two
// images; in exact-ish doubles the two agree to ~1e-15.
static double
to_storage(DType dt, double v)
{
	switch (dt) {
	case DT_I64:
		return isnan(v) ? 0 : (double)(int64_t)v;
	case DT_BOOL:
		return v != 0;
	default:
		return v;
	}
}

static double
fmaxnan(double a, double b)
{
	return isnan(a) || isnan(b) ? NAN : a > b ? a : b;
}

static double
fminnan(double a, double b)
{
	return isnan(a) || isnan(b) ? NAN : a < b ? a : b;
}

static double
floordivd(double a, double d)
{
	int64_t x = (int64_t)a, y = (int64_t)d, q = x / y;
	return (double)((x % y != 0 && (x < 0) != (y < 0)) ? q - 1 : q);
}

static double
ev(Run *r, KxId id)
{
	if (r->seen[id] == r->stamp)
		return r->val[id];
	const Kx *x = &r->p->x[id];
	double a = x->nin > 0 ? ev(r, x->a[0]) : 0, b = x->nin > 1 ? ev(r, x->a[1]) : 0,
	       c = x->nin > 2 ? ev(r, x->a[2]) : 0, v = 0;
	switch ((KxOp)x->op) {
	case KX_CONST:
		v = x->dtype == DT_F32 || x->dtype == DT_F64 ? x->f : (double)x->i;
		break;
	case KX_VAR:
		v = (double)r->var[x->aux];
		break;
	case KX_LOAD: {
		int64_t e = (int64_t)a;
		if (e < 0 || e >= r->numel[x->aux]) {
			r->bad++;
			v = NAN;
		} else
			v = r->mem[x->aux][e];
		break;
	}
	case KX_ACC:
		v = r->acc;
		break;
	case KX_IADD:
	case KX_ADD:
		v = a + b;
		break;
	case KX_IMUL:
	case KX_MUL:
		v = a * b;
		break;
	case KX_SUB:
		v = a - b;
		break;
	case KX_IDIV:
		v = floordivd(a, b);
		break;
	case KX_IMOD:
		v = a - b * floordivd(a, b);
		break;
	case KX_IMIN:
		v = a < b ? a : b;
		break;
	case KX_IMAX:
		v = a > b ? a : b;
		break;
	case KX_DIV:
		v = a / b;
		break;
	case KX_NEG:
		v = -a;
		break;
	case KX_ABS:
		v = fabs(a);
		break;
	case KX_MAX:
		v = x->dtype == DT_I64 ? (a > b ? a : b) : fmaxnan(a, b);
		break;
	case KX_MIN:
		v = x->dtype == DT_I64 ? (a < b ? a : b) : fminnan(a, b);
		break;
	case KX_POW:
		v = pow(a, b);
		break;
	case KX_FLOOR:
		v = floor(a);
		break;
	case KX_SQRT:
		v = sqrt(a);
		break;
	case KX_EXP:
		v = exp(a);
		break;
	case KX_LOG:
		v = log(a);
		break;
	case KX_LOG1P:
		v = log1p(a);
		break;
	case KX_EXPM1:
		v = expm1(a);
		break;
	case KX_TANH:
		v = tanh(a);
		break;
	case KX_ERF:
		v = erf(a);
		break;
	case KX_SIN:
		v = sin(a);
		break;
	case KX_COS:
		v = cos(a);
		break;
	case KX_LGAMMA:
		v = lgamma(a);
		break;
	case KX_CMP:
		switch ((KCmp)x->aux) {
		case KC_EQ: v = a == b; break;
		case KC_NE: v = a != b; break;
		case KC_LT: v = a < b; break;
		case KC_LE: v = a <= b; break;
		case KC_GT: v = a > b; break;
		case KC_GE: v = a >= b; break;
		case KC_UGT: v = isnan(a) || isnan(b) || a > b; break;
		case KC_ULT: v = isnan(a) || isnan(b) || a < b; break;
		case KC_UNO: v = isnan(a) || isnan(b); break;
		}
		break;
	case KX_AND:
		v = a != 0 && b != 0;
		break;
	case KX_OR:
		v = a != 0 || b != 0;
		break;
	case KX_NOT:
		v = a == 0;
		break;
	case KX_SELECT:
		v = a != 0 ? b : c;
		break;
	case KX_CAST: // the program's own rounding, done in both programs alike
		v = x->aux == DT_F32 ? (double)(float)a : to_storage((DType)x->aux, a);
		break;
	default: // not in the programs tested (they are checked first)
		r->bad++;
		v = NAN;
	}
	r->seen[id] = r->stamp;
	r->val[id] = v;
	return v;
}

static double
fold(KRed red, double acc, double v)
{
	switch (red) {
	case KR_SUM:
		return acc + v;
	case KR_MAX: // NaN-propagating: a NaN term wins and stays
		return isnan(acc) ? acc : (isnan(v) || v > acc) ? v : acc;
	case KR_MIN:
		return isnan(acc) ? acc : (isnan(v) || v < acc) ? v : acc;
	default:
		return v;
	}
}

// Runs kernel k: every parallel point in row-major order, its terms in
// row-major order of the reduction variables.
static void
run_kernel(Run *r, const KKernel *k)
{
	int64_t np = 1, nt = 1;
	for (int i = 0; i < k->rank; i++)
		np *= k->dim[i];
	for (int i = 0; i < k->rrank; i++)
		nt *= k->rdim[i];
	const KBuf *ob = &r->p->buf[k->out];
	for (int64_t t = 0; t < np; t++) {
		int64_t u = t;
		for (int i = k->rank - 1; i >= 0; i--) {
			r->var[i] = u % k->dim[i];
			u /= k->dim[i];
		}
		double v;
		if (k->red == KR_NONE) {
			r->stamp++;
			v = ev(r, k->body);
		} else {
			double acc = k->red == KR_SUM ? 0 : k->red == KR_MAX ? -INFINITY : INFINITY;
			for (int64_t s = 0; s < nt; s++) {
				int64_t w = s;
				for (int i = k->rrank - 1; i >= 0; i--) {
					r->var[k->rank + i] = w % k->rdim[i];
					w /= k->rdim[i];
				}
				r->stamp++;
				acc = fold(k->red, acc, ev(r, k->body));
			}
			r->acc = acc;
			r->stamp++;
			v = k->post ? ev(r, k->post) : acc;
		}
		r->stamp++;
		int64_t e = (int64_t)ev(r, k->index);
		if (e < 0 || e >= r->numel[k->out]) {
			r->bad++;
			continue;
		}
		r->mem[k->out][e] = to_storage(ob->dtype, v);
	}
}

// A fixed pseudo-random value for element e of input i (never zero).
static double
input_value(uint32_t i, int64_t e, DType dt)
{
	uint64_t h = (uint64_t)e * 0x9E3779B97F4A7C15ull ^ ((uint64_t)i + 1) * 0xD1B54A32D192ED03ull;
	h ^= h >> 29;
	h *= 0xBF58476D1CE4E5B9ull;
	h ^= h >> 32;
	if (dt == DT_I64 || dt == DT_BOOL)
		return (double)(h % 2);
	return ((double)(h >> 11) / 9007199254740992.0 - 0.5) * 2 + 0.0625;
}

// Runs p; its outputs into *out (malloc'ed, concatenated), their count
// into *nout.  0 when p has what the interpreter does not run.
static int
run_program(const KProgram *p, double **out, int64_t *nout, int64_t *work)
{
	if (p->nloop)
		return 0;
	for (uint32_t k = 0; k < p->nk; k++)
		if (p->k[k].host)
			return 0;
	Run r = {.p = p};
	r.mem = calloc(p->nbuf, sizeof *r.mem);
	r.numel = calloc(p->nbuf, sizeof *r.numel);
	r.val = calloc(p->nx, sizeof *r.val);
	r.seen = calloc(p->nx, sizeof *r.seen);
	int64_t total = 0;
	for (uint32_t b = 0; b < p->nbuf; b++) {
		const KBuf *kb = &p->buf[b];
		int64_t n = 1;
		for (int i = 0; i < kb->shape.rank; i++)
			n *= kb->shape.dim[i];
		r.numel[b] = n;
		r.mem[b] = malloc((size_t)(n ? n : 1) * sizeof **r.mem);
		for (int64_t e = 0; e < n; e++)
			r.mem[b][e] = kb->kind == KB_IN ? input_value((uint32_t)kb->index, e, kb->dtype) : NAN;
		if (kb->kind == KB_OUT)
			total += n;
	}
	*work = 0;
	for (uint32_t k = 0; k < p->nk; k++) {
		*work += kir_kernel_points(&p->k[k]) * kir_kernel_terms(&p->k[k]);
		run_kernel(&r, &p->k[k]);
	}
	*out = malloc((size_t)(total ? total : 1) * sizeof **out);
	*nout = 0;
	for (uint32_t o = 0; o < p->noutput; o++) {
		uint32_t b = p->outbuf[o];
		memcpy(*out + *nout, r.mem[b], (size_t)r.numel[b] * sizeof **out);
		*nout += r.numel[b];
	}
	CHECK(r.bad == 0);
	for (uint32_t b = 0; b < p->nbuf; b++)
		free(r.mem[b]);
	free(r.mem);
	free(r.numel);
	free(r.val);
	free(r.seen);
	return 1;
}

// ---------------------------------------------------------------- the checks

// Whether kernel k's store moves by one element with its last parallel
// variable (a coalesced store on the GPU).
static int
contiguous(const KProgram *p, const KKernel *k)
{
	int64_t c;
	return k->rank > 0 && !k->host && kx_affine_coef(p, k->index, k->rank - 1, &c) && c == 1;
}

static uint64_t
kernels_hash(const KProgram *p)
{
	uint64_t h = 1469598103934665603ull;
	const unsigned char *b = (const unsigned char *)p->k;
	for (size_t i = 0; i < p->nk * sizeof *p->k; i++)
		h = (h ^ b[i]) * 1099511628211ull;
	for (uint32_t i = 0; i < p->nconv; i++)
		h = (h ^ p->conv[i].nhwc) * 1099511628211ull;
	return h;
}

typedef struct Tally {
	int programs, relaid, nhwc_records, split, merged, sib, inlined, onepass;
} Tally;

static void
check_task(Module *m, const char *task, const char *label, Tally *t)
{
	char err[512];
	Loc loc;
	if (!pass_task_check(m->main, task, &loc, err, sizeof err))
		return;
	Graph *g = pass_task(m->main, task, NULL, &loc, err, sizeof err);
	if (!CHECK(g != NULL)) {
		fprintf(stderr, "%s %s: %s\n", label, task, err);
		return;
	}
	KProgram *p = cg_lower(g, task, DT_F32, err, sizeof err);
	ir_graph_free(g);
	if (!CHECK(p != NULL)) {
		fprintf(stderr, "%s %s: %s\n", label, task, err);
		return;
	}
	cg_plan(p);
	uint64_t before = kernels_hash(p);
	uint32_t nx = p->nx;
	int n = 0;
	KProgram *q = kir_layout_nhwc(p, 1, &n);
	CHECK(kernels_hash(p) == before && p->nx == nx); // the CPU's program untouched
	if (!q) {
		kir_program_free(p);
		return;
	}
	CHECK(q->nconv == p->nconv && q->nbuf >= p->nbuf);
	int recs = 0, lost = 0;
	for (uint32_t i = 0; i < q->nconv; i++) {
		recs += q->conv[i].nhwc != 0;
		// Filters stay KCRS: the weight's bit is never set.
		CHECK(!(q->conv[i].nhwc & (q->conv[i].op == 2 ? 1u : 4u)));
	}
	// Each kernel of q but the splits' first ones (channel_partial_sum, a
	// buffer of q's own) writes the buffer of a kernel of p (the split's
	// second writes the sum's, or, when it took its consumer's sum
	// (csum_merges), the consumer's: then p's partial_sum buffer is written
	// by no kernel of q).  Sibling splits (csum_siblings) put their first
	// kernels side by side, then the second ones: found by the buffers.
	// Batch norm's statistics in one pass (bn_stats_one_pass) add a sum
	// of q's own besides: mean(x - s) (a split's first kernel and its
	// second, "mean", into a buffer of q's own).
	int merged = 0, nsplit = 0, sib = 0, inlined = 0, onepass = 0;
	uint8_t *wq = calloc(q->nbuf + 1, 1);
	CHECK(wq != NULL);
	for (uint32_t kq = 0; wq && kq < q->nk; kq++) {
		wq[q->k[kq].out] = 1;
		if (strcmp(q->k[kq].what, "channel_partial_sum"))
			continue;
		nsplit++;
		CHECK(q->k[kq].out >= p->nbuf); // its own buffer
		sib += kq + 1 < q->nk && !strcmp(q->k[kq + 1].what, "channel_partial_sum");
	}
	for (uint32_t k = 0; wq && k < p->nk; k++) {
		if (p->k[k].host || wq[p->k[k].out])
			continue;
		if (!p->k[k].red) { // an elementwise kernel inlined into its readers (inline_cheap)
			inlined++;
			continue;
		}
		merged++;
		CHECK(k + 1 < p->nk && wq[p->k[k + 1].out]); // taken by its consumer's kernel
	}
	for (uint32_t kq = 0; kq < q->nk; kq++) {
		if (!strcmp(q->k[kq].what, "channel_partial_sum"))
			continue;
		if (q->k[kq].out >= p->nbuf) { // mean(x - s): a one-pass statistic's
			onepass++;
			CHECK(q->k[kq].red == KR_SUM && !strcmp(q->k[kq].what, "mean"));
			continue;
		}
		uint32_t k = 0;
		while (k < p->nk && p->k[k].out != q->k[kq].out)
			k++;
		if (!CHECK(k < p->nk))
			continue;
		if (contiguous(p, &p->k[k]) && !contiguous(q, &q->k[kq])) {
			if (lost++ < 3)
				fprintf(stderr, "%s %s: kernel %u (%s) no longer stores contiguously\n",
				        label, task, k, p->k[k].what);
		}
	}
	free(wq);
	CHECK(lost == 0);
	// A kernel and a buffer per split sum, less a kernel per merge and per
	// inlined kernel; a kernel and a buffer more per one-pass statistic.
	CHECK(q->nk - p->nk == (uint32_t)(nsplit - merged - inlined + onepass) &&
	      q->nbuf - p->nbuf == (uint32_t)(nsplit + onepass));
	double *a = NULL, *b = NULL;
	int64_t na = 0, nb = 0, work = 0, w2 = 0;
	int split = 0;
	for (uint32_t k = 0; k < q->nk; k++)
		split += !strcmp(q->k[k].what, "channel_partial_sum");
	if (run_program(p, &a, &na, &work) && run_program(q, &b, &nb, &w2) && CHECK(na == nb)) {
		// Equal within 1e-10 of the output's largest magnitude (at least
		// 1): bit for bit where no sum was split; a wrong index is off by
		// O(1) (another element's value, or the NaN poison).
		int64_t diff = 0, same = 0, nonfinite = 0;
		double big = 1, worst = 0;
		for (int64_t i = 0; i < na; i++)
			big = fmax(big, fabs(a[i]));
		for (int64_t i = 0; i < na; i++) {
			if (!isfinite(a[i]))
				nonfinite++;
			same += !memcmp(&a[i], &b[i], sizeof a[i]);
			double e = fabs(a[i] - b[i]) / big;
			worst = isnan(e) || e > worst ? e : worst;
			if (!(e <= 1e-10) && diff++ < 3)
				fprintf(stderr, "%s %s: output element %lld: %.17g relaid, %.17g original\n",
				        label, task, (long long)i, b[i], a[i]);
		}
		CHECK(diff == 0);
		CHECK(nonfinite == 0);
		if (!split)
			CHECK(same == na);
		printf("%s %s: %d buffers channels-last, %d of %u convolution records, %d sums split "
		       "(%d taking their consumer's sum, %d beside a sibling's), %d kernels inlined; "
		       "%lld outputs, %lld bit for bit, worst %.2g (%lld terms run twice)\n",
		       label, task, n, recs, q->nconv, split, merged, sib, inlined, (long long)na,
		       (long long)same, worst, (long long)work);
		t->programs++;
		t->split += split;
		t->merged += merged;
		t->sib += sib;
		t->inlined += inlined;
		t->onepass += onepass;
	}
	t->relaid += n;
	t->nhwc_records += recs;
	free(a);
	free(b);
	kir_program_free(q);
	kir_program_free(p);
}

static void
check_model(const char *file, const char *const *defs, int ndefs, const char *const *tasks, Tally *t)
{
	Module *m = tm_load(file, defs, ndefs);
	if (!CHECK(m != NULL))
		return;
	for (int i = 0; tasks[i]; i++)
		check_task(m, tasks[i], file, t);
	ir_module_free(m);
}

// The policy: on with TF32, off for strict fp32 unless FADC_CUDA_NHWC=1,
// off with FADC_CUDA_NO_NHWC=1: no copy.
static void
check_off(void)
{
	const char *defs[] = {"N=2", "H=32", "C=8", "NCLS=10"};
	Module *m = tm_load("resnet18.ir", defs, 4);
	char err[512];
	Loc loc;
	Graph *g = m ? pass_task(m->main, "forward", NULL, &loc, err, sizeof err) : NULL;
	KProgram *p = g ? cg_lower(g, "forward", DT_F32, err, sizeof err) : NULL;
	if (CHECK(p != NULL)) {
		cg_plan(p);
		KProgram *q = kir_layout_nhwc(p, 1, NULL);
		CHECK(q != NULL);
		kir_program_free(q);
		int n = -1;
		CHECK(kir_layout_nhwc(p, 0, &n) == NULL && n == 0); // strict fp32: off
		setenv("FADC_CUDA_NHWC", "1", 1);
		CHECK((q = kir_layout_nhwc(p, 0, &n)) != NULL && n > 0); // ... unless asked
		kir_program_free(q);
		unsetenv("FADC_CUDA_NHWC");
		setenv("FADC_CUDA_NO_NHWC", "1", 1);
		n = -1;
		CHECK(kir_layout_nhwc(p, 1, &n) == NULL && n == 0);
		unsetenv("FADC_CUDA_NO_NHWC");
	}
	kir_program_free(p);
	ir_graph_free(g);
	ir_module_free(m);
}

int
main(void)
{
	Tally t = {0};
	const char *r18[] = {"N=2", "H=32", "C=8", "NCLS=10"};
	const char *rt[] = {"vjp", "jvp", "vhp", NULL};
	check_model("resnet18.ir", r18, 4, rt, &t);
	// Batch norm's statistics in one pass (bn_stats_one_pass): at these
	// sizes the stem's (its 512 terms a channel the only split statistic)
	// in each task's forward; the outputs as close (above: the variance
	// mean((x - s)^2) - mean(x - s)^2 is exact in the interpreter's
	// doubles up to rounding).  FADC_CUDA_NO_BN1PASS=1: none.
	CHECK(t.onepass >= 3);
	int op0 = t.onepass;
	setenv("FADC_CUDA_NO_BN1PASS", "1", 1);
	const char *r18v[] = {"vjp", NULL};
	check_model("resnet18.ir", r18, 4, r18v, &t);
	CHECK(t.onepass == op0);
	unsetenv("FADC_CUDA_NO_BN1PASS");
	const char *ct[] = {"forward", "vjp", "jvp", "vhp", NULL};
	check_model("../tests/gpu/conv.ir", NULL, 0, ct, &t);
	const char *fcn[] = {"N=2", "H=32", "C=4"}, *ft[] = {"vjp", NULL};
	check_model("fcn_resnet.ir", fcn, 3, ft, &t);
	// Statistics split by kir_split_reductions and then by channel: the
	// channel split takes the consumer's mean or sum (csum_merges), 4 per
	// forward (two batch norms' mean and variance), 12 in the vjp (the
	// backward's sums too).  Its jvp and vhp run on the GPU only
	// (tests/gpu/device/payload.sh): 40 s more here.
	int before = t.merged;
	const char *vt[] = {"vjp", NULL};
	check_model("../tests/gpu/csum.ir", NULL, 0, vt, &t);
	CHECK(t.merged - before >= 12);
	// ... and the backward's sums over one tensor are siblings
	// (csum_siblings): their first kernels side by side.
	CHECK(t.sib > 0);
	// FADC_CUDA_NO_CSUM_SIB=1: none side by side, the outputs as close.
	setenv("FADC_CUDA_NO_CSUM_SIB", "1", 1);
	before = t.sib;
	check_model("../tests/gpu/csum.ir", NULL, 0, vt, &t);
	CHECK(t.sib == before);
	unsetenv("FADC_CUDA_NO_CSUM_SIB");
	// FADC_CUDA_NO_CSUM_MERGE=1: none taken, the outputs as close.
	setenv("FADC_CUDA_NO_CSUM_MERGE", "1", 1);
	before = t.merged;
	const char *fwd[] = {"forward", NULL};
	check_model("../tests/gpu/csum.ir", NULL, 0, fwd, &t);
	CHECK(t.merged == before);
	unsetenv("FADC_CUDA_NO_CSUM_MERGE");
	// Cheap producers inlined into their readers (inline_cheap, opt-in:
	// FADC_CUDA_INLINE=1): none by default; with it, the backward's masked
	// gradients (dy * (r > 0)) are, and the outputs as close (above).
	CHECK(t.inlined == 0);
	setenv("FADC_CUDA_INLINE", "1", 1);
	check_model("../tests/gpu/csum.ir", NULL, 0, vt, &t);
	CHECK(t.inlined >= 2);
	unsetenv("FADC_CUDA_INLINE");
	check_off();
	printf("%d programs run twice, %d buffers relaid, %d records with channels-last operands, "
	       "%d sums split (%d taking their consumer's sum), %d kernels inlined, %d one-pass "
	       "statistics\n",
	       t.programs, t.relaid, t.nhwc_records, t.split, t.merged, t.inlined, t.onepass);
	CHECK(t.programs == 13);
	CHECK(t.relaid >= 100 && t.nhwc_records >= 100 && t.split >= 10);
	TU_DONE("test_codegen_layout");
}
