// frontend/main.c -- the `fadc` command line.
//
//   fadc MODEL.ir --emit ir [-D NAME=VALUE]...
//   fadc run MODEL.ir [--task forward] [--params FILE]... [--seed N] --out DIR [--print]
//
// Exit status: 0 success, 1 an error in the user's input (a diagnostic was
// printed), 2 a usage error.  It is its own target, linked on top of every
// library; it is the only place that knows about all of them.
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "frontend.h"
#include "ir.h"
#include "tensorio.h"

static const char *const usage_main =
    "usage: fadc MODEL.ir --emit ir [-D NAME=VALUE]...\n"
    "       fadc run MODEL.ir [options] --out DIR\n"
    "\n"
    "Compiles a model written in the fadc IR (docs/IR.md).\n"
    "\n"
    "  --emit ir          print the canonical IR of the model\n"
    "  -D NAME=VALUE      override the size `let NAME` (also -DNAME=VALUE)\n"
    "  --no-prelude       do not load the prelude of composite functions\n"
    "  -h, --help         this help; `fadc run --help` for running\n";

static const char *const usage_run =
    "usage: fadc run MODEL.ir [options] --out DIR\n"
    "\n"
    "Runs a task of the model with the float64 reference interpreter and\n"
    "writes each output as DIR/<name>.npy.\n"
    "\n"
    "  --task T           the task to run (forward)\n"
    "  --params FILE      bind parameters, constants and arguments of forward\n"
    "                     by name from a .safetensors file, or one from a .npy\n"
    "                     file named after it (NAME.npy), or NAME=FILE.npy;\n"
    "                     repeatable.  The rest come from their initializers.\n"
    "  --seed N           the run seed, mixed into every initializer (0)\n"
    "  --out DIR          where the outputs go (created if missing)\n"
    "  --print            also print the outputs\n"
    "  -D NAME=VALUE      override the size `let NAME`\n"
    "  -h, --help         this help\n";

static const char *const tasks[] = {"forward", "vjp", "jvp", "vhp", "hvp", "jacobian", "jacrev",
                                    "jacfwd", "hessian", "hessian_fwdrev", "hessian_revrev", NULL};

static int
usage_error(const char *usage, const char *fmt, const char *arg)
{
	fprintf(stderr, "fadc: ");
	fprintf(stderr, fmt, arg);
	fprintf(stderr, "\n%s", usage);
	return 2;
}

static enum tio_dtype
to_tio(DType t)
{
	return t == DT_F64 ? TIO_F64 : t == DT_I64 ? TIO_I64 : t == DT_BOOL ? TIO_BOOL : TIO_F32;
}

static DType
from_tio(enum tio_dtype t)
{
	return t == TIO_F64 ? DT_F64 : t == TIO_I64 ? DT_I64 : t == TIO_BOOL ? DT_BOOL : DT_F32;
}

// A file tensor as an interpreter tensor (float64 values).
static int
tensor_from_file(const tio_tensor *f, Tensor *t)
{
	Shape s = {.rank = f->rank};
	memcpy(s.dim, f->dim, sizeof(int64_t) * (size_t)f->rank);
	if (!ir_tensor_alloc(t, from_tio(f->dtype), &s))
		return 0;
	int64_t n = tio_numel(f);
	for (int64_t i = 0; i < n; i++) {
		switch (f->dtype) {
		case TIO_F32:
			t->data[i] = ((const float *)f->data)[i];
			break;
		case TIO_F64:
			t->data[i] = ((const double *)f->data)[i];
			break;
		case TIO_I64:
			t->data[i] = (double)((const int64_t *)f->data)[i];
			break;
		case TIO_BOOL:
			t->data[i] = ((const uint8_t *)f->data)[i] != 0;
			break;
		}
	}
	return 1;
}

// A tensorio message is "<path>: <what>": printed as a diagnostic,
// "<path>: error: <what>".
static void
tio_error(const char *path, const char *err)
{
	size_t n = strlen(path);
	if (!strncmp(err, path, n) && err[n] == ':' && err[n + 1] == ' ')
		err += n + 2;
	fprintf(stderr, "%s: error: %s\n", path, err);
}

