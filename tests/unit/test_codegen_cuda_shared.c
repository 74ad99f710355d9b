// tests/unit/test_codegen_cuda_shared.c -- equal CUDA kernels printed once
// (codegen/cuda.c, cg_cuda_print_shared; docs/CUDA.md, "Shared kernels").
//
// Without the toolkit: two kernels that differ only in the buffers they
// touch are shared, one that differs in its indexing is not, and a launch of
// a shared kernel names a function the source defines.  With NVRTC, the
// oracle is the compiler itself: for every kernel the printer shares, the
// PTX of its own function (from the unshared source) and the PTX of the
// function its launches call instead are the same text once the names are
// equal; and every launch of the shared source names an .entry of its PTX.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "artifact.h"
#include "codegen_util.h"

// The number of occurrences of s in t.
static int
count(const char *t, const char *s) {
	int n = 0;
	for (const char *q = strstr(t, s); q; q = strstr(q + 1, s))
		n++;
	return n;
}

// The launch name of kernel launch li of p as the artifact records it:
// cg_cuda_kernel's, or the function a shared kernel's launches call.
static char *
launch_name(const KProgram *p, uint32_t li, const CgCudaShared *sh, uint32_t nsh, int *kernel) {
	CgCudaKernel ck;
	CHECK(cg_cuda_kernel(p, li, &ck));
	free(ck.buf);
	*kernel = !ck.host && !ck.gemm && !ck.choice && !ck.seq && !ck.conv;
	for (uint32_t i = 0; i < nsh; i++)
		if (!strcmp(sh[i].name, ck.name)) {
			free(ck.name);
			return strdup(sh[i].as);
		}
	return ck.name;
}

// A source defines a function: "void\nNAME(" (cg_cuda_print's layout).
static int
defines(const char *src, const char *name) {
	char pat[512];
	snprintf(pat, sizeof pat, "void\n%s(", name);
	return strstr(src, pat) != NULL;
}

static void
check_small(void) {
	// Three reductions over 2^18 points (too much work for a fused task:
	// each its own __global__): u and v differ only in their parameter,
	// w in the axis it sums (its index arithmetic).
	const char *text = "param a: f32[512, 512] = normal(0, 1, seed=1)\n"
	                   "param b: f32[512, 512] = normal(0, 1, seed=2)\n"
	                   "param c: f32[512, 512] = normal(0, 1, seed=3)\n"
	                   "def forward() -> f32[512] {\n"
	                   "  u = sum(exp(a), axes=[1])\n"
	                   "  v = sum(exp(b), axes=[1])\n"
	                   "  w = sum(exp(c), axes=[0])\n"
	                   "  return u + v + w\n"
	                   "}\n";
	Module *m = cgu_parse("shared.ir", text);
	if (!m)
		return;
	char err[1024];
	KProgram *p = cgu_lower_task(m, "forward", DT_F32, NULL, err, sizeof err);
	CHECK(p != NULL);
	if (!p) {
		fprintf(stderr, "shared.ir: %s\n", err);
		ir_module_free(m);
		return;
	}
	CgCudaShared *sh = NULL;
	uint32_t nsh = 0;
	char *all = cg_cuda_print(p, NULL, err, sizeof err);
	char *src = cg_cuda_print_shared(p, NULL, &sh, &nsh, err, sizeof err);
	CHECK(all && src);
	int gall = count(all, "extern \"C\" __global__");
	int gsh = count(src, "extern \"C\" __global__");
	printf("small: %u kernels, %d functions unshared, %d shared, %u launches redirected\n",
	       p->nk, gall, gsh, nsh);
	// u's and v's reductions are one function; w's is its own.
	CHECK(nsh == 1 && gsh == gall - 1);
	CHECK(nsh == 1 && !defines(src, sh[0].name) && defines(src, sh[0].as) &&
	      defines(all, sh[0].name));
	CHECK(count(src, "// the function of kernel") == (int)nsh);
	// Printing twice gives the same bytes.
	CgCudaShared *sh2 = NULL;
	uint32_t nsh2 = 0;
	char *again = cg_cuda_print_shared(p, NULL, &sh2, &nsh2, err, sizeof err);
	CHECK(again && !strcmp(again, src) && nsh2 == nsh);
	cg_cuda_shared_free(sh2, nsh2);
	free(again);
	free(all);
	free(src);
	cg_cuda_shared_free(sh, nsh);
	kir_program_free(p);
	ir_module_free(m);
}

