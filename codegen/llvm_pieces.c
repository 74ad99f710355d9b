// codegen/llvm_pieces.c -- the LLVM backend's pieces compiled on threads
// and cached one by one (docs/CODEGEN.md "Compile time", docs/CUDA.md "The
// compile cache").  llvm.c emits the module as pieces in one LLVM context
// (which is not thread-safe); here each piece is
//
//   verified, written as bitcode (in the emitting thread)
//   -> its key: SHA-256 of the bitcode, the target and LLVM's version
//   -> a cache hit gives its object code; a miss is a job of the
//      compile's pool (codegen/jobs.c, shared with NVRTC's programs):
//      parsed from the bitcode into a context of the job's own,
//      optimized (default<On>) and compiled with a target machine of
//      its own, the object kept in memory
//   -> the objects written in piece order, the misses stored.
//
// In two steps (llvm_pieces_start, _finish): the task pieces are queued
// first and compile while the caller makes the last module, the entry's,
// whose descriptor records the CUDA images NVRTC is still making.
//
// CPU levels (docs/ARTIFACT.md "CPU levels"): llvm.c emits the module once
// per level, each in a context of its own; level 0's pieces are all
// compiled, a higher level's are compared with level 0's first
// (llvm_pieces_level): a piece whose bitcode is level 0's, but for the
// 512-bit preference fn_wide adds, is left out, and its functions are
// level 0's (their code for level 0 runs on the higher level's CPUs; from
// AVX2 up LLVM keeps 256-bit vectors where the IR does not ask for more,
// so the level would change little of it).  Of a piece that differs, only
// the functions that do are kept (the GEMM's, whose tiles follow the
// vector width), with the functions that use them up to the task's and
// the internal ones they call; the rest are level 0's too.  What is kept
// is renamed NAME.CPU ("task.vjp.x86-64-v4") with every reference to it,
// so the levels' code lives side by side in one library.  Below AVX2
// every piece is kept whole: there the level's own vectors are what pays.
//
// Why this is deterministic: a job's input is the bitcode and nothing
// else (every piece, hit or miss, one thread or many, is compiled from
// its parsed bitcode, never from the emitting context's module, whose
// use-lists may be ordered otherwise), a job shares nothing with the
// others, and the files are written in piece order after every job is
// done.  So the objects, and the linked .so, are the same bytes whatever
// the number of threads, their timing, and the cache.
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <llvm-c/Analysis.h>
#include <llvm-c/BitReader.h>
#include <llvm-c/BitWriter.h>
#include <llvm/Config/llvm-config.h> // LLVM_VERSION_STRING: plain C macros
#include <llvm-c/Core.h>
#include <llvm-c/Error.h>
#include <llvm-c/Support.h>
#include <llvm-c/Target.h>
#include <llvm-c/TargetMachine.h>
#include <llvm-c/Transforms/PassBuilder.h>

#include "codegen.h"
#include "llvm_impl.h"

typedef struct LlvmPieces LlvmPieces;

typedef struct Piece {
	LlvmPieces *lp; // what every piece's job shares (read only)
	unsigned index; // of the piece among its level's modules
	int level; // of CgTarget.level: the CPU it is compiled for
	LLVMMemoryBufferRef bc; // its bitcode
	uint8_t key[32];
	uint8_t *obj; // its object code (malloc'ed): from the cache or a job
	size_t objlen;
	int hit;
	int failed;
	double opt_cpu, cg_cpu; // the job's optimization and code generation, thread CPU seconds
	char err[1024];
} Piece;

// The pieces of one cg_llvm_emit, from llvm_pieces_start to _end.
struct LlvmPieces {
	Piece *pc; // the modules that define something, in module order
	int n, cap;
	const CgTarget *tg;
	char triple[256], pipeline[32];
	FILE *emit_llvm;
	CgPool *pool, *own; // the pool the jobs run on; own: made here (tg->pool NULL)
	CgBatch batch;
	int hits;
};

static void
fail_msg(Piece *p, const char *what, char *msg)
{
	snprintf(p->err, sizeof p->err, "LLVM: %s: %s", what, msg ? msg : "(no message)");
	if (msg)
		LLVMDisposeMessage(msg);
	p->failed = 1;
}

