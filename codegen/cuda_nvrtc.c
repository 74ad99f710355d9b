// codegen/cuda_nvrtc.c -- the CUDA backend's driver of NVRTC: CUDA C (as
// cuda.c prints it) to a cubin or PTX.  The only file of fadc that
// includes nvrtc.h; it is built only where CMake found the CUDA toolkit
// (FADC_HAVE_CUDA), and the runtime never links NVRTC.  The printer and
// the scheduler (cuda.c, cuda_sched.c) need no toolkit.
//
// NVRTC calls go through one checked path, CHECK_NVRTC: the statement,
// function, file, line and nvrtcGetErrorString into err; a failed
// compilation also writes the program log and the blamed source lines in
// context to the diagnostics stream, and the whole source to a file it
// names (nvrtc_report).  Kernels are compiled with --fmad=false: the
// CPU backend never contracts a*b+c, and the interpreter is the reference.
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <nvrtc.h>

#include "codegen.h"
#include "fileio.h"

// ---------------------------------------------------------------- NVRTC

// A failed compilation's report.  The generated source is fadc's output and
// the usual culprit, but a task's source runs to hundreds of KB: the report
// names NVRTC's error lines with a few lines of context each, and the whole
// source goes to a file the report names, $TMPDIR/fadc-nvrtc-NAME (/tmp
// without TMPDIR).  $TMPDIR rather than the current folder, which may be
// the user's source tree or read-only; a fixed name, so a re-run replaces
// the file rather than piling up copies.  It is written through
// fio_write_file (a temporary renamed over the name): two compilations of
// one source (a test's, or two processes) may write it at once.
enum {
	NV_LOG_LINES = 20, // of NVRTC's log, at most
	NV_SITES = 3,      // error lines shown with context, at most
	NV_CONTEXT = 3,    // lines before and after each
};

// Line k (from 1) of src: its start and length; 0 when src is shorter.
static int
src_line(const char *src, long k, const char **start, int *len) {
	const char *s = src;
	for (long i = 1; i < k && s; i++) {
		s = strchr(s, '\n');
		if (s)
			s++;
	}
	if (!s || !*s)
		return 0;
	const char *e = strchr(s, '\n');
	*start = s;
	*len = (int)(e ? e - s : (long)strlen(s));
	return 1;
}

// The lines NVRTC's log blames: "NAME(LINE): error ..." (any line it names
// when none says error), distinct and in log order; how many in line[].
static int
log_sites(const char *log, const char *name, long *line, int max) {
	size_t nl = strlen(name);
	int n = 0;
	for (int pass = 0; pass < 2 && !n; pass++)
		for (const char *s = log; (s = strstr(s, name)) && n < max; s += nl) {
			const char *q = s + nl;
			char *end;
			if (*q != '(' || q[1] < '0' || q[1] > '9')
				continue;
			long k = strtol(q + 1, &end, 10);
			if (*end != ')')
				continue;
			const char *eol = strchr(end, '\n');
			size_t rest = eol ? (size_t)(eol - end) : strlen(end);
			// ": error", ": catastrophic error" (#error); not ": warning"
			const char *err = strstr(end, "error");
			if (pass == 0 && (!err || (size_t)(err - end) > rest))
				continue;
			int seen = 0;
			for (int i = 0; i < n; i++)
				seen |= line[i] == k;
			if (!seen)
				line[n++] = k;
		}
	return n;
}

static void
nvrtc_report(FILE *f, const char *src, const char *name, const char *arch, const char *status,
             const char *log) {
	fprintf(f, "NVRTC: compiling %s for %s failed: %s\n", name, arch, status);
	// The log, at most NV_LOG_LINES of it.
	int nlog = 0;
	const char *s = log;
	while (*s && nlog < NV_LOG_LINES) {
		const char *e = strchr(s, '\n');
		int n = (int)(e ? e - s : (long)strlen(s));
		if (n) {
			fprintf(f, "%.*s\n", n, s);
			nlog++;
		}
		s += n + (e != NULL);
	}
	long more = 0;
	for (; *s; s++)
		more += *s == '\n';
	if (more)
		fprintf(f, "... (%ld more lines of NVRTC's log)\n", more);
	// The blamed lines in context.
	long site[NV_SITES];
	int nsite = log_sites(log, name, site, NV_SITES);
	for (int i = 0; i < nsite; i++) {
		fprintf(f, "%s:%ld:\n", name, site[i]);
		for (long k = site[i] - NV_CONTEXT; k <= site[i] + NV_CONTEXT; k++) {
			const char *ls;
			int len;
			if (k >= 1 && src_line(src, k, &ls, &len))
				fprintf(f, "%c%5ld | %.*s\n", k == site[i] ? '>' : ' ', k, len, ls);
		}
	}
	// The whole source, to a file.
	const char *tmp = getenv("TMPDIR");
	if (!tmp || !*tmp)
		tmp = "/tmp";
	size_t plen = strlen(tmp) + strlen(name) + 16;
	char *path = malloc(plen), ferr[512];
	if (!path) {
		fprintf(f, "(the generated source was not saved: out of memory)\n");
		return;
	}
	int k = snprintf(path, plen, "%s/fadc-nvrtc-", tmp);
	for (const char *c = name; *c; c++) // the name as one file name
		path[k++] = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
		                    (*c >= '0' && *c <= '9') || *c == '.' || *c == '-' || *c == '_'
		                ? *c
		                : '_';
	path[k] = 0;
	size_t srclen = strlen(src);
	if (fio_write_file(path, src, srclen, 0644, ferr, sizeof ferr) == 0)
		fprintf(f, "the whole generated source (%zu bytes): %s\n", srclen, path);
	else
		fprintf(f, "(the generated source was not saved: %s)\n", ferr);
	free(path);
}

