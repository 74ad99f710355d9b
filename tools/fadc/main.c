// frontend/main.c -- the `fadc` command line.
//
//   fadc MODEL.ir --emit ir [--task T] [-D NAME=VALUE]... [pass options]
//   fadc MODEL.ir -o MODEL.so [--target cpu|cuda|cpu,cuda] [--tasks LIST] [-O0..3] [--cpu CPU] ...
//   fadc run MODEL.ir|MODEL.so --task T [--params FILE]... [--v FILE]... [--seed N]
//            --out DIR [--print]
//   fadc inspect MODEL.so
//   fadc check MODEL.ir [--tasks LIST|all] [--tol X]
//   fadc compare-npy A B [--rtol R]
//
// It is its own target, linked on top of every library, and the only place
// that knows about all of them: the frontend parses, passes/tasks.c derives
// a task's graph, the interpreter runs it (`run MODEL.ir`), codegen compiles
// every task into an artifact (`-o`), and the runtime of include/fadc.h
// runs an artifact (`run MODEL.so`).
//
// `run` does the same on both kinds of model, so that their outputs can be
// compared file by file: the same bindings (--params for declarations and
// forward's arguments, --v for the task's own inputs v, v.<p>), the same v
// when none is bound (U[0, 1) from the run seed, keyed by the input's name
// as fadc-bench draws it: ir_rand_name_key), the same .npy outputs.
//
// Exit status: 0 success, 1 an error in the user's input (a diagnostic was
// printed), 2 a usage error.
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "artifact.h"
#include "fileio.h"
#include "codegen.h"
#include "fadc.h"
#include "frontend.h"
#include "ir.h"
#include "passes.h"
#include "tensorio.h"

#define MAXDEF 64 // -D options
#define MAXBIND 64 // --params and --v options
#define MAXTASK 32 // names in --tasks

static const char *const usage_main =
    "usage: fadc MODEL.ir --emit ir [--task T] [-D NAME=VALUE]... [pass options]\n"
    "       fadc MODEL.ir -o MODEL.so [compile options]\n"
    "       fadc run MODEL.ir|MODEL.so --task T [options] --out DIR\n"
    "       fadc inspect MODEL.so\n"
    "       fadc check MODEL.ir [options]\n"
    "       fadc compare-npy A B [--rtol R]\n"
    "\n"
    "Compiles a model written in the fadc IR (docs/IR.md).  `fadc COMMAND --help`\n"
    "describes run, inspect, check and compare-npy.\n"
    "\n"
    "  --emit ir          print the canonical IR of the model, or with --task that of\n"
    "                     the task's derived, simplified graph (the default when\n"
    "                     --task is given without -o)\n"
    "  --task T           forward vjp jvp vhp hvp jacobian jacrev jacfwd hessian\n"
    "                     hessian_fwdrev hessian_revrev (docs/TASKS.md)\n"
    "  -D NAME=VALUE      override the size `let NAME` (also -DNAME=VALUE)\n"
    "  -D NAME=V1,V2,...  (with -o) specialisations: the artifact holds the model\n"
    "                     compiled for each value, and for every combination of\n"
    "                     several lists, at most 16 (docs/ARTIFACT.md)\n"
    "  --no-prelude       do not load the prelude of composite functions\n"
    "  -h, --help         this help\n"
    "  --version          fadc's version, its artifact format, LLVM's and NVRTC's\n"
    "\n"
    "Pass options (with --task; dumps and statistics go to stderr):\n"
    "  --print-after=PASS[,PASS]  print the graph after each run of these passes\n"
    "  --print-after-all          print the graph after every pass\n"
    "  --stop-after=PASS          stop after the first run of PASS; print that graph\n"
    "  --stats                    node counts after each pass (with -o: each task's\n"
    "                             kernels and memory plan)\n"
    "  The passes: simplify, vjp, jvp, vmap.\n"
    "\n"
    "Compile options (-o):\n"
    "  -o FILE            write the artifact (a shared library, docs/ARTIFACT.md)\n"
    "  --target T         cpu (default), cuda or cpu,cuda: the code the tasks get\n"
    "                     (cuda: kernels compiled by NVRTC, embedded; docs/CUDA.md)\n"
    "  --cuda-arch ARCH   the cubin's architecture (sm_90); PTX for compute_XX too\n"
    "  --allow-tf32       cuBLAS GEMMs of f32 may round their inputs to TF32 (tensor\n"
    "                     cores; recorded in the artifact); default: fp32 semantics\n"
    "  --tasks LIST       comma-separated tasks, or `all`; forward is always in.\n"
    "                     Default: the model's `tasks` declaration (docs/IR.md),\n"
    "                     else forward,vjp,jvp,vhp,hvp (vhp and hvp only when\n"
    "                     forward returns one float scalar)\n"
    "  -O0 -O1 -O2 -O3    LLVM's optimization level (-O2)\n"
    "  --cpu CPU          x86-64-v3 (default, portable), native, generic, x86-64,\n"
    "                     x86-64-v2, x86-64-v4\n"
    "  --emit kir|llvm|cuda  also print the kernel IR, the optimized LLVM IR or the\n"
    "                     CUDA C given to NVRTC (with --target cuda)\n"
    "  --max-task-bytes N the most memory one task may need, its outputs plus its\n"
    "                     intermediates (64G; K M G T are powers of 1024): a task\n"
    "                     needing more is an error, nothing is written\n"
    "  --f64              compute f32 values in f64 (testing)\n";

static const char *const usage_run =
    "usage: fadc run MODEL.ir|MODEL.so --task T [options] --out DIR\n"
    "\n"
    "Runs a task of a model and writes each output as DIR/<name>.npy: a .ir\n"
    "model with the float64 reference interpreter, a compiled .so through the\n"
    "runtime (include/fadc.h).  Both bind and draw their inputs the same way.\n"
    "\n"
    "  --task T           the task to run (forward); see `fadc --help`\n"
    "  --params FILE      bind parameters, constants and arguments of forward\n"
    "                     by name from a .safetensors file, or one from a .npy\n"
    "                     file named after it (NAME.npy), or NAME=FILE.npy;\n"
    "                     repeatable.  The rest come from their initializers.\n"
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
    "  -D NAME=VALUE      override the size `let NAME` (a .ir); for a .so compiled\n"
    "                     with -D lists, pick the specialisation of those sizes\n"
    "                     (without -D: the first one, as `fadc inspect` lists them)\n"
    "  -h, --help         this help\n";

static const char *const usage_inspect =
    "usage: fadc inspect MODEL.so\n"
    "\n"
    "Prints the descriptor of an artifact, read and checked without loading its\n"
    "code: model, source hash, target, options, declarations, and each task's\n"
    "inputs, outputs and memory plan.\n";

static const char *const usage_check =
    "usage: fadc check MODEL.ir [-D NAME=VALUE]... [--tasks LIST|all] [--f64] [--rtol R]\n"
    "                  [--seed N] [-v]\n"
    "\n"
    "Compiles the model (to a temporary file), runs every task through the runtime\n"
    "and through the reference interpreter on the same inputs, and reports each\n"
    "output's normalized error max|got - want| / max(|got|, |want|), the measure of\n"
    "compare-npy.  Exits 1 if one is above R (1e-5; 2e-7 with --f64).  --tol is\n"
    "the old name of --rtol.\n";

