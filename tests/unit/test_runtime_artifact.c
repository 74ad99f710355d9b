// tests/unit/test_runtime_artifact.c -- the artifact and the runtime API
// (runtime/artifact.c, cpu.c, rt.c, include/fadc.h).
//
//   - determinism: compiling the same module twice gives the same bytes;
//   - corruption: a byte flipped anywhere in the file (code, descriptor,
//     trailer), a truncation at any of a dozen sizes, a newer format
//     version, a file that is no artifact: each is an error status with a
//     message, never a crash, and nothing is loaded;
//   - the descriptor decoder on every prefix and every single-bit flip of a
//     real descriptor: no crash, no read past the end (ASan);
//   - the CPU feature check, with faked feature sets: an x86-64-v3
//     artifact is refused on a CPU without AVX2 and the message names it;
//     a generic x86-64 one runs;
//   - the API: wrong input counts, dtypes, shapes, overlapping outputs,
//     describe-only models, unknown names, unbound declarations, binding
//     from memory, .npy and .safetensors, runtime-owned outputs reused with
//     their generation counted, write-backs of in-place inputs;
//   - the ABI's struct layouts.
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "abi.h"
#include "artifact.h"
#include "codegen.h"
#include "fadc.h"
#include "frontend.h"
#include "tensorio.h"
#include "testmodel.h"
#include "testutil.h"

static char dir[256];

static Module *
load_model(const char *file)
{
	const char *defs[] = {"N=3", "K=2"};
	return tm_load(file, defs, 2);
}

static const char *
compile(Module *m, const char *name, const char *cpu, const char *tasks)
{
	static char path[8][512];
	static int k;
	char *p = path[k++ % 8];
	snprintf(p, 512, "%s/%s", dir, name);
	const char *t[1] = {tasks};
	const char *defs[] = {"N=3", "K=2"};
	CgOptions o = {.opt_level = -1, .cpu = cpu, .tasks = t, .ntasks = tasks ? 1 : 0,
	               .defines = defs, .ndefines = 2};
	char err[4096];
	if (!cg_compile_module(m, &o, p, err, sizeof err)) {
		fprintf(stderr, "compile %s: %s\n", name, err);
		exit(1);
	}
	return p;
}

static void
spill(const char *path, const uint8_t *b, size_t n)
{
	FILE *f = fopen(path, "wb");
	fwrite(b, 1, n, f);
	fclose(f);
}

// Opens path and expects failure with status want (or any failure when
// want is FADC_OK) and a message containing `msg` (if not NULL).
static void
expect_open_fails(const char *path, fadc_status want, const char *msg, unsigned flags)
{
	fadc_context *ctx;
	fadc_model *m = NULL;
	CHECK(fadc_context_create(NULL, &ctx) == FADC_OK);
	fadc_status s = fadc_model_open(ctx, path, flags, &m);
	CHECK(s != FADC_OK && m == NULL);
	if (want != FADC_OK)
		CHECK(s == want);
	CHECK(fadc_context_error(ctx)[0] != 0);
	if (msg && !strstr(fadc_context_error(ctx), msg)) {
		tu_nfail++;
		fprintf(stderr, "open %s: %s (%s), want a message with '%s'\n", path,
		        fadc_context_error(ctx), fadc_status_name(s), msg);
	}
	fadc_model_close(m);
	fadc_context_destroy(ctx);
}

static void
test_determinism(Module *m)
{
	const char *a = compile(m, "det-a.so", NULL, "all");
	const char *b = compile(m, "det-b.so", NULL, "all");
	size_t na, nb;
	uint8_t *x = tu_slurp(a, &na), *y = tu_slurp(b, &nb);
	CHECK(x && y && na == nb && !memcmp(x, y, na));
	free(x);
	free(y);
}

