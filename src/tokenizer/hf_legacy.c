/* Tokenizer folders without a tokenizer.json: GPT-2-style vocab.json +
 * merges.txt (byte-level BPE).
 *
 * Method: the files are turned into the cJSON tree of the tokenizer.json
 * that transformers 5.23 builds for them (GPT2Tokenizer.__init__ in
 * models/gpt2/tokenization_gpt2.py, then TokenizersBackend's added and
 * special tokens and update_post_processor), and that tree goes through
 * the tokenizer.json loader. One loader, one pipeline: the legacy files
 * cannot drift from the tokenizer.json path, and every option check there
 * applies here too. What the files themselves can get wrong (vocab.json
 * not an object, a merges.txt line that is not "a b" or names a token
 * vocab.json lacks) is checked here first, so the message names the file
 * and line.
 *
 * The tree:
 *   model: BPE {vocab: vocab.json, merges: merges.txt lines (a "#version"
 *     line skipped, as tokenizers' BPE::read_file), no unk, no byte fallback}
 *   pre_tokenizer: ByteLevel {add_prefix_space: tokenizer_config.json's,
 *     default false; use_regex}; decoder: ByteLevel
 *   added_tokens: tokenizer_config.json's added_tokens_decoder, then the
 *     named bos/eos/unk/sep/pad/cls/mask tokens not among them (GPT-2's
 *     defaults: unk, bos, eos "<|endoftext|>"), special, at their vocab.json
 *     id or else appended
 *   post_processor: TemplateProcessing [bos] $A [eos] when add_bos_token /
 *     add_eos_token.
 * A tokenizer_class other than GPT2Tokenizer(Fast) (Roberta, Qwen2, ...:
 * other pre-tokenizers or processors) is FX_E_UNSUPPORTED. When a
 * tokenizer.model sits beside the files and the class is not GPT-2's,
 * transformers reads that instead, and so does ferrox (hf_spm.c).
 *
 * Errors: FX_E_FORMAT naming the file, FX_E_IO, FX_E_UNSUPPORTED,
 * FX_E_NOMEM. Ownership: the tree is the caller's (cJSON_Delete).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/status.h"
#include "tokenizer/hf_impl.h"

static const char *const legacy_special_keys[] = {
	"bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"
};

/* vocab.json: an object of non-negative integer ids. */
static int legacy_check_vocab(const cJSON *vocab, const char *dir, struct fx_err *err)
{
	const cJSON *e;

	if (!cJSON_IsObject(vocab))
		return fx_fail(err, FX_E_FORMAT, "%s/vocab.json: not a JSON object of token -> id", dir);
	cJSON_ArrayForEach(e, vocab)
		if (!cJSON_IsNumber(e) || e->valuedouble < 0 || e->valuedouble >= (1 << 30) ||
		    e->valuedouble != (double)e->valueint)
			return fx_fail(err, FX_E_FORMAT, "%s/vocab.json: token '%.60s' has no valid id",
				       dir, e->string);
	return FX_OK;
}

/* vocab.json's tokens, sorted, for the merges' look-ups (cJSON's are
 * linear). */
struct legacy_keys {
	const char **key; /* [n], borrowed from the vocab object */
	size_t n;
};

