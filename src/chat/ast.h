/* Lexer, parser and syntax tree of the chat-template interpreter.
 *
 * The lexer follows jinja2 3.1's (lexer.py) with trim_blocks and
 * lstrip_blocks on, as transformers' apply_chat_template sets them up:
 * newlines normalized to "\n", one trailing newline dropped, "{%-"/"-%}"
 * and friends, "+" to keep whitespace, comments, raw blocks, brackets
 * balanced inside tags. The parser follows jinja2's parser.py precedence.
 */
#ifndef FX_CHAT_AST_H
#define FX_CHAT_AST_H

#include "chat/value.h"
#include "ferrox.h"

enum ttype { T_EOF, T_TEXT, T_VBEGIN, T_VEND, T_BBEGIN, T_BEND, T_NAME, T_STR, T_INT, T_FLOAT, T_OP };

struct token {
	int type;      /* enum ttype */
	int line;      /* 1-based template line */
	char *s;       /* T_TEXT, T_STR: owned decoded bytes; T_NAME: owned name */
	size_t n;
	int64_t i;     /* T_INT */
	double f;      /* T_FLOAT */
	char op[3];    /* T_OP: "//", "==", "(", ... */
};

struct tokens {
	struct token *a;
	size_t n, cap;
};

/* Tokenize the template src[0..n). Errors: FX_E_FORMAT with the line. */
int chat_lex(const char *src, size_t n, struct tokens *out, struct fx_err *err);
void chat_tokens_free(struct tokens *t);

enum ntype {
	/* statements */
	N_TEXT, N_OUT, N_IF, N_FOR, N_SET, N_SETBLOCK, N_MACRO, N_FILTERBLOCK, N_BREAK,
	N_CONTINUE, N_BLOCK, N_WITH, N_CALLBLOCK,
	/* expressions */
	N_CONST, N_NAME, N_ATTR, N_ITEM, N_SLICE, N_CALL, N_FILTER, N_TEST, N_NEG, N_POS,
	N_NOT, N_AND, N_OR, N_BIN, N_CMP, N_CONCAT, N_COND, N_LIST, N_TUPLE, N_DICT, N_NSREF,
};

/* Binary and comparison operators (node->op). */
enum { OP_ADD, OP_SUB, OP_MUL, OP_DIV, OP_FLOORDIV, OP_MOD, OP_POW,
       OP_EQ, OP_NE, OP_LT, OP_LE, OP_GT, OP_GE, OP_IN, OP_NOTIN };

/* How a scope's variable starts when its frame is entered (jinja2's
 * idtracking: VAR_LOAD_*). */
enum { SC_PARAM, SC_RESOLVE, SC_ALIAS, SC_UNDEF };

/* The variables of a scope (jinja2's Symbols of a frame), in order. */
struct scope {
	size_t n;
	const char **names;   /* borrowed from the AST */
	uint8_t *kind;        /* SC_* */
};

struct node;
struct nlist {
	struct node **a;
	size_t n, cap;
};

struct node {
	int type;             /* enum ntype */
	int line;
	int op;               /* N_BIN/N_CMP operator */
	char *name;           /* NAME, ATTR, FILTER, TEST, MACRO, kwarg name, NSREF variable */
	char *name2;          /* NSREF attribute */
	struct value cval;    /* N_CONST, N_TEXT (the text, literal) */
	struct node *a, *b, *c; /* operands: ATTR/ITEM/FILTER/TEST object a; ITEM key b;
			       * SLICE a[b:c:args]; BIN/CMP a op b; COND a if b else c;
			       * FOR iterable a, condition b; IF condition a; SET value a,
			       * target b; kwarg value a; macro parameter default a */
	struct nlist args;    /* call/filter/test arguments, list/tuple items, dict
			       * key,value pairs, CONCAT parts, FOR/SET target names,
			       * MACRO parameters (N_NAME with default in a),
			       * FILTERBLOCK / SETBLOCK filters */
	struct nlist kwargs;  /* keyword arguments: N_NAME nodes, value in a */
	struct nlist body, els; /* statements; IF's elif is an IF alone in els */
	struct scope *scope;  /* the frame this node opens (root, for body, macro,
			       * call block, filter/set block, with), or NULL */
	struct scope *scope2; /* N_FOR: the else branch's frame */
};

struct tmpl {
	struct node *root;    /* N_BLOCK */
	struct node **all;    /* every node, for freeing */
	size_t n_all, cap_all;
};

/* Parse tokens into t. Errors: FX_E_FORMAT naming the line. */
int chat_parse(const struct tokens *tk, struct tmpl *t, struct fx_err *err);
/* Work out every frame's variables as jinja2's compiler does (scope.c):
 * which names a frame owns and how each starts. FX_E_NOMEM only. */
int chat_scopes(struct tmpl *t, struct fx_err *err);
void chat_scope_free(struct scope *s);
void chat_tmpl_free(struct tmpl *t);

#endif
