/* Architectures as data: one const row per family says which decorations
 * of the single decoder-layer body (model/forward.c) apply. A new family is
 * a new row in model/arch/ and a line in registry.c, never a new forward
 * pass; if a row cannot express a model, add a decoration field here and
 * one branch in forward.c. */
#ifndef FX_MODEL_ARCH_H
#define FX_MODEL_ARCH_H

#include <stdbool.h>
#include <stddef.h>

#include "io/hf.h"

enum rope_layout {
	ROPE_ADJACENT, /* pairs (2i, 2i+1): llama.cpp's LLAMA_ROPE_TYPE_NORM */
	ROPE_NEOX,     /* pairs (i, i + n_rot/2): HF rotate_half */
};

enum ffn_act {
	ACT_SILU,      /* SwiGLU: down(silu(gate x) * up x), Shazeer 2020 */
	ACT_GELU_TANH, /* GeGLU with tanh-approximated GELU (Gemma) */
	ACT_SWIGLU_OAI,/* gpt-oss: clamp(gate, max=L) * sigmoid(1.702 gate) *
			* (clamp(up, -L, L) + 1), L = swiglu_limit */
	ACT_RELU2,     /* non-gated: down(relu(up x)^2), no gate projection
			* (Nemotron-H, So et al. 2021 "Primer") */
};

enum qk_norm {
	QK_NORM_NONE,
	QK_NORM_HEAD,  /* RMSNorm of each head of Q and K before RoPE (Gemma 3, Qwen 3) */
	QK_NORM_FULL,  /* RMSNorm over the whole Q (and K) projection (OLMo 2) */
	QK_NORM_L2,    /* weightless RMSNorm of each head of Q and K AFTER RoPE, on
			* RoPE layers only, unless the file turns it off
			* (Llama 4's Llama4TextL2Norm; no tensors) */
};

enum router {
	ROUTER_SOFTMAX_TOPK, /* softmax over all experts, keep the top k, optionally
			      * renormalised ({arch}.expert_weights_norm): Mixtral
			      * (Jiang et al. 2024), Qwen-MoE */
	ROUTER_TOPK_SOFTMAX, /* top k of the logits, softmax over those k (gpt-oss) */
	ROUTER_SIGMOID_BIAS, /* sigmoid scores; experts chosen by score + correction
			      * bias within the best groups, weighted by the plain
			      * scores (renormalised) x expert_weights_scale
			      * (DeepSeek-V3, Liu et al. 2024) */
	ROUTER_TOPK_SIGMOID, /* top k of the logits, each weighted by sigmoid(logit),
			      * not renormalised (Llama 4's Llama4Router) */
};

/* Tensor groups beyond the base set every row binds (token_embd,
 * output_norm, output when untied; per layer attn_q/k/v, attn_output,
 * ffn_gate/up/down). A row lists the groups a file of its family may hold
 * (.tensors: the decoration applies where they are present); a decoration
 * field implies the group it reads, and then its tensors are required
 * (arch_groups). A file holding a tensor of a group its row does not allow,
 * or one no group knows, is refused before binding, naming it
 * (arch_tensor_group says which group a name belongs to). */
