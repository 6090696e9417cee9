/* GBNF text -> struct fx_grammar (see grammar.h), following the syntax of
 * llama.cpp's grammar-parser (grammars/README.md there): rules
 * `name ::= alternates`, one per line (newlines are free inside parentheses
 * and after `|`), literals, character classes, `.`, groups, postfix
 * `* + ? {m} {m,} {m,n}`, `#` comments.
 *
 * Compilation differs by design: terminals are byte sets, so a class over
 * code points becomes a helper rule of UTF-8 byte-sequence alternatives
 * (the range splitting of RE2 / Rust's regex-syntax utf8 module), and
 * repetitions become right-recursive helper rules (x* is R ::= x R | ),
 * which the matcher runs in bounded stack depth by not pushing a return
 * to the end of an alternative. Left recursion is refused: the matcher
 * expands rules top-down and could not terminate on it.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/status.h"
#include "grammar/grammar.h"

#define GBNF_MAX_REPEAT 10000
#define GBNF_MAX_NEST 256

/* ---- growable vectors ---- */

struct evec {
	struct gram_elem *p;
	int32_t n, cap;
};

struct brule {
	const char *name; /* into the source, or a generated name's owner */
	int32_t name_len;
	int32_t origin;   /* rule the user wrote that this one was generated for */
	bool defined;
	int32_t def_line; /* where it was defined, or first referenced */
	struct evec body; /* alternatives separated by GRAM_END; a final GRAM_END */
};

struct pstate {
	const char *src, *end;
	struct brule *rules;
	int32_t n_rules, cap_rules;
	struct gram_set *sets;
	int32_t n_sets, cap_sets;
	int depth;
	int rc;
	struct fx_err *err;
};

static int oom(struct pstate *ps)
{
	ps->rc = fx_fail(ps->err, FX_E_NOMEM, "grammar: out of memory");
	return ps->rc;
}

static bool evec_push(struct pstate *ps, struct evec *v, uint8_t kind, int32_t arg)
{
	if (v->n == v->cap) {
		int32_t cap = v->cap ? v->cap * 2 : 8;
		struct gram_elem *p = fx_realloc_array(v->p, (size_t)cap, sizeof(*p));
		if (!p) {
			oom(ps);
			return false;
		}
		v->p = p;
		v->cap = cap;
	}
	v->p[v->n++] = (struct gram_elem){ .kind = kind, .arg = arg };
	return true;
}

static void line_col(const struct pstate *ps, const char *at, int *line, int *col)
{
	*line = 1;
	*col = 1;
	for (const char *p = ps->src; p < at && p < ps->end; p++) {
		if (*p == '\n') {
			++*line;
			*col = 1;
		} else if (((unsigned char)*p & 0xc0) != 0x80) {
			++*col;
		}
	}
}

/* Error at `at`: "grammar: line L, column C: <what>". */
__attribute__((format(printf, 3, 4))) static int perr(struct pstate *ps, const char *at,
						      const char *fmt, ...)
{
	char what[384];
	va_list ap;
	int line, col;

	if (ps->rc)
		return ps->rc;
	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	line_col(ps, at, &line, &col);
	ps->rc = fx_fail(ps->err, FX_E_INVALID, "grammar: line %d, column %d: %s", line, col, what);
	return ps->rc;
}

/* ---- rules and sets ---- */

static int32_t rule_new(struct pstate *ps, const char *name, int32_t len, int32_t origin, int line)
{
	if (ps->n_rules == ps->cap_rules) {
		int32_t cap = ps->cap_rules ? ps->cap_rules * 2 : 32;
		struct brule *p = fx_realloc_array(ps->rules, (size_t)cap, sizeof(*p));
		if (!p) {
			oom(ps);
			return -1;
		}
		ps->rules = p;
		ps->cap_rules = cap;
	}
	int32_t id = ps->n_rules++;
	ps->rules[id] = (struct brule){ .name = name, .name_len = len,
					.origin = origin < 0 ? id : origin, .def_line = line };
	return id;
}

/* The rule the user named name[0..len), created on first mention. */
static int32_t rule_named(struct pstate *ps, const char *name, int32_t len, int line)
{
	for (int32_t i = 0; i < ps->n_rules; i++)
		if (ps->rules[i].origin == i && ps->rules[i].name_len == len &&
		    !memcmp(ps->rules[i].name, name, (size_t)len))
			return i;
	return rule_new(ps, name, len, -1, line);
}

