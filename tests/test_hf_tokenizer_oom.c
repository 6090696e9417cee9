/* tokenizer.json under allocation failure: loading some tokenizers of
 * tests/data/hf_tokenizer/cases.txt (byte-level with added tokens and a
 * template; SentencePiece-style with normalizers, byte fallback and
 * decoders; Metaspace; a Split regex; WordPiece with BERT's parts; Unigram
 * with a Precompiled map; BertNormalizer), a GPT-2-style vocab.json +
 * merges.txt folder (hf_legacy.c) and two tokenizer.model folders
 * (hf_spm*.c), then encoding and streaming pieces,
 * with heap call k failing for every k: each step gives FX_OK with the
 * right result or FX_E_NOMEM, and (under ASan) leaks nothing.
 */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "oom_wrap.h"
#include "tokenizer/vocab.h"

static const char *const names[] = { "bytelevel", "spm-llama2-fuse1", "metaspace-first-1",
				      "wordpiece", "unigram-precompiled", "norm-bert",
				      "split-llama3" };
static const char text[] = "<s>Hello  wor\xffld, it's <mask> 日本語 hello,</s> zzz\n";

/* Encode text and stream its pieces; FX_OK or the first error. */
static int run(const struct vocab *v, fx_token *ids, size_t *n, char *out, size_t *n_out)
{
	struct fx_detok st = { 0 };
	size_t k = 0, m;
	int rc = vocab_tokenize(v, text, sizeof(text) - 1, true, true, ids, 256, n);

	for (size_t i = 0; !rc && i < *n; i++) {
		rc = vocab_detok_push(v, &st, ids[i], true, out + k, 4096 - k, &m);
		k += m;
	}
	*n_out = k;
	return rc;
}

static void sweep(const char *dir, const char *name)
{
	struct vocab *v = NULL;
	struct fx_err err;
	fx_token want[256], got[256];
	char want_s[4096], got_s[4096];
	size_t n_want = 0, n_got, ns_want = 0, ns_got;
	long k;

	fail_at = -1;
	CHECKF(vocab_load_hf(dir, &v, &err) == FX_OK && v, "%s: %s", name, err.msg);
	if (!v)
		return;
	CHECK(run(v, want, &n_want, want_s, &ns_want) == FX_OK);
	vocab_free(v);
	for (k = 0;; k++) {
		int rc;

		calls = 0;
		fail_at = k;
		v = NULL;
		rc = vocab_load_hf(dir, &v, &err);
		if (!rc)
			rc = run(v, got, &n_got, got_s, &ns_got);
		CHECKF(rc == FX_OK || rc == FX_E_NOMEM, "%s: heap call %ld failing gave %d", name, k, rc);
		if (rc == FX_OK)
			CHECKF(n_got == n_want && !memcmp(got, want, n_want * sizeof(*got)) &&
			       ns_got == ns_want && !memcmp(got_s, want_s, ns_want),
			       "%s: heap call %ld failing changed the result", name, k);
		vocab_free(v);
		if (calls <= k) /* nothing failed: every call was reached */
			break;
	}
	fail_at = -1;
	fprintf(stderr, "%s: %ld heap calls, each failed once\n", name, k);
}

