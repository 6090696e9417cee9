/* The BPE model of a tokenizer.json: loading its options and merges, and
 * tokenizing one pre-tokenized word. Follows tokenizers/src/models/bpe/
 * model.rs (merge_word, from the merges list) and word.rs (merge_all):
 * merges are (left id, right id) -> (rank, merged id), the lowest rank
 * merges first and, among equal ranks, the leftmost pair.
 */
#include <stdio.h>
#include <string.h>

#include "core/alloc.h"
#include "core/status.h"
#include "tokenizer/hf_impl.h"

/* ---- the pair map ------------------------------------------------------ */

static size_t pair_hash(int32_t a, int32_t b)
{
	uint64_t k = ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;

	k *= 0x9e3779b97f4a7c15ull;
	return (size_t)(k ^ (k >> 31));
}

/* The entry for (a, b), or NULL. */
static const struct hf_pair *pair_find(const struct hftok *h, int32_t a, int32_t b)
{
	size_t i;

	if (!h->pair)
		return NULL;
	for (i = pair_hash(a, b) & h->pair_mask; h->pair[i].left >= 0; i = (i + 1) & h->pair_mask)
		if (h->pair[i].left == a && h->pair[i].right == b)
			return &h->pair[i];
	return NULL;
}

/* Insert or replace: a later duplicate merge wins, as the HashMap that
 * tokenizers collects the merges into. */
static void pair_put(struct hftok *h, int32_t a, int32_t b, int32_t rank, int32_t id)
{
	size_t i = pair_hash(a, b) & h->pair_mask;

	while (h->pair[i].left >= 0 && !(h->pair[i].left == a && h->pair[i].right == b))
		i = (i + 1) & h->pair_mask;
	h->pair[i] = (struct hf_pair){ a, b, rank, id };
}

/* ---- loading ------------------------------------------------------------ */

static fx_token model_id(const struct hftok *h, const char *s, size_t n)
{
	struct span sp = { s, n };

	return strmap_find(&h->model_map, &h->model_text, &sp, 1);
}

/* Merge i as its two halves: "a b" (exactly one space) or ["a", "b"]. */
static int merge_halves(const cJSON *e, int32_t i, struct span *a, struct span *b,
			struct fx_err *err)
{
	if (cJSON_IsString(e)) {
		const char *s = e->valuestring, *sp = strchr(s, ' ');

		if (!sp || strchr(sp + 1, ' '))
			return fx_fail(err, FX_E_FORMAT, "tokenizer.json: merge %d ('%.60s') is not "
				       "two tokens separated by one space", i, s);
		*a = (struct span){ s, (size_t)(sp - s) };
		*b = (struct span){ sp + 1, strlen(sp + 1) };
		return FX_OK;
	}
	if (cJSON_IsArray(e) && cJSON_GetArraySize(e) == 2 &&
	    cJSON_IsString(cJSON_GetArrayItem(e, 0)) && cJSON_IsString(cJSON_GetArrayItem(e, 1))) {
		const char *x = cJSON_GetArrayItem(e, 0)->valuestring;
		const char *y = cJSON_GetArrayItem(e, 1)->valuestring;

		*a = (struct span){ x, strlen(x) };
		*b = (struct span){ y, strlen(y) };
		return FX_OK;
	}
	return fx_fail(err, FX_E_FORMAT, "tokenizer.json: merge %d is neither \"a b\" nor [\"a\", \"b\"]",
		       i);
}

/* The merged token's id: a + b less the continuing-subword prefix of b
 * (tokenizers strips its length unconditionally). */
static int merged_id(const struct hftok *h, const struct span *a, const struct span *b,
		     int32_t i, fx_token *out, struct fx_err *err)
{
	size_t skip = h->prefix ? h->n_prefix : 0, n;
	char small[256], *buf = small;

	if (skip > b->n)
		skip = b->n;
	n = a->n + b->n - skip;
	if (n > sizeof(small) && !(buf = fx_malloc_array(n, 1)))
		return FX_E_NOMEM;
	memcpy(buf, a->p, a->n);
	memcpy(buf + a->n, b->p + skip, b->n - skip);
	*out = model_id(h, buf, n);
	if (*out < 0)
		fx_fail(err, FX_E_FORMAT, "tokenizer.json: merge %d makes '%.*s', which is not in the "
			"vocabulary", i, (int)(n > 60 ? 60 : n), buf);
	if (buf != small)
		fx_free(buf);
	return *out < 0 ? FX_E_FORMAT : FX_OK;
}

