/* Architectures as data: one const row per family says which decorations
 * of the single decoder-layer body (model/forward.c) apply. A new family is
 * a new row in model/arch/ and a line in registry.c, never a new forward
 * pass; if a row cannot express a model, add a decoration field here and
 * one branch in forward.c. */
#ifndef FX_MODEL_ARCH_H
#define FX_MODEL_ARCH_H

#include <stdbool.h>
#include <stddef.h>

enum rope_layout {
	ROPE_ADJACENT, /* pairs (2i, 2i+1): llama.cpp's LLAMA_ROPE_TYPE_NORM */
	ROPE_NEOX,     /* pairs (i, i + n_rot/2): HF rotate_half */
};

enum ffn_act {
	ACT_SILU,      /* SwiGLU: down(silu(gate x) * up x), Shazeer 2020 */
	ACT_GELU_TANH, /* GeGLU with tanh-approximated GELU (Gemma) */
	ACT_SWIGLU_OAI,/* gpt-oss: clamp(gate, max=L) * sigmoid(1.702 gate) *
			* (clamp(up, -L, L) + 1), L = swiglu_limit */
};

enum qk_norm {
	QK_NORM_NONE,
	QK_NORM_HEAD,  /* RMSNorm of each head of Q and K before RoPE (Gemma 3, Qwen 3) */
	QK_NORM_FULL,  /* RMSNorm over the whole Q (and K) projection (OLMo 2) */
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
};

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
};

/* The supported names, comma-separated, for messages. */
const char *arch_names(void);

/* The row for a GGUF general.architecture value (name[0..n)), or NULL. */
const struct arch_desc *arch_find(const char *name, size_t n);

extern const struct arch_desc arch_llama, arch_granite, arch_smollm3, arch_qwen2, arch_qwen3,
	arch_phi3, arch_gemma, arch_gemma2, arch_gemma3, arch_olmo2, arch_qwen2moe, arch_qwen3moe,
	arch_gpt_oss, arch_deepseek2;

#endif