static const char *const usage_compare =
    "usage: fadc compare-npy A B [--rtol R]\n"
    "\n"
    "Compares two .npy files, or every .npy file of folder A with the one of the\n"
    "same name in folder B (both must hold the same names).  Each pair must have\n"
    "the same dtype and shape, and a normalized error max|a - b| / max(|a|, |b|)\n"
    "of at most R (1e-5); NaNs must sit at the same places.  Prints one line per\n"
    "file and exits 1 on a difference.\n";

static const char *const pass_names[] = {"simplify", "vjp", "jvp", "vmap", NULL};

// ---------------------------------------------------------------- helpers

// The command a usage text belongs to, for "try 'fadc run --help'".
static const char *
usage_command(const char *usage)
{
	return usage == usage_run       ? "fadc run"
	       : usage == usage_inspect ? "fadc inspect"
	       : usage == usage_check   ? "fadc check"
	       : usage == usage_compare ? "fadc compare-npy"
	                                : "fadc";
}

// A usage error: the one-line reason and where the help is, as GNU tools
// and clang do (the whole help text would bury the reason).  Exit status 2.
static int
usage_error(const char *usage, const char *fmt, const char *arg)
{
	fprintf(stderr, "fadc: error: ");
	fprintf(stderr, fmt, arg);
	fprintf(stderr, "\ntry '%s --help' for more information\n", usage_command(usage));
	return 2;
}

// Is argv[*i] the option `name` with a value?  Takes "--name VALUE" and
// "--name=VALUE"; *val is NULL when the value is missing.
static int
opt_value(int argc, char **argv, int *i, const char *name, const char **val)
{
	const char *a = argv[*i];
	size_t n = strlen(name);
	if (strncmp(a, name, n))
		return 0;
	if (a[n] == '=') {
		*val = a + n + 1;
		return 1;
	}
	if (a[n])
		return 0;
	*val = *i + 1 < argc ? argv[++*i] : NULL;
	return 1;
}

// -D NAME=VALUE and -DNAME=VALUE: 1 if argv[*i] is one (and then *usage
// is set on a usage error), 0 if it is another option.
static int
opt_define(int argc, char **argv, int *i, const char **defs, int *ndefs, const char *usage,
           int *rc)
{
	const char *a = argv[*i];
	if (strncmp(a, "-D", 2))
		return 0;
	const char *v = a[2] ? a + 2 : *i + 1 < argc ? argv[++*i] : NULL;
	if (!v) {
		*rc = usage_error(usage, "%s needs a value", "-D");
		return 1;
	}
	if (*ndefs == MAXDEF) {
		*rc = usage_error(usage, "too many -D options%s", "");
		return 1;
	}
	// One -D per size: a second one is a typo or a leftover, never silently
	// the winner (a list N=8,32 is how several values are given).
	size_t nl = strcspn(v, "=");
	for (int k = 0; k < *ndefs; k++)
		if (strcspn(defs[k], "=") == nl && !strncmp(defs[k], v, nl)) {
			char msg[320];
			snprintf(msg, sizeof msg, "-D %.60s: size '%.*s' is already given by -D %.60s (give "
			         "it once; N=8,32 lists values for specialisations)", v, (int)(nl > 40 ? 40 : nl),
			         v, defs[k]);
			*rc = usage_error(usage, "%s", msg);
			return 1;
		}
	defs[(*ndefs)++] = v;
	return 1;
}

// Is one of the -D options a list (a comma in its value)?
static int
has_define_list(const char *const *defs, int ndefs)
{
	for (int i = 0; i < ndefs; i++) {
		const char *eq = strchr(defs[i], '=');
		if (eq && strchr(eq, ','))
			return 1;
	}
	return 0;
}

static int
parse_seed(const char *v, uint64_t *seed)
{
	char *end;
	errno = 0;
	unsigned long long s = strtoull(v, &end, 10);
	if (!*v || *end || errno || v[0] == '-')
		return 0;
	*seed = s;
	return 1;
}

static int
has_suffix(const char *s, const char *suffix)
{
	size_t n = strlen(s), k = strlen(suffix);
	return n >= k && !strcmp(s + n - k, suffix);
}

// A message "<path>: <what>" (tensorio, the runtime) printed as a
// diagnostic, "<path>: error: <what>".
// A path longer than this is printed as its beginning, "[...]" and its end.
enum { SHOW_PATH = 400 };

static void
path_error(const char *path, const char *err)
{
	size_t n = strlen(path);
	if (!strncmp(err, path, n) && err[n] == ':' && err[n + 1] == ' ')
		err += n + 2;
	if (n > SHOW_PATH)
		fprintf(stderr, "%.*s[...]%s: error: %s\n", SHOW_PATH / 2, path,
		        path + n - SHOW_PATH / 2, err);
	else
		fprintf(stderr, "%s: error: %s\n", path, err);
}

// A pass or codegen failure: at its source position with a caret when it
// has one, else at the model's file.
static void
report_error(const Module *m, const char *model, Loc loc, const char *err)
{
	if (loc && m->src && loc < m->src->nloc) {
		Diag d = {.out = stderr, .src = m->src};
		diag_emit(&d, loc, "%s", err);
	} else
		fprintf(stderr, "%s: error: %s\n", model, err);
}

static enum tio_dtype
tio_of(DType t)
{
	return t == DT_F64 ? TIO_F64 : t == DT_I64 ? TIO_I64 : t == DT_BOOL ? TIO_BOOL : TIO_F32;
}

static DType
dtype_of(enum tio_dtype t)
{
	return t == TIO_F64 ? DT_F64 : t == TIO_I64 ? DT_I64 : t == TIO_BOOL ? DT_BOOL : DT_F32;
}

static enum tio_dtype
tio_of_fadc(fadc_dtype t)
{
	return t == FADC_F64 ? TIO_F64 : t == FADC_I64 ? TIO_I64 : t == FADC_BOOL ? TIO_BOOL : TIO_F32;
}

static fadc_dtype
fadc_of_tio(enum tio_dtype t)
{
	return t == TIO_F64 ? FADC_F64 : t == TIO_I64 ? FADC_I64 : t == TIO_BOOL ? FADC_BOOL : FADC_F32;
}

// "f32[11, 1]", as ir_type_str writes it.
static void
type_str(enum tio_dtype dt, int rank, const int64_t *dim, char *buf, size_t n)
{
	int k = snprintf(buf, n, "%s[", tio_dtype_name(dt));
	for (int i = 0; i < rank && k >= 0 && (size_t)k < n; i++)
		k += snprintf(buf + k, n - (size_t)k, "%s%" PRId64, i ? ", " : "", dim[i]);
	if (k >= 0 && (size_t)k < n)
		snprintf(buf + k, n - (size_t)k, "]");
}

static double
elem(const tio_tensor *t, int64_t i)
{
	switch (t->dtype) {
	case TIO_F32:
		return ((const float *)t->data)[i];
	case TIO_F64:
		return ((const double *)t->data)[i];
	case TIO_I64:
		return (double)((const int64_t *)t->data)[i];
	case TIO_BOOL:
		return ((const uint8_t *)t->data)[i];
	}
	return 0;
}

