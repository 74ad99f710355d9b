// tests/unit/test_runtime_multi.c -- the arithmetic of data-parallel runs
// (runtime/multi.c, docs/MULTIGPU.md), without a GPU:
//
//   - rt_multi_shard: for every n <= 40 and S <= min(n, 9), the shards tile
//     [0, n) in order, sizes n/S or n/S + 1, larger first; hand values;
//   - rt_multi_weight: n_s / n for a mean (summing to 1), 1 and -(S - 1)
//     for a sum;
//   - rt_multi_rows: rows of an axis taken out and put back (axis 0, 1, 2
//     of a rank-3 tensor) against the index formula, a scaled gather;
//   - rt_multi_batch_parse on the options line codegen/compile.c writes, and
//     on malformed ones;
//   - rt_multi_plan on a compiled descriptor: the shard tasks, each input's
//     batch axis (declared, or by its shape: jvp's v.z of a batched param
//     z), reduced and per-sample outputs; its refusals (a shard size the
//     artifact lacks, naming the -D; more GPUs than rows; `loss sum` over
//     several GPUs); and the runs it describes emulated on the CPU runtime
//     (shards on their rows, reduced outputs weighted, per-sample ones
//     gathered and weighted) for vjp, jvp, hvp and vhp over 2 and 3 shards:
//     equal to the full batch within 1e-5;
//   - the combination itself, on the CPU runtime: a model compiled at the
//     full batch and at the shard sizes (one artifact, -D B=7,4,3,2), its
//     vjp run on the full batch and on each shard's rows (the caller's x
//     and the declared const Y split by rt_multi_rows, as the multi context
//     splits them), the shards' outputs combined with rt_multi_weight's
//     weights: equal to the full run within 1e-5 (normalized; f32 reduction
//     order), for S = 2 (shards 4, 3) and S = 3 (3, 2, 2), a `loss mean`
//     with a batch-independent prior and a `loss sum` over axis 1 whose
//     prior's gradient (hand-derived: w) is counted with weight -(S - 1);
//     and the sum without that correction misses (teeth).
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "codegen_util.h"
#include "fadc.h"
#include "multi.h"
#include "testutil.h"

#define TOL 1e-5

static void
check_shards(void)
{
	for (int64_t n = 1; n <= 40; n++)
		for (int S = 1; S <= 9 && S <= n; S++) {
			int64_t at = 0, prev = INT64_MAX;
			for (int s = 0; s < S; s++) {
				int64_t off, rows;
				rt_multi_shard(n, S, s, &off, &rows);
				if (!CHECK(off == at && rows >= n / S && rows <= n / S + 1 && rows <= prev))
					fprintf(stderr, "n %lld S %d s %d: off %lld rows %lld\n", (long long)n, S, s,
					        (long long)off, (long long)rows);
				at += rows;
				prev = rows;
			}
			CHECK(at == n);
		}
	int64_t off, rows;
	rt_multi_shard(7, 2, 0, &off, &rows);
	CHECK(off == 0 && rows == 4);
	rt_multi_shard(7, 2, 1, &off, &rows);
	CHECK(off == 4 && rows == 3);
	rt_multi_shard(7, 3, 2, &off, &rows);
	CHECK(off == 5 && rows == 2);
	rt_multi_shard(256, 2, 1, &off, &rows);
	CHECK(off == 128 && rows == 128);
	double we = 1;
	CHECK(rt_multi_weight(1, 7, 4, 2, &we) == 4.0 / 7 && we == 0);
	CHECK(rt_multi_weight(1, 7, 3, 2, NULL) == 3.0 / 7);
	CHECK(rt_multi_weight(2, 7, 3, 3, &we) == 1 && we == -2);
	double sum = 0;
	for (int s = 0; s < 5; s++) {
		rt_multi_shard(13, 5, s, &off, &rows);
		sum += rt_multi_weight(1, 13, rows, 5, NULL);
	}
	CHECK(fabs(sum - 1) < 1e-15);
}

