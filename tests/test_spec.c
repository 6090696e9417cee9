/* Speculative decoding is lossless: on both default models, greedy and
 * sampled, with ngram-simple drafts of several lengths, alone, beside a
 * plain sequence in the same batches and on the paged layout, every token
 * equals plain decoding's and the logits it was sampled from are the same
 * bits (so the roll-back of rejected drafts left the K/V as if they were
 * never decoded). Also: the ngram-simple drafter against llama.cpp's
 * common_ngram_simple_draft on hand-made histories, --spec-type parsing. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "ferrox.h"

#define N_GEN 48
/* Tokens generated per case: N_GEN, or 16 under the sanitizers (ASan
 * makes the forward pass ~10x slower; FX_SANITIZE_RUN, as the other
 * model tests). */
static int n_gen = N_GEN;
#define N_MAX 400

/* FNV-1a over a logits row's bytes. */
static uint64_t row_hash(const float *l, int32_t n)
{
	uint64_t h = 1469598103934665603ull;
	const unsigned char *p = (const unsigned char *)l;
	for (size_t i = 0; i < (size_t)n * sizeof(float); i++)
		h = (h ^ p[i]) * 1099511628211ull;
	return h;
}

/* One generation: tokens and the hash of the logits each came from. */
struct gen {
	fx_token tok[N_GEN];
	uint64_t hash[N_GEN];
	int n;
	long drafted, accepted;
};

static struct fx_sampler *sampler(const struct fx_model *m, float temp, uint64_t seed)
{
	struct fx_sampler_params sp = fx_sampler_default_params();
	struct fx_sampler *s = NULL;
	struct fx_err err;
	sp.temp = temp;
	sp.seed = seed;
	CHECK(fx_sampler_create(&sp, fx_model_n_vocab(m), &s, &err) == FX_OK);
	return s;
}

/* Plain decoding of seq: one token a step, sampled at its position. */
static void plain(struct fx_context *c, fx_seq seq, struct fx_sampler *s, const fx_token *prompt, int n,
		  int32_t nv, struct gen *g)
{
	fx_token tok[N_MAX];
	fx_seq sq[N_MAX];
	memcpy(tok, prompt, (size_t)n * sizeof(*tok));
	for (int i = 0; i < n; i++)
		sq[i] = seq;
	struct fx_batch b = { .n = n, .seq = sq, .token = tok };
	int32_t row = n - 1;
	g->n = 0;
	while (g->n < n_gen) {
		CHECK(fx_batch_decode(c, &b, NULL) == FX_OK);
		const float *l = fx_batch_logits(c, row);
		if (!l)
			return;
		fx_token t = fx_sampler_sample_at(s, l, fx_seq_n_past(c, seq));
		fx_sampler_accept(s, t);
		g->hash[g->n] = row_hash(l, nv);
		g->tok[g->n++] = t;
		tok[0] = t;
		b.n = 1;
		row = 0;
	}
}

/* The same with ngram-simple drafts (size_n, n_max), each step one batch
 * [last, drafts] of seq, beside one plain row of other (>= 0) whose own
 * plain generation goes into og. */
