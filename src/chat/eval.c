/* Evaluator: walks the syntax tree with jinja2 3.1's semantics (scoping of
 * set in loops and macros, loop.*, undefined values, macros, filter
 * blocks, break/continue), writing output with provenance. */
#include "chat/eval.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "core/alloc.h"
#include "core/status.h"

static int ev_vfail(struct ev *e, int code, const char *fmt, va_list ap)
{
	char m[400];
	vsnprintf(m, sizeof(m), fmt, ap);
	if (e->line > 0)
		return fx_fail(e->err, code, "template line %d: %s", e->line, m);
	return fx_fail(e->err, code, "%s", m);
}

int ev_fail(struct ev *e, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int rc = ev_vfail(e, FX_E_INVALID, fmt, ap);
	va_end(ap);
	return rc;
}

int ev_fail_code(struct ev *e, int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int rc = ev_vfail(e, code, fmt, ap);
	va_end(ap);
	return rc;
}

int ev_oom(struct ev *e)
{
	return fx_fail(e->err, FX_E_NOMEM, "out of memory rendering the template");
}

/* ---- frames ----------------------------------------------------------- */

int frame_set(struct frame *f, const char *name, struct value v)
{
	for (size_t i = 0; i < f->n; i++)
		if (!strcmp(f->names[i], name)) {
			v_drop(&f->vals[i]);
			f->vals[i] = v;
			return FX_OK;
		}
	if (f->n == f->cap) {
		size_t cap = f->cap ? 2 * f->cap : 8;
		const char **nm = fx_realloc_array(f->names, cap, sizeof(*nm));
		if (!nm) {
			v_drop(&v);
			return FX_E_NOMEM;
		}
		f->names = nm;
		struct value *vv = fx_realloc_array(f->vals, cap, sizeof(*vv));
		if (!vv) {
			v_drop(&v);
			return FX_E_NOMEM;
		}
		f->vals = vv;
		f->cap = cap;
	}
	f->names[f->n] = name;
	f->vals[f->n++] = v;
	return FX_OK;
}

void frame_free(struct frame *f)
{
	for (size_t i = 0; i < f->n; i++)
		v_drop(&f->vals[i]);
	fx_free(f->names);
	fx_free(f->vals);
	memset(f, 0, sizeof(*f));
}

static const struct value *lookup(const struct frame *f, const char *name)
{
	for (; f; f = f->parent)
		for (size_t i = f->n; i-- > 0;)
			if (!strcmp(f->names[i], name))
				return &f->vals[i];
	return NULL;
}

/* context.resolve_or_missing: the render context, then the globals. */
static int resolve(struct ev *e, const char *name, struct value *out)
{
	const struct value *v = lookup(e->ctx, name);
	bool oom = false;
	if (v) {
		*out = v_ref(*v);
		return FX_OK;
	}
	if (chat_global(name, out, &oom))
		return FX_OK;
	if (oom)
		return ev_oom(e);
	*out = v_undef(name);
	return FX_OK;
}

int frame_enter(struct ev *e, struct frame *f, const struct scope *sc)
{
	for (size_t i = 0; sc && i < sc->n; i++) {
		const char *name = sc->names[i];
		struct value v = v_undef(name);
		int rc;
		if (sc->kind[i] == SC_PARAM)
			continue;
		if (sc->kind[i] == SC_RESOLVE) {
			if ((rc = resolve(e, name, &v)))
				return rc;
		} else if (sc->kind[i] == SC_ALIAS) {
			const struct value *pv = lookup(f->parent, name);
			if (pv)
				v = v_ref(*pv);
			else if ((rc = resolve(e, name, &v)))
				return rc;
		}
		if (frame_set(f, name, v))
			return ev_oom(e);
	}
	return FX_OK;
}

/* ---- expressions ------------------------------------------------------ */

static int eval(struct ev *e, const struct node *n, struct frame *f, struct value *out);
static int exec_list(struct ev *e, const struct nlist *l, struct frame *f, struct sbuf *o);

