/* Regular expressions to GBNF (fx_regex_to_gbnf, and JSON Schema's
 * "pattern" through conv_regex). Recursive descent over Python re's
 * syntax, restricted to what a context-free grammar expresses exactly:
 * literals, ., classes [...] with ranges and negation, \d \w \s (ASCII,
 * as re.ASCII) and their negations, groups ( ) (?: ) (?P<n> ) (?<n> ),
 * |, * + ? {m} {m,} {m,n} {,n} (lazy forms: same language), anchors ^ $
 * at a branch's ends. Backreferences, lookaround, word boundaries,
 * inline flags and possessive quantifiers are errors naming the position.
 * Code points, not bytes: the output's classes are UTF-8 through the
 * GBNF parser. */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/status.h"
#include "grammar/convert.h"

void conv_sb_put(struct conv_sb *b, const char *s, size_t n)
{
	if (b->failed)
		return;
	if (b->n + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 256;
		while (cap < b->n + n + 1)
			cap *= 2;
		char *p = realloc(b->p, cap); /* plain heap: fx_string_free releases it */
		if (!p) {
			b->failed = true;
			return;
		}
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->n, s, n);
	b->n += n;
	b->p[b->n] = 0;
}

void conv_sb_puts(struct conv_sb *b, const char *s)
{
	conv_sb_put(b, s, strlen(s));
}

void conv_sb_printf(struct conv_sb *b, const char *fmt, ...)
{
	char buf[512];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof buf) {
		b->failed = true;
		return;
	}
	conv_sb_put(b, buf, (size_t)n);
}

void conv_sb_lit(struct conv_sb *b, const char *s, size_t n)
{
	conv_sb_put(b, "\"", 1);
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c == '"' || c == '\\')
			conv_sb_printf(b, "\\%c", c);
		else if (c < 0x20 || c == 0x7f)
			conv_sb_printf(b, "\\x%02X", c);
		else
			conv_sb_put(b, (const char *)&c, 1);
	}
	conv_sb_put(b, "\"", 1);
}

/* ---- code point sets -------------------------------------------------- */

#define CP_MAX 0x10FFFFu
#define SET_CAP 128

struct cpset {
	uint32_t lo[SET_CAP], hi[SET_CAP];
	int n;
	bool over; /* more ranges than SET_CAP */
};

static void set_add(struct cpset *s, uint32_t lo, uint32_t hi)
{
	if (s->n == SET_CAP) {
		s->over = true;
		return;
	}
	s->lo[s->n] = lo;
	s->hi[s->n++] = hi;
}

/* Sort and merge overlapping or adjacent ranges. */
static void set_norm(struct cpset *s)
{
	for (int i = 1; i < s->n; i++)
		for (int j = i; j > 0 && s->lo[j - 1] > s->lo[j]; j--) {
			uint32_t a = s->lo[j], b = s->hi[j];
			s->lo[j] = s->lo[j - 1];
			s->hi[j] = s->hi[j - 1];
			s->lo[j - 1] = a;
			s->hi[j - 1] = b;
		}
	int k = 0;
	for (int i = 0; i < s->n; i++) {
		if (k && s->lo[i] <= s->hi[k - 1] + 1) {
			if (s->hi[i] > s->hi[k - 1])
				s->hi[k - 1] = s->hi[i];
		} else {
			s->lo[k] = s->lo[i];
			s->hi[k++] = s->hi[i];
		}
	}
	s->n = k;
}

static void set_negate(struct cpset *s)
{
	struct cpset t = { .n = 0 };
	uint32_t next = 0;
	set_norm(s);
	for (int i = 0; i < s->n; i++) {
		if (s->lo[i] > next)
			set_add(&t, next, s->lo[i] - 1);
		next = s->hi[i] + 1;
	}
	if (next <= CP_MAX)
		set_add(&t, next, CP_MAX);
	t.over |= s->over;
	*s = t;
}

/* s minus [lo, hi]. */
static void set_remove(struct cpset *s, uint32_t lo, uint32_t hi)
{
	struct cpset t = { .n = 0 };
	for (int i = 0; i < s->n; i++) {
		if (s->hi[i] < lo || s->lo[i] > hi) {
			set_add(&t, s->lo[i], s->hi[i]);
			continue;
		}
		if (s->lo[i] < lo)
			set_add(&t, s->lo[i], lo - 1);
		if (s->hi[i] > hi)
			set_add(&t, hi + 1, s->hi[i]);
	}
	t.over |= s->over;
	*s = t;
}

