/* One token's text through a tokenizer.json decoder (decoders/:
 * byte_level.rs, byte_fallback.rs, fuse.rs, strip.rs, metaspace.rs, and
 * normalizers/replace.rs for Replace), for token_to_piece and the
 * streaming detokenizer.
 *
 * tokenizers decodes a whole id list; a piece is decoded as a token that
 * is neither the first nor the last of the text: without a decoder it is
 * the token after a space (tokenizers joins them with spaces), Metaspace keeps its
 * leading replacement as a space, and a Strip that follows Fuse (which
 * strips the ends of the whole text) strips nothing. ByteFallback gives
 * the raw byte: the streaming detokenizer assembles UTF-8 across tokens
 * and writes U+FFFD for what never completes.
 */
#include <string.h>

#include "core/alloc.h"
#include "tokenizer/hf_impl.h"

/* GPT-2's byte map backwards; a token with a character outside the map is
 * taken as its own bytes (byte_level.rs decode_chain). */
static int dec_byte_level(const struct vocab *v, const struct sbuf *a, struct sbuf *b)
{
	size_t off = 0;

	while (off < a->n) {
		uint32_t c = utf8_decode_lenient(a->p, a->n, &off);

		if (c >= 324 || v->cpt_byte[c] < 0)
			return sbuf_put(b, a->p, a->n);
	}
	for (off = 0; off < a->n;) {
		char byte = (char)v->cpt_byte[utf8_decode_lenient(a->p, a->n, &off)];

		b->p[b->n++] = byte; /* b has room: one byte per character */
	}
	return FX_OK;
}

/* "<0xNN>" (exactly six bytes, hex digits) as the byte, else the text. */
static int dec_byte_fallback(const struct sbuf *a, struct sbuf *b)
{
	unsigned v = 0;

	if (a->n != 6 || memcmp(a->p, "<0x", 3) || a->p[5] != '>')
		return sbuf_put(b, a->p, a->n);
	for (int i = 3; i < 5; i++) {
		char c = a->p[i];
		int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
		      : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;

		if (d < 0)
			return sbuf_put(b, a->p, a->n);
		v = v * 16 + (unsigned)d;
	}
	b->p[b->n++] = (char)v;
	return FX_OK;
}

/* Up to d->start leading and d->stop trailing copies of d->str. */
static int dec_strip(const struct hf_dec *d, const struct sbuf *a, bool fused, struct sbuf *b)
{
	size_t s = 0, e = a->n, k = d->n_str;

	if (fused) /* strips the ends of the whole text, not of this token */
		return sbuf_put(b, a->p, a->n);
	for (int i = 0; i < d->start && e - s >= k && !memcmp(a->p + s, d->str, k); i++)
		s += k;
	for (int i = 0; i < d->stop && e - s >= k && !memcmp(a->p + e - k, d->str, k); i++)
		e -= k;
	return sbuf_put(b, a->p + s, e - s);
}

/* Every replacement character as a space (not the first token). */
static int dec_metaspace(const struct hf_dec *d, const struct sbuf *a, struct sbuf *b)
{
	int rc = FX_OK;

	for (size_t i = 0; i < a->n && !rc;) {
		if (a->n - i >= d->n_rep && !memcmp(a->p + i, d->rep, d->n_rep)) {
			rc = sbuf_put(b, " ", 1);
			i += d->n_rep;
		} else {
			rc = sbuf_put(b, a->p + i++, 1);
		}
	}
	return rc;
}

/* Every s in a->p[0..a->n) replaced by r, in place through scratch t. */
static int replace_all(struct sbuf *a, const char *s, const char *r, struct sbuf *t)
{
	size_t ns = strlen(s), i = 0;
	struct sbuf x;
	int rc = FX_OK;

	t->n = 0;
	while (i < a->n && !rc) {
		if (a->n - i >= ns && !memcmp(a->p + i, s, ns)) {
			rc = sbuf_put(t, r, strlen(r));
			i += ns;
		} else {
			rc = sbuf_put(t, a->p + i++, 1);
		}
	}
	x = *a;
	*a = *t;
	*t = x;
	return rc;
}

