/* JSON Schema to GBNF, in the manner of llama.cpp's json-schema-to-grammar
 * (common/json-schema-to-grammar.cpp): one rule per schema node, named by
 * its path, over shared primitive rules (string, number, value, space, the
 * formats), with whitespace between tokens bounded by `space`.
 *
 * Fails closed: every keyword is either supported, an annotation (ignored,
 * as pydantic emits them), or an error naming it and its JSON pointer. The
 * grammar may be STRICTER than the schema where exactness would cost a lot
 * and no reasonable output is lost (docs/STRUCTURED.md lists each case:
 * properties in their declared order, no undeclared properties when
 * `properties` is given and additionalProperties is absent, as vLLM's
 * strict mode; a tuple's items all present; integers of at most 18
 * digits); never looser, except that an undeclared key spelled with \u
 * escapes is not recognised as a declared one.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "core/alloc.h"
#include "core/status.h"
#include "grammar/convert.h"

#define SC_MAX_DEPTH 64
#define SC_MAX_RULES 20000
#define SC_MAX_COUNT 10000 /* bounds of repetitions (minItems, maxLength, ...) */

struct sc_rule {
	char *name;
	char *body; /* NULL while being built */
};

struct sc_ref {
	char *ref;
	int rule;
};

struct sc {
	const cJSON *root;
	const char *root_name;
	char prefix[96];     /* "NAME-" or "" */
	struct sc_rule *rules;
	int n_rules, cap_rules;
	struct sc_ref *refs;
	int n_refs, cap_refs;
	char path[512];      /* JSON pointer of the node being visited */
	int depth;
	int rc;
	struct fx_err *err;
};

/* ---- errors and rules ---- */

__attribute__((format(printf, 2, 3))) static int sc_fail(struct sc *sc, const char *fmt, ...)
{
	char what[400];
	va_list ap;
	if (sc->rc)
		return sc->rc;
	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	sc->rc = fx_fail(sc->err, FX_E_INVALID, "json schema: %s: %s", sc->path[0] ? sc->path : "/", what);
	return sc->rc;
}

static int sc_oom(struct sc *sc)
{
	if (!sc->rc)
		sc->rc = fx_fail(sc->err, FX_E_NOMEM, "json schema: out of memory");
	return sc->rc;
}

static int find_rule(const struct sc *sc, const char *name)
{
	for (int i = 0; i < sc->n_rules; i++)
		if (!strcmp(sc->rules[i].name, name))
			return i;
	return -1;
}

/* A new rule named prefix + local (sanitised to GBNF's [a-zA-Z0-9-];
 * "-2", "-3", ... appended when taken); -1 on error. */
static int reserve(struct sc *sc, const char *local, bool is_root)
{
	char base[160], name[176];
	size_t k = 0;
	if (sc->rc)
		return -1;
	if (sc->n_rules >= SC_MAX_RULES) {
		sc_fail(sc, "the grammar would need more than %d rules", SC_MAX_RULES);
		return -1;
	}
	if (is_root) {
		snprintf(base, sizeof(base), "%s", sc->root_name);
	} else {
		k = (size_t)snprintf(base, sizeof(base), "%s", sc->prefix);
		for (const char *p = local; *p && k + 1 < sizeof(base); p++) {
			char c = *p;
			bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
			if (ok || (k && base[k - 1] != '-'))
				base[k++] = ok ? c : '-';
		}
		while (k && base[k - 1] == '-')
			k--;
		if (!k)
			base[k++] = 'r';
		base[k] = 0;
	}
	snprintf(name, sizeof(name), "%s", base);
	for (int n = 2; find_rule(sc, name) >= 0; n++)
		snprintf(name, sizeof(name), "%s-%d", base, n);
	if (sc->n_rules == sc->cap_rules) {
		int cap = sc->cap_rules ? sc->cap_rules * 2 : 64;
		struct sc_rule *r = fx_realloc_array(sc->rules, (size_t)cap, sizeof(*r));
		if (!r) {
			sc_oom(sc);
			return -1;
		}
		sc->rules = r;
		sc->cap_rules = cap;
	}
	char *dup = fx_strndup(name, strlen(name));
	if (!dup) {
		sc_oom(sc);
		return -1;
	}
	sc->rules[sc->n_rules] = (struct sc_rule){ .name = dup };
	return sc->n_rules++;
}

/* Give rule i the body in b (taken over); false on error. */
static bool fill(struct sc *sc, int i, struct gram_buf *b)
{
	if (b->oom) {
		gram_buf_free(b);
		sc_oom(sc);
		return false;
	}
	if (sc->rc || i < 0) {
		gram_buf_free(b);
		return false;
	}
	sc->rules[i].body = b->p ? b->p : fx_strndup("\"\"", 2);
	*b = (struct gram_buf){ 0 };
	if (!sc->rules[i].body)
		sc_oom(sc);
	return !sc->rc;
}

/* ---- primitives ---- */

/* Bodies of the shared rules; $name refers to another primitive. */
static const struct {
	const char *name, *body;
} PRIMS[] = {
	{ "space", "| \" \" | \"\\n\" [ \\t]{0,20}" },
	{ "boolean", "(\"true\" | \"false\") $space" },
	{ "null", "\"null\" $space" },
	{ "char", "[^\"\\\\\\x7F\\x00-\\x1F] | [\\\\] ([\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4})" },
	{ "string", "\"\\\"\" $char* \"\\\"\" $space" },
	{ "integral-part", "[0] | [1-9] [0-9]{0,15}" },
	{ "decimal-part", "[0-9]{1,16}" },
	{ "number", "(\"-\"? $integral-part) (\".\" $decimal-part)? ([eE] [-+]? $integral-part)? $space" },
	{ "integer", "(\"-\"? $integral-part) $space" },
	{ "value", "$object | $array | $string | $number | $boolean | $null" },
	{ "object", "\"{\" $space ( $string \":\" $space $value (\",\" $space $string \":\" $space $value)* )? \"}\" $space" },
	{ "array", "\"[\" $space ( $value (\",\" $space $value)* )? \"]\" $space" },
	{ "date", "[0-9]{4} \"-\" ( \"0\" [1-9] | \"1\" [0-2] ) \"-\" ( \"0\" [1-9] | [1-2] [0-9] | \"3\" [0-1] )" },
	{ "time", "([01] [0-9] | \"2\" [0-3]) \":\" [0-5] [0-9] \":\" [0-5] [0-9] ( \".\" [0-9]{1,6} )? ( \"Z\" | [+-] ([01] [0-9] | \"2\" [0-3]) \":\" [0-5] [0-9] )" },
	{ "date-time", "$date \"T\" $time" },
	{ "uuid", "[0-9a-fA-F]{8} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{12}" },
	{ "email-label", "[a-zA-Z0-9] ([a-zA-Z0-9-]{0,20} [a-zA-Z0-9])?" },
	{ "email", "[a-zA-Z0-9_] ([a-zA-Z0-9._+-]{0,30} [a-zA-Z0-9_])? \"@\" $email-label (\".\" $email-label){0,3} \".\" [a-zA-Z]{2,12}" },
};

/* The full name of primitive name, added (with what it uses) on first
 * use; NULL on error. */
