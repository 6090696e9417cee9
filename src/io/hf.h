/* Hugging Face checkpoint directories as GGUF-shaped views (io/hf.c). */
#ifndef FX_IO_HF_H
#define FX_IO_HF_H

#include <stddef.h>
#include <stdint.h>

#include "io/gguf.h"

/* How one config.json model_type maps onto llama.cpp's GGUF form (what
 * convert_hf_to_gguf.py does to it). The rows live with the architectures
 * (model/arch/, one per family row), which io cannot see: hf_open is handed
 * them through a struct hf_registry. */
struct hf_family {
	const char *model_type;     /* config.json "model_type"; NULL ends a row's list */
	bool permute_qk;            /* adjacent-pair RoPE in GGUF: permute Q/K rows */
	bool norm_plus_one;         /* Gemma: HF applies (1 + w) */
	const char *post_attn_name; /* what HF's post_attention_layernorm is in GGUF
				     * (blk.N.<name>.weight); NULL: "ffn_norm" */
	bool moe_norm;              /* norm_topk_prob when config.json omits it (Mixtral) */
	bool fold_mup;              /* Falcon-H1: muP multipliers folded into the weights
				     * (io/hf_mup.c), not written as keys */
	const char *text_prefix;    /* a multimodal checkpoint (Qwen 3.5 as released):
				     * the text model's config is text_config, its
				     * tensors are under this prefix (read as "model."),
				     * the vision tower and MTP layers are skipped */
	bool gdn_grouped;           /* Gated DeltaNet value heads kept grouped by key head
				     * and in_proj_ba fused as ssm_ba (llama.cpp's
				     * qwen3next), not tiled (qwen35) */
	bool recurrent_flags;       /* recurrent layers as llama.cpp's {arch}.attention.recurrent_layers
				     * beside one head_count_kv (Qwen 3.5), not 0s in a per-layer count */
	bool rope_sections;         /* write llama.cpp's {arch}.rope.dimension_sections (Qwen 3.5) */
	int gating_func;            /* llama.cpp's {arch}.expert_gating_func to write (2: sigmoid), 0: none */
	const char *moe_arch;       /* general.architecture instead when a layer is an MoE
				     * (layer_types / layers_block_type "moe"): llama.cpp's
				     * nemotron_h_moe */
	bool ff_per_layer;          /* feed_forward_length per layer from the layer types:
				     * "mlp" intermediate_size, "moe" moe_intermediate_size,
				     * others 0 (llama.cpp's nemotron_h; io/hf_ssm.c) */
	bool gate_up_halves;        /* fused experts' gate_up_proj holds [gate | up] halves
				     * on its last axis (Llama 4), not interleaved (gpt-oss) */
};

/* The families hf_open may map (model/arch/registry.c's arch_hf). */
struct hf_registry {
	/* The mapping for model_type and its GGUF general.architecture in
	 * *arch (static strings), or NULL when none. */
	const struct hf_family *(*find)(const char *model_type, const char **arch);
	/* The known model_types, comma-separated, into buf[0..n) (truncated
	 * to fit, NUL-terminated); returns buf. */
	const char *(*names)(char *buf, size_t n);
};

/* Map dir (config.json + model.safetensors or a sharded index) onto a
 * gguf_file with llama.cpp's key and tensor names; free it with
 * gguf_close. reg: the families to choose from (borrowed for the call).
 * Errors: FX_E_IO (no config.json / weights), FX_E_FORMAT (malformed
 * config or safetensors, a missing required key, named), FX_E_UNSUPPORTED
 * (model_type, RoPE type, dtype or tensor not mapped). */
int hf_open(const char *dir, const struct hf_registry *reg, struct gguf_file **out,
	    struct fx_err *err);

/* The view's key holding why tokenizer.json could not become tokenizer.ggml.*
 * keys (a string; absent when it could, or there is none): loading a
 * directory does not need them, ferrox convert refuses to write without. */
#define HF_TOKENIZER_ERROR "tokenizer.ferrox.error"

/* A checkpoint's training context (the GGUF view's {arch}.context_length)
 * and where it came from. */
struct hf_ctx_info {
	int32_t n_ctx_train;      /* what the view records */
	int32_t model_max_length; /* tokenizer_config.json's; 0: none (absent, or
				   * a "no limit" value such as transformers'
				   * int(1e30)) */
	char from[80];            /* "config.json max_position_embeddings",
				   * "tokenizer_config.json model_max_length" or
				   * "default" */
};

/* The training context of dir, as hf_open sets it: the first of
 * config.json's max_position_embeddings, n_ctx, n_positions, max_length,
 * max_sequence_length, model_max_length (llama.cpp's converter, base.py
 * set_gguf_parameters) that is an integer in 1..2^31-1; else
 * tokenizer_config.json's model_max_length (ferrox's addition: transformers
 * truncates to it, so it is the length the tokenizer was meant for), when
 * in that range (transformers' int(1e30) / 1e30 "no limit" values and
 * anything past 2^31-1, which a GGUF context cannot hold, count as none);
 * else 4096. out->model_max_length is read whatever config.json says.
 * Errors: FX_E_IO / FX_E_FORMAT naming config.json or tokenizer_config.json
 * (unreadable, not a JSON object; an absent tokenizer_config.json is
 * none), FX_E_NOMEM. */
int hf_context_info(const char *dir, struct hf_ctx_info *out, struct fx_err *err);

/* path as a gguf_file: a Hugging Face directory through hf_open(reg), or
 * else a GGUF file (gguf_open); *is_dir (may be NULL) says which. */
int hf_open_any(const char *path, const struct hf_registry *reg, struct gguf_file **out,
		bool *is_dir, struct fx_err *err);

#endif
