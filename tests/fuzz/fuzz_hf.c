/* libFuzzer target: the input as a Hugging Face checkpoint directory.
 *
 * Input layout: config.json, a NUL byte, tokenizer_config.json (left out
 * when empty), a NUL byte, model.safetensors (the rest; JSON holds no raw
 * NUL, so the split is unambiguous for the two JSON files). The
 * safetensors bytes go through st_open_memory on an exact-size heap copy
 * first (ASan sees a read past the end, which a file mapping would hide up
 * to its last page); then the three files are written to a private
 * temporary directory and loaded by path: fx_model_load (repacked when
 * the input's size is odd) and fx_inspect. Seeds: tests/fuzz/corpus/hf
 * (tests/fuzz/make_seeds.py: shrunken hf-tiny fixtures). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ferrox.h"
#include "io/safetensors.h"

static char dir[64];

static void cleanup(void)
{
	static const char *const names[] = { "config.json", "tokenizer_config.json",
					     "model.safetensors" };
	char p[128];
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		snprintf(p, sizeof(p), "%s/%s", dir, names[i]);
		unlink(p);
	}
	rmdir(dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	snprintf(dir, sizeof(dir), "/tmp/fuzz-hf-XXXXXX");
	if (!mkdtemp(dir)) {
		perror("fuzz_hf: mkdtemp");
		exit(1);
	}
	atexit(cleanup);
	return 0;
}

/* Write data[0..n) to dir/name, or remove dir/name when absent (n == SIZE_MAX). */
static int put(const char *name, const unsigned char *data, size_t n)
{
	char p[128];
	snprintf(p, sizeof(p), "%s/%s", dir, name);
	if (n == SIZE_MAX)
		return unlink(p) == 0 || access(p, F_OK) != 0 ? 0 : -1;
	FILE *f = fopen(p, "wb");
	if (!f)
		return -1;
	size_t w = fwrite(data, 1, n, f);
	return fclose(f) == 0 && w == n ? 0 : -1;
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
	const unsigned char *end = data + size;
	const unsigned char *z1 = memchr(data, 0, size);
	const unsigned char *z2 = z1 ? memchr(z1 + 1, 0, (size_t)(end - z1 - 1)) : NULL;
	size_t n_cfg = z1 ? (size_t)(z1 - data) : size;
	const unsigned char *tok = z1 ? z1 + 1 : NULL;
	size_t n_tok = z2 && z2 > tok ? (size_t)(z2 - tok) : SIZE_MAX;
	const unsigned char *st = z2 ? z2 + 1 : NULL;
	size_t n_st = z2 ? (size_t)(end - st) : SIZE_MAX;
	struct fx_model_params p = fx_model_default_params();
	struct fx_model *m = NULL;
	struct fx_err err;
	char *report = NULL;

	if (st) {
		unsigned char *copy = malloc(n_st ? n_st : 1);
		struct st_file *f = NULL;
		if (!copy)
			return 0;
		memcpy(copy, st, n_st);
		if (st_open_memory(copy, n_st, &f, &err) == FX_OK) {
			for (size_t i = 0; i < f->n_tensors; i++)
				(void)st_find(f, f->tensors[i].name);
			st_close(f);
		}
		free(copy);
	}
	if (put("config.json", data, n_cfg) ||
	    put("tokenizer_config.json", tok, n_tok) ||
	    put("model.safetensors", st, n_st))
		return 0;
	p.repack = size & 1;
	if (fx_model_load(dir, &p, &m, &err) == FX_OK) {
		uint64_t total, per_token, n_params;
		fx_model_weight_bytes(m, &total, &per_token, &n_params);
		(void)fx_model_chat_template(m);
		fx_model_free(m);
	} else if (getenv("FX_FUZZ_VERBOSE")) {
		fprintf(stderr, "fuzz_hf: %s\n", err.msg);
	}
	if (fx_inspect(dir, &report, &err) == FX_OK)
		fx_string_free(report);
	return 0;
}
