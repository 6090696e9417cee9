/* The forward pass on the real models: prefill all at once, in ubatch
 * chunks and one token at a time give bit-identical logits, with 1 and 2
 * threads (every output element is one fixed sequence of operations); the
 * f32 and f16 caches agree closely; weights moved and repacked at load give
 * the same bits as plain rows in the mapping; a sequence longer than the context and
 * an out-of-range token are refused with a clear error, leaving the cache
 * as it was. */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ferrox.h"

#define N_TOK 12

/* Logits [N_TOK, n_vocab] for ids, fed in steps of `step` tokens. */
static float *run(const struct fx_model *m, const fx_token *ids, int step, int threads, int kv_type)
{
	struct fx_err err = { 0 };
	struct fx_context *ctx;
	struct fx_context_params cp = fx_context_default_params();
	cp.n_ctx = 64;
	cp.n_ubatch = (uint32_t)step;
	cp.n_threads = threads;
	cp.type_k = cp.type_v = kv_type;
	if (fx_context_create(m, &cp, &ctx, &err)) {
		CHECKF(false, "%s", err.msg);
		return NULL;
	}
	int32_t nv = fx_model_n_vocab(m);
	float *out = malloc((size_t)N_TOK * nv * sizeof(float));
	for (int i = 0; i < N_TOK; i += step) {
		int n = N_TOK - i < step ? N_TOK - i : step;
		int32_t rows;
		CHECK(fx_decode(ctx, ids + i, n, true) == FX_OK);
		const float *l = fx_get_logits(ctx, &rows);
		CHECK(rows == n);
		memcpy(out + (size_t)i * nv, l, (size_t)n * nv * sizeof(float));
	}
	fx_context_free(ctx);
	return out;
}

/* max |a[i] - b[i]| over n values. */
static float max_diff(const float *a, const float *b, size_t n)
{
	float d = 0;
	for (size_t i = 0; i < n; i++)
		d = fmaxf(d, fabsf(a[i] - b[i]));
	return d;
}

