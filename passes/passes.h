// passes/passes.h -- graph transforms: automatic differentiation and the
// builders they share.
//
// Transforms are `Graph *pass_<name>(const Graph *in, ...)`: they build a
// new graph through the builder (ir_emit) and a NodeId map from old to new
// ids, so the topological-id invariant holds by construction and the old
// graph stays available for dumps.  A user-level failure (a derivative
// asked through a non-differentiable op) returns NULL with a message that
// names the op and its source location.
#ifndef FADC_PASSES_H
#define FADC_PASSES_H

#include <stdio.h>

#include "ir.h"

// ---------------------------------------------------------------- build.c
// Builders with the peepholes that keep derived graphs small: x * 1 = x,
// x + 0 = x, x * 0 = 0 (zeros are real `full` nodes, never x * 0), and
// layout ops that do nothing are skipped.  Symbolic zeros are NodeId 0:
// b_add(g, 0, y) = y, b_mul(g, 0, y) = 0.
NodeId b_full(Graph *g, double v, DType dt, const Shape *s, Loc loc);
NodeId b_full_like(Graph *g, double v, NodeId like, Loc loc);
int b_const_value(const Graph *g, NodeId n, double *v); // is n a `full`?
NodeId b_op1(Graph *g, int op, NodeId x, Loc loc);
NodeId b_op2(Graph *g, int op, NodeId x, NodeId y, Loc loc);
NodeId b_attr(Graph *g, int op, const NodeId *in, int nin, const Attrs *a, Loc loc);
NodeId b_add(Graph *g, NodeId x, NodeId y, Loc loc); // 0 is zero
NodeId b_sub(Graph *g, NodeId x, NodeId y, Loc loc);
NodeId b_mul(Graph *g, NodeId x, NodeId y, Loc loc);
NodeId b_neg(Graph *g, NodeId x, Loc loc);
NodeId b_reshape(Graph *g, NodeId x, const Shape *s, Loc loc);
NodeId b_broadcast(Graph *g, NodeId x, const Shape *s, Loc loc);
NodeId b_permute(Graph *g, NodeId x, const int64_t *perm, Loc loc);
NodeId b_sum(Graph *g, NodeId x, const int64_t *axes, int naxes, int keepdim, Loc loc);
NodeId b_cast(Graph *g, NodeId x, DType dt, Loc loc);
NodeId b_where(Graph *g, NodeId c, NodeId a, NodeId b, Loc loc);
NodeId b_matmul(Graph *g, NodeId a, NodeId b, Loc loc);
NodeId b_transpose_last(Graph *g, NodeId x, Loc loc); // swaps the last two axes
// Sums a value of shape `from` down to `to` (the transpose of broadcast).
NodeId b_unbroadcast(Graph *g, NodeId x, const Shape *to, Loc loc);

NodeId b_polygamma(Graph *g, int64_t n, NodeId x, Loc loc);
// Node n's attribute slots.
void b_attrs(const Graph *g, NodeId n, Attrs *a);

// Copies every input and node of src into dst (empty), filling map[]
// (src id -> dst id); subgraphs are copied too.  Outputs are not copied.
void b_copy_into(Graph *dst, const Graph *src, NodeId *map);
// Node n of src (not an input) emitted into dst, its operands through
// map[] and its attributes as they are (a scan's body index must name the
// same body in dst).
NodeId b_copy_node(Graph *dst, const Graph *src, NodeId n, const NodeId *map);

// ---------------------------------------------------------------- vjp.c
// dep[n]: node n depends on a param (through any operand); in arena a.
uint8_t *fill_param_deps(const Graph *f, Arena *a);

// Reverse mode.  The result computes f's outputs and, given a cotangent for
// each output (new IN_ARG inputs named "v.<output>"), the gradient of
// Σ_k <v_k, f_k> with respect to each param (outputs "grad.<param>", in
// param order; a param f does not depend on gets zeros).
// On a user-level error (a derivative through a non-differentiable op)
// returns NULL, with the message in err and the op's location in *errloc.
Graph *pass_vjp(const Graph *f, Loc *errloc, char *err, size_t errlen);
// outs[k] chooses which of f's outputs get a cotangent (NULL: every float
// output); ones uses the constant 1 instead of inputs (gradients).
Graph *pass_vjp_ex(const Graph *f, const uint8_t *outs, int ones, Loc *errloc, char *err,
                   size_t errlen);

// ---------------------------------------------------------------- jvp.c
// Forward mode.  The result takes a tangent for each param (IN_ARG inputs
// "t.<param>") and computes f's outputs and their tangents J t (outputs
// "jvp.<output>").
Graph *pass_jvp(const Graph *f, Loc *errloc, char *err, size_t errlen);

