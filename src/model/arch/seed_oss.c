#include "model/arch.h"

/* Seed-OSS (ByteDance 2025; HF modeling_seed_oss.py, llama.cpp
 * LLM_ARCH_SEED_OSS): Llama's block with Q/K/V biases and no output bias,
 * NEOX RoPE, head_dim independent of the width. llama.cpp names the
 * pre-MLP norm post_attention_norm (LLM_TENSOR_ATTN_POST_NORM). */
const struct arch_desc arch_seed_oss = {
	.name = "seed_oss",
	.rope = ROPE_NEOX,
	.act = ACT_SILU,
	.ffn_norm_name = "post_attention_norm",
	.tensors = AT_QKV_BIAS,
	.hf = { { .model_type = "seed_oss", .post_attn_name = "post_attention_norm" } },
};
