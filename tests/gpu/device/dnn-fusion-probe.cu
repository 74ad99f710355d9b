// tests/gpu/device/dnn-fusion-probe.cu -- which cuDNN runtime-fusion graphs
// around a convolution the GPU machine's cuDNN runs, for fp32 storage with
// TF32 (or strict fp32) compute, and what they cost against the unfused
// convolution plus the separate pointwise passes fadc runs today.
//
// A standalone measurement, not part of fadc (issue 20, task h-g20c; the
// findings are in docs/PERFORMANCE.md "cuDNN runtime fusion probed" and
// docs/CUDA.md).  It links cuDNN and the CUDA runtime directly, unlike
// runtime/cudnn.c, which dlopens cuDNN and never includes its headers.
//
// Build (here, no GPU needed):
//   nvcc -O2 -arch=sm_90 -o dnn-fusion-probe tests/gpu/device/dnn-fusion-probe.cu \
//        -L/usr/local/cuda/lib64 -lcudnn
// Run on the GPU machine: ./dnn-fusion-probe [quick|full] [budget seconds]
//
// Graphs probed, all NHWC (resnet18's TF32 activations are channels-last),
// per shape of resnet18 at N=32 and one awkward shape:
//   conv        y = conv(x, w)                                   (reference)
//   pro         y = conv(relu(x*s + b), w)     BN apply + ReLU as the prologue
//   epi         y = relu(conv(x, w) + z)       residual add + ReLU epilogue
//   stats       y = conv(x, w); sum_c(y), sum_c(y^2)   genstats epilogue
//   pro+stats   both (cudnn-frontend's "ConvBNfprop")
//   dgrad+drelu dx = dgrad(dy, w) * (xr > 0)   the ReLU mask on the gradient
//   wgrad+pro   dw = wgrad(relu(x*s + b), dy)  the weight gradient reading the
//                                              BN input, not ReLU's output
// Each in fp32 storage (TF32 engines allowed, then strict: no TENSOR_CORE or
// DOWN_CONVERT_INPUTS note) and in fp16 storage (float compute).  For each
// graph: how many engine configurations heuristics (mode A, then fallback)
// offer, how many finalize, the best time of up to MAXTIME of them, and
// for fp32 a check of the fused result against the unfused convolution
// and this file's own pointwise kernels (max |diff| / max |ref|).
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cudnn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CK(x)                                                                              \
	do {                                                                                   \
		cudaError_t e_ = (x);                                                              \
		if (e_ != cudaSuccess) {                                                           \
			fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
			exit(1);                                                                       \
		}                                                                                  \
	} while (0)

// A failing cuDNN call while building a graph: return 0 with the call's text.
static char g_why[512];
#define DN(x)                                                                              \
	do {                                                                                   \
		cudnnStatus_t s_ = (x);                                                            \
		if (s_ != CUDNN_STATUS_SUCCESS) {                                                  \
			snprintf(g_why, sizeof g_why, "%s: %s", #x, cudnnGetErrorString(s_));         \
			return 0;                                                                      \
		}                                                                                  \
	} while (0)

typedef cudnnBackendDescriptor_t D;
static cudnnHandle_t H;
static int MAXTIME = 3; // configurations timed per graph
static int g_nchw; // 1: tensors NCHW (the "engines" run), else NHWC
static int g_verbose; // 1: print every timed configuration with its rank

// ---------------------------------------------------------------- descriptors

static int64_t uid_next = 100;

// A tensor of dims (n, c, h, w), NHWC strides; vec: a per-channel vector
// (1, c, 1, 1).  virt: an intermediate that never reaches memory.
static D
tens(const int64_t dim[4], cudnnDataType_t dt, int virt, int64_t *uid)
{
	int64_t st[4] = {dim[1] * dim[2] * dim[3], 1, dim[3] * dim[1], dim[1]}, al = 16, u = uid_next++;
	if (g_nchw)
		st[1] = dim[2] * dim[3], st[2] = dim[3], st[3] = 1;
	D t = NULL;
	bool v = virt;
	if (cudnnBackendCreateDescriptor(CUDNN_BACKEND_TENSOR_DESCRIPTOR, &t) ||
	    cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &dt) ||
	    cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dim) ||
	    cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, st) ||
	    cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &u) ||
	    cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &al) ||
	    cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &v) ||
	    cudnnBackendFinalize(t)) {
		snprintf(g_why, sizeof g_why, "tensor descriptor");
		return NULL;
	}
	if (uid)
		*uid = u;
	return t;
}

static D
conv_desc(int64_t pad, int64_t str)
{
	D c = NULL;
	int64_t dims = 2, p[2] = {pad, pad}, s[2] = {str, str}, d[2] = {1, 1};
	cudnnDataType_t ct = CUDNN_DATA_FLOAT;
	cudnnConvolutionMode_t m = CUDNN_CROSS_CORRELATION;
	if (cudnnBackendCreateDescriptor(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR, &c) ||
	    cudnnBackendSetAttribute(c, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1, &dims) ||
	    cudnnBackendSetAttribute(c, CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &ct) ||
	    cudnnBackendSetAttribute(c, CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &m) ||
	    cudnnBackendSetAttribute(c, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, 2, p) ||
	    cudnnBackendSetAttribute(c, CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, 2, p) ||
	    cudnnBackendSetAttribute(c, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, 2, s) ||
	    cudnnBackendSetAttribute(c, CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, 2, d) ||
	    cudnnBackendFinalize(c))
		return NULL;
	return c;
}

