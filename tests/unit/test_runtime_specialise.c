// tests/unit/test_runtime_specialise.c -- one artifact, several specialisations
// (fadc -D N=2,3 -D K=4,5: docs/ARTIFACT.md, format 5), and parameters
// bound by reference (fadc_model_bind_ref).
//
//   - a model compiled for N=2,3 x K=4,5 (4 specialisations) and for N=2,3
//     alone: the descriptor's specialisations, shared and per-specialisation
//     declarations, and every specialisation's forward and vjp against the
//     float64 interpreter run on the module parsed at that size (normalized
//     error at most 1e-5: f32 against f64);
//   - fadc_model_find_task_for by the caller's input shapes, NULL inputs,
//     and the no-match error that lists the specialisations' shapes;
//   - fadc_model_bind binding exactly the declarations of the value's shape,
//     and the error listing the shapes when none fits;
//   - byte-identical recompiles; one specialisation still writes format 3,
//     several format 5; the v5 descriptor's decoder on every prefix and
//     byte flip (no crash, a message);
//   - bind_ref on the CPU: runs read the caller's tensor in place, a new
//     value written into it is what the next run sees, another tensor bound
//     by reference replaces it, a copy (fadc_model_bind) ends it.
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "artifact.h"
#include "codegen.h"
#include "fadc.h"
#include "frontend.h"
#include "passes.h"
#include "codegen_util.h"
#include "testmodel.h"
#include "testutil.h"

#define TOL 1e-5 // normalized error of f32 code against the f64 interpreter

// w's shape depends on K, so it is one declaration per specialisation; c's
// on nothing: shared.  forward's argument x depends on both: its shape
// picks the specialisation.
static const char *const src =
    "let N = 2\n"
    "let K = 4\n"
    "param w: f32[K, 1] = normal(0, 1, seed=3)\n"
    "const c: f32[3] = uniform(0, 1, seed=5)\n"
    "def forward(x: f32[N, K]) -> f32[] {\n"
    "  return sum(tanh(x @ w)) + sum(c * c)\n"
    "}\n";

static char dir[256];

// Compiles the specialisations ms[0..n) (forward, vjp) into dir/name.
static const char *
compile_specs(Module **ms, const char *const *names, int n, const char *name)
{
	static char path[8][512];
	static int k;
	char *p = path[k++ % 8];
	snprintf(p, 512, "%s/%s", dir, name);
	const char *tasks[] = {"forward", "vjp"};
	const char *defs[] = {"N=2,3", "K=4,5"};
	CgOptions o = {.opt_level = -1, .tasks = tasks, .ntasks = 2, .defines = defs, .ndefines = 2};
	cgu_compile_or_exit((const Module *const *)ms, names, n, &o, p, name);
	return p;
}

static uint32_t
file_version(const char *path)
{
	size_t n;
	uint8_t *b = tu_slurp(path, &n);
	uint32_t v = b && n >= ART_TRAILER_SIZE
	                 ? (uint32_t)b[n - 32] | (uint32_t)b[n - 31] << 8 |
	                       (uint32_t)b[n - 30] << 16 | (uint32_t)b[n - 29] << 24
	                 : 0;
	free(b);
	return v;
}

// x of an N x K specialisation: sin(0.37 i + 1) + 0.1 s, distinct per size.
static void
fill_x(float *x, int64_t n, int s)
{
	for (int64_t i = 0; i < n; i++)
		x[i] = (float)(sin(0.37 * (double)i + 1) + 0.1 * s);
}

static double
nerr(const double *want, const float *got, int64_t n)
{
	double maxw = 0, maxd = 0;
	for (int64_t i = 0; i < n; i++) {
		if (!isfinite(got[i]))
			return INFINITY;
		maxw = fmax(maxw, fabs(want[i]));
		maxd = fmax(maxd, fabs((double)got[i] - want[i]));
	}
	return maxd / (maxw > 0 ? maxw : 1);
}

