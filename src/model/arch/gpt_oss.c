#include "model/arch.h"

/* gpt-oss (OpenAI 2025; HF modeling_gpt_oss.py, llama.cpp LLM_ARCH_OPENAI_MOE):
 * Q/K/V/O biases, a learned attention sink per head (an extra softmax
 * logit with no value), YaRN RoPE, sliding windows on alternate layers,
 * MoE with a biased router (top k of the logits, softmax over them) and
 * biased experts with the clamped SwiGLU. */
const struct arch_desc arch_gpt_oss = {
	.name = "gpt-oss",
	.rope = ROPE_NEOX,
	.act = ACT_SWIGLU_OAI,
	.router = ROUTER_TOPK_SOFTMAX,
	.swa_period = 2,
	.ffn_norm_name = "post_attention_norm",
	.tensors = AT_QKV_BIAS | AT_OUT_BIAS | AT_SINKS | AT_MOE | AT_MOE_BIAS,
	.hf = { { .model_type = "gpt_oss", .post_attn_name = "post_attention_norm" } },
};