static double
thread_cpu(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

// One job: the piece's bitcode to object code, in an LLVM context and with
// a target machine of this call's own.
static void
compile_one(void *arg)
{
	Piece *p = arg;
	const LlvmPieces *js = p->lp;
	const CgTarget *tg = js->tg;
	const CgLevel *lv = &tg->level[p->level];
	LLVMContextRef C = LLVMContextCreate();
	LLVMModuleRef M = NULL;
	LLVMTargetMachineRef tm = NULL;
	LLVMPassBuilderOptionsRef po = NULL;
	LLVMMemoryBufferRef ob = NULL;
	char *msg = NULL;
	LLVMTargetRef target;
	if (LLVMParseBitcodeInContext2(C, p->bc, &M)) {
		fail_msg(p, "reading a piece's bitcode back", NULL);
		goto done;
	}
	if (LLVMGetTargetFromTriple(js->triple, &target, &msg)) {
		fail_msg(p, "target", msg);
		goto done;
	}
	LLVMCodeGenOptLevel lvl = tg->opt_level <= 0   ? LLVMCodeGenLevelNone
	                          : tg->opt_level == 1 ? LLVMCodeGenLevelLess
	                          : tg->opt_level == 2 ? LLVMCodeGenLevelDefault
	                                               : LLVMCodeGenLevelAggressive;
	tm = LLVMCreateTargetMachine(target, js->triple, lv->cpu, lv->features ? lv->features : "", lvl,
	                             LLVMRelocPIC, LLVMCodeModelDefault);
	if (!tm) {
		snprintf(p->err, sizeof p->err, "LLVM: cannot create a target machine for %s, cpu %s",
		         js->triple, lv->cpu);
		p->failed = 1;
		goto done;
	}
	po = LLVMCreatePassBuilderOptions();
	LLVMPassBuilderOptionsSetLoopVectorization(po, 1);
	LLVMPassBuilderOptionsSetSLPVectorization(po, 1);
	double c0 = thread_cpu();
	LLVMErrorRef er = LLVMRunPasses(M, js->pipeline, tm, po);
	double c1 = thread_cpu();
	p->opt_cpu = c1 - c0;
	if (er) {
		char *m = LLVMGetErrorMessage(er);
		snprintf(p->err, sizeof p->err, "LLVM: optimization: %s", m ? m : "(no message)");
		LLVMDisposeErrorMessage(m);
		p->failed = 1;
		goto done;
	}
	if (js->emit_llvm) { // one piece (npieces): this is the only job
		char *s = LLVMPrintModuleToString(M);
		fputs(s, js->emit_llvm);
		LLVMDisposeMessage(s);
	}
	c1 = thread_cpu();
	if (LLVMTargetMachineEmitToMemoryBuffer(tm, M, LLVMObjectFile, &msg, &ob)) {
		fail_msg(p, "emitting the object file", msg);
		goto done;
	}
	p->cg_cpu = thread_cpu() - c1;
	p->objlen = LLVMGetBufferSize(ob);
	p->obj = malloc(p->objlen + 1);
	if (!p->obj) {
		snprintf(p->err, sizeof p->err, "out of memory");
		p->failed = 1;
		goto done;
	}
	memcpy(p->obj, LLVMGetBufferStart(ob), p->objlen);
done:
	if (ob)
		LLVMDisposeMemoryBuffer(ob);
	if (po)
		LLVMDisposePassBuilderOptions(po);
	if (tm)
		LLVMDisposeTargetMachine(tm);
	if (M)
		LLVMDisposeModule(M);
	LLVMContextDispose(C);
}

// Largest bitcode first: the longest jobs start first, the short ones fill
// in (the order jobs are taken in changes no output).
static int
bigger(const void *x, const void *y)
{
	const Piece *a = *(Piece *const *)x, *b = *(Piece *const *)y;
	size_t na = LLVMGetBufferSize(a->bc), nb = LLVMGetBufferSize(b->bc);
	if (na != nb)
		return na > nb ? -1 : 1;
	return a->index < b->index ? -1 : a->index > b->index;
}

static int
write_object(const char *path, const uint8_t *p, size_t n, char *err, size_t errlen)
{
	FILE *f = fopen(path, "wb");
	int ok = f && fwrite(p, 1, n, f) == n;
	if (f && fclose(f))
		ok = 0;
	if (!ok)
		snprintf(err, errlen, "cannot write the object file %s", path);
	return ok;
}

// Whether module m defines anything (a piece no name hashed to is empty:
// no object).
static int
defines_something(LLVMModuleRef m)
{
	for (LLVMValueRef f = LLVMGetFirstFunction(m); f; f = LLVMGetNextFunction(f))
		if (!LLVMIsDeclaration(f))
			return 1;
	for (LLVMValueRef g = LLVMGetFirstGlobal(m); g; g = LLVMGetNextGlobal(g))
		if (!LLVMIsDeclaration(g))
			return 1;
	return 0;
}

// Module m as piece `index`: verified, written as bitcode, looked up in
// the cache, queued when it misses.  A module that defines nothing is no
// piece.  0 with err set on failure.
static int
add_piece(LlvmPieces *lp, LLVMModuleRef m, unsigned index, int level, char *err, size_t errlen)
{
	if (!defines_something(m))
		return 1;
	char *msg = NULL;
	if (LLVMVerifyModule(m, LLVMReturnStatusAction, &msg)) {
		snprintf(err, errlen, "LLVM: the generated module does not verify: %s",
		         msg ? msg : "(no message)");
		LLVMDisposeMessage(msg);
		return 0;
	}
	LLVMDisposeMessage(msg);
	FADC_ASSERT(lp->n < lp->cap, "llvm pieces: more pieces than modules");
	Piece *p = &lp->pc[lp->n];
	p->lp = lp;
	p->index = index;
	p->level = level;
	if (!(p->bc = LLVMWriteBitcodeToMemoryBuffer(m))) {
		snprintf(err, errlen, "LLVM: cannot write a piece's bitcode (out of memory?)");
		return 0;
	}
	lp->n++;
	// FADC_LLVM_DUMP=DIR (a profiling hook): each piece's bitcode as it is
	// keyed, DIR/pNNN-lL.bc, for opt and llc to time by pass or function.
	const char *dump = getenv("FADC_LLVM_DUMP");
	if (dump && *dump) {
		char path[4096];
		snprintf(path, sizeof path, "%s/p%03d-l%d.bc", dump, lp->n - 1, level);
		FILE *f = fopen(path, "wb");
		if (f) {
			fwrite(LLVMGetBufferStart(p->bc), 1, LLVMGetBufferSize(p->bc), f);
			fclose(f);
		}
	}
	// The key of a piece's object code: its bitcode (before optimization),
	// the target machine (triple, CPU level, features, opt level), the
	// pipeline and LLVM itself.  Not with --emit llvm, which wants the
	// optimized module printed (compile.c opens no cache then).
	const CgTarget *tg = lp->tg;
	const CgLevel *cl = &tg->level[level];
	if (tg->cache) {
		char lv[64];
		snprintf(lv, sizeof lv, "LLVM %s O%d", LLVM_VERSION_STRING, tg->opt_level);
		const char *feat = cl->features ? cl->features : "";
		CgSha256 s;
		cg_sha256_init(&s);
		cg_sha256_field(&s, "fadc compile cache: LLVM object", 31);
		cg_sha256_field(&s, lv, strlen(lv));
		cg_sha256_field(&s, lp->triple, strlen(lp->triple));
		cg_sha256_field(&s, cl->cpu, strlen(cl->cpu));
		cg_sha256_field(&s, feat, strlen(feat));
		cg_sha256_field(&s, lp->pipeline, strlen(lp->pipeline));
		cg_sha256_field(&s, LLVMGetBufferStart(p->bc), LLVMGetBufferSize(p->bc));
		cg_sha256_end(&s, p->key);
		uint8_t *b;
		size_t blen;
		p->hit = cg_cache_get(tg->cache, p->key, &p->obj, &p->objlen, &b, &blen);
		free(b);
	}
	lp->hits += p->hit;
	return 1;
}

// Queues the misses among pc[from ..), largest bitcode first: the longest
// jobs start first, the short ones fill in (the order jobs are taken in
// changes no output).
static void
queue_misses(LlvmPieces *lp, int from)
{
	Piece **job = calloc((size_t)(lp->n - from) + 1, sizeof *job);
	int nt = 0;
	for (int i = from; i < lp->n; i++)
		if (!lp->pc[i].hit)
			job[nt++] = &lp->pc[i];
	if (job) {
		qsort(job, (size_t)nt, sizeof *job, bigger);
		for (int i = 0; i < nt; i++)
			cg_pool_add(lp->pool, &lp->batch, compile_one, job[i], 1);
	} else // out of memory for the order: module order
		for (int i = from; i < lp->n; i++)
			if (!lp->pc[i].hit)
				cg_pool_add(lp->pool, &lp->batch, compile_one, &lp->pc[i], 1);
	free(job);
}

// FADC_LLVM_ARGS="-time-passes ..." hands LLVM's own command-line options
// to LLVM once, before any job runs (a profiling hook: -time-passes prints
// each pass's time per job on stderr; use FADC_JOBS=1).  The options are
// not in the cache's key: never set ones that change code for artifacts
// that are kept.
static void
llvm_args(void)
{
	static int done;
	const char *v = getenv("FADC_LLVM_ARGS");
	if (done || !v || !*v)
		return;
	done = 1;
	static char buf[1024];
	static const char *argv[32];
	int argc = 0;
	snprintf(buf, sizeof buf, "%s", v);
	argv[argc++] = "fadc";
	for (char *t = strtok(buf, " "); t && argc < 31; t = strtok(NULL, " "))
		argv[argc++] = t;
	LLVMParseCommandLineOptions(argc, argv, NULL);
}

LlvmPieces *
llvm_pieces_start(LLVMModuleRef *mods, unsigned nmods, unsigned maxmods, const CgTarget *tg,
                  const char *triple, FILE *emit_llvm, char *err, size_t errlen)
{
	LlvmPieces *lp = calloc(1, sizeof *lp);
	if (!lp || !(lp->pc = calloc(maxmods + 1, sizeof *lp->pc))) {
		free(lp);
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	llvm_args();
	lp->cap = (int)maxmods;
	lp->tg = tg;
	lp->emit_llvm = emit_llvm;
	snprintf(lp->triple, sizeof lp->triple, "%s", triple);
	int ol = tg->opt_level < 0 ? 2 : tg->opt_level > 3 ? 3 : tg->opt_level;
	snprintf(lp->pipeline, sizeof lp->pipeline, "default<O%d>", ol);
	lp->pool = tg->pool;
	if (!lp->pool) {
		long cores = sysconf(_SC_NPROCESSORS_ONLN);
		int nthreads = tg->jobs > 0 ? tg->jobs : cores > 0 ? (int)cores : 1;
		if (nthreads > (int)nmods)
			nthreads = (int)nmods;
		if (!(lp->pool = lp->own = cg_pool_new(nthreads, tg->progress, tg->progress_arg))) {
			llvm_pieces_end(lp);
			snprintf(err, errlen, "out of memory");
			return NULL;
		}
	}
	cg_pool_batch(lp->pool, &lp->batch, "LLVM pieces");
	KTime clk = kir_time_start();
	for (unsigned i = 0; i < nmods; i++)
		if (!add_piece(lp, mods[i], i, 0, err, errlen)) {
			llvm_pieces_end(lp);
			return NULL;
		}
	kir_time_note(clk, "verify+bitcode+cache", NULL);
	queue_misses(lp, 0);
	return lp;
}

// ---------------------------------------------------------------- levels

// What fn_wide (llvm.c) adds for AVX-512: compared without it.
static const char *const wide_attr[] = {"prefer-vector-width", "min-legal-vector-width"};
enum { NWIDE = 2 };
typedef char Wide[NWIDE][16]; // one function's values of them ("" for none)

// Takes the wide attributes off m's functions, saving them in w (one
// entry per function, module order; NULL on out of memory).
static Wide *
narrow(LLVMModuleRef m)
{
	int n = 0;
	for (LLVMValueRef f = LLVMGetFirstFunction(m); f; f = LLVMGetNextFunction(f))
		n++;
	Wide *w = calloc((size_t)n + 1, sizeof *w);
	int i = 0;
	for (LLVMValueRef f = LLVMGetFirstFunction(m); w && f; f = LLVMGetNextFunction(f), i++)
		for (int k = 0; k < NWIDE; k++) {
			unsigned kl = (unsigned)strlen(wide_attr[k]), vl;
			LLVMAttributeRef a = LLVMGetStringAttributeAtIndex(f, LLVMAttributeFunctionIndex,
			                                                   wide_attr[k], kl);
			if (!a)
				continue;
			const char *v = LLVMGetStringAttributeValue(a, &vl);
			snprintf(w[i][k], sizeof w[i][k], "%.*s", (int)vl, v);
			LLVMRemoveStringAttributeAtIndex(f, LLVMAttributeFunctionIndex, wide_attr[k], kl);
		}
	return w;
}

// Puts back what narrow(m) took (m's functions unchanged since), frees w.
static void
widen(LLVMModuleRef m, Wide *w)
{
	LLVMContextRef C = LLVMGetModuleContext(m);
	int i = 0;
	for (LLVMValueRef f = LLVMGetFirstFunction(m); w && f; f = LLVMGetNextFunction(f), i++)
		for (int k = 0; k < NWIDE; k++)
			if (w[i][k][0])
				LLVMAddAttributeAtIndex(
					f, LLVMAttributeFunctionIndex,
					LLVMCreateStringAttribute(C, wide_attr[k], (unsigned)strlen(wide_attr[k]),
				                              w[i][k], (unsigned)strlen(w[i][k])));
	free(w);
}

// Whether the feature list f ("avx2,fma,...") names x.
static int
lists(const char *f, const char *x)
{
	size_t n = strlen(x);
	for (const char *q = f; q && (q = strstr(q, x)); q += n)
		if ((q == f || q[-1] == ',') && (q[n] == ',' || q[n] == 0))
			return 1;
	return 0;
}

static int
cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int
cmp_ptr(const void *a, const void *b)
{
	uintptr_t x = (uintptr_t) * (void *const *)a, y = (uintptr_t) * (void *const *)b;
	return x < y ? -1 : x > y;
}

// Whether g is a definition other modules can see (external or hidden).
static int
exported(LLVMValueRef g)
{
	LLVMLinkage l = LLVMGetLinkage(g);
	return !LLVMIsDeclaration(g) && l != LLVMInternalLinkage && l != LLVMPrivateLinkage;
}

// Whether g is one definition every piece may hold, the link keeping one
// (weak_odr, linkonce_odr: the GEMM's thread-local scratch): a level does
// not rename it, and copies it where it is used, as an internal one.
static int
odr(LLVMValueRef g)
{
	LLVMLinkage l = LLVMGetLinkage(g);
	return l == LLVMWeakODRLinkage || l == LLVMLinkOnceODRLinkage;
}

// A module's definitions (functions, then globals) and, per definition,
// whether the level keeps it.
typedef struct Defs {
	LLVMValueRef *v; // sorted by address, for find()
	LLVMValueRef *order; // module order
	unsigned char *keep; // by index of order
	int n;
} Defs;

static int
find(const Defs *d, LLVMValueRef v)
{
	LLVMValueRef *p = bsearch(&v, d->v, (size_t)d->n, sizeof *d->v, cmp_ptr);
	if (!p)
		return -1;
	for (int i = 0; i < d->n; i++) // n is small: a piece's definitions
		if (d->order[i] == v)
			return i;
	return -1;
}

// Calls fn(d, owner, arg) for each definition of d whose body or
// initializer uses v (through constant expressions too).
static void
owners(const Defs *d, LLVMValueRef v, void (*fn)(const Defs *, int, void *), void *arg, int depth)
{
	for (LLVMUseRef u = LLVMGetFirstUse(v); u; u = LLVMGetNextUse(u)) {
		LLVMValueRef user = LLVMGetUser(u);
		int o = -1;
		if (LLVMIsAInstruction(user))
			o = find(d, LLVMGetBasicBlockParent(LLVMGetInstructionParent(user)));
		else if (LLVMIsAGlobalVariable(user) || LLVMIsAFunction(user))
			o = find(d, user);
		else if (LLVMIsAConstant(user) && depth < 8)
			owners(d, user, fn, arg, depth + 1);
		if (o >= 0)
			fn(d, o, arg);
	}
}

static void
mark(const Defs *d, int o, void *changed)
{
	if (!d->keep[o]) {
		d->keep[o] = 1;
		*(int *)changed = 1;
	}
}

static void
mark_if_kept(const Defs *d, int o, void *hit)
{
	if (d->keep[o])
		*(int *)hit = 1;
}

static void
defs_free(Defs *d)
{
	free(d->v);
	free(d->order);
	free(d->keep);
	memset(d, 0, sizeof *d);
}

// A module's printed IR cut into its definitions: each function from its
// `define` line to its closing `}`, each global its `@name = ...` line.
// (Printed once a module: printing one function at a time numbers the
// whole module again for each.)
typedef struct Chunk {
	const char *name; // into the text, nlen bytes (as printed: quoted names stay quoted)
	size_t nlen;
	const char *at; // the definition's text, len bytes
	size_t len;
} Chunk;
typedef struct Text {
	char *s; // LLVM's (LLVMDisposeMessage)
	Chunk *c;
	int n;
} Text;

static void
text_free(Text *t)
{
	if (t->s)
		LLVMDisposeMessage(t->s);
	free(t->c);
	memset(t, 0, sizeof *t);
}

// The name after '@' at p: up to '(' or ' ' (quoted: to the closing quote).
static const char *
name_end(const char *p)
{
	if (*p == '"') {
		const char *q = strchr(p + 1, '"');
		return q ? q + 1 : p;
	}
	while (*p && *p != '(' && *p != ' ' && *p != '\n')
		p++;
	return p;
}

static int
text_fill(Text *t, LLVMModuleRef m)
{
	t->s = LLVMPrintModuleToString(m);
	int cap = 0;
	for (const char *p = t->s; p && *p;) {
		const char *eol = strchr(p, '\n');
		const char *next = eol ? eol + 1 : p + strlen(p);
		Chunk k = {0};
		if (!strncmp(p, "define ", 7)) {
			const char *at = memchr(p, '@', (size_t)(next - p));
			const char *end = strstr(p, "\n}\n");
			if (!at || !end)
				return 0;
			k = (Chunk){at + 1, (size_t)(name_end(at + 1) - (at + 1)), p, (size_t)(end + 3 - p)};
			next = end + 3;
		} else if (*p == '@') {
			k = (Chunk){p + 1, (size_t)(name_end(p + 1) - (p + 1)), p, (size_t)(next - p)};
		}
		if (k.name) {
			if (t->n == cap) {
				cap = cap ? 2 * cap : 64;
				Chunk *nc = realloc(t->c, (size_t)cap * sizeof *nc);
				if (!nc)
					return 0;
				t->c = nc;
			}
			t->c[t->n++] = k;
		}
		p = next;
	}
	return t->s != NULL;
}

// The printed definition named name (unquoted names only), or NULL.
static const Chunk *
text_find(const Text *t, const char *name, size_t len)
{
	for (int i = 0; i < t->n; i++)
		if (t->c[i].nlen == len && !memcmp(t->c[i].name, name, len))
			return &t->c[i];
	return NULL;
}

// d: the definitions of m, each kept when its IR differs from that of m0's
// definition of its name (wide attributes aside; m0 NULL: m's bitcode is
// m0's, nothing differs).  0 on out of memory.
static int
defs_fill(Defs *d, LLVMModuleRef m, LLVMModuleRef m0)
{
	int n = 0;
	for (int pass = 0; pass < 2; pass++)
		for (LLVMValueRef g = pass ? LLVMGetFirstGlobal(m) : LLVMGetFirstFunction(m); g;
		     g = pass ? LLVMGetNextGlobal(g) : LLVMGetNextFunction(g))
			n += !LLVMIsDeclaration(g);
	d->v = calloc((size_t)n + 1, sizeof *d->v);
	d->order = calloc((size_t)n + 1, sizeof *d->order);
	d->keep = calloc((size_t)n + 1, 1);
	if (!d->v || !d->order || !d->keep)
		return 0;
	for (int pass = 0; pass < 2; pass++)
		for (LLVMValueRef g = pass ? LLVMGetFirstGlobal(m) : LLVMGetFirstFunction(m); g;
		     g = pass ? LLVMGetNextGlobal(g) : LLVMGetNextFunction(g))
			if (!LLVMIsDeclaration(g))
				d->order[d->n++] = g;
	memcpy(d->v, d->order, (size_t)n * sizeof *d->v);
	qsort(d->v, (size_t)n, sizeof *d->v, cmp_ptr);
	if (!m0)
		return 1;
	Wide *w = narrow(m);
	Text a = {0}, b = {0};
	int ok = w && text_fill(&a, m) && text_fill(&b, m0);
	widen(m, w);
	// A definition differs when its text is not m0's of the same name (a
	// name printed quoted is not found: it differs, to be safe).
	for (int i = 0; ok && i < n; i++) {
		size_t len;
		const char *nm = LLVMGetValueName2(d->order[i], &len);
		const Chunk *x = text_find(&a, nm, len), *y = text_find(&b, nm, len);
		d->keep[i] = !x || !y || x->len != y->len || memcmp(x->at, y->at, x->len);
	}
	text_free(&a);
	text_free(&b);
	return ok;
}

// Drops what d does not keep from m: each such definition replaced by a
// declaration (RAUW) and deleted; the declarations left unused go too, the
// used ones (exported functions of level 0, by their names) stay.
// Returns how many definitions stay, -1 on out of memory.
static int
defs_apply(const Defs *d, LLVMModuleRef m)
{
	int n = d->n, kept = 0;
	LLVMValueRef *decl = calloc((size_t)n + 1, sizeof *decl);
	if (!decl)
		return -1;
	for (int i = 0; i < n; i++) {
		LLVMValueRef g = d->order[i];
		if (d->keep[i]) {
			kept++;
			continue;
		}
		LLVMTypeRef t = LLVMGlobalGetValueType(g);
		decl[i] = LLVMIsAFunction(g) ? LLVMAddFunction(m, "", t) : LLVMAddGlobal(m, t, "");
		LLVMSetVisibility(decl[i], LLVMHiddenVisibility);
		LLVMReplaceAllUsesWith(g, decl[i]);
	}
	for (int i = 0; i < n; i++)
		if (decl[i]) {
			size_t len;
			char *name = strdup(LLVMGetValueName2(d->order[i], &len));
			if (LLVMIsAFunction(d->order[i]))
				LLVMDeleteFunction(d->order[i]);
			else
				LLVMDeleteGlobal(d->order[i]);
			if (name)
				LLVMSetValueName2(decl[i], name, len);
			free(name);
		}
	for (int i = 0; i < n; i++)
		if (decl[i] && !LLVMGetFirstUse(decl[i])) {
			if (LLVMIsAFunction(decl[i]))
				LLVMDeleteFunction(decl[i]);
			else
				LLVMDeleteGlobal(decl[i]);
		}
	free(decl);
	return kept;
}

// Appends the names of d's kept exported definitions to *names (sorted
// afterwards by the caller).  0 on out of memory.
static int
kept_names(const Defs *d, char ***names, int *n, int *cap)
{
	for (int i = 0; i < d->n; i++) {
		if (!d->keep[i] || !exported(d->order[i]) || odr(d->order[i]))
			continue;
		if (*n == *cap) {
			*cap = *cap ? 2 * *cap : 64;
			char **nn = realloc(*names, (size_t)*cap * sizeof **names);
			if (!nn)
				return 0;
			*names = nn;
		}
		size_t len;
		if (!((*names)[(*n)++] = strdup(LLVMGetValueName2(d->order[i], &len))))
			return 0;
	}
	return 1;
}

// Renames every global value of m named in names[0..n) (sorted) NAME.SUFFIX.
static void
rename_in(LLVMModuleRef m, char **names, int n, const char *suffix)
{
	for (int pass = 0; pass < 2; pass++)
		for (LLVMValueRef g = pass ? LLVMGetFirstGlobal(m) : LLVMGetFirstFunction(m); g;
		     g = pass ? LLVMGetNextGlobal(g) : LLVMGetNextFunction(g)) {
			size_t len;
			const char *nm = LLVMGetValueName2(g, &len);
			if (!len || !bsearch(&nm, names, (size_t)n, sizeof *names, cmp_str))
				continue;
			char *to = malloc(len + strlen(suffix) + 2);
			FADC_ASSERT(to != NULL, "llvm pieces: out of memory");
			sprintf(to, "%s.%s", nm, suffix);
			LLVMSetValueName2(g, to, strlen(to));
			free(to);
		}
}

int
llvm_pieces_level(LlvmPieces *lp, LLVMModuleRef *mods, LLVMModuleRef *mods0, unsigned nmods,
                  int level, const char *const *task, int ntask, char **taskname, char *err,
                  size_t errlen)
{
	const CgTarget *tg = lp->tg;
	FADC_ASSERT(level > 0 && level < tg->nlevel, "llvm pieces: no such level");
	const char *f0 = tg->level[0].cpu_features;
	int share = f0 && lists(f0, "avx2"); // below AVX2 every piece is the level's own
	Defs *d = calloc(nmods + 1, sizeof *d);
	char **names = NULL;
	int nnames = 0, cnames = 0, kept = 0, from = lp->n;
	if (!d)
		goto oom;
	// What differs from level 0: nothing of a module whose bitcode is level
	// 0's (the fast path), else each definition printed otherwise; every
	// definition below AVX2.
	for (unsigned i = 0; i < nmods; i++) {
		if (!defines_something(mods[i]))
			continue;
		const Piece *p0 = NULL;
		for (int j = 0; j < lp->n && !p0; j++)
			if (lp->pc[j].level == 0 && lp->pc[j].index == i)
				p0 = &lp->pc[j];
		int same = 0;
		if (share && p0) {
			Wide *w = narrow(mods[i]);
			LLVMMemoryBufferRef bc = w ? LLVMWriteBitcodeToMemoryBuffer(mods[i]) : NULL;
			widen(mods[i], w);
			if (!bc)
				goto oom;
			size_t n = LLVMGetBufferSize(bc);
			same = n == LLVMGetBufferSize(p0->bc) &&
			       !memcmp(LLVMGetBufferStart(bc), LLVMGetBufferStart(p0->bc), n);
			LLVMDisposeMemoryBuffer(bc);
		}
		if (!defs_fill(&d[i], mods[i], same ? NULL : mods0[i]))
			goto oom;
		if (!share || !p0)
			memset(d[i].keep, 1, (size_t)d[i].n);
	}
	// Up, across the modules: whatever uses a kept definition is kept (it
	// must call this level's), through the declarations of other modules'
	// exported ones by name; then down, in each module: the internal
	// definitions a kept one uses (copies: level 0's cannot be reached).
	for (int changed = 1; changed;) {
		changed = 0;
		for (unsigned i = 0; i < nmods; i++)
			for (int k = 0; k < d[i].n; k++)
				if (d[i].keep[k])
					owners(&d[i], d[i].order[k], mark, &changed, 0);
		for (int k = 0; k < nnames; k++)
			free(names[k]);
		nnames = 0;
		for (unsigned i = 0; i < nmods; i++)
			if (!kept_names(&d[i], &names, &nnames, &cnames))
				goto oom;
		if (nnames)
			qsort(names, (size_t)nnames, sizeof *names, cmp_str);
		for (unsigned i = 0; nnames && i < nmods; i++)
			for (LLVMValueRef f = d[i].n ? LLVMGetFirstFunction(mods[i]) : NULL; f;
			     f = LLVMGetNextFunction(f)) {
				size_t len;
				const char *nm = LLVMGetValueName2(f, &len);
				if (LLVMIsDeclaration(f) &&
				    bsearch(&nm, names, (size_t)nnames, sizeof *names, cmp_str))
					owners(&d[i], f, mark, &changed, 0);
			}
	}
	for (unsigned i = 0; i < nmods; i++)
		for (int changed = 1; changed;) {
			changed = 0;
			for (int k = 0; k < d[i].n; k++) {
				int hit = 0;
				if (d[i].keep[k] || (exported(d[i].order[k]) && !odr(d[i].order[k])))
					continue;
				owners(&d[i], d[i].order[k], mark_if_kept, &hit, 0);
				if (hit) {
					d[i].keep[k] = 1;
					changed = 1;
				}
			}
		}
	const char *cpu = tg->level[level].cpu;
	for (int i = 0; i < ntask; i++) { // the entry's names: renamed, or level 0's
		int own = nnames && bsearch(&task[i], names, (size_t)nnames, sizeof *names, cmp_str);
		if (!(taskname[i] = malloc(strlen(task[i]) + strlen(cpu) + 2)))
			goto oom;
		sprintf(taskname[i], own ? "%s.%s" : "%s", task[i], cpu);
	}
	// The kept definitions renamed (with the declarations of them), the rest
	// dropped; the modules with something left are the level's pieces.
	for (unsigned i = 0; i < nmods; i++) {
		int k = d[i].n ? defs_apply(&d[i], mods[i]) : 0;
		if (k < 0)
			goto oom;
		if (!k)
			continue;
		rename_in(mods[i], names, nnames, cpu);
		if (!add_piece(lp, mods[i], i, level, err, errlen)) {
			kept = -1;
			goto done;
		}
		kept++;
	}
	if (kept > 0)
		queue_misses(lp, from);
	goto done;
oom:
	snprintf(err, errlen, "out of memory");
	kept = -1;
done:
	for (int i = 0; i < nnames; i++)
		free(names[i]);
	free(names);
	for (unsigned i = 0; d && i < nmods; i++)
		defs_free(&d[i]);
	free(d);
	return kept;
}

int
llvm_pieces_finish(LlvmPieces *lp, LLVMModuleRef last, unsigned index, const char *prefix,
                   int *nobj, char *err, size_t errlen)
{
	*nobj = 0;
	int from = lp->n;
	if (last && !add_piece(lp, last, index, 0, err, errlen))
		return 0;
	queue_misses(lp, from);
	if (lp->tg->cache) {
		char note[96];
		snprintf(note, sizeof note, "%d of %d pieces hit", lp->hits, lp->n);
		kir_time_note(kir_time_start(), "llvm cache", note);
	}
	cg_pool_wait(lp->pool, &lp->batch);
	// Each job's span and CPU on its own thread's clock: NVRTC's programs
	// may run beside them on the same pool.
	KTime t = kir_time_start();
	int nth = cg_pool_threads(lp->pool);
	if (t.on && lp->batch.total)
		fprintf(stderr,
		        "fadc: time: optimize+codegen %ld pieces on %ld threads: %.3f s wall, %.3f s cpu "
		        "(its jobs)\n",
		        lp->batch.total, nth < lp->batch.total ? nth : lp->batch.total,
		        lp->batch.last - lp->batch.first, lp->batch.cpu);
	if (t.on) { // where the jobs' CPU goes: the optimizer or the code generator
		double o = 0, g = 0;
		for (int i = 0; i < lp->n; i++)
			o += lp->pc[i].opt_cpu, g += lp->pc[i].cg_cpu;
		if (o + g > 0)
			fprintf(stderr, "fadc: time: llvm jobs: optimize %.3f s cpu, codegen %.3f s cpu\n", o,
			        g);
		const char *v = getenv("FADC_TIME");
		for (int i = 0; v && !strcmp(v, "pieces") && i < lp->n; i++)
			if (!lp->pc[i].hit)
				fprintf(stderr,
				        "fadc: time: piece %d (level %d, module %u): %zu bytes of bitcode, "
				        "optimize %.3f s cpu, codegen %.3f s cpu\n",
				        i, lp->pc[i].level, lp->pc[i].index, LLVMGetBufferSize(lp->pc[i].bc),
				        lp->pc[i].opt_cpu, lp->pc[i].cg_cpu);
	}
	Piece *f = NULL; // the first failure in piece order: the same message every time
	for (int i = 0; i < lp->n && !f; i++)
		if (lp->pc[i].failed)
			f = &lp->pc[i];
	if (f) {
		snprintf(err, errlen, "%s", f->err);
		return 0;
	}
	// The files, in piece order; the misses stored.
	KTime clk = kir_time_start();
	for (int i = 0; i < lp->n; i++) {
		char path[4200];
		snprintf(path, sizeof path, "%s.%d.o", prefix, i);
		if (!write_object(path, lp->pc[i].obj, lp->pc[i].objlen, err, errlen))
			return 0;
		*nobj = i + 1;
		if (!lp->pc[i].hit && lp->tg->cache)
			cg_cache_put(lp->tg->cache, lp->pc[i].key, lp->pc[i].obj, lp->pc[i].objlen,
			             (const uint8_t *)"", 0);
	}
	kir_time_note(clk, "write objects", NULL);
	return 1;
}

void
llvm_pieces_end(LlvmPieces *lp)
{
	if (!lp)
		return;
	if (lp->pool) { // no job may outlive its piece
		cg_pool_cancel(lp->pool, &lp->batch);
		cg_pool_wait(lp->pool, &lp->batch);
		cg_pool_unbatch(lp->pool, &lp->batch);
	}
	cg_pool_free(lp->own);
	for (int i = 0; i < lp->n; i++) {
		LLVMDisposeMemoryBuffer(lp->pc[i].bc);
		free(lp->pc[i].obj);
	}
	free(lp->pc);
	free(lp);
}
