/* Vocabulary loading from GGUF tokenizer.ggml.* metadata.
 *
 * Follows llama.cpp's llama_vocab::impl::load (src/llama-vocab.cpp): the
 * same defaults per tokenizer model, the same special-token keys, the same
 * detection of EOT/FIM/EOG tokens by their text, and the same cache of
 * special tokens sorted longest first. Where llama.cpp walks a hash map in
 * unspecified order, ferrox walks token ids in ascending order.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/status.h"
#include "tokenizer/hf_impl.h"

/* ---- string map ------------------------------------------------------ */

/* FNV-1a over the concatenated segments, folded for the low bits. */
static uint64_t hash_segs(const struct span *seg, int nseg)
{
	uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a, 64 bit */

	for (int s = 0; s < nseg; s++)
		for (size_t i = 0; i < seg[s].n; i++) {
			h ^= (unsigned char)seg[s].p[i];
			h *= 0x100000001b3ull;
		}
	return h ^ (h >> 29);
}

/* Does key equal the concatenation of seg[0..nseg)? */
static bool segs_equal(const struct span *key, const struct span *seg, int nseg)
{
	size_t off = 0;

	for (int s = 0; s < nseg; s++) {
		if (off + seg[s].n > key->n || memcmp(key->p + off, seg[s].p, seg[s].n))
			return false;
		off += seg[s].n;
	}
	return off == key->n;
}

/* Size m for n keys (load factor <= 3/4: linear probing stays short, and
 * the table is a quarter of a small model's vocabulary memory). */
int strmap_init(struct strmap *m, size_t n)
{
	size_t cap = 16;

	while (cap / 4 * 3 < n)
		cap *= 2;
	m->slot = fx_malloc_array(cap, sizeof(*m->slot));
	if (!m->slot)
		return FX_E_NOMEM;
	memset(m->slot, 0xff, cap * sizeof(*m->slot));
	m->mask = cap - 1;
	return FX_OK;
}

/* Insert keys[idx]; when an equal key is present keep the old index unless
 * replace (std::unordered_map's operator[] vs emplace). */
void strmap_put(struct strmap *m, const struct strtab *keys, int32_t idx, bool replace)
{
	struct span key = strtab_get(keys, idx);
	size_t i = hash_segs(&key, 1) & m->mask;

	while (m->slot[i] >= 0) {
		struct span old = strtab_get(keys, m->slot[i]);

		if (segs_equal(&old, &key, 1)) {
			if (replace)
				m->slot[i] = idx;
			return;
		}
		i = (i + 1) & m->mask;
	}
	m->slot[i] = idx;
}

int32_t strmap_find(const struct strmap *m, const struct strtab *keys,
		    const struct span *seg, int nseg)
{
	size_t i = hash_segs(seg, nseg) & m->mask;

	while (m->slot[i] >= 0) {
		struct span key = strtab_get(keys, m->slot[i]);

		if (segs_equal(&key, seg, nseg))
			return m->slot[i];
		i = (i + 1) & m->mask;
	}
	return -1;
}

fx_token vocab_text_to_token(const struct vocab *v, const char *p, size_t n)
{
	struct span s = { p, n };

	return strmap_find(&v->tok_map, &v->text, &s, 1);
}

fx_token vocab_byte_token(const struct vocab *v, uint8_t b)
{
	static const char hex[] = "0123456789ABCDEF";
	char buf[6] = { '<', '0', 'x', hex[b >> 4], hex[b & 15], '>' };
	fx_token t = vocab_text_to_token(v, buf, sizeof(buf));

	if (t >= 0)
		return t;
	buf[0] = (char)b;
	return vocab_text_to_token(v, buf, 1);
}

/* Is token id's text exactly the C string s? */
static bool text_is(const struct vocab *v, fx_token id, const char *s)
{
	size_t n = strlen(s);
	struct span t = strtab_get(&v->text, id);

	return t.n == n && !memcmp(t.p, s, n);
}

/* Id of the token whose text is s, or -1. */
static fx_token find_text(const struct vocab *v, const char *s)
{
	return vocab_text_to_token(v, s, strlen(s));
}

/* ---- metadata helpers ------------------------------------------------ */

/* A present key must have the type we read it as (llama.cpp's get_key
 * throws on a mismatch too); an absent one leaves *out alone. */
