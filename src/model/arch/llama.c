#include "model/arch.h"

/* Llama 2/3, Mistral, SmolLM2: pre-norm RMSNorm, GQA, RoPE on adjacent pairs
 * (the GGUF converter permutes Q/K rows into that layout), SwiGLU MLP.
 * Touvron et al. 2023; llama.cpp LLM_ARCH_LLAMA. A sliding window applies
 * when the file lists the layers (Mistral from HF); Mixtral is this row
 * with MoE layers (softmax top-k, renormalised). */
const struct arch_desc arch_llama = {
	.name = "llama",
	.rope = ROPE_ADJACENT,
	.act = ACT_SILU,
	.moe_norm = true,
	.tensors = AT_QKV_BIAS | AT_OUT_BIAS | AT_MOE | AT_ROPE_FREQS,
	.hf = { { .model_type = "llama", .permute_qk = true },
		{ .model_type = "mistral", .permute_qk = true },
		{ .model_type = "mixtral", .permute_qk = true, .moe_norm = true } },
};

/* Granite (IBM): Llama plus scalar multipliers on embeddings, residual
 * branches, attention scores and logits, all read as hparams
 * (embedding_scale, residual_scale, attention.scale, logit_scale). */
const struct arch_desc arch_granite = {
	.name = "granite",
	.rope = ROPE_ADJACENT,
	.act = ACT_SILU,
	.tensors = AT_QKV_BIAS | AT_OUT_BIAS | AT_ROPE_FREQS,
	.hf = { { .model_type = "granite", .permute_qk = true } },
};

/* SmolLM3 (HF modeling_smollm3.py): Llama with RoPE left out on every
 * fourth layer (NoPE layers; llama.cpp n_no_rope_layer_step = 4), or on the
 * layers the file lists. */
const struct arch_desc arch_smollm3 = {
	.name = "smollm3",
	.rope = ROPE_ADJACENT,
	.act = ACT_SILU,
	.no_rope_period = 4,
	.tensors = AT_ROPE_FREQS,
	.hf = { { .model_type = "smollm3", .permute_qk = true } },
};
