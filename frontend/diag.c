// frontend/diag.c -- diagnostics: `file:line:col: error: message`, then the
// source line and a caret under the column, then notes.
//
// Errors stop the frontend: diag_fail longjmps to the entry point, which
// returns NULL.  Everything the frontend built lives in arenas owned by the
// entry point, so no cleanup code is needed on the way out (the condition
// that makes Lua's longjmp style safe).
#include <string.h>

#include "frontend.h"

// Prints the source line of `sl` and a caret under its column.  Tabs are
// kept in the caret line so that it lines up in any terminal, and a UTF-8
// character (in a comment) takes one column, not one per byte.  A line
// longer than CARET_WIDTH bytes is cut to a window around the column,
// with "..." where it was cut.
#define CARET_WIDTH 160

static void
print_caret(FILE *f, const SrcFile *file, const SrcLoc *sl)
{
	const char *p = file->text, *end = file->text + file->len;
	for (uint32_t line = 1; line < sl->line && p < end; p++)
		if (*p == '\n')
			line++;
	const char *e = p;
	while (e < end && *e != '\n')
		e++;
	const char *at = p + sl->col - 1 < e ? p + sl->col - 1 : e;
	const char *lo = p, *hi = e;
	if (e - p > CARET_WIDTH) {
		lo = at - p > CARET_WIDTH / 2 ? at - CARET_WIDTH / 2 : p;
		hi = e - lo > CARET_WIDTH ? lo + CARET_WIDTH : e;
		while (lo > p && ((unsigned char)*lo & 0xc0) == 0x80) // whole characters
			lo--;
		while (hi < e && ((unsigned char)*hi & 0xc0) == 0x80)
			hi++;
	}
	const char *pre = lo > p ? "..." : "";
	fprintf(f, "%s%.*s%s\n", pre, (int)(hi - lo), lo, hi < e ? "..." : "");
	fputs(pre, f);
	for (const char *q = lo; q < at; q++) {
		unsigned char b = (unsigned char)*q;
		if ((b & 0xc0) != 0x80) // not a continuation byte
			fputc(b == '\t' ? '\t' : ' ', f);
	}
	fputs("^\n", f);
}

void
diag_report(Diag *d, Loc loc, const char *kind, const char *fmt, va_list ap)
{
	if (!d->out)
		return;
	const SrcLoc *sl = d->src && loc && loc < d->src->nloc ? &d->src->loc[loc] : NULL;
	if (sl) {
		const SrcFile *file = &d->src->file[sl->file];
		fprintf(d->out, "%s:%u:%u: %s: ", file->name, sl->line, sl->col, kind);
		vfprintf(d->out, fmt, ap);
		fputc('\n', d->out);
		print_caret(d->out, file, sl);
	} else {
		const char *name = d->src && d->src->nfile ? d->src->file[d->src->nfile - 1].name : "fadc";
		fprintf(d->out, "%s: %s: ", name, kind);
		vfprintf(d->out, fmt, ap);
		fputc('\n', d->out);
	}
}

// The call a position was inlined from (a node of a prelude composite
// that a pass or the runtime reports), as clang's "in instantiation of
// ... requested here".
static void
note_call(Diag *d, Loc loc)
{
	if (d->owncalls || !d->src || !loc || loc >= d->src->nloc || !d->src->loc[loc].call)
		return;
	diag_note(d, d->src->loc[loc].call, "in call from here");
}

void
diag_emit(Diag *d, Loc loc, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	diag_report(d, loc, "error", fmt, ap);
	va_end(ap);
	d->nerror++;
	note_call(d, loc);
}

void
diag_note(Diag *d, Loc loc, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	diag_report(d, loc, "note", fmt, ap);
	va_end(ap);
}

void
diag_fail(Diag *d)
{
	FADC_ASSERT(d->jmp, "diag_fail outside a frontend entry point");
	longjmp(*d->jmp, 1);
}

void
diag_error(Diag *d, Loc loc, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	diag_report(d, loc, "error", fmt, ap);
	va_end(ap);
	d->nerror++;
	note_call(d, loc);
	diag_fail(d);
}
