/* A loaded model: hyperparameters, the architecture row, and weights bound
 * by name from the GGUF mapping (borrowed from it; with repack, the dense
 * matrices are then moved into one owned allocation: model.c's
 * place_weights). */
#ifndef FX_MODEL_MODEL_H
#define FX_MODEL_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "ferrox.h"
#include "io/gguf.h"
#include "kernels/ops.h"
#include "model/arch.h"
#include "model/rope.h"
#include "tokenizer/model_vocab.h"

/* Most attention heads a model may have (fixed-size per-head state in
 * attention; real models have at most 128). */
#define FX_MAX_HEADS 1024

struct hparams {
	int32_t n_vocab;
	int32_t n_embd;      /* residual stream width */
	int32_t n_layer;     /* layers run: block_count less n_nextn */
	int32_t n_nextn;     /* multi-token-prediction blocks after them, not run (llama.cpp's
			      * GLM-4.5 {arch}.nextn_predict_layers, counted in block_count) */
	int32_t n_ff;        /* MLP hidden width */
	int32_t n_expert, n_expert_used; /* MoE: experts per layer, experts per token (0: dense) */
	int32_t n_ff_exp;    /* hidden width of one expert */
	int32_t n_ff_shexp;  /* hidden width of the shared expert (0: none) */
	bool expert_norm;    /* renormalise the kept routing weights to sum to 1 */
	float swiglu_limit;  /* ACT_SWIGLU_OAI clamp (gpt-oss: 7) */
	float expert_scale;  /* routed experts' weights multiplied by it (DeepSeek: 2.5) */
	int32_t n_group, n_group_used; /* expert groups, groups kept per token (1, 1) */
	int32_t q_lora, kv_lora; /* MLA latent widths (q_lora 0: plain Q projection) */
	int32_t n_head, n_head_kv;
	int32_t head_dim;    /* per-head Q/K width ({arch}.attention.key_length) */
	int32_t head_dim_v;  /* per-head V width (value_length) */
	int32_t n_rot;       /* rotated dims per head (rope.dimension_count) */
	/* Sliding-window layers' own head geometry (Gemma 4: key_length_swa,
	 * value_length_swa, rope.dimension_count_swa); equal to the global
	 * values when the file gives none. struct layer holds each layer's. */
	int32_t head_dim_swa, head_dim_v_swa, n_rot_swa;
	int64_t kv_k_width, kv_v_width; /* K and V row widths in the backing: the widest
					 * of the layers that own K/V (a narrower layer
					 * uses the start of its rows) */
	int32_t n_kv_shared; /* the last n_kv_shared layers write no K/V and read those of
			      * the last earlier layer of their kind (Gemma 4
			      * attention.shared_kv_layers; 0: none) */
	int32_t n_embd_ple;  /* per-layer input width (Gemma 4
			      * embedding_length_per_layer_input; 0: none) */
	int32_t n_ctx_train;
	int32_t n_swa;       /* sliding window in tokens (0: none): a query at p
			      * sees keys p - n_swa < j <= p */
	float eps;           /* RMSNorm epsilon */
	float rope_base, rope_base_swa;
	bool has_rope_swa;   /* sliding layers use rope_base_swa, unscaled (Gemma 3) */
	struct rope_scaling rope_sc; /* of global layers; sliding layers use none */
	float rope_mscale;   /* multiplies cos and sin (YaRN attention factor; 1: none) */
	float attn_scale;    /* multiplies Q·K; default 1/sqrt(head_dim) */
	float attn_temp_scale, attn_temp_floor; /* NoPE layers' queries times
			      * 1 + scale * ln(1 + floor((pos + 1) / floor)); scale 0: off
			      * ({arch}.attention.temperature_scale, temperature_length;
			      * Llama 4 attention temperature tuning) */
	bool qk_l2;          /* QK_NORM_L2 applies (ferrox.attention.qk_l2_norm; true) */
	float final_softcap; /* logits = c * tanh(logits / c); 0: off */
	float attn_softcap;  /* same on attention scores; 0: off */
	float embd_mul;      /* extra embedding multiplier (Granite embedding_scale; 1) */
	float residual_mul;  /* sublayer outputs scaled before each residual add (1) */
	float logit_div;     /* logits divided by it (Granite logit_scale; 1) */
	int32_t n_layer_kv;  /* layers with K/V in the backing (attention mixers) */
	int32_t conv_kernel; /* short-convolution width ({arch}.shortconv.l_cache; LFM2: 3) */
	int64_t rs_floats;   /* recurrent state per sequence, all recurrent layers */
	/* Mamba-2 ({arch}.ssm.*): inner width d_inner = n_ssm_head * ssm_head_dim,
	 * state size N per head, n_ssm_group groups of B/C, conv_kernel taps.
	 * Gated DeltaNet, in llama.cpp's reading of the same keys: ssm_inner =
	 * value width (n_ssm_head value heads), ssm_state = key head width,
	 * n_ssm_group = key heads. */
	int32_t ssm_inner, ssm_state, n_ssm_head, n_ssm_group;
	int kv_type;         /* default KV element type: f16 for GGUF (llama.cpp's
			      * default), f32 for HF checkpoints (transformers') */
};