// The interpreter's outputs of `task` of module m (declarations from
// their initializers, or w = wbound when not NULL), the caller's inputs
// x then v (vjp's seed, 1).  Returns the number of outputs.
static int
interp(const Module *m, const char *task, const float *x, const float *wbound, Tensor *out)
{
	char err[512];
	Loc loc;
	Graph *g = pass_task(m->main, task, NULL, &loc, err, sizeof err);
	CHECK(g != NULL);
	if (!g) {
		fprintf(stderr, "pass_task %s: %s\n", task, err);
		return 0;
	}
	Tensor vals[8] = {{0}}, bound[8] = {{0}}, in[8] = {{0}};
	int isbound[8] = {0};
	int wd = ir_module_find_decl(m, "w");
	if (wbound) {
		ir_tensor_alloc(&bound[wd], m->decl[wd].dtype, &m->decl[wd].shape);
		int64_t n = m->decl[wd].shape.dim[0];
		for (int64_t i = 0; i < n; i++)
			bound[wd].data[i] = wbound[i];
		isbound[wd] = 1;
	}
	CHECK(ir_module_init(m, bound, isbound, vals, 0, err, sizeof err));
	for (uint32_t i = 0; i < g->ninput; i++) {
		int d = ir_module_find_decl(m, g->input[i].name);
		Tensor *t = &in[i];
		if (d >= 0) {
			ir_tensor_alloc(t, vals[d].dtype, &vals[d].shape);
			int64_t n = 1;
			for (int k = 0; k < vals[d].shape.rank; k++)
				n *= vals[d].shape.dim[k];
			memcpy(t->data, vals[d].data, sizeof(double) * (size_t)n);
		} else {
			const Node *nd = &g->node[g->input[i].node];
			ir_tensor_alloc(t, (DType)nd->dtype, ir_shape(g, g->input[i].node));
			if (!strcmp(g->input[i].name, "x")) {
				int64_t n = t->shape.dim[0] * t->shape.dim[1];
				for (int64_t k = 0; k < n; k++)
					t->data[k] = x[k];
			} else
				t->data[0] = 1; // v: f32[]
		}
	}
	int ok = ir_interp(g, in, out, 0, err, sizeof err);
	CHECK(ok);
	if (!ok)
		fprintf(stderr, "interp %s: %s\n", task, err);
	int nout = (int)g->nout;
	for (uint32_t i = 0; i < g->ninput; i++)
		ir_tensor_free(&in[i]);
	for (uint32_t i = 0; i < m->ndecl; i++) {
		ir_tensor_free(&vals[i]);
		ir_tensor_free(&bound[i]);
	}
	ir_graph_free(g);
	return ok ? nout : 0;
}

// Runs `task` (forward or vjp) of specialisation s of the open model on an
// N x K input and compares every output with the interpreter on module ms.
// wbound: the value w was bound to (NULL: its initializer).  Returns the
// worst normalized error.
static double
check_spec(fadc_model *m, fadc_context *ctx, const Module *ms, int s, const char *task,
           int64_t N, int64_t K, const float *wbound)
{
	int64_t dim[2] = {N, K};
	fadc_tensor *x, *v = NULL;
	CHECK(fadc_tensor_create(ctx, FADC_F32, 2, dim, &x) == FADC_OK);
	fill_x(fadc_tensor_data(x), N * K, s);
	fadc_tensor *ins[2] = {x, NULL};
	int nin = 1;
	if (!strcmp(task, "vjp")) {
		CHECK(fadc_tensor_create(ctx, FADC_F32, 0, NULL, &v) == FADC_OK);
		*(float *)fadc_tensor_data(v) = 1;
		ins[nin++] = v;
	}
	int t = -1;
	// The task for these shapes: specialisation s's.
	CHECK(fadc_model_find_task_for(m, task, ins, nin, &t) == FADC_OK);
	fadc_task_info info;
	CHECK(fadc_task_info_get(m, t, &info) == FADC_OK);
	CHECK(info.spec_index == s && !strcmp(info.spec, fadc_model_spec(m, s)));
	CHECK(info.ncaller == nin);
	fadc_tensor *outs[4] = {NULL};
	CHECK(info.noutputs <= 4);
	fadc_status st = fadc_run(m, t, ins, nin, outs, info.noutputs);
	CHECK(st == FADC_OK);
	if (st)
		fprintf(stderr, "run %s spec %d: %s\n", task, s, fadc_context_error(ctx));
	Tensor want[4] = {{0}};
	int nw = interp(ms, task, fadc_tensor_data(x), wbound, want);
	CHECK(nw == info.noutputs);
	double worst = 0;
	for (int i = 0; !st && i < nw && i < info.noutputs; i++) {
		int64_t n = fadc_tensor_numel(outs[i]);
		double e = nerr(want[i].data, fadc_tensor_data(outs[i]), n);
		worst = fmax(worst, e);
		if (!(e <= TOL))
			fprintf(stderr, "%s [%s] output %d: normalized error %g\n", task, info.spec, i, e);
	}
	for (int i = 0; i < nw; i++)
		ir_tensor_free(&want[i]);
	fadc_tensor_release(x);
	fadc_tensor_release(v);
	return worst;
}

