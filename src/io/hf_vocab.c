/* tokenizer.json -> llama.cpp's tokenizer.ggml.* keys: what
 * convert_hf_to_gguf.py writes (conversion/base.py get_vocab_base for
 * byte-level BPE, gguf-py's LlamaHfVocab for SentencePiece-style BPE,
 * conversion/bert.py BertModel.set_vocab for WordPiece, SpecialVocab for
 * the special ids and add_* flags), read from the JSON files directly,
 * with no Python tokenizer behind it. Unigram (llama.cpp's t5) is refused:
 * ferrox's GGUF tokenizer has no UGM model to run it.
 *
 * llama.cpp names the pre-tokenizer by hashing a tokenization (chkhsh);
 * here it is recognised from tokenizer.json's pre_tokenizer itself: its
 * Split regexes, ByteLevel(use_regex) and Digits steps become a list of
 * regexes in llama.cpp's spelling, compared with the lists llama.cpp's
 * llm_tokenizer_bpe runs for each name (src/llama-vocab.cpp; the PCRE2
 * versions ferrox runs are in tokenizer/pretok.c, which io cannot see).
 */
#include "io/hf_vocab.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sys/stat.h>

#include "core/alloc.h"
#include "core/json.h"

enum { TT_NORMAL = 1, TT_CONTROL = 3, TT_USER = 4, TT_UNUSED = 5, TT_BYTE = 6 };
enum { HV_MAX_STEPS = 8 };

/* GPT-2's regex: what ByteLevel(use_regex=true) splits by. */
#define HV_GPT2 "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)"
/* tokenizer.json's case-insensitive contractions, as llama.cpp spells them */
#define HV_CONTR_HF "(?i:'s|'t|'re|'ve|'m|'ll|'d)"
#define HV_CONTR "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
/* llama.cpp's regex lists (llm_tokenizer_bpe) for the names ferrox runs;
 * ignore_merges: -1 either, else tokenizer.json's model.ignore_merges. */
static const struct {
	const char *name;
	int ignore_merges;
	const char *re[3];
} hv_pre[] = {
	{ "gpt-2", -1, { HV_GPT2 } },
	{ "smollm", -1, { "\\p{N}", HV_GPT2 } }, /* = starcoder, refact, command-r */
	{ "llama-bpe", 1, { HV_CONTR "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+"
			    "[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+" } },
	{ "dbrx", 0, { HV_CONTR "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+"
		       "[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+" } },
	{ "qwen2", -1, { HV_CONTR "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+"
			 "[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+" } },
	{ "qwen35", -1, { HV_CONTR "|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}"
			  "\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+" } },
};

struct hv {
	struct gguf_file *g;
	const char *dir;
	struct fx_err *err;
	cJSON *tj, *tc, *sm;  /* tokenizer.json, tokenizer_config.json, special_tokens_map.json */
	const cJSON *model;   /* tokenizer.json "model" */
	int32_t n;            /* tokens, holes included */
	struct gguf_str *tok; /* [n] token text (borrowed from the JSON or owned by g) */
	int32_t *type;        /* [n] llama.cpp token types */
	char *steps[HV_MAX_STEPS]; /* pre-tokenizer regexes, llama.cpp spelling (owned) */
	int n_steps;
	bool byte_level;      /* a ByteLevel step was seen */
};

static const cJSON *jget(const cJSON *o, const char *k)
{
	return o ? cJSON_GetObjectItemCaseSensitive(o, k) : NULL;
}

static bool jstr_is(const cJSON *o, const char *k, const char *want)
{
	const cJSON *v = jget(o, k);
	return cJSON_IsString(v) && !strcmp(v->valuestring, want);
}

/* dir/name parsed into *out (NULL when absent and !required). */
static int load_json(struct hv *h, const char *name, bool required, cJSON **out)
{
	char path[4096];
	struct stat st;
	*out = NULL;
	snprintf(path, sizeof(path), "%s/%s", h->dir, name);
	if (stat(path, &st) != 0)
		return required ? fx_fail(h->err, FX_E_IO, "%s: cannot read it", path) : FX_OK;
	if (st.st_size > (1 << 30))
		return fx_fail(h->err, FX_E_FORMAT, "%s: larger than 1 GiB", path);
	FILE *f = fopen(path, "rb");
	if (!f)
		return fx_fail(h->err, FX_E_IO, "%s: cannot open it", path);
	size_t size = (size_t)st.st_size;
	char *text = fx_malloc_array(size + 1, 1);
	size_t got = text ? fread(text, 1, size, f) : 0;
	fclose(f);
	if (!text)
		return fx_fail(h->err, FX_E_NOMEM, "%s: out of memory reading it", path);
	if (got != size) {
		fx_free(text);
		return fx_fail(h->err, FX_E_IO, "%s: short read", path);
	}
	text[size] = 0;
	int rc = fx_json_parse(text, size, out, NULL);
	fx_free(text);
	if (rc == FX_E_NOMEM)
		return fx_fail(h->err, rc, "%s: out of memory parsing it", path);
	if (!*out || !cJSON_IsObject(*out)) {
		cJSON_Delete(*out);
		*out = NULL;
		return fx_fail(h->err, FX_E_FORMAT, "%s: not a JSON object", path);
	}
	return FX_OK;
}

static int nomem(struct hv *h)
{
	return fx_fail(h->err, FX_E_NOMEM, "%s/tokenizer.json: out of memory", h->dir);
}

/* ---- the token table ---------------------------------------------------- */

