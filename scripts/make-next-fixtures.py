#!/usr/bin/env python3
"""Tiny reference checkpoints for the 2025-2026 model families (issue 22):

    nice python3 scripts/make-next-fixtures.py [VARIANT ...]

writes tests/fixtures/hf-tiny-next/<variant>/ for each variant (all of them
when none is named) in the format of the shared hf-tiny fixtures
(/work/shared/fixtures/hf-tiny/README.md):

- config.json, generation_config.json, model.safetensors: what
  save_pretrained writes for a model built from the config below with every
  parameter re-drawn at random (float32);
- reference.json: architecture, model_type, versions, prompt_ids (24),
  greedy_ids (12, each the argmax of a FULL forward over everything so far,
  no cache), all_ids, layer_types (where the config has such a list),
  ffn_kinds (per-layer dense / moe, for families that mix them), checkpoint_tensors, notes, and
  decode_check: the largest |difference|
  between full_logits and the logits of a cached decode (prefill the prompt,
  then one token at a time), i.e. how closely transformers' own recurrent /
  cached path agrees with its full-sequence path (the saved files are also
  reloaded with from_pretrained and must give the same logits exactly);
- reference.safetensors (float32): logits [24, vocab], full_logits
  [36, vocab], hidden.0 .. hidden.L (output_hidden_states on the prompt).

Needs torch and transformers (CPU; eager attention; without mamba_ssm,
causal_conv1d, fla or kernels installed, so the recurrent layers run their
torch fallbacks). SUMMARY.json lists the outcome of each variant.
"""
import json
import math
import os
import sys
import traceback
import zlib

import torch
import transformers
from safetensors import safe_open
from safetensors.torch import save_file
from transformers import AutoConfig, AutoModelForCausalLM

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "hf-tiny-next")
SEED = 20260422
N_PROMPT = 24
N_GEN = 12
COMMON = dict(vocab_size=256, hidden_size=64, pad_token_id=0, bos_token_id=1, eos_token_id=2,
              max_position_embeddings=256, tie_word_embeddings=False)

# Each variant: model_type, config kwargs, norm: "one" (weight around 1, x*w) or
# "zero" (weight around 0, x*(1+w)) for the decoder norms; zero_norms: name
# fragments of norms that are (1+w) even though the family's main norm is not.
VARIANTS = {}


def variant(name, model_type, norm="one", zero_norms=(), one_norms=(), notes="", hidden_no_embed=False,
            embed_std=0.3, **cfg):
    """hidden_no_embed: the model's output_hidden_states tuple is (layer 0 out, ..., layer L-1 out,
    final-norm out) with no embedding entry; the fixture rebuilds the usual convention from it."""
    VARIANTS[name] = dict(model_type=model_type, norm=norm, zero_norms=tuple(zero_norms),
                          one_norms=tuple(one_norms), notes=notes, cfg=cfg, hidden_no_embed=hidden_no_embed,
                          embed_std=embed_std)


variant("lfm2", "lfm2",
        notes="LFM2: layers 0,1,3 short-conv (gated depthwise conv, kernel 3), layer 2 attention with per-head "
              "Q/K RMSNorm. intermediate_size 96 is auto-adjusted (block_auto_adjust_ff_dim: int(2*96/3)=64, "
              "times block_ffn_dim_multiplier 1.0, rounded up to block_multiple_of 32) to 64: read it from "
              "feed_forward.w1's shape. model.embedding_norm is the FINAL norm (applied after the last layer), "
              "not a norm on the embeddings.",
        num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2, intermediate_size=96,
        block_multiple_of=32, block_ffn_dim_multiplier=1.0, block_auto_adjust_ff_dim=True,
        layer_types=["conv", "conv", "full_attention", "conv"], conv_L_cache=3, conv_bias=False,
        norm_eps=1e-5, tie_word_embeddings=True, rope_parameters={"rope_type": "default", "rope_theta": 1e6})

variant("mamba2", "mamba2",
        notes="Mamba-2 (pure SSM, every layer a Mamba2Mixer; no attention). expand 2 -> d_inner 128 = 8 heads x "
              "head_dim 16, state 16, n_groups 2 (B/C shared by 4 heads each), conv kernel 4 over x,B,C (conv_dim "
              "192), gated RMSNorm with group size d_inner/n_groups = 64, chunk_size 8 so the prompt spans 3 "
              "chunks. Weights under backbone.*; the final norm is backbone.norm_f; hidden.4 is after norm_f. "
              "Mamba2Model's own output_hidden_states tuple has no embedding entry (it is: output of layer 0, "
              "..., output of layer 3, norm_f output); hidden.* here were rearranged to the usual convention "
              "(hidden.0 = embedding lookup, hidden.1..3 = outputs of layers 0..2, hidden.4 = norm_f(output "
              "of layer 3)). config.json: transformers 5.23 writes time_step_limit as [0.0, {\"__float__\": "
              "\"Infinity\"}] (released checkpoints: [0.0, Infinity] or absent).",
        hidden_no_embed=True,
        num_hidden_layers=4, num_heads=8, head_dim=16, expand=2, state_size=16, n_groups=2, conv_kernel=4,
        chunk_size=8, use_bias=False, use_conv_bias=True, layer_norm_epsilon=1e-5, residual_in_fp32=True,
        time_step_limit=(0.0, float("inf")))

