// runtime/cugraph.c -- CUDA graphs and graph trees: a task's runs
// recorded, replayed and re-recorded, one tree of recordings per context.
//
// CUDA graphs and graph trees (docs/CUDA.md): a task's first run launches
// its kernels eagerly (the module is loaded and the kernels resolved
// outside any capture, the warm-up); later runs are recorded into CUDA
// graphs (cuStreamBeginCapture in thread-local mode, the same launches,
// cuStreamEndCapture, instantiate) and replayed (cuGraphLaunch).
//
// The recordings of a context form one tree, as PyTorch's graph trees do:
// a node is one recording of one task in one state: its parent (the call
// before it in this generation), and the argument values its kernel nodes
// hold (every device address and the run seed: the key).  A call looks for
// a child of the current node with its task and its key: found, the graph
// is replayed; not found, one is recorded and becomes that child.  The key
// carries the whole state that matters to a graph: where the caller's
// outputs and the model-owned outputs were placed (runtime/rt.c places the
// latter clear of the outputs of earlier calls that are still alive, so
// liveness shows as other addresses), the declarations (static inputs,
// used in place), inputs that are outputs of earlier calls (in place), and
// the caller's other inputs.  Those are read in place while the caller
// keeps passing the same tensors (a copy would cost ~5 us per input per
// call, as much as the replay of a small task); where two recordings of a
// place in the tree differ from a call only in these inputs' addresses,
// the inputs move, and the call records a graph that reads the task's own
// staging buffers instead, copied there (cuMemcpyDtoDAsync) before each of
// its replays: one graph for every address from then on.  A task called
// again in the same generation starts a new one: the path goes back to the
// root (rtcu_task_begin).
//
// Declarations are keyed by address too: one bound by reference
// (fadc_model_bind_ref) to another tensor of the caller's misses every
// recording made for the old address (the memcmp of the key is the
// address check: a few pointer compares per replay) and is recorded
// again, beside them; binding the old tensor back replays its graph.  Each
// specialisation of an artifact (-D N=8,32) is a task of its own, so it
// has recordings of its own.
//
// A recording made where the tree already has one for the same task under
// the same parent (another state: moved outputs, released outputs, a
// parameter bound by reference to another tensor) is a re-record; past the context's re-record limit (64, or
// FADC_CUDA_GRAPH_RERECORD_LIMIT) a task runs eagerly with one warning.
// The graphs of every recording are kept until the task is freed (a model
// closed), which prunes its nodes and their subtrees.
// FADC_DISABLE_CUDA_GRAPHS=1 (read at rtcu_open) runs everything eagerly.
//
// A task's launches are a sequence: recording captures whatever
// rtcu_launch_all issues on the stream, so new kinds of launch records need no
// change here beyond their argument values joining the key (task_args).
//
// This file is the tree and rtcu_task_run, which walks it; the launches
// themselves (kernels, GEMMs, host steps, choices: rtcu_launch_all) are
// runtime/cuda.c's, the device memory runtime/cumem.c's.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_impl.h"

// ---------------------------------------------------------------- the graph tree

// Frees n's subtree (n included).
static void
node_free(RtCuda *c, Node *n)
{
	for (Node *ch = n->child, *next; ch; ch = next) {
		next = ch->next;
		node_free(c, ch);
	}
	if (n->exec)
		c->d.cuGraphExecDestroy(n->exec);
	free(n->key);
	free(n);
}

// Removes from n's subtree every node of task k, with its subtree (k NULL:
// every node); the path goes back to the root.
void
rtcu_tree_prune(RtCuda *c, Node *n, const RtCuTask *k)
{
	for (Node **p = &n->child; *p;) {
		Node *ch = *p;
		if (!k || ch->task == k) {
			*p = ch->next;
			node_free(c, ch);
		} else {
			rtcu_tree_prune(c, ch, k);
			p = &ch->next;
		}
	}
	c->cur = &c->root;
}

static size_t
tree_print(const Node *n, int depth, char *buf, size_t len, size_t at)
{
	for (const Node *ch = n->child; ch; ch = ch->next) {
		// A task of an artifact with specialisations says which: "forward
		// [N=8]" (each specialisation is a task of its own, recorded apart).
		const char *sp = ch->task->t->spec_name ? ch->task->t->spec_name : "";
		int w = snprintf(buf + (at < len ? at : len), at < len ? len - at : 0,
		                 "%*s%s%s%s%s: %llu replays\n", 2 * depth, "", ch->task->t->name,
		                 sp[0] ? " [" : "", sp, sp[0] ? "]" : "",
		                 (unsigned long long)ch->replays);
		at += w > 0 ? (size_t)w : 0;
		at = tree_print(ch, depth + 1, buf, len, at);
	}
	return at;
}

size_t
rtcu_graph_tree(const RtCuda *c, char *buf, size_t len)
{
	if (len)
		buf[0] = 0;
	return tree_print(&c->root, 0, buf, len, 0);
}

uint64_t
rtcu_task_begin(RtCuda *c, RtCuTask *k)
{
	if (k->gen == c->gen) {
		c->gen++;
		c->cur = &c->root;
	}
	k->gen = c->gen;
	return c->gen;
}

