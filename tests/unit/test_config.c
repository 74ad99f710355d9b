// tests/unit/test_config.c -- bench/bench.yaml and the configuration
// loader: the shipped file loads with the seed's task lists (ALL_TASKS is
// the 10 tasks in the seed's order, built from aliases), and malformed
// configurations are errors naming file, line and column.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "testutil.h"

static BenchConfig cfg;

// Loads text as a configuration; returns the loader's result, err filled.
static int
load_text(const char *text, char *err, size_t n)
{
	char path[] = "/tmp/fadc-config-XXXXXX";
	int fd = mkstemp(path);
	if (fd < 0)
		return -2;
	FILE *f = fdopen(fd, "w");
	fputs(text, f);
	fclose(f);
	int rc = bench_config_load(path, &cfg, err, n);
	// Messages start with the temporary path: keep only what follows it.
	size_t pl = strlen(path);
	if (rc && !strncmp(err, path, pl))
		memmove(err, err + pl, strlen(err + pl) + 1);
	unlink(path);
	return rc;
}

static void
expect_error(const char *text, const char *want)
{
	char err[512];
	int rc = load_text(text, err, sizeof err);
	tu_ncheck++;
	if (rc != -1 || strcmp(err, want)) {
		tu_nfail++;
		fprintf(stderr, "config error: got (%d) '%s'\n                want '%s'\n", rc, err, want);
	}
}

#define LISTS "task_lists:\n  FAST: &FAST [vjp, vhp, jvp]\n  ALL_TASKS: [*FAST, hvp]\n"