static int get_bool(const struct gguf_file *g, const char *key, bool *out, struct fx_err *err)
{
	if (gguf_find(g, key) && !gguf_get_bool(g, key, out))
		return gguf_type_error(g, key, "bool", err);
	return FX_OK;
}

/* Token-id key: an id outside the vocabulary is refused. llama.cpp keeps
 * the default there (with a warning), which can be another token: Gemma 3's
 * default BOS 1 is <eos>, so a bad BOS id made every prompt start with
 * <eos> and generate nothing, exit 0. */
static int get_id(const struct gguf_file *g, const char *key, int32_t n_tokens,
		  fx_token *id, struct fx_err *err)
{
	uint32_t u;

	if (!gguf_find(g, key))
		return FX_OK;
	if (!gguf_get_u32(g, key, &u))
		return gguf_type_error(g, key, "uint32", err);
	if (u >= (uint32_t)n_tokens)
		return fx_fail(err, FX_E_FORMAT,
			       "GGUF: %s is %u, outside the vocabulary of %d tokens (ids 0..%d)", key,
			       u, n_tokens, n_tokens - 1);
	*id = (fx_token)u;
	return FX_OK;
}

/* A string key; *out keeps its value when absent. */
static int get_str(const struct gguf_file *g, const char *key, struct gguf_str *out,
		   struct fx_err *err)
{
	if (gguf_find(g, key) && !gguf_get_str(g, key, out))
		return gguf_type_error(g, key, "string", err);
	return FX_OK;
}

/* Numeric array kv of at least n elements of one of two types. */
static int get_num_arr(const struct gguf_file *g, const char *key, enum gguf_vtype t1,
		       enum gguf_vtype t2, uint64_t n, const struct gguf_kv **out,
		       struct fx_err *err)
{
	const struct gguf_kv *kv = gguf_find(g, key);

	*out = NULL;
	if (!kv)
		return FX_OK;
	if (kv->type != GGUF_T_ARRAY || (kv->arr_type != t1 && kv->arr_type != t2) || !kv->data)
		return fx_fail(err, FX_E_FORMAT, "GGUF: %s has type %s[%s], want %s[]", key,
			       gguf_vtype_name(kv->type), gguf_vtype_name(kv->arr_type),
			       gguf_vtype_name(t1));
	if (kv->n < n)
		return fx_fail(err, FX_E_FORMAT, "GGUF: %s has %llu entries for %llu tokens", key,
			       (unsigned long long)kv->n, (unsigned long long)n);
	*out = kv;
	return FX_OK;
}

/* Is the GGUF string s equal to the C string c? */
static bool span_eq(const struct gguf_str *s, const char *c)
{
	size_t n = strlen(c);

	return s->n == n && !memcmp(s->p, c, n);
}

/* ---- loading steps --------------------------------------------------- */

/* Pack str[0..n) into t, an empty string i becoming "[EMPTY_i]" when
 * name_empty (llama.cpp renames empty tokens). */
int strtab_build(struct strtab *t, const struct gguf_str *str, int32_t n, bool name_empty,
		 const char *what, struct fx_err *err)
{
	uint64_t total = 0;
	char name[24];

	for (int32_t i = 0; i < n; i++) {
		size_t k = str[i].n;

		if (!k && name_empty)
			k = (size_t)snprintf(name, sizeof(name), "[EMPTY_%d]", (int)i);
		total += k;
	}
	if (total > UINT32_MAX)
		return fx_fail(err, FX_E_FORMAT, "GGUF: %s hold %llu bytes of text (at most 4 GiB)",
			       what, (unsigned long long)total);
	t->off = fx_malloc_array((size_t)n + 1, sizeof(*t->off));
	t->buf = fx_malloc_array(total ? total : 1, 1);
	if (!t->off || !t->buf)
		return FX_E_NOMEM;
	t->n = n;
	t->off[0] = 0;
	for (int32_t i = 0; i < n; i++) {
		const char *src = str[i].p;
		size_t k = str[i].n;

		if (!k && name_empty) {
			k = (size_t)snprintf(name, sizeof(name), "[EMPTY_%d]", (int)i);
			src = name;
		}
		if (k)
			memcpy(t->buf + t->off[i], src, k);
		t->off[i + 1] = t->off[i] + (uint32_t)k;
	}
	return FX_OK;
}

