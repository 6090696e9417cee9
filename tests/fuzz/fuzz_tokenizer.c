/* libFuzzer target: the tokenizers, over every vocabulary the tests use.
 *
 * Vocabularies (loaded once, vocab_only): SmolLM2 (byte-level BPE) and
 * Gemma 3 (SentencePiece) from FX_MODELS_DIR (default models/), and the
 * synthetic ones of tests/fuzz/corpus/gguf (BPE with all 256 bytes; SPM
 * with byte fallback for ASCII only). A missing model is skipped with a
 * note, or is fatal when FX_REQUIRE_MODELS=1 (as in the C tests).
 *
 * For each vocabulary the input is
 *  - text to tokenize, with the first byte's low bits choosing
 *    add_special and parse_special. Checked: the cap contract (a short
 *    buffer gives FX_E_INVALID and the same count); every id in range;
 *    the streaming detokenizer gives the pieces' concatenation whenever
 *    that is valid UTF-8; fx_tokenize_prompt with the whole text as one
 *    data span equals fx_tokenize without parse_special; and on byte-level
 *    BPE, for valid UTF-8 without add_special whose every byte has a byte
 *    token, detokenize(tokenize(s)) == s;
 *  - little-endian int32 token ids (any value) to detokenize, piece by
 *    piece and streamed.
 * A failed check traps (a finding), as does any crash or leak. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ferrox.h"

#define N_VOCABS 4

static struct vocab_ent {
	const char *file; /* under the models dir, or a path from the repo root */
	bool model;       /* in FX_MODELS_DIR */
	bool byte_bpe;    /* byte-level BPE: text round-trips when the vocabulary
			   * has a token for each of its bytes */
	struct fx_model *m;
	bool has_byte[256]; /* a token whose piece is that one byte (SmolLM2 has
			     * none for 0x04 0x06 0x13 0x14 0x16 0x1d: such bytes
			     * are dropped, as llama.cpp drops them) */
} vocabs[N_VOCABS] = {
	{ .file = "SmolLM2-135M-Instruct.Q4_1.gguf", .model = true, .byte_bpe = true },
	{ .file = "gemma-3-270m-q4_k_m.gguf", .model = true },
	{ .file = "tests/fuzz/corpus/gguf/vocab-bpe.seed", .byte_bpe = true },
	{ .file = "tests/fuzz/corpus/gguf/llama-spm-q4_1.seed" },
};

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	const char *dir = getenv("FX_MODELS_DIR") ? getenv("FX_MODELS_DIR") : "models";
	const char *req = getenv("FX_REQUIRE_MODELS");
	struct fx_model_params p = fx_model_default_params();
	p.vocab_only = true;
	for (int i = 0; i < N_VOCABS; i++) {
		char path[512];
		struct fx_err err;
		snprintf(path, sizeof(path), "%s%s%s", vocabs[i].model ? dir : "",
			 vocabs[i].model ? "/" : "", vocabs[i].file);
		if (fx_model_load(path, &p, &vocabs[i].m, &err) == FX_OK) {
			for (fx_token t = 0; t < fx_model_n_vocab(vocabs[i].m); t++) {
				unsigned char c;
				size_t n = 0;
				if (fx_token_to_piece(vocabs[i].m, t, false, (char *)&c, 1, &n) == FX_OK &&
				    n == 1)
					vocabs[i].has_byte[c] = true;
			}
			continue;
		}
		fprintf(stderr, "fuzz_tokenizer: %s: %s\n", path, err.msg);
		if (!vocabs[i].model || (req && !strcmp(req, "1")))
			exit(1);
	}
	return 0;
}

/* A failed check: say which, then trap (libFuzzer saves the input). */
static void finding(const char *vocab, const char *what)
{
	fprintf(stderr, "fuzz_tokenizer: %s: %s\n", vocab, what);
	__builtin_trap();
}

static bool utf8_valid(const unsigned char *s, size_t n)
{
	for (size_t i = 0; i < n;) {
		unsigned c = s[i];
		size_t k = c < 0x80 ? 1 : c >= 0xc2 && c < 0xe0 ? 2 : c >= 0xe0 && c < 0xf0 ? 3
		       : c >= 0xf0 && c < 0xf5 ? 4 : 0;
		if (!k || i + k > n)
			return false;
		for (size_t j = 1; j < k; j++)
			if ((s[i + j] & 0xc0) != 0x80)
				return false;
		if ((k == 3 && ((c == 0xe0 && s[i + 1] < 0xa0) || (c == 0xed && s[i + 1] >= 0xa0))) ||
		    (k == 4 && ((c == 0xf0 && s[i + 1] < 0x90) || (c == 0xf4 && s[i + 1] >= 0x90))))
			return false;
		i += k;
	}
	return true;
}

/* A growing byte string; on allocation failure p is NULL. */
struct str {
	char *p;
	size_t n, cap;
};

static void str_add(struct str *b, const char *s, size_t n)
{
	if (b->p && b->n + n > b->cap) {
		b->cap = 2 * (b->n + n);
		char *q = realloc(b->p, b->cap);
		if (!q)
			free(b->p);
		b->p = q;
	}
	if (b->p) {
		memcpy(b->p + b->n, s, n);
		b->n += n;
	}
}

