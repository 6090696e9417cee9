/* Every supported architecture against transformers' float32 reference on
 * the tiny random-weight checkpoints in tests/fixtures/hf-tiny (copied from
 * the shared fixtures; see their README). For each fixture:
 *   - hidden states after the embeddings and every layer (prefill), so a
 *     failure names the layer;
 *   - prefill logits of the prompt (one call, and chunks of 5);
 *   - decode-path logits of prompt + greedy tokens, one token at a time,
 *     against full_logits;
 *   - the greedy continuation, identical;
 * each within 1e-4 x max(1, max |ref|) of max abs error.
 * Config variants: transformers-4 style configs (config.v4.json, made by
 * scripts/make-fixture-variants.py) and a checkpoint split into two shards
 * with an index (tests/fixtures/hf-tiny-sharded) must give the same logits.
 * With an f16 KV cache, the SIMD and portable kernel sets agree to the
 * order of float additions (the SIMD attention rounds Q to f16 as the
 * portable dot products do).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cJSON.h>

#include "check.h"
#include "fixture_ref.h"
#include "engine/context.h"
#include "model/forward.h"
#include "ferrox.h"
#include "io/safetensors.h"
#include "quant/quant.h"

#define ROOT "tests/fixtures/hf-tiny"
#define TOL 1e-4


/* max |a - ref| / max(1, max |ref|) over n f32 values at ref (which may
 * be unaligned: a tensor in a safetensors file). */
static double rel_err_f32(const float *a, const void *ref, size_t n)
{
	double d = 0, mx = 1;
	for (size_t i = 0; i < n; i++) {
		float r;
		memcpy(&r, (const uint8_t *)ref + i * sizeof(r), sizeof(r));
		d = fmax(d, fabs((double)a[i] - r));
		mx = fmax(mx, fabs((double)r));
	}
	return d / mx;
}

/* rel_err_f32 against a reference tensor (f32). */
static double rel_err(const float *a, const struct st_tensor *ref, size_t n)
{
	return rel_err_f32(a, ref->data, n);
}

static struct fx_context *new_ctx(const struct fx_model *m, uint32_t ubatch)
{
	struct fx_err err;
	struct fx_context *c = NULL;
	struct fx_context_params cp = fx_context_default_params();
	cp.n_ctx = 512;
	cp.n_ubatch = ubatch;
	cp.n_threads = 2;
	if (fx_context_create(m, &cp, &c, &err))
		fprintf(stderr, "context: %s\n", err.msg);
	return c;
}

/* Logits and hidden states of one fixture directory; returns the worst
 * relative error seen (for the summary). */
