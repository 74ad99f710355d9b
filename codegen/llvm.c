// codegen/llvm.c -- the LLVM CPU backend: kernel IR to an object file,
// through the LLVM 14 C API.  With llvm_math.c (the vector math library),
// llvm_gemm.c (the blocked GEMM) and llvm_impl.h (what the three share),
// the only files of fadc that include llvm-c/*.
//
// Each kernel becomes an internal function taking one pointer per buffer
// it touches, all `noalias` (the memory plan never gives a kernel's output
// the bytes of a buffer it reads, and the runtime refuses outputs that
// overlap inputs), so the optimizer may vectorize and reorder freely.  Its
// body is the loop nest of the kernel: a while-loop per parallel axis,
// then per reduction axis, counters and the accumulator in allocas that
// mem2reg promotes.  Expressions are emitted once per "region" (the
// innermost block where they are evaluated), memoized by KxId, so a value
// shared by hash-consing is computed once per point.
//
// Two loop shapes depart from the plain nest, for speed, both checked
// against the interpreter: contractions whose operands step by 0 or 1
// element along the last output axis put that axis innermost and
// accumulate in the output (same summation order, vectorizable), and float
// sums over 32 or more terms use 8 accumulators (emit_split_sum).  Two
// more live in their own files: contractions that fit the blocked GEMM run
// as its register tiles (llvm_gemm.c), and exp, log, tanh, erf, lgamma,
// ... in loops that vectorize call the vector math library (llvm_math.c).
//
// Each task becomes an internal function `i32 (fadc_call_v1 *)` that
// computes the buffer pointers (inputs and outputs from the call, the
// temporaries at their planned offsets in the arena) and calls its
// kernels; being internal with one call site, the kernels of a small task
// are inlined, so it is one straight function (a big one keeps a function
// per kernel: INLINE_MAX_KERNELS, and calls them from a constant table
// walked by a loop, "call tables" below).  The only exported symbol is
// fadc_artifact_v1 (runtime/abi.h), returning the table of tasks and the
// descriptor.  The module is emitted as pieces, compiled on threads and
// cached one by one (llvm_pieces.c, "pieces" below); functions called
// across pieces are hidden, not exported.
//
// Large kernels are split for the runtime's thread pool ("parallel
// kernels" below, docs/CODEGEN.md): such a kernel takes a range [lo, hi)
// of its outer iterations, a chunk function unpacks its arguments, and the
// task function hands both to fadc_call_v1.exec's parallel_for (or runs
// the whole range itself when exec is NULL).  Small kernels are unchanged.
//
// LLVM failures go through one checked path, llvm_fail(), with LLVM's own
// message.  Each piece is verified before optimization (default<O2> of the
// new pass manager, LLVMRunPasses) and its object is emitted for the
// requested CPU with position-independent code (llvm_pieces.c).
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <llvm/Config/llvm-config.h> // LLVM_VERSION_STRING: plain C macros
#include <llvm-c/Core.h>
#include <llvm-c/Error.h>
#include <llvm-c/Target.h>
#include <llvm-c/TargetMachine.h>

#include "abi.h"
#include "artifact.h"
#include "codegen.h"
#include "llvm_impl.h"

// ---------------------------------------------------------------- errors

// The one checked path for LLVM failures: `what` says what fadc was doing,
// msg is LLVM's message (disposed here).
static int
llvm_fail(char *err, size_t errlen, const char *what, char *msg)
{
	if (errlen)
		snprintf(err, errlen, "LLVM: %s: %s", what, msg ? msg : "(no message)");
	if (msg)
		LLVMDisposeMessage(msg);
	return 0;
}

// ---------------------------------------------------------------- targets

// The x86-64 micro-architecture levels (psABI): the features LLVM enables
// for each, by LLVM's names, which the runtime checks with cpuid.
static const char V1[] = "sse2";
static const char V2[] = "sse2,sse3,ssse3,sse4.1,sse4.2,popcnt,cx16,sahf";
static const char V3[] =
	"sse2,sse3,ssse3,sse4.1,sse4.2,popcnt,cx16,sahf,avx,avx2,bmi,bmi2,f16c,fma,lzcnt,movbe,xsave";
static const char V4[] = "sse2,sse3,ssse3,sse4.1,sse4.2,popcnt,cx16,sahf,avx,avx2,bmi,bmi2,f16c,"
                         "fma,lzcnt,movbe,xsave,avx512f,avx512dq,avx512cd,avx512bw,avx512vl";

char *
cg_llvm_default_triple(void)
{
	char *t = LLVMGetDefaultTargetTriple();
	char *r = strdup(t);
	LLVMDisposeMessage(t);
	return r;
}

static int
host_is_x86_64(void)
{
	char *t = LLVMGetDefaultTargetTriple();
	int r = !strncmp(t, "x86_64", 6);
	LLVMDisposeMessage(t);
	return r;
}

int
cg_llvm_cpu(const char *cpu, char *name, size_t nname, char *features, size_t nfeat,
            char *llvm_features, size_t nllvm, char *err, size_t errlen)
{
	if (!cpu)
		cpu = "x86-64-v3";
	snprintf(llvm_features, nllvm, "%s", "");
	if (!host_is_x86_64()) {
		if (strcmp(cpu, "generic") && strcmp(cpu, "native")) {
			snprintf(err, errlen, "--cpu %s: this host is not x86-64 (use generic or native)", cpu);
			return 0;
		}
		snprintf(name, nname, "generic");
		snprintf(features, nfeat, "%s", "");
		return 1;
	}
	const char *list = NULL, *llvm_name = cpu;
	if (!strcmp(cpu, "x86-64") || !strcmp(cpu, "generic")) {
		llvm_name = "x86-64";
		list = V1;
	} else if (!strcmp(cpu, "x86-64-v2"))
		list = V2;
	else if (!strcmp(cpu, "x86-64-v3"))
		list = V3;
	else if (!strcmp(cpu, "x86-64-v4"))
		list = V4;
	if (list) {
		snprintf(name, nname, "%s", llvm_name);
		snprintf(features, nfeat, "%s", list);
		return 1;
	}
	if (strcmp(cpu, "native")) {
		snprintf(err, errlen,
		         "unknown --cpu '%s' (x86-64, x86-64-v2, x86-64-v3, x86-64-v4, generic, native)",
		         cpu);
		return 0;
	}
	// The host's CPU and every feature LLVM sees on it; the runtime checks
	// the ones it can detect.
	char *hn = LLVMGetHostCPUName(), *hf = LLVMGetHostCPUFeatures();
	snprintf(name, nname, "%s", hn);
	snprintf(llvm_features, nllvm, "%s", hf);
	size_t k = 0;
	features[0] = 0;
	for (const char *s = hf; s && *s;) {
		const char *c = strchr(s, ',');
		size_t n = c ? (size_t)(c - s) : strlen(s);
		char f[64];
		if (n > 1 && n < sizeof f && s[0] == '+') {
			memcpy(f, s + 1, n - 1);
			f[n - 1] = 0;
			if (rt_cpu_feature_index(f) >= 0 && k < nfeat)
				k += (size_t)snprintf(features + k, nfeat - k, "%s%s", k ? "," : "", f);
		}
		s = c ? c + 1 : NULL;
	}
	LLVMDisposeMessage(hn);
	LLVMDisposeMessage(hf);
	return 1;
}

// The x86-64 levels by rank (x86-64 is 1, x86-64-v4 is 4); 0 for any other
// name.
static int
level_rank(const char *s, size_t n)
{
	static const char *const name[] = {"x86-64", "x86-64-v2", "x86-64-v3", "x86-64-v4"};
	for (int i = 0; i < 4; i++)
		if (strlen(name[i]) == n && !strncmp(s, name[i], n))
			return i + 1;
	return 0;
}

int
cg_llvm_levels(const char *cpu, char lv[][32], char *err, size_t errlen)
{
	if (!cpu)
		cpu = CG_DEFAULT_LEVELS;
	if (!strchr(cpu, ',')) { // one CPU, any cg_llvm_cpu knows
		char nm[128], feat[1024], lf[4096];
		if (!cg_llvm_cpu(cpu, nm, sizeof nm, feat, sizeof feat, lf, sizeof lf, err, errlen))
			return 0;
		snprintf(lv[0], 32, "%s", cpu);
		return 1;
	}
	// A list: x86-64 levels only, each once, in rank order whatever the
	// order given (the artifact's bytes do not depend on it).
	int have[5] = {0};
	for (const char *s = cpu; s;) {
		const char *c = strchr(s, ',');
		size_t n = c ? (size_t)(c - s) : strlen(s);
		int r = level_rank(s, n);
		if (!r) {
			snprintf(err, errlen, "--cpu %s: '%.*s' is not an x86-64 level (a list takes x86-64, "
			         "x86-64-v2, x86-64-v3, x86-64-v4)", cpu, (int)n, s);
			return 0;
		}
		if (have[r]) {
			snprintf(err, errlen, "--cpu %s: the level %.*s is listed twice", cpu, (int)n, s);
			return 0;
		}
		have[r] = 1;
		s = c ? c + 1 : NULL;
	}
	static const char *const name[] = {"", "x86-64", "x86-64-v2", "x86-64-v3", "x86-64-v4"};
	int k = 0;
	for (int r = 1; r <= 4; r++)
		if (have[r]) {
			char nm[128], feat[1024], lf[4096];
			if (!cg_llvm_cpu(name[r], nm, sizeof nm, feat, sizeof feat, lf, sizeof lf, err, errlen))
				return 0;
			snprintf(lv[k++], 32, "%s", name[r]);
		}
	return k;
}

// ---------------------------------------------------------------- helpers
// The emitter's state (Emit, Split, Loop) and the one-line helpers (ty,
// sty, i64c, fn_attr, intrinsic, ...) are in llvm_impl.h, shared with
// llvm_math.c and llvm_gemm.c.

// Whether the feature list f ("avx2,fma,...", cg_llvm_cpu's) names x.
static int
has_feature(const char *f, const char *x)
{
	size_t n = strlen(x);
	for (const char *q = f; q && (q = strstr(q, x)); q += n)
		if ((q == f || q[-1] == ',') && (q[n] == ',' || q[n] == 0))
			return 1;
	return 0;
}

// With AVX-512 (e->wide) LLVM still prefers 256-bit vectors on these
// CPUs and splits wider ones; the GEMM's tile vectors are 512 bits there
// (llvm_gemm_vl), so every function says it wants them whole.
static void
fn_wide(Emit *e, LLVMValueRef fn)
{
	if (!e->wide)
		return;
	static const char *const k[] = {"prefer-vector-width", "min-legal-vector-width"};
	for (int i = 0; i < 2; i++)
		LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex,
		                        LLVMCreateStringAttribute(e->C, k[i], (unsigned)strlen(k[i]), "512", 3));
}

// A declared external function (libm or the support library).
static LLVMValueRef
ext_fn(Emit *e, const char *name, LLVMTypeRef ret, LLVMTypeRef *args, unsigned nargs,
       LLVMTypeRef *fty)
{
	*fty = LLVMFunctionType(ret, args, nargs, 0);
	LLVMValueRef f = LLVMGetNamedFunction(e->M, name);
	if (!f) {
		f = LLVMAddFunction(e->M, name, *fty);
		fn_attr(e, f, LLVMAttributeFunctionIndex, "nounwind");
	}
	return f;
}

// ---------------------------------------------------------------- pieces
// The module is emitted as pieces (docs/CODEGEN.md "Compile time"), each
// compiled on a thread of its own and cached on its own, so that a change
// to one part of a model recompiles the pieces it touches.  What goes in
// which piece is a function of names alone, never of sizes or of the
// threads: a task of at most INLINE_MAX_KERNELS kernels (which it inlines)
// goes with its kernels into piece hash("task.NAME"); a bigger task's
// function and call tables there too, each of its parts into
// hash("task.NAME.partJ"), and each kernel function it emits first (with
// its chunk function and thunk) into hash(the function's name).  The entry
// symbol, the task table and the descriptor are a module of their own
// (the descriptor changes with nearly any change).  A function called
// from another piece is declared there and made external with hidden
// visibility in its own (not exported from the .so; the names are unique
// in the whole module), and a small task that shares a kernel of another
// piece emits its own copy, so that it is inlined as before.

static uint64_t
name_hash(const char *s)
{
	uint64_t h = 1469598103934665603ull; // FNV-1a
	for (; *s; s++)
		h = (h ^ (uint8_t)*s) * 1099511628211ull;
	return h;
}

// The module of the piece that name hashes to.
static LLVMModuleRef
piece_of(const Emit *e, const char *name)
{
	return e->mods[cg_piece_of(name_hash(name), e->npieces)];
}

LLVMValueRef
llvm_ref(Emit *e, LLVMValueRef g)
{
	if (LLVMGetGlobalParent(g) == e->M)
		return g;
	size_t len;
	const char *name = LLVMGetValueName2(g, &len);
	LLVMValueRef d = LLVMGetNamedFunction(e->M, name);
	if (!d) {
		d = LLVMAddFunction(e->M, name, LLVMGlobalGetValueType(g));
		LLVMSetVisibility(d, LLVMHiddenVisibility);
		fn_attr(e, d, LLVMAttributeFunctionIndex, "nounwind");
	}
	LLVMSetLinkage(g, LLVMExternalLinkage);
	LLVMSetVisibility(g, LLVMHiddenVisibility);
	return d;
}

static LLVMValueRef
call1(Emit *e, const char *name, LLVMTypeRef t, LLVMValueRef a)
{
	LLVMTypeRef fty, at[1] = {t};
	LLVMValueRef f = ext_fn(e, name, t, at, 1, &fty), args[1] = {a};
	return LLVMBuildCall2(e->B, fty, f, args, 1, "");
}

// ---------------------------------------------------------------- expressions

// Converts v of compute dtype `from` to compute dtype `to`; round32 first
// rounds to float (a cast to f32 storage while computing in f64).
LLVMValueRef
llvm_convert(Emit *e, LLVMValueRef v, DType from, DType to, int round32)
{
	int ff = from == DT_F32 || from == DT_F64, tf = to == DT_F32 || to == DT_F64;
	if (ff && tf) {
		if (round32 && from == DT_F64)
			v = LLVMBuildFPTrunc(e->B, v, e->f32, "");
		DType cur = round32 ? DT_F32 : from;
		if (cur == to)
			return v;
		return cur == DT_F32 ? LLVMBuildFPExt(e->B, v, e->f64, "") : LLVMBuildFPTrunc(e->B, v, e->f32, "");
	}
	if (ff && to == DT_I64)
		return LLVMBuildFPToSI(e->B, v, e->i64, "");
	if (ff && to == DT_BOOL)
		return LLVMBuildFCmp(e->B, LLVMRealUNE, v, LLVMConstReal(ty(e, from), 0), "");
	if (from == DT_I64 && tf) {
		v = LLVMBuildSIToFP(e->B, v, round32 ? e->f32 : ty(e, to), "");
		return round32 && to == DT_F64 ? LLVMBuildFPExt(e->B, v, e->f64, "") : v;
	}
	if (from == DT_BOOL && tf)
		return LLVMBuildUIToFP(e->B, v, ty(e, to), "");
	if (from == DT_I64 && to == DT_BOOL)
		return LLVMBuildICmp(e->B, LLVMIntNE, v, LLVMConstInt(e->i64, 0, 0), "");
	if (from == DT_BOOL && to == DT_I64)
		return LLVMBuildZExt(e->B, v, e->i64, "");
	return v; // same dtype
}