static void
test_corruption(const char *good)
{
	size_t n;
	uint8_t *b = tu_slurp(good, &n);
	CHECK(b && n > 1000);
	if (!b)
		return;
	char bad[600];
	snprintf(bad, sizeof bad, "%s/bad.so", dir);
	// The descriptor sits just before the trailer.
	uint64_t dlen = 0;
	for (int i = 0; i < 8; i++)
		dlen |= (uint64_t)b[n - ART_TRAILER_SIZE + 24 + i] << (8 * i);
	CHECK(dlen > 0 && dlen < n);
	size_t flips[] = {0, 4, 64, n / 3, n / 2, n - ART_TRAILER_SIZE - dlen - 1,
	                  n - ART_TRAILER_SIZE - dlen / 2, n - ART_TRAILER_SIZE - 1, n - 36, n - 10, n - 1};
	for (size_t i = 0; i < sizeof flips / sizeof flips[0]; i++) {
		b[flips[i]] ^= 0x20;
		spill(bad, b, n);
		b[flips[i]] ^= 0x20;
		expect_open_fails(bad, FADC_ERR_FORMAT, NULL, 0);
		expect_open_fails(bad, FADC_ERR_FORMAT, NULL, FADC_OPEN_DESCRIBE);
	}
	b[n / 2] ^= 1;
	spill(bad, b, n);
	b[n / 2] ^= 1;
	expect_open_fails(bad, FADC_ERR_FORMAT, "checksum mismatch", 0);
	size_t cuts[] = {0, 1, 39, 40, 41, 1000, n / 2, n - ART_TRAILER_SIZE - dlen,
	                 n - ART_TRAILER_SIZE, n - 20, n - 1};
	for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
		spill(bad, b, cuts[i]);
		expect_open_fails(bad, FADC_ERR_FORMAT, "not a fadc artifact", 0);
	}
	// Bytes appended after the trailer hide it.
	uint8_t *longer = malloc(n + 7);
	memcpy(longer, b, n);
	memset(longer + n, 0, 7);
	spill(bad, longer, n + 7);
	free(longer);
	expect_open_fails(bad, FADC_ERR_FORMAT, "not a fadc artifact", 0);
	// A newer format: a valid trailer with the next version.
	uint8_t *t = b + n - ART_TRAILER_SIZE;
	uint32_t crc = (uint32_t)t[32] | (uint32_t)t[33] << 8 | (uint32_t)t[34] << 16 |
	               (uint32_t)t[35] << 24;
	uint8_t save[ART_TRAILER_SIZE];
	memcpy(save, t, sizeof save);
	art_trailer_make(t, ART_FORMAT_VERSION_ONE_SPEC, n - ART_TRAILER_SIZE, dlen, crc);
	CHECK(!memcmp(save, t, sizeof save)); // the trailer is what art_trailer_make writes
	t[8] = ART_FORMAT_VERSION + 1;
	uint32_t tc = art_crc32(0, t, 36);
	for (int i = 0; i < 4; i++)
		t[36 + i] = (uint8_t)(tc >> (8 * i));
	spill(bad, b, n);
	char vmsg[64];
	snprintf(vmsg, sizeof vmsg, "artifact format version %d", ART_FORMAT_VERSION + 1);
	expect_open_fails(bad, FADC_ERR_VERSION, vmsg, 0);
	memcpy(t, save, sizeof save);
	// Not an artifact at all; no file.
	spill(bad, (const uint8_t *)"hello, world\n", 13);
	expect_open_fails(bad, FADC_ERR_FORMAT, "not a fadc artifact", 0);
	memset(b, 0x5a, n);
	spill(bad, b, n);
	expect_open_fails(bad, FADC_ERR_FORMAT, "not a fadc artifact", 0);
	snprintf(bad, sizeof bad, "%s/missing.so", dir);
	expect_open_fails(bad, FADC_ERR_IO, "No such file", 0);
	free(b);
}

// The decoder on damaged descriptors: never a crash, never a read past
// the buffer (each trial gets an exact-size heap copy for ASan to guard).
static void
test_decoder(const char *good)
{
	ArtDesc d;
	uint8_t *desc;
	size_t len;
	char err[512];
	CHECK(art_read(good, &d, &desc, &len, err, sizeof err) == ART_READ_OK);
	// Round trip: encoding the decoded descriptor gives the same bytes.
	uint8_t *again;
	size_t alen;
	CHECK(art_desc_encode(&d, &again, &alen) && alen == len && !memcmp(again, desc, len));
	free(again);
	art_desc_free(&d);
	int nok = 0;
	for (size_t cut = 0; cut < len; cut++) {
		uint8_t *c = malloc(cut ? cut : 1);
		memcpy(c, desc, cut);
		int ok = art_desc_decode(c, cut, &d, err, sizeof err);
		CHECK(!ok && err[0]);
		if (ok)
			art_desc_free(&d);
		free(c);
	}
	for (size_t i = 0; i < len; i++)
		for (int bit = 0; bit < 8; bit++) {
			uint8_t *c = malloc(len);
			memcpy(c, desc, len);
			c[i] ^= (uint8_t)(1 << bit);
			if (art_desc_decode(c, len, &d, err, sizeof err)) {
				nok++;
				art_desc_free(&d);
			}
			free(c);
		}
	printf("descriptor of %zu bytes: %zu truncations refused, %zu bit flips decoded without a "
	       "crash (%d still well-formed: the checksum catches those)\n",
	       len, len, len * 8, nok);
	free(desc);
}