static bool set_has(const struct cpset *s, uint32_t c)
{
	for (int i = 0; i < s->n; i++)
		if (c >= s->lo[i] && c <= s->hi[i])
			return true;
	return false;
}

static void put_utf8(struct conv_sb *b, uint32_t c)
{
	char u[4];
	int n;
	if (c < 0x80) {
		u[0] = (char)c;
		n = 1;
	} else if (c < 0x800) {
		u[0] = (char)(0xc0 | (c >> 6));
		u[1] = (char)(0x80 | (c & 0x3f));
		n = 2;
	} else if (c < 0x10000) {
		u[0] = (char)(0xe0 | (c >> 12));
		u[1] = (char)(0x80 | ((c >> 6) & 0x3f));
		u[2] = (char)(0x80 | (c & 0x3f));
		n = 3;
	} else {
		u[0] = (char)(0xf0 | (c >> 18));
		u[1] = (char)(0x80 | ((c >> 12) & 0x3f));
		u[2] = (char)(0x80 | ((c >> 6) & 0x3f));
		u[3] = (char)(0x80 | (c & 0x3f));
		n = 4;
	}
	conv_sb_put(b, u, (size_t)n);
}

static void class_char(struct conv_sb *b, uint32_t c)
{
	if (c < 0x20 || c == 0x7f || c == ']' || c == '[' || c == '\\' || c == '^' || c == '-')
		conv_sb_printf(b, "\\x%02X", c);
	else
		put_utf8(b, c);
}

/* The set as one GBNF class (surrogates left out: they are no characters
 * in UTF-8). The set must not be empty. */
static void emit_class(struct conv_sb *b, struct cpset s)
{
	set_remove(&s, 0xD800, 0xDFFF);
	conv_sb_put(b, "[", 1);
	for (int i = 0; i < s.n; i++) {
		class_char(b, s.lo[i]);
		if (s.hi[i] != s.lo[i]) {
			if (s.hi[i] > s.lo[i] + 1)
				conv_sb_put(b, "-", 1);
			class_char(b, s.hi[i]);
		}
	}
	conv_sb_put(b, "]", 1);
}

/* The set as JSON string content: its raw characters (all but ", \ and
 * controls) as a class, and those three kinds as their escapes (the short
 * form where JSON has one, else \u00XX in either case; "/" also as \/). */
static void emit_json_class(struct conv_sb *b, const struct cpset *in)
{
	static const char shorts[] = "\b\f\n\r\t";
	static const char short_name[] = "bfnrt";
	struct cpset raw = *in;
	bool first = true;
	set_remove(&raw, 0, 0x1f);
	set_remove(&raw, '"', '"');
	set_remove(&raw, '\\', '\\');
	set_remove(&raw, 0xD800, 0xDFFF);
	conv_sb_put(b, "(", 1);
	if (raw.n) {
		emit_class(b, raw);
		first = false;
	}
	for (uint32_t c = 0; c < 0x80; c++) {
		if (!set_has(in, c) || !(c < 0x20 || c == '"' || c == '\\' || c == '/'))
			continue;
		conv_sb_puts(b, first ? "" : " | ");
		first = false;
		const char *sh = c ? strchr(shorts, (int)c) : NULL;
		if (c == '"')
			conv_sb_puts(b, "\"\\\\\\\"\"");
		else if (c == '\\')
			conv_sb_puts(b, "\"\\\\\\\\\"");
		else if (c == '/')
			conv_sb_puts(b, "\"\\\\/\"");
		else if (sh)
			conv_sb_printf(b, "\"\\\\%c\"", short_name[sh - shorts]);
		else if ((c & 15) < 10)
			conv_sb_printf(b, "\"\\\\u00%u%u\"", c >> 4, c & 15);
		else
			conv_sb_printf(b, "\"\\\\u00%u\" [%c%c]", c >> 4, 'a' + (c & 15) - 10, 'A' + (c & 15) - 10);
	}
	conv_sb_put(b, ")", 1);
}

/* ---- the parser ------------------------------------------------------- */

struct rx {
	const char *s; /* the regex, UTF-8 */
	size_t i;      /* byte position */
	bool json, search;
	const char *any;
	const char *what;
	struct fx_err *err;
	int depth;
};

static int rx_fail(struct rx *r, const char *msg)
{
	return fx_fail(r->err, FX_E_INVALID, "%s: position %zu: %s", r->what, r->i, msg);
}

