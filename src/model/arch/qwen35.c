#include "model/arch.h"

/* Qwen 3.5 (HF modeling_qwen3_5.py, text model): Gated DeltaNet layers
 * (layer_types "linear_attention"; in GGUF a 0 in attention.head_count_kv)
 * and every full_attention_interval-th layer gated attention: attn_q holds
 * per head [query; gate], the output is multiplied by sigmoid(gate); per-head
 * Q/K norms, partial NEOX RoPE (M-RoPE sections reduce to it for text).
 * Zero-centred (1 + w) norms are folded in at conversion, except the
 * DeltaNet's gated norm; the pre-MLP norm is llama.cpp's
 * post_attention_norm. SwiGLU MLP on every layer. */
const struct arch_desc arch_qwen35 = {
	.name = "qwen35",
	.rope = ROPE_NEOX,
	.act = ACT_SILU,
	.qk_norm = QK_NORM_HEAD,
	.attn_out_gate = true,
	.ffn_norm_name = "post_attention_norm",
	.tensors = AT_GDN | AT_FUSED | AT_NEXTN,
	.hf = { { .model_type = "qwen3_5_text", .norm_plus_one = true,
		  .post_attn_name = "post_attention_norm", .rope_sections = true, .recurrent_flags = true },
		{ .model_type = "qwen3_5", .norm_plus_one = true,
		  .post_attn_name = "post_attention_norm", .rope_sections = true, .recurrent_flags = true,
		  .text_prefix = "model.language_model." } },
};

/* Qwen 3.5 MoE (HF modeling_qwen3_5_moe.py, text model): qwen35's layers
 * with an MoE on every layer: softmax router, top k renormalised, plus a
 * shared expert scaled by sigmoid(shared_expert_gate x). */
const struct arch_desc arch_qwen35moe = {
	.name = "qwen35moe",
	.rope = ROPE_NEOX,
	.act = ACT_SILU,
	.qk_norm = QK_NORM_HEAD,
	.attn_out_gate = true,
	.router = ROUTER_SOFTMAX_TOPK,
	.moe_norm = true,
	.ffn_norm_name = "post_attention_norm",
	.tensors = AT_GDN | AT_FUSED | AT_MOE | AT_SHEXP | AT_SHEXP_GATE | AT_NEXTN,
	.hf = { { .model_type = "qwen3_5_moe_text", .norm_plus_one = true,
		  .post_attn_name = "post_attention_norm", .moe_norm = true, .rope_sections = true, .recurrent_flags = true },
		{ .model_type = "qwen3_5_moe", .norm_plus_one = true,
		  .post_attn_name = "post_attention_norm", .moe_norm = true, .rope_sections = true, .recurrent_flags = true,
		  .text_prefix = "model.language_model." } },
};

/* Qwen3-Next (HF modeling_qwen3_next.py): qwen35moe's layers; its HF
 * checkpoints fuse the DeltaNet projections per key head (in_proj_qkvz,
 * in_proj_ba). As llama.cpp's qwen3next, the HF mapping splits in_proj_qkvz
 * into attn_qkv and attn_gate but keeps value heads grouped by key head
 * (HF's order: value head j reads key head j / (nv / nk)) and in_proj_ba
 * fused as ssm_ba; a file with ssm_beta / ssm_alpha instead has them
 * tiled as qwen35's (ferrox's earlier conversions). */
const struct arch_desc arch_qwen3next = {
	.name = "qwen3next",
	.rope = ROPE_NEOX,
	.act = ACT_SILU,
	.qk_norm = QK_NORM_HEAD,
	.attn_out_gate = true,
	.router = ROUTER_SOFTMAX_TOPK,
	.moe_norm = true,
	.ffn_norm_name = "post_attention_norm",
	.tensors = AT_GDN | AT_FUSED | AT_MOE | AT_SHEXP | AT_SHEXP_GATE | AT_NEXTN,
	.hf = { { .model_type = "qwen3_next", .norm_plus_one = true, .gdn_grouped = true,
		  .post_attn_name = "post_attention_norm", .moe_norm = true, .recurrent_flags = true } },
};
