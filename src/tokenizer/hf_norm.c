/* The tokenizer.json normalizers that need Unicode tables, through
 * utf8proc: NFC/NFD/NFKC/NFKD (normalizers/unicode.rs), Lowercase and
 * Strip / StripAccents (normalizers/utils.rs, strip.rs) and BertNormalizer
 * (normalizers/bert.rs). Rust's char predicates as tokenizers uses them:
 * is_whitespace is Unicode White_Space; to_lowercase is the full mapping
 * per character (U+0130 gives two; no final-sigma rule, as tokenizers maps
 * characters one by one); a combining mark is Mn/Mc/Me, BertNormalizer's
 * accents Mn only. utf8proc's Unicode version may differ from the Rust
 * crates' for recently assigned characters.
 */
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "core/alloc.h"
#include "tokenizer/hf_impl.h"

static bool white_space(uint32_t c)
{
	return (c >= 9 && c <= 13) || c == ' ' || c == 0x85 || c == 0xa0 || c == 0x1680 ||
	       (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 || c == 0x202f ||
	       c == 0x205f || c == 0x3000;
}

static int put_cpt(struct sbuf *b, uint32_t c)
{
	char u[4];

	return sbuf_put(b, u, utf8_encode(c, u));
}

/* utf8proc_map with options (compose / decompose, compat). */
static int unicode_form(const char *s, size_t n, int options, struct sbuf *out)
{
	utf8proc_uint8_t *dst = NULL;
	utf8proc_ssize_t k;
	int rc;

	if (!n)
		return FX_OK;
	k = utf8proc_map((const utf8proc_uint8_t *)s, (utf8proc_ssize_t)n, &dst,
			 (utf8proc_option_t)(UTF8PROC_STABLE | options));
	if (k == UTF8PROC_ERROR_NOMEM)
		return FX_E_NOMEM;
	if (k < 0) /* not reached for valid UTF-8: keep the text */
		return sbuf_put(out, s, n);
	rc = sbuf_put(out, (const char *)dst, (size_t)k);
	free(dst); /* utf8proc's own malloc */
	return rc;
}

static bool is_mark(uint32_t c, bool nonspacing_only)
{
	utf8proc_category_t k = utf8proc_category((utf8proc_int32_t)c);

	return k == UTF8PROC_CATEGORY_MN ||
	       (!nonspacing_only && (k == UTF8PROC_CATEGORY_MC || k == UTF8PROC_CATEGORY_ME));
}

/* char::to_lowercase of one character. */
static int lower(struct sbuf *b, uint32_t c)
{
	int rc;

	if (c == 0x130) /* SpecialCasing: i + combining dot above */
		return (rc = put_cpt(b, 'i')) ? rc : put_cpt(b, 0x307);
	return put_cpt(b, (uint32_t)utf8proc_tolower((utf8proc_int32_t)c));
}

static bool bert_chinese(uint32_t c)
{
	return (c >= 0x4e00 && c <= 0x9fff) || (c >= 0x3400 && c <= 0x4dbf) ||
	       (c >= 0x20000 && c <= 0x2a6df) || (c >= 0x2a700 && c <= 0x2b73f) ||
	       (c >= 0x2b740 && c <= 0x2b81f) || (c >= 0x2b920 && c <= 0x2ceaf) ||
	       (c >= 0xf900 && c <= 0xfaff) || (c >= 0x2f800 && c <= 0x2fa1f);
}

/* Rust's is_other: Cc, Cf, Cs, Co, Cn. */
static bool is_other(uint32_t c)
{
	utf8proc_category_t k = utf8proc_category((utf8proc_int32_t)c);

	return k == UTF8PROC_CATEGORY_CC || k == UTF8PROC_CATEGORY_CF || k == UTF8PROC_CATEGORY_CS ||
	       k == UTF8PROC_CATEGORY_CO || k == UTF8PROC_CATEGORY_CN;
}

/* BertNormalizer's clean_text and handle_chinese_chars, character by
 * character. */
static int bert_chars(const struct hf_norm *nm, uint32_t c, struct sbuf *b)
{
	int rc;

	if (nm->clean_text) {
		bool ws = c == '\t' || c == '\n' || c == '\r' || white_space(c);

		if (c == 0 || c == 0xfffd || (!ws && is_other(c)))
			return FX_OK;
		if (ws)
			c = ' ';
	}
	if (!nm->chinese || !bert_chinese(c))
		return put_cpt(b, c);
	if ((rc = sbuf_put(b, " ", 1)) || (rc = put_cpt(b, c)))
		return rc;
	return sbuf_put(b, " ", 1);
}

/* Each character of s through one per-character step. */
static int per_char(const struct hf_norm *nm, const char *s, size_t n, struct sbuf *out)
{
	struct sbuf t = { 0 };
	size_t off = 0;
	int rc = FX_OK;

	if (nm->kind == HFN_BERT) {
		while (off < n && !rc)
			rc = bert_chars(nm, utf8_decode_lenient(s, n, &off), &t);
		if (!rc && nm->strip_accents) { /* NFD, then without Mn */
			struct sbuf d = { 0 };

			rc = unicode_form(t.p, t.n, UTF8PROC_DECOMPOSE, &d);
			t.n = 0;
			for (off = 0; off < d.n && !rc;) {
				uint32_t c = utf8_decode_lenient(d.p, d.n, &off);

				if (!is_mark(c, true))
					rc = put_cpt(&t, c);
			}
			fx_free(d.p);
		}
		for (off = 0; off < t.n && !rc;) {
			uint32_t c = utf8_decode_lenient(t.p, t.n, &off);

			rc = nm->lowercase ? lower(out, c) : put_cpt(out, c);
		}
		fx_free(t.p);
		return rc;
	}
	while (off < n && !rc) {
		uint32_t c = utf8_decode_lenient(s, n, &off);

		if (nm->kind == HFN_LOWERCASE)
			rc = lower(out, c);
		else if (!is_mark(c, false)) /* HFN_STRIP_ACCENTS */
			rc = put_cpt(out, c);
	}
	return rc;
}

/* Strip White_Space from the chosen ends. */
static int strip(const struct hf_norm *nm, const char *s, size_t n, struct sbuf *out)
{
	size_t a = 0, b = n, off;

	while (nm->left && a < b) {
		off = a;
		if (!white_space(utf8_decode_lenient(s, n, &off)))
			break;
		a = off;
	}
	while (nm->right && b > a) {
		size_t start = b - 1;

		while (start > a && ((unsigned char)s[start] & 0xc0) == 0x80)
			start--;
		off = start;
		if (!white_space(utf8_decode_lenient(s, n, &off)))
			break;
		b = start;
	}
	return sbuf_put(out, s + a, b - a);
}

int hfnorm_unicode(const struct hf_norm *nm, const char *s, size_t n, struct sbuf *out)
{
	switch (nm->kind) {
	case HFN_NFC:
		return unicode_form(s, n, UTF8PROC_COMPOSE, out);
	case HFN_NFD:
		return unicode_form(s, n, UTF8PROC_DECOMPOSE, out);
	case HFN_NFKC:
		return unicode_form(s, n, UTF8PROC_COMPOSE | UTF8PROC_COMPAT, out);
	case HFN_NFKD:
		return unicode_form(s, n, UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT, out);
	case HFN_STRIP:
		return strip(nm, s, n, out);
	default:
		return per_char(nm, s, n, out);
	}
}
