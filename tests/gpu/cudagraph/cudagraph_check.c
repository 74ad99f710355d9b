// tests/gpu/cudagraph/cudagraph_check.c -- the CUDA-graph suite: PyTorch's
// test_cudagraphs.py (seeds/001_*) as .ir programs, and the graph-tree
// promises of ARCHITECTURE.md ("CUDA graphs and graph trees") in the
// spirit of test_cudagraph_trees.py (seeds/004_*).
//
//   cudagraph_check DIR [TEST...]
//
// DIR holds the artifacts of this folder's .ir programs compiled with
// --target cpu,cuda (cudagraph.sh compiles them).  Every test opens its
// artifact three times: on a GPU context with CUDA graphs (G), on a GPU
// context created with FADC_DISABLE_CUDA_GRAPHS=1 (E, eager execution) and
// on the CPU (C, the same artifact's CPU code).  Each call runs on all
// three with the same inputs, fresh every iteration (never zeros); caller
// outputs are poisoned with NaN before the call; every output of every
// call is read back and G must equal E within 1e-6 and C within 1e-5
// (normalized max error; NaN never passes), plus the hand-computed values
// the seed asserts where it asserts some.  The seed tests run N_ITERS = 5
// iterations and check G's counters exactly (each task: 1 eager warm-up,
// 1 recording, 3 replays) and E's (1 eager, 4 skipped).  Every test ends
// with the device pools of G and E holding no block once the models are
// closed and the tensors released.
//
// Exit status: 0 all passed, 1 a failure, 77 no CUDA device (skipped) unless
// FADC_REQUIRE_GPU=1.
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fadc.h"

enum { N_ITERS = 5, MAXT = 4, MAXIO = 4 };
enum { G, E, C, NCTX }; // graphs, eager, CPU
static const char *const ctx_name[NCTX] = {"graphs", "eager", "cpu"};

static int nfail, ncheck;
static const char *dir;
static const char *cur_test = "?";

#define CHECK(cond, ...)                                                                   \
	do {                                                                                   \
		ncheck++;                                                                          \
		if (!(cond)) {                                                                     \
			nfail++;                                                                       \
			fprintf(stderr, "FAIL %s (%s:%d): ", cur_test, __FILE__, __LINE__);            \
			fprintf(stderr, __VA_ARGS__);                                                  \
			fputc('\n', stderr);                                                           \
		}                                                                                  \
	} while (0)

// U[-1, 1) from (seed, i), never 0: splitmix64.
static float
draw(uint64_t seed, uint64_t i)
{
	uint64_t z = seed * 0x9e3779b97f4a7c15ull + i + 1;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	z ^= z >> 31;
	float v = (float)((double)(z >> 11) / 9007199254740992.0 * 2 - 1);
	return v == 0 ? 0.5f : v;
}

static double
nerr(const float *got, const float *want, int64_t n)
{
	double num = 0, den = 1e-30;
	for (int64_t i = 0; i < n; i++) {
		if (isnan(got[i]) || isnan(want[i]) || isinf(got[i]) || isinf(want[i]))
			return NAN;
		num = fmax(num, fabs((double)got[i] - want[i]));
		den = fmax(den, fabs((double)want[i]));
	}
	return num / den;
}

// ---------------------------------------------------------------- a test's contexts

typedef struct Test {
	fadc_context *ctx[NCTX];
	fadc_model *m[NCTX];
	// Per task index and input/output: the caller's tensors on each context
	// (made at first use, kept), and the last call's values read back.
	fadc_tensor *in[NCTX][MAXT][MAXIO], *out[NCTX][MAXT][MAXIO];
	fadc_tensor *got[NCTX][MAXIO]; // the last call's output handles
	float *val[NCTX][MAXIO];
	int64_t n[MAXIO];
	int nout;
} Test;

static fadc_context *
gpu_context(int graphs)
{
	if (graphs)
		unsetenv("FADC_DISABLE_CUDA_GRAPHS");
	else
		setenv("FADC_DISABLE_CUDA_GRAPHS", "1", 1);
	fadc_context_options o = {.device = {FADC_DEVICE_CUDA, 0}, .num_threads = 0, .seed = 0};
	fadc_context *c = NULL;
	fadc_status s = fadc_context_create(&o, &c);
	unsetenv("FADC_DISABLE_CUDA_GRAPHS");
	CHECK(!s, "GPU context: %s: %s", fadc_status_name(s), fadc_context_error(NULL));
	return s ? NULL : c;
}

static int
test_open(Test *t, const char *artifact)
{
	memset(t, 0, sizeof *t);
	char path[4096];
	snprintf(path, sizeof path, "%s/%s.so", dir, artifact);
	t->ctx[G] = gpu_context(1);
	t->ctx[E] = gpu_context(0);
	fadc_context_create(NULL, &t->ctx[C]);
	for (int i = 0; i < NCTX; i++) {
		if (!t->ctx[i])
			return 0;
		fadc_status s = fadc_model_open(t->ctx[i], path, 0, &t->m[i]);
		CHECK(!s, "open %s on %s: %s", path, ctx_name[i], fadc_context_error(t->ctx[i]));
		if (s)
			return 0;
	}
	return 1;
}

// Closes everything; the device pools must then hold no block.
static void
test_close(Test *t)
{
	for (int i = 0; i < NCTX; i++) {
		for (int k = 0; k < MAXT; k++)
			for (int j = 0; j < MAXIO; j++) {
				fadc_tensor_release(t->in[i][k][j]);
				fadc_tensor_release(t->out[i][k][j]);
			}
		for (int j = 0; j < MAXIO; j++)
			free(t->val[i][j]);
		fadc_model_close(t->m[i]);
		if (i != C && t->ctx[i]) {
			fadc_device_stats st;
			fadc_context_stats(t->ctx[i], &st);
			CHECK(st.pool_live_blocks == 0 && st.pool_live_bytes == 0,
			      "after teardown the %s pool holds %llu blocks (%llu bytes)", ctx_name[i],
			      (unsigned long long)st.pool_live_blocks, (unsigned long long)st.pool_live_bytes);
			char tree[64];
			fadc_context_graph_tree(t->ctx[i], tree, sizeof tree, NULL);
			CHECK(!tree[0], "after teardown the %s graph tree is not empty: %s", ctx_name[i],
			      tree);
		}
		fadc_context_destroy(t->ctx[i]);
	}
	memset(t, 0, sizeof *t);
}

