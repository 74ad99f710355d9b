// runtime/cudnn.c -- cuDNN for a CUDA context: the library loaded at run
// time, the context's handle, and a convolution record (ART_LAUNCH_CONV,
// artifact format 8) run as one execution plan of cuDNN's backend API.
//
// cuDNN is a measured candidate, never a dependency (docs/CUDA.md, "cuDNN
// convolutions"): a convolution record is only ever a candidate of a
// choice whose other candidate is the convolution's own launches (im2col,
// GEMMs, col2im).  So nothing here is an error for the task: where the
// library does not load (dlopen of libcudnn.so.9, then libcudnn.so), is
// older than 9 (cudnnGetVersion), or has no engine for a record, that
// record is simply not a candidate (rtcu_dnn_prepare leaves its plan NULL)
// and the choice runs the launches.  Like cuBLAS it is not linked: the
// entry points are looked up by name and the types and values are written
// out below (cudnn_graph_v9.h's, which this file does not include).
//
// One handle per context, on the context's stream (so stream capture
// records cuDNN's kernels into the task's graph, like fadc's own), created
// at the first task load that has convolution records, destroyed with the
// context.  Each record's execution plan is built at task load (never
// inside a capture): tensor descriptors (dense; NCHW, or NHWC where the
// record's nhwc bit says the compiler stored that operand channels-last,
// codegen/kir_layout.c), a convolution
// descriptor (cross-correlation, float compute), the operation, the
// operation graph, heuristics (CUDNN_HEUR_MODE_A, then FALLBACK), and the
// first engine configuration that finalizes, asks for at most
// DNN_WORKSPACE_MAX bytes of workspace and whose numerical notes the record
// allows: a strict fp32 record (no tf32) takes no engine noted
// CUDNN_NUMERICAL_NOTE_TENSOR_CORE or _DOWN_CONVERT_INPUTS (those round the
// inputs to TF32 or less), and no record takes _REDUCED_PRECISION_REDUCTION
// or _NONDETERMINISTIC (a replay must give the bytes the first run gave).
// The task's workspace is one block of the context's pool, the largest
// plan's, held while the task is loaded.
//
// Engines timed (docs/CUDA.md, "Engines timed"): heuristics rank engines
// by a model, not by this GPU's clock, and mode A's first is not always the
// fastest.  So each record keeps up to DNN_TUNE_MAX suitable configurations
// as candidates, and its first run that is not under capture (the eager
// first run of its choice) times them as the choice machinery times
// candidates, in CUDA graphs, keeps the fastest and frees the others; the
// pick goes into the choice cache.  Candidates only ever use the workspace
// the untuned plan would have had (the record's scratch or the task's
// block), so timing never costs memory.  FADC_CUDA_DNN_TUNE=0 keeps mode
// A's first (the plan before this).
//
// A record is one convolution, never a runtime-fusion graph (pointwise ops
// or genstats around it): on cuDNN 9.14 with fp32 storage those have no
// strict engine, and with TF32 the batch-norm forms run 2-6x slower than
// the plain convolution (tests/gpu/device/dnn-fusion-probe.cu; docs/CUDA.md,
// "cuDNN's runtime fusion: probed, not a candidate").
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_impl.h"

// ---------------------------------------------------------------- the cuDNN API we use
// Types and values as cudnn_graph_v9.h (cuDNN 9.x) defines them.

typedef int cudnnStatus_t; // CUDNN_STATUS_SUCCESS = 0
typedef struct cudnnContext *cudnnHandle_t;
typedef void *cudnnBackendDescriptor_t;

