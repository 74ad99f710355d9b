// tests/unit/test_codegen_scan.c -- scan compiled for the CPU (a loop over
// its body's kernels, codegen/lower.c kernel_scan) against the float64
// interpreter, every task (forward, vjp, jvp, vhp, hvp, jacobians and the
// three Hessians: forward scans, forward scans saving carries, reverse
// scans of the body's vjp, jvp scans and vmap's batched scans).
//
// The modules are those of tests/unit/test_scandiff.c (whose derivatives
// are checked there against finite differences: one and two carries,
// reverse, masks, invariants, a nested scan, a CTC-like recursion) plus
// one for the lowering's corner cases.  Each runs twice: in f64, where the
// compiled code does the interpreter's arithmetic in the interpreter's
// order, so the normalized error must stay below 1e-12 (measured 0 to
// ~1e-15); and rewritten to f32, computing in f32, below 1e-5 (measured
// <= 5.3e-7).
//
// Each module's forward, vjp, jvp, hvp and jacobian (f32) are also
// printed as CUDA C, and with the CUDA toolkit compiled by NVRTC (no GPU
// needed; the printer's checks run without the toolkit too): the small scans become
// loops inside the fused one-block kernel (a `for` over the step counter,
// a barrier after each kernel), and tests/gpu/scan-persist.ir's, too large
// to fuse, one persistent kernel per outermost loop with grid barriers
// (docs/CUDA.md).  On a GPU, gpu_check runs the same modules
// (tests/gpu/device/payload.sh writes them with `test_codegen_scan
// --write DIR`).
#include <stdlib.h>
#include <string.h>

#include "codegen_util.h"
#include "scan_modules.h"
#include "../../codegen/cuda_sched.h" // Tile, cuda_loop_tile: the resident slots' budget

static const char lstm[] =
    "param wx: f64[2, 8] = normal(0, 0.4, seed=4)\n"
    "param wh: f64[2, 8] = normal(0, 0.4, seed=5)\n"
    "const xs: f64[4, 3, 2] = normal(0, 1, seed=6)\n"
    "const lens: f64[3, 1] = full(3) - iota(shape=[3, 1], axis=0, dtype=f64)\n"
    "const mask: bool[4, 3, 1] = cast(iota(shape=[4, 3, 1], axis=0, dtype=f64), dtype=f64) < "
    "broadcast(lens, shape=[4, 3, 1])\n"
    "def lstm_step(h: f64[3, 2], c: f64[3, 2], x: f64[3, 2], m: bool[3, 1], wx: f64[2, 8], wh: "
    "f64[2, 8]) -> (f64[3, 2], f64[3, 2], f64[3, 2]) {\n"
    "  z = x @ wx + h @ wh\n"
    "  i = sigmoid(z[:, 0:2])\n  f = sigmoid(z[:, 2:4])\n  g = tanh(z[:, 4:6])\n  o = sigmoid(z[:, 6:8])\n"
    "  c2 = f * c + i * g\n  h2 = o * tanh(c2)\n"
    "  return where(m, h2, h), where(m, c2, c), where(m, h2, 0.0)\n}\n"
    "def forward() {\n"
    "  h, c, ys = scan(lstm_step, zeros([3, 2], f64), zeros([3, 2], f64), xs, mask, wx, wh, ncarry=2, "
    "nxs=2)\n"
    "  return sum(ys * ys) + sum(h) + sum(c * c)\n}\n";

static const char nested[] =
    "param w: f64[2] = uniform(0.3, 0.8, seed=7)\n"
    "param xs: f64[3, 4, 2] = normal(0, 0.5, seed=8)\n"
    "def inner(c: f64[2], x: f64[2], w: f64[2]) -> (f64[2], f64[2]) {\n  n = tanh(c * w + x)\n  "
    "return n, n\n}\n"
    "def outer(c: f64[2], x: f64[4, 2], w: f64[2]) -> (f64[2], f64[2]) {\n"
    "  c2, ys = scan(inner, c, x, w, ncarry=1, nxs=1)\n  return c2 * w, sum(ys, 0)\n}\n"
    "def forward() {\n  c, ys = scan(outer, w, xs, w, ncarry=1, nxs=1)\n  return sum(c) + sum(ys * "
    "ys)\n}\n";

