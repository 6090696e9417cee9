/* fx_embed_batch under allocation failure: the k-th heap call of the call
 * fails, for every k until it needs no more calls (a fresh context each
 * time, so the batch's first-use allocations are reached too). Each
 * attempt returns FX_E_NOMEM with a message and leaves both sequences
 * empty, or gives the clean vectors bit for bit; the same context then
 * gives the clean vectors. Nothing leaks (the ASan build's LeakSanitizer).
 * Fixtures: hf-tiny llama (both layouts) and hf-tiny-next qwen3_next (a
 * recurrent backing). malloc/calloc/realloc are wrapped (tests.cmake). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "check.h"
#include "ferrox.h"
#include "oom_wrap.h"

#define N_TOK 20

static struct fx_context *context(const struct fx_model *m, int32_t layout)
{
	struct fx_context_params cp = fx_context_default_params();
	cp.n_ctx = 128;
	cp.n_ubatch = 16; /* two ubatches */
	cp.n_seq_max = 2;
	cp.kv_layout = layout;
	cp.hidden = true;
	cp.n_threads = 1;
	struct fx_context *c = NULL;
	struct fx_err err;
	fx_seq s;
	if (fx_context_create(m, &cp, &c, &err) || fx_seq_add(c, &s)) {
		fx_context_free(c);
		return NULL;
	}
	return c;
}

static void sweep(const char *name, const char *dir, int32_t layout)
{
	struct fx_err err;
	struct fx_model *m = NULL;
	if (fx_model_load(dir, NULL, &m, &err)) {
		CHECKF(0, "%s: %s", dir, err.msg);
		return;
	}
	int32_t d = fx_model_n_embd(m), nv = fx_model_n_vocab(m);
	int32_t a[N_TOK], b[N_TOK];
	for (int i = 0; i < N_TOK; i++) {
		a[i] = (i * 37 + 5) % nv;
		b[i] = (i * 11 + 3) % nv;
	}
	fx_seq seq[2] = { 1, 0 };
	const int32_t *tok[2] = { a, b };
	int32_t n[2] = { N_TOK, N_TOK - 7 };
	float *ref = malloc(2 * (size_t)d * sizeof(float)), *got = malloc(2 * (size_t)d * sizeof(float));
	struct fx_context *c = context(m, layout);
	CHECK(c && ref && got && fx_embed_batch(c, 2, seq, tok, n, FX_POOLING_MEAN, true, ref) == FX_OK);
	fx_context_free(c);
	long k, refused = 0;
	for (k = 0; ref && got; k++) {
		if (!(c = context(m, layout))) {
			CHECK(0);
			break;
		}
		calls = 0;
		fail_at = k;
		int rc = fx_embed_batch(c, 2, seq, tok, n, FX_POOLING_MEAN, true, got);
		bool reached = calls > k;
		fail_at = -1;
		if (rc) {
			refused++;
			CHECKF(rc == FX_E_NOMEM && fx_context_errmsg(c)[0], "%s: failing call %ld: rc %d (%s)",
			       name, k, rc, fx_context_errmsg(c));
			CHECKF(fx_seq_n_past(c, 0) == 0 && fx_seq_n_past(c, 1) == 0,
			       "%s: failing call %ld left tokens", name, k);
			rc = fx_embed_batch(c, 2, seq, tok, n, FX_POOLING_MEAN, true, got);
		}
		CHECKF(rc == FX_OK && !memcmp(got, ref, 2 * (size_t)d * sizeof(float)),
		       "%s: around failing call %ld: rc %d, or vectors differ", name, k, rc);
		fx_context_free(c);
		if (!reached)
			break;
	}
	printf("%s: %ld heap calls, %ld refused\n", name, k, refused);
	free(ref);
	free(got);
	fx_model_free(m);
}

int main(void)
{
	oom_hook_cjson(); /* config.json and safetensors headers */
	sweep("llama contiguous", "tests/fixtures/hf-tiny/llama", FX_KV_CONTIGUOUS);
	sweep("llama paged", "tests/fixtures/hf-tiny/llama", FX_KV_PAGED);
	sweep("qwen3_next paged", "tests/fixtures/hf-tiny-next/qwen3_next", FX_KV_PAGED);
	return check_exit();
}
