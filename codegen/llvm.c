// codegen/llvm.c -- the LLVM CPU backend: kernel IR to an object file,
// through the LLVM 14 C API.  The only file of fadc that includes llvm-c/*.
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
// sums over 32 or more terms use 8 accumulators (emit_split_sum).
//
// Each task becomes an internal function `i32 (fadc_call_v1 *)` that
// computes the buffer pointers (inputs and outputs from the call, the
// temporaries at their planned offsets in the arena) and calls its
// kernels; being internal with one call site, the kernels of a small task
// are inlined, so it is one straight function (a big one keeps a function
// per kernel: INLINE_MAX_KERNELS).  The only exported symbol is
// fadc_artifact_v1 (runtime/abi.h), returning the table of tasks and the
// descriptor.
//
// Large kernels are split for the runtime's thread pool ("parallel
// kernels" below, docs/CODEGEN.md): such a kernel takes a range [lo, hi)
// of its outer iterations, a chunk function unpacks its arguments, and the
// task function hands both to fadc_call_v1.exec's parallel_for (or runs
// the whole range itself when exec is NULL).  Small kernels are unchanged.
//
// LLVM failures go through one checked path, llvm_fail(), with LLVM's own
// message.  The module is verified before optimization (default<O2> of the
// new pass manager, LLVMRunPasses) and the object is emitted for the
// requested CPU with position-independent code.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <llvm-c/Analysis.h>
#include <llvm/Config/llvm-config.h> // LLVM_VERSION_STRING: plain C macros
#include <llvm-c/Core.h>
#include <llvm-c/Error.h>
#include <llvm-c/Target.h>
#include <llvm-c/TargetMachine.h>
#include <llvm-c/Transforms/PassBuilder.h>

#include "abi.h"
#include "artifact.h"
#include "codegen.h"

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

