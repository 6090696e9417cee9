/* Tokenizer tests.
 *
 * Parity: for each model, every case in tests/data/tokenizer/<model>.txt
 * (written by scripts/make-tokenizer-refs.py from llama.cpp) must give the
 * same ids, the same detokenized bytes, the same streamed bytes, the same
 * token pieces and the same BOS/EOS/EOG facts. The *-pre-<name>.txt files
 * do the same for other pre-tokenizers, with SmolLM2's vocabulary under a
 * rewritten tokenizer.ggml.pre. Models are found through check_model_path
 * (skipped locally when absent, a failure in CI).
 *
 * Without models: tiny SentencePiece and BPE vocabularies built in memory
 * as GGUF, the streaming detokenizer's UTF-8 handling, and the errors for an
 * unknown tokenizer model or pre-tokenizer.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "core/alloc.h"
#include "hexids.h"
#include "io/gguf.h"
#include "tokenizer/vocab.h"
#include "tokenizer/vocab_impl.h"

/* ---- helpers --------------------------------------------------------- */

static void print_ids(const char *what, const fx_token *ids, size_t n)
{
	fprintf(stderr, "  %s:", what);
	for (size_t i = 0; i < n; i++)
		fprintf(stderr, " %d", (int)ids[i]);
	fputc('\n', stderr);
}

/* Concatenated pieces of ids (malloc'ed, *len bytes). */
static char *detok_all(const struct vocab *v, const fx_token *ids, size_t n, bool special,
		       size_t *len)
{
	size_t cap = 64, k = 0;
	char *out = malloc(cap);

	for (size_t i = 0; out && i < n; i++) {
		size_t m = 0;

		vocab_token_to_piece(v, ids[i], special, NULL, 0, &m); /* size query */
		if (k + m > cap) {
			char *o;

			cap = 2 * (k + m);
			if (!(o = realloc(out, cap))) {
				free(out);
				return NULL;
			}
			out = o;
		}
		if (vocab_token_to_piece(v, ids[i], special, out + k, cap - k, &m) != FX_OK) {
			free(out);
			return NULL;
		}
		k += m;
	}
	*len = k;
	return out;
}

/* ---- parity against llama.cpp ---------------------------------------- */

struct counts {
	int cases, ids_ok, detok_ok, stream_ok, roundtrip, pieces, pieces_ok;
};

static void check_meta(const struct vocab *v, const char *key, const char *val)
{
	if (!strcmp(key, "n_vocab")) {
		CHECKF(vocab_n_tokens(v) == atoi(val), "n_vocab %d, llama.cpp %s",
		       vocab_n_tokens(v), val);
	} else if (!strcmp(key, "bos")) {
		CHECKF(vocab_bos(v) == atoi(val), "bos %d, llama.cpp %s", vocab_bos(v), val);
	} else if (!strcmp(key, "eos")) {
		CHECKF(vocab_eos(v) == atoi(val), "eos %d, llama.cpp %s", vocab_eos(v), val);
	} else if (!strcmp(key, "add_bos")) {
		CHECKF(vocab_add_bos(v) == (atoi(val) != 0), "add_bos %d, llama.cpp %s",
		       vocab_add_bos(v), val);
	} else if (!strcmp(key, "eog")) {
		size_t n, k = 0;
		fx_token *ids = parse_ids(val, &n);
		int bad = 0;

		for (fx_token t = 0; ids && t < vocab_n_tokens(v); t++) {
			bool want = k < n && ids[k] == t;

			k += want;
			if (vocab_is_eog(v, t) != want && bad++ < 5)
				fprintf(stderr, "  eog mismatch at token %d (llama.cpp: %d)\n", (int)t, want);
		}
		CHECKF(ids && !bad, "%d EOG mismatches", bad);
		free(ids);
	}
}

