// tests/unit/test_runtime_pool.c -- the CPU thread pool (runtime/pool.c)
// and the split kernels of the LLVM backend (codegen/llvm.c, "parallel
// kernels").
//
// - Determinism: a model with large GEMMs (every tile edge: rows past the
//   last 6-row block and past a 384-row group, columns past the last tile,
//   K across two packed blocks, a batch) and one of elementwise chains and
//   row reductions, forward and vjp, with 1, 2, 3 and 8 threads: the
//   outputs are the same bytes (memcmp), and the pool did split (its
//   statistics say so), so the comparison is not of one serial run with
//   itself.  A scan whose body kernels split (elementwise and a GEMM
//   inside the loop, reading the sequence at the step), likewise.
//   resnet18 at reduced size, vjp, the same in
//   test_runtime_pool_zoo (slow: its interpreter run takes minutes).
// - Agreement with the float64 interpreter, through cg_check, at 3 and 8
//   threads (FADC_NUM_THREADS, which a context of num_threads 0 reads):
//   computing in f64, normalized error <= 1e-12 (the GEMM's only departure
//   from the interpreter is the fused multiply-add's single rounding:
//   measured ~1e-14); in f32 <= 5e-5 (K = 257 products: K eps_f32 = 3e-5
//   of the terms' magnitudes, as test_codegen_gemm argues).
// - The ppl models never call the pool: every task at 8 threads leaves
//   parallel_calls 0 and no worker started.
// - Contexts created and destroyed repeatedly, with and without started
//   workers (ASan/LSan in the sanitizer build: no leak, no use after free).
// - Invalid num_threads (negative, above FADC_MAX_THREADS, a bad
//   FADC_NUM_THREADS) are FADC_ERR_ARG with a message naming the setting.
#include "pool_util.h"

static const char gemm_src[] =
    "param a: f32[800, 257] = normal(0, 1, seed=1)\n" // M: 2 groups of 384 + 32 rows
    "param b: f32[257, 190] = normal(0, 1, seed=2)\n" // N: 11 tiles + 14 columns; K: 256 + 1
    "param d: f32[3, 50, 257] = normal(0, 1, seed=3)\n" // a batch of A
    "def forward() {\n"
    "  x = a @ b\n"
    "  z = d @ b\n"
    "  return sum(sin(x)) + sum(z * z) * 0.001\n"
    "}\n";

static const char ew_src[] =
    "param x: f32[96, 2048] = normal(0, 1, seed=1)\n"
    "param w: f32[2048] = normal(0, 1, seed=2)\n"
    "def forward() {\n"
    "  y = exp(sin(x) * 0.5) * w\n"
    "  s = sum(y * y, 1)\n"
    "  return sum(log(s + 1)) + sum(tanh(y)) * 0.01\n"
    "}\n";

// A scan whose body kernels split: an elementwise step over 96 x 1024
// points and a 96 x 1024 x 64 GEMM, reading the sequence at the loop's
// step (the step counter travels in the chunk's arguments); vjp adds the
// reverse scan of the body's vjp.
static const char scan_src[] =
    "param xs: f32[4, 96, 1024] = normal(0, 1, seed=1)\n"
    "param k: f32[96, 1024] = normal(0, 0.5, seed=2)\n"
    "param w: f32[1024, 64] = normal(0, 0.05, seed=3)\n"
    "def cell(h, x, k, w) {\n"
    "  n = tanh(h * k + x)\n"
    "  return n, n @ w\n"
    "}\n"
    "def forward() {\n"
    "  h, ys = scan(cell, k * 0.0, xs, k, w, ncarry=1, nxs=1)\n"
    "  return sum(h) + sum(ys * ys)\n"
    "}\n";

static char *
to_f64(const char *src)
{
	char *s = strdup(src);
	for (char *q = strstr(s, "f32"); q; q = strstr(q + 3, "f32"))
		q[1] = '6', q[2] = '4';
	return s;
}

static const char *const fwd_vjp[] = {"forward", "vjp"};

static void
check_interp(const char *name, const char *src, int f64, const char *threads)
{
	char *text = f64 ? to_f64(src) : strdup(src);
	FeOptions fo = {.diag = stderr};
	Module *m = fe_parse_string(name, text, strlen(text), &fo);
	CHECK(m != NULL);
	if (m) {
		setenv("FADC_NUM_THREADS", threads, 1);
		CgOptions o = {.tasks = fwd_vjp, .ntasks = 2, .opt_level = 2};
		CgCheck c = {f64 ? 1e-12 : 5e-5, 1e-6, 0, 0};
		char err[4096] = "";
		printf("%s (%s, %s threads): ", name, f64 ? "f64" : "f32", threads);
		fflush(stdout);
		int nf = cg_check(m, &o, &c, stdout, err, sizeof err);
		if (nf < 0)
			fprintf(stderr, "%s: %s\n", name, err);
		CHECK(nf == 0);
		unsetenv("FADC_NUM_THREADS");
		ir_module_free(m);
	}
	free(text);
}