void strtab_free(struct strtab *t)
{
	fx_free(t->buf);
	fx_free(t->off);
	*t = (struct strtab){ 0 };
}

/* Texts, scores and attributes of every token, and the text -> id map. */
static int load_tokens(struct vocab *v, const struct gguf_file *g, struct fx_err *err)
{
	const struct gguf_kv *tk = gguf_find(g, "tokenizer.ggml.tokens");
	const struct gguf_kv *sc, *tt;
	int rc;

	if (!tk)
		return fx_fail(err, FX_E_FORMAT, "GGUF: no tokenizer.ggml.tokens");
	if (tk->type != GGUF_T_ARRAY || tk->arr_type != GGUF_T_STRING || !tk->data)
		return gguf_type_error(g, "tokenizer.ggml.tokens", "array of string", err);
	if (tk->n == 0 || tk->n > INT32_MAX / 2)
		return fx_fail(err, FX_E_FORMAT, "GGUF: tokenizer.ggml.tokens has %llu tokens",
			       (unsigned long long)tk->n);
	v->n_tokens = (int32_t)tk->n;
	if ((rc = get_num_arr(g, "tokenizer.ggml.scores", GGUF_T_F32, GGUF_T_I32, tk->n, &sc, err)) ||
	    (rc = get_num_arr(g, "tokenizer.ggml.token_type", GGUF_T_I32, GGUF_T_I32, tk->n, &tt, err)) ||
	    (rc = strtab_build(&v->text, tk->data, v->n_tokens, true, "tokenizer.ggml.tokens", err)))
		return rc;

	v->score = fx_calloc(tk->n, sizeof(*v->score));
	v->attr = fx_calloc(tk->n, sizeof(*v->attr));
	if (!v->score || !v->attr)
		return FX_E_NOMEM;
	for (int32_t i = 0; i < v->n_tokens; i++) {
		if (sc && sc->arr_type == GGUF_T_F32)
			memcpy(&v->score[i], (const char *)sc->data + 4 * (size_t)i, 4);
		else if (sc)
			v->score[i] = (float)gguf_arr_num(sc, i);
		v->attr[i] = ATTR_NORMAL;
		if (tt) {
			int32_t t;

			memcpy(&t, (const char *)tt->data + 4 * (size_t)i, 4);
			switch (t) { /* llama_token_type -> llama_token_attr */
			case 1: v->attr[i] = ATTR_NORMAL; break;
			case 2: v->attr[i] = ATTR_UNKNOWN; break;
			case 3: v->attr[i] = ATTR_CONTROL; break;
			case 4: v->attr[i] = ATTR_USER_DEFINED; break;
			case 5: v->attr[i] = ATTR_UNUSED; break;
			case 6: v->attr[i] = ATTR_BYTE; break;
			default: v->attr[i] = ATTR_UNDEFINED; break;
			}
		}
	}

	if ((rc = strmap_init(&v->tok_map, tk->n)))
		return rc;
	for (int32_t i = 0; i < v->n_tokens; i++) {
		int32_t len = (int32_t)strtab_get(&v->text, i).n;

		strmap_put(&v->tok_map, &v->text, i, true);
		if (len > v->max_token_len)
			v->max_token_len = len;
	}
	return FX_OK;
}

/* BPE merges "left right" with their rank (the first of duplicates). */
static int load_merges(struct vocab *v, const struct gguf_file *g, struct fx_err *err)
{
	const struct gguf_kv *kv = gguf_find(g, "tokenizer.ggml.merges");
	int rc;

	if (!kv)
		return fx_fail(err, FX_E_FORMAT, "GGUF: gpt2 tokenizer without tokenizer.ggml.merges");
	if (kv->type != GGUF_T_ARRAY || kv->arr_type != GGUF_T_STRING || (!kv->data && kv->n))
		return gguf_type_error(g, "tokenizer.ggml.merges", "array of string", err);
	if (kv->n > INT32_MAX / 2)
		return fx_fail(err, FX_E_FORMAT, "GGUF: tokenizer.ggml.merges has %llu entries",
			       (unsigned long long)kv->n);
	if ((rc = strtab_build(&v->merges, kv->data, (int32_t)kv->n, false, "tokenizer.ggml.merges",
			       err)) ||
	    (rc = strmap_init(&v->merge_map, kv->n)))
		return rc;
	for (int32_t i = 0; i < v->merges.n; i++)
		strmap_put(&v->merge_map, &v->merges, i, false);
	return FX_OK;
}