// ---------------------------------------------------------------- scan.c
// Derivatives of scan node `self` of f, built into g (map: f id -> g id).
// scan_jvp: from the operands' tangents opt[] (0 = zero), a scan of the
// body's jvp; returns the tangents of the tuple's values (0 = zero).
// scan_vjp: from the tuple values' adjoints compadj[] (NULL or 0 = zero),
// a forward scan saving the carries and a reverse scan of the body's vjp;
// returns the operands' adjoints (0 = zero, also where !dep[operand]).
// Both return NULL with a message on failure.
NodeId *scan_jvp(Graph *g, const Graph *f, NodeId self, const NodeId *map, const NodeId *opt,
                 Loc *errloc, char *err, size_t errlen);
NodeId *scan_vjp(Graph *g, const Graph *f, NodeId self, const NodeId *map, const NodeId *compadj,
                 const uint8_t *dep, Loc *errloc, char *err, size_t errlen);

// ---------------------------------------------------------------- vmap.c
// Batching over a leading axis of size B for the inputs with batched[k]
// set: every output gains that axis (unbatched ones are broadcast).  With
// basis, those inputs are not inputs but the rows of the B x B identity
// split over them in order (B must be their total size).
Graph *pass_vmap(const Graph *f, const uint8_t *batched, int64_t B, int basis, Loc *errloc,
                 char *err, size_t errlen);
// The basis of a shard: the batched inputs are the columns of rows
// [lo, lo + B) of the N x N identity (N their total size), built as those
// rows (iota + lo == iota), so the graph is batched over B, not N.
// pass_vmap(f, bat, N, 1) is pass_vmap_rows(f, bat, 0, N, N).
Graph *pass_vmap_rows(const Graph *f, const uint8_t *batched, int64_t lo, int64_t B, int64_t N,
                      Loc *errloc, char *err, size_t errlen);
// The basis as nblk row blocks [lo[j], lo[j] + cnt[j]) in one graph: block
// j's outputs are j * f->nout + k, as pass_vmap_rows's; the nodes that no
// batched input reaches are built once for all blocks.
Graph *pass_vmap_blocks(const Graph *f, const uint8_t *batched, int nblk, const int64_t *lo,
                        const int64_t *cnt, int64_t N, Loc *errloc, char *err, size_t errlen);

// Value k of a tuple-valued node (a scan's carries, then its stacked
// outputs): get(scan, index=k), at loc.
NodeId scan_get(Graph *g, NodeId scan, int64_t k, Loc loc);

// ---------------------------------------------------------------- scan_hoist.c
// Every scan's work that does not depend on its carries, out of the loop:
// carry-independent products before it (new sequence or invariant
// operands), per-step outputs the carries do not need after it (batched
// over the stacked steps).  Counts the products moved (heavy ops: matmul,
// conv) into *st when not NULL.
typedef struct ScanHoistStats {
	uint32_t hoisted; // per-step products computed before their loop, batched
	uint32_t sunk; // per-step products computed after their loop, batched
	uint32_t invariant; // products of invariants computed once before their loop
	uint32_t carries; // carries out of their loop: accumulators summed after it, constants
} ScanHoistStats;
Graph *pass_scan_hoist(const Graph *g, ScanHoistStats *st);

// ---------------------------------------------------------------- simplify.c
Graph *pass_simplify(const Graph *g); // CSE, constant folding, identities, then DCE
Graph *pass_dce(const Graph *g); // keeps what the outputs reach, and the inputs

// ---------------------------------------------------------------- batch.c
// Is forward f separable over the batch that b declares (docs/IR.md,
// "batch"): does no op mix rows of the batch axis, except a mean or sum
// over it followed only by linear ops into the outputs, which are then
// such a mean or sum (the declared one) plus a part that does not depend
// on the batch?  1, or 0 with a message naming the first op that mixes
// rows and its location in *errloc.
int pass_batch_check(const Graph *f, const Batch *b, Loc *errloc, char *err, size_t errlen);

// ---------------------------------------------------------------- checks.c
// The run-time checks of data-dependent indices (take, take_along, their
// scatters, one_hot), appended to task graph g in place: one hidden output
// per index that is not provably in range, an i64[2] (min, max of the index
// over all elements), after the user's outputs.  Indices inside scan
// bodies are checked over every step (hoisted to the scan's operand, or a
// per-step output of the body).  Returns their number and what each
// checks (in g's arena); 0 when every index is proven in range.
typedef struct IndexCheck {
	uint32_t out; // g's output: (min, max) of the index
	NodeId index; // the index operand, or with steps a scan's stacked per-step (min, max)
	uint8_t steps; // index is an i64[T, 2]: a scan body's (min, max) at each step
	uint8_t in_scan; // the op is in a scan's body
	int64_t lo, end; // the valid range [lo, end) (end == lo: every index is out of range)
	const char *op; // "take_along"
	const char *name; // the input the index is (through layout ops), or NULL: computed
	Loc loc; // the op's location
	Loc index_loc; // where the index was computed
} IndexCheck;
uint32_t pass_index_checks(Graph *g, IndexCheck **checks);
// ---------------------------------------------------------------- tasks.c
// The tasks of torch.autograd.functional (docs/TASKS.md) as pipelines of
// passes over the forward graph.
typedef struct PassOpts {
	const char *print_after; // comma-separated pass names, or NULL
	int print_after_all;
	const char *stop_after; // pass name, or NULL
	FILE *dump; // where dumps and --stats go (stderr if NULL)
	int stats; // node counts after each pass
	int no_scan_hoist; // skip pass_scan_hoist (tests compare against the loop as derived)
} PassOpts;

