// tests/unit/test_fileio.c -- runtime/fileio.c, the rules every tool's files
// follow (fileio.h): inputs only regular files (and never blocking on a
// FIFO), outputs atomic or in place for devices, aliases refused, long
// messages keeping their reason, temporaries removed on SIGINT/SIGTERM.
// Each check is against the file system itself (stat, reading back), so a
// broken rule fails here whatever the tools above it do.
#define _XOPEN_SOURCE 700
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fileio.h"
#include "testutil.h"

static char dir[256];

static const char *
path(const char *name)
{
	static char buf[4][512];
	static int k;
	k = (k + 1) % 4;
	snprintf(buf[k], sizeof buf[k], "%s/%s", dir, name);
	return buf[k];
}

static void
put(const char *p, const char *text)
{
	FILE *f = fopen(p, "w");
	fputs(text, f);
	fclose(f);
}

static int
count_entries(const char *d)
{
	char cmd[600];
	snprintf(cmd, sizeof cmd, "ls -A '%s' | wc -l", d);
	FILE *p = popen(cmd, "r");
	int n = -1;
	if (p && fscanf(p, "%d", &n) != 1)
		n = -1;
	if (p)
		pclose(p);
	return n;
}

static void
test_inputs(void)
{
	char err[256];
	size_t len;
	put(path("a.txt"), "hello");
	char *s = fio_read_all(path("a.txt"), 0, &len, err, sizeof err);
	CHECK(s && len == 5 && !strcmp(s, "hello"));
	free(s);
	// Over the limit: refused from its size.
	CHECK(!fio_read_all(path("a.txt"), 4, &len, err, sizeof err) && strstr(err, "too large"));
	// A FIFO without a writer: refused at once (alarm kills a hang).
	mkfifo(path("fifo"), 0600);
	alarm(10);
	CHECK(fio_open_read(path("fifo"), err, sizeof err) < 0);
	CHECK(strstr(err, "is a FIFO, not a regular file") != NULL);
	alarm(0);
	// Devices, directories, symlinks to devices.
	CHECK(!fio_fopen_read("/dev/zero", err, sizeof err) &&
	      strstr(err, "is a character device") != NULL);
	CHECK(fio_open_read(dir, err, sizeof err) < 0 && strstr(err, "is a directory") != NULL);
	CHECK(symlink("/dev/zero", path("zero")) == 0);
	CHECK(fio_open_read(path("zero"), err, sizeof err) < 0);
	// A symlink to a regular file is fine; a missing file says why.
	CHECK(symlink(path("a.txt"), path("link")) == 0);
	int fd = fio_open_read(path("link"), err, sizeof err);
	CHECK(fd >= 0);
	// The descriptor is blocking again (O_NONBLOCK was only for the open).
	CHECK(fd >= 0 && !(fcntl(fd, F_GETFL) & O_NONBLOCK));
	if (fd >= 0)
		close(fd);
	CHECK(fio_open_read(path("nosuch"), err, sizeof err) < 0 &&
	      strstr(err, "No such file or directory") != NULL);
	CHECK(fio_open_read("", err, sizeof err) < 0);
}

static void
test_same_file(void)
{
	char err[512];
	put(path("in"), "x");
	CHECK(link(path("in"), path("hard")) == 0);
	CHECK(symlink(path("in"), path("soft")) == 0);
	CHECK(fio_same_file(path("in"), path("hard")));
	CHECK(fio_same_file(path("soft"), path("in")));
	CHECK(!fio_same_file(path("in"), path("a.txt")));
	CHECK(!fio_same_file(path("in"), path("nosuch")));
	const char *in[] = {path("a.txt"), path("in")};
	CHECK(fio_check_not_input(path("hard"), in, 2, err, sizeof err) < 0);
	CHECK(strstr(err, "is the same file as the input") != NULL);
	CHECK(fio_check_not_input(path("new"), in, 2, err, sizeof err) == 0);
}