variant("qwen3_5", "qwen3_5_text", norm="zero", one_norms=("linear_attn.norm",),
        notes="Qwen3.5 dense, text model (model_type qwen3_5_text, Qwen3_5ForCausalLM; released Qwen3.5 checkpoints "
              "are Qwen3_5ForConditionalGeneration with these weights under model.language_model.* and this config "
              "under text_config). layer_types: 3 linear_attention (Gated DeltaNet: 2 key heads, 4 value heads, "
              "head dims 16, conv kernel 4) then 1 full_attention (gated: q_proj gives query and a sigmoid output "
              "gate per head; per-head Q/K norm; partial rotary 0.25 of head_dim 32 = 8 dims). Decoder norms and "
              "q/k norms are zero-centred x*(1+w) (weights drawn around 0); the gated norm inside linear_attn "
              "(linear_attn.norm) is x*w (weights around 1). rope_parameters carry mrope_section / mrope_interleaved "
              "(text-only positions make M-RoPE identical to 1-D RoPE).",
        num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2, head_dim=32, intermediate_size=64,
        layer_types=["linear_attention", "linear_attention", "linear_attention", "full_attention"],
        linear_conv_kernel_dim=4, linear_key_head_dim=16, linear_value_head_dim=16, linear_num_key_heads=2,
        linear_num_value_heads=4, rms_norm_eps=1e-6, attention_bias=False,
        rope_parameters={"rope_type": "default", "rope_theta": 1e7, "partial_rotary_factor": 0.25,
                         "mrope_section": [2, 1, 1], "mrope_interleaved": True})

variant("qwen3_5_vlm_layout", "qwen3_5", norm="zero", one_norms=("linear_attn.norm", "visual"),
        notes="The qwen3_5 text model in the layout of the RELEASED Qwen3.5 checkpoints: "
              "Qwen3_5ForConditionalGeneration, model_type qwen3_5, the text config nested under text_config "
              "(rope_parameters, layer_types, linear_* there), weights under model.language_model.* plus lm_head.weight "
              "at top level, and a (tiny, 1-block) vision tower under model.visual.* that a text-only engine skips. "
              "References are for text-only input (no image tokens), computed with the ConditionalGeneration model; "
              "AutoModelForCausalLM loads the same files as Qwen3_5ForCausalLM and gives identical logits.",
        num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2, head_dim=16, intermediate_size=64,
        layer_types=["linear_attention", "linear_attention", "linear_attention", "full_attention"],
        linear_conv_kernel_dim=4, linear_key_head_dim=16, linear_value_head_dim=16, linear_num_key_heads=2,
        linear_num_value_heads=4, rms_norm_eps=1e-6, attention_bias=False,
        rope_parameters={"rope_type": "default", "rope_theta": 1e7, "partial_rotary_factor": 0.25,
                         "mrope_section": [1, 1, 0], "mrope_interleaved": True},
        vision_config=dict(depth=1, hidden_size=32, intermediate_size=32, num_heads=2, out_hidden_size=64,
                           patch_size=4, temporal_patch_size=2, spatial_merge_size=2, num_position_embeddings=16),
        image_token_id=250, video_token_id=251, vision_start_token_id=252, vision_end_token_id=253)

variant("qwen3_next", "qwen3_next", norm="zero", one_norms=("linear_attn.norm",),
        notes="Qwen3-Next: 3 linear_attention (Gated DeltaNet with FUSED projections in_proj_qkvz and in_proj_ba, "
              "grouped per key head: see fix_query_key_value_ordering) + 1 gated full_attention (as Qwen3.5); "
              "every layer's MLP is a sparse MoE (4 experts, top-2, softmax then renormalised top-k) plus a shared "
              "expert scaled by sigmoid(shared_expert_gate). Decoder and q/k norms x*(1+w), linear_attn.norm x*w.",
        num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2, head_dim=16, intermediate_size=64,
        layer_types=["linear_attention", "linear_attention", "linear_attention", "full_attention"],
        linear_conv_kernel_dim=4, linear_key_head_dim=16, linear_value_head_dim=16, linear_num_key_heads=2,
        linear_num_value_heads=4, rms_norm_eps=1e-6, attention_bias=False, decoder_sparse_step=1,
        moe_intermediate_size=16, shared_expert_intermediate_size=16, num_experts=4, num_experts_per_tok=2,
        norm_topk_prob=True, mlp_only_layers=[],
        rope_parameters={"rope_type": "default", "rope_theta": 1e7, "partial_rotary_factor": 0.5})