static void
check_rows(void)
{
	int64_t dim[3] = {3, 5, 4};
	float full[60], back[60], part[60];
	for (int i = 0; i < 60; i++)
		full[i] = (float)i;
	for (int axis = 0; axis < 3; axis++) {
		memset(back, 0, sizeof back);
		int64_t n = dim[axis];
		for (int S = 1; S <= 3; S++)
			for (int s = 0; s < S; s++) {
				int64_t off, rows;
				rt_multi_shard(n, S, s, &off, &rows);
				rt_multi_rows(part, full, 3, dim, axis, off, rows, 4, 0, FADC_F32, 1);
				// Element (a, b, c) of the shard is (a, b, c) of the full tensor
				// with the axis's index moved by off.
				int64_t sd[3] = {dim[0], dim[1], dim[2]};
				sd[axis] = rows;
				int bad = 0;
				for (int64_t a = 0; a < sd[0]; a++)
					for (int64_t b = 0; b < sd[1]; b++)
						for (int64_t c = 0; c < sd[2]; c++) {
							int64_t i[3] = {a, b, c};
							i[axis] += off;
							float want = (float)((i[0] * 5 + i[1]) * 4 + i[2]);
							bad += part[(a * sd[1] + b) * sd[2] + c] != want;
						}
				CHECK(bad == 0);
				if (S == 3)
					rt_multi_rows(back, part, 3, dim, axis, off, rows, 4, 1, FADC_F32, 1);
			}
		CHECK(!memcmp(back, full, sizeof full));
	}
	// A gather scaled by the shard's weight.
	double f64[6] = {1, 2, 3, 4, 5, 6}, out[6] = {0};
	int64_t d2[2] = {3, 2};
	rt_multi_rows(out, f64 + 2, 2, d2, 0, 1, 2, 8, 1, FADC_F64, 0.5);
	CHECK(out[0] == 0 && out[1] == 0 && out[2] == 1.5 && out[5] == 3);
}

static void
check_parse(void)
{
	RtBatch b;
	CHECK(rt_multi_batch_parse("target=cpu cpu=x86-64-v3 opt=2 compute=f32 defines= tasks=vjp "
	                           "batch=tokens:1,targets:1 loss=mean",
	                           &b) == 1);
	CHECK(b.n == 2 && !strcmp(b.name[0], "tokens") && b.axis[0] == 1 &&
	      !strcmp(b.name[1], "targets") && b.loss == 1);
	CHECK(rt_multi_batch_parse("target=cpu batch=a.b:0 loss=sum", &b) == 1 && b.loss == 2 &&
	      !strcmp(b.name[0], "a.b"));
	CHECK(rt_multi_batch_parse("target=cpu tasks=vjp", &b) == 0);
	CHECK(rt_multi_batch_parse(NULL, &b) == 0);
	CHECK(rt_multi_batch_parse("x batch=a:0", &b) == -1); // no loss
	CHECK(rt_multi_batch_parse("x batch=a loss=mean", &b) == -1); // no axis
	CHECK(rt_multi_batch_parse("x batch=a:z loss=mean", &b) == -1);
	CHECK(rt_multi_batch_parse("x batch=a:0 loss=max", &b) == -1);
}

// ---------------------------------------------------------------- the combination on the CPU

static const char *const mean_src =
    "let B = 7\n"
    "batch x: 0, Y: 0, loss mean\n"
    "const Y: f32[B, 2] = uniform(0, 1, seed=2)\n"
    "param w: f32[3, 2] = uniform(-1, 1, seed=1)\n"
    "param c: f32[2] = uniform(-1, 1, seed=4)\n"
    "def forward(x: f32[B, 3]) -> f32[] {\n"
    "  return mean(sum((tanh(x @ w) + c - Y) ** 2, 1)) + 0.5 * sum(w * w)\n"
    "}\n";

// The batch on axis 1 (outer blocks: the transformer's layout), a sum,
// and a prior 0.5 |w|^2 whose gradient is w.
static const char *const sum_src =
    "let B = 7\n"
    "batch x: 1, loss sum\n"
    "param w: f32[3, 2] = uniform(-1, 1, seed=1)\n"
    "def forward(x: f32[2, B, 3]) -> f32[] {\n"
    "  return sum(tanh(x @ w)) + 0.5 * sum(w * w)\n"
    "}\n";

static char dir[256];