static void cargs_free(struct cargs *a)
{
	for (size_t i = 0; i < a->npos; i++)
		v_drop(&a->pos[i]);
	for (size_t i = 0; i < a->nkw; i++)
		v_drop(&a->kwv[i]);
	fx_free(a->pos);
	fx_free(a->kwv);
	fx_free(a->kwn);
	memset(a, 0, sizeof(*a));
}

/* Evaluate n's args/kwargs; extra (may be NULL) goes first. */
static int eval_args(struct ev *e, const struct node *n, struct frame *f, struct cargs *a)
{
	int rc;
	memset(a, 0, sizeof(*a));
	size_t np = n->args.n, nk = n->kwargs.n;
	if ((np && !(a->pos = fx_calloc(np, sizeof(*a->pos)))) ||
	    (nk && (!(a->kwv = fx_calloc(nk, sizeof(*a->kwv))) || !(a->kwn = fx_calloc(nk, sizeof(*a->kwn)))))) {
		cargs_free(a);
		return ev_oom(e);
	}
	for (size_t i = 0; i < np; i++) {
		if ((rc = eval(e, n->args.a[i], f, &a->pos[i]))) {
			cargs_free(a);
			return rc;
		}
		a->npos++;
	}
	for (size_t i = 0; i < nk; i++) {
		a->kwn[i] = n->kwargs.a[i]->name;
		if ((rc = eval(e, n->kwargs.a[i]->a, f, &a->kwv[i]))) {
			cargs_free(a);
			return rc;
		}
		a->nkw++;
	}
	return FX_OK;
}

/* Call macro (or call-block caller) m: parameters bound in a new frame
 * over closure (NULL: the root frame); caller, when given, is bound as
 * `caller`. The output is the result, provenance kept. */
static int call_macro(struct ev *e, const struct node *m, struct frame *closure, struct cargs *a,
		      const struct value *caller, struct value *out)
{
	struct frame mf = { .parent = closure ? closure : e->root };
	struct sbuf o = { 0 };
	int rc = FX_OK;
	if (a->npos > m->args.n)
		return ev_fail(e, "macro '%s' takes not more than %zu argument(s)", m->name, m->args.n);
	if (++e->depth > 64) {
		e->depth--;
		return ev_fail(e, "macro '%s': calls nested too deeply", m->name);
	}
	for (size_t k = 0; k < a->nkw && !rc; k++) {
		size_t j = 0;
		while (j < m->args.n && strcmp(m->args.a[j]->name, a->kwn[k]))
			j++;
		if (j == m->args.n)
			rc = ev_fail(e, "macro '%s' has no argument '%s'", m->name, a->kwn[k]);
	}
	bool *given = fx_calloc(m->args.n ? m->args.n : 1, sizeof(*given));
	if (!given)
		rc = ev_oom(e);
	for (size_t j = 0; j < m->args.n && !rc; j++) { /* the arguments given */
		const struct node *pn = m->args.a[j];
		struct value v = v_undef(pn->name);
		if (j < a->npos) {
			v = v_ref(a->pos[j]);
			given[j] = true;
		}
		for (size_t k = 0; k < a->nkw && !given[j]; k++)
			if (!strcmp(a->kwn[k], pn->name)) {
				v = v_ref(a->kwv[k]);
				given[j] = true;
			}
		if (frame_set(&mf, pn->name, v))
			rc = ev_oom(e);
	}
	if (!rc)
		rc = frame_set(&mf, "caller", caller ? v_ref(*caller) : v_undef("caller")) ? ev_oom(e) : FX_OK;
	if (!rc) /* then the frame's other names, then defaults (jinja2's order) */
		rc = frame_enter(e, &mf, m->scope);
	for (size_t j = 0; j < m->args.n && !rc; j++) {
		const struct node *pn = m->args.a[j];
		struct value v;
		if (given[j] || !pn->a)
			continue;
		if (!(rc = eval(e, pn->a, &mf, &v)) && frame_set(&mf, pn->name, v))
			rc = ev_oom(e);
	}
	fx_free(given);
	if (!rc)
		rc = exec_list(e, &m->body, &mf, &o);
	e->flow = FLOW_NONE;
	e->depth--;
	frame_free(&mf);
	if (rc) {
		sb_free(&o);
		return rc;
	}
	return sb_to_str(&o, out) ? FX_OK : ev_oom(e);
}

