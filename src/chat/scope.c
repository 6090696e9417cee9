/* Frames and their variables, as jinja2's compiler works them out
 * (idtracking.py: Symbols, FrameSymbolVisitor, RootVisitor), so that a
 * name means what it means in jinja2 even when frames shadow each other.
 *
 * Frames: the template, a for loop's body (entered on every iteration)
 * and its else branch, a macro, a call block's caller, a filter block, a
 * block set and a with block. An if does not open a frame. Within a frame,
 * statements are visited in order:
 *   load(x):  when no frame up the chain owns x, this frame owns it and
 *             starts it from the render context (RESOLVE);
 *   store(x): when this frame does not own x yet, it owns it now, starting
 *             as the enclosing frame's x (ALIAS) if a frame up the chain
 *             owns it, else undefined (UNDEF);
 *   if:       each branch is visited on a copy; a name stored in a branch
 *             and not before starts as ALIAS (or RESOLVE) again.
 * A child frame is worked out after its parent's whole body (jinja2
 * compiles it when it reaches it), so it sees names its parent stores
 * later. At run time each frame, when entered, gets an entry for every
 * name it owns, and a lookup stops at the first frame with an entry. */
#include <string.h>

#include "chat/ast.h"
#include "core/alloc.h"
#include "core/status.h"

struct sym {
	const struct sym *parent;
	size_t n, cap;
	const char **names;
	uint8_t *kind;
	uint8_t *stored;
	bool oom;
};

/* Scope nodes met while visiting a frame: worked out after it. */
struct pending {
	struct node **a;
	size_t n, cap;
	bool oom;
};

static long find_here(const struct sym *s, const char *name)
{
	for (size_t i = 0; i < s->n; i++)
		if (!strcmp(s->names[i], name))
			return (long)i;
	return -1;
}

static bool find_ref(const struct sym *s, const char *name)
{
	for (; s; s = s->parent)
		if (find_here(s, name) >= 0)
			return true;
	return false;
}

static void add(struct sym *s, const char *name, uint8_t kind, uint8_t stored)
{
	if (s->n == s->cap) {
		size_t cap = s->cap ? 2 * s->cap : 8;
		const char **nm = fx_realloc_array(s->names, cap, sizeof(*nm));
		if (nm)
			s->names = nm;
		uint8_t *k = nm ? fx_realloc_array(s->kind, cap, 1) : NULL;
		if (k)
			s->kind = k;
		uint8_t *st = k ? fx_realloc_array(s->stored, cap, 1) : NULL;
		if (!st) {
			s->oom = true;
			return;
		}
		s->stored = st;
		s->cap = cap;
	}
	s->names[s->n] = name;
	s->kind[s->n] = kind;
	s->stored[s->n++] = stored;
}

static void sym_load(struct sym *s, const char *name)
{
	if (!find_ref(s, name))
		add(s, name, SC_RESOLVE, 0);
}

static void sym_store(struct sym *s, const char *name)
{
	long i = find_here(s, name);
	if (i >= 0) {
		s->stored[i] = 1;
		return;
	}
	add(s, name, s->parent && find_ref(s->parent, name) ? SC_ALIAS : SC_UNDEF, 1);
}

static void sym_param(struct sym *s, const char *name)
{
	long i = find_here(s, name);
	if (i >= 0) {
		s->kind[i] = SC_PARAM;
		s->stored[i] = 1;
	} else {
		add(s, name, SC_PARAM, 1);
	}
}

static void sym_free(struct sym *s)
{
	fx_free(s->names);
	fx_free(s->kind);
	fx_free(s->stored);
}

static void sym_copy(const struct sym *src, struct sym *dst)
{
	*dst = (struct sym){ .parent = src->parent };
	for (size_t i = 0; i < src->n; i++)
		add(dst, src->names[i], src->kind[i], src->stored[i]);
	dst->oom |= src->oom;
}

