/* Regular expressions to GBNF: the ECMAScript-style subset that JSON
 * Schema's "pattern" and vLLM's regex constraint use, translated
 * construct by construct (GBNF has alternation, groups, classes and the
 * same quantifiers, so the translation is syntactic, as llama.cpp's
 * json-schema-to-grammar does for patterns). Fullmatch semantics; ^ and $
 * only at the ends. Not supported, each an error naming the position:
 * backreferences, lookaround, word boundaries, a class shorthand's
 * negation inside a class.
 *
 * Also the shared text buffer of convert.h.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/status.h"
#include "grammar/convert.h"

#define RX_MAX_NEST 128
#define RX_MAX_RANGES 512

/* ---- gram_buf ---- */

void gram_buf_add(struct gram_buf *b, const char *s, size_t n)
{
	if (b->oom)
		return;
	if (b->n + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 256;
		while (cap < b->n + n + 1)
			cap *= 2;
		char *p = fx_realloc_array(b->p, cap, 1);
		if (!p) {
			b->oom = true;
			return;
		}
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->n, s, n);
	b->n += n;
	b->p[b->n] = 0;
}

void gram_buf_puts(struct gram_buf *b, const char *s)
{
	gram_buf_add(b, s, strlen(s));
}

void gram_buf_printf(struct gram_buf *b, const char *fmt, ...)
{
	char tmp[512];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof(tmp)) {
		b->oom = true; /* callers format short pieces only */
		return;
	}
	gram_buf_add(b, tmp, (size_t)n);
}

void gram_buf_cp(struct gram_buf *b, uint32_t c)
{
	char tmp[16];
	if (c == '"' || c == '\\' || c == '[' || c == ']' || c == '-' || c == '^') {
		tmp[0] = '\\';
		tmp[1] = (char)c;
		gram_buf_add(b, tmp, 2);
	} else if (c < 0x20 || c == 0x7f) {
		gram_buf_printf(b, "\\x%02X", c);
	} else if (c < 0x80) {
		tmp[0] = (char)c;
		gram_buf_add(b, tmp, 1);
	} else if (c < 0x10000) {
		gram_buf_printf(b, "\\u%04X", c);
	} else {
		gram_buf_printf(b, "\\U%08X", c);
	}
}

void gram_buf_literal(struct gram_buf *b, const char *s, size_t n)
{
	gram_buf_add(b, "\"", 1);
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c == '"' || c == '\\') {
			char e[2] = { '\\', (char)c };
			gram_buf_add(b, e, 2);
		} else if (c < 0x20 || c == 0x7f) {
			gram_buf_printf(b, "\\x%02X", c);
		} else {
			gram_buf_add(b, (const char *)&c, 1); /* UTF-8 passes through */
		}
	}
	gram_buf_add(b, "\"", 1);
}

void gram_buf_free(struct gram_buf *b)
{
	fx_free(b->p);
	*b = (struct gram_buf){ 0 };
}

/* ---- the regex parser ---- */

struct rx {
	const char *s, *p, *end;
	bool json;
	const char *char_rule;
	struct fx_err *err;
	int rc;
	int depth;
};

struct cls {
	uint32_t lo[RX_MAX_RANGES], hi[RX_MAX_RANGES];
	int n;
	bool neg;
};

__attribute__((format(printf, 3, 4))) static int rerr(struct rx *r, const char *at, const char *fmt, ...)
{
	char what[256];
	va_list ap;
	if (r->rc)
		return r->rc;
	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	r->rc = fx_fail(r->err, FX_E_INVALID, "regex: at offset %ld of '%.80s': %s",
			(long)(at - r->s), r->s, what);
	return r->rc;
}

