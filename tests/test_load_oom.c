/* Model load, context creation and decoding under allocation failure: the
 * k-th heap call fails, for every k until the operation needs no more
 * calls. Each attempt either returns FX_E_NOMEM with a message and no
 * object (nothing leaks: the ASan build's LeakSanitizer checks), or
 * succeeds when the failed call was one the library can do without; and
 * afterwards a load, a context and a decode give a clean run's logits bit
 * for bit. A failed decode leaves the same context usable: decoding the
 * prompt again on it gives the clean logits.
 *
 * Models: hf-tiny checkpoints of five families (with and without
 * quantize-on-load for llama) and the real GGUF files when present
 * (models/; FX_REQUIRE_MODELS=1 makes their absence a failure), every k.
 * malloc/calloc/realloc are wrapped by the linker (tests.cmake); cJSON's
 * and PCRE2's allocations (shared libraries) come through hooks: cJSON's
 * set here, PCRE2's general context in the tokenizer. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "check.h"
#include "ferrox.h"
#include "oom_wrap.h"


enum { N_TOK = 7 };

struct run {
	const char *name, *path;
	const char *quant;     /* quantize on load, or NULL */
	int32_t nv;
	fx_token tok[N_TOK];
	float *ref;            /* [N_TOK, nv]: a clean run's logits */
	float *ref2;           /* [2, nv]: sequences 0 and 1 of a clean batch */
};

static int load(const struct run *r, struct fx_model **m, struct fx_err *err)
{
	struct fx_model_params p = fx_model_default_params();
	p.quant = r->quant;
	return fx_model_load(r->path, &p, m, err);
}

static int context(const struct fx_model *m, struct fx_context **c, struct fx_err *err)
{
	struct fx_context_params p = fx_context_default_params();
	p.n_ctx = 64;
	p.n_seq_max = 2;
	p.n_threads = 2;
	return fx_context_create(m, &p, c, err);
}

/* Decode r->tok on sequence 0 of c (every row's logits) into out. */
static int decode_all(const struct run *r, struct fx_context *c, float *out)
{
	int rc = fx_decode(c, r->tok, N_TOK, true);
	int32_t rows = 0;
	const float *l = fx_get_logits(c, &rows);
	if (rc == FX_OK && l && rows == N_TOK)
		memcpy(out, l, (size_t)N_TOK * (size_t)r->nv * sizeof(float));
	return rc;
}

/* One batch: r->tok on sequence 0 and its reverse on sequence 1; the last
 * row of each into out[2, nv]. */
static int batch(const struct run *r, struct fx_context *c, float *out, int *st)
{
	fx_seq seq[2 * N_TOK];
	fx_token t[2 * N_TOK];
	for (int i = 0; i < N_TOK; i++) {
		seq[i] = 0, t[i] = r->tok[i];
		seq[N_TOK + i] = 1, t[N_TOK + i] = r->tok[N_TOK - 1 - i];
	}
	int rc = fx_batch_decode(c, &(struct fx_batch){ .n = 2 * N_TOK, .seq = seq, .token = t }, st);
	const float *a = fx_batch_logits(c, N_TOK - 1), *b = fx_batch_logits(c, 2 * N_TOK - 1);
	if (rc == FX_OK && a && b) {
		memcpy(out, a, (size_t)r->nv * sizeof(float));
		memcpy(out + r->nv, b, (size_t)r->nv * sizeof(float));
	}
	return rc;
}

static bool same(const float *a, const float *b, size_t n)
{
	return !memcmp(a, b, n * sizeof(float));
}

/* A clean model + context reproduce r->ref. */
static void check_clean(const struct run *r, const char *when, float *got)
{
	struct fx_err err = { 0 };
	struct fx_model *m = NULL;
	struct fx_context *c = NULL;
	int rc = load(r, &m, &err);
	CHECKF(rc == FX_OK, "%s: %s: load: %s", r->name, when, err.msg);
	if (rc == FX_OK && (rc = context(m, &c, &err)) == FX_OK) {
		CHECKF(decode_all(r, c, got) == FX_OK && same(got, r->ref, (size_t)N_TOK * r->nv),
		       "%s: %s: logits differ from the reference", r->name, when);
	}
	CHECKF(rc == FX_OK, "%s: %s: %s", r->name, when, err.msg);
	fx_context_free(c);
	fx_model_free(m);
}

