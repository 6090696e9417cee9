/* Builtins of the chat-template interpreter: globals (range, namespace,
 * raise_exception, strftime_now, dict), jinja2's sandboxed getattr and
 * getitem, methods of str / list / dict, Python's binary operators and
 * iteration. Filters and tests are in filters.c. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "chat/eval.h"
#include "core/alloc.h"

bool chat_substr(const struct value *s, size_t off, size_t len, struct value *out)
{
	return v_str(s->s->p + off, len, s->s->flags ? s->s->flags + off : NULL, out);
}

int chat_to_str(struct ev *e, const struct value *v, struct value *out)
{
	if (v->kind == V_STR) {
		*out = v_ref(*v);
		return FX_OK;
	}
	struct sbuf b = { 0 };
	v_write(&b, v, false);
	return sb_to_str(&b, out) ? FX_OK : ev_oom(e);
}

int chat_iter(struct ev *e, const struct value *v, struct value *out)
{
	if (!v_list_new(false, out))
		return ev_oom(e);
	out->data = v->data;
	switch (v->kind) {
	case V_UNDEF:
		return FX_OK;
	case V_LIST:
		for (size_t i = 0; i < v->l->n; i++)
			if (!list_push(out->l, v_ref(v->l->a[i])))
				goto oom;
		return FX_OK;
	case V_DICT:
		if (v->d->ns || v->d->loop)
			break;
		for (size_t i = 0; i < v->d->n; i++)
			if (!list_push(out->l, v_ref(v->d->k[i])))
				goto oom;
		return FX_OK;
	case V_STR:
		for (size_t i = 0; i < v->s->n;) {
			uint32_t cp;
			size_t len = u8_decode(v->s->p + i, v->s->n - i, &cp);
			struct value c;
			if (!chat_substr(v, i, len, &c) || !list_push(out->l, c))
				goto oom;
			i += len;
		}
		return FX_OK;
	default:
		break;
	}
	v_drop(out);
	return ev_fail(e, "'%s' object is not iterable", v_type_name(v));
oom:
	v_drop(out);
	return ev_oom(e);
}

/* ---- globals ---------------------------------------------------------- */

bool chat_global(const char *name, struct value *out, bool *oom)
{
	static const struct {
		const char *name;
		int id;
	} g[] = {
		{ "range", FN_RANGE }, { "namespace", FN_NAMESPACE }, { "raise_exception", FN_RAISE },
		{ "strftime_now", FN_STRFTIME }, { "dict", FN_DICT },
	};
	for (size_t i = 0; i < sizeof(g) / sizeof(g[0]); i++)
		if (!strcmp(name, g[i].name)) {
			if (!v_func_new(g[i].id, g[i].name, NULL, out)) {
				*oom = true;
				return false;
			}
			return true;
		}
	return false;
}

/* ---- getattr / getitem ------------------------------------------------ */

static const char *const str_methods[] = {
	"startswith", "endswith", "split", "rsplit", "strip", "lstrip", "rstrip", "replace",
	"upper", "lower", "title", "capitalize", "find", "rfind", "count", "join", "splitlines",
	"isdigit", "isalpha", "isalnum", "isspace", "islower", "isupper", "index", "format",
	"removeprefix", "removesuffix", NULL,
};
static const char *const dict_methods[] = { "items", "keys", "values", "get", "copy", NULL };
static const char *const list_methods[] = { "index", "count", "copy", NULL };
static const char *const unsafe_list[] = {
	"access to attribute 'append' of 'list' object is unsafe.",
	"access to attribute 'extend' of 'list' object is unsafe.",
	"access to attribute 'insert' of 'list' object is unsafe.",
	"access to attribute 'pop' of 'list' object is unsafe.",
	"access to attribute 'remove' of 'list' object is unsafe.",
	"access to attribute 'clear' of 'list' object is unsafe.",
	"access to attribute 'sort' of 'list' object is unsafe.",
	"access to attribute 'reverse' of 'list' object is unsafe.",
	NULL,
};
static const char *const unsafe_dict[] = {
	"access to attribute 'pop' of 'dict' object is unsafe.",
	"access to attribute 'popitem' of 'dict' object is unsafe.",
	"access to attribute 'clear' of 'dict' object is unsafe.",
	"access to attribute 'update' of 'dict' object is unsafe.",
	"access to attribute 'setdefault' of 'dict' object is unsafe.",
	NULL,
};

static const char *find_name(const char *const *tab, const char *name)
{
	for (size_t i = 0; tab[i]; i++)
		if (!strcmp(tab[i], name))
			return tab[i];
	return NULL;
}

/* The sandbox's message for a mutating method, or NULL. */
static const char *unsafe_msg(const char *const *tab, const char *name)
{
	size_t n = strlen(name);
	for (size_t i = 0; tab[i]; i++) {
		const char *q = tab[i] + strlen("access to attribute '");
		if (!strncmp(q, name, n) && q[n] == '\'')
			return tab[i];
	}
	return NULL;
}

static int bound(struct ev *e, const struct value *obj, const char *name, struct value *out)
{
	return v_func_new(FN_METHOD, name, obj, out) ? FX_OK : ev_oom(e);
}