#ifdef FADC_HAVE_CUDA
// The PTX of .entry name in ptx, malloc'ed, NULL when there is none; with
// what depends on the function's name or place made equal: name itself
// (its parameters and statics are named after it) replaced by "@F", the
// length of a mangled name and the function's number in its labels.
static char *
entry_text(const char *ptx, const char *name) {
	char pat[512];
	snprintf(pat, sizeof pat, ".entry %s(", name);
	const char *s = strstr(ptx, pat);
	if (!s)
		return NULL;
	const char *e = strstr(s, "\n}\n");
	if (!e)
		return NULL;
	size_t n = (size_t)(e - s) + 3, nl = strlen(name);
	char *r = malloc(n + 1);
	size_t k = 0;
	for (size_t i = 0; i < n;)
		if (!strncmp(s + i, "$L__BB", 6)) { // labels are numbered per function: $L__BB16_2
			memcpy(r + k, "$L__BB#", 7);
			k += 7;
			i += 6;
			while (s[i] >= '0' && s[i] <= '9')
				i++;
		} else if (!strncmp(s + i, "_ZZ", 3) && s[i + 3] >= '0' && s[i + 3] <= '9') {
			// a static of the function, mangled with its name's length:
			// _ZZ21fadc_forward_k17_meanE3red
			memcpy(r + k, "_ZZ#", 4);
			k += 4;
			i += 3;
			while (s[i] >= '0' && s[i] <= '9')
				i++;
		} else if (!strncmp(s + i, name, nl)) {
			memcpy(r + k, "@F", 2);
			k += 2;
			i += nl;
		} else
			r[k++] = s[i++];
	r[k] = 0;
	return r;
}
#endif

// Task `task` of a zoo model: shared as the printer decides, checked
// against NVRTC's output (above).
static void
check_model_task(const char *file, const char *const *defs, int ndefs, const char *task) {
	const char *root = getenv("FADC_SOURCE_DIR");
	char path[4096], err[4096];
	snprintf(path, sizeof path, "%s/models/%s.ir", root ? root : ".", file);
	FeOptions fo = {.diag = stderr, .defines = defs, .ndefines = ndefs};
	Module *m = fe_parse_file(path, &fo);
	CHECK(m != NULL);
	if (!m)
		return;
	KProgram *p = cgu_lower_task(m, task, DT_F32, NULL, err, sizeof err);
	CHECK(p != NULL);
	if (!p) {
		fprintf(stderr, "%s %s: %s\n", file, task, err);
		ir_module_free(m);
		return;
	}
	CgCudaShared *sh = NULL;
	uint32_t nsh = 0;
	char *all = cg_cuda_print(p, NULL, err, sizeof err);
	char *src = cg_cuda_print_shared(p, NULL, &sh, &nsh, err, sizeof err);
	CHECK(all && src);
	if (!all || !src)
		goto done;
	printf("%s %s: %u kernels, %d functions unshared, %d shared\n", file, task, p->nk,
	       count(all, "extern \"C\" __global__"), count(src, "extern \"C\" __global__"));
	CHECK(nsh > 0); // these models repeat kernels
	uint32_t nl = cg_cuda_launches(p);
	for (uint32_t li = 0; li < nl; li++) {
		int kernel;
		char *name = launch_name(p, li, sh, nsh, &kernel);
		if (kernel && !defines(src, name)) {
			fprintf(stderr, "%s %s: launch %u calls %s, not in the source\n", file, task,
			        li, name);
			CHECK(0);
		}
		free(name);
	}
#ifdef FADC_HAVE_CUDA
	uint8_t *pa = NULL, *ps = NULL;
	size_t na = 0, ns = 0;
	CHECK(cg_cuda_compile(all, "unshared.cu", "compute_90", &pa, &na, stderr, err, sizeof err));
	CHECK(cg_cuda_compile(src, "shared.cu", "compute_90", &ps, &ns, stderr, err, sizeof err));
	if (pa && ps) {
		pa[na] = 0;
		ps[ns] = 0;
		CHECK(count((char *)ps, ".entry") == count(src, "extern \"C\" __global__"));
		int same = 0;
		for (uint32_t i = 0; i < nsh; i++) {
			char *a = entry_text((char *)pa, sh[i].name);
			char *b = entry_text((char *)pa, sh[i].as);
			CHECK(a && b);
			if (a && b && strcmp(a, b)) {
				fprintf(stderr, "%s %s: %s shares %s, but their PTX differs\n", file,
				        task, sh[i].name, sh[i].as);
				CHECK(0);
			} else
				same++;
			// The function it calls is in the shared program's PTX.
			char *c = entry_text((char *)ps, sh[i].as);
			CHECK(c && b && !strcmp(b, c));
			free(a);
			free(b);
			free(c);
		}
		printf("%s %s: %d shared kernels, each with its function's PTX\n", file, task, same);
	}
	free(pa);
	free(ps);
#endif
done:
	free(all);
	free(src);
	cg_cuda_shared_free(sh, nsh);
	kir_program_free(p);
	ir_module_free(m);
}

