/* Encoding with a tokenizer.json pipeline (hf_impl.h's header comment):
 * added tokens (tokenizer/added_vocabulary.rs), normalizers
 * (normalizers/), pre-tokenizers (pre_tokenizers/byte_level.rs,
 * split.rs, metaspace.rs, sequence.rs; splitting as NormalizedString::split
 * in tokenizer/normalizer.rs), the model, and the post-processor
 * (processors/template.rs, roberta.rs, bert.rs).
 *
 * The text lives in one buffer that only grows during a call; pieces are
 * byte ranges of it. Everything is freed when the call returns.
 */
#include <string.h>

#include "core/alloc.h"
#include "tokenizer/hf_impl.h"

/* A piece of the text: a range of enc.buf, or an added token. */
struct piece {
	size_t off, n;
	fx_token tok; /* >= 0: an added token; -1: text */
	size_t o0, o1; /* the original byte range it came from */
	bool first;    /* starts at original offset 0 (Metaspace "first") */
};

struct plist {
	struct piece *a;
	size_t n, cap;
};

/* A segment of find_matches: [s, e), a pattern match or not. */
struct seg {
	size_t s, e;
	bool m;
};

struct slist {
	struct seg *a;
	size_t n, cap;
};

struct enc {
	const struct hftok *h;
	const struct vocab *v;
	struct sbuf buf;
	bool parse_special;
	const struct fx_chat_span *data; /* in buf's coordinates */
	size_t n_data;
};

/* Room for element n of the array *a (*cap elements of size bytes). */
static int grow(void **a, size_t n, size_t *cap, size_t size)
{
	size_t c = *cap ? 2 * *cap : 16;
	void *p;

	if (n < *cap)
		return FX_OK;
	if (!(p = fx_realloc_array(*a, c, size)))
		return FX_E_NOMEM;
	*a = p;
	*cap = c;
	return FX_OK;
}

static int plist_push(struct plist *l, struct piece p)
{
	void *a = l->a;
	int rc;

	if (p.tok < 0 && !p.n)
		return FX_OK; /* PreTokenizedString drops empty splits */
	rc = grow(&a, l->n, &l->cap, sizeof(*l->a));
	l->a = a;
	if (!rc)
		l->a[l->n++] = p;
	return rc;
}

static int slist_push(struct slist *l, size_t s, size_t e, bool m)
{
	void *a = l->a;
	int rc = grow(&a, l->n, &l->cap, sizeof(*l->a));

	l->a = a;
	if (!rc)
		l->a[l->n++] = (struct seg){ s, e, m };
	return rc;
}

/* Append buf[off..off + n) to buf itself (the source moves when the
 * buffer grows, so room is made first). */
static int buf_copy(struct sbuf *b, size_t off, size_t n)
{
	int rc = sbuf_reserve(b, n);

	if (rc)
		return rc;
	memcpy(b->p + b->n, b->p + off, n);
	b->n += n;
	return FX_OK;
}

/* ---- pattern matching ---------------------------------------------------- */

/* One pcre2_match of re on s[0..n) from start. The subject's UTF-8 is
 * validated by the first call only (checked is false): validating on
 * every call would make a loop over a long subject quadratic. A run too
 * long for the JIT stack falls back to the interpreter. */
static int match_at(const pcre2_code *re, const char *s, size_t n, size_t start, bool checked,
		    pcre2_match_data *md)
{
	uint32_t opt = checked ? PCRE2_NO_UTF_CHECK : 0;
	int r = pcre2_match(re, (PCRE2_SPTR)s, n, start, opt, md, NULL);

	if (r == PCRE2_ERROR_JIT_STACKLIMIT)
		r = pcre2_match(re, (PCRE2_SPTR)s, n, start, opt | PCRE2_NO_JIT, md, NULL);
	return r;
}

/* Pattern::find_matches: segments covering s[0..n), matches flagged.
 * Regex matches are iterated as the onig crate does: an empty match right
 * at the end of the previous match is skipped. */
