// tests/unit/test_choice_cache.c -- the cache of choices measured on the
// GPU (runtime/choice.c), on the CPU: where the file is ($FADC_CACHE_DIR,
// $XDG_CACHE_HOME/fadc, $HOME/.cache/fadc), the GPU's part of the key,
// FADC_CUDA_CHOICE's values, lookups and stores (a missing directory made,
// a key's line replaced, the others kept, the last line of a key winning),
// a corrupt file (bad lines ignored by lookups and dropped by the next
// store), an unwritable place (no error, no file, no temporary file left),
// and no temporary file after a good store either.
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../runtime/choice.h"
#include "testutil.h"

static char dir[256];

static void
write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	CHECK(f != NULL);
	if (f) {
		fputs(text, f);
		fclose(f);
	}
}

static char *
read_file(const char *path)
{
	static char buf[8192];
	FILE *f = fopen(path, "r");
	size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
	buf[n] = 0;
	if (f)
		fclose(f);
	return buf;
}

// Entries of directory d (. and .. aside).
static int
entries(const char *d)
{
	DIR *x = opendir(d);
	int n = 0;
	for (struct dirent *e; x && (e = readdir(x));)
		n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
	if (x)
		closedir(x);
	return n;
}

static void
test_path(void)
{
	char p[4096];
	setenv("FADC_CACHE_DIR", "/c/d", 1);
	setenv("XDG_CACHE_HOME", "/x", 1);
	setenv("HOME", "/h", 1);
	CHECK(rt_choice_path(p, sizeof p));
	CHECK_STR(p, "/c/d/cuda-choices");
	setenv("FADC_CACHE_DIR", "", 1); // empty: unset
	CHECK(rt_choice_path(p, sizeof p));
	CHECK_STR(p, "/x/fadc/cuda-choices");
	unsetenv("FADC_CACHE_DIR");
	unsetenv("XDG_CACHE_HOME");
	CHECK(rt_choice_path(p, sizeof p));
	CHECK_STR(p, "/h/.cache/fadc/cuda-choices");
	unsetenv("HOME");
	CHECK(!rt_choice_path(p, sizeof p)); // nowhere: no cache
	setenv("HOME", "/h", 1);
	CHECK(!rt_choice_path(p, 10)); // does not fit
}

static void
test_gpu_and_env(void)
{
	char g[RT_CHOICE_GPU_MAX];
	rt_choice_gpu(g, "NVIDIA H200 (x)", NULL);
	CHECK_STR(g, "NVIDIA_H200__x_");
	const uint8_t uuid[16] = {0x9c, 0x1e, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 0xff};
	rt_choice_gpu(g, "NVIDIA H100 80GB HBM3", uuid);
	CHECK_STR(g, "NVIDIA_H100_80GB_HBM3:9c1e000102030405060708090a0b0cff");
	rt_choice_gpu(g, "", NULL);
	CHECK_STR(g, "gpu");
	char longname[600];
	memset(longname, 'a', sizeof longname - 1);
	longname[sizeof longname - 1] = 0;
	rt_choice_gpu(g, longname, uuid);
	CHECK(strlen(g) == RT_CHOICE_GPU_MAX - 1 && g[RT_CHOICE_GPU_MAX - 34] == ':');
	CHECK(rt_choice_forced(NULL) == -1 && rt_choice_forced("") == -1 &&
	      rt_choice_forced("auto") == -1);
	CHECK(rt_choice_forced("0") == 0 && rt_choice_forced("1") == 1);
	CHECK(rt_choice_forced("x") == -2 && rt_choice_forced("-1") == -2 &&
	      rt_choice_forced("1x") == -2 && rt_choice_forced("256") == -2);
}

static void
test_store_lookup(void)
{
	char path[700], sub[600];
	snprintf(sub, sizeof sub, "%s/a/b", dir);
	snprintf(path, sizeof path, "%s/cuda-choices", sub);
	RtChoiceKey k = {0x0123456789abcdefull, "NVIDIA_H200:00ff", 3, 0};
	CHECK(rt_choice_lookup(path, &k) == -1); // no file
	CHECK(rt_choice_store(path, &k, 1)); // makes a/b
	CHECK(rt_choice_lookup(path, &k) == 1);
	CHECK_STR(read_file(path), "0123456789abcdef NVIDIA_H200:00ff 3 0 1\n");
	CHECK(entries(sub) == 1); // no temporary file left
	RtChoiceKey k2 = k, k3 = k, k4 = k;
	k2.choice = 1;
	k3.gpu = "NVIDIA_H100:00ff";
	k4.artifact ^= 1;
	CHECK(rt_choice_store(path, &k2, 0) && rt_choice_store(path, &k3, 0));
	CHECK(rt_choice_lookup(path, &k) == 1 && rt_choice_lookup(path, &k2) == 0 &&
	      rt_choice_lookup(path, &k3) == 0 && rt_choice_lookup(path, &k4) == -1);
	CHECK(rt_choice_store(path, &k, 0)); // replaced, the others kept
	CHECK(rt_choice_lookup(path, &k) == 0 && rt_choice_lookup(path, &k2) == 0 &&
	      rt_choice_lookup(path, &k3) == 0);
	CHECK_STR(read_file(path), "0123456789abcdef NVIDIA_H200:00ff 3 1 0\n"
	                           "0123456789abcdef NVIDIA_H100:00ff 3 0 0\n"
	                           "0123456789abcdef NVIDIA_H200:00ff 3 0 0\n");
	CHECK(entries(sub) == 1);
	// Keys a store refuses: a GPU text with a space, a bad candidate.
	RtChoiceKey bad = k;
	bad.gpu = "two words";
	CHECK(!rt_choice_store(path, &bad, 0) && !rt_choice_store(path, &k, 256) &&
	      !rt_choice_store(path, &k, -1));
	CHECK(entries(sub) == 1);
}

