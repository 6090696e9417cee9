/* Template lexer: jinja2 3.1's lexer.py rules with trim_blocks and
 * lstrip_blocks (see ast.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat/ast.h"
#include "core/alloc.h"
#include "core/status.h"

struct lx {
	const char *s;  /* normalized source */
	size_t n, i;
	int line;
	bool line_starting;
	struct tokens *out;
	struct fx_err *err;
};

static int push(struct lx *l, struct token t)
{
	struct tokens *o = l->out;
	if (o->n == o->cap) {
		size_t cap = o->cap ? 2 * o->cap : 64;
		struct token *a = fx_realloc_array(o->a, cap, sizeof(*a));
		if (!a) {
			fx_free(t.s);
			return fx_fail(l->err, FX_E_NOMEM, "out of memory lexing the template");
		}
		o->a = a;
		o->cap = cap;
	}
	o->a[o->n++] = t;
	return FX_OK;
}

static int push_text(struct lx *l, const char *s, size_t n, int line)
{
	if (!n)
		return FX_OK;
	struct token t = { .type = T_TEXT, .line = line, .n = n };
	if (!(t.s = fx_strndup(s, n)))
		return fx_fail(l->err, FX_E_NOMEM, "out of memory lexing the template");
	return push(l, t);
}

static int count_nl(const char *s, size_t n)
{
	int c = 0;
	for (size_t i = 0; i < n; i++)
		c += s[i] == '\n';
	return c;
}

/* Python's \s at s[i..n): length of the whitespace code point, or 0. */
static size_t ws_at(const char *s, size_t n, size_t i)
{
	uint32_t cp;
	size_t len = u8_decode(s + i, n - i, &cp);
	return py_isspace(cp) ? len : 0;
}

static size_t skip_ws(const char *s, size_t n, size_t i)
{
	size_t k;
	while (i < n && (k = ws_at(s, n, i)))
		i += k;
	return i;
}

/* Length of text[0..n) with trailing whitespace removed (str.rstrip()). */
static size_t rstrip_len(const char *s, size_t n)
{
	size_t keep = 0;
	for (size_t i = 0; i < n;) {
		size_t k = ws_at(s, n, i);
		if (k) {
			i += k;
		} else {
			uint32_t cp;
			i += u8_decode(s + i, n - i, &cp);
			keep = i;
		}
	}
	return keep;
}

/* Match the end of a block/comment tag at l->i: "+X", "-X\s*" or "X\n?"
 * (X = "%}" or "#}"). Returns the match length or 0. */
static size_t match_block_end(const struct lx *l, size_t i, char c)
{
	const char *s = l->s;
	if (i + 2 < l->n + 0 && (s[i] == '+' || s[i] == '-') && s[i + 1] == c && s[i + 2] == '}') {
		if (s[i] == '+')
			return 3;
		return skip_ws(s, l->n, i + 3) - i;
	}
	if (i + 1 < l->n && s[i] == c && s[i + 1] == '}')
		return i + 2 < l->n && s[i + 2] == '\n' ? 3 : 2;
	return 0;
}

static size_t match_var_end(const struct lx *l, size_t i)
{
	const char *s = l->s;
	if (i + 2 < l->n && s[i] == '-' && s[i + 1] == '}' && s[i + 2] == '}')
		return skip_ws(s, l->n, i + 3) - i;
	if (i + 1 < l->n && s[i] == '}' && s[i + 1] == '}')
		return 2;
	return 0;
}