static void check_case(const struct vocab *v, char **f, struct counts *c)
{
	size_t n_in, n_want, n_detok, n_stream, n_got = 0, len;
	unsigned char *in = unhex(f[1], &n_in);
	unsigned char *detok = unhex(f[5], &n_detok);
	unsigned char *stream = unhex(f[6], &n_stream);
	fx_token *want = parse_ids(f[4], &n_want);
	bool add = f[2][0] == '1', special = f[3][0] == '1';
	fx_token *got = malloc((n_want + 1) * sizeof(*got));
	char *mine;
	int rc;

	c->cases++;
	if (!in || !detok || !stream || !want || !got) {
		CHECKF(0, "bad reference line for input %s", f[1]);
		goto out;
	}
	/* sized query first: the count must come back with FX_E_INVALID */
	rc = vocab_tokenize(v, (const char *)in, n_in, add, special, NULL, 0, &n_got);
	CHECKF(rc == (n_want ? FX_E_INVALID : FX_OK) && n_got == n_want,
	       "size query for %s add=%d special=%d: rc %d n %zu, want %zu", f[1], add,
	       special, rc, n_got, n_want);
	rc = vocab_tokenize(v, (const char *)in, n_in, add, special, got, n_want + 1, &n_got);
	if (rc == FX_OK && n_got == n_want && !memcmp(got, want, n_want * sizeof(*got))) {
		c->ids_ok++;
	} else {
		CHECKF(0, "ids differ for input %s add_bos=%d special=%d (rc %d)", f[1], add,
		       special, rc);
		print_ids("llama.cpp", want, n_want);
		print_ids("ferrox   ", got, n_got <= n_want + 1 ? n_got : n_want + 1);
		goto out;
	}
	mine = detok_all(v, want, n_want, false, &len);
	if (mine && len == n_detok && !memcmp(mine, detok, len)) {
		c->detok_ok++;
		c->roundtrip += !add && !special && len == n_in && !memcmp(mine, in, n_in);
	} else {
		CHECKF(0, "detokenized bytes differ for input %s", f[1]);
	}
	free(mine);
	{
		struct fx_detok st = { 0 };
		size_t k = 0, m, cap = 64 + 8 * n_stream + 4096;
		char *out = malloc(cap);
		bool ok = out != NULL;

		for (size_t i = 0; ok && i < n_want; i++) {
			ok = vocab_detok_push(v, &st, want[i], false, out + k, cap - k, &m) == FX_OK;
			k += m;
		}
		if (ok) {
			ok = fx_detok_flush(&st, out + k, cap - k, &m) == FX_OK;
			k += m;
		}
		if (ok && k == n_stream && !memcmp(out, stream, k))
			c->stream_ok++;
		else
			CHECKF(0, "streamed bytes differ for input %s", f[1]);
		free(out);
	}
out:
	free(got);
	free(want);
	free(stream);
	free(detok);
	free(in);
}

static void check_piece(const struct vocab *v, char **f, struct counts *c)
{
	fx_token t = (fx_token)atoi(f[1]);

	c->pieces++;
	for (int sp = 0; sp < 2; sp++) {
		size_t n_want, n;
		unsigned char *want = unhex(f[2 + sp], &n_want);
		char buf[4096];
		int rc = vocab_token_to_piece(v, t, sp, buf, sizeof(buf), &n);

		if (!want || rc != FX_OK || n != n_want || memcmp(buf, want, n)) {
			CHECKF(0, "piece of token %d (special=%d) differs", (int)t, sp);
			free(want);
			return;
		}
		free(want);
	}
	c->pieces_ok++;
}

static int split_fields(char *line, char **f, int max)
{
	int n = 0;

	for (char *p = strtok(line, " \n"); p && n < max; p = strtok(NULL, " \n"))
		f[n++] = p;
	return n;
}

/* ---- a model's tokenizer keys re-serialized with another pre ---------- */

struct dbuf {
	unsigned char *p;
	size_t n, cap;
	bool oom;
};

static void db_put(struct dbuf *d, const void *p, size_t n)
{
	if (d->n + n > d->cap) {
		size_t cap = 2 * (d->n + n);
		unsigned char *q = d->oom ? NULL : realloc(d->p, cap);

		if (!q) {
			d->oom = true;
			return;
		}
		d->p = q;
		d->cap = cap;
	}
	memcpy(d->p + d->n, p, n);
	d->n += n;
}

static void db_u32(struct dbuf *d, uint32_t v)
{
	db_put(d, &v, 4);
}

static void db_u64(struct dbuf *d, uint64_t v)
{
	db_put(d, &v, 8);
}

static void db_str(struct dbuf *d, const char *p, uint64_t n)
{
	db_u64(d, n);
	db_put(d, p, n);
}

static size_t vsize(enum gguf_vtype t)
{
	static const size_t sz[GGUF_T_COUNT] = { 1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8 };

	return t < GGUF_T_COUNT ? sz[t] : 0;
}

static bool is_tok_key(const struct gguf_kv *kv)
{
	return kv->key.n > 10 && !memcmp(kv->key.p, "tokenizer.", 10) &&
	       !(kv->key.n == 18 && !memcmp(kv->key.p, "tokenizer.ggml.pre", 18)) &&
	       (kv->type != GGUF_T_ARRAY || kv->data || !kv->n);
}

/* A GGUF holding g's tokenizer.* keys with tokenizer.ggml.pre = pre. */
static bool rewrite_pre(const struct gguf_file *g, const char *pre, struct dbuf *d)
{
	uint64_t n_kv = 1;

	for (uint64_t i = 0; i < g->n_kv; i++)
		n_kv += is_tok_key(&g->kv[i]);
	db_put(d, "GGUF", 4);
	db_u32(d, 3);
	db_u64(d, 0);
	db_u64(d, n_kv);
	db_str(d, "tokenizer.ggml.pre", 18);
	db_u32(d, GGUF_T_STRING);
	db_str(d, pre, strlen(pre));
	for (uint64_t i = 0; i < g->n_kv; i++) {
		const struct gguf_kv *kv = &g->kv[i];

		if (!is_tok_key(kv))
			continue;
		db_str(d, kv->key.p, kv->key.n);
		db_u32(d, kv->type);
		if (kv->type == GGUF_T_STRING) {
			char key[256];
			struct gguf_str s = { "", 0 };

			snprintf(key, sizeof(key), "%.*s", (int)kv->key.n, kv->key.p);
			gguf_get_str(g, key, &s);
			db_str(d, s.p, s.n);
		} else if (kv->type != GGUF_T_ARRAY) {
			db_put(d, kv->data, vsize(kv->type));
		} else {
			db_u32(d, kv->arr_type);
			db_u64(d, kv->n);
			if (kv->arr_type == GGUF_T_STRING)
				for (uint64_t k = 0; k < kv->n; k++)
					db_str(d, ((const struct gguf_str *)kv->data)[k].p,
					       ((const struct gguf_str *)kv->data)[k].n);
			else
				db_put(d, kv->data, kv->n * vsize(kv->arr_type));
		}
	}
	return !d->oom;
}

