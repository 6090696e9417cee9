/* Filters and tests of the chat-template interpreter: jinja2 3.1's
 * filters.py and tests.py, with transformers' tojson (json.dumps with
 * ensure_ascii=False). An unknown name is an error, never a silent pass. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "chat/eval.h"
#include "core/alloc.h"

int chat_join(struct ev *e, const struct value *items, const struct value *sep, struct value *out)
{
	struct sbuf b = { 0 };
	for (size_t i = 0; i < items->l->n; i++) {
		if (i && sep)
			v_write(&b, sep, false);
		v_write(&b, &items->l->a[i], false);
	}
	return sb_to_str(&b, out) ? FX_OK : ev_oom(e);
}

/* ---- tests ------------------------------------------------------------ */

int chat_test(struct ev *e, const char *name, const struct value *v, struct cargs *a, bool *out)
{
	const struct value *a0 = cargs_get(a, 0, NULL);
	int k = v->kind;
	if (!strcmp(name, "defined")) *out = k != V_UNDEF;
	else if (!strcmp(name, "undefined")) *out = k == V_UNDEF;
	else if (!strcmp(name, "none")) *out = k == V_NONE;
	else if (!strcmp(name, "string")) *out = k == V_STR;
	else if (!strcmp(name, "number")) *out = k == V_INT || k == V_FLOAT || k == V_BOOL;
	else if (!strcmp(name, "integer")) *out = k == V_INT;
	else if (!strcmp(name, "float")) *out = k == V_FLOAT;
	else if (!strcmp(name, "boolean")) *out = k == V_BOOL;
	else if (!strcmp(name, "true")) *out = k == V_BOOL && v->b;
	else if (!strcmp(name, "false")) *out = k == V_BOOL && !v->b;
	else if (!strcmp(name, "mapping")) *out = k == V_DICT && !v->d->ns && !v->d->loop;
	else if (!strcmp(name, "iterable")) *out = k == V_STR || k == V_LIST || k == V_UNDEF || (k == V_DICT && !v->d->ns && !v->d->loop);
	else if (!strcmp(name, "sequence")) *out = k == V_STR || k == V_LIST || (k == V_DICT && !v->d->ns && !v->d->loop);
	else if (!strcmp(name, "callable")) *out = k == V_FUNC || k == V_MACRO;
	else if (!strcmp(name, "lower") || !strcmp(name, "upper")) {
		/* str(value).islower() / isupper(): some cased letter, all in that case */
		struct value t;
		int rc = chat_to_str(e, v, &t);
		bool any = false, all = true;
		if (rc)
			return rc;
		for (size_t i = 0; i < t.s->n;) {
			uint32_t c;
			i += u8_decode(t.s->p + i, t.s->n - i, &c);
			if (chat_is_cased(c, true) || chat_is_cased(c, false)) {
				any = true;
				all = all && chat_is_cased(c, name[0] == 'u');
			}
		}
		v_drop(&t);
		*out = any && all;
	} else if (!strcmp(name, "odd") || !strcmp(name, "even") || !strcmp(name, "divisibleby")) {
		/* value % 2 == 1 / value % 2 == 0 / value % num == 0, Python's % */
		struct value two = v_int(2), r;
		const struct value *by = name[0] == 'd' ? a0 : &two;
		int rc;
		if (!by)
			return ev_fail(e, "divisibleby needs a number");
		if ((rc = chat_binop(e, OP_MOD, v, by, &r)))
			return rc;
		*out = v_num(&r) == (name[0] == 'o' ? 1 : 0);
		v_drop(&r);
	} else if (!strcmp(name, "sameas")) {
		*out = a0 && ((v->kind == a0->kind && (k == V_NONE || k == V_UNDEF || (k == V_BOOL && v->b == a0->b))) ||
			      ((k == V_STR || k == V_LIST || k == V_DICT) && v->kind == a0->kind && v->s == a0->s));
	} else if (!strcmp(name, "escaped")) {
		*out = false;
	} else {
		static const struct { const char *n; int op; } cmp[] = {
			{ "equalto", OP_EQ }, { "eq", OP_EQ }, { "==", OP_EQ }, { "ne", OP_NE }, { "!=", OP_NE },
			{ "lt", OP_LT }, { "lessthan", OP_LT }, { "<", OP_LT }, { "le", OP_LE }, { "<=", OP_LE },
			{ "gt", OP_GT }, { "greaterthan", OP_GT }, { ">", OP_GT }, { "ge", OP_GE }, { ">=", OP_GE },
			{ "in", OP_IN },
		};
		for (size_t i = 0; i < sizeof(cmp) / sizeof(cmp[0]); i++) {
			if (strcmp(name, cmp[i].n))
				continue;
			if (!a0)
				return ev_fail(e, "test '%s' needs an argument", name);
			int op = cmp[i].op, c;
			if (op == OP_EQ || op == OP_NE) {
				*out = v_equal(v, a0) == (op == OP_EQ);
				return FX_OK;
			}
			if (op == OP_IN) {
				bool r = false;
				if (a0->kind == V_STR && k == V_STR)
					r = memmem(a0->s->p, a0->s->n, v->s->p, v->s->n) != NULL || !v->s->n;
				else if (a0->kind == V_LIST)
					for (size_t j = 0; j < a0->l->n && !r; j++)
						r = v_equal(v, &a0->l->a[j]);
				else if (a0->kind == V_DICT)
					r = dict_get(a0->d, v) != NULL;
				else
					return ev_fail(e, "test 'in': bad operand types");
				*out = r;
				return FX_OK;
			}
			if (!v_compare(v, a0, &c))
				return ev_fail(e, "test '%s': '%s' and '%s' do not order", name, v_type_name(v),
					       v_type_name(a0));
			*out = op == OP_LT ? c < 0 : op == OP_LE ? c <= 0 : op == OP_GT ? c > 0 : c >= 0;
			return FX_OK;
		}
		return ev_fail(e, "unknown test '%s'", name);
	}
	return FX_OK;
}

