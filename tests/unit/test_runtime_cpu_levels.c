// tests/unit/test_runtime_cpu_levels.c -- one artifact with code for
// several CPU levels (docs/ARTIFACT.md "CPU levels"): x86-64-v3 and
// x86-64-v4 by default, the runtime running the highest the CPU has every
// feature of, or the one FADC_CPU_LEVEL names.
//
// Run with a level (argv[1], ctest runs x86-64-v3 and x86-64-v4; exit 77
// when this CPU lacks the level's features: the v4 run skips without
// AVX-512), it forces that level and checks every task of a model with
// GEMMs, a convolution and elementwise math against the float64
// interpreter, in f64 (normalized error <= 1e-12: the GEMM does the
// interpreter's sums term by term in the order of k, the FMA rounding
// once; test_codegen_gemm) and in f32 (<= 5e-5: K = 300 products, f32
// rounding), then that the loaded code is that level's: its entry table
// (fadc_artifact_v1.x86-64-v4) differs from level 0's in the task with the
// GEMMs (their 512-bit tiles) and shares level 0's initializers (no GEMM:
// the same IR, not compiled twice).  Without an argument: the x86-64-v3
// run plus what needs no particular CPU (faked with FADC_CPU_FEATURES):
// the choice on a CPU without AVX-512, the errors for a forced level the
// CPU lacks or the artifact does not have, --cpu narrowing to one level
// (the older format, one entry symbol), the descriptor's level list
// (format 11: round trip, refusals), and the same bytes whatever the
// threads and the compile cache (none, cold, warm).
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "abi.h"
#include "artifact.h"
#include "codegen_util.h"
#include "fadc.h"

static const char model[] =
    "param a: f64[37, 300] = normal(0, 1, seed=1)\n"    // K = 256 + 44
    "param b: f64[300, 53] = normal(0, 1, seed=2)\n"    // N = 3 tiles + 5
    "param x: f64[2, 8, 12, 12] = normal(0, 1, seed=3)\n"
    "param w: f64[16, 8, 3, 3] = normal(0, 0.3, seed=4)\n"
    "def forward() {\n"
    "  y = a @ b\n"
    "  c = conv2d(x, w, padding=1)\n"
    "  return sum(sin(y)) * 0.1 + sum(c * c) * 0.01 + sum(exp(a * 0.1))\n"
    "}\n";

static const char *const tasks[] = {"forward", "vjp", "jvp"};
static char dir[4096];

static char *
path_of(const char *name)
{
	static char p[4][4200];
	static int k;
	k = (k + 1) % 4;
	snprintf(p[k], sizeof p[k], "%s/%s", dir, name);
	return p[k];
}

// Opens path in a fresh context (FADC_CPU_FEATURES is read at its
// creation): the status, and the model's "cpu" or the error in out.
static fadc_status
open_as(const char *path, char *out, size_t n)
{
	fadc_context *ctx;
	fadc_model *m = NULL;
	if (fadc_context_create(NULL, &ctx))
		return FADC_ERR_ARG;
	fadc_status s = fadc_model_open(ctx, path, 0, &m);
	snprintf(out, n, "%s", s ? fadc_context_error(ctx) : fadc_model_info(m, "cpu"));
	fadc_model_close(m);
	fadc_context_destroy(ctx);
	return s;
}

// The level's task table as the library exports it.
static const fadc_abi_v1 *
table(void *dl, const char *sym)
{
	union {
		void *p;
		fadc_entry_fn_v1 f;
	} u = {dlsym(dl, sym)};
	return u.p ? u.f() : NULL;
}

