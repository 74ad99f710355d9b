// bench/report.h -- the benchmark's reports: the markdown table of PyTorch's
// functional_autograd_benchmark (utils.to_markdown_table / from_markdown_
// table), its compare.py table, and Python's float repr, which both print.
#ifndef FADC_REPORT_H
#define FADC_REPORT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

// Python's repr(float): the shortest digits that read back to the same
// double, fixed notation for decimal exponents -4 .. 15 ("0.0001", "1.0",
// "1234.5"), else exponent notation ("1e-05", "6.329874846500161e-09",
// "1e+16"); "nan", "inf", "-inf", "-0.0".
void py_repr(double v, char *buf, size_t n);

typedef struct Cell {
	char model[64];
	char task[64];
	double mean, var;
	int64_t peak; // peak memory in bytes (--memory), -1: none
} Cell;

typedef struct Table {
	Cell *cell; // in insertion order
	int n, cap;
} Table;

void table_init(Table *t);
void table_free(Table *t);
int table_add(Table *t, const char *model, const char *task, double mean, double var); // -1 OOM
const Cell *table_find(const Table *t, const char *model, const char *task);
// Writes the table exactly as to_markdown_table: "| model | task | mean | var |",
// "| -- | -- | -- | -- |", then one row per cell.
void table_write_markdown(FILE *f, const Table *t);
// The same with a fifth column, "peak memory" (fadc-bench --memory): each
// cell's peak as "1012 B", "3.4 KiB", "812.5 MiB" (1024s, one decimal),
// "n/a" where it has none.  Not a
// table the seed's tools or table_read_markdown read.
void table_write_markdown_memory(FILE *f, const Table *t);
// Reads a table written by either program (from_markdown_table's rules:
// the first two lines skipped, fields split on '|', empty fields dropped,
// exactly 4 left).  Returns 0, or -1 with "file:line: message" in err.
int table_read_markdown(const char *path, Table *t, char *err, size_t errlen);
// compare.py's table of before vs after (speedup = before / after).
void table_write_compare(FILE *f, const Table *before, const Table *after);

// Mean and unbiased variance as the seed computes them: over a float32
// tensor of the samples (torch.tensor(list) is float32), so the values
// reported are float32 values: nan for no sample, var nan for one.
void sample_stats(const double *x, int n, double *mean, double *var);

#endif