enum {
	// cudnnBackendDescriptorType_t
	CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR = 1,
	CUDNN_BACKEND_ENGINE_DESCRIPTOR = 2,
	CUDNN_BACKEND_ENGINECFG_DESCRIPTOR = 3,
	CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR = 4,
	CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR = 5,
	CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR = 10,
	CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR = 11,
	CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR = 12,
	CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR = 15,
	CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR = 16,
	CUDNN_BACKEND_TENSOR_DESCRIPTOR = 17,
	// cudnnBackendAttributeType_t
	CUDNN_TYPE_HANDLE = 0,
	CUDNN_TYPE_DATA_TYPE = 1,
	CUDNN_TYPE_INT64 = 3,
	CUDNN_TYPE_FLOAT = 4,
	CUDNN_TYPE_VOID_PTR = 6,
	CUDNN_TYPE_CONVOLUTION_MODE = 7,
	CUDNN_TYPE_HEUR_MODE = 8,
	CUDNN_TYPE_NUMERICAL_NOTE = 11,
	CUDNN_TYPE_BACKEND_DESCRIPTOR = 15,
	// cudnnBackendAttributeName_t
	CUDNN_ATTR_CONVOLUTION_COMP_TYPE = 100,
	CUDNN_ATTR_CONVOLUTION_CONV_MODE = 101,
	CUDNN_ATTR_CONVOLUTION_DILATIONS = 102,
	CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES = 103,
	CUDNN_ATTR_CONVOLUTION_POST_PADDINGS = 104,
	CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS = 105,
	CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS = 106,
	CUDNN_ATTR_ENGINEHEUR_MODE = 200,
	CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH = 201,
	CUDNN_ATTR_ENGINEHEUR_RESULTS = 202,
	CUDNN_ATTR_ENGINECFG_ENGINE = 300,
	CUDNN_ATTR_EXECUTION_PLAN_HANDLE = 400, // deprecated in 9, still read
	CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG = 401,
	CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE = 402,
	CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA = 700,
	CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA = 701,
	CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC = 702,
	CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W = 703,
	CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X = 704,
	CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y = 705,
	CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA = 706,
	CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA = 707,
	CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC = 708,
	CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W = 709,
	CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX = 710,
	CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY = 711,
	CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA = 712,
	CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA = 713,
	CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC = 714,
	CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW = 715,
	CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X = 716,
	CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY = 717,
	CUDNN_ATTR_OPERATIONGRAPH_HANDLE = 800, // deprecated in 9, still read
	CUDNN_ATTR_OPERATIONGRAPH_OPS = 801,
	CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT = 900,
	CUDNN_ATTR_TENSOR_DATA_TYPE = 901,
	CUDNN_ATTR_TENSOR_DIMENSIONS = 902,
	CUDNN_ATTR_TENSOR_STRIDES = 903,
	CUDNN_ATTR_TENSOR_UNIQUE_ID = 906,
	CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS = 1000,
	CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS = 1001,
	CUDNN_ATTR_VARIANT_PACK_WORKSPACE = 1003,
	CUDNN_ATTR_ENGINE_NUMERICAL_NOTE = 1303,
	// values
	CUDNN_DATA_FLOAT = 0,
	CUDNN_CROSS_CORRELATION = 1,
	CUDNN_HEUR_MODE_FALLBACK = 2,
	CUDNN_HEUR_MODE_A = 3,
	CUDNN_NUMERICAL_NOTE_TENSOR_CORE = 0,
	CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS = 1,
	CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION = 2,
	CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC = 4,
	CUDNN_NUMERICAL_NOTE_TYPE_COUNT = 10,
};

#define DNN_FUNCS(X)                                                                       \
	X(cudnnCreate, (cudnnHandle_t * h))                                                    \
	X(cudnnDestroy, (cudnnHandle_t h))                                                     \
	X(cudnnSetStream, (cudnnHandle_t h, CUstream s))                                       \
	X(cudnnBackendCreateDescriptor, (int type, cudnnBackendDescriptor_t *d))               \
	X(cudnnBackendDestroyDescriptor, (cudnnBackendDescriptor_t d))                         \
	X(cudnnBackendFinalize, (cudnnBackendDescriptor_t d))                                  \
	X(cudnnBackendSetAttribute,                                                            \
	  (cudnnBackendDescriptor_t d, int name, int type, int64_t n, const void *v))          \
	X(cudnnBackendGetAttribute,                                                            \
	  (cudnnBackendDescriptor_t d, int name, int type, int64_t want, int64_t *got, void *v)) \
	X(cudnnBackendExecute,                                                                 \
	  (cudnnHandle_t h, cudnnBackendDescriptor_t plan, cudnnBackendDescriptor_t pack))

typedef struct Dnn {
	void *dl; // NULL: not loaded (yet, or for good: see failed)
	const char *lib; // the name that loaded
	size_t version; // cudnnGetVersion(): 91400 for 9.14.0
	int failed; // 1: tried and not usable (why in c->dnn_why)
#define X(name, args) cudnnStatus_t(*name) args;
	DNN_FUNCS(X)
#undef X
	const char *(*error_string)(cudnnStatus_t s);
	cudnnHandle_t h;
} Dnn;

// Engine configurations kept as candidates to time: DNN_TUNE_DEFAULT, or
// FADC_CUDA_DNN_TUNE=N (2 .. DNN_TUNE_MAX; 0: mode A's first alone).
#define DNN_TUNE_DEFAULT 4
#define DNN_TUNE_MAX 12

// One candidate: an execution plan and its workspace bytes.
struct DnnCand {
	cudnnBackendDescriptor_t plan;
	int64_t ws;
};

// A record's plan (Kern.dnn): NULL where cuDNN cannot run it.  Before its
// first run, ncand candidates (cand[0] mode A's first suitable one); from
// then on one, cand[0], the fastest.
struct DnnPlan {
	struct DnnCand cand[DNN_TUNE_MAX];
	int ncand;
	int tuned; // cand[0] is the one that runs
};

// Engines asking for more workspace than this are passed over (FFT
// engines can ask for gigabytes); the next configuration is tried.
#define DNN_WORKSPACE_MAX ((int64_t)256 << 20)
// Heuristic results looked at per mode.
#define DNN_MAX_CFG 32
// The unique ids of a plan's three tensors (the variant pack's keys).
enum { UID_OUT = 1, UID_A = 2, UID_B = 3 };

// ---------------------------------------------------------------- checked calls

static void
dnn_msg(const RtCuda *c, cudnnStatus_t r, const char *what, const char *fn, const char *file,
        int line, char *err, size_t errlen)
{
	const char *text = c->dnn && c->dnn->error_string ? c->dnn->error_string(r) : NULL;
	snprintf(err, errlen, "cuDNN (%s): %s failed in %s (%s:%d): %s (status %d)",
	         c->dnn && c->dnn->lib ? c->dnn->lib : "?", what, fn, file, line,
	         text ? text : "CUDNN_STATUS_?", (int)r);
}