/* ---- helpers ---------------------------------------------------------- */

/* Attribute path "a.b" or integer index of v (jinja2's make_attrgetter). */
static int attr_path(struct ev *e, const struct value *v, const struct value *attr, struct value *out)
{
	if (attr->kind == V_INT)
		return chat_getitem(e, v, attr, out);
	if (attr->kind != V_STR)
		return ev_fail(e, "attribute must be a string");
	struct value cur = v_ref(*v);
	const char *p = attr->s->p;
	for (;;) {
		const char *dot = strchr(p, '.');
		size_t len = dot ? (size_t)(dot - p) : strlen(p);
		char part[128];
		struct value next, key;
		int rc;
		if (len >= sizeof(part)) {
			v_drop(&cur);
			return ev_fail(e, "attribute name too long");
		}
		memcpy(part, p, len);
		part[len] = 0;
		bool digits = len > 0 && strspn(part, "0123456789") == len;
		if (digits) {
			key = v_int(strtoll(part, NULL, 10));
		} else if (!v_str(part, len, NULL, &key)) {
			v_drop(&cur);
			return ev_oom(e);
		}
		rc = cur.kind == V_UNDEF ? (next = v_undef(NULL), FX_OK) : chat_getitem(e, &cur, &key, &next);
		v_drop(&key);
		v_drop(&cur);
		if (rc)
			return rc;
		cur = next;
		if (!dot)
			break;
		p = dot + 1;
	}
	*out = cur;
	return FX_OK;
}

static int sort_key(struct ev *e, const struct value *v, bool case_sensitive, struct value *out)
{
	if (v->kind == V_STR && !case_sensitive)
		return chat_case(e, v, 0, out);
	*out = v_ref(*v);
	return FX_OK;
}

/* Stable sort of items (a list value, sorted in place) by keys[]. */
static int sort_items(struct ev *e, struct value *items, struct value *keys, bool reverse)
{
	size_t n = items->l->n;
	for (size_t i = 1; i < n; i++) {
		struct value it = items->l->a[i], k = keys[i];
		size_t j = i;
		while (j > 0) {
			int c;
			if (!v_compare(&keys[j - 1], &k, &c))
				return ev_fail(e, "'<' not supported between instances of '%s' and '%s'",
					       v_type_name(&keys[j - 1]), v_type_name(&k));
			if (reverse ? c >= 0 : c <= 0)
				break;
			items->l->a[j] = items->l->a[j - 1];
			keys[j] = keys[j - 1];
			j--;
		}
		items->l->a[j] = it;
		keys[j] = k;
	}
	return FX_OK;
}

static int do_sort(struct ev *e, const struct value *in, struct cargs *a, bool dictsort, struct value *out)
{
	const struct value *rev = cargs_get(a, dictsort ? 2 : 0, "reverse"), *cs = cargs_get(a, dictsort ? 0 : 1, "case_sensitive");
	const struct value *attr = dictsort ? NULL : cargs_get(a, 2, "attribute"), *by = dictsort ? cargs_get(a, 1, "by") : NULL;
	bool by_value = by && by->kind == V_STR && !strcmp(by->s->p, "value");
	int rc;
	struct value items;
	if (dictsort) {
		if (in->kind != V_DICT)
			return ev_fail(e, "dictsort wants a mapping, got %s", v_type_name(in));
		struct value m;
		if (!v_func_new(FN_METHOD, "items", in, &m))
			return ev_oom(e);
		struct cargs none = { 0 };
		rc = chat_call_func(e, &m, &none, &items);
		v_drop(&m);
	} else {
		rc = chat_iter(e, in, &items);
	}
	if (rc)
		return rc;
	size_t n = items.l->n;
	struct value *keys = fx_calloc(n ? n : 1, sizeof(*keys));
	if (!keys) {
		v_drop(&items);
		return ev_oom(e);
	}
	for (size_t i = 0; i < n && !rc; i++) {
		struct value base;
		if (dictsort)
			base = v_ref(items.l->a[i].l->a[by_value ? 1 : 0]);
		else if (attr && attr->kind != V_NONE)
			rc = attr_path(e, &items.l->a[i], attr, &base);
		else
			base = v_ref(items.l->a[i]);
		if (rc)
			break;
		rc = sort_key(e, &base, cs && v_truthy(cs), &keys[i]);
		v_drop(&base);
	}
	if (!rc)
		rc = sort_items(e, &items, keys, rev && v_truthy(rev));
	for (size_t i = 0; i < n; i++)
		v_drop(&keys[i]);
	fx_free(keys);
	if (rc) {
		v_drop(&items);
		return rc;
	}
	*out = items;
	return FX_OK;
}

