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

/* bert.rs's is_control through the unicode_categories crate's is_other:
 * Cc, Cf, Cs and Co. Unassigned code points (Cn) are NOT in its tables, so
 * they stay (checked against tokenizers 0.23.3: U+038B, U+0378, U+2065
 * kept; U+E000, U+00AD, U+E0001 removed). */
static bool is_other(uint32_t c)
{
	utf8proc_category_t k = utf8proc_category((utf8proc_int32_t)c);

	return k == UTF8PROC_CATEGORY_CC || k == UTF8PROC_CATEGORY_CF || k == UTF8PROC_CATEGORY_CS ||
	       k == UTF8PROC_CATEGORY_CO;
}

/* BertNormalizer's clean_text and handle_chinese_chars, character by
 * character. */
static int bert_chars(const struct hf_norm *nm, uint32_t c, struct sbuf *b)
{
	int rc;

	if (nm->clean_text) {
		bool ws = c == '\t' || c == '\n' || c == '\r' || white_space(c);

		/* removal first (bert.rs filters, then maps whitespace): U+0085
		 * is both Cc and white space, and goes */
		if (c == 0 || c == 0xfffd || (c != '\t' && c != '\n' && c != '\r' && is_other(c)))
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

static int precompiled(const struct hf_norm *nm, const char *s, size_t n, struct sbuf *out);

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
	case HFN_PRECOMPILED:
		return precompiled(nm, s, n, out);
	default:
		return per_char(nm, s, n, out);
	}
}

/* ---- Precompiled (normalizers/precompiled.rs, the spm_precompiled crate) */

static int b64val(char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	return c == '+' ? 62 : c == '/' ? 63 : -1;
}

int hfnorm_precompiled_load(struct hf_norm *nm, const char *b64, struct fx_err *err)
{
	size_t n = strlen(b64), k = 0;
	unsigned char *raw = fx_malloc_array(n / 4 * 3 + 3, 1);
	uint32_t acc = 0, trie_bytes;
	int bits = 0;

	if (!raw)
		return FX_E_NOMEM;
	for (size_t i = 0; i < n && b64[i] != '='; i++) {
		int v = b64val(b64[i]);

		if (v < 0) {
			fx_free(raw);
			return fx_fail(err, FX_E_FORMAT, "tokenizer.json: precompiled_charsmap is not "
				       "base64 (byte %zu)", i);
		}
		acc = acc << 6 | (uint32_t)v;
		if ((bits += 6) >= 8) {
			bits -= 8;
			raw[k++] = (unsigned char)(acc >> bits);
		}
	}
	trie_bytes = k >= 4 ? (uint32_t)raw[0] | (uint32_t)raw[1] << 8 | (uint32_t)raw[2] << 16 |
			      (uint32_t)raw[3] << 24 : 0;
	if (k < 4 || trie_bytes % 4 || trie_bytes < 4 || trie_bytes > k - 4) {
		fx_free(raw);
		return fx_fail(err, FX_E_FORMAT, "tokenizer.json: precompiled_charsmap is truncated");
	}
	nm->n_units = trie_bytes / 4;
	nm->n_blob = k - 4 - trie_bytes;
	nm->units = fx_malloc_array(nm->n_units, sizeof(*nm->units));
	nm->blob = fx_malloc_array(nm->n_blob + 1, 1);
	if (nm->units && nm->blob) {
		for (size_t i = 0; i < nm->n_units; i++) {
			const unsigned char *u = raw + 4 + 4 * i;

			nm->units[i] = (uint32_t)u[0] | (uint32_t)u[1] << 8 | (uint32_t)u[2] << 16 |
				       (uint32_t)u[3] << 24;
		}
		memcpy(nm->blob, raw + 4 + trie_bytes, nm->n_blob);
	}
	fx_free(raw);
	return nm->units && nm->blob ? FX_OK : FX_E_NOMEM;
}

/* darts-clone's common prefix search, first (shortest) match only: the
 * blob offset of its normalized string, or -1. A malformed array (an
 * index past its end) matches nothing. */
static long first_prefix(const struct hf_norm *nm, const char *s, size_t n)
{
	size_t pos = 0;
	uint32_t unit = nm->units[0];

	pos ^= (unit >> 10) << ((unit & (1u << 9)) >> 6);
	for (size_t i = 0; i < n && s[i]; i++) {
		uint8_t c = (uint8_t)s[i];

		pos ^= c;
		if (pos >= nm->n_units)
			return -1;
		unit = nm->units[pos];
		if ((unit & ((1u << 31) | 0xff)) != c)
			return -1;
		pos ^= (unit >> 10) << ((unit & (1u << 9)) >> 6);
		if (pos >= nm->n_units)
			return -1;
		if ((unit >> 8) & 1)
			return (long)(nm->units[pos] & ((1u << 31) - 1));
	}
	return -1;
}

/* chunk s[0..n) through the map: 1 when replaced (appended to out). */
static int transform(const struct hf_norm *nm, const char *s, size_t n, struct sbuf *out)
{
	long at = first_prefix(nm, s, n);
	size_t end;
	int rc;

	if (at < 0 || (size_t)at >= nm->n_blob)
		return 0;
	end = (size_t)at;
	while (end < nm->n_blob && nm->blob[end])
		end++;
	rc = sbuf_put(out, nm->blob + at, end - (size_t)at);
	return rc ? rc : 1;
}

/* Grapheme by grapheme (under 6 bytes: as a whole), else character by
 * character, each through the map when it matches. */
static int precompiled(const struct hf_norm *nm, const char *s, size_t n, struct sbuf *out)
{
	size_t g = 0;
	int rc = FX_OK;

	if (!nm->units)
		return sbuf_put(out, s, n);
	while (g < n && !rc) {
		utf8proc_int32_t state = 0;
		size_t e = g, off;
		uint32_t prev = utf8_decode_lenient(s, n, &e);

		for (off = e; off < n; e = off) { /* the grapheme ends at e */
			uint32_t c = utf8_decode_lenient(s, n, &off);

			if (utf8proc_grapheme_break_stateful((utf8proc_int32_t)prev,
							     (utf8proc_int32_t)c, &state))
				break;
			prev = c;
		}
		if (e - g < 6 && (rc = transform(nm, s + g, e - g, out)) != 0) {
			rc = rc < 0 ? rc : FX_OK;
			g = e;
			continue;
		}
		for (off = g; off < e && !rc;) {
			size_t c0 = off;

			utf8_decode_lenient(s, n, &off);
			rc = transform(nm, s + c0, off - c0, out);
			rc = rc < 0 ? rc : rc ? FX_OK : sbuf_put(out, s + c0, off - c0);
		}
		g = e;
	}
	return rc;
}