static const char *
compile_tasks(const char *src, const char *name, const char *const *tasks, int ntasks)
{
	static char path[2][512];
	static int k;
	char *p = path[k++ % 2];
	snprintf(p, 512, "%s/%s.so", dir, name);
	static const char *const sizes[] = {"B=7", "B=4", "B=3", "B=2"};
	Module *ms[4];
	for (int i = 0; i < 4; i++) {
		FeOptions fo = {.diag = stderr, .defines = &sizes[i], .ndefines = 1};
		ms[i] = fe_parse_string(name, src, strlen(src), &fo);
		if (!ms[i]) {
			fprintf(stderr, "parse %s %s failed\n", name, sizes[i]);
			exit(1);
		}
	}
	const char *defs[] = {"B=7,4,3,2"};
	CgOptions o = {.opt_level = -1, .tasks = tasks, .ntasks = ntasks, .defines = defs,
	               .ndefines = 1};
	cgu_compile_or_exit((const Module *const *)ms, sizes, 4, &o, p, name);
	for (int i = 0; i < 4; i++)
		ir_module_free(ms[i]);
	return p;
}

static const char *
compile(const char *src, const char *name, int unused)
{
	const char *tasks[] = {"vjp"};
	(void)unused;
	return compile_tasks(src, name, tasks, 1);
}

static double
nerr(const float *want, const double *got, int64_t n)
{
	double maxw = 0, maxd = 0;
	for (int64_t i = 0; i < n; i++) {
		maxw = fmax(maxw, fabs((double)want[i]));
		maxd = fmax(maxd, fabs(got[i] - (double)want[i]));
	}
	return maxd / (maxw > 0 ? maxw : 1);
}

// vjp of the specialisation with batch `rows` on rows [off, off + rows) of
// the full x (xfull, dims xdim, batch axis xaxis) and of the full Y (when
// the model has one: bound by copy, as the multi context hands it over).
// Its outputs, scaled by w, are added into acc (nacc doubles per output).
static void
run_shard(fadc_context *ctx, fadc_model *m, const float *xfull, const int64_t *xdim, int xaxis,
          const float *Yfull, const int64_t *Ydim, int64_t off, int64_t rows, double w,
          double acc[][64], int64_t *nacc, int *nout)
{
	int64_t sx[3] = {xdim[0], xdim[1], xdim[2]};
	int xr = xaxis == 0 ? 2 : 3;
	sx[xaxis] = rows;
	fadc_tensor *x, *v;
	CHECK(fadc_tensor_create(ctx, FADC_F32, xr, sx, &x) == FADC_OK);
	rt_multi_rows(fadc_tensor_data(x), xfull, xr, xdim, xaxis, off, rows, 4, 0, FADC_F32, 1);
	CHECK(fadc_tensor_create(ctx, FADC_F32, 0, NULL, &v) == FADC_OK);
	*(float *)fadc_tensor_data(v) = 1;
	if (Yfull) {
		int64_t sy[2] = {rows, Ydim[1]};
		fadc_tensor *y;
		CHECK(fadc_tensor_create(ctx, FADC_F32, 2, sy, &y) == FADC_OK);
		rt_multi_rows(fadc_tensor_data(y), Yfull, 2, Ydim, 0, off, rows, 4, 0, FADC_F32, 1);
		CHECK(fadc_model_bind(m, "Y", y) == FADC_OK); // binds only the shard size's Y
		fadc_tensor_release(y);
	}
	fadc_tensor *ins[2] = {x, v}, *outs[8] = {NULL};
	int t = -1;
	CHECK(fadc_model_find_task_for(m, "vjp", ins, 2, &t) == FADC_OK);
	fadc_task_info info;
	CHECK(fadc_task_info_get(m, t, &info) == FADC_OK && info.ncaller == 2 && info.noutputs <= 8);
	CHECK(fadc_run(m, t, ins, 2, outs, info.noutputs) == FADC_OK);
	*nout = info.noutputs;
	for (int k = 0; k < info.noutputs; k++) {
		const float *o = fadc_tensor_data(outs[k]);
		nacc[k] = fadc_tensor_numel(outs[k]);
		for (int64_t i = 0; i < nacc[k] && i < 64; i++)
			acc[k][i] += w * o[i];
	}
	fadc_tensor_release(x);
	fadc_tensor_release(v);
}