/* Check ref_file against model_file's tokenizer, with its
 * tokenizer.ggml.pre replaced by pre unless pre is NULL. */
static void parity(const char *model_file, const char *pre, const char *ref_file)
{
	char path[1024], *line = NULL, *f[8];
	size_t cap = 0;
	struct gguf_file *g, *g2 = NULL;
	struct dbuf d = { 0 };
	struct vocab *v;
	struct fx_err err = { 0 };
	struct counts c = { 0 };
	FILE *refs;

	if (!check_model_path(model_file, path, sizeof(path)))
		return;
	if (gguf_open(path, &g, &err) != FX_OK) {
		CHECKF(0, "gguf_open %s: %s", path, err.msg);
		return;
	}
	if (pre && (!rewrite_pre(g, pre, &d) || gguf_open_memory(d.p, d.n, &g2, &err) != FX_OK)) {
		CHECKF(0, "%s with pre %s: %s", path, pre, err.msg);
		gguf_close(g);
		free(d.p);
		return;
	}
	if (vocab_load(g2 ? g2 : g, &v, &err) != FX_OK) {
		CHECKF(0, "vocab_load %s: %s", path, err.msg);
		goto out_close;
	}
	if (!(refs = fopen(ref_file, "r"))) {
		CHECKF(0, "cannot open %s", ref_file);
		goto out;
	}
	while (getline(&line, &cap, refs) > 0) {
		int n = split_fields(line, f, 8);

		if (n == 3 && !strcmp(f[0], "M"))
			check_meta(v, f[1], f[2]);
		else if (n == 7 && !strcmp(f[0], "C"))
			check_case(v, f, &c);
		else if (n == 4 && !strcmp(f[0], "P"))
			check_piece(v, f, &c);
		else if (n && f[0][0] != '#')
			CHECKF(0, "%s: bad line starting %s", ref_file, f[0]);
	}
	free(line);
	fclose(refs);
	CHECKF(c.cases >= 100, "%s: only %d cases", ref_file, c.cases);
	printf("%s (%s): ids %d/%d, detok %d/%d, stream %d/%d, round-trips %d, pieces %d/%d\n",
	       model_file, vocab_kind(v), c.ids_ok, c.cases, c.detok_ok, c.cases, c.stream_ok,
	       c.cases, c.roundtrip, c.pieces_ok, c.pieces);
out:
	vocab_free(v);
out_close:
	gguf_close(g2);
	gguf_close(g);
	free(d.p);
}

/* Streaming a multi-byte character split over byte tokens. */
static void stream_split_char(const char *model_file)
{
	char path[1024];
	struct gguf_file *g;
	struct vocab *v;
	const unsigned char want[4] = { 0xf0, 0x9f, 0x98, 0x80 }; /* U+1F600 */
	fx_token byte_tok[256];
	char out[256];
	size_t n, total = 0;
	struct fx_detok st = { 0 };

	if (!check_model_path(model_file, path, sizeof(path)))
		return;
	if (gguf_open(path, &g, NULL) != FX_OK) {
		CHECK(0);
		return;
	}
	if (vocab_load(g, &v, NULL) != FX_OK) {
		CHECK(0);
		gguf_close(g);
		return;
	}
	/* a token whose whole piece is one byte >= 0x80 is a byte token */
	for (int b = 0; b < 256; b++)
		byte_tok[b] = -1;
	for (fx_token t = 0; t < vocab_n_tokens(v); t++) {
		char p[8];

		if (vocab_token_to_piece(v, t, false, p, sizeof(p), &n) == FX_OK && n == 1 &&
		    (unsigned char)p[0] >= 0x80 && byte_tok[(unsigned char)p[0]] < 0)
			byte_tok[(unsigned char)p[0]] = t;
	}
	for (int i = 0; i < 4; i++) {
		CHECK(byte_tok[want[i]] >= 0);
		if (byte_tok[want[i]] < 0)
			goto out;
	}
	for (int i = 0; i < 4; i++) {
		CHECK(vocab_detok_push(v, &st, byte_tok[want[i]], false, out + total,
				       sizeof(out) - total, &n) == FX_OK);
		CHECKF(n == (i == 3 ? 4u : 0u), "byte %d of U+1F600 gave %zu bytes", i, n);
		total += n;
	}
	CHECK(total == 4 && !memcmp(out, want, 4));
	/* F0 9F then an ASCII byte token: one U+FFFD for the broken part, then it */
	CHECK(vocab_detok_push(v, &st, byte_tok[0xf0], false, out, sizeof(out), &n) == FX_OK && n == 0);
	CHECK(vocab_detok_push(v, &st, byte_tok[0x9f], false, out, sizeof(out), &n) == FX_OK && n == 0);
	{
		fx_token a;
		size_t na;

		CHECK(vocab_tokenize(v, "a", 1, false, false, &a, 1, &na) == FX_OK && na == 1);
		CHECK(vocab_detok_push(v, &st, a, false, out, sizeof(out), &n) == FX_OK && n == 4 &&
		      !memcmp(out, "\xef\xbf\xbd" "a", 4));
	}
	CHECK(fx_detok_flush(&st, out, sizeof(out), &n) == FX_OK && n == 0);
out:
	vocab_free(v);
	gguf_close(g);
}