/* WordPiece (not the first token): the prefix dropped, else a space
 * before; then BERT's cleanup replacements, in decoders/wordpiece.rs's
 * order. */
static int dec_wordpiece(const struct hf_dec *d, struct sbuf *a, struct sbuf *b)
{
	static const char *const fix[][2] = {
		{ " .", "." }, { " ?", "?" }, { " !", "!" }, { " ,", "," }, { " ' ", "'" },
		{ " n't", "n't" }, { " 'm", "'m" }, { " do not", " don't" }, { " 's", "'s" },
		{ " 've", "'ve" }, { " 're", "'re" },
	};
	struct sbuf t;
	int rc;

	if (a->n >= d->n_str && !memcmp(a->p, d->str, d->n_str))
		rc = sbuf_put(b, a->p + d->n_str, a->n - d->n_str);
	else if (!(rc = sbuf_put(b, " ", 1)))
		rc = sbuf_put(b, a->p, a->n);
	t = *a; /* the result in a, b scratch */
	*a = *b;
	*b = t;
	for (size_t i = 0; d->cleanup && i < sizeof(fix) / sizeof(fix[0]) && !rc; i++)
		rc = replace_all(a, fix[i][0], fix[i][1], b);
	t = *a;
	*a = *b;
	*b = t;
	return rc;
}

/* Decoder d on the text in *a, the result left in *a (*b is scratch).
 * *fused: the tokens are one string by now (Fuse, ByteLevel). */
static int dec_apply(const struct vocab *v, const struct hf_dec *d, struct sbuf *a, struct sbuf *b,
		     bool *fused)
{
	struct sbuf t;
	int rc = FX_OK;

	if (d->kind == HFD_SEQUENCE) {
		for (int i = 0; i < d->n_item && !rc; i++)
			rc = dec_apply(v, &d->item[i], a, b, fused);
		return rc;
	}
	b->n = 0;
	if ((rc = sbuf_reserve(b, a->n))) /* room for the byte-wise decoders */
		return rc;
	switch (d->kind) {
	case HFD_BYTELEVEL:
		rc = dec_byte_level(v, a, b);
		*fused = true;
		break;
	case HFD_BYTEFALLBACK:
		rc = *fused ? sbuf_put(b, a->p, a->n) : dec_byte_fallback(a, b);
		break;
	case HFD_FUSE:
		*fused = true;
		rc = sbuf_put(b, a->p, a->n);
		break;
	case HFD_STRIP:
		rc = dec_strip(d, a, *fused, b);
		break;
	case HFD_METASPACE:
		rc = dec_metaspace(d, a, b);
		break;
	case HFD_WORDPIECE:
		rc = dec_wordpiece(d, a, b);
		break;
	case HFD_REPLACE: {
		struct hf_norm r = { .kind = HFN_REPLACE, .pat = d->pat, .str = d->str,
				     .n_str = d->n_str };

		rc = hftok_normalize(v->hf, &r, a->p, a->n, b);
		break;
	}
	default:
		break;
	}
	t = *a;
	*a = *b;
	*b = t;
	return rc;
}

size_t hftok_piece(const struct vocab *v, fx_token id, bool special, char *buf, size_t cap,
		   int *rc)
{
	struct span text = strtab_get(&v->text, id);
	struct sbuf a = { 0 }, b = { 0 };
	bool fused = false;
	size_t n = 0;

	*rc = FX_OK;
	if (!special && (v->attr[id] & ATTR_CONTROL))
		return 0;
	if (!v->hf->dec) /* tokenizers joins the tokens with spaces */
		*rc = sbuf_put(&a, " ", 1);
	if (!*rc && !(*rc = sbuf_put(&a, text.p, text.n)) && v->hf->dec)
		*rc = dec_apply(v, v->hf->dec, &a, &b, &fused);
	if (!*rc) {
		n = a.n;
		if (n && buf && cap)
			memcpy(buf, a.p, n < cap ? n : cap);
	}
	fx_free(a.p);
	fx_free(b.p);
	return n;
}