static const char *prim(struct sc *sc, const char *name)
{
	char full[128];
	snprintf(full, sizeof(full), "%s%s", sc->prefix, name);
	int i = find_rule(sc, full);
	if (i >= 0)
		return sc->rules[i].name;
	for (size_t k = 0; k < sizeof(PRIMS) / sizeof(PRIMS[0]); k++) {
		if (strcmp(PRIMS[k].name, name))
			continue;
		if ((i = reserve(sc, name, false)) < 0)
			return NULL;
		struct gram_buf b = { 0 };
		for (const char *p = PRIMS[k].body; *p;) {
			if (*p != '$') {
				gram_buf_add(&b, p++, 1);
				continue;
			}
			char ref[32];
			size_t n = 0;
			for (p++; (*p >= 'a' && *p <= 'z') || *p == '-'; p++)
				if (n + 1 < sizeof(ref))
					ref[n++] = *p;
			ref[n] = 0;
			const char *r = prim(sc, ref);
			if (!r) {
				gram_buf_free(&b);
				return NULL;
			}
			gram_buf_puts(&b, r);
		}
		return fill(sc, i, &b) ? sc->rules[i].name : NULL;
	}
	sc_fail(sc, "internal: no primitive '%s'", name);
	return NULL;
}

/* ---- keywords ---- */

static const char *const ANNOTATIONS[] = {
	"title", "description", "default", "examples", "$schema", "$id", "$comment", "deprecated",
	"readOnly", "writeOnly", "$defs", "definitions", "$anchor", "contentEncoding",
	"contentMediaType", "discriminator", "strict",
};
static const char *const SUPPORTED[] = {
	"type", "properties", "required", "additionalProperties", "minProperties", "maxProperties",
	"enum", "const", "items", "prefixItems", "additionalItems", "minItems", "maxItems", "anyOf",
	"oneOf", "allOf", "$ref", "minLength", "maxLength", "pattern", "format", "minimum", "maximum",
	"exclusiveMinimum", "exclusiveMaximum", "uniqueItems",
};

static bool in_list(const char *s, const char *const *list, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(s, list[i]))
			return true;
	return false;
}
#define IN(s, L) in_list((s), (L), sizeof(L) / sizeof((L)[0]))

static bool check_keys(struct sc *sc, const cJSON *s)
{
	const cJSON *k;
	cJSON_ArrayForEach(k, s)
	{
		if (IN(k->string, ANNOTATIONS))
			continue;
		if (!IN(k->string, SUPPORTED))
			return sc_fail(sc, "unsupported keyword '%s'", k->string), false;
		if (!strcmp(k->string, "uniqueItems") && cJSON_IsTrue(k))
			return sc_fail(sc, "unsupported keyword 'uniqueItems' (true)"), false;
	}
	return true;
}

static const cJSON *get(const cJSON *s, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(s, key);
	return v && !cJSON_IsNull(v) ? v : NULL;
}

/* A count keyword (minItems, ...) in [0, SC_MAX_COUNT]; dflt when absent. */
static bool count_of(struct sc *sc, const cJSON *s, const char *key, long dflt, long *out)
{
	const cJSON *v = get(s, key);
	*out = dflt;
	if (!v)
		return true;
	if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble != floor(v->valuedouble))
		return sc_fail(sc, "'%s' must be a non-negative integer", key), false;
	if (v->valuedouble > SC_MAX_COUNT)
		return sc_fail(sc, "'%s' of %g is over the supported %d", key, v->valuedouble, SC_MAX_COUNT), false;
	*out = (long)v->valuedouble;
	return true;
}

/* Push "/seg" onto the path (seg escaped as a JSON pointer); returns the
 * old length for pop. */
static size_t path_push(struct sc *sc, const char *seg)
{
	size_t n = strlen(sc->path), k = n;
	if (k + 2 < sizeof(sc->path))
		sc->path[k++] = '/';
	for (const char *p = seg; *p && k + 3 < sizeof(sc->path); p++) {
		if (*p == '~' || *p == '/') {
			sc->path[k++] = '~';
			sc->path[k++] = *p == '~' ? '0' : '1';
		} else {
			sc->path[k++] = *p;
		}
	}
	sc->path[k] = 0;
	return n;
}

static void path_pop(struct sc *sc, size_t n)
{
	sc->path[n] = 0;
}

static int visit(struct sc *sc, const cJSON *s, const char *local, bool is_root);
static bool visit_into(struct sc *sc, const cJSON *s, int rule);
static bool body_of(struct sc *sc, const cJSON *s, const char *name, struct gram_buf *b);

/* Visit s at path seg under the current node, as rule local. */
static const char *visit_at(struct sc *sc, const cJSON *s, const char *seg, const char *local)
{
	size_t n = path_push(sc, seg);
	int r = visit(sc, s, local, false);
	path_pop(sc, n);
	return r < 0 ? NULL : sc->rules[r].name;
}

/* JSON text of v (compact) as a GBNF literal, then space. */
static bool literal_value(struct sc *sc, const cJSON *v, struct gram_buf *b)
{
	char *t = cJSON_PrintUnformatted(v);
	const char *sp = prim(sc, "space");
	if (!t)
		return sc_oom(sc), false;
	gram_buf_literal(b, t, strlen(t));
	cJSON_free(t);
	if (!sp)
		return false;
	gram_buf_printf(b, " %s", sp);
	return true;
}

/* ---- integer ranges ---- */

static void digits_of(long long v, char *out)
{
	snprintf(out, 24, "%lld", v);
}

/* Decimal strings x..y of equal length (x <= y), digit by digit. */
static void range_same_len(struct gram_buf *b, const char *x, const char *y)
{
	size_t n = strlen(x);
	if (!n)
		return;
	if (x[0] == y[0]) {
		gram_buf_printf(b, "\"%c\"", x[0]);
		if (n > 1) {
			gram_buf_puts(b, " (");
			range_same_len(b, x + 1, y + 1);
			gram_buf_puts(b, ")");
		}
		return;
	}
	bool low_full = strspn(x + 1, "0") == n - 1, high_full = strspn(y + 1, "9") == n - 1;
	char lo_d = low_full ? x[0] : (char)(x[0] + 1), hi_d = high_full ? y[0] : (char)(y[0] - 1);
	bool first = true;
	gram_buf_puts(b, "(");
	if (!low_full) { /* x[0] then x[1..] up to 99..9 */
		char nines[24];
		memset(nines, '9', n - 1);
		nines[n - 1] = 0;
		gram_buf_printf(b, "\"%c\" (", x[0]);
		range_same_len(b, x + 1, nines);
		gram_buf_puts(b, ")");
		first = false;
	}
	if (lo_d <= hi_d) {
		gram_buf_printf(b, "%s[%c-%c]", first ? "" : " | ", lo_d, hi_d);
		if (n > 1)
			gram_buf_printf(b, " [0-9]{%zu}", n - 1);
		first = false;
	}
	if (!high_full) { /* y[0] then 00..0 up to y[1..] */
		char zeros[24];
		memset(zeros, '0', n - 1);
		zeros[n - 1] = 0;
		gram_buf_printf(b, "%s\"%c\" (", first ? "" : " | ", y[0]);
		range_same_len(b, zeros, y + 1);
		gram_buf_puts(b, ")");
	}
	gram_buf_puts(b, ")");
}