/* The code point at r->i (UTF-8; a bad byte stands for itself), advancing. */
static uint32_t rx_cp(struct rx *r)
{
	const unsigned char *p = (const unsigned char *)r->s + r->i;
	uint32_t c = p[0];
	int n = c < 0x80 ? 1 : c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 1;
	if (n > 1) {
		c &= 0x3fu >> (n - 1);
		for (int k = 1; k < n; k++) {
			if ((p[k] & 0xc0) != 0x80) {
				r->i++;
				return p[0];
			}
			c = (c << 6) | (p[k] & 0x3f);
		}
	}
	r->i += (size_t)n;
	return c;
}

static int hexval(char h)
{
	return h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10 :
	       h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
}

static void add_named(struct cpset *s, char k)
{
	struct cpset t = { .n = 0 };
	char lower = (char)(k | 0x20);
	if (lower == 'd')
		set_add(&t, '0', '9');
	else if (lower == 'w') {
		set_add(&t, '0', '9');
		set_add(&t, 'A', 'Z');
		set_add(&t, '_', '_');
		set_add(&t, 'a', 'z');
	} else {
		set_add(&t, '\t', '\r');
		set_add(&t, ' ', ' ');
	}
	if (k != lower)
		set_negate(&t);
	for (int i = 0; i < t.n; i++)
		set_add(s, t.lo[i], t.hi[i]);
}

/* After a backslash: a class escape (\d ... into set, returns 1), a single
 * code point (*cp, returns 0) or an error (< 0). in_class: \b is a
 * backspace there. */
static int rx_escape(struct rx *r, bool in_class, struct cpset *set, uint32_t *cp)
{
	char c = r->s[r->i];
	if (!c)
		return rx_fail(r, "a trailing backslash");
	if (strchr("dDwWsS", c)) {
		r->i++;
		add_named(set, c);
		return 1;
	}
	if (c >= '1' && c <= '9')
		return rx_fail(r, "backreferences are not supported");
	if (c == 'b' && in_class) {
		r->i++;
		*cp = '\b';
		return 0;
	}
	if (strchr("bBAZzGkgNpP", c))
		return rx_fail(r, "this escape (word boundary, anchor, backreference, named or property class) is not supported");
	const char *simple = "n\nt\tr\rf\fv\va\a0";
	const char *p = strchr(simple, c);
	if (p && (p - simple) % 2 == 0) {
		r->i++;
		*cp = c == '0' ? 0 : (uint32_t)(unsigned char)p[1];
		if (c == '0' && r->s[r->i] >= '0' && r->s[r->i] <= '7')
			return rx_fail(r, "octal escapes are not supported");
		return 0;
	}
	if (c == 'x' || c == 'u' || c == 'U') {
		int nd = c == 'x' ? 2 : c == 'u' ? 4 : 8;
		uint32_t v = 0;
		r->i++;
		for (int k = 0; k < nd; k++) {
			int h = hexval(r->s[r->i]);
			if (h < 0)
				return rx_fail(r, "expected hex digits in the escape");
			v = v * 16 + (uint32_t)h;
			r->i++;
		}
		if (v > CP_MAX)
			return rx_fail(r, "code point out of range");
		*cp = v;
		return 0;
	}
	if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))
		return rx_fail(r, "unknown escape");
	*cp = rx_cp(r);
	return 0;
}

static int rx_class(struct rx *r, struct cpset *s)
{
	bool neg = false;
	r->i++; /* [ */
	if (r->s[r->i] == '^') {
		neg = true;
		r->i++;
	}
	for (bool first = true;; first = false) {
		uint32_t lo, hi;
		int k;
		char c = r->s[r->i];
		if (!c)
			return rx_fail(r, "unterminated character class");
		if (c == ']' && !first) {
			r->i++;
			break;
		}
		if (c == '\\') {
			r->i++;
			if ((k = rx_escape(r, true, s, &lo)) < 0)
				return k;
			if (k == 1)
				continue;
		} else {
			lo = rx_cp(r);
		}
		hi = lo;
		if (r->s[r->i] == '-' && r->s[r->i + 1] && r->s[r->i + 1] != ']') {
			r->i++;
			if (r->s[r->i] == '\\') {
				struct cpset tmp = { .n = 0 };
				r->i++;
				if ((k = rx_escape(r, true, &tmp, &hi)) < 0)
					return k;
				if (k == 1)
					return rx_fail(r, "a class escape cannot end a range");
			} else {
				hi = rx_cp(r);
			}
			if (hi < lo)
				return rx_fail(r, "bad character range");
		}
		set_add(s, lo, hi);
	}
	if (neg)
		set_negate(s);
	set_norm(s);
	if (s->over)
		return rx_fail(r, "character class too complex");
	return 0;
}