static int load_merges(struct hftok *h, const cJSON *merges, struct fx_err *err)
{
	int32_t n = cJSON_GetArraySize(merges), i = 0;
	size_t cap = 16;
	const cJSON *e;
	int rc;

	while (cap / 4 * 3 < (size_t)n)
		cap *= 2;
	if (!(h->pair = fx_malloc_array(cap, sizeof(*h->pair))))
		return FX_E_NOMEM;
	memset(h->pair, 0xff, cap * sizeof(*h->pair));
	h->pair_mask = cap - 1;
	cJSON_ArrayForEach(e, merges) {
		struct span a, b;
		fx_token ia, ib, id;

		if ((rc = merge_halves(e, i, &a, &b, err)))
			return rc;
		ia = model_id(h, a.p, a.n);
		ib = model_id(h, b.p, b.n);
		if (ia < 0 || ib < 0) {
			const struct span *m = ia < 0 ? &a : &b;

			return fx_fail(err, FX_E_FORMAT, "tokenizer.json: merge %d names '%.*s', which is "
				       "not in the vocabulary", i, (int)(m->n > 60 ? 60 : m->n), m->p);
		}
		if ((rc = merged_id(h, &a, &b, i, &id, err)))
			return rc;
		pair_put(h, ia, ib, i, id);
		i++;
	}
	return FX_OK;
}

/* An optional string option into *out (owned copy); JSON null: none. */
static int opt_str(const cJSON *m, const char *key, char **out, size_t *n, struct fx_err *err)
{
	const cJSON *j = cJSON_GetObjectItemCaseSensitive(m, key);

	*out = NULL;
	*n = 0;
	if (!j || cJSON_IsNull(j))
		return FX_OK;
	if (!cJSON_IsString(j))
		return fx_fail(err, FX_E_FORMAT, "tokenizer.json: model.%s is not a string", key);
	*n = strlen(j->valuestring);
	return (*out = fx_strndup(j->valuestring, *n)) ? FX_OK : FX_E_NOMEM;
}

static bool opt_bool(const cJSON *m, const char *key)
{
	return cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(m, key));
}

int hfbpe_load(struct hftok *h, const cJSON *m, struct fx_err *err)
{
	const cJSON *merges = cJSON_GetObjectItemCaseSensitive(m, "merges");
	const cJSON *drop = cJSON_GetObjectItemCaseSensitive(m, "dropout");
	const cJSON *unk = cJSON_GetObjectItemCaseSensitive(m, "unk_token");
	int rc;

	if (drop && !cJSON_IsNull(drop) && !(cJSON_IsNumber(drop) && drop->valuedouble == 0))
		return fx_fail(err, FX_E_UNSUPPORTED, "tokenizer.json: model.dropout (BPE-dropout, "
			       "random) is not supported");
	if ((rc = opt_str(m, "continuing_subword_prefix", &h->prefix, &h->n_prefix, err)) ||
	    (rc = opt_str(m, "end_of_word_suffix", &h->suffix, &h->n_suffix, err)))
		return rc;
	h->byte_fallback = opt_bool(m, "byte_fallback");
	h->ignore_merges = opt_bool(m, "ignore_merges");
	h->fuse_unk = opt_bool(m, "fuse_unk");
	h->unk = -1;
	if (unk && !cJSON_IsNull(unk)) {
		if (!cJSON_IsString(unk))
			return fx_fail(err, FX_E_FORMAT, "tokenizer.json: model.unk_token is not a string");
		h->unk = model_id(h, unk->valuestring, strlen(unk->valuestring));
		if (h->unk < 0)
			return fx_fail(err, FX_E_FORMAT, "tokenizer.json: model.unk_token '%.60s' is not "
				       "in the vocabulary", unk->valuestring);
	}
	for (int b = 0; b < 256; b++) {
		char code[8];

		snprintf(code, sizeof(code), "<0x%02X>", b);
		h->byte_tok[b] = model_id(h, code, 6);
	}
	if (!cJSON_IsArray(merges))
		return fx_fail(err, FX_E_FORMAT, "tokenizer.json: model.merges is missing or not a list");
	return load_merges(h, merges, err);
}

/* ---- one word ------------------------------------------------------------ */

struct bsym {
	int32_t id, prev, next;
	size_t len; /* bytes of the word it covers; 0 once merged away */
};

struct bword {
	struct bsym *s;
	int32_t n, cap;
};

static int bw_add(struct bword *w, int32_t id, size_t len)
{
	if (w->n == w->cap) {
		int32_t cap = w->cap ? 2 * w->cap : 16;
		struct bsym *s = fx_realloc_array(w->s, (size_t)cap, sizeof(*s));

		if (!s)
			return FX_E_NOMEM;
		w->s = s;
		w->cap = cap;
	}
	w->s[w->n] = (struct bsym){ id, w->n - 1, -1, len };
	if (w->n)
		w->s[w->n - 1].next = w->n;
	w->n++;
	return FX_OK;
}

/* Id of prefix? + w[0..n) + suffix?, or -1. */
static fx_token affixed_id(const struct hftok *h, const char *w, size_t n, bool pre, bool suf)
{
	struct span seg[3];
	int k = 0;

	if (pre)
		seg[k++] = (struct span){ h->prefix, h->n_prefix };
	seg[k++] = (struct span){ w, n };
	if (suf)
		seg[k++] = (struct span){ h->suffix, h->n_suffix };
	return strmap_find(&h->model_map, &h->model_text, seg, k);
}