/* The result of one failing attempt: FX_E_NOMEM with a message and no
 * object, or FX_OK. Counts refusals. */
static void check_refusal(const struct run *r, const char *what, long k, int rc,
			  const struct fx_err *err, const void *obj, long *n_nomem)
{
	if (rc == FX_OK)
		return;
	++*n_nomem;
	CHECKF(rc == FX_E_NOMEM, "%s: %s, failing call %ld: rc %d (%s), want FX_E_NOMEM", r->name,
	       what, k, rc, err->msg);
	CHECKF(err->msg[0] != 0, "%s: %s, failing call %ld: no message", r->name, what, k);
	CHECKF(obj == NULL, "%s: %s, failing call %ld: *out set on failure", r->name, what, k);
}

static void sweep_load(const struct run *r, float *got)
{
	long k, n_nomem = 0;
	for (k = 0;; k++) {
		struct fx_err err = { 0 };
		struct fx_model *m = NULL;
		calls = 0;
		fail_at = k;
		int rc = load(r, &m, &err);
		bool reached = calls > k;
		fail_at = -1;
		check_refusal(r, "load", k, rc, &err, m, &n_nomem);
		if (rc == FX_OK) {
			/* the failed call was optional: the model must be whole */
			struct fx_context *c = NULL;
			CHECKF(context(m, &c, &err) == FX_OK && decode_all(r, c, got) == FX_OK &&
			       same(got, r->ref, (size_t)N_TOK * r->nv),
			       "%s: load done past failing call %ld gives other logits", r->name, k);
			fx_context_free(c);
		}
		fx_model_free(m);
		if (!reached)
			break;
	}
	printf("%s: load: %ld heap calls, each failed in turn: %ld loads refused\n", r->name, k,
	       n_nomem);
	CHECKF(n_nomem > 0, "%s: no load met a failing heap call", r->name);
	check_clean(r, "load after the sweep", got);
}

static void sweep_context(const struct run *r, const struct fx_model *m, float *got)
{
	long k, n_nomem = 0;
	for (k = 0;; k++) {
		struct fx_err err = { 0 };
		struct fx_context *c = NULL;
		calls = 0;
		fail_at = k;
		int rc = context(m, &c, &err);
		bool reached = calls > k;
		fail_at = -1;
		check_refusal(r, "context", k, rc, &err, c, &n_nomem);
		if (rc == FX_OK)
			CHECKF(decode_all(r, c, got) == FX_OK && same(got, r->ref, (size_t)N_TOK * r->nv),
			       "%s: context made past failing call %ld gives other logits", r->name, k);
		fx_context_free(c);
		if (!reached)
			break;
	}
	printf("%s: context: %ld heap calls: %ld creations refused\n", r->name, k, n_nomem);
	CHECKF(n_nomem > 0, "%s: no context creation met a failing heap call", r->name);
}

/* fx_decode, then fx_batch_decode, on one context, the k-th heap call of
 * each failing; after a refusal the same context, emptied, decodes again. */
