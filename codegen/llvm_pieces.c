// codegen/llvm_pieces.c -- the LLVM backend's pieces compiled on threads
// and cached one by one (docs/CODEGEN.md "Compile time", docs/CUDA.md "The
// compile cache").  llvm.c emits the module as pieces in one LLVM context
// (which is not thread-safe); here each piece is
//
//   verified, written as bitcode (in the emitting thread)
//   -> its key: SHA-256 of the bitcode, the target and LLVM's version
//   -> a cache hit gives its object code; a miss is a job:
//      parsed from the bitcode into a context of the job's own thread,
//      optimized (default<On>) and compiled with a target machine of
//      that thread's own, the object kept in memory
//   -> the objects written in piece order, the misses stored.
//
// Why this is deterministic: a job's input is the bitcode and nothing
// else (every piece, hit or miss, one thread or many, is compiled from
// its parsed bitcode, never from the emitting context's module, whose
// use-lists may be ordered otherwise), a job shares nothing with the
// others, and the files are written in piece order after every job is
// done.  So the objects, and the linked .so, are the same bytes whatever
// the number of threads, their timing, and the cache.
#include <pthread.h>
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

typedef struct Piece {
	unsigned index; // of the piece among the modules
	LLVMMemoryBufferRef bc; // its bitcode
	uint8_t key[32];
	uint8_t *obj; // its object code (malloc'ed): from the cache or a job
	size_t objlen;
	int hit;
	int failed;
	char err[1024];
} Piece;