static int legacy_cmp(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static int legacy_keys_init(struct legacy_keys *k, const cJSON *vocab)
{
	const cJSON *e;

	k->n = 0;
	if (!(k->key = fx_malloc_array((size_t)cJSON_GetArraySize(vocab) + 1, sizeof(*k->key))))
		return FX_E_NOMEM;
	cJSON_ArrayForEach(e, vocab)
		k->key[k->n++] = e->string;
	qsort(k->key, k->n, sizeof(*k->key), legacy_cmp);
	return FX_OK;
}

static bool legacy_has(const struct legacy_keys *k, const char *s)
{
	return bsearch(&s, k->key, k->n, sizeof(*k->key), legacy_cmp) != NULL;
}

/* One merges.txt line s (NUL-terminated, ours to write; line number ln):
 * "a b", both tokens in vocab, appended to merges. */
static int legacy_merge_line(char *s, const struct legacy_keys *vocab, cJSON *merges,
			     const char *dir, int ln, struct fx_err *err)
{
	char *sp = strchr(s, ' '), joined[512];
	cJSON *str;
	size_t n;
	int bad;

	if (!sp || strchr(sp + 1, ' ') || sp == s || !sp[1])
		return fx_fail(err, FX_E_FORMAT, "%s/merges.txt line %d: '%.60s' is not two tokens "
			       "separated by one space", dir, ln, s);
	*sp = '\0';
	bad = !legacy_has(vocab, s) ? 1 : !legacy_has(vocab, sp + 1) ? 2 : 0;
	if (bad)
		return fx_fail(err, FX_E_FORMAT, "%s/merges.txt line %d: '%.60s' is not in vocab.json",
			       dir, ln, bad == 1 ? s : sp + 1);
	n = strlen(s);
	if (n + strlen(sp + 1) < sizeof(joined)) { /* longer ones: hf_bpe.c checks */
		memcpy(joined, s, n);
		strcpy(joined + n, sp + 1);
		if (!legacy_has(vocab, joined))
			return fx_fail(err, FX_E_FORMAT, "%s/merges.txt line %d: the merge makes '%.60s', "
				       "which is not in vocab.json", dir, ln, joined);
	}
	*sp = ' ';
	if (!(str = cJSON_CreateString(s)))
		return FX_E_NOMEM;
	return cJSON_AddItemToArray(merges, str) ? FX_OK : (cJSON_Delete(str), FX_E_NOMEM);
}

/* merges.txt (text[0..n), ours to write) into the array merges. A NUL
 * byte ends a line early and so fails its check. */
static int legacy_merges(char *text, size_t n, const cJSON *vocab, cJSON *merges,
			 const char *dir, struct fx_err *err)
{
	char *p = text, *end = text + n;
	int ln = 0, rc;
	struct legacy_keys keys;

	if ((rc = legacy_keys_init(&keys, vocab)))
		return rc;

	while (p < end && !rc) {
		char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);

		ln++;
		if (len && p[len - 1] == '\r')
			len--;
		p[len] = '\0'; /* the '\n', the '\r' or the buffer's spare byte */
		if (len < 8 || memcmp(p, "#version", 8)) /* not the "#version" line */
			rc = legacy_merge_line(p, &keys, merges, dir, ln, err);
		p = nl ? nl + 1 : end;
	}
	fx_free(keys.key);
	return rc;
}

const char *hflegacy_content(const cJSON *t)
{
	if (cJSON_IsObject(t))
		t = cJSON_GetObjectItemCaseSensitive(t, "content");
	return cJSON_IsString(t) ? t->valuestring : NULL;
}

int hflegacy_add_token(cJSON *list, int id, const char *content, const cJSON *def)
{
	static const char *const flags[] = { "single_word", "lstrip", "rstrip", "normalized", "special" };
	cJSON *t = cJSON_CreateObject();

	if (!t || !cJSON_AddItemToArray(list, t)) {
		cJSON_Delete(t);
		return FX_E_NOMEM;
	}
	if (!cJSON_AddNumberToObject(t, "id", id) || !cJSON_AddStringToObject(t, "content", content))
		return FX_E_NOMEM;
	for (int k = 0; k < 5; k++) {
		const cJSON *f = cJSON_GetObjectItemCaseSensitive(def, flags[k]);
		bool on = cJSON_IsBool(f) ? cJSON_IsTrue(f) : k == 4; /* default: special only */

		if (!cJSON_AddBoolToObject(t, flags[k], on))
			return FX_E_NOMEM;
	}
	return FX_OK;
}

int hflegacy_added_id(const cJSON *list, const char *content)
{
	const cJSON *e;

	cJSON_ArrayForEach(e, list) {
		const cJSON *c = cJSON_GetObjectItemCaseSensitive(e, "content");

		if (cJSON_IsString(c) && !strcmp(c->valuestring, content))
			return cJSON_GetObjectItemCaseSensitive(e, "id")->valueint;
	}
	return -1;
}

/* The named special token key of cfg (GPT-2's default when cfg lacks the
 * key), or NULL. */
static const char *legacy_special(const cJSON *cfg, const char *key)
{
	const cJSON *t = cJSON_GetObjectItemCaseSensitive(cfg, key);

	if (!t)
		return strcmp(key, "bos_token") && strcmp(key, "eos_token") && strcmp(key, "unk_token")
			? NULL : "<|endoftext|>";
	return hflegacy_content(t);
}

/* added_tokens from tokenizer_config.json (see the header comment). */
static int legacy_added(const cJSON *cfg, const cJSON *vocab, cJSON *list, const char *dir,
			struct fx_err *err)
{
	const cJSON *dec = cJSON_GetObjectItemCaseSensitive(cfg, "added_tokens_decoder"), *e;
	int next = cJSON_GetArraySize(vocab), rc;