static LLVMValueRef
fcmp(Emit *e, KCmp c, LLVMValueRef a, LLVMValueRef b)
{
	static const LLVMRealPredicate pred[] = {
		[KC_EQ] = LLVMRealOEQ, [KC_NE] = LLVMRealUNE, [KC_LT] = LLVMRealOLT,
		[KC_LE] = LLVMRealOLE, [KC_GT] = LLVMRealOGT, [KC_GE] = LLVMRealOGE,
		[KC_UGT] = LLVMRealUGT, [KC_ULT] = LLVMRealULT, [KC_UNO] = LLVMRealUNO,
	};
	return LLVMBuildFCmp(e->B, pred[c], a, b, "");
}

static LLVMValueRef
icmp(Emit *e, KCmp c, LLVMValueRef a, LLVMValueRef b, int is_unsigned)
{
	static const LLVMIntPredicate spred[] = {
		[KC_EQ] = LLVMIntEQ, [KC_NE] = LLVMIntNE, [KC_LT] = LLVMIntSLT, [KC_LE] = LLVMIntSLE,
		[KC_GT] = LLVMIntSGT, [KC_GE] = LLVMIntSGE, [KC_UGT] = LLVMIntSGT, [KC_ULT] = LLVMIntSLT,
	};
	static const LLVMIntPredicate upred[] = {
		[KC_EQ] = LLVMIntEQ, [KC_NE] = LLVMIntNE, [KC_LT] = LLVMIntULT, [KC_LE] = LLVMIntULE,
		[KC_GT] = LLVMIntUGT, [KC_GE] = LLVMIntUGE, [KC_UGT] = LLVMIntUGT, [KC_ULT] = LLVMIntULT,
	};
	if (c == KC_UNO)
		return LLVMConstInt(e->i1, 0, 0); // integers are never NaN
	return LLVMBuildICmp(e->B, is_unsigned ? upred[c] : spred[c], a, b, "");
}

// NaN-propagating maximum or minimum (torch.maximum): NaN if either is.
static LLVMValueRef
fminmax(Emit *e, int max, LLVMValueRef a, LLVMValueRef b)
{
	LLVMValueRef pick = LLVMBuildSelect(e->B, fcmp(e, max ? KC_GT : KC_LT, a, b), a, b, "");
	LLVMValueRef nan = LLVMBuildFAdd(e->B, a, b, "");
	return LLVMBuildSelect(e->B, fcmp(e, KC_UNO, a, b), nan, pick, "");
}

static LLVMValueRef
emit_op(Emit *e, const Kx *x)
{
	const KProgram *p = e->p;
	DType dt = (DType)x->dtype;
	int isf = dt == DT_F32 || dt == DT_F64;
	LLVMTypeRef t = ty(e, dt);
	LLVMValueRef a = x->nin > 0 ? llvm_emit_x(e, x->a[0]) : NULL;
	LLVMValueRef b = x->nin > 1 ? llvm_emit_x(e, x->a[1]) : NULL;
	LLVMValueRef c = x->nin > 2 ? llvm_emit_x(e, x->a[2]) : NULL;
	switch ((KxOp)x->op) {
	case KX_CONST:
		if (isf)
			return LLVMConstReal(t, x->f);
		return LLVMConstInt(t, (unsigned long long)x->i, dt == DT_I64);
	case KX_VAR:
		return LLVMBuildLoad2(e->B, e->i64, e->var[x->aux], "");
	case KX_LOAD: {
		DType st = p->buf[x->aux].dtype;
		LLVMValueRef ptr = LLVMBuildInBoundsGEP2(e->B, sty(e, st), e->bufptr[x->aux], &a, 1, "");
		LLVMValueRef v = LLVMBuildLoad2(e->B, sty(e, st), ptr, "");
		if (st == DT_BOOL)
			return LLVMBuildICmp(e->B, LLVMIntNE, v, LLVMConstInt(e->i8, 0, 0), "");
		return llvm_convert(e, v, st, dt, 0);
	}
	case KX_ACC:
		return LLVMBuildLoad2(e->B, t, e->acc, "");
	case KX_RUNSEED:
		return e->runseed;
	case KX_STEP:
		FADC_ASSERT(e->step[x->aux] != NULL, "llvm: a step counter that the kernel was not given");
		return e->step[x->aux];
	case KX_IADD:
		return LLVMBuildNSWAdd(e->B, a, b, "");
	case KX_IMUL:
		return LLVMBuildNSWMul(e->B, a, b, "");
	case KX_IDIV:
	case KX_IMOD: {
		// Floor division by a positive constant; unsigned when a >= 0.
		int64_t lo, hi;
		int nonneg = kx_range(p, x->a[0], &lo, &hi) && lo >= 0;
		if (nonneg)
			return x->op == KX_IDIV ? LLVMBuildUDiv(e->B, a, b, "") : LLVMBuildURem(e->B, a, b, "");
		LLVMValueRef q = LLVMBuildSDiv(e->B, a, b, ""), r = LLVMBuildSRem(e->B, a, b, "");
		LLVMValueRef neg = LLVMBuildICmp(e->B, LLVMIntSLT, r, LLVMConstInt(e->i64, 0, 0), "");
		if (x->op == KX_IDIV)
			return LLVMBuildSub(e->B, q, LLVMBuildZExt(e->B, neg, e->i64, ""), "");
		return LLVMBuildSelect(e->B, neg, LLVMBuildAdd(e->B, r, b, ""), r, "");
	}
	case KX_IMIN:
		return LLVMBuildSelect(e->B, LLVMBuildICmp(e->B, LLVMIntSLT, a, b, ""), a, b, "");
	case KX_IMAX:
		return LLVMBuildSelect(e->B, LLVMBuildICmp(e->B, LLVMIntSGT, a, b, ""), a, b, "");
	case KX_ADD:
		return isf ? LLVMBuildFAdd(e->B, a, b, "") : LLVMBuildAdd(e->B, a, b, "");
	case KX_SUB:
		return isf ? LLVMBuildFSub(e->B, a, b, "") : LLVMBuildSub(e->B, a, b, "");
	case KX_MUL:
		return isf ? LLVMBuildFMul(e->B, a, b, "") : LLVMBuildMul(e->B, a, b, "");
	case KX_DIV:
		return LLVMBuildFDiv(e->B, a, b, "");
	case KX_NEG:
		return isf ? LLVMBuildFNeg(e->B, a, "") : LLVMBuildNeg(e->B, a, "");
	case KX_ABS:
		if (isf)
			return intrinsic1(e, "llvm.fabs", t, a);
		return LLVMBuildSelect(e->B, LLVMBuildICmp(e->B, LLVMIntSLT, a, LLVMConstInt(t, 0, 0), ""),
		                       LLVMBuildNeg(e->B, a, ""), a, "");
	case KX_MAX:
	case KX_MIN:
		if (isf)
			return fminmax(e, x->op == KX_MAX, a, b);
		return LLVMBuildSelect(
		    e->B, LLVMBuildICmp(e->B, x->op == KX_MAX ? LLVMIntSGT : LLVMIntSLT, a, b, ""), a, b, "");
	case KX_POW: {
		LLVMValueRef args[2] = {a, b};
		return intrinsic(e, "llvm.pow", t, args, 2);
	}
	case KX_FLOOR:
		return intrinsic1(e, "llvm.floor", t, a);
	case KX_SQRT:
		return intrinsic1(e, "llvm.sqrt", t, a);
	case KX_EXP:
	case KX_LOG:
	case KX_LOG1P:
	case KX_EXPM1:
	case KX_TANH:
		if (e->vecmath) {
			// Vectorizable implementations (llvm_math_fn), inlined into the loop.
			LLVMValueRef f = llvm_math_fn(e, (KxOp)x->op, dt);
			return LLVMBuildCall2(e->B, LLVMGlobalGetValueType(f), f, &a, 1, "");
		}
		// A scalar loop (a short or non-sum reduction): libm's scalar
		// code has less latency than ours (docs/PERFORMANCE.md).
		switch ((KxOp)x->op) {
		case KX_EXP:
			return intrinsic1(e, "llvm.exp", t, a);
		case KX_LOG:
			return intrinsic1(e, "llvm.log", t, a);
		case KX_LOG1P:
			return call1(e, dt == DT_F32 ? "log1pf" : "log1p", t, a);
		case KX_EXPM1:
			return call1(e, dt == DT_F32 ? "expm1f" : "expm1", t, a);
		default:
			return call1(e, dt == DT_F32 ? "tanhf" : "tanh", t, a);
		}
	case KX_SIN:
		return intrinsic1(e, "llvm.sin", t, a);
	case KX_COS:
		return intrinsic1(e, "llvm.cos", t, a);
	case KX_ERF:
	case KX_LGAMMA:
		if (e->vecmath) {
			LLVMValueRef f = llvm_math_fn(e, (KxOp)x->op, dt);
			return LLVMBuildCall2(e->B, LLVMGlobalGetValueType(f), f, &a, 1, "");
		}
		if (x->op == KX_ERF)
			return call1(e, dt == DT_F32 ? "erff" : "erf", t, a);
		return call1(e, dt == DT_F32 ? "fadc_lgammaf" : "fadc_lgamma", t, a);
	case KX_POLYGAMMA: {
		const Kx *n = &p->x[x->a[0]];
		if (e->vecmath && n->op == KX_CONST && (n->f == 0 || n->f == 1)) { // digamma, trigamma
			LLVMValueRef f = llvm_math_fn(e, n->f == 0 ? KX_POLYGAMMA : KX_TRIGAMMA, dt);
			return LLVMBuildCall2(e->B, LLVMGlobalGetValueType(f), f, &b, 1, "");
		}
		LLVMTypeRef fty, at[2] = {t, t};
		LLVMValueRef f = ext_fn(e, dt == DT_F32 ? "fadc_polygammaf" : "fadc_polygamma", t, at, 2, &fty);
		LLVMValueRef args[2] = {a, b};
		return LLVMBuildCall2(e->B, fty, f, args, 2, "");
	}
	case KX_CMP: {
		DType ot = (DType)p->x[x->a[0]].dtype;
		if (ot == DT_F32 || ot == DT_F64)
			return fcmp(e, (KCmp)x->aux, a, b);
		return icmp(e, (KCmp)x->aux, a, b, ot == DT_BOOL);
	}
	case KX_AND:
		return LLVMBuildAnd(e->B, a, b, "");
	case KX_OR:
		return LLVMBuildOr(e->B, a, b, "");
	case KX_NOT:
		return LLVMBuildXor(e->B, a, LLVMConstInt(e->i1, 1, 0), "");
	case KX_SELECT:
		return LLVMBuildSelect(e->B, a, b, c, "");
	case KX_CAST: {
		DType from = (DType)p->x[x->a[0]].dtype;
		return llvm_convert(e, a, from, dt, x->aux == DT_F32 && dt == DT_F64);
	}
	case KX_RAND: {
		static const char *const names[] = {"ir_rand_uniform", "ir_rand_normal", "ir_rand_gamma"};
		LLVMTypeRef fty, at[4] = {e->i64, e->i64, e->i64, e->f64};
		unsigned n = x->aux == KRAND_GAMMA ? 4 : 3;
		LLVMValueRef f = ext_fn(e, names[x->aux], e->f64, at, n, &fty);
		LLVMValueRef args[4] = {LLVMConstInt(e->i64, (unsigned long long)x->i, 0), e->runseed, a, b};
		return LLVMBuildCall2(e->B, fty, f, args, n, "");
	}
	default:
		FADC_ASSERT(0, "llvm: an expression op with no emitter");
		return NULL;
	}
}

LLVMValueRef
llvm_emit_x(Emit *e, KxId id)
{
	if (e->stamp[id] == e->region)
		return e->val[id];
	LLVMValueRef v = emit_op(e, &e->p->x[id]);
	e->stamp[id] = e->region;
	e->val[id] = v;
	return v;
}

// ---------------------------------------------------------------- loops

// A loop of counter ctr over [0, ext), ext an i64 value.
void
llvm_loop_begin_v(Emit *e, Loop *l, LLVMValueRef ctr, LLVMValueRef ext)
{
	l->ctr = ctr;
	l->ext = -1;
	l->head = LLVMAppendBasicBlockInContext(e->C, e->fn, "head");
	l->body = LLVMAppendBasicBlockInContext(e->C, e->fn, "body");
	l->exit = LLVMAppendBasicBlockInContext(e->C, e->fn, "exit");
	LLVMBuildStore(e->B, LLVMConstInt(e->i64, 0, 0), ctr);
	LLVMBuildBr(e->B, l->head);
	LLVMPositionBuilderAtEnd(e->B, l->head);
	LLVMValueRef i = LLVMBuildLoad2(e->B, e->i64, ctr, "");
	LLVMValueRef more = LLVMBuildICmp(e->B, LLVMIntSLT, i, ext, "");
	LLVMBuildCondBr(e->B, more, l->body, l->exit);
	LLVMPositionBuilderAtEnd(e->B, l->body);
}

void
llvm_loop_begin(Emit *e, Loop *l, LLVMValueRef ctr, int64_t ext)
{
	llvm_loop_begin_v(e, l, ctr, LLVMConstInt(e->i64, (unsigned long long)ext, 1));
	l->ext = ext;
}

void
llvm_loop_end(Emit *e, Loop *l)
{
	LLVMValueRef i = LLVMBuildLoad2(e->B, e->i64, l->ctr, "");
	LLVMBuildStore(e->B, LLVMBuildNSWAdd(e->B, i, LLVMConstInt(e->i64, 1, 0), ""), l->ctr);
	LLVMBuildBr(e->B, l->head);
	LLVMPositionBuilderAtEnd(e->B, l->exit);
}

static LLVMValueRef
red_init(Emit *e, KRed r, DType dt)
{
	LLVMTypeRef t = ty(e, dt);
	if (dt == DT_F32 || dt == DT_F64)
		return LLVMConstReal(t, r == KR_SUM ? 0.0 : r == KR_MAX ? -HUGE_VAL : HUGE_VAL);
	unsigned long long v = r == KR_SUM ? 0 : r == KR_MAX ? (1ull << 63) : ~(1ull << 63);
	return LLVMConstInt(t, v, 1);
}

