/* Loading a Hugging Face tokenizer directory: tokenizer.json (the
 * serialization of tokenizers/src/tokenizer/serialization.rs: model,
 * added_tokens, normalizer, pre_tokenizer, post_processor, decoder) and
 * around it tokenizer_config.json / special_tokens_map.json (bos, eos) and
 * generation_config.json (eos_token_id: every one ends generation).
 * Without tokenizer.json, vocab.json + merges.txt (hf_legacy.c), else
 * SentencePiece's tokenizer.model (hf_spm.c), each turned into the tree
 * of the tokenizer.json transformers would build.
 *
 * Whether BOS / EOS are added is tokenizer.json's post-processor's alone,
 * as in transformers 5.23: PreTrainedTokenizerBase._from_pretrained drops
 * tokenizer_config.json's add_bos_token / add_eos_token when a
 * tokenizer.json is there, so TokenizersBackend.update_post_processor only
 * runs for a null post-processor, with both flags false (no specials);
 * per-model classes (LlamaTokenizer, GemmaTokenizer, Qwen2Tokenizer) take
 * the post-processor from tokenizer.json too. Those classes rebuild the
 * model options, normalizer, pre-tokenizer and decoder from their own
 * code: apply_class rewrites the tree so (hf_class.c), or refuses a
 * rebuilding class ferrox does not reproduce.
 * Without tokenizer.json the flags apply (hf_legacy.c). Checked by
 * tests/test_hf_tokenizer_config.py.
 *
 * A component or option value ferrox does not implement is refused with
 * FX_E_UNSUPPORTED naming it, never run differently.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/json.h"
#include "core/status.h"
#include "tokenizer/hf_impl.h"

int sbuf_reserve(struct sbuf *b, size_t n)
{
	if (b->n + n > b->cap) {
		size_t cap = b->cap ? b->cap : 64;
		char *p;

		while (cap < b->n + n)
			cap *= 2;
		if (!(p = fx_realloc_array(b->p, cap, 1)))
			return FX_E_NOMEM;
		b->p = p;
		b->cap = cap;
	}
	return FX_OK;
}

int sbuf_put(struct sbuf *b, const char *s, size_t n)
{
	int rc = sbuf_reserve(b, n);

	if (rc)
		return rc;
	if (n)
		memcpy(b->p + b->n, s, n);
	b->n += n;
	return FX_OK;
}

/* ---- small JSON helpers ------------------------------------------------- */

static const cJSON *item(const cJSON *o, const char *key)
{
	return cJSON_GetObjectItemCaseSensitive(o, key);
}

/* o["type"] as a string, "" when absent. */
static const char *type_of(const cJSON *o)
{
	const cJSON *t = item(o, "type");

	return cJSON_IsString(t) ? t->valuestring : "";
}

/* A boolean option: def when absent. */
static bool get_flag(const cJSON *o, const char *key, bool def)
{
	const cJSON *j = item(o, key);

	return cJSON_IsBool(j) ? cJSON_IsTrue(j) : def;
}

static int unsupported(struct fx_err *err, const char *what, const char *type)
{
	return fx_fail(err, FX_E_UNSUPPORTED, "tokenizer.json: %s '%.60s' is not supported", what,
		       type);
}

/* Rewrite an Oniguruma pattern for PCRE2: \s and \S (outside a class; \s
 * inside one) as Unicode White_Space, which is what Oniguruma means. */
static int onig_to_pcre2(const char *p, size_t n, struct sbuf *out)
{
	bool in_class = false;
	int rc = FX_OK;

	for (size_t i = 0; i < n && !rc; i++) {
		if (p[i] == '\\' && i + 1 < n) {
			char c = p[++i];

			if (c == 's')
				rc = in_class ? sbuf_put(out, PRETOK_WS, strlen(PRETOK_WS))
					      : sbuf_put(out, "[" PRETOK_WS "]", strlen(PRETOK_WS) + 2);
			else if (c == 'S' && !in_class)
				rc = sbuf_put(out, "[^" PRETOK_WS "]", strlen(PRETOK_WS) + 3);
			else if (!(rc = sbuf_put(out, "\\", 1)))
				rc = sbuf_put(out, &c, 1);
			continue;
		}
		if (p[i] == '[' && !in_class) {
			in_class = true;
			rc = sbuf_put(out, p + i, 1);
			if (!rc && i + 1 < n && p[i + 1] == '^')
				rc = sbuf_put(out, p + ++i, 1);
			if (!rc && i + 1 < n && p[i + 1] == ']') /* a leading ] is literal */
				rc = sbuf_put(out, p + ++i, 1);
			continue;
		}
		if (p[i] == ']' && in_class)
			in_class = false;
		rc = sbuf_put(out, p + i, 1);
	}
	return rc ? rc : sbuf_put(out, "", 1);
}

int hftok_regex(struct hftok *h, const char *pattern, size_t n, const char *what,
		pcre2_code **out, struct fx_err *err)
{
	struct sbuf b = { 0 };
	pcre2_compile_context *cc = NULL;
	PCRE2_SIZE eo;
	int ec, rc = FX_OK;

	*out = NULL;
	if ((rc = onig_to_pcre2(pattern, n, &b)) || !(cc = pcre2_compile_context_create(h->re_mem))) {
		rc = FX_E_NOMEM;
		goto out;
	}
	/* Oniguruma's Ruby syntax: ^ and $ are line anchors */
	*out = pcre2_compile((PCRE2_SPTR)b.p, b.n - 1, PCRE2_UTF | PCRE2_UCP | PCRE2_MULTILINE,
			     &ec, &eo, cc);
	if (!*out && ec == PCRE2_ERROR_HEAP_FAILED) {
		rc = FX_E_NOMEM;
	} else if (!*out) {
		PCRE2_UCHAR msg[128];

		pcre2_get_error_message(ec, msg, sizeof(msg));
		rc = fx_fail(err, FX_E_UNSUPPORTED, "tokenizer.json: %s regex '%.60s': PCRE2 rejects "
			     "it at offset %zu: %s", what, pattern, (size_t)eo, (const char *)msg);
	} else {
		pcre2_jit_compile(*out, PCRE2_JIT_COMPLETE); /* optional */
	}
out:
	pcre2_compile_context_free(cc);
	fx_free(b.p);
	return rc;
}