/* tokenizer.ggml.model and .pre: the tokenizer kind and its defaults. */
static int load_kind(struct vocab *v, const struct gguf_file *g, struct fx_err *err)
{
	struct gguf_str model = { "", 0 }, pre = { "", 0 };
	int rc;

	if ((rc = get_str(g, "tokenizer.ggml.pre", &pre, err)) ||
	    (rc = get_str(g, "tokenizer.ggml.model", &model, err)))
		return rc;
	if (!gguf_find(g, "tokenizer.ggml.model"))
		return fx_fail(err, FX_E_FORMAT, "GGUF: no tokenizer.ggml.model");
	if (!pre.n)
		pre = (struct gguf_str){ "default", 7 };
	v->bos = v->eos = v->eot = v->eom = v->unk = v->sep = v->pad = v->mask = -1;
	v->fim_pre = v->fim_suf = v->fim_mid = v->fim_pad = v->fim_rep = v->fim_sep = -1;

	if (span_eq(&model, "llama")) {
		v->type = VOCAB_SPM;
		v->bos = 1;
		v->eos = 2;
		v->unk = 0;
		v->add_space_prefix = true;
		v->add_bos = true;
		snprintf(v->kind, sizeof(v->kind), "llama (SentencePiece)");
	} else if (span_eq(&model, "gpt2") || span_eq(&model, "gemma4")) {
		bool gemma4 = span_eq(&model, "gemma4");

		if (gemma4) /* llama.cpp: a gemma4 model is the gemma4 pre-tokenizer */
			pre = (struct gguf_str){ "gemma4", 6 };
		v->type = VOCAB_BPE;
		v->bos = v->eos = gemma4 ? -1 : 11;
		v->pre = pretok_find(pre.p, pre.n);
		if (!v->pre)
			return fx_fail(err, FX_E_UNSUPPORTED,
				       "tokenizer.ggml.pre '%.*s' is not supported", (int)pre.n, pre.p);
		v->add_bos = v->pre->add_bos;
		v->ignore_merges = v->pre->ignore_merges;
		snprintf(v->kind, sizeof(v->kind), "%s (%s BPE, pre %.*s)", gemma4 ? "gemma4" : "gpt2",
			 v->pre->raw_utf8 ? "UTF-8" : "byte-level", (int)(pre.n > 40 ? 40 : pre.n),
			 pre.p);
	} else if (span_eq(&model, "bert")) {
		v->type = VOCAB_WPM;
		v->bos = 101; /* [CLS]; llama.cpp reads no cls_token_id */
		snprintf(v->kind, sizeof(v->kind), "bert (WordPiece)");
	} else {
		return fx_fail(err, FX_E_UNSUPPORTED,
			       "tokenizer.ggml.model '%.*s' is not supported (ferrox knows llama, "
			       "gpt2, gemma4, bert)", (int)(model.n > 64 ? 64 : model.n), model.p);
	}
	return get_bool(g, "tokenizer.ggml.add_space_prefix", &v->add_space_prefix, err);
}

/* BertNormalizer options (used by WordPiece): lowercase unless the key
 * says not, strip_accents as lowercase unless its own key says. */
static int load_normalizer(struct vocab *v, const struct gguf_file *g, struct fx_err *err)
{
	const char *key = "tokenizer.ggml.normalizer.strip_accents";
	int rc;

	v->lowercase = true;
	rc = get_bool(g, "tokenizer.ggml.normalizer.lowercase", &v->lowercase, err);

	v->strip_accents = v->lowercase;
	return rc ? rc : get_bool(g, key, &v->strip_accents, err);
}