static void
set_elem(tio_tensor *t, int64_t i, double v)
{
	switch (t->dtype) {
	case TIO_F32:
		((float *)t->data)[i] = (float)v;
		break;
	case TIO_F64:
		((double *)t->data)[i] = v;
		break;
	case TIO_I64:
		((int64_t *)t->data)[i] = (int64_t)v;
		break;
	case TIO_BOOL:
		((uint8_t *)t->data)[i] = v != 0;
		break;
	}
}

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

static int is_dir(const char *path);

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

// Writes out[i] as DIR/<names[i]>.npy and prints them with --print
// (exact: see print_value).  All or nothing: the files are written into a
// temporary folder first (beside DIR when DIR is new, inside it when it
// exists, so that renames stay on one filesystem), and only once every one
// is written is the folder renamed to DIR, or each file renamed into it.  A
// failure leaves DIR as it was.  An output that is one of the run's input
// files (inputs[0..ninputs)) is refused before anything is written.
static int
write_outputs(const char *dir, const char *const *names, const tio_tensor *out,
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
			char *path = malloc(strlen(dir) + strlen(names[i]) + 8);
			if (!path) {
				fprintf(stderr, "fadc: error: out of memory\n");
				return 1;
			}
			sprintf(path, "%s/%s.npy", dir, names[i]);
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
			if (!(tpath[i] = malloc(strlen(tmp) + strlen(names[i]) + 8))) {
				fprintf(stderr, "fadc: error: out of memory\n");
				rc = 1;
				break;
			}
			sprintf(tpath[i], "%s/%s.npy", tmp, names[i]);
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
				char *path = malloc(strlen(dir) + strlen(names[i]) + 8);
				if (!path) {
					fprintf(stderr, "fadc: error: out of memory\n");
					rc = 1;
					break;
				}
				sprintf(path, "%s/%s.npy", dir, names[i]);
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

// ---------------------------------------------------------------- bindings

// A tensor file given on the command line: --params or --v.
typedef struct Binding {
	char *name; // NAME=FILE.npy or FILE.npy's base name; NULL: a .safetensors file
	const char *path;
	int is_v; // --v: binds the task's own inputs
} Binding;

// Something a run can bind: a declaration, an argument of forward, or an
// input of the task's own (v).  Both kinds of model describe themselves
// as a list of these, so binding and drawing v is one piece of code.
typedef enum SlotKind { SLOT_DECL, SLOT_ARG, SLOT_V } SlotKind;

typedef struct Slot {
	const char *name;
	SlotKind kind;
	enum tio_dtype dtype;
	int rank;
	int64_t dim[TIO_MAXDIM];
	tio_tensor val; // the bound or drawn value (bound = 0: none)
	int bound;
	const char *bound_by; // the file that bound it (bound twice is an error)
} Slot;

// Parses the value of --params / --v into b: 1, or 0 on a usage error, or
// -1 out of memory.
static int
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
		b->name = strndup(base, strlen(base) - 4);
		b->path = v;
	} else if (!eq && has_suffix(v, ".safetensors")) {
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
static int
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
static int
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

static void
free_slots(Slot *s, int n)
{
	for (int i = 0; s && i < n; i++)
		tio_free(&s[i].val);
	free(s);
}

static void
slot_shape(Slot *sl, DType dt, const Shape *shape)
{
	sl->dtype = tio_of(dt);
	sl->rank = shape->rank;
	memcpy(sl->dim, shape->dim, sizeof(int64_t) * (size_t)shape->rank);
}

// ---------------------------------------------------------------- run

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
	FeOptions fo = {.defines = a->defs, .ndefines = a->ndefs, .diag = stderr};
	Module *m = fe_parse_file(a->model, &fo);
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

// The runtime's last message, as a diagnostic at the artifact's path.
static int
rt_error(const char *path, fadc_context *ctx)
{
	const char *msg = fadc_context_error(ctx);
	if (!strncmp(msg, "./", 2) && strchr(path, '/') == NULL)
		msg += 2; // opened as ./path (open_model)
	path_error(path, msg);
	return 1;
}

// fadc_model_open, with a bare file name made ./NAME: dlopen searches the
// library path for a name without a slash, never the current folder.
static fadc_status
open_model(fadc_context *ctx, const char *path, unsigned flags, fadc_model **m)
{
	if (strchr(path, '/'))
		return fadc_model_open(ctx, path, flags, m);
	char *p = malloc(strlen(path) + 3);
	if (!p) {
		*m = NULL;
		return FADC_ERR_NOMEM;
	}
	sprintf(p, "./%s", path);
	fadc_status s = fadc_model_open(ctx, p, flags, m);
	free(p);
	return s;
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
	fadc_context_options co = {{FADC_DEVICE_CPU, 0}, a->num_threads, a->seed};
	fadc_context *ctx;
	if (fadc_context_create(&co, &ctx)) {
		fprintf(stderr, "fadc: error: cannot create a runtime context: %s\n", fadc_context_error(NULL));
		return 1;
	}
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
		if (fadc_tensor_wrap(ctx, fadc_of_tio(sl->dtype), sl->rank, sl->dim, sl->val.data, &t)) {
			rc = rt_error(a->model, ctx);
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
		if (fadc_tensor_wrap(ctx, fadc_of_tio(sl->dtype), sl->rank, sl->dim, sl->val.data,
		                     &in[ncaller])) {
			rc = rt_error(a->model, ctx);
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
	}
	const char *infiles[MAXBIND + 1];
	rc = write_outputs(a->out, names, files, NULL, info.noutputs, a->print, infiles,
	                   run_inputs(a, infiles));
done:
	for (int i = 0; i < ncaller; i++)
		fadc_tensor_release(in[i]);
	free_slots(slot, ns);
	free(in), free(out), free(files), free(names);
	fadc_model_close(m);
	fadc_context_destroy(ctx);
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
		} else if (opt_define(argc, argv, &i, a->defs, &a->ndefs, usage_run, &rc)) {
			if (rc)
				return rc;
		} else if (opt_value(argc, argv, &i, "--task", &v) ||
		           opt_value(argc, argv, &i, "--out", &v) ||
		           opt_value(argc, argv, &i, "--params", &v) ||
		           opt_value(argc, argv, &i, "--v", &v) ||
		           opt_value(argc, argv, &i, "--seed", &v) ||
		           opt_value(argc, argv, &i, "--time", &v) ||
		           opt_value(argc, argv, &i, "--num-threads", &v)) {
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

static int
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
		else
			rc = so ? run_so(a) : run_ir(a);
	} else if (rc < 0)
		rc = 0; // --help
	for (int b = 0; b < a->nbind; b++)
		free(a->bind[b].name);
	free(a);
	return rc;
}

// ---------------------------------------------------------------- inspect

static void
print_desc(const fadc_tensor_desc *d, const char *dir, const char *spec)
{
	static const char *const roles[] = {"param", "const", "input", "output"};
	char ty[256];
	type_str(tio_of_fadc(d->dtype), d->rank, d->dim, ty, sizeof ty);
	if (spec)
		printf("  %s %-28s %-6s %-16s [%s]\n", dir, d->name, roles[d->role], ty, spec);
	else
		printf("  %s %-28s %-6s %s\n", dir, d->name, roles[d->role], ty);
}

// The phases of a fused task (runs of kernels between barriers,
// docs/CUDA.md), which codegen/cuda.c writes into the fused kernel's name,
// fadc_<task>_k0_fused_<N>phases; 0 when the descriptor does not say.
static unsigned
fused_phases(const ArtDesc *d, int task)
{
	const ArtTask *a = (uint32_t)task < d->ntask ? &d->task[task] : NULL;
	const char *s;
	unsigned n;
	char tail[16];
	if (!a || !(a->targets & ART_TARGET_CUDA) || a->ncuda != 1 ||
	    !(s = strstr(a->kern[0].name, "_fused_")))
		return 0;
	if (sscanf(s, "_fused_%u%15s", &n, tail) == 2 && !strcmp(tail, "phases"))
		return n;
	return 0;
}

static int
cmd_inspect(int argc, char **argv)
{
	const char *path = NULL;
	for (int i = 0; i < argc; i++) {
		if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			fputs(usage_inspect, stdout);
			return 0;
		} else if (argv[i][0] == '-')
			return usage_error(usage_inspect, "unknown option '%s'", argv[i]);
		else if (path)
			return usage_error(usage_inspect, "more than one model given ('%s')", argv[i]);
		path = argv[i];
	}
	if (!path)
		return usage_error(usage_inspect, "no model given%s", "");
	fadc_context *ctx;
	fadc_model *m;
	if (fadc_context_create(NULL, &ctx)) {
		fprintf(stderr, "fadc: error: cannot create a runtime context\n");
		return 1;
	}
	if (open_model(ctx, path, FADC_OPEN_DESCRIBE, &m)) {
		rt_error(path, ctx);
		fadc_context_destroy(ctx);
		return 1;
	}
	// The launch records themselves (GEMMs, TF32, a fused kernel's phases)
	// are not in fadc.h's task info: the descriptor, read again (checked as
	// by the open); its tasks are the runtime's, in the same order.
	ArtDesc desc = {0};
	uint8_t *dbytes = NULL;
	size_t dlen = 0;
	char derr[512];
	int hasdesc = art_read(path, &desc, &dbytes, &dlen, derr, sizeof derr) == ART_READ_OK;
	printf("model %s\n", fadc_model_name(m));
	printf("source_hash %s\n", fadc_model_info(m, "source_hash"));
	printf("triple %s\ncpu %s\nfeatures %s\n", fadc_model_info(m, "triple"),
	       fadc_model_info(m, "cpu"), fadc_model_info(m, "features"));
	printf("options %s\n", fadc_model_info(m, "options"));
	int nspec = fadc_model_spec_count(m);
	if (nspec > 1)
		for (int i = 0; i < nspec; i++)
			printf("specialisation %d: %s\n", i, fadc_model_spec(m, i));
	for (int i = 0; i < fadc_model_decl_count(m); i++) {
		fadc_tensor_desc d;
		int has_init, sp = fadc_model_decl_spec(m, i);
		fadc_model_decl(m, i, &d, &has_init);
		print_desc(&d, has_init ? "decl" : "bind",
		           nspec > 1 && sp >= 0 ? fadc_model_spec(m, sp) : NULL);
	}
	for (int t = 0; t < fadc_model_task_count(m); t++) {
		fadc_task_info info;
		fadc_task_info_get(m, t, &info);
		printf("task %s%s%s%s: %d kernels, arena %" PRIu64 " bytes (naive %" PRIu64 "), code %s\n",
		       info.name, info.spec[0] ? " [" : "", info.spec, info.spec[0] ? "]" : "",
		       info.nkernels, info.arena_bytes, info.naive_bytes,
		       info.targets == FADC_TARGET_CPU    ? "cpu"
		       : info.targets == FADC_TARGET_CUDA ? "cuda"
		                                          : "cpu,cuda");
		const ArtTask *at = hasdesc && (uint32_t)t < desc.ntask ? &desc.task[t] : NULL;
		// GEMM records and choices (a choice record, then its candidates:
		// records that run one at a time, not counted as launches).
		int ngemm = 0, ntf32 = 0, nchoice = 0, nrec = 0;
		for (uint32_t k = 0; at && (at->targets & ART_TARGET_CUDA) && k < at->ncuda; k++) {
			nrec += at->kern[k].kind == ART_LAUNCH_GEMM;
			ntf32 += at->kern[k].kind == ART_LAUNCH_GEMM && at->kern[k].gemm.tf32;
		}
		for (uint32_t k = 0; at && (at->targets & ART_TARGET_CUDA) && k < at->ncuda; k++) {
			if (at->kern[k].kind == ART_LAUNCH_CHOICE) {
				nchoice++;
				k += (uint32_t)at->kern[k].points;
			} else
				ngemm += at->kern[k].kind == ART_LAUNCH_GEMM;
		}
		unsigned nph = hasdesc ? fused_phases(&desc, t) : 0;
		int nother = info.cuda_launches - ngemm - nchoice;
		char choices[64] = "";
		if (nchoice)
			snprintf(choices, sizeof choices, ", %d choice%s timed on the GPU", nchoice,
			         nchoice == 1 ? "" : "s");
		if ((info.targets & FADC_TARGET_CUDA) && (ngemm || nchoice))
			printf("  cuda: %d launches (%d kernel%s or host step%s, %d cuBLAS GEMM%s%s%s)\n",
			       info.cuda_launches, nother, nother == 1 ? "" : "s", nother == 1 ? "" : "s",
			       ngemm, ngemm == 1 ? "" : "s", choices, ntf32 ? ", TF32 allowed" : "");
		else if ((info.targets & FADC_TARGET_CUDA) && nph)
			printf("  cuda: 1 launch (the task fused into one kernel), %u phase%s\n", nph,
			       nph == 1 ? "" : "s");
		else if (info.targets & FADC_TARGET_CUDA)
			printf("  cuda: %d launch%s\n", info.cuda_launches,
			       info.cuda_launches == 1 ? " (the task fused into one kernel)" : "es");
		for (uint32_t k = 0, ci = 0; nchoice && k < at->ncuda; k++) {
			const ArtKernel *kk = &at->kern[k];
			if (kk->kind != ART_LAUNCH_CHOICE)
				continue;
			printf("  choice %u: record %u, %" PRIu64 " candidates, the faster on the GPU runs:",
			       ci++, k, kk->points);
			for (uint32_t j = k + 1; j <= k + kk->points; j++)
				printf(" %u %s %s", j, at->kern[j].kind == ART_LAUNCH_GEMM ? "gemm" : "kernel",
				       at->kern[j].name);
			printf("\n");
		}
		for (uint32_t k = 0; nrec && k < at->ncuda; k++) {
			const ArtKernel *kk = &at->kern[k];
			const ArtGemm *g = &kk->gemm;
			if (kk->kind != ART_LAUNCH_GEMM)
				continue;
			printf("  gemm %u: %s batch=%u M=%u N=%u K=%u ta=%u tb=%u lda=%" PRIu64
			       " ldb=%" PRIu64 " ldc=%" PRIu64 " sa=%" PRIu64 " sb=%" PRIu64
			       " sc=%" PRIu64 " oa=%" PRIu64 " ob=%" PRIu64 " oc=%" PRIu64 "%s\n",
			       k, g->dtype == ART_F64 ? "f64" : "f32", g->batch, g->m, g->n, g->k, g->ta,
			       g->tb, g->lda, g->ldb, g->ldc, g->sa, g->sb, g->sc, g->oa, g->ob, g->oc,
			       g->tf32 ? " tf32" : "");
		}
		for (int i = 0; i < info.ninputs; i++) {
			fadc_tensor_desc d;
			fadc_task_input(m, t, i, &d);
			print_desc(&d, "in ", NULL);
		}
		for (int i = 0; i < info.noutputs; i++) {
			fadc_tensor_desc d;
			fadc_task_output(m, t, i, &d);
			print_desc(&d, "out", NULL);
		}
	}
	if (hasdesc)
		art_desc_free(&desc);
	free(dbytes);
	fadc_model_close(m);
	fadc_context_destroy(ctx);
	return 0;
}

