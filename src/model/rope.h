/* RoPE frequencies (Su et al. 2021) with the context-extension schemes
 * checkpoints use: linear position interpolation (Chen et al. 2023),
 * Llama 3's frequency-dependent scaling (Meta, HF
 * _compute_llama3_parameters) and YaRN (Peng et al. 2023, HF
 * _compute_yarn_parameters). */
#ifndef FX_MODEL_ROPE_H
#define FX_MODEL_ROPE_H

#include <stdbool.h>
#include <stdint.h>

enum rope_scaling_type { ROPE_SCALING_NONE, ROPE_SCALING_LINEAR, ROPE_SCALING_LLAMA3,
			 ROPE_SCALING_YARN };

struct rope_scaling {
	enum rope_scaling_type type;
	float factor;              /* context extension factor */
	float low_freq, high_freq; /* Llama 3: low/high_freq_factor */
	float beta_fast, beta_slow;/* YaRN ramp bounds, in rotations */
	bool yarn_truncate;        /* YaRN: floor/ceil the ramp bounds (HF default) */
	int32_t orig_ctx;          /* original_max_position_embeddings */
};

/* inv_freq[n_rot/2] for base and scaling; freq_factors (llama.cpp's
 * rope_freqs tensor: inv_freq[i] /= factors[i]) may be NULL. */
void rope_inv_freq(float *inv_freq, int n_rot, float base, const struct rope_scaling *sc,
		   const float *freq_factors);

#endif
