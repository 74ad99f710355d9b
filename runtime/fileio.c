// runtime/fileio.c -- opening inputs, writing outputs, cleaning up on signals.
//
// The rules are in fileio.h.  Why each is what it is:
//
// - Inputs are opened with O_NONBLOCK and checked with fstat on the open
//   descriptor, not with stat before the open: stat-then-open races with a
//   rename, and a plain open of a FIFO blocks until a writer appears, which
//   is the hang this guards against.  O_NONBLOCK is cleared again for a
//   regular file (it means nothing there, but stdio should see a normal fd).
// - Outputs to a new or regular path go through a temporary file beside the
//   target (same filesystem, so rename is atomic) and are fsync'ed before
//   the rename: after a crash the name holds the old bytes or the new ones.
//   rename over /dev/null would replace the device node with a regular file
//   (as root), so an existing non-regular target is opened and written in
//   place, as cc -o /dev/null does; only a directory is refused.
// - The signal handler runs only async-signal-safe calls (unlink, rmdir,
//   sigaction, raise) over a fixed table, so it is safe wherever it lands.
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#define _XOPEN_SOURCE 700 // realpath
#include "fileio.h"
#include "support.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef PATH_MAX
#define PATH_MAX 4096
#endif

void
fio_vmsg(char *err, size_t errlen, const char *fmt, va_list ap)
{
	sup_vmsg(err, errlen, fmt, ap); // support/msg.c: the one formatter
}

void
fio_msg(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fio_vmsg(err, errlen, fmt, ap);
	va_end(ap);
}

static int
fail(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fio_vmsg(err, errlen, fmt, ap);
	va_end(ap);
	return -1;
}

static const char *
kind_of(mode_t m)
{
	return S_ISDIR(m)    ? "a directory"
	       : S_ISFIFO(m) ? "a FIFO"
	       : S_ISCHR(m)  ? "a character device"
	       : S_ISBLK(m)  ? "a block device"
	       : S_ISSOCK(m) ? "a socket"
	                     : "not a regular file";
}

// ---------------------------------------------------------------- inputs

int
fio_open_read(const char *path, char *err, size_t errlen)
{
	if (!path || !*path)
		return fail(err, errlen, "%s: empty file name", path ? path : "(null)");
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return fail(err, errlen, "%s: cannot open: %s", path, strerror(errno));
	struct stat st;
	if (fstat(fd, &st) != 0) {
		int e = errno;
		close(fd);
		return fail(err, errlen, "%s: cannot stat: %s", path, strerror(e));
	}
	if (!S_ISREG(st.st_mode)) {
		close(fd);
		return fail(err, errlen, "%s: is %s, not a regular file", path, kind_of(st.st_mode));
	}
	int fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0) {
		int e = errno;
		close(fd);
		return fail(err, errlen, "%s: cannot open: %s", path, strerror(e));
	}
	return fd;
}

FILE *
fio_fopen_read(const char *path, char *err, size_t errlen)
{
	int fd = fio_open_read(path, err, errlen);
	if (fd < 0)
		return NULL;
	FILE *f = fdopen(fd, "rb");
	if (!f) {
		fail(err, errlen, "%s: cannot open: %s", path, strerror(errno));
		close(fd);
	}
	return f;
}

