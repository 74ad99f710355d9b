// tests/unit/test_codegen_zoo.c -- the big models compiled vs the
// interpreter at their reduced sizes (bench/bench.yaml's `reduced:` lists):
// resnet18, wav2letter, fcn_resnet, detr (its Hungarian matcher a host
// kernel), deepspeech (its LSTMs and CTC loss scans), tasks forward vjp jvp
// vhp hvp, computing in f64 (--f64: inputs and outputs f32), normalized
// error <= 2e-7 per output (cg_check): this isolates the kernel IR from f32
// rounding, which train-mode batch norm's backward amplifies (resnet18's
// vjp/vhp/hvp computing in f32: up to 6.6e-5 against the f64 interpreter,
// 5.4e-8 computing in f64).  deepspeech also runs as a float64 model (every
// f32 of its source made f64), where nothing is rounded to f32 and the
// compiled code must equal the interpreter to 1e-12 (measured 1.5e-14:
// only the order of long sums differs), and computing in f32 within 5e-5
// (measured 1.0e-5: batch norm over 4 hidden units and CTC's logsumexp).
// Labelled `slow` (the name contains "zoo"): the float64 interpreter runs
// whole models.
#include <stdlib.h>
#include <string.h>

#include "codegen.h"
#include "frontend.h"
#include "harness.h"
#include "testutil.h"

static const char *const all_tasks[] = {"forward", "vjp", "jvp", "vhp", "hvp"};

// ntasks: the first ntasks of all_tasks (second-order tasks of the big
// models are checked for wav2letter only, to keep CI within its time: the
// float64 interpreter runs them slowly; fadc-bench's consistency checks
// cover the compiled second-order tasks at every size).
// How a model is checked: computing in f64 (the default), computing in
// f32, or as a float64 model (its source's f32 made f64).
enum { F64_COMPUTE, F32_COMPUTE, F64_MODEL };

static void
check_model(const char *file, const char *const *defs, int ndefs, int ntasks, int mode,
            double tol)
{
	const char *root = getenv("FADC_SOURCE_DIR");
	char path[4096];
	snprintf(path, sizeof path, "%s/models/%s", root ? root : ".", file);
	FeOptions fo = {.diag = stderr, .defines = defs, .ndefines = ndefs};
	Module *m = NULL;
	if (mode == F64_MODEL) {
		FILE *f = fopen(path, "rb");
		CHECK(f != NULL);
		if (!f)
			return;
		static char text[1 << 20];
		size_t n = fread(text, 1, sizeof text - 1, f);
		fclose(f);
		text[n] = 0;
		for (char *q = strstr(text, "f32"); q; q = strstr(q + 3, "f32"))
			q[1] = '6', q[2] = '4';
		m = fe_parse_string(path, text, n, &fo);
	} else
		m = fe_parse_file(path, &fo);
	CHECK(m != NULL);
	if (!m)
		return;
	CgOptions o = {.tasks = all_tasks, .ntasks = ntasks, .opt_level = 1,
	               .compute_f64 = mode == F64_COMPUTE};
	CgCheck c = {tol, 1e-6, 0, 0};
	char err[4096] = "";
	static const char *const how[] = {"computing in f64", "computing in f32", "as a float64 model"};
	printf("%s (reduced), %s: ", file, how[mode]);
	fflush(stdout);
	int nf = cg_check(m, &o, &c, stdout, err, sizeof err);
	if (nf < 0)
		fprintf(stderr, "%s: %s\n", file, err);
	CHECK(nf == 0);
	ir_module_free(m);
}

int
main(void)
{
	static const char *const resnet[] = {"N=2", "H=32", "C=4", "NCLS=10"};
	static const char *const fcn[] = {"N=2", "H=32", "C=4"};
	static const char *const detr[] = {"IMG_H=64", "IMG_W=96", "WIDTH=4", "D=16", "NH=2",
	                                   "FF=32",    "Q=6",      "NCLS=10", "T0=3", "T1=2"};
	static const char *const w2l[] = {"N=2", "LIN=1000", "C=8", "CW=16"};
	static const char *const ds[] = {"N=3", "FREQ=9", "FRAMES=16", "LEN_LO=8",
	                                 "LEN_SPAN=8", "C=2", "HID=4", "S=2"};
	check_model("wav2letter.ir", w2l, 4, 5, F64_COMPUTE, 2e-7);
	check_model("resnet18.ir", resnet, 4, 3, F64_COMPUTE, 2e-7);
	check_model("fcn_resnet.ir", fcn, 3, 2, F64_COMPUTE, 2e-7);
	// detr: 5e-7 since batch norm's mean gradient lost its fourth sum
	// (passes/simplify.c sum_linear): grad.backbone.bn1.bias then differs by
	// 2.7e-7 (5.7e-8 before), f32 inputs' rounding amplified by batch norm; as
	// a float64 model the compiled vjp equals the interpreter to 1.2e-12.
	check_model("detr.ir", detr, 10, 2, F64_COMPUTE, 5e-7);
	check_model("deepspeech.ir", ds, 8, 2, F64_COMPUTE, 2e-7);
	check_model("deepspeech.ir", ds, 8, 2, F64_MODEL, 1e-12);
	check_model("deepspeech.ir", ds, 8, 2, F32_COMPUTE, 5e-5);
	return TU_DONE("test_codegen_zoo");
}
