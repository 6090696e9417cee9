/* llama.cpp's own tokenizer corpus: for each of its 15 test vocabularies
 * (models/ggml-vocab-*.gguf in llama.cpp's tree) every string of the .inp
 * file must tokenize to the ids of the .out file, as llama.cpp's
 * tests/test-tokenizer-0.cpp checks them: add_special and parse_special
 * off. One process loads each vocabulary once (vocab_only, the path of
 * `ferrox tokenize`) and prints "N of M" per vocabulary.
 *
 * The files come from the llama-cpp-python sdist, cached outside the repo
 * by scripts/get-llama-sdist.sh. The models directory is
 * $FX_LLAMA_VOCAB_DIR, else ../oracle/sdist/llama_cpp_python-0.3.36/
 * vendor/llama.cpp/models (the script's default cache). Skipped (77) when
 * absent, a failure with FX_REQUIRE_MODELS=1.
 *
 * test_vocab_corpus GGUF_DIR NAME...: the named vocabularies from
 * GGUF_DIR/NAME.gguf instead (tests/test_hf_vocab_convert.py: GGUFs that
 * `ferrox convert` wrote from tokenizer.json), against the same .inp/.out.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ferrox.h"

#define DEFAULT_DIR "../oracle/sdist/llama_cpp_python-0.3.36/vendor/llama.cpp/models"
#define SEP "\n__ggml_vocab_test__\n"

/* Every vocabulary of llama.cpp's corpus; all must pass. */
static const char *const vocabs[] = {
	"bert-bge", "command-r", "deepseek-coder", "deepseek-llm", "falcon",
	"gemma-4", "gpt-2", "llama-bpe", "llama-spm", "mpt",
	"phi-3", "qwen2", "qwen35", "refact", "starcoder",
};

/* Whole file (NUL-terminated, malloc'ed) or NULL. */
static char *slurp(const char *path, size_t *n)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	long len;

	if (!f)
		return NULL;
	if (fseek(f, 0, SEEK_END) == 0 && (len = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0 &&
	    (buf = malloc((size_t)len + 1)) && fread(buf, 1, (size_t)len, f) == (size_t)len) {
		buf[len] = 0;
		*n = (size_t)len;
	} else {
		free(buf);
		buf = NULL;
	}
	fclose(f);
	return buf;
}

/* Ids of one .out line (space-separated; surrounding blanks ignored). */
static size_t parse_line(const char *p, const char *end, fx_token *ids, size_t cap)
{
	size_t n = 0;

	while (p < end) {
		char *q;
		long x;

		while (p < end && (*p == ' ' || *p == '\r'))
			p++;
		if (p >= end)
			break;
		x = strtol(p, &q, 10);
		if (q == p)
			break;
		if (n < cap)
			ids[n] = (fx_token)x;
		n++;
		p = q;
	}
	return n;
}

static void print_ids(const char *what, const fx_token *ids, size_t n)
{
	fprintf(stderr, "    %s:", what);
	for (size_t i = 0; i < n && i < 64; i++)
		fprintf(stderr, " %d", (int)ids[i]);
	fprintf(stderr, n > 64 ? " ...\n" : "\n");
}

/* Case inp[0..n) against the ids of .out line [line, line_end). */
static bool check_case(const struct fx_model *m, const char *inp, size_t n, const char *line,
		       const char *line_end)
{
	static fx_token want[8192], got[8192];
	size_t n_want = parse_line(line, line_end, want, 8192), n_got = 0;
	int rc = fx_tokenize(m, inp, n, false, false, got, 8192, &n_got);

	if (rc == FX_OK && n_got == n_want && !memcmp(got, want, n_got * sizeof(*got)))
		return true;
	fprintf(stderr, "  mismatch (rc %d) on \"%.*s\"\n", rc, (int)(n > 80 ? 80 : n), inp);
	print_ids("want", want, n_want);
	print_ids("got ", got, n_got);
	return false;
}

/* One vocabulary: 0 when every case passed. */
static int run_vocab(const char *dir, const char *name, const char *gguf_dir)
{
	char path[1024], inp_path[1100], out_path[1100];
	size_t n_inp = 0, n_out = 0, total = 0, pass = 0;
	char *inp, *out;
	struct fx_model *m = NULL;
	struct fx_model_params mp = fx_model_default_params();
	struct fx_err err = { 0 };

	snprintf(path, sizeof(path), "%s/ggml-vocab-%s.gguf", dir, name);
	snprintf(inp_path, sizeof(inp_path), "%s.inp", path);
	snprintf(out_path, sizeof(out_path), "%s.out", path);
	if (gguf_dir)
		snprintf(path, sizeof(path), "%s/%s.gguf", gguf_dir, name);
	inp = slurp(inp_path, &n_inp);
	out = slurp(out_path, &n_out);
	mp.vocab_only = true;
	CHECKF(inp && out, "%s: cannot read %s / .out", name, inp_path);
	if (inp && out && fx_model_load(path, &mp, &m, &err) != FX_OK)
		CHECKF(0, "%s: %s", name, err.msg);
	/* Cases as test-tokenizer-0 reads them: .inp split at SEP (a final
	 * one ends the list), .out one line per case. */
	for (const char *p = inp, *o = out; m && p < inp + n_inp; total++) {
		const char *next = strstr(p, SEP), *eol = strchr(o, '\n');
		size_t len = next ? (size_t)(next - p) : strlen(p);

		if (!eol)
			eol = o + strlen(o);
		if (o >= out + n_out) {
			CHECKF(0, "%s: .out has fewer lines than .inp has cases", name);
			break;
		}
		pass += check_case(m, p, len, o, eol);
		o = *eol ? eol + 1 : eol;
		p = next ? next + strlen(SEP) : p + len;
	}
	printf("%-15s %zu of %zu\n", name, pass, total);
	CHECKF(m && total > 0 && pass == total, "%s: %zu of %zu cases match llama.cpp", name, pass,
	       total);
	fx_model_free(m);
	free(inp);
	free(out);
	return m && pass == total ? 0 : 1;
}

int main(int argc, char **argv)
{
	const char *dir = getenv("FX_LLAMA_VOCAB_DIR"), *req = getenv("FX_REQUIRE_MODELS");
	char probe[1024];
	FILE *f;
	int bad = 0;

	if (!dir || !*dir)
		dir = DEFAULT_DIR;
	snprintf(probe, sizeof(probe), "%s/ggml-vocab-gpt-2.gguf", dir);
	if (!(f = fopen(probe, "rb"))) {
		fprintf(stderr, "%s: llama.cpp's test vocabularies are absent (run "
			"scripts/get-llama-sdist.sh, or set FX_LLAMA_VOCAB_DIR)\n", dir);
		return req && req[0] == '1' ? 1 : 77;
	}
	fclose(f);
	size_t n = argc > 2 ? (size_t)argc - 2 : sizeof(vocabs) / sizeof(vocabs[0]);
	for (size_t i = 0; i < n; i++)
		bad += argc > 2 ? run_vocab(dir, argv[i + 2], argv[1]) : run_vocab(dir, vocabs[i], NULL);
	printf("%zu of %zu vocabularies match llama.cpp\n", n - (size_t)bad, n);
	return check_exit();
}
