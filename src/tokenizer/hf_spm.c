/* Tokenizer folders with SentencePiece's tokenizer.model and no
 * tokenizer.json (older Hugging Face checkpoints).
 *
 * Method, as hf_legacy.c: the file (read by hf_spm_proto.c) becomes the
 * cJSON tree of the tokenizer.json that transformers 5.23 builds for the
 * folder, and that tree goes through the tokenizer.json loader. What
 * transformers does (AutoTokenizer.from_pretrained -> TokenizersBackend.
 * convert_to_native_format -> _convert_from_sentencepiece):
 *   SentencePieceExtractor.extract (convert_slow_tokenizer.py): the pieces
 *     in id order; for a BPE class, vocab {piece: id} and merges from
 *     generate_merges(vocab) (tokenization_utils_base.py: every split of
 *     every piece into two pieces, ordered by the piece's id, then by the
 *     left part's length in characters: the proto's scores are not used);
 *     for a Unigram class, [piece, score] and the proto's unk_id. CONTROL
 *     pieces become special added tokens, USER_DEFINED ones non-special,
 *     both normalized false.
 *   The class, as AutoTokenizer picks it (spm_class): tokenizer_config.json's
 *   tokenizer_class (less "Fast"), config.json's model_type, or none:
 *   - LlamaTokenizer (models/llama/tokenization_llama.py): BPE with byte
 *     fallback, no unk_token; no normalizer; Metaspace(prepend_scheme:
 *     add_prefix_space (default true) ? legacy ? always : first : never,
 *     split false); decoder Replace(▁, " "), ByteFallback, Fuse, and
 *     Strip(" ", 1, 0) when add_prefix_space. bos <s>, eos </s>, unk <unk>.
 *   - GemmaTokenizer (models/gemma/tokenization_gemma.py): BPE with byte
 *     fallback and unk_token; normalizer Replace(" ", ▁); Split(" ",
 *     MergedWithPrevious); decoder Replace, ByteFallback, Fuse. bos <bos>,
 *     eos <eos>, unk <unk>, pad <pad>, mask <mask>.
 *   - T5Tokenizer (models/t5/tokenization_t5.py, T5Converter.convert_from_
 *     spm): Unigram with unk_id 2 (fixed there), the pieces then extra_ids
 *     (default 100) <extra_id_N> pieces, N descending, score 0, special;
 *     Precompiled(charsmap) when the proto has one; WhitespaceSplit then
 *     Metaspace(always, split); decoder Metaspace; post-processor $A </s>.
 *     eos </s>, unk <unk>, pad <pad>.
 *   - none (TokenizersBackend, also for model_type llama or mistral;
 *     SpmConverter.build_tokenizer_from_spm_proto): the proto's model type (Unigram with its unk_id, or BPE with
 *     unk_piece), its byte_fallback; normalizer Precompiled (when a
 *     charsmap) then Replace(" ", ▁); no pre-tokenizer (so no dummy
 *     prefix); decoder Replace(▁, " ") (+ ByteFallback, Fuse with byte
 *     fallback). bos / eos / unk: the proto's pieces whose ids are >= 0.
 *   Then as for every class (tokenization_utils_base.py from_pretrained
 *   and __init__, TokenizersBackend.__init__), added tokens in this order:
 *   tokenizer_config.json's added_tokens_decoder; the named tokens (the
 *   class's, then bos_token ... of tokenizer_config.json, else of
 *   special_tokens_map.json when there is no added_tokens_decoder, and
 *   model-specific "*_token" keys: spm_names), special; the extra special
 *   tokens: the
 *   config's extra_special_tokens / additional_special_tokens when it has
 *   either key, else the CONTROL / USER_DEFINED pieces (and T5's extra
 *   ids). Each at its piece's id, else appended. The post-processor
 *   [bos] $A [eos] from add_bos_token / add_eos_token (both default
 *   false), except T5's.
 * The proto's normalizer_spec flags (add_dummy_prefix ...) are read but
 * transformers does not use them, so neither does this.
 *
 * Refused (FX_E_UNSUPPORTED, naming it): another tokenizer_class or
 * model_type, an auto_map (remote code), WORD / CHAR models without a
 * class, an added_tokens_decoder entry that renames a piece, a
 * special_tokens_map.json extra_special_tokens, T5 pieces named
 * <extra_id_N>. Duplicate or empty pieces are FX_E_FORMAT (sentencepiece
 * refuses them too).
 *
 * The tree also carries a "ferrox" object, which load_json ignores:
 * "kind" (for vocab_kind) and "special_tokens" (the resolved bos / eos /
 * unk / pad contents, defaults for load_dir_specials).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/json.h"
#include "core/status.h"
#include "tokenizer/hf_impl.h"

enum spm_class { SPMC_NONE, SPMC_LLAMA, SPMC_GEMMA, SPMC_T5 };

/* transformers' SPECIAL_TOKENS_ATTRIBUTES order */
static const char *const spm_named_keys[7] = {
	"bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"
};

