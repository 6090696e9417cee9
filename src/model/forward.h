/* The forward pass: ONE decoder-layer body for every architecture, the
 * decorations chosen by the model's arch_desc row and hparams, the K/V
 * backing passed as a struct kv_view. */
#ifndef FX_MODEL_FORWARD_H
#define FX_MODEL_FORWARD_H

#include <stdbool.h>
#include <stdint.h>

#include "core/threadpool.h"
#include "kv/kv.h"
#include "model/model.h"

/* Keys per online-softmax step of attention (attn.c): a chunk's scores
 * are computed together and the running max is updated once per chunk.
 * Chunks start at a query's first visible key, so its chunking never
 * depends on the batch. The size moves rounding (where the max is taken):
 * 16 measured ~2% faster at 8 sequences (SmolLM2) but moved Gemma 3's
 * perplexity from +0.10% to +0.26% of llama-perplexity's; 64 was 3%
 * slower. */
enum { FWD_KCHUNK = 32 };

/* Tokens of one sequence attention takes together (attn.c): a prefill's
 * consecutive tokens share each chunk's K/V rows, read and converted once
 * for both. */
enum { FWD_TOK_TILE = 2 };

/* Per-call activations, sized once when a context is created so nothing is
 * allocated per token. Row-major [n_max, width] unless noted. */
struct fwd_scratch {
	int32_t n_max;       /* most tokens one model_forward call may take */
	int32_t n_ctx;       /* longest sequence attention may see */
	int n_threads;
	float *x;            /* [n_max, n_embd] residual stream */
	float *h;            /* [n_max, n_embd] normed sublayer input */
	float *att;          /* [n_max, n_head*head_dim_v] attention output before wo */
	float *q, *k, *v;    /* [n_max, n_head*head_dim], [n_max, kv width] x2 */
	float *o;            /* [n_max, n_embd] sublayer output */
	float *o2;           /* [n_max, n_embd] a parallel mixer's output (Falcon-H1), or NULL */
	float *gate, *up;    /* [n_max, max(n_ff, n_ff_exp, n_ff_shexp)] */
	float *router;       /* [n_max, n_expert] router logits, then probabilities */
	float *exp_out;      /* [n_embd] one expert's output for one token */
	float *exp_in;       /* [n_embd] one expert's scaled input (arch moe_weight_in) */
	float *mla;          /* MLA latents: [n_max, q_lora + n_head*head_dim + kv_lora +
			      * n_rot + n_head*(head_dim - n_rot + head_dim_v)], or NULL */
	float *scores;       /* [n_threads, 2 + FWD_KCHUNK, FWD_TOK_TILE * n_head]
			      * online-softmax max and sum, then a chunk's scores
			      * per attention row (a token's query head; attn.c) */
	float *vrow;         /* [n_threads, FWD_TOK_TILE * n_head + 1, head_dim_v]
			      * running V sums of the rows, then one V row as f32 */
	void *qconv;         /* [n_threads, FWD_TOK_TILE * n_head] Q heads in K's dot type */
	float *rope_tab;     /* [2][n_max, max(n_rot, n_rot_swa)] RoPE cos/sin of this
			      * forward's positions, one table per inv_freq (global,
			      * sliding), filled by the first layer that uses it */
	size_t rope_rot;     /* floats a token in rope_tab */
	const float *rope_key[2]; /* the inv_freq each table holds this forward, or NULL */
	int rope_nrot[2];
	size_t qconv_stride; /* bytes per thread in qconv */
	void *erow;          /* one token_embd row unpacked from x8 groups */
	void *qbuf;          /* activations quantized for op_matmul */
	float *qg, *qgate;   /* gated attention (arch attn_out_gate): [n_max, 2 n_head *
			      * head_dim] the projection, [n_max, n_head * head_dim]
			      * the gates; else NULL */
	float *rs;           /* recurrent mixers (recur.c): [n_max, 4 n_embd] for a
			      * short convolution's [B; C; x] and its output, or NULL */
	float *moe_acc;      /* [n_embd] one token's expert sum of a parallel MoE
			      * (Gemma 4), or NULL */
	float *ple;          /* Gemma 4 per-layer inputs: [n_max, n_layer * n_embd_ple],
			      * or NULL */
	float *ple_g;        /* [n_max, n_layer * n_embd_ple]: a token's per-layer
			      * embeddings, then a layer's gate rows; or NULL */
	float *cat;          /* [n_max, 2 n_embd] a multi-token-prediction block's input
			      * [enorm(embedding); hnorm(hidden)] (MTP scratch only) */
	size_t bytes;        /* all of the above together */
	float *capture;      /* NULL, or [n_layer + 1][n][n_embd] hidden states of the
			      * last call, HF's convention: embeddings, each layer's
			      * output, the last one after the final norm (tests) */
};

