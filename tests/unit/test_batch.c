// tests/unit/test_batch.c -- the separability check (passes/batch.c) and
// its promise, the oracle of the data-parallel runtime.
//
// For every model the check accepts, the forward on the full batch of n
// rows must equal the combination of the forwards on shards of the rows
// (docs/IR.md, "batch"):
//
//   loss mean:  L = Σ_s (n_s / n) L_s
//   loss sum:   L = Σ_s L_s − (S − 1) L_∅        (L_∅: the forward on no rows)
//
// Each shard is the model parsed again with its batch size (-D B=n_s), run
// by the float64 interpreter on the full batch's rows off..off+n_s of every
// batched input and on the full batch's other inputs as they are; two
// shards of unequal size (n = 7 = 3 + 4), every output, ≤ 1e-12 relative.
// Models the check refuses are listed with the words their message must
// have: one per rule of the check (most also run on shards, to show that
// the combination then misses), and the zoo's three candidates as they
// are (resnet18, transformer, ppl_robust_reg: none separable, each for its
// reason) and as separable variants (tests/data/batch/); of the rest of the
// zoo, multiheadattn, ppl_simple_reg and wav2letter are separable, and
// fcn_resnet, deepspeech and detr are refused at their first batch norm.
#include <stdlib.h>
#include <string.h>

#include "frontend.h"
#include "ir.h"
#include "passes.h"
#include "testutil.h"

typedef struct Case {
	const char *name;
	const char *text; // the model, or NULL: file
	const char *file; // under FADC_SOURCE_DIR
	const char *batch; // a line put first, or NULL (the text has its own)
	const char *size; // the let of the batch size (NULL: a number in the model)
	int64_t n; // the full batch
	const char *defs[8]; // other -D
	const char *refuse; // NULL: separable; else words of the message
	int teeth; // refused, and the shards' combination must miss the full batch
} Case;

static Module *
parse(const Case *c, int64_t n)
{
	char path[1024], *text;
	size_t len;
	if (c->text) {
		text = strdup(c->text);
		len = strlen(text);
	} else {
		const char *dir = getenv("FADC_SOURCE_DIR");
		snprintf(path, sizeof path, "%s/%s", dir ? dir : ".", c->file);
		FILE *f = fopen(path, "rb");
		if (!CHECK(f != NULL))
			return NULL;
		fseek(f, 0, SEEK_END);
		long sz = ftell(f);
		fseek(f, 0, SEEK_SET);
		size_t pre = c->batch ? strlen(c->batch) + 1 : 0;
		text = malloc(pre + (size_t)sz + 1);
		if (c->batch) {
			memcpy(text, c->batch, pre - 1);
			text[pre - 1] = '\n';
		}
		len = pre + fread(text + pre, 1, (size_t)sz, f);
		text[len] = 0;
		fclose(f);
	}
	char dn[64];
	const char *defs[10];
	int nd = 0;
	snprintf(dn, sizeof dn, "%s=%lld", c->size ? c->size : "", (long long)n);
	if (c->size)
		defs[nd++] = dn;
	for (int i = 0; c->defs[i]; i++)
		defs[nd++] = c->defs[i];
	FeOptions o = {.defines = defs, .ndefines = nd, .diag = stderr};
	Module *m = fe_parse_string(c->name, text, len, &o);
	free(text);
	return m;
}

static int
batch_axis(const Module *m, const char *name)
{
	for (uint32_t i = 0; i < m->batch.nin; i++)
		if (!strcmp(m->batch.in[i].name, name))
			return m->batch.in[i].axis;
	return -1;
}

// Rows off..off+rows of t along axis a, into r (allocated).
static void
slice_rows(const Tensor *t, int a, int64_t off, int64_t rows, Tensor *r)
{
	Shape s = t->shape;
	s.dim[a] = rows;
	ir_tensor_alloc(r, t->dtype, &s);
	int64_t outer = 1, inner = 1;
	for (int j = 0; j < a; j++)
		outer *= t->shape.dim[j];
	for (int j = a + 1; j < t->shape.rank; j++)
		inner *= t->shape.dim[j];
	for (int64_t o = 0; o < outer; o++)
		if (rows * inner != 0)
			memcpy(r->data + o * rows * inner, t->data + (o * t->shape.dim[a] + off) * inner,
			       (size_t)(rows * inner) * sizeof(double));
}