int
main(void)
{
	const char *root = getenv("FADC_SOURCE_DIR");
	char path[4096], err[512];
	snprintf(path, sizeof path, "%s/bench/bench.yaml", root ? root : ".");
	CHECK(bench_config_load(path, &cfg, err, sizeof err) == 0);
	if (tu_ncheck != tu_ncheck - tu_nfail)
		fprintf(stderr, "%s\n", err);
	// The seed's MODELS, in run order, and its task lists.
	static const char *const order[] = {"resnet18", "fcn_resnet", "detr", "ppl_simple_reg",
	                                    "ppl_robust_reg", "wav2letter", "deepspeech", "transformer",
	                                    "multiheadattn"};
	CHECK(cfg.nmodel == 9);
	for (int i = 0; i < 9 && i < cfg.nmodel; i++)
		CHECK(!strcmp(cfg.model[i].name, order[i]));
	static const char *const all[] = {"vjp", "vhp", "jvp", "hvp", "jacobian", "hessian",
	                                  "hessian_fwdrev", "hessian_revrev", "jacfwd", "jacrev"};
	CHECK(cfg.nall == 10);
	for (int i = 0; i < 10 && i < cfg.nall; i++)
		CHECK(!strcmp(cfg.all_tasks[i], all[i]));
	const BenchModel *m = bench_config_model(&cfg, "deepspeech");
	CHECK(m && m->ntasks == 1 && !strcmp(m->tasks[0], "vjp") && m->nunsupported == 4);
	m = bench_config_model(&cfg, "ppl_simple_reg");
	CHECK(m && m->ntasks == 10);
	m = bench_config_model(&cfg, "resnet18");
	CHECK(m && m->ntasks == 3 && !strcmp(m->tasks[1], "vhp") && m->rtol == 1e-4);
	CHECK(bench_config_model(&cfg, "ppl_robust_reg")->rtol == 1e-3);
	CHECK(cfg.nslow == 2 && bench_in_list(cfg.slow, cfg.nslow, "detr"));
	// 6 x 3 + 2 x 10 + 1 = 39 default cells (models-spec §1.2).
	int cells = 0;
	for (int i = 0; i < cfg.nmodel; i++)
		cells += cfg.model[i].ntasks;
	CHECK(cells == 39);

	// Errors, with positions.
	expect_error(LISTS "models:\n  m:\n    source: a.ir\n    taks: *FAST\n",
	             ":7:5: error: unknown key 'taks' in model 'm' (expected source, tasks, unsupported, reduced, rtol)");
	expect_error(LISTS "models:\n  m:\n    source: a.ir\n    tasks: [vjp, hesian]\n",
	             ":7:12: error: tasks: unknown task 'hesian'");
	expect_error(LISTS "models:\n  m:\n    tasks: [vjp]\n",
	             ":6:5: error: model 'm' has no source");
	// A key given twice is an error in every mapping (libyaml keeps the
	// last), naming both places.
	expect_error(LISTS "models:\n  m: {source: a.ir, tasks: [vjp]}\n  m: {source: b.ir, tasks: [vjp]}\n",
	             ":6:3: error: duplicate key 'm' (first at line 5, column 3)");
	expect_error(LISTS "models:\n  m: {source: a.ir, tasks: [vjp], source: b.ir}\n",
	             ":5:35: error: duplicate key 'source' (first at line 5, column 7)");
	expect_error(LISTS "rtol: 1e-3\nmodels:\n  m: {source: a.ir, tasks: [vjp]}\nrtol: 1e-2\n",
	             ":7:1: error: duplicate key 'rtol' (first at line 4, column 1)");
	// The first repeat in the file, wherever its mapping sits.
	expect_error("task_lists:\n  A: [vjp]\n  ALL_TASKS: [vjp]\n  A: [jvp]\nmodels:\n  m: {source: a.ir, tasks: [vjp]}\n"
	             "task_lists: {}\n",
	             ":4:3: error: duplicate key 'A' (first at line 2, column 3)");
	// A second document would be ignored.
	expect_error(LISTS "models:\n  m: {source: a.ir, tasks: [vjp]}\n---\nrtol: 1\n",
	             ":6:1: error: a second YAML document; a configuration is one document");
	expect_error(LISTS "models:\n  m: {source: a.ir, tasks: [vjp]}\n--- [\n",
	             ":7:1: error: did not find expected node content while parsing a flow node");
	expect_error(LISTS "models: {}\n", ":4:9: error: models is empty");
	// An empty source would name the configuration's folder.
	expect_error(LISTS "models:\n  m: {source: '', tasks: [vjp]}\n",
	             ":5:15: error: model 'm': source is empty");
	expect_error(LISTS "models:\n  m: {source: a.ir, tasks: [vjp], reduced: [N=2, K=1, N=3]}\n",
	             ":5:44: error: reduced: 'N' is given twice ('N=2', 'N=3')");
	expect_error(LISTS "models:\n  m: {source: a.ir, tasks: [vjp], reduced: [=2]}\n",
	             ":5:44: error: reduced: '=2' is not NAME=VALUE");
	expect_error(LISTS "models:\n  m: {source: a.ir, tasks: [vjp]}\nslow: [n]\n",
	             ":1:1: error: 'n' is listed in slow but is not a model");
	expect_error(LISTS "models:\n  m: {source: a.ir, tasks: vjp}\n",
	             ":5:28: error: tasks must be a list");
	// A tolerance must be positive and finite (strtod reads inf and nan).
	expect_error(LISTS "models:\n  m: {source: a.ir, tasks: [vjp]}\nrtol: -1\n",
	             ":6:7: error: rtol must be a positive finite number, got '-1'");
	static const char *const bad_rtol[] = {"inf", "-inf", "nan", "NAN", "infinity", "0", "0.0",
	                                       "1e999", "-0", "1e-3x", ""};
	for (size_t i = 0; i < sizeof bad_rtol / sizeof *bad_rtol; i++) {
		char text[256], want[128];
		snprintf(text, sizeof text, LISTS "models:\n  m: {source: a.ir, tasks: [vjp], rtol: '%s'}\n",
		         bad_rtol[i]);
		snprintf(want, sizeof want, ":5:41: error: rtol must be a positive finite number, got '%s'",
		         bad_rtol[i]);
		expect_error(text, want);
	}
	expect_error(LISTS "modles: {}\n", ":4:1: error: unknown key 'modles' (expected task_lists, models, slow, skip, rtol)");
	expect_error("models:\n  m: {source: a.ir, tasks: [vjp]\n",
	             ":3:1: error: did not find expected ',' or '}' while parsing a flow mapping");
	expect_error(LISTS "models:\n  m: {source: a.ir, tasks: [vjp]}\nskip:\n  device:\n    tpu: [m]\n",
	             ":8:5: error: unknown device 'tpu' in skip.device (expected cpu, cuda)");
	expect_error("", ":1:1: error: the configuration is empty");
	expect_error("- a\n- b\n", ":1:1: error: the configuration must be a mapping");
	// A configuration that is not a regular file is refused by name, before
	// any read (a FIFO would block; a directory gave libyaml's "input error").
	CHECK(bench_config_load("/tmp", &cfg, err, sizeof err) == -1);
	CHECK(!strcmp(err, "/tmp: error: is a directory, not a regular file"));
	CHECK(bench_config_load("/dev/null", &cfg, err, sizeof err) == -1);
	CHECK(!strcmp(err, "/dev/null: error: is a character device, not a regular file"));
	CHECK(bench_config_load("/nonexistent/c.yaml", &cfg, err, sizeof err) == -1);
	CHECK(!strcmp(err, "/nonexistent/c.yaml: error: cannot open: No such file or directory"));
	// The source's position is kept for messages about the file it names.
	char e1[512];
	CHECK(load_text(LISTS "models:\n  m:\n    tasks: [vjp]\n    source:   a.ir\n", e1, sizeof e1) == 0);
	CHECK(cfg.model[0].source_line == 7 && cfg.model[0].source_col == 15);
	// A document end marker alone is not a second document.
	CHECK(load_text(LISTS "models:\n  m: {source: a.ir, tasks: [vjp]}\n...\n", e1, sizeof e1) == 0);
	// An alias inside a list is flattened; an empty anchor contributes nothing.
	char e2[512];
	CHECK(load_text("task_lists:\n  NONE: &NONE\n  A: &A [vjp]\n  ALL_TASKS: [*A, [jvp], *NONE]\n"
	                "models:\n  m: {source: a.ir, tasks: [*A, hvp]}\n",
	                e2, sizeof e2) == 0);
	CHECK(cfg.nall == 2 && !strcmp(cfg.all_tasks[1], "jvp"));
	CHECK(cfg.model[0].ntasks == 2 && !strcmp(cfg.model[0].tasks[1], "hvp"));
	return TU_DONE("test_config");
}
