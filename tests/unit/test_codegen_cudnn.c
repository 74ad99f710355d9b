// tests/unit/test_codegen_cudnn.c -- cuDNN convolutions as candidates
// (docs/CUDA.md, "cuDNN convolutions"; docs/ARTIFACT.md, format 8), without
// a GPU: a model of two convolutions (3x3 of stride 2 with padding 1 on an
// odd-sized batch of 2, then a 1x1; large enough not to be fused) compiled for cpu,cuda, and its
// artifact read back:
//   - every convolution of forward and vjp is a choice of two candidates
//     (the 3x3's gradients too, whose incoming gradient is a reshape of
//     the batch norm's backward),
//     a sequence of its launches (im2col, GEMM, col2im, the transposing
//     copy) and one convolution record, whose geometry is the hand-derived
//     one (OH = (27 + 2 - 2 - 1) / 2 + 1 = 14, OW = (25 + 2 - 2 - 1) / 2 +
//     1 = 13) and whose written argument is the sequence's last record's;
//   - with FADC_CONV_COL_MAX=1 (no column buffer fits) the convolutions
//     that keep kernel_conv's direct loops are records too, of the same
//     geometry, their sequence the one direct kernel;
//   - --allow-tf32 sets the records' tf32, strict leaves it 0, and an f64
//     build (compute_f64) has no convolution records at all;
//   - the encoder's round trip, every truncation refused, damaged records
//     (geometry, sizes, groups, op, dtype, a sequence outside a choice) refused with their message,
//     format 7 unable to hold them;
//   - the runtime's counts (a choice and its records one launch), the CPU
//     code run, and `fadc inspect`'s lines;
//   - with TF32, batch norm's backward sums over one channels-last tensor
//     (enough terms to be split by channel, codegen/kir_layout.c) are one
//     launch each (LA_MULTI: kir_layout's sibling splits, cuda.c's
//     print_multi), printed and compiled by NVRTC; none with
//     FADC_CUDA_NO_MULTI=1, the same sums as separate launches;
//   - tests/gpu/csum-multi.ir's vjp with TF32: the splits' second kernels
//     side by side with their elementwise epilogues (LA_MULTI "_sums"),
//     split and unsplit, printed and compiled by NVRTC; none with
//     FADC_CUDA_NO_MULTI_SUMS=1.
// The GPU side (each candidate forced, against the CPU code) is
// tests/gpu/conv.ir in tests/gpu/device/run.sh.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "artifact.h"
#include "codegen_util.h"
#include "fadc.h"

#ifdef FADC_HAVE_CUDA
// The 3x3 feeds a batch norm: the vjp hands its data and filter gradients
// the incoming gradient as a reshape of the batch norm's backward (a
// stored value), which conv_note sees through.
static const char model[] = "param x: f32[2, 5, 27, 25] = normal(0, 1, seed=1)\n"
                            "param w: f32[17, 5, 3, 3] = normal(0, 0.1, seed=2)\n"
                            "param v: f32[23, 17, 1, 1] = normal(0, 0.3, seed=3)\n"
                            "param g: f32[17] = normal(1, 0.1, seed=4)\n"
                            "param b: f32[17] = normal(0, 0.1, seed=5)\n"
                            "def forward() -> f32[] {\n"
                            "  h = tanh(batch_norm(conv2d(x, w, stride=2, padding=1), g, b))\n"
                            "  return sum(tanh(conv2d(h, v)))\n}\n";

static void
bin_dir(char *dir, size_t n) {
	ssize_t k = readlink("/proc/self/exe", dir, n - 1);
	dir[k > 0 ? k : 0] = 0;
	char *slash = strrchr(dir, '/');
	if (slash)
		*slash = 0;
	else
		snprintf(dir, n, ".");
}