static void
test_corrupt(void)
{
	char path[600];
	snprintf(path, sizeof path, "%s/corrupt", dir);
	RtChoiceKey k = {0xfedcba9876543210ull, "G:01", 7, 2};
	char longline[3000];
	memset(longline, '7', sizeof longline - 2);
	longline[sizeof longline - 2] = '\n';
	longline[sizeof longline - 1] = 0;
	char text[8000];
	snprintf(text, sizeof text,
	         "garbage\n"
	         "fedcba9876543210 G:01 7 2\n" // four fields
	         "fedcba9876543210 G:01 7 2 1 9\n" // six
	         "fedcba987654321 G:01 7 2 1\n" // 15 hex digits
	         "fedcba987654321X G:01 7 2 1\n"
	         "FEDCBA9876543210 G:01 7 2 1\n" // upper case: not what a store writes
	         "fedcba9876543210 G:01 7 2 x\n"
	         "fedcba9876543210 G:01 7 2 300\n"
	         "fedcba9876543210 G:01 -7 2 1\n"
	         "fedcba9876543210  G:01 7 2 1\n" // two spaces
	         "fedcba9876543210 G:01 7 2 1 \n" // a trailing space
	         "%s"
	         "\x01\xff\xfe\n"
	         "fedcba9876543210 G:01 7 2 1\n" // the one good line
	         "fedcba9876543210 G:01 7 2 0", // good, the last (no newline at the end)
	         longline);
	write_file(path, text);
	CHECK(rt_choice_lookup(path, &k) == 0); // the last good line wins
	RtChoiceKey k2 = k;
	k2.task = 8;
	CHECK(rt_choice_store(path, &k2, 1)); // drops the bad lines and k's older line
	CHECK_STR(read_file(path), "fedcba9876543210 G:01 7 2 1\n"
	                           "fedcba9876543210 G:01 7 2 0\n"
	                           "fedcba9876543210 G:01 8 2 1\n");
	CHECK(rt_choice_lookup(path, &k) == 0 && rt_choice_lookup(path, &k2) == 1);
	// A file of random bytes: nothing found, a store starts it afresh.
	uint8_t junk[4096];
	srand(7);
	for (size_t i = 0; i < sizeof junk; i++)
		junk[i] = (uint8_t)rand();
	FILE *f = fopen(path, "wb");
	fwrite(junk, 1, sizeof junk, f);
	fclose(f);
	CHECK(rt_choice_lookup(path, &k) == -1);
	CHECK(rt_choice_store(path, &k, 1) && rt_choice_lookup(path, &k) == 1);
}

static void
test_unwritable(void)
{
	// A directory that cannot be made (a regular file is in the way; this
	// holds for root too), and a path that is a directory.
	char file[600], path[700];
	snprintf(file, sizeof file, "%s/plain", dir);
	write_file(file, "not a directory\n");
	snprintf(path, sizeof path, "%s/sub/cuda-choices", file);
	RtChoiceKey k = {1, "G", 0, 0};
	CHECK(rt_choice_lookup(path, &k) == -1);
	CHECK(!rt_choice_store(path, &k, 1));
	snprintf(path, sizeof path, "%s/isdir", dir);
	CHECK(mkdir(path, 0700) == 0);
	int before = entries(dir);
	CHECK(rt_choice_lookup(path, &k) == -1);
	CHECK(!rt_choice_store(path, &k, 1)); // rename over a directory fails
	CHECK(entries(dir) == before); // its temporary file is gone
	// A read-only directory (not for root, whom permissions do not stop).
	if (geteuid() != 0) {
		char ro[600];
		snprintf(ro, sizeof ro, "%s/ro", dir);
		CHECK(mkdir(ro, 0500) == 0);
		snprintf(path, sizeof path, "%s/cuda-choices", ro);
		CHECK(!rt_choice_store(path, &k, 1) && entries(ro) == 0);
		chmod(ro, 0700);
	}
	CHECK(!rt_choice_store(NULL, &k, 1) && rt_choice_lookup(NULL, &k) == -1);
}

int
main(void)
{
	const char *tmp = getenv("TMPDIR");
	snprintf(dir, sizeof dir, "%s/fadc-choice.XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	test_path();
	test_gpu_and_env();
	test_store_lookup();
	test_corrupt();
	test_unwritable();
	char cmd[400];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	if (system(cmd))
		fprintf(stderr, "could not remove %s\n", dir);
	return TU_DONE("test_choice_cache");
}
