/* Values of the chat-template interpreter (src/chat): Python's objects as
 * jinja2 sees them (None, bool, int, float, str, list/tuple, dict,
 * namespace, callables), reference counted, with provenance.
 *
 * Provenance: a string knows, byte by byte, which of its bytes came from
 * the input data (messages, tools, extra variables) rather than from the
 * template's literals; other values carry one `data` bit. Operations keep
 * the marks on the bytes they copy (concatenation, slicing, strip, join,
 * tojson of data, ...), so the rendered prompt can say which bytes are
 * message text (fx_chat_prompt.data).
 *
 * Semantics follow CPython 3 (str(), repr(), json.dumps) and jinja2 3.1.
 */
#ifndef FX_CHAT_VALUE_H
#define FX_CHAT_VALUE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum vkind {
	V_UNDEF,  /* jinja2's Undefined: prints as "", iterates as empty */
	V_NONE,
	V_BOOL,
	V_INT,
	V_FLOAT,
	V_STR,
	V_LIST,   /* list, or tuple when l->tuple */
	V_DICT,   /* dict, namespace() (d->ns) or a loop object (d->loop) */
	V_FUNC,   /* a builtin global or a bound method */
	V_MACRO,  /* a template macro (points into the AST) */
};

struct vstr {
	int rc;
	bool markup;       /* markupsafe.Markup (the safe filter): str + Markup escapes the str */
	size_t n;          /* bytes, UTF-8 */
	uint8_t *flags;    /* [n]: 1 = byte from input data; NULL: none is */
	char p[];          /* n bytes + NUL */
};

struct value;

struct vlist {
	int rc;
	bool tuple;
	bool gen;          /* a generator (map, select, ... filters): iterable once
			    * in Python, so no len(), no JSON, no printing */
	bool range;        /* range(): prints as "range(a, b)" in Python: not printed */
	size_t n, cap;
	struct value *a;
};

struct vdict {
	int rc;
	bool ns;           /* namespace(): attributes assignable with set ns.x */
	bool loop;         /* a for loop's `loop` object (loop.cycle) */
	size_t n, cap;
	struct value *k, *v; /* insertion order, as Python dicts */
};

struct vfunc {
	int rc;
	int id;            /* builtin id (eval.c / builtins.c) */
	const char *name;  /* static: method or global name */
	struct value *self; /* bound object or NULL */
};

struct value {
	uint8_t kind;      /* enum vkind */
	uint8_t data;      /* non-strings: the value came from input data */
	union {
		bool b;
		int64_t i;
		double f;
		struct vstr *s;
		struct vlist *l;
		struct vdict *d;
		struct vfunc *fn;
		struct {
			const void *macro;   /* struct node * of the macro (or call block) */
			void *closure;       /* struct frame * the macro sees: where it was
					      * defined (a call block's caller: the call
					      * site); NULL: the template's root frame. Such
					      * a frame outlives every reference to the value
					      * (a namespace may not hold one, eval.c) */
		};
		const char *uname;     /* V_UNDEF: the name looked up, for messages, or NULL */
	};
};

/* Growable byte buffer with per-byte provenance; failure is sticky (oom). */
struct sbuf {
	char *p;
	uint8_t *f;
	size_t n, cap;
	bool oom;
	bool any;          /* some byte has its flag set */
};