// The forward's inputs of module m: declarations from ir_module_init,
// arguments from a fixed generator.
static int
full_inputs(const Module *m, Tensor *in)
{
	char err[512];
	Tensor *val = calloc(m->ndecl + 1, sizeof *val);
	if (!CHECK(ir_module_init(m, NULL, NULL, val, 0, err, sizeof err)) && fprintf(stderr, "%s\n", err))
		return 0;
	uint64_t x = 0x9e3779b97f4a7c15ull;
	for (uint32_t k = 0; k < m->main->ninput; k++) {
		const Input *ip = &m->main->input[k];
		int d = ir_module_find_decl(m, ip->name);
		if (d >= 0) {
			in[k] = val[d];
			val[d].data = NULL;
			continue;
		}
		ir_tensor_alloc(&in[k], (DType)m->main->node[ip->node].dtype, ir_shape(m->main, ip->node));
		for (int64_t i = 0; i < ir_numel(&in[k].shape); i++) {
			x = x * 6364136223846793005ull + 1442695040888963407ull;
			in[k].data[i] = (double)(x >> 11) * 0x1p-53 * 2 - 1;
		}
	}
	for (uint32_t i = 0; i < m->ndecl; i++)
		ir_tensor_free(&val[i]);
	free(val);
	return 1;
}

// The forward of c at batch size rows, on rows off.. of the full inputs.
static int
run_shard(const Case *c, const Module *full, const Tensor *fin, int64_t off, int64_t rows,
          Tensor *out)
{
	Module *m = parse(c, rows);
	if (!CHECK(m != NULL))
		return 0;
	int ok = CHECK(m->main->ninput == full->main->ninput && m->main->nout == full->main->nout);
	Tensor *in = calloc(m->main->ninput + 1, sizeof *in);
	for (uint32_t k = 0; ok && k < m->main->ninput; k++) {
		int a = batch_axis(m, m->main->input[k].name);
		if (a >= 0)
			slice_rows(&fin[k], a, off, rows, &in[k]);
		else {
			// Not batched: the same value on every shard (its shape must
			// not depend on the batch size).
			ok = CHECK(ir_shape_eq(&fin[k].shape, ir_shape(m->main, m->main->input[k].node)));
			in[k] = fin[k];
		}
	}
	char err[512];
	if (ok && !CHECK(ir_interp(m->main, in, out, 0, err, sizeof err))) {
		fprintf(stderr, "%s: shard %lld+%lld: %s\n", c->name, (long long)off, (long long)rows, err);
		ok = 0;
	}
	for (uint32_t k = 0; k < m->main->ninput; k++)
		if (batch_axis(m, m->main->input[k].name) >= 0)
			ir_tensor_free(&in[k]);
	free(in);
	ir_module_free(m);
	return ok;
}