static void
test_four(void)
{
	static const char *const names[] = {"N=2,K=4", "N=2,K=5", "N=3,K=4", "N=3,K=5"};
	static const int64_t NS[] = {2, 2, 3, 3}, KS[] = {4, 5, 4, 5};
	Module *ms[4];
	for (int s = 0; s < 4; s++) {
		char n[16], k[16];
		snprintf(n, sizeof n, "N=%lld", (long long)NS[s]);
		snprintf(k, sizeof k, "K=%lld", (long long)KS[s]);
		const char *defs[] = {n, k};
		ms[s] = tm_parse_defs("sp.ir", src, defs, 2);
	}
	const char *a = compile_specs(ms, names, 4, "four-a.so");
	const char *b = compile_specs(ms, names, 4, "four-b.so");
	size_t na, nb;
	uint8_t *x = tu_slurp(a, &na), *y = tu_slurp(b, &nb);
	CHECK(x && y && na == nb && !memcmp(x, y, na)); // byte-identical recompiles
	free(x);
	free(y);
	CHECK(file_version(a) == ART_FORMAT_VERSION_SPECS);

	fadc_context *ctx;
	fadc_model *m;
	CHECK(fadc_context_create(NULL, &ctx) == FADC_OK);
	CHECK(fadc_model_open(ctx, a, 0, &m) == FADC_OK);
	CHECK(fadc_model_spec_count(m) == 4);
	for (int s = 0; s < 4; s++)
		CHECK(!strcmp(fadc_model_spec(m, s), names[s]));
	CHECK(fadc_model_spec(m, 4) == NULL && fadc_model_spec(m, -1) == NULL);
	// w per specialisation (its shape follows K), c shared.
	CHECK(fadc_model_decl_count(m) == 5);
	int nw = 0, nc = 0;
	for (int i = 0; i < fadc_model_decl_count(m); i++) {
		fadc_tensor_desc d;
		CHECK(fadc_model_decl(m, i, &d, NULL) == FADC_OK);
		int sp = fadc_model_decl_spec(m, i);
		if (!strcmp(d.name, "w")) {
			CHECK(sp == nw && d.dim[0] == KS[sp]);
			nw++;
		} else if (!strcmp(d.name, "c")) {
			CHECK(sp == -1);
			nc++;
		}
	}
	CHECK(nw == 4 && nc == 1);
	// 2 tasks per specialisation, then 5 initializers.
	CHECK(fadc_model_task_count(m) == 4 * 2 + 5);
	for (int s = 0; s < 4; s++) {
		double e = check_spec(m, ctx, ms[s], s, "forward", NS[s], KS[s], NULL);
		CHECK(e <= TOL);
		e = check_spec(m, ctx, ms[s], s, "vjp", NS[s], KS[s], NULL);
		CHECK(e <= TOL);
	}
	// NULL inputs: the first specialisation; no fit: the shapes listed.
	int t = -1;
	CHECK(fadc_model_find_task_for(m, "vjp", NULL, 0, &t) == FADC_OK);
	fadc_task_info info;
	CHECK(fadc_task_info_get(m, t, &info) == FADC_OK && info.spec_index == 0 && !info.is_init);
	int64_t bad[2] = {7, 4};
	fadc_tensor *xb;
	CHECK(fadc_tensor_create(ctx, FADC_F32, 2, bad, &xb) == FADC_OK);
	CHECK(fadc_model_find_task_for(m, "forward", &xb, 1, &t) == FADC_ERR_SHAPE);
	const char *msg = fadc_context_error(ctx);
	CHECK(strstr(msg, "no specialisation of task 'forward' for inputs (f32[7, 4])") != NULL);
	CHECK(strstr(msg, "N=2,K=4 (f32[2, 4])") && strstr(msg, "N=3,K=5 (f32[3, 5])"));
	if (!strstr(msg, "N=3,K=5 (f32[3, 5])"))
		fprintf(stderr, "no-match message: %s\n", msg);
	CHECK(fadc_model_find_task_for(m, "hvp", &xb, 1, &t) == FADC_ERR_NOT_FOUND);
	fadc_tensor_release(xb);
	// Binding w f32[5, 1] binds the K=5 specialisations' w only.
	float w5[5] = {0.5f, -0.25f, 1.5f, 0.125f, -1};
	int64_t d5[2] = {5, 1}, d7[2] = {7, 1};
	fadc_tensor *tw;
	CHECK(fadc_tensor_wrap(ctx, FADC_F32, 2, d5, w5, &tw) == FADC_OK);
	CHECK(fadc_model_bind(m, "w", tw) == FADC_OK);
	fadc_tensor_release(tw);
	CHECK(check_spec(m, ctx, ms[1], 1, "forward", 2, 5, w5) <= TOL);
	CHECK(check_spec(m, ctx, ms[3], 3, "vjp", 3, 5, w5) <= TOL);
	CHECK(check_spec(m, ctx, ms[0], 0, "forward", 2, 4, NULL) <= TOL); // untouched
	float w7[7] = {0};
	CHECK(fadc_tensor_wrap(ctx, FADC_F32, 2, d7, w7, &tw) == FADC_OK);
	CHECK(fadc_model_bind(m, "w", tw) == FADC_ERR_SHAPE);
	msg = fadc_context_error(ctx);
	CHECK(strstr(msg, "'w' is declared f32[4, 1] or f32[5, 1] or f32[4, 1] or f32[5, 1], the "
	                  "bound tensor is f32[7, 1]") != NULL);
	if (!strstr(msg, "bound tensor is f32[7, 1]"))
		fprintf(stderr, "bind message: %s\n", msg);
	fadc_tensor_release(tw);
	fadc_model_close(m);
	fadc_context_destroy(ctx);
	for (int s = 0; s < 4; s++)
		ir_module_free(ms[s]);
}