// One model: the full run, then S shards combined, compared output by output.
static void
check_combination(const char *src, const char *name, int loss, int xaxis)
{
	const char *path = compile(src, name, 0);
	fadc_context_options co = {.device = {FADC_DEVICE_CPU, 0}, .num_threads = 1, .seed = 0};
	fadc_context *ctx;
	CHECK(fadc_context_create(&co, &ctx) == FADC_OK);
	fadc_model *m;
	if (!CHECK(fadc_model_open(ctx, path, 0, &m) == FADC_OK)) {
		fprintf(stderr, "%s\n", fadc_context_error(ctx));
		return;
	}
	CHECK(!strcmp(fadc_model_info(m, "options") + strlen(fadc_model_info(m, "options")) -
	                  (loss == 1 ? strlen("batch=x:0,Y:0 loss=mean") : strlen("batch=x:1 loss=sum")),
	              loss == 1 ? "batch=x:0,Y:0 loss=mean" : "batch=x:1 loss=sum"));
	CHECK(fadc_model_init(m, 0) == FADC_OK);
	int64_t xdim[3] = {7, 3, 0};
	if (xaxis == 1)
		xdim[0] = 2, xdim[1] = 7, xdim[2] = 3;
	int xr = xaxis == 0 ? 2 : 3;
	int64_t xn = xdim[0] * xdim[1] * (xr == 3 ? xdim[2] : 1);
	float xfull[64];
	for (int64_t i = 0; i < xn; i++)
		xfull[i] = (float)sin(0.7 * (double)i + 0.3);
	// The full batch's Y (the first declaration named Y: B=7's) and w.
	float Yfull[14], wv[6];
	int64_t Ydim[2] = {7, 2};
	fadc_tensor *Yt = NULL, *wt;
	if (loss == 1) {
		CHECK(fadc_model_get(m, "Y", &Yt) == FADC_OK && fadc_tensor_dims(Yt)[0] == 7);
		memcpy(Yfull, fadc_tensor_data(Yt), sizeof Yfull);
	}
	CHECK(fadc_model_get(m, "w", &wt) == FADC_OK);
	memcpy(wv, fadc_tensor_data(wt), sizeof wv);
	double full[8][64] = {{0}};
	int64_t nfull[8] = {0};
	int nout = 0;
	run_shard(ctx, m, xfull, xdim, xaxis, loss == 1 ? Yfull : NULL, Ydim, 0, 7, 1, full, nfull,
	          &nout);
	float fullf[8][64];
	for (int k = 0; k < nout; k++)
		for (int i = 0; i < nfull[k]; i++)
			fullf[k][i] = (float)full[k][i];
	for (int S = 2; S <= 3; S++) {
		double acc[8][64] = {{0}};
		int64_t nacc[8];
		int n2 = 0;
		double we = 0;
		for (int s = 0; s < S; s++) {
			int64_t off, rows;
			rt_multi_shard(7, S, s, &off, &rows);
			double w = rt_multi_weight(loss, 7, rows, S, &we);
			run_shard(ctx, m, xfull, xdim, xaxis, loss == 1 ? Yfull : NULL, Ydim, off, rows, w, acc,
			          nacc, &n2);
		}
		CHECK(n2 == nout);
		// vjp's outputs: the loss, then the gradients of w (and c).  A sum
		// counts L_0 = 0.5 |w|^2 once: weight we = -(S - 1) on L_0 and on
		// its gradient w (hand-derived).
		double missed = 0;
		if (loss == 2) {
			double l0 = 0;
			for (int i = 0; i < 6; i++)
				l0 += 0.5 * (double)wv[i] * wv[i];
			for (int k = 0; k < nout; k++)
				missed = fmax(missed, nerr(fullf[k], acc[k], nacc[k]));
			acc[0][0] += we * l0;
			for (int i = 0; i < 6; i++)
				acc[1][i] += we * wv[i];
		}
		for (int k = 0; k < nout; k++) {
			CHECK(nacc[k] == nfull[k]);
			double e = nerr(fullf[k], acc[k], nacc[k]);
			printf("%s S=%d output %d: normalized error %.2e\n", name, S, k, e);
			CHECK(e <= TOL);
		}
		if (loss == 2) {
			printf("%s S=%d without L_0's correction: %.2e\n", name, S, missed);
			CHECK(missed > 1e-2); // teeth: the prior counted S times
		}
	}
	fadc_model_close(m);
	fadc_context_destroy(ctx);
}

// ---------------------------------------------------------------- the plan, emulated on the CPU
//
// rt_multi_plan (the shape of a run: shard tasks, input and output axes,
// weights) on a compiled artifact's descriptor, and the run it describes
// emulated on the CPU runtime as runtime/multi.c does it on GPUs: each
// shard's task on its rows of every batched input (declarations bound by
// copy, caller inputs split), reduced outputs summed with the weights,
// per-sample outputs gathered in row order, scaled by the weights; the
// result must equal the full batch's run within 1e-5 (normalized).