// ---------------------------------------------------------------- compare-npy

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

static int
is_dir(const char *path)
{
	struct stat st;
	return !stat(path, &st) && S_ISDIR(st.st_mode);
}

static int
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

// ---------------------------------------------------------------- compile

typedef struct CompileArgs {
	const char *model, *emit, *task, *out, *target, *cpu, *cuda_arch;
	const char *print_after, *stop_after;
	const char *defs[MAXDEF];
	int ndefs, noprelude, print_after_all, stats, opt_level, f64, allow_tf32;
	int64_t max_task_bytes; // --max-task-bytes; 0: the default (CG_MAX_TASK_BYTES)
	char *tasklist; // --tasks, split in place
	const char *tasks[MAXTASK];
	int ntasks;
} CompileArgs;

// A size in bytes: digits, then optionally K, M, G or T (powers of 1024);
// positive, at most 2^62.  0 when it is not one.
static int
parse_bytes(const char *s, int64_t *out)
{
	if (*s < '0' || *s > '9')
		return 0;
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	int shift = *end == 'K' ? 10 : *end == 'M' ? 20 : *end == 'G' ? 30 : *end == 'T' ? 40 : 0;
	if (shift)
		end++;
	if (errno || *end || v == 0 || v > (1ull << 62) >> shift)
		return 0;
	*out = (int64_t)(v << shift);
	return 1;
}

