// tests/unit/test_runtime_index.c -- indices out of range are a run-time
// error of the task (issue 18): passes/checks.c, the descriptor's check
// outputs (format 7) and the runtime's FADC_ERR_INDEX on the CPU.
//
//   - the pass: which indices get a check (labels: yes; argmax over the
//     axis, iota: proven, none; a constant out of range: checked), the
//     vjp's scatter shares the forward's check, a ppl model has none;
//   - the descriptor: the check output's role, range and texts, format 7
//     only with checks, a round trip through the encoder, and the decoder's
//     refusals (a check before a user output, a range lo > end, a check that
//     is no i64[2], a check role in format 6, an unknown role);
//   - the API: the check is hidden (fadc_task_info's count is the
//     interpreter's), a bad label (above and below the range) is
//     FADC_ERR_INDEX naming op, tensor and value, a following valid run
//     succeeds, and its outputs match the float64 interpreter on the same
//     labels;
//   - the descriptor fuzzer's seeds (tests/fuzz/corpus-desc, formats 2 to 7)
//     still decode, and encode back to the same bytes.
#include <dirent.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "artifact.h"
#include "codegen.h"
#include "fadc.h"
#include "testmodel.h"
#include "testutil.h"

static const char *model_text =
	"let N = 3\n"
	"let C = 4\n"
	"param w: f32[C, C] = normal(0, 1, seed=1)\n"
	"const x: f32[N, C] = uniform(0, 1, seed=2)\n"
	"const labels: i64[N] = cast(floor(C * uniform(0, 1, seed=3)), dtype=i64)\n"
	"def forward() -> f32[] {\n"
	"  logits = x @ w\n"
	"  rows = take(w, argmax(logits, axis=1), axis=0)\n"
	"  firsts = take(w, iota(shape=[2], dtype=i64), axis=0)\n"
	"  return cross_entropy(logits, labels) + sum(rows) + sum(firsts)\n"
	"}\n";

static char dir[256];

static uint32_t
checks_of(const Module *m, const char *task, IndexCheck **c)
{
	Graph *g = tm_derive(m->main, task, NULL, 0);
	uint32_t n = pass_index_checks(g, c);
	char err[512];
	CHECK(ir_verify(g, err, sizeof err));
	// The checks' records live in g's arena: copy what the callers test.
	static IndexCheck keep[4];
	static char names[4][64];
	for (uint32_t i = 0; i < n && i < 4; i++) {
		keep[i] = (*c)[i];
		snprintf(names[i], sizeof names[i], "%s", (*c)[i].name ? (*c)[i].name : "");
		keep[i].name = names[i];
		keep[i].op = ir_op(g->node[(*c)[i].index].op) ? (*c)[i].op : NULL;
		CHECK(g->out[keep[i].out].node && g->node[g->out[keep[i].out].node].dtype == DT_I64);
	}
	*c = keep;
	ir_graph_free(g);
	return n;
}

static void
test_pass(const Module *m)
{
	IndexCheck *c;
	// labels (through nll's unsqueeze) is checked once: the vjp's
	// take_along_add reads the forward's index.  argmax and iota are proven.
	CHECK(checks_of(m, "forward", &c) == 1);
	CHECK(checks_of(m, "vjp", &c) == 1 && c[0].lo == 0 && c[0].end == 4 &&
	      !strcmp(c[0].name, "labels") && !strcmp(c[0].op, "take_along"));
	// A constant index: proven when in range, checked when not.
	Module *k = tm_parse("k.ir", "param w: f32[4] = normal(0, 1, seed=1)\n"
	                             "def forward() -> f32[] {\n"
	                             "  return sum(take(w, full(value=3, shape=[2], dtype=i64), axis=0))"
	                             " + sum(take(w, full(value=7, shape=[2], dtype=i64), axis=0))\n"
	                             "}\n");
	CHECK(checks_of(k, "vjp", &c) == 1 && c[0].end == 4 && !c[0].name[0]);
	ir_module_free(k);
	Module *p = tm_load("ppl_simple_reg.ir", NULL, 0);
	CHECK(checks_of(p, "vjp", &c) == 0);
	ir_module_free(p);
	// Inside a scan's body: the step's token is hoisted to the sequence
	// (named, no per-step work), the carry is checked per step, an iota
	// sequence is proven through the body; vjp's reverse scan and jvp's
	// tangent add nothing (shared, or merged); checks_of verifies the graph
	// with the body's new output.
	Module *s = tm_parse("s.ir", "param emb: f32[6, 5] = normal(0, 1, seed=1)\n"
	                             "const labels: i64[4] = full(value=1, shape=[4], dtype=i64)\n"
	                             "def cell(pos: i64[], tok: i64[], i: i64[], emb: f32[6, 5])"
	                             " -> (i64[], f32[5]) {\n"
	                             "  return pos + 1, take(emb, tok, axis=0) + take(emb, pos, axis=0)"
	                             " + take(emb, i, axis=0)\n"
	                             "}\n"
	                             "def forward() -> f32[] {\n"
	                             "  p, ys = scan(cell, full(value=0, shape=[], dtype=i64), labels,"
	                             " iota(shape=[4], dtype=i64), emb, ncarry=1, nxs=2)\n"
	                             "  return sum(ys)\n"
	                             "}\n");
	const char *tasks[] = {"forward", "vjp", "jvp"};
	for (int t = 0; t < 3; t++) {
		CHECK(checks_of(s, tasks[t], &c) == 2);
		CHECK(!c[0].steps && !strcmp(c[0].name, "labels") && c[0].end == 6);
		CHECK(c[1].steps && !c[1].name[0] && c[1].end == 6 && !strcmp(c[1].op, "take"));
	}
	ir_module_free(s);
}

