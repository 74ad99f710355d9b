// tests/install/trace.c -- an LD_PRELOAD library that logs every path a
// process names to the C library: opened, created, looked at (stat,
// access), listed, loaded (dlopen) or run (exec, posix_spawn: the program
// and each argument, which is how fadc hands the support library to the
// linker).  tests/install/install.sh runs the installed fadc and fadc-bench
// under it, children included (they inherit LD_PRELOAD), and fails if a
// path into the source or build tree appears: the install must stand on
// its own.
//
// One line per path, appended to $FADC_TRACE_LOG with one write(2) each
// (O_APPEND: lines of concurrent threads and processes do not interleave).
// Every call goes on to the C library's own function (RTLD_NEXT).
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int
log_fd(void)
{
	static int fd = -2;
	if (fd == -2) {
		const char *p = getenv("FADC_TRACE_LOG");
		int (*real_open)(const char *, int, ...) =
		    (int (*)(const char *, int, ...))dlsym(RTLD_NEXT, "open");
		fd = p && real_open ? real_open(p, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644) : -1;
	}
	return fd;
}

static void
note(const char *what, const char *path)
{
	if (!path)
		return;
	char line[8192];
	int n = snprintf(line, sizeof line, "%s %s\n", what, path);
	int fd = log_fd();
	if (fd >= 0 && n > 0)
		(void)!write(fd, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
}

static void
note_argv(const char *what, const char *path, char *const argv[])
{
	note(what, path);
	for (int i = 0; argv && argv[i]; i++)
		note("arg", argv[i]);
}

#define REAL(name) ((__typeof__(&name))dlsym(RTLD_NEXT, #name))

// open and its variants: the mode is there only with O_CREAT or O_TMPFILE.
#define OPEN_LIKE(name)                                                                            \
	int name(const char *path, int flags, ...)                                                     \
	{                                                                                              \
		mode_t mode = 0;                                                                           \
		if (flags & (O_CREAT | O_TMPFILE)) {                                                       \
			va_list ap;                                                                            \
			va_start(ap, flags);                                                                   \
			mode = va_arg(ap, mode_t);                                                             \
			va_end(ap);                                                                            \
		}                                                                                          \
		note(#name, path);                                                                         \
		return REAL(name)(path, flags, mode);                                                      \
	}
OPEN_LIKE(open)
OPEN_LIKE(open64)

// What open becomes in a caller built with _FORTIFY_SOURCE.
int
__open_2(const char *path, int flags)
{
	note("__open_2", path);
	return REAL(__open_2)(path, flags);
}

int
__open64_2(const char *path, int flags)
{
	note("__open64_2", path);
	return REAL(__open64_2)(path, flags);
}

#define OPENAT_LIKE(name)                                                                          \
	int name(int dir, const char *path, int flags, ...)                                            \
	{                                                                                              \
		mode_t mode = 0;                                                                           \
		if (flags & (O_CREAT | O_TMPFILE)) {                                                       \
			va_list ap;                                                                            \
			va_start(ap, flags);                                                                   \
			mode = va_arg(ap, mode_t);                                                             \
			va_end(ap);                                                                            \
		}                                                                                          \
		note(#name, path);                                                                         \
		return REAL(name)(dir, path, flags, mode);                                                 \
	}
OPENAT_LIKE(openat)
OPENAT_LIKE(openat64)

FILE *
fopen(const char *path, const char *mode)
{
	note("fopen", path);
	return REAL(fopen)(path, mode);
}

FILE *
fopen64(const char *path, const char *mode)
{
	note("fopen64", path);
	return REAL(fopen64)(path, mode);
}

int
access(const char *path, int mode)
{
	note("access", path);
	return REAL(access)(path, mode);
}

int
faccessat(int dir, const char *path, int mode, int flags)
{
	note("faccessat", path);
	return REAL(faccessat)(dir, path, mode, flags);
}

int
stat(const char *path, struct stat *st)
{
	note("stat", path);
	return REAL(stat)(path, st);
}

int
lstat(const char *path, struct stat *st)
{
	note("lstat", path);
	return REAL(lstat)(path, st);
}

int
fstatat(int dir, const char *path, struct stat *st, int flags)
{
	note("fstatat", path);
	return REAL(fstatat)(dir, path, st, flags);
}

int
stat64(const char *path, struct stat64 *st)
{
	note("stat64", path);
	return REAL(stat64)(path, st);
}

int
lstat64(const char *path, struct stat64 *st)
{
	note("lstat64", path);
	return REAL(lstat64)(path, st);
}

int
fstatat64(int dir, const char *path, struct stat64 *st, int flags)
{
	note("fstatat64", path);
	return REAL(fstatat64)(dir, path, st, flags);
}

int
statx(int dir, const char *path, int flags, unsigned mask, struct statx *st)
{
	note("statx", path);
	return REAL(statx)(dir, path, flags, mask, st);
}

DIR *
opendir(const char *path)
{
	note("opendir", path);
	return REAL(opendir)(path);
}

void *
dlopen(const char *path, int flags)
{
	note("dlopen", path);
	return REAL(dlopen)(path, flags);
}

int
execve(const char *path, char *const argv[], char *const envp[])
{
	note_argv("execve", path, argv);
	return REAL(execve)(path, argv, envp);
}

int
execvp(const char *file, char *const argv[])
{
	note_argv("execvp", file, argv);
	return REAL(execvp)(file, argv);
}

int
posix_spawn(pid_t *pid, const char *path, const posix_spawn_file_actions_t *fa,
            const posix_spawnattr_t *attr, char *const argv[], char *const envp[])
{
	note_argv("posix_spawn", path, argv);
	return REAL(posix_spawn)(pid, path, fa, attr, argv, envp);
}

int
posix_spawnp(pid_t *pid, const char *file, const posix_spawn_file_actions_t *fa,
             const posix_spawnattr_t *attr, char *const argv[], char *const envp[])
{
	note_argv("posix_spawnp", file, argv);
	return REAL(posix_spawnp)(pid, file, fa, attr, argv, envp);
}
