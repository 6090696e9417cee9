/* Text -> token ids, following llama.cpp's llama_vocab::impl::tokenize
 * (src/llama-vocab.cpp): special-token partition first
 * (tokenizer_st_partition), then SentencePiece (llm_tokenizer_spm_session),
 * BPE (llm_tokenizer_bpe_session) or WordPiece (wpm.c) on each raw-text
 * fragment.
 *
 * Everything allocated here lives for one call, so a vocab is read-only
 * and may tokenize on many threads at once.
 */
#include <string.h>

#include "core/alloc.h"
#include "tokenizer/hf_impl.h"

/* ---- symbols and the bigram queue shared by SPM and BPE -------------- */

struct sym {
	int32_t prev, next; /* neighbours in the chain, -1 at the ends */
	const char *text;
	size_t n;           /* bytes; 0 once merged into the left neighbour */
};

/* Priority order: x pops before y. */
static bool bg_before(const struct bigram *x, const struct bigram *y)
{
	return x->key < y->key || (x->key == y->key && x->left < y->left);
}

int heap_push(struct heap *h, struct bigram b)
{
	size_t i;

	if (h->n == h->cap) {
		size_t cap = h->cap ? 2 * h->cap : 64;
		struct bigram *a = fx_realloc_array(h->a, cap, sizeof(*a));

		if (!a)
			return FX_E_NOMEM;
		h->a = a;
		h->cap = cap;
	}
	for (i = h->n++; i > 0 && bg_before(&b, &h->a[(i - 1) / 2]); i = (i - 1) / 2)
		h->a[i] = h->a[(i - 1) / 2];
	h->a[i] = b;
	return FX_OK;
}

struct bigram heap_pop(struct heap *h)
{
	struct bigram top = h->a[0], last = h->a[--h->n];
	size_t i = 0;

	for (;;) {
		size_t c = 2 * i + 1;

		if (c >= h->n)
			break;
		if (c + 1 < h->n && bg_before(&h->a[c + 1], &h->a[c]))
			c++;
		if (!bg_before(&h->a[c], &last))
			break;
		h->a[i] = h->a[c];
		i = c;
	}
	if (h->n)
		h->a[i] = last;
	return top;
}

/* Split text[0..n) into one symbol per UTF-8 sequence (by lead byte only,
 * clipped at the end), chained in order. */
static int make_symbols(const char *text, size_t n, struct sym **out, int32_t *n_sym)
{
	struct sym *s = fx_malloc_array(n ? n : 1, sizeof(*s));
	size_t off = 0;
	int32_t k = 0;

	if (!s)
		return FX_E_NOMEM;
	while (off < n) {
		size_t len = utf8_len((unsigned char)text[off]);

		if (len > n - off)
			len = n - off;
		s[k] = (struct sym){ k - 1, off + len == n ? -1 : k + 1, text + off, len };
		off += len;
		k++;
	}
	*out = s;
	*n_sym = k;
	return FX_OK;
}

/* Merge the right symbol into the left one and unlink it. */
static void merge_pair(struct sym *s, int32_t left, int32_t right)
{
	s[left].n += s[right].n;
	s[right].n = 0;
	s[left].next = s[right].next;
	if (s[right].next >= 0)
		s[s[right].next].prev = left;
}

/* ---- SentencePiece --------------------------------------------------- */

/* llm_tokenizer_spm_session::try_add_bigram: queue left+right when their
 * concatenation is a token (any type), ranked by that token's score. */
static int spm_try_add(const struct vocab *v, struct sym *s, struct heap *h,
		       int32_t left, int32_t right)
{
	fx_token t;

	if (left < 0 || right < 0)
		return FX_OK;
	t = vocab_text_to_token(v, s[left].text, s[left].n + s[right].n);
	if (t < 0)
		return FX_OK;
	return heap_push(h, (struct bigram){ left, right, -v->score[t], s[left].n + s[right].n });
}

int spm_tokenize(const struct vocab *v, const char *text, size_t n, struct tok_out *o)
{
	struct heap h = { 0 };
	struct sym *s;
	int32_t n_sym;
	int rc;

	if ((rc = make_symbols(text, n, &s, &n_sym)))
		return rc;
	for (int32_t i = 1; i < n_sym; i++)
		if ((rc = spm_try_add(v, s, &h, i - 1, i)))
			goto out;
	while (h.n) {
		struct bigram b = heap_pop(&h);
		struct sym *l = &s[b.left], *r = &s[b.right];

		if (l->n == 0 || r->n == 0 || l->n + r->n != b.size)
			continue; /* stale: one side merged since */
		merge_pair(s, b.left, b.right);
		if ((rc = spm_try_add(v, s, &h, l->prev, b.left)) ||
		    (rc = spm_try_add(v, s, &h, b.left, l->next)))
			goto out;
	}
	/* resegment: a symbol that is no token falls back to byte tokens */
	for (int32_t i = n_sym ? 0 : -1; i >= 0; i = s[i].next) {
		fx_token t = vocab_text_to_token(v, s[i].text, s[i].n);

		if (t >= 0) {
			tok_push(o, t);
			continue;
		}
		for (size_t j = 0; j < s[i].n; j++) {
			t = vocab_byte_token(v, (uint8_t)s[i].text[j]);
			if (t < 0)
				t = v->unk; /* llama.cpp throws here */
			if (t >= 0)
				tok_push(o, t);
		}
	}
out:
	fx_free(h.a);
	fx_free(s);
	return rc;
}

