#include "model/arch.h"

/* MiniMax-M2 (MiniMax 2025; HF modeling_minimax_m2.py, llama.cpp
 * LLM_ARCH_MINIMAX_M2): Q/K RMSNorm over the whole projection, partial NEOX
 * RoPE, an MoE on every layer with DeepSeek-V3 routing (sigmoid scores,
 * correction bias for the choice, renormalised) and no shared expert. */
const struct arch_desc arch_minimax_m2 = {
	.name = "minimax-m2",
	.rope = ROPE_NEOX,
	.act = ACT_SILU,
	.qk_norm = QK_NORM_FULL,
	.router = ROUTER_SIGMOID_BIAS,
	.moe_norm = true,
	.tensors = AT_MOE,
	/* llama.cpp needs the (sigmoid) gating function written: transformers'
	 * config has no scoring_func */
	.hf = { { .model_type = "minimax_m2", .moe_norm = true, .gating_func = 2 } },
};
