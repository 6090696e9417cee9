#include "model/arch.h"

/* Qwen 2 / 2.5 (HF modeling_qwen2.py): Llama with Q/K/V biases (bound when
 * present) and NEOX RoPE. */
const struct arch_desc arch_qwen2 = {
	.name = "qwen2",
	.rope = ROPE_NEOX,
	.act = ACT_SILU,
	.tensors = AT_QKV_BIAS,
	.hf = { { .model_type = "qwen2" } },
};

/* Qwen 3: no biases, per-head Q/K RMSNorm, head_dim independent of the
 * width (attention.key_length). */
const struct arch_desc arch_qwen3 = {
	.name = "qwen3",
	.rope = ROPE_NEOX,
	.act = ACT_SILU,
	.qk_norm = QK_NORM_HEAD,
	.hf = { { .model_type = "qwen3" } },
};

/* Phi-3 / Phi-4 (HF modeling_phi3.py): fused qkv and gate_up projections
 * (split into views at load), partial rotary (rope.dimension_count). */
const struct arch_desc arch_phi3 = {
	.name = "phi3",
	.rope = ROPE_NEOX,
	.act = ACT_SILU,
	.tensors = AT_FUSED,
	.hf = { { .model_type = "phi3" } },
};

/* OLMo 2 (Groeneveld et al. 2024, HF modeling_olmo2.py): RMSNorm after
 * attention and MLP instead of before, Q/K RMSNorm over the whole
 * projection. OLMo 3 (HF modeling_olmo3.py) is the same block with a
 * sliding window on the layers its layer_types mark; llama.cpp's converter
 * writes it as olmo2 with attention.sliding_window(_pattern). */
const struct arch_desc arch_olmo2 = {
	.name = "olmo2",
	.rope = ROPE_NEOX,
	.act = ACT_SILU,
	.qk_norm = QK_NORM_FULL,
	.post_norms = true,
	.no_pre_norms = true,
	.hf = { { .model_type = "olmo2", .post_attn_name = "post_attention_norm" },
		{ .model_type = "olmo3", .post_attn_name = "post_attention_norm" } },
};

/* Qwen2-MoE (HF modeling_qwen2_moe.py): Qwen 2 attention; every layer a
 * softmax top-k MoE plus a shared expert scaled by sigmoid(x . w_gate). */
const struct arch_desc arch_qwen2moe = {
	.name = "qwen2moe",
	.rope = ROPE_NEOX,
	.act = ACT_SILU,
	.router = ROUTER_SOFTMAX_TOPK,
	.tensors = AT_QKV_BIAS | AT_MOE | AT_SHEXP | AT_SHEXP_GATE,
	.hf = { { .model_type = "qwen2_moe" } },
};

/* Qwen3-MoE: Qwen 3 attention (Q/K norm), softmax top-k MoE with the kept
 * probabilities renormalised (norm_topk_prob). */
const struct arch_desc arch_qwen3moe = {
	.name = "qwen3moe",
	.rope = ROPE_NEOX,
	.act = ACT_SILU,
	.qk_norm = QK_NORM_HEAD,
	.router = ROUTER_SOFTMAX_TOPK,
	.moe_norm = true,
	.tensors = AT_MOE,
	.hf = { { .model_type = "qwen3_moe" } },
};