// A fused task (one block; its kernels __device__ functions its kernel
// calls): a chain's vjp repeats one adjoint per statement, which the
// fused kernel calls from one function; NVRTC compiles the source (a call
// of a function that is not there, or with other arguments, would fail).
static void
check_fused(void) {
	char text[4096] = "param x0: f32[64] = normal(0, 1, seed=1)\ndef forward() -> f32[] {\n";
	for (int i = 1; i <= 12; i++)
		snprintf(text + strlen(text), sizeof text - strlen(text),
		         "  x%d = sin(x%d) * 1.0001 + 0.5\n", i, i - 1);
	strcat(text, "  return sum(x12)\n}\n");
	Module *m = cgu_parse("chain12.ir", text);
	if (!m)
		return;
	char err[4096];
	KProgram *p = cgu_lower_task(m, "vjp", DT_F32, NULL, err, sizeof err);
	CHECK(p != NULL);
	if (!p) {
		fprintf(stderr, "chain12.ir: %s\n", err);
		ir_module_free(m);
		return;
	}
	CgCudaShared *sh = NULL;
	uint32_t nsh = 0;
	char *all = cg_cuda_print(p, NULL, err, sizeof err);
	char *src = cg_cuda_print_shared(p, NULL, &sh, &nsh, err, sizeof err);
	CHECK(all && src);
	int dall = all ? count(all, "static __device__ void\n") : 0;
	int dsh = src ? count(src, "static __device__ void\n") : 0;
	printf("chain12 vjp: fused %d, %u kernels, %d functions unshared, %d shared\n",
	       cg_cuda_launches(p) == 1, p->nk, dall, dsh);
	CHECK(cg_cuda_launches(p) == 1); // fused
	CHECK(nsh == 0); // no launch of its own
	CHECK(dsh > 0 && dsh < dall / 2);
#ifdef FADC_HAVE_CUDA
	uint8_t *cubin = NULL;
	size_t n = 0;
	CHECK(src &&
	      cg_cuda_compile(src, "chain12.cu", "sm_90", &cubin, &n, stderr, err, sizeof err));
	free(cubin);
#endif
	free(all);
	free(src);
	cg_cuda_shared_free(sh, nsh);
	kir_program_free(p);
	ir_module_free(m);
}

#ifdef FADC_HAVE_CUDA
// The PTX of .entry `name` in ptx (from ".entry NAME(" to its closing
// brace), its length in *len; NULL when absent.
static const char *
entry_ptx(const char *ptx, const char *name, size_t *len) {
	char pat[512];
	snprintf(pat, sizeof pat, ".entry %s(", name);
	const char *b = strstr(ptx, pat), *e = b ? strstr(b, "\n}\n") : NULL;
	if (!e)
		return NULL;
	*len = (size_t)(e - b) + 3;
	return b;
}

// p[0..n) with the numbers that count a function's place in its module
// dropped: its blocks' labels ($L__BB<f>_<b> -> $L__BB_<b>) and its stack
// (__local_depot<f>); and its name (`name`, in .entry and its parameters'
// names) as "@": a launch shared across tasks calls an earlier task's
// function (codegen/compile.c, "Sharing across tasks").  Malloc'ed.
static char *
ptx_unplaced(const char *p, size_t n, const char *name) {
	char *r = malloc(n + 1), *o = r;
	size_t nl = strlen(name);
	FADC_ASSERT(r != NULL, "out of memory");
	for (size_t i = 0; i < n;) {
		// A function-local static's mangled name: _ZZ<length of name><name>...
		size_t d = i + 3;
		while (nl && i + 3 <= n && !memcmp(p + i, "_ZZ", 3) && d < n && p[d] >= '0' && p[d] <= '9')
			d++;
		if (nl && d > i + 3 && d + nl <= n && strtoul(p + i + 3, NULL, 10) == nl &&
		    !memcmp(p + d, name, nl)) {
			memcpy(o, "_ZZ@", 4);
			o += 4;
			i = d + nl;
			continue;
		}
		if (nl && i + nl <= n && !memcmp(p + i, name, nl)) {
			*o++ = '@';
			i += nl;
			continue;
		}
		static const char *const pre[2] = {"$L__BB", "__local_depot"};
		int hit = 0;
		for (int q = 0; q < 2 && !hit; q++) {
			size_t l = strlen(pre[q]);
			if (i + l <= n && !memcmp(p + i, pre[q], l)) {
				memcpy(o, pre[q], l);
				o += l;
				i += l;
				while (i < n && p[i] >= '0' && p[i] <= '9')
					i++;
				hit = 1;
			}
		}
		if (!hit)
			*o++ = p[i++];
	}
	*o = 0;
	return r;
}

