// tests/unit/test_docs.c -- docs/IR.md's op reference lists every op of the
// table and nothing else: each row of ops.def appears as `name` in the first
// column of a table row, and each op named there exists.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir.h"

int
main(void)
{
	const char *root = getenv("FADC_SOURCE_DIR");
	char path[4096];
	snprintf(path, sizeof path, "%s/docs/IR.md", root ? root : ".");
	FILE *f = fopen(path, "r");
	if (!f) {
		fprintf(stderr, "test_docs: cannot open %s\n", path);
		return 1;
	}
	static char seen[OP_COUNT];
	char line[4096];
	int in_ref = 0, fail = 0, rows = 0;
	while (fgets(line, sizeof line, f)) {
		if (!strncmp(line, "## ", 3))
			in_ref = !strncmp(line, "## Op reference", 15);
		if (!in_ref || strncmp(line, "| `", 3))
			continue;
		// First column: one or more `name` separated by spaces.
		char *end = strchr(line + 1, '|');
		if (!end)
			continue;
		*end = 0;
		rows++;
		for (char *p = strchr(line, '`'); p; p = strchr(p, '`')) {
			char *q = strchr(p + 1, '`');
			if (!q)
				break;
			*q = 0;
			int op = ir_op_lookup(p + 1);
			if (!op) {
				fprintf(stderr, "test_docs: docs/IR.md lists `%s`, which is not an op\n", p + 1);
				fail = 1;
			} else
				seen[op] = 1;
			p = q + 1;
		}
	}
	fclose(f);
	for (int op = 1; op < OP_COUNT; op++)
		if (!seen[op]) {
			fprintf(stderr, "test_docs: op '%s' is missing from docs/IR.md's op reference\n",
			        ir_op(op)->name);
			fail = 1;
		}
	if (!fail)
		printf("test_docs: %d ops documented in %d rows\n", OP_COUNT - 1, rows);
	return fail;
}
