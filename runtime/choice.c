// runtime/choice.c -- the cache of choices measured on the GPU: one text
// file, one line per decision (runtime/choice.h).  Every failure here is
// quiet: the caller times the choice again.
#include "choice.h"
#include "fileio.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define LINE_MAX_BYTES 1024 // a longer line is a bad one
#define CANDIDATE_MAX 255

int
rt_choice_path(char *buf, size_t len)
{
	char dir[4096];
	if (!fio_cache_dir(dir, sizeof dir))
		return 0;
	int n = snprintf(buf, len, "%s/%s", dir, RT_CHOICE_FILE);
	return n > 0 && (size_t)n < len;
}

void
rt_choice_gpu(char buf[RT_CHOICE_GPU_MAX], const char *name, const uint8_t *uuid)
{
	size_t n = 0, room = RT_CHOICE_GPU_MAX - 1 - (uuid ? 33 : 0);
	for (const char *p = name && *name ? name : "gpu"; *p && n < room; p++) {
		char ch = *p;
		int ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
		         ch == '-' || ch == '.' || ch == '_';
		buf[n++] = ok ? ch : '_';
	}
	if (uuid) {
		buf[n++] = ':';
		for (int i = 0; i < 16; i++, n += 2)
			snprintf(buf + n, 3, "%02x", uuid[i]);
	}
	buf[n] = 0;
}

int
rt_choice_forced(const char *env)
{
	if (!env || !*env || !strcmp(env, "auto"))
		return -1;
	char *end = NULL;
	long v = strtol(env, &end, 10);
	return *end || v < 0 || v > CANDIDATE_MAX || env[0] == '-' || env[0] == '+' ? -2 : (int)v;
}

// A decimal number of at most 10 digits into *v, up to max.
static int
num(const char *s, uint64_t max, uint64_t *v)
{
	uint64_t x = 0;
	size_t n = 0;
	for (; s[n]; n++) {
		if (s[n] < '0' || s[n] > '9' || n >= 10)
			return 0;
		x = x * 10 + (uint64_t)(s[n] - '0');
	}
	*v = x;
	return n > 0 && x <= max;
}

typedef struct Line {
	uint64_t artifact;
	char gpu[RT_CHOICE_GPU_MAX];
	uint32_t task, choice;
	int candidate;
} Line;

// Parses one line (without its newline): five fields separated by single
// spaces, each as rt_choice_store writes them.  0 for anything else.
static int
parse(const char *text, Line *l)
{
	char buf[LINE_MAX_BYTES + 1];
	size_t n = strlen(text);
	if (n > LINE_MAX_BYTES)
		return 0;
	memcpy(buf, text, n + 1);
	char *f[6];
	int nf = 0;
	for (char *p = buf; nf < 6;) {
		f[nf++] = p;
		char *sp = strchr(p, ' ');
		if (!sp)
			break;
		*sp = 0;
		p = sp + 1;
	}
	if (nf != 5)
		return 0;
	for (int i = 0; i < 5; i++)
		if (!f[i][0])
			return 0;
	// The artifact: exactly 16 lowercase hex digits.
	if (strlen(f[0]) != 16)
		return 0;
	l->artifact = 0;
	for (const char *p = f[0]; *p; p++) {
		int d = *p >= '0' && *p <= '9' ? *p - '0' : *p >= 'a' && *p <= 'f' ? *p - 'a' + 10 : -1;
		if (d < 0)
			return 0;
		l->artifact = l->artifact << 4 | (uint64_t)d;
	}
	size_t gl = strlen(f[1]);
	if (gl >= RT_CHOICE_GPU_MAX)
		return 0;
	for (const char *p = f[1]; *p; p++)
		if (*p <= ' ' || *p > '~')
			return 0;
	memcpy(l->gpu, f[1], gl + 1);
	uint64_t t, c, k;
	if (!num(f[2], UINT32_MAX, &t) || !num(f[3], UINT32_MAX, &c) || !num(f[4], CANDIDATE_MAX, &k))
		return 0;
	l->task = (uint32_t)t;
	l->choice = (uint32_t)c;
	l->candidate = (int)k;
	return 1;
}

static int
same_key(const Line *l, const RtChoiceKey *k)
{
	return l->artifact == k->artifact && !strcmp(l->gpu, k->gpu) && l->task == k->task &&
	       l->choice == k->choice;
}

// Reads the next line of f into *buf (getline's buffer), without its
// newline; a line longer than LINE_MAX_BYTES comes back whole (parse
// refuses it).  0 at the end.
static int
next_line(FILE *f, char **buf, size_t *cap)
{
	ssize_t n = getline(buf, cap, f);
	if (n < 0)
		return 0;
	if (n > 0 && (*buf)[n - 1] == '\n')
		(*buf)[n - 1] = 0;
	return 1;
}

int
rt_choice_lookup(const char *path, const RtChoiceKey *key)
{
	FILE *f = path ? fio_fopen_read(path, NULL, 0) : NULL;
	if (!f)
		return -1;
	char *buf = NULL;
	size_t cap = 0;
	int found = -1;
	Line l;
	while (next_line(f, &buf, &cap))
		if (parse(buf, &l) && same_key(&l, key))
			found = l.candidate; // the last line for a key wins
	free(buf);
	fclose(f);
	return found;
}

// mkdir -p of path's directory (0700 for what it makes).
static int
make_dirs(const char *path)
{
	char d[4096];
	size_t n = strlen(path);
	if (n >= sizeof d)
		return 0;
	memcpy(d, path, n + 1);
	char *slash = strrchr(d, '/');
	if (!slash || slash == d)
		return 1; // the current directory, or the root
	*slash = 0;
	for (char *p = d + 1;; p++) {
		if (*p != '/' && *p)
			continue;
		char save = *p;
		*p = 0;
		if (mkdir(d, 0700) && errno != EEXIST)
			return 0;
		*p = save;
		if (!save)
			break;
	}
	struct stat st;
	return !stat(d, &st) && S_ISDIR(st.st_mode);
}

int
rt_choice_store(const char *path, const RtChoiceKey *key, int candidate)
{
	if (!path || !key || !key->gpu || candidate < 0 || candidate > CANDIDATE_MAX ||
	    strlen(key->gpu) >= RT_CHOICE_GPU_MAX || strchr(key->gpu, ' ') ||
	    strchr(key->gpu, '\n') || !key->gpu[0] || !make_dirs(path))
		return 0;
	// Through fio_out: a temporary beside the cache, renamed over it.
	FioOut o;
	if (fio_out_open(&o, path, 0644, NULL, 0))
		return 0;
	FILE *out = fio_out_file(&o);
	if (!out) {
		fio_out_abort(&o);
		return 0;
	}
	// The good lines of the old file, but key's; then key's.
	FILE *in = fio_fopen_read(path, NULL, 0);
	char *buf = NULL;
	size_t cap = 0;
	Line l;
	while (in && next_line(in, &buf, &cap))
		if (parse(buf, &l) && !same_key(&l, key))
			fprintf(out, "%016llx %s %u %u %d\n", (unsigned long long)l.artifact, l.gpu, l.task,
			        l.choice, l.candidate);
	free(buf);
	if (in)
		fclose(in);
	fprintf(out, "%016llx %s %u %u %d\n", (unsigned long long)key->artifact, key->gpu, key->task,
	        key->choice, candidate);
	if (ferror(out)) {
		fio_out_abort(&o);
		return 0;
	}
	if (fio_out_commit(&o, NULL, 0))
		return 0;
	return 1;
}