static int
task_index(Test *t, const char *task)
{
	int k = -1;
	if (fadc_model_find_task(t->m[C], task, &k) || k >= MAXT) {
		CHECK(0, "no task '%s' (or too many tasks)", task);
		return -1;
	}
	return k;
}

// Writes n floats into a tensor; a check.
static void
put(fadc_tensor *x, const float *v)
{
	fadc_status s = fadc_tensor_write(x, v, fadc_tensor_bytes(x));
	CHECK(!s, "write: %s", fadc_status_name(s));
}

// Mode of a call's outputs.
enum { OUT_CALLER, OUT_MODEL };

// Calls task on every context with the caller's inputs in[j] (host values
// written into the test's tensors first; NULL: the tensors keep their
// values, or ext[ctx][j] when ext is given: a tensor of that context used
// as is), outputs into the test's poisoned tensors or model-owned, then
// reads every output back into t->val and checks G against E and C.
// Returns 1 when every call ran.
static int call3_at(Test *t, int k, const float *const *in, fadc_tensor *ext[NCTX][MAXIO],
                    int mode);

static int
call3(Test *t, const char *task, const float *const *in, fadc_tensor *ext[NCTX][MAXIO], int mode)
{
	int k = task_index(t, task);
	return k < 0 ? 0 : call3_at(t, k, in, ext, mode);
}

// call3 of task index k (with specialisations, the same name is several
// tasks: fadc_model_find_task_for picks k).
static int
call3_at(Test *t, int k, const float *const *in, fadc_tensor *ext[NCTX][MAXIO], int mode)
{
	if (k < 0 || k >= MAXT) {
		CHECK(0, "task index %d out of this driver's range", k);
		return 0;
	}
	fadc_task_info ti;
	fadc_task_info_get(t->m[C], k, &ti);
	const char *task = ti.name;
	if (ti.ncaller > MAXIO || ti.noutputs > MAXIO) {
		CHECK(0, "task '%s': too many inputs or outputs for this driver", task);
		return 0;
	}
	t->nout = ti.noutputs;
	int ok = 1;
	for (int c = 0; c < NCTX; c++) {
		fadc_tensor *args[MAXIO];
		for (int i = 0, j = 0; i < ti.ninputs; i++) {
			fadc_tensor_desc d;
			fadc_task_input(t->m[C], k, i, &d);
			if (d.role != FADC_ROLE_INPUT)
				continue;
			if (ext && ext[c][j]) {
				args[j] = ext[c][j];
				j++;
				continue;
			}
			if (!t->in[c][k][j])
				fadc_tensor_create(t->ctx[c], d.dtype, d.rank, d.dim, &t->in[c][k][j]);
			if (in && in[j])
				put(t->in[c][k][j], in[j]);
			args[j] = t->in[c][k][j];
			j++;
		}
		for (int o = 0; o < ti.noutputs; o++) {
			fadc_tensor_desc d;
			fadc_task_output(t->m[C], k, o, &d);
			CHECK(d.dtype == FADC_F32, "task '%s': output %d is not f32", task, o);
			t->n[o] = 1;
			for (int r = 0; r < d.rank; r++)
				t->n[o] *= d.dim[r];
			free(t->val[c][o]);
			t->val[c][o] = malloc((size_t)t->n[o] * sizeof(float) + 1);
			t->got[c][o] = NULL;
			if (mode == OUT_CALLER) {
				if (!t->out[c][k][o])
					fadc_tensor_create(t->ctx[c], d.dtype, d.rank, d.dim, &t->out[c][k][o]);
				for (int64_t e = 0; e < t->n[o]; e++)
					t->val[c][o][e] = NAN;
				put(t->out[c][k][o], t->val[c][o]);
				t->got[c][o] = t->out[c][k][o];
			}
		}
		fadc_status s = fadc_run(t->m[c], k, args, ti.ncaller, t->got[c], ti.noutputs);
		CHECK(!s, "%s on %s: %s: %s", task, ctx_name[c], fadc_status_name(s),
		      fadc_context_error(t->ctx[c]));
		if (s) {
			ok = 0;
			continue;
		}
		for (int o = 0; o < ti.noutputs; o++) {
			for (int64_t e = 0; e < t->n[o]; e++)
				t->val[c][o][e] = NAN;
			s = fadc_tensor_read(t->got[c][o], t->val[c][o], (size_t)t->n[o] * sizeof(float));
			CHECK(!s, "%s on %s: read output %d: %s", task, ctx_name[c], o,
			      fadc_context_error(t->ctx[c]));
		}
	}
	if (!ok)
		return 0;
	for (int o = 0; o < ti.noutputs; o++) {
		double ee = nerr(t->val[G][o], t->val[E][o], t->n[o]);
		double ec = nerr(t->val[G][o], t->val[C][o], t->n[o]);
		CHECK(ee <= 1e-6, "%s output %d: graphs vs eager: normalized error %.3g", task, o, ee);
		CHECK(ec <= 1e-5, "%s output %d: graphs vs cpu: normalized error %.3g", task, o, ec);
	}
	return 1;
}

static void
stats(Test *t, int c, fadc_device_stats *s)
{
	fadc_context_stats(t->ctx[c], s);
}

