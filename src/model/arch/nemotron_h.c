#include "model/arch.h"

/* Nemotron-H / Nemotron 3 (HF modeling_nemotron_h.py): every layer is one
 * pre-norm and ONE block (layers_block_type): a Mamba-2 mixer, attention
 * without RoPE, a non-gated relu^2 MLP, or an MoE of non-gated relu^2
 * experts with DeepSeek-V3 routing (sigmoid scores, e_score_correction_bias
 * for the choice, renormalised, routed_scaling_factor) plus a shared
 * relu^2 expert. llama.cpp names a model with MoE layers nemotron_h_moe
 * (the same row, below) and tells a layer's kind by its per-layer
 * attention.head_count_kv and feed_forward_length (both 0: Mamba-2). */
const struct arch_desc arch_nemotron_h = {
	.name = "nemotron_h",
	.rope = ROPE_NEOX,
	.act = ACT_RELU2,
	.router = ROUTER_SIGMOID_BIAS,
	.moe_norm = true,
	.no_rope_period = 1,
	.ffn_optional = true,
	.mixer_optional = true,
	.tensors = AT_SSM | AT_MOE | AT_SHEXP,
	.hf = { { .model_type = "nemotron_h", .moe_norm = true, .moe_arch = "nemotron_h_moe",
		  .ff_per_layer = true } },
};

/* Nemotron-H with MoE layers, as llama.cpp's converter names it; written by
 * the nemotron_h row's HF mapping (hf_family.moe_arch). */
const struct arch_desc arch_nemotron_h_moe = {
	.name = "nemotron_h_moe",
	.rope = ROPE_NEOX,
	.act = ACT_RELU2,
	.router = ROUTER_SIGMOID_BIAS,
	.moe_norm = true,
	.no_rope_period = 1,
	.ffn_optional = true,
	.mixer_optional = true,
	.tensors = AT_SSM | AT_MOE | AT_SHEXP,
};