/* A string literal at l->i, decoded as Python's unicode-escape of jinja2. */
static int lex_string(struct lx *l, struct token *t)
{
	const char *s = l->s;
	char q = s[l->i];
	size_t i = l->i + 1;
	struct sbuf b = { 0 };
	for (;;) {
		if (i >= l->n) {
			sb_free(&b);
			return fx_fail(l->err, FX_E_FORMAT, "template line %d: unterminated string", l->line);
		}
		char c = s[i];
		if (c == q)
			break;
		if (c != '\\' || i + 1 >= l->n) {
			sb_put(&b, &c, 1, 0);
			i++;
			continue;
		}
		char e = s[i + 1];
		const char *simple = "\\\\''\"\"n\nt\tr\ra\ab\bf\fv\v";
		const char *hit = NULL;
		for (const char *p = simple; *p; p += 2)
			if (*p == e) {
				hit = p + 1;
				break;
			}
		if (hit) {
			sb_put(&b, hit, 1, 0);
			i += 2;
		} else if (e == '\n') {
			i += 2;
		} else if (e == 'x' || e == 'u' || e == 'U') {
			int nd = e == 'x' ? 2 : e == 'u' ? 4 : 8;
			uint32_t cp = 0;
			for (int k = 0; k < nd; k++) {
				char h = i + 2 + (size_t)k < l->n ? s[i + 2 + (size_t)k] : 0;
				int v = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10
					: h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
				if (v < 0) {
					sb_free(&b);
					return fx_fail(l->err, FX_E_FORMAT,
						       "template line %d: truncated \\%c escape in a string",
						       l->line, e);
				}
				cp = cp * 16 + (uint32_t)v;
			}
			char u[4];
			sb_put(&b, u, u8_encode(cp, u), 0);
			i += 2 + (size_t)nd;
		} else if (e >= '0' && e <= '7') {
			uint32_t cp = 0;
			size_t k = i + 1;
			for (int d = 0; d < 3 && k < l->n && s[k] >= '0' && s[k] <= '7'; d++, k++)
				cp = cp * 8 + (uint32_t)(s[k] - '0');
			char u[4];
			sb_put(&b, u, u8_encode(cp, u), 0);
			i = k;
		} else {
			sb_put(&b, s + i, 2, 0); /* unknown escape: kept as written */
			i += 2;
		}
	}
	if (b.oom) {
		sb_free(&b);
		return fx_fail(l->err, FX_E_NOMEM, "out of memory lexing the template");
	}
	t->type = T_STR;
	t->n = b.n;
	t->s = b.p ? b.p : fx_strndup("", 0);
	fx_free(b.f);
	if (!t->s)
		return fx_fail(l->err, FX_E_NOMEM, "out of memory lexing the template");
	l->line += count_nl(s + l->i, i + 1 - l->i);
	l->i = i + 1;
	return FX_OK;
}

static bool is_digit(char c) { return c >= '0' && c <= '9'; }
static bool is_name0(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }

