/* Multi-token-prediction tensors of a Hugging Face checkpoint under
 * llama.cpp's names (io/hf_mtp.c). */
#ifndef FX_IO_HF_MTP_H
#define FX_IO_HF_MTP_H

#include <stdbool.h>
#include <stddef.h>

#include "io/safetensors.h"

/* How many multi-token-prediction blocks Qwen 3.5 / Qwen3-Next's mtp.*
 * tensors hold (mtp.layers.I.*, I < 16; 0 when there are none: transformers
 * saves none, the released checkpoints carry one). The count comes from the
 * tensors, not mtp_num_hidden_layers, as llama.cpp's converter does for
 * Qwen3-Next, whose config has no such key. */
int hf_mtp_count(const struct st_set *st);

/* The name llama.cpp's converter (conversion/qwen.py _QwenMtpMixin) gives
 * mtp tensor `name` before its tensor map: mtp.layers.I.REST ->
 * model.layers.{n_layer + I}.REST, and mtp.fc / pre_fc_norm_embedding /
 * pre_fc_norm_hidden / norm -> model.layers.{n_layer}.eh_proj / enorm /
 * hnorm / shared_head.norm (also under model.mtp.), into buf[0..n).
 * Returns false (buf untouched) for a name that is not an MTP tensor. */
bool hf_mtp_rename(const char *name, int n_layer, char *buf, size_t n);

#endif
