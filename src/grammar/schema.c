/* JSON Schema to GBNF (fx_json_schema_to_gbnf). One rule per schema
 * node, named from its path ("name-item", "Node"); every value rule ends
 * with the bounded `space` rule, as llama.cpp's json-schema-to-grammar
 * does (its layout is followed, not its code). A keyword that constrains
 * values and is not handled exactly is an error naming its JSON pointer,
 * never a looser grammar. $ref rules are memoised by pointer, so
 * recursive schemas give rules that reference each other. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"
#include "core/status.h"
#include "grammar/convert.h"

#define MAX_RULES 100000

struct rule {
	char *name, *body; /* body NULL while a $ref's rule is being built */
};

struct sc {
	const cJSON *doc;
	const char *root;   /* start rule's name */
	const char *prefix; /* "" or "root_name-" */
	struct rule *rules;
	int n_rules, cap_rules;
	char **ref_key;     /* [n_rules] the $ref a rule stands for, or NULL */
	struct fx_err *err;
	char path[1024];    /* JSON pointer of the node being converted */
	bool oom;
	int depth;
};

static const char *const ANNOTATIONS[] = {
	"title", "description", "default", "examples", "$schema", "$id", "$comment", "deprecated",
	"readOnly", "writeOnly", "$defs", "definitions", "$anchor", "$dynamicAnchor", "$vocabulary",
	"contentEncoding", "contentMediaType", "contentSchema", NULL
};
static const char *const UNSUPPORTED[] = {
	"multipleOf", "not", "if", "then", "else", "patternProperties", "propertyNames",
	"dependentRequired", "dependentSchemas", "dependencies", "contains", "minContains",
	"maxContains", "unevaluatedProperties", "unevaluatedItems", "$dynamicRef", "$recursiveRef",
	"additionalItems", NULL
};

static bool in_list(const char *const *l, const char *s)
{
	for (; *l; l++)
		if (!strcmp(*l, s))
			return true;
	return false;
}

static const char *fail(struct sc *c, const char *fmt, const char *a)
{
	char msg[512];
	snprintf(msg, sizeof msg, fmt, a);
	fx_fail(c->err, FX_E_INVALID, "json schema: %s: %s", c->path[0] ? c->path : "/", msg);
	return NULL;
}

static const char *nomem(struct sc *c)
{
	c->oom = true;
	fx_fail(c->err, FX_E_NOMEM, "json schema: out of memory");
	return NULL;
}

/* A malloc'ed copy (strdup is POSIX, not C11). */
static char *sdup(const char *s)
{
	size_t n = strlen(s) + 1;
	char *p = malloc(n);
	return p ? memcpy(p, s, n) : NULL;
}

/* ---- rules ------------------------------------------------------------ */

static const char *find_rule(struct sc *c, const char *name)
{
	for (int i = 0; i < c->n_rules; i++)
		if (!strcmp(c->rules[i].name, name))
			return c->rules[i].name;
	return NULL;
}

/* A new rule named prefix + hint (made unique), with body (copied; NULL:
 * set later). An existing rule with the same body is reused. */
static const char *add_rule(struct sc *c, const char *hint, const char *body)
{
	char name[256], base[200];
	size_t k = 0;
	if (body)
		for (int i = 0; i < c->n_rules; i++)
			if (c->rules[i].body && !strcmp(c->rules[i].body, body))
				return c->rules[i].name;
	for (const char *h = hint; *h && k < sizeof base - 2; h++) {
		char ch = *h;
		bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9');
		if (!ok && (!k || base[k - 1] == '-'))
			continue;
		base[k++] = ok ? ch : '-';
	}
	while (k && base[k - 1] == '-')
		k--;
	base[k] = 0;
	if (k && base[0] >= '0' && base[0] <= '9') { /* a name must not look like a number */
		memmove(base + 1, base, k + 1);
		base[0] = 'r';
		k++;
	}
	snprintf(name, sizeof name, "%s%s", c->prefix, k ? base : "r");
	for (int n = 2; find_rule(c, name) || !strcmp(name, c->root); n++)
		snprintf(name, sizeof name, "%s%s-%d", c->prefix, k ? base : "r", n);
	if (c->n_rules == MAX_RULES)
		return fail(c, "the grammar needs more than %s rules", "100000");
	if (c->n_rules == c->cap_rules) {
		int cap = c->cap_rules ? 2 * c->cap_rules : 64;
		struct rule *r = realloc(c->rules, (size_t)cap * sizeof *r);
		if (!r)
			return nomem(c);
		c->rules = r;
		char **rk = realloc(c->ref_key, (size_t)cap * sizeof *rk);
		if (!rk)
			return nomem(c);
		c->ref_key = rk;
		c->cap_rules = cap;
	}
	struct rule *r = &c->rules[c->n_rules];
	r->name = sdup(name);
	r->body = body ? sdup(body) : NULL;
	c->ref_key[c->n_rules] = NULL;
	if (!r->name || (body && !r->body)) {
		free(r->name);
		free(r->body);
		return nomem(c);
	}
	c->n_rules++;
	return r->name;
}

/* add_rule for a body built in b (consumed). */
static const char *add_sb(struct sc *c, const char *hint, struct conv_sb *b)
{
	const char *name = b->failed ? nomem(c) : add_rule(c, hint, b->p ? b->p : "\"\"");
	free(b->p);
	*b = (struct conv_sb){ 0 };
	return name;
}

/* The fixed rules, created on first use. Numbers have at most 16 integral
 * and 16 fraction digits (llama.cpp's integral-part / decimal-part): more
 * than an int64 or a double holds, and a small model cannot fill
 * max_tokens with one endless number. */
static const char *prim(struct sc *c, const char *what)
{
	static const struct {
		const char *name, *body;
	} P[] = {
		{ "space", "| \" \" | \"\\n\" [ \\t]{0,20}" },
		{ "hex", "[0-9a-fA-F]" },
		{ "char", "[^\"\\\\\\x00-\\x1F] | \"\\\\\" ([\"\\\\/bfnrt] | \"u\" ([0-9a-cA-Ce-fE-F] @hex{3} | [dD] [0-7] @hex{2} | [dD] [89abAB] @hex{2} \"\\\\u\" [dD] [c-fC-F] @hex{2}))" },
		{ "string", "\"\\\"\" @char* \"\\\"\" @space" },
		{ "number", "\"-\"? @int (\".\" [0-9]{1,16})? ([eE] [-+]? [0-9]{1,16})? @space" },
		{ "integer", "\"-\"? @int @space" },
		{ "int", "\"0\" | [1-9] [0-9]{0,15}" },
		{ "boolean", "(\"true\" | \"false\") @space" },
		{ "null", "\"null\" @space" },
		{ "value", "@object | @array | @string | @number | @boolean | @null" },
		{ "object", "\"{\" @space (@string \":\" @space @value (\",\" @space @string \":\" @space @value)*)? \"}\" @space" },
		{ "array", "\"[\" @space (@value (\",\" @space @value)*)? \"]\" @space" },
		{ "date", "@year \"-\" (\"0\" [13578] \"-\" @d31 | \"1\" [02] \"-\" @d31 | \"0\" [469] \"-\" @d30 | \"11-\" @d30 | \"02-\" (\"0\" [1-9] | \"1\" [0-9] | \"2\" [0-8])) | @leap \"-02-29\"" },
		{ "year", "\"000\" [1-9] | \"00\" [1-9] [0-9] | \"0\" [1-9] [0-9]{2} | [1-9] [0-9]{3}" },
		{ "leap", "[0-9]{2} (\"0\" [48] | [2468] [048] | [13579] [26]) | (\"0\" [48] | [2468] [048] | [13579] [26]) \"00\"" },
		{ "d31", "\"0\" [1-9] | [12] [0-9] | \"3\" [01]" },
		{ "d30", "\"0\" [1-9] | [12] [0-9] | \"30\"" },
		{ "time", "([01] [0-9] | \"2\" [0-3]) \":\" [0-5] [0-9] \":\" [0-5] [0-9] (\".\" [0-9]+)? ([zZ] | [-+] ([01] [0-9] | \"2\" [0-3]) \":\" [0-5] [0-9])" },
		{ "date-time", "@date [tT] @time" },
		{ "uuid", "@hex{8} \"-\" @hex{4} \"-\" @hex{4} \"-\" @hex{4} \"-\" @hex{12}" },
		{ "email", "@atext+ (\".\" @atext+)* \"\\x40\" @label (\".\" @label)+" },
		{ "kchar", "[^\"\\\\\\x00-\\x1F] | @kesc" },
		{ "kesc", "\"\\\\\" ([\"\\\\bfnrt] | \"u00\" (\"0\" [0-7bef] | \"1\" [0-9a-f]))" },
		{ "atext", "[a-zA-Z0-9!#$%&'*+/=?^_`{|}~\\x2D]" },
		{ "label", "[a-zA-Z0-9] ([a-zA-Z0-9\\x2D]* [a-zA-Z0-9])?" },
	};
	char full[256];
	snprintf(full, sizeof full, "%s%s", c->prefix, what);
	const char *have = find_rule(c, full);
	if (have)
		return have;
	for (size_t i = 0; i < sizeof P / sizeof *P; i++) {
		if (strcmp(P[i].name, what))
			continue;
		/* reserve the name first: rules refer to each other (value) */
		if (!add_rule(c, what, NULL))
			return NULL;
		int me = c->n_rules - 1;
		struct conv_sb b = { 0 };
		for (const char *p = P[i].body; *p; p++) {
			if (*p != '@') {
				conv_sb_put(&b, p, 1);
				continue;
			}
			size_t n = strspn(p + 1, "abcdefghijklmnopqrstuvwxyz0123456789-");
			char sub[64];
			snprintf(sub, sizeof sub, "%.*s", (int)n, p + 1);
			const char *s = prim(c, sub);
			if (!s) {
				free(b.p);
				return NULL;
			}
			conv_sb_puts(&b, s);
			p += n;
		}
		if (b.failed)
			return nomem(c);
		c->rules[me].body = b.p;
		return c->rules[me].name;
	}
	return fail(c, "internal: no rule %s", what);
}

