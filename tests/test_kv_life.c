/* The KV lifecycle through the public API (issue 20), on both layouts, on a
 * full-attention fixture (llama) and sliding-window ones (gemma3: two
 * sliding layers of window 8 and one full; mistral_swa: every layer
 * sliding), and on Gemma 3 270M when present:
 *   - roll-back: fx_seq_rm to p, then other tokens, gives the logits of a
 *     fresh sequence fed the kept tokens and the new ones, bit for bit;
 *     paged, a roll-back older than the window is refused and changes
 *     nothing;
 *   - one call: a prompt far longer than window + ubatch prefills in one
 *     fx_decode on the paged layout, with the contiguous layout's logits;
 *   - prefix caching with sliding layers: a second prompt sharing a
 *     finished one's first blocks reports prefix hits and gets the logits
 *     of an uncached run; its sliding layers took the prefix's last window
 *     from the cache;
 *   - a refusal (KV full) leaves the refused sequence, the others and the
 *     pool's block count as they were. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ferrox.h"

static fx_token tok(int s, int i, int32_t nv)
{
	return (fx_token)((s * 7919 + i * 104729 + 17) % (nv < 4096 ? nv : 4096));
}

static struct fx_context *make(const struct fx_model *m, int layout, uint32_t n_ctx,
			       uint32_t n_seq, uint32_t ubatch)
{
	struct fx_context_params p = fx_context_default_params();
	p.n_ctx = n_ctx;
	p.n_seq_max = n_seq;
	p.n_ubatch = ubatch;
	p.kv_layout = layout;
	p.block_size = 4;
	p.n_threads = 2;
	struct fx_context *c = NULL;
	struct fx_err err;
	if (fx_context_create(m, &p, &c, &err))
		CHECKF(0, "context: %s", err.msg);
	return c;
}

/* Last-row logits of t[0..n) decoded alone from empty, contiguous. */
static float *fresh(const struct fx_model *m, const fx_token *t, int n)
{
	size_t nv = (size_t)fx_model_n_vocab(m);
	struct fx_context *c = make(m, FX_KV_CONTIGUOUS, 256, 1, 7);
	float *out = calloc(nv, sizeof(float));
	if (c && fx_decode(c, t, n, false) == FX_OK)
		memcpy(out, fx_get_logits(c, NULL), nv * sizeof(float));
	else
		CHECKF(0, "fresh decode failed");
	fx_context_free(c);
	return out;
}

static bool same_last(const struct fx_context *c, const float *want, int32_t nv)
{
	int32_t rows;
	const float *l = fx_get_logits(c, &rows);
	return l && !memcmp(l + (size_t)(rows - 1) * nv, want, (size_t)nv * sizeof(float));
}

static void check_rollback(const char *name, const struct fx_model *m, int layout, bool swa)
{
	int32_t nv = fx_model_n_vocab(m);
	const char *lay = layout == FX_KV_PAGED ? "paged" : "contiguous";
	struct fx_context *c = make(m, layout, 256, 2, 5);
	fx_token t[64];
	for (int i = 0; i < 64; i++)
		t[i] = tok(1, i, nv);
	/* 20 tokens, back to 13 (inside a block), 6 others; back to 8 (a block
	 * boundary), 5 more. */
	CHECK(fx_decode(c, t, 20, false) == FX_OK);
	CHECK(fx_seq_rm(c, 0, 13) == FX_OK);
	CHECK(fx_seq_n_past(c, 0) == 13);
	fx_token u[32];
	memcpy(u, t, 13 * sizeof(*u));
	for (int i = 13; i < 19; i++)
		u[i] = tok(2, i, nv);
	CHECK(fx_decode(c, u + 13, 6, false) == FX_OK);
	float *want = fresh(m, u, 19);
	CHECKF(same_last(c, want, nv), "%s %s: logits after a roll-back to 13 differ from a fresh run",
	       name, lay);
	free(want);
	CHECK(fx_seq_rm(c, 0, 8) == FX_OK);
	for (int i = 8; i < 13; i++)
		u[i] = tok(3, i, nv);
	CHECK(fx_decode(c, u + 8, 5, false) == FX_OK);
	want = fresh(m, u, 13);
	CHECKF(same_last(c, want, nv), "%s %s: logits after a roll-back to 8 differ", name, lay);
	free(want);
	/* Roll-back past the end changes nothing; a forked sequence is
	 * rolled back without touching its source. */
	CHECK(fx_seq_rm(c, 0, 100) == FX_OK && fx_seq_n_past(c, 0) == 13);
	fx_seq f;
	CHECK(fx_seq_fork(c, 0, &f) == FX_OK);
	CHECK(fx_seq_rm(c, f, 10) == FX_OK && fx_seq_n_past(c, f) == 10 && fx_seq_n_past(c, 0) == 13);
	fx_seq_free(c, f);
	/* Far past the window and what is kept for roll-back (32 rows), a
	 * roll-back into released rows is refused. */
	fx_token more[47];
	for (int i = 0; i < 47; i++)
		more[i] = tok(4, i, nv);
	CHECK(fx_decode(c, more, 47, false) == FX_OK);
	int32_t used = fx_context_kv_blocks_used(c);
	int rc = fx_seq_rm(c, 0, 4);
	if (layout == FX_KV_PAGED && swa) {
		CHECKF(rc == FX_E_INVALID, "%s paged: a roll-back from 60 to 4 (window 8 + 32 kept) gave %d",
		       name, rc);
		CHECK(fx_seq_n_past(c, 0) == 60 && fx_context_kv_blocks_used(c) == used);
	} else {
		CHECKF(rc == FX_OK && fx_seq_n_past(c, 0) == 4, "%s %s: roll-back to 4: %d", name, lay, rc);
	}
	fx_context_free(c);
}