// conv op: kind 0 fwd (out=y, a=x, b=w), 1 dgrad (out=dx, a=dy, b=w),
// 2 wgrad (out=dw, a=x, b=dy).
static D
conv_op(int kind, D cd, D out, D a, D b)
{
	static const cudnnBackendDescriptorType_t ty[3] = {
	    CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR,
	    CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR,
	    CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR};
	static const cudnnBackendAttributeName_t at[3][6] = {
	    {CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA,
	     CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y,
	     CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W},
	    {CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA,
	     CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX,
	     CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W},
	    {CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA,
	     CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW,
	     CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY}};
	D op = NULL;
	float al = 1, be = 0;
	const cudnnBackendAttributeName_t *t = at[kind];
	if (cudnnBackendCreateDescriptor(ty[kind], &op) ||
	    cudnnBackendSetAttribute(op, t[0], CUDNN_TYPE_FLOAT, 1, &al) ||
	    cudnnBackendSetAttribute(op, t[1], CUDNN_TYPE_FLOAT, 1, &be) ||
	    cudnnBackendSetAttribute(op, t[2], CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &cd) ||
	    cudnnBackendSetAttribute(op, t[3], CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &out) ||
	    cudnnBackendSetAttribute(op, t[4], CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &a) ||
	    cudnnBackendSetAttribute(op, t[5], CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &b) ||
	    cudnnBackendFinalize(op)) {
		snprintf(g_why, sizeof g_why, "conv op %d", kind);
		return NULL;
	}
	return op;
}

// Pointwise op y = mode(x, b) (b NULL: unary).  RELU_BWD: dx = dy * (x > 0)
// with x the forward input (here: y = dx, x = dy, b = x).
static D
pw_op(cudnnPointwiseMode_t mode, D x, D b, D y)
{
	D pw = NULL, op = NULL;
	cudnnDataType_t prec = CUDNN_DATA_FLOAT;
	if (cudnnBackendCreateDescriptor(CUDNN_BACKEND_POINTWISE_DESCRIPTOR, &pw) ||
	    cudnnBackendSetAttribute(pw, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode) ||
	    cudnnBackendSetAttribute(pw, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &prec) ||
	    cudnnBackendFinalize(pw))
		return NULL;
	if (cudnnBackendCreateDescriptor(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR, &op) ||
	    cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &pw))
		return NULL;
	if (mode == CUDNN_POINTWISE_RELU_BWD) {
		if (cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_POINTWISE_DYDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x) ||
		    cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &b) ||
		    cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_POINTWISE_DXDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y))
			return NULL;
	} else {
		if (cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x) ||
		    (b && cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &b)) ||
		    cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y))
			return NULL;
	}
	if (cudnnBackendFinalize(op)) {
		snprintf(g_why, sizeof g_why, "pointwise op %d", (int)mode);
		return NULL;
	}
	return op;
}

static D
genstats_op(D x, D sum, D sq)
{
	D op = NULL;
	cudnnGenStatsMode_t m = CUDNN_GENSTATS_SUM_SQSUM;
	cudnnDataType_t prec = CUDNN_DATA_FLOAT;
	if (cudnnBackendCreateDescriptor(CUDNN_BACKEND_OPERATION_GEN_STATS_DESCRIPTOR, &op) ||
	    cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_GENSTATS_MODE, CUDNN_TYPE_GENSTATS_MODE, 1, &m) ||
	    cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_GENSTATS_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &prec) ||
	    cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_GENSTATS_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x) ||
	    cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_GENSTATS_SUMDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &sum) ||
	    cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_GENSTATS_SQSUMDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &sq) ||
	    cudnnBackendFinalize(op)) {
		snprintf(g_why, sizeof g_why, "genstats op");
		return NULL;
	}
	return op;
}

// ---------------------------------------------------------------- kernels (the unfused passes)

// x' = relu(x s + b), NHWC, c channels (the BN apply + ReLU pass).
__global__ void
k_bnrelu(const float *x, const float *s, const float *b, float *y, long n, int c)
{
	for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x) {
		int ch = i % c;
		y[i] = fmaxf(x[i] * s[ch] + b[ch], 0.f);
	}
}
// y = relu(a + z)
__global__ void
k_addrelu(const float *a, const float *z, float *y, long n)
{
	for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x)
		y[i] = fmaxf(a[i] + z[i], 0.f);
}
// y = a * (x > 0)
__global__ void
k_mask(const float *a, const float *x, float *y, long n)
{
	for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x)
		y[i] = x[i] > 0 ? a[i] : 0.f;
}
// Per-channel sum and sum of squares of NHWC y (rows = n h w), in double for
// the reference; one thread per channel per row block, atomics across blocks.
__global__ void
k_stats(const float *y, double *sum, double *sq, long rows, int c)
{
	int ch = blockIdx.x * blockDim.x + threadIdx.x;
	if (ch >= c)
		return;
	long r0 = blockIdx.y * (rows / gridDim.y + 1), r1 = min(rows, r0 + rows / gridDim.y + 1);
	double s = 0, q = 0;
	for (long r = r0; r < r1; r++) {
		double v = y[r * c + ch];
		s += v;
		q += v * v;
	}
	atomicAdd(&sum[ch], s);
	atomicAdd(&sq[ch], q);
}
// The same statistics as one float pass of the kind fadc prints (for the time).
__global__ void
k_stats_f(const float *y, float *sum, float *sq, long rows, int c)
{
	int ch = blockIdx.x * blockDim.x + threadIdx.x;
	if (ch >= c)
		return;
	long r0 = blockIdx.y * (rows / gridDim.y + 1), r1 = min(rows, r0 + rows / gridDim.y + 1);
	float s = 0, q = 0;
	for (long r = r0; r < r1; r++) {
		float v = y[r * c + ch];
		s += v;
		q += v * v;
	}
	atomicAdd(&sum[ch], s);
	atomicAdd(&sq[ch], q);
}
__global__ void
k_fill(float *p, long n, unsigned seed, float lo, float hi)
{
	for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x) {
		unsigned h = (unsigned)i * 2654435761u ^ seed;
		h ^= h >> 13;
		h *= 0x5bd1e995u;
		h ^= h >> 15;
		p[i] = lo + (hi - lo) * (h & 0xffffff) / 16777216.f;
	}
}
__global__ void
k_half(const float *p, __half *q, long n)
{
	for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x)
		q[i] = __float2half(p[i]);
}