/* {"String": s} or {"Regex": r} into pat. */
static int load_pattern(struct hftok *h, const cJSON *o, const char *what, struct hf_pattern *pat,
			struct fx_err *err)
{
	const cJSON *s = item(o, "String"), *r = item(o, "Regex");

	if (cJSON_IsString(s)) {
		pat->n_lit = strlen(s->valuestring);
		return (pat->lit = fx_strndup(s->valuestring, pat->n_lit)) ? FX_OK : FX_E_NOMEM;
	}
	if (cJSON_IsString(r))
		return hftok_regex(h, r->valuestring, strlen(r->valuestring), what, &pat->re, err);
	return fx_fail(err, FX_E_FORMAT, "tokenizer.json: %s pattern is neither String nor Regex",
		       what);
}

static void pattern_free(struct hf_pattern *p)
{
	fx_free(p->lit);
	pcre2_code_free(p->re);
}

/* A string option copied into *out (owned); FX_E_FORMAT when absent. */
static int get_str(const cJSON *o, const char *key, const char *what, char **out, size_t *n,
		   struct fx_err *err)
{
	const cJSON *j = item(o, key);

	if (!cJSON_IsString(j))
		return fx_fail(err, FX_E_FORMAT, "tokenizer.json: %s has no string '%s'", what, key);
	*n = strlen(j->valuestring);
	return (*out = fx_strndup(j->valuestring, *n)) ? FX_OK : FX_E_NOMEM;
}

/* Metaspace's replacement (one character) and prepend scheme (or the
 * older add_prefix_space). */
static int load_metaspace(const cJSON *o, const char *what, char rep[4], size_t *n_rep,
			  enum hf_prepend *prepend, struct fx_err *err)
{
	const cJSON *r = item(o, "replacement"), *ps = item(o, "prepend_scheme");
	size_t n = cJSON_IsString(r) ? strlen(r->valuestring) : 0;

	if (!n || n > 4 || utf8_len((unsigned char)r->valuestring[0]) != n)
		return fx_fail(err, FX_E_FORMAT, "tokenizer.json: %s Metaspace replacement is not one "
			       "character", what);
	memcpy(rep, r->valuestring, n);
	*n_rep = n;
	if (cJSON_IsString(ps)) {
		if (!strcmp(ps->valuestring, "first"))
			*prepend = HF_PREPEND_FIRST;
		else if (!strcmp(ps->valuestring, "always"))
			*prepend = HF_PREPEND_ALWAYS;
		else if (!strcmp(ps->valuestring, "never"))
			*prepend = HF_PREPEND_NEVER;
		else
			return unsupported(err, "Metaspace prepend_scheme", ps->valuestring);
	} else {
		*prepend = get_flag(o, "add_prefix_space", true) ? HF_PREPEND_ALWAYS : HF_PREPEND_NEVER;
	}
	return FX_OK;
}

/* ---- normalizers -------------------------------------------------------- */

static void norm_fini(struct hf_norm *nm)
{
	for (int i = 0; i < nm->n_item; i++)
		norm_fini(&nm->item[i]);
	fx_free(nm->item);
	pattern_free(&nm->pat);
	fx_free(nm->str);
	fx_free(nm->units);
	fx_free(nm->blob);
}

/* The normalizers of hf_norm.c. */
static int load_norm_unicode(const cJSON *o, const char *t, struct hf_norm *nm, struct fx_err *err)
{
	static const struct { const char *name; enum hf_norm_kind kind; } kinds[] = {
		{ "NFC", HFN_NFC }, { "NFD", HFN_NFD }, { "NFKC", HFN_NFKC }, { "NFKD", HFN_NFKD },
		{ "Lowercase", HFN_LOWERCASE }, { "Strip", HFN_STRIP },
		{ "StripAccents", HFN_STRIP_ACCENTS }, { "BertNormalizer", HFN_BERT },
	};
	const cJSON *sa = item(o, "strip_accents");

	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
		if (!strcmp(t, kinds[i].name))
			nm->kind = kinds[i].kind;
	if (nm->kind == HFN_SEQUENCE) /* none of them */
		return unsupported(err, "normalizer", t);
	nm->left = get_flag(o, "strip_left", true);
	nm->right = get_flag(o, "strip_right", true);
	nm->clean_text = get_flag(o, "clean_text", true);
	nm->chinese = get_flag(o, "handle_chinese_chars", true);
	nm->lowercase = get_flag(o, "lowercase", true);
	/* strip_accents: null follows lowercase, as BERT's uncased models */
	nm->strip_accents = cJSON_IsBool(sa) ? cJSON_IsTrue(sa) : nm->lowercase;
	return FX_OK;
}

static int load_norm(struct hftok *h, const cJSON *o, struct hf_norm *nm, struct fx_err *err)
{
	const char *t = type_of(o);

	if (!strcmp(t, "Sequence")) {
		const cJSON *list = item(o, "normalizers"), *e;
		int rc;

		nm->kind = HFN_SEQUENCE;
		if (!cJSON_IsArray(list))
			return fx_fail(err, FX_E_FORMAT, "tokenizer.json: normalizer Sequence has no list");
		if (!(nm->item = fx_calloc((size_t)cJSON_GetArraySize(list) + 1, sizeof(*nm->item))))
			return FX_E_NOMEM;
		cJSON_ArrayForEach(e, list) {
			rc = load_norm(h, e, &nm->item[nm->n_item++], err);
			if (rc)
				return rc;
		}
		return FX_OK;
	}
	if (!strcmp(t, "Precompiled")) {
		const cJSON *m = item(o, "precompiled_charsmap");

		nm->kind = HFN_PRECOMPILED;
		if (cJSON_IsNull(m) || (cJSON_IsString(m) && !*m->valuestring))
			return FX_OK; /* an empty map changes nothing */
		if (!cJSON_IsString(m))
			return fx_fail(err, FX_E_FORMAT, "tokenizer.json: Precompiled has no "
				       "precompiled_charsmap");
		return hfnorm_precompiled_load(nm, m->valuestring, err);
	}
	if (!strcmp(t, "Prepend")) {
		nm->kind = HFN_PREPEND;
		return get_str(o, "prepend", "normalizer Prepend", &nm->str, &nm->n_str, err);
	}
	if (!strcmp(t, "Replace")) {
		int rc;

		nm->kind = HFN_REPLACE;
		if ((rc = get_str(o, "content", "normalizer Replace", &nm->str, &nm->n_str, err)))
			return rc;
		return load_pattern(h, item(o, "pattern"), "normalizer Replace", &nm->pat, err);
	}
	return load_norm_unicode(o, t, nm, err);
}

