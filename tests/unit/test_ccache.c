// tests/unit/test_ccache.c -- the compile cache (codegen/ccache.c) without
// NVRTC: SHA-256 against the FIPS 180-4 / NIST example digests (the key
// and the checksum), a miss then a hit giving the stored bytes, an entry
// under another key or corrupted (a flipped byte in the payload, in the
// header, truncated, lengthened) is a miss and a store mends it, an empty
// payload, eviction past FADC_CACHE_MAX_BYTES removing the oldest entries
// first (by mtime; a hit makes its entry young) and never a file it did
// not make, a store's temporary file left by a process killed with SIGKILL
// removed by a later eviction once it is an hour old (and no other file),
// and an unusable folder (NULL, every call a quiet no-op).
#include <dirent.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "codegen.h"
#include "fileio.h"
#include "testutil.h"

static void
hex(const uint8_t d[32], char out[65])
{
	for (int i = 0; i < 32; i++)
		snprintf(out + 2 * i, 3, "%02x", d[i]);
}

static int
sha_is(const void *data, size_t len, size_t chunk, const char *want)
{
	CgSha256 s;
	uint8_t d[32];
	char h[65];
	cg_sha256_init(&s);
	for (size_t i = 0; i < len; i += chunk) // in pieces: the buffering too
		cg_sha256_add(&s, (const uint8_t *)data + i, len - i < chunk ? len - i : chunk);
	cg_sha256_end(&s, d);
	hex(d, h);
	if (strcmp(h, want))
		fprintf(stderr, "sha256: got %s, want %s\n", h, want);
	return !strcmp(h, want);
}

// An entry's header (ccache.c): magic 8, version 4, 0 4, key 32, the two
// lengths 16, the payload's SHA-256 32.
enum { HDR = 96 };

static char dir[256], cdir[300];

static void
key_of(int k, uint8_t key[32])
{
	for (int i = 0; i < 32; i++)
		key[i] = (uint8_t)(k * 37 + i);
}

static char *
entry(const uint8_t key[32])
{
	static char p[512];
	char h[65];
	hex(key, h);
	snprintf(p, sizeof p, "%s/%s.nv", cdir, h);
	return p;
}

// Stores payload "a<k>..." / "b<k>..." of n bytes under key k.
static void
store(CgCache *c, int k, size_t n)
{
	uint8_t key[32], *a = malloc(n + 1), *b = malloc(n / 2 + 1);
	key_of(k, key);
	for (size_t i = 0; i < n; i++)
		a[i] = (uint8_t)(k + i);
	for (size_t i = 0; i < n / 2; i++)
		b[i] = (uint8_t)(k * 3 + i);
	cg_cache_put(c, key, a, n, b, n / 2);
	free(a);
	free(b);
}

// Key k holds store(k, n)'s bytes.
static int
holds(CgCache *c, int k, size_t n)
{
	uint8_t key[32], *a, *b;
	size_t al, bl;
	key_of(k, key);
	if (!cg_cache_get(c, key, &a, &al, &b, &bl))
		return 0;
	int ok = al == n && bl == n / 2;
	for (size_t i = 0; ok && i < n; i++)
		ok = a[i] == (uint8_t)(k + i);
	for (size_t i = 0; ok && i < n / 2; i++)
		ok = b[i] == (uint8_t)(k * 3 + i);
	free(a);
	free(b);
	return ok;
}

static void
flip(const char *path, off_t at)
{
	int fd = open(path, O_RDWR);
	uint8_t x = 0;
	CHECK(fd >= 0 && pread(fd, &x, 1, at) == 1);
	x ^= 0x40;
	CHECK(pwrite(fd, &x, 1, at) == 1);
	close(fd);
}

static void
set_age(const char *path, long sec)
{
	struct timespec t[2] = {{sec, 0}, {sec, 0}};
	CHECK(utimensat(AT_FDCWD, path, t, 0) == 0);
}

static int
files_in(const char *d)
{
	DIR *dd = opendir(d);
	int n = 0;
	struct dirent *e;
	while (dd && (e = readdir(dd)))
		n += e->d_name[0] != '.';
	if (dd)
		closedir(dd);
	return n;
}