#define SC_INT_DIGITS 18

/* Non-negative integers in [a, b] (b < 0: unbounded, up to 18 digits),
 * as their decimal strings without leading zeros. */
static void uint_range(struct gram_buf *b, long long a, long long hi)
{
	char x[24], y[24];
	digits_of(a, x);
	int da = (int)strlen(x), db;
	if (hi >= 0) {
		digits_of(hi, y);
		db = (int)strlen(y);
	} else {
		db = SC_INT_DIGITS;
	}
	gram_buf_puts(b, "(");
	bool first = true;
	for (int d = da; d <= db; d++) {
		long long lo_d = d == 1 ? 0 : 1;
		for (int i = 1; i < d; i++)
			lo_d *= 10;
		if (d == 1)
			lo_d = 0;
		long long from = a > lo_d ? a : lo_d;
		if (hi < 0 && d > da) { /* every number of d..18 digits */
			gram_buf_printf(b, "%s[1-9] [0-9]{%d,%d}", first ? "" : " | ", d - 1, SC_INT_DIGITS - 1);
			break;
		}
		char f[24], t[24];
		digits_of(from, f);
		if (hi >= 0 && d == db)
			snprintf(t, sizeof(t), "%s", y);
		else {
			memset(t, '9', (size_t)d);
			t[d] = 0;
		}
		gram_buf_puts(b, first ? "" : " | ");
		range_same_len(b, f, t);
		first = false;
	}
	gram_buf_puts(b, ")");
}

/* Integers in [lo, hi]; has_lo / has_hi false: unbounded that way. */
static void int_range(struct gram_buf *b, bool has_lo, long long lo, bool has_hi, long long hi)
{
	bool neg = !has_lo || lo < 0, pos = !has_hi || hi >= 0;
	gram_buf_puts(b, "(");
	if (neg) { /* "-" and magnitudes [max(1, -hi), -lo] */
		long long m_lo = has_hi && hi < 0 ? -hi : 1;
		gram_buf_puts(b, "\"-\" ");
		uint_range(b, m_lo, has_lo ? -lo : -1);
	}
	if (pos) {
		gram_buf_puts(b, neg ? " | " : "");
		uint_range(b, has_lo && lo > 0 ? lo : 0, has_hi ? hi : -1);
	}
	gram_buf_puts(b, ")");
}

/* The bounds of a number schema, integral (rounded inward for an
 * integer); false on error. */
static bool bounds(struct sc *sc, const cJSON *s, bool integer, bool *has_lo, double *lo,
		   bool *has_hi, double *hi, bool *excl)
{
	const cJSON *mn = get(s, "minimum"), *mx = get(s, "maximum");
	const cJSON *emn = get(s, "exclusiveMinimum"), *emx = get(s, "exclusiveMaximum");
	*has_lo = *has_hi = *excl = false;
	for (const cJSON *const *v = (const cJSON *const[]){ mn, mx, NULL }; *v; v++)
		if (!cJSON_IsNumber(*v))
			return sc_fail(sc, "'%s' must be a number", (*v)->string), false;
	if (emn && !cJSON_IsNumber(emn) && !cJSON_IsBool(emn))
		return sc_fail(sc, "'exclusiveMinimum' must be a number"), false;
	if (emx && !cJSON_IsNumber(emx) && !cJSON_IsBool(emx))
		return sc_fail(sc, "'exclusiveMaximum' must be a number"), false;
	bool emn_b = emn && cJSON_IsTrue(emn), emx_b = emx && cJSON_IsTrue(emx); /* draft 4 */
	if (mn) {
		*has_lo = true;
		*lo = mn->valuedouble;
	}
	if (mx) {
		*has_hi = true;
		*hi = mx->valuedouble;
	}
	if (emn && cJSON_IsNumber(emn) && (!*has_lo || emn->valuedouble >= *lo)) {
		*has_lo = true;
		*lo = emn->valuedouble;
		emn_b = true;
	}
	if (emx && cJSON_IsNumber(emx) && (!*has_hi || emx->valuedouble <= *hi)) {
		*has_hi = true;
		*hi = emx->valuedouble;
		emx_b = true;
	}
	if ((*has_lo && fabs(*lo) > 1e17) || (*has_hi && fabs(*hi) > 1e17))
		return sc_fail(sc, "bounds beyond 1e17 are not supported"), false;
	if (integer) {
		if (*has_lo)
			*lo = emn_b && *lo == floor(*lo) ? *lo + 1 : ceil(*lo);
		if (*has_hi)
			*hi = emx_b && *hi == floor(*hi) ? *hi - 1 : floor(*hi);
	} else {
		*excl = (emn_b && *has_lo) || (emx_b && *has_hi);
		if ((*has_lo && *lo != floor(*lo)) || (*has_hi && *hi != floor(*hi)))
			return sc_fail(sc, "a 'number' with a non-integer bound is not supported (integer bounds are)"), false;
	}
	if (*has_lo && *has_hi && *lo > *hi)
		return sc_fail(sc, "minimum is above maximum: no number matches"), false;
	return true;
}

static bool visit_integer(struct sc *sc, const cJSON *s, struct gram_buf *b)
{
	bool has_lo, has_hi, excl;
	double lo = 0, hi = 0;
	const char *sp = prim(sc, "space");
	if (!sp || !bounds(sc, s, true, &has_lo, &lo, &has_hi, &hi, &excl))
		return false;
	if (!has_lo && !has_hi) {
		const char *p = prim(sc, "integer");
		gram_buf_puts(b, p ? p : "");
		return p != NULL;
	}
	int_range(b, has_lo, (long long)lo, has_hi, (long long)hi);
	gram_buf_printf(b, " %s", sp);
	return true;
}

/* A number in [lo, hi] with integer bounds: an integer part in range and
 * any fraction, or the bound itself with a zero fraction. No exponent. */
static bool visit_number(struct sc *sc, const cJSON *s, struct gram_buf *b)
{
	bool has_lo, has_hi, excl;
	double lo = 0, hi = 0;
	const char *sp = prim(sc, "space");
	if (!sp || !bounds(sc, s, false, &has_lo, &lo, &has_hi, &hi, &excl))
		return false;
	if (!has_lo && !has_hi) {
		const char *p = prim(sc, "number");
		gram_buf_puts(b, p ? p : "");
		return p != NULL;
	}
	if (excl)
		return sc_fail(sc, "exclusive bounds on a 'number' are not supported (on an integer they are)"), false;
	const char *frac = "(\".\" [0-9]{1,16})?", *zero = "(\".\" \"0\"{1,16})?";
	long long L = (long long)lo, H = (long long)hi;
	bool first = true;
	gram_buf_puts(b, "(");
	if (!has_hi || H >= 0) { /* the values >= 0 */
		long long a = has_lo && L > 0 ? L : 0;
		if (!has_hi) {
			uint_range(b, a, -1);
			gram_buf_printf(b, " %s", frac);
		} else {
			if (a <= H - 1) {
				uint_range(b, a, H - 1);
				gram_buf_printf(b, " %s | ", frac);
			}
			gram_buf_printf(b, "\"%lld\" %s", H, zero);
		}
		first = false;
	}
	if (!has_lo || L < 0) { /* the values < 0: "-" and a magnitude */
		long long mlo = has_hi && H < 0 ? -H : 0, mhi = has_lo ? -L : -1;
		gram_buf_printf(b, "%s\"-\" (", first ? "" : " | ");
		if (mhi < 0) {
			uint_range(b, mlo, -1);
			gram_buf_printf(b, " %s", frac);
		} else {
			if (mlo <= mhi - 1) {
				uint_range(b, mlo, mhi - 1);
				gram_buf_printf(b, " %s | ", frac);
			}
			gram_buf_printf(b, "\"%lld\" %s", mhi, zero);
		}
		gram_buf_puts(b, ")");
	}
	gram_buf_printf(b, ") %s", sp);
	return true;
}