static int eval_call(struct ev *e, const struct node *n, struct frame *f, struct value *out)
{
	struct value callee, obj;
	struct cargs a;
	int rc;
	if (n->a->type == N_ATTR) { /* obj.name(...): say which object lacks the method */
		if ((rc = eval(e, n->a->a, f, &obj)))
			return rc;
		e->line = n->line;
		rc = chat_getattr(e, &obj, n->a->name, &callee);
		if (!rc && callee.kind == V_UNDEF && !callee.uname)
			rc = ev_fail(e, "'%s' object has no method '%s' that ferrox knows", v_type_name(&obj),
				     n->a->name);
		v_drop(&obj);
	} else {
		rc = eval(e, n->a, f, &callee);
	}
	if (rc)
		return rc;
	if ((rc = eval_args(e, n, f, &a))) {
		v_drop(&callee);
		return rc;
	}
	e->line = n->line;
	if (callee.kind == V_MACRO)
		rc = call_macro(e, callee.macro, callee.closure, &a, NULL, out);
	else if (callee.kind == V_FUNC)
		rc = chat_call_func(e, &callee, &a, out);
	else if (callee.kind == V_UNDEF && callee.uname && !strncmp(callee.uname, "access to ", 10))
		rc = ev_fail(e, "%s", callee.uname); /* the sandbox refuses a mutating method */
	else if (callee.kind == V_UNDEF)
		rc = ev_fail(e, "'%s' is undefined", callee.uname ? callee.uname : "value");
	else
		rc = ev_fail(e, "'%s' object is not callable", v_type_name(&callee));
	cargs_free(&a);
	v_drop(&callee);
	return rc;
}

static int eval_slice(struct ev *e, const struct node *n, struct frame *f, struct value *out)
{
	struct value obj, parts[3] = { v_none(), v_none(), v_none() };
	const struct node *pn[3] = { n->a, n->b, n->c };
	int64_t ix[3];
	if (n->args.n < 1) /* the parser gives every slice its object */
		return ev_fail(e, "%s", "a slice without an object");
	int rc = eval(e, n->args.a[0], f, &obj);
	if (rc)
		return rc;
	for (int k = 0; k < 3 && !rc; k++)
		if (pn[k])
			rc = eval(e, pn[k], f, &parts[k]);
	e->line = n->line;
	for (int k = 0; k < 3 && !rc; k++) {
		if (parts[k].kind == V_NONE)
			continue;
		/* Read the index only once its type is known: it was read as a
		 * bool after the error (undefined behaviour, libFuzzer + UBSan). */
		if (parts[k].kind != V_INT && parts[k].kind != V_BOOL)
			rc = ev_fail(e, "slice indices must be integers or None");
		else
			ix[k] = parts[k].kind == V_INT ? parts[k].i : parts[k].b;
	}
	if (!rc && obj.kind != V_STR && obj.kind != V_LIST)
		rc = ev_fail(e, "'%s' object is not subscriptable", v_type_name(&obj));
	if (rc)
		goto out;
	int64_t step = parts[2].kind == V_NONE ? 1 : ix[2];
	if (step == 0) {
		rc = ev_fail(e, "slice step cannot be zero");
		goto out;
	}
	int64_t len = obj.kind == V_STR ? (int64_t)u8_count(obj.s->p, obj.s->n) : (int64_t)obj.l->n;
	int64_t start, stop;
	if (parts[0].kind == V_NONE) {
		start = step > 0 ? 0 : len - 1;
	} else {
		start = ix[0] < 0 ? ix[0] + len : ix[0];
		start = step > 0 ? (start < 0 ? 0 : start > len ? len : start)
				 : (start < 0 ? -1 : start >= len ? len - 1 : start);
	}
	if (parts[1].kind == V_NONE) {
		stop = step > 0 ? len : -1;
	} else {
		stop = ix[1] < 0 ? ix[1] + len : ix[1];
		stop = step > 0 ? (stop < 0 ? 0 : stop > len ? len : stop)
				: (stop < -1 ? -1 : stop >= len ? len - 1 : stop);
	}
	if (obj.kind == V_LIST) {
		if (!v_list_new(obj.l->tuple, out)) {
			rc = ev_oom(e);
			goto out;
		}
		out->data = obj.data;
		out->l->range = obj.l->range;
		for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step)
			if (!list_push(out->l, v_ref(obj.l->a[i]))) {
				v_drop(out);
				rc = ev_oom(e);
				goto out;
			}
	} else {
		struct sbuf b = { 0 };
		for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
			size_t off = u8_offset(obj.s->p, obj.s->n, (size_t)i);
			uint32_t cp;
			size_t cl = u8_decode(obj.s->p + off, obj.s->n - off, &cp);
			sb_putf(&b, obj.s->p + off, cl, obj.s->flags ? obj.s->flags + off : NULL);
		}
		if (!sb_to_str(&b, out))
			rc = ev_oom(e);
	}