static void spec(struct fx_context *c, fx_seq seq, struct fx_sampler *s, const fx_token *prompt, int n,
		 int32_t nv, struct fx_spec_drafter *dr, struct gen *g, fx_seq other, struct fx_sampler *os,
		 const fx_token *oprompt, int on, struct gen *og)
{
	fx_token hist[N_MAX + N_GEN], tok[N_MAX], draft[64], out[65];
	fx_seq sq[N_MAX];
	bool keep[N_MAX];
	int nh = n;
	memcpy(hist, prompt, (size_t)n * sizeof(*hist));
	g->n = 0;
	g->drafted = g->accepted = 0;
	if (og)
		og->n = 0;
	/* the prompts: all but the last token, then steps from the last */
	int bn = 0;
	for (int i = 0; i < n - 1; i++, bn++) {
		sq[bn] = seq;
		tok[bn] = prompt[i];
		keep[bn] = false;
	}
	for (int i = 0; og && i < on - 1; i++, bn++) {
		sq[bn] = other;
		tok[bn] = oprompt[i];
		keep[bn] = false;
	}
	struct fx_batch b = { .n = bn, .seq = sq, .token = tok, .logits = keep };
	CHECK(fx_batch_decode(c, &b, NULL) == FX_OK);
	CHECK(fx_spec_drafter_observe(dr, c, 0, 0, n - 1) == FX_OK);
	fx_token olast = og ? oprompt[on - 1] : 0;
	while (g->n < n_gen || (og && og->n < n_gen)) {
		bool mine = g->n < n_gen; /* this sequence still generating */
		int k = mine ? fx_spec_drafter_draft(dr, hist, nh, draft, 64) : 0;
		if (k > n_gen - g->n - 1)
			k = n_gen - g->n - 1;
		bn = 0;
		for (int i = 0; mine && i <= k; i++, bn++) {
			sq[bn] = seq;
			tok[bn] = i ? draft[i - 1] : hist[nh - 1];
			keep[bn] = true;
		}
		int orow = bn;
		if (og && og->n < n_gen) {
			sq[bn] = other;
			tok[bn] = olast;
			keep[bn++] = true;
		}
		b.n = bn;
		CHECK(fx_batch_decode(c, &b, NULL) == FX_OK);
		if (og && og->n < n_gen) {
			const float *l = fx_batch_logits(c, orow);
			CHECK(l != NULL);
			if (!l)
				return;
			olast = fx_sampler_sample_at(os, l, fx_seq_n_past(c, other));
			fx_sampler_accept(os, olast);
			og->hash[og->n] = row_hash(l, nv);
			og->tok[og->n++] = olast;
		}
		if (!mine)
			continue;
		int32_t n_out = 0, p_last = nh - 1;
		int rc = fx_spec_accept(c, seq, s, 0, draft, k, out, &n_out);
		CHECKF(rc == FX_OK && n_out >= 1, "fx_spec_accept: %d (k %d, n_past %u, nh %d, n_out %d): %s", rc, k, fx_seq_n_past(c, seq), nh, n_out, fx_context_errmsg(c));
		if (rc || n_out < 1)
			return;
		for (int i = 0; i < n_out && g->n < n_gen; i++) {
			g->hash[g->n] = row_hash(fx_batch_logits(c, i), nv);
			g->tok[g->n++] = out[i];
			hist[nh++] = out[i];
			if (i < k && out[i] == draft[i])
				g->accepted++;
		}
		g->drafted += k;
		CHECK(fx_spec_drafter_observe(dr, c, 0, p_last, n_out) == FX_OK);
		/* the sequence holds last and the accepted drafts */
		CHECK(fx_seq_n_past(c, seq) == (uint32_t)(nh - 1));
	}
}

static bool same(const struct gen *a, const struct gen *b)
{
	return a->n == b->n && !memcmp(a->tok, b->tok, (size_t)a->n * sizeof(a->tok[0])) &&
	       !memcmp(a->hash, b->hash, (size_t)a->n * sizeof(a->hash[0]));
}

static struct fx_context *context(const struct fx_model *m, int32_t layout, uint32_t ubatch,
				  uint32_t n_rollback)
{
	struct fx_context_params p = fx_context_default_params();
	struct fx_context *c = NULL;
	struct fx_err err;
	p.n_ctx = 1024;
	p.n_seq_max = 2;
	p.n_ubatch = ubatch;
	p.n_threads = 2;
	p.kv_layout = layout;
	p.n_rollback = n_rollback;
	p.hidden = true; /* draft-mtp reads the target's hidden rows */
	CHECKF(fx_context_create(m, &p, &c, &err) == FX_OK, "%s", err.msg);
	return c;
}

static struct fx_spec_drafter *drafter_new(const struct fx_model *m, const struct fx_model *dm, int size_n,
					   int n_max)
{
	struct fx_spec_params sp = fx_spec_default_params();
	struct fx_spec_drafter *d = NULL;
	struct fx_err err;
	/* dm == m with an MTP block: the model's own MTP drafts */
	sp.types = dm && dm == m && fx_model_n_mtp(m) ? FX_SPEC_DRAFT_MTP
		   : dm ? FX_SPEC_DRAFT_SIMPLE : FX_SPEC_NGRAM_SIMPLE;
	if (sp.types == FX_SPEC_DRAFT_MTP)
		dm = NULL;
	sp.ngram_size_n = size_n;
	sp.n_max = n_max;
	CHECKF(fx_spec_drafter_create(&sp, m, dm, 1024, 2, &d, &err) == FX_OK, "drafter: %s", err.msg);
	return d;
}

/* model (a GGUF path) against plain decoding with the cases below; dm
 * (may be NULL): the draft model, else ngram-simple */
