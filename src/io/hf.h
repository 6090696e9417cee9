/* Hugging Face checkpoint directories as GGUF-shaped views (io/hf.c). */
#ifndef FX_IO_HF_H
#define FX_IO_HF_H

#include "io/gguf.h"

/* Map dir (config.json + model.safetensors or a sharded index) onto a
 * gguf_file with llama.cpp's key and tensor names; free it with
 * gguf_close. Errors: FX_E_IO (no config.json / weights), FX_E_FORMAT
 * (malformed config or safetensors, a missing required key, named),
 * FX_E_UNSUPPORTED (model_type, RoPE type, dtype or tensor not mapped). */
int hf_open(const char *dir, struct gguf_file **out, struct fx_err *err);

#endif