// The one checked path for cuDNN calls (STYLE.md 4.7, as CHECK_BLAS): the
// call's text, where, and cudnnGetErrorString's name for the status; then
// `goto fail`.
#define CHECK_DNN(c, x)                                                                    \
	do {                                                                                   \
		cudnnStatus_t dn_r_ = (c)->dnn->x;                                                 \
		if (dn_r_) {                                                                       \
			dnn_msg((c), dn_r_, #x, __func__, __FILE__, __LINE__, err, errlen);            \
			goto fail;                                                                     \
		}                                                                                  \
	} while (0)

// ---------------------------------------------------------------- loading

// Loads cuDNN once per context.  0 (why in c->dnn_why) when it is absent,
// older than 9 or lacks an entry point: convolution records are then no
// candidates, which is no error.
static int
dnn_open(RtCuda *c)
{
	static const char *const names[] = {"libcudnn.so.9", "libcudnn.so"};
	if (c->dnn)
		return !c->dnn->failed;
	if (!(c->dnn = calloc(1, sizeof *c->dnn))) {
		snprintf(c->dnn_why, sizeof c->dnn_why, "out of memory");
		return 0;
	}
	Dnn *d = c->dnn;
	d->failed = 1;
	for (size_t i = 0; i < sizeof names / sizeof names[0] && !d->dl; i++) {
		d->dl = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
		d->lib = names[i];
	}
	if (!d->dl) {
		snprintf(c->dnn_why, sizeof c->dnn_why,
		         "no cuDNN: dlopen(\"libcudnn.so.9\") and (\"libcudnn.so\") failed");
		return 0;
	}
	void *sp = dlsym(d->dl, "cudnnGetVersion");
	size_t (*version)(void) = NULL;
	if (sp)
		memcpy(&version, &sp, sizeof sp);
	d->version = version ? version() : 0;
	if (d->version < 90000) {
		snprintf(c->dnn_why, sizeof c->dnn_why,
		         "%s is version %zu, older than 9 (the backend API fadc uses)", d->lib,
		         d->version);
		goto fail;
	}
#define X(name, args)                                                                      \
	if (!(sp = dlsym(d->dl, #name))) {                                                     \
		snprintf(c->dnn_why, sizeof c->dnn_why, "%s has no %s", d->lib, #name);            \
		goto fail;                                                                         \
	}                                                                                      \
	memcpy(&d->name, &sp, sizeof sp);
	DNN_FUNCS(X)
#undef X
	if ((sp = dlsym(d->dl, "cudnnGetErrorString")))
		memcpy(&d->error_string, &sp, sizeof sp);
	d->failed = 0;
	return 1;
fail:
	dlclose(d->dl);
	d->dl = NULL;
	return 0;
}

// ---------------------------------------------------------------- plans

// A dense float tensor descriptor of dimensions dim = (N, C, H, W) and
// unique id uid, finalized, into *t: NCHW, or with nhwc channels-last
// (element (n, c, h, w) at ((n H + h) W + w) C + c: the strides say the
// layout, the dimensions stay in cuDNN's NCHW order).
// Byte alignment 16: every pool block and arena offset is (256 and 64);
// rtcu_dnn_conv checks the addresses of each run and runs the other
// candidate where a caller's buffer is not.
static int
dnn_tensor(RtCuda *c, const int64_t dim[4], int nhwc, int64_t uid, cudnnBackendDescriptor_t *t,
           char *err, size_t errlen)
{
	int64_t stride[4] = {dim[1] * dim[2] * dim[3], dim[2] * dim[3], dim[3], 1}, align = 16;
	if (nhwc) {
		stride[1] = 1;
		stride[3] = dim[1];
		stride[2] = dim[3] * dim[1];
	}
	int dt = CUDNN_DATA_FLOAT;
	CHECK_DNN(c, cudnnBackendCreateDescriptor(CUDNN_BACKEND_TENSOR_DESCRIPTOR, t));
	CHECK_DNN(c, cudnnBackendSetAttribute(*t, CUDNN_ATTR_TENSOR_DATA_TYPE,
	                                      CUDNN_TYPE_DATA_TYPE, 1, &dt));
	CHECK_DNN(c, cudnnBackendSetAttribute(*t, CUDNN_ATTR_TENSOR_DIMENSIONS,
	                                      CUDNN_TYPE_INT64, 4, dim));
	CHECK_DNN(c, cudnnBackendSetAttribute(*t, CUDNN_ATTR_TENSOR_STRIDES,
	                                      CUDNN_TYPE_INT64, 4, stride));
	CHECK_DNN(c, cudnnBackendSetAttribute(*t, CUDNN_ATTR_TENSOR_UNIQUE_ID,
	                                      CUDNN_TYPE_INT64, 1, &uid));
	CHECK_DNN(c, cudnnBackendSetAttribute(*t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT,
	                                      CUDNN_TYPE_INT64, 1, &align));
	CHECK_DNN(c, cudnnBackendFinalize(*t));
	return 1;
fail:
	return 0;
}

static int dnn_env_on(const char *name, int dflt);

// Whether engine configuration cfg's numerical notes suit the record.
static int
dnn_notes_ok(RtCuda *c, cudnnBackendDescriptor_t cfg, int tf32, char *err, size_t errlen)
{
	cudnnBackendDescriptor_t eng = NULL;
	int notes[CUDNN_NUMERICAL_NOTE_TYPE_COUNT];
	int64_t n = 0, got = 0;
	int ok = 0;
	CHECK_DNN(c, cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINE_DESCRIPTOR, &eng));
	CHECK_DNN(c, cudnnBackendGetAttribute(cfg, CUDNN_ATTR_ENGINECFG_ENGINE,
	                                      CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &got, &eng));
	CHECK_DNN(c, cudnnBackendGetAttribute(eng, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE,
	                                      CUDNN_TYPE_NUMERICAL_NOTE,
	                                      CUDNN_NUMERICAL_NOTE_TYPE_COUNT, &n, notes));
	ok = 1;
	for (int64_t i = 0; i < n && i < CUDNN_NUMERICAL_NOTE_TYPE_COUNT; i++)
		if (notes[i] == CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION ||
		    notes[i] == CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC ||
		    (!tf32 && (notes[i] == CUDNN_NUMERICAL_NOTE_TENSOR_CORE ||
		               notes[i] == CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS)))
			ok = 0;
fail:
	if (eng)
		c->dnn->cudnnBackendDestroyDescriptor(eng);
	return ok;
}

// The dimensions of record v's arguments {written, a, b} in cuDNN's
// (N, C, H, W) order: forward {y, x, w}, backward data {dx, dy, w},
// backward filter {dw, x, dy}.
static void
dnn_shapes(const ArtConv *v, int64_t shape[3][4])
{
	const int64_t xs[4] = {v->n, v->c, v->h, v->w},
	              ws[4] = {v->k, v->c / v->groups, v->r, v->s},
	              ys[4] = {v->n, v->k, v->oh, v->ow};
	const int64_t *s[3] = {ys, xs, ws};
	if (v->op == ART_CONV_BWD_DATA)
		s[0] = xs, s[1] = ys, s[2] = ws;
	else if (v->op == ART_CONV_BWD_FILTER)
		s[0] = ws, s[1] = xs, s[2] = ys;
	for (int i = 0; i < 3; i++)
		memcpy(shape[i], s[i], sizeof shape[i]);
}

// Plans of conv record v: the first max configurations of mode A's ranking
// (else of the fallback list) that suit the record and finalize, into
// out[0 .. *n).  None is no error (err says why); 0 only for a failed cuDNN
// call, in err.
static int
dnn_plan(RtCuda *c, const ArtConv *v, int max, struct DnnCand *out, int *n, char *err,
         size_t errlen)
{
	Dnn *d = c->dnn;
	cudnnBackendDescriptor_t t[3] = {NULL, NULL, NULL}, conv = NULL, op = NULL, graph = NULL,
	                         heur = NULL, cfg[DNN_MAX_CFG] = {NULL}, plan = NULL;
	int64_t ncfg = 0;
	int ok = 0, got0 = *n, nhwc = v->nhwc;
	int64_t shape[3][4];
	dnn_shapes(v, shape);
	for (int i = 0; i < 3; i++)
		if (!dnn_tensor(c, shape[i], (nhwc >> i) & 1, UID_OUT + i, &t[i], err, errlen))
			goto fail;
	// The convolution: 2 spatial dimensions (1-d is h = r = 1), float
	// accumulation, cross-correlation (no kernel flip: ir/interp.c's conv).
	int64_t dims = 2, pad[2] = {v->ph, v->pw}, str[2] = {v->sh, v->sw}, dil[2] = {v->dh, v->dw};
	int mode = CUDNN_CROSS_CORRELATION, ct = CUDNN_DATA_FLOAT;
	CHECK_DNN(c, cudnnBackendCreateDescriptor(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR, &conv));
	CHECK_DNN(c, cudnnBackendSetAttribute(conv, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS,
	                                      CUDNN_TYPE_INT64, 1, &dims));
	CHECK_DNN(c, cudnnBackendSetAttribute(conv, CUDNN_ATTR_CONVOLUTION_COMP_TYPE,
	                                      CUDNN_TYPE_DATA_TYPE, 1, &ct));
	CHECK_DNN(c, cudnnBackendSetAttribute(conv, CUDNN_ATTR_CONVOLUTION_CONV_MODE,
	                                      CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode));
	CHECK_DNN(c, cudnnBackendSetAttribute(conv, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS,
	                                      CUDNN_TYPE_INT64, 2, pad));
	CHECK_DNN(c, cudnnBackendSetAttribute(conv, CUDNN_ATTR_CONVOLUTION_POST_PADDINGS,
	                                      CUDNN_TYPE_INT64, 2, pad));
	CHECK_DNN(c, cudnnBackendSetAttribute(conv, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES,
	                                      CUDNN_TYPE_INT64, 2, str));
	CHECK_DNN(c, cudnnBackendSetAttribute(conv, CUDNN_ATTR_CONVOLUTION_DILATIONS,
	                                      CUDNN_TYPE_INT64, 2, dil));
	CHECK_DNN(c, cudnnBackendFinalize(conv));
	// The operation: y = 1 conv(x, w) + 0 y (beta 0: y only written).
	static const int optype[3] = {
	    CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR,
	    CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR,
	    CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR};
	// Per op: alpha, beta, conv, then the attributes of the written
	// tensor, a and b.
	static const int attr[3][6] = {
	    {CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA,
	     CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA,
	     CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC,
	     CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X,
	     CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W},
	    {CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA,
	     CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA,
	     CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC,
	     CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY,
	     CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W},
	    {CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA,
	     CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA,
	     CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC,
	     CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW,
	     CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X,
	     CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY},
	};

	const int *at = attr[v->op];
	float alpha = 1, beta = 0;
	CHECK_DNN(c, cudnnBackendCreateDescriptor(optype[v->op], &op));
	CHECK_DNN(c, cudnnBackendSetAttribute(op, at[0], CUDNN_TYPE_FLOAT, 1, &alpha));
	CHECK_DNN(c, cudnnBackendSetAttribute(op, at[1], CUDNN_TYPE_FLOAT, 1, &beta));
	CHECK_DNN(c, cudnnBackendSetAttribute(op, at[2], CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &conv));
	for (int i = 0; i < 3; i++)
		CHECK_DNN(c, cudnnBackendSetAttribute(op, at[3 + i],
		                                      CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &t[i]));
	CHECK_DNN(c, cudnnBackendFinalize(op));
	CHECK_DNN(c, cudnnBackendCreateDescriptor(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, &graph));
	CHECK_DNN(c, cudnnBackendSetAttribute(graph, CUDNN_ATTR_OPERATIONGRAPH_OPS,
	                                      CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &op));
	// The handle attribute is deprecated in 9 (still read): not fatal.
	d->cudnnBackendSetAttribute(graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1,
	                            &d->h);
	CHECK_DNN(c, cudnnBackendFinalize(graph));
	// Heuristics: mode A's ranking, then (none suiting) the fallback list;
	// the first max configurations that suit the record and finalize.
	static const int modes[2] = {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK};
	for (int m = 0; m < 2 && *n == got0; m++) {
		CHECK_DNN(c, cudnnBackendCreateDescriptor(
		                 CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, &heur));
		CHECK_DNN(c, cudnnBackendSetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH,
		                                      CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &graph));
		CHECK_DNN(c, cudnnBackendSetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_MODE,
		                                      CUDNN_TYPE_HEUR_MODE, 1, &modes[m]));
		if (d->cudnnBackendFinalize(heur) == 0) {
			for (int i = 0; i < DNN_MAX_CFG; i++)
				CHECK_DNN(c, cudnnBackendCreateDescriptor(
				                 CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, &cfg[i]));
			ncfg = 0;
			if (d->cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS,
			                                CUDNN_TYPE_BACKEND_DESCRIPTOR, DNN_MAX_CFG, &ncfg,
			                                cfg))
				ncfg = 0;
			for (int64_t i = 0; i < ncfg && i < DNN_MAX_CFG && *n - got0 < max; i++) {
				char e2[256];
				// FADC_CUDA_CONV_STRICT=1: a TF32 record as a strict one (with
				// FADC_CUDA_GEMM_STRICT=1, runtime/cublas.c, an --allow-tf32
				// artifact's kernels in fp32 math: what TF32 alone costs in
				// accuracy, the relaid code unchanged).
				int tf32 = v->tf32 && !dnn_env_on("FADC_CUDA_CONV_STRICT", 0);
				if (!dnn_notes_ok(c, cfg[i], tf32, e2, sizeof e2))
					continue;
				CHECK_DNN(c, cudnnBackendCreateDescriptor(
				                 CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, &plan));
				int64_t wsb = -1, got = 0;
				d->cudnnBackendSetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE,
				                            CUDNN_TYPE_HANDLE, 1, &d->h);
				if (d->cudnnBackendSetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG,
				                                CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &cfg[i]) ||
				    d->cudnnBackendFinalize(plan) ||
				    d->cudnnBackendGetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
				                                CUDNN_TYPE_INT64, 1, &got, &wsb) ||
				    wsb < 0 || wsb > DNN_WORKSPACE_MAX) {
					d->cudnnBackendDestroyDescriptor(plan);
					plan = NULL;
					continue;
				}
				out[(*n)++] = (struct DnnCand){plan, wsb};
				plan = NULL;
			}
			for (int i = 0; i < DNN_MAX_CFG; i++)
				if (cfg[i]) {
					d->cudnnBackendDestroyDescriptor(cfg[i]);
					cfg[i] = NULL;
				}
		}
		d->cudnnBackendDestroyDescriptor(heur);
		heur = NULL;
	}
	if (*n == got0)
		snprintf(err, errlen, "cuDNN (%s) has no engine for it%s", d->lib,
		         v->tf32 ? "" : " in strict fp32");
	ok = 1;
