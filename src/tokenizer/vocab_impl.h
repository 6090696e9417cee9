/* Private to src/tokenizer: the vocabulary's layout and the helpers its
 * files share (string map, UTF-8 decoding, pre-tokenizer, output sink).
 *
 * Every name and rule here mirrors llama.cpp's src/llama-vocab.cpp and
 * src/unicode.cpp (the parity oracle); the comments say which part.
 */
#ifndef FX_TOKENIZER_VOCAB_IMPL_H
#define FX_TOKENIZER_VOCAB_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "tokenizer/vocab.h"

/* Token attributes: the bits of llama.cpp's llama_token_attr. */
enum {
	ATTR_UNDEFINED = 0,
	ATTR_UNKNOWN = 1 << 0,
	ATTR_UNUSED = 1 << 1,
	ATTR_NORMAL = 1 << 2,
	ATTR_CONTROL = 1 << 3,
	ATTR_USER_DEFINED = 1 << 4,
	ATTR_BYTE = 1 << 5,
	ATTR_LSTRIP = 1 << 7,
	ATTR_RSTRIP = 1 << 8,
};

/* VOCAB_HF: a Hugging Face tokenizer.json, run by the hf_*.c pipeline
 * (hf_impl.h) behind the same entry points; the others follow llama.cpp. */
enum vocab_type {
	VOCAB_SPM, /* "llama": SentencePiece BPE over scores */
	VOCAB_BPE, /* "gpt2", "gemma4": BPE over merges */
	VOCAB_WPM, /* "bert": WordPiece, greedy longest match */
	VOCAB_HF,  /* tokenizer.json */
};

struct hftok;

/* A byte string that is not NUL-terminated. */
struct span {
	const char *p;
	size_t n;
};

/* Strings packed end to end in one owned buffer: string i is
 * buf[off[i] .. off[i + 1]). The vocabulary keeps its texts this way, not
 * as pointers into the GGUF mapping: 4 bytes per string plus the text
 * (against 16 for a pointer and a length), and the mapping's metadata pages
 * can be released once the model is loaded. */
struct strtab {
	char *buf;
	uint32_t *off; /* [n + 1] */
	int32_t n;
};

static inline struct span strtab_get(const struct strtab *t, int32_t i)
{
	return (struct span){ t->buf + t->off[i], (size_t)(t->off[i + 1] - t->off[i]) };
}

/* Open-addressing hash from a byte string to an index into a caller-held
 * string table (the keys are not copied). slot[i] is -1 when empty. */
struct strmap {
	int32_t *slot; /* [mask + 1] */
	size_t mask;
};

/* Node of the trie over special-token texts, used to find which special
 * tokens occur in a text before partitioning it. */
struct trie_node {
	int32_t child;   /* first child, -1 when none */
	int32_t sibling; /* next sibling, -1 when none */
	int32_t special; /* index into vocab->special, or -1 */
	uint8_t byte;    /* the edge label leading here */
};

#define PRETOK_MAX_RE 6

/* A pre-tokenizer: the regexes llama.cpp's llm_tokenizer_bpe uses for a
 * tokenizer.ggml.pre family, already rewritten for PCRE2 (see pretok.c). */
struct pretok_def {
	const char *const *names; /* NULL-terminated tokenizer.ggml.pre values */
	const char *regex[PRETOK_MAX_RE];
	bool ignore_merges; /* a word that is a whole token skips the merges */
	bool add_bos;       /* default for add_bos before the GGUF key */
	bool force_bos;     /* add_bos even when the GGUF says false (Gemma 4) */
	bool raw_utf8;      /* SentencePiece-style BPE (Gemma 4): spaces escaped
			     * to U+2581 before the split, no GPT-2 byte map,
			     * byte fallback through <0xNN> tokens */
	bool newline_words; /* a word of newlines that is a token stays whole */
};

struct vocab {
	enum vocab_type type;
	int32_t n_tokens;
	struct strtab text; /* [n_tokens] token texts ("[EMPTY_i]" for empty ones) */
	float *score;      /* [n_tokens] SentencePiece scores (0 when absent) */
	uint16_t *attr;    /* [n_tokens] ATTR_* bits */
	struct strmap tok_map; /* text -> id (the last id wins on duplicates) */