struct spm_ctx {
	const char *dir;
	char path[4200]; /* dir/tokenizer.model, for messages */
	struct fx_err *err;
	struct hfspm_model m;
	cJSON *cfg, *map, *mcfg; /* tokenizer_config.json, special_tokens_map.json, config.json */
	enum spm_class cls;
	const char *cls_name;
	bool bpe;                /* the tree's model: BPE, else Unigram */
	int32_t n_vocab;         /* model vocabulary: pieces (+ T5's extra ids) */
	int32_t extra_ids;       /* T5 */
	struct strtab text;      /* [m.n_piece] piece texts */
	struct strmap ids;       /* piece text -> id */
	cJSON *names;            /* named tokens in transformers' order: key ->
				  * content string, or null for none (owned) */
	bool cfg_extras;         /* the config names the extra special tokens
				  * (extras, a list or NULL), which replace the
				  * CONTROL / USER_DEFINED pieces (and T5's
				  * extra ids) */
	const cJSON *extras;
	char *tmp;               /* scratch for NUL-terminated copies */
	size_t n_tmp;
};

/* s as a NUL-terminated string in c->tmp (valid until the next call). */
static const char *spm_cstr(struct spm_ctx *c, struct span s)
{
	if (s.n + 1 > c->n_tmp) {
		char *p = fx_realloc_array(c->tmp, s.n + 64, 1);

		if (!p)
			return NULL;
		c->tmp = p;
		c->n_tmp = s.n + 64;
	}
	memcpy(c->tmp, s.p, s.n);
	c->tmp[s.n] = '\0';
	return c->tmp;
}

/* The id of piece p[0..n), or -1. */
static int32_t spm_id(const struct spm_ctx *c, const char *p, size_t n)
{
	struct span s = { p, n };

	return strmap_find(&c->ids, &c->text, &s, 1);
}

/* The piece table and map; duplicate and empty pieces refused. */
static int spm_index(struct spm_ctx *c)
{
	struct gguf_str *str = fx_calloc((size_t)c->m.n_piece + 1, sizeof(*str));
	int rc;

	if (!str)
		return FX_E_NOMEM;
	for (int32_t i = 0; i < c->m.n_piece; i++)
		str[i] = (struct gguf_str){ c->m.piece[i].text.p, c->m.piece[i].text.n };
	rc = strtab_build(&c->text, str, c->m.n_piece, false, "tokenizer.model pieces", c->err);
	fx_free(str);
	if (rc || (rc = strmap_init(&c->ids, (size_t)c->m.n_piece)))
		return rc;
	for (int32_t i = 0; i < c->m.n_piece; i++) {
		struct span t = strtab_get(&c->text, i);
		int32_t j;

		if (!t.n)
			return fx_fail(c->err, FX_E_FORMAT, "%s: piece %d is empty", c->path, i);
		if ((j = spm_id(c, t.p, t.n)) >= 0)
			return fx_fail(c->err, FX_E_FORMAT, "%s: piece '%.*s' appears twice (ids %d and %d)",
				       c->path, (int)(t.n > 60 ? 60 : t.n), t.p, j, i);
		strmap_put(&c->ids, &c->text, i, false);
	}
	return FX_OK;
}

/* ---- the class ------------------------------------------------------------ */

/* a model type's registered class, beyond enum spm_class */
enum { SPMR_UNREGISTERED = -1, SPMR_GENERIC = -2 };

static const char *const spm_class_names[] = {
	[SPMC_NONE] = "TokenizersBackend", [SPMC_LLAMA] = "LlamaTokenizer",
	[SPMC_GEMMA] = "GemmaTokenizer", [SPMC_T5] = "T5Tokenizer",
};

/* The class a tokenizer_class name s selects, or -1 (refused). */
static int spm_class_by_name(const char *s)
{
	size_t n = strlen(s);

	if (!strcmp(s, "PreTrainedTokenizerFast") || !strcmp(s, "TokenizersBackend"))
		return SPMC_NONE; /* tokenizer_class_from_name gives TokenizersBackend */
	if (n > 4 && !strcmp(s + n - 4, "Fast"))
		n -= 4;
	for (int k = SPMC_LLAMA; k <= SPMC_T5; k++)
		if (strlen(spm_class_names[k]) == n && !strncmp(s, spm_class_names[k], n))
			return k;
	return -1;
}

/* AutoTokenizer.from_pretrained's choice (tokenization_auto.py): the hub
 * class (tokenizer_config.json's tokenizer_class, else config.json's),
 * unless config.json's model_type registers another class: then that
 * one when the type is known to declare a wrong class, TokenizersBackend
 * when the registered class is TokenizersBackend, else the hub's; without
 * a hub class, the model type's registered class (TokenizersBackend for
 * an unregistered type or no config.json). */
