/* Batch invariance: a sequence's logits are bit-identical whatever else is
 * in the batch, the KV layout (contiguous, batched, paged), the block size,
 * the ubatch size and the thread count. On fixtures of several families
 * (plain, sliding window, sinks + MoE, MoE, MLA), and on a real GGUF.
 * Also: forked sequences give the same logits as unshared runs, every
 * block returns to the pool, and a pool too small for one sequence fails
 * that sequence with FX_E_KV_FULL while the others advance untouched. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ferrox.h"

#define N_SEQ 3
#define MAX_LEN 40

struct run {
	int layout, block, ubatch, threads;
};

/* Three sequences of different lengths drawn from the vocabulary. */
static int seq_len(int s)
{
	return (int[]){ 23, 9, 31 }[s];
}

static fx_token tok_at(int s, int i, int32_t nv)
{
	return (fx_token)((s * 7919 + i * 104729 + 17) % (nv < 256 ? nv : 256));
}

static struct fx_context *make_ctx(const struct fx_model *m, const struct run *r, uint32_t n_ctx,
				   uint32_t n_seq)
{
	struct fx_err err = { 0 };
	struct fx_context *c = NULL;
	struct fx_context_params p = fx_context_default_params();
	p.n_ctx = n_ctx;
	p.n_ubatch = (uint32_t)r->ubatch;
	p.n_threads = r->threads;
	p.n_seq_max = n_seq;
	p.kv_layout = r->layout;
	p.block_size = (uint32_t)r->block;
	p.type_k = p.type_v = FX_KV_F32;
	if (fx_context_create(m, &p, &c, &err))
		CHECKF(false, "context: %s", err.msg);
	return c;
}

/* Reference: each sequence alone on a contiguous cache, token by token.
 * out[s] gets [len, nv] logits. */
static void run_alone(const struct fx_model *m, float *out[N_SEQ])
{
	int32_t nv = fx_model_n_vocab(m);
	struct run r = { FX_KV_CONTIGUOUS, 16, 1, 2 };
	for (int s = 0; s < N_SEQ; s++) {
		struct fx_context *c = make_ctx(m, &r, MAX_LEN, 1);
		if (!c)
			return;
		for (int i = 0; i < seq_len(s); i++) {
			fx_token t = tok_at(s, i, nv);
			CHECK(fx_decode(c, &t, 1, false) == FX_OK);
			memcpy(out[s] + (size_t)i * nv, fx_get_logits(c, NULL), (size_t)nv * sizeof(float));
		}
		fx_context_free(c);
	}
}

/* All sequences together: a prefill chunk of up to `chunk` tokens per
 * sequence per step, interleaved; every row keeps its logits. */
static int run_batched(const struct fx_model *m, const struct run *r, int chunk, float *out[N_SEQ])
{
	int32_t nv = fx_model_n_vocab(m);
	struct fx_context *c = make_ctx(m, r, r->layout == FX_KV_PAGED ? 128 : MAX_LEN, N_SEQ + 1);
	if (!c)
		return -1;
	fx_seq ids[N_SEQ];
	ids[0] = 0;
	for (int s = 1; s < N_SEQ; s++)
		CHECK(fx_seq_add(c, &ids[s]) == FX_OK);
	int done[N_SEQ] = { 0 };
	fx_seq bs[N_SEQ * MAX_LEN];
	fx_token bt[N_SEQ * MAX_LEN];
	int bi[N_SEQ * MAX_LEN], bseq[N_SEQ * MAX_LEN];
	bool keep[N_SEQ * MAX_LEN];
	for (;;) {
		int n = 0;
		for (int s = 0; s < N_SEQ; s++) {
			/* Sequence s takes chunk tokens, or one (a decode step). */
			int take = (s + done[s]) % 2 ? 1 : chunk;
			for (int k = 0; k < take && done[s] < seq_len(s); k++, done[s]++) {
				bs[n] = ids[s];
				bt[n] = tok_at(s, done[s], nv);
				bi[n] = done[s];
				bseq[n] = s;
				keep[n] = true;
				n++;
			}
		}
		if (!n)
			break;
		struct fx_batch b = { .n = n, .seq = bs, .token = bt, .logits = keep };
		CHECK(fx_batch_decode(c, &b, NULL) == FX_OK);
		for (int i = 0; i < n; i++) {
			const float *l = fx_batch_logits(c, i);
			CHECK(l != NULL);
			if (l)
				memcpy(out[bseq[i]] + (size_t)bi[i] * nv, l, (size_t)nv * sizeof(float));
		}
	}
	for (int s = 0; s < N_SEQ; s++)
		fx_seq_free(c, ids[s]);
	int used = fx_context_kv_blocks_used(c);
	fx_context_free(c);
	return used;
}