	/* BPE */
	struct strtab merges;    /* [merges.n] "left right" from the GGUF */
	struct strmap merge_map; /* merge text -> rank (the first wins) */
	const struct pretok_def *pre;
	pcre2_code *re[PRETOK_MAX_RE]; /* compiled once; shared read-only */
	int n_re;
	pcre2_general_context *re_mem; /* PCRE2's allocations (codes, match
					* data) go through our malloc/free, so
					* the fault tests reach them even with
					* a shared libpcre2; NULL before compile */
	char byte_utf8[256][2];  /* GPT-2 byte -> code point, as UTF-8 */
	uint8_t byte_utf8_len[256];
	int16_t cpt_byte[324];   /* inverse map: code point -> byte, -1 if none */

	/* special tokens: CONTROL, USER_DEFINED or UNKNOWN, longest first */
	int32_t *special;
	int32_t n_special;
	struct trie_node *trie; /* [n_trie], node 0 is the root */
	int32_t n_trie;

	fx_token bos, eos, eot, eom, unk, sep, pad, mask;
	fx_token fim_pre, fim_suf, fim_mid, fim_pad, fim_rep, fim_sep;
	fx_token *eog; /* sorted ids that end generation */
	int32_t n_eog;

	bool add_bos, add_eos, add_sep, add_space_prefix, ignore_merges;
	/* WordPiece (BertNormalizer options; max_token_len bounds the match) */
	bool lowercase, strip_accents;
	int32_t max_token_len; /* bytes of the longest token text */
	char kind[96];

	struct hftok *hf; /* VOCAB_HF: the tokenizer.json pipeline (owned) */
};

/* ---- lookups (vocab.c) --------------------------------------------- */

/* Index i whose keys[i] equals the concatenation of seg[0..nseg), or -1. */
int32_t strmap_find(const struct strmap *m, const struct strtab *keys,
		    const struct span *seg, int nseg);
/* Token id of the text p[0..n), or -1 (llama.cpp's text_to_token). */
fx_token vocab_text_to_token(const struct vocab *v, const char *p, size_t n);
/* Id of the byte-fallback token for byte b: <0xNN>, else the one-byte
 * token, else -1 (llama.cpp's byte_to_token for SPM). */
fx_token vocab_byte_token(const struct vocab *v, uint8_t b);

/* Build/free a string table and map (vocab.c); what names the strings in
 * an error message. strmap_put keeps the old index on an equal key unless
 * replace. */
int strtab_build(struct strtab *t, const struct gguf_str *str, int32_t n, bool name_empty,
		 const char *what, struct fx_err *err);
void strtab_free(struct strtab *t);
int strmap_init(struct strmap *m, size_t n);
void strmap_put(struct strmap *m, const struct strtab *keys, int32_t idx, bool replace);
/* Add s to the trie (*trie: *n nodes of *cap, node 0 the root; grown as
 * needed), its end node tagged idx unless already tagged. FX_E_NOMEM. */
/* Insert id (when in range) into the sorted EOG set. FX_E_NOMEM. */
int vocab_eog_add(struct vocab *v, fx_token id);
int trie_add(struct trie_node **trie, int32_t *n, int32_t *cap, const struct span *s, int32_t idx);

/* ---- UTF-8 (utf8.c) ------------------------------------------------- */

/* Length of the UTF-8 sequence led by byte c, from its high nibble only
 * (1, 2, 3 or 4), as llama.cpp's unicode_len_utf8. */
size_t utf8_len(unsigned char c);
/* Decode one code point at s[*off], s[0..n), the lenient way llama.cpp's
 * unicode_cpts_from_utf8 does: overlong forms and surrogates are accepted,
 * a bad sequence gives U+FFFD and consumes one byte. */
uint32_t utf8_decode_lenient(const char *s, size_t n, size_t *off);
/* Encode cpt (any value < 0x200000) into out[0..4); returns the length. */
size_t utf8_encode(uint32_t cpt, char *out);

/* ---- Unicode classes (ucd.c, tables from scripts/gen-unicode-tables.py) */

/* General-category class bits, as llama.cpp's unicode_cpt_flags. */
enum {
	UCD_UNDEF = 1 << 0,   /* Cn, and anything past U+10FFFF */
	UCD_NUMBER = 1 << 1,  /* N* */
	UCD_LETTER = 1 << 2,  /* L* */
	UCD_SEP = 1 << 3,     /* Z* */
	UCD_MARK = 1 << 4,    /* M* */
	UCD_PUNCT = 1 << 5,   /* P* */
	UCD_SYMBOL = 1 << 6,  /* S* */
	UCD_CONTROL = 1 << 7, /* Cc, Cf, Co, Cs */
};

