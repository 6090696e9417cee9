/* Gemma 4's config.json shapes and tensors in llama.cpp's GGUF form
 * (io/hf_gemma4.c), for io/hf.c. */
#ifndef FX_IO_HF_GEMMA4_H
#define FX_IO_HF_GEMMA4_H

#include <cJSON.h>
#include <stdbool.h>
#include <stdint.h>

#include "ferrox.h"
#include "io/gguf.h"

/* Global (full-attention) layers with their own head size and K/V head
 * count: transformers 5.23's per_layer_config {"<layer>": {head_dim,
 * num_key_value_heads}}, or the released configs' global_head_dim and
 * num_global_key_value_heads (the latter only with attention_k_eq_v;
 * Gemma4TextConfig.__post_init__). With neither, returns false and
 * touches nothing. Otherwise *head_dim (in: config head_dim) becomes the
 * global layers' size, *head_dim_swa the sliding layers' (the config's),
 * and kv[n_layer] (caller's) each layer's K/V heads (n_head_kv unless
 * given for that layer). Sliding layers are those layer_types names
 * sliding_attention. */
bool hf_gemma4_heads(const cJSON *cfg, int n_layer, int n_head_kv, int *head_dim,
		     int *head_dim_swa, uint32_t *kv);

/* Proportional RoPE (transformers' _compute_proportional_rope_parameters)
 * as llama.cpp's rope_freqs.weight: [head_dim / 2] f32 frequency factors,
 * 1 for the int(partial * head_dim / 2) pairs that turn (inv_freq over the
 * whole head_dim) and 1e30 for the rest, which then do not turn. Built into
 * g. Errors: FX_E_FORMAT (head_dim odd or partial outside (0, 1]),
 * FX_E_NOMEM. */
int hf_gemma4_rope_freqs(struct gguf_file *g, int head_dim, double partial, struct fx_err *err);

#endif