/* conversion/base.py does_token_look_special */
static bool looks_special(const char *s)
{
	size_t n = strlen(s);
	static const char *const named[] = { "<pad>", "<mask>", "<2mass>", "[@BOS@]" };
	for (size_t i = 0; i < sizeof(named) / sizeof(named[0]); i++)
		if (!strcmp(s, named[i]))
			return true;
	if (n >= 4 && !strncmp(s, "<|", 2) && !strcmp(s + n - 2, "|>"))
		return true;
	/* deepseek-coder's fullwidth bars: "<｜" ... "｜>" */
	return n >= 8 && !strncmp(s, "<\xef\xbd\x9c", 4) && !strcmp(s + n - 4, "\xef\xbd\x9c>");
}

static bool is_byte_token(const struct gguf_str *s)
{
	static const char hex[] = "0123456789ABCDEFabcdef";
	return s->n == 6 && !memcmp(s->p, "<0x", 3) && s->p[5] == '>' && s->p[3] &&
	       strchr(hex, s->p[3]) && s->p[4] && strchr(hex, s->p[4]);
}

/* Bytes of the UTF-8 sequence lead byte c starts (1 for a stray byte). */
static size_t utf8_len(uint8_t c)
{
	return c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 1;
}

static int token_id(struct hv *h, const cJSON *idv, const char *what, int32_t *out)
{
	double d = cJSON_IsNumber(idv) ? idv->valuedouble : -1;
	if (d < 0 || d >= (1 << 24) || d != (double)(int32_t)d)
		return fx_fail(h->err, FX_E_FORMAT, "%s/tokenizer.json: %s has no valid id", h->dir, what);
	*out = (int32_t)d;
	return FX_OK;
}

/* The number of ids: one past the largest in model.vocab and added_tokens,
 * at least config.json's vocab_size. */
static int count_tokens(struct hv *h, const cJSON *cfg)
{
	const cJSON *vocab = jget(h->model, "vocab"), *added = jget(h->tj, "added_tokens"), *e;
	int32_t id = 0, n = 0;
	int rc;
	if (!cJSON_IsObject(vocab))
		return fx_fail(h->err, FX_E_FORMAT, "%s/tokenizer.json: model.vocab is not an object",
			       h->dir);
	cJSON_ArrayForEach(e, vocab) {
		if ((rc = token_id(h, e, e->string, &id)))
			return rc;
		n = id + 1 > n ? id + 1 : n;
	}
	cJSON_ArrayForEach(e, added) {
		if (!cJSON_IsString(jget(e, "content")))
			return fx_fail(h->err, FX_E_FORMAT, "%s/tokenizer.json: an added token has no "
				       "content", h->dir);
		if ((rc = token_id(h, jget(e, "id"), jget(e, "content")->valuestring, &id)))
			return rc;
		n = id + 1 > n ? id + 1 : n;
	}
	const cJSON *vs = jget(cfg, "vocab_size");
	if (cJSON_IsNumber(vs) && vs->valuedouble > n && vs->valuedouble < (1 << 24))
		n = (int32_t)vs->valuedouble;
	h->n = n;
	return FX_OK;
}

/* A user-defined token with U+2581 spelled as a space (base.py: "NOTE:
 * this was added for Gemma"), owned by g. */
static int spaced(struct hv *h, const char *s, struct gguf_str *out)
{
	size_t n = strlen(s), k = 0;
	char *o = gguf_build_alloc(h->g, n + 1);
	if (!o)
		return FX_E_NOMEM;
	for (size_t i = 0; i < n;) {
		if (!strncmp(s + i, "\xe2\x96\x81", 3)) {
			o[k++] = ' ';
			i += 3;
		} else {
			o[k++] = s[i++];
		}
	}
	*out = (struct gguf_str){ o, k };
	return FX_OK;
}

/* tok[] and type[]: model.vocab NORMAL, added tokens CONTROL when special
 * (or looking special) else USER_DEFINED, holes "[PADi]" UNUSED
 * (conversion/base.py get_vocab_base). */
static int fill_tokens(struct hv *h)
{
	const cJSON *e;
	int32_t id;
	if (!(h->tok = fx_calloc((size_t)h->n, sizeof(*h->tok))) ||
	    !(h->type = fx_calloc((size_t)h->n, sizeof(*h->type))))
		return nomem(h);
	cJSON_ArrayForEach(e, jget(h->model, "vocab")) {
		id = (int32_t)e->valuedouble;
		h->tok[id] = (struct gguf_str){ e->string, strlen(e->string) };
		h->type[id] = TT_NORMAL;
	}
	cJSON_ArrayForEach(e, jget(h->tj, "added_tokens")) {
		const char *s = jget(e, "content")->valuestring;
		id = (int32_t)jget(e, "id")->valuedouble;
		if (cJSON_IsTrue(jget(e, "special")) || looks_special(s)) {
			h->tok[id] = (struct gguf_str){ s, strlen(s) };
			h->type[id] = TT_CONTROL;
		} else {
			if (spaced(h, s, &h->tok[id]))
				return nomem(h);
			h->type[id] = TT_USER;
		}
	}
	for (id = 0; id < h->n; id++) {
		if (h->type[id])
			continue;
		char *pad = gguf_build_alloc(h->g, 24);
		if (!pad)
			return nomem(h);
		h->tok[id] = (struct gguf_str){ pad, (size_t)snprintf(pad, 24, "[PAD%d]", (int)id) };
		h->type[id] = TT_UNUSED;
	}
	return FX_OK;
}

/* The id of token text s: added tokens first, then model.vocab; -1. */
static int32_t find_token(const struct hv *h, const char *s)
{
	const cJSON *e;
	cJSON_ArrayForEach(e, jget(h->tj, "added_tokens"))
		if (!strcmp(jget(e, "content")->valuestring, s))
			return (int32_t)jget(e, "id")->valuedouble;
	e = jget(jget(h->model, "vocab"), s);
	return e ? (int32_t)e->valuedouble : -1;
}