// acc <- acc (+) v, with the interpreter's NaN rules for max and min: a NaN
// term wins and stays.
static LLVMValueRef
red_combine(Emit *e, KRed r, DType dt, LLVMValueRef acc, LLVMValueRef v)
{
	int isf = dt == DT_F32 || dt == DT_F64;
	if (r == KR_SUM)
		return isf ? LLVMBuildFAdd(e->B, acc, v, "") : LLVMBuildAdd(e->B, acc, v, "");
	if (!isf)
		return LLVMBuildSelect(
		    e->B, LLVMBuildICmp(e->B, r == KR_MAX ? LLVMIntSGT : LLVMIntSLT, v, acc, ""), v, acc, "");
	LLVMValueRef keep_nan = LLVMBuildFCmp(e->B, LLVMRealORD, acc, acc, "");
	LLVMValueRef take = LLVMBuildAnd(e->B, keep_nan, fcmp(e, r == KR_MAX ? KC_UGT : KC_ULT, v, acc), "");
	return LLVMBuildSelect(e->B, take, v, acc, "");
}

// ---------------------------------------------------------------- parallel loops
// A split kernel runs iterations [lo, hi) of its range per call (a chunk);
// an unsplit one its whole parallel domain.  par_begin / par_end open and
// close the first nax parallel loops either way: plain loops, or one loop
// over [lo, hi) whose counter is decomposed into the first sp.nax loop
// variables (row-major: the last of them varies fastest) and plain loops
// for the rest.  With sp.nax = 1 the range is loop 0's counter itself, so
// the loop keeps the shape the vectorizer knows.

// An alloca in the entry block (promoted by mem2reg).
LLVMValueRef
llvm_entry_alloca(Emit *e, LLVMTypeRef t)
{
	LLVMBasicBlockRef cur = LLVMGetInsertBlock(e->B);
	LLVMBasicBlockRef entry = LLVMGetEntryBasicBlock(e->fn);
	LLVMValueRef first = LLVMGetFirstInstruction(entry);
	if (first)
		LLVMPositionBuilderBefore(e->B, first);
	else
		LLVMPositionBuilderAtEnd(e->B, entry);
	LLVMValueRef a = LLVMBuildAlloca(e->B, t, "");
	LLVMPositionBuilderAtEnd(e->B, cur);
	return a;
}

// A loop of counter ctr over [lo, hi), i64 values.
void
llvm_loop_begin_range(Emit *e, Loop *l, LLVMValueRef ctr, LLVMValueRef lo, LLVMValueRef hi)
{
	l->ctr = ctr;
	l->ext = -1;
	l->head = LLVMAppendBasicBlockInContext(e->C, e->fn, "par.head");
	l->body = LLVMAppendBasicBlockInContext(e->C, e->fn, "par.body");
	l->exit = LLVMAppendBasicBlockInContext(e->C, e->fn, "par.exit");
	LLVMBuildStore(e->B, lo, ctr);
	LLVMBuildBr(e->B, l->head);
	LLVMPositionBuilderAtEnd(e->B, l->head);
	LLVMValueRef i = LLVMBuildLoad2(e->B, e->i64, ctr, "");
	LLVMBuildCondBr(e->B, LLVMBuildICmp(e->B, LLVMIntSLT, i, hi, ""), l->body, l->exit);
	LLVMPositionBuilderAtEnd(e->B, l->body);
}

// Stores the coordinates of flat index f over dims[0 .. n) (row-major)
// into vars[0 .. n).
void
llvm_store_coords(Emit *e, LLVMValueRef f, const int64_t *dims, int n, LLVMValueRef *vars)
{
	for (int d = n - 1; d >= 0; d--) {
		LLVMValueRef ext = LLVMConstInt(e->i64, (unsigned long long)dims[d], 0);
		LLVMBuildStore(e->B, d ? LLVMBuildSRem(e->B, f, ext, "") : f, vars[d]);
		if (d)
			f = LLVMBuildSDiv(e->B, f, ext, "");
	}
}

static void
par_begin(Emit *e, const KKernel *k, Loop *loops, int nax)
{
	int s = e->sp.on ? e->sp.nax : 0;
	FADC_ASSERT(s <= nax, "llvm: a split over more axes than the loops");
	if (s == 1)
		llvm_loop_begin_range(e, &loops[0], e->var[0], e->lo, e->hi);
	else if (s > 1) {
		// loops[0] is the flat loop (axes 0 .. s-1 need no loop of their own).
		e->flat = llvm_entry_alloca(e, e->i64);
		llvm_loop_begin_range(e, &loops[0], e->flat, e->lo, e->hi);
		llvm_store_coords(e, LLVMBuildLoad2(e->B, e->i64, e->flat, ""), k->dim, s, e->var);
	}
	for (int d = s; d < nax; d++)
		llvm_loop_begin(e, &loops[d], e->var[d], k->dim[d]);
}

static void
par_end(Emit *e, Loop *loops, int nax)
{
	int s = e->sp.on ? e->sp.nax : 0;
	for (int d = nax - 1; d >= s; d--)
		llvm_loop_end(e, &loops[d]);
	if (s >= 1)
		llvm_loop_end(e, &loops[0]);
}

// Long float sums: SPLIT accumulators over the innermost reduction axis,
// term r going to accumulator r % SPLIT, summed pairwise at the end.  A
// single accumulator is a chain of dependent additions (4 cycles each);
// independent ones overlap, and the SLP vectorizer packs them into one
// vector when the terms load contiguously.  This changes the order of
// summation (more accurate, not less: pairwise over blocks), so it is
// kept to axes of at least SPLIT_MIN terms; shorter sums stay sequential.
#define SPLIT 8
#define SPLIT_MIN 32

static void
emit_split_sum(Emit *e, const KKernel *k, Loop *loops)
{
	const KProgram *p = e->p;
	DType vt = (DType)p->x[k->body].dtype;
	LLVMTypeRef t = ty(e, vt);
	int last = k->rank + k->rrank - 1;
	int64_t ext = k->rdim[k->rrank - 1];
	LLVMValueRef acc[SPLIT];
	LLVMBasicBlockRef cur = LLVMGetInsertBlock(e->B);
	// Allocas in the entry block, so that mem2reg promotes them.
	LLVMBasicBlockRef entry = LLVMGetEntryBasicBlock(e->fn);
	LLVMValueRef first = LLVMGetFirstInstruction(entry);
	if (first)
		LLVMPositionBuilderBefore(e->B, first);
	else
		LLVMPositionBuilderAtEnd(e->B, entry);
	for (int u = 0; u < SPLIT; u++)
		acc[u] = LLVMBuildAlloca(e->B, t, "");
	LLVMValueRef base = LLVMBuildAlloca(e->B, e->i64, "");
	LLVMPositionBuilderAtEnd(e->B, cur);
	for (int u = 0; u < SPLIT; u++)
		LLVMBuildStore(e->B, red_init(e, KR_SUM, vt), acc[u]);
	for (int d = 0; d < k->rrank - 1; d++)
		llvm_loop_begin(e, &loops[k->rank + d], e->var[k->rank + d], k->rdim[d]);
	// Blocks of SPLIT terms, then the remainder into accumulator 0.
	LLVMBasicBlockRef head = LLVMAppendBasicBlockInContext(e->C, e->fn, "split.head");
	LLVMBasicBlockRef body = LLVMAppendBasicBlockInContext(e->C, e->fn, "split.body");
	LLVMBasicBlockRef rhead = LLVMAppendBasicBlockInContext(e->C, e->fn, "split.rest");
	LLVMBasicBlockRef rbody = LLVMAppendBasicBlockInContext(e->C, e->fn, "split.restbody");
	LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(e->C, e->fn, "split.done");
	LLVMBuildStore(e->B, LLVMConstInt(e->i64, 0, 0), base);
	LLVMBuildBr(e->B, head);
	e->vecmath = 1; // the SLP vectorizer packs the SPLIT terms into vectors
	LLVMPositionBuilderAtEnd(e->B, head);
	LLVMValueRef b = LLVMBuildLoad2(e->B, e->i64, base, "");
	LLVMValueRef more = LLVMBuildICmp(e->B, LLVMIntSLE, LLVMBuildAdd(e->B, b, LLVMConstInt(e->i64, SPLIT, 0), ""),
	                                  LLVMConstInt(e->i64, (unsigned long long)ext, 0), "");
	LLVMBuildCondBr(e->B, more, body, rhead);
	LLVMPositionBuilderAtEnd(e->B, body);
	b = LLVMBuildLoad2(e->B, e->i64, base, "");
	for (int u = 0; u < SPLIT; u++) {
		LLVMBuildStore(e->B, LLVMBuildNSWAdd(e->B, b, LLVMConstInt(e->i64, (unsigned long long)u, 0), ""),
		               e->var[last]);
		new_region(e);
		LLVMValueRef v = llvm_emit_x(e, k->body);
		LLVMValueRef a = LLVMBuildLoad2(e->B, t, acc[u], "");
		LLVMBuildStore(e->B, LLVMBuildFAdd(e->B, a, v, ""), acc[u]);
	}
	LLVMBuildStore(e->B, LLVMBuildNSWAdd(e->B, b, LLVMConstInt(e->i64, SPLIT, 0), ""), base);
	LLVMBuildBr(e->B, head);
	LLVMPositionBuilderAtEnd(e->B, rhead);
	b = LLVMBuildLoad2(e->B, e->i64, base, "");
	more = LLVMBuildICmp(e->B, LLVMIntSLT, b, LLVMConstInt(e->i64, (unsigned long long)ext, 0), "");
	LLVMBuildCondBr(e->B, more, rbody, done);
	LLVMPositionBuilderAtEnd(e->B, rbody);
	b = LLVMBuildLoad2(e->B, e->i64, base, "");
	LLVMBuildStore(e->B, b, e->var[last]);
	new_region(e);
	LLVMValueRef v = llvm_emit_x(e, k->body);
	LLVMValueRef a = LLVMBuildLoad2(e->B, t, acc[0], "");
	LLVMBuildStore(e->B, LLVMBuildFAdd(e->B, a, v, ""), acc[0]);
	LLVMBuildStore(e->B, LLVMBuildNSWAdd(e->B, b, LLVMConstInt(e->i64, 1, 0), ""), base);
	LLVMBuildBr(e->B, rhead);
	LLVMPositionBuilderAtEnd(e->B, done);
	e->vecmath = 0;
	for (int d = k->rrank - 2; d >= 0; d--)
		llvm_loop_end(e, &loops[k->rank + d]);
	// Pairwise: ((a0 + a1) + (a2 + a3)) + ((a4 + a5) + (a6 + a7)).
	LLVMValueRef s[SPLIT];
	for (int u = 0; u < SPLIT; u++)
		s[u] = LLVMBuildLoad2(e->B, t, acc[u], "");
	for (int w = SPLIT; w > 1; w /= 2)
		for (int u = 0; u < w / 2; u++)
			s[u] = LLVMBuildFAdd(e->B, s[2 * u], s[2 * u + 1], "");
	LLVMBuildStore(e->B, s[0], e->acc);
}

static int
loads_unit_stride(const KProgram *p, KxId id, int var, uint8_t *seen)
{
	if (!id || seen[id])
		return 1;
	seen[id] = 1;
	const Kx *x = &p->x[id];
	int64_t c;
	if (x->op == KX_LOAD && (!kx_affine_coef(p, x->a[0], var, &c) || (c != 0 && c != 1)))
		return 0;
	for (int i = 0; i < x->nin; i++)
		if (!loads_unit_stride(p, x->a[i], var, seen))
			return 0;
	return 1;
}

// Does every load of the kernel's body step by 0 or 1 element along loop
// variable var?
static int
body_unit_stride(const KProgram *p, const KKernel *k, int var)
{
	uint8_t *seen = calloc(p->nx + 1, 1);
	FADC_ASSERT(seen != NULL, "llvm: out of memory");
	int r = loads_unit_stride(p, k->body, var, seen);
	free(seen);
	return r;
}

// Does every load of the body, and the output, step by 0 or 1 element
// (the output by 1) along the innermost parallel variable?  Then that
// loop may go innermost.
static int
unit_stride(const KProgram *p, const KKernel *k)
{
	int64_t c;
	return body_unit_stride(p, k, k->rank - 1) && kx_affine_coef(p, k->index, k->rank - 1, &c) && c == 1;
}

// A contraction (matmul) kernel with its reduction loop moved outside the
// innermost parallel loop, accumulating in the output buffer:
//   for the outer parallel axes:
//     for j: out[.., j] = 0
//     for k: for j: out[.., j] += body(.., j, k)
//     (for j: out[.., j] = post(out[.., j]), if post is more than the sum)
// Each output still sums its terms in order of k, so results are the same
// bits as the plain loop nest, but the j loop reads B contiguously and
// needs no reassociation to vectorize (each lane is its own output): the
// loop vectorizer does it, where a reduction in a register would stay
// scalar (LLVM 14's C API sets no fast-math flags).  Only when the output
// is stored in the compute dtype and every load of the body steps by 0 or
// 1 element along j (B not transposed); otherwise the plain nest, whose
// k loop reads both operands contiguously, is the better of the two.
// The same loops serve a sum over the rows of a row-major operand (a bias
// gradient: out[j] = sum_r g[r, j]), whose plain nest would walk each
// column with a stride of a row: a cache miss per term.  A kernel of rank 1
// is split over j itself, each chunk's j loops running over its range
// [lo, hi) (the reduction outer, the chunk's columns inner).
static void
j_loop(Emit *e, const KKernel *k, Loop *loops, int j, int jsplit)
{
	if (jsplit)
		llvm_loop_begin_range(e, &loops[j], e->var[j], e->lo, e->hi);
	else
		llvm_loop_begin(e, &loops[j], e->var[j], k->dim[j]);
}

static void
emit_contraction(Emit *e, const KKernel *k, Loop *loops)
{
	const KProgram *p = e->p;
	DType vt = (DType)p->x[k->body].dtype;
	LLVMTypeRef t = ty(e, vt);
	int j = k->rank - 1, jsplit = e->sp.on && e->sp.nax > j; // j itself split (rank 1)
	if (!jsplit)
		par_begin(e, k, loops, j);
	// The element of the output at the current point.
	LLVMValueRef out = e->bufptr[k->out];
	j_loop(e, k, loops, j, jsplit);
	new_region(e);
	LLVMValueRef idx = llvm_emit_x(e, k->index);
	LLVMBuildStore(e->B, red_init(e, k->red, vt), LLVMBuildInBoundsGEP2(e->B, t, out, &idx, 1, ""));
	llvm_loop_end(e, &loops[j]);
	for (int d = 0; d < k->rrank; d++)
		llvm_loop_begin(e, &loops[k->rank + d], e->var[k->rank + d], k->rdim[d]);
	j_loop(e, k, loops, j, jsplit);
	new_region(e);
	LLVMValueRef v = llvm_emit_x(e, k->body);
	idx = llvm_emit_x(e, k->index);
	LLVMValueRef ptr = LLVMBuildInBoundsGEP2(e->B, t, out, &idx, 1, "");
	LLVMValueRef a = LLVMBuildLoad2(e->B, t, ptr, "");
	LLVMBuildStore(e->B, red_combine(e, k->red, vt, a, v), ptr);
	llvm_loop_end(e, &loops[j]);
	for (int d = k->rrank - 1; d >= 0; d--)
		llvm_loop_end(e, &loops[k->rank + d]);
	if (p->x[k->post].op != KX_ACC) {
		j_loop(e, k, loops, j, jsplit);
		new_region(e);
		idx = llvm_emit_x(e, k->index);
		ptr = LLVMBuildInBoundsGEP2(e->B, t, out, &idx, 1, "");
		LLVMValueRef save = e->acc;
		e->acc = ptr; // KX_ACC reads the output element
		LLVMBuildStore(e->B, llvm_emit_x(e, k->post), ptr);
		e->acc = save;
		llvm_loop_end(e, &loops[j]);
	}
	if (!jsplit)
		par_end(e, loops, j);
}

