/* Template parser: tokens -> syntax tree, with jinja2 3.1's precedence
 * (parser.py): condexpr < or < and < not < compare < + - < ~ < * / // %
 * < ** < unary - + < postfix (. [] ()) and filters / tests. */
#include <stdio.h>
#include <string.h>

#include "chat/ast.h"
#include "core/alloc.h"
#include "core/status.h"

struct ps {
	const struct tokens *tk;
	size_t i;
	struct tmpl *t;
	struct fx_err *err;
	int rc;
	int depth;         /* nesting of expressions and blocks, bounded */
	int loops;         /* enclosing for loops (break/continue), within a macro */
	struct node dummy; /* handed out once rc is set, so callers need no NULL checks */
};

static const struct token *cur(struct ps *p) { return &p->tk->a[p->i]; }
static const struct token *peek(struct ps *p, size_t k)
{
	size_t j = p->i + k < p->tk->n ? p->i + k : p->tk->n - 1;
	return &p->tk->a[j];
}
static void next(struct ps *p) { if (p->i + 1 < p->tk->n) p->i++; }

static int fail(struct ps *p, const char *fmt, const char *what)
{
	if (!p->rc) {
		char m[200];
		snprintf(m, sizeof(m), fmt, what);
		p->rc = fx_fail(p->err, FX_E_FORMAT, "template line %d: %s", cur(p)->line, m);
	}
	return p->rc;
}

static const char *tok_desc(const struct token *t)
{
	switch (t->type) {
	case T_EOF: return "end of template";
	case T_TEXT: return "template data";
	case T_VBEGIN: return "'{{'";
	case T_VEND: return "'}}'";
	case T_BBEGIN: return "'{%'";
	case T_BEND: return "'%}'";
	case T_NAME: return t->s;
	case T_STR: return "string";
	case T_INT: return "integer";
	case T_FLOAT: return "float";
	default: return t->op;
	}
}

static bool is_op(struct ps *p, const char *op)
{
	return cur(p)->type == T_OP && !strcmp(cur(p)->op, op);
}
static bool is_name(struct ps *p, const char *name)
{
	return cur(p)->type == T_NAME && !strcmp(cur(p)->s, name);
}
static bool skip_op(struct ps *p, const char *op)
{
	if (!is_op(p, op))
		return false;
	next(p);
	return true;
}
static bool skip_name(struct ps *p, const char *name)
{
	if (!is_name(p, name))
		return false;
	next(p);
	return true;
}
static bool expect_op(struct ps *p, const char *op)
{
	if (skip_op(p, op))
		return true;
	char m[64];
	snprintf(m, sizeof(m), "expected '%s', got '%%s'", op);
	fail(p, m, tok_desc(cur(p)));
	return false;
}

static struct node *mk(struct ps *p, int type)
{
	if (p->rc)
		return &p->dummy;
	struct tmpl *t = p->t;
	if (t->n_all == t->cap_all) {
		size_t cap = t->cap_all ? 2 * t->cap_all : 64;
		struct node **a = fx_realloc_array(t->all, cap, sizeof(*a));
		if (!a) {
			p->rc = fx_fail(p->err, FX_E_NOMEM, "out of memory parsing the template");
			return &p->dummy;
		}
		t->all = a;
		t->cap_all = cap;
	}
	struct node *n = fx_calloc(1, sizeof(*n));
	if (!n) {
		p->rc = fx_fail(p->err, FX_E_NOMEM, "out of memory parsing the template");
		return &p->dummy;
	}
	n->type = type;
	n->line = cur(p)->line;
	t->all[t->n_all++] = n;
	return n;
}

static void add(struct ps *p, struct nlist *l, struct node *n)
{
	if (p->rc || !n)
		return;
	if (l->n == l->cap) {
		size_t cap = l->cap ? 2 * l->cap : 4;
		struct node **a = fx_realloc_array(l->a, cap, sizeof(*a));
		if (!a) {
			p->rc = fx_fail(p->err, FX_E_NOMEM, "out of memory parsing the template");
			return;
		}
		l->a = a;
		l->cap = cap;
	}
	l->a[l->n++] = n;
}