static double check_dir(const char *name, const char *dir, const struct ref *r, bool hidden)
{
	struct fx_err err = { 0 };
	struct fx_model *m;
	int rc = fx_model_load(dir, NULL, &m, &err);
	CHECKF(rc == FX_OK, "%s: %s", name, err.msg);
	if (rc)
		return INFINITY;
	int32_t nv = fx_model_n_vocab(m);
	double worst = 0, e;

	/* Prefill, with hidden states. */
	const struct st_tensor *h0 = st_find(r->st, "hidden.0");
	int64_t n_embd = h0 ? h0->ne[0] : 0;
	int n_layer = 0;
	char hn[32];
	for (;; n_layer++) {
		snprintf(hn, sizeof(hn), "hidden.%d", n_layer + 1);
		if (!st_find(r->st, hn))
			break;
	}
	float *cap = calloc((size_t)(n_layer + 1) * r->n_prompt * (n_embd ? n_embd : 1), sizeof(float));
	struct fx_context *c = new_ctx(m, 0);
	if (hidden)
		context_set_capture(c, cap);
	CHECK(fx_decode(c, r->prompt, r->n_prompt, true) == FX_OK);
	const float *l = fx_get_logits(c, NULL);
	const struct st_tensor *ref_l = st_find(r->st, "logits");
	CHECKF(ref_l && ref_l->ne[0] == nv, "%s: reference logits missing or of another vocab", name);
	if (ref_l && ref_l->ne[0] == nv) {
		e = rel_err(l, ref_l, (size_t)r->n_prompt * nv);
		worst = fmax(worst, e);
		CHECKF(e <= TOL, "%s: prefill logits rel err %.3g", name, e);
	}
	for (int i = 0; hidden && i <= n_layer; i++) {
		snprintf(hn, sizeof(hn), "hidden.%d", i);
		const struct st_tensor *t = st_find(r->st, hn);
		e = rel_err(cap + (size_t)i * r->n_prompt * n_embd, t, (size_t)r->n_prompt * n_embd);
		CHECKF(e <= TOL, "%s: hidden state %d (%s) rel err %.3g", name, i,
		       i == 0 ? "embeddings" : i == n_layer ? "after the final norm" : "layer output", e);
	}
	fx_context_free(c);
	free(cap);

	/* Chunked prefill gives the same rows. */
	c = new_ctx(m, 5);
	CHECK(fx_decode(c, r->prompt, r->n_prompt, true) == FX_OK);
	if (ref_l && ref_l->ne[0] == nv) {
		e = rel_err(fx_get_logits(c, NULL), ref_l, (size_t)r->n_prompt * nv);
		CHECKF(e <= TOL, "%s: chunked prefill rel err %.3g", name, e);
	}
	fx_context_free(c);

	/* Decode path over all_ids, and greedy agreement. */
	const struct st_tensor *ref_f = st_find(r->st, "full_logits");
	c = new_ctx(m, 1);
	float *row = malloc((size_t)nv * sizeof(float));
	int greedy_ok = 1;
	for (int t = 0; t < r->n_all && ref_f; t++) {
		CHECK(fx_decode(c, &r->all[t], 1, false) == FX_OK);
		memcpy(row, fx_get_logits(c, NULL), (size_t)nv * sizeof(float));
		struct st_tensor rt = *ref_f;
		rt.data = (const uint8_t *)ref_f->data + (size_t)t * nv * sizeof(float);
		e = rel_err(row, &rt, (size_t)nv);
		worst = fmax(worst, e);
		CHECKF(e <= TOL, "%s: decode row %d rel err %.3g", name, t, e);
		int g = t - (r->n_prompt - 1);
		if (g >= 0 && g < r->n_greedy) {
			int best = 0;
			for (int i = 1; i < nv; i++)
				best = row[i] > row[best] ? i : best;
			greedy_ok &= best == r->greedy[g];
		}
	}
	CHECKF(greedy_ok, "%s: greedy ids differ from transformers'", name);
	free(row);
	fx_context_free(c);
	fx_model_free(m);
	return worst;
}

/* A temporary copy of dir with config.json replaced by config.v4.json. */
static bool make_v4_dir(const char *dir, char *tmp)
{
	char src[512], dst[600];
	snprintf(src, sizeof(src), "%s/config.v4.json", dir);
	if (access(src, R_OK))
		return false;
	strcpy(tmp, "/tmp/fx_v4_XXXXXX");
	if (!mkdtemp(tmp))
		return false;
	char cmd[2048];
	snprintf(cmd, sizeof(cmd), "cp '%s' '%s/config.json' && cp '%s/model.safetensors' '%s/'", src,
		 tmp, dir, tmp);
	(void)dst;
	return system(cmd) == 0;
}

static void rm_dir(const char *tmp)
{
	char cmd[600];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmp);
	if (system(cmd))
		fprintf(stderr, "could not remove %s\n", tmp);
}

/* Prefill logits of dir (optionally quantized on load) against the f32
 * reference: returns the relative error, *agree the argmax agreement. */
