/* SentencePiece's tokenizer.model: a protobuf ModelProto (sentencepiece's
 * src/sentencepiece_model.proto), read from the wire format directly
 * (protobuf's encoding.md): each field is a varint key (number << 3 | wire
 * type) then a varint (type 0), 8 bytes (1), a varint length and that many
 * bytes (2) or 4 bytes (5).
 *
 * Read: ModelProto field 1 pieces (SentencePiece: 1 piece, 2 score, 3
 * type), 2 trainer_spec (3 model_type, 4 vocab_size, 25 split_digits, 35
 * byte_fallback, 40-43 unk/bos/eos/pad id, 45-48 their pieces), 3
 * normalizer_spec (1 name, 2 precompiled_charsmap, 3 add_dummy_prefix, 4
 * remove_extra_whitespaces, 5 escape_whitespaces), with the .proto's
 * defaults for absent ones. Every other field, of any message, is skipped
 * by its wire type. Strict: a varint of more than 64 bits, a length past
 * the end of its message, a known field with the wrong wire type, a group
 * (wire types 3/4, which no sentencepiece writes), an enum value the .proto
 * does not define, a piece that is not UTF-8 or holds a NUL byte: each is
 * FX_E_FORMAT naming the file and the byte offset.
 */
#include <stdio.h>
#include <string.h>

#include "core/alloc.h"
#include "core/status.h"
#include "tokenizer/hf_impl.h"

enum { WT_VARINT = 0, WT_I64 = 1, WT_LEN = 2, WT_I32 = 5 };

/* A cursor over one message: bytes [pos, end) of the file's buf. */
struct spm_rd {
	const unsigned char *buf;
	size_t pos, end;
	const char *path; /* for messages */
	struct fx_err *err;
};

static int rd_fail(const struct spm_rd *r, size_t at, const char *what)
{
	return fx_fail(r->err, FX_E_FORMAT, "%s: offset %zu: %s", r->path, at, what);
}

/* One varint into *v (protobuf: 7 bits per byte, low first, at most 10
 * bytes, the 10th holding only bit 63). */
static int rd_varint(struct spm_rd *r, uint64_t *v)
{
	size_t at = r->pos;
	uint64_t x = 0;

	for (int k = 0; k < 10; k++) {
		unsigned char c;

		if (r->pos >= r->end)
			return rd_fail(r, at, "truncated varint");
		c = r->buf[r->pos++];
		if (k == 9 && c > 1)
			return rd_fail(r, at, "varint overflows 64 bits");
		x |= (uint64_t)(c & 0x7f) << (7 * k);
		if (!(c & 0x80)) {
			*v = x;
			return FX_OK;
		}
	}
	return rd_fail(r, at, "varint overflows 64 bits");
}

/* A field's key: *field (number) and *wt (wire type). */
static int rd_key(struct spm_rd *r, uint32_t *field, int *wt)
{
	size_t at = r->pos;
	uint64_t k = 0;
	int rc = rd_varint(r, &k);

	if (rc)
		return rc;
	*wt = (int)(k & 7);
	if (k >> 3 == 0 || k >> 3 > 0x1fffffff)
		return rd_fail(r, at, "field number 0 or past 2^29");
	*field = (uint32_t)(k >> 3);
	if (*wt == 3 || *wt == 4)
		return rd_fail(r, at, "a group (wire type 3/4) is not supported");
	if (*wt > 5)
		return rd_fail(r, at, "invalid wire type");
	return FX_OK;
}

/* A length-delimited payload: [*p, *p + *n) of buf, the cursor past it. */
static int rd_bytes(struct spm_rd *r, const unsigned char **p, size_t *n)
{
	size_t at = r->pos;
	uint64_t len = 0;
	int rc = rd_varint(r, &len);

	if (rc)
		return rc;
	if (len > r->end - r->pos)
		return rd_fail(r, at, "length runs past the end of its message");
	*p = r->buf + r->pos;
	*n = (size_t)len;
	r->pos += (size_t)len;
	return FX_OK;
}

/* Skip one value of wire type wt. */
static int rd_skip(struct spm_rd *r, int wt)
{
	size_t at = r->pos, w = wt == WT_I64 ? 8 : 4;
	const unsigned char *p = NULL;
	uint64_t v = 0;

	if (wt == WT_VARINT)
		return rd_varint(r, &v);
	if (wt == WT_LEN)
		return rd_bytes(r, &p, &w);
	if (r->end - r->pos < w)
		return rd_fail(r, at, "truncated fixed-width value");
	r->pos += w;
	return FX_OK;
}

/* Check that a known field has the wire type the .proto gives it. */
static int rd_want(const struct spm_rd *r, size_t at, int wt, int want, const char *name)
{
	char msg[96];

	if (wt == want)
		return FX_OK;
	snprintf(msg, sizeof(msg), "%s has wire type %d, not %d", name, wt, want);
	return rd_fail(r, at, msg);
}