// N=2,3 alone: w and c are the same in both, shared; one specialisation
// is format 3, as before specialisations.
static void
test_one_list(void)
{
	static const char *const names[] = {"N=2", "N=3"};
	Module *ms[2];
	const char *d2[] = {"N=2"}, *d3[] = {"N=3"};
	ms[0] = tm_parse_defs("sp.ir", src, d2, 1);
	ms[1] = tm_parse_defs("sp.ir", src, d3, 1);
	const char *a = compile_specs(ms, names, 2, "two.so");
	const char *one = compile_specs(ms, NULL, 1, "one.so");
	CHECK(file_version(a) == ART_FORMAT_VERSION_SPECS);
	CHECK(file_version(one) == ART_FORMAT_VERSION_ONE_SPEC);
	fadc_context *ctx;
	fadc_model *m;
	CHECK(fadc_context_create(NULL, &ctx) == FADC_OK);
	CHECK(fadc_model_open(ctx, a, 0, &m) == FADC_OK);
	CHECK(fadc_model_spec_count(m) == 2 && fadc_model_decl_count(m) == 2);
	for (int i = 0; i < fadc_model_decl_count(m); i++)
		CHECK(fadc_model_decl_spec(m, i) == -1);
	for (int s = 0; s < 2; s++) {
		CHECK(check_spec(m, ctx, ms[s], s, "forward", 2 + s, 4, NULL) <= TOL);
		CHECK(check_spec(m, ctx, ms[s], s, "vjp", 2 + s, 4, NULL) <= TOL);
	}
	fadc_model_close(m);
	// The plain artifact: one specialisation named "", every task index 0.
	CHECK(fadc_model_open(ctx, one, 0, &m) == FADC_OK);
	CHECK(fadc_model_spec_count(m) == 1 && !strcmp(fadc_model_spec(m, 0), ""));
	fadc_task_info info;
	CHECK(fadc_task_info_get(m, 0, &info) == FADC_OK && info.spec_index == 0 && !info.spec[0]);
	CHECK(check_spec(m, ctx, ms[0], 0, "forward", 2, 4, NULL) <= TOL);
	fadc_model_close(m);
	fadc_context_destroy(ctx);

	// The v5 descriptor: every prefix and every byte flipped decodes to a
	// message or a descriptor, never a crash (ASan in tests/run-all.sh).
	ArtDesc d;
	uint8_t *db;
	size_t dl;
	char err[512];
	CHECK(art_read(a, &d, &db, &dl, err, sizeof err) == ART_READ_OK);
	CHECK(d.version == ART_FORMAT_VERSION_SPECS && d.nspec == 2 && !strcmp(d.spec[1], "N=3"));
	art_desc_free(&d);
	int prefixes_ok = 1;
	for (size_t n = 0; n < dl; n++) {
		ArtDesc e;
		if (art_desc_decode(db, n, &e, err, sizeof err)) {
			prefixes_ok = 0;
			art_desc_free(&e);
		}
	}
	CHECK(prefixes_ok);
	for (size_t i = 0; i < dl; i++) {
		ArtDesc e;
		db[i] ^= 0x5a;
		if (art_desc_decode(db, dl, &e, err, sizeof err))
			art_desc_free(&e);
		db[i] ^= 0x5a;
	}
	free(db);
	ir_module_free(ms[0]);
	ir_module_free(ms[1]);
}