/* ---- strings ---- */

static bool visit_string(struct sc *sc, const cJSON *s, struct gram_buf *b)
{
	static const char *const FORMATS[] = { "date", "time", "date-time", "uuid", "email" };
	const cJSON *fmt = get(s, "format"), *pat = get(s, "pattern");
	long mn, mx;
	const char *sp = prim(sc, "space"), *ch = prim(sc, "char");
	if (!sp || !ch || !count_of(sc, s, "minLength", 0, &mn) || !count_of(sc, s, "maxLength", -1, &mx))
		return false;
	bool lengths = get(s, "minLength") || get(s, "maxLength");
	if (mx >= 0 && mx < mn)
		return sc_fail(sc, "maxLength is below minLength: no string matches"), false;
	if (fmt) {
		if (!cJSON_IsString(fmt))
			return sc_fail(sc, "'format' must be a string"), false;
		if (!IN(fmt->valuestring, FORMATS))
			return sc_fail(sc, "unsupported format '%s' (supported: date, time, date-time, uuid, email)",
				       fmt->valuestring), false;
		if (pat || lengths)
			return sc_fail(sc, "'format' together with 'pattern' or a length is not supported"), false;
		const char *f = prim(sc, fmt->valuestring);
		if (!f)
			return false;
		gram_buf_printf(b, "\"\\\"\" %s \"\\\"\" %s", f, sp);
		return true;
	}
	if (pat) {
		if (!cJSON_IsString(pat))
			return sc_fail(sc, "'pattern' must be a string"), false;
		if (lengths)
			return sc_fail(sc, "'pattern' together with minLength/maxLength is not supported"), false;
		gram_buf_puts(b, "\"\\\"\" ");
		struct fx_err e2 = { 0 };
		int rc = gram_regex_expr(pat->valuestring, true, false, ch, b, &e2);
		if (rc == FX_E_NOMEM)
			return sc_oom(sc), false;
		if (rc)
			return sc_fail(sc, "pattern: %s", e2.msg), false;
		gram_buf_printf(b, " \"\\\"\" %s", sp);
		return true;
	}
	if (mx < 0)
		gram_buf_printf(b, "\"\\\"\" %s{%ld,} \"\\\"\" %s", ch, mn, sp);
	else
		gram_buf_printf(b, "\"\\\"\" %s{%ld,%ld} \"\\\"\" %s", ch, mn, mx, sp);
	return true;
}

/* ---- arrays ---- */

/* ( sep item ){lo,hi} with hi < 0 unbounded */
static void repeat_items(struct gram_buf *b, const char *item, const char *sp, long lo, long hi)
{
	if (hi == 0)
		return;
	gram_buf_printf(b, " (\",\" %s %s)", sp, item);
	if (hi < 0)
		gram_buf_printf(b, "{%ld,}", lo);
	else
		gram_buf_printf(b, "{%ld,%ld}", lo, hi);
}

static bool visit_array(struct sc *sc, const cJSON *s, const char *name, struct gram_buf *b)
{
	const cJSON *items = get(s, "items"), *prefix = get(s, "prefixItems");
	const cJSON *rest = items;
	long mn, mx;
	char local[200];
	const char *sp = prim(sc, "space");
	if (!sp || !count_of(sc, s, "minItems", 0, &mn) || !count_of(sc, s, "maxItems", -1, &mx))
		return false;
	if (mx >= 0 && mx < mn)
		return sc_fail(sc, "maxItems is below minItems: no array matches"), false;
	if (cJSON_IsArray(items)) { /* draft 7 tuple */
		prefix = items;
		rest = get(s, "additionalItems");
	}
	if (prefix && !cJSON_IsArray(prefix))
		return sc_fail(sc, "'prefixItems' must be an array of schemas"), false;
	long n_pre = prefix ? cJSON_GetArraySize(prefix) : 0;
	if (prefix && !rest)
		rest = NULL; /* a tuple without `items`: exactly its items (stricter) */
	else if (!rest)
		rest = NULL;
	bool rest_any = !prefix && !items;
	if (rest && cJSON_IsBool(rest) && !cJSON_IsTrue(rest))
		rest = NULL, rest_any = false;
	if (n_pre && mx >= 0 && mx < n_pre)
		return sc_fail(sc, "maxItems is below the number of prefixItems"), false;
	gram_buf_printf(b, "\"[\" %s", sp);
	if (n_pre) {
		const cJSON *it;
		long i = 0;
		size_t n0 = path_push(sc, cJSON_IsArray(items) ? "items" : "prefixItems");
		cJSON_ArrayForEach(it, prefix)
		{
			char seg[24];
			snprintf(seg, sizeof(seg), "%ld", i);
			snprintf(local, sizeof(local), "%s-%ld", name, i);
			const char *r = visit_at(sc, it, seg, local);
			if (!r)
				return path_pop(sc, n0), false;
			if (i)
				gram_buf_printf(b, " \",\" %s %s", sp, r);
			else
				gram_buf_printf(b, " %s", r);
			i++;
		}
		path_pop(sc, n0);
		if (rest || rest_any) {
			snprintf(local, sizeof(local), "%s-item", name);
			const char *r = rest && !cJSON_IsBool(rest) ?
						visit_at(sc, rest, cJSON_IsArray(items) ? "additionalItems" : "items", local) :
						prim(sc, "value");
			if (!r)
				return false;
			long lo = mn > n_pre ? mn - n_pre : 0, hi = mx >= 0 ? mx - n_pre : -1;
			repeat_items(b, r, sp, lo, hi);
		} else if (mn > n_pre) {
			return sc_fail(sc, "minItems above the tuple's length, and no more items allowed"), false;
		}
	} else if (mx != 0) {
		snprintf(local, sizeof(local), "%s-item", name);
		const char *r = items && !cJSON_IsBool(items) ? visit_at(sc, items, "items", local) :
			(items && cJSON_IsFalse(items)) ? NULL : prim(sc, "value");
		if (items && cJSON_IsFalse(items)) {
			if (mn > 0)
				return sc_fail(sc, "items is false but minItems is above 0"), false;
		} else {
			if (!r)
				return false;
			gram_buf_printf(b, mn > 0 ? " %s" : " (%s", r);
			repeat_items(b, r, sp, mn > 0 ? mn - 1 : 0, mx >= 0 ? mx - 1 : -1);
			if (mn == 0)
				gram_buf_puts(b, ")?");
		}
	}
	gram_buf_printf(b, " \"]\" %s", sp);
	return true;
}

