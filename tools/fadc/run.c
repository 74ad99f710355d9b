// tools/fadc/run.c -- `fadc run MODEL.ir|MODEL.so --task T --out DIR`.
//
// `run` does the same on both kinds of model, so that their outputs can be
// compared file by file: the same bindings (--params for declarations and
// forward's arguments, --v for the task's own inputs v, v.<p>; bind.c), the
// same v when none is bound (U[0, 1) from the run seed, keyed by the
// input's name as fadc-bench draws it: ir_rand_name_key), the same .npy
// outputs, written all or nothing.  A .ir model runs on the float64
// reference interpreter (the task's graph by pass_task), a .so through the
// runtime of include/fadc.h.
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "fileio.h"
#include "frontend.h"
#include "passes.h"

const char *const usage_run =
    "usage: fadc run MODEL.ir|MODEL.so --task T [options] --out DIR\n"
    "\n"
    "Runs a task of a model and writes each output as DIR/<name>.npy (with '/',\n"
    "'\\', '%' and a leading '.' of the name as %XX, which --params decodes): a .ir\n"
    "model with the float64 reference interpreter, a compiled .so through the\n"
    "runtime (include/fadc.h).  Both bind and draw their inputs the same way.\n"
    "\n"
    "  --task T           the task to run (forward); see `fadc --help`\n"
    "  --params FILE      bind parameters, constants and arguments of forward\n"
    "                     by name from a .safetensors file (or the initializers\n"
    "                     of a .onnx model), or one from a .npy\n"
    "                     file named after it (NAME.npy), or NAME=FILE.npy;\n"
    "                     repeatable.  The rest come from their initializers\n"
    "                     (for a .onnx model: the weights stored in it).\n"
    "  --v FILE           bind the task's own inputs (v for vjp, v.<param> for\n"
    "                     jvp, vhp, hvp) the same ways: v.beta_value.npy,\n"
    "                     v.beta_value=FILE.npy, a .safetensors file.  Unbound\n"
    "                     ones are U[0, 1) from the seed, as fadc-bench draws them\n"
    "  --seed N           the run seed, mixed into every initializer and v (0)\n"
    "  --out DIR          where the outputs go (created if missing); written all\n"
    "                     or nothing, never over an input file\n"
    "  --print            print the outputs (also without --out)\n"
    "  --time N           (a .so) N more runs (1 .. 1000000), timed: microseconds\n"
    "                     per call\n"
    "  --allow-unused-params  a bound tensor that names nothing of the model or\n"
    "                     the task is a warning, not an error\n"
    "  --num-threads N    (a .so) CPU threads for large kernels, 1 .. 4096\n"
    "                     (default: $FADC_NUM_THREADS, else the CPUs online)\n"
    "  --gpus LIST        (a .so compiled with --target cuda) run on these GPUs,\n"
    "                     \"0\" or \"0,1\": several split the batch the model declares\n"
    "                     (data-parallel, docs/MULTIGPU.md; the artifact must hold\n"
    "                     the task at each shard's batch size: -D N=n,n/2)\n"
    "  -D NAME=VALUE      override the size `let NAME` (a .ir); for a .so compiled\n"
    "                     with -D lists, pick the specialisation of those sizes\n"
    "                     (without -D: the first one, as `fadc inspect` lists them)\n"
    "  --const NAME       (a .onnx) import the float initializer NAME as a\n"
    "                     constant, not a parameter; repeatable\n"
    "  --max-nodes N      (a .ir) the most nodes the model may have after inlining\n"
    "                     (1000000), as for `fadc MODEL.ir`\n"
    "  -h, --help         this help\n";