enum arch_group {
	AT_PRE_NORMS = 1u << 0,   /* attn_norm, ffn_norm (ffn_norm_name): RMSNorm before
				   * each sublayer; implied unless no_pre_norms */
	AT_QK_NORM = 1u << 1,     /* attn_q_norm, attn_k_norm; implied by qk_norm */
	AT_POST_NORMS = 1u << 2,  /* post_attention_norm, post_ffw_norm; implied by post_norms */
	AT_QKV_BIAS = 1u << 3,    /* attn_q/k/v.bias added to the projections (Qwen 2) */
	AT_OUT_BIAS = 1u << 4,    /* attn_output.bias */
	AT_SINKS = 1u << 5,       /* attn_sinks: a learned softmax logit per head (gpt-oss) */
	AT_FUSED = 1u << 6,       /* attn_qkv, and ffn_up holding [gate; up] without ffn_gate
				   * (Phi-3): split into row views */
	AT_MLA = 1u << 7,         /* attn_q_a(_norm), attn_q_b, attn_kv_a_mqa, attn_kv_a_norm,
				   * attn_kv_b: multi-head latent attention (DeepSeek) */
	AT_MOE = 1u << 8,         /* ffn_gate_inp, ffn_{gate,up,down}_exps: a layer holding
				   * them is a mixture of experts */
	AT_MOE_BIAS = 1u << 9,    /* ffn_gate_inp.bias, ffn_{gate,up,down}_exps.bias (gpt-oss) */
	AT_EXP_PROBS_B = 1u << 10,/* exp_probs_b.bias, the expert selection bias; implied by
				   * ROUTER_SIGMOID_BIAS */
	AT_SHEXP = 1u << 11,      /* ffn_{gate,up,down}_shexp: shared experts */
	AT_SHEXP_GATE = 1u << 12, /* ffn_gate_inp_shexp: sigmoid gate on the shared expert */
	AT_ROPE_FREQS = 1u << 13, /* rope_freqs: per-pair RoPE frequency factors (llama.cpp's
				   * Llama 3 scaling) */
	AT_SHORTCONV = 1u << 14,  /* shortconv.conv, shortconv.in_proj, shortconv.out_proj: gated
				   * short-convolution mixers in the layers whose
				   * attention.head_count_kv entry is 0 (LFM2) */
	AT_EMBD_NORM = 1u << 15,  /* token_embd_norm: the final norm under LFM2's name in
				   * llama.cpp (LLM_TENSOR_OUTPUT_NORM_LFM2), instead of
				   * output_norm */
	AT_SSM = 1u << 16,        /* ssm_in, ssm_conv1d, ssm_dt, ssm_a, ssm_d, ssm_norm, ssm_out:
				   * Mamba-2 mixers (llama.cpp's names) */
	AT_GDN = 1u << 17,        /* attn_qkv (also AT_FUSED's name), attn_gate, ssm_beta,
				   * ssm_alpha (or qwen3next's fused ssm_ba) with ssm_conv1d,
				   * ssm_dt, ssm_a, ssm_norm, ssm_out: Gated DeltaNet mixers
				   * (llama.cpp's qwen35 / qwen3next names) */
	AT_OUT_SCALE = 1u << 18,  /* layer_output_scale: the residual stream times a learned
				   * scalar after the layer (Gemma 4) */
	AT_PLE = 1u << 19,        /* per_layer_token_embd, per_layer_model_proj,
				   * per_layer_proj_norm; per layer inp_gate, proj, post_norm:
				   * per-layer inputs (Gemma 4 E2B/E4B) */
	AT_MOE_PAR = 1u << 20,    /* ffn_gate_inp.scale, ffn_gate_up_exps, ffn_down_exps.scale,
				   * pre_ffw_norm_2, post_ffw_norm_1, post_ffw_norm_2: a MoE
				   * beside the dense MLP (Gemma 4 26B-A4B) */
	AT_NEXTN = 1u << 21,      /* nextn.eh_proj, nextn.enorm, nextn.hnorm, nextn.embed_tokens,
				   * nextn.shared_head_head, nextn.shared_head_norm: the
				   * multi-token-prediction blocks after the last layer
				   * ({arch}.nextn_predict_layers; Qwen 3.5, GLM-4.5) */
};

/* Most HF model_types one row maps (llama: llama, mistral, mixtral). */
#define ARCH_MAX_HF 3

