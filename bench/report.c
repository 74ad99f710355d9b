// bench/report.c -- reports in the formats of PyTorch's benchmark, so that
// tables from fadc-bench and from functional_autograd_benchmark.py can be
// compared with each other and by PyTorch's compare.py.
#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fileio.h"
#include "report.h"

void
py_repr(double v, char *buf, size_t n)
{
	if (isnan(v)) {
		snprintf(buf, n, "nan");
		return;
	}
	if (isinf(v)) {
		snprintf(buf, n, v > 0 ? "inf" : "-inf");
		return;
	}
	if (v == 0) {
		snprintf(buf, n, signbit(v) ? "-0.0" : "0.0");
		return;
	}
	// The shortest round-tripping digits: d.ddd e±XX with p digits.
	char e[64];
	int p;
	for (p = 1; p <= 17; p++) {
		snprintf(e, sizeof e, "%.*e", p - 1, v);
		if (strtod(e, NULL) == v)
			break;
	}
	char digits[32];
	int nd = 0, neg = e[0] == '-';
	const char *s = e + neg;
	for (; *s && *s != 'e'; s++)
		if (isdigit((unsigned char)*s))
			digits[nd++] = *s;
	while (nd > 1 && digits[nd - 1] == '0')
		nd--;
	digits[nd] = 0;
	int exp = atoi(s + 1);
	char out[64];
	int k = 0;
	if (neg)
		out[k++] = '-';
	if (exp >= -4 && exp < 16) {
		if (exp < 0) {
			out[k++] = '0';
			out[k++] = '.';
			for (int i = 0; i < -exp - 1; i++)
				out[k++] = '0';
			for (int i = 0; i < nd; i++)
				out[k++] = digits[i];
		} else {
			for (int i = 0; i <= exp; i++)
				out[k++] = i < nd ? digits[i] : '0';
			out[k++] = '.';
			if (nd > exp + 1)
				for (int i = exp + 1; i < nd; i++)
					out[k++] = digits[i];
			else
				out[k++] = '0';
		}
		out[k] = 0;
	} else {
		out[k++] = digits[0];
		if (nd > 1) {
			out[k++] = '.';
			for (int i = 1; i < nd; i++)
				out[k++] = digits[i];
		}
		k += snprintf(out + k, sizeof out - (size_t)k, "e%c%02d", exp < 0 ? '-' : '+', abs(exp));
	}
	snprintf(buf, n, "%s", out);
}

void
table_init(Table *t)
{
	memset(t, 0, sizeof *t);
}

void
table_free(Table *t)
{
	free(t->cell);
	memset(t, 0, sizeof *t);
}

int
table_add(Table *t, const char *model, const char *task, double mean, double var)
{
	if (t->n == t->cap) {
		int cap = t->cap ? 2 * t->cap : 16;
		Cell *c = realloc(t->cell, sizeof *c * (size_t)cap);
		if (!c)
			return -1;
		t->cell = c;
		t->cap = cap;
	}
	Cell *c = &t->cell[t->n++];
	snprintf(c->model, sizeof c->model, "%s", model);
	snprintf(c->task, sizeof c->task, "%s", task);
	c->mean = mean;
	c->var = var;
	c->peak = -1;
	return 0;
}

const Cell *
table_find(const Table *t, const char *model, const char *task)
{
	for (int i = 0; i < t->n; i++)
		if (!strcmp(t->cell[i].model, model) && !strcmp(t->cell[i].task, task))
			return &t->cell[i];
	return NULL;
}

static void
row(FILE *f, const char *const *fields, int n)
{
	fputs("| ", f);
	for (int i = 0; i < n; i++)
		fprintf(f, "%s%s", i ? " | " : "", fields[i]);
	fputs(" |\n", f);
}

void
table_write_markdown_memory(FILE *f, const Table *t)
{
	static const char *const head[] = {"model", "task", "mean", "var", "peak memory"};
	static const char *const sep[] = {"--", "--", "--", "--", "--"};
	row(f, head, 5);
	row(f, sep, 5);
	for (int i = 0; i < t->n; i++) {
		char m[40], v[40], p[40];
		py_repr(t->cell[i].mean, m, sizeof m);
		py_repr(t->cell[i].var, v, sizeof v);
		// Bytes below a KiB, else KiB / MiB / GiB with one decimal (1024s).
		double b = (double)t->cell[i].peak;
		if (t->cell[i].peak < 0)
			snprintf(p, sizeof p, "n/a");
		else if (b < 1024)
			snprintf(p, sizeof p, "%.0f B", b);
		else if (b < 1024.0 * 1024)
			snprintf(p, sizeof p, "%.1f KiB", b / 1024);
		else if (b < 1024.0 * 1024 * 1024)
			snprintf(p, sizeof p, "%.1f MiB", b / (1024.0 * 1024));
		else
			snprintf(p, sizeof p, "%.1f GiB", b / (1024.0 * 1024 * 1024));
		const char *fields[] = {t->cell[i].model, t->cell[i].task, m, v, p};
		row(f, fields, 5);
	}
}

void
table_write_markdown(FILE *f, const Table *t)
{
	static const char *const head[] = {"model", "task", "mean", "var"};
	static const char *const sep[] = {"--", "--", "--", "--"};
	row(f, head, 4);
	row(f, sep, 4);
	for (int i = 0; i < t->n; i++) {
		char m[40], v[40];
		py_repr(t->cell[i].mean, m, sizeof m);
		py_repr(t->cell[i].var, v, sizeof v);
		const char *fields[] = {t->cell[i].model, t->cell[i].task, m, v};
		row(f, fields, 4);
	}
}