/* Special-token ids from their keys, then add_bos/add_eos. */
static int load_special_ids(struct vocab *v, const struct gguf_file *g, struct fx_err *err)
{
	const struct { const char *key; fx_token *id; } keys[] = {
		{ "tokenizer.ggml.bos_token_id", &v->bos },
		{ "tokenizer.ggml.eos_token_id", &v->eos },
		{ "tokenizer.ggml.eot_token_id", &v->eot },
		{ "tokenizer.ggml.eom_token_id", &v->eom },
		{ "tokenizer.ggml.unknown_token_id", &v->unk },
		{ "tokenizer.ggml.seperator_token_id", &v->sep },
		{ "tokenizer.ggml.padding_token_id", &v->pad },
		{ "tokenizer.ggml.mask_token_id", &v->mask },
		{ "tokenizer.ggml.fim_pre_token_id", &v->fim_pre },
		{ "tokenizer.ggml.fim_suf_token_id", &v->fim_suf },
		{ "tokenizer.ggml.fim_mid_token_id", &v->fim_mid },
		{ "tokenizer.ggml.fim_pad_token_id", &v->fim_pad },
		{ "tokenizer.ggml.fim_rep_token_id", &v->fim_rep },
		{ "tokenizer.ggml.fim_sep_token_id", &v->fim_sep },
		{ "tokenizer.ggml.prefix_token_id", &v->fim_pre }, /* deprecated names */
		{ "tokenizer.ggml.suffix_token_id", &v->fim_suf },
		{ "tokenizer.ggml.middle_token_id", &v->fim_mid },
	};
	int rc;

	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		if (*keys[i].id >= v->n_tokens)
			*keys[i].id = -1; /* a default out of range is disabled */
		if ((rc = get_id(g, keys[i].key, v->n_tokens, keys[i].id, err)))
			return rc;
	}
	if ((rc = get_bool(g, "tokenizer.ggml.add_bos_token", &v->add_bos, err)) ||
	    (rc = get_bool(g, "tokenizer.ggml.add_eos_token", &v->add_eos, err)) ||
	    (rc = get_bool(g, "tokenizer.ggml.add_sep_token", &v->add_sep, err)))
		return rc;
	if (v->pre && v->pre->force_bos) /* llama.cpp's Gemma 4 workaround */
		v->add_bos = true;
	if (v->type == VOCAB_WPM) /* llama.cpp's WordPiece adds both, whatever the keys say */
		v->add_bos = v->add_sep = true;
	/* llama.cpp asserts when it must add a BOS/EOS it does not have; ferrox
	 * does not add one. */
	v->add_bos = v->add_bos && v->bos >= 0;
	v->add_eos = v->add_eos && v->eos >= 0;
	v->add_sep = v->add_sep && v->sep >= 0;
	return FX_OK;
}

/* The lowest id among the tokens whose text is in the NULL-terminated list,
 * or -1: the first one llama.cpp's walk would meet, were it in id order. */
static fx_token first_of(const struct vocab *v, const char *const *list)
{
	fx_token best = -1;

	for (; *list; list++) {
		fx_token id = find_text(v, *list);

		if (id >= 0 && (best < 0 || id < best))
			best = id;
	}
	return best;
}

/* Token texts llama.cpp recognises (load(): "auto-detect special tokens by
 * text"); each detected token is forced to CONTROL. */
static const char *const eot_texts[] = {
	"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
	"<|end_of_text|>", "<EOT>", "_<EOT>", "[EOT]",
	"<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>",
	"<end_of_utterance>", NULL
};
static const char *const eom_texts[] = { "<|eom_id|>", NULL };
static const char *const fim_pre_texts[] = {
	"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>",
	"<\xef\xbd\x9c" "fim\xe2\x96\x81" "begin\xef\xbd\x9c>", "<PRE>",
	"\xe2\x96\x81<PRE>", "<|code_prefix|>", "<|prefix|>", NULL
};
static const char *const fim_suf_texts[] = {
	"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>",
	"<\xef\xbd\x9c" "fim\xe2\x96\x81hole\xef\xbd\x9c>", "<SUF>",
	"\xe2\x96\x81<SUF>", "<|code_suffix|>", "<|suffix|>", NULL
};
static const char *const fim_mid_texts[] = {
	"<|fim_middle|>", "<fim-middle>", "<fim_middle>",
	"<\xef\xbd\x9c" "fim\xe2\x96\x81" "end\xef\xbd\x9c>", "<MID>",
	"\xe2\x96\x81<MID>", "<|code_middle|>", "<|middle|>", NULL
};
static const char *const fim_pad_texts[] = {
	"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]", NULL
};
static const char *const fim_rep_texts[] = {
	"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>", NULL
};
static const char *const fim_sep_texts[] = { "<|file_sep|>", NULL };
static const char *const eog_texts[] = {
	"<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>",
	"<|calls|>", "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>",
	"_<EOT>", "[EOT]", "[EOS]", "<|end_of_text|>", "<end_of_utterance>", "<eos>",
	"<turn|>", "<|tool_response>",
	"<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>",
	"[e~[", NULL
};