static int spm_class(struct spm_ctx *c)
{
	const cJSON *tc = cJSON_GetObjectItemCaseSensitive(c->cfg, "tokenizer_class");
	const cJSON *mt = cJSON_GetObjectItemCaseSensitive(c->mcfg, "model_type");
	const char *file = "tokenizer_config.json";
	int hub = -1, reg = SPMR_UNREGISTERED;
	bool incorrect = false;

	if (cJSON_GetObjectItemCaseSensitive(c->cfg, "auto_map"))
		return fx_fail(c->err, FX_E_UNSUPPORTED, "%s/tokenizer_config.json: auto_map (a tokenizer "
			       "in the checkpoint's own Python code) is not supported", c->dir);
	if (!tc || cJSON_IsNull(tc)) {
		tc = cJSON_GetObjectItemCaseSensitive(c->mcfg, "tokenizer_class");
		file = "config.json";
	}
	if (tc && !cJSON_IsNull(tc)) {
		if (!cJSON_IsString(tc) || (hub = spm_class_by_name(tc->valuestring)) < 0)
			return fx_fail(c->err, FX_E_UNSUPPORTED, "%s/%s: tokenizer_class %.60s with "
				       "tokenizer.model is not supported (only LlamaTokenizer, "
				       "GemmaTokenizer, T5Tokenizer, TokenizersBackend or none)", c->dir, file,
				       cJSON_IsString(tc) ? tc->valuestring : "(not a string)");
	}
	if (cJSON_IsString(mt) && *mt->valuestring) {
		/* the model type's registered class (hf_class_table.h, shared
		 * with the tokenizer.json path) */
		const char *rn = hftok_class_registered(mt->valuestring, &incorrect);

		if (rn && (!strcmp(rn, "TokenizersBackend") || !strcmp(rn, "PreTrainedTokenizerFast")))
			reg = SPMR_GENERIC;
		else if (rn && (reg = spm_class_by_name(rn)) < 0)
			return fx_fail(c->err, FX_E_UNSUPPORTED, "%s/config.json: model_type %.60s "
				       "(tokenizer class %.60s) with tokenizer.model is not supported "
				       "(only LlamaTokenizer, GemmaTokenizer, T5Tokenizer, "
				       "TokenizersBackend)", c->dir, mt->valuestring, rn);
		else if (!rn)
			reg = SPMR_UNREGISTERED;
	}
	if (hub >= 0 && reg != SPMR_UNREGISTERED && reg != hub)
		c->cls = reg == SPMR_GENERIC ? SPMC_NONE : incorrect ? (enum spm_class)reg : (enum spm_class)hub;
	else if (hub >= 0)
		c->cls = (enum spm_class)hub;
	else
		c->cls = reg >= 0 ? (enum spm_class)reg : SPMC_NONE;
	c->cls_name = spm_class_names[c->cls];
	if (c->cls == SPMC_NONE && c->m.model_type != 1 && c->m.model_type != 2)
		return fx_fail(c->err, FX_E_UNSUPPORTED, "%s: a SentencePiece %s model read by "
			       "TokenizersBackend (no tokenizer class) is not supported", c->path,
			       c->m.model_type == 3 ? "WORD" : "CHAR");
	return FX_OK;
}

/* ---- named tokens ---------------------------------------------------------- */

/* The content of named token key, or NULL. */
static const char *spm_name(const struct spm_ctx *c, const char *key)
{
	const cJSON *t = cJSON_GetObjectItemCaseSensitive(c->names, key);

	return cJSON_IsString(t) ? t->valuestring : NULL;
}

/* Set named token key to s (NULL: none) in c->names, keeping its place. */
static int spm_name_set(struct spm_ctx *c, const char *key, const char *s)
{
	cJSON *v = s ? cJSON_CreateString(s) : cJSON_CreateNull();

	if (!v)
		return FX_E_NOMEM;
	if (cJSON_GetObjectItemCaseSensitive(c->names, key))
		return cJSON_ReplaceItemInObjectCaseSensitive(c->names, key, v) ? FX_OK
			: (cJSON_Delete(v), FX_E_NOMEM);
	return cJSON_AddItemToObject(c->names, key, v) ? FX_OK : (cJSON_Delete(v), FX_E_NOMEM);
}

/* Named tokens of a config object o (file names it), as transformers
 * takes them (PreTrainedTokenizerBase.from_pretrained and __init__): the
 * seven SPECIAL_TOKENS_ATTRIBUTES (a string, {"content": s} or null) when
 * std; any other "*_token" key (a model-specific special token) whose
 * value is a string when str, an object with a content when obj (in
 * tokenizer_config.json only an {"__type": "AddedToken"} one, which
 * convert_added_tokens turns into a token). */
static int spm_names_from(struct spm_ctx *c, const cJSON *o, const char *file, bool std, bool str,
			  bool obj)
{
	const cJSON *t;
	int rc;

	cJSON_ArrayForEach(t, o) {
		size_t n = strlen(t->string);
		const cJSON *ty = cJSON_GetObjectItemCaseSensitive(t, "__type");
		const char *s = hflegacy_content(t);
		bool named = false;

		for (int k = 0; k < 7; k++)
			named = named || !strcmp(t->string, spm_named_keys[k]);
		if (named && std) {
			if (!s && !cJSON_IsNull(t))
				return fx_fail(c->err, FX_E_FORMAT, "%s/%s: %s is neither a string nor "
					       "{\"content\": string}", c->dir, file, t->string);
			if ((rc = spm_name_set(c, t->string, s)))
				return rc;
		} else if (!named && n > 6 && !strcmp(t->string + n - 6, "_token") && s &&
			   ((str && cJSON_IsString(t)) ||
			    (obj && cJSON_IsObject(t) && (o == c->map || (cJSON_IsString(ty) &&
								       !strcmp(ty->valuestring, "AddedToken"))))) &&
			   (rc = spm_name_set(c, t->string, s))) {
			return rc;
		}
	}
	return FX_OK;
}

/* c->names: the class's defaults, then tokenizer_config.json's, then
 * special_tokens_map.json's when tokenizer_config.json has no
 * added_tokens_decoder (from_pretrained's legacy branch); c->extras. */