static void
test_cpu(Module *m)
{
	uint64_t avx2 = (uint64_t)1 << rt_cpu_feature_index("avx2");
	uint64_t fma = (uint64_t)1 << rt_cpu_feature_index("fma");
	char err[512];
	CHECK(rt_cpu_feature_index("avx2") >= 0 && rt_cpu_feature_index("nope") < 0);
	CHECK(rt_cpu_check("avx2,fma", avx2 | fma, err, sizeof err));
	CHECK(rt_cpu_check("", 0, err, sizeof err));
	CHECK(!rt_cpu_check("avx2,fma", fma, err, sizeof err) && strstr(err, "avx2") &&
	      !strstr(err, "fma"));
	CHECK(!rt_cpu_check("fma,frobnicate", fma, err, sizeof err) &&
	      strstr(err, "frobnicate (unknown to this runtime)"));
	uint64_t host = rt_cpu_host_features();
	CHECK(host & ((uint64_t)1 << rt_cpu_feature_index("sse2")));
	// Faked CPUs, through the environment variable the runtime honours.
	const char *v3 = compile(m, "v3.so", NULL, "forward");
	const char *v1 = compile(m, "v1.so", "x86-64", "forward");
	setenv("FADC_CPU_FEATURES", "sse2,sse3", 1);
	CHECK(rt_cpu_host_features() == ((uint64_t)1 << rt_cpu_feature_index("sse2") |
	                                  (uint64_t)1 << rt_cpu_feature_index("sse3")));
	expect_open_fails(v3, FADC_ERR_CPU, "avx2", 0);
	fadc_context *ctx;
	fadc_model *fm;
	CHECK(fadc_context_create(NULL, &ctx) == FADC_OK);
	CHECK(fadc_model_open(ctx, v1, 0, &fm) == FADC_OK);
	fadc_tensor *out[1] = {NULL};
	CHECK(fadc_run(fm, 0, NULL, 0, out, 1) == FADC_OK);
	fadc_model_close(fm);
	// Describing needs no CPU check.
	CHECK(fadc_model_open(ctx, v3, FADC_OPEN_DESCRIBE, &fm) == FADC_OK);
	CHECK(!strcmp(fadc_model_info(fm, "cpu"), "x86-64-v3"));
	CHECK(strstr(fadc_model_info(fm, "features"), "avx2") != NULL);
	fadc_model_close(fm);
	fadc_context_destroy(ctx);
	unsetenv("FADC_CPU_FEATURES");
	if ((host & avx2) && (host & fma)) {
		CHECK(fadc_context_create(NULL, &ctx) == FADC_OK);
		CHECK(fadc_model_open(ctx, v3, 0, &fm) == FADC_OK);
		fadc_model_close(fm);
		fadc_context_destroy(ctx);
	}
	// --cpu native: what this host has.
	const char *nat = compile(m, "native.so", "native", "forward");
	CHECK(fadc_context_create(NULL, &ctx) == FADC_OK);
	CHECK(fadc_model_open(ctx, nat, 0, &fm) == FADC_OK);
	fadc_model_close(fm);
	fadc_context_destroy(ctx);
}

static float
run_forward(fadc_model *fm)
{
	int task;
	float v = 0;
	fadc_tensor *out[1] = {NULL};
	CHECK(fadc_model_find_task(fm, "forward", &task) == FADC_OK);
	CHECK(fadc_run(fm, task, NULL, 0, out, 1) == FADC_OK);
	if (out[0])
		CHECK(fadc_tensor_read(out[0], &v, sizeof v) == FADC_OK);
	return v;
}

