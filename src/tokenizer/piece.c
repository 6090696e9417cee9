/* Token id -> bytes (llama.cpp's llama_vocab::impl::token_to_piece) and
 * the streaming detokenizer that holds back UTF-8 split across tokens.
 */
#include <string.h>

#include "core/alloc.h"
#include "tokenizer/hf_impl.h"

/* Bytes are counted past cap so the caller learns the size it needs. */
struct byte_out {
	char *p;
	size_t cap;
	size_t n;
};

/* Append n bytes (those past cap are only counted). */
static void put(struct byte_out *o, const char *s, size_t n)
{
	if (o->n < o->cap)
		memcpy(o->p + o->n, s, o->cap - o->n < n ? o->cap - o->n : n);
	o->n += n;
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* <0xNN> -> NN, reading the two characters at 3..4 as strtol would. */
static char byte_of(const struct span *t)
{
	int hi = t->n > 3 ? hexval(t->p[3]) : -1, lo = t->n > 4 ? hexval(t->p[4]) : -1;

	if (hi < 0)
		return 0;
	return (char)(lo < 0 ? hi : hi * 16 + lo);
}

/* Byte-level BPE text back to bytes (llama_decode_text): each code point
 * is a byte through GPT-2's map; one outside the map is written as
 * "[UNK_BYTE_0x<its UTF-8 in hex><token text>]". */
static void decode_bpe(const struct vocab *v, const struct span *t, struct byte_out *o)
{
	size_t off = 0;

	while (off < t->n) {
		uint32_t c = utf8_decode_lenient(t->p, t->n, &off);

		if (c < 324 && v->cpt_byte[c] >= 0) {
			char b = (char)v->cpt_byte[c];

			put(o, &b, 1);
		} else {
			static const char hex[] = "0123456789abcdef";
			char u[4];
			size_t len = utf8_encode(c, u);

			put(o, "[UNK_BYTE_0x", 12);
			for (size_t i = 0; i < len; i++) {
				char h[2] = { hex[(uint8_t)u[i] >> 4], hex[(uint8_t)u[i] & 15] };

				put(o, h, 2);
			}
			put(o, t->p, t->n);
			put(o, "]", 1);
		}
	}
}

/* token_to_piece: control/unknown tokens only when special; their and
 * user-defined texts verbatim; normal SPM, WordPiece and raw-UTF-8 BPE
 * (Gemma 4) text with U+2581 as space (a WordPiece continuation piece has
 * none, so it joins the previous word; llama.cpp has no "##" rule);
 * normal byte-level BPE text through GPT-2's byte map; byte tokens as the
 * byte. */
static int piece(const struct vocab *v, fx_token id, bool special, struct byte_out *o)
{
	const struct span text = strtab_get(&v->text, id), *t = &text;
	uint32_t attr = v->attr[id];

	if (v->type == VOCAB_HF) {
		size_t room = o->n < o->cap ? o->cap - o->n : 0;
		int rc;

		o->n += hftok_piece(v, id, special, room ? o->p + o->n : NULL, room, &rc);
		return rc;
	}
	if (!special && (attr & (ATTR_UNKNOWN | ATTR_CONTROL)))
		return FX_OK;
	if (attr & (ATTR_UNKNOWN | ATTR_CONTROL | ATTR_USER_DEFINED)) {
		put(o, t->p, t->n);
	} else if (attr & ATTR_NORMAL) {
		if (v->type == VOCAB_BPE && !v->pre->raw_utf8) {
			decode_bpe(v, t, o);
			return FX_OK;
		}
		for (size_t i = 0; i < t->n; i++) { /* U+2581 -> space */
			if (i + 2 < t->n && !memcmp(t->p + i, "\xe2\x96\x81", 3)) {
				put(o, " ", 1);
				i += 2;
			} else {
				put(o, t->p + i, 1);
			}
		}
	} else if (attr & ATTR_BYTE) {
		char b = byte_of(t);

		put(o, &b, 1);
	}
	/* UNUSED or UNDEFINED alone: no text */
	return FX_OK;
}

int vocab_token_to_piece(const struct vocab *v, fx_token t, bool special,
			 char *buf, size_t cap, size_t *n_out)
{
	struct byte_out o = { buf, buf ? cap : 0, 0 };

	int rc;

	if (!v || !n_out || t < 0 || t >= v->n_tokens)
		return FX_E_INVALID;
	if ((rc = piece(v, t, special, &o)))
		return rc;
	*n_out = o.n;
	return o.n > cap || (!buf && o.n) ? FX_E_INVALID : FX_OK;
}

/* ---- streaming detokenizer ------------------------------------------- */

/* Bytes in the well-formed UTF-8 sequence led by b (Unicode table 3-7),
 * or 0 when b cannot lead one. */
static int seq_len(uint8_t b)
{
	if (b < 0x80)
		return 1;
	if (b >= 0xc2 && b <= 0xdf)
		return 2;
	if (b >= 0xe0 && b <= 0xef)
		return 3;
	if (b >= 0xf0 && b <= 0xf4)
		return 4;
	return 0;
}

/* May b be byte i (>= 1) of a sequence led by lead? */
static bool cont_ok(uint8_t lead, int i, uint8_t b)
{
	uint8_t lo = 0x80, hi = 0xbf;

	if (i == 1) {
		if (lead == 0xe0)
			lo = 0xa0;
		else if (lead == 0xed)
			hi = 0x9f;
		else if (lead == 0xf0)
			lo = 0x90;
		else if (lead == 0xf4)
			hi = 0x8f;
	}
	return b >= lo && b <= hi;
}

static void put_fffd(struct byte_out *o)
{
	put(o, "\xef\xbf\xbd", 3);
}

/* Feed bytes through st: complete sequences are written, an ill-formed
 * one becomes one U+FFFD per maximal subpart (as Python's
 * bytes.decode("utf-8", "replace")), an incomplete tail stays pending. */
static void feed(struct fx_detok *st, const unsigned char *p, size_t n, struct byte_out *o)
{
	for (size_t i = 0; i < n; i++) {
		uint8_t b = p[i];

		if (st->n_pending) {
			uint8_t lead = st->pending[0];

			if (cont_ok(lead, st->n_pending, b)) {
				st->pending[st->n_pending++] = b;
				if (st->n_pending == seq_len(lead)) {
					put(o, (const char *)st->pending, (size_t)st->n_pending);
					st->n_pending = 0;
				}
				continue;
			}
			put_fffd(o);
			st->n_pending = 0;
		}
		switch (seq_len(b)) {
		case 0:
			put_fffd(o);
			break;
		case 1:
			put(o, (const char *)&b, 1);
			break;
		default:
			st->pending[0] = b;
			st->n_pending = 1;
			break;
		}
	}
}

/* Is st a state this file could have left (guards caller-made ones)? */
static bool detok_state_ok(const struct fx_detok *st)
{
	return st && st->n_pending >= 0 && st->n_pending < 4 &&
	       (st->n_pending == 0 || seq_len(st->pending[0]) > st->n_pending);
}

int vocab_detok_push(const struct vocab *v, struct fx_detok *st, fx_token t,
		     bool special, char *out, size_t cap, size_t *n_out)
{
	char small[256], *buf = small;
	struct byte_out pc = { small, sizeof(small), 0 }, o = { out, out ? cap : 0, 0 };
	struct fx_detok next;
	int rc;

	if (!v || !n_out || !detok_state_ok(st) || t < 0 || t >= v->n_tokens)
		return FX_E_INVALID;
	if ((rc = piece(v, t, special, &pc)))
		return rc;
	if (pc.n > sizeof(small)) {
		if (!(buf = fx_malloc_array(pc.n, 1)))
			return FX_E_NOMEM;
		pc = (struct byte_out){ buf, pc.n, 0 };
		if ((rc = piece(v, t, special, &pc))) {
			fx_free(buf);
			return rc;
		}
	}
	next = *st;
	feed(&next, (const unsigned char *)buf, pc.n, &o);
	if (buf != small)
		fx_free(buf);
	*n_out = o.n;
	if (o.n > o.cap)
		return FX_E_INVALID; /* nothing consumed: st is unchanged */
	*st = next;
	return FX_OK;
}

int detok_flush(struct fx_detok *st, char *out, size_t cap, size_t *n_out)
{
	struct byte_out o = { out, out ? cap : 0, 0 };

	if (!n_out || !detok_state_ok(st))
		return FX_E_INVALID;
	if (st->n_pending)
		put_fffd(&o);
	*n_out = o.n;
	if (o.n > o.cap)
		return FX_E_INVALID;
	st->n_pending = 0;
	return FX_OK;
}