static int spm_names(struct spm_ctx *c)
{
	static const char *const defaults[4][7] = {
		[SPMC_LLAMA] = { "<s>", "</s>", "<unk>" },
		[SPMC_GEMMA] = { "<bos>", "<eos>", "<unk>", NULL, "<pad>", NULL, "<mask>" },
		[SPMC_T5] = { NULL, "</s>", "<unk>", NULL, "<pad>" },
	};
	const cJSON *xs = cJSON_GetObjectItemCaseSensitive(c->cfg, "extra_special_tokens");
	const cJSON *as = cJSON_GetObjectItemCaseSensitive(c->cfg, "additional_special_tokens"), *e;
	int rc;

	if (!(c->names = cJSON_CreateObject()))
		return FX_E_NOMEM;
	for (int k = 0; k < 7; k++)
		if ((rc = spm_name_set(c, spm_named_keys[k], defaults[c->cls][k])))
			return rc;
	if (c->cls == SPMC_NONE) { /* the proto's, "or" their defaults */
		const struct { int32_t id; struct span s; const char *dflt; } p[3] = {
			{ c->m.bos_id, c->m.bos_piece, "<s>" }, { c->m.eos_id, c->m.eos_piece, "</s>" },
			{ c->m.unk_id, c->m.unk_piece, "<unk>" },
		};

		for (int k = 0; k < 3; k++) {
			const char *s = p[k].id < 0 ? NULL : p[k].s.n ? spm_cstr(c, p[k].s) : p[k].dflt;

			if ((p[k].id >= 0 && !s) || (rc = spm_name_set(c, spm_named_keys[k], s)))
				return rc ? rc : FX_E_NOMEM;
		}
	}
	/* model-specific tokens in __init__'s order: those passed as kwargs
	 * (tokenizer_config.json's AddedToken objects, then
	 * special_tokens_map.json's), then from_pretrained's
	 * model_specific_special_tokens (tokenizer_config.json's strings) */
	if ((rc = spm_names_from(c, c->cfg, "tokenizer_config.json", true, false, true)))
		return rc;
	if (!cJSON_GetObjectItemCaseSensitive(c->cfg, "added_tokens_decoder")) {
		if (cJSON_GetObjectItemCaseSensitive(c->map, "extra_special_tokens"))
			return fx_fail(c->err, FX_E_UNSUPPORTED, "%s/special_tokens_map.json: "
				       "extra_special_tokens is not supported", c->dir);
		if ((rc = spm_names_from(c, c->map, "special_tokens_map.json", true, true, true)))
			return rc;
	}
	if ((rc = spm_names_from(c, c->cfg, "tokenizer_config.json", false, true, false)))
		return rc;
	/* from_pretrained renames additional_special_tokens to
	 * extra_special_tokens (unless that is set and not empty); then
	 * extract()'s list of CONTROL / USER_DEFINED pieces is not used */
	if (as && !(xs && (cJSON_IsArray(xs) || cJSON_IsObject(xs) ? cJSON_GetArraySize(xs) > 0
				: !cJSON_IsNull(xs) && !cJSON_IsFalse(xs))))
		xs = as; /* extra_special_tokens absent or falsy in Python's sense */
	if (xs && cJSON_IsObject(xs)) { /* {name: token}: model-specific named tokens */
		cJSON_ArrayForEach(e, xs)
			if (!cJSON_IsString(e))
				return fx_fail(c->err, FX_E_UNSUPPORTED, "%s/tokenizer_config.json: "
					       "extra_special_tokens entry %.40s is not a string", c->dir,
					       e->string);
			else if ((rc = spm_name_set(c, e->string, e->valuestring)))
				return rc;
		c->cfg_extras = true;
		return FX_OK;
	}
	if (xs && !cJSON_IsArray(xs) && !cJSON_IsNull(xs))
		return fx_fail(c->err, FX_E_UNSUPPORTED, "%s/tokenizer_config.json: extra special tokens "
			       "that are neither a list nor an object are not supported", c->dir);
	c->cfg_extras = xs != NULL;
	c->extras = cJSON_IsArray(xs) ? xs : NULL;
	return FX_OK;
}

/* ---- the model --------------------------------------------------------------- */

/* One merge "l r" (or ["l", "r"] when a part holds a space) appended to
 * merges. */
static int spm_merge(cJSON *merges, struct span l, struct span r)
{
	cJSON *e;

	if (memchr(l.p, ' ', l.n) || memchr(r.p, ' ', r.n)) {
		char *a = fx_strndup(l.p, l.n), *b = fx_strndup(r.p, r.n);
		const char *const two[2] = { a, b };

		e = a && b ? cJSON_CreateStringArray(two, 2) : NULL;
		fx_free(a);
		fx_free(b);
	} else {
		char *s = fx_malloc_array(l.n + r.n + 2, 1);

		if (!s)
			return FX_E_NOMEM;
		memcpy(s, l.p, l.n);
		s[l.n] = ' ';
		memcpy(s + l.n + 1, r.p, r.n);
		s[l.n + 1 + r.n] = '\0';
		e = cJSON_CreateString(s);
		fx_free(s);
	}
	if (!e || !cJSON_AddItemToArray(merges, e)) {
		cJSON_Delete(e);
		return FX_E_NOMEM;
	}
	return FX_OK;
}

/* generate_merges(vocab) without scores: for each piece in id order, each
 * split at a character boundary, shorter left part first, whose two
 * parts are pieces. */
static int spm_merges(struct spm_ctx *c, cJSON *merges)
{
	int rc = FX_OK;

	for (int32_t i = 0; i < c->m.n_piece && !rc; i++) {
		struct span t = strtab_get(&c->text, i);

		for (size_t k = 1; k < t.n && !rc; k++) {
			if (((unsigned char)t.p[k] & 0xc0) == 0x80) /* inside a character */
				continue;
			if (spm_id(c, t.p, k) >= 0 && spm_id(c, t.p + k, t.n - k) >= 0)
				rc = spm_merge(merges, (struct span){ t.p, k },
					       (struct span){ t.p + k, t.n - k });
		}
	}
	return rc;
}