#define GRID 1024
#define BLK 256

// ---------------------------------------------------------------- graphs

typedef struct Shape {
	const char *name;
	int64_t n, c, h, w, k, r, pad, str;
} Shape;

enum { G_CONV, G_PRO, G_EPI, G_STATS, G_PROSTATS, G_DGRAD_DRELU, G_WGRAD_PRO, G_DGRAD, G_WGRAD, NG };
static const char *gname[NG] = {"conv", "pro", "epi", "stats", "pro+stats", "dgrad+drelu",
                                "wgrad+pro", "dgrad", "wgrad"};

// Device buffers of one shape (fp32; fp16 copies of x, w, dy, z).
typedef struct Buf {
	float *x, *w, *y, *z, *s, *b, *dy, *dx, *dw, *xr, *sum, *sq, *t1, *t2;
	__half *hx, *hw, *hdy, *hz, *hy, *hdx, *hdw;
	float *ws;
	size_t wsmax;
} Buf;

// A built graph: the operation graph and the (uid, pointer) pairs.
typedef struct G {
	D ops[8];
	int nops;
	int64_t uid[12];
	void *ptr[12];
	int nptr;
} G;

static void
bind(G *g, int64_t uid, void *p)
{
	g->uid[g->nptr] = uid;
	g->ptr[g->nptr++] = p;
}

// Builds graph kind g of shape sh in data type dt into *out.  0: a
// descriptor failed to finalize (g_why says which).
static int
build(int kind, const Shape *sh, cudnnDataType_t dt, Buf *B, G *out)
{
	int64_t oh = (sh->h + 2 * sh->pad - sh->r) / sh->str + 1, ow = (sh->w + 2 * sh->pad - sh->r) / sh->str + 1;
	int64_t xd[4] = {sh->n, sh->c, sh->h, sh->w}, wd[4] = {sh->k, sh->c, sh->r, sh->r},
	        yd[4] = {sh->n, sh->k, oh, ow}, cv[4] = {1, sh->c, 1, 1}, kv[4] = {1, sh->k, 1, 1};
	int h16 = dt == CUDNN_DATA_HALF;
	cudnnDataType_t F = CUDNN_DATA_FLOAT;
	memset(out, 0, sizeof *out);
	D cd = conv_desc(sh->pad, sh->str);
	if (!cd)
		return 0;
	int64_t u;
	D x, w, y, s, b, v1, v2, v3, z, dy, dx, dw, sum, sq, xr;
	switch (kind) {
	case G_CONV:
	case G_STATS:
		x = tens(xd, dt, 0, &u), bind(out, u, h16 ? (void *)B->hx : B->x);
		w = tens(wd, dt, 0, &u), bind(out, u, h16 ? (void *)B->hw : B->w);
		y = tens(yd, dt, 0, &u), bind(out, u, h16 ? (void *)B->hy : B->y);
		if (!x || !w || !y || !(out->ops[out->nops++] = conv_op(0, cd, y, x, w)))
			return 0;
		if (kind == G_STATS) {
			sum = tens(kv, F, 0, &u), bind(out, u, B->sum);
			sq = tens(kv, F, 0, &u), bind(out, u, B->sq);
			if (!sum || !sq || !(out->ops[out->nops++] = genstats_op(y, sum, sq)))
				return 0;
		}
		return 1;
	case G_PRO:
	case G_PROSTATS:
		x = tens(xd, dt, 0, &u), bind(out, u, h16 ? (void *)B->hx : B->x);
		s = tens(cv, dt, 0, &u), bind(out, u, B->s);
		b = tens(cv, dt, 0, &u), bind(out, u, B->b);
		v1 = tens(xd, F, 1, NULL), v2 = tens(xd, F, 1, NULL), v3 = tens(xd, F, 1, NULL);
		w = tens(wd, dt, 0, &u), bind(out, u, h16 ? (void *)B->hw : B->w);
		y = tens(yd, dt, 0, &u), bind(out, u, h16 ? (void *)B->hy : B->y);
		if (!x || !s || !b || !v1 || !v2 || !v3 || !w || !y ||
		    !(out->ops[out->nops++] = pw_op(CUDNN_POINTWISE_MUL, x, s, v1)) ||
		    !(out->ops[out->nops++] = pw_op(CUDNN_POINTWISE_ADD, v1, b, v2)) ||
		    !(out->ops[out->nops++] = pw_op(CUDNN_POINTWISE_RELU_FWD, v2, NULL, v3)) ||
		    !(out->ops[out->nops++] = conv_op(0, cd, y, v3, w)))
			return 0;
		if (kind == G_PROSTATS) {
			sum = tens(kv, F, 0, &u), bind(out, u, B->sum);
			sq = tens(kv, F, 0, &u), bind(out, u, B->sq);
			if (!sum || !sq || !(out->ops[out->nops++] = genstats_op(y, sum, sq)))
				return 0;
		}
		return 1;
	case G_EPI:
		x = tens(xd, dt, 0, &u), bind(out, u, h16 ? (void *)B->hx : B->x);
		w = tens(wd, dt, 0, &u), bind(out, u, h16 ? (void *)B->hw : B->w);
		z = tens(yd, dt, 0, &u), bind(out, u, h16 ? (void *)B->hz : B->z);
		y = tens(yd, dt, 0, &u), bind(out, u, h16 ? (void *)B->hy : B->y);
		v1 = tens(yd, F, 1, NULL), v2 = tens(yd, F, 1, NULL);
		if (!x || !w || !z || !y || !v1 || !v2 || !(out->ops[out->nops++] = conv_op(0, cd, v1, x, w)) ||
		    !(out->ops[out->nops++] = pw_op(CUDNN_POINTWISE_ADD, v1, z, v2)) ||
		    !(out->ops[out->nops++] = pw_op(CUDNN_POINTWISE_RELU_FWD, v2, NULL, y)))
			return 0;
		return 1;
	case G_DGRAD:
	case G_DGRAD_DRELU:
		dy = tens(yd, dt, 0, &u), bind(out, u, h16 ? (void *)B->hdy : B->dy);
		w = tens(wd, dt, 0, &u), bind(out, u, h16 ? (void *)B->hw : B->w);
		dx = tens(xd, dt, 0, &u), bind(out, u, h16 ? (void *)B->hdx : B->dx);
		if (kind == G_DGRAD)
			return dy && w && dx && (out->ops[out->nops++] = conv_op(1, cd, dx, dy, w));
		xr = tens(xd, dt, 0, &u), bind(out, u, h16 ? (void *)B->hx : B->x);
		v1 = tens(xd, F, 1, NULL);
		return dy && w && dx && xr && v1 && (out->ops[out->nops++] = conv_op(1, cd, v1, dy, w)) &&
		       (out->ops[out->nops++] = pw_op(CUDNN_POINTWISE_RELU_BWD, v1, xr, dx));
	case G_WGRAD:
	case G_WGRAD_PRO:
		dy = tens(yd, dt, 0, &u), bind(out, u, h16 ? (void *)B->hdy : B->dy);
		dw = tens(wd, dt, 0, &u), bind(out, u, h16 ? (void *)B->hdw : B->dw);
		x = tens(xd, dt, 0, &u), bind(out, u, h16 ? (void *)B->hx : B->x);
		if (kind == G_WGRAD)
			return dy && dw && x && (out->ops[out->nops++] = conv_op(2, cd, dw, x, dy));
		s = tens(cv, dt, 0, &u), bind(out, u, B->s);
		b = tens(cv, dt, 0, &u), bind(out, u, B->b);
		v1 = tens(xd, F, 1, NULL), v2 = tens(xd, F, 1, NULL), v3 = tens(xd, F, 1, NULL);
		return dy && dw && x && s && b && v1 && v2 && v3 &&
		       (out->ops[out->nops++] = pw_op(CUDNN_POINTWISE_MUL, x, s, v1)) &&
		       (out->ops[out->nops++] = pw_op(CUDNN_POINTWISE_ADD, v1, b, v2)) &&
		       (out->ops[out->nops++] = pw_op(CUDNN_POINTWISE_RELU_FWD, v2, NULL, v3)) &&
		       (out->ops[out->nops++] = conv_op(2, cd, dw, v3, dy));
	}
	return 0;
}

