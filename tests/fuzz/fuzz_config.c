// tests/fuzz/fuzz_config.c -- libFuzzer harness over fadc-bench's YAML
// configuration loader (bench/config.c).
//
// Any file must load or give "file:line:col: error: ..." : never a crash,
// a leak, undefined behaviour or a hang (anchors and aliases make a small
// file a large document: a list of aliases to lists of aliases).  A
// configuration that loads must also keep config.h's promises: counts in
// range, every string NUL-terminated in its field, every task known, every
// name in slow/skip a model, each model's rtol set (non-negative).
//
// bench_config_load takes a path, so the input goes through a memory file
// (fuzz_file.h); config.c is not changed for the harness.  libyaml itself
// is linked uninstrumented: the coverage that guides the fuzzer is
// config.c's, the schema walk, which is the code of ours at risk.
//
// Seeds (tests/fuzz/corpus-yaml): bench/bench.yaml and the configurations
// of tests/unit/test_config.c and tests/bench/*.sh.
#define _GNU_SOURCE // memfd_create
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "fuzz_file.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static BenchConfig cfg; // about 90 KB: not on the stack

static void
bad(const char *what, const char *s)
{
	fprintf(stderr, "fuzz_config: %s%s%s\n", what, s ? ": " : "", s ? s : "");
	abort();
}

static void
terminated(const char *s, size_t cap)
{
	if (!memchr(s, 0, cap))
		bad("a string fills its field without a NUL", NULL);
}

static void
names(const char (*list)[64], int n, int max)
{
	if (n < 0 || n > max)
		bad("a list count out of range", NULL);
	for (int i = 0; i < n; i++) {
		terminated(list[i], 64);
		if (!bench_config_model(&cfg, list[i]))
			bad("a list names a model that is not one", list[i]);
	}
}

static void
tasks(const char (*list)[32], int n)
{
	static const char *const known[] = {"vjp", "jvp", "vhp", "hvp", "jacobian", "hessian",
	                                    "hessian_fwdrev", "hessian_revrev", "jacfwd", "jacrev"};
	if (n < 0 || n > BENCH_MAXTASK)
		bad("a task count out of range", NULL);
	for (int i = 0; i < n; i++) {
		terminated(list[i], 32);
		int ok = 0;
		for (size_t k = 0; k < sizeof known / sizeof known[0]; k++)
			ok |= !strcmp(known[k], list[i]);
		if (!ok)
			bad("an unknown task loaded", list[i]);
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char err[512];
	err[0] = 0;
	if (bench_config_load(fuzz_file(data, size), &cfg, err, sizeof err)) {
		if (!err[0] || !memchr(err, 0, sizeof err) || !strstr(err, "error"))
			bad("a failure without an error message", err);
		return 0;
	}
	if (cfg.nmodel < 1 || cfg.nmodel > BENCH_MAXMODEL || cfg.nall < 1 || !(cfg.rtol >= 0))
		bad("a configuration loaded without models, ALL_TASKS or a default rtol", NULL);
	tasks(cfg.all_tasks, cfg.nall);
	for (int i = 0; i < cfg.nmodel; i++) {
		const BenchModel *m = &cfg.model[i];
		terminated(m->name, sizeof m->name);
		terminated(m->source, sizeof m->source);
		if (bench_config_model(&cfg, m->name) != m)
			bad("a model listed twice", m->name);
		tasks(m->tasks, m->ntasks);
		tasks(m->unsupported, m->nunsupported);
		if (m->nreduced < 0 || m->nreduced > BENCH_MAXDEF)
			bad("a reduced count out of range", m->name);
		for (int k = 0; k < m->nreduced; k++) {
			terminated(m->reduced[k], sizeof m->reduced[k]);
			if (!strchr(m->reduced[k], '='))
				bad("a reduced size that is not NAME=VALUE", m->reduced[k]);
		}
		if (!(m->rtol >= 0))
			bad("a model's rtol is not set", m->name);
	}
	names(cfg.slow, cfg.nslow, BENCH_MAXMODEL);
	names(cfg.skip_cpu, cfg.nskip_cpu, BENCH_MAXMODEL);
	names(cfg.skip_cuda, cfg.nskip_cuda, BENCH_MAXMODEL);
	return 0;
}