/* Insert id (when in range) into the sorted EOG set (std::set in llama.cpp). */
int vocab_eog_add(struct vocab *v, fx_token id)
{
	int32_t i = 0;
	fx_token *p;

	if (id < 0 || id >= v->n_tokens)
		return FX_OK;
	while (i < v->n_eog && v->eog[i] < id)
		i++;
	if (i < v->n_eog && v->eog[i] == id)
		return FX_OK;
	if (!(p = fx_realloc_array(v->eog, (size_t)v->n_eog + 1, sizeof(*p))))
		return FX_E_NOMEM;
	v->eog = p;
	memmove(p + i + 1, p + i, (size_t)(v->n_eog - i) * sizeof(*p));
	p[i] = id;
	v->n_eog++;
	return FX_OK;
}

/* Remove id from the EOG set, if there. */
static void eog_remove(struct vocab *v, fx_token id)
{
	for (int32_t i = 0; i < v->n_eog; i++)
		if (v->eog[i] == id) {
			memmove(v->eog + i, v->eog + i + 1, (size_t)(v->n_eog - i - 1) * sizeof(*v->eog));
			v->n_eog--;
			return;
		}
}

/* The EOG token whose text is s, or -1. */
static fx_token eog_with_text(const struct vocab *v, const char *s)
{
	for (int32_t i = 0; i < v->n_eog; i++)
		if (text_is(v, v->eog[i], s))
			return v->eog[i];
	return -1;
}

/* EOT, EOM, FIM and EOG detection by text, as llama.cpp's load(). */
static int detect_special(struct vocab *v)
{
	struct { fx_token *id; const char *const *texts; } det[] = {
		{ &v->eot, eot_texts }, { &v->eom, eom_texts },
		{ &v->fim_pre, fim_pre_texts }, { &v->fim_suf, fim_suf_texts },
		{ &v->fim_mid, fim_mid_texts }, { &v->fim_pad, fim_pad_texts },
		{ &v->fim_rep, fim_rep_texts }, { &v->fim_sep, fim_sep_texts },
	};
	static const char *const harmony[] = {
		"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>", NULL
	};
	fx_token end, s;
	int rc;

	for (size_t k = 0; k < sizeof(det) / sizeof(det[0]); k++) {
		fx_token id = first_of(v, det[k].texts);

		if (*det[k].id < 0 && id >= 0) {
			*det[k].id = id;
			v->attr[id] |= ATTR_CONTROL;
		}
	}

	if ((rc = vocab_eog_add(v, v->fim_pad)) || (rc = vocab_eog_add(v, v->fim_rep)) ||
	    (rc = vocab_eog_add(v, v->fim_sep)))
		return rc;
	for (const char *const *t = eog_texts; *t; t++) {
		fx_token id = find_text(v, *t);

		if (id < 0)
			continue;
		if ((rc = vocab_eog_add(v, id)))
			return rc;
		v->attr[id] |= ATTR_CONTROL;
	}
	for (const char *const *t = harmony; *t; t++) /* gpt-oss: always rendered */
		if (find_text(v, *t) >= 0)
			v->attr[find_text(v, *t)] = ATTR_USER_DEFINED;
	if ((rc = vocab_eog_add(v, v->eos)) || (rc = vocab_eog_add(v, v->eot)) || (rc = vocab_eog_add(v, v->eom)))
		return rc;

	/* o200k_harmony / solar-open: "<|end|>" is not EOG there. */
	end = eog_with_text(v, "<|end|>");
	if (end >= 0 && ((eog_with_text(v, "<|return|>") >= 0 &&
			  (eog_with_text(v, "<|call|>") >= 0 || eog_with_text(v, "<|calls|>") >= 0)) ||
			 ((eog_with_text(v, "<|call|>") >= 0 || eog_with_text(v, "<|calls|>") >= 0) &&
			  eog_with_text(v, "<|flush|>") >= 0))) {
		eog_remove(v, end);
		v->attr[end] = ATTR_USER_DEFINED;
	}
	/* gemma4 / plamo: "</s>" is a normal token there. */
	s = eog_with_text(v, "</s>");
	if (s >= 0 && (eog_with_text(v, "<|tool_response>") >= 0 ||
		       eog_with_text(v, "<|plamo:eos|>") >= 0)) {
		eog_remove(v, s);
		v->attr[s] = ATTR_NORMAL;
	}
	return FX_OK;
}