/* Sized for model_forward, or with mtp for model_forward_mtp (the
 * model's multi-token-prediction blocks). FX_E_NOMEM. */
int fwd_scratch_init(struct fwd_scratch *s, const struct fx_model *m, int32_t n_max,
		     int32_t n_ctx, int n_threads, bool mtp);
void fwd_scratch_fini(struct fwd_scratch *s);

/* Self-attention sublayer of layer il on h [n, n_embd] (already normed):
 * Q/K/V projections, Q/K norms, RoPE at pos[n], row t's K/V written to its
 * backing kv[t] at pos[t], causal (and sliding-window) attention over that
 * backing's rows 0..pos[t], output projection into out [n, n_embd]. Rows
 * may belong to different sequences: each row's result depends only on its
 * own backing. */
void attn_forward(const struct fx_model *m, int il, struct fx_pool *pool, struct fwd_scratch *s,
		  const struct kv_view *kv, const int32_t *pos, int32_t n, const float *h, float *out);

/* Context shift's K re-rotation (llama.cpp's K-shift): a K row of layer
 * il, stored at position p, becomes the row for position p + delta. The
 * forward's own RoPE (this layer's frequencies, rotated dims and pair
 * layout) by the angle of delta alone: rotations compose, and the YaRN
 * mscale the row already carries is not applied again. attn_k_shift_table
 * fills cs [n_rot] for (il, delta) and returns false when the layer has no
 * RoPE (NoPE: the row stays as it is); attn_k_shift_row then rotates one
 * f32 row k [n_head_kv * head_dim] of layer il (its geometry) in place. */
bool attn_k_shift_table(const struct fx_model *m, int il, int32_t delta, float *cs);
void attn_k_shift_row(const struct fx_model *m, int il, const float *cs, float *k);

/* Gated short-convolution mixer of layer il (MIX_SHORTCONV, LFM2) on h
 * [n, n_embd] (already normed), into out [n, n_embd]: [B; C; x] = sc_in h,
 * then per row in order z = B * x, y = C * (taps . [window, z]) with the
 * window (the sequence's previous conv_kernel - 1 values of z, kept in
 * kv[t].rs at the layer's rs_off) shifted by one, out = sc_out y. Rows of
 * different sequences are independent; rows of one sequence must be in
 * position order. pos is unused (the state is the position). Follows
 * HF modeling_lfm2.py Lfm2ShortConv (slow path). */
void shortconv_forward(const struct fx_model *m, int il, struct fx_pool *pool,
		       struct fwd_scratch *s, const struct kv_view *kv, const int32_t *pos,
		       int32_t n, const float *h, float *out);