// fadc_model_bind_ref on the CPU.
static void
test_bind_ref(void)
{
	static const char *const names[] = {"N=2", "N=3"};
	Module *ms[2];
	const char *d2[] = {"N=2"}, *d3[] = {"N=3"};
	ms[0] = tm_parse_defs("sp.ir", src, d2, 1);
	ms[1] = tm_parse_defs("sp.ir", src, d3, 1);
	const char *a = compile_specs(ms, names, 2, "ref.so");
	fadc_context *ctx;
	fadc_model *m;
	CHECK(fadc_context_create(NULL, &ctx) == FADC_OK);
	CHECK(fadc_model_open(ctx, a, 0, &m) == FADC_OK);
	int64_t dw[2] = {4, 1};
	fadc_tensor *r1, *r2;
	CHECK(fadc_tensor_create(ctx, FADC_F32, 2, dw, &r1) == FADC_OK);
	CHECK(fadc_tensor_create(ctx, FADC_F32, 2, dw, &r2) == FADC_OK);
	float *p1 = fadc_tensor_data(r1), *p2 = fadc_tensor_data(r2);
	for (int i = 0; i < 4; i++) {
		p1[i] = 0.3f * (float)(i + 1);
		p2[i] = -0.7f + 0.2f * (float)i;
	}
	CHECK(fadc_model_bind_ref(m, "w", r1) == FADC_OK);
	fadc_tensor *got;
	CHECK(fadc_model_get(m, "w", &got) == FADC_OK && got == r1);
	CHECK(check_spec(m, ctx, ms[0], 0, "forward", 2, 4, p1) <= TOL);
	CHECK(check_spec(m, ctx, ms[1], 1, "vjp", 3, 4, p1) <= TOL);
	// A new value written into the caller's tensor: the next run sees it.
	float nv[4] = {2, -1, 0.5f, 0.25f};
	CHECK(fadc_tensor_write(r1, nv, sizeof nv) == FADC_OK);
	CHECK(check_spec(m, ctx, ms[0], 0, "forward", 2, 4, nv) <= TOL);
	// Another tensor by reference replaces it.
	CHECK(fadc_model_bind_ref(m, "w", r2) == FADC_OK);
	CHECK(check_spec(m, ctx, ms[1], 1, "forward", 3, 4, p2) <= TOL);
	// A copy ends the reference: later writes to r2 are not seen.
	float saved[4];
	memcpy(saved, p2, sizeof saved);
	CHECK(fadc_model_bind(m, "w", r2) == FADC_OK);
	p2[0] = 100;
	CHECK(check_spec(m, ctx, ms[0], 0, "forward", 2, 4, saved) <= TOL);
	CHECK(fadc_model_get(m, "w", &got) == FADC_OK && got != r2);
	// Errors: the wrong shape, a model-owned tensor, an unknown name.
	int64_t bad[2] = {5, 1};
	fadc_tensor *rb;
	CHECK(fadc_tensor_create(ctx, FADC_F32, 2, bad, &rb) == FADC_OK);
	CHECK(fadc_model_bind_ref(m, "w", rb) == FADC_ERR_SHAPE);
	CHECK(strstr(fadc_context_error(ctx), "'w' is declared f32[4, 1], the bound tensor is "
	                                      "f32[5, 1]") != NULL);
	CHECK(fadc_model_bind_ref(m, "nope", r1) == FADC_ERR_NOT_FOUND);
	CHECK(fadc_model_get(m, "c", &got) == FADC_OK);
	CHECK(fadc_model_bind_ref(m, "c", got) == FADC_ERR_ARG);
	CHECK(fadc_model_bind_ref(m, "w", NULL) == FADC_ERR_ARG);
	fadc_tensor_release(rb);
	fadc_model_close(m);
	fadc_tensor_release(r1);
	fadc_tensor_release(r2);
	fadc_context_destroy(ctx);
	ir_module_free(ms[0]);
	ir_module_free(ms[1]);
}

int
main(void)
{
	snprintf(dir, sizeof dir, "%s/fadc-spec-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	test_four();
	test_one_list();
	test_bind_ref();
	char cmd[600];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	if (system(cmd)) {
	}
	return TU_DONE("test_runtime_specialise");
}