/* select / reject / selectattr / rejectattr */
static int do_select(struct ev *e, const struct value *in, struct cargs *a, bool attr, bool keep, struct value *out)
{
	struct value items, none = v_undef(NULL);
	int rc = chat_iter(e, v_truthy(in) ? in : &none, &items); /* jinja2: `if seq:` first */
	size_t t0 = attr ? 1 : 0;
	if (rc)
		return rc;
	if (attr && a->npos < 1) {
		v_drop(&items);
		return ev_fail(e, "selectattr/rejectattr need an attribute name");
	}
	if (a->npos > t0 && a->pos[t0].kind != V_STR) {
		v_drop(&items);
		return ev_fail(e, "the test name must be a string");
	}
	struct cargs ta = { 0 };
	if (a->npos > t0 + 1) {
		ta.pos = a->pos + t0 + 1;
		ta.npos = a->npos - t0 - 1;
	}
	if (!v_list_new(false, out)) {
		v_drop(&items);
		return ev_oom(e);
	}
	out->l->gen = true;
	for (size_t i = 0; i < items.l->n && !rc; i++) {
		struct value subj;
		bool r;
		if (attr)
			rc = attr_path(e, &items.l->a[i], &a->pos[0], &subj);
		else
			subj = v_ref(items.l->a[i]);
		if (rc)
			break;
		if (a->npos > t0)
			rc = chat_test(e, a->pos[t0].s->p, &subj, &ta, &r);
		else
			r = v_truthy(&subj);
		v_drop(&subj);
		if (!rc && r == keep && !list_push(out->l, v_ref(items.l->a[i])))
			rc = ev_oom(e);
	}
	v_drop(&items);
	if (rc)
		v_drop(out);
	return rc;
}

static int do_map(struct ev *e, const struct value *in, struct cargs *a, struct value *out)
{
	struct value items;
	const struct value *attr = cargs_get(a, 99, "attribute"), *def = cargs_get(a, 99, "default");
	struct value none = v_undef(NULL);
	int rc = chat_iter(e, v_truthy(in) ? in : &none, &items); /* jinja2: `if value:` first */
	if (rc)
		return rc;
	if (!attr && (a->npos < 1 || a->pos[0].kind != V_STR)) {
		v_drop(&items);
		return ev_fail(e, "map wants a filter name or attribute=");
	}
	struct cargs fa = { 0 };
	if (!attr && a->npos > 1) {
		fa.pos = a->pos + 1;
		fa.npos = a->npos - 1;
	}
	if (!v_list_new(false, out)) {
		v_drop(&items);
		return ev_oom(e);
	}
	out->l->gen = true;
	for (size_t i = 0; i < items.l->n && !rc; i++) {
		struct value r;
		if (attr) {
			rc = attr_path(e, &items.l->a[i], attr, &r);
			if (!rc && r.kind == V_UNDEF && def) {
				v_drop(&r);
				r = v_ref(*def);
			}
		} else {
			rc = chat_filter(e, a->pos[0].s->p, &items.l->a[i], &fa, &r);
		}
		if (!rc && !list_push(out->l, r))
			rc = ev_oom(e);
	}
	v_drop(&items);
	if (rc)
		v_drop(out);
	return rc;
}

/* jinja2's indent: lines after the first (and the first with first=True)
 * get the indent; blank lines only with blank=True. */