/* Tokens inside a tag until its end; var: "{{ }}" else "{% %}". */
static int lex_tag(struct lx *l, bool var)
{
	char stack[256];
	int depth = 0, rc;
	for (;;) {
		if (l->i >= l->n)
			return fx_fail(l->err, FX_E_FORMAT, "template line %d: unexpected end of template, expected '%s'",
				       l->line, var ? "}}" : "%}");
		if (depth == 0) {
			size_t m = var ? match_var_end(l, l->i) : match_block_end(l, l->i, '%');
			if (m) {
				struct token t = { .type = var ? T_VEND : T_BEND, .line = l->line };
				l->line_starting = l->s[l->i + m - 1] == '\n';
				l->line += count_nl(l->s + l->i, m);
				l->i += m;
				return push(l, t);
			}
		}
		size_t w = ws_at(l->s, l->n, l->i);
		if (w) {
			l->line += l->s[l->i] == '\n';
			l->i += w;
			continue;
		}
		const char *s = l->s;
		char c = s[l->i];
		struct token t = { .line = l->line };
		if (c == '\'' || c == '"') {
			if ((rc = lex_string(l, &t)) || (rc = push(l, t)))
				return rc;
			continue;
		}
		if (is_digit(c)) {
			size_t j = l->i;
			while (j < l->n && (is_digit(s[j]) || s[j] == '_'))
				j++;
			bool isf = false;
			if (j + 1 < l->n && s[j] == '.' && is_digit(s[j + 1])) {
				isf = true;
				j++;
				while (j < l->n && (is_digit(s[j]) || s[j] == '_'))
					j++;
			}
			if (j < l->n && (s[j] == 'e' || s[j] == 'E')) {
				size_t k = j + 1;
				if (k < l->n && (s[k] == '+' || s[k] == '-'))
					k++;
				if (k < l->n && is_digit(s[k])) {
					isf = true;
					j = k;
					while (j < l->n && is_digit(s[j]))
						j++;
				}
			}
			char tmp[64];
			size_t tn = 0;
			for (size_t k = l->i; k < j && tn < sizeof(tmp) - 1; k++)
				if (s[k] != '_')
					tmp[tn++] = s[k];
			tmp[tn] = 0;
			if (isf) {
				t.type = T_FLOAT;
				t.f = strtod(tmp, NULL);
			} else {
				t.type = T_INT;
				errno = 0;
				t.i = strtoll(tmp, NULL, 10);
				if (errno == ERANGE || tn >= sizeof(tmp) - 1)
					return fx_fail(l->err, FX_E_FORMAT,
						       "template line %d: integer literal %s is beyond 64 bits", l->line, tmp);
			}
			l->i = j;
			if ((rc = push(l, t)))
				return rc;
			continue;
		}
		if (is_name0(c)) {
			size_t j = l->i;
			while (j < l->n && (is_name0(s[j]) || is_digit(s[j])))
				j++;
			t.type = T_NAME;
			t.n = j - l->i;
			if (!(t.s = fx_strndup(s + l->i, t.n)))
				return fx_fail(l->err, FX_E_NOMEM, "out of memory lexing the template");
			l->i = j;
			if ((rc = push(l, t)))
				return rc;
			continue;
		}
		static const char *ops2[] = { "//", "**", "==", "!=", ">=", "<=" };
		t.type = T_OP;
		size_t len = 0;
		for (size_t k = 0; k < sizeof(ops2) / sizeof(ops2[0]); k++)
			if (l->i + 1 < l->n && s[l->i] == ops2[k][0] && s[l->i + 1] == ops2[k][1])
				len = 2;
		if (!len) {
			if (!strchr("+-/*%~[](){}><=.:|,;", c) || !c)
				return fx_fail(l->err, FX_E_FORMAT, "template line %d: unexpected character '%c'",
					       l->line, c);
			len = 1;
		}
		memcpy(t.op, s + l->i, len);
		if (len == 1 && strchr("([{", c)) {
			if (depth == (int)sizeof(stack))
				return fx_fail(l->err, FX_E_FORMAT, "template line %d: brackets nested too deeply", l->line);
			stack[depth++] = c == '(' ? ')' : c == '[' ? ']' : '}';
		} else if (len == 1 && strchr(")]}", c)) {
			if (!depth)
				return fx_fail(l->err, FX_E_FORMAT, "template line %d: unexpected '%c'", l->line, c);
			if (stack[--depth] != c)
				return fx_fail(l->err, FX_E_FORMAT, "template line %d: unexpected '%c', expected '%c'",
					       l->line, c, stack[depth]);
		}
		l->i += len;
		if ((rc = push(l, t)))
			return rc;
	}
}

/* "{%[-+]?\s*WORD\s*" and an end at i; the length of the match or 0.
 * raw's end is "-%}\s*" or "%}" (no newline trimmed, no "+%}"); endraw's
 * is "+%}", "-%}\s*" or "%}\n?" (jinja2's raw_begin and raw rules). */
static size_t match_raw(const struct lx *l, size_t i, const char *word, bool endraw)
{
	const char *s = l->s;
	size_t j = i + 2, wn = strlen(word);
	if (j < l->n && (s[j] == '-' || s[j] == '+'))
		j++;
	j = skip_ws(s, l->n, j);
	if (j + wn > l->n || memcmp(s + j, word, wn))
		return 0;
	j = skip_ws(s, l->n, j + wn);
	if (endraw && j + 2 < l->n && s[j] == '+' && s[j + 1] == '%' && s[j + 2] == '}')
		return j + 3 - i;
	if (j + 2 < l->n && s[j] == '-' && s[j + 1] == '%' && s[j + 2] == '}')
		return skip_ws(s, l->n, j + 3) - i;
	if (j + 1 < l->n && s[j] == '%' && s[j + 1] == '}')
		return j + 2 - i + (endraw && j + 2 < l->n && s[j + 2] == '\n');
	return 0;
}