/* Names are only allocated while parsing goes well: after a failure the
 * nodes handed out are the shared dummy, which owns nothing. */
static char *dupname(struct ps *p, const char *s)
{
	if (p->rc)
		return NULL;
	size_t n = strlen(s);
	char *d = fx_malloc_array(n + 1, 1);
	if (!d) {
		p->rc = fx_fail(p->err, FX_E_NOMEM, "out of memory parsing the template");
		return NULL;
	}
	memcpy(d, s, n + 1);
	return d;
}

static char *expect_name(struct ps *p)
{
	if (cur(p)->type != T_NAME) {
		fail(p, "expected a name, got '%s'", tok_desc(cur(p)));
		return NULL;
	}
	char *s = dupname(p, cur(p)->s);
	next(p);
	return s;
}

static struct node *expr(struct ps *p);
static struct node *expr_nocond(struct ps *p);
static struct node *unary(struct ps *p, bool with_filter);
static struct node *primary(struct ps *p);
static struct node *postfix(struct ps *p, struct node *n);

/* ( args ) into n->args / n->kwargs */
static void call_args(struct ps *p, struct node *n)
{
	if (!expect_op(p, "("))
		return;
	bool need_comma = false;
	while (!p->rc && !is_op(p, ")")) {
		if (need_comma) {
			if (!expect_op(p, ","))
				return;
			if (is_op(p, ")"))
				break;
		}
		if (is_op(p, "*") || is_op(p, "**")) {
			fail(p, "%s: *args and **kwargs in calls are not supported", cur(p)->op);
			return;
		}
		if (cur(p)->type == T_NAME && peek(p, 1)->type == T_OP && !strcmp(peek(p, 1)->op, "=")) {
			struct node *k = mk(p, N_NAME);
			if (!k)
				return;
			k->name = expect_name(p);
			next(p);
			k->a = expr(p);
			add(p, &n->kwargs, k);
		} else {
			if (n->kwargs.n) {
				fail(p, "%s", "positional argument after a keyword argument");
				return;
			}
			add(p, &n->args, expr(p));
		}
		need_comma = true;
	}
	expect_op(p, ")");
}

static struct node *filter_one(struct ps *p, struct node *in)
{
	struct node *f = mk(p, N_FILTER);
	if (!f)
		return NULL;
	f->a = in;
	f->name = expect_name(p);
	if (is_op(p, "."))
		fail(p, "%s", "dotted filter names are not supported");
	if (is_op(p, "("))
		call_args(p, f);
	return f;
}

static struct node *test_expr(struct ps *p, struct node *in)
{
	next(p); /* is */
	bool neg = skip_name(p, "not");
	struct node *t = mk(p, N_TEST);
	if (!t)
		return NULL;
	t->a = in;
	t->name = expect_name(p);
	const struct token *c = cur(p);
	if (is_op(p, "(")) {
		call_args(p, t);
	} else if ((c->type == T_NAME || c->type == T_STR || c->type == T_INT || c->type == T_FLOAT ||
		    is_op(p, "[") || is_op(p, "{")) &&
		   !is_name(p, "else") && !is_name(p, "or") && !is_name(p, "and")) {
		if (is_name(p, "is")) {
			fail(p, "%s", "you cannot chain multiple tests with is");
			return NULL;
		}
		add(p, &t->args, postfix(p, primary(p)));
	}
	if (neg) {
		struct node *n = mk(p, N_NOT);
		if (n)
			n->a = t;
		return n;
	}
	return t;
}

/* callee(...): a call node over callee with the arguments that follow. */
static struct node *call_on(struct ps *p, struct node *callee)
{
	struct node *c = mk(p, N_CALL);
	if (!c)
		return NULL;
	c->a = callee;
	call_args(p, c);
	return c;
}

