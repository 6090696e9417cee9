/* Vocabulary and tokenizers read from GGUF metadata (tokenizer.ggml.*),
 * or from a Hugging Face tokenizer.json (vocab_load_hf; hf_impl.h).
 *
 * GGUF: two models, "llama" (SentencePiece BPE over scores, byte fallback
 * <0xNN>, U+2581 for spaces) and "gpt2" (byte-level BPE over merges, with
 * the pre-tokenizer regex chosen by tokenizer.ggml.pre, run with PCRE2).
 * Behaviour follows llama.cpp's llama-vocab.cpp, the parity oracle.
 */
#ifndef FX_TOKENIZER_VOCAB_H
#define FX_TOKENIZER_VOCAB_H

#include <stdbool.h>
#include <stddef.h>

#include "ferrox.h"
#include "io/gguf.h"

struct vocab;

/* Build the vocabulary from g's tokenizer.ggml.* keys. Borrows g (token
 * strings may point into its mapping): g must outlive the vocab.
 * Errors: FX_E_FORMAT (missing/inconsistent keys), FX_E_UNSUPPORTED
 * (tokenizer model or pre-tokenizer ferrox does not know, named), FX_E_NOMEM. */
int vocab_load(const struct gguf_file *g, struct vocab **out, struct fx_err *err);
void vocab_free(struct vocab *v);
/* Build the vocabulary from a Hugging Face tokenizer directory: dir/
 * tokenizer.json (tokenizers' format; hf_impl.h says how it runs), with
 * bos/eos from tokenizer_config.json or special_tokens_map.json and the
 * end-of-generation ids from generation_config.json. *out is NULL (and
 * FX_OK) when dir has no tokenizer.json. Without one, GPT-2-style
 * vocab.json + merges.txt are read as transformers converts them
 * (hf_legacy.c). Errors: FX_E_FORMAT (malformed
 * JSON or tokenizer, named), FX_E_UNSUPPORTED (a component or option
 * ferrox does not implement, named), FX_E_IO, FX_E_NOMEM. */
int vocab_load_hf(const char *dir, struct vocab **out, struct fx_err *err);
/* Was v read from tokenizer.json (ids may stop short of the model's
 * embedding rows, which checkpoints pad)? */
bool vocab_is_hf(const struct vocab *v);

int32_t vocab_n_tokens(const struct vocab *v);
fx_token vocab_bos(const struct vocab *v);
fx_token vocab_eos(const struct vocab *v);
bool vocab_add_bos(const struct vocab *v);
bool vocab_is_eog(const struct vocab *v, fx_token t);
const char *vocab_kind(const struct vocab *v); /* "llama (SentencePiece)", ... */

/* Same contracts as fx_tokenize / fx_token_to_piece / fx_detok_* in ferrox.h. */
int vocab_tokenize(const struct vocab *v, const char *text, size_t len,
		   bool add_special, bool parse_special, fx_token *out, size_t cap,
		   size_t *n_out);
/* fx_tokenize_prompt's contract: specials matched outside p's data spans
 * only. FX_E_INVALID also for spans out of order or past the text. */
int vocab_tokenize_prompt(const struct vocab *v, const struct fx_chat_prompt *p, bool add_special,
			  fx_token *out, size_t cap, size_t *n_out);
int vocab_token_to_piece(const struct vocab *v, fx_token t, bool special,
			 char *buf, size_t cap, size_t *n_out);
int vocab_detok_push(const struct vocab *v, struct fx_detok *st, fx_token t,
		     bool special, char *out, size_t cap, size_t *n_out);

#endif