// G's and E's counters must be exactly these.
static void
counters(Test *t, uint64_t eager, uint64_t rec, uint64_t rerec, uint64_t rep, uint64_t skip,
         const char *when)
{
	fadc_device_stats s;
	stats(t, G, &s);
	CHECK(s.eager_runs == eager && s.graphs_recorded == rec && s.graphs_rerecorded == rerec &&
	          s.graphs_replayed == rep && s.graphs_skipped == skip,
	      "%s: graph counters eager %llu recorded %llu re-recorded %llu replayed %llu skipped "
	      "%llu; want %llu %llu %llu %llu %llu",
	      when, (unsigned long long)s.eager_runs, (unsigned long long)s.graphs_recorded,
	      (unsigned long long)s.graphs_rerecorded, (unsigned long long)s.graphs_replayed,
	      (unsigned long long)s.graphs_skipped, (unsigned long long)eager,
	      (unsigned long long)rec, (unsigned long long)rerec, (unsigned long long)rep,
	      (unsigned long long)skip);
	uint64_t calls = eager + rec + rerec + rep + skip;
	stats(t, E, &s);
	CHECK(s.eager_runs == eager && s.graphs_skipped == calls - eager &&
	          s.graphs_recorded + s.graphs_rerecorded + s.graphs_replayed == 0,
	      "%s: eager context's counters eager %llu skipped %llu recorded %llu",
	      when, (unsigned long long)s.eager_runs, (unsigned long long)s.graphs_skipped,
	      (unsigned long long)s.graphs_recorded);
}

static void
tree_is(Test *t, const char *want, const char *when)
{
	char got[1024];
	fadc_context_graph_tree(t->ctx[G], got, sizeof got, NULL);
	CHECK(!strcmp(got, want), "%s: graph tree\n%s--- want\n%s---", when, got, want);
	fadc_context_graph_tree(t->ctx[E], got, sizeof got, NULL);
	CHECK(!got[0], "%s: the eager context recorded a tree:\n%s", when, got);
}

// n fresh values for iteration it, input j.
static float *
fresh(float *buf, int n, int it, int j)
{
	for (int i = 0; i < n; i++)
		buf[i] = draw(1000u * (uint64_t)it + (uint64_t)j, (uint64_t)i);
	return buf;
}

// The model's declaration `name` read on context c.
static void
decl_read(Test *t, int c, const char *name, float *v, size_t bytes)
{
	fadc_tensor *x = NULL;
	fadc_status s = fadc_model_get(t->m[c], name, &x);
	if (!s)
		s = fadc_tensor_read(x, v, bytes);
	CHECK(!s, "read declaration %s on %s: %s", name, ctx_name[c], fadc_context_error(t->ctx[c]));
}

// ---------------------------------------------------------------- the seed's tests

// basic: forward then vjp (loss.backward()) for N_ITERS iterations.
static void
t_basic(void)
{
	Test t;
	if (!test_open(&t, "basic"))
		return test_close(&t);
	for (int it = 0; it < N_ITERS; it++) {
		float y[3], v[1];
		const float *in[] = {fresh(y, 3, it, 0)};
		call3(&t, "forward", in, NULL, OUT_CALLER);
		const float *in2[] = {y, fresh(v, 1, it, 1)};
		call3(&t, "vjp", in2, NULL, OUT_CALLER);
		// grad.x = v * y (d/dx of sum((x + y) * y)).
		float want[3] = {v[0] * y[0], v[0] * y[1], v[0] * y[2]};
		CHECK(nerr(t.val[G][1], want, 3) <= 1e-6, "iteration %d: grad.x is not v * y", it);
	}
	counters(&t, 2, 2, 0, 6, 0, "basic");
	tree_is(&t, "forward: 3 replays\n  vjp: 3 replays\n", "basic");
	test_close(&t);
}

// dtoh: the value read back to the host after each call is that call's.
static void
t_dtoh(void)
{
	Test t;
	if (!test_open(&t, "dtoh"))
		return test_close(&t);
	float x[3];
	fadc_model_init(t.m[C], 0); // the first run would; the seed is the context's (0)
	decl_read(&t, C, "x", x, sizeof x);
	for (int it = 0; it < N_ITERS; it++) {
		float y[3], v[1];
		const float *in[] = {fresh(y, 3, it, 0)};
		call3(&t, "forward", in, NULL, OUT_CALLER);
		float want = 3 * ((x[0] + y[0]) + (x[1] + y[1]) + (x[2] + y[2]));
		CHECK(fabsf(t.val[G][0][0] - want) <= 1e-5f * fmaxf(1, fabsf(want)),
		      "iteration %d: forward %g, want %g", it, t.val[G][0][0], want);
		const float *in2[] = {y, fresh(v, 1, it, 1)};
		call3(&t, "vjp", in2, NULL, OUT_CALLER);
		float g3[3] = {3 * v[0], 3 * v[0], 3 * v[0]};
		CHECK(nerr(t.val[G][1], g3, 3) <= 1e-6, "iteration %d: grad.x is not 3 v", it);
	}
	counters(&t, 2, 2, 0, 6, 0, "dtoh");
	test_close(&t);
}

// htod: a host scalar written into the device before each call.
static void
t_htod(void)
{
	Test t;
	if (!test_open(&t, "htod"))
		return test_close(&t);
	float x[3];
	fadc_model_init(t.m[C], 0); // the first run would; the seed is the context's (0)
	decl_read(&t, C, "x", x, sizeof x);
	for (int it = 0; it < N_ITERS; it++) {
		float y[1];
		const float *in[] = {fresh(y, 1, it, 0)};
		call3(&t, "forward", in, NULL, it % 2 ? OUT_CALLER : OUT_MODEL);
		float want = 3 * (x[0] + y[0]) + 3 * (x[1] + y[0]) + 3 * (x[2] + y[0]);
		CHECK(fabsf(t.val[G][0][0] - want) <= 1e-5f * fmaxf(1, fabsf(want)),
		      "iteration %d: forward %g, want %g (y %g)", it, t.val[G][0][0], want, y[0]);
	}
	// Model-owned outputs on iterations 0, 2, 4, caller's on 1, 3: two
	// states of the one task: a recording (1) and a re-record (2).
	counters(&t, 1, 1, 1, 2, 0, "htod");
	tree_is(&t, "forward: 1 replays\nforward: 1 replays\n", "htod");
	test_close(&t);
}