static int lex_root(struct lx *l)
{
	const char *s = l->s;
	int rc;
	while (l->i < l->n) {
		size_t m = l->i;
		while (m + 1 < l->n && !(s[m] == '{' && (s[m + 1] == '{' || s[m + 1] == '%' || s[m + 1] == '#')))
			m++;
		if (m + 1 >= l->n)
			return push_text(l, s + l->i, l->n - l->i, l->line);
		char kind = s[m + 1];
		char sign = m + 2 < l->n && (s[m + 2] == '-' || s[m + 2] == '+') ? s[m + 2] : 0;
		size_t tlen = m - l->i;
		const char *text = s + l->i;
		int text_line = l->line;
		if (sign == '-') {
			tlen = rstrip_len(text, tlen);
		} else if (sign != '+' && kind != '{') {
			size_t lp = tlen;
			while (lp > 0 && text[lp - 1] != '\n')
				lp--;
			if ((lp > 0 || l->line_starting) && lp < tlen && skip_ws(text, tlen, lp) == tlen)
				tlen = lp;
		}
		l->line += count_nl(s + l->i, m - l->i);
		if ((rc = push_text(l, text, tlen, text_line)))
			return rc;
		l->line_starting = false;
		size_t raw = kind == '%' ? match_raw(l, m, "raw", false) : 0;
		if (raw) {
			size_t j = m + raw, e = j, end = 0;
			for (; e + 1 < l->n; e++)
				if (s[e] == '{' && s[e + 1] == '%' && (end = match_raw(l, e, "endraw", true)))
					break;
			if (!end)
				return fx_fail(l->err, FX_E_FORMAT, "template line %d: missing end of raw directive", l->line);
			/* the raw text before endraw: "-" strips its tail, "+" keeps it,
			 * else lstrip_blocks as before any block tag */
			size_t rlen = e - j;
			char esign = e + 2 < l->n ? s[e + 2] : 0;
			if (esign == '-') {
				rlen = rstrip_len(s + j, rlen);
			} else if (esign != '+') {
				size_t lp = rlen;
				while (lp > 0 && s[j + lp - 1] != '\n')
					lp--;
				if ((lp > 0 || s[j - 1] == '\n') && lp < rlen && skip_ws(s + j, rlen, lp) == rlen)
					rlen = lp;
			}
			size_t k = e + end;
			if ((rc = push_text(l, s + j, rlen, l->line)))
				return rc;
			l->line += count_nl(s + m, k - m);
			l->line_starting = s[k - 1] == '\n';
			l->i = k;
			continue;
		}
		l->i = m + 2 + (sign ? 1 : 0);
		if (kind == '#') {
			size_t e = l->i, em = 0;
			for (; e < l->n; e++)
				if ((em = match_block_end(l, e, '#')))
					break;
			if (!em)
				return fx_fail(l->err, FX_E_FORMAT, "template line %d: missing end of comment tag", l->line);
			l->line += count_nl(s + l->i, e + em - l->i);
			l->line_starting = s[e + em - 1] == '\n';
			l->i = e + em;
			continue;
		}
		struct token t = { .type = kind == '{' ? T_VBEGIN : T_BBEGIN, .line = l->line };
		if ((rc = push(l, t)) || (rc = lex_tag(l, kind == '{')))
			return rc;
	}
	return FX_OK;
}

int chat_lex(const char *src, size_t n, struct tokens *out, struct fx_err *err)
{
	char *s = fx_malloc_array(n + 1, 1);
	size_t k = 0;
	if (!s)
		return fx_fail(err, FX_E_NOMEM, "out of memory lexing the template");
	for (size_t i = 0; i < n; i++) {
		if (src[i] == '\r') {
			s[k++] = '\n';
			if (i + 1 < n && src[i + 1] == '\n')
				i++;
		} else {
			s[k++] = src[i];
		}
	}
	if (k && s[k - 1] == '\n')
		k--;
	s[k] = 0;
	struct lx l = { s, k, 0, 1, true, out, err };
	memset(out, 0, sizeof(*out));
	int rc = lex_root(&l);
	if (!rc)
		rc = push(&l, (struct token){ .type = T_EOF, .line = l.line });
	fx_free(s);
	if (rc)
		chat_tokens_free(out);
	return rc;
}

void chat_tokens_free(struct tokens *t)
{
	for (size_t i = 0; i < t->n; i++)
		fx_free(t->a[i].s);
	fx_free(t->a);
	memset(t, 0, sizeof(*t));
}