variant("granitemoehybrid", "granitemoehybrid",
        notes="Granite 4.0-H style: layer_types given in the released checkpoints' legacy spelling "
              "['mamba','attention','mamba','mamba'] (transformers 5.23 remaps mamba->linear_attention, "
              "attention->full_attention and writes the new names). Mamba-2 mixer (8 heads x 16, state 16, 1 group, "
              "conv 4, chunk 8); attention with NO position embedding (position_embedding_type 'nope', as released "
              "Granite 4.0-H) and scale attention_multiplier 0.2 instead of 1/sqrt(head_dim); every layer: MoE "
              "(4 experts, top-2: top-k of the router LOGITS, then softmax over those k) PLUS an always-on shared MLP "
              "(shared_mlp.input_linear = [gate; up] fused); embedding_multiplier 2, residual_multiplier 0.7 "
              "(both residual adds), logits divided by logits_scaling 2. hidden.0 = embedding * embedding_multiplier.",
        num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2, intermediate_size=16,
        shared_intermediate_size=32, num_local_experts=4, num_experts_per_tok=2,
        layer_types=["mamba", "attention", "mamba", "mamba"], position_embedding_type="nope",
        mamba_n_heads=8, mamba_n_groups=1, mamba_d_state=16, mamba_d_head=16, mamba_d_conv=4, mamba_expand=2,
        mamba_chunk_size=8, mamba_conv_bias=True, mamba_proj_bias=False, rms_norm_eps=1e-5,
        embedding_multiplier=2.0, residual_multiplier=0.7, attention_multiplier=0.2, logits_scaling=2.0,
        attention_bias=False, tie_word_embeddings=True,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0})

variant("granitemoehybrid_dense", "granitemoehybrid",
        notes="Granite 4.0-H dense style (granite-4.0-h-1b / 350m: num_local_experts 0): as granitemoehybrid but "
              "no MoE; the shared MLP (shared_mlp.input_linear [gate; up], width shared_intermediate_size) is each "
              "layer's whole MLP. Layers ['mamba','mamba','attention','mamba'].",
        num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2, intermediate_size=16,
        shared_intermediate_size=48, num_local_experts=0, num_experts_per_tok=0,
        layer_types=["mamba", "mamba", "attention", "mamba"], position_embedding_type="nope",
        mamba_n_heads=8, mamba_n_groups=2, mamba_d_state=16, mamba_d_head=16, mamba_d_conv=4, mamba_expand=2,
        mamba_chunk_size=8, mamba_conv_bias=True, mamba_proj_bias=False, rms_norm_eps=1e-5,
        embedding_multiplier=3.0, residual_multiplier=0.6, attention_multiplier=0.25, logits_scaling=1.5,
        attention_bias=False, tie_word_embeddings=True,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0})

variant("nemotron_h", "nemotron_h",
        notes="Nemotron-H / Nemotron 3: every layer is ONE mixer after one pre-norm (no separate FFN): "
              "layers_block_type ['linear_attention','moe','full_attention','mlp'] (= hybrid_override_pattern "
              "'ME*-' of released configs). Mamba-2 mixer (8 heads x 16, state 16, 2 groups, conv 4, chunk 8; dt "
              "clamped below at time_step_min in the chunked path), attention WITHOUT RoPE, non-gated relu^2 MLP "
              "(up_proj, down_proj), MoE with sigmoid router + e_score_correction_bias (4 experts, top-2, "
              "normalised, routed_scaling_factor 2.5) of non-gated relu^2 experts plus a shared relu^2 expert.",
        layers_block_type=["linear_attention", "moe", "full_attention", "mlp"],
        num_attention_heads=4, num_key_value_heads=2, head_dim=16, intermediate_size=64, mlp_hidden_act="relu2",
        mamba_num_heads=8, mamba_head_dim=16, ssm_state_size=16, n_groups=2, conv_kernel=4, chunk_size=8,
        expand=2, use_conv_bias=True, use_bias=False, mlp_bias=False, layer_norm_epsilon=1e-5,
        n_routed_experts=4, num_experts_per_tok=2, moe_intermediate_size=16,
        moe_shared_expert_intermediate_size=32, n_group=1, topk_group=1, norm_topk_prob=True,
        routed_scaling_factor=2.5, residual_in_fp32=False)

variant("falcon_h1", "falcon_h1",
        notes="Falcon-H1: every layer is 'hybrid' = attention and a Mamba-2 mixer IN PARALLEL on the same normed "
              "input (outputs summed, each with its multiplier), then an FFN. muP multipliers all set != 1: "
              "embedding 2.0, lm_head 0.5, attention_in 1.1 / attention_out 0.9, key_multiplier 0.7, ssm_in 1.2 / "
              "ssm_out 0.8, ssm_multipliers (per section of in_proj output: z, x, B, C, dt) [1.1,0.9,1.2,0.8,1.05], "
              "mlp_multipliers [0.8 (gate), 1.2 (down)]. 3 layers (only one layer kind). Mamba: d_ssm 64 = 4 heads x 16 (mamba_d_ssm overrides expand*hidden), state 16, 2 groups, conv 4, "
              "chunk 8, gated RMSNorm (mamba_rms_norm true, norm_before_gate false, group = d_ssm/n_groups). "
              "hidden.0 = embedding * embedding_multiplier.",
        num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2, intermediate_size=48,
        mamba_d_ssm=64, mamba_n_heads=4, mamba_d_head=16, mamba_n_groups=2, mamba_d_state=16, mamba_d_conv=4,
        mamba_expand=2, mamba_chunk_size=8, mamba_conv_bias=True, mamba_proj_bias=False,
        mamba_norm_before_gate=False, mamba_rms_norm=True, projectors_bias=False, rms_norm_eps=1e-5,
        lm_head_multiplier=0.5, embedding_multiplier=2.0, mlp_multipliers=[0.8, 1.2], key_multiplier=0.7,
        attention_out_multiplier=0.9, attention_in_multiplier=1.1, ssm_multipliers=[1.1, 0.9, 1.2, 0.8, 1.05],
        ssm_in_multiplier=1.2, ssm_out_multiplier=0.8, attention_bias=False, mlp_bias=False,
        rope_parameters={"rope_type": "default", "rope_theta": 1e11})