/* ---- objects ---- */

struct prop {
	const char *key;   /* the property's name */
	const char *rule;  /* "key" : value */
	bool required;
};

/* A JSON string's content, as it is written between its quotes. */
static char *key_text(const char *key)
{
	cJSON *j = cJSON_CreateString(key);
	char *t = j ? cJSON_PrintUnformatted(j) : NULL;
	cJSON_Delete(j);
	if (!t)
		return NULL;
	size_t n = strlen(t);
	char *out = fx_strndup(t + 1, n >= 2 ? n - 2 : 0);
	cJSON_free(t);
	return out;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The rest of a key (its characters from depth d on, and the closing
 * quote) that is none of names[lo..hi) (sorted, sharing their first d
 * characters): the trie of the names, where any other character leaves
 * it (llama.cpp's _not_strings). Appends the expression to b. */
static bool not_names(struct sc *sc, char **names, int lo, int hi, size_t d, const char *ch,
		      struct gram_buf *b, int depth)
{
	bool ends_here = false, first = true;
	char others[256];
	size_t n_others = 0;
	if (depth > 200)
		return sc_fail(sc, "a property name is too long for the key grammar"), false;
	gram_buf_puts(b, "(");
	for (int i = lo; i < hi; i++)
		ends_here |= strlen(names[i]) == d;
	if (!ends_here) {
		gram_buf_puts(b, "\"\\\"\"");
		first = false;
	}
	for (int i = lo; i < hi;) {
		if (strlen(names[i]) == d) {
			i++;
			continue;
		}
		unsigned char c = (unsigned char)names[i][d];
		int j = i;
		while (j < hi && strlen(names[j]) > d && (unsigned char)names[j][d] == c)
			j++;
		if (n_others < sizeof(others))
			others[n_others++] = (char)c;
		gram_buf_puts(b, first ? "" : " | ");
		first = false;
		char lit[2] = { (char)c, 0 };
		gram_buf_literal(b, lit, 1);
		gram_buf_puts(b, " ");
		if (!not_names(sc, names, i, j, d + 1, ch, b, depth + 1))
			return false;
		i = j;
	}
	/* any other first character, then anything */
	bool has_bs = false;
	gram_buf_puts(b, first ? "([^\"\\\\\\x7F\\x00-\\x1F" : " | ([^\"\\\\\\x7F\\x00-\\x1F");
	for (size_t i = 0; i < n_others; i++) {
		unsigned char c = (unsigned char)others[i];
		if (c == '\\')
			has_bs = true;
		else if (c < 0x80)
			gram_buf_cp(b, c);
		/* a multi-byte first byte: its characters stay in the class (a
		 * byte is no code point); the name's branch above also takes it */
	}
	gram_buf_puts(b, "]");
	if (!has_bs)
		gram_buf_puts(b, " | [\\\\] ([\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4})");
	gram_buf_printf(b, ") %s* \"\\\"\")", ch);
	return true;
}

/* The object's rule body: "{" the properties in declared order, each
 * optional one skippable, then undeclared ones when allowed "}", with
 * state (i, c): property i next, c emitted so far (saturated once the
 * bounds cannot tell counts apart), for the commas and min/maxProperties. */
struct obj {
	struct prop *props;
	int n;
	const char *extra;   /* "key" : value rule for undeclared keys, or NULL */
	long minp, maxp, cap;
	int *state_rule;     /* [(n + 1) * (cap + 1)], -1: not made; -2: dead */
	const char *name;
	const char *sp;
};

static long sat(const struct obj *o, long c)
{
	return c > o->cap ? o->cap : c;
}

/* Can state (i, c) still end within the bounds? */
static bool feasible(const struct obj *o, int i, long c)
{
	long can_add = 0;
	for (int k = i; k < o->n; k++)
		can_add++;
	long must = 0;
	for (int k = i; k < o->n; k++)
		must += o->props[k].required;
	if (o->maxp >= 0 && c + must > o->maxp)
		return false;
	if (o->extra)
		return o->maxp < 0 || o->maxp >= o->minp;
	return c + can_add >= o->minp;
}

static int state(struct sc *sc, struct obj *o, int i, long c);

static bool state_body(struct sc *sc, struct obj *o, int i, long c, struct gram_buf *b)
{
	bool first = true;
	char sep[160];
	sep[0] = 0;
	if (c > 0)
		snprintf(sep, sizeof(sep), "\",\" %s ", o->sp);
	if (i == o->n) {
		if (o->extra && (o->maxp < 0 || c < o->maxp)) {
			int nx = state(sc, o, i, sat(o, c + 1));
			if (nx == -1)
				return false;
			if (nx >= 0) {
				gram_buf_printf(b, "%s%s %s", sep, o->extra, sc->rules[nx].name);
				first = false;
			}
		}
		if (c >= o->minp)
			gram_buf_puts(b, first ? "\"\"" : " | \"\"");
		return true;
	}
	if (o->maxp < 0 || c < o->maxp) { /* take property i */
		int nx = state(sc, o, i + 1, sat(o, c + 1));
		if (nx == -1)
			return false;
		if (nx >= 0) {
			gram_buf_printf(b, "%s%s %s", sep, o->props[i].rule, sc->rules[nx].name);
			first = false;
		}
	}
	if (!o->props[i].required) { /* skip it */
		int nx = state(sc, o, i + 1, c);
		if (nx == -1)
			return false;
		if (nx >= 0) {
			gram_buf_printf(b, "%s%s", first ? "" : " | ", sc->rules[nx].name);
			first = false;
		}
	}
	return true;
}

/* The rule of state (i, c); -2 when it cannot end; -1 on error. */
static int state(struct sc *sc, struct obj *o, int i, long c)
{
	int *slot = &o->state_rule[(size_t)i * (size_t)(o->cap + 1) + (size_t)c];
	if (*slot != -1)
		return *slot;
	if (!feasible(o, i, c))
		return *slot = -2;
	char local[200];
	snprintf(local, sizeof(local), "%s-s%d-%ld", o->name, i, c);
	int r = reserve(sc, local, false);
	if (r < 0)
		return -1;
	*slot = r;
	struct gram_buf b = { 0 };
	if (!state_body(sc, o, i, c, &b) || !fill(sc, r, &b))
		return -1;
	return r;
}

static bool visit_object(struct sc *sc, const cJSON *s, const char *name, struct gram_buf *b)
{
	const cJSON *props = get(s, "properties"), *req = get(s, "required");
	const cJSON *addl = cJSON_GetObjectItemCaseSensitive(s, "additionalProperties");
	struct obj o = { .name = name };
	char **names = NULL, local[200];
	bool ok = false;
	if (!(o.sp = prim(sc, "space")))
		return false;
	if (props && !cJSON_IsObject(props))
		return sc_fail(sc, "'properties' must be an object"), false;
	if (req && !cJSON_IsArray(req))
		return sc_fail(sc, "'required' must be an array of strings"), false;
	if (!count_of(sc, s, "minProperties", 0, &o.minp) || !count_of(sc, s, "maxProperties", -1, &o.maxp))
		return false;
	o.n = props ? cJSON_GetArraySize(props) : 0;
	o.props = fx_calloc((size_t)o.n + 1, sizeof(*o.props));
	names = fx_calloc((size_t)o.n + 1, sizeof(*names));
	if (!o.props || !names) {
		sc_oom(sc);
		goto out;
	}
	const cJSON *it;
	cJSON_ArrayForEach(it, req)
	{
		if (!cJSON_IsString(it)) {
			sc_fail(sc, "'required' must be an array of strings");
			goto out;
		}
		if (!props || !cJSON_GetObjectItemCaseSensitive(props, it->valuestring)) {
			sc_fail(sc, "required property '%s' is not in 'properties'", it->valuestring);
			goto out;
		}
	}
	int i = 0;
	size_t n0 = path_push(sc, "properties");
	cJSON_ArrayForEach(it, props)
	{
		o.props[i].key = it->string;
		const cJSON *r2;
		cJSON_ArrayForEach(r2, req) o.props[i].required |= !strcmp(r2->valuestring, it->string);
		snprintf(local, sizeof(local), "%s-%s", name, it->string);
		const char *v = visit_at(sc, it, it->string, local);
		if (!v) {
			path_pop(sc, n0);
			goto out;
		}
		char *kt = key_text(it->string);
		if (!kt) {
			path_pop(sc, n0);
			sc_oom(sc);
			goto out;
		}
		struct gram_buf kb = { 0 };
		char lit[600];
		snprintf(lit, sizeof(lit), "\"%s\"", kt);
		gram_buf_literal(&kb, lit, strlen(lit));
		gram_buf_printf(&kb, " %s \":\" %s %s", o.sp, o.sp, v);
		names[i] = kt;
		snprintf(local, sizeof(local), "%s-%s-kv", name, it->string);
		int kr = reserve(sc, local, false);
		if (kr < 0 || !fill(sc, kr, &kb)) {
			path_pop(sc, n0);
			goto out;
		}
		o.props[i].rule = sc->rules[kr].name;
		i++;
	}
	path_pop(sc, n0);
	/* undeclared keys: allowed by default only without `properties` */
	bool allow = addl ? !cJSON_IsFalse(addl) : !props;
	if (allow) {
		const char *val;
		if (addl && cJSON_IsObject(addl)) {
			snprintf(local, sizeof(local), "%s-additional", name);
			if (!(val = visit_at(sc, addl, "additionalProperties", local)))
				goto out;
		} else if (addl && !cJSON_IsBool(addl)) {
			sc_fail(sc, "'additionalProperties' must be a boolean or a schema");
			goto out;
		} else if (!(val = prim(sc, "value"))) {
			goto out;
		}
		const char *ch = prim(sc, "char");
		if (!ch)
			goto out;
		qsort(names, (size_t)o.n, sizeof(*names), cmp_str);
		struct gram_buf kb = { 0 };
		gram_buf_puts(&kb, "\"\\\"\" ");
		if (!not_names(sc, names, 0, o.n, 0, ch, &kb, 0)) {
			gram_buf_free(&kb);
			goto out;
		}
		gram_buf_printf(&kb, " %s \":\" %s %s", o.sp, o.sp, val);
		snprintf(local, sizeof(local), "%s-additional-kv", name);
		int kr = reserve(sc, local, false);
		if (kr < 0 || !fill(sc, kr, &kb))
			goto out;
		o.extra = sc->rules[kr].name;
	}
	if (o.maxp >= 0 && o.maxp < o.minp) {
		sc_fail(sc, "maxProperties is below minProperties: no object matches");
		goto out;
	}
	o.cap = o.maxp >= 0 ? o.maxp : (o.minp > 1 ? o.minp : 1);
	if (o.cap > o.n + 1 && !o.extra)
		o.cap = o.n + 1;
	o.state_rule = fx_malloc_array((size_t)(o.n + 1) * (size_t)(o.cap + 1), sizeof(int));
	if (!o.state_rule) {
		sc_oom(sc);
		goto out;
	}
	for (size_t k = 0; k < (size_t)(o.n + 1) * (size_t)(o.cap + 1); k++)
		o.state_rule[k] = -1;
	int start = state(sc, &o, 0, 0);
	if (start == -2) {
		sc_fail(sc, "no object meets minProperties / maxProperties with these properties");
		goto out;
	}
	if (start < 0)
		goto out;
	gram_buf_printf(b, "\"{\" %s %s \"}\" %s", o.sp, sc->rules[start].name, o.sp);
	ok = true;
out:
	for (int k = 0; names && k < o.n; k++)
		fx_free(names[k]);
	fx_free(names);
	fx_free(o.props);
	fx_free(o.state_rule);
	return ok;
}

/* ---- $ref, allOf, anyOf ---- */

/* The node a local reference "#/a/b" points to, or NULL. */
static const cJSON *resolve(const struct sc *sc, const char *ref)
{
	const cJSON *n = sc->root;
	if (ref[0] != '#')
		return NULL;
	for (const char *p = ref + 1; *p == '/' && n;) {
		char tok[256];
		size_t k = 0;
		for (p++; *p && *p != '/' && k + 1 < sizeof(tok); p++) {
			if (*p == '~' && (p[1] == '0' || p[1] == '1')) {
				tok[k++] = p[1] == '0' ? '~' : '/';
				p++;
			} else {
				tok[k++] = *p;
			}
		}
		tok[k] = 0;
		if (cJSON_IsArray(n)) {
			char *end;
			long idx = strtol(tok, &end, 10);
			n = *end || idx < 0 ? NULL : cJSON_GetArrayItem(n, (int)idx);
		} else {
			n = cJSON_GetObjectItemCaseSensitive(n, tok);
		}
	}
	return n;
}

static bool only_annotations(const cJSON *s, const char *except)
{
	const cJSON *k;
	cJSON_ArrayForEach(k, s) if (strcmp(k->string, except) && !IN(k->string, ANNOTATIONS)) return false;
	return true;
}

static bool visit_ref(struct sc *sc, const cJSON *s, struct gram_buf *b)
{
	const cJSON *ref = get(s, "$ref");
	if (!cJSON_IsString(ref))
		return sc_fail(sc, "'$ref' must be a string"), false;
	if (!only_annotations(s, "$ref"))
		return sc_fail(sc, "keywords beside '$ref' are not supported (wrap them in allOf)"), false;
	for (int i = 0; i < sc->n_refs; i++)
		if (!strcmp(sc->refs[i].ref, ref->valuestring)) {
			gram_buf_puts(b, sc->rules[sc->refs[i].rule].name);
			return true;
		}
	const cJSON *target = ref->valuestring[0] == '#' &&
				      (!ref->valuestring[1] || ref->valuestring[1] == '/') ?
				      resolve(sc, ref->valuestring) : NULL;
	if (!target)
		return sc_fail(sc, "$ref '%s' does not resolve (only local references '#/...' are supported)",
			       ref->valuestring), false;
	const char *last = strrchr(ref->valuestring, '/');
	int r = reserve(sc, last && last[1] ? last + 1 : "ref", false);
	if (r < 0)
		return false;
	if (sc->n_refs == sc->cap_refs) {
		int cap = sc->cap_refs ? sc->cap_refs * 2 : 16;
		struct sc_ref *p = fx_realloc_array(sc->refs, (size_t)cap, sizeof(*p));
		if (!p)
			return sc_oom(sc), false;
		sc->refs = p;
		sc->cap_refs = cap;
	}
	if (!(sc->refs[sc->n_refs].ref = fx_strndup(ref->valuestring, strlen(ref->valuestring))))
		return sc_oom(sc), false;
	sc->refs[sc->n_refs++].rule = r;
	char saved[sizeof(sc->path)];
	memcpy(saved, sc->path, sizeof(saved));
	snprintf(sc->path, sizeof(sc->path), "%s", ref->valuestring + 1);
	bool ok = visit_into(sc, target, r);
	memcpy(sc->path, saved, sizeof(saved));
	if (ok)
		gram_buf_puts(b, sc->rules[r].name);
	return ok;
}

/* allOf of object schemas (references resolved) merged into one: their
 * properties and required lists; the parent's own keywords kept. */
static bool visit_all_of(struct sc *sc, const cJSON *s, const char *name, struct gram_buf *b)
{
	const cJSON *all = get(s, "allOf"), *it;
	cJSON *m = cJSON_Duplicate(s, true), *props, *req;
	bool ok = false;
	if (!m)
		return sc_oom(sc), false;
	if (!cJSON_IsArray(all)) {
		sc_fail(sc, "'allOf' must be an array of schemas");
		goto out;
	}
	cJSON_DeleteItemFromObjectCaseSensitive(m, "allOf");
	if (cJSON_GetArraySize(all) == 1 && only_annotations(m, "")) {
		/* a single subschema (pydantic's wrapping of a $ref): itself */
		const char *r = visit_at(sc, all->child, "allOf/0", name);
		if (r)
			gram_buf_puts(b, r);
		cJSON_Delete(m);
		return r != NULL;
	}
	if (!(props = cJSON_GetObjectItemCaseSensitive(m, "properties")))
		props = cJSON_AddObjectToObject(m, "properties");
	if (!(req = cJSON_GetObjectItemCaseSensitive(m, "required")))
		req = cJSON_AddArrayToObject(m, "required");
	if (!props || !req) {
		sc_oom(sc);
		goto out;
	}
	int k = 0;
	cJSON_ArrayForEach(it, all)
	{
		const cJSON *sub = it;
		for (int hops = 0; cJSON_IsObject(sub) && get(sub, "$ref") && hops < 32; hops++)
			sub = resolve(sc, get(sub, "$ref")->valuestring);
		const cJSON *t = sub ? get(sub, "type") : NULL;
		if (!cJSON_IsObject(sub) || (t && (!cJSON_IsString(t) || strcmp(t->valuestring, "object"))) ||
		    get(sub, "anyOf") || get(sub, "oneOf") || get(sub, "allOf")) {
			sc_fail(sc, "allOf/%d: allOf is supported for object schemas only", k);
			goto out;
		}
		const cJSON *kv;
		cJSON_ArrayForEach(kv, sub)
		{
			if (!strcmp(kv->string, "properties")) {
				const cJSON *p;
				cJSON_ArrayForEach(p, kv) if (!cJSON_GetObjectItemCaseSensitive(props, p->string))
					cJSON_AddItemToObject(props, p->string, cJSON_Duplicate(p, true));
			} else if (!strcmp(kv->string, "required")) {
				const cJSON *p;
				cJSON_ArrayForEach(p, kv) cJSON_AddItemToArray(req, cJSON_Duplicate(p, true));
			} else if (!strcmp(kv->string, "type") || IN(kv->string, ANNOTATIONS)) {
				continue;
			} else if (!cJSON_GetObjectItemCaseSensitive(m, kv->string)) {
				cJSON_AddItemToObject(m, kv->string, cJSON_Duplicate(kv, true));
			}
		}
		k++;
	}
	if (!cJSON_GetObjectItemCaseSensitive(m, "type"))
		cJSON_AddStringToObject(m, "type", "object");
	ok = body_of(sc, m, name, b);
out:
	cJSON_Delete(m);
	return ok;
}

/* ---- dispatch ---- */

static bool visit_any_of(struct sc *sc, const cJSON *s, const char *key, const char *name,
			 struct gram_buf *b)
{
	const cJSON *alts = get(s, key), *it;
	char seg[48], local[200];
	int i = 0;
	if (!cJSON_IsArray(alts) || !cJSON_GetArraySize(alts))
		return sc_fail(sc, "'%s' must be a non-empty array of schemas", key), false;
	if (!only_annotations(s, key))
		return sc_fail(sc, "keywords beside '%s' are not supported (move them into each alternative)", key), false;
	gram_buf_puts(b, "(");
	cJSON_ArrayForEach(it, alts)
	{
		snprintf(seg, sizeof(seg), "%s/%d", key, i);
		snprintf(local, sizeof(local), "%s-%d", name, i);
		const char *r = visit_at(sc, it, seg, local);
		if (!r)
			return false;
		gram_buf_printf(b, "%s%s", i ? " | " : "", r);
		i++;
	}
	gram_buf_puts(b, ")");
	return true;
}

/* One of several types: each a rule of the schema with that type only. */
static bool visit_types(struct sc *sc, const cJSON *s, const cJSON *types, const char *name,
			struct gram_buf *b)
{
	const cJSON *it;
	char local[200];
	int i = 0;
	if (!cJSON_GetArraySize(types))
		return sc_fail(sc, "'type' is an empty list"), false;
	gram_buf_puts(b, "(");
	cJSON_ArrayForEach(it, types)
	{
		if (!cJSON_IsString(it))
			return sc_fail(sc, "'type' must be a string or a list of strings"), false;
		cJSON *one = cJSON_Duplicate(s, true);
		if (!one || !cJSON_ReplaceItemInObjectCaseSensitive(one, "type", cJSON_CreateString(it->valuestring))) {
			cJSON_Delete(one);
			return sc_oom(sc), false;
		}
		snprintf(local, sizeof(local), "%s-%s", name, it->valuestring);
		int r = visit(sc, one, local, false);
		cJSON_Delete(one);
		if (r < 0)
			return false;
		gram_buf_printf(b, "%s%s", i++ ? " | " : "", sc->rules[r].name);
	}
	gram_buf_puts(b, ")");
	return true;
}

static bool has_any(const cJSON *s, const char *const *keys, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (get(s, keys[i]))
			return true;
	return false;
}

/* The type a schema without "type" constrains, from its keywords. */
static const char *implied_type(const cJSON *s)
{
	static const char *const OBJ[] = { "properties", "additionalProperties", "required", "minProperties", "maxProperties" };
	static const char *const ARR[] = { "items", "prefixItems", "minItems", "maxItems", "additionalItems" };
	static const char *const STR[] = { "minLength", "maxLength", "pattern", "format" };
	static const char *const NUM[] = { "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum" };
	int kinds = has_any(s, OBJ, 5) + has_any(s, ARR, 5) + has_any(s, STR, 4) + has_any(s, NUM, 4);
	if (kinds > 1)
		return "";
	if (has_any(s, OBJ, 5))
		return "object";
	if (has_any(s, ARR, 5))
		return "array";
	if (has_any(s, STR, 4))
		return "string";
	if (has_any(s, NUM, 4))
		return "number";
	return NULL;
}

static bool body_of(struct sc *sc, const cJSON *s, const char *name, struct gram_buf *b)
{
	const cJSON *v;
	if (cJSON_IsBool(s)) {
		if (cJSON_IsFalse(s))
			return sc_fail(sc, "the schema false matches nothing"), false;
		const char *r = prim(sc, "value");
		gram_buf_puts(b, r ? r : "");
		return r != NULL;
	}
	if (!cJSON_IsObject(s))
		return sc_fail(sc, "a schema must be an object or a boolean"), false;
	if (!check_keys(sc, s))
		return false;
	if (get(s, "$ref"))
		return visit_ref(sc, s, b);
	if (get(s, "allOf"))
		return visit_all_of(sc, s, name, b);
	if (get(s, "anyOf"))
		return visit_any_of(sc, s, "anyOf", name, b);
	if (get(s, "oneOf"))
		return visit_any_of(sc, s, "oneOf", name, b);
	if ((v = cJSON_GetObjectItemCaseSensitive(s, "const")))
		return literal_value(sc, v, b);
	if ((v = get(s, "enum"))) {
		const cJSON *it;
		int i = 0;
		if (!cJSON_IsArray(v) || !cJSON_GetArraySize(v))
			return sc_fail(sc, "'enum' must be a non-empty array"), false;
		gram_buf_puts(b, "(");
		cJSON_ArrayForEach(it, v)
		{
			gram_buf_puts(b, i++ ? " | " : "");
			if (!literal_value(sc, it, b))
				return false;
		}
		gram_buf_puts(b, ")");
		return true;
	}
	const char *t = NULL;
	if ((v = get(s, "type"))) {
		if (cJSON_IsArray(v))
			return visit_types(sc, s, v, name, b);
		if (!cJSON_IsString(v))
			return sc_fail(sc, "'type' must be a string or a list of strings"), false;
		t = v->valuestring;
	} else if ((t = implied_type(s)) && !*t) {
		return sc_fail(sc, "keywords of several types without 'type': give the type (or a list of types)"), false;
	}
	if (!t) {
		const char *r = prim(sc, "value");
		gram_buf_puts(b, r ? r : "");
		return r != NULL;
	}
	if (!strcmp(t, "object"))
		return visit_object(sc, s, name, b);
	if (!strcmp(t, "array"))
		return visit_array(sc, s, name, b);
	if (!strcmp(t, "string"))
		return visit_string(sc, s, b);
	if (!strcmp(t, "integer"))
		return visit_integer(sc, s, b);
	if (!strcmp(t, "number"))
		return visit_number(sc, s, b);
	if (!strcmp(t, "boolean") || !strcmp(t, "null")) {
		const char *r = prim(sc, t);
		gram_buf_puts(b, r ? r : "");
		return r != NULL;
	}
	return sc_fail(sc, "unknown type '%s'", t), false;
}

/* The local name children of rule r are named after. */
static const char *local_of(const struct sc *sc, int r)
{
	const char *n = sc->rules[r].name;
	size_t k = strlen(sc->prefix);
	if (k && r == 0)
		return ""; /* the start rule: its children are "NAME-child", not "NAME-NAME-child" */
	return k && !strncmp(n, sc->prefix, k) ? n + k : n;
}

static bool visit_into(struct sc *sc, const cJSON *s, int r)
{
	struct gram_buf b = { 0 };
	char name[200];
	if (++sc->depth > SC_MAX_DEPTH) {
		sc->depth--;
		return sc_fail(sc, "schema nested deeper than %d", SC_MAX_DEPTH), false;
	}
	snprintf(name, sizeof(name), "%s", local_of(sc, r));
	bool ok = body_of(sc, s, name, &b);
	sc->depth--;
	if (!ok) {
		gram_buf_free(&b);
		return false;
	}
	return fill(sc, r, &b);
}

static int visit(struct sc *sc, const cJSON *s, const char *local, bool is_root)
{
	int r = reserve(sc, local, is_root);
	if (r < 0 || !visit_into(sc, s, r))
		return -1;
	return r;
}

int fx_json_schema_to_gbnf(const char *schema_json, const char *root_name, char **gbnf,
			   struct fx_err *err)
{
	struct sc sc = { .err = err };
	struct gram_buf out = { 0 };
	cJSON *root;
	int rc;
	if (!gbnf)
		return fx_fail(err, FX_E_INVALID, "json schema: gbnf is NULL");
	*gbnf = NULL;
	if (!schema_json)
		return fx_fail(err, FX_E_INVALID, "json schema: no schema");
	if (root_name) {
		bool ok = *root_name && strlen(root_name) < 64;
		for (const char *p = root_name; ok && *p; p++)
			ok = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '-';
		if (!ok)
			return fx_fail(err, FX_E_INVALID, "json schema: root name '%.64s' is not a GBNF rule name ([a-zA-Z0-9-]+)",
				       root_name);
	}
	if (!(root = cJSON_Parse(schema_json)))
		return fx_fail(err, FX_E_INVALID, "json schema: not valid JSON (near byte %ld)",
			       cJSON_GetErrorPtr() ? (long)(cJSON_GetErrorPtr() - schema_json) : 0L);
	sc.root = root;
	sc.root_name = root_name ? root_name : "root";
	if (root_name)
		snprintf(sc.prefix, sizeof(sc.prefix), "%s-", root_name);
	visit(&sc, root, sc.root_name, true);
	rc = sc.rc;
	for (int i = 0; !rc && i < sc.n_rules; i++)
		gram_buf_printf(&out, "%s ::= ", sc.rules[i].name), gram_buf_puts(&out, sc.rules[i].body),
			gram_buf_puts(&out, "\n");
	if (!rc && out.oom)
		rc = fx_fail(err, FX_E_NOMEM, "json schema: out of memory");
	if (!rc) {
		/* what the schema gave must run: a schema that refers to itself
		 * before any value (through $ref or anyOf) gives a left-recursive
		 * grammar, refused here rather than by the caller's parse */
		struct fx_grammar *g = NULL;
		struct fx_err e2 = { 0 };
		rc = fx_grammar_parse(out.p, out.n, sc.root_name, &g, &e2);
		fx_grammar_free(g);
		if (rc == FX_E_INVALID)
			rc = fx_fail(err, rc, "json schema: the schema refers to itself before any value "
				     "(a $ref or anyOf cycle): %s", e2.msg);
		else if (rc)
			rc = fx_fail(err, rc, "json schema: %s", e2.msg);
	}
	for (int i = 0; i < sc.n_rules; i++) {
		fx_free(sc.rules[i].name);
		fx_free(sc.rules[i].body);
	}
	for (int i = 0; i < sc.n_refs; i++)
		fx_free(sc.refs[i].ref);
	fx_free(sc.rules);
	fx_free(sc.refs);
	cJSON_Delete(root);
	if (rc) {
		gram_buf_free(&out);
		return rc;
	}
	*gbnf = out.p;
	return FX_OK;
}
