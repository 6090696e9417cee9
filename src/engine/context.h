/* Internal hooks on a context, for tests. */
#ifndef FX_ENGINE_CONTEXT_H
#define FX_ENGINE_CONTEXT_H

#include "ferrox.h"

/* Capture hidden states of every later fx_decode into buf
 * ([n_layer + 1][n_tokens][n_embd], see fwd_scratch.capture; borrowed, must
 * hold the largest call); NULL stops. */
void context_set_capture(struct fx_context *c, float *buf);

/* The model the context runs (borrowed). */
const struct fx_model *context_model(const struct fx_context *c);

#endif