/* Logits after prompt[0..n) run alone on a contiguous cache. */
static void alone_last(const struct fx_model *m, const fx_token *prompt, int n, float *out)
{
	struct run cr = { FX_KV_CONTIGUOUS, 16, 0, 2 };
	struct fx_context *c = make_ctx(m, &cr, 64, 1);
	CHECK(fx_decode(c, prompt, n, false) == FX_OK);
	memcpy(out, fx_get_logits(c, NULL), (size_t)fx_model_n_vocab(m) * sizeof(float));
	fx_context_free(c);
}

/* Prefix caching: a later sequence repeating a finished one's prompt reuses
 * its full blocks, with the same logits; LRU eviction under pressure. */
static void check_prefix_cache(const char *label, const struct fx_model *m)
{
	int32_t nv = fx_model_n_vocab(m);
	struct run pr = { FX_KV_PAGED, 4, 0, 2 };
	struct fx_context *c = make_ctx(m, &pr, 32, 2); /* 8 blocks of 4 */
	fx_token p[12];
	for (int i = 0; i < 12; i++)
		p[i] = tok_at(2, i, nv);
	float *want = malloc((size_t)nv * sizeof(float));
	CHECK(fx_decode(c, p, 10, false) == FX_OK);
	fx_seq_free(c, 0);
	CHECK(fx_context_kv_blocks_used(c) == 0);
	/* Same 9-token prompt then a different token: blocks 0 and 1 reused. */
	fx_token q[10];
	memcpy(q, p, 9 * sizeof(*q));
	q[9] = tok_at(1, 0, nv);
	CHECK(fx_decode(c, q, 10, false) == FX_OK);
	CHECK(fx_context_prefix_hits(c) == 8);
	alone_last(m, q, 10, want);
	CHECKF(!memcmp(fx_get_logits(c, NULL), want, (size_t)nv * sizeof(float)),
	       "%s: a prefix-cached sequence's logits differ from an unshared run", label);
	CHECK(fx_context_kv_blocks_used(c) == 3);
	fx_seq_free(c, 0);
	/* Fill the whole pool with other tokens: the cached chain is evicted
	 * (LRU), and the prompt is then computed from scratch, still correctly. */
	fx_token o[32];
	for (int i = 0; i < 32; i++)
		o[i] = tok_at(0, i + 50, nv);
	CHECK(fx_decode(c, o, 32, false) == FX_OK);
	fx_seq_free(c, 0);
	CHECK(fx_decode(c, q, 10, false) == FX_OK);
	CHECK(fx_context_prefix_hits(c) == 8); /* no new hits: evicted */
	CHECKF(!memcmp(fx_get_logits(c, NULL), want, (size_t)nv * sizeof(float)),
	       "%s: recomputed after eviction, logits differ", label);
	fx_seq_free(c, 0);
	CHECK(fx_context_kv_blocks_used(c) == 0);
	free(want);
	fx_context_free(c);
}

/* Sliding-window layers keep only the blocks a future window can see:
 * decoding far past the window, their blocks stay bounded. */