// Checks a comma list of pass names; 0 after a usage error.
static int
check_passes(const char *opt, const char *list, int *rc)
{
	for (const char *p = list; p;) {
		const char *c = strchr(p, ',');
		size_t len = c ? (size_t)(c - p) : strlen(p);
		int known = 0;
		for (int k = 0; pass_names[k]; k++)
			known |= strlen(pass_names[k]) == len && !strncmp(pass_names[k], p, len);
		if (!known) {
			char msg[200];
			snprintf(msg, sizeof msg, "%s: unknown pass '%.*s' (the passes: simplify, vjp, jvp, "
			         "vmap)", opt, (int)(len > 40 ? 40 : len), p);
			*rc = usage_error(usage_main, "%s", msg);
			return 0;
		}
		p = c ? c + 1 : NULL;
	}
	return 1;
}

static int
compile_args(int argc, char **argv, CompileArgs *a)
{
	int rc = 0;
	a->opt_level = -1;
	for (int i = 0; i < argc; i++) {
		const char *s = argv[i], *v;
		if (!strcmp(s, "-h") || !strcmp(s, "--help")) {
			fputs(usage_main, stdout);
			return -1;
		} else if (opt_define(argc, argv, &i, a->defs, &a->ndefs, usage_main, &rc)) {
			if (rc)
				return rc;
		} else if (!strcmp(s, "-o")) {
			if (i + 1 >= argc)
				return usage_error(usage_main, "%s needs a value", s);
			a->out = argv[++i];
			if (!strcmp(a->out, "-"))
				return usage_error(usage_main, "-o -: an artifact is a shared library, not text for "
				                               "standard output; give a file name%s", "");
			if (!*a->out)
				return usage_error(usage_main, "-o: the file name is empty%s", "");
		} else if (s[0] == '-' && s[1] == 'O' && s[2] >= '0' && s[2] <= '3' && !s[3]) {
			a->opt_level = s[2] - '0';
		} else if (opt_value(argc, argv, &i, "--emit", &v) ||
		           opt_value(argc, argv, &i, "--task", &v) ||
		           opt_value(argc, argv, &i, "--tasks", &v) ||
		           opt_value(argc, argv, &i, "--target", &v) ||
		           opt_value(argc, argv, &i, "--cpu", &v) ||
		           opt_value(argc, argv, &i, "--cuda-arch", &v) ||
		           opt_value(argc, argv, &i, "--max-task-bytes", &v) ||
		           opt_value(argc, argv, &i, "--print-after", &v) ||
		           opt_value(argc, argv, &i, "--stop-after", &v)) {
			char opt[32];
			snprintf(opt, sizeof opt, "%.*s", (int)strcspn(s, "="), s);
			if (!v)
				return usage_error(usage_main, "%s needs a value", opt);
			if (!strcmp(opt, "--emit")) {
				if (strcmp(v, "ir") && strcmp(v, "kir") && strcmp(v, "llvm") && strcmp(v, "cuda"))
					return usage_error(usage_main, "--emit: unknown kind '%s' (ir, kir, llvm, cuda)", v);
				a->emit = v;
			} else if (!strcmp(opt, "--task")) {
				if (task_lookup(v) < 0)
					return usage_error(usage_main, "unknown task '%s'", v);
				a->task = v;
			} else if (!strcmp(opt, "--tasks")) {
				free(a->tasklist);
				a->tasklist = strdup(v);
				a->ntasks = 0;
				for (char *t = strtok(a->tasklist, ","); t; t = strtok(NULL, ",")) {
					if (strcmp(t, "all") && task_lookup(t) < 0)
						return usage_error(usage_main, "--tasks: unknown task '%s'", t);
					if (a->ntasks == MAXTASK)
						return usage_error(usage_main, "--tasks: too many tasks%s", "");
					a->tasks[a->ntasks++] = t;
				}
				if (!a->ntasks)
					return usage_error(usage_main, "--tasks: no task in '%s'", v);
			} else if (!strcmp(opt, "--target")) {
				if (strcmp(v, "cpu") && strcmp(v, "cuda") && strcmp(v, "cpu,cuda") &&
				    strcmp(v, "cuda,cpu"))
					return usage_error(usage_main,
					                   "--target: unknown target '%s' (cpu, cuda, cpu,cuda)", v);
				a->target = v;
			} else if (!strcmp(opt, "--cuda-arch")) {
				if (strncmp(v, "sm_", 3) || !v[3])
					return usage_error(usage_main, "--cuda-arch: '%s' is not sm_XX (sm_90)", v);
				a->cuda_arch = v;
			} else if (!strcmp(opt, "--cpu")) {
				// The code generator's own list, checked now: a usage error
				// like --target's, before the model is read.
				char nm[128], feat[1024], lf[4096], e[256];
				if (!cg_llvm_cpu(v, nm, sizeof nm, feat, sizeof feat, lf, sizeof lf, e, sizeof e))
					return usage_error(usage_main, "%s", e);
				a->cpu = v;
			} else if (!strcmp(opt, "--max-task-bytes")) {
				if (!parse_bytes(v, &a->max_task_bytes))
					return usage_error(usage_main, "--max-task-bytes: '%s' is not a positive size "
					                               "(bytes, or with K, M, G or T: powers of 1024)", v);
			} else if (!strcmp(opt, "--print-after")) {
				if (!check_passes(opt, v, &rc))
					return rc;
				a->print_after = v;
			} else {
				if (strchr(v, ',') || !check_passes(opt, v, &rc))
					return rc ? rc : usage_error(usage_main, "--stop-after takes one pass ('%s')", v);
				a->stop_after = v;
			}
		} else if (!strcmp(s, "--print-after-all")) {
			a->print_after_all = 1;
		} else if (!strcmp(s, "--stats")) {
			a->stats = 1;
		} else if (!strcmp(s, "--f64")) {
			a->f64 = 1;
		} else if (!strcmp(s, "--allow-tf32")) {
			a->allow_tf32 = 1;
		} else if (!strcmp(s, "--no-prelude")) {
			a->noprelude = 1;
		} else if (s[0] == '-') {
			return usage_error(usage_main, "unknown option '%s'", s);
		} else if (a->model) {
			return usage_error(usage_main, "more than one model given ('%s')", s);
		} else
			a->model = s;
	}
	if (!a->model)
		return usage_error(usage_main, "no model given%s", "");
	int passopts = a->print_after || a->print_after_all || a->stop_after;
	if (!a->emit && !a->out && (a->task || passopts))
		a->emit = "ir"; // --task alone prints the task's graph
	if (!a->emit && !a->out)
		return usage_error(usage_main, "nothing to do: give --emit ir or -o FILE%s", "");
	if (a->emit && !strcmp(a->emit, "ir") && a->out)
		return usage_error(usage_main, "--emit ir prints IR and compiles nothing: drop -o or --emit%s",
		                   "");
	if (a->out) {
		if (a->task)
			return usage_error(usage_main, "--task is for --emit ir and run; -o compiles --tasks LIST%s",
			                   "");
		if (passopts)
			return usage_error(usage_main, "--print-after, --print-after-all and --stop-after need "
			                               "--emit ir --task T%s", "");
		if (a->cuda_arch && (!a->target || !strstr(a->target, "cuda")))
			fprintf(stderr, "fadc: warning: --cuda-arch %s has no effect without --target cuda "
			                "(or cpu,cuda)\n", a->cuda_arch);
		if (a->allow_tf32 && (!a->target || !strstr(a->target, "cuda")))
			fprintf(stderr, "fadc: warning: --allow-tf32 has no effect without --target cuda "
			                "(or cpu,cuda)\n");
	} else {
		if (a->emit && strcmp(a->emit, "ir"))
			return usage_error(usage_main, "--emit %s needs -o FILE (it prints what compiling makes)",
			                   a->emit);
		if ((passopts || a->stats) && !a->task)
			return usage_error(usage_main, "pass options and --stats need --task T (the passes run "
			                               "on a task's graph)%s", "");
		if (a->ntasks || a->target || a->cpu || a->cuda_arch || a->opt_level >= 0 || a->f64 ||
		    a->max_task_bytes)
			return usage_error(usage_main, "--tasks, --target, --cuda-arch, --cpu, -O, --f64 and "
			                               "--max-task-bytes need -o FILE%s", "");
		if (a->allow_tf32)
			return usage_error(usage_main, "--allow-tf32 needs -o FILE (it concerns the GEMMs "
			                               "of compiled CUDA code)%s", "");
	}
	return 0;
}