/* What mixes tokens in a layer (its first sublayer): attention over the
 * K/V backing, or a recurrent block with a per-sequence state. */
enum layer_mixer {
	MIX_ATTN,      /* self-attention (attn.c) */
	MIX_SHORTCONV, /* gated short convolution (LFM2, Liquid AI 2025; recur.c) */
	MIX_MAMBA2,    /* Mamba-2 selective state space (Dao & Gu 2024; recur.c) */
	MIX_GDN,       /* Gated DeltaNet (Yang et al. 2024; Qwen 3.5 / Qwen3-Next; recur.c) */
	MIX_NONE,      /* none: the MLP is the layer (arch mixer_optional) */
};

struct layer {
	enum layer_mixer mixer;
	enum layer_mixer par_mixer;  /* a second mixer on the same normed input, its
				      * output added (Falcon-H1's Mamba-2 beside
				      * attention), or MIX_NONE */
	int32_t kv_il;               /* this layer's index among the backing's K/V
				      * layers (attention mixers), or -1; a KV-shared
				      * layer holds the one of the layer it reads */
	bool kv_shared;              /* reads kv_il's K/V and writes none (no K/V
				      * projections: Gemma 4's last shared_kv_layers) */
	/* This layer's attention geometry (hparams' global or sliding values,
	 * the K/V head count per layer where the file lists it): */
	int32_t n_head_kv, head_dim, head_dim_v, n_rot;
	int64_t rs_off;              /* floats into the sequence's recurrent state
				      * (kv_view.rs) where this layer's starts, or -1 */
	const float *attn_norm;      /* [n_embd], NULL without pre norms */
	struct wmat wq;              /* n_embd -> n_head * head_dim */
	struct wmat wk;              /* n_embd -> n_head_kv * head_dim */
	struct wmat wv;              /* n_embd -> n_head_kv * head_dim_v; data NULL in a
				      * layer whose V is its K projection (Gemma 4's
				      * attention_k_eq_v full layers) */
	struct wmat wo;              /* n_head * head_dim_v -> n_embd */
	const float *bq, *bk, *bv, *bo;     /* projection biases or NULL */
	const float *q_norm, *k_norm;       /* [head_dim] (per head) or [n_head*head_dim]
					     * (whole projection), or NULL */
	const float *post_attn_norm;        /* [n_embd] or NULL */
	const float *ffn_norm;              /* [n_embd], NULL without pre norms */
	struct wmat ffn_gate, ffn_up;       /* n_embd -> n_ff (dense layers) */
	struct wmat ffn_down;               /* n_ff -> n_embd */
	struct wmat router;                 /* MoE: n_embd -> n_expert; data NULL when dense */
	const float *router_b;              /* [n_expert] router bias or NULL (gpt-oss) */
	const float *exp_b[3];              /* [n_expert][n_out] gate/up/down biases or NULL */
	const float *sinks;                 /* [n_head] attention sink logits or NULL */
	const float *exp_probs_b;           /* [n_expert] DeepSeek score-correction bias or NULL */
	/* Multi-head latent attention (MLA), when wkv_a.data is set: */
	struct wmat wq_a, wq_b;             /* n_embd -> q_lora -> n_head * head_dim */
	const float *q_a_norm;              /* [q_lora] */
	struct wmat wkv_a;                  /* n_embd -> kv_lora + n_rot (shared RoPE key part) */
	const float *kv_a_norm;             /* [kv_lora] */
	struct wmat wkv_b;                  /* kv_lora -> n_head * (head_dim - n_rot + head_dim_v) */
	struct wmat *exp;                   /* MoE: [n_expert][3] gate, up (n_embd -> n_ff_exp),
					     * down (n_ff_exp -> n_embd): views into the
					     * stacked ffn_*_exps tensors (owned array) */
	struct wmat sh_gate, sh_up, sh_down;/* shared expert (n_ff_shexp), data NULL if none */
	const float *sh_router;             /* [n_embd]: sigmoid(x . w) scales the shared
					     * expert (Qwen2-MoE), or NULL */
	const float *post_ffn_norm;         /* [n_embd] or NULL */
	bool swa;                           /* sliding-window layer */
	bool rope;                          /* RoPE applies (false: NoPE layer) */
	const float *inv_freq;              /* [n_rot / 2] RoPE frequencies of this layer */
	/* Gated short convolution (MIX_SHORTCONV): y = out(C * conv(B * x)),
	 * [B; C; x] = in h, conv depthwise and causal over conv_kernel tokens. */
	struct wmat sc_in;                  /* n_embd -> 3 n_embd, rows B, C, x */
	struct wmat sc_out;                 /* n_embd -> n_embd */
	const float *sc_conv;               /* [n_embd][conv_kernel], oldest tap first */
	/* Mamba-2 (MIX_MAMBA2), llama.cpp's ssm_* tensors: */
	struct wmat ssm_in;                 /* n_embd -> d_inner (z) + conv_dim (x, B, C) + n_head (dt) */
	const float *ssm_conv, *ssm_conv_b; /* [conv_dim][conv_kernel], [conv_dim] */
	const float *ssm_dt_b;              /* [n_head] */
	const float *ssm_a;                 /* [n_head] A = -exp(A_log) */
	const float *ssm_d;                 /* [n_head] skip */
	const float *ssm_norm;              /* [d_inner] gated RMSNorm weight, n_group groups */
	struct wmat ssm_out;                /* d_inner -> n_embd */
	/* Gated DeltaNet (MIX_GDN; ssm_conv without bias, ssm_dt_b, ssm_a, ssm_norm
	 * [value head width], ssm_out as above): */
	struct wmat gdn_qkv;                /* n_embd -> 2 key width + value width (attn_qkv) */
	struct wmat gdn_z;                  /* n_embd -> value width: the output gate (attn_gate) */
	struct wmat gdn_beta, gdn_alpha;    /* n_embd -> value heads (ssm_beta, ssm_alpha) */
	bool has_ffn;                       /* the layer has an MLP sublayer (Mamba-2: none) */
	/* A MoE beside the dense MLP (Gemma 4 26B-A4B; router and exp set):
	 * f = post_1(MLP(h)) + post_2(sum_j w_j expert_j(RMSNorm(x) pre_2)), routed
	 * by softmax(router(RMSNorm(x) router_scale / sqrt(n_embd))), the top k
	 * renormalised, times exp_scale[expert]; x is the residual stream. */
	const float *moe_pre_norm;          /* [n_embd] pre_ffw_norm_2, or NULL */
	const float *moe_post_norm_1, *moe_post_norm_2; /* [n_embd] */
	const float *router_scale;          /* [n_embd] ffn_gate_inp.scale */
	const float *exp_scale;             /* [n_expert] ffn_down_exps.scale */
	const float *out_scale;             /* [1]: the residual stream times it after the
					     * layer (Gemma 4 layer_output_scale), or NULL */
	/* Gemma 4 per-layer inputs (n_embd_ple > 0): after the MLP,
	 * x += post_norm(proj(gelu_tanh(inp_gate x) * ple[il])). */
	struct wmat ple_gate;               /* n_embd -> n_embd_ple (inp_gate) */
	struct wmat ple_proj;               /* n_embd_ple -> n_embd (proj) */
	const float *ple_norm;              /* [n_embd] (post_norm) */
};