static int find_matches(const struct hftok *h, const struct hf_pattern *p, const char *s,
			size_t n, struct slist *out)
{
	size_t prev = 0, last = 0, last_end = (size_t)-1;
	pcre2_match_data *md;
	int rc = FX_OK;

	out->n = 0;
	if (!n)
		return slist_push(out, 0, 0, false);
	if (p->lit) {
		const char *q;

		while (p->n_lit && prev < n && (q = memmem(s + prev, n - prev, p->lit, p->n_lit))) {
			size_t at = (size_t)(q - s);

			if ((at > prev && (rc = slist_push(out, prev, at, false))) ||
			    (rc = slist_push(out, at, at + p->n_lit, true)))
				return rc;
			prev = at + p->n_lit;
		}
		return prev < n ? slist_push(out, prev, n, false) : FX_OK;
	}
	if (!(md = pcre2_match_data_create_from_pattern(p->re, h->re_mem)))
		return FX_E_NOMEM;
	for (bool checked = false; last <= n && !rc; checked = true) {
		int r = match_at(p->re, s, n, last, checked, md);
		PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);

		if (r == PCRE2_ERROR_NOMEMORY || r == PCRE2_ERROR_HEAPLIMIT) {
			rc = FX_E_NOMEM;
			break;
		}
		if (r < 0)
			break;
		if (ov[0] == ov[1] && ov[1] == last_end) {
			if (last >= n)
				break;
			last += utf8_len((unsigned char)s[last]);
			continue;
		}
		if ((ov[0] > prev && (rc = slist_push(out, prev, ov[0], false))) ||
		    (rc = slist_push(out, ov[0], ov[1], true)))
			break;
		prev = last = last_end = ov[1];
	}
	pcre2_match_data_free(md);
	if (!rc && prev < n)
		rc = slist_push(out, prev, n, false);
	return rc;
}

/* NormalizedString::split's behaviours over the segments (in place):
 * afterwards m means "remove". */
static void apply_behavior(struct slist *l, enum hf_behavior b)
{
	size_t k = 0;
	bool prev = false;

	if (b == HFB_REMOVED)
		return;
	if (b == HFB_MERGED_NEXT) { /* the mirror of MergedWithPrevious */
		for (size_t i = l->n; i-- > 0;) {
			struct seg g = l->a[i];

			if (g.m && !prev && k)
				l->a[l->n - k].s = g.s;
			else
				l->a[l->n - ++k] = (struct seg){ g.s, g.e, false };
			prev = g.m;
		}
		memmove(l->a, l->a + l->n - k, k * sizeof(*l->a));
		l->n = k;
		return;
	}
	for (size_t i = 0; i < l->n; i++) {
		struct seg g = l->a[i];
		bool join = b == HFB_CONTIGUOUS ? g.m == prev
			  : b == HFB_MERGED_PREV ? g.m && !prev : false;

		if (join && k)
			l->a[k - 1].e = g.e;
		else
			l->a[k++] = (struct seg){ g.s, g.e, false };
		prev = g.m;
	}
	l->n = k;
}

/* Split piece p with pattern pat and behaviour b into out. */
static int split_piece(struct enc *e, const struct piece *p, const struct hf_pattern *pat,
		       enum hf_behavior b, bool invert, struct slist *sl, struct plist *out)
{
	int rc = find_matches(e->h, pat, e->buf.p + p->off, p->n, sl);

	if (rc)
		return rc;
	for (size_t i = 0; invert && i < sl->n; i++)
		sl->a[i].m = !sl->a[i].m;
	apply_behavior(sl, b);
	for (size_t i = 0; i < sl->n && !rc; i++)
		if (!sl->a[i].m)
			rc = plist_push(out, (struct piece){ p->off + sl->a[i].s, sl->a[i].e - sl->a[i].s,
							    -1, p->o0, p->o1,
							    p->first && sl->a[i].s == 0 });
	return rc;
}

/* ---- normalizers ----------------------------------------------------------- */