int
main(void)
{
	// SHA-256: FIPS 180-4's examples, and a million 'a' (NIST).
	CHECK(sha_is("", 0, 1, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"));
	CHECK(sha_is("abc", 3, 1, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"));
	const char *two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
	CHECK(sha_is(two, strlen(two), 7,
	             "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"));
	char *mil = malloc(1000000);
	memset(mil, 'a', 1000000);
	CHECK(sha_is(mil, 1000000, 4093,
	             "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"));
	free(mil);

	snprintf(dir, sizeof dir, "%s/fadc-ccache.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	CHECK(mkdtemp(dir) != NULL);
	snprintf(cdir, sizeof cdir, "%s/compile", dir);
	setenv("FADC_CACHE_DIR", dir, 1);
	unsetenv("FADC_CACHE_MAX_BYTES");
	CHECK(cg_cache_max_bytes() == 1LL << 30);

	// A miss, a store, a hit with the same bytes; another key misses.
	CgCache *c = cg_cache_open();
	CHECK(c != NULL);
	CHECK(!holds(c, 1, 1000));
	store(c, 1, 1000);
	CHECK(holds(c, 1, 1000));
	CHECK(!holds(c, 2, 1000));
	long hits, misses;
	cg_cache_close(c, &hits, &misses);
	CHECK(hits == 1 && misses == 2);

	// Corruptions: each is a miss, and a store mends it.
	uint8_t key[32];
	key_of(1, key);
	char path[512];
	snprintf(path, sizeof path, "%s", entry(key));
	struct stat st;
	CHECK(stat(path, &st) == 0 && st.st_size == HDR + 1000 + 500);
	off_t where[] = {0, 8, 20, 50, 70, HDR + 10, HDR + 1200};
	for (size_t i = 0; i < sizeof where / sizeof where[0]; i++) {
		c = cg_cache_open();
		flip(path, where[i]);
		CHECK(!holds(c, 1, 1000));
		store(c, 1, 1000);
		CHECK(holds(c, 1, 1000));
		cg_cache_close(c, NULL, NULL);
	}
	c = cg_cache_open();
	CHECK(truncate(path, HDR + 1499) == 0); // one byte short
	CHECK(!holds(c, 1, 1000));
	CHECK(truncate(path, HDR - 6) == 0); // inside the header
	CHECK(!holds(c, 1, 1000));
	CHECK(truncate(path, 0) == 0);
	CHECK(!holds(c, 1, 1000));
	store(c, 1, 1000);
	CHECK(truncate(path, HDR + 1501) == 0); // one byte long
	CHECK(!holds(c, 1, 1000));
	// Key 1's entry renamed to key 3's name: the key inside differs.
	store(c, 1, 1000);
	uint8_t k3[32];
	key_of(3, k3);
	char p3[512];
	snprintf(p3, sizeof p3, "%s", entry(k3));
	CHECK(rename(path, p3) == 0);
	CHECK(!holds(c, 3, 1000));
	CHECK(unlink(p3) == 0);
	// An empty payload is an entry too.
	store(c, 4, 0);
	CHECK(holds(c, 4, 0));
	cg_cache_close(c, NULL, NULL);
	CHECK(files_in(cdir) == 1); // key 4's: no temporary files left

	// Eviction: 5 entries of 1596 bytes, ages 1000..5000; a bound of 5000
	// keeps the three youngest.  Key 10 (the oldest) is hit first and so
	// is the youngest; a cuda-choices file in either folder and a file of
	// another name stay.
	CHECK(unlink(entry((key_of(4, key), key))) == 0);
	c = cg_cache_open();
	for (int k = 10; k < 15; k++) {
		store(c, k, 1000);
		key_of(k, key);
		set_age(entry(key), 1000L * (k - 9));
	}
	cg_cache_close(c, NULL, NULL); // 7980 bytes, the bound 1 GiB: all kept
	CHECK(files_in(cdir) == 5);
	char other[512];
	snprintf(other, sizeof other, "%s/cuda-choices", dir);
	FILE *f = fopen(other, "w");
	CHECK(f && fputs("x\n", f) >= 0);
	fclose(f);
	snprintf(other, sizeof other, "%s/cuda-choices", cdir);
	CHECK((f = fopen(other, "w")) != NULL);
	fclose(f);
	set_age(other, 1);
	setenv("FADC_CACHE_MAX_BYTES", "5000", 1);
	CHECK(cg_cache_max_bytes() == 5000);
	c = cg_cache_open();
	CHECK(holds(c, 10, 1000)); // young again
	store(c, 15, 1000);        // a store: eviction at close
	cg_cache_close(c, NULL, NULL);
	c = cg_cache_open();
	CHECK(holds(c, 10, 1000) && holds(c, 15, 1000) && holds(c, 14, 1000));
	CHECK(!holds(c, 11, 1000) && !holds(c, 12, 1000) && !holds(c, 13, 1000));
	cg_cache_close(c, NULL, NULL);
	CHECK(access(other, F_OK) == 0);
	snprintf(other, sizeof other, "%s/cuda-choices", dir);
	CHECK(access(other, F_OK) == 0);
	setenv("FADC_CACHE_MAX_BYTES", "1K", 1);
	CHECK(cg_cache_max_bytes() == 1024);
	setenv("FADC_CACHE_MAX_BYTES", "-3", 1);
	CHECK(cg_cache_max_bytes() == 1LL << 30);
	setenv("FADC_CACHE_MAX_BYTES", "0", 1); // everything goes after a store
	c = cg_cache_open();
	store(c, 20, 10);
	cg_cache_close(c, NULL, NULL);
	CHECK(files_in(cdir) == 1); // cuda-choices alone

	// A store killed between writing its temporary file and renaming it
	// (SIGKILL: no handler runs) leaves "ENTRY.tmpPID.N".  Eviction removes
	// it once it is over an hour old, never a younger one (a store in
	// flight) or a file of another name.
	unsetenv("FADC_CACHE_MAX_BYTES");
	key_of(30, key);
	snprintf(path, sizeof path, "%s", entry(key));
	pid_t pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		FioOut o;
		char err[256];
		if (fio_out_open(&o, path, 0644, err, sizeof err) == 0 && fio_out_write(&o, "half", 4) == 0)
			raise(SIGKILL);
		_exit(3);
	}
	int wst;
	CHECK(waitpid(pid, &wst, 0) == pid && WIFSIGNALED(wst) && WTERMSIG(wst) == SIGKILL);
	char left[600] = "";
	DIR *dd = opendir(cdir);
	struct dirent *de;
	while (dd && (de = readdir(dd)))
		if (strstr(de->d_name, ".tmp"))
			snprintf(left, sizeof left, "%s/%s", cdir, de->d_name);
	if (dd)
		closedir(dd);
	CHECK(left[0] && access(path, F_OK) != 0); // the temporary file, no entry
	char young[600], odd[600], plain[600];
	snprintf(young, sizeof young, "%s.tmp%ld.7", path, (long)pid + 1);
	snprintf(odd, sizeof odd, "%s.tmpx.7", path);
	snprintf(plain, sizeof plain, "%s/notes.tmp1.2", cdir);
	const char *keep[] = {young, odd, plain};
	for (int i = 0; i < 3; i++) {
		CHECK((f = fopen(keep[i], "w")) != NULL);
		fclose(f);
	}
	long now = (long)time(NULL);
	set_age(left, now - 3700);
	set_age(odd, now - 7200);
	set_age(plain, now - 7200);
	c = cg_cache_open();
	cg_cache_close(c, NULL, NULL); // no store: no sweep
	CHECK(access(left, F_OK) == 0);
	c = cg_cache_open();
	store(c, 31, 10);
	cg_cache_close(c, NULL, NULL);
	CHECK(access(left, F_OK) != 0);
	for (int i = 0; i < 3; i++)
		CHECK(access(keep[i], F_OK) == 0);
	set_age(young, now - 3700); // now stale too
	c = cg_cache_open();
	store(c, 31, 10);
	cg_cache_close(c, NULL, NULL);
	CHECK(access(young, F_OK) != 0 && access(odd, F_OK) == 0 && access(plain, F_OK) == 0);

	// An unusable folder: NULL (one warning on stderr), calls are no-ops.
	setenv("FADC_CACHE_DIR", "/dev/null/x", 1);
	c = cg_cache_open();
	CHECK(c == NULL);
	store(c, 1, 10);
	CHECK(!holds(c, 1, 10));
	cg_cache_close(c, &hits, &misses);
	CHECK(hits == 0 && misses == 0);

	char cmd[600];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	CHECK(system(cmd) == 0);
	return TU_DONE("test_ccache");
}