static int do_indent(struct ev *e, const struct value *s, struct cargs *a, struct value *out)
{
	const struct value *w = cargs_get(a, 0, "width"), *first = cargs_get(a, 1, "first"), *blank = cargs_get(a, 2, "blank");
	struct sbuf ind = { 0 }, b = { 0 };
	if (!w || w->kind == V_INT) {
		int64_t n = w ? w->i : 4;
		for (int64_t i = 0; i < n && i < 1024; i++)
			sb_put(&ind, " ", 1, 0);
	} else if (w->kind == V_STR) {
		v_write(&ind, w, false);
	} else {
		return ev_fail(e, "indent width must be an integer or a string");
	}
	/* split s + "\n" into lines (str.splitlines on \n, \r\n, \r) */
	size_t n = s->s->n, st = 0, li = 0;
	bool bl = blank && v_truthy(blank);
	bool ind_first = first && v_truthy(first);
	for (size_t i = 0; i <= n; i++) {
		if (i < n && s->s->p[i] != '\n' && s->s->p[i] != '\r')
			continue;
		size_t end = i;
		if (li > 0)
			sb_put(&b, "\n", 1, 0);
		bool empty = end == st;
		if (li == 0 ? ind_first : (bl || !empty))
			sb_putf(&b, ind.p ? ind.p : "", ind.n, NULL);
		sb_putf(&b, s->s->p + st, end - st, s->s->flags ? s->s->flags + st : NULL);
		li++;
		if (i < n && s->s->p[i] == '\r' && i + 1 < n && s->s->p[i + 1] == '\n')
			i++;
		st = i + 1;
		if (i >= n)
			break;
	}
	sb_free(&ind);
	return sb_to_str(&b, out) ? FX_OK : ev_oom(e);
}

static int do_tojson(struct ev *e, const struct value *v, struct cargs *a, struct value *out)
{
	const struct value *ea = cargs_get(a, 0, "ensure_ascii"), *ind = cargs_get(a, 1, "indent"),
			   *sep = cargs_get(a, 2, "separators"), *sk = cargs_get(a, 3, "sort_keys");
	struct json_opts o = { .ensure_ascii = ea && v_truthy(ea), .indent = -1, .sort_keys = sk && v_truthy(sk) };
	struct sbuf b = { 0 }, is = { 0 };
	char msg[256];
	if (ind && ind->kind == V_INT) {
		o.indent = (int)(ind->i < 0 ? 0 : ind->i > 64 ? 64 : ind->i);
	} else if (ind && ind->kind == V_STR) {
		v_write(&is, ind, false);
		o.indent_str = is.p ? is.p : "";
	} else if (ind && ind->kind != V_NONE) {
		return ev_fail(e, "tojson: indent must be an integer, a string or None");
	}
	if (sep && sep->kind == V_LIST && sep->l->n == 2 && sep->l->a[0].kind == V_STR && sep->l->a[1].kind == V_STR) {
		o.item_sep = sep->l->a[0].s->p;
		o.key_sep = sep->l->a[1].s->p;
	} else if (sep && sep->kind != V_NONE) {
		sb_free(&is);
		return ev_fail(e, "tojson: separators must be a pair of strings");
	}
	int jrc = json_dump(&b, v, &o, msg);
	sb_free(&is);
	if (jrc) {
		sb_free(&b);
		return jrc == FX_E_NOMEM ? ev_oom(e) : ev_fail(e, "tojson: %s", msg);
	}
	return sb_to_str(&b, out) ? FX_OK : ev_oom(e);
}

/* Python's int(s) / float(s) syntax: surrounding whitespace, a sign,
 * digits with single underscores between them; floats also '.', an
 * exponent, inf / infinity / nan. The cleaned text goes to buf[64]. */
static bool py_number_text(const char *p, bool want_float, char *buf)
{
	size_t k = 0;
	bool digit = false, prev_digit = false;
	while (*p == ' ' || (*p >= '\t' && *p <= '\r'))
		p++;
	if (*p == '+' || *p == '-')
		buf[k++] = *p++;
	if (want_float && (!strncasecmp(p, "inf", 3) || !strncasecmp(p, "nan", 3))) {
		size_t l = !strncasecmp(p, "infinity", 8) ? 8 : 3;
		memcpy(buf + k, p, l);
		k += l;
		p += l;
		digit = true;
	} else {
		for (; *p && k < 62; p++) {
			char c = *p;
			if (c >= '0' && c <= '9') {
				buf[k++] = c;
				digit = prev_digit = true;
			} else if (c == '_' && prev_digit && p[1] >= '0' && p[1] <= '9') {
				prev_digit = false;
			} else if (want_float && (c == '.' || c == 'e' || c == 'E' ||
						  ((c == '+' || c == '-') && k && (buf[k - 1] == 'e' || buf[k - 1] == 'E')))) {
				buf[k++] = c;
				prev_digit = false;
			} else {
				break;
			}
		}
	}
	while (*p == ' ' || (*p >= '\t' && *p <= '\r'))
		p++;
	buf[k] = 0;
	return digit && !*p;
}