// Python's float(): decimal forms, inf, nan (any case, optional sign).
static int
parse_pyfloat(const char *s, double *v)
{
	char *end;
	while (isspace((unsigned char)*s))
		s++;
	if (!*s)
		return 0;
	*v = strtod(s, &end);
	while (isspace((unsigned char)*end))
		end++;
	return *end == 0;
}

int
table_read_markdown(const char *path, Table *t, char *err, size_t errlen)
{
	// fileio refuses a FIFO or a directory by name (no hang, no empty table).
	FILE *f = fio_fopen_read(path, err, errlen);
	if (!f)
		return -1;
	char line[4096];
	int lineno = 0, ok = 0;
	table_init(t);
	while (fgets(line, sizeof line, f)) {
		lineno++;
		size_t len = strlen(line);
		while (len && (line[len - 1] == '\n' || line[len - 1] == '\r' || line[len - 1] == ' '))
			line[--len] = 0;
		if (lineno <= 2)
			continue; // header and separator
		if (!len)
			continue;
		char *field[8];
		int nf = 0;
		for (char *p = line; p;) {
			char *bar = strchr(p, '|');
			if (bar)
				*bar = 0;
			while (isspace((unsigned char)*p))
				p++;
			char *e = p + strlen(p);
			while (e > p && isspace((unsigned char)e[-1]))
				*--e = 0;
			if (*p) {
				if (nf == 8)
					break;
				field[nf++] = p;
			}
			p = bar ? bar + 1 : NULL;
		}
		double mean, var;
		if (nf != 4) {
			snprintf(err, errlen, "%s:%d: expected 4 fields (model, task, mean, var), found %d",
			         path, lineno, nf);
			goto done;
		}
		if (!parse_pyfloat(field[2], &mean) || !parse_pyfloat(field[3], &var)) {
			snprintf(err, errlen, "%s:%d: mean and var must be numbers ('%s', '%s')", path,
			         lineno, field[2], field[3]);
			goto done;
		}
		if (table_add(t, field[0], field[1], mean, var)) {
			snprintf(err, errlen, "%s: out of memory", path);
			goto done;
		}
	}
	if (lineno < 2) {
		snprintf(err, errlen, "%s: not a results table (no header)", path);
		goto done;
	}
	ok = 1;
done:
	fclose(f);
	if (!ok)
		table_free(t);
	return ok ? 0 : -1;
}

static void
fmt_opt(char *buf, size_t n, const double *v)
{
	if (v)
		py_repr(*v, buf, n);
	else
		snprintf(buf, n, "None");
}

void
table_write_compare(FILE *f, const Table *before, const Table *after)
{
	static const char *const head[] = {"model", "task", "speedup", "mean (before)",
	                                   "var (before)", "mean (after)", "var (after)"};
	static const char *const sep[] = {"--", "--", "--", "--", "--", "--", "--"};
	row(f, head, 7);
	row(f, sep, 7);
	// Rows grouped by model in the order models appear in `before`; within
	// a model, before's tasks, then tasks only in after.
	for (int i = 0; i < before->n; i++) {
		const Cell *b = &before->cell[i];
		int first = 1;
		for (int j = 0; j < i; j++)
			first &= strcmp(before->cell[j].model, b->model) != 0;
		if (!first)
			continue;
		for (int pass = 0; pass < 2; pass++) {
			const Table *src = pass ? after : before;
			for (int k = 0; k < src->n; k++) {
				const Cell *c = &src->cell[k];
				if (strcmp(c->model, b->model))
					continue;
				const Cell *bc = table_find(before, c->model, c->task);
				const Cell *ac = table_find(after, c->model, c->task);
				if (pass && bc)
					continue;
				double sp = bc && ac ? bc->mean / ac->mean : 0;
				char s0[40], s1[40], s2[40], s3[40], s4[40];
				fmt_opt(s0, sizeof s0, bc && ac ? &sp : NULL);
				fmt_opt(s1, sizeof s1, bc ? &bc->mean : NULL);
				fmt_opt(s2, sizeof s2, bc ? &bc->var : NULL);
				fmt_opt(s3, sizeof s3, ac ? &ac->mean : NULL);
				fmt_opt(s4, sizeof s4, ac ? &ac->var : NULL);
				const char *fields[] = {c->model, c->task, s0, s1, s2, s3, s4};
				row(f, fields, 7);
			}
		}
	}
	// Models only in after.
	for (int k = 0; k < after->n; k++) {
		const Cell *c = &after->cell[k];
		int inbefore = 0;
		for (int j = 0; j < before->n; j++)
			inbefore |= !strcmp(before->cell[j].model, c->model);
		if (inbefore)
			continue;
		char s3[40], s4[40];
		py_repr(c->mean, s3, sizeof s3);
		py_repr(c->var, s4, sizeof s4);
		const char *fields[] = {c->model, c->task, "None", "None", "None", s3, s4};
		row(f, fields, 7);
	}
}

void
sample_stats(const double *x, int n, double *mean, double *var)
{
	if (n == 0) {
		*mean = *var = NAN;
		return;
	}
	// float32 samples, float32 results (torch.tensor(list).mean()/.var()).
	double s = 0;
	for (int i = 0; i < n; i++)
		s += (float)x[i];
	float m = (float)(s / n);
	*mean = m;
	if (n < 2) {
		*var = NAN;
		return;
	}
	double ss = 0;
	for (int i = 0; i < n; i++) {
		double d = (double)(float)x[i] - (double)m;
		ss += d * d;
	}
	*var = (float)(ss / (n - 1));
}