char *
fio_read_all(const char *path, size_t max, size_t *len, char *err, size_t errlen)
{
	if (!max)
		max = (size_t)1 << 30;
	int fd = fio_open_read(path, err, errlen);
	if (fd < 0)
		return NULL;
	struct stat st;
	if (fstat(fd, &st) != 0 || st.st_size < 0) {
		fail(err, errlen, "%s: cannot stat: %s", path, strerror(errno));
		close(fd);
		return NULL;
	}
	if ((uint64_t)st.st_size > max) {
		fail(err, errlen, "%s: too large (%lld bytes; the limit is %zu)", path,
		     (long long)st.st_size, max);
		close(fd);
		return NULL;
	}
	// The size is a hint (the file may grow or shrink while read): read to
	// EOF, growing the buffer, never beyond max.
	size_t cap = (size_t)st.st_size + 1, n = 0;
	char *buf = malloc(cap);
	for (;;) {
		if (!buf) {
			fail(err, errlen, "%s: out of memory", path);
			break;
		}
		if (n + 1 == cap) {
			if (cap - 1 >= max) {
				fail(err, errlen, "%s: too large (over %zu bytes)", path, max);
				free(buf);
				buf = NULL;
				break;
			}
			size_t nc = cap * 2 > max + 1 ? max + 1 : cap * 2;
			char *nb = realloc(buf, nc);
			if (!nb) {
				free(buf);
				buf = NULL;
				continue;
			}
			buf = nb;
			cap = nc;
		}
		ssize_t r = read(fd, buf + n, cap - 1 - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			fail(err, errlen, "%s: cannot read: %s", path, strerror(errno));
			free(buf);
			buf = NULL;
			break;
		}
		if (r == 0)
			break;
		n += (size_t)r;
	}
	close(fd);
	if (buf) {
		buf[n] = 0;
		*len = n;
	}
	return buf;
}