static void
test_outputs(void)
{
	char err[512];
	// A new file, then a replacement: the bytes, and no temporary left.
	int before = count_entries(dir);
	CHECK(fio_write_file(path("out.bin"), "abc", 3, 0644, err, sizeof err) == 0);
	CHECK(fio_write_file(path("out.bin"), "defg", 4, 0644, err, sizeof err) == 0);
	size_t len;
	char *s = fio_read_all(path("out.bin"), 0, &len, err, sizeof err);
	CHECK(s && len == 4 && !memcmp(s, "defg", 4));
	free(s);
	CHECK(count_entries(dir) == before + 1);
	// An abandoned output leaves the old file and no temporary.
	FioOut o;
	CHECK(fio_out_open(&o, path("out.bin"), 0644, err, sizeof err) == 0);
	CHECK(o.tmp != NULL && fio_out_write(&o, "zz", 2) == 0);
	fio_out_abort(&o);
	s = fio_read_all(path("out.bin"), 0, &len, err, sizeof err);
	CHECK(s && len == 4 && !memcmp(s, "defg", 4));
	free(s);
	CHECK(count_entries(dir) == before + 1);
	// A device is written in place, never replaced (as root a rename would
	// make it a regular file): our own null device when we may make one.
	const char *null = "/dev/null";
	if (mknod(path("null"), S_IFCHR | 0666, makedev(1, 3)) == 0)
		null = path("null");
	CHECK(fio_write_file(null, "abc", 3, 0644, err, sizeof err) == 0);
	struct stat st;
	CHECK(stat(null, &st) == 0 && S_ISCHR(st.st_mode));
	// A directory is refused.
	CHECK(fio_out_open(&o, dir, 0644, err, sizeof err) < 0 && strstr(err, "is a directory"));
	// A FIFO without a reader fails instead of hanging.
	alarm(10);
	CHECK(fio_write_file(path("fifo"), "x", 1, 0644, err, sizeof err) < 0);
	alarm(0);
	// Through a symlink: the file it names is replaced, the link stays.
	CHECK(symlink(path("out.bin"), path("out.lnk")) == 0);
	CHECK(fio_write_file(path("out.lnk"), "hi", 2, 0644, err, sizeof err) == 0);
	CHECK(lstat(path("out.lnk"), &st) == 0 && S_ISLNK(st.st_mode));
	s = fio_read_all(path("out.bin"), 0, &len, err, sizeof err);
	CHECK(s && len == 2 && !memcmp(s, "hi", 2));
	free(s);
	// No folder: an error naming the path.
	CHECK(fio_write_file(path("no/such/x"), "x", 1, 0644, err, sizeof err) < 0);
	CHECK(strstr(err, "No such file or directory") != NULL);
}

static void
test_messages(void)
{
	// A message longer than the buffer keeps its end, where the reason is.
	char *name = malloc(200001);
	memset(name, 'p', 200000);
	name[200000] = 0;
	char err[300];
	fio_msg(err, sizeof err, "%s: cannot open: %s", name, "File name too long");
	CHECK(strlen(err) == sizeof err - 1);
	CHECK(strstr(err, " [...] ") != NULL);
	size_t n = strlen(err), k = strlen("cannot open: File name too long");
	CHECK(n > k && !strcmp(err + n - k, "cannot open: File name too long"));
	// A short one is untouched.
	fio_msg(err, sizeof err, "%s: %d", "x", 3);
	CHECK(!strcmp(err, "x: 3"));
	free(name);
}

// A child registers a temporary file and folder, then dies of sig: both
// must be gone, and the child must have died of that signal.
static void
test_signal_cleanup(int sig)
{
	char tdir[600], tfile[700];
	snprintf(tdir, sizeof tdir, "%s/sig%d", dir, sig);
	snprintf(tfile, sizeof tfile, "%s/part.o", tdir);
	pid_t pid = fork();
	if (pid == 0) {
		fio_cleanup_enable();
		mkdir(tdir, 0700);
		fio_cleanup_add(tdir, 1);
		put(tfile, "partial");
		fio_cleanup_add(tfile, 0);
		// An output being written, too.
		FioOut o;
		char err[256], out[700];
		snprintf(out, sizeof out, "%s/final.so", dir);
		if (fio_out_open(&o, out, 0644, err, sizeof err) == 0)
			fio_out_write(&o, "half", 4);
		raise(sig);
		_exit(0); // not reached
	}
	int status = 0;
	waitpid(pid, &status, 0);
	CHECK(WIFSIGNALED(status) && WTERMSIG(status) == sig);
	struct stat st;
	CHECK(stat(tfile, &st) != 0 && errno == ENOENT);
	CHECK(stat(tdir, &st) != 0 && errno == ENOENT);
	char cmd[700];
	snprintf(cmd, sizeof cmd, "ls '%s' | grep -q final.so", dir);
	CHECK(system(cmd) != 0); // neither final.so nor its temporary
}

// Without fio_cleanup_enable (a process embedding the runtime) nothing is
// registered and no handler installed: the caller's signals stay its own.
static void
test_cleanup_off_by_default(void)
{
	pid_t pid = fork();
	if (pid == 0) {
		int h = fio_cleanup_add("/tmp/x", 0);
		struct sigaction sa;
		sigaction(SIGINT, NULL, &sa);
		_exit(h == -1 && sa.sa_handler == SIG_DFL ? 0 : 1);
	}
	int status = 0;
	waitpid(pid, &status, 0);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

int
main(void)
{
	const char *t = getenv("TMPDIR");
	snprintf(dir, sizeof dir, "%s/test_fileio.XXXXXX", t && *t ? t : "/tmp");
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	test_inputs();
	test_same_file();
	test_outputs();
	test_messages();
	test_signal_cleanup(SIGINT);
	test_signal_cleanup(SIGTERM);
	test_cleanup_off_by_default();
	char cmd[400];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", dir);
	return TU_DONE("test_fileio");
}