static void emit_set(struct rx *r, struct conv_sb *out, struct cpset *s)
{
	if (r->json)
		emit_json_class(out, s);
	else
		emit_class(out, *s);
}

static int rx_alt(struct rx *r, struct conv_sb *out, bool top);

/* One atom into out (a single GBNF term); 1 when there was none (| ) or end). */
static int rx_atom(struct rx *r, struct conv_sb *out)
{
	struct cpset s = { .n = 0 };
	uint32_t cp;
	int rc;
	char c = r->s[r->i];
	if (!c || c == '|' || c == ')')
		return 1;
	if (strchr("*+?", c))
		return rx_fail(r, "a quantifier follows nothing");
	if (c == '^' || c == '$')
		return rx_fail(r, "anchors are supported only at the ends of the pattern");
	if (c == '(') {
		r->i++;
		if (r->s[r->i] == '?') {
			const char *q = r->s + r->i + 1;
			if (*q == ':') {
				r->i += 2;
			} else if ((*q == 'P' && q[1] == '<') || (*q == '<' && q[1] != '=' && q[1] != '!')) {
				const char *e = strchr(q, '>');
				if (!e)
					return rx_fail(r, "unterminated group name");
				r->i = (size_t)(e + 1 - r->s);
			} else if (*q == '=' || *q == '!' || *q == '<') {
				return rx_fail(r, "lookaround is not supported");
			} else if (*q == 'P' && q[1] == '=') {
				return rx_fail(r, "backreferences are not supported");
			} else {
				return rx_fail(r, "this group kind (inline flags, comments, conditionals) is not supported");
			}
		}
		if (++r->depth > 200)
			return rx_fail(r, "groups nested too deep");
		conv_sb_puts(out, "(");
		if ((rc = rx_alt(r, out, false)))
			return rc;
		r->depth--;
		if (r->s[r->i] != ')')
			return rx_fail(r, "missing )");
		r->i++;
		conv_sb_puts(out, ")");
		return 0;
	}
	if (c == '[') {
		if ((rc = rx_class(r, &s)))
			return rc;
		if (!s.n)
			return rx_fail(r, "the class matches nothing");
		emit_set(r, out, &s);
		return 0;
	}
	if (c == '.') {
		r->i++;
		set_add(&s, '\n', '\n');
		set_negate(&s);
		emit_set(r, out, &s);
		return 0;
	}
	if (c == '\\') {
		r->i++;
		if ((rc = rx_escape(r, false, &s, &cp)) < 0)
			return rc;
		if (rc == 0)
			set_add(&s, cp, cp);
		set_norm(&s);
		emit_set(r, out, &s);
		return 0;
	}
	cp = rx_cp(r);
	set_add(&s, cp, cp);
	emit_set(r, out, &s);
	return 0;
}

/* A quantifier at r->i into out ("" when none); errors as rx_fail. */
static int rx_quant(struct rx *r, struct conv_sb *out)
{
	char c = r->s[r->i];
	if (c == '*' || c == '+' || c == '?') {
		r->i++;
		conv_sb_put(out, &c, 1);
	} else if (c == '{') {
		const char *p = r->s + r->i + 1;
		char *e;
		long lo = 0, hi = -1;
		if (*p >= '0' && *p <= '9') {
			lo = strtol(p, &e, 10);
			p = e;
		} else if (*p != ',') {
			conv_sb_puts(out, ""); /* "{" not a quantifier: Python reads it literally */
			return 2;
		}
		if (*p == ',') {
			p++;
			if (*p >= '0' && *p <= '9') {
				hi = strtol(p, &e, 10);
				p = e;
			}
		} else {
			hi = lo;
		}
		if (*p != '}')
			return 2;
		if (lo > 10000 || hi > 10000)
			return rx_fail(r, "repetition bound over 10000");
		if (hi >= 0 && hi < lo)
			return rx_fail(r, "repetition with max below min");
		r->i = (size_t)(p + 1 - r->s);
		if (hi < 0)
			conv_sb_printf(out, "{%ld,}", lo);
		else
			conv_sb_printf(out, "{%ld,%ld}", lo, hi);
	} else {
		return 2;
	}
	if (r->s[r->i] == '?')
		r->i++; /* lazy: the same language */
	if (r->s[r->i] == '+')
		return rx_fail(r, "possessive quantifiers are not supported");
	if (r->s[r->i] && strchr("*+?{", r->s[r->i])) {
		struct conv_sb tmp = { 0 };
		int rc = rx_quant(r, &tmp);
		free(tmp.p);
		if (rc != 2)
			return rc < 0 ? rc : rx_fail(r, "multiple repeat");
	}
	return 0;
}