// A model with a batched param z (one row of it per sample): vjp's
// gradient of z and hvp's / vhp's product on it are per-sample outputs,
// jvp's tangent v.z a caller input batched by its shape.
static const char *const zsrc =
    "let B = 7\n"
    "batch x: 0, z: 0, loss mean\n"
    "param w: f32[3, 2] = uniform(-1, 1, seed=1)\n"
    "param z: f32[B, 2] = uniform(-1, 1, seed=6)\n"
    "def forward(x: f32[B, 3]) -> f32[] {\n"
    "  return mean(sum(tanh(x @ w + z) ** 2, 1)) + 0.1 * sum(w * w)\n"
    "}\n";

static void
fill(fadc_tensor *t, double phase)
{
	int64_t n = fadc_tensor_numel(t);
	float *d = fadc_tensor_data(t);
	for (int64_t i = 0; i < n; i++)
		d[i] = n == 1 ? 1.0f : (float)sin(0.37 * (double)i + phase);
}

static void
emulate_task(fadc_context *ctx, fadc_model *m, const char *task, int S, const char *name)
{
	const ArtDesc *d = rt_model_desc(m);
	RtBatch b;
	CHECK(rt_multi_batch_parse(d->options, &b) == 1);
	int t = -1;
	CHECK(fadc_model_find_task(m, task, &t) == FADC_OK);
	const ArtTask *T = &d->task[t];
	RtShape ps;
	int in_axis[32], out_axis[32];
	char err[1024];
	if (!CHECK(rt_multi_plan(d, t, &b, S, &ps, in_axis, out_axis, err, sizeof err) == FADC_OK)) {
		fprintf(stderr, "%s %s S=%d: %s\n", name, task, S, err);
		return;
	}
	CHECK(ps.n == 7 && ps.S == S);
	// The full batch: the caller's inputs (x, the v's) made once.
	fadc_task_info info;
	fadc_task_info_get(m, t, &info);
	fadc_tensor *in[16], *full[16] = {NULL};
	int nc = 0, kin[16];
	for (uint32_t k = 0; k < T->nin; k++)
		if (T->in[k].role == ART_ROLE_ARG) {
			CHECK(fadc_tensor_create(ctx, (fadc_dtype)T->in[k].dtype, T->in[k].rank,
			                         T->in[k].dim, &in[nc]) == FADC_OK);
			fill(in[nc], 1 + nc);
			kin[nc++] = (int)k;
		}
	CHECK(nc == info.ncaller);
	CHECK(fadc_run(m, t, in, nc, full, info.noutputs) == FADC_OK);
	double acc[8][64] = {{0}};
	float want[8][64];
	for (int k = 0; k < info.noutputs; k++) {
		CHECK(fadc_tensor_numel(full[k]) <= 64);
		memcpy(want[k], fadc_tensor_data(full[k]), fadc_tensor_bytes(full[k]));
	}
	// The batched declarations' full values (the full batch's own).
	for (int s = 0; s < S; s++) {
		const ArtTask *U = &d->task[ps.task[s]];
		CHECK(!strcmp(U->name, task));
		fadc_tensor *sin_[16], *out[16] = {NULL};
		for (uint32_t k = 0; k < T->nin; k++) {
			const ArtTensor *a = &T->in[k], *u = &U->in[k];
			if (in_axis[k] < 0 || a->role != ART_ROLE_DECL)
				continue;
			fadc_tensor *h;
			CHECK(fadc_tensor_create(ctx, (fadc_dtype)u->dtype, u->rank, u->dim, &h) == FADC_OK);
			rt_multi_rows(fadc_tensor_data(h), fadc_tensor_data(rt_model_decl_value(m, a->decl)),
			              a->rank, a->dim, in_axis[k], ps.off[s], ps.rows[s], 4, 0, FADC_F32, 1);
			CHECK(fadc_model_bind(m, a->name, h) == FADC_OK);
			fadc_tensor_release(h);
		}
		for (int c = 0; c < nc; c++) {
			const ArtTensor *a = &T->in[kin[c]], *u = &U->in[kin[c]];
			CHECK(fadc_tensor_create(ctx, (fadc_dtype)u->dtype, u->rank, u->dim, &sin_[c]) ==
			      FADC_OK);
			if (in_axis[kin[c]] >= 0)
				rt_multi_rows(fadc_tensor_data(sin_[c]), fadc_tensor_data(in[c]), a->rank, a->dim,
				              in_axis[kin[c]], ps.off[s], ps.rows[s], 4, 0, FADC_F32, 1);
			else
				memcpy(fadc_tensor_data(sin_[c]), fadc_tensor_data(in[c]), fadc_tensor_bytes(in[c]));
		}
		CHECK(fadc_run(m, ps.task[s], sin_, nc, out, info.noutputs) == FADC_OK);
		for (int k = 0; k < info.noutputs; k++) {
			const float *o = fadc_tensor_data(out[k]);
			if (out_axis[k] < 0) {
				for (int64_t i = 0; i < fadc_tensor_numel(out[k]); i++)
					acc[k][i] += ps.w[s] * o[i];
			} else {
				// The gather, in float64 (rt_multi_rows does it in the
				// output's dtype; the placement is the same).
				double part[64];
				for (int64_t i = 0; i < fadc_tensor_numel(out[k]); i++)
					part[i] = ps.w[s] * o[i];
				rt_multi_rows(acc[k], part, T->out[k].rank, T->out[k].dim, out_axis[k],
				              ps.off[s], ps.rows[s], 8, 1, FADC_F64, 1);
			}
		}
		for (int c = 0; c < nc; c++)
			fadc_tensor_release(sin_[c]);
	}
	int gathered = 0;
	for (int k = 0; k < info.noutputs; k++) {
		double e = nerr(want[k], acc[k], fadc_tensor_numel(full[k]));
		gathered += out_axis[k] >= 0;
		if (!CHECK(e <= TOL))
			fprintf(stderr, "%s %s S=%d output %d (%s): %.2e\n", name, task, S, k, T->out[k].name, e);
	}
	printf("%s %s S=%d: %d outputs (%d per-sample) equal the full batch\n", name, task, S,
	       info.noutputs, gathered);
	// (The shard sizes' declarations stay bound to the last shard's rows;
	// the full batch's, another shape, were never touched.)
	for (int c = 0; c < nc; c++)
		fadc_tensor_release(in[c]);
}

