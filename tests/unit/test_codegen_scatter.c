// tests/unit/test_codegen_scatter.c -- take_add as segments (codegen/lower.c,
// "take_add as segments"; docs/CODEGEN.md, "Scatter-adds"): the keys
// sorted (block ranks, then merge passes), row offsets, chunk sums, and
// each row summing its own tokens.
//   - against the float64 interpreter (cg_check), the form forced with
//     FADC_SCATTER=segment at awkward shapes: one token, every token in
//     one row, rows never indexed and indices only at the table's two
//     edges, an index tensor of rank 2 along a middle axis, batch 1 (an
//     outer and an inner extent of 1), the last axis, 1,000 tokens (ragged
//     blocks and merge runs), a table of one row, operands that are
//     expressions (fused into the segment's kernels); forward, and the vjp
//     of an embedding lookup (its take_add derived).  The model in f64
//     (normalized error <= 1e-12: only the order of the sums differs) and
//     in f32 (<= 1e-5).  The kernel-IR program is checked to hold the
//     segment form (one "take_add.chunks" kernel per take_add), and with
//     the CUDA toolkit the same modules are also compiled for CUDA (every
//     printed kernel through NVRTC; the CPU code is what runs);
//   - the choice without the override: an embedding gradient (8,192
//     tokens into 50 x 720, the transformer's) is segments; a table of 3
//     rows, 8 indices, or FADC_SCATTER=gather keep the gather form;
//   - bit-identical outputs at 1, 2, 3 and 8 threads for a take_add whose
//     kernels the pool splits (4,096 tokens, skewed towards row 0);
//   - indices out of range: the run fails with FADC_ERR_INDEX (the check
//     of passes/checks.c, which the segment form leaves as it is), a valid
//     run afterwards succeeds;
//   - the transformer at bench.yaml's reduced size, its embedding gradient
//     forced to segments: forward, vjp, vhp, hvp against the interpreter
//     computing in f64 (<= 2e-7, test_codegen_zoo's measure).
#include "codegen_util.h"
#include "fadc.h"
#include "pool_util.h"

static const char values_model[] =
    "param x1: f64[5, 3] = normal(0, 1, seed=1)\n"
    "param v1: f64[1, 3] = normal(0, 1, seed=2)\n"
    "const i1: i64[1] = full(value=4, shape=[1], dtype=i64)\n"
    "param x2: f64[6, 4] = normal(0, 1, seed=3)\n"
    "param v2: f64[37, 4] = normal(0, 1, seed=4)\n"
    "const i2: i64[37] = full(value=2, shape=[37], dtype=i64)\n"
    "param x3: f64[9, 2, 3] = normal(0, 1, seed=5)\n"
    "param v3: f64[33, 2, 3] = normal(0, 1, seed=6)\n"
    "const i3: i64[33] = cast(8 * floor(2 * uniform(0, 1, seed=7)), dtype=i64)\n"
    "param x4: f64[2, 50, 7] = normal(0, 1, seed=8)\n"
    "param v4: f64[2, 3, 11, 7] = normal(0, 1, seed=9)\n"
    "const i4: i64[3, 11] = cast(floor(50 * uniform(0, 1, seed=10)), dtype=i64)\n"
    "param x5: f64[1, 12] = normal(0, 1, seed=11)\n"
    "param v5: f64[1, 70] = normal(0, 1, seed=12)\n"
    "const i5: i64[70] = cast(floor(12 * uniform(0, 1, seed=13)), dtype=i64)\n"
    "param x6: f64[3, 4, 10] = normal(0, 1, seed=14)\n"
    "param v6: f64[3, 4, 200] = normal(0, 1, seed=15)\n"
    "const i6: i64[200] = cast(floor(10 * uniform(0, 1, seed=16)), dtype=i64)\n"
    "param x7: f64[40, 33] = normal(0, 1, seed=17)\n"
    "param v7: f64[1000, 33] = normal(0, 1, seed=18)\n"
    "const i7: i64[1000] = cast(floor(40 * uniform(0, 1, seed=19) ** 3), dtype=i64)\n"
    "param x8: f64[1, 5] = normal(0, 1, seed=20)\n"
    "param v8: f64[9, 5] = normal(0, 1, seed=21)\n"
    "const i8: i64[9] = full(value=0, shape=[9], dtype=i64)\n"
    "def forward() {\n"
    "  return take_add(x1, i1, v1, axis=0), take_add(x2, i2, v2, axis=0),\n"
    "         take_add(x3, i3, v3, axis=0), take_add(x4, i4, v4, axis=1),\n"
    "         take_add(x5, i5, v5, axis=1), take_add(x6, i6, v6, axis=2),\n"
    "         take_add(x7 * 2.0 + 1.0, i7, v7 * v7, axis=0), take_add(x8, i8, v8, axis=0)\n"
    "}\n";
