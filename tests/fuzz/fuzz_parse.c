// tests/fuzz/fuzz_parse.c -- libFuzzer harness over the frontend.
//
// Any input must give a module or a diagnostic: never a crash, a hang, a
// leak or undefined behaviour (the harness is built with ASan and UBSan).
// A parsed module is also printed and parsed again, and must verify: the
// canonical printer's output is valid input.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frontend.h"
#include "ir.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	// -D options from a leading "D:" line exercise size overrides too.
	FeOptions o = {0};
	const char *defs[1];
	if (size > 2 && data[0] == 'D' && data[1] == ':') {
		const uint8_t *nl = memchr(data, '\n', size);
		if (nl && nl - data < 32) {
			static char def[32];
			memcpy(def, data + 2, (size_t)(nl - data - 2));
			def[nl - data - 2] = 0;
			defs[0] = def;
			o.defines = defs;
			o.ndefines = 1;
			size -= (size_t)(nl - data + 1);
			data = nl + 1;
		}
	}
	Module *m = fe_parse_string("fuzz.ir", (const char *)data, size, &o);
	if (!m)
		return 0;
	char err[512];
	if (!ir_verify(m->main, err, sizeof err)) {
		fprintf(stderr, "graph does not verify: %s\n", err);
		abort();
	}
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	ir_print_module(f, m);
	fclose(f);
	Module *m2 = fe_parse_string("printed.ir", buf, len, &o);
	if (!m2) {
		fprintf(stderr, "the canonical print does not parse:\n%s\n", buf);
		abort();
	}
	ir_module_free(m2);
	free(buf);
	ir_module_free(m);
	return 0;
}