static void
test_api(const char *art)
{
	fadc_context *ctx;
	fadc_model *fm;
	fadc_context_options co = {.device = {FADC_DEVICE_CUDA, 0}, .num_threads = 0, .seed = 0};
	CHECK(fadc_context_create(&co, &ctx) == FADC_ERR_DEVICE);
	CHECK(fadc_context_create(NULL, &ctx) == FADC_OK);
	CHECK(fadc_model_open(ctx, art, 0, &fm) == FADC_OK);
	CHECK_STR(fadc_model_name(fm), "ppl_simple_reg");
	CHECK(strstr(fadc_model_info(fm, "options"), "defines=N=3,K=2") != NULL);
	CHECK(fadc_model_info(fm, "nope") == NULL);
	int vjp, t;
	CHECK(fadc_model_find_task(fm, "vjp", &vjp) == FADC_OK);
	CHECK(fadc_model_find_task(fm, "conv", &t) == FADC_ERR_NOT_FOUND);
	CHECK(strstr(fadc_context_error(ctx), "has no task 'conv'") != NULL);
	CHECK(strstr(fadc_context_error(ctx), "hessian_fwdrev") != NULL);
	fadc_task_info info;
	CHECK(fadc_task_info_get(fm, vjp, &info) == FADC_OK);
	CHECK(info.ncaller == 1 && info.noutputs == 2 && !info.is_init);
	CHECK(fadc_task_info_get(fm, 1000, &info) == FADC_ERR_ARG);
	fadc_tensor_desc d;
	CHECK(fadc_task_input(fm, vjp, 3, &d) == FADC_OK && d.role == FADC_ROLE_INPUT && d.rank == 0);
	CHECK(fadc_task_input(fm, vjp, 0, &d) == FADC_OK && d.role == FADC_ROLE_PARAM);
	CHECK(fadc_task_output(fm, vjp, 1, &d) == FADC_OK && !strcmp(d.name, "grad.beta_value"));
	CHECK(fadc_task_output(fm, vjp, 2, &d) == FADC_ERR_ARG);
	// Inputs: count, NULL, dtype, shape.
	int64_t two = 2;
	fadc_tensor *v, *v2, *vi;
	CHECK(fadc_tensor_create(ctx, FADC_F32, 0, NULL, &v) == FADC_OK);
	CHECK(fadc_tensor_create(ctx, FADC_F32, 1, &two, &v2) == FADC_OK);
	CHECK(fadc_tensor_create(ctx, FADC_I64, 0, NULL, &vi) == FADC_OK);
	float one = 1;
	CHECK(fadc_tensor_write(v, &one, sizeof one) == FADC_OK);
	CHECK(fadc_tensor_write(v, &one, 3) == FADC_ERR_ARG);
	fadc_tensor *outs[2] = {NULL, NULL};
	CHECK(fadc_run(fm, vjp, NULL, 0, outs, 2) == FADC_ERR_ARG);
	CHECK(strstr(fadc_context_error(ctx), "takes 1 inputs from the caller, 0 given") != NULL);
	fadc_tensor *in[1] = {NULL};
	CHECK(fadc_run(fm, vjp, in, 1, outs, 2) == FADC_ERR_ARG);
	in[0] = v2;
	CHECK(fadc_run(fm, vjp, in, 1, outs, 2) == FADC_ERR_SHAPE);
	CHECK(strstr(fadc_context_error(ctx), "input 'v' must be f32[], got f32[2]") != NULL);
	in[0] = vi;
	CHECK(fadc_run(fm, vjp, in, 1, outs, 2) == FADC_ERR_SHAPE);
	CHECK(fadc_run(fm, vjp, in, 1, outs, 1) == FADC_ERR_ARG);
	// Runtime-owned outputs: the same handles every run, generation counted.
	in[0] = v;
	CHECK(fadc_run(fm, vjp, in, 1, outs, 2) == FADC_OK);
	fadc_tensor *o0 = outs[0], *o1 = outs[1];
	void *p1 = fadc_tensor_data(o1);
	CHECK(o0 && o1 && fadc_tensor_generation(o1) == 1);
	float g1[3], g2[3];
	CHECK(fadc_tensor_read(o1, g1, sizeof g1) == FADC_OK);
	float half = 0.5f;
	fadc_tensor_write(v, &half, sizeof half);
	outs[0] = outs[1] = NULL;
	CHECK(fadc_run(fm, vjp, in, 1, outs, 2) == FADC_OK);
	CHECK(outs[1] == o1 && fadc_tensor_data(outs[1]) == p1 && fadc_tensor_generation(o1) == 2);
	fadc_tensor_read(o1, g2, sizeof g2);
	for (int i = 0; i < 3; i++)
		CHECK_NEAR(g2[i], 0.5 * g1[i], 1e-6);
	fadc_tensor_release(o1); // model-owned: ignored
	// Caller-owned outputs: shape checked, overlap refused.
	int64_t three1[2] = {3, 1};
	float gbuf[3];
	fadc_tensor *go, *so, *bad;
	CHECK(fadc_tensor_wrap(ctx, FADC_F32, 2, three1, gbuf, &go) == FADC_OK);
	CHECK(fadc_tensor_create(ctx, FADC_F32, 0, NULL, &so) == FADC_OK);
	CHECK(fadc_tensor_create(ctx, FADC_F32, 1, &two, &bad) == FADC_OK);
	outs[0] = so;
	outs[1] = bad;
	CHECK(fadc_run(fm, vjp, in, 1, outs, 2) == FADC_ERR_SHAPE);
	CHECK(strstr(fadc_context_error(ctx), "output 'grad.beta_value' must be f32[3, 1]") != NULL);
	outs[0] = v; // the input itself
	outs[1] = go;
	CHECK(fadc_run(fm, vjp, in, 1, outs, 2) == FADC_ERR_ARG);
	CHECK(strstr(fadc_context_error(ctx), "overlaps input 'v'") != NULL);
	outs[0] = so;
	CHECK(fadc_run(fm, vjp, in, 1, outs, 2) == FADC_OK);
	for (int i = 0; i < 3; i++)
		CHECK(gbuf[i] == g2[i]);
	// Declarations: bind from memory, refuse wrong shapes and names.
	fadc_tensor *beta, *cur;
	CHECK(fadc_tensor_create(ctx, FADC_F32, 2, three1, &beta) == FADC_OK);
	float ones[3] = {1, 1, 1};
	fadc_tensor_write(beta, ones, sizeof ones);
	CHECK(fadc_model_bind(fm, "nope", beta) == FADC_ERR_NOT_FOUND);
	CHECK(fadc_model_bind(fm, "X", beta) == FADC_ERR_SHAPE);
	CHECK(strstr(fadc_context_error(ctx), "'X' is declared f32[3, 3], the bound tensor is f32[3, 1]"));
	float f_init = run_forward(fm);
	CHECK(fadc_model_bind(fm, "beta_value", beta) == FADC_OK);
	float f_ones = run_forward(fm);
	CHECK(f_ones != f_init);
	CHECK(fadc_model_get(fm, "beta_value", &cur) == FADC_OK);
	CHECK(!memcmp(fadc_tensor_data(cur), ones, sizeof ones));
	// Re-initializing keeps bound values.
	CHECK(fadc_model_init(fm, 0) == FADC_OK);
	CHECK(!memcmp(fadc_tensor_data(cur), ones, sizeof ones));
	CHECK(run_forward(fm) == f_ones);
	// The same values from files: .npy (by file name) and .safetensors.
	char path[600], err[600];
	tio_tensor tt = {.dtype = TIO_F32, .rank = 2, .dim = {3, 1}, .data = ones};
	snprintf(path, sizeof path, "%s/beta_value.npy", dir);
	CHECK(tio_npy_write(path, &tt, err, sizeof err) == 0);
	fadc_model *fm2;
	int nb = -1;
	CHECK(fadc_model_open(ctx, art, 0, &fm2) == FADC_OK);
	CHECK(run_forward(fm2) == f_init);
	CHECK(fadc_model_bind_file(fm2, path, &nb) == FADC_OK && nb == 1);
	CHECK(run_forward(fm2) == f_ones);
	fadc_model_close(fm2);
	tio_tensor st[2] = {{.name = "beta_value", .dtype = TIO_F32, .rank = 2, .dim = {3, 1}, .data = ones},
	                    {.name = "unrelated", .dtype = TIO_F32, .rank = 0, .data = &one}};
	snprintf(path, sizeof path, "%s/w.safetensors", dir);
	CHECK(tio_safetensors_write(path, st, 2, err, sizeof err) == 0);
	CHECK(fadc_model_open(ctx, art, 0, &fm2) == FADC_OK);
	CHECK(fadc_model_bind_file(fm2, path, &nb) == FADC_OK && nb == 1);
	CHECK(run_forward(fm2) == f_ones);
	snprintf(path, sizeof path, "%s/nothing.npy", dir);
	CHECK(fadc_model_bind_file(fm2, path, &nb) == FADC_ERR_IO);
	fadc_model_close(fm2);
	// Describe only: no code, no runs.
	CHECK(fadc_model_open(ctx, art, FADC_OPEN_DESCRIBE, &fm2) == FADC_OK);
	CHECK(fadc_model_task_count(fm2) == fadc_model_task_count(fm));
	outs[0] = outs[1] = NULL;
	CHECK(fadc_run(fm2, vjp, in, 1, outs, 2) == FADC_ERR_STATE);
	fadc_model_close(fm2);
	fadc_tensor_release(v);
	fadc_tensor_release(v2);
	fadc_tensor_release(vi);
	fadc_tensor_release(go);
	fadc_tensor_release(so);
	fadc_tensor_release(bad);
	fadc_tensor_release(beta);
	fadc_model_close(fm);
	fadc_context_destroy(ctx);
}