/* ---- pre-tokenizers ----------------------------------------------------- */

static void pre_fini(struct hf_pre *p)
{
	for (int i = 0; i < p->n_item; i++)
		pre_fini(&p->item[i]);
	fx_free(p->item);
	pattern_free(&p->pat);
}

static int load_behavior(const cJSON *o, enum hf_behavior *b, struct fx_err *err)
{
	static const char *const names[] = { "Removed", "Isolated", "MergedWithPrevious",
					     "MergedWithNext", "Contiguous" };
	const cJSON *j = item(o, "behavior");

	for (int i = 0; i < 5; i++)
		if (cJSON_IsString(j) && !strcmp(j->valuestring, names[i])) {
			*b = (enum hf_behavior)i;
			return FX_OK;
		}
	return cJSON_IsString(j) ? unsupported(err, "Split behavior", j->valuestring)
				 : fx_fail(err, FX_E_FORMAT, "tokenizer.json: Split has no behavior");
}

/* p as a Split on regex re (Oniguruma syntax). */
static int split_on(struct hftok *h, struct hf_pre *p, const char *re, enum hf_behavior b,
		    bool invert, struct fx_err *err)
{
	p->kind = HFP_SPLIT;
	p->behavior = b;
	p->invert = invert;
	return hftok_regex(h, re, strlen(re), "pre_tokenizer", &p->pat.re, err);
}

/* Character classes of Rust's predicates: \w (Alphabetic, M, Nd, Pc,
 * Join_Control), is_numeric (N), and BERT's punctuation (ASCII punctuation
 * or P). \s is rewritten to White_Space by hftok_regex. */
#define RE_WORD "\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}\\x{200C}\\x{200D}"
#define RE_PUNCT "[\\p{P}\\x21-\\x2F\\x3A-\\x40\\x5B-\\x60\\x7B-\\x7E]"

/* The pre-tokenizers that are Splits on a character class:
 * pre_tokenizers/digits.rs, punctuation.rs, whitespace.rs, bert.rs. */
static int load_pre_split(struct hftok *h, const cJSON *o, const char *t, struct hf_pre *p,
			  struct fx_err *err)
{
	enum hf_behavior b = HFB_ISOLATED;
	int rc;

	if (!strcmp(t, "Digits"))
		return split_on(h, p, get_flag(o, "individual_digits", false) ? "\\p{N}" : "\\p{N}+",
				HFB_ISOLATED, false, err);
	if (!strcmp(t, "Punctuation")) {
		if (item(o, "behavior") && (rc = load_behavior(o, &b, err)))
			return rc;
		return split_on(h, p, RE_PUNCT, b, false, err);
	}
	if (!strcmp(t, "Whitespace"))
		return split_on(h, p, "[" RE_WORD "]+|[^" RE_WORD "\\s]+", HFB_REMOVED, true, err);
	if (!strcmp(t, "WhitespaceSplit"))
		return split_on(h, p, "\\s", HFB_REMOVED, false, err);
	if (!strcmp(t, "BertPreTokenizer")) {
		p->kind = HFP_SEQUENCE;
		if (!(p->item = fx_calloc(2, sizeof(*p->item))))
			return FX_E_NOMEM;
		p->n_item = 2;
		if ((rc = split_on(h, &p->item[0], "\\s", HFB_REMOVED, false, err)))
			return rc;
		return split_on(h, &p->item[1], RE_PUNCT, HFB_ISOLATED, false, err);
	}
	return unsupported(err, "pre_tokenizer", t);
}

static int load_pre(struct hftok *h, const cJSON *o, struct hf_pre *p, struct fx_err *err)
{
	const char *t = type_of(o);
	int rc;

	if (!strcmp(t, "Sequence")) {
		const cJSON *list = item(o, "pretokenizers"), *e;

		p->kind = HFP_SEQUENCE;
		if (!cJSON_IsArray(list))
			return fx_fail(err, FX_E_FORMAT, "tokenizer.json: pre_tokenizer Sequence has no list");
		if (!(p->item = fx_calloc((size_t)cJSON_GetArraySize(list) + 1, sizeof(*p->item))))
			return FX_E_NOMEM;
		cJSON_ArrayForEach(e, list)
			if ((rc = load_pre(h, e, &p->item[p->n_item++], err)))
				return rc;
		return FX_OK;
	}
	if (!strcmp(t, "ByteLevel")) {
		p->kind = HFP_BYTELEVEL;
		p->add_prefix_space = get_flag(o, "add_prefix_space", true);
		p->use_regex = get_flag(o, "use_regex", true);
		return FX_OK;
	}
	if (!strcmp(t, "Split")) {
		p->kind = HFP_SPLIT;
		p->invert = get_flag(o, "invert", false);
		if ((rc = load_behavior(o, &p->behavior, err)))
			return rc;
		return load_pattern(h, item(o, "pattern"), "pre_tokenizer Split", &p->pat, err);
	}
	if (!strcmp(t, "Metaspace")) {
		p->kind = HFP_METASPACE;
		p->split = get_flag(o, "split", true);
		return load_metaspace(o, "pre_tokenizer", p->rep, &p->n_rep, &p->prepend, err);
	}
	return load_pre_split(h, o, t, p, err);
}

/* ---- decoders ----------------------------------------------------------- */

static void dec_fini(struct hf_dec *d)
{
	for (int i = 0; i < d->n_item; i++)
		dec_fini(&d->item[i]);
	fx_free(d->item);
	pattern_free(&d->pat);
	fx_free(d->str);
}