static void check_window_release(const char *label, const struct fx_model *m, int window_blocks)
{
	int32_t nv = fx_model_n_vocab(m);
	struct run pr = { FX_KV_PAGED, 4, 1, 2 };
	struct fx_context *c = make_ctx(m, &pr, 128, 1);
	int max_used = 0, used_full = 0;
	for (int i = 0; i < 60; i++) {
		fx_token t = tok_at(1, i, nv);
		CHECK(fx_decode(c, &t, 1, false) == FX_OK);
		int u = fx_context_kv_blocks_used(c);
		max_used = u > max_used ? u : max_used;
	}
	used_full = (60 + 3) / 4; /* what keeping every block would take, per group */
	printf("%-14s 60 tokens: at most %d blocks in use (%d per layer group without release)\n",
	       label, max_used, used_full);
	CHECKF(max_used <= window_blocks, "%s: %d blocks in use, want <= %d", label, max_used,
	       window_blocks);
	fx_seq_free(c, 0);
	CHECK(fx_context_kv_blocks_used(c) == 0);
	fx_context_free(c);
}

static void check_model(const char *label, const char *path, bool prefix, int window_blocks)
{
	struct fx_err err = { 0 };
	struct fx_model *m;
	if (fx_model_load(path, NULL, &m, &err)) {
		CHECKF(false, "%s: %s", label, err.msg);
		return;
	}
	int32_t nv = fx_model_n_vocab(m);
	float *ref[N_SEQ], *got[N_SEQ];
	for (int s = 0; s < N_SEQ; s++) {
		ref[s] = calloc((size_t)MAX_LEN * nv, sizeof(float));
		got[s] = calloc((size_t)MAX_LEN * nv, sizeof(float));
	}
	run_alone(m, ref);
	static const struct run runs[] = {
		{ FX_KV_CONTIGUOUS, 16, 0, 2 }, { FX_KV_CONTIGUOUS, 16, 8, 1 },
		{ FX_KV_PAGED, 16, 0, 2 },      { FX_KV_PAGED, 16, 1, 2 },
		{ FX_KV_PAGED, 4, 8, 1 },       { FX_KV_PAGED, 1, 8, 2 },
	};
	int ok_runs = 0;
	for (size_t k = 0; k < sizeof(runs) / sizeof(runs[0]); k++) {
		for (int chunk = 1; chunk <= 8; chunk += 7) {
			for (int s = 0; s < N_SEQ; s++)
				memset(got[s], 0xff, (size_t)MAX_LEN * nv * sizeof(float));
			int used = run_batched(m, &runs[k], chunk, got);
			CHECKF(used == 0, "%s: %d KV blocks still referenced after every sequence ended",
			       label, used);
			bool same = true;
			for (int s = 0; s < N_SEQ; s++)
				same &= !memcmp(ref[s], got[s], (size_t)seq_len(s) * nv * sizeof(float));
			CHECKF(same, "%s: %s layout, block %d, ubatch %d, %d threads, chunk %d: logits "
			       "differ from each sequence alone", label,
			       runs[k].layout == FX_KV_PAGED ? "paged" : "contiguous", runs[k].block,
			       runs[k].ubatch, runs[k].threads, chunk);
			ok_runs += same;
		}
	}
	printf("%-14s batched == alone, bit for bit, in %d/%zu configurations\n", label, ok_runs,
	       2 * sizeof(runs) / sizeof(runs[0]));

	/* Fork: a shared prefix (with a partial last block), then different
	 * continuations, equals unshared runs. */
	struct run pr = { FX_KV_PAGED, 4, 0, 2 };
	struct fx_context *c = make_ctx(m, &pr, 128, 3);
	fx_token pre[10], a = tok_at(1, 3, nv), bb = tok_at(2, 5, nv);
	for (int i = 0; i < 10; i++)
		pre[i] = tok_at(0, i, nv);
	CHECK(fx_decode(c, pre, 10, false) == FX_OK);
	int before = fx_context_kv_blocks_used(c);
	fx_seq f1 = -1, f2 = -1; /* set by the forks; clang sees a path where the second is not */
	CHECK(fx_seq_fork(c, 0, &f1) == FX_OK && fx_seq_fork(c, 0, &f2) == FX_OK);
	CHECK(fx_context_kv_blocks_used(c) == before); /* forks share every block */
	fx_seq bs2[2] = { f1, f2 };
	fx_token bt2[2] = { a, bb };
	struct fx_batch b2 = { .n = 2, .seq = bs2, .token = bt2, .logits = NULL };
	CHECK(fx_batch_decode(c, &b2, NULL) == FX_OK);
	float *l1 = malloc((size_t)nv * sizeof(float)), *l2 = malloc((size_t)nv * sizeof(float));
	memcpy(l1, fx_batch_logits(c, 0), (size_t)nv * sizeof(float));
	memcpy(l2, fx_batch_logits(c, 1), (size_t)nv * sizeof(float));
	/* The partial block was copied on write for both forks: 2 new blocks
	 * per layer group (full-attention and sliding-window layers). */
	int grew = fx_context_kv_blocks_used(c) - before;
	/* a model with no attention layer (Mamba-2) keeps no blocks at all */
	bool blocks = before > 0;
	CHECKF(grew == 2 || grew == 4 || (!blocks && !grew), "%s: forks took %d new blocks", label,
	       grew);
	fx_context_free(c);
	struct run cr = { FX_KV_CONTIGUOUS, 16, 0, 2 };
	for (int k = 0; k < 2; k++) {
		c = make_ctx(m, &cr, 64, 1);
		CHECK(fx_decode(c, pre, 10, false) == FX_OK);
		CHECK(fx_decode(c, k ? &bb : &a, 1, false) == FX_OK);
		CHECKF(!memcmp(fx_get_logits(c, NULL), k ? l2 : l1, (size_t)nv * sizeof(float)),
		       "%s: fork %d differs from an unshared run", label, k + 1);
		fx_context_free(c);
	}
	free(l1);
	free(l2);

	/* A pool too small for one request: that sequence fails, the other
	 * advances and its logits match the run without the failing one. */
	if (!blocks)
		goto pool_done;
	struct run sr = { FX_KV_PAGED, 4, 0, 2 };
	c = make_ctx(m, &sr, 16, 2); /* 4 blocks of 4 tokens */
	fx_seq other;
	CHECK(fx_seq_add(c, &other) == FX_OK);
	fx_seq bs3[20];
	fx_token bt3[20];
	for (int i = 0; i < 14; i++) {
		bs3[i] = 0; /* 14 tokens: 4 blocks, leaves none for the other */
		bt3[i] = tok_at(0, i, nv);
	}
	for (int i = 14; i < 20; i++) {
		bs3[i] = other; /* 6 tokens: 2 blocks */
		bt3[i] = tok_at(1, i - 14, nv);
	}
	int st[2] = { 99, 99 };
	struct fx_batch b3 = { .n = 20, .seq = bs3, .token = bt3, .logits = NULL };
	int rc = fx_batch_decode(c, &b3, st);
	CHECKF(rc == FX_E_KV_FULL && st[0] == FX_OK && st[1] == FX_E_KV_FULL,
	       "%s: rc %d, statuses %d %d", label, rc, st[0], st[1]);
	CHECK(strstr(fx_context_errmsg(c), "free blocks") != NULL);
	CHECK(fx_seq_n_past(c, other) == 0 && fx_seq_n_past(c, 0) == 14);
	CHECK(fx_batch_logits(c, 19) == NULL);
	const float *l0 = fx_batch_logits(c, 13);
	struct fx_context *c2 = make_ctx(m, &cr, 64, 1);
	CHECK(fx_decode(c2, bt3, 14, false) == FX_OK);
	CHECKF(l0 && !memcmp(l0, fx_get_logits(c2, NULL), (size_t)nv * sizeof(float)),
	       "%s: the surviving sequence's logits changed", label);
	fx_context_free(c2);
	fx_seq_free(c, 0);
	CHECK(fx_context_kv_blocks_used(c) == 0);
	fx_context_free(c);
pool_done:
	if (prefix)
		check_prefix_cache(label, m);
	if (window_blocks)
		check_window_release(label, m, window_blocks);
	for (int s = 0; s < N_SEQ; s++) {
		free(ref[s]);
		free(got[s]);
	}
	fx_model_free(m);
}

