/* The public libraries on their own: built twice, linked only against
 * libferrox.so (api_smoke_shared) and only against libferrox.a and its
 * dependencies (api_smoke_static), it sees nothing but ferrox.h. It loads
 * an hf-tiny checkpoint, decodes its prompt and checks that the logits are
 * finite and that their argmax, and a greedy sampler's pick, are the first
 * token transformers generated (reference.json, read here by hand: no JSON
 * library on the link line).
 * Usage: api_smoke DIR (tests/fixtures/hf-tiny/llama). Exit 77 when DIR's
 * reference.json is missing. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ferrox.h"

#define MAX_IDS 512

/* The integers of the array after "key" in json; -1 when absent. */
static int read_ids(const char *json, const char *key, fx_token *out, int cap)
{
	const char *p = strstr(json, key);
	int n = 0;
	if (!p || !(p = strchr(p, '[')))
		return -1;
	for (p++; *p && *p != ']' && n < cap;) {
		char *end;
		long v = strtol(p, &end, 10);
		if (end == p) {
			p++; /* a comma or white space */
			continue;
		}
		out[n++] = (fx_token)v;
		p = end;
	}
	return n;
}

static int fail(const char *what, const struct fx_err *err)
{
	fprintf(stderr, "api_smoke: %s%s%s\n", what, err ? ": " : "", err ? err->msg : "");
	return 1;
}

int main(int argc, char **argv)
{
	static char json[1 << 16];
	fx_token prompt[MAX_IDS], greedy[MAX_IDS];
	char path[1024];
	if (argc != 2) {
		fprintf(stderr, "usage: api_smoke HF_TINY_MODEL_DIR\n");
		return 2;
	}
	snprintf(path, sizeof(path), "%s/reference.json", argv[1]);
	FILE *f = fopen(path, "rb");
	if (!f) {
		printf("api_smoke: %s missing, skipped\n", path);
		return 77;
	}
	size_t len = fread(json, 1, sizeof(json) - 1, f);
	fclose(f);
	json[len] = '\0';
	int n_prompt = read_ids(json, "\"prompt_ids\"", prompt, MAX_IDS);
	int n_greedy = read_ids(json, "\"greedy_ids\"", greedy, MAX_IDS);
	if (n_prompt < 1 || n_greedy < 1)
		return fail("reference.json has no prompt_ids or greedy_ids", NULL);

	struct fx_err err = {0};
	struct fx_model *m = NULL;
	struct fx_context *ctx = NULL;
	struct fx_sampler *s = NULL;
	struct fx_model_params mp = fx_model_default_params();
	if (fx_model_load(argv[1], &mp, &m, &err) != FX_OK)
		return fail("fx_model_load", &err);
	struct fx_context_params cp = fx_context_default_params();
	cp.n_ctx = (uint32_t)n_prompt + 8;
	cp.n_threads = 1;
	struct fx_sampler_params sp = fx_sampler_default_params();
	sp.temp = 0; /* greedy */
	int rc = 1;
	int32_t n_vocab = fx_model_n_vocab(m), n_rows = 0;
	if (fx_context_create(m, &cp, &ctx, &err) != FX_OK) {
		fail("fx_context_create", &err);
		goto out;
	}
	if (fx_decode(ctx, prompt, n_prompt, false) != FX_OK) {
		fprintf(stderr, "api_smoke: fx_decode: %s\n", fx_context_errmsg(ctx));
		goto out;
	}
	const float *logits = fx_get_logits(ctx, &n_rows);
	if (!logits || n_rows != 1 || n_vocab < 2) {
		fprintf(stderr, "api_smoke: %d rows of logits over %d tokens, want 1\n", n_rows, n_vocab);
		goto out;
	}
	fx_token best = 0;
	for (fx_token t = 0; t < n_vocab; t++) {
		if (!isfinite(logits[t])) {
			fprintf(stderr, "api_smoke: logit %d is %g\n", t, logits[t]);
			goto out;
		}
		if (logits[t] > logits[best])
			best = t;
	}
	if (fx_sampler_create(&sp, n_vocab, &s, &err) != FX_OK) {
		fail("fx_sampler_create", &err);
		goto out;
	}
	fx_token picked = fx_sampler_sample(s, logits);
	if (best != greedy[0] || picked != greedy[0]) {
		fprintf(stderr, "api_smoke: argmax %d, greedy sampler %d; transformers: %d\n", best,
			picked, greedy[0]);
		goto out;
	}
	printf("api_smoke: %s (%s): %d prompt tokens, next token %d as transformers\n", argv[1],
	       fx_model_arch_name(m), n_prompt, best);
	rc = 0;
out:
	fx_sampler_free(s);
	fx_context_free(ctx);
	fx_model_free(m);
	return rc;
}