static int load_dec(struct hftok *h, const cJSON *o, struct hf_dec *d, struct fx_err *err)
{
	const char *t = type_of(o);
	int rc;

	if (!strcmp(t, "Sequence")) {
		const cJSON *list = item(o, "decoders"), *e;

		d->kind = HFD_SEQUENCE;
		if (!cJSON_IsArray(list))
			return fx_fail(err, FX_E_FORMAT, "tokenizer.json: decoder Sequence has no list");
		if (!(d->item = fx_calloc((size_t)cJSON_GetArraySize(list) + 1, sizeof(*d->item))))
			return FX_E_NOMEM;
		cJSON_ArrayForEach(e, list)
			if ((rc = load_dec(h, e, &d->item[d->n_item++], err)))
				return rc;
		return FX_OK;
	}
	if (!strcmp(t, "ByteLevel") || !strcmp(t, "ByteFallback") || !strcmp(t, "Fuse")) {
		d->kind = t[4] == 'L' ? HFD_BYTELEVEL : t[4] == 'F' ? HFD_BYTEFALLBACK : HFD_FUSE;
		return FX_OK;
	}
	if (!strcmp(t, "Replace")) {
		d->kind = HFD_REPLACE;
		if ((rc = get_str(o, "content", "decoder Replace", &d->str, &d->n_str, err)))
			return rc;
		return load_pattern(h, item(o, "pattern"), "decoder Replace", &d->pat, err);
	}
	if (!strcmp(t, "Strip")) {
		const cJSON *a = item(o, "start"), *b = item(o, "stop");

		d->kind = HFD_STRIP;
		if ((rc = get_str(o, "content", "decoder Strip", &d->str, &d->n_str, err)))
			return rc;
		if (!cJSON_IsNumber(a) || !cJSON_IsNumber(b) || a->valueint < 0 || b->valueint < 0 ||
		    !d->n_str || utf8_len((unsigned char)d->str[0]) != d->n_str)
			return fx_fail(err, FX_E_FORMAT, "tokenizer.json: decoder Strip needs one "
				       "character and counts start, stop");
		d->start = a->valueint;
		d->stop = b->valueint;
		return FX_OK;
	}
	if (!strcmp(t, "WordPiece")) {
		const cJSON *pre = item(o, "prefix");

		d->kind = HFD_WORDPIECE;
		d->cleanup = get_flag(o, "cleanup", true);
		d->n_str = cJSON_IsString(pre) ? strlen(pre->valuestring) : 2;
		d->str = fx_strndup(cJSON_IsString(pre) ? pre->valuestring : "##", d->n_str);
		return d->str ? FX_OK : FX_E_NOMEM;
	}
	if (!strcmp(t, "Metaspace")) {
		d->kind = HFD_METASPACE;
		return load_metaspace(o, "decoder", d->rep, &d->n_rep, &d->prepend, err);
	}
	return unsupported(err, "decoder", t);
}

/* ---- post-processors ---------------------------------------------------- */

static void post_free(struct hf_post_piece *p, int n)
{
	for (int i = 0; i < n; i++)
		fx_free(p[i].ids);
	fx_free(p);
}

/* One template entry: {"SpecialToken": {"id": name}} resolved through
 * special_tokens, or {"Sequence": {"id": "A"}}. ids NULL for the latter. */
static int template_entry(const cJSON *e, const cJSON *specials, int32_t n_tokens,
			  struct hf_post_piece *out, struct fx_err *err)
{
	const cJSON *st = item(e, "SpecialToken"), *name, *def, *ids, *x;

	if (item(e, "Sequence")) {
		const cJSON *id = item(item(e, "Sequence"), "id");

		if (!cJSON_IsString(id) || strcmp(id->valuestring, "A"))
			return fx_fail(err, FX_E_FORMAT, "tokenizer.json: TemplateProcessing single "
				       "names a sequence other than A");
		return FX_OK;
	}
	name = item(st, "id");
	if (!cJSON_IsString(name))
		return fx_fail(err, FX_E_FORMAT, "tokenizer.json: TemplateProcessing entry is neither "
			       "SpecialToken nor Sequence");
	def = item(specials, name->valuestring);
	ids = item(def, "ids");
	if (!cJSON_IsArray(ids))
		return fx_fail(err, FX_E_FORMAT, "tokenizer.json: TemplateProcessing uses special "
			       "token '%.60s', which its special_tokens do not define",
			       name->valuestring);
	if (!(out->ids = fx_malloc_array((size_t)cJSON_GetArraySize(ids) + 1, sizeof(*out->ids))))
		return FX_E_NOMEM;
	cJSON_ArrayForEach(x, ids) {
		if (!cJSON_IsNumber(x) || x->valuedouble < 0 || x->valuedouble >= n_tokens)
			return fx_fail(err, FX_E_FORMAT, "tokenizer.json: special token '%.60s' of "
				       "TemplateProcessing has an id outside the vocabulary",
				       name->valuestring);
		out->ids[out->n_ids++] = x->valueint;
	}
	return FX_OK;
}

/* Replace the sequence entry of *cur with the template tpl[0..n): the
 * processors of a Sequence wrap each other's output. Takes tpl. */
static int compose(struct hf_post_piece **cur, int *n_cur, struct hf_post_piece *tpl, int n)
{
	struct hf_post_piece *out = fx_calloc((size_t)(*n_cur + n), sizeof(*out));
	int k = 0;

	if (!out) {
		post_free(tpl, n);
		return FX_E_NOMEM;
	}
	for (int i = 0; i < n; i++) {
		if (tpl[i].ids) {
			out[k++] = tpl[i];
			continue;
		}
		for (int j = 0; j < *n_cur; j++) {
			out[k++] = (*cur)[j];
			(*cur)[j].ids = NULL;
		}
	}
	fx_free(tpl);
	post_free(*cur, *n_cur);
	*cur = out;
	*n_cur = k;
	return FX_OK;
}

/* Roberta/Bert: [cls] A [sep] from {"cls": [text, id], "sep": [...]}. */
static int cls_sep(const cJSON *o, int32_t n_tokens, struct hf_post_piece *tpl,
		   struct fx_err *err)
{
	const char *key[2] = { "cls", "sep" };

	for (int i = 0; i < 2; i++) {
		const cJSON *p = item(o, key[i]), *id = cJSON_GetArrayItem(p, 1);
		struct hf_post_piece *t = &tpl[i ? 2 : 0];

		if (!cJSON_IsNumber(id) || id->valuedouble < 0 || id->valuedouble >= n_tokens)
			return fx_fail(err, FX_E_FORMAT, "tokenizer.json: post_processor %s has no "
				       "valid [token, id]", key[i]);
		if (!(t->ids = fx_malloc_array(1, sizeof(*t->ids))))
			return FX_E_NOMEM;
		t->ids[0] = id->valueint;
		t->n_ids = 1;
	}
	return FX_OK;
}