static const char *
compile(const Module *m, const char *name)
{
	static char path[512];
	snprintf(path, sizeof path, "%s/%s", dir, name);
	const char *t[1] = {"vjp"};
	CgOptions o = {.opt_level = -1, .tasks = t, .ntasks = 1};
	char err[4096];
	if (!cg_compile_module(m, &o, path, err, sizeof err)) {
		fprintf(stderr, "compile %s: %s\n", name, err);
		exit(1);
	}
	return path;
}

// d encoded and decoded again: 1, or 0 with the decoder's message in err.
static int
round_trip(const ArtDesc *d, ArtDesc *back, char *err, size_t errlen)
{
	uint8_t *b = NULL;
	size_t n = 0;
	if (!art_desc_encode(d, &b, &n)) {
		snprintf(err, errlen, "encode refused");
		return 0;
	}
	int ok = art_desc_decode(b, n, back, err, errlen);
	free(b);
	return ok;
}

static void
test_descriptor(const char *art, const char *ppl)
{
	ArtDesc d;
	uint8_t *db = NULL;
	size_t dl = 0;
	char err[1024];
	if (!CHECK(art_read(art, &d, &db, &dl, err, sizeof err) == ART_READ_OK))
		return;
	free(db);
	CHECK(d.version == ART_FORMAT_VERSION_CHECKS);
	ArtTask *t = NULL;
	for (uint32_t i = 0; i < d.ntask; i++)
		if (!strcmp(d.task[i].name, "vjp"))
			t = &d.task[i];
	if (!CHECK(t && t->ncheck == 1 && t->nout >= 2))
		return;
	ArtTensor *x = &t->out[t->nout - 1];
	CHECK(x->role == ART_OUT_CHECK && x->dtype == ART_I64 && x->rank == 1 && x->dim[0] == 2 &&
	      x->lo == 0 && x->end == 4 && !strcmp(x->op, "take_along") &&
	      !strcmp(x->of, "'labels'") && strstr(x->at, "prelude.ir:"));
	CHECK(t->out[0].role == ART_OUT_VALUE);
	// Round trip: the same fields back.
	ArtDesc e;
	d.version = 0;
	if (CHECK(round_trip(&d, &e, err, sizeof err))) {
		const ArtTask *u = &e.task[t - d.task];
		const ArtTensor *y = &u->out[u->nout - 1];
		CHECK(e.version == 7 && u->ncheck == 1 && y->role == ART_OUT_CHECK && y->lo == 0 &&
		      y->end == 4 && !strcmp(y->op, x->op) && !strcmp(y->of, x->of) &&
		      !strcmp(y->at, x->at));
		art_desc_free(&e);
	}
	// Format 6 cannot hold a check.
	uint8_t *b = NULL;
	size_t n = 0;
	d.version = 6;
	CHECK(!art_desc_encode(&d, &b, &n));
	d.version = 0;
	// The decoder's refusals, each with its message.
	int64_t lo = x->lo;
	x->lo = 5;
	CHECK(!round_trip(&d, &e, err, sizeof err) && strstr(err, "index check") &&
	      strstr(err, "malformed"));
	x->lo = lo;
	x->dtype = ART_F32;
	CHECK(!round_trip(&d, &e, err, sizeof err) && strstr(err, "malformed"));
	x->dtype = ART_I64;
	t->out[0].role = ART_OUT_CHECK; // a check before the user's outputs
	t->out[0].op = x->op;
	t->out[0].of = x->of;
	t->out[0].at = x->at;
	CHECK(!round_trip(&d, &e, err, sizeof err) && strstr(err, "is not after its outputs"));
	t->out[0].role = 2;
	t->out[0].op = t->out[0].of = t->out[0].at = NULL;
	CHECK(!round_trip(&d, &e, err, sizeof err) && strstr(err, "unknown role 2"));
	t->out[0].role = ART_OUT_VALUE;
	// A check's role in a descriptor that says format 6.
	if (CHECK(art_desc_encode(&d, &b, &n))) {
		b[8] = 6;
		CHECK(!art_desc_decode(b, n, &e, err, sizeof err) && strstr(err, "unknown role 1"));
		free(b);
	}
	art_desc_free(&d);
	// No checks: the format stays the oldest that holds the artifact.
	if (CHECK(art_read(ppl, &d, &db, &dl, err, sizeof err) == ART_READ_OK)) {
		free(db);
		CHECK(d.version == ART_FORMAT_VERSION_ONE_SPEC);
		for (uint32_t i = 0; i < d.ntask; i++)
			CHECK(d.task[i].ncheck == 0);
		art_desc_free(&d);
	}
}

