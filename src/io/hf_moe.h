/* The mixture-of-experts layout keys llama.cpp reads beside the common
 * ones io/hf.c writes (io/hf_moe.c). */
#ifndef FX_IO_HF_MOE_H
#define FX_IO_HF_MOE_H

#include <cJSON.h>

#include "io/gguf.h"

/* For a model whose view g already holds {arch}.expert_count (else
 * nothing), the keys llama.cpp's loader requires for some families and
 * its converter writes from config.json, each only where g does not hold
 * it yet:
 *   expert_gating_func          gating_func (the family row's; 0: from
 *                               scoring_func "softmax" 1 / "sigmoid" 2 /
 *                               "sqrtsoftplus" 4, else none)
 *   expert_shared_count         n_shared_experts (GLM-4.5, DeepSeek)
 *   interleave_moe_layer_step   moe_layer_interval (ERNIE 4.5) or
 *                               interleave_moe_layer_step (Llama 4)
 *   leading_dense_block_count   moe_layer_start_index (ERNIE 4.5)
 *   expert_shared_feed_forward_length
 *                               moe_num_shared_experts x moe_intermediate_size
 *                               (ERNIE 4.5's fused shared MLP, Ernie4_5_MoeMLP)
 * ferrox itself reads the layout from the tensors (and ERNIE's shared
 * width, which equals the expert_shared_count x expert_feed_forward_length
 * it derived before); these let llama.cpp load the file. Returns FX_OK or
 * FX_E_NOMEM. */
int hf_moe_keys(struct gguf_file *g, const char *arch, const cJSON *cfg, int gating_func);

#endif
