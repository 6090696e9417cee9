#include "model/arch.h"

/* Llama 4 text (Meta 2025; HF modeling_llama4.py, llama.cpp LLM_ARCH_LLAMA4):
 * RoPE on adjacent pairs as the checkpoint stores it (complex multiply; no
 * Q/K permutation) with llama3 scaling; chunked attention on the layers the
 * file marks (attention.sliding_window = the chunk, per-layer pattern);
 * NoPE layers (rope.layers) whose queries get the attention temperature
 * (attention.temperature_scale / _length); a weightless per-head RMSNorm
 * of Q and K after RoPE on the RoPE layers; MoE layers (those with
 * ffn_gate_inp) route each token to the top k of the logits, scale the
 * expert's INPUT by sigmoid(logit), and add an always-on shared expert. */
const struct arch_desc arch_llama4 = {
	.name = "llama4",
	.rope = ROPE_ADJACENT,
	.act = ACT_SILU,
	.qk_norm = QK_NORM_L2,
	.router = ROUTER_TOPK_SIGMOID,
	.swa_chunked = true,
	.moe_weight_in = true,
	.tensors = AT_MOE | AT_SHEXP | AT_ROPE_FREQS,
	.hf = { { .model_type = "llama4_text", .gate_up_halves = true } },
};