static const char ctc[] =
    "param logits: f64[5, 2, 3] = normal(0, 1, seed=9)\n"
    "const mask: bool[5, 2, 1] = iota(shape=[5, 2, 1], axis=0, dtype=f64) < broadcast(4 + "
    "iota(shape=[2, 1], axis=0, dtype=f64), shape=[5, 2, 1])\n"
    "def alpha(a: f64[2, 3], lp: f64[2, 3], m: bool[2, 1]) -> (f64[2, 3]) {\n"
    "  prev = pad(a[:, 0:2], before=[0, 1], after=[0, 0], value=-1e30)\n"
    "  both = concat(unsqueeze(a, 2), unsqueeze(prev, 2), axis=2)\n"
    "  n = logsumexp(both, 2) + lp\n"
    "  return where(m, n, a)\n}\n"
    "def forward() {\n"
    "  lp = log_softmax(logits, 2)\n"
    "  a0 = pad(zeros([2, 1], f64), before=[0, 0], after=[0, 2], value=-1e30)\n"
    "  a = scan(alpha, a0, lp, mask, ncarry=1, nxs=2)\n"
    "  return -sum(logsumexp(get(a, index=0), 1))\n}\n";

// The lowering's corner cases: a sequence that is a view (a permute,
// materialized for the body), an invariant that is an expression, a carry
// passed through unchanged, a scalar per-step output, a reduction and a
// matmul in the body (written to a temporary, then copied into the
// stacked output at the step's offset), a bool sequence, and a scan of
// length 0 (the carries come out as they went in, the outputs are empty).
static const char corners[] =
    "param w: f64[3] = uniform(0.2, 0.9, seed=1)\n"
    "param xt: f64[3, 4] = normal(0, 0.5, seed=3)\n"
    "param m2: f64[3, 3] = normal(0, 0.5, seed=4)\n"
    "def cell(a: f64[3], b: f64[3], x: f64[3], m: bool[3], k: f64[3], mm: f64[3, 3]) -> (f64[3], "
    "f64[3], f64[], f64[3]) {\n"
    "  n = where(m, a * k + x, a)\n"
    "  return n, b, sum(n * b), reshape(reshape(n, [1, 3]) @ mm, [3])\n}\n"
    "def empty(c: f64[3], x: f64[3]) -> (f64[3], f64[3]) {\n  return c * x, c + x\n}\n"
    "def forward() {\n"
    "  mask = iota(shape=[4, 3], axis=0) + iota(shape=[4, 3], axis=1) < 5\n"
    "  a, b, s, v = scan(cell, w, w * 2, transpose(xt, 0, 1), mask, exp(w), m2, ncarry=2, nxs=2)\n"
    "  e, es = scan(empty, w, zeros([0, 3], f64), ncarry=1, nxs=1)\n"
    "  return sum(a * b) + sum(s * s) + sum(v) + sum(e * w) + sum(es)\n}\n";

static void
check(const char *name, const char *src, int f32)
{
	char *text = f32 ? cgu_to_f32(src) : strdup(src);
	Module *m = cgu_parse(name, text);
	if (!m) {
		free(text);
		return;
	}
	static const char *const all[] = {"all"};
	CgOptions o = {.tasks = all, .ntasks = 1, .opt_level = 1};
	CgCheck c = {f32 ? 1e-5 : 1e-12, 1e-6, 0, 0};
	char label[256];
	snprintf(label, sizeof label, "%s (%s)", name, f32 ? "f32" : "f64");
	cgu_check(m, &o, &c, name, label);
	ir_module_free(m);
	free(text);
}

static int
count(const char *s, const char *pat)
{
	int n = 0;
	for (const char *q = strstr(s, pat); q; q = strstr(q + 1, pat))
		n++;
	return n;
}