typedef struct Jobs {
	Piece **job; // the misses, largest first
	int n;
	int next; // the next job to take (under mu)
	int done; // jobs done (under mu): the progress
	pthread_mutex_t mu;
	const CgTarget *tg;
	const char *triple, *pipeline;
	FILE *emit_llvm;
} Jobs;

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
compile_one(Jobs *js, Piece *p)
{
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

static void *
worker(void *arg)
{
	Jobs *js = arg;
	for (;;) {
		pthread_mutex_lock(&js->mu);
		int i = js->next < js->n ? js->next++ : -1;
		pthread_mutex_unlock(&js->mu);
		if (i < 0)
			return NULL;
		compile_one(js, js->job[i]);
		pthread_mutex_lock(&js->mu);
		js->done++;
		if (js->tg->progress)
			js->tg->progress(js->tg->progress_arg, "LLVM pieces", js->done, js->n);
		pthread_mutex_unlock(&js->mu);
	}
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

int
llvm_compile_pieces(LLVMModuleRef *mods, unsigned nmods, const CgTarget *tg, const char *triple,
                    FILE *emit_llvm, const char *prefix, int *nobj, char *err, size_t errlen)
{
	*nobj = 0;
	int ok = 0;
	char *msg = NULL;
	Piece *pc = calloc(nmods + 1, sizeof *pc);
	Piece **job = calloc(nmods + 1, sizeof *job);
	pthread_t *th = NULL;
	int n = 0, nt = 0;
	if (!pc || !job) {
		snprintf(err, errlen, "out of memory");
		goto done;
	}
	KTime clk = kir_time_start();
	for (unsigned i = 0; i < nmods; i++) {
		if (!defines_something(mods[i]))
			continue;
		if (LLVMVerifyModule(mods[i], LLVMReturnStatusAction, &msg)) {
			snprintf(err, errlen, "LLVM: the generated module does not verify: %s",
			         msg ? msg : "(no message)");
			goto done;
		}
		LLVMDisposeMessage(msg);
		msg = NULL;
		pc[n].index = i;
		if (!(pc[n].bc = LLVMWriteBitcodeToMemoryBuffer(mods[i]))) {
			snprintf(err, errlen, "LLVM: cannot write a piece's bitcode (out of memory?)");
			goto done;
		}
		n++;
	}
	char pipeline[32];
	int ol = tg->opt_level < 0 ? 2 : tg->opt_level > 3 ? 3 : tg->opt_level;
	snprintf(pipeline, sizeof pipeline, "default<O%d>", ol);
	kir_time_note(clk, "verify+bitcode", NULL);
	// The key of a piece's object code: its bitcode (before optimization),
	// the target machine (triple, CPU, features, level), the pipeline and
	// LLVM itself.  Not with --emit llvm, which wants the optimized module
	// printed (compile.c opens no cache then).
	clk = kir_time_start();
	int hits = 0;
	for (int i = 0; i < n; i++) {
		Piece *p = &pc[i];
		if (tg->cache) {
			char lv[64];
			snprintf(lv, sizeof lv, "LLVM %s O%d", LLVM_VERSION_STRING, tg->opt_level);
			const char *feat = tg->features ? tg->features : "";
			CgSha256 s;
			cg_sha256_init(&s);
			cg_sha256_field(&s, "fadc compile cache: LLVM object", 31);
			cg_sha256_field(&s, lv, strlen(lv));
			cg_sha256_field(&s, triple, strlen(triple));
			cg_sha256_field(&s, tg->cpu, strlen(tg->cpu));
			cg_sha256_field(&s, feat, strlen(feat));
			cg_sha256_field(&s, pipeline, strlen(pipeline));
			cg_sha256_field(&s, LLVMGetBufferStart(p->bc), LLVMGetBufferSize(p->bc));
			cg_sha256_end(&s, p->key);
			uint8_t *b;
			size_t blen;
			p->hit = cg_cache_get(tg->cache, p->key, &p->obj, &p->objlen, &b, &blen);
			free(b);
		}
		if (p->hit)
			hits++;
		else
			job[nt++] = p;
	}
	char note[96];
	snprintf(note, sizeof note, "%d of %d pieces hit", hits, n);
	if (tg->cache)
		kir_time_note(clk, "cache", note);
	// The misses on threads: the calling one and up to jobs - 1 more.
	clk = kir_time_start();
	qsort(job, (size_t)nt, sizeof *job, bigger);
	Jobs js = {job, nt, 0, 0, PTHREAD_MUTEX_INITIALIZER, tg, triple, pipeline, emit_llvm};
	if (nt && tg->progress)
		tg->progress(tg->progress_arg, "LLVM pieces", 0, nt);
	long cores = sysconf(_SC_NPROCESSORS_ONLN);
	int nthreads = tg->jobs > 0 ? tg->jobs : cores > 0 ? (int)cores : 1;
	if (nthreads > nt)
		nthreads = nt;
	int started = 0;
	if (nthreads > 1 && (th = calloc((size_t)nthreads, sizeof *th)))
		for (int i = 1; i < nthreads; i++)
			if (pthread_create(&th[started], NULL, worker, &js) == 0)
				started++;
	worker(&js); // the calling thread works too (and alone when threads fail)
	for (int i = 0; i < started; i++)
		pthread_join(th[i], NULL);
	pthread_mutex_destroy(&js.mu);
	snprintf(note, sizeof note, "%d pieces on %d threads", nt, started + (nt > 0));
	kir_time_note(clk, "optimize+codegen", note);
	for (int i = 0; i < nt; i++)
		if (job[i]->failed) { // the first in piece order: the same message every time
			Piece *f = job[i];
			for (int k = 0; k < nt; k++)
				if (job[k]->failed && job[k]->index < f->index)
					f = job[k];
			snprintf(err, errlen, "%s", f->err);
			goto done;
		}
	// The files, in piece order; the misses stored.
	clk = kir_time_start();
	for (int i = 0; i < n; i++) {
		char path[4200];
		snprintf(path, sizeof path, "%s.%d.o", prefix, i);
		if (!write_object(path, pc[i].obj, pc[i].objlen, err, errlen))
			goto done;
		*nobj = i + 1;
		if (!pc[i].hit && tg->cache)
			cg_cache_put(tg->cache, pc[i].key, pc[i].obj, pc[i].objlen, (const uint8_t *)"", 0);
	}
	kir_time_note(clk, "write objects", NULL);
	ok = 1;
done:
	if (msg)
		LLVMDisposeMessage(msg);
	for (int i = 0; pc && i < n; i++) {
		LLVMDisposeMemoryBuffer(pc[i].bc);
		free(pc[i].obj);
	}
	free(pc);
	free(job);
	free(th);
	return ok;
}