/* GPT-2's bytes_to_unicode character of byte b, UTF-8, into out. */
static size_t byte_char(int b, char out[3])
{
	int cp = b, extra = 0;

	if (!((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174)) {
		for (int i = 0; i < b; i++)
			extra += !((i >= 33 && i <= 126) || (i >= 161 && i <= 172) || i >= 174);
		cp = 256 + extra;
	}
	if (cp < 0x80) {
		out[0] = (char)cp;
		return 1;
	}
	out[0] = (char)(0xC0 | (cp >> 6));
	out[1] = (char)(0x80 | (cp & 0x3F));
	return 2;
}

/* A small byte-level vocab.json + merges.txt + tokenizer_config.json in
 * dir: the 256 byte characters, a few merges, an added token and a pad
 * token vocab.json lacks, bos added. */
static void write_legacy(const char *dir)
{
	static const char *const merges[][3] = {
		{ "h", "e", "he" }, { "l", "l", "ll" }, { "he", "ll", "hell" }, { "hell", "o", "hello" },
		{ "\xc4\xa0", "w", "\xc4\xa0w" }, { "o", "r", "or" }, { "\xc4\xa0w", "or", "\xc4\xa0wor" },
	};
	char path[300], c[3];
	FILE *f;

	snprintf(path, sizeof(path), "%s/vocab.json", dir);
	if (!(f = fopen(path, "wb")))
		return;
	fputc('{', f);
	for (int b = 0; b < 256; b++) {
		size_t n = byte_char(b, c);

		fputs(b ? ",\"" : "\"", f);
		if (c[0] == '"' || c[0] == '\\')
			fputc('\\', f);
		fwrite(c, 1, n, f);
		fprintf(f, "\":%d", b);
	}
	for (size_t i = 0; i < sizeof(merges) / sizeof(*merges); i++)
		fprintf(f, ",\"%s\":%zu", merges[i][2], 256 + i);
	fputs(",\"<|endoftext|>\":263}", f);
	fclose(f);
	snprintf(path, sizeof(path), "%s/merges.txt", dir);
	if (!(f = fopen(path, "wb")))
		return;
	fputs("#version: 0.2\n", f);
	for (size_t i = 0; i < sizeof(merges) / sizeof(*merges); i++)
		fprintf(f, "%s %s\n", merges[i][0], merges[i][1]);
	fclose(f);
	snprintf(path, sizeof(path), "%s/tokenizer_config.json", dir);
	if (!(f = fopen(path, "wb")))
		return;
	fputs("{\"add_bos_token\": true, \"pad_token\": \"<pad>\", \"added_tokens_decoder\": "
	      "{\"264\": {\"content\": \"<mask>\", \"special\": false}}}", f);
	fclose(f);
}

/* The legacy folder's ids, worked by hand from write_legacy's files. */
static void check_legacy(const char *dir)
{
	static const char in[] = "<mask>g<|endoftext|>hello wor";
	/* bos, <mask>, 'g', <|endoftext|>, hello, \u0120wor; transformers
	 * 5.23's AutoTokenizer gives the same on these files */
	static const fx_token want[] = { 263, 264, 'g', 263, 256 + 3, 256 + 6 };
	struct vocab *v = NULL;
	struct fx_err err;
	fx_token ids[16];
	size_t n = 0;

	CHECKF(vocab_load_hf(dir, &v, &err) == FX_OK && v, "legacy: %s", err.msg);
	if (!v)
		return;
	CHECK(vocab_tokenize(v, in, sizeof(in) - 1, true, true, ids, 16, &n) == FX_OK);
	CHECKF(n == 6 && !memcmp(ids, want, sizeof(want)), "legacy: %zu ids, first %d", n, n ? ids[0] : -1);
	CHECK(vocab_n_tokens(v) == 266); /* <pad> appended as 265 */
	vocab_free(v);
}

static void sweep_legacy(const char *tmp)
{
	char dir[256], path[300];
	static const char *const files[] = { "vocab.json", "merges.txt", "tokenizer_config.json" };

	snprintf(dir, sizeof(dir), "%s/fx_hf_legacy_oom_XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(dir))
		return;
	write_legacy(dir);
	sweep(dir, "vocab.json + merges.txt");
	check_legacy(dir);
	for (size_t i = 0; i < 3; i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, files[i]);
		remove(path);
	}
	rmdir(dir);
}

/* tokenizer.model folders (hf_spm*.c): the fuzz seeds' two small models
 * (0x01, a 4-byte length, the ModelProto, a text), the BPE one under
 * LlamaTokenizer with add_bos_token, the Unigram one under T5Tokenizer. */
static void sweep_spm(const char *tmp)
{
	static const struct { const char *seed, *cfg; } cases[] = {
		{ "tests/fuzz/corpus/hf_tokenizer/spm-bpe",
		  "{\"tokenizer_class\": \"LlamaTokenizer\", \"add_bos_token\": true}" },
		{ "tests/fuzz/corpus/hf_tokenizer/spm-unigram", "{\"tokenizer_class\": \"T5Tokenizer\"}" },
	};
	char dir[256], model[300], cfg[300];

	snprintf(dir, sizeof(dir), "%s/fx_hf_spm_oom_XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(dir))
		return;
	snprintf(model, sizeof(model), "%s/tokenizer.model", dir);
	snprintf(cfg, sizeof(cfg), "%s/tokenizer_config.json", dir);
	for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
		size_t size = 0, len;
		unsigned char *seed = check_read_file(cases[i].seed, &size);
		FILE *f;

		if (!seed || size < 5)
			continue;
		len = (size_t)seed[1] | (size_t)seed[2] << 8 | (size_t)seed[3] << 16 | (size_t)seed[4] << 24;
		if (len <= size - 5 && (f = fopen(model, "wb"))) {
			fwrite(seed + 5, 1, len, f);
			fclose(f);
			if ((f = fopen(cfg, "wb"))) {
				fputs(cases[i].cfg, f);
				fclose(f);
			}
			sweep(dir, cases[i].seed + 31);
		}
		free(seed);
	}
	remove(model);
	remove(cfg);
	rmdir(dir);
}

int main(void)
{
	size_t size = 0;
	char *data = check_read_file("tests/data/hf_tokenizer/cases.txt", &size), *line, *save = NULL;
	char dir[256], path[300], name[128] = "";
	const char *tmp = getenv("TMPDIR");

	oom_hook_cjson();
	snprintf(dir, sizeof(dir), "%s/fx_hf_oom_XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!data || !mkdtemp(dir))
		return 1;
	snprintf(path, sizeof(path), "%s/tokenizer.json", dir);
	data = realloc(data, size + 1);
	data[size] = 0;
	for (line = strtok_r(data, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		if (!strncmp(line, "T ", 2))
			snprintf(name, sizeof(name), "%s", line + 2);
		if (strncmp(line, "J ", 2))
			continue;
		for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
			FILE *f;

			if (strcmp(name, names[i]) || !(f = fopen(path, "wb")))
				continue;
			fputs(line + 2, f);
			fclose(f);
			sweep(dir, name);
		}
	}
	remove(path);
	rmdir(dir);
	free(data);
	sweep_legacy(tmp);
	sweep_spm(tmp);
	return check_exit();
}