// Tasks forward, vjp, jvp, hvp and jacobian (vmap's batched scans) of
// module text src (fast: the first three) printed as CUDA C and compiled
// to an sm_90 cubin; returns how many launches were persistent loop
// kernels.
static int
check_cuda(const char *name, const char *text, int fast)
{
	Module *m = cgu_parse(name, text);
	if (!m)
		return 0;
	int npersist = 0;
	for (int t = 0; fadc_tasks[t]; t++) {
		const char *task = fadc_tasks[t];
		// Every kind of derived scan, at a modest NVRTC time: forward, vjp
		// (saving and reverse scans), jvp, and hvp (jvp over vjp, nested
		// derived scans) or, for the large module, none past jvp.
		if (strcmp(task, "forward") && strcmp(task, "vjp") && strcmp(task, "jvp") &&
		    (fast || strcmp(task, "hvp")) && (fast || strcmp(task, "jacobian")))
			continue;
		char err[4096] = "";
		int derived;
		KProgram *p = cgu_lower_task(m, task, DT_F32, &derived, err, sizeof err);
		if (!derived)
			continue; // a task the module has not (vhp of a non-scalar, ...)
		CHECK(p != NULL);
		if (!p) {
			fprintf(stderr, "%s %s: %s\n", name, task, err);
			continue;
		}
		size_t n1 = 0, n2 = 0;
		char *src = cg_cuda_print(p, &n1, err, sizeof err);
		char *again = cg_cuda_print(p, &n2, err, sizeof err);
		CHECK(src != NULL && again != NULL);
		if (!src || !again) {
			fprintf(stderr, "%s %s: %s\n", name, task, err);
			free(src);
			free(again);
			kir_program_free(p);
			continue;
		}
		CHECK(n1 == n2 && !memcmp(src, again, n1));
		// One __global__ per launch but cuBLAS GEMMs (scan-persist's vjp:
		// the weight's adjoint, hoisted out of the reverse scan as one
		// product over the steps); every non-empty loop printed as a `for`
		// over its step counter.
		uint32_t nl = cg_cuda_launches(p), nloops = 0, ngemm = 0;
		for (uint32_t li = 0; li < nl; li++) {
			CgCudaKernel k;
			if (cg_cuda_kernel(p, li, &k)) {
				ngemm += k.gemm || k.choice; // a choice record has no kernel either
				free(k.name);
				free(k.buf);
			}
		}
		CHECK(count(src, "__global__") == (int)(nl - ngemm));
		for (uint32_t l = 0; l < p->nloop; l++)
			nloops += p->loop[l].end > p->loop[l].begin;
		CHECK(count(src, "for (long long s") == (int)nloops);
		for (uint32_t li = 0; li < nl; li++) {
			CgCudaKernel k;
			CHECK(cg_cuda_kernel(p, li, &k) && (k.gemm || k.choice || strstr(src, k.name) != NULL));
			if (strstr(k.name, "_loop")) {
				npersist++;
				CHECK(k.grid >= 1 && k.grid <= 256);
			}
			free(k.name);
			free(k.buf);
		}
		if (nl == 1 && p->nk > 1)
			CHECK(count(src, "fadc_grid_sync(nb);") == 0);
		if (!strcmp(name, "scan-resident")) {
			// h @ W: 64 tiles of 512 terms, a 64 KB slot each and the 3
			// rows staged (6 KB); dz @ Wᵀ (vjp): 16 tiles of 2048 terms
			// in two chunks of 128 KB (+ 12 KB of rows); jvp's tangent
			// loop reads h_t from the primal scan (passes/scan.c,
			// "Fission"): its one recurrent product ḣ W gets the one slot
			// (before: h W and ḣ W two slots, 140 KB, and h Ẇ in the
			// row-group form).
			CHECK(count(src, "const bool res = fadc_nb() >= 64U && fadc_dsm_bytes() >= 71680U;") >= 1);
			CHECK(count(src, "__syncthreads(); // the rows staged") >= 1);
			if (!strcmp(task, "vjp") || !strcmp(task, "vhp") || !strcmp(task, "hvp"))
				CHECK(count(src, "const bool res = fadc_nb() >= 32U && fadc_dsm_bytes() >= 143360U;") >= 1 &&
				      count(src, "fadc_w0[(r - kc * 1024LL) * 32 + lane]") >= 1 &&
				      count(src, "fadc_h0[1024LL + (r - kc * 1024LL)]") >= 1);
			if (!strcmp(task, "jvp"))
				CHECK(count(src, "_dsmem = 143360U;") == 0 && count(src, "_dsmem = 71680U;") >= 2);
			for (uint32_t ki = 0; ki < p->nk; ki++) {
				Tile tl;
				if (cuda_loop_tile(p, &p->k[ki], &tl) && tl.nres)
					CHECK(tl.res_off + tl.res_bytes + tl.stage_bytes <= 200 * 1024 && tl.units <= 128);
			}
		}
		if (!strcmp(name, "scan-tile")) {
			// h @ w and (vjp) dz @ wᵀ tiled; wᵀ is an invariant of the
			// reverse scan, not copied per step; fewer barriers than kernels.
			uint32_t inl = 0;
			for (uint32_t l = 0; l < p->nloop; l++)
				inl += p->loop[l].end - p->loop[l].begin;
			CHECK(count(src, "fadc_tile_red[") == 1);
			CHECK(count(src, "fadc_grid_sync(nb);") < (int)inl);
			if (getenv("FADC_CUDA_NO_RESIDENT")) {
				CHECK(count(src, "red[warp][4][lane] = acc4;") >= (strcmp(task, "vjp") ? 1 : 2));
				CHECK(count(src, "fadc_dsm_bytes() >=") == 0 && count(src, "_dsmem = ") == 0);
				// vjp's dz @ wᵀ: 20 tiles of 1200 terms, split in two chunks.
				if (!strcmp(task, "vjp"))
					CHECK(count(src, "fadc_tile_part[") == 1 &&
					      count(src, "part[2700LL + t]") == 1);
			} else {
				// Resident weights: all 9 rows a tile, w (38 tiles of 300
				// terms) and wᵀ (10 tiles of 1200 terms) in shared memory,
				// each filled once before its loop; no split.
				CHECK(count(src, "red[warp][8][lane] = acc8;") >= (strcmp(task, "vjp") ? 1 : 2));
				// Slots: w 38,400 bytes and the 9 rows of 300 terms
				// staged beside it (10,800); wᵀ 153,600 and 43,200.
				CHECK(count(src, "fadc_dsm_bytes() >= 49200U") >= 1);
				if (!strcmp(task, "vjp"))
					CHECK(count(src, "fadc_dsm_bytes() >= 196800U") == 1 &&
					      count(src, "fadc_tile_part[") == 0);
				CHECK(count(src, "__syncthreads(); // the rows staged") >= 1);
				CHECK(count(src, ", 1);\n\t__syncthreads(); // the resident loads") >= 1);
			}
			for (uint32_t l = 0; l < p->nloop; l++)
				for (uint32_t ki = p->loop[l].begin; ki < p->loop[l].end; ki++) {
					int64_t npt = 1;
					for (int d = 0; d < p->k[ki].rank; d++)
						npt *= p->k[ki].dim[d];
					CHECK(npt < 300 * 1200); // no copy of w or wᵀ per step
				}
		}
		int ok = 1;
#ifdef FADC_HAVE_CUDA
		uint8_t *cubin = NULL;
		size_t ncubin = 0;
		char cu[256];
		snprintf(cu, sizeof cu, "%s_%s.cu", name, task);
		ok = cg_cuda_compile(src, cu, "sm_90", &cubin, &ncubin, stderr, err, sizeof err);
		CHECK(ok && ncubin > 4 && !memcmp(cubin, "\177ELF", 4));
		if (!ok)
			fprintf(stderr, "%s %s: %s\n", name, task, err);
		free(cubin);
#endif
		printf("%s %s: %u kernels, %u loops, %u launches%s\n", name, task, p->nk, p->nloop, nl,
		       ok ? "" : " FAILED");
		free(src);
		free(again);
		kir_program_free(p);
	}
	ir_module_free(m);
	return npersist;
}