// A constant without initializer must be bound; an argument written in
// place comes back to the caller.
// fadc_context_set_seed: the run seed of the calls that follow.  f =
// sum(dropout(p, 0.5) * p) = 2 sum_i m_i p_i^2 (m the mask), so vjp's
// gradient is 4 m_i p_i and sum_i g_i p_i / 2 = f when forward and
// gradient used the same mask: checked for three seeds, each call's loss
// equal to forward's under that seed.  A seed gives the same value every
// time, another call counter (the high word) other masks, and the param,
// initialized at the first run, keeps its values.
static void
test_run_seeds(void)
{
	Module *m = tm_parse("seeds.ir", "param p: f32[64] = uniform(0.5, 1, seed=1)\n"
	                                   "def forward() -> f32[] {\n"
	                                   "  return sum(dropout(p, 0.5) * p)\n"
	                                   "}\n");
	const char *art = compile(m, "seeds.so", NULL, "all");
	fadc_context *ctx;
	fadc_model *fm;
	CHECK(fadc_context_create(NULL, &ctx) == FADC_OK);
	CHECK(fadc_model_open(ctx, art, 0, &fm) == FADC_OK);
	int fwd = -1, vjp = -1;
	CHECK(fadc_model_find_task(fm, "forward", &fwd) == FADC_OK);
	CHECK(fadc_model_find_task(fm, "vjp", &vjp) == FADC_OK);
	float one = 1, f[4], p0[64], p1[64], g[64];
	fadc_tensor *v;
	CHECK(fadc_tensor_wrap(ctx, FADC_F32, 0, NULL, &one, &v) == FADC_OK);
	const uint64_t seeds[4] = {0, (uint64_t)1 << 32, ((uint64_t)5 << 32) | 7, 0};
	for (int i = 0; i < 4; i++) {
		CHECK(fadc_context_set_seed(ctx, seeds[i]) == FADC_OK);
		fadc_tensor *out[2] = {NULL, NULL}, *in[1] = {v};
		CHECK(fadc_run(fm, fwd, NULL, 0, out, 1) == FADC_OK);
		fadc_tensor_read(out[0], &f[i], sizeof f[i]);
		out[0] = NULL;
		CHECK(fadc_run(fm, vjp, in, 1, out, 2) == FADC_OK);
		float loss = 0;
		fadc_tensor_read(out[0], &loss, sizeof loss);
		fadc_tensor_read(out[1], g, sizeof g);
		fadc_tensor *pt;
		CHECK(fadc_model_get(fm, "p", &pt) == FADC_OK);
		fadc_tensor_read(pt, i ? p1 : p0, sizeof p0);
		double dot = 0;
		for (int j = 0; j < 64; j++)
			dot += (double)g[j] * p0[j] / 2;
		CHECK_NEAR(loss, f[i], 1e-5 * fabs(f[i]));
		CHECK_NEAR(dot, f[i], 1e-4 * fabs(f[i]));
		if (i)
			CHECK(!memcmp(p0, p1, sizeof p0));
	}
	CHECK(f[3] == f[0]); // the same seed again: the same masks
	CHECK(f[1] != f[0] && f[2] != f[0] && f[2] != f[1]); // other call counters: others
	CHECK(fadc_context_set_seed(NULL, 1) == FADC_ERR_ARG);
	fadc_tensor_release(v);
	fadc_model_close(fm);
	fadc_context_destroy(ctx);
	ir_module_free(m);
}

