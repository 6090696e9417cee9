/* The WordPiece and Unigram models of a tokenizer.json, and the dispatch
 * of one pre-tokenized word to the model.
 *
 * WordPiece (models/wordpiece/mod.rs): greedy longest match from the
 * left, continuations prefixed ("##"); a word longer than
 * max_input_chars_per_word characters, or one with a part no token
 * covers, is the unk token alone.
 * Unigram (models/unigram/model.rs, encode_optimized): Viterbi over the
 * pieces' log-probabilities; a character no piece starts with costs the
 * lowest score less 10 as unk; neighbouring unks fuse; a result that is
 * no piece becomes its <0xNN> bytes under byte_fallback, else unk.
 */
#include <stdio.h>
#include <string.h>

#include "core/alloc.h"
#include "core/status.h"
#include "tokenizer/hf_impl.h"

static fx_token piece_id(const struct hftok *h, const char *s, size_t n)
{
	struct span sp = { s, n };

	return strmap_find(&h->model_map, &h->model_text, &sp, 1);
}

/* ---- WordPiece ------------------------------------------------------------ */

int hfwp_load(struct hftok *h, const cJSON *m, struct fx_err *err)
{
	const cJSON *unk = cJSON_GetObjectItemCaseSensitive(m, "unk_token");
	const cJSON *pre = cJSON_GetObjectItemCaseSensitive(m, "continuing_subword_prefix");
	const cJSON *max = cJSON_GetObjectItemCaseSensitive(m, "max_input_chars_per_word");

	h->max_chars = cJSON_IsNumber(max) ? max->valueint : 100;
	h->n_prefix = cJSON_IsString(pre) ? strlen(pre->valuestring) : 2;
	if (!(h->prefix = fx_strndup(cJSON_IsString(pre) ? pre->valuestring : "##", h->n_prefix)))
		return FX_E_NOMEM;
	h->unk = cJSON_IsString(unk) ? piece_id(h, unk->valuestring, strlen(unk->valuestring)) : -1;
	if (h->unk < 0)
		return fx_fail(err, FX_E_FORMAT, "tokenizer.json: WordPiece unk_token '%.60s' is not in "
			       "the vocabulary", cJSON_IsString(unk) ? unk->valuestring : "[UNK]");
	return FX_OK;
}

/* Id of prefix + s[0..n), or -1. */
static fx_token prefixed_id(const struct hftok *h, const char *s, size_t n)
{
	struct span seg[2] = { { h->prefix, h->n_prefix }, { s, n } };

	return strmap_find(&h->model_map, &h->model_text, seg, 2);
}

static int wordpiece(const struct hftok *h, const char *s, size_t n, struct tok_out *o)
{
	size_t chars = 0, start = 0, mark = o->n;

	for (size_t i = 0; i < n; i++)
		chars += ((unsigned char)s[i] & 0xc0) != 0x80;
	if (chars > (size_t)(h->max_chars < 0 ? 0 : h->max_chars)) {
		tok_push(o, h->unk);
		return FX_OK;
	}
	while (start < n) {
		size_t end = n;
		fx_token id = -1;

		while (start < end) {
			id = start ? prefixed_id(h, s + start, end - start) : piece_id(h, s, end);
			if (id >= 0)
				break;
			do /* drop the last character */
				end--;
			while (end > start && ((unsigned char)s[end] & 0xc0) == 0x80);
		}
		if (id < 0) { /* a part no token covers: the word is unk */
			o->n = mark;
			tok_push(o, h->unk);
			return FX_OK;
		}
		tok_push(o, id);
		start = end;
	}
	return FX_OK;
}

/* ---- Unigram ------------------------------------------------------------- */

/* The text -> id map (the last of equal pieces wins, as tokenizers'
 * token_to_ids) and the trie over the n pieces. */
static int index_pieces(struct hftok *h, int32_t n)
{
	int32_t cap = 256;
	int rc;

	if ((rc = strmap_init(&h->model_map, (size_t)n)))
		return rc;
	if (!(h->piece_trie = fx_malloc_array((size_t)cap, sizeof(*h->piece_trie))))
		return FX_E_NOMEM;
	h->piece_trie[0] = (struct trie_node){ -1, -1, -1, 0 };
	h->n_piece_trie = 1;
	for (int32_t i = 0; i < n; i++) {
		struct span t = strtab_get(&h->model_text, i);

		strmap_put(&h->model_map, &h->model_text, i, true);
		if (t.n && (rc = trie_add(&h->piece_trie, &h->n_piece_trie, &cap, &t, i)))
			return rc;
	}
	return FX_OK;
}