static void model_case(const char *file, const char *path, const struct fx_model *dm)
{
	struct fx_model *m = NULL;
	struct fx_err err;
	if (fx_model_load(path, NULL, &m, &err)) {
		CHECKF(0, "%s: %s", path, err.msg);
		return;
	}
	/* lookup-friendly: the text repeats, as in editing or summarising a
	 * given passage; the other sequence is free text */
	const char *text = "Speculative decoding checks several drafted tokens in one forward pass. "
			   "Speculative decoding checks several drafted tokens in one forward pass. "
			   "Speculative decoding checks";
	const char *free_text = "Once upon a time, in a small village by the sea,";
	fx_token p[N_MAX], q[N_MAX];
	size_t np = 0, nq = 0;
	CHECK(fx_tokenize(m, text, strlen(text), true, false, p, N_MAX, &np) == FX_OK);
	CHECK(fx_tokenize(m, free_text, strlen(free_text), true, false, q, N_MAX, &nq) == FX_OK);
	int32_t nv = fx_model_n_vocab(m);
	static const struct {
		float temp;
		int size_n, n_max;
		int32_t layout;
		uint32_t ubatch;
	} cases[] = {
		{ 0.0f, 3, 4, FX_KV_CONTIGUOUS, 512 }, { 0.0f, 2, 16, FX_KV_CONTIGUOUS, 7 },
		{ 0.0f, 3, 1, FX_KV_PAGED, 512 },      { 0.8f, 3, 4, FX_KV_CONTIGUOUS, 512 },
		{ 0.8f, 2, 16, FX_KV_PAGED, 5 },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct gen ref, oref, got, ogot;
		struct fx_context *c = context(m, cases[i].layout, cases[i].ubatch, 0);
		if (!c)
			continue;
		struct fx_sampler *s = sampler(m, cases[i].temp, 42), *os = sampler(m, cases[i].temp, 7);
		plain(c, 0, s, p, (int)np, nv, &ref);
		fx_seq s1 = -1;
		CHECK(fx_seq_add(c, &s1) == FX_OK);
		plain(c, s1, os, q, (int)nq, nv, &oref);
		fx_context_reset(c);
		fx_sampler_free(s);
		fx_sampler_free(os);
		/* alone */
		struct fx_spec_drafter *dr = drafter_new(m, dm, cases[i].size_n, cases[i].n_max);
		s = sampler(m, cases[i].temp, 42);
		spec(c, 0, s, p, (int)np, nv, dr, &got, -1, NULL, NULL, 0, NULL);
		CHECKF(same(&ref, &got), "%s case %zu: speculative output differs from plain", file, i);
		CHECKF(n_gen < N_GEN || cases[i].temp > 0 || got.accepted > 0,
		       "%s case %zu: no draft accepted (%ld drafted)",
		       file, i, got.drafted);
		printf("%s%s case %zu (temp %.1f, n %d, max %d, %s): %ld drafted, %ld accepted, %s\n", file,
		       dm ? " with a draft model" : "", i,
		       (double)cases[i].temp, cases[i].size_n, cases[i].n_max,
		       cases[i].layout == FX_KV_PAGED ? "paged" : "contiguous", got.drafted, got.accepted,
		       same(&ref, &got) ? "same tokens and logits" : "DIFFERENT");
		fx_context_reset(c);
		fx_sampler_free(s);
		/* beside a plain sequence in the same batches */
		s = sampler(m, cases[i].temp, 42);
		os = sampler(m, cases[i].temp, 7);
		CHECK(fx_seq_add(c, &s1) == FX_OK);
		spec(c, 0, s, p, (int)np, nv, dr, &got, s1, os, q, (int)nq, &ogot);
		CHECKF(same(&ref, &got) && same(&oref, &ogot), "%s case %zu: in a batch, the speculative "
		       "(%d) or the plain sequence (%d: %d of %d tokens) differs", file, i, same(&ref, &got),
		       same(&oref, &ogot), ogot.n, oref.n);
		fx_sampler_free(s);
		fx_sampler_free(os);
		fx_spec_drafter_free(dr);
		fx_context_free(c);
	}
	fx_model_free(m);
}

/* The hybrid fixtures (tests/fixtures/hf-tiny-next: short convolution,
 * Mamba-2, Gated DeltaNet tiled and grouped, Mamba-2 beside attention and
 * in parallel with it), from token ids: the prompt's first 12 ids twice,
 * so ngram-simple finds matches. Their recurrent states roll back through
 * the ring n_rollback keeps; without it drafts are refused. */
