// tools/fadc/inspect.c -- `fadc inspect MODEL.so`.
//
// Prints an artifact's descriptor without running its code: what the
// runtime reports through include/fadc.h (FADC_OPEN_DESCRIBE), plus the
// CUDA launch records (GEMMs, choices, a fused kernel's phases), which
// fadc.h does not expose, read again from the descriptor itself
// (runtime/artifact.h).
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "artifact.h"
#include "cli.h"

const char *const usage_inspect =
    "usage: fadc inspect MODEL.so\n"
    "\n"
    "Prints the descriptor of an artifact, read and checked without loading its\n"
    "code: model, source hash, target, options, declarations, and each task's\n"
    "inputs, outputs and memory plan.\n";

static void
print_desc(const fadc_tensor_desc *d, const char *dir, const char *spec)
{
	static const char *const roles[] = {"param", "const", "input", "output"};
	char ty[256];
	type_str(tio_of_fadc(d->dtype), d->rank, d->dim, ty, sizeof ty);
	if (spec)
		printf("  %s %-28s %-6s %-16s [%s]\n", dir, d->name, roles[d->role], ty, spec);
	else
		printf("  %s %-28s %-6s %s\n", dir, d->name, roles[d->role], ty);
}

// The phases of a fused task (runs of kernels between barriers,
// docs/CUDA.md), which codegen/cuda.c writes into the fused kernel's name,
// fadc_<task>_k0_fused_<N>phases; 0 when the descriptor does not say.
static unsigned
fused_phases(const ArtDesc *d, int task)
{
	const ArtTask *a = (uint32_t)task < d->ntask ? &d->task[task] : NULL;
	const char *s;
	unsigned n;
	char tail[16];
	if (!a || !(a->targets & ART_TARGET_CUDA) || a->ncuda != 1 ||
	    !(s = strstr(a->kern[0].name, "_fused_")))
		return 0;
	if (sscanf(s, "_fused_%u%15s", &n, tail) == 2 && !strcmp(tail, "phases"))
		return n;
	return 0;
}