static int load_post(const cJSON *o, int32_t n_tokens, struct hftok *h, struct fx_err *err)
{
	const char *t = type_of(o);
	struct hf_post_piece *tpl;
	const cJSON *e;
	int n = 0, rc;

	if (!strcmp(t, "Sequence")) {
		cJSON_ArrayForEach(e, item(o, "processors"))
			if ((rc = load_post(e, n_tokens, h, err)))
				return rc;
		return FX_OK;
	}
	if (!strcmp(t, "ByteLevel"))
		return FX_OK; /* offsets only */
	if (strcmp(t, "TemplateProcessing") && strcmp(t, "RobertaProcessing") &&
	    strcmp(t, "BertProcessing"))
		return unsupported(err, "post_processor", t);
	if (t[0] != 'T') {
		if (!(tpl = fx_calloc(3, sizeof(*tpl))))
			return FX_E_NOMEM;
		n = 3;
		rc = cls_sep(o, n_tokens, tpl, err);
	} else {
		const cJSON *single = item(o, "single");

		if (!cJSON_IsArray(single))
			return fx_fail(err, FX_E_FORMAT, "tokenizer.json: TemplateProcessing has no single");
		if (!(tpl = fx_calloc((size_t)cJSON_GetArraySize(single) + 1, sizeof(*tpl))))
			return FX_E_NOMEM;
		rc = FX_OK;
		cJSON_ArrayForEach(e, single)
			if (!rc)
				rc = template_entry(e, item(o, "special_tokens"), n_tokens, &tpl[n++], err);
	}
	if (rc) {
		post_free(tpl, n);
		return rc;
	}
	return compose(&h->post, &h->n_post, tpl, n);
}

/* ---- the vocabulary -------------------------------------------------------- */

/* model.vocab {text: id} into h->model_text / model_map (ids past the
 * largest are empty). */
static int load_model_vocab(struct hftok *h, const cJSON *vocab, struct fx_err *err)
{
	struct gguf_str *str;
	int32_t n = 0;
	const cJSON *e;
	int rc;

	if (!cJSON_IsObject(vocab))
		return fx_fail(err, FX_E_FORMAT, "tokenizer.json: model.vocab is missing or not an object");
	cJSON_ArrayForEach(e, vocab) {
		if (!cJSON_IsNumber(e) || e->valuedouble < 0 || e->valuedouble >= (1 << 30) ||
		    e->valuedouble != (double)e->valueint)
			return fx_fail(err, FX_E_FORMAT, "tokenizer.json: vocab token '%.60s' has no "
				       "valid id", e->string);
		if (e->valueint >= n)
			n = e->valueint + 1;
	}
	if (n > cJSON_GetArraySize(vocab) * 2 + 1024)
		return fx_fail(err, FX_E_FORMAT, "tokenizer.json: model.vocab ids reach %d for %d "
			       "tokens", n - 1, cJSON_GetArraySize(vocab));
	if (!(str = fx_calloc((size_t)n + 1, sizeof(*str))))
		return FX_E_NOMEM;
	cJSON_ArrayForEach(e, vocab)
		str[e->valueint] = (struct gguf_str){ e->string, strlen(e->string) };
	rc = strtab_build(&h->model_text, str, n, false, "tokenizer.json vocab", err);
	if (!rc)
		rc = strmap_init(&h->model_map, (size_t)n);
	if (!rc) /* the ids of vocab order, so the last duplicate wins */
		cJSON_ArrayForEach(e, vocab)
			strmap_put(&h->model_map, &h->model_text, e->valueint, true);
	fx_free(str);
	return rc;
}

/* added_tokens into h->added (specials first, as tokenizers orders its
 * matching) and the largest id into *max_id. */
static int load_added(struct hftok *h, const cJSON *list, int32_t n_model, int32_t *max_id,
		      struct fx_err *err)
{
	int32_t n = cJSON_GetArraySize(list), k = 0;
	struct sbuf b = { 0 };
	const cJSON *e;
	int rc = FX_OK;

	*max_id = n_model - 1;
	if (!(h->added = fx_calloc((size_t)n + 1, sizeof(*h->added))))
		return FX_E_NOMEM;
	for (int pass = 0; pass < 2; pass++)
		cJSON_ArrayForEach(e, list) {
			const cJSON *id = item(e, "id"), *c = item(e, "content");
			struct hf_added *a;

			if (get_flag(e, "special", false) != (pass == 0))
				continue;
			if (!cJSON_IsNumber(id) || !cJSON_IsString(c) || id->valuedouble < 0 ||
			    id->valuedouble >= (double)n_model + n) {
				/* through out: what the first pass stored is kept (and freed) */
				rc = fx_fail(err, FX_E_FORMAT, "tokenizer.json: added token '%.60s' has "
					     "id %.0f, outside 0..%d", cJSON_IsString(c) ?
					     c->valuestring : "?", cJSON_IsNumber(id) ?
					     id->valuedouble : -1.0, n_model + n - 1);
				goto out;
			}
			a = &h->added[k++];
			a->id = id->valueint;
			a->special = pass == 0;
			a->normalized = get_flag(e, "normalized", !a->special);
			a->lstrip = get_flag(e, "lstrip", false);
			a->rstrip = get_flag(e, "rstrip", false);
			a->single_word = get_flag(e, "single_word", false);
			a->text = (struct span){ (const char *)b.n, strlen(c->valuestring) };
			if ((rc = sbuf_put(&b, c->valuestring, a->text.n)))
				goto out;
			a->norm = (struct span){ (const char *)b.n, 0 };
			if (a->normalized && (rc = hftok_normalize(h, h->norm, c->valuestring, a->text.n, &b)))
				goto out;
			a->norm.n = b.n - (size_t)a->norm.p;
			if (a->id > *max_id)
				*max_id = a->id;
		}
	h->n_added = k;
out:
	h->added_buf = b.p;
	for (int32_t i = 0; i < k; i++) { /* offsets -> pointers, now the buffer stays */
		h->added[i].text.p = b.p + (size_t)h->added[i].text.p;
		h->added[i].norm.p = b.p + (size_t)h->added[i].norm.p;
	}
	return rc;
}