static struct node *filter_expr(struct ps *p, struct node *n)
{
	while (!p->rc && n) {
		if (is_op(p, "|")) {
			next(p);
			n = filter_one(p, n);
		} else if (is_name(p, "is")) {
			n = test_expr(p, n);
		} else if (is_op(p, "(")) {
			n = call_on(p, n);
		} else {
			break;
		}
	}
	return n;
}

/* inside [ ]: an expression or a slice */
static struct node *subscribed(struct ps *p)
{
	struct node *parts[3] = { NULL, NULL, NULL };
	if (!is_op(p, ":")) {
		struct node *e = expr(p);
		if (!is_op(p, ":"))
			return e;
		parts[0] = e;
	}
	next(p); /* : */
	if (!is_op(p, ":") && !is_op(p, "]") && !is_op(p, ","))
		parts[1] = expr(p);
	if (skip_op(p, ":") && !is_op(p, "]") && !is_op(p, ","))
		parts[2] = expr(p);
	struct node *s = mk(p, N_SLICE);
	if (s) {
		s->a = parts[0];
		s->b = parts[1];
		s->c = parts[2];
	}
	return s;
}

static struct node *postfix(struct ps *p, struct node *n)
{
	while (!p->rc && n) {
		if (is_op(p, ".")) {
			next(p);
			if (cur(p)->type == T_INT) {
				struct node *it = mk(p, N_ITEM), *k = mk(p, N_CONST);
				if (!it || !k)
					return NULL;
				k->cval = v_int(cur(p)->i);
				next(p);
				it->a = n;
				it->b = k;
				n = it;
				continue;
			}
			struct node *a = mk(p, N_ATTR);
			if (!a)
				return NULL;
			a->a = n;
			a->name = expect_name(p);
			n = a;
		} else if (is_op(p, "[")) {
			next(p);
			struct node *it = mk(p, N_ITEM);
			if (!it)
				return NULL;
			it->a = n;
			struct node *first = subscribed(p);
			if (is_op(p, ",")) {
				struct node *tup = mk(p, N_TUPLE);
				if (!tup)
					return NULL;
				add(p, &tup->args, first);
				while (skip_op(p, ",") && !is_op(p, "]"))
					add(p, &tup->args, subscribed(p));
				/* a[1:2, 3]: a slice has no meaning inside a tuple key
				 * (found by fuzz_chat: the slice had no object) */
				for (size_t i = 0; i < tup->args.n && !p->rc; i++)
					if (tup->args.a[i] && tup->args.a[i]->type == N_SLICE)
						fail(p, "a slice inside a subscript tuple (%s) is not supported",
						     "a[x:y, z]");
				first = tup;
			}
			if (first && first->type == N_SLICE) {
				first->args.n = 0;
				struct node *sl = first;
				sl->line = it->line;
				/* a[b:c:d] -> SLICE node with the object in args[0] */
				add(p, &sl->args, n);
				expect_op(p, "]");
				n = sl;
				continue;
			}
			it->b = first;
			expect_op(p, "]");
			n = it;
		} else if (is_op(p, "(")) {
			n = call_on(p, n);
		} else {
			break;
		}
	}
	return n;
}

static struct node *literal_seq(struct ps *p, int type, const char *close)
{
	struct node *l = mk(p, type);
	next(p);
	while (!p->rc && !is_op(p, close)) {
		if (l->args.n && !expect_op(p, ","))
			return NULL;
		if (is_op(p, close))
			break;
		if (type == N_DICT) {
			add(p, &l->args, expr(p));
			if (!expect_op(p, ":"))
				return NULL;
		}
		add(p, &l->args, expr(p));
	}
	expect_op(p, close);
	return l;
}

