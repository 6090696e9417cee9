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

/* For src/engine/state.c, which saves and loads a sequence through the
 * context's KV backing: whether s is a live sequence, the backing, the
 * context's error (fx_context_errmsg reads it), the ubatch size, whether
 * s's rows were moved by fx_seq_shift, and whether it is an MTP context. */
bool context_seq_ok(const struct fx_context *c, fx_seq s);
struct kv_backing *context_kv(struct fx_context *c);
struct fx_err *context_err(struct fx_context *c);
uint32_t context_n_ubatch(const struct fx_context *c);
bool context_seq_shifted(const struct fx_context *c, fx_seq s);
bool context_is_mtp(const struct fx_context *c);
/* fx_batch_decode computing every row: no prefix-cache reuse, so every
 * row has its hidden state (fx_embed). Same errors. */
int context_batch_all(struct fx_context *c, const struct fx_batch *b, int *seq_status);

/* The context keeps final hidden rows (hidden = true) and is not an MTP
 * draft context. */
bool context_keeps_hidden(const struct fx_context *c);

/* Empty live sequence s (its rows released; it stays alive); no-op for a
 * sequence that does not exist. */
void context_seq_empty(struct fx_context *c, fx_seq s);

#endif
