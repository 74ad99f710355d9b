// frontend/lex.c -- the lexer: source text to an array of tokens.
//
// The whole file is lexed up front; the parser walks the array and, to
// inline a function, walks the function's tokens again.  Newlines end
// statements, Python-style, except
//   - inside ( ) and [ ] (an argument list may span lines),
//   - after a token that cannot end an expression (an operator, ',', '='),
//   - before a line that starts with a binary operator or '.', so that
//       return a
//            + b
//     is one statement.
// Names may be dotted (layer1.0.conv1.weight: PyTorch's parameter names)
// or start with '%' (the canonical printer's %12), or be quoted: "0.weight",
// "/layer/Add_output_0" (ONNX's names, kept exactly; see lex_quoted).
// `#` starts a comment.
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "frontend.h"

typedef struct Lexer {
	Diag *d;
	SrcMap *src;
	uint32_t file;
	const char *text, *p, *end;
	uint32_t line;
	const char *linestart;
	int depth; // ( and [ nesting
	Token *tok;
	uint32_t ntok, ctok;
} Lexer;

static Loc
here(Lexer *l, const char *at)
{
	return ir_srcmap_loc(l->src, l->file, l->line, (uint32_t)(at - l->linestart) + 1);
}

int
fe_tok_is(const Token *t, const char *s)
{
	size_t n = strlen(s);
	if (t->quoted)
		return 0; // "param" is a name, never the keyword
	return (t->kind == T_IDENT || t->kind == T_PUNCT) && t->len == n && !memcmp(t->text, s, n);
}

static Token *
push(Lexer *l, TokKind k, const char *start, const char *stop)
{
	arena_grow(l->src->arena, (void **)&l->tok, &l->ctok, l->ntok + 1, sizeof *l->tok);
	Token *t = &l->tok[l->ntok++];
	memset(t, 0, sizeof *t);
	t->kind = k;
	t->loc = here(l, start);
	t->text = start;
	t->len = (uint32_t)(stop - start);
	return t;
}

// Can the previous token end an expression?  If not, a newline after it
// continues the statement.
static int
prev_continues(Lexer *l)
{
	if (!l->ntok)
		return 1;
	const Token *t = &l->tok[l->ntok - 1];
	if (t->kind == T_NEWLINE)
		return 1;
	if (t->kind != T_PUNCT)
		return 0;
	return !(fe_tok_is(t, ")") || fe_tok_is(t, "]") || fe_tok_is(t, "}"));
}

static int
is_ident_start(int c)
{
	return isalpha(c) || c == '_' || c == '%';
}

static int
is_ident_char(int c)
{
	return isalnum(c) || c == '_';
}