static struct node *primary(struct ps *p)
{
	const struct token *t = cur(p);
	struct node *n;
	if (p->rc)
		return NULL;
	if (t->type == T_NAME) {
		n = mk(p, N_CONST);
		if (!n)
			return NULL;
		if (!strcmp(t->s, "true") || !strcmp(t->s, "True")) {
			n->cval = v_bool(true);
		} else if (!strcmp(t->s, "false") || !strcmp(t->s, "False")) {
			n->cval = v_bool(false);
		} else if (!strcmp(t->s, "none") || !strcmp(t->s, "None")) {
			n->cval = v_none();
		} else {
			n->type = N_NAME;
			n->name = dupname(p, t->s);
		}
		next(p);
		return n;
	}
	if (t->type == T_STR) {
		struct sbuf b = { 0 };
		int line = t->line;
		while (cur(p)->type == T_STR) {
			sb_put(&b, cur(p)->s, cur(p)->n, 0);
			next(p);
		}
		n = mk(p, N_CONST);
		if (p->rc) {
			sb_free(&b);
			return n;
		}
		n->line = line;
		if (!sb_to_str(&b, &n->cval))
			p->rc = fx_fail(p->err, FX_E_NOMEM, "out of memory parsing the template");
		return n;
	}
	if (t->type == T_INT || t->type == T_FLOAT) {
		n = mk(p, N_CONST);
		if (n)
			n->cval = t->type == T_INT ? v_int(t->i) : v_float(t->f);
		next(p);
		return n;
	}
	if (is_op(p, "(")) {
		next(p);
		if (is_op(p, ")")) { /* () */
			next(p);
			return mk(p, N_TUPLE);
		}
		n = expr(p);
		if (is_op(p, ",")) {
			struct node *tup = mk(p, N_TUPLE);
			add(p, &tup->args, n);
			while (skip_op(p, ",") && !is_op(p, ")"))
				add(p, &tup->args, expr(p));
			n = tup;
		}
		expect_op(p, ")");
		return n;
	}
	if (is_op(p, "["))
		return literal_seq(p, N_LIST, "]");
	if (is_op(p, "{"))
		return literal_seq(p, N_DICT, "}");
	fail(p, "unexpected '%s'", tok_desc(t));
	return NULL;
}

static struct node *unary(struct ps *p, bool with_filter)
{
	struct node *n;
	if (is_op(p, "-") || is_op(p, "+")) {
		n = mk(p, is_op(p, "-") ? N_NEG : N_POS);
		next(p);
		if (++p->depth > 150)
			fail(p, "%s", "expressions nested too deeply");
		else
			n->a = unary(p, false);
		p->depth--;
	} else {
		n = primary(p);
	}
	n = postfix(p, n);
	if (with_filter)
		n = filter_expr(p, n);
	return n;
}

static struct node *bin(struct ps *p, int op, struct node *a, struct node *b)
{
	struct node *n = mk(p, N_BIN);
	if (n) {
		n->op = op;
		n->a = a;
		n->b = b;
	}
	return n;
}

static struct node *power(struct ps *p)
{
	struct node *l = unary(p, true);
	while (!p->rc && is_op(p, "**")) {
		next(p);
		l = bin(p, OP_POW, l, unary(p, true));
	}
	return l;
}

static struct node *math2(struct ps *p)
{
	struct node *l = power(p);
	for (;;) {
		int op = is_op(p, "*") ? OP_MUL : is_op(p, "/") ? OP_DIV : is_op(p, "//") ? OP_FLOORDIV
			 : is_op(p, "%") ? OP_MOD : -1;
		if (op < 0 || p->rc)
			return l;
		next(p);
		l = bin(p, op, l, power(p));
	}
}

static struct node *concat(struct ps *p)
{
	struct node *l = math2(p);
	if (!is_op(p, "~"))
		return l;
	struct node *c = mk(p, N_CONCAT);
	add(p, &c->args, l);
	while (!p->rc && skip_op(p, "~"))
		add(p, &c->args, math2(p));
	return c;
}

static struct node *math1(struct ps *p)
{
	struct node *l = concat(p);
	for (;;) {
		int op = is_op(p, "+") ? OP_ADD : is_op(p, "-") ? OP_SUB : -1;
		if (op < 0 || p->rc)
			return l;
		next(p);
		l = bin(p, op, l, concat(p));
	}
}

