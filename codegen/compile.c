// codegen/compile.c -- the compiler driver: a module's tasks to model.so.
//
//   for each requested task: pass_task -> cg_lower -> cg_plan
//   for each declaration with an initializer: its init graph -> cg_lower
//     (computed in f64, as the interpreter does) -> cg_plan, as task
//     "init.<name>", reading the earlier declarations it names
//   with CUDA: each task printed as CUDA C, split into programs, queued
//     on the compile's pool (codegen/jobs.c, FADC_JOBS threads)
//   cg_llvm_emit -> model.0.o ... (the module's pieces, queued on the same
//     pool while NVRTC runs; the entry's last, with the descriptor
//     (runtime/artifact.c), which records the CUDA images)
//   cc -shared model.0.o ... libfadc_support.a -lm -> model.so
//   model.so + descriptor + trailer -> out_so (a temporary file renamed
//   over the target, so a failure never leaves a half-written artifact)
//
// Everything that goes into the artifact is a function of the input: the
// object file is built in a fresh LLVM context from the kernel IR, the
// link uses no time stamps or paths of the temporary folder, and the
// descriptor records the options in a fixed order.  So compiling twice
// gives byte-identical files (tests/cpu/determinism.sh).
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "artifact.h"
#include "codegen.h"
#include "fileio.h"
#include "passes.h"
#ifdef FADC_HAVE_CUDA
#include "cuda_sched.h"
#endif

#ifndef FADC_SUPPORT_LIB
#define FADC_SUPPORT_LIB "libfadc_support.a"
#endif

extern char **environ;

// The tasks compiled when none are asked for: ir/tasks.def's dflt column.
static const char *const default_tasks[] = {
#define TASK(n, p, c, dflt, s) dflt ? #n : NULL,
#include "tasks.def"
};

// Both are support/dtypes.def's rows: the artifact stores the code.
static uint8_t
art_dtype(DType t)
{
	int c = ir_dtype_code(t);
	return c < 0 ? ART_F32 : (uint8_t)c;
}

_Static_assert(IR_MAXDIM == ART_MAXDIM, "an IR shape must fit an artifact's tensor");

static void
art_shape(ArtTensor *t, DType dt, const Shape *s)
{
	t->dtype = art_dtype(dt);
	t->rank = (uint8_t)s->rank;
	for (int i = 0; i < s->rank; i++)
		t->dim[i] = s->dim[i];
}

// The task list: the requested names (with "all" meaning every task),
// forward first, no duplicates.
static int
task_list(const CgOptions *o, const char **out, int max, char *err, size_t errlen)
{
	int n = 0;
	out[n++] = "forward";
	const char *const *req = o->ntasks ? o->tasks : default_tasks;
	int nreq = o->ntasks ? o->ntasks : (int)(sizeof default_tasks / sizeof default_tasks[0]);
	for (int i = 0; i < nreq; i++) {
		if (!req[i])
			continue; // a row of default_tasks not in the default set
		int all = !strcmp(req[i], "all");
		if (!all && task_lookup(req[i]) < 0) {
			snprintf(err, errlen, "error: unknown task '%s'", req[i]);
			return -1;
		}
		for (int t = 0; all ? fadc_tasks[t] != NULL : t == 0; t++) {
			const char *name = all ? fadc_tasks[t] : req[i];
			int dup = 0;
			for (int k = 0; k < n; k++)
				dup |= !strcmp(out[k], name);
			if (!dup && n < max)
				out[n++] = name;
		}
	}
	return n;
}

static void
desc_free_owned(ArtDesc *d)
{
	// Names point into graphs and the module, which outlive the encoding;
	// only the arrays are ours.
	for (uint32_t i = 0; i < d->ntask; i++) {
		free(d->task[i].in);
		free(d->task[i].out);
		for (uint32_t k = 0; d->task[i].kern && k < d->task[i].ncuda; k++) {
			free(d->task[i].kern[k].name);
			free(d->task[i].kern[k].arg);
		}
		free(d->task[i].kern);
		free(d->task[i].module); // cu_build's modules (their images are in d->images)
	}
	free(d->task);
	free(d->decl);
}

// Compilations at once (NVRTC's programs, LLVM's pieces): CgOptions.jobs,
// else FADC_JOBS, else 0 (the online cores).  The artifact is the same
// whatever it is.
static int
cg_jobs(const CgOptions *o)
{
	if (o->jobs > 0)
		return o->jobs;
	const char *v = getenv("FADC_JOBS");
	char *end;
	long n = v && *v ? strtol(v, &end, 10) : 0;
	return n > 0 && n <= 1024 && !*end ? (int)n : 0;
}

static int
run_cc(char *const *argv, const char *logpath, char *err, size_t errlen)
{
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 1, logpath, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	posix_spawn_file_actions_adddup2(&fa, 1, 2);
	pid_t pid;
	int rc = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	if (rc) {
		snprintf(err, errlen, "error: cannot run the linker driver '%s': %s (set FADC_CC)", argv[0],
		         strerror(rc));
		return 0;
	}
	int st;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR) {
			snprintf(err, errlen, "error: waiting for '%s': %s", argv[0], strerror(errno));
			return 0;
		}
	if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
		return 1;
	char log[600] = "";
	FILE *f = fopen(logpath, "r");
	if (f) {
		size_t n = fread(log, 1, sizeof log - 1, f);
		log[n] = 0;
		fclose(f);
	}
	snprintf(err, errlen, "error: linking with '%s' failed: %s", argv[0], log);
	return 0;
}

static int
read_file(const char *path, uint8_t **buf, size_t *len)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return 0;
	int ok = 0;
	if (fseek(f, 0, SEEK_END) == 0) {
		long n = ftell(f);
		if (n >= 0 && fseek(f, 0, SEEK_SET) == 0 && (*buf = malloc((size_t)n + 1))) {
			*len = fread(*buf, 1, (size_t)n, f);
			ok = *len == (size_t)n;
			if (!ok)
				free(*buf);
		}
	}
	fclose(f);
	return ok;
}

// ---------------------------------------------------------------- accounting
//
// Where a compile's time goes (--stats, docs/CODEGEN.md "Compile time"):
// wall and CPU seconds per phase, summed over tasks, printed at the end.
// NVRTC's programs and LLVM's pieces run on one pool at once, so their
// walls are spans that overlap (NVRTC's from queueing its programs to the
// last one's end; LLVM's cg_llvm_emit's, from the first module to the
// objects) and their CPU is their own: each job's on its thread's clock,
// and the emitting thread's; the other phases' CPU is the process's.  The
// totals are the compile's own, from its start (not the phases' sum).  The
// linker's CPU is its child's and not counted.  FADC_TIME=1 prints each
// step as it ends (kir_time_note) instead.
enum { PH_PASSES, PH_LOWER, PH_CUDA_PRINT, PH_NVRTC, PH_LLVM, PH_LINK, PH_COUNT };
static const char *const phase_name[PH_COUNT] = {
    "passes", "lowering+plan", "CUDA printing", "NVRTC", "LLVM", "link",
};

typedef struct Phases {
	double wall[PH_COUNT], cpu[PH_COUNT];
	double wall0, cpu0; // the compile's start (the totals)
} Phases;

