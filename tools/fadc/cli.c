// tools/fadc/cli.c -- the helpers every command of `fadc` uses (cli.h).
//
// Usage errors are one line and where the help is, exit status 2; errors
// in the user's input are diagnostics at a path ("PATH: error: ...") or at
// a source position, exit status 1.  Those conventions (README.md, "Exit
// status") live here so that every command keeps them alike.
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "frontend.h"
#include "passes.h"

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
int
usage_error(const char *usage, const char *fmt, const char *arg)
{
	fprintf(stderr, "fadc: error: ");
	fprintf(stderr, fmt, arg);
	fprintf(stderr, "\ntry '%s --help' for more information\n", usage_command(usage));
	return 2;
}

// Is argv[*i] the option `name` with a value?  Takes "--name VALUE" and
// "--name=VALUE"; *val is NULL when the value is missing.
int
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
int
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

// --max-nodes N and --max-nodes=N, the frontend's bound on the nodes it
// builds (FeOptions.max_nodes): 1 if argv[*i] is it (and then *rc is set
// on a usage error), 0 if it is another option.  At most 2^32 - 1: node
// ids are 32 bits.
int
opt_max_nodes(int argc, char **argv, int *i, int64_t *n, const char *usage, int *rc)
{
	const char *v;
	if (!opt_value(argc, argv, i, "--max-nodes", &v))
		return 0;
	if (!v) {
		*rc = usage_error(usage, "%s needs a value", "--max-nodes");
		return 1;
	}
	char *end;
	errno = 0;
	unsigned long long x = v[0] >= '0' && v[0] <= '9' ? strtoull(v, &end, 10) : 0;
	if (!x || *end || errno || x > UINT32_MAX) {
		*rc = usage_error(usage, "--max-nodes: '%s' is not an integer 1 .. 4294967295", v);
		return 1;
	}
	*n = (int64_t)x;
	return 1;
}

// Is one of the -D options a list (a comma in its value)?
int
has_define_list(const char *const *defs, int ndefs)
{
	for (int i = 0; i < ndefs; i++) {
		const char *eq = strchr(defs[i], '=');
		if (eq && strchr(eq, ','))
			return 1;
	}
	return 0;
}

int
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

int
has_suffix(const char *s, const char *suffix)
{
	size_t n = strlen(s), k = strlen(suffix);
	return n >= k && !strcmp(s + n - k, suffix);
}

// --const NAME (repeatable): a float initializer of an ONNX model imported
// as a constant, not a parameter (docs/ONNX.md); load_model passes them on.
static const char *onnx_consts[MAXDEF];
static int nonnx_consts;

int
opt_const(int argc, char **argv, int *i, const char *usage, int *rc)
{
	const char *v;
	if (!opt_value(argc, argv, i, "--const", &v))
		return 0;
	if (!v || !*v)
		*rc = usage_error(usage, "%s needs an initializer's name", "--const");
	else if (nonnx_consts == MAXDEF)
		*rc = usage_error(usage, "too many --const options%s", "");
	else
		onnx_consts[nonnx_consts++] = v;
	return 1;
}

// A model from a .ir file, or imported from a .onnx one (docs/ONNX.md).
// A model that declares a batch must be separable over it
// (passes/batch.c): refused here, so that check, run and -o all say so.
Module *
load_model(const char *path, const FeOptions *o)
{
	Module *m;
	if (!has_suffix(path, ".onnx")) {
		if (nonnx_consts) {
			fprintf(stderr, "%s: error: --const names initializers of an ONNX model\n", path);
			return NULL;
		}
		m = fe_parse_file(path, o);
	} else {
		FeOptions oo = *o;
		oo.consts = onnx_consts;
		oo.nconsts = nonnx_consts;
		m = fe_onnx_import(path, &oo);
	}
	char err[1024];
	Loc loc;
	if (m && m->batch.nin && !pass_batch_check(m->main, &m->batch, &loc, err, sizeof err)) {
		report_error(m, path, loc, err);
		ir_module_free(m);
		return NULL;
	}
	return m;
}