/* Context sizes whose row count does not fit in 32 bits are refused at
 * once, naming the numbers, before anything is allocated: 2^24 x 256
 * wrapped to 0, a ubatch of 0 rows, and fx_batch_decode looped forever. */
static void check_huge_context(void)
{
	static const struct { uint32_t n_ctx, n_seq; const char *msg; } cases[] = {
		{ 1u << 24, 256, "n_ctx 16777216 x n_seq_max 256 = 4294967296 KV rows" },
		{ 1u << 20, 4096, "n_ctx 1048576 x n_seq_max 4096 = 4294967296 KV rows" },
		{ 1u << 24, 128, "n_ctx 16777216 x n_seq_max 128 = 2147483648 KV rows" },
	};
	struct fx_err err = { 0 };
	struct fx_model *m;
	if (fx_model_load("tests/fixtures/hf-tiny/llama", NULL, &m, &err)) {
		CHECKF(false, "llama: %s", err.msg);
		return;
	}
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct fx_context_params p = fx_context_default_params();
		struct fx_context *c = NULL;
		p.n_ctx = cases[i].n_ctx;
		p.n_seq_max = cases[i].n_seq;
		int rc = fx_context_create(m, &p, &c, &err);
		CHECKF(rc == FX_E_INVALID && strstr(err.msg, cases[i].msg), "%u x %u: rc %d (%s)",
		       cases[i].n_ctx, cases[i].n_seq, rc, rc ? err.msg : "created");
		fx_context_free(c);
	}
	fx_model_free(m);
}

