// bench/exec_cpu.c -- compiled artifacts as a benchmark backend: one
// model.so per (model source, -D sizes), holding every task the run needs,
// found under --artifacts, built on request by running the compiler, and
// run through the runtime (include/fadc.h).
//
// fadc-bench never links LLVM: compiling is another process, `fadc
// MODEL.ir -o OUT.so --tasks T,... -D N=V ...`.  Whether an artifact serves is
// decided from its descriptor, read without loading code: the source hash
// (model and prelude, computed here by parsing the model as the compiler
// does), the target, the compute dtype, the sizes and the tasks.
//
// Params and constants come from the artifact's compiled initializers with
// the run seed (the interpreter's values, bit for bit); v is filled by the
// runner in float64 and converted once, at the first run; outputs stay
// where the runtime writes them and are converted to float64 only when the
// runner reads them (the warm-up's consistency check).
//
// With --gpu N the artifact is compiled with --target cuda (MODEL-KEY.cuda.so)
// and run on CUDA device N: inputs and outputs stay on the device (v is
// copied there once, outputs are copied back only when the check reads
// them), and each run waits for the device before it returns, so that the
// runner's clock around a run times the task, as the seed's
// torch.cuda.synchronize() does.  The first run of a task is eager, the
// second records its CUDA graph: the runner's warm-up runs both, so every
// timed run is a replay.
#define _XOPEN_SOURCE 700 // realpath

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "artifact.h"
#include "exec.h"
#include "fadc.h"
#include "fileio.h"
#include "frontend.h"

extern char **environ;

struct Prepared {
	int task;
	int nin, nout;
	fadc_tensor **in, **out;
	BTensor *bin, *bout;
	uint64_t *gen; // the generation of out[i] that bout[i] holds
	int ran;
	double device_s; // the last run's device time (--device-time)
	// --gpus: the same task on GPU gpus[0] alone (run_single): its task,
	// inputs and outputs in the one-GPU context.
	int task1, ran1;
	fadc_tensor **in1, **out1;
};

// The backend's state: the run's options and the one open model (see
// exec.h for why it lives here).
static struct {
	BackendOptions o;
	char artifacts[4096];
	char compiler[4096];
	int have_compiler;
	char compiler_version[1024];
	int have_version;
	char runtime[64];
	// The open model.
	fadc_context *ctx;
	fadc_model *m;
	// --gpus: ctx is the context over the GPUs; ctx1 and m1 the same
	// artifact on gpus[0] alone, the speed-up's baseline.
	fadc_context *ctx1;
	fadc_model *m1;
	char source[4096]; // as main names it (prepare's key)
	char defs[4096]; // its -D list, comma-joined (prepare's key)
	char artifact[4096 + 256];
	char hash[17]; // the source hash the artifact must carry
	char options[2048];
	char file_hash[17]; // FNV-1a 64 of the artifact's bytes, "" if unread
} S;

// ---------------------------------------------------------------- helpers

static void
join(char *buf, size_t n, const char *const *v, int nv)
{
	size_t k = 0;
	buf[0] = 0;
	for (int i = 0; i < nv && k < n; i++)
		k += (size_t)snprintf(buf + k, n - k, "%s%s", i ? "," : "", v[i]);
}

// The folder holding this executable (for the default artifacts folder and
// compiler); "." if /proc is not there.
static void
exe_dir(char *buf, size_t n)
{
	ssize_t k = readlink("/proc/self/exe", buf, n - 1);
	if (k <= 0) {
		snprintf(buf, n, ".");
		return;
	}
	buf[k] = 0;
	char *s = strrchr(buf, '/');
	if (s && s != buf)
		*s = 0;
}

// Makes the folder path and its parents.  EEXIST is not success by itself:
// a file of that name (--artifacts /etc/passwd) is not a folder, and would
// otherwise surface later as the compiler failing to write into it.
static int
mkdir_p(const char *path)
{
	char p[4096];
	struct stat st;
	snprintf(p, sizeof p, "%s", path);
	for (char *s = p + 1; *s; s++)
		if (*s == '/') {
			*s = 0;
			if (mkdir(p, 0777) && errno != EEXIST)
				return -1;
			*s = '/';
		}
	if (mkdir(p, 0777) && errno != EEXIST)
		return -1;
	if (stat(p, &st))
		return -1;
	if (!S_ISDIR(st.st_mode)) {
		errno = ENOTDIR;
		return -1;
	}
	return 0;
}

// The runtime's message about path starts with the path (runtime/
// artifact.c): without it, for messages that name path already.
static const char *
without_path(const char *msg, const char *path)
{
	size_t n = strlen(path);
	return !strncmp(msg, path, n) && msg[n] == ':' && msg[n + 1] == ' ' ? msg + n + 2 : msg;
}

