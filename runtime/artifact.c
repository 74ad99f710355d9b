// runtime/artifact.c -- the descriptor's binary format and the trailer
// (docs/ARTIFACT.md): encoding for codegen, checked decoding and file
// reading for the runtime.
//
// All integers are little-endian; strings are a u32 length and the bytes
// (no NUL); tensors are (name, role, dtype, rank, dims as i64, decl as
// i32, writeback as i32).  The decoder reads through a cursor that fails
// once, sticky, when a read would pass the end; counts are checked against
// the bytes left (times the smallest possible record) before arrays are
// allocated, so a length field of 2^32 in a 300-byte file is an error, not
// a 100 GB malloc.
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "abi.h"
#include "artifact.h"
#include "fileio.h"

// ---------------------------------------------------------------- checksums

static uint32_t crc_table[256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

static void
crc_init(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;
		for (int k = 0; k < 8; k++)
			c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
		crc_table[i] = c;
	}
}

uint32_t
art_crc32(uint32_t crc, const void *p, size_t n)
{
	// CRC-32 (IEEE 802.3, reflected, as zlib's crc32), a byte at a time,
	// from a table built once (pthread_once: threads may open artifacts at
	// once).  Rebuilding it per call cost the descriptor fuzzer most of its
	// time.
	pthread_once(&crc_once, crc_init);
	const uint8_t *b = p;
	crc = ~crc;
	for (size_t i = 0; i < n; i++)
		crc = crc_table[(crc ^ b[i]) & 0xff] ^ (crc >> 8);
	return ~crc;
}

uint64_t
art_fnv1a64(uint64_t h, const void *p, size_t n)
{
	const uint8_t *b = p;
	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 0x100000001b3ull;
	return h;
}

// ---------------------------------------------------------------- encoding

typedef struct Out {
	uint8_t *b;
	size_t n, cap;
	int oom;
} Out;

static void
put(Out *o, const void *p, size_t n)
{
	if (o->oom)
		return;
	if (o->n + n > o->cap) {
		size_t c = o->cap ? o->cap * 2 : 1024;
		while (c < o->n + n)
			c *= 2;
		uint8_t *b = realloc(o->b, c);
		if (!b) {
			o->oom = 1;
			return;
		}
		o->b = b;
		o->cap = c;
	}
	memcpy(o->b + o->n, p, n);
	o->n += n;
}

static void
put_u8(Out *o, uint8_t v)
{
	put(o, &v, 1);
}