static struct node *compare(struct ps *p)
{
	struct node *l = math1(p), *res = NULL;
	for (;;) {
		int op = is_op(p, "==") ? OP_EQ : is_op(p, "!=") ? OP_NE : is_op(p, "<") ? OP_LT
			 : is_op(p, "<=") ? OP_LE : is_op(p, ">") ? OP_GT : is_op(p, ">=") ? OP_GE : -1;
		if (op >= 0) {
			next(p);
		} else if (is_name(p, "in")) {
			op = OP_IN;
			next(p);
		} else if (is_name(p, "not") && peek(p, 1)->type == T_NAME && !strcmp(peek(p, 1)->s, "in")) {
			op = OP_NOTIN;
			next(p);
			next(p);
		} else {
			break;
		}
		if (p->rc)
			return NULL;
		struct node *r = math1(p), *c = mk(p, N_CMP);
		if (!c)
			return NULL;
		c->op = op;
		c->a = l;
		c->b = r;
		if (res) { /* a < b < c: (a < b) and (b < c) */
			struct node *a = mk(p, N_AND);
			if (!a)
				return NULL;
			a->a = res;
			a->b = c;
			res = a;
		} else {
			res = c;
		}
		l = r;
	}
	return res ? res : l;
}

static struct node *not_expr(struct ps *p)
{
	if (is_name(p, "not")) {
		struct node *n = mk(p, N_NOT);
		next(p);
		if (++p->depth > 150)
			fail(p, "%s", "expressions nested too deeply");
		else
			n->a = not_expr(p);
		p->depth--;
		return n;
	}
	return compare(p);
}

static struct node *and_expr(struct ps *p)
{
	struct node *l = not_expr(p);
	while (!p->rc && skip_name(p, "and")) {
		struct node *n = mk(p, N_AND);
		if (!n)
			return NULL;
		n->a = l;
		n->b = not_expr(p);
		l = n;
	}
	return l;
}

static struct node *expr_nocond(struct ps *p)
{
	struct node *l = and_expr(p);
	while (!p->rc && skip_name(p, "or")) {
		struct node *n = mk(p, N_OR);
		if (!n)
			return NULL;
		n->a = l;
		n->b = and_expr(p);
		l = n;
	}
	return l;
}

static struct node *expr_inner(struct ps *p);

/* Every nested expression passes here: the depth bound keeps a hostile
 * template from exhausting the stack (parser and evaluator). */
static struct node *expr(struct ps *p)
{
	if (++p->depth > 150) {
		fail(p, "%s", "expressions or blocks nested too deeply");
		p->depth--;
		return &p->dummy;
	}
	struct node *n = expr_inner(p);
	p->depth--;
	return n;
}

static struct node *expr_inner(struct ps *p)
{
	struct node *l = expr_nocond(p);
	while (!p->rc && skip_name(p, "if")) {
		struct node *c = mk(p, N_COND);
		if (!c)
			return NULL;
		c->b = expr_nocond(p);
		c->a = l;
		if (skip_name(p, "else"))
			c->c = expr(p);
		l = c;
	}
	return l;
}

/* ---- statements ------------------------------------------------------- */

static int body(struct ps *p, struct nlist *out, const char *const *ends, const char **hit);

static bool expect_end(struct ps *p)
{
	if (cur(p)->type == T_BEND) {
		next(p);
		return true;
	}
	fail(p, "expected end of statement '%%}', got '%s'", tok_desc(cur(p)));
	return false;
}

/* Parse a block body up to one of ends; consumes "{% end... %}" fully. */
static bool sub(struct ps *p, struct nlist *out, const char *const *ends, const char **hit)
{
	if (body(p, out, ends, hit))
		return false;
	return true;
}