variant("lfm2_moe", "lfm2_moe",
        notes="LFM2-MoE (LFM2-8B-A1B style): LFM2 short-conv / attention layers as in lfm2 ([conv, conv, "
              "full_attention, conv]); the first num_dense_layers=1 layers have a dense SwiGLU FFN (w1/w3/w2, "
              "intermediate_size used as is, no auto-adjust), the rest an MoE: sigmoid router, expert_bias "
              "(buffer, saved) added for the top-k CHOICE only, weights = sigmoid scores of the chosen experts, "
              "normalised (+1e-6) and times routed_scaling_factor 1.5; 4 experts, top-2. Tied embeddings.",
        num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2, intermediate_size=64,
        moe_intermediate_size=16, layer_types=["conv", "conv", "full_attention", "conv"], conv_L_cache=3,
        conv_bias=False, norm_eps=1e-5, num_dense_layers=1, num_experts=4, num_experts_per_tok=2,
        use_expert_bias=True, routed_scaling_factor=1.5, norm_topk_prob=True, tie_word_embeddings=True,
        rope_parameters={"rope_type": "default", "rope_theta": 1e6})

variant("qwen3_5_moe", "qwen3_5_moe_text", norm="zero", one_norms=("linear_attn.norm",),
        notes="Qwen3.5-MoE text model (model_type qwen3_5_moe_text, Qwen3_5MoeForCausalLM; released checkpoints are "
              "Qwen3_5MoeForConditionalGeneration with weights under model.language_model.*). As qwen3_5 "
              "(separate in_proj_qkv / in_proj_z / in_proj_b / in_proj_a, gated attention, (1+w) norms) but every "
              "layer's MLP is an MoE: softmax router, top-2 of 4 renormalised, plus a shared expert scaled by "
              "sigmoid(shared_expert_gate). save_pretrained writes the experts one tensor per expert "
              "(mlp.experts.N.gate_proj/up_proj/down_proj), although transformers holds them fused in memory.",
        num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
        layer_types=["linear_attention", "linear_attention", "linear_attention", "full_attention"],
        linear_conv_kernel_dim=4, linear_key_head_dim=16, linear_value_head_dim=16, linear_num_key_heads=2,
        linear_num_value_heads=4, rms_norm_eps=1e-6, attention_bias=False, moe_intermediate_size=16,
        shared_expert_intermediate_size=16, num_experts=4, num_experts_per_tok=2,
        rope_parameters={"rope_type": "default", "rope_theta": 1e7, "partial_rotary_factor": 0.25,
                         "mrope_section": [1, 1, 0], "mrope_interleaved": True})

GEMMA4_COMMON = dict(
    num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2, head_dim=16, global_head_dim=32,
    intermediate_size=64, hidden_activation="gelu_pytorch_tanh", rms_norm_eps=1e-6, sliding_window=8,
    layer_types=["sliding_attention", "full_attention", "sliding_attention", "full_attention"],
    final_logit_softcapping=3.0, tie_word_embeddings=True, attention_bias=False,
    rope_parameters={"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                     "full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.25,
                                        "rope_theta": 1000000.0}})
GEMMA4_NOTES = ("Gemma 4 text (Gemma4ForCausalLM, model_type gemma4_text; released checkpoints are "
                "Gemma4ForConditionalGeneration with these weights under model.language_model.*). Layers "
                "[sliding 8, full, sliding 8, full]; sliding layers head_dim 16 with default RoPE theta 1e4, full "
                "layers head_dim 32 (global_head_dim) with 'proportional' RoPE (partial 0.25, theta 1e6); attention "
                "scale 1.0 (no 1/sqrt(d)); q_norm/k_norm (x*w) and a weightless v_norm; sandwich norms "
                "(post_attention / pre_ and post_feedforward); embedding scaled by sqrt(hidden); per-layer "
                "layer_scalar buffer (saved, drawn in [0.5,1.5]); final logit softcap 3.0; GELU-tanh MLP. All norms x*w. "
                "config.json as 5.23 writes it carries per_layer_config {layer index: {head_dim, num_key_value_heads}} for "
                "the full-attention layers instead of the released configs' global_head_dim / num_global_key_value_heads. ")