// A codegen message as a diagnostic: "file:line:col: error: ..." as it is;
// "error: OUT: what" at the artifact; "error: what" at the model; anything
// else (a bad option value) from fadc.
static void
cg_error(const char *model, const char *out, const char *err)
{
	size_t n = out ? strlen(out) : 0;
	if (!strncmp(err, "error: ", 7) && n && !strncmp(err + 7, out, n) && err[7 + n] == ':')
		path_error(out, err + 7);
	else if (!strncmp(err, "error: ", 7))
		fprintf(stderr, "%s: %s\n", model, err);
	else if (strstr(err, ": error: "))
		fprintf(stderr, "%s\n", err);
	else
		fprintf(stderr, "fadc: error: %s\n", err);
}

// The default task list: the model's recommended tasks when it declares
// them (`tasks vjp, vhp, jvp`, docs/IR.md; forward is always compiled);
// else forward vjp jvp vhp hvp, without the second-order tasks when
// forward is not one float scalar (they need a scalar f).  tasks has room
// for 16.
static int
default_tasks(const Module *m, const char **tasks)
{
	if (m->ntasks) {
		int n = 0;
		for (uint32_t i = 0; i < m->ntasks && n < 16; i++)
			tasks[n++] = m->tasks[i];
		return n;
	}
	const Graph *f = m->main;
	int scalar = 0;
	if (f->nout == 1) {
		const Node *o = &f->node[f->out[0].node];
		scalar = ir_dtype_is_float((DType)o->dtype) && f->shape[o->shape].rank == 0;
	}
	int n = 0;
	tasks[n++] = "forward";
	tasks[n++] = "vjp";
	tasks[n++] = "jvp";
	if (scalar) {
		tasks[n++] = "vhp";
		tasks[n++] = "hvp";
	}
	return n;
}

// --tasks with `all`: every task that applies to the model, the others
// named in a note (vhp, hvp and the Hessians need a scalar forward), plus
// the ones listed beside it.  0 when `all` is not given.
static int
expand_all(const CompileArgs *a, const Module *m, const char **out)
{
	int has_all = 0, n = 0;
	for (int i = 0; i < a->ntasks; i++)
		has_all |= !strcmp(a->tasks[i], "all");
	if (!has_all)
		return 0;
	char left[512] = "", err[512];
	size_t k = 0;
	for (int t = 0; fadc_tasks[t] && n < MAXTASK; t++) {
		Loc loc;
		if (pass_task_check(m->main, fadc_tasks[t], &loc, err, sizeof err))
			out[n++] = fadc_tasks[t];
		else if (k < sizeof left)
			k += (size_t)snprintf(left + k, sizeof left - k, "%s%s", k ? ", " : "", fadc_tasks[t]);
	}
	for (int i = 0; i < a->ntasks && n < MAXTASK; i++) {
		int dup = !strcmp(a->tasks[i], "all");
		for (int j = 0; j < n && !dup; j++)
			dup = !strcmp(out[j], a->tasks[i]);
		if (!dup)
			out[n++] = a->tasks[i];
	}
	if (*left)
		fprintf(stderr, "%s: note: --tasks all leaves out %s: they do not apply to this model "
		        "(vhp, hvp and the Hessians need forward to return one float scalar)\n",
		        a->model, left);
	return n;
}