int chat_getattr(struct ev *e, const struct value *obj, const char *name, struct value *out)
{
	const char *m;
	if (obj->kind == V_UNDEF)
		return ev_fail(e, "'%s' is undefined", obj->uname ? obj->uname : "value");
	if (name[0] == '_') {
		*out = v_undef("access to an underscore attribute is unsafe.");
		return FX_OK;
	}
	switch (obj->kind) {
	case V_DICT:
		if (obj->d->loop && !strcmp(name, "cycle"))
			return v_func_new(FN_CYCLE, "cycle", obj, out) ? FX_OK : ev_oom(e);
		if (!obj->d->ns && !obj->d->loop) {
			if ((m = find_name(dict_methods, name)))
				return bound(e, obj, m, out);
			if ((m = unsafe_msg(unsafe_dict, name))) {
				*out = v_undef(m);
				return FX_OK;
			}
		}
		{
			const struct value *v = dict_get_str(obj->d, name);
			*out = v ? v_ref(*v) : v_undef(NULL);
		}
		return FX_OK;
	case V_STR:
		if ((m = find_name(str_methods, name)))
			return bound(e, obj, m, out);
		break;
	case V_LIST:
		if ((m = find_name(list_methods, name)))
			return bound(e, obj, m, out);
		if ((m = unsafe_msg(unsafe_list, name))) {
			*out = v_undef(m);
			return FX_OK;
		}
		break;
	default:
		break;
	}
	*out = v_undef(NULL);
	return FX_OK;
}

int chat_getitem(struct ev *e, const struct value *obj, const struct value *key, struct value *out)
{
	if (obj->kind == V_UNDEF)
		return ev_fail(e, "'%s' is undefined", obj->uname ? obj->uname : "value");
	if ((obj->kind == V_LIST || obj->kind == V_STR) && (key->kind == V_INT || key->kind == V_BOOL)) {
		int64_t i = key->kind == V_INT ? key->i : key->b;
		int64_t len = obj->kind == V_LIST ? (int64_t)obj->l->n : (int64_t)u8_count(obj->s->p, obj->s->n);
		if (i < 0)
			i += len;
		if (i < 0 || i >= len) {
			*out = v_undef(NULL);
			return FX_OK;
		}
		if (obj->kind == V_LIST) {
			*out = v_ref(obj->l->a[i]);
			return FX_OK;
		}
		size_t off = u8_offset(obj->s->p, obj->s->n, (size_t)i);
		uint32_t cp;
		size_t cl = u8_decode(obj->s->p + off, obj->s->n - off, &cp);
		return chat_substr(obj, off, cl, out) ? FX_OK : ev_oom(e);
	}
	if (obj->kind == V_DICT && !obj->d->ns && !obj->d->loop) {
		const struct value *v = dict_get(obj->d, key);
		if (v) {
			*out = v_ref(*v);
			return FX_OK;
		}
	}
	if (key->kind == V_STR && !memchr(key->s->p, 0, key->s->n))
		return chat_getattr(e, obj, key->s->p, out);
	*out = v_undef(NULL);
	return FX_OK;
}

/* ---- argument helpers ------------------------------------------------- */

/* Argument i (positional) or named kw; NULL when absent. */
const struct value *cargs_get(const struct cargs *a, size_t i, const char *kw)
{
	if (i < a->npos)
		return &a->pos[i];
	for (size_t k = 0; kw && k < a->nkw; k++)
		if (!strcmp(a->kwn[k], kw))
			return &a->kwv[k];
	return NULL;
}

/* ---- str methods ------------------------------------------------------ */

static bool cp_in(uint32_t c, const struct value *chars)
{
	if (!chars || chars->kind == V_NONE)
		return py_isspace(c);
	for (size_t i = 0; i < chars->s->n;) {
		uint32_t d;
		i += u8_decode(chars->s->p + i, chars->s->n - i, &d);
		if (d == c)
			return true;
	}
	return false;
}

/* str.strip family: which = 1 left, 2 right, 3 both. */
int chat_strip(struct ev *e, const struct value *s, const struct value *chars, int which, struct value *out)
{
	if (chars && chars->kind != V_NONE && chars->kind != V_STR)
		return ev_fail(e, "strip arg must be None or str");
	size_t b = 0, end = s->s->n;
	if (which & 1)
		while (b < end) {
			uint32_t c;
			size_t l = u8_decode(s->s->p + b, end - b, &c);
			if (!cp_in(c, chars))
				break;
			b += l;
		}
	if (which & 2) {
		size_t keep = b;
		for (size_t i = b; i < end;) {
			uint32_t c;
			size_t l = u8_decode(s->s->p + i, end - i, &c);
			i += l;
			if (!cp_in(c, chars))
				keep = i;
		}
		end = keep;
	}
	return chat_substr(s, b, end - b, out) ? FX_OK : ev_oom(e);
}

/* Push s[st, end) onto list out; false on OOM. */
static bool push_piece(struct value *out, const struct value *s, size_t st, size_t end)
{
	struct value piece;
	return chat_substr(s, st, end - st, &piece) && list_push(out->l, piece);
}