/* ---- the pre-tokenizer -------------------------------------------------- */

static int add_step(struct hv *h, const char *re)
{
	if (h->n_steps == HV_MAX_STEPS)
		return fx_fail(h->err, FX_E_UNSUPPORTED, "%s/tokenizer.json: more than %d pre-tokenizer "
			       "steps", h->dir, HV_MAX_STEPS);
	/* (?i:'s|...) -> llama.cpp's spelled-out classes */
	const char *hit = strstr(re, HV_CONTR_HF);
	size_t n = strlen(re) + (hit ? strlen(HV_CONTR) : 0) + 1;
	char *s = fx_malloc_array(n, 1);
	if (!s)
		return nomem(h);
	if (hit)
		snprintf(s, n, "%.*s%s%s", (int)(hit - re), re, HV_CONTR, hit + strlen(HV_CONTR_HF));
	else
		memcpy(s, re, strlen(re) + 1);
	h->steps[h->n_steps++] = s;
	return FX_OK;
}

/* One pre_tokenizer object (a Sequence recursively) as regex steps. */
static int walk_pre(struct hv *h, const cJSON *p)
{
	const cJSON *t = jget(p, "type"), *e;
	const char *type = cJSON_IsString(t) ? t->valuestring : "?";
	int rc;
	if (!strcmp(type, "Sequence")) {
		cJSON_ArrayForEach(e, jget(p, "pretokenizers"))
			if ((rc = walk_pre(h, e)))
				return rc;
		return FX_OK;
	}
	if (!strcmp(type, "ByteLevel")) {
		if (cJSON_IsTrue(jget(p, "add_prefix_space")))
			return fx_fail(h->err, FX_E_UNSUPPORTED, "%s/tokenizer.json: pre-tokenizer "
				       "ByteLevel with add_prefix_space has no llama.cpp name", h->dir);
		h->byte_level = true;
		return cJSON_IsFalse(jget(p, "use_regex")) ? FX_OK : add_step(h, HV_GPT2);
	}
	if (!strcmp(type, "Digits"))
		return add_step(h, cJSON_IsTrue(jget(p, "individual_digits")) ? "\\p{N}" : "\\p{N}+");
	const cJSON *re = jget(jget(p, "pattern"), "Regex");
	if (!strcmp(type, "Split") && cJSON_IsString(re) && jstr_is(p, "behavior", "Isolated") &&
	    !cJSON_IsTrue(jget(p, "invert")))
		return add_step(h, re->valuestring);
	return fx_fail(h->err, FX_E_UNSUPPORTED, "%s/tokenizer.json: pre-tokenizer %s%s%s has no "
		       "llama.cpp name ferrox knows (it maps Split(Regex, Isolated), Digits and "
		       "ByteLevel steps)", h->dir, type, cJSON_IsString(re) ? " " : "",
		       cJSON_IsString(re) ? re->valuestring : "");
}

/* llama.cpp's tokenizer.ggml.pre for the byte-level pre-tokenizer. */
static int pre_name(struct hv *h, const char **out)
{
	int rc;
	if ((rc = walk_pre(h, jget(h->tj, "pre_tokenizer"))))
		return rc;
	if (!h->byte_level)
		return fx_fail(h->err, FX_E_UNSUPPORTED, "%s/tokenizer.json: a BPE without byte "
			       "fallback needs a ByteLevel pre-tokenizer (llama.cpp's gpt2 model)",
			       h->dir);
	int im = cJSON_IsTrue(jget(h->model, "ignore_merges"));
	for (size_t i = 0; i < sizeof(hv_pre) / sizeof(hv_pre[0]); i++) {
		int k = 0;
		while (k < 3 && hv_pre[i].re[k] && k < h->n_steps && !strcmp(hv_pre[i].re[k], h->steps[k]))
			k++;
		if (k == h->n_steps && (k == 3 || !hv_pre[i].re[k]) &&
		    (hv_pre[i].ignore_merges < 0 || hv_pre[i].ignore_merges == im)) {
			*out = hv_pre[i].name;
			return FX_OK;
		}
	}
	char list[1024];
	size_t o = 0;
	list[0] = 0;
	for (int i = 0; i < h->n_steps && o < sizeof(list); i++)
		o += (size_t)snprintf(list + o, sizeof(list) - o, "%s/%s/", i ? " then " : "",
				      h->steps[i]);
	return fx_fail(h->err, FX_E_UNSUPPORTED, "%s/tokenizer.json: pre-tokenizer %s (ignore_merges "
		       "%s) is none of llama.cpp's gpt-2, smollm, llama-bpe, dbrx, qwen2, qwen35",
		       h->dir, h->n_steps ? list : "ByteLevel without regex", im ? "true" : "false");
}

/* ---- keys --------------------------------------------------------------- */

