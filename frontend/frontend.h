// frontend/frontend.h -- IR text to Module: lexer, parser, diagnostics.
//
// Diagnostics are `file:line:col: error: message`, then the source line and
// a caret, then notes.  The parser stops at the first error: diag_error()
// longjmps back to fe_parse_*(), which returns NULL; everything lives in
// arenas, so nothing needs unwinding.
#ifndef FADC_FRONTEND_H
#define FADC_FRONTEND_H

#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>

#include "ir.h"

typedef struct FeOptions {
	const char *const *defines; // "NAME=VALUE" overrides of `let` sizes (-D)
	int ndefines;
	FILE *diag; // where diagnostics go; NULL: nowhere (the fuzzer)
	int no_prelude; // do not load the prelude of composites
	int64_t max_nodes; // the most nodes the frontend builds, all graphs; 0: FE_MAX_NODES
	const char *const *consts; // ONNX float initializers imported as constants, not params (--const)
	int nconsts;
} FeOptions;

// Every call is inlined, so the graph can grow exponentially with the
// program (functions that call the previous one twice): the frontend
// refuses a model that would pass this many nodes, before building them
// (parse.c, "the size after inlining"; fadc --max-nodes).
#define FE_MAX_NODES ((int64_t)1000000)

// The names of the tasks (ir/tasks.def's rows, NULL-ended): what `tasks`
// declarations may name.
extern const char *const fe_task_names[];

// Parses a file / a buffer into a module; NULL after a diagnostic.
Module *fe_parse_file(const char *path, const FeOptions *o);
Module *fe_parse_string(const char *name, const char *text, size_t len, const FeOptions *o);

// onnx.c (library fadc_onnx, linked by the fadc compiler only): an ONNX
// model imported as IR text with quoted names, then parsed (docs/ONNX.md).
Module *fe_onnx_import(const char *path, const FeOptions *o);
// A model from a .ir file, or imported from a .onnx one (by its suffix):
// what fadc-bench opens (also in fadc_onnx).
Module *fe_load_model(const char *path, const FeOptions *o);
// The initializers the import declares (float parameters, int64 constants)
// with their values from the file, for `fadc run --params model.onnx`: 0,
// or 1 after a diagnostic.  Release them with fe_onnx_free.
typedef struct FeTensor {
	char *name; // malloc'ed
	DType dtype; // DT_F32, DT_F64 or DT_I64
	int rank;
	int64_t dim[8];
	void *data; // malloc'ed, C order
} FeTensor;
int fe_onnx_initializers(const char *path, const FeOptions *o, FeTensor **ts, int *n);
void fe_onnx_free(FeTensor *ts, int n);

// ---------------------------------------------------------------- diag.c
typedef struct Diag {
	FILE *out;
	const SrcMap *src;
	jmp_buf *jmp; // where diag_error returns to; NULL: it returns normally
	int nerror;
	// An error at a position inlined from a call (ir.h, SrcLoc) is followed
	// by "note: in call from here" at the call, unless the caller prints
	// the calls itself (the parser, with its whole chain).
	int owncalls;
} Diag;

// An error is printed with diag_emit, its notes with diag_note, and then
// diag_fail returns to the entry point; diag_error does all three for an
// error without notes.  Loc 0 prints "file: error:" without a position
// (errors about the command line).
void diag_report(Diag *d, Loc loc, const char *kind, const char *fmt, va_list ap);
void diag_emit(Diag *d, Loc loc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void diag_note(Diag *d, Loc loc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
_Noreturn void diag_fail(Diag *d);
_Noreturn void diag_error(Diag *d, Loc loc, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

// ---------------------------------------------------------------- lex.c
typedef enum TokKind {
	T_EOF,
	T_NEWLINE, // ends a statement (only outside parentheses and brackets)
	T_IDENT, // names, possibly dotted (layer1.0.conv1.weight), %-names (%12) or quoted ("0.weight")
	T_INT,
	T_FLOAT,
	T_PUNCT, // operators and punctuation: text holds it
} TokKind;

typedef struct Token {
	TokKind kind;
	Loc loc;
	const char *text; // into the source text (not terminated: use len)
	uint32_t len;
	int64_t ival;
	double fval;
	int quoted; // a quoted name: text is the decoded name; never a keyword, never split at '.'
} Token;

// Lexes a whole file that was added to the source map as `file`.
// Returns the token array (ending with T_EOF) in d's arena.
Token *fe_lex(Diag *d, SrcMap *src, uint32_t file, uint32_t *ntok);
int fe_tok_is(const Token *t, const char *s); // identifier or punctuation equal to s

// The prelude, embedded at build time from frontend/prelude.ir.
extern const char fe_prelude_text[];
extern const size_t fe_prelude_len;

#endif
