/* Nemotron-H's metadata in llama.cpp's form (io/hf_ssm.c). */
#ifndef FX_IO_HF_SSM_H
#define FX_IO_HF_SSM_H

#include <stdbool.h>

#include <cJSON.h>

#include "io/gguf.h"

struct fx_err;

/* Whether config.json's layer types (layer_types, else layers_block_type,
 * else the hybrid_override_pattern string) name an MoE layer ("moe", 'E'):
 * llama.cpp's converter then writes Nemotron-H as nemotron_h_moe. */
bool hf_ssm_has_moe(const cJSON *cfg);

/* A config without MoE layers (hf_ssm_has_moe false) loses its MoE keys
 * (n_routed_experts, num_experts_per_tok, n_group, ...: transformers 5
 * saves NemotronHConfig's defaults with every checkpoint), so a dense model
 * is written without expert or expert-group keys: llama.cpp's nemotron_h
 * would want MoE tensors on every MLP layer, and asserts no expert groups
 * without experts. */
void hf_ssm_drop_moe_keys(cJSON *cfg);

/* {arch}.feed_forward_length per layer, as llama.cpp's nemotron_h reads
 * it (a layer whose K/V head count and MLP width are both 0 is a Mamba-2
 * layer): "mlp" layers n_ff, "moe" layers moe_intermediate_size (n_ff when
 * absent), every other layer 0. Errors: FX_E_NOMEM; FX_E_FORMAT (a layer
 * type missing) with a message naming dir. */
int hf_ssm_ff_per_layer(struct gguf_file *g, const cJSON *cfg, const char *arch, int n_layer,
			int n_ff, const char *dir, struct fx_err *err);

#endif