/* ---- literals ---------------------------------------------------------- */

static void hex_ci(struct conv_sb *b, unsigned v, int digits)
{
	for (int k = digits - 1; k >= 0; k--) {
		unsigned d = (v >> (4 * k)) & 15;
		if (d < 10)
			conv_sb_printf(b, " \"%u\"", d);
		else
			conv_sb_printf(b, " [%c%c]", 'a' + d - 10, 'A' + d - 10);
	}
}

/* s as a JSON string literal: ASCII as json.dumps writes it, other
 * characters raw or as \u escapes (either hex case). */
static void json_str_lit(struct conv_sb *b, const char *s)
{
	const unsigned char *p = (const unsigned char *)s;
	char run[64]; /* plain ASCII goes out as one literal: llguidance lexes it as one token */
	size_t nr = 0;
	run[nr++] = '"';
	conv_sb_puts(b, "(");
	while (*p) {
		unsigned c = *p;
		static const char sh[] = "\b\f\n\r\t", nm[] = "bfnrt";
		const char *q = c && c < 0x20 ? strchr(sh, (int)c) : NULL;
		if (c >= 0x20 && c < 0x80 && c != '"' && c != '\\' && c != '/') {
			run[nr++] = (char)c;
			if (nr == sizeof run) {
				conv_sb_lit(b, run, nr);
				conv_sb_puts(b, " ");
				nr = 0;
			}
			p++;
			continue;
		}
		if (nr) {
			conv_sb_lit(b, run, nr);
			conv_sb_puts(b, " ");
			nr = 0;
		}
		if (c < 0x80) {
			if (c == '"' || c == '\\')
				conv_sb_printf(b, "\"\\\\\\%c\" ", c);
			else if (c == '/')
				conv_sb_puts(b, "(\"/\" | \"\\\\/\") ");
			else if (q)
				conv_sb_printf(b, "\"\\\\%c\" ", nm[q - sh]);
			else {
				conv_sb_puts(b, "\"\\\\u\"");
				hex_ci(b, c, 4);
				conv_sb_puts(b, " ");
			}
			p++;
			continue;
		}
		int n = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : 2;
		uint32_t cp = c & (0x3fu >> (n - 1));
		for (int k = 1; k < n && p[k]; k++)
			cp = (cp << 6) | (p[k] & 0x3f);
		conv_sb_puts(b, "(");
		conv_sb_lit(b, (const char *)p, (size_t)n);
		conv_sb_puts(b, " | \"\\\\u\"");
		if (cp < 0x10000) {
			hex_ci(b, cp, 4);
		} else {
			hex_ci(b, 0xD800 + ((cp - 0x10000) >> 10), 4);
			conv_sb_puts(b, " \"\\\\u\"");
			hex_ci(b, 0xDC00 + ((cp - 0x10000) & 0x3ff), 4);
		}
		conv_sb_puts(b, ") ");
		for (int k = 0; k < n && *p; k++)
			p++;
	}
	run[nr++] = '"';
	conv_sb_lit(b, run, nr);
	conv_sb_puts(b, ")");
}

/* A JSON value (enum / const member) as a literal; every token may be
 * followed by space. */
static void value_lit(struct sc *c, struct conv_sb *b, const cJSON *v)
{
	const char *sp = prim(c, "space");
	if (!sp)
		return;
	if (cJSON_IsNull(v)) {
		conv_sb_printf(b, "\"null\" %s", sp);
	} else if (cJSON_IsBool(v)) {
		conv_sb_printf(b, "\"%s\" %s", cJSON_IsTrue(v) ? "true" : "false", sp);
	} else if (cJSON_IsNumber(v)) {
		double d = v->valuedouble;
		if (d == floor(d) && fabs(d) < 1e15) {
			conv_sb_printf(b, "(\"%.0f\" | \"%.0f.0\") %s", d, d, sp);
		} else {
			char num[64];
			for (int prec = 15; prec <= 17; prec++) {
				snprintf(num, sizeof num, "%.*g", prec, d);
				if (strtod(num, NULL) == d)
					break;
			}
			conv_sb_printf(b, "\"%s\" %s", num, sp);
		}
	} else if (cJSON_IsString(v)) {
		json_str_lit(b, v->valuestring);
		conv_sb_printf(b, " %s", sp);
	} else if (cJSON_IsArray(v)) {
		conv_sb_printf(b, "\"[\" %s", sp);
		for (const cJSON *e = v->child; e; e = e->next) {
			conv_sb_puts(b, e == v->child ? " " : " \",\" ");
			conv_sb_puts(b, e == v->child ? "" : sp);
			conv_sb_puts(b, " (");
			value_lit(c, b, e);
			conv_sb_puts(b, ")");
		}
		conv_sb_printf(b, " \"]\" %s", sp);
	} else {
		conv_sb_printf(b, "\"{\" %s", sp);
		for (const cJSON *e = v->child; e; e = e->next) {
			if (e != v->child)
				conv_sb_printf(b, " \",\" %s", sp);
			conv_sb_puts(b, " ");
			json_str_lit(b, e->string);
			conv_sb_printf(b, " %s \":\" %s (", sp, sp);
			value_lit(c, b, e);
			conv_sb_puts(b, ")");
		}
		conv_sb_printf(b, " \"}\" %s", sp);
	}
}

/* ---- integer ranges (exact, as llama.cpp's _generate_min_max_int) ----- */

/* Same-length decimal strings in [lo, hi] (n digits each). */
static void digits_eq(struct conv_sb *b, const char *lo, const char *hi, int n)
{
	if (!n)
		return;
	if (lo[0] == hi[0]) {
		conv_sb_printf(b, " \"%c\"", lo[0]);
		digits_eq(b, lo + 1, hi + 1, n - 1);
		return;
	}
	bool lz = true, h9 = true;
	for (int k = 1; k < n; k++) {
		lz &= lo[k] == '0';
		h9 &= hi[k] == '9';
	}
	char nines[24], zeros[24];
	bool first = true;
	memset(nines, '9', sizeof nines);
	memset(zeros, '0', sizeof zeros);
	conv_sb_puts(b, " (");
	if (!lz) {
		conv_sb_printf(b, "\"%c\"", lo[0]);
		digits_eq(b, lo + 1, nines, n - 1);
		first = false;
	}
	char s = lz ? lo[0] : (char)(lo[0] + 1), e = h9 ? hi[0] : (char)(hi[0] - 1);
	if (s <= e) {
		conv_sb_printf(b, "%s[%c-%c]", first ? "" : " | ", s, e);
		if (n > 1)
			conv_sb_printf(b, " [0-9]{%d}", n - 1);
		first = false;
	}
	if (!h9) {
		conv_sb_printf(b, "%s\"%c\"", first ? "" : " | ", hi[0]);
		digits_eq(b, zeros, hi + 1, n - 1);
	}
	conv_sb_puts(b, ")");
}