/* model.merges ("a b" strings, or [a, b] pairs in tokenizers >= 0.20). */
static int put_merges(struct hv *h)
{
	const cJSON *m = jget(h->model, "merges"), *e;
	int n = cJSON_GetArraySize(m), i = 0, rc = FX_OK;
	struct gguf_str *s = fx_calloc(n ? (size_t)n : 1, sizeof(*s));
	if (!s)
		return nomem(h);
	cJSON_ArrayForEach(e, m) {
		const cJSON *a = cJSON_GetArrayItem(e, 0), *b = cJSON_GetArrayItem(e, 1);
		if (cJSON_IsString(e)) {
			s[i++] = (struct gguf_str){ e->valuestring, strlen(e->valuestring) };
		} else if (cJSON_IsString(a) && cJSON_IsString(b)) {
			size_t na = strlen(a->valuestring), nb = strlen(b->valuestring);
			char *t = gguf_build_alloc(h->g, na + nb + 2);
			if (!t) {
				rc = nomem(h);
				goto out;
			}
			snprintf(t, na + nb + 2, "%s %s", a->valuestring, b->valuestring);
			s[i++] = (struct gguf_str){ t, na + nb + 1 };
		} else {
			rc = fx_fail(h->err, FX_E_FORMAT, "%s/tokenizer.json: merge %d is neither \"a b\" "
				     "nor [a, b]", h->dir, i);
			goto out;
		}
	}
	if (gguf_build_str_arr(h->g, "tokenizer.ggml.merges", s, (uint64_t)n))
		rc = nomem(h);
out:
	fx_free(s);
	return rc;
}

/* FNV-1a of s[0..n) */
static uint32_t hv_hash(const char *s, size_t n)
{
	uint32_t x = 2166136261u;
	for (size_t i = 0; i < n; i++)
		x = (x ^ (uint8_t)s[i]) * 16777619u;
	return x;
}

/* Open addressing over tok[]: slot -> id + 1 (0 empty); cap a power of 2. */
static int32_t hv_lookup(const struct hv *h, const int32_t *slot, uint32_t cap, const char *s,
			 size_t n)
{
	for (uint32_t i = hv_hash(s, n) & (cap - 1);; i = (i + 1) & (cap - 1)) {
		int32_t id = slot[i] - 1;
		if (id < 0 || (h->tok[id].n == n && !memcmp(h->tok[id].p, s, n)))
			return id;
	}
}

/* The merge's left and right halves: "a b" (split at the first space) or
 * [a, b]. false when it is neither. */
static bool merge_halves(const cJSON *e, struct gguf_str *a, struct gguf_str *b)
{
	const cJSON *x = cJSON_GetArrayItem(e, 0), *y = cJSON_GetArrayItem(e, 1);
	const char *sp = cJSON_IsString(e) ? strchr(e->valuestring, ' ') : NULL;
	if (sp) {
		*a = (struct gguf_str){ e->valuestring, (size_t)(sp - e->valuestring) };
		*b = (struct gguf_str){ sp + 1, strlen(sp + 1) };
		return true;
	}
	if (!cJSON_IsString(x) || !cJSON_IsString(y))
		return false;
	*a = (struct gguf_str){ x->valuestring, strlen(x->valuestring) };
	*b = (struct gguf_str){ y->valuestring, strlen(y->valuestring) };
	return true;
}

/* sc[t] = -(1 + rank of the first merge making t); others keep theirs. */
static int rank_scores(struct hv *h, float *sc)
{
	uint32_t cap = 1;
	while (cap < 2u * (uint32_t)h->n)
		cap <<= 1;
	int32_t *slot = fx_calloc(cap, sizeof(*slot));
	char *buf = NULL;
	size_t buf_n = 0;
	int rank = 0, rc = FX_OK;
	const cJSON *e;
	if (!slot)
		return nomem(h);
	for (int32_t id = 0; id < h->n; id++) {
		const struct gguf_str *t = &h->tok[id];
		uint32_t i = hv_hash(t->p, t->n) & (cap - 1);
		while (slot[i] && !(h->tok[slot[i] - 1].n == t->n &&
				    !memcmp(h->tok[slot[i] - 1].p, t->p, t->n)))
			i = (i + 1) & (cap - 1);
		if (!slot[i]) /* a duplicate text keeps its first id */
			slot[i] = id + 1;
	}
	cJSON_ArrayForEach(e, jget(h->model, "merges")) {
		struct gguf_str a, b;
		if (!merge_halves(e, &a, &b)) {
			rc = fx_fail(h->err, FX_E_FORMAT, "%s/tokenizer.json: merge %d is neither \"a b\" "
				     "nor [a, b]", h->dir, rank);
			break;
		}
		if (a.n + b.n > buf_n) {
			char *nb = fx_realloc_array(buf, a.n + b.n, 2);
			if (!nb) {
				rc = nomem(h);
				break;
			}
			buf = nb;
			buf_n = 2 * (a.n + b.n);
		}
		memcpy(buf, a.p, a.n);
		memcpy(buf + a.n, b.p, b.n);
		int32_t t = hv_lookup(h, slot, cap, buf, a.n + b.n);
		if (t >= 0 && h->type[t] == TT_NORMAL && sc[t] <= -1e9f)
			sc[t] = -(float)(rank + 1);
		rank++;
	}
	fx_free(buf);
	fx_free(slot);
	return rc;
}

/* SentencePiece-style scores, which llama.cpp's SPM tokenizer ranks
 * merges by: a merge result scores -(1 + its merge's rank), so merges
 * happen in tokenizer.json's order; single characters 0, other normal
 * tokens -1e9 (what SentencePiece gives pieces no merge makes), byte
 * tokens 0, control and user-defined -1000 (gguf-py's LlamaHfVocab). */