	if (!cJSON_IsObject(dec))
		dec = NULL;
	cJSON_ArrayForEach(e, dec) {
		const char *c = hflegacy_content(e);
		char *endp;
		long id = strtol(e->string, &endp, 10);

		if (!c || *endp || endp == e->string || id < 0 || id >= (1 << 30))
			return fx_fail(err, FX_E_FORMAT, "%s/tokenizer_config.json: added_tokens_decoder "
				       "entry '%.20s' is not an id with a content", dir, e->string);
		if ((rc = hflegacy_add_token(list, (int)id, c, e)))
			return rc;
		if (id >= next)
			next = (int)id + 1;
	}
	for (size_t k = 0; k < sizeof(legacy_special_keys) / sizeof(*legacy_special_keys); k++) {
		const char *c = legacy_special(cfg, legacy_special_keys[k]);
		const cJSON *vid;

		if (!c || hflegacy_added_id(list, c) >= 0)
			continue;
		vid = cJSON_GetObjectItemCaseSensitive(vocab, c);
		if ((rc = hflegacy_add_token(list, vid ? vid->valueint : next++, c, NULL)))
			return rc;
	}
	return FX_OK;
}

/* One SpecialToken entry of the template, defined in specials. */
static int legacy_template_token(cJSON *single, cJSON *specials, const char *name, int id)
{
	cJSON *e = cJSON_CreateObject(), *st, *def, *ids, *toks;

	if (!e || !cJSON_AddItemToArray(single, e)) {
		cJSON_Delete(e);
		return FX_E_NOMEM;
	}
	if (!(st = cJSON_AddObjectToObject(e, "SpecialToken")) ||
	    !cJSON_AddStringToObject(st, "id", name) || !cJSON_AddNumberToObject(st, "type_id", 0))
		return FX_E_NOMEM;
	if (cJSON_GetObjectItemCaseSensitive(specials, name))
		return FX_OK;
	if (!(def = cJSON_AddObjectToObject(specials, name)) ||
	    !cJSON_AddStringToObject(def, "id", name) || !(ids = cJSON_AddArrayToObject(def, "ids")) ||
	    !(toks = cJSON_AddArrayToObject(def, "tokens")))
		return FX_E_NOMEM;
	cJSON *n = cJSON_CreateNumber(id), *s = cJSON_CreateString(name);

	if (!cJSON_AddItemToArray(ids, n)) {
		cJSON_Delete(n);
		cJSON_Delete(s);
		return FX_E_NOMEM;
	}
	return cJSON_AddItemToArray(toks, s) ? FX_OK : (cJSON_Delete(s), FX_E_NOMEM);
}

int hflegacy_template(cJSON *j, const char *bos, const char *eos, bool add_bos, bool add_eos)
{
	const cJSON *added = cJSON_GetObjectItemCaseSensitive(j, "added_tokens");
	cJSON *post, *single, *specials, *seq, *a;
	int rc = FX_OK;

	add_bos = add_bos && bos;
	add_eos = add_eos && eos;
	if (!add_bos && !add_eos)
		return FX_OK;
	if (!(post = cJSON_AddObjectToObject(j, "post_processor")) ||
	    !cJSON_AddStringToObject(post, "type", "TemplateProcessing") ||
	    !(single = cJSON_AddArrayToObject(post, "single")) ||
	    !(specials = cJSON_AddObjectToObject(post, "special_tokens")))
		return FX_E_NOMEM;
	if (add_bos && (rc = legacy_template_token(single, specials, bos, hflegacy_added_id(added, bos))))
		return rc;
	if (!(seq = cJSON_CreateObject()) || !cJSON_AddItemToArray(single, seq)) {
		cJSON_Delete(seq);
		return FX_E_NOMEM;
	}
	if (!(a = cJSON_AddObjectToObject(seq, "Sequence")) || !cJSON_AddStringToObject(a, "id", "A") ||
	    !cJSON_AddNumberToObject(a, "type_id", 0))
		return FX_E_NOMEM;
	if (add_eos)
		rc = legacy_template_token(single, specials, eos, hflegacy_added_id(added, eos));
	return rc;
}

/* {"type": type} with flag add_prefix_space, added to j under key. */
static int legacy_bytelevel(cJSON *j, const char *key, bool add_prefix_space)
{
	cJSON *o = cJSON_AddObjectToObject(j, key);

	return o && cJSON_AddStringToObject(o, "type", "ByteLevel") &&
	       cJSON_AddBoolToObject(o, "add_prefix_space", add_prefix_space) &&
	       cJSON_AddBoolToObject(o, "trim_offsets", true) && cJSON_AddBoolToObject(o, "use_regex", true)
	       ? FX_OK : FX_E_NOMEM;
}

