/* A Hugging Face tokenizer.json as llama.cpp's tokenizer.ggml.* keys
 * (io/hf_vocab.c), for the GGUF view of a checkpoint directory. */
#ifndef FX_IO_HF_VOCAB_H
#define FX_IO_HF_VOCAB_H

#include <cJSON.h>

#include "io/gguf.h"

/* Add to g the tokenizer keys llama.cpp's convert_hf_to_gguf.py writes for
 * dir/tokenizer.json (+ tokenizer_config.json, special_tokens_map.json,
 * chat_template.jinja): tokenizer.ggml.model ("gpt2": byte-level BPE;
 * "llama": SentencePiece-style BPE; "bert": WordPiece, tokens respelled
 * with llama.cpp's phantom spaces), tokens, scores ("llama"), token_type,
 * merges ("gpt2"), pre ("gpt2": llama.cpp's name for the pre-tokenizer,
 * recognised from its regexes; "bert": "default"), bos/eos/unk/pad ids
 * (+ sep/cls/mask and the normalizer flags for "bert"), add_bos_token /
 * add_eos_token (as gguf-py's SpecialVocab: the post-processor's where it
 * decides, tokenizer_config.json's otherwise), add_space_prefix
 * ("llama"), tokenizer.chat_template.
 * cfg: config.json (vocab_size pads the table with [PADi] as llama.cpp's
 * converter does); borrowed. No tokenizer.json: FX_OK, nothing added,
 * unless there is a tokenizer.model (FX_E_UNSUPPORTED: not mapped yet).
 * Errors: FX_E_NOMEM (keys added so far stay in g, freed with it),
 * FX_E_IO (unreadable file), FX_E_FORMAT (malformed JSON or a token table
 * with bad ids), FX_E_UNSUPPORTED (a tokenizer kind or pre-tokenizer
 * llama.cpp has no name for, or a Unigram model, llama.cpp's t5, which
 * ferrox's GGUF tokenizer does not run: the message names it). */
int hf_vocab_map(struct gguf_file *g, const char *dir, const cJSON *cfg, struct fx_err *err);

#endif
