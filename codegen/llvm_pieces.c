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
// Why this is deterministic: a job's input is the bitcode and nothing
// else (every piece, hit or miss, one thread or many, is compiled from
// its parsed bitcode, never from the emitting context's module, whose
// use-lists may be ordered otherwise), a job shares nothing with the
// others, and the files are written in piece order after every job is
// done.  So the objects, and the linked .so, are the same bytes whatever
// the number of threads, their timing, and the cache.
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <llvm-c/Analysis.h>
#include <llvm-c/BitReader.h>
#include <llvm-c/BitWriter.h>
#include <llvm/Config/llvm-config.h> // LLVM_VERSION_STRING: plain C macros
#include <llvm-c/Core.h>
#include <llvm-c/Error.h>
#include <llvm-c/Target.h>
#include <llvm-c/TargetMachine.h>
#include <llvm-c/Transforms/PassBuilder.h>

#include "codegen.h"
#include "llvm_impl.h"

typedef struct LlvmPieces LlvmPieces;

typedef struct Piece {
	LlvmPieces *lp; // what every piece's job shares (read only)
	unsigned index; // of the piece among the modules
	LLVMMemoryBufferRef bc; // its bitcode
	uint8_t key[32];
	uint8_t *obj; // its object code (malloc'ed): from the cache or a job
	size_t objlen;
	int hit;
	int failed;
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

// One job: the piece's bitcode to object code, in an LLVM context and with
// a target machine of this call's own.
static void
compile_one(void *arg)
{
	Piece *p = arg;
	const LlvmPieces *js = p->lp;
	const CgTarget *tg = js->tg;
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
	tm = LLVMCreateTargetMachine(target, js->triple, tg->cpu, tg->features ? tg->features : "", lvl,
	                             LLVMRelocPIC, LLVMCodeModelDefault);
	if (!tm) {
		snprintf(p->err, sizeof p->err, "LLVM: cannot create a target machine for %s, cpu %s",
		         js->triple, tg->cpu);
		p->failed = 1;
		goto done;
	}
	po = LLVMCreatePassBuilderOptions();
	LLVMPassBuilderOptionsSetLoopVectorization(po, 1);
	LLVMPassBuilderOptionsSetSLPVectorization(po, 1);
	LLVMErrorRef er = LLVMRunPasses(M, js->pipeline, tm, po);
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
	if (LLVMTargetMachineEmitToMemoryBuffer(tm, M, LLVMObjectFile, &msg, &ob)) {
		fail_msg(p, "emitting the object file", msg);
		goto done;
	}
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
add_piece(LlvmPieces *lp, LLVMModuleRef m, unsigned index, char *err, size_t errlen)
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
	if (!(p->bc = LLVMWriteBitcodeToMemoryBuffer(m))) {
		snprintf(err, errlen, "LLVM: cannot write a piece's bitcode (out of memory?)");
		return 0;
	}
	lp->n++;
	// The key of a piece's object code: its bitcode (before optimization),
	// the target machine (triple, CPU, features, level), the pipeline and
	// LLVM itself.  Not with --emit llvm, which wants the optimized module
	// printed (compile.c opens no cache then).
	const CgTarget *tg = lp->tg;
	if (tg->cache) {
		char lv[64];
		snprintf(lv, sizeof lv, "LLVM %s O%d", LLVM_VERSION_STRING, tg->opt_level);
		const char *feat = tg->features ? tg->features : "";
		CgSha256 s;
		cg_sha256_init(&s);
		cg_sha256_field(&s, "fadc compile cache: LLVM object", 31);
		cg_sha256_field(&s, lv, strlen(lv));
		cg_sha256_field(&s, lp->triple, strlen(lp->triple));
		cg_sha256_field(&s, tg->cpu, strlen(tg->cpu));
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
		if (!add_piece(lp, mods[i], i, err, errlen)) {
			llvm_pieces_end(lp);
			return NULL;
		}
	kir_time_note(clk, "verify+bitcode+cache", NULL);
	queue_misses(lp, 0);
	return lp;
}

int
llvm_pieces_finish(LlvmPieces *lp, LLVMModuleRef last, unsigned index, const char *prefix,
                   int *nobj, char *err, size_t errlen)
{
	*nobj = 0;
	int from = lp->n;
	if (last && !add_piece(lp, last, index, err, errlen))
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