static void
check_plan(void)
{
	const char *tasks[] = {"vjp", "jvp", "hvp", "vhp"};
	const char *path = compile_tasks(zsrc, "z", tasks, 4);
	fadc_context_options co = {.device = {FADC_DEVICE_CPU, 0}, .num_threads = 1, .seed = 0};
	fadc_context *ctx;
	fadc_model *m;
	CHECK(fadc_context_create(&co, &ctx) == FADC_OK);
	if (!CHECK(fadc_model_open(ctx, path, 0, &m) == FADC_OK))
		return;
	const ArtDesc *d = rt_model_desc(m);
	RtBatch b;
	CHECK(rt_multi_batch_parse(d->options, &b) == 1);
	// The plan's facts for vjp over 2 GPUs: shards of 4 and 3 rows, the
	// tasks of B=4 and B=3, x and z batched (declared), w and v not; the
	// gradient of z gathered on axis 0, the loss and w's reduced.
	int t;
	CHECK(fadc_model_find_task(m, "vjp", &t) == FADC_OK);
	RtShape ps;
	int in_axis[32], out_axis[32];
	char err[1024];
	CHECK(rt_multi_plan(d, t, &b, 2, &ps, in_axis, out_axis, err, sizeof err) == FADC_OK);
	CHECK(ps.rows[0] == 4 && ps.rows[1] == 3 && ps.off[1] == 4 && ps.w[0] == 4.0 / 7);
	CHECK(!strcmp(d->task[ps.task[0]].spec_name, "B=4") &&
	      !strcmp(d->task[ps.task[1]].spec_name, "B=3"));
	const ArtTask *T = &d->task[t];
	for (uint32_t k = 0; k < T->nin; k++) {
		int want = !strcmp(T->in[k].name, "x") || !strcmp(T->in[k].name, "z") ? 0 : -1;
		if (!CHECK(in_axis[k] == want))
			fprintf(stderr, "vjp input %s: axis %d\n", T->in[k].name, in_axis[k]);
	}
	for (uint32_t k = 0; k < T->nout - T->ncheck; k++) {
		int want = strstr(T->out[k].name, "z") ? 0 : -1;
		if (!CHECK(out_axis[k] == want))
			fprintf(stderr, "vjp output %s: axis %d\n", T->out[k].name, out_axis[k]);
	}
	// jvp: the tangent of z, v.z, batched by its shape (not named).
	CHECK(fadc_model_find_task(m, "jvp", &t) == FADC_OK);
	CHECK(rt_multi_plan(d, t, &b, 2, &ps, in_axis, out_axis, err, sizeof err) == FADC_OK);
	T = &d->task[t];
	int vz = 0;
	for (uint32_t k = 0; k < T->nin; k++)
		if (T->in[k].role == ART_ROLE_ARG && strstr(T->in[k].name, "z"))
			vz += CHECK(in_axis[k] == 0);
	CHECK(vz == 1);
	// Refusals: a shard size the artifact lacks (4 GPUs: 2, 2, 2, 1), more
	// GPUs than rows, one GPU is the full batch's own task.
	CHECK(rt_multi_plan(d, t, &b, 4, &ps, in_axis, out_axis, err, sizeof err) == FADC_ERR_SHAPE);
	CHECK(strstr(err, "no specialisation of task 'jvp' at a batch of 1 rows (the batch of 7 over "
	                  "4 GPUs): compile it with -D B=7,2,1") != NULL);
	printf("missing size: %s\n", err);
	CHECK(rt_multi_plan(d, t, &b, 8, &ps, in_axis, out_axis, err, sizeof err) == FADC_ERR_SHAPE);
	CHECK(strstr(err, "a batch of 7 rows over 8 GPUs (fewer rows than GPUs)") != NULL);
	CHECK(rt_multi_plan(d, t, &b, 1, &ps, in_axis, out_axis, err, sizeof err) == FADC_OK);
	CHECK(ps.task[0] == t && ps.rows[0] == 7 && ps.w[0] == 1);
	RtBatch sum = b;
	sum.loss = 2;
	CHECK(rt_multi_plan(d, t, &sum, 2, &ps, in_axis, out_axis, err, sizeof err) == FADC_ERR_STATE);
	CHECK(strstr(err, "declares `loss sum`") != NULL);
	CHECK(rt_multi_plan(d, t, &sum, 1, &ps, in_axis, out_axis, err, sizeof err) == FADC_OK);
	// rt_model_bind_index binds that declaration, not every one of its
	// name (z at B=4, not the full batch's z at B=7): how the runtime hands
	// a shard its rows.
	int z7 = -1, z4 = -1;
	for (uint32_t i = 0; i < d->ndecl; i++)
		if (!strcmp(d->decl[i].name, "z")) {
			if (d->decl[i].dim[0] == 7)
				z7 = (int)i;
			if (d->decl[i].dim[0] == 4)
				z4 = (int)i;
		}
	if (CHECK(z7 >= 0 && z4 >= 0)) {
		CHECK(fadc_model_init(m, 0) == FADC_OK);
		float before[14], rows[8] = {1, 2, 3, 4, 5, 6, 7, 8};
		memcpy(before, fadc_tensor_data(rt_model_decl_value(m, z7)), sizeof before);
		uint64_t g = fadc_tensor_generation(rt_model_decl_value(m, z4));
		CHECK(rt_model_bind_index(m, z4, rows) == FADC_OK);
		CHECK(!memcmp(fadc_tensor_data(rt_model_decl_value(m, z4)), rows, sizeof rows));
		CHECK(!memcmp(fadc_tensor_data(rt_model_decl_value(m, z7)), before, sizeof before));
		CHECK(fadc_tensor_generation(rt_model_decl_value(m, z4)) == g + 1);
		CHECK(rt_model_bind_index(m, (int)d->ndecl, rows) == FADC_ERR_ARG);
	}
	// The runs the plans describe, emulated, against the full batch.
	for (int k = 0; k < 4; k++)
		for (int S = 2; S <= 3; S++)
			emulate_task(ctx, m, tasks[k], S, "z");
	fadc_model_close(m);
	fadc_context_destroy(ctx);
}

int
main(void)
{
	check_shards();
	check_rows();
	check_parse();
	snprintf(dir, sizeof dir, "/tmp/fadc-test-runtime-multi-XXXXXX");
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	check_combination(mean_src, "mean", 1, 0);
	check_combination(sum_src, "sum", 2, 1);
	check_plan();
	char cmd[300];
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	if (system(cmd)) {
	}
	TU_DONE("test_runtime_multi");
}
