/* Falcon-H1's muP multipliers folded into the weights (io/hf_mup.c). */
#ifndef FX_IO_HF_MUP_H
#define FX_IO_HF_MUP_H

#include <cJSON.h>

#include "io/gguf.h"
#include "io/safetensors.h"

struct fx_err;

/* The multipliers config.json gives Falcon-H1 (embedding, lm_head,
 * attention in / out, key, ssm in / out, the five ssm_multipliers over
 * in_proj's z, x, B, C, dt rows, mlp_multipliers for gate and down), folded
 * into the tensor they scale as llama.cpp's convert_hf_to_gguf.py
 * (FalconH1Model.modify_tensors) does, so the forward pass needs none:
 * for tensor t, mapped to GGUF name `name`, *data and *type become an f32
 * copy with its rows scaled (allocated in g, which owns it) when a
 * multiplier applies, and stay as they are otherwise. Errors: FX_E_NOMEM,
 * FX_E_FORMAT (ssm_multipliers / mlp_multipliers not 5 / 2 numbers, or an
 * in_proj whose rows do not match the Mamba sizes), with a message in err
 * naming dir. */
int hf_mup_fold(const cJSON *cfg, const char *dir, struct gguf_file *g, const struct st_tensor *t,
		const char *name, const void **data, int *type, struct fx_err *err);

#endif
