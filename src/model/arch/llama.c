#include "model/arch.h"

/* Llama 2/3, Mistral, SmolLM2: pre-norm RMSNorm, GQA, RoPE on adjacent pairs
 * (the GGUF converter permutes Q/K rows into that layout), SwiGLU MLP.
 * Touvron et al. 2023; llama.cpp LLM_ARCH_LLAMA. */
const struct arch_desc arch_llama = {
	.name = "llama",
	.rope = ROPE_ADJACENT,
	.act = ACT_SILU,
};
