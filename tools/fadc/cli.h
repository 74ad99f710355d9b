// tools/fadc/cli.h -- what the commands of `fadc` share.
//
// One file per command (compile.c, run.c, inspect.c, check.c, compare.c)
// and main.c, which dispatches; this header declares the helpers they all
// use: the usage-error convention (one line, exit status 2), option
// parsing, diagnostics at a path, conversions between the three dtype
// vocabularies a command meets (the IR's DType, tensor files' tio_dtype and
// the runtime's fadc_dtype), and the bindings of `fadc run` (bind.c).
// Nothing here is a library: the declarations exist only so that the
// commands live in files of their own.
#ifndef FADC_TOOLS_CLI_H
#define FADC_TOOLS_CLI_H

#include <stdint.h>
#include <stdio.h>

#include "fadc.h"
#include "ir.h"
#include "tensorio.h"

#define MAXDEF 64 // -D options
#define MAXBIND 64 // --params and --v options
#define MAXTASK 32 // names in --tasks

// ---------------------------------------------------------------- commands
// Each takes the arguments after its name and returns the exit status.
int cmd_compile(int argc, char **argv); // compile.c: fadc MODEL.ir --emit ir | -o MODEL.so
int cmd_run(int argc, char **argv); // run.c
int cmd_inspect(int argc, char **argv); // inspect.c
int cmd_check(int argc, char **argv); // check.c
int cmd_compare(int argc, char **argv); // compare.c: compare-npy

// The help texts, each in its command's file; usage_error finds the
// command's name from which one it is given.
extern const char *const usage_main, *const usage_run, *const usage_inspect,
    *const usage_check, *const usage_compare;

// ---------------------------------------------------------------- cli.c
int usage_error(const char *usage, const char *fmt, const char *arg);
int opt_value(int argc, char **argv, int *i, const char *name, const char **val);
int opt_define(int argc, char **argv, int *i, const char **defs, int *ndefs, const char *usage,
               int *rc);
int opt_max_nodes(int argc, char **argv, int *i, int64_t *n, const char *usage, int *rc);
int opt_const(int argc, char **argv, int *i, const char *usage, int *rc); // --const NAME (ONNX)
int has_define_list(const char *const *defs, int ndefs);
int parse_seed(const char *v, uint64_t *seed);
int has_suffix(const char *s, const char *suffix);
struct FeOptions;
Module *load_model(const char *path, const struct FeOptions *o); // .ir, or .onnx imported
int onnx_read(const char *path, tio_tensor **ts, int *n); // --params model.onnx: its initializers
char *npy_file_name(const char *name); // an output's file name: '/' '\\' '%' and a leading '.' as %XX
char *npy_name_of_file(const char *f, size_t n); // the name of such a file name
int is_dir(const char *path);
const char *installed_support_lib(void); // an installed fadc's libfadc_support.a, or NULL

// A path longer than this is printed as its beginning, "[...]" and its end.
enum { SHOW_PATH = 400 };
void path_error(const char *path, const char *err);
void report_error(const Module *m, const char *model, Loc loc, const char *err);
void cg_error(const char *model, const char *out, const char *err);
int rt_error(const char *path, fadc_context *ctx);
fadc_status open_model(fadc_context *ctx, const char *path, unsigned flags, fadc_model **m);

enum tio_dtype tio_of(DType t);
DType dtype_of(enum tio_dtype t);
enum tio_dtype tio_of_fadc(fadc_dtype t);
fadc_dtype fadc_of_tio(enum tio_dtype t);
void type_str(enum tio_dtype dt, int rank, const int64_t *dim, char *buf, size_t n);
double elem(const tio_tensor *t, int64_t i);
void set_elem(tio_tensor *t, int64_t i, double v);

// ---------------------------------------------------------------- progress (cli.c)
// The status line of a long compile or check, on a terminal only
// (isatty(stderr)): progress_start gives NULL elsewhere, and every call
// takes NULL.  progress_note is a CgProgressFn (codegen.h): a stage
// "warning: ..." is printed as a line of its own, an empty stage clears
// the line until the next.  progress_stop clears the line.
typedef struct Progress Progress;
Progress *progress_start(void);
void progress_note(void *p, const char *stage, long done, long total);
void progress_stop(Progress *p);

// ---------------------------------------------------------------- bind.c
// A tensor file given on the command line: --params or --v.
typedef struct Binding {
	char *name; // NAME=FILE.npy or FILE.npy's base name; NULL: a .safetensors file
	const char *path;
	int is_v; // --v: binds the task's own inputs
	// `fadc run model.onnx`: the model's own initializers, bound by default
	// (explicit bindings win; initializers imported as constants are skipped)
	int implicit;
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

int parse_binding(const char *v, int is_v, Binding *b);
int bind_slots(Slot *s, int ns, const Binding *bind, int nbind, const char *task, int allow_unused);
int draw_v(Slot *s, int ns, uint64_t seed);
void free_slots(Slot *s, int n);
void slot_shape(Slot *sl, DType dt, const Shape *shape);

#endif