static int put_scores(struct hv *h)
{
	float *sc = fx_malloc_array((size_t)h->n, sizeof(float));
	int rc;
	if (!sc)
		return nomem(h);
	for (int32_t i = 0; i < h->n; i++) {
		if (h->type[i] == TT_NORMAL && is_byte_token(&h->tok[i]))
			h->type[i] = TT_BYTE;
		sc[i] = h->type[i] == TT_BYTE ? 0.0f : h->type[i] == TT_NORMAL ? -1e9f : -1000.0f;
	}
	if ((rc = rank_scores(h, sc)) == FX_OK) {
		for (int32_t i = 0; i < h->n; i++) /* one code point: never a merge result */
			if (h->type[i] == TT_NORMAL && sc[i] <= -1e9f && h->tok[i].n > 0 &&
			    h->tok[i].n <= 4 && utf8_len((uint8_t)h->tok[i].p[0]) == h->tok[i].n)
				sc[i] = 0.0f;
		if (gguf_build_arr(h->g, "tokenizer.ggml.scores", GGUF_T_F32, sc, (uint64_t)h->n))
			rc = nomem(h);
	}
	fx_free(sc);
	return rc;
}

/* The special token named key ("bos_token": a string or {"content": ...})
 * in tokenizer_config.json, else special_tokens_map.json; NULL. */
static const char *special_text(const struct hv *h, const char *key)
{
	const cJSON *v = jget(h->tc, key);
	if (!v || cJSON_IsNull(v))
		v = jget(h->sm, key);
	if (cJSON_IsObject(v))
		v = jget(v, "content");
	return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* The add_bos / add_eos the post-processor decides, as gguf-py's
 * SpecialVocab._try_load_from_tokenizer_json reads it (each processor of a
 * Sequence in turn): ByteLevel leaves both false unless already set;
 * RobertaProcessing adds both; a TemplateProcessing single of two or more
 * entries adds EOS when it ends with a special token, and BOS when it
 * starts with one that is the bos or cls token (or when
 * tokenizer_config.json names no bos token). -1: left open. */
static void post_flags(const struct hv *h, const cJSON *pp, int *bos, int *eos)
{
	const cJSON *e;
	if (jstr_is(pp, "type", "Sequence")) {
		cJSON_ArrayForEach(e, jget(pp, "processors"))
			post_flags(h, e, bos, eos);
		return;
	}
	if (jstr_is(pp, "type", "ByteLevel")) {
		*bos = *bos < 0 ? 0 : *bos;
		*eos = *eos < 0 ? 0 : *eos;
	} else if (jstr_is(pp, "type", "RobertaProcessing")) {
		*bos = *eos = 1;
	} else if (jstr_is(pp, "type", "TemplateProcessing")) {
		const cJSON *single = jget(pp, "single");
		int n = cJSON_GetArraySize(single);
		const cJSON *first = jget(jget(cJSON_GetArrayItem(single, 0), "SpecialToken"), "id");
		const cJSON *last = jget(cJSON_GetArrayItem(single, n - 1), "SpecialToken");
		if (n > 1 && cJSON_IsString(first)) {
			const char *b = special_text(h, "bos_token"), *c = special_text(h, "cls_token");
			*bos = !b || !strcmp(first->valuestring, b) || (c && !strcmp(first->valuestring, c));
		}
		if (n > 1 && last)
			*eos = 1;
	}
}

static int put_specials(struct hv *h)
{
	static const char *const keys[][2] = {
		{ "bos_token", "tokenizer.ggml.bos_token_id" },
		{ "eos_token", "tokenizer.ggml.eos_token_id" },
		{ "unk_token", "tokenizer.ggml.unknown_token_id" },
		{ "pad_token", "tokenizer.ggml.padding_token_id" },
	};
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		const char *s = special_text(h, keys[i][0]);
		int32_t id = s ? find_token(h, s) : -1;
		if (s && id < 0)
			return fx_fail(h->err, FX_E_FORMAT, "%s/tokenizer_config.json: %s '%s' is not a "
				       "token of tokenizer.json", h->dir, keys[i][0], s);
		if (id >= 0 && gguf_build_u32(h->g, keys[i][1], (uint32_t)id))
			return nomem(h);
	}
	/* the post-processor first; tokenizer_config.json's booleans for what
	 * it leaves open (SpecialVocab keeps the post-processor's on a
	 * conflict), else false */
	const cJSON *ab = jget(h->tc, "add_bos_token"), *ae = jget(h->tc, "add_eos_token");
	int bos = -1, eos = -1;
	post_flags(h, jget(h->tj, "post_processor"), &bos, &eos);
	if (bos < 0)
		bos = cJSON_IsTrue(ab);
	if (eos < 0)
		eos = cJSON_IsTrue(ae);
	if (gguf_build_bool(h->g, "tokenizer.ggml.add_bos_token", bos) ||
	    gguf_build_bool(h->g, "tokenizer.ggml.add_eos_token", eos))
		return nomem(h);
	return FX_OK;
}

/* SentencePiece's dummy prefix: Metaspace prepend_scheme first/always (or
 * add_prefix_space), or a Prepend("▁") normalizer. */
static bool space_prefix(const cJSON *pre, const cJSON *norm)
{
	const cJSON *e;
	if (jstr_is(pre, "type", "Metaspace"))
		return cJSON_IsTrue(jget(pre, "add_prefix_space")) ||
		       jstr_is(pre, "prepend_scheme", "first") || jstr_is(pre, "prepend_scheme", "always");
	if (jstr_is(pre, "type", "Sequence"))
		cJSON_ArrayForEach(e, jget(pre, "pretokenizers"))
			if (space_prefix(e, NULL))
				return true;
	if (jstr_is(norm, "type", "Prepend"))
		return jstr_is(norm, "prepend", "\xe2\x96\x81");
	if (jstr_is(norm, "type", "Sequence"))
		cJSON_ArrayForEach(e, jget(norm, "normalizers"))
			if (space_prefix(NULL, e))
				return true;
	return false;
}

/* A normalizer that spells spaces U+2581 (Replace(" ", "▁"), maybe in a
 * Sequence). */