static void
test_unbound_and_writeback(void)
{
	Module *m = tm_parse("wb.ir", "const d: f32[2]\n"
	                                "param p: f32[2] = uniform(0, 1, seed=1)\n"
	                                "def forward(y: f32[2]) -> f32[] {\n"
	                                "  y.add_(3)\n"
	                                "  return sum(d * p * y)\n"
	                                "}\n");
	const char *art = compile(m, "wb.so", NULL, "forward");
	fadc_context *ctx;
	fadc_model *fm;
	CHECK(fadc_context_create(NULL, &ctx) == FADC_OK);
	CHECK(fadc_model_open(ctx, art, 0, &fm) == FADC_OK);
	int64_t two = 2;
	float ybuf[2] = {1, 2}, dv[2] = {10, 100};
	fadc_tensor *y, *dt;
	CHECK(fadc_tensor_wrap(ctx, FADC_F32, 1, &two, ybuf, &y) == FADC_OK);
	CHECK(fadc_tensor_wrap(ctx, FADC_F32, 1, &two, dv, &dt) == FADC_OK);
	fadc_task_info info;
	CHECK(fadc_task_info_get(fm, 0, &info) == FADC_OK);
	fadc_tensor *in[1] = {y}, *out[4] = {NULL};
	CHECK(fadc_run(fm, 0, in, 1, out, info.noutputs) == FADC_ERR_UNBOUND);
	CHECK(strstr(fadc_context_error(ctx), "constant 'd' has no initializer and was not bound"));
	CHECK(fadc_model_bind(fm, "d", dt) == FADC_OK);
	CHECK(fadc_run(fm, 0, in, 1, out, info.noutputs) == FADC_OK);
	fadc_tensor *pt;
	CHECK(fadc_model_get(fm, "p", &pt) == FADC_OK);
	const float *pv = fadc_tensor_data(pt);
	float f;
	fadc_tensor_read(out[0], &f, sizeof f);
	CHECK_NEAR(f, 10 * pv[0] * 4 + 100 * pv[1] * 5, 1e-5);
	// The write-back: y is now y + 3.
	CHECK(info.noutputs == 2 && ybuf[0] == 4 && ybuf[1] == 5);
	fadc_tensor_release(y);
	fadc_tensor_release(dt);
	fadc_model_close(fm);
	fadc_context_destroy(ctx);
	ir_module_free(m);
}

