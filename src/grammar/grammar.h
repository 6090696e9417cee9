/* Grammars for constrained decoding: the compiled program the GBNF parser
 * (gbnf.c) produces, and the token trie (vocab.c) the matcher (matcher.c)
 * walks.
 *
 * The program is a context-free grammar over BYTES: every terminal is a
 * set of bytes, and a character class over code points is compiled to
 * alternatives of UTF-8 byte sequences. That lets a token's bytes be fed
 * one at a time whatever characters it splits (byte-fallback tokens,
 * byte-level BPE), and it lets bytes that no terminal tells apart share a
 * byte class, so a parse state's transitions are a small array.
 *
 * Layout (llama.cpp's llama_grammar_element rules, flattened): elems[]
 * holds every alternative of every rule, each ended by GRAM_END; rule r's
 * alternatives start at alt_start[rule_alt[r] .. rule_alt[r + 1]).
 */
#ifndef FX_GRAMMAR_GRAMMAR_H
#define FX_GRAMMAR_GRAMMAR_H

#include <stdbool.h>
#include <stdint.h>

#include "ferrox.h"

enum gram_kind { GRAM_END = 0, GRAM_TERM = 1, GRAM_REF = 2 };

struct gram_elem {
	uint8_t kind; /* enum gram_kind */
	int32_t arg;  /* TERM: index into sets; REF: rule index; END: 0 */
};

/* 256-bit byte set: bit b of w[b >> 6]. */
struct gram_set {
	uint64_t w[4];
};

static inline bool gram_set_has(const struct gram_set *s, unsigned b)
{
	return (s->w[b >> 6] >> (b & 63)) & 1u;
}

struct fx_grammar {
	struct gram_elem *elems; /* [n_elems] every alternative, GRAM_END after each */
	int32_t n_elems;
	int32_t *alt_start;      /* [n_alts] index into elems of each alternative */
	int32_t n_alts;
	int32_t *rule_alt;       /* [n_rules + 1] rule r's alternatives: alt_start[rule_alt[r]..rule_alt[r+1]) */
	int32_t n_rules;
	int32_t root;            /* start rule */
	struct gram_set *sets;   /* [n_sets] distinct terminals */
	int32_t n_sets;
	uint8_t cls_of[256];     /* byte -> byte class: bytes no terminal tells apart share one */
	uint8_t cls_rep[256];    /* [n_cls] a byte of each class */
	int32_t n_cls;           /* 1..256 */
};

/* The vocabulary trie, in preorder: node 0 is the root (the empty prefix);
 * node i > 0 extends its parent (the nearest node before it with depth
 * depth[i] - 1) by byte[i]; its subtree is [i, skip[i]). Tokens whose
 * bytes end at node i are tok[tok_off[i] .. tok_off[i + 1]). */
struct fx_grammar_vocab {
	int32_t n_vocab;
	int32_t n_nodes;
	uint8_t *byte;      /* [n_nodes] */
	uint16_t *depth;    /* [n_nodes] root 0 */
	int32_t *skip;      /* [n_nodes] */
	int32_t *tok_off;   /* [n_nodes + 1] */
	fx_token *tok;      /* tokens in trie order */
	int32_t max_depth;  /* longest token in bytes */
	uint32_t *piece_off;/* [n_vocab + 1] token t's bytes: pieces[piece_off[t]..piece_off[t+1]) */
	char *pieces;
	bool *eog;          /* [n_vocab] end-of-generation tokens (matched by can_end) */
};

#endif