/* The dense matrices of layer L, in a fixed order (NULL data where the
 * layer has none); MoE experts are in L->exp. Returns the count (LAYER_MATS). */
#define LAYER_MATS 25
static inline int layer_mats(const struct layer *L, const struct wmat *ws[LAYER_MATS])
{
	const struct wmat *all[LAYER_MATS] = { &L->wq, &L->wk, &L->wv, &L->wo, &L->ffn_gate,
					       &L->ffn_up, &L->ffn_down, &L->router, &L->sh_gate,
					       &L->sh_up, &L->sh_down, &L->wq_a, &L->wq_b,
					       &L->wkv_a, &L->wkv_b, &L->sc_in, &L->sc_out,
					       &L->ssm_in, &L->ssm_out, &L->gdn_qkv, &L->gdn_z,
					       &L->gdn_beta, &L->gdn_alpha, &L->ple_gate, &L->ple_proj };
	for (int i = 0; i < LAYER_MATS; i++)
		ws[i] = all[i];
	return LAYER_MATS;
}

/* The sampling defaults the model's file gives (model/sampling.c). */
struct model_sampling {
	uint32_t set;            /* FX_SAMPLING_* bits of the fields present */
	float temp, top_p, min_p, repeat_penalty;
	int32_t top_k;
	int32_t repeat_last_n;   /* -1: the whole context */
};