/* Non-negative integers in [a, b] (b_inf: [a, inf)), no leading zeros. */
static void nonneg(struct conv_sb *b, uint64_t a, uint64_t hi, bool inf)
{
	char sa[24], sb[24];
	int la = snprintf(sa, sizeof sa, "%llu", (unsigned long long)a);
	int lb = inf ? la : snprintf(sb, sizeof sb, "%llu", (unsigned long long)hi);
	uint64_t p = 1;
	for (int k = 1; k < la; k++)
		p *= 10;
	conv_sb_puts(b, "(");
	for (int L = la; L <= lb; L++, p *= 10) {
		char lo_s[24], hi_s[24];
		snprintf(lo_s, sizeof lo_s, "%llu", (unsigned long long)(L == la ? a : p));
		if (!inf && L == lb)
			snprintf(hi_s, sizeof hi_s, "%s", sb);
		else
			snprintf(hi_s, sizeof hi_s, "%llu", (unsigned long long)(p * 10 - 1));
		conv_sb_puts(b, L == la ? "" : " |");
		digits_eq(b, lo_s, hi_s, L);
	}
	if (inf) /* longer ones up to the primitives' 16 digits */
		conv_sb_printf(b, " | [1-9] [0-9]{%d,%d}", la, la > 15 ? la : 15);
	conv_sb_puts(b, ")");
}

static void int_range(struct conv_sb *b, int64_t lo, bool has_lo, int64_t hi, bool has_hi)
{
	bool pos = !has_hi || hi >= 0, neg = !has_lo || lo < 0;
	conv_sb_puts(b, "(");
	if (pos)
		nonneg(b, has_lo && lo > 0 ? (uint64_t)lo : 0, has_hi ? (uint64_t)hi : 0, !has_hi);
	if (neg) {
		conv_sb_puts(b, pos ? " | \"-\" " : "\"-\" ");
		nonneg(b, has_hi && hi < 0 ? (uint64_t)-hi : 1, has_lo ? (uint64_t)-lo : 0, !has_lo);
	}
	conv_sb_puts(b, ")");
}

/* ---- keyword access ---------------------------------------------------- */

static const char *visit(struct sc *c, const cJSON *s, const char *hint);

/* A non-negative integer keyword: 1 present, 0 absent, -1 error. */
static int get_count(struct sc *c, const cJSON *s, const char *key, long long *v)
{
	const cJSON *k = cJSON_GetObjectItemCaseSensitive(s, key);
	if (!k)
		return 0;
	if (!cJSON_IsNumber(k) || k->valuedouble < 0 || k->valuedouble != floor(k->valuedouble) ||
	    k->valuedouble > 1e15) {
		fail(c, "'%s' must be a non-negative integer", key);
		return -1;
	}
	*v = (long long)k->valuedouble;
	return 1;
}

static int get_num(struct sc *c, const cJSON *s, const char *key, double *v)
{
	const cJSON *k = cJSON_GetObjectItemCaseSensitive(s, key);
	if (!k || cJSON_IsBool(k))
		return 0;
	if (!cJSON_IsNumber(k)) {
		fail(c, "'%s' must be a number", key);
		return -1;
	}
	*v = k->valuedouble;
	return 1;
}

enum { T_NULL = 1, T_BOOL = 2, T_OBJ = 4, T_ARR = 8, T_STR = 16, T_INT = 32, T_FRAC = 64, T_ALL = 127 };

static int type_bit(const char *t)
{
	static const char *const N[] = { "null", "boolean", "object", "array", "string", "integer", "number" };
	for (int i = 0; i < 7; i++)
		if (!strcmp(t, N[i]))
			return i == 6 ? T_INT | T_FRAC : 1 << i;
	return 0;
}

/* The "type" keyword as a mask (T_ALL when absent); -1 on error. */
static int get_types(struct sc *c, const cJSON *s)
{
	const cJSON *t = cJSON_GetObjectItemCaseSensitive(s, "type");
	int m = 0;
	if (!t)
		return T_ALL;
	if (cJSON_IsString(t)) {
		if (!(m = type_bit(t->valuestring)))
			return fail(c, "unknown type '%s'", t->valuestring), -1;
		return m;
	}
	if (!cJSON_IsArray(t) || !t->child)
		return fail(c, "'%s' must be a string or a non-empty array of strings", "type"), -1;
	for (const cJSON *e = t->child; e; e = e->next) {
		int b = cJSON_IsString(e) ? type_bit(e->valuestring) : 0;
		if (!b)
			return fail(c, "'%s' lists an unknown type", "type"), -1;
		m |= b;
	}
	return m;
}

/* Path push/pop around a child visit. */
static size_t push(struct sc *c, const char *seg, const char *key)
{
	size_t n = strlen(c->path);
	snprintf(c->path + n, sizeof c->path - n, "/%s%s%s", seg, key ? "/" : "", key ? key : "");
	return n;
}

static const char *visit_at(struct sc *c, const cJSON *s, const char *hint, const char *seg,
			    const char *key)
{
	size_t n = push(c, seg, key);
	const char *r = visit(c, s, hint);
	if (r)
		c->path[n] = 0;
	return r;
}


/* ---- keys of additional properties ---------------------------------------- */

/* Code point i of key (UTF-8), or -1 past its end; *at advances. */
static long key_cp(const char *key, size_t *at)
{
	const unsigned char *p = (const unsigned char *)key + *at;
	if (!*p)
		return -1;
	int n = p[0] < 0x80 ? 1 : p[0] >= 0xf0 ? 4 : p[0] >= 0xe0 ? 3 : p[0] >= 0xc0 ? 2 : 1;
	long c = n == 1 ? p[0] : p[0] & (0x3f >> (n - 1));
	for (int k = 1; k < n; k++) {
		if ((p[k] & 0xc0) != 0x80) {
			n = 1;
			c = p[0];
			break;
		}
		c = (c << 6) | (p[k] & 0x3f);
	}
	*at += (size_t)n;
	return c;
}

static bool escapable(long cp)
{
	return cp < 0x20 || cp == '"' || cp == '\\';
}

/* The one spelling an additional key may use for cp (kchar's). */
static void key_unit(struct conv_sb *b, long cp)
{
	static const char sh[] = "\b\f\n\r\t", nm[] = "bfnrt";
	const char *q = cp && cp < 0x20 ? strchr(sh, (int)cp) : NULL;
	if (cp == '"' || cp == '\\')
		conv_sb_printf(b, "\"\\\\\\%c\"", (int)cp);
	else if (q)
		conv_sb_printf(b, "\"\\\\%c\"", nm[q - sh]);
	else if (cp < 0x20)
		conv_sb_printf(b, "\"\\\\u00%02lx\"", cp);
	else {
		char u[8];
		size_t n = 0;
		unsigned long c = (unsigned long)cp;
		if (c < 0x80)
			u[n++] = (char)c;
		else if (c < 0x800) {
			u[n++] = (char)(0xc0 | (c >> 6));
			u[n++] = (char)(0x80 | (c & 0x3f));
		} else if (c < 0x10000) {
			u[n++] = (char)(0xe0 | (c >> 12));
			u[n++] = (char)(0x80 | ((c >> 6) & 0x3f));
			u[n++] = (char)(0x80 | (c & 0x3f));
		} else {
			u[n++] = (char)(0xf0 | (c >> 18));
			u[n++] = (char)(0x80 | ((c >> 12) & 0x3f));
			u[n++] = (char)(0x80 | ((c >> 6) & 0x3f));
			u[n++] = (char)(0x80 | (c & 0x3f));
		}
		conv_sb_lit(b, u, n);
	}
}

