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

/* fx_batch_decode computing every row: no prefix-cache reuse, so every
 * row has its hidden state (fx_embed). Same errors. */
int context_batch_all(struct fx_context *c, const struct fx_batch *b, int *seq_status);

/* The context keeps final hidden rows (hidden = true) and is not an MTP
 * draft context. */
bool context_keeps_hidden(const struct fx_context *c);

/* The context's error record, for fx_fail from other engine files. */
struct fx_err *context_err(struct fx_context *c);

/* s is a live sequence of c. */
bool context_seq_exists(const struct fx_context *c, fx_seq s);

/* Empty live sequence s (its rows released; it stays alive); no-op for a
 * sequence that does not exist. */
void context_seq_empty(struct fx_context *c, fx_seq s);

#endif