static double
now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + 1e-9 * t.tv_nsec;
}

// The engine's notes as text: T (tensor core), D (down-convert inputs), R
// (reduced-precision reduction), N (nondeterministic), C (runtime compiled).
static void
notes(D cfg, char *buf, int *tf32only, int *ok)
{
	D eng = NULL;
	int64_t n = 0, got = 0, gi = -1;
	cudnnBackendNumericalNote_t nn[16];
	cudnnBackendBehaviorNote_t bn[16];
	char *p = buf;
	*tf32only = 0, *ok = 1;
	cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINE_DESCRIPTOR, &eng);
	cudnnBackendGetAttribute(cfg, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &got, &eng);
	cudnnBackendGetAttribute(eng, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &got, &gi);
	p += sprintf(p, "e%lld:", (long long)gi);
	if (!cudnnBackendGetAttribute(eng, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE, 16, &n, nn))
		for (int i = 0; i < n && i < 16; i++) {
			if (nn[i] == CUDNN_NUMERICAL_NOTE_TENSOR_CORE)
				*p++ = 'T', *tf32only = 1;
			if (nn[i] == CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS)
				*p++ = 'D', *tf32only = 1;
			if (nn[i] == CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION)
				*p++ = 'R', *ok = 0;
			if (nn[i] == CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC)
				*p++ = 'N', *ok = 0;
		}
	n = 0;
	if (!cudnnBackendGetAttribute(eng, CUDNN_ATTR_ENGINE_BEHAVIOR_NOTE, CUDNN_TYPE_BEHAVIOR_NOTE, 16, &n, bn))
		for (int i = 0; i < n && i < 16; i++)
			if (bn[i] == CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION)
				*p++ = 'C';
	*p = 0;
	cudnnBackendDestroyDescriptor(eng);
}

typedef struct Res {
	int offered, finalized, suitable; // configurations
	float best_ms; // -1: none ran
	char eng[64]; // the best's engine and notes
	double build_s;
	D plan; // the best plan (kept for the check), NULL if none
	G g;
} Res;