fail:
	if (plan)
		d->cudnnBackendDestroyDescriptor(plan);
	for (int i = 0; i < DNN_MAX_CFG; i++)
		if (cfg[i])
			d->cudnnBackendDestroyDescriptor(cfg[i]);
	cudnnBackendDescriptor_t all[] = {heur, graph, op, conv, t[0], t[1], t[2]};
	for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
		if (all[i])
			d->cudnnBackendDestroyDescriptor(all[i]);
	return ok;
}

static void dnn_plan_free(RtCuda *c, struct DnnPlan *p);

// An environment switch: unset or empty gives dflt, "0" 0, anything else 1.
static int
dnn_env_on(const char *name, int dflt)
{
	const char *v = getenv(name);
	return !v || !*v ? dflt : strcmp(v, "0") != 0;
}

// The candidates of conv record v into *out (NULL when none: why in err;
// 0 only for a failed cuDNN call or memory, in err): up to ntune
// configurations (1: the first alone).
static int
dnn_cands(RtCuda *c, const ArtConv *v, int ntune, struct DnnPlan **out, char *err, size_t errlen)
{
	struct DnnPlan *p = calloc(1, sizeof *p);
	*out = NULL;
	if (!p) {
		snprintf(err, errlen, "out of memory");
		return 0;
	}
	if (!dnn_plan(c, v, ntune, p->cand, &p->ncand, err, errlen)) {
		dnn_plan_free(c, p);
		return 0;
	}
	if (!p->ncand) {
		dnn_plan_free(c, p);
		return 1;
	}
	p->tuned = p->ncand == 1;
	*out = p;
	return 1;
}