static void
check_model(const char *name, const char *src)
{
	char so[64];
	if (!pu_compile(name, src, 0, NULL, 0, fwd_vjp, 2, 2, so, sizeof so))
		return;
	printf("%s:\n", name);
	pu_check_threads(so, "forward", 1);
	pu_check_threads(so, "vjp", 1);
	unlink(so);
	check_interp(name, src, 1, "3");
	check_interp(name, src, 0, "8");
}

// Every task of both ppl models, at 8 threads: no kernel is large enough
// to split, so the pool is never called and no worker starts.
static void
check_ppl(const char *file)
{
	static const char *const all[] = {"all"};
	char so[64];
	if (!pu_compile(file, file, 1, NULL, 0, all, 1, 2, so, sizeof so))
		return;
	fadc_context_options co = {.device = {FADC_DEVICE_CPU, 0}, .num_threads = 8, .seed = 0};
	fadc_context *ctx;
	fadc_model *m;
	CHECK(fadc_context_create(&co, &ctx) == FADC_OK);
	CHECK(fadc_model_open(ctx, so, 0, &m) == FADC_OK);
	int nrun = 0;
	for (int t = 0; t < fadc_model_task_count(m); t++) {
		fadc_task_info info;
		fadc_tensor *in[16] = {0}, *out[16] = {0};
		CHECK(fadc_task_info_get(m, t, &info) == FADC_OK);
		if (info.is_init || info.ncaller > 16 || info.noutputs > 16)
			continue;
		for (int i = 0, j = 0; i < info.ninputs; i++) {
			fadc_tensor_desc d;
			CHECK(fadc_task_input(m, t, i, &d) == FADC_OK);
			if (d.role == FADC_ROLE_INPUT) {
				CHECK(fadc_tensor_create(ctx, d.dtype, d.rank, d.dim, &in[j]) == FADC_OK);
				pu_fill(in[j++]);
			}
		}
		CHECK(fadc_run(m, t, in, info.ncaller, out, info.noutputs) == FADC_OK);
		nrun++;
		for (int i = 0; i < 16; i++)
			fadc_tensor_release(in[i]);
	}
	fadc_pool_stats st;
	CHECK(fadc_context_pool_stats(ctx, &st) == FADC_OK);
	printf("%s: %d tasks at 8 threads: pool %llu calls, %llu workers started\n", file, nrun,
	       (unsigned long long)st.parallel_calls, (unsigned long long)st.threads_started);
	CHECK(nrun >= 10);
	CHECK(st.threads == 8);
	CHECK(st.parallel_calls == 0 && st.jobs == 0 && st.inline_calls == 0);
	CHECK(st.threads_started == 0);
	fadc_model_close(m);
	fadc_context_destroy(ctx);
	unlink(so);
}

// Create and destroy contexts again and again: pools whose workers never
// started, pools whose workers ran jobs (joined at destroy), two models
// on one pool; each run's result the same bytes.
static void
check_lifetimes(void)
{
	char so[64];
	if (!pu_compile("gemm.ir", gemm_src, 0, NULL, 0, fwd_vjp, 1, 1, so, sizeof so))
		return;
	size_t n0 = 0;
	fadc_pool_stats st;
	unsigned char *r0 = pu_run(so, "forward", 1, &n0, &st);
	for (int i = 0; i < 12; i++) {
		fadc_context_options co = {.device = {FADC_DEVICE_CPU, 0}, .num_threads = 2 + i % 5, .seed = 0};
		fadc_context *ctx;
		CHECK(fadc_context_create(&co, &ctx) == FADC_OK);
		fadc_context_destroy(ctx); // never started
		size_t n = 0;
		unsigned char *r = pu_run(so, "forward", 2 + i % 5, &n, &st);
		CHECK(r && r0 && n == n0 && !memcmp(r, r0, n));
		CHECK(st.threads_started == (uint64_t)(1 + i % 5));
		free(r);
	}
	// Two models on one context, the pool shared, several runs each.
	fadc_context_options co = {.device = {FADC_DEVICE_CPU, 0}, .num_threads = 4, .seed = 0};
	fadc_context *ctx;
	fadc_model *m1, *m2;
	CHECK(fadc_context_create(&co, &ctx) == FADC_OK);
	CHECK(fadc_model_open(ctx, so, 0, &m1) == FADC_OK);
	CHECK(fadc_model_open(ctx, so, 0, &m2) == FADC_OK);
	for (int i = 0; i < 6; i++) {
		fadc_tensor *out = NULL;
		CHECK(fadc_run(i % 2 ? m1 : m2, 0, NULL, 0, &out, 1) == FADC_OK);
		CHECK(out && r0 && fadc_tensor_bytes(out) == n0 && !memcmp(fadc_tensor_data(out), r0, n0));
	}
	CHECK(fadc_context_pool_stats(ctx, &st) == FADC_OK);
	CHECK(st.threads_started == 3 && st.jobs >= 6);
	fadc_model_close(m1);
	fadc_model_close(m2);
	fadc_context_destroy(ctx);
	free(r0);
	unlink(so);
}

