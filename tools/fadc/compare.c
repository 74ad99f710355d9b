// tools/fadc/compare.c -- `fadc compare-npy A B [--rtol R]`.
//
// Two .npy files, or the .npy files of two folders by name, compared with
// the measure every check of fadc uses: ir_err_value's normalized error
// max|a - b| / max(|a|, |b|) (ir.h), NaNs at the same places.
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"

const char *const usage_compare =
    "usage: fadc compare-npy A B [--rtol R]\n"
    "\n"
    "Compares two .npy files, or every .npy file of folder A with the one of the\n"
    "same name in folder B (both must hold the same names).  Each pair must have\n"
    "the same dtype and shape, and a normalized error max|a - b| / max(|a|, |b|)\n"
    "of at most R (1e-5); NaNs must sit at the same places.  Prints one line per\n"
    "file and exits 1 on a difference.\n";

// Normalized error max|a - b| / max(|a|, |b|) over the elements (equal
// infinities and NaNs at the same places count as equal), or -1 when they
// cannot be compared (a message in why).
static double
npy_error(const tio_tensor *a, const tio_tensor *b, char *why, size_t n)
{
	int same = a->dtype == b->dtype && a->rank == b->rank;
	for (int k = 0; same && k < a->rank; k++)
		same = a->dim[k] == b->dim[k];
	if (!same) {
		char ta[256], tb[256];
		type_str(a->dtype, a->rank, a->dim, ta, sizeof ta);
		type_str(b->dtype, b->rank, b->dim, tb, sizeof tb);
		snprintf(why, n, "%s against %s", ta, tb);
		return -1;
	}
	IrErr e = {0};
	int64_t cnt = tio_numel(a);
	for (int64_t i = 0; i < cnt; i++)
		ir_err_add(&e, elem(a, i), elem(b, i));
	if (e.bad) {
		int64_t i = e.bad - 1;
		snprintf(why, n, "element %" PRId64 " is %g against %g", i, elem(a, i), elem(b, i));
		return -1;
	}
	return ir_err_value(&e);
}

// Compares one pair; 0 equal within rtol, 1 not, after a line.
static int
compare_pair(const char *pa, const char *pb, const char *label, double rtol)
{
	tio_tensor a, b;
	char err[600];
	if (tio_npy_read(pa, &a, err, sizeof err)) {
		path_error(pa, err);
		return 1;
	}
	if (tio_npy_read(pb, &b, err, sizeof err)) {
		path_error(pb, err);
		tio_free(&a);
		return 1;
	}
	char why[600];
	double e = npy_error(&a, &b, why, sizeof why);
	int bad = !(e >= 0 && e <= rtol);
	if (e < 0)
		printf("%s: DIFFERENT: %s\n", label, why);
	else
		printf("%s: normalized error %.3g%s\n", label, e, bad ? " ABOVE TOLERANCE" : "");
	tio_free(&a);
	tio_free(&b);
	return bad;
}

static int
cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

// The .npy files of a folder, sorted, in a malloc'ed array of *n names;
// NULL with *n = -1 if the folder cannot be read or memory runs out.
static char **
list_npy(const char *dir, int *n)
{
	DIR *d = opendir(dir);
	char **v = NULL;
	int cap = 0, ok = d != NULL;
	*n = 0;
	for (struct dirent *e; ok && (e = readdir(d));) {
		if (!has_suffix(e->d_name, ".npy"))
			continue;
		if (*n == cap) {
			cap = cap ? 2 * cap : 16;
			char **nv = realloc(v, (size_t)cap * sizeof *v);
			ok = nv != NULL;
			v = nv ? nv : v;
		}
		if (ok && !(v[*n] = strdup(e->d_name)))
			ok = 0;
		*n += ok;
	}
	if (d)
		closedir(d);
	if (!ok) {
		for (int i = 0; i < *n; i++)
			free(v[i]);
		free(v);
		*n = -1;
		return NULL;
	}
	if (*n)
		qsort(v, (size_t)*n, sizeof *v, cmp_str);
	return v;
}

int
cmd_compare(int argc, char **argv)
{
	const char *p[2] = {NULL, NULL}, *v;
	double rtol = 1e-5;
	int np = 0;
	for (int i = 0; i < argc; i++) {
		const char *s = argv[i];
		if (!strcmp(s, "-h") || !strcmp(s, "--help")) {
			fputs(usage_compare, stdout);
			return 0;
		} else if (opt_value(argc, argv, &i, "--rtol", &v)) {
			char *end;
			if (!v)
				return usage_error(usage_compare, "%s needs a value", "--rtol");
			rtol = strtod(v, &end);
			if (!*v || *end || !(rtol >= 0) || isinf(rtol))
				return usage_error(usage_compare, "--rtol: '%s' is not a non-negative number", v);
		} else if (s[0] == '-')
			return usage_error(usage_compare, "unknown option '%s'", s);
		else if (np == 2)
			return usage_error(usage_compare, "more than two files given ('%s')", s);
		else
			p[np++] = s;
	}
	if (np != 2)
		return usage_error(usage_compare, "give two .npy files or two folders%s", "");
	for (int k = 0; k < 2; k++) {
		struct stat st;
		if (stat(p[k], &st) != 0) {
			char e[256];
			snprintf(e, sizeof e, "cannot open: %s", strerror(errno));
			path_error(p[k], e);
			return 1;
		}
	}
	if (is_dir(p[0]) != is_dir(p[1])) {
		fprintf(stderr, "fadc: error: compare-npy: '%s' is a %s and '%s' a %s (give two files or "
		        "two folders)\n", p[0], is_dir(p[0]) ? "folder" : "file", p[1],
		        is_dir(p[1]) ? "folder" : "file");
		return 1;
	}
	if (!is_dir(p[0]))
		return compare_pair(p[0], p[1], p[1], rtol);
	int na, nb, bad = 0;
	char **la = list_npy(p[0], &na), **lb = list_npy(p[1], &nb);
	if (na < 0 || nb < 0) {
		fprintf(stderr, "fadc: error: compare-npy: cannot list '%s': %s\n", p[na < 0 ? 0 : 1],
		        strerror(errno));
		for (int i = 0; i < na; i++)
			free(la[i]);
		for (int i = 0; i < nb; i++)
			free(lb[i]);
		free(la), free(lb);
		return 1;
	}
	for (int i = 0, j = 0; i < na || j < nb;) {
		int c = i == na ? 1 : j == nb ? -1 : strcmp(la[i], lb[j]);
		if (c) {
			printf("%s: only in %s\n", c < 0 ? la[i] : lb[j], c < 0 ? p[0] : p[1]);
			bad = 1;
			if (c < 0)
				i++;
			else
				j++;
			continue;
		}
		char fa[8192], fb[8192];
		snprintf(fa, sizeof fa, "%s/%s", p[0], la[i]);
		snprintf(fb, sizeof fb, "%s/%s", p[1], lb[j]);
		bad |= compare_pair(fa, fb, la[i], rtol);
		i++, j++;
	}
	if (na + nb == 0) {
		fprintf(stderr, "fadc: error: compare-npy: no .npy files in '%s' or '%s'\n", p[0], p[1]);
		bad = 1;
	}
	for (int i = 0; i < na; i++)
		free(la[i]);
	for (int i = 0; i < nb; i++)
		free(lb[i]);
	free(la), free(lb);
	return bad;
}