variant("gemma4_ple_kvshare", "gemma4_text", embed_std=0.05,
        notes=GEMMA4_NOTES + "THIS variant (gemma-4-E2B/E4B style): per-layer embeddings (hidden_size_per_layer_input 8: "
              "embed_tokens_per_layer [256, 4*8] scaled by sqrt(8), plus per_layer_model_projection of the scaled "
              "embedding times 1/sqrt(hidden), RMS-normed, summed and times 1/sqrt(2); each layer gates it in after "
              "its FFN) and num_kv_shared_layers 2: layers 2 (sliding) and 3 (full) have no k/v projections and "
              "reuse the keys/values of layers 0 and 1 (the last unshared layer of the same type).",
        hidden_size_per_layer_input=8, vocab_size_per_layer_input=256, num_kv_shared_layers=2,
        attention_k_eq_v=False, enable_moe_block=False, **GEMMA4_COMMON)
variant("gemma4", "gemma4_text", embed_std=0.05,
        notes=GEMMA4_NOTES + "THIS variant (gemma-4-31B style): no per-layer embeddings, no KV sharing; "
              "attention_k_eq_v: full-attention layers have no v_proj (values = the k_proj output, before k_norm / "
              "RoPE; v_norm applied) and num_global_key_value_heads 1.",
        hidden_size_per_layer_input=0, num_kv_shared_layers=0, attention_k_eq_v=True, num_global_key_value_heads=1,
        enable_moe_block=False, **GEMMA4_COMMON)
variant("gemma4_moe", "gemma4_text", embed_std=0.05,
        notes=GEMMA4_NOTES + "THIS variant (gemma-4-26B-A4B style): as gemma4 (k_eq_v, no PLE) plus "
              "enable_moe_block: each layer runs the dense MLP AND an MoE (router: weightless RMSNorm of the residual "
              "stream input, * router.scale * hidden^-0.5, proj, softmax, top-2 of 4 renormalised, * per_expert_scale) "
              "with separate pre/post norms, the two outputs summed before post_feedforward_layernorm.",
        hidden_size_per_layer_input=0, num_kv_shared_layers=0, attention_k_eq_v=True, num_global_key_value_heads=1,
        enable_moe_block=True, num_experts=4, top_k_experts=2, moe_intermediate_size=16, **GEMMA4_COMMON)

variant("llama4", "llama4_text",
        notes="Llama 4 text-only (Llama4ForCausalLM, model_type llama4_text; released Scout/Maverick checkpoints are "
              "Llama4ForConditionalGeneration with these weights under language_model.model.* / "
              "language_model.lm_head). no_rope_layer_interval 4: layers 0-2 use RoPE (llama3 scaling factor 16, low/high freq factors 1/4, original context 64, theta 5e5; "
              "RoPE applied to ADJACENT pairs (complex multiply, interleaved), not rotate_half) with a weightless "
              "L2 QK norm (use_qk_norm) and CHUNKED attention (attention_chunk_size 8: a token attends only within "
              "its 8-token block); layer 3 is NoPE full attention with attention temperature tuning (q scaled by "
              "1 + attn_scale*log1p(floor((pos+1)/floor_scale)), attn_scale 0.1, floor_scale 4). "
              "interleave_moe_layer_step 2: layers 1 and 3 are MoE (4 experts, top-1, sigmoid of the chosen logit "
              "applied to the expert INPUT, plus an always-on shared expert; experts fused: "
              "feed_forward.experts.gate_up_proj [E, hidden, 2*I] and down_proj [E, I, hidden]), layers 0 and 2 dense "
              "(intermediate_size_mlp 64).",
        num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2, head_dim=16, intermediate_size=16,
        intermediate_size_mlp=64, num_local_experts=4, num_experts_per_tok=1, interleave_moe_layer_step=2,
        use_qk_norm=True, no_rope_layer_interval=4, attention_chunk_size=8, attn_temperature_tuning=True,
        floor_scale=4, attn_scale=0.1, rms_norm_eps=1e-5, attention_bias=False, tie_word_embeddings=False,
        rope_parameters={"rope_type": "llama3", "rope_theta": 500000.0, "factor": 16.0, "low_freq_factor": 1.0,
                         "high_freq_factor": 4.0, "original_max_position_embeddings": 64})

variant("glm4_moe", "glm4_moe",
        notes="GLM-4.5 / 4.6 (Glm4MoeForCausalLM): head_dim 24 (q_proj 96 rows, wider than hidden), Q/K/V biases, per-head "
              "Q/K RMSNorm (use_qk_norm), partial RoPE (partial_rotary_factor 0.5: first 12 of 24 dims, rotate_half "
              "within them); layer 0 dense (first_k_dense_replace 1), layers 1-3 MoE: sigmoid router with "
              "e_score_correction_bias for the choice (n_group 1), top-2 of 4 renormalised, * routed_scaling_factor "
              "2.5, plus 1 shared expert.",
        num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2, head_dim=24, intermediate_size=64,
        moe_intermediate_size=16, n_routed_experts=4, num_experts_per_tok=2, n_shared_experts=1,
        first_k_dense_replace=1, routed_scaling_factor=2.5, n_group=1, topk_group=1, norm_topk_prob=True,
        use_qk_norm=True, attention_bias=True, rms_norm_eps=1e-5,
        rope_parameters={"rope_type": "default", "rope_theta": 1e6, "partial_rotary_factor": 0.5})

