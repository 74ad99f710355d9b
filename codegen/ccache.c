// codegen/ccache.c -- the compile cache (docs/CUDA.md "The compile cache"):
// compiled device code stored by a content hash under
// $FADC_CACHE_DIR/compile/, so that compiling a model again, or after a
// change to a part of it, reuses what did not change.  Plain C, no CUDA:
// the caller (codegen/compile.c) makes the key (cuda_nvrtc.c hashes the
// source, the options and NVRTC's version) and the payload.
//
// Safety, the whole design:
//  - an entry is written to a temporary file beside it and renamed over its
//    name (fio_write_file), so a reader sees a whole entry or none, and two
//    processes storing the same key race harmlessly (same bytes);
//  - an entry is checked before use: magic, format version, its key, the
//    lengths against the file's size, a SHA-256 of the payload; anything
//    else is a miss (recompiled, and the store overwrites it);
//  - the size is bounded: after a compile stored something, the oldest
//    entries (by mtime; a hit touches its entry) are removed until the
//    folder is under FADC_CACHE_MAX_BYTES.  Only names this file makes
//    (64 hex digits and ".nv") are counted or removed: cuda-choices, one
//    folder up, and anything else is never touched;
//  - a temporary file of a store that never renamed it (the process was
//    killed: SIGKILL leaves no handler a chance) is removed by the next
//    eviction once it is CC_STALE_SECONDS old: a store writes and renames
//    in well under that, so an older one is nobody's;
//  - a folder that cannot be made or written gives one warning per process
//    and the compile goes on without the cache.
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "codegen.h"
#include "fileio.h"

// ---------------------------------------------------------------- SHA-256
// FIPS 180-4; the key (collisions negligible) and the payload's checksum.

