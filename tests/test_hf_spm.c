/* SentencePiece tokenizer.model folders (src/tokenizer/hf_spm_proto.c,
 * hf_spm.c), in C alone; tests/test_hf_spm_oracle.py holds the real
 * vocabularies to transformers.
 *
 * - The wire-format reader on a hand-built ModelProto: every field it
 *   reads, the .proto's defaults, unknown fields of each wire type skipped
 *   in every message, a negative int32 as a 10-byte varint.
 * - Malformed input, each FX_E_FORMAT naming the file, the offset and the
 *   problem: a truncated varint, a varint past 64 bits, a length past the
 *   end of its (sub-)message, wrong wire types, a group, an invalid wire
 *   type, field number 0, piece type and model_type out of range, a piece
 *   that is not UTF-8 or holds a NUL, no pieces; every prefix of the valid
 *   message parses or fails cleanly (never reads past it).
 * - The folder through vocab_load_hf: the merges transformers generates
 *   (by the merged piece's id, not the scores), no class (Replace, no
 *   prefix) against LlamaTokenizer (Metaspace "first", BOS), duplicate
 *   pieces, an unsupported class named.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "core/alloc.h"
#include "tokenizer/hf_impl.h"
#include "tokenizer/vocab.h"

static char g_dir[256];

/* ---- a protobuf writer ------------------------------------------------------ */

struct pb {
	unsigned char b[4096];
	size_t n;
};

static void pb_raw(struct pb *p, const void *s, size_t n)
{
	if (p->n + n <= sizeof(p->b)) {
		memcpy(p->b + p->n, s, n);
		p->n += n;
	}
}

static void pb_varint(struct pb *p, uint64_t v)
{
	do {
		unsigned char c = (unsigned char)(v & 0x7f);

		v >>= 7;
		c |= v ? 0x80 : 0;
		pb_raw(p, &c, 1);
	} while (v);
}

static void pb_key(struct pb *p, uint32_t field, int wt)
{
	pb_varint(p, (uint64_t)field << 3 | (uint64_t)wt);
}

static void pb_int(struct pb *p, uint32_t field, int64_t v)
{
	pb_key(p, field, 0);
	pb_varint(p, (uint64_t)v);
}

static void pb_bytes(struct pb *p, uint32_t field, const void *s, size_t n)
{
	pb_key(p, field, 2);
	pb_varint(p, n);
	pb_raw(p, s, n);
}

static void pb_str(struct pb *p, uint32_t field, const char *s)
{
	pb_bytes(p, field, s, strlen(s));
}

static void pb_float(struct pb *p, uint32_t field, float f)
{
	uint32_t u;
	unsigned char le[4];

	memcpy(&u, &f, 4);
	for (int k = 0; k < 4; k++)
		le[k] = (unsigned char)(u >> (8 * k));
	pb_key(p, field, 5);
	pb_raw(p, le, 4);
}

/* Unknown fields of every wire type, numbered past the .proto's. */
static void pb_unknown(struct pb *p)
{
	static const unsigned char eight[8] = { 1, 2, 3, 4, 5, 6, 7, 8 };

	pb_int(p, 900, 12345);
	pb_key(p, 901, 1);
	pb_raw(p, eight, 8);
	pb_str(p, 902, "skip me");
	pb_key(p, 903, 5);
	pb_raw(p, eight, 4);
}

static void pb_piece(struct pb *p, const char *text, float score, int type)
{
	struct pb s = { .n = 0 };

	pb_str(&s, 1, text);
	pb_float(&s, 2, score);
	pb_unknown(&s);
	if (type)
		pb_int(&s, 3, type);
	pb_bytes(p, 1, s.b, s.n);
}

/* The test model: <unk> <s> </s> a b ab ▁ ▁a, BPE with byte fallback,
 * scores that would order the merges the other way (transformers ignores
 * them), bos -1 written as a negative int32, normalizer "identity". */