int hfuni_load(struct hftok *h, const cJSON *m, struct fx_err *err)
{
	const cJSON *vocab = cJSON_GetObjectItemCaseSensitive(m, "vocab");
	const cJSON *unk = cJSON_GetObjectItemCaseSensitive(m, "unk_id"), *e;
	int32_t n = cJSON_GetArraySize(vocab), i = 0;
	struct gguf_str *str;
	double min = 0;
	int rc;

	if (!cJSON_IsArray(vocab) || !n)
		return fx_fail(err, FX_E_FORMAT, "tokenizer.json: Unigram vocab is missing or empty");
	if (!(str = fx_calloc((size_t)n, sizeof(*str))) ||
	    !(h->score = fx_calloc((size_t)n, sizeof(*h->score)))) {
		fx_free(str);
		return FX_E_NOMEM;
	}
	cJSON_ArrayForEach(e, vocab) {
		const cJSON *p = cJSON_GetArrayItem(e, 0), *s = cJSON_GetArrayItem(e, 1);

		if (!cJSON_IsString(p) || !cJSON_IsNumber(s)) {
			fx_free(str);
			return fx_fail(err, FX_E_FORMAT, "tokenizer.json: Unigram vocab entry %d is not "
				       "[piece, score]", i);
		}
		str[i] = (struct gguf_str){ p->valuestring, strlen(p->valuestring) };
		h->score[i] = s->valuedouble;
		min = i == 0 || s->valuedouble < min ? s->valuedouble : min;
		i++;
	}
	h->unk_score = min - 10.0;
	rc = strtab_build(&h->model_text, str, n, false, "tokenizer.json vocab", err);
	fx_free(str);
	if (rc || (rc = index_pieces(h, n)))
		return rc;
	h->unk = -1;
	if (unk && !cJSON_IsNull(unk)) {
		if (!cJSON_IsNumber(unk) || unk->valuedouble < 0 || unk->valuedouble >= n)
			return fx_fail(err, FX_E_FORMAT, "tokenizer.json: Unigram unk_id is outside the "
				       "vocabulary of %d pieces", n);
		h->unk = unk->valueint;
	}
	h->byte_fallback = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(m, "byte_fallback"));
	for (int b = 0; b < 256; b++) {
		char code[8];

		snprintf(code, sizeof(code), "<0x%02X>", b);
		h->byte_tok[b] = piece_id(h, code, 6);
	}
	return FX_OK;
}

/* Best path ending at each byte offset. */
struct node {
	double score;
	size_t start; /* SIZE_MAX: not reached yet */
	fx_token id;
};

static void relax(struct node *to, double score, size_t start, fx_token id)
{
	if (to->start == SIZE_MAX || score > to->score)
		*to = (struct node){ score, start, id };
}

/* Viterbi forward pass over s[0..n) into best[0..n]. */
static int viterbi(const struct hftok *h, const char *s, size_t n, struct node *best)
{
	for (size_t i = 0; i <= n; i++)
		best[i] = (struct node){ 0, SIZE_MAX, -1 };
	best[0].start = 0;
	for (size_t at = 0; at < n;) {
		size_t mb = utf8_len((unsigned char)s[at]);
		int32_t node = 0;
		bool single = false;

		if (mb > n - at)
			mb = n - at;
		for (size_t j = at; j < n; j++) { /* every piece that starts here, shortest first */
			int32_t ch = h->piece_trie[node].child;

			while (ch >= 0 && h->piece_trie[ch].byte != (uint8_t)s[j])
				ch = h->piece_trie[ch].sibling;
			if (ch < 0)
				break;
			node = ch;
			if (h->piece_trie[node].special >= 0) {
				fx_token id = piece_id(h, s + at, j + 1 - at);

				relax(&best[j + 1], h->score[id] + best[at].score, at, id);
				single = single || j + 1 - at == mb;
			}
		}
		if (!single) {
			if (h->unk < 0)
				return FX_E_FORMAT; /* tokenizers: MissingUnkId */
			relax(&best[at + mb], h->unk_score + best[at].score, at, h->unk);
		}
		at += mb;
	}
	return FX_OK;
}

/* One piece of the best path: its id, else its bytes, else unk. */
static int emit_piece(const struct hftok *h, const char *s, size_t n, struct tok_out *o)
{
	fx_token id = piece_id(h, s, n);
	bool all = h->byte_fallback;

	if (id >= 0) {
		tok_push(o, id);
		return FX_OK;
	}
	for (size_t i = 0; i < n && all; i++)
		all = h->byte_tok[(uint8_t)s[i]] >= 0;
	for (size_t i = 0; i < n && all; i++)
		tok_push(o, h->byte_tok[(uint8_t)s[i]]);
	if (all)
		return FX_OK;
	if (h->unk < 0)
		return FX_E_FORMAT;
	tok_push(o, h->unk);
	return FX_OK;
}

static int unigram(const struct hftok *h, const char *s, size_t n, struct tok_out *o)
{
	struct node *best = fx_malloc_array(n + 1, sizeof(*best));
	struct seg { size_t b, e; fx_token id; } *p = fx_malloc_array(n, sizeof(*p));
	size_t k = 0, end = n;
	int rc;

	if (!best || !p) {
		rc = FX_E_NOMEM;
		goto out;
	}
	if ((rc = viterbi(h, s, n, best)))
		goto out;
	while (end > 0) { /* backwards; a run of unks is one piece */
		size_t start = best[end].start;

		if (best[end].id == h->unk && k && p[k - 1].id == h->unk)
			p[k - 1].b = start;
		else
			p[k++] = (struct seg){ start, end, best[end].id };
		end = start;
	}
	while (k-- > 0 && !rc)
		rc = emit_piece(h, s + p[k].b, p[k].e - p[k].b, o);
out:
	fx_free(best);
	fx_free(p);
	return rc;
}

int hftok_word(const struct hftok *h, const char *w, size_t n, struct tok_out *o)
{
	if (!n)
		return FX_OK;
	switch (h->model) {
	case HFM_WORDPIECE:
		return wordpiece(h, w, n, o);
	case HFM_UNIGRAM:
		return unigram(h, w, n, o);
	default:
		return hfbpe_word(h, w, n, o);
	}
}
