// support/msg.c -- the one printf-into-a-buffer of fadc's messages.
//
// Every layer formats its errors into a caller's buffer (char *err, size_t
// errlen): the IR's shape rules, verifier and interpreter (ir_errf), the
// file rules and tensor files (fio_msg), the artifact reader.  They share
// this definition, so that one rule holds everywhere: a message longer than
// the buffer keeps its beginning and its end with " [...] " between them,
// never only the beginning, because the reason comes last ("PATH: cannot
// open: File name too long") and a long path or name must not push it out.
// It lives in support/, the leaf below every layer; only the tools' build of
// it (fadc_support_host) has it: compiled models never format messages.
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support.h"

void
sup_vmsg(char *err, size_t errlen, const char *fmt, va_list ap)
{
	if (!err || !errlen)
		return;
	va_list ap2;
	va_copy(ap2, ap);
	int len = vsnprintf(err, errlen, fmt, ap);
	static const char mid[] = " [...] ";
	size_t nmid = sizeof mid - 1;
	if (len >= 0 && (size_t)len >= errlen && errlen > nmid + 16) {
		char *full = malloc((size_t)len + 1);
		if (full) {
			vsnprintf(full, (size_t)len + 1, fmt, ap2);
			// A third of the room for the beginning (a path's start), the
			// rest for the end (its end and the reason).
			size_t room = errlen - 1 - nmid, head = room / 3, tail = room - head;
			memcpy(err, full, head);
			memcpy(err + head, mid, nmid);
			memcpy(err + head + nmid, full + (size_t)len - tail, tail);
			err[errlen - 1] = 0;
			free(full);
		}
	}
	va_end(ap2);
}

void
sup_msg(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	sup_vmsg(err, errlen, fmt, ap);
	va_end(ap);
}