out:
	v_drop(&obj);
	for (int k = 0; k < 3; k++)
		v_drop(&parts[k]);
	return rc;
}

static int eval_seq(struct ev *e, const struct node *n, struct frame *f, struct value *out)
{
	int rc;
	if (!(n->type == N_DICT ? v_dict_new(out) : v_list_new(n->type == N_TUPLE, out)))
		return ev_oom(e);
	for (size_t i = 0; i < n->args.n; i++) {
		struct value v;
		if ((rc = eval(e, n->args.a[i], f, &v))) {
			v_drop(out);
			return rc;
		}
		if (n->type == N_DICT) {
			struct value val;
			if ((rc = eval(e, n->args.a[++i], f, &val))) {
				v_drop(&v);
				v_drop(out);
				return rc;
			}
			bool ok = dict_set(out->d, &v, val);
			v_drop(&v);
			if (!ok) {
				v_drop(out);
				return ev_oom(e);
			}
		} else if (!list_push(out->l, v)) {
			v_drop(out);
			return ev_oom(e);
		}
	}
	return FX_OK;
}

static int cmp_op(struct ev *e, int op, const struct value *a, const struct value *b, bool *res)
{
	if (op == OP_EQ || op == OP_NE) {
		*res = v_equal(a, b) == (op == OP_EQ);
		return FX_OK;
	}
	if (op == OP_IN || op == OP_NOTIN) {
		bool in = false;
		if (b->kind == V_STR) {
			if (a->kind != V_STR)
				return ev_fail(e, "'in <string>' requires string as left operand, not %s", v_type_name(a));
			in = a->s->n == 0 || memmem(b->s->p, b->s->n, a->s->p, a->s->n) != NULL;
		} else if (b->kind == V_LIST) {
			for (size_t i = 0; i < b->l->n && !in; i++)
				in = v_equal(a, &b->l->a[i]);
		} else if (b->kind == V_DICT) {
			if ((a->kind == V_LIST && !a->l->tuple) || a->kind == V_DICT)
				return ev_fail(e, "unhashable type: '%s'", v_type_name(a));
			in = dict_get(b->d, a) != NULL;
		} else if (b->kind != V_UNDEF) {
			return ev_fail(e, "argument of type '%s' is not iterable", v_type_name(b));
		}
		*res = in == (op == OP_IN);
		return FX_OK;
	}
	int c;
	if (a->kind == V_UNDEF || b->kind == V_UNDEF)
		return ev_fail(e, "'%s' is undefined", a->kind == V_UNDEF && a->uname ? a->uname
							: b->kind == V_UNDEF && b->uname ? b->uname : "value");
	if (!v_compare(a, b, &c))
		return ev_fail(e, "'%s' not supported between instances of '%s' and '%s'",
			       op == OP_LT ? "<" : op == OP_LE ? "<=" : op == OP_GT ? ">" : ">=",
			       v_type_name(a), v_type_name(b));
	*res = op == OP_LT ? c < 0 : op == OP_LE ? c <= 0 : op == OP_GT ? c > 0 : c >= 0;
	return FX_OK;
}

/* Both operands n->a and n->b, left first; on failure nothing is held.
 * Errors after this point name n's line. */
static int eval_ab(struct ev *e, const struct node *n, struct frame *f, struct value *a,
		   struct value *b)
{
	int rc = eval(e, n->a, f, a);
	if (rc)
		return rc;
	if ((rc = eval(e, n->b, f, b))) {
		v_drop(a);
		return rc;
	}
	e->line = n->line;
	return FX_OK;
}

