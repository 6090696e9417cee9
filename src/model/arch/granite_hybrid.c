#include "model/arch.h"

/* Granite 4.0-H (HF modeling_granitemoehybrid.py): Mamba-2 layers and
 * attention layers (layer_types; in GGUF a 0 in attention.head_count_kv)
 * with no position embedding (position_embedding_type "nope": rope.layers
 * all off), Granite's multipliers (embedding, residual, attention, logit
 * scale), and on every layer an MoE whose router takes the top k logits
 * and softmaxes those (GraniteMoeHybridTopKGating) plus an always-on
 * shared MLP (shared_mlp, no gate). */
const struct arch_desc arch_granite_hybrid = {
	.name = "granitehybrid",
	.rope = ROPE_NEOX,
	.act = ACT_SILU,
	.router = ROUTER_TOPK_SOFTMAX,
	.rope_finetuned_switch = true,
	.tensors = AT_SSM | AT_MOE | AT_SHEXP,
	.hf = { { .model_type = "granitemoehybrid" } },
};