struct fx_model {
	struct gguf_file *g;          /* owns the mapping the weights point into */
	void *weights;                /* NULL, or the matrices moved out of the mapping
				       * (place_weights in model.c; owned) */
	const struct arch_desc *arch;
	struct hparams hp;
	struct vocab *vocab;
	struct wmat tok_embd;         /* n_vocab rows of n_embd */
	struct wmat output;           /* lm head: n_embd -> n_vocab (tok_embd when tied) */
	const float *output_norm;     /* [n_embd] */
	struct layer *layers;         /* [n_layer] */
	float *inv_freq;              /* [n_rot / 2 + n_rot_swa / 2]: global, sliding (owned) */
	/* Gemma 4 per-layer inputs (hp.n_embd_ple > 0; else data NULL): */
	struct wmat ple_embd;         /* n_vocab rows of n_layer * n_embd_ple */
	struct wmat ple_model_proj;   /* n_embd -> n_layer * n_embd_ple */
	const float *ple_proj_norm;   /* [n_embd_ple] */
	float **owned;                /* norm vectors converted to f32 (owned) */
	int n_owned;
	bool vocab_only;
	bool requantized;             /* --quant: float matrices were quantized on load */
	bool repacked;                /* some matrices are x8 groups (kernels/repack.h) */
	char *chat_template;          /* owned copy, or NULL (fx_model_chat_template) */
	struct model_sampling sampling; /* fx_model_sampling_defaults */
};

/* Copy the chat template of the model at path (GGUF key, or an HF
 * directory's files) into m->chat_template (chat_template.c). */
int model_chat_template_load(struct fx_model *m, const char *path, bool hf, struct fx_err *err);
/* Read general.sampling.* from m->g into m->sampling (sampling.c).
 * FX_E_FORMAT names a key of the wrong type or out of range. */
int model_sampling_load(struct fx_model *m, struct fx_err *err);

#endif