static int eval(struct ev *e, const struct node *n, struct frame *f, struct value *out)
{
	struct value a, b;
	int rc;
	e->line = n->line;
	switch (n->type) {
	case N_CONST:
		*out = v_ref(n->cval);
		return FX_OK;
	case N_NAME: {
		const struct value *v = lookup(f, n->name);
		bool oom = false;
		if (v) {
			*out = v_ref(*v);
			return FX_OK;
		}
		if (chat_global(n->name, out, &oom))
			return FX_OK;
		if (oom)
			return ev_oom(e);
		*out = v_undef(n->name);
		return FX_OK;
	}
	case N_ATTR:
		if ((rc = eval(e, n->a, f, &a)))
			return rc;
		e->line = n->line;
		rc = chat_getattr(e, &a, n->name, out);
		v_drop(&a);
		return rc;
	case N_ITEM:
		if ((rc = eval_ab(e, n, f, &a, &b)))
			return rc;
		rc = chat_getitem(e, &a, &b, out);
		v_drop(&a);
		v_drop(&b);
		return rc;
	case N_SLICE:
		return eval_slice(e, n, f, out);
	case N_CALL:
		return eval_call(e, n, f, out);
	case N_FILTER: {
		struct cargs ca;
		if ((rc = eval(e, n->a, f, &a)))
			return rc;
		if ((rc = eval_args(e, n, f, &ca))) {
			v_drop(&a);
			return rc;
		}
		e->line = n->line;
		rc = chat_filter(e, n->name, &a, &ca, out);
		cargs_free(&ca);
		v_drop(&a);
		return rc;
	}
	case N_TEST: {
		struct cargs ca;
		bool r = false;
		if ((rc = eval(e, n->a, f, &a)))
			return rc;
		if ((rc = eval_args(e, n, f, &ca))) {
			v_drop(&a);
			return rc;
		}
		e->line = n->line;
		rc = chat_test(e, n->name, &a, &ca, &r);
		cargs_free(&ca);
		v_drop(&a);
		*out = v_bool(r);
		return rc;
	}
	case N_NEG:
	case N_POS:
		if ((rc = eval(e, n->a, f, &a)))
			return rc;
		e->line = n->line;
		if (a.kind == V_INT && a.i == INT64_MIN && n->type == N_NEG)
			rc = ev_fail(e, "integer overflow (ferrox's integers are 64-bit, Python's unbounded)");
		else if (a.kind == V_INT || a.kind == V_BOOL)
			*out = v_int(n->type == N_NEG ? -(a.kind == V_INT ? a.i : a.b) : (a.kind == V_INT ? a.i : a.b));
		else if (a.kind == V_FLOAT)
			*out = v_float(n->type == N_NEG ? -a.f : a.f);
		else
			rc = ev_fail(e, "bad operand type for unary %s: '%s'", n->type == N_NEG ? "-" : "+",
				     v_type_name(&a));
		if (!rc)
			out->data = a.data;
		v_drop(&a);
		return rc;
	case N_NOT:
		if ((rc = eval(e, n->a, f, &a)))
			return rc;
		*out = v_bool(!v_truthy(&a));
		v_drop(&a);
		return FX_OK;
	case N_AND:
	case N_OR:
		if ((rc = eval(e, n->a, f, &a)))
			return rc;
		if (v_truthy(&a) == (n->type == N_OR)) {
			*out = a;
			return FX_OK;
		}
		v_drop(&a);
		return eval(e, n->b, f, out);
	case N_COND:
		if ((rc = eval(e, n->b, f, &a)))
			return rc;
		bool t = v_truthy(&a);
		v_drop(&a);
		if (t)
			return eval(e, n->a, f, out);
		if (n->c)
			return eval(e, n->c, f, out);
		*out = v_undef(NULL);
		return FX_OK;
	case N_BIN:
	case N_CMP:
		if ((rc = eval_ab(e, n, f, &a, &b)))
			return rc;
		if (n->type == N_BIN) {
			rc = chat_binop(e, n->op, &a, &b, out);
		} else {
			bool r = false;
			rc = cmp_op(e, n->op, &a, &b, &r);
			*out = v_bool(r);
		}
		v_drop(&a);
		v_drop(&b);
		return rc;
	case N_CONCAT: {
		struct sbuf s = { 0 };
		for (size_t i = 0; i < n->args.n; i++) {
			if ((rc = eval(e, n->args.a[i], f, &a))) {
				sb_free(&s);
				return rc;
			}
			v_write(&s, &a, false);
			v_drop(&a);
		}
		return sb_to_str(&s, out) ? FX_OK : ev_oom(e);
	}
	case N_LIST:
	case N_TUPLE:
	case N_DICT:
		return eval_seq(e, n, f, out);
	default:
		return ev_fail(e, "unsupported expression");
	}
}

