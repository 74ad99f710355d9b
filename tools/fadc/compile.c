// tools/fadc/compile.c -- `fadc MODEL.ir --emit ir | -o MODEL.so`.
//
// The default command: it parses the model (frontend), prints the
// canonical IR or a task's derived graph (passes/tasks.c, with the pass
// options), or compiles the tasks into an artifact (codegen), with -D lists
// making several shape specialisations of one artifact.  Every option is
// checked before the model is read, so that a usage error is exit status 2
// and never a half-done compile.
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "artifact.h"
#include "cli.h"
#include "codegen.h"
#include "fileio.h"
#include "frontend.h"
#include "passes.h"

const char *const usage_main =
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
    "  --const NAME       (a .onnx) import the float initializer NAME as a\n"
    "                     constant, not a parameter; repeatable\n"
    "  --no-prelude       do not load the prelude of composite functions\n"
    "  --max-nodes N      the most nodes the model may have after inlining, all its\n"
    "                     graphs together (1000000): functions are inlined at every\n"
    "                     call, and a model that would pass N is refused before it\n"
    "                     is built, naming the chain of calls (docs/IR.md)\n"
    "  -h, --help         this help\n"
    "  --version          fadc's version, its artifact format, LLVM's and NVRTC's\n"
    "\n"
    "Pass options (with --task; dumps and statistics go to stderr):\n"
    "  --print-after=PASS[,PASS]  print the graph after each run of these passes\n"
    "  --print-after-all          print the graph after every pass\n"
    "  --stop-after=PASS          stop after the first run of PASS; print that graph\n"
    "  --stats                    node counts after each pass (with -o: each task's\n"
    "                             kernels and memory plan, and where the time went:\n"
    "                             passes, lowering, CUDA printing, NVRTC, LLVM, link)\n"
    "  The passes: simplify, vjp, jvp, vmap, scan_hoist.\n"
    "\n"
    "Compile options (-o):\n"
    "  -o FILE            write the artifact (a shared library, docs/ARTIFACT.md)\n"
    "  --target T         cpu (default), cuda or cpu,cuda: the code the tasks get\n"
    "                     (cuda: kernels compiled by NVRTC, embedded; docs/CUDA.md)\n"
    "  --cuda-arch ARCH   the cubin's architecture (sm_90); PTX for compute_XX too\n"
    "  --no-ptx           embed the cubins alone, without the PTX that lets a newer GPU\n"
    "                     run them (smaller; recorded as no_ptx=1)\n"
    "  --no-cache         do not use the compile cache: kernels and object code are kept\n"
    "                     under $FADC_CACHE_DIR/compile/ (default $XDG_CACHE_HOME/fadc\n"
    "                     or ~/.cache/fadc), at most $FADC_CACHE_MAX_BYTES (1G)\n"
    "  --allow-tf32       cuBLAS GEMMs of f32 may round their inputs to TF32 (tensor\n"
    "                     cores; recorded in the artifact); default: fp32 semantics\n"
    "  --tasks LIST       comma-separated tasks, or `all`; forward is always in.\n"
    "                     Default: the model's `tasks` declaration (docs/IR.md),\n"
    "                     else forward,vjp,jvp,vhp,hvp (vhp and hvp only when\n"
    "                     forward returns one float scalar)\n"
    "  -O0 -O1 -O2 -O3    LLVM's optimization level (-O2)\n"
    "  --cpu LEVELS       the CPU levels to carry code for, a comma list of x86-64,\n"
    "                     x86-64-v2, x86-64-v3, x86-64-v4 (default x86-64-v3,x86-64-v4:\n"
    "                     the runtime runs the best the CPU has), or native, generic\n"
    "  --emit kir|llvm|cuda  also print the kernel IR, the optimized LLVM IR or the\n"
    "                     CUDA C given to NVRTC (with --target cuda)\n"
    "  --max-task-bytes N the most memory one task may need, its outputs plus its\n"
    "                     intermediates (64G; K M G T are powers of 1024): a task\n"
    "                     needing more is an error, nothing is written\n"
    "  --f64              compute f32 values in f64 (testing)\n"
    "  --shards K         also compile each batched task T of the list (jacobian, jacrev\n"
    "                     of a non-scalar forward, jacfwd, the Hessians) as K shards\n"
    "                     T:0/K .. T:K-1/K over even ranges of its basis vectors, one\n"
    "                     per GPU (1 to 64; docs/TASKS.md, \"Shards\"); --tasks also takes\n"
    "                     shard names, and --task T:k/K prints one\n"
    "  --shard-weights W  with --shards K: K positive weights \"3,2\" splitting the basis\n"
    "                     vectors unevenly, shard k getting the share w_k / sum of its\n"
    "                     rows (tasks T:k/K:3+2: a GPU with more to do besides takes\n"
    "                     fewer rows)\n";