static int32_t set_add(struct pstate *ps, const struct gram_set *s)
{
	for (int32_t i = 0; i < ps->n_sets; i++)
		if (!memcmp(&ps->sets[i], s, sizeof(*s)))
			return i;
	if (ps->n_sets == ps->cap_sets) {
		int32_t cap = ps->cap_sets ? ps->cap_sets * 2 : 32;
		struct gram_set *p = fx_realloc_array(ps->sets, (size_t)cap, sizeof(*p));
		if (!p) {
			oom(ps);
			return -1;
		}
		ps->sets = p;
		ps->cap_sets = cap;
	}
	ps->sets[ps->n_sets] = *s;
	return ps->n_sets++;
}

static void set_range(struct gram_set *s, unsigned lo, unsigned hi)
{
	for (unsigned b = lo; b <= hi; b++)
		s->w[b >> 6] |= (uint64_t)1 << (b & 63);
}

static bool push_byte_range(struct pstate *ps, struct evec *v, unsigned lo, unsigned hi)
{
	struct gram_set s = { { 0 } };
	set_range(&s, lo, hi);
	int32_t id = set_add(ps, &s);
	return id >= 0 && evec_push(ps, v, GRAM_TERM, id);
}

/* ---- code points ---- */

static int utf8_encode(uint32_t c, unsigned char *o)
{
	if (c < 0x80) {
		o[0] = (unsigned char)c;
		return 1;
	}
	if (c < 0x800) {
		o[0] = (unsigned char)(0xc0 | (c >> 6));
		o[1] = (unsigned char)(0x80 | (c & 0x3f));
		return 2;
	}
	if (c < 0x10000) {
		o[0] = (unsigned char)(0xe0 | (c >> 12));
		o[1] = (unsigned char)(0x80 | ((c >> 6) & 0x3f));
		o[2] = (unsigned char)(0x80 | (c & 0x3f));
		return 3;
	}
	o[0] = (unsigned char)(0xf0 | (c >> 18));
	o[1] = (unsigned char)(0x80 | ((c >> 12) & 0x3f));
	o[2] = (unsigned char)(0x80 | ((c >> 6) & 0x3f));
	o[3] = (unsigned char)(0x80 | (c & 0x3f));
	return 4;
}