// ---------------------------------------------------------------- tasks

// Task k has convolution records: cuDNN, the context's handle on its
// stream, a plan per record (Kern.dnn) and the task's workspace (the
// largest plan's).  A record without a plan is no candidate (the reason
// on stderr with FADC_CUDA_CHOICE_LOG=1).  0 only when out of memory.
int
rtcu_dnn_prepare(RtCuda *c, RtCuTask *k, char *err, size_t errlen)
{
	const char *log = getenv("FADC_CUDA_CHOICE_LOG");
	int verbose = log && *log && strcmp(log, "0");
	if (!dnn_open(c)) {
		if (verbose)
			fprintf(stderr, "fadc: task '%s': cuDNN is no candidate: %s\n", k->t->name,
			        c->dnn_why);
		return 1;
	}
	char why[600] = "";
	CHECK_CU(c, cuCtxSetCurrent(c->ctx)); // cuDNN works in the current (primary) context
	if (!c->dnn->h) {
		cudnnStatus_t r;
		if ((r = c->dnn->cudnnCreate(&c->dnn->h))) {
			dnn_msg(c, r, "cudnnCreate(&c->dnn->h)", __func__, __FILE__, __LINE__, why, sizeof why);
			c->dnn->h = NULL;
		} else if ((r = c->dnn->cudnnSetStream(c->dnn->h, c->stream))) {
			dnn_msg(c, r, "cudnnSetStream(c->dnn->h, c->stream)", __func__, __FILE__, __LINE__,
			        why, sizeof why);
			c->dnn->cudnnDestroy(c->dnn->h);
			c->dnn->h = NULL;
		}
		if (!c->dnn->h) {
			if (verbose)
				fprintf(stderr, "fadc: task '%s': cuDNN is no candidate: %s\n", k->t->name, why);
			return 1;
		}
	}
	// FADC_CUDA_DNN_TUNE: unset, empty or 1: DNN_TUNE_DEFAULT candidates; 0:
	// one (mode A's first, untimed); 2 .. DNN_TUNE_MAX: that many.
	const char *tv = getenv("FADC_CUDA_DNN_TUNE");
	int ntune = DNN_TUNE_DEFAULT;
	if (tv && !strcmp(tv, "0"))
		ntune = 1;
	else if (tv && atoi(tv) >= 2 && atoi(tv) <= DNN_TUNE_MAX)
		ntune = atoi(tv);
	int64_t ws = 0;
	for (uint32_t i = 0; i < k->nk; i++) {
		Kern *kk = &k->k[i];
		if (kk->k->kind != ART_LAUNCH_CONV)
			continue;
		why[0] = 0;
		if (!dnn_cands(c, &kk->k->conv, ntune, &kk->dnn, why, sizeof why)) {
			if (!strcmp(why, "out of memory")) {
				snprintf(err, errlen, "out of memory");
				return 0;
			}
		}
		if (!kk->dnn && verbose)
			fprintf(stderr, "fadc: task '%s' record %u (%s): cuDNN is no candidate: %s\n",
			        k->t->name, i, kk->k->name, why);
		// A plan whose workspace fits in the record's scratch (arena bytes
		// free while it runs: rtcu_conv_scratch) takes none here.  Only the
		// first candidate counts: the others must fit in what it has.
		if (kk->dnn && kk->dnn->cand[0].ws > ws &&
		    (uint64_t)kk->dnn->cand[0].ws > kk->scr_bytes)
			ws = kk->dnn->cand[0].ws;
	}
	if (ws && !rtcu_alloc(c, (size_t)ws, &k->dnn_ws, err, errlen)) {
		// No room for the workspace: no candidates, not a failed load.
		if (verbose)
			fprintf(stderr, "fadc: task '%s': cuDNN is no candidate: %s\n", k->t->name, err);
		err[0] = 0;
		rtcu_dnn_task_free(c, k);
		return 1;
	}
	// Candidates needing more workspace than the record has (its scratch,
	// or the task's block) go.
	for (uint32_t i = 0; i < k->nk; i++) {
		struct DnnPlan *p = k->k[i].dnn;
		if (!p)
			continue;
		uint64_t room = k->k[i].scr_bytes > (uint64_t)ws ? k->k[i].scr_bytes : (uint64_t)ws;
		int n = 1;
		for (int j = 1; j < p->ncand; j++)
			if ((uint64_t)p->cand[j].ws <= room)
				p->cand[n++] = p->cand[j];
			else
				c->dnn->cudnnBackendDestroyDescriptor(p->cand[j].plan);
		p->ncand = n;
		p->tuned = n == 1;
	}
	return 1;
}