// What a kernel function takes: its buffers (out first), then the run
// seed if it draws random numbers, then the step counters of the loops
// whose steps its indices use.
typedef struct KSig {
	uint32_t *bufs;
	unsigned nbufs;
	int seed;
	int *steps; // loop indices
	unsigned nsteps;
	// A split kernel (sp.on) also takes its range's lo and hi, last, and
	// has a chunk function: chunk(args, lo, hi) with args a struct of argt
	// holding the arguments above (emit_chunk_fn).
	Split sp;
	LLVMTypeRef argt;
	LLVMValueRef chunk;
	// A GEMM split over K (Gemm.ks > 1) also takes, after the step
	// counters, the caller's block for its partial results
	// (llvm_gemm_part), and is called once more after its range with lo
	// = -1 to add them to C (emit_split_call).
	int part;
} KSig;

// A host kernel: `i32 f(out, in, scratch)` calling the support library;
// a nonzero result is the task's error code (docs/CODEGEN.md).
static void
emit_host(Emit *e, const KKernel *k)
{
	const KProgram *p = e->p;
	const KBuf *in = &p->buf[k->hin];
	FADC_ASSERT(k->host == KH_ASSIGN, "llvm: an unknown host kernel");
	LLVMTypeRef fty, at[5] = {LLVMPointerType(e->f64, 0), e->i64, e->i64, LLVMPointerType(e->i64, 0),
	                          e->i8p};
	LLVMValueRef f = ext_fn(e, "ir_assignment", e->i32, at, 5, &fty);
	LLVMValueRef args[5] = {
		e->bufptr[k->hin],
		LLVMConstInt(e->i64, (unsigned long long)in->shape.dim[0], 0),
		LLVMConstInt(e->i64, (unsigned long long)in->shape.dim[1], 0),
		e->bufptr[k->out],
		LLVMBuildBitCast(e->B, e->bufptr[k->hwork], e->i8p, ""),
	};
	LLVMValueRef r = LLVMBuildCall2(e->B, fty, f, args, 5, "");
	// ir_assignment: 1 solved, 0 NaN or -inf, -1 infeasible -> 0, 1, 2.
	LLVMBuildRet(e->B, LLVMBuildSub(e->B, LLVMConstInt(e->i32, 1, 0), r, ""));
}

// ---------------------------------------------------------------- parallel kernels
// A kernel is split for the thread pool when its work (parallel points
// times reduction terms) is at least PAR_MIN_WORK, or PAR_GEMM_MIN_WORK
// multiply-adds for the blocked GEMM (vector FMAs, some 8 to 16 times
// faster per term): waking the workers costs some microseconds, which a
// small kernel's arithmetic does not repay.  So the ppl models' tasks
// (a few hundred terms per kernel) never call the pool and stay one
// function.  The range is the GEMM's (outer point, column tile, row
// group) iterations, else the flattened leading parallel axes, taken
// until there are PAR_MIN_RANGE iterations, but never the innermost
// parallel axis of a rank >= 2 kernel (its loop is the vectorizer's), nor
// the j axis of the contraction loops (emit_contraction: it sits inside
// the reduction).  Kernels of rank 0 (a sum to a scalar) stay serial, as
// do host kernels.  Chunks carry at least PAR_GRAIN_WORK of work.  Every
// iteration computes its own outputs whole, by the same instructions
// whatever the chunk it falls in: results are bit-identical for any
// number of threads (no per-thread partial sums exist to combine; a
// GEMM's K split is fixed by its shape, llvm_gemm.c's gemm_ksplit).
#define PAR_MIN_WORK (1 << 16)
#define PAR_GEMM_MIN_WORK (1 << 18)
#define PAR_MIN_RANGE 32
#define PAR_GRAIN_WORK (1 << 14)

// Does the kernel run as emit_contraction's loops (reduction outside j)?
// A contraction, or a float sum whose innermost reduction variable
// strides some load (a sum over rows): its plain nest would walk columns.
static int
contraction_loops(const KProgram *p, const KKernel *k)
{
	DType vt = (DType)p->x[k->body].dtype;
	if (!k->red || k->rank < 1 || p->buf[k->out].dtype != vt || !unit_stride(p, k))
		return 0;
	if (k->contraction)
		return 1;
	if (k->red != KR_SUM || (vt != DT_F32 && vt != DT_F64))
		return 0;
	return !body_unit_stride(p, k, k->rank + k->rrank - 1);
}

static Split
split_plan(const KProgram *p, const KKernel *k, unsigned vbytes, int *part)
{
	Split sp = {0, 0, 0, 0};
	*part = 0;
	if (k->host || k->rank < 1)
		return sp;
	double work = 1;
	for (int d = 0; d < k->rank; d++)
		work *= (double)k->dim[d];
	for (int r = 0; r < k->rrank; r++)
		work *= (double)k->rdim[r];
	int64_t n = 1;
	Gemm G;
	if (llvm_gemm_plan(p, k, vbytes, &G)) {
		if (work < PAR_GEMM_MIN_WORK)
			return sp;
		int64_t np, ncol, ngroup;
		llvm_gemm_range(k, &G, llvm_gemm_vl(vbytes, (DType)p->x[k->body].dtype), &np, &ncol, &ngroup);
		n = G.ks * np * ncol * ngroup;
		*part = G.ks > 1;
	} else {
		if (work < PAR_MIN_WORK)
			return sp;
		// Never the innermost parallel axis of a rank >= 2 kernel (the
		// vectorizer's, or the j loop inside the reduction); a rank-1
		// kernel splits its only axis (emit_contraction: j over a range).
		int avail = k->rank >= 2 ? k->rank - 1 : k->rank;
		while (sp.nax < avail && n < PAR_MIN_RANGE)
			n *= k->dim[sp.nax++];
	}
	if (n < 2)
		return (Split){0, 0, 0, 0};
	double per = work / (double)n;
	sp.on = 1;
	sp.n = n;
	sp.grain = per >= PAR_GRAIN_WORK ? 1 : (int64_t)((PAR_GRAIN_WORK + per - 1) / per);
	return sp;
}

// The chunk function of split kernel kfn: `void chunk(i8 *args, i64 lo,
// i64 hi)` unpacking args (a struct of sig->argt) into kfn's arguments.
static void
emit_chunk_fn(Emit *e, LLVMValueRef kfn, KSig *sig)
{
	LLVMTypeRef kty = LLVMGlobalGetValueType(kfn);
	unsigned na = LLVMCountParamTypes(kty) - 2;
	LLVMTypeRef *pt = calloc(na + 2, sizeof *pt);
	LLVMValueRef *a = calloc(na + 2, sizeof *a);
	FADC_ASSERT(pt && a, "llvm: out of memory");
	LLVMGetParamTypes(kty, pt);
	sig->argt = LLVMStructTypeInContext(e->C, pt, na, 0);
	LLVMTypeRef cpt[3] = {e->i8p, e->i64, e->i64};
	LLVMTypeRef cty = LLVMFunctionType(e->voidt, cpt, 3, 0);
	size_t len;
	char name[320];
	snprintf(name, sizeof name, "%s.chunk", LLVMGetValueName2(kfn, &len));
	LLVMValueRef fn = LLVMAddFunction(e->M, name, cty);
	LLVMSetLinkage(fn, LLVMInternalLinkage);
	fn_attr(e, fn, LLVMAttributeFunctionIndex, "nounwind");
	fn_wide(e, fn);
	LLVMPositionBuilderAtEnd(e->B, LLVMAppendBasicBlockInContext(e->C, fn, "entry"));
	LLVMValueRef args = LLVMBuildBitCast(e->B, LLVMGetParam(fn, 0), LLVMPointerType(sig->argt, 0), "");
	for (unsigned i = 0; i < na; i++)
		a[i] = LLVMBuildLoad2(e->B, pt[i], LLVMBuildStructGEP2(e->B, sig->argt, args, i, ""), "");
	a[na] = LLVMGetParam(fn, 1);
	a[na + 1] = LLVMGetParam(fn, 2);
	LLVMBuildCall2(e->B, kty, kfn, a, na + 2, "");
	LLVMBuildRetVoid(e->B);
	sig->chunk = fn;
	free(pt);
	free(a);
}

// In the task function: split kernel kfn with arguments a[0 .. na): through
// exec->parallel_for when the runtime gave an exec, else whole, here.
static void
emit_split_call(Emit *e, LLVMValueRef kfn, const KSig *sig, LLVMValueRef *a, unsigned na,
                LLVMValueRef exec)
{
	LLVMValueRef box = llvm_entry_alloca(e, sig->argt);
	for (unsigned i = 0; i < na; i++)
		LLVMBuildStore(e->B, a[i], LLVMBuildStructGEP2(e->B, sig->argt, box, i, ""));
	LLVMBasicBlockRef pool = LLVMAppendBasicBlockInContext(e->C, e->fn, "par.pool");
	LLVMBasicBlockRef here = LLVMAppendBasicBlockInContext(e->C, e->fn, "par.here");
	LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(e->C, e->fn, "par.done");
	LLVMBuildCondBr(e->B, LLVMBuildIsNull(e->B, exec, ""), here, pool);
	// fadc_exec_v1: {parallel_for, pool}; parallel_for(exec, chunk, args, n, grain).
	LLVMPositionBuilderAtEnd(e->B, pool);
	LLVMTypeRef cty = LLVMGlobalGetValueType(sig->chunk);
	LLVMTypeRef pft[5] = {e->i8p, LLVMPointerType(cty, 0), e->i8p, e->i64, e->i64};
	LLVMTypeRef pfty = LLVMFunctionType(e->voidt, pft, 5, 0);
	LLVMValueRef slot = LLVMBuildBitCast(e->B, exec, LLVMPointerType(LLVMPointerType(pfty, 0), 0), "");
	LLVMValueRef pf = LLVMBuildLoad2(e->B, LLVMPointerType(pfty, 0), slot, "parallel_for");
	LLVMValueRef pa[5] = {exec, llvm_ref(e, sig->chunk), LLVMBuildBitCast(e->B, box, e->i8p, ""),
	                      i64c(e, sig->sp.n), i64c(e, sig->sp.grain)};
	LLVMBuildCall2(e->B, pfty, pf, pa, 5, "");
	LLVMBuildBr(e->B, done);
	LLVMPositionBuilderAtEnd(e->B, here);
	LLVMValueRef *b = calloc(na + 2, sizeof *b);
	FADC_ASSERT(b != NULL, "llvm: out of memory");
	memcpy(b, a, na * sizeof *b);
	b[na] = i64c(e, 0);
	b[na + 1] = i64c(e, sig->sp.n);
	LLVMBuildCall2(e->B, LLVMGlobalGetValueType(kfn), llvm_ref(e, kfn), b, na + 2, "");
	LLVMBuildBr(e->B, done);
	LLVMPositionBuilderAtEnd(e->B, done);
	if (sig->part) {
		// A GEMM split over K: its partial results added to C, here, after
		// every part (llvm_gemm.c, gemm_ksum).
		b[na] = b[na + 1] = i64c(e, -1);
		LLVMBuildCall2(e->B, LLVMGlobalGetValueType(kfn), llvm_ref(e, kfn), b, na + 2, "");
	}
	free(b);
}

// Kernel i of task program p as an internal function, taking what *sig
// lists (filled here).
// ---------------------------------------------------------------- shared kernels
// Derivative tasks repeat the same kernels many times: the vjp of resnet18
// recomputes the forward's, the initializers of equal-shaped parameters
// are equal, batch norm's statistics appear at every block of the same
// width.  A kernel's function depends only on its structure, so each
// distinct kernel is emitted once per module and every task calls it: 554
// kernels of resnet18's forward and vjp (reduced) are 174 functions.
//
// The key is a canonical serialization of everything emit_kernel reads:
// the loop extents, the reduction, the storage dtypes of the parameters,
// and the expression DAG of index, body and post numbered in depth-first
// order, with buffers and step counters replaced by their parameter
// positions (which are themselves assigned in that order, so two kernels
// that differ only in which buffers they touch get the same key).  Keys
// are compared byte for byte, never by hash alone.  Host kernels are not
// shared (their calls carry the shape of their operand).

typedef struct Key {
	uint8_t *b;
	size_t n, cap;
} Key;

typedef struct Shared {
	uint64_t hash;
	uint8_t *key;
	size_t len;
	LLVMValueRef fn;
	LLVMTypeRef argt; // a split kernel's chunk function and its argument struct
	LLVMValueRef chunk; // (shared_note_chunk)
} Shared;

static void
key_put(Key *k, const void *v, size_t n)
{
	if (k->n + n > k->cap) {
		size_t c = k->cap ? k->cap : 256;
		while (c < k->n + n)
			c *= 2;
		k->b = realloc(k->b, c);
		FADC_ASSERT(k->b != NULL, "llvm: out of memory");
		k->cap = c;
	}
	memcpy(k->b + k->n, v, n);
	k->n += n;
}

static void
key_i64(Key *k, int64_t v)
{
	key_put(k, &v, sizeof v);
}

// The walk's maps live as long as the task and are cleared entry by entry
// after each kernel (visited lists the expressions the walk numbered):
// allocating and clearing them per kernel was O(kernels x expressions),
// minutes for a chain of 16,000 statements.
typedef struct SigWalk {
	const KProgram *p;
	KSig *sig;
	Key *key;
	uint32_t *canon; // KxId -> canonical number + 1 (0: not visited)
	uint32_t ncanon;
	KxId *visited; // the ids numbered, canon[visited[0 .. ncanon)]
	int32_t *bufpos, *steppos; // buffer / loop -> parameter position + 1
	uint64_t *shape; // KxId -> shape_hash + 1 (0: not computed); the task's
} SigWalk;

static uint32_t
buf_param(SigWalk *w, uint32_t b)
{
	if (!w->bufpos[b]) {
		w->sig->bufs[w->sig->nbufs] = b;
		w->bufpos[b] = (int32_t)++w->sig->nbufs;
	}
	return (uint32_t)w->bufpos[b] - 1;
}