static struct node *stmt_if(struct ps *p)
{
	struct node *n = mk(p, N_IF);
	static const char *const ends[] = { "elif", "else", "endif", NULL };
	const char *hit = NULL;
	if (!n)
		return NULL;
	n->a = expr(p);
	if (!expect_end(p) || !sub(p, &n->body, ends, &hit))
		return NULL;
	if (!strcmp(hit, "elif")) {
		add(p, &n->els, stmt_if(p));
		return n;
	}
	if (!strcmp(hit, "else")) {
		static const char *const e2[] = { "endif", NULL };
		if (!expect_end(p) || !sub(p, &n->els, e2, &hit))
			return NULL;
	}
	expect_end(p);
	return n;
}

static struct node *target_names(struct ps *p, struct node *n)
{
	bool paren = skip_op(p, "(");
	do {
		struct node *t = mk(p, N_NAME);
		if (!t)
			return NULL;
		t->name = expect_name(p);
		add(p, &n->args, t);
	} while (!p->rc && skip_op(p, ","));
	if (paren)
		expect_op(p, ")");
	return n;
}

static struct node *stmt_for(struct ps *p)
{
	struct node *n = mk(p, N_FOR);
	static const char *const ends[] = { "else", "endfor", NULL };
	static const char *const e2[] = { "endfor", NULL };
	const char *hit = NULL;
	if (!n)
		return NULL;
	target_names(p, n);
	if (!skip_name(p, "in")) {
		fail(p, "expected 'in' in a for loop, got '%s'", tok_desc(cur(p)));
		return NULL;
	}
	n->a = expr_nocond(p);
	if (is_op(p, ",")) { /* for x in a, b */
		struct node *tup = mk(p, N_TUPLE);
		add(p, &tup->args, n->a);
		while (skip_op(p, ",") && cur(p)->type != T_BEND && !is_name(p, "if"))
			add(p, &tup->args, expr_nocond(p));
		n->a = tup;
	}
	if (skip_name(p, "if"))
		n->b = expr_nocond(p);
	if (is_name(p, "recursive")) {
		fail(p, "%s", "recursive for loops are not supported");
		return NULL;
	}
	p->loops++;
	bool ok = expect_end(p) && sub(p, &n->body, ends, &hit);
	p->loops--;
	if (!ok)
		return NULL;
	if (!strcmp(hit, "else") && (!expect_end(p) || !sub(p, &n->els, e2, &hit)))
		return NULL;
	expect_end(p);
	return n;
}

static struct node *stmt_set(struct ps *p)
{
	struct node *n = mk(p, N_SET);
	if (!n)
		return NULL;
	if (cur(p)->type == T_NAME && peek(p, 1)->type == T_OP && !strcmp(peek(p, 1)->op, ".")) {
		struct node *r = mk(p, N_NSREF);
		if (!r)
			return NULL;
		r->name = expect_name(p);
		next(p);
		r->name2 = expect_name(p);
		n->b = r;
	} else {
		target_names(p, n);
	}
	if (skip_op(p, "=")) {
		n->a = expr(p);
		if (is_op(p, ",")) {
			struct node *tup = mk(p, N_TUPLE);
			add(p, &tup->args, n->a);
			while (skip_op(p, ",") && cur(p)->type != T_BEND)
				add(p, &tup->args, expr(p));
			n->a = tup;
		}
		expect_end(p);
		return n;
	}
	/* block set: {% set x | filters %}...{% endset %} */
	if (n->b || n->args.n != 1) {
		fail(p, "%s", "a block set assigns one plain name");
		return NULL;
	}
	n->type = N_SETBLOCK;
	while (!p->rc && skip_op(p, "|"))
		add(p, &n->kwargs, filter_one(p, NULL));
	static const char *const ends[] = { "endset", NULL };
	const char *hit;
	if (!expect_end(p) || !sub(p, &n->body, ends, &hit))
		return NULL;
	expect_end(p);
	return n;
}

