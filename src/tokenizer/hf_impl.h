/* Private to src/tokenizer: the Hugging Face tokenizer.json pipeline
 * (VOCAB_HF). The parity oracle is the `tokenizers` library (Rust, PyPI
 * 0.23); each part names the file of huggingface/tokenizers it follows.
 *
 * Encoding (tokenizer/mod.rs encode_single_sequence): added tokens are
 * split out of the raw text (added_vocabulary.rs), each remaining piece is
 * normalized and split again on the normalized added tokens, then
 * pre-tokenized, then run through the model; the post-processor wraps the
 * result when special tokens are asked for. Decoding one token (for
 * vocab_token_to_piece and the streaming detokenizer) runs the decoder
 * chain on that token as a token that is not the first of the text.
 *
 * Supported: models BPE, WordPiece, Unigram; normalizers Sequence,
 * Prepend, Replace, NFC/NFD/NFKC/NFKD, Lowercase, Strip, StripAccents,
 * BertNormalizer, Precompiled; pre-tokenizers Sequence, ByteLevel, Split,
 * Metaspace, Digits, Punctuation, Whitespace, WhitespaceSplit,
 * BertPreTokenizer; post-processors TemplateProcessing (single), Roberta,
 * Bert, ByteLevel, Sequence; decoders Sequence, ByteLevel, Replace,
 * ByteFallback, Fuse, Strip, Metaspace, WordPiece. Anything else is
 * FX_E_UNSUPPORTED by name at load.
 *
 * Input that is not valid UTF-8 (tokenizers only takes str): each maximal
 * ill-formed subpart is read as U+FFFD first, as Python's
 * bytes.decode("utf-8", "replace") does; then it tokenizes as `tokenizers`
 * does that string.
 */
#ifndef FX_TOKENIZER_HF_IMPL_H
#define FX_TOKENIZER_HF_IMPL_H

#include <cjson/cJSON.h>

#include "tokenizer/vocab_impl.h"

/* A growable byte buffer (fx_realloc'ed). */
struct sbuf {
	char *p;
	size_t n, cap;
};

int sbuf_put(struct sbuf *b, const char *s, size_t n);
/* Room for n more bytes past b->n. FX_E_NOMEM. */
int sbuf_reserve(struct sbuf *b, size_t n);

/* Split / Replace pattern: {"String": s} or {"Regex": r}. */
struct hf_pattern {
	char *lit;      /* String pattern (owned), NULL for a regex */
	size_t n_lit;
	pcre2_code *re; /* Regex pattern (owned), NULL for a string */
};

enum hf_behavior { HFB_REMOVED, HFB_ISOLATED, HFB_MERGED_PREV, HFB_MERGED_NEXT, HFB_CONTIGUOUS };
enum hf_prepend { HF_PREPEND_ALWAYS, HF_PREPEND_FIRST, HF_PREPEND_NEVER };

enum hf_norm_kind {
	HFN_SEQUENCE, HFN_PREPEND, HFN_REPLACE,
	/* hf_norm.c, through utf8proc */
	HFN_NFC, HFN_NFD, HFN_NFKC, HFN_NFKD, HFN_LOWERCASE, HFN_STRIP, HFN_STRIP_ACCENTS, HFN_BERT,
	HFN_PRECOMPILED
};

struct hf_norm {
	enum hf_norm_kind kind;
	struct hf_norm *item; /* [n_item] Sequence */
	int n_item;
	struct hf_pattern pat; /* Replace */
	char *str;             /* Prepend: the prefix; Replace: the content (owned) */
	size_t n_str;
	bool left, right;      /* Strip: which ends */
	bool clean_text, chinese, strip_accents, lowercase; /* BertNormalizer */
	/* Precompiled: SentencePiece's charsmap, a darts-clone double array
	 * ([n_units] 32-bit units) over the normalized strings' blob */
	uint32_t *units;
	size_t n_units;
	char *blob; /* [n_blob] NUL-separated normalized strings (owned) */
	size_t n_blob;
};

enum hf_pre_kind { HFP_SEQUENCE, HFP_BYTELEVEL, HFP_SPLIT, HFP_METASPACE };

struct hf_pre {
	enum hf_pre_kind kind;
	struct hf_pre *item; /* [n_item] Sequence */
	int n_item;
	struct hf_pattern pat;     /* Split */
	enum hf_behavior behavior; /* Split */
	bool invert;               /* Split */
	bool add_prefix_space;     /* ByteLevel */
	bool use_regex;            /* ByteLevel: GPT-2's regex first */
	char rep[4];               /* Metaspace: the replacement, UTF-8 */
	size_t n_rep;
	enum hf_prepend prepend;   /* Metaspace */
	bool split;                /* Metaspace: split on the replacement */
};