// A record's plan and its candidates go.
static void
dnn_plan_free(RtCuda *c, struct DnnPlan *p)
{
	if (!p)
		return;
	if (c->dnn && c->dnn->dl)
		for (int j = 0; j < p->ncand; j++)
			c->dnn->cudnnBackendDestroyDescriptor(p->cand[j].plan);
	free(p);
}

// The task is freed: its plans, and its workspace back to the pool.
void
rtcu_dnn_task_free(RtCuda *c, RtCuTask *k)
{
	for (uint32_t i = 0; k->k && i < k->nk; i++) {
		dnn_plan_free(c, k->k[i].dnn);
		k->k[i].dnn = NULL;
	}
	if (k->dnn_ws)
		rtcu_free(c, k->dnn_ws);
	k->dnn_ws = 0;
}

// Whether record kk can run through cuDNN on this run's buffers: it has a
// plan, and its three addresses have the 16-byte alignment the tensors
// were described with (a caller's device buffer need not).
int
rtcu_dnn_ready(const Kern *kk)
{
	return kk->dnn && !((kk->val[0] | kk->val[1] | kk->val[2]) & 15);
}

// Candidate q of record kk on the context's stream (under capture: into
// the graph).  Its workspace: the record's scratch where it fits, else the
// task's block.  The variant pack binds this run's addresses and the
// workspace; it is host state only, destroyed after.
static int
dnn_run(RtCuda *c, RtCuTask *k, Kern *kk, const struct DnnCand *q, char *err, size_t errlen)
{
	cudnnBackendDescriptor_t pack = NULL;
	int64_t uid[3] = {UID_OUT, UID_A, UID_B};
	uint64_t scr = rtcu_conv_scratch(k, kk, (uint64_t)q->ws);
	void *ptr[3], *ws = (void *)(uintptr_t)(scr ? scr : k->dnn_ws);
	int ok = 0;
	for (int i = 0; i < 3; i++)
		ptr[i] = (void *)(uintptr_t)kk->val[i];
	CHECK_DNN(c, cudnnBackendCreateDescriptor(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &pack));
	CHECK_DNN(c, cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS,
	                                      CUDNN_TYPE_INT64, 3, uid));
	CHECK_DNN(c, cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS,
	                                      CUDNN_TYPE_VOID_PTR, 3, ptr));
	CHECK_DNN(c, cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE,
	                                      CUDNN_TYPE_VOID_PTR, 1, &ws));
	CHECK_DNN(c, cudnnBackendFinalize(pack));
	CHECK_DNN(c, cudnnBackendExecute(c->dnn->h, q->plan, pack));
	ok = 1;