static bool norm_metaspace(const cJSON *norm)
{
	const cJSON *e;
	if (jstr_is(norm, "type", "Sequence")) {
		cJSON_ArrayForEach(e, jget(norm, "normalizers"))
			if (norm_metaspace(e))
				return true;
		return false;
	}
	return jstr_is(norm, "type", "Replace") && jstr_is(norm, "content", "\xe2\x96\x81");
}

/* The first step of normalizer norm (a Sequence's members too) that
 * llama.cpp's gpt2 / llama vocabularies do not run, or NULL when there is
 * none: they run no normalizer, so only steps whose effect the GGUF keeps
 * otherwise pass: SentencePiece's Prepend("▁") (add_space_prefix) and
 * Replace(" ", "▁") (its own space handling), and NFC, which llama.cpp's
 * converter drops too (Qwen 2, Command-R: input already in NFC tokenizes
 * the same). A Lowercase, say, would be lost: the converted file would
 * tokenize differently, so convert refuses it. */
static const char *norm_lost(const cJSON *norm)
{
	if (!norm || cJSON_IsNull(norm))
		return NULL;
	const cJSON *t = jget(norm, "type"), *e;
	if (!cJSON_IsString(t))
		return "(no type)";
	if (!strcmp(t->valuestring, "Sequence")) {
		cJSON_ArrayForEach(e, jget(norm, "normalizers")) {
			const char *lost = norm_lost(e);
			if (lost)
				return lost;
		}
		return NULL;
	}
	if (!strcmp(t->valuestring, "NFC") ||
	    (!strcmp(t->valuestring, "Prepend") && jstr_is(norm, "prepend", "\xe2\x96\x81")) ||
	    (!strcmp(t->valuestring, "Replace") && jstr_is(norm, "content", "\xe2\x96\x81")))
		return NULL;
	return t->valuestring;
}

/* SentencePiece-style: byte fallback, or spaces become U+2581 (Metaspace
 * pre-tokenizer or a Replace(" ", "▁") normalizer). */
static bool spm_style(const struct hv *h)
{
	const cJSON *pre = jget(h->tj, "pre_tokenizer");
	return cJSON_IsTrue(jget(h->model, "byte_fallback")) || jstr_is(pre, "type", "Metaspace") ||
	       norm_metaspace(jget(h->tj, "normalizer"));
}

/* tokenizer.chat_template: chat_template.jinja, else tokenizer_config.json's. */
static int put_template(struct hv *h)
{
	char path[4096];
	struct stat st;
	snprintf(path, sizeof(path), "%s/chat_template.jinja", h->dir);
	if (stat(path, &st) == 0 && st.st_size < (16 << 20)) {
		FILE *f = fopen(path, "rb");
		char *t = f ? fx_malloc_array((size_t)st.st_size + 1, 1) : NULL;
		size_t got = t ? fread(t, 1, (size_t)st.st_size, f) : 0;
		if (f)
			fclose(f);
		if (f && !t)
			return nomem(h);
		if (!t)
			return fx_fail(h->err, FX_E_IO, "%s: cannot read it", path);
		t[got] = 0;
		int rc = gguf_build_str(h->g, "tokenizer.chat_template", t);
		fx_free(t);
		return rc ? nomem(h) : FX_OK;
	}
	const cJSON *ct = jget(h->tc, "chat_template");
	if (cJSON_IsString(ct) && gguf_build_str(h->g, "tokenizer.chat_template", ct->valuestring))
		return nomem(h);
	return FX_OK;
}

/* ---- WordPiece: llama.cpp's "bert" -------------------------------------- */

/* The pipeline llama.cpp's WordPiece tokenizer (llm_tokenizer_wpm) runs in
 * place of tokenizer.json's: BertNormalizer-style lowercasing / accent
 * stripping (the two keys below), a split on whitespace, punctuation and
 * CJK characters (BertPreTokenizer), "##" continuations. A tokenizer.json
 * with other steps would tokenize differently there, so it is refused,
 * naming the step. */
static int wp_check(struct hv *h)
{
	const cJSON *pre = jget(h->tj, "pre_tokenizer"), *norm = jget(h->tj, "normalizer");
	const cJSON *pfx = jget(h->model, "continuing_subword_prefix");
	const cJSON *pt = jget(pre, "type"), *nt = jget(norm, "type");
	if (pfx && !cJSON_IsNull(pfx) && !(cJSON_IsString(pfx) && !strcmp(pfx->valuestring, "##")))
		return fx_fail(h->err, FX_E_UNSUPPORTED, "%s/tokenizer.json: WordPiece with "
			       "continuing_subword_prefix '%.40s': llama.cpp's bert vocabulary "
			       "knows only \"##\"", h->dir, cJSON_IsString(pfx) ? pfx->valuestring : "?");
	if (!jstr_is(pre, "type", "BertPreTokenizer"))
		return fx_fail(h->err, FX_E_UNSUPPORTED, "%s/tokenizer.json: WordPiece with pre-tokenizer "
			       "%s: llama.cpp's bert vocabulary splits as BertPreTokenizer, and only "
			       "that is converted", h->dir, cJSON_IsString(pt) ? pt->valuestring : "none");
	if (norm && !cJSON_IsNull(norm) && !jstr_is(norm, "type", "BertNormalizer"))
		return fx_fail(h->err, FX_E_UNSUPPORTED, "%s/tokenizer.json: WordPiece with normalizer "
			       "%s: llama.cpp's bert vocabulary normalizes as BertNormalizer (or not at "
			       "all), and only that is converted", h->dir,
			       cJSON_IsString(nt) ? nt->valuestring : "?");
	if (cJSON_IsFalse(jget(norm, "handle_chinese_chars")))
		return fx_fail(h->err, FX_E_UNSUPPORTED, "%s/tokenizer.json: BertNormalizer without "
			       "handle_chinese_chars: llama.cpp's bert vocabulary always splits CJK "
			       "characters", h->dir);
	return FX_OK;
}