// Batch norm over 2 x 64 x 64 = 8,192 terms per channel (6 of them) of a
// convolution's output: split by channel; its vjp's backward sums are
// siblings (sum(dy), sum(dy x^), sum(dy (x - mean)) over one tensor).
static const char bn_model[] = "param x: f32[2, 4, 64, 64] = normal(0, 1, seed=1)\n"
                               "param w: f32[6, 4, 3, 3] = normal(0, 0.2, seed=2)\n"
                               "param g: f32[6] = normal(1, 0.1, seed=3)\n"
                               "param b: f32[6] = normal(0, 0.1, seed=4)\n"
                               "def forward() -> f32[] {\n"
                               "  h = relu(batch_norm(conv2d(x, w, padding=1), g, b))\n"
                               "  return sum(h * h)\n}\n";

// m's vjp with TF32 compiled for CUDA into so (NVRTC) and its descriptor
// read into *d (*db its bytes, freed by the caller); m freed.  0 on failure.
static int
vjp_tf32(Module *m, const char *so, ArtDesc *d, uint8_t **db) {
	if (!m)
		return 0;
	static const char *const tasks[] = {"vjp"};
	char err[4096];
	CgOptions o = {.tasks = tasks, .ntasks = 1, .opt_level = 1, .targets = CG_TARGET_CUDA,
	               .allow_tf32 = 1};
	int ok = cg_compile_module(m, &o, so, err, sizeof err);
	if (!ok)
		fprintf(stderr, "%s\n", err);
	ir_module_free(m);
	if (!CHECK(ok))
		return 0;
	size_t dl = 0;
	return CHECK(art_read(so, d, db, &dl, err, sizeof err) == ART_READ_OK);
}

// bn_model's vjp with TF32 (channels-last) for CUDA into so; the number of
// its launches that run sibling sums together (LA_MULTI), and of all its
// channel partial sums' launches into *nsums.
static int
multi_launches(const char *so, int *nsums) {
	*nsums = -1;
	ArtDesc d;
	uint8_t *db = NULL;
	if (!vjp_tf32(cgu_parse("bn.ir", bn_model), so, &d, &db))
		return -1;
	int n = 0;
	*nsums = 0;
	for (uint32_t ti = 0; ti < d.ntask; ti++)
		for (uint32_t k = 0; (d.task[ti].targets & ART_TARGET_CUDA) && k < d.task[ti].ncuda; k++) {
			const char *nm = d.task[ti].kern[k].name;
			n += nm && strstr(nm, "_channel_partial_sums") != NULL;
			*nsums += nm && strstr(nm, "_channel_partial_sum") != NULL;
		}
	art_desc_free(&d);
	free(db);
	return n;
}

// tests/gpu/<file>'s vjp with TF32 for CUDA into so (NVRTC): the
// launches that run sums side by side or with their epilogues (_sums, not
// _channel_partial_sums) into *nmulti; the vjp's launch records returned.
static int
csum_multi_of(const char *file, const char *so, int *nmulti) {
	const char *root = getenv("FADC_SOURCE_DIR");
	char path[4096];
	snprintf(path, sizeof path, "%s/tests/gpu/%s", root ? root : "..", file);
	FeOptions fo = {.diag = stderr};
	Module *m = fe_parse_file(path, &fo);
	*nmulti = -1;
	if (!CHECK(m != NULL))
		return -1;
	ArtDesc d;
	uint8_t *db = NULL;
	if (!vjp_tf32(m, so, &d, &db))
		return -1;
	int n = 0;
	*nmulti = 0;
	for (uint32_t ti = 0; ti < d.ntask; ti++)
		for (uint32_t k = 0; (d.task[ti].targets & ART_TARGET_CUDA) && k < d.task[ti].ncuda; k++) {
			const char *nm = d.task[ti].kern[k].name;
			size_t l = nm ? strlen(nm) : 0;
			n += !strcmp(d.task[ti].name, "vjp");
			*nmulti += l > 5 && !strcmp(nm + l - 5, "_sums") && !strstr(nm, "_channel_partial_sums");
		}
	art_desc_free(&d);
	free(db);
	return n;
}

static int
csum_multi(const char *so, int *nmulti) {
	return csum_multi_of("csum-multi.ir", so, nmulti);
}