static int to_int(struct ev *e, const struct value *v, const struct value *def, bool want_float, struct value *out)
{
	char buf[64], *end;
	if (v->kind == V_INT || v->kind == V_BOOL) {
		int64_t x = v->kind == V_INT ? v->i : v->b;
		*out = want_float ? v_float((double)x) : v_int(x);
		return FX_OK;
	}
	if (v->kind == V_FLOAT) {
		if (!want_float && !(fabs(v->f) < 9.2e18))
			return ev_fail(e, "int(%g) is beyond 64 bits (or not finite)", v->f);
		*out = want_float ? v_float(v->f) : v_int((int64_t)v->f);
		return FX_OK;
	}
	/* jinja2: int(value), else int(float(value)), else the default */
	if (v->kind == V_STR && !memchr(v->s->p, 0, v->s->n)) {
		if (!want_float && py_number_text(v->s->p, false, buf)) {
			errno = 0;
			long long x = strtoll(buf, NULL, 10);
			if (errno == ERANGE)
				return ev_fail(e, "int('%s') is beyond 64 bits", buf);
			*out = v_int(x);
			return FX_OK;
		}
		if (py_number_text(v->s->p, true, buf)) {
			double d = strtod(buf, &end);
			if (!*end && !want_float && isfinite(d) && !(fabs(d) < 9.2e18))
				return ev_fail(e, "int('%s') is beyond 64 bits", buf);
			if (!*end && (want_float || fabs(d) < 9.2e18)) {
				*out = want_float ? v_float(d) : v_int((int64_t)d);
				return FX_OK;
			}
		}
	}
	*out = def ? v_ref(*def) : want_float ? v_float(0) : v_int(0);
	return FX_OK;
}

/* jinja2's truncate(s, length=255, killwords=False, end='...', leeway=5) */
static int do_truncate(struct ev *e, const struct value *s, struct cargs *a, struct value *out)
{
	const struct value *lv = cargs_get(a, 0, "length"), *kw = cargs_get(a, 1, "killwords"), *ev_ = cargs_get(a, 2, "end"),
			   *lw = cargs_get(a, 3, "leeway");
	int64_t length = lv && lv->kind == V_INT ? lv->i : 255, leeway = lw && lw->kind == V_INT ? lw->i : 5;
	const char *end = ev_ && ev_->kind == V_STR ? ev_->s->p : "...";
	int64_t n = (int64_t)u8_count(s->s->p, s->s->n), ne = (int64_t)u8_count(end, strlen(end));
	if (length < ne)
		return ev_fail(e, "expected length >= %lld, got %lld", (long long)ne, (long long)length);
	if (leeway < 0)
		return ev_fail(e, "expected leeway >= 0, got %lld", (long long)leeway);
	if (n <= length + leeway) {
		*out = v_ref(*s);
		return FX_OK;
	}
	size_t cut = u8_offset(s->s->p, s->s->n, (size_t)(length - ne));
	if (!(kw && v_truthy(kw))) { /* s[:cut].rsplit(" ", 1)[0] */
		size_t k = cut;
		while (k > 0 && s->s->p[k - 1] != ' ')
			k--;
		if (k > 0)
			cut = k - 1;
	}
	struct sbuf b = { 0 };
	sb_putf(&b, s->s->p, cut, s->s->flags);
	sb_puts(&b, end, 0);
	return sb_to_str(&b, out) ? FX_OK : ev_oom(e);
}

/* str.center(width) as Python pads (the extra space on the right when
 * the padding is odd and the width even... per CPython's rule). */
static int do_center(struct ev *e, const struct value *s, struct cargs *a, struct value *out)
{
	const struct value *wv = cargs_get(a, 0, "width");
	int64_t width = wv && wv->kind == V_INT ? wv->i : 80, n = (int64_t)u8_count(s->s->p, s->s->n);
	if (width <= n) {
		*out = v_ref(*s);
		return FX_OK;
	}
	int64_t marg = width - n, left = marg / 2 + (marg & width & 1);
	struct sbuf b = { 0 };
	for (int64_t i = 0; i < left; i++)
		sb_put(&b, " ", 1, 0);
	sb_putf(&b, s->s->p, s->s->n, s->s->flags);
	for (int64_t i = 0; i < marg - left; i++)
		sb_put(&b, " ", 1, 0);
	return sb_to_str(&b, out) ? FX_OK : ev_oom(e);
}

/* jinja2's title filter: words start after -, whitespace, ( { [ < */
static int do_title(struct ev *e, const struct value *s, struct value *out)
{
	struct sbuf b = { 0 };
	bool start = true;
	for (size_t i = 0; i < s->s->n;) {
		uint32_t c;
		size_t l = u8_decode(s->s->p + i, s->s->n - i, &c);
		bool sep = c == '-' || py_isspace(c) || c == '(' || c == '{' || c == '[' || c == '<';
		struct value ch, r;
		int rc;
		if (!chat_substr(s, i, l, &ch)) {
			sb_free(&b);
			return ev_oom(e);
		}
		rc = sep ? (r = v_ref(ch), FX_OK) : chat_case(e, &ch, start ? 1 : 0, &r);
		v_drop(&ch);
		if (rc) {
			sb_free(&b);
			return rc;
		}
		v_write(&b, &r, false);
		v_drop(&r);
		start = sep;
		i += l;
	}
	return sb_to_str(&b, out) ? FX_OK : ev_oom(e);
}