// Nested lists, at most `limit` elements, with 9 significant digits for
// f32 and 17 for f64 (enough to read the value back).  exact (NULL: the
// tensor's own values) are the interpreter's float64 values of an f32
// output, printed before their rounding to f32.
static void
print_value(const tio_tensor *t, const double *exact, int64_t *k, int axis, int64_t limit)
{
	if (axis == t->rank) {
		int64_t i = (*k)++;
		if (t->dtype == TIO_BOOL)
			fputs(((const uint8_t *)t->data)[i] ? "true" : "false", stdout);
		else if (t->dtype == TIO_I64)
			printf("%" PRId64, ((const int64_t *)t->data)[i]);
		else
			printf("%.*g", t->dtype == TIO_F32 ? 9 : 17, exact ? exact[i] : elem(t, i));
		return;
	}
	fputc('[', stdout);
	for (int64_t i = 0; i < t->dim[axis]; i++) {
		if (i)
			fputs(", ", stdout);
		if (*k >= limit) {
			fputs("...", stdout);
			break;
		}
		print_value(t, exact, k, axis + 1, limit);
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

// Writes out[i] as DIR/<fn[i]>.npy (names[i]: the output's own name) and prints them with --print
// (exact: see print_value).  All or nothing: the files are written into a
// temporary folder first (beside DIR when DIR is new, inside it when it
// exists, so that renames stay on one filesystem), and only once every one
// is written is the folder renamed to DIR, or each file renamed into it.  A
// failure leaves DIR as it was.  An output that is one of the run's input
// files (inputs[0..ninputs)) is refused before anything is written.
static int
write_files(const char *dir, const char *const *names, char *const *fn, const tio_tensor *out,
            const Tensor *exact, int n, int print, const char *const *inputs, int ninputs)
{
	int rc = 0;
	char err[1024];
	char **tpath = NULL; // the files in the temporary folder
	char *tmp = NULL;
	int exists = dir && is_dir(dir), made = 0, th = -1;
	struct stat st;

	if (dir && !exists && stat(dir, &st) == 0) {
		fprintf(stderr, "fadc: error: the output folder '%s' exists and is not a folder\n", dir);
		return 1;
	}
	if (dir) {
		for (int i = 0; i < n && !rc; i++) {
			char *path = malloc(strlen(dir) + strlen(fn[i]) + 8);
			if (!path) {
				fprintf(stderr, "fadc: error: out of memory\n");
				return 1;
			}
			sprintf(path, "%s/%s.npy", dir, fn[i]);
			if (fio_check_not_input(path, inputs, ninputs, err, sizeof err)) {
				path_error(path, err);
				rc = 1;
			} else if (exists && stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
				path_error(path, "is a folder; the output cannot replace it");
				rc = 1;
			}
			free(path);
		}
		if (rc)
			return rc;
		if (!exists) {
			// The parents of DIR, then a fresh DIR.tmpXXXXXX beside it.
			char *parent = strdup(dir);
			if (!parent) {
				fprintf(stderr, "fadc: error: out of memory\n");
				return 1;
			}
			size_t pl = strlen(parent);
			while (pl > 1 && parent[pl - 1] == '/')
				parent[--pl] = 0;
			char *slash = strrchr(parent, '/');
			int ok = 1;
			if (slash && slash != parent) {
				*slash = 0;
				ok = mkdirs(parent) == 0;
			}
			free(parent);
			tmp = malloc(strlen(dir) + 32);
			if (tmp)
				sprintf(tmp, "%.*s.tmp%ld.XXXXXX", (int)pl, dir, (long)getpid());
			if (!ok || !tmp || !mkdtemp(tmp)) {
				fprintf(stderr, "fadc: error: cannot create the output folder '%s': %s\n", dir,
				        tmp ? strerror(errno) : "out of memory");
				free(tmp);
				return 1;
			}
		} else {
			tmp = malloc(strlen(dir) + 32);
			if (tmp)
				sprintf(tmp, "%s/.fadc-out.XXXXXX", dir);
			if (!tmp || !mkdtemp(tmp)) {
				fprintf(stderr, "fadc: error: cannot write into the output folder '%s': %s\n",
				        dir, tmp ? strerror(errno) : "out of memory");
				free(tmp);
				return 1;
			}
		}
		made = 1;
		th = fio_cleanup_add(tmp, 1);
		if (!(tpath = calloc((size_t)n + 1, sizeof *tpath))) {
			fprintf(stderr, "fadc: error: out of memory\n");
			rc = 1;
		}
		for (int i = 0; i < n && !rc; i++) {
			if (!(tpath[i] = malloc(strlen(tmp) + strlen(fn[i]) + 8))) {
				fprintf(stderr, "fadc: error: out of memory\n");
				rc = 1;
				break;
			}
			sprintf(tpath[i], "%s/%s.npy", tmp, fn[i]);
			if (tio_npy_write(tpath[i], &out[i], err, sizeof err)) {
				// Named by where it was going, not by the temporary folder.
				const char *why = strrchr(err, ':');
				fprintf(stderr, "fadc: error: cannot write output '%.*s%s' into '%.*s': %s\n",
				        SHOW_PATH, names[i], strlen(names[i]) > SHOW_PATH ? "[...]" : "",
				        SHOW_PATH, dir, why ? why + 2 : err);
				free(tpath[i]);
				tpath[i] = NULL;
				rc = 1;
			}
		}
		if (!rc && !exists && rename(tmp, dir) == 0)
			made = 0; // it is DIR now
		else if (!rc) {
			// DIR exists (or appeared meanwhile): move each file into it.
			for (int i = 0; i < n && !rc; i++) {
				char *path = malloc(strlen(dir) + strlen(fn[i]) + 8);
				if (!path) {
					fprintf(stderr, "fadc: error: out of memory\n");
					rc = 1;
					break;
				}
				sprintf(path, "%s/%s.npy", dir, fn[i]);
				if (rename(tpath[i], path) != 0) {
					fprintf(stderr, "fadc: error: cannot move output into '%s': %s\n", dir,
					        strerror(errno));
					rc = 1;
				} else {
					free(tpath[i]);
					tpath[i] = NULL;
				}
				free(path);
			}
		}
		for (int i = 0; tpath && i < n; i++)
			if (tpath[i])
				unlink(tpath[i]);
		if (made)
			rmdir(tmp);
		fio_cleanup_drop(th);
		for (int i = 0; tpath && i < n; i++)
			free(tpath[i]);
		free(tpath);
		free(tmp);
		if (rc)
			return rc;
	}
	for (int i = 0; print && i < n; i++) {
		char ty[256];
		type_str(out[i].dtype, out[i].rank, out[i].dim, ty, sizeof ty);
		printf("%s: %s = ", names[i], ty);
		int64_t k = 0;
		print_value(&out[i], exact ? exact[i].data : NULL, &k, 0, 1000);
		putchar('\n');
	}
	return rc;
}

// write_files, with the outputs' file names (npy_file_name: an ONNX name's
// '/' is %2F).
static int
write_outputs(const char *dir, const char *const *names, const tio_tensor *out,
              const Tensor *exact, int n, int print, const char *const *inputs, int ninputs)
{
	char **fn = calloc((size_t)n + 1, sizeof *fn);
	int ok = fn != NULL;
	for (int i = 0; ok && i < n; i++)
		ok = (fn[i] = npy_file_name(names[i])) != NULL;
	int rc = 1;
	if (ok)
		rc = write_files(dir, names, fn, out, exact, n, print, inputs, ninputs);
	else
		fprintf(stderr, "fadc: error: out of memory\n");
	for (int i = 0; fn && i < n; i++)
		free(fn[i]);
	free(fn);
	return rc;
}

typedef struct RunArgs {
	const char *model, *task, *out;
	const char *defs[MAXDEF];
	int ndefs, print;
	long time;
	int num_threads; // --num-threads (0: the runtime's choice)
	uint64_t seed;
	Binding bind[MAXBIND];
	int nbind;
	int allow_unused; // --allow-unused-params
	int64_t max_nodes; // --max-nodes (0: FE_MAX_NODES)
	// --gpus 0,1: a context over these GPUs (data-parallel, docs/MULTIGPU.md)
	fadc_device gpus[FADC_MAX_DEVICES];
	int ngpus;
} RunArgs;

// The files a run reads, which its outputs must not overwrite.
static int
run_inputs(const RunArgs *a, const char **in)
{
	int n = 0;
	in[n++] = a->model;
	for (int b = 0; b < a->nbind; b++)
		in[n++] = a->bind[b].path;
	return n;
}

// A file tensor as an interpreter tensor (float64 values).
static int
tensor_from_tio(const tio_tensor *f, Tensor *t)
{
	Shape s = {.rank = f->rank};
	memcpy(s.dim, f->dim, sizeof(int64_t) * (size_t)f->rank);
	if (!ir_tensor_alloc(t, dtype_of(f->dtype), &s))
		return 0;
	int64_t n = tio_numel(f);
	for (int64_t i = 0; i < n; i++)
		t->data[i] = elem(f, i);
	return 1;
}

// An interpreter tensor as a file tensor, in its dtype.
static int
tio_from_tensor(const Tensor *t, tio_tensor *f)
{
	memset(f, 0, sizeof *f);
	f->dtype = tio_of(t->dtype);
	f->rank = t->shape.rank;
	memcpy(f->dim, t->shape.dim, sizeof(int64_t) * (size_t)t->shape.rank);
	int64_t n = ir_numel(&t->shape);
	f->data = n ? malloc((size_t)n * tio_dtype_size(f->dtype)) : NULL;
	if (n && !f->data)
		return 0;
	for (int64_t i = 0; i < n; i++)
		set_elem(f, i, t->data[i]);
	return 1;
}

static int
is_forward_arg(const Graph *f, const char *name)
{
	for (uint32_t i = 0; i < f->ninput; i++)
		if (f->input[i].kind == IN_ARG && !strcmp(f->input[i].name, name))
			return 1;
	return 0;
}

// `fadc run MODEL.ir`: the task's graph by pass_task, run by ir_interp.
static int
run_ir(const RunArgs *a)
{
	FeOptions fo = {.defines = a->defs, .ndefines = a->ndefs, .diag = stderr,
	                .max_nodes = a->max_nodes};
	Module *m = load_model(a->model, &fo);
	if (!m)
		return 1;
	char err[1024];
	Loc loc = 0;
	Graph *g = pass_task(m->main, a->task, NULL, &loc, err, sizeof err);
	if (!g) {
		report_error(m, a->model, loc, err);
		ir_module_free(m);
		return 1;
	}
	int rc = 1, ninit = 0;
	uint32_t nd = m->ndecl, ns = 0;
	Slot *slot = calloc(nd + g->ninput + 1, sizeof *slot);
	int *slot_of = calloc(g->ninput + 1, sizeof *slot_of); // graph input -> slot
	Tensor *bound = calloc(nd + 1, sizeof *bound);
	int *isbound = calloc(nd + 1, sizeof *isbound);
	Tensor *values = calloc(nd + 1, sizeof *values);
	Tensor *args = calloc(g->ninput + 1, sizeof *args);
	Tensor *inputs = calloc(g->ninput + 1, sizeof *inputs);
	Tensor *outputs = calloc(g->nout + 1, sizeof *outputs);
	tio_tensor *files = calloc(g->nout + 1, sizeof *files);
	const char **names = calloc(g->nout + 1, sizeof *names);
	if (!slot || !slot_of || !bound || !isbound || !values || !args || !inputs || !outputs ||
	    !files || !names) {
		fprintf(stderr, "fadc: error: out of memory\n");
		goto done;
	}
	for (uint32_t i = 0; i < nd; i++, ns++) {
		slot[ns].name = m->decl[i].name;
		slot[ns].kind = SLOT_DECL;
		slot_shape(&slot[ns], m->decl[i].dtype, &m->decl[i].shape);
	}
	for (uint32_t i = 0; i < g->ninput; i++) {
		const Input *in = &g->input[i];
		slot_of[i] = -1;
		if (in->kind != IN_ARG)
			continue;
		slot_of[i] = (int)ns;
		slot[ns].name = in->name;
		slot[ns].kind = is_forward_arg(m->main, in->name) ? SLOT_ARG : SLOT_V;
		const Node *n = &g->node[in->node];
		slot_shape(&slot[ns++], (DType)n->dtype, &g->shape[n->shape]);
	}
	if (!bind_slots(slot, (int)ns, a->bind, a->nbind, a->task, a->allow_unused) ||
	    !draw_v(slot, (int)ns, a->seed))
		goto done;
	for (uint32_t i = 0; i < nd; i++)
		if (slot[i].bound) {
			if (!tensor_from_tio(&slot[i].val, &bound[i])) {
				fprintf(stderr, "fadc: error: out of memory\n");
				goto done;
			}
			isbound[i] = 1;
		}
	if (!ir_module_init(m, bound, isbound, values, a->seed, err, sizeof err)) {
		fprintf(stderr, "%s: error: %s\n", a->model, err);
		goto done;
	}
	ninit = 1;
	for (uint32_t i = 0; i < g->ninput; i++) {
		const Input *in = &g->input[i];
		if (slot_of[i] < 0) {
			inputs[i] = values[ir_module_find_decl(m, in->name)];
			continue;
		}
		const Slot *sl = &slot[slot_of[i]];
		if (!sl->bound) {
			fprintf(stderr, "%s: error: argument '%s' of forward was not bound (use --params FILE)\n",
			        a->model, in->name);
			goto done;
		}
		if (!tensor_from_tio(&sl->val, &args[i])) {
			fprintf(stderr, "fadc: error: out of memory\n");
			goto done;
		}
		inputs[i] = args[i];
	}
	if (!ir_interp(g, inputs, outputs, a->seed, err, sizeof err)) {
		fprintf(stderr, "%s: error: %s\n", a->model, err);
		goto done;
	}
	for (uint32_t i = 0; i < g->nout; i++) {
		const Output *o = &g->out[i];
		names[i] = o->name ? o->name : g->input[o->writeback].name;
		if (!tio_from_tensor(&outputs[i], &files[i])) {
			fprintf(stderr, "fadc: error: out of memory\n");
			goto done;
		}
	}
	const char *infiles[MAXBIND + 1];
	rc = write_outputs(a->out, names, files, outputs, (int)g->nout, a->print, infiles,
	                   run_inputs(a, infiles));
done:
	for (uint32_t i = 0; bound && i < nd; i++)
		ir_tensor_free(&bound[i]);
	for (uint32_t i = 0; ninit && i < nd; i++)
		ir_tensor_free(&values[i]);
	for (uint32_t i = 0; args && i < g->ninput; i++)
		ir_tensor_free(&args[i]);
	for (uint32_t i = 0; outputs && i < g->nout; i++)
		ir_tensor_free(&outputs[i]);
	for (uint32_t i = 0; files && i < g->nout; i++)
		tio_free(&files[i]);
	free_slots(slot, (int)ns);
	free(slot_of), free(bound), free(isbound), free(values), free(args), free(inputs),
	    free(outputs), free(files), free(names);
	ir_graph_free(g);
	ir_module_free(m);
	return rc;
}

// Is name a caller's input of `forward` in the artifact (an argument)?
static int
artifact_forward_arg(fadc_model *m, const char *name)
{
	int t;
	fadc_task_info info;
	if (fadc_model_find_task(m, "forward", &t) || fadc_task_info_get(m, t, &info))
		return 0;
	for (int i = 0; i < info.ninputs; i++) {
		fadc_tensor_desc d;
		if (!fadc_task_input(m, t, i, &d) && d.role == FADC_ROLE_INPUT && !strcmp(d.name, name))
			return 1;
	}
	return 0;
}

static void
slot_desc(Slot *sl, const fadc_tensor_desc *d, SlotKind kind)
{
	sl->name = d->name;
	sl->kind = kind;
	sl->dtype = tio_of_fadc(d->dtype);
	sl->rank = d->rank;
	memcpy(sl->dim, d->dim, sizeof(int64_t) * (size_t)d->rank);
}

// Does the specialisation name `spec` ("N=8,K=4") hold the -D option
// def ("N=8") as one of its items?
static int
spec_has(const char *spec, const char *def)
{
	size_t n = strlen(def);
	for (const char *p = spec; *p;) {
		size_t len = strcspn(p, ",");
		if (len == n && !strncmp(p, def, n))
			return 1;
		p += len + (p[len] == ',');
	}
	return 0;
}

// The task a->task of the artifact for `fadc run`: with -D options, the
// one specialisation whose sizes hold them all; without, the first.  0
// after a diagnostic.
static int
select_task(const RunArgs *a, fadc_model *m, int *task)
{
	if (fadc_model_find_task(m, a->task, task)) {
		fprintf(stderr, "%s: error: the artifact has no task '%s' (it has:", a->model, a->task);
		for (int t = 0, k = 0; t < fadc_model_task_count(m); t++) {
			fadc_task_info ti;
			if (!fadc_task_info_get(m, t, &ti) && !ti.is_init && ti.spec_index == 0)
				fprintf(stderr, "%s %s", k++ ? "," : "", ti.name);
		}
		fprintf(stderr, "); compile it with --tasks %s\n", a->task);
		return 0;
	}
	if (!a->ndefs)
		return 1;
	int nspec = fadc_model_spec_count(m);
	if (nspec <= 1) {
		fprintf(stderr, "%s: error: -D does not apply to a compiled model "
		                "(its sizes were fixed when it was compiled)\n", a->model);
		return 0;
	}
	int found = -1, nfound = 0;
	for (int t = 0; t < fadc_model_task_count(m); t++) {
		fadc_task_info ti;
		if (fadc_task_info_get(m, t, &ti) || ti.is_init || strcmp(ti.name, a->task))
			continue;
		int all = 1;
		for (int i = 0; i < a->ndefs; i++)
			all &= spec_has(ti.spec, a->defs[i]);
		if (all && !nfound++)
			found = t;
	}
	if (nfound == 1) {
		*task = found;
		return 1;
	}
	fprintf(stderr, "%s: error: -D", a->model);
	for (int i = 0; i < a->ndefs; i++)
		fprintf(stderr, " %s", a->defs[i]);
	fprintf(stderr, " %s (the specialisations:", nfound ? "fits several specialisations: give "
	                "more sizes" : "is no specialisation of the artifact");
	for (int i = 0; i < nspec; i++)
		fprintf(stderr, "%s %s", i ? "," : "", fadc_model_spec(m, i));
	fprintf(stderr, ")\n");
	return 0;
}

// `fadc run MODEL.so`: the task through the runtime, bound and drawn as
// run_ir does.  With specialisations, -D picks one (select_task); only its
// declarations and the shared ones are bound from --params.
static int
run_so(const RunArgs *a)
{
	fadc_context_options co = {.device = {FADC_DEVICE_CPU, 0}, .num_threads = a->num_threads, .seed = a->seed};
	fadc_context *ctx, *hctx = NULL;
	if (a->ngpus) {
		// On GPUs: the host's bindings and inputs are tensors of a CPU
		// context (hctx), which the runtime copies to the devices; outputs
		// are read back into host memory.
		co.device = (fadc_device){FADC_DEVICE_CUDA_LIST, 0};
		co.devices = a->gpus;
		co.ndevices = a->ngpus;
		fadc_context_options ho = {.device = {FADC_DEVICE_CPU, 0}, .num_threads = 1, .seed = a->seed};
		if (fadc_context_create(&ho, &hctx)) {
			fprintf(stderr, "fadc: error: cannot create a runtime context: %s\n", fadc_context_error(NULL));
			return 1;
		}
	}
	if (fadc_context_create(&co, &ctx)) {
		fprintf(stderr, "fadc: error: cannot create a runtime context: %s\n", fadc_context_error(NULL));
		fadc_context_destroy(hctx);
		return 1;
	}
	fadc_context *wctx = hctx ? hctx : ctx; // where host memory is wrapped
	fadc_model *m = NULL;
	int rc = 1, task, ns = 0, ncaller = 0;
	Slot *slot = NULL;
	fadc_tensor **in = NULL, **out = NULL;
	tio_tensor *files = NULL;
	const char **names = NULL;
	fadc_task_info info;
	if (open_model(ctx, a->model, 0, &m)) {
		rc = rt_error(a->model, ctx);
		goto done;
	}
	if (!select_task(a, m, &task))
		goto done;
	fadc_task_info_get(m, task, &info);
	int nd = fadc_model_decl_count(m), nds = 0;
	slot = calloc((size_t)(nd + info.ninputs) + 1, sizeof *slot);
	in = calloc((size_t)info.ninputs + 1, sizeof *in);
	out = calloc((size_t)info.noutputs + 1, sizeof *out);
	files = calloc((size_t)info.noutputs + 1, sizeof *files);
	names = calloc((size_t)info.noutputs + 1, sizeof *names);
	if (!slot || !in || !out || !files || !names) {
		fprintf(stderr, "fadc: error: out of memory\n");
		goto done;
	}
	for (int i = 0; i < nd; i++) {
		fadc_tensor_desc d;
		int has_init, sp = fadc_model_decl_spec(m, i);
		if (sp >= 0 && sp != info.spec_index)
			continue; // another specialisation's
		fadc_model_decl(m, i, &d, &has_init);
		slot_desc(&slot[ns++], &d, SLOT_DECL);
		nds++;
	}
	for (int i = 0; i < info.ninputs; i++) {
		fadc_tensor_desc d;
		fadc_task_input(m, task, i, &d);
		if (d.role == FADC_ROLE_INPUT)
			slot_desc(&slot[ns++], &d, artifact_forward_arg(m, d.name) ? SLOT_ARG : SLOT_V);
	}
	if (!bind_slots(slot, ns, a->bind, a->nbind, a->task, a->allow_unused) ||
	    !draw_v(slot, ns, a->seed))
		goto done;
	for (int i = 0; i < nds; i++) {
		if (!slot[i].bound)
			continue;
		fadc_tensor *t;
		Slot *sl = &slot[i];
		if (fadc_tensor_wrap(wctx, fadc_of_tio(sl->dtype), sl->rank, sl->dim, sl->val.data, &t)) {
			rc = rt_error(a->model, wctx);
			goto done;
		}
		fadc_status s = fadc_model_bind(m, sl->name, t);
		fadc_tensor_release(t);
		if (s) {
			rc = rt_error(a->model, ctx);
			goto done;
		}
	}
	if (fadc_model_init(m, a->seed)) {
		rc = rt_error(a->model, ctx);
		goto done;
	}
	for (int i = nds; i < ns; i++) {
		Slot *sl = &slot[i];
		if (!sl->bound) {
			fprintf(stderr, "%s: error: argument '%s' of forward was not bound (use --params FILE)\n",
			        a->model, sl->name);
			goto done;
		}
		if (fadc_tensor_wrap(wctx, fadc_of_tio(sl->dtype), sl->rank, sl->dim, sl->val.data,
		                     &in[ncaller])) {
			rc = rt_error(a->model, wctx);
			goto done;
		}
		ncaller++;
	}
	if (fadc_run(m, task, in, ncaller, out, info.noutputs)) {
		rc = rt_error(a->model, ctx);
		goto done;
	}
	if (a->time > 0) {
		// Steady state: the first run allocated; these reuse everything.
		struct timespec t0, t1;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		for (long r = 0; r < a->time; r++)
			if (fadc_run(m, task, in, ncaller, out, info.noutputs)) {
				rc = rt_error(a->model, ctx);
				goto done;
			}
		if (hctx && fadc_context_synchronize(ctx)) { // a device's runs are queued
			rc = rt_error(a->model, ctx);
			goto done;
		}
		clock_gettime(CLOCK_MONOTONIC, &t1);
		double us = ((double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec)) / 1e3;
		fprintf(stderr, "%s: %.3f us per call (%ld calls)\n", a->task, us / (double)a->time, a->time);
	}
	for (int i = 0; i < info.noutputs; i++) {
		fadc_tensor_desc d;
		fadc_task_output(m, task, i, &d);
		names[i] = d.name;
		files[i].dtype = tio_of_fadc(d.dtype);
		files[i].rank = d.rank;
		memcpy(files[i].dim, d.dim, sizeof(int64_t) * (size_t)d.rank);
		files[i].data = fadc_tensor_data(out[i]); // model-owned: not freed here
		if (hctx) {
			// On a GPU: read back (freed below, files[i].data is ours).
			size_t nb = fadc_tensor_bytes(out[i]);
			if (!(files[i].data = malloc(nb ? nb : 1))) {
				fprintf(stderr, "fadc: error: out of memory\n");
				goto done;
			}
			if (fadc_tensor_read(out[i], files[i].data, nb)) {
				rc = rt_error(a->model, ctx);
				goto done;
			}
		}
	}
	const char *infiles[MAXBIND + 1];
	rc = write_outputs(a->out, names, files, NULL, info.noutputs, a->print, infiles,
	                   run_inputs(a, infiles));
done:
	for (int i = 0; i < ncaller; i++)
		fadc_tensor_release(in[i]);
	free_slots(slot, ns);
	for (int i = 0; hctx && files && i < info.noutputs; i++)
		free(files[i].data);
	free(in), free(out), free(files), free(names);
	fadc_model_close(m);
	fadc_context_destroy(ctx);
	fadc_context_destroy(hctx);
	return rc;
}

// Is the file an artifact (ELF, or named .so) rather than IR text?
static int
is_artifact(const char *path)
{
	if (has_suffix(path, ".so"))
		return 1;
	// A FIFO or device is no artifact, and opening it must not block: the
	// IR reader then says what it is.
	FILE *f = fio_fopen_read(path, NULL, 0);
	unsigned char b[4] = {0};
	if (!f)
		return 0;
	size_t n = fread(b, 1, 4, f);
	fclose(f);
	return n == 4 && b[0] == 0x7f && b[1] == 'E' && b[2] == 'L' && b[3] == 'F';
}

static int
cmd_run_args(int argc, char **argv, RunArgs *a)
{
	int rc = 0;
	a->task = "forward";
	for (int i = 0; i < argc; i++) {
		const char *s = argv[i], *v;
		if (!strcmp(s, "-h") || !strcmp(s, "--help")) {
			fputs(usage_run, stdout);
			return -1;
		} else if (opt_define(argc, argv, &i, a->defs, &a->ndefs, usage_run, &rc) ||
		           opt_max_nodes(argc, argv, &i, &a->max_nodes, usage_run, &rc) ||
		           opt_const(argc, argv, &i, usage_run, &rc)) {
			if (rc)
				return rc;
		} else if (opt_value(argc, argv, &i, "--task", &v) ||
		           opt_value(argc, argv, &i, "--out", &v) ||
		           opt_value(argc, argv, &i, "--params", &v) ||
		           opt_value(argc, argv, &i, "--v", &v) ||
		           opt_value(argc, argv, &i, "--seed", &v) ||
		           opt_value(argc, argv, &i, "--time", &v) ||
		           opt_value(argc, argv, &i, "--num-threads", &v) ||
		           opt_value(argc, argv, &i, "--gpus", &v)) {
			const char *o = strncmp(s, "--", 2) ? s : s + 2;
			char opt[24];
			snprintf(opt, sizeof opt, "--%.*s", (int)strcspn(o, "="), o);
			if (!v)
				return usage_error(usage_run, "%s needs a value", opt);
			if (!strcmp(opt, "--task"))
				a->task = v;
			else if (!strcmp(opt, "--out"))
				a->out = v;
			else if (!strcmp(opt, "--seed")) {
				if (!parse_seed(v, &a->seed))
					return usage_error(usage_run, "--seed: '%s' is not a non-negative integer", v);
			} else if (!strcmp(opt, "--time")) {
				char *end;
				a->time = strtol(v, &end, 10);
				// Bounded as fadc-bench bounds --num-iters.
				if (!*v || *end || a->time <= 0 || a->time > 1000000)
					return usage_error(usage_run, "--time: '%s' is not an integer 1 .. 1000000", v);
			} else if (!strcmp(opt, "--gpus")) {
				// "0" or "0,1": GPU numbers, 1 .. FADC_MAX_DEVICES of them (the
				// runtime refuses one listed twice, or one the host lacks).
				a->ngpus = 0;
				for (const char *p = v;;) {
					char *end;
					long g = strtol(p, &end, 10);
					if (end == p || g < 0 || g > 1000000 || a->ngpus == FADC_MAX_DEVICES ||
					    (*end && *end != ','))
						return usage_error(usage_run, "--gpus: '%s' is not a list of GPU "
						                   "numbers such as 0,1", v);
					a->gpus[a->ngpus++] = (fadc_device){FADC_DEVICE_CUDA, (int)g};
					if (!*end)
						break;
					p = end + 1;
				}
			} else if (!strcmp(opt, "--num-threads")) {
				char *end;
				long n = strtol(v, &end, 10);
				if (!*v || *end || n < 1 || n > FADC_MAX_THREADS)
					return usage_error(usage_run, "--num-threads: '%s' is not an integer 1 .. 4096", v);
				a->num_threads = (int)n;
			} else {
				int is_v = !strcmp(opt, "--v");
				if (a->nbind == MAXBIND)
					return usage_error(usage_run, "too many %s options", opt);
				int r = parse_binding(v, is_v, &a->bind[a->nbind]);
				if (r < 0) {
					fprintf(stderr, "fadc: error: out of memory\n");
					return 1;
				} else if (!r) {
					char msg[200];
					snprintf(msg, sizeof msg, "%s %.100s: expected a .npy or .safetensors file, "
					         "or NAME=FILE.npy", opt, v);
					return usage_error(usage_run, "%s", msg);
				}
				a->nbind++;
			}
		} else if (!strcmp(s, "--print")) {
			a->print = 1;
		} else if (!strcmp(s, "--allow-unused-params")) {
			a->allow_unused = 1;
		} else if (s[0] == '-') {
			return usage_error(usage_run, "unknown option '%s'", s);
		} else if (a->model) {
			return usage_error(usage_run, "more than one model given ('%s')", s);
		} else
			a->model = s;
	}
	if (!a->model)
		return usage_error(usage_run, "no model given%s", "");
	if (!a->out && !a->print)
		return usage_error(usage_run, "--out DIR is required (or --print, to print only)%s", "");
	if (task_lookup(a->task) < 0)
		return usage_error(usage_run, "unknown task '%s'", a->task);
	return 0;
}

int
cmd_run(int argc, char **argv)
{
	RunArgs *a = calloc(1, sizeof *a);
	if (!a) {
		fprintf(stderr, "fadc: error: out of memory\n");
		return 1;
	}
	int rc = cmd_run_args(argc, argv, a);
	if (rc == 0) {
		int so = is_artifact(a->model);
		if (!so && has_define_list(a->defs, a->ndefs))
			rc = usage_error(usage_run, "-D with a list of values is for compiling (fadc -o); "
			                 "run takes one value per size%s", "");
		else if (!so && a->time)
			rc = usage_error(usage_run, "--time needs a compiled model (MODEL.so)%s", "");
		else if (!so && a->ngpus)
			rc = usage_error(usage_run, "--gpus needs a compiled model (MODEL.so)%s", "");
		else {
			// `fadc run model.onnx` runs on the model's own weights: its float
			// initializers are bound after every explicit binding (which win),
			// unless the model's file is already among them.
			int own = !so && has_suffix(a->model, ".onnx");
			for (int b = 0; own && b < a->nbind; b++)
				own = a->bind[b].name || strcmp(a->bind[b].path, a->model);
			if (own && a->nbind == MAXBIND)
				rc = usage_error(usage_run, "too many --params options%s", "");
			else {
				if (own)
					a->bind[a->nbind++] = (Binding){.path = a->model, .implicit = 1};
				rc = so ? run_so(a) : run_ir(a);
			}
		}
	} else if (rc < 0)
		rc = 0; // --help
	for (int b = 0; b < a->nbind; b++)
		free(a->bind[b].name);
	free(a);
	return rc;
}
