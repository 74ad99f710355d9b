// tests/unit/test_codegen_remat_zoo.c -- recomputation bounded by a memory
// goal (codegen/plan.c, cg_remat, FADC_MEMORY_GOAL).
//
// At the zoo's reduced sizes (FADC_REMAT_MIN=1, so that values of any size
// are candidates), each model's vjp is planned three ways: without
// recomputation (FADC_NO_REMAT=1), without a goal (FADC_MEMORY_GOAL=0: every
// candidate, stop 24's rule) and bounded by a goal halfway between the two
// live peaks (FADC_MEMORY_GOAL=BYTES).  The plans:
//   - live peaks ordered: unbounded <= bounded <= none, and the bounded one
//     at or under its goal (the goal lies above the unbounded peak, so it is
//     reachable; the cheapest-first order must reach it);
//   - the bounded plan adds no more kernels than the unbounded one;
//   - a fraction goal ("0.9"): at or under 0.9 of the peak without
//     recomputation, or at the unbounded plan's peak; "1.0": nothing
//     recomputed (the peak is its own goal); a malformed value ("3X")
//     plans as the default does.
// At these sizes resnet18's and detr's peaks have no candidate (nothing is
// recomputed: their checks hold trivially); fcn_resnet's and the
// transformer's have several, and their bounded plans stop between the
// other two (at least two such plans are required).  Then the values of
// those two: the vjp compiled (CPU, computing in f64, as test_codegen_zoo)
// with the bounded goal, without a goal and without recomputation, each
// against the float64 interpreter (cg_check, normalized error <= 2e-7).  The plans themselves
// are simulated by test_codegen_plan's zoo half (unit/test_codegen_plan_zoo
// at the default goal, unit/test_codegen_plan_zoo_nogoal without one).  Named *zoo* (labelled `slow`, left out of the sanitizer
// run): the float64 interpreter runs fcn_resnet's vjp three times (41 s
// cold on the 2-core machine under load, 7 s with the test cache warm).
#include <stdlib.h>
#include <string.h>

#include "codegen.h"
#include "frontend.h"
#include "harness.h"
#include "passes.h"
#include "testmodel.h"
#include "testutil.h"

typedef struct Model {
	const char *file;
	const char *defs[12];
	double tol;
	int values; // also compiled and run against the interpreter
} Model;

static const Model models[] = {
	{"resnet18.ir", {"N=2", "H=32", "C=4", "NCLS=10", NULL}, 2e-7, 0},
	{"fcn_resnet.ir", {"N=2", "H=32", "C=4", NULL}, 2e-7, 1},
	{"transformer.ir", {"N=8", "SEQ=4", "E=16", "NH=4", "FF=16", "MAXLEN=16", NULL}, 2e-7, 1},
	{"detr.ir",
	 {"IMG_H=64", "IMG_W=96", "WIDTH=4", "D=16", "NH=2", "FF=32", "Q=6", "NCLS=10", "T0=3", "T1=2",
	  NULL},
	 5e-7, 0},
};

static int
ndefs(const char *const *d)
{
	int n = 0;
	while (d[n])
		n++;
	return n;
}

// The environment of one mode: recomputation off ("off"), or the goal.
static void
mode(const char *goal)
{
	setenv("FADC_REMAT_MIN", "1", 1);
	if (!strcmp(goal, "off")) {
		setenv("FADC_NO_REMAT", "1", 1);
		unsetenv("FADC_MEMORY_GOAL");
	} else {
		unsetenv("FADC_NO_REMAT");
		if (*goal)
			setenv("FADC_MEMORY_GOAL", goal, 1);
		else
			unsetenv("FADC_MEMORY_GOAL");
	}
}

typedef struct Plan {
	uint32_t nk;
	int64_t live, arena;
} Plan;

// The vjp of m lowered and planned under `goal` (mode()).
static Plan
plan(Module *m, const char *goal)
{
	mode(goal);
	char err[512];
	Loc loc;
	Plan r = {0, -1, -1};
	Graph *g = pass_task(m->main, "vjp", NULL, &loc, err, sizeof err);
	CHECK(g != NULL);
	if (!g)
		return r;
	KProgram *p = cg_lower(g, "vjp", DT_F32, err, sizeof err);
	ir_graph_free(g);
	CHECK(p != NULL);
	if (!p)
		return r;
	cg_plan(p);
	r = (Plan){p->nk, p->live_bytes, p->arena_bytes};
	kir_program_free(p);
	return r;
}

static void
values(Module *m, const char *file, const char *goal, double tol)
{
	static const char *const vjp[] = {"vjp"};
	mode(goal);
	CgOptions o = {.tasks = vjp, .ntasks = 1, .opt_level = 1, .compute_f64 = 1};
	CgCheck c = {tol, 1e-6, 0, 0};
	char err[4096] = "";
	printf("  %s vjp, goal %s, computing in f64: ", file, goal);
	fflush(stdout);
	int nf = cg_check(m, &o, &c, stdout, err, sizeof err);
	if (nf < 0)
		fprintf(stderr, "%s: %s\n", file, err);
	CHECK(nf == 0);
}

int
main(void)
{
	int bounded = 0; // bounded plans (goal or 0.9) strictly between the other two
	for (size_t i = 0; i < sizeof models / sizeof *models; i++) {
		const Model *md = &models[i];
		Module *m = tm_load(md->file, md->defs, ndefs(md->defs));
		Plan none = plan(m, "off"), full = plan(m, "0");
		char goal[32];
		int64_t want = full.live + (none.live - full.live) / 2;
		snprintf(goal, sizeof goal, "%lld", (long long)want);
		Plan bnd = plan(m, goal), frac = plan(m, "0.9"), one = plan(m, "1.0");
		Plan dflt = plan(m, ""), bad = plan(m, "3X");
		printf("%s vjp: live peak / kernels: none %lld / %u, unbounded %lld / %u, goal %s: %lld / "
		       "%u, 0.9: %lld / %u, default: %lld / %u\n",
		       md->file, (long long)none.live, none.nk, (long long)full.live, full.nk, goal,
		       (long long)bnd.live, bnd.nk, (long long)frac.live, frac.nk, (long long)dflt.live,
		       dflt.nk);
		CHECK(full.live <= bnd.live && bnd.live <= none.live);
		CHECK(bnd.live <= want);
		CHECK(bnd.nk <= full.nk);
		CHECK(frac.live <= (int64_t)(0.9 * (double)none.live) || frac.live == full.live);
		CHECK(frac.live >= full.live);
		CHECK(one.live == none.live && one.nk == none.nk);
		CHECK(bad.live == dflt.live && bad.nk == dflt.nk && bad.arena == dflt.arena);
		bounded += full.live < bnd.live && bnd.live < none.live;
		bounded += full.live < frac.live && frac.live < none.live;
		if (md->values) {
			values(m, md->file, goal, md->tol);
			values(m, md->file, "0", md->tol);
			values(m, md->file, "off", md->tol);
		}
		ir_module_free(m);
	}
	// The goal must have stopped recomputation early somewhere: otherwise
	// this test would not tell the bounded mode from the unbounded one.
	CHECK(bounded >= 2);
	unsetenv("FADC_REMAT_MIN");
	unsetenv("FADC_NO_REMAT");
	unsetenv("FADC_MEMORY_GOAL");
	return TU_DONE("test_codegen_remat_zoo");
}