/* str.split / str.rsplit (sep None: runs of whitespace, no empty pieces). */
static int str_split(struct ev *e, const struct value *s, const struct value *sep,
		     const struct value *maxv, bool right, struct value *out)
{
	int64_t max = maxv && maxv->kind == V_INT ? maxv->i : -1, done = 0;
	const char *p = s->s->p;
	size_t n = s->s->n;
	bool ok = true;
	if (sep && sep->kind != V_NONE && (sep->kind != V_STR || !sep->s->n))
		return ev_fail(e, sep->kind == V_STR ? "empty separator" : "must be str or None");
	if (!v_list_new(false, out))
		return ev_oom(e);
	if (sep && sep->kind != V_NONE) {
		size_t sn = sep->s->n;
		if (!right) {
			size_t st = 0;
			for (size_t i = 0; ok && i + sn <= n && (max < 0 || done < max);) {
				if (!memcmp(p + i, sep->s->p, sn)) {
					ok = push_piece(out, s, st, i);
					done++;
					st = i += sn;
				} else {
					i++;
				}
			}
			ok = ok && push_piece(out, s, st, n);
		} else { /* collect from the right, then reverse */
			size_t end = n;
			for (size_t i = n; ok && i >= sn && (max < 0 || done < max);) {
				if (!memcmp(p + i - sn, sep->s->p, sn)) {
					ok = push_piece(out, s, i, end);
					done++;
					end = i -= sn;
				} else {
					i--;
				}
			}
			ok = ok && push_piece(out, s, 0, end);
			for (size_t i = 0, j = out->l->n; ok && i + 1 < j; i++, j--) {
				struct value t = out->l->a[i];
				out->l->a[i] = out->l->a[j - 1];
				out->l->a[j - 1] = t;
			}
		}
		if (!ok) {
			v_drop(out);
			return ev_oom(e);
		}
		return FX_OK;
	}
	if (right && max >= 0) {
		v_drop(out);
		return ev_fail(e, "rsplit() with maxsplit on whitespace is not supported");
	}
	size_t i = 0;
	while (ok && i < n) {
		uint32_t c;
		size_t l;
		while (i < n && (l = u8_decode(p + i, n - i, &c)) && py_isspace(c))
			i += l;
		if (i >= n)
			break;
		size_t st = i;
		if (max >= 0 && done == max) { /* the rest, as it is */
			ok = push_piece(out, s, st, n);
			break;
		}
		while (i < n && (l = u8_decode(p + i, n - i, &c)) && !py_isspace(c))
			i += l;
		ok = push_piece(out, s, st, i);
		done++;
	}
	if (!ok) {
		v_drop(out);
		return ev_oom(e);
	}
	return FX_OK;
}

int chat_replace(struct ev *e, const struct value *s, const struct value *old, const struct value *new_,
		 int64_t count, struct value *out)
{
	struct sbuf b = { 0 };
	const char *p = s->s->p;
	size_t n = s->s->n, on = old->s->n, i = 0;
	int64_t done = 0;
	if (on == 0) { /* Python inserts new between every character */
		for (size_t k = 0; k <= n;) {
			if (count < 0 || done < count) {
				sb_putf(&b, new_->s->p, new_->s->n, new_->s->flags);
				done++;
			}
			if (k == n)
				break;
			uint32_t c;
			size_t l = u8_decode(p + k, n - k, &c);
			sb_putf(&b, p + k, l, s->s->flags ? s->s->flags + k : NULL);
			k += l;
		}
		return sb_to_str(&b, out) ? FX_OK : ev_oom(e);
	}
	while (i < n) {
		if ((count < 0 || done < count) && i + on <= n && !memcmp(p + i, old->s->p, on)) {
			sb_putf(&b, new_->s->p, new_->s->n, new_->s->flags);
			i += on;
			done++;
		} else {
			sb_putf(&b, p + i, 1, s->s->flags ? s->s->flags + i : NULL);
			i++;
		}
	}
	return sb_to_str(&b, out) ? FX_OK : ev_oom(e);
}

/* isalpha (approximate beyond Latin-1: any non-ASCII code point counts) */
static bool cp_alpha(uint32_t c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= 0xc0 && c != 0xd7 && c != 0xf7);
}


static int str_find(const struct value *s, const struct value *sub, bool right, bool count)
{
	const char *p = s->s->p;
	size_t n = s->s->n, m = sub->s->n;
	int found = -1, c = 0;
	if (m == 0)
		return count ? (int)u8_count(p, n) + 1 : right ? (int)u8_count(p, n) : 0;
	for (size_t i = 0; i + m <= n; i++)
		if (!memcmp(p + i, sub->s->p, m)) {
			if (count) {
				c++;
				i += m - 1;
				continue;
			}
			found = (int)u8_count(p, i);
			if (!right)
				return found;
		}
	return count ? c : found;
}

static bool affix(const struct value *s, const struct value *x, bool end)
{
	if (x->kind != V_STR)
		return false;
	if (x->s->n > s->s->n)
		return false;
	return !memcmp(s->s->p + (end ? s->s->n - x->s->n : 0), x->s->p, x->s->n);
}


/* One replacement field of str.format: value v with conversion conv
 * ('r', 's' or 0) and spec ([[fill]align][width][.precision][type] with
 * types s, d, f; empty: str(v)). */
