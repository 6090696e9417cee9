#include "model/arch.h"

/* Gemma 3 (Gemma Team 2025; HF modeling_gemma3.py, llama.cpp LLM_ARCH_GEMMA3):
 * embeddings scaled by sqrt(n_embd), per-head Q/K RMSNorm, pre and post
 * norms around attention and MLP, GeGLU (tanh), NEOX RoPE, five sliding-
 * window layers (RoPE base 10000) to one global layer (the file's base).
 * The GGUF converter folds Gemma's (1 + w) norm scale into the stored
 * weights, so GGUF norms are plain RMSNorm. */
const struct arch_desc arch_gemma3 = {
	.name = "gemma3",
	.rope = ROPE_NEOX,
	.act = ACT_GELU_TANH,
	.embd_scale = true,
	.qk_norm = QK_NORM_HEAD,
	.post_norms = true,
	.swa_period = 6,
	.rope_base_swa = 10000.0f,
	.hf = { { .model_type = "gemma3_text", .norm_plus_one = true,
		  .post_attn_name = "post_attention_norm" } },
};