// A hash of the expression at id with which buffer a load reads and which
// loop a step counts left out (their dtypes kept): equal for the operands
// of x * w and w * x alike, so that sig_walk can put a commutative node's
// operands in one order.  Depends on the expression alone: memoized for
// the task (w->shape), never cleared.
static uint64_t
shape_hash(SigWalk *w, KxId id)
{
	if (!id)
		return 0;
	if (w->shape[id])
		return w->shape[id] - 1;
	const Kx *x = &w->p->x[id];
	uint64_t h = kx_node_fnv(w->p, x, 1); // the node, then its operands'
	for (int i = 0; i < x->nin; i++)
		h = kx_fnv_u64(h, shape_hash(w, x->a[i]));
	h >>= 1; // 63 bits: h + 1 is never 0
	w->shape[id] = h + 1;
	return h;
}

// Post-order: a node's operands have smaller canonical numbers.  The two
// operands of an addition or a product are walked (and keyed) in the order
// of their shape_hash, the one the expression gives on a tie: x * w and
// w * x get one key and their buffers the same parameter positions, so
// that a kernel that differs from another only in the order of such
// operands calls its function (detr: 18 of 201 GEMM kernels were such
// copies, compiled again; docs/CODEGEN.md "Compile time").  Exact: IEEE
// addition and multiplication are commutative (no fast-math flags; the
// GEMM takes its A and B from the index expressions, not the order).
static uint32_t
sig_walk(SigWalk *w, KxId id)
{
	if (!id)
		return 0;
	if (w->canon[id])
		return w->canon[id];
	const Kx *x = &w->p->x[id];
	Kx c = *x; // the node with operands and references made canonical
	int swap = (x->op == KX_ADD || x->op == KX_MUL) && x->nin == 2 &&
	           shape_hash(w, x->a[1]) < shape_hash(w, x->a[0]);
	for (int i = 0; i < x->nin; i++)
		c.a[i] = sig_walk(w, x->a[swap && i < 2 ? 1 - i : i]);
	if (x->op == KX_LOAD) {
		c.aux = buf_param(w, x->aux);
		key_i64(w->key, w->p->buf[x->aux].dtype);
	} else if (x->op == KX_STEP) {
		if (!w->steppos[x->aux]) {
			w->sig->steps[w->sig->nsteps] = (int)x->aux;
			w->steppos[x->aux] = (int32_t)++w->sig->nsteps;
		}
		c.aux = (uint32_t)w->steppos[x->aux] - 1;
	} else if (x->op == KX_RUNSEED || x->op == KX_RAND)
		w->sig->seed = 1;
	key_put(w->key, &c, sizeof c); // Kx has no padding holes: its bytes are its value
	w->visited[w->ncanon] = id;
	w->canon[id] = ++w->ncanon;
	return w->canon[id];
}

// What kernel k takes (sig: its buffers, out first, then in the order the
// expressions first read them; the seed; its loops' step counters) and its
// key.  w holds the task's cleared maps; sig->bufs and sig->steps are
// allocated here, as long as the kernel needs.
static void
kernel_sig(SigWalk *wk, const KKernel *k, KSig *sig, Key *key)
{
	const KProgram *p = wk->p;
	SigWalk w = *wk;
	w.sig = sig;
	w.key = key;
	w.ncanon = 0;
	uint32_t *bufs = sig->bufs; // the task's scratch, room for every buffer and loop
	int *steps = sig->steps;
	sig->nbufs = sig->nsteps = 0;
	sig->seed = 0;
	buf_param(&w, k->out);
	key_i64(key, p->buf[k->out].dtype);
	key_i64(key, k->rank);
	key_i64(key, k->rrank);
	key_i64(key, k->red);
	key_i64(key, k->contraction);
	for (int d = 0; d < k->rank; d++)
		key_i64(key, k->dim[d]);
	for (int d = 0; d < k->rrank; d++)
		key_i64(key, k->rdim[d]);
	key_i64(key, sig_walk(&w, k->index));
	key_i64(key, sig_walk(&w, k->body));
	key_i64(key, sig_walk(&w, k->post));
	if (k->host) {
		buf_param(&w, k->hin);
		buf_param(&w, k->hwork);
		key->n = 0; // never shared
	}
	for (uint32_t i = 0; i < w.ncanon; i++)
		w.canon[w.visited[i]] = 0;
	for (unsigned i = 0; i < sig->nbufs; i++)
		w.bufpos[bufs[i]] = 0;
	for (unsigned i = 0; i < sig->nsteps; i++)
		w.steppos[steps[i]] = 0;
	sig->bufs = malloc((sig->nbufs + 1) * sizeof *sig->bufs);
	sig->steps = malloc((sig->nsteps + 1) * sizeof *sig->steps);
	FADC_ASSERT(sig->bufs && sig->steps, "llvm: out of memory");
	memcpy(sig->bufs, bufs, sig->nbufs * sizeof *bufs);
	memcpy(sig->steps, steps, sig->nsteps * sizeof *steps);
}

static uint64_t
key_hash(const Key *k)
{
	uint64_t h = 14695981039346656037ull; // FNV-1a
	for (size_t i = 0; i < k->n; i++)
		h = (h ^ k->b[i]) * 1099511628211ull;
	return h;
}

// The function of an equal kernel emitted before, or NULL; a split
// kernel's sig also gets that function's chunk function.  With `here`,
// only one in the module being emitted (a small task inlines its kernels:
// it takes its own copy rather than a call into another piece).  The table
// is open addressing with linear probing, at most half full (a scan of
// every function emitted was quadratic when each kernel of a long program
// is its own); equal keys of several pieces are found in the order they
// were entered.
static LLVMValueRef
shared_find(Emit *e, const Key *k, KSig *sig, int here)
{
	if (!k->n || !e->nshash)
		return NULL;
	uint64_t h = key_hash(k);
	for (uint32_t j = (uint32_t)h & (e->nshash - 1);; j = (j + 1) & (e->nshash - 1)) {
		uint32_t i = e->shash[j];
		if (!i)
			return NULL;
		const Shared *s = &e->shared[i - 1];
		if (s->hash == h && s->len == k->n && !memcmp(s->key, k->b, k->n) &&
		    (!here || LLVMGetGlobalParent(s->fn) == e->M)) {
			sig->argt = s->argt;
			sig->chunk = s->chunk;
			return s->fn;
		}
	}
}

// Enters shared[i] in the hash table.
static void
shared_index(Emit *e, uint32_t i)
{
	for (uint32_t j = (uint32_t)e->shared[i].hash & (e->nshash - 1);; j = (j + 1) & (e->nshash - 1))
		if (!e->shash[j]) {
			e->shash[j] = i + 1;
			return;
		}
}

// Records the chunk function just emitted for kernel function fn.
static void
shared_note_chunk(Emit *e, LLVMValueRef fn, const KSig *sig)
{
	for (uint32_t i = e->nshared; i-- > 0;)
		if (e->shared[i].fn == fn) {
			e->shared[i].argt = sig->argt;
			e->shared[i].chunk = sig->chunk;
			return;
		}
}

// Records fn under key k, which it takes over (k->b is freed later).
static void
shared_add(Emit *e, Key *k, LLVMValueRef fn)
{
	if (!k->n) {
		free(k->b);
		return;
	}
	if (e->nshared == e->cshared) {
		e->cshared = e->cshared ? 2 * e->cshared : 64;
		e->shared = realloc(e->shared, e->cshared * sizeof *e->shared);
		FADC_ASSERT(e->shared != NULL, "llvm: out of memory");
	}
	e->shared[e->nshared++] = (Shared){key_hash(k), k->b, k->n, fn, NULL, NULL};
	k->b = NULL;
	if (2 * e->nshared > e->nshash) { // rebuild at twice the size
		free(e->shash);
		e->nshash = e->nshash ? 2 * e->nshash : 256;
		e->shash = calloc(e->nshash, sizeof *e->shash);
		FADC_ASSERT(e->shash != NULL, "llvm: out of memory");
		for (uint32_t i = 0; i < e->nshared; i++)
			shared_index(e, i);
	} else
		shared_index(e, e->nshared - 1);
}

// Kernels are inlined into their task's function only when the task has at
// most this many.  Inlining 426 kernels (resnet18's vjp, reduced) made one
// function of thousands of loops, on which the optimizer is super-linear
// (ScalarEvolution walks the dominating conditions of every loop back
// through the whole function): 80 s of CPU, against 7 s with one function
// per kernel.  A call per kernel costs nothing measurable against kernels
// of that size, nor against the ppl models' (docs/PERFORMANCE.md).
enum { INLINE_MAX_KERNELS = 96 };

// Kernel ki of the task as a function (or an equal one emitted before):
// in the task's module `tmod` when the task inlines its kernels, else in
// the piece of its own name.
static LLVMValueRef
emit_kernel(Emit *e, SigWalk *w, const char *task, uint32_t ki, KSig *sig, LLVMModuleRef tmod)
{
	const KProgram *p = e->p;
	const KKernel *k = &p->k[ki];
	Key key = {0};
	kernel_sig(w, k, sig, &key);
	uint32_t *bufs = sig->bufs;
	unsigned n = sig->nbufs, ns = sig->nsteps;
	int uses_seed = sig->seed;
	sig->sp = split_plan(p, k, e->vbytes, &sig->part);
	FADC_ASSERT(!sig->part || sig->sp.on, "llvm: a K-split GEMM not split for the pool");
	unsigned nlohi = sig->sp.on ? 2 : 0, npart = sig->part ? 1 : 0;
	int small = p->nk <= INLINE_MAX_KERNELS;
	e->M = tmod;
	LLVMValueRef same = shared_find(e, &key, sig, small);
	if (same) {
		free(key.b);
		if (p->nk > INLINE_MAX_KERNELS)
			fn_attr(e, same, LLVMAttributeFunctionIndex, "noinline");
		return same;
	}
	LLVMTypeRef *pt = calloc(n + ns + 4, sizeof *pt);
	FADC_ASSERT(pt != NULL, "llvm: out of memory");
	for (unsigned i = 0; i < n; i++)
		pt[i] = LLVMPointerType(sty(e, p->buf[bufs[i]].dtype), 0);
	if (uses_seed)
		pt[n] = e->i64;
	for (unsigned i = 0; i < ns + npart + nlohi; i++)
		pt[n + (unsigned)uses_seed + i] = e->i64;
	if (npart)
		pt[n + (unsigned)uses_seed + ns] = e->i8p;
	LLVMTypeRef fty = LLVMFunctionType(k->host ? e->i32 : e->voidt, pt,
	                                   n + (unsigned)uses_seed + ns + npart + nlohi, 0);
	free(pt);
	char name[300];
	snprintf(name, sizeof name, "%s.k%u.%s", task, ki, k->what);
	if (!small)
		e->M = piece_of(e, name);
	LLVMValueRef fn = LLVMAddFunction(e->M, name, fty);
	shared_add(e, &key, fn);
	LLVMSetLinkage(fn, LLVMInternalLinkage);
	fn_attr(e, fn, LLVMAttributeFunctionIndex, "nounwind");
	fn_wide(e, fn);
	if (p->nk > INLINE_MAX_KERNELS)
		fn_attr(e, fn, LLVMAttributeFunctionIndex, "noinline");
	for (unsigned i = 0; i < n; i++)
		fn_attr(e, fn, i + 1, "noalias");
	e->fn = fn;
	for (unsigned i = 0; i < n; i++)
		e->bufptr[bufs[i]] = LLVMGetParam(fn, i);
	e->runseed = uses_seed ? LLVMGetParam(fn, n) : NULL;
	for (uint32_t l = 0; l < p->nloop; l++)
		e->step[l] = NULL;
	for (unsigned i = 0; i < ns; i++)
		e->step[sig->steps[i]] = LLVMGetParam(fn, n + (unsigned)uses_seed + i);
	e->sp = sig->sp;
	e->part = npart ? LLVMGetParam(fn, n + (unsigned)uses_seed + ns) : NULL;
	e->lo = sig->sp.on ? LLVMGetParam(fn, n + (unsigned)uses_seed + ns + npart) : NULL;
	e->hi = sig->sp.on ? LLVMGetParam(fn, n + (unsigned)uses_seed + ns + npart + 1) : NULL;
	LLVMBasicBlockRef entry = LLVMAppendBasicBlockInContext(e->C, fn, "entry");
	LLVMPositionBuilderAtEnd(e->B, entry);
	if (k->host) {
		emit_host(e, k);
		return fn;
	}
	int nv = k->rank + k->rrank;
	for (int v = 0; v < nv; v++)
		e->var[v] = LLVMBuildAlloca(e->B, e->i64, "");
	KxId val = k->red ? k->post : k->body;
	DType vt = (DType)p->x[k->body].dtype;
	if (k->red)
		e->acc = LLVMBuildAlloca(e->B, ty(e, vt), "acc");
	Loop loops[2 * IR_MAXDIM];
	DType st = p->buf[k->out].dtype;
	Gemm G;
	if (llvm_gemm_plan(p, k, e->vbytes, &G)) {
		llvm_emit_gemm(e, k, &G, loops);
		LLVMBuildRetVoid(e->B);
		return fn;
	}
	if (contraction_loops(p, k)) {
		emit_contraction(e, k, loops);
		LLVMBuildRetVoid(e->B);
		return fn;
	}
	par_begin(e, k, loops, k->rank);
	if (k->red && k->red == KR_SUM && k->rrank >= 1 && k->rdim[k->rrank - 1] >= SPLIT_MIN &&
	    (vt == DT_F32 || vt == DT_F64))
		emit_split_sum(e, k, loops);
	else if (k->red) {
		LLVMBuildStore(e->B, red_init(e, k->red, vt), e->acc);
		for (int d = 0; d < k->rrank; d++)
			llvm_loop_begin(e, &loops[k->rank + d], e->var[k->rank + d], k->rdim[d]);
		new_region(e);
		LLVMValueRef v = llvm_emit_x(e, k->body);
		LLVMValueRef a = LLVMBuildLoad2(e->B, ty(e, vt), e->acc, "");
		LLVMBuildStore(e->B, red_combine(e, k->red, vt, a, v), e->acc);
		for (int d = k->rrank - 1; d >= 0; d--)
			llvm_loop_end(e, &loops[k->rank + d]);
	}
	new_region(e);
	e->vecmath = !k->red; // an elementwise kernel's innermost loop vectorizes
	LLVMValueRef v = llvm_emit_x(e, val), idx = llvm_emit_x(e, k->index);
	e->vecmath = 0;
	DType ct = (DType)p->x[val].dtype;
	if (st == DT_BOOL)
		v = LLVMBuildZExt(e->B, v, e->i8, "");
	else
		v = llvm_convert(e, v, ct, st, 0);
	LLVMValueRef ptr = LLVMBuildInBoundsGEP2(e->B, sty(e, st), e->bufptr[k->out], &idx, 1, "");
	LLVMBuildStore(e->B, v, ptr);
	par_end(e, loops, k->rank);
	LLVMBuildRetVoid(e->B);
	return fn;
}

