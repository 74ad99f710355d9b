// runtime/fileio.h -- the one way fadc's tools open files.
//
// Every input surface (IR text, .npy, .safetensors, artifacts, YAML) opens
// through fio_open_read, every output (artifacts, tensors, folders of
// outputs, reports, caches) through FioOut, and every temporary path a tool
// makes is registered for removal on SIGINT/SIGTERM/SIGHUP.  The rules, once:
//
//   input   a regular file, or a symlink to one.  A FIFO, a device, a
//           socket or a directory is refused before any read (opened with
//           O_NONBLOCK, so a FIFO cannot block the open either).
//   output  a new or regular target is written to a temporary file in the
//           same folder and renamed over it once complete, so a reader sees
//           the old file or the new one.  An existing target that is not a
//           regular file (/dev/null, /dev/stdout, a FIFO) is written in
//           place, never replaced; a directory is refused.
//   aliases an output that is the same file as an input (same device and
//           inode) is refused before anything is written.
//
// Errors are messages "PATH: reason" in the caller's buffer; the callers add
// their "error:" prefix and exit status.
#ifndef FADC_FILEIO_H
#define FADC_FILEIO_H

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>

// Formats a message into err[errlen].  A message longer than the buffer
// keeps its beginning and its end with " [...] " between them, never only
// the beginning: the reason comes last ("PATH: cannot open: File name too
// long"), so a very long path or name must not push it out.
void fio_vmsg(char *err, size_t errlen, const char *fmt, va_list ap);
#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
void fio_msg(char *err, size_t errlen, const char *fmt, ...);

// fadc's cache folder into buf: $FADC_CACHE_DIR, else $XDG_CACHE_HOME/fadc,
// else $HOME/.cache/fadc (empty variables count as unset).  It holds the
// runtime's measured choices (runtime/choice.c) and the compile cache
// (codegen/ccache.c).  0 when none is set or the path does not fit.
int fio_cache_dir(char *buf, size_t len);

// Opens path for reading if it is a regular file (symlinks followed).
// Returns a file descriptor (O_CLOEXEC, blocking), or -1 with err set.
int fio_open_read(const char *path, char *err, size_t errlen);
// The same as a stdio stream ("rb").
FILE *fio_fopen_read(const char *path, char *err, size_t errlen);
// Reads the whole regular file into a malloc'ed buffer (NUL-terminated,
// *len without the NUL).  max bounds the size (0: 1 GiB).  NULL with err set.
char *fio_read_all(const char *path, size_t max, size_t *len, char *err, size_t errlen);

// 1 when a and b name the same existing file (device and inode), else 0.
int fio_same_file(const char *a, const char *b);
// Checks that out is none of the n inputs; 0, or -1 with
// "OUT: is the same file as the input IN" in err.
int fio_check_not_input(const char *out, const char *const *in, int n, char *err,
                        size_t errlen);

// An output being written.
typedef struct FioOut {
	char *path; // the target
	char *tmp; // the temporary file, or NULL when writing in place
	int fd;
	FILE *f; // fio_out_file's stream, if asked for
	int reg; // the cleanup registration of tmp (-1 none)
} FioOut;

// Starts writing path with permissions mode (before the umask).  Refuses a
// directory and an empty name.  0, or -1 with err set (nothing created).
int fio_out_open(FioOut *o, const char *path, mode_t mode, char *err, size_t errlen);
// A stdio stream over the output ("wb"), owned by o.
FILE *fio_out_file(FioOut *o);
// Writes n bytes; 0, or -1 with errno set.
int fio_out_write(FioOut *o, const void *p, size_t n);
// Finishes: flushes, syncs a regular file, renames the temporary over the
// target.  0, or -1 with err set and the temporary removed.  o is done.
int fio_out_commit(FioOut *o, char *err, size_t errlen);
// Gives up: the temporary is removed, the target untouched.  o is done.
void fio_out_abort(FioOut *o);

// The whole of data as path, through FioOut.  0, or -1 with err set.
int fio_write_file(const char *path, const void *data, size_t n, mode_t mode, char *err,
                   size_t errlen);

// Signal cleanup is the tools' choice, not the library's: a process that
// embeds the runtime keeps its own signal handling.  fadc and fadc-bench
// call fio_cleanup_enable first; until then fio_cleanup_add records nothing
// and installs no handler.
void fio_cleanup_enable(void);
// Temporary paths removed if the process dies of SIGINT, SIGTERM or SIGHUP
// (then the signal is raised again with its default action, so the exit
// status says so).  A folder is removed with rmdir after its files:
// register its files after it (they are removed in reverse order).  Returns
// a handle for fio_cleanup_drop, or -1 when the table is full (the path is
// then simply not cleaned on a signal).  Thread-safe; the handler only
// calls unlink, rmdir, signal and raise.
int fio_cleanup_add(const char *path, int is_dir);
void fio_cleanup_drop(int handle);

// Makes a temporary folder "$TMPDIR/PREFIX.XXXXXX" (registered for cleanup);
// the path in buf.  0, or -1 with err set.
int fio_mkdtemp(const char *prefix, char *buf, size_t n, int *handle, char *err,
                size_t errlen);

#endif