int chat_filter(struct ev *e, const char *name, const struct value *in, struct cargs *a, struct value *out)
{
	const struct value *a0 = cargs_get(a, 0, NULL);
	struct value s, items;
	int rc;
	if (!strcmp(name, "safe") || !strcmp(name, "string") || !strcmp(name, "e") || !strcmp(name, "escape") ||
	    !strcmp(name, "forceescape")) {
		if (name[0] == 's' && name[1] == 't')
			return chat_to_str(e, in, out);
		if ((rc = chat_to_str(e, in, &s)))
			return rc;
		rc = v_markup(&s, name[0] != 's', out) ? FX_OK : ev_oom(e);
		v_drop(&s);
		return rc;
	}
	if (!strcmp(name, "default") || !strcmp(name, "d")) {
		const struct value *dv = cargs_get(a, 0, "default_value"), *bo = cargs_get(a, 1, "boolean");
		bool use = in->kind == V_UNDEF || (bo && v_truthy(bo) && !v_truthy(in));
		if (!use)
			*out = v_ref(*in);
		else if (dv)
			*out = v_ref(*dv);
		else if (!v_str("", 0, NULL, out))
			return ev_oom(e);
		return FX_OK;
	}
	if (!strcmp(name, "length") || !strcmp(name, "count")) {
		switch (in->kind) {
		case V_UNDEF: *out = v_int(0); return FX_OK;
		case V_STR: *out = v_int((int64_t)u8_count(in->s->p, in->s->n)); return FX_OK;
		case V_LIST:
			if (in->l->gen)
				break;
			*out = v_int((int64_t)in->l->n);
			return FX_OK;
		case V_DICT: *out = v_int((int64_t)in->d->n); return FX_OK;
		default: break;
		}
		return ev_fail(e, "object of type '%s' has no len()", v_type_name(in));
	}
	if (!strcmp(name, "tojson"))
		return do_tojson(e, in, a, out);
	if (!strcmp(name, "items")) {
		if (in->kind == V_UNDEF)
			return v_list_new(false, out) ? FX_OK : ev_oom(e);
		if (in->kind != V_DICT || in->d->ns || in->d->loop)
			return ev_fail(e, "can only get item pairs from a mapping");
		struct value m;
		struct cargs none = { 0 };
		if (!v_func_new(FN_METHOD, "items", in, &m))
			return ev_oom(e);
		rc = chat_call_func(e, &m, &none, out);
		v_drop(&m);
		if (!rc)
			out->l->gen = true;
		return rc;
	}
	if (!strcmp(name, "list"))
		return chat_iter(e, in, out);
	if (!strcmp(name, "dictsort"))
		return do_sort(e, in, a, true, out);
	if (!strcmp(name, "sort"))
		return do_sort(e, in, a, false, out);
	if (!strcmp(name, "map"))
		return do_map(e, in, a, out);
	if (!strcmp(name, "select") || !strcmp(name, "reject"))
		return do_select(e, in, a, false, name[0] == 's', out);
	if (!strcmp(name, "selectattr") || !strcmp(name, "rejectattr"))
		return do_select(e, in, a, true, name[0] == 's', out);
	if (!strcmp(name, "int") || !strcmp(name, "float")) {
		if (in->kind == V_UNDEF)
			return ev_fail(e, "'%s' is undefined", in->uname ? in->uname : "value");
		return to_int(e, in, cargs_get(a, 0, "default"), name[0] == 'f', out);
	}
	if (!strcmp(name, "abs")) {
		if (in->kind == V_INT && in->i == INT64_MIN)
			return ev_fail(e, "integer overflow (ferrox's integers are 64-bit, Python's unbounded)");
		if (in->kind == V_INT || in->kind == V_BOOL)
			*out = v_int(llabs(in->kind == V_INT ? in->i : in->b));
		else if (in->kind == V_FLOAT)
			*out = v_float(fabs(in->f));
		else
			return ev_fail(e, "bad operand type for abs(): '%s'", v_type_name(in));
		return FX_OK;
	}
	if (!strcmp(name, "round")) {
		const struct value *pr = cargs_get(a, 0, "precision"), *me = cargs_get(a, 1, "method");
		int p = pr && pr->kind == V_INT ? (int)pr->i : 0;
		if (!v_is_num(in))
			return ev_fail(e, "round wants a number, got %s", v_type_name(in));
		double x = v_num(in), m = pow(10, p);
		const char *meth = me && me->kind == V_STR ? me->s->p : "common";
		if (!strcmp(meth, "ceil"))
			x = ceil(x * m) / m;
		else if (!strcmp(meth, "floor"))
			x = floor(x * m) / m;
		else {
			char buf[64];
			snprintf(buf, sizeof(buf), "%.*f", p < 0 ? 0 : p > 30 ? 30 : p, x);
			x = strtod(buf, NULL);
		}
		*out = (in->kind == V_INT || in->kind == V_BOOL) && !strcmp(meth, "common") && fabs(x) < 9.2e18
			       ? v_int((int64_t)x)
										     : v_float(x);
		return FX_OK;
	}
	if (!strcmp(name, "first") || !strcmp(name, "last")) {
		if ((rc = chat_iter(e, in, &items)))
			return rc;
		if (!items.l->n)
			*out = v_undef(NULL);
		else
			*out = v_ref(items.l->a[name[0] == 'f' ? 0 : items.l->n - 1]);
		v_drop(&items);
		return FX_OK;
	}
	if (!strcmp(name, "reverse")) {
		if ((rc = chat_iter(e, in, &items)))
			return rc;
		for (size_t i = 0, j = items.l->n; i + 1 < j; i++, j--) {
			struct value t = items.l->a[i];
			items.l->a[i] = items.l->a[j - 1];
			items.l->a[j - 1] = t;
		}
		if (in->kind != V_STR) {
			*out = items;
			out->l->gen = true;
			return FX_OK;
		}
		rc = chat_join(e, &items, NULL, out);
		v_drop(&items);
		return rc;
	}
	if (!strcmp(name, "unique")) {
		const struct value *cs = cargs_get(a, 0, "case_sensitive"), *at = cargs_get(a, 1, "attribute");
		if ((rc = chat_iter(e, in, &items)))
			return rc;
		struct value seen;
		if (!v_list_new(false, &seen)) {
			v_drop(&items);
			return ev_oom(e);
		}
		if (!v_list_new(false, out)) {
			v_drop(&seen);
			v_drop(&items);
			return ev_oom(e);
		}
		out->l->gen = true;
		for (size_t i = 0; i < items.l->n && !rc; i++) {
			struct value base, k;
			if (at && at->kind != V_NONE)
				rc = attr_path(e, &items.l->a[i], at, &base);
			else
				base = v_ref(items.l->a[i]);
			if (rc)
				break;
			rc = sort_key(e, &base, cs && v_truthy(cs), &k);
			v_drop(&base);
			if (rc)
				break;
			if ((k.kind == V_LIST && !k.l->tuple) || k.kind == V_DICT) { /* Python keeps a set */
				rc = ev_fail(e, "unhashable type: '%s'", v_type_name(&k));
				v_drop(&k);
				break;
			}
			bool dup = false;
			for (size_t j = 0; j < seen.l->n && !dup; j++)
				dup = v_equal(&seen.l->a[j], &k);
			if (dup) {
				v_drop(&k);
				continue;
			}
			if (!list_push(seen.l, k) || !list_push(out->l, v_ref(items.l->a[i])))
				rc = ev_oom(e);
		}
		v_drop(&seen);
		v_drop(&items);
		if (rc)
			v_drop(out);
		return rc;
	}
	if (!strcmp(name, "join")) {
		const struct value *sep = cargs_get(a, 0, "d"), *at = cargs_get(a, 1, "attribute");
		if ((rc = chat_iter(e, in, &items)))
			return rc;
		if (at && at->kind != V_NONE) {
			for (size_t i = 0; i < items.l->n && !rc; i++) {
				struct value r;
				if (!(rc = attr_path(e, &items.l->a[i], at, &r))) {
					v_drop(&items.l->a[i]);
					items.l->a[i] = r;
				}
			}
		}
		if (!rc)
			rc = chat_join(e, &items, sep, out);
		v_drop(&items);
		return rc;
	}
	if (!strcmp(name, "sum") || !strcmp(name, "min") || !strcmp(name, "max")) {
		/* sum(attribute=, start=0); min/max(case_sensitive=False, attribute=) */
		bool sum = name[1] == 'u';
		const struct value *at = cargs_get(a, sum ? 0 : 1, "attribute"), *cs = sum ? NULL : cargs_get(a, 0, "case_sensitive");
		const struct value *st = sum ? cargs_get(a, 1, "start") : NULL;
		if ((rc = chat_iter(e, in, &items)))
			return rc;
		struct value acc = sum ? (st ? v_ref(*st) : v_int(0)) : v_undef(NULL), best_key = v_undef(NULL);
		for (size_t i = 0; i < items.l->n && !rc; i++) {
			struct value x, k;
			if (at && at->kind != V_NONE)
				rc = attr_path(e, &items.l->a[i], at, &x);
			else
				x = v_ref(items.l->a[i]);
			if (rc)
				break;
			if (sum) {
				struct value r;
				if (!(rc = chat_binop(e, OP_ADD, &acc, &x, &r))) {
					v_drop(&acc);
					acc = r;
				}
			} else if (!(rc = sort_key(e, at && at->kind != V_NONE ? &x : &items.l->a[i],
						  cs && v_truthy(cs), &k))) {
				int c = 0;
				if (best_key.kind != V_UNDEF && !v_compare(&k, &best_key, &c))
					rc = ev_fail(e, "'<' not supported between instances of '%s' and '%s'",
						     v_type_name(&k), v_type_name(&best_key));
				if (!rc && (best_key.kind == V_UNDEF || (name[1] == 'i' ? c < 0 : c > 0))) {
					v_drop(&best_key);
					best_key = k;
					v_drop(&acc);
					acc = v_ref(items.l->a[i]);
				} else {
					v_drop(&k);
				}
			}
			v_drop(&x);
		}
		v_drop(&items);
		v_drop(&best_key);
		if (rc) {
			v_drop(&acc);
			return rc;
		}
		*out = acc;
		return FX_OK;
	}
	if (!strcmp(name, "wordcount")) {
		if ((rc = chat_to_str(e, in, &s)))
			return rc;
		int64_t words = 0;
		bool inw = false;
		for (size_t i = 0; i < s.s->n;) {
			uint32_t c;
			i += u8_decode(s.s->p + i, s.s->n - i, &c);
			/* Python's \\w: letters and digits of any script; symbols,
			 * punctuation and emoji are not (approximated by ranges) */
			bool w = c == '_' || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
				 c == 0xaa || c == 0xb5 || c == 0xba || (c >= 0xc0 && c <= 0x2af && c != 0xd7 && c != 0xf7) ||
				 (c >= 0x370 && c <= 0x1fff && !py_isspace(c)) || (c >= 0x3040 && c <= 0xd7af) ||
				 (c >= 0xf900 && c <= 0xfaff) || (c >= 0xff10 && c <= 0xff5a) || (c >= 0x20000 && c <= 0x3ffff);
			if (w && !inw)
				words++;
			inw = w;
		}
		v_drop(&s);
		*out = v_int(words);
		return FX_OK;
	}
	/* the rest work on str(value) */
	static const char *const str_filters[] = { "trim", "lower", "upper", "title", "capitalize",
						   "replace", "truncate", "center", "indent", NULL };
	size_t k = 0;
	while (str_filters[k] && strcmp(str_filters[k], name))
		k++;
	if (!str_filters[k])
		return ev_fail(e, "unknown filter '%s'", name);
	if ((k == 6 || k == 8) && in->kind != V_STR) {
		if (k == 6 && ((in->kind == V_LIST && !in->l->gen && !in->l->range) ||
			       (in->kind == V_DICT && !in->d->ns && !in->d->loop))) { /* short: returned as is */
			const struct value *lv = cargs_get(a, 0, "length"), *lw = cargs_get(a, 3, "leeway");
			int64_t lim = (lv && lv->kind == V_INT ? lv->i : 255) + (lw && lw->kind == V_INT ? lw->i : 5);
			int64_t len = in->kind == V_LIST ? (int64_t)in->l->n : (int64_t)in->d->n;
			if (len <= lim) {
				*out = v_ref(*in);
				return FX_OK;
			}
		}
		if (in->kind == V_UNDEF && k == 6) { /* len(Undefined) is 0: returned as is */
			*out = v_ref(*in);
			return FX_OK;
		}
		if (in->kind == V_UNDEF)
			return ev_fail(e, "'%s' is undefined", in->uname ? in->uname : "value");
		return ev_fail(e, "filter '%s' wants a string, got %s", name, v_type_name(in));
	}
	if ((rc = chat_to_str(e, in, &s)))
		return rc;
	switch (k) {
	case 0: rc = chat_strip(e, &s, cargs_get(a, 0, "chars"), 3, out); break;
	case 1: rc = chat_case(e, &s, 0, out); break;
	case 2: rc = chat_case(e, &s, 1, out); break;
	case 3: rc = do_title(e, &s, out); break;
	case 4: rc = chat_case(e, &s, 3, out); break;
	case 5: {
		const struct value *a1 = cargs_get(a, 1, "new"), *c = cargs_get(a, 2, "count");
		struct value o, n;
		if (!a0 || !a1) {
			rc = ev_fail(e, "replace needs old and new");
			break;
		}
		if ((rc = chat_to_str(e, a0, &o)))
			break;
		if ((rc = chat_to_str(e, a1, &n))) {
			v_drop(&o);
			break;
		}
		rc = chat_replace(e, &s, &o, &n, c && c->kind == V_INT ? c->i : -1, out);
		v_drop(&o);
		v_drop(&n);
		break;
	}
	case 6: rc = do_truncate(e, &s, a, out); break;
	case 7: rc = do_center(e, &s, a, out); break;
	default: rc = do_indent(e, &s, a, out); break;
	}
	v_drop(&s);
	return rc;
}