/* llama.cpp's phantom-space spelling (conversion/bert.py set_vocab):
 * control tokens as they are, "##x" -> "x", any other token -> "\u2581x".
 * Rewrites h->tok in place (new strings owned by g). */
static int wp_phantom(struct hv *h)
{
	for (int32_t i = 0; i < h->n; i++) {
		struct gguf_str *t = &h->tok[i];
		if (h->type[i] == TT_CONTROL)
			continue;
		if (t->n >= 2 && t->p[0] == '#' && t->p[1] == '#') {
			*t = (struct gguf_str){ t->p + 2, t->n - 2 };
			continue;
		}
		char *o = gguf_build_alloc(h->g, t->n + 3);
		if (!o)
			return nomem(h);
		memcpy(o, "\xe2\x96\x81", 3);
		memcpy(o + 3, t->p, t->n);
		*t = (struct gguf_str){ o, t->n + 3 };
	}
	return FX_OK;
}

/* The id of added token text s (gguf-py's SpecialVocab looks special
 * tokens up among tokenizer.json's added_tokens only); -1. */
static int32_t find_added(const struct hv *h, const char *s)
{
	const cJSON *e;
	cJSON_ArrayForEach(e, jget(h->tj, "added_tokens"))
		if (!strcmp(jget(e, "content")->valuestring, s))
			return (int32_t)jget(e, "id")->valuedouble;
	return -1;
}

/* Special ids and add_* flags as gguf-py's SpecialVocab writes them for a
 * bert vocabulary: bos falls back to cls_token and eos to sep_token;
 * tokenizer_config.json's names (special_tokens_map.json's when absent)
 * found among the added tokens, else config.json's <type>_token_id; a name
 * that is not an added token writes no key (llama.cpp's defaults [CLS]
 * 101, [SEP] 102, ... then apply, as with llama.cpp's converter). The
 * flags only from tokenizer_config.json's add_<type>_token booleans:
 * SpecialVocab reads nothing from BertProcessing, and llama.cpp's
 * WordPiece adds [CLS] ... [SEP] whatever they say. */
static int wp_specials(struct hv *h, const cJSON *cfg)
{
	static const struct {
		const char *type, *fallback, *key;
	} sp[] = {
		{ "bos", "cls", "tokenizer.ggml.bos_token_id" },
		{ "eos", "sep", "tokenizer.ggml.eos_token_id" },
		{ "unk", NULL, "tokenizer.ggml.unknown_token_id" },
		{ "sep", NULL, "tokenizer.ggml.seperator_token_id" }, /* llama.cpp's spelling */
		{ "pad", NULL, "tokenizer.ggml.padding_token_id" },
		{ "cls", NULL, "tokenizer.ggml.cls_token_id" },
		{ "mask", NULL, "tokenizer.ggml.mask_token_id" },
	};
	char k[32];
	for (size_t i = 0; i < sizeof(sp) / sizeof(sp[0]); i++) {
		snprintf(k, sizeof(k), "%s_token", sp[i].type);
		const char *s = special_text(h, k);
		if (!s && sp[i].fallback) {
			snprintf(k, sizeof(k), "%s_token", sp[i].fallback);
			s = special_text(h, k);
		}
		int32_t id = s ? find_added(h, s) : -1;
		snprintf(k, sizeof(k), "%s_token_id", sp[i].type);
		const cJSON *c = jget(cfg, k);
		if (id < 0 && cJSON_IsNumber(c) && c->valuedouble >= 0 && c->valuedouble < h->n &&
		    c->valuedouble == (double)(int32_t)c->valuedouble)
			id = (int32_t)c->valuedouble;
		if (id >= 0 && gguf_build_u32(h->g, sp[i].key, (uint32_t)id))
			return nomem(h);
	}
	static const char *const flags[] = { "bos", "eos", "sep" };
	for (size_t i = 0; i < sizeof(flags) / sizeof(flags[0]); i++) {
		char key[48];
		snprintf(k, sizeof(k), "add_%s_token", flags[i]);
		snprintf(key, sizeof(key), "tokenizer.ggml.add_%s_token", flags[i]);
		const cJSON *b = jget(h->tc, k);
		if (cJSON_IsBool(b) && gguf_build_bool(h->g, key, cJSON_IsTrue(b)))
			return nomem(h);
	}
	return FX_OK;
}

/* A WordPiece tokenizer.json as llama.cpp's "bert" vocabulary
 * (conversion/bert.py BertModel.set_vocab over base.py get_vocab_base,
 * then SpecialVocab): token table and types as for BPE (added special ->
 * CONTROL, other added -> USER_DEFINED, holes [PADi] UNUSED), respelled
 * with phantom spaces; tokenizer.ggml.pre "default": llama.cpp names it by
 * hashing a tokenization (bert-bge, jina-v2-en, ...), which a C reader of
 * the JSON cannot do, and its WordPiece tokenizer reads no pre name;
 * token_type_count from config.json's type_vocab_size (default 1);
 * normalizer.lowercase / strip_accents from BertNormalizer (lowercase
 * false without a normalizer, where llama.cpp's key default would
 * lowercase). */