static struct node *stmt_macro(struct ps *p)
{
	struct node *n = mk(p, N_MACRO);
	if (!n)
		return NULL;
	n->name = expect_name(p);
	if (!expect_op(p, "("))
		return NULL;
	while (!p->rc && !is_op(p, ")")) {
		if (n->args.n && !expect_op(p, ","))
			return NULL;
		if (is_op(p, ")"))
			break;
		struct node *a = mk(p, N_NAME);
		if (!a)
			return NULL;
		a->name = expect_name(p);
		if (skip_op(p, "="))
			a->a = expr(p);
		add(p, &n->args, a);
	}
	expect_op(p, ")");
	static const char *const ends[] = { "endmacro", NULL };
	const char *hit;
	int loops = p->loops;
	p->loops = 0; /* a macro body is a function: no loop around it */
	bool ok = expect_end(p) && sub(p, &n->body, ends, &hit);
	p->loops = loops;
	if (!ok)
		return NULL;
	if (cur(p)->type == T_NAME)
		next(p); /* {% endmacro name %} */
	expect_end(p);
	return n;
}

static struct node *stmt_filter(struct ps *p)
{
	struct node *n = mk(p, N_FILTERBLOCK);
	if (!n)
		return NULL;
	do
		add(p, &n->kwargs, filter_one(p, NULL));
	while (!p->rc && skip_op(p, "|"));
	static const char *const ends[] = { "endfilter", NULL };
	const char *hit;
	if (!expect_end(p) || !sub(p, &n->body, ends, &hit))
		return NULL;
	expect_end(p);
	return n;
}

static struct node *statement(struct ps *p)
{
	const struct token *t = cur(p);
	if (t->type != T_NAME) {
		fail(p, "expected a statement name, got '%s'", tok_desc(t));
		return NULL;
	}
	char name[32];
	snprintf(name, sizeof(name), "%s", t->s);
	next(p);
	if (!strcmp(name, "if"))
		return stmt_if(p);
	if (!strcmp(name, "for"))
		return stmt_for(p);
	if (!strcmp(name, "set"))
		return stmt_set(p);
	if (!strcmp(name, "macro"))
		return stmt_macro(p);
	if (!strcmp(name, "filter"))
		return stmt_filter(p);
	if (!strcmp(name, "break") || !strcmp(name, "continue")) {
		if (!p->loops) {
			p->i--;
			fail(p, "'%s' outside loop", name);
			return &p->dummy;
		}
		struct node *n = mk(p, name[0] == 'b' ? N_BREAK : N_CONTINUE);
		expect_end(p);
		return n;
	}
	if (!strcmp(name, "with")) { /* {% with a = x, b = y %}: values from the outer scope */
		struct node *n = mk(p, N_WITH);
		static const char *const ends[] = { "endwith", NULL };
		const char *hit;
		while (!p->rc && cur(p)->type == T_NAME) {
			struct node *t = mk(p, N_NAME);
			t->name = expect_name(p);
			if (!expect_op(p, "="))
				return &p->dummy;
			t->a = expr(p);
			add(p, &n->args, t);
			if (!skip_op(p, ","))
				break;
		}
		if (!expect_end(p) || !sub(p, &n->body, ends, &hit))
			return &p->dummy;
		expect_end(p);
		return n;
	}
	if (!strcmp(name, "call")) { /* {% call(params) macro(args) %}body{% endcall %} */
		struct node *n = mk(p, N_CALLBLOCK);
		static const char *const ends[] = { "endcall", NULL };
		const char *hit;
		n->name = dupname(p, "caller");
		if (skip_op(p, "(")) {
			while (!p->rc && !is_op(p, ")")) {
				if (n->args.n && !expect_op(p, ","))
					return &p->dummy;
				struct node *a = mk(p, N_NAME);
				a->name = expect_name(p);
				if (skip_op(p, "="))
					a->a = expr(p);
				add(p, &n->args, a);
			}
			expect_op(p, ")");
		}
		n->a = expr(p);
		if (!p->rc && n->a->type != N_CALL)
			fail(p, "%s", "a call block needs a macro call");
		int loops = p->loops;
		p->loops = 0; /* the body is the caller function */
		bool ok = expect_end(p) && sub(p, &n->body, ends, &hit);
		p->loops = loops;
		if (!ok)
			return &p->dummy;
		expect_end(p);
		return n;
	}
	if (!strcmp(name, "generation")) { /* transformers' AssistantTracker: renders its body */
		struct node *n = mk(p, N_BLOCK);
		static const char *const ends[] = { "endgeneration", NULL };
		const char *hit;
		if (!n || !expect_end(p) || !sub(p, &n->body, ends, &hit))
			return NULL;
		expect_end(p);
		return n;
	}
	p->i--;
	fail(p, "unsupported or unknown statement '%s'", name);
	return NULL;
}