// The initializers of an ONNX model that its import declares, with their
// values, as tensors for `--params model.onnx` (tio_free_all releases
// them): 0, or 1 after a diagnostic.
int
onnx_read(const char *path, tio_tensor **ts, int *n)
{
	FeOptions o = {.diag = stderr};
	FeTensor *ft;
	int nf;
	*ts = NULL;
	*n = 0;
	if (fe_onnx_initializers(path, &o, &ft, &nf))
		return 1;
	tio_tensor *t = calloc((size_t)nf + 1, sizeof *t);
	if (!t) {
		fe_onnx_free(ft, nf);
		fprintf(stderr, "fadc: error: out of memory\n");
		return 1;
	}
	for (int i = 0; i < nf; i++) {
		t[i].name = ft[i].name;
		t[i].dtype = tio_of(ft[i].dtype);
		t[i].rank = ft[i].rank;
		memcpy(t[i].dim, ft[i].dim, sizeof t[i].dim);
		int64_t numel = 1;
		for (int k = 0; k < t[i].rank; k++)
			numel *= t[i].dim[k];
		t[i].data = numel ? ft[i].data : NULL; // tensorio: no data for no elements
		if (!numel)
			free(ft[i].data);
		ft[i].name = NULL; // moved
		ft[i].data = NULL;
	}
	fe_onnx_free(ft, nf);
	*ts = t;
	*n = nf;
	return 0;
}

// The file name of an output or binding named name, without ".npy": the
// name itself, except that '/', '\\', '%' and a leading '.' are written
// %XX (two upper-case hex digits), so that an ONNX name such as
// "/layer/Add_output_0" is one file in the folder ("%2Flayer%2FAdd_output_0"),
// never a path into or out of it, nor a hidden file, "." or "..".  Names of
// IR identifiers (grad.0.weight) are unchanged.  malloc'ed; NULL when out
// of memory.
char *
npy_file_name(const char *name)
{
	char *s = malloc(3 * strlen(name) + 1), *o = s;
	if (!s)
		return NULL;
	for (const char *c = name; *c; c++) {
		if (*c == '/' || *c == '\\' || *c == '%' || (c == name && *c == '.'))
			o += sprintf(o, "%%%02X", (unsigned char)*c);
		else
			*o++ = *c;
	}
	*o = 0;
	return s;
}

// The name of the file name f (n bytes, without ".npy"): npy_file_name
// undone, every %XX decoded.  malloc'ed; NULL when out of memory.
char *
npy_name_of_file(const char *f, size_t n)
{
	char *s = malloc(n + 1), *o = s;
	if (!s)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		if (f[i] == '%' && i + 2 < n && isxdigit((unsigned char)f[i + 1]) &&
		    isxdigit((unsigned char)f[i + 2])) {
			char hex[3] = {f[i + 1], f[i + 2], 0};
			*o++ = (char)strtol(hex, NULL, 16);
			i += 2;
		} else
			*o++ = f[i];
	}
	*o = 0;
	return s;
}

// A message "<path>: <what>" (tensorio, the runtime) printed as a
// diagnostic, "<path>: error: <what>"; a long path is shortened (SHOW_PATH).
void
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
void
report_error(const Module *m, const char *model, Loc loc, const char *err)
{
	if (loc && m->src && loc < m->src->nloc) {
		Diag d = {.out = stderr, .src = m->src};
		diag_emit(&d, loc, "%s", err);
	} else
		fprintf(stderr, "%s: error: %s\n", model, err);
}

// The three enums share support/dtypes.def's codes (runtime/rt.c asserts
// it), so a conversion keeps the code; what is no value dtype reads as f32,
// as it always has.
enum tio_dtype
tio_of(DType t)
{
	int c = ir_dtype_code(t);
	return c < 0 ? TIO_F32 : (enum tio_dtype)c;
}

DType
dtype_of(enum tio_dtype t)
{
	DType d = ir_dtype_of_code((int)t);
	return d == DT_NONE ? DT_F32 : d;
}