static void
check_level(const Module *m64, const Module *m32, const char *level)
{
	setenv("FADC_CPU_LEVEL", level, 1);
	CgOptions o = {.tasks = tasks, .ntasks = 3, .opt_level = 2};
	CgCheck c64 = {1e-12, 1e-6, 0, 0}, c32 = {5e-5, 1e-6, 0, 0};
	char label[128];
	snprintf(label, sizeof label, "%s (f64)", level);
	cgu_check(m64, &o, &c64, "levels", label);
	snprintf(label, sizeof label, "%s (f32)", level);
	cgu_check(m32, &o, &c32, "levels", label);
	// The loaded code is the level's.
	const char *so = path_of("m.so");
	cgu_compile_or_exit(&m64, NULL, 1, &o, so, "levels");
	char got[1024];
	CHECK(open_as(so, got, sizeof got) == FADC_OK && !strcmp(got, level));
	fadc_context *ctx;
	fadc_model *fm = NULL;
	if (!CHECK(fadc_context_create(NULL, &ctx) == FADC_OK))
		return;
	if (CHECK(fadc_model_open(ctx, so, FADC_OPEN_DESCRIBE, &fm) == FADC_OK)) {
		CHECK(!strcmp(fadc_model_info(fm, "cpu_levels"), "x86-64-v3,x86-64-v4"));
		CHECK(!strcmp(fadc_model_info(fm, "cpu"), "x86-64-v3")); // describing: the lowest
	}
	fadc_model_close(fm);
	fadc_context_destroy(ctx);
	unsetenv("FADC_CPU_LEVEL");
	// Both tables, one descriptor; the task with the GEMMs has code of its
	// own at x86-64-v4, the initializers are level 0's.
	void *dl = dlopen(so, RTLD_NOW | RTLD_LOCAL);
	if (!CHECK(dl != NULL))
		return;
	const fadc_abi_v1 *t3 = table(dl, FADC_ENTRY_SYMBOL),
	                  *t4 = table(dl, FADC_ENTRY_SYMBOL ".x86-64-v4");
	if (CHECK(t3 && t4) && CHECK(t3->ntask == t4->ntask)) {
		CHECK(t3->desc == t4->desc && t3->desc_len == t4->desc_len);
		int differ = 0, same = 0;
		for (uint32_t i = 0; i < t3->ntask; i++) {
			differ += t3->task[i] != t4->task[i];
			same += t3->task[i] == t4->task[i];
		}
		CHECK(t3->task[0] != t4->task[0]); // forward: its GEMMs
		CHECK(same >= 4); // the four initializers
		printf("%s: %d of %u task functions the level's own\n", level, differ, t3->ntask);
	}
	dlclose(dl);
}

// The runtime checked feature list of level name (cg_llvm_cpu).
static void
level_features(const char *name, char *feat, size_t n)
{
	char nm[128], lf[4096], err[256];
	if (!cg_llvm_cpu(name, nm, sizeof nm, feat, n, lf, sizeof lf, err, sizeof err))
		snprintf(feat, n, "(%s)", err);
}

static void
check_choice_and_errors(void)
{
	const char *so = path_of("m.so");
	char v3[1024], got[1024];
	level_features("x86-64-v3", v3, sizeof v3);
	// A CPU without AVX-512 runs x86-64-v3, and cannot be made to run v4.
	setenv("FADC_CPU_FEATURES", v3, 1);
	CHECK(open_as(so, got, sizeof got) == FADC_OK && !strcmp(got, "x86-64-v3"));
	setenv("FADC_CPU_LEVEL", "x86-64-v4", 1);
	CHECK(open_as(so, got, sizeof got) == FADC_ERR_CPU);
	CHECK(strstr(got, "FADC_CPU_LEVEL=x86-64-v4: this CPU lacks features") && strstr(got, "avx512f"));
	// A level the artifact does not have; a CPU below every level.
	setenv("FADC_CPU_LEVEL", "x86-64-v2", 1);
	CHECK(open_as(so, got, sizeof got) == FADC_ERR_CPU);
	CHECK(strstr(got, "FADC_CPU_LEVEL=x86-64-v2: the artifact has no code for that CPU level (it "
	                  "has x86-64-v3 x86-64-v4)") != NULL);
	unsetenv("FADC_CPU_LEVEL");
	setenv("FADC_CPU_FEATURES", "sse2", 1);
	CHECK(open_as(so, got, sizeof got) == FADC_ERR_CPU);
	CHECK(strstr(got, "compiled for --cpu x86-64-v3: this CPU lacks features") != NULL);
	unsetenv("FADC_CPU_FEATURES");
}

// --cpu x86-64-v3: one level, the artifact as before the levels (format 3,
// one entry symbol).
static void
check_one_level(const Module *m)
{
	CgOptions o = {.tasks = tasks, .ntasks = 1, .opt_level = 2, .cpu = "x86-64-v3"};
	const char *so = path_of("one.so");
	cgu_compile_or_exit(&m, NULL, 1, &o, so, "one level");
	ArtDesc d = {0};
	uint8_t *db = NULL;
	size_t dl = 0;
	char err[512];
	if (CHECK(art_read(so, &d, &db, &dl, err, sizeof err) == ART_READ_OK)) {
		CHECK(d.version == ART_FORMAT_VERSION_ONE_SPEC && d.nlevel == 1);
		CHECK(!strcmp(d.level[0].cpu, "x86-64-v3") && d.level[0].features == d.features);
	}
	art_desc_free(&d);
	free(db);
	void *h = dlopen(so, RTLD_NOW | RTLD_LOCAL);
	if (CHECK(h != NULL)) {
		CHECK(dlsym(h, FADC_ENTRY_SYMBOL) != NULL);
		CHECK(dlsym(h, FADC_ENTRY_SYMBOL ".x86-64-v4") == NULL);
		dlclose(h);
	}
	// The list, in any order, is the same levels (and bytes); bad lists.
	char lv[CG_MAX_LEVELS][32];
	CHECK(cg_llvm_levels("x86-64-v4,x86-64-v3", lv, err, sizeof err) == 2 &&
	      !strcmp(lv[0], "x86-64-v3") && !strcmp(lv[1], "x86-64-v4"));
	CHECK(cg_llvm_levels(NULL, lv, err, sizeof err) == 2);
	CHECK(cg_llvm_levels("x86-64-v3,x86-64-v3", lv, err, sizeof err) == 0 &&
	      strstr(err, "listed twice"));
	CHECK(cg_llvm_levels("x86-64-v3,native", lv, err, sizeof err) == 0 &&
	      strstr(err, "'native' is not an x86-64 level"));
	CHECK(cg_llvm_levels("x86-64-v9", lv, err, sizeof err) == 0 && strstr(err, "unknown --cpu"));
}