// Compiles ms[0..nspec) (one module per specialisation, named by
// specnames; one: the plain artifact) into a->out.
static int
compile(const CompileArgs *a, const Module *const *ms, const char *const *specnames, int nspec)
{
	const Module *m = ms[0];
	char err[4096] = "";
	int targets = CG_TARGET_CPU;
	if (a->target && !cg_parse_targets(a->target, &targets, err, sizeof err)) {
		cg_error(a->model, a->out, err);
		return 1;
	}
	const char *deftasks[16], *alltasks[MAXTASK];
	int nall = expand_all(a, m, alltasks);
	CgOptions o = {
	    .tasks = nall ? alltasks : a->ntasks ? a->tasks : deftasks,
	    .ntasks = nall ? nall : a->ntasks ? a->ntasks : default_tasks(m, deftasks),
	    .defines = a->defs,
	    .ndefines = a->ndefs,
	    .opt_level = a->opt_level,
	    .cpu = a->cpu,
	    .compute_f64 = a->f64,
	    .max_task_bytes = a->max_task_bytes,
	    .stats = a->stats ? stderr : NULL,
	    .emit_kir = a->emit && !strcmp(a->emit, "kir") ? stdout : NULL,
	    .emit_llvm = a->emit && !strcmp(a->emit, "llvm") ? stdout : NULL,
	    .emit_cuda = a->emit && !strcmp(a->emit, "cuda") ? stdout : NULL,
	    .targets = targets,
	    .cuda_arch = a->cuda_arch,
	    .allow_tf32 = a->allow_tf32,
	};
	if (nspec > 1 ? cg_compile_specs(ms, specnames, nspec, &o, a->out, err, sizeof err)
	              : cg_compile_module(m, &o, a->out, err, sizeof err))
		return 0;
	cg_error(a->model, a->out, err);
	return 1;
}

static int
emit_task(const CompileArgs *a, const Module *m)
{
	PassOpts po = {.print_after = a->print_after,
	               .print_after_all = a->print_after_all,
	               .stop_after = a->stop_after,
	               .dump = stderr,
	               .stats = a->stats};
	char err[1024];
	Loc loc = 0;
	Graph *g = pass_task(m->main, a->task, &po, &loc, err, sizeof err);
	if (!g) {
		report_error(m, a->model, loc, err);
		return 1;
	}
	if (!ir_verify(g, err, sizeof err)) {
		fprintf(stderr, "fadc: internal error: task '%s' does not verify: %s\n", a->task, err);
		ir_graph_free(g);
		return 1;
	}
	ir_print_module_task(stdout, m, g, a->task);
	ir_graph_free(g);
	return 0;
}

// ---------------------------------------------------------------- specialisations
//
// fadc MODEL.ir -o MODEL.so -D N=8,32 -D K=4,5: one artifact holding the
// model compiled for every combination of the listed sizes (the cartesian
// product, the first list varying slowest: N=8,K=4  N=8,K=5  N=32,K=4
// N=32,K=5), at most ART_MAX_SPECS of them (docs/ARTIFACT.md).  Each
// specialisation is named by the NAME=VALUE of the lists ("N=8,K=4");
// single values (-D M=3) apply to all and are not part of the names.

typedef struct Specs {
	int n; // specialisations
	char *name[ART_MAX_SPECS]; // "N=8,K=4"
	const char *defs[ART_MAX_SPECS][MAXDEF]; // its -D options, every one single-valued
	char *store[ART_MAX_SPECS][MAXDEF]; // the strings of defs that were made here
} Specs;

static void
specs_free(Specs *sp)
{
	for (int s = 0; s < ART_MAX_SPECS; s++) {
		free(sp->name[s]);
		for (int i = 0; i < MAXDEF; i++)
			free(sp->store[s][i]);
	}
}

// The n-th value (0-based) of the comma list v, as [*at, *at + *len).
static void
list_item(const char *v, int n, const char **at, size_t *len)
{
	for (; n > 0; n--)
		v = strchr(v, ',') + 1;
	*at = v;
	*len = strcspn(v, ",");
}

// Checks the -D lists and expands them into sp; 0 after a diagnostic at
// the model (exit status 1).
static int
specs_expand(const char *model, const char *const *defs, int ndefs, Specs *sp)
{
	int count[MAXDEF];
	long total = 1;
	for (int i = 0; i < ndefs; i++) {
		const char *d = defs[i], *eq = strchr(d, '=');
		count[i] = 1;
		if (!eq)
			continue; // the frontend says "expected NAME=VALUE"
		const char *v = eq + 1;
		if (!*v) {
			fprintf(stderr, "%s: error: -D %s: no value (NAME=VALUE, or NAME=V1,V2,... for "
			                "specialisations)\n", model, d);
			return 0;
		}
		for (const char *p = v; *p; p++)
			count[i] += *p == ',';
		for (int k = 0; k < count[i]; k++) {
			const char *at;
			size_t len;
			list_item(v, k, &at, &len);
			if (!len) {
				fprintf(stderr, "%s: error: -D %s: value %d of the list is empty\n", model, d,
				        k + 1);
				return 0;
			}
			for (int j = 0; j < k; j++) {
				const char *bt;
				size_t bl;
				list_item(v, j, &bt, &bl);
				if (bl == len && !strncmp(at, bt, len)) {
					fprintf(stderr, "%s: error: -D %s: the value %.*s is listed twice\n", model,
					        d, (int)len, at);
					return 0;
				}
			}
		}
		// A size given twice was refused with the options (opt_define).
		total *= count[i];
		if (total > ART_MAX_SPECS) {
			fprintf(stderr, "%s: error: -D %s: the lists make more than %d specialisations (one "
			                "artifact holds at most %d)\n", model, d, ART_MAX_SPECS,
			        ART_MAX_SPECS);
			return 0;
		}
	}
	sp->n = (int)total;
	for (int s = 0; s < sp->n; s++) {
		// Mixed radix, the last list fastest: the product in the order given.
		int rest = s, idx[MAXDEF];
		for (int i = ndefs - 1; i >= 0; i--) {
			idx[i] = rest % count[i];
			rest /= count[i];
		}
		size_t cap = 1, k = 0;
		for (int i = 0; i < ndefs; i++)
			cap += strlen(defs[i]) + 1;
		if (!(sp->name[s] = malloc(cap)))
			goto oom;
		sp->name[s][0] = 0;
		for (int i = 0; i < ndefs; i++) {
			if (count[i] == 1) {
				sp->defs[s][i] = defs[i];
				continue;
			}
			const char *eq = strchr(defs[i], '='), *at;
			size_t len, nl = (size_t)(eq - defs[i]);
			list_item(eq + 1, idx[i], &at, &len);
			if (!(sp->store[s][i] = malloc(nl + len + 2)))
				goto oom;
			snprintf(sp->store[s][i], nl + len + 2, "%.*s=%.*s", (int)nl, defs[i], (int)len, at);
			sp->defs[s][i] = sp->store[s][i];
			k += (size_t)snprintf(sp->name[s] + k, cap - k, "%s%s", k ? "," : "",
			                      sp->store[s][i]);
		}
	}
	return 1;
oom:
	fprintf(stderr, "fadc: error: out of memory\n");
	return 0;
}