/* model as BPE (extract's vocab {piece: id} and generated merges; unk_token
 * and byte_fallback per class, see the header). FX_E_UNSUPPORTED (Gemma
 * without unk), FX_E_NOMEM. */
static int spm_model_bpe(struct spm_ctx *c, cJSON *model)
{
	cJSON *vocab, *merges;
	const char *unk = c->cls == SPMC_LLAMA ? NULL : spm_name(c, "unk_token");
	int rc;

	if (c->cls == SPMC_NONE) {
		unk = spm_cstr(c, c->m.unk_piece.n ? c->m.unk_piece : (struct span){ "<unk>", 5 });
		if (!unk)
			return FX_E_NOMEM;
	}
	if (!cJSON_AddStringToObject(model, "type", "BPE") ||
	    !(unk ? cJSON_AddStringToObject(model, "unk_token", unk)
		  : cJSON_AddNullToObject(model, "unk_token")) ||
	    !cJSON_AddBoolToObject(model, "fuse_unk", true) ||
	    !cJSON_AddBoolToObject(model, "byte_fallback", c->cls == SPMC_NONE ? c->m.byte_fallback : true) ||
	    !(vocab = cJSON_AddObjectToObject(model, "vocab")) ||
	    !(merges = cJSON_AddArrayToObject(model, "merges")))
		return FX_E_NOMEM;
	if (c->cls == SPMC_GEMMA && !unk)
		return fx_fail(c->err, FX_E_UNSUPPORTED, "%s/tokenizer_config.json: GemmaTokenizer with "
			       "unk_token null is not supported", c->dir);
	for (int32_t i = 0; i < c->m.n_piece; i++) {
		const char *s = spm_cstr(c, strtab_get(&c->text, i));

		if (!s || !cJSON_AddNumberToObject(vocab, s, i))
			return FX_E_NOMEM;
	}
	if ((rc = spm_merges(c, merges)))
		return rc;
	c->n_vocab = c->m.n_piece;
	return FX_OK;
}

/* [piece, score] appended to vocab. */
static int spm_uni_entry(cJSON *vocab, const char *s, double score)
{
	cJSON *e = cJSON_CreateArray(), *p = cJSON_CreateString(s), *v = cJSON_CreateNumber(score);
	bool ok = e && p && v && cJSON_AddItemToArray(e, p);

	if (!ok) {
		cJSON_Delete(p);
		cJSON_Delete(v);
		cJSON_Delete(e);
		return FX_E_NOMEM;
	}
	if (!cJSON_AddItemToArray(e, v)) {
		cJSON_Delete(v);
		cJSON_Delete(e);
		return FX_E_NOMEM;
	}
	return cJSON_AddItemToArray(vocab, e) ? FX_OK : (cJSON_Delete(e), FX_E_NOMEM);
}

/* model as Unigram ([piece, score], then T5's extra ids with score 0).
 * FX_E_FORMAT (unk_id outside the vocabulary), FX_E_NOMEM. */
static int spm_model_unigram(struct spm_ctx *c, cJSON *model)
{
	int32_t unk = c->cls == SPMC_T5 ? 2 : c->m.unk_id;
	cJSON *vocab;
	int rc;

	c->n_vocab = c->m.n_piece + (c->cls == SPMC_T5 ? c->extra_ids : 0);
	if (unk < 0 || unk >= c->n_vocab)
		return fx_fail(c->err, FX_E_FORMAT, "%s: unk_id %d is outside the %d pieces%s", c->path,
			       unk, c->n_vocab, c->cls == SPMC_T5 ? " (T5Tokenizer fixes it at 2)" : "");
	if (!cJSON_AddStringToObject(model, "type", "Unigram") ||
	    !cJSON_AddNumberToObject(model, "unk_id", unk) ||
	    !cJSON_AddBoolToObject(model, "byte_fallback", c->cls == SPMC_NONE && c->m.byte_fallback) ||
	    !(vocab = cJSON_AddArrayToObject(model, "vocab")))
		return FX_E_NOMEM;
	for (int32_t i = 0; i < c->m.n_piece; i++) {
		const char *s = spm_cstr(c, strtab_get(&c->text, i));

		if (!s)
			return FX_E_NOMEM;
		if ((rc = spm_uni_entry(vocab, s, c->m.piece[i].score)))
			return rc;
	}
	for (int32_t k = c->n_vocab - c->m.n_piece - 1; k >= 0; k--) {
		char name[32];

		snprintf(name, sizeof(name), "<extra_id_%d>", k);
		if ((rc = spm_uni_entry(vocab, name, 0.0)))
			return rc;
	}
	return FX_OK;
}

/* ---- added tokens ---------------------------------------------------------- */

/* tokenizer_config.json's added_tokens_decoder: {"id": {content, flags}};
 * an entry must keep its piece's text (renaming pieces is refused). */