static int
write_npy(const char *dir, const char *name, const Tensor *t)
{
	tio_tensor f = {.dtype = to_tio(t->dtype), .rank = t->shape.rank};
	memcpy(f.dim, t->shape.dim, sizeof(int64_t) * (size_t)t->shape.rank);
	int64_t n = ir_numel(&t->shape);
	size_t es = tio_dtype_size(f.dtype);
	f.data = n ? malloc((size_t)n * es) : NULL;
	if (n && !f.data) {
		fprintf(stderr, "fadc: out of memory\n");
		return 0;
	}
	for (int64_t i = 0; i < n; i++) {
		double v = t->data[i];
		switch (f.dtype) {
		case TIO_F32:
			((float *)f.data)[i] = (float)v;
			break;
		case TIO_F64:
			((double *)f.data)[i] = v;
			break;
		case TIO_I64:
			((int64_t *)f.data)[i] = (int64_t)v;
			break;
		case TIO_BOOL:
			((uint8_t *)f.data)[i] = v != 0;
			break;
		}
	}
	char *path = malloc(strlen(dir) + strlen(name) + 8);
	sprintf(path, "%s/%s.npy", dir, name);
	char err[512];
	int ok = tio_npy_write(path, &f, err, sizeof err) == 0;
	if (!ok)
		tio_error(path, err);
	free(path);
	free(f.data);
	return ok;
}

static void
print_value(const Tensor *t, int64_t *k, int axis, int64_t limit)
{
	if (axis == t->shape.rank) {
		char buf[64];
		double v = t->data[*k];
		(*k)++;
		if (t->dtype == DT_BOOL)
			snprintf(buf, sizeof buf, "%s", v != 0 ? "true" : "false");
		else if (t->dtype == DT_I64)
			snprintf(buf, sizeof buf, "%lld", (long long)v);
		else
			snprintf(buf, sizeof buf, "%.*g", t->dtype == DT_F32 ? 9 : 17, v);
		fputs(buf, stdout);
		return;
	}
	fputc('[', stdout);
	for (int64_t i = 0; i < t->shape.dim[axis]; i++) {
		if (i)
			fputs(", ", stdout);
		if (*k >= limit) {
			fputs("...", stdout);
			break;
		}
		print_value(t, k, axis + 1, limit);
	}
	fputc(']', stdout);
}

static int
mkdirs(const char *dir)
{
	char *p = strdup(dir);
	if (!p)
		return -1;
	for (char *s = p + 1; *s; s++)
		if (*s == '/') {
			*s = 0;
			mkdir(p, 0777);
			*s = '/';
		}
	int r = mkdir(p, 0777);
	free(p);
	struct stat st;
	return (r == 0 || errno == EEXIST) && !stat(dir, &st) && S_ISDIR(st.st_mode) ? 0 : -1;
}

typedef struct Binding {
	const char *name; // NULL: all tensors of a .safetensors file
	const char *path;
} Binding;

// Finds forward's input or declaration named `name`: returns 1 and the
// declaration index (or -1) and the forward input index.
static int
bind_target(const Module *m, const char *name, int *decl, int *arg)
{
	*decl = ir_module_find_decl(m, name);
	*arg = -1;
	for (uint32_t i = 0; i < m->main->ninput; i++)
		if (m->main->input[i].kind == IN_ARG && !strcmp(m->main->input[i].name, name))
			*arg = (int)i;
	return *decl >= 0 || *arg >= 0;
}

static int
check_bound(const char *path, const char *name, const Tensor *t, DType dt, const Shape *s)
{
	if (t->dtype == dt && ir_shape_eq(&t->shape, s))
		return 1;
	char want[200], got[200];
	ir_type_str(dt, s, want, sizeof want);
	ir_type_str(t->dtype, &t->shape, got, sizeof got);
	fprintf(stderr, "%s: error: tensor '%s' is %s, the model declares %s\n", path, name, got, want);
	return 0;
}