// Runs vjp with labels lab[3] bound: the status, and (when ok) compares the
// outputs with the interpreter's on the same labels.
static fadc_status
run_labels(fadc_context *ctx, const char *art, const Module *m, const int64_t *lab, char *msg,
           size_t msglen)
{
	fadc_model *fm = NULL;
	if (!CHECK(fadc_model_open(ctx, art, 0, &fm) == FADC_OK))
		return FADC_ERR_RUN;
	int64_t dim[1] = {3};
	fadc_tensor *lt = NULL;
	CHECK(fadc_tensor_create(ctx, FADC_I64, 1, dim, &lt) == FADC_OK);
	memcpy(fadc_tensor_data(lt), lab, sizeof(int64_t) * 3);
	CHECK(fadc_model_bind(fm, "labels", lt) == FADC_OK);
	int task = -1;
	CHECK(fadc_model_find_task(fm, "vjp", &task) == FADC_OK);
	fadc_task_info info;
	CHECK(fadc_task_info_get(fm, task, &info) == FADC_OK);
	Graph *g = tm_derive(m->main, "vjp", NULL, 0);
	CHECK(info.noutputs == (int)g->nout); // the check is the runtime's
	fadc_tensor *v = NULL;
	fadc_tensor *out[8] = {0};
	CHECK(info.ncaller == 1 && fadc_tensor_create(ctx, FADC_F32, 0, NULL, &v) == FADC_OK);
	*(float *)fadc_tensor_data(v) = 1;
	// One output too many (the check's place) is refused.
	CHECK(fadc_run(fm, task, &v, 1, out, info.noutputs + 1) == FADC_ERR_ARG);
	fadc_status s = fadc_run(fm, task, &v, 1, out, info.noutputs);
	snprintf(msg, msglen, "%s", fadc_context_error(ctx));
	if (s == FADC_OK) {
		// The oracle: the interpreter on the same declarations and labels.
		Tensor *vals = tm_init(m);
		int li = ir_module_find_decl(m, "labels");
		for (int i = 0; i < 3; i++)
			vals[li].data[i] = (double)lab[i];
		Tensor one = {0};
		Shape sc = {0};
		ir_tensor_alloc(&one, DT_F32, &sc);
		one.data[0] = 1;
		const char *xn[1] = {NULL};
		for (uint32_t i = 0; i < g->ninput; i++)
			if (g->input[i].kind == IN_ARG)
				xn[0] = g->input[i].name;
		Tensor *want = tm_run(m, g, "vjp", vals, xn, &one, 1, 0);
		for (uint32_t k = 0; k < g->nout; k++) {
			const float *got = fadc_tensor_data(out[k]);
			for (int64_t j = 0; j < ir_numel(&want[k].shape); j++)
				CHECK_CLOSE(got[j], want[k].data[j], 1e-5, "vjp output against the interpreter");
			ir_tensor_free(&want[k]);
		}
		free(want);
		ir_tensor_free(&one);
		tm_free_tensors(vals, m->ndecl);
	}
	ir_graph_free(g);
	fadc_tensor_release(v);
	fadc_tensor_release(lt);
	fadc_model_close(fm);
	return s;
}