static int
llvm_check_error(LLVMErrorRef e, char *err, size_t errlen, const char *what)
{
	if (!e)
		return 1;
	char *m = LLVMGetErrorMessage(e);
	if (errlen)
		snprintf(err, errlen, "LLVM: %s: %s", what, m ? m : "(no message)");
	LLVMDisposeErrorMessage(m);
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

// ---------------------------------------------------------------- emitter state

// How a large kernel is split for the thread pool (split_plan): its range
// [0, n) is the flattened first `nax` parallel axes (a GEMM: its own range,
// emit_gemm), run in chunks of at least `grain` iterations.
typedef struct Split {
	int on;
	int nax; // leading parallel axes flattened into the range (not for a GEMM)
	int64_t n, grain;
} Split;

typedef struct Emit {
	LLVMContextRef C;
	LLVMModuleRef M;
	LLVMBuilderRef B;
	LLVMTypeRef i1, i8, i32, i64, f32, f64, voidt, i8p, i8pp, callt, callp, taskfn;
	const KProgram *p;
	// The kernel being emitted.
	LLVMValueRef fn;
	LLVMValueRef *bufptr; // typed pointer of each buffer the kernel touches
	LLVMValueRef runseed;
	LLVMValueRef *step; // step[l]: the step counter of loop l (a kernel parameter)
	LLVMValueRef var[2 * IR_MAXDIM]; // loop counter allocas
	LLVMValueRef acc; // accumulator alloca
	// A split kernel (Split.on): its range bounds (parameters), and the
	// loop over the range that par_begin opened.
	Split sp;
	LLVMValueRef lo, hi, flat;
	LLVMValueRef *val; // memo: value of expression id in the current region
	uint32_t *stamp, region;
	struct Shared *shared; // kernel functions emitted so far, by key (emit_kernel)
	uint32_t nshared, cshared;
	LLVMValueRef mathfn[9][2]; // exp .. trigamma, f32 and f64 (math_fn)
	int vecmath; // the expressions being emitted are in a loop that vectorizes
	// Bytes per vector register of the target: 32 (AVX2), 64 with
	// AVX-512F (wide); the GEMM's tile vectors are vbytes wide (gemm_vl).
	// FADC_GEMM_VBYTES=64 (tests) gives an AVX2 target 512-bit tiles, two
	// registers per vector, so that those tiles run and are checked on
	// any machine.
	unsigned vbytes;
	int wide;
} Emit;

static LLVMTypeRef
ty(Emit *e, DType dt)
{
	switch (dt) {
	case DT_F32:
		return e->f32;
	case DT_F64:
		return e->f64;
	case DT_I64:
		return e->i64;
	case DT_BOOL:
		return e->i1;
	default:
		FADC_ASSERT(0, "llvm: no type for this dtype");
		return NULL;
	}
}

// Storage type: bool is a byte in memory.
static LLVMTypeRef
sty(Emit *e, DType dt)
{
	return dt == DT_BOOL ? e->i8 : ty(e, dt);
}

static unsigned
attr_kind(const char *name)
{
	return LLVMGetEnumAttributeKindForName(name, strlen(name));
}

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
// (gemm_vl), so every function says it wants them whole.
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

static void
fn_attr(Emit *e, LLVMValueRef fn, unsigned idx, const char *name)
{
	LLVMAddAttributeAtIndex(fn, idx, LLVMCreateEnumAttribute(e->C, attr_kind(name), 0));
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

static LLVMValueRef
call1(Emit *e, const char *name, LLVMTypeRef t, LLVMValueRef a)
{
	LLVMTypeRef fty, at[1] = {t};
	LLVMValueRef f = ext_fn(e, name, t, at, 1, &fty), args[1] = {a};
	return LLVMBuildCall2(e->B, fty, f, args, 1, "");
}

// A call of LLVM intrinsic `name` overloaded on the nt types ot.
static LLVMValueRef
intrinsic_ov(Emit *e, const char *name, LLVMTypeRef *ot, unsigned nt, LLVMValueRef *args, unsigned n)
{
	unsigned id = LLVMLookupIntrinsicID(name, strlen(name));
	FADC_ASSERT(id != 0, name);
	LLVMValueRef f = LLVMGetIntrinsicDeclaration(e->M, id, ot, nt);
	LLVMTypeRef fty = LLVMIntrinsicGetType(e->C, id, ot, nt);
	return LLVMBuildCall2(e->B, fty, f, args, n, "");
}

// The same for an intrinsic overloaded on one type t.
static LLVMValueRef
intrinsic(Emit *e, const char *name, LLVMTypeRef t, LLVMValueRef *args, unsigned n)
{
	return intrinsic_ov(e, name, &t, 1, args, n);
}

static LLVMValueRef
intrinsic1(Emit *e, const char *name, LLVMTypeRef t, LLVMValueRef a)
{
	LLVMValueRef args[1] = {a};
	return intrinsic(e, name, t, args, 1);
}

// ---------------------------------------------------------------- special functions
// exp, log, log1p, expm1, tanh, erf, lgamma, digamma and trigamma in f32
// and f64 are emitted as IR, not called from libm or the support library
// (erf .. trigamma after the first five, below): a call to expf in a loop
// body keeps the loop scalar (LLVM 14's C API has no way to name a vector
// math library), while straight-line arithmetic, selects, bit casts and
// the intrinsics rint, floor, ceil, fmuladd, fabs and copysign vectorize.
// Each is an internal alwaysinline
// function, emitted once per module and dtype (math_fn), that the inliner
// folds into the kernels before the loop vectorizer runs.  No branches:
// special inputs (NaN, infinities, zero, negative, overflow, underflow) are
// selects on the final value, and denormals are scaled into range first.
// They are used only where the loop vectorizes (Emit.vecmath: elementwise
// kernels, the terms of emit_split_sum); in a scalar loop glibc's scalar
// code has the shorter latency and stays.
//
// exp(x) (Cody-Waite, Cephes): n = rint(x log2 e), r = x - n C1 - n C2
//   with C1 + C2 = ln 2 and n C1 exact, |r| <= ln2/2 (a little more from
//   the rounding of x log2 e); exp(r) by Cephes' degree-7 polynomial (f32)
//   or Pade form 1 + 2 r P(r^2) / (Q(r^2) - r P(r^2)) (f64); times 2^n as
//   2^floor(n/2) 2^(n - floor(n/2)), two normal factors, so results down
//   to the smallest denormal round once.  x above ln(max) is +inf, below
//   ln(smallest denormal / 2) is 0.
// log(x) (fdlibm / musl): x = 2^k m with m in [sqrt(2)/2, sqrt(2)) by
//   integer arithmetic on the bits (denormals scaled by 2^25 / 2^54 first),
//   f = m - 1, s = f / (2 + f), log(1 + f) = f - hfsq + s (hfsq + R(s^2)),
//   hfsq = f^2/2, R fdlibm's minimax polynomial, plus k ln2 in two parts.
// log1p(x) = log(u) - ((u - 1) - x) / u with u = 1 + x: the second term
//   is the rounding error of u (exact for |x| < 1: Sterbenz), divided by
//   u, the first-order correction of the logarithm.
// expm1(x) (Kahan): u = exp(x); x when u == 1, else (u - 1) (x / log(u)):
//   the rounding error of u cancels between u - 1 and log(u).
// tanh(x): |x| < 0.625: x + x z P(z), z = x^2 (Cephes: a polynomial in
//   f32, a rational function in f64); above, sign(x) (1 - 2 / (e^2|x| + 1)).
// Accuracy against libm in long double, over dense sweeps of every binade
// and the special values (tests/unit/test_codegen_math.c): see the table
// in docs/CODEGEN.md.

typedef struct Mb {
	Emit *e;
	LLVMTypeRef t, it; // the float type and the integer type of its bits
	int d; // 1: f64
} Mb;

static LLVMValueRef
mk(Mb *m, double v)
{
	return LLVMConstReal(m->t, v);
}

static LLVMValueRef
mki(Mb *m, int64_t v)
{
	return LLVMConstInt(m->it, (unsigned long long)v, 1);
}

static LLVMValueRef
madd(Mb *m, LLVMValueRef a, LLVMValueRef b)
{
	return LLVMBuildFAdd(m->e->B, a, b, "");
}

static LLVMValueRef
msub(Mb *m, LLVMValueRef a, LLVMValueRef b)
{
	return LLVMBuildFSub(m->e->B, a, b, "");
}

static LLVMValueRef
mmul(Mb *m, LLVMValueRef a, LLVMValueRef b)
{
	return LLVMBuildFMul(m->e->B, a, b, "");
}

static LLVMValueRef
mdiv(Mb *m, LLVMValueRef a, LLVMValueRef b)
{
	return LLVMBuildFDiv(m->e->B, a, b, "");
}

// a b + c, fused where the target has FMA.
static LLVMValueRef
mfma(Mb *m, LLVMValueRef a, LLVMValueRef b, LLVMValueRef c)
{
	LLVMValueRef args[3] = {a, b, c};
	return intrinsic(m->e, "llvm.fmuladd", m->t, args, 3);
}

// c[0] x^(n-1) + ... + c[n-1], Horner.
static LLVMValueRef
mpoly(Mb *m, LLVMValueRef x, const double *c, int n)
{
	LLVMValueRef r = mk(m, c[0]);
	for (int i = 1; i < n; i++)
		r = mfma(m, r, x, mk(m, c[i]));
	return r;
}

// (a pred b) ? t : f
static LLVMValueRef
msel(Mb *m, LLVMRealPredicate pr, LLVMValueRef a, LLVMValueRef b, LLVMValueRef t, LLVMValueRef f)
{
	return LLVMBuildSelect(m->e->B, LLVMBuildFCmp(m->e->B, pr, a, b, ""), t, f, "");
}

static LLVMValueRef
mbits(Mb *m, LLVMValueRef x)
{
	return LLVMBuildBitCast(m->e->B, x, m->it, "");
}

static LLVMValueRef
mfloat(Mb *m, LLVMValueRef i)
{
	return LLVMBuildBitCast(m->e->B, i, m->t, "");
}

// 2^n for an integer n in the normal range.
static LLVMValueRef
mpow2(Mb *m, LLVMValueRef n)
{
	LLVMValueRef b = LLVMBuildAdd(m->e->B, n, mki(m, m->d ? 1023 : 127), "");
	return mfloat(m, LLVMBuildShl(m->e->B, b, mki(m, m->d ? 52 : 23), ""));
}

static LLVMValueRef
m_exp(Mb *m, LLVMValueRef x)
{
	LLVMBuilderRef B = m->e->B;
	// Above hi the result overflows, below lo it rounds to 0.
	double hi = m->d ? 709.782712893383996843 : 88.72283905206835;
	double lo = m->d ? -745.13321910194110842 : -103.972077083991796;
	LLVMValueRef xc = msel(m, LLVMRealOGT, x, mk(m, hi), mk(m, hi), x);
	xc = msel(m, LLVMRealOLT, xc, mk(m, lo), mk(m, lo), xc);
	xc = msel(m, LLVMRealUNO, x, x, mk(m, 0), xc); // NaN: any finite value, selected away
	LLVMValueRef n = intrinsic1(m->e, "llvm.rint", m->t, mmul(m, xc, mk(m, 1.44269504088896340736)));
	LLVMValueRef r;
	if (m->d) {
		r = mfma(m, n, mk(m, -6.93145751953125E-1), xc);
		r = mfma(m, n, mk(m, -1.42860682030941723212E-6), r);
		static const double P[] = {1.26177193074810590878E-4, 3.02994407707441961300E-2,
		                           9.99999999999999999910E-1};
		static const double Q[] = {3.00198505138664455042E-6, 2.52448340349684104192E-3,
		                           2.27265548208155028766E-1, 2.00000000000000000009E0};
		LLVMValueRef rr = mmul(m, r, r);
		LLVMValueRef px = mmul(m, r, mpoly(m, rr, P, 3));
		r = mdiv(m, px, msub(m, mpoly(m, rr, Q, 4), px));
		r = mfma(m, mk(m, 2), r, mk(m, 1));
	} else {
		r = mfma(m, n, mk(m, -0.693359375), xc);
		r = mfma(m, n, mk(m, 2.12194440e-4), r);
		static const double P[] = {1.9875691500E-4, 1.3981999507E-3, 8.3334519073E-3,
		                           4.1665795894E-2, 1.6666665459E-1, 5.0000001201E-1};
		LLVMValueRef rr = mmul(m, r, r);
		r = madd(m, mfma(m, mpoly(m, r, P, 6), rr, r), mk(m, 1));
	}
	LLVMValueRef ni = LLVMBuildFPToSI(B, n, m->it, "");
	LLVMValueRef n1 = LLVMBuildAShr(B, ni, mki(m, 1), ""), n2 = LLVMBuildSub(B, ni, n1, "");
	r = mmul(m, mmul(m, r, mpow2(m, n1)), mpow2(m, n2));
	r = msel(m, LLVMRealOGT, x, mk(m, hi), mk(m, INFINITY), r);
	r = msel(m, LLVMRealOLT, x, mk(m, lo), mk(m, 0), r);
	return msel(m, LLVMRealUNO, x, x, x, r);
}

static LLVMValueRef
m_log(Mb *m, LLVMValueRef x)
{
	LLVMBuilderRef B = m->e->B;
	int d = m->d;
	// Denormals: scaled into the normal range, the exponent corrected.
	double minnorm = d ? 2.2250738585072014e-308 : 1.17549435082228750797e-38;
	int sc = d ? 54 : 25;
	LLVMValueRef small = LLVMBuildFCmp(B, LLVMRealOLT, x, mk(m, minnorm), "");
	LLVMValueRef xs = LLVMBuildSelect(B, small, mmul(m, x, mk(m, ldexp(1, sc))), x, "");
	LLVMValueRef k0 = LLVMBuildSelect(B, small, mki(m, -sc), mki(m, 0), "");
	// m in [sqrt(2)/2, sqrt(2)): add 1 - bits(sqrt(2)/2) to the bits so the
	// exponent field steps up exactly where the mantissa passes sqrt(2).
	int64_t one = d ? 0x3ff0000000000000ll : 0x3f800000, half = d ? 0x3fe6a09e00000000ll : 0x3f3504f3;
	int mant = d ? 52 : 23;
	LLVMValueRef ix = LLVMBuildAdd(B, mbits(m, xs), mki(m, one - half), "");
	LLVMValueRef k = LLVMBuildSub(B, LLVMBuildLShr(B, ix, mki(m, mant), ""), mki(m, d ? 1023 : 127), "");
	k = LLVMBuildAdd(B, k, k0, "");
	ix = LLVMBuildAdd(B, LLVMBuildAnd(B, ix, mki(m, ((int64_t)1 << mant) - 1), ""), mki(m, half), "");
	LLVMValueRef f = msub(m, mfloat(m, ix), mk(m, 1));
	LLVMValueRef s = mdiv(m, f, madd(m, mk(m, 2), f));
	LLVMValueRef z = mmul(m, s, s), w = mmul(m, z, z), t1, t2;
	double ln2hi, ln2lo;
	if (d) {
		// fdlibm's Lg1 .. Lg7: t1 = w (Lg2 + w (Lg4 + w Lg6)),
		// t2 = z (Lg1 + w (Lg3 + w (Lg5 + w Lg7))).
		static const double E[] = {1.531383769920937332e-01, 2.222219843214978396e-01,
		                           3.999999999940941908e-01}; // Lg6 Lg4 Lg2
		static const double O[] = {1.479819860511658591e-01, 1.818357216161805012e-01,
		                           2.857142874366239149e-01, 6.666666666666735130e-01}; // Lg7 Lg5 Lg3 Lg1
		t1 = mmul(m, w, mpoly(m, w, E, 3));
		t2 = mmul(m, z, mpoly(m, w, O, 4));
		ln2hi = 6.93147180369123816490e-01;
		ln2lo = 1.90821492927058770002e-10;
	} else {
		// musl's logf: t1 = w (Lg2 + w Lg4), t2 = z (Lg1 + w Lg3), floats.
		static const double E[] = {0x1.f13c4cp-3, 0x1.999c26p-2}; // Lg4 Lg2
		static const double O[] = {0x1.23d3dcp-2, 0x1.555554p-1}; // Lg3 Lg1
		t1 = mmul(m, w, mpoly(m, w, E, 2));
		t2 = mmul(m, z, mpoly(m, w, O, 2));
		ln2hi = 6.9313812256e-01;
		ln2lo = 9.0580006145e-06;
	}
	LLVMValueRef R = madd(m, t2, t1);
	LLVMValueRef hfsq = mmul(m, mk(m, 0.5), mmul(m, f, f));
	LLVMValueRef dk = LLVMBuildSIToFP(B, k, m->t, "");
	// s (hfsq + R) + k ln2lo - hfsq + f + k ln2hi, in fdlibm's order
	LLVMValueRef r = mfma(m, dk, mk(m, ln2lo), mmul(m, s, madd(m, hfsq, R)));
	r = madd(m, msub(m, r, hfsq), f);
	r = mfma(m, dk, mk(m, ln2hi), r);
	r = msel(m, LLVMRealOEQ, x, mk(m, 0), mk(m, -INFINITY), r);
	r = msel(m, LLVMRealOLT, x, mk(m, 0), mk(m, NAN), r);
	r = msel(m, LLVMRealOEQ, x, mk(m, INFINITY), x, r);
	return msel(m, LLVMRealUNO, x, x, x, r);
}

static LLVMValueRef m_call(Mb *m, KxOp op, LLVMValueRef x);

// Not a kernel-IR op: polygamma of order 1 in math_fn's table.
#define KX_TRIGAMMA ((KxOp)KX_COUNT)

static LLVMValueRef
m_log1p(Mb *m, LLVMValueRef x)
{
	LLVMValueRef u = madd(m, mk(m, 1), x);
	LLVMValueRef c = msub(m, msub(m, u, mk(m, 1)), x);
	LLVMValueRef q = mdiv(m, c, u);
	q = msel(m, LLVMRealOEQ, u, mk(m, 0), mk(m, 0), q); // x = -1: -inf from log(0)
	q = msel(m, LLVMRealOEQ, u, mk(m, INFINITY), mk(m, 0), q); // +inf - inf
	LLVMValueRef r = msub(m, m_call(m, KX_LOG, u), q);
	return msel(m, LLVMRealOEQ, x, mk(m, 0), x, r); // -0 stays -0
}

static LLVMValueRef
m_expm1(Mb *m, LLVMValueRef x)
{
	LLVMValueRef u = m_call(m, KX_EXP, x);
	LLVMValueRef um1 = msub(m, u, mk(m, 1));
	// x / log(u) first: (u - 1) x overflows for u near the largest float.
	LLVMValueRef r = mmul(m, um1, mdiv(m, x, m_call(m, KX_LOG, u)));
	r = msel(m, LLVMRealOEQ, u, mk(m, 1), x, r);
	r = msel(m, LLVMRealOEQ, um1, mk(m, -1), mk(m, -1), r);
	return msel(m, LLVMRealOEQ, u, mk(m, INFINITY), u, r);
}

static LLVMValueRef
m_tanh(Mb *m, LLVMValueRef x)
{
	LLVMValueRef ax = intrinsic1(m->e, "llvm.fabs", m->t, x), z = mmul(m, x, x), small;
	if (m->d) {
		static const double P[] = {-9.64399179425052238628E-1, -9.92877231001918586564E1,
		                           -1.61468768441708447952E3};
		static const double Q[] = {1, 1.12811678491632931402E2, 2.23548839060100448583E3,
		                           4.84406305325125486048E3};
		LLVMValueRef pq = mdiv(m, mpoly(m, z, P, 3), mpoly(m, z, Q, 4));
		small = mfma(m, mmul(m, x, z), pq, x);
	} else {
		static const double P[] = {-5.70498872745E-3, 2.06390887954E-2, -5.37397155531E-2,
		                           1.33314422036E-1, -3.33332819422E-1};
		small = mfma(m, mmul(m, mpoly(m, z, P, 5), z), x, x);
	}
	LLVMValueRef e2 = m_call(m, KX_EXP, madd(m, ax, ax));
	LLVMValueRef big = msub(m, mk(m, 1), mdiv(m, mk(m, 2), madd(m, e2, mk(m, 1))));
	LLVMValueRef args[2] = {big, x};
	big = intrinsic(m->e, "llvm.copysign", m->t, args, 2);
	LLVMValueRef r = msel(m, LLVMRealOLT, ax, mk(m, 0.625), small, big);
	return msel(m, LLVMRealOEQ, x, mk(m, 0), x, r); // -0 stays -0
}

// ---- erf, lgamma, digamma, trigamma
// Their polynomials are our own fits: weighted least squares on Chebyshev
// nodes in 50-digit arithmetic (mpmath), coefficients rounded to the
// format, degrees the lowest whose fit error (rounded coefficients
// included) is below about half an ulp; tests/unit/test_codegen_math.c
// measures the result against long-double references.  As above, every
// path is computed for every lane and the result is a select; the
// reductions are exact where it matters.
//
// erf(x): |x| < 1: x + x q(x^2), q(z) = erf(sqrt z)/sqrt z - 1.  Above:
//   1 - exp(k(a) - a^2), a = min(|x|, 6 or 4), k(a) = log(erfc(a)) + a^2
//   fitted in a - 3.5 (a - 2.5) with weight erfc(a), so the error it
//   leaves in erf is a fraction of an ulp; erf rounds to 1 beyond 5.93
//   (3.92 in f32), hence the clamp.  The rounding of fma(-a, a, k) gives
//   a relative error a^2 2^-53 in erfc, at most 0.16 ulp of erf.
// lgamma(x), x > 0, with f = x - floor(x) and t = f - 1/2 in [-1/2, 1/2):
//   x < 2:      f (f - 1) F(t) - (x < 1 ? log x : 0), F(t) = lgamma(3/2 + t)
//               / ((t + 1/2)(t - 1/2)): the zeros at 1 and 2 are factors;
//   2 <= x < 8: f F2(t) + log((x - 1)(x - 2)...(x - n)), n = floor(x) - 2,
//               F2(t) = lgamma(5/2 + t) / (t + 1/2) (the zero at 2 again);
//   x >= 8:     Stirling, (x - 1/2)(log x - 1) + w0 + z W(z^2), z = 1/x;
//   one logarithm serves the three (their arguments are selected).
// lgamma(x), x < 0: log(pi / |x sin(pi x)|) - lgamma(|x|) (reflection);
//   |x| below 2^-70 (2^-30): lgamma(|x|) (x^2 would underflow; the two
//   differ by 2 gamma |x|).  0, negative integers and -inf: +inf.
// digamma(x), x > 0, same f and t: psi(1 + f) = (t - c) E(t), c = x0 - 3/2,
//   x0 = 1.46163... the positive zero (c in two parts, so the zero is
//   exact to the last bit); then x < 1: - 1/x; 2 <= x < 10: + sum over
//   j = 1 .. floor(x) - 1 of 1/(x - j), summed as two fractions num/den
//   (two divisions, not eight); x >= 10: log x - 1/(2x) - sum B_2k /
//   (2k x^2k).
// digamma(x), x < 0: psi(1 + |x|) + pi cot(pi |x|) (reflection and one
//   step of the recurrence), the positive path run on 1 + |x|; |x| below
//   2^-70 (2^-30): psi(1 + |x|) + 1/|x|.  +0: -inf, -0: +inf, negative
//   integers and -inf: NaN (PyTorch, and ir/special.c).
// sin(pi a) and cos(pi a) for the reflections: n = rint(2a), r = a - n/2
//   (exact, |r| <= 1/4), sin(pi r) = pi r U(r^2), cos(pi r) = C(r^2), and
//   the quadrant from the parity of n (only |sin| and cot are needed).

// sin(pi r) / pi and cos(pi r) of a >= 0 reduced by halves, and whether
// rint(2a) is odd (then sin(pi a) = ±cos(pi r), cos(pi a) = ∓sin(pi r)).
// sin(pi r) / pi = r U(r^2) with U(0) = 1 exactly: the callers divide pi
// by sin(pi r), and pi's rounding cancels.
static void
m_sincospi(Mb *m, LLVMValueRef a, LLVMValueRef *sp, LLVMValueRef *cp, LLVMValueRef *odd)
{
	LLVMBuilderRef B = m->e->B;
	double big = m->d ? 0x1p52 : 0x1p23; // every float above is an integer
	LLVMValueRef ac = msel(m, LLVMRealOGT, a, mk(m, big), mk(m, big), a);
	ac = msel(m, LLVMRealUNO, ac, ac, mk(m, 0), ac); // NaN: selected away later
	LLVMValueRef n = intrinsic1(m->e, "llvm.rint", m->t, madd(m, ac, ac));
	LLVMValueRef r = mfma(m, n, mk(m, -0.5), ac), z = mmul(m, r, r);
	if (m->d) {
		static const double U[] = {2.5106928461534935e-07, -6.9756326574080843e-06,
		                           0.00014842877775336568, -0.0023460810348909108,
		                           0.026147847817642522, -0.19075182412208405,
		                           0.81174242528335361, -1.6449340668482264, 1};
		static const double C[] = {4.2638295948444962e-06, -0.0001046334632329678,
		                           0.0019295740126589096, -0.025806891378934115,
		                           0.2353306303586496, -1.3352627688545864, 4.0587121264167685,
		                           -4.934802200544679, 1};
		*sp = mmul(m, r, mpoly(m, z, U, 9));
		*cp = mpoly(m, z, C, 9);
	} else {
		static const double U[] = {0.025781752541661263, -0.1907317191362381,
		                           0.81174194812774658, -1.6449340581893921, 1};
		static const double C[] = {0.23126046359539032, -1.3350358009338379, 4.0587067604064941,
		                           -4.9348020553588867, 1};
		*sp = mmul(m, r, mpoly(m, z, U, 5));
		*cp = mpoly(m, z, C, 5);
	}
	LLVMValueRef ni = LLVMBuildFPToSI(B, n, m->it, "");
	*odd = LLVMBuildICmp(B, LLVMIntNE, LLVMBuildAnd(B, ni, mki(m, 1), ""), mki(m, 0), "");
}

static LLVMValueRef
m_erf(Mb *m, LLVMValueRef x)
{
	LLVMValueRef ax = intrinsic1(m->e, "llvm.fabs", m->t, x);
	LLVMValueRef small, big, a, k;
	if (m->d) {
		static const double Q[] = {-7.7985438505499473e-10, 1.3721520406351094e-08,
		                           -1.6208829856810202e-07, 1.6447471190594618e-06,
		                           -1.4924740785377576e-05, 0.00012055295112667001,
		                           -0.00085483259825432252, 0.0052239776072699456,
		                           -0.026866170643256995, 0.1128379167094513,
		                           -0.37612638903183543, 0.12837916709551256};
		static const double K[] = {1.0305267765735484e-12, 1.7764822476230468e-11,
		                           1.3557178657877511e-10, 6.1240710200973897e-10,
		                           1.7068957706713885e-09, 2.9395826709143576e-09,
		                           2.0473095679517234e-09, -3.3756413276912352e-09,
		                           1.0417239157977249e-09, -8.9924976607806979e-08,
		                           5.8265589942854854e-07, -3.8857259598036028e-06,
		                           2.4391295988434745e-05, -0.00014729575261712246,
		                           0.00087368721023180012, -0.0052256585926552645,
		                           0.033246945153041531, -0.2660995883701725, -1.8624374021472263};
		small = mfma(m, x, mpoly(m, mmul(m, x, x), Q, 12), x);
		a = msel(m, LLVMRealOGT, ax, mk(m, 6), mk(m, 6), ax);
		k = mpoly(m, msub(m, a, mk(m, 3.5)), K, 19);
	} else {
		static const double Q[] = {7.8824974480085075e-05, -0.00080188550055027008,
		                           0.0051893121562898159, -0.026854328811168671,
		                           0.11283597350120544, -0.37612625956535339, 0.12837916612625122};
		static const double K[] = {0.00018655171152204275, -0.00015067031199578196,
		                           0.0024691054131835699, -0.010706097818911076,
		                           0.056120444089174271, -0.35269284248352051, -1.5568177700042725};
		small = mfma(m, x, mpoly(m, mmul(m, x, x), Q, 7), x);
		a = msel(m, LLVMRealOGT, ax, mk(m, 4), mk(m, 4), ax);
		k = mpoly(m, msub(m, a, mk(m, 2.5)), K, 7);
	}
	LLVMValueRef na = LLVMBuildFNeg(m->e->B, a, "");
	big = msub(m, mk(m, 1), m_call(m, KX_EXP, mfma(m, na, a, k)));
	LLVMValueRef args[2] = {big, x};
	big = intrinsic(m->e, "llvm.copysign", m->t, args, 2);
	LLVMValueRef r = msel(m, LLVMRealOLT, ax, mk(m, 1), small, big);
	return msel(m, LLVMRealUNO, x, x, x, r);
}

// lgamma(a) for a >= 0 (+inf at 0).
static LLVMValueRef
m_lgamma_pos(Mb *m, LLVMValueRef a)
{
	LLVMValueRef fl = intrinsic1(m->e, "llvm.floor", m->t, a);
	LLVMValueRef f = msub(m, a, fl), t = msub(m, f, mk(m, 0.5)), b1, b2, w;
	LLVMValueRef z = mdiv(m, mk(m, 1), a), zz = mmul(m, z, z);
	if (m->d) {
		static const double F[] = {-1.8072503739261512e-05, 2.8343542991307434e-05,
		                           -2.2027728890160218e-05, 3.498560355905269e-05,
		                           -6.7667677624454298e-05, 0.0001077170246760829,
		                           -0.0001686454162655914, 0.00027089463395212478,
		                           -0.00043802321840177106, 0.0007115650830900709,
		                           -0.0011644125478591238, 0.0019229132380020617,
		                           -0.0032120741532262079, 0.0054464579570919821,
		                           -0.0094256224469295869, 0.016797098628976912,
		                           -0.031308487501023538, 0.062911401074581735,
		                           -0.14595989591430605, 0.48312895054098087};
		static const double F2[] = {-1.506504765953895e-08, 3.8721302162248787e-08,
		                            -8.7244296788860933e-08, 2.353718399781654e-07,
		                            -6.4233655322000824e-07, 1.7456415074527694e-06,
		                            -4.7863387578516994e-06, 1.3275711081262358e-05,
		                            -3.7353374234197186e-05, 0.00010710021010783776,
		                            -0.00031505925004463931, 0.00096109792855172743,
		                            -0.0030951822936270313, 0.010877001514197609,
		                            -0.044805842697384482, 0.26758179939880972,
		                            0.56936574094583836};
		static const double W[] = {0.0050675642373291972, -0.0018904609209094707,
		                           0.0008414714586724686, -0.00059523659566980316,
		                           0.00079365078979346513, -0.0027777777777740435,
		                           0.083333333333333329};
		b1 = mpoly(m, t, F, 20);
		b2 = mpoly(m, t, F2, 17);
		w = mpoly(m, zz, W, 7);
	} else {
		static const double F[] = {-0.0014884424163028598, 0.0024468754418194294,
		                           -0.0031372054945677519, 0.0053259269334375858,
		                           -0.009432508610188961, 0.016808107495307922,
		                           -0.031308267265558243, 0.062911055982112885,
		                           -0.14595989882946014, 0.48312896490097046};
		static const double F2[] = {0.00011748295946745202, -0.00033460126724094152,
		                            0.00095849495846778154, -0.0030920847784727812,
		                            0.010877244174480438, -0.044805999845266342,
		                            0.26758179068565369, 0.5693657398223877};
		static const double W[] = {0.0007800459279678762, -0.0027776986826211214,
		                           0.083333335816860199};
		b1 = mpoly(m, t, F, 10);
		b2 = mpoly(m, t, F2, 8);
		w = mpoly(m, zz, W, 3);
	}
	// + 0: lgamma(1) and lgamma(2) are +0, f (f - 1) F is -0 there.
	b1 = madd(m, mmul(m, mmul(m, f, msub(m, f, mk(m, 1))), b1), mk(m, 0));
	b2 = mmul(m, f, b2);
	// (x - 1)(x - 2)...(x - n) for 2 <= x < 8, n = floor(x) - 2 <= 5.
	LLVMValueRef prod = mk(m, 1);
	for (int j = 1; j <= 5; j++)
		prod = mmul(m, prod, msel(m, LLVMRealOGE, a, mk(m, j + 2), msub(m, a, mk(m, j)), mk(m, 1)));
	LLVMValueRef mid = LLVMBuildAnd(m->e->B, LLVMBuildFCmp(m->e->B, LLVMRealOGE, a, mk(m, 2), ""),
	                                LLVMBuildFCmp(m->e->B, LLVMRealOLT, a, mk(m, 8), ""), "");
	LLVMValueRef L = m_call(m, KX_LOG, LLVMBuildSelect(m->e->B, mid, prod, a, ""));
	// Stirling: (a - 1/2)(log a - 1) + w0 + z W(z^2), w0 = log(2 pi)/2 - 1/2.
	LLVMValueRef st = mfma(m, msub(m, a, mk(m, 0.5)), msub(m, L, mk(m, 1)),
	                       mfma(m, z, w, mk(m, 0.41893853320467274178)));
	LLVMValueRef r = msel(m, LLVMRealOLT, a, mk(m, 8), madd(m, b2, L), st);
	r = msel(m, LLVMRealOLT, a, mk(m, 2), b1, r);
	return msel(m, LLVMRealOLT, a, mk(m, 1), msub(m, b1, L), r);
}

static LLVMValueRef
m_lgamma(Mb *m, LLVMValueRef x)
{
	LLVMBuilderRef B = m->e->B;
	LLVMValueRef a = intrinsic1(m->e, "llvm.fabs", m->t, x);
	LLVMValueRef lp = m_lgamma_pos(m, a), sp, cp, odd;
	m_sincospi(m, a, &sp, &cp, &odd);
	// log(pi / |a sin(pi a)|) = -log |a sp|, or log(pi) - log |a cp|: no
	// division (the difference of two logarithms is exact enough: the
	// unit of error here is the ulp of max(1, |terms|)).
	LLVMValueRef s = intrinsic1(m->e, "llvm.fabs", m->t, LLVMBuildSelect(B, odd, cp, sp, ""));
	LLVMValueRef lpi = LLVMBuildSelect(B, odd, mk(m, 1.14472988584940017414), mk(m, 0), "");
	LLVMValueRef ln = msub(m, msub(m, lpi, m_call(m, KX_LOG, mmul(m, a, s))), lp);
	ln = msel(m, LLVMRealOLT, a, mk(m, m->d ? 0x1p-70 : 0x1p-30), lp, ln);
	LLVMValueRef r = msel(m, LLVMRealOLT, x, mk(m, 0), ln, lp);
	LLVMValueRef fa = intrinsic1(m->e, "llvm.floor", m->t, a);
	LLVMValueRef pole = LLVMBuildAnd(B, LLVMBuildFCmp(B, LLVMRealOLE, x, mk(m, 0), ""),
	                                 LLVMBuildFCmp(B, LLVMRealOEQ, a, fa, ""), "");
	r = LLVMBuildSelect(B, pole, mk(m, INFINITY), r, "");
	return msel(m, LLVMRealUNO, x, x, x, r);
}

static LLVMValueRef
m_digamma(Mb *m, LLVMValueRef x)
{
	LLVMBuilderRef B = m->e->B;
	LLVMValueRef one = mk(m, 1), zero = mk(m, 0);
	LLVMValueRef a = intrinsic1(m->e, "llvm.fabs", m->t, x);
	LLVMValueRef fa = intrinsic1(m->e, "llvm.floor", m->t, a);
	LLVMValueRef neg = LLVMBuildFCmp(B, LLVMRealOLT, x, zero, "");
	LLVMValueRef tiny = LLVMBuildFCmp(B, LLVMRealOLT, a, mk(m, m->d ? 0x1p-70 : 0x1p-30), "");
	tiny = LLVMBuildAnd(B, neg, tiny, "");
	// x < 0: psi(x) = psi(1 + a) + pi cot(pi a), a = -x (1 + a is exact for
	// a >= 1; below, its rounding moves psi(1 + a) by less than an ulp of
	// the result).  So the positive path runs on v = x or 1 + a.  Tiny a:
	// psi(1 + a) + 1/a, off by pi^2 a / 3 (sin(pi a) would lose bits in
	// the denormal range).
	LLVMValueRef v = LLVMBuildSelect(B, neg, madd(m, a, one), a, "");
	LLVMValueRef fl = intrinsic1(m->e, "llvm.floor", m->t, v);
	LLVMValueRef t = msub(m, msub(m, v, fl), mk(m, 0.5)), e, asy;
	// (t - c) with c = x0 - 3/2 in two parts
	LLVMValueRef d = msub(m, msub(m, t, mk(m, -0.038367855031637657)), mk(m, -1.6445603550442201e-18));
	LLVMValueRef small = LLVMBuildFCmp(B, LLVMRealOLT, v, one, "");
	LLVMValueRef large = LLVMBuildFCmp(B, LLVMRealOGE, v, mk(m, 10), "");
	// q = 1/v (v < 1 or v >= 10), 1/a (tiny), or the sum over j = 1 ..
	// floor(v) - 1 of 1/(v - j) (2 <= v < 10), as num/den: adding 1/f to
	// num/den is (num f + den) / (den f).
	// Two fractions of four terms each: one of eight rounded the products
	// enough to cost 1-2 ulp (measured 4.1 ulp at x = 6.04 in f32).
	LLVMValueRef sl = LLVMBuildOr(B, small, large, "");
	LLVMValueRef num[2], den[2];
	num[0] = LLVMBuildSelect(B, LLVMBuildOr(B, sl, tiny, ""), one, zero, "");
	den[0] = LLVMBuildSelect(B, sl, v, LLVMBuildSelect(B, tiny, a, one, ""), "");
	num[1] = zero;
	den[1] = one;
	for (int j = 1; j <= 8; j++) {
		LLVMValueRef inc = LLVMBuildAnd(B, LLVMBuildFCmp(B, LLVMRealOGE, v, mk(m, j + 1), ""),
		                                LLVMBuildNot(B, large, ""), "");
		LLVMValueRef fj = LLVMBuildSelect(B, inc, msub(m, v, mk(m, j)), one, "");
		int h = j > 4;
		num[h] = mfma(m, num[h], fj, LLVMBuildSelect(B, inc, den[h], zero, ""));
		den[h] = mmul(m, den[h], fj);
	}
	LLVMValueRef q = madd(m, mdiv(m, num[0], den[0]), mdiv(m, num[1], den[1])), z = mmul(m, q, q);
	if (m->d) {
		static const double E[] = {0.00011760657164236826, -0.00017812816199980528,
		                           9.8188931848368965e-05, -0.00014492516861014685,
		                           0.00032298185949129071, -0.00048588379018547093,
		                           0.00069125226445515108, -0.0010364793837654342,
		                           0.0015633018770457392, -0.0023454907194339143,
		                           0.0035181155851796578, -0.00527993774357225,
		                           0.0079270210260173873, -0.011908220068846656,
		                           0.01790724835834023, -0.02697579666148241,
		                           0.040760833939573589, -0.061922133275445775,
		                           0.094988724452910595, -0.14840492305388139,
		                           0.24054248424078686, -0.42362742128146058, 0.95105587603183284};
		// B_2k / 2k, k = 8 .. 1
		static const double A[] = {-3617.0 / 8160, 1.0 / 12, -691.0 / 32760, 1.0 / 132,
		                           -1.0 / 240, 1.0 / 252, -1.0 / 120, 1.0 / 12};
		e = mpoly(m, t, E, 23);
		asy = mpoly(m, z, A, 8);
	} else {
		static const double E[] = {0.01079188846051693, -0.016365295276045799,
		                           0.017183676362037659, -0.025791538879275322,
		                           0.040835142135620117, -0.062055114656686783,
		                           0.094985999166965485, -0.14839892089366913,
		                           0.24054250121116638, -0.42362749576568604, 0.95105588436126709};
		static const double A[] = {-1.0 / 240, 1.0 / 252, -1.0 / 120, 1.0 / 12};
		e = mpoly(m, t, E, 11);
		asy = mpoly(m, z, A, 4);
	}
	LLVMValueRef base = mmul(m, d, e);
	asy = msub(m, mfma(m, q, mk(m, -0.5), m_call(m, KX_LOG, v)), mmul(m, z, asy));
	LLVMValueRef r = LLVMBuildSelect(B, large, asy, madd(m, base, q), "");
	r = LLVMBuildSelect(B, small, msub(m, base, q), r, "");
	// pi cot(pi a): cp / sp, or -pi^2 sp / cp (sp = sin(pi r) / pi)
	LLVMValueRef sp, cp, odd;
	m_sincospi(m, a, &sp, &cp, &odd);
	LLVMValueRef cn = LLVMBuildSelect(B, odd, mmul(m, mk(m, -9.86960440108935861883), sp), cp, "");
	LLVMValueRef cd = LLVMBuildSelect(B, odd, cp, sp, "");
	LLVMValueRef rn = madd(m, r, mdiv(m, cn, cd));
	r = LLVMBuildSelect(B, LLVMBuildAnd(B, neg, LLVMBuildNot(B, tiny, ""), ""), rn, r, "");
	LLVMValueRef pole = LLVMBuildAnd(B, LLVMBuildFCmp(B, LLVMRealOLE, x, zero, ""),
	                                 LLVMBuildFCmp(B, LLVMRealOEQ, a, fa, ""), "");
	LLVMValueRef nx = LLVMBuildFNeg(B, x, ""), args[2] = {mk(m, INFINITY), nx};
	LLVMValueRef zr = intrinsic(m->e, "llvm.copysign", m->t, args, 2);
	r = LLVMBuildSelect(B, pole, msel(m, LLVMRealOEQ, x, zero, zr, mk(m, NAN)), r, "");
	return msel(m, LLVMRealUNO, x, x, x, r);
}

// trigamma(x) = psi'(x), polygamma of order 1.  x > 0: n = ceil(10 - x)
// steps up, psi1(x) = sum_{j<n} 1/(x + j)^2 + psi1(v), v = x + n in [10,
// 11) (x >= 10: v = x): every term positive, so nothing cancels; the sum
// as 1/x^2 and two fractions (j = 1..4, 5..9), and at v the asymptotic
// series w + w^2/2 + sum B_2k w^(2k+1), w = 1/v, to B_20 (f32: B_8; the
// next term is below 2^-60 of the sum).  x < 0: reflection, pi^2 /
// sin^2(pi a) - psi1(1 + a), a = -x, the positive path run on 1 + a.
// Poles (0, negative integers): +inf; -inf: NaN (ir/special.c).
static LLVMValueRef
m_trigamma(Mb *m, LLVMValueRef x)
{
	LLVMBuilderRef B = m->e->B;
	LLVMValueRef one = mk(m, 1), zero = mk(m, 0);
	LLVMValueRef a = intrinsic1(m->e, "llvm.fabs", m->t, x);
	LLVMValueRef neg = LLVMBuildFCmp(B, LLVMRealOLT, x, zero, "");
	LLVMValueRef v = LLVMBuildSelect(B, neg, madd(m, a, one), a, "");
	LLVMValueRef n = intrinsic1(m->e, "llvm.ceil", m->t, msub(m, mk(m, 10), v));
	n = msel(m, LLVMRealOGT, n, zero, n, zero);
	n = msel(m, LLVMRealUNO, n, n, zero, n); // NaN: selected away at the end
	LLVMValueRef q = mdiv(m, one, v); // squared: v^2 may be denormal where 1/v^2 is finite
	q = msel(m, LLVMRealOLT, v, mk(m, 10), mmul(m, q, q), zero);
	LLVMValueRef num[2] = {zero, zero}, den[2] = {one, one};
	for (int j = 1; j <= 9; j++) {
		LLVMValueRef inc = LLVMBuildFCmp(B, LLVMRealOGT, n, mk(m, j), "");
		LLVMValueRef fj = madd(m, v, mk(m, j));
		fj = LLVMBuildSelect(B, inc, mmul(m, fj, fj), one, "");
		int h = j > 4;
		num[h] = mfma(m, num[h], fj, LLVMBuildSelect(B, inc, den[h], zero, ""));
		den[h] = mmul(m, den[h], fj);
	}
	q = madd(m, q, madd(m, mdiv(m, num[0], den[0]), mdiv(m, num[1], den[1])));
	LLVMValueRef w = mdiv(m, one, madd(m, v, n)), ww = mmul(m, w, w), p;
	if (m->d) {
		// B_20 .. B_2
		static const double Bn[] = {-174611.0 / 330, 43867.0 / 798, -3617.0 / 510, 7.0 / 6,
		                            -691.0 / 2730,   5.0 / 66,      -1.0 / 30,     1.0 / 42,
		                            -1.0 / 30,       1.0 / 6};
		p = mpoly(m, ww, Bn, 10);
	} else {
		static const double Bn[] = {-1.0 / 30, 1.0 / 42, -1.0 / 30, 1.0 / 6};
		p = mpoly(m, ww, Bn, 4);
	}
	// w + w^2 (1/2 + w p)
	LLVMValueRef asy = mfma(m, ww, mfma(m, w, p, mk(m, 0.5)), w);
	LLVMValueRef pos = madd(m, q, asy);
	LLVMValueRef sp, cp, odd;
	m_sincospi(m, a, &sp, &cp, &odd);
	// pi^2 / sin^2(pi a): 1 / sp^2 or pi^2 / cp^2
	LLVMValueRef s = LLVMBuildSelect(B, odd, cp, sp, "");
	LLVMValueRef pn = LLVMBuildSelect(B, odd, mk(m, 9.86960440108935861883), mk(m, 1), "");
	LLVMValueRef rn = msub(m, mdiv(m, pn, mmul(m, s, s)), pos);
	LLVMValueRef r = LLVMBuildSelect(B, neg, rn, pos, "");
	LLVMValueRef fa = intrinsic1(m->e, "llvm.floor", m->t, a);
	LLVMValueRef pole = LLVMBuildAnd(B, LLVMBuildFCmp(B, LLVMRealOLE, x, zero, ""),
	                                 LLVMBuildFCmp(B, LLVMRealOEQ, a, fa, ""), "");
	LLVMValueRef pv = msel(m, LLVMRealOEQ, a, mk(m, INFINITY), mk(m, NAN), mk(m, INFINITY));
	r = LLVMBuildSelect(B, pole, pv, r, "");
	return msel(m, LLVMRealUNO, x, x, x, r);
}

// The function computing op in dtype dt (F32 or F64): emitted at its first
// use, with its own builder position (the caller's is restored).
static LLVMValueRef
math_fn(Emit *e, KxOp op, DType dt)
{
	// KX_POLYGAMMA stands for digamma (order 0) here, KX_TRIGAMMA for order 1.
	static const KxOp ops[] = {KX_EXP, KX_LOG,    KX_LOG1P,     KX_EXPM1,   KX_TANH,
	                           KX_ERF, KX_LGAMMA, KX_POLYGAMMA, KX_TRIGAMMA};
	static const char *const names[] = {"exp", "log",    "log1p",   "expm1",   "tanh",
	                                    "erf", "lgamma", "digamma", "trigamma"};
	int i = 0;
	while (ops[i] != op)
		i++;
	int d = dt == DT_F64;
	if (e->mathfn[i][d])
		return e->mathfn[i][d];
	Mb m = {e, ty(e, dt), d ? e->i64 : e->i32, d};
	char name[32];
	snprintf(name, sizeof name, "fadc.%s.%s", names[i], d ? "f64" : "f32");
	LLVMTypeRef fty = LLVMFunctionType(m.t, &m.t, 1, 0);
	LLVMValueRef fn = LLVMAddFunction(e->M, name, fty);
	LLVMSetLinkage(fn, LLVMInternalLinkage);
	fn_attr(e, fn, LLVMAttributeFunctionIndex, "nounwind");
	fn_attr(e, fn, LLVMAttributeFunctionIndex, "alwaysinline");
	fn_attr(e, fn, LLVMAttributeFunctionIndex, "readnone");
	e->mathfn[i][d] = fn;
	LLVMBasicBlockRef saved = LLVMGetInsertBlock(e->B);
	LLVMPositionBuilderAtEnd(e->B, LLVMAppendBasicBlockInContext(e->C, fn, "entry"));
	LLVMValueRef x = LLVMGetParam(fn, 0), r;
	switch (op) {
	case KX_EXP:
		r = m_exp(&m, x);
		break;
	case KX_LOG:
		r = m_log(&m, x);
		break;
	case KX_LOG1P:
		r = m_log1p(&m, x);
		break;
	case KX_EXPM1:
		r = m_expm1(&m, x);
		break;
	case KX_ERF:
		r = m_erf(&m, x);
		break;
	case KX_LGAMMA:
		r = m_lgamma(&m, x);
		break;
	case KX_POLYGAMMA:
		r = m_digamma(&m, x);
		break;
	case KX_TRIGAMMA:
		r = m_trigamma(&m, x);
		break;
	default:
		r = m_tanh(&m, x);
		break;
	}
	LLVMBuildRet(e->B, r);
	if (saved)
		LLVMPositionBuilderAtEnd(e->B, saved);
	return fn;
}

// A call of the function computing op, in the dtype of m.
static LLVMValueRef
m_call(Mb *m, KxOp op, LLVMValueRef x)
{
	LLVMValueRef fn = math_fn(m->e, op, m->d ? DT_F64 : DT_F32);
	return LLVMBuildCall2(m->e->B, LLVMGlobalGetValueType(fn), fn, &x, 1, "");
}

// ---------------------------------------------------------------- expressions

// Converts v of compute dtype `from` to compute dtype `to`; round32 first
// rounds to float (a cast to f32 storage while computing in f64).
static LLVMValueRef
convert(Emit *e, LLVMValueRef v, DType from, DType to, int round32)
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

static LLVMValueRef emit_x(Emit *e, KxId id);

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
	LLVMValueRef a = x->nin > 0 ? emit_x(e, x->a[0]) : NULL;
	LLVMValueRef b = x->nin > 1 ? emit_x(e, x->a[1]) : NULL;
	LLVMValueRef c = x->nin > 2 ? emit_x(e, x->a[2]) : NULL;
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
		return convert(e, v, st, dt, 0);
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
			// Vectorizable implementations (math_fn), inlined into the loop.
			LLVMValueRef f = math_fn(e, (KxOp)x->op, dt);
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
			LLVMValueRef f = math_fn(e, (KxOp)x->op, dt);
			return LLVMBuildCall2(e->B, LLVMGlobalGetValueType(f), f, &a, 1, "");
		}
		if (x->op == KX_ERF)
			return call1(e, dt == DT_F32 ? "erff" : "erf", t, a);
		return call1(e, dt == DT_F32 ? "fadc_lgammaf" : "fadc_lgamma", t, a);
	case KX_POLYGAMMA: {
		const Kx *n = &p->x[x->a[0]];
		if (e->vecmath && n->op == KX_CONST && (n->f == 0 || n->f == 1)) { // digamma, trigamma
			LLVMValueRef f = math_fn(e, n->f == 0 ? KX_POLYGAMMA : KX_TRIGAMMA, dt);
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
		return convert(e, a, from, dt, x->aux == DT_F32 && dt == DT_F64);
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

static LLVMValueRef
emit_x(Emit *e, KxId id)
{
	if (e->stamp[id] == e->region)
		return e->val[id];
	LLVMValueRef v = emit_op(e, &e->p->x[id]);
	e->stamp[id] = e->region;
	e->val[id] = v;
	return v;
}

// ---------------------------------------------------------------- loops

typedef struct Loop {
	LLVMBasicBlockRef head, body, exit;
	LLVMValueRef ctr;
	int64_t ext;
} Loop;

// A loop of counter ctr over [0, ext), ext an i64 value.
static void
loop_begin_v(Emit *e, Loop *l, LLVMValueRef ctr, LLVMValueRef ext)
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

static void
loop_begin(Emit *e, Loop *l, LLVMValueRef ctr, int64_t ext)
{
	loop_begin_v(e, l, ctr, LLVMConstInt(e->i64, (unsigned long long)ext, 1));
	l->ext = ext;
}

static void
loop_end(Emit *e, Loop *l)
{
	LLVMValueRef i = LLVMBuildLoad2(e->B, e->i64, l->ctr, "");
	LLVMBuildStore(e->B, LLVMBuildNSWAdd(e->B, i, LLVMConstInt(e->i64, 1, 0), ""), l->ctr);
	LLVMBuildBr(e->B, l->head);
	LLVMPositionBuilderAtEnd(e->B, l->exit);
}

static void
new_region(Emit *e)
{
	e->region++;
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

static LLVMValueRef entry_alloca(Emit *e, LLVMTypeRef t);

// A loop of counter ctr over [lo, hi), i64 values.
static void
loop_begin_range(Emit *e, Loop *l, LLVMValueRef ctr, LLVMValueRef lo, LLVMValueRef hi)
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
static void
store_coords(Emit *e, LLVMValueRef f, const int64_t *dims, int n, LLVMValueRef *vars)
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
		loop_begin_range(e, &loops[0], e->var[0], e->lo, e->hi);
	else if (s > 1) {
		// loops[0] is the flat loop (axes 0 .. s-1 need no loop of their own).
		e->flat = entry_alloca(e, e->i64);
		loop_begin_range(e, &loops[0], e->flat, e->lo, e->hi);
		store_coords(e, LLVMBuildLoad2(e->B, e->i64, e->flat, ""), k->dim, s, e->var);
	}
	for (int d = s; d < nax; d++)
		loop_begin(e, &loops[d], e->var[d], k->dim[d]);
}

static void
par_end(Emit *e, Loop *loops, int nax)
{
	int s = e->sp.on ? e->sp.nax : 0;
	for (int d = nax - 1; d >= s; d--)
		loop_end(e, &loops[d]);
	if (s >= 1)
		loop_end(e, &loops[0]);
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
		loop_begin(e, &loops[k->rank + d], e->var[k->rank + d], k->rdim[d]);
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
		LLVMValueRef v = emit_x(e, k->body);
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
	LLVMValueRef v = emit_x(e, k->body);
	LLVMValueRef a = LLVMBuildLoad2(e->B, t, acc[0], "");
	LLVMBuildStore(e->B, LLVMBuildFAdd(e->B, a, v, ""), acc[0]);
	LLVMBuildStore(e->B, LLVMBuildNSWAdd(e->B, b, LLVMConstInt(e->i64, 1, 0), ""), base);
	LLVMBuildBr(e->B, rhead);
	LLVMPositionBuilderAtEnd(e->B, done);
	e->vecmath = 0;
	for (int d = k->rrank - 2; d >= 0; d--)
		loop_end(e, &loops[k->rank + d]);
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
		loop_begin_range(e, &loops[j], e->var[j], e->lo, e->hi);
	else
		loop_begin(e, &loops[j], e->var[j], k->dim[j]);
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
	LLVMValueRef idx = emit_x(e, k->index);
	LLVMBuildStore(e->B, red_init(e, k->red, vt), LLVMBuildInBoundsGEP2(e->B, t, out, &idx, 1, ""));
	loop_end(e, &loops[j]);
	for (int d = 0; d < k->rrank; d++)
		loop_begin(e, &loops[k->rank + d], e->var[k->rank + d], k->rdim[d]);
	j_loop(e, k, loops, j, jsplit);
	new_region(e);
	LLVMValueRef v = emit_x(e, k->body);
	idx = emit_x(e, k->index);
	LLVMValueRef ptr = LLVMBuildInBoundsGEP2(e->B, t, out, &idx, 1, "");
	LLVMValueRef a = LLVMBuildLoad2(e->B, t, ptr, "");
	LLVMBuildStore(e->B, red_combine(e, k->red, vt, a, v), ptr);
	loop_end(e, &loops[j]);
	for (int d = k->rrank - 1; d >= 0; d--)
		loop_end(e, &loops[k->rank + d]);
	if (p->x[k->post].op != KX_ACC) {
		j_loop(e, k, loops, j, jsplit);
		new_region(e);
		idx = emit_x(e, k->index);
		ptr = LLVMBuildInBoundsGEP2(e->B, t, out, &idx, 1, "");
		LLVMValueRef save = e->acc;
		e->acc = ptr; // KX_ACC reads the output element
		LLVMBuildStore(e->B, emit_x(e, k->post), ptr);
		e->acc = save;
		loop_end(e, &loops[j]);
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

// ---------------------------------------------------------------- blocked GEMM
// A contraction kernel C[.., i, j] = sum_k A[.., i, k] B[.., k, j] whose
// body is a product of two loads with affine indices (every loop variable
// with a constant coefficient), whose output is contiguous along j (the
// last parallel variable) and whose B is contiguous along j too, runs as a
// register-blocked GEMM in vector IR: tiles of MR rows by NR = NV vectors
// of columns, MR x NV vector accumulators held in registers over the
// whole reduction (the reduction loops innermost, any number of them), a
// broadcast of A[i, k] times a vector load of B[k, j0..] per term, fused
// multiply-add where the target has it (llvm.fmuladd).  Each output still
// sums its terms in the order of k, one at a time: only the rounding of
// the fused multiply-add differs from the plain loop nest.  Rows past the
// last whole MR-row block run as one-row tiles, columns past the last
// whole tile as a tile with masked loads and stores.  A's values are broadcast, so any
// strides of A work; B is packed per block of GEMM_KC reduction steps
// when the reduction is one walk (emit_gemm), else read in place (its
// rows of NR values are contiguous).  LLVM 14's C API cannot set
// fast-math flags, which is why the vectors are spelled out: the loop
// vectorizer would not reassociate a reduction.
#define GEMM_MR 6
#define GEMM_NV 2 // vectors of VL lanes per tile row: 8 f32 or 4 f64 each (16 or 8 wide)
#define GEMM_MIN_WORK 4096 // M N K below which the plain loops are as good
#define GEMM_KC 256 // reduction steps per packed block of B (KC x NR values: 16 KiB, 32 wide)
#define GEMM_PF 8 // reduction steps ahead that a strided A is prefetched
#define GEMM_PF_MIN_STRIDE 16 // elements: below, A's steps share cache lines

typedef struct Gemm {
	int vi; // parallel variable of the rows (-1: one row)
	int vj; // of the columns (the last one)
	int64_t M, N;
	uint32_t abuf, bbuf; // the buffers of A and B
	KxId aidx, bidx; // their load indices
	int64_t ca_i, cb_j, cc_i; // coefficients: A along i, B along j (1), C along i
	int64_t ca_k[IR_MAXDIM], cb_k[IR_MAXDIM]; // along each reduction variable
	// The reduction as one axis k = (r0, r1, ...) row-major, when every
	// variable's coefficients in A and B are the next one's times its
	// extent (a weight gradient summing over (n, p) of gT[co, n, p] and
	// colT[n, p, q]): K steps, A and B moving by ka and kb per step.
	int one;
	int64_t K, ka, kb;
} Gemm;

// Lanes of the tile vectors: the target's vector width (Emit.vbytes: 32
// bytes, 64 with AVX-512) over the element's size.
#define GEMM_VL_MAX 16 // lanes of a tile vector at most: 64 bytes of f32

static unsigned
gemm_vl(unsigned vbytes, DType vt)
{
	return vbytes / (vt == DT_F32 ? 4u : 8u);
}

// The shared recognition (kir_gemm_match: a product of two affine loads
// summed, no epilogue), then this backend's form: C and B contiguous
// along j, B not moving along the rows, and enough work and columns for
// the vector tiles.
static int
gemm_plan(const KProgram *p, const KKernel *k, unsigned vbytes, Gemm *G)
{
	KGemm m;
	if (!kir_gemm_match(p, k, &m))
		return 0;
	DType vt = (DType)p->x[k->body].dtype;
	int vj = k->rank - 1, vi = k->rank >= 2 ? k->rank - 2 : -1;
	if (m.cc[vj] != 1 || m.ca[vj] != 0 || m.cb[vj] != 1 || (vi >= 0 && m.cb[vi] != 0))
		return 0;
	G->vi = vi;
	G->vj = vj;
	G->M = vi >= 0 ? k->dim[vi] : 1;
	G->N = k->dim[vj];
	G->abuf = m.abuf;
	G->bbuf = m.bbuf;
	G->aidx = m.aidx;
	G->bidx = m.bidx;
	G->ca_i = vi >= 0 ? m.ca[vi] : 0;
	G->cc_i = vi >= 0 ? m.cc[vi] : 0;
	G->cb_j = 1;
	int64_t K = 1;
	for (int r = 0; r < k->rrank; r++) {
		G->ca_k[r] = m.ca[k->rank + r];
		G->cb_k[r] = m.cb[k->rank + r];
		K *= k->rdim[r];
	}
	// Merge the reduction axes when they are one walk through both
	// operands: then the packed path (one axis) serves them, and each
	// output still sums in the same order (r0 outermost).
	int last = k->rrank - 1;
	G->one = k->rrank >= 1;
	G->K = K;
	G->ka = last >= 0 ? G->ca_k[last] : 0;
	G->kb = last >= 0 ? G->cb_k[last] : 0;
	for (int64_t r = last - 1, sa = G->ka, sb = G->kb; r >= 0 && G->one; r--) {
		sa *= k->rdim[r + 1], sb *= k->rdim[r + 1];
		G->one = G->ca_k[r] == sa && G->cb_k[r] == sb;
	}
	int64_t vl = gemm_vl(vbytes, vt);
	return G->N >= GEMM_NV * vl && G->M * G->N * K >= GEMM_MIN_WORK;
}

static LLVMValueRef
i64c(Emit *e, int64_t v)
{
	return LLVMConstInt(e->i64, (unsigned long long)v, 1);
}

// base + c * v (v an i64 value), skipping zero coefficients.
static LLVMValueRef
axpy(Emit *e, LLVMValueRef base, int64_t c, LLVMValueRef v)
{
	if (c == 0)
		return base;
	return LLVMBuildNSWAdd(e->B, base, c == 1 ? v : LLVMBuildNSWMul(e->B, v, i64c(e, c), ""), "");
}

// A value of buffer b at element index idx, in the compute dtype vt.
static LLVMValueRef
gemm_load(Emit *e, uint32_t b, LLVMValueRef idx, DType vt)
{
	DType st = e->p->buf[b].dtype;
	LLVMValueRef ptr = LLVMBuildInBoundsGEP2(e->B, sty(e, st), e->bufptr[b], &idx, 1, "");
	LLVMValueRef v = LLVMBuildLoad2(e->B, sty(e, st), ptr, "");
	return convert(e, v, st, vt, 0);
}

// A vector load through ptr (a pointer to vty), or with a mask (an
// <N x i1> constant, or NULL for all lanes) only the lanes it sets: the
// others are zero and their memory is never touched (llvm.masked.load:
// vmaskmov on AVX), so a tile may hang over the end of a row.
static LLVMValueRef
vload_masked(Emit *e, LLVMTypeRef vty, LLVMValueRef ptr, unsigned align, LLVMValueRef mask)
{
	if (!mask) {
		LLVMValueRef v = LLVMBuildLoad2(e->B, vty, ptr, "");
		LLVMSetAlignment(v, align);
		return v;
	}
	LLVMTypeRef ot[2] = {vty, LLVMTypeOf(ptr)};
	LLVMValueRef args[4] = {ptr, LLVMConstInt(e->i32, align, 0), mask, LLVMConstNull(vty)};
	return intrinsic_ov(e, "llvm.masked.load", ot, 2, args, 4);
}

// The store of vector v through ptr, of the lanes mask sets (NULL: all).
static void
vstore_masked(Emit *e, LLVMValueRef v, LLVMValueRef ptr, unsigned align, LLVMValueRef mask)
{
	if (!mask) {
		LLVMSetAlignment(LLVMBuildStore(e->B, v, ptr), align);
		return;
	}
	LLVMTypeRef ot[2] = {LLVMTypeOf(v), LLVMTypeOf(ptr)};
	LLVMValueRef args[4] = {v, ptr, LLVMConstInt(e->i32, align, 0), mask};
	intrinsic_ov(e, "llvm.masked.store", ot, 2, args, 4);
}

// VL values of buffer b from element idx on (the lanes of mask, NULL for
// all), as a vector of the compute dtype.
static LLVMValueRef
gemm_vload(Emit *e, uint32_t b, LLVMValueRef idx, DType vt, unsigned vl, LLVMValueRef mask)
{
	DType st = e->p->buf[b].dtype;
	LLVMTypeRef svt = LLVMVectorType(sty(e, st), vl);
	LLVMValueRef ptr = LLVMBuildInBoundsGEP2(e->B, sty(e, st), e->bufptr[b], &idx, 1, "");
	ptr = LLVMBuildBitCast(e->B, ptr, LLVMPointerType(svt, 0), "");
	LLVMValueRef v = vload_masked(e, svt, ptr, (unsigned)kir_dtype_size(st), mask);
	if (st != vt)
		v = LLVMBuildFPExt(e->B, v, LLVMVectorType(ty(e, vt), vl), "");
	return v;
}

static LLVMValueRef
splat(Emit *e, LLVMValueRef x, unsigned vl)
{
	LLVMTypeRef vt = LLVMVectorType(LLVMTypeOf(x), vl);
	LLVMValueRef v = LLVMBuildInsertElement(e->B, LLVMGetUndef(vt), x, LLVMConstInt(e->i32, 0, 0), "");
	LLVMValueRef zero = LLVMConstNull(LLVMVectorType(e->i32, vl));
	return LLVMBuildShuffleVector(e->B, v, LLVMGetUndef(vt), zero, "");
}

// An alloca in the entry block (promoted by mem2reg).
static LLVMValueRef
entry_alloca(Emit *e, LLVMTypeRef t)
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

// One tile: rows i0 .. i0+mr-1, columns j0 .. j0+NV VL-1, over the whole
// reduction, in mr x NV vector accumulators.
static void
gemm_tile(Emit *e, const KKernel *k, const Gemm *G, LLVMValueRef *acc, int mr, LLVMValueRef ba,
          LLVMValueRef bb, LLVMValueRef bc, LLVMValueRef i0, LLVMValueRef j0, DType vt, unsigned vl,
          Loop *loops, const LLVMValueRef *mask)
{
	LLVMTypeRef vty = LLVMVectorType(ty(e, vt), vl);
	for (int a = 0; a < mr * GEMM_NV; a++)
		LLVMBuildStore(e->B, LLVMConstNull(vty), acc[a]);
	LLVMValueRef pa = axpy(e, ba, G->ca_i, i0), pb = LLVMBuildNSWAdd(e->B, bb, j0, "");
	for (int r = 0; r < k->rrank; r++)
		loop_begin(e, &loops[k->rank + r], e->var[k->rank + r], k->rdim[r]);
	LLVMValueRef ia = pa, ib = pb;
	for (int r = 0; r < k->rrank; r++) {
		LLVMValueRef kv = LLVMBuildLoad2(e->B, e->i64, e->var[k->rank + r], "");
		ia = axpy(e, ia, G->ca_k[r], kv);
		ib = axpy(e, ib, G->cb_k[r], kv);
	}
	LLVMValueRef bv[GEMM_NV];
	for (int v = 0; v < GEMM_NV; v++)
		bv[v] = gemm_vload(e, G->bbuf, LLVMBuildNSWAdd(e->B, ib, i64c(e, v * (int64_t)vl), ""), vt, vl,
		                   mask ? mask[v] : NULL);
	for (int i = 0; i < mr; i++) {
		LLVMValueRef av = splat(e, gemm_load(e, G->abuf, axpy(e, ia, G->ca_i, i64c(e, i)), vt), vl);
		for (int v = 0; v < GEMM_NV; v++) {
			LLVMValueRef cur = LLVMBuildLoad2(e->B, vty, acc[i * GEMM_NV + v], "");
			LLVMValueRef args[3] = {av, bv[v], cur};
			LLVMBuildStore(e->B, intrinsic(e, "llvm.fmuladd", vty, args, 3), acc[i * GEMM_NV + v]);
		}
	}
	for (int r = k->rrank - 1; r >= 0; r--)
		loop_end(e, &loops[k->rank + r]);
	LLVMTypeRef cst = sty(e, vt);
	for (int i = 0; i < mr; i++)
		for (int v = 0; v < GEMM_NV; v++) {
			LLVMValueRef idx = axpy(e, bc, G->cc_i, LLVMBuildNSWAdd(e->B, i0, i64c(e, i), ""));
			idx = LLVMBuildNSWAdd(e->B, idx, LLVMBuildNSWAdd(e->B, j0, i64c(e, v * (int64_t)vl), ""), "");
			LLVMValueRef ptr = LLVMBuildInBoundsGEP2(e->B, cst, e->bufptr[k->out], &idx, 1, "");
			ptr = LLVMBuildBitCast(e->B, ptr, LLVMPointerType(vty, 0), "");
			vstore_masked(e, LLVMBuildLoad2(e->B, vty, acc[i * GEMM_NV + v], ""), ptr,
			              (unsigned)kir_dtype_size(vt), mask ? mask[v] : NULL);
		}
}

// The tile of rows i0 .. i0+mr-1 and the packed columns for reduction
// steps k0 .. k0+kc-1: the accumulators start from zero in the first block
// (first, an i1) and from C after, and end in C.
static void
gemm_tile_packed(Emit *e, const KKernel *k, const Gemm *G, LLVMValueRef *acc, int mr,
                 LLVMValueRef bp, LLVMValueRef ba, LLVMValueRef bc, LLVMValueRef i0, LLVMValueRef j0,
                 LLVMValueRef k0, LLVMValueRef kc, LLVMValueRef first, LLVMValueRef ctr, DType vt,
                 unsigned vl, const LLVMValueRef *mask)
{
	LLVMTypeRef vty = LLVMVectorType(ty(e, vt), vl), cst = sty(e, vt);
	LLVMValueRef cptr[GEMM_MR * GEMM_NV];
	for (int i = 0; i < mr; i++)
		for (int v = 0; v < GEMM_NV; v++) {
			LLVMValueRef idx = axpy(e, bc, G->cc_i, LLVMBuildNSWAdd(e->B, i0, i64c(e, i), ""));
			idx = LLVMBuildNSWAdd(e->B, idx, LLVMBuildNSWAdd(e->B, j0, i64c(e, v * (int64_t)vl), ""), "");
			LLVMValueRef ptr = LLVMBuildInBoundsGEP2(e->B, cst, e->bufptr[k->out], &idx, 1, "");
			cptr[i * GEMM_NV + v] = LLVMBuildBitCast(e->B, ptr, LLVMPointerType(vty, 0), "");
			LLVMValueRef old = vload_masked(e, vty, cptr[i * GEMM_NV + v], (unsigned)kir_dtype_size(vt),
			                                mask ? mask[v] : NULL);
			LLVMBuildStore(e->B, LLVMBuildSelect(e->B, first, LLVMConstNull(vty), old, ""),
			               acc[i * GEMM_NV + v]);
		}
	LLVMValueRef pa = axpy(e, axpy(e, ba, G->ca_i, i0), G->ka, k0);
	Loop lk;
	loop_begin_v(e, &lk, ctr, kc);
	LLVMValueRef kk = LLVMBuildLoad2(e->B, e->i64, ctr, "");
	LLVMValueRef ia = axpy(e, pa, G->ka, kk);
	if (G->ka > GEMM_PF_MIN_STRIDE || G->ka < -GEMM_PF_MIN_STRIDE) {
		// A steps by a whole row per reduction step (A transposed, as in a
		// weight gradient x^T g): each step's MR values are a new cache
		// line, which the hardware prefetcher does not foresee; fetch the
		// line GEMM_PF steps ahead (the first and the last row of the tile:
		// MR values may straddle two lines).  A prefetch never faults.
		int rows[2] = {0, mr - 1};
		for (int r = 0; r < (mr > 1 ? 2 : 1); r++) {
			LLVMValueRef idx = axpy(e, axpy(e, ia, G->ka, i64c(e, GEMM_PF)), G->ca_i, i64c(e, rows[r]));
			DType at = e->p->buf[G->abuf].dtype;
			LLVMValueRef ptr = LLVMBuildGEP2(e->B, sty(e, at), e->bufptr[G->abuf], &idx, 1, "");
			LLVMValueRef args[4] = {LLVMBuildBitCast(e->B, ptr, e->i8p, ""), LLVMConstInt(e->i32, 0, 0),
			                        LLVMConstInt(e->i32, 3, 0), LLVMConstInt(e->i32, 1, 0)};
			intrinsic(e, "llvm.prefetch", e->i8p, args, 4);
		}
	}
	LLVMValueRef bv[GEMM_NV];
	for (int v = 0; v < GEMM_NV; v++) {
		LLVMValueRef slot = LLVMBuildNSWAdd(e->B, LLVMBuildNSWMul(e->B, kk, i64c(e, GEMM_NV), ""), i64c(e, v), "");
		LLVMValueRef ptr = LLVMBuildInBoundsGEP2(e->B, vty, bp, &slot, 1, "");
		bv[v] = LLVMBuildLoad2(e->B, vty, ptr, "");
	}
	for (int i = 0; i < mr; i++) {
		LLVMValueRef av = splat(e, gemm_load(e, G->abuf, axpy(e, ia, G->ca_i, i64c(e, i)), vt), vl);
		for (int v = 0; v < GEMM_NV; v++) {
			LLVMValueRef cur = LLVMBuildLoad2(e->B, vty, acc[i * GEMM_NV + v], "");
			LLVMValueRef args[3] = {av, bv[v], cur};
			LLVMBuildStore(e->B, intrinsic(e, "llvm.fmuladd", vty, args, 3), acc[i * GEMM_NV + v]);
		}
	}
	loop_end(e, &lk);
	for (int a = 0; a < mr * GEMM_NV; a++)
		vstore_masked(e, LLVMBuildLoad2(e->B, vty, acc[a], ""), cptr[a], (unsigned)kir_dtype_size(vt),
		              mask ? mask[a % GEMM_NV] : NULL);
}

// The GEMM's range: one iteration per (outer point, group of GEMM_RG
// rows, column tile), the columns past the last tile counting as one more
// tile, in that order (column tiles fastest: consecutive iterations share
// their rows of A, which stay in cache while B's panels change).  Each
// iteration computes its outputs whole, by the same code whatever the
// chunking: the unit of the thread pool's split (split_plan), and the
// loop of an unsplit GEMM too.
#define GEMM_RG (64 * GEMM_MR) // rows per group: B's packed panel is reused this often

static void
gemm_range(const KKernel *k, const Gemm *G, unsigned vl, int64_t *nouter_pts, int64_t *ncol,
           int64_t *ngroup)
{
	int nouter = G->vi >= 0 ? G->vi : G->vj;
	int64_t nr = GEMM_NV * (int64_t)vl, np = 1;
	for (int d = 0; d < nouter; d++)
		np *= k->dim[d];
	*nouter_pts = np;
	*ncol = G->N / nr + (G->N % nr != 0);
	*ngroup = (G->M + GEMM_RG - 1) / GEMM_RG;
}

static LLVMValueRef
smin(Emit *e, LLVMValueRef a, LLVMValueRef b)
{
	return LLVMBuildSelect(e->B, LLVMBuildICmp(e->B, LLVMIntSLT, a, b, ""), a, b, "");
}

// One iteration f of the range, decoded: its column tile, its rows
// r0 .. r0 + nrows - 1 (mb blocks of MR from r0, rem more from rbase) and
// the bases of A, B and C (every index at i = j = k = 0 for its outer
// point).
typedef struct GemmIter {
	LLVMValueRef tile, r0, nrows, mb, rem, rbase, ba, bb, bc;
} GemmIter;

static GemmIter
gemm_iter(Emit *e, const KKernel *k, const Gemm *G, LLVMValueRef f, int64_t ncol, int64_t ngroup)
{
	GemmIter it;
	int nouter = G->vi >= 0 ? G->vi : G->vj;
	it.tile = LLVMBuildSRem(e->B, f, i64c(e, ncol), "");
	LLVMValueRef q = LLVMBuildSDiv(e->B, f, i64c(e, ncol), "");
	LLVMValueRef g = LLVMBuildSRem(e->B, q, i64c(e, ngroup), "");
	store_coords(e, LLVMBuildSDiv(e->B, q, i64c(e, ngroup), ""), k->dim, nouter, e->var);
	for (int v = nouter; v < k->rank + k->rrank; v++)
		LLVMBuildStore(e->B, i64c(e, 0), e->var[v]);
	new_region(e);
	it.ba = emit_x(e, G->aidx);
	it.bb = emit_x(e, G->bidx);
	it.bc = emit_x(e, k->index);
	it.r0 = LLVMBuildNSWMul(e->B, g, i64c(e, GEMM_RG), "");
	it.nrows = smin(e, i64c(e, GEMM_RG), LLVMBuildNSWSub(e->B, i64c(e, G->M), it.r0, ""));
	it.mb = LLVMBuildSDiv(e->B, it.nrows, i64c(e, GEMM_MR), "");
	it.rem = LLVMBuildNSWSub(e->B, it.nrows, LLVMBuildNSWMul(e->B, it.mb, i64c(e, GEMM_MR), ""), "");
	it.rbase = LLVMBuildNSWAdd(e->B, it.r0, LLVMBuildNSWMul(e->B, it.mb, i64c(e, GEMM_MR), ""), "");
	return it;
}

// The packed path's state for one block of reduction steps: the panel bp,
// the block's steps k0 .. k0 + kc - 1, whether it is the first (an i1),
// and the counter of its steps.
typedef struct GemmBlock {
	LLVMValueRef bp, k0, kc, first, ctr;
} GemmBlock;

// The tiles of iteration `it`: blocks of MR rows, then the rows left, at
// its column tile.  With b, for that block of steps only, B's values
// packed first; else over the whole reduction, B read in place.  mask:
// the lanes of the columns that exist, for the last tile when the
// columns are no multiple of it (NULL: a whole tile).
static void
gemm_tiles(Emit *e, const KKernel *k, const Gemm *G, const GemmIter *it, const GemmBlock *b,
           LLVMValueRef *acc, LLVMValueRef ctr_m, LLVMValueRef ctr_r, Loop *loops, DType vt, unsigned vl,
           const LLVMValueRef *mask)
{
	LLVMTypeRef vty = LLVMVectorType(ty(e, vt), vl);
	LLVMValueRef j0 = LLVMBuildNSWMul(e->B, it->tile, i64c(e, GEMM_NV * (int64_t)vl), "");
	if (b) {
		Loop lp;
		loop_begin_v(e, &lp, b->ctr, b->kc);
		LLVMValueRef kk = LLVMBuildLoad2(e->B, e->i64, b->ctr, "");
		LLVMValueRef ib = axpy(e, LLVMBuildNSWAdd(e->B, it->bb, j0, ""), G->kb,
		                       LLVMBuildNSWAdd(e->B, b->k0, kk, ""));
		for (int v = 0; v < GEMM_NV; v++) {
			LLVMValueRef x = gemm_vload(e, G->bbuf, LLVMBuildNSWAdd(e->B, ib, i64c(e, v * (int64_t)vl), ""),
			                            vt, vl, mask ? mask[v] : NULL);
			LLVMValueRef slot = LLVMBuildNSWAdd(e->B, LLVMBuildNSWMul(e->B, kk, i64c(e, GEMM_NV), ""), i64c(e, v), "");
			LLVMBuildStore(e->B, x, LLVMBuildInBoundsGEP2(e->B, vty, b->bp, &slot, 1, ""));
		}
		loop_end(e, &lp);
	}
	Loop lm, lr;
	loop_begin_v(e, &lm, ctr_m, it->mb);
	LLVMValueRef i0 = LLVMBuildNSWAdd(e->B, it->r0, LLVMBuildNSWMul(e->B, LLVMBuildLoad2(e->B, e->i64, ctr_m, ""), i64c(e, GEMM_MR), ""), "");
	if (b)
		gemm_tile_packed(e, k, G, acc, GEMM_MR, b->bp, it->ba, it->bc, i0, j0, b->k0, b->kc, b->first, b->ctr,
		                 vt, vl, mask);
	else
		gemm_tile(e, k, G, acc, GEMM_MR, it->ba, it->bb, it->bc, i0, j0, vt, vl, loops, mask);
	loop_end(e, &lm);
	loop_begin_v(e, &lr, ctr_r, it->rem);
	i0 = LLVMBuildNSWAdd(e->B, LLVMBuildLoad2(e->B, e->i64, ctr_r, ""), it->rbase, "");
	if (b)
		gemm_tile_packed(e, k, G, acc, 1, b->bp, it->ba, it->bc, i0, j0, b->k0, b->kc, b->first, b->ctr, vt,
		                 vl, mask);
	else
		gemm_tile(e, k, G, acc, 1, it->ba, it->bb, it->bc, i0, j0, vt, vl, loops, mask);
	loop_end(e, &lr);
}

static void
emit_gemm(Emit *e, const KKernel *k, const Gemm *G, Loop *loops)
{
	const KProgram *p = e->p;
	DType vt = (DType)p->x[k->body].dtype;
	unsigned vl = gemm_vl(e->vbytes, vt);
	int64_t nr = GEMM_NV * (int64_t)vl, ntile = G->N / nr, rc = G->N - ntile * nr;
	int64_t np, ncol, ngroup;
	gemm_range(k, G, vl, &np, &ncol, &ngroup);
	LLVMTypeRef t = ty(e, vt), vty = LLVMVectorType(t, vl);
	LLVMValueRef acc[GEMM_MR * GEMM_NV];
	for (int a = 0; a < GEMM_MR * GEMM_NV; a++)
		acc[a] = entry_alloca(e, vty);
	LLVMValueRef ctr_f = entry_alloca(e, e->i64), ctr_m = entry_alloca(e, e->i64);
	LLVMValueRef ctr_r = entry_alloca(e, e->i64);
	// The last tile's lanes when the columns are no multiple of the tile:
	// column j0 + v VL + l exists when v VL + l < rc.  Its lanes past the
	// end compute on zeros (masked loads) and are never stored, so every
	// column is a vector lane, however few the columns (an attention's 60).
	LLVMValueRef mask[GEMM_NV];
	for (int v = 0; v < GEMM_NV; v++) {
		LLVMValueRef lanes[GEMM_VL_MAX];
		for (unsigned l = 0; l < vl; l++)
			lanes[l] = LLVMConstInt(LLVMInt1TypeInContext(e->C), v * (int64_t)vl + l < rc, 0);
		mask[v] = LLVMConstVector(lanes, vl);
	}
	// The range: [lo, hi) of a chunk, or all of it.
	LLVMValueRef lo = e->sp.on ? e->lo : i64c(e, 0), hi = e->sp.on ? e->hi : i64c(e, np * ncol * ngroup);
	GemmBlock blk, *b = NULL;
	Loop lkb, lf;
	if (G->one) {
		// One reduction axis (or axes merged into one): blocks of GEMM_KC
		// steps, outermost, over every tile of the range, so that a block
		// of A's rows (GEMM_RG x GEMM_KC) stays in cache while the range's
		// column tiles go by (the rows of A were re-read from memory for
		// every tile before).  Per block and tile, B's KC x NR values are
		// packed into a stack buffer (contiguous: one cache-resident panel,
		// no TLB misses from B's row stride) that every block of rows of
		// the group then reads.  The accumulators start from zero in the
		// first block and from C after: each output still sums its terms
		// in order of k, whatever the range.
		int64_t nkb = (G->K + GEMM_KC - 1) / GEMM_KC;
		LLVMValueRef bp = entry_alloca(e, LLVMArrayType(vty, GEMM_KC * GEMM_NV));
		LLVMSetAlignment(bp, 64);
		blk.bp = LLVMBuildBitCast(e->B, bp, LLVMPointerType(vty, 0), "");
		blk.ctr = entry_alloca(e, e->i64);
		LLVMValueRef ctr_kb = entry_alloca(e, e->i64);
		loop_begin(e, &lkb, ctr_kb, nkb);
		LLVMValueRef kb = LLVMBuildLoad2(e->B, e->i64, ctr_kb, "");
		blk.k0 = LLVMBuildNSWMul(e->B, kb, i64c(e, GEMM_KC), "");
		blk.kc = smin(e, LLVMBuildNSWSub(e->B, i64c(e, G->K), blk.k0, ""), i64c(e, GEMM_KC));
		blk.first = LLVMBuildICmp(e->B, LLVMIntEQ, kb, i64c(e, 0), "");
		b = &blk;
	}
	loop_begin_range(e, &lf, ctr_f, lo, hi);
	GemmIter it = gemm_iter(e, k, G, LLVMBuildLoad2(e->B, e->i64, ctr_f, ""), ncol, ngroup);
	if (rc) {
		// Two copies of the tiles, the mask a constant in each.
		LLVMBasicBlockRef bt = LLVMAppendBasicBlockInContext(e->C, e->fn, "gemm.tile");
		LLVMBasicBlockRef bm = LLVMAppendBasicBlockInContext(e->C, e->fn, "gemm.last");
		LLVMBasicBlockRef bn = LLVMAppendBasicBlockInContext(e->C, e->fn, "gemm.next");
		LLVMBuildCondBr(e->B, LLVMBuildICmp(e->B, LLVMIntSLT, it.tile, i64c(e, ntile), ""), bt, bm);
		LLVMPositionBuilderAtEnd(e->B, bt);
		gemm_tiles(e, k, G, &it, b, acc, ctr_m, ctr_r, loops, vt, vl, NULL);
		LLVMBuildBr(e->B, bn);
		LLVMPositionBuilderAtEnd(e->B, bm);
		gemm_tiles(e, k, G, &it, b, acc, ctr_m, ctr_r, loops, vt, vl, mask);
		LLVMBuildBr(e->B, bn);
		LLVMPositionBuilderAtEnd(e->B, bn);
	} else {
		gemm_tiles(e, k, G, &it, b, acc, ctr_m, ctr_r, loops, vt, vl, NULL);
	}
	loop_end(e, &lf);
	if (b)
		loop_end(e, &lkb);
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
// number of threads (no per-thread partial sums exist to combine).
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
split_plan(const KProgram *p, const KKernel *k, unsigned vbytes)
{
	Split sp = {0, 0, 0, 0};
	if (k->host || k->rank < 1)
		return sp;
	double work = 1;
	for (int d = 0; d < k->rank; d++)
		work *= (double)k->dim[d];
	for (int r = 0; r < k->rrank; r++)
		work *= (double)k->rdim[r];
	int64_t n = 1;
	Gemm G;
	if (gemm_plan(p, k, vbytes, &G)) {
		if (work < PAR_GEMM_MIN_WORK)
			return sp;
		int64_t np, ncol, ngroup;
		gemm_range(k, &G, gemm_vl(vbytes, (DType)p->x[k->body].dtype), &np, &ncol, &ngroup);
		n = np * ncol * ngroup;
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
	LLVMValueRef box = entry_alloca(e, sig->argt);
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
	LLVMValueRef pa[5] = {exec, sig->chunk, LLVMBuildBitCast(e->B, box, e->i8p, ""),
	                      i64c(e, sig->sp.n), i64c(e, sig->sp.grain)};
	LLVMBuildCall2(e->B, pfty, pf, pa, 5, "");
	LLVMBuildBr(e->B, done);
	LLVMPositionBuilderAtEnd(e->B, here);
	LLVMValueRef *b = calloc(na + 2, sizeof *b);
	FADC_ASSERT(b != NULL, "llvm: out of memory");
	memcpy(b, a, na * sizeof *b);
	b[na] = i64c(e, 0);
	b[na + 1] = i64c(e, sig->sp.n);
	LLVMBuildCall2(e->B, LLVMGlobalGetValueType(kfn), kfn, b, na + 2, "");
	free(b);
	LLVMBuildBr(e->B, done);
	LLVMPositionBuilderAtEnd(e->B, done);
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

typedef struct SigWalk {
	const KProgram *p;
	KSig *sig;
	Key *key;
	uint32_t *canon; // KxId -> canonical number + 1 (0: not visited)
	uint32_t ncanon;
	int32_t *bufpos, *steppos; // buffer / loop -> parameter position + 1
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

// Post-order: a node's operands have smaller canonical numbers.
static uint32_t
sig_walk(SigWalk *w, KxId id)
{
	if (!id)
		return 0;
	if (w->canon[id])
		return w->canon[id];
	const Kx *x = &w->p->x[id];
	Kx c = *x; // the node with operands and references made canonical
	for (int i = 0; i < x->nin; i++)
		c.a[i] = sig_walk(w, x->a[i]);
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
	w->canon[id] = ++w->ncanon;
	return w->canon[id];
}

// What kernel k takes (sig: its buffers, out first, then in the order the
// expressions first read them; the seed; its loops' step counters) and its
// key.  sig->bufs and sig->steps have room for every buffer and loop.
static void
kernel_sig(const KProgram *p, const KKernel *k, KSig *sig, Key *key)
{
	SigWalk w = {p, sig, key, calloc(p->nx + 1, sizeof *w.canon), 0,
	             calloc(p->nbuf + 1, sizeof *w.bufpos), calloc(p->nloop + 1, sizeof *w.steppos)};
	FADC_ASSERT(w.canon && w.bufpos && w.steppos, "llvm: out of memory");
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
	free(w.canon);
	free(w.bufpos);
	free(w.steppos);
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
// kernel's sig also gets that function's chunk function.
static LLVMValueRef
shared_find(Emit *e, const Key *k, KSig *sig)
{
	if (!k->n)
		return NULL;
	uint64_t h = key_hash(k);
	for (uint32_t i = 0; i < e->nshared; i++)
		if (e->shared[i].hash == h && e->shared[i].len == k->n &&
		    !memcmp(e->shared[i].key, k->b, k->n)) {
			sig->argt = e->shared[i].argt;
			sig->chunk = e->shared[i].chunk;
			return e->shared[i].fn;
		}
	return NULL;
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
}

// Kernels are inlined into their task's function only when the task has at
// most this many.  Inlining 426 kernels (resnet18's vjp, reduced) made one
// function of thousands of loops, on which the optimizer is super-linear
// (ScalarEvolution walks the dominating conditions of every loop back
// through the whole function): 80 s of CPU, against 7 s with one function
// per kernel.  A call per kernel costs nothing measurable against kernels
// of that size, nor against the ppl models' (docs/PERFORMANCE.md).
enum { INLINE_MAX_KERNELS = 96 };

static LLVMValueRef
emit_kernel(Emit *e, const char *task, uint32_t ki, KSig *sig)
{
	const KProgram *p = e->p;
	const KKernel *k = &p->k[ki];
	Key key = {0};
	kernel_sig(p, k, sig, &key);
	uint32_t *bufs = sig->bufs;
	unsigned n = sig->nbufs, ns = sig->nsteps;
	int uses_seed = sig->seed;
	sig->sp = split_plan(p, k, e->vbytes);
	unsigned nlohi = sig->sp.on ? 2 : 0;
	LLVMValueRef same = shared_find(e, &key, sig);
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
	for (unsigned i = 0; i < ns + nlohi; i++)
		pt[n + (unsigned)uses_seed + i] = e->i64;
	LLVMTypeRef fty =
		LLVMFunctionType(k->host ? e->i32 : e->voidt, pt, n + (unsigned)uses_seed + ns + nlohi, 0);
	free(pt);
	char name[300];
	snprintf(name, sizeof name, "%s.k%u.%s", task, ki, k->what);
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
	e->lo = sig->sp.on ? LLVMGetParam(fn, n + (unsigned)uses_seed + ns) : NULL;
	e->hi = sig->sp.on ? LLVMGetParam(fn, n + (unsigned)uses_seed + ns + 1) : NULL;
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
	if (gemm_plan(p, k, e->vbytes, &G)) {
		emit_gemm(e, k, &G, loops);
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
			loop_begin(e, &loops[k->rank + d], e->var[k->rank + d], k->rdim[d]);
		new_region(e);
		LLVMValueRef v = emit_x(e, k->body);
		LLVMValueRef a = LLVMBuildLoad2(e->B, ty(e, vt), e->acc, "");
		LLVMBuildStore(e->B, red_combine(e, k->red, vt, a, v), e->acc);
		for (int d = k->rrank - 1; d >= 0; d--)
			loop_end(e, &loops[k->rank + d]);
	}
	new_region(e);
	e->vecmath = !k->red; // an elementwise kernel's innermost loop vectorizes
	LLVMValueRef v = emit_x(e, val), idx = emit_x(e, k->index);
	e->vecmath = 0;
	DType ct = (DType)p->x[val].dtype;
	if (st == DT_BOOL)
		v = LLVMBuildZExt(e->B, v, e->i8, "");
	else
		v = convert(e, v, ct, st, 0);
	LLVMValueRef ptr = LLVMBuildInBoundsGEP2(e->B, sty(e, st), e->bufptr[k->out], &idx, 1, "");
	LLVMBuildStore(e->B, v, ptr);
	par_end(e, loops, k->rank);
	LLVMBuildRetVoid(e->B);
	return fn;
}

// The task function: buffer pointers from the call and the arena, then the
// kernels in order, inside the loops of the program (a counter per loop,
// kept in an alloca that mem2reg promotes, passed to the kernels that use
// it).  A host kernel's nonzero result returns at once as the task's.
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
	FADC_ASSERT(e->val && e->stamp && e->bufptr && e->step && taskptr && kfn && sig && loops,
	            "llvm: out of memory");
	e->region = 0;
	for (uint32_t i = 0; i < p->nk; i++) {
		sig[i].bufs = calloc(p->nbuf + 1, sizeof *sig[i].bufs);
		sig[i].steps = calloc(p->nloop + 1, sizeof *sig[i].steps);
		FADC_ASSERT(sig[i].bufs && sig[i].steps, "llvm: out of memory");
		kfn[i] = emit_kernel(e, t->name, i, &sig[i]);
		if (sig[i].sp.on && !sig[i].chunk) { // a shared kernel has its chunk already
			emit_chunk_fn(e, kfn[i], &sig[i]);
			shared_note_chunk(e, kfn[i], &sig[i]);
		}
	}
	e->sp.on = 0;
	char name[300];
	snprintf(name, sizeof name, "task.%s", t->name);
	LLVMValueRef fn = LLVMAddFunction(e->M, name, e->taskfn);
	LLVMSetLinkage(fn, LLVMInternalLinkage);
	fn_attr(e, fn, LLVMAttributeFunctionIndex, "nounwind");
	fn_wide(e, fn);
	e->fn = fn;
	LLVMBasicBlockRef entry = LLVMAppendBasicBlockInContext(e->C, fn, "entry");
	LLVMPositionBuilderAtEnd(e->B, entry);
	LLVMValueRef *ctr = calloc(p->nloop + 1, sizeof *ctr);
	FADC_ASSERT(ctr != NULL, "llvm: out of memory");
	for (uint32_t l = 0; l < p->nloop; l++)
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
	for (uint32_t b = 0; b < p->nbuf; b++) {
		const KBuf *kb = &p->buf[b];
		LLVMValueRef raw;
		if (kb->kind == KB_TMP) {
			LLVMValueRef off = LLVMConstInt(e->i64, (unsigned long long)kb->offset, 0);
			raw = LLVMBuildInBoundsGEP2(e->B, e->i8, arena, &off, 1, "");
		} else {
			LLVMValueRef ix = LLVMConstInt(e->i64, (unsigned long long)kb->index, 0);
			LLVMValueRef slot = LLVMBuildInBoundsGEP2(e->B, e->i8p, kb->kind == KB_IN ? in : out, &ix, 1, "");
			raw = LLVMBuildLoad2(e->B, e->i8p, slot, "");
		}
		taskptr[b] = LLVMBuildBitCast(e->B, raw, LLVMPointerType(sty(e, kb->dtype), 0), "");
	}
	for (uint32_t i = 0; i < p->nk; i++) {
		// Loops starting here, outer first (lower index); empty ones never do.
		for (uint32_t l = 0; l < p->nloop; l++)
			if (p->loop[l].begin == i && p->loop[l].end > i)
				loop_begin(e, &loops[l], ctr[l], p->loop[l].trip);
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
		LLVMValueRef r = NULL;
		if (sg->sp.on)
			emit_split_call(e, kfn[i], sg, a, n, exec);
		else
			r = LLVMBuildCall2(e->B, LLVMGlobalGetValueType(kfn[i]), kfn[i], a, n, "");
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
				loop_end(e, &loops[l]);
	}
	LLVMBuildRet(e->B, LLVMConstInt(e->i32, 0, 0));
	for (uint32_t i = 0; i < p->nk; i++) {
		free(sig[i].bufs);
		free(sig[i].steps);
	}
	free(sig);
	free(ctr);
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

// @fadc_artifact_v1: returns the constant fadc_abi_v1 table.
static void
emit_entry(Emit *e, LLVMValueRef *taskfns, int ntasks, const uint8_t *desc, size_t desclen)
{
	LLVMTypeRef tfp = LLVMPointerType(e->taskfn, 0);
	LLVMValueRef tarr = LLVMConstArray(tfp, taskfns, (unsigned)ntasks);
	LLVMValueRef gt = LLVMAddGlobal(e->M, LLVMTypeOf(tarr), "fadc.tasks");
	LLVMSetInitializer(gt, tarr);
	LLVMSetGlobalConstant(gt, 1);
	LLVMSetLinkage(gt, LLVMInternalLinkage);
	LLVMValueRef dstr = LLVMConstStringInContext(e->C, (const char *)desc, (unsigned)desclen, 1);
	LLVMValueRef gd = LLVMAddGlobal(e->M, LLVMTypeOf(dstr), "fadc.descriptor");
	LLVMSetInitializer(gd, dstr);
	LLVMSetGlobalConstant(gd, 1);
	LLVMSetLinkage(gd, LLVMInternalLinkage);
	LLVMValueRef zero[2] = {LLVMConstInt(e->i32, 0, 0), LLVMConstInt(e->i32, 0, 0)};
	LLVMTypeRef abifields[5] = {e->i32, e->i32, e->i8p, e->i64, LLVMPointerType(tfp, 0)};
	LLVMTypeRef abit = LLVMStructCreateNamed(e->C, "fadc_abi_v1");
	LLVMStructSetBody(abit, abifields, 5, 0);
	LLVMValueRef fields[5] = {
		LLVMConstInt(e->i32, FADC_ABI_VERSION, 0),
		LLVMConstInt(e->i32, (unsigned long long)ntasks, 0),
		LLVMConstInBoundsGEP2(LLVMTypeOf(dstr), gd, zero, 2),
		LLVMConstInt(e->i64, desclen, 0),
		LLVMConstInBoundsGEP2(LLVMTypeOf(tarr), gt, zero, 2),
	};
	LLVMValueRef abiv = LLVMConstNamedStruct(abit, fields, 5);
	LLVMValueRef ga = LLVMAddGlobal(e->M, abit, "fadc.abi");
	LLVMSetInitializer(ga, abiv);
	LLVMSetGlobalConstant(ga, 1);
	LLVMSetLinkage(ga, LLVMInternalLinkage);
	LLVMTypeRef fty = LLVMFunctionType(LLVMPointerType(abit, 0), NULL, 0, 0);
	LLVMValueRef fn = LLVMAddFunction(e->M, FADC_ENTRY_SYMBOL, fty);
	fn_attr(e, fn, LLVMAttributeFunctionIndex, "nounwind");
	LLVMBasicBlockRef entry = LLVMAppendBasicBlockInContext(e->C, fn, "entry");
	LLVMPositionBuilderAtEnd(e->B, entry);
	LLVMBuildRet(e->B, ga);
}

int
cg_llvm_emit(const CgTask *tasks, int ntasks, const uint8_t *desc, size_t desclen,
             const CgTarget *tg, FILE *emit_llvm, const char *obj_path, char *err, size_t errlen)
{
	if (LLVMInitializeNativeTarget() || LLVMInitializeNativeAsmPrinter()) {
		snprintf(err, errlen, "LLVM: no native target to generate code for");
		return 0;
	}
	int ok = 0;
	char *msg = NULL;
	char *triple = tg->triple ? strdup(tg->triple) : NULL;
	if (!triple) {
		char *t = LLVMGetDefaultTargetTriple();
		triple = strdup(t);
		LLVMDisposeMessage(t);
	}
	Emit e = {0};
	e.C = LLVMContextCreate();
	e.M = LLVMModuleCreateWithNameInContext("fadc", e.C);
	e.B = LLVMCreateBuilderInContext(e.C);
	LLVMTargetMachineRef tm = NULL;
	LLVMTargetDataRef td = NULL;
	LLVMPassBuilderOptionsRef po = NULL;
	LLVMValueRef *fns = calloc((size_t)ntasks + 1, sizeof *fns);
	if (!triple || !fns) {
		snprintf(err, errlen, "out of memory");
		goto done;
	}
	LLVMSetSourceFileName(e.M, "fadc", 4);
	e.i1 = LLVMInt1TypeInContext(e.C);
	e.i8 = LLVMInt8TypeInContext(e.C);
	e.i32 = LLVMInt32TypeInContext(e.C);
	e.i64 = LLVMInt64TypeInContext(e.C);
	e.f32 = LLVMFloatTypeInContext(e.C);
	e.f64 = LLVMDoubleTypeInContext(e.C);
	e.voidt = LLVMVoidTypeInContext(e.C);
	e.i8p = LLVMPointerType(e.i8, 0);
	e.i8pp = LLVMPointerType(e.i8p, 0);
	LLVMTypeRef callfields[5] = {e.i8pp, e.i8pp, e.i8p, e.i64, e.i8p};
	e.callt = LLVMStructCreateNamed(e.C, "fadc_call_v1");
	LLVMStructSetBody(e.callt, callfields, 5, 0);
	e.callp = LLVMPointerType(e.callt, 0);
	e.taskfn = LLVMFunctionType(e.i32, &e.callp, 1, 0);

	LLVMTargetRef target;
	if (LLVMGetTargetFromTriple(triple, &target, &msg)) {
		llvm_fail(err, errlen, "target", msg);
		msg = NULL;
		goto done;
	}
	LLVMCodeGenOptLevel lvl = tg->opt_level <= 0   ? LLVMCodeGenLevelNone
	                          : tg->opt_level == 1 ? LLVMCodeGenLevelLess
	                          : tg->opt_level == 2 ? LLVMCodeGenLevelDefault
	                                               : LLVMCodeGenLevelAggressive;
	tm = LLVMCreateTargetMachine(target, triple, tg->cpu, tg->features ? tg->features : "", lvl,
	                             LLVMRelocPIC, LLVMCodeModelDefault);
	if (!tm) {
		snprintf(err, errlen, "LLVM: cannot create a target machine for %s, cpu %s", triple, tg->cpu);
		goto done;
	}
	LLVMSetTarget(e.M, triple);
	e.wide = tg->cpu_features && has_feature(tg->cpu_features, "avx512f");
	e.vbytes = e.wide ? 64 : 32;
	const char *vb = getenv("FADC_GEMM_VBYTES");
	if (vb && (!strcmp(vb, "32") || !strcmp(vb, "64")))
		e.vbytes = (unsigned)atoi(vb);
	td = LLVMCreateTargetDataLayout(tm);
	LLVMSetModuleDataLayout(e.M, td);

	KTime clk = kir_time_start();
	for (int i = 0; i < ntasks; i++)
		fns[i] = emit_task(&e, &tasks[i]);
	emit_entry(&e, fns, ntasks, desc, desclen);
	char nfn[64];
	snprintf(nfn, sizeof nfn, "(%u kernel functions)", e.nshared);
	kir_time_note(clk, "llvm-ir", nfn);
	clk = kir_time_start();

	if (LLVMVerifyModule(e.M, LLVMReturnStatusAction, &msg)) {
		llvm_fail(err, errlen, "the generated module does not verify", msg);
		msg = NULL;
		goto done;
	}
	LLVMDisposeMessage(msg);
	msg = NULL;
	po = LLVMCreatePassBuilderOptions();
	LLVMPassBuilderOptionsSetLoopVectorization(po, 1);
	LLVMPassBuilderOptionsSetSLPVectorization(po, 1);
	char pipeline[32];
	int ol = tg->opt_level < 0 ? 2 : tg->opt_level > 3 ? 3 : tg->opt_level;
	snprintf(pipeline, sizeof pipeline, "default<O%d>", ol);
	kir_time_note(clk, "verify", NULL);
	clk = kir_time_start();
	if (!llvm_check_error(LLVMRunPasses(e.M, pipeline, tm, po), err, errlen, "optimization"))
		goto done;
	kir_time_note(clk, "optimize", pipeline);
	if (emit_llvm) {
		char *s = LLVMPrintModuleToString(e.M);
		fputs(s, emit_llvm);
		LLVMDisposeMessage(s);
	}
	char *path = strdup(obj_path);
	if (!path) {
		snprintf(err, errlen, "out of memory");
		goto done;
	}
	clk = kir_time_start();
	int bad = LLVMTargetMachineEmitToFile(tm, e.M, path, LLVMObjectFile, &msg);
	free(path);
	kir_time_note(clk, "codegen", "object");
	if (bad) {
		llvm_fail(err, errlen, "emitting the object file", msg);
		msg = NULL;
		goto done;
	}
	ok = 1;
done:
	if (msg)
		LLVMDisposeMessage(msg);
	if (po)
		LLVMDisposePassBuilderOptions(po);
	if (td)
		LLVMDisposeTargetData(td);
	if (tm)
		LLVMDisposeTargetMachine(tm);
	for (uint32_t i = 0; i < e.nshared; i++)
		free(e.shared[i].key);
	free(e.shared);
	LLVMDisposeBuilder(e.B);
	LLVMDisposeModule(e.M);
	LLVMContextDispose(e.C);
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