static const char *const pass_names[] = {"simplify", "vjp", "jvp", "vmap", "scan_hoist", NULL};

typedef struct CompileArgs {
	const char *model, *emit, *task, *out, *target, *cpu, *cuda_arch;
	const char *print_after, *stop_after;
	const char *defs[MAXDEF];
	int ndefs, noprelude, print_after_all, stats, opt_level, f64, allow_tf32, no_ptx, no_cache;
	int64_t max_task_bytes; // --max-task-bytes; 0: the default (CG_MAX_TASK_BYTES)
	int64_t max_nodes; // --max-nodes; 0: the default (FE_MAX_NODES)
	int shards; // --shards K; 0: none
	char shard_weights[700]; // --shard-weights as the names' suffix ":w0+w1..."; "" even
	int nweights;
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

// A task name (`hessian`) or shard name (`hessian:1/4`, docs/TASKS.md); 0
// after a usage error naming the option.
static int
task_name_ok(const char *name, const char *opt, int *rc)
{
	int t, k, n;
	char err[200], msg[300];
	int r = task_shard_parse(name, &t, &k, &n, err, sizeof err);
	if (r == 0 && task_lookup(name) >= 0)
		return 1;
	if (r > 0)
		return 1;
	if (r == 0) // (as before shards: `fadc --task` says no option)
		snprintf(err, sizeof err, "unknown task '%.60s'", name);
	snprintf(msg, sizeof msg, "%s%s%s", r || strcmp(opt, "--task") ? opt : "",
	         r || strcmp(opt, "--task") ? ": " : "", err);
	*rc = usage_error(usage_main, "%s", msg);
	return 0;
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
			         "vmap, scan_hoist)", opt, (int)(len > 40 ? 40 : len), p);
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
		} else if (opt_define(argc, argv, &i, a->defs, &a->ndefs, usage_main, &rc) ||
		           opt_max_nodes(argc, argv, &i, &a->max_nodes, usage_main, &rc) ||
		           opt_const(argc, argv, &i, usage_main, &rc)) {
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
		           opt_value(argc, argv, &i, "--shards", &v) ||
		           opt_value(argc, argv, &i, "--shard-weights", &v) ||
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
				if (!task_name_ok(v, "--task", &rc))
					return rc;
				a->task = v;
			} else if (!strcmp(opt, "--shards")) {
				char *end;
				errno = 0;
				long k = strtol(v, &end, 10);
				if (errno || *end || end == v || v[0] == '+' || v[0] == '-' || k < 1 ||
				    k > TASK_MAX_SHARDS) {
					char msg[120];
					snprintf(msg, sizeof msg, "--shards: '%.40s' is not a number of shards from 1 "
					         "to %d", v, TASK_MAX_SHARDS);
					return usage_error(usage_main, "%s", msg);
				}
				a->shards = (int)k;
			} else if (!strcmp(opt, "--shard-weights")) {
				// Checked here for their form, and by the shard names' parse
				// (passes' task_shard_parse) for their count against K.
				size_t n = (size_t)snprintf(a->shard_weights, sizeof a->shard_weights, ":");
				a->nweights = 0;
				for (const char *q = v;;) {
					char *end;
					errno = 0;
					long w = strtol(q, &end, 10);
					if (errno || end == q || *q == '+' || *q == '-' || *q == '0' || w < 1 ||
					    w > TASK_MAX_WEIGHT || (*end && *end != ',') || a->nweights == TASK_MAX_SHARDS)
						return usage_error(usage_main, "--shard-weights: '%.60s' is not a list of "
						                   "up to 64 weights from 1 to 1000000 such as 3,2", v);
					n += (size_t)snprintf(a->shard_weights + n, sizeof a->shard_weights - n, "%s%ld",
					                      a->nweights ? "+" : "", w);
					a->nweights++;
					if (!*end)
						break;
					q = end + 1;
				}
			} else if (!strcmp(opt, "--tasks")) {
				free(a->tasklist);
				a->tasklist = strdup(v);
				a->ntasks = 0;
				for (char *t = strtok(a->tasklist, ","); t; t = strtok(NULL, ",")) {
					if (strcmp(t, "all") && !task_name_ok(t, "--tasks", &rc))
						return rc;
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
				char lv[CG_MAX_LEVELS][32], e[512];
				if (!cg_llvm_levels(v, lv, e, sizeof e))
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
		} else if (!strcmp(s, "--no-cache")) {
			a->no_cache = 1;
		} else if (!strcmp(s, "--no-ptx")) {
			a->no_ptx = 1;
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
		if (a->no_ptx && (!a->target || !strstr(a->target, "cuda")))
			fprintf(stderr, "fadc: warning: --no-ptx has no effect without --target "
			                "cuda (or cpu,cuda)\n");
		if (a->nweights && !a->shards)
			return usage_error(usage_main, "--shard-weights needs --shards K%s", "");
		if (a->nweights && a->nweights != a->shards) {
			char msg[120];
			snprintf(msg, sizeof msg, "--shard-weights gives %d weights: --shards %d needs one per "
			         "shard", a->nweights, a->shards);
			return usage_error(usage_main, "%s", msg);
		}
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
		if (a->shards || a->nweights)
			return usage_error(usage_main, "--shards needs -o FILE (--task T:k/K prints one "
			                               "shard)%s", "");
		if (a->allow_tf32)
			return usage_error(usage_main, "--allow-tf32 needs -o FILE (it concerns the GEMMs "
			                               "of compiled CUDA code)%s", "");
		if (a->no_ptx)
			return usage_error(usage_main, "--no-ptx needs -o FILE (it concerns the "
			                               "CUDA images of an artifact)%s", "");
	}
	return 0;
}

