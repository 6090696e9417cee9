/* libFuzzer target: the input as a GGUF file.
 *
 * Twice over: (1) gguf_open_memory on an exact-size heap copy, then the
 * vocabulary loader and every typed getter on what it accepted, so ASan
 * sees any read one byte past the end (a file mapping would hide reads
 * up to the end of its last page); (2) the input written to a memfd and
 * loaded by path as a user would: fx_model_load (weights bound, repacked
 * when the input's size is odd), again with vocab_only, and fx_inspect.
 * A model that loads is asked its sizes and tokenizes a short text.
 * Seeds: tests/fuzz/corpus/gguf (tests/fuzz/make_seeds.py). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "ferrox.h"
#include "io/gguf.h"
#include "tokenizer/vocab.h"

static int memfd = -1;
static char path[64];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	memfd = memfd_create("fuzz-gguf", 0);
	if (memfd < 0) {
		perror("fuzz_gguf: memfd_create");
		exit(1);
	}
	snprintf(path, sizeof(path), "/proc/self/fd/%d", memfd);
	return 0;
}

/* Every key through the getter of its type and a neighbour's. */
static void read_keys(const struct gguf_file *g)
{
	for (uint64_t i = 0; i < g->n_kv; i++) {
		char key[256];
		const struct gguf_kv *kv = &g->kv[i];
		snprintf(key, sizeof(key), "%.*s", (int)(kv->key.n < 255 ? kv->key.n : 255), kv->key.p);
		uint32_t u;
		int64_t l;
		float f;
		bool b;
		struct gguf_str s;
		const void *d;
		uint64_t n;
		gguf_get_u32(g, key, &u);
		gguf_get_i64(g, key, &l);
		gguf_get_f32(g, key, &f);
		gguf_get_bool(g, key, &b);
		gguf_get_str(g, key, &s);
		if (kv->type == GGUF_T_ARRAY && gguf_get_arr(g, key, kv->arr_type, &d, &n) && n &&
		    kv->arr_type != GGUF_T_STRING && kv->arr_type != GGUF_T_ARRAY)
			(void)gguf_arr_num(kv, n - 1);
	}
	for (uint64_t i = 0; i < g->n_tensors; i++) {
		char name[256];
		const struct gguf_tensor *t = &g->tensors[i];
		snprintf(name, sizeof(name), "%.*s", (int)(t->name.n < 255 ? t->name.n : 255),
			 t->name.p);
		(void)gguf_find_tensor(g, name);
	}
}

static void from_memory(const unsigned char *data, size_t size)
{
	unsigned char *copy = malloc(size ? size : 1);
	struct gguf_file *g = NULL;
	struct vocab *v = NULL;
	struct fx_err err;
	if (!copy)
		return;
	memcpy(copy, data, size);
	if (gguf_open_memory(copy, size, &g, &err) == FX_OK) {
		read_keys(g);
		if (vocab_load(g, &v, &err) == FX_OK)
			vocab_free(v);
		gguf_close(g);
	}
	free(copy);
}

/* What a caller does first with a model it loaded. */
static void use_model(struct fx_model *m)
{
	uint64_t total, per_token, n_params;
	fx_token toks[64];
	size_t n = 0;
	char piece[64];
	fx_model_weight_bytes(m, &total, &per_token, &n_params);
	(void)fx_model_n_vocab(m);
	(void)fx_model_arch_name(m);
	(void)fx_model_chat_template(m);
	if (!fx_model_has_vocab(m))
		return;
	static const char text[] = "Hello, <s> w\xc3\xb6rld!\n";
	if (fx_tokenize(m, text, sizeof(text) - 1, true, true, toks, 64, &n) == FX_OK)
		for (size_t i = 0; i < n; i++)
			fx_token_to_piece(m, toks[i], true, piece, sizeof(piece), &(size_t){ 0 });
	(void)fx_token_is_eog(m, fx_token_eos(m));
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
	struct fx_model_params p = fx_model_default_params();
	struct fx_model *m = NULL;
	struct fx_err err;
	char *report = NULL;

	from_memory(data, size);
	if (ftruncate(memfd, 0) || pwrite(memfd, data, size, 0) != (ssize_t)size)
		return 0;
	p.repack = size & 1;
	if (fx_model_load(path, &p, &m, &err) == FX_OK) {
		use_model(m);
		fx_model_free(m);
	} else if (getenv("FX_FUZZ_VERBOSE")) {
		fprintf(stderr, "fuzz_gguf: %s\n", err.msg);
	}
	p.vocab_only = true;
	if (fx_model_load(path, &p, &m, &err) == FX_OK) {
		use_model(m);
		fx_model_free(m);
	}
	if (fx_inspect(path, &report, &err) == FX_OK)
		fx_string_free(report);
	return 0;
}