// fadc MODEL.ir -o MODEL.so with -D lists: parses the model once per
// specialisation and compiles them into one artifact.
static int
compile_specs(const CompileArgs *a)
{
	Specs sp = {0};
	Module *ms[ART_MAX_SPECS] = {0};
	int rc = 1;
	if (!specs_expand(a->model, a->defs, a->ndefs, &sp))
		goto done;
	for (int s = 0; s < sp.n; s++) {
		FeOptions o = {.defines = sp.defs[s], .ndefines = a->ndefs, .diag = stderr,
		               .no_prelude = a->noprelude};
		if (!(ms[s] = fe_parse_file(a->model, &o)))
			goto done;
		char err[512];
		if (!ir_verify(ms[s]->main, err, sizeof err)) {
			fprintf(stderr, "fadc: internal error: the graph of specialisation %s does not "
			                "verify: %s\n", sp.name[s], err);
			rc = 1;
			goto done;
		}
	}
	rc = compile(a, (const Module *const *)ms, (const char *const *)sp.name, sp.n);
done:
	for (int s = 0; s < ART_MAX_SPECS; s++)
		ir_module_free(ms[s]);
	specs_free(&sp);
	return rc;
}

static int
cmd_compile(int argc, char **argv)
{
	CompileArgs a = {0};
	int rc = compile_args(argc, argv, &a);
	if (rc) {
		free(a.tasklist);
		return rc < 0 ? 0 : rc;
	}
	char err0[1024];
	if (a.out && fio_check_not_input(a.out, &a.model, 1, err0, sizeof err0)) {
		path_error(a.out, err0);
		free(a.tasklist);
		return 1;
	}
	if (has_define_list(a.defs, a.ndefs)) {
		rc = a.out ? compile_specs(&a)
		           : usage_error(usage_main, "-D with a list of values (N=8,32) makes "
		                                     "specialisations of an artifact: it needs -o FILE%s", "");
		free(a.tasklist);
		return rc;
	}
	FeOptions o = {.defines = a.defs, .ndefines = a.ndefs, .diag = stderr, .no_prelude = a.noprelude};
	Module *m = fe_parse_file(a.model, &o);
	if (!m) {
		free(a.tasklist);
		return 1;
	}
	char err[512];
	if (!ir_verify(m->main, err, sizeof err)) {
		fprintf(stderr, "fadc: internal error: the graph does not verify: %s\n", err);
		rc = 1;
	} else if (a.out)
		rc = compile(&a, (const Module *const *)&m, NULL, 1);
	else if (a.task)
		rc = emit_task(&a, m);
	else
		ir_print_module(stdout, m);
	ir_module_free(m);
	free(a.tasklist);
	return rc;
}

// ---------------------------------------------------------------- check

static int
cmd_check(int argc, char **argv)
{
	const char *model = NULL, *v, *defs[MAXDEF], *tasks[MAXTASK];
	char *list = NULL;
	int ndefs = 0, ntasks = 0, f64 = 0, verbose = 0, rc = 0;
	double tol = 0;
	int tol_set = 0;
	uint64_t seed = 0;
	for (int i = 0; i < argc; i++) {
		const char *s = argv[i];
		if (!strcmp(s, "-h") || !strcmp(s, "--help")) {
			fputs(usage_check, stdout);
			free(list);
			return 0;
		} else if (opt_define(argc, argv, &i, defs, &ndefs, usage_check, &rc)) {
			if (rc)
				break;
		} else if (opt_value(argc, argv, &i, "--tasks", &v)) {
			if (!v) {
				rc = usage_error(usage_check, "%s needs a value", "--tasks");
				break;
			}
			free(list);
			list = strdup(v);
			ntasks = 0;
			for (char *t = strtok(list, ","); t && ntasks < MAXTASK; t = strtok(NULL, ","))
				tasks[ntasks++] = t;
		} else if (opt_value(argc, argv, &i, "--rtol", &v) ||
		           opt_value(argc, argv, &i, "--tol", &v)) {
			// One name and one measure with compare-npy (ir_err_value);
			// --tol, its old name, still works.
			char *end;
			if (!v) {
				rc = usage_error(usage_check, "%s needs a value", "--rtol");
				break;
			}
			tol = strtod(v, &end);
			if (!*v || *end || !(tol >= 0) || isinf(tol)) {
				rc = usage_error(usage_check, "--rtol: '%s' is not a non-negative number", v);
				break;
			}
			tol_set = 1;
		} else if (opt_value(argc, argv, &i, "--seed", &v)) {
			if (!v || !parse_seed(v, &seed)) {
				rc = usage_error(usage_check, "--seed needs a non-negative integer%s", "");
				break;
			}
		} else if (!strcmp(s, "--f64"))
			f64 = 1;
		else if (!strcmp(s, "-v"))
			verbose = 1;
		else if (s[0] == '-') {
			rc = usage_error(usage_check, "unknown option '%s'", s);
			break;
		} else if (model) {
			rc = usage_error(usage_check, "more than one model given ('%s')", s);
			break;
		} else
			model = s;
	}
	if (!rc && !model)
		rc = usage_error(usage_check, "no model given%s", "");
	if (rc) {
		free(list);
		return rc;
	}
	FeOptions fo = {.defines = defs, .ndefines = ndefs, .diag = stderr};
	Module *m = fe_parse_file(model, &fo);
	if (!m) {
		free(list);
		return 1;
	}
	CgOptions o = {.tasks = tasks, .ntasks = ntasks, .defines = defs, .ndefines = ndefs,
	               .opt_level = -1, .compute_f64 = f64};
	CgCheck c = {tol_set ? tol : f64 ? 2e-7 : 1e-5, 1e-6, seed, verbose};
	char err[4096] = "";
	int nf = cg_check(m, &o, &c, stdout, err, sizeof err);
	if (nf < 0)
		cg_error(model, NULL, err);
	ir_module_free(m);
	free(list);
	return nf != 0;
}

// `fadc --version`: the release, the artifact format it writes, and the
// code generators it was built with (fadc-bench records the line).
static int
print_version(void)
{
	printf("fadc %s (artifact format %d; LLVM %s", FADC_VERSION, ART_FORMAT_VERSION,
	       cg_llvm_version());
#ifdef FADC_HAVE_CUDA
	int major, minor;
	if (cg_cuda_nvrtc_version(&major, &minor))
		printf("; NVRTC %d.%d", major, minor);
#endif
	printf(")\n");
	return 0;
}

int
main(int argc, char **argv)
{
	// Temporary files and folders (outputs being written, the compiler's
	// folder) are removed if fadc is interrupted (runtime/fileio.h).
	fio_cleanup_enable();
	if (argc == 2 && !strcmp(argv[1], "--version"))
		return print_version();
	if (argc > 1 && !strcmp(argv[1], "run"))
		return cmd_run(argc - 2, argv + 2);
	if (argc > 1 && !strcmp(argv[1], "inspect"))
		return cmd_inspect(argc - 2, argv + 2);
	if (argc > 1 && !strcmp(argv[1], "check"))
		return cmd_check(argc - 2, argv + 2);
	if (argc > 1 && !strcmp(argv[1], "compare-npy"))
		return cmd_compare(argc - 2, argv + 2);
	return cmd_compile(argc - 1, argv + 1);
}