/* The tree around vocab (taken) and merges.txt's text. */
static int legacy_tree(cJSON *j, cJSON *vocab, char *mtext, size_t n, const cJSON *cfg,
		       const char *dir, struct fx_err *err)
{
	cJSON *model = cJSON_AddObjectToObject(j, "model"), *merges, *added;
	int rc;

	if (!model || !cJSON_AddStringToObject(model, "type", "BPE") ||
	    !cJSON_AddItemToObject(model, "vocab", vocab)) {
		cJSON_Delete(vocab);
		return FX_E_NOMEM;
	}
	if (!(merges = cJSON_AddArrayToObject(model, "merges")) ||
	    !(added = cJSON_AddArrayToObject(j, "added_tokens")))
		return FX_E_NOMEM;
	if ((rc = legacy_merges(mtext, n, vocab, merges, dir, err)) ||
	    (rc = legacy_added(cfg, vocab, added, dir, err)) ||
	    (rc = legacy_bytelevel(j, "pre_tokenizer",
				   cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(cfg, "add_prefix_space")))) ||
	    (rc = legacy_bytelevel(j, "decoder", true)))
		return rc;
	return hflegacy_template(j, legacy_special(cfg, "bos_token"), legacy_special(cfg, "eos_token"),
				 cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(cfg, "add_bos_token")),
				 cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(cfg, "add_eos_token")));
}

/* Refuse a tokenizer_class whose pipeline is not GPT-2's. */
static int legacy_check_class(const cJSON *cfg, const char *dir, struct fx_err *err)
{
	const cJSON *c = cJSON_GetObjectItemCaseSensitive(cfg, "tokenizer_class");

	if (!cJSON_IsString(c) || !strcmp(c->valuestring, "GPT2Tokenizer") ||
	    !strcmp(c->valuestring, "GPT2TokenizerFast"))
		return FX_OK;
	return fx_fail(err, FX_E_UNSUPPORTED, "%s/tokenizer_config.json: tokenizer_class %.60s from "
		       "vocab.json + merges.txt is not supported (only GPT2Tokenizer's byte-level BPE)",
		       dir, c->valuestring);
}

/* Does transformers read dir's tokenizer.model rather than vocab.json +
 * merges.txt? It reads the class's vocab_file: vocab.json only for
 * GPT2Tokenizer (tokenizer_config.json's tokenizer_class, else
 * config.json's, else config.json's model_type gpt2); tokenizer.model for
 * the others (TokenizersBackend, LlamaTokenizer, ...). FX_E_FORMAT,
 * FX_E_IO, FX_E_NOMEM through hftok_read_json. */
static int legacy_defer_to_spm(const char *dir, const cJSON *cfg, bool *defer, struct fx_err *err)
{
	char path[4200];
	cJSON *mc = NULL;
	const cJSON *c = cJSON_GetObjectItemCaseSensitive(cfg, "tokenizer_class"), *mt;
	FILE *f;
	int rc;

	*defer = false;
	snprintf(path, sizeof(path), "%s/tokenizer.model", dir);
	if (!(f = fopen(path, "rb")))
		return FX_OK;
	fclose(f);
	if ((rc = hftok_read_json(dir, "config.json", &mc, err)))
		return rc;
	if (!cJSON_IsString(c))
		c = cJSON_GetObjectItemCaseSensitive(mc, "tokenizer_class");
	mt = cJSON_GetObjectItemCaseSensitive(mc, "model_type");
	*defer = cJSON_IsString(c) ? strcmp(c->valuestring, "GPT2Tokenizer") &&
				     strcmp(c->valuestring, "GPT2TokenizerFast")
				   : !(cJSON_IsString(mt) && !strcmp(mt->valuestring, "gpt2"));
	cJSON_Delete(mc);
	return FX_OK;
}

int hflegacy_bpe_json(const char *dir, cJSON **out, struct fx_err *err)
{
	cJSON *vocab = NULL, *cfg = NULL, *j = NULL;
	char *mtext = NULL;
	size_t n = 0;
	bool defer;
	int rc;

	*out = NULL;
	if ((rc = hftok_read_json(dir, "vocab.json", &vocab, err)) || !vocab)
		return rc;
	if ((rc = hftok_read_json(dir, "tokenizer_config.json", &cfg, err)) ||
	    (rc = legacy_defer_to_spm(dir, cfg, &defer, err)) || defer)
		goto out; /* deferred: *out NULL, hf_spm.c reads tokenizer.model */
	if ((rc = legacy_check_vocab(vocab, dir, err)) ||
	    (rc = hftok_read_file(dir, "merges.txt", &mtext, &n, err)))
		goto out;
	if (!mtext) {
		rc = fx_fail(err, FX_E_FORMAT, "%s: vocab.json without merges.txt (and no tokenizer.json)",
			     dir);
		goto out;
	}
	if ((rc = legacy_check_class(cfg, dir, err)))
		goto out;
	if (!(j = cJSON_CreateObject())) {
		rc = FX_E_NOMEM;
		goto out;
	}
	rc = legacy_tree(j, vocab, mtext, n, cfg, dir, err);
	vocab = NULL; /* the tree has it */
	if (!rc) {
		*out = j;
		j = NULL;
	}
out:
	cJSON_Delete(j);
	cJSON_Delete(vocab);
	cJSON_Delete(cfg);
	fx_free(mtext);
	return rc;
}