static int body_inner(struct ps *p, struct nlist *out, const char *const *ends, const char **hit);

static int body(struct ps *p, struct nlist *out, const char *const *ends, const char **hit)
{
	if (++p->depth > 150)
		return fail(p, "%s", "expressions or blocks nested too deeply");
	int rc = body_inner(p, out, ends, hit);
	p->depth--;
	return rc;
}

static int body_inner(struct ps *p, struct nlist *out, const char *const *ends, const char **hit)
{
	while (!p->rc) {
		const struct token *t = cur(p);
		if (t->type == T_EOF) {
			if (!ends)
				return FX_OK;
			char m[120];
			snprintf(m, sizeof(m), "unexpected end of template, expected '%s'", ends[0][0] == 'e' && ends[1] ? ends[1] : ends[0]);
			for (size_t k = 0; ends[k]; k++)
				if (!strncmp(ends[k], "end", 3))
					snprintf(m, sizeof(m), "unexpected end of template, expected '%s'", ends[k]);
			return fail(p, "%s", m);
		}
		if (t->type == T_TEXT) {
			struct node *n = mk(p, N_TEXT);
			if (!p->rc && !v_str(t->s, t->n, NULL, &n->cval))
				return p->rc = fx_fail(p->err, FX_E_NOMEM, "out of memory parsing the template");
			add(p, out, n);
			next(p);
		} else if (t->type == T_VBEGIN) {
			next(p);
			struct node *n = mk(p, N_OUT);
			if (n)
				n->a = expr(p);
			if (!p->rc && cur(p)->type != T_VEND)
				return fail(p, "expected end of print statement '}}', got '%s'", tok_desc(cur(p)));
			next(p);
			add(p, out, n);
		} else if (t->type == T_BBEGIN) {
			next(p);
			if (cur(p)->type == T_NAME && ends) {
				for (size_t k = 0; ends[k]; k++)
					if (!strcmp(cur(p)->s, ends[k])) {
						*hit = ends[k];
						next(p);
						return FX_OK;
					}
			}
			if (cur(p)->type == T_NAME && (!strncmp(cur(p)->s, "end", 3) || !strcmp(cur(p)->s, "elif") ||
						       !strcmp(cur(p)->s, "else")))
				return fail(p, "unexpected '%s'", cur(p)->s);
			add(p, out, statement(p));
		} else {
			return fail(p, "unexpected '%s'", tok_desc(t));
		}
	}
	return p->rc;
}

int chat_parse(const struct tokens *tk, struct tmpl *t, struct fx_err *err)
{
	struct ps p = { .tk = tk, .t = t, .err = err };
	memset(t, 0, sizeof(*t));
	t->root = mk(&p, N_BLOCK);
	if (!p.rc)
		body(&p, &t->root->body, NULL, NULL);
	if (p.rc)
		chat_tmpl_free(t);
	return p.rc;
}

void chat_tmpl_free(struct tmpl *t)
{
	for (size_t i = 0; i < t->n_all; i++) {
		struct node *n = t->all[i];
		fx_free(n->name);
		fx_free(n->name2);
		v_drop(&n->cval);
		chat_scope_free(n->scope);
		chat_scope_free(n->scope2);
		fx_free(n->args.a);
		fx_free(n->kwargs.a);
		fx_free(n->body.a);
		fx_free(n->els.a);
		fx_free(n);
	}
	fx_free(t->all);
	memset(t, 0, sizeof(*t));
}
