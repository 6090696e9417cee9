/* Values of the chat-template interpreter: allocation, reference counts,
 * Python's equality, ordering, truthiness, str() and repr(). */
#include "chat/value.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"

/* ---- byte buffer ------------------------------------------------------ */

static bool sb_grow(struct sbuf *b, size_t extra)
{
	if (b->oom)
		return false;
	if (b->n + extra + 1 <= b->cap)
		return true;
	size_t cap = b->cap ? b->cap : 64;
	while (cap < b->n + extra + 1)
		cap *= 2;
	char *p = fx_realloc_array(b->p, cap, 1);
	if (!p) {
		b->oom = true;
		return false;
	}
	b->p = p;
	uint8_t *f = fx_realloc_array(b->f, cap, 1);
	if (!f) {
		b->oom = true;
		return false;
	}
	b->f = f;
	b->cap = cap;
	return true;
}

void sb_put(struct sbuf *b, const char *s, size_t n, uint8_t flag)
{
	if (!n || !sb_grow(b, n))
		return;
	memcpy(b->p + b->n, s, n);
	memset(b->f + b->n, flag, n);
	b->n += n;
	b->p[b->n] = 0;
	if (flag)
		b->any = true;
}

void sb_putf(struct sbuf *b, const char *s, size_t n, const uint8_t *flags)
{
	if (!flags) {
		sb_put(b, s, n, 0);
		return;
	}
	if (!n || !sb_grow(b, n))
		return;
	memcpy(b->p + b->n, s, n);
	memcpy(b->f + b->n, flags, n);
	b->n += n;
	b->p[b->n] = 0;
	b->any = true;
}

void sb_puts(struct sbuf *b, const char *s, uint8_t flag)
{
	sb_put(b, s, strlen(s), flag);
}

void sb_printf(struct sbuf *b, uint8_t flag, const char *fmt, ...)
{
	char tmp[128];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	if (n > 0)
		sb_put(b, tmp, (size_t)n < sizeof(tmp) ? (size_t)n : sizeof(tmp) - 1, flag);
}

void sb_free(struct sbuf *b)
{
	fx_free(b->p);
	fx_free(b->f);
	memset(b, 0, sizeof(*b));
}

bool sb_to_str(struct sbuf *b, struct value *out)
{
	bool ok = !b->oom && v_str(b->p ? b->p : "", b->n, b->any ? b->f : NULL, out);
	sb_free(b);
	return ok;
}

/* ---- construction ----------------------------------------------------- */

bool v_str(const char *s, size_t n, const uint8_t *flags, struct value *out)
{
	struct vstr *vs = fx_calloc(1, sizeof(*vs) + n + 1);
	if (!vs)
		return false;
	if (flags) {
		size_t i = 0;
		while (i < n && !flags[i])
			i++;
		if (i < n) {
			if (!(vs->flags = fx_malloc_array(n, 1))) {
				fx_free(vs);
				return false;
			}
			memcpy(vs->flags, flags, n);
		}
	}
	vs->rc = 1;
	vs->n = n;
	if (n)
		memcpy(vs->p, s, n);
	*out = (struct value){ .kind = V_STR };
	out->s = vs;
	return true;
}

bool v_markup(const struct value *s, bool escape, struct value *out)
{
	struct sbuf b = { 0 };
	for (size_t i = 0; i < s->s->n; i++) {
		const char *ent = NULL;
		uint8_t fl = s->s->flags ? s->s->flags[i] : 0;
		if (escape && !s->s->markup)
			switch (s->s->p[i]) {
			case '&': ent = "&amp;"; break;
			case '<': ent = "&lt;"; break;
			case '>': ent = "&gt;"; break;
			case '\'': ent = "&#39;"; break;
			case '"': ent = "&#34;"; break;
			default: break;
			}
		if (ent)
			sb_puts(&b, ent, fl);
		else
			sb_put(&b, s->s->p + i, 1, fl);
	}
	if (!sb_to_str(&b, out))
		return false;
	out->s->markup = true;
	return true;
}

bool v_str_all(const char *s, size_t n, uint8_t flag, struct value *out)
{
	if (!flag || !n)
		return v_str(s, n, NULL, out);
	uint8_t *f = fx_malloc_array(n, 1);
	if (!f)
		return false;
	memset(f, 1, n);
	bool ok = v_str(s, n, f, out);
	fx_free(f);
	return ok;
}