static int spm_added_decoder(struct spm_ctx *c, cJSON *list, int32_t *next)
{
	const cJSON *dec = cJSON_GetObjectItemCaseSensitive(c->cfg, "added_tokens_decoder"), *e;
	int rc;

	if (dec && !cJSON_IsObject(dec))
		return fx_fail(c->err, FX_E_FORMAT, "%s/tokenizer_config.json: added_tokens_decoder is "
			       "not an object", c->dir);
	cJSON_ArrayForEach(e, dec) {
		const char *s = hflegacy_content(e);
		char *endp;
		long id = strtol(e->string, &endp, 10);

		if (!s || *endp || endp == e->string || id < 0 || id >= (1 << 28))
			return fx_fail(c->err, FX_E_FORMAT, "%s/tokenizer_config.json: added_tokens_decoder "
				       "entry '%.20s' is not an id with a content", c->dir, e->string);
		if (id < c->n_vocab) { /* a piece, or one of T5's extra ids */
			char name[32];
			struct span t;

			snprintf(name, sizeof(name), "<extra_id_%d>", (int)(c->n_vocab - 1 - id));
			t = id < c->m.n_piece ? strtab_get(&c->text, (int32_t)id)
					      : (struct span){ name, strlen(name) };
			if (t.n != strlen(s) || memcmp(t.p, s, t.n))
				return fx_fail(c->err, FX_E_UNSUPPORTED, "%s/tokenizer_config.json: "
					       "added_tokens_decoder gives id %ld the content '%.40s', "
					       "not tokenizer.model's piece '%.*s' (renaming pieces is not "
					       "supported)", c->dir, id, s, (int)(t.n > 40 ? 40 : t.n), t.p);
		}
		if (hflegacy_added_id(list, s) >= 0)
			continue;
		if ((rc = hflegacy_add_token(list, (int)id, s, e)))
			return rc;
		if (id >= *next)
			*next = (int32_t)id + 1;
	}
	return FX_OK;
}

/* The id of content s: an added token's, a piece's (T5's extra ids
 * included), else -1. */
static int32_t spm_token_id(struct spm_ctx *c, const cJSON *list, const char *s)
{
	int32_t id = hflegacy_added_id(list, s), k;

	if (id >= 0)
		return id;
	if ((id = spm_id(c, s, strlen(s))) >= 0)
		return id;
	if (c->cls == SPMC_T5 && sscanf(s, "<extra_id_%d>", &k) == 1 && k >= 0 &&
	    k < c->extra_ids) {
		char name[32];

		snprintf(name, sizeof(name), "<extra_id_%d>", k);
		if (!strcmp(name, s))
			return c->n_vocab - 1 - k;
	}
	return -1;
}

/* Add content s as a special token (flags from def, an object, else
 * special only) unless already added: at its piece or appended. */
static int spm_add_special(struct spm_ctx *c, cJSON *list, const char *s, const cJSON *def,
			   int32_t *next)
{
	int32_t id;

	if (hflegacy_added_id(list, s) >= 0)
		return FX_OK;
	id = spm_token_id(c, list, s);
	return hflegacy_add_token(list, id >= 0 ? id : (*next)++, s, cJSON_IsObject(def) ? def : NULL);
}

/* added_tokens in TokenizersBackend.__init__'s order: added_tokens_decoder,
 * the named tokens, then the extra special tokens (the config's, or the
 * CONTROL pieces as special and USER_DEFINED ones as not, and T5's extra
 * ids). */
static int spm_added(struct spm_ctx *c, cJSON *list)
{
	int32_t next = c->n_vocab;
	cJSON *plain = NULL;
	const cJSON *e;
	int rc;

	if ((rc = spm_added_decoder(c, list, &next)))
		return rc;
	cJSON_ArrayForEach(e, c->names)
		if (cJSON_IsString(e) && (rc = spm_add_special(c, list, e->valuestring, NULL, &next)))
			return rc;
	cJSON_ArrayForEach(e, c->extras) {
		const char *s = hflegacy_content(e);

		if (!s)
			return fx_fail(c->err, FX_E_FORMAT, "%s/tokenizer_config.json: an extra special "
				       "token is neither a string nor {\"content\": string}", c->dir);
		if ((rc = spm_add_special(c, list, s, e, &next)))
			return rc;
	}
	if (c->cfg_extras)
		return FX_OK;
	if ((rc = fx_json_parse("{\"special\": false}", 18, &plain, NULL)))
		return rc;
	for (int32_t i = 0; i < c->m.n_piece && !rc; i++) { /* CONTROL, USER_DEFINED pieces */
		int32_t t = c->m.piece[i].type;
		const char *s;

		if (t != HFSPM_CONTROL && t != HFSPM_USER)
			continue;
		if (!(s = spm_cstr(c, strtab_get(&c->text, i))))
			rc = FX_E_NOMEM;
		else if (hflegacy_added_id(list, s) < 0)
			rc = hflegacy_add_token(list, i, s, t == HFSPM_CONTROL ? NULL : plain);
	}
	for (int32_t k = c->extra_ids - 1; k >= 0 && !rc && c->cls == SPMC_T5; k--) {
		char name[32];

		snprintf(name, sizeof(name), "<extra_id_%d>", k);
		if (hflegacy_added_id(list, name) < 0)
			rc = hflegacy_add_token(list, c->n_vocab - 1 - k, name, NULL);
	}
	cJSON_Delete(plain);
	return rc;
}

/* ---- the pipeline around the model -------------------------------------- */

/* Base64 of b[0..n) (tokenizer.json's precompiled_charsmap spelling),
 * fx_malloc'ed. */