// mutate_input: y.add_(3) on the caller's y, visible after every call.
static void
t_mutate_input(void)
{
	Test t;
	if (!test_open(&t, "mutate_input"))
		return test_close(&t);
	float x[3], y0[3];
	fadc_model_init(t.m[C], 0); // the first run would; the seed is the context's (0)
	decl_read(&t, C, "x", x, sizeof x);
	fresh(y0, 3, 0, 0);
	for (int it = 0; it < N_ITERS; it++) {
		float before[NCTX][3], after[NCTX][3];
		for (int c = 0; c < NCTX && it; c++)
			fadc_tensor_read(t.in[c][0][0], before[c], sizeof before[c]);
		if (!it)
			for (int c = 0; c < NCTX; c++)
				memcpy(before[c], y0, sizeof y0);
		const float *in[] = {it ? NULL : y0}; // y keeps its mutated value
		if (!call3(&t, "forward", in, NULL, OUT_CALLER))
			break;
		for (int c = 0; c < NCTX; c++) {
			fadc_tensor_read(t.in[c][0][0], after[c], sizeof after[c]);
			for (int i = 0; i < 3; i++)
				CHECK(after[c][i] == before[c][i] + 3,
				      "iteration %d on %s: y[%d] = %g after the call, %g before (want +3)", it,
				      ctx_name[c], i, after[c][i], before[c][i]);
		}
		float want = x[0] * after[C][0] + x[1] * after[C][1] + x[2] * after[C][2];
		CHECK(fabsf(t.val[G][0][0] - want) <= 1e-5f * fmaxf(1, fabsf(want)),
		      "iteration %d: loss %g, want %g", it, t.val[G][0][0], want);
		CHECK(!memcmp(t.val[G][1], after[G], sizeof after[G]),
		      "iteration %d: the write-back output y differs from y", it);
	}
	counters(&t, 1, 1, 0, 3, 0, "mutate_input");
	test_close(&t);
}

// mutate_constant: a local constant mutated inside (the loss stays 3), and
// a const declaration mutated in place (k grows by 2 per call).
static void
t_mutate_constant(void)
{
	Test t;
	if (!test_open(&t, "mutate_constant"))
		return test_close(&t);
	for (int it = 0; it < N_ITERS; it++) {
		float y[1];
		const float *in[] = {fresh(y, 1, it, 0)};
		if (!call3(&t, "forward", in, NULL, OUT_CALLER))
			break;
		CHECK(t.val[G][0][0] == 3.0f, "iteration %d: loss %g, want 3", it, t.val[G][0][0]);
		for (int c = 0; c < NCTX; c++) {
			float k;
			decl_read(&t, c, "k", &k, sizeof k);
			CHECK(k == 1 + 2 * (it + 1), "iteration %d on %s: k = %g, want %d", it,
			      ctx_name[c], k, 1 + 2 * (it + 1));
		}
	}
	counters(&t, 1, 1, 0, 3, 0, "mutate_constant");
	test_close(&t);
}

// factory: zeros(3) + 3 made inside; the parameter y rebound before every
// iteration (read in place by the graphs: each replay sees the new value).
static void
t_factory(void)
{
	Test t;
	if (!test_open(&t, "factory"))
		return test_close(&t);
	int64_t d3 = 3;
	for (int it = 0; it < N_ITERS; it++) {
		float y[3], v[1];
		fresh(y, 3, it, 0);
		fadc_tensor *h = NULL;
		fadc_tensor_wrap(t.ctx[C], FADC_F32, 1, &d3, y, &h);
		for (int c = 0; c < NCTX; c++) {
			fadc_status s = fadc_model_bind(t.m[c], "y", h);
			CHECK(!s, "bind y on %s: %s", ctx_name[c], fadc_context_error(t.ctx[c]));
		}
		fadc_tensor_release(h);
		call3(&t, "forward", NULL, NULL, OUT_CALLER);
		float want = 3 * y[0] + 3 * y[1] + 3 * y[2];
		CHECK(fabsf(t.val[G][0][0] - want) <= 1e-5f * fmaxf(1, fabsf(want)),
		      "iteration %d: forward %g, want %g", it, t.val[G][0][0], want);
		const float *in2[] = {fresh(v, 1, it, 1)};
		call3(&t, "vjp", in2, NULL, OUT_CALLER);
		float g3[3] = {3 * v[0], 3 * v[0], 3 * v[0]};
		CHECK(nerr(t.val[G][1], g3, 3) <= 1e-6, "iteration %d: grad.y is not 3 v", it);
	}
	counters(&t, 2, 2, 0, 6, 0, "factory");
	test_close(&t);
}

// mutated_metadata: a zero-size input resized to 20 and filled with 2.
static void
t_mutated_metadata(void)
{
	Test t;
	if (!test_open(&t, "mutated_metadata"))
		return test_close(&t);
	for (int it = 0; it < N_ITERS; it++) {
		if (!call3(&t, "forward", NULL, NULL, it == 2 ? OUT_MODEL : OUT_CALLER))
			break;
		CHECK(t.n[0] == 20, "the output has %lld elements", (long long)t.n[0]);
		for (int i = 0; i < 20; i++)
			CHECK(t.val[G][0][i] == 2.0f, "iteration %d: x[%d] = %g, want 2", it, i,
			      t.val[G][0][i]);
	}
	// Iteration 2 into a model-owned output: a re-record, replayed never.
	counters(&t, 1, 1, 1, 2, 0, "mutated_metadata");
	test_close(&t);
}

// dead_fill: x all 2, the empty view's fill writes nothing.
static void
t_dead_fill(void)
{
	char path[4096];
	snprintf(path, sizeof path, "%s/dead_fill.so", dir);
	if (access(path, R_OK)) {
		printf("dead_fill: no artifact (cudagraph.sh says why): not run\n");
		return;
	}
	Test t;
	if (!test_open(&t, "dead_fill"))
		return test_close(&t);
	for (int it = 0; it < N_ITERS; it++) {
		float x[4];
		const float *in[] = {fresh(x, 4, it, 0)};
		if (!call3(&t, "forward", in, NULL, OUT_CALLER))
			break;
		CHECK(t.n[1] == 0, "y has %lld elements", (long long)t.n[1]);
		for (int i = 0; i < 4; i++)
			CHECK(t.val[G][0][i] == 2.0f, "iteration %d: x[%d] = %g, want 2", it, i,
			      t.val[G][0][i]);
	}
	counters(&t, 1, 1, 0, 3, 0, "dead_fill");
	test_close(&t);
}

// ---------------------------------------------------------------- graph trees