/* ---- byte-level BPE -------------------------------------------------- */

/* llm_tokenizer_bpe_session::add_new_bigram: queue left+right when
 * "left right" is a merge, ranked by the merge's position. */
static int bpe_try_add(const struct vocab *v, struct sym *s, struct heap *h,
		       int32_t left, int32_t right)
{
	struct span seg[3];
	int32_t rank;

	if (left < 0 || right < 0)
		return FX_OK;
	seg[0] = (struct span){ s[left].text, s[left].n };
	seg[1] = (struct span){ " ", 1 };
	seg[2] = (struct span){ s[right].text, s[right].n };
	rank = strmap_find(&v->merge_map, &v->merges, seg, 3);
	if (rank < 0)
		return FX_OK;
	return heap_push(h, (struct bigram){ left, right, (double)rank, s[left].n + s[right].n });
}

/* Is the word all '\n' (Gemma 4 keeps such a word whole when it is a token)? */
static bool newlines_only(const struct span *w)
{
	for (size_t i = 0; i < w->n; i++)
		if (w->p[i] != '\n')
			return false;
	return true;
}

/* Token for byte b of a symbol that is no token: the one-byte text under
 * GPT-2's byte map, <0xNN> in a raw-UTF-8 vocabulary; -1 (dropped) if none. */
static fx_token bpe_byte_token(const struct vocab *v, uint8_t b)
{
	static const char hex[] = "0123456789ABCDEF";
	char buf[6] = { '<', '0', 'x', hex[b >> 4], hex[b & 15], '>' };

	if (v->pre->raw_utf8)
		return vocab_text_to_token(v, buf, sizeof(buf));
	buf[0] = (char)b;
	return vocab_text_to_token(v, buf, 1);
}

/* Merge one pre-tokenized word and emit its tokens. */
static int bpe_word(const struct vocab *v, const struct span *w, struct heap *h, struct tok_out *o)
{
	struct sym *s;
	int32_t n_sym;
	int rc;

	if ((v->ignore_merges || (v->pre->newline_words && newlines_only(w))) &&
	    vocab_text_to_token(v, w->p, w->n) >= 0) {
		tok_push(o, vocab_text_to_token(v, w->p, w->n));
		return FX_OK;
	}
	if ((rc = make_symbols(w->p, w->n, &s, &n_sym)))
		return rc;
	h->n = 0;
	for (int32_t i = 1; i < n_sym; i++)
		if ((rc = bpe_try_add(v, s, h, i - 1, i)))
			goto out;
	while (h->n) {
		struct bigram b = heap_pop(h);
		struct sym *l = &s[b.left], *r = &s[b.right];

		if (l->n == 0 || r->n == 0 || l->n + r->n != b.size)
			continue;
		merge_pair(s, b.left, b.right);
		if ((rc = bpe_try_add(v, s, h, l->prev, b.left)) ||
		    (rc = bpe_try_add(v, s, h, b.left, l->next)))
			goto out;
	}
	for (int32_t i = 0; i < n_sym; i++) {
		fx_token t;

		if (!s[i].n)
			continue;
		t = vocab_text_to_token(v, s[i].text, s[i].n);
		if (t >= 0) {
			tok_push(o, t);
			continue;
		}
		for (size_t j = 0; j < s[i].n; j++) /* single bytes; unknown ones are dropped */
			if ((t = bpe_byte_token(v, (uint8_t)s[i].text[j])) >= 0)
				tok_push(o, t);
	}
out:
	fx_free(s);
	return rc;
}

int bpe_tokenize(const struct vocab *v, const char *text, size_t n, struct tok_out *o)
{
	struct heap h = { 0 };
	struct span *words;
	size_t n_words;
	char *buf;
	int rc;

	if ((rc = pretok_split(v, text, n, &buf, &words, &n_words)))
		return rc;
	for (size_t i = 0; i < n_words && !rc; i++)
		if (words[i].n)
			rc = bpe_word(v, &words[i], &h, o);
	fx_free(h.a);
	fx_free(words);
	fx_free(buf);
	return rc;
}