int hftok_normalize(const struct hftok *h, const struct hf_norm *nm, const char *s, size_t n,
		    struct sbuf *out)
{
	struct slist sl = { 0 };
	struct sbuf a = { 0 }, b = { 0 };
	int rc = FX_OK;

	if (!nm)
		return sbuf_put(out, s, n);
	switch (nm->kind) {
	case HFN_PREPEND:
		if (n && (rc = sbuf_put(out, nm->str, nm->n_str)))
			return rc;
		return sbuf_put(out, s, n);
	case HFN_REPLACE:
		rc = find_matches(h, &nm->pat, s, n, &sl);
		for (size_t i = 0; i < sl.n && !rc; i++)
			rc = sl.a[i].m ? sbuf_put(out, nm->str, nm->n_str)
				       : sbuf_put(out, s + sl.a[i].s, sl.a[i].e - sl.a[i].s);
		fx_free(sl.a);
		return rc;
	default:
		return hfnorm_unicode(nm, s, n, out);
	case HFN_SEQUENCE:
		if ((rc = sbuf_put(&a, s, n)))
			break;
		for (int i = 0; i < nm->n_item && !rc; i++) {
			struct sbuf t;

			b.n = 0;
			rc = hftok_normalize(h, &nm->item[i], a.p, a.n, &b);
			t = a;
			a = b;
			b = t;
		}
		if (!rc)
			rc = sbuf_put(out, a.p, a.n);
		break;
	}
	fx_free(a.p);
	fx_free(b.p);
	return rc;
}

/* ---- added tokens ---------------------------------------------------------- */

