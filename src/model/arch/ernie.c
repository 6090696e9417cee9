#include "model/arch.h"

/* ERNIE 4.5 (Baidu 2025; HF modeling_ernie4_5.py, llama.cpp
 * LLM_ARCH_ERNIE4_5): Llama's block with RoPE on adjacent (interleaved)
 * pairs in the checkpoint itself (HF's rotate_half here pairs even and odd
 * lanes), so the converter permutes nothing; tied embeddings. */
const struct arch_desc arch_ernie4_5 = {
	.name = "ernie4_5",
	.rope = ROPE_ADJACENT,
	.act = ACT_SILU,
	.tensors = AT_QKV_BIAS | AT_OUT_BIAS,
	.hf = { { .model_type = "ernie4_5" } },
};

/* ERNIE 4.5 MoE (HF modeling_ernie4_5_moe.py, llama.cpp
 * LLM_ARCH_ERNIE4_5_MOE): ERNIE 4.5 attention; after the leading dense
 * layers, MoE layers with a softmax router whose choice adds a correction
 * bias (moe_statics, llama.cpp's exp_probs_b) to the probabilities, the
 * kept probabilities renormalised, plus shared experts fused into one MLP. */
const struct arch_desc arch_ernie4_5_moe = {
	.name = "ernie4_5-moe",
	.rope = ROPE_ADJACENT,
	.act = ACT_SILU,
	.router = ROUTER_SOFTMAX_TOPK,
	.moe_norm = true,
	.tensors = AT_QKV_BIAS | AT_OUT_BIAS | AT_MOE | AT_EXP_PROBS_B | AT_SHEXP,
	.hf = { { .model_type = "ernie4_5_moe", .moe_norm = true } },
};
