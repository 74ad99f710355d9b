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

// A record's plan (Kern.dnn): NULL where cuDNN cannot run it.
struct DnnPlan {
	cudnnBackendDescriptor_t plan;
	int64_t ws; // its workspace bytes
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

// The plan of conv record v into *out (NULL when no engine suits it, with
// the reason in err; 0 only for a failed cuDNN call, also in err).
static int
dnn_plan(RtCuda *c, const ArtConv *v, struct DnnPlan **out, char *err, size_t errlen)
{
	Dnn *d = c->dnn;
	cudnnBackendDescriptor_t t[3] = {NULL, NULL, NULL}, conv = NULL, op = NULL, graph = NULL,
	                         heur = NULL, cfg[DNN_MAX_CFG] = {NULL}, plan = NULL;
	int64_t ncfg = 0;
	int ok = 0;
	*out = NULL;
	const int64_t xs[4] = {v->n, v->c, v->h, v->w},
	              ws[4] = {v->k, v->c / v->groups, v->r, v->s},
	              ys[4] = {v->n, v->k, v->oh, v->ow};
	// The written tensor is UID_OUT, then a and b: as the record's arguments.
	const int64_t *shape[3] = {ys, xs, ws};
	if (v->op == ART_CONV_BWD_DATA)
		shape[0] = xs, shape[1] = ys, shape[2] = ws;
	else if (v->op == ART_CONV_BWD_FILTER)
		shape[0] = ws, shape[1] = xs, shape[2] = ys;
	for (int i = 0; i < 3; i++)
		if (!dnn_tensor(c, shape[i], (v->nhwc >> i) & 1, UID_OUT + i, &t[i], err, errlen))
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
	// Heuristics: mode A's ranking, then the fallback list; the first
	// configuration that suits the record and finalizes is the plan.
	static const int modes[2] = {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK};
	for (int m = 0; m < 2 && !plan; m++) {
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
			for (int64_t i = 0; i < ncfg && i < DNN_MAX_CFG && !plan; i++) {
				char e2[256];
				if (!dnn_notes_ok(c, cfg[i], v->tf32, e2, sizeof e2))
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
				if (!(*out = malloc(sizeof **out))) {
					snprintf(err, errlen, "out of memory");
					goto fail;
				}
				**out = (struct DnnPlan){plan, wsb};
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
	if (!plan)
		snprintf(err, errlen, "cuDNN (%s) has no engine for it%s", d->lib,
		         v->tf32 ? "" : " in strict fp32");
	ok = 1;
fail:
	if (!ok && plan && !*out)
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
	int64_t ws = 0;
	for (uint32_t i = 0; i < k->nk; i++) {
		Kern *kk = &k->k[i];
		if (kk->k->kind != ART_LAUNCH_CONV)
			continue;
		why[0] = 0;
		if (!dnn_plan(c, &kk->k->conv, &kk->dnn, why, sizeof why) &&
		    !strcmp(why, "out of memory")) {
			snprintf(err, errlen, "out of memory");
			return 0;
		}
		if (!kk->dnn && verbose)
			fprintf(stderr, "fadc: task '%s' record %u (%s): cuDNN is no candidate: %s\n",
			        k->t->name, i, kk->k->name, why);
		// A plan whose workspace fits in the record's scratch (arena bytes
		// free while it runs: rtcu_conv_scratch) takes none here.
		if (kk->dnn && kk->dnn->ws > ws && (uint64_t)kk->dnn->ws > kk->scr_bytes)
			ws = kk->dnn->ws;
	}
	if (ws && !rtcu_alloc(c, (size_t)ws, &k->dnn_ws, err, errlen)) {
		// No room for the workspace: no candidates, not a failed load.
		if (verbose)
			fprintf(stderr, "fadc: task '%s': cuDNN is no candidate: %s\n", k->t->name, err);
		err[0] = 0;
		rtcu_dnn_task_free(c, k);
	}
	return 1;
}

// The task is freed: its plans, and its workspace back to the pool.
void
rtcu_dnn_task_free(RtCuda *c, RtCuTask *k)
{
	for (uint32_t i = 0; k->k && i < k->nk; i++)
		if (k->k[i].dnn) {
			if (c->dnn && c->dnn->dl)
				c->dnn->cudnnBackendDestroyDescriptor(k->k[i].dnn->plan);
			free(k->k[i].dnn);
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

// Convolution record kk through its plan on the context's stream (under
// capture: into the graph).  The variant pack binds this run's addresses
// and the task's workspace; it is host state only, destroyed after.
int
rtcu_dnn_conv(RtCuda *c, RtCuTask *k, Kern *kk, char *err, size_t errlen)
{
	cudnnBackendDescriptor_t pack = NULL;
	int64_t uid[3] = {UID_OUT, UID_A, UID_B};
	uint64_t scr = rtcu_conv_scratch(k, kk, (uint64_t)kk->dnn->ws);
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
	CHECK_DNN(c, cudnnBackendExecute(c->dnn->h, kk->dnn->plan, pack));
	ok = 1;
fail:
	if (pack)
		c->dnn->cudnnBackendDestroyDescriptor(pack);
	return ok;
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