variant("olmo3", "olmo3",
        notes="OLMo 3: OLMo-2 block (no pre-norms: post_attention_layernorm and post_feedforward_layernorm applied to "
              "the sublayer OUTPUTS before the residual add; Q/K RMSNorm over the whole projection, not per head) "
              "plus sliding-window attention (window 8) on 3 of every 4 layers (layer_types).",
        num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2, intermediate_size=64, sliding_window=8,
        layer_types=["sliding_attention", "sliding_attention", "sliding_attention", "full_attention"],
        rms_norm_eps=1e-6, attention_bias=False, rope_parameters={"rope_type": "default", "rope_theta": 500000.0})

variant("ernie4_5", "ernie4_5",
        notes="ERNIE 4.5 dense (0.3B style): tied embeddings, head_dim 16, no biases (use_bias false, as released). "
              "RoPE on ADJACENT (interleaved) pairs: rotate_half here is (x0,x1)->(-x1,x0) over even/odd lanes, with "
              "cos/sin repeat_interleaved (apply_rotary_pos_emb), computed in f32.",
        num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2, head_dim=16, intermediate_size=64,
        use_bias=False, tie_word_embeddings=True, rms_norm_eps=1e-5,
        rope_parameters={"rope_type": "default", "rope_theta": 500000.0})

variant("ernie4_5_moe", "ernie4_5_moe",
        notes="ERNIE 4.5 MoE (21B-A3B style): layer 0 dense (moe_layer_start_index 1), layers 1-3 MoE: softmax "
              "router (f32), top-2 chosen on softmax + e_score_correction_bias (moe_statics, shape [1, E]), weights "
              "= softmax probs of the chosen, renormalised (clamped below by moe_norm_min), plus shared experts "
              "(moe_num_shared_experts 2 -> one MLP of width 2*moe_intermediate_size). Tied embeddings.",
        num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2, intermediate_size=64,
        moe_intermediate_size=16, moe_k=2, moe_num_experts=4, moe_num_shared_experts=2, moe_layer_start_index=1,
        moe_layer_end_index=-1, moe_layer_interval=1, use_bias=False, tie_word_embeddings=True, rms_norm_eps=1e-5,
        rope_parameters={"rope_type": "default", "rope_theta": 500000.0})

variant("seed_oss", "seed_oss",
        notes="Seed-OSS: Llama-like with Q/K/V biases (attention_bias) but no o_proj bias (attention_out_bias false), "
              "head_dim 16; attention_dropout / residual_dropout in config are training-only.",
        num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2, head_dim=16, intermediate_size=64,
        attention_bias=True, attention_out_bias=False, mlp_bias=False, rms_norm_eps=1e-6,
        rope_parameters={"rope_type": "default", "rope_theta": 1e7})

variant("minimax_m2", "minimax_m2",
        notes="MiniMax-M2: every layer MoE (4 experts, top-2; sigmoid router, e_score_correction_bias buffer for the "
              "choice, weights = sigmoid scores of the chosen, renormalised; no shared expert); Q/K RMSNorm over the "
              "WHOLE projection (q_norm [heads*head_dim], k_norm [kv_heads*head_dim]) before RoPE; partial RoPE 0.5 "
              "(first 8 of 16 dims).",
        num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2, head_dim=16, intermediate_size=16,
        num_local_experts=4, num_experts_per_tok=2, rms_norm_eps=1e-6,
        rope_parameters={"rope_type": "default", "rope_theta": 5e6, "partial_rotary_factor": 0.5})


def randomize(model, v, gen):
    """Re-draw every parameter (float32)."""
    std_in = {}
    for name, p in model.named_parameters():
        n = name.lower()
        leaf = n.split(".")[-1]
        shape = tuple(p.shape)
        r = lambda *s: torch.randn(*s, generator=gen)
        u = lambda lo, hi: lo + (hi - lo) * torch.rand(*shape, generator=gen)
        if leaf == "a_log":
            val = torch.log(u(1.0, 8.0))  # A = -exp(A_log) in [-8, -1]
        elif leaf == "dt_bias":
            dt = torch.exp(u(math.log(0.01), math.log(0.2)))
            val = dt + torch.log(-torch.expm1(-dt))  # inverse softplus
        elif leaf == "d" and p.dim() == 1:
            val = u(0.5, 1.5)
        elif "conv" in n and leaf == "weight" and p.dim() == 3:
            val = r(*shape) * (1.0 / math.sqrt(shape[-1]))
        elif "scale" in leaf and p.dim() == 1:  # router scales (Gemma 4)
            val = 1.0 + 0.2 * r(*shape)
        elif "norm" in n and leaf in ("weight", "scale") and p.dim() == 1:
            zero = v["norm"] == "zero"
            if any(f in n for f in v["zero_norms"]):
                zero = True
            if any(f in n for f in v["one_norms"]):
                zero = False
            val = (0.0 if zero else 1.0) + 0.1 * r(*shape)
        elif leaf.endswith("bias") or p.dim() == 1:
            val = 0.1 * r(*shape)
        elif "embed" in n:
            # small next to the layers' outputs, so that (with tied embeddings) the residual
            # copy of the last token does not always win the argmax
            val = v["embed_std"] * r(*shape)
        elif p.dim() >= 2:
            fan_in = shape[-1]
            val = r(*shape) / math.sqrt(fan_in)
        else:
            val = r(*shape)
        with torch.no_grad():
            p.copy_(val.to(p.dtype))
    # checkpoint-carried buffers (DeepSeek-style router score-correction bias)
    for name, b in model.named_buffers():
        if name.endswith("e_score_correction_bias") or name.endswith("expert_bias"):
            with torch.no_grad():
                b.copy_(0.1 * torch.randn(*b.shape, generator=gen))
        elif name.endswith("layer_scalar"):
            with torch.no_grad():
                b.copy_(0.5 + torch.rand(*b.shape, generator=gen))