/* kchar minus the code points ex[0..n). */
static void kchar_except(struct sc *c, struct conv_sb *b, const long *ex, int n)
{
	bool esc = false;
	conv_sb_puts(b, "([^\"\\\\\\x00-\\x1F");
	for (int i = 0; i < n; i++) {
		if (escapable(ex[i])) {
			esc = true;
			continue;
		}
		if (ex[i] < 0x80 && strchr("]-^[", (int)ex[i])) {
			conv_sb_printf(b, "\\x%02lX", ex[i]);
			continue;
		}
		struct conv_sb t = { 0 };
		key_unit(&t, ex[i]); /* "X": take what is inside the quotes */
		if (t.failed || t.n < 2)
			b->failed = true;
		else
			conv_sb_put(b, t.p + 1, t.n - 2);
		free(t.p);
	}
	conv_sb_puts(b, "]");
	if (!esc) {
		const char *k = prim(c, "kesc");
		conv_sb_printf(b, " | %s)", k ? k : "");
		return;
	}
	for (long cp = 0; cp < 0x80; cp++) {
		bool skip = !escapable(cp);
		for (int i = 0; i < n && !skip; i++)
			skip = ex[i] == cp;
		if (skip)
			continue;
		conv_sb_puts(b, " | ");
		key_unit(b, cp);
	}
	conv_sb_puts(b, ")");
}

/* Keys idx[0..n) share their first d code points (ending at byte off[i]):
 * the rest of a key string (to its closing quote) that is none of them. */
static void not_keys(struct sc *c, struct conv_sb *b, const char *const *keys, int *idx,
		     size_t *off, int n)
{
	long *child = malloc((size_t)n * sizeof *child);
	int nc = 0;
	bool terminal = false;
	const char *kc = prim(c, "kchar");
	if (!child || !kc) {
		free(child);
		b->failed = true;
		return;
	}
	for (int i = 0; i < n; i++) {
		size_t at = off[idx[i]];
		long cp = key_cp(keys[idx[i]], &at);
		if (cp < 0) {
			terminal = true;
			continue;
		}
		bool seen = false;
		for (int j = 0; j < nc; j++)
			seen |= child[j] == cp;
		if (!seen)
			child[nc++] = cp;
	}
	conv_sb_puts(b, "(");
	for (int j = 0; j < nc; j++) {
		int *sub = malloc((size_t)n * sizeof *sub), ns = 0;
		if (!sub) {
			b->failed = true;
			break;
		}
		for (int i = 0; i < n; i++) {
			size_t at = off[idx[i]];
			if (key_cp(keys[idx[i]], &at) == child[j]) {
				sub[ns++] = idx[i];
				off[idx[i]] = at;
			}
		}
		key_unit(b, child[j]);
		conv_sb_puts(b, " ");
		not_keys(c, b, keys, sub, off, ns);
		conv_sb_puts(b, " | ");
		free(sub);
	}
	kchar_except(c, b, child, nc);
	conv_sb_printf(b, " %s* \"\\\"\"", kc);
	if (!terminal)
		conv_sb_puts(b, " | \"\\\"\"");
	conv_sb_puts(b, ")");
	free(child);
}

/* The rule for an additional property's key: a string that is none of
 * the declared names, in kchar's one spelling per character (so that no
 * other spelling of a declared name gets through). */
static const char *extra_key(struct sc *c, const char *const *keys, int n, const char *hint)
{
	struct conv_sb b = { 0 };
	int *idx = malloc(((size_t)n + 1) * sizeof *idx);
	size_t *off = calloc((size_t)n + 1, sizeof *off);
	char h[256];
	if (!idx || !off) {
		free(idx);
		free(off);
		return nomem(c);
	}
	for (int i = 0; i < n; i++)
		idx[i] = i;
	conv_sb_puts(&b, "\"\\\"\" ");
	not_keys(c, &b, keys, idx, off, n);
	free(idx);
	free(off);
	snprintf(h, sizeof h, "%.200s-key", hint);
	return add_sb(c, h, &b);
}

/* ---- objects ------------------------------------------------------------ */

struct obj {
	int n;
	const char **key, **val; /* [n] property names and value rules */
	bool *req;
	const char *add;         /* additional properties' value rule, or NULL */
	long long min, max;      /* minProperties, maxProperties (-1: none) */
	int cap;                 /* counts tracked: 0..cap */
	const char **rule;       /* [(n + 1) * (cap + 1)] R(k, c), NULL until made */
	signed char *alive;      /* same shape: -1 unknown, 0 dead, 1 alive */
	const char *hint;
};

static int sat(const struct obj *o, long long c)
{
	return (int)(c > o->cap ? o->cap : c);
}

/* Can properties k.. be completed after c of them? */
static bool alive(struct obj *o, int k, int c)
{
	signed char *a = &o->alive[k * (o->cap + 1) + c];
	if (*a >= 0)
		return *a;
	bool ok;
	bool room = o->max < 0 || c + 1 <= o->max;
	if (k == o->n)
		ok = o->add ? (o->max < 0 || (c <= o->max && o->min <= o->max)) : c >= o->min;
	else if (o->req[k])
		ok = room && alive(o, k + 1, sat(o, c + 1));
	else
		ok = (room && alive(o, k + 1, sat(o, c + 1))) || alive(o, k + 1, c);
	return (*a = (signed char)ok);
}

/* The rule for R(k, c): the rest of the members after c of them. */
static const char *obj_rule(struct sc *c, struct obj *o, int k, int n)
{
	const char **slot = &o->rule[k * (o->cap + 1) + n];
	const char *sp = prim(c, "space"), *sep = n ? "\",\" " : "";
	struct conv_sb b = { 0 };
	char hint[256];
	if (*slot)
		return *slot;
	if (!sp)
		return NULL;
	if (k == o->n) {
		long long lo = o->min > n ? o->min - n : 0, hi = o->max < 0 ? -1 : o->max - n;
		const char *ks = o->add ? extra_key(c, o->key, o->n, o->hint) : "";
		if (!ks)
			return NULL;
		if (!o->add || hi == 0) {
			conv_sb_puts(&b, "\"\"");
		} else if (n == 0) {
			conv_sb_printf(&b, "(%s \":\" %s %s (\",\" %s %s \":\" %s %s)", ks, sp, o->add, sp, ks, sp, o->add);
			if (hi < 0)
				conv_sb_printf(&b, "{%lld,}", lo ? lo - 1 : 0);
			else
				conv_sb_printf(&b, "{%lld,%lld}", lo ? lo - 1 : 0, hi - 1);
			conv_sb_puts(&b, lo ? ")" : ")?");
		} else {
			conv_sb_printf(&b, "(\",\" %s %s \":\" %s %s)", sp, ks, sp, o->add);
			if (hi < 0)
				conv_sb_printf(&b, "{%lld,}", lo);
			else
				conv_sb_printf(&b, "{%lld,%lld}", lo, hi);
		}
	} else {
		bool room = o->max < 0 || n + 1 <= o->max, first = true;
		int n1 = sat(o, n + 1);
		if (room && alive(o, k + 1, n1)) {
			const char *next = obj_rule(c, o, k + 1, n1);
			if (!next)
				return NULL;
			conv_sb_printf(&b, "%s%s%s", sep, n ? sp : "", n ? " " : "");
			json_str_lit(&b, o->key[k]);
			conv_sb_printf(&b, " %s \":\" %s %s %s", sp, sp, o->val[k], next);
			first = false;
		}
		if (!o->req[k] && alive(o, k + 1, n)) {
			const char *next = obj_rule(c, o, k + 1, n);
			if (!next) {
				free(b.p);
				return NULL;
			}
			conv_sb_printf(&b, "%s%s", first ? "" : " | ", next);
		}
	}
	snprintf(hint, sizeof hint, "%.200s-obj", o->hint);
	return *slot = add_sb(c, hint, &b);
}