void sb_put(struct sbuf *b, const char *s, size_t n, uint8_t flag);
void sb_putf(struct sbuf *b, const char *s, size_t n, const uint8_t *flags); /* flags may be NULL */
void sb_puts(struct sbuf *b, const char *s, uint8_t flag);
void sb_printf(struct sbuf *b, uint8_t flag, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void sb_free(struct sbuf *b);
/* Take b's bytes as a string value (b is emptied). Returns false on OOM. */
bool sb_to_str(struct sbuf *b, struct value *out);

static inline struct value v_undef(const char *name) { struct value v = { .kind = V_UNDEF }; v.uname = name; return v; }
static inline struct value v_none(void) { struct value v = { .kind = V_NONE }; return v; }
static inline struct value v_bool(bool b) { struct value v = { .kind = V_BOOL }; v.b = b; return v; }
static inline struct value v_int(int64_t i) { struct value v = { .kind = V_INT }; v.i = i; return v; }
static inline struct value v_float(double f) { struct value v = { .kind = V_FLOAT }; v.f = f; return v; }

/* New string value of s[0..n) (flags may be NULL: all literal; or one flag
 * for every byte when flag_all is 1). false on OOM. */
bool v_str(const char *s, size_t n, const uint8_t *flags, struct value *out);
/* A Markup copy of string value s (markupsafe's escape() when escape). */
bool v_markup(const struct value *s, bool escape, struct value *out);
bool v_str_all(const char *s, size_t n, uint8_t flag, struct value *out);
bool v_list_new(bool tuple, struct value *out);
bool v_dict_new(struct value *out);
bool v_func_new(int id, const char *name, const struct value *self, struct value *out);

struct value v_ref(struct value v);   /* +1 reference; returns v */
void v_drop(struct value *v);         /* -1 reference; *v becomes undefined */

bool list_push(struct vlist *l, struct value v);   /* takes v's reference; false on OOM (v dropped) */
/* Dict: get returns a borrowed pointer or NULL; set takes v's reference
 * (key is copied with a new reference); replacing keeps the key's place. */
struct value *dict_get(const struct vdict *d, const struct value *key);
struct value *dict_get_str(const struct vdict *d, const char *key);
bool dict_set(struct vdict *d, const struct value *key, struct value v);
bool dict_set_str(struct vdict *d, const char *key, struct value v);

bool v_truthy(const struct value *v);
bool v_is_num(const struct value *v);  /* bool, int or float (Python numbers) */
double v_num(const struct value *v);
bool v_equal(const struct value *a, const struct value *b);
/* Python ordering: *cmp <0/0/>0; false when the types do not order. */
bool v_compare(const struct value *a, const struct value *b, int *cmp);
const char *v_type_name(const struct value *v); /* Python's: "str", "dict", ... */

/* str(v) (repr=false) or repr(v), appended to b. Undefined prints as "". */
void v_write(struct sbuf *b, const struct value *v, bool repr);
/* Python float repr ("1.0", "1e+20", "0.30000000000000004") into buf[32]. */
void py_float_repr(double f, char *buf);

/* UTF-8 helpers: code points of s[0..n), and the byte offset of code
 * point i (clamped to n). */
size_t u8_count(const char *s, size_t n);
size_t u8_offset(const char *s, size_t n, size_t i);
/* Decode one code point at s[0..n) into *cp; returns its length (>= 1;
 * an invalid byte decodes as itself). */
size_t u8_decode(const char *s, size_t n, uint32_t *cp);
size_t u8_encode(uint32_t cp, char *out);
bool py_isspace(uint32_t cp); /* str.isspace() for one code point */

/* JSON (json.c). Parse text as Python's json.loads would (ints stay ints,
 * floats floats, objects in order); every value is marked as data when
 * data is true. Returns FX_OK, or FX_E_INVALID / FX_E_NOMEM with a
 * message in msg[256]. */
int json_parse(const char *text, size_t n, bool data, struct value *out, char *msg);
/* json.dumps(v, ensure_ascii, indent (<0: none; or the string indent_str
 * when non-NULL), separators (NULL: Python's default), sort_keys).
 * Returns FX_OK, FX_E_INVALID with msg when v holds something JSON cannot
 * encode, or FX_E_NOMEM. */
struct json_opts {
	bool ensure_ascii;
	int indent;            /* -1: no indent */
	const char *indent_str; /* overrides indent when non-NULL */
	const char *item_sep, *key_sep; /* NULL: Python's defaults */
	bool sort_keys;
};
int json_dump(struct sbuf *b, const struct value *v, const struct json_opts *o, char *msg);

#endif