static double prefill_err(const char *dir, const char *quant, const struct ref *r, int *agree)
{
	struct fx_err err = { 0 };
	struct fx_model *m;
	struct fx_model_params mp = fx_model_default_params();
	mp.quant = quant;
	*agree = 0;
	if (fx_model_load(dir, &mp, &m, &err)) {
		CHECKF(false, "%s: %s", dir, err.msg);
		return INFINITY;
	}
	int32_t nv = fx_model_n_vocab(m);
	struct fx_context *c = new_ctx(m, 0);
	CHECK(fx_decode(c, r->prompt, r->n_prompt, true) == FX_OK);
	const float *l = fx_get_logits(c, NULL);
	const struct st_tensor *ref_l = st_find(r->st, "logits");
	double e = rel_err(l, ref_l, (size_t)r->n_prompt * nv);
	for (int t = 0; t < r->n_prompt; t++) {
		const float *row = l + (size_t)t * nv;
		const float *ref = (const float *)ref_l->data + (size_t)t * nv;
		int a = 0, b = 0;
		for (int i = 1; i < nv; i++) {
			a = row[i] > row[a] ? i : a;
			b = ref[i] > ref[b] ? i : b;
		}
		*agree += a == b;
	}
	fx_context_free(c);
	fx_model_free(m);
	return e;
}

/* A config.json that is broken in one way must give a clear error. */
static void check_bad_config(const char *from, const char *edit_from, const char *edit_to,
			     int want, const char *needle)
{
	char tmp[64], cmd[1024];
	strcpy(tmp, "/tmp/fx_badcfg_XXXXXX");
	if (!mkdtemp(tmp))
		return;
	snprintf(cmd, sizeof(cmd), "sed 's/%s/%s/' '%s/config.json' > '%s/config.json' && "
		 "cp '%s/model.safetensors' '%s/'", edit_from, edit_to, from, tmp, from, tmp);
	CHECK(system(cmd) == 0);
	struct fx_err err = { 0 };
	struct fx_model *m = NULL;
	int rc = fx_model_load(tmp, NULL, &m, &err);
	CHECKF(rc == want && strstr(err.msg, needle), "bad config (%s -> %s): rc %d, '%s'",
	       edit_from, edit_to, rc, err.msg);
	fx_model_free(rc ? NULL : m);
	rm_dir(tmp);
}

/* Logits [n, n_vocab] of one prefill of ids with the given kernel set and
 * KV cache type (NULL on failure, reported). */
static float *prefill_with(const struct fx_model *m, int kernels, int kv_type, const fx_token *ids,
			   int n)
{
	struct fx_err err;
	struct fx_context *c = NULL;
	struct fx_context_params cp = fx_context_default_params();
	cp.n_ctx = 128;
	cp.n_threads = 2;
	cp.kernels = kernels;
	cp.type_k = cp.type_v = kv_type;
	if (fx_context_create(m, &cp, &c, &err)) {
		CHECKF(false, "context: %s", err.msg);
		return NULL;
	}
	int32_t nv = fx_model_n_vocab(m), rows = 0;
	float *out = malloc((size_t)n * nv * sizeof(float));
	const float *l = NULL;
	bool ok = out && fx_decode(c, ids, n, true) == FX_OK && (l = fx_get_logits(c, &rows)) && rows == n;
	CHECKF(ok, "prefill of %d tokens failed", n);
	if (ok)
		memcpy(out, l, (size_t)n * nv * sizeof(float));
	fx_context_free(c);
	if (!ok) {
		free(out);
		return NULL;
	}
	return out;
}

/* With an f16 cache, the SIMD attention must round Q to f16 before its K
 * dot products, as the portable kernels (and llama.cpp) do: AUTO and
 * PORTABLE then differ only in the order of float additions. Measured
 * (40 tokens, two key chunks of 32): 1.1e-5 to 4.3e-5 on these fixtures (gemma3,
 * with larger logits, 1.2e-4); with Q left unrounded 2.3e-4 to 3.8e-4
 * (gemma3 2.0e-3). */