static const char *gen_object(struct sc *c, const cJSON *s, const char *hint)
{
	const cJSON *props = cJSON_GetObjectItemCaseSensitive(s, "properties");
	const cJSON *req = cJSON_GetObjectItemCaseSensitive(s, "required");
	const cJSON *add = cJSON_GetObjectItemCaseSensitive(s, "additionalProperties");
	struct obj o = { .hint = hint, .min = 0, .max = -1 };
	const char *res = NULL;
	int np = 0;
	if (props && !cJSON_IsObject(props))
		return fail(c, "'%s' must be an object", "properties");
	if (req && !cJSON_IsArray(req))
		return fail(c, "'%s' must be an array of strings", "required");
	for (const cJSON *e = req ? req->child : NULL; e; e = e->next)
		if (!cJSON_IsString(e))
			return fail(c, "'%s' must be an array of strings", "required");
	if (add && !cJSON_IsBool(add) && !cJSON_IsObject(add))
		return fail(c, "'%s' must be a boolean or a schema", "additionalProperties");
	if (get_count(c, s, "minProperties", &o.min) < 0 || get_count(c, s, "maxProperties", &o.max) < 0)
		return NULL;
	for (const cJSON *p = props ? props->child : NULL; p; p = p->next)
		np++;
	o.key = calloc((size_t)np + 1, sizeof *o.key);
	o.val = calloc((size_t)np + 1, sizeof *o.val);
	o.req = calloc((size_t)np + 1, sizeof *o.req);
	if (!o.key || !o.val || !o.req) {
		nomem(c);
		goto out;
	}
	for (const cJSON *p = props ? props->child : NULL; p; p = p->next) {
		bool r = false;
		for (const cJSON *e = req ? req->child : NULL; e; e = e->next)
			r |= !strcmp(e->valuestring, p->string);
		if (cJSON_IsFalse(p)) {
			if (r) {
				fail(c, "required property '%s' is forbidden (schema false)", p->string);
				goto out;
			}
			continue;
		}
		char h[256];
		snprintf(h, sizeof h, "%.200s%s%s", hint, *hint ? "-" : "", p->string);
		if (!(o.val[o.n] = visit_at(c, p, h, "properties", p->string)))
			goto out;
		o.key[o.n] = p->string;
		o.req[o.n++] = r;
	}
	for (const cJSON *e = req ? req->child : NULL; e; e = e->next) {
		bool found = false;
		for (int k = 0; k < o.n; k++)
			found |= !strcmp(o.key[k], e->valuestring);
		if (!found && !(add && cJSON_IsFalse(add)) && !found) {
			/* required but not in properties: needs a fixed name among
			 * the additional ones, which this layout cannot place */
			fail(c, "required property '%s' is not in 'properties' (not supported)", e->valuestring);
			goto out;
		}
		if (!found) {
			fail(c, "required property '%s' is not allowed (additionalProperties false)", e->valuestring);
			goto out;
		}
	}
	if (!add || cJSON_IsTrue(add))
		o.add = prim(c, "value");
	else if (cJSON_IsObject(add)) {
		char h[256];
		snprintf(h, sizeof h, "%.200s%sadditional", hint, *hint ? "-" : "");
		size_t pl = push(c, "additionalProperties", NULL);
		o.add = visit(c, add, h);
		if (o.add)
			c->path[pl] = 0;
	}
	if ((add && !cJSON_IsFalse(add) && !o.add) || (!add && !o.add))
		goto out;
	o.cap = o.max >= 0 ? (int)(o.max > 10000 ? 10000 : o.max) : (int)(o.min > 1 ? (o.min > 10000 ? 10000 : o.min) : 1);
	if (o.max > 10000 || o.min > 10000) {
		fail(c, "'%s' over 10000 is not supported", o.max > 10000 ? "maxProperties" : "minProperties");
		goto out;
	}
	o.rule = calloc((size_t)(o.n + 1) * (size_t)(o.cap + 1), sizeof *o.rule);
	o.alive = malloc((size_t)(o.n + 1) * (size_t)(o.cap + 1));
	if (!o.rule || !o.alive) {
		nomem(c);
		goto out;
	}
	memset(o.alive, -1, (size_t)(o.n + 1) * (size_t)(o.cap + 1));
	if (!alive(&o, 0, 0)) {
		fail(c, "no object satisfies these %s", "properties, required and min/maxProperties");
		goto out;
	}
	const char *sp = prim(c, "space"), *body = obj_rule(c, &o, 0, 0);
	if (sp && body) {
		struct conv_sb b = { 0 };
		conv_sb_printf(&b, "\"{\" %s %s \"}\" %s", sp, body, sp);
		res = add_sb(c, hint, &b);
	}
out:
	free(o.key);
	free(o.val);
	free(o.req);
	free(o.rule);
	free(o.alive);
	return res;
}

/* ---- arrays ------------------------------------------------------------- */

static const char *gen_array(struct sc *c, const cJSON *s, const char *hint)
{
	const cJSON *pre = cJSON_GetObjectItemCaseSensitive(s, "prefixItems");
	const cJSON *items = cJSON_GetObjectItemCaseSensitive(s, "items");
	long long mn = 0, mx = -1;
	const char *rest, *sp = prim(c, "space"), *elem[64];
	int m = 0;
	char h[256];
	if (get_count(c, s, "minItems", &mn) < 0 || get_count(c, s, "maxItems", &mx) < 0 || !sp)
		return NULL;
	if (cJSON_IsArray(items) && !pre) /* draft 4-2019: items as a tuple */
		return fail(c, "'items' as an array (use prefixItems) is %s", "not supported");
	if (pre && !cJSON_IsArray(pre))
		return fail(c, "'%s' must be an array of schemas", "prefixItems");
	if (items && !cJSON_IsBool(items) && !cJSON_IsObject(items))
		return fail(c, "'%s' must be a schema", "items");
	if (mn > 10000 || mx > 10000)
		return fail(c, "'%s' over 10000 is not supported", mn > 10000 ? "minItems" : "maxItems");
	for (const cJSON *e = pre ? pre->child : NULL; e; e = e->next) {
		char idx[16];
		if (m == 64)
			return fail(c, "more than %s prefixItems", "64");
		snprintf(idx, sizeof idx, "%d", m);
		snprintf(h, sizeof h, "%.200s%s%d", hint, *hint ? "-" : "", m);
		if (!(elem[m++] = visit_at(c, e, h, "prefixItems", idx)))
			return NULL;
	}
	if (items && cJSON_IsFalse(items)) {
		rest = NULL;
	} else if (items && !cJSON_IsTrue(items)) {
		snprintf(h, sizeof h, "%.200s%sitem", hint, *hint ? "-" : "");
		if (!(rest = visit_at(c, items, h, "items", NULL)))
			return NULL;
	} else if (!(rest = prim(c, "value"))) {
		return NULL;
	}
	if (!rest && mx < 0)
		mx = m;
	if (mx >= 0 && !rest && mx > m)
		mx = m;
	if (mx >= 0 && mn > mx)
		return fail(c, "no array satisfies these %s", "items, minItems and maxItems");
	struct conv_sb b = { 0 };
	conv_sb_printf(&b, "\"[\" %s ", sp);
	int open = 0;
	for (int i = 0; i < m && (mx < 0 || i < mx); i++) {
		bool need = i < mn;
		conv_sb_puts(&b, need ? "" : "(");
		open += !need;
		if (i)
			conv_sb_printf(&b, "\",\" %s ", sp);
		conv_sb_printf(&b, "%s ", elem[i]);
		if (need)
			continue;
		/* the closing ")?" come after the rest */
	}
	if (rest && (mx < 0 || mx > m)) {
		long long lo = mn > m ? mn - m : 0, hi = mx < 0 ? -1 : mx - m;
		if (m == 0) {
			conv_sb_printf(&b, "(%s (\",\" %s %s)", rest, sp, rest);
			if (hi < 0)
				conv_sb_printf(&b, "{%lld,}", lo ? lo - 1 : 0);
			else
				conv_sb_printf(&b, "{%lld,%lld}", lo ? lo - 1 : 0, hi - 1);
			conv_sb_puts(&b, lo ? ") " : ")? ");
		} else {
			conv_sb_printf(&b, "(\",\" %s %s)", sp, rest);
			if (hi < 0)
				conv_sb_printf(&b, "{%lld,} ", lo);
			else
				conv_sb_printf(&b, "{%lld,%lld} ", lo, hi);
		}
	}
	while (open--)
		conv_sb_puts(&b, ")? ");
	conv_sb_printf(&b, "\"]\" %s", sp);
	return add_sb(c, hint, &b);
}