/* ---- models-free tests: tiny vocabularies built as GGUF --------------- */

struct gbuf {
	unsigned char b[4096];
	size_t n;
};

static void put_bytes(struct gbuf *g, const void *p, size_t n)
{
	if (g->n + n <= sizeof(g->b)) {
		memcpy(g->b + g->n, p, n);
		g->n += n;
	}
}

static void put_u32(struct gbuf *g, uint32_t v)
{
	put_bytes(g, &v, 4);
}

static void put_u64(struct gbuf *g, uint64_t v)
{
	put_bytes(g, &v, 8);
}

static void put_str(struct gbuf *g, const char *s)
{
	put_u64(g, strlen(s));
	put_bytes(g, s, strlen(s));
}

static void kv_str(struct gbuf *g, const char *key, const char *val)
{
	put_str(g, key);
	put_u32(g, GGUF_T_STRING);
	put_str(g, val);
}

static void kv_strs(struct gbuf *g, const char *key, const char *const *vals, uint64_t n)
{
	put_str(g, key);
	put_u32(g, GGUF_T_ARRAY);
	put_u32(g, GGUF_T_STRING);
	put_u64(g, n);
	for (uint64_t i = 0; i < n; i++)
		put_str(g, vals[i]);
}

static void kv_arr32(struct gbuf *g, const char *key, enum gguf_vtype t, const void *vals,
		     uint64_t n)
{
	put_str(g, key);
	put_u32(g, GGUF_T_ARRAY);
	put_u32(g, t);
	put_u64(g, n);
	put_bytes(g, vals, 4 * n);
}

static void kv_u32(struct gbuf *g, const char *key, uint32_t val)
{
	put_str(g, key);
	put_u32(g, GGUF_T_U32);
	put_u32(g, val);
}

static void kv_bool(struct gbuf *g, const char *key, bool val)
{
	uint8_t b = val;

	put_str(g, key);
	put_u32(g, GGUF_T_BOOL);
	put_bytes(g, &b, 1);
}

static void gguf_header(struct gbuf *g, uint64_t n_kv)
{
	g->n = 0;
	put_bytes(g, "GGUF", 4);
	put_u32(g, 3);
	put_u64(g, 0);
	put_u64(g, n_kv);
}

static int load_buf(struct gbuf *b, struct gguf_file **g, struct vocab **v, struct fx_err *err)
{
	int rc = gguf_open_memory(b->b, b->n, g, err);

	*v = NULL;
	if (rc)
		return rc;
	rc = vocab_load(*g, v, err);
	if (rc) {
		gguf_close(*g);
		*g = NULL;
	}
	return rc;
}

static void expect_ids(const struct vocab *v, const char *text, bool add, bool special,
		       const fx_token *want, size_t n_want)
{
	fx_token got[64];
	size_t n;
	int rc = vocab_tokenize(v, text, strlen(text), add, special, got, 64, &n);
	bool same = rc == FX_OK && n == n_want && (!n || !memcmp(got, want, n * sizeof(*got)));

	CHECKF(same, "tokenize \"%s\": rc %d, %zu ids", text, rc, n);
	if (rc == FX_OK && !same) {
		print_ids("want", want, n_want);
		print_ids("got ", got, n);
	}
}