#define VALUES_TAKE_ADDS 8

// An embedding lookup: the vjp's gradient of emb is a take_add of the
// lookup's adjoint (an expression of h) at the tokens.
static const char emb_model[] = "param emb: f64[23, 6] = normal(0, 1, seed=1)\n"
                                "const tok: i64[5, 41] = cast(floor(23 * uniform(0, 1, seed=2)), "
                                "dtype=i64)\n"
                                "def forward() -> f64[] {\n"
                                "  h = take(emb, tok, axis=0)\n"
                                "  return sum(tanh(h) * h)\n"
                                "}\n";

// Kernels of one name (k->what).
static int
count(const KProgram *p, const char *what)
{
	int n = 0;
	for (uint32_t ki = 0; ki < p->nk; ki++)
		n += p->k[ki].what && !strcmp(p->k[ki].what, what);
	return n;
}

// Task `task` of model text (f32: its f32 twin) lowered: the number of
// segment take_adds ("take_add.chunks") and of gather ones ("take_add"
// kernels beyond the segments' own final kernels); -1 if it does not lower.
static int
segments(const char *text, const char *task, int *gathers)
{
	Module *m = cgu_parse("scatter.ir", text);
	char err[512] = "";
	KProgram *p = m ? cgu_lower_task(m, task, DT_F32, NULL, err, sizeof err) : NULL;
	CHECK(p != NULL);
	int n = -1;
	if (p) {
		n = count(p, "take_add.chunks");
		*gathers = count(p, "take_add") - n;
		kir_program_free(p);
	} else
		fprintf(stderr, "scatter.ir %s: %s\n", task, err);
	ir_module_free(m);
	return n;
}

// Every task of text against the interpreter, in f64 and in f32, the
// segment form forced; nseg: the take_adds each task's program must hold.
static void
check_values(const char *name, const char *text, const char *const *tasks, int ntasks,
             const int *nseg)
{
	setenv("FADC_SCATTER", "segment", 1);
	for (int t = 0; t < ntasks; t++) {
		int gathers = 0;
		int n = segments(text, tasks[t], &gathers);
		printf("%s %s: %d take_adds as segments, %d as gathers\n", name, tasks[t], n, gathers);
		CHECK(n == nseg[t] && gathers == 0);
	}
	for (int f32 = 0; f32 < 2; f32++) {
		char *src = f32 ? cgu_to_f32(text) : strdup(text);
		Module *m = cgu_parse(name, src);
		free(src);
		if (!m)
			continue;
		CgOptions o = {.tasks = tasks, .ntasks = ntasks, .opt_level = 1};
#ifdef FADC_HAVE_CUDA
		o.targets = CG_TARGET_CPU | CG_TARGET_CUDA; // NVRTC compiles the printed kernels
#endif
		CgCheck c = {f32 ? 1e-5 : 1e-12, 1e-6, 0, 1};
		char label[128];
		snprintf(label, sizeof label, "%s in %s, FADC_SCATTER=segment", name, f32 ? "f32" : "f64");
		cgu_check(m, &o, &c, name, label);
		ir_module_free(m);
	}
	unsetenv("FADC_SCATTER");
}

