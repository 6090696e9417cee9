#include "model/arch.h"

/* GLM-4.5 / 4.6 (Zhipu 2025; HF modeling_glm4_moe.py, llama.cpp
 * LLM_ARCH_GLM4_MOE): Q/K/V biases, per-head Q/K RMSNorm (use_qk_norm),
 * NEOX RoPE on the first half of each head (partial_rotary_factor), head_dim
 * independent of the width; leading dense layers (first_k_dense_replace),
 * then MoE layers with DeepSeek-V3 routing (sigmoid scores, correction bias
 * for the choice, renormalised, routed_scaling_factor) and a shared
 * expert. */
const struct arch_desc arch_glm4moe = {
	.name = "glm4moe",
	.rope = ROPE_NEOX,
	.act = ACT_SILU,
	.qk_norm = QK_NORM_HEAD,
	.router = ROUTER_SIGMOID_BIAS,
	.moe_norm = true,
	.ffn_norm_name = "post_attention_norm", /* llama.cpp's name for it */
	.tensors = AT_QKV_BIAS | AT_MOE | AT_SHEXP | AT_NEXTN,
	.hf = { { .model_type = "glm4_moe", .moe_norm = true, .post_attn_name = "post_attention_norm",
		  .gating_func = 2 } },
};