// The default task list: the model's recommended tasks when it declares
// them (`tasks vjp, vhp, jvp`, docs/IR.md; forward is always compiled);
// else ir/tasks.def's default ones (forward vjp jvp vhp hvp), without the
// second-order tasks when forward is not one float scalar (they need a
// scalar f).  tasks has room for 16.
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
	for (int t = 0; t < IR_TASK_COUNT && n < 16; t++)
		if (ir_task[t].dflt && (scalar || !ir_task[t].scalar))
			tasks[n++] = ir_task[t].name;
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

// --shards K: the task list with T:0/K .. T:K-1/K after each batched T
// (passes' task_basis_size; the others, and names of shards already, as
// they are).  An artifact compiles at most 63 tasks beside forward.
typedef struct Shards {
	char *name[64];
	char *own[64]; // the names made here
	int n;
} Shards;

static void
shards_free(Shards *sh)
{
	for (int i = 0; i < 64; i++)
		free(sh->own[i]);
}

static int
add_shards(Shards *sh, const Graph *f, const char *const *list, int n, int K, const char *weights,
           char *err, size_t errlen)
{
	for (int i = 0; i < n; i++) {
		int t = strchr(list[i], ':') ? -1 : task_lookup(list[i]);
		int batched = t >= 0 && task_basis_size(f, t) > 0;
		for (int k = -1; k < (batched ? K : 0); k++) {
			if (sh->n == 63) {
				snprintf(err, errlen, "error: --shards %d: more than 63 tasks beside forward "
				         "(an artifact's most); compile fewer batched tasks at once", K);
				return 0;
			}
			if (k < 0) {
				sh->name[sh->n++] = (char *)list[i];
				continue;
			}
			char buf[800];
			snprintf(buf, sizeof buf, "%s:%d/%d%s", list[i], k, K, weights);
			if (!(sh->own[sh->n] = strdup(buf))) {
				snprintf(err, errlen, "error: out of memory");
				return 0;
			}
			sh->name[sh->n] = sh->own[sh->n];
			sh->n++;
		}
	}
	return 1;
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
	const char *const *list = nall ? alltasks : a->ntasks ? a->tasks : deftasks;
	int nlist = nall ? nall : a->ntasks ? a->ntasks : default_tasks(m, deftasks);
	Shards sh = {0};
	if (a->shards) {
		if (!add_shards(&sh, m->main, list, nlist, a->shards, a->shard_weights, err, sizeof err)) {
			cg_error(a->model, a->out, err);
			shards_free(&sh);
			return 1;
		}
		list = (const char *const *)sh.name;
		nlist = sh.n;
	}
	CgOptions o = {
	    .tasks = list,
	    .ntasks = nlist,
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
	    .no_ptx = a->no_ptx,
	    .no_cache = a->no_cache,
	    .support_lib = installed_support_lib(),
	};
	// The status line of a long compile, on a terminal only (cli.c).
	Progress *pg = progress_start();
	o.progress = pg ? progress_note : NULL;
	o.progress_arg = pg;
	int ok = nspec > 1 ? cg_compile_specs(ms, specnames, nspec, &o, a->out, err, sizeof err)
	                   : cg_compile_module(m, &o, a->out, err, sizeof err);
	progress_stop(pg);
	shards_free(&sh);
	if (ok)
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
		               .no_prelude = a->noprelude, .max_nodes = a->max_nodes};
		if (!(ms[s] = load_model(a->model, &o)))
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

int
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
	FeOptions o = {.defines = a.defs, .ndefines = a.ndefs, .diag = stderr, .no_prelude = a.noprelude,
	               .max_nodes = a.max_nodes};
	Module *m = load_model(a.model, &o);
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