// The typed pointer to buffer kb in the task's call.
static LLVMValueRef
buf_ptr(Emit *e, const KBuf *kb, LLVMValueRef in, LLVMValueRef out, LLVMValueRef arena)
{
	LLVMValueRef raw;
	if (kb->kind == KB_TMP) {
		LLVMValueRef off = LLVMConstInt(e->i64, (unsigned long long)kb->offset, 0);
		raw = LLVMBuildInBoundsGEP2(e->B, e->i8, arena, &off, 1, "");
	} else {
		LLVMValueRef ix = LLVMConstInt(e->i64, (unsigned long long)kb->index, 0);
		LLVMValueRef slot = LLVMBuildInBoundsGEP2(e->B, e->i8p, kb->kind == KB_IN ? in : out, &ix, 1, "");
		raw = LLVMBuildLoad2(e->B, e->i8p, slot, "");
	}
	return LLVMBuildBitCast(e->B, raw, LLVMPointerType(sty(e, kb->dtype), 0), "");
}

// Kernels k0 .. k1 - 1 of the task, called in order from fn (its entry
// block open, e->fn == fn): buffer pointers from the call and the arena,
// then the kernels, inside the loops of the program (a counter per loop,
// kept in an alloca that mem2reg promotes, passed to the kernels that use
// it), then `ret 0`.  A host kernel's nonzero result returns at once.  The
// whole task (k0 = 0, k1 = nk) computes every buffer's pointer up front; a
// part only those its kernels use, at their first use.
static void
emit_calls(Emit *e, LLVMValueRef fn, const KSig *sig, LLVMValueRef *kfn, uint32_t k0, uint32_t k1,
           LLVMValueRef *taskptr, Loop *loops)
{
	const KProgram *p = e->p;
	int whole = k0 == 0 && k1 == p->nk;
	LLVMValueRef *ctr = calloc(p->nloop + 1, sizeof *ctr);
	FADC_ASSERT(ctr != NULL, "llvm: out of memory");
	for (uint32_t l = 0; l < p->nloop; l++)
		if (whole || (p->loop[l].begin >= k0 && p->loop[l].begin < k1))
			ctr[l] = LLVMBuildAlloca(e->B, e->i64, "step");
	LLVMValueRef call = LLVMGetParam(fn, 0);
	LLVMValueRef fin = LLVMBuildStructGEP2(e->B, e->callt, call, 0, "");
	LLVMValueRef fout = LLVMBuildStructGEP2(e->B, e->callt, call, 1, "");
	LLVMValueRef farena = LLVMBuildStructGEP2(e->B, e->callt, call, 2, "");
	LLVMValueRef fseed = LLVMBuildStructGEP2(e->B, e->callt, call, 3, "");
	LLVMValueRef in = LLVMBuildLoad2(e->B, e->i8pp, fin, "in");
	LLVMValueRef out = LLVMBuildLoad2(e->B, e->i8pp, fout, "out");
	LLVMValueRef arena = LLVMBuildLoad2(e->B, e->i8p, farena, "arena");
	LLVMValueRef seed = LLVMBuildLoad2(e->B, e->i64, fseed, "runseed");
	LLVMValueRef fexec = LLVMBuildStructGEP2(e->B, e->callt, call, 4, "");
	LLVMValueRef exec = LLVMBuildLoad2(e->B, e->i8p, fexec, "exec");
	if (whole) // every buffer, in order
		for (uint32_t b = 0; b < p->nbuf; b++)
			taskptr[b] = buf_ptr(e, &p->buf[b], in, out, arena);
	else // those the part's kernels take, in the order they first do
		for (uint32_t i = k0; i < k1; i++)
			for (unsigned j = 0; j < sig[i].nbufs; j++) {
				uint32_t b = sig[i].bufs[j];
				if (!taskptr[b])
					taskptr[b] = buf_ptr(e, &p->buf[b], in, out, arena);
			}
	for (uint32_t i = k0; i < k1; i++) {
		// Loops starting here, outer first (lower index); empty ones never do.
		for (uint32_t l = 0; l < p->nloop; l++)
			if (p->loop[l].begin == i && p->loop[l].end > i)
				llvm_loop_begin(e, &loops[l], ctr[l], p->loop[l].trip);
		const KSig *sg = &sig[i];
		unsigned n = sg->nbufs;
		LLVMValueRef *a = calloc(n + sg->nsteps + 2, sizeof *a);
		FADC_ASSERT(a != NULL, "llvm: out of memory");
		for (unsigned j = 0; j < n; j++)
			a[j] = taskptr[sg->bufs[j]];
		if (sg->seed)
			a[n++] = seed;
		for (unsigned j = 0; j < sg->nsteps; j++)
			a[n++] = LLVMBuildLoad2(e->B, e->i64, ctr[sg->steps[j]], "");
		if (sg->part)
			a[n++] = llvm_gemm_part(e);
		LLVMValueRef r = NULL;
		if (sg->sp.on)
			emit_split_call(e, kfn[i], sg, a, n, exec);
		else
			r = LLVMBuildCall2(e->B, LLVMGlobalGetValueType(kfn[i]), llvm_ref(e, kfn[i]), a, n, "");
		free(a);
		if (p->k[i].host) {
			LLVMBasicBlockRef fail = LLVMAppendBasicBlockInContext(e->C, fn, "host.fail");
			LLVMBasicBlockRef ok = LLVMAppendBasicBlockInContext(e->C, fn, "host.ok");
			LLVMValueRef bad = LLVMBuildICmp(e->B, LLVMIntNE, r, LLVMConstInt(e->i32, 0, 0), "");
			LLVMBuildCondBr(e->B, bad, fail, ok);
			LLVMPositionBuilderAtEnd(e->B, fail);
			LLVMBuildRet(e->B, r);
			LLVMPositionBuilderAtEnd(e->B, ok);
		}
		// Loops ending here, inner first.
		for (uint32_t l = p->nloop; l-- > 0;)
			if (p->loop[l].end == i + 1 && p->loop[l].begin <= i)
				llvm_loop_end(e, &loops[l]);
	}
	LLVMBuildRet(e->B, LLVMConstInt(e->i32, 0, 0));
	free(ctr);
}

// ---------------------------------------------------------------- call tables
// A big task's kernels outside the program's loops are not called one by
// one from straight-line code: they are rows of a constant table that a
// loop in the task function walks, calling each row's thunk with the row's
// arguments (emit_table).  Straight-line calls cost LLVM's code generator
// about 0.2 ms each (selection, scheduling, register allocation of every
// call's arguments), and the default tasks of a chain of 16,000 statements
// call 80,000 kernels: 55 s.  A row costs a few words of data instead, and
// the code is one thunk per kernel function, however often it is called.
//
// A thunk `i32 (fadc_call_v1 *call, const i64 *arg)` turns the row's
// codes into the kernel's pointers, passes the run seed if the kernel
// takes it, calls it (through exec's parallel_for if it is split) and
// returns a host kernel's result (0 for the others).  A code is
// (offset << 2) for a temporary at that offset in the arena, (index << 2)
// | 1 for input `index`, (index << 2) | 2 for output `index`: one kernel
// function may be called on an input in one row and on a temporary in the
// next.

static uint64_t
arg_code(const KBuf *kb)
{
	switch (kb->kind) {
	case KB_TMP:
		return (uint64_t)kb->offset << 2;
	case KB_IN:
		return (uint64_t)kb->index << 2 | 1;
	default:
		return (uint64_t)kb->index << 2 | 2;
	}
}

// The pointer that code c (an i64 value) stands for, of type t.
static LLVMValueRef
arg_decode(Emit *e, LLVMValueRef c, LLVMValueRef in, LLVMValueRef out, LLVMValueRef arena, LLVMTypeRef t)
{
	LLVMValueRef kind = LLVMBuildAnd(e->B, c, i64c(e, 3), "");
	LLVMValueRef v = LLVMBuildLShr(e->B, c, i64c(e, 2), "");
	LLVMBasicBlockRef tmp = LLVMAppendBasicBlockInContext(e->C, e->fn, "arg.tmp");
	LLVMBasicBlockRef io = LLVMAppendBasicBlockInContext(e->C, e->fn, "arg.io");
	LLVMBasicBlockRef join = LLVMAppendBasicBlockInContext(e->C, e->fn, "arg.join");
	LLVMBuildCondBr(e->B, LLVMBuildICmp(e->B, LLVMIntEQ, kind, i64c(e, 0), ""), tmp, io);
	LLVMPositionBuilderAtEnd(e->B, tmp);
	LLVMValueRef pt = LLVMBuildInBoundsGEP2(e->B, e->i8, arena, &v, 1, "");
	LLVMBuildBr(e->B, join);
	LLVMPositionBuilderAtEnd(e->B, io);
	LLVMValueRef base = LLVMBuildSelect(e->B, LLVMBuildICmp(e->B, LLVMIntEQ, kind, i64c(e, 1), ""), in, out, "");
	LLVMValueRef pio = LLVMBuildLoad2(e->B, e->i8p, LLVMBuildInBoundsGEP2(e->B, e->i8p, base, &v, 1, ""), "");
	LLVMBuildBr(e->B, join);
	LLVMPositionBuilderAtEnd(e->B, join);
	LLVMValueRef phi = LLVMBuildPhi(e->B, e->i8p, "");
	LLVMValueRef vals[2] = {pt, pio};
	LLVMBasicBlockRef from[2] = {tmp, io};
	LLVMAddIncoming(phi, vals, from, 2);
	return LLVMBuildBitCast(e->B, phi, t, "");
}

static uint32_t
thunk_slot(const Emit *e, LLVMValueRef kfn)
{
	uintptr_t h = (uintptr_t)kfn;
	h ^= h >> 17;
	h *= 0x9e3779b97f4a7c15u;
	return (uint32_t)(h >> 20) & (e->nthhash - 1);
}

// The thunk of kernel function kfn; sg is one of its calls' signatures
// (every call of one function has the same layout: it is part of the
// function's key).  Emitted at the first call; the builder is left where
// it was.
static LLVMValueRef
thunk_of(Emit *e, LLVMValueRef kfn, const KSig *sg)
{
	if (2 * (e->nthunk + 1) > e->nthhash) { // rebuild at twice the size
		uint32_t old = e->nthhash;
		LLVMValueRef *ok = e->thkey, *ov = e->thval;
		e->nthhash = old ? 2 * old : 256;
		e->thkey = calloc(e->nthhash, sizeof *e->thkey);
		e->thval = calloc(e->nthhash, sizeof *e->thval);
		FADC_ASSERT(e->thkey && e->thval, "llvm: out of memory");
		for (uint32_t i = 0; i < old; i++)
			if (ok[i]) {
				uint32_t j = thunk_slot(e, ok[i]);
				while (e->thkey[j])
					j = (j + 1) & (e->nthhash - 1);
				e->thkey[j] = ok[i];
				e->thval[j] = ov[i];
			}
		free(ok);
		free(ov);
	}
	uint32_t j = thunk_slot(e, kfn);
	for (; e->thkey[j]; j = (j + 1) & (e->nthhash - 1))
		if (e->thkey[j] == kfn)
			return e->thval[j];
	LLVMBasicBlockRef back = LLVMGetInsertBlock(e->B);
	LLVMValueRef backfn = e->fn;
	LLVMModuleRef backmod = e->M;
	e->M = LLVMGetGlobalParent(kfn); // the thunk goes with its kernel
	size_t len;
	char name[320];
	snprintf(name, sizeof name, "%s.thunk", LLVMGetValueName2(kfn, &len));
	LLVMValueRef th = LLVMAddFunction(e->M, name, e->thunkfn);
	LLVMSetLinkage(th, LLVMInternalLinkage);
	fn_attr(e, th, LLVMAttributeFunctionIndex, "nounwind");
	e->fn = th;
	LLVMPositionBuilderAtEnd(e->B, LLVMAppendBasicBlockInContext(e->C, th, "entry"));
	LLVMValueRef call = LLVMGetParam(th, 0), arg = LLVMGetParam(th, 1);
	LLVMValueRef in = LLVMBuildLoad2(e->B, e->i8pp, LLVMBuildStructGEP2(e->B, e->callt, call, 0, ""), "in");
	LLVMValueRef out = LLVMBuildLoad2(e->B, e->i8pp, LLVMBuildStructGEP2(e->B, e->callt, call, 1, ""), "out");
	LLVMValueRef arena = LLVMBuildLoad2(e->B, e->i8p, LLVMBuildStructGEP2(e->B, e->callt, call, 2, ""), "arena");
	LLVMTypeRef kty = LLVMGlobalGetValueType(kfn);
	unsigned n = sg->nbufs;
	FADC_ASSERT(sg->nsteps == 0, "llvm: a kernel in a loop of the program in a call table");
	LLVMTypeRef *pt = calloc(LLVMCountParamTypes(kty) + 1, sizeof *pt);
	LLVMValueRef *a = calloc(n + 2, sizeof *a);
	FADC_ASSERT(pt && a, "llvm: out of memory");
	LLVMGetParamTypes(kty, pt);
	for (unsigned i = 0; i < n; i++) {
		LLVMValueRef ix = LLVMConstInt(e->i64, i, 0);
		LLVMValueRef c = LLVMBuildLoad2(e->B, e->i64, LLVMBuildInBoundsGEP2(e->B, e->i64, arg, &ix, 1, ""), "");
		a[i] = arg_decode(e, c, in, out, arena, pt[i]);
	}
	if (sg->seed)
		a[n++] = LLVMBuildLoad2(e->B, e->i64, LLVMBuildStructGEP2(e->B, e->callt, call, 3, ""), "runseed");
	if (sg->part)
		a[n++] = llvm_gemm_part(e);
	LLVMValueRef r = NULL;
	if (sg->sp.on) {
		LLVMValueRef exec =
			LLVMBuildLoad2(e->B, e->i8p, LLVMBuildStructGEP2(e->B, e->callt, call, 4, ""), "exec");
		emit_split_call(e, kfn, sg, a, n, exec);
	} else
		r = LLVMBuildCall2(e->B, kty, kfn, a, n, "");
	LLVMBuildRet(e->B, LLVMGetReturnType(kty) == e->i32 ? r : LLVMConstInt(e->i32, 0, 0));
	free(pt);
	free(a);
	e->thkey[j] = kfn;
	e->thval[j] = th;
	e->nthunk++;
	e->fn = backfn;
	e->M = backmod;
	LLVMPositionBuilderAtEnd(e->B, back);
	return th;
}