static void
test_abi(void)
{
	CHECK(offsetof(fadc_call_v1, in) == 0);
	CHECK(offsetof(fadc_call_v1, out) == 8);
	CHECK(offsetof(fadc_call_v1, arena) == 16);
	CHECK(offsetof(fadc_call_v1, runseed) == 24);
	CHECK(offsetof(fadc_call_v1, exec) == 32);
	CHECK(offsetof(fadc_abi_v1, abi_version) == 0);
	CHECK(offsetof(fadc_abi_v1, ntask) == 4);
	CHECK(offsetof(fadc_abi_v1, desc) == 8);
	CHECK(offsetof(fadc_abi_v1, desc_len) == 16);
	CHECK(offsetof(fadc_abi_v1, task) == 24);
	CHECK(sizeof(fadc_abi_v1) == 32);
}

#ifdef FADC_HAVE_CUDA
// A cpu,cuda artifact: its descriptor (launch contracts, image places)
// through the decoder's prefix and bit-flip trials; the contracts point
// inside the image section and name what they should; one flipped byte in
// the image section is refused before anything loads; and on a CPU context
// its tasks run (CPU code) while a CUDA-only artifact's are refused.
static void
test_cuda_descriptor(Module *m)
{
	static char path[512];
	snprintf(path, sizeof path, "%s/cuda.so", dir);
	const char *t[2] = {"vjp", "hessian"};
	const char *defs[] = {"N=3", "K=2"};
	CgOptions o = {.opt_level = -1, .tasks = t, .ntasks = 2, .defines = defs, .ndefines = 2,
	               .targets = CG_TARGET_CPU | CG_TARGET_CUDA};
	char err[4096];
	int built = cg_compile_module(m, &o, path, err, sizeof err);
	CHECK(built);
	if (!built) {
		fprintf(stderr, "cuda.so: %s\n", err);
		return;
	}
	test_decoder(path);
	ArtDesc d;
	uint8_t *desc;
	size_t len;
	CHECK(art_read(path, &d, &desc, &len, err, sizeof err) == ART_READ_OK);
	CHECK_STR(d.cuda_arch, "sm_90");
	CHECK(d.images != NULL && d.images_bytes > 0);
	for (uint32_t i = 0; i < d.ntask; i++) {
		const ArtTask *k = &d.task[i];
		if (k->kind == ART_INIT) {
			CHECK(k->targets == ART_TARGET_CPU);
			continue;
		}
		CHECK(k->targets == (ART_TARGET_CPU | ART_TARGET_CUDA));
		// The cubin is an ELF; the PTX ends with its NUL and names a kernel.
		CHECK(k->nmodule == 1); // a small task: one program
		CHECK(!memcmp(d.images + k->module[0].cubin_off, "\177ELF", 4));
		CHECK(d.images[k->module[0].ptx_off + k->module[0].ptx_len - 1] == 0);
		CHECK(k->ncuda == 1 && k->kern[0].grid == 1); // a small task: one fused launch
		CHECK(strstr((const char *)d.images + k->module[0].ptx_off, k->kern[0].name) != NULL);
		int outs = 0;
		for (uint32_t a = 0; a < k->kern[0].narg; a++)
			outs += k->kern[0].arg[a].kind == ART_ARG_OUTPUT;
		CHECK(outs == (int)k->nout);
	}
	art_desc_free(&d);
	free(desc);
	// A byte of the image section flipped (the checksum's error first).
	FILE *f = fopen(path, "rb");
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	fseek(f, 0, SEEK_SET);
	uint8_t *b = malloc((size_t)n);
	CHECK(fread(b, 1, (size_t)n, f) == (size_t)n);
	fclose(f);
	uint64_t off = 0, dl = 0;
	for (int i = 0; i < 8; i++) {
		off |= (uint64_t)b[n - ART_TRAILER_SIZE + 16 + i] << (8 * i);
		dl |= (uint64_t)b[n - ART_TRAILER_SIZE + 24 + i] << (8 * i);
	}
	b[off - 100] ^= 1; // inside the images (they end where the descriptor starts)
	char bad[600];
	snprintf(bad, sizeof bad, "%s/cuda-bad.so", dir);
	f = fopen(bad, "wb");
	fwrite(b, 1, (size_t)n, f);
	fclose(f);
	free(b);
	fadc_context *ctx;
	fadc_model *mm = NULL;
	CHECK(fadc_context_create(NULL, &ctx) == FADC_OK);
	CHECK(fadc_model_open(ctx, bad, 0, &mm) == FADC_ERR_FORMAT &&
	      strstr(fadc_context_error(ctx), "checksum"));
	// The CPU code of a cpu,cuda artifact runs on the CPU; a CUDA-only
	// artifact's task is refused there, naming it.
	int task;
	fadc_tensor *out[2] = {NULL, NULL}, *v;
	CHECK(fadc_model_open(ctx, path, 0, &mm) == FADC_OK);
	CHECK(fadc_model_find_task(mm, "vjp", &task) == FADC_OK);
	CHECK(fadc_tensor_create(ctx, FADC_F32, 0, NULL, &v) == FADC_OK);
	CHECK(fadc_run(mm, task, &v, 1, out, 2) == FADC_OK);
	fadc_model_close(mm);
	o.targets = CG_TARGET_CUDA;
	snprintf(path, sizeof path, "%s/cuda-only.so", dir);
	CHECK(cg_compile_module(m, &o, path, err, sizeof err));
	CHECK(fadc_model_open(ctx, path, 0, &mm) == FADC_OK);
	CHECK(fadc_model_find_task(mm, "vjp", &task) == FADC_OK);
	out[0] = out[1] = NULL;
	CHECK(fadc_run(mm, task, &v, 1, out, 2) == FADC_ERR_DEVICE &&
	      strstr(fadc_context_error(ctx), "task 'vjp' has no CPU code"));
	fadc_model_close(mm);
	fadc_tensor_release(v);
	fadc_context_destroy(ctx);
	// A CUDA context: where there is no driver, a clear FADC_ERR_DEVICE.
	fadc_context_options go = {.device = {FADC_DEVICE_CUDA, 0}, .num_threads = 0, .seed = 0};
	fadc_context *gc = NULL;
	fadc_status s = fadc_context_create(&go, &gc);
	CHECK(s == FADC_OK || (s == FADC_ERR_DEVICE && fadc_context_error(NULL)[0]));
	if (s)
		printf("no CUDA context here: %s\n", fadc_context_error(NULL));
	fadc_context_destroy(gc);
	(void)dl;
}
#endif

int
main(void)
{
	const char *tmp = getenv("TMPDIR");
	snprintf(dir, sizeof dir, "%s/fadc-rt-test.XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	test_abi();
	Module *m = load_model("ppl_simple_reg.ir");
	test_determinism(m);
	const char *art = compile(m, "simple.so", NULL, "all");
	test_corruption(art);
	test_decoder(art);
	test_cpu(m);
	test_api(art);
	test_unbound_and_writeback();
	test_run_seeds();
#ifdef FADC_HAVE_CUDA
	test_cuda_descriptor(m);
#endif
	ir_module_free(m);
	char cmd[400];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	if (system(cmd))
		fprintf(stderr, "could not remove %s\n", dir);
	return TU_DONE("test_runtime_artifact");
}