bool v_list_new(bool tuple, struct value *out)
{
	struct vlist *l = fx_calloc(1, sizeof(*l));
	if (!l)
		return false;
	l->rc = 1;
	l->tuple = tuple;
	*out = (struct value){ .kind = V_LIST };
	out->l = l;
	return true;
}

bool v_dict_new(struct value *out)
{
	struct vdict *d = fx_calloc(1, sizeof(*d));
	if (!d)
		return false;
	d->rc = 1;
	*out = (struct value){ .kind = V_DICT };
	out->d = d;
	return true;
}

bool v_func_new(int id, const char *name, const struct value *self, struct value *out)
{
	struct vfunc *fn = fx_calloc(1, sizeof(*fn));
	if (!fn)
		return false;
	fn->rc = 1;
	fn->id = id;
	fn->name = name;
	if (self) {
		if (!(fn->self = fx_calloc(1, sizeof(*fn->self)))) {
			fx_free(fn);
			return false;
		}
		*fn->self = v_ref(*self);
	}
	*out = (struct value){ .kind = V_FUNC };
	out->fn = fn;
	return true;
}

struct value v_ref(struct value v)
{
	switch (v.kind) {
	case V_STR: v.s->rc++; break;
	case V_LIST: v.l->rc++; break;
	case V_DICT: v.d->rc++; break;
	case V_FUNC: v.fn->rc++; break;
	default: break;
	}
	return v;
}

void v_drop(struct value *v)
{
	switch (v->kind) {
	case V_STR:
		if (--v->s->rc == 0) {
			fx_free(v->s->flags);
			fx_free(v->s);
		}
		break;
	case V_LIST:
		if (--v->l->rc == 0) {
			for (size_t i = 0; i < v->l->n; i++)
				v_drop(&v->l->a[i]);
			fx_free(v->l->a);
			fx_free(v->l);
		}
		break;
	case V_DICT:
		if (--v->d->rc == 0) {
			for (size_t i = 0; i < v->d->n; i++) {
				v_drop(&v->d->k[i]);
				v_drop(&v->d->v[i]);
			}
			fx_free(v->d->k);
			fx_free(v->d->v);
			fx_free(v->d);
		}
		break;
	case V_FUNC:
		if (--v->fn->rc == 0) {
			if (v->fn->self) {
				v_drop(v->fn->self);
				fx_free(v->fn->self);
			}
			fx_free(v->fn);
		}
		break;
	default:
		break;
	}
	*v = v_undef(NULL);
}

bool list_push(struct vlist *l, struct value v)
{
	if (l->n == l->cap) {
		size_t cap = l->cap ? 2 * l->cap : 8;
		struct value *a = fx_realloc_array(l->a, cap, sizeof(*a));
		if (!a) {
			v_drop(&v);
			return false;
		}
		l->a = a;
		l->cap = cap;
	}
	l->a[l->n++] = v;
	return true;
}

struct value *dict_get(const struct vdict *d, const struct value *key)
{
	for (size_t i = 0; i < d->n; i++)
		if (v_equal(&d->k[i], key))
			return &d->v[i];
	return NULL;
}

struct value *dict_get_str(const struct vdict *d, const char *key)
{
	size_t n = strlen(key);
	for (size_t i = 0; i < d->n; i++)
		if (d->k[i].kind == V_STR && d->k[i].s->n == n && !memcmp(d->k[i].s->p, key, n))
			return &d->v[i];
	return NULL;
}

bool dict_set(struct vdict *d, const struct value *key, struct value v)
{
	struct value *slot = dict_get(d, key);
	if (slot) {
		v_drop(slot);
		*slot = v;
		return true;
	}
	if (d->n == d->cap) {
		size_t cap = d->cap ? 2 * d->cap : 8;
		struct value *k = fx_realloc_array(d->k, cap, sizeof(*k));
		if (!k) {
			v_drop(&v);
			return false;
		}
		d->k = k;
		struct value *vv = fx_realloc_array(d->v, cap, sizeof(*vv));
		if (!vv) {
			v_drop(&v);
			return false;
		}
		d->v = vv;
		d->cap = cap;
	}
	d->k[d->n] = v_ref(*key);
	d->v[d->n++] = v;
	return true;
}

bool dict_set_str(struct vdict *d, const char *key, struct value v)
{
	struct value k;
	if (!v_str(key, strlen(key), NULL, &k)) {
		v_drop(&v);
		return false;
	}
	bool ok = dict_set(d, &k, v);
	v_drop(&k);
	return ok;
}

