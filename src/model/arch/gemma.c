#include "model/arch.h"

/* Gemma 1 (Gemma Team 2024): sqrt(n_embd) embedding scale, GeGLU (tanh),
 * NEOX RoPE; (1 + w) norms are folded into the weights at load. */
const struct arch_desc arch_gemma = {
	.name = "gemma",
	.rope = ROPE_NEOX,
	.act = ACT_GELU_TANH,
	.embd_scale = true,
	.hf = { { .model_type = "gemma", .norm_plus_one = true } },
};

/* Gemma 2 (Gemma Team 2024b): Gemma plus pre and post norms around both
 * sublayers, attention and final logit softcaps (hparams), and sliding
 * windows on even layers (llama.cpp set_swa_pattern(2)). */
const struct arch_desc arch_gemma2 = {
	.name = "gemma2",
	.rope = ROPE_NEOX,
	.act = ACT_GELU_TANH,
	.embd_scale = true,
	.post_norms = true,
	.swa_period = 2,
	.hf = { { .model_type = "gemma2", .norm_plus_one = true,
		  .post_attn_name = "post_attention_norm" } },
};
