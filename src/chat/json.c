/* JSON for the chat-template interpreter: parsing as Python's json.loads
 * (ints stay ints, floats floats, object order kept, a repeated key keeps
 * its first place and takes the last value) and json.dumps as
 * transformers' tojson filter calls it.
 *
 * Why not cJSON: it stores every number as a double, so "1.0" and "1"
 * would print alike, and Python prints them differently.
 */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat/value.h"
#include "ferrox.h"
#include "core/alloc.h"

struct jp {
	const char *s;
	size_t n, i;
	bool data;
	char *msg;
	int depth;
	bool oom;
};

static void jp_ws(struct jp *p)
{
	while (p->i < p->n && (p->s[p->i] == ' ' || p->s[p->i] == '\t' || p->s[p->i] == '\n' ||
			       p->s[p->i] == '\r'))
		p->i++;
}

static bool jp_fail(struct jp *p, const char *what)
{
	size_t line = 1, col = 1;
	for (size_t k = 0; k < p->i && k < p->n; k++) {
		if (p->s[k] == '\n') {
			line++;
			col = 1;
		} else {
			col++;
		}
	}
	snprintf(p->msg, 256, "invalid JSON at line %zu column %zu: %s", line, col, what);
	return false;
}

static bool jp_oom(struct jp *p)
{
	p->oom = true;
	snprintf(p->msg, 256, "out of memory");
	return false;
}