enum hf_dec_kind {
	HFD_SEQUENCE, HFD_BYTELEVEL, HFD_REPLACE, HFD_BYTEFALLBACK, HFD_FUSE, HFD_STRIP,
	HFD_METASPACE, HFD_WORDPIECE
};

struct hf_dec {
	enum hf_dec_kind kind;
	struct hf_dec *item; /* [n_item] Sequence */
	int n_item;
	struct hf_pattern pat;   /* Replace */
	char *str;               /* Replace: content; Strip: the character;
				  * WordPiece: the prefix (owned) */
	size_t n_str;
	int start, stop;         /* Strip: characters at most, each end */
	char rep[4];             /* Metaspace */
	size_t n_rep;
	enum hf_prepend prepend; /* Metaspace */
	bool cleanup;            /* WordPiece: BERT's detokenizing replacements */
};

/* One entry of the post-processor's "single" template: special-token ids
 * or the sequence itself. */
struct hf_post_piece {
	int32_t *ids; /* [n_ids] (owned); NULL for the sequence */
	int n_ids;
};

/* An added token (tokenizer.json "added_tokens"). */
struct hf_added {
	fx_token id;
	struct span text; /* content, into hftok.added_buf */
	struct span norm; /* content through the normalizer, into added_buf */
	bool special, normalized, lstrip, rstrip, single_word;
};

/* (left, right) id pair -> merge rank and merged id; left < 0: empty. */
struct hf_pair {
	int32_t left, right, rank, id;
};

enum hf_model_kind { HFM_BPE, HFM_WORDPIECE, HFM_UNIGRAM };

struct hftok {
	enum hf_model_kind model;
	/* model vocabulary, by id (ids absent from "vocab" are empty and
	 * not in model_map) */
	struct strtab model_text; /* [n_model] */
	struct strmap model_map;  /* text -> id */

	/* BPE (models/bpe/model.rs) */
	struct hf_pair *pair; /* [pair_mask + 1] open addressing */
	size_t pair_mask;
	char *prefix, *suffix; /* continuing_subword_prefix / end_of_word_suffix (owned) */
	size_t n_prefix, n_suffix;
	bool byte_fallback, ignore_merges, fuse_unk;
	fx_token unk;           /* -1 when there is no unk_token */
	fx_token byte_tok[256]; /* <0xNN> ids, -1 when absent */

	/* WordPiece (models/wordpiece/mod.rs): prefix and unk above */
	int max_chars; /* max_input_chars_per_word */

	/* Unigram (models/unigram/model.rs): byte_fallback and unk above */
	double *score;          /* [model_text.n] */
	double unk_score;       /* the lowest score less 10 */
	struct trie_node *piece_trie; /* over the pieces; `special` >= 0 ends one */
	int32_t n_piece_trie;

	struct hf_added *added; /* [n_added], tokenizers' order: specials first */
	int32_t n_added;
	char *added_buf;
	/* tries over the contents of the non-normalized and the normalized
	 * added tokens; a node's `special` is an index into added */
	struct trie_node *trie_raw, *trie_norm;
	int32_t n_trie_raw, n_trie_norm;

	struct hf_norm *norm; /* NULL when none */
	struct hf_pre *pre;
	struct hf_dec *dec;
	struct hf_post_piece *post; /* [n_post]; NULL: no post-processor */
	int n_post;

	pcre2_general_context *re_mem;
	pcre2_code *re_bytelevel; /* GPT-2's pattern, for ByteLevel use_regex */
	pcre2_code *re_word;      /* one \w character as Rust's regex sees it */
};

/* ---- hf_load.c ---------------------------------------------------------- */

/* Compile pattern (Oniguruma syntax, as tokenizers' Regex) for PCRE2:
 * \s and \S become Unicode White_Space. what names it in errors.
 * FX_E_UNSUPPORTED (PCRE2 rejects it), FX_E_NOMEM. */
int hftok_regex(struct hftok *h, const char *pattern, size_t n, const char *what,
		pcre2_code **out, struct fx_err *err);
void hftok_free(struct hftok *h);
/* dir/name's bytes into *out (fx_malloc'ed, NUL after the *n bytes), or
 * *out NULL when the file is absent. FX_E_IO, FX_E_NOMEM. */