/* Exactly one UCD_* bit: the class of code point cpt. */
unsigned ucd_class(uint32_t cpt);
/* llama.cpp's White_Space set (the WS class of pretok.c). */
bool ucd_is_space(uint32_t cpt);
/* Simple lowercase mapping (UnicodeData field 13); cpt when none. */
uint32_t ucd_tolower(uint32_t cpt);
/* First code point of cpt's NFD decomposition; cpt when it has none. */
uint32_t ucd_nfd_first(uint32_t cpt);

/* ---- output sink ---------------------------------------------------- */

/* Tokens are counted past cap so the caller learns the size it needs. */
struct tok_out {
	fx_token *out;
	size_t cap;
	size_t n;
};

static inline void tok_push(struct tok_out *o, fx_token t)
{
	if (o->n < o->cap)
		o->out[o->n] = t;
	o->n++;
}

/* ---- the bigram queue (tokenize.c) ------------------------------------ */

/* A candidate merge of symbols left and right (adjacent when queued).
 * SPM ranks by score (higher first), BPE by merge rank (lower first);
 * ties go to the leftmost pair, as llama.cpp's comparators do (and as
 * tokenizers' BPE, whose entries carry their merged id in `right`). */
struct bigram {
	int32_t left, right;
	double key;  /* SPM: -score, BPE: rank; smaller pops first */
	size_t size; /* bytes of the merged text when queued */
};

/* Binary min-heap on (key, left) (std::priority_queue in llama.cpp). */
struct heap {
	struct bigram *a;
	size_t n, cap;
};

int heap_push(struct heap *h, struct bigram b); /* FX_E_NOMEM */
/* Remove and return the first bigram; h must not be empty. */
struct bigram heap_pop(struct heap *h);

/* ---- tokenizers ----------------------------------------------------- */

/* SentencePiece over text[0..n) (spaces already escaped to U+2581). */
int spm_tokenize(const struct vocab *v, const char *text, size_t n, struct tok_out *o);
/* Byte-level BPE of one raw-text fragment: pre-tokenize, byte-encode, merge. */
int bpe_tokenize(const struct vocab *v, const char *text, size_t n, struct tok_out *o);
/* WordPiece over one raw-text fragment (wpm.c): normalize, split into
 * words, greedy longest match per word, [UNK] for a word that fails. */
int wpm_tokenize(const struct vocab *v, const char *text, size_t n, struct tok_out *o);

/* ---- pre-tokenizer (pretok.c) --------------------------------------- */

/* White space as llama.cpp and Oniguruma's \\s see it (Unicode
 * White_Space), spelled out for PCRE2 whose \\s is another set: the body
 * of a character class. */
#define PRETOK_WS "\\t-\\r \\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}" \
		  "\\x{202F}\\x{205F}\\x{3000}"

/* A PCRE2 general context whose allocations go through malloc/free (so
 * the fault tests reach them); NULL when out of memory. */
pcre2_general_context *pretok_re_context(void);

/* The definition for a tokenizer.ggml.pre value, or NULL when unknown. */
const struct pretok_def *pretok_find(const char *name, size_t n);
/* Compile def's regexes into v->re; FX_E_UNSUPPORTED names a pattern
 * PCRE2 rejects, FX_E_NOMEM. */
int pretok_compile(struct vocab *v, const struct pretok_def *def, struct fx_err *err);
void pretok_free(struct vocab *v);
/* Fill v->byte_utf8 / cpt_byte with GPT-2's bytes_to_unicode map. */
void pretok_init_bytemap(struct vocab *v);

/* Split text[0..n) into words as llama.cpp's unicode_regex_split does.
 * On success *words holds *n_words spans into *buf (both owned by the
 * caller, fx_free), each word GPT-2 byte-encoded unless v->pre->raw_utf8. */
int pretok_split(const struct vocab *v, const char *text, size_t n,
		 char **buf, struct span **words, size_t *n_words);

/* ---- streaming detokenizer (piece.c) -------------------------------- */

/* fx_detok_flush: U+FFFD for a pending incomplete sequence. */
int detok_flush(struct fx_detok *st, char *out, size_t cap, size_t *n_out);

#endif