/* Pieces of ids[0..n) concatenated into *pieces, and the stream
 * detokenizer's output into *stream (caller frees both .p). */
static void detok(const struct fx_model *m, const fx_token *ids, size_t n, bool special,
		  struct str *pieces, struct str *stream)
{
	static char buf[65536], out[3 * 65536 + 32];
	struct fx_detok st = { 0 };
	size_t k;
	*pieces = (struct str){ malloc(64), 0, 64 };
	*stream = (struct str){ malloc(64), 0, 64 };
	for (size_t i = 0; i < n; i++) {
		if (fx_token_to_piece(m, ids[i], special, buf, sizeof(buf), &k) == FX_OK)
			str_add(pieces, buf, k);
		if (fx_detok_push(m, &st, ids[i], special, out, sizeof(out), &k) == FX_OK)
			str_add(stream, out, k);
	}
	if (fx_detok_flush(&st, out, 32, &k) == FX_OK)
		str_add(stream, out, k);
}

/* fx_tokenize into a malloc'ed array of *n ids, checking the cap
 * contract: a call with no room gives FX_E_INVALID and the count, which
 * then fits. NULL only when out of memory. */
static fx_token *tokenize(const struct fx_model *m, const char *name, const unsigned char *data,
			  size_t size, bool add, bool parse, size_t *n)
{
	fx_token one;
	size_t n2 = 0;
	int rc = fx_tokenize(m, (const char *)data, size, add, parse, &one, 0, n);
	if (rc != FX_OK && rc != FX_E_INVALID)
		finding(name, "fx_tokenize failed other than for the cap");
	if (rc == FX_OK && *n)
		finding(name, "ids written past cap 0");
	fx_token *ids = malloc((*n + 1) * sizeof(*ids));
	if (ids && (fx_tokenize(m, (const char *)data, size, add, parse, ids, *n, &n2) != FX_OK ||
		    n2 != *n))
		finding(name, "the count the short call gave does not fit");
	for (size_t i = 0; ids && i < *n; i++)
		if (ids[i] < 0 || ids[i] >= fx_model_n_vocab(m))
			finding(name, "a token id out of range");
	return ids;
}

static void tokenize_one(const struct vocab_ent *ve, const unsigned char *data, size_t size)
{
	const struct fx_model *m = ve->m;
	bool add = size && (data[0] & 1), parse = size && (data[0] & 2);
	size_t n, n_plain, n_prompt;
	fx_token *ids = tokenize(m, ve->file, data, size, add, parse, &n);
	struct str pieces, stream;
	if (!ids)
		return;
	detok(m, ids, n, true, &pieces, &stream);
	if (pieces.p && stream.p && utf8_valid((unsigned char *)pieces.p, pieces.n) &&
	    (stream.n != pieces.n || memcmp(pieces.p, stream.p, pieces.n)))
		finding(ve->file, "the stream detokenizer changed valid text");
	bool bytes_ok = true;
	for (size_t i = 0; i < size; i++)
		bytes_ok &= ve->has_byte[data[i]];
	if (ve->byte_bpe && bytes_ok && !add && utf8_valid(data, size) && pieces.p &&
	    (pieces.n != size || memcmp(pieces.p, data, size)))
		finding(ve->file, "byte-level BPE did not round-trip");
	free(pieces.p);
	free(stream.p);
	free(ids);
	/* The whole text as user data: no control token may match in it. */
	fx_token *plain = tokenize(m, ve->file, data, size, add, false, &n_plain);
	fx_token *prompt = malloc((n_plain + 1) * sizeof(*prompt));
	char *z = malloc(size + 1);
	if (plain && prompt && z) {
		struct fx_chat_span span = { 0, size };
		memcpy(z, data, size);
		z[size] = 0;
		struct fx_chat_prompt cp = { z, size, &span, size ? 1 : 0 };
		if (fx_tokenize_prompt(m, &cp, add, prompt, n_plain + 1, &n_prompt) != FX_OK ||
		    n_prompt != n_plain || memcmp(plain, prompt, n_plain * sizeof(*plain)))
			finding(ve->file, "a data span tokenized unlike plain text");
	}
	free(plain);
	free(prompt);
	free(z);
}

static void detokenize_ids(const struct fx_model *m, const unsigned char *data, size_t size)
{
	size_t n = size / 4;
	fx_token *ids = malloc((n + 1) * sizeof(*ids));
	struct str pieces, stream;
	if (!ids)
		return;
	memcpy(ids, data, n * 4);
	for (int special = 0; special < 2; special++) {
		detok(m, ids, n, special, &pieces, &stream);
		free(pieces.p);
		free(stream.p);
	}
	free(ids);
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
	for (int i = 0; i < N_VOCABS; i++) {
		if (!vocabs[i].m)
			continue;
		tokenize_one(&vocabs[i], data, size);
		detokenize_ids(vocabs[i].m, data, size);
	}
	return 0;
}