static void tiny_spm(void)
{
	static const char *const toks[] = {
		"<unk>", "<s>", "</s>", "\xe2\x96\x81", "a", "b", "ab", "\xe2\x96\x81" "a",
		"\xe2\x96\x81" "ab", "<0x63>", "<sep>", "<0xC3>", "<0xA9>",
	};
	static const float scores[] = { 0, 0, 0, -3, -4, -4, -1, -2, -0.5f, 0, 0, 0, 0 };
	static const int32_t types[] = { 2, 3, 3, 1, 1, 1, 1, 1, 1, 6, 4, 6, 6 };
	struct gbuf b;
	struct gguf_file *g;
	struct vocab *v;
	struct fx_err err = { 0 };
	char out[16];
	size_t n;

	gguf_header(&b, 4);
	kv_str(&b, "tokenizer.ggml.model", "llama");
	kv_strs(&b, "tokenizer.ggml.tokens", toks, 13);
	kv_arr32(&b, "tokenizer.ggml.scores", GGUF_T_F32, scores, 13);
	kv_arr32(&b, "tokenizer.ggml.token_type", GGUF_T_I32, types, 13);
	if (load_buf(&b, &g, &v, &err) != FX_OK) {
		CHECKF(0, "tiny SPM vocab: %s", err.msg);
		return;
	}
	CHECK(vocab_bos(v) == 1 && vocab_eos(v) == 2 && vocab_add_bos(v));
	CHECK(vocab_is_eog(v, 2) && !vocab_is_eog(v, 1));
	/* "▁ab▁ab▁c": ab merges first (higher score), then ▁+ab; c by byte */
	expect_ids(v, "ab ab c", true, false, (const fx_token[]){ 1, 8, 8, 3, 9 }, 5);
	/* a user-defined token splits even without parse_special */
	expect_ids(v, "a<sep>b", false, false, (const fx_token[]){ 7, 10, 3, 5 }, 4);
	/* é has no token: two byte tokens */
	expect_ids(v, "\xc3\xa9", false, false, (const fx_token[]){ 3, 11, 12 }, 3);
	expect_ids(v, "", true, false, (const fx_token[]){ 1 }, 1);
	expect_ids(v, "", false, false, NULL, 0);
	CHECK(vocab_token_to_piece(v, 8, false, out, sizeof(out), &n) == FX_OK && n == 3 &&
	      !memcmp(out, " ab", 3));
	CHECK(vocab_token_to_piece(v, 9, false, out, sizeof(out), &n) == FX_OK && n == 1 &&
	      out[0] == 'c');
	CHECK(vocab_token_to_piece(v, 1, false, out, sizeof(out), &n) == FX_OK && n == 0);
	CHECK(vocab_token_to_piece(v, 1, true, out, sizeof(out), &n) == FX_OK && n == 3);
	CHECK(vocab_token_to_piece(v, 8, false, out, 2, &n) == FX_E_INVALID && n == 3);
	CHECK(vocab_token_to_piece(v, 13, false, out, sizeof(out), &n) == FX_E_INVALID);
	CHECK(vocab_token_to_piece(v, -1, false, out, sizeof(out), &n) == FX_E_INVALID);
	{
		fx_token ids[2];

		CHECK(vocab_tokenize(v, "ab ab c", 7, true, false, ids, 2, &n) == FX_E_INVALID &&
		      n == 5);
	}

	/* streaming: é split over two byte tokens, then broken sequences */
	{
		struct fx_detok st = { 0 };
		char o[64];
		size_t m;

		CHECK(vocab_detok_push(v, &st, 11, false, o, sizeof(o), &m) == FX_OK && m == 0);
		CHECK(vocab_detok_push(v, &st, 12, false, o, sizeof(o), &m) == FX_OK && m == 2 &&
		      !memcmp(o, "\xc3\xa9", 2));
		/* C3 then "▁ab": U+FFFD, then " ab" */
		CHECK(vocab_detok_push(v, &st, 11, false, o, sizeof(o), &m) == FX_OK && m == 0);
		CHECK(vocab_detok_push(v, &st, 8, false, o, sizeof(o), &m) == FX_OK && m == 6 &&
		      !memcmp(o, "\xef\xbf\xbd ab", 6));
		/* a lone continuation byte */
		CHECK(vocab_detok_push(v, &st, 12, false, o, sizeof(o), &m) == FX_OK && m == 3 &&
		      !memcmp(o, "\xef\xbf\xbd", 3));
		/* pending C3 at the end: flush gives U+FFFD; a short buffer keeps the state */
		CHECK(vocab_detok_push(v, &st, 11, false, o, sizeof(o), &m) == FX_OK && m == 0);
		CHECK(vocab_detok_push(v, &st, 8, false, o, 2, &m) == FX_E_INVALID && m == 6);
		CHECK(st.n_pending == 1);
		CHECK(fx_detok_flush(&st, o, sizeof(o), &m) == FX_OK && m == 3);
		CHECK(fx_detok_flush(&st, o, sizeof(o), &m) == FX_OK && m == 0);
	}
	vocab_free(v);
	gguf_close(g);
}

static void tiny_bpe(void)
{
	/* Byte-level: "\xc4\xa0" is U+0120, GPT-2's stand-in for the space byte. */
	static const char *const toks[] = {
		"a", "b", "ab", "\xc4\xa0", ("\xc4\xa0" "ab"), "<|endoftext|>", "1", "2", "12",
	};
	static const char *const merges[] = { "a b", "\xc4\xa0 ab", "1 2" };
	static const int32_t types[] = { 1, 1, 1, 1, 1, 3, 1, 1, 1 };
	struct gbuf b;
	struct gguf_file *g;
	struct vocab *v;
	struct fx_err err = { 0 };
	char out[16];
	size_t n;

	gguf_header(&b, 5);
	kv_str(&b, "tokenizer.ggml.model", "gpt2");
	kv_str(&b, "tokenizer.ggml.pre", "smollm");
	kv_strs(&b, "tokenizer.ggml.tokens", toks, 9);
	kv_strs(&b, "tokenizer.ggml.merges", merges, 3);
	kv_arr32(&b, "tokenizer.ggml.token_type", GGUF_T_I32, types, 9);
	if (load_buf(&b, &g, &v, &err) != FX_OK) {
		CHECKF(0, "tiny BPE vocab: %s", err.msg);
		return;
	}
	CHECK(!vocab_add_bos(v));
	CHECK(vocab_is_eog(v, 5)); /* <|endoftext|> */
	expect_ids(v, " ab ab", false, false, (const fx_token[]){ 4, 4 }, 2);
	/* smollm splits digits apart first, so 12 never merges */
	expect_ids(v, "12", false, false, (const fx_token[]){ 6, 7 }, 2);
	expect_ids(v, "ab<|endoftext|>", false, true, (const fx_token[]){ 2, 5 }, 2);
	CHECK(vocab_token_to_piece(v, 4, false, out, sizeof(out), &n) == FX_OK && n == 3 &&
	      !memcmp(out, " ab", 3));
	vocab_free(v);
	gguf_close(g);
}