// Warm-up, record, replay, counted after every call.  The caller's input
// stays in one tensor A for calls 0-2 (read in place), then moves to new
// tensors B, C, D, E (each kept alive: other addresses): B re-records in
// place, C (the input has moved twice) records a graph that copies it into
// the task's staging buffer, D and E replay that one with their values;
// back at A, the first recording replays.
static void
t_lifecycle(void)
{
	Test t;
	if (!test_open(&t, "basic"))
		return test_close(&t);
	static const uint64_t rr[] = {0, 0, 0, 1, 2, 2, 2, 2}, rep[] = {0, 0, 1, 1, 1, 2, 3, 4};
	int fwd = task_index(&t, "forward");
	fadc_tensor *keep[NCTX][8] = {{0}}, *a[NCTX] = {0};
	for (int it = 0; it < 8 && fwd >= 0; it++) {
		float y[3];
		for (int c = 0; c < NCTX && it >= 3 && it < 7; c++) { // a new tensor each call
			if (it == 3)
				a[c] = t.in[c][fwd][0];
			else
				keep[c][it] = t.in[c][fwd][0];
			t.in[c][fwd][0] = NULL;
		}
		for (int c = 0; c < NCTX && it == 7; c++) { // back to A
			keep[c][it] = t.in[c][fwd][0];
			t.in[c][fwd][0] = a[c];
		}
		const float *in[] = {fresh(y, 3, it, 0)};
		call3(&t, "forward", in, NULL, OUT_CALLER);
		char when[64];
		snprintf(when, sizeof when, "lifecycle, after call %d", it);
		counters(&t, 1, it ? 1 : 0, rr[it], rep[it], 0, when);
	}
	tree_is(&t, "forward: 2 replays\nforward: 0 replays\nforward: 2 replays\n", "lifecycle");
	for (int c = 0; c < NCTX; c++)
		for (int i = 0; i < 8; i++)
			fadc_tensor_release(keep[c][i]);
	test_close(&t);
}

// forward then vjp with v = forward's model-owned output: an output of an
// earlier call used in place by the next one, in one tree.
static void
t_fwd_vjp(void)
{
	Test t;
	if (!test_open(&t, "basic"))
		return test_close(&t);
	int fwd = task_index(&t, "forward");
	for (int it = 0; it < N_ITERS && fwd >= 0; it++) {
		float y[3];
		const float *in[] = {fresh(y, 3, it, 0)};
		if (!call3(&t, "forward", in, NULL, OUT_MODEL))
			break;
		float loss = t.val[C][0][0];
		fadc_tensor *ext[NCTX][MAXIO] = {{0}};
		for (int c = 0; c < NCTX; c++) {
			ext[c][0] = t.in[c][fwd][0]; // the same y tensor as forward's
			ext[c][1] = t.got[c][0]; // forward's model-owned output as v
		}
		if (!call3(&t, "vjp", NULL, ext, OUT_MODEL))
			break;
		float want[3] = {loss * y[0], loss * y[1], loss * y[2]};
		CHECK(nerr(t.val[G][1], want, 3) <= 1e-5, "iteration %d: grad.x is not loss * y", it);
	}
	counters(&t, 2, 2, 0, 6, 0, "forward then vjp");
	tree_is(&t, "forward: 3 replays\n  vjp: 3 replays\n", "forward then vjp");
	test_close(&t);
}

// Two tasks alternating in both orders: (forward, vjp), (vjp, forward), ...
// Each pair is a generation (a task called again starts the next), so the
// tree gets two paths from the root.
static void
t_alternate(void)
{
	Test t;
	if (!test_open(&t, "basic"))
		return test_close(&t);
	for (int it = 0; it < 6; it++) {
		float y[3], v[1];
		fresh(y, 3, it, 0);
		fresh(v, 1, it, 1);
		const float *inf[] = {y}, *inv[] = {y, v};
		for (int s = 0; s < 2; s++) {
			int fwd = (s == 0) == (it % 2 == 0);
			call3(&t, fwd ? "forward" : "vjp", fwd ? inf : inv, NULL, OUT_MODEL);
		}
	}
	// 1: both eager; 2: vjp, forward recorded; 3: forward, vjp recorded;
	// 4-6: replays.
	counters(&t, 2, 4, 0, 6, 0, "alternating tasks");
	tree_is(&t, "vjp: 2 replays\n  forward: 2 replays\nforward: 1 replays\n  vjp: 1 replays\n",
	        "alternating tasks");
	test_close(&t);
}