// The worst relative error of the combination of shards against the full
// batch, over every output (-1 when a shard could not be run).
static double
check_shards(const Case *c, Module *m)
{
	double worst = -1;
	int64_t n = c->n, sizes[2] = {3, n - 3};
	uint32_t nout = m->main->nout;
	Tensor *fin = calloc(m->main->ninput + 1, sizeof *fin);
	Tensor *full = calloc(nout, sizeof *full), *part = calloc(nout, sizeof *part);
	double **comb = calloc(nout, sizeof *comb);
	char err[512];
	if (!full_inputs(m, fin) || !CHECK(ir_interp(m->main, fin, full, 0, err, sizeof err)))
		goto done;
	for (uint32_t k = 0; k < nout; k++)
		comb[k] = calloc((size_t)ir_numel(&full[k].shape) + 1, sizeof(double));
	int sum = m->batch.loss == BATCH_LOSS_SUM;
	for (int s = 0, off = 0; s < 3; s++) {
		// Two shards; for a sum, the forward on no rows, subtracted once.
		int64_t rows = s < 2 ? sizes[s] : 0;
		double w = sum ? (s < 2 ? 1 : -1) : (double)rows / (double)n;
		if (!sum && s == 2)
			break;
		if (!run_shard(c, m, fin, off, rows, part))
			goto done;
		for (uint32_t k = 0; k < nout; k++) {
			CHECK(ir_shape_eq(&part[k].shape, &full[k].shape));
			for (int64_t i = 0; i < ir_numel(&full[k].shape); i++)
				comb[k][i] += w * part[k].data[i];
			ir_tensor_free(&part[k]);
		}
		off += (int)rows;
	}
	worst = 0;
	for (uint32_t k = 0; k < nout; k++)
		for (int64_t i = 0; i < ir_numel(&full[k].shape); i++) {
			double e = tu_relerr(comb[k][i], full[k].data[i], 1);
			worst = e > worst || e != e ? e : worst;
		}
done:
	for (uint32_t k = 0; k < m->main->ninput; k++)
		ir_tensor_free(&fin[k]);
	for (uint32_t k = 0; k < nout; k++) {
		ir_tensor_free(&full[k]);
		free(comb[k]);
	}
	free(fin), free(full), free(part), free(comb);
	return worst;
}

