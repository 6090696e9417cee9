/* Hugging Face tokenizer.json tests (src/tokenizer/hf_*.c).
 *
 * tests/data/hf_tokenizer/cases.txt (written by tests/gen_hf_tokenizer_cases.py
 * with the `tokenizers` package as the oracle) holds small tokenizer.json
 * texts, one per component and option; each is written to a temporary
 * directory and loaded, and every case must give the oracle's ids (encode,
 * with and without special tokens, special-token texts matched or not;
 * invalid UTF-8 read as U+FFFD per maximal subpart), the oracle's streamed
 * pieces, or the expected load error (status and message).
 *
 * Then, in C alone: the files around tokenizer.json (tokenizer_config.json,
 * generation_config.json), fx_model_load on a tokenizer-only folder, and
 * special tokens left as text inside a chat prompt's data spans.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "hexids.h"
#include "tokenizer/vocab.h"

#define CASES "tests/data/hf_tokenizer/cases.txt"

static char g_dir[256];

static void write_file(const char *name, const char *text)
{
	char path[512];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", g_dir, name);
	f = fopen(path, "wb");
	CHECKF(f != NULL, "cannot write %s", path);
	if (f) {
		fputs(text, f);
		fclose(f);
	}
}

static void remove_file(const char *name)
{
	char path[512];

	snprintf(path, sizeof(path), "%s/%s", g_dir, name);
	remove(path);
}

/* E add parse hex ids */
static void check_encode(const struct vocab *v, const char *name, char *args)
{
	char *add = strtok(args, " "), *parse = strtok(NULL, " "), *hex = strtok(NULL, " ");
	char *want_s = strtok(NULL, " \n");
	size_t n_text, n_want, n_got = 0, diff = 0;
	unsigned char *text = hex ? unhex(hex, &n_text) : NULL;
	fx_token *want = want_s ? parse_ids(want_s, &n_want) : NULL, got[512];
	int rc;

	CHECKF(text && want, "%s: bad E line", name);
	if (!text || !want)
		goto out;
	rc = vocab_tokenize(v, (const char *)text, n_text, add[0] == '1', parse[0] == '1', got,
			    512, &n_got);
	while (diff < n_got && diff < n_want && got[diff] == want[diff])
		diff++;
	CHECKF(rc == FX_OK && n_got == n_want && diff == n_want,
	       "%s: encode %s (add %s, parse %s): rc %d, %zu ids (want %zu), first diff at %zu",
	       name, hex, add, parse, rc, n_got, n_want, diff);
out:
	free(text);
	free(want);
}

/* D ids hex: the pieces streamed through the detokenizer, specials skipped. */
static void check_decode(const struct vocab *v, const char *name, char *args)
{
	char *ids_s = strtok(args, " "), *hex = strtok(NULL, " \n");
	size_t n_ids, n_want, k = 0;
	fx_token *ids = ids_s ? parse_ids(ids_s, &n_ids) : NULL;
	unsigned char *want = hex ? unhex(hex, &n_want) : NULL;
	char got[4096];
	struct fx_detok st = { 0 };
	int rc = FX_OK;

	CHECKF(ids && want, "%s: bad D line", name);
	for (size_t i = 0; ids && want && i < n_ids && !rc; i++) {
		size_t m = 0;

		rc = vocab_detok_push(v, &st, ids[i], false, got + k, sizeof(got) - k, &m);
		k += m;
	}
	if (ids && want && !rc) {
		size_t m = 0;

		rc = fx_detok_flush(&st, got + k, sizeof(got) - k, &m);
		k += m;
	}
	CHECKF(!ids || !want || (rc == FX_OK && k == n_want && !memcmp(got, want, k)),
	       "%s: decode of %s: rc %d, '%.*s' (%zu bytes), want '%.*s'", name, ids_s, rc,
	       (int)k, got, k, (int)n_want, (const char *)want);
	free(ids);
	free(want);
}