// Kernels k0 .. k1 - 1 (none in a loop of the program) as table n of the
// task, walked by a loop emitted at the builder's place in fn (e->fn ==
// fn): rows of thunk numbers (into the table's own list of thunks) and
// the offsets of their arguments in one array of codes; a nonzero result
// returns at once.
static void
emit_table(Emit *e, LLVMValueRef fn, const char *task, unsigned n, const KSig *sig, LLVMValueRef *kfn,
           uint32_t k0, uint32_t k1)
{
	const KProgram *p = e->p;
	uint32_t nrow = k1 - k0, nth = 0, narg = 0;
	LLVMValueRef *ths = calloc(nrow + 1, sizeof *ths);
	LLVMValueRef *rowth = calloc(nrow + 1, sizeof *rowth);
	LLVMValueRef *rowoff = calloc(nrow + 1, sizeof *rowoff);
	for (uint32_t i = k0; i < k1; i++)
		narg += sig[i].nbufs;
	LLVMValueRef *codes = calloc(narg + 1, sizeof *codes);
	FADC_ASSERT(ths && rowth && rowoff && codes, "llvm: out of memory");
	// The table's thunks are numbered in order of first use; a thunk's
	// number is found back through its entry in thval (thunk_of's map
	// returns the same LLVMValueRef), by a map local to the table.
	LLVMValueRef *lkey = NULL;
	uint32_t *lval = NULL, nl = 16;
	while (nl < 2 * nrow)
		nl *= 2;
	lkey = calloc(nl, sizeof *lkey);
	lval = calloc(nl, sizeof *lval);
	FADC_ASSERT(lkey && lval, "llvm: out of memory");
	narg = 0;
	for (uint32_t i = k0; i < k1; i++) {
		LLVMValueRef th = thunk_of(e, kfn[i], &sig[i]);
		uintptr_t h = (uintptr_t)th;
		h ^= h >> 17;
		h *= 0x9e3779b97f4a7c15u;
		uint32_t j = (uint32_t)(h >> 20) & (nl - 1);
		while (lkey[j] && lkey[j] != th)
			j = (j + 1) & (nl - 1);
		if (!lkey[j]) {
			lkey[j] = th;
			lval[j] = nth;
			ths[nth++] = llvm_ref(e, th);
		}
		rowth[i - k0] = LLVMConstInt(e->i32, lval[j], 0);
		rowoff[i - k0] = LLVMConstInt(e->i32, narg, 0);
		for (unsigned b = 0; b < sig[i].nbufs; b++)
			codes[narg++] = LLVMConstInt(e->i64, arg_code(&p->buf[sig[i].bufs[b]]), 0);
	}
	free(lkey);
	free(lval);
	LLVMTypeRef thp = LLVMPointerType(e->thunkfn, 0);
	char name[300];
	LLVMValueRef g[4];
	LLVMValueRef init[4] = {LLVMConstArray(thp, ths, nth), LLVMConstArray(e->i32, rowth, nrow),
	                        LLVMConstArray(e->i32, rowoff, nrow), LLVMConstArray(e->i64, codes, narg)};
	static const char *const what[4] = {"thunks", "rows", "offsets", "codes"};
	for (int i = 0; i < 4; i++) {
		snprintf(name, sizeof name, "task.%s.table%u.%s", task, n, what[i]);
		g[i] = LLVMAddGlobal(e->M, LLVMTypeOf(init[i]), name);
		LLVMSetInitializer(g[i], init[i]);
		LLVMSetGlobalConstant(g[i], 1);
		LLVMSetLinkage(g[i], LLVMInternalLinkage);
	}
	free(ths);
	free(rowth);
	free(rowoff);
	free(codes);
	// for (r = 0; r < nrow; r++) { s = thunks[rows[r]](call, &codes[offsets[r]]); if (s) return s; }
	Loop l;
	llvm_loop_begin(e, &l, llvm_entry_alloca(e, e->i64), nrow);
	LLVMValueRef r = LLVMBuildLoad2(e->B, e->i64, l.ctr, "row");
	LLVMValueRef zr[2] = {i64c(e, 0), r};
	LLVMValueRef ti = LLVMBuildLoad2(e->B, e->i32, LLVMBuildInBoundsGEP2(e->B, LLVMTypeOf(init[1]), g[1], zr, 2, ""), "");
	LLVMValueRef off = LLVMBuildLoad2(e->B, e->i32, LLVMBuildInBoundsGEP2(e->B, LLVMTypeOf(init[2]), g[2], zr, 2, ""), "");
	LLVMValueRef zt[2] = {i64c(e, 0), LLVMBuildZExt(e->B, ti, e->i64, "")};
	LLVMValueRef th = LLVMBuildLoad2(e->B, thp, LLVMBuildInBoundsGEP2(e->B, LLVMTypeOf(init[0]), g[0], zt, 2, ""), "thunk");
	LLVMValueRef zo[2] = {i64c(e, 0), LLVMBuildZExt(e->B, off, e->i64, "")};
	LLVMValueRef args[2] = {LLVMGetParam(fn, 0), LLVMBuildInBoundsGEP2(e->B, LLVMTypeOf(init[3]), g[3], zo, 2, "")};
	LLVMValueRef s = LLVMBuildCall2(e->B, e->thunkfn, th, args, 2, "");
	LLVMBasicBlockRef fail = LLVMAppendBasicBlockInContext(e->C, fn, "row.fail");
	LLVMBasicBlockRef ok = LLVMAppendBasicBlockInContext(e->C, fn, "row.ok");
	LLVMBuildCondBr(e->B, LLVMBuildICmp(e->B, LLVMIntNE, s, LLVMConstInt(e->i32, 0, 0), ""), fail, ok);
	LLVMPositionBuilderAtEnd(e->B, fail);
	LLVMBuildRet(e->B, s);
	LLVMPositionBuilderAtEnd(e->B, ok);
	llvm_loop_end(e, &l);
}

// A task of more than PART_KERNELS kernels calls those outside the
// program's loops from call tables (above), and those in loops from part
// functions of about PART_KERNELS each, which the task function calls in
// turn.  One function of tens of thousands of calls is quadratic in LLVM's
// register allocator (every value live across the calls is checked against
// each call's clobbers: checkRegMaskInterference), which made 90% of the
// time of compiling a chain of 4,000 statements (20,000 kernels in its
// vhp); parts bound each function, so the time is linear in the kernels
// (parts of 512 kernels were no faster than 128 on the chain), and tables
// make that time a few words of data per call.  A part ends only where no
// loop of the program is open (a scan's kernels stay in one function, with
// the loop's counter).  Smaller tasks keep their one function.
enum { PART_KERNELS = 128 };

static LLVMValueRef
emit_task(Emit *e, const CgTask *t)
{
	const KProgram *p = t->prog;
	e->p = p;
	e->val = calloc(p->nx + 1, sizeof *e->val);
	e->stamp = calloc(p->nx + 1, sizeof *e->stamp);
	e->bufptr = calloc(p->nbuf + 1, sizeof *e->bufptr);
	e->step = calloc(p->nloop + 1, sizeof *e->step);
	LLVMValueRef *taskptr = calloc(p->nbuf + 1, sizeof *taskptr);
	LLVMValueRef *kfn = calloc(p->nk + 1, sizeof *kfn);
	KSig *sig = calloc(p->nk + 1, sizeof *sig);
	Loop *loops = calloc(p->nloop + 1, sizeof *loops);
	SigWalk w = {p, NULL, NULL, calloc(p->nx + 1, sizeof *w.canon), 0, calloc(p->nx + 1, sizeof *w.visited),
	             calloc(p->nbuf + 1, sizeof *w.bufpos), calloc(p->nloop + 1, sizeof *w.steppos),
	             calloc(p->nx + 1, sizeof *w.shape)};
	uint32_t *sbufs = calloc(p->nbuf + 1, sizeof *sbufs);
	int *ssteps = calloc(p->nloop + 1, sizeof *ssteps);
	FADC_ASSERT(e->val && e->stamp && e->bufptr && e->step && taskptr && kfn && sig && loops && w.canon &&
	                    w.visited && w.bufpos && w.steppos && w.shape && sbufs && ssteps,
	            "llvm: out of memory");
	e->region = 0;
	char name[300];
	snprintf(name, sizeof name, "task.%s", t->name);
	LLVMModuleRef tmod = piece_of(e, name);
	for (uint32_t i = 0; i < p->nk; i++) {
		sig[i].bufs = sbufs; // kernel_sig replaces them by the kernel's own
		sig[i].steps = ssteps;
		kfn[i] = emit_kernel(e, &w, t->name, i, &sig[i], tmod);
		if (sig[i].sp.on && !sig[i].chunk) { // a shared kernel has its chunk already
			e->M = LLVMGetGlobalParent(kfn[i]);
			emit_chunk_fn(e, kfn[i], &sig[i]);
			shared_note_chunk(e, kfn[i], &sig[i]);
		}
	}
	free(w.canon);
	free(w.visited);
	free(w.bufpos);
	free(w.steppos);
	free(w.shape);
	free(sbufs);
	free(ssteps);
	e->sp.on = 0;
	e->M = tmod;
	LLVMValueRef fn = LLVMAddFunction(e->M, name, e->taskfn);
	LLVMSetLinkage(fn, LLVMInternalLinkage);
	fn_attr(e, fn, LLVMAttributeFunctionIndex, "nounwind");
	fn_wide(e, fn);
	e->fn = fn;
	LLVMBasicBlockRef entry = LLVMAppendBasicBlockInContext(e->C, fn, "entry");
	LLVMPositionBuilderAtEnd(e->B, entry);
	if (p->nk <= PART_KERNELS)
		emit_calls(e, fn, sig, kfn, 0, p->nk, taskptr, loops);
	else {
		// open[i]: how many loops are open between kernels i - 1 and i (a
		// part may start at kernel i only when none is); inloop[i]: how
		// many loops kernel i is in.
		int *open = calloc(p->nk + 2, sizeof *open);
		int *inloop = calloc(p->nk + 2, sizeof *inloop);
		FADC_ASSERT(open && inloop, "llvm: out of memory");
		for (uint32_t l = 0; l < p->nloop; l++)
			if (p->loop[l].end > p->loop[l].begin) {
				open[p->loop[l].begin + 1]++;
				open[p->loop[l].end]--;
				inloop[p->loop[l].begin]++;
				inloop[p->loop[l].end]--;
			}
		for (uint32_t i = 1; i <= p->nk; i++) {
			open[i] += open[i - 1];
			inloop[i] += inloop[i - 1];
		}
		LLVMValueRef call = LLVMGetParam(fn, 0);
		unsigned part = 0, table = 0;
		for (uint32_t k0 = 0, k1; k0 < p->nk; k0 = k1) {
			if (!inloop[k0]) { // a run of kernels outside the loops: a table
				for (k1 = k0 + 1; k1 < p->nk && !inloop[k1]; k1++)
					;
				emit_table(e, fn, t->name, table++, sig, kfn, k0, k1);
				continue;
			}
			// Kernels in loops: parts of straight-line calls, as many as
			// PART_KERNELS each, ending where no loop is open.
			for (k1 = k0 + 1; k1 < p->nk && inloop[k1] && (open[k1] || k1 - k0 < PART_KERNELS); k1++)
				;
			snprintf(name, sizeof name, "task.%s.part%u", t->name, part++);
			e->M = piece_of(e, name);
			LLVMValueRef pf = LLVMAddFunction(e->M, name, e->taskfn);
			LLVMSetLinkage(pf, LLVMInternalLinkage);
			fn_attr(e, pf, LLVMAttributeFunctionIndex, "nounwind");
			fn_attr(e, pf, LLVMAttributeFunctionIndex, "noinline");
			fn_wide(e, pf);
			LLVMBasicBlockRef at = LLVMGetInsertBlock(e->B); // where fn goes on (a table's loop appends blocks after it)
			e->fn = pf;
			LLVMPositionBuilderAtEnd(e->B, LLVMAppendBasicBlockInContext(e->C, pf, "entry"));
			memset(taskptr, 0, (p->nbuf + 1) * sizeof *taskptr); // the part's own values
			emit_calls(e, pf, sig, kfn, k0, k1, taskptr, loops);
			// In the task function: r = part(call); if (r) return r.
			e->fn = fn;
			e->M = tmod;
			LLVMPositionBuilderAtEnd(e->B, at);
			LLVMValueRef r = LLVMBuildCall2(e->B, e->taskfn, llvm_ref(e, pf), &call, 1, "");
			LLVMBasicBlockRef fail = LLVMAppendBasicBlockInContext(e->C, fn, "part.fail");
			LLVMBasicBlockRef ok = LLVMAppendBasicBlockInContext(e->C, fn, "part.ok");
			LLVMBuildCondBr(e->B, LLVMBuildICmp(e->B, LLVMIntNE, r, LLVMConstInt(e->i32, 0, 0), ""), fail,
			                ok);
			LLVMPositionBuilderAtEnd(e->B, fail);
			LLVMBuildRet(e->B, r);
			LLVMPositionBuilderAtEnd(e->B, ok);
		}
		LLVMBuildRet(e->B, LLVMConstInt(e->i32, 0, 0));
		free(open);
		free(inloop);
	}
	for (uint32_t i = 0; i < p->nk; i++) {
		free(sig[i].bufs);
		free(sig[i].steps);
	}
	free(sig);
	free(loops);
	free(kfn);
	free(taskptr);
	free(e->val);
	free(e->stamp);
	free(e->bufptr);
	free(e->step);
	e->val = e->bufptr = e->step = NULL;
	e->stamp = NULL;
	return fn;
}