// Heuristics, finalize, time.  strict: only engines without T/D notes.
static void
probe(int kind, const Shape *sh, cudnnDataType_t dt, int strict, Buf *B, Res *r)
{
	memset(r, 0, sizeof *r);
	r->best_ms = -1;
	double t0 = now();
	G *g = &r->g;
	g_why[0] = 0;
	if (!build(kind, sh, dt, B, g)) {
		snprintf(r->eng, sizeof r->eng, "build: %.50s", g_why);
		return;
	}
	D graph = NULL;
	cudnnBackendCreateDescriptor(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, &graph);
	cudnnBackendSetAttribute(graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, g->nops, g->ops);
	cudnnBackendSetAttribute(graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &H);
	cudnnStatus_t st = cudnnBackendFinalize(graph);
	if (st) {
		snprintf(r->eng, sizeof r->eng, "graph: %s", cudnnGetErrorString(st));
		return;
	}
	void *vp;
	cudaEvent_t e0, e1;
	CK(cudaEventCreate(&e0));
	CK(cudaEventCreate(&e1));
	int timed = 0;
	static const cudnnBackendHeurMode_t modes[2] = {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK};
	// The engines run (g_verbose) looks at the fallback list only when mode
	// A ran nothing: its generic engines take seconds at fcn_resnet's head.
	for (int m = 0; m < 2 && timed < MAXTIME && !(g_verbose && m && timed); m++) {
		D heur = NULL, cfg[64];
		int64_t ncfg = 0;
		cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, &heur);
		cudnnBackendSetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &graph);
		cudnnBackendSetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &modes[m]);
		if (cudnnBackendFinalize(heur))
			continue;
		for (int i = 0; i < 64; i++)
			cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, &cfg[i]);
		if (cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 64, &ncfg, cfg))
			ncfg = 0;
		r->offered += ncfg;
		for (int64_t i = 0; i < ncfg && i < 64 && timed < MAXTIME; i++) {
			char nb[64];
			int tf, ok;
			notes(cfg[i], nb, &tf, &ok);
			if (!ok || (strict && tf))
				continue;
			D plan = NULL;
			int64_t ws = -1, got;
			cudnnBackendCreateDescriptor(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, &plan);
			cudnnBackendSetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &H);
			if (cudnnBackendSetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &cfg[i]) ||
			    cudnnBackendFinalize(plan) ||
			    cudnnBackendGetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &got, &ws) ||
			    ws < 0 || (size_t)ws > B->wsmax) {
				cudnnBackendDestroyDescriptor(plan);
				continue;
			}
			r->finalized++;
			D pack = NULL;
			vp = B->ws;
			cudnnBackendCreateDescriptor(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &pack);
			cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, g->nptr, g->uid);
			cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, g->nptr, g->ptr);
			cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &vp);
			cudnnBackendFinalize(pack);
			// genstats accumulates? zero the sums before each run as fadc would.
			int bad = 0;
			for (int it = 0; it < 3 && !bad; it++)
				bad = cudnnBackendExecute(H, plan, pack) != 0;
			if (bad || cudaDeviceSynchronize() != cudaSuccess) {
				cudaGetLastError();
				cudnnBackendDestroyDescriptor(pack);
				cudnnBackendDestroyDescriptor(plan);
				continue;
			}
			r->suitable++;
			timed++;
			const int iters = g_verbose ? 5 : 20;
			if (g_verbose && r->best_ms > 0) {
				// one run first: more than 4x the best so far is not timed further
				float one;
				CK(cudaEventRecord(e0));
				cudnnBackendExecute(H, plan, pack);
				CK(cudaEventRecord(e1));
				CK(cudaEventSynchronize(e1));
				CK(cudaEventElapsedTime(&one, e0, e1));
				if (one > 4 * r->best_ms) {
					printf("      %s rank %lld %-12s one run %.3f ms (> 4x best: not timed)\n",
					       m ? "fallback" : "mode A", (long long)i, nb, one);
					cudnnBackendDestroyDescriptor(pack);
					cudnnBackendDestroyDescriptor(plan);
					continue;
				}
			}
			CK(cudaEventRecord(e0));
			for (int it = 0; it < iters; it++)
				cudnnBackendExecute(H, plan, pack);
			CK(cudaEventRecord(e1));
			CK(cudaEventSynchronize(e1));
			float ms;
			CK(cudaEventElapsedTime(&ms, e0, e1));
			ms /= iters;
			cudnnBackendDestroyDescriptor(pack);
			if (g_verbose)
				printf("      %s rank %lld %-12s ws %7.1f MB  %8.3f ms\n", m ? "fallback" : "mode A",
				       (long long)i, nb, ws / 1e6, ms);
			if (r->best_ms < 0 || ms < r->best_ms) {
				if (r->plan)
					cudnnBackendDestroyDescriptor(r->plan);
				r->plan = plan;
				r->best_ms = ms;
				snprintf(r->eng, sizeof r->eng, "%s%s", nb, m ? "(fb)" : "");
			} else
				cudnnBackendDestroyDescriptor(plan);
		}
		for (int i = 0; i < 64; i++)
			cudnnBackendDestroyDescriptor(cfg[i]);
		cudnnBackendDestroyDescriptor(heur);
	}
	if (r->best_ms < 0 && !r->eng[0])
		snprintf(r->eng, sizeof r->eng, "no engine ran");
	cudnnBackendDestroyDescriptor(graph);
	cudaEventDestroy(e0);
	cudaEventDestroy(e1);
	r->build_s = now() - t0;
}

static void
run_plan(Res *r, Buf *B)
{
	D pack = NULL;
	void *vp = B->ws;
	cudnnBackendCreateDescriptor(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &pack);
	cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, r->g.nptr, r->g.uid);
	cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, r->g.nptr, r->g.ptr);
	cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &vp);
	cudnnBackendFinalize(pack);
	cudnnBackendExecute(H, r->plan, pack);
	CK(cudaDeviceSynchronize());
	cudnnBackendDestroyDescriptor(pack);
}

// max |a - b| / max |b| over n floats on the device.
static double
relerr(const float *a, const float *b, long n)
{
	float *ha = (float *)malloc(n * 4), *hb = (float *)malloc(n * 4);
	CK(cudaMemcpy(ha, a, n * 4, cudaMemcpyDeviceToHost));
	CK(cudaMemcpy(hb, b, n * 4, cudaMemcpyDeviceToHost));
	double md = 0, mb = 0;
	for (long i = 0; i < n; i++) {
		md = fmax(md, fabs((double)ha[i] - hb[i]));
		mb = fmax(mb, fabs((double)hb[i]));
	}
	free(ha), free(hb);
	return mb > 0 ? md / mb : md;
}