static void build_model(struct pb *p)
{
	static const char *const text[8] = { "<unk>", "<s>", "</s>", "a", "b", "ab", "\xe2\x96\x81",
					     ("\xe2\x96\x81" "a") };
	static const int type[8] = { 2, 3, 3, 0, 1, 0, 0, 1 };
	struct pb t = { .n = 0 }, nm = { .n = 0 };

	p->n = 0;
	pb_unknown(p);
	for (int i = 0; i < 8; i++)
		pb_piece(p, text[i], i == 5 ? -9.0f : -(float)i, type[i]);
	pb_int(&t, 3, 2);         /* model_type BPE */
	pb_int(&t, 4, 8);         /* vocab_size */
	pb_unknown(&t);
	pb_int(&t, 35, 1);        /* byte_fallback */
	pb_int(&t, 25, 1);        /* split_digits */
	pb_int(&t, 41, -1);       /* bos_id: a 10-byte varint */
	pb_str(&t, 46, "<s>");
	pb_bytes(p, 2, t.b, t.n);
	pb_str(&nm, 1, "identity");
	pb_int(&nm, 3, 0);        /* add_dummy_prefix false */
	pb_unknown(&nm);
	pb_bytes(p, 3, nm.b, nm.n);
}

/* ---- the reader --------------------------------------------------------- */

static void parse_valid(void)
{
	struct pb p;
	struct hfspm_model m;
	struct fx_err err = { 0 };
	int rc;

	build_model(&p);
	rc = hfspm_parse(p.b, p.n, "t.model", &m, &err);
	CHECKF(rc == FX_OK, "valid model: rc %d: %s", rc, err.msg);
	if (rc)
		return;
	CHECK(m.n_piece == 8);
	CHECK(m.piece[0].type == HFSPM_UNKNOWN && m.piece[1].type == HFSPM_CONTROL);
	CHECK(m.piece[3].type == HFSPM_NORMAL); /* absent: the .proto's default */
	CHECK(m.piece[6].text.n == 3 && !memcmp(m.piece[6].text.p, "\xe2\x96\x81", 3));
	CHECK(m.piece[5].score == -9.0f && m.piece[7].score == -7.0f);
	CHECK(m.model_type == 2 && m.vocab_size == 8 && m.byte_fallback && m.split_digits);
	CHECK(m.unk_id == 0 && m.bos_id == -1 && m.eos_id == 2 && m.pad_id == -1);
	CHECK(m.bos_piece.n == 3 && m.eos_piece.n == 4 && !memcmp(m.eos_piece.p, "</s>", 4));
	CHECK(m.norm_name.n == 8 && !m.add_dummy_prefix && m.remove_extra_whitespaces &&
	      m.escape_whitespaces && m.charsmap.n == 0);
	fx_free(m.piece);
}

/* buf must fail with FX_E_FORMAT and a message holding want. */
static void expect_bad(const char *name, const void *buf, size_t n, const char *want)
{
	struct hfspm_model m;
	struct fx_err err = { 0 };
	int rc = hfspm_parse(buf, n, "bad.model", &m, &err);

	CHECKF(rc == FX_E_FORMAT && strstr(err.msg, "bad.model") && strstr(err.msg, want),
	       "%s: rc %d, message '%s', want '%s'", name, rc, err.msg, want);
	if (rc == FX_OK)
		fx_free(m.piece);
}