/* ---- statements ------------------------------------------------------- */

static int assign(struct ev *e, const struct node *targets, struct frame *f, struct value v)
{
	if (targets->args.n == 1)
		return frame_set(f, targets->args.a[0]->name, v) ? ev_oom(e) : FX_OK;
	struct value items;
	int rc = chat_iter(e, &v, &items);
	v_drop(&v);
	if (rc)
		return rc;
	if (items.l->n != targets->args.n) {
		rc = ev_fail(e, "cannot unpack %zu value(s) into %zu name(s)", items.l->n, targets->args.n);
	} else {
		for (size_t i = 0; i < items.l->n && !rc; i++)
			if (frame_set(f, targets->args.a[i]->name, v_ref(items.l->a[i])))
				rc = ev_oom(e);
	}
	v_drop(&items);
	return rc;
}

static int loop_dict(struct ev *e, const struct vlist *items, size_t i, struct value *out)
{
	size_t len = items->n;
	struct {
		const char *k;
		struct value v;
	} kv[] = {
		{ "index", v_int((int64_t)i + 1) },
		{ "index0", v_int((int64_t)i) },
		{ "revindex", v_int((int64_t)(len - i)) },
		{ "revindex0", v_int((int64_t)(len - i - 1)) },
		{ "first", v_bool(i == 0) },
		{ "last", v_bool(i + 1 == len) },
		{ "length", v_int((int64_t)len) },
		{ "depth", v_int(1) },
		{ "depth0", v_int(0) },
	};
	if (!v_dict_new(out))
		return ev_oom(e);
	out->d->loop = true;
	for (size_t k = 0; k < sizeof(kv) / sizeof(kv[0]); k++)
		if (!dict_set_str(out->d, kv[k].k, kv[k].v))
			goto oom;
	if (i > 0 && !dict_set_str(out->d, "previtem", v_ref(items->a[i - 1])))
		goto oom;
	if (i + 1 < len && !dict_set_str(out->d, "nextitem", v_ref(items->a[i + 1])))
		goto oom;
	return FX_OK;
oom:
	v_drop(out);
	return ev_oom(e);
}

static int exec_for(struct ev *e, const struct node *n, struct frame *f, struct sbuf *o)
{
	struct value it, items, kept;
	int rc = eval(e, n->a, f, &it);
	if (rc)
		return rc;
	e->line = n->line;
	rc = chat_iter(e, &it, &items);
	v_drop(&it);
	if (rc)
		return rc;
	if (n->b) { /* for x in xs if cond: filter first, so loop.* counts what is kept */
		if (!v_list_new(false, &kept)) {
			v_drop(&items);
			return ev_oom(e);
		}
		for (size_t i = 0; i < items.l->n && !rc; i++) {
			struct frame tf = { .parent = f };
			struct value c;
			if (++e->steps > CHAT_MAX_STEPS) {
				rc = ev_fail(e, "more than %u loop iterations: a template that would not "
					     "finish", CHAT_MAX_STEPS);
				break;
			}
			if (!(rc = assign(e, n, &tf, v_ref(items.l->a[i]))) && !(rc = eval(e, n->b, &tf, &c))) {
				if (v_truthy(&c) && !list_push(kept.l, v_ref(items.l->a[i])))
					rc = ev_oom(e);
				v_drop(&c);
			}
			frame_free(&tf);
		}
		v_drop(&items);
		if (rc) {
			v_drop(&kept);
			return rc;
		}
		items = kept;
	}
	for (size_t i = 0; i < items.l->n && !rc; i++) {
		struct frame lf = { .parent = f };
		struct value loop;
		if (++e->steps > CHAT_MAX_STEPS) {
			rc = ev_fail(e, "more than %u loop iterations: a template that would not finish",
				     CHAT_MAX_STEPS);
			break;
		}
		if (!(rc = loop_dict(e, items.l, i, &loop)) &&
		    !(rc = frame_set(&lf, "loop", loop) ? ev_oom(e) : FX_OK) &&
		    !(rc = assign(e, n, &lf, v_ref(items.l->a[i]))) && !(rc = frame_enter(e, &lf, n->scope)))
			rc = exec_list(e, &n->body, &lf, o);
		frame_free(&lf);
		if (e->flow == FLOW_BREAK) {
			e->flow = FLOW_NONE;
			break;
		}
		e->flow = FLOW_NONE;
	}
	if (!rc && items.l->n == 0 && n->els.n) {
		struct frame ef = { .parent = f };
		if (!(rc = frame_enter(e, &ef, n->scope2)))
			rc = exec_list(e, &n->els, &ef, o);
		frame_free(&ef);
	}
	v_drop(&items);
	return rc;
}