/* ---- special-token partition ----------------------------------------- */

/* A fragment of the input: raw text [off, off + len), or a token. */
struct frag {
	fx_token token; /* -1 for raw text */
	size_t off, len;
};

struct frags {
	struct frag *a;
	size_t n, cap;
};

/* Append a fragment (token >= 0: a special token; else raw text). */
static int frag_push(struct frags *f, fx_token token, size_t off, size_t len)
{
	if (f->n == f->cap) {
		size_t cap = f->cap ? 2 * f->cap : 16;
		struct frag *a = fx_realloc_array(f->a, cap, sizeof(*a));

		if (!a)
			return FX_E_NOMEM;
		f->a = a;
		f->cap = cap;
	}
	f->a[f->n++] = (struct frag){ token, off, len };
	return FX_OK;
}

/* isspace() in the C locale, as llama.cpp's LSTRIP/RSTRIP use it. */
static bool c_isspace(char c)
{
	return c == ' ' || (c >= '\t' && c <= '\r');
}

/* Which special tokens occur anywhere in text: only those can split it,
 * since splitting never joins text. present[i] is for v->special[i]. */
static void find_present(const struct vocab *v, const char *text, size_t n, uint8_t *present)
{
	for (size_t i = 0; i < n; i++) {
		int32_t node = 0;

		for (size_t j = i; j < n; j++) {
			int32_t ch = v->trie[node].child;

			while (ch >= 0 && v->trie[ch].byte != (uint8_t)text[j])
				ch = v->trie[ch].sibling;
			if (ch < 0)
				break;
			node = ch;
			if (v->trie[node].special >= 0)
				present[v->trie[node].special] = 1;
		}
	}
}

/* Where special tokens may not be matched: the data spans of a rendered
 * chat prompt (fx_tokenize_prompt); n == 0 for plain fx_tokenize. */
struct no_special {
	const struct fx_chat_span *span; /* sorted, disjoint */
	size_t n;
};