static void
test_api(const char *art, const Module *m)
{
	fadc_context *ctx = NULL;
	if (!CHECK(fadc_context_create(NULL, &ctx) == FADC_OK))
		return;
	char msg[1024];
	CHECK(!strcmp(fadc_status_name(FADC_ERR_INDEX), "FADC_ERR_INDEX"));
	CHECK(!strcmp(fadc_status_name(FADC_ERR_OUTPUT_OVERWRITTEN), "FADC_ERR_OUTPUT_OVERWRITTEN"));
	int64_t good[3] = {3, 0, 1}, high[3] = {0, 9, 1}, low[3] = {2, 1, -3};
	CHECK(run_labels(ctx, art, m, good, msg, sizeof msg) == FADC_OK);
	CHECK(run_labels(ctx, art, m, high, msg, sizeof msg) == FADC_ERR_INDEX &&
	      strstr(msg, "vjp: take_along: index 9 of 'labels' is out of range [0, 4) (") &&
	      strstr(msg, "prelude.ir:"));
	CHECK(run_labels(ctx, art, m, low, msg, sizeof msg) == FADC_ERR_INDEX &&
	      strstr(msg, "index -3 of 'labels' is out of range [0, 4)"));

	// One model: a bad run, then a valid one on the same task succeeds.
	fadc_model *fm = NULL;
	int task = -1;
	int64_t dim[1] = {3};
	fadc_tensor *lt = NULL, *v = NULL, *out[4] = {0};
	if (CHECK(fadc_model_open(ctx, art, 0, &fm) == FADC_OK)) {
		CHECK(fadc_model_find_task(fm, "vjp", &task) == FADC_OK);
		CHECK(fadc_tensor_create(ctx, FADC_I64, 1, dim, &lt) == FADC_OK);
		CHECK(fadc_tensor_create(ctx, FADC_F32, 0, NULL, &v) == FADC_OK);
		*(float *)fadc_tensor_data(v) = 1;
		memcpy(fadc_tensor_data(lt), high, sizeof high);
		CHECK(fadc_model_bind(fm, "labels", lt) == FADC_OK);
		CHECK(fadc_run(fm, task, &v, 1, out, 2) == FADC_ERR_INDEX);
		memcpy(fadc_tensor_data(lt), good, sizeof good);
		CHECK(fadc_model_bind(fm, "labels", lt) == FADC_OK);
		CHECK(fadc_run(fm, task, &v, 1, out, 2) == FADC_OK && !fadc_context_error(ctx)[0]);
		CHECK(fadc_context_synchronize(ctx) == FADC_OK);
		fadc_tensor_release(lt);
		fadc_tensor_release(v);
		fadc_model_close(fm);
	}
	fadc_context_destroy(ctx);
}

static void
test_seeds(void)
{
	const char *root = getenv("FADC_SOURCE_DIR");
	char path[4096];
	snprintf(path, sizeof path, "%s/tests/fuzz/corpus-desc", root ? root : ".");
	DIR *dd = opendir(path);
	if (!CHECK(dd != NULL))
		return;
	int n = 0, checks = 0;
	for (struct dirent *e; (e = readdir(dd));) {
		if (e->d_name[0] == '.')
			continue;
		char f[8192];
		snprintf(f, sizeof f, "%s/%s", path, e->d_name);
		FILE *fp = fopen(f, "rb");
		if (!CHECK(fp != NULL))
			continue;
		static uint8_t b[1 << 20];
		size_t len = fread(b, 1, sizeof b, fp);
		fclose(fp);
		ArtDesc d;
		char err[512];
		uint8_t *enc = NULL;
		size_t elen = 0;
		int ok = art_desc_decode(b, len, &d, err, sizeof err);
		if (!ok)
			fprintf(stderr, "%s: %s\n", e->d_name, err);
		if (CHECK(ok)) {
			for (uint32_t i = 0; i < d.ntask; i++)
				checks += (int)d.task[i].ncheck;
			CHECK(art_desc_encode(&d, &enc, &elen) && elen == len && !memcmp(enc, b, len));
			free(enc);
			art_desc_free(&d);
		}
		n++;
	}
	closedir(dd);
	CHECK(n >= 12 && checks >= 2); // two seeds with index checks
}

int
main(void)
{
	snprintf(dir, sizeof dir, "/tmp/fadc-index-XXXXXX");
	if (!mkdtemp(dir))
		return 1;
	const char *defs[] = {"N=3", "K=2"};
	Module *m = tm_parse("index.ir", model_text);
	test_pass(m);
	char art[512], ppl[512];
	snprintf(art, sizeof art, "%s", compile(m, "index.so"));
	Module *p = tm_load("ppl_simple_reg.ir", defs, 2);
	snprintf(ppl, sizeof ppl, "%s", compile(p, "ppl.so"));
	test_descriptor(art, ppl);
	test_api(art, m);
	test_seeds();
	unlink(art);
	unlink(ppl);
	rmdir(dir);
	ir_module_free(p);
	ir_module_free(m);
	return TU_DONE("test_runtime_index");
}