static void hybrid_case(const char *name)
{
	char dir[256];
	snprintf(dir, sizeof(dir), "tests/fixtures/hf-tiny-next/%s", name);
	struct fx_model *m = NULL;
	struct fx_err err;
	if (fx_model_load(dir, NULL, &m, &err)) {
		CHECKF(0, "%s: %s", dir, err.msg);
		return;
	}
	/* ids 3..30 twice, then its start again (any vocabulary has them) */
	fx_token p[40];
	int np = 0;
	for (int r = 0; r < 2; r++)
		for (int i = 0; i < 12; i++)
			p[np++] = 3 + (i * 7) % 28;
	for (int i = 0; i < 4; i++)
		p[np++] = 3 + (i * 7) % 28;
	int32_t nv = fx_model_n_vocab(m);
	static const struct {
		float temp;
		int n_max;
		int32_t layout;
		uint32_t ubatch;
	} cases[] = { { 0.0f, 4, FX_KV_CONTIGUOUS, 512 }, { 0.8f, 8, FX_KV_PAGED, 3 } };
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct gen ref, got;
		struct fx_context *c = context(m, cases[i].layout, cases[i].ubatch, (uint32_t)cases[i].n_max);
		if (!c)
			continue;
		CHECK(fx_context_roll_back_max(c) == cases[i].n_max);
		struct fx_sampler *s = sampler(m, cases[i].temp, 42);
		plain(c, 0, s, p, np, nv, &ref);
		fx_context_reset(c);
		fx_sampler_free(s);
		/* ngram drafts, then the model drafting for itself (every
		 * greedy draft accepted; sampled, some: roll-backs mid-draft) */
		for (int dm = 0; dm < 2; dm++) {
			struct fx_spec_drafter *dr = drafter_new(m, dm ? m : NULL, 2, cases[i].n_max);
			s = sampler(m, cases[i].temp, 42);
			fx_context_reset(c);
			spec(c, 0, s, p, np, nv, dr, &got, -1, NULL, NULL, 0, NULL);
			CHECKF(same(&ref, &got), "%s case %zu (%s): speculative output differs from plain", name,
			       i, dm ? "draft model" : "ngram");
			CHECKF(n_gen < N_GEN || !dm || fx_model_n_mtp(m) || got.accepted > 0,
			       "%s case %zu: no draft accepted", name, i);
			CHECKF(!dm || got.drafted > 0, "%s case %zu: nothing drafted", name, i);
			printf("%s case %zu (temp %.1f, max %d, %s, %s): %ld drafted, %ld accepted, %s\n", name,
			       i, (double)cases[i].temp, cases[i].n_max,
			       cases[i].layout == FX_KV_PAGED ? "paged" : "contiguous",
			       dm ? (fx_model_n_mtp(m) ? "its MTP block drafting" : "itself as draft model")
				  : "ngram", got.drafted, got.accepted,
			       same(&ref, &got) ? "same tokens and logits" : "DIFFERENT");
			fx_spec_drafter_free(dr);
			fx_sampler_free(s);
		}
		fx_context_free(c);
	}
	/* no ring: a recurrent model cannot take drafts back */
	struct fx_context *c = context(m, FX_KV_CONTIGUOUS, 512, 0);
	if (c) {
		fx_token out[4], d[2] = { 5, 6 };
		int32_t n_out;
		CHECK(fx_context_roll_back_max(c) == 0 && !fx_context_can_roll_back(c));
		CHECK(fx_decode(c, p, 4, false) == FX_OK);
		struct fx_sampler *s = sampler(m, 0.0f, 1);
		CHECK(fx_spec_verify(c, 0, s, p[4], d, 2, out, &n_out) == FX_E_UNSUPPORTED);
		CHECK(fx_seq_n_past(c, 0) == 4);
		fx_sampler_free(s);
		fx_context_free(c);
	}
	fx_model_free(m);
}