// clang-format off
static const Case cases[] = {
// ---- separable: one model per rule of the walk, each checked on shards
{"mse-mean-prior",
 "let B = 7\nbatch x: 0, Y: 0, loss mean\n"
 "const Y: f32[B, 1] = uniform(0, 1, seed=2)\n"
 "param w: f32[3, 1] = uniform(0, 1, seed=1)\n"
 "def forward(x: f32[B, 3]) -> f32[] {\n"
 "  return mean((x @ w - Y) ** 2) + 0.5 * sum(w * w)\n"
 "}\n", 0, 0, "B", 7, {0}, 0, 0},
{"loglik-sum-prior",
 "let B = 7\nbatch x: 0, y: 0, loss sum\n"
 "param w: f32[3] = uniform(0, 1, seed=1)\n"
 "param s: f32[] = uniform(0, 1, seed=3)\n"
 "def forward(x: f32[B, 3], y: f32[B]) -> (f32[], f32[3]) {\n"
 "  ll = sum(normal_logpdf(y, sum(x * w, 1), exp(s)))\n"
 "  return ll + sum(normal_logpdf(w, 0, 1)) + s, 2 * sum(x * reshape(y, [B, 1]), 0) - w\n"
 "}\n", 0, 0, "B", 7, {0}, 0, 0},
{"reshape-merged-heads",
 "let B = 7\nbatch x: 1, loss mean\n"
 "param w: f32[6, 6] = uniform(-1, 1, seed=1)\n"
 "def forward(x: f32[4, B, 6]) -> f32[] {\n"
 "  h = reshape(x @ w, [4, B * 2, 3])\n"
 "  h = transpose(h, 0, 1)\n"
 "  a = softmax(h @ transpose(h, 1, 2))\n"
 "  o = reshape(transpose(a @ h, 0, 1), [4 * B, 6])\n"
 "  return mean(tanh(o))\n"
 "}\n", 0, 0, "B", 7, {0}, 0, 0},
{"conv-pool",
 "let B = 7\nbatch x: 0, lab: 0, loss mean\n"
 "param w: f32[3, 2, 3] = uniform(-1, 1, seed=1)\n"
 "param fc: f32[3, 4] = uniform(-1, 1, seed=2)\n"
 "const lab: i64[B] = cast(floor(4 * uniform(0, 1, seed=4)), dtype=i64)\n"
 "def forward(x: f32[B, 2, 9]) -> f32[] {\n"
 "  h = max_pool1d(relu(conv1d(x, w, padding=1)), 2)\n"
 "  z = mean(h, 2) @ fc\n"
 "  return cross_entropy(z, lab)\n"
 "}\n", 0, 0, "B", 7, {0}, 0, 0},
{"embedding-take-along",
 "let B = 7\nbatch tok: 0, tgt: 0, loss sum\n"
 "const tok: i64[B, 5] = cast(floor(10 * uniform(0, 1, seed=1)), dtype=i64)\n"
 "const tgt: i64[B, 5] = cast(floor(4 * uniform(0, 1, seed=2)), dtype=i64)\n"
 "param emb: f32[10, 4] = uniform(-1, 1, seed=3)\n"
 "def forward() -> f32[] {\n"
 "  lp = log_softmax(take(emb, tok, axis=0))\n"
 "  return -sum(take_along(lp, reshape(tgt, [B, 5, 1]), axis=2))\n"
 "}\n", 0, 0, "B", 7, {0}, 0, 0},
{"scan-rnn",
 "let B = 7\nbatch xs: 1, loss sum\n"
 "param W: f32[3, 4] = uniform(-1, 1, seed=1)\n"
 "param U: f32[4, 4] = uniform(-1, 1, seed=2)\n"
 "def cell(h, x, W, U) {\n"
 "  n = tanh(x @ W + h @ U)\n"
 "  return n, n\n"
 "}\n"
 "def forward(xs: f32[5, B, 3]) -> f32[] {\n"
 "  h, ys = scan(cell, zeros([B, 4]), xs, W, U, ncarry=1, nxs=1)\n"
 "  return sum(ys ** 2) + sum(h)\n"
 "}\n", 0, 0, "B", 7, {0}, 0, 0},
{"contraction-over-batch",
 "let B = 7\nbatch x: 0, loss sum\n"
 "param w: f32[3, 3] = uniform(-1, 1, seed=1)\n"
 "def forward(x: f32[B, 3]) -> f32[] {\n"
 "  g = transpose(x, 0, 1) @ tanh(x)\n"
 "  return sum(g * w) - 2 * sum(w)\n"
 "}\n", 0, 0, "B", 7, {0}, 0, 0},
{"transposed-broadcast",
 "let B = 7\nbatch x: 0, loss mean\n"
 "param b: f32[3, 1] = uniform(-1, 1, seed=1)\n"
 "def forward(x: f32[B, 3]) -> f32[] {\n"
 "  t = transpose(x, 0, 1) + b\n"
 "  return mean(logsumexp(t, 0) + max(t, 0))\n"
 "}\n", 0, 0, "B", 7, {0}, 0, 0},

// ---- refused: one model per way of mixing rows
{"batch-norm",
 "let B = 7\nbatch x: 0, loss mean\n"
 "param g: f32[2] = ones()\nparam b: f32[2] = zeros()\n"
 "def forward(x: f32[B, 2, 3]) -> f32[] {\n"
 "  return mean(batch_norm(x, g, b) * x)\n"
 "}\n", 0, 0, "B", 7, {0}, "batch_norm mixes rows of the batch axis declared at batch-norm:2:1: sub combines per-sample values with a mean over the batch", 1},
{"max-over-batch",
 "let B = 7\nbatch x: 0, loss mean\n"
 "def forward(x: f32[B, 2]) -> f32[] {\n  return mean(max(x, 0))\n}\n", 0, 0, "B", 7, {0},
 "max reduces over the batch axis 0", 1},
{"slice-rows",
 "let B = 7\nbatch x: 0, loss sum\n"
 "def forward(x: f32[B, 2]) -> f32[] {\n  return sum(x[1:B] - x[0:B - 1])\n}\n", 0, 0, "B", 7, {0},
 "slice takes rows 1:7:1 of the batch axis 0 (of 7)", 0},
{"nonlinear-after-mean",
 "let B = 7\nbatch x: 0, loss mean\n"
 "def forward(x: f32[B, 2]) -> f32[] {\n  return log(mean(x ** 2))\n}\n", 0, 0, "B", 7, {0},
 "log is applied to a mean over the batch", 1},
{"square-of-sum",
 "let B = 7\nbatch x: 0, loss sum\n"
 "def forward(x: f32[B, 2]) -> f32[] {\n  s = sum(x)\n  return s * s\n}\n", 0, 0, "B", 7, {0},
 "mul is applied to a sum over the batch", 1},
{"matmul-across-rows",
 "let B = 7\nbatch x: 0, loss sum\n"
 "const A: f32[B, B] = uniform(0, 1, seed=1)\n"
 "def forward(x: f32[B, 2]) -> f32[] {\n  return sum(A @ x)\n}\n", 0, 0, "B", 7, {0},
 "matmul contracts or crosses the batch axis", 0},
{"unbatched-rows",
 "let B = 7\nbatch x: 0, loss sum\n"
 "const c: f32[B, 2] = uniform(0, 1, seed=1)\n"
 "def forward(x: f32[B, 2]) -> f32[] {\n  return sum(x * c)\n}\n", 0, 0, "B", 7, {0},
 "mul matches per-sample rows with operand 2 (f32[7, 2])", 0},
{"row-output",
 "let B = 7\nbatch x: 0, loss sum\n"
 "def forward(x: f32[B, 2]) -> f32[B, 2] {\n  return 2 * x\n}\n", 0, 0, "B", 7, {0},
 "output 'out' keeps the batch axis", 0},
{"wrong-kind",
 "let B = 7\nbatch x: 0, loss sum\n"
 "def forward(x: f32[B, 2]) -> f32[] {\n  return mean(x)\n}\n", 0, 0, "B", 7, {0},
 "is a mean over the batch, but the loss declared at wrong-kind:2:1 is a sum", 1},
{"hand-made-mean",
 "let B = 7\nbatch x: 0, loss mean\n"
 "def forward(x: f32[B, 2]) -> f32[] {\n  return sum(x) / B\n}\n", 0, 0, "B", 7, {0},
 "is a sum over the batch, but the loss declared at hand-made-mean:2:1 is a mean (a sum divided", 0},
{"reduction-per-row",
 "let B = 7\nbatch x: 0, loss sum\n"
 "def forward(x: f32[B, 2]) -> f32[] {\n  s = sum(x)\n  return sum(broadcast(s, [B, 1]))\n}\n", 0, 0,
 "B", 7, {0}, "broadcast copies a sum over the batch (reduction-per-row:4:7) along an axis of the batch's size (7): summed", 1},
{"mean-plus-sum",
 "let B = 7\nbatch x: 0, loss sum\n"
 "def forward(x: f32[B, 2]) -> f32[] {\n  return mean(x) + sum(x)\n}\n", 0, 0, "B", 7, {0},
 "add combines a mean over the batch", 1},
{"reshape-split",
 "let B = 7\nbatch x: 0, loss sum\n"
 "def forward(x: f32[B, 3]) -> f32[] {\n  return sum(sum(reshape(x, [3, B]), 1) ** 2)\n}\n",
 0, 0, "B", 7, {0}, "reshape splits the batch axis 0 across axes", 1},
{"random-per-row",
 "let B = 7\nbatch x: 0, loss sum\n"
 "def forward(x: f32[B, 2]) -> f32[] {\n  return sum(uniform(x, x + 1, seed=3))\n}\n", 0, 0, "B", 7,
 {0}, "uniform draws per element of the whole batch", 1},
{"concat-rows",
 "let B = 7\nbatch x: 0, loss sum\n"
 "def forward(x: f32[B, 2]) -> f32[] {\n  return sum(concat([x, x], axis=0))\n}\n", 0, 0, "B", 7,
 {0}, "concat joins values along the batch axis 0", 0},
{"scan-over-batch",
 "let B = 7\nbatch xs: 0, loss sum\n"
 "def cell(h, x) {\n  n = h + x\n  return n, n\n}\n"
 "def forward(xs: f32[B, 3]) -> f32[] {\n"
 "  h, ys = scan(cell, zeros([3]), xs, ncarry=1, nxs=1)\n  return sum(h)\n}\n", 0, 0, "B", 7,
 {0}, "the scan steps along the batch axis", 0},

// ---- the zoo's candidates, as they are and as separable variants
{"resnet18", 0, "models/resnet18.ir", "batch inputs: 0, labels: 0, loss mean", "N", 4,
 {"H=32", "C=4", 0}, "batch_norm mixes rows of the batch axis", 0},
{"transformer", 0, "models/transformer.ir", "batch data: 1, loss mean", "SEQ", 7,
 {"N=4", "E=8", "NH=2", "FF=8", 0}, "slice takes rows 0:7:1 of the batch axis 1 (of 8)", 0},
{"ppl_robust_reg", 0, "models/ppl_robust_reg.ir",
 "batch X: 0, Y: 0, sigma_rate: 0, sigma_unconstrained_value: 0, loss sum", "N", 7, {0},
 "add combines per-sample values with a sum over the batch", 1},
{"multiheadattn", 0, "models/multiheadattn.ir", "batch query: 1, key: 1, loss sum", "B", 7, {0}, 0, 0},
{"ppl_simple_reg", 0, "models/ppl_simple_reg.ir", "batch X: 0, Y: 0, loss sum", "N", 7, {0}, 0, 0},
{"wav2letter", 0, "models/wav2letter.ir", "batch inputs: 0, labels: 0, loss mean", "N", 7,
 {"LIN=400", "C=4", "CW=8", 0}, 0, 0},
{"fcn_resnet", 0, "models/fcn_resnet.ir", "batch inputs: 0, labels: 0, loss mean", "N", 4,
 {"H=32", "C=4", 0}, "batch_norm mixes rows of the batch axis", 0},
{"deepspeech", 0, "models/deepspeech.ir",
 "batch spect: 0, lengths: 0, targets: 0, target_lengths: 0, out_lengths: 0, loss mean", "N", 4,
 {"HID=8", "FRAMES=40", "LEN_LO=30", "LEN_SPAN=5", "FREQ=20", 0}, "batch_norm mixes rows of the batch axis", 0},
{"detr", 0, "models/detr.ir", "batch images: 0, loss sum", 0, 2,
 {"IMG_H=64", "IMG_W=64", "WIDTH=2", "D=8", "NH=2", "FF=8", 0}, "batch_norm mixes rows of the batch axis", 0},
{"transformer-split", 0, "tests/data/batch/transformer-split.ir", 0, "SEQ", 7,
 {"N=4", "E=8", "NH=2", "FF=8", 0}, 0, 0},
{"ppl_robust_reg-joint", 0, "tests/data/batch/ppl_robust_reg-joint.ir", 0, "N", 7, {0}, 0, 0},
};
// clang-format on