static double
clock_s(clockid_t id)
{
	struct timespec ts;
	clock_gettime(id, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

typedef struct Mark {
	double wall, cpu;
} Mark;

static Mark
mark_now(void)
{
	return (Mark){clock_s(CLOCK_MONOTONIC), clock_s(CLOCK_PROCESS_CPUTIME_ID)};
}

// Adds the time since m to phase ph of ps (NULL: none).
static void
phase_add(Phases *ps, int ph, Mark m)
{
	if (!ps)
		return;
	Mark e = mark_now();
	ps->wall[ph] += e.wall - m.wall;
	ps->cpu[ph] += e.cpu - m.cpu;
}

static void
phases_print(FILE *f, const Phases *ps)
{
	Mark e = mark_now();
	double w = e.wall - ps->wall0, u = e.cpu - ps->cpu0;
	fprintf(f, "# stats: time %.2f s wall, %.2f s cpu:", w, u);
	for (int i = 0; i < PH_COUNT; i++)
		fprintf(f, "%s %s %.2f s (cpu %.2f)", i ? "," : "", phase_name[i], ps->wall[i],
		        ps->cpu[i]);
	fprintf(f, "\n");
}

static void
progress(const CgOptions *o, const char *stage, long done, long total)
{
	if (o->progress)
		o->progress(o->progress_arg, stage, done, total);
}

// out_so = so bytes + descriptor + trailer, through FioOut: a temporary
// file beside the target renamed over it (removed on SIGINT/SIGTERM), or
// the target itself when it exists and is no regular file (/dev/null).
static int
write_artifact(const char *out_so, const uint8_t *so, size_t solen, const uint8_t *img,
               size_t imglen, const uint8_t *desc, size_t desclen, char *err, size_t errlen)
{
	char ferr[1024];
	FioOut fo;
	if (fio_out_open(&fo, out_so, 0755, ferr, sizeof ferr) != 0) {
		snprintf(err, errlen, "error: %s", ferr);
		return 0;
	}
	uint32_t crc = art_crc32(art_crc32(art_crc32(0, so, solen), img, imglen), desc, desclen);
	uint8_t trailer[ART_TRAILER_SIZE];
	// The descriptor's version, as it wrote it (bytes 8..11 after the magic).
	uint32_t version = desclen >= 12 ? (uint32_t)desc[8] | (uint32_t)desc[9] << 8 |
	                                       (uint32_t)desc[10] << 16 | (uint32_t)desc[11] << 24
	                                 : ART_FORMAT_VERSION_ONE_SPEC;
	art_trailer_make(trailer, version, solen + imglen + desclen, desclen, crc);
	const uint8_t *part[4] = {so, img, desc, trailer};
	size_t plen[4] = {solen, imglen, desclen, ART_TRAILER_SIZE};
	for (int i = 0; i < 4; i++)
		if (plen[i] && fio_out_write(&fo, part[i], plen[i]) != 0) {
			snprintf(err, errlen, "error: writing %s: %s", out_so, strerror(errno));
			fio_out_abort(&fo);
			return 0;
		}
	if (fio_out_commit(&fo, ferr, sizeof ferr) != 0) {
		snprintf(err, errlen, "error: %s", ferr);
		return 0;
	}
	return 1;
}

static void
fill_io(ArtTensor *t, const Graph *g, NodeId n, const char *name)
{
	t->name = (char *)name;
	art_shape(t, (DType)g->node[n].dtype, ir_shape(g, n));
	t->decl = -1;
	t->writeback = -1;
}

// The descriptor entry of a task graph g.  declmap (NULL: the identity)
// maps m's declaration indices to the artifact's (specialisations).
static int
describe_task(const Module *m, const Graph *g, const KProgram *p, ArtTask *t, const char *name,
              int kind, int decl, const int32_t *declmap)
{
	t->name = (char *)name;
	t->kind = (uint8_t)kind;
	t->decl = decl;
	t->arena_bytes = (uint64_t)p->arena_bytes;
	t->naive_bytes = (uint64_t)p->naive_bytes;
	t->nkernel = p->nk;
	t->nin = g->ninput;
	t->nout = g->nout;
	t->in = calloc(g->ninput + 1, sizeof *t->in);
	t->out = calloc(g->nout + 1, sizeof *t->out);
	if (!t->in || !t->out)
		return 0;
	for (uint32_t i = 0; i < g->ninput; i++) {
		ArtTensor *x = &t->in[i];
		fill_io(x, g, g->input[i].node, g->input[i].name);
		int d = kind == ART_INIT || g->input[i].kind != IN_ARG
		            ? ir_module_find_decl(m, g->input[i].name)
		            : -1;
		if (d >= 0 && declmap)
			d = declmap[d];
		x->role = d >= 0 ? ART_ROLE_DECL : ART_ROLE_ARG;
		x->decl = d;
	}
	for (uint32_t o = 0; o < g->nout; o++) {
		fill_io(&t->out[o], g, g->out[o].node, g->out[o].name);
		t->out[o].writeback = g->out[o].writeback;
	}
	return 1;
}

// The descriptor entry of index check k (passes/checks.c): its range and
// the texts of its message, in arena a.
static void
describe_check(const SrcMap *src, const IndexCheck *k, ArtTensor *x, Arena *a)
{
	char at[512], where[512];
	x->role = ART_OUT_CHECK;
	x->lo = k->lo;
	x->end = k->end;
	x->op = arena_strdup(a, k->op);
	ir_loc_str(src, k->loc, 1, at, sizeof at); // with the model's call site of a prelude op
	x->at = arena_strdup(a, at);
	if (k->name) {
		x->of = arena_printf(a, "'%s'", k->name);
	} else {
		cg_loc_str(src, k->index_loc, where, sizeof where);
		x->of = where[0] ? arena_printf(a, "the index computed at %s", where)
		                 : arena_strdup(a, "a computed index");
	}
}

static int64_t
out_bytes(const KProgram *p)
{
	int64_t n = 0;
	for (uint32_t b = 0; b < p->nbuf; b++)
		if (p->buf[b].kind == KB_OUT)
			n += p->buf[b].bytes;
	return n;
}

// The limit on what a task needs (CgOptions.max_task_bytes), and the
// advice that ends each message about it.
static int64_t
task_limit(const CgOptions *o)
{
	return o->max_task_bytes > 0 ? o->max_task_bytes : CG_MAX_TASK_BYTES;
}

#define LIMIT_ADVICE "reduce the sizes with -D NAME=VALUE or raise --max-task-bytes"

// x * y, or INT64_MAX when it overflows (sizes are non-negative).
static int64_t
mul_sat(int64_t x, int64_t y)
{
	int64_t r;
	return __builtin_mul_overflow(x, y, &r) ? INT64_MAX : r;
}

// The bytes of graph g's outputs, from its shapes: known before lowering,
// so a task whose outputs alone exceed the limit (resnet18's full Hessian:
// 11,689,512^2 floats) is refused before any kernel is built.
static int64_t
graph_out_bytes(const Graph *g, uint32_t nout)
{
	int64_t n = 0;
	for (uint32_t i = 0; i < nout; i++) {
		NodeId v = g->out[i].node;
		const Shape *s = ir_shape(g, v);
		int64_t b = (int64_t)kir_dtype_size((DType)g->node[v].dtype);
		for (int d = 0; d < s->rank; d++)
			b = mul_sat(b, s->dim[d]);
		n = b > INT64_MAX - n ? INT64_MAX : n + b;
	}
	return n;
}

// The largest value of graph g that lowering will store in a temporary
// buffer (a node that fill_fusion makes a root and that is no output),
// in the bytes that buffer takes (an f32 is held in fcompute), or 0;
// *at is that value.  The arena holds it while its kernel runs, beside
// every output, so outputs + this is a lower bound of what the task
// needs, known before lowering: some lowerings loop over a size (a
// convolution's chunks, bilinear_up's runs), and a value too large for
// the limit is refused before that work.  Values beyond
// KIR_MAX_BUF_BYTES are left to cg_lower's located diagnostic.
//
// Scans as kernel_scan (codegen/lower.c) lowers them: each carry has two
// buffers of its type, each per-step output one of T times its type (the
// stacked ys), and the body's own stored values one buffer each, written
// again at every step (the body is lowered once, into the task's plan):
// so a body is walked as a graph, its values counted once.
typedef struct TmpValue {
	int64_t bytes;
	Loc loc;
	const char *op;
	DType dt;
	Shape shape;
} TmpValue;

static void
tmp_note(TmpValue *at, DType fcompute, DType dt, const Shape *s, Loc loc, int op)
{
	int64_t b = kir_shape_bytes(dt == DT_F32 ? fcompute : dt, s);
	if (b > at->bytes)
		*at = (TmpValue){b, loc, ir_op(op)->name, dt, *s};
}

static void
graph_max_tmp_bytes(const Graph *g, DType fcompute, TmpValue *at)
{
	Arena *a = arena_new();
	uint8_t *root;
	if (fill_fusion(g, a, &root)) {
		arena_free(a);
		return; // an op the backend lacks: cg_lower reports it
	}
	uint8_t *isout = arena_alloc_array(a, g->nnode + 1, 1);
	for (uint32_t o = 0; o < g->nout; o++)
		isout[g->out[o].node] = 1;
	for (NodeId n = 1; n < g->nnode; n++) {
		const Node *x = &g->node[n];
		if (x->op == OP_scan) {
			const Graph *b = g->sub[ir_attr_int(g, n, "body")];
			int nc = (int)ir_attr_int(g, n, "ncarry");
			int64_t T = ir_shape(g, ir_in1(g, n, nc))->dim[0];
			for (uint32_t k = 0; k < b->nout; k++) {
				NodeId y = b->out[k].node;
				Shape s = *ir_shape(b, y);
				if ((int)k >= nc) { // stacked: [T, y's shape]
					if (s.rank + 1 > IR_MAXDIM)
						continue; // the shape rule's
					memmove(s.dim + 1, s.dim, sizeof(int64_t) * (size_t)s.rank);
					s.dim[0] = T;
					s.rank++;
				}
				tmp_note(at, fcompute, (DType)b->node[y].dtype, &s, x->loc, OP_scan);
			}
			graph_max_tmp_bytes(b, fcompute, at);
			continue;
		}
		if (!root[n] || isout[n] || x->dtype == DT_TUPLE)
			continue;
		tmp_note(at, fcompute, (DType)x->dtype, ir_shape(g, n), x->loc, x->op);
	}
	arena_free(a);
}

// The model's name: its file's, without folder and ".ir".
static void
model_name(const Module *m, char *buf, size_t n)
{
	const char *base = m->name ? strrchr(m->name, '/') : NULL;
	base = base ? base + 1 : m->name ? m->name : "model";
	snprintf(buf, n, "%s", base);
	size_t ml = strlen(buf);
	if (ml > 3 && !strcmp(buf + ml - 3, ".ir"))
		buf[ml - 3] = 0;
}

// Lowers and plans graph g as task `name` of `model`; checks the size
// limit on its outputs and on outputs plus its largest stored value
// (before lowering; the last nchk outputs are index checks, not counted),
// then on outputs plus arena.
// --stats' line of a task: its kernels and memory as the artifact has
// them (after kir_consts).
static void
task_stats(const CgOptions *o, const char *name, const KProgram *p)
{
	progress(o, "", 0, 0); // the status line off first (a terminal)
	fprintf(o->stats, "# stats: task %-16s %4u kernels, arena %10lld bytes (naive %lld, "
	                  "live peak %lld), outputs %lld bytes\n",
	        name, p->nk, (long long)p->arena_bytes, (long long)p->naive_bytes,
	        (long long)p->live_bytes, (long long)p->stats_out_bytes);
}

static KProgram *
build(const Graph *g, uint32_t nchk, const char *name, const char *model, DType fcompute, const CgOptions *o,
      Phases *ps, char *err, size_t errlen)
{
	// The user's outputs (the index checks' 16 bytes each are the runtime's).
	int64_t lim = task_limit(o), gout = graph_out_bytes(g, g->nout - nchk);
	if (gout > lim) {
		snprintf(err, errlen, "error: task '%s' of %s needs %lld bytes of outputs (limit %lld); "
		         LIMIT_ADVICE, name, model, (long long)gout, (long long)lim);
		return NULL;
	}
	TmpValue big = {0};
	graph_max_tmp_bytes(g, fcompute, &big);
	int64_t tmax = big.bytes;
	if (tmax > lim - gout) {
		char where[512], ty[200];
		cg_loc_str(g->src, big.loc, where, sizeof where);
		ir_type_str(big.dt, &big.shape, ty, sizeof ty);
		snprintf(err, errlen, "%s%serror: task '%s' of %s needs at least %lld bytes (outputs %lld, "
		         "intermediates at least %lld: the value of %s, %s; limit %lld); " LIMIT_ADVICE,
		         where, where[0] ? ": " : "", name, model,
		         (long long)(tmax > INT64_MAX - gout ? INT64_MAX : gout + tmax), (long long)gout,
		         (long long)tmax, big.op, ty, (long long)lim);
		return NULL;
	}
	KTime tm = kir_time_start();
	Mark mk = mark_now();
	KProgram *p = cg_lower(g, name, fcompute, err, errlen);
	if (!p)
		return NULL;
	cg_plan(p);
	kir_time_note(tm, "lower+plan", name);
	phase_add(ps, PH_LOWER, mk);
	int64_t ob = out_bytes(p) - 16 * (int64_t)nchk; // index checks: i64[2] each
	int64_t need = ob + p->arena_bytes;
	if (need > lim) {
		snprintf(err, errlen,
		         "error: task '%s' of %s needs %lld bytes (outputs %lld, intermediates %lld; limit "
		         "%lld); " LIMIT_ADVICE,
		         name, model, (long long)need, (long long)ob, (long long)p->arena_bytes,
		         (long long)lim);
		kir_program_free(p);
		return NULL;
	}
	if (o->emit_kir)
		kir_print(o->emit_kir, p);
	// --stats' line for the task: printed by link_artifact (task_stats),
	// once kir_consts has grown the arena by the constants' table.
	p->stats_out_bytes = ob;
	return p;
}

int
cg_parse_targets(const char *s, int *targets, char *err, size_t errlen)
{
	*targets = 0;
	const char *p = s ? s : "";
	while (*p) {
		const char *e = strchr(p, ',');
		size_t n = e ? (size_t)(e - p) : strlen(p);
		if (n == 3 && !strncmp(p, "cpu", 3))
			*targets |= CG_TARGET_CPU;
		else if (n == 4 && !strncmp(p, "cuda", 4))
			*targets |= CG_TARGET_CUDA;
		else {
			snprintf(err, errlen, "error: unknown target '%.*s' (cpu, cuda or cpu,cuda)", (int)n,
			         p);
			return 0;
		}
		p += n + (e != NULL);
	}
	if (!*targets) {
		snprintf(err, errlen, "error: --target needs cpu, cuda or cpu,cuda");
		return 0;
	}
#ifndef FADC_HAVE_CUDA
	if (*targets & CG_TARGET_CUDA) {
		snprintf(err, errlen, "error: --target cuda: this fadc was built without the CUDA "
		                      "toolkit (NVRTC)");
		return 0;
	}
#endif
	return 1;
}

#ifdef FADC_HAVE_CUDA
// ---------------------------------------------------------------- CUDA part
//
// Every task but the initializers is printed as CUDA C (cuda.c) and
// compiled once by NVRTC, for the artifact's architecture: the cubin, and
// the compute_XX PTX that compilation assembled it from (the driver
// JIT-compiles the PTX where the cubin does not load, a newer GPU; none
// with --no-ptx).  NVRTC is thread-safe per program, and the
// compilations are the slow part of a CUDA build (25-30 ms per kernel), so
// they run on a few threads that take jobs in order; the results do not
// depend on the order they finish in.

typedef struct CuBuild CuBuild;

typedef struct CuJob {
	CuBuild *cb; // what the jobs share (read only): the cache, the diagnostics stream
	const char *src, *name, *arch;
	size_t srclen;
	int task; // the task it is a program of
	int want_ptx;
	uint8_t *out, *ptx; // the cubin and the PTX (without its NUL; NULL with --no-ptx)
	size_t len, ptxlen;
	int ok;
	char err[2048];
	char *diag; // the report of a failed compilation (open_memstream), or NULL
	size_t diaglen;
	long units; // the functions it compiles (progress)
	int hit; // from the compile cache
	double w0, w1, cpu; // its span (CLOCK_MONOTONIC) and its thread's CPU (FADC_TIME=pieces)
} CuJob;

static int
put_image(uint8_t **img, size_t *len, size_t *cap, const uint8_t *b, size_t n, int nul,
          uint64_t *off, uint64_t *olen)
{
	// Each image starts 16-byte aligned (the driver reads ELF headers in
	// place); PTX carries its terminating NUL, as cuModuleLoadData wants.
	size_t start = (*len + 15) / 16 * 16, need = start + n + (size_t)nul;
	if (need > *cap) {
		size_t c = *cap ? *cap : 1 << 16;
		while (c < need)
			c *= 2;
		uint8_t *r = realloc(*img, c);
		if (!r)
			return 0;
		*img = r;
		*cap = c;
	}
	memset(*img + *len, 0, start - *len);
	memcpy(*img + start, b, n);
	if (nul)
		(*img)[start + n] = 0;
	*len = need;
	*off = start;
	*olen = n + (size_t)nul;
	return 1;
}

static int
shared_cmp(const void *a, const void *b)
{
	return strcmp(((const CgCudaShared *)a)->name, ((const CgCudaShared *)b)->name);
}

// The launch contract of every kernel of p into t (names malloc'ed); a
// GEMM record allows TF32 when tf32.  A launch of a kernel the printer
// shared (sh[0..nsh), sorted here by name) names the function it calls.
static int
cu_contract(const KProgram *p, ArtTask *t, int tf32, CgCudaShared *sh, uint32_t nsh)
{
	if (nsh)
		qsort(sh, nsh, sizeof *sh, shared_cmp);
	uint32_t nl = cg_cuda_launches(p);
	t->kern = calloc(nl + 1, sizeof *t->kern);
	CgCudaKernel *all = calloc(nl + 1, sizeof *all);
	if (!t->kern || !all || !cg_cuda_kernels(p, all, nl)) {
		free(all);
		return 0;
	}
	t->ncuda = nl;
	int ok = 0;
	uint32_t ki = 0;
	for (; ki < nl; ki++) {
		CgCudaKernel ck = all[ki];
		ArtKernel *k = &t->kern[ki];
		k->kind = ck.host == KH_ASSIGN ? ART_LAUNCH_ASSIGN
		          : ck.gemm           ? ART_LAUNCH_GEMM
		          : ck.choice         ? ART_LAUNCH_CHOICE
		          : ck.seq            ? ART_LAUNCH_SEQ
		          : ck.conv           ? ART_LAUNCH_CONV
		                              : ART_LAUNCH_KERNEL;
		if (ck.conv) { // cuDNN (docs/ARTIFACT.md, ArtConv); TF32 as the GEMMs
			const KConv *v = ck.conv;
			k->conv = (ArtConv){
			    .op = (uint8_t)v->op, .dtype = ART_F32, .tf32 = (uint8_t)(tf32 != 0),
			    .n = (uint32_t)v->n, .c = (uint32_t)v->c, .h = (uint32_t)v->h,
			    .w = (uint32_t)v->w, .k = (uint32_t)v->k, .r = (uint32_t)v->r,
			    .s = (uint32_t)v->s, .oh = (uint32_t)v->oh, .ow = (uint32_t)v->ow,
			    .sh = (uint32_t)v->sh, .sw = (uint32_t)v->sw, .ph = (uint32_t)v->ph,
			    .pw = (uint32_t)v->pw, .dh = (uint32_t)v->dh, .dw = (uint32_t)v->dw,
			    .groups = (uint32_t)v->groups, .nhwc = (uint8_t)v->nhwc};
		}
		if (ck.gemm) {
			const KGemmPlan *g = &ck.g;
			k->gemm = (ArtGemm){
			    .dtype = g->dt == DT_F64 ? ART_F64 : ART_F32,
			    .ta = (uint8_t)g->ta,
			    .tb = (uint8_t)g->tb,
			    .tf32 = (uint8_t)(tf32 && g->dt == DT_F32),
			    .m = (uint32_t)g->M,
			    .n = (uint32_t)g->N,
			    .k = (uint32_t)g->K,
			    .batch = (uint32_t)g->batch,
			    .lda = (uint64_t)g->lda,
			    .ldb = (uint64_t)g->ldb,
			    .ldc = (uint64_t)g->ldc,
			    .sa = (uint64_t)g->sa,
			    .sb = (uint64_t)g->sb,
			    .sc = (uint64_t)g->sc,
			    .oa = (uint64_t)g->oa,
			    .ob = (uint64_t)g->ob,
			    .oc = (uint64_t)g->oc,
			};
		}
		k->name = ck.name;
		CgCudaShared key = {ck.name, NULL}, *hit;
		if (nsh && (hit = bsearch(&key, sh, nsh, sizeof *sh, shared_cmp))) {
			char *as = strdup(hit->as);
			if (!as) {
				free(ck.buf);
				goto done;
			}
			free(k->name);
			k->name = as;
		}
		k->points = (uint64_t)ck.points;
		k->grid = ck.grid;
		k->runseed = (uint8_t)ck.runseed;
		k->narg = ck.narg;
		k->arg = calloc(ck.narg + 1, sizeof *k->arg);
		if (!k->arg) {
			free(ck.buf);
			goto done;
		}
		for (uint32_t a = 0; a < ck.narg; a++) {
			const KBuf *b = &p->buf[ck.buf[a]];
			ArtKArg *x = &k->arg[a];
			x->kind = b->kind == KB_IN ? ART_ARG_INPUT : b->kind == KB_OUT ? ART_ARG_OUTPUT
			                                                               : ART_ARG_ARENA;
			x->index = b->kind == KB_TMP ? 0 : (uint32_t)b->index;
			x->offset = b->kind == KB_TMP ? (uint64_t)b->offset : 0;
			x->bytes = (uint64_t)b->bytes;
		}
		free(ck.buf);
	}
	ok = 1;
done:
	for (uint32_t j = ok ? nl : ki + 1; j < nl; j++) { // the contracts not taken
		free(all[j].name);
		free(all[j].buf);
	}
	free(all);
	return ok;
}

// src (malloc'ed, freed here) with "#error ..." as its line k: the test
// hook of cu_build.  NULL when out of memory.
static char *
inject_error(char *src, long k)
{
	static const char line[] = "#error FADC_TEST_NVRTC_ERROR (a test hook of codegen/compile.c)\n";
	size_t n = strlen(src), at = 0;
	for (long i = 1; i < k && at < n; i++) {
		const char *e = strchr(src + at, '\n');
		at = e ? (size_t)(e - src) + 1 : n;
	}
	char *r = malloc(n + sizeof line + 1);
	if (r) {
		memcpy(r, src, at);
		size_t m = at;
		if (m && r[m - 1] != '\n') // a source without a final newline
			r[m++] = '\n';
		memcpy(r + m, line, sizeof line - 1);
		memcpy(r + m + sizeof line - 1, src + at, n - at + 1);
	}
	free(src);
	return r;
}

// ---------------------------------------------------------------- pieces
//
// A large task is compiled as several NVRTC programs, its pieces
// (docs/CUDA.md, "Pieces"), so that a cold compile of one task keeps every
// core busy and a change to one kernel recompiles only its piece (each
// piece is a compile cache entry of its own).  The printer cuts the
// source into parts (cg_cuda_print_parts): the common text, the loop
// helpers, and units -- a __global__ alone, or a persistent loop kernel
// with every __device__ function it calls (module words included: a
// piece declares the grid barrier's counters and the tile buffers of its
// own, which are scratch of one launch at a time).  A unit goes into
// piece cg_piece_of(FNV-1a of the name of its first __global__, P), as
// the CPU module's pieces (codegen/llvm.c, codegen/jobs.c): a function
// of names alone, so that a change inside one kernel (a constant) moves
// nothing, and the pieces are the same whatever the threads and the
// cache.  P is the task's own units (those no earlier task's program
// holds: "sharing across tasks" below) over CU_PIECE_KERNELS, at most
// CU_MAX_PIECES: a function of the tasks only; when a change moves it by
// one, linear hashing splits (or merges) one piece and keeps the others.
// Small pieces recompile little after a change, but each program costs
// NVRTC about 30-40 ms of its own (its front end, the cubin's assembly),
// so a piece holds about 16 functions and a task at most 32 pieces.  8
// was measured (docs/PERFORMANCE.md, "Where LLVM's time goes"):
// resnet18's one-line change 4.2 -> 2.6 s of NVRTC's CPU, but detr's
// cold compile 35 -> 54 s (67 -> 111 programs).  Not the programs
// themselves: NVRTC's CPU goes with the source, ~15 ms a KB, and a
// program's own is ~40 ms.  At 8 a piece detr's forward and vjp are 58
// programs, vhp has 32 pieces of its own and room for 32 imports, and
// 260 of the 1,340 units compiled are another program's again (232 of
// 1,312 with cu_split's import bound; ART_MAX_MODULES binds there;
// docs/PERFORMANCE.md, "detr's NVRTC").  A piece
// is the common parts, the loop helpers when it holds a loop, and its
// units, in the order printed; the notes (a GEMM's comment, a shared
// kernel's) are in none.  A task of one piece by its kernel count is the
// whole source as printed, as before pieces.  Each launch record names
// the module (the piece, or an earlier task's program) that defines its
// function.
enum { CU_PIECE_KERNELS = 16, CU_MAX_PIECES = 32 };

// The pieces of a task of nfun functions of its own (the units no earlier
// task's program holds: "Sharing across tasks" below).  FADC_CUDA_PIECES=N
// (1 to ART_MAX_MODULES; a test hook) sets it.
static unsigned
cu_npieces(uint64_t nfun)
{
	const char *v = getenv("FADC_CUDA_PIECES");
	if (v && *v) {
		char *end;
		long n = strtol(v, &end, 10);
		if (!*end && n >= 1 && n <= ART_MAX_MODULES)
			return (unsigned)n;
	}
	unsigned per = CU_PIECE_KERNELS;
	// FADC_CUDA_PIECE_KERNELS=K (a hook for measuring the cold against the
	// one-line trade-off, docs/PERFORMANCE.md): K functions a piece, at
	// most CU_MAX_PIECES pieces (the imports take the rest of a task's
	// ART_MAX_MODULES).
	if ((v = getenv("FADC_CUDA_PIECE_KERNELS")) && *v) {
		char *end;
		long k = strtol(v, &end, 10);
		if (!*end && k >= 1 && k <= 1024)
			per = (unsigned)k;
	}
	return cg_piece_count(nfun, per, CU_MAX_PIECES);
}

// Is s the name of a constants' table kernel (kir_consts.c's "kir_consts")?
static int
cu_consts_name(const char *s)
{
	size_t n = strlen(s), k = sizeof "_kir_consts" - 1;
	return n > k && !strcmp(s + n - k, "_kir_consts");
}

static uint64_t
cu_name_hash(const char *s)
{
	uint64_t h = 14695981039346656037ull; // FNV-1a 64
	for (; *s; s++)
		h = (h ^ (uint8_t)*s) * 1099511628211ull;
	return h;
}

// The printer numbers a kernel's buffers (b<N>), expressions (x<N>) and
// loop steps (s<N>) by their ids in the whole task, so a change that adds
// one expression or buffer anywhere renumbers the locals of every kernel
// after it.  A unit's part is one function, and those names are its own
// (parameters and locals: the helpers of the common parts are never
// called through them), so in a piece each part's are renumbered in the
// order they first occur (as the sharing key does, codegen/cuda.c):
// the same function, whose text no longer depends on the rest of the
// task.  Literals (0x1.8p+2f, 255U, strings) are one token each and kept;
// so is every other identifier; comments are renumbered alike.
typedef struct CuCanon {
	uint32_t *map[3]; // per prefix b, s, x: old number -> new number + 1
	uint32_t nmap[3];
	uint32_t *seen[3]; // the old numbers mapped, to clear map after a part
	uint32_t nseen[3], cseen[3];
} CuCanon;

static int
cu_idch(char ch)
{
	return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
	       ch == '_';
}

// t[0..n) renumbered into out; the length written.  out NULL: only the
// length (a new number may have more digits than the old one).
static size_t
cu_canon(CuCanon *cc, const char *t, size_t n, char *out)
{
	static const char pre[3] = {'b', 's', 'x'};
	uint32_t next[3] = {0, 0, 0};
	size_t o = 0;
	int comment = 0;
	for (size_t i = 0; i < n;) {
		char ch = t[i];
		if (ch == '/' && i + 1 < n && t[i + 1] == '/')
			comment = 1; // renamed alike, but a '"' in it starts no string
		else if (ch == '\n')
			comment = 0;
		if ((ch >= '0' && ch <= '9') || (ch == '"' && !comment)) { // a literal: one token, kept
			size_t j = i + 1;
			if (ch == '"') // a string (inline asm: ".b32"): to its closing quote
				for (; j < n && t[j] != '"'; j++)
					j += t[j] == '\\' && j + 1 < n;
			while (ch != '"' && j < n && (cu_idch(t[j]) || t[j] == '.'))
				j++;
			j += ch == '"' && j < n;
			if (out)
				memcpy(out + o, t + i, j - i);
			o += j - i;
			i = j;
			continue;
		}
		if (!cu_idch(ch)) {
			if (out)
				out[o] = ch;
			o++;
			i++;
			continue;
		}
		size_t j = i;
		while (j < n && cu_idch(t[j]))
			j++;
		int k = -1;
		for (int q = 0; q < 3; q++)
			if (ch == pre[q])
				k = q;
		int num = k >= 0 && j - i > 1 && j - i < 11;
		for (size_t d = i + 1; num && d < j; d++)
			num = t[d] >= '0' && t[d] <= '9';
		if (!num) {
			if (out)
				memcpy(out + o, t + i, j - i);
			o += j - i;
			i = j;
			continue;
		}
		unsigned long v = strtoul(t + i + 1, NULL, 10);
		if (v >= cc->nmap[k]) {
			uint32_t m = cc->nmap[k] ? cc->nmap[k] : 256;
			while (m <= v)
				m *= 2;
			uint32_t *r = realloc(cc->map[k], m * sizeof *r);
			FADC_ASSERT(r != NULL, "cuda pieces: out of memory");
			memset(r + cc->nmap[k], 0, (m - cc->nmap[k]) * sizeof *r);
			cc->map[k] = r;
			cc->nmap[k] = m;
		}
		if (!cc->map[k][v]) {
			cc->map[k][v] = ++next[k];
			if (cc->nseen[k] == cc->cseen[k]) {
				cc->cseen[k] = cc->cseen[k] ? 2 * cc->cseen[k] : 256;
				cc->seen[k] = realloc(cc->seen[k], cc->cseen[k] * sizeof *cc->seen[k]);
				FADC_ASSERT(cc->seen[k] != NULL, "cuda pieces: out of memory");
			}
			cc->seen[k][cc->nseen[k]++] = (uint32_t)v;
		}
		char nb[16];
		int l = snprintf(nb, sizeof nb, "%c%u", pre[k], cc->map[k][v] - 1);
		if (out)
			memcpy(out + o, nb, (size_t)l);
		o += (size_t)l;
		i = j;
	}
	for (int q = 0; q < 3; q++) {
		for (uint32_t e = 0; e < cc->nseen[q]; e++)
			cc->map[q][cc->seen[q][e]] = 0;
		cc->nseen[q] = 0;
	}
	return o;
}

// A function's module (CuSplit.fn, sorted by name).
typedef struct CuFn {
	const char *name; // a part's
	uint32_t module;
	const char *as; // NULL, or the function an earlier task's program defines instead
} CuFn;

static int
cufn_cmp(const void *a, const void *b)
{
	return strcmp(((const CuFn *)a)->name, ((const CuFn *)b)->name);
}

// A task's programs: src[0..n) (malloc'ed), the functions each defines
// (units: for progress), and where each __global__ is.
typedef struct CuImport {
	int task; // an earlier task
	uint32_t module; // one of its own programs
} CuImport;
typedef struct CuSplit {
	uint32_t n;
	char **src;
	size_t *len;
	long *units;
	CuFn *fn;
	uint32_t nfn;
	int whole; // one program, the source as printed
	// The modules after its own n: earlier tasks' programs that hold
	// functions of this task (module n + k is imp[k]).
	CuImport *imp;
	uint32_t nimp;
} CuSplit;

static void
cu_split_free(CuSplit *sp)
{
	for (uint32_t i = 0; sp->src && i < sp->n; i++)
		free(sp->src[i]);
	free(sp->src);
	free(sp->len);
	free(sp->units);
	free(sp->fn);
	free(sp->imp);
	memset(sp, 0, sizeof *sp);
}

// ---------------------------------------------------------------- sharing across tasks
//
// The tasks of a model repeat one another's kernels: vjp, vhp and jvp
// recompute the forward pass, vhp vjp's backward pass (resnet18: 216 of
// its 528 __global__ functions are another task's function but for the
// names).  Within a task the printer shares equal kernels (cg_cuda_print_
// shared); across tasks, compile.c does: a unit (a __global__, or a loop
// kernel with its __device__ functions) whose code equals a unit of an
// earlier task's program is left out of this task's programs, and its
// launches call the earlier task's function, in that program, which the
// task lists as a module of its own after its programs (imp[]; the
// artifact's module records the same image offsets: the images are in
// the artifact once, and each task loads its modules as before, so each
// still has its own copy of the module words).
//
// Equal means the same sharing key (cu_split): SHA-256 of the unit's
// renumbered text (cu_canon) without its comments and with each of the
// task's kernel names (fadc_TASK_k<digit>...) replaced by its rank of
// first appearance in the unit; the launch contract of each of its
// __global__s (points, grid, run seed, arguments); and the common parts
// it is compiled with (the loop helpers too for a loop unit), without
// comments and with each "[N]" as "[]": the helpers are the same text in
// every task, and the module words are sized for the largest use of
// their task, which covers every function of it, the equal one of the
// earlier task too.  So the function an import calls is the one this
// task's program would have compiled, but for its name (checked in
// tests/unit/test_codegen_cuda_shared.c: the PTX of every launch, shared
// or not, is its PTX without sharing, names aside).
//
// A task of one program (the source as printed) neither shares nor is
// shared; a task's imports and own pieces are at most ART_MAX_MODULES (a
// unit whose program would be one import too many is compiled in the
// task's own; cu_split).
// The first task in order that has a unit owns it, so what each program
// holds is a function of the tasks alone: the same whatever the threads
// and the cache, and a change inside a kernel of every task recompiles
// the first task's program that holds it only.

// A unit some task's program holds, by its sharing key.
typedef struct CuOwner {
	uint8_t key[32];
	int task;
	uint32_t module; // the program, among the task's own
	uint32_t nname;
	char **name; // its __global__s, in the order printed
} CuOwner;
typedef struct CuReg {
	CuOwner *e;
	uint32_t n, cap;
	uint32_t *slot; // open addressing: entry + 1; 0 empty
	uint32_t nslot; // a power of two, at least twice n
} CuReg;

static void
cu_reg_free(CuReg *r)
{
	for (uint32_t i = 0; i < r->n; i++) {
		for (uint32_t k = 0; k < r->e[i].nname; k++)
			free(r->e[i].name[k]);
		free(r->e[i].name);
	}
	free(r->e);
	free(r->slot);
	memset(r, 0, sizeof *r);
}

static uint32_t
cu_reg_home(const uint8_t key[32], uint32_t nslot)
{
	uint32_t h;
	memcpy(&h, key, sizeof h);
	return h & (nslot - 1);
}

static CuOwner *
cu_reg_find(const CuReg *r, const uint8_t key[32])
{
	for (uint32_t i = r->nslot ? cu_reg_home(key, r->nslot) : 0; r->nslot;
	     i = (i + 1) & (r->nslot - 1)) {
		if (!r->slot[i])
			return NULL;
		CuOwner *o = &r->e[r->slot[i] - 1];
		if (!memcmp(o->key, key, sizeof o->key))
			return o;
	}
	return NULL;
}

// Adds o (its names taken); 0 on out of memory (o's names freed).
static int
cu_reg_add(CuReg *r, CuOwner *o)
{
	if (2 * (r->n + 1) > r->nslot) {
		uint32_t ns = r->nslot ? 2 * r->nslot : 256;
		uint32_t *sl = calloc(ns, sizeof *sl);
		if (!sl)
			goto oom;
		for (uint32_t e = 0; e < r->n; e++) {
			uint32_t i = cu_reg_home(r->e[e].key, ns);
			while (sl[i])
				i = (i + 1) & (ns - 1);
			sl[i] = e + 1;
		}
		free(r->slot);
		r->slot = sl;
		r->nslot = ns;
	}
	if (r->n == r->cap) {
		uint32_t nc = r->cap ? 2 * r->cap : 256;
		CuOwner *ne = realloc(r->e, nc * sizeof *ne);
		if (!ne)
			goto oom;
		r->e = ne;
		r->cap = nc;
	}
	uint32_t i = cu_reg_home(o->key, r->nslot);
	while (r->slot[i])
		i = (i + 1) & (r->nslot - 1);
	r->e[r->n] = *o;
	r->slot[i] = ++r->n;
	return 1;
oom:
	for (uint32_t k = 0; k < o->nname; k++)
		free(o->name[k]);
	free(o->name);
	return 0;
}

// The names a unit's key has replaced, in order of first appearance.
typedef struct CuNames {
	const char **s;
	size_t *len;
	uint32_t n, cap;
} CuNames;

// t[0..n) into the sharing key h: comments left out, each identifier that
// starts with pre and a digit (the task's kernel names) as "@" and its rank
// in nm, and with brackets, each "[digits]" as "[]".  0 on out of memory.
static int
cu_key_text(CgSha256 *h, const char *t, size_t n, const char *pre, CuNames *nm, int brackets)
{
	size_t npre = strlen(pre), run = 0;
	for (size_t i = 0; i < n;) {
		char ch = t[i];
		if (ch == '/' && i + 1 < n && t[i + 1] == '/') { // a comment: to the line's end
			cg_sha256_add(h, t + run, i - run);
			while (i < n && t[i] != '\n')
				i++;
			run = i;
			continue;
		}
		if (ch == '"' || ch == '\'') { // a literal, whole
			size_t j = i + 1;
			for (; j < n && t[j] != ch; j++)
				j += t[j] == '\\' && j + 1 < n;
			i = j + (j < n);
			continue;
		}
		if (brackets && ch == '[' && i + 1 < n && t[i + 1] >= '0' && t[i + 1] <= '9') {
			size_t j = i + 1;
			while (j < n && t[j] >= '0' && t[j] <= '9')
				j++;
			if (j < n && t[j] == ']') {
				cg_sha256_add(h, t + run, i + 1 - run);
				run = i = j;
				continue;
			}
		}
		if (!cu_idch(ch)) {
			i++;
			continue;
		}
		size_t j = i;
		while (j < n && cu_idch(t[j]))
			j++;
		if (j - i > npre && !memcmp(t + i, pre, npre) && t[i + npre] >= '0' &&
		    t[i + npre] <= '9') {
			uint32_t k = 0;
			while (k < nm->n && !(nm->len[k] == j - i && !memcmp(nm->s[k], t + i, j - i)))
				k++;
			if (k == nm->n) {
				if (nm->n == nm->cap) {
					uint32_t nc = nm->cap ? 2 * nm->cap : 16;
					const char **ns = realloc(nm->s, nc * sizeof *ns);
					if (ns)
						nm->s = ns;
					size_t *nl = ns ? realloc(nm->len, nc * sizeof *nl) : NULL;
					if (!nl)
						return 0;
					nm->len = nl;
					nm->cap = nc;
				}
				nm->s[nm->n] = t + i;
				nm->len[nm->n++] = j - i;
			}
			char r[16];
			int l = snprintf(r, sizeof r, "@%u", k);
			cg_sha256_add(h, t + run, i - run);
			cg_sha256_add(h, r, (size_t)l);
			run = j;
		}
		i = j;
	}
	cg_sha256_add(h, t + run, n - run);
	return 1;
}

// The launch contract of function name in t (its first kernel record) into h.
static void
cu_key_launch(CgSha256 *h, const ArtTask *t, const char *name)
{
	uint64_t v[4] = {UINT64_MAX, 0, 0, 0};
	for (uint32_t k = 0; k < t->ncuda; k++) {
		const ArtKernel *r = &t->kern[k];
		if (r->kind == ART_LAUNCH_KERNEL && !strcmp(r->name, name)) {
			v[0] = r->points;
			v[1] = r->grid;
			v[2] = r->runseed;
			v[3] = r->narg;
			break;
		}
	}
	cg_sha256_field(h, v, sizeof v);
}

// Source src (len bytes, parts q[0..nq)) of task ti (program p, launch
// records t) as pieces into *sp: its units that no earlier task's program
// holds (reg; then recorded there) into P pieces, empty pieces dropped,
// the others numbered in order; the others' functions taken from the
// programs that hold them (sp->imp).  A task of one unit (a fused task),
// or of one piece by its kernel count, is one program, src itself (taken:
// *srcp is NULL after).  0 on out of memory.
static int
cu_split(char **srcp, size_t len, const CgCudaPart *q, uint32_t nq, const KProgram *p,
         const ArtTask *t, int ti, CuReg *reg, CuSplit *sp)
{
	char *src = *srcp;
	memset(sp, 0, sizeof *sp);
	int32_t maxu = -1, first = -1, several = 0;
	for (uint32_t j = 0; j < nq; j++)
		if (q[j].unit >= 0) {
			maxu = q[j].unit > maxu ? q[j].unit : maxu;
			several |= first >= 0 && q[j].unit != first;
			first = first < 0 ? q[j].unit : first;
		}
	int ok = 0;
	int32_t *bucket = NULL, *mod = NULL, *owner = NULL;
	uint8_t *loop = NULL, *uloop = NULL, (*key)[32] = NULL;
	char *pre = NULL, *buf = NULL;
	size_t bufcap = 0;
	CuCanon cc = {0};
	CuNames nm = {0};
	if (cu_npieces(p->nk) <= 1 || !several) { // one program: the source as printed
		sp->src = calloc(1, sizeof *sp->src);
		sp->len = calloc(1, sizeof *sp->len);
		sp->units = calloc(1, sizeof *sp->units);
		if (!sp->src || !sp->len || !sp->units)
			goto done;
		sp->n = 1;
		sp->whole = 1;
		sp->src[0] = src;
		sp->len[0] = len;
		*srcp = NULL;
		return 1; // every launch in module 0 (sp->fn empty)
	}
	size_t nu = (size_t)maxu + 1;
	bucket = malloc(nu * sizeof *bucket);
	owner = malloc(nu * sizeof *owner);
	uloop = calloc(nu, 1);
	key = calloc(nu, sizeof *key);
	// The task's kernel names start so (cuda_kernel_name).
	pre = malloc(strlen(p->name) + 16);
	sp->imp = calloc(ART_MAX_MODULES + 1, sizeof *sp->imp);
	if (!bucket || !owner || !uloop || !key || !pre || !sp->imp)
		goto done;
	{
		char *o = pre + sprintf(pre, "fadc_");
		for (const char *c = p->name; *c; c++)
			*o++ = cu_idch(*c) ? *c : '_';
		strcpy(o, "_k");
	}
	for (size_t u = 0; u < nu; u++)
		bucket[u] = owner[u] = -1;
	for (uint32_t j = 0; j < nq; j++)
		if (q[j].unit >= 0)
			uloop[q[j].unit] |= q[j].loop;
	// Each unit's sharing key: the common parts' (with and without the
	// loop helpers), then its own parts', each renumbered as in its piece.
	CgSha256 common[2];
	for (int lp = 0; lp < 2; lp++) {
		cg_sha256_init(&common[lp]);
		cg_sha256_field(&common[lp], "fadc cuda unit 1", 16);
		for (uint32_t j = 0; j < nq; j++)
			if (q[j].unit == CG_CUDA_PART_ALL || (lp && q[j].unit == CG_CUDA_PART_LOOPS)) {
				nm.n = 0;
				if (!cu_key_text(&common[lp], src + q[j].off, q[j].len, pre, &nm, 1))
					goto done;
				cg_sha256_add(&common[lp], "\0", 1);
			}
	}
	for (size_t u = 0; u < nu; u++) {
		// Its parts renumbered as in its piece, one after the other, so
		// that a name has one rank in the whole unit.
		size_t l = 0;
		for (uint32_t j = 0; j < nq; j++) {
			if (q[j].unit != (int32_t)u)
				continue;
			size_t lj = cu_canon(&cc, src + q[j].off, q[j].len, NULL);
			if (l + lj + 2 > bufcap) {
				size_t nc = 2 * (l + lj + 2);
				char *nb = realloc(buf, nc);
				if (!nb)
					goto done;
				buf = nb;
				bufcap = nc;
			}
			l += cu_canon(&cc, src + q[j].off, q[j].len, buf + l);
			buf[l++] = 0;
		}
		if (!l)
			continue; // no such unit
		CgSha256 h = common[uloop[u] ? 1 : 0];
		nm.n = 0;
		if (!cu_key_text(&h, buf, l, pre, &nm, 0))
			goto done;
		for (uint32_t j = 0; j < nq; j++)
			if (q[j].unit == (int32_t)u && q[j].name)
				cu_key_launch(&h, t, q[j].name);
		cg_sha256_end(&h, key[u]);
	}
	// The units an earlier task's program holds, in the order printed; one
	// whose program would be an import too many is the task's own.  A
	// task's modules are its own pieces, the constants' piece
	// (kir_consts.c) and its imports, at most ART_MAX_MODULES: a new
	// import is taken while that bound holds for the pieces of every
	// unit not imported so far (left: the own units
	// can only be fewer at the end, and cu_npieces grows with its
	// argument, so the final pieces and imports fit).  A fixed share
	// (64 less the most pieces, 32) left a late task such as detr's jvp,
	// whose units are in some 60 programs of the three tasks before it,
	// compiling again the units of the programs past its 32nd import
	// while having 6 pieces of its own (docs/CUDA.md).
	// FADC_CUDA_SHARE=0 (a test hook): every task's units its own.
	const char *sv = getenv("FADC_CUDA_SHARE");
	int share = !sv || strcmp(sv, "0");
	uint32_t nown = 0, nfn = 0, left = 0, kc = 0; // kc: the constants' piece
	for (uint32_t j = 0; j < nq; j++) {
		if (q[j].unit >= 0 && bucket[q[j].unit] == -1) {
			bucket[q[j].unit] = -3; // counted
			left++;
		}
		if (q[j].unit >= 0 && q[j].name && cu_consts_name(q[j].name))
			kc = 1;
	}
	for (uint32_t j = 0; j < nq; j++) {
		int32_t u = q[j].unit;
		if (u < 0)
			continue;
		nfn += q[j].name != NULL;
		if (bucket[u] != -3)
			continue;
		bucket[u] = -2; // seen
		CuOwner *o = share ? cu_reg_find(reg, key[u]) : NULL;
		uint32_t k = 0;
		if (o && o->task != ti) {
			while (k < sp->nimp && !(sp->imp[k].task == o->task && sp->imp[k].module == o->module))
				k++;
			// the import, the pieces of the units left, the constants' piece
			if (k == sp->nimp && sp->nimp + 1 + cu_npieces(left - 1) + kc <= ART_MAX_MODULES)
				sp->imp[sp->nimp++] = (CuImport){o->task, o->module};
		}
		if (o && o->task != ti && k < sp->nimp) {
			owner[u] = (int32_t)(o - reg->e);
			left--;
		} else
			nown++;
	}
	// Pieces 0 .. P-1 by name hash, and piece P for the constants' table
	// kernels (kir_consts.c): their text holds the task's constants, so a
	// changed constant recompiles that small program alone.
	unsigned P = cu_npieces(nown);
	mod = malloc((P + 2) * sizeof *mod);
	loop = calloc(P + 2, 1);
	if (!mod || !loop)
		goto done;
	// Each own unit's piece: the hash of its first __global__'s name (a loop
	// unit's __device__ functions come before its kernel, so the first
	// named part).
	for (size_t u = 0; u < nu; u++)
		bucket[u] = -1;
	for (uint32_t j = 0; j < nq; j++) {
		int32_t u = q[j].unit;
		if (u < 0 || !q[j].name || owner[u] >= 0)
			continue;
		if (bucket[u] < 0)
			bucket[u] = cu_consts_name(q[j].name) ? (int32_t)P
			                                      : (int32_t)cg_piece_of(cu_name_hash(q[j].name), P);
	}
	for (uint32_t j = 0; j < nq; j++)
		if (q[j].unit >= 0 && owner[q[j].unit] < 0) {
			FADC_ASSERT(bucket[q[j].unit] >= 0, "cuda pieces: a unit without a __global__");
			loop[bucket[q[j].unit]] |= q[j].loop;
		}
	for (unsigned b = 0; b <= P; b++)
		mod[b] = -1;
	for (uint32_t j = 0; j < nq; j++)
		if (q[j].unit >= 0 && owner[q[j].unit] < 0)
			mod[bucket[q[j].unit]] = 0;
	uint32_t n = 0;
	for (unsigned b = 0; b <= P; b++)
		if (mod[b] >= 0)
			mod[b] = (int32_t)n++;
	sp->src = calloc(n + 1, sizeof *sp->src);
	sp->len = calloc(n + 1, sizeof *sp->len);
	sp->units = calloc(n + 1, sizeof *sp->units);
	sp->fn = calloc(nfn + 1, sizeof *sp->fn);
	if (!sp->src || !sp->len || !sp->units || !sp->fn)
		goto done;
	sp->n = n;
	for (unsigned b = 0; b <= P; b++) {
		if (mod[b] < 0)
			continue;
		uint32_t m = (uint32_t)mod[b];
		size_t sz = 1;
		for (int pass = 0; pass < 2; pass++) {
			for (uint32_t j = 0; j < nq; j++) {
				int in = q[j].unit == CG_CUDA_PART_ALL ||
				         (q[j].unit == CG_CUDA_PART_LOOPS && loop[b]) ||
				         (q[j].unit >= 0 && bucket[q[j].unit] == (int32_t)b);
				if (!in)
					continue;
				if (pass == 0) {
					sz += q[j].unit >= 0 ? cu_canon(&cc, src + q[j].off, q[j].len, NULL)
					                     : q[j].len;
					continue;
				}
				if (q[j].unit >= 0)
					sp->len[m] += cu_canon(&cc, src + q[j].off, q[j].len,
					                       sp->src[m] + sp->len[m]);
				else
					memcpy(sp->src[m] + sp->len[m], src + q[j].off, q[j].len);
				sp->len[m] += q[j].unit >= 0 ? 0 : q[j].len;
				if (q[j].unit >= 0) {
					sp->units[m]++;
					if (q[j].name)
						sp->fn[sp->nfn++] = (CuFn){q[j].name, m, NULL};
				}
			}
			if (pass == 0 && !(sp->src[m] = malloc(sz)))
				goto done;
		}
		sp->src[m][sp->len[m]] = 0;
	}
	// The shared units' functions: the owner's of the same rank, in the
	// import of its program.
	for (size_t u = 0; u < nu; u++) {
		if (owner[u] < 0)
			continue;
		const CuOwner *o = &reg->e[owner[u]];
		uint32_t k = 0, r = 0;
		while (!(sp->imp[k].task == o->task && sp->imp[k].module == o->module))
			k++;
		for (uint32_t j = 0; j < nq; j++)
			if (q[j].unit == (int32_t)u && q[j].name) {
				FADC_ASSERT(r < o->nname, "cuda sharing: units of one key differ");
				sp->fn[sp->nfn++] = (CuFn){q[j].name, n + k, o->name[r++]};
			}
	}
	// The own units, for later tasks (the first program to hold a key owns it).
	for (size_t u = 0; u < nu; u++) {
		if (!share || owner[u] >= 0 || bucket[u] < 0 || cu_reg_find(reg, key[u]))
			continue;
		CuOwner o = {.task = ti, .module = (uint32_t)mod[bucket[u]]};
		memcpy(o.key, key[u], sizeof o.key);
		for (uint32_t j = 0; j < nq; j++)
			o.nname += q[j].unit == (int32_t)u && q[j].name;
		o.name = calloc(o.nname + 1, sizeof *o.name);
		if (!o.name)
			goto done;
		uint32_t r = 0;
		for (uint32_t j = 0; j < nq; j++)
			if (q[j].unit == (int32_t)u && q[j].name && !(o.name[r++] = strdup(q[j].name))) {
				for (uint32_t k = 0; k < r; k++)
					free(o.name[k]);
				free(o.name);
				goto done;
			}
		if (!cu_reg_add(reg, &o))
			goto done;
	}
	qsort(sp->fn, sp->nfn, sizeof *sp->fn, cufn_cmp);
	ok = 1;
done:
	free(bucket);
	free(owner);
	free(mod);
	free(loop);
	free(uloop);
	free(key);
	free(pre);
	free(buf);
	free(nm.s);
	free(nm.len);
	for (int k = 0; k < 3; k++) {
		free(cc.map[k]);
		free(cc.seen[k]);
	}
	if (!ok)
		cu_split_free(sp);
	return ok;
}

// The CUDA part of a compile, from cu_start (printed, split, queued on the
// pool) to cu_finish (waited for, the images made).
struct CuBuild {
	int n; // tasks
	CuSplit *sp; // each task's programs
	CuReg reg; // the units their programs hold, by sharing key
	long shared; // imports, all tasks'
	int *first; // each task's first job
	CuJob *job;
	char **name;
	int njob;
	long units; // functions in all (progress)
	FILE *diag;
	CgCache *cache; // NULL: none (--no-cache, or an unusable folder)
	CgPool *pool;
	CgBatch batch;
	int queued; // the batch is known to the pool
	Mark t0; // when the programs were queued
	KTime tm;
};

// One program: from the compile cache (codegen/ccache.c: a hit is the
// bytes this compilation would make, so the artifact is the same), else
// NVRTC.  Each job's report is kept apart and cu_finish prints one:
// reports written from several threads at once would interleave.
static void
cu_job(void *arg)
{
	CuJob *j = arg;
	CgCache *cache = j->cb->cache;
	uint8_t key[32], *b = NULL;
	size_t blen = 0;
	j->w0 = clock_s(CLOCK_MONOTONIC);
	double c0 = clock_s(CLOCK_THREAD_CPUTIME_ID);
	if (cache) {
		cg_cuda_cache_key(j->src, j->arch, j->want_ptx, key);
		j->ok = cg_cache_get(cache, key, &j->out, &j->len, &b, &blen);
		if (j->ok && j->want_ptx) {
			j->ptx = b;
			j->ptxlen = blen;
		} else
			free(b);
		j->hit = j->ok;
	}
	if (!j->ok) {
		FILE *d = open_memstream(&j->diag, &j->diaglen);
		j->ok = cg_cuda_compile_both(j->src, j->name, j->arch, &j->out, &j->len,
		                             j->want_ptx ? &j->ptx : NULL, &j->ptxlen,
		                             d ? d : j->cb->diag, j->err, sizeof j->err);
		if (d)
			fclose(d);
		if (j->ok && cache)
			cg_cache_put(cache, key, j->out, j->len, j->ptx ? j->ptx : (const uint8_t *)"",
			             j->ptx ? j->ptxlen : 0);
	}
	j->cpu = clock_s(CLOCK_THREAD_CPUTIME_ID) - c0;
	j->w1 = clock_s(CLOCK_MONOTONIC);
}

// Prints the CUDA code of tasks[0..n), splits it into programs, and queues
// their compilations on pool (descriptor entries at: the launch records).
// 0 with err set on failure; cu_free either way.
static int
cu_start(CuBuild *cb, const char *model, const CgTask *tasks, ArtTask *at, int n,
         const CgOptions *o, Phases *ps, CgPool *pool, char *err, size_t errlen)
{
	Mark mk = mark_now();
	KTime tm = kir_time_start();
	const char *arch = o->cuda_arch ? o->cuda_arch : "sm_90";
	memset(cb, 0, sizeof *cb);
	cb->n = n;
	cb->diag = o->cuda_diag;
	cb->pool = pool;
	if (strncmp(arch, "sm_", 3) || !arch[3]) {
		snprintf(err, errlen, "error: --cuda-arch %s: expected sm_XX (sm_90)", arch);
		return 0;
	}
	cb->sp = calloc((size_t)n + 1, sizeof *cb->sp);
	cb->first = calloc((size_t)n + 1, sizeof *cb->first);
	int *order = NULL;
	if (!cb->sp || !cb->first) {
		snprintf(err, errlen, "error: out of memory");
		return 0;
	}
	// FADC_TEST_NVRTC_ERROR=K (a test hook, tests/cli/cli-msg-nvrtc.sh):
	// a `#error` line becomes line K of every program's source (its end
	// when shorter), so that a failed NVRTC compilation can be tested on
	// any machine with the toolkit, without a bug in the printer.
	const char *inject = getenv("FADC_TEST_NVRTC_ERROR");
	long injectk = inject && *inject ? strtol(inject, NULL, 10) : 0;
	for (int i = 0; i < n; i++) {
		CgCudaShared *sh = NULL;
		CgCudaPart *parts = NULL;
		uint32_t nsh = 0, nparts = 0;
		size_t len = 0;
		// The CUDA code's own copy with channels-last activations
		// (kir_layout.c); the CPU code is printed from tasks[i].prog.
		KProgram *lay = kir_layout_nhwc(tasks[i].prog, o->allow_tf32, NULL);
		KProgram *cp = lay ? lay : tasks[i].prog;
		// Constants out of the kernels' text (kir_consts.c), on the plan
		// printed; not where the temporaries are private to a block (each
		// its own array: the views could not alias their table).  Without
		// a layout of its own this is the CPU's program too.
		if (!cuda_tmp_private(cp))
			kir_consts(cp);
		if ((uint64_t)cp->arena_bytes > at[i].arena_bytes)
			at[i].arena_bytes = (uint64_t)cp->arena_bytes;
		char *src = cg_cuda_print_parts(cp, &len, &sh, &nsh, &parts, &nparts, err, errlen);
		if (!src) {
			kir_program_free(lay);
			return 0;
		}
		int good = cu_contract(cp, &at[i], o->allow_tf32, sh, nsh) &&
		           cu_split(&src, len, parts, nparts, cp, &at[i], i, &cb->reg, &cb->sp[i]);
		if (lay && (uint64_t)lay->arena_bytes > at[i].arena_bytes) // a plan of its own
			at[i].arena_bytes = (uint64_t)lay->arena_bytes;
		if (good && cb->sp[i].whole) // the functions printed, about
			cb->sp[i].units[0] = (long)cp->nk - (long)nsh;
		kir_program_free(lay);
		// Each kernel record's module: the piece that defines its function,
		// or the earlier task's program that holds it (and its name there).
		for (uint32_t k = 0; good && cb->sp[i].nfn && k < at[i].ncuda; k++) {
			ArtKernel *r = &at[i].kern[k];
			CuFn key = {r->name, 0, NULL}, *hit;
			if (r->kind != ART_LAUNCH_KERNEL)
				continue;
			hit = bsearch(&key, cb->sp[i].fn, cb->sp[i].nfn, sizeof *cb->sp[i].fn, cufn_cmp);
			FADC_ASSERT(hit != NULL, "cuda pieces: a launch of a function no piece defines");
			r->module = hit->module;
			if (hit->as) {
				char *as = strdup(hit->as);
				good = as != NULL;
				if (as) {
					free(r->name);
					r->name = as;
				}
			}
		}
		cb->shared += (long)cb->sp[i].nimp;
		free(src);
		// The part names cb->sp[i].fn points at are needed no longer.
		for (uint32_t k = 0; k < cb->sp[i].nfn; k++)
			cb->sp[i].fn[k].name = NULL;
		cg_cuda_parts_free(parts, nparts);
		cg_cuda_shared_free(sh, nsh);
		if (!good) {
			snprintf(err, errlen, "error: out of memory");
			return 0;
		}
		cb->first[i] = cb->njob;
		cb->njob += (int)cb->sp[i].n;
	}
	cb->job = calloc((size_t)cb->njob + 1, sizeof *cb->job);
	cb->name = calloc((size_t)cb->njob + 1, sizeof *cb->name);
	order = calloc((size_t)cb->njob + 1, sizeof *order);
	if (!cb->job || !cb->name || !order) {
		snprintf(err, errlen, "error: out of memory");
		goto fail;
	}
	for (int i = 0; i < n; i++)
		for (uint32_t m = 0; m < cb->sp[i].n; m++) {
			int j = cb->first[i] + (int)m;
			if (injectk > 0 && !(cb->sp[i].src[m] = inject_error(cb->sp[i].src[m], injectk))) {
				snprintf(err, errlen, "error: out of memory");
				goto fail;
			}
			// MODEL.TASK.cu, or MODEL.TASK.pieceM.cu: diagnostics only
			// (NVRTC compiles every program as fadc.cu, cuda_nvrtc.c).
			size_t nl = strlen(model) + strlen(tasks[i].name) + 32;
			if (!(cb->name[j] = malloc(nl))) {
				snprintf(err, errlen, "error: out of memory");
				goto fail;
			}
			if (cb->sp[i].n == 1)
				snprintf(cb->name[j], nl, "%s.%s.cu", model, tasks[i].name);
			else
				snprintf(cb->name[j], nl, "%s.%s.piece%u.cu", model, tasks[i].name, m);
			if (o->emit_cuda)
				fprintf(o->emit_cuda, "// ---- %s\n%s", cb->name[j], cb->sp[i].src[m]);
			cb->job[j].src = cb->sp[i].src[m];
			cb->job[j].srclen = strlen(cb->sp[i].src[m]);
			cb->job[j].name = cb->name[j];
			cb->job[j].arch = arch;
			cb->job[j].task = i;
			cb->job[j].want_ptx = !o->no_ptx;
			cb->job[j].units = cb->sp[i].units[m] > 0 ? cb->sp[i].units[m] : 1;
			cb->units += cb->job[j].units;
		}
	// The largest source first, so that the last job to start is a small
	// one (ties in job order: the same order every time, not that it
	// matters to the bytes).
	for (int j = 0; j < cb->njob; j++) {
		int k = j;
		while (k > 0 && cb->job[order[k - 1]].srclen < cb->job[j].srclen) {
			order[k] = order[k - 1];
			k--;
		}
		order[k] = j;
	}
	kir_time_note(tm, "cuda-print", model);
	phase_add(ps, PH_CUDA_PRINT, mk);
	if (!o->no_cache) {
		progress(o, "", 0, 0); // its warning, if any, on a line of its own
		cb->cache = cg_cache_open();
	}
	cb->t0 = mark_now();
	cb->tm = kir_time_start();
	cg_pool_batch(pool, &cb->batch, "kernels (NVRTC)");
	cb->queued = 1;
	for (int k = 0; k < cb->njob; k++) {
		CuJob *j = &cb->job[order[k]];
		j->cb = cb;
		cg_pool_add(pool, &cb->batch, cu_job, j, j->units);
	}
	free(order);
	return 1;
fail:
	free(order);
	return 0;
}

// Waits for the programs cu_start queued; fills the descriptor entries'
// modules and the image section (*img, *imglen).  0 with err set (and a
// failed compilation's report printed) on failure.
static int
cu_finish(CuBuild *cb, const char *model, const CgTask *tasks, ArtTask *at, const CgOptions *o,
          Phases *ps, uint8_t **img, size_t *imglen, char *err, size_t errlen)
{
	cg_pool_wait(cb->pool, &cb->batch);
	size_t cap = 0;
	long hits = 0, misses = 0;
	int cached = cb->cache != NULL;
	cg_cache_close(cb->cache, &hits, &misses);
	cb->cache = NULL;
	// The programs' span and their jobs' CPU (each on its thread's clock:
	// LLVM's pieces may share the pool and the time).
	double wall = cb->batch.started ? cb->batch.last - cb->t0.wall : 0;
	if (ps) {
		ps->wall[PH_NVRTC] += wall;
		ps->cpu[PH_NVRTC] += cb->batch.cpu;
	}
	if (cb->tm.on)
		fprintf(stderr,
		        "fadc: time: nvrtc %s (%d programs, %ld imports): %.3f s wall, %.3f s cpu (its "
		        "jobs)\n",
		        model, cb->njob, cb->shared, wall, cb->batch.cpu);
	// Hits and misses: --stats, and FADC_TIME=1 as its other step notes.
	if (o->stats && cached) {
		progress(o, "", 0, 0);
		fprintf(o->stats, "# stats: compile cache (NVRTC): %ld hits, %ld misses\n", hits, misses);
	}
	if (cb->tm.on && cached)
		fprintf(stderr, "fadc: time: nvrtc cache: %ld hits, %ld misses\n", hits, misses);
	// FADC_TIME=pieces: each program compiled, in job order: its source,
	// its functions, its CPU and its span from the queueing (which
	// programs cost, whether the last ones ran alone).  NVRTC's CPU is
	// about proportional to the source (detr: ~15 ms a KB, docs/
	// PERFORMANCE.md "detr's NVRTC").
	const char *tv = getenv("FADC_TIME");
	for (int j = 0; cb->tm.on && tv && !strcmp(tv, "pieces") && j < cb->njob; j++)
		if (!cb->job[j].hit && cb->job[j].w1 > 0)
			fprintf(stderr,
			        "fadc: time: nvrtc program %s: %zu bytes, %ld functions, %.3f s cpu, "
			        "%.3f .. %.3f s\n",
			        cb->name[j], cb->job[j].srclen, cb->job[j].units, cb->job[j].cpu,
			        cb->job[j].w0 - cb->t0.wall, cb->job[j].w1 - cb->t0.wall);
	CuJob *job = cb->job;
	int njob = cb->njob;
	for (int j = 0; j < njob; j++)
		if (!job[j].ok) {
			if (job[j].diaglen) {
				progress(o, "", 0, 0);
				FILE *f = o->cuda_diag ? o->cuda_diag : stderr;
				fwrite(job[j].diag, 1, job[j].diaglen, f);
				int others = 0; // other programs that failed (their sources are saved too)
				for (int k = j + 1; k < njob; k++)
					others += !job[k].ok;
				if (others)
					fprintf(f, "(and %d more program%s failed to compile)\n", others,
					        others > 1 ? "s" : "");
				fflush(f);
			}
			snprintf(err, errlen, "error: task '%s': %s", tasks[job[j].task].name, job[j].err);
			return 0;
		}
	for (int i = 0; i < cb->n; i++) {
		ArtTask *t = &at[i];
		const CuSplit *sp = &cb->sp[i];
		if (!(t->module = calloc(sp->n + sp->nimp + 1, sizeof *t->module))) {
			snprintf(err, errlen, "error: out of memory");
			return 0;
		}
		t->nmodule = sp->n + sp->nimp;
		// An earlier task's program: the same images (filled: i is later).
		for (uint32_t k = 0; k < sp->nimp; k++) {
			FADC_ASSERT(sp->imp[k].task < i && sp->imp[k].module < cb->sp[sp->imp[k].task].n,
			            "cuda sharing: an import of no earlier program");
			t->module[sp->n + k] = at[sp->imp[k].task].module[sp->imp[k].module];
		}
		for (uint32_t m = 0; m < cb->sp[i].n; m++) {
			// Without PTX (--no-ptx) its place is 0, 0: the runtime loads
			// the cubin or fails (runtime/cuda.c).
			const CuJob *x = &job[cb->first[i] + (int)m];
			ArtModule *y = &t->module[m];
			if (!put_image(img, imglen, &cap, x->out, x->len, 0, &y->cubin_off, &y->cubin_len) ||
			    (x->ptx && !put_image(img, imglen, &cap, x->ptx, x->ptxlen, 1, &y->ptx_off,
			                          &y->ptx_len))) {
				snprintf(err, errlen, "error: out of memory");
				return 0;
			}
		}
		t->targets |= ART_TARGET_CUDA;
	}
	return 1;
}

// Frees what cu_start made, once no job of it runs (after a failure, the
// programs not yet started are skipped).
static void
cu_free(CuBuild *cb)
{
	if (cb->queued) {
		cg_pool_cancel(cb->pool, &cb->batch);
		cg_pool_wait(cb->pool, &cb->batch);
		cg_pool_unbatch(cb->pool, &cb->batch);
	}
	cg_cache_close(cb->cache, NULL, NULL);
	for (int j = 0; cb->job && j < cb->njob; j++) {
		free(cb->job[j].out);
		free(cb->job[j].ptx);
		free(cb->job[j].diag);
	}
	for (int j = 0; cb->name && j < cb->njob; j++)
		free(cb->name[j]);
	for (int i = 0; cb->sp && i < cb->n; i++)
		cu_split_free(&cb->sp[i]);
	cu_reg_free(&cb->reg);
	free(cb->sp);
	free(cb->first);
	free(cb->job);
	free(cb->name);
	memset(cb, 0, sizeof *cb);
}
#endif

// Removes the temporary folder and its files, and their signal-cleanup
// registrations (reg[0] the folder's, then one per file; -1 for none).
static void
rm_tree(const char *dir, const char *const *files, int n, const int *reg)
{
	char path[4096];
	for (int i = 0; i < n; i++) {
		snprintf(path, sizeof path, "%s/%s", dir, files[i]);
		unlink(path);
	}
	rmdir(dir);
	for (int i = n; i >= 0; i--)
		if (reg[i] >= 0)
			fio_cleanup_drop(reg[i]);
}

// ---------------------------------------------------------------- specialisations
//
// fadc -D N=8,32 compiles the module once per specialisation (its sizes)
// into one artifact (docs/ARTIFACT.md, format 5): every task once per
// specialisation, in order; a declaration whose type and initializer are
// the same in every specialisation once (shared, so binding it binds every
// specialisation), any other once per specialisation, under the same name.
// One specialisation is the artifact as it always was (format 3).

// The initializer of declaration i of m as canonical text (malloc'ed), or
// NULL without one (*oom set when the text could not be made).
static char *
init_text(const Module *m, uint32_t i, int *oom)
{
	const Graph *g = m->decl[i].init;
	if (!g)
		return NULL;
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	if (!f) {
		*oom = 1;
		return NULL;
	}
	ir_print_graph(f, g, "init");
	if (fclose(f)) {
		free(buf);
		*oom = 1;
		return NULL;
	}
	return buf;
}

// shared[i]: declaration i of the modules ms[0..nspec) is the same in each:
// kind, dtype, shape and initializer (as printed: a size used inside it
// shows), which reads only shared declarations.  0 with a message when the
// specialisations do not declare the same names in the same order.
static int
plan_shared(const Module *const *ms, int nspec, uint8_t *shared, char *err, size_t errlen)
{
	const Module *m0 = ms[0];
	for (int s = 1; s < nspec; s++)
		if (ms[s]->ndecl != m0->ndecl) {
			snprintf(err, errlen, "error: the specialisations declare %u and %u parameters and "
			                      "constants (a size must not change the declarations)",
			         m0->ndecl, ms[s]->ndecl);
			return 0;
		}
	for (uint32_t i = 0; i < m0->ndecl; i++) {
		const Decl *a = &m0->decl[i];
		int same = 1, oom = 0;
		char *ta = init_text(m0, i, &oom);
		for (int s = 1; s < nspec; s++) {
			const Decl *b = &ms[s]->decl[i];
			if (strcmp(a->name, b->name)) {
				free(ta);
				snprintf(err, errlen, "error: the specialisations declare '%s' and '%s' in the "
				                      "same place (a size must not change the declarations)",
				         a->name, b->name);
				return 0;
			}
			char *tb = init_text(ms[s], i, &oom);
			same = same && a->kind == b->kind && a->dtype == b->dtype &&
			       ir_shape_eq(&a->shape, &b->shape) && !ta == !tb && (!ta || !strcmp(ta, tb));
			free(tb);
		}
		free(ta);
		if (oom) {
			snprintf(err, errlen, "error: out of memory");
			return 0;
		}
		const Graph *g = a->init;
		for (uint32_t k = 0; same && g && k < g->ninput; k++) {
			int dk = ir_module_find_decl(m0, g->input[k].name);
			same = dk >= 0 && (uint32_t)dk < i && shared[dk];
		}
		shared[i] = (uint8_t)same;
	}
	return 1;
}

// Appends " (specialisation N=32)" to a message about specialisation s.
static void
spec_note(char *err, size_t errlen, const char *const *specdefs, int s, int nspec)
{
	size_t n = strlen(err);
	if (nspec > 1 && specdefs && n < errlen)
		snprintf(err + n, errlen - n, " (specialisation %s)", specdefs[s]);
}

int
cg_compile_module(const Module *m, const CgOptions *o, const char *out_so, char *err, size_t errlen)
{
	return cg_compile_specs(&m, NULL, 1, o, out_so, err, errlen);
}

// What cg_compile_specs carries from step to step: its inputs, the
// artifact's declarations and tasks as they are built, the descriptor,
// and the error buffer every step reports into.
typedef struct Compile {
	const Module *const *ms;
	const char *const *specdefs;
	int nspec;
	const CgOptions *o;
	const char *names[64]; // the user's tasks (task_list)
	int ntask;
	DType fc;              // the tasks' compute type
	int targets;           // CG_TARGET_*
	uint32_t nd;           // declarations per specialisation
	uint8_t *shared;       // plan_shared's: declaration i is the same in every specialisation
	int32_t *declmap;      // [s * nd + i]: the artifact's declaration of specialisation s's i
	uint32_t nadecl, ninit, nuser, nall; // the artifact's declarations; init, user, all tasks
	CgTask *tasks;         // nall: the user's, every specialisation's in turn, then the inits
	char **initname;       // ninit: "init.<name>", owned
	ArtDesc d;
	char model[256];
	// The CPU levels asked for (cg_llvm_levels), lowest first: the name
	// given, LLVM's CPU name, the runtime-checked features, LLVM's feature
	// string; those with code go into the descriptor (make_descriptor).
	int nlevel;
	char lvname[CG_MAX_LEVELS][32], cpu[CG_MAX_LEVELS][128], feat[CG_MAX_LEVELS][1024];
	char llvm_feat[CG_MAX_LEVELS][4096];
	ArtLevel alevel[CG_MAX_LEVELS];
	char opts[2048];       // the descriptor's options line
	Phases ph;             // where the time went (--stats)
	CgPool *pool;          // the threads of NVRTC's programs and LLVM's pieces
#ifdef FADC_HAVE_CUDA
	CuBuild cu;            // the CUDA part, between cu_start and cu_finish
	int cuda;              // cu_start ran
#endif
	uint8_t *img, *desc;   // the CUDA images and the encoded descriptor
	size_t imglen, desclen;
	double desc_cpu;       // make_descriptor's CPU (on the thread of cg_llvm_emit)
	char *err;
	size_t errlen;
} Compile;

// The artifact's declarations: module order, a shared one once, any other
// once per specialisation, and declmap from each specialisation's
// declarations to them.
static void
layout_decls(Compile *c)
{
	for (uint32_t i = 0, ai = 0; i < c->nd; i++)
		for (int k = 0; k < (c->shared[i] ? 1 : c->nspec); k++, ai++) {
			const Decl *x = &c->ms[k]->decl[i];
			ArtDecl *ad = &c->d.decl[ai];
			ad->name = (char *)x->name;
			ad->kind = x->kind == DECL_PARAM ? ART_PARAM : ART_CONST;
			ad->dtype = art_dtype(x->dtype);
			ad->rank = (uint8_t)x->shape.rank;
			for (int r = 0; r < x->shape.rank; r++)
				ad->dim[r] = x->shape.dim[r];
			ad->init = -1;
			ad->spec = c->shared[i] ? -1 : k;
			for (int s = 0; s < c->nspec; s++)
				if (c->shared[i] || s == k)
					c->declmap[(size_t)s * c->nd + i] = (int32_t)ai;
		}
}

// A shard task's record (format 12): where each of its outputs goes in the
// whole task's, from the layout pass_task built it by (passes/tasks.c).
static int
describe_shard(const Graph *f, const char *name, ArtTask *t, uint32_t nchk, Arena *a, char *err,
               size_t errlen)
{
	TaskShard sh;
	Loc loc;
	char msg[512];
	if (!task_shard_layout(f, name, a, &sh, &loc, msg, sizeof msg)) {
		snprintf(err, errlen, "error: %s", msg); // (pass_task succeeded: not reached)
		return 0;
	}
	ArtShard *r = arena_alloc_array(a, 1, sizeof *r);
	ArtShardOut *o = arena_alloc_array(a, sh.nout + 1, sizeof *o);
	FADC_ASSERT(sh.nout == t->nout - nchk, "a shard's outputs differ from its layout");
	r->of = arena_strdup(a, fadc_tasks[sh.task]);
	r->k = (uint32_t)sh.k, r->n = (uint32_t)sh.n;
	r->lo = sh.lo, r->hi = sh.hi, r->total = sh.total;
	r->nout = sh.nout;
	r->out = o;
	for (uint32_t k = 0; k < sh.nout; k++) {
		const TaskShardOut *x = &sh.out[k];
		FADC_ASSERT(!strcmp(x->name, t->out[k].name), "a shard's output is not its layout's");
		o[k].rank = (uint8_t)x->full.rank;
		for (int i = 0; i < x->full.rank; i++)
			o[k].dim[i] = x->full.dim[i];
		o[k].outer = x->outer, o[k].mid = x->mid, o[k].inner = x->inner;
		o[k].off = x->off, o[k].cnt = x->cnt;
	}
	t->shard = r;
	return 1;
}

// The tasks of the user, every specialisation's in turn: each task's graph
// (pass_task), its kernel program and its entry in the descriptor.
// 0 with err set on failure.
static int
build_user_tasks(Compile *c)
{
	const CgOptions *o = c->o;
	char *err = c->err;
	size_t errlen = c->errlen;
	for (int s = 0; s < c->nspec; s++)
		for (int i = 0; i < c->ntask; i++) {
			const char *name = c->names[i];
			uint32_t ti = (uint32_t)s * (uint32_t)c->ntask + (uint32_t)i;
			char msg[1024];
			Loc loc = 0;
			progress(o, "tasks (passes, lowering)", (long)ti, (long)c->nuser);
			KTime tm = kir_time_start();
			Mark mk = mark_now();
			Graph *g = pass_task(c->ms[s]->main, name, NULL, &loc, msg, sizeof msg);
			kir_time_note(tm, "passes", name);
			phase_add(&c->ph, PH_PASSES, mk);
			if (!g) {
				char where[512];
				cg_loc_str(c->ms[s]->src, loc, where, sizeof where);
				// pass_task names the task itself in its precondition
				// messages ("task 'vhp' needs ..."): name it once.
				int named = !strncmp(msg, "task '", 6);
				snprintf(err, errlen, "%s%serror: %s%s%s%s", where, where[0] ? ": " : "",
				         named ? "" : "task '", named ? "" : name, named ? "" : "': ", msg);
				spec_note(err, errlen, c->specdefs, s, c->nspec);
				return 0;
			}
			// The run-time checks of data-dependent indices: hidden
			// outputs after the user's (passes/checks.c).
			IndexCheck *chk;
			uint32_t nchk = pass_index_checks(g, &chk);
			CgTask *task = &c->tasks[ti];
			task->name = name;
			task->prog = build(g, nchk, name, c->model, c->fc, o, &c->ph, err, errlen);
			int good = task->prog &&
			           describe_task(c->ms[s], g, task->prog, &c->d.task[ti], name, ART_TASK,
			                         -1, c->declmap + (size_t)s * c->nd);
			if (good) {
				// Output and input names live in g: copy them into the program's arena.
				ArtTask *t = &c->d.task[ti];
				for (uint32_t k = 0; k < t->nin; k++)
					t->in[k].name = arena_strdup(task->prog->arena, t->in[k].name);
				for (uint32_t k = 0; k < t->nout; k++)
					t->out[k].name = arena_strdup(task->prog->arena, t->out[k].name);
				for (uint32_t k = 0; k < nchk; k++)
					describe_check(c->ms[s]->src, &chk[k], &t->out[chk[k].out],
					               task->prog->arena);
				t->spec = s;
				if (strchr(name, ':'))
					good = describe_shard(c->ms[s]->main, name, t, nchk, task->prog->arena, err,
					                      errlen);
			}
			ir_graph_free(g);
			if (good)
				c->d.task[ti].targets = c->targets & CG_TARGET_CPU ? ART_TARGET_CPU : 0;
			if (!good) {
				if (task->prog && !err[0])
					snprintf(err, errlen, "error: out of memory");
				spec_note(err, errlen, c->specdefs, s, c->nspec);
				return 0;
			}
		}
	return 1;
}

// One initializer task per declaration (per copy) that has one, after the
// user's tasks.  0 with err set on failure.
static int
build_init_tasks(Compile *c)
{
	char *err = c->err;
	size_t errlen = c->errlen;
	uint32_t ti = c->nuser, ii = 0;
	for (uint32_t i = 0, ai = 0; i < c->nd; i++)
		for (int k = 0; k < (c->shared[i] ? 1 : c->nspec); k++, ai++) {
			const Module *mm = c->ms[k];
			const Decl *x = &mm->decl[i];
			ArtDecl *ad = &c->d.decl[ai];
			if (!x->init)
				continue;
			const Graph *g = x->init;
			if (g->nout != 1 || g->node[g->out[0].node].dtype != x->dtype ||
			    !ir_shape_eq(ir_shape(g, g->out[0].node), &x->shape)) {
				snprintf(err, errlen,
				         "error: the initializer of '%s' does not compute its declared type",
				         x->name);
				spec_note(err, errlen, c->specdefs, k, c->nspec);
				return 0;
			}
			for (uint32_t r = 0; r < g->ninput; r++) {
				int dk = ir_module_find_decl(mm, g->input[r].name);
				if (dk < 0 || (uint32_t)dk >= i) {
					snprintf(err, errlen, "error: the initializer of '%s' reads '%s', which is not "
					                      "declared before it", x->name, g->input[r].name);
					return 0;
				}
			}
			c->initname[ii] = malloc(strlen(x->name) + 6);
			if (!c->initname[ii]) {
				snprintf(err, errlen, "error: out of memory");
				return 0;
			}
			sprintf(c->initname[ii], "init.%s", x->name);
			CgTask *task = &c->tasks[ti];
			task->name = c->initname[ii];
			// Initializers run once: computed in f64 and rounded at the end, as
			// ir_module_init does, so both give the same values.
			task->prog = build(g, 0, c->initname[ii], c->model, DT_F64, c->o, &c->ph,
			                   err, errlen);
			if (!task->prog) {
				spec_note(err, errlen, c->specdefs, k, c->nspec);
				return 0;
			}
			if (!describe_task(mm, g, task->prog, &c->d.task[ti], c->initname[ii], ART_INIT,
			                   (int32_t)ai, c->declmap + (size_t)k * c->nd)) {
				snprintf(err, errlen, "error: out of memory");
				return 0;
			}
			c->d.task[ti].out[0].name = (char *)x->name;
			c->d.task[ti].targets = ART_TARGET_CPU;
			c->d.task[ti].spec = ad->spec;
			ad->init = (int32_t)ti;
			ti++;
			ii++;
		}
	return 1;
}

// The descriptor's options line into c->opts, in a fixed order (the
// artifact's bytes depend on it).  0 with err set when it does not fit.
static int
options_line(Compile *c, const char *cuda_arch, unsigned levels)
{
	const CgOptions *o = c->o;
	int targets = c->targets;
	char *opts = c->opts;
	size_t n = sizeof c->opts;
	// cpu=: the CPU levels with code (bit i of levels: level i), so that an
	// artifact whose higher level would be level 0's code is the one
	// --cpu x86-64-v3 makes, but for the entry's piece.
	char cpus[CG_MAX_LEVELS * 32] = "";
	for (int i = 0, m = 0; i < c->nlevel; i++)
		if (levels & (1u << i))
			m += snprintf(cpus + m, sizeof cpus - (size_t)m, "%s%s", m ? "," : "", c->lvname[i]);
	size_t k = (size_t)snprintf(opts, n, "target=%s%s%s%s%s cpu=%s opt=%d compute=%s defines=",
	                            targets == CG_TARGET_CPU    ? "cpu"
	                            : targets == CG_TARGET_CUDA ? "cuda"
	                                                        : "cpu,cuda",
	                            targets & CG_TARGET_CUDA ? " cuda_arch=" : "",
	                            targets & CG_TARGET_CUDA ? cuda_arch : "",
	                            (targets & CG_TARGET_CUDA) && o->no_ptx ? " no_ptx=1" : "",
	                            (targets & CG_TARGET_CUDA) && o->allow_tf32 ? " allow_tf32=1" : "",
	                            cpus, o->opt_level < 0 ? 2 : o->opt_level,
	                            o->compute_f64 ? "f64" : "f32");
	for (int i = 0; i < o->ndefines && k < n; i++)
		k += (size_t)snprintf(opts + k, n - k, "%s%s", i ? "," : "", o->defines[i]);
	for (int i = 0; i < c->ntask && k < n; i++)
		k += (size_t)snprintf(opts + k, n - k, "%s%s", i ? "," : " tasks=", c->names[i]);
	// The batch declaration (docs/IR.md, "The batch"): what a context over
	// several GPUs needs to split a run (runtime/multi.c,
	// rt_multi_batch_parse); the same in every specialisation.
	const Batch *bt = &c->ms[0]->batch;
	for (uint32_t i = 0; i < bt->nin && k < n; i++)
		k += (size_t)snprintf(opts + k, n - k, "%s%s:%d", i ? "," : " batch=", bt->in[i].name,
		                      bt->in[i].axis);
	if (bt->nin && k < n)
		k += (size_t)snprintf(opts + k, n - k, " loss=%s",
		                      bt->loss == BATCH_LOSS_SUM ? "sum" : "mean");
	if (k >= n) {
		snprintf(c->err, c->errlen, "error: the options line is longer than %zu bytes", n);
		return 0;
	}
	return 1;
}

// The CPU of NVRTC's jobs ended so far.
static double
nvrtc_cpu(Compile *c)
{
#ifdef FADC_HAVE_CUDA
	if (c->cuda)
		return cg_pool_cpu(c->pool, &c->cu.batch);
#endif
	(void)c;
	return 0;
}

// The descriptor, once the CUDA images are made (CgTarget.descriptor):
// cg_llvm_emit asks for it when it has queued the task pieces, so that
// they compile on the pool beside NVRTC's programs; the entry's piece,
// which holds it, comes after.  levels: the CPU levels with code (bit i:
// level i), which it lists.  The bytes are c->desc; 0 with err set.
static int
make_descriptor(void *arg, unsigned levels, const uint8_t **desc, size_t *desclen, char *err,
                size_t errlen)
{
	Compile *c = arg;
	ArtDesc *d = &c->d;
	double c0 = clock_s(CLOCK_THREAD_CPUTIME_ID);
#ifdef FADC_HAVE_CUDA
	if (c->cuda && !cu_finish(&c->cu, c->model, c->tasks, d->task, c->o, &c->ph, &c->img,
	                          &c->imglen, err, errlen))
		return 0;
#endif
	d->images_bytes = c->imglen;
	d->images_hash = art_fnv1a64(ART_FNV_BASIS, c->img, c->imglen);
	if (!options_line(c, c->o->cuda_arch ? c->o->cuda_arch : "sm_90", levels))
		return 0;
	d->options = c->opts;
	char *triple = cg_llvm_default_triple();
	d->triple = triple;
	d->cpu = c->cpu[0];
	d->features = c->feat[0];
	d->nlevel = 0;
	for (int i = 0; i < c->nlevel; i++)
		if (levels & (1u << i))
			c->alevel[d->nlevel++] = (ArtLevel){c->cpu[i], c->feat[i]};
	d->level = c->alevel;
	int ok = triple && art_desc_encode(d, &c->desc, &c->desclen);
	free(triple);
	d->triple = NULL;
	if (!ok) {
		snprintf(err, errlen, "error: out of memory");
		return 0;
	}
	*desc = c->desc;
	*desclen = c->desclen;
	c->desc_cpu += clock_s(CLOCK_THREAD_CPUTIME_ID) - c0;
	return 1;
}

// Object, link, artifact: LLVM compiles every task into model.0.o ... in
// a temporary folder (the module's pieces, in order; the entry's last,
// with the descriptor make_descriptor encodes meanwhile), cc links them
// with the support library into model.so, and model.so, the CUDA images
// and the descriptor become out_so.  The folder goes whatever happens.
static int
link_artifact(Compile *c, const char *out_so)
{
	const CgOptions *o = c->o;
	char *err = c->err;
	size_t errlen = c->errlen;
	uint32_t nall = c->nall;
	char tmpdir[4096] = "";
	uint8_t *so = NULL;
	size_t solen = 0;
	CgTask *emit = NULL; // what LLVM compiles: CPU stubs for CUDA-only tasks
	int ok = 0;
	// The files: model.so, link.log, and the objects model.N.o, as many as
	// cg_llvm_emit may write.
	enum { NTMP = 2 + CG_LLVM_MAX_OBJECTS };
	char tmpname[NTMP][24];
	const char *tmpfiles[NTMP];
	int tmpreg[NTMP + 1]; // the folder's and the files' cleanup handles
	for (int i = 0; i < NTMP; i++) {
		if (i < 2)
			snprintf(tmpname[i], sizeof tmpname[i], "%s", i ? "link.log" : "model.so");
		else
			snprintf(tmpname[i], sizeof tmpname[i], "model.%d.o", i - 2);
		tmpfiles[i] = tmpname[i];
	}
	for (int i = 0; i <= NTMP; i++)
		tmpreg[i] = -1;
	// The folder and its files are registered for removal on SIGINT and
	// SIGTERM (fileio.h), the files after the folder so that the handler
	// empties it before its rmdir.  They are registered before they exist:
	// unlinking a missing file is harmless, and a file made between a
	// registration and a signal is then never missed.
	char terr[1024];
	if (fio_mkdtemp("fadc-cc", tmpdir, sizeof tmpdir, &tmpreg[0], terr, sizeof terr) != 0) {
		snprintf(err, errlen, "error: %s", terr);
		return 0;
	}
	char prefix[4200], lib[4200], logp[4200];
	char (*objs)[4200] = calloc(CG_LLVM_MAX_OBJECTS, sizeof *objs);
	if (!objs) {
		snprintf(err, errlen, "error: out of memory");
		rm_tree(tmpdir, tmpfiles, NTMP, tmpreg);
		return 0;
	}
	snprintf(prefix, sizeof prefix, "%s/model", tmpdir);
	for (int i = 0; i < NTMP; i++) {
		char path[4200];
		snprintf(path, sizeof path, "%s/%s", tmpdir, tmpfiles[i]);
		tmpreg[i + 1] = fio_cleanup_add(path, 0);
		if (i >= 2)
			memcpy(objs[i - 2], path, sizeof path);
	}
	snprintf(lib, sizeof lib, "%s/model.so", tmpdir);
	snprintf(logp, sizeof logp, "%s/link.log", tmpdir);
	CgTarget tg = {.nlevel = c->nlevel, .opt_level = o->opt_level < 0 ? 2 : o->opt_level,
	               .pool = c->pool, .descriptor = make_descriptor, .descriptor_arg = c};
	for (int i = 0; i < c->nlevel; i++)
		tg.level[i] = (CgLevel){c->cpu[i], c->llvm_feat[i], c->feat[i]};
	// A task without CPU code is an empty program there: its function
	// returns at once and the runtime never calls it (the descriptor says so).
	if (!(emit = calloc(nall + 1, sizeof *emit))) {
		snprintf(err, errlen, "error: out of memory");
		goto done;
	}
	for (uint32_t i = 0; i < nall; i++) {
		// Constants out of the kernels' text (kir_consts.c), after the CUDA
		// code took its own copy (cu_start): the table grows the arena.
		// Not the initializers': small programs, computed once, whose
		// constants (a std) a one-line change seldom touches, and a table
		// kernel each would be ~60 more functions for resnet18.
		if ((c->d.task[i].targets & ART_TARGET_CPU) && c->d.task[i].kind != ART_INIT) {
			KProgram *p = c->tasks[i].prog;
			kir_consts(p);
			if ((uint64_t)p->arena_bytes > c->d.task[i].arena_bytes)
				c->d.task[i].arena_bytes = (uint64_t)p->arena_bytes;
			c->d.task[i].nkernel = p->nk;
		}
		if (o->stats)
			task_stats(o, c->tasks[i].name, c->tasks[i].prog);
		emit[i] = c->tasks[i];
		if (!(c->d.task[i].targets & ART_TARGET_CPU) &&
		    !(emit[i].prog = kir_program_new(c->tasks[i].name, c->fc))) {
			snprintf(err, errlen, "error: out of memory");
			goto done;
		}
	}
	progress(o, "LLVM code generation", 0, 0);
	// LLVM's time: the span of cg_llvm_emit (NVRTC's programs may run
	// beside it), and the CPU of its thread (less the descriptor's) and of
	// its pieces' jobs (the pool's, less NVRTC's).
	Mark mk = mark_now();
	double t0 = clock_s(CLOCK_THREAD_CPUTIME_ID), pool0 = cg_pool_cpu(c->pool, NULL);
	double nv0 = nvrtc_cpu(c);
	if (!o->no_cache && !o->emit_llvm) // the object code's cache (not for --emit llvm)
		tg.cache = cg_cache_open();
	int nobj = 0;
	// Without CUDA and with one CPU level the descriptor is known now; else
	// cg_llvm_emit asks once the task code is queued beside NVRTC's
	// programs (and knows which levels have code of their own).
	const uint8_t *desc = NULL;
	size_t desclen = 0;
	int llvm_ok = (c->targets & CG_TARGET_CUDA) || c->nlevel > 1 ||
	              make_descriptor(c, 1, &desc, &desclen, err, errlen);
	llvm_ok = llvm_ok && cg_llvm_emit(emit, (int)nall, desc, desclen, &tg, o->emit_llvm, prefix,
	                                  &nobj, err, errlen);
	long hits = 0, misses = 0;
	int cached = tg.cache != NULL;
	cg_cache_close(tg.cache, &hits, &misses);
	if (!llvm_ok)
		goto done;
	c->ph.wall[PH_LLVM] += mark_now().wall - mk.wall;
	c->ph.cpu[PH_LLVM] += clock_s(CLOCK_THREAD_CPUTIME_ID) - t0 - c->desc_cpu +
	                      (cg_pool_cpu(c->pool, NULL) - pool0) - (nvrtc_cpu(c) - nv0);
	if (o->stats && cached)
		fprintf(o->stats, "# stats: compile cache (LLVM): %ld hits, %ld misses\n", hits, misses);
	const char *tv = getenv("FADC_TIME");
	if (tv && *tv && strcmp(tv, "0") && cached)
		fprintf(stderr, "fadc: time: llvm cache: %ld hits, %ld misses\n", hits, misses);
	const char *cc = o->cc ? o->cc : getenv("FADC_CC");
	if (!cc || !*cc)
		cc = "cc";
	const char *support = o->support_lib ? o->support_lib : getenv("FADC_SUPPORT_LIB");
	if (!support || !*support)
		support = FADC_SUPPORT_LIB;
	if (access(support, R_OK)) {
		snprintf(err, errlen, "error: the support library %s: %s (set FADC_SUPPORT_LIB)", support,
		         strerror(errno));
		goto done;
	}
	// cc -shared -o LIB, the objects, the support library, -lm, two -Wl flags, NULL
	char *argv[9 + CG_LLVM_MAX_OBJECTS] = {(char *)cc, "-shared", "-o", lib};
	int na = 4;
	for (int i = 0; i < nobj; i++) // in piece order: the layout of the .so
		argv[na++] = objs[i];
	argv[na++] = (char *)support;
	argv[na++] = "-lm";
	argv[na++] = "-Wl,-z,noexecstack";
	argv[na++] = "-Wl,--build-id=sha1";
	argv[na] = NULL;
	KTime tlink = kir_time_start();
	progress(o, "linking", 0, 0);
	mk = mark_now();
	if (!run_cc(argv, logp, err, errlen))
		goto done;
	kir_time_note(tlink, "link", cc);
	phase_add(&c->ph, PH_LINK, mk);
	if (!read_file(lib, &so, &solen)) {
		snprintf(err, errlen, "error: cannot read the linked library %s", lib);
		goto done;
	}
	ok = write_artifact(out_so, so, solen, c->img, c->imglen, c->desc, c->desclen, err, errlen);
done:
	rm_tree(tmpdir, tmpfiles, NTMP, tmpreg);
	free(objs);
	free(so);
	for (uint32_t i = 0; emit && i < nall; i++)
		if (emit[i].prog != c->tasks[i].prog)
			kir_program_free(emit[i].prog);
	free(emit);
	return ok;
}

// The steps: the task list and which declarations the specialisations
// share; the artifact's declarations; the user's tasks and the
// initializers, each lowered and described; the CUDA images; the
// descriptor (its options line in a fixed order); then object, link and
// artifact.
int
cg_compile_specs(const Module *const *ms, const char *const *specdefs, int nspec,
                 const CgOptions *o, const char *out_so, char *err, size_t errlen)
{
	static const CgOptions def = {.opt_level = -1};
	if (!o)
		o = &def;
	if (nspec < 1 || nspec > ART_MAX_SPECS || (nspec > 1 && !specdefs)) {
		snprintf(err, errlen, "error: %d specialisations (1 to %d, each named)", nspec,
		         ART_MAX_SPECS);
		return 0;
	}
	const Module *m = ms[0]; // the name, the sources, the declarations' order
	Compile *c = calloc(1, sizeof *c);
	if (!c) {
		snprintf(err, errlen, "error: out of memory");
		return 0;
	}
	*c = (Compile){.ms = ms, .specdefs = specdefs, .nspec = nspec, .o = o, .err = err,
	               .errlen = errlen};
	Mark start = mark_now();
	c->ph.wall0 = start.wall;
	c->ph.cpu0 = start.cpu;
	const char **names = c->names;
	int ntask = c->ntask = task_list(o, names, 64, err, errlen);
	if (ntask < 0) {
		free(c);
		return 0;
	}
	c->fc = o->compute_f64 ? DT_F64 : DT_F32;
	uint32_t nd = c->nd = m->ndecl;
	c->shared = calloc(nd + 1, 1);
	c->declmap = calloc((size_t)nspec * nd + 1, sizeof *c->declmap);
	if (!c->shared || !c->declmap) {
		free(c->shared);
		free(c->declmap);
		free(c);
		snprintf(err, errlen, "error: out of memory");
		return 0;
	}
	if (!plan_shared(ms, nspec, c->shared, err, errlen)) {
		free(c->shared);
		free(c->declmap);
		free(c);
		return 0;
	}
	// The artifact's declarations: module order, a shared one once, any
	// other once per specialisation; each copy with an initializer gets an
	// init task.
	for (uint32_t i = 0; i < nd; i++)
		for (int k = 0; k < (c->shared[i] ? 1 : nspec); k++) {
			c->nadecl++;
			c->ninit += ms[k]->decl[i].init != NULL;
		}
	c->nuser = (uint32_t)nspec * (uint32_t)ntask;
	uint32_t nall = c->nall = c->nuser + c->ninit;
	c->tasks = calloc(nall + 1, sizeof *c->tasks);
	c->initname = calloc(c->ninit + 1, sizeof *c->initname);
	ArtDesc *d = &c->d;
	d->task = calloc(nall + 1, sizeof *d->task);
	d->decl = calloc(c->nadecl + 1, sizeof *d->decl);
	int targets = c->targets = o->targets ? o->targets : CG_TARGET_CPU;
	int ok = 0;
	if (!c->tasks || !c->initname || !d->task || !d->decl) {
		snprintf(err, errlen, "error: out of memory");
		goto done;
	}
	if (o->allow_tf32 && !(targets & CG_TARGET_CUDA)) {
		snprintf(err, errlen, "error: --allow-tf32 concerns the cuBLAS GEMMs of CUDA code: "
		                      "use it with --target cuda or cpu,cuda");
		goto done;
	}
	model_name(m, c->model, sizeof c->model);
	// The CPU levels (--cpu; --emit llvm prints the lowest's module alone).
	if (!(c->nlevel = cg_llvm_levels(o->cpu, c->lvname, err, errlen)))
		goto done;
	if (o->emit_llvm)
		c->nlevel = 1;
	for (int i = 0; i < c->nlevel; i++)
		if (!cg_llvm_cpu(c->lvname[i], c->cpu[i], sizeof c->cpu[i], c->feat[i], sizeof c->feat[i],
		                 c->llvm_feat[i], sizeof c->llvm_feat[i], err, errlen))
			goto done;
	layout_decls(c);
	if (!build_user_tasks(c) || !build_init_tasks(c))
		goto done;
	d->ntask = nall;
	d->ndecl = c->nadecl;
	d->nspec = (uint32_t)nspec;
	d->spec = nspec > 1 ? (char **)specdefs : NULL;
	d->model = c->model;
	d->source_hash = ir_srcmap_hash(m->src);
	const char *cuda_arch = o->cuda_arch ? o->cuda_arch : "sm_90";
	d->cuda_arch = targets & CG_TARGET_CUDA ? (char *)cuda_arch : "";
	// One pool for every compilation: NVRTC's programs are queued first,
	// and LLVM's pieces join them as cg_llvm_emit makes them.
	long cores = sysconf(_SC_NPROCESSORS_ONLN);
	if (!(c->pool = cg_pool_new(cg_jobs(o) > 0 ? cg_jobs(o) : cores > 0 ? (int)cores : 1,
	                            o->progress, o->progress_arg))) {
		snprintf(err, errlen, "error: out of memory");
		goto done;
	}
#ifdef FADC_HAVE_CUDA
	if (targets & CG_TARGET_CUDA) {
		c->cuda = 1;
		if (!cu_start(&c->cu, c->model, c->tasks, d->task, (int)c->nuser, o, &c->ph, c->pool,
		              err, errlen))
			goto done;
	}
#else
	if (targets & CG_TARGET_CUDA) {
		snprintf(err, errlen, "error: --target cuda: this fadc was built without the CUDA "
		                      "toolkit (NVRTC)");
		goto done;
	}
#endif
	ok = link_artifact(c, out_so);
	if (ok && o->stats) {
		progress(o, "", 0, 0);
		phases_print(o->stats, &c->ph);
	}
done:
#ifdef FADC_HAVE_CUDA
	cu_free(&c->cu); // its jobs ended (or skipped) first
#endif
	cg_pool_free(c->pool);
	free(c->img);
	free(c->desc);
	for (uint32_t i = 0; c->tasks && i < nall; i++)
		kir_program_free(c->tasks[i].prog);
	for (uint32_t i = 0; c->initname && i < c->ninit; i++)
		free(c->initname[i]);
	free(c->initname);
	free(c->tasks);
	free(c->shared);
	free(c->declmap);
	d->ntask = nall;
	d->spec = NULL; // the caller's
	if (d->task)
		desc_free_owned(d);
	else
		free(d->decl);
	free(c);
	return ok;
}