static int format_field(struct ev *e, struct sbuf *b, const struct value *v, char conv, const char *spec)
{
	struct sbuf t = { 0 };
	char fill = ' ', align = 0, type = 0;
	long width = 0, prec = -1;
	const char *p = spec;
	if (p[0] && p[1] && strchr("<>^", p[1])) {
		fill = p[0];
		align = p[1];
		p += 2;
	} else if (p[0] && strchr("<>^", p[0])) {
		align = *p++;
	}
	while (*p >= '0' && *p <= '9')
		width = width * 10 + (*p++ - '0');
	if (*p == '.') {
		prec = 0;
		for (p++; *p >= '0' && *p <= '9'; p++)
			prec = prec * 10 + (*p - '0');
	}
	if (*p && strchr("sdf", *p))
		type = *p++;
	if (*p || width > 4096 || prec > 100)
		return ev_fail(e, "format spec '%s' is not supported", spec);
	if (type == 'f' || (type == 'd' && v->kind != V_INT && v->kind != V_BOOL)) {
		if (!v_is_num(v) || (type == 'd' && v->kind == V_FLOAT))
			return ev_fail(e, "unknown format code '%c' for object of type '%s'", type, v_type_name(v));
	}
	if (type == 'f') {
		char tmp[160];
		snprintf(tmp, sizeof(tmp), "%.*f", (int)(prec < 0 ? 6 : prec), v_num(v));
		sb_puts(&t, tmp, v->data);
	} else if (type == 'd') {
		sb_printf(&t, v->data, "%lld", (long long)(v->kind == V_INT ? v->i : v->b));
	} else {
		if (type == 's' && v->kind != V_STR)
			return ev_fail(e, "unknown format code 's' for object of type '%s'", v_type_name(v));
		v_write(&t, v, conv == 'r');
		if (prec >= 0 && t.n) { /* precision cuts a string */
			size_t cut = u8_offset(t.p, t.n, (size_t)prec);
			t.n = cut;
		}
	}
	if (!align)
		align = (v_is_num(v) && conv == 0 && v->kind != V_BOOL) || type == 'd' || type == 'f' ? '>' : '<';
	long len = t.p ? (long)u8_count(t.p, t.n) : 0, pad = width > len ? width - len : 0;
	long left = align == '>' ? pad : align == '^' ? pad / 2 : 0;
	for (long i = 0; i < left; i++)
		sb_put(b, &fill, 1, 0);
	sb_putf(b, t.p ? t.p : "", t.n, t.any ? t.f : NULL);
	for (long i = 0; i < pad - left; i++)
		sb_put(b, &fill, 1, 0);
	bool oom = t.oom;
	sb_free(&t);
	return oom ? ev_oom(e) : FX_OK;
}

/* str.format: {} {0} {name}, !r/!s, a simple spec; {{ and }} escapes. */
static int str_format_method(struct ev *e, const struct value *s, struct cargs *a, struct value *out)
{
	struct sbuf b = { 0 };
	const char *p = s->s->p, *end = p + s->s->n;
	int autonum = 0; /* 0 unset, 1 automatic, 2 manual */
	size_t next_i = 0;
	int rc = FX_OK;
	while (p < end && !rc) {
		size_t off = (size_t)(p - s->s->p);
		if ((*p == '{' || *p == '}') && p + 1 < end && p[1] == *p) {
			sb_putf(&b, p, 1, s->s->flags ? s->s->flags + off : NULL);
			p += 2;
			continue;
		}
		if (*p == '}') {
			rc = ev_fail(e, "single '}' encountered in format string");
			break;
		}
		if (*p != '{') {
			sb_putf(&b, p, 1, s->s->flags ? s->s->flags + off : NULL);
			p++;
			continue;
		}
		const char *q = memchr(p, '}', (size_t)(end - p));
		char field[128], conv = 0, *spec;
		if (!q || (size_t)(q - p - 1) >= sizeof(field)) {
			rc = ev_fail(e, "unmatched '{' in format string");
			break;
		}
		memcpy(field, p + 1, (size_t)(q - p - 1));
		field[q - p - 1] = 0;
		p = q + 1;
		spec = strchr(field, ':');
		if (spec)
			*spec++ = 0;
		char *bang = strchr(field, '!');
		if (bang) {
			conv = bang[1];
			*bang = 0;
			if ((conv != 'r' && conv != 's') || bang[2]) {
				rc = ev_fail(e, "unsupported conversion in format string");
				break;
			}
			if (conv == 's')
				conv = 0;
		}
		if (strpbrk(field, ".[{")) {
			rc = ev_fail(e, "attribute and index fields in str.format are not supported");
			break;
		}
		const struct value *v = NULL;
		if (!field[0] || (field[0] >= '0' && field[0] <= '9')) {
			int mode = field[0] ? 2 : 1;
			size_t idx = field[0] ? (size_t)strtoul(field, NULL, 10) : next_i++;
			if (autonum && autonum != mode) {
				rc = ev_fail(e, "cannot switch between automatic and manual field numbering");
				break;
			}
			autonum = mode;
			if (idx >= a->npos) {
				rc = ev_fail(e, "Replacement index %zu out of range for positional args tuple", idx);
				break;
			}
			v = &a->pos[idx];
		} else {
			for (size_t k = 0; k < a->nkw && !v; k++)
				if (!strcmp(a->kwn[k], field))
					v = &a->kwv[k];
			if (!v) {
				rc = ev_fail(e, "str.format: no argument '%s'", field);
				break;
			}
		}
		rc = format_field(e, &b, v, conv, spec ? spec : "");
	}
	if (rc) {
		sb_free(&b);
		return rc;
	}
	return sb_to_str(&b, out) ? FX_OK : ev_oom(e);
}