/* Every record of cases.txt; returns the number of tokenizers checked. */
static int run_cases(void)
{
	size_t size = 0;
	char *data = check_read_file(CASES, &size), *line, *save = NULL;
	char name[128] = "";
	struct vocab *v = NULL;
	struct fx_err err = { 0 };
	int n_tok = 0, rc = FX_OK;

	if (!data)
		return 0;
	data = realloc(data, size + 1);
	data[size] = 0;
	for (line = strtok_r(data, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		if (!strncmp(line, "T ", 2)) {
			snprintf(name, sizeof(name), "%s", line + 2);
			vocab_free(v);
			v = NULL;
		} else if (!strncmp(line, "J ", 2)) {
			write_file("tokenizer.json", line + 2);
			err = (struct fx_err){ 0 };
			rc = vocab_load_hf(g_dir, &v, &err);
			n_tok++;
		} else if (!strncmp(line, "X ", 2)) {
			int code = atoi(line + 2);
			const char *msg = strchr(line + 2, ' ');

			CHECKF(rc == code && msg && strstr(err.msg, msg + 1),
			       "%s: load gave %d '%s', want %d '%s'", name, rc, err.msg, code,
			       msg ? msg + 1 : "");
			CHECK(v == NULL);
		} else if (!v) {
			CHECKF(v != NULL, "%s: did not load: %d %s", name, rc, err.msg);
			while (line && !v) { /* skip this tokenizer's cases */
				char *next = strtok_r(NULL, "\n", &save);

				if (next && !strncmp(next, "T ", 2)) {
					snprintf(name, sizeof(name), "%s", next + 2);
					break;
				}
				line = next;
			}
			if (!line)
				break;
		} else if (!strncmp(line, "E ", 2)) {
			check_encode(v, name, line + 2);
		} else if (!strncmp(line, "D ", 2)) {
			check_decode(v, name, line + 2);
		}
	}
	vocab_free(v);
	free(data);
	return n_tok;
}

/* The first tokenizer of cases.txt (byte-level, <s> </s> [SEP] added) into
 * g_dir/tokenizer.json. */
static void write_first_tokenizer(void)
{
	size_t size = 0;
	char *data = check_read_file(CASES, &size), *j, *end;

	if (!data)
		return;
	data = realloc(data, size + 1);
	data[size] = 0;
	j = strstr(data, "\nJ ");
	end = j ? strchr(j + 1, '\n') : NULL;
	if (j && end) {
		*end = 0;
		write_file("tokenizer.json", j + 3);
	}
	free(data);
}

static fx_token encode_one(const struct vocab *v, const char *s)
{
	fx_token t[8];
	size_t n = 0;

	return vocab_tokenize(v, s, strlen(s), false, true, t, 8, &n) == FX_OK && n == 1 ? t[0] : -1;
}

/* bos/eos from tokenizer_config.json (string and {content}), every
 * generation_config.json eos id ends generation; add_bos follows the
 * template. */
static void dir_files(void)
{
	struct vocab *v = NULL;
	struct fx_err err = { 0 };
	fx_token s, e, sep;

	write_first_tokenizer();
	write_file("tokenizer_config.json",
		   "{\"bos_token\": \"<s>\", \"eos_token\": {\"content\": \"</s>\", \"lstrip\": false}}");
	write_file("generation_config.json", "{\"eos_token_id\": [2, 4]}");
	CHECKF(vocab_load_hf(g_dir, &v, &err) == FX_OK && v, "load: %s", err.msg);
	if (!v)
		return;
	s = encode_one(v, "<s>");
	e = encode_one(v, "</s>");
	sep = encode_one(v, "[SEP]");
	CHECK(s >= 0 && e >= 0 && sep >= 0);
	CHECK(vocab_bos(v) == s && vocab_eos(v) == e);
	CHECK(vocab_add_bos(v));
	CHECK(vocab_is_eog(v, e) && vocab_is_eog(v, 2) && vocab_is_eog(v, 4));
	CHECK(!vocab_is_eog(v, s) && !vocab_is_eog(v, 3));
	vocab_free(v);

	/* special_tokens_map.json when tokenizer_config.json lacks them; one id */
	remove_file("tokenizer_config.json");
	write_file("special_tokens_map.json", "{\"eos_token\": \"[SEP]\"}");
	write_file("generation_config.json", "{\"eos_token_id\": 7, \"bos_token_id\": 9}");
	v = NULL;
	CHECKF(vocab_load_hf(g_dir, &v, &err) == FX_OK && v, "load: %s", err.msg);
	if (v) {
		CHECK(vocab_eos(v) == sep && vocab_bos(v) == 9 && !vocab_add_bos(v));
		CHECK(vocab_is_eog(v, sep) && vocab_is_eog(v, 7));
	}
	vocab_free(v);
	remove_file("special_tokens_map.json");
	remove_file("generation_config.json");
}

/* A folder with only tokenizer files loads as vocab_only; one without
 * tokenizer.json is an FX_E_IO naming it. */
static void model_load(void)
{
	struct fx_model_params p = fx_model_default_params();
	struct fx_model *m = NULL;
	struct fx_err err = { 0 };
	fx_token ids[16];
	size_t n = 0;

	p.vocab_only = true;
	write_first_tokenizer();
	CHECKF(fx_model_load(g_dir, &p, &m, &err) == FX_OK && m, "%s", err.msg);
	if (m) {
		CHECK(fx_model_has_vocab(m) && fx_model_n_vocab(m) > 256);
		CHECK(fx_tokenize(m, "Hello", 5, true, false, ids, 16, &n) == FX_OK && n >= 3);
	}
	fx_model_free(m);
	remove_file("tokenizer.json");
	m = NULL;
	CHECK(fx_model_load(g_dir, &p, &m, &err) == FX_E_IO && !m);
	CHECKF(strstr(err.msg, "no tokenizer.json"), "%s", err.msg);
}

/* An added token's id out of range is refused naming it, also when it is
 * in the second (non-special) pass after a special one was stored: that
 * path returned without the stored text's buffer (a leak fuzz_hf_tokenizer
 * found; LeakSanitizer checks it under FX_SANITIZE). */
static void bad_added_id(void)
{
	static const char *head = "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1, "
				  "\"ab\": 2}, \"merges\": [\"a b\"]}, \"added_tokens\": [{\"id\": 3, "
				  "\"content\": \"<s>\", \"special\": true}";
	char j[512];
	struct vocab *v = NULL;
	struct fx_err err = { 0 };

	snprintf(j, sizeof(j), "%s]}", head);
	write_file("tokenizer.json", j);
	CHECKF(vocab_load_hf(g_dir, &v, &err) == FX_OK && v, "the good one: %s", err.msg);
	vocab_free(v);
	v = NULL;
	snprintf(j, sizeof(j), "%s, {\"id\": 99, \"content\": \"zz\", \"special\": false}]}", head);
	write_file("tokenizer.json", j);
	CHECK(vocab_load_hf(g_dir, &v, &err) == FX_E_FORMAT && !v);
	CHECKF(strstr(err.msg, "'zz' has id 99, outside"), "%s", err.msg);
	remove_file("tokenizer.json");
}

/* fx_tokenize_prompt: a special token's text inside a data span stays
 * text; outside it is the token. */
static void prompt_spans(void)
{
	struct vocab *v = NULL;
	struct fx_err err = { 0 };
	char text[] = "<s>A<s>B";
	struct fx_chat_span data = { 4, 3 }; /* "<s>" after A */
	struct fx_chat_prompt p = { text, sizeof(text) - 1, &data, 1 };
	fx_token ids[32];
	size_t n = 0, k = 0;

	write_first_tokenizer();
	if (vocab_load_hf(g_dir, &v, &err) || !v) {
		CHECKF(0, "load: %s", err.msg);
		return;
	}
	CHECK(vocab_tokenize_prompt(v, &p, false, ids, 32, &n) == FX_OK);
	for (size_t i = 0; i < n; i++)
		k += ids[i] == encode_one(v, "<s>");
	CHECKF(k == 1 && ids[0] == encode_one(v, "<s>"), "%zu ids, %zu <s>", n, k);
	vocab_free(v);
	remove_file("tokenizer.json");
}

int main(void)
{
	const char *tmp = getenv("TMPDIR");
	int n;

	snprintf(g_dir, sizeof(g_dir), "%s/fx_hf_tok_XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(g_dir)) {
		fprintf(stderr, "cannot make a temporary directory\n");
		return 1;
	}
	n = run_cases();
	CHECKF(n >= 66, "only %d tokenizers in %s", n, CASES);
	dir_files();
	model_load();
	prompt_spans();
	bad_added_id();
	remove_file("tokenizer.json");
	rmdir(g_dir);
	return check_exit();
}