static char *
read_text(const char *path)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	fseek(f, 0, SEEK_SET);
	char *s = malloc((size_t)n + 1);
	if (s && fread(s, 1, (size_t)n, f) != (size_t)n) {
		free(s);
		s = NULL;
	}
	if (s)
		s[n] = 0;
	fclose(f);
	return s;
}

static const struct {
	const char *name, *src;
} mods[] = {{"rnn", rnn},       {"rnn-reverse", rnn_reverse}, {"lstm-masked", lstm},
            {"nested", nested}, {"ctc-alpha", ctc},           {"corners", corners},
            {"matrnn", matrnn}};
enum { NMOD = sizeof mods / sizeof mods[0] };

int
main(int argc, char **argv)
{
	// --write DIR: the modules in f32 as DIR/scan-NAME.ir (for gpu_check).
	if (argc == 3 && !strcmp(argv[1], "--write")) {
		for (int i = 0; i < NMOD; i++) {
			char path[4096];
			snprintf(path, sizeof path, "%s/scan-%s.ir", argv[2], mods[i].name);
			char *text = cgu_to_f32(mods[i].src);
			FILE *f = fopen(path, "w");
			if (!f || fputs(text, f) < 0 || fclose(f)) {
				fprintf(stderr, "test_codegen_scan: cannot write %s\n", path);
				return 1;
			}
			free(text);
		}
		return 0;
	}
	for (int i = 0; i < NMOD; i++)
		for (int f32 = 0; f32 < 2; f32++)
			check(mods[i].name, mods[i].src, f32);
	int npersist = 0;
	for (int i = 0; i < NMOD; i++) {
		char *text = cgu_to_f32(mods[i].src);
		npersist += check_cuda(mods[i].name, text, 0);
		free(text);
	}
	CHECK(npersist == 0); // small scans: every task one fused kernel
	const char *dir = getenv("FADC_SOURCE_DIR");
	char path[4096];
	snprintf(path, sizeof path, "%s/tests/gpu/scan-persist.ir", dir ? dir : ".");
	char *big = read_text(path);
	CHECK(big != NULL);
	if (big)
		CHECK(check_cuda("scan-persist", big, 1) >= 4); // forward, vjp, jvp: 2 loops or more each
	free(big);
	// Per-step products as tiles (codegen/cuda_sched.c, cuda_loop_tile),
	// with short row groups and columns past a multiple of 32, few tiles
	// split along their terms; independent kernels of a loop's step between
	// the same two grid barriers (cuda_grid_barriers).
	snprintf(path, sizeof path, "%s/tests/gpu/scan-tile.ir", dir ? dir : ".");
	big = read_text(path);
	CHECK(big != NULL);
	if (big)
		CHECK(check_cuda("scan-tile", big, 1) >= 4);
	// The same without resident weights (FADC_CUDA_NO_RESIDENT): row
	// groups of 5 and the split reverse product.
	setenv("FADC_CUDA_NO_RESIDENT", "1", 1);
	if (big)
		CHECK(check_cuda("scan-tile", big, 1) >= 4);
	unsetenv("FADC_CUDA_NO_RESIDENT");
	free(big);
	// Resident weights (cuda_sched.c, TILE_RES_*): split when a column
	// tile's terms pass a slot, several slots in one loop, and a product
	// that no longer fits taking the row-group form (scan-resident's
	// header; gpu_check runs it on the GPU).
	snprintf(path, sizeof path, "%s/tests/gpu/scan-resident.ir", dir ? dir : ".");
	big = read_text(path);
	CHECK(big != NULL);
	if (big)
		CHECK(check_cuda("scan-resident", big, 1) >= 4);
	free(big);
	return TU_DONE("test_codegen_scan");
}
