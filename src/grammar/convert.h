/* What the JSON Schema and regex converters (schema.c, regex.c) share: a
 * growable text buffer and GBNF quoting, and the regex translation that a
 * schema's "pattern" reuses inside a JSON string.
 */
#ifndef FX_GRAMMAR_CONVERT_H
#define FX_GRAMMAR_CONVERT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ferrox.h"

struct gram_buf {
	char *p;   /* NUL-terminated after n bytes, or NULL while empty */
	size_t n, cap;
	bool oom;  /* an append failed: the text is incomplete */
};

void gram_buf_add(struct gram_buf *b, const char *s, size_t n);
void gram_buf_puts(struct gram_buf *b, const char *s);
void gram_buf_printf(struct gram_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* s[0..n) as a GBNF string literal, quotes included ("a\"b"). */
void gram_buf_literal(struct gram_buf *b, const char *s, size_t n);
/* Code point c as it goes inside a GBNF literal or class (escaped when it
 * is a quote, a backslash, a bracket, a dash, a caret or not printable). */
void gram_buf_cp(struct gram_buf *b, uint32_t c);
void gram_buf_free(struct gram_buf *b);

/* Append to out one parenthesized GBNF expression for strings that match
 * re wholly (regex.c's subset). json_string: the strings as they are
 * written inside a JSON string literal (a quote, a backslash or a control
 * character appears escaped; `.` is the rule char_rule, JSON's string
 * character), for a schema's "pattern"; anchored: whether ^ and $ are
 * implied (false: JSON Schema's search semantics, any text around).
 * Errors: FX_E_INVALID naming the position, FX_E_NOMEM. */
int gram_regex_expr(const char *re, bool json_string, bool anchored, const char *char_rule,
		    struct gram_buf *out, struct fx_err *err);

#endif