/* Decode one UTF-8 code point at *p (lenient: a stray byte is itself). */
static uint32_t utf8_next(const char **p, const char *end)
{
	const unsigned char *s = (const unsigned char *)*p;
	uint32_t c = s[0];
	int n = c >= 0xf0 ? 3 : c >= 0xe0 ? 2 : c >= 0xc0 ? 1 : 0;
	if ((const char *)s + 1 + n > end)
		n = 0;
	for (int i = 1; i <= n; i++)
		if ((s[i] & 0xc0) != 0x80)
			n = 0;
	if (n)
		c &= 0x3fu >> n;
	for (int i = 1; i <= n; i++)
		c = (c << 6) | (s[i] & 0x3f);
	*p += 1 + n;
	return c;
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* One character of a literal or class, escapes decoded (llama.cpp's
 * parse_char: \xHH \uHHHH \UHHHHHHHH \t \r \n \\ \" \[ \]). */
static bool parse_char(struct pstate *ps, const char **pp, uint32_t *out)
{
	const char *p = *pp;
	if (*p != '\\') {
		*out = utf8_next(pp, ps->end);
		return true;
	}
	if (p + 1 >= ps->end) {
		perr(ps, p, "unfinished escape at the end of the grammar");
		return false;
	}
	int digits = 0;
	switch (p[1]) {
	case 'x': digits = 2; break;
	case 'u': digits = 4; break;
	case 'U': digits = 8; break;
	case 't': *out = '\t'; break;
	case 'r': *out = '\r'; break;
	case 'n': *out = '\n'; break;
	case '\\': case '"': case '[': case ']': case '-': case '^': *out = (unsigned char)p[1]; break;
	default:
		perr(ps, p, "unknown escape '\\%c'", p[1]);
		return false;
	}
	p += 2;
	if (digits) {
		uint32_t v = 0;
		for (int i = 0; i < digits; i++) {
			int h = p < ps->end ? hexval(*p) : -1;
			if (h < 0) {
				perr(ps, p, "expected %d hex digits in an escape", digits);
				return false;
			}
			v = v * 16 + (uint32_t)h;
			p++;
		}
		if (v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff)) {
			perr(ps, *pp, "escape U+%X is not a Unicode scalar value", v);
			return false;
		}
		*out = v;
	}
	*pp = p;
	return true;
}

/* ---- character classes as UTF-8 byte sequences ---- */

struct crange {
	uint32_t lo, hi;
};

static int crange_cmp(const void *a, const void *b)
{
	const struct crange *x = a, *y = b;
	return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* One alternative of the class rule: bytes lo[i]..hi[i] for i < n. */
static bool emit_seq(struct pstate *ps, struct evec *body, const unsigned char *lo,
		     const unsigned char *hi, int n)
{
	for (int i = 0; i < n; i++)
		if (!push_byte_range(ps, body, lo[i], hi[i]))
			return false;
	return evec_push(ps, body, GRAM_END, 0);
}

/* Code points [lo, hi] (no surrogates) as byte-range sequences, each
 * sequence one alternative of body: split where the encoded length
 * changes, then where a continuation byte's range would not be full. */
static bool utf8_split(struct pstate *ps, struct evec *body, uint32_t lo, uint32_t hi)
{
	static const uint32_t lens[] = { 0x7f, 0x7ff, 0xffff };
	for (int i = 0; i < 3; i++)
		if (lo <= lens[i] && hi > lens[i])
			return utf8_split(ps, body, lo, lens[i]) &&
			       utf8_split(ps, body, lens[i] + 1, hi);
	if (hi < 0x80) {
		unsigned char a = (unsigned char)lo, b = (unsigned char)hi;
		return emit_seq(ps, body, &a, &b, 1);
	}
	for (int i = 1; i < 4; i++) {
		uint32_t m = (1u << (6 * i)) - 1;
		if ((lo & ~m) != (hi & ~m)) {
			if (lo & m)
				return utf8_split(ps, body, lo, lo | m) &&
				       utf8_split(ps, body, (lo | m) + 1, hi);
			if ((hi & m) != m)
				return utf8_split(ps, body, lo, (hi & ~m) - 1) &&
				       utf8_split(ps, body, hi & ~m, hi);
		}
	}
	unsigned char a[4], b[4];
	int n = utf8_encode(lo, a);
	utf8_encode(hi, b);
	return emit_seq(ps, body, a, b, n);
}

/* Append the class of ranges r[0..n) (sorted, merged, no surrogates) to v:
 * one terminal when it is all ASCII, else a reference to a new rule of
 * byte-sequence alternatives (the ASCII part one of them). */
static bool emit_class(struct pstate *ps, struct evec *v, struct crange *r, int n, int32_t origin)
{
	struct gram_set ascii = { { 0 } };
	bool any_ascii = false, multi = false;
	for (int i = 0; i < n; i++) {
		if (r[i].lo < 0x80) {
			set_range(&ascii, r[i].lo, r[i].hi < 0x80 ? r[i].hi : 0x7f);
			any_ascii = true;
		}
		multi |= r[i].hi >= 0x80;
	}
	if (!multi) {
		int32_t id = any_ascii ? set_add(ps, &ascii) : -1;
		if (!any_ascii)
			return perr(ps, ps->src, "empty character class"), false;
		return id >= 0 && evec_push(ps, v, GRAM_TERM, id);
	}
	int32_t rid = rule_new(ps, ps->rules[origin].name, ps->rules[origin].name_len, origin, 0);
	if (rid < 0)
		return false;
	struct evec body = { 0 };
	bool ok = true;
	if (any_ascii) {
		int32_t id = set_add(ps, &ascii);
		ok = id >= 0 && evec_push(ps, &body, GRAM_TERM, id) && evec_push(ps, &body, GRAM_END, 0);
	}
	for (int i = 0; ok && i < n; i++)
		if (r[i].hi >= 0x80)
			ok = utf8_split(ps, &body, r[i].lo < 0x80 ? 0x80 : r[i].lo, r[i].hi);
	ps->rules[rid].body = body;
	ps->rules[rid].defined = true;
	return ok && evec_push(ps, v, GRAM_REF, rid);
}

/* r[0..*n) sorted and merged, complemented when neg, surrogates
 * (D800-DFFF) cut out. r has room for *n + 2 entries (a complement adds
 * at most one range, the surrogate cut one more). */
static void class_normalize(struct crange *r, int *n, bool neg)
{
	struct crange tmp;
	int m = 0;

	qsort(r, (size_t)*n, sizeof(*r), crange_cmp);
	for (int i = 0; i < *n; i++) {
		if (m && r[i].lo <= r[m - 1].hi + 1) {
			if (r[i].hi > r[m - 1].hi)
				r[m - 1].hi = r[i].hi;
		} else {
			r[m++] = r[i];
		}
	}
	if (neg) {
		/* the gaps, written one slot behind: gap k ends before range k,
		 * so r[k] is read before gap k + 1 overwrites it */
		uint32_t next = 0;
		int k = 0;
		for (int i = 0; i < m; i++) {
			tmp = r[i];
			if (tmp.lo > next)
				r[k++] = (struct crange){ next, tmp.lo - 1 };
			next = tmp.hi + 1;
		}
		if (next <= 0x10ffff)
			r[k++] = (struct crange){ next, 0x10ffff };
		m = k;
	}
	for (int i = 0; i < m; i++) {
		if (r[i].hi < 0xd800 || r[i].lo > 0xdfff)
			continue;
		bool below = r[i].lo < 0xd800, above = r[i].hi > 0xdfff;
		if (below && above) {
			memmove(&r[i + 2], &r[i + 1], (size_t)(m - i - 1) * sizeof(*r));
			r[i + 1] = (struct crange){ 0xe000, r[i].hi };
			r[i].hi = 0xd7ff;
			m++;
			i++;
		} else if (below) {
			r[i].hi = 0xd7ff;
		} else if (above) {
			r[i].lo = 0xe000;
		} else {
			memmove(&r[i], &r[i + 1], (size_t)(m - i - 1) * sizeof(*r));
			m--;
			i--;
		}
	}
	*n = m;
}

/* [...] at *pp. */
static bool parse_class(struct pstate *ps, const char **pp, struct evec *v, int32_t origin)
{
	const char *start = *pp, *p = *pp + 1;
	bool neg = false;
	int n = 0, cap = 16;
	struct crange *r = fx_calloc((size_t)cap + 2, sizeof(*r));
	bool ok = false;
	if (!r)
		return oom(ps), false;
	if (p < ps->end && *p == '^') {
		neg = true;
		p++;
	}
	while (p < ps->end && *p != ']') {
		uint32_t lo, hi;
		if (!parse_char(ps, &p, &lo))
			goto out;
		hi = lo;
		if (p + 1 < ps->end && *p == '-' && p[1] != ']') {
			p++;
			if (!parse_char(ps, &p, &hi))
				goto out;
			if (hi < lo) {
				perr(ps, start, "character range U+%X-U+%X is reversed", lo, hi);
				goto out;
			}
		}
		if (n == cap) {
			struct crange *q = fx_realloc_array(r, (size_t)cap * 2 + 2, sizeof(*r));
			if (!q) {
				oom(ps);
				goto out;
			}
			r = q;
			cap *= 2;
		}
		r[n++] = (struct crange){ lo, hi };
	}
	if (p >= ps->end) {
		perr(ps, start, "unterminated character class (no closing ])");
		goto out;
	}
	class_normalize(r, &n, neg);
	if (n == 0) {
		perr(ps, start, "character class matches nothing");
		goto out;
	}
	*pp = p + 1;
	ok = emit_class(ps, v, r, n, origin);
out:
	fx_free(r);
	return ok;
}

/* "..." at *pp: one terminal per UTF-8 byte. */
static bool parse_literal(struct pstate *ps, const char **pp, struct evec *v)
{
	const char *start = *pp, *p = *pp + 1;
	while (p < ps->end && *p != '"') {
		uint32_t c;
		unsigned char b[4];
		if (*p == '\n')
			return perr(ps, start, "unterminated string literal (newline before the closing \")"), false;
		if (!parse_char(ps, &p, &c))
			return false;
		int nb = utf8_encode(c, b);
		for (int i = 0; i < nb; i++)
			if (!push_byte_range(ps, v, b[i], b[i]))
				return false;
	}
	if (p >= ps->end)
		return perr(ps, start, "unterminated string literal (no closing \")"), false;
	*pp = p + 1;
	return true;
}

/* ---- the syntax ---- */

static bool is_word(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
	       c == '_';
}

/* Skip blanks and comments; newlines too when newline_ok. */
static const char *skip_space(const struct pstate *ps, const char *p, bool newline_ok)
{
	while (p < ps->end) {
		if (*p == ' ' || *p == '\t' || (newline_ok && (*p == '\n' || *p == '\r'))) {
			p++;
		} else if (*p == '#') {
			while (p < ps->end && *p != '\n')
				p++;
		} else {
			break;
		}
	}
	return p;
}

static int line_of(const struct pstate *ps, const char *at)
{
	int line, col;
	line_col(ps, at, &line, &col);
	return line;
}

static bool parse_alternates(struct pstate *ps, const char **pp, struct evec *body, int32_t origin,
			     bool nested);

/* A new rule whose body is v[from..v->n) + END; v is cut back to from. */
static int32_t rule_from_tail(struct pstate *ps, struct evec *v, int32_t from, int32_t origin)
{
	int32_t id = rule_new(ps, ps->rules[origin].name, ps->rules[origin].name_len, origin, 0);
	struct evec body = { 0 };
	if (id < 0)
		return -1;
	for (int32_t i = from; i < v->n; i++)
		if (!evec_push(ps, &body, v->p[i].kind, v->p[i].arg)) {
			fx_free(body.p);
			return -1;
		}
	if (!evec_push(ps, &body, GRAM_END, 0)) {
		fx_free(body.p);
		return -1;
	}
	v->n = from;
	ps->rules[id].body = body;
	ps->rules[id].defined = true;
	return id;
}

/* x{min,max} (max -1: unbounded) for the item v[from..v->n): x is one
 * element, or a rule made of the item. min copies, then R ::= x R | for
 * an open end, or max - min nested optionals R_k ::= x R_{k-1} | . */
static bool repeat(struct pstate *ps, struct evec *v, int32_t from, long min, long max,
		   int32_t origin)
{
	struct gram_elem x;
	if (v->n - from == 1) {
		x = v->p[from];
		v->n = from;
	} else {
		int32_t id = rule_from_tail(ps, v, from, origin);
		if (id < 0)
			return false;
		x = (struct gram_elem){ .kind = GRAM_REF, .arg = id };
	}
	for (long i = 0; i < min; i++)
		if (!evec_push(ps, v, x.kind, x.arg))
			return false;
	if (max == min)
		return true;
	long n_opt = max < 0 ? 1 : max - min;
	int32_t inner = -1;
	for (long k = 0; k < n_opt; k++) {
		int32_t id = rule_new(ps, ps->rules[origin].name, ps->rules[origin].name_len, origin, 0);
		if (id < 0)
			return false;
		struct evec *b = &ps->rules[id].body;
		ps->rules[id].defined = true;
		if (!evec_push(ps, b, x.kind, x.arg))
			return false;
		if (max < 0 && !evec_push(ps, b, GRAM_REF, id)) /* x R */
			return false;
		if (max >= 0 && inner >= 0 && !evec_push(ps, b, GRAM_REF, inner))
			return false;
		if (!evec_push(ps, b, GRAM_END, 0) || !evec_push(ps, b, GRAM_END, 0)) /* | (empty) */
			return false;
		inner = id;
	}
	return evec_push(ps, v, GRAM_REF, inner);
}

static bool parse_uint(struct pstate *ps, const char **pp, long *out)
{
	const char *p = *pp;
	long v = 0;
	if (p >= ps->end || *p < '0' || *p > '9')
		return perr(ps, p, "expected a number in a {m,n} repetition"), false;
	while (p < ps->end && *p >= '0' && *p <= '9') {
		v = v * 10 + (*p - '0');
		if (v > GBNF_MAX_REPEAT)
			return perr(ps, *pp, "repetition bound over %d", GBNF_MAX_REPEAT), false;
		p++;
	}
	*out = v;
	*pp = p;
	return true;
}

/* {m} {m,} {m,n} at *pp (after the item). */
static bool parse_braces(struct pstate *ps, const char **pp, long *min, long *max)
{
	const char *start = *pp, *p = skip_space(ps, *pp + 1, true);
	if (!parse_uint(ps, &p, min))
		return false;
	p = skip_space(ps, p, true);
	*max = *min;
	if (p < ps->end && *p == ',') {
		p = skip_space(ps, p + 1, true);
		*max = -1;
		if (p < ps->end && *p != '}') {
			if (!parse_uint(ps, &p, max))
				return false;
			p = skip_space(ps, p, true);
		}
	}
	if (p >= ps->end || *p != '}')
		return perr(ps, start, "expected } to close a {m,n} repetition"), false;
	if (*max >= 0 && *max < *min)
		return perr(ps, start, "repetition {%ld,%ld} has max below min", *min, *max), false;
	*pp = p + 1;
	return true;
}

/* Elements until `|`, `)` or (unless nested) the end of the line. */
static bool parse_sequence(struct pstate *ps, const char **pp, struct evec *v, int32_t origin,
			   bool nested)
{
	const char *p = *pp;
	int32_t last = -1; /* start of the last item in v, for a postfix */
	while (p < ps->end && !ps->rc) {
		char c = *p;
		int32_t item = v->n;
		if (c == '"') {
			if (!parse_literal(ps, &p, v))
				return false;
		} else if (c == '[') {
			if (!parse_class(ps, &p, v, origin))
				return false;
		} else if (c == '.') {
			struct crange any[3] = { { 0, 0x10ffff } };
			int n = 1;
			class_normalize(any, &n, false);
			if (!emit_class(ps, v, any, n, origin))
				return false;
			p++;
		} else if (is_word(c)) {
			const char *name = p;
			while (p < ps->end && is_word(*p))
				p++;
			const char *after = skip_space(ps, p, false);
			if (after + 2 < ps->end && !strncmp(after, "::=", 3)) {
				if (nested)
					return perr(ps, name, "expected ) before the next rule"), false;
				p = name; /* the next rule starts here */
				break;
			}
			int32_t id = rule_named(ps, name, (int32_t)(p - name), line_of(ps, name));
			if (id < 0 || !evec_push(ps, v, GRAM_REF, id))
				return false;
		} else if (c == '(') {
			const char *open = p;
			if (++ps->depth > GBNF_MAX_NEST)
				return perr(ps, p, "groups nested deeper than %d", GBNF_MAX_NEST), false;
			int32_t id = rule_new(ps, ps->rules[origin].name, ps->rules[origin].name_len, origin, 0);
			if (id < 0)
				return false;
			struct evec body = { 0 };
			p = skip_space(ps, p + 1, true);
			bool ok = parse_alternates(ps, &p, &body, origin, true);
			ps->rules[id].body = body;
			ps->rules[id].defined = true;
			if (!ok)
				return false;
			if (p >= ps->end || *p != ')')
				return perr(ps, open, "expected ) to close this group"), false;
			p++;
			ps->depth--;
			if (!evec_push(ps, v, GRAM_REF, id))
				return false;
		} else if (c == '*' || c == '+' || c == '?' || c == '{') {
			long min = c == '+', max = c == '?' ? 1 : -1;
			if (last < 0)
				return perr(ps, p, "'%c' follows nothing it could repeat", c), false;
			if (c == '{') {
				if (!parse_braces(ps, &p, &min, &max))
					return false;
			} else {
				p++;
			}
			if (!repeat(ps, v, last, min, max, origin))
				return false;
			item = last; /* a second postfix applies to the repetition */
		} else {
			break;
		}
		last = item;
		p = skip_space(ps, p, nested);
	}
	*pp = p;
	return !ps->rc;
}

static bool parse_alternates(struct pstate *ps, const char **pp, struct evec *body, int32_t origin,
			     bool nested)
{
	const char *p = *pp;
	for (;;) {
		if (!parse_sequence(ps, &p, body, origin, nested) || !evec_push(ps, body, GRAM_END, 0))
			return false;
		/* a line that starts with `|` continues the rule (llama.cpp
		 * wants the `|` at the end of the previous line instead) */
		const char *q = nested ? p : skip_space(ps, p, true);
		if (q < ps->end && *q == '|') {
			p = skip_space(ps, q + 1, true);
			continue;
		}
		break;
	}
	*pp = p;
	return true;
}

static bool parse_rule(struct pstate *ps, const char **pp)
{
	const char *p = *pp, *name = p;
	while (p < ps->end && is_word(*p))
		p++;
	if (p == name)
		return perr(ps, p, "expected a rule name"), false;
	int32_t len = (int32_t)(p - name);
	p = skip_space(ps, p, false);
	if (p + 2 >= ps->end || strncmp(p, "::=", 3))
		return perr(ps, p, "expected ::= after rule name '%.*s'", (int)len, name), false;
	int32_t id = rule_named(ps, name, len, line_of(ps, name));
	if (id < 0)
		return false;
	if (ps->rules[id].defined)
		return perr(ps, name, "rule '%.*s' is defined twice (first on line %d)", (int)len,
			    name, ps->rules[id].def_line), false;
	ps->rules[id].defined = true;
	ps->rules[id].def_line = line_of(ps, name);
	p = skip_space(ps, p + 3, true);
	struct evec body = { 0 };
	bool ok = parse_alternates(ps, &p, &body, id, false);
	ps->rules[id].body = body; /* after: parsing may move ps->rules */
	if (!ok)
		return false;
	if (p < ps->end && *p == ')')
		return perr(ps, p, "unmatched )"), false;
	if (p < ps->end && *p != '\n' && *p != '\r' && !is_word(*p))
		return perr(ps, p, "unexpected '%c'", *p), false;
	*pp = skip_space(ps, p, true);
	return true;
}

/* ---- checks and flattening ---- */

static bool alt_nullable(const struct brule *R, const bool *nullable, const struct gram_elem *e)
{
	(void)R;
	for (; e->kind != GRAM_END; e++)
		if (e->kind == GRAM_TERM || !nullable[e->arg])
			return false;
	return true;
}

/* Left recursion: a rule reachable from itself through leftmost
 * positions (after nullable prefixes). DFS with colours over the
 * leftmost-reference graph. */
static bool left_dfs(struct pstate *ps, const bool *nullable, int32_t r, uint8_t *colour)
{
	colour[r] = 1;
	const struct evec *b = &ps->rules[r].body;
	bool at_start = true;
	for (int32_t i = 0; i < b->n; i++) {
		const struct gram_elem *e = &b->p[i];
		if (e->kind == GRAM_END) {
			at_start = true;
			continue;
		}
		if (!at_start)
			continue;
		if (e->kind == GRAM_TERM) {
			at_start = false;
			continue;
		}
		if (colour[e->arg] == 1) {
			const struct brule *u = &ps->rules[ps->rules[e->arg].origin];
			ps->rc = fx_fail(ps->err, FX_E_INVALID,
					 "grammar: rule '%.*s' is left-recursive (it can reach itself before any character): rewrite it right-recursively, e.g. x ::= item x?",
					 (int)u->name_len, u->name);
			return false;
		}
		if (colour[e->arg] == 0 && !left_dfs(ps, nullable, e->arg, colour))
			return false;
		at_start = nullable[e->arg];
	}
	colour[r] = 2;
	return true;
}

static int check_rules(struct pstate *ps)
{
	for (int32_t i = 0; i < ps->n_rules; i++)
		if (!ps->rules[i].defined)
			return fx_fail(ps->err, FX_E_INVALID,
				       "grammar: line %d: undefined rule '%.*s'",
				       ps->rules[i].def_line, (int)ps->rules[i].name_len,
				       ps->rules[i].name);
	bool *nullable = fx_calloc((size_t)ps->n_rules, sizeof(bool));
	uint8_t *colour = fx_calloc((size_t)ps->n_rules, 1);
	int rc = FX_OK;
	if (!nullable || !colour) {
		rc = oom(ps);
		goto out;
	}
	for (bool changed = true; changed;) {
		changed = false;
		for (int32_t r = 0; r < ps->n_rules; r++) {
			const struct evec *b = &ps->rules[r].body;
			for (int32_t i = 0; !nullable[r] && i < b->n;) {
				if (alt_nullable(&ps->rules[r], nullable, &b->p[i]))
					nullable[r] = changed = true;
				while (b->p[i].kind != GRAM_END)
					i++;
				i++;
			}
		}
	}
	for (int32_t r = 0; r < ps->n_rules && !rc; r++)
		if (!colour[r] && !left_dfs(ps, nullable, r, colour))
			rc = ps->rc;
out:
	fx_free(nullable);
	fx_free(colour);
	return rc;
}

/* Byte classes: refine one partition of 0..255 by every set. */
static void byte_classes(struct fx_grammar *g)
{
	uint8_t cls[256] = { 0 };
	int n = 1;
	for (int32_t s = 0; s < g->n_sets; s++) {
		int16_t remap[512];
		int m = 0;
		uint8_t next[256];
		for (int i = 0; i < 512; i++)
			remap[i] = -1;
		for (int b = 0; b < 256; b++) {
			int key = cls[b] * 2 + gram_set_has(&g->sets[s], (unsigned)b);
			if (remap[key] < 0)
				remap[key] = (int16_t)m++;
			next[b] = (uint8_t)remap[key];
		}
		memcpy(cls, next, sizeof(cls));
		n = m;
	}
	memcpy(g->cls_of, cls, sizeof(cls));
	for (int b = 255; b >= 0; b--)
		g->cls_rep[cls[b]] = (uint8_t)b;
	g->n_cls = n;
}

static int flatten(struct pstate *ps, int32_t root, struct fx_grammar *g)
{
	int32_t n_elems = 0, n_alts = 0;
	for (int32_t r = 0; r < ps->n_rules; r++) {
		n_elems += ps->rules[r].body.n;
		for (int32_t i = 0; i < ps->rules[r].body.n; i++)
			n_alts += ps->rules[r].body.p[i].kind == GRAM_END;
	}
	g->elems = fx_calloc((size_t)n_elems + 1, sizeof(*g->elems));
	g->alt_start = fx_calloc((size_t)n_alts + 1, sizeof(int32_t));
	g->rule_alt = fx_calloc((size_t)ps->n_rules + 1, sizeof(int32_t));
	if (!g->elems || !g->alt_start || !g->rule_alt)
		return oom(ps);
	int32_t e = 0, a = 0;
	for (int32_t r = 0; r < ps->n_rules; r++) {
		const struct evec *b = &ps->rules[r].body;
		g->rule_alt[r] = a;
		bool start = true;
		for (int32_t i = 0; i < b->n; i++) {
			if (start)
				g->alt_start[a++] = e;
			g->elems[e++] = b->p[i];
			start = b->p[i].kind == GRAM_END;
		}
	}
	g->rule_alt[ps->n_rules] = a;
	g->n_elems = e;
	g->n_alts = a;
	g->n_rules = ps->n_rules;
	g->root = root;
	g->sets = ps->sets;
	g->n_sets = ps->n_sets;
	ps->sets = NULL;
	byte_classes(g);
	return FX_OK;
}

void fx_grammar_free(struct fx_grammar *g)
{
	if (!g)
		return;
	fx_free(g->elems);
	fx_free(g->alt_start);
	fx_free(g->rule_alt);
	fx_free(g->sets);
	fx_free(g);
}

int fx_grammar_parse(const char *gbnf, size_t len, const char *root, struct fx_grammar **out,
		     struct fx_err *err)
{
	struct pstate ps = { .src = gbnf, .end = gbnf + len, .err = err };
	struct fx_grammar *g = NULL;
	const char *p;
	int32_t root_id = -1;

	if (!out)
		return fx_fail(err, FX_E_INVALID, "grammar: out is NULL");
	*out = NULL;
	if (!gbnf)
		return fx_fail(err, FX_E_INVALID, "grammar: no text");
	if (!root)
		root = "root";
	p = skip_space(&ps, gbnf, true);
	while (p < ps.end && !ps.rc)
		if (!parse_rule(&ps, &p))
			break;
	if (!ps.rc) {
		for (int32_t i = 0; i < ps.n_rules; i++)
			if (ps.rules[i].origin == i && ps.rules[i].name_len == (int32_t)strlen(root) &&
			    !memcmp(ps.rules[i].name, root, strlen(root)))
				root_id = i;
		if (root_id < 0)
			ps.rc = fx_fail(err, FX_E_INVALID, "grammar: no rule named '%s' (the start rule)",
					root);
	}
	if (!ps.rc)
		ps.rc = check_rules(&ps);
	if (!ps.rc && !(g = fx_calloc(1, sizeof(*g))))
		oom(&ps);
	if (!ps.rc)
		ps.rc = flatten(&ps, root_id, g);
	for (int32_t i = 0; i < ps.n_rules; i++)
		fx_free(ps.rules[i].body.p);
	fx_free(ps.rules);
	fx_free(ps.sets);
	if (ps.rc) {
		fx_grammar_free(g);
		return ps.rc;
	}
	*out = g;
	return FX_OK;
}