// Compiles the model's forward and vjp into so (tf32, f64 as asked).
static int
build(const char *so, int tf32, int f64) {
	Module *m = cgu_parse("cudnn.ir", model);
	if (!m)
		return 0;
	static const char *const tasks[] = {"forward", "vjp"};
	char err[4096];
	CgOptions o = {.tasks = tasks,
	               .ntasks = 2,
	               .opt_level = 1,
	               .cpu = "x86-64-v3", // one CPU level: the formats checked below
	               .targets = CG_TARGET_CPU | CG_TARGET_CUDA,
	               .allow_tf32 = tf32,
	               .compute_f64 = f64};
	int ok = cg_compile_module(m, &o, so, err, sizeof err);
	if (!ok)
		fprintf(stderr, "%s\n", err);
	CHECK(ok);
	ir_module_free(m);
	return ok;
}

// The convolution records of d's CUDA tasks, each checked as a choice's
// second candidate after a sequence; counts by op into nop[3].
static void
check_records(const ArtDesc *d, int tf32, int nop[3]) {
	for (uint32_t ti = 0; ti < d->ntask; ti++) {
		const ArtTask *t = &d->task[ti];
		for (uint32_t k = 0; (t->targets & ART_TARGET_CUDA) && k < t->ncuda; k++) {
			const ArtKernel *c = &t->kern[k];
			if (c->kind != ART_LAUNCH_CHOICE)
				continue;
			const ArtKernel *s = &t->kern[k + 1];
			CHECK(c->points == 2 && s->kind == ART_LAUNCH_SEQ && s->span == s->points);
			if (s->kind != ART_LAUNCH_SEQ || k + 2 + s->span >= t->ncuda)
				continue;
			const ArtKernel *last = &t->kern[k + 1 + s->span],
			                *v = &t->kern[k + 2 + s->span];
			CHECK(c->span == s->span + 2);
			CHECK(v->kind == ART_LAUNCH_CONV && v->narg == 3);
			if (v->kind != ART_LAUNCH_CONV || v->narg != 3)
				continue;
			CHECK(last->arg[0].kind == v->arg[0].kind &&
			      last->arg[0].index == v->arg[0].index &&
			      last->arg[0].offset == v->arg[0].offset &&
			      last->arg[0].bytes == v->arg[0].bytes);
			const ArtConv *g = &v->conv;
			CHECK(g->op <= ART_CONV_BWD_FILTER && g->dtype == ART_F32 &&
			      g->tf32 == tf32 && g->groups == 1);
			if (g->op > ART_CONV_BWD_FILTER)
				continue;
			nop[g->op]++;
			uint64_t wrote = 0;
			if (g->c == 5) { // the 3x3 of stride 2 (hand-derived: OH 14, OW 13)
				CHECK(g->n == 2 && g->h == 27 && g->w == 25 && g->k == 17 &&
				      g->r == 3 && g->s == 3 && g->oh == 14 && g->ow == 13 &&
				      g->sh == 2 && g->sw == 2 && g->ph == 1 && g->pw == 1 &&
				      g->dh == 1 && g->dw == 1);
				wrote = g->op == ART_CONV_FWD        ? 2 * 17 * 14 * 13
				        : g->op == ART_CONV_BWD_DATA ? 2 * 5 * 27 * 25
				                                     : 17 * 5 * 3 * 3;
			} else { // the 1x1 on h (2, 17, 14, 13)
				CHECK(g->c == 17 && g->n == 2 && g->h == 14 && g->w == 13 &&
				      g->k == 23 && g->r == 1 && g->s == 1 && g->oh == 14 &&
				      g->ow == 13 && g->sh == 1 && g->ph == 0 && g->dh == 1);
				wrote = g->op == ART_CONV_FWD        ? 2 * 23 * 14 * 13
				        : g->op == ART_CONV_BWD_DATA ? 2 * 17 * 14 * 13
				                                     : 23 * 17;
			}
			CHECK(v->points == wrote && v->arg[0].bytes == 4 * wrote);
			CHECK(!strcmp(v->name, g->op == ART_CONV_FWD ? "cudnnConvolutionForward"
			                       : g->op == ART_CONV_BWD_DATA
			                           ? "cudnnConvolutionBackwardData"
			                           : "cudnnConvolutionBackwardFilter"));
		}
	}
}