// @fadc_artifact_v1: returns the constant fadc_abi_v1 table.  With
// several CPU levels, each higher one with code of its own (docs/ARTIFACT.md
// "CPU levels") gets an entry of its own, @fadc_artifact_v1.CPU, whose
// table lists its task functions by name (more[j * ntasks + i] for level
// cpus[j]: NAME.CPU, or level 0's where its piece is shared); one
// descriptor for all.
static void
emit_entry(Emit *e, LLVMValueRef *taskfns, int ntasks, const uint8_t *desc, size_t desclen,
           char *const *more, int nmore, const char *const *cpus)
{
	e->M = e->mods[e->nmods - 1];
	for (int i = 0; i < ntasks; i++)
		taskfns[i] = llvm_ref(e, taskfns[i]);
	LLVMTypeRef tfp = LLVMPointerType(e->taskfn, 0);
	LLVMValueRef dstr = NULL, gd = NULL;
	LLVMTypeRef abit = NULL;
	LLVMValueRef zero[2] = {LLVMConstInt(e->i32, 0, 0), LLVMConstInt(e->i32, 0, 0)};
	for (int j = -1; j < nmore; j++) { // level 0, then the others
		char sfx[48] = "";
		if (j >= 0) {
			snprintf(sfx, sizeof sfx, ".%s", cpus[j]);
			for (int i = 0; i < ntasks; i++) {
				const char *nm = more[(size_t)j * (size_t)ntasks + (size_t)i];
				LLVMValueRef d = LLVMGetNamedFunction(e->M, nm);
				if (!d) {
					d = LLVMAddFunction(e->M, nm, e->taskfn);
					LLVMSetVisibility(d, LLVMHiddenVisibility);
					fn_attr(e, d, LLVMAttributeFunctionIndex, "nounwind");
				}
				taskfns[i] = d;
			}
		}
		char name[96];
		LLVMValueRef tarr = LLVMConstArray(tfp, taskfns, (unsigned)ntasks);
		snprintf(name, sizeof name, "fadc.tasks%s", sfx);
		LLVMValueRef gt = LLVMAddGlobal(e->M, LLVMTypeOf(tarr), name);
		LLVMSetInitializer(gt, tarr);
		LLVMSetGlobalConstant(gt, 1);
		LLVMSetLinkage(gt, LLVMInternalLinkage);
		if (!gd) {
			dstr = LLVMConstStringInContext(e->C, (const char *)desc, (unsigned)desclen, 1);
			gd = LLVMAddGlobal(e->M, LLVMTypeOf(dstr), "fadc.descriptor");
			LLVMSetInitializer(gd, dstr);
			LLVMSetGlobalConstant(gd, 1);
			LLVMSetLinkage(gd, LLVMInternalLinkage);
			LLVMTypeRef abifields[5] = {e->i32, e->i32, e->i8p, e->i64, LLVMPointerType(tfp, 0)};
			abit = LLVMStructCreateNamed(e->C, "fadc_abi_v1");
			LLVMStructSetBody(abit, abifields, 5, 0);
		}
		LLVMValueRef fields[5] = {
			LLVMConstInt(e->i32, FADC_ABI_VERSION, 0),
			LLVMConstInt(e->i32, (unsigned long long)ntasks, 0),
			LLVMConstInBoundsGEP2(LLVMTypeOf(dstr), gd, zero, 2),
			LLVMConstInt(e->i64, desclen, 0),
			LLVMConstInBoundsGEP2(LLVMTypeOf(tarr), gt, zero, 2),
		};
		LLVMValueRef abiv = LLVMConstNamedStruct(abit, fields, 5);
		snprintf(name, sizeof name, "fadc.abi%s", sfx);
		LLVMValueRef ga = LLVMAddGlobal(e->M, abit, name);
		LLVMSetInitializer(ga, abiv);
		LLVMSetGlobalConstant(ga, 1);
		LLVMSetLinkage(ga, LLVMInternalLinkage);
		LLVMTypeRef fty = LLVMFunctionType(LLVMPointerType(abit, 0), NULL, 0, 0);
		snprintf(name, sizeof name, "%s%s", FADC_ENTRY_SYMBOL, sfx);
		LLVMValueRef fn = LLVMAddFunction(e->M, name, fty);
		fn_attr(e, fn, LLVMAttributeFunctionIndex, "nounwind");
		LLVMBasicBlockRef entry = LLVMAppendBasicBlockInContext(e->C, fn, "entry");
		LLVMPositionBuilderAtEnd(e->B, entry);
		LLVMBuildRet(e->B, ga);
	}
}

// How many pieces a module is emitted as: about PIECE_KERNELS kernels
// (of every task, before sharing) each, at most MAX_PIECES (16 and 128:
// with 32 and 64, resnet18's one-line change missed 16 pieces, 2.1 s of
// CPU; 17 smaller ones 1.6 s, for 0.9 s more cold; docs/PERFORMANCE.md),
// a function of the kernel count only, so that a change that adds or
// removes a few kernels keeps the count, and with it every other piece's
// contents.  FADC_LLVM_PIECES=N
// (1 to CG_LLVM_MAX_PIECES; a test hook) sets it.  --emit llvm prints
// one module: one piece.
enum { PIECE_KERNELS = 16, MAX_PIECES = CG_LLVM_MAX_PIECES };

static unsigned
npieces(const CgTask *tasks, int ntasks, FILE *emit_llvm)
{
	if (emit_llvm)
		return 1;
	const char *v = getenv("FADC_LLVM_PIECES");
	if (v && *v) {
		char *end;
		long n = strtol(v, &end, 10);
		if (!*end && n >= 1 && n <= CG_LLVM_MAX_PIECES)
			return (unsigned)n;
	}
	uint64_t nk = 0;
	for (int i = 0; i < ntasks; i++)
		nk += tasks[i].prog->nk;
	unsigned per = PIECE_KERNELS;
	// FADC_LLVM_PIECE_KERNELS=K (a hook for measuring the cold against the
	// one-line trade-off): K kernels a piece.
	if ((v = getenv("FADC_LLVM_PIECE_KERNELS")) && *v) {
		char *end;
		long k = strtol(v, &end, 10);
		if (!*end && k >= 1 && k <= 1024)
			per = (unsigned)k;
	}
	return cg_piece_count(nk, per, MAX_PIECES);
}

// One CPU level's emitter: a context of its own (the levels' names are
// the same until llvm_pieces_level renames them), nmods modules of target
// triple with td's layout, the types, and the GEMM's vector width for the
// level (FADC_GEMM_VBYTES=32 or 64 overrides it, tests).
static int
level_begin(Emit *e, const CgLevel *lv, unsigned np, unsigned nmods, const char *triple,
            LLVMTargetDataRef td)
{
	e->C = LLVMContextCreate();
	e->npieces = np;
	e->nmods = nmods;
	e->mods = calloc(e->nmods, sizeof *e->mods);
	e->B = LLVMCreateBuilderInContext(e->C);
	if (!e->mods)
		return 0;
	e->i1 = LLVMInt1TypeInContext(e->C);
	e->i8 = LLVMInt8TypeInContext(e->C);
	e->i32 = LLVMInt32TypeInContext(e->C);
	e->i64 = LLVMInt64TypeInContext(e->C);
	e->f32 = LLVMFloatTypeInContext(e->C);
	e->f64 = LLVMDoubleTypeInContext(e->C);
	e->voidt = LLVMVoidTypeInContext(e->C);
	e->i8p = LLVMPointerType(e->i8, 0);
	e->i8pp = LLVMPointerType(e->i8p, 0);
	LLVMTypeRef callfields[5] = {e->i8pp, e->i8pp, e->i8p, e->i64, e->i8p};
	e->callt = LLVMStructCreateNamed(e->C, "fadc_call_v1");
	LLVMStructSetBody(e->callt, callfields, 5, 0);
	e->callp = LLVMPointerType(e->callt, 0);
	e->taskfn = LLVMFunctionType(e->i32, &e->callp, 1, 0);
	LLVMTypeRef thunkargs[2] = {e->callp, LLVMPointerType(e->i64, 0)};
	e->thunkfn = LLVMFunctionType(e->i32, thunkargs, 2, 0);
	for (unsigned i = 0; i < e->nmods; i++) {
		e->mods[i] = LLVMModuleCreateWithNameInContext("fadc", e->C);
		LLVMSetSourceFileName(e->mods[i], "fadc", 4);
		LLVMSetTarget(e->mods[i], triple);
		LLVMSetModuleDataLayout(e->mods[i], td);
	}
	e->M = e->mods[0];
	e->wide = lv->cpu_features && has_feature(lv->cpu_features, "avx512f");
	e->vbytes = e->wide ? 64 : 32;
	const char *vb = getenv("FADC_GEMM_VBYTES");
	if (vb && (!strcmp(vb, "32") || !strcmp(vb, "64")))
		e->vbytes = (unsigned)atoi(vb);
	return 1;
}

static void
level_end(Emit *e)
{
	for (uint32_t i = 0; i < e->nshared; i++)
		free(e->shared[i].key);
	free(e->shared);
	free(e->shash);
	free(e->thkey);
	free(e->thval);
	if (e->B)
		LLVMDisposeBuilder(e->B);
	for (unsigned i = 0; e->mods && i < e->nmods; i++)
		if (e->mods[i])
			LLVMDisposeModule(e->mods[i]);
	free(e->mods);
	if (e->C)
		LLVMContextDispose(e->C);
	memset(e, 0, sizeof *e);
}

int
cg_llvm_emit(const CgTask *tasks, int ntasks, const uint8_t *desc, size_t desclen,
             const CgTarget *tg, FILE *emit_llvm, const char *obj_prefix, int *nobj, char *err,
             size_t errlen)
{
	*nobj = 0;
	if (LLVMInitializeNativeTarget() || LLVMInitializeNativeAsmPrinter()) {
		snprintf(err, errlen, "LLVM: no native target to generate code for");
		return 0;
	}
	int nlevel = tg->nlevel;
	FADC_ASSERT(nlevel >= 1 && nlevel <= CG_MAX_LEVELS && (nlevel == 1 || (!desc && !emit_llvm)),
	            "cg_llvm_emit: 1 to CG_MAX_LEVELS levels; several take the descriptor late");
	int ok = 0;
	char *msg = NULL;
	char *triple = tg->triple ? strdup(tg->triple) : NULL;
	if (!triple) {
		char *t = LLVMGetDefaultTargetTriple();
		triple = strdup(t);
		LLVMDisposeMessage(t);
	}
	Emit e = {0}, el = {0}; // level 0's (the entry's), a higher level's
	LlvmPieces *lp = NULL;
	unsigned np = npieces(tasks, ntasks, emit_llvm);
	LLVMTargetMachineRef tm = NULL;
	LLVMTargetDataRef td = NULL;
	LLVMValueRef *fns = calloc((size_t)ntasks + 1, sizeof *fns);
	// The higher levels' task functions by name (ntasks a level), their
	// CPUs, and which levels have code (bit i: level i).
	char **more = calloc((size_t)nlevel * (size_t)ntasks + 1, sizeof *more);
	const char *cpus[CG_MAX_LEVELS];
	int nmore = 0;
	unsigned levels = 1;
	if (!triple || !fns || !more) {
		snprintf(err, errlen, "out of memory");
		goto done;
	}
	LLVMTargetRef target;
	if (LLVMGetTargetFromTriple(triple, &target, &msg)) {
		llvm_fail(err, errlen, "target", msg);
		msg = NULL;
		goto done;
	}
	// Here for the data layout only (the same for every level): each piece
	// is compiled by a target machine of its own thread (llvm_pieces.c).
	const CgLevel *l0 = &tg->level[0];
	tm = LLVMCreateTargetMachine(target, triple, l0->cpu, l0->features ? l0->features : "",
	                             LLVMCodeGenLevelDefault, LLVMRelocPIC, LLVMCodeModelDefault);
	if (!tm) {
		snprintf(err, errlen, "LLVM: cannot create a target machine for %s, cpu %s", triple, l0->cpu);
		goto done;
	}
	td = LLVMCreateTargetDataLayout(tm);
	// The entry's module of its own past one piece, and also at one piece
	// when the descriptor comes later (NVRTC still compiling: the task code
	// then compiles beside it); --emit llvm prints one module.
	if (!level_begin(&e, l0, np, np + (np > 1 || (!desc && !emit_llvm)), triple, td)) {
		snprintf(err, errlen, "out of memory");
		goto done;
	}

	KTime clk = kir_time_start();
	for (int i = 0; i < ntasks; i++)
		fns[i] = emit_task(&e, &tasks[i]);
	// The entry's references to the task functions first: they make each
	// one external (hidden) in its piece, which must be so before the task
	// pieces are written as bitcode and compiled (llvm_pieces.c), while the
	// caller may still be making the descriptor (tg->descriptor).
	e.M = e.mods[e.nmods - 1];
	for (int i = 0; i < ntasks; i++)
		fns[i] = llvm_ref(&e, fns[i]);
	char nfn[64];
	snprintf(nfn, sizeof nfn, "(%u kernel functions, %u pieces)", e.nshared, e.nmods);
	kir_time_note(clk, "llvm-ir", nfn);
	lp = llvm_pieces_start(e.mods, e.nmods - 1, (unsigned)nlevel * e.nmods, tg, triple, emit_llvm,
	                       err, errlen);
	if (!lp)
		goto done;
	// The higher levels, one after the other in a context of their own
	// (freed once their pieces are bitcode), compiling beside the others.
	for (int L = 1; L < nlevel; L++) {
		clk = kir_time_start();
		if (!level_begin(&el, &tg->level[L], np, np + 1, triple, td)) {
			snprintf(err, errlen, "out of memory");
			goto done;
		}
		LLVMValueRef *def = calloc((size_t)ntasks + 1, sizeof *def);
		if (!def) {
			snprintf(err, errlen, "out of memory");
			goto done;
		}
		for (int i = 0; i < ntasks; i++)
			def[i] = emit_task(&el, &tasks[i]);
		el.M = el.mods[el.nmods - 1]; // a scratch module: what llvm_ref declares there
		for (int i = 0; i < ntasks; i++)
			llvm_ref(&el, def[i]);
		// Their names (the pieces may drop the functions themselves).
		char **tname = calloc((size_t)ntasks + 1, sizeof *tname);
		int kept = tname ? 0 : -1;
		for (int i = 0; kept == 0 && i < ntasks; i++)
			if (!(tname[i] = strdup(LLVMGetValueName2(def[i], &(size_t){0}))))
				kept = -1;
		char **tn = more + (size_t)nmore * (size_t)ntasks;
		if (kept == 0)
			kept = llvm_pieces_level(lp, el.mods, e.mods, np, L, (const char *const *)tname,
			                         ntasks, tn, err, errlen);
		for (int i = 0; kept <= 0 && i < ntasks; i++) { // no code of its own: no entry
			free(tn[i]);
			tn[i] = NULL;
		}
		for (int i = 0; tname && i < ntasks; i++)
			free(tname[i]);
		free(tname);
		free(def);
		snprintf(nfn, sizeof nfn, "(%s: %d of %u pieces its own)", tg->level[L].cpu, kept, np);
		kir_time_note(clk, "llvm-ir", nfn);
		level_end(&el);
		if (kept < 0) {
			if (!err[0])
				snprintf(err, errlen, "out of memory");
			goto done;
		}
		if (kept > 0) {
			cpus[nmore++] = tg->level[L].cpu;
			levels |= 1u << L;
		}
	}
	if (!desc && !tg->descriptor(tg->descriptor_arg, levels, &desc, &desclen, err, errlen))
		goto done;
	emit_entry(&e, fns, ntasks, desc, desclen, more, nmore, cpus);
	ok = llvm_pieces_finish(lp, e.mods[e.nmods - 1], e.nmods - 1, obj_prefix, nobj, err, errlen);
done:
	llvm_pieces_end(lp);
	if (msg)
		LLVMDisposeMessage(msg);
	level_end(&el);
	level_end(&e);
	if (td)
		LLVMDisposeTargetData(td);
	if (tm)
		LLVMDisposeTargetMachine(tm);
	for (size_t i = 0; more && i < (size_t)nlevel * (size_t)ntasks; i++)
		free(more[i]);
	free(more);
	free(fns);
	free(triple);
	return ok;
}

// The LLVM this fadc was built with (`fadc --version`): LLVM 14's C API has
// no LLVMGetVersion, so it is the headers' version.
const char *
cg_llvm_version(void)
{
	return LLVM_VERSION_STRING;
}