static int call_str_method(struct ev *e, const char *m, const struct value *s, struct cargs *a, struct value *out)
{
	if (!strcmp(m, "format"))
		return str_format_method(e, s, a, out);
	const struct value *a0 = cargs_get(a, 0, NULL), *a1 = cargs_get(a, 1, NULL);
	if (!strcmp(m, "startswith") || !strcmp(m, "endswith")) {
		bool end = m[0] == 'e', r = false;
		if (!a0)
			return ev_fail(e, "%s() takes at least 1 argument", m);
		if (a0->kind == V_LIST) {
			for (size_t i = 0; i < a0->l->n && !r; i++)
				r = affix(s, &a0->l->a[i], end);
		} else if (a0->kind == V_STR) {
			r = affix(s, a0, end);
		} else {
			return ev_fail(e, "%s first arg must be str or a tuple of str, not %s", m, v_type_name(a0));
		}
		*out = v_bool(r);
		return FX_OK;
	}
	if (!strcmp(m, "removeprefix") || !strcmp(m, "removesuffix")) {
		if (!a0 || a0->kind != V_STR)
			return ev_fail(e, "%s() wants a string", m);
		bool pre = m[6] == 'p';
		if (!affix(s, a0, !pre)) {
			*out = v_ref(*s);
			return FX_OK;
		}
		return chat_substr(s, pre ? a0->s->n : 0, s->s->n - a0->s->n, out) ? FX_OK : ev_oom(e);
	}
	if (!strcmp(m, "split") || !strcmp(m, "rsplit"))
		return str_split(e, s, cargs_get(a, 0, "sep"), cargs_get(a, 1, "maxsplit"), m[0] == 'r', out);
	if (!strcmp(m, "strip") || !strcmp(m, "lstrip") || !strcmp(m, "rstrip"))
		return chat_strip(e, s, a0, m[0] == 'l' ? 1 : m[0] == 'r' ? 2 : 3, out);
	if (!strcmp(m, "replace")) {
		if (!a0 || !a1 || a0->kind != V_STR || a1->kind != V_STR)
			return ev_fail(e, "replace() wants two strings");
		const struct value *c = cargs_get(a, 2, "count");
		return chat_replace(e, s, a0, a1, c && c->kind == V_INT ? c->i : -1, out);
	}
	if (!strcmp(m, "upper") || !strcmp(m, "lower") || !strcmp(m, "title") || !strcmp(m, "capitalize"))
		return chat_case(e, s, m[0] == 'l' ? 0 : m[0] == 'u' ? 1 : m[0] == 't' ? 2 : 3, out);
	if (!strcmp(m, "find") || !strcmp(m, "rfind") || !strcmp(m, "count") || !strcmp(m, "index")) {
		if (!a0 || a0->kind != V_STR)
			return ev_fail(e, "%s() wants a string", m);
		int r = str_find(s, a0, m[0] == 'r', m[0] == 'c');
		if (m[0] == 'i' && r < 0)
			return ev_fail(e, "substring not found");
		*out = v_int(r);
		return FX_OK;
	}
	if (!strcmp(m, "join")) {
		struct value items;
		int rc;
		if (!a0)
			return ev_fail(e, "join() takes exactly one argument");
		if ((rc = chat_iter(e, a0, &items)))
			return rc;
		for (size_t i = 0; i < items.l->n; i++)
			if (items.l->a[i].kind != V_STR) {
				v_drop(&items);
				return ev_fail(e, "sequence item %zu: expected str instance, %s found", i,
					       v_type_name(&items.l->a[i]));
			}
		rc = chat_join(e, &items, s, out);
		v_drop(&items);
		return rc;
	}
	if (!strcmp(m, "splitlines")) {
		if (!v_list_new(false, out))
			return ev_oom(e);
		size_t st = 0, i = 0, n = s->s->n;
		while (i < n) {
			char c = s->s->p[i];
			if (c == '\n' || c == '\r') {
				struct value piece;
				if (!chat_substr(s, st, i - st, &piece) || !list_push(out->l, piece)) {
					v_drop(out);
					return ev_oom(e);
				}
				i += c == '\r' && i + 1 < n && s->s->p[i + 1] == '\n' ? 2 : 1;
				st = i;
			} else {
				i++;
			}
		}
		if (st < n) {
			struct value piece;
			if (!chat_substr(s, st, n - st, &piece) || !list_push(out->l, piece)) {
				v_drop(out);
				return ev_oom(e);
			}
		}
		return FX_OK;
	}
	if (!strncmp(m, "is", 2)) {
		bool r = s->s->n > 0, any_cased = false;
		for (size_t i = 0; i < s->s->n && r;) {
			uint32_t c;
			i += u8_decode(s->s->p + i, s->s->n - i, &c);
			if (!strcmp(m, "isdigit"))
				r = c >= '0' && c <= '9';
			else if (!strcmp(m, "isalpha"))
				r = cp_alpha(c);
			else if (!strcmp(m, "isalnum"))
				r = cp_alpha(c) || (c >= '0' && c <= '9');
			else if (!strcmp(m, "isspace"))
				r = py_isspace(c);
			else if (chat_is_cased(c, false) || chat_is_cased(c, true)) {
				any_cased = true;
				r = chat_is_cased(c, !strcmp(m, "isupper"));
			}
		}
		if (!strcmp(m, "islower") || !strcmp(m, "isupper"))
			r = r && any_cased;
		*out = v_bool(r);
		return FX_OK;
	}
	return ev_fail(e, "str.%s() is not supported", m);
}