// How many of d's CUDA choices have as their sequence one direct-loop
// kernel of kernel_conv (named ..._conv, ..._conv_input_grad or
// ..._conv_weight_grad; the im2col path's are im2col, conv.gemm, ...).
static int
direct_records(const ArtDesc *d) {
	int n = 0;
	for (uint32_t ti = 0; ti < d->ntask; ti++) {
		const ArtTask *t = &d->task[ti];
		for (uint32_t k = 0; (t->targets & ART_TARGET_CUDA) && k + 2 < t->ncuda; k++) {
			if (t->kern[k].kind != ART_LAUNCH_CHOICE || t->kern[k + 1].span != 1)
				continue;
			const char *nm = t->kern[k + 2].name;
			size_t l = nm ? strlen(nm) : 0;
			n += (l > 5 && !strcmp(nm + l - 5, "_conv")) ||
			     (l > 16 && !strcmp(nm + l - 16, "_conv_input_grad")) ||
			     (l > 17 && !strcmp(nm + l - 17, "_conv_weight_grad"));
		}
	}
	return n;
}

// d re-encoded with damage(d) applied is refused with a message holding want.
static void
refused(ArtDesc *d, ArtKernel *rec, int what, const char *want) {
	ArtKernel saved = *rec;
	ArtKArg a0 = rec->narg ? rec->arg[0] : (ArtKArg){0}, a1 = rec->narg > 1 ? rec->arg[1] : a0;
	switch (what) {
	case 0:
		rec->conv.oh++;
		break; // the window arithmetic disagrees
	case 1:
		rec->conv.groups = 2;
		break; // 5 or 17 channels: not divisible
	case 2:
		rec->conv.op = 3;
		break;
	case 3:
		rec->conv.dtype = ART_F64;
		break;
	case 4:
		rec->arg[0].bytes -= 4;
		break; // no longer the sequence's output
	case 5:
		rec->conv.n = 0;
		break;
	case 6:
		rec->conv.ph = 0x80000000u;
		break;
	case 7:
		rec->kind = ART_LAUNCH_KERNEL;
		break; // the choice gone: SEQ outside
	case 8:
		rec->points++;
		break; // a sequence longer than the choice holds
	case 9:
		rec->arg[1].bytes -= 4;
		break; // x or dy outside its argument
	case 10: // the filter channels-last (format 9): filters stay KCRS
		rec->conv.nhwc |= rec->conv.op == ART_CONV_BWD_FILTER ? 1 : 4;
		break;
	case 11:
		rec->conv.nhwc |= 8; // no fourth argument
		break;
	}
	uint8_t *enc = NULL;
	size_t elen = 0;
	char err[512] = "";
	ArtDesc e;
	CHECK(art_desc_encode(d, &enc, &elen));
	int ok = art_desc_decode(enc, elen, &e, err, sizeof err);
	CHECK(!ok && strstr(err, want) != NULL);
	if (ok)
		art_desc_free(&e);
	else if (!strstr(err, want))
		fprintf(stderr, "damage %d: %s (wanted '%s')\n", what, err, want);
	free(enc);
	*rec = saved;
	if (rec->narg)
		rec->arg[0] = a0;
	if (rec->narg > 1)
		rec->arg[1] = a1;
}
#endif