// ---------------------------------------------------------------- recording and replay

// Captures the task's launches into a graph; *g on success.
static int
capture(RtCuda *c, RtCuTask *k, CUgraph *g, char *err, size_t errlen)
{
	*g = NULL;
	CHECK_CU(c, cuStreamBeginCapture(c->stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
	char e2[512];
	int ok = rtcu_launch_all(c, k, 0, e2, sizeof e2);
	CUresult r = c->d.cuStreamEndCapture(c->stream, g);
	if (!ok) {
		if (*g)
			c->d.cuGraphDestroy(*g);
		*g = NULL;
		snprintf(err, errlen, "%s", e2);
		return 0;
	}
	if (r) {
		rtcu_msg(c, r, "cuStreamEndCapture(c->stream, g)", __func__, __FILE__, __LINE__, err,
		         errlen);
		return 0;
	}
	return 1;
}

// The argument values of this run into every kernel's val[] and, flattened,
// k->cur (the key); k->smask marks the slots of the caller's inputs that
// have a staging buffer.  stage: those read the staging buffers.  Returns
// the number of such slots.
static size_t
task_args(RtCuTask *k, const uint64_t *in, const uint8_t *staged, const uint64_t *out,
          uint64_t arena, uint64_t runseed, int stage)
{
	size_t q = 0, nstaged = 0;
	for (uint32_t i = 0; i < k->nk; i++) {
		Kern *kk = &k->k[i];
		const ArtKernel *a = kk->k;
		for (uint32_t j = 0; j < a->narg; j++) {
			const ArtKArg *x = &a->arg[j];
			uint32_t n = x->index;
			int st = x->kind == ART_ARG_INPUT && staged[n] && k->stage_at[n];
			kk->val[j] = st && stage ? k->stage_at[n]
			             : x->kind == ART_ARG_INPUT  ? in[n]
			             : x->kind == ART_ARG_OUTPUT ? out[n]
			                                         : arena + x->offset;
			k->smask[q + j] = (uint8_t)st;
			nstaged += st;
		}
		k->smask[q + a->narg] = 0;
		kk->val[a->narg] = runseed; // read only by kernels that take it
		memcpy(k->cur + q, kk->val, (a->narg + 1) * sizeof *kk->val);
		q += a->narg + 1;
	}
	return nstaged;
}

// The child of the current node for task k whose key is k->cur, or NULL.
static Node *
child_find(RtCuda *c, RtCuTask *k)
{
	for (Node *n = c->cur->child; n; n = n->next)
		if (n->task == k && !memcmp(n->key, k->cur, k->nkey * sizeof *k->cur))
			return n;
	return NULL;
}

// The caller's inputs into the task's own buffers, in stream order before
// the graph.
static int
stage_inputs(RtCuda *c, RtCuTask *k, const uint64_t *in, const uint8_t *staged, char *err,
             size_t errlen)
{
	for (uint32_t i = 0; i < k->t->nin; i++)
		if (staged[i] && k->stage_at[i] && in[i] != k->stage_at[i])
			CHECK_CU(c, cuMemcpyDtoDAsync(k->stage_at[i], in[i], k->stage_bytes[i], c->stream));
	return 1;
}

static int
task_run(RtCuda *c, RtCuTask *k, const uint64_t *in, const uint8_t *staged, const uint64_t *out,
         uint64_t arena, uint64_t runseed, char *err, size_t errlen)
{
	CHECK_CU(c, cuCtxSetCurrent(c->ctx));
	uint64_t run = ++k->runs;
	int graph = run > 1 && !c->no_graphs && !c->prof && !k->eager_only && k->nk;
	size_t nstaged = task_args(k, in, staged, out, arena, runseed, 0);
	if (!graph) {
		if (run == 1)
			c->st.eager++;
		else
			c->st.skipped++;
		c->cur = &c->root; // the path is broken: the next call starts at the root
		return rtcu_launch_all(c, k, 1, err, errlen);
	}
	// A child of the current node for this task in this state: replay it,
	// reading the caller's inputs in place, or else from the staging
	// buffers (a graph recorded for inputs that move).
	Node *n = child_find(c, k);
	if (!n && nstaged) {
		task_args(k, in, staged, out, arena, runseed, 1);
		if ((n = child_find(c, k)) && !stage_inputs(c, k, in, staged, err, errlen))
			return 0;
		if (!n)
			task_args(k, in, staged, out, arena, runseed, 0);
	}
	if (n) {
		CHECK_CU(c, cuGraphLaunch(n->exec, c->stream));
		n->replays++;
		c->st.replayed++;
		c->cur = n;
		return 1;
	}
	// Another state where the tree has one for this task: a re-record, up
	// to the limit.  Where two recordings here differ from this call only
	// in the addresses of the caller's inputs, those move: this one copies
	// them into the staging buffers, and serves any address from now on.
	int again = 0, moved = 0;
	for (Node *s = c->cur->child; s; s = s->next) {
		if (s->task != k)
			continue;
		again = 1;
		size_t q = 0;
		while (q < k->nkey && (k->smask[q] || s->key[q] == k->cur[q]))
			q++;
		moved += q == k->nkey && !s->staged;
	}
	if (again && k->rerecords >= c->rerecord_limit) {
		fprintf(stderr,
		        "fadc: warning: task '%s' was re-recorded %llu times (its tensors keep "
		        "moving); it runs without CUDA graphs from now on\n",
		        k->t->name, (unsigned long long)k->rerecords);
		k->eager_only = 1;
		c->st.skipped++;
		c->cur = &c->root;
		return rtcu_launch_all(c, k, 1, err, errlen);
	}
	int stage = moved >= 2;
	if (stage) {
		task_args(k, in, staged, out, arena, runseed, 1);
		if (!stage_inputs(c, k, in, staged, err, errlen))
			return 0;
	}
	n = calloc(1, sizeof *n);
	if (!n || !(n->key = malloc((k->nkey + 1) * sizeof *n->key))) {
		free(n);
		snprintf(err, errlen, "out of memory");
		return 0;
	}
	memcpy(n->key, k->cur, k->nkey * sizeof *k->cur);
	n->task = k;
	n->staged = stage;
	CUgraph g;
	if (!capture(c, k, &g, err, errlen)) {
		node_free(c, n);
		return 0;
	}
	CUresult r = c->d.cuGraphInstantiate(&n->exec, g, 0);
	c->d.cuGraphDestroy(g);
	if (r) {
		rtcu_msg(c, r, "cuGraphInstantiate(&n->exec, g, 0)", __func__, __FILE__, __LINE__,
		         err, errlen);
		n->exec = NULL;
		node_free(c, n);
		return 0;
	}
	// Linked last among its siblings: recording order.
	n->parent = c->cur;
	Node **p = &c->cur->child;
	while (*p)
		p = &(*p)->next;
	*p = n;
	if (again) {
		c->st.rerecorded++;
		k->rerecords++;
	} else
		c->st.recorded++;
	c->cur = n;
	CHECK_CU(c, cuGraphLaunch(n->exec, c->stream));
	return 1;
}

int
rtcu_task_run(RtCuda *c, RtCuTask *k, const uint64_t *in, const uint8_t *staged,
              const uint64_t *out, uint64_t arena, uint64_t runseed, char *err, size_t errlen)
{
	if (!task_run(c, k, in, staged, out, arena, runseed, err, errlen))
		return 0;
	// A task with index checks: the event its next check waits for (after
	// the graph or the launches, outside any capture).
	if (k->chk_ev)
		CHECK_CU(c, cuEventRecord(k->chk_ev, c->stream));
	return 1;
}

// ---------------------------------------------------------------- a caller's own capture
//
// The stream's work between rtcu_capture_begin and rtcu_capture_end made
// into an executable graph, replayed by rtcu_graph_launch: runtime/multi.c
// captures each GPU's all-reduce of the gradients (NCCL's collectives
// recorded into a graph, one per rank, all ranks captured in one group)
// with these, outside the graph tree (the tree knows nothing of NCCL).

int
rtcu_capture_begin(RtCuda *c, char *err, size_t errlen)
{
	CHECK_CU(c, cuCtxSetCurrent(c->ctx));
	CHECK_CU(c, cuStreamBeginCapture(c->stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
	return 1;
}

void *
rtcu_capture_end(RtCuda *c, int keep, char *err, size_t errlen)
{
	CUgraph g = NULL;
	CHECK_CU(c, cuCtxSetCurrent(c->ctx));
	CUresult r = c->d.cuStreamEndCapture(c->stream, &g);
	if (r)
		rtcu_msg(c, r, "cuStreamEndCapture(c->stream, &g)", __func__, __FILE__, __LINE__, err,
		         errlen);
	if ((r || !keep) && g) {
		c->d.cuGraphDestroy(g);
		g = NULL;
	}
	return g;
}

void *
rtcu_graph_instantiate(RtCuda *c, void *graph, char *err, size_t errlen)
{
	CUgraphExec e = NULL;
	CUresult r = c->d.cuCtxSetCurrent(c->ctx);
	if (!r && (r = c->d.cuGraphInstantiate(&e, (CUgraph)graph, 0))) {
		rtcu_msg(c, r, "cuGraphInstantiate(&e, graph, 0)", __func__, __FILE__, __LINE__, err,
		         errlen);
		e = NULL;
	} else if (r)
		rtcu_msg(c, r, "cuCtxSetCurrent(c->ctx)", __func__, __FILE__, __LINE__, err, errlen);
	c->d.cuGraphDestroy((CUgraph)graph); // the executable graph holds what it needs
	return e;
}

int
rtcu_graph_launch(RtCuda *c, void *exec, char *err, size_t errlen)
{
	CHECK_CU(c, cuCtxSetCurrent(c->ctx));
	CHECK_CU(c, cuGraphLaunch((CUgraphExec)exec, c->stream));
	return 1;
}

void
rtcu_graph_free(RtCuda *c, void *exec)
{
	if (exec && !c->d.cuCtxSetCurrent(c->ctx))
		c->d.cuGraphExecDestroy((CUgraphExec)exec);
}
