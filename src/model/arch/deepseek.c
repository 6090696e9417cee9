#include "model/arch.h"

/* DeepSeek-V2/V3 (DeepSeek-AI 2024; HF modeling_deepseek_v3.py, llama.cpp
 * LLM_ARCH_DEEPSEEK2): multi-head latent attention (low-rank Q and KV with
 * norms on the latents, a decoupled RoPE part of each head shared by all K
 * heads, interleaved pairs), leading dense layers, then MoE layers with
 * sigmoid routing, a score-correction bias and shared experts. MLA is
 * chosen by the tensors present (attn_kv_a_mqa), like every decoration. */
const struct arch_desc arch_deepseek2 = {
	.name = "deepseek2",
	.rope = ROPE_ADJACENT,
	.act = ACT_SILU,
	.router = ROUTER_SIGMOID_BIAS,
	.moe_norm = true,
	.tensors = AT_MLA | AT_MOE | AT_SHEXP,
	.hf = /* rope_interleave (V3's default): HF rotates adjacent pairs already */
		{ { .model_type = "deepseek_v3" } },
};