/* Digit runs: llama-bpe groups up to three digits and may take a whole
 * word as one token (ignore_merges); qwen2 and smollm split digits apart.
 * (Checked against llama.cpp with the same tokens added to SmolLM2.) */
static void tiny_digits(void)
{
	static const char *const toks[] = { "1", "2", "3", "12", "123", "4" };
	static const char *const merges[] = { "1 2", "12 3" };
	static const struct {
		const char *pre;
		fx_token want[8];
		size_t n;
	} cases[] = {
		{ "llama-bpe", { 4, 4, 5, 0 }, 4 },      /* 123 123 4 1 */
		{ "qwen2", { 0, 1, 2, 0, 1, 2, 5, 0 }, 8 },
		{ "smollm", { 0, 1, 2, 0, 1, 2, 5, 0 }, 8 },
		{ "gpt-2", { 4, 4, 5, 0 }, 4 },          /* one word; merges 123 twice */
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct gbuf b;
		struct gguf_file *g;
		struct vocab *v;
		struct fx_err err = { 0 };

		gguf_header(&b, 4);
		kv_str(&b, "tokenizer.ggml.model", "gpt2");
		kv_str(&b, "tokenizer.ggml.pre", cases[i].pre);
		kv_strs(&b, "tokenizer.ggml.tokens", toks, 6);
		kv_strs(&b, "tokenizer.ggml.merges", merges, 2);
		if (load_buf(&b, &g, &v, &err) != FX_OK) {
			CHECKF(0, "tiny %s vocab: %s", cases[i].pre, err.msg);
			continue;
		}
		expect_ids(v, "12312341", false, false, cases[i].want, cases[i].n);
		vocab_free(v);
		gguf_close(g);
	}
}

/* Is token t's piece (special shown or not) exactly want? */
static bool piece_is(const struct vocab *v, fx_token t, bool special, const char *want)
{
	char out[64];
	size_t n;

	return vocab_token_to_piece(v, t, special, out, sizeof(out), &n) == FX_OK &&
	       n == strlen(want) && !memcmp(out, want, n);
}

#define SP "\xe2\x96\x81" /* U+2581 */

/* Load a tiny WordPiece vocab (the GGUF form llama.cpp's converter writes:
 * word starts carry U+2581, "##" continuations are bare); lowercase < 0
 * leaves the normalizer key out. */
static int tiny_wpm_load(int lowercase, struct gbuf *b, struct gguf_file **g, struct vocab **v,
			 struct fx_err *err)
{
	static const char *const toks[] = {
		"[PAD]", "[UNK]", "[CLS]", "[SEP]", SP "hello", SP "world", SP "un", "aff",
		"able", SP "!", SP "cafe", SP "\xe4\xb8\xad", "hello", SP "hel",
	};
	static const int32_t types[] = { 3, 2, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1 };

	gguf_header(b, lowercase < 0 ? 6 : 7);
	kv_str(b, "tokenizer.ggml.model", "bert");
	kv_strs(b, "tokenizer.ggml.tokens", toks, 14);
	kv_arr32(b, "tokenizer.ggml.token_type", GGUF_T_I32, types, 14);
	kv_u32(b, "tokenizer.ggml.bos_token_id", 2);
	kv_u32(b, "tokenizer.ggml.seperator_token_id", 3);
	kv_u32(b, "tokenizer.ggml.unknown_token_id", 1);
	if (lowercase >= 0)
		kv_bool(b, "tokenizer.ggml.normalizer.lowercase", lowercase);
	return load_buf(b, g, v, err);
}

/* WordPiece as llama.cpp's llm_tokenizer_wpm: normalization, greedy
 * longest match, [UNK] for a word with an unmatched position, [CLS]/[SEP]. */