def layer_types_of(config):
    config = config.get_text_config()
    for key in ("layer_types", "layers_block_type", "hybrid_override_pattern", "layer_block_types"):
        val = getattr(config, key, None)
        if val is not None:
            return key, (list(val) if not isinstance(val, str) else val)
    return None, None


def ffn_kinds_of(model):
    """Per decoder layer: "moe" (routed experts, maybe with shared ones), "dense", "dense+moe"
    (Gemma 4: both in parallel); None when no layer has experts, and for Nemotron-H, whose
    layer_types already give each layer's one mixer (mamba / attention / mlp / moe)."""
    base = getattr(model, "model", None) or getattr(model, "backbone", None)
    layers = getattr(base, "layers", None)
    if layers is None or model.config.model_type == "nemotron_h":  # its layer_types say it all
        return None
    kinds = []
    for layer in layers:
        leaves = {n.split(".")[-1] for n, _ in layer.named_modules() if n}
        moe = "experts" in leaves
        dense = hasattr(layer, "mlp") and moe and hasattr(layer, "experts")
        kinds.append("dense+moe" if dense else "moe" if moe else "dense")
    return kinds if any("moe" in k for k in kinds) else None


@torch.no_grad()
def full_logits(model, ids):
    out = model(torch.tensor([ids]), use_cache=False)
    return out.logits[0].float()


@torch.no_grad()
def cached_logits(model, prompt, gen_ids):
    out = model(torch.tensor([prompt]), use_cache=True)
    rows = [out.logits[0].float()]
    cache = getattr(out, "past_key_values", None)
    if cache is None:
        cache = getattr(out, "cache_params", None)
    seq = list(prompt)
    for t in gen_ids:
        seq.append(t)
        kw = dict(use_cache=True)
        pos = len(seq) - 1
        if hasattr(out, "cache_params") and getattr(out, "cache_params", None) is not None:
            kw["cache_params"] = cache
        else:
            kw["past_key_values"] = cache
        kw["position_ids"] = torch.tensor([[pos]])
        try:
            out = model(torch.tensor([[t]]), **kw)
        except TypeError:
            kw.pop("position_ids")
            out = model(torch.tensor([[t]]), **kw)
        rows.append(out.logits[0].float())
        c = getattr(out, "past_key_values", None) or getattr(out, "cache_params", None)
        if c is not None:
            cache = c
    return torch.cat(rows, 0)


def build(name, attempt=0):
    v = VARIANTS[name]
    idx = zlib.crc32(name.encode()) % 100000 + 7919 * attempt  # stable per variant, whatever else is in VARIANTS
    torch.manual_seed(SEED + idx)
    cfg = dict(COMMON)
    cfg.update(v["cfg"])
    if v["model_type"] == "qwen3_5":  # the released layout: a VLM config with the text model nested
        from transformers import AutoModelForImageTextToText
        vision = cfg.pop("vision_config")
        extra = {k: cfg.pop(k) for k in ("image_token_id", "video_token_id", "vision_start_token_id",
                                          "vision_end_token_id")}
        config = AutoConfig.for_model("qwen3_5", text_config=cfg, vision_config=vision, **extra)
        model = AutoModelForImageTextToText.from_config(config, attn_implementation="eager", dtype=torch.float32)
    else:
        config = AutoConfig.for_model(v["model_type"], **cfg)
        config._attn_implementation = "eager"
        model = AutoModelForCausalLM.from_config(config, attn_implementation="eager", dtype=torch.float32)
    model.eval()
    gen = torch.Generator().manual_seed(SEED + 1000 + idx)
    randomize(model, v, gen)
    return model, gen


