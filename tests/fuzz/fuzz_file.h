// tests/fuzz/fuzz_file.h -- the fuzz input as a file path, for readers that
// take only a path (tio_npy_read, tio_safetensors_read, bench_config_load,
// art_read).
//
// Why a memfd: the readers are the code under test, so the harnesses call
// them as the tools do, by path, rather than growing a from-memory entry
// point.  An anonymous memory file (memfd_create) is a regular file, as
// fileio's rules ask, costs no disk, and disappears with the process, so a
// crashed or timed-out run leaves nothing behind; it is reached by path
// through /proc/self/fd/N (a symlink, which the readers follow).  One file
// per process, truncated and rewritten for each input.
//
// Also: the temporary folder the round-trip writes go to (writers need a
// real folder to place their temporary file and rename it), made once and
// removed at exit.  On /dev/shm where there is one: the writers fsync
// before renaming, which on a disk would cost milliseconds per input and
// on tmpfs costs nothing.
#ifndef FADC_FUZZ_FILE_H
#define FADC_FUZZ_FILE_H

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

// Writes data[0..size) to the process's memory file; returns its path.
static const char *
fuzz_file(const uint8_t *data, size_t size)
{
	static int fd = -1;
	static char path[64];
	if (fd < 0) {
		fd = memfd_create("fadc-fuzz", MFD_CLOEXEC);
		if (fd < 0) {
			perror("fuzz: memfd_create");
			abort();
		}
		snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
	}
	if (ftruncate(fd, 0) != 0) {
		perror("fuzz: ftruncate");
		abort();
	}
	for (size_t done = 0; done < size;) {
		ssize_t w = pwrite(fd, data + done, size - done, (off_t)done);
		if (w <= 0) {
			perror("fuzz: pwrite");
			abort();
		}
		done += (size_t)w;
	}
	return path;
}

static char fuzz_dir_path[256];

static void
fuzz_dir_remove(void)
{
	DIR *d = opendir(fuzz_dir_path);
	if (!d)
		return;
	struct dirent *e;
	char p[512];
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
			snprintf(p, sizeof p, "%s/%s", fuzz_dir_path, e->d_name);
			unlink(p);
		}
	closedir(d);
	rmdir(fuzz_dir_path);
}

// The path of `name` in a temporary folder of this process's own.
static const char *
fuzz_tmp(const char *name)
{
	static char p[512];
	if (!fuzz_dir_path[0]) {
		const char *t = getenv("TMPDIR");
		if (!access("/dev/shm", W_OK))
			t = "/dev/shm";
		snprintf(fuzz_dir_path, sizeof fuzz_dir_path, "%s/fadc-fuzz.XXXXXX",
		         t && *t ? t : "/tmp");
		if (!mkdtemp(fuzz_dir_path)) {
			perror("fuzz: mkdtemp");
			abort();
		}
		atexit(fuzz_dir_remove);
	}
	snprintf(p, sizeof p, "%s/%s", fuzz_dir_path, name);
	return p;
}

#endif