// An output read after a later call reused its memory: the error, naming
// the task; a state with forward's output alive and one with it released
// are two branches under forward.
static void
t_overwritten(void)
{
	Test t;
	if (!test_open(&t, "basic"))
		return test_close(&t);
	int vjp = task_index(&t, "vjp");
	for (int it = 0; it < N_ITERS && vjp >= 0; it++) {
		float y[3], v[1], keep[NCTX];
		fresh(y, 3, it, 0);
		fresh(v, 1, it, 1);
		const float *inf[] = {y}, *inv[] = {y, v};
		if (!call3(&t, "forward", inf, NULL, OUT_MODEL))
			break;
		fadc_tensor *hf[NCTX];
		for (int c = 0; c < NCTX; c++) {
			hf[c] = t.got[c][0];
			keep[c] = t.val[c][0][0];
		}
		int released = it == 2 || it == 4;
		for (int c = 0; c < NCTX && released; c++)
			fadc_tensor_release(hf[c]); // its memory may be reused
		if (!call3(&t, "vjp", inv, NULL, OUT_MODEL))
			break;
		for (int c = 0; c < NCTX; c++) {
			float got = NAN;
			fadc_status s = fadc_tensor_read(hf[c], &got, sizeof got);
			if (!released || c == C) {
				// Alive (or the CPU, where nothing is overwritten): readable, the
				// value forward computed.
				CHECK(!s && got == keep[c], "iteration %d on %s: forward's output: %s, %g (want %g)",
				      it, ctx_name[c], fadc_status_name(s), got, keep[c]);
				continue;
			}
			const char *msg = fadc_context_error(t.ctx[c]);
			CHECK(s == FADC_ERR_OUTPUT_OVERWRITTEN && isnan(got) &&
			          strstr(msg, "output 'out' of task 'forward'") &&
			          strstr(msg, "by a later call of task 'vjp'"),
			      "iteration %d on %s: reading a released, reused output gave %s: %s", it,
			      ctx_name[c], fadc_status_name(s), msg);
			// Passing it to a call, or writing it: the same error.
			fadc_tensor *args[] = {t.in[c][vjp][0], hf[c]};
			fadc_tensor *outs[2] = {NULL, NULL};
			s = fadc_run(t.m[c], vjp, args, 2, outs, 2);
			CHECK(s == FADC_ERR_OUTPUT_OVERWRITTEN &&
			          strstr(fadc_context_error(t.ctx[c]), "task 'vjp'"),
			      "iteration %d on %s: an overwritten output as an input gave %s: %s", it,
			      ctx_name[c], fadc_status_name(s), fadc_context_error(t.ctx[c]));
			s = fadc_tensor_write(hf[c], &got, sizeof got);
			CHECK(s == FADC_ERR_OUTPUT_OVERWRITTEN, "iteration %d on %s: writing it gave %s",
			      it, ctx_name[c], fadc_status_name(s));
		}
	}
	CHECK(t.nout == 2, "vjp has %d outputs", t.nout);
	// 0 eager; 1 forward and vjp (forward's output alive) recorded; 2
	// forward replayed, vjp with it released: a re-record under forward; 3,
	// 4 replays (of the first vjp, then of the second).
	counters(&t, 2, 2, 1, 5, 0, "overwritten");
	tree_is(&t, "forward: 3 replays\n  vjp: 1 replays\n  vjp: 1 replays\n", "overwritten");
	// A new generation: forward again makes its output valid.
	call3(&t, "forward", (const float *[]){(float[]){0.25f, -0.5f, 0.75f}}, NULL, OUT_MODEL);
	float got;
	CHECK(!fadc_tensor_read(t.got[G][0], &got, sizeof got) && got == t.val[C][0][0],
	      "forward's output after forward ran again: %s", fadc_context_error(t.ctx[G]));
	test_close(&t);
}

// vjp fed its own model-owned output: v = the loss its previous call
// returned.  The output region holds each output of the tasks set up once,
// and a call's outputs must not overwrite the input it is given, so the
// second call finds no room and grows the region, moving that input (and
// every output in the region) to the new block.  Each call's grad.x must
// be v y with v the previous loss, read back after the move, on every
// context; the calls then alternate between two placements and replay.
static void
t_region_grow(void)
{
	Test t;
	if (!test_open(&t, "basic"))
		return test_close(&t);
	int vjp = task_index(&t, "vjp");
	float y[3], v[1] = {0.5f};
	fresh(y, 3, 0, 0);
	const float *in[] = {y, v};
	if (vjp < 0 || !call3(&t, "vjp", in, NULL, OUT_MODEL))
		return test_close(&t);
	for (int it = 1; it < N_ITERS; it++) {
		float prev = t.val[C][0][0];
		fadc_tensor *ext[NCTX][MAXIO] = {{0}};
		for (int c = 0; c < NCTX; c++) {
			ext[c][0] = t.in[c][vjp][0];
			ext[c][1] = t.got[c][0]; // the last call's loss, model-owned
		}
		if (!call3(&t, "vjp", NULL, ext, OUT_MODEL))
			break;
		float want[3] = {prev * y[0], prev * y[1], prev * y[2]};
		CHECK(nerr(t.val[G][1], want, 3) <= 1e-5, "call %d: grad.x is not v * y", it);
	}
	fadc_device_stats s;
	stats(&t, G, &s);
	CHECK(s.graphs_replayed >= 1, "region growth: no replay in %d calls", N_ITERS);
	test_close(&t);
}

// A new generation reuses the memory of the last: forward, jvp, then jvp
// again (a task called again) overwrites forward's output, alive or not.
static void
t_generation(void)
{
	Test t;
	if (!test_open(&t, "basic"))
		return test_close(&t);
	float y[3], v[3];
	fresh(y, 3, 0, 0);
	fresh(v, 3, 0, 1);
	const float *inf[] = {y}, *inj[] = {y, v};
	call3(&t, "forward", inf, NULL, OUT_MODEL);
	fadc_tensor *hf[NCTX];
	for (int c = 0; c < NCTX; c++)
		hf[c] = t.got[c][0];
	call3(&t, "jvp", inj, NULL, OUT_MODEL);
	for (int c = 0; c < NCTX; c++) {
		float got;
		CHECK(!fadc_tensor_read(hf[c], &got, sizeof got), "forward's output after jvp on %s: %s",
		      ctx_name[c], fadc_context_error(t.ctx[c]));
	}
	call3(&t, "jvp", inj, NULL, OUT_MODEL); // a new generation: placed first
	for (int c = 0; c < NCTX; c++) {
		float got;
		fadc_status s = fadc_tensor_read(hf[c], &got, sizeof got);
		if (c == C)
			CHECK(!s, "on the CPU forward's output stays readable");
		else
			CHECK(s == FADC_ERR_OUTPUT_OVERWRITTEN &&
			          strstr(fadc_context_error(t.ctx[c]), "by a later call of task 'jvp'"),
			      "on %s, forward's output after a new generation's jvp: %s: %s",
			      ctx_name[c], fadc_status_name(s), fadc_context_error(t.ctx[c]));
	}
	uint64_t g0 = fadc_tensor_generation(hf[G]);
	call3(&t, "forward", inf, NULL, OUT_MODEL);
	CHECK(fadc_tensor_generation(hf[G]) == g0 + 1, "forward's generation did not increase");
	counters(&t, 2, 2, 0, 0, 0, "generation");
	tree_is(&t, "jvp: 0 replays\n  forward: 0 replays\n", "generation");
	test_close(&t);
}