// The choice of form when nothing forces it.
static void
check_choice(void)
{
	static const char *const fmt = "param w: f32[%d, %d] = normal(0, 1, seed=1)\n"
	                               "param g: f32[%d, %d] = normal(0, 1, seed=2)\n"
	                               "const tok: i64[%d] = cast(floor(%d * uniform(0, 1, seed=3)), "
	                               "dtype=i64)\n"
	                               "def forward() {\n"
	                               "  return take_add(w, tok, g, axis=0)\n"
	                               "}\n";
	static const struct {
		int dim, inner, n;
		const char *force;
		int seg;
	} c[] = {
	    {50, 720, 8192, NULL, 1}, // the transformer's embedding gradient
	    {3, 4096, 8192, NULL, 0}, // a table of 3 rows: the gather reads v 3 times
	    {10000, 512, 8, NULL, 0}, // 8 indices: 8 terms a point
	    {50, 720, 8192, "gather", 0},
	    {50, 16, 32, NULL, 0}, // 25,600 terms: one kernel beats the segments' launches
	};
	for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
		char text[1024];
		snprintf(text, sizeof text, fmt, c[i].dim, c[i].inner, c[i].n, c[i].inner, c[i].n, c[i].dim);
		if (c[i].force)
			setenv("FADC_SCATTER", c[i].force, 1);
		int gathers = 0, n = segments(text, "forward", &gathers);
		unsetenv("FADC_SCATTER");
		printf("take_add of %d indices into %d x %d%s%s: %s\n", c[i].n, c[i].dim, c[i].inner,
		       c[i].force ? ", FADC_SCATTER=" : "", c[i].force ? c[i].force : "",
		       n == 1 ? "segments" : gathers == 1 ? "gather" : "?");
		CHECK(n == c[i].seg && gathers == !c[i].seg);
	}
}

// Large enough for the pool: the rank, block and merge kernels (4,096
// points), the chunk sums and the rows (64 x 256 points) split.  The
// tokens crowd row 0 (u^4): long rows and many short ones.
static const char big_model[] =
    "param w: f32[64, 256] = normal(0, 1, seed=1)\n"
    "param g: f32[4096, 256] = normal(0, 1, seed=2)\n"
    "const tok: i64[4096] = cast(floor(64 * uniform(0, 1, seed=3) ** 4), dtype=i64)\n"
    "def forward() {\n"
    "  return take_add(w, tok, g, axis=0)\n"
    "}\n";

static void
check_threads(void)
{
	static const char *const fwd[] = {"forward"};
	int gathers = 0;
	CHECK(segments(big_model, "forward", &gathers) == 1); // segments without forcing
	char so[256];
	if (!pu_compile("big.ir", big_model, 0, NULL, 0, fwd, 1, 2, so, sizeof so))
		return;
	printf("big.ir forward (64 x 256, 4,096 tokens):\n");
	pu_check_threads(so, "forward", 1);
	unlink(so);
}

