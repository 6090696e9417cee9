/* WordPiece (BERT), following llama.cpp's llm_tokenizer_wpm_session
 * (src/llama-vocab.cpp): BertNormalizer-style preprocessing into words,
 * then per word a greedy longest match from the left over "▁" + word.
 *
 * The GGUF vocabulary already carries the convention llama.cpp's converter
 * gives it: word-initial pieces start with U+2581, continuation pieces
 * ("##ing" in the Hugging Face file) are bare.
 */
#include <string.h>

#include "core/alloc.h"
#include "tokenizer/vocab_impl.h"

#define PHANTOM_SPACE "\xe2\x96\x81" /* U+2581 before every word */
#define PHANTOM_LEN 3

/* CJK ideograph blocks that are words of their own (BERT's
 * _is_chinese_char, with llama.cpp's 0x2B920 for the start of Ext E). */
static bool is_cjk(uint32_t c)
{
	return (c >= 0x4e00 && c <= 0x9fff) || (c >= 0x3400 && c <= 0x4dbf) ||
	       (c >= 0x20000 && c <= 0x2a6df) || (c >= 0x2a700 && c <= 0x2b73f) ||
	       (c >= 0x2b740 && c <= 0x2b81f) || (c >= 0x2b920 && c <= 0x2ceaf) ||
	       (c >= 0xf900 && c <= 0xfaff) || (c >= 0x2f800 && c <= 0x2fa1f);
}

/* Tokens of one word w[0..n) (which starts with the phantom space): the
 * longest token at each position; when some position has none, the whole
 * word becomes [UNK] (dropped when the vocabulary has no [UNK]: llama.cpp
 * would emit id -1 there). */
static void match_word(const struct vocab *v, const char *w, size_t n, struct tok_out *o)
{
	size_t start = o->n;

	for (size_t i = 0; i < n;) {
		size_t j = i + (size_t)v->max_token_len + 1 < n ? i + (size_t)v->max_token_len + 1 : n;
		fx_token t = -1;

		for (; j > i && (t = vocab_text_to_token(v, w + i, j - i)) < 0; j--)
			;
		if (t < 0) {
			o->n = start; /* discard the word's pieces */
			break;
		}
		tok_push(o, t);
		i = j;
	}
	if (o->n == start && v->unk >= 0)
		tok_push(o, v->unk);
}

/* The word being built in buf (after the phantom space), if any, is done. */
static void end_word(const struct vocab *v, const char *buf, size_t *k, struct tok_out *o)
{
	if (*k > PHANTOM_LEN)
		match_word(v, buf, *k, o);
	*k = PHANTOM_LEN;
}

int wpm_tokenize(const struct vocab *v, const char *text, size_t n, struct tok_out *o)
{
	char *buf = fx_malloc_array(n + 1, 4); /* a code point grows to at most 4 bytes */
	size_t k = PHANTOM_LEN, off = 0;

	if (!buf)
		return FX_E_NOMEM;
	memcpy(buf, PHANTOM_SPACE, PHANTOM_LEN);
	while (off < n) {
		uint32_t c = utf8_decode_lenient(text, n, &off);
		unsigned cls;

		if (c > 0x10ffff) /* llama.cpp throws on these; ferrox drops them */
			continue;
		if (v->strip_accents)
			c = ucd_nfd_first(c);
		cls = ucd_class(c);
		if (ucd_is_space(c)) {
			end_word(v, buf, &k, o);
			continue;
		}
		if (c == 0 || c == 0xfffd || cls == UCD_CONTROL ||
		    (v->strip_accents && cls == UCD_MARK))
			continue;
		if (cls == UCD_PUNCT || (c < 0x7f && cls == UCD_SYMBOL) || is_cjk(c)) {
			end_word(v, buf, &k, o); /* a word of its own */
			k += utf8_encode(v->lowercase ? ucd_tolower(c) : c, buf + k);
			end_word(v, buf, &k, o);
			continue;
		}
		k += utf8_encode(v->lowercase ? ucd_tolower(c) : c, buf + k);
	}
	end_word(v, buf, &k, o);
	fx_free(buf);
	return FX_OK;
}
