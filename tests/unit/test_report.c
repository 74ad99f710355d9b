// tests/unit/test_report.c -- the benchmark's report formats against
// PyTorch's own files (shared reference: pytorch-tables.md, written by
// functional_autograd_benchmark.py on an H200 and on a CPU) and Python's
// repr of floats.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "report.h"
#include "testutil.h"

static void
check_repr(double v, const char *want)
{
	char buf[64];
	py_repr(v, buf, sizeof buf);
	tu_ncheck++;
	if (strcmp(buf, want)) {
		tu_nfail++;
		fprintf(stderr, "py_repr(%.17g): got %s want %s\n", v, buf, want);
	}
}

// The default-flags run of pytorch-tables.md (ppl_simple_reg on an H200),
// autograd.functional rows and functorch rows as PyTorch wrote them.
static const char golden[] =
    "| model | task | mean | var |\n"
    "| -- | -- | -- | -- |\n"
    "| ppl_simple_reg | vjp | 0.0007767200586386025 | 4.7599844066326114e-08 |\n"
    "| ppl_simple_reg | functorch vjp | 0.0015285492409020662 | 7.900264620275266e-08 |\n"
    "| ppl_simple_reg | vhp | 0.0009823322761803865 | 6.845409217248744e-08 |\n"
    "| ppl_simple_reg | jvp | 0.0010355233680456877 | 2.571240109716655e-08 |\n"
    "| ppl_simple_reg | functorch jvp | 0.0026814937591552734 | 4.0483843832817e-08 |\n"
    "| ppl_simple_reg | hessian | 0.0044592381455004215 | 4.121654626487725e-07 |\n";

static const char zero_iters[] = "| model | task | mean | var |\n"
                                 "| -- | -- | -- | -- |\n"
                                 "| ppl_simple_reg | vjp | nan | nan |\n"
                                 "| ppl_simple_reg | functorch vjp | nan | nan |\n";

static char *
slurp(FILE *f)
{
	fflush(f);
	rewind(f);
	static char buf[8192];
	size_t n = fread(buf, 1, sizeof buf - 1, f);
	buf[n] = 0;
	return buf;
}