// cmd_run proper; the names of bind[0 .. *pnbind) are malloc'ed, and
// freed by the caller whatever the path out.
static int
run(int argc, char **argv, Binding *bind, int *pnbind)
{
	const char *model = NULL, *task = "forward", *out = NULL;
	const char *defs[64];
	int ndefs = 0, print = 0;
	uint64_t seed = 0;
	int nbind = 0;
	for (int i = 0; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			fputs(usage_run, stdout);
			return 0;
		} else if (!strcmp(a, "--task") || !strcmp(a, "--out") || !strcmp(a, "--params") ||
		           !strcmp(a, "--seed") || !strcmp(a, "-D")) {
			if (i + 1 >= argc)
				return usage_error(usage_run, "%s needs a value", a);
			const char *v = argv[++i];
			if (a[2] == 't')
				task = v;
			else if (a[2] == 'o')
				out = v;
			else if (a[1] == 'D') {
				if (ndefs == 64)
					return usage_error(usage_run, "too many -D options%s", "");
				defs[ndefs++] = v;
			} else if (a[2] == 's') {
				char *end;
				errno = 0;
				unsigned long long s = strtoull(v, &end, 10);
				if (!*v || *end || errno || v[0] == '-')
					return usage_error(usage_run, "--seed: '%s' is not a non-negative integer", v);
				seed = s;
			} else {
				if (nbind == 64)
					return usage_error(usage_run, "too many --params options%s", "");
				const char *eq = strchr(v, '=');
				const char *dot = strrchr(v, '.');
				const char *slash = strrchr(v, '/');
				if (eq && eq > v && eq[1]) {
					bind[nbind].name = strndup(v, (size_t)(eq - v));
					bind[nbind].path = eq + 1;
				} else if (!eq && dot && !strcmp(dot, ".npy") && dot > (slash ? slash + 1 : v)) {
					const char *b = slash ? slash + 1 : v;
					bind[nbind].name = strndup(b, (size_t)(dot - b));
					bind[nbind].path = v;
				} else if (!eq && dot && !strcmp(dot, ".safetensors")) {
					bind[nbind].name = NULL;
					bind[nbind].path = v;
				} else
					return usage_error(usage_run,
					                   "--params %s: expected a .npy or .safetensors file, or NAME=FILE.npy",
					                   v);
				int whole = !bind[nbind].name && !eq && !strcmp(dot, ".safetensors");
				*pnbind = ++nbind;
				if (!whole && !bind[nbind - 1].name) {
					fprintf(stderr, "fadc: out of memory\n");
					return 1;
				}
			}
		} else if (!strncmp(a, "-D", 2) && a[2]) {
			if (ndefs == 64)
				return usage_error(usage_run, "too many -D options%s", "");
			defs[ndefs++] = a + 2;
		} else if (!strcmp(a, "--print")) {
			print = 1;
		} else if (a[0] == '-') {
			return usage_error(usage_run, "unknown option '%s'", a);
		} else if (model) {
			return usage_error(usage_run, "more than one model given ('%s')", a);
		} else
			model = a;
	}
	if (!model)
		return usage_error(usage_run, "no model given%s", "");
	if (!out)
		return usage_error(usage_run, "--out DIR is required%s", "");
	int known = 0;
	for (int i = 0; tasks[i]; i++)
		known |= !strcmp(tasks[i], task);
	if (!known)
		return usage_error(usage_run, "unknown task '%s'", task);
	if (strcmp(task, "forward")) {
		fprintf(stderr, "fadc: task '%s' needs the differentiation passes, which this build does not have yet\n",
		        task);
		return 1;
	}
	FeOptions o = {.defines = defs, .ndefines = ndefs, .diag = stderr};
	Module *m = fe_parse_file(model, &o);
	if (!m)
		return 1;
	int rc = 1;
	Graph *g = m->main;
	Tensor *bound = calloc(m->ndecl + 1, sizeof *bound);
	int *isbound = calloc(m->ndecl + 1, sizeof *isbound);
	Tensor *argval = calloc(g->ninput + 1, sizeof *argval);
	int *argbound = calloc(g->ninput + 1, sizeof *argbound);
	Tensor *values = calloc(m->ndecl + 1, sizeof *values);
	Tensor *inputs = calloc(g->ninput + 1, sizeof *inputs);
	Tensor *outputs = calloc(g->nout + 1, sizeof *outputs);
	char err[512];
	int ninit = 0;
	if (!bound || !isbound || !argval || !argbound || !values || !inputs || !outputs) {
		fprintf(stderr, "fadc: out of memory\n");
		goto done;
	}
	for (int b = 0; b < nbind; b++) {
		tio_tensor *ts = NULL;
		int nt = 0;
		if (bind[b].name) {
			ts = calloc(1, sizeof *ts);
			if (!ts || tio_npy_read(bind[b].path, ts, err, sizeof err)) {
				tio_error(bind[b].path, ts ? err : "out of memory");
				free(ts);
				goto done;
			}
			nt = 1;
		} else if (tio_safetensors_read(bind[b].path, &ts, &nt, err, sizeof err)) {
			tio_error(bind[b].path, err);
			goto done;
		}
		int ok = 1;
		for (int i = 0; i < nt && ok; i++) {
			const char *name = bind[b].name ? bind[b].name : ts[i].name;
			int d, a;
			if (!bind_target(m, name, &d, &a)) {
				fprintf(stderr, "%s: warning: tensor '%s' is not a parameter, constant or argument of the model; ignored\n",
				        bind[b].path, name);
				continue;
			}
			Tensor t;
			if (!tensor_from_file(&ts[i], &t)) {
				fprintf(stderr, "fadc: out of memory\n");
				ok = 0;
				break;
			}
			if (d >= 0) {
				ok = check_bound(bind[b].path, name, &t, m->decl[d].dtype, &m->decl[d].shape);
				ir_tensor_free(&bound[d]);
				bound[d] = t;
				isbound[d] = 1;
			} else {
				const Node *nd = &g->node[g->input[a].node];
				ok = check_bound(bind[b].path, name, &t, (DType)nd->dtype, &g->shape[nd->shape]);
				ir_tensor_free(&argval[a]);
				argval[a] = t;
				argbound[a] = 1;
			}
		}
		tio_free_all(ts, nt);
		if (!ok)
			goto done;
	}
	if (!ir_module_init(m, bound, isbound, values, seed, err, sizeof err)) {
		fprintf(stderr, "%s: error: %s\n", model, err);
		goto done;
	}
	ninit = 1;
	for (uint32_t i = 0; i < g->ninput; i++) {
		const Input *in = &g->input[i];
		if (in->kind == IN_ARG) {
			if (!argbound[i]) {
				fprintf(stderr, "%s: error: argument '%s' of forward was not bound (use --params FILE)\n",
				        model, in->name);
				goto done;
			}
			inputs[i] = argval[i];
		} else {
			inputs[i] = values[ir_module_find_decl(m, in->name)];
		}
	}
	if (!ir_interp(g, inputs, outputs, seed, err, sizeof err)) {
		fprintf(stderr, "%s: error: %s\n", model, err);
		goto done;
	}
	if (mkdirs(out)) {
		fprintf(stderr, "fadc: cannot create the output folder '%s': %s\n", out, strerror(errno));
		goto done;
	}
	rc = 0;
	for (uint32_t i = 0; i < g->nout; i++) {
		if (!write_npy(out, g->out[i].name, &outputs[i]))
			rc = 1;
		if (print) {
			char ty[200];
			ir_type_str(outputs[i].dtype, &outputs[i].shape, ty, sizeof ty);
			printf("%s: %s = ", g->out[i].name, ty);
			int64_t k = 0;
			print_value(&outputs[i], &k, 0, 1000);
			putchar('\n');
		}
	}