static void
check_invalid(void)
{
	static const int bad[] = {-1, -1000, FADC_MAX_THREADS + 1, 1 << 30};
	for (int i = 0; i < 4; i++) {
		fadc_context_options co = {.device = {FADC_DEVICE_CPU, 0}, .num_threads = bad[i], .seed = 0};
		fadc_context *ctx = (fadc_context *)&co;
		CHECK(fadc_context_create(&co, &ctx) == FADC_ERR_ARG);
		CHECK(ctx == NULL);
		char want[100];
		snprintf(want, sizeof want, "got %d", bad[i]);
		CHECK(strstr(fadc_context_error(NULL), "num_threads must be 1 .. 4096") != NULL);
		CHECK(strstr(fadc_context_error(NULL), want) != NULL);
	}
	// num_threads 0: FADC_NUM_THREADS, checked the same way.
	static const char *const badenv[] = {"0", "-2", "4097", "abc", "3x", "99999999999999999999"};
	fadc_context_options co = {.device = {FADC_DEVICE_CPU, 0}, .num_threads = 0, .seed = 0};
	fadc_context *ctx;
	for (int i = 0; i < 6; i++) {
		setenv("FADC_NUM_THREADS", badenv[i], 1);
		CHECK(fadc_context_create(&co, &ctx) == FADC_ERR_ARG);
		CHECK(strstr(fadc_context_error(NULL), "FADC_NUM_THREADS must be an integer 1 .. 4096") !=
		      NULL);
	}
	setenv("FADC_NUM_THREADS", "3", 1);
	CHECK(fadc_context_create(&co, &ctx) == FADC_OK);
	CHECK(fadc_context_num_threads(ctx) == 3);
	// The device timer on a CPU context: a clear FADC_ERR_ARG, not a crash.
	double secs = -1;
	CHECK(fadc_context_timer_start(ctx) == FADC_ERR_ARG);
	CHECK(strstr(fadc_context_error(ctx), "device timing needs a GPU context") != NULL);
	CHECK(fadc_context_timer_stop(ctx, &secs) == FADC_ERR_ARG && secs == -1);
	CHECK(fadc_context_timer_stop(ctx, NULL) == FADC_ERR_ARG);
	CHECK(fadc_context_timer_start(NULL) == FADC_ERR_ARG);
	fadc_context_destroy(ctx);
	unsetenv("FADC_NUM_THREADS");
	// Without it: the CPUs online, at least 1.
	CHECK(fadc_context_create(&co, &ctx) == FADC_OK);
	CHECK(fadc_context_num_threads(ctx) == (int)sysconf(_SC_NPROCESSORS_ONLN));
	fadc_context_destroy(ctx);
	// An explicit setting wins over the environment.
	setenv("FADC_NUM_THREADS", "abc", 1);
	co.num_threads = 2;
	CHECK(fadc_context_create(&co, &ctx) == FADC_OK);
	CHECK(fadc_context_num_threads(ctx) == 2);
	fadc_context_destroy(ctx);
	unsetenv("FADC_NUM_THREADS");
	fadc_pool_stats st;
	CHECK(fadc_context_pool_stats(NULL, &st) == FADC_ERR_ARG);
	CHECK(fadc_context_num_threads(NULL) == 0);
}

int
main(void)
{
	unsetenv("FADC_NUM_THREADS");
	check_invalid();
	check_model("gemm.ir", gemm_src);
	check_model("ew.ir", ew_src);
	check_model("scan.ir", scan_src);
	check_ppl("ppl_simple_reg.ir");
	check_ppl("ppl_robust_reg.ir");
	check_lifetimes();
	return TU_DONE("test_runtime_pool");
}