/* ---- strings and numbers -------------------------------------------------- */

static const char *gen_string(struct sc *c, const cJSON *s, const char *hint)
{
	const cJSON *pat = cJSON_GetObjectItemCaseSensitive(s, "pattern");
	const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(s, "format");
	long long mn = 0, mx = -1;
	int hl = get_count(c, s, "minLength", &mn), hm = get_count(c, s, "maxLength", &mx);
	const char *sp = prim(c, "space"), *ch = prim(c, "char");
	struct conv_sb b = { 0 };
	if (hl < 0 || hm < 0 || !sp || !ch)
		return NULL;
	if (pat && !cJSON_IsString(pat))
		return fail(c, "'%s' must be a string", "pattern");
	if (fmt && !cJSON_IsString(fmt))
		return fail(c, "'%s' must be a string", "format");
	if ((pat != NULL) + (fmt != NULL) + (hl || hm) > 1)
		return fail(c, "%s together are not supported", "pattern, format and minLength/maxLength");
	if (mx > 10000 || mn > 10000)
		return fail(c, "'%s' over 10000 is not supported", mx > 10000 ? "maxLength" : "minLength");
	if (mx >= 0 && mn > mx)
		return fail(c, "no string satisfies these %s", "minLength and maxLength");
	if (!pat && !fmt && !hl && !hm)
		return prim(c, "string");
	conv_sb_puts(&b, "\"\\\"\" ");
	if (fmt) {
		static const char *const F[] = { "date", "time", "date-time", "uuid", "email", NULL };
		const char *r = in_list(F, fmt->valuestring) ? prim(c, fmt->valuestring) : NULL;
		if (!r) {
			free(b.p);
			return in_list(F, fmt->valuestring) ? NULL : fail(c, "unsupported format '%s'", fmt->valuestring);
		}
		conv_sb_puts(&b, r);
	} else if (pat) {
		char what[1100];
		snprintf(what, sizeof what, "json schema: %s: pattern", c->path[0] ? c->path : "/");
		if (conv_regex(pat->valuestring, true, true, ch, &b, what, c->err)) {
			free(b.p);
			return NULL;
		}
	} else if (mx < 0) {
		conv_sb_printf(&b, "%s{%lld,}", ch, mn);
	} else {
		conv_sb_printf(&b, "%s{%lld,%lld}", ch, mn, mx);
	}
	conv_sb_printf(&b, " \"\\\"\" %s", sp);
	return add_sb(c, hint, &b);
}

/* An integer bound from a number keyword (rounded inward), 1 present. */
static int int_bound(struct sc *c, const cJSON *s, bool lower, int64_t *v)
{
	double m = 0, e = 0;
	int hm = get_num(c, s, lower ? "minimum" : "maximum", &m);
	int he = get_num(c, s, lower ? "exclusiveMinimum" : "exclusiveMaximum", &e);
	const cJSON *eb = cJSON_GetObjectItemCaseSensitive(s, lower ? "exclusiveMinimum" : "exclusiveMaximum");
	if (hm < 0 || he < 0)
		return -1;
	if (eb && cJSON_IsTrue(eb) && hm) { /* draft 4: a boolean modifying minimum */
		he = 1;
		e = m;
		hm = 0;
	}
	double r = 0;
	bool have = false;
	if (hm) {
		r = lower ? ceil(m) : floor(m);
		have = true;
	}
	if (he) {
		double x = lower ? floor(e) + 1 : ceil(e) - 1;
		r = !have ? x : lower ? fmax(r, x) : fmin(r, x);
		have = true;
	}
	if (!have)
		return 0;
	if (fabs(r) > 1e18)
		return fail(c, "integer bound %s is too large", lower ? "minimum" : "maximum"), -1;
	*v = (int64_t)r;
	return 1;
}

static const char *gen_integer(struct sc *c, const cJSON *s, const char *hint)
{
	int64_t lo = 0, hi = 0;
	int hl = int_bound(c, s, true, &lo), hh = int_bound(c, s, false, &hi);
	const char *sp = prim(c, "space");
	struct conv_sb b = { 0 };
	if (hl < 0 || hh < 0 || !sp)
		return NULL;
	if (!hl && !hh)
		return prim(c, "integer");
	if (hl && hh && lo > hi)
		return fail(c, "no integer satisfies these %s", "bounds");
	int_range(&b, lo, hl, hi, hh);
	conv_sb_printf(&b, " %s", sp);
	return add_sb(c, hint, &b);
}

static const char *gen_number(struct sc *c, const cJSON *s, const char *hint)
{
	static const char *const B[] = { "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", NULL };
	for (int i = 0; B[i]; i++)
		if (cJSON_GetObjectItemCaseSensitive(s, B[i]))
			return fail(c, "'%s' on a non-integer number is not supported (use type integer)", B[i]);
	(void)hint;
	return prim(c, "number");
}

/* ---- $ref, combinators, enum ------------------------------------------ */

static bool hexval_ok(char h)
{
	return (h >= '0' && h <= '9') || (h >= 'a' && h <= 'f') || (h >= 'A' && h <= 'F');
}

/* The node a local $ref ("#", "#/$defs/A", any JSON pointer) points to. */
static const cJSON *resolve(struct sc *c, const char *ref)
{
	const cJSON *n = c->doc;
	if (ref[0] != '#' || (ref[1] && ref[1] != '/'))
		return fail(c, "only local $ref (\"#/...\") is supported, not '%s'", ref), NULL;
	for (const char *p = ref + 1; *p == '/';) {
		char seg[512];
		size_t k = 0;
		for (p++; *p && *p != '/' && k < sizeof seg - 1; p++) {
			if (*p == '~' && (p[1] == '0' || p[1] == '1'))
				seg[k++] = *++p == '0' ? '~' : '/';
			else if (*p == '%' && hexval_ok(p[1]) && hexval_ok(p[2])) {
				seg[k++] = (char)strtol((char[3]){ p[1], p[2], 0 }, NULL, 16);
				p += 2;
			} else
				seg[k++] = *p;
		}
		seg[k] = 0;
		if (cJSON_IsArray(n)) {
			char *e;
			long i = strtol(seg, &e, 10);
			n = *e || !*seg ? NULL : cJSON_GetArrayItem(n, (int)i);
		} else {
			n = cJSON_IsObject(n) ? cJSON_GetObjectItemCaseSensitive(n, seg) : NULL;
		}
		if (!n)
			return fail(c, "$ref '%s' points to nothing", ref), NULL;
	}
	return n;
}

static const char *ref_rule(struct sc *c, const char *ref)
{
	for (int i = 0; i < c->n_rules; i++)
		if (c->ref_key[i] && !strcmp(c->ref_key[i], ref))
			return c->rules[i].name;
	const cJSON *t = resolve(c, ref);
	if (!t)
		return NULL;
	const char *last = strrchr(ref, '/');
	const char *name = add_rule(c, last ? last + 1 : "root-ref", NULL);
	if (!name)
		return NULL;
	int me = c->n_rules - 1;
	if (!(c->ref_key[me] = sdup(ref)))
		return nomem(c);
	char saved[sizeof c->path];
	memcpy(saved, c->path, sizeof saved);
	snprintf(c->path, sizeof c->path, "%s", ref + 1);
	const char *body = visit(c, t, last ? last + 1 : "ref");
	if (!body)
		return NULL;
	memcpy(c->path, saved, sizeof saved);
	if (!(c->rules[me].body = sdup(body)))
		return nomem(c);
	return c->rules[me].name;
}