// The descriptor's levels: format 11, decoded as written; an older version
// cannot hold them; a level twice or with a bad name is refused.
static void
check_descriptor(void)
{
	ArtDesc d = {0};
	uint8_t *db = NULL;
	size_t dl = 0;
	char err[512];
	if (!CHECK(art_read(path_of("m.so"), &d, &db, &dl, err, sizeof err) == ART_READ_OK))
		return;
	CHECK(d.version == ART_FORMAT_VERSION_LEVELS && d.nlevel == 2);
	CHECK(!strcmp(d.level[1].cpu, "x86-64-v4") && strstr(d.level[1].features, "avx512bw"));
	uint8_t *enc = NULL;
	size_t n = 0;
	CHECK(art_desc_encode(&d, &enc, &n) && n == dl && !memcmp(enc, db, n));
	free(enc);
	d.version = ART_FORMAT_VERSION_MODULES;
	CHECK(!art_desc_encode(&d, &enc, &n));
	d.version = 0;
	char *keep = d.level[1].cpu;
	const char *bad[] = {"x86-64-v3", "x86 64", ""};
	const char *why[] = {"listed twice", "bad name", "bad name"};
	for (int i = 0; i < 3; i++) {
		d.level[1].cpu = (char *)bad[i];
		ArtDesc back = {0};
		if (CHECK(art_desc_encode(&d, &enc, &n))) {
			CHECK(!art_desc_decode(enc, n, &back, err, sizeof err) && strstr(err, why[i]));
			art_desc_free(&back);
		}
		free(enc);
	}
	d.level[1].cpu = keep;
	art_desc_free(&d);
	free(db);
}

// The same bytes with one thread and no cache, two threads and a cold
// cache, and that cache warm.
static void
check_determinism(const Module *m)
{
	char cache[4200];
	snprintf(cache, sizeof cache, "%s/cache", dir);
	setenv("FADC_CACHE_DIR", cache, 1);
	CgOptions o = {.tasks = tasks, .ntasks = 2, .opt_level = 2, .jobs = 1, .no_cache = 1};
	cgu_compile_or_exit(&m, NULL, 1, &o, path_of("d1.so"), "jobs 1");
	o.jobs = 2;
	o.no_cache = 0;
	cgu_compile_or_exit(&m, NULL, 1, &o, path_of("d2.so"), "cold");
	cgu_compile_or_exit(&m, NULL, 1, &o, path_of("d3.so"), "warm");
	size_t n1, n2, n3;
	unsigned char *a = tu_slurp(path_of("d1.so"), &n1), *b = tu_slurp(path_of("d2.so"), &n2),
	              *c = tu_slurp(path_of("d3.so"), &n3);
	CHECK(a && b && c && n1 && n1 == n2 && n1 == n3 && !memcmp(a, b, n1) && !memcmp(a, c, n1));
	free(a);
	free(b);
	free(c);
}

int
main(int argc, char **argv)
{
	const char *level = argc > 1 ? argv[1] : "x86-64-v3";
	char feat[1024], why[1024];
	level_features(level, feat, sizeof feat);
	if (!rt_cpu_check(feat, rt_cpu_host_features(), why, sizeof why)) {
		printf("test_runtime_cpu_levels %s: skipped: %s\n", level, why);
		return 77;
	}
	snprintf(dir, sizeof dir, "%s/fadc-levels-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	char *t32 = cgu_to_f32(model);
	Module *m64 = cgu_parse("levels", model), *m32 = cgu_parse("levels32", t32);
	if (m64 && m32) {
		check_level(m64, m32, level);
		if (argc <= 1) {
			check_choice_and_errors();
			check_descriptor();
			check_one_level(m64);
			check_determinism(m64);
		}
	}
	ir_module_free(m64);
	ir_module_free(m32);
	free(t32);
	char cmd[4300];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	if (system(cmd))
		fprintf(stderr, "could not remove %s\n", dir);
	TU_DONE("test_runtime_cpu_levels");
}