/* ---- Python semantics ------------------------------------------------- */

bool v_truthy(const struct value *v)
{
	switch (v->kind) {
	case V_BOOL: return v->b;
	case V_INT: return v->i != 0;
	case V_FLOAT: return v->f != 0;
	case V_STR: return v->s->n != 0;
	case V_LIST: return v->l->gen || v->l->n != 0;
	case V_DICT: return v->d->ns || v->d->loop || v->d->n != 0;
	case V_FUNC: case V_MACRO: return true;
	default: return false;
	}
}

bool v_is_num(const struct value *v)
{
	return v->kind == V_BOOL || v->kind == V_INT || v->kind == V_FLOAT;
}

double v_num(const struct value *v)
{
	return v->kind == V_FLOAT ? v->f : v->kind == V_INT ? (double)v->i : v->kind == V_BOOL ? v->b : 0;
}

static int64_t v_intval(const struct value *v)
{
	return v->kind == V_INT ? v->i : v->kind == V_BOOL ? v->b : 0;
}

bool v_equal(const struct value *a, const struct value *b)
{
	if (v_is_num(a) && v_is_num(b)) {
		if (a->kind != V_FLOAT && b->kind != V_FLOAT)
			return v_intval(a) == v_intval(b);
		return v_num(a) == v_num(b);
	}
	if (a->kind != b->kind)
		return false;
	switch (a->kind) {
	case V_UNDEF: case V_NONE: return true;
	case V_STR: return a->s->n == b->s->n && !memcmp(a->s->p, b->s->p, a->s->n);
	case V_LIST:
		if (a->l->tuple != b->l->tuple || a->l->n != b->l->n)
			return false;
		for (size_t i = 0; i < a->l->n; i++)
			if (!v_equal(&a->l->a[i], &b->l->a[i]))
				return false;
		return true;
	case V_DICT:
		if (a->d->ns || b->d->ns || a->d->loop || b->d->loop)
			return a->d == b->d;
		if (a->d->n != b->d->n)
			return false;
		for (size_t i = 0; i < a->d->n; i++) {
			const struct value *o = dict_get(b->d, &a->d->k[i]);
			if (!o || !v_equal(&a->d->v[i], o))
				return false;
		}
		return true;
	case V_FUNC: return a->fn == b->fn;
	case V_MACRO: return a->macro == b->macro;
	default: return false;
	}
}

bool v_compare(const struct value *a, const struct value *b, int *cmp)
{
	if (v_is_num(a) && v_is_num(b)) {
		if (a->kind != V_FLOAT && b->kind != V_FLOAT) {
			int64_t x = v_intval(a), y = v_intval(b);
			*cmp = x < y ? -1 : x > y;
		} else {
			double x = v_num(a), y = v_num(b);
			*cmp = x < y ? -1 : x > y; /* NaN compares as equal here: rare */
		}
		return true;
	}
	if (a->kind == V_STR && b->kind == V_STR) {
		size_t n = a->s->n < b->s->n ? a->s->n : b->s->n;
		int c = memcmp(a->s->p, b->s->p, n); /* UTF-8 byte order = code point order */
		*cmp = c ? (c < 0 ? -1 : 1) : (a->s->n < b->s->n ? -1 : a->s->n > b->s->n);
		return true;
	}
	if (a->kind == V_LIST && b->kind == V_LIST && a->l->tuple == b->l->tuple) {
		size_t n = a->l->n < b->l->n ? a->l->n : b->l->n;
		for (size_t i = 0; i < n; i++) {
			if (v_equal(&a->l->a[i], &b->l->a[i]))
				continue;
			return v_compare(&a->l->a[i], &b->l->a[i], cmp);
		}
		*cmp = a->l->n < b->l->n ? -1 : a->l->n > b->l->n;
		return true;
	}
	return false;
}

const char *v_type_name(const struct value *v)
{
	switch (v->kind) {
	case V_UNDEF: return "Undefined";
	case V_NONE: return "NoneType";
	case V_BOOL: return "bool";
	case V_INT: return "int";
	case V_FLOAT: return "float";
	case V_STR: return v->s->markup ? "Markup" : "str";
	case V_LIST: return v->l->gen ? "generator" : v->l->range ? "range" : v->l->tuple ? "tuple" : "list";
	case V_DICT: return v->d->ns ? "Namespace" : v->d->loop ? "LoopContext" : "dict";
	case V_FUNC: return "builtin_function_or_method";
	case V_MACRO: return "Macro";
	default: return "object";
	}
}