int hftok_read_file(const char *dir, const char *name, char **out, size_t *n, struct fx_err *err);
/* dir/name parsed into *out (cJSON_Delete), or *out NULL when absent.
 * FX_E_FORMAT (not JSON), FX_E_UNSUPPORTED (a \u0000), FX_E_IO, FX_E_NOMEM. */
int hftok_read_json(const char *dir, const char *name, cJSON **out, struct fx_err *err);

/* ---- hf_legacy.c -------------------------------------------------------- */

/* The tokenizer.json tree transformers builds for dir's vocab.json +
 * merges.txt (GPT-2 byte-level BPE) into *out (cJSON_Delete), or *out
 * NULL when there is no vocab.json, or a tokenizer.model that transformers
 * would read instead (a class other than GPT-2's). FX_E_FORMAT naming the file and line,
 * FX_E_UNSUPPORTED (a tokenizer_class other than GPT-2's), FX_E_IO,
 * FX_E_NOMEM. */
int hflegacy_bpe_json(const char *dir, cJSON **out, struct fx_err *err);
/* Helpers hf_spm.c shares. The content of a special-token value t (a
 * string or {"content": s}), or NULL. */
const char *hflegacy_content(const cJSON *t);
/* Append the added token {id, content} to list, its flags from def (an
 * added_tokens_decoder entry; NULL: special, nothing else). FX_E_NOMEM. */
int hflegacy_add_token(cJSON *list, int id, const char *content, const cJSON *def);
/* The id of the added token of that content in list, or -1. */
int hflegacy_added_id(const cJSON *list, const char *content);
/* j's post_processor: TemplateProcessing [bos] $A [eos], each when asked
 * for and named (TokenizersBackend.update_post_processor); none when
 * neither. The ids are those of j's added_tokens. FX_E_NOMEM. */
int hflegacy_template(cJSON *j, const char *bos, const char *eos, bool add_bos, bool add_eos);

/* ---- hf_class.c ---------------------------------------------------------- */

/* The class AutoTokenizer (transformers 5.23, models/auto/
 * tokenization_auto.py) loads a tokenizer.json folder with, from
 * tokenizer_config.json cfg and config.json mcfg (either may be NULL),
 * when that class does not keep the file's pipeline: the name of a class
 * that rebuilds it, or of one that does not read tokenizer.json at all.
 * NULL: TokenizersBackend over the file as it is. byte_level: the file
 * names a ByteLevel component. *hub: the declared class, or NULL (borrowed
 * from cfg / mcfg). */
const char *hftok_class_resolve(const cJSON *cfg, const cJSON *mcfg, bool byte_level,
				const char **hub);
/* The class name transformers 5.23 registers for config.json model_type
 * type (TOKENIZER_MAPPING_NAMES), or NULL for none; *incorrect: the type
 * is in MODELS_WITH_INCORRECT_HUB_TOKENIZER_CLASS. Static strings. */
const char *hftok_class_registered(const char *type, bool *incorrect);
/* Rewrite tokenizer.json tree j (in place) as class cls's __init__
 * rebuilds it: model options, normalizer, pre-tokenizer, decoder, the
 * class's named tokens as added tokens, and a "ferrox" object
 * (special_tokens) for load_dir_specials. cfg / map: tokenizer_config.json
 * and special_tokens_map.json (may be NULL). FX_E_UNSUPPORTED naming cls
 * for a class ferrox does not reproduce or a non-BPE model, FX_E_NOMEM. */
int hftok_class_apply(cJSON *j, const char *cls, const char *dir, const cJSON *cfg, const cJSON *map,
		      struct fx_err *err);

/* ---- hf_spm_proto.c / hf_spm.c ------------------------------------------ */

/* sentencepiece_model.proto ModelProto.SentencePiece.Type */
enum { HFSPM_NORMAL = 1, HFSPM_UNKNOWN = 2, HFSPM_CONTROL = 3, HFSPM_USER = 4, HFSPM_UNUSED = 5,
       HFSPM_BYTE = 6 };

/* One ModelProto piece; text points into the file's bytes. */
struct hfspm_piece {
	struct span text;
	float score;
	int32_t type; /* HFSPM_* */
};

/* What ferrox reads of a tokenizer.model (hf_spm_proto.c's header). Spans
 * point into the caller's file buffer; piece is owned (fx_free). */