static void parse_malformed(void)
{
	struct pb p = { .n = 0 };
	static const unsigned char over[] = { 0x0a, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
					      0xff, 0xff, 0x01 };
	static const unsigned char bit64[] = { 0x20, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
					       0xff, 0x02 };
	struct hfspm_model m;
	struct fx_err err = { 0 };
	int bad = 0, ok = 0;

	expect_bad("truncated varint", "\x0a\x85", 2, "offset 1: truncated varint");
	expect_bad("11-byte varint", over, sizeof(over), "offset 1: varint overflows 64 bits");
	expect_bad("bit 64", bit64, sizeof(bit64), "offset 1: varint overflows 64 bits");
	expect_bad("length past the end", "\x0a\x05\x0a\x01" "a", 5, "offset 1: length runs past");
	/* a piece whose own length fits the file but not its parent message */
	expect_bad("length past the sub-message", "\x0a\x03\x0a\x05" "abcdef", 10,
		   "offset 3: length runs past the end of its message");
	expect_bad("pieces as varint", "\x08\x01", 2, "offset 0: pieces has wire type 0, not 2");
	expect_bad("score as varint", "\x0a\x05\x0a\x01" "a\x10\x01", 7,
		   "offset 5: score has wire type 0, not 5");
	expect_bad("type as fixed32", "\x0a\x08\x0a\x01" "a\x1d\x01\x00\x00\x00", 10,
		   "offset 5: piece type has wire type 5, not 0");
	expect_bad("trainer_spec as fixed64", "\x11" "12345678", 9, "trainer_spec has wire type 1");
	expect_bad("truncated fixed32", "\x0a\x04\x0a\x00\x15\x01", 6, "offset 4: truncated score");
	expect_bad("group", "\x0b\x0c", 2, "offset 0: a group (wire type 3/4) is not supported");
	expect_bad("wire type 6", "\x0e", 1, "offset 0: invalid wire type");
	expect_bad("field 0", "\x02\x00", 2, "offset 0: field number 0");
	expect_bad("piece type 7", "\x0a\x05\x0a\x01" "a\x18\x07", 7, "offset 5: piece type is not one of");
	expect_bad("piece type 0", "\x0a\x05\x0a\x01" "a\x18\x00", 7, "piece type is not one of");
	expect_bad("model_type 5", "\x0a\x03\x0a\x01" "a\x12\x02\x18\x05", 9,
		   "offset 7: trainer_spec.model_type is not one of");
	expect_bad("piece not UTF-8", "\x0a\x03\x0a\x01\xff", 5, "offset 2: piece is not UTF-8");
	expect_bad("piece with NUL", "\x0a\x04\x0a\x02" "a\x00", 6, "piece is not UTF-8 text without NUL");
	expect_bad("surrogate", "\x0a\x05\x0a\x03\xed\xa0\x80", 7, "piece is not UTF-8");
	expect_bad("no pieces", "\x12\x02\x18\x02", 4, "no pieces");
	expect_bad("empty file", "", 0, "no pieces");

	/* every prefix: parses (cut at a field boundary) or fails cleanly */
	build_model(&p);
	for (size_t k = 0; k < p.n; k++) {
		int rc;

		unsigned char *cut = malloc(k ? k : 1); /* exactly k bytes, for ASan */

		if (!cut)
			continue;
		memcpy(cut, p.b, k);
		rc = hfspm_parse(cut, k, "cut.model", &m, &err);
		free(cut);
		if (rc == FX_OK) {
			ok++;
			fx_free(m.piece);
		} else {
			bad++;
			CHECKF(rc == FX_E_FORMAT && strstr(err.msg, "cut.model"), "prefix %zu: rc %d %s", k,
			       rc, err.msg);
		}
	}
	CHECKF(bad > (int)p.n / 2 && ok > 0, "prefixes: %d parse, %d refused", ok, bad);
}

/* ---- the folder ------------------------------------------------------------- */

static void write_file(const char *name, const void *data, size_t n)
{
	char path[512];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", g_dir, name);
	f = fopen(path, "wb");
	CHECKF(f != NULL, "cannot write %s", path);
	if (f) {
		fwrite(data, 1, n, f);
		fclose(f);
	}
}

static void write_str(const char *name, const char *text)
{
	write_file(name, text, strlen(text));
}

static void remove_file(const char *name)
{
	char path[512];

	snprintf(path, sizeof(path), "%s/%s", g_dir, name);
	remove(path);
}