/* ---- UTF-8 ------------------------------------------------------------ */

size_t u8_decode(const char *s, size_t n, uint32_t *cp)
{
	const unsigned char *u = (const unsigned char *)s;
	unsigned char c = u[0];
	size_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
	if (len == 0 || len > n) {
		*cp = c;
		return 1;
	}
	uint32_t v = len == 1 ? c : len == 2 ? (c & 0x1fu) : len == 3 ? (c & 0x0fu) : (c & 0x07u);
	for (size_t i = 1; i < len; i++) {
		if ((u[i] & 0xc0) != 0x80) {
			*cp = c;
			return 1;
		}
		v = (v << 6) | (u[i] & 0x3fu);
	}
	*cp = v;
	return len;
}

size_t u8_encode(uint32_t cp, char *out)
{
	unsigned char *o = (unsigned char *)out;
	if (cp < 0x80) {
		o[0] = (unsigned char)cp;
		return 1;
	}
	if (cp < 0x800) {
		o[0] = (unsigned char)(0xc0 | (cp >> 6));
		o[1] = (unsigned char)(0x80 | (cp & 0x3f));
		return 2;
	}
	if (cp < 0x10000) {
		o[0] = (unsigned char)(0xe0 | (cp >> 12));
		o[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
		o[2] = (unsigned char)(0x80 | (cp & 0x3f));
		return 3;
	}
	o[0] = (unsigned char)(0xf0 | (cp >> 18));
	o[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3f));
	o[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
	o[3] = (unsigned char)(0x80 | (cp & 0x3f));
	return 4;
}

size_t u8_count(const char *s, size_t n)
{
	size_t c = 0;
	for (size_t i = 0; i < n;) {
		uint32_t cp;
		i += u8_decode(s + i, n - i, &cp);
		c++;
	}
	return c;
}

size_t u8_offset(const char *s, size_t n, size_t idx)
{
	size_t i = 0;
	while (idx-- && i < n) {
		uint32_t cp;
		i += u8_decode(s + i, n - i, &cp);
	}
	return i;
}

bool py_isspace(uint32_t c)
{
	return (c >= 9 && c <= 13) || (c >= 0x1c && c <= 0x20) || c == 0x85 || c == 0xa0 ||
	       c == 0x1680 || (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 ||
	       c == 0x202f || c == 0x205f || c == 0x3000;
}

/* ---- str() and repr() ------------------------------------------------- */

void py_float_repr(double f, char *buf)
{
	if (isnan(f)) {
		strcpy(buf, "nan");
		return;
	}
	if (isinf(f)) {
		strcpy(buf, f < 0 ? "-inf" : "inf");
		return;
	}
	if (f == 0) {
		strcpy(buf, signbit(f) ? "-0.0" : "0.0");
		return;
	}
	char e[40];
	int prec;
	for (prec = 1; prec <= 17; prec++) {
		snprintf(e, sizeof(e), "%.*e", prec - 1, f);
		if (strtod(e, NULL) == f)
			break;
	}
	/* e: [-]d[.ddd]e[+-]XX -> digits and decimal exponent */
	char digits[24];
	int nd = 0, neg = e[0] == '-';
	const char *p = e + neg;
	for (; *p && *p != 'e'; p++)
		if (*p >= '0' && *p <= '9')
			digits[nd++] = *p;
	while (nd > 1 && digits[nd - 1] == '0')
		nd--;
	digits[nd] = 0;
	int exp = atoi(p + 1);
	char *o = buf;
	if (neg)
		*o++ = '-';
	if (exp >= -4 && exp < 16) {
		if (exp < 0) {
			*o++ = '0';
			*o++ = '.';
			for (int i = 0; i < -exp - 1; i++)
				*o++ = '0';
			memcpy(o, digits, (size_t)nd);
			o += nd;
		} else {
			for (int i = 0; i <= exp; i++)
				*o++ = i < nd ? digits[i] : '0';
			*o++ = '.';
			if (nd > exp + 1) {
				memcpy(o, digits + exp + 1, (size_t)(nd - exp - 1));
				o += nd - exp - 1;
			} else {
				*o++ = '0';
			}
		}
		*o = 0;
		return;
	}
	*o++ = digits[0];
	if (nd > 1) {
		*o++ = '.';
		memcpy(o, digits + 1, (size_t)(nd - 1));
		o += nd - 1;
	}
	sprintf(o, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
}

/* repr() leaves printable characters alone; these are not printable. */
static bool py_unprintable(uint32_t c)
{
	return c < 0x20 || (c >= 0x7f && c <= 0xa0) || c == 0xad || c == 0x1680 ||
	       (c >= 0x2000 && c <= 0x200f) || (c >= 0x2028 && c <= 0x202f) ||
	       (c >= 0x205f && c <= 0x206f) || c == 0x3000 || c == 0xfeff ||
	       (c >= 0xfff9 && c <= 0xfffb) || c == 0xfffe || c == 0xffff ||
	       (c >= 0xd800 && c <= 0xdfff) || (c >= 0xe000 && c <= 0xf8ff) || c > 0x10ffff;
}

static void write_repr_str(struct sbuf *b, const struct vstr *s)
{
	bool has_sq = memchr(s->p, '\'', s->n) != NULL, has_dq = memchr(s->p, '"', s->n) != NULL;
	char q = has_sq && !has_dq ? '"' : '\'';
	uint8_t fl0 = 0;
	sb_put(b, &q, 1, 0);
	for (size_t i = 0; i < s->n;) {
		uint32_t c;
		size_t len = u8_decode(s->p + i, s->n - i, &c);
		uint8_t fl = s->flags ? s->flags[i] : fl0;
		char tmp[16];
		if (c == '\\' || c == (uint32_t)q) {
			tmp[0] = '\\';
			tmp[1] = (char)c;
			sb_put(b, tmp, 2, fl);
		} else if (c == '\n') {
			sb_put(b, "\\n", 2, fl);
		} else if (c == '\r') {
			sb_put(b, "\\r", 2, fl);
		} else if (c == '\t') {
			sb_put(b, "\\t", 2, fl);
		} else if (len == 1 && c >= 0x80) {
			sb_printf(b, fl, "\\udc%02x", (unsigned)c); /* surrogateescape-like */
		} else if (py_unprintable(c)) {
			if (c < 0x100)
				sb_printf(b, fl, "\\x%02x", (unsigned)c);
			else if (c < 0x10000)
				sb_printf(b, fl, "\\u%04x", (unsigned)c);
			else
				sb_printf(b, fl, "\\U%08x", (unsigned)c);
		} else {
			sb_put(b, s->p + i, len, fl);
		}
		i += len;
	}
	sb_put(b, &q, 1, 0);
}

void v_write(struct sbuf *b, const struct value *v, bool repr)
{
	uint8_t fl = v->data;
	char tmp[40];
	switch (v->kind) {
	case V_UNDEF:
		break;
	case V_NONE:
		sb_puts(b, "None", fl);
		break;
	case V_BOOL:
		sb_puts(b, v->b ? "True" : "False", fl);
		break;
	case V_INT:
		sb_printf(b, fl, "%lld", (long long)v->i);
		break;
	case V_FLOAT:
		py_float_repr(v->f, tmp);
		sb_puts(b, tmp, fl);
		break;
	case V_STR:
		if (repr)
			write_repr_str(b, v->s);
		else
			sb_putf(b, v->s->p, v->s->n, v->s->flags);
		break;
	case V_LIST:
		sb_put(b, v->l->tuple ? "(" : "[", 1, fl);
		for (size_t i = 0; i < v->l->n; i++) {
			if (i)
				sb_put(b, ", ", 2, fl);
			v_write(b, &v->l->a[i], true);
		}
		if (v->l->tuple && v->l->n == 1)
			sb_put(b, ",", 1, fl);
		sb_put(b, v->l->tuple ? ")" : "]", 1, fl);
		break;
	case V_DICT:
		if (v->d->ns || v->d->loop) {
			sb_puts(b, v->d->ns ? "<Namespace " : "<LoopContext ", fl);
			sb_put(b, "{", 1, fl);
		} else {
			sb_put(b, "{", 1, fl);
		}
		for (size_t i = 0; i < v->d->n; i++) {
			if (i)
				sb_put(b, ", ", 2, fl);
			v_write(b, &v->d->k[i], true);
			sb_put(b, ": ", 2, fl);
			v_write(b, &v->d->v[i], true);
		}
		sb_puts(b, v->d->ns || v->d->loop ? "}>" : "}", fl);
		break;
	case V_FUNC:
		sb_printf(b, fl, "<built-in method %s>", v->fn->name);
		break;
	case V_MACRO:
		sb_puts(b, "<Macro>", fl);
		break;
	}
}