static bool is_ws(uint32_t c)
{
	return (c >= 9 && c <= 13) || c == ' ' || c == 0x85 || c == 0xa0 || c == 0x1680 ||
	       (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 || c == 0x202f ||
	       c == 0x205f || c == 0x3000;
}

/* Start of the character that ends at s[end] (exclusive). */
static size_t char_before(const char *s, size_t end)
{
	size_t i = end - 1;

	while (i > 0 && ((unsigned char)s[i] & 0xc0) == 0x80)
		i--;
	return i;
}

/* Is the character s[i..) a word character (Rust regex \w)? 1 or 0, or
 * FX_E_NOMEM when PCRE2 runs out of memory. */
static int word_char(const struct hftok *h, pcre2_match_data *md, const char *s, size_t n, size_t i)
{
	size_t len = utf8_len((unsigned char)s[i]);
	int r;

	if (len > n - i)
		len = n - i;
	r = pcre2_match(h->re_word, (PCRE2_SPTR)(s + i), len, 0, PCRE2_ANCHORED, md, NULL);
	if (r == PCRE2_ERROR_NOMEMORY || r == PCRE2_ERROR_HEAPLIMIT)
		return FX_E_NOMEM;
	return r >= 0;
}

/* single_word: no word character touches [start, stop) of s[0..n)? 1 or
 * 0, or FX_E_NOMEM. */
static int alone(const struct hftok *h, pcre2_match_data *md, const char *s, size_t n,
		 size_t start, size_t stop)
{
	int w = start > 0 ? word_char(h, md, s, n, char_before(s, start)) : 0;

	if (w == 0 && stop < n)
		w = word_char(h, md, s, n, stop);
	return w < 0 ? w : !w;
}

/* May added token a match at buf range [o0, o1) of piece p? */
static bool allowed(const struct enc *e, const struct hf_added *a, size_t o0, size_t o1)
{
	if (!a->special)
		return true;
	if (!e->parse_special)
		return false;
	for (size_t i = 0; i < e->n_data; i++) /* few spans: a chat prompt's */
		if (e->data[i].off < o1 && o0 < e->data[i].off + e->data[i].len)
			return false;
	return true;
}

/* The longest allowed token of trie t matching at s[i..n), or -1. */
static int32_t longest_at(const struct enc *e, const struct trie_node *t, const struct piece *p,
			  bool raw, const char *s, size_t n, size_t i, size_t *len)
{
	int32_t node = 0, best = -1;

	for (size_t j = i; j < n; j++) {
		int32_t ch = t[node].child;

		while (ch >= 0 && t[ch].byte != (uint8_t)s[j])
			ch = t[ch].sibling;
		if (ch < 0)
			break;
		node = ch;
		if (t[node].special >= 0) {
			const struct hf_added *a = &e->h->added[t[node].special];
			size_t o0 = raw ? p->off + i : p->o0, o1 = raw ? p->off + j + 1 : p->o1;

			if (allowed(e, a, o0, o1)) {
				best = t[node].special;
				*len = j + 1 - i;
			}
		}
	}
	return best;
}

/* find_matches + split_with_indices of added_vocabulary.rs over piece p. */
static int split_added(struct enc *e, const struct trie_node *t, bool raw, const struct piece *p,
		       pcre2_match_data *md, struct plist *out)
{
	const char *s = e->buf.p + p->off;
	size_t n = p->n, i = 0, from = 0, len = 0;
	int rc;

	while (i < n) {
		int32_t k = longest_at(e, t, p, raw, s, n, i, &len);
		const struct hf_added *a;
		size_t start = i, stop = i + len;

		if (k < 0) {
			i++;
			continue;
		}
		a = &e->h->added[k];
		i = stop;
		if (a->single_word && (rc = alone(e->h, md, s, n, start, stop)) <= 0) {
			if (rc < 0)
				return rc;
			continue;
		}
		if (a->lstrip) {
			size_t ns = start, off;

			while (ns > 0) {
				size_t b = char_before(s, ns);

				off = b;
				if (!is_ws(utf8_decode_lenient(s, n, &off)))
					break;
				ns = b;
			}
			start = ns > from ? ns : from;
		}
		while (a->rstrip && stop < n) {
			size_t off = stop;

			if (!is_ws(utf8_decode_lenient(s, n, &off)))
				break;
			stop = off;
		}
		if ((from < start && (rc = plist_push(out, (struct piece){ p->off + from, start - from,
			-1, raw ? p->off + from : p->o0, raw ? p->off + start : p->o1,
			p->first && from == 0 }))) ||
		    (rc = plist_push(out, (struct piece){ 0, 0, a->id, 0, 0, false })))
			return rc;
		from = stop;
	}
	if (from < n)
		return plist_push(out, (struct piece){ p->off + from, n - from, -1,
						       raw ? p->off + from : p->o0, raw ? p->off + n : p->o1,
						       p->first && from == 0 });
	return FX_OK;
}

/* extract_and_normalize: raw added tokens, normalize, normalized ones. */
static int extract_added(struct enc *e, struct plist *l, struct plist *tmp)
{
	pcre2_match_data *md = pcre2_match_data_create_from_pattern(e->h->re_word, e->h->re_mem);
	struct sbuf norm = { 0 };
	int rc = FX_OK;

	if (!md)
		return FX_E_NOMEM;
	tmp->n = 0;
	for (size_t i = 0; i < l->n && !rc; i++)
		rc = l->a[i].tok >= 0 ? plist_push(tmp, l->a[i])
				      : split_added(e, e->h->trie_raw, true, &l->a[i], md, tmp);
	l->n = 0;
	for (size_t i = 0; i < tmp->n && !rc; i++) {
		struct piece p = tmp->a[i];

		if (p.tok < 0 && e->h->norm) {
			norm.n = 0;
			if ((rc = hftok_normalize(e->h, e->h->norm, e->buf.p + p.off, p.n, &norm)))
				break;
			p.off = e->buf.n;
			p.n = norm.n;
			if ((rc = sbuf_put(&e->buf, norm.p, norm.n)))
				break;
		}
		rc = p.tok >= 0 ? plist_push(l, p) : split_added(e, e->h->trie_norm, false, &p, md, l);
	}
	pcre2_match_data_free(md);
	fx_free(norm.p);
	return rc;
}

/* ---- pre-tokenizers -------------------------------------------------------- */

/* ByteLevel on one piece: prefix space, GPT-2 split, bytes to characters. */
static int byte_level(struct enc *e, const struct hf_pre *pre, struct piece p, struct slist *sl,
		      struct plist *out)
{
	struct plist words = { 0 };
	struct hf_pattern gpt2 = { NULL, 0, e->h->re_bytelevel };
	int rc = FX_OK;

	if (pre->add_prefix_space && e->buf.p[p.off] != ' ') {
		size_t off = e->buf.n;

		if ((rc = sbuf_put(&e->buf, " ", 1)) || (rc = buf_copy(&e->buf, p.off, p.n)))
			return rc;
		p.off = off;
		p.n++;
	}
	rc = pre->use_regex ? split_piece(e, &p, &gpt2, HFB_ISOLATED, false, sl, &words)
			    : plist_push(&words, p);
	for (size_t i = 0; i < words.n && !rc; i++) {
		struct piece w = words.a[i];
		size_t off = e->buf.n;

		for (size_t j = 0; j < w.n && !rc; j++) {
			uint8_t c = (uint8_t)e->buf.p[w.off + j];

			rc = sbuf_put(&e->buf, e->v->byte_utf8[c], e->v->byte_utf8_len[c]);
		}
		w.off = off;
		w.n = e->buf.n - off;
		if (!rc)
			rc = plist_push(out, w);
	}
	fx_free(words.a);
	return rc;
}

/* Metaspace on one piece: spaces to the replacement, the prefix by the
 * prepend scheme, then split before each replacement. */
static int metaspace(struct enc *e, const struct hf_pre *pre, struct piece p, struct slist *sl,
		     struct plist *out)
{
	struct hf_pattern rep = { (char *)pre->rep, pre->n_rep, NULL };
	size_t off = e->buf.n;
	bool starts;
	int rc = FX_OK;

	for (size_t i = 0; i < p.n && !rc; i++) {
		char c = e->buf.p[p.off + i];

		rc = c == ' ' ? sbuf_put(&e->buf, pre->rep, pre->n_rep) : sbuf_put(&e->buf, &c, 1);
	}
	if (rc)
		return rc;
	p.off = off;
	p.n = e->buf.n - off;
	starts = p.n >= pre->n_rep && !memcmp(e->buf.p + p.off, pre->rep, pre->n_rep);
	if (!starts && (pre->prepend == HF_PREPEND_ALWAYS ||
			(pre->prepend == HF_PREPEND_FIRST && p.first))) {
		off = e->buf.n;
		if ((rc = sbuf_put(&e->buf, pre->rep, pre->n_rep)) || (rc = buf_copy(&e->buf, p.off, p.n)))
			return rc;
		p.off = off;
		p.n += pre->n_rep;
	}
	return pre->split ? split_piece(e, &p, &rep, HFB_MERGED_NEXT, false, sl, out)
			  : plist_push(out, p);
}

/* Pre-tokenize every text piece of *l with pre; *tmp is scratch. */
static int pre_tokenize(struct enc *e, const struct hf_pre *pre, struct plist *l, struct plist *tmp)
{
	struct slist sl = { 0 };
	struct plist t;
	int rc = FX_OK;

	if (pre->kind == HFP_SEQUENCE) {
		for (int i = 0; i < pre->n_item && !rc; i++)
			rc = pre_tokenize(e, &pre->item[i], l, tmp);
		return rc;
	}
	tmp->n = 0;
	for (size_t i = 0; i < l->n && !rc; i++) {
		struct piece p = l->a[i];

		if (p.tok >= 0)
			rc = plist_push(tmp, p);
		else if (pre->kind == HFP_BYTELEVEL)
			rc = byte_level(e, pre, p, &sl, tmp);
		else if (pre->kind == HFP_METASPACE)
			rc = metaspace(e, pre, p, &sl, tmp);
		else
			rc = split_piece(e, &p, &pre->pat, pre->behavior, pre->invert, &sl, tmp);
	}
	fx_free(sl.a);
	t = *l;
	*l = *tmp;
	*tmp = t;
	return rc;
}

/* ---- the whole encode ---------------------------------------------------- */

/* How many bytes at s[i..n) start a well-formed UTF-8 sequence (table
 * 3-7), at least 1; *need gets the sequence's full length (0: bad lead). */
static size_t seq_prefix(const unsigned char *s, size_t n, size_t i, size_t *need)
{
	unsigned char c = s[i];
	size_t k = 1;

	*need = c < 0x80 ? 1 : c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3
	      : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
	for (; k < *need && i + k < n; k++) {
		unsigned char lo = 0x80, hi = 0xbf;

		if (k == 1 && c == 0xe0)
			lo = 0xa0;
		else if (k == 1 && c == 0xed)
			hi = 0x9f;
		else if (k == 1 && c == 0xf0)
			lo = 0x90;
		else if (k == 1 && c == 0xf4)
			hi = 0x8f;
		if (s[i + k] < lo || s[i + k] > hi)
			break;
	}
	return k;
}

/* The text into e->buf, each maximal ill-formed subpart as U+FFFD; the data
 * spans moved to the new offsets (*spans, owned, when there are some). */
static int take_text(struct enc *e, const char *text, size_t n, const struct fx_chat_span *data,
		     size_t n_data, struct fx_chat_span **spans)
{
	const unsigned char *s = (const unsigned char *)text;
	size_t *map = NULL, i = 0;
	int rc = FX_OK;

	*spans = NULL;
	if (n_data && !(map = fx_malloc_array(n + 1, sizeof(*map))))
		return FX_E_NOMEM;
	while (i < n && !rc) {
		size_t need, len = seq_prefix(s, n, i, &need);
		bool ok = len == need;

		/* an ill-formed maximal subpart becomes one U+FFFD */
		for (size_t k = 0; map && k < len; k++)
			map[i + k] = e->buf.n;
		rc = ok ? sbuf_put(&e->buf, text + i, len) : sbuf_put(&e->buf, "\xef\xbf\xbd", 3);
		i += len;
	}
	if (map)
		map[n] = e->buf.n;
	if (!rc && n_data && !(*spans = fx_malloc_array(n_data, sizeof(**spans))))
		rc = FX_E_NOMEM;
	for (size_t k = 0; !rc && k < n_data; k++)
		(*spans)[k] = (struct fx_chat_span){ map[data[k].off],
			map[data[k].off + data[k].len] - map[data[k].off] };
	fx_free(map);
	return rc;
}

/* ---- the word cache -------------------------------------------------------- */

/* Word -> model ids for one encode, as tokenizers' BPE cache: running
 * text repeats its words, and the model (merges, Viterbi, greedy match)
 * costs more than finding a word again. Per call, so threads share
 * nothing. Keys are byte ranges of enc.buf (offsets: buf may move). */
struct wslot {
	size_t off, n;  /* the word, buf[off..off + n); n == 0: empty slot */
	size_t ids;     /* its ids, wcache.ids[ids..ids + n_ids) */
	size_t n_ids;
};

struct wcache {
	struct wslot *slot; /* [mask + 1], open addressing */
	size_t mask, used;
	fx_token *ids;
	size_t n_ids, cap_ids;
};

enum { WCACHE_MAX_WORD = 256, WCACHE_MAX_SLOTS = 1 << 17 };

/* Slots for a text of n bytes: about one per 4 bytes, a power of two. */
static int wcache_init(struct wcache *c, size_t n)
{
	size_t slots = 64;

	while (slots < n / 4 && slots < WCACHE_MAX_SLOTS)
		slots *= 2;
	*c = (struct wcache){ .mask = slots - 1 };
	return (c->slot = fx_calloc(slots, sizeof(*c->slot))) ? FX_OK : FX_E_NOMEM;
}

static size_t word_hash(const char *w, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */

	for (size_t i = 0; i < n; i++)
		h = (h ^ (uint8_t)w[i]) * 0x100000001b3ull;
	return (size_t)(h ^ (h >> 29));
}

/* The slot holding buf[off..off + n), or the empty slot where it would
 * go; NULL when the word is too long to cache. */
static struct wslot *wcache_find(const struct wcache *c, const char *buf, size_t off, size_t n)
{
	size_t i;

	if (n > WCACHE_MAX_WORD)
		return NULL;
	for (i = word_hash(buf + off, n) & c->mask; c->slot[i].n; i = (i + 1) & c->mask)
		if (c->slot[i].n == n && !memcmp(buf + c->slot[i].off, buf + off, n))
			break;
	return &c->slot[i];
}

/* Fill empty slot s with the word and its ids[0..k), while the table is
 * under three quarters full. FX_E_NOMEM. */
static int wcache_put(struct wcache *c, struct wslot *s, size_t off, size_t n, const fx_token *ids,
		      size_t k)
{
	void *a = c->ids;
	int rc = FX_OK;

	if (c->used >= (c->mask + 1) / 4 * 3)
		return FX_OK;
	while (c->n_ids + k > c->cap_ids && !rc)
		rc = grow(&a, c->cap_ids, &c->cap_ids, sizeof(*c->ids));
	c->ids = a;
	if (rc)
		return rc;
	if (k) /* a word may give no ids (and the buffers be NULL then) */
		memcpy(c->ids + c->n_ids, ids, k * sizeof(*ids));
	*s = (struct wslot){ off, n, c->n_ids, k };
	c->n_ids += k;
	c->used++;
	return FX_OK;
}

/* The model's ids of word p into o, through the cache. */
static int model_word(struct enc *e, struct wcache *c, const struct piece *p, struct tok_out *o)
{
	struct wslot *s = wcache_find(c, e->buf.p, p->off, p->n);
	size_t mark = o->n;
	int rc;

	if (s && s->n) {
		for (size_t k = 0; k < s->n_ids; k++)
			tok_push(o, c->ids[s->ids + k]);
		return FX_OK;
	}
	rc = hftok_word(e->h, e->buf.p + p->off, p->n, o);
	if (rc || !s || o->n > o->cap) /* past cap the ids were not kept */
		return rc;
	return wcache_put(c, s, p->off, p->n, o->out + mark, o->n - mark);
}

/* The pieces of the text through added tokens, normalizer, pre-tokenizer
 * and model, into o. */
static int encode_sequence(struct enc *e, size_t n, struct tok_out *o)
{
	struct plist l = { 0 }, tmp = { 0 };
	struct wcache c = { 0 };
	int rc = plist_push(&l, (struct piece){ 0, n, -1, 0, n, true });

	if (!rc)
		rc = extract_added(e, &l, &tmp);
	if (!rc && e->h->pre)
		rc = pre_tokenize(e, e->h->pre, &l, &tmp);
	if (!rc)
		rc = wcache_init(&c, n);
	for (size_t i = 0; i < l.n && !rc; i++) {
		if (l.a[i].tok >= 0)
			tok_push(o, l.a[i].tok);
		else
			rc = model_word(e, &c, &l.a[i], o);
	}
	fx_free(c.slot);
	fx_free(c.ids);
	fx_free(l.a);
	fx_free(tmp.a);
	return rc;
}

int hftok_encode(const struct vocab *v, const char *text, size_t n, bool add_special,
		 bool parse_special, const struct fx_chat_span *data, size_t n_data,
		 struct tok_out *o)
{
	struct enc e = { .h = v->hf, .v = v, .parse_special = parse_special };
	struct fx_chat_span *spans;
	int rc = take_text(&e, text, n, data, n_data, &spans);

	size_t len = e.buf.n; /* the text is buf[0..len) */

	e.data = spans;
	e.n_data = n_data;
	if (!rc && (!add_special || !e.h->post))
		rc = encode_sequence(&e, len, o);
	for (int i = 0; !rc && add_special && i < e.h->n_post; i++) {
		const struct hf_post_piece *pp = &e.h->post[i];

		if (!pp->ids)
			rc = encode_sequence(&e, len, o);
		for (int k = 0; pp->ids && k < pp->n_ids; k++)
			tok_push(o, pp->ids[k]);
	}
	fx_free(spans);
	fx_free(e.buf.p);
	return rc;
}