static void tiny_wpm(void)
{
	struct gbuf b;
	struct gguf_file *g;
	struct vocab *v;
	struct fx_err err = { 0 };
	char long_word[151];
	fx_token want[31];

	if (tiny_wpm_load(-1, &b, &g, &v, &err) != FX_OK) {
		CHECKF(0, "tiny WordPiece vocab: %s", err.msg);
		return;
	}
	/* lowercased by default; "!" is a word of its own */
	expect_ids(v, "Hello World!", false, false, (const fx_token[]){ 4, 5, 9 }, 3);
	/* longest match first: un + aff + able, not a shorter split */
	expect_ids(v, "unaffable", false, false, (const fx_token[]){ 6, 7, 8 }, 3);
	/* a word with no match at some position is [UNK] as a whole */
	expect_ids(v, "xyz hello", false, false, (const fx_token[]){ 1, 4 }, 2);
	expect_ids(v, "unaffablex", false, false, (const fx_token[]){ 1 }, 1);
	/* accents stripped (NFD, marks dropped), control characters dropped */
	expect_ids(v, "Caf\xc3\xa9 hel\x01lo", false, false, (const fx_token[]){ 10, 4 }, 2);
	/* each CJK ideograph is a word: 中 known, 文 not */
	expect_ids(v, "\xe4\xb8\xad\xe6\x96\x87", false, false, (const fx_token[]){ 11, 1 }, 2);
	/* add_special: [CLS] ... [SEP]; parse_special: [SEP] in the text */
	expect_ids(v, "hello", true, false, (const fx_token[]){ 2, 4, 3 }, 3);
	expect_ids(v, "hello[SEP]", false, true, (const fx_token[]){ 4, 3 }, 2);
	expect_ids(v, "", false, false, NULL, 0);
	/* no cap on word length (Hugging Face's max_input_chars_per_word=100
	 * has no counterpart in llama.cpp): 150 chars still match, the search
	 * bounded by the longest token (8 bytes, "▁hello") */
	CHECK(v->max_token_len == 8);
	want[0] = 4;
	for (int i = 0; i < 30; i++) {
		memcpy(long_word + 5 * i, "hello", 5);
		if (i)
			want[i] = 12;
	}
	long_word[150] = 0;
	expect_ids(v, long_word, false, false, want, 30);
	/* pieces: U+2581 is a space, a continuation joins its word, control
	 * tokens only when special (llama.cpp has no "##" rule) */
	CHECK(piece_is(v, 4, false, " hello") && piece_is(v, 7, false, "aff"));
	CHECK(piece_is(v, 2, false, "") && piece_is(v, 2, true, "[CLS]"));
	vocab_free(v);
	gguf_close(g);

	/* tokenizer.ggml.normalizer.lowercase false: case and accents kept */
	if (tiny_wpm_load(0, &b, &g, &v, &err) != FX_OK) {
		CHECKF(0, "tiny WordPiece vocab: %s", err.msg);
		return;
	}
	expect_ids(v, "Hello hello Caf\xc3\xa9", false, false, (const fx_token[]){ 1, 4, 1 }, 3);
	vocab_free(v);
	gguf_close(g);
}

/* Gemma 4's BPE: raw UTF-8 with spaces as U+2581, newline runs kept whole,
 * <0xNN> byte fallback, BOS forced on. */
static void tiny_gemma4(void)
{
	static const char *const toks[] = {
		"<pad>", "<eos>", "<bos>", "\n", "\n\n", SP, "a", "b", SP "a", "<0x63>", "<0xC3>",
		"<0xA9>", "c",
	};
	static const char *const merges[] = { SP " a", "a b" };
	static const int32_t types[] = { 3, 3, 3, 1, 1, 1, 1, 1, 1, 6, 6, 6, 1 };
	struct gbuf b;
	struct gguf_file *g;
	struct vocab *v;
	struct fx_err err = { 0 };

	gguf_header(&b, 6);
	kv_str(&b, "tokenizer.ggml.model", "gemma4");
	kv_strs(&b, "tokenizer.ggml.tokens", toks, 13);
	kv_strs(&b, "tokenizer.ggml.merges", merges, 2);
	kv_arr32(&b, "tokenizer.ggml.token_type", GGUF_T_I32, types, 13);
	kv_u32(&b, "tokenizer.ggml.bos_token_id", 2);
	kv_bool(&b, "tokenizer.ggml.add_bos_token", false);
	if (load_buf(&b, &g, &v, &err) != FX_OK) {
		CHECKF(0, "tiny gemma4 vocab: %s", err.msg);
		return;
	}
	CHECK(vocab_add_bos(v));
	/* "▁a" merges before "a b": ▁a + b */
	expect_ids(v, " ab", true, false, (const fx_token[]){ 2, 8, 7 }, 3);
	/* a run of newlines that is a token stays whole; "\n\n\n" is none */
	expect_ids(v, "a\n\nb", false, false, (const fx_token[]){ 6, 4, 7 }, 3);
	expect_ids(v, "\n\n\n", false, false, (const fx_token[]){ 3, 3, 3 }, 3);
	/* "c" is a token of its own; é has none: <0xC3> <0xA9> (no one-byte texts) */
	expect_ids(v, "ca\xc3\xa9", false, false, (const fx_token[]){ 12, 6, 10, 11 }, 4);
	CHECK(piece_is(v, 8, false, " a") && piece_is(v, 10, false, "\xc3"));
	vocab_free(v);
	gguf_close(g);
}