// Runs argv (searched in PATH if it has no slash) with stdin from
// /dev/null and stdout and stderr into the file log.  Returns its exit
// status, 128 + the signal that ended it, or -1 with errno if it did not
// start.
static int
spawn(char *const *argv, const char *log)
{
	posix_spawn_file_actions_t fa;
	pid_t pid;
	int st;
	if (posix_spawn_file_actions_init(&fa))
		return -1;
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_addopen(&fa, 1, log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	posix_spawn_file_actions_adddup2(&fa, 1, 2);
	int e = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	if (e) {
		errno = e;
		return -1;
	}
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

// The first n - 1 bytes of a file, NUL-terminated ("" if unreadable).
static void
read_text(const char *path, char *buf, size_t n)
{
	buf[0] = 0;
	FILE *f = fio_fopen_read(path, NULL, 0);
	if (!f)
		return;
	size_t k = fread(buf, 1, n - 1, f);
	buf[k] = 0;
	fclose(f);
}

// Runs argv into a temporary file and returns its exit status and output.
static int
capture(char *const *argv, char *out, size_t n)
{
	const char *tmp = getenv("TMPDIR");
	char path[4096];
	snprintf(path, sizeof path, "%s/fadc-bench.XXXXXX", tmp && *tmp ? tmp : "/tmp");
	int fd = mkstemp(path);
	out[0] = 0;
	if (fd < 0)
		return -1;
	close(fd);
	int reg = fio_cleanup_add(path, 0);
	int rc = spawn(argv, path);
	read_text(path, out, n);
	unlink(path);
	fio_cleanup_drop(reg);
	return rc;
}

// The compiler: --fadc, else `fadc` beside this executable, else `fadc`
// from PATH.
static const char *
compiler(void)
{
	if (S.have_compiler)
		return S.compiler;
	S.have_compiler = 1;
	if (S.o.compiler) {
		snprintf(S.compiler, sizeof S.compiler, "%s", S.o.compiler);
		return S.compiler;
	}
	char dir[4000], path[4096];
	exe_dir(dir, sizeof dir);
	snprintf(path, sizeof path, "%s/fadc", dir);
	snprintf(S.compiler, sizeof S.compiler, "%s", access(path, X_OK) ? "fadc" : path);
	return S.compiler;
}

// The value of field key in a descriptor's options ("target=cpu cpu=...
// defines=N=3,K=2 tasks=forward,vjp"), "" if absent.
static void
opt_field(const char *options, const char *key, char *out, size_t n)
{
	size_t kl = strlen(key);
	out[0] = 0;
	for (const char *s = options; s && *s; s = strchr(s, ' '), s = s ? s + 1 : NULL)
		if (!strncmp(s, key, kl) && s[kl] == '=') {
			size_t l = strcspn(s + kl + 1, " ");
			snprintf(out, n, "%.*s", (int)(l < n ? l : n - 1), s + kl + 1);
			return;
		}
}

static int
in_list(const char *list, const char *name)
{
	size_t l = strlen(name);
	for (const char *s = list; *s; s += strcspn(s, ","), s += *s == ',') {
		if (strcspn(s, ",") == l && !strncmp(s, name, l))
			return 1;
	}
	return 0;
}

// The descriptor's source hash of the model as the compiler will see it:
// ir_srcmap_hash of the frontend's source files, the function
// codegen/compile.c records it with.
static int
source_hash(const char *path, const char *const *defs, int ndefs, char *hash, char *err,
            size_t errlen)
{
	FeOptions fo = {.defines = defs, .ndefines = ndefs, .diag = stderr};
	Module *m = fe_load_model(path, &fo);
	if (!m) {
		snprintf(err, errlen, "%s: does not compile (diagnostic above)", path);
		return -1;
	}
	uint64_t h = ir_srcmap_hash(m->src);
	ir_module_free(m);
	snprintf(hash, 17, "%016" PRIx64, h);
	return 0;
}

// --gpus over S > 1 GPUs: the artifact must also hold its tasks at the
// shard sizes (docs/MULTIGPU.md): the `let` whose value is the declared
// batch's size gets the list "NAME=n,n/S+1,n/S" (the sizes
// rt_multi_shard gives, the full batch first, so that it stays the first
// specialisation, the one prepare finds).  out[] gets defs with that
// change (the list in buf); a model without a batch keeps its defs.
// Returns the count, or -1 with err.
static int
shard_defs(const char *path, const char *const *defs, int ndefs, const char **out, char *buf,
           size_t n, char *err, size_t errlen)
{
	for (int i = 0; i < ndefs; i++)
		out[i] = defs[i];
	int ng = S.o.ngpus;
	if (ng < 2)
		return ndefs;
	FeOptions fo = {.defines = defs, .ndefines = ndefs, .diag = stderr};
	Module *m = fe_load_model(path, &fo);
	if (!m) {
		snprintf(err, errlen, "%s: does not compile (diagnostic above)", path);
		return -1;
	}
	int64_t bn = m->batch.nin ? m->batch.size : -1;
	const char *name = NULL;
	for (uint32_t i = 0; bn >= 0 && i < m->nsize && !name; i++)
		if (m->size[i].value == bn)
			name = m->size[i].name;
	if (bn < 0 || !name) {
		ir_module_free(m);
		return ndefs; // the run says why it cannot split
	}
	int64_t q = bn / ng, r = bn % ng;
	int k = snprintf(buf, n, "%s=%lld", name, (long long)bn);
	if (r && q + 1 != bn)
		k += snprintf(buf + k, n - (size_t)k, ",%lld", (long long)(q + 1));
	if (q && q != bn)
		snprintf(buf + k, n - (size_t)k, ",%lld", (long long)q);
	size_t nl = strlen(name);
	int at = ndefs;
	for (int i = 0; i < ndefs; i++)
		if (!strncmp(defs[i], name, nl) && defs[i][nl] == '=')
			at = i;
	out[at] = buf;
	ir_module_free(m);
	return at == ndefs ? ndefs + 1 : ndefs;
}

// Whether the artifact at path serves: 0 yes; 1 no, with the reason in why
// and the tasks it has in have when its descriptor is readable (so that a
// rebuild keeps them).
static int
stale(const char *path, const char *hash, const char *defines, const char *const *tasks,
      int ntasks, char *why, size_t n, char *have, size_t nh)
{
	fadc_context *ctx;
	fadc_model *m;
	char v[2048];
	have[0] = 0;
	if (fadc_context_create(NULL, &ctx)) {
		snprintf(why, n, "no runtime context (%s)", fadc_context_error(NULL));
		return 1;
	}
	if (fadc_model_open(ctx, path, FADC_OPEN_DESCRIBE, &m)) {
		snprintf(why, n, "unreadable (%s)", without_path(fadc_context_error(ctx), path));
		fadc_context_destroy(ctx);
		return 1;
	}
	const char *opts = fadc_model_info(m, "options");
	int bad = 1;
	opt_field(opts, "tasks", have, nh);
	if (strcmp(fadc_model_info(m, "source_hash"), hash))
		snprintf(why, n, "the model or the prelude changed (source hash %s, now %s)",
		         fadc_model_info(m, "source_hash"), hash);
	else if (opt_field(opts, "target", v, sizeof v), strcmp(v, S.o.gpu >= 0 ? "cuda" : "cpu"))
		snprintf(why, n, "built for target '%s'", v);
	else if (opt_field(opts, "compute", v, sizeof v), strcmp(v, "f32"))
		snprintf(why, n, "computes in '%s'", v);
	else if (opt_field(opts, "defines", v, sizeof v), strcmp(v, defines))
		snprintf(why, n, "built with sizes '%s', not '%s'", v, defines);
	else {
		opt_field(opts, "tasks", v, sizeof v);
		size_t k = (size_t)snprintf(why, n, "lacks tasks");
		int missing = 0;
		for (int i = 0; i < ntasks && k < n; i++)
			if (!in_list(v, tasks[i]))
				k += (size_t)snprintf(why + k, n - k, "%s %s", missing++ ? "," : "", tasks[i]);
		bad = missing > 0;
	}
	fadc_model_close(m);
	fadc_context_destroy(ctx);
	return bad;
}

// FNV-1a 64 of a file's bytes, for the JSON: the source hash says what the
// artifact was built from, this says which build it is (another compiler,
// -O level or CPU gives other bytes under the same source hash).
static void
file_hash(const char *path, char *out)
{
	unsigned char buf[1 << 16];
	uint64_t h = ART_FNV_BASIS;
	size_t k;
	out[0] = 0;
	FILE *f = fio_fopen_read(path, NULL, 0);
	if (!f)
		return;
	while ((k = fread(buf, 1, sizeof buf, f)) > 0)
		h = art_fnv1a64(h, buf, k);
	if (!ferror(f))
		snprintf(out, 17, "%016" PRIx64, h);
	fclose(f);
}

// The compile command, printable (arguments with odd characters quoted).
static void
print_cmd(char *const *argv, char *buf, size_t n)
{
	size_t k = 0;
	buf[0] = 0;
	for (int i = 0; argv[i] && k < n; i++) {
		int plain = argv[i][strspn(argv[i], "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
		                                     "0123456789_-+=.,/:@")] == 0;
		k += (size_t)snprintf(buf + k, n - k, plain ? "%s%s" : "%s'%s'", i ? " " : "", argv[i]);
	}
}

// The compiler's command line for src -> out; argv points into the
// arguments and store.
static void
compile_argv(char **argv, const char *src, const char *out, const char *tasks,
             const char *const *defs, int ndefs)
{
	int k = 0;
	argv[k++] = (char *)compiler();
	argv[k++] = (char *)src;
	argv[k++] = "-o";
	argv[k++] = (char *)out;
	argv[k++] = "--tasks";
	argv[k++] = (char *)tasks;
	if (S.o.gpu >= 0) {
		argv[k++] = "--target";
		argv[k++] = "cuda";
	}
	for (int i = 0; i < ndefs; i++) {
		argv[k++] = "-D";
		argv[k++] = (char *)defs[i];
	}
	// --gpus over S GPUs: the batched tasks (Hessians, jacfwd, jacobian and
	// jacrev of a non-scalar forward) also as their 2 S shards, which the
	// context over the GPUs runs (docs/MULTIGPU.md); fadc leaves the other
	// tasks as they are.
	// Two shards per GPU: the context copies each GPU's first shard into
	// GPU 0 while the GPU computes its second (runtime/shard.h), which
	// hides half of the copies (docs/PERFORMANCE.md "Overlapped peer
	// copies": ppl_robust_reg's Hessian 1.42x with one, 1.56x with two).
	static char shards[16];
	if (S.o.ngpus >= 2) {
		snprintf(shards, sizeof shards, "%d", 2 * S.o.ngpus);
		argv[k++] = "--shards";
		argv[k++] = shards;
	}
	argv[k] = NULL;
}

// Compiles into a temporary file beside out, then renames it over out, so
// that a concurrent run never loads a half-written artifact.  On failure
// err holds the compiler's first error line; its whole output stays in
// out.log.
static int
compile(const char *src, const char *out, const char *tasks, const char *const *defs, int ndefs,
        char *err, size_t errlen)
{
	char tmp[4400], log[4400], text[16384], cmd[8192];
	char *argv[12 + 2 * 80];
	snprintf(tmp, sizeof tmp, "%s.tmp%ld.so", out, (long)getpid());
	snprintf(log, sizeof log, "%s.log", out);
	compile_argv(argv, src, tmp, tasks, defs, ndefs < 80 ? ndefs : 80);
	// An interrupt during the compile (minutes for the large models)
	// removes the half-made artifact; the compiler cleans its own.
	int reg = fio_cleanup_add(tmp, 0);
	int rc = spawn(argv, log);
	if (rc == 0 && !rename(tmp, out)) {
		fio_cleanup_drop(reg);
		unlink(log);
		return 0;
	}
	int e = errno;
	unlink(tmp);
	fio_cleanup_drop(reg);
	print_cmd(argv, cmd, sizeof cmd);
	if (rc < 0) {
		snprintf(err, errlen, "cannot run the compiler '%s': %s (give --fadc PATH)", argv[0],
		         strerror(e));
		return -1;
	}
	if (rc == 0) {
		snprintf(err, errlen, "cannot rename %s to %s: %s", tmp, out, strerror(e));
		return -1;
	}
	// The reason: the first diagnostic line, else the first line.
	read_text(log, text, sizeof text);
	char *line = strstr(text, "error:");
	while (line && line > text && line[-1] != '\n')
		line--;
	if (!line)
		line = text;
	line[strcspn(line, "\n")] = 0;
	if (rc == 2)
		snprintf(err, errlen, "the compiler refused its command line (usage error: %s); give "
		                      "--fadc PATH of a compiler taking `MODEL.ir -o OUT.so --tasks LIST "
		                      "-D N=V` (log: %s)", line, log);
	else
		snprintf(err, errlen, "cannot compile: %s (exit status %d; log: %s)",
		         *line ? line : "no message", rc, log);
	return -1;
}

// ---------------------------------------------------------------- hooks

static int
configure(const BackendOptions *o, char *err, size_t errlen)
{
	S.o = *o;
	S.have_compiler = S.have_version = 0;
	if (o->artifacts)
		snprintf(S.artifacts, sizeof S.artifacts, "%s", o->artifacts);
	else {
		// build/bin/fadc-bench -> build/artifacts
		char dir[4000];
		exe_dir(dir, sizeof dir);
		char *s = strrchr(dir, '/');
		if (s && s != dir)
			*s = 0;
		snprintf(S.artifacts, sizeof S.artifacts, "%s/artifacts", dir);
	}
	snprintf(S.runtime, sizeof S.runtime, "api %d, artifact format %d", FADC_API_VERSION,
	         ART_FORMAT_VERSION);
	// The folder must be one, or be makeable (--compile makes it): a file
	// there would surface as the compiler failing to write its output.
	struct stat st;
	if (stat(S.artifacts, &st) == 0) {
		if (!S_ISDIR(st.st_mode)) {
			snprintf(err, errlen, "--artifacts %s: is not a directory", S.artifacts);
			return -1;
		}
	} else if (errno != ENOENT) {
		snprintf(err, errlen, "--artifacts %s: %s", S.artifacts, strerror(errno));
		return -1;
	}
	return 0;
}

static void
close_model(void)
{
	fadc_model_close(S.m1);
	fadc_context_destroy(S.ctx1);
	fadc_model_close(S.m);
	fadc_context_destroy(S.ctx);
	S.m = S.m1 = NULL;
	S.ctx = S.ctx1 = NULL;
	S.source[0] = S.defs[0] = S.artifact[0] = S.hash[0] = S.options[0] = S.file_hash[0] = 0;
}

// Whether a model's source names a compiled artifact (a `.so`) rather
// than its `.ir`.
int
bench_is_artifact(const char *source)
{
	size_t l = strlen(source);
	return l > 3 && !strcmp(source + l - 3, ".so");
}

// A model given as a compiled artifact (bench.yaml `source: m.so`): used as
// it is, never compiled, so it must already serve: built for this target,
// with these sizes (its descriptor's defines, compared as for a source) and
// every task needed.  There is no source hash to compare: the file is the
// model.
static int
check_prebuilt(const char *path, const char *defines, const char *const *tasks, int ntasks,
               char *err, size_t errlen)
{
	fadc_context *ctx;
	fadc_model *m;
	char v[2048];
	if (fadc_context_create(NULL, &ctx)) {
		snprintf(err, errlen, "no runtime context: %s", fadc_context_error(NULL));
		return -1;
	}
	if (fadc_model_open(ctx, path, FADC_OPEN_DESCRIBE, &m)) {
		snprintf(err, errlen, "%s: %s", path, without_path(fadc_context_error(ctx), path));
		fadc_context_destroy(ctx);
		return -1;
	}
	const char *opts = fadc_model_info(m, "options");
	int bad = 1;
	// The target option is a list ("cpu,cuda"): an artifact serves when it
	// holds the code of the device the run is on.
	if (opt_field(opts, "target", v, sizeof v), !in_list(v, S.o.gpu >= 0 ? "cuda" : "cpu"))
		snprintf(err, errlen, "the artifact %s is built for target '%s', which has no '%s'", path,
		         v, S.o.gpu >= 0 ? "cuda" : "cpu");
	else if (opt_field(opts, "defines", v, sizeof v), strcmp(v, defines))
		snprintf(err, errlen, "the artifact %s is built with sizes '%s', not '%s' (a compiled "
		                      "model's sizes cannot change)", path, v, defines);
	else {
		opt_field(opts, "tasks", v, sizeof v);
		size_t k = (size_t)snprintf(err, errlen, "the artifact %s lacks tasks", path);
		int missing = 0;
		for (int i = 0; i < ntasks && k < errlen; i++)
			if (!in_list(v, tasks[i]))
				k += (size_t)snprintf(err + k, errlen - k, "%s %s", missing++ ? "," : "", tasks[i]);
		bad = missing > 0;
	}
	fadc_model_close(m);
	fadc_context_destroy(ctx);
	return bad ? -1 : 0;
}

static int
open_model(const char *source, const char *const *defs0, int ndefs0, const char *const *tasks,
           int ntasks, char *err, size_t errlen)
{
	// What prepare is keyed by: the caller's sizes (one value each).
	char key_defines[4096];
	join(key_defines, sizeof key_defines, defs0, ndefs0);
	close_model();
	char abs[PATH_MAX], defines[4096], want[1024], why[8192], have[2048], base[PATH_MAX];
	if (!realpath(source, abs)) {
		snprintf(err, errlen, "%s: %s", source, strerror(errno));
		return -1;
	}
	join(defines, sizeof defines, defs0, ndefs0);
	join(want, sizeof want, tasks, ntasks);
	have[0] = 0; // stale() fills it; a missing artifact has no tasks to keep
	if (bench_is_artifact(abs)) {
		if (check_prebuilt(abs, defines, tasks, ntasks, err, errlen))
			return -1;
		snprintf(S.artifact, sizeof S.artifact, "%s", abs);
		if (S.o.compile_only) {
			snprintf(err, errlen, "%s (prebuilt)", S.artifact);
			return 1;
		}
		goto load;
	}
	if (source_hash(abs, defs0, ndefs0, S.hash, err, errlen))
		return -1;
	// With --gpus, the sizes the artifact is built with (shard_defs).
	const char *defs[256];
	char shard[256];
	if (ndefs0 > 254) {
		snprintf(err, errlen, "too many sizes");
		return -1;
	}
	int ndefs = shard_defs(abs, defs0, ndefs0, defs, shard, sizeof shard, err, errlen);
	if (ndefs < 0)
		return -1;
	join(defines, sizeof defines, defs, ndefs);
	// The artifact's name: the model's, and a key of its source path and
	// sizes, so that reduced and full sizes, or two configurations' copies
	// of a model, keep artifacts of their own.
	const char *b = strrchr(abs, '/');
	snprintf(base, sizeof base, "%s", b ? b + 1 : abs);
	size_t bl = strlen(base);
	if (bl > 3 && !strcmp(base + bl - 3, ".ir"))
		base[bl - 3] = 0;
	uint64_t key = art_fnv1a64(ART_FNV_BASIS, abs, strlen(abs) + 1);
	key = art_fnv1a64(key, defines, strlen(defines));
	if (S.o.ngpus >= 2) { // its shards (compile_argv, 2 S): an artifact of its own
		int nshards = 2 * S.o.ngpus;
		key = art_fnv1a64(key, &nshards, sizeof nshards);
	}
	snprintf(S.artifact, sizeof S.artifact, "%s/%s-%08" PRIx32 ".%s.so", S.artifacts, base,
	         (uint32_t)(key ^ key >> 32), S.o.gpu >= 0 ? "cuda" : "cpu");
	struct stat st;
	int missing = stat(S.artifact, &st) != 0;
	if (missing || stale(S.artifact, S.hash, defines, tasks, ntasks, why, sizeof why, have,
	                     sizeof have)) {
		// A rebuild keeps the tasks the artifact had, so that runs with
		// different filters do not rebuild each other's.
		char list[2048];
		snprintf(list, sizeof list, "%s", want);
		for (const char *s = have; *s; s += strcspn(s, ","), s += *s == ',') {
			char t[64];
			snprintf(t, sizeof t, "%.*s", (int)strcspn(s, ","), s);
			size_t k = strlen(list);
			if (strcmp(t, "forward") && !in_list(list, t))
				snprintf(list + k, sizeof list - k, ",%s", t);
		}
		if (!S.o.compile) {
			char *argv[12 + 2 * 80], cmd[8192];
			compile_argv(argv, abs, S.artifact, list, defs, ndefs < 80 ? ndefs : 80);
			print_cmd(argv, cmd, sizeof cmd);
			if (missing)
				snprintf(err, errlen, "no artifact %s; run with --compile, or: %s", S.artifact, cmd);
			else
				snprintf(err, errlen, "the artifact %s is stale: %s; run with --compile, or: %s",
				         S.artifact, why, cmd);
			return -1;
		}
		if (mkdir_p(S.artifacts)) {
			snprintf(err, errlen, "cannot make %s: %s", S.artifacts, strerror(errno));
			return -1;
		}
		fprintf(stderr, "fadc-bench: compiling %s (%s) into %s%s%s\n", base, list, S.artifact,
		        missing ? "" : ": stale, ", missing ? "" : why);
		if (compile(abs, S.artifact, list, defs, ndefs, err, errlen))
			return -1;
		// What the compiler wrote must serve, or every run would rebuild it.
		if (stale(S.artifact, S.hash, defines, tasks, ntasks, why, sizeof why, have, sizeof have)) {
			snprintf(err, errlen, "the compiler's artifact %s does not match the request: %s",
			         S.artifact, why);
			return -1;
		}
	}
	if (S.o.compile_only) {
		snprintf(err, errlen, "%s", S.artifact);
		return 1;
	}
load:;
	fadc_context_options co = {.device = {S.o.gpu >= 0 ? FADC_DEVICE_CUDA : FADC_DEVICE_CPU,
	                                      S.o.gpu >= 0 ? S.o.gpu : 0},
	                           .num_threads = S.o.num_threads, // the pool's size (runtime/pool.c)
	                           .seed = S.o.seed};
	fadc_device gpus[FADC_MAX_DEVICES];
	if (S.o.ngpus) {
		for (int i = 0; i < S.o.ngpus && i < FADC_MAX_DEVICES; i++)
			gpus[i] = (fadc_device){FADC_DEVICE_CUDA, S.o.gpus[i]};
		co.device = (fadc_device){FADC_DEVICE_CUDA_LIST, 0};
		co.devices = gpus;
		co.ndevices = S.o.ngpus;
	}
	if (fadc_context_create(&co, &S.ctx)) {
		snprintf(err, errlen, "cannot make a runtime context: %s", fadc_context_error(NULL));
		return -1;
	}
	if (fadc_model_open(S.ctx, S.artifact, 0, &S.m) || fadc_model_init(S.m, S.o.seed)) {
		snprintf(err, errlen, "%s", fadc_context_error(S.ctx));
		close_model();
		return -1;
	}
	if (S.o.ngpus) {
		fadc_context_options c1 = {.device = {FADC_DEVICE_CUDA, S.o.gpus[0]},
		                           .num_threads = S.o.num_threads, .seed = S.o.seed};
		if (fadc_context_create(&c1, &S.ctx1)) {
			snprintf(err, errlen, "cannot make a runtime context: %s", fadc_context_error(NULL));
			close_model();
			return -1;
		}
		if (fadc_model_open(S.ctx1, S.artifact, 0, &S.m1) || fadc_model_init(S.m1, S.o.seed)) {
			snprintf(err, errlen, "%s", fadc_context_error(S.ctx1));
			close_model();
			return -1;
		}
	}
	snprintf(S.source, sizeof S.source, "%s", source);
	snprintf(S.defs, sizeof S.defs, "%s", key_defines);
	snprintf(S.options, sizeof S.options, "%s", fadc_model_info(S.m, "options"));
	file_hash(S.artifact, S.file_hash);
	return 0;
}

static const char *
info(const char *key)
{
	if (!strcmp(key, "artifact"))
		return S.m ? S.artifact : NULL;
	if (!strcmp(key, "artifact_hash"))
		return S.m ? fadc_model_info(S.m, "source_hash") : NULL;
	if (!strcmp(key, "artifact_file_hash"))
		return S.m && S.file_hash[0] ? S.file_hash : NULL;
	if (!strcmp(key, "artifact_options"))
		return S.m ? S.options : NULL;
	if (!strcmp(key, "runtime"))
		return S.runtime;
	if (!strcmp(key, "device"))
		return S.ctx ? fadc_context_device_name(S.ctx) : NULL;
	if (!strcmp(key, "compiler"))
		return compiler();
	if (!strcmp(key, "compiler_version")) {
		// Asked only for the JSON; a compiler without --version has none.
		if (!S.have_version) {
			char out[1024], *argv[] = {(char *)compiler(), "--version", NULL};
			S.have_version = 1;
			S.compiler_version[0] = 0;
			if (capture(argv, out, sizeof out) == 0) {
				out[strcspn(out, "\n")] = 0;
				snprintf(S.compiler_version, sizeof S.compiler_version, "%s", out);
			}
		}
		return S.compiler_version[0] ? S.compiler_version : NULL;
	}
	return NULL;
}

// ---------------------------------------------------------------- tasks

static void
release(Prepared *p)
{
	if (!p)
		return;
	for (int i = 0; p->in && i < p->nin; i++) {
		fadc_tensor_release(p->in[i]);
		free(p->bin[i].data);
	}
	for (int i = 0; p->out && i < p->nout; i++) {
		fadc_tensor_release(p->out[i]);
		free(p->bout[i].data);
	}
	for (int i = 0; p->in1 && i < p->nin; i++)
		fadc_tensor_release(p->in1[i]);
	for (int i = 0; p->out1 && i < p->nout; i++)
		fadc_tensor_release(p->out1[i]);
	free(p->in1), free(p->out1);
	free(p->in), free(p->out), free(p->bin), free(p->bout), free(p->gen);
	free(p);
}

static int
bind_b(BTensor *b, const fadc_tensor_desc *d)
{
	snprintf(b->name, sizeof b->name, "%s", d->name);
	b->rank = d->rank;
	b->n = 1;
	for (int i = 0; i < d->rank; i++)
		b->dim[i] = d->dim[i], b->n *= d->dim[i];
	b->data = calloc((size_t)(b->n ? b->n : 1), sizeof *b->data);
	return b->data != NULL;
}

static Prepared *
prepare(const char *source, const char *const *defs, int ndefs, const char *task, uint64_t seed,
        char *err, size_t errlen)
{
	char defines[4096];
	join(defines, sizeof defines, defs, ndefs);
	if (!S.m || strcmp(source, S.source) || strcmp(defines, S.defs)) {
		snprintf(err, errlen, "%s: no artifact open for these sizes", source);
		return NULL;
	}
	if (seed != S.o.seed) {
		snprintf(err, errlen, "run seed %" PRIu64 " is not the configured %" PRIu64, seed, S.o.seed);
		return NULL;
	}
	int t;
	fadc_task_info ti;
	if (fadc_model_find_task(S.m, task, &t) || fadc_task_info_get(S.m, t, &ti)) {
		snprintf(err, errlen, "%s: %s", S.artifact, fadc_context_error(S.ctx));
		return NULL;
	}
	Prepared *p = calloc(1, sizeof *p);
	if (!p)
		goto nomem;
	p->task = t;
	p->in = calloc((size_t)ti.ncaller + 1, sizeof *p->in);
	p->bin = calloc((size_t)ti.ncaller + 1, sizeof *p->bin);
	p->out = calloc((size_t)ti.noutputs + 1, sizeof *p->out);
	p->bout = calloc((size_t)ti.noutputs + 1, sizeof *p->bout);
	p->gen = calloc((size_t)ti.noutputs + 1, sizeof *p->gen);
	if (!p->in || !p->bin || !p->out || !p->bout || !p->gen)
		goto nomem;
	fadc_tensor_desc d;
	for (int i = 0; i < ti.ninputs; i++) {
		if (fadc_task_input(S.m, t, i, &d))
			goto rt;
		if (d.role != FADC_ROLE_INPUT)
			continue;
		if (fadc_tensor_create(S.ctx, d.dtype, d.rank, d.dim, &p->in[p->nin]))
			goto rt;
		if (!bind_b(&p->bin[p->nin++], &d))
			goto nomem;
	}
	// Outputs in tensors of the caller's, made once: runs write them in
	// place, and a task's outputs never alias another Prepared's.
	for (int i = 0; i < ti.noutputs; i++) {
		if (fadc_task_output(S.m, t, i, &d) ||
		    fadc_tensor_create(S.ctx, d.dtype, d.rank, d.dim, &p->out[p->nout]))
			goto rt;
		if (!bind_b(&p->bout[p->nout++], &d))
			goto nomem;
	}
	if (S.m1) {
		// The one-GPU baseline: the same task of the same artifact, its own
		// inputs and outputs.
		p->in1 = calloc((size_t)p->nin + 1, sizeof *p->in1);
		p->out1 = calloc((size_t)p->nout + 1, sizeof *p->out1);
		if (!p->in1 || !p->out1)
			goto nomem;
		if (fadc_model_find_task(S.m1, task, &p->task1))
			goto rt1;
		for (int i = 0; i < p->nin; i++)
			if (fadc_tensor_create(S.ctx1, fadc_tensor_dtype(p->in[i]), fadc_tensor_rank(p->in[i]),
			                       fadc_tensor_dims(p->in[i]), &p->in1[i]))
				goto rt1;
		for (int i = 0; i < p->nout; i++)
			if (fadc_tensor_create(S.ctx1, fadc_tensor_dtype(p->out[i]),
			                       fadc_tensor_rank(p->out[i]), fadc_tensor_dims(p->out[i]),
			                       &p->out1[i]))
				goto rt1;
	}
	return p;
rt1:
	snprintf(err, errlen, "%s", fadc_context_error(S.ctx1));
	release(p);
	return NULL;
rt:
	snprintf(err, errlen, "%s", fadc_context_error(S.ctx));
	release(p);
	return NULL;
nomem:
	snprintf(err, errlen, "out of memory");
	release(p);
	return NULL;
}

static int
ninputs(Prepared *p)
{
	return p->nin;
}

static BTensor *
input(Prepared *p, int i)
{
	return &p->bin[i];
}

// Host bytes of t's element type from float64 values, written through the
// API (a copy to the device on a GPU).
static int
to_device(fadc_tensor *t, const double *v)
{
	int64_t n = fadc_tensor_numel(t);
	void *d = malloc(fadc_tensor_bytes(t) ? fadc_tensor_bytes(t) : 1);
	if (!d)
		return -1;
	for (int64_t i = 0; i < n; i++)
		switch (fadc_tensor_dtype(t)) {
		case FADC_F32:
			((float *)d)[i] = (float)v[i];
			break;
		case FADC_F64:
			((double *)d)[i] = v[i];
			break;
		case FADC_I64:
			((int64_t *)d)[i] = (int64_t)v[i];
			break;
		case FADC_BOOL:
			((uint8_t *)d)[i] = v[i] != 0;
			break;
		}
	int rc = fadc_tensor_write(t, d, fadc_tensor_bytes(t)) ? -1 : 0;
	free(d);
	return rc;
}

static int
to_host(fadc_tensor *t, double *v)
{
	int64_t n = fadc_tensor_numel(t);
	void *d = malloc(fadc_tensor_bytes(t) ? fadc_tensor_bytes(t) : 1);
	if (!d || fadc_tensor_read(t, d, fadc_tensor_bytes(t))) {
		free(d);
		return -1;
	}
	for (int64_t i = 0; i < n; i++)
		switch (fadc_tensor_dtype(t)) {
		case FADC_F32:
			v[i] = ((const float *)d)[i];
			break;
		case FADC_F64:
			v[i] = ((const double *)d)[i];
			break;
		case FADC_I64:
			v[i] = (double)((const int64_t *)d)[i];
			break;
		case FADC_BOOL:
			v[i] = ((const uint8_t *)d)[i];
			break;
		}
	free(d);
	return 0;
}

static int
run(Prepared *p, char *err, size_t errlen)
{
	if (!p->ran) {
		// The runner filled v after prepare: placed once, before the
		// warm-up; timed runs reuse it.
		for (int i = 0; i < p->nin; i++)
			if (to_device(p->in[i], p->bin[i].data)) {
				snprintf(err, errlen, "placing input %s: %s", p->bin[i].name,
				         fadc_context_error(S.ctx));
				return -1;
			}
		// On a GPU the warm-up is two runs, the eager one and the one
		// that records the task's CUDA graph, so that timed runs replay.
		if (S.o.gpu >= 0 && fadc_run(S.m, p->task, p->in, p->nin, p->out, p->nout)) {
			snprintf(err, errlen, "%s", fadc_context_error(S.ctx));
			return -1;
		}
		p->ran = 1;
	}
	// --device-time: events around the call, whose stop waits as the
	// synchronize does; the host clock of the runner still brackets both.
	int timed = S.o.gpu >= 0 && S.o.device_time;
	if ((timed && fadc_context_timer_start(S.ctx)) ||
	    fadc_run(S.m, p->task, p->in, p->nin, p->out, p->nout) ||
	    (timed && fadc_context_timer_stop(S.ctx, &p->device_s)) ||
	    (S.o.gpu >= 0 && fadc_context_synchronize(S.ctx))) {
		snprintf(err, errlen, "%s", fadc_context_error(S.ctx));
		return -1;
	}
	return 0;
}

// --gpus: one run on gpus[0] alone, timed as run times the GPUs' (its
// warm-up, the eager run and the recording, at its first call).
static int
run_single(Prepared *p, char *err, size_t errlen)
{
	if (!S.m1) {
		snprintf(err, errlen, "no one-GPU baseline (--gpus)");
		return -1;
	}
	int warm = p->ran1 ? 0 : 2;
	for (int i = 0; !p->ran1 && i < p->nin; i++)
		if (to_device(p->in1[i], p->bin[i].data)) {
			snprintf(err, errlen, "placing input %s: %s", p->bin[i].name,
			         fadc_context_error(S.ctx1));
			return -1;
		}
	p->ran1 = 1;
	for (int i = 0; i <= warm; i++)
		if (fadc_run(S.m1, p->task1, p->in1, p->nin, p->out1, p->nout) ||
		    fadc_context_synchronize(S.ctx1)) {
			snprintf(err, errlen, "one GPU: %s", fadc_context_error(S.ctx1));
			return -1;
		}
	return 0;
}

static double
device_seconds(Prepared *p)
{
	return p->device_s;
}

static void
reset_peak(void)
{
	if (S.ctx)
		fadc_context_reset_peak_memory(S.ctx);
}

static int64_t
peak_memory(void)
{
	fadc_memory_stats ms;
	if (!S.ctx || fadc_context_memory(S.ctx, &ms))
		return -1;
	return (int64_t)ms.peak_bytes;
}

static int
noutputs(Prepared *p)
{
	return p->nout;
}

static const BTensor *
output(Prepared *p, int i)
{
	uint64_t g = fadc_tensor_generation(p->out[i]);
	if (g != p->gen[i]) {
		if (to_host(p->out[i], p->bout[i].data)) // NaN: the check then fails, and says so
			for (int64_t k = 0; k < p->bout[i].n; k++)
				p->bout[i].data[k] = NAN;
		p->gen[i] = g;
	}
	return &p->bout[i];
}

const Backend backend_cpu = {
    .name = "cpu",
    .prepare = prepare,
    .ninputs = ninputs,
    .input = input,
    .run = run,
    .noutputs = noutputs,
    .output = output,
    .release = release,
    .device_seconds = device_seconds,
    .reset_peak = reset_peak,
    .peak_memory = peak_memory,
    .run_single = run_single,
};

const ModelHooks backend_cpu_hooks = {
    .configure = configure,
    .open_model = open_model,
    .close_model = close_model,
    .info = info,
};