static int call_method(struct ev *e, const struct vfunc *fn, struct cargs *a, struct value *out)
{
	const struct value *self = fn->self;
	const char *m = fn->name;
	const struct value *a0 = cargs_get(a, 0, NULL);
	if (self->kind == V_STR)
		return call_str_method(e, m, self, a, out);
	if (self->kind == V_DICT) {
		if (!strcmp(m, "get")) {
			const struct value *v = a0 ? dict_get(self->d, a0) : NULL;
			const struct value *def = cargs_get(a, 1, NULL);
			if (!a0)
				return ev_fail(e, "get expected at least 1 argument, got 0");
			*out = v ? v_ref(*v) : def ? v_ref(*def) : v_none();
			return FX_OK;
		}
		if (!strcmp(m, "copy")) {
			if (!v_dict_new(out))
				return ev_oom(e);
			for (size_t i = 0; i < self->d->n; i++)
				if (!dict_set(out->d, &self->d->k[i], v_ref(self->d->v[i]))) {
					v_drop(out);
					return ev_oom(e);
				}
			return FX_OK;
		}
		if (!v_list_new(false, out))
			return ev_oom(e);
		out->data = self->data;
		for (size_t i = 0; i < self->d->n; i++) {
			struct value item;
			if (m[0] == 'k') {
				item = v_ref(self->d->k[i]);
			} else if (m[0] == 'v') {
				item = v_ref(self->d->v[i]);
			} else {
				if (!v_list_new(true, &item)) {
					v_drop(out);
					return ev_oom(e);
				}
				item.data = self->data;
				if (!list_push(item.l, v_ref(self->d->k[i])) || !list_push(item.l, v_ref(self->d->v[i]))) {
					v_drop(&item);
					v_drop(out);
					return ev_oom(e);
				}
			}
			if (!list_push(out->l, item)) {
				v_drop(out);
				return ev_oom(e);
			}
		}
		return FX_OK;
	}
	if (self->kind == V_LIST) {
		if (!strcmp(m, "copy")) {
			if (!v_list_new(false, out))
				return ev_oom(e);
			for (size_t i = 0; i < self->l->n; i++)
				if (!list_push(out->l, v_ref(self->l->a[i]))) {
					v_drop(out);
					return ev_oom(e);
				}
			return FX_OK;
		}
		if (!a0)
			return ev_fail(e, "%s() takes exactly one argument", m);
		int64_t c = 0, idx = -1;
		for (size_t i = 0; i < self->l->n; i++)
			if (v_equal(&self->l->a[i], a0)) {
				c++;
				if (idx < 0)
					idx = (int64_t)i;
			}
		if (m[0] == 'i' && idx < 0)
			return ev_fail(e, "value is not in list");
		*out = v_int(m[0] == 'i' ? idx : c);
		return FX_OK;
	}
	return ev_fail(e, "'%s' object has no method '%s'", v_type_name(self), m);
}

int chat_call_func(struct ev *e, const struct value *fv, struct cargs *a, struct value *out)
{
	const struct vfunc *fn = fv->fn;
	const struct value *a0 = cargs_get(a, 0, NULL);
	switch (fn->id) {
	case FN_METHOD:
		return call_method(e, fn, a, out);
	case FN_RANGE: {
		int64_t v[3] = { 0, 0, 1 };
		if (a->npos < 1 || a->npos > 3)
			return ev_fail(e, "range expected 1 to 3 arguments, got %zu", a->npos);
		for (size_t i = 0; i < a->npos; i++) {
			if (a->pos[i].kind != V_INT && a->pos[i].kind != V_BOOL)
				return ev_fail(e, "'%s' object cannot be interpreted as an integer",
					       v_type_name(&a->pos[i]));
			v[a->npos == 1 ? 1 : i] = a->pos[i].kind == V_INT ? a->pos[i].i : a->pos[i].b;
		}
		if (v[2] == 0)
			return ev_fail(e, "range() arg 3 must not be zero");
		if (!v_list_new(false, out))
			return ev_oom(e);
		out->l->range = true;
		for (int64_t x = v[0]; v[2] > 0 ? x < v[1] : x > v[1]; x += v[2]) {
			if (out->l->n >= 100000) {
				v_drop(out);
				return ev_fail(e, "range too big (the sandbox allows 100000 items)");
			}
			if (!list_push(out->l, v_int(x))) {
				v_drop(out);
				return ev_oom(e);
			}
		}
		return FX_OK;
	}
	case FN_NAMESPACE:
	case FN_DICT:
		if (!v_dict_new(out))
			return ev_oom(e);
		out->d->ns = fn->id == FN_NAMESPACE;
		if (a0 && a0->kind == V_DICT)
			for (size_t i = 0; i < a0->d->n; i++)
				if (!dict_set(out->d, &a0->d->k[i], v_ref(a0->d->v[i]))) {
					v_drop(out);
					return ev_oom(e);
				}
		for (size_t i = 0; i < a->nkw; i++)
			if (!dict_set_str(out->d, a->kwn[i], v_ref(a->kwv[i]))) {
				v_drop(out);
				return ev_oom(e);
			}
		return FX_OK;
	case FN_RAISE: {
		struct value s;
		int rc;
		if (!a0)
			return ev_fail(e, "the template raised an exception");
		if ((rc = chat_to_str(e, a0, &s)))
			return rc;
		rc = ev_fail(e, "the template raised an exception: %s", s.s->p);
		v_drop(&s);
		return rc;
	}
	case FN_STRFTIME: {
		if (!a0 || a0->kind != V_STR)
			return ev_fail(e, "strftime_now wants a format string");
		time_t t = (time_t)e->now;
		struct tm tm;
		char buf[512];
		if (!localtime_r(&t, &tm))
			return ev_fail(e, "strftime_now: time out of range");
		size_t n = strftime(buf, sizeof(buf), a0->s->p, &tm);
		if (n == 0 && a0->s->n)
			buf[0] = 0;
		return v_str(buf, n, NULL, out) ? FX_OK : ev_oom(e);
	}
	case FN_CYCLE: {
		const struct value *i0 = dict_get_str(fn->self->d, "index0");
		if (!a->npos)
			return ev_fail(e, "no items for cycling given");
		*out = v_ref(a->pos[(size_t)i0->i % a->npos]);
		return FX_OK;
	}
	default:
		return ev_fail(e, "'%s' is not callable", fn->name);
	}
}

/* ---- operators -------------------------------------------------------- */