/* Which JSON types a schema can match (for oneOf's disjointness). */
static int kinds(struct sc *c, const cJSON *s, int depth)
{
	if (!cJSON_IsObject(s) || depth > 32)
		return cJSON_IsFalse(s) ? 0 : T_ALL;
	int m = T_ALL;
	const cJSON *t = cJSON_GetObjectItemCaseSensitive(s, "type"), *x;
	if (t) {
		struct fx_err e = { 0 };
		struct fx_err *keep = c->err;
		c->err = &e;
		int g = get_types(c, s);
		c->err = keep;
		m = g < 0 ? T_ALL : g;
	}
	if ((x = cJSON_GetObjectItemCaseSensitive(s, "$ref")) && cJSON_IsString(x)) {
		struct fx_err e = { 0 };
		struct fx_err *keep = c->err;
		c->err = &e;
		const cJSON *r = resolve(c, x->valuestring);
		c->err = keep;
		if (r)
			m &= kinds(c, r, depth + 1);
	}
	const cJSON *en = cJSON_GetObjectItemCaseSensitive(s, "enum"), *cn = cJSON_GetObjectItemCaseSensitive(s, "const");
	if (cn || cJSON_IsArray(en)) {
		int v = 0;
		for (const cJSON *e = cn ? cn : en->child; e; e = cn ? NULL : e->next)
			v |= cJSON_IsNull(e) ? T_NULL : cJSON_IsBool(e) ? T_BOOL : cJSON_IsObject(e) ? T_OBJ :
			     cJSON_IsArray(e) ? T_ARR : cJSON_IsString(e) ? T_STR :
			     e->valuedouble == floor(e->valuedouble) ? T_INT : T_FRAC;
		m &= v;
	}
	const char *ao[] = { "anyOf", "oneOf" };
	for (int i = 0; i < 2; i++)
		if (cJSON_IsArray(x = cJSON_GetObjectItemCaseSensitive(s, ao[i]))) {
			int u = 0;
			for (const cJSON *e = x->child; e; e = e->next)
				u |= kinds(c, e, depth + 1);
			m &= u;
		}
	if (cJSON_IsArray(x = cJSON_GetObjectItemCaseSensitive(s, "allOf")))
		for (const cJSON *e = x->child; e; e = e->next)
			m &= kinds(c, e, depth + 1);
	return m;
}

static const char *gen_anyof(struct sc *c, const cJSON *list, const char *kw, const char *hint)
{
	struct conv_sb b = { 0 };
	int i = 0, seen = 0;
	if (!cJSON_IsArray(list) || !list->child)
		return fail(c, "'%s' must be a non-empty array of schemas", kw);
	for (const cJSON *e = list->child; e; e = e->next, i++) {
		char idx[16], h[256];
		if (kw[0] == 'o') { /* oneOf is anyOf when no value can match two branches */
			int k = kinds(c, e, 0);
			if (k & seen) {
				free(b.p);
				return fail(c, "oneOf branches that may overlap (same JSON type) are not supported; %s",
					    "use anyOf");
			}
			seen |= k;
		}
		snprintf(idx, sizeof idx, "%d", i);
		snprintf(h, sizeof h, "%.200s%s%d", hint, *hint ? "-" : "", i);
		const char *r = visit_at(c, e, h, kw, idx);
		if (!r) {
			free(b.p);
			return NULL;
		}
		conv_sb_printf(&b, "%s%s", i ? " | " : "", r);
	}
	return add_sb(c, hint, &b);
}

/* allOf of object schemas (and compatible keywords) merged into one node;
 * a keyword two branches give differently is an error. */
static const char *gen_allof(struct sc *c, const cJSON *s, const char *hint)
{
	const cJSON *list = cJSON_GetObjectItemCaseSensitive(s, "allOf");
	cJSON *m = cJSON_CreateObject(), *props = NULL, *req = NULL;
	const char *res = NULL;
	if (!m)
		return nomem(c);
	if (!cJSON_IsArray(list) || !list->child) {
		fail(c, "'%s' must be a non-empty array of schemas", "allOf");
		goto out;
	}
	/* the node's own keywords are one more branch */
	const cJSON *br[65];
	int nb = 0;
	br[nb++] = s;
	for (const cJSON *e = list->child; e; e = e->next) {
		const cJSON *x = e;
		for (int d = 0; cJSON_IsObject(x) && d < 32; d++) {
			const cJSON *r = cJSON_GetObjectItemCaseSensitive(x, "$ref");
			if (!r)
				break;
			if (!cJSON_IsString(r) || x->child->next) {
				fail(c, "allOf: a branch with $ref and other keywords is %s", "not supported");
				goto out;
			}
			if (!(x = resolve(c, r->valuestring)))
				goto out;
		}
		if (cJSON_IsTrue(x))
			continue;
		if (!cJSON_IsObject(x) || nb == 65) {
			fail(c, "allOf: %s", cJSON_IsFalse(x) ? "a branch is false" : "a branch is not a schema (or over 64)");
			goto out;
		}
		br[nb++] = x;
	}
	for (int i = 0; i < nb; i++)
		for (const cJSON *k = br[i]->child; k; k = k->next) {
			const char *key = k->string;
			cJSON *have = cJSON_GetObjectItemCaseSensitive(m, key);
			if (in_list(ANNOTATIONS, key) || (i == 0 && !strcmp(key, "allOf")))
				continue;
			if (!strcmp(key, "allOf") || !strcmp(key, "$ref")) {
				fail(c, "allOf: nested '%s' in a branch is not supported", key);
				goto out;
			}
			if (!strcmp(key, "properties") && cJSON_IsObject(k)) {
				if (!props && !(props = cJSON_AddObjectToObject(m, "properties")))
					goto oom;
				for (const cJSON *p = k->child; p; p = p->next) {
					if (cJSON_GetObjectItemCaseSensitive(props, p->string)) {
						fail(c, "allOf: property '%s' defined by two branches is not supported", p->string);
						goto out;
					}
					if (!cJSON_AddItemReferenceToObject(props, p->string, (cJSON *)p))
						goto oom;
				}
				continue;
			}
			if (!strcmp(key, "required") && cJSON_IsArray(k)) {
				if (!req && !(req = cJSON_AddArrayToObject(m, "required")))
					goto oom;
				for (const cJSON *p = k->child; p; p = p->next)
					if (!cJSON_AddItemReferenceToArray(req, (cJSON *)p))
						goto oom;
				continue;
			}
			if (!have) {
				if (!cJSON_AddItemReferenceToObject(m, key, (cJSON *)k))
					goto oom;
			} else if (!cJSON_Compare(have, k, true)) {
				fail(c, "allOf: two branches give different '%s' (not supported)", key);
				goto out;
			}
		}
	/* additionalProperties of one branch would refuse another's properties */
	for (int i = 0; i < nb; i++) {
		const cJSON *ap = cJSON_GetObjectItemCaseSensitive(br[i], "additionalProperties");
		const cJSON *own = cJSON_GetObjectItemCaseSensitive(br[i], "properties");
		if (!ap || cJSON_IsTrue(ap))
			continue;
		for (const cJSON *p = props ? props->child : NULL; p; p = p->next)
			if (!own || !cJSON_GetObjectItemCaseSensitive(own, p->string)) {
				fail(c, "allOf: additionalProperties of one branch with property '%s' of another is not supported",
				     p->string);
				goto out;
			}
	}
	res = visit(c, m, hint);
	goto out;
oom:
	nomem(c);
out:
	cJSON_Delete(m);
	return res;
}

static const char *gen_enum(struct sc *c, const cJSON *s, const char *hint, int types)
{
	const cJSON *en = cJSON_GetObjectItemCaseSensitive(s, "enum"), *cn = cJSON_GetObjectItemCaseSensitive(s, "const");
	struct conv_sb b = { 0 };
	int n = 0;
	if (en && !cJSON_IsArray(en))
		return fail(c, "'%s' must be an array", "enum");
	for (const cJSON *k = s->child; k; k = k->next)
		if (!in_list(ANNOTATIONS, k->string) && strcmp(k->string, "enum") && strcmp(k->string, "const") &&
		    strcmp(k->string, "type"))
			return fail(c, "'enum' or 'const' together with '%s' is not supported", k->string);
	for (const cJSON *e = cn ? cn : en->child; e; e = cn ? NULL : e->next) {
		int t = cJSON_IsNull(e) ? T_NULL : cJSON_IsBool(e) ? T_BOOL : cJSON_IsObject(e) ? T_OBJ :
			cJSON_IsArray(e) ? T_ARR : cJSON_IsString(e) ? T_STR :
			e->valuedouble == floor(e->valuedouble) ? T_INT : T_FRAC;
		if (!(t & types))
			continue;
		if (cn && en) {
			bool in = false;
			for (const cJSON *x = en->child; x; x = x->next)
				in |= cJSON_Compare(x, e, true);
			if (!in)
				continue;
		}
		conv_sb_puts(&b, n++ ? " | (" : "(");
		value_lit(c, &b, e);
		conv_sb_puts(&b, ")");
	}
	if (!n) {
		free(b.p);
		return fail(c, "no value satisfies this %s", "enum/const");
	}
	return add_sb(c, hint, &b);
}