enum tio_dtype
tio_of_fadc(fadc_dtype t)
{
	return ir_dtype_of_code((int)t) != DT_NONE ? (enum tio_dtype)t : TIO_F32;
}

fadc_dtype
fadc_of_tio(enum tio_dtype t)
{
	return ir_dtype_of_code((int)t) != DT_NONE ? (fadc_dtype)t : FADC_F32;
}

// "f32[11, 1]", as ir_type_str writes it.
void
type_str(enum tio_dtype dt, int rank, const int64_t *dim, char *buf, size_t n)
{
	int k = snprintf(buf, n, "%s[", tio_dtype_name(dt));
	for (int i = 0; i < rank && k >= 0 && (size_t)k < n; i++)
		k += snprintf(buf + k, n - (size_t)k, "%s%" PRId64, i ? ", " : "", dim[i]);
	if (k >= 0 && (size_t)k < n)
		snprintf(buf + k, n - (size_t)k, "]");
}

double
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

void
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
		// The interpreter holds an i64 as a double: 2^63 (the rounding of
		// INT64_MAX) or beyond does not convert (undefined behaviour), so
		// it saturates as the compiled code's constants do (docs/IR.md,
		// `full`), and a NaN, which no integer is, stores 0.
		((int64_t *)t->data)[i] = v != v ? 0 : v >= 0x1p63 ? INT64_MAX : v < -0x1p63 ? INT64_MIN
		                                                                              : (int64_t)v;
		break;
	case TIO_BOOL:
		((uint8_t *)t->data)[i] = v != 0;
		break;
	}
}

// The runtime's last message, as a diagnostic at the artifact's path.
int
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
fadc_status
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

int
is_dir(const char *path)
{
	struct stat st;
	return !stat(path, &st) && S_ISDIR(st.st_mode);
}

// The support library an installed fadc links into every model.so:
// FADC_INSTALLED_SUPPORT (CMakeLists.txt: "../lib/fadc/libfadc_support.a",
// the install's layout) from the folder of this executable, so that an
// install is found wherever it is (staged under DESTDIR, moved), never in
// the source or build tree it came from.  NULL, and codegen takes
// $FADC_SUPPORT_LIB or the build tree's library (codegen/compile.c), when
// that variable is set or this fadc is not an installed one (a build
// tree's bin/ has no ../lib/fadc).
const char *
installed_support_lib(void)
{
#ifdef FADC_INSTALLED_SUPPORT
	static char path[4096 + sizeof FADC_INSTALLED_SUPPORT];
	const char *env = getenv("FADC_SUPPORT_LIB");
	if (env && *env)
		return NULL;
	ssize_t k = readlink("/proc/self/exe", path, 4096);
	char *slash = k > 0 ? (path[k] = 0, strrchr(path, '/')) : NULL;
	if (!slash)
		return NULL;
	snprintf(slash + 1, sizeof path - (size_t)(slash + 1 - path), "%s", FADC_INSTALLED_SUPPORT);
	return access(path, R_OK) ? NULL : path;
#else
	return NULL;
#endif
}

// A codegen message as a diagnostic: "file:line:col: error: ..." as it is;
// "error: OUT: what" at the artifact; "error: what" at the model; anything
// else (a bad option value) from fadc.
void
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

// ---------------------------------------------------------------- progress
//
// One status line on stderr, rewritten in place with \r while a compile or
// a check runs: "[212/640] kernels (NVRTC), 38 s".  Only on a terminal: a
// log or a pipe gets nothing (a test's output, a CI log), and where the
// terminal is, the line is cleared before anything else is printed and at
// the end, so it never mixes with messages.  Nothing shows in the first
// PROGRESS_QUIET_S seconds (a short compile prints nothing at all); after
// that a thread redraws it every PROGRESS_TICK_S, so that the seconds go on
// during a long step that reports nothing (LLVM's optimization, one NVRTC
// program).  The compiler reports through CgOptions.progress (any thread;
// a mutex orders the reports and the redraws).
#include <pthread.h>
#include <time.h>
#include <unistd.h>

