/* Evaluator of the chat-template interpreter (eval.c) and the builtins it
 * calls (builtins.c: filters, tests, methods of str/list/dict, globals). */
#ifndef FX_CHAT_EVAL_H
#define FX_CHAT_EVAL_H

#include "chat/ast.h"
#include "chat/value.h"
#include "ferrox.h"

struct frame {
	struct frame *parent;
	size_t n, cap;
	const char **names;   /* borrowed: AST names or static strings */
	struct value *vals;
};

struct ev {
	struct fx_err *err;
	int line;             /* line of the node being evaluated, for messages */
	struct frame *ctx;    /* the render context: messages, tools, ... */
	struct frame *root;   /* the template's own frame (its parent is ctx) */
	int64_t now;          /* strftime_now's time (seconds since the epoch) */
	int depth;            /* macro call depth */
	int flow;             /* FLOW_* after break / continue */
	uint64_t steps;       /* loop iterations so far (CHAT_MAX_STEPS) */
};

/* Most loop iterations one render may take: a template whose nested loops
 * would run for hours (found by fuzz_chat: twenty loops over the messages,
 * nested) is an error instead. Real templates take a few per message:
 * this allows conversations of some 100,000 messages. */
#define CHAT_MAX_STEPS 2000000u

enum { FLOW_NONE, FLOW_BREAK, FLOW_CONTINUE };

/* Arguments of a call: positional then keyword. */
struct cargs {
	struct value *pos;
	size_t npos;
	const char **kwn;
	struct value *kwv;
	size_t nkw;
};

/* Fail with "template line N: msg". Returns FX_E_INVALID (render errors)
 * or the code given to ev_fail_code. */
int ev_fail(struct ev *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int ev_fail_code(struct ev *e, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
int ev_oom(struct ev *e);

int frame_set(struct frame *f, const char *name, struct value v); /* takes v */
/* Give frame f an entry for every name its scope owns (scope.c), started
 * as jinja2 starts them: from the render context, as the enclosing
 * frame's value, or undefined; parameters are left to the caller. */
int frame_enter(struct ev *e, struct frame *f, const struct scope *sc);
void frame_free(struct frame *f);

/* Builtin ids for V_FUNC values. */
enum {
	FN_RANGE = 1, FN_NAMESPACE, FN_RAISE, FN_STRFTIME, FN_DICT, FN_CYCLE, FN_METHOD,
};
/* A global by name (range, namespace, ...): false when none. */
bool chat_global(const char *name, struct value *out, bool *oom);
/* obj.name as jinja2's sandboxed getattr: dict keys, namespace attributes,
 * bound methods. Unknown: undefined. Unsafe names (mutating methods,
 * "_..."): an error. */
int chat_getattr(struct ev *e, const struct value *obj, const char *name, struct value *out);
/* obj[key] (jinja2's getitem: index, key, then attribute). */
int chat_getitem(struct ev *e, const struct value *obj, const struct value *key, struct value *out);
int chat_call_func(struct ev *e, const struct value *fn, struct cargs *a, struct value *out);
int chat_filter(struct ev *e, const char *name, const struct value *in, struct cargs *a, struct value *out);
int chat_test(struct ev *e, const char *name, const struct value *in, struct cargs *a, bool *out);
/* Python-ish iteration: the items of v as a new list (dict: keys, str:
 * characters, undefined: empty). */
int chat_iter(struct ev *e, const struct value *v, struct value *out_list);
/* str(v) as a string value (provenance kept). */
int chat_to_str(struct ev *e, const struct value *v, struct value *out);
/* s[off, off+len) bytes of a string value, flags kept. */
bool chat_substr(const struct value *s, size_t off, size_t len, struct value *out);
/* Binary operator (OP_*), Python semantics. */
int chat_binop(struct ev *e, int op, const struct value *a, const struct value *b, struct value *out);
/* Run the template's statements into o (eval.c). */
int chat_exec(struct ev *e, const struct tmpl *t, struct sbuf *o);
/* Argument i (positional) or keyword kw (may be NULL) of a call; NULL when
 * absent. */
const struct value *cargs_get(const struct cargs *a, size_t i, const char *kw);
/* String helpers shared by methods and filters (builtins.c, ucase.c):
 * str.strip family (which: 1 left, 2 right, 3 both; chars NULL/None:
 * whitespace), str.replace (count < 0: all), case mapping (mode 0 lower,
 * 1 upper, 2 str.title, 3 capitalize; an error for scripts not mapped),
 * join of str() of items (sep may be NULL), and whether code point c is a
 * cased letter already upper (or lower) case. */
int chat_strip(struct ev *e, const struct value *s, const struct value *chars, int which, struct value *out);
int chat_replace(struct ev *e, const struct value *s, const struct value *old, const struct value *new_,
		 int64_t count, struct value *out);
int chat_case(struct ev *e, const struct value *s, int mode, struct value *out);
int chat_join(struct ev *e, const struct value *items, const struct value *sep, struct value *out);
bool chat_is_cased(uint32_t c, bool upper);

#endif