// The one checked path for NVRTC calls: the statement, where, and NVRTC's
// message into err, then `goto done`.  CHECK_NVRTC_AS checks a result kept
// in a variable (the compilation's, after its log is read) under the text
// of the call that made it.
#define CHECK_NVRTC_AS(x, text)                                                                    \
	do {                                                                                       \
		nvrtcResult cu_r = (x);                                                            \
		if (cu_r != NVRTC_SUCCESS) {                                                       \
			snprintf(err, errlen, "NVRTC: %s failed in %s (%s:%d): %s", text,          \
			         __func__, __FILE__, __LINE__, nvrtcGetErrorString(cu_r));         \
			goto done;                                                                 \
		}                                                                                  \
	} while (0)
#define CHECK_NVRTC(x) CHECK_NVRTC_AS(x, #x)

// The options of every compilation but the architecture's (part of the
// compile cache's key, cg_cuda_cache_key).
#define NVRTC_OPTIONS "--fmad=false", "--std=c++17"

// The name NVRTC compiles every program under.  The caller's name
// (MODEL.TASK.cu) carries the model's file name, which is no input of the
// code: NVRTC never sees it, so that it cannot reach the cubin or the PTX
// and stays out of the compile cache's key (a copy of a model under
// another name hits).  Diagnostics still name the caller's program: its
// name replaces this one in NVRTC's log (named_log).
#define NV_PROGRAM "fadc.cu"

// NVRTC's log with each "fadc.cu(" made "NAME(" (malloc'ed; NULL when out
// of memory).
static char *
named_log(const char *log, const char *name)
{
	static const char pat[] = NV_PROGRAM "(";
	size_t np = sizeof pat - 1, nn = strlen(name), k = 0;
	for (const char *s = log; (s = strstr(s, pat)); s += np)
		k++;
	char *out = malloc(strlen(log) + k * (nn + 1) + 1), *o = out;
	if (!out)
		return NULL;
	for (const char *s = log, *h; *s; s = h + np) {
		if (!(h = strstr(s, pat))) {
			strcpy(o, s);
			return out;
		}
		memcpy(o, s, (size_t)(h - s));
		o += h - s;
		memcpy(o, name, nn);
		o += nn;
		*o++ = '(';
	}
	*o = 0;
	return out;
}