int
fio_same_file(const char *a, const char *b)
{
	struct stat sa, sb;
	if (!a || !b || stat(a, &sa) != 0 || stat(b, &sb) != 0)
		return 0;
	return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

int
fio_check_not_input(const char *out, const char *const *in, int n, char *err, size_t errlen)
{
	for (int i = 0; i < n; i++)
		if (in[i] && fio_same_file(out, in[i]))
			return fail(err, errlen, "%s: is the same file as the input %s; refusing to "
			                         "overwrite it", out, in[i]);
	return 0;
}

// ---------------------------------------------------------------- cleanup on signals

// A compile writes up to a few hundred object files (LLVM pieces per CPU
// level, NVRTC programs): slots hold pointers to copies of the paths, so the
// table stays small; a copy is freed only after its slot is marked unused.
enum { NCLEAN = 1024 };
static struct {
	volatile sig_atomic_t used;
	int is_dir;
	char *volatile path;
} clean[NCLEAN];
static pthread_mutex_t clean_mu = PTHREAD_MUTEX_INITIALIZER;
static int clean_enabled, clean_installed;
static const int clean_sigs[] = {SIGINT, SIGTERM, SIGHUP};

static void
on_signal(int sig)
{
	// Newest first: a folder's files were registered after it.
	for (int i = NCLEAN - 1; i >= 0; i--)
		if (clean[i].used && clean[i].path) {
			if (clean[i].is_dir)
				rmdir(clean[i].path);
			else
				unlink(clean[i].path);
		}
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = SIG_DFL;
	sigemptyset(&sa.sa_mask);
	sigaction(sig, &sa, NULL);
	raise(sig);
}

static void
install_handlers(void)
{
	for (size_t k = 0; k < sizeof clean_sigs / sizeof clean_sigs[0]; k++) {
		struct sigaction old, sa;
		// A signal the caller ignores (nohup) stays ignored.
		if (sigaction(clean_sigs[k], NULL, &old) != 0 || old.sa_handler == SIG_IGN ||
		    (old.sa_flags & SA_SIGINFO) || old.sa_handler != SIG_DFL)
			continue;
		memset(&sa, 0, sizeof sa);
		sa.sa_handler = on_signal;
		sigemptyset(&sa.sa_mask);
		for (size_t j = 0; j < sizeof clean_sigs / sizeof clean_sigs[0]; j++)
			sigaddset(&sa.sa_mask, clean_sigs[j]);
		sigaction(clean_sigs[k], &sa, NULL);
	}
}

void
fio_cleanup_enable(void)
{
	pthread_mutex_lock(&clean_mu);
	clean_enabled = 1;
	pthread_mutex_unlock(&clean_mu);
}

int
fio_cleanup_add(const char *path, int is_dir)
{
	if (!path || strlen(path) >= PATH_MAX)
		return -1;
	int h = -1;
	pthread_mutex_lock(&clean_mu);
	if (!clean_enabled) {
		pthread_mutex_unlock(&clean_mu);
		return -1;
	}
	if (!clean_installed) {
		install_handlers();
		clean_installed = 1;
	}
	// The highest free slot above every used one keeps "newest last".
	int top = -1;
	for (int i = 0; i < NCLEAN; i++)
		if (clean[i].used)
			top = i;
	for (int i = top + 1; i < NCLEAN && h < 0; i++)
		h = i;
	if (h < 0) // full at the top: any free slot (order then not kept)
		for (int i = 0; i < NCLEAN && h < 0; i++)
			if (!clean[i].used)
				h = i;
	char *copy = h >= 0 ? strdup(path) : NULL;
	if (!copy)
		h = -1;
	if (h >= 0) {
		clean[h].path = copy;
		clean[h].is_dir = is_dir;
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
		clean[h].used = 1;
	}
	pthread_mutex_unlock(&clean_mu);
	return h;
}

void
fio_cleanup_drop(int h)
{
	if (h < 0 || h >= NCLEAN)
		return;
	pthread_mutex_lock(&clean_mu);
	clean[h].used = 0;
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	char *p = clean[h].path;
	clean[h].path = NULL;
	pthread_mutex_unlock(&clean_mu);
	free(p);
}

int
fio_mkdtemp(const char *prefix, char *buf, size_t n, int *handle, char *err, size_t errlen)
{
	const char *tmp = getenv("TMPDIR");
	if (!tmp || !*tmp)
		tmp = "/tmp";
	if ((size_t)snprintf(buf, n, "%s/%s.XXXXXX", tmp, prefix) >= n)
		return fail(err, errlen, "%s: the temporary folder's name is too long", tmp);
	if (!mkdtemp(buf))
		return fail(err, errlen, "cannot make a temporary folder in %s: %s", tmp,
		            strerror(errno));
	int h = fio_cleanup_add(buf, 1);
	if (handle)
		*handle = h;
	else
		fio_cleanup_drop(h);
	return 0;
}

// ---------------------------------------------------------------- outputs

int
fio_out_open(FioOut *o, const char *path, mode_t mode, char *err, size_t errlen)
{
	memset(o, 0, sizeof *o);
	o->fd = -1;
	o->reg = -1;
	if (!path || !*path)
		return fail(err, errlen, "an output file name is empty");
	struct stat st;
	if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
		if (S_ISDIR(st.st_mode))
			return fail(err, errlen, "%s: is a directory", path);
		// A device, a FIFO, a socket's path: write into it as it is.
		// O_NONBLOCK only for the open, so a FIFO without a reader fails
		// (ENXIO) instead of hanging.
		int fd = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
		if (fd < 0)
			return fail(err, errlen, "%s: cannot open for writing: %s", path, strerror(errno));
		int fl = fcntl(fd, F_GETFL);
		if (fl >= 0)
			fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
		if (!(o->path = strdup(path))) {
			close(fd);
			return fail(err, errlen, "%s: out of memory", path);
		}
		o->fd = fd;
		return 0;
	}
	// A symlink to a regular file: the file is replaced, the link kept
	// (rename over the link would replace the link itself).
	struct stat lst;
	char *real = NULL;
	if (lstat(path, &lst) == 0 && S_ISLNK(lst.st_mode) && !(real = realpath(path, NULL)))
		return fail(err, errlen, "%s: cannot resolve the symbolic link: %s", path,
		            strerror(errno));
	const char *given = path;
	size_t len = strlen(real ? real : path) + 32;
	o->path = real ? real : strdup(path); // owned by o from here on
	o->tmp = malloc(len);
	if (!o->path || !o->tmp) {
		free(o->path);
		free(o->tmp);
		o->path = o->tmp = NULL;
		return fail(err, errlen, "%s: out of memory", given);
	}
	path = o->path; // the file written: the link's target, or the name given
	// Beside the target; O_EXCL makes a clash with another writer fail
	// instead of sharing the file.  The name carries the pid and a counter.
	static unsigned counter;
	for (int k = 0; k < 100 && o->fd < 0; k++) {
		unsigned c = __atomic_fetch_add(&counter, 1, __ATOMIC_RELAXED);
		snprintf(o->tmp, len, "%s.tmp%ld.%u", path, (long)getpid(), c);
		// Registered before it exists, so no signal finds it unregistered
		// (the name carries our pid: removing it before it exists is harmless).
		o->reg = fio_cleanup_add(o->tmp, 0);
		o->fd = open(o->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
		if (o->fd >= 0)
			break;
		fio_cleanup_drop(o->reg);
		o->reg = -1;
		if (errno != EEXIST)
			break;
	}
	if (o->fd < 0) {
		int e = errno;
		// The temporary's name is noise to the user: the folder is what matters.
		fail(err, errlen, "%s: cannot create temporary file beside it: %s", path, strerror(e));
		free(o->path);
		free(o->tmp);
		o->path = o->tmp = NULL;
		return -1;
	}
	return 0;
}

FILE *
fio_out_file(FioOut *o)
{
	if (!o->f && o->fd >= 0)
		o->f = fdopen(o->fd, "wb");
	return o->f;
}

int
fio_out_write(FioOut *o, const void *p, size_t n)
{
	if (o->f)
		return fwrite(p, 1, n, o->f) == n ? 0 : (errno = errno ? errno : EIO, -1);
	const char *c = p;
	while (n) {
		ssize_t w = write(o->fd, c, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			if (w == 0)
				errno = EIO;
			return -1;
		}
		c += w;
		n -= (size_t)w;
	}
	return 0;
}

static void
out_free(FioOut *o)
{
	fio_cleanup_drop(o->reg);
	free(o->path);
	free(o->tmp);
	o->path = o->tmp = NULL;
	o->f = NULL;
	o->fd = -1;
	o->reg = -1;
}

int
fio_out_commit(FioOut *o, char *err, size_t errlen)
{
	int e = 0;
	errno = 0;
	if (o->f) {
		if (fflush(o->f) != 0 || ferror(o->f))
			e = errno ? errno : EIO;
	}
	// Only a new file needs to be on disk before its rename; a device
	// written in place may not support fsync at all.
	if (!e && o->tmp && fsync(o->fd) != 0)
		e = errno ? errno : EIO;
	if (o->f) {
		if (fclose(o->f) != 0 && !e)
			e = errno ? errno : EIO;
	} else if (close(o->fd) != 0 && !e && o->tmp)
		e = errno ? errno : EIO;
	if (!e && o->tmp && rename(o->tmp, o->path) != 0)
		e = errno ? errno : EIO;
	if (e) {
		fail(err, errlen, "%s: write failed: %s", o->path, strerror(e));
		if (o->tmp)
			unlink(o->tmp);
	}
	out_free(o);
	return e ? -1 : 0;
}

void
fio_out_abort(FioOut *o)
{
	if (!o->path)
		return;
	if (o->f)
		fclose(o->f);
	else if (o->fd >= 0)
		close(o->fd);
	if (o->tmp)
		unlink(o->tmp);
	out_free(o);
}

int
fio_write_file(const char *path, const void *data, size_t n, mode_t mode, char *err,
               size_t errlen)
{
	FioOut o;
	if (fio_out_open(&o, path, mode, err, errlen))
		return -1;
	if (fio_out_write(&o, data, n) != 0) {
		fail(err, errlen, "%s: write failed: %s", path, strerror(errno));
		fio_out_abort(&o);
		return -1;
	}
	return fio_out_commit(&o, err, errlen);
}

int
fio_cache_dir(char *buf, size_t len)
{
	const char *dir = getenv("FADC_CACHE_DIR"), *sub = "";
	if (!dir || !*dir) {
		dir = getenv("XDG_CACHE_HOME");
		sub = "/fadc";
	}
	if (!dir || !*dir) {
		dir = getenv("HOME");
		sub = "/.cache/fadc";
	}
	if (!dir || !*dir)
		return 0;
	int n = snprintf(buf, len, "%s%s", dir, sub);
	return n > 0 && (size_t)n < len;
}