/* Mamba-2 mixer of layer il (MIX_MAMBA2) on h [n, n_embd] into out
 * [n, n_embd]: [z; xBC; dt] = ssm_in h; xBC through the causal depthwise
 * conv (window of conv_kernel - 1 earlier xBC rows in the state) + bias,
 * SiLU; per head h of group g = h / (n_head / n_group): dt = softplus(dt +
 * dt_b), state = state * exp(dt A) + dt B_g x^T, y = state C_g + D x;
 * y * silu(z) RMS-normed per group of d_inner / n_group channels times
 * ssm_norm; out = ssm_out y. The state (conv window, then [n_head][head_dim]
 * [N]) lives in kv[t].rs at rs_off; rows of one sequence in position
 * order. Follows HF modeling_mamba2.py (mamba2_selective_state_update,
 * MambaRMSNormGated with norm_before_gate false). */
void mamba2_forward(const struct fx_model *m, int il, struct fx_pool *pool, struct fwd_scratch *s,
		    const struct kv_view *kv, const int32_t *pos, int32_t n, const float *h,
		    float *out);

/* Gated DeltaNet mixer of layer il (MIX_GDN, Qwen 3.5) on h [n, n_embd]
 * into out [n, n_embd]: qkv = gdn_qkv h through the causal depthwise conv
 * (no bias) + SiLU; per value head j (key head j mod key heads: value
 * heads tiled over key heads, llama.cpp's GGUF order): q, k L2-normed (eps 1e-6 inside the root), q / sqrt(key width),
 * beta = sigmoid(gdn_beta h), g = A softplus(gdn_alpha h + dt_b); state S
 * [key width][value width] <- S exp(g); S += k (beta (v - S^T k))^T;
 * o = S^T q; o RMS-normed (eps), times ssm_norm and silu(gdn_z h) per
 * head; out = ssm_out o. State (conv window, then S per value head) in
 * kv[t].rs at rs_off; rows of one sequence in position order. Follows HF
 * modeling_qwen3_5.py (torch_recurrent_gated_delta_rule,
 * Qwen3_5RMSNormGated). */
void gdn_forward(const struct fx_model *m, int il, struct fx_pool *pool, struct fwd_scratch *s,
		 const struct kv_view *kv, const int32_t *pos, int32_t n, const float *h, float *out);

/* Gated MLP sublayer: out [n, n_embd] = down(act(gate h) * up h), or a
 * mixture of experts; a layer with a MoE beside its MLP (Gemma 4) also
 * reads the residual stream s->x and overwrites h. */
void ffn_forward(const struct fx_model *m, int il, struct fx_pool *pool, struct fwd_scratch *s,
		 int32_t n, float *h, float *out);

/* Run rows tok[n] at positions pos[n] with K/V backings kv[n] (n <=
 * s->n_max, every position reserved in its backing by the caller) and
 * write the logits of the rows with want[t] set, in row order, to logits
 * [n_wanted, n_vocab]; want NULL (or all false) skips the LM head.
 * hidden, when not NULL, receives every row's final hidden state [n,
 * n_embd] (after the final norm: the LM head's input). */
void model_forward(const struct fx_model *m, struct fx_pool *pool, struct fwd_scratch *s,
		   const struct kv_view *kv, const fx_token *tok, const int32_t *pos, int32_t n,
		   const bool *want, float *logits, float *hidden);

/* Multi-token-prediction block blk (< hp.n_nextn) on rows tok[n] paired
 * with h_in [n, n_embd], each the target model's final hidden row (after
 * its final norm; model_forward's hidden) of the position before the
 * token's, positions pos[n] in backings kv[n] that hold the blocks' K/V
 * (kv_il = block index): x = eh_proj([enorm(embd tok); hnorm(h)]), the
 * block's decoder layer, then its head norm into hidden (NULL: not kept)
 * and head into logits as model_forward. Follows llama.cpp's
 * llama_model_qwen35::graph_mtp (vLLM's Qwen3NextMTP, DeepSeek-V3's MTP
 * module). */
void model_forward_mtp(const struct fx_model *m, int blk, struct fx_pool *pool,
		       struct fwd_scratch *s, const struct kv_view *kv, const fx_token *tok,
		       const float *h_in, const int32_t *pos, int32_t n, const bool *want,
		       float *logits, float *hidden);

#endif