int
main(void)
{
	// Python's repr, checked against CPython by hand.
	check_repr(0.0007767200586386025, "0.0007767200586386025");
	check_repr(4.7599844066326114e-08, "4.7599844066326114e-08");
	check_repr(6.329874846500161e-09, "6.329874846500161e-09");
	check_repr(1e-05, "1e-05");
	check_repr(0.0001, "0.0001");
	check_repr(1.0, "1.0");
	check_repr(100.0, "100.0");
	check_repr(1e16, "1e+16");
	check_repr(1234567890123456.0, "1234567890123456.0");
	check_repr(0.1, "0.1");
	check_repr(-2.5e-7, "-2.5e-07");
	check_repr(NAN, "nan");
	check_repr(INFINITY, "inf");
	check_repr(-0.0, "-0.0");
	check_repr(5e-324, "5e-324");
	check_repr(1.7976931348623157e308, "1.7976931348623157e+308");

	// Writing the golden table from its values gives the same bytes.
	Table t;
	table_init(&t);
	table_add(&t, "ppl_simple_reg", "vjp", 0.0007767200586386025, 4.7599844066326114e-08);
	table_add(&t, "ppl_simple_reg", "functorch vjp", 0.0015285492409020662, 7.900264620275266e-08);
	table_add(&t, "ppl_simple_reg", "vhp", 0.0009823322761803865, 6.845409217248744e-08);
	table_add(&t, "ppl_simple_reg", "jvp", 0.0010355233680456877, 2.571240109716655e-08);
	table_add(&t, "ppl_simple_reg", "functorch jvp", 0.0026814937591552734, 4.0483843832817e-08);
	table_add(&t, "ppl_simple_reg", "hessian", 0.0044592381455004215, 4.121654626487725e-07);
	FILE *f = tmpfile();
	table_write_markdown(f, &t);
	CHECK(!strcmp(slurp(f), golden));
	fclose(f);

	// --num-iters 0: nan mean and var (the seed's smoke test output).
	double m, v;
	sample_stats(NULL, 0, &m, &v);
	CHECK(isnan(m) && isnan(v));
	Table z;
	table_init(&z);
	table_add(&z, "ppl_simple_reg", "vjp", m, v);
	table_add(&z, "ppl_simple_reg", "functorch vjp", m, v);
	f = tmpfile();
	table_write_markdown(f, &z);
	CHECK(!strcmp(slurp(f), zero_iters));
	fclose(f);
	// One sample: var nan; the mean is the sample as a float32.
	double one = 0.00038790702819824219;
	sample_stats(&one, 1, &m, &v);
	CHECK(m == (double)(float)one && isnan(v));
	// Unbiased variance of {1, 2, 3, 4} is 5/3 (as float32).
	double four[] = {1, 2, 3, 4};
	sample_stats(four, 4, &m, &v);
	CHECK(m == 2.5 && v == (double)(float)(5.0 / 3));

	// Reading PyTorch's file back (from_markdown_table's rules).
	char path[] = "/tmp/fadc-report-XXXXXX";
	int fd = mkstemp(path);
	CHECK(fd >= 0);
	f = fdopen(fd, "w");
	fputs(golden, f);
	fclose(f);
	Table r;
	char err[256];
	CHECK(table_read_markdown(path, &r, err, sizeof err) == 0);
	CHECK(r.n == 6);
	const Cell *c = table_find(&r, "ppl_simple_reg", "functorch jvp");
	CHECK(c && c->mean == 0.0026814937591552734 && c->var == 4.0483843832817e-08);
	// A malformed row is an error naming the line.
	f = fopen(path, "a");
	fputs("| ppl_simple_reg | vjp | 1.0 |\n", f);
	fclose(f);
	Table bad;
	CHECK(table_read_markdown(path, &bad, err, sizeof err) == -1);
	CHECK(strstr(err, ":9: expected 4 fields") != NULL);
	unlink(path);
	// A table that is not a regular file is refused by name before any
	// read (fileio): a folder gave an empty table, a FIFO blocked.
	CHECK(table_read_markdown("/tmp", &bad, err, sizeof err) == -1);
	CHECK(!strcmp(err, "/tmp: is a directory, not a regular file"));
	CHECK(table_read_markdown(path, &bad, err, sizeof err) == -1);
	CHECK(strstr(err, ": cannot open: No such file or directory") != NULL);

	// compare.py's table: speedup = before / after; rows missing on a side
	// print None; after-only rows join their model's group.
	Table before, after;
	table_init(&before);
	table_init(&after);
	table_add(&before, "m1", "vjp", 2.0, 0.5);
	table_add(&before, "m1", "jvp", 1.0, 0.25);
	table_add(&before, "m2", "vjp", 3.0, 0.0);
	table_add(&after, "m1", "vjp", 0.5, 0.125);
	table_add(&after, "m1", "hvp", 4.0, 1.0);
	table_add(&after, "m3", "vjp", 1.0, 0.0);
	f = tmpfile();
	table_write_compare(f, &before, &after);
	const char *want =
	    "| model | task | speedup | mean (before) | var (before) | mean (after) | var (after) |\n"
	    "| -- | -- | -- | -- | -- | -- | -- |\n"
	    "| m1 | vjp | 4.0 | 2.0 | 0.5 | 0.5 | 0.125 |\n"
	    "| m1 | jvp | None | 1.0 | 0.25 | None | None |\n"
	    "| m1 | hvp | None | None | None | 4.0 | 1.0 |\n"
	    "| m2 | vjp | None | 3.0 | 0.0 | None | None |\n"
	    "| m3 | vjp | None | None | None | 1.0 | 0.0 |\n";
	char *got = slurp(f);
	CHECK(!strcmp(got, want));
	if (strcmp(got, want))
		fprintf(stderr, "got:\n%swant:\n%s", got, want);
	fclose(f);
	table_free(&t), table_free(&z), table_free(&r), table_free(&before), table_free(&after);
	return TU_DONE("test_report");
}