static int hexval(char c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
	       : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

static bool jp_hex4(struct jp *p, uint32_t *out)
{
	uint32_t v = 0;
	if (p->i + 4 > p->n)
		return jp_fail(p, "truncated \\u escape");
	for (int k = 0; k < 4; k++) {
		int h = hexval(p->s[p->i + (size_t)k]);
		if (h < 0)
			return jp_fail(p, "bad \\u escape");
		v = v * 16 + (uint32_t)h;
	}
	p->i += 4;
	*out = v;
	return true;
}

static bool jp_string(struct jp *p, struct value *out)
{
	struct sbuf b = { 0 };
	uint8_t fl = p->data;
	p->i++; /* opening quote */
	for (;;) {
		if (p->i >= p->n) {
			sb_free(&b);
			return jp_fail(p, "unterminated string");
		}
		unsigned char c = (unsigned char)p->s[p->i];
		if (c == '"') {
			p->i++;
			break;
		}
		if (c < 0x20) {
			sb_free(&b);
			return jp_fail(p, "control character in string");
		}
		if (c != '\\') {
			size_t j = p->i;
			while (j < p->n && p->s[j] != '"' && p->s[j] != '\\' && (unsigned char)p->s[j] >= 0x20)
				j++;
			sb_put(&b, p->s + p->i, j - p->i, fl);
			p->i = j;
			continue;
		}
		if (++p->i >= p->n) {
			sb_free(&b);
			return jp_fail(p, "unterminated escape");
		}
		char e = p->s[p->i++], ch;
		uint32_t cp;
		switch (e) {
		case '"': ch = '"'; break;
		case '\\': ch = '\\'; break;
		case '/': ch = '/'; break;
		case 'b': ch = '\b'; break;
		case 'f': ch = '\f'; break;
		case 'n': ch = '\n'; break;
		case 'r': ch = '\r'; break;
		case 't': ch = '\t'; break;
		case 'u':
			if (!jp_hex4(p, &cp)) {
				sb_free(&b);
				return false;
			}
			if (cp >= 0xd800 && cp < 0xdc00 && p->i + 1 < p->n && p->s[p->i] == '\\' &&
			    p->s[p->i + 1] == 'u') {
				uint32_t lo;
				size_t save = p->i;
				p->i += 2;
				if (!jp_hex4(p, &lo)) {
					sb_free(&b);
					return false;
				}
				if (lo >= 0xdc00 && lo < 0xe000)
					cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
				else
					p->i = save;
			}
			if (cp >= 0xd800 && cp < 0xe000) {
				sb_free(&b);
				return jp_fail(p, "lone surrogate in \\u escape (not encodable as UTF-8)");
			}
			{
				char u[4];
				sb_put(&b, u, u8_encode(cp, u), fl);
			}
			continue;
		default:
			sb_free(&b);
			return jp_fail(p, "bad escape");
		}
		sb_put(&b, &ch, 1, fl);
	}
	if (!sb_to_str(&b, out))
		return jp_oom(p);
	return true;
}

static bool jp_value(struct jp *p, struct value *out);

static bool jp_number(struct jp *p, struct value *out)
{
	size_t st = p->i;
	bool isf = false;
	if (p->s[p->i] == '-')
		p->i++;
	if (p->i >= p->n || p->s[p->i] < '0' || p->s[p->i] > '9')
		return jp_fail(p, "bad number");
	while (p->i < p->n && ((p->s[p->i] >= '0' && p->s[p->i] <= '9') || p->s[p->i] == '.' ||
			       p->s[p->i] == 'e' || p->s[p->i] == 'E' || p->s[p->i] == '+' ||
			       p->s[p->i] == '-')) {
		if (p->s[p->i] == '.' || p->s[p->i] == 'e' || p->s[p->i] == 'E')
			isf = true;
		p->i++;
	}
	char tmp[64];
	size_t len = p->i - st;
	if (len >= sizeof(tmp))
		return jp_fail(p, "number too long");
	memcpy(tmp, p->s + st, len);
	tmp[len] = 0;
	char *end;
	if (!isf) {
		long long v = strtoll(tmp, &end, 10);
		if (*end)
			return jp_fail(p, "bad number");
		if ((v == LLONG_MAX || v == LLONG_MIN) && strcmp(tmp, "9223372036854775807") &&
		    strcmp(tmp, "-9223372036854775808"))
			return jp_fail(p, "integer out of the 64-bit range");
		*out = v_int(v);
	} else {
		double v = strtod(tmp, &end);
		if (*end)
			return jp_fail(p, "bad number");
		*out = v_float(v);
	}
	out->data = p->data;
	return true;
}

static bool jp_lit(struct jp *p, const char *w, struct value v, struct value *out)
{
	size_t n = strlen(w);
	if (p->i + n > p->n || memcmp(p->s + p->i, w, n))
		return jp_fail(p, "unexpected character");
	p->i += n;
	*out = v;
	out->data = p->data;
	return true;
}

/* Past the opening bracket at p->i: true when the container closes at
 * once (empty). */
static bool jp_open(struct jp *p, char close)
{
	p->i++;
	jp_ws(p);
	if (p->i < p->n && p->s[p->i] == close) {
		p->i++;
		return true;
	}
	return false;
}

/* After an element: ',' (1: another follows) or the closing bracket (0:
 * done), past whitespace; anything else is an error (-1). */
static int jp_after(struct jp *p, char close)
{
	jp_ws(p);
	if (p->i < p->n && p->s[p->i] == ',') {
		p->i++;
		return 1;
	}
	if (p->i < p->n && p->s[p->i] == close) {
		p->i++;
		return 0;
	}
	jp_fail(p, close == ']' ? "expected ',' or ']'" : "expected ',' or '}'");
	return -1;
}

static bool jp_array(struct jp *p, struct value *out)
{
	if (!v_list_new(false, out))
		return jp_oom(p);
	out->data = p->data;
	if (jp_open(p, ']'))
		return true;
	for (;;) {
		struct value e;
		if (!jp_value(p, &e))
			goto fail;
		if (!list_push(out->l, e)) {
			jp_oom(p);
			goto fail;
		}
		int more = jp_after(p, ']');
		if (more < 0)
			goto fail;
		if (!more)
			return true;
	}
fail:
	v_drop(out);
	return false;
}

static bool jp_object(struct jp *p, struct value *out)
{
	if (!v_dict_new(out))
		return jp_oom(p);
	out->data = p->data;
	if (jp_open(p, '}'))
		return true;
	for (;;) {
		struct value k, v;
		jp_ws(p);
		if (p->i >= p->n || p->s[p->i] != '"') {
			jp_fail(p, "expected a string key");
			goto fail;
		}
		if (!jp_string(p, &k))
			goto fail;
		jp_ws(p);
		if (p->i >= p->n || p->s[p->i] != ':') {
			v_drop(&k);
			jp_fail(p, "expected ':'");
			goto fail;
		}
		p->i++;
		if (!jp_value(p, &v)) {
			v_drop(&k);
			goto fail;
		}
		bool ok = dict_set(out->d, &k, v);
		v_drop(&k);
		if (!ok) {
			jp_oom(p);
			goto fail;
		}
		int more = jp_after(p, '}');
		if (more < 0)
			goto fail;
		if (!more)
			return true;
	}
fail:
	v_drop(out);
	return false;
}

static bool jp_value(struct jp *p, struct value *out)
{
	jp_ws(p);
	if (p->i >= p->n)
		return jp_fail(p, "unexpected end");
	if (++p->depth > 200)
		return jp_fail(p, "nested too deeply");
	bool ok;
	switch (p->s[p->i]) {
	case '{': ok = jp_object(p, out); break;
	case '[': ok = jp_array(p, out); break;
	case '"':
		ok = jp_string(p, out);
		break;
	case 't': ok = jp_lit(p, "true", v_bool(true), out); break;
	case 'f': ok = jp_lit(p, "false", v_bool(false), out); break;
	case 'n': ok = jp_lit(p, "null", v_none(), out); break;
	default: ok = jp_number(p, out); break;
	}
	p->depth--;
	return ok;
}

int json_parse(const char *text, size_t n, bool data, struct value *out, char *msg)
{
	struct jp p = { text, n, 0, data, msg, 0, false };
	if (!jp_value(&p, out))
		return p.oom ? FX_E_NOMEM : FX_E_INVALID;
	jp_ws(&p);
	if (p.i != n) {
		v_drop(out);
		jp_fail(&p, "extra data after the value");
		return FX_E_INVALID;
	}
	return FX_OK;
}

/* ---- dumps ------------------------------------------------------------ */

static void dump_str(struct sbuf *b, const struct vstr *s, bool ascii, uint8_t outer)
{
	sb_put(b, "\"", 1, outer);
	for (size_t i = 0; i < s->n;) {
		uint32_t c;
		size_t len = u8_decode(s->p + i, s->n - i, &c);
		uint8_t fl = s->flags ? s->flags[i] : 0;
		switch (c) {
		case '"': sb_put(b, "\\\"", 2, fl); break;
		case '\\': sb_put(b, "\\\\", 2, fl); break;
		case '\n': sb_put(b, "\\n", 2, fl); break;
		case '\r': sb_put(b, "\\r", 2, fl); break;
		case '\t': sb_put(b, "\\t", 2, fl); break;
		case '\b': sb_put(b, "\\b", 2, fl); break;
		case '\f': sb_put(b, "\\f", 2, fl); break;
		default:
			if (c < 0x20 || (ascii && c >= 0x7f)) {
				if (c >= 0x10000) {
					uint32_t v = c - 0x10000;
					sb_printf(b, fl, "\\u%04x\\u%04x", (unsigned)(0xd800 + (v >> 10)),
						  (unsigned)(0xdc00 + (v & 0x3ff)));
				} else {
					sb_printf(b, fl, "\\u%04x", (unsigned)c);
				}
			} else {
				sb_put(b, s->p + i, len, fl);
			}
		}
		i += len;
	}
	sb_put(b, "\"", 1, outer);
}

static void dump_nl(struct sbuf *b, const struct json_opts *o, int level, uint8_t fl)
{
	sb_put(b, "\n", 1, fl);
	for (int k = 0; k < level; k++) {
		if (o->indent_str)
			sb_puts(b, o->indent_str, fl);
		else
			for (int j = 0; j < o->indent; j++)
				sb_put(b, " ", 1, fl);
	}
}

static bool dump(struct sbuf *b, const struct value *v, const struct json_opts *o, int level, char *msg);

static bool key_text(const struct value *k, struct value *out, char *msg)
{
	struct sbuf b = { 0 };
	char tmp[40];
	switch (k->kind) {
	case V_STR: *out = v_ref(*k); return true;
	case V_BOOL: sb_puts(&b, k->b ? "true" : "false", k->data); break;
	case V_NONE: sb_puts(&b, "null", k->data); break;
	case V_INT: sb_printf(&b, k->data, "%lld", (long long)k->i); break;
	case V_FLOAT: py_float_repr(k->f, tmp); sb_puts(&b, tmp, k->data); break;
	default:
		snprintf(msg, 256, "keys must be str, int, float, bool or None, not %s", v_type_name(k));
		return false;
	}
	if (!sb_to_str(&b, out)) {
		snprintf(msg, 256, "out of memory");
		return false;
	}
	return true;
}

static bool dump_dict(struct sbuf *b, const struct vdict *d, uint8_t fl, const struct json_opts *o,
		      int level, char *msg)
{
	bool indent = o->indent >= 0 || o->indent_str;
	const char *isep = o->item_sep ? o->item_sep : indent ? "," : ", ";
	const char *ksep = o->key_sep ? o->key_sep : ": ";
	size_t *ord = NULL;
	bool ok = true;
	struct value *keys = NULL;
	if (!d->n) {
		sb_put(b, "{}", 2, fl);
		return true;
	}
	ord = fx_calloc(d->n, sizeof(*ord));
	keys = fx_calloc(d->n, sizeof(*keys));
	if (!ord || !keys) {
		fx_free(ord);
		fx_free(keys);
		snprintf(msg, 256, "out of memory");
		return false;
	}
	for (size_t i = 0; i < d->n && ok; i++) {
		ord[i] = i;
		ok = key_text(&d->k[i], &keys[i], msg);
	}
	if (ok && o->sort_keys) {
		for (size_t i = 1; i < d->n; i++) { /* stable insertion sort by key text */
			size_t x = ord[i], j = i;
			while (j > 0) {
				int c = 0;
				v_compare(&keys[ord[j - 1]], &keys[x], &c);
				if (c <= 0)
					break;
				ord[j] = ord[j - 1];
				j--;
			}
			ord[j] = x;
		}
	}
	if (ok) {
		sb_put(b, "{", 1, fl);
		for (size_t i = 0; i < d->n && ok; i++) {
			if (i)
				sb_puts(b, isep, fl);
			if (indent)
				dump_nl(b, o, level + 1, fl);
			dump_str(b, keys[ord[i]].s, o->ensure_ascii, fl);
			sb_puts(b, ksep, fl);
			ok = dump(b, &d->v[ord[i]], o, level + 1, msg);
		}
		if (indent)
			dump_nl(b, o, level, fl);
		sb_put(b, "}", 1, fl);
	}
	for (size_t i = 0; i < d->n; i++)
		v_drop(&keys[i]);
	fx_free(keys);
	fx_free(ord);
	return ok;
}

static bool dump(struct sbuf *b, const struct value *v, const struct json_opts *o, int level, char *msg)
{
	uint8_t fl = v->data;
	char tmp[40];
	bool indent = o->indent >= 0 || o->indent_str;
	if (level > 200) {
		snprintf(msg, 256, "value nested too deeply for JSON");
		return false;
	}
	switch (v->kind) {
	case V_NONE: sb_puts(b, "null", fl); return true;
	case V_BOOL: sb_puts(b, v->b ? "true" : "false", fl); return true;
	case V_INT: sb_printf(b, fl, "%lld", (long long)v->i); return true;
	case V_FLOAT:
		if (isnan(v->f))
			sb_puts(b, "NaN", fl);
		else if (isinf(v->f))
			sb_puts(b, v->f < 0 ? "-Infinity" : "Infinity", fl);
		else {
			py_float_repr(v->f, tmp);
			sb_puts(b, tmp, fl);
		}
		return true;
	case V_STR:
		dump_str(b, v->s, o->ensure_ascii, v->s->flags ? 1 : 0);
		return true;
	case V_LIST: {
		if (v->l->gen || v->l->range)
			break;
		const char *isep = o->item_sep ? o->item_sep : indent ? "," : ", ";
		if (!v->l->n) {
			sb_put(b, "[]", 2, fl);
			return true;
		}
		sb_put(b, "[", 1, fl);
		for (size_t i = 0; i < v->l->n; i++) {
			if (i)
				sb_puts(b, isep, fl);
			if (indent)
				dump_nl(b, o, level + 1, fl);
			if (!dump(b, &v->l->a[i], o, level + 1, msg))
				return false;
		}
		if (indent)
			dump_nl(b, o, level, fl);
		sb_put(b, "]", 1, fl);
		return true;
	}
	case V_DICT:
		if (v->d->ns || v->d->loop)
			break;
		return dump_dict(b, v->d, fl, o, level, msg);
	default:
		break;
	}
	snprintf(msg, 256, "Object of type %s is not JSON serializable", v_type_name(v));
	return false;
}

int json_dump(struct sbuf *b, const struct value *v, const struct json_opts *o, char *msg)
{
	if (dump(b, v, o, 0, msg))
		return b->oom ? FX_E_NOMEM : FX_OK;
	return strcmp(msg, "out of memory") ? FX_E_INVALID : FX_E_NOMEM;
}