def make(name):
    v = VARIANTS[name]
    # Random tiny models often fall into repeating one token; redraw (new seed) up to 4 times
    # for a greedy continuation with at least 4 distinct ids, else keep the last draw.
    for attempt in range(4):
        model, gen = build(name, attempt)
        vocab = model.config.get_text_config().vocab_size
        prompt = torch.randint(3, vocab, (N_PROMPT,), generator=gen).tolist()
        ids = list(prompt)
        for _ in range(N_GEN):
            ids.append(int(full_logits(model, ids)[-1].argmax()))
        greedy = ids[N_PROMPT:]
        if len(set(greedy)) >= 4:
            break
    out_dir = os.path.join(ROOT, name)
    os.makedirs(out_dir, exist_ok=True)
    for f in os.listdir(out_dir):
        os.remove(os.path.join(out_dir, f))
    model.save_pretrained(out_dir)
    logits = full_logits(model, prompt)
    full = full_logits(model, ids)
    with torch.no_grad():
        out = model(torch.tensor([prompt]), use_cache=False, output_hidden_states=True)
    hidden = [h[0].float().contiguous() for h in out.hidden_states]
    with torch.no_grad():
        emb = model.get_input_embeddings()(torch.tensor([prompt]))[0].float()
    n_layers = model.config.get_text_config().num_hidden_layers
    if v["hidden_no_embed"]:
        assert len(hidden) == n_layers + 1
        # usual convention: embedding, outputs of layers 0..L-2, final-norm output
        hidden = [emb.contiguous()] + hidden[: n_layers - 1] + [hidden[n_layers]]
    emb = emb * float(getattr(model.config, "embedding_multiplier", 1.0) or 1.0)  # Granite, Falcon-H1
    if len(hidden) != n_layers + 1 or not torch.allclose(hidden[0], emb):
        print(f"WARNING {name}: {len(hidden)} hidden states, hidden.0 == embedding lookup: "
              f"{torch.allclose(hidden[0], emb) if hidden[0].shape == emb.shape else 'shape differs'}", flush=True)
    assert torch.allclose(out.logits[0].float(), logits, atol=1e-5)
    assert torch.isfinite(full).all(), "non-finite logits"
    spread = full.std(dim=-1)
    assert spread.min() > 1e-3, f"logits nearly constant (row std {spread.min():.2e})"

    decode = None
    try:
        c = cached_logits(model, prompt, greedy)
        decode = float((c - full[: c.shape[0]]).abs().max())
    except Exception as e:  # noqa: BLE001
        decode = f"cached decode failed: {type(e).__name__}: {e}"

    # the files must be the model: reload them and compare (a buffer that from_pretrained re-initialises
    # instead of loading, or a weight renamed on save but not back, would show here)
    re = AutoModelForCausalLM.from_pretrained(out_dir, dtype=torch.float32, attn_implementation="eager").eval()
    diff = float((full_logits(re, ids) - full).abs().max())
    assert diff == 0.0, f"reloaded checkpoint differs by {diff}"

    tensors = {}
    with safe_open(os.path.join(out_dir, "model.safetensors"), "pt") as f:
        for k in sorted(f.keys()):
            sl = f.get_slice(k)
            tensors[k] = [sl.get_dtype(), list(sl.get_shape())]
    key, lt = layer_types_of(model.config)
    notes = ("logits: [T_prompt, vocab] for prompt_ids; full_logits: [T_prompt+N_GEN, vocab] for all_ids; "
             "hidden.0 = embedding output, hidden.i = output of layer i, last hidden = after final norm "
             "(transformers convention). float32, eager attention, torch (non-kernel) recurrent path. "
             "checkpoint_tensors lists model.safetensors as written (names, dtypes, shapes). "
             "decode_check: max |full_logits - logits of a cached prefill+decode| in transformers itself. ")
    notes += v["notes"]
    ref = {
        "architecture": model.config.architectures[0] if model.config.architectures else type(model).__name__,
        "model_type": model.config.model_type,
        "transformers_version": transformers.__version__,
        "torch_version": torch.__version__,
        "prompt_ids": prompt,
        "greedy_ids": greedy,
        "all_ids": ids,
        "notes": notes,
    }
    if lt is not None:
        ref["layer_types_key"] = key
        ref["layer_types"] = lt
    fk = ffn_kinds_of(model)
    if fk is not None:
        ref["ffn_kinds"] = fk
    ref["decode_check"] = decode
    ref["checkpoint_tensors"] = tensors
    with open(os.path.join(out_dir, "reference.json"), "w") as f:
        json.dump(ref, f, indent=1)
        f.write("\n")
    blobs = {"logits": logits.contiguous(), "full_logits": full.contiguous()}
    for i, h in enumerate(hidden):
        blobs[f"hidden.{i}"] = h
    save_file(blobs, os.path.join(out_dir, "reference.safetensors"))
    size = sum(os.path.getsize(os.path.join(out_dir, f)) for f in os.listdir(out_dir))
    return f"ok {ref['architecture']} greedy={greedy[:6]} hidden={len(hidden)} decode_check={decode} bytes={size}"


def main():
    names = sys.argv[1:] or list(VARIANTS)
    os.makedirs(ROOT, exist_ok=True)
    summary_path = os.path.join(ROOT, "SUMMARY.json")
    summary = json.load(open(summary_path)) if os.path.exists(summary_path) else {}
    for name in names:
        try:
            summary[name] = make(name)
        except Exception as e:  # noqa: BLE001
            traceback.print_exc()
            summary[name] = f"FAILED {type(e).__name__}: {e}"
        print(name, summary[name], flush=True)
        with open(summary_path, "w") as f:
            json.dump(dict(sorted(summary.items())), f, indent=1)
            f.write("\n")


if __name__ == "__main__":
    main()
