// tools/fadc/check.c -- `fadc check MODEL.ir`: compiled code against the
// reference interpreter, through cg_check (harness.h), which compiles the
// model to a temporary artifact, runs every task through the runtime and
// through ir_interp on the same inputs, and reports each output's
// normalized error.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "codegen.h"
#include "frontend.h"
#include "harness.h"

const char *const usage_check =
    "usage: fadc check MODEL.ir [-D NAME=VALUE]... [--tasks LIST|all] [--f64] [--rtol R]\n"
    "                  [--seed N] [--max-nodes N] [-v]\n"
    "\n"
    "Compiles the model (to a temporary file), runs every task through the runtime\n"
    "and through the reference interpreter on the same inputs, and reports each\n"
    "output's normalized error max|got - want| / max(|got|, |want|), the measure of\n"
    "compare-npy.  Exits 1 if one is above R (1e-5; 2e-7 with --f64).  --tol is\n"
    "the old name of --rtol.  --max-nodes N bounds the graph after inlining as\n"
    "`fadc --help` says.  On a terminal, stderr shows the task and the stage, and\n"
    "warns before the interpreter runs a task at a size that takes minutes.\n";

int
cmd_check(int argc, char **argv)
{
	const char *model = NULL, *v, *defs[MAXDEF], *tasks[MAXTASK];
	char *list = NULL;
	int ndefs = 0, ntasks = 0, f64 = 0, verbose = 0, rc = 0;
	double tol = 0;
	int tol_set = 0;
	uint64_t seed = 0;
	int64_t max_nodes = 0;
	for (int i = 0; i < argc; i++) {
		const char *s = argv[i];
		if (!strcmp(s, "-h") || !strcmp(s, "--help")) {
			fputs(usage_check, stdout);
			free(list);
			return 0;
		} else if (opt_define(argc, argv, &i, defs, &ndefs, usage_check, &rc)) {
			if (rc)
				break;
		} else if (opt_max_nodes(argc, argv, &i, &max_nodes, usage_check, &rc)) {
			if (rc)
				break;
		} else if (opt_value(argc, argv, &i, "--tasks", &v)) {
			if (!v) {
				rc = usage_error(usage_check, "%s needs a value", "--tasks");
				break;
			}
			free(list);
			list = strdup(v);
			ntasks = 0;
			for (char *t = strtok(list, ","); t && ntasks < MAXTASK; t = strtok(NULL, ","))
				tasks[ntasks++] = t;
		} else if (opt_value(argc, argv, &i, "--rtol", &v) ||
		           opt_value(argc, argv, &i, "--tol", &v)) {
			// One name and one measure with compare-npy (ir_err_value);
			// --tol, its old name, still works.
			char *end;
			if (!v) {
				rc = usage_error(usage_check, "%s needs a value", "--rtol");
				break;
			}
			tol = strtod(v, &end);
			if (!*v || *end || !(tol >= 0) || isinf(tol)) {
				rc = usage_error(usage_check, "--rtol: '%s' is not a non-negative number", v);
				break;
			}
			tol_set = 1;
		} else if (opt_value(argc, argv, &i, "--seed", &v)) {
			if (!v || !parse_seed(v, &seed)) {
				rc = usage_error(usage_check, "--seed needs a non-negative integer%s", "");
				break;
			}
		} else if (!strcmp(s, "--f64"))
			f64 = 1;
		else if (!strcmp(s, "-v"))
			verbose = 1;
		else if (s[0] == '-') {
			rc = usage_error(usage_check, "unknown option '%s'", s);
			break;
		} else if (model) {
			rc = usage_error(usage_check, "more than one model given ('%s')", s);
			break;
		} else
			model = s;
	}
	if (!rc && !model)
		rc = usage_error(usage_check, "no model given%s", "");
	if (rc) {
		free(list);
		return rc;
	}
	FeOptions fo = {.defines = defs, .ndefines = ndefs, .diag = stderr, .max_nodes = max_nodes};
	Module *m = load_model(model, &fo);
	if (!m) {
		free(list);
		return 1;
	}
	CgOptions o = {.tasks = tasks, .ntasks = ntasks, .defines = defs, .ndefines = ndefs,
	               .opt_level = -1, .compute_f64 = f64, .support_lib = installed_support_lib()};
	CgCheck c = {tol_set ? tol : f64 ? 2e-7 : 1e-5, 1e-6, seed, verbose};
	char err[4096] = "";
	// On a terminal: the task and the stage on a status line (cli.c).
	Progress *pg = progress_start();
	o.progress = pg ? progress_note : NULL;
	o.progress_arg = pg;
	int nf = cg_check(m, &o, &c, stdout, err, sizeof err);
	progress_stop(pg);
	if (nf < 0)
		cg_error(model, NULL, err);
	ir_module_free(m);
	free(list);
	return nf != 0;
}