int
main(void)
{
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		const Case *c = &cases[i];
		Module *m = parse(c, c->n);
		if (!CHECK(m != NULL) && fprintf(stderr, "  (%s)\n", c->name))
			continue;
		CHECK(m->batch.nin && (c->refuse || m->batch.size == c->n));
		char err[1024] = "";
		Loc loc = 0;
		int ok = pass_batch_check(m->main, &m->batch, &loc, err, sizeof err);
		if (c->refuse) {
			int hit = !ok && strstr(err, c->refuse) && loc;
			if (!CHECK(hit))
				fprintf(stderr, "  %s: %s\n  want: %s\n", c->name, ok ? "accepted" : err, c->refuse);
			else
				printf("%-24s refused: %s\n", c->name, err);
			if (c->teeth) {
				// The oracle sees what the check refused: the shards'
				// combination misses the full batch.
				double worst = check_shards(c, m);
				CHECK(worst != -1 && !(worst <= 1e-6)); // NaN misses too
				printf("%-24s   (shards 3+4 miss the full batch by %.2g)\n", "", worst);
			}
		} else if (CHECK(ok) || !fprintf(stderr, "  %s: %s\n", c->name, err)) {
			double worst = check_shards(c, m);
			CHECK(worst >= 0 && worst <= 1e-12);
			printf("%-24s separable, %s loss: full vs 3+4 rows, worst %.2g\n", c->name,
			       m->batch.loss == BATCH_LOSS_SUM ? "sum" : "mean", worst);
		}
		ir_module_free(m);
	}
	TU_DONE("test_batch");
}