static void check_f16_cache_kernels(const char *name, double bound)
{
	char dir[256];
	snprintf(dir, sizeof(dir), "%s/%s", ROOT, name);
	struct fx_err err;
	struct fx_model *m;
	struct fx_model_params mp = fx_model_default_params();
	mp.repack = false; /* the portable kernels read plain rows */
	if (fx_model_load(dir, &mp, &m, &err)) {
		CHECKF(false, "%s: %s", name, err.msg);
		return;
	}
	enum { N = FWD_KCHUNK + 8 }; /* two key chunks */
	int32_t nv = fx_model_n_vocab(m);
	fx_token ids[N];
	for (int i = 0; i < N; i++)
		ids[i] = (fx_token)((i * 37 + 11) % nv);
	float *simd = prefill_with(m, FX_KERNELS_AUTO, FX_KV_F16, ids, N);
	float *port = prefill_with(m, FX_KERNELS_PORTABLE, FX_KV_F16, ids, N);
	if (simd && port) {
		double e = rel_err_f32(simd, port, (size_t)N * nv);
		printf("%-18s f16 cache: AUTO vs PORTABLE kernels rel err %.2e (bound %.0e)\n", name, e,
		       bound);
		CHECKF(e < bound, "%s: f16 cache: AUTO vs PORTABLE rel err %.3g >= %.0e (is Q rounded "
		       "to f16 for the K dot products?)", name, e, bound);
	}
	free(simd);
	free(port);
	fx_model_free(m);
}

