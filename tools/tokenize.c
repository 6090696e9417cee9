/* ferrox tokenize: ids and pieces of a text, like llama-tokenize. Loads
 * only the vocabulary, so vocab-only GGUF files work. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "ferrox.h"

fx_token *cli_tokenize(const struct fx_model *m, const char *text, bool add_special,
		       bool parse_special, size_t *n)
{
	size_t len = strlen(text), cap = len + 8;
	fx_token *t = malloc(cap * sizeof(*t));
	if (!t)
		return NULL;
	int rc = fx_tokenize(m, text, len, add_special, parse_special, t, cap, n);
	if (rc == FX_E_INVALID && *n > cap) {
		fx_token *u = realloc(t, *n * sizeof(*t));
		if (!u) {
			free(t);
			return NULL;
		}
		t = u;
		cap = *n;
		rc = fx_tokenize(m, text, len, add_special, parse_special, t, cap, n);
	}
	if (rc) {
		free(t);
		return NULL;
	}
	return t;
}

fx_token *cli_tokenize_prompt(const struct fx_model *m, const char *text, size_t *n)
{
	fx_token *t = cli_tokenize(m, text, true, true, n);
	fx_token bos = fx_token_bos(m);
	/* llama.cpp keeps both and warns; a second BOS only changes the text
	 * a model sees, so it goes, and the notice says so */
	if (t && fx_add_bos(m) && bos >= 0 && *n >= 2 && t[0] == bos && t[1] == bos) {
		memmove(t, t + 1, (*n - 1) * sizeof(*t));
		(*n)--;
		fprintf(stderr, "ferrox: the prompt already starts with BOS; not adding a second one\n");
	}
	return t;
}

/* The flags, for the unknown-flag message's suggestion (cli_flag_unknown). */
static const char *const tokenize_flag_names[] = {
	"-m", "--model", "-p", "--prompt", "--ids", "--no-bos", "--special", "-h", "--help", NULL,
};
static const char *const *const tokenize_flags[] = { tokenize_flag_names, NULL };

int cmd_tokenize(int argc, char **argv)
{
	const char *path = NULL, *text = NULL;
	bool ids_only = false, bos = true, special = false;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "-m") || !strcmp(a, "--model")) {
			if (!(path = cli_value(argc, argv, &i)))
				return 2;
		} else if (!strcmp(a, "-p") || !strcmp(a, "--prompt")) {
			if (!(text = cli_value(argc, argv, &i)))
				return 2;
		} else if (!strcmp(a, "--ids")) {
			ids_only = true;
		} else if (!strcmp(a, "--no-bos")) {
			bos = false;
		} else if (!strcmp(a, "--special")) {
			special = true;
		} else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			printf("usage: ferrox tokenize -m MODEL -p TEXT [--ids] [--no-bos] [--special]\n"
			       "  --ids      print only the ids, as [1, 2, 3]\n"
			       "  --no-bos   do not add BOS even if the model asks for it\n"
			       "  --special  match special-token texts such as <start_of_turn>\n");
			return 0;
		} else {
			cli_flag_unknown("tokenize", tokenize_flags, a);
			return 2;
		}
	}
	if (!path || !text) {
		fprintf(stderr, "error: -m MODEL and -p TEXT are required\n");
		return 2;
	}
	struct fx_err err = { 0 };
	struct fx_model *m;
	struct fx_model_params mp = fx_model_default_params();
	mp.vocab_only = true;
	if (fx_model_load(path, &mp, &m, &err)) {
		fprintf(stderr, "error: %s\n", err.msg);
		return 1;
	}
	size_t n;
	fx_token *t = cli_tokenize(m, text, bos, special, &n);
	if (!t) {
		fprintf(stderr, "error: tokenization failed\n");
		fx_model_free(m);
		return 1;
	}
	if (ids_only) {
		printf("[");
		for (size_t i = 0; i < n; i++)
			printf("%s%d", i ? ", " : "", t[i]);
		printf("]\n");
	} else {
		for (size_t i = 0; i < n; i++) {
			char piece[256];
			size_t k;
			if (fx_token_to_piece(m, t[i], true, piece, sizeof(piece), &k))
				k = 0;
			printf("%6d -> '%.*s'\n", t[i], (int)k, piece);
		}
	}
	free(t);
	fx_model_free(m);
	return 0;
}
