/* No allocation per token: after a context has run one prompt and one
 * decode step (its buffers grown to their size), further decode steps,
 * single-sequence and batched over several sequences on the paged cache,
 * call malloc, calloc and realloc zero times. The test binary is linked
 * with --wrap for those three (tests/tests.cmake), so every call from the
 * library is counted here. Runs on the real SmolLM2 GGUF (repacked
 * weights, AVX2 kernels where the CPU has them). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ferrox.h"

/* Calls seen since the last reset (test-only state). */
static long n_alloc;

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t n);

void *__wrap_malloc(size_t n)
{
	n_alloc++;
	return __real_malloc(n);
}

void *__wrap_calloc(size_t n, size_t size)
{
	n_alloc++;
	return __real_calloc(n, size);
}

void *__wrap_realloc(void *p, size_t n)
{
	n_alloc++;
	return __real_realloc(p, n);
}

static void single(const struct fx_model *m)
{
	struct fx_err err = { 0 };
	struct fx_context *c;
	struct fx_context_params p = fx_context_default_params();
	p.n_ctx = 256;
	p.n_threads = 2;
	n_alloc = 0;
	if (fx_context_create(m, &p, &c, &err)) {
		CHECKF(false, "%s", err.msg);
		return;
	}
	/* The wrapping works: creating a context does allocate. */
	CHECKF(n_alloc > 0, "no allocation seen while creating a context: --wrap not in effect");
	fx_token prompt[16];
	for (int i = 0; i < 16; i++)
		prompt[i] = (fx_token)(100 + 7 * i);
	CHECK(fx_decode(c, prompt, 16, false) == FX_OK);
	fx_token t = 42;
	CHECK(fx_decode(c, &t, 1, false) == FX_OK);
	n_alloc = 0;
	for (int i = 0; i < 24; i++) {
		t = (fx_token)(300 + i);
		CHECK(fx_decode(c, &t, 1, false) == FX_OK);
	}
	CHECKF(n_alloc == 0, "single-sequence decode: %ld allocations in 24 steps", n_alloc);
	fx_context_free(c);
}

static void batched(const struct fx_model *m)
{
	enum { NS = 4 };
	struct fx_err err = { 0 };
	struct fx_context *c;
	struct fx_context_params p = fx_context_default_params();
	p.n_ctx = 512;
	p.n_seq_max = NS;
	p.kv_layout = FX_KV_PAGED;
	p.n_threads = 2;
	if (fx_context_create(m, &p, &c, &err)) {
		CHECKF(false, "%s", err.msg);
		return;
	}
	fx_seq seq[NS];
	fx_token tok[NS];
	for (int s = 0; s < NS; s++)
		seq[s] = s;
	for (int s = 1; s < NS; s++)
		CHECK(fx_seq_add(c, &seq[s]) == FX_OK);
	for (int step = 0; step < 34; step++) {
		if (step == 10)
			n_alloc = 0; /* prompts and first steps done */
		for (int s = 0; s < NS; s++)
			tok[s] = (fx_token)(200 + 13 * s + step);
		struct fx_batch b = { .n = NS, .seq = seq, .token = tok, .logits = NULL };
		CHECK(fx_batch_decode(c, &b, NULL) == FX_OK);
	}
	CHECKF(n_alloc == 0, "batched decode of %d sequences: %ld allocations in 24 steps", NS, n_alloc);
	fx_context_free(c);
}

int main(void)
{
	char buf[512];
	const char *path = check_model_path("SmolLM2-135M-Instruct.Q4_1.gguf", buf, sizeof(buf));
	if (!path)
		return check_exit();
	struct fx_err err = { 0 };
	struct fx_model *m;
	if (fx_model_load(path, NULL, &m, &err)) {
		CHECKF(false, "%s", err.msg);
		return check_exit();
	}
	single(m);
	batched(m);
	fx_model_free(m);
	printf("noalloc: %d checks\n", check_count);
	return check_exit();
}
