/* Helpers shared by the JSON Schema (schema.c) and regex (regex.c)
 * converters to GBNF: a growing string and the regex translator that
 * schema.c's "pattern" goes through. */
#ifndef FX_GRAMMAR_CONVERT_H
#define FX_GRAMMAR_CONVERT_H

#include <stdbool.h>
#include <stddef.h>

#include "ferrox.h"

/* A malloc'ed growing string; failed is set (and further writes dropped)
 * when memory runs out, so callers check once at the end. */
struct conv_sb {
	char *p;
	size_t n, cap;
	bool failed;
};

void conv_sb_put(struct conv_sb *b, const char *s, size_t n);
void conv_sb_puts(struct conv_sb *b, const char *s);
void conv_sb_printf(struct conv_sb *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* s[0..n) (bytes, UTF-8) as one GBNF string literal "...". */
void conv_sb_lit(struct conv_sb *b, const char *s, size_t n);

/* Append to out a GBNF expression (one parenthesised term) for the strings
 * regex matches. json: the strings are written as the content of a JSON
 * string (", \ and control characters as escapes) rather than raw.
 * search: JSON Schema's unanchored "pattern" semantics (a branch without
 * ^ may be preceded, without $ followed, by anything, written with the
 * rule any_char); else the whole string (re.fullmatch). Errors:
 * FX_E_INVALID "regex: position N: ..." (what = "regex" or the caller's
 * prefix), FX_E_NOMEM. */
int conv_regex(const char *regex, bool json, bool search, const char *any_char,
	       struct conv_sb *out, const char *what, struct fx_err *err);

#endif