// A token out of range fails the vjp's run with FADC_ERR_INDEX, and a
// valid run after it succeeds.
static void
check_index(void)
{
	static const char *const vjp[] = {"vjp"};
	char *f32 = cgu_to_f32(emb_model);
	char so[256];
	setenv("FADC_SCATTER", "segment", 1);
	int ok = pu_compile("emb.ir", f32, 0, NULL, 0, vjp, 1, 1, so, sizeof so);
	unsetenv("FADC_SCATTER");
	free(f32);
	if (!ok)
		return;
	fadc_context *ctx = NULL;
	fadc_model *m = NULL;
	int task = -1;
	int64_t dim[2] = {5, 41};
	fadc_tensor *tok = NULL, *v = NULL, *out[4] = {0};
	if (CHECK(fadc_context_create(NULL, &ctx) == FADC_OK) &&
	    CHECK(fadc_model_open(ctx, so, 0, &m) == FADC_OK) &&
	    CHECK(fadc_model_find_task(m, "vjp", &task) == FADC_OK) &&
	    CHECK(fadc_tensor_create(ctx, FADC_I64, 2, dim, &tok) == FADC_OK) &&
	    CHECK(fadc_tensor_create(ctx, FADC_F32, 0, NULL, &v) == FADC_OK)) {
		*(float *)fadc_tensor_data(v) = 1;
		int64_t *t = fadc_tensor_data(tok);
		static const int64_t bad[] = {23, -1, INT64_MAX};
		for (int b = 0; b < 3; b++) {
			for (int i = 0; i < 5 * 41; i++)
				t[i] = (i * 7) % 23;
			t[100] = bad[b];
			CHECK(fadc_model_bind(m, "tok", tok) == FADC_OK);
			fadc_status s = fadc_run(m, task, &v, 1, out, 2); // the loss and grad.emb
			printf("emb.ir vjp, token %lld: %s: %s\n", (long long)bad[b], fadc_status_name(s),
			       fadc_context_error(ctx));
			CHECK(s == FADC_ERR_INDEX && strstr(fadc_context_error(ctx), "out of range [0, 23)"));
			t[100] = 22;
			CHECK(fadc_model_bind(m, "tok", tok) == FADC_OK);
			CHECK(fadc_run(m, task, &v, 1, out, 2) == FADC_OK);
			for (int o = 0; o < 2; o++) {
				fadc_tensor_release(out[o]);
				out[o] = NULL;
			}
		}
	}
	fadc_tensor_release(tok);
	fadc_tensor_release(v);
	fadc_model_close(m);
	fadc_context_destroy(ctx);
	unlink(so);
}

// The transformer at bench.yaml's reduced size, its embedding gradient
// forced to segments (at that size, 32 tokens into 50 x 16, the gather is
// chosen), against the interpreter computing in f64 as test_codegen_zoo
// checks the big models (<= 2e-7: the outputs' rounding to f32).
static void
check_transformer(void)
{
	static const char *const defs[] = {"N=8", "SEQ=4", "E=16", "NH=4", "FF=16", "MAXLEN=16"};
	static const char *const tasks[] = {"forward", "vjp", "vhp", "hvp"};
	const char *root = getenv("FADC_SOURCE_DIR");
	char path[4096];
	snprintf(path, sizeof path, "%s/models/transformer.ir", root ? root : ".");
	FeOptions fo = {.diag = stderr, .defines = defs, .ndefines = 6};
	Module *m = fe_parse_file(path, &fo);
	if (!CHECK(m != NULL))
		return;
	setenv("FADC_SCATTER", "segment", 1);
	char err[512] = "";
	KProgram *p = cgu_lower_task(m, "vjp", DT_F32, NULL, err, sizeof err);
	CHECK(p != NULL && count(p, "take_add.chunks") == 1);
	kir_program_free(p);
	CgOptions o = {.tasks = tasks, .ntasks = 4, .defines = defs, .ndefines = 6, .opt_level = 1,
	               .compute_f64 = 1};
	CgCheck c = {2e-7, 1e-6, 0, 0};
	cgu_check(m, &o, &c, path, "transformer.ir (reduced, FADC_SCATTER=segment), computing in f64");
	unsetenv("FADC_SCATTER");
	ir_module_free(m);
}

int
main(void)
{
	static const char *const fwd[] = {"forward"}, *const fv[] = {"forward", "vjp"};
	static const int nval[] = {VALUES_TAKE_ADDS}, nemb[] = {0, 1};
	check_values("values.ir", values_model, fwd, 1, nval);
	check_values("emb.ir", emb_model, fv, 2, nemb);
	check_choice();
	check_threads();
	check_index();
	check_transformer();
	return TU_DONE("test_codegen_scatter");
}