static void pend(struct pending *p, struct node *n)
{
	if (p->n == p->cap) {
		size_t cap = p->cap ? 2 * p->cap : 8;
		struct node **a = fx_realloc_array(p->a, cap, sizeof(*a));
		if (!a) {
			p->oom = true;
			return;
		}
		p->a = a;
		p->cap = cap;
	}
	p->a[p->n++] = n;
}

/* Every variable an expression reads. */
static void visit_expr(struct sym *s, const struct node *n)
{
	if (!n)
		return;
	if (n->type == N_NAME) {
		sym_load(s, n->name);
		return;
	}
	visit_expr(s, n->a);
	visit_expr(s, n->b);
	visit_expr(s, n->c);
	for (size_t i = 0; i < n->args.n; i++)
		visit_expr(s, n->args.a[i]);
	for (size_t i = 0; i < n->kwargs.n; i++)
		visit_expr(s, n->kwargs.a[i]->a); /* keyword names are not variables */
}

static void visit_list(struct sym *s, const struct nlist *l, struct pending *p);

/* jinja2's Symbols.branch_update */
static void branch_update(struct sym *s, struct sym *br, size_t nb)
{
	size_t before = s->n;
	uint8_t *was = fx_calloc(before ? before : 1, 1);
	if (!was) {
		s->oom = true;
		return;
	}
	for (size_t i = 0; i < before; i++)
		was[i] = s->stored[i];
	for (size_t b = 0; b < nb; b++)
		for (size_t i = 0; i < br[b].n; i++) {
			long j = find_here(s, br[b].names[i]);
			if (j < 0) {
				add(s, br[b].names[i], br[b].kind[i], br[b].stored[i]);
			} else {
				s->kind[j] = br[b].kind[i];
				s->stored[j] |= br[b].stored[i];
			}
		}
	for (size_t b = 0; b < nb; b++)
		for (size_t i = 0; i < br[b].n; i++) {
			if (!br[b].stored[i])
				continue;
			long j = find_here(s, br[b].names[i]);
			if (j < 0 || ((size_t)j < before && was[j]))
				continue;
			s->kind[j] = s->parent && find_ref(s->parent, br[b].names[i]) ? SC_ALIAS : SC_RESOLVE;
		}
	fx_free(was);
}

static void visit_stmt(struct sym *s, struct node *n, struct pending *p)
{
	switch (n->type) {
	case N_OUT:
		visit_expr(s, n->a);
		break;
	case N_IF: {
		struct sym br[2];
		visit_expr(s, n->a);
		sym_copy(s, &br[0]);
		visit_list(&br[0], &n->body, p);
		sym_copy(s, &br[1]);
		visit_list(&br[1], &n->els, p);
		branch_update(s, br, 2);
		s->oom |= br[0].oom || br[1].oom;
		sym_free(&br[0]);
		sym_free(&br[1]);
		break;
	}
	case N_FOR:
		visit_expr(s, n->a); /* the iterable; the loop's frames later */
		pend(p, n);
		break;
	case N_SET:
		visit_expr(s, n->a);
		if (n->b)
			sym_load(s, n->b->name); /* set ns.attr: reads ns */
		else
			for (size_t i = 0; i < n->args.n; i++)
				sym_store(s, n->args.a[i]->name);
		break;
	case N_SETBLOCK:
		sym_store(s, n->args.a[0]->name);
		pend(p, n);
		break;
	case N_FILTERBLOCK:
		for (size_t i = 0; i < n->kwargs.n; i++)
			visit_expr(s, n->kwargs.a[i]);
		pend(p, n);
		break;
	case N_MACRO:
		sym_store(s, n->name);
		pend(p, n);
		break;
	case N_CALLBLOCK:
		visit_expr(s, n->a);
		pend(p, n);
		break;
	case N_WITH:
		for (size_t i = 0; i < n->args.n; i++)
			visit_expr(s, n->args.a[i]->a);
		pend(p, n);
		break;
	case N_BLOCK:
		pend(p, n);
		break;
	default:
		break;
	}
}