static int num_op(struct ev *e, int op, const struct value *a, const struct value *b, struct value *out)
{
	bool fl = a->kind == V_FLOAT || b->kind == V_FLOAT;
	int64_t x = a->kind == V_INT ? a->i : a->kind == V_BOOL ? a->b : 0;
	int64_t y = b->kind == V_INT ? b->i : b->kind == V_BOOL ? b->b : 0;
	double fx = v_num(a), fy = v_num(b);
	int64_t r64 = 0;
	if (!fl && ((op == OP_ADD && __builtin_add_overflow(x, y, &r64)) ||
		    (op == OP_SUB && __builtin_sub_overflow(x, y, &r64)) ||
		    (op == OP_MUL && __builtin_mul_overflow(x, y, &r64))))
		return ev_fail(e, "integer overflow (ferrox's integers are 64-bit, Python's unbounded)");
	switch (op) {
	case OP_ADD: *out = fl ? v_float(fx + fy) : v_int(r64); break;
	case OP_SUB: *out = fl ? v_float(fx - fy) : v_int(r64); break;
	case OP_MUL: *out = fl ? v_float(fx * fy) : v_int(r64); break;
	case OP_DIV:
		if (fy == 0)
			return ev_fail(e, "division by zero");
		*out = v_float(fx / fy);
		break;
	case OP_FLOORDIV:
	case OP_MOD:
		if (fl ? fy == 0 : y == 0)
			return ev_fail(e, "integer division or modulo by zero");
		if (fl) {
			double m = fmod(fx, fy);
			if (m != 0 && ((m < 0) != (fy < 0)))
				m += fy;
			*out = op == OP_MOD ? v_float(m) : v_float(floor(fx / fy));
		} else {
			if (x == INT64_MIN && y == -1)
				return ev_fail(e, "integer overflow (ferrox's integers are 64-bit, Python's unbounded)");
			int64_t q = x / y, r = x % y;
			if (r != 0 && ((r < 0) != (y < 0))) {
				q--;
				r += y;
			}
			*out = v_int(op == OP_MOD ? r : q);
		}
		break;
	case OP_POW:
		if (fx == 0 && fy < 0)
			return ev_fail(e, "0.0 cannot be raised to a negative power");
		if (fx < 0 && fy != floor(fy))
			return ev_fail(e, "a negative number to a fractional power is complex (not supported)");
		if (!fl && y >= 0) {
			int64_t r = 1;
			if (x == 0 || x == 1 || x == -1) /* no loop: y may be huge */
				r = x == 0 ? (y == 0) : x == 1 ? 1 : (y % 2 ? -1 : 1);
			else /* |x| >= 2 overflows within 63 steps */
				for (int64_t k = 0; k < y; k++)
					if (__builtin_mul_overflow(r, x, &r))
						return ev_fail(e, "integer overflow (ferrox's integers are 64-bit, "
							       "Python's unbounded)");
			*out = v_int(r);
		} else {
			*out = v_float(pow(fx, fy));
		}
		break;
	default:
		return ev_fail(e, "bad operator");
	}
	out->data = a->data && b->data;
	return FX_OK;
}

/* fmt % args: printf-style formatting with %s %r %d %i %f %% (flags -
 * and 0, a width, a precision); a tuple gives the arguments. */
static int str_format(struct ev *e, const struct value *fmt, const struct value *args, struct value *out)
{
	const struct value *av = args;
	size_t na = 1, used = 0;
	struct sbuf b = { 0 };
	/* Python lets a lone list or dict go unused (it might be a mapping) */
	bool may_skip = (args->kind == V_LIST && !args->l->tuple) || args->kind == V_DICT;
	if (args->kind == V_LIST && args->l->tuple) {
		av = args->l->a;
		na = args->l->n;
	}
	const char *p = fmt->s->p, *end = p + fmt->s->n;
	while (p < end) {
		if (*p != '%') {
			size_t off = (size_t)(p - fmt->s->p);
			sb_putf(&b, p, 1, fmt->s->flags ? fmt->s->flags + off : NULL);
			p++;
			continue;
		}
		char spec[32];
		size_t k = 0;
		spec[k++] = *p++;
		while (p < end && (*p == '-' || *p == '0' || *p == ' ' || *p == '+') && k < 8)
			spec[k++] = *p++;
		while (p < end && *p >= '0' && *p <= '9' && k < 16)
			spec[k++] = *p++;
		if (p < end && *p == '.') {
			spec[k++] = *p++;
			while (p < end && *p >= '0' && *p <= '9' && k < 24)
				spec[k++] = *p++;
		}
		if (p >= end) {
			sb_free(&b);
			return ev_fail(e, "incomplete format");
		}
		char conv = *p++;
		if (conv == '%') {
			sb_put(&b, "%", 1, 0);
			continue;
		}
		if (args->kind == V_DICT) {
			sb_free(&b);
			return ev_fail(e, "%%-formatting with a mapping is not supported");
		}
		if (used >= na) {
			sb_free(&b);
			return ev_fail(e, "not enough arguments for format string");
		}
		const struct value *x = &av[used++];
		char tmp[400];
		if (conv == 's' || conv == 'r') {
			struct sbuf t = { 0 };
			v_write(&t, x, conv == 'r');
			spec[k++] = 's';
			spec[k] = 0;
			if (t.oom) {
				sb_free(&t);
				sb_free(&b);
				return ev_oom(e);
			}
			if (k == 2) { /* plain %s keeps provenance */
				sb_putf(&b, t.p ? t.p : "", t.n, t.any ? t.f : NULL);
			} else {
				snprintf(tmp, sizeof(tmp), spec, t.p ? t.p : "");
				sb_puts(&b, tmp, x->data);
			}
			sb_free(&t);
		} else if ((conv == 'd' || conv == 'i') && x->kind == V_FLOAT && !(fabs(x->f) < 9.2e18)) {
			sb_free(&b);
			return ev_fail(e, "%%d of %g is beyond 64 bits (or not finite)", x->f);
		} else if ((conv == 'd' || conv == 'i' || conv == 'f') && v_is_num(x)) {
			if (conv == 'f') {
				spec[k++] = 'f';
				spec[k] = 0;
				snprintf(tmp, sizeof(tmp), spec, v_num(x));
			} else {
				spec[k++] = 'l';
				spec[k++] = 'l';
				spec[k++] = 'd';
				spec[k] = 0;
				snprintf(tmp, sizeof(tmp), spec,
					 (long long)(x->kind == V_FLOAT ? (int64_t)x->f : x->kind == V_INT ? x->i : x->b));
			}
			sb_puts(&b, tmp, x->data);
		} else {
			sb_free(&b);
			return ev_fail(e, "unsupported format character '%c' (or argument of type %s)", conv,
				       v_type_name(x));
		}
	}
	if (used < na && !(may_skip && used == 0)) {
		sb_free(&b);
		return ev_fail(e, "not all arguments converted during string formatting");
	}
	return sb_to_str(&b, out) ? FX_OK : ev_oom(e);
}