int
main(void) {
#ifndef FADC_HAVE_CUDA
	printf("test_codegen_cudnn: built without the CUDA toolkit, skipped\n");
	return 77;
#else
	const char *tmp = getenv("TMPDIR");
	char dir[4096], so[4200], so32[4200], so64[4200], cmd[8600], err[4096];
	snprintf(dir, sizeof dir, "%s/fadc_cudnn_XXXXXX", tmp && *tmp ? tmp : "/tmp");
	CHECK(mkdtemp(dir) != NULL);
	snprintf(so, sizeof so, "%s/c.so", dir);
	snprintf(so32, sizeof so32, "%s/t.so", dir);
	snprintf(so64, sizeof so64, "%s/d.so", dir);
	if (!build(so, 0, 0) || !build(so32, 1, 0) || !build(so64, 0, 1))
		return TU_DONE("test_codegen_cudnn");
	{
		char sob[4200];
		snprintf(sob, sizeof sob, "%s/bn.so", dir);
		int all = 0, all1 = 0, multi = multi_launches(sob, &all);
		setenv("FADC_CUDA_NO_MULTI", "1", 1);
		int multi1 = multi_launches(sob, &all1);
		unsetenv("FADC_CUDA_NO_MULTI");
		printf("sibling sums: %d launches of them (%d channel partial sum launches), %d with "
		       "FADC_CUDA_NO_MULTI=1 (%d)\n",
		       multi, all, multi1, all1);
		// One group of three in the backward: two launches fewer.
		CHECK(multi >= 1 && multi1 == 0 && all1 == all + 2 * multi);
		unlink(sob);
	}
	{
		// The splits' second kernels side by side, and the elementwise
		// kernels reading them after them, in one launch (LA_MULTI "_sums":
		// a split column block reduction of 40 and of 9 channels, a thread
		// per channel for 24), printed and compiled by NVRTC; unsplit too
		// (FADC_CUDA_NO_SPLIT=1: the unsplit column form), there with every
		// sum's epilogues (FADC_CUDA_MULTI_EPI_ALL=1: the groups', the
		// single sums' at batch 1, the statistics' rsqrt); none with
		// FADC_CUDA_NO_MULTI_SUMS=1.  Each group of three sums is 2 launches
		// fewer, 3 with its epilogue, each single sum with an epilogue one
		// fewer.  gpu_check runs them.  The counts are those of the
		// statistics in two passes (FADC_CUDA_NO_BN1PASS=1): the one pass
		// (below) regroups the forward's sums and their coefficients.
		setenv("FADC_CUDA_NO_BN1PASS", "1", 1);
		char som[4200];
		snprintf(som, sizeof som, "%s/cm.so", dir);
		int nm = 0, nm1 = 0, nm2 = 0;
		int all = csum_multi(som, &nm);
		setenv("FADC_CUDA_NO_SPLIT", "1", 1);
		setenv("FADC_CUDA_MULTI_EPI_ALL", "1", 1);
		int all2 = csum_multi(som, &nm2);
		unsetenv("FADC_CUDA_MULTI_EPI_ALL");
		unsetenv("FADC_CUDA_NO_SPLIT");
		setenv("FADC_CUDA_NO_MULTI_SUMS", "1", 1);
		int all1 = csum_multi(som, &nm1);
		unsetenv("FADC_CUDA_NO_MULTI_SUMS");
		printf("csum-multi.ir vjp: %d launches, %d of them sums side by side with epilogues "
		       "(unsplit, every sum's epilogues: %d, %d); FADC_CUDA_NO_MULTI_SUMS=1: %d, %d\n",
		       all, nm, all2, nm2, all1, nm1);
		// 3 groups of 3 sums (2 fewer each); with every epilogue 3 more
		// fewer, and at least the batch-1 branch's 3 single sums' (1 each).
		CHECK(nm >= 3 && nm1 == 0 && all1 >= all + 3 * 2);
		CHECK(nm2 >= nm + 3 && all2 <= all - 3 - 3);
		unlink(som);
		unsetenv("FADC_CUDA_NO_BN1PASS");
	}
	{
		// Batch norm's statistics in one pass (kir_layout.c,
		// bn_stats_one_pass; tests/gpu/bn1pass.ir: 4 batch norms, offsets,
		// 40, 9 and 24 channels, batch 1), printed and compiled by NVRTC:
		// per batch norm the forward's two partial-sum launches are one and
		// its two second kernels share the first's launch (the variance's
		// correction in its readers), 2 launches fewer; with
		// FADC_CUDA_BN1PASS_POST=1 (the correction in the variance's post)
		// 1 fewer; none with FADC_CUDA_NO_BN1PASS=1.  gpu_check runs them.
		char sob[4200];
		snprintf(sob, sizeof sob, "%s/bn.so", dir);
		int nm = 0, nm0 = 0, nmp = 0;
		int all = csum_multi_of("bn1pass.ir", sob, &nm);
		setenv("FADC_CUDA_NO_BN1PASS", "1", 1);
		int all0 = csum_multi_of("bn1pass.ir", sob, &nm0);
		unsetenv("FADC_CUDA_NO_BN1PASS");
		setenv("FADC_CUDA_BN1PASS_POST", "1", 1);
		int allp = csum_multi_of("bn1pass.ir", sob, &nmp);
		unsetenv("FADC_CUDA_BN1PASS_POST");
		// With every sum's epilogues (opt-in) too: compiled, no more launches.
		int nme = 0;
		setenv("FADC_CUDA_MULTI_EPI_ALL", "1", 1);
		int alle = csum_multi_of("bn1pass.ir", sob, &nme);
		unsetenv("FADC_CUDA_MULTI_EPI_ALL");
		printf("bn1pass.ir vjp: %d launches (%d sums side by side); the correction in the "
		       "variance's post: %d; FADC_CUDA_NO_BN1PASS=1: %d (%d); every epilogue: %d\n",
		       all, nm, allp, all0, nm0, alle);
		CHECK(all > 0 && all0 == all + 4 * 2 && allp == all + 4 && nm >= nm0 + 4);
		CHECK(alle > 0 && alle <= all);
		unlink(sob);
	}
	ArtDesc d;
	uint8_t *db = NULL;
	size_t dl = 0;
	CHECK(art_read(so, &d, &db, &dl, err, sizeof err) == ART_READ_OK);
	CHECK(d.version == ART_FORMAT_VERSION_CONV);
	// Forward: the two convolutions; vjp: the forward pass again, then the
	// 1x1's data and filter gradients and the 3x3's (its x is a param).
	int nop[3] = {0, 0, 0};
	check_records(&d, 0, nop);
	printf("strict: %d forward, %d backward data, %d backward filter records\n", nop[0], nop[1],
	       nop[2]);
	CHECK(nop[0] == 4 && nop[1] == 2 && nop[2] == 2);
	CHECK(direct_records(&d) == 0); // every one through im2col + GEMM
	// FADC_CONV_COL_MAX=1: no column buffer fits, so each convolution keeps
	// kernel_conv's direct loops except the 1x1's forward and data
	// gradient (products as they stand): the 3x3's forward (in forward and
	// vjp), data and filter gradients and the 1x1's filter gradient, 5
	// direct kernels.  Each is still a record of the same geometry
	// (check_records), as deepspeech's second convolution at full size.
	{
		char sod[4200];
		snprintf(sod, sizeof sod, "%s/direct.so", dir);
		setenv("FADC_CONV_COL_MAX", "1", 1);
		int built = build(sod, 0, 0);
		unsetenv("FADC_CONV_COL_MAX");
		ArtDesc dd;
		uint8_t *ddb = NULL;
		size_t ddl = 0;
		if (built && art_read(sod, &dd, &ddb, &ddl, err, sizeof err) == ART_READ_OK) {
			int nd[3] = {0, 0, 0};
			check_records(&dd, 0, nd);
			printf("direct loops: %d forward, %d backward data, %d backward filter, "
			       "%d direct\n",
			       nd[0], nd[1], nd[2], direct_records(&dd));
			CHECK(nd[0] == 4 && nd[1] == 2 && nd[2] == 2);
			CHECK(direct_records(&dd) == 5);
			art_desc_free(&dd);
			free(ddb);
		} else
			CHECK(0);
		unlink(sod);
	}
	ArtDesc d32;
	uint8_t *db32 = NULL;
	size_t dl32 = 0;
	CHECK(art_read(so32, &d32, &db32, &dl32, err, sizeof err) == ART_READ_OK);
	CHECK(d32.version == ART_FORMAT_VERSION_NHWC); // channels-last operands (TF32 only)
	int n32[3] = {0, 0, 0};
	check_records(&d32, 1, n32);
	CHECK(n32[0] == 4 && n32[1] == 2 && n32[2] == 2);
	// Format 9: the layouts survive the round trip, every truncation is
	// refused, a filter or a fourth argument channels-last is refused, and
	// format 8 cannot hold them.
	{
		uint8_t *enc = NULL;
		size_t elen = 0;
		d32.version = 0;
		CHECK(art_desc_encode(&d32, &enc, &elen) && elen == dl32 && !memcmp(enc, db32, dl32));
		free(enc);
		for (size_t cut = 0; cut < dl32; cut += 7) {
			ArtDesc e;
			int ok = art_desc_decode(db32, cut, &e, err, sizeof err);
			CHECK(!ok);
			if (ok)
				art_desc_free(&e);
		}
		ArtKernel *c9 = NULL;
		int nn = 0;
		for (uint32_t ti = 0; ti < d32.ntask; ti++)
			for (uint32_t k = 0; (d32.task[ti].targets & ART_TARGET_CUDA) && k < d32.task[ti].ncuda;
			     k++)
				if (d32.task[ti].kern[k].kind == ART_LAUNCH_CONV && d32.task[ti].kern[k].conv.nhwc) {
					nn++;
					if (!c9)
						c9 = &d32.task[ti].kern[k];
				}
		CHECK(nn == 8 && c9 != NULL); // every record has a channels-last activation
		if (c9) {
			refused(&d32, c9, 10, "convolution record");
			refused(&d32, c9, 11, "convolution record");
		}
		d32.version = ART_FORMAT_VERSION_CONV;
		CHECK(!art_desc_encode(&d32, &enc, &elen));
		d32.version = 0;
	}
	art_desc_free(&d32);
	free(db32);
	// f64: the printed path alone.
	ArtDesc d64;
	uint8_t *db64 = NULL;
	size_t dl64 = 0;
	CHECK(art_read(so64, &d64, &db64, &dl64, err, sizeof err) == ART_READ_OK);
	int conv64 = 0;
	for (uint32_t ti = 0; ti < d64.ntask; ti++)
		for (uint32_t k = 0;
		     (d64.task[ti].targets & ART_TARGET_CUDA) && k < d64.task[ti].ncuda; k++)
			conv64 += d64.task[ti].kern[k].kind == ART_LAUNCH_CONV ||
			          d64.task[ti].kern[k].kind == ART_LAUNCH_SEQ;
	CHECK(conv64 == 0 && d64.version < ART_FORMAT_VERSION_CONV);
	art_desc_free(&d64);
	free(db64);
	// The encoder's round trip; every truncation refused.
	uint8_t *enc = NULL;
	size_t elen = 0;
	d.version = 0;
	CHECK(art_desc_encode(&d, &enc, &elen) && elen == dl && !memcmp(enc, db, dl));
	free(enc);
	for (size_t cut = 0; cut < dl; cut += 5) {
		ArtDesc e;
		int ok = art_desc_decode(db, cut, &e, err, sizeof err);
		CHECK(!ok);
		if (ok)
			art_desc_free(&e);
	}
	// Damaged records, in the forward task's first choice.
	ArtTask *t = &d.task[0];
	uint32_t ch = 0;
	while (ch < t->ncuda && t->kern[ch].kind != ART_LAUNCH_CHOICE)
		ch++;
	CHECK(ch < t->ncuda);
	if (ch < t->ncuda) {
		ArtKernel *seq = &t->kern[ch + 1], *conv = &t->kern[ch + 2 + seq->span];
		for (int what = 0; what <= 6; what++)
			refused(&d, conv, what, what == 4 ? "choice record" : "convolution record");
		refused(&d, conv, 9, "convolution record");
		refused(&d, &t->kern[ch], 7, "outside a choice");
		refused(&d, seq, 8, "choice record");
		d.version = 7;
		CHECK(!art_desc_encode(&d, &enc, &elen));
		d.version = 0;
	}
	// The runtime's view: each choice with its records one launch.
	uint32_t nchoice = 0, spans = 0, ncuda = t->ncuda;
	for (uint32_t k = 0; k < t->ncuda; k++)
		if (t->kern[k].kind == ART_LAUNCH_CHOICE) {
			nchoice++;
			spans += t->kern[k].span;
		}
	CHECK(nchoice == 2);
	art_desc_free(&d);
	free(db);
	fadc_context *ctx;
	fadc_model *fm = NULL;
	CHECK(fadc_context_create(NULL, &ctx) == FADC_OK);
	CHECK(fadc_model_open(ctx, so, 0, &fm) == FADC_OK);
	if (fm) {
		fadc_task_info info;
		CHECK(fadc_task_info_get(fm, 0, &info) == FADC_OK);
		CHECK(info.cuda_choices == (int)nchoice &&
		      info.cuda_launches == (int)(ncuda - spans));
		fadc_tensor *out[1] = {NULL};
		CHECK(fadc_run(fm, 0, NULL, 0, out, 1) == FADC_OK); // the CPU code
		if (out[0])
			fadc_tensor_release(out[0]);
		fadc_model_close(fm);
	}
	fadc_context_destroy(ctx);
	// fadc inspect.
	char bin[4096];
	bin_dir(bin, sizeof bin);
	snprintf(cmd, sizeof cmd, "'%s/fadc' inspect '%s'", bin, so32);
	FILE *f = popen(cmd, "r");
	static char out[65536];
	size_t got = f ? fread(out, 1, sizeof out - 1, f) : 0;
	out[got] = 0;
	CHECK(f && pclose(f) == 0);
	// With TF32 the activations are channels-last (codegen/kir_layout.c):
	// y of the 3x3 (its x is the task's input), x and y of the 1x1.
	CHECK(strstr(out, ": forward f32 N=2 C=5 H=27 W=25 K=17 R=3 S=3 OH=14 OW=13 stride=2,2 "
	                  "pad=1,1 dil=1,1 groups=1 tf32 nhwc=o--\n") != NULL);
	CHECK(strstr(out, ": backward_filter f32 N=2 C=17 H=14 W=13 K=23 R=1 S=1 OH=14 OW=13 "
	                  "stride=1,1 pad=0,0 dil=1,1 groups=1 tf32 nhwc=-ab\n") != NULL);
	// The 3x3's gradients, whose incoming gradient is a reshape.
	CHECK(strstr(out, ": backward_data f32 N=2 C=5 H=27 W=25 K=17 R=3 S=3 OH=14 OW=13 stride=2,2 "
	                  "pad=1,1 dil=1,1 groups=1 tf32 nhwc=-a-\n") != NULL);
	CHECK(strstr(out, ": backward_filter f32 N=2 C=5 H=27 W=25 K=17 R=3 S=3 OH=14 OW=13 "
	                  "stride=2,2 pad=1,1 dil=1,1 groups=1 tf32 nhwc=--b\n") != NULL);
	CHECK(strstr(out, " conv cudnnConvolutionForward\n") != NULL);
	CHECK(strstr(out, "2 candidates, the faster on the GPU runs: ") != NULL);
	CHECK(strstr(out, " sequence of ") != NULL);
	CHECK(strstr(out, ", some of them cuDNN") != NULL);
	if (!strstr(out, " conv cudnnConvolutionForward"))
		fprintf(stderr, "fadc inspect said:\n%s", out);
	unlink(so);
	unlink(so32);
	unlink(so64);
	rmdir(dir);
	return TU_DONE("test_codegen_cudnn");
#endif
}