done:
	for (uint32_t i = 0; bound && i < m->ndecl; i++)
		ir_tensor_free(&bound[i]);
	for (uint32_t i = 0; argval && i < g->ninput; i++)
		ir_tensor_free(&argval[i]);
	for (uint32_t i = 0; ninit && i < m->ndecl; i++)
		ir_tensor_free(&values[i]);
	for (uint32_t i = 0; outputs && i < g->nout; i++)
		ir_tensor_free(&outputs[i]);
	free(bound), free(isbound), free(argval), free(argbound), free(values), free(inputs),
	    free(outputs);
	ir_module_free(m);
	return rc;
}

static int
cmd_run(int argc, char **argv)
{
	Binding bind[64];
	int nbind = 0;
	int rc = run(argc, argv, bind, &nbind);
	for (int b = 0; b < nbind; b++)
		free((char *)bind[b].name);
	return rc;
}

static int
cmd_compile(int argc, char **argv)
{
	const char *model = NULL, *emit = NULL;
	const char *defs[64];
	int ndefs = 0, noprelude = 0;
	for (int i = 0; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			fputs(usage_main, stdout);
			return 0;
		} else if (!strcmp(a, "--emit") || !strcmp(a, "-D")) {
			if (i + 1 >= argc)
				return usage_error(usage_main, "%s needs a value", a);
			if (a[1] == 'D') {
				if (ndefs == 64)
					return usage_error(usage_main, "too many -D options%s", "");
				defs[ndefs++] = argv[++i];
			} else
				emit = argv[++i];
		} else if (!strncmp(a, "-D", 2) && a[2]) {
			if (ndefs == 64)
				return usage_error(usage_main, "too many -D options%s", "");
			defs[ndefs++] = a + 2;
		} else if (!strcmp(a, "--no-prelude")) {
			noprelude = 1;
		} else if (a[0] == '-') {
			return usage_error(usage_main, "unknown option '%s'", a);
		} else if (model) {
			return usage_error(usage_main, "more than one model given ('%s')", a);
		} else
			model = a;
	}
	if (!model)
		return usage_error(usage_main, "no model given%s", "");
	if (!emit)
		return usage_error(usage_main, "nothing to do: give --emit ir (code generation comes later)%s", "");
	if (strcmp(emit, "ir"))
		return usage_error(usage_main, "--emit: unknown kind '%s' (ir)", emit);
	FeOptions o = {.defines = defs, .ndefines = ndefs, .diag = stderr, .no_prelude = noprelude};
	Module *m = fe_parse_file(model, &o);
	if (!m)
		return 1;
	char err[512];
	if (!ir_verify(m->main, err, sizeof err)) {
		fprintf(stderr, "fadc: internal error: the graph does not verify: %s\n", err);
		ir_module_free(m);
		return 3;
	}
	ir_print_module(stdout, m);
	ir_module_free(m);
	return 0;
}

int
main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "run"))
		return cmd_run(argc - 2, argv + 2);
	return cmd_compile(argc - 1, argv + 1);
}