/* Offset of the first byte of s that is not well-formed UTF-8, or -1. */
static long utf8_invalid_at(const char *str)
{
	const unsigned char *s = (const unsigned char *)str;
	for (long i = 0; s[i];) {
		unsigned c = s[i];
		int n = c < 0x80 ? 0 : (c & 0xe0) == 0xc0 ? 1 : (c & 0xf0) == 0xe0 ? 2 : (c & 0xf8) == 0xf0 ? 3 : -1;
		if (n < 0)
			return i;
		uint32_t cp = n ? c & (0x3fu >> n) : c;
		for (int k = 1; k <= n; k++) {
			if ((s[i + k] & 0xc0) != 0x80)
				return i;
			cp = (cp << 6) | (s[i + k] & 0x3f);
		}
		static const uint32_t min[] = { 0, 0x80, 0x800, 0x10000 };
		if (cp < min[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
			return i;
		i += 1 + n;
	}
	return -1;
}

static uint32_t next_cp(struct rx *r)
{
	const unsigned char *s = (const unsigned char *)r->p;
	uint32_t c = s[0];
	int n = c >= 0xf0 ? 3 : c >= 0xe0 ? 2 : c >= 0xc0 ? 1 : 0;
	if (r->p + 1 + n > r->end)
		n = 0;
	if (n)
		c &= 0x3fu >> n;
	for (int i = 1; i <= n; i++)
		c = (c << 6) | (s[i] & 0x3f);
	r->p += 1 + n;
	return c;
}

static bool cls_add(struct rx *r, struct cls *c, uint32_t lo, uint32_t hi)
{
	if (c->n == RX_MAX_RANGES) {
		rerr(r, r->p, "character class with more than %d ranges", RX_MAX_RANGES);
		return false;
	}
	c->lo[c->n] = lo;
	c->hi[c->n++] = hi;
	return true;
}

/* \d \w \s (ECMAScript's definitions; \s with the Unicode spaces). */
static bool cls_shorthand(struct rx *r, struct cls *c, char k)
{
	static const uint32_t space[][2] = { { 9, 13 }, { 32, 32 }, { 0xa0, 0xa0 }, { 0x1680, 0x1680 },
					     { 0x2000, 0x200a }, { 0x2028, 0x2029 }, { 0x202f, 0x202f },
					     { 0x205f, 0x205f }, { 0x3000, 0x3000 }, { 0xfeff, 0xfeff } };
	switch (k) {
	case 'd':
		return cls_add(r, c, '0', '9');
	case 'w':
		return cls_add(r, c, '0', '9') && cls_add(r, c, 'A', 'Z') && cls_add(r, c, '_', '_') &&
		       cls_add(r, c, 'a', 'z');
	default:
		for (size_t i = 0; i < sizeof(space) / sizeof(space[0]); i++)
			if (!cls_add(r, c, space[i][0], space[i][1]))
				return false;
		return true;
	}
}

static int hexv(char c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 :
	       c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* The character of an escape at r->p (after the backslash) that stands
 * for one code point; -1 when it is not one (a shorthand, an error). */
static long escape_cp(struct rx *r)
{
	const char *at = r->p - 1;
	char k = *r->p;
	int digits = 0;
	switch (k) {
	case 'n': r->p++; return '\n';
	case 't': r->p++; return '\t';
	case 'r': r->p++; return '\r';
	case 'f': r->p++; return '\f';
	case 'v': r->p++; return '\v';
	case '0': r->p++; return 0;
	case 'x': digits = 2; break;
	case 'u': digits = 4; break;
	case 'b': case 'B':
		rerr(r, at, "word boundaries (\\%c) are not supported", k);
		return -1;
	default:
		if (k >= '1' && k <= '9') {
			rerr(r, at, "backreferences are not supported");
			return -1;
		}
		if ((k >= 'a' && k <= 'z') || (k >= 'A' && k <= 'Z')) {
			rerr(r, at, "unknown escape \\%c", k);
			return -1;
		}
		return (long)next_cp(r); /* \. \\ \( ... : the character itself */
	}
	r->p++;
	long v = 0;
	if (k == 'u' && r->p < r->end && *r->p == '{') { /* \u{...} */
		r->p++;
		while (r->p < r->end && *r->p != '}' && hexv(*r->p) >= 0 && v <= 0x10ffff)
			v = v * 16 + hexv(*r->p++);
		if (r->p >= r->end || *r->p != '}' || v > 0x10ffff) {
			rerr(r, at, "bad \\u{...} escape");
			return -1;
		}
		r->p++;
		return v;
	}
	for (int i = 0; i < digits; i++) {
		int h = r->p < r->end ? hexv(*r->p) : -1;
		if (h < 0) {
			rerr(r, at, "expected %d hex digits after \\%c", digits, k);
			return -1;
		}
		v = v * 16 + h;
		r->p++;
	}
	return v;
}

/* [...] at r->p (after the '['). */
static bool parse_class(struct rx *r, struct cls *c)
{
	const char *start = r->p - 1;
	c->n = 0;
	c->neg = r->p < r->end && *r->p == '^';
	if (c->neg)
		r->p++;
	bool first = true;
	while (r->p < r->end && (*r->p != ']' || first)) {
		long lo, hi;
		first = false;
		if (*r->p == '\\') {
			r->p++;
			if (r->p >= r->end)
				break;
			char k = *r->p;
			if (k == 'd' || k == 'w' || k == 's') {
				r->p++;
				if (!cls_shorthand(r, c, k))
					return false;
				continue;
			}
			if (k == 'D' || k == 'W' || k == 'S') {
				rerr(r, r->p - 1, "\\%c inside a character class is not supported", k);
				return false;
			}
			if (k == 'b') { /* [\b] is a backspace */
				r->p++;
				lo = 8;
			} else if ((lo = escape_cp(r)) < 0) {
				return false;
			}
		} else {
			lo = (long)next_cp(r);
		}
		hi = lo;
		if (r->p + 1 < r->end && *r->p == '-' && r->p[1] != ']') {
			r->p++;
			if (*r->p == '\\') {
				r->p++;
				if ((hi = escape_cp(r)) < 0)
					return false;
			} else {
				hi = (long)next_cp(r);
			}
			if (hi < lo) {
				rerr(r, start, "class range out of order");
				return false;
			}
		}
		if (!cls_add(r, c, (uint32_t)lo, (uint32_t)hi))
			return false;
	}
	if (r->p >= r->end) {
		rerr(r, start, "unterminated character class");
		return false;
	}
	r->p++;
	return true;
}

/* One code point as it is written inside a JSON string, as a GBNF unit. */
static void json_cp(struct gram_buf *o, uint32_t c)
{
	char tmp[8];
	const char *esc = NULL;
	switch (c) {
	case '"': esc = "\\\""; break;
	case '\\': esc = "\\\\"; break;
	case '\n': esc = "\\n"; break;
	case '\t': esc = "\\t"; break;
	case '\r': esc = "\\r"; break;
	case '\b': esc = "\\b"; break;
	case '\f': esc = "\\f"; break;
	default: break;
	}
	if (esc) {
		gram_buf_literal(o, esc, strlen(esc));
	} else if (c < 0x20) {
		snprintf(tmp, sizeof(tmp), "\\u%04x", c);
		gram_buf_literal(o, tmp, 6);
	} else {
		gram_buf_puts(o, "\"");
		gram_buf_cp(o, c);
		gram_buf_puts(o, "\"");
	}
}

static bool json_special(uint32_t c)
{
	return c < 0x20 || c == '"' || c == '\\';
}

static int rng_cmp(const void *a, const void *b)
{
	const uint32_t *x = a, *y = b;
	return x[0] < y[0] ? -1 : x[0] > y[0];
}

/* c as a GBNF unit: a class as such; inside a JSON string, its ordinary
 * characters as a class and its special ones (quote, backslash,
 * controls) as their escapes. */
static void emit_class(struct rx *r, struct gram_buf *o, const struct cls *c)
{
	if (!r->json) {
		gram_buf_puts(o, c->neg ? "[^" : "[");
		for (int i = 0; i < c->n; i++) {
			gram_buf_cp(o, c->lo[i]);
			if (c->hi[i] != c->lo[i]) {
				gram_buf_puts(o, "-");
				gram_buf_cp(o, c->hi[i]);
			}
		}
		gram_buf_puts(o, "]");
		return;
	}
	/* the set as sorted disjoint ranges, complemented when negated */
	uint32_t (*rg)[2] = fx_calloc((size_t)c->n + 2, sizeof(*rg));
	int n = 0;
	if (!rg) {
		o->oom = true;
		return;
	}
	for (int i = 0; i < c->n; i++) {
		rg[n][0] = c->lo[i];
		rg[n++][1] = c->hi[i];
	}
	qsort(rg, (size_t)n, sizeof(*rg), rng_cmp);
	int m = 0;
	for (int i = 0; i < n; i++)
		if (m && rg[i][0] <= rg[m - 1][1] + 1) {
			if (rg[i][1] > rg[m - 1][1])
				rg[m - 1][1] = rg[i][1];
		} else {
			rg[m][0] = rg[i][0];
			rg[m++][1] = rg[i][1];
		}
	if (c->neg) {
		uint32_t next = 0;
		int k = 0;
		for (int i = 0; i < m; i++) {
			uint32_t lo = rg[i][0], hi = rg[i][1];
			if (lo > next) {
				rg[k][0] = next;
				rg[k++][1] = lo - 1;
			}
			next = hi + 1;
		}
		if (next <= 0x10ffff) {
			rg[k][0] = next;
			rg[k++][1] = 0x10ffff;
		}
		m = k;
	}
	bool any = false, plain = false;
	gram_buf_puts(o, "(");
	for (int i = 0; i < m; i++) /* the ordinary characters, one class */
		for (uint32_t lo = rg[i][0]; lo <= rg[i][1];) {
			if (json_special(lo)) {
				lo++;
				continue;
			}
			uint32_t hi = lo;
			while (hi < rg[i][1] && !json_special(hi + 1))
				hi++;
			if (!plain)
				gram_buf_puts(o, "[");
			plain = true;
			gram_buf_cp(o, lo);
			if (hi != lo) {
				gram_buf_puts(o, "-");
				gram_buf_cp(o, hi);
			}
			if (hi == rg[i][1])
				break;
			lo = hi + 1;
		}
	if (plain)
		gram_buf_puts(o, "]");
	any = plain;
	for (int i = 0; i < m; i++) /* the special ones, escaped */
		for (uint32_t ch = rg[i][0]; ch <= rg[i][1] && ch < 0x80; ch++)
			if (json_special(ch)) {
				gram_buf_puts(o, any ? " | " : "");
				json_cp(o, ch);
				any = true;
			}
	gram_buf_puts(o, ")");
	fx_free(rg);
	if (!any)
		rerr(r, r->p, "character class matches nothing");
}

static void parse_alt(struct rx *r, struct gram_buf *o);

/* A quantifier at r->p, if any, appended to o. */
static void quantifier(struct rx *r, struct gram_buf *o, bool have_atom)
{
	const char *at = r->p;
	if (r->p >= r->end)
		return;
	char c = *r->p;
	if (c == '*' || c == '+' || c == '?') {
		if (!have_atom) {
			rerr(r, at, "'%c' has nothing to repeat", c);
			return;
		}
		gram_buf_add(o, &c, 1);
		r->p++;
	} else if (c == '{') {
		const char *p = r->p + 1;
		long m = 0, n = -1;
		bool digits = false, comma = false;
		while (p < r->end && *p >= '0' && *p <= '9' && m <= 10000)
			m = m * 10 + (*p++ - '0'), digits = true;
		if (p < r->end && *p == ',') {
			comma = true;
			p++;
			if (p < r->end && *p >= '0' && *p <= '9') {
				n = 0;
				while (p < r->end && *p >= '0' && *p <= '9' && n <= 10000)
					n = n * 10 + (*p++ - '0');
			}
		} else {
			n = m;
		}
		if (!digits || p >= r->end || *p != '}')
			return; /* not a quantifier: a literal '{' (ECMAScript Annex B) */
		if (!have_atom) {
			rerr(r, at, "'{' quantifier has nothing to repeat");
			return;
		}
		if (m > 10000 || n > 10000 || (n >= 0 && n < m)) {
			rerr(r, at, "bad repetition bounds");
			return;
		}
		if (comma && n < 0)
			gram_buf_printf(o, "{%ld,}", m);
		else
			gram_buf_printf(o, "{%ld,%ld}", m, n);
		r->p = p + 1;
	} else {
		return;
	}
	if (r->p < r->end && (*r->p == '?' || *r->p == '+'))
		r->p++; /* lazy or possessive: the same set of strings */
	if (r->p < r->end && (*r->p == '*' || *r->p == '+' || *r->p == '?' || *r->p == '{'))
		rerr(r, r->p, "a quantifier after a quantifier");
}

/* Atoms and their quantifiers until '|', ')' or the end. */
static void parse_seq(struct rx *r, struct gram_buf *o)
{
	bool empty = true;
	while (r->p < r->end && !r->rc && *r->p != '|' && *r->p != ')') {
		const char *at = r->p;
		char c = *r->p;
		gram_buf_puts(o, empty ? "" : " ");
		empty = false;
		if (c == '(') {
			r->p++;
			if (r->p < r->end && *r->p == '?') {
				if (r->p + 1 < r->end && r->p[1] == ':') {
					r->p += 2;
				} else if (r->p + 1 < r->end && r->p[1] == '<' && r->p + 2 < r->end &&
					   r->p[2] != '=' && r->p[2] != '!') {
					while (r->p < r->end && *r->p != '>') /* (?<name>...) */
						r->p++;
					r->p++;
				} else {
					rerr(r, at, "lookaround and other (?...) groups are not supported");
					return;
				}
			}
			if (++r->depth > RX_MAX_NEST) {
				rerr(r, at, "groups nested deeper than %d", RX_MAX_NEST);
				return;
			}
			parse_alt(r, o);
			r->depth--;
			if (r->p >= r->end || *r->p != ')') {
				rerr(r, at, "unclosed group");
				return;
			}
			r->p++;
		} else if (c == '[') {
			struct cls *cl = fx_calloc(1, sizeof(*cl));
			if (!cl) {
				o->oom = true;
				return;
			}
			r->p++;
			if (parse_class(r, cl))
				emit_class(r, o, cl);
			fx_free(cl);
		} else if (c == '.') {
			r->p++;
			if (r->json)
				gram_buf_puts(o, r->char_rule);
			else
				gram_buf_puts(o, "[^\\n\\r\\u2028\\u2029]");
		} else if (c == '^' || c == '$') {
			rerr(r, at, "'%c' is supported only at the start / end of the pattern", c);
			return;
		} else if (c == '*' || c == '+' || c == '?') {
			rerr(r, at, "'%c' has nothing to repeat", c);
			return;
		} else if (c == '\\') {
			r->p++;
			if (r->p >= r->end) {
				rerr(r, at, "a trailing backslash");
				return;
			}
			char k = *r->p;
			if (k == 'd' || k == 'w' || k == 's' || k == 'D' || k == 'W' || k == 'S') {
				struct cls *cl = fx_calloc(1, sizeof(*cl));
				if (!cl) {
					o->oom = true;
					return;
				}
				r->p++;
				cl->neg = k < 'a';
				if (cls_shorthand(r, cl, (char)(k | 0x20)))
					emit_class(r, o, cl);
				fx_free(cl);
			} else {
				long cp = escape_cp(r);
				if (cp < 0)
					return;
				if (r->json) {
					json_cp(o, (uint32_t)cp);
				} else {
					gram_buf_puts(o, "\"");
					gram_buf_cp(o, (uint32_t)cp);
					gram_buf_puts(o, "\"");
				}
			}
		} else {
			uint32_t cp = next_cp(r);
			if (r->json) {
				json_cp(o, cp);
			} else {
				gram_buf_puts(o, "\"");
				gram_buf_cp(o, cp);
				gram_buf_puts(o, "\"");
			}
		}
		quantifier(r, o, true);
	}
	if (empty)
		gram_buf_puts(o, "\"\"");
}

static void parse_alt(struct rx *r, struct gram_buf *o)
{
	gram_buf_puts(o, "(");
	parse_seq(r, o);
	while (!r->rc && r->p < r->end && *r->p == '|') {
		r->p++;
		gram_buf_puts(o, " | ");
		parse_seq(r, o);
	}
	gram_buf_puts(o, ")");
}

int gram_regex_expr(const char *re, bool json_string, bool anchored, const char *char_rule,
		    struct gram_buf *out, struct fx_err *err)
{
	struct rx r = { .s = re, .p = re, .end = re + strlen(re), .json = json_string,
			.char_rule = char_rule, .err = err };
	long bad = utf8_invalid_at(re);
	if (bad >= 0)
		return fx_fail(err, FX_E_INVALID, "regex: invalid UTF-8 at byte %ld", bad);
	bool head = anchored, tail = anchored;
	if (r.p < r.end && *r.p == '^') {
		r.p++;
		head = true;
	}
	/* a final unescaped $ */
	if (r.end > r.p && r.end[-1] == '$') {
		int bs = 0;
		for (const char *q = r.end - 2; q >= r.p && *q == '\\'; q--)
			bs++;
		if (bs % 2 == 0) {
			r.end--;
			tail = true;
		}
	}
	gram_buf_puts(out, "(");
	if (!head)
		gram_buf_printf(out, "%s* ", char_rule);
	parse_alt(&r, out);
	if (!r.rc && r.p < r.end)
		rerr(&r, r.p, "unmatched ')'");
	if (!tail)
		gram_buf_printf(out, " %s*", char_rule);
	gram_buf_puts(out, ")");
	if (r.rc)
		return r.rc;
	if (out->oom)
		return fx_fail(err, FX_E_NOMEM, "regex: out of memory");
	return FX_OK;
}

int fx_regex_to_gbnf(const char *regex, const char *root_name, char **gbnf, struct fx_err *err)
{
	struct gram_buf b = { 0 };
	const char *root = root_name ? root_name : "root";
	int rc;
	if (!gbnf)
		return fx_fail(err, FX_E_INVALID, "regex: gbnf is NULL");
	*gbnf = NULL;
	if (!regex)
		return fx_fail(err, FX_E_INVALID, "regex: no pattern");
	gram_buf_printf(&b, "%s ::= ", root);
	/* fullmatch: anchored whatever the pattern says */
	if ((rc = gram_regex_expr(regex, false, true, "", &b, err))) {
		gram_buf_free(&b);
		return rc;
	}
	gram_buf_puts(&b, "\n");
	if (b.oom) {
		gram_buf_free(&b);
		return fx_fail(err, FX_E_NOMEM, "regex: out of memory");
	}
	struct fx_grammar *g = NULL; /* what we made must run: checked here */
	struct fx_err e2 = { 0 };
	rc = fx_grammar_parse(b.p, b.n, root, &g, &e2);
	fx_grammar_free(g);
	if (rc) {
		gram_buf_free(&b);
		return fx_fail(err, rc, "regex: %s", e2.msg);
	}
	*gbnf = b.p;
	return FX_OK;
}