// Time of kernel launches fn() averaged over 20.
#define TIME_MS(out, stmt)                                                                 \
	do {                                                                                   \
		cudaEvent_t a_, b_;                                                                \
		cudaEventCreate(&a_), cudaEventCreate(&b_);                                        \
		stmt;                                                                              \
		cudaEventRecord(a_);                                                               \
		for (int i_ = 0; i_ < 20; i_++) {                                                  \
			stmt;                                                                          \
		}                                                                                  \
		cudaEventRecord(b_);                                                               \
		cudaEventSynchronize(b_);                                                          \
		cudaEventElapsedTime(&(out), a_, b_);                                              \
		(out) /= 20;                                                                       \
		cudaEventDestroy(a_), cudaEventDestroy(b_);                                        \
	} while (0)

int
main(int argc, char **argv)
{
	int quick = argc > 1 && !strcmp(argv[1], "quick");
	// argv[2]: seconds after which no new probe starts (the device call's limit)
	double budget = argc > 2 ? atof(argv[2]) : 1e9;
	CK(cudaSetDevice(0));
	cudaDeviceProp prop;
	CK(cudaGetDeviceProperties(&prop, 0));
	if (cudnnCreate(&H)) {
		printf("cudnnCreate failed\n");
		return 1;
	}
	printf("device %s, cuDNN %zu (headers %d), cudart %d\n", prop.name, cudnnGetVersion(),
	       CUDNN_VERSION, CUDART_VERSION);
	printf("notes: T tensor core (TF32 for fp32), D down-convert, C runtime-compiled, (fb) fallback list\n");
	static const Shape shapes[] = {
	    // most telling first: the run stops starting probes at its budget
	    {"l1 3x3 64->64 56 s1", 32, 64, 56, 56, 64, 3, 1, 1},
	    {"odd 3x3 12->20 17 s2 N1", 1, 12, 17, 17, 20, 3, 1, 2},
	    {"l3 3x3 256->256 14", 32, 256, 14, 14, 256, 3, 1, 1},
	    {"l2a 3x3 64->128 56 s2", 32, 64, 56, 56, 128, 3, 1, 2},
	    {"ds 1x1 64->128 56 s2", 32, 64, 56, 56, 128, 1, 0, 2},
	    {"stem 7x7 3->64 224 s2", 32, 3, 224, 224, 64, 7, 3, 2},
	    {"l2 3x3 128->128 28", 32, 128, 28, 28, 128, 3, 1, 1},
	    {"l4 3x3 512->512 7", 32, 512, 7, 7, 512, 3, 1, 1},
	};
	int nsh = quick ? 2 : (int)(sizeof shapes / sizeof shapes[0]);
	Buf B;
	memset(&B, 0, sizeof B);
	const long MAXE = 32L * 64 * 224 * 224; // largest activation
	float **fb[] = {&B.x, &B.y, &B.z, &B.dy, &B.dx, &B.xr, &B.t1, &B.t2};
	for (size_t i = 0; i < sizeof fb / sizeof fb[0]; i++)
		CK(cudaMalloc((void **)fb[i], MAXE * 4));
	CK(cudaMalloc((void **)&B.w, 512L * 512 * 49 * 4));
	CK(cudaMalloc((void **)&B.dw, 512L * 512 * 49 * 4));
	__half **hb[] = {&B.hx, &B.hy, &B.hz, &B.hdy, &B.hdx};
	for (size_t i = 0; i < sizeof hb / sizeof hb[0]; i++)
		CK(cudaMalloc((void **)hb[i], MAXE * 2));
	CK(cudaMalloc((void **)&B.hw, 512L * 512 * 49 * 2));
	CK(cudaMalloc((void **)&B.hdw, 512L * 512 * 49 * 2));
	CK(cudaMalloc((void **)&B.s, 4096 * 4));
	CK(cudaMalloc((void **)&B.b, 4096 * 4));
	CK(cudaMalloc((void **)&B.sum, 4096 * 8));
	CK(cudaMalloc((void **)&B.sq, 4096 * 8));
	B.wsmax = (size_t)256 << 20;
	CK(cudaMalloc((void **)&B.ws, B.wsmax));
	k_fill<<<GRID, BLK>>>(B.x, MAXE, 1, -1, 1);
	k_fill<<<GRID, BLK>>>(B.z, MAXE, 2, -1, 1);
	k_fill<<<GRID, BLK>>>(B.dy, MAXE, 3, -1, 1);
	k_fill<<<GRID, BLK>>>(B.w, 512L * 512 * 49, 4, -0.1f, 0.1f);
	k_fill<<<GRID, BLK>>>(B.s, 4096, 5, 0.5f, 1.5f);
	k_fill<<<GRID, BLK>>>(B.b, 4096, 6, -0.5f, 0.5f);
	k_half<<<GRID, BLK>>>(B.x, B.hx, MAXE);
	k_half<<<GRID, BLK>>>(B.z, B.hz, MAXE);
	k_half<<<GRID, BLK>>>(B.dy, B.hdy, MAXE);
	k_half<<<GRID, BLK>>>(B.w, B.hw, 512L * 512 * 49);
	CK(cudaDeviceSynchronize());

	double T0 = now();
	if (argc > 1 && !strcmp(argv[1], "engines")) {
		// Every suitable TF32 configuration of the convolutions fadc spends
		// the most on per launch (docs/PERFORMANCE.md): fcn_resnet's head
		// weight gradient and the stem, NHWC and NCHW, the stem with its 3
		// channels and padded to 4 (cuDNN's TF32 engines want C % 4 == 0).
		// (Second device call: the head's NHWC weight gradient alone, before
		// the fallback rule and the 4x cutoff; third: the rest, NCHW last.)
		static const struct {
			Shape sh;
			int kind, nchw;
		} E[] = {
		    {{"r18 stem fwd C=3", 32, 3, 224, 224, 64, 7, 3, 2}, G_CONV},
		    {{"r18 stem fwd C=4", 32, 4, 224, 224, 64, 7, 3, 2}, G_CONV},
		    {{"r18 stem wgrad C=3", 32, 3, 224, 224, 64, 7, 3, 2}, G_WGRAD},
		    {{"r18 stem wgrad C=4", 32, 4, 224, 224, 64, 7, 3, 2}, G_WGRAD},
		    {{"fcn head wgrad 3x3 2048->512 60", 8, 2048, 60, 60, 512, 3, 1, 1}, G_WGRAD, 1},
		    {{"fcn head wgrad 3x3 2048->512 60", 8, 2048, 60, 60, 512, 3, 1, 1}, G_WGRAD},
		};
		MAXTIME = 12;
		g_verbose = 1;
		for (size_t i = 0; i < sizeof E / sizeof E[0]; i++)
			for (int l = E[i].nchw; l <= E[i].nchw; l++) {
				if (now() - T0 > budget) {
					printf("%s skipped (budget)\n", E[i].sh.name);
					continue;
				}
				g_nchw = l;
				printf("\n== %s  %s %s tf32\n", E[i].sh.name, gname[E[i].kind], l ? "NCHW" : "NHWC");
				Res r;
				probe(E[i].kind, &E[i].sh, CUDNN_DATA_FLOAT, 0, &B, &r);
				printf("   best %.3f ms %s (offered %d, finalized %d)\n", r.best_ms, r.eng, r.offered, r.finalized);
				fflush(stdout);
				if (r.plan)
					cudnnBackendDestroyDescriptor(r.plan);
			}
		printf("\ntotal %.0fs\n", now() - T0);
		return 0;
	}
	for (int si = 0; si < nsh; si++) {
		const Shape *sh = &shapes[si];
		int64_t oh = (sh->h + 2 * sh->pad - sh->r) / sh->str + 1, ow = (sh->w + 2 * sh->pad - sh->r) / sh->str + 1;
		long nx = sh->n * sh->c * sh->h * sh->w, ny = sh->n * sh->k * oh * ow;
		printf("\n== %s  (N=%lld C=%lld %lldx%lld -> K=%lld %lldx%lld)  t=%.0fs\n", sh->name,
		       (long long)sh->n, (long long)sh->c, (long long)sh->h, (long long)sh->w,
		       (long long)sh->k, (long long)oh, (long long)ow, now() - T0);
		// The unfused passes' times (this file's simple kernels; fadc's are
		// of the same kind: one read, one write per element).
		float t_bnrelu, t_addrelu, t_mask, t_stats;
		TIME_MS(t_bnrelu, (k_bnrelu<<<GRID, BLK>>>(B.x, B.s, B.b, B.t1, nx, sh->c)));
		TIME_MS(t_addrelu, (k_addrelu<<<GRID, BLK>>>(B.y, B.z, B.t2, ny)));
		TIME_MS(t_mask, (k_mask<<<GRID, BLK>>>(B.dx, B.x, B.t2, nx)));
		dim3 sg((sh->k + 63) / 64, 264);
		TIME_MS(t_stats, (k_stats_f<<<sg, 64>>>(B.y, (float *)B.t2, (float *)B.t2 + 4096, (long)sh->n * oh * ow, sh->k)));
		printf("   unfused passes: bnrelu(x) %.3f  add+relu(y) %.3f  mask(dx) %.3f  stats(y) %.3f ms\n",
		       t_bnrelu, t_addrelu, t_mask, t_stats);
		static const int kinds[] = {G_CONV, G_PRO, G_EPI, G_STATS, G_PROSTATS, G_DGRAD, G_DGRAD_DRELU, G_WGRAD, G_WGRAD_PRO};
		static const struct {
			cudnnDataType_t dt;
			int strict;
			const char *n;
		} modes[] = {{CUDNN_DATA_FLOAT, 0, "f32/tf32"}, {CUDNN_DATA_FLOAT, 1, "f32 strict"}, {CUDNN_DATA_HALF, 0, "f16"}};
		float base[3][NG];
		for (int mi = 0; mi < 3; mi++)
			for (int k = 0; k < NG; k++)
				base[mi][k] = -1;
		for (size_t ki = 0; ki < sizeof kinds / sizeof kinds[0]; ki++) {
			int k = kinds[ki];
			for (int mi = 0; mi < 3; mi++) {
				if (quick && mi == 1)
					continue;
				if (now() - T0 > budget) {
					printf("   %-11s %-10s skipped (budget)\n", gname[k], modes[mi].n);
					continue;
				}
				Res r;
				probe(k, sh, modes[mi].dt, modes[mi].strict, &B, &r);
				base[mi][k] = r.best_ms;
				char extra[160] = "";
				// Unfused cost of the same work: the plain conv of this mode + passes.
				float unf = -1;
				if (k == G_PRO && base[mi][G_CONV] >= 0)
					unf = base[mi][G_CONV] + t_bnrelu;
				if (k == G_EPI && base[mi][G_CONV] >= 0)
					unf = base[mi][G_CONV] + t_addrelu;
				if (k == G_STATS && base[mi][G_CONV] >= 0)
					unf = base[mi][G_CONV] + t_stats;
				if (k == G_PROSTATS && base[mi][G_CONV] >= 0)
					unf = base[mi][G_CONV] + t_bnrelu + t_stats;
				if (k == G_DGRAD_DRELU && base[mi][G_DGRAD] >= 0)
					unf = base[mi][G_DGRAD] + t_mask;
				if (k == G_WGRAD_PRO && base[mi][G_WGRAD] >= 0)
					unf = base[mi][G_WGRAD] + t_bnrelu;
				if (unf >= 0 && r.best_ms >= 0)
					snprintf(extra, sizeof extra, "  unfused %.3f ms -> %.2fx", unf, unf / r.best_ms);
				// Check the fp32 fused results against the unfused ones.
				if (r.plan && modes[mi].dt == CUDNN_DATA_FLOAT && k != G_CONV && k != G_DGRAD && k != G_WGRAD) {
					Res ref;
					int rk = k == G_DGRAD_DRELU ? G_DGRAD : k == G_WGRAD_PRO ? G_WGRAD : G_CONV;
					double e = -1;
					if (k == G_PRO || k == G_PROSTATS || k == G_WGRAD_PRO) {
						run_plan(&r, &B); // y or dw from relu(x s + b)
						float *keep = rk == G_WGRAD ? B.dw : B.y;
						CK(cudaMemcpy(B.t2, keep, (rk == G_WGRAD ? sh->k * sh->c * sh->r * sh->r : ny) * 4, cudaMemcpyDeviceToDevice));
						// reference: conv on x' = relu(x s + b) written to x
						CK(cudaMemcpy(B.xr, B.x, nx * 4, cudaMemcpyDeviceToDevice));
						k_bnrelu<<<GRID, BLK>>>(B.xr, B.s, B.b, B.x, nx, sh->c);
						probe(rk, sh, modes[mi].dt, modes[mi].strict, &B, &ref);
						if (ref.plan) {
							run_plan(&ref, &B);
							e = relerr(B.t2, keep, rk == G_WGRAD ? sh->k * sh->c * sh->r * sh->r : ny);
							cudnnBackendDestroyDescriptor(ref.plan);
						}
						CK(cudaMemcpy(B.x, B.xr, nx * 4, cudaMemcpyDeviceToDevice));
					} else if (k == G_EPI) {
						run_plan(&r, &B);
						CK(cudaMemcpy(B.t2, B.y, ny * 4, cudaMemcpyDeviceToDevice));
						probe(G_CONV, sh, modes[mi].dt, modes[mi].strict, &B, &ref);
						if (ref.plan) {
							run_plan(&ref, &B);
							k_addrelu<<<GRID, BLK>>>(B.y, B.z, B.t1, ny);
							e = relerr(B.t2, B.t1, ny);
							cudnnBackendDestroyDescriptor(ref.plan);
						}
					} else if (k == G_DGRAD_DRELU) {
						run_plan(&r, &B);
						CK(cudaMemcpy(B.t2, B.dx, nx * 4, cudaMemcpyDeviceToDevice));
						probe(G_DGRAD, sh, modes[mi].dt, modes[mi].strict, &B, &ref);
						if (ref.plan) {
							run_plan(&ref, &B);
							k_mask<<<GRID, BLK>>>(B.dx, B.x, B.t1, nx);
							e = relerr(B.t2, B.t1, nx);
							cudnnBackendDestroyDescriptor(ref.plan);
						}
					}
					if (k == G_STATS || k == G_PROSTATS) {
						// sums of the y the fused plan wrote vs double sums of it
						CK(cudaMemset(B.sum, 0, 4096 * 8));
						CK(cudaMemset(B.sq, 0, 4096 * 8));
						run_plan(&r, &B); // writes y (float sums into B.sum/B.sq as float)
						float hs[1024], hq[1024];
						double ds[1024], dq[1024];
						CK(cudaMemcpy(hs, B.sum, sh->k * 4, cudaMemcpyDeviceToHost));
						CK(cudaMemcpy(hq, B.sq, sh->k * 4, cudaMemcpyDeviceToHost));
						double *dsum = (double *)B.t1, *dsq = (double *)B.t1 + 4096;
						CK(cudaMemset(dsum, 0, 8192 * 8));
						k_stats<<<sg, 64>>>(B.y, dsum, dsq, (long)sh->n * oh * ow, sh->k);
						CK(cudaMemcpy(ds, dsum, sh->k * 8, cudaMemcpyDeviceToHost));
						CK(cudaMemcpy(dq, dsq, sh->k * 8, cudaMemcpyDeviceToHost));
						double es = 0, eq = 0, ms = 0, mq = 0;
						for (int c = 0; c < sh->k; c++) {
							es = fmax(es, fabs(hs[c] - ds[c]));
							eq = fmax(eq, fabs(hq[c] - dq[c]));
							ms = fmax(ms, fabs(ds[c]));
							mq = fmax(mq, fabs(dq[c]));
						}
						snprintf(extra + strlen(extra), sizeof extra - strlen(extra), "  sum err %.1e sq err %.1e",
						         ms > 0 ? es / ms : es, mq > 0 ? eq / mq : eq);
					}
					if (e >= 0)
						snprintf(extra + strlen(extra), sizeof extra - strlen(extra), "  err %.1e", e);
				}
				printf("   %-11s %-10s offered %2d finalized %2d ran %d  best %8.3f ms  %-22s build %.1fs%s\n",
				       gname[k], modes[mi].n, r.offered, r.finalized, r.suitable, r.best_ms, r.eng, r.build_s, extra);
				fflush(stdout);
				if (r.plan)
					cudnnBackendDestroyDescriptor(r.plan);
			}
		}
	}
	printf("\ntotal %.0fs\n", now() - T0);
	cudnnDestroy(H);
	return 0;
}