/* The two tries of added-token contents (empty contents never match). */
static int build_tries(struct hftok *h)
{
	int32_t cap_r = 64, cap_n = 64;
	int rc = FX_OK;

	if (!(h->trie_raw = fx_malloc_array(64, sizeof(*h->trie_raw))) ||
	    !(h->trie_norm = fx_malloc_array(64, sizeof(*h->trie_norm))))
		return FX_E_NOMEM;
	h->trie_raw[0] = h->trie_norm[0] = (struct trie_node){ -1, -1, -1, 0 };
	h->n_trie_raw = h->n_trie_norm = 1;
	for (int32_t i = 0; i < h->n_added && !rc; i++) {
		const struct hf_added *a = &h->added[i];

		if (a->normalized && a->norm.n)
			rc = trie_add(&h->trie_norm, &h->n_trie_norm, &cap_n, &a->norm, i);
		else if (!a->normalized && a->text.n)
			rc = trie_add(&h->trie_raw, &h->n_trie_raw, &cap_r, &a->text, i);
	}
	return rc;
}

/* v->text (added content over the model's), attributes and the map. */
static int build_vocab_text(struct vocab *v, const struct hftok *h, int32_t n, struct fx_err *err)
{
	struct gguf_str *str = fx_calloc((size_t)n + 1, sizeof(*str));
	int rc;

	if (!str || !(v->attr = fx_calloc((size_t)n + 1, sizeof(*v->attr))) ||
	    !(v->score = fx_calloc((size_t)n + 1, sizeof(*v->score)))) {
		fx_free(str);
		return FX_E_NOMEM;
	}
	for (int32_t i = 0; i < n; i++) {
		struct span s = i < h->model_text.n ? strtab_get(&h->model_text, i) : (struct span){ "", 0 };

		str[i] = (struct gguf_str){ s.p, s.n };
		v->attr[i] = ATTR_NORMAL;
	}
	for (int32_t i = 0; i < h->n_added; i++) {
		const struct hf_added *a = &h->added[i];

		/* tokenizers gives a normalized token's text normalized */
		str[a->id] = a->normalized ? (struct gguf_str){ a->norm.p, a->norm.n }
					   : (struct gguf_str){ a->text.p, a->text.n };
		v->attr[a->id] = a->special ? ATTR_CONTROL : ATTR_USER_DEFINED;
	}
	v->n_tokens = n;
	rc = strtab_build(&v->text, str, n, false, "tokenizer.json tokens", err);
	fx_free(str);
	if (!rc)
		rc = strmap_init(&v->tok_map, (size_t)n);
	for (int32_t i = 0; !rc && i < n; i++)
		strmap_put(&v->tok_map, &v->text, i, false);
	return rc;
}

/* The pipeline components and the model from the parsed tokenizer.json. */
static int load_json(struct vocab *v, struct hftok *h, const cJSON *j, struct fx_err *err)
{
	const cJSON *model = item(j, "model"), *o;
	const char *mt = type_of(model);
	int32_t max_id;
	int rc;

	if (!cJSON_IsObject(model))
		return fx_fail(err, FX_E_FORMAT, "tokenizer.json: no model");
	if (!strcmp(mt, "WordPiece"))
		h->model = HFM_WORDPIECE;
	else if (!strcmp(mt, "Unigram"))
		h->model = HFM_UNIGRAM;
	else if (strcmp(mt, "BPE") && !(!*mt && item(model, "merges")))
		return unsupported(err, "model", *mt ? mt : "(untyped)");
	if ((o = item(j, "normalizer")) && !cJSON_IsNull(o)) {
		if (!(h->norm = fx_calloc(1, sizeof(*h->norm))))
			return FX_E_NOMEM;
		if ((rc = load_norm(h, o, h->norm, err)))
			return rc;
	}
	if ((o = item(j, "pre_tokenizer")) && !cJSON_IsNull(o)) {
		if (!(h->pre = fx_calloc(1, sizeof(*h->pre))))
			return FX_E_NOMEM;
		if ((rc = load_pre(h, o, h->pre, err)))
			return rc;
	}
	if ((o = item(j, "decoder")) && !cJSON_IsNull(o)) {
		if (!(h->dec = fx_calloc(1, sizeof(*h->dec))))
			return FX_E_NOMEM;
		if ((rc = load_dec(h, o, h->dec, err)))
			return rc;
	}
	if (h->model == HFM_UNIGRAM)
		rc = hfuni_load(h, model, err);
	else if (!(rc = load_model_vocab(h, item(model, "vocab"), err)))
		rc = h->model == HFM_BPE ? hfbpe_load(h, model, err) : hfwp_load(h, model, err);
	if (rc)
		return rc;
	o = item(j, "added_tokens");
	if (o && !cJSON_IsArray(o) && !cJSON_IsNull(o))
		return fx_fail(err, FX_E_FORMAT, "tokenizer.json: added_tokens is not a list");
	if ((rc = load_added(h, o, h->model_text.n, &max_id, err)) || (rc = build_tries(h)) ||
	    (rc = build_vocab_text(v, h, max_id + 1, err)))
		return rc;
	if ((o = item(j, "post_processor")) && !cJSON_IsNull(o)) {
		if (!(h->post = fx_calloc(1, sizeof(*h->post))))
			return FX_E_NOMEM;
		h->n_post = 1; /* the bare sequence, wrapped by each processor */
		if ((rc = load_post(o, v->n_tokens, h, err)))
			return rc;
	}
	snprintf(v->kind, sizeof(v->kind), "tokenizer.json (%s%s%s)", *mt ? mt : "BPE",
		 h->pre ? ", pre-tokenizer " : "", h->pre ? type_of(item(j, "pre_tokenizer")) : "");
	return FX_OK;
}

void hftok_free(struct hftok *h)
{
	if (!h)
		return;
	if (h->norm)
		norm_fini(h->norm);
	if (h->pre)
		pre_fini(h->pre);
	if (h->dec)
		dec_fini(h->dec);
	fx_free(h->norm);
	fx_free(h->pre);
	fx_free(h->dec);
	post_free(h->post, h->n_post);
	fx_free(h->trie_raw);
	fx_free(h->trie_norm);
	fx_free(h->added);
	fx_free(h->added_buf);
	fx_free(h->pair);
	fx_free(h->score);
	fx_free(h->piece_trie);
	fx_free(h->prefix);
	fx_free(h->suffix);
	fx_free(h->model_map.slot);
	strtab_free(&h->model_text);
	pcre2_code_free(h->re_bytelevel);
	pcre2_code_free(h->re_word);
	pcre2_general_context_free(h->re_mem);
	fx_free(h);
}