/* qsort_r order of the special cache: longer text first, then lower id. */
static int cmp_special(const void *a, const void *b, void *ctx)
{
	const struct vocab *v = ctx;
	fx_token x = *(const fx_token *)a, y = *(const fx_token *)b;

	size_t nx = strtab_get(&v->text, x).n, ny = strtab_get(&v->text, y).n;

	if (nx != ny)
		return nx > ny ? -1 : 1;
	return x < y ? -1 : x > y;
}

int trie_add(struct trie_node **trie, int32_t *n, int32_t *cap, const struct span *s, int32_t idx)
{
	int32_t node = 0;

	for (size_t i = 0; i < s->n; i++) {
		uint8_t c = (uint8_t)s->p[i];
		int32_t ch = (*trie)[node].child;

		while (ch >= 0 && (*trie)[ch].byte != c)
			ch = (*trie)[ch].sibling;
		if (ch < 0) {
			if (*n == *cap) {
				struct trie_node *t = fx_realloc_array(*trie, (size_t)*cap * 2,
								       sizeof(*t));
				if (!t)
					return FX_E_NOMEM;
				*trie = t;
				*cap *= 2;
			}
			ch = (*n)++;
			(*trie)[ch] = (struct trie_node){ -1, (*trie)[node].child, -1, c };
			(*trie)[node].child = ch;
		}
		node = ch;
	}
	if ((*trie)[node].special < 0)
		(*trie)[node].special = idx;
	return FX_OK;
}

/* cache_special_tokens: CONTROL, USER_DEFINED and UNKNOWN tokens, longest
 * text first (ties by id: llama.cpp's std::sort leaves them unspecified),
 * and a trie over their texts. */
static int build_specials(struct vocab *v)
{
	int32_t cap = 1024;
	int rc;

	for (fx_token id = 0; id < v->n_tokens; id++)
		if (v->attr[id] & (ATTR_CONTROL | ATTR_USER_DEFINED | ATTR_UNKNOWN))
			v->n_special++;
	if (!(v->special = fx_malloc_array(v->n_special ? v->n_special : 1, sizeof(*v->special))))
		return FX_E_NOMEM;
	v->n_special = 0;
	for (fx_token id = 0; id < v->n_tokens; id++)
		if (v->attr[id] & (ATTR_CONTROL | ATTR_USER_DEFINED | ATTR_UNKNOWN))
			v->special[v->n_special++] = id;
	qsort_r(v->special, v->n_special, sizeof(*v->special), cmp_special, v);

	if (!(v->trie = fx_malloc_array(cap, sizeof(*v->trie))))
		return FX_E_NOMEM;
	v->trie[0] = (struct trie_node){ -1, -1, -1, 0 };
	v->n_trie = 1;
	for (int32_t i = 0; i < v->n_special; i++) {
		struct span t = strtab_get(&v->text, v->special[i]);

		if ((rc = trie_add(&v->trie, &v->n_trie, &cap, &t, i)))
			return rc;
	}
	return FX_OK;
}

/* Lowercased copy of string key (empty when absent), for substring tests. */
static void lower_key(const struct gguf_file *g, const char *key, char *buf, size_t n)
{
	struct gguf_str s = { "", 0 };
	size_t k;

	gguf_get_str(g, key, &s);
	k = s.n < n - 1 ? s.n : n - 1;
	for (size_t i = 0; i < k; i++)
		buf[i] = (char)tolower((unsigned char)s.p[i]);
	buf[k] = 0;
}

static void set_attr(struct vocab *v, const char *text, uint32_t bit, bool on)
{
	fx_token t = find_text(v, text);

	if (t >= 0)
		v->attr[t] = on ? v->attr[t] | bit : v->attr[t] & ~bit;
}