// An artifact (codegen/compile.c): every kernel launch of every CUDA task
// names an .entry of the PTX of the module its record names, and (shared)
// fewer functions than launches are compiled.  pieces > 0: the tasks are
// compiled as that many pieces (FADC_CUDA_PIECES, docs/CUDA.md "Pieces"),
// and some task must be several modules.  share: some task's launches call
// an earlier task's functions (its modules after its own); the PTX of each
// launch, shared or not, is compared with the task compiled alone below.
static void
check_artifact(const char *file, const char *const *defs, int ndefs, int shared, int pieces,
               int share) {
	const char *root = getenv("FADC_SOURCE_DIR");
	char path[4096], so[4096], err[4096];
	snprintf(path, sizeof path, "%s/%s", root ? root : ".", file);
	char np[16];
	snprintf(np, sizeof np, "%d", pieces);
	if (pieces)
		setenv("FADC_CUDA_PIECES", np, 1);
	FeOptions fo = {.diag = stderr, .defines = defs, .ndefines = ndefs};
	Module *m = fe_parse_file(path, &fo);
	CHECK(m != NULL);
	if (!m)
		return;
	const char *tasks[] = {"vjp"};
	CgOptions o = {.opt_level = -1, .tasks = tasks, .ntasks = 1, .targets = CG_TARGET_CUDA};
	const char *tmp = getenv("TMPDIR");
	snprintf(so, sizeof so, "%s/fadc-cuda-shared-%d.so", tmp && *tmp ? tmp : "/tmp",
	         (int)getpid());
	cgu_compile_or_exit((const Module *const *)&m, NULL, 1, &o, so, file);
	unsetenv("FADC_CUDA_PIECES");
	ArtDesc d = {0};
	uint8_t *db = NULL;
	size_t dl = 0;
	CHECK(art_read(so, &d, &db, &dl, err, sizeof err) == ART_READ_OK);
	unlink(so);
	int launches = 0, entries = 0, missing = 0, imports = 0, via = 0;
	uint32_t most = 0; // modules of a task's own, at most
	for (uint32_t t = 0; t < d.ntask; t++) {
		const ArtTask *at = &d.task[t];
		if (!(at->targets & ART_TARGET_CUDA))
			continue;
		// Each module's PTX (a task compiled as pieces has several): each
		// launch's function is in the PTX of the module it names.  A
		// module whose images an earlier task's module has is an import
		// (codegen/compile.c, "Sharing across tasks"): they come last.
		int good = d.images != NULL;
		uint32_t own = 0;
		for (uint32_t j = 0; j < at->nmodule; j++) {
			int imp = 0;
			for (uint32_t e = 0; e < t && !imp; e++)
				for (uint32_t i = 0; i < d.task[e].nmodule && !imp; i++)
					imp = d.task[e].module[i].cubin_off == at->module[j].cubin_off;
			CHECK(!imp || j >= own); // its own first
			own += !imp;
			imports += imp;
		}
		for (uint32_t k = 0; k < at->ncuda; k++)
			via += at->kern[k].kind == ART_LAUNCH_KERNEL && at->kern[k].module >= own;
		most = own > most ? own : most;
		for (uint32_t j = 0; j < at->nmodule; j++) {
			const ArtModule *x = &at->module[j];
			CHECK(x->ptx_len && x->ptx_off + x->ptx_len <= d.images_bytes);
			good &= x->ptx_len && x->ptx_off + x->ptx_len <= d.images_bytes;
		}
		if (!good)
			continue;
		for (uint32_t j = 0; j < at->nmodule; j++)
			entries += count((const char *)d.images + at->module[j].ptx_off, ".entry");
		for (uint32_t k = 0; k < at->ncuda; k++) {
			if (at->kern[k].kind != ART_LAUNCH_KERNEL)
				continue;
			launches++;
			const char *ptx = (const char *)d.images + at->module[at->kern[k].module].ptx_off;
			char pat[512];
			snprintf(pat, sizeof pat, ".entry %s(", at->kern[k].name);
			if (!strstr(ptx, pat)) {
				fprintf(stderr, "task %s: launch %u calls %s, not in its PTX\n", at->name,
				        k, at->kern[k].name);
				missing++;
			}
		}
	}
	printf("artifact %s: %d kernel launches, %d functions in the PTX, %d missing, %u modules "
	       "(a task's own, at most), %d imports, %d launches through them\n",
	       file, launches, entries, missing, most, imports, via);
	CHECK(missing == 0 && launches > 0 && (!shared || entries < launches));
	CHECK(!pieces || (most > 1 && most <= (uint32_t)pieces));
	CHECK(!share || (imports > 0 && via > 0));
	if (most > 1) { // pieces, forced or by default (transformer's vjp: 2)
		// The pieces' sources are the task's functions with their locals
		// renumbered (codegen/compile.c, cu_canon): the same functions, so
		// each launched kernel's PTX in its piece is its PTX in the task
		// compiled as one program, but for the numbers of its place in the
		// module (ptx_unplaced; register and parameter names in PTX do not
		// come from the C names); and a launch shared across tasks calls
		// an earlier task's function, the same but for its name.
		setenv("FADC_CUDA_PIECES", "1", 1);
		cgu_compile_or_exit((const Module *const *)&m, NULL, 1, &o, so, file);
		unsetenv("FADC_CUDA_PIECES");
		ArtDesc d1 = {0};
		uint8_t *db1 = NULL;
		size_t dl1 = 0;
		CHECK(art_read(so, &d1, &db1, &dl1, err, sizeof err) == ART_READ_OK);
		unlink(so);
		int compared = 0, differ = 0;
		for (uint32_t t = 0; t < d.ntask && t < d1.ntask && d1.images; t++) {
			const ArtTask *a = &d.task[t], *b = &d1.task[t];
			if (!(a->targets & ART_TARGET_CUDA))
				continue;
			CHECK(b->nmodule == 1 && a->ncuda == b->ncuda);
			for (uint32_t k = 0; k < a->ncuda && k < b->ncuda; k++) {
				if (a->kern[k].kind != ART_LAUNCH_KERNEL)
					continue;
				size_t la = 0, lb = 0;
				const char *pa = entry_ptx((const char *)d.images +
				                               a->module[a->kern[k].module].ptx_off,
				                           a->kern[k].name, &la);
				const char *pb = entry_ptx((const char *)d1.images + b->module[0].ptx_off,
				                           b->kern[k].name, &lb);
				CHECK(pa && pb);
				if (!pa || !pb)
					continue;
				compared++;
				char *ua = ptx_unplaced(pa, la, a->kern[k].name),
				     *ub = ptx_unplaced(pb, lb, b->kern[k].name);
				int same = !strcmp(ua, ub);
				free(ua);
				free(ub);
				if (!same) {
					fprintf(stderr, "task %s: %s: its PTX in its piece differs from one "
					                "program's\n", a->name, a->kern[k].name);
					differ++;
				}
			}
		}
		printf("artifact %s: %d kernels' PTX compared with one program's, %d differ\n", file,
		       compared, differ);
		CHECK(compared > 0 && differ == 0);
		art_desc_free(&d1);
		free(db1);
		// Format 10 (several modules): the encoder writes the same bytes,
		// refuses format 9 (one module a task), and every truncation is
		// refused by the decoder.
		uint8_t *enc = NULL;
		size_t elen = 0;
		CHECK(d.version == ART_FORMAT_VERSION_MODULES);
		d.version = 0;
		CHECK(art_desc_encode(&d, &enc, &elen) && elen == dl && !memcmp(enc, db, dl));
		free(enc);
		d.version = ART_FORMAT_VERSION_NHWC;
		CHECK(!art_desc_encode(&d, &enc, &elen));
		for (size_t cut = 0; cut < dl; cut += 5) {
			ArtDesc t;
			CHECK(!art_desc_decode(db, cut, &t, err, sizeof err));
		}
	}
	art_desc_free(&d);
	free(db);
	ir_module_free(m);
}
#endif

int
main(void) {
	check_small();
	check_fused();
	const char *r18[] = {"N=2", "H=32", "C=4", "NCLS=10"};
	check_model_task("resnet18", r18, 4, "forward");
	const char *tr[] = {"N=8", "SEQ=4", "E=16", "NH=4", "FF=16", "MAXLEN=16"};
	check_model_task("transformer", tr, 6, "vjp");
#ifdef FADC_HAVE_CUDA
	check_artifact("models/transformer.ir", tr, 6, 1, 0, 0);
	// Pieces with persistent loop kernels (their __device__ functions and
	// module words go with them) and tiled products.
	check_artifact("tests/gpu/scan-tile.ir", NULL, 0, 0, 4, 1);
#endif
	return TU_DONE("test_codegen_cuda_shared");
}