/* A 150-token prompt (window 8, ubatch 5) in one call, paged == contiguous. */
static void check_one_call(const char *name, const struct fx_model *m)
{
	int32_t nv = fx_model_n_vocab(m), rows;
	fx_token t[150];
	for (int i = 0; i < 150; i++)
		t[i] = tok(5, i, nv);
	struct fx_context *pc = make(m, FX_KV_PAGED, 256, 1, 5);
	int rc = fx_decode(pc, t, 150, true);
	CHECKF(rc == FX_OK, "%s paged: a 150-token prompt in one call: %s", name,
	       fx_context_errmsg(pc));
	struct fx_context *cc = make(m, FX_KV_CONTIGUOUS, 256, 1, 5);
	CHECK(fx_decode(cc, t, 150, true) == FX_OK);
	const float *a = fx_get_logits(pc, &rows), *b = fx_get_logits(cc, NULL);
	CHECKF(!rc && rows == 150 && !memcmp(a, b, (size_t)150 * nv * sizeof(float)),
	       "%s: paged one-call prefill differs from contiguous", name);
	printf("%-12s 150-token prompt in one paged call (ubatch 5): %d blocks in use\n", name,
	       fx_context_kv_blocks_used(pc));
	fx_context_free(pc);
	fx_context_free(cc);
}

/* Prefix caching with sliding layers: 40 tokens, freed; then 33 of them
 * and 7 others. */
static void check_prefix(const char *name, const struct fx_model *m)
{
	int32_t nv = fx_model_n_vocab(m);
	struct fx_context *c = make(m, FX_KV_PAGED, 256, 2, 16);
	fx_token p[40], q[40];
	for (int i = 0; i < 40; i++) {
		p[i] = tok(6, i, nv);
		q[i] = i < 33 ? p[i] : tok(7, i, nv);
	}
	CHECK(fx_decode(c, p, 40, false) == FX_OK);
	fx_seq_free(c, 0);
	CHECK(fx_context_kv_blocks_used(c) == 0);
	CHECK(fx_decode(c, q, 40, false) == FX_OK);
	int64_t hits = fx_context_prefix_hits(c);
	CHECKF(hits == 32, "%s: %lld prefix hits, want 32 (8 blocks of 4)", name, (long long)hits);
	float *want = fresh(m, q, 40);
	CHECKF(same_last(c, want, nv), "%s: a prefix-cached prompt's logits differ from a fresh run",
	       name);
	free(want);
	/* Decoding on from the reused prefix stays exact. */
	fx_token next = tok(8, 0, nv);
	CHECK(fx_decode(c, &next, 1, false) == FX_OK);
	fx_token r[41];
	memcpy(r, q, 40 * sizeof(*r));
	r[40] = next;
	want = fresh(m, r, 41);
	CHECKF(same_last(c, want, nv), "%s: decoding after a reused prefix differs", name);
	free(want);
	printf("%-12s second prompt sharing 33 tokens: %lld prefix hits\n", name, (long long)hits);
	fx_context_free(c);
}

/* n_ctx 32 (8 blocks of 4): sequence 0 holds 24 tokens; sequence 1 asking
 * 16 is refused and nothing moves. */
static void check_refusal(const char *name, const struct fx_model *m)
{
	int32_t nv = fx_model_n_vocab(m);
	struct fx_context *c = make(m, FX_KV_PAGED, 32, 2, 8);
	fx_token t[24];
	fx_token o[16];
	for (int i = 0; i < 24; i++)
		t[i] = tok(9, i, nv);
	for (int i = 0; i < 16; i++)
		o[i] = tok(10, i, nv); /* not a cached prefix */
	CHECK(fx_decode(c, t, 24, false) == FX_OK);
	fx_seq s1;
	CHECK(fx_seq_add(c, &s1) == FX_OK);
	int32_t used = fx_context_kv_blocks_used(c);
	fx_seq seq[16];
	bool keep[16] = { 0 };
	for (int i = 0; i < 16; i++)
		seq[i] = s1;
	keep[15] = true;
	struct fx_batch b = { .n = 16, .seq = seq, .token = o, .logits = keep };
	int st[2] = { 0 };
	int rc = fx_batch_decode(c, &b, st);
	CHECKF(rc == FX_E_KV_FULL && st[1] == FX_E_KV_FULL, "%s: a sequence too big for the pool: %d",
	       name, rc);
	CHECK(fx_seq_n_past(c, s1) == 0 && fx_seq_n_past(c, 0) == 24);
	CHECK(fx_context_kv_blocks_used(c) == used);
	CHECK(fx_decode(c, t, 4, false) == FX_OK && fx_seq_n_past(c, 0) == 28);
	fx_context_free(c);
}

static void check_model(const char *name, const char *path, bool swa)
{
	struct fx_model *m = NULL;
	struct fx_err err;
	if (fx_model_load(path, NULL, &m, &err)) {
		CHECKF(0, "%s: %s", name, err.msg);
		return;
	}
	check_rollback(name, m, FX_KV_CONTIGUOUS, swa);
	check_rollback(name, m, FX_KV_PAGED, swa);
	if (swa)
		check_one_call(name, m);
	check_prefix(name, m);
	check_refusal(name, m);
	fx_model_free(m);
}

int main(void)
{
	check_model("llama", "tests/fixtures/hf-tiny/llama", false);
	check_model("gemma3", "tests/fixtures/hf-tiny/gemma3", true);
	check_model("mistral_swa", "tests/fixtures/hf-tiny/mistral_swa", true);
	return check_exit();
}