static const uint32_t sha_k[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

#define ROR(x, n) (((x) >> (n)) | ((x) << (32 - (n))))

static void
sha_block(uint32_t h[8], const uint8_t *p)
{
	uint32_t w[64];
	for (int i = 0; i < 16; i++)
		w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
		       (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
	for (int i = 16; i < 64; i++) {
		uint32_t s0 = ROR(w[i - 15], 7) ^ ROR(w[i - 15], 18) ^ (w[i - 15] >> 3);
		uint32_t s1 = ROR(w[i - 2], 17) ^ ROR(w[i - 2], 19) ^ (w[i - 2] >> 10);
		w[i] = w[i - 16] + s0 + w[i - 7] + s1;
	}
	uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], k = h[7];
	for (int i = 0; i < 64; i++) {
		uint32_t t1 = k + (ROR(e, 6) ^ ROR(e, 11) ^ ROR(e, 25)) + ((e & f) ^ (~e & g)) +
		              sha_k[i] + w[i];
		uint32_t t2 = (ROR(a, 2) ^ ROR(a, 13) ^ ROR(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
		k = g, g = f, f = e, e = d + t1, d = c, c = b, b = a, a = t1 + t2;
	}
	h[0] += a, h[1] += b, h[2] += c, h[3] += d, h[4] += e, h[5] += f, h[6] += g, h[7] += k;
}

void
cg_sha256_init(CgSha256 *s)
{
	static const uint32_t h0[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
	                               0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
	memcpy(s->h, h0, sizeof h0);
	s->n = 0;
	s->fill = 0;
}

void
cg_sha256_add(CgSha256 *s, const void *data, size_t len)
{
	const uint8_t *p = data;
	s->n += len;
	if (s->fill) {
		size_t take = 64 - s->fill < len ? 64 - s->fill : len;
		memcpy(s->buf + s->fill, p, take);
		s->fill += take, p += take, len -= take;
		if (s->fill < 64)
			return;
		sha_block(s->h, s->buf);
		s->fill = 0;
	}
	for (; len >= 64; p += 64, len -= 64)
		sha_block(s->h, p);
	memcpy(s->buf, p, len);
	s->fill = len;
}

// A field of a key: its length (8 bytes) then its bytes, so that no two
// different lists of fields hash the same text.
void
cg_sha256_field(CgSha256 *s, const void *data, size_t len)
{
	uint8_t n[8];
	for (int i = 0; i < 8; i++)
		n[i] = (uint8_t)((uint64_t)len >> (8 * i));
	cg_sha256_add(s, n, 8);
	cg_sha256_add(s, data, len);
}

void
cg_sha256_end(CgSha256 *s, uint8_t out[32])
{
	uint64_t bits = s->n * 8;
	uint8_t pad[72] = {0x80};
	size_t padn = (s->fill < 56 ? 56 : 120) - s->fill;
	for (int i = 0; i < 8; i++)
		pad[padn + i] = (uint8_t)(bits >> (56 - 8 * i));
	cg_sha256_add(s, pad, padn + 8);
	for (int i = 0; i < 8; i++)
		for (int j = 0; j < 4; j++)
			out[4 * i + j] = (uint8_t)(s->h[i] >> (24 - 8 * j));
}

// ---------------------------------------------------------------- the cache

// An entry: this header, then payload a (the cubin) and b (the PTX).
// Integers little-endian.
enum {
	CC_VERSION = 1,
	CC_HEADER = 8 + 4 + 4 + 32 + 8 + 8 + 32, // magic, version, 0, key, lengths, sha
};
static const char cc_magic[8] = {'F', 'A', 'D', 'C', 'C', 'C', 'N', 'V'};
#define CC_SUFFIX ".nv"
#define CC_DEFAULT_MAX (1LL << 30) // 1 GiB
#define CC_STALE_SECONDS 3600 // a temporary file older than this is left over

struct CgCache {
	char *dir;        // .../compile
	long long max;    // bytes
	pthread_mutex_t mu;
	long hits, misses, stores;
	int warned;       // a store failed (warned once)
};

// One warning per process, whatever the number of compiles (-D N=1,2).
static pthread_mutex_t warn_mu = PTHREAD_MUTEX_INITIALIZER;
static int warned_once;

static void
cc_warn(const char *what, const char *path, const char *why)
{
	pthread_mutex_lock(&warn_mu);
	if (!warned_once)
		fprintf(stderr,
		        "fadc: warning: the compile cache %s cannot be used (%s: %s); compiling "
		        "without it (FADC_CACHE_DIR, --no-cache)\n",
		        path, what, why);
	warned_once = 1;
	pthread_mutex_unlock(&warn_mu);
}

// mkdir -p of path (modified in place and restored).
static int
mkdirs(char *path)
{
	for (char *p = path + 1; *p; p++)
		if (*p == '/') {
			*p = 0;
			int r = mkdir(path, 0755);
			*p = '/';
			if (r && errno != EEXIST)
				return -1;
		}
	if (mkdir(path, 0755) && errno != EEXIST)
		return -1;
	struct stat st;
	if (stat(path, &st) || !S_ISDIR(st.st_mode)) {
		errno = ENOTDIR;
		return -1;
	}
	return 0;
}

long long
cg_cache_max_bytes(void)
{
	const char *v = getenv("FADC_CACHE_MAX_BYTES");
	if (!v || !*v)
		return CC_DEFAULT_MAX;
	char *end;
	long long n = strtoll(v, &end, 10);
	long long unit = *end == 'K' ? 1LL << 10 : *end == 'M' ? 1LL << 20 : *end == 'G' ? 1LL << 30 : 1;
	if (unit > 1)
		end++;
	if (*end || n < 0 || v[0] == '-')
		return CC_DEFAULT_MAX; // not a size: the default (documented)
	return n * unit;
}

CgCache *
cg_cache_open(void)
{
	char dir[4096];
	if (!fio_cache_dir(dir, sizeof dir)) {
		cc_warn("no folder", "$FADC_CACHE_DIR",
		        "none of FADC_CACHE_DIR, XDG_CACHE_HOME, HOME is set (or the path is too long)");
		return NULL;
	}
	size_t n = strlen(dir) + 16;
	CgCache *c = calloc(1, sizeof *c);
	char *path = malloc(n);
	if (!c || !path) {
		free(c);
		free(path);
		return NULL;
	}
	snprintf(path, n, "%s/compile", dir);
	// Writable is what matters (a store is a new file): an unwritable
	// folder would otherwise fail every store, and a read-only one full of
	// entries we could not evict would grow past its bound.
	if (mkdirs(path) || access(path, W_OK | X_OK)) {
		cc_warn("making it", path, strerror(errno));
		free(path);
		free(c);
		return NULL;
	}
	c->dir = path;
	c->max = cg_cache_max_bytes();
	pthread_mutex_init(&c->mu, NULL);
	return c;
}

static char *
entry_path(const CgCache *c, const uint8_t key[32])
{
	size_t n = strlen(c->dir) + 64 + sizeof CC_SUFFIX + 2;
	char *p = malloc(n);
	if (!p)
		return NULL;
	int k = snprintf(p, n, "%s/", c->dir);
	for (int i = 0; i < 32; i++)
		k += snprintf(p + k, n - (size_t)k, "%02x", key[i]);
	snprintf(p + k, n - (size_t)k, "%s", CC_SUFFIX);
	return p;
}

static void
put64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t
get64(const uint8_t *p)
{
	uint64_t v = 0;
	for (int i = 0; i < 8; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

static void
payload_sha(const uint8_t *a, size_t alen, const uint8_t *b, size_t blen, uint8_t out[32])
{
	CgSha256 s;
	cg_sha256_init(&s);
	cg_sha256_field(&s, a, alen);
	cg_sha256_field(&s, b, blen);
	cg_sha256_end(&s, out);
}

static void
count(CgCache *c, long *n)
{
	pthread_mutex_lock(&c->mu);
	(*n)++;
	pthread_mutex_unlock(&c->mu);
}

int
cg_cache_get(CgCache *c, const uint8_t key[32], uint8_t **a, size_t *alen, uint8_t **b,
             size_t *blen)
{
	*a = *b = NULL;
	*alen = *blen = 0;
	if (!c)
		return 0;
	char *path = entry_path(c, key), err[256];
	size_t len = 0;
	uint8_t *f = path ? (uint8_t *)fio_read_all(path, (size_t)1 << 34, &len, err, sizeof err) : NULL;
	int ok = 0;
	if (f && len >= CC_HEADER && !memcmp(f, cc_magic, 8) && f[8] == CC_VERSION && !f[9] &&
	    !f[10] && !f[11] && !memcmp(f + 16, key, 32)) {
		uint64_t la = get64(f + 48), lb = get64(f + 56);
		uint8_t sum[32];
		if (la <= len && lb <= len && CC_HEADER + la + lb == len) {
			payload_sha(f + CC_HEADER, la, f + CC_HEADER + la, lb, sum);
			if (!memcmp(sum, f + 64, 32)) {
				*a = malloc(la + 1);
				*b = malloc(lb + 1);
				if (*a && *b) {
					memcpy(*a, f + CC_HEADER, la);
					memcpy(*b, f + CC_HEADER + la, lb);
					*alen = la;
					*blen = lb;
					ok = 1;
				} else {
					free(*a);
					free(*b);
					*a = *b = NULL;
				}
			}
		}
	}
	if (ok) // the hit is young again: eviction goes by mtime
		utimensat(AT_FDCWD, path, NULL, 0);
	free(f);
	free(path);
	count(c, ok ? &c->hits : &c->misses);
	return ok;
}

void
cg_cache_put(CgCache *c, const uint8_t key[32], const uint8_t *a, size_t alen, const uint8_t *b,
             size_t blen)
{
	if (!c)
		return;
	size_t n = CC_HEADER + alen + blen;
	uint8_t *f = malloc(n);
	char *path = entry_path(c, key), err[1024];
	if (f && path) {
		memcpy(f, cc_magic, 8);
		memset(f + 8, 0, 8);
		f[8] = CC_VERSION;
		memcpy(f + 16, key, 32);
		put64(f + 48, alen);
		put64(f + 56, blen);
		payload_sha(a, alen, b, blen, f + 64);
		memcpy(f + CC_HEADER, a, alen);
		memcpy(f + CC_HEADER + alen, b, blen);
		if (fio_write_file(path, f, n, 0644, err, sizeof err) == 0)
			count(c, &c->stores);
		else
			cc_warn("storing an entry", c->dir, err);
	}
	free(f);
	free(path);
}

typedef struct Ent {
	char *name;
	long long size;
	struct timespec mtime;
} Ent;

static int
ent_older(const void *x, const void *y)
{
	const Ent *a = x, *b = y;
	if (a->mtime.tv_sec != b->mtime.tv_sec)
		return a->mtime.tv_sec < b->mtime.tv_sec ? -1 : 1;
	if (a->mtime.tv_nsec != b->mtime.tv_nsec)
		return a->mtime.tv_nsec < b->mtime.tv_nsec ? -1 : 1;
	return strcmp(a->name, b->name);
}

// An entry's name: 64 lowercase hex digits and CC_SUFFIX, nothing else.
static int
is_entry(const char *s)
{
	for (int i = 0; i < 64; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return 0;
	return !strcmp(s + 64, CC_SUFFIX);
}

// A store's temporary file (fio_out_open): an entry's name, ".tmp", then
// the writer's pid and a counter, "PID.N".
static int
is_temp(const char *s)
{
	size_t n = strlen(s);
	if (n < 64 + sizeof CC_SUFFIX - 1 + 4)
		return 0;
	char name[64 + sizeof CC_SUFFIX];
	memcpy(name, s, sizeof name - 1);
	name[sizeof name - 1] = 0;
	const char *t = s + sizeof name - 1;
	if (!is_entry(name) || strncmp(t, ".tmp", 4))
		return 0;
	int dots = 0, digits = 0;
	for (t += 4; *t; t++) {
		if (*t == '.')
			dots++;
		else if (*t >= '0' && *t <= '9')
			digits++;
		else
			return 0;
	}
	return dots == 1 && digits >= 2;
}

// Removes the oldest entries until the folder's entries are within max,
// and temporary files left over by killed stores (is_temp, older than
// CC_STALE_SECONDS).
// Concurrent evictions may remove one entry twice (ENOENT, harmless) or a
// little more than needed; a reader that opened an entry keeps its bytes.
static void
evict(CgCache *c)
{
	DIR *d = opendir(c->dir);
	if (!d)
		return;
	Ent *e = NULL;
	size_t n = 0, cap = 0;
	long long total = 0;
	int fd = dirfd(d);
	struct dirent *de;
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	while ((de = readdir(d))) {
		struct stat st;
		if (is_temp(de->d_name)) {
			if (!fstatat(fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) && S_ISREG(st.st_mode) &&
			    now.tv_sec - st.st_mtim.tv_sec > CC_STALE_SECONDS)
				unlinkat(fd, de->d_name, 0);
			continue;
		}
		if (!is_entry(de->d_name) || fstatat(fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) ||
		    !S_ISREG(st.st_mode))
			continue;
		if (n == cap) {
			cap = cap ? 2 * cap : 64;
			Ent *r = realloc(e, cap * sizeof *e);
			if (!r)
				break;
			e = r;
		}
		if (!(e[n].name = strdup(de->d_name)))
			break;
		e[n].size = (long long)st.st_size;
		e[n].mtime = st.st_mtim;
		total += e[n].size;
		n++;
	}
	if (total > c->max) {
		qsort(e, n, sizeof *e, ent_older);
		for (size_t i = 0; i < n && total > c->max; i++)
			if (!unlinkat(fd, e[i].name, 0) || errno == ENOENT)
				total -= e[i].size;
	}
	for (size_t i = 0; i < n; i++)
		free(e[i].name);
	free(e);
	closedir(d);
}

void
cg_cache_close(CgCache *c, long *hits, long *misses)
{
	if (hits)
		*hits = c ? c->hits : 0;
	if (misses)
		*misses = c ? c->misses : 0;
	if (!c)
		return;
	if (c->stores)
		evict(c);
	pthread_mutex_destroy(&c->mu);
	free(c->dir);
	free(c);
}