static char *spm_base64(const unsigned char *b, size_t n)
{
	static const char digit[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	char *out = fx_malloc_array(n / 3 * 4 + 5, 1), *o = out;

	if (!out)
		return NULL;
	for (size_t i = 0; i < n; i += 3) {
		uint32_t v = (uint32_t)b[i] << 16 | (i + 1 < n ? (uint32_t)b[i + 1] << 8 : 0) |
			     (i + 2 < n ? b[i + 2] : 0);

		*o++ = digit[v >> 18];
		*o++ = digit[v >> 12 & 63];
		*o++ = i + 1 < n ? digit[v >> 6 & 63] : '=';
		*o++ = i + 2 < n ? digit[v & 63] : '=';
	}
	*o = '\0';
	return out;
}

/* Parse the JSON text s and add it to j under key. */
static int spm_add_json(cJSON *j, const char *key, const char *s)
{
	cJSON *o = NULL;
	int rc = fx_json_parse(s, strlen(s), &o, NULL);

	if (rc)
		return rc;
	return cJSON_AddItemToObject(j, key, o) ? FX_OK : (cJSON_Delete(o), FX_E_NOMEM);
}

#define SPM_REPLACE_TO_META "{\"type\":\"Replace\",\"pattern\":{\"String\":\" \"},\"content\":\"\\u2581\"}"
#define SPM_REPLACE_FROM_META "{\"type\":\"Replace\",\"pattern\":{\"String\":\"\\u2581\"},\"content\":\" \"}"
#define SPM_BYTES ",{\"type\":\"ByteFallback\"},{\"type\":\"Fuse\"}"

/* The normalizer: Precompiled first when used and present. */
static int spm_normalizer(struct spm_ctx *c, cJSON *j)
{
	bool pre = (c->cls == SPMC_NONE || c->cls == SPMC_T5) && c->m.charsmap.n;
	char *b64 = pre ? spm_base64((const unsigned char *)c->m.charsmap.p, c->m.charsmap.n) : NULL;
	char *s;
	int rc;

	if (pre && !b64)
		return FX_E_NOMEM;
	if (!(s = fx_malloc_array((b64 ? strlen(b64) : 0) + 256, 1))) {
		fx_free(b64);
		return FX_E_NOMEM;
	}
	s[0] = '\0';
	if (c->cls == SPMC_NONE)
		sprintf(s, "{\"type\":\"Sequence\",\"normalizers\":[%s%s%s" SPM_REPLACE_TO_META "]}",
			b64 ? "{\"type\":\"Precompiled\",\"precompiled_charsmap\":\"" : "", b64 ? b64 : "",
			b64 ? "\"}," : "");
	else if (c->cls == SPMC_T5 && b64)
		sprintf(s, "{\"type\":\"Precompiled\",\"precompiled_charsmap\":\"%s\"}", b64);
	else if (c->cls == SPMC_GEMMA)
		strcpy(s, SPM_REPLACE_TO_META);
	rc = *s ? spm_add_json(j, "normalizer", s) : FX_OK;
	fx_free(s);
	fx_free(b64);
	return rc;
}

/* A boolean option of tokenizer_config.json: *out, or def when absent or
 * null. */
static int spm_cfg_bool(struct spm_ctx *c, const char *key, bool def, bool *out)
{
	const cJSON *o = cJSON_GetObjectItemCaseSensitive(c->cfg, key);

	*out = def;
	if (!o || cJSON_IsNull(o))
		return FX_OK;
	if (!cJSON_IsBool(o))
		return fx_fail(c->err, FX_E_UNSUPPORTED, "%s/tokenizer_config.json: %s that is not "
			       "true, false or null is not supported", c->dir, key);
	*out = cJSON_IsTrue(o);
	return FX_OK;
}

/* j's normalizer, pre_tokenizer, decoder and post_processor for c's class
 * (the header's table). FX_E_UNSUPPORTED (an option of an odd type),
 * FX_E_NOMEM. */
static int spm_pipeline(struct spm_ctx *c, cJSON *j)
{
	char pre[256], dec[512];
	bool prefix = true, legacy = false, add_bos, add_eos;
	int rc;

	if (c->cls == SPMC_LLAMA && ((rc = spm_cfg_bool(c, "add_prefix_space", true, &prefix)) ||
				     (rc = spm_cfg_bool(c, "legacy", false, &legacy))))
		return rc;
	if ((rc = spm_cfg_bool(c, "add_bos_token", false, &add_bos)) ||
	    (rc = spm_cfg_bool(c, "add_eos_token", false, &add_eos)) || (rc = spm_normalizer(c, j)))
		return rc;
	pre[0] = '\0';
	switch (c->cls) {
	case SPMC_LLAMA:
		snprintf(pre, sizeof(pre), "{\"type\":\"Metaspace\",\"replacement\":\"\\u2581\","
			 "\"prepend_scheme\":\"%s\",\"split\":false}",
			 !prefix ? "never" : legacy ? "always" : "first");
		snprintf(dec, sizeof(dec), "{\"type\":\"Sequence\",\"decoders\":[" SPM_REPLACE_FROM_META
			 SPM_BYTES "%s]}", prefix ? ",{\"type\":\"Strip\",\"content\":\" \",\"start\":1,"
			 "\"stop\":0}" : "");
		break;
	case SPMC_GEMMA:
		snprintf(pre, sizeof(pre), "{\"type\":\"Split\",\"pattern\":{\"String\":\" \"},"
			 "\"behavior\":\"MergedWithPrevious\",\"invert\":false}");
		snprintf(dec, sizeof(dec), "{\"type\":\"Sequence\",\"decoders\":[" SPM_REPLACE_FROM_META
			 SPM_BYTES "]}");
		break;
	case SPMC_T5:
		snprintf(pre, sizeof(pre), "{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":"
			 "\"WhitespaceSplit\"},{\"type\":\"Metaspace\",\"replacement\":\"\\u2581\","
			 "\"prepend_scheme\":\"always\",\"split\":true}]}");
		snprintf(dec, sizeof(dec), "{\"type\":\"Metaspace\",\"replacement\":\"\\u2581\","
			 "\"prepend_scheme\":\"always\",\"split\":true}");
		break;
	default:
		snprintf(dec, sizeof(dec), "{\"type\":\"Sequence\",\"decoders\":[" SPM_REPLACE_FROM_META
			 "%s]}", c->m.byte_fallback ? SPM_BYTES : "");
	}
	if ((*pre && (rc = spm_add_json(j, "pre_tokenizer", pre))) ||
	    (rc = spm_add_json(j, "decoder", dec)))
		return rc;
	if (c->cls == SPMC_T5) /* T5Tokenizer sets $A </s> after the base class */
		return hflegacy_template(j, NULL, spm_name(c, "eos_token"), false, true);
	return hflegacy_template(j, spm_name(c, "bos_token"), spm_name(c, "eos_token"), add_bos, add_eos);
}

/* j's "ferrox" object: kind and the resolved named tokens. */
static int spm_private(struct spm_ctx *c, cJSON *j)
{
	cJSON *f = cJSON_AddObjectToObject(j, "ferrox"), *st;
	char kind[96];

	snprintf(kind, sizeof(kind), "tokenizer.model (%s, %s)", c->cls_name, c->bpe ? "BPE" : "Unigram");
	if (!f || !cJSON_AddStringToObject(f, "kind", kind) ||
	    !(st = cJSON_AddObjectToObject(f, "special_tokens")))
		return FX_E_NOMEM;
	for (int k = 0; k < 7; k++)
		if (spm_name(c, spm_named_keys[k]) &&
		    !cJSON_AddStringToObject(st, spm_named_keys[k], spm_name(c, spm_named_keys[k])))
			return FX_E_NOMEM;
	return FX_OK;
}

/* The whole tree into j (an empty object; the caller's). */
static int spm_tree(struct spm_ctx *c, cJSON *j)
{
	cJSON *model = cJSON_AddObjectToObject(j, "model"), *added;
	const cJSON *x = cJSON_GetObjectItemCaseSensitive(c->cfg, "extra_ids");
	int rc;

	if (!model || !(added = cJSON_AddArrayToObject(j, "added_tokens")))
		return FX_E_NOMEM;
	if (c->cls == SPMC_T5) {
		c->extra_ids = 100;
		if (x && (!cJSON_IsNumber(x) || x->valuedouble < 0 || x->valuedouble > 100000 ||
			  x->valuedouble != (double)x->valueint))
			return fx_fail(c->err, FX_E_FORMAT, "%s/tokenizer_config.json: extra_ids is not a "
				       "count", c->dir);
		if (x)
			c->extra_ids = x->valueint;
		for (int32_t i = 0; i < c->m.n_piece; i++)
			if (c->m.piece[i].text.n > 10 && !memcmp(c->m.piece[i].text.p, "<extra_id_", 10))
				return fx_fail(c->err, FX_E_UNSUPPORTED, "%s: T5Tokenizer on a model whose "
					       "pieces include <extra_id_N> is not supported", c->path);
	}
	c->bpe = c->cls == SPMC_LLAMA || c->cls == SPMC_GEMMA || (c->cls == SPMC_NONE && c->m.model_type == 2);
	if ((rc = spm_names(c)) ||
	    (rc = c->bpe ? spm_model_bpe(c, model) : spm_model_unigram(c, model)) ||
	    (rc = spm_added(c, added)) || (rc = spm_pipeline(c, j)))
		return rc;
	return spm_private(c, j);
}

int hfspm_json(const char *dir, cJSON **out, struct fx_err *err)
{
	struct spm_ctx c = { .dir = dir, .err = err };
	char *buf = NULL;
	size_t n = 0;
	cJSON *j = NULL;
	int rc;

	*out = NULL;
	if ((rc = hftok_read_file(dir, "tokenizer.model", &buf, &n, err)) || !buf)
		return rc;
	snprintf(c.path, sizeof(c.path), "%s/tokenizer.model", dir);
	if ((rc = hfspm_parse(buf, n, c.path, &c.m, err)) ||
	    (rc = hftok_read_json(dir, "tokenizer_config.json", &c.cfg, err)) ||
	    (rc = hftok_read_json(dir, "special_tokens_map.json", &c.map, err)) ||
	    (rc = hftok_read_json(dir, "config.json", &c.mcfg, err)) || (rc = spm_class(&c)) ||
	    (rc = spm_index(&c)))
		goto out;
	if (!(j = cJSON_CreateObject())) {
		rc = FX_E_NOMEM;
		goto out;
	}
	if (!(rc = spm_tree(&c, j))) {
		*out = j;
		j = NULL;
	}
out:
	cJSON_Delete(j);
	cJSON_Delete(c.cfg);
	cJSON_Delete(c.map);
	cJSON_Delete(c.mcfg);
	cJSON_Delete(c.names);
	fx_free(c.tmp);
	fx_free(c.ids.slot);
	strtab_free(&c.text);
	fx_free(c.m.piece);
	fx_free(buf);
	return rc;
}