/* Apply the filters of a filter block / block set (N_FILTER nodes with a
 * NULL input) to v, in order. */
static int apply_filters(struct ev *e, const struct nlist *fl, struct frame *f, struct value *v)
{
	int rc = FX_OK;
	for (size_t i = 0; i < fl->n && !rc; i++) {
		struct cargs ca;
		struct value r;
		if ((rc = eval_args(e, fl->a[i], f, &ca)))
			break;
		e->line = fl->a[i]->line;
		rc = chat_filter(e, fl->a[i]->name, v, &ca, &r);
		cargs_free(&ca);
		if (!rc) {
			v_drop(v);
			*v = r;
		}
	}
	return rc;
}

/* Does v hold dictionary d (a namespace put inside itself would make a
 * cycle: endless printing, a reference-count leak)? */
static bool holds(const struct value *v, const struct vdict *d, int depth)
{
	if (depth > 64)
		return true;
	if (v->kind == V_DICT) {
		if (v->d == d)
			return true;
		for (size_t i = 0; i < v->d->n; i++)
			if (holds(&v->d->v[i], d, depth + 1))
				return true;
	} else if (v->kind == V_LIST) {
		for (size_t i = 0; i < v->l->n; i++)
			if (holds(&v->l->a[i], d, depth + 1))
				return true;
	} else if (v->kind == V_FUNC && v->fn->self) {
		return holds(v->fn->self, d, depth + 1);
	} else if (v->kind == V_MACRO && v->closure) {
		return true; /* a caller lives only during its call */
	}
	return false;
}

