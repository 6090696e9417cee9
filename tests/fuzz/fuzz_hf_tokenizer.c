/* libFuzzer target: a Hugging Face tokenizer.json and a text through it.
 *
 * Input layout: tokenizer.json, a NUL byte, the text (JSON holds no raw
 * NUL, so the split is unambiguous). The JSON is written alone into a
 * private temporary directory, which fx_model_load reads as a
 * tokenizer-only folder (vocab_only: src/tokenizer/hf_load.c); a model
 * that loads tokenizes the text with every add_special / parse_special
 * combination (ids in range, the size query agrees with the fill) and
 * decodes the ids piece by piece and as a stream. A refusal is fine; a
 * crash, a sanitizer report or a leak is a finding.
 *
 * tokenizer.model mode (src/tokenizer/hf_spm*.c): input byte 0x01 (never
 * the start of a JSON text), a 4-byte little-endian length L, L bytes
 * written as tokenizer.model (no tokenizer.json beside it), then the
 * text. Seeds: tests/fuzz/corpus/hf_tokenizer (the fixtures' two
 * tokenizer kinds, small WordPiece / Unigram / Metaspace ones and two
 * small tokenizer.model files, written by make_seeds.py). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ferrox.h"

static char dir[64];

static void cleanup(void)
{
	char p[128];
	snprintf(p, sizeof(p), "%s/tokenizer.json", dir);
	unlink(p);
	snprintf(p, sizeof(p), "%s/tokenizer.model", dir);
	unlink(p);
	rmdir(dir);
}

/* Write data[0..n) as dir/name, removing dir/other. Returns 0 on success. */
static int put(const char *name, const char *other, const unsigned char *data, size_t n)
{
	char p[128];
	snprintf(p, sizeof(p), "%s/%s", dir, other);
	unlink(p);
	snprintf(p, sizeof(p), "%s/%s", dir, name);
	FILE *f = fopen(p, "wb");
	if (!f)
		return -1;
	size_t w = fwrite(data, 1, n, f);
	return fclose(f) != 0 || w != n ? -1 : 0;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	snprintf(dir, sizeof(dir), "/tmp/fuzz-hftok-XXXXXX");
	if (!mkdtemp(dir)) {
		perror("fuzz_hf_tokenizer: mkdtemp");
		exit(1);
	}
	atexit(cleanup);
	return 0;
}

static void finding(const char *what)
{
	fprintf(stderr, "fuzz_hf_tokenizer: %s\n", what);
	abort(); /* a harness finding: libFuzzer keeps the input */
}

static void run_text(const struct fx_model *m, const char *text, size_t n, bool add, bool parse)
{
	size_t need = 0, got = 0;
	fx_token one;
	int rc = fx_tokenize(m, text, n, add, parse, &one, 0, &need);
	/* FX_E_FORMAT: the vocabulary cannot spell the text and has no unk */
	if (rc != FX_OK && rc != FX_E_INVALID && rc != FX_E_NOMEM && rc != FX_E_FORMAT)
		finding("fx_tokenize: an unexpected status");
	if (rc == FX_E_NOMEM || rc == FX_E_FORMAT || (rc == FX_E_INVALID && need == 0))
		return;
	fx_token *ids = malloc((need + 1) * sizeof(*ids));
	if (!ids)
		return;
	if (fx_tokenize(m, text, n, add, parse, ids, need, &got) != FX_OK || got != need)
		finding("the size query and the fill disagree");
	struct fx_detok st = { 0 };
	char buf[256], out[256];
	size_t k;
	for (size_t i = 0; i < got; i++) {
		if (ids[i] < 0 || ids[i] >= fx_model_n_vocab(m))
			finding("an id out of range");
		(void)fx_token_to_piece(m, ids[i], parse, buf, sizeof(buf), &k);
		(void)fx_detok_push(m, &st, ids[i], parse, out, sizeof(out), &k);
	}
	(void)fx_detok_flush(&st, out, sizeof(out), &k);
	free(ids);
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
	const char *text;
	size_t n_text;
	if (size >= 5 && data[0] == 0x01) { /* tokenizer.model mode */
		size_t len = (size_t)data[1] | (size_t)data[2] << 8 | (size_t)data[3] << 16 |
			     (size_t)data[4] << 24;
		if (len > size - 5)
			len = size - 5;
		if (put("tokenizer.model", "tokenizer.json", data + 5, len))
			return 0;
		text = (const char *)data + 5 + len;
		n_text = size - 5 - len;
	} else {
		const unsigned char *z = memchr(data, 0, size);
		size_t n_json = z ? (size_t)(z - data) : size;
		text = z ? (const char *)z + 1 : "";
		n_text = z ? size - n_json - 1 : 0;
		if (put("tokenizer.json", "tokenizer.model", data, n_json))
			return 0;
	}
	struct fx_model_params mp = fx_model_default_params();
	mp.vocab_only = true;
	struct fx_model *m = NULL;
	struct fx_err err;
	if (fx_model_load(dir, &mp, &m, &err) != FX_OK)
		return 0;
	for (int c = 0; c < 4; c++)
		run_text(m, text, n_text, c & 1, c & 2);
	fx_model_free(m);
	return 0;
}