/* Does [off, off + len) overlap a data span? */
static bool in_data(const struct no_special *ns, size_t off, size_t len)
{
	size_t lo = 0, hi = ns->n;
	while (lo < hi) { /* first span ending after off */
		size_t mid = (lo + hi) / 2;
		if (ns->span[mid].off + ns->span[mid].len <= off)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < ns->n && ns->span[lo].off < off + len;
}

/* Split raw fragment f of text at every occurrence of token id (left to
 * right), honouring its LSTRIP/RSTRIP attributes, appending to out. An
 * occurrence of a CONTROL/UNKNOWN token that overlaps a data span is left
 * as text. */
static int split_fragment(const struct vocab *v, const char *text, const struct frag *f,
			  fx_token id, const struct no_special *ns, struct frags *out)
{
	const struct span text_id = strtab_get(&v->text, id), *tok = &text_id;
	size_t base = f->off, len = f->len, from = f->off;
	bool guarded = ns->n && (v->attr[id] & (ATTR_CONTROL | ATTR_UNKNOWN));
	int rc;

	for (;;) {
		const char *p = memmem(text + from, base + len - from, tok->p, tok->n);
		size_t m, left;

		if (!p)
			return len ? frag_push(out, -1, base, len) : FX_OK;
		m = (size_t)(p - text);
		if (guarded && in_data(ns, m, tok->n)) {
			from = m + 1;
			continue;
		}
		left = m - base;
		if (v->attr[id] & ATTR_LSTRIP)
			while (left > 0 && c_isspace(text[base + left - 1]))
				left--;
		if (left && (rc = frag_push(out, -1, base, left)))
			return rc;
		if ((rc = frag_push(out, id, 0, 0)))
			return rc;
		if (m + tok->n >= base + len)
			return FX_OK;
		len -= m - base + tok->n;
		base = m + tok->n;
		if (v->attr[id] & ATTR_RSTRIP)
			while (len > 0 && c_isspace(text[base])) {
				base++;
				len--;
			}
		from = base;
	}
}

/* tokenizer_st_partition: each special token, longest first, splits the
 * raw fragments left so far. With parse_special false only USER_DEFINED
 * tokens split (CONTROL and UNKNOWN ones stay plain text). */
static int partition(const struct vocab *v, const char *text, size_t n, bool parse_special,
		     const struct no_special *ns, struct frags *f)
{
	struct frags g = { 0 };
	uint8_t *present;
	int rc = FX_OK;

	if (n == 0)
		return FX_OK;
	if ((rc = frag_push(f, -1, 0, n)))
		return rc;
	if (!v->n_special)
		return FX_OK;
	if (!(present = fx_calloc(v->n_special, 1)))
		return FX_E_NOMEM;
	find_present(v, text, n, present);
	for (int32_t i = 0; i < v->n_special && !rc; i++) {
		fx_token id = v->special[i];
		struct frags t;

		if (!present[i] || (!parse_special && (v->attr[id] & (ATTR_CONTROL | ATTR_UNKNOWN))))
			continue;
		g.n = 0;
		for (size_t k = 0; k < f->n && !rc; k++)
			rc = f->a[k].token >= 0 ? frag_push(&g, f->a[k].token, 0, 0)
						: split_fragment(v, text, &f->a[k], id, ns, &g);
		t = *f;
		*f = g;
		g = t;
	}
	fx_free(g.a);
	fx_free(present);
	return rc;
}

/* SPM fragment, or BPE over raw UTF-8 (Gemma 4): optional space prefix,
 * spaces escaped to U+2581 (llama_escape_whitespace). */
static int escaped_fragment(const struct vocab *v, const char *text, size_t n, bool prefix,
			    struct tok_out *o)
{
	char *buf = fx_malloc_array(n + 1, 3);
	size_t k = 0;
	int rc;

	if (!buf)
		return FX_E_NOMEM;
	if (prefix) {
		memcpy(buf, "\xe2\x96\x81", 3);
		k = 3;
	}
	for (size_t i = 0; i < n; i++) {
		if (text[i] == ' ') {
			memcpy(buf + k, "\xe2\x96\x81", 3);
			k += 3;
		} else {
			buf[k++] = text[i];
		}
	}
	rc = v->type == VOCAB_SPM ? spm_tokenize(v, buf, k, o) : bpe_tokenize(v, buf, k, o);
	fx_free(buf);
	return rc;
}

/* One raw-text fragment through the vocabulary's tokenizer. */
static int raw_fragment(const struct vocab *v, const char *text, size_t n, bool prev_special,
			struct tok_out *o)
{
	if (v->type == VOCAB_SPM)
		return escaped_fragment(v, text, n, v->add_space_prefix && prev_special, o);
	if (v->type == VOCAB_WPM)
		return wpm_tokenize(v, text, n, o);
	if (v->pre->raw_utf8)
		return escaped_fragment(v, text, n, false, o);
	return bpe_tokenize(v, text, n, o);
}

static int tokenize_guarded(const struct vocab *v, const char *text, size_t len,
			    bool add_special, bool parse_special, const struct no_special *ns,
			    fx_token *out, size_t cap, size_t *n_out)
{
	struct tok_out o = { out, cap, 0 };
	struct frags f = { 0 };
	bool prev_special = true; /* SPM: a space prefix goes on the first fragment */
	int rc;

	if (!v || !n_out || (!text && len) || (!out && cap))
		return FX_E_INVALID;
	*n_out = 0;
	if (v->type == VOCAB_HF) {
		rc = hftok_encode(v, text, len, add_special, parse_special, ns->span, ns->n, &o);
		goto done;
	}
	if ((rc = partition(v, text, len, parse_special, ns, &f)))
		goto out;
	if (add_special && v->add_bos)
		tok_push(&o, v->bos);
	for (size_t k = 0; k < f.n && !rc; k++) {
		const struct frag *fr = &f.a[k];

		if (fr->token >= 0) {
			tok_push(&o, fr->token);
			prev_special = true;
		} else {
			rc = raw_fragment(v, text + fr->off, fr->len, prev_special, &o);
			prev_special = false;
		}
	}
	if (!rc && add_special && v->add_eos)
		tok_push(&o, v->eos);
	if (!rc && add_special && v->add_sep && v->type == VOCAB_WPM)
		tok_push(&o, v->sep); /* [SEP]: only llama.cpp's WordPiece adds it */
done:
	if (!rc) {
		*n_out = o.n;
		if (o.n > cap)
			rc = FX_E_INVALID;
	}
out:
	fx_free(f.a);
	return rc;
}

int vocab_tokenize(const struct vocab *v, const char *text, size_t len,
		   bool add_special, bool parse_special, fx_token *out, size_t cap,
		   size_t *n_out)
{
	struct no_special ns = { NULL, 0 };

	return tokenize_guarded(v, text, len, add_special, parse_special, &ns, out, cap, n_out);
}

int vocab_tokenize_prompt(const struct vocab *v, const struct fx_chat_prompt *p, bool add_special,
			  fx_token *out, size_t cap, size_t *n_out)
{
	struct no_special ns;

	if (!p || (!p->text && p->len) || (p->n_data && !p->data))
		return FX_E_INVALID;
	for (size_t i = 0; i < p->n_data; i++)
		if (p->data[i].off + p->data[i].len > p->len ||
		    (i && p->data[i].off < p->data[i - 1].off + p->data[i - 1].len))
			return FX_E_INVALID;
	ns.span = p->data;
	ns.n = p->n_data;
	return tokenize_guarded(v, p->text, p->len, add_special, true, &ns, out, cap, n_out);
}