static int exec_stmt(struct ev *e, const struct node *n, struct frame *f, struct sbuf *o)
{
	struct value v;
	int rc;
	e->line = n->line;
	switch (n->type) {
	case N_TEXT:
		v_write(o, &n->cval, false);
		return FX_OK;
	case N_OUT:
		if ((rc = eval(e, n->a, f, &v)))
			return rc;
		if (v.kind == V_LIST && (v.l->gen || v.l->range)) {
			bool gen = v.l->gen;
			v_drop(&v);
			return ev_fail(e, "printing a %s is not supported (add |list)", gen ? "generator" : "range");
		}
		v_write(o, &v, false);
		v_drop(&v);
		return o->oom ? ev_oom(e) : FX_OK;
	case N_IF:
		if ((rc = eval(e, n->a, f, &v)))
			return rc;
		bool t = v_truthy(&v);
		v_drop(&v);
		return exec_list(e, t ? &n->body : &n->els, f, o);
	case N_FOR:
		return exec_for(e, n, f, o);
	case N_SET:
		if ((rc = eval(e, n->a, f, &v)))
			return rc;
		e->line = n->line;
		if (n->b) { /* set ns.attr = v */
			const struct value *ns = lookup(f, n->b->name);
			if (!ns || ns->kind != V_DICT || !ns->d->ns) {
				v_drop(&v);
				return ev_fail(e, "cannot assign attribute on non-namespace object '%s'", n->b->name);
			}
			if (holds(&v, ns->d, 0)) {
				v_drop(&v);
				return ev_fail(e, "a namespace cannot hold itself or a call block's caller");
			}
			return dict_set_str(ns->d, n->b->name2, v) ? FX_OK : ev_oom(e);
		}
		return assign(e, n, f, v);
	case N_SETBLOCK:
	case N_FILTERBLOCK: { /* the body (and the filters) run in a frame of their own */
		struct sbuf b = { 0 };
		struct frame bf = { .parent = f };
		if ((rc = frame_enter(e, &bf, n->scope)) || (rc = exec_list(e, &n->body, &bf, &b))) {
			sb_free(&b);
			frame_free(&bf);
			return rc;
		}
		if (!sb_to_str(&b, &v)) {
			frame_free(&bf);
			return ev_oom(e);
		}
		rc = apply_filters(e, &n->kwargs, &bf, &v);
		frame_free(&bf);
		if (rc) {
			v_drop(&v);
			return rc;
		}
		if (n->type == N_SETBLOCK)
			return assign(e, n, f, v);
		v_write(o, &v, false);
		v_drop(&v);
		return FX_OK;
	}
	case N_MACRO:
		v = (struct value){ .kind = V_MACRO };
		v.macro = n;
		v.closure = f == e->root ? NULL : f; /* a macro sees the frame it is defined in */
		return frame_set(f, n->name, v) ? ev_oom(e) : FX_OK;
	case N_WITH: {
		struct frame wf = { .parent = f };
		rc = frame_enter(e, &wf, n->scope);
		for (size_t i = 0; i < n->args.n && !rc; i++) {
			if (!(rc = eval(e, n->args.a[i]->a, f, &v)) && frame_set(&wf, n->args.a[i]->name, v))
				rc = ev_oom(e);
		}
		if (!rc)
			rc = exec_list(e, &n->body, &wf, o);
		frame_free(&wf);
		return rc;
	}
	case N_CALLBLOCK: {
		struct value callee, caller = { .kind = V_MACRO }, r;
		struct cargs ca;
		caller.macro = n;
		caller.closure = f;
		if ((rc = eval(e, n->a->a, f, &callee)))
			return rc;
		if (callee.kind != V_MACRO) {
			v_drop(&callee);
			return ev_fail(e, "a call block needs a macro, got %s", v_type_name(&callee));
		}
		if ((rc = eval_args(e, n->a, f, &ca))) {
			v_drop(&callee);
			return rc;
		}
		e->line = n->line;
		rc = call_macro(e, callee.macro, callee.closure, &ca, &caller, &r);
		cargs_free(&ca);
		v_drop(&callee);
		if (!rc) {
			v_write(o, &r, false);
			v_drop(&r);
		}
		return rc;
	}
	case N_BREAK:
		e->flow = FLOW_BREAK;
		return FX_OK;
	case N_CONTINUE:
		e->flow = FLOW_CONTINUE;
		return FX_OK;
	case N_BLOCK: {
		struct frame bf = { .parent = f };
		if (!(rc = frame_enter(e, &bf, n->scope)))
			rc = exec_list(e, &n->body, &bf, o);
		frame_free(&bf);
		return rc;
	}
	default:
		return ev_fail(e, "unsupported statement");
	}
}

static int exec_list(struct ev *e, const struct nlist *l, struct frame *f, struct sbuf *o)
{
	for (size_t i = 0; i < l->n; i++) {
		int rc = exec_stmt(e, l->a[i], f, o);
		if (rc)
			return rc;
		if (o->oom)
			return ev_oom(e);
		if (e->flow != FLOW_NONE)
			return FX_OK;
	}
	return FX_OK;
}

int chat_exec(struct ev *e, const struct tmpl *t, struct sbuf *o)
{
	int rc = frame_enter(e, e->root, t->root->scope);
	if (!rc)
		rc = exec_list(e, &t->root->body, e->root, o);
	if (!rc && e->flow != FLOW_NONE)
		e->flow = FLOW_NONE; /* break outside a loop: jinja2 rejects it at compile time */
	return rc;
}