#define PROGRESS_QUIET_S 1.0
#define PROGRESS_TICK_S 0.5

struct Progress {
	double quiet; // PROGRESS_QUIET_S, or $FADC_PROGRESS_AFTER (a test hook: 0 draws at once)
	pthread_mutex_t mu;
	pthread_cond_t cv;
	pthread_t th;
	int stop, shown; // shown: the length of the line on the terminal, 0 none
	double t0;
	char stage[160];
	long done, total;
};

static double
mono_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

// Clears the line (with p->mu held).
static void
progress_clear_locked(Progress *p)
{
	if (p->shown) {
		fprintf(stderr, "\r%*s\r", p->shown, "");
		fflush(stderr);
		p->shown = 0;
	}
}

// Draws the line (with p->mu held) once the quiet start is over.
static void
progress_draw_locked(Progress *p)
{
	double t = mono_s() - p->t0;
	if (t < p->quiet || !p->stage[0])
		return;
	char line[256];
	int n = p->total > 0 ? snprintf(line, sizeof line, "[%ld/%ld] %s, %.0f s", p->done, p->total,
	                                p->stage, t)
	                     : snprintf(line, sizeof line, "%s, %.0f s", p->stage, t);
	if (n < 0)
		return;
	if (n > (int)sizeof line - 1)
		n = (int)sizeof line - 1;
	// Spaces over the end of a longer line drawn before.
	fprintf(stderr, "\r%s%*s", line, p->shown > n ? p->shown - n : 0, "");
	fflush(stderr);
	if (n > p->shown)
		p->shown = n;
}

static void *
progress_thread(void *arg)
{
	Progress *p = arg;
	pthread_mutex_lock(&p->mu);
	while (!p->stop) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		double wake = (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9 + PROGRESS_TICK_S;
		ts.tv_sec = (time_t)wake;
		ts.tv_nsec = (long)((wake - (double)ts.tv_sec) * 1e9);
		pthread_cond_timedwait(&p->cv, &p->mu, &ts);
		if (!p->stop)
			progress_draw_locked(p);
	}
	pthread_mutex_unlock(&p->mu);
	return NULL;
}

Progress *
progress_start(void)
{
	if (!isatty(2))
		return NULL;
	Progress *p = calloc(1, sizeof *p);
	if (!p)
		return NULL;
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->cv, NULL);
	p->t0 = mono_s();
	const char *after = getenv("FADC_PROGRESS_AFTER");
	char *end = NULL;
	p->quiet = after && *after ? strtod(after, &end) : PROGRESS_QUIET_S;
	if ((end && *end) || !(p->quiet >= 0))
		p->quiet = PROGRESS_QUIET_S;
	if (pthread_create(&p->th, NULL, progress_thread, p)) {
		pthread_cond_destroy(&p->cv);
		pthread_mutex_destroy(&p->mu);
		free(p);
		return NULL; // no progress, the work goes on
	}
	return p;
}

void
progress_note(void *arg, const char *stage, long done, long total)
{
	Progress *p = arg;
	if (!p)
		return;
	pthread_mutex_lock(&p->mu);
	if (!strncmp(stage, "warning: ", 9)) { // a line of its own, kept
		progress_clear_locked(p);
		fprintf(stderr, "fadc: %s\n", stage);
		fflush(stderr);
	} else if (!stage[0]) { // the caller prints something: clear, draw nothing
		p->stage[0] = 0;
		progress_clear_locked(p);
	} else {
		snprintf(p->stage, sizeof p->stage, "%s", stage);
		p->done = done;
		p->total = total;
		progress_draw_locked(p);
	}
	pthread_mutex_unlock(&p->mu);
}

void
progress_stop(Progress *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->mu);
	p->stop = 1;
	pthread_cond_signal(&p->cv);
	pthread_mutex_unlock(&p->mu);
	pthread_join(p->th, NULL);
	progress_clear_locked(p);
	pthread_cond_destroy(&p->cv);
	pthread_mutex_destroy(&p->mu);
	free(p);
}