static void visit_list(struct sym *s, const struct nlist *l, struct pending *p)
{
	for (size_t i = 0; i < l->n; i++)
		visit_stmt(s, l->a[i], p);
}

static int frame_of(struct node *n, const struct sym *parent, bool else_branch, struct scope **out);

/* The scope of a frame whose symbols are s: copy out, then work out the
 * frames met inside it, with s (complete) as their parent. */
static int finish(struct sym *s, struct pending *p, struct scope **out)
{
	int rc = s->oom || p->oom ? FX_E_NOMEM : FX_OK;
	struct scope *sc = NULL;
	if (!rc && !(sc = fx_calloc(1, sizeof(*sc))))
		rc = FX_E_NOMEM;
	if (!rc && s->n) {
		sc->names = fx_calloc(s->n, sizeof(*sc->names));
		sc->kind = fx_calloc(s->n, 1);
		if (!sc->names || !sc->kind)
			rc = FX_E_NOMEM;
		else {
			memcpy(sc->names, s->names, s->n * sizeof(*s->names));
			memcpy(sc->kind, s->kind, s->n);
			sc->n = s->n;
		}
	}
	for (size_t i = 0; i < p->n && !rc; i++) {
		struct node *c = p->a[i];
		rc = frame_of(c, s, false, &c->scope);
		if (!rc && c->type == N_FOR)
			rc = frame_of(c, s, true, &c->scope2);
	}
	if (rc) {
		chat_scope_free(sc);
		sc = NULL;
	}
	*out = sc;
	fx_free(p->a);
	sym_free(s);
	return rc;
}

static int frame_of(struct node *n, const struct sym *parent, bool else_branch, struct scope **out)
{
	struct sym s = { .parent = parent };
	struct pending p = { 0 };
	switch (n->type) {
	case N_FOR:
		if (else_branch) {
			visit_list(&s, &n->els, &p);
			break;
		}
		for (size_t i = 0; i < n->args.n; i++)
			sym_param(&s, n->args.a[i]->name);
		sym_param(&s, "loop");
		visit_list(&s, &n->body, &p);
		break;
	case N_MACRO:
	case N_CALLBLOCK:
		for (size_t i = 0; i < n->args.n; i++)
			sym_param(&s, n->args.a[i]->name);
		if (n->type == N_MACRO)
			sym_param(&s, "caller");
		for (size_t i = 0; i < n->args.n; i++)
			visit_expr(&s, n->args.a[i]->a); /* defaults */
		visit_list(&s, &n->body, &p);
		break;
	case N_SETBLOCK:
		visit_list(&s, &n->body, &p);
		for (size_t i = 0; i < n->kwargs.n; i++)
			visit_expr(&s, n->kwargs.a[i]); /* its filters run in its frame */
		break;
	case N_WITH:
		for (size_t i = 0; i < n->args.n; i++)
			sym_store(&s, n->args.a[i]->name);
		visit_list(&s, &n->body, &p);
		break;
	case N_FILTERBLOCK:
		visit_list(&s, &n->body, &p);
		for (size_t i = 0; i < n->kwargs.n; i++)
			visit_expr(&s, n->kwargs.a[i]);
		break;
	default: /* the template, generation blocks */
		visit_list(&s, &n->body, &p);
		break;
	}
	return finish(&s, &p, out);
}

int chat_scopes(struct tmpl *t, struct fx_err *err)
{
	int rc = frame_of(t->root, NULL, false, &t->root->scope);
	return rc ? fx_fail(err, FX_E_NOMEM, "out of memory analysing the template") : FX_OK;
}

void chat_scope_free(struct scope *s)
{
	if (!s)
		return;
	fx_free(s->names);
	fx_free(s->kind);
	fx_free(s);
}