static void drafter(void)
{
	struct fx_spec_params sp = fx_spec_default_params();
	fx_token d[64];
	sp.types = FX_SPEC_NGRAM_SIMPLE;
	sp.ngram_size_n = 2;
	sp.ngram_size_m = 3;
	/* llama.cpp: the pattern (last 2, the sampled one included) found at
	 * 1 (1 2), then min(m, cur - (match + n)) = 3 tokens after it */
	const fx_token h[] = { 9, 1, 2, 3, 4, 5, 6, 7, 1, 2 };
	CHECK(fx_spec_draft(&sp, h, 10, d, 64) == 3 && d[0] == 3 && d[1] == 4 && d[2] == 5);
	/* the latest earlier occurrence wins; cap limits */
	const fx_token h2[] = { 9, 1, 2, 3, 8, 1, 2, 4, 6, 6, 6, 1, 2 };
	CHECK(fx_spec_draft(&sp, h2, 13, d, 2) == 2 && d[0] == 4 && d[1] == 6);
	/* no match; too short a history (cur_len <= n + m + 1); off */
	const fx_token h3[] = { 9, 1, 2, 3, 4, 5, 6, 7, 8, 2 };
	CHECK(fx_spec_draft(&sp, h3, 10, d, 64) == 0);
	CHECK(fx_spec_draft(&sp, h, 6, d, 64) == 0);
	/* fewer than n tokens to copy: none (llama.cpp's copy_max < n_draft_min) */
	const fx_token h4[] = { 5, 5, 5, 5, 5, 5, 9, 1, 2, 7, 1, 2 };
	sp.ngram_size_m = 48;
	CHECK(fx_spec_draft(&sp, h4, 12, d, 64) == 0);
	sp.types = 0;
	CHECK(fx_spec_draft(&sp, h, 10, d, 64) == 0);
	uint32_t t = 0;
	struct fx_err err;
	CHECK(fx_spec_types_parse("ngram-simple", &t, &err) == FX_OK && t == FX_SPEC_NGRAM_SIMPLE);
	CHECK(fx_spec_types_parse("none", &t, &err) == FX_OK && t == 0);
	CHECK(fx_spec_types_parse("ngram-simple,draft-mtp", &t, &err) == FX_OK &&
	      t == (FX_SPEC_NGRAM_SIMPLE | FX_SPEC_DRAFT_MTP));
	CHECK(fx_spec_types_parse("draft-eagle3", &t, &err) == FX_E_INVALID && strstr(err.msg, "not supported"));
	CHECK(fx_spec_types_parse("ngram-simpl", &t, &err) == FX_E_INVALID && strstr(err.msg, "unknown"));
}

int main(void)
{
	bool san = getenv("FX_SANITIZE_RUN") != NULL;
	if (san)
		n_gen = 16;
	drafter();
	static const char *const hybrids[] = { "lfm2", "mamba2", "qwen3_5", "qwen3_next", "granitemoehybrid",
					       "falcon_h1", "qwen3_5_mtp", "qwen3_5_moe_mtp" };
	for (size_t i = 0; i < sizeof(hybrids) / sizeof(hybrids[0]); i++)
		hybrid_case(hybrids[i]);
	char sb[512], gb[512];
	const char *smol = check_model_path("SmolLM2-135M-Instruct.Q4_1.gguf", sb, sizeof(sb));
	const char *gemma = check_model_path("gemma-3-270m-q4_k_m.gguf", gb, sizeof(gb));
	if (smol)
		model_case("SmolLM2", smol, NULL);
	if (gemma)
		model_case("Gemma 3", gemma, NULL);
	/* a draft model with the target's vocabulary: SmolLM2 Q4_1 drafting
	 * for a Q8_0 SmolLM2 ferrox's convert makes from it (no larger model
	 * of that vocabulary is at hand: a correctness check) */
	char q8[64];
	struct fx_err err;
	struct fx_model *dm = NULL;
	snprintf(q8, sizeof(q8), "/tmp/test_spec_%d.gguf", (int)getpid());
	if (smol && fx_convert(smol, q8, "q8_0", NULL, &err) == FX_OK &&
	    fx_model_load(smol, NULL, &dm, &err) == FX_OK) {
		model_case("SmolLM2 Q8_0", q8, dm);
		/* vocabularies that differ are refused */
		struct fx_model *g = NULL;
		struct fx_spec_drafter *d = NULL;
		struct fx_spec_params sp = fx_spec_default_params();
		if (gemma && fx_model_load(gemma, NULL, &g, &err) == FX_OK) {
			CHECK(fx_spec_drafter_create(&sp, g, dm, 256, 1, &d, &err) == FX_E_INVALID && !d &&
			      strstr(err.msg, "vocabulary"));
			fx_model_free(g);
		}
		sp.types = FX_SPEC_DRAFT_SIMPLE;
		CHECK(fx_spec_drafter_create(&sp, dm, NULL, 256, 1, &d, &err) == FX_E_INVALID && !d);
	} else if (smol) {
		CHECKF(0, "convert or load for the draft-model case: %s", err.msg);
	}
	fx_model_free(dm);
	unlink(q8);
	return check_exit();
}