struct arch_desc {
	const char *name;       /* GGUF general.architecture */
	enum rope_layout rope;
	enum ffn_act act;
	bool embd_scale;        /* x *= sqrt(n_embd) after the lookup (Gemma) */
	enum qk_norm qk_norm;
	bool post_norms;        /* RMSNorm of the attention and FFN outputs before
				 * each residual add (Gemma 2/3 post_attention_norm,
				 * post_ffw_norm; OLMo 2) */
	bool no_pre_norms;      /* no RMSNorm before attention and MLP (OLMo 2) */
	int no_rope_period;     /* >0: layer il skips RoPE when (il + 1) % period == 0,
				 * unless the file lists the layers (SmolLM3: 4) */
	int swa_period;         /* >0 and no per-layer pattern in the file: layer il uses
				 * the sliding window unless (il + 1) % swa_period == 0
				 * (llama.cpp's set_swa_pattern) */
	float rope_base_swa;    /* RoPE base of sliding-window layers; 0: the global base */
	enum router router;     /* how MoE layers (those with ffn_gate_inp) pick experts */
	bool moe_norm;          /* renormalise kept routing weights unless the file says
				 * ({arch}.expert_weights_norm) */
	const char *ffn_norm_name; /* the pre-MLP norm's tensor suffix; NULL: "ffn_norm"
				    * (gpt-oss in llama.cpp: "post_attention_norm") */
	bool ffn_norm_bare;     /* the pre-MLP norm is blk.N.<ffn_norm_name> without
				 * ".weight" (llama.cpp's falcon-h1 loader and
				 * converter); the ".weight" name is read too */
	const char *output_norm_name; /* the final norm's tensor; NULL: "output_norm.weight"
				       * (LFM2: "token_embd_norm.weight") */
	bool ffn_optional;      /* a layer may have no MLP (Mamba-2: the mixer is all) */
	bool rope_finetuned_switch; /* {arch}.rope.scaling.finetuned false means no layer uses
				 * RoPE (llama.cpp's Granite switch) */
	bool parallel_ssm;      /* an attention layer holding Mamba-2 tensors runs both on
				 * the same normed input and adds them (Falcon-H1) */
	bool mixer_optional;    /* a layer may have no token mixer: its MLP (or MoE) is
				 * the whole layer, after the layer's one pre-norm
				 * (Nemotron-H's mlp / moe layers) */
	bool swa_chunked;       /* window layers attend within aligned chunks of n_swa
				 * tokens: a query at p sees keys p - p mod n_swa <= j <= p
				 * (Llama 4 chunked attention; llama.cpp LLAMA_SWA_TYPE_CHUNKED) */
	bool moe_weight_in;     /* an expert's routing weight scales its input, not its
				 * output (Llama 4; llama.cpp's weight_before_ffn) */
	bool attn_out_gate;     /* attn_q holds per head [query; gate] (2 x head_dim rows):
				 * attention output x sigmoid(gate) before attn_output
				 * (Qwen 3.5 / Qwen3-Next gated attention) */
	float attn_scale;       /* >0: Q.K scale unless the file gives attention.scale
				 * (Gemma 4: 1, its Q/K norms set the scale); 0:
				 * 1/sqrt(head_dim) */
	bool v_norm;            /* RMSNorm without weight of each V head (Gemma 4) */
	bool v_from_k;          /* a layer without attn_v takes V from its K projection,
				 * before K's norm and RoPE (Gemma 4 attention_k_eq_v) */
	unsigned tensors;       /* AT_* groups a file may hold beyond those implied */
	struct hf_family hf[ARCH_MAX_HF]; /* the config.json model_types it maps */
};

/* The registry's GGUF architecture names, comma-separated, into buf[0..n)
 * (truncated to fit, NUL-terminated), for messages; returns buf. */
const char *arch_names(char *buf, size_t n);

/* The row for a GGUF general.architecture value (name[0..n)), or NULL. */
const struct arch_desc *arch_find(const char *name, size_t n);

/* The AT_* groups a file of row a may hold: its .tensors and the groups
 * its decoration fields imply (those are required where they apply). */
unsigned arch_groups(const struct arch_desc *a);

/* The group tensor name[0..n) belongs to in row a (0: the base set), or -1
 * when no group knows it; *what: the group's decoration in words. */
long arch_tensor_group(const struct arch_desc *a, const char *name, size_t n, const char **what);

/* The HF model_types of every row, for io/hf.c's hf_open. */
extern const struct hf_registry arch_hf;

#endif