// One compilation of src for arch; what it made into *cubin (a real
// architecture, sm_XX) and *ptx (PTX without its trailing NUL; any
// architecture), each when asked for (non-NULL).  NVRTC keeps both of one
// compilation: for sm_XX it lowers the program to compute_XX PTX and
// assembles that, and nvrtcGetPTX returns the PTX it assembled -- the
// same bytes as a compilation for compute_XX (checked with NVRTC 13.0 on
// the zoo's artifacts: byte-identical images), at half the cost.
static int
nvrtc_run(const char *src, const char *name, const char *arch, uint8_t **cubin, size_t *cubinlen,
          uint8_t **ptx, size_t *ptxlen, FILE *diag, char *err, size_t errlen) {
	char archopt[64];
	snprintf(archopt, sizeof archopt, "--gpu-architecture=%s", arch);
	const char *opts[] = {archopt, NVRTC_OPTIONS};
	nvrtcProgram prog = NULL;
	int ok = 0, created = 0;
	char *log = NULL;
	uint8_t *bin = NULL, *text = NULL;
	CHECK_NVRTC(nvrtcCreateProgram(&prog, src, NV_PROGRAM, 0, NULL, NULL));
	created = 1;
	nvrtcResult cr = nvrtcCompileProgram(prog, (int)(sizeof opts / sizeof opts[0]), opts);
	size_t loglen = 0;
	CHECK_NVRTC(nvrtcGetProgramLogSize(prog, &loglen));
	log = malloc(loglen + 1);
	if (!log) {
		snprintf(err, errlen, "error: out of memory");
		goto done;
	}
	log[0] = 0;
	if (loglen)
		CHECK_NVRTC(nvrtcGetProgramLog(prog, log));
	if (cr != NVRTC_SUCCESS) {
		FILE *f = diag ? diag : stderr;
		const char *shown = name ? name : NV_PROGRAM;
		char *named = named_log(log, shown);
		nvrtc_report(f, src, shown, arch, nvrtcGetErrorString(cr), named ? named : log);
		free(named);
		fflush(f);
	}
	CHECK_NVRTC_AS(cr, "nvrtcCompileProgram(prog, nopts, opts)");
	size_t nbin = 0, ntext = 0;
	if (cubin) {
		CHECK_NVRTC(nvrtcGetCUBINSize(prog, &nbin));
		if (!(bin = malloc(nbin + 1))) {
			snprintf(err, errlen, "error: out of memory");
			goto done;
		}
		CHECK_NVRTC(nvrtcGetCUBIN(prog, (char *)bin));
	}
	if (ptx) {
		CHECK_NVRTC(nvrtcGetPTXSize(prog, &ntext));
		if (!(text = malloc(ntext + 1))) {
			snprintf(err, errlen, "error: out of memory");
			goto done;
		}
		CHECK_NVRTC(nvrtcGetPTX(prog, (char *)text));
	}
	if (cubin) {
		*cubin = bin;
		*cubinlen = nbin;
		bin = NULL;
	}
	if (ptx) {
		*ptx = text;
		*ptxlen = ntext ? ntext - 1 : 0; // without its terminating NUL
		text = NULL;
	}
	ok = 1;
done:
	free(bin);
	free(text);
	free(log);
	if (created)
		nvrtcDestroyProgram(&prog);
	return ok;
}

int
cg_cuda_compile(const char *src, const char *name, const char *arch, uint8_t **out, size_t *outlen,
                FILE *diag, char *err, size_t errlen) {
	*out = NULL;
	*outlen = 0;
	if (!arch)
		arch = "sm_90";
	int ptx = !strncmp(arch, "compute_", 8);
	if (!ptx && strncmp(arch, "sm_", 3)) {
		snprintf(err, errlen,
		         "error: unknown CUDA architecture '%s' (sm_XX for a cubin, "
		         "compute_XX for PTX)",
		         arch);
		return 0;
	}
	return ptx ? nvrtc_run(src, name, arch, NULL, NULL, out, outlen, diag, err, errlen)
	           : nvrtc_run(src, name, arch, out, outlen, NULL, NULL, diag, err, errlen);
}

int
cg_cuda_compile_both(const char *src, const char *name, const char *arch, uint8_t **cubin,
                     size_t *cubinlen, uint8_t **ptx, size_t *ptxlen, FILE *diag, char *err,
                     size_t errlen) {
	*cubin = NULL;
	*cubinlen = 0;
	if (ptx) {
		*ptx = NULL;
		*ptxlen = 0;
	}
	if (!arch)
		arch = "sm_90";
	if (strncmp(arch, "sm_", 3)) {
		snprintf(err, errlen,
		         "error: unknown CUDA architecture '%s' (sm_XX: a cubin and its PTX)", arch);
		return 0;
	}
	return nvrtc_run(src, name, arch, cubin, cubinlen, ptx, ptxlen, diag, err, errlen);
}

int
cg_cuda_nvrtc_version(int *major, int *minor) {
	return nvrtcVersion(major, minor) == NVRTC_SUCCESS;
}

void
cg_cuda_cache_key(const char *src, const char *arch, int ptx, uint8_t key[32])
{
	// Every input of nvrtc_run that can change its bytes: the source, the
	// architecture, the other options, whether the PTX is kept, and NVRTC
	// itself.  The program's name NVRTC sees is always NV_PROGRAM (so it
	// is in the key's first field), never the caller's.
	static const char *const opts[] = {NVRTC_OPTIONS};
	int major = -1, minor = -1;
	nvrtcVersion(&major, &minor);
	char ver[64];
	snprintf(ver, sizeof ver, "nvrtc %d.%d ptx=%d", major, minor, ptx != 0);
	CgSha256 s;
	cg_sha256_init(&s);
	cg_sha256_field(&s, "fadc compile cache: NVRTC " NV_PROGRAM, 33);
	cg_sha256_field(&s, ver, strlen(ver));
	cg_sha256_field(&s, arch ? arch : "sm_90", strlen(arch ? arch : "sm_90"));
	for (size_t i = 0; i < sizeof opts / sizeof opts[0]; i++)
		cg_sha256_field(&s, opts[i], strlen(opts[i]));
	cg_sha256_field(&s, src, strlen(src));
	cg_sha256_end(&s, key);
}