/* ---- the files around it --------------------------------------------------- */

/* Does the JSON text hold a \\u0000 escape? cJSON ends its strings there,
 * so such a token would silently lose its tail. */
static bool has_nul_escape(const char *s, size_t n)
{
	for (const char *p = s; (p = memmem(p, n - (size_t)(p - s), "\\u0000", 6)); p += 6) {
		size_t k = 0;

		while (p - k > s && p[-1 - (ptrdiff_t)k] == '\\')
			k++;
		if (k % 2 == 0) /* the backslash is not itself escaped */
			return true;
	}
	return false;
}

int hftok_read_file(const char *dir, const char *name, char **out, size_t *n, struct fx_err *err)
{
	char path[4096];
	FILE *f;
	char *buf = NULL;
	long len = 0;
	int rc = FX_OK;

	*out = NULL;
	*n = 0;
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	if (!(f = fopen(path, "rb"))) {
		if (errno == ENOMEM)
			return FX_E_NOMEM;
		return errno == ENOENT || errno == ENOTDIR ? FX_OK
			: fx_fail(err, FX_E_IO, "%s: %s", path, strerror(errno));
	}
	if (fseek(f, 0, SEEK_END) || (len = ftell(f)) < 0 || fseek(f, 0, SEEK_SET))
		rc = fx_fail(err, FX_E_IO, "%s: cannot read it", path);
	else if (!(buf = fx_malloc_array((size_t)len + 1, 1)))
		rc = FX_E_NOMEM;
	else if (fread(buf, 1, (size_t)len, f) != (size_t)len)
		rc = fx_fail(err, FX_E_IO, "%s: cannot read it", path);
	fclose(f);
	if (rc) {
		fx_free(buf);
		return rc;
	}
	buf[len] = '\0';
	*out = buf;
	*n = (size_t)len;
	return FX_OK;
}

int hftok_read_json(const char *dir, const char *name, cJSON **out, struct fx_err *err)
{
	char *buf;
	size_t len, end = 0;
	int rc;

	*out = NULL;
	if ((rc = hftok_read_file(dir, name, &buf, &len, err)) || !buf)
		return rc;
	if (has_nul_escape(buf, len))
		rc = fx_fail(err, FX_E_UNSUPPORTED, "%s/%s: a string with U+0000 (\\u0000) is not "
			     "supported", dir, name);
	else if ((rc = fx_json_parse(buf, len, out, &end)) == FX_E_FORMAT)
		fx_fail(err, rc, "%s/%s: not valid JSON (near byte %zu)", dir, name, end);
	fx_free(buf);
	return rc;
}

/* The id of token text s: added tokens first, then the model (as
 * tokenizers' token_to_id), or -1. */
static fx_token token_id(const struct vocab *v, const struct hftok *h, const char *s)
{
	size_t n = strlen(s);
	struct span sp = { s, n };

	for (int32_t i = 0; i < h->n_added; i++)
		if (h->added[i].text.n == n && !memcmp(h->added[i].text.p, s, n))
			return h->added[i].id;
	(void)v;
	return strmap_find(&h->model_map, &h->model_text, &sp, 1);
}

/* A token named in tokenizer_config.json / special_tokens_map.json: a
 * string or {"content": string}. */
static fx_token named_token(const struct vocab *v, const cJSON *cfg, const char *key)
{
	const cJSON *t = item(cfg, key);

	if (cJSON_IsObject(t))
		t = item(t, "content");
	return cJSON_IsString(t) ? token_id(v, v->hf, t->valuestring) : -1;
}

/* bos/eos/unk/pad from tokenizer_config.json, else special_tokens_map.json,
 * else defaults (hf_spm.c's resolved names, or NULL); generation_config.json's
 * ids; EOG = eos + generation_config eos ids. */
static int load_dir_specials(struct vocab *v, const char *dir, const cJSON *defaults,
			     struct fx_err *err)
{
	cJSON *cfg = NULL, *map = NULL, *gen = NULL;
	const cJSON *e, *x;
	int rc;

	v->bos = v->eos = v->eot = v->eom = v->unk = v->sep = v->pad = v->mask = -1;
	v->fim_pre = v->fim_suf = v->fim_mid = v->fim_pad = v->fim_rep = v->fim_sep = -1;
	if ((rc = hftok_read_json(dir, "tokenizer_config.json", &cfg, err)) ||
	    (rc = hftok_read_json(dir, "special_tokens_map.json", &map, err)) ||
	    (rc = hftok_read_json(dir, "generation_config.json", &gen, err)))
		goto out;
	for (int k = 0; k < 3; k++) {
		const cJSON *c = k == 2 ? defaults : k ? map : cfg;

		if (v->bos < 0)
			v->bos = named_token(v, c, "bos_token");
		if (v->eos < 0)
			v->eos = named_token(v, c, "eos_token");
		if (v->unk < 0)
			v->unk = named_token(v, c, "unk_token");
		if (v->pad < 0)
			v->pad = named_token(v, c, "pad_token");
	}
	x = item(gen, "bos_token_id");
	if (v->bos < 0 && cJSON_IsNumber(x) && x->valueint >= 0 && x->valueint < v->n_tokens)
		v->bos = x->valueint;
	if ((rc = vocab_eog_add(v, v->eos)))
		goto out;
	x = item(gen, "eos_token_id");
	if (cJSON_IsNumber(x)) {
		if (v->eos < 0 && x->valueint >= 0 && x->valueint < v->n_tokens)
			v->eos = x->valueint;
		rc = vocab_eog_add(v, x->valueint);
	}
	if (!cJSON_IsArray(x))
		x = NULL;
	cJSON_ArrayForEach(e, x) {
		if (!cJSON_IsNumber(e))
			continue;
		if (v->eos < 0 && e->valueint >= 0 && e->valueint < v->n_tokens)
			v->eos = e->valueint;
		if ((rc = vocab_eog_add(v, e->valueint)))
			break;
	}
out:
	cJSON_Delete(cfg);
	cJSON_Delete(map);
	cJSON_Delete(gen);
	return rc;
}

/* add_bos / add_eos as the post-processor does them (tokenizer_config.json's
 * add_bos_token / add_eos_token do not count here: see the file's header). */
