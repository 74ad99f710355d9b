// tests/unit/test_param_blocks.c -- the params' batched tasks (jacfwd,
// hessian, hessian_fwdrev, hessian_revrev) built by param blocks
// (passes/tasks.c, pass_vmap_blocks) against the same tasks batched over
// all basis rows at once (FADC_NO_PARAM_BLOCKS=1), both run by the float64
// interpreter on the same inputs.
//
// Oracle: the dense graph, the pipeline as it was before the blocks.  The
// blocked graph computes each block's rows by the same ops less the terms
// that are exactly zero (another param's tangent), so in float64 the two
// agree to rounding: every element within 1e-12 of the output's largest
// magnitude (at least 1; robust_reg's H reaches 1e12 for a tiny nu).
// Also checked: that the blocks are taken where they should be (the rule's
// --stats line: ppl_robust_reg and multiheadattn by default, work at most
// 3/4 of the dense graph's), that FADC_PARAM_BLOCKS=1 forces them, and that
// a one-param model (ppl_simple_reg) gets the same graph either way.  The
// compiled code of the blocked graphs is checked against the interpreter
// by test_codegen_models (ppl_robust_reg takes the blocks at its sizes).
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frontend.h"
#include "ir.h"
#include "passes.h"
#include "scan_modules.h"
#include "testmodel.h"
#include "testutil.h"

static const char *const tasks[] = {"jacfwd", "hessian", "hessian_fwdrev", "hessian_revrev"};

// Task `task` of m's forward under the switch `env` (NULL: the rule),
// with its --stats lines in *stats (malloc'ed).
static Graph *
derive(const Module *m, const char *task, const char *env, char **stats)
{
	unsetenv("FADC_PARAM_BLOCKS");
	unsetenv("FADC_NO_PARAM_BLOCKS");
	if (env)
		setenv(env, "1", 1);
	size_t len;
	FILE *f = open_memstream(stats, &len);
	PassOpts o = {.stats = 1, .dump = f};
	char err[512];
	Loc el;
	Graph *g = pass_task(m->main, task, &o, &el, err, sizeof err);
	fclose(f);
	unsetenv("FADC_PARAM_BLOCKS");
	unsetenv("FADC_NO_PARAM_BLOCKS");
	if (!g) {
		fprintf(stderr, "task %s: %s\n", task, err);
		exit(1);
	}
	tm_verify(g, task);
	return g;
}

// The canonical text of g (malloc'ed).
static char *
text(const Graph *g)
{
	char *s;
	size_t len;
	FILE *f = open_memstream(&s, &len);
	ir_print_graph(f, g, g->name);
	fclose(f);
	return s;
}

// want: 1 the rule takes the blocks, 0 it does not, -1 no rule (one param),
// 2 either (the forced blocks checked only).
static void
check_module(Module *m, const char *file, int want)
{
	Tensor *vals = tm_init(m);
	for (int t = 0; t < 4; t++) {
		char *sd, *sb, *sr;
		Graph *gd = derive(m, tasks[t], "FADC_NO_PARAM_BLOCKS", &sd);
		Graph *gb = derive(m, tasks[t], "FADC_PARAM_BLOCKS", &sb);
		Graph *gr = derive(m, tasks[t], NULL, &sr);
		tu_ncheck++;
		const char *line = strstr(sr, "param blocks");
		int ok = want == 2 ? strstr(sb, ": taken") != NULL
		         : want < 0 ? !line && !strstr(sb, "param blocks")
		         : want ? line && strstr(line, ": taken") && strstr(sb, ": taken")
		                : line && strstr(line, "not taken") && strstr(sb, ": taken");
		if (!ok) {
			tu_nfail++;
			fprintf(stderr, "%s %s: want rule %d, stats:\n%s", file, tasks[t], want, sr);
		}
		if (strstr(sd, "param blocks")) { // the switch off: no rule at all
			tu_ncheck++, tu_nfail++;
			fprintf(stderr, "%s %s: FADC_NO_PARAM_BLOCKS still tried the blocks\n", file, tasks[t]);
		}
		char *td = text(gd), *tb = text(gb);
		if (want < 0)
			CHECK_STR(tb, td); // one param: the graph as before
		else
			CHECK(strcmp(tb, td) != 0);
		free(td), free(tb);
		CHECK(gd->nout == gb->nout);
		Tensor *od = tm_run(m, gd, tasks[t], vals, NULL, NULL, 0, 0);
		Tensor *ob = tm_run(m, gb, tasks[t], vals, NULL, NULL, 0, 0);
		for (uint32_t k = 0; k < gd->nout && k < gb->nout; k++) {
			CHECK_STR(gb->out[k].name, gd->out[k].name);
			int64_t n = ir_numel(&od[k].shape);
			tu_ncheck++;
			if (ir_numel(&ob[k].shape) != n || ob[k].shape.rank != od[k].shape.rank) {
				tu_nfail++;
				fprintf(stderr, "%s %s %s: shapes differ\n", file, tasks[t], gd->out[k].name);
				continue;
			}
			double sc = 1, worst = 0;
			for (int64_t i = 0; i < n; i++)
				sc = fmax(sc, fabs(od[k].data[i]));
			for (int64_t i = 0; i < n; i++) {
				double e = fabs(ob[k].data[i] - od[k].data[i]) / sc;
				worst = isnan(e) || e > worst ? e : worst;
			}
			if (!(worst <= 1e-12)) {
				tu_nfail++;
				fprintf(stderr, "%s %s %s: blocks against dense %.3g of %.3g\n", file, tasks[t],
				        gd->out[k].name, worst, sc);
			}
		}
		tm_free_out(gd, od), tm_free_out(gb, ob);
		ir_graph_free(gr);
		free(sd), free(sb), free(sr);
	}
	tm_free_tensors(vals, m->ndecl);
	ir_module_free(m);
}

static void
model(const char *file, const char *const *defs, int ndefs, int want)
{
	check_module(tm_load(file, defs, ndefs), file, want);
}

int
main(void)
{
	model("ppl_robust_reg.ir", NULL, 0, 1);
	const char *rr[] = {"N=3", "K=2"};
	model("ppl_robust_reg.ir", rr, 2, 1);
	model("ppl_simple_reg.ir", NULL, 0, -1);
	const char *mha[] = {"E=4", "NH=2", "L=2", "S=3", "B=2"};
	model("multiheadattn.ir", mha, 5, 1);
	// Two params whose tangents always meet (a + b): a block's zero
	// tangent folds nothing, so the blocks only add nodes; the rule keeps
	// the dense graph, and the forced blocks still agree.
	static const char both[] = "param a: f32[4] = iota(axis=0, dtype=f32) * 0.25 - 0.4\n"
	                           "param b: f32[4] = iota(axis=0, dtype=f32) * -0.3 + 0.2\n"
	                           "def forward() {\n  return sum(tanh(a + b) * exp(a + b) * (a + b))\n}\n";
	check_module(tm_parse("both.ir", both), "both.ir", 0);
	// Scans (tests/unit/scan_modules.h): the blocks batch the scan's body
	// once per block (passes/vmap.c's scan rule).
	check_module(tm_parse("rnn.ir", rnn), "rnn.ir", 2);
	check_module(tm_parse("matrnn.ir", matrnn), "matrnn.ir", 2);
	return TU_DONE("test_param_blocks");
}