struct hfspm_model {
	struct hfspm_piece *piece; /* [n_piece] */
	int32_t n_piece;
	int32_t model_type;        /* TrainerSpec.ModelType: 1 UNIGRAM, 2 BPE, 3 WORD, 4 CHAR */
	int32_t vocab_size, unk_id, bos_id, eos_id, pad_id;
	struct span unk_piece, bos_piece, eos_piece, pad_piece;
	bool byte_fallback, split_digits;
	struct span norm_name, charsmap; /* NormalizerSpec name, precompiled_charsmap */
	bool add_dummy_prefix, remove_extra_whitespaces, escape_whitespaces;
};

/* Parse the ModelProto buf[0..n) (path names it in errors) into *m, the
 * .proto's defaults for absent fields. FX_E_FORMAT naming path and the
 * byte offset (truncated, varint overflow, wrong wire type, enum out of
 * range, piece not UTF-8, no pieces), FX_E_NOMEM. */
int hfspm_parse(const void *buf, size_t n, const char *path, struct hfspm_model *m,
		struct fx_err *err);
/* The tokenizer.json tree transformers 5.23 builds for dir's
 * tokenizer.model (hf_spm.c's header) into *out (cJSON_Delete), or *out
 * NULL when there is no tokenizer.model. FX_E_FORMAT naming the file,
 * FX_E_UNSUPPORTED naming the class or option, FX_E_IO, FX_E_NOMEM. */
int hfspm_json(const char *dir, cJSON **out, struct fx_err *err);

/* ---- hf_encode.c -------------------------------------------------------- */

/* Normalize s[0..n) with nm (NULL: copy), appending to out. FX_E_NOMEM. */
int hftok_normalize(const struct hftok *h, const struct hf_norm *nm, const char *s, size_t n,
		    struct sbuf *out);
/* The whole encode of text[0..n) into o: see the header comment. Special
 * added tokens are matched only when parse_special, and never where they
 * overlap one of data[0..n_data) (sorted, disjoint byte ranges of text).
 * FX_E_NOMEM, or FX_E_FORMAT when the model must use an unk_token that is
 * not in the vocabulary. */
int hftok_encode(const struct vocab *v, const char *text, size_t n, bool add_special,
		 bool parse_special, const struct fx_chat_span *data, size_t n_data,
		 struct tok_out *o);

/* ---- hf_norm.c ---------------------------------------------------------- */

/* The utf8proc normalizers (HFN_NFC .. HFN_BERT) on s[0..n) (valid
 * UTF-8), appending to out. FX_E_NOMEM. */
int hfnorm_unicode(const struct hf_norm *nm, const char *s, size_t n, struct sbuf *out);
/* Precompiled's charsmap from its base64 text b64. FX_E_FORMAT, FX_E_NOMEM. */
int hfnorm_precompiled_load(struct hf_norm *nm, const char *b64, struct fx_err *err);

/* ---- hf_bpe.c ----------------------------------------------------------- */

/* Build the BPE model of h from the "model" object m (vocab already
 * loaded). FX_E_FORMAT (merges malformed or naming missing tokens, named),
 * FX_E_NOMEM. */
int hfbpe_load(struct hftok *h, const cJSON *m, struct fx_err *err);
/* The BPE tokens of one pre-tokenized word w[0..n) into o. FX_E_NOMEM. */
int hfbpe_word(const struct hftok *h, const char *w, size_t n, struct tok_out *o);

/* ---- hf_models.c --------------------------------------------------------- */

/* WordPiece / Unigram from the "model" object m. FX_E_FORMAT (malformed,
 * unk token or id missing, named), FX_E_NOMEM. */
int hfwp_load(struct hftok *h, const cJSON *m, struct fx_err *err);
int hfuni_load(struct hftok *h, const cJSON *m, struct fx_err *err);
/* The tokens of one pre-tokenized word w[0..n) into o, by h's model.
 * FX_E_NOMEM; FX_E_FORMAT when the word needs an unk the model lacks. */
int hftok_word(const struct hftok *h, const char *w, size_t n, struct tok_out *o);

/* ---- hf_decode.c -------------------------------------------------------- */

/* Token id's text through the decoder, as a token that is not the first of
 * the text; empty for a special added token unless special. Writes at most
 * cap bytes to buf and returns the full length. FX_E_NOMEM through *rc. */
size_t hftok_piece(const struct vocab *v, fx_token id, bool special, char *buf, size_t cap,
		   int *rc);

#endif
