/* UTF-8 helpers with llama.cpp's exact leniency (src/unicode.cpp:
 * unicode_len_utf8, unicode_cpt_from_utf8, unicode_cpt_to_utf8), so that
 * malformed input is tokenized the way the oracle tokenizes it.
 */
#include "tokenizer/vocab_impl.h"

size_t utf8_len(unsigned char c)
{
	static const unsigned char len[16] = { 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4 };

	return len[c >> 4];
}

static bool cont(const char *s, size_t n, size_t i)
{
	return i < n && ((unsigned char)s[i] & 0xc0) == 0x80;
}

uint32_t utf8_decode_lenient(const char *s, size_t n, size_t *off)
{
	size_t i = *off;
	uint32_t c = (unsigned char)s[i];

	if (!(c & 0x80)) {
		*off = i + 1;
		return c;
	}
	if ((c & 0xe0) == 0xc0 && cont(s, n, i + 1)) {
		*off = i + 2;
		return ((c & 0x1f) << 6) | ((unsigned char)s[i + 1] & 0x3f);
	}
	if ((c & 0xf0) == 0xe0 && cont(s, n, i + 1) && cont(s, n, i + 2)) {
		*off = i + 3;
		return ((c & 0x0f) << 12) | (((unsigned char)s[i + 1] & 0x3f) << 6) |
		       ((unsigned char)s[i + 2] & 0x3f);
	}
	if ((c & 0xf8) == 0xf0 && cont(s, n, i + 1) && cont(s, n, i + 2) && cont(s, n, i + 3)) {
		*off = i + 4;
		return ((c & 0x07) << 18) | (((unsigned char)s[i + 1] & 0x3f) << 12) |
		       (((unsigned char)s[i + 2] & 0x3f) << 6) | ((unsigned char)s[i + 3] & 0x3f);
	}
	*off = i + 1; /* continuation byte, bad lead or truncated sequence */
	return 0xfffd;
}

size_t utf8_encode(uint32_t c, char *out)
{
	if (c <= 0x7f) {
		out[0] = (char)c;
		return 1;
	}
	if (c <= 0x7ff) {
		out[0] = (char)(0xc0 | (c >> 6));
		out[1] = (char)(0x80 | (c & 0x3f));
		return 2;
	}
	if (c <= 0xffff) {
		out[0] = (char)(0xe0 | (c >> 12));
		out[1] = (char)(0x80 | ((c >> 6) & 0x3f));
		out[2] = (char)(0x80 | (c & 0x3f));
		return 3;
	}
	out[0] = (char)(0xf0 | ((c >> 18) & 0x07));
	out[1] = (char)(0x80 | ((c >> 12) & 0x3f));
	out[2] = (char)(0x80 | ((c >> 6) & 0x3f));
	out[3] = (char)(0x80 | (c & 0x3f));
	return 4;
}