static int rx_seq(struct rx *r, struct conv_sb *out, bool top)
{
	bool start = false, end = false, any = false;
	int rc;
	if (top && r->s[r->i] == '^') {
		r->i++;
		start = true;
	}
	if (top && r->search && !start) {
		conv_sb_printf(out, "%s* ", r->any);
		any = true;
	}
	for (;;) {
		char c = r->s[r->i];
		if (top && c == '$' && (!r->s[r->i + 1] || r->s[r->i + 1] == '|')) {
			r->i++;
			end = true;
			break;
		}
		if (c == '{') {
			size_t save = r->i;
			struct conv_sb tmp = { 0 };
			rc = rx_quant(r, &tmp);
			free(tmp.p);
			if (rc == 0)
				return r->i = save, rx_fail(r, "a quantifier follows nothing");
			if (rc < 0)
				return rc;
			r->i = save + 1;
			conv_sb_puts(out, "\"{\" ");
			any = true;
			continue;
		}
		rc = rx_atom(r, out);
		if (rc == 1)
			break;
		if (rc)
			return rc;
		rc = rx_quant(r, out);
		if (rc < 0)
			return rc;
		conv_sb_puts(out, " ");
		any = true;
	}
	if (top && r->search && !end) {
		conv_sb_printf(out, "%s* ", r->any);
		any = true;
	}
	if (!any)
		conv_sb_puts(out, "\"\" ");
	return 0;
}

static int rx_alt(struct rx *r, struct conv_sb *out, bool top)
{
	int rc;
	for (;;) {
		if ((rc = rx_seq(r, out, top)))
			return rc;
		if (r->s[r->i] != '|')
			return 0;
		r->i++;
		conv_sb_puts(out, "| ");
	}
}

int conv_regex(const char *regex, bool json, bool search, const char *any_char,
	       struct conv_sb *out, const char *what, struct fx_err *err)
{
	struct rx r = { .s = regex, .json = json, .search = search, .any = any_char, .what = what,
			.err = err };
	int rc;
	conv_sb_puts(out, "(");
	if ((rc = rx_alt(&r, out, true)))
		return rc;
	if (regex[r.i] == ')')
		return rx_fail(&r, "unbalanced )");
	conv_sb_puts(out, ")");
	return out->failed ? fx_fail(err, FX_E_NOMEM, "%s: out of memory", what) : FX_OK;
}

int fx_regex_to_gbnf(const char *regex, const char *root_name, char **gbnf, struct fx_err *err)
{
	struct conv_sb b = { 0 };
	int rc;
	*gbnf = NULL;
	if (!regex)
		return fx_fail(err, FX_E_INVALID, "regex: no pattern given");
	conv_sb_printf(&b, "%s ::= ", root_name ? root_name : "root");
	if ((rc = conv_regex(regex, false, false, NULL, &b, "regex", err))) {
		free(b.p);
		return rc;
	}
	conv_sb_puts(&b, "\n");
	if (b.failed) {
		free(b.p);
		return fx_fail(err, FX_E_NOMEM, "regex: out of memory");
	}
	/* the output must compile: GBNF refuses a repetition of something that
	 * can be empty, such as (|ab)* (found by fuzz_regex) */
	struct fx_grammar *g = NULL;
	struct fx_err e2 = { 0 };
	if ((rc = fx_grammar_parse(b.p, b.n, root_name ? root_name : "root", &g, &e2))) {
		free(b.p);
		return fx_fail(err, rc == FX_E_NOMEM ? rc : FX_E_INVALID,
			       "regex: a repetition of something that can match nothing, such as (|ab)*, "
			       "is not supported: %s", e2.msg);
	}
	fx_grammar_free(g);
	*gbnf = b.p;
	return FX_OK;
}