/* text's ids, as a comma list in out. */
static void encode(const struct vocab *v, const char *text, bool add, char *out, size_t cap)
{
	fx_token ids[64];
	size_t n = 0, k = 0;
	int rc = vocab_tokenize(v, text, strlen(text), add, true, ids, 64, &n);

	out[0] = '\0';
	CHECKF(rc == FX_OK, "tokenize '%s': rc %d", text, rc);
	for (size_t i = 0; rc == FX_OK && i < n && k < cap; i++)
		k += (size_t)snprintf(out + k, cap - k, i ? ",%d" : "%d", ids[i]);
}

static void folder(void)
{
	struct pb p;
	struct vocab *v = NULL;
	struct fx_err err = { 0 };
	char got[256];
	int rc;

	build_model(&p);
	write_file("tokenizer.model", p.b, p.n);
	/* no class: Replace(" ", ▁), no dummy prefix; merges a+b (rank 0, piece 5)
	 * before ▁+a (piece 7) whatever the scores */
	rc = vocab_load_hf(g_dir, &v, &err);
	CHECKF(rc == FX_OK && v, "no class: rc %d: %s", rc, err.msg);
	if (v) {
		encode(v, "ab a", true, got, sizeof(got));
		CHECKF(!strcmp(got, "5,7"), "no class 'ab a': %s", got);
		encode(v, "ba", false, got, sizeof(got));
		CHECKF(!strcmp(got, "4,3"), "no class 'ba': %s", got);
		encode(v, "<s>b", false, got, sizeof(got)); /* a CONTROL piece: special */
		CHECKF(!strcmp(got, "1,4"), "no class '<s>b': %s", got);
		CHECKF(strstr(vocab_kind(v), "tokenizer.model (TokenizersBackend, BPE)"), "kind %s",
		       vocab_kind(v));
		vocab_free(v);
		v = NULL;
	}
	/* LlamaTokenizer: Metaspace first, BOS <s> (id 1) */
	write_str("tokenizer_config.json", "{\"tokenizer_class\": \"LlamaTokenizer\", "
		  "\"add_bos_token\": true}");
	rc = vocab_load_hf(g_dir, &v, &err);
	CHECKF(rc == FX_OK && v, "llama: rc %d: %s", rc, err.msg);
	if (v) {
		encode(v, "ab a", true, got, sizeof(got));
		CHECKF(!strcmp(got, "1,6,5,7"), "llama 'ab a': %s", got);
		CHECK(vocab_bos(v) == 1);
		vocab_free(v);
		v = NULL;
	}
	write_str("tokenizer_config.json", "{\"tokenizer_class\": \"AlbertTokenizer\"}");
	rc = vocab_load_hf(g_dir, &v, &err);
	CHECKF(rc == FX_E_UNSUPPORTED && strstr(err.msg, "tokenizer_class AlbertTokenizer"),
	       "albert: rc %d: %s", rc, err.msg);
	vocab_free(v);
	v = NULL;
	remove_file("tokenizer_config.json");
	/* a duplicate piece; a truncated file through the loader */
	pb_piece(&p, "ab", 0, 1);
	write_file("tokenizer.model", p.b, p.n);
	rc = vocab_load_hf(g_dir, &v, &err);
	CHECKF(rc == FX_E_FORMAT && strstr(err.msg, "piece 'ab' appears twice (ids 5 and 8)"),
	       "duplicate: rc %d: %s", rc, err.msg);
	vocab_free(v);
	v = NULL;
	write_file("tokenizer.model", p.b, 20);
	rc = vocab_load_hf(g_dir, &v, &err);
	CHECKF(rc == FX_E_FORMAT && strstr(err.msg, "tokenizer.model: offset"), "truncated: rc %d: %s",
	       rc, err.msg);
	vocab_free(v);
	remove_file("tokenizer.model");
}

int main(void)
{
	const char *tmp = getenv("TMPDIR");

	snprintf(g_dir, sizeof(g_dir), "%s/fx_hf_spm_XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(g_dir)) {
		fprintf(stderr, "cannot make a temporary directory\n");
		return 1;
	}
	parse_valid();
	parse_malformed();
	folder();
	rmdir(g_dir);
	return check_exit();
}