// The caller's output tensors at a new address: a re-record (the graph's
// addresses are fixed); back at the old one: a replay of the first.
// Declarations (fadc's parameters) never move, fadc_model_bind copies into
// their block, so the output addresses are the static addresses a caller
// can change.
static void
t_rerecord(void)
{
	Test t;
	if (!test_open(&t, "basic"))
		return test_close(&t);
	float y[3];
	const float *in[] = {fresh(y, 3, 0, 0)};
	call3(&t, "forward", in, NULL, OUT_CALLER); // eager
	call3(&t, "forward", in, NULL, OUT_CALLER); // recorded
	call3(&t, "forward", in, NULL, OUT_CALLER); // replayed
	counters(&t, 1, 1, 0, 1, 0, "before the move");
	fadc_tensor *a[NCTX];
	for (int c = 0; c < NCTX; c++) { // move the output: a new tensor, the old kept alive
		a[c] = t.out[c][0][0];
		t.out[c][0][0] = NULL;
	}
	call3(&t, "forward", in, NULL, OUT_CALLER);
	counters(&t, 1, 1, 1, 1, 0, "after the output moved");
	call3(&t, "forward", in, NULL, OUT_CALLER);
	counters(&t, 1, 1, 1, 2, 0, "the moved output again");
	for (int c = 0; c < NCTX; c++) { // back to the first tensor
		fadc_tensor *b = t.out[c][0][0];
		t.out[c][0][0] = a[c];
		a[c] = b;
	}
	call3(&t, "forward", in, NULL, OUT_CALLER);
	counters(&t, 1, 1, 1, 3, 0, "back at the first output");
	tree_is(&t, "forward: 2 replays\nforward: 1 replays\n", "re-record");
	for (int c = 0; c < NCTX; c++)
		fadc_tensor_release(a[c]);
	test_close(&t);
}

// Past the re-record limit (2 here, FADC_CUDA_GRAPH_RERECORD_LIMIT) a task
// runs eagerly, with exactly one warning.
static void
t_limit(void)
{
	setenv("FADC_CUDA_GRAPH_RERECORD_LIMIT", "2", 1);
	Test t;
	int ok = test_open(&t, "basic");
	unsetenv("FADC_CUDA_GRAPH_RERECORD_LIMIT");
	if (!ok)
		return test_close(&t);
	fflush(stderr);
	FILE *log = tmpfile();
	int saved = dup(2);
	dup2(fileno(log), 2);
	float y[3];
	fadc_tensor *keep[NCTX][6] = {{0}};
	for (int it = 0; it < 6; it++) {
		const float *in[] = {fresh(y, 3, it, 0)};
		call3(&t, "forward", in, NULL, OUT_CALLER);
		for (int c = 0; c < NCTX; c++) { // a new output tensor next time
			keep[c][it] = t.out[c][0][0];
			t.out[c][0][0] = NULL;
		}
	}
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	rewind(log);
	char line[512];
	int warnings = 0;
	while (fgets(line, sizeof line, log)) {
		if (strstr(line, "fadc: warning: task 'forward' was re-recorded 2 times"))
			warnings++;
		else
			fputs(line, stderr); // a failure's message
	}
	fclose(log);
	CHECK(warnings == 1, "%d warnings about the re-record limit, want 1", warnings);
	// 0 eager, 1 recorded, 2 and 3 re-recorded, 4 and 5 eager (skipped).
	counters(&t, 1, 1, 2, 0, 2, "re-record limit");
	tree_is(&t, "forward: 0 replays\nforward: 0 replays\nforward: 0 replays\n", "re-record limit");
	for (int c = 0; c < NCTX; c++)
		for (int i = 0; i < 6; i++)
			fadc_tensor_release(keep[c][i]);
	test_close(&t);
}

// ---------------------------------------------------------------- specialisations and parameters

// specialise.ir compiled with -D N=2,4 (cudagraph.sh): one artifact, the
// task forward once per size, each its own task.  Calls alternating N=2
// and N=4 (picked by fadc_model_find_task_for from the input's shape):
// each specialisation is warmed up once and recorded once, the N=4 call
// under the N=2 one (they alternate in one generation), then both replay.
static void
t_specialise(void)
{
	Test t;
	if (!test_open(&t, "specialise"))
		return test_close(&t);
	CHECK(fadc_model_spec_count(t.m[G]) == 2 && !strcmp(fadc_model_spec(t.m[G], 0), "N=2") &&
	          !strcmp(fadc_model_spec(t.m[G], 1), "N=4"),
	      "the artifact's specialisations are not N=2, N=4");
	// The task for each size, on the device model (its own tensors) and on
	// the CPU one: the same index.
	int k[2] = {-1, -1};
	for (int s = 0; s < 2; s++) {
		int64_t n = 2 + 2 * s;
		fadc_tensor *y[NCTX] = {0};
		for (int c = 0; c < NCTX; c++) {
			int kc = -1;
			fadc_tensor_create(t.ctx[c], FADC_F32, 1, &n, &y[c]);
			fadc_status st = fadc_model_find_task_for(t.m[c], "forward", &y[c], 1, &kc);
			CHECK(!st, "find_task_for N=%lld on %s: %s", (long long)n, ctx_name[c],
			      fadc_context_error(t.ctx[c]));
			CHECK(c == G || kc == k[s], "N=%lld: task %d on %s, %d on graphs", (long long)n, kc,
			      ctx_name[c], k[s]);
			if (c == G)
				k[s] = kc;
			fadc_tensor_release(y[c]);
		}
		fadc_task_info ti;
		CHECK(k[s] >= 0 && !fadc_task_info_get(t.m[G], k[s], &ti) && ti.spec_index == s,
		      "N=%lld: task %d is not specialisation %d", (long long)n, k[s], s);
	}
	if (k[0] < 0 || k[1] < 0)
		return test_close(&t);
	float w2[2];
	for (int it = 0; it < N_ITERS; it++) {
		for (int s = 0; s < 2; s++) {
			float y[4];
			const float *in[] = {fresh(y, 2 + 2 * s, it, s)};
			if (!call3_at(&t, k[s], in, NULL, OUT_CALLER))
				break;
			if (s == 0) {
				if (it == 0) // initialized by the first run; the first w is N=2's
					decl_read(&t, C, "w", w2, sizeof w2);
				float want = (w2[0] + y[0]) * y[0] + (w2[1] + y[1]) * y[1];
				CHECK(fabsf(t.val[G][0][0] - want) <= 1e-5f * fmaxf(1, fabsf(want)),
				      "iteration %d: N=2 forward %g, want %g", it, t.val[G][0][0], want);
			}
		}
		char when[64];
		snprintf(when, sizeof when, "specialisations, iteration %d", it);
		counters(&t, 2, it ? 2 : 0, 0, it > 1 ? 2 * (uint64_t)(it - 1) : 0, 0, when);
	}
	tree_is(&t, "forward [N=2]: 3 replays\n  forward [N=4]: 3 replays\n", "specialisations");
	test_close(&t);
}

