/* GGUF writer: a gguf_file (read from a file or built in memory, e.g. a
 * Hugging Face checkpoint mapped by io/hf.c) written out as a GGUF v3 file
 * that llama.cpp and ferrox load, optionally converting its weights.
 *
 * Follows the GGUF spec (ggml/docs/gguf.md) and, for which tensors are
 * converted and the general.file_type it records, llama.cpp's quantizer
 * (src/llama-quant.cpp, llama_model_quantize_impl).
 */
#ifndef FX_IO_GGUF_WRITE_H
#define FX_IO_GGUF_WRITE_H

#include "io/gguf.h"

/* Write g to path as GGUF v3 (little-endian, 32-byte alignment): every
 * metadata key of g in order (all value types, arrays of strings as in the
 * spec) except general.alignment, general.file_type and
 * general.quantization_version, which are rewritten; then the tensor infos
 * and the data, each tensor padded to the alignment.
 *
 * out_type -1 keeps every tensor's type (a byte-for-byte copy of its data).
 * Otherwise out_type is an enum fx_type with a from_float quantizer, and:
 *   - 2-D "*.weight" matrices become out_type, row by row (to_float, then
 *     from_float; only one row is held in memory). A matrix whose row length
 *     is not a multiple of the block size falls back as llama.cpp does:
 *     q4_K -> q5_0, q5_K -> q5_1, q6_K -> q8_0, q2_K/q3_K -> q4_0, then f16;
 *   - 1-D f16/bf16 tensors (norms, biases) become f32 (llama.cpp keeps
 *     vectors in f32);
 *   - everything else keeps its type.
 * general.file_type gets llama.cpp's LLAMA_FTYPE of the result (0 all f32,
 * 1 f16, 32 bf16, 7 q8_0, 2 q4_0, 3 q4_1, 8 q5_0, 9 q5_1, 14 q4_K, 16 q5_K,
 * 18 q6_K, ...) and quantized results general.quantization_version = 2.
 *
 * The file is written to "<path>.tmp", synced, and renamed onto path, so a
 * failure never leaves a partial file at path (the .tmp is removed).
 * Errors: FX_E_INVALID (out_type unknown or without a quantizer, a tensor
 * name longer than llama.cpp's 63 bytes), FX_E_UNSUPPORTED (a tensor that
 * cannot be converted, a nested array value), FX_E_IO (cannot create, write
 * or rename: the message names the file and the system's reason, e.g. "No
 * space left on device"), FX_E_NOMEM. */
int gguf_write(const struct gguf_file *g, const char *path, int out_type, struct fx_err *err);

/* gguf_write with more choices: q4_k_m picks each matrix's type as
 * llama.cpp's Q4_K_M mix does (out_type must be q4_K; n_layer is the
 * model's block count); vocab, when not NULL, replaces g's tokenizer.*
 * keys with its own (a tokenizer for a checkpoint that has none). */
struct gguf_write_opts {
	int out_type;
	bool q4_k_m;
	int n_layer;
	const struct gguf_file *vocab;
};
int gguf_write_opts(const struct gguf_file *g, const char *path, const struct gguf_write_opts *opt,
		    struct fx_err *err);

/* fx_convert (ferrox.h), with the HF families a source directory may be
 * (reg, borrowed; model/arch's arch_hf): io cannot see the registry. */
struct hf_registry;
int gguf_convert(const char *src, const struct hf_registry *reg, const char *dst,
		 const char *type_name, const char *vocab_from, struct fx_err *err);

#endif
