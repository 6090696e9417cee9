#include "model/arch.h"

/* Mamba-2 (Dao & Gu 2024, HF modeling_mamba2.py): every layer is RMSNorm ->
 * Mamba-2 mixer -> residual, no attention and no MLP. The mixer: [z; xBC;
 * dt] = in_proj h; xBC through a causal depthwise conv + SiLU; per head a
 * scalar-decay state update h = h exp(dt A) + dt B x, y = C h + D x, with
 * B and C shared by the heads of a group; y * silu(z) through an RMSNorm
 * per group; out_proj. llama.cpp's names (ssm_*, A stored as -exp(A_log)). */
const struct arch_desc arch_mamba2 = {
	.name = "mamba2",
	.rope = ROPE_NEOX,
	.act = ACT_SILU,
	.ffn_optional = true,
	.tensors = AT_SSM,
	.hf = { { .model_type = "mamba2" } },
};