// Does the next non-blank, non-comment line start with a binary operator
// or '.'?  Then it continues the current statement.
static int
next_line_continues(const char *p, const char *end)
{
	for (;;) {
		while (p < end && (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n'))
			p++;
		if (p < end && *p == '#') {
			while (p < end && *p != '\n')
				p++;
			continue;
		}
		break;
	}
	if (p >= end)
		return 0;
	if (*p == '-' && p + 1 < end && p[1] == '>')
		return 1;
	if (*p == '%' && p + 1 < end && is_ident_char((unsigned char)p[1]))
		return 0; // a %-name starts a statement

	return strchr("+-*/@%<>=!.", *p) != NULL;
}


static void
lex_number(Lexer *l)
{
	const char *s = l->p;
	int isfloat = 0;
	while (l->p < l->end && isdigit((unsigned char)*l->p))
		l->p++;
	if (l->p < l->end && *l->p == '.' && !(l->p + 1 < l->end && isalpha((unsigned char)l->p[1]))) {
		isfloat = 1;
		l->p++;
		while (l->p < l->end && isdigit((unsigned char)*l->p))
			l->p++;
	}
	if (l->p < l->end && (*l->p == 'e' || *l->p == 'E')) {
		const char *q = l->p + 1;
		if (q < l->end && (*q == '+' || *q == '-'))
			q++;
		if (q < l->end && isdigit((unsigned char)*q)) {
			isfloat = 1;
			l->p = q;
			while (l->p < l->end && isdigit((unsigned char)*l->p))
				l->p++;
		}
	}
	if (l->p < l->end && (is_ident_char((unsigned char)*l->p) || *l->p == '.'))
		diag_error(l->d, here(l, l->p), "invalid character '%c' in number", *l->p);
	char buf[64];
	size_t n = (size_t)(l->p - s);
	if (n >= sizeof buf)
		diag_error(l->d, here(l, s), "number literal too long");
	memcpy(buf, s, n);
	buf[n] = 0;
	Token *t = push(l, isfloat ? T_FLOAT : T_INT, s, l->p);
	errno = 0;
	if (isfloat) {
		t->fval = strtod(buf, NULL);
		if (errno == ERANGE && (t->fval > 1 || t->fval < -1))
			diag_error(l->d, t->loc, "floating-point literal %s is out of range", buf);
	} else {
		// 2^63 is lexed (as INT64_MIN, which no other literal gives) for
		// -9223372036854775808, the smallest int64: the parser refuses it
		// anywhere but after a unary minus.
		unsigned long long v = strtoull(buf, NULL, 10);
		if (errno == ERANGE || v > (unsigned long long)INT64_MAX + 1)
			diag_error(l->d, t->loc, "integer literal %s is too large", buf);
		t->ival = v > (unsigned long long)INT64_MAX ? INT64_MIN : (int64_t)v;
	}
}

// The length of the UTF-8 sequence at p (and its code point), or 0 if it
// is not one: overlong forms, surrogates and truncated sequences are not.
static int
utf8_decode(const char *p, const char *end, uint32_t *cp)
{
	const unsigned char *s = (const unsigned char *)p;
	int n = s[0] >= 0xf0 && s[0] < 0xf5 ? 4 : s[0] >= 0xe0 ? 3 : s[0] >= 0xc2 && s[0] < 0xe0 ? 2 : 0;
	if (!n || end - p < n || s[0] >= 0xf5)
		return 0;
	uint32_t c = s[0] & (0x7f >> n);
	for (int i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		c = c << 6 | (s[i] & 0x3f);
	}
	static const uint32_t min[5] = {0, 0, 0x80, 0x800, 0x10000};
	if (c < min[n] || c > 0x10ffff || (c >= 0xd800 && c < 0xe000))
		return 0;
	*cp = c;
	return n;
}

// A quoted name: any non-empty text between double quotes on one line,
// with \" and \\ the only escapes.  It is a T_IDENT whose text is the
// decoded name (in the arena, not the source) and that is never a keyword
// nor split at its dots (Token.quoted).  Control characters (a tab too)
// and bytes that are not UTF-8 are refused, so that every name the IR
// holds prints back (ir/print.c, print_name) and is safe in a message.
static void
lex_quoted(Lexer *l)
{
	const char *s = l->p, *q = s + 1;
	while (q < l->end && *q != '"' && *q != '\n')
		q += *q == '\\' && q + 1 < l->end && q[1] != '\n' ? 2 : 1;
	if (q >= l->end || *q != '"')
		diag_error(l->d, here(l, s), "unterminated quoted name (a closing '\"' is missing on this line)");
	if (q == s + 1)
		diag_error(l->d, here(l, s), "empty quoted name");
	char *buf = arena_alloc(l->src->arena, (size_t)(q - s));
	uint32_t n = 0;
	for (const char *c = s + 1; c < q;) {
		unsigned char b = (unsigned char)*c;
		uint32_t cp;
		int k;
		if (b == '\\') {
			unsigned char e = (unsigned char)c[1];
			if (e != '"' && e != '\\') {
				if (e >= 0x20 && e < 0x7f)
					diag_error(l->d, here(l, c), "invalid escape '\\%c' in a quoted name (only \\\" and \\\\)", e);
				diag_error(l->d, here(l, c), "invalid escape in a quoted name (only \\\" and \\\\)");
			}
			buf[n++] = (char)e;
			c += 2;
		} else if (b < 0x20 || b == 0x7f) {
			diag_error(l->d, here(l, c), "control character 0x%02x in a quoted name", b);
		} else if (b >= 0x80) {
			if (!(k = utf8_decode(c, q, &cp)))
				diag_error(l->d, here(l, c), "byte 0x%02x in a quoted name is not UTF-8 text", b);
			memcpy(buf + n, c, (size_t)k);
			n += (uint32_t)k;
			c += k;
		} else {
			buf[n++] = (char)b;
			c++;
		}
	}
	buf[n] = 0;
	Token *t = push(l, T_IDENT, s, q + 1);
	t->text = buf;
	t->len = n;
	t->quoted = 1;
	l->p = q + 1;
}

static const char *const puncts[] = {"->", "**", "//", "<=", ">=", "==", "!=", "(", ")", "[", "]", "{",
                                     "}", ",", ":", "=", "+", "-", "*", "/", "%", "@", "<", ">", ";",
                                     ".", NULL};

Token *
fe_lex(Diag *d, SrcMap *src, uint32_t file, uint32_t *ntok)
{
	Lexer l = {.d = d, .src = src, .file = file, .line = 1};
	l.text = src->file[file].text;
	l.p = l.linestart = l.text;
	l.end = l.text + src->file[file].len;
	while (l.p < l.end) {
		unsigned char c = (unsigned char)*l.p;
		if (c == '\n') {
			if (!l.depth && !prev_continues(&l) && !next_line_continues(l.p + 1, l.end))
				push(&l, T_NEWLINE, l.p, l.p + 1);
			l.p++;
			l.line++;
			l.linestart = l.p;
			continue;
		}
		if (c == ' ' || c == '\t' || c == '\r') {
			l.p++;
			continue;
		}
		if (c == '#') {
			while (l.p < l.end && *l.p != '\n')
				l.p++;
			continue;
		}
		if (isdigit(c)) {
			lex_number(&l);
			continue;
		}
		if (is_ident_start(c)) {
			const char *s = l.p++;
			if (c == '%' && (l.p >= l.end || !is_ident_char((unsigned char)*l.p))) {
				push(&l, T_PUNCT, s, l.p);
				continue;
			}
			for (;;) {
				while (l.p < l.end && is_ident_char((unsigned char)*l.p))
					l.p++;
				// A dot continues the name when a name character follows.
				if (l.p + 1 < l.end && *l.p == '.' && is_ident_char((unsigned char)l.p[1]))
					l.p++;
				else
					break;
			}
			push(&l, T_IDENT, s, l.p);
			continue;
		}
		if (c == '"') {
			lex_quoted(&l);
			continue;
		}
		int found = 0;
		for (int i = 0; puncts[i]; i++) {
			size_t n = strlen(puncts[i]);
			if ((size_t)(l.end - l.p) >= n && !memcmp(l.p, puncts[i], n)) {
				if (puncts[i][0] == '(' || puncts[i][0] == '[')
					l.depth++;
				if ((puncts[i][0] == ')' || puncts[i][0] == ']') && l.depth > 0)
					l.depth--;
				if (puncts[i][0] == '{' || puncts[i][0] == '}')
					l.depth = 0; // a brace always ends any bracket nesting
				push(&l, T_PUNCT, l.p, l.p + n);
				l.p += n;
				found = 1;
				break;
			}
		}
		if (found)
			continue;
		if (c >= 0x20 && c < 0x7f)
			diag_error(d, here(&l, l.p), "unexpected character '%c'", c);
		if (c >= 0x80) {
			uint32_t cp;
			int n = utf8_decode(l.p, l.end, &cp);
			if (n)
				diag_error(d, here(&l, l.p),
				           "unexpected character '%.*s' (U+%04X): non-ASCII text is allowed only in comments",
				           n, l.p, (unsigned)cp);
			diag_error(d, here(&l, l.p), "unexpected byte 0x%02x (not UTF-8 text)", c);
		}
		diag_error(d, here(&l, l.p), "unexpected byte 0x%02x", c);
	}
	if (l.ntok && l.tok[l.ntok - 1].kind != T_NEWLINE)
		push(&l, T_NEWLINE, l.p, l.p);
	push(&l, T_EOF, l.p, l.p);
	*ntok = l.ntok;
	return l.tok;
}