static void post_flags(struct vocab *v)
{
	const struct hftok *h = v->hf;

	if (!h->post)
		return;
	const struct hf_post_piece *first = &h->post[0], *last = &h->post[h->n_post - 1];

	v->add_bos = v->bos >= 0 && first->n_ids && first->ids[0] == v->bos;
	v->add_eos = v->eos >= 0 && last->n_ids && last->ids[last->n_ids - 1] == v->eos;
}

/* Regexes every tokenizer may need: GPT-2's (ByteLevel) and one word
 * character as Rust's regex \w (single_word). */
static int compile_fixed(struct hftok *h, struct fx_err *err)
{
	static const char gpt2[] = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|"
				   "\\s+(?!\\S)|\\s+";
	static const char word[] = "[" RE_WORD "]";
	int rc = hftok_regex(h, gpt2, sizeof(gpt2) - 1, "ByteLevel", &h->re_bytelevel, err);

	return rc ? rc : hftok_regex(h, word, sizeof(word) - 1, "word", &h->re_word, err);
}

/* Whether a component of tree o names a ByteLevel type (transformers
 * looks for the text "ByteLevel" in tokenizer.json; the vocabulary is
 * left out here, where such a token text would be a coincidence). */
static bool names_byte_level(const cJSON *o)
{
	const cJSON *e;

	if (cJSON_IsString(o))
		return !strcmp(o->valuestring, "ByteLevel");
	cJSON_ArrayForEach(e, o)
		if (names_byte_level(e))
			return true;
	return false;
}

/* tokenizer.json tree j as the class transformers picks for dir loads it
 * (hf_class.c): unchanged for TokenizersBackend, rebuilt for a class with
 * its own __init__ that ferrox reproduces, refused (naming the class) for
 * any other. FX_E_FORMAT / FX_E_IO from the config files, FX_E_NOMEM. */
static int apply_class(const char *dir, cJSON *j, struct fx_err *err)
{
	cJSON *cfg = NULL, *map = NULL, *mcfg = NULL;
	const char *cls, *hub;
	bool bl;
	int rc;

	if ((rc = hftok_read_json(dir, "tokenizer_config.json", &cfg, err)) ||
	    (rc = hftok_read_json(dir, "special_tokens_map.json", &map, err)) ||
	    (rc = hftok_read_json(dir, "config.json", &mcfg, err)))
		goto out;
	bl = names_byte_level(item(j, "normalizer")) || names_byte_level(item(j, "pre_tokenizer")) ||
	     names_byte_level(item(j, "decoder")) || names_byte_level(item(j, "post_processor"));
	if ((cls = hftok_class_resolve(cfg, mcfg, bl, &hub)))
		rc = hftok_class_apply(j, cls, dir, cfg, map, err);
out:
	cJSON_Delete(cfg);
	cJSON_Delete(map);
	cJSON_Delete(mcfg);
	return rc;
}

int vocab_load_hf(const char *dir, struct vocab **out, struct fx_err *err)
{
	const char *legacy = "tokenizer.json";
	const cJSON *priv;
	struct vocab *v;
	cJSON *j = NULL;
	int rc;

	*out = NULL;
	if (!(rc = hftok_read_json(dir, "tokenizer.json", &j, err)) && !j) {
		legacy = "vocab.json + merges.txt";
		rc = hflegacy_bpe_json(dir, &j, err);
	}
	if (!rc && !j) {
		legacy = "tokenizer.model";
		rc = hfspm_json(dir, &j, err);
	}
	if (rc || !j)
		return rc == FX_E_NOMEM ? fx_fail(err, rc, "out of memory reading %s", legacy) : rc;
	if (!strcmp(legacy, "tokenizer.json")) {
		cJSON_DeleteItemFromObjectCaseSensitive(j, "ferrox"); /* ours alone */
		if ((rc = apply_class(dir, j, err))) {
			cJSON_Delete(j);
			return rc == FX_E_NOMEM ? fx_fail(err, rc, "out of memory reading %s", legacy) : rc;
		}
	}
	/* the private object of hf_spm.c / hf_class.c (kind, resolved special
	 * tokens); a real tokenizer.json's was dropped above */
	priv = strcmp(legacy, "vocab.json + merges.txt") ? item(j, "ferrox") : NULL;
	if (!(v = fx_calloc(1, sizeof(*v))) || !(v->hf = fx_calloc(1, sizeof(*v->hf))) ||
	    !(v->hf->re_mem = pretok_re_context())) {
		rc = FX_E_NOMEM;
		goto out;
	}
	v->type = VOCAB_HF;
	pretok_init_bytemap(v);
	if ((rc = compile_fixed(v->hf, err)) || (rc = load_json(v, v->hf, j, err)) ||
	    (rc = load_dir_specials(v, dir, item(priv, "special_tokens"), err)))
		goto out;
	post_flags(v);
	if (cJSON_IsString(item(priv, "kind")))
		snprintf(v->kind, sizeof(v->kind), "%s", item(priv, "kind")->valuestring);
	else if (cJSON_IsString(item(priv, "class"))) { /* hf_class.c rebuilt the pipeline */
		char k[sizeof(v->kind)];

		memcpy(k, v->kind, sizeof(k));
		/* "tokenizer.json (model, pre-tokenizer T)" -> "tokenizer.json as CLASS (...)" */
		snprintf(v->kind, sizeof(v->kind), "tokenizer.json as %.24s %.50s",
			 item(priv, "class")->valuestring, k + strlen("tokenizer.json "));
	} else if (strcmp(legacy, "tokenizer.json"))
		snprintf(v->kind, sizeof(v->kind), "%s (BPE, pre-tokenizer ByteLevel)", legacy);
	*out = v;
	v = NULL;
out:
	cJSON_Delete(j);
	vocab_free(v);
	if (rc == FX_E_NOMEM)
		return fx_fail(err, rc, "out of memory loading %s", legacy);
	if (rc && err && strcmp(legacy, "tokenizer.json") && !strncmp(err->msg, "tokenizer.json: ", 16)) {
		/* the tree was built from other files: name them */
		char msg[sizeof(err->msg)];

		snprintf(msg, sizeof(msg), "%s", err->msg + 16);
		fx_fail(err, rc, "%s/%s (read as the tokenizer.json transformers builds from it): %s",
			dir, legacy, msg);
	}
	return rc;
}