int main(void)
{
	static const char *const names[] = {
		"llama", "llama3_rope", "llama_linear_rope", "llama_long", "mistral_swa",
		"qwen2", "qwen3", "qwen3_yarn", "gemma", "gemma2", "gemma3", "phi3",
		"granite", "olmo2", "smollm3", "mixtral", "qwen2_moe", "qwen3_moe", "gpt_oss", "deepseek_v3",
	};
	int n_v4 = 0;
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		char dir[256];
		static struct ref r;
		snprintf(dir, sizeof(dir), "%s/%s", ROOT, names[i]);
		bool ok = load_ref(dir, &r);
		CHECKF(ok, "%s: cannot read its references", names[i]);
		if (!ok)
			continue;
		double w = check_dir(names[i], dir, &r, true);
		printf("%-18s max rel err %.2e (prefill, hidden states, decode, greedy)\n", names[i], w);
		char tmp[64];
		if (make_v4_dir(dir, tmp)) {
			char label[64];
			snprintf(label, sizeof(label), "%s (v4 config)", names[i]);
			w = check_dir(label, tmp, &r, false);
			printf("%-18s transformers-4 config: max rel err %.2e\n", names[i], w);
			rm_dir(tmp);
			n_v4++;
		}
		char sh[256];
		snprintf(sh, sizeof(sh), "tests/fixtures/hf-tiny-sharded/%s", names[i]);
		struct stat stt;
		if (stat(sh, &stt) == 0) {
			char label[64];
			snprintf(label, sizeof(label), "%s (2 shards)", names[i]);
			w = check_dir(label, sh, &r, false);
			printf("%-18s two shards + index: max rel err %.2e\n", names[i], w);
		}
		st_close(r.st);
	}
	CHECKF(n_v4 >= 4, "only %d transformers-4 config variants found", n_v4);

	/* The 2025-2026 families (tests/fixtures/hf-tiny-next, made by
	 * scripts/make-next-fixtures.py with transformers 5.23): hybrid models
	 * whose recurrent layers keep a per-sequence state, and the
	 * attention-only families (OLMo 3 to Llama 4). */
	static const char *const next[] = { "lfm2", "mamba2", "granitemoehybrid", "qwen3_5", "qwen3_5_moe", "qwen3_next", "lfm2_moe", "nemotron_h", "falcon_h1",
					    "qwen3_5_vlm_layout", "granitemoehybrid_dense",
					    "olmo3", "seed_oss", "ernie4_5", "ernie4_5_moe", "glm4_moe", "minimax_m2",
					    "llama4", "gemma4", "gemma4_ple_kvshare", "gemma4_moe" };
	for (size_t i = 0; i < sizeof(next) / sizeof(next[0]); i++) {
		char dir[256];
		static struct ref r;
		snprintf(dir, sizeof(dir), "tests/fixtures/hf-tiny-next/%s", next[i]);
		bool ok = load_ref(dir, &r);
		CHECKF(ok, "%s: cannot read its references", next[i]);
		if (!ok)
			continue;
		double w = check_dir(next[i], dir, &r, true);
		printf("%-18s max rel err %.2e (prefill, hidden states, decode, greedy)\n", next[i], w);
		st_close(r.st);
	}

	/* F16 and BF16 checkpoints: the same model with rounded weights. */
	static const char *const dtypes[][2] = {
		{ "llama-f16", "llama" }, { "llama-bf16", "llama" }, { "gemma2-bf16", "gemma2" },
	};
	for (size_t i = 0; i < sizeof(dtypes) / sizeof(dtypes[0]); i++) {
		char dir[256], base[256];
		static struct ref r;
		snprintf(dir, sizeof(dir), "tests/fixtures/hf-tiny-dtypes/%s", dtypes[i][0]);
		snprintf(base, sizeof(base), "%s/%s", ROOT, dtypes[i][1]);
		if (!load_ref(base, &r))
			continue;
		int agree;
		double e = prefill_err(dir, NULL, &r, &agree);
		printf("%-18s rel err %.2e vs the f32 reference, argmax %d/%d rows\n", dtypes[i][0], e,
		       agree, r.n_prompt);
		/* Weights and activations rounded to 11 (f16) or 8 (bf16)
		 * significant bits, as GGML's f16/bf16 dot products do. */
		CHECKF(e < 0.1 && agree * 10 >= r.n_prompt * 9, "%s: rel err %.3g, argmax %d/%d",
		       dtypes[i][0], e, agree, r.n_prompt);
		st_close(r.st);
	}

	/* --quant q8_0 on load: measured against the f32 reference (see the
	 * closing note of the issue: tiny random models amplify rounding, so the
	 * bound asserted here is a sanity bound, not the 2e-2). */
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		char dir[256];
		static struct ref r;
		snprintf(dir, sizeof(dir), "%s/%s", ROOT, names[i]);
		if (!load_ref(dir, &r))
			continue;
		int agree;
		double e = prefill_err(dir, "q8_0", &r, &agree);
		printf("%-18s q8_0 on load: rel err %.2e, argmax %d/%d rows\n", names[i], e, agree,
		       r.n_prompt);
		CHECKF(e < 0.6 && agree * 4 >= r.n_prompt * 3, "%s q8_0: rel err %.3g, argmax %d/%d",
		       names[i], e, agree, r.n_prompt);
		st_close(r.st);
	}

	check_f16_cache_kernels("llama", 1e-4);
	check_f16_cache_kernels("qwen3", 1e-4);
	check_f16_cache_kernels("mistral_swa", 1e-4);
	check_f16_cache_kernels("phi3", 1e-4);
	check_f16_cache_kernels("gemma3", 5e-4);

	/* Clear errors for configs we cannot run. */
	check_bad_config(ROOT "/llama", "\"model_type\": \"llama\"", "\"model_type\": \"mamba\"",
			 FX_E_UNSUPPORTED, "model_type 'mamba' is not supported");
	check_bad_config(ROOT "/llama", "\"hidden_size\"", "\"hidden_sizes\"", FX_E_FORMAT,
			 "'hidden_size' is missing");
	check_bad_config(ROOT "/llama", "\"rope_type\": \"default\"", "\"rope_type\": \"dynamic\"",
			 FX_E_UNSUPPORTED, "RoPE type 'dynamic'");
	struct fx_err err = { 0 };
	struct fx_model *m;
	CHECK(fx_model_load("tests/fixtures", NULL, &m, &err) == FX_E_IO &&
	      strstr(err.msg, "config.json"));
	return check_exit();
}