static void check_model(const char *file, bool x8_exact)
{
	char buf[512];
	const char *path = check_model_path(file, buf, sizeof(buf));
	if (!path)
		return;
	struct fx_err err = { 0 };
	struct fx_model *m;
	if (fx_model_load(path, NULL, &m, &err)) {
		CHECKF(false, "%s", err.msg);
		return;
	}
	int32_t nv = fx_model_n_vocab(m);
	/* Real text: random ids drive these models into a regime of huge
	 * logits where every rounding difference is magnified. */
	const char *text = "The history of the printing press begins in Mainz, where Gutenberg";
	fx_token ids[64];
	size_t n_ids = 0;
	CHECK(fx_tokenize(m, text, strlen(text), true, false, ids, 64, &n_ids) == FX_OK);
	CHECK(n_ids >= N_TOK);
	size_t bytes = (size_t)N_TOK * nv * sizeof(float);

	float *all = run(m, ids, N_TOK, 2, FX_KV_F16);
	float *chunk = run(m, ids, 5, 2, FX_KV_F16);
	float *one = run(m, ids, 1, 2, FX_KV_F16);
	float *one_t1 = run(m, ids, 1, 1, FX_KV_F16);
	float *f32 = run(m, ids, N_TOK, 2, FX_KV_F32);
	if (all && chunk && one && one_t1 && f32) {
		CHECKF(!memcmp(all, chunk, bytes), "%s: ubatch 5 differs from one prefill", file);
		CHECKF(!memcmp(all, one, bytes), "%s: token-by-token decode differs from prefill", file);
		CHECKF(!memcmp(one, one_t1, bytes), "%s: 1 thread differs from 2", file);
		float dmax = 0, lmax = 0;
		size_t bad = 0;
		for (size_t i = 0; i < (size_t)N_TOK * nv; i++) {
			dmax = fmaxf(dmax, fabsf(all[i] - f32[i]));
			lmax = fmaxf(lmax, fabsf(f32[i]));
			bad += !isfinite(all[i]);
		}
		CHECKF(bad == 0, "%zu non-finite logits", bad);
		/* f16 vs f32 cache: llama.cpp's own gap is ~1.4 on these models
		 * (scripts/llamacpp-noise.py). */
		printf("%s: f16 vs f32 KV cache: max |dlogit| %.4f (max |logit| %.2f)\n", file, dmax, lmax);
		CHECK(dmax < 2.0f && lmax > 1.0f);
	}
	free(all);
	free(chunk);
	free(one);
	free(one_t1);
	free(f32);

	/* Errors leave the cache untouched. */
	struct fx_context *ctx;
	struct fx_context_params cp = fx_context_default_params();
	cp.n_ctx = 8;
	CHECK(fx_context_create(m, &cp, &ctx, &err) == FX_OK);
	CHECK(fx_decode(ctx, ids, 6, false) == FX_OK);
	CHECK(fx_decode(ctx, ids, 3, false) == FX_E_CTX_FULL);
	CHECK(strstr(fx_context_errmsg(ctx), "exceed the context of 8") != NULL);
	CHECK(fx_context_n_past(ctx) == 6);
	fx_token bad[2] = { 1, nv };
	CHECK(fx_decode(ctx, bad, 2, false) == FX_E_INVALID);
	CHECK(fx_context_n_past(ctx) == 6);
	CHECK(fx_decode(ctx, ids, 2, false) == FX_OK && fx_context_n_past(ctx) == 8);
	fx_context_free(ctx);

	cp.type_k = 2; /* q4_0: not a cache type */
	CHECK(fx_context_create(m, &cp, &ctx, &err) == FX_E_INVALID);
	CHECK(strstr(err.msg, "KV cache types") != NULL);

	/* q8_0 cache: still batch-invariant, and close to f32. */
	float *q_all = run(m, ids, N_TOK, 2, FX_KV_Q8_0);
	float *q_one = run(m, ids, 1, 1, FX_KV_Q8_0);
	float *f_all = run(m, ids, N_TOK, 2, FX_KV_F32);
	if (q_all && q_one && f_all) {
		CHECKF(!memcmp(q_all, q_one, bytes), "%s: q8_0 cache: decode differs from prefill", file);
		float dq = max_diff(q_all, f_all, (size_t)N_TOK * nv);
		printf("%s: q8_0 vs f32 KV cache: max |dlogit| %.4f\n", file, dq);
		CHECK(dq < 3.0f);
	}
	free(q_all);
	free(q_one);
	free(f_all);

	/* The default load moves the matrices out of the file mapping and
	 * repacks them (x8 groups); loaded as plain rows in the mapping the
	 * model gives the same bits when every x8 kernel it uses equals its
	 * plain-row twin operation for operation (x8_exact). q6_K's x8 kernel
	 * has no such twin (test_kernels bounds it at 2e-6 of the terms):
	 * a file with q6_K matrices is only held to the f16-cache bound. */
	struct fx_model *plain;
	struct fx_model_params mp = fx_model_default_params();
	mp.repack = false;
	if (fx_model_load(path, &mp, &plain, &err)) {
		CHECKF(false, "%s", err.msg);
	} else {
		float *a = run(m, ids, N_TOK, 2, FX_KV_F16), *b = run(plain, ids, N_TOK, 2, FX_KV_F16);
		float dp = a && b ? max_diff(a, b, (size_t)N_TOK * nv) : INFINITY;
		printf("%s: repacked vs plain rows: max |dlogit| %.4f\n", file, dp);
		if (x8_exact)
			CHECKF(a && b && !memcmp(a, b, bytes), "%s: repacked weights differ from plain rows", file);
		else
			CHECK(dp < 2.0f);
		free(a);
		free(b);
		fx_model_free(plain);
	}
	fx_model_free(m);
}

int main(void)
{
	check_model("SmolLM2-135M-Instruct.Q4_1.gguf", true);
	check_model("gemma-3-270m-q4_k_m.gguf", false);
	return check_exit();
}