extern const char *const fadc_tasks[]; // NULL-terminated: forward, vjp, ...
// Index into fadc_tasks, or -1; a shard `T:k/K` gives T's (malformed: -1).
int task_lookup(const char *name);
// Does task apply to forward f (its preconditions: a scalar forward for the
// second-order tasks, one float output for the Jacobians, Hessian blocks
// within IR_MAXDIM)?  1, or 0 with the reason in err (and its location).
int pass_task_check(const Graph *f, const char *task, Loc *errloc, char *err, size_t errlen);
// Builds task `task` from forward graph f.  NULL with a message (and a
// location when there is one) on error.  `task` may name a shard (below).
Graph *pass_task(const Graph *f, const char *task, const PassOpts *o, Loc *errloc, char *err,
                 size_t errlen);

// Shards of a batched task (docs/TASKS.md, "Shards"): `T:k/K` is shard k of
// K of task T (jacobian, jacrev of a non-scalar forward, jacfwd, the three
// Hessians), the same graph over the basis rows [lo, hi) of T's N basis
// vectors, lo = k q + min(k, r) (N = q K + r: the first r shards have one
// row more).  Its outputs are the slices of T's outputs that those rows
// write, each with T's output name; a slice no row of the shard writes is
// left out.  (`:` and not `@`: the name goes into symbol names of the
// artifact, where the linker reads `@` as a symbol version.)
//
// `T:k/K:w0+w1+...+wK-1` is shard k of an uneven split: shard i gets the
// share w_i / (w_0 + ... + w_K-1) of the rows (task_shard_range_weighted),
// so that a GPU with more to do besides (a copy of its slices across
// NVLink, rows that cost more) can take fewer (docs/TASKS.md, "Shards").
#define TASK_MAX_SHARDS 64
#define TASK_MAX_WEIGHT 1000000
typedef struct TaskShardOut {
	const char *name; // T's output it is a slice of ("hessian.w.b")
	Shape full; // that output's shape in T
	// T's output viewed as [outer, mid, inner] (row-major), mid its basis
	// axis: the slice is [:, off .. off + cnt, :], outer cnt inner
	// elements in that order (its own shape: below).  hessian.<p>.<q>:
	// [1, numel p, numel q]; jacobian.<p> by jacrev (basis over the
	// output): [1, numel out, numel p]; by jacfwd: [numel out, numel p, 1].
	int64_t outer, mid, inner, off, cnt;
	int64_t row; // its first row in the shard's batch: off + (p's first basis row) - lo
	int32_t p, q; // the params (declaration order) of the block; q -1 for a Jacobian
} TaskShardOut;
// The slice's own shape (the shard graph's output): hessian.<p>.<q> is
// [cnt] + q.shape, jacobian.<p> by jacrev [cnt] + p.shape, by jacfwd
// out.shape + [cnt]: the basis axes of p (or of the output) flattened to
// the cnt rows, the others as in T.
typedef struct TaskShard {
	int task; // T, an index of fadc_tasks
	int k, n; // shard k of n
	int64_t lo, hi, total; // basis rows [lo, hi) of total
	uint32_t nout;
	TaskShardOut *out; // in the shard task's output order
} TaskShard;
// Parses `T:k/K`: 1 (a shard name: *task, *k, *n set), 0 (no ':': not one),
// -1 (malformed: an unknown T, k or K not decimal, with a sign or a leading
// zero, k >= K, K above TASK_MAX_SHARDS; the message in err).
int task_shard_parse(const char *name, int *task, int *k, int *n, char *err, size_t errlen);
// Rows [*lo, *hi) of shard k of n over total basis vectors.
void task_shard_range(int64_t total, int k, int n, int64_t *lo, int64_t *hi);
// The same for weights w[0..n) (each 1 .. TASK_MAX_WEIGHT): shard k starts
// at floor(total (w_0 + ... + w_k-1) / (w_0 + ... + w_n-1)); 0 when it gets
// no row.
int task_shard_range_weighted(int64_t total, int k, int n, const int64_t *w, int64_t *lo,
                              int64_t *hi);
// The shard's layout for forward f (strings and out in arena a), after T's
// preconditions (pass_task_check); 0 with a message when `name` is no
// shard, T is not batched for f (vjp, or the Jacobian of a scalar forward:
// one row) or has fewer basis vectors than shards.
int task_shard_layout(const Graph *f, const char *name, Arena *a, TaskShard *s, Loc *errloc,
                      char *err, size_t errlen);
// How many basis vectors task T (an index of fadc_tasks) runs over for f:
// 0 when it is not batched.
int64_t task_basis_size(const Graph *f, int task);

#endif