/* Per-token attributes llama.cpp sets by model, pre-tokenizer or
 * architecture name (load(): "Handle per token attributes"): some mask
 * tokens strip the spaces before them, Phi-3's special tokens the spaces
 * after them. (llama.cpp lowercases only the model name.) */
static void model_attrs(struct vocab *v, const struct gguf_file *g)
{
	char name[256], pre[64], arch[64];

	lower_key(g, "general.name", name, sizeof(name));
	{
		struct gguf_str s = { "", 0 };

		gguf_get_str(g, "tokenizer.ggml.pre", &s);
		snprintf(pre, sizeof(pre), "%.*s", (int)(s.n < 63 ? s.n : 63), s.p);
		s = (struct gguf_str){ "", 0 };
		gguf_get_str(g, "general.architecture", &s);
		snprintf(arch, sizeof(arch), "%.*s", (int)(s.n < 63 ? s.n : 63), s.p);
	}
	if (strstr(pre, "jina-v2-de") || strstr(pre, "jina-v2-es") || strstr(pre, "jina-v2-code") ||
	    strstr(arch, "nomic-bert-moe") || strstr(arch, "jina-bert-v3")) {
		set_attr(v, "<mask>", ATTR_LSTRIP, true);
	} else if (strstr(name, "phi-3") || strstr(name, "phi3")) {
		for (int32_t i = 0; i < v->n_special; i++)
			v->attr[v->special[i]] |= ATTR_RSTRIP;
		set_attr(v, "</s>", ATTR_RSTRIP, true);
		set_attr(v, "<unk>", ATTR_RSTRIP, false);
		set_attr(v, "<s>", ATTR_RSTRIP, false);
		set_attr(v, "<|endoftext|>", ATTR_RSTRIP, false);
	} else if (strstr(name, "modern-bert")) {
		set_attr(v, "[MASK]", ATTR_LSTRIP, true);
	}
}

int vocab_load(const struct gguf_file *g, struct vocab **out, struct fx_err *err)
{
	struct vocab *v;
	int rc;

	*out = NULL;
	if (!(v = fx_calloc(1, sizeof(*v))))
		return fx_fail(err, FX_E_NOMEM, "out of memory loading the vocabulary");
	if ((rc = load_kind(v, g, err)) || (rc = load_normalizer(v, g, err)) ||
	    (rc = load_tokens(v, g, err)))
		goto out_free;
	if (v->type == VOCAB_BPE) {
		if ((rc = load_merges(v, g, err)) || (rc = pretok_compile(v, v->pre, err)))
			goto out_free;
		pretok_init_bytemap(v);
	}
	if ((rc = load_special_ids(v, g, err)) || (rc = detect_special(v)) ||
	    (rc = build_specials(v)))
		goto out_free;
	model_attrs(v, g);
	*out = v;
	return FX_OK;

out_free:
	vocab_free(v);
	if (rc == FX_E_NOMEM)
		return fx_fail(err, rc, "out of memory loading the vocabulary");
	return rc;
}

void vocab_free(struct vocab *v)
{
	if (!v)
		return;
	pretok_free(v);
	hftok_free(v->hf);
	fx_free(v->trie);
	fx_free(v->special);
	fx_free(v->eog);
	fx_free(v->merge_map.slot);
	strtab_free(&v->merges);
	fx_free(v->tok_map.slot);
	fx_free(v->attr);
	fx_free(v->score);
	strtab_free(&v->text);
	fx_free(v);
}

bool vocab_is_hf(const struct vocab *v)
{
	return v->type == VOCAB_HF;
}

int32_t vocab_n_tokens(const struct vocab *v)
{
	return v->n_tokens;
}

fx_token vocab_bos(const struct vocab *v)
{
	return v->bos;
}

fx_token vocab_eos(const struct vocab *v)
{
	return v->eos;
}

bool vocab_add_bos(const struct vocab *v)
{
	return v->add_bos;
}

bool vocab_is_eog(const struct vocab *v, fx_token t)
{
	int32_t lo = 0, hi = v->n_eog;

	while (lo < hi) {
		int32_t mid = (lo + hi) / 2;

		if (v->eog[mid] == t)
			return true;
		if (v->eog[mid] < t)
			lo = mid + 1;
		else
			hi = mid;
	}
	return false;
}

const char *vocab_kind(const struct vocab *v)
{
	return v->kind;
}
