#include "model/arch.h"

/* Falcon-H1 (HF modeling_falcon_h1.py): every layer runs attention and a
 * Mamba-2 mixer side by side on the same normed input and adds both to
 * the residual, then a SwiGLU MLP. Its muP multipliers (embedding, lm
 * head, attention in / out, key, ssm in / out, per-section ssm_multipliers,
 * mlp_multipliers) are per-row weight scales folded in at conversion
 * (io/hf_mup.c), as llama.cpp's converter does. The pre-MLP norm is
 * llama.cpp's blk.N.ffn_norm, without ".weight". */
const struct arch_desc arch_falcon_h1 = {
	.name = "falcon-h1",
	.rope = ROPE_NEOX,
	.act = ACT_SILU,
	.parallel_ssm = true,
	.ffn_norm_bare = true,
	.tensors = AT_SSM,
	.hf = { { .model_type = "falcon_h1", .fold_mup = true } },
};