/* Varint field values, as protobuf reads them: int32 and enums keep the low
 * 32 bits (negative numbers are sign-extended to 10 bytes on the wire). */
static int rd_int32(struct spm_rd *r, size_t at, int wt, const char *name, int32_t *out)
{
	uint64_t v = 0;
	int rc = rd_want(r, at, wt, WT_VARINT, name);

	if (!rc && !(rc = rd_varint(r, &v)))
		*out = (int32_t)(uint32_t)v;
	return rc;
}

static int rd_bool(struct spm_rd *r, size_t at, int wt, const char *name, bool *out)
{
	uint64_t v = 0;
	int rc = rd_want(r, at, wt, WT_VARINT, name);

	if (!rc && !(rc = rd_varint(r, &v)))
		*out = v != 0;
	return rc;
}

static int rd_span(struct spm_rd *r, size_t at, int wt, const char *name, struct span *out)
{
	const unsigned char *p = NULL;
	size_t n = 0;
	int rc = rd_want(r, at, wt, WT_LEN, name);

	if (!rc && !(rc = rd_bytes(r, &p, &n)))
		*out = (struct span){ (const char *)p, n };
	return rc;
}

/* Is s[0..n) well-formed UTF-8 without a NUL byte? */
static bool utf8_clean(const unsigned char *s, size_t n)
{
	for (size_t i = 0; i < n;) {
		unsigned c = s[i];
		size_t len = c < 0x80 ? 1 : (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3
			   : (c & 0xf8) == 0xf0 ? 4 : 0;
		uint32_t cp;

		if (!c || !len || len > n - i || (len == 2 && c < 0xc2))
			return false;
		cp = len == 1 ? c : c & (0x7f >> len);
		for (size_t k = 1; k < len; k++) {
			if ((s[i + k] & 0xc0) != 0x80)
				return false;
			cp = cp << 6 | (s[i + k] & 0x3f);
		}
		if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
		    (cp >= 0xd800 && cp <= 0xdfff))
			return false;
		i += len;
	}
	return true;
}

/* A string field that the tokenizer uses as text (a piece or a special
 * piece's name): UTF-8 without NUL (the JSON tree cannot hold a NUL). */
static int rd_text(struct spm_rd *r, size_t at, int wt, const char *name, struct span *out)
{
	char msg[96];
	int rc = rd_span(r, at, wt, name, out);

	if (rc || utf8_clean((const unsigned char *)out->p, out->n))
		return rc;
	snprintf(msg, sizeof(msg), "%s is not UTF-8 text without NUL bytes", name);
	return rd_fail(r, at, msg);
}

/* ModelProto.SentencePiece at the cursor's message. */
static int rd_piece(struct spm_rd *r, struct hfspm_piece *p)
{
	int rc = FX_OK;

	*p = (struct hfspm_piece){ .type = HFSPM_NORMAL };
	while (!rc && r->pos < r->end) {
		size_t at = r->pos;
		uint32_t f;
		int wt;
		int32_t t = 0;

		if ((rc = rd_key(r, &f, &wt)))
			break;
		if (f == 1) {
			rc = rd_text(r, at, wt, "piece", &p->text);
		} else if (f == 2) {
			if (!(rc = rd_want(r, at, wt, WT_I32, "score")) && r->end - r->pos < 4)
				rc = rd_fail(r, at, "truncated score");
			if (!rc) {
				const unsigned char *b = r->buf + r->pos;
				uint32_t u = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 |
					     (uint32_t)b[3] << 24;

				memcpy(&p->score, &u, sizeof(u)); /* IEEE-754 single, little-endian */
				r->pos += 4;
			}
		} else if (f == 3) {
			if (!(rc = rd_int32(r, at, wt, "piece type", &t)) && (t < 1 || t > 6))
				rc = rd_fail(r, at, "piece type is not one of NORMAL..BYTE (1..6)");
			p->type = t;
		} else {
			rc = rd_skip(r, wt);
		}
	}
	return rc;
}

/* ModelProto.trainer_spec (field 2). */
static int rd_trainer(struct spm_rd *r, struct hfspm_model *m)
{
	int rc = FX_OK;

	while (!rc && r->pos < r->end) {
		size_t at = r->pos;
		uint32_t f;
		int wt;

		if ((rc = rd_key(r, &f, &wt)))
			break;
		switch (f) {
		case 3:
			if (!(rc = rd_int32(r, at, wt, "trainer_spec.model_type", &m->model_type)) &&
			    (m->model_type < 1 || m->model_type > 4))
				rc = rd_fail(r, at, "trainer_spec.model_type is not one of UNIGRAM, BPE, "
					     "WORD, CHAR (1..4)");
			break;
		case 4: rc = rd_int32(r, at, wt, "trainer_spec.vocab_size", &m->vocab_size); break;
		case 25: rc = rd_bool(r, at, wt, "trainer_spec.split_digits", &m->split_digits); break;
		case 35: rc = rd_bool(r, at, wt, "trainer_spec.byte_fallback", &m->byte_fallback); break;
		case 40: rc = rd_int32(r, at, wt, "trainer_spec.unk_id", &m->unk_id); break;
		case 41: rc = rd_int32(r, at, wt, "trainer_spec.bos_id", &m->bos_id); break;
		case 42: rc = rd_int32(r, at, wt, "trainer_spec.eos_id", &m->eos_id); break;
		case 43: rc = rd_int32(r, at, wt, "trainer_spec.pad_id", &m->pad_id); break;
		case 45: rc = rd_text(r, at, wt, "trainer_spec.unk_piece", &m->unk_piece); break;
		case 46: rc = rd_text(r, at, wt, "trainer_spec.bos_piece", &m->bos_piece); break;
		case 47: rc = rd_text(r, at, wt, "trainer_spec.eos_piece", &m->eos_piece); break;
		case 48: rc = rd_text(r, at, wt, "trainer_spec.pad_piece", &m->pad_piece); break;
		default: rc = rd_skip(r, wt);
		}
	}
	return rc;
}

