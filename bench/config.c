// bench/config.c -- bench/bench.yaml, read with libyaml's document API.
//
// The YAML features of torchbench.yaml are supported: comments, block and
// flow collections, anchors and aliases (an alias to a list used as an item
// of a list is flattened into it, as torchbench's loader does), empty
// lists.  Every mapping is checked against its schema: an unknown key, a
// wrong type, an unknown task or model name is an error naming the file,
// line and column of the offending node; nothing runs on a bad
// configuration.  libyaml's document API keeps the last of two equal keys
// and stops after the first document without a word: both are checked
// here, since either hides a typo (a second `rtol:` that wins, a model
// added after a stray `---` that never runs).
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "config.h"
#include "fileio.h"
#include "ir.h"

typedef struct Ld {
	const char *path;
	yaml_document_t doc;
	char *err;
	size_t errlen;
	jmp_buf jmp;
	long visits; // nodes strings() has visited (aliases can revisit one many times)
} Ld;

static _Noreturn void fail(Ld *l, const yaml_node_t *n, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static _Noreturn void
fail(Ld *l, const yaml_node_t *n, const char *fmt, ...)
{
	int k = snprintf(l->err, l->errlen, "%s:%zu:%zu: error: ", l->path,
	                 n ? n->start_mark.line + 1 : 1, n ? n->start_mark.column + 1 : 1);
	va_list ap;
	va_start(ap, fmt);
	if (k >= 0 && (size_t)k < l->errlen)
		vsnprintf(l->err + k, l->errlen - (size_t)k, fmt, ap);
	va_end(ap);
	longjmp(l->jmp, 1);
}

static yaml_node_t *
node(Ld *l, int id)
{
	return yaml_document_get_node(&l->doc, id);
}

static const char *
scalar(Ld *l, yaml_node_t *n, const char *what)
{
	if (n->type != YAML_SCALAR_NODE)
		fail(l, n, "%s must be a string", what);
	return (const char *)n->data.scalar.value;
}

static double
number(Ld *l, yaml_node_t *n, const char *what)
{
	const char *s = scalar(l, n, what);
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	// A tolerance of 0, inf or nan makes every check fail or none: either
	// is a typo, not a setting (strtod reads "inf" and "nan").
	if (!*s || *end || errno || !isfinite(v) || !(v > 0))
		fail(l, n, "%s must be a positive finite number, got '%s'", what, s);
	return v;
}

static void
copy(Ld *l, yaml_node_t *n, char *dst, size_t cap, const char *what)
{
	const char *s = scalar(l, n, what);
	if (strlen(s) >= cap)
		fail(l, n, "%s is too long (at most %zu characters)", what, cap - 1);
	memcpy(dst, s, strlen(s) + 1);
}

// Collects the strings of a sequence, flattening nested sequences (an alias
// to a list used as an item).  A null item (an empty anchor) is skipped.
static void
strings(Ld *l, yaml_node_t *n, char *out, size_t width, int max, int *count, const char *what,
        int depth)
{
	if (depth > 16)
		fail(l, n, "%s nests too deeply", what);
	// The depth limit does not bound the work: a list of four aliases to
	// the previous anchor, fifteen deep, is 4^15 visits of empty lists in a
	// 565-byte file.  Every visit counts, so such a file fails at once.
	if (++l->visits > 100000)
		fail(l, n, "%s: its aliases expand to too many lists", what);
	if (n->type == YAML_SCALAR_NODE && (!*n->data.scalar.value ||
	                                    !strcmp((char *)n->data.scalar.value, "null") ||
	                                    !strcmp((char *)n->data.scalar.value, "~")))
		return; // an empty value: no items
	if (n->type != YAML_SEQUENCE_NODE)
		fail(l, n, "%s must be a list", what);
	for (yaml_node_item_t *it = n->data.sequence.items.start; it < n->data.sequence.items.top; it++) {
		yaml_node_t *x = node(l, *it);
		if (x->type == YAML_SEQUENCE_NODE) {
			strings(l, x, out, width, max, count, what, depth + 1);
			continue;
		}
		if (x->type == YAML_SCALAR_NODE && !*x->data.scalar.value)
			continue;
		if (*count == max)
			fail(l, x, "%s has too many items (at most %d)", what, max);
		copy(l, x, out + (size_t)*count * width, width, what);
		(*count)++;
	}
}

static void
check_tasks(Ld *l, yaml_node_t *n, char (*tasks)[32], int nt, const char *what)
{
	for (int i = 0; i < nt; i++) {
		// The tasks of ir/tasks.def but forward: a cell times a derivative.
		int t = ir_task_lookup(tasks[i]);
		if (t < 0 || t == IR_TASK_forward)
			fail(l, n, "%s: unknown task '%s'", what, tasks[i]);
	}
}

static void
expect_map(Ld *l, yaml_node_t *n, const char *what)
{
	if (n->type != YAML_MAPPING_NODE)
		fail(l, n, "%s must be a mapping", what);
}

#define FOR_PAIRS(l, n, k, v)                                                                      \
	for (yaml_node_pair_t *p_##k = (n)->data.mapping.pairs.start; p_##k < (n)->data.mapping.pairs.top; \
	     p_##k++)                                                                              \
		for (yaml_node_t *k = node(l, p_##k->key), *v = node(l, p_##k->value); k; k = NULL)

static void
load_model(Ld *l, yaml_node_t *key, yaml_node_t *val, BenchConfig *c)
{
	if (c->nmodel == BENCH_MAXMODEL)
		fail(l, key, "too many models (at most %d)", BENCH_MAXMODEL);
	BenchModel *m = &c->model[c->nmodel];
	memset(m, 0, sizeof *m);
	copy(l, key, m->name, sizeof m->name, "a model name");
	if (bench_config_model(c, m->name))
		fail(l, key, "model '%s' listed twice", m->name);
	expect_map(l, val, "a model");
	int have_source = 0, have_tasks = 0;
	m->rtol = -1;
	FOR_PAIRS(l, val, k, v)
	{
		const char *kn = scalar(l, k, "a key");
		if (!strcmp(kn, "source")) {
			copy(l, v, m->source, sizeof m->source, "source");
			// "" would resolve to the configuration's folder.
			if (!m->source[0])
				fail(l, v, "model '%s': source is empty", m->name);
			m->source_line = (int)v->start_mark.line + 1;
			m->source_col = (int)v->start_mark.column + 1;
			have_source = 1;
		} else if (!strcmp(kn, "tasks")) {
			strings(l, v, m->tasks[0], 32, BENCH_MAXTASK, &m->ntasks, "tasks", 0);
			check_tasks(l, v, m->tasks, m->ntasks, "tasks");
			have_tasks = 1;
		} else if (!strcmp(kn, "unsupported")) {
			strings(l, v, m->unsupported[0], 32, BENCH_MAXTASK, &m->nunsupported, "unsupported", 0);
			check_tasks(l, v, m->unsupported, m->nunsupported, "unsupported");
		} else if (!strcmp(kn, "reduced")) {
			strings(l, v, m->reduced[0], 64, BENCH_MAXDEF, &m->nreduced, "reduced", 0);
			// One value per name: fadc refuses a size bound twice.
			for (int i = 0; i < m->nreduced; i++) {
				const char *eq = strchr(m->reduced[i], '=');
				if (!eq || eq == m->reduced[i])
					fail(l, v, "reduced: '%s' is not NAME=VALUE", m->reduced[i]);
				size_t nl = (size_t)(eq - m->reduced[i]);
				for (int j = 0; j < i; j++)
					if (!strncmp(m->reduced[j], m->reduced[i], nl + 1))
						fail(l, v, "reduced: '%.*s' is given twice ('%s', '%s')", (int)nl,
						     m->reduced[i], m->reduced[j], m->reduced[i]);
			}
		} else if (!strcmp(kn, "rtol")) {
			m->rtol = number(l, v, "rtol");
		} else
			fail(l, k, "unknown key '%s' in model '%s' (expected source, tasks, unsupported, reduced, rtol)",
			     kn, m->name);
	}
	if (!have_source)
		fail(l, val, "model '%s' has no source", m->name);
	if (!have_tasks)
		fail(l, val, "model '%s' has no tasks", m->name);
	c->nmodel++;
}

typedef struct KeyAt {
	const char *s;
	const yaml_node_t *n;
} KeyAt;

static int
key_cmp(const void *a, const void *b)
{
	const KeyAt *x = a, *y = b;
	int c = strcmp(x->s, y->s);
	if (c)
		return c;
	if (x->n->start_mark.index != y->n->start_mark.index)
		return x->n->start_mark.index < y->n->start_mark.index ? -1 : 1;
	return 0;
}

// No mapping of the document has a scalar key twice.  Sorted, not compared
// pairwise, so that a fuzzed mapping of many keys stays cheap.  The first
// repeat in the file is reported, with the line of the key it repeats.
static void
no_duplicate_keys(Ld *l)
{
	KeyAt first = {0}, again = {0};
	for (yaml_node_t *n = l->doc.nodes.start; n < l->doc.nodes.top; n++) {
		if (n->type != YAML_MAPPING_NODE)
			continue;
		size_t np = (size_t)(n->data.mapping.pairs.top - n->data.mapping.pairs.start), nk = 0;
		if (np < 2)
			continue;
		KeyAt *k = malloc(np * sizeof *k);
		if (!k)
			fail(l, n, "out of memory");
		for (yaml_node_pair_t *p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top; p++) {
			yaml_node_t *kn = node(l, p->key);
			if (kn && kn->type == YAML_SCALAR_NODE)
				k[nk++] = (KeyAt){(const char *)kn->data.scalar.value, kn};
		}
		qsort(k, nk, sizeof *k, key_cmp);
		// The second of each run of equal keys (sorted by position).
		for (size_t i = 1; i < nk; i++)
			if (!strcmp(k[i].s, k[i - 1].s) && (i < 2 || strcmp(k[i].s, k[i - 2].s)) &&
			    (!again.n || k[i].n->start_mark.index < again.n->start_mark.index))
				first = k[i - 1], again = k[i];
		free(k);
	}
	if (again.n)
		fail(l, again.n, "duplicate key '%s' (first at line %zu, column %zu)", again.s,
		     first.n->start_mark.line + 1, first.n->start_mark.column + 1);
}

static void
load(Ld *l, BenchConfig *c)
{
	yaml_node_t *root = yaml_document_get_root_node(&l->doc);
	if (!root)
		fail(l, NULL, "the configuration is empty");
	expect_map(l, root, "the configuration");
	int have_models = 0;
	c->rtol = 1e-4;
	// Two passes: the models need the defaults, lists refer to models.
	FOR_PAIRS(l, root, k, v)
	{
		const char *kn = scalar(l, k, "a key");
		if (!strcmp(kn, "task_lists")) {
			expect_map(l, v, "task_lists");
			FOR_PAIRS(l, v, lk, lv)
			{
				char tmp[BENCH_MAXTASK * 4][32];
				int nt = 0;
				const char *ln = scalar(l, lk, "a list name");
				strings(l, lv, tmp[0], 32, BENCH_MAXTASK * 4, &nt, ln, 0);
				check_tasks(l, lv, tmp, nt, ln);
				if (!strcmp(ln, "ALL_TASKS")) {
					if (nt > BENCH_MAXTASK)
						fail(l, lv, "ALL_TASKS has too many tasks");
					memcpy(c->all_tasks, tmp, sizeof(tmp[0]) * (size_t)nt);
					c->nall = nt;
				}
			}
		} else if (!strcmp(kn, "models")) {
			expect_map(l, v, "models");
			FOR_PAIRS(l, v, mk, mv)
			load_model(l, mk, mv, c);
			if (!c->nmodel)
				fail(l, v, "models is empty");
			have_models = 1;
		} else if (!strcmp(kn, "slow")) {
			strings(l, v, c->slow[0], 64, BENCH_MAXMODEL, &c->nslow, "slow", 0);
		} else if (!strcmp(kn, "skip")) {
			expect_map(l, v, "skip");
			FOR_PAIRS(l, v, sk, sv)
			{
				const char *sn = scalar(l, sk, "a key");
				if (strcmp(sn, "device"))
					fail(l, sk, "unknown key '%s' in skip (expected device)", sn);
				expect_map(l, sv, "skip.device");
				FOR_PAIRS(l, sv, dk, dv)
				{
					const char *dn = scalar(l, dk, "a device");
					if (!strcmp(dn, "cpu"))
						strings(l, dv, c->skip_cpu[0], 64, BENCH_MAXMODEL, &c->nskip_cpu, "skip.device.cpu", 0);
					else if (!strcmp(dn, "cuda"))
						strings(l, dv, c->skip_cuda[0], 64, BENCH_MAXMODEL, &c->nskip_cuda, "skip.device.cuda", 0);
					else
						fail(l, dk, "unknown device '%s' in skip.device (expected cpu, cuda)", dn);
				}
			}
		} else if (!strcmp(kn, "rtol")) {
			c->rtol = number(l, v, "rtol");
		} else
			fail(l, k, "unknown key '%s' (expected task_lists, models, slow, skip, rtol)", kn);
	}
	if (!have_models)
		fail(l, root, "no models");
	if (!c->nall)
		fail(l, root, "task_lists has no ALL_TASKS");
	for (int i = 0; i < c->nmodel; i++)
		if (c->model[i].rtol < 0)
			c->model[i].rtol = c->rtol;
	// Names in lists must be models.
	const char (*lists[3])[64] = {c->slow, c->skip_cpu, c->skip_cuda};
	int counts[3] = {c->nslow, c->nskip_cpu, c->nskip_cuda};
	for (int k = 0; k < 3; k++)
		for (int i = 0; i < counts[k]; i++)
			if (!bench_config_model(c, lists[k][i]))
				fail(l, root, "'%s' is listed in %s but is not a model", lists[k][i],
				     k == 0 ? "slow" : k == 1 ? "skip.device.cpu" : "skip.device.cuda");
}

static void
yaml_error(const yaml_parser_t *p, const char *path, char *err, size_t errlen)
{
	snprintf(err, errlen, "%s:%zu:%zu: error: %s%s%s", path, p->problem_mark.line + 1,
	         p->problem_mark.column + 1, p->problem ? p->problem : "malformed YAML",
	         p->context ? " " : "", p->context ? p->context : "");
}

int
bench_config_load(const char *path, BenchConfig *c, char *err, size_t errlen)
{
	// Read through fileio: a directory, a FIFO or a device is refused by
	// name before any read (a FIFO would block, a directory gave
	// libyaml's bare "input error").  A configuration is small; 16 MiB
	// bounds a mistaken path to something large.
	char ferr[1024];
	size_t len;
	char *text = fio_read_all(path, (size_t)16 << 20, &len, ferr, sizeof ferr);
	if (!text) {
		size_t pl = strlen(path);
		// fileio says "PATH: reason": the house form is "PATH: error: reason".
		if (!strncmp(ferr, path, pl) && ferr[pl] == ':')
			snprintf(err, errlen, "%s: error:%s", path, ferr + pl + 1);
		else
			snprintf(err, errlen, "%s: error: %s", path, ferr);
		return -1;
	}
	yaml_parser_t parser;
	if (!yaml_parser_initialize(&parser)) {
		free(text);
		snprintf(err, errlen, "%s: error: out of memory", path);
		return -1;
	}
	yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
	Ld *l = calloc(1, sizeof *l);
	BenchConfig *tmp = calloc(1, sizeof *tmp);
	int rc = -1;
	if (!l || !tmp) {
		snprintf(err, errlen, "%s: error: out of memory", path);
		goto out;
	}
	l->path = path;
	l->err = err;
	l->errlen = errlen;
	if (!yaml_parser_load(&parser, &l->doc)) {
		yaml_error(&parser, path, err, errlen);
		goto out;
	}
	// The stream must end after the first document: a second one (after
	// `---`) would be ignored by the loader, whatever it holds.
	yaml_document_t next;
	if (!yaml_parser_load(&parser, &next)) {
		yaml_error(&parser, path, err, errlen);
		yaml_document_delete(&l->doc);
		goto out;
	}
	int second = yaml_document_get_root_node(&next) != NULL;
	size_t sl = next.start_mark.line + 1, sc = next.start_mark.column + 1;
	yaml_document_delete(&next);
	if (second) {
		snprintf(err, errlen, "%s:%zu:%zu: error: a second YAML document; a configuration is "
		                      "one document", path, sl, sc);
		yaml_document_delete(&l->doc);
		goto out;
	}
	snprintf(tmp->path, sizeof tmp->path, "%s", path);
	if (!setjmp(l->jmp)) {
		no_duplicate_keys(l);
		load(l, tmp);
		*c = *tmp;
		rc = 0;
	}
	yaml_document_delete(&l->doc);
out:
	yaml_parser_delete(&parser);
	free(text);
	free(l);
	free(tmp);
	return rc;
}

const BenchModel *
bench_config_model(const BenchConfig *c, const char *name)
{
	for (int i = 0; i < c->nmodel; i++)
		if (!strcmp(c->model[i].name, name))
			return &c->model[i];
	return NULL;
}

int
bench_in_list(const char (*list)[64], int n, const char *name)
{
	for (int i = 0; i < n; i++)
		if (!strcmp(list[i], name))
			return 1;
	return 0;
}