/* One character that is no token: its <0xNN> tokens (of the affixed text,
 * as tokenizers does) when byte_fallback has them all, else unk. */
static int add_unknown(const struct hftok *h, struct bword *w, const char *c, size_t n, bool pre,
		       bool suf, int32_t *unk, size_t *unk_len)
{
	struct span part[3] = { { h->prefix, pre ? h->n_prefix : 0 }, { c, n },
				{ h->suffix, suf ? h->n_suffix : 0 } };
	bool all = h->byte_fallback;
	int rc;

	for (int k = 0; k < 3 && all; k++)
		for (size_t i = 0; i < part[k].n; i++)
			all = all && h->byte_tok[(uint8_t)part[k].p[i]] >= 0;
	if (all) { /* a pending unk stays pending: it lands after these bytes */
		for (int k = 0; k < 3; k++)
			for (size_t i = 0; i < part[k].n; i++)
				if ((rc = bw_add(w, h->byte_tok[(uint8_t)part[k].p[i]], 1)))
					return rc;
		return FX_OK;
	}
	if (h->unk < 0)
		return FX_OK; /* no unk_token: the character is dropped */
	if (*unk >= 0 && h->fuse_unk) {
		*unk_len += n;
		return FX_OK;
	}
	if (*unk >= 0 && (rc = bw_add(w, *unk, *unk_len)))
		return rc;
	*unk = h->unk;
	*unk_len = n;
	return FX_OK;
}

/* merge_word: one symbol per character (affixed), unknowns resolved. */
static int make_word(const struct hftok *h, const char *s, size_t n, struct bword *w)
{
	int32_t unk = -1;
	size_t unk_len = 0, i = 0;
	int rc;

	while (i < n) {
		size_t len = utf8_len((unsigned char)s[i]);
		bool pre, suf;
		fx_token id;

		if (len > n - i)
			len = n - i;
		pre = i > 0 && h->prefix;
		suf = i + len == n && h->suffix;
		id = affixed_id(h, s + i, len, pre, suf);
		if (id >= 0) {
			if (unk >= 0 && (rc = bw_add(w, unk, unk_len)))
				return rc;
			unk = -1;
			if ((rc = bw_add(w, id, len)))
				return rc;
		} else if ((rc = add_unknown(h, w, s + i, len, pre, suf, &unk, &unk_len))) {
			return rc;
		}
		i += len;
	}
	return unk >= 0 ? bw_add(w, unk, unk_len) : FX_OK;
}

/* Queue the merge of s[pos] with its next symbol, if there is one. */
static int queue_pair(const struct hftok *h, const struct bword *w, int32_t pos, struct heap *q)
{
	const struct hf_pair *p;

	if (pos < 0 || w->s[pos].next < 0)
		return FX_OK;
	p = pair_find(h, w->s[pos].id, w->s[w->s[pos].next].id);
	return p ? heap_push(q, (struct bigram){ pos, p->id, (double)p->rank, 0 }) : FX_OK;
}

/* word.rs merge_all (without dropout). */
static int merge_all(const struct hftok *h, struct bword *w)
{
	struct heap q = { 0 };
	int rc = FX_OK;

	for (int32_t i = 0; i + 1 < w->n && !rc; i++)
		rc = queue_pair(h, w, i, &q);
	while (q.n && !rc) {
		struct bigram top = heap_pop(&q); /* left: position, right: merged id */
		struct bsym *l = &w->s[top.left], *r;
		const struct hf_pair *p;

		if (l->len == 0 || l->next < 0)
			continue;
		r = &w->s[l->next];
		p = pair_find(h, l->id, r->id);
		if (!p || p->id != top.right)
			continue; /* an expired entry */
		l->id = top.right;
		l->len += r->len;
		r->len = 0;
		l->next = r->next;
		if (r->next >= 0)
			w->s[r->next].prev = top.left;
		rc = queue_pair(h, w, l->prev, &q);
		if (!rc)
			rc = queue_pair(h, w, top.left, &q);
	}
	fx_free(q.a);
	return rc;
}

int hfbpe_word(const struct hftok *h, const char *s, size_t n, struct tok_out *o)
{
	struct bword w = { 0 };
	int rc;

	if (!n)
		return FX_OK;
	if (h->ignore_merges) {
		fx_token id = model_id(h, s, n);

		if (id >= 0) {
			tok_push(o, id);
			return FX_OK;
		}
	}
	if (!(rc = make_word(h, s, n, &w)) && !(rc = merge_all(h, &w)))
		for (int32_t i = w.n ? 0 : -1; i >= 0; i = w.s[i].next)
			tok_push(o, w.s[i].id);
	fx_free(w.s);
	return rc;
}
