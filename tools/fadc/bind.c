// tools/fadc/bind.c -- the inputs of `fadc run`: bound from files or drawn.
//
// A run of a .ir model and a run of a .so describe what they can bind as
// the same list of slots (declarations, forward's arguments, the task's
// own inputs v), so that --params and --v bind both alike and an unbound
// v is drawn alike (cli.h), and their outputs can be compared file by file.
#include <stdlib.h>
#include <string.h>

#include "cli.h"

// Parses the value of --params / --v into b: 1, or 0 on a usage error, or
// -1 out of memory.
int
parse_binding(const char *v, int is_v, Binding *b)
{
	const char *eq = strchr(v, '=');
	const char *slash = strrchr(v, '/');
	const char *base = slash ? slash + 1 : v;
	memset(b, 0, sizeof *b);
	b->is_v = is_v;
	if (eq && eq > v && eq[1] && has_suffix(eq + 1, ".npy")) {
		b->name = strndup(v, (size_t)(eq - v));
		b->path = eq + 1;
	} else if (!eq && has_suffix(v, ".npy") && strlen(base) > 4) {
		b->name = npy_name_of_file(base, strlen(base) - 4); // %2F: '/' (cli.c)
		b->path = v;
	} else if (!eq && (has_suffix(v, ".safetensors") || has_suffix(v, ".onnx"))) {
		b->path = v;
		return 1;
	} else
		return 0;
	return b->name ? 1 : -1;
}

static Slot *
find_slot(Slot *s, int n, const char *name, int is_v)
{
	for (int i = 0; i < n; i++)
		if ((s[i].kind == SLOT_V) == is_v && !strcmp(s[i].name, name))
			return &s[i];
	return NULL;
}

// Reads every binding's file and moves each tensor into the slot of its
// name, checking dtype and shape.  A tensor that names nothing the run can
// bind is an error, as is a name bound twice: a typo must not run the model
// on its initial values unnoticed.  --allow-unused-params makes an unused
// tensor a warning (a weights file that holds more than the model needs).
// Returns 0 after a diagnostic.
int
bind_slots(Slot *s, int ns, const Binding *bind, int nbind, const char *task, int allow_unused)
{
	for (int b = 0; b < nbind; b++) {
		tio_tensor *ts = NULL;
		int nt = 0;
		char err[600];
		if (bind[b].name) {
			ts = calloc(1, sizeof *ts);
			if (!ts || tio_npy_read(bind[b].path, ts, err, sizeof err)) {
				path_error(bind[b].path, ts ? err : "out of memory");
				free(ts);
				return 0;
			}
			nt = 1;
		} else if (has_suffix(bind[b].path, ".onnx")) {
			if (onnx_read(bind[b].path, &ts, &nt)) // an ONNX model's initializers (cli.c)
				return 0;
		} else if (tio_safetensors_read(bind[b].path, &ts, &nt, err, sizeof err)) {
			path_error(bind[b].path, err);
			return 0;
		}
		int ok = 1;
		for (int i = 0; i < nt && ok; i++) {
			const char *name = bind[b].name ? bind[b].name : ts[i].name;
			Slot *sl = find_slot(s, ns, name, bind[b].is_v);
			if (!sl && bind[b].is_v && bind[b].name) {
				fprintf(stderr, "%s: error: tensor '%s' is not an input of task '%s' (its inputs:",
				        bind[b].path, name, task);
				int any = 0;
				for (int k = 0; k < ns; k++)
					if (s[k].kind == SLOT_V)
						fprintf(stderr, "%s %s", any++ ? "," : "", s[k].name);
				fprintf(stderr, "%s)\n", any ? "" : " none");
				ok = 0;
				break;
			}
			if (bind[b].implicit && (!sl || sl->bound_by)) {
				// an initializer imported as a constant (--const), or one an
				// explicit --params already bound: nothing to do
				continue;
			}
			if (!sl && allow_unused) {
				fprintf(stderr, "%s: warning: tensor '%s' is not %s; ignored\n", bind[b].path, name,
				        bind[b].is_v ? "an input of the task"
				                     : "a parameter, constant or argument of the model");
				continue;
			}
			if (!sl) {
				fprintf(stderr, "%s: error: tensor '%s' is not %s (",
				        bind[b].path, name, bind[b].is_v ? "an input of the task"
				                     : "a parameter, constant or argument of the model");
				int any = 0;
				for (int k = 0; k < ns && any < 12; k++)
					if ((s[k].kind == SLOT_V) == bind[b].is_v)
						fprintf(stderr, "%s%s", any++ ? ", " : "its names: ", s[k].name);
				fprintf(stderr, "%s; --allow-unused-params ignores such tensors)\n",
				        any ? any == 12 ? ", ..." : "" : "it has none");
				ok = 0;
				break;
			}
			if (sl->bound_by) {
				fprintf(stderr, "%s: error: '%s' is bound twice (also by %s)\n", bind[b].path, name,
				        sl->bound_by);
				ok = 0;
				break;
			}
			sl->bound_by = bind[b].path;
			int same = ts[i].dtype == sl->dtype && ts[i].rank == sl->rank;
			for (int k = 0; same && k < sl->rank; k++)
				same = ts[i].dim[k] == sl->dim[k];
			if (!same) {
				char got[256], want[256];
				type_str(ts[i].dtype, ts[i].rank, ts[i].dim, got, sizeof got);
				type_str(sl->dtype, sl->rank, sl->dim, want, sizeof want);
				fprintf(stderr, "%s: error: tensor '%s' is %s, %s %s\n", bind[b].path, name, got,
				        sl->kind == SLOT_V ? "the task takes" : "the model declares", want);
				ok = 0;
				break;
			}
			tio_free(&sl->val);
			sl->val = ts[i];
			sl->val.name = NULL;
			free(ts[i].name);
			memset(&ts[i], 0, sizeof ts[i]);
			sl->bound = 1;
		}
		tio_free_all(ts, nt);
		if (!ok)
			return 0;
	}
	return 1;
}

// v where none was bound: U[0, 1) keyed by the input's name and the run
// seed, exactly as fadc-bench fills it (ir_rand_name_key), rounded to the
// input's dtype.
int
draw_v(Slot *s, int ns, uint64_t seed)
{
	for (int i = 0; i < ns; i++) {
		Slot *sl = &s[i];
		if (sl->kind != SLOT_V || sl->bound)
			continue;
		tio_tensor *t = &sl->val;
		t->dtype = sl->dtype;
		t->rank = sl->rank;
		memcpy(t->dim, sl->dim, sizeof(int64_t) * (size_t)sl->rank);
		int64_t n = tio_numel(t);
		t->data = n > 0 ? malloc((size_t)n * tio_dtype_size(t->dtype)) : NULL;
		if (n > 0 && !t->data) {
			fprintf(stderr, "fadc: error: out of memory\n");
			return 0;
		}
		uint64_t key = ir_rand_name_key(sl->name, "v");
		for (int64_t k = 0; k < n; k++)
			set_elem(t, k, ir_rand_uniform(key, seed, (uint64_t)k));
		sl->bound = 1;
	}
	return 1;
}

void
free_slots(Slot *s, int n)
{
	for (int i = 0; s && i < n; i++)
		tio_free(&s[i].val);
	free(s);
}

void
slot_shape(Slot *sl, DType dt, const Shape *shape)
{
	sl->dtype = tio_of(dt);
	sl->rank = shape->rank;
	memcpy(sl->dim, shape->dim, sizeof(int64_t) * (size_t)shape->rank);
}
