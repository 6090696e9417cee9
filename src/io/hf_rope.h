/* Llama 3 RoPE scaling in llama.cpp's GGUF form (io/hf_rope.c). */
#ifndef FX_IO_HF_ROPE_H
#define FX_IO_HF_ROPE_H

#include "ferrox.h"
#include "io/gguf.h"

/* rope_type "llama3" (transformers' _compute_llama3_parameters) as
 * llama.cpp's converter writes it (LlamaModel.generate_extra_tensors):
 * rope_freqs.weight, [n_rot / 2] f32 divisors of the plain frequencies
 * base^(-2i / n_rot): 1 where the wavelength is under orig / hi, factor
 * where it is over orig / lo, and 1 / ((1 - s) / factor + s) between, s =
 * (orig / wavelength - lo) / (hi - lo). llama.cpp has no "llama3" scaling
 * type and aborts on one. Built into g. Errors: FX_E_FORMAT (n_rot odd,
 * factor, orig or hi - lo not positive; named), FX_E_NOMEM. */
int hf_rope_llama3_freqs(struct gguf_file *g, int n_rot, double base, double factor, double lo,
			 double hi, double orig, struct fx_err *err);

#endif