fail:
	if (pack)
		c->dnn->cudnnBackendDestroyDescriptor(pack);
	return ok;
}

enum { TUNE_SAMPLES = 5, TUNE_BATCH = 3 };

static int
cmp_float(const void *a, const void *b)
{
	float x = *(const float *)a, y = *(const float *)b;
	return (x > y) - (x < y);
}

// Whether the stream is being captured (cuStreamIsCapturing, looked up
// here: the driver table has no use for it elsewhere).  Unknown counts as
// captured: nothing is timed then.
static int
dnn_capturing(RtCuda *c)
{
	typedef CUresult (*IsCapturing)(CUstream s, int *status);
	static IsCapturing fn;
	void *sp;
	if (!fn && c->d.dl && (sp = dlsym(c->d.dl, "cuStreamIsCapturing")))
		memcpy(&fn, &sp, sizeof sp);
	int st = 1;
	return !fn || fn(c->stream, &st) || st != 0;
}

// Times record kk's candidates on this run's buffers (its inputs are
// ready on the stream) as choice_time (runtime/cuda.c) times a choice's:
// one eager run each (a failing candidate is dropped), TUNE_BATCH runs
// captured into a graph, a warm-up replay, then TUNE_SAMPLES replays per
// candidate interleaved, each between two events; the lowest median per
// run wins.  A candidate writes only the record's output and its
// workspace, which none reads, so the runs change nothing.  *best: the
// winner (0 where nothing could be timed); us[]: the medians (0: none).
static int
dnn_time(RtCuda *c, RtCuTask *k, Kern *kk, int *best, double *us, char *err, size_t errlen)
{
	struct DnnPlan *p = kk->dnn;
	CUevent ev[2] = {NULL, NULL};
	CUgraphExec ex[DNN_TUNE_MAX] = {NULL};
	float t[DNN_TUNE_MAX][TUNE_SAMPLES];
	int ok = 0;
	*best = 0;
	for (int j = 0; j < p->ncand; j++) {
		CUgraph g = NULL;
		char e2[600];
		us[j] = 0;
		if (!dnn_run(c, k, kk, &p->cand[j], e2, sizeof e2))
			continue;
		if (c->d.cuStreamBeginCapture(c->stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL))
			continue;
		int launched = 1;
		for (int b = 0; b < TUNE_BATCH && launched; b++)
			launched = dnn_run(c, k, kk, &p->cand[j], e2, sizeof e2);
		CUresult r = c->d.cuStreamEndCapture(c->stream, &g);
		if (!launched || r || !g) {
			if (g)
				c->d.cuGraphDestroy(g);
			continue;
		}
		r = c->d.cuGraphInstantiate(&ex[j], g, 0);
		c->d.cuGraphDestroy(g);
		if (r) {
			ex[j] = NULL;
			continue;
		}
		CHECK_CU_GOTO(c, cuGraphLaunch(ex[j], c->stream), done); // warm-up
	}
	CHECK_CU_GOTO(c, cuEventCreate(&ev[0], 0), done);
	CHECK_CU_GOTO(c, cuEventCreate(&ev[1], 0), done);
	CHECK_CU_GOTO(c, cuStreamSynchronize(c->stream), done);
	for (int s = 0; s < TUNE_SAMPLES; s++)
		for (int j = 0; j < p->ncand; j++) {
			if (!ex[j])
				continue;
			CHECK_CU_GOTO(c, cuEventRecord(ev[0], c->stream), done);
			CHECK_CU_GOTO(c, cuGraphLaunch(ex[j], c->stream), done);
			CHECK_CU_GOTO(c, cuEventRecord(ev[1], c->stream), done);
			CHECK_CU_GOTO(c, cuEventSynchronize(ev[1]), done);
			float ms = 0;
			CHECK_CU_GOTO(c, cuEventElapsedTime(&ms, ev[0], ev[1]), done);
			t[j][s] = ms / TUNE_BATCH;
		}
	for (int j = 0, have = 0; j < p->ncand; j++) {
		if (!ex[j])
			continue;
		qsort(t[j], TUNE_SAMPLES, sizeof t[j][0], cmp_float);
		us[j] = 1e3 * t[j][TUNE_SAMPLES / 2];
		if (!have || us[j] < us[*best])
			*best = j;
		have = 1;
	}
	ok = 1;
done:
	for (int i = 0; i < 2; i++)
		if (ev[i])
			c->d.cuEventDestroy(ev[i]);
	for (int j = 0; j < p->ncand; j++)
		if (ex[j])
			c->d.cuGraphExecDestroy(ex[j]);
	return ok;
}

