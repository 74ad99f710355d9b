// tests/fuzz/fuzz_onnx.c -- libFuzzer harness over the ONNX frontend
// (frontend/onnx*.c, docs/ONNX.md).
//
// Any byte string given as a .onnx file must import or give a diagnostic:
// never a crash, a hang, a leak or undefined behaviour (the harness is
// built with ASan and UBSan).  The protobuf decoder is protobuf-c's
// generated code; what is at risk is ours: the graph walk, the folding of
// values known at import, the ops' shape rules, the IR text written and
// the parser reading it.  An imported module must verify and its
// canonical print must parse again; the initializers the import declares
// (`--params model.onnx`, fe_onnx_initializers) are read too.
//
// fe_onnx_import takes a path, so the input goes through a memory file
// (fuzz_file.h), as for the file readers; the model's folder is then
// /proc/self/fd/, so external data resolves (or is refused) there.
//
// Seeds (tests/fuzz/corpus-onnx): the models of tests/onnx/make_models.py;
// tests/run-all.sh adds the torch exports of tests/data/onnx.
#define _GNU_SOURCE // memfd_create
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frontend.h"
#include "fuzz_file.h"
#include "ir.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *path = fuzz_file(data, size);
	FeOptions o = {.diag = NULL};
	Module *m = fe_onnx_import(path, &o);
	if (!m)
		return 0;
	char err[512];
	if (!ir_verify(m->main, err, sizeof err)) {
		fprintf(stderr, "fuzz_onnx: the imported graph does not verify: %s\n", err);
		abort();
	}
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	ir_print_module(f, m);
	fclose(f);
	Module *m2 = fe_parse_string("printed.ir", buf, len, &o);
	if (!m2) {
		fprintf(stderr, "fuzz_onnx: the canonical print does not parse:\n%s\n", buf);
		abort();
	}
	ir_module_free(m2);
	free(buf);
	ir_module_free(m);
	FeTensor *ts;
	int n;
	if (!fe_onnx_initializers(path, &o, &ts, &n))
		fe_onnx_free(ts, n);
	return 0;
}
