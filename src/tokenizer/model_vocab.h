/* The bridge from a loaded model to its vocabulary, for the public
 * tokenizer wrappers in tokenizer/api.c. Implemented by src/model (the
 * model owns the vocab); declared here so the tokenizer does not include
 * model internals.
 */
#ifndef FX_TOKENIZER_MODEL_VOCAB_H
#define FX_TOKENIZER_MODEL_VOCAB_H

#include "ferrox.h"

struct vocab;

/* The vocabulary m was loaded with, or NULL when m is NULL or has none.
 * Borrowed: valid as long as m. */
const struct vocab *model_vocab(const struct fx_model *m);

#endif