/* Words of text under pre-tokenizer pre (a tiny gpt2 vocab), or -1. */
static long count_words(const char *pre, const char *text)
{
	static const char *const toks[] = { "a", "b" };
	struct gbuf b;
	struct gguf_file *g;
	struct vocab *v;
	struct fx_err err = { 0 };
	struct span *w;
	size_t n = 0;
	char *buf;
	long r = -1;

	gguf_header(&b, 4);
	kv_str(&b, "tokenizer.ggml.model", "gpt2");
	kv_str(&b, "tokenizer.ggml.pre", pre);
	kv_strs(&b, "tokenizer.ggml.tokens", toks, 2);
	kv_strs(&b, "tokenizer.ggml.merges", toks, 0);
	if (load_buf(&b, &g, &v, &err) != FX_OK) {
		CHECKF(0, "tiny %s vocab: %s", pre, err.msg);
		return -1;
	}
	if (pretok_split(v, text, strlen(text), &buf, &w, &n) == FX_OK) {
		r = (long)n;
		fx_free(buf);
		fx_free(w);
	}
	vocab_free(v);
	gguf_close(g);
	return r;
}

/* qwen35 keeps combining marks in words (qwen2 splits before them). */
static void qwen35_marks(void)
{
	const char *text = "a\xcc\x81" "b c"; /* a, U+0301, b, space, c */

	CHECK(count_words("qwen35", text) == 2); /* "áb", " c" */
	CHECK(count_words("qwen2", text) == 3);  /* "a", "\u0301b", " c" */
}

/* The Unicode tables WordPiece reads (scripts/gen-unicode-tables.py). */
static void unicode_tables(void)
{
	CHECK(ucd_class('A') == UCD_LETTER && ucd_class('7') == UCD_NUMBER);
	CHECK(ucd_class('!') == UCD_PUNCT && ucd_class('$') == UCD_SYMBOL);
	CHECK(ucd_class(0x301) == UCD_MARK && ucd_class(0x0a) == UCD_CONTROL);
	CHECK(ucd_class(0x3000) == UCD_SEP && ucd_class(0x378) == UCD_UNDEF);
	CHECK(ucd_class(0x10ffff) == UCD_UNDEF && ucd_class(0x110000) == UCD_UNDEF);
	CHECK(ucd_class(0x4e2d) == UCD_LETTER && ucd_class(0x1f601) == UCD_SYMBOL);
	CHECK(ucd_is_space(0x3000) && ucd_is_space('\t') && !ucd_is_space(0x200b));
	CHECK(ucd_tolower('A') == 'a' && ucd_tolower(0x130) == 'i' && ucd_tolower(0x410) == 0x430);
	CHECK(ucd_tolower('a') == 'a' && ucd_tolower(0x1e9e) == 0xdf);
	CHECK(ucd_nfd_first(0xe9) == 'e' && ucd_nfd_first(0x1ec7) == 'e');
	CHECK(ucd_nfd_first(0xac00) == 0x1100 && ucd_nfd_first('e') == 'e');
}

/* Unknown tokenizer.ggml.model / tokenizer.ggml.pre: FX_E_UNSUPPORTED naming it. */
static void unsupported(void)
{
	static const char *const toks[] = { "a", "b" };
	struct gbuf b;
	struct gguf_file *g;
	struct vocab *v;
	struct fx_err err = { 0 };

	gguf_header(&b, 2);
	kv_str(&b, "tokenizer.ggml.model", "bogus");
	kv_strs(&b, "tokenizer.ggml.tokens", toks, 2);
	CHECK(load_buf(&b, &g, &v, &err) == FX_E_UNSUPPORTED && !v);
	CHECKF(strstr(err.msg, "bogus"), "message: %s", err.msg);

	gguf_header(&b, 4);
	kv_str(&b, "tokenizer.ggml.model", "gpt2");
	kv_str(&b, "tokenizer.ggml.pre", "nonesuch-bpe");
	kv_strs(&b, "tokenizer.ggml.tokens", toks, 2);
	kv_strs(&b, "tokenizer.ggml.merges", toks, 0);
	CHECK(load_buf(&b, &g, &v, &err) == FX_E_UNSUPPORTED && !v);
	CHECKF(strstr(err.msg, "nonesuch-bpe"), "message: %s", err.msg);

	gguf_header(&b, 1);
	kv_strs(&b, "tokenizer.ggml.tokens", toks, 2);
	CHECK(load_buf(&b, &g, &v, &err) == FX_E_FORMAT && !v);
}

#define SMOLLM "SmolLM2-135M-Instruct.Q4_1.gguf"

int main(void)
{
	tiny_spm();
	tiny_bpe();
	tiny_digits();
	tiny_wpm();
	tiny_gemma4();
	qwen35_marks();
	unicode_tables();
	unsupported();
	parity("gemma-3-270m-q4_k_m.gguf", NULL, "tests/data/tokenizer/gemma-3-270m.txt");
	parity(SMOLLM, NULL, "tests/data/tokenizer/smollm2-135m.txt");
	parity(SMOLLM, "llama-bpe", "tests/data/tokenizer/smollm2-135m-pre-llama-bpe.txt");
	parity(SMOLLM, "qwen2", "tests/data/tokenizer/smollm2-135m-pre-qwen2.txt");
	parity(SMOLLM, "default", "tests/data/tokenizer/smollm2-135m-pre-default.txt");
	parity(SMOLLM, "deepseek-llm", "tests/data/tokenizer/smollm2-135m-pre-deepseek-llm.txt");
	stream_split_char("gemma-3-270m-q4_k_m.gguf");
	stream_split_char("SmolLM2-135M-Instruct.Q4_1.gguf");
	return check_exit();
}
