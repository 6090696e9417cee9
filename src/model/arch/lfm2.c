#include "model/arch.h"

/* LFM2 (Liquid AI 2025, HF modeling_lfm2.py): most layers mix tokens with a
 * gated short convolution (Lfm2ShortConv: [B; C; x] = in_proj h,
 * y = out_proj(C * conv(B * x)), conv depthwise and causal over
 * conv_L_cache tokens, no activation), the others with GQA attention with
 * per-head Q/K RMSNorm; which is which comes from layer_types (in GGUF an
 * attention.head_count_kv entry of 0 marks a convolution layer, as
 * llama.cpp's converter writes it). SwiGLU MLP everywhere; the final norm
 * is token_embd_norm in llama.cpp's naming. */
const struct arch_desc arch_lfm2 = {
	.name = "lfm2",
	.rope = ROPE_NEOX,
	.act = ACT_SILU,
	.qk_norm = QK_NORM_HEAD,
	.output_norm_name = "token_embd_norm.weight",
	.tensors = AT_SHORTCONV | AT_EMBD_NORM,
	.hf = { { .model_type = "lfm2" } },
};

/* LFM2-MoE (HF modeling_lfm2_moe.py): LFM2's layers; after the first
 * num_dense_layers (dense SwiGLU) an MoE whose router takes sigmoid scores,
 * chooses the top k of score + expert_bias and weights the chosen scores,
 * renormalised, times routed_scaling_factor (DeepSeek-V3's routing with one
 * group). */
const struct arch_desc arch_lfm2moe = {
	.name = "lfm2moe",
	.rope = ROPE_NEOX,
	.act = ACT_SILU,
	.qk_norm = QK_NORM_HEAD,
	.router = ROUTER_SIGMOID_BIAS,
	.moe_norm = true,
	.output_norm_name = "token_embd_norm.weight",
	.tensors = AT_SHORTCONV | AT_EMBD_NORM | AT_MOE,
	.hf = { { .model_type = "lfm2_moe", .moe_norm = true, .gating_func = 2 } },
};
