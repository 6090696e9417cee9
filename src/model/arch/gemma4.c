#include "model/arch.h"

/* Gemma 4 text (Google 2026; transformers 5.23 models/gemma4/
 * modeling_gemma4.py, llama.cpp LLM_ARCH_GEMMA4): Gemma 3's sandwich norms,
 * sqrt(n_embd) embedding scale, GeGLU (tanh), NEOX RoPE and final softcap,
 * plus: plain RMSNorm weights (w, not 1 + w); attention scale 1 (the Q/K
 * norms set it) and a weightless RMSNorm of each V head; sliding and
 * global layers with their own head sizes (key_length_swa) and K/V head
 * counts (a per-layer head_count_kv); global layers with proportional
 * RoPE (rope_freqs: the pairs past partial_rotary_factor do not turn) and
 * optionally no V projection (V is K before its norm and RoPE:
 * attention_k_eq_v); a learned scalar on the residual stream after each
 * layer (layer_output_scale); optionally per-layer inputs (AT_PLE: E2B,
 * E4B), layers reading an earlier layer's K/V (attention.shared_kv_layers)
 * and a MoE beside the MLP (AT_MOE_PAR: 26B-A4B). */
const struct arch_desc arch_gemma4 = {
	.name = "gemma4",
	.rope = ROPE_NEOX,
	.act = ACT_GELU_TANH,
	.embd_scale = true,
	.qk_norm = QK_NORM_HEAD,
	.post_norms = true,
	.attn_scale = 1.0f,
	.v_norm = true,
	.v_from_k = true,
	.router = ROUTER_SOFTMAX_TOPK, /* then x per_expert_scale (ffn_down_exps.scale) */
	.moe_norm = true,
	.tensors = AT_ROPE_FREQS | AT_OUT_SCALE | AT_PLE | AT_MOE | AT_MOE_PAR,
	.hf = { { .model_type = "gemma4_text", .post_attn_name = "post_attention_norm",
		  .moe_norm = true } },
};