static void sweep_decode(const struct run *r, const struct fx_model *m, float *got)
{
	struct fx_err err = { 0 };
	struct fx_context *c = NULL;
	int st[2];
	if (context(m, &c, &err)) {
		CHECKF(false, "%s: context: %s", r->name, err.msg);
		return;
	}
	long k, n_nomem = 0, kb, n_bnomem = 0;
	for (k = 0;; k++) {
		fx_context_reset(c);
		calls = 0;
		fail_at = k;
		int rc = decode_all(r, c, got);
		bool reached = calls > k;
		fail_at = -1;
		if (rc != FX_OK) {
			n_nomem++;
			CHECKF(rc == FX_E_NOMEM && fx_context_errmsg(c)[0],
			       "%s: decode, failing call %ld: rc %d (%s)", r->name, k, rc,
			       fx_context_errmsg(c));
			CHECKF(fx_context_n_past(c) == 0, "%s: failed decode %ld left n_past %u", r->name,
			       k, fx_context_n_past(c));
			rc = decode_all(r, c, got);
		}
		CHECKF(rc == FX_OK && same(got, r->ref, (size_t)N_TOK * r->nv),
		       "%s: decode around failing call %ld: rc %d, or logits differ", r->name, k, rc);
		if (!reached)
			break;
	}
	for (kb = 0;; kb++) {
		fx_context_reset(c);
		fx_seq s1 = -1;
		CHECK(fx_seq_add(c, &s1) == FX_OK && s1 == 1);
		calls = 0;
		fail_at = kb;
		int rc = batch(r, c, got, st);
		bool reached = calls > kb;
		fail_at = -1;
		if (rc != FX_OK) {
			n_bnomem++;
			CHECKF(rc == FX_E_NOMEM, "%s: batch, failing call %ld: rc %d (%s)", r->name, kb,
			       rc, fx_context_errmsg(c));
			/* each sequence failed whole or advanced whole */
			for (int s = 0; s < 2; s++)
				CHECKF(fx_seq_n_past(c, s) == (st[s] ? 0u : (uint32_t)N_TOK),
				       "%s: batch %ld: seq %d status %d n_past %u", r->name, kb, s,
				       st[s], fx_seq_n_past(c, s));
			fx_context_reset(c);
			CHECK(fx_seq_add(c, &s1) == FX_OK);
			rc = batch(r, c, got, st);
		}
		CHECKF(rc == FX_OK && same(got, r->ref2, 2 * (size_t)r->nv),
		       "%s: batch around failing call %ld: rc %d, or logits differ", r->name, kb, rc);
		if (!reached)
			break;
	}
	printf("%s: decode: %ld heap calls, %ld refused; batch: %ld heap calls, %ld refused\n",
	       r->name, k, n_nomem, kb, n_bnomem);
	fx_context_free(c);
}

static void run_model(struct run *r)
{
	struct fx_err err = { 0 };
	struct fx_model *m = NULL;
	struct fx_context *c = NULL;
	int st[2];
	fx_seq s1;
	if (load(r, &m, &err) || context(m, &c, &err)) {
		CHECKF(false, "%s: %s", r->name, err.msg);
		fx_model_free(m);
		return;
	}
	r->nv = fx_model_n_vocab(m);
	for (int i = 0; i < N_TOK; i++)
		r->tok[i] = (fx_token)((i * 37 + 5) % r->nv);
	r->ref = malloc((size_t)N_TOK * (size_t)r->nv * sizeof(float));
	r->ref2 = malloc(2 * (size_t)r->nv * sizeof(float));
	float *got = malloc((size_t)N_TOK * (size_t)r->nv * sizeof(float));
	CHECK(decode_all(r, c, r->ref) == FX_OK);
	fx_context_reset(c);
	CHECK(fx_seq_add(c, &s1) == FX_OK && batch(r, c, r->ref2, st) == FX_OK);
	/* the batch's sequence 0 is the same prompt: same last row */
	CHECK(same(r->ref2, r->ref + (size_t)(N_TOK - 1) * r->nv, (size_t)r->nv));
	fx_context_free(c);
	sweep_load(r, got);
	sweep_context(r, m, got);
	sweep_decode(r, m, got);
	fx_model_free(m);
	free(got);
	free(r->ref);
	free(r->ref2);
}

int main(void)
{
	oom_hook_cjson(); /* config.json and safetensors headers */
	struct run tiny[] = {
		{ .name = "llama", .path = "tests/fixtures/hf-tiny/llama" },
		{ .name = "llama q8_0", .path = "tests/fixtures/hf-tiny/llama", .quant = "q8_0" },
		{ .name = "gemma3", .path = "tests/fixtures/hf-tiny/gemma3" },
		{ .name = "qwen3_moe", .path = "tests/fixtures/hf-tiny/qwen3_moe" },
		{ .name = "phi3", .path = "tests/fixtures/hf-tiny/phi3" },
		{ .name = "deepseek_v3", .path = "tests/fixtures/hf-tiny/deepseek_v3" },
	};
	for (size_t i = 0; i < sizeof(tiny) / sizeof(tiny[0]); i++)
		run_model(&tiny[i]);
	static const char *const gguf[] = { "SmolLM2-135M-Instruct.Q4_1.gguf",
					    "gemma-3-270m-q4_k_m.gguf" };
	for (size_t i = 0; i < sizeof(gguf) / sizeof(gguf[0]); i++) {
		char buf[512];
		const char *path = check_model_path(gguf[i], buf, sizeof(buf));
		if (!path)
			continue;
		struct run r = { .name = gguf[i], .path = path };
		run_model(&r);
	}
	return check_exit();
}