int main(void)
{
	/* prefix: check_prefix_cache's block counts hold (one layer group;
	 * sliding-window models' prefix caching: test_kv_life);
	 * window: blocks that may stay in use decoding 60 tokens with blocks
	 * of 4 (mistral_swa: window 8 + 32 rows kept for roll-back on every
	 * layer -> at most 10 + 1 blocks; gemma2: sliding layers bounded the
	 * same way, full layers keep all 15). */
	static const struct {
		const char *name;
		bool prefix;
		int window_blocks;
	} fixtures[] = {
		{ "llama", true, 0 }, { "mistral_swa", false, 11 }, { "gemma2", false, 15 + 11 },
		{ "gpt_oss", false, 0 }, { "mixtral", true, 0 }, { "deepseek_v3", true, 0 },
		/* hybrid: short-convolution layers keep a recurrent state */
		{ "next/lfm2", false, 0 }, { "next/mamba2", false, 0 },
		{ "next/granitemoehybrid", false, 0 }, { "next/qwen3_5", false, 0 },
		{ "next/qwen3_5_moe", false, 0 }, { "next/qwen3_next", false, 0 }, { "next/lfm2_moe", false, 0 },
		{ "next/nemotron_h", false, 0 }, { "next/falcon_h1", false, 0 },
		{ "next/qwen3_5_vlm_layout", false, 0 }, { "next/granitemoehybrid_dense", false, 0 },
		{ "next/olmo3", false, 0 }, { "next/seed_oss", false, 0 },
		{ "next/ernie4_5", false, 0 }, { "next/ernie4_5_moe", false, 0 }, { "next/glm4_moe", false, 0 },
		{ "next/minimax_m2", false, 0 }, { "next/llama4", false, 0 },
		{ "next/gemma4", false, 0 }, { "next/gemma4_ple_kvshare", false, 0 },
		{ "next/gemma4_moe", false, 0 },
	};
	for (size_t i = 0; i < sizeof(fixtures) / sizeof(fixtures[0]); i++) {
		char dir[256];
		const char *nm = fixtures[i].name;
		if (!strncmp(nm, "next/", 5))
			snprintf(dir, sizeof(dir), "tests/fixtures/hf-tiny-next/%s", nm + 5);
		else
			snprintf(dir, sizeof(dir), "tests/fixtures/hf-tiny/%s", nm);
		check_model(fixtures[i].name, dir, fixtures[i].prefix, fixtures[i].window_blocks);
	}
	check_huge_context();
	char buf[512];
	const char *smol = check_model_path("SmolLM2-135M-Instruct.Q4_1.gguf", buf, sizeof(buf));
	if (smol && !getenv("FX_SANITIZE_RUN"))
		check_model("smollm2-q4_1", smol, true, 0);
	return check_exit();
}