static void
put_u32(Out *o, uint32_t v)
{
	uint8_t b[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
	put(o, b, 4);
}

static void
put_u64(Out *o, uint64_t v)
{
	put_u32(o, (uint32_t)v);
	put_u32(o, (uint32_t)(v >> 32));
}

static void
put_str(Out *o, const char *s)
{
	size_t n = s ? strlen(s) : 0;
	put_u32(o, (uint32_t)n);
	put(o, s, n);
}

static void
put_tensor(Out *o, const ArtTensor *t, int output)
{
	put_str(o, t->name);
	put_u8(o, t->role);
	put_u8(o, t->dtype);
	put_u8(o, t->rank);
	for (int i = 0; i < t->rank && i < ART_MAXDIM; i++)
		put_u64(o, (uint64_t)t->dim[i]);
	put_u32(o, (uint32_t)t->decl);
	put_u32(o, (uint32_t)t->writeback);
	if (output && t->role == ART_OUT_CHECK) {
		put_u64(o, (uint64_t)t->lo);
		put_u64(o, (uint64_t)t->end);
		put_str(o, t->op);
		put_str(o, t->of);
		put_str(o, t->at);
	}
}

// Does d have an index check (an output of role ART_OUT_CHECK)?
static int
has_checks(const ArtDesc *d)
{
	for (uint32_t i = 0; i < d->ntask; i++)
		for (uint32_t k = 0; k < d->task[i].nout; k++)
			if (d->task[i].out[k].role == ART_OUT_CHECK)
				return 1;
	return 0;
}

const uint8_t art_dtype_bytes[ART_NDTYPE] = {
#define DTYPE(N, name, bytes) bytes,
#include "dtypes.def"
};

int
art_level_symbol(const ArtDesc *d, uint32_t i, char *buf, size_t n)
{
	int w = i == 0 ? snprintf(buf, n, "%s", FADC_ENTRY_SYMBOL)
	               : snprintf(buf, n, "%s.%s", FADC_ENTRY_SYMBOL, d->level[i].cpu);
	return w > 0 && (size_t)w < n;
}

int
art_version_readable(uint32_t version)
{
	return version >= ART_FORMAT_OLDEST && version <= ART_FORMAT_VERSION;
}

// Whether a convolution record of d has a channels-last operand (format 9).
static int
has_nhwc(const ArtDesc *d)
{
	for (uint32_t i = 0; i < d->ntask; i++)
		for (uint32_t k = 0; (d->task[i].targets & ART_TARGET_CUDA) && k < d->task[i].ncuda; k++)
			if (d->task[i].kern[k].kind == ART_LAUNCH_CONV && d->task[i].kern[k].conv.nhwc)
				return 1;
	return 0;
}

// The version d asks for (tests of old files), else the oldest that holds
// it: 12 with a shard task, 11 with several CPU levels, 10 with several CUDA modules a task, 9 with a channels-last convolution operand, 8 with a convolution or
// a sequence, 7 with an index check, 6 with a choice record, 5 with several
// specialisations, 4 with a cuBLAS record, else 3.
// Whether a task of d is a shard of a batched task (format 12).
static int
has_shards(const ArtDesc *d)
{
	for (uint32_t i = 0; i < d->ntask; i++)
		if (d->task[i].shard)
			return 1;
	return 0;
}

uint32_t
art_desc_version(const ArtDesc *d)
{
	if (d->version)
		return d->version;
	if (has_shards(d))
		return ART_FORMAT_VERSION_SHARDS;
	if (d->nlevel > 1)
		return ART_FORMAT_VERSION_LEVELS;
	for (uint32_t i = 0; i < d->ntask; i++)
		if ((d->task[i].targets & ART_TARGET_CUDA) && d->task[i].nmodule > 1)
			return ART_FORMAT_VERSION_MODULES;
	uint8_t kind = ART_LAUNCH_KERNEL; // the newest kind of record in d
	for (uint32_t i = 0; i < d->ntask; i++)
		for (uint32_t k = 0; (d->task[i].targets & ART_TARGET_CUDA) && k < d->task[i].ncuda; k++)
			if (d->task[i].kern[k].kind > kind)
				kind = d->task[i].kern[k].kind;
	if (kind >= ART_LAUNCH_SEQ)
		return has_nhwc(d) ? ART_FORMAT_VERSION_NHWC : ART_FORMAT_VERSION_CONV;
	if (has_checks(d))
		return ART_FORMAT_VERSION_CHECKS;
	if (kind >= ART_LAUNCH_CHOICE)
		return 6;
	if (d->nspec > 1)
		return ART_FORMAT_VERSION_SPECS;
	return kind == ART_LAUNCH_GEMM ? 4 : ART_FORMAT_VERSION_ONE_SPEC;
}

// The newest launch record kind format v holds.
static uint8_t
kind_max(uint32_t v)
{
	return v < 3   ? ART_LAUNCH_KERNEL
	       : v < 4 ? ART_LAUNCH_ASSIGN
	       : v < 6 ? ART_LAUNCH_GEMM
	       : v < 8 ? ART_LAUNCH_CHOICE
	               : ART_LAUNCH_CONV;
}

int
art_desc_encode(const ArtDesc *d, uint8_t **out, size_t *len)
{
	Out o = {0};
	uint32_t v = art_desc_version(d);
	if (!art_version_readable(v) || (d->nspec > 1 && v < 5) ||
	    (v < ART_FORMAT_VERSION_CHECKS && has_checks(d)) ||
	    (v < ART_FORMAT_VERSION_NHWC && has_nhwc(d)) ||
	    (d->nlevel > 1 && (v < ART_FORMAT_VERSION_LEVELS || d->nlevel > ART_MAX_LEVELS)) ||
	    (v < ART_FORMAT_VERSION_SHARDS && has_shards(d)))
		return 0;
	for (uint32_t i = 0; i < d->ntask; i++) {
		const ArtTask *t = &d->task[i];
		if (!(t->targets & ART_TARGET_CUDA))
			continue;
		if (t->nmodule < 1 || t->nmodule > ART_MAX_MODULES ||
		    (t->nmodule > 1 && v < ART_FORMAT_VERSION_MODULES))
			return 0;
		for (uint32_t k = 0; k < t->ncuda; k++)
			if (t->kern[k].kind > kind_max(v) || t->kern[k].module >= t->nmodule)
				return 0;
	}
	int specs = v >= 5; // the format-5 fields
	put(&o, ART_DESC_MAGIC, 8);
	put_u32(&o, v);
	put_str(&o, d->model);
	put_u64(&o, d->source_hash);
	put_str(&o, d->options);
	put_str(&o, d->triple);
	put_str(&o, d->cpu);
	put_str(&o, d->features);
	if (v >= ART_FORMAT_VERSION_LEVELS) {
		uint32_t nl = d->nlevel > 1 ? d->nlevel : 1;
		put_u32(&o, nl);
		for (uint32_t i = 1; i < nl; i++) {
			put_str(&o, d->level[i].cpu);
			put_str(&o, d->level[i].features);
		}
	}
	put_str(&o, d->cuda_arch);
	put_u64(&o, d->images_bytes);
	put_u64(&o, d->images_hash);
	if (specs) {
		// One specialisation (a format-6 artifact without -D lists) is
		// written as one named "", which is how older formats decode.
		put_u32(&o, d->nspec ? d->nspec : 1);
		for (uint32_t i = 0; i < (d->nspec ? d->nspec : 1); i++)
			put_str(&o, d->spec && d->spec[i] ? d->spec[i] : "");
	}
	put_u32(&o, d->ndecl);
	for (uint32_t i = 0; i < d->ndecl; i++) {
		const ArtDecl *x = &d->decl[i];
		put_str(&o, x->name);
		put_u8(&o, x->kind);
		put_u8(&o, x->dtype);
		put_u8(&o, x->rank);
		for (int k = 0; k < x->rank && k < ART_MAXDIM; k++)
			put_u64(&o, (uint64_t)x->dim[k]);
		put_u32(&o, (uint32_t)x->init);
		if (specs)
			put_u32(&o, (uint32_t)x->spec);
	}
	put_u32(&o, d->ntask);
	for (uint32_t i = 0; i < d->ntask; i++) {
		const ArtTask *t = &d->task[i];
		put_str(&o, t->name);
		put_u8(&o, t->kind);
		put_u32(&o, (uint32_t)t->decl);
		if (specs)
			put_u32(&o, (uint32_t)t->spec);
		put_u64(&o, t->arena_bytes);
		put_u64(&o, t->naive_bytes);
		put_u32(&o, t->nkernel);
		put_u32(&o, t->nin);
		for (uint32_t k = 0; k < t->nin; k++)
			put_tensor(&o, &t->in[k], 0);
		put_u32(&o, t->nout);
		for (uint32_t k = 0; k < t->nout; k++)
			put_tensor(&o, &t->out[k], 1);
		put_u8(&o, t->targets);
		if (!(t->targets & ART_TARGET_CUDA))
			continue;
		if (v >= ART_FORMAT_VERSION_MODULES)
			put_u32(&o, t->nmodule);
		for (uint32_t m = 0; m < t->nmodule; m++) {
			put_u64(&o, t->module[m].cubin_off);
			put_u64(&o, t->module[m].cubin_len);
			put_u64(&o, t->module[m].ptx_off);
			put_u64(&o, t->module[m].ptx_len);
		}
		put_u32(&o, t->ncuda);
		for (uint32_t k = 0; k < t->ncuda; k++) {
			const ArtKernel *kk = &t->kern[k];
			if (v >= 3)
				put_u8(&o, kk->kind);
			put_str(&o, kk->name);
			put_u64(&o, kk->points);
			put_u32(&o, kk->grid);
			put_u8(&o, kk->runseed);
			put_u32(&o, kk->narg);
			for (uint32_t a = 0; a < kk->narg; a++) {
				put_u8(&o, kk->arg[a].kind);
				put_u32(&o, kk->arg[a].index);
				put_u64(&o, kk->arg[a].offset);
				put_u64(&o, kk->arg[a].bytes);
			}
			if (kk->kind == ART_LAUNCH_KERNEL && v >= ART_FORMAT_VERSION_MODULES)
				put_u32(&o, kk->module);
			if (kk->kind == ART_LAUNCH_GEMM) {
				const ArtGemm *g = &kk->gemm;
				put_u8(&o, g->dtype);
				put_u8(&o, g->ta);
				put_u8(&o, g->tb);
				put_u8(&o, g->tf32);
				put_u32(&o, g->m);
				put_u32(&o, g->n);
				put_u32(&o, g->k);
				put_u32(&o, g->batch);
				const uint64_t w[9] = {g->lda, g->ldb, g->ldc, g->sa, g->sb,
				                       g->sc,  g->oa,  g->ob,  g->oc};
				for (int w9 = 0; w9 < 9; w9++)
					put_u64(&o, w[w9]);
			}
			if (kk->kind == ART_LAUNCH_CONV) {
				const ArtConv *c = &kk->conv;
				put_u8(&o, c->op);
				put_u8(&o, c->dtype);
				put_u8(&o, c->tf32);
				const uint32_t w[16] = {c->n,  c->c,  c->h,  c->w,  c->k,  c->r,  c->s,  c->oh,
				                        c->ow, c->sh, c->sw, c->ph, c->pw, c->dh, c->dw, c->groups};
				for (int w16 = 0; w16 < 16; w16++)
					put_u32(&o, w[w16]);
				if (v >= ART_FORMAT_VERSION_NHWC)
					put_u8(&o, c->nhwc);
			}
		}
	}
	if (v >= ART_FORMAT_VERSION_SHARDS) {
		// The shards, after every task: nshard records, each naming its task.
		uint32_t ns = 0;
		for (uint32_t i = 0; i < d->ntask; i++)
			ns += d->task[i].shard != NULL;
		put_u32(&o, ns);
		for (uint32_t i = 0; i < d->ntask; i++) {
			const ArtShard *sh = d->task[i].shard;
			if (!sh)
				continue;
			put_u32(&o, i);
			put_str(&o, sh->of);
			put_u32(&o, sh->k);
			put_u32(&o, sh->n);
			put_u64(&o, (uint64_t)sh->lo);
			put_u64(&o, (uint64_t)sh->hi);
			put_u64(&o, (uint64_t)sh->total);
			put_u32(&o, sh->nout);
			for (uint32_t k = 0; k < sh->nout; k++) {
				const ArtShardOut *x = &sh->out[k];
				put_u8(&o, x->rank);
				for (int r = 0; r < x->rank && r < ART_MAXDIM; r++)
					put_u64(&o, (uint64_t)x->dim[r]);
				const int64_t w[5] = {x->outer, x->mid, x->inner, x->off, x->cnt};
				for (int w5 = 0; w5 < 5; w5++)
					put_u64(&o, (uint64_t)w[w5]);
			}
		}
	}
	if (o.oom) {
		free(o.b);
		return 0;
	}
	*out = o.b;
	*len = o.n;
	return 1;
}

// ---------------------------------------------------------------- decoding

typedef struct In {
	const uint8_t *p, *end;
	int bad; // sticky: a read went past the end
	char *err;
	size_t errlen;
	int failed; // a message was written
} In;

static int fail(In *in, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int
fail(In *in, const char *fmt, ...)
{
	if (!in->failed && in->errlen) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(in->err, in->errlen, fmt, ap);
		va_end(ap);
	}
	in->failed = 1;
	in->bad = 1;
	return 0;
}

static size_t
left(const In *in)
{
	return in->bad ? 0 : (size_t)(in->end - in->p);
}

static int
get(In *in, void *v, size_t n)
{
	if (left(in) < n) {
		if (!in->bad)
			fail(in, "descriptor truncated");
		memset(v, 0, n);
		return 0;
	}
	memcpy(v, in->p, n);
	in->p += n;
	return 1;
}

static uint8_t
get_u8(In *in)
{
	uint8_t v;
	get(in, &v, 1);
	return v;
}

static uint32_t
get_u32(In *in)
{
	uint8_t b[4];
	get(in, b, 4);
	return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

static uint64_t
get_u64(In *in)
{
	uint64_t lo = get_u32(in);
	return lo | (uint64_t)get_u32(in) << 32;
}

static char *
get_str(In *in)
{
	uint32_t n = get_u32(in);
	if (in->bad)
		return NULL;
	if (n > left(in)) {
		fail(in, "descriptor: a string of %u bytes passes the end", n);
		return NULL;
	}
	char *s = malloc((size_t)n + 1);
	if (!s) {
		fail(in, "out of memory");
		return NULL;
	}
	memcpy(s, in->p, n);
	s[n] = 0;
	in->p += n;
	if (strlen(s) != n) {
		free(s);
		fail(in, "descriptor: a string contains a NUL byte");
		return NULL;
	}
	return s;
}

// A count of records of at least `min` bytes each must fit what is left.
static int
check_count(In *in, uint32_t n, size_t min, const char *what)
{
	if (in->bad)
		return 0;
	if ((uint64_t)n * min > left(in))
		return fail(in, "descriptor: %u %s cannot fit in the %zu bytes left", n, what, left(in));
	return 1;
}

static int
get_shape(In *in, uint8_t *dtype, uint8_t *rank, int64_t *dim, const char *name)
{
	*dtype = get_u8(in);
	*rank = get_u8(in);
	if (in->bad)
		return 0;
	if (*dtype >= ART_NDTYPE)
		return fail(in, "descriptor: '%s' has an unknown dtype %u", name ? name : "?", *dtype);
	if (*rank > ART_MAXDIM)
		return fail(in, "descriptor: '%s' has rank %u (at most %d)", name ? name : "?", *rank,
		            ART_MAXDIM);
	for (int i = 0; i < *rank; i++) {
		dim[i] = (int64_t)get_u64(in);
		if (!in->bad && dim[i] < 0)
			return fail(in, "descriptor: '%s' has a negative dimension", name ? name : "?");
	}
	return !in->bad;
}

// An input (output 0) or an output of a descriptor of format `version`:
// outputs of role ART_OUT_CHECK (format 7) carry their range and texts.
static int
get_tensor(In *in, ArtTensor *t, int output, uint32_t version)
{
	t->name = get_str(in);
	t->role = get_u8(in);
	if (!get_shape(in, &t->dtype, &t->rank, t->dim, t->name))
		return 0;
	t->decl = (int32_t)get_u32(in);
	t->writeback = (int32_t)get_u32(in);
	uint8_t maxrole = !output ? ART_ROLE_ARG
	                  : version >= ART_FORMAT_VERSION_CHECKS ? ART_OUT_CHECK
	                                                         : ART_OUT_VALUE;
	if (!in->bad && t->role > maxrole)
		return fail(in, "descriptor: '%s' has an unknown role %u", t->name, t->role);
	if (output && t->role == ART_OUT_CHECK) {
		t->lo = (int64_t)get_u64(in);
		t->end = (int64_t)get_u64(in);
		t->op = get_str(in);
		t->of = get_str(in);
		t->at = get_str(in);
	}
	return !in->bad;
}

void
art_desc_free(ArtDesc *d)
{
	if (!d)
		return;
	free(d->model);
	free(d->options);
	free(d->triple);
	for (uint32_t i = 1; d->level && i < d->nlevel; i++) { // level 0 borrows cpu, features
		free(d->level[i].cpu);
		free(d->level[i].features);
	}
	free(d->level);
	free(d->cpu);
	free(d->features);
	free(d->cuda_arch);
	free(d->images);
	for (uint32_t i = 0; d->spec && i < d->nspec; i++)
		free(d->spec[i]);
	free(d->spec);
	if (d->decl)
		for (uint32_t i = 0; i < d->ndecl; i++)
			free(d->decl[i].name);
	if (d->task)
		for (uint32_t i = 0; i < d->ntask; i++) {
			ArtTask *t = &d->task[i];
			free(t->name);
			for (uint32_t k = 0; t->in && k < t->nin; k++)
				free(t->in[k].name);
			for (uint32_t k = 0; t->out && k < t->nout; k++) {
				free(t->out[k].name);
				free(t->out[k].op);
				free(t->out[k].of);
				free(t->out[k].at);
			}
			free(t->in);
			free(t->out);
			free(t->module);
			for (uint32_t k = 0; t->kern && k < t->ncuda; k++) {
				free(t->kern[k].name);
				free(t->kern[k].arg);
			}
			free(t->kern);
			if (t->shard) {
				free(t->shard->of);
				free(t->shard->out);
				free(t->shard);
			}
		}
	free(d->decl);
	free(d->task);
	memset(d, 0, sizeof *d);
}

// Smallest encodings: a tensor is 4 + 1 + 1 + 1 + 4 + 4 bytes, a declaration
// 4 + 3 + 4, a task 4 + 1 + 4 + 8 + 8 + 4 + 4 + 4 + 1 (targets).
#define MIN_TENSOR 15
#define MIN_DECL 11
#define MIN_TASK 38
// A launch record: kind, name, points, grid, runseed, narg; an argument 1 + 4 + 8 + 8.
#define MIN_KERNEL 22
#define MIN_KARG 21

// The last element an operand of a GEMM touches, plus one, times the
// element size, fits the argument's bytes: base + (batch - 1) s +
// (rows - 1) ld + (cols - 1) + 1 elements, with ld the stride of the
// operand's outer index in memory (rows, or the columns when transposed).
static int
gemm_fits(uint64_t esize, uint64_t base, uint64_t batch, uint64_t s, uint64_t outer, uint64_t ld,
          uint64_t inner, uint64_t bytes)
{
	uint64_t a, b, c, n;
	if (__builtin_mul_overflow(batch - 1, s, &a) || __builtin_mul_overflow(outer - 1, ld, &b) ||
	    __builtin_add_overflow(a, b, &c) || __builtin_add_overflow(c, base, &c) ||
	    __builtin_add_overflow(c, inner, &n) || __builtin_mul_overflow(n, esize, &n))
		return 0;
	return n <= bytes;
}

// A GEMM record: C an output or the arena (never an input), the extents
// and leading dimensions in cuBLAS's range and consistent with the
// transposes (what cuBLAS itself would refuse), every operand inside its
// argument.  So a damaged record is refused here, never a device fault.
static int
gemm_good(const ArtKernel *kk)
{
	const ArtGemm *g = &kk->gemm;
	const uint64_t IMAX = 0x7fffffff;
	if (kk->narg != 3 || kk->runseed || kk->grid || kk->arg[0].kind == ART_ARG_INPUT ||
	    (g->dtype != ART_F32 && g->dtype != ART_F64) || g->ta > 1 || g->tb > 1 || g->tf32 > 1 ||
	    !g->m || !g->n || !g->k || !g->batch || g->m > IMAX || g->n > IMAX || g->k > IMAX ||
	    g->batch > IMAX || g->lda > IMAX || g->ldb > IMAX || g->ldc > IMAX ||
	    g->lda < (g->ta ? g->m : g->k) || g->ldb < (g->tb ? g->k : g->n) || g->ldc < g->n ||
	    kk->points != (uint64_t)g->batch * g->m * g->n)
		return 0;
	uint64_t es = g->dtype == ART_F64 ? 8 : 4;
	return gemm_fits(es, g->oc, g->batch, g->sc, g->m, g->ldc, g->n, kk->arg[0].bytes) &&
	       gemm_fits(es, g->oa, g->batch, g->sa, g->ta ? g->k : g->m, g->lda,
	                 g->ta ? g->m : g->k, kk->arg[1].bytes) &&
	       gemm_fits(es, g->ob, g->batch, g->sb, g->tb ? g->n : g->k, g->ldb,
	                 g->tb ? g->k : g->n, kk->arg[2].bytes);
}

// a * b * c * d elements of 4 or 8 bytes (es) fit `bytes`, without overflow.
static int
dense_fits(uint64_t es, uint64_t a, uint64_t b, uint64_t c, uint64_t d, uint64_t bytes)
{
	uint64_t n;
	if (__builtin_mul_overflow(a, b, &n) || __builtin_mul_overflow(n, c, &n) ||
	    __builtin_mul_overflow(n, d, &n) || __builtin_mul_overflow(n, es, &n))
		return 0;
	return n <= bytes;
}

// A convolution record: f32, a known op, every extent 1 .. INT32_MAX (cuDNN's
// int dimensions), groups dividing both channel counts, the output extent
// the window arithmetic gives (ir/interp.c's), the written tensor an output
// or the arena, each tensor inside its argument, points its elements.  So a
// damaged record is refused here, never a device fault.
static int
conv_good(const ArtKernel *kk)
{
	const ArtConv *c = &kk->conv;
	const uint64_t IMAX = 0x7fffffff;
	const uint32_t ext[] = {c->n, c->c, c->h, c->w, c->k, c->r, c->s, c->oh, c->ow,
	                        c->sh, c->sw, c->dh, c->dw, c->groups};
	if (kk->narg != 3 || kk->runseed || kk->grid || kk->arg[0].kind == ART_ARG_INPUT ||
	    c->op > ART_CONV_BWD_FILTER || c->dtype != ART_F32 || c->tf32 > 1 || c->ph > IMAX ||
	    c->pw > IMAX)
		return 0;
	// Channels-last operands: activations only, the filter's bit clear
	// (forward and backward data: b; backward filter: the written dw).
	if (c->nhwc > 7 || (c->nhwc & (c->op == ART_CONV_BWD_FILTER ? 1 : 4)))
		return 0;
	for (size_t i = 0; i < sizeof ext / sizeof ext[0]; i++)
		if (!ext[i] || ext[i] > IMAX)
			return 0;
	if (c->c % c->groups || c->k % c->groups)
		return 0;
	// The window's reach and the output extent, in 64 bits (no overflow:
	// every term is below 2^32).
	int64_t eh = (int64_t)c->h + 2 * (int64_t)c->ph - (int64_t)c->dh * (c->r - 1) - 1;
	int64_t ew = (int64_t)c->w + 2 * (int64_t)c->pw - (int64_t)c->dw * (c->s - 1) - 1;
	if (eh < 0 || ew < 0 || (uint64_t)(eh / c->sh + 1) != c->oh ||
	    (uint64_t)(ew / c->sw + 1) != c->ow)
		return 0;
	// x, w and y as (written, a, b) for the op.
	const uint64_t xs[4] = {c->n, c->c, c->h, c->w}, ws[4] = {c->k, c->c / c->groups, c->r, c->s},
	               ys[4] = {c->n, c->k, c->oh, c->ow};
	const uint64_t *sh[3] = {ys, xs, ws};
	if (c->op == ART_CONV_BWD_DATA)
		sh[0] = xs, sh[1] = ys, sh[2] = ws;
	else if (c->op == ART_CONV_BWD_FILTER)
		sh[0] = ws, sh[1] = xs, sh[2] = ys;
	for (int a = 0; a < 3; a++)
		if (!dense_fits(4, sh[a][0], sh[a][1], sh[a][2], sh[a][3], kk->arg[a].bytes))
			return 0;
	return kk->points == sh[0][0] * sh[0][1] * sh[0][2] * sh[0][3];
}

// A choice record k of t: no work and no arguments of its own, then its
// 2 .. ART_MAX_CHOICE candidates, each a kernel, a GEMM, a convolution or
// a sequence (format 8: ART_LAUNCH_SEQ, then its 1 .. ART_MAX_SEQ records,
// each a kernel or a GEMM), never another choice or a host step, whose
// argument 0 (a sequence's: its last record's) is the same output for all
// (they compute the same result; the runtime runs one of them).  Fills the
// spans of the choice and its sequences.
static int
choice_good(ArtTask *t, uint32_t k)
{
	ArtKernel *kk = &t->kern[k];
	if (kk->narg || kk->grid || kk->runseed || kk->points < 2 || kk->points > ART_MAX_CHOICE ||
	    kk->points >= t->ncuda - k)
		return 0;
	const ArtKArg *o = NULL;
	uint32_t j = k + 1;
	for (uint64_t cand = 0; cand < kk->points; cand++) {
		if (j >= t->ncuda)
			return 0;
		ArtKernel *c = &t->kern[j];
		if (c->kind == ART_LAUNCH_SEQ) {
			if (c->narg || c->grid || c->runseed || !c->points || c->points > ART_MAX_SEQ ||
			    c->points >= t->ncuda - j)
				return 0;
			for (uint32_t m = j + 1; m <= j + c->points; m++)
				if ((t->kern[m].kind != ART_LAUNCH_KERNEL &&
				     t->kern[m].kind != ART_LAUNCH_GEMM) ||
				    !t->kern[m].narg)
					return 0;
			c->span = (uint32_t)c->points;
			j += c->span;
			c = &t->kern[j]; // the last record: the output
		} else if ((c->kind != ART_LAUNCH_KERNEL && c->kind != ART_LAUNCH_GEMM &&
		            c->kind != ART_LAUNCH_CONV) ||
		           !c->narg)
			return 0;
		if (!o)
			o = &c->arg[0];
		if (o->kind != c->arg[0].kind || o->index != c->arg[0].index ||
		    o->offset != c->arg[0].offset || o->bytes != c->arg[0].bytes)
			return 0;
		j++;
	}
	kk->span = j - k - 1;
	return 1;
}

// The shard records (format 12), after the tasks: each names a task,
// at most once.  Their consistency with the task is shard_good's.
static int
decode_shards(In *in, ArtDesc *d)
{
	uint32_t ns = get_u32(in);
	if (!check_count(in, ns, 44, "shard records"))
		return 0;
	for (uint32_t i = 0; i < ns && !in->bad; i++) {
		uint32_t ti = get_u32(in);
		if (in->bad)
			return 0;
		if (ti >= d->ntask || d->task[ti].shard)
			return fail(in, "descriptor: shard record %u names task %u (%s)", i, ti,
			            ti >= d->ntask ? "no such task" : "twice");
		ArtShard *sh = calloc(1, sizeof *sh);
		if (!sh)
			return fail(in, "out of memory");
		d->task[ti].shard = sh;
		sh->of = get_str(in);
		sh->k = get_u32(in);
		sh->n = get_u32(in);
		sh->lo = (int64_t)get_u64(in);
		sh->hi = (int64_t)get_u64(in);
		sh->total = (int64_t)get_u64(in);
		uint32_t no = get_u32(in);
		if (!check_count(in, no, 41, "shard outputs"))
			return 0;
		if (!(sh->out = calloc(no ? no : 1, sizeof *sh->out)))
			return fail(in, "out of memory");
		sh->nout = no;
		for (uint32_t k = 0; k < no && !in->bad; k++) {
			ArtShardOut *x = &sh->out[k];
			x->rank = get_u8(in);
			if (!in->bad && x->rank > ART_MAXDIM)
				return fail(in, "descriptor: a shard output of rank %u (at most %d)", x->rank,
				            ART_MAXDIM);
			for (int r = 0; r < x->rank; r++)
				x->dim[r] = (int64_t)get_u64(in);
			int64_t *w[5] = {&x->outer, &x->mid, &x->inner, &x->off, &x->cnt};
			for (int w5 = 0; w5 < 5; w5++)
				*w[w5] = (int64_t)get_u64(in);
		}
	}
	return !in->bad;
}

// a * b into *r, 0 on overflow (both >= 0).
static int
mul_ok(int64_t a, int64_t b, int64_t *r)
{
	return !__builtin_mul_overflow(a, b, r);
}

// A shard record agrees with its task: a user task named "<of>:<k>/<n>"
// (or "<of>:<k>/<n>:<weights>": its rows are lo, hi whatever they say),
// 0 <= k < n <= ART_MAX_SHARDS, 0 <= lo < hi <= total, one placement per
// output of the user's, each slice [:, off .. off + cnt, :] inside its
// [outer, mid, inner] view of a whole output of outer mid inner elements
// (its shape's), and holding as many elements as the task's output.
static int
shard_good(const ArtTask *t)
{
	const ArtShard *sh = t->shard;
	char name[300];
	if (t->kind != ART_TASK || !sh->of[0] || sh->n < 1 || sh->n > ART_MAX_SHARDS ||
	    sh->k >= sh->n || sh->lo < 0 || sh->lo >= sh->hi || sh->hi > sh->total ||
	    sh->nout != t->nout - t->ncheck)
		return 0;
	int w = snprintf(name, sizeof name, "%s:%u/%u", sh->of, sh->k, sh->n);
	if (w < 0 || (size_t)w >= sizeof name || strncmp(name, t->name, (size_t)w) ||
	    (t->name[w] && t->name[w] != ':')) // (":w0+w1...": an uneven split's weights)
		return 0;
	for (uint32_t k = 0; k < sh->nout; k++) {
		const ArtShardOut *x = &sh->out[k];
		const ArtTensor *o = &t->out[k];
		int64_t whole = 1, view, slice, part = 1;
		for (int r = 0; r < x->rank; r++)
			if (x->dim[r] < 0 || !mul_ok(whole, x->dim[r], &whole))
				return 0;
		for (int r = 0; r < o->rank; r++)
			if (!mul_ok(part, o->dim[r], &part))
				return 0;
		if (x->outer < 0 || x->mid < 1 || x->inner < 0 || x->off < 0 || x->cnt < 1 ||
		    x->off > x->mid - x->cnt || !mul_ok(x->outer, x->mid, &view) ||
		    !mul_ok(view, x->inner, &view) || view != whole ||
		    !mul_ok(x->outer, x->cnt, &slice) || !mul_ok(slice, x->inner, &slice) || slice != part)
			return 0;
	}
	return 1;
}

static int
decode(In *in, ArtDesc *d)
{
	char magic[8];
	get(in, magic, 8);
	if (in->bad || memcmp(magic, ART_DESC_MAGIC, 8))
		return fail(in, "descriptor: bad magic");
	d->version = get_u32(in);
	if (!in->bad && !art_version_readable(d->version))
		return fail(in, "descriptor format version %u, this runtime reads versions %d to %d",
		            d->version, ART_FORMAT_OLDEST, ART_FORMAT_VERSION);
	int specs = d->version >= 5; // the format-5 fields
	d->model = get_str(in);
	d->source_hash = get_u64(in);
	d->options = get_str(in);
	d->triple = get_str(in);
	d->cpu = get_str(in);
	d->features = get_str(in);
	// The CPU levels: a list from format 11; one, cpu and features, before.
	uint32_t nl = d->version >= ART_FORMAT_VERSION_LEVELS ? get_u32(in) : 1;
	if (!in->bad && (nl < 1 || nl > ART_MAX_LEVELS))
		return fail(in, "descriptor: %u CPU levels (1 to %d)", nl, ART_MAX_LEVELS);
	if (!in->bad) {
		if (!(d->level = calloc(nl, sizeof *d->level)))
			return fail(in, "out of memory");
		d->nlevel = nl;
		d->level[0].cpu = d->cpu;
		d->level[0].features = d->features;
		for (uint32_t i = 1; i < nl && !in->bad; i++) {
			d->level[i].cpu = get_str(in);
			d->level[i].features = get_str(in);
		}
		for (uint32_t i = 0; i < nl && !in->bad; i++) {
			// The name is part of a symbol's: short, plain, and each level once.
			const char *c = d->level[i].cpu;
			size_t n = strlen(c);
			int plain = n > 0 && n < 64;
			for (size_t k = 0; plain && k < n; k++)
				plain = (c[k] >= 'a' && c[k] <= 'z') || (c[k] >= 'A' && c[k] <= 'Z') ||
				        (c[k] >= '0' && c[k] <= '9') || c[k] == '.' || c[k] == '_' || c[k] == '-';
			if (nl > 1 && !plain)
				return fail(in, "descriptor: CPU level %u has a bad name", i);
			for (uint32_t j = 0; j < i; j++)
				if (!strcmp(c, d->level[j].cpu))
					return fail(in, "descriptor: the CPU level %s is listed twice", c);
		}
	}
	d->cuda_arch = get_str(in);
	d->images_bytes = get_u64(in);
	d->images_hash = get_u64(in);
	// The specialisations: written by format 5; one without a name before.
	uint32_t ns = specs ? get_u32(in) : 1;
	if (!in->bad && (ns < 1 || ns > ART_MAX_SPECS))
		return fail(in, "descriptor: %u specialisations (1 to %d)", ns, ART_MAX_SPECS);
	d->spec = calloc(ns, sizeof *d->spec);
	if (!d->spec)
		return fail(in, "out of memory");
	d->nspec = ns;
	for (uint32_t i = 0; i < ns && !in->bad; i++)
		if (!(d->spec[i] = specs ? get_str(in) : calloc(1, 1)) && !in->bad)
			return fail(in, "out of memory");
	uint32_t nd = get_u32(in);
	if (!check_count(in, nd, MIN_DECL, "declarations"))
		return 0;
	d->decl = calloc(nd ? nd : 1, sizeof *d->decl);
	if (!d->decl)
		return fail(in, "out of memory");
	d->ndecl = nd;
	for (uint32_t i = 0; i < nd && !in->bad; i++) {
		ArtDecl *x = &d->decl[i];
		x->name = get_str(in);
		x->kind = get_u8(in);
		if (!get_shape(in, &x->dtype, &x->rank, x->dim, x->name))
			return 0;
		x->init = (int32_t)get_u32(in);
		x->spec = specs ? (int32_t)get_u32(in) : -1;
	}
	uint32_t nt = get_u32(in);
	if (!check_count(in, nt, MIN_TASK, "tasks"))
		return 0;
	d->task = calloc(nt ? nt : 1, sizeof *d->task);
	if (!d->task)
		return fail(in, "out of memory");
	d->ntask = nt;
	for (uint32_t i = 0; i < nt && !in->bad; i++) {
		ArtTask *t = &d->task[i];
		t->name = get_str(in);
		t->kind = get_u8(in);
		t->decl = (int32_t)get_u32(in);
		t->spec = specs ? (int32_t)get_u32(in) : t->kind == ART_INIT ? -1 : 0;
		t->arena_bytes = get_u64(in);
		t->naive_bytes = get_u64(in);
		t->nkernel = get_u32(in);
		uint32_t n = get_u32(in);
		if (!check_count(in, n, MIN_TENSOR, "inputs"))
			return 0;
		t->in = calloc(n ? n : 1, sizeof *t->in);
		if (!t->in)
			return fail(in, "out of memory");
		t->nin = n;
		for (uint32_t k = 0; k < n && !in->bad; k++)
			get_tensor(in, &t->in[k], 0, d->version);
		n = get_u32(in);
		if (!check_count(in, n, MIN_TENSOR, "outputs"))
			return 0;
		t->out = calloc(n ? n : 1, sizeof *t->out);
		if (!t->out)
			return fail(in, "out of memory");
		t->nout = n;
		for (uint32_t k = 0; k < n && !in->bad; k++)
			get_tensor(in, &t->out[k], 1, d->version);
		t->targets = get_u8(in);
		if (!in->bad && (t->targets & ~(ART_TARGET_CPU | ART_TARGET_CUDA)))
			return fail(in, "descriptor: task '%s' has unknown targets %#x", t->name,
			            t->targets);
		if (!(t->targets & ART_TARGET_CUDA))
			continue;
		n = d->version >= ART_FORMAT_VERSION_MODULES ? get_u32(in) : 1;
		if (!in->bad && (n < 1 || n > ART_MAX_MODULES))
			return fail(in, "descriptor: task '%s' has %u CUDA modules (1 to %d)", t->name, n,
			            ART_MAX_MODULES);
		if (!check_count(in, n, 32, "CUDA modules"))
			return 0;
		if (!(t->module = calloc(n, sizeof *t->module)))
			return fail(in, "out of memory");
		t->nmodule = n;
		for (uint32_t m = 0; m < n; m++) {
			t->module[m].cubin_off = get_u64(in);
			t->module[m].cubin_len = get_u64(in);
			t->module[m].ptx_off = get_u64(in);
			t->module[m].ptx_len = get_u64(in);
		}
		n = get_u32(in);
		if (!check_count(in, n, MIN_KERNEL, "CUDA kernels"))
			return 0;
		t->kern = calloc(n ? n : 1, sizeof *t->kern);
		if (!t->kern)
			return fail(in, "out of memory");
		t->ncuda = n;
		for (uint32_t k = 0; k < n && !in->bad; k++) {
			ArtKernel *kk = &t->kern[k];
			kk->kind = d->version >= 3 ? get_u8(in) : ART_LAUNCH_KERNEL;
			kk->name = get_str(in);
			kk->points = get_u64(in);
			kk->grid = get_u32(in);
			kk->runseed = get_u8(in);
			uint32_t na = get_u32(in);
			if (!check_count(in, na, MIN_KARG, "kernel arguments"))
				return 0;
			kk->arg = calloc(na ? na : 1, sizeof *kk->arg);
			if (!kk->arg)
				return fail(in, "out of memory");
			kk->narg = na;
			for (uint32_t a = 0; a < na && !in->bad; a++) {
				kk->arg[a].kind = get_u8(in);
				kk->arg[a].index = get_u32(in);
				kk->arg[a].offset = get_u64(in);
				kk->arg[a].bytes = get_u64(in);
			}
			if (kk->kind == ART_LAUNCH_KERNEL && d->version >= ART_FORMAT_VERSION_MODULES)
				kk->module = get_u32(in);
			if (kk->kind == ART_LAUNCH_GEMM && d->version >= 4) {
				ArtGemm *g = &kk->gemm;
				g->dtype = get_u8(in);
				g->ta = get_u8(in);
				g->tb = get_u8(in);
				g->tf32 = get_u8(in);
				g->m = get_u32(in);
				g->n = get_u32(in);
				g->k = get_u32(in);
				g->batch = get_u32(in);
				uint64_t *w[9] = {&g->lda, &g->ldb, &g->ldc, &g->sa, &g->sb,
				                  &g->sc,  &g->oa,  &g->ob,  &g->oc};
				for (int w9 = 0; w9 < 9; w9++)
					*w[w9] = get_u64(in);
			}
			if (kk->kind == ART_LAUNCH_CONV && d->version >= ART_FORMAT_VERSION_CONV) {
				ArtConv *c = &kk->conv;
				c->op = get_u8(in);
				c->dtype = get_u8(in);
				c->tf32 = get_u8(in);
				uint32_t *w[16] = {&c->n,  &c->c,  &c->h,  &c->w,  &c->k,  &c->r,
				                   &c->s,  &c->oh, &c->ow, &c->sh, &c->sw, &c->ph,
				                   &c->pw, &c->dh, &c->dw, &c->groups};
				for (int w16 = 0; w16 < 16; w16++)
					*w[w16] = get_u32(in);
				c->nhwc = d->version >= ART_FORMAT_VERSION_NHWC ? get_u8(in) : 0;
			}
		}
	}
	if (d->version >= ART_FORMAT_VERSION_SHARDS && !decode_shards(in, d))
		return 0;
	if (in->bad)
		return 0;
	if (in->p != in->end)
		return fail(in, "descriptor: %zu bytes after its end", (size_t)(in->end - in->p));
	// Cross-references.
	for (uint32_t i = 0; i < d->ndecl; i++) {
		const ArtDecl *x = &d->decl[i];
		if (x->kind > ART_CONST || x->init < -1 || x->init >= (int32_t)d->ntask ||
		    (x->init >= 0 && d->task[x->init].kind != ART_INIT) || x->spec < -1 ||
		    x->spec >= (int32_t)d->nspec)
			return fail(in, "descriptor: declaration '%s' is malformed", x->name);
		// A name means one declaration in each specialisation.
		for (uint32_t k = 0; k < i; k++)
			if (!strcmp(d->decl[k].name, x->name) &&
			    (x->spec < 0 || d->decl[k].spec < 0 || d->decl[k].spec == x->spec))
				return fail(in, "descriptor: declaration '%s' twice in one specialisation",
				            x->name);
	}
	for (uint32_t i = 0; i < d->ntask; i++) {
		const ArtTask *t = &d->task[i];
		if (t->kind > ART_INIT || t->decl < -1 || t->decl >= (int32_t)d->ndecl ||
		    (t->kind == ART_INIT && t->decl < 0) || t->spec < -1 ||
		    t->spec >= (int32_t)d->nspec || (t->kind == ART_TASK && t->spec < 0) ||
		    (t->kind == ART_INIT && t->spec != d->decl[t->decl].spec))
			return fail(in, "descriptor: task '%s' is malformed", t->name);
		for (uint32_t k = 0; k < t->nin; k++) {
			const ArtTensor *x = &t->in[k];
			int32_t dl = x->decl;
			// ... and one of the task's own specialisation, or a shared one.
			if (x->role == ART_ROLE_DECL &&
			    (dl < 0 || dl >= (int32_t)d->ndecl || d->decl[dl].dtype != x->dtype ||
			     d->decl[dl].rank != x->rank ||
			     memcmp(d->decl[dl].dim, x->dim, sizeof(int64_t) * x->rank) ||
			     (d->decl[dl].spec >= 0 && d->decl[dl].spec != t->spec)))
				return fail(in, "descriptor: input '%s' of task '%s' does not match its declaration",
				            x->name, t->name);
		}
		((ArtTask *)t)->spec_name = t->spec >= 0 ? d->spec[t->spec] : "";
		for (uint32_t k = 0; k < t->nout; k++)
			if (t->out[k].writeback < -1 || t->out[k].writeback >= (int32_t)t->nin)
				return fail(in, "descriptor: output '%s' of task '%s' is malformed",
				            t->out[k].name, t->name);
		// Index checks: a suffix of the outputs of a user's task, each an
		// i64[2] (min, max) with no write-back and a range lo <= end.
		uint32_t nc = 0;
		for (uint32_t k = t->nout; k > 0 && t->out[k - 1].role == ART_OUT_CHECK; k--)
			nc++;
		for (uint32_t k = 0; k < t->nout; k++) {
			const ArtTensor *x = &t->out[k];
			if (x->role != ART_OUT_CHECK)
				continue;
			if (k < t->nout - nc)
				return fail(in, "descriptor: index check '%s' of task '%s' is not after its "
				                "outputs", x->name, t->name);
			if (t->kind != ART_TASK || x->dtype != ART_I64 || x->rank != 1 || x->dim[0] != 2 ||
			    x->writeback != -1 || x->decl != -1 || x->lo > x->end || !x->op[0])
				return fail(in, "descriptor: index check '%s' of task '%s' is malformed",
				            x->name, t->name);
		}
		((ArtTask *)t)->ncheck = nc;
		if (t->shard && !shard_good(t))
			return fail(in, "descriptor: the shard record of task '%s' is malformed", t->name);
		// CUDA images inside the image section; every kernel argument
		// inside what it names (an input, an output, the arena).
		if (!(t->targets & ART_TARGET_CUDA))
			continue;
		uint64_t ib = d->images_bytes;
		for (uint32_t m = 0; m < t->nmodule; m++) {
			const ArtModule *x = &t->module[m];
			if (!d->cuda_arch[0] || x->cubin_off > ib || x->cubin_len > ib - x->cubin_off ||
			    x->ptx_off > ib || x->ptx_len > ib - x->ptx_off || !x->cubin_len ||
			    !x->ptx_len != !t->module[0].ptx_len)
				return fail(in, "descriptor: the CUDA images of task '%s' are not inside the "
				                "image section", t->name);
		}
		// Records a choice covers (a sequence and a convolution are only
		// ever candidates: cuDNN is optional, so one outside a choice
		// could not run everywhere).
		for (uint32_t k = 0, cend = 0; k < t->ncuda; k++) {
			const ArtKernel *kk = &t->kern[k];
			if (!kk->name[0] || kk->runseed > 1 || kk->kind > kind_max(d->version) ||
			    kk->module >= t->nmodule)
				return fail(in, "descriptor: CUDA kernel %u of task '%s' is malformed", k,
				            t->name);
			if (kk->kind == ART_LAUNCH_CHOICE) {
				if (k < cend || !choice_good((ArtTask *)t, k))
					return fail(in, "descriptor: choice record %u of task '%s' is malformed",
					            k, t->name);
				cend = k + 1 + kk->span;
			}
			if ((kk->kind == ART_LAUNCH_SEQ || kk->kind == ART_LAUNCH_CONV) && k >= cend)
				return fail(in, "descriptor: record %u of task '%s' is a %s outside a choice",
				            k, t->name, kk->kind == ART_LAUNCH_SEQ ? "sequence" : "convolution");
			if (kk->kind == ART_LAUNCH_GEMM && !gemm_good(kk))
				return fail(in, "descriptor: GEMM record %u of task '%s' is malformed", k,
				            t->name);
			if (kk->kind == ART_LAUNCH_CONV && !conv_good(kk))
				return fail(in, "descriptor: convolution record %u of task '%s' is malformed",
				            k, t->name);
			// A host step: an i64[rows] output and an f64[rows, cols] cost,
			// rows = points and cols = grid, neither empty.
			if (kk->kind == ART_LAUNCH_ASSIGN &&
			    (kk->narg != 2 || !kk->points || !kk->grid || kk->runseed ||
			     kk->arg[0].bytes != 8 * kk->points ||
			     kk->arg[1].bytes / 8 / kk->points != kk->grid ||
			     kk->arg[1].bytes != 8 * kk->points * kk->grid))
				return fail(in, "descriptor: host step %u of task '%s' is malformed", k,
				            t->name);
			for (uint32_t a = 0; a < kk->narg; a++) {
				const ArtKArg *x = &kk->arg[a];
				int good = x->kind == ART_ARG_ARENA
				               ? x->offset <= t->arena_bytes &&
				                     x->bytes <= t->arena_bytes - x->offset
				           : x->kind == ART_ARG_INPUT  ? x->index < t->nin && !x->offset
				           : x->kind == ART_ARG_OUTPUT ? x->index < t->nout && !x->offset
				                                       : 0;
				if (!good)
					return fail(in, "descriptor: argument %u of CUDA kernel '%s' (task "
					                "'%s') is malformed", a, kk->name, t->name);
			}
		}
	}
	return 1;
}

int
art_desc_decode(const uint8_t *buf, size_t len, ArtDesc *d, char *err, size_t errlen)
{
	memset(d, 0, sizeof *d);
	In in = {.p = buf, .end = buf + len, .err = err, .errlen = errlen};
	if (errlen)
		err[0] = 0;
	if (!decode(&in, d)) {
		if (!in.failed)
			fail(&in, "descriptor is malformed");
		art_desc_free(d);
		return 0;
	}
	return 1;
}

// ---------------------------------------------------------------- trailer

static void
le32(uint8_t *b, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		b[i] = (uint8_t)(v >> (8 * i));
}

static void
le64(uint8_t *b, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		b[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t
rd32(const uint8_t *b)
{
	return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

static uint64_t
rd64(const uint8_t *b)
{
	return rd32(b) | (uint64_t)rd32(b + 4) << 32;
}

// Layout: magic[8] version:u32 flags:u32 desc_offset:u64 desc_len:u64
// file_crc:u32 trailer_crc:u32 (of the 36 bytes before it).
void
art_trailer_make(uint8_t t[ART_TRAILER_SIZE], uint32_t version, uint64_t size, uint64_t desc_len,
                 uint32_t crc)
{
	memcpy(t, ART_TRAILER_MAGIC, 8);
	le32(t + 8, version);
	le32(t + 12, 0);
	le64(t + 16, size - desc_len);
	le64(t + 24, desc_len);
	le32(t + 32, crc);
	le32(t + 36, art_crc32(0, t, 36));
}

static int
ferr(char *err, size_t errlen, const char *path, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static int
ferr(char *err, size_t errlen, const char *path, const char *fmt, ...)
{
	if (!errlen)
		return 0;
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	fio_msg(err, errlen, "%s: %s", path, msg); // a long path keeps the reason
	return 0;
}

ArtRead
art_read(const char *path, ArtDesc *d, uint8_t **desc_bytes, size_t *desc_len, char *err,
         size_t errlen)
{
	memset(d, 0, sizeof *d);
	*desc_bytes = NULL;
	*desc_len = 0;
	// Only a regular file, checked before any read (a FIFO would block).
	int fd = fio_open_read(path, err, errlen);
	if (fd < 0)
		return ART_READ_IO;
	struct stat st;
	if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
		close(fd);
		ferr(err, errlen, path, "not a regular file");
		return ART_READ_IO;
	}
	uint64_t size = (uint64_t)st.st_size;
	if (size < ART_TRAILER_SIZE) {
		close(fd);
		ferr(err, errlen, path, "not a fadc artifact (%llu bytes, no trailer)",
		     (unsigned long long)size);
		return ART_READ_FORMAT;
	}
	if (size > ((uint64_t)1 << 40)) {
		close(fd);
		ferr(err, errlen, path, "file too large for an artifact");
		return ART_READ_FORMAT;
	}
	uint8_t *buf = malloc((size_t)size);
	if (!buf) {
		close(fd);
		ferr(err, errlen, path, "out of memory reading %llu bytes", (unsigned long long)size);
		return ART_READ_NOMEM;
	}
	size_t got = 0;
	while (got < size) {
		ssize_t r = read(fd, buf + got, (size_t)(size - got));
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			free(buf);
			close(fd);
			ferr(err, errlen, path, "read failed: %s", r ? strerror(errno) : "short read");
			return ART_READ_IO;
		}
		got += (size_t)r;
	}
	close(fd);
	const uint8_t *t = buf + size - ART_TRAILER_SIZE;
	ArtRead rc = ART_READ_FORMAT;
	if (memcmp(t, ART_TRAILER_MAGIC, 8)) {
		ferr(err, errlen, path, "not a fadc artifact (no descriptor trailer: truncated, or not "
		                        "written by fadc)");
		goto done;
	}
	if (rd32(t + 36) != art_crc32(0, t, 36)) {
		ferr(err, errlen, path, "corrupt artifact: the trailer's checksum does not match");
		goto done;
	}
	uint32_t version = rd32(t + 8);
	if (!art_version_readable(version)) {
		ferr(err, errlen, path,
		     "artifact format version %u; this runtime reads versions %d to %d (recompile the "
		     "model with this fadc)",
		     version, ART_FORMAT_OLDEST, ART_FORMAT_VERSION);
		rc = ART_READ_VERSION;
		goto done;
	}
	uint64_t off = rd64(t + 16), len = rd64(t + 24), body = size - ART_TRAILER_SIZE;
	if (len > body || off != body - len) {
		ferr(err, errlen, path, "corrupt artifact: the descriptor's place (%llu + %llu) is "
		     "not the %llu bytes before the trailer (truncated?)",
		     (unsigned long long)off, (unsigned long long)len, (unsigned long long)body);
		goto done;
	}
	if (rd32(t + 32) != art_crc32(0, buf, (size_t)body)) {
		ferr(err, errlen, path, "corrupt artifact: checksum mismatch (the file was modified "
		                        "or damaged after it was written)");
		goto done;
	}
	char msg[400];
	if (!art_desc_decode(buf + off, (size_t)len, d, msg, sizeof msg)) {
		ferr(err, errlen, path, "%s", msg);
		goto done;
	}
	if (d->version != version) {
		ferr(err, errlen, path, "corrupt artifact: the trailer says format %u, the descriptor "
		     "%u", version, d->version);
		art_desc_free(d);
		goto done;
	}
	// The image section: the images_bytes just before the descriptor,
	// inside the body, with the hash the descriptor (and so the library)
	// carries.
	if (d->images_bytes > off ||
	    art_fnv1a64(ART_FNV_BASIS, buf + off - d->images_bytes, (size_t)d->images_bytes) !=
	        d->images_hash) {
		art_desc_free(d);
		ferr(err, errlen, path, "corrupt artifact: the CUDA image section does not match its "
		                        "descriptor");
		goto done;
	}
	if (d->images_bytes) {
		d->images = malloc((size_t)d->images_bytes);
		if (!d->images) {
			art_desc_free(d);
			ferr(err, errlen, path, "out of memory");
			rc = ART_READ_NOMEM;
			goto done;
		}
		memcpy(d->images, buf + off - d->images_bytes, (size_t)d->images_bytes);
	}
	*desc_bytes = malloc(len ? (size_t)len : 1);
	if (!*desc_bytes) {
		art_desc_free(d);
		ferr(err, errlen, path, "out of memory");
		rc = ART_READ_NOMEM;
		goto done;
	}
	memcpy(*desc_bytes, buf + off, (size_t)len);
	*desc_len = (size_t)len;
	rc = ART_READ_OK;
done:
	free(buf);
	return rc;
}