/* ModelProto.normalizer_spec (field 3). */
static int rd_normalizer(struct spm_rd *r, struct hfspm_model *m)
{
	int rc = FX_OK;

	while (!rc && r->pos < r->end) {
		size_t at = r->pos;
		uint32_t f;
		int wt;

		if ((rc = rd_key(r, &f, &wt)))
			break;
		switch (f) {
		case 1: rc = rd_span(r, at, wt, "normalizer_spec.name", &m->norm_name); break;
		case 2: rc = rd_span(r, at, wt, "normalizer_spec.precompiled_charsmap", &m->charsmap); break;
		case 3: rc = rd_bool(r, at, wt, "normalizer_spec.add_dummy_prefix", &m->add_dummy_prefix); break;
		case 4:
			rc = rd_bool(r, at, wt, "normalizer_spec.remove_extra_whitespaces",
				     &m->remove_extra_whitespaces);
			break;
		case 5:
			rc = rd_bool(r, at, wt, "normalizer_spec.escape_whitespaces", &m->escape_whitespaces);
			break;
		default: rc = rd_skip(r, wt);
		}
	}
	return rc;
}

/* The sub-message of a length-delimited field: a cursor over its bytes. */
static int rd_sub(struct spm_rd *r, size_t at, int wt, const char *name, struct spm_rd *sub)
{
	const unsigned char *p = NULL;
	size_t n = 0;
	int rc = rd_want(r, at, wt, WT_LEN, name);

	if (rc || (rc = rd_bytes(r, &p, &n)))
		return rc;
	*sub = *r;
	sub->pos = (size_t)(p - r->buf);
	sub->end = sub->pos + n;
	return FX_OK;
}

int hfspm_parse(const void *buf, size_t n, const char *path, struct hfspm_model *m,
		struct fx_err *err)
{
	struct spm_rd r = { buf, 0, n, path, err }, sub;
	int32_t cap = 0;
	int rc = FX_OK;

	*m = (struct hfspm_model){
		.model_type = 1, .vocab_size = 8000, .unk_id = 0, .bos_id = 1, .eos_id = 2, .pad_id = -1,
		.unk_piece = { "<unk>", 5 }, .bos_piece = { "<s>", 3 }, .eos_piece = { "</s>", 4 },
		.pad_piece = { "<pad>", 5 }, .add_dummy_prefix = true, .remove_extra_whitespaces = true,
		.escape_whitespaces = true,
	};
	while (!rc && r.pos < r.end) {
		size_t at = r.pos;
		uint32_t f;
		int wt;

		if ((rc = rd_key(&r, &f, &wt)))
			break;
		if (f == 1) {
			if ((rc = rd_sub(&r, at, wt, "pieces", &sub)))
				break;
			if (m->n_piece == cap) {
				struct hfspm_piece *p;

				if (cap >= (1 << 28)) {
					rc = rd_fail(&r, at, "more than 2^28 pieces");
					break;
				}
				cap = cap ? cap * 2 : 1024;
				if (!(p = fx_realloc_array(m->piece, (size_t)cap, sizeof(*p)))) {
					rc = FX_E_NOMEM;
					break;
				}
				m->piece = p;
			}
			rc = rd_piece(&sub, &m->piece[m->n_piece++]);
		} else if (f == 2) {
			if (!(rc = rd_sub(&r, at, wt, "trainer_spec", &sub)))
				rc = rd_trainer(&sub, m);
		} else if (f == 3) {
			if (!(rc = rd_sub(&r, at, wt, "normalizer_spec", &sub)))
				rc = rd_normalizer(&sub, m);
		} else {
			rc = rd_skip(&r, wt);
		}
	}
	if (!rc && !m->n_piece)
		rc = fx_fail(err, FX_E_FORMAT, "%s: no pieces (not a SentencePiece model)", path);
	if (rc) {
		fx_free(m->piece);
		m->piece = NULL;
		m->n_piece = 0;
	}
	return rc;
}