// Record kk's first run: its candidate picked (the cache's pick, else
// timed where the stream is not captured, else the first), the others
// freed.  The pick is cached under the record's index with bit 30 set
// (choice records count from 0: no clash).
static int
dnn_tune(RtCuda *c, RtCuTask *k, Kern *kk, char *err, size_t errlen)
{
	struct DnnPlan *p = kk->dnn;
	double us[DNN_TUNE_MAX] = {0};
	int best = 0;
	const char *how = "first";
	RtChoiceKey key = {k->artifact, c->gpu_key, k->index,
	                   (1u << 30) | (uint32_t)(kk - k->k)};
	int cached = c->cache[0] ? rt_choice_lookup(c->cache, &key) : -1;
	if (cached >= 0 && cached < p->ncand) {
		best = cached;
		how = "cached";
	} else if (!dnn_capturing(c)) {
		if (!dnn_time(c, k, kk, &best, us, err, errlen))
			return 0;
		how = "timed";
		if (c->cache[0])
			rt_choice_store(c->cache, &key, best); // no cache is no error
	}
	const char *log = getenv("FADC_CUDA_CHOICE_LOG");
	if (log && *log && strcmp(log, "0")) {
		fprintf(stderr, "fadc: task '%s' record %u (%s) engines (%s):", k->t->name,
		        (unsigned)(kk - k->k), kk->k->name, how);
		for (int j = 0; j < p->ncand; j++)
			fprintf(stderr, " %sengine%d %.2f us", j == best ? "*" : "", j, us[j]);
		fprintf(stderr, "\n");
	}
	for (int j = 0; j < p->ncand; j++)
		if (j != best)
			c->dnn->cudnnBackendDestroyDescriptor(p->cand[j].plan);
	p->cand[0] = p->cand[best];
	p->ncand = 1;
	p->tuned = 1;
	return 1;
}

// Convolution record kk through its plan on the context's stream (under
// capture: into the graph); the first run picks the plan (dnn_tune).
int
rtcu_dnn_conv(RtCuda *c, RtCuTask *k, Kern *kk, char *err, size_t errlen)
{
	if (!kk->dnn->tuned && !dnn_tune(c, k, kk, err, errlen))
		return 0;
	return dnn_run(c, k, kk, &kk->dnn->cand[0], err, errlen);
}

// The context is destroyed: its handle goes.  The library stays loaded,
// as the driver and cuBLAS do.
void
rtcu_dnn_close(RtCuda *c)
{
	if (c->dnn && c->dnn->h)
		c->dnn->cudnnDestroy(c->dnn->h);
	free(c->dnn);
	c->dnn = NULL;
}