/* ---- the walk ------------------------------------------------------------ */

static const char *visit(struct sc *c, const cJSON *s, const char *hint)
{
	const char *res;
	if (cJSON_IsTrue(s))
		return prim(c, "value");
	if (cJSON_IsFalse(s))
		return fail(c, "the schema %s matches nothing", "false");
	if (!cJSON_IsObject(s))
		return fail(c, "a schema must be an object or a boolean, not %s",
			    cJSON_IsArray(s) ? "an array" : cJSON_IsString(s) ? "a string" : "a number or null");
	if (c->depth > 200)
		return fail(c, "schema nested deeper than %s", "200");
	int keep_depth = c->depth++;
	for (const cJSON *k = s->child; k; k = k->next) {
		if (in_list(UNSUPPORTED, k->string) || (!strcmp(k->string, "uniqueItems") && !cJSON_IsFalse(k))) {
			c->depth = keep_depth;
			return fail(c, "unsupported keyword '%s'", k->string);
		}
	}
	const cJSON *ref = cJSON_GetObjectItemCaseSensitive(s, "$ref");
	const cJSON *any = cJSON_GetObjectItemCaseSensitive(s, "anyOf");
	const cJSON *one = cJSON_GetObjectItemCaseSensitive(s, "oneOf");
	bool others = false;
	for (const cJSON *k = s->child; k; k = k->next)
		others |= !in_list(ANNOTATIONS, k->string) && strcmp(k->string, "$ref") &&
			  strcmp(k->string, "anyOf") && strcmp(k->string, "oneOf") && strcmp(k->string, "allOf");
	int types = 0;
	if (cJSON_GetObjectItemCaseSensitive(s, "allOf")) {
		res = gen_allof(c, s, hint);
	} else if (ref) {
		if (!cJSON_IsString(ref))
			res = fail(c, "'%s' must be a string", "$ref");
		else if (others || any || one)
			res = fail(c, "'$ref' with sibling keywords is not supported (wrap them in %s)", "allOf");
		else
			res = ref_rule(c, ref->valuestring);
	} else if (any || one) {
		if (any && one)
			res = fail(c, "'anyOf' and 'oneOf' together are %s", "not supported");
		else if (others)
			res = fail(c, "'%s' with sibling validation keywords is not supported (move them into each branch)",
				   any ? "anyOf" : "oneOf");
		else
			res = gen_anyof(c, any ? any : one, any ? "anyOf" : "oneOf", hint);
	} else if ((types = get_types(c, s)) < 0) {
		res = NULL;
	} else if (cJSON_GetObjectItemCaseSensitive(s, "enum") || cJSON_GetObjectItemCaseSensitive(s, "const")) {
		res = gen_enum(c, s, hint, types);
	} else if (types == T_ALL && !others) {
		res = prim(c, "value");
	} else {
		const char *alt[6];
		int n = 0;
		char h[256];
		static const char *const suf[] = { "null", "boolean", "object", "array", "string", "number" };
		for (int i = 0; i < 6; i++) {
			int bit = i < 5 ? 1 << i : T_INT;
			if (!(types & bit))
				continue;
			snprintf(h, sizeof h, "%.200s%s%s", hint, *hint ? "-" : "", (types & (types - 1)) ? suf[i] : "");
			if (!(types & (types - 1)))
				snprintf(h, sizeof h, "%.200s", *hint ? hint : suf[i]);
			const char *r = i == 0 ? prim(c, "null") : i == 1 ? prim(c, "boolean") :
					i == 2 ? gen_object(c, s, h) : i == 3 ? gen_array(c, s, h) :
					i == 4 ? gen_string(c, s, h) :
					(types & T_FRAC) ? gen_number(c, s, h) : gen_integer(c, s, h);
			if (!r) {
				c->depth = keep_depth;
				return NULL;
			}
			alt[n++] = r;
		}
		if (n == 1) {
			res = alt[0];
		} else {
			struct conv_sb b = { 0 };
			for (int i = 0; i < n; i++)
				conv_sb_printf(&b, "%s%s", i ? " | " : "", alt[i]);
			res = add_sb(c, hint, &b);
		}
	}
	c->depth = keep_depth;
	return res;
}

/* Offset of the first byte of s that is not well-formed UTF-8, or -1. */
static long schema_utf8_invalid_at(const char *str)
{
	static const uint32_t min[] = { 0, 0x80, 0x800, 0x10000 };
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
		if (cp < min[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
			return i;
		i += 1 + n;
	}
	return -1;
}

int fx_json_schema_to_gbnf(const char *schema_json, const char *root_name, char **gbnf,
			   struct fx_err *err)
{
	struct sc c = { .err = err };
	char prefix[200];
	int rc = FX_OK;
	struct conv_sb out = { 0 };
	*gbnf = NULL;
	if (!schema_json)
		return fx_fail(err, FX_E_INVALID, "json schema: no schema given");
	if (root_name && (!*root_name || strlen(root_name) > 100 ||
			  strspn(root_name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-") != strlen(root_name)))
		return fx_fail(err, FX_E_INVALID, "json schema: root name '%s' is not a rule name ([a-zA-Z0-9-]+)", root_name);
	/* JSON text is UTF-8 (RFC 8259): the rules below read every string as
	 * such, so anything else is refused here (fuzz_schema: a key of one
	 * stray byte was read as a 4-byte sequence past its end) */
	long bad = schema_utf8_invalid_at(schema_json);
	if (bad >= 0)
		return fx_fail(err, FX_E_INVALID, "json schema: invalid UTF-8 at byte %ld", bad);
	size_t end = 0, len = strlen(schema_json);
	cJSON *doc = NULL;
	rc = fx_json_parse(schema_json, len, &doc, &end);
	if (rc == FX_E_NOMEM)
		return fx_fail(err, FX_E_NOMEM, "json schema: out of memory");
	for (size_t i = end; doc && i < len; i++) /* only white space may follow */
		if (!strchr(" \t\r\n", schema_json[i])) {
			cJSON_Delete(doc);
			doc = NULL;
			end = i;
		}
	if (!doc)
		return fx_fail(err, FX_E_INVALID, "json schema: malformed JSON at byte %zu", end);
	snprintf(prefix, sizeof prefix, "%s%s", root_name ? root_name : "", root_name ? "-" : "");
	c.doc = doc;
	c.root = root_name ? root_name : "root";
	c.prefix = prefix;
	const char *top = visit(&c, doc, "");
	if (!top) {
		rc = c.oom ? FX_E_NOMEM : FX_E_INVALID;
		goto out;
	}
	conv_sb_printf(&out, "%s ::= %s\n", c.root, top);
	for (int i = 0; i < c.n_rules; i++) {
		conv_sb_puts(&out, c.rules[i].name);
		conv_sb_puts(&out, " ::= ");
		conv_sb_puts(&out, c.rules[i].body ? c.rules[i].body : "\"\"");
		conv_sb_puts(&out, "\n");
	}
	if (out.failed) {
		rc = fx_fail(err, FX_E_NOMEM, "json schema: out of memory");
		goto out;
	}
	/* the output must compile: this catches a $ref cycle that consumes
	 * nothing (left recursion) with the parser's own message */
	struct fx_grammar *g = NULL;
	struct fx_err e2 = { 0 };
	if ((rc = fx_grammar_parse(out.p, out.n, c.root, &g, &e2))) {
		if (rc != FX_E_NOMEM)
			rc = FX_E_INVALID;
		fx_fail(err, rc, "json schema: the schema gives an unusable grammar (a $ref cycle that consumes no input?): %s",
			e2.msg);
		goto out;
	}
	fx_grammar_free(g);
	*gbnf = out.p;
	out.p = NULL;
out:
	free(out.p);
	for (int i = 0; i < c.n_rules; i++) {
		free(c.rules[i].name);
		free(c.rules[i].body);
		free(c.ref_key[i]);
	}
	free(c.rules);
	free(c.ref_key);
	cJSON_Delete(doc);
	return rc;
}