static int map_wordpiece(struct hv *h, const cJSON *cfg)
{
	int rc;
	if ((rc = wp_check(h)) || (rc = count_tokens(h, cfg)) || (rc = fill_tokens(h)) ||
	    (rc = wp_phantom(h)))
		return rc;
	const cJSON *norm = jget(h->tj, "normalizer"), *tv = jget(cfg, "type_vocab_size");
	const cJSON *lc = jget(norm, "lowercase"), *sa = jget(norm, "strip_accents");
	bool has_norm = norm && !cJSON_IsNull(norm);
	uint32_t n_type = cJSON_IsNumber(tv) && tv->valuedouble >= 1 && tv->valuedouble < 1e6
			  ? (uint32_t)tv->valuedouble : 1;
	if (gguf_build_str(h->g, "tokenizer.ggml.model", "bert") ||
	    gguf_build_str(h->g, "tokenizer.ggml.pre", "default") ||
	    gguf_build_u32(h->g, "tokenizer.ggml.token_type_count", n_type) ||
	    gguf_build_str_arr(h->g, "tokenizer.ggml.tokens", h->tok, (uint64_t)h->n) ||
	    gguf_build_arr(h->g, "tokenizer.ggml.token_type", GGUF_T_I32, h->type, (uint64_t)h->n) ||
	    /* BertNormalizer's lowercase defaults to true */
	    gguf_build_bool(h->g, "tokenizer.ggml.normalizer.lowercase",
			    has_norm && !cJSON_IsFalse(lc)) ||
	    (cJSON_IsBool(sa) &&
	     gguf_build_bool(h->g, "tokenizer.ggml.normalizer.strip_accents", cJSON_IsTrue(sa))))
		return nomem(h);
	return (rc = wp_specials(h, cfg)) ? rc : put_template(h);
}

static int map_keys(struct hv *h, const cJSON *cfg)
{
	int rc;
	const cJSON *mt = jget(h->model, "type");
	if (jstr_is(h->model, "type", "WordPiece"))
		return map_wordpiece(h, cfg);
	if (jstr_is(h->model, "type", "Unigram"))
		return fx_fail(h->err, FX_E_UNSUPPORTED, "%s/tokenizer.json: a Unigram model is not "
			       "converted: llama.cpp writes it as its t5 (UGM) vocabulary, which "
			       "ferrox's GGUF tokenizer does not run (the directory itself "
			       "tokenizes through tokenizer.json)", h->dir);
	if (!jstr_is(h->model, "type", "BPE"))
		return fx_fail(h->err, FX_E_UNSUPPORTED, "%s/tokenizer.json: model type '%s' is not "
			       "mapped to GGUF (ferrox convert writes BPE and WordPiece tokenizers)",
			       h->dir, cJSON_IsString(mt) ? mt->valuestring : "?");
	const char *lost = norm_lost(jget(h->tj, "normalizer"));
	if (lost)
		return fx_fail(h->err, FX_E_UNSUPPORTED, "%s/tokenizer.json: normalizer '%.40s' has no "
			       "place in llama.cpp's BPE vocabularies (they run no normalizer): the "
			       "GGUF would tokenize differently", h->dir, lost);
	bool spm = spm_style(h);
	const char *pre = NULL;
	if ((rc = count_tokens(h, cfg)) || (rc = fill_tokens(h)) || (!spm && (rc = pre_name(h, &pre))))
		return rc;
	if (gguf_build_str(h->g, "tokenizer.ggml.model", spm ? "llama" : "gpt2") ||
	    (pre && gguf_build_str(h->g, "tokenizer.ggml.pre", pre)))
		return nomem(h);
	if (spm && ((rc = put_scores(h)) ||
		    gguf_build_bool(h->g, "tokenizer.ggml.add_space_prefix",
				    space_prefix(jget(h->tj, "pre_tokenizer"), jget(h->tj, "normalizer")))))
		return rc ? rc : nomem(h);
	if (gguf_build_str_arr(h->g, "tokenizer.ggml.tokens", h->tok, (uint64_t)h->n) ||
	    gguf_build_arr(h->g, "tokenizer.ggml.token_type", GGUF_T_I32, h->type, (uint64_t)h->n))
		return nomem(h);
	if ((!spm && (rc = put_merges(h))) || (rc = put_specials(h)))
		return rc;
	return put_template(h);
}

int hf_vocab_map(struct gguf_file *g, const char *dir, const cJSON *cfg, struct fx_err *err)
{
	struct hv h = { .g = g, .dir = dir, .err = err };
	int rc;
	char path[4096];
	struct stat st;
	snprintf(path, sizeof(path), "%s/tokenizer.json", dir);
	if (stat(path, &st) != 0) {
		/* ferrox runs a tokenizer.model folder (tokenizer/hf_spm.c) but
		 * does not write one as GGUF keys: refuse that (convert only)
		 * rather than write a GGUF without its tokenizer */
		snprintf(path, sizeof(path), "%s/tokenizer.model", dir);
		if (stat(path, &st) == 0)
			return fx_fail(err, FX_E_UNSUPPORTED, "%s: a SentencePiece tokenizer.model is "
				       "not converted to GGUF tokenizer keys yet", path);
		return FX_OK;
	}
	if ((rc = load_json(&h, "tokenizer.json", true, &h.tj)) ||
	    (rc = load_json(&h, "tokenizer_config.json", false, &h.tc)) ||
	    (rc = load_json(&h, "special_tokens_map.json", false, &h.sm)))
		goto out;
	h.model = jget(h.tj, "model");
	rc = map_keys(&h, cfg);
out:
	for (int i = 0; i < h.n_steps; i++)
		fx_free(h.steps[i]);
	fx_free(h.tok);
	fx_free(h.type);
	cJSON_Delete(h.tj);
	cJSON_Delete(h.tc);
	cJSON_Delete(h.sm);
	return rc;
}