int chat_binop(struct ev *e, int op, const struct value *a, const struct value *b, struct value *out)
{
	static const char *names[] = { "+", "-", "*", "/", "//", "%", "**" };
	if (a->kind == V_UNDEF || b->kind == V_UNDEF) {
		const struct value *u = a->kind == V_UNDEF ? a : b;
		return ev_fail(e, "'%s' is undefined", u->uname ? u->uname : "value");
	}
	if (v_is_num(a) && v_is_num(b))
		return num_op(e, op, a, b, out);
	if (op == OP_ADD && a->kind == V_STR && b->kind == V_STR && (a->s->markup || b->s->markup)) {
		struct value x, y; /* Markup + str escapes the str (markupsafe) */
		if (!v_markup(a, true, &x))
			return ev_oom(e);
		if (!v_markup(b, true, &y)) {
			v_drop(&x);
			return ev_oom(e);
		}
		struct sbuf s = { 0 };
		sb_putf(&s, x.s->p, x.s->n, x.s->flags);
		sb_putf(&s, y.s->p, y.s->n, y.s->flags);
		v_drop(&x);
		v_drop(&y);
		if (!sb_to_str(&s, out))
			return ev_oom(e);
		out->s->markup = true;
		return FX_OK;
	}
	if (op == OP_ADD && a->kind == V_STR && b->kind == V_STR) {
		struct sbuf s = { 0 };
		sb_putf(&s, a->s->p, a->s->n, a->s->flags);
		sb_putf(&s, b->s->p, b->s->n, b->s->flags);
		return sb_to_str(&s, out) ? FX_OK : ev_oom(e);
	}
	if (op == OP_ADD && a->kind == V_LIST && b->kind == V_LIST && a->l->tuple == b->l->tuple) {
		if (!v_list_new(a->l->tuple, out))
			return ev_oom(e);
		for (size_t k = 0; k < 2; k++) {
			const struct vlist *l = k ? b->l : a->l;
			for (size_t i = 0; i < l->n; i++)
				if (!list_push(out->l, v_ref(l->a[i]))) {
					v_drop(out);
					return ev_oom(e);
				}
		}
		return FX_OK;
	}
	if (op == OP_MUL && ((a->kind == V_STR && (b->kind == V_INT || b->kind == V_BOOL)) ||
			     (b->kind == V_STR && (a->kind == V_INT || a->kind == V_BOOL)))) {
		const struct value *s = a->kind == V_STR ? a : b, *k = a->kind == V_STR ? b : a;
		int64_t times = k->kind == V_INT ? k->i : k->b;
		struct sbuf o = { 0 };
		if (times * (int64_t)s->s->n > (1 << 24))
			return ev_fail(e, "string repetition too large");
		for (int64_t i = 0; i < times; i++)
			sb_putf(&o, s->s->p, s->s->n, s->s->flags);
		return sb_to_str(&o, out) ? FX_OK : ev_oom(e);
	}
	if (op == OP_ADD && a->kind == V_STR)
		return ev_fail(e, "can only concatenate str (not \"%s\") to str", v_type_name(b));
	if (op == OP_MOD && a->kind == V_STR)
		return str_format(e, a, b, out);
	if (op == OP_MUL && ((a->kind == V_LIST && (b->kind == V_INT || b->kind == V_BOOL)) ||
			     (b->kind == V_LIST && (a->kind == V_INT || a->kind == V_BOOL)))) {
		const struct value *l = a->kind == V_LIST ? a : b, *k = a->kind == V_LIST ? b : a;
		int64_t times = k->kind == V_INT ? k->i : k->b;
		if (times * (int64_t)l->l->n > 1000000)
			return ev_fail(e, "list repetition too large");
		if (!v_list_new(l->l->tuple, out))
			return ev_oom(e);
		for (int64_t t = 0; t < times; t++)
			for (size_t i = 0; i < l->l->n; i++)
				if (!list_push(out->l, v_ref(l->l->a[i]))) {
					v_drop(out);
					return ev_oom(e);
				}
		return FX_OK;
	}
	return ev_fail(e, "unsupported operand type(s) for %s: '%s' and '%s'", names[op], v_type_name(a),
		       v_type_name(b));
}