int
cmd_inspect(int argc, char **argv)
{
	const char *path = NULL;
	for (int i = 0; i < argc; i++) {
		if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			fputs(usage_inspect, stdout);
			return 0;
		} else if (argv[i][0] == '-')
			return usage_error(usage_inspect, "unknown option '%s'", argv[i]);
		else if (path)
			return usage_error(usage_inspect, "more than one model given ('%s')", argv[i]);
		path = argv[i];
	}
	if (!path)
		return usage_error(usage_inspect, "no model given%s", "");
	fadc_context *ctx;
	fadc_model *m;
	if (fadc_context_create(NULL, &ctx)) {
		fprintf(stderr, "fadc: error: cannot create a runtime context\n");
		return 1;
	}
	if (open_model(ctx, path, FADC_OPEN_DESCRIBE, &m)) {
		rt_error(path, ctx);
		fadc_context_destroy(ctx);
		return 1;
	}
	// The launch records themselves (GEMMs, TF32, a fused kernel's phases)
	// are not in fadc.h's task info: the descriptor, read again (checked as
	// by the open); its tasks are the runtime's, in the same order.
	ArtDesc desc = {0};
	uint8_t *dbytes = NULL;
	size_t dlen = 0;
	char derr[512];
	int hasdesc = art_read(path, &desc, &dbytes, &dlen, derr, sizeof derr) == ART_READ_OK;
	printf("model %s\n", fadc_model_name(m));
	printf("source_hash %s\n", fadc_model_info(m, "source_hash"));
	printf("triple %s\n", fadc_model_info(m, "triple"));
	// The CPU levels, and the one this CPU would run (as fadc run picks it:
	// FADC_CPU_LEVEL, FADC_CPU_FEATURES).
	if (hasdesc) {
		printf("cpu");
		for (uint32_t i = 0; i < desc.nlevel; i++)
			printf(" %s", desc.level[i].cpu);
		char why[700];
		int pick = rt_cpu_pick(&desc, rt_cpu_host_features(), getenv("FADC_CPU_LEVEL"), why,
		                       sizeof why);
		if (pick >= 0)
			printf(" (this CPU runs %s)\n", desc.level[pick].cpu);
		else
			printf(" (this CPU runs none: %s)\n", why);
		for (uint32_t i = 0; i < desc.nlevel; i++)
			printf("features %s %s\n", desc.level[i].cpu, desc.level[i].features);
	} else
		printf("cpu %s\nfeatures %s\n", fadc_model_info(m, "cpu"), fadc_model_info(m, "features"));
	printf("options %s\n", fadc_model_info(m, "options"));
	int nspec = fadc_model_spec_count(m);
	if (nspec > 1)
		for (int i = 0; i < nspec; i++)
			printf("specialisation %d: %s\n", i, fadc_model_spec(m, i));
	for (int i = 0; i < fadc_model_decl_count(m); i++) {
		fadc_tensor_desc d;
		int has_init, sp = fadc_model_decl_spec(m, i);
		fadc_model_decl(m, i, &d, &has_init);
		print_desc(&d, has_init ? "decl" : "bind",
		           nspec > 1 && sp >= 0 ? fadc_model_spec(m, sp) : NULL);
	}
	for (int t = 0; t < fadc_model_task_count(m); t++) {
		fadc_task_info info;
		fadc_task_info_get(m, t, &info);
		printf("task %s%s%s%s: %d kernels, arena %" PRIu64 " bytes (naive %" PRIu64 "), code %s\n",
		       info.name, info.spec[0] ? " [" : "", info.spec, info.spec[0] ? "]" : "",
		       info.nkernels, info.arena_bytes, info.naive_bytes,
		       info.targets == FADC_TARGET_CPU    ? "cpu"
		       : info.targets == FADC_TARGET_CUDA ? "cuda"
		                                          : "cpu,cuda");
		const ArtTask *at = hasdesc && (uint32_t)t < desc.ntask ? &desc.task[t] : NULL;
		if (at && at->shard) // a shard of a batched task (format 12, runtime/shard.h)
			printf("  shard %u of %u of %s: basis rows [%" PRId64 ", %" PRId64 ") of %" PRId64 "\n",
			       at->shard->k, at->shard->n, at->shard->of, at->shard->lo, at->shard->hi,
			       at->shard->total);
		// GEMM records and choices (a choice record, then its candidates:
		// records that run one at a time, not counted as launches).
		int ngemm = 0, ntf32 = 0, nchoice = 0, nrec = 0, nconv = 0;
		for (uint32_t k = 0; at && (at->targets & ART_TARGET_CUDA) && k < at->ncuda; k++) {
			nrec += at->kern[k].kind == ART_LAUNCH_GEMM;
			nconv += at->kern[k].kind == ART_LAUNCH_CONV;
			ntf32 += at->kern[k].kind == ART_LAUNCH_GEMM && at->kern[k].gemm.tf32;
		}
		for (uint32_t k = 0; at && (at->targets & ART_TARGET_CUDA) && k < at->ncuda; k++) {
			if (at->kern[k].kind == ART_LAUNCH_CHOICE) {
				nchoice++;
				k += at->kern[k].span;
			} else
				ngemm += at->kern[k].kind == ART_LAUNCH_GEMM;
		}
		unsigned nph = hasdesc ? fused_phases(&desc, t) : 0;
		int nother = info.cuda_launches - ngemm - nchoice;
		char choices[128] = "";
		if (nchoice)
			snprintf(choices, sizeof choices, ", %d choice%s timed on the GPU%s", nchoice,
			         nchoice == 1 ? "" : "s",
			         nconv == 1 ? ", 1 of them cuDNN"
			         : nconv    ? ", some of them cuDNN" : "");
		if ((info.targets & FADC_TARGET_CUDA) && (ngemm || nchoice))
			printf("  cuda: %d launches (%d kernel%s or host step%s, %d cuBLAS GEMM%s%s%s)\n",
			       info.cuda_launches, nother, nother == 1 ? "" : "s", nother == 1 ? "" : "s",
			       ngemm, ngemm == 1 ? "" : "s", choices, ntf32 ? ", TF32 allowed" : "");
		else if ((info.targets & FADC_TARGET_CUDA) && nph)
			printf("  cuda: 1 launch (the task fused into one kernel), %u phase%s\n", nph,
			       nph == 1 ? "" : "s");
		else if (info.targets & FADC_TARGET_CUDA)
			printf("  cuda: %d launch%s\n", info.cuda_launches,
			       info.cuda_launches == 1 ? " (the task fused into one kernel)" : "es");
		// The images: a cubin for the artifact's cuda_arch, and the PTX the
		// driver compiles where it does not load (none with --no-ptx).
		if (at && (at->targets & ART_TARGET_CUDA)) {
			uint64_t cubin = 0, ptx = 0; // over its modules (several: format 9)
			for (uint32_t j = 0; j < at->nmodule; j++) {
				cubin += at->module[j].cubin_len;
				ptx += at->module[j].ptx_len;
			}
			char mods[32] = "";
			if (at->nmodule > 1)
				snprintf(mods, sizeof mods, " in %u modules", at->nmodule);
			if (ptx)
				printf("  images: cubin %" PRIu64 " bytes, PTX %" PRIu64 " bytes%s\n", cubin,
				       ptx, mods);
			else
				printf("  images: cubin %" PRIu64 " bytes, no PTX (--no-ptx)%s\n", cubin, mods);
		}
		for (uint32_t k = 0, ci = 0; nchoice && k < at->ncuda; k++) {
			const ArtKernel *kk = &at->kern[k];
			if (kk->kind != ART_LAUNCH_CHOICE)
				continue;
			printf("  choice %u: record %u, %" PRIu64 " candidates, the faster on the GPU runs:",
			       ci++, k, kk->points);
			// Each candidate: a record (kernel, gemm, conv), or a sequence of
			// records (its first record and its last one's name).
			for (uint32_t j = k + 1; j <= k + kk->span; j++) {
				const ArtKernel *c = &at->kern[j];
				if (c->kind == ART_LAUNCH_SEQ) {
					printf(" %u sequence of %u (%s .. %s)", j, c->span, at->kern[j + 1].name,
					       at->kern[j + c->span].name);
					j += c->span;
					continue;
				}
				printf(" %u %s %s", j,
				       c->kind == ART_LAUNCH_GEMM   ? "gemm"
				       : c->kind == ART_LAUNCH_CONV ? "conv"
				                                    : "kernel",
				       c->name);
			}
			printf("\n");
		}
		for (uint32_t k = 0; nconv && k < at->ncuda; k++) {
			const ArtKernel *kk = &at->kern[k];
			const ArtConv *v = &kk->conv;
			static const char *const ops[] = {"forward", "backward_data", "backward_filter"};
			if (kk->kind != ART_LAUNCH_CONV)
				continue;
			printf("  conv %u: %s f32 N=%u C=%u H=%u W=%u K=%u R=%u S=%u OH=%u OW=%u "
			       "stride=%u,%u pad=%u,%u dil=%u,%u groups=%u%s",
			       k, ops[v->op], v->n, v->c, v->h, v->w, v->k, v->r, v->s, v->oh, v->ow, v->sh,
			       v->sw, v->ph, v->pw, v->dh, v->dw, v->groups, v->tf32 ? " tf32" : "");
			// Channels-last operands (format 9), as {written, a, b}.
			if (v->nhwc)
				printf(" nhwc=%c%c%c", v->nhwc & 1 ? 'o' : '-', v->nhwc & 2 ? 'a' : '-',
				       v->nhwc & 4 ? 'b' : '-');
			printf("\n");
		}
		for (uint32_t k = 0; nrec && k < at->ncuda; k++) {
			const ArtKernel *kk = &at->kern[k];
			const ArtGemm *g = &kk->gemm;
			if (kk->kind != ART_LAUNCH_GEMM)
				continue;
			printf("  gemm %u: %s batch=%u M=%u N=%u K=%u ta=%u tb=%u lda=%" PRIu64
			       " ldb=%" PRIu64 " ldc=%" PRIu64 " sa=%" PRIu64 " sb=%" PRIu64
			       " sc=%" PRIu64 " oa=%" PRIu64 " ob=%" PRIu64 " oc=%" PRIu64 "%s\n",
			       k, g->dtype == ART_F64 ? "f64" : "f32", g->batch, g->m, g->n, g->k, g->ta,
			       g->tb, g->lda, g->ldb, g->ldc, g->sa, g->sb, g->sc, g->oa, g->ob, g->oc,
			       g->tf32 ? " tf32" : "");
		}
		for (int i = 0; i < info.ninputs; i++) {
			fadc_tensor_desc d;
			fadc_task_input(m, t, i, &d);
			print_desc(&d, "in ", NULL);
		}
		for (int i = 0; i < info.noutputs; i++) {
			fadc_tensor_desc d;
			fadc_task_output(m, t, i, &d);
			print_desc(&d, "out", NULL);
		}
		// Index checks (format 7): hidden outputs of the runtime's, shown
		// apart from the task's outputs.
		for (uint32_t k = 0; at && k < at->ncheck; k++) {
			const ArtTensor *x = &at->out[at->nout - at->ncheck + k];
			printf("  check %s: index %s in [%" PRId64 ", %" PRId64 ")%s%s%s\n", x->op, x->of,
			       x->lo, x->end, x->at[0] ? " (" : "", x->at, x->at[0] ? ")" : "");
		}
	}
	if (hasdesc)
		art_desc_free(&desc);
	free(dbytes);
	fadc_model_close(m);
	fadc_context_destroy(ctx);
	return 0;
}