// A parameter bound by reference (fadc_model_bind_ref): the graph reads
// the caller's tensor in place.  A new value written into it is seen by
// the next replay; another tensor bound is a new address: a re-record;
// the first one bound back replays its graph.
static void
t_param_address(void)
{
	Test t;
	if (!test_open(&t, "basic"))
		return test_close(&t);
	fadc_tensor *xa[NCTX] = {0}, *xb[NCTX] = {0};
	float a[3] = {0.5f, -1.25f, 2}, b[3] = {-0.75f, 0.25f, 1.5f}, a2[3] = {3, 0.125f, -2};
	int64_t n = 3;
	for (int c = 0; c < NCTX; c++) {
		fadc_tensor_create(t.ctx[c], FADC_F32, 1, &n, &xa[c]);
		fadc_tensor_create(t.ctx[c], FADC_F32, 1, &n, &xb[c]);
		put(xa[c], a);
		put(xb[c], b);
		fadc_status s = fadc_model_bind_ref(t.m[c], "x", xa[c]);
		CHECK(!s, "bind_ref on %s: %s", ctx_name[c], fadc_context_error(t.ctx[c]));
	}
	// x's value at each call, the counters after it: 0 eager, 1 recorded,
	// 2 replayed, 3 replayed with a new value in A, 4 B bound: re-recorded,
	// 5 replayed, 6 A bound again: its graph replayed.
	static const uint64_t rec[] = {0, 1, 1, 1, 1, 1, 1}, rr[] = {0, 0, 0, 0, 1, 1, 1},
	                      rep[] = {0, 0, 1, 2, 2, 3, 4};
	for (int it = 0; it < 7; it++) {
		const float *x = it < 3 ? a : it == 3 || it == 6 ? a2 : b;
		for (int c = 0; c < NCTX && it == 3; c++)
			put(xa[c], a2);
		for (int c = 0; c < NCTX && (it == 4 || it == 6); c++) {
			fadc_status s = fadc_model_bind_ref(t.m[c], "x", it == 4 ? xb[c] : xa[c]);
			CHECK(!s, "bind_ref again on %s: %s", ctx_name[c], fadc_context_error(t.ctx[c]));
		}
		float y[3];
		const float *in[] = {fresh(y, 3, it, 0)};
		if (!call3(&t, "forward", in, NULL, OUT_CALLER))
			break;
		float want = 0;
		for (int i = 0; i < 3; i++)
			want += (x[i] + y[i]) * y[i];
		CHECK(fabsf(t.val[G][0][0] - want) <= 1e-5f * fmaxf(1, fabsf(want)),
		      "call %d: forward %g, want %g (x bound by reference)", it, t.val[G][0][0], want);
		char when[64];
		snprintf(when, sizeof when, "parameter address, after call %d", it);
		counters(&t, 1, rec[it], rr[it], rep[it], 0, when);
	}
	tree_is(&t, "forward: 3 replays\nforward: 1 replays\n", "parameter address");
	// The caller's tensors outlive the models that reference them.
	for (int c = 0; c < NCTX; c++) {
		fadc_model_close(t.m[c]);
		t.m[c] = NULL;
		fadc_tensor_release(xa[c]);
		fadc_tensor_release(xb[c]);
	}
	test_close(&t);
}

// ---------------------------------------------------------------- main

static const struct {
	const char *name;
	void (*fn)(void);
} tests[] = {
	{"basic", t_basic},
	{"dtoh", t_dtoh},
	{"htod", t_htod},
	{"mutate_input", t_mutate_input},
	{"mutate_constant", t_mutate_constant},
	{"factory", t_factory},
	{"mutated_metadata", t_mutated_metadata},
	{"dead_fill", t_dead_fill},
	{"lifecycle", t_lifecycle},
	{"fwd_vjp", t_fwd_vjp},
	{"alternate", t_alternate},
	{"overwritten", t_overwritten},
	{"generation", t_generation},
	{"region_grow", t_region_grow},
	{"rerecord", t_rerecord},
	{"limit", t_limit},
	{"specialise", t_specialise},
	{"param_address", t_param_address},
};

int
main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: cudagraph_check DIR [TEST...]\n");
		return 2;
	}
	dir = argv[1];
	// One context held for the whole run keeps the device's primary context
	// alive between tests (each test makes its own, for exact counters).
	fadc_context *keeper = NULL;
	fadc_context_options o = {.device = {FADC_DEVICE_CUDA, 0}, .num_threads = 0, .seed = 0};
	fadc_status s = fadc_context_create(&o, &keeper);
	if (s) {
		const char *req = getenv("FADC_REQUIRE_GPU");
		int required = req && !strcmp(req, "1");
		fprintf(stderr, "cudagraph_check: %s: %s: %s\n", required ? "FAIL" : "skipped",
		        fadc_status_name(s), fadc_context_error(NULL));
		return required ? 1 : 77;
	}
	printf("device: %s\n", fadc_context_device_name(keeper));
	for (size_t i = 0; i < sizeof tests / sizeof tests[0]; i++) {
		int want = argc == 2;
		for (int a = 2; a < argc; a++)
			want |= !strcmp(argv[a], tests[i].name);
		if (!want)
			continue;
		int f0 = nfail, c0 = ncheck;
		cur_test = tests[i].name;
		tests[i].fn();
		printf("%-18s %s (%d checks)\n", tests[i].name, nfail == f0 ? "ok" : "FAILED",
		       ncheck - c0);
	}
	fadc_context_destroy(keeper);
	if (nfail) {
		fprintf(stderr, "cudagraph_check: %d of %d checks failed\n", nfail, ncheck);
		return 1;
	}
	printf("cudagraph_check: %d checks passed\n", ncheck);
	return 0;
}
